/*
 * dns.c: c-ares 1.18 driven by libevent.
 *
 * c-ares tells us which sockets it wants watched (sock_state_cb); each
 * gets one persistent event.  One channel timer, re-armed from
 * ares_timeout() after every call into c-ares, lets c-ares expire its
 * tries.  Each query also has its own timer: the deadline, or a zero
 * timeout when an answer must be delivered from the loop (host map hits
 * and c-ares answering inside ares_getaddrinfo).
 *
 * A query that c-ares still holds (in_ares) cannot be freed: 1.18 has no
 * per-query cancel.  Cancel, deadline and dns_free mark it abandoned and
 * unlink it; its late c-ares callback only frees it.
 */
#include "sluice-config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <ares.h>
#include <event2/event.h>

#include "proxy/lib/dns.h"
#include "proxy/lib/util.h"

#define DNS_RCVBUF (1 << 20)

struct dns_fd {
	ares_socket_t fd;
	struct event *ev;
};

struct dns_hostent {
	char *name;
	struct pol_addr *addrs;
	size_t naddrs;
};

struct dns {
	struct event_base *base;
	ares_channel chan;
	int chan_ok;
	struct event *timer;        /* the channel's: ares_timeout */
	struct dns_fd *fds;
	size_t nfds, capfds;
	struct dns_hostent *hosts;
	size_t nhosts;
	int timeout_ms;
	struct dns_query *queries;  /* live (not abandoned) queries */
	int depth;                  /* nesting of calls into c-ares */
	int dying;                  /* dns_free deferred until depth is 0 */
	int lib_init;
};

struct dns_query {
	struct dns *d;
	struct dns_query *prev, *next;
	dns_cb cb;
	void *arg;
	struct event *timer;        /* deadline, or delivery when ready */
	struct timespec t0;
	int in_ares;                /* c-ares holds q as its callback arg */
	int starting;               /* inside ares_getaddrinfo */
	int abandoned;
	int ready;                  /* st/addrs wait for the timer */
	enum dns_status st;
	size_t n;
	struct pol_addr addrs[DNS_MAX_ADDRS];
};

const char *
dns_status_name(enum dns_status s)
{
	switch (s) {
	case DNS_OK:       return "ok";
	case DNS_NOTFOUND: return "notfound";
	case DNS_FAILED:   return "failed";
	case DNS_TIMEOUT:  return "timeout";
	}
	return "unknown";
}

/* ------------------------------------------------------------------ */
/* Address sets. */

/* Appends a unless already present or the set is full. */
static void
dns_addr_add(struct pol_addr *set, size_t *n, const struct pol_addr *a)
{
	size_t i, len = a->family == AF_INET ? 4 : 16;

	for (i = 0; i < *n; i++)
		if (set[i].family == a->family &&
		    memcmp(set[i].a, a->a, len) == 0)
			return;
	if (*n < DNS_MAX_ADDRS)
		set[(*n)++] = *a;
}

static void
dns_copy_ai(const struct ares_addrinfo *ai, struct pol_addr *set, size_t *n)
{
	const struct ares_addrinfo_node *node;
	struct pol_addr a;

	*n = 0;
	if (ai == NULL)
		return;
	for (node = ai->nodes; node != NULL; node = node->ai_next) {
		memset(&a, 0, sizeof(a));
		if (node->ai_family == AF_INET && node->ai_addr != NULL &&
		    node->ai_addrlen >= sizeof(struct sockaddr_in)) {
			const struct sockaddr_in *sin =
			    (const struct sockaddr_in *)(const void *)node->ai_addr;
			a.family = AF_INET;
			memcpy(a.a, &sin->sin_addr, 4);
		} else if (node->ai_family == AF_INET6 &&
		    node->ai_addr != NULL &&
		    node->ai_addrlen >= sizeof(struct sockaddr_in6)) {
			const struct sockaddr_in6 *sin6 =
			    (const struct sockaddr_in6 *)(const void *)node->ai_addr;
			a.family = AF_INET6;
			memcpy(a.a, &sin6->sin6_addr, 16);
		} else {
			continue;
		}
		dns_addr_add(set, n, &a);
	}
}

