/*
 * test_dns.c: proxy/dns.c against an in-process fake DNS server.
 *
 * The server runs in its own thread with its own event base (UDP and TCP
 * on one ephemeral port of 127.0.0.1), so it keeps answering whatever the
 * loop under test is doing.  It answers from a table keyed by name and
 * counts the questions it sees, so tests can tell a cached or mapped
 * answer from a real query.
 */
#include "sluice-config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "proxy/lib/dns.h"

/* ------------------------------------------------------------------ */
/* Fake server. */

#define T_A     1
#define T_AAAA  28
#define RC_OK   0
#define RC_SERVFAIL 2
#define RC_NXDOMAIN 3

#define FAKE_MAXREC 64
#define FAKE_NAMES  1024

struct fake_reply {
	int drop;                /* no answer at all */
	int delay_ms;
	int rcode;
	int nrec;
	int type[FAKE_MAXREC];
	uint8_t rdata[FAKE_MAXREC][16];
};

struct fake_count {
	char name[256];
	int n;
};

static struct {
	pthread_t thr;
	struct event_base *base;
	evutil_socket_t udp;
	struct event *udp_ev;
	struct evconnlistener *lst;
	int stop_pipe[2];
	struct event *stop_ev;
	int port;
	pthread_mutex_t mu;
	struct fake_count counts[FAKE_NAMES];
	int ncounts;
	int tcp_queries;
} fake;

struct fake_delayed {
	struct event *ev;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	size_t len;
	uint8_t msg[512];
};

static void
rec_add(struct fake_reply *r, int type, const char *text)
{
	int fam = type == T_A ? AF_INET : AF_INET6;

	assert_true(r->nrec < FAKE_MAXREC);
	assert_int_equal(inet_pton(fam, text, r->rdata[r->nrec]), 1);
	r->type[r->nrec++] = type;
}

/* The answer table. */
static void
fake_lookup(const char *name, int qtype, struct fake_reply *r)
{
	char buf[64];
	unsigned k;
	int i;

	memset(r, 0, sizeof(*r));
	if (strcmp(name, "dual.test") == 0) {
		if (qtype == T_A)
			rec_add(r, T_A, "93.184.216.34");
		else if (qtype == T_AAAA)
			rec_add(r, T_AAAA, "2606:2800:220:1::1");
	} else if (strcmp(name, "v4only.test") == 0) {
		if (qtype == T_A)
			rec_add(r, T_A, "151.101.0.223");
	} else if (strcmp(name, "nodata.test") == 0) {
		/* NOERROR, no records of either type */
	} else if (strcmp(name, "nx.test") == 0) {
		r->rcode = RC_NXDOMAIN;
	} else if (strcmp(name, "fail.test") == 0) {
		r->rcode = RC_SERVFAIL;
	} else if (strcmp(name, "silent.test") == 0) {
		r->drop = 1;
	} else if (strcmp(name, "slow.test") == 0) {
		r->delay_ms = 150;
		if (qtype == T_A)
			rec_add(r, T_A, "151.101.0.1");
	} else if (strcmp(name, "private.test") == 0) {
		if (qtype == T_A)
			rec_add(r, T_A, "10.0.0.5");
		else if (qtype == T_AAAA)
			rec_add(r, T_AAAA, "fd00::5");
	} else if (strcmp(name, "multi.test") == 0) {
		if (qtype == T_A) {
			rec_add(r, T_A, "151.101.1.1");
			rec_add(r, T_A, "151.101.1.2");
			rec_add(r, T_A, "151.101.1.1");   /* duplicate */
			rec_add(r, T_A, "151.101.1.3");
		}
	} else if (strcmp(name, "big.test") == 0) {
		/* 40 A records do not fit 512 bytes: TC, then TCP. */
		if (qtype == T_A)
			for (i = 0; i < 40; i++) {
				snprintf(buf, sizeof(buf), "151.102.0.%d", i + 1);
				rec_add(r, T_A, buf);
			}
	} else if (sscanf(name, "h%u.test", &k) == 1 && k < 65536) {
		if (qtype == T_A) {
			snprintf(buf, sizeof(buf), "151.103.%u.%u", k / 256,
			    k % 256);
			rec_add(r, T_A, buf);
		} else if (qtype == T_AAAA) {
			snprintf(buf, sizeof(buf), "2001:4860::%x", k);
			rec_add(r, T_AAAA, buf);
		}
	} else {
		r->rcode = RC_NXDOMAIN;
	}
}

