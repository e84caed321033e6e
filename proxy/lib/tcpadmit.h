/*
 * tcpadmit.h: who may stay on an API's TCP listener, before any token.
 *
 * Both daemons' APIs listen on TCP (sluiced's control.tcp, sluice-execd's
 * tcp.listen) to anyone who can reach them, through evhttp, which has no
 * per-connection limits.  This is the one set of caps both apply, so the
 * two cannot drift: in all (at the cap the listener stops accepting and
 * the kernel queues the rest), from one address (more are shut at once),
 * and descriptors (the listener accepts only while a reserve is left for
 * what the daemon itself must open; when accept(2) fails for want of
 * them it pauses until a look twice a second finds enough).
 *
 * A daemon embeds a struct tcpadmit_conn in each connection of its own,
 * makes its timer (its callback, its deadlines), and calls
 * tcpadmit_conn_add when evhttp asks for the connection's bufferevent
 * (before the descriptor is set), tcpadmit_conn_admit once it is,
 * tcpadmit_conn_remove when it is freed.  A connection is ended by
 * shutdown(2) of its descriptor (tcpadmit_conn_shut), which evhttp reads
 * as the peer gone and frees the connection itself: nothing here frees
 * anything of evhttp's.  What a connection may then send (heads,
 * deadlines, roles) is the daemon's.
 */
#ifndef SLUICE_TCPADMIT_H
#define SLUICE_TCPADMIT_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

struct event;
struct event_base;
struct evhttp_bound_socket;

/* The names the log says, so an admin finds the key to change. */
struct tcpadmit_names {
	const char *listener;           /* "control.tcp", "tcp" */
	const char *max_conns;          /* "control.max_conns" */
	const char *max_per_peer;       /* "control.max_conns_per_peer" */
	const char *fd_reserve;         /* "limits.fd_reserve" */
};

struct tcpadmit_conn {
	TAILQ_ENTRY(tcpadmit_conn) link;
	struct sockaddr_storage peer;   /* set by tcpadmit_conn_admit */
	struct event *timer;            /* the daemon's: admission, deadlines */
	int fd;                         /* -1 until admitted */
	int admitted;
	int shut;                       /* shutdown(2) done: evhttp ends it */
	const char *refuse;             /* why it may not stay, NULL: it may */
};
TAILQ_HEAD(tcpadmit_connq, tcpadmit_conn);

struct tcpadmit {
	struct event_base *base;
	struct evhttp_bound_socket *bound;      /* NULL: not listening */
	const struct tcpadmit_names *names;
	struct tcpadmit_connq conns;
	int nconns;
	long max_conns, max_per_peer, fd_reserve;
	int paused;                     /* the listener is disabled */
	int fd_short;                   /* too few descriptors, last look */
	struct event *fd_ev;            /* looks again while fd_short */
	int fd_credit;                  /* accepts the last look has room for */
	int64_t fd_ok_until;            /* ... until then (monotonic ms) */
	time_t refused_logged;          /* refusals logged once per 10 s */
	unsigned long refused;
};

void tcpadmit_init(struct tcpadmit *ta, struct event_base *base,
    const struct tcpadmit_names *names);
/* New caps (a reload): the listener pauses or resumes by them at once. */
void tcpadmit_set_limits(struct tcpadmit *ta, long max_conns,
    long max_per_peer, long fd_reserve);
/* The listener whose accepts are counted (NULL: none, as at a rebind). */
void tcpadmit_bind(struct tcpadmit *ta, struct evhttp_bound_socket *bound);
/* A connection accepted (its descriptor not yet set): counted, its
 * timer (made by the daemon) run at once to admit it. */
void tcpadmit_conn_add(struct tcpadmit *ta, struct tcpadmit_conn *k);
/* Its descriptor is set: may it stay?  0 yes, -1 it is shut (or has
 * no descriptor: nothing to serve). */
int tcpadmit_conn_admit(struct tcpadmit *ta, struct tcpadmit_conn *k,
    int fd) SLUICE_MUSTCHECK;
/* End it by shutdown(2); why is logged (once per 10 s, with a count). */
void tcpadmit_conn_shut(struct tcpadmit *ta, struct tcpadmit_conn *k,
    const char *why);
/* Its timer in ms from now. */
void tcpadmit_conn_arm(struct tcpadmit_conn *k, long ms);
/* It is being freed (evhttp's doing): no longer counted. */
void tcpadmit_conn_remove(struct tcpadmit *ta, struct tcpadmit_conn *k);
/* Stop: each connection still counted leaves the list and is given to
 * forget (may be NULL), the daemon's, which lets go of it (it may be
 * freed later, by evhttp, and must then find nothing of ours); then the
 * rest is dropped. */
void tcpadmit_stop(struct tcpadmit *ta,
    void (*forget)(struct tcpadmit_conn *k));

#endif /* SLUICE_TCPADMIT_H */
