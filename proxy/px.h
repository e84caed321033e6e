/*
 * px.h: sluiced's internal contract between its event-loop files.
 *
 * main.c      start-up, signals, reload, drain
 * listen.c    listeners (Unix per session, TCP by source, vsock by CID)
 * conn.c      one client connection: head, decision, refusal, close
 * upstream.c  resolve, check every address, dial the checked ones
 * tunnel.c    CONNECT relay (backpressure, half-close, SNI check)
 * forward.c   absolute-form http:// exchanges on keep-alive connections
 * transparent.c  redirected connections: original destination, SNI
 *
 * Every connection ends in px_conn_close(), which logs why.
 */
#ifndef SLUICE_PX_H
#define SLUICE_PX_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/event.h>
#include <event2/bufferevent.h>
#include <event2/buffer.h>
#include <event2/listener.h>

#include "policy.h"
#include "config.h"
#include "sni.h"
#include "clog.h"
#include "dns.h"
#include "http.h"

#define PX_NAME "sluiced"

/* glibc's sys/queue.h lacks the _SAFE walkers the BSDs have */
#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

/* diagnostics on stderr, systemd style; always "func: message" */
void px_log(int prio, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define PX_ERR 3
#define PX_WARN 4
#define PX_INFO 6
#define PX_DEBUG 7
extern int px_verbose;

/* PX_T_TRANSPARENT: the firewall's redirect; its sessions are the TCP
 * ones (by source address), so no session has this transport. */
enum px_transport { PX_T_UNIX, PX_T_TCP, PX_T_VSOCK, PX_T_TRANSPARENT };

struct px_conn;
struct px_listener;
struct px_splice;
struct px_prompt;

/* A session as the daemon sees it: the policy object plus its transport. */
struct px_session {
	struct pol_session *pol;         /* owned by px.state */
	enum px_transport transport;
	char *socket_path;               /* PX_T_UNIX */
	struct pol_addr source;          /* PX_T_TCP */
	int64_t vsock_cid;               /* PX_T_VSOCK */
	int from_config;
	struct px_listener *listener;    /* PX_T_UNIX only */
	int nconns;
	uint64_t n_allowed, n_denied;    /* decisions, for metrics */
	uint64_t bytes_up, bytes_down;
	TAILQ_HEAD(, px_conn) conns;
	TAILQ_ENTRY(px_session) entry;
};

struct px_listener {
	enum px_transport kind;
	struct evconnlistener *evl;
	char *path;                      /* unix */
	char *spec;                      /* tcp "addr:port" */
	struct px_session *session;      /* unix: the session it serves */
	TAILQ_ENTRY(px_listener) entry;
};

/* DNS latency histogram bounds, in microseconds. */
#define PX_DNS_BUCKETS 9
extern const long px_dns_bucket_us[PX_DNS_BUCKETS];

struct px_metrics {
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

/* The daemon. */
/* The firewall table's state, for /v1/health (main.c keeps the ruleset). */
enum px_fw_status { PX_FW_DISABLED, PX_FW_APPLIED, PX_FW_FAILED };
struct px_fw {
	enum px_fw_status status;
	char table[64];          /* "inet NAME" */
	time_t applied_at;       /* 0: never applied by this process */
	char error[640];         /* the last failure; "" when none */
};

struct px {
	struct event_base *base;
	struct cfg *cfg;
	struct pol_config *pol;
	struct pol_state *state;
	struct clog *log;
	struct dns *dns;
	TAILQ_HEAD(, px_session) sessions;
	TAILQ_HEAD(, px_listener) listeners;
	TAILQ_HEAD(, px_conn) conns;
	int nconns;
	int draining;
	struct event *drain_ev;
	struct event *accept_pause_ev;   /* EMFILE back-off */
	int accept_paused;
	time_t started;
	uint64_t next_conn_id;
	struct px_metrics m;
	struct px_fw fw;
};
extern struct px px;

/* listen.c */
int px_mkdir_p(const char *path, mode_t mode);
int px_listeners_sync(void);            /* TCP and vsock listeners per cfg */
int px_session_listen(struct px_session *s);
void px_listener_free(struct px_listener *l);
void px_listeners_enable(int on);
struct px_session *px_session_by_source(const struct pol_addr *a);
struct px_session *px_session_by_cid(int64_t cid);

/* sessions (main.c) */
struct px_session *px_session_create(const struct cfg_session *cs,
    int from_config, char *err, size_t errlen);
/* Count a decision (also per session). */
void px_count_decision(struct px_conn *c, enum pol_verdict v,
    enum pol_reason why);
void px_count_dns(long elapsed_us);
/* Re-apply ceilings the control API set (they win over the file's). */
void ctl_apply_api_ceilings(void);
void px_session_destroy(struct px_session *s, enum pol_reason why);

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

	/* tunnel half-close */
	int cli_eof, up_eof;
	int cli_shut, up_shut;
	struct px_splice *spl;           /* a tunnel relayed by splice(2) */
	struct px_prompt *prompt;        /* the prompt it waits on */
	TAILQ_ENTRY(px_conn) pentry;     /* prompt->waiters */
	char prompt_id[20];              /* the prompt that decided it */
	const char *prompt_answer;

	uint64_t bytes_up, bytes_down;   /* this request / tunnel */
	TAILQ_ENTRY(px_conn) entry;      /* px.conns */
	TAILQ_ENTRY(px_conn) sentry;     /* session->conns */
};

void px_conn_accept(evutil_socket_t fd, const struct sockaddr *sa,
    int salen, enum px_transport t, struct px_session *s);
void px_conn_close(struct px_conn *c, enum pol_reason why);
/* Peek at the TLS ClientHello buffered from c's client, leaving it for
 * upstream (sni.h statuses; SNI_INCOMPLETE while more may come, and a
 * hello past SNI_MAX_HELLO is SNI_NOT_TLS).  NAME gets the SNI. */
enum sni_status px_sni_peek(struct px_conn *c, char *name, size_t namelen);
/* Decide c->target for session s into c->dec: a deny is refused, a
 * prompt holds the connection (px_prompt_request); 1 only for an allow,
 * which the caller carries on with. */
int px_conn_decide(struct px_conn *c, struct px_session *s);
/* Answer a refusal (status, X-Sluice-Reason, one-line body), log the
 * decision, and close or keep the connection as the request allows. */
void px_conn_refuse(struct px_conn *c, enum pol_reason why,
    const char *detail);
/* The same answer; log 0 when a record for this request already says
 * why (an upstream that failed after the allow record). */
void px_conn_answer(struct px_conn *c, enum pol_reason why,
    const char *detail, int log);
/* Flush what is queued to the client, then close for why. */
void px_conn_flush_close(struct px_conn *c, enum pol_reason why);
/* Back to reading the next request head on a keep-alive connection. */
void px_conn_next_request(struct px_conn *c);
/* Write the allow record; -1 means refuse (fail closed). */
int px_conn_log_allow(struct px_conn *c);
void px_conn_log_close(struct px_conn *c, enum pol_reason why);
void px_conn_touch(struct px_conn *c);
long px_elapsed_ms(const struct timespec *since);
void px_conns_close_session(struct px_session *s, enum pol_reason why);
void px_drain_check(void);

/* upstream.c */
void px_upstream_start(struct px_conn *c);
void px_upstream_cancel(struct px_conn *c);

/* tunnel.c */
void px_tunnel_established(struct px_conn *c);
void px_relay_start(struct px_conn *c);

/* prompt.c */
void px_prompt_request(struct px_conn *c);
void px_prompt_leave(struct px_conn *c);
void px_prompts_recheck(struct px_session *only);
void px_prompts_session_gone(struct px_session *s, enum pol_reason why);
void px_prompts_deny_session(struct px_session *s, enum pol_reason why);
void px_prompts_shutdown(void);
size_t px_prompts_pending(void);

/* splice.c */
int px_splice_start(struct px_conn *c);
void px_splice_free(struct px_splice *s);
void px_splice_cleanup(void);

/* forward.c */
void px_forward_start(struct px_conn *c);

/* transparent.c */
/* The original destination of a redirected connection, at accept:
 * POL_R_NONE or the refusal. */
enum pol_reason px_tp_setup(struct px_conn *c, int fd);
/* TLS: wait for the ClientHello, decide on its SNI. */
void px_tp_tls_start(struct px_conn *c);
/* TLS: connected upstream; log the allow and relay. */
void px_tp_tls_established(struct px_conn *c);

#endif /* SLUICE_PX_H */