static void
fake_count_name(const char *name)
{
	int i;

	pthread_mutex_lock(&fake.mu);
	for (i = 0; i < fake.ncounts; i++)
		if (strcmp(fake.counts[i].name, name) == 0)
			break;
	if (i == fake.ncounts && fake.ncounts < FAKE_NAMES) {
		snprintf(fake.counts[i].name, sizeof(fake.counts[i].name), "%s",
		    name);
		fake.ncounts++;
	}
	if (i < FAKE_NAMES)
		fake.counts[i].n++;
	pthread_mutex_unlock(&fake.mu);
}

static int
fake_queries(const char *name)
{
	int i, n = 0;

	pthread_mutex_lock(&fake.mu);
	for (i = 0; i < fake.ncounts; i++)
		if (strcmp(fake.counts[i].name, name) == 0)
			n = fake.counts[i].n;
	pthread_mutex_unlock(&fake.mu);
	return n;
}

static int
fake_total(void)
{
	int i, n = 0;

	pthread_mutex_lock(&fake.mu);
	for (i = 0; i < fake.ncounts; i++)
		n += fake.counts[i].n;
	pthread_mutex_unlock(&fake.mu);
	return n;
}

static int
fake_tcp_queries(void)
{
	int n;

	pthread_mutex_lock(&fake.mu);
	n = fake.tcp_queries;
	pthread_mutex_unlock(&fake.mu);
	return n;
}

static void
put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * Builds the answer to query q (len bytes) into out (cap bytes).  Returns
 * its length, 0 to stay silent, -1 for a malformed query.  *delay_ms gets
 * the table's delay.  Over UDP an answer above 512 bytes is cut to the
 * question with TC set.
 */
static int
fake_answer(const uint8_t *q, size_t len, int tcp, uint8_t *out, size_t cap,
    int *delay_ms)
{
	struct fake_reply r;
	char name[256];
	size_t off = 12, nl = 0, qend, o;
	int qtype, i, tc = 0;

	if (len < 12 || q[4] != 0 || q[5] != 1)
		return -1;
	while (off < len && q[off] != 0) {
		size_t l = q[off];

		if (l > 63 || off + 1 + l > len || nl + l + 1 >= sizeof(name))
			return -1;
		if (nl > 0)
			name[nl++] = '.';
		for (i = 0; i < (int)l; i++)
			name[nl++] = (char)tolower(q[off + 1 + (size_t)i]);
		off += 1 + l;
	}
	if (off + 5 > len)
		return -1;
	name[nl] = '\0';
	qtype = (q[off + 1] << 8) | q[off + 2];
	qend = off + 5;

	fake_count_name(name);
	fake_lookup(name, qtype, &r);
	*delay_ms = r.delay_ms;
	if (r.drop)
		return 0;
	if (qend > cap)
		return -1;
	memcpy(out, q, qend);
	o = qend;
	for (i = 0; i < r.nrec; i++) {
		size_t rdlen = r.type[i] == T_A ? 4 : 16;

		if (!tcp && o + 12 + rdlen > 512) {
			tc = 1;
			o = qend;
			i = 0;
			break;
		}
		if (o + 12 + rdlen > cap)
			return -1;
		put16(out + o, 0xc00c);
		put16(out + o + 2, (unsigned)r.type[i]);
		put16(out + o + 4, 1);
		put16(out + o + 6, 0);
		put16(out + o + 8, 60);
		put16(out + o + 10, (unsigned)rdlen);
		memcpy(out + o + 12, r.rdata[i], rdlen);
		o += 12 + rdlen;
	}
	/* QR, opcode 0, AA, TC, RD copied; RA; rcode. */
	out[2] = (uint8_t)(0x84 | (tc ? 0x02 : 0) | (q[2] & 0x01));
	out[3] = (uint8_t)(0x80 | r.rcode);
	put16(out + 6, tc ? 0 : (unsigned)i);
	put16(out + 8, 0);
	put16(out + 10, 0);
	return (int)o;
}

