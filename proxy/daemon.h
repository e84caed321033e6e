/*
 * daemon.h: sluiced's process context and its sessions registry.
 *
 * One context (struct px px, defined in daemon.c) holds what the whole
 * process shares: the event base, the running configuration and policy,
 * the policy state, the connection log, the resolver, the sessions and
 * their listeners, and the drain flag.  Each part is written by its
 * owner: main.c swaps cfg/pol/log/dns on reload, session.c keeps the
 * sessions and listeners, fwctl.c the firewall status.  The relay's own
 * state (connections, counters) lives in proxy/relay/ (relay.h).
 *
 * Used by proxy/relay/, proxy/control/, and the files at proxy/'s top;
 * never by proxy/lib/.
 */
#ifndef SLUICE_DAEMON_H
#define SLUICE_DAEMON_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "policy/policy.h"
#include "proxy/lib/config.h"
#include "proxy/lib/clog.h"
#include "proxy/lib/dns.h"
#include "proxy/lib/log.h"
#include "proxy/lib/usock.h"
#include "proxy/lib/util.h"

/* PX_T_TRANSPARENT: the firewall's redirect; its sessions are the TCP
 * ones (by source address), so no session has this transport. */
enum px_transport { PX_T_UNIX, PX_T_TCP, PX_T_VSOCK, PX_T_TRANSPARENT };

struct px_conn;        /* the relay's (proxy/relay/relay-int.h) */
struct px_listener;

/*
 * Refusal records of one session (or of connections with no session):
 * a token bucket (log.refusals_per_s, log.refusal_burst), and what was
 * folded into the next "refusals_folded" record (the relay's, records.c).
 */
struct px_refusals {
	double tokens;
	uint64_t refilled_ms;            /* 0: never used (the bucket is full) */
	uint64_t folded;                 /* records not written since the last
	                                    refusals_folded */
	uint32_t reasons[POL_R__COUNT];  /* of those, by reason */
	time_t since;                    /* the first of them */
	uint64_t summary_ms;             /* the last refusals_folded */
};

/* A session as the daemon sees it: the policy object plus its transport. */
struct px_session {
	struct pol_session *pol;         /* owned by px.state */
	enum px_transport transport;
	char *socket_path;               /* PX_T_UNIX, as given */
	char *socket_canon;              /* the same, canonical (usock.h) */
	struct pol_addr source;          /* PX_T_TCP */
	int64_t vsock_cid;               /* PX_T_VSOCK */
	int from_config;
	struct px_listener *listener;    /* PX_T_UNIX only */
	int nconns;
	uint64_t n_allowed, n_denied;    /* decisions, for metrics */
	uint64_t bytes_up, bytes_down;
	struct px_refusals refusals;     /* the relay's */
	TAILQ_HEAD(, px_conn) conns;     /* the relay's list */
	TAILQ_ENTRY(px_session) entry;
};

struct px_listener {
	enum px_transport kind;
	struct evconnlistener *evl;
	char *path;                      /* unix: canonical */
	struct usock_id sock;            /* unix: the file made */
	char *spec;                      /* tcp "addr:port" */
	struct px_session *session;      /* unix: the session it serves */
	TAILQ_ENTRY(px_listener) entry;
};

/* The firewall table's state, for /v1/health (written by fwctl.c). */
enum px_fw_status { PX_FW_DISABLED, PX_FW_APPLIED, PX_FW_FAILED };
struct px_fw {
	enum px_fw_status status;
	char table[64];          /* "inet NAME" */
	time_t applied_at;       /* 0: never applied by this process */
	char error[640];         /* the last failure; "" when none */
};

/* The daemon. */
struct px {
	struct event_base *base;
	struct cfg *cfg;
	struct pol_config *pol;
	struct pol_state *state;
	struct clog *log;
	struct dns *dns;
	TAILQ_HEAD(, px_session) sessions;
	TAILQ_HEAD(, px_listener) listeners;
	int draining;
	struct event *drain_ev;
	struct event *accept_pause_ev;   /* EMFILE back-off */
	int accept_paused;
	time_t started;
	struct px_fw fw;
};
extern struct px px;

/* session.c: the one sessions registry (and the listeners). */
struct px_session *px_session_find(const char *id);

/* Who asks for a session; where its socket may go follows (sluiced(8),
 * "Session sockets"). */
enum px_origin {
	PX_ORIGIN_FILE,     /* the configuration file: any path */
	PX_ORIGIN_ADMIN,    /* the admin role, and the state file (what the
	                       API made): also under listen.socket_prefixes */
	PX_ORIGIN_APP,      /* the app role: <runtime_dir>/sessions/<id>/ */
};
/* Why px_session_create refused (the API's 400, 403, 409, 500). */
enum px_refusal {
	PX_REF_BAD, PX_REF_FORBIDDEN, PX_REF_TAKEN, PX_REF_INTERNAL
};
/* A session, its socket listening before it returns; NULL with why
 * (may be NULL) and a message in err. */
struct px_session *px_session_create(const struct cfg_session *cs,
    enum px_origin origin, enum px_refusal *why, char *err, size_t errlen);
void px_session_destroy(struct px_session *s, enum pol_reason why);
/* Another session already uses cs's TCP source or vsock CID (a socket
 * path is px_session_create's to check). */
int px_session_transport_taken(const struct cfg_session *cs);
/* Bring the file's sessions in line with px.cfg: new ones created,
 * missing or changed ones destroyed, tiers applied.  -1 if a new one
 * could not be created (logged). */
int px_sessions_sync_config(void);
int px_listeners_sync(void);            /* TCP and vsock listeners per cfg */
void px_listener_free(struct px_listener *l);
/* Close every listener (draining: new clients are refused at once). */
void px_listeners_close(void);

#endif /* SLUICE_DAEMON_H */
