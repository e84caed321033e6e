/*
 * relay-int.h: the data plane's private contract, for the files of
 * proxy/relay/ only (relay.h is what the rest of sluiced may call).
 *
 * conn.c      one client connection: head, decision, refusal, close
 * upstream.c  resolve, check every address, dial the checked ones
 * tunnel.c    CONNECT relay (backpressure, half-close, SNI check)
 * splice.c    tunnels relayed by splice(2)
 * forward.c   absolute-form http:// exchanges on keep-alive connections
 * transparent.c  redirected connections: original destination, SNI
 * prompt.c    prompts that hold connections until the user answers
 * records.c   the connection log's records of connections
 * inspect.c   TLS inspection: both TLS legs of an inspected CONNECT
 * rules.c     request rules on the requests sluice reads
 * creds.c     credential placeholders in forwarded requests
 *
 * Every connection ends in px_conn_close(), which logs why.
 */
#ifndef SLUICE_RELAY_INT_H
#define SLUICE_RELAY_INT_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/event.h>
#include <event2/bufferevent.h>
#include <event2/buffer.h>

#include "policy/policy.h"
#include "proxy/daemon.h"
#include "proxy/relay/relay.h"
#include "proxy/lib/sni.h"
#include "proxy/lib/http.h"

struct px_splice;
struct px_prompt;

/* Set by px_relay_set_hooks. */
extern struct relay_hooks px_hooks;

/* conn.c */
enum px_state {
	PX_S_HEAD,          /* reading a request head */
	PX_S_RESOLVE,
	PX_S_CONNECT,
	PX_S_SNI,           /* 200 sent, waiting for the ClientHello */
	PX_S_TUNNEL,
	PX_S_FWD,           /* plain HTTP exchange in progress */
	PX_S_FLUSH,         /* writing a final answer, then close */
	PX_S_PROMPT,        /* held until the user answers */
};

struct px_conn {
	uint64_t id;
	struct px_session *session;      /* NULL: unknown identity */
	enum px_transport transport;
	char peer[128];                  /* transport text for the log */
	enum pol_reason close_why;       /* for a close after a flush */
	struct bufferevent *cli;
	struct bufferevent *up;
	enum px_state state;
	struct event *timer;             /* head deadline, SNI wait, idle */
	struct timespec t_start;         /* of the current request/tunnel */
	uint64_t last_active_ms;         /* loop time of the last byte */
	int head_armed;                  /* timer holds the head deadline */

	/* the current request */
	char *head;                      /* copy of the request head */
	size_t head_len;
	struct http_parse_state req_ps;  /* how far the head was checked */
	struct http_msg *req;            /* NULL once a tunnel relays */
	struct pol_target target;
	const char *path; size_t path_len; /* origin-form part (plain HTTP) */
	struct pol_decision dec;
	char method[24];
	struct dns_query *dnsq;
	struct pol_addr addrs[DNS_MAX_ADDRS];  /* every resolved address */
	size_t naddrs;
	struct pol_addr checked[DNS_MAX_ADDRS];/* those admitted */
	size_t nchecked, next_try;
	int dialed_idx;                  /* into checked[], -1 none */
	enum pol_reason last_fail;
	int logged_decision;             /* allow record written */
	char sni[256];

	/* transparent mode: where the client sent it (conntrack) */
	int tp_tls;                      /* the TLS path: no HTTP answers */
	struct pol_addr tp_dst;
	uint16_t tp_port;                /* 0: not a redirected connection */

	/* TLS inspection (inspect.c) */
	int inspect;                     /* this CONNECT's host is inspected */
	int cli_tls;                     /* c->cli is the terminated TLS: its
	                                  * requests are origin-form */
	int up_tls;                      /* c->up is the verified TLS */
	struct pol_target insp;          /* the inspected CONNECT's target */
	int insp_answered;               /* the CONNECT was allowed by */
	enum pol_answer insp_answer;     /* this prompt answer */

	/* request rules (rules.c), of the current request */
	char rule[POL_RULE_NAME_MAX + 1];/* the rule that matched, "" none */
	int rule_held;                   /* it waits on that rule's prompt */
	int rule_done;                   /* the rules let it through */
	/* credentials (creds.c), of the current request */
	char cred[POL_ID_MAX + 1];       /* the one put in, "" none */
	int cred_removed;                /* placeholders removed */