static enum dns_status
dns_map_status(int status)
{
	switch (status) {
	case ARES_SUCCESS:
		return DNS_OK;
	case ARES_ENOTFOUND:
	case ARES_ENODATA:
		return DNS_NOTFOUND;
	case ARES_ETIMEOUT:
		return DNS_TIMEOUT;
	default:
		return DNS_FAILED;
	}
}

/* ------------------------------------------------------------------ */
/* Socket and timer glue. */

static void dns_leave(struct dns *d);

static void
dns_enter(struct dns *d)
{
	d->depth++;
}

static void
dns_rearm(struct dns *d)
{
	struct timeval tvbuf, *tv;

	tv = ares_timeout(d->chan, NULL, &tvbuf);
	if (tv == NULL)
		evtimer_del(d->timer);
	else
		evtimer_add(d->timer, tv);
}

static void
dns_on_fd(evutil_socket_t fd, short what, void *arg)
{
	struct dns *d = arg;

	dns_enter(d);
	ares_process_fd(d->chan,
	    (what & EV_READ) ? (ares_socket_t)fd : ARES_SOCKET_BAD,
	    (what & EV_WRITE) ? (ares_socket_t)fd : ARES_SOCKET_BAD);
	dns_leave(d);
}

static void
dns_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct dns *d = arg;

	dns_enter(d);
	ares_process_fd(d->chan, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	dns_leave(d);
}

static struct dns_fd *
dns_fd_find(struct dns *d, ares_socket_t fd)
{
	size_t i;

	for (i = 0; i < d->nfds; i++)
		if (d->fds[i].fd == fd)
			return &d->fds[i];
	return NULL;
}

static void
dns_fd_forget(struct dns *d, struct dns_fd *f)
{
	event_free(f->ev);
	*f = d->fds[--d->nfds];
}

static struct dns_fd *
dns_fd_slot(struct dns *d, ares_socket_t fd)
{
	struct dns_fd *f;

	if (d->nfds == d->capfds) {
		size_t cap = d->capfds ? d->capfds * 2 : 8;

		f = realloc(d->fds, cap * sizeof(*f));
		if (f == NULL)
			return NULL;
		d->fds = f;
		d->capfds = cap;
	}
	f = &d->fds[d->nfds];
	f->fd = fd;
	f->ev = NULL;
	return f;
}

/*
 * c-ares calls this when a socket's interest changes; 0/0 means it is
 * about to close the fd.  On allocation failure the socket goes unwatched
 * and its queries end by timeout, which is the best we can do here.
 */
static void
dns_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
	struct dns *d = data;
	struct dns_fd *f = dns_fd_find(d, fd);
	short what = EV_PERSIST;
	struct event *ev;

	if (!readable && !writable) {
		if (f != NULL)
			dns_fd_forget(d, f);
		return;
	}
	if (readable)
		what |= EV_READ;
	if (writable)
		what |= EV_WRITE;
	ev = event_new(d->base, fd, what, dns_on_fd, d);
	if (ev == NULL)
		return;
	if (f == NULL) {
		f = dns_fd_slot(d, fd);
		if (f == NULL) {
			event_free(ev);
			return;
		}
		d->nfds++;
	} else {
		event_free(f->ev);
	}
	f->ev = ev;
	event_add(ev, NULL);
}

/* ------------------------------------------------------------------ */
/* Queries. */

static void
dns_query_link(struct dns *d, struct dns_query *q)
{
	q->prev = NULL;
	q->next = d->queries;
	if (d->queries != NULL)
		d->queries->prev = q;
	d->queries = q;
}

static void
dns_query_unlink(struct dns_query *q)
{
	if (q->prev != NULL)
		q->prev->next = q->next;
	else
		q->d->queries = q->next;
	if (q->next != NULL)
		q->next->prev = q->prev;
	q->prev = q->next = NULL;
}

/*
 * Takes q out of the daemon's view: no callback will run.  If c-ares still
 * holds q, its callback frees it later; otherwise it is freed now.
 */
static void
dns_query_abandon(struct dns_query *q)
{
	dns_query_unlink(q);
	if (q->timer != NULL) {
		event_free(q->timer);
		q->timer = NULL;
	}
	q->abandoned = 1;
	if (!q->in_ares)
		free(q);
}

