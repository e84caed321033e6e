/*
 * loadgen.c: the load generator of bench/run.sh.
 *
 * One thread, one epoll set, non-blocking sockets, so the load tool costs
 * the same against every proxy and the proxy is what the figures compare.
 * Every address it dials is a numeric 127.0.0.0/8 one: the bench never
 * leaves loopback.
 *
 * Modes (-m):
 *   bulk     -c N connections, each (CONNECT and) one GET of -u; MB/s
 *   tunnels  open, (CONNECT,) GET -u with "Connection: close", close;
 *            repeated at concurrency -c; tunnels/s
 *   ka       -c keep-alive connections sending GET -u (absolute form to a
 *            proxy, origin form direct); requests/s, p50 and p99 latency
 *   idle     -n tunnels established and held; prints "ready N" on stdout
 *            and holds them until stdin closes or -d seconds pass
 *   hold     -n CONNECTs sent at once (a proxy that asks before it
 *            answers holds them); prints "sent N" once every one was
 *            written, then waits for the answers and reports when the
 *            first byte of each came (CLOCK_MONOTONIC ns, "first_ns")
 * -b ADDR binds connection i to the source address ADDR + i (within
 * 127.0.0.0/8), so a proxy that tells sessions by source sees -n of them.
 * Every mode stops after -n operations or -d seconds, whichever is first.
 * The result is one JSON object on stdout.
 */
#include "sluice-config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum lg_mode { LG_BULK, LG_TUNNELS, LG_KA, LG_IDLE, LG_HOLD };

enum lg_state {
	LG_S_FREE = 0,
	LG_S_CONNECTING,
	LG_S_PROXY_HEAD,   /* waiting for the CONNECT answer */
	LG_S_RESP_HEAD,    /* waiting for the response head */
	LG_S_RESP_BODY,
	LG_S_IDLE,         /* idle mode: tunnel up, nothing to do */
};

#define LG_HEAD_MAX 4096
#define LG_RBUF (1024 * 1024)
#define LG_MAX_CONNS 16384

struct lg_conn {
	int fd;
	enum lg_state state;
	size_t head_len;
	char head[LG_HEAD_MAX];
	uint64_t body_left;
	uint64_t t_sent_ns;
	unsigned served;     /* responses on this connection */
	uint32_t src;        /* source address to bind (host order), 0 none */
	uint64_t t_first_ns; /* hold: when the answer's first byte came */
	int resend;          /* ka: reconnected, request still owed */
	int close_after;     /* the response said Connection: close */
};

struct lg {
	enum lg_mode mode;
	struct sockaddr_in dial;     /* proxy, or origin when direct */
	int via_proxy;
	char authority[300];         /* host:port the requests name */
	char path[256];
	int conc;
	uint64_t max_ops;
	double max_secs;
	int epfd;
	struct lg_conn *conns;
	char req[1024];
	size_t req_len;
	char connect_req[700];
	size_t connect_len;
	/* results */
	uint64_t started;
	uint64_t done;
	uint64_t errors;
	uint64_t bytes;
	uint64_t reconnects;
	/* why errors happened: dial, cut (EOF or error mid-answer), answer
	 * (not a 200 or not HTTP) */
	uint64_t err_dial, err_cut, err_answer;
	int last_errno;
	uint64_t *lat_ns;
	size_t nlat;
	size_t cap_lat;
	int active;
	int established;
	uint32_t src_base;           /* -b, host order; 0: no bind */
	char *rbuf;
	uint64_t t0_ns;
};

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
usage(void)
{
	fprintf(stderr,
"usage: loadgen -m bulk|tunnels|ka|idle -t 127.0.0.1:PORT -a HOST:PORT\n"
"               [-P] [-u PATH] [-c CONC] [-n COUNT] [-d SECONDS] [-b SRC]\n"
"  -t  address to dial (the proxy with -P, else the origin)\n"
"  -a  authority the requests name (CONNECT target, Host, absolute URI)\n"
"  -P  go through the proxy at -t\n"
"  -b  bind connection i to source address SRC + i (127.x.y.z)\n");
}