static void
fake_send_delayed(evutil_socket_t fd, short what, void *arg)
{
	struct fake_delayed *dl = arg;

	(void)sendto(fake.udp, dl->msg, dl->len, 0,
	    (struct sockaddr *)&dl->peer, dl->peerlen);
	event_free(dl->ev);
	free(dl);
}

static void
fake_on_udp(evutil_socket_t fd, short what, void *arg)
{
	uint8_t q[1500], a[512];
	struct sockaddr_storage peer;
	socklen_t plen;
	ssize_t n;
	int len, delay, budget;

	for (budget = 0; budget < 1000; budget++) {
		plen = sizeof(peer);
		n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&peer,
		    &plen);
		if (n < 0)
			return;
		delay = 0;
		len = fake_answer(q, (size_t)n, 0, a, sizeof(a), &delay);
		if (len <= 0)
			continue;
		if (delay > 0) {
			struct fake_delayed *dl = calloc(1, sizeof(*dl));
			struct timeval tv = { 0, delay * 1000 };

			if (dl == NULL)
				continue;
			dl->peer = peer;
			dl->peerlen = plen;
			dl->len = (size_t)len;
			memcpy(dl->msg, a, (size_t)len);
			dl->ev = evtimer_new(fake.base, fake_send_delayed, dl);
			evtimer_add(dl->ev, &tv);
			continue;
		}
		(void)sendto(fd, a, (size_t)len, 0, (struct sockaddr *)&peer,
		    plen);
	}
}

static void
fake_tcp_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[2], q[1024], a[4096];
	size_t mlen;
	int len, delay;

	while (evbuffer_get_length(in) >= 2) {
		evbuffer_copyout(in, hdr, 2);
		mlen = ((size_t)hdr[0] << 8) | hdr[1];
		if (mlen > sizeof(q)) {
			bufferevent_free(bev);
			return;
		}
		if (evbuffer_get_length(in) < 2 + mlen)
			return;
		evbuffer_drain(in, 2);
		evbuffer_remove(in, q, mlen);
		pthread_mutex_lock(&fake.mu);
		fake.tcp_queries++;
		pthread_mutex_unlock(&fake.mu);
		len = fake_answer(q, mlen, 1, a, sizeof(a), &delay);
		if (len <= 0)
			continue;
		put16(hdr, (unsigned)len);
		bufferevent_write(bev, hdr, 2);
		bufferevent_write(bev, a, (size_t)len);
	}
}

static void
fake_tcp_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		bufferevent_free(bev);
}

static void
fake_on_accept(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct bufferevent *bev;

	bev = bufferevent_socket_new(fake.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		close(fd);
		return;
	}
	bufferevent_setcb(bev, fake_tcp_read, NULL, fake_tcp_event, NULL);
	bufferevent_enable(bev, EV_READ);
}

static void
fake_on_stop(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopbreak(fake.base);
}

static void *
fake_main(void *arg)
{
	event_base_dispatch(fake.base);
	return NULL;
}