static long
dns_elapsed_us(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)(now.tv_sec - t0->tv_sec) * 1000000L +
	    (now.tv_nsec - t0->tv_nsec) / 1000L;
}

/*
 * Ends q with st and the given addresses, then calls back.  q is gone
 * before the callback runs, so the callback may cancel other queries,
 * start new ones or free the resolver.
 */
static void
dns_query_finish(struct dns_query *q, enum dns_status st,
    const struct pol_addr *addrs, size_t n)
{
	struct pol_addr copy[DNS_MAX_ADDRS];
	dns_cb cb = q->cb;
	void *arg = q->arg;
	long us = dns_elapsed_us(&q->t0);

	if (st == DNS_OK && n == 0)
		st = DNS_NOTFOUND;
	if (st != DNS_OK)
		n = 0;
	if (n > 0)
		memcpy(copy, addrs, n * sizeof(*copy));
	dns_query_abandon(q);
	cb(arg, st, n > 0 ? copy : NULL, n, us);
}

static void
dns_on_query_timer(evutil_socket_t fd, short what, void *arg)
{
	struct dns_query *q = arg;

	if (q->ready)
		dns_query_finish(q, q->st, q->addrs, q->n);
	else
		dns_query_finish(q, DNS_TIMEOUT, NULL, 0);
}

/* Hands a ready result to the loop. */
static void
dns_query_defer(struct dns_query *q)
{
	static const struct timeval zero = { 0, 0 };

	q->ready = 1;
	evtimer_del(q->timer);
	evtimer_add(q->timer, &zero);
}

static void
dns_on_ares(void *arg, int status, int timeouts, struct ares_addrinfo *ai)
{
	struct dns_query *q = arg;
	enum dns_status st;

	q->in_ares = 0;
	if (q->abandoned) {
		if (ai != NULL)
			ares_freeaddrinfo(ai);
		free(q);
		return;
	}
	st = dns_map_status(status);
	dns_copy_ai(st == DNS_OK ? ai : NULL, q->addrs, &q->n);
	if (ai != NULL)
		ares_freeaddrinfo(ai);
	if (q->starting) {
		q->st = st;
		dns_query_defer(q);
		return;
	}
	dns_query_finish(q, st, q->addrs, q->n);
}

static const struct dns_hostent *
dns_host_find(const struct dns *d, const char *name)
{
	size_t i;

	for (i = 0; i < d->nhosts; i++)
		if (strcasecmp(d->hosts[i].name, name) == 0)
			return &d->hosts[i];
	return NULL;
}

struct dns_query *
dns_resolve(struct dns *d, const char *name, dns_cb cb, void *arg)
{
	struct ares_addrinfo_hints hints;
	const struct dns_hostent *h;
	struct dns_query *q;
	struct timeval tv;
	size_t i;

	if (d->dying)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return NULL;
	q->d = d;
	q->cb = cb;
	q->arg = arg;
	clock_gettime(CLOCK_MONOTONIC, &q->t0);
	q->timer = evtimer_new(d->base, dns_on_query_timer, q);
	if (q->timer == NULL) {
		free(q);
		return NULL;
	}
	dns_query_link(d, q);

	h = dns_host_find(d, name);
	if (h != NULL) {
		for (i = 0; i < h->naddrs; i++)
			dns_addr_add(q->addrs, &q->n, &h->addrs[i]);
		q->st = DNS_OK;
		dns_query_defer(q);
		return q;
	}

	tv.tv_sec = d->timeout_ms / 1000;
	tv.tv_usec = (d->timeout_ms % 1000) * 1000;
	evtimer_add(q->timer, &tv);

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_flags = ARES_AI_NOSORT;
	q->in_ares = 1;
	q->starting = 1;
	dns_enter(d);
	ares_getaddrinfo(d->chan, name, NULL, &hints, dns_on_ares, q);
	q->starting = 0;
	dns_leave(d);
	return q;
}

void
dns_cancel(struct dns_query *q)
{
	if (q != NULL)
		dns_query_abandon(q);
}

/* ------------------------------------------------------------------ */
/* Setup and teardown. */