/* Loopback only, numeric only: the bench must never dial anything else. */
static int
parse_dial(const char *s, struct sockaddr_in *out)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	char *end;
	long port;
	size_t hl;

	if (colon == NULL)
		return -1;
	hl = (size_t)(colon - s);
	if (hl == 0 || hl >= sizeof(host))
		return -1;
	memcpy(host, s, hl);
	host[hl] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end != '\0' || port < 1 || port > 65535)
		return -1;
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
		return -1;
	if ((ntohl(out->sin_addr.s_addr) >> 24) != 127)
		return -1;
	return 0;
}

static void
build_requests(struct lg *g)
{
	const char *conn_hdr = g->mode == LG_TUNNELS ?
	    "Connection: close\r\n" : "";
	int n;

	/* plain HTTP through a proxy names the origin in the request line;
	 * a tunnel or a direct connection uses the origin form */
	if (g->via_proxy && g->mode == LG_KA)
		n = snprintf(g->req, sizeof(g->req),
		    "GET http://%s%s HTTP/1.1\r\nHost: %s\r\n"
		    "User-Agent: sluice-bench\r\n%s\r\n",
		    g->authority, g->path, g->authority, conn_hdr);
	else
		n = snprintf(g->req, sizeof(g->req),
		    "GET %s HTTP/1.1\r\nHost: %s\r\n"
		    "User-Agent: sluice-bench\r\n%s\r\n",
		    g->path, g->authority, conn_hdr);
	g->req_len = (size_t)n;
	n = snprintf(g->connect_req, sizeof(g->connect_req),
	    "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
	    g->authority, g->authority);
	g->connect_len = (size_t)n;
}

static int
time_up(const struct lg *g)
{
	return (double)(now_ns() - g->t0_ns) / 1e9 >= g->max_secs;
}

/* Requests are small: one send writes them whole on loopback, and a
 * short write is counted as an error rather than buffered. */
static int
send_all(int fd, const char *buf, size_t len)
{
	ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);

	return w == (ssize_t)len ? 0 : -1;
}

static void
conn_close(struct lg *g, struct lg_conn *c)
{
	if (c->state == LG_S_FREE)
		return;
	epoll_ctl(g->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->state = LG_S_FREE;
	c->fd = -1;
	g->active--;
}

static int
conn_open(struct lg *g, struct lg_conn *c)
{
	struct epoll_event ev;
	int one = 1;
	int fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (c->src != 0) {
		struct sockaddr_in sa;

		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(c->src);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			goto fail_fd;
	}
	if (connect(fd, (struct sockaddr *)&g->dial, sizeof(g->dial)) != 0 &&
	    errno != EINPROGRESS)
		goto fail_fd;
	c->fd = fd;
	c->state = LG_S_CONNECTING;
	c->head_len = 0;
	c->body_left = 0;
	c->served = 0;
	c->close_after = 0;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLOUT | EPOLLIN;
	ev.data.ptr = c;
	if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		c->state = LG_S_FREE;
		goto fail_fd;
	}
	g->active++;
	g->started++;
	return 0;
fail_fd:
	g->last_errno = errno;
	close(fd);
	g->err_dial++;
	return -1;
fail:
	g->last_errno = errno;
	g->err_dial++;
	return -1;
}

static void
set_events(struct lg *g, struct lg_conn *c, uint32_t events)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.ptr = c;
	epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static int
send_request(struct lg *g, struct lg_conn *c)
{
	c->state = LG_S_RESP_HEAD;
	c->head_len = 0;
	/* a request resent after a keep-alive close keeps its first send
	 * time: the client waited for the reconnect too */
	if (!c->resend)
		c->t_sent_ns = now_ns();
	c->resend = 0;
	return send_all(c->fd, g->req, g->req_len);
}

/* ka: the proxy ended the connection between responses (tinyproxy does
 * after every one); a client reconnects and sends again. */
static int
reconnect(struct lg *g, struct lg_conn *c, int owed)
{
	uint64_t t = c->t_sent_ns;

	conn_close(g, c);
	g->reconnects++;
	g->started--;       /* conn_open counts it again */
	if (conn_open(g, c) != 0)
		return -1;
	c->resend = owed;
	c->t_sent_ns = t;
	return 0;
}

static void
record_latency(struct lg *g, uint64_t ns)
{
	uint64_t *p;

	if (g->nlat == g->cap_lat) {
		size_t cap = g->cap_lat ? g->cap_lat * 2 : 65536;

		p = realloc(g->lat_ns, cap * sizeof(*p));
		if (p == NULL)
			return;
		g->lat_ns = p;
		g->cap_lat = cap;
	}
	g->lat_ns[g->nlat++] = ns;
}

