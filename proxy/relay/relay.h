/*
 * relay.h: what the rest of sluiced may ask of the data plane.
 *
 * proxy/relay/ is one connection's state machine (head, decide, resolve,
 * dial, tunnel, splice, forward, transparent) and the prompts that hold
 * connections.  Its files call each other freely; everything else calls
 * it only through this header, and it reaches the control plane only
 * through the hooks that main.c installs at start (struct relay_hooks):
 * the relay never names proxy/control/.
 *
 * Every connection ends in one close function that writes the close
 * record and says why (relay-int.h, px_conn_close).
 */
#ifndef SLUICE_RELAY_H
#define SLUICE_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <event2/util.h>

#include "policy/policy.h"
#include "proxy/daemon.h"

/* A credential (POST /v1/credentials) as the relay uses it, valid for
 * the time of the call that found it. */
struct relay_cred {
	const char *name, *tenant;
	const struct pol_hostset *hosts;
	const char *header;                  /* inject.header */
	const char *format;                  /* inject.format: one "{}", or
	                                      * "Basic" (value user:password) */
	const char *const *methods; size_t nmethods;   /* none: any */
	const char *const *paths; size_t npaths;       /* globs; none: any */
	const char *value;
};
/* "sluice-cred:<name>:<secret>", secret PX_CRED_SECRET_LEN hex digits */
#define PX_CRED_PREFIX "sluice-cred:"
#define PX_CRED_SECRET_LEN 32
/* the user-pass of a client's Basic header is looked into up to this */
#define PX_CRED_BASIC_MAX 4096

/* ------------------------------------------------------------------ */
/* Hooks: the relay's events, for the control plane.  Every member may be
 * NULL (nothing listens).  JSON arguments are jansson json_t *. */
struct relay_hooks {
	/* A request was refused (the app hears of refusals as they
	 * happen); cheap to skip: called only with a session. */
	void (*denied)(const char *session, const char *host, int port,
	    const char *method, enum pol_reason why);
	/* How many approvers could answer a prompt now (event-stream
	 * subscribers with the app or admin role, and the webhook). */
	size_t (*approvers)(void);
	/* A prompt was raised: prompt is its JSON (reference stolen). */
	void (*prompt_raised)(const char *id, void *prompt);
	/* A prompt was answered or expired: resolved is the JSON of the
	 * "prompt_resolved" event (reference stolen). */
	void (*prompt_done)(const char *id, void *resolved);
	/* The credential of placeholder name:secret (the secret compared
	 * in constant time), or NULL: secret is the credential's, or the
	 * one of session (cred_session_secret; session NULL: none). */
	const struct relay_cred *(*cred_find)(const char *name,
	    const char *secret, const char *session);
};
/* Copied; call once at start, before any connection. */
void px_relay_set_hooks(const struct relay_hooks *h);

/* ------------------------------------------------------------------ */
/* Counters, for /v1/metrics. */

/* DNS latency histogram bounds, in microseconds. */
#define PX_DNS_BUCKETS 9
extern const long px_dns_bucket_us[PX_DNS_BUCKETS];

struct relay_counters {
	uint64_t decisions[3][POL_R__COUNT];  /* [verdict][reason] */
	uint64_t closes[POL_R__COUNT];
	uint64_t bytes_up, bytes_down;
	uint64_t accepted;
	uint64_t dns[PX_DNS_BUCKETS + 1];     /* last: +Inf */
	uint64_t dns_count;
	double dns_sum_s;
	uint64_t prompts_raised;
	uint64_t prompts_answered[5];         /* allow_once, allow_chat, deny,
	                                         timeout, by policy change */
	double prompt_latency_sum_s;
	uint64_t prompt_latency_count;
};
extern struct relay_counters px_counters;

/* ------------------------------------------------------------------ */
/* Connections. */

/* A connection accepted on a listener of transport t, for session s
 * (NULL: identity unknown, refused with session_unknown). */
void px_conn_accept(evutil_socket_t fd, const struct sockaddr *sa,
    int salen, enum px_transport t, struct px_session *s);