static int
dns_parse_port(const char *s, int *port)
{
	long v = 0;

	if (*s == '\0')
		return -1;
	for (; *s != '\0'; s++) {
		if (!isdigit((unsigned char)*s))
			return -1;
		v = v * 10 + (*s - '0');
		if (v > 65535)
			return -1;
	}
	if (v == 0)
		return -1;
	*port = (int)v;
	return 0;
}

/* "ip", "ip:port", "v6" or "[v6]:port" (and "[v6]"). */
static int
dns_parse_server(const char *s, struct ares_addr_port_node *n)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *end, *colon, *port = NULL;
	size_t len;

	memset(n, 0, sizeof(*n));
	n->udp_port = n->tcp_port = 53;
	if (s[0] == '[') {
		end = strchr(s, ']');
		if (end == NULL)
			return -1;
		len = (size_t)(end - s - 1);
		if (len == 0 || len >= sizeof(host))
			return -1;
		memcpy(host, s + 1, len);
		host[len] = '\0';
		if (end[1] == ':')
			port = end + 2;
		else if (end[1] != '\0')
			return -1;
		n->family = AF_INET6;
		if (inet_pton(AF_INET6, host, &n->addr.addr6) != 1)
			return -1;
	} else if (inet_pton(AF_INET6, s, &n->addr.addr6) == 1) {
		n->family = AF_INET6;
	} else {
		colon = strchr(s, ':');
		len = colon != NULL ? (size_t)(colon - s) : strlen(s);
		if (len == 0 || len >= sizeof(host))
			return -1;
		memcpy(host, s, len);
		host[len] = '\0';
		if (colon != NULL)
			port = colon + 1;
		n->family = AF_INET;
		if (inet_pton(AF_INET, host, &n->addr.addr4) != 1)
			return -1;
	}
	if (port != NULL) {
		if (dns_parse_port(port, &n->udp_port) == -1)
			return -1;
		n->tcp_port = n->udp_port;
	}
	return 0;
}

static int
dns_set_servers(struct dns *d, const char *const *servers, size_t n,
    char *err, size_t errlen)
{
	struct ares_addr_port_node *nodes;
	size_t i;
	int rc, ret = -1;

	nodes = calloc(n, sizeof(*nodes));
	if (nodes == NULL) {
		errf(err, errlen, "dns: out of memory");
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (servers[i] == NULL ||
		    dns_parse_server(servers[i], &nodes[i]) == -1) {
			errf(err, errlen, "dns: bad server \"%s\"",
			    servers[i] ? servers[i] : "(null)");
			goto out;
		}
		nodes[i].next = i + 1 < n ? &nodes[i + 1] : NULL;
	}
	rc = ares_set_servers_ports(d->chan, nodes);
	if (rc != ARES_SUCCESS) {
		errf(err, errlen, "dns: setting servers: %s",
		    ares_strerror(rc));
		goto out;
	}
	ret = 0;
out:
	free(nodes);
	return ret;
}

static int
dns_copy_hosts(struct dns *d, const struct dns_host *hosts, size_t n)
{
	size_t i, j;

	if (n == 0)
		return 0;
	d->hosts = calloc(n, sizeof(*d->hosts));
	if (d->hosts == NULL)
		return -1;
	d->nhosts = n;
	for (i = 0; i < n; i++) {
		struct dns_hostent *h = &d->hosts[i];

		if (hosts[i].name == NULL)
			return -1;
		h->name = strdup(hosts[i].name);
		if (h->name == NULL)
			return -1;
		if (hosts[i].naddrs == 0)
			continue;
		h->addrs = calloc(hosts[i].naddrs, sizeof(*h->addrs));
		if (h->addrs == NULL)
			return -1;
		for (j = 0; j < hosts[i].naddrs; j++) {
			int fam = hosts[i].addrs[j].family;

			if (fam == AF_INET || fam == AF_INET6)
				h->addrs[h->naddrs++] = hosts[i].addrs[j];
		}
	}
	return 0;
}