	/* upstream reuse for plain HTTP */
	char up_host[POL_HOST_MAX + 1];
	uint16_t up_port;

	/* plain HTTP exchange */
	struct http_body_state req_body;
	struct http_body_state resp_body;
	struct http_parse_state resp_ps; /* of the response head being read */
	int resp_interim;                /* 1xx answers to this request */
	int resp_head_done;
	int fwd_close_after;             /* close the client after this exchange */
	int nrequests;
	int log_wait;                    /* head queued, allow record not yet
	                                  * written (px_forward_log_written) */
	TAILQ_ENTRY(px_conn) lwentry;
	int nrefused;                    /* refusals answered on it */

	/* tunnel half-close */
	int cli_eof, up_eof;
	int cli_shut, up_shut;
	struct px_splice *spl;           /* a tunnel relayed by splice(2) */
	struct px_prompt *prompt;        /* the prompt it waits on */
	TAILQ_ENTRY(px_conn) pentry;     /* prompt->waiters */
	char prompt_id[20];              /* the prompt that decided it */
	int answered;                    /* answer holds that prompt's */
	enum pol_answer answer;

	uint64_t bytes_up, bytes_down;   /* this request / tunnel */
	/* closed: px_conn_close ran.  Everything it owned is released and
	 * it is on no list but the reaper's; the struct itself is freed
	 * when the loop's pass ends, so a caller further up the stack that
	 * called something which closed it reads a valid struct and sees
	 * this flag (PX_GONE) instead of freed memory. */
	int closed;
	TAILQ_ENTRY(px_conn) entry;      /* every connection (conn.c); the
	                                  * reaper's list once closed */
	TAILQ_ENTRY(px_conn) sentry;     /* session->conns */
};

/* The one way out: logs why, cancels everything that could call back
 * into c (the DNS query, both bufferevents, the timer, the prompt, the
 * splice events) and hands the struct to the reaper.  A second call is
 * a no-op. */
void px_conn_close(struct px_conn *c, enum pol_reason why);
/* Was c closed by what the caller just called?  Every function that
 * goes on using c after a call that may close it asks this first. */
#define PX_GONE(c) ((c)->closed)
/* Peek at the TLS ClientHello buffered from c's client, leaving it for
 * upstream (sni.h statuses; SNI_INCOMPLETE while more may come, and a
 * hello past SNI_MAX_HELLO is SNI_NOT_TLS).  NAME gets the SNI.  A hello
 * that hides its name (ECH, ESNI) is SNI_ECH unless tls.allow_ech, with
 * which it is judged by its outer name (SNI_OK or SNI_NONE). */
enum sni_status px_sni_peek(struct px_conn *c, char *name, size_t namelen);
/* Decide c->target for session s into c->dec: a deny is refused, a
 * prompt holds the connection (px_prompt_request); 1 only for an allow,
 * which the caller carries on with. */
int px_conn_decide(struct px_conn *c, struct px_session *s);
/* Before a decision: a connection with no session, or one that comes
 * while sluiced drains, is refused here; 1 when it may be decided. */
int px_conn_admissible(struct px_conn *c, const struct px_session *s);
/* Answer a refusal (status, X-Sluice-Reason, one-line body), log the
 * decision, and close or keep the connection as the request allows. */
void px_conn_refuse(struct px_conn *c, enum pol_reason why,
    const char *detail);
/* The same answer; log 0 when a record for this request already says
 * why (an upstream that failed after the allow record). */
void px_conn_answer(struct px_conn *c, enum pol_reason why,
    const char *detail, int log);
/* Write what bev has queued at once; what the socket does not take is
 * left to libevent (EV_WRITE on).  1 when nothing is left queued. */
int px_out_flush(struct bufferevent *bev);
/* Flush what is queued to the client, then close for why. */
void px_conn_flush_close(struct px_conn *c, enum pol_reason why);
/* The request was allowed (the host's decision): its request rules,
 * then upstream (a kept connection to the same origin, or a new dial). */
void px_conn_proceed(struct px_conn *c);
/* Back to reading the next request head on a keep-alive connection. */
void px_conn_next_request(struct px_conn *c);
/* Write the allow record; -1 means refuse (fail closed). */
int px_conn_log_allow(struct px_conn *c) SLUICE_MUSTCHECK;
void px_conn_log_close(struct px_conn *c, enum pol_reason why);
void px_conn_touch(struct px_conn *c);
long px_elapsed_ms(const struct timespec *since);