static int
fake_start(void **state)
{
	struct sockaddr_in sin;
	socklen_t slen = sizeof(sin);
	int rcvbuf = 1 << 20;
	int tries;

	memset(&fake, 0, sizeof(fake));
	fake.udp = -1;
	pthread_mutex_init(&fake.mu, NULL);
	fake.base = event_base_new();
	if (fake.base == NULL)
		return -1;
	/* The TCP listener needs the UDP port's number too, and that
	 * number may be taken for TCP by an unrelated socket: try a few
	 * ephemeral ports. */
	for (tries = 0; tries < 50 && fake.lst == NULL; tries++) {
		if (fake.udp >= 0)
			close(fake.udp);
		fake.udp = socket(AF_INET, SOCK_DGRAM, 0);
		if (fake.udp < 0)
			return -1;
		(void)setsockopt(fake.udp, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
		    sizeof(rcvbuf));
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		slen = sizeof(sin);
		if (bind(fake.udp, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
		    getsockname(fake.udp, (struct sockaddr *)&sin, &slen) == -1)
			return -1;
		evutil_make_socket_nonblocking(fake.udp);
		fake.port = ntohs(sin.sin_port);
		fake.lst = evconnlistener_new_bind(fake.base, fake_on_accept,
		    NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16,
		    (struct sockaddr *)&sin, sizeof(sin));
	}
	if (fake.lst == NULL)
		return -1;
	fake.udp_ev = event_new(fake.base, fake.udp, EV_READ | EV_PERSIST,
	    fake_on_udp, NULL);
	if (pipe(fake.stop_pipe) == -1)
		return -1;
	fake.stop_ev = event_new(fake.base, fake.stop_pipe[0], EV_READ,
	    fake_on_stop, NULL);
	event_add(fake.udp_ev, NULL);
	event_add(fake.stop_ev, NULL);
	if (pthread_create(&fake.thr, NULL, fake_main, NULL) != 0)
		return -1;
	return 0;
}

static int
fake_stop(void **state)
{
	if (write(fake.stop_pipe[1], "x", 1) != 1)
		return -1;
	pthread_join(fake.thr, NULL);
	event_free(fake.udp_ev);
	event_free(fake.stop_ev);
	evconnlistener_free(fake.lst);
	close(fake.udp);
	close(fake.stop_pipe[0]);
	close(fake.stop_pipe[1]);
	/* Delayed answers still queued are dropped with the base. */
	event_base_free(fake.base);
	pthread_mutex_destroy(&fake.mu);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Test side. */

struct result {
	int calls;
	enum dns_status st;
	size_t n;
	struct pol_addr addrs[DNS_MAX_ADDRS];
	long elapsed_us;
};

struct fixture {
	struct event_base *base;
	struct dns *d;
	char server[64];
};

static void
on_result(void *arg, enum dns_status st, const struct pol_addr *addrs,
    size_t n, long elapsed_us)
{
	struct result *r = arg;

	r->calls++;
	r->st = st;
	r->n = n;
	assert_true(n <= DNS_MAX_ADDRS);
	if (n > 0)
		memcpy(r->addrs, addrs, n * sizeof(*addrs));
	r->elapsed_us = elapsed_us;
}

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
on_guard(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

/*
 * Runs the loop until every result in rs has been called back or ms
 * passed.  A guard timer keeps EVLOOP_ONCE from blocking past the limit.
 */
static void
run_until(struct event_base *base, struct result *rs, size_t nrs, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	struct event *guard;
	int expired = 0;
	size_t i, done;

	guard = evtimer_new(base, on_guard, &expired);
	assert_non_null(guard);
	evtimer_add(guard, &tv);
	while (!expired) {
		for (done = 0, i = 0; rs != NULL && i < nrs; i++)
			if (rs[i].calls > 0)
				done++;
		if (rs != NULL && done == nrs)
			break;
		event_base_loop(base, EVLOOP_ONCE);
	}
	event_free(guard);
}

static void
run_for(struct event_base *base, long ms)
{
	run_until(base, NULL, 0, ms);
}

static struct pol_addr
addr(const char *text)
{
	struct pol_addr a;

	memset(&a, 0, sizeof(a));
	a.family = strchr(text, ':') ? AF_INET6 : AF_INET;
	assert_int_equal(inet_pton(a.family, text, a.a), 1);
	return a;
}

static int
has_addr(const struct result *r, const char *text)
{
	struct pol_addr a = addr(text);
	size_t i;

	for (i = 0; i < r->n; i++)
		if (r->addrs[i].family == a.family &&
		    memcmp(r->addrs[i].a, a.a, 16) == 0)
			return 1;
	return 0;
}

static const struct pol_addr map_addrs[] = {
	{ AF_INET, { 127, 0, 0, 1 } },
	{ AF_INET6, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 } },
};
static const struct dns_host map_hosts[] = {
	{ "pypi.org", map_addrs, 2 },
	{ "empty.test", NULL, 0 },
};

/* nservers copies of the fake server (a second one keeps c-ares trying
 * past the deadline). */
static struct fixture *
fixture_new_n(int timeout_ms, size_t nservers)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const char *servers[2];
	char err[256] = "";

	assert_non_null(f);
	assert_true(nservers >= 1 && nservers <= 2);
	f->base = event_base_new();
	assert_non_null(f->base);
	snprintf(f->server, sizeof(f->server), "127.0.0.1:%d", fake.port);
	servers[0] = servers[1] = f->server;
	f->d = dns_new(f->base, servers, nservers, map_hosts, 2, timeout_ms,
	    err, sizeof(err));
	if (f->d == NULL)
		fail_msg("dns_new: %s", err);
	return f;
}

static struct fixture *
fixture_new(int timeout_ms)
{
	return fixture_new_n(timeout_ms, 1);
}

static void
fixture_free(struct fixture *f)
{
	dns_free(f->d);
	event_base_free(f->base);
	free(f);
}

static int
setup(void **state)
{
	*state = fixture_new(2000);
	return 0;
}

static int
teardown(void **state)
{
	fixture_free(*state);
	return 0;
}

static void
resolve_one(struct fixture *f, const char *name, struct result *r, long ms)
{
	memset(r, 0, sizeof(*r));
	assert_non_null(dns_resolve(f->d, name, on_result, r));
	assert_int_equal(r->calls, 0);
	run_until(f->base, r, 1, ms);
	assert_int_equal(r->calls, 1);
}

static void
test_dual_stack(void **state)
{
	struct fixture *f = *state;
	struct result r;

	resolve_one(f, "dual.test", &r, 3000);
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(r.n, 2);
	assert_true(has_addr(&r, "93.184.216.34"));
	assert_true(has_addr(&r, "2606:2800:220:1::1"));
	assert_true(r.elapsed_us >= 0 && r.elapsed_us < 2000000);
	/* Both families were asked, over UDP. */
	assert_int_equal(fake_queries("dual.test"), 2);
}

static void
test_v4_only_is_ok(void **state)
{
	struct fixture *f = *state;
	struct result r;

	resolve_one(f, "v4only.test", &r, 3000);
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(r.n, 1);
	assert_true(has_addr(&r, "151.101.0.223"));
}

static void
test_nxdomain(void **state)
{
	struct fixture *f = *state;
	struct result r;
	int total0;

	resolve_one(f, "nx.test", &r, 3000);
	assert_int_equal(r.st, DNS_NOTFOUND);
	assert_int_equal(r.n, 0);
	/* Unknown names are NXDOMAIN too, and no search domain is tried:
	 * exactly the A and AAAA questions for the name itself. */
	total0 = fake_total();
	resolve_one(f, "nosuch.test", &r, 3000);
	assert_int_equal(r.st, DNS_NOTFOUND);
	assert_int_equal(fake_queries("nosuch.test"), 2);
	assert_int_equal(fake_total() - total0, 2);
}

static void
test_servfail(void **state)
{
	struct fixture *f = *state;
	struct result r;

	resolve_one(f, "fail.test", &r, 3000);
	assert_int_equal(r.st, DNS_FAILED);
	assert_int_equal(r.n, 0);
	assert_true(fake_queries("fail.test") >= 2);
}

/* One server: c-ares' own tries run out first (ARES_ETIMEOUT). */
static void
test_timeout(void **state)
{
	struct fixture *f = fixture_new(300);
	struct result r;
	int q0 = fake_queries("silent.test");
	long t0 = now_ms(), dt;

	resolve_one(f, "silent.test", &r, 3000);
	dt = now_ms() - t0;
	assert_int_equal(r.st, DNS_TIMEOUT);
	assert_int_equal(r.n, 0);
	assert_true(dt >= 150 && dt < 1500);
	assert_true(r.elapsed_us >= 150000 && r.elapsed_us < 1500000);
	/* A and AAAA, each retransmitted once. */
	assert_int_equal(fake_queries("silent.test") - q0, 4);
	fixture_free(f);
}

/* Two servers: c-ares would go on past the deadline; ours ends it, and
 * the late end inside c-ares is dropped. */
static void
test_deadline(void **state)
{
	struct fixture *f = fixture_new_n(300, 2);
	struct result r;

	resolve_one(f, "silent.test", &r, 3000);
	assert_int_equal(r.st, DNS_TIMEOUT);
	assert_true(r.elapsed_us >= 290000 && r.elapsed_us < 1000000);
	/* c-ares still holds the abandoned query: let it run out. */
	run_for(f->base, 400);
	assert_int_equal(r.calls, 1);
	fixture_free(f);
}

/* c-ares answers some names from inside ares_getaddrinfo (".onion" is
 * refused without a query); we still deliver from the loop. */
static void
test_sync_ares_answer_deferred(void **state)
{
	struct fixture *f = *state;
	struct result r;
	int total0 = fake_total();

	resolve_one(f, "hidden.onion", &r, 1000);
	assert_int_equal(r.st, DNS_NOTFOUND);
	assert_int_equal(fake_total(), total0);
}

static void
test_nodata(void **state)
{
	struct fixture *f = *state;
	struct result r;

	resolve_one(f, "nodata.test", &r, 3000);
	assert_int_equal(r.st, DNS_NOTFOUND);
	assert_int_equal(r.n, 0);
	assert_int_equal(fake_queries("nodata.test"), 2);
}

static void
test_private_answer_reported(void **state)
{
	struct fixture *f = *state;
	struct result r;

	/* Classifying is the caller's job: every address is handed back. */
	resolve_one(f, "private.test", &r, 3000);
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(r.n, 2);
	assert_true(has_addr(&r, "10.0.0.5"));
	assert_true(has_addr(&r, "fd00::5"));
}

static void
test_multiple_a_deduped(void **state)
{
	struct fixture *f = *state;
	struct result r;

	resolve_one(f, "multi.test", &r, 3000);
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(r.n, 3);
	assert_true(has_addr(&r, "151.101.1.1"));
	assert_true(has_addr(&r, "151.101.1.2"));
	assert_true(has_addr(&r, "151.101.1.3"));
}

static void
test_truncated_then_tcp_capped(void **state)
{
	struct fixture *f = *state;
	struct result r;
	int tcp0 = fake_tcp_queries();

	resolve_one(f, "big.test", &r, 3000);
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(r.n, DNS_MAX_ADDRS);
	assert_true(has_addr(&r, "151.102.0.1"));
	assert_true(fake_tcp_queries() > tcp0);
}

static void
test_host_map_async(void **state)
{
	struct fixture *f = *state;
	struct result r;

	memset(&r, 0, sizeof(r));
	assert_non_null(dns_resolve(f->d, "pypi.org", on_result, &r));
	/* Not from inside dns_resolve. */
	assert_int_equal(r.calls, 0);
	run_until(f->base, &r, 1, 1000);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(r.n, 2);
	assert_true(has_addr(&r, "127.0.0.1"));
	assert_true(has_addr(&r, "::1"));
	assert_int_equal(fake_queries("pypi.org"), 0);

	/* A mapped name with no address is not found, not ok. */
	resolve_one(f, "empty.test", &r, 1000);
	assert_int_equal(r.st, DNS_NOTFOUND);
	assert_int_equal(r.n, 0);
	assert_int_equal(fake_queries("empty.test"), 0);
}

static void
test_cancel_before_answer(void **state)
{
	struct fixture *f = *state;
	struct result r, other;
	struct dns_query *q;

	memset(&r, 0, sizeof(r));
	memset(&other, 0, sizeof(other));
	q = dns_resolve(f->d, "slow.test", on_result, &r);
	assert_non_null(q);
	assert_non_null(dns_resolve(f->d, "dual.test", on_result, &other));
	dns_cancel(q);
	/* The late answer (150 ms) arrives and is dropped. */
	run_for(f->base, 400);
	assert_int_equal(r.calls, 0);
	assert_int_equal(other.calls, 1);
	assert_int_equal(other.st, DNS_OK);
	assert_true(fake_queries("slow.test") >= 1);

	/* A mapped answer can be cancelled before the loop delivers it. */
	q = dns_resolve(f->d, "pypi.org", on_result, &r);
	assert_non_null(q);
	dns_cancel(q);
	run_for(f->base, 50);
	assert_int_equal(r.calls, 0);
}

static void
test_free_with_pending(void **state)
{
	struct fixture *f = fixture_new(2000);
	struct result r[4];

	memset(r, 0, sizeof(r));
	assert_non_null(dns_resolve(f->d, "slow.test", on_result, &r[0]));
	assert_non_null(dns_resolve(f->d, "silent.test", on_result, &r[1]));
	assert_non_null(dns_resolve(f->d, "pypi.org", on_result, &r[2]));
	assert_non_null(dns_resolve(f->d, "dual.test", on_result, &r[3]));
	dns_free(f->d);
	f->d = NULL;
	/* Nothing may fire afterwards either. */
	run_for(f->base, 300);
	assert_int_equal(r[0].calls + r[1].calls + r[2].calls + r[3].calls,
	    0);
	fixture_free(f);
}

struct free_ctx {
	struct dns *d;
	int calls;
};

static void
on_result_free(void *arg, enum dns_status st, const struct pol_addr *addrs,
    size_t n, long elapsed_us)
{
	struct free_ctx *c = arg;

	c->calls++;
	dns_free(c->d);
}

static void
test_free_from_callback(void **state)
{
	struct fixture *f = fixture_new(2000);
	struct free_ctx c[8];
	char name[32];
	int i, total, tries;

	/* Eight answers arrive close together; the first callback frees
	 * the resolver, so no other may run. */
	for (i = 0; i < 8; i++) {
		c[i].d = f->d;
		c[i].calls = 0;
		snprintf(name, sizeof(name), "h%d.test", 1000 + i);
		assert_non_null(dns_resolve(f->d, name, on_result_free, &c[i]));
	}
	f->d = NULL;
	for (tries = 0, total = 0; tries < 100 && total == 0; tries++) {
		run_for(f->base, 20);
		for (total = 0, i = 0; i < 8; i++)
			total += c[i].calls;
	}
	run_for(f->base, 200);
	for (total = 0, i = 0; i < 8; i++)
		total += c[i].calls;
	assert_int_equal(total, 1);
	fixture_free(f);
}

static void
test_many_concurrent(void **state)
{
	struct fixture *f = fixture_new(5000);
	enum { N = 200 };
	struct result *r = calloc(N, sizeof(*r));
	char name[32], a4[32], a6[48];
	long t0 = now_ms();
	int i;

	assert_non_null(r);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "h%d.test", i);
		assert_non_null(dns_resolve(f->d, name, on_result, &r[i]));
	}
	run_until(f->base, r, N, 8000);
	/* Let any duplicate delivery show up. */
	run_for(f->base, 50);
	for (i = 0; i < N; i++) {
		assert_int_equal(r[i].calls, 1);
		assert_int_equal(r[i].st, DNS_OK);
		assert_int_equal(r[i].n, 2);
		snprintf(a4, sizeof(a4), "151.103.%d.%d", i / 256, i % 256);
		snprintf(a6, sizeof(a6), "2001:4860::%x", i);
		assert_true(has_addr(&r[i], a4));
		assert_true(has_addr(&r[i], a6));
	}
	print_message("200 queries in %ld ms\n", now_ms() - t0);
	free(r);
	fixture_free(f);
}

