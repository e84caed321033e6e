/*
 * tcpadmit.c: the caps of an API's TCP listener (tcpadmit.h).
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "proxy/lib/log.h"
#include "proxy/lib/peer.h"
#include "proxy/lib/tcpadmit.h"
#include "proxy/lib/util.h"

/* Spare descriptors to look for at once beyond the reserve: so many
 * accepts need no look of their own. */
#define FD_CREDIT       16
#define FD_LOOK_US      500000

/*
 * At least n descriptors are free: take them (duplicates of fd) and give
 * them back.  That is n system calls, so one look takes up to FD_CREDIT
 * more and lets that many accepts, in the next 100 ms, go without a
 * look (what the daemon opens meanwhile is not seen).
 */
static int
fds_free(struct tcpadmit *ta, int fd, long n)
{
	int *got, i, want;
	int64_t now = util_now_ms();

	if (n <= 0)
		return 1;
	if (ta->fd_credit > 0 && now < ta->fd_ok_until) {
		ta->fd_credit--;
		return 1;
	}
	ta->fd_credit = 0;
	want = (int)n + FD_CREDIT;
	if ((got = malloc((size_t)want * sizeof(*got))) == NULL)
		return 0;
	for (i = 0; i < want; i++)
		if ((got[i] = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
			break;
	ta->fd_credit = i - (int)n;
	while (i-- > 0)
		close(got[i]);
	free(got);
	if (ta->fd_credit < 0) {
		ta->fd_credit = 0;
		return 0;
	}
	ta->fd_ok_until = now + 100;
	return 1;
}

static struct evconnlistener *
listener(struct tcpadmit *ta)
{
	return ta->bound != NULL ?
	    evhttp_bound_socket_get_listener(ta->bound) : NULL;
}

/* Accept only below max_conns and with descriptors to spare. */
static void
gate(struct tcpadmit *ta)
{
	struct evconnlistener *l = listener(ta);
	int pause;

	if (l == NULL)
		return;
	pause = ta->nconns >= ta->max_conns || ta->fd_short;
	if (pause == ta->paused)
		return;
	if ((pause ? evconnlistener_disable(l) : evconnlistener_enable(l)) !=
	    0)
		return;
	ta->paused = pause;
	px_log(pause ? PX_INFO : PX_DEBUG, "%s: %s (%d connections, %s %ld%s%s"
	    "%s)", ta->names->listener, pause ? "accepting paused" :
	    "accepting again", ta->nconns, ta->names->max_conns,
	    ta->max_conns, ta->fd_short ? ", fewer than " : "",
	    ta->fd_short ? ta->names->fd_reserve : "",
	    ta->fd_short ? " descriptors free" : "");
}

static void
fd_look(evutil_socket_t fd, short what, void *arg)
{
	struct tcpadmit *ta = arg;
	struct timeval tv = { 0, FD_LOOK_US };
	struct evconnlistener *l = listener(ta);

	(void)fd;
	(void)what;
	if (l != NULL && fds_free(ta, evconnlistener_get_fd(l),
	    ta->fd_reserve + 1)) {
		ta->fd_short = 0;
		gate(ta);
		return;
	}
	evtimer_add(ta->fd_ev, &tv);
}

/* Too few descriptors: stop accepting until fd_look finds enough. */
static void
fd_shortage(struct tcpadmit *ta)
{
	struct timeval tv = { 0, FD_LOOK_US };

	if (ta->fd_short)
		return;
	ta->fd_short = 1;
	ta->fd_credit = 0;
	gate(ta);
	if (ta->fd_ev == NULL && (ta->fd_ev = evtimer_new(ta->base, fd_look,
	    ta)) == NULL) {
		ta->fd_short = 0;       /* cannot look again: do not pause */
		gate(ta);
		return;
	}
	evtimer_add(ta->fd_ev, &tv);
}

/* accept(2) failed; evhttp would retry at once, forever. */
static void
accept_error(struct evconnlistener *l, void *arg)
{
	struct tcpadmit *ta = arg;
	int e = EVUTIL_SOCKET_ERROR();

	(void)l;
	px_log(PX_ERR, "%s: accept: %s", ta->names->listener, strerror(e));
	fd_shortage(ta);
}

void
tcpadmit_init(struct tcpadmit *ta, struct event_base *base,
    const struct tcpadmit_names *names)
{
	memset(ta, 0, sizeof(*ta));
	ta->base = base;
	ta->names = names;
	TAILQ_INIT(&ta->conns);
}

void
tcpadmit_set_limits(struct tcpadmit *ta, long max_conns, long max_per_peer,
    long fd_reserve)
{
	ta->max_conns = max_conns;
	ta->max_per_peer = max_per_peer;
	ta->fd_reserve = fd_reserve;
	gate(ta);
}

void
tcpadmit_bind(struct tcpadmit *ta, struct evhttp_bound_socket *bound)
{
	struct evconnlistener *l;

	ta->bound = bound;
	ta->paused = 0;         /* a new listener accepts */
	if ((l = listener(ta)) != NULL)
		evconnlistener_set_error_cb(l, accept_error);
	gate(ta);
}

void
tcpadmit_conn_add(struct tcpadmit *ta, struct tcpadmit_conn *k)
{
	static const struct timeval now = { 0, 0 };
	struct evconnlistener *l = listener(ta);

	k->fd = -1;
	TAILQ_INSERT_TAIL(&ta->conns, k, link);
	ta->nconns++;
	/* its descriptor is taken already: look now, so that the accept
	 * loop stops here, not once the descriptors are gone */
	if (l != NULL && !fds_free(ta, evconnlistener_get_fd(l),
	    ta->fd_reserve)) {
		k->refuse = ta->names->fd_reserve;
		fd_shortage(ta);
	}
	evtimer_add(k->timer, &now);
	gate(ta);
}

int
tcpadmit_conn_admit(struct tcpadmit *ta, struct tcpadmit_conn *k, int fd)
{
	struct tcpadmit_conn *o;
	socklen_t len = sizeof(k->peer);
	long n = 1;

	k->admitted = 1;
	if (fd < 0) {
		k->shut = 1;    /* evhttp set none: nothing to serve */
		evtimer_del(k->timer);
		return -1;
	}
	k->fd = fd;
	if (k->refuse != NULL) {
		tcpadmit_conn_shut(ta, k, k->refuse);
		return -1;
	}
	if (getpeername(fd, (struct sockaddr *)&k->peer, &len) != 0) {
		tcpadmit_conn_shut(ta, k, "a peer already gone");
		return -1;
	}
	TAILQ_FOREACH(o, &ta->conns, link)
		if (o != k && o->admitted && !o->shut &&
		    peer_same_host(&o->peer, &k->peer))
			n++;
	if (n > ta->max_per_peer) {
		tcpadmit_conn_shut(ta, k, ta->names->max_per_peer);
		return -1;
	}
	return 0;
}

void
tcpadmit_conn_shut(struct tcpadmit *ta, struct tcpadmit_conn *k,
    const char *why)
{
	time_t now = time(NULL);

	if (k->shut)
		return;
	k->shut = 1;
	evtimer_del(k->timer);
	if (k->fd >= 0)
		shutdown(k->fd, SHUT_RDWR);
	ta->refused++;
	if (now - ta->refused_logged >= 10) {
		px_log(PX_INFO, "%s: closed %lu connection(s) since the last "
		    "report, the last for %s", ta->names->listener,
		    ta->refused, why);
		ta->refused_logged = now;
		ta->refused = 0;
	}
}

void
tcpadmit_conn_arm(struct tcpadmit_conn *k, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(k->timer, &tv);
}

void
tcpadmit_conn_remove(struct tcpadmit *ta, struct tcpadmit_conn *k)
{
	TAILQ_REMOVE(&ta->conns, k, link);
	ta->nconns--;
	gate(ta);
}

void
tcpadmit_stop(struct tcpadmit *ta, void (*forget)(struct tcpadmit_conn *k))
{
	struct tcpadmit_conn *k;

	while ((k = TAILQ_FIRST(&ta->conns)) != NULL) {
		TAILQ_REMOVE(&ta->conns, k, link);
		if (forget != NULL)
			forget(k);
	}
	ta->nconns = 0;
	if (ta->fd_ev != NULL)
		event_free(ta->fd_ev);
	ta->fd_ev = NULL;
	ta->fd_short = 0;
	ta->bound = NULL;
}