/* Whether to open another connection: only tunnels mode opens more
 * than its first -c (ka reconnects in place). */
static int
want_more(const struct lg *g)
{
	if (g->mode != LG_TUNNELS)
		return 0;
	return g->started < g->max_ops && !time_up(g);
}

/* Start a replacement connection (tunnels mode) while the budget lasts. */
static void
refill(struct lg *g)
{
	int i;

	for (i = 0; i < g->conc && want_more(g); i++) {
		if (g->conns[i].state != LG_S_FREE)
			continue;
		if (conn_open(g, &g->conns[i]) != 0)
			g->errors++;
	}
}

/* One response finished on c. */
static void
response_done(struct lg *g, struct lg_conn *c)
{
	g->done++;
	c->served++;
	if (g->mode == LG_KA) {
		record_latency(g, now_ns() - c->t_sent_ns);
		if (g->done + (uint64_t)g->active - 1 < g->max_ops &&
		    !time_up(g)) {
			if (c->close_after) {
				/* the next request waits for the new
				 * connection: that wait is latency too */
				c->t_sent_ns = now_ns();
				if (reconnect(g, c, 1) != 0)
					g->errors++;
				return;
			}
			if (send_request(g, c) != 0) {
				g->errors++;
				conn_close(g, c);
			}
			return;
		}
	}
	conn_close(g, c);
}

static int
status_of(const char *head, size_t len)
{
	/* "HTTP/1.x NNN" */
	if (len < 12 || memcmp(head, "HTTP/1.", 7) != 0)
		return -1;
	return atoi(head + 9);
}

/* Content-Length of a complete head; -1 when absent. */
static int64_t
content_length(const char *head, size_t len)
{
	const char *p = head;
	const char *end = head + len;
	static const char name[] = "\r\ncontent-length:";

	while (p + sizeof(name) - 1 < end) {
		if (strncasecmp(p, name, sizeof(name) - 1) == 0)
			return strtoll(p + sizeof(name) - 1, NULL, 10);
		p++;
	}
	return -1;
}

/* "Connection: close" (or Proxy-Connection) in a complete head. */
static int
has_close(const char *head, size_t len)
{
	const char *p = head;
	const char *end = head + len;

	while (p + 6 < end) {
		const char *nl = memmem(p, (size_t)(end - p), "\r\n", 2);
		const char *colon;

		if (nl == NULL)
			break;
		p = nl + 2;
		colon = memchr(p, ':', (size_t)(end - p));
		if (colon == NULL)
			break;
		if ((colon - p == 10 && strncasecmp(p, "connection", 10) == 0) ||
		    (colon - p == 16 &&
		    strncasecmp(p, "proxy-connection", 16) == 0)) {
			const char *v = colon + 1;

			while (v < end && *v == ' ')
				v++;
			if (end - v >= 5 && strncasecmp(v, "close", 5) == 0)
				return 1;
		}
	}
	return 0;
}

/* Feed bytes of a response (head then body).  Returns the number of
 * bytes consumed, or -1 on a protocol error. */
static ssize_t
feed_head(struct lg *g, struct lg_conn *c, const char *buf, size_t n)
{
	size_t take = n;
	size_t scan_from = c->head_len >= 3 ? c->head_len - 3 : 0;
	char *e;
	size_t hl;
	int64_t cl;

	if (take > LG_HEAD_MAX - c->head_len)
		take = LG_HEAD_MAX - c->head_len;
	memcpy(c->head + c->head_len, buf, take);
	c->head_len += take;
	e = memmem(c->head + scan_from, c->head_len - scan_from,
	    "\r\n\r\n", 4);
	if (e == NULL)
		return c->head_len == LG_HEAD_MAX ? -1 : (ssize_t)take;
	hl = (size_t)(e - c->head) + 4;
	/* bytes past the head belong to the body (or the tunnel) */
	take -= c->head_len - hl;
	if (c->state == LG_S_PROXY_HEAD) {
		if (status_of(c->head, hl) != 200)
			return -1;
		if (g->mode == LG_IDLE || g->mode == LG_HOLD) {
			c->state = LG_S_IDLE;
			g->established++;
			set_events(g, c, EPOLLIN);
			return (ssize_t)take;
		}
		if (send_request(g, c) != 0)
			return -1;
		set_events(g, c, EPOLLIN);
		return (ssize_t)take;
	}
	if (status_of(c->head, hl) != 200)
		return -1;
	cl = content_length(c->head, hl);
	if (cl < 0)
		return -1;
	c->body_left = (uint64_t)cl;
	c->close_after = has_close(c->head, hl);
	c->state = LG_S_RESP_BODY;
	return (ssize_t)take;
}