struct chain_ctx {
	struct dns *d;
	struct result inner;
	int calls;
};

static void
on_chain(void *arg, enum dns_status st, const struct pol_addr *addrs,
    size_t n, long elapsed_us)
{
	struct chain_ctx *c = arg;

	c->calls++;
	assert_non_null(dns_resolve(c->d, "pypi.org", on_result, &c->inner));
	/* Even a mapped answer is not delivered re-entrantly. */
	assert_int_equal(c->inner.calls, 0);
}

static void
test_resolve_from_callback(void **state)
{
	struct fixture *f = *state;
	struct chain_ctx c;

	memset(&c, 0, sizeof(c));
	c.d = f->d;
	assert_non_null(dns_resolve(f->d, "dual.test", on_chain, &c));
	run_until(f->base, &c.inner, 1, 3000);
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.inner.calls, 1);
	assert_int_equal(c.inner.st, DNS_OK);
}

static void
test_new_bad_servers(void **state)
{
	static const char *const bad[] = {
		"", "1.2.3", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
		"127.0.0.1:53x", "[::1", "[::1]x", "[::1]:", "[1.2.3.4]:53",
		"localhost", "0x7f.0.0.1", "::1:53:x",
	};
	static const char *const good[] = {
		"127.0.0.1", "127.0.0.1:5353", "::1", "[::1]:5353", "[::1]",
	};
	struct event_base *base = event_base_new();
	char err[256];
	struct dns *d;
	size_t i;

	assert_non_null(base);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		d = dns_new(base, &bad[i], 1, NULL, 0, 1000, err, sizeof(err));
		if (d != NULL)
			fail_msg("accepted server \"%s\"", bad[i]);
		assert_true(strlen(err) > 0);
	}
	d = dns_new(base, good, sizeof(good) / sizeof(good[0]), NULL, 0, 1000,
	    err, sizeof(err));
	if (d == NULL)
		fail_msg("refused good servers: %s", err);
	dns_free(d);
	assert_null(dns_new(base, NULL, 0, NULL, 0, 0, err, sizeof(err)));
	event_base_free(base);
}