/* Walkers. */
int px_relay_nconns(void);
int px_relay_count_tunnels(void);
/* Decide every open tunnel and exchange (of only, or of every session)
 * again; close those no longer allowed with ceiling_lowered.  Returns how
 * many were closed. */
size_t px_relay_close_exceeding(struct px_session *only);
/* Close every connection of s. */
void px_relay_close_session(struct px_session *s, enum pol_reason why);
/* Close every connection (the drain deadline). */
void px_relay_close_all(enum pol_reason why);
/* Close the connections with nothing to drain: idle keep-alive ones
 * waiting for a head with no byte of one read. */
void px_relay_close_idle(enum pol_reason why);
/* Swap the resolver: queries in flight restart on nd; the old one is
 * freed. */
void px_relay_dns_swap(struct dns *nd);
/* Draining: the loop ends once the last connection is closed. */
void px_relay_drain_check(void);
/* At exit: free the closed connections not yet reaped (closes free a
 * connection at the end of the loop's pass, see px_conn_close). */
void px_relay_reap(void);
/* At exit: the splice pipes kept for reuse. */
void px_splice_cleanup(void);
/* At exit: the connection log's flush event (what it would have written
 * is written by clog_close). */
void px_rec_cleanup(void);
/* Write the refusals_folded record of s now (a session going away), or
 * with s NULL of every session and of connections with none (stopping).
 * See records.c. */
void px_refusals_flush(struct px_session *s);
/* Refusal records folded since start, for /v1/metrics. */
extern uint64_t px_refusals_folded_total;

/* ------------------------------------------------------------------ */
/* Prompts (DESIGN.md "Prompts"). */

/* Policy changed (ceiling, tier, grant): pending prompts of only (or
 * every session) are decided again. */
void px_prompts_recheck(struct px_session *only);
/* The chat's tier went down: its prompts end as denied with why. */
void px_prompts_deny_session(struct px_session *s, enum pol_reason why);
/* The session is going: its prompts end as denied and forget it. */
void px_prompts_session_gone(struct px_session *s, enum pol_reason why);
/* Shutting down: every pending prompt ends as denied. */
void px_prompts_shutdown(void);
size_t px_prompts_pending(void);

/* What the control plane needs to know of a prompt before answering. */
enum px_prompt_state { PX_PROMPT_NONE, PX_PROMPT_PENDING, PX_PROMPT_DONE };
struct px_prompt_view {
	char session[POL_ID_MAX + 1];
	char host[POL_HOST_MAX + 1];
	uint16_t port;
	int session_alive;               /* the session still exists */
	enum pol_answer answer;          /* PX_PROMPT_DONE */
};
enum px_prompt_state px_prompt_lookup(const char *id,
    struct px_prompt_view *out);
/* Answer a pending prompt: the waiters go on (allow) or are refused
 * with user_denied.  by: who answered, for the record.  0, or -1 when
 * id is not pending. */
int px_prompt_resolve(const char *id, enum pol_answer ans, const char *by);
/* JSON (jansson json_t *, new reference): {"prompts": [...]} of the
 * pending ones; one prompt by id (pending or recently answered) or NULL. */
void *px_prompts_json(void);
void *px_prompt_json(const char *id);

/* ------------------------------------------------------------------ */
/* TLS inspection (inspect.c; sluiced(8), TLS INSPECTION). */

/* Once at start, with inspect.hosts not empty: ca_fd is the CA helper's
 * socket (priv_ca_spawn), ca_pem its certificate.  The hosts, the
 * upstream trust and the cache size are read from c now and kept: the
 * inspect keys take effect at a start.  0 / -1 with err. */
int px_inspect_init(const struct cfg *c, int ca_fd, const char *ca_pem,
    char *err, size_t errlen) SLUICE_MUSTCHECK;
/* At exit. */
void px_inspect_cleanup(void);
/* 1 when every host of pattern ("name" or "*.suffix", an optional
 * ":port") is inspected (inspect.hosts as read at start). */
int px_inspect_covers(const char *pattern);
/* The inspection CA's certificate as PEM; NULL when inspection is off. */
const char *px_inspect_ca_pem(void);

#endif /* SLUICE_RELAY_H */