static void
on_readable(struct lg *g, struct lg_conn *c)
{
	int rounds;

	/* bounded so one fat connection cannot starve the others */
	for (rounds = 0; rounds < 16 && c->state != LG_S_FREE; rounds++) {
		ssize_t r = recv(c->fd, g->rbuf, LG_RBUF, 0);
		size_t off = 0;

		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r <= 0 && g->mode == LG_KA && c->served > 0 &&
		    c->state == LG_S_RESP_HEAD && c->head_len == 0) {
			if (reconnect(g, c, 1) != 0)
				g->errors++;
			return;
		}
		if (r <= 0) {
			/* EOF or error before the response ended */
			g->errors++;
			g->err_cut++;
			if (r < 0)
				g->last_errno = errno;
			conn_close(g, c);
			return;
		}
		if (c->t_first_ns == 0)
			c->t_first_ns = now_ns();
		while (off < (size_t)r && c->state != LG_S_FREE) {
			size_t left = (size_t)r - off;

			if (c->state == LG_S_PROXY_HEAD ||
			    c->state == LG_S_RESP_HEAD) {
				ssize_t k = feed_head(g, c, g->rbuf + off,
				    left);

				if (k < 0) {
					g->errors++;
					g->err_answer++;
					conn_close(g, c);
					return;
				}
				off += (size_t)k;
			} else if (c->state == LG_S_RESP_BODY) {
				size_t k = left < c->body_left ?
				    left : (size_t)c->body_left;

				c->body_left -= k;
				g->bytes += k;
				off += k;
			} else {
				/* idle tunnels get nothing; anything is odd */
				g->errors++;
				conn_close(g, c);
				return;
			}
			if (c->state == LG_S_RESP_BODY && c->body_left == 0)
				response_done(g, c);
		}
	}
}

static void
on_writable(struct lg *g, struct lg_conn *c)
{
	int err = 0;
	socklen_t el = sizeof(err);

	if (c->state != LG_S_CONNECTING)
		return;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 ||
	    err != 0) {
		g->errors++;
		g->err_dial++;
		g->last_errno = err;
		conn_close(g, c);
		return;
	}
	if (g->via_proxy && g->mode != LG_KA) {
		c->state = LG_S_PROXY_HEAD;
		c->head_len = 0;
		if (send_all(c->fd, g->connect_req, g->connect_len) != 0)
			goto fail;
	} else if (g->mode == LG_IDLE || g->mode == LG_HOLD) {
		c->state = LG_S_IDLE;
		g->established++;
	} else if (send_request(g, c) != 0) {
		goto fail;
	}
	set_events(g, c, EPOLLIN);
	return;
fail:
	g->errors++;
	conn_close(g, c);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void
print_result(struct lg *g, double secs)
{
	static const char *names[] = { "bulk", "tunnels", "ka", "idle",
	    "hold" };
	double p50 = 0, p99 = 0;

	if (g->nlat > 0) {
		qsort(g->lat_ns, g->nlat, sizeof(*g->lat_ns), cmp_u64);
		p50 = (double)g->lat_ns[g->nlat / 2] / 1000.0;
		p99 = (double)g->lat_ns[(g->nlat * 99) / 100] / 1000.0;
	}
	printf("{\"mode\":\"%s\",\"secs\":%.4f,\"ops\":%llu,\"errors\":%llu,"
	    "\"bytes\":%llu,\"mb_per_s\":%.2f,\"ops_per_s\":%.1f,"
	    "\"p50_us\":%.1f,\"p99_us\":%.1f,\"established\":%d,"
	    "\"reconnects\":%llu,\"err_dial\":%llu,\"err_cut\":%llu,"
	    "\"err_answer\":%llu,\"last_errno\":%d}\n",
	    names[g->mode], secs, (unsigned long long)g->done,
	    (unsigned long long)g->errors, (unsigned long long)g->bytes,
	    secs > 0 ? (double)g->bytes / 1e6 / secs : 0.0,
	    secs > 0 ? (double)g->done / secs : 0.0, p50, p99,
	    g->established, (unsigned long long)g->reconnects,
	    (unsigned long long)g->err_dial, (unsigned long long)g->err_cut,
	    (unsigned long long)g->err_answer, g->last_errno);
	fflush(stdout);
}