static void
test_status_names(void **state)
{
	assert_string_equal(dns_status_name(DNS_OK), "ok");
	assert_string_equal(dns_status_name(DNS_NOTFOUND), "notfound");
	assert_string_equal(dns_status_name(DNS_FAILED), "failed");
	assert_string_equal(dns_status_name(DNS_TIMEOUT), "timeout");
	assert_string_equal(dns_status_name((enum dns_status)99), "unknown");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_names),
		cmocka_unit_test(test_new_bad_servers),
		cmocka_unit_test_setup_teardown(test_dual_stack, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v4_only_is_ok, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_nxdomain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_servfail, setup, teardown),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test_setup_teardown(test_sync_ares_answer_deferred,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_nodata, setup, teardown),
		cmocka_unit_test_setup_teardown(test_private_answer_reported,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_multiple_a_deduped, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_truncated_then_tcp_capped,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_map_async, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_cancel_before_answer, setup,
		    teardown),
		cmocka_unit_test(test_free_with_pending),
		cmocka_unit_test(test_free_from_callback),
		cmocka_unit_test(test_many_concurrent),
		cmocka_unit_test_setup_teardown(test_resolve_from_callback,
		    setup, teardown),
	};

	return cmocka_run_group_tests(tests, fake_start, fake_stop);
}