/* Count a decision (also per session). */
void px_count_decision(struct px_conn *c, enum pol_verdict v,
    enum pol_reason why);
void px_count_dns(long elapsed_us);

/* records.c: one builder per record type; each writes the record and
 * returns clog_write's result. */
/* The decision on c's request or tunnel, with verdict v and reason why
 * (the same fields for a forwarded request and a tunnel). */
int px_rec_decision(struct px_conn *c, enum pol_verdict v,
    enum pol_reason why) SLUICE_MUSTCHECK;
/* The allow record of c's request, queued: it is written at the end of
 * the loop's pass with the others queued, and px_forward_log_written()
 * says whether it reached the file (0).  1: it was written at once;
 * -1: it cannot be built or written. */
int px_rec_allow_queued(struct px_conn *c) SLUICE_MUSTCHECK;
/* The close of c's request or tunnel. */
int px_rec_close(struct px_conn *c, enum pol_reason why) SLUICE_MUSTCHECK;

/* upstream.c */
void px_upstream_start(struct px_conn *c);
void px_upstream_cancel(struct px_conn *c);
/* Close and forget c's upstream connection (the kept one included): the
 * one teardown of c->up, whatever the state. */
void px_upstream_drop(struct px_conn *c);

/* tunnel.c */
void px_tunnel_established(struct px_conn *c);
/* Relay bytes both ways (splice(2) where it can). */
void px_tunnel_relay(struct px_conn *c);

/* prompt.c */
/* Hold c on the prompt for its target (joining a pending one or
 * raising a new one), or refuse it. */
void px_prompt_request(struct px_conn *c);
/* c goes away while waiting: it withdraws from its prompt. */
void px_prompt_leave(struct px_conn *c);

/* splice.c */
int px_splice_start(struct px_conn *c) SLUICE_MUSTCHECK;
void px_splice_free(struct px_splice *s);

/* forward.c */
void px_forward_start(struct px_conn *c);
/* The queued records were written (ok) or not: requests whose allow
 * record was among them go upstream, or are refused (fail closed). */
void px_forward_log_written(int ok);
/* c's upstream goes away: it no longer waits for its allow record. */
void px_forward_unwait(struct px_conn *c);

/* transparent.c */
/* The original destination of a redirected connection, at accept:
 * POL_R_NONE or the refusal. */
enum pol_reason px_tp_setup(struct px_conn *c, int fd);
/* TLS: wait for the ClientHello, decide on its SNI. */
void px_tp_tls_start(struct px_conn *c);
/* TLS: connected upstream; log the allow and relay. */
void px_tp_tls_established(struct px_conn *c);

/* inspect.c */
/* 1 when CONNECTs to t are inspected (inspect.hosts). */
int px_inspect_host(const struct pol_target *t);
/* c's upstream is connected: TLS on it, verified for c->target; then
 * px_tunnel_established (a CONNECT) or px_forward_start (a request
 * inside), or 502 upstream_tls. */
void px_inspect_upstream(struct px_conn *c);
/* The 200 left: terminate the client's TLS with the leaf for
 * c->target; its requests are then read by conn.c.  -1: c was closed. */
int px_inspect_client(struct px_conn *c);

/* rules.c */
/* c's request against the request rules: 1 to go on; 0 when it was
 * refused (rule_denied) or is held on a rule's prompt (c may be gone). */
int px_rules_check(struct px_conn *c);
/* allow_chat on a rule's prompt: the rule lets the chat's requests go
 * on without asking; forgotten with the session (NULL: every one). */
void px_rules_grant(struct px_session *s, const char *name);
void px_rules_forget(struct px_session *s);

/* creds.c */
/* Which headers of c's request carry a placeholder (drop[i] = 1, for
 * c->req->nheaders) and, when one may go in, the header line that puts
 * its value in (returned, *linelen bytes, no NUL; the caller wipes and
 * frees it); NULL when none.  Sets c->cred and c->cred_removed. */
char *px_creds_plan(struct px_conn *c, unsigned char *drop,
    size_t *linelen);

#endif /* SLUICE_RELAY_INT_H */