/* hold: one more line, the first-byte times of the connections that got
 * their answer (0 for one that did not) */
static void
print_first(struct lg *g, int n)
{
	int i;

	printf("{\"first_ns\":[");
	for (i = 0; i < n; i++)
		printf("%s%llu", i ? "," : "",
		    (unsigned long long)g->conns[i].t_first_ns);
	printf("]}\n");
	fflush(stdout);
}

static void
dispatch(struct lg *g, int timeout_ms)
{
	struct epoll_event evs[256];
	int n, i;

	n = epoll_wait(g->epfd, evs, 256, timeout_ms);
	for (i = 0; i < n; i++) {
		struct lg_conn *c = evs[i].data.ptr;

		if (c == NULL)
			continue;      /* stdin: looked at by the idle loop */
		if (c->state == LG_S_FREE)
			continue;
		if (evs[i].events & EPOLLOUT)
			on_writable(g, c);
		if (c->state != LG_S_FREE &&
		    (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
			on_readable(g, c);
	}
}

static void
close_all(struct lg *g, int upto)
{
	int i;

	for (i = 0; i < upto; i++)
		conn_close(g, &g->conns[i]);
}

/* Everything but idle: run until the work is done or the clock says
 * stop; a hard deadline 5 s later ends stragglers. */
static void
run_load(struct lg *g)
{
	double hard = g->max_secs + 5.0;
	int i;

	for (i = 0; i < g->conc; i++) {
		if (g->mode == LG_TUNNELS && !want_more(g))
			break;
		if (conn_open(g, &g->conns[i]) != 0)
			g->errors++;
	}
	while (g->active > 0 || want_more(g)) {
		dispatch(g, 50);
		if (g->mode == LG_TUNNELS)
			refill(g);
		if ((double)(now_ns() - g->t0_ns) / 1e9 >= hard ||
		    (g->mode == LG_BULK && time_up(g)))
			break;
	}
	close_all(g, g->conc);
}

/* Idle: establish -n tunnels with at most -c in flight, report, hold. */
static void
run_idle(struct lg *g, int total)
{
	struct epoll_event ev;
	char line[64];
	int next = 0;

	while ((g->established < total) && !time_up(g)) {
		while (next < total && g->active - g->established < g->conc) {
			if (conn_open(g, &g->conns[next]) != 0)
				g->errors++;
			next++;
		}
		if (next >= total && g->active == g->established)
			break;        /* some failed: report what stands */
		dispatch(g, 50);
	}
	printf("ready %d\n", g->established);
	fflush(stdout);
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.ptr = NULL;
	if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, 0, &ev) == 0) {
		while (!time_up(g)) {
			struct epoll_event out[1];
			int n = epoll_wait(g->epfd, out, 1, 100);

			/* only stdin is watched for now: tunnels that the
			 * proxy drops show as a lower count at the end */
			if (n > 0 && out[0].data.ptr == NULL) {
				if (read(0, line, sizeof(line)) <= 0)
					break;
			} else if (n > 0) {
				struct lg_conn *c = out[0].data.ptr;

				if (c->state != LG_S_FREE) {
					g->established--;
					g->errors++;
					conn_close(g, c);
				}
			}
		}
	}
	close_all(g, total);
}

/* Hold: send -n CONNECTs (all in flight), say so, wait for the answers. */
static void
run_hold(struct lg *g, int total)
{
	int i, sent = 0;

	for (i = 0; i < total; i++)
		if (conn_open(g, &g->conns[i]) != 0)
			g->errors++;
	/* written: every connection left LG_S_CONNECTING */
	while (!time_up(g)) {
		sent = 0;
		for (i = 0; i < total; i++)
			if (g->conns[i].state != LG_S_CONNECTING)
				sent++;
		if (sent == total)
			break;
		dispatch(g, 50);
	}
	printf("sent %d\n", sent);
	fflush(stdout);
	while (!time_up(g) && g->established < g->active)
		dispatch(g, 50);
	/* the records say when each got its answer */
	for (i = 0; i < total; i++)
		if (g->conns[i].state != LG_S_IDLE)
			g->conns[i].t_first_ns = 0;
}