static int
dns_init_channel(struct dns *d, char *err, size_t errlen)
{
	struct ares_options opts;
	int rc, mask;
	char lookups[] = "b";

	memset(&opts, 0, sizeof(opts));
	opts.sock_state_cb = dns_sock_state;
	opts.sock_state_cb_data = d;
	/*
	 * Two rounds, the second twice as long (c-ares doubles it): with one
	 * server c-ares gives up at 3/4 of the deadline.  With more servers
	 * our own deadline timer is what ends the query.
	 */
	opts.timeout = d->timeout_ms / 4 > 25 ? d->timeout_ms / 4 : 25;
	opts.tries = 2;
	/* DNS only: the hosts file is not the policy's to consult. */
	opts.lookups = lookups;
	/* Names are canonical: no search domains, no HOSTALIASES. */
	opts.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
	opts.domains = NULL;
	opts.ndomains = 0;
	/* c-ares 1.18 uses one UDP socket per server: a burst of answers to
	 * concurrent connections must not overflow the default buffer and
	 * cost a retransmission each (the kernel caps this at rmem_max). */
	opts.socket_receive_buffer_size = DNS_RCVBUF;
	mask = ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES |
	    ARES_OPT_LOOKUPS | ARES_OPT_FLAGS | ARES_OPT_DOMAINS |
	    ARES_OPT_SOCK_RCVBUF;
	rc = ares_init_options(&d->chan, &opts, mask);
	if (rc != ARES_SUCCESS) {
		errf(err, errlen, "dns: c-ares init: %s",
		    ares_strerror(rc));
		return -1;
	}
	d->chan_ok = 1;
	return 0;
}

static void
dns_destroy(struct dns *d)
{
	size_t i;

	/* Every query is abandoned: the callbacks ares_destroy fires with
	 * ARES_EDESTRUCTION only free them. */
	while (d->queries != NULL)
		dns_query_abandon(d->queries);
	if (d->chan_ok)
		ares_destroy(d->chan);
	for (i = 0; i < d->nfds; i++)
		event_free(d->fds[i].ev);
	free(d->fds);
	if (d->timer != NULL)
		event_free(d->timer);
	for (i = 0; i < d->nhosts; i++) {
		free(d->hosts[i].name);
		free(d->hosts[i].addrs);
	}
	free(d->hosts);
	if (d->lib_init)
		ares_library_cleanup();
	free(d);
}

/* Leaving the outermost call into c-ares: finish a deferred dns_free, or
 * re-arm the channel timer for whatever c-ares now waits on. */
static void
dns_leave(struct dns *d)
{
	if (--d->depth > 0)
		return;
	if (d->dying)
		dns_destroy(d);
	else
		dns_rearm(d);
}

struct dns *
dns_new(struct event_base *base, const char *const *servers,
    size_t nservers, const struct dns_host *hosts, size_t nhosts,
    int timeout_ms, char *err, size_t errlen)
{
	struct dns *d;
	int rc;

	if (base == NULL || timeout_ms <= 0) {
		errf(err, errlen, "dns: bad arguments");
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (d == NULL) {
		errf(err, errlen, "dns: out of memory");
		return NULL;
	}
	d->base = base;
	d->timeout_ms = timeout_ms;
	rc = ares_library_init(ARES_LIB_INIT_ALL);
	if (rc != ARES_SUCCESS) {
		errf(err, errlen, "dns: c-ares library: %s",
		    ares_strerror(rc));
		goto fail;
	}
	d->lib_init = 1;
	d->timer = evtimer_new(base, dns_on_timer, d);
	if (d->timer == NULL || dns_copy_hosts(d, hosts, nhosts) == -1) {
		errf(err, errlen, "dns: out of memory");
		goto fail;
	}
	if (dns_init_channel(d, err, errlen) == -1)
		goto fail;
	if (nservers > 0 &&
	    dns_set_servers(d, servers, nservers, err, errlen) == -1)
		goto fail;
	return d;
fail:
	dns_destroy(d);
	return NULL;
}

void
dns_free(struct dns *d)
{
	if (d == NULL)
		return;
	if (d->depth > 0) {
		/* Called from a callback inside ares_process_fd: c-ares is
		 * still on the stack, so destroy it on the way out.  The
		 * queries are dropped now so no other callback runs. */
		d->dying = 1;
		while (d->queries != NULL)
			dns_query_abandon(d->queries);
		return;
	}
	dns_destroy(d);
}