int
main(int argc, char **argv)
{
	struct lg g;
	const char *dial = NULL, *auth = NULL, *mode = "bulk";
	long count = -1;
	int opt;
	int nconns;
	uint64_t t1;

	memset(&g, 0, sizeof(g));
	g.conc = 1;
	g.max_secs = 10;
	snprintf(g.path, sizeof(g.path), "/");
	while ((opt = getopt(argc, argv, "m:t:a:Pu:c:n:d:b:h")) != -1) {
		switch (opt) {
		case 'm': mode = optarg; break;
		case 't': dial = optarg; break;
		case 'a': auth = optarg; break;
		case 'P': g.via_proxy = 1; break;
		case 'u': snprintf(g.path, sizeof(g.path), "%s", optarg);
			break;
		case 'c': g.conc = atoi(optarg); break;
		case 'n': count = atol(optarg); break;
		case 'd': g.max_secs = atof(optarg); break;
		case 'b': {
			struct in_addr a;

			if (inet_pton(AF_INET, optarg, &a) != 1 ||
			    (ntohl(a.s_addr) >> 24) != 127) {
				fprintf(stderr, "loadgen: -b must be "
				    "127.x.y.z\n");
				return 2;
			}
			g.src_base = ntohl(a.s_addr);
			break;
		}
		default: usage(); return 2;
		}
	}
	if (strcmp(mode, "bulk") == 0)
		g.mode = LG_BULK;
	else if (strcmp(mode, "tunnels") == 0)
		g.mode = LG_TUNNELS;
	else if (strcmp(mode, "ka") == 0)
		g.mode = LG_KA;
	else if (strcmp(mode, "idle") == 0)
		g.mode = LG_IDLE;
	else if (strcmp(mode, "hold") == 0)
		g.mode = LG_HOLD;
	else {
		usage();
		return 2;
	}
	if (dial == NULL || auth == NULL || parse_dial(dial, &g.dial) != 0) {
		fprintf(stderr, "loadgen: -t must be 127.x.y.z:PORT\n");
		usage();
		return 2;
	}
	snprintf(g.authority, sizeof(g.authority), "%s", auth);
	if (g.conc < 1 || g.conc > LG_MAX_CONNS || g.max_secs <= 0 ||
	    g.max_secs > 600) {
		fprintf(stderr, "loadgen: -c 1..%d, -d 0..600\n", LG_MAX_CONNS);
		return 2;
	}
	g.max_ops = count > 0 ? (uint64_t)count : 100000000u;
	if ((g.mode == LG_IDLE || g.mode == LG_HOLD) &&
	    (count < 1 || count > LG_MAX_CONNS)) {
		fprintf(stderr, "loadgen: idle and hold need -n 1..%d\n",
		    LG_MAX_CONNS);
		return 2;
	}
	nconns = g.mode == LG_IDLE || g.mode == LG_HOLD ? (int)count : g.conc;
	g.conns = calloc((size_t)nconns, sizeof(*g.conns));
	g.rbuf = malloc(LG_RBUF);
	g.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (g.conns == NULL || g.rbuf == NULL || g.epfd < 0) {
		perror("loadgen");
		return 1;
	}
	if (g.src_base != 0) {
		int i;

		/* every source stays inside 127.0.0.0/8 */
		if (((g.src_base + (uint32_t)nconns - 1) >> 24) != 127) {
			fprintf(stderr, "loadgen: -b + -n leaves 127/8\n");
			return 2;
		}
		for (i = 0; i < nconns; i++)
			g.conns[i].src = g.src_base + (uint32_t)i;
	}
	build_requests(&g);
	g.t0_ns = now_ns();
	if (g.mode == LG_IDLE)
		run_idle(&g, nconns);
	else if (g.mode == LG_HOLD)
		run_hold(&g, nconns);
	else
		run_load(&g);
	t1 = now_ns();
	print_result(&g, (double)(t1 - g.t0_ns) / 1e9);
	if (g.mode == LG_HOLD)
		print_first(&g, nconns);
	free(g.lat_ns);
	free(g.conns);
	free(g.rbuf);
	close(g.epfd);
	return 0;
}
