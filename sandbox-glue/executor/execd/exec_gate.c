/*
 * exec_gate.c: the connections of the TCP (TLS) listener, before evhttp
 * reads a request of theirs (issue 20, point 3).
 *
 * tcp.listen is open to anyone who can reach it, before any token.
 * evhttp (libevent 2.1.12) reads a whole request, body included (up to
 * twice the largest body limit), before its callback can look at the
 * token, and it has no per-connection limits.  So each connection gets a
 * filter bufferevent between its TLS bufferevent and evhttp (the filter
 * passes the descriptor on: evhttp sets it through the filter), and the
 * filter decides what evhttp may read:
 *  - a request head is held back until it is whole (at most HEAD_MAX
 *    bytes, within tcp.head_timeout_ms of the accept or of the previous
 *    answer, TLS handshake included; a byte now and then does not extend
 *    it); then its bearer token and, through the route table of
 *    exec_api.c, the role the route needs are checked;
 *  - a request that passes goes to evhttp with exactly its body (by
 *    Content-Length; a chunked body is passed as it comes and its answer
 *    closes the connection, so no next head is read unchecked); then the
 *    filter passes nothing until the answer is done (xd_gate_answered);
 *  - a request that does not pass goes to evhttp without its body
 *    (Content-Length, Transfer-Encoding and Expect removed, "Connection:
 *    close" added): exec_api.c answers it 401 or 403 and evhttp closes;
 *    meanwhile what the peer sends is dropped, at most REFUSED_MAX bytes
 *    and REFUSED_MS, then the connection is shut;
 *  - tcp.max_conns in all (at the cap the listener stops accepting: the
 *    kernel queues the rest), tcp.max_conns_per_peer from one address
 *    (more are shut at once), and the listener accepts only while
 *    tcp.fd_reserve descriptors are left for sandboxes and commands
 *    (proxy/lib/tcpadmit.c: the caps sluiced's control.tcp has too).
 * Under tcp.plain_http (no TLS) the filter sits on a socket bufferevent
 * and does the same.  A route that needs no role (GET /healthz, a load
 * balancer's) passes without a token, never with a body.
 * A connection is shut by shutdown(2) of its descriptor, which evhttp
 * reads as the peer gone and frees the connection itself; the filter's
 * free callback is the one place a connection record is freed.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "proxy/lib/httpauth.h"
#include "proxy/lib/tcpadmit.h"
#include "sandbox-glue/executor/execd/execd-int.h"

#define HEAD_MAX	(64 * 1024)     /* as evhttp_set_max_headers_size */
#define REFUSED_MAX	(64 * 1024)     /* dropped after a refused head */
#define REFUSED_MS	1000
#define TOKEN_MAX	HTTPAUTH_TOKEN_MAX
/* What the TLS bufferevent holds for evhttp's filter: reads stop above
 * this much unread, writes (answers) are moved to it below it. */
#define UNDER_READ_WM	(HEAD_MAX + 16384)
#define UNDER_WRITE_WM	(64 * 1024)

enum gate_state {
	G_HEAD,         /* a head is being read: held back */
	G_BODY,         /* a passed request's body: left bytes pass */
	G_CHUNKED,      /* a passed chunked body: all passes (the answer
	                 * closes the connection) */
	G_WAIT,         /* the request is with evhttp: nothing passes */
	G_REFUSED,      /* a refused head passed without its body: what
	                 * comes is dropped */
};

struct xd_conn {
	struct tcpadmit_conn ta;        /* first: the caps' view of it */
	struct xd *xd;
	struct bufferevent *bev;        /* the filter: evhttp's */
	struct bufferevent *under;      /* the TLS one under it */
	struct event *kick;             /* moves an answer down (out_added) */
	enum gate_state state;
	uint64_t left;                  /* G_BODY: bytes to pass */
	uint64_t dropped;               /* G_REFUSED: bytes dropped */
	size_t scanned;                 /* G_HEAD: looked at, no end */
};

struct xd_gate {
	struct tcpadmit ta;             /* tcp.max_conns and the like */
	struct xd *xd;
	xd_gate_role_fn role_of;
};

static const struct tcpadmit_names gate_names = {
	"tcp", "tcp.max_conns", "tcp.max_conns_per_peer", "tcp.fd_reserve",
};

/* ---- a connection ---- */

static void
conn_shut(struct xd_conn *k, const char *why)
{
	if (k->ta.fd < 0)
		k->ta.fd = bufferevent_getfd(k->bev);
	tcpadmit_conn_shut(&k->xd->gate->ta, &k->ta, why);
}

static void
conn_timer(evutil_socket_t fd, short what, void *arg)
{
	struct xd_conn *k = arg;

	(void)fd;
	(void)what;
	if (k->ta.shut)
		return;
	if (!k->ta.admitted) {
		if (tcpadmit_conn_admit(&k->xd->gate->ta, &k->ta,
		    bufferevent_getfd(k->bev)) == 0)
			tcpadmit_conn_arm(&k->ta,
			    k->xd->cfg->tcp_head_timeout_ms);
		return;
	}
	if (k->state == G_HEAD)
		conn_shut(k, "tcp.head_timeout_ms");
	else if (k->state == G_REFUSED)
		conn_shut(k, "a refused request");
}

/* The filter is being freed, so is its connection (evhttp's doing). */
static void
conn_gone(void *arg)
{
	struct xd_conn *k = arg;
	struct xd_gate *g;

	if (k == NULL)
		return;
	event_free(k->ta.timer);
	event_free(k->kick);
	if ((g = k->xd != NULL ? k->xd->gate : NULL) != NULL)
		tcpadmit_conn_remove(&g->ta, &k->ta);
	free(k);
}

/* ---- the head ---- */

/* struct xd_gate_head (execd-int.h): the fields of a head that decide. */

/* Where the head in b[0..n) ends (past its empty line), 0 not yet.
 * Lines end in LF, a CR before it optional (as evhttp reads them). */
size_t
xd_gate_head_end(const char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (b[i] != '\n')
			continue;
		if (i + 1 < n && b[i + 1] == '\n')
			return i + 2;
		if (i + 2 < n && b[i + 1] == '\r' && b[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static void
trim(const char **s, size_t *n)
{
	while (*n > 0 && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' ||
	    (*s)[*n - 1] == '\r'))
		(*n)--;
}

/* The fields of the head b[0..n) that decide; -1: not a head evhttp
 * would take the same way (a folded line, no request line). */
int
xd_gate_head_parse(const char *b, size_t n, struct xd_gate_head *h)
{
	const char *p = b, *end = b + n, *nl, *sp, *colon;
	size_t len;

	memset(h, 0, sizeof(*h));
	if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
		return -1;
	len = (size_t)(nl - p);
	if ((sp = memchr(p, ' ', len)) == NULL)
		return -1;
	h->method = p;
	h->mlen = (size_t)(sp - p);
	h->path = sp + 1;
	if ((sp = memchr(h->path, ' ', (size_t)(nl - h->path))) == NULL)
		return -1;
	h->plen = (size_t)(sp - h->path);
	for (p = nl + 1; p < end; p = nl + 1) {
		const char *v;
		size_t klen, vlen;

		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			break;
		len = (size_t)(nl - p);
		if (len == 0 || (len == 1 && *p == '\r'))
			break;          /* the empty line */
		if (*p == ' ' || *p == '\t')
			return -1;      /* obs-fold: evhttp joins, we do not */
		if ((colon = memchr(p, ':', len)) == NULL)
			return -1;
		klen = (size_t)(colon - p);
		v = colon + 1;
		vlen = (size_t)(nl - v);
		trim(&v, &vlen);
		if (klen == 13 && strncasecmp(p, "Authorization", 13) == 0) {
			h->auth = v;
			h->alen = vlen;
			h->nauth++;
		} else if (klen == 14 && strncasecmp(p, "Content-Length", 14) ==
		    0) {
			h->cl = v;
			h->cllen = vlen;
			h->ncl++;
		} else if (klen == 17 && strncasecmp(p, "Transfer-Encoding",
		    17) == 0) {
			h->te = v;
			h->telen = vlen;
			h->nte++;
		}
	}
	return 0;
}

/* The role of the head's token, XD_ROLE_NONE none or not valid (as
 * httpauth_bearer takes it: one Authorization header, Bearer). */
enum xd_role
xd_gate_head_role(const struct xd_cfg *c, const struct xd_gate_head *h)
{
	char tok[TOKEN_MAX + 1];
	const char *v = h->auth;
	size_t n = h->alen;
	const struct xd_token *t;

	if (h->nauth != 1 || n < 7 || strncasecmp(v, "Bearer ", 7) != 0)
		return XD_ROLE_NONE;
	for (v += 7, n -= 7; n > 0 && *v == ' '; v++, n--)
		;
	if (n == 0 || n > TOKEN_MAX || memchr(v, '\0', n) != NULL)
		return XD_ROLE_NONE;
	memcpy(tok, v, n);
	tok[n] = '\0';
	t = xd_token_find(c, tok);
	OPENSSL_cleanse(tok, sizeof(tok));
	return t != NULL ? t->role : XD_ROLE_NONE;
}

/* The method may carry a body (evhttp_method_may_have_body). */
static int
may_have_body(const struct xd_gate_head *h)
{
	return !(h->mlen == 4 && memcmp(h->method, "HEAD", 4) == 0) &&
	    !(h->mlen == 5 && memcmp(h->method, "TRACE", 5) == 0);
}

/* Content-Length as evhttp reads it: -1 bad, else the bytes. */
int64_t
xd_gate_cl_value(const struct xd_gate_head *h)
{
	uint64_t v = 0;
	size_t i;

	if (h->cllen == 0 || h->cllen > 18)
		return -1;
	for (i = 0; i < h->cllen; i++) {
		if (h->cl[i] < '0' || h->cl[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(h->cl[i] - '0');
	}
	return (int64_t)v;
}

/* The refused head as evhttp gets it: without what frames a body (and
 * Expect), closing the connection after its answer. */
int
xd_gate_head_refused(struct evbuffer *dst, const char *b, size_t n)
{
	static const char *const drop[] = { "Content-Length:",
	    "Transfer-Encoding:", "Expect:", "Connection:", NULL };
	const char *p = b, *end = b + n, *nl;
	size_t i, len;
	int first = 1;

	for (; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			break;
		len = (size_t)(nl - p) + 1;
		if (len <= 2 && (*p == '\n' || *p == '\r'))
			break;
		/* the name only where the line holds it: the head is not a
		 * C string (fuzz_gate: strncasecmp read past its end) */
		for (i = 0; !first && drop[i] != NULL; i++)
			if (len > strlen(drop[i]) &&
			    strncasecmp(p, drop[i], strlen(drop[i])) == 0)
				break;
		if (first || drop[i] == NULL)
			if (evbuffer_add(dst, p, len) != 0)
				return -1;
		first = 0;
	}
	return evbuffer_add(dst, "Connection: close\r\n\r\n", 21);
}

int
xd_gate_decide(const struct xd_cfg *c, xd_gate_role_fn role_of,
    const char *b, size_t n, struct xd_gate_verdict *v)
{
	struct xd_gate_head h;
	char path[1024];
	int64_t cl = 0;
	int chunked = 0;

	memset(v, 0, sizeof(*v));
	v->need = XD_ROLE_AUDITOR;
	if (xd_gate_head_parse(b, n, &h) != 0) {
		v->what = XD_GATE_SHUT;
		v->why = "a head that does not parse";
		return v->what;
	}
	v->role = xd_gate_head_role(c, &h);
	if (h.plen < sizeof(path) && role_of != NULL) {
		char m[16];

		memcpy(path, h.path, h.plen);
		path[h.plen] = '\0';
		snprintf(m, sizeof(m), "%.*s", (int)(h.mlen < 15 ? h.mlen : 15),
		    h.method);
		v->need = role_of(m, path);
	}
	if (h.ncl > 1 || h.nte > 1 || (h.ncl == 1 &&
	    (cl = xd_gate_cl_value(&h)) < 0)) {
		v->what = XD_GATE_SHUT;
		v->why = "a head with a bad body length";
		return v->what;
	}
	if (h.nte == 1)
		chunked = h.telen == 7 && strncasecmp(h.te, "chunked", 7) == 0;
	/* a route that needs no role (/healthz) passes without a token,
	 * but never with a body: a tokenless peer sends evhttp no body */
	if (v->role < v->need ||
	    (v->role == XD_ROLE_NONE && (chunked || cl > 0))) {
		/* exec_api.c answers 401 or 403 from what is left (or
		 * /healthz, its body dropped) */
		v->what = XD_GATE_REFUSE;
		return v->what;
	}
	v->what = XD_GATE_PASS;
	if (may_have_body(&h) && chunked)
		v->chunked = 1;
	else if (may_have_body(&h) && cl > 0)
		v->body = (uint64_t)cl;
	return v->what;
}

size_t
xd_gate_head_scan(const char *b, size_t look, size_t *scanned)
{
	size_t n = 0, from = *scanned > 3 ? *scanned - 3 : 0;

	if (b != NULL && look > from &&
	    (n = xd_gate_head_end(b + from, look - from)) != 0)
		n += from;
	*scanned = look;
	return n;
}

/* A whole head is at the start of src: pass it, or refuse it. */
static enum bufferevent_filter_result
head_done(struct xd_conn *k, struct evbuffer *src, struct evbuffer *dst,
    size_t n)
{
	const struct xd_cfg *c = k->xd->cfg;
	const char *b = (const char *)evbuffer_pullup(src, (ev_ssize_t)n);
	struct xd_gate_verdict v;

	if (b == NULL) {
		conn_shut(k, "a head that does not parse");
		return BEV_ERROR;
	}
	switch (xd_gate_decide(c, k->xd->gate->role_of, b, n, &v)) {
	case XD_GATE_SHUT:
		conn_shut(k, v.why);
		return BEV_ERROR;
	case XD_GATE_REFUSE:
		if (xd_gate_head_refused(dst, b, n) != 0) {
			conn_shut(k, "out of memory");
			return BEV_ERROR;
		}
		evbuffer_drain(src, n);
		k->scanned = 0;
		k->state = G_REFUSED;
		k->dropped = 0;
		tcpadmit_conn_arm(&k->ta, REFUSED_MS < c->tcp_head_timeout_ms ?
		    REFUSED_MS : c->tcp_head_timeout_ms);
		return BEV_OK;
	case XD_GATE_PASS:
		break;
	}
	k->scanned = 0;
	if (evbuffer_remove_buffer(src, dst, n) != (int)n) {
		conn_shut(k, "out of memory");
		return BEV_ERROR;
	}
	evtimer_del(k->ta.timer);
	if (v.chunked)
		k->state = G_CHUNKED;
	else if (v.body > 0) {
		k->state = G_BODY;
		k->left = v.body;
	} else
		k->state = G_WAIT;
	return BEV_OK;
}

/*
 * Answers, down to the TLS bufferevent.  evhttp takes an empty filter
 * output for an answer written, and when the answer closes the
 * connection it frees it then, TLS bufferevent and all: what that still
 * held would be lost.  So the last TAIL_DIRECT bytes of what evhttp
 * queued are moved only once the TLS bufferevent has written the rest,
 * and then written with SSL_write at once (the socket takes them; if it
 * does not, they are queued as the rest was: a peer that does not read
 * may lose the end of an answer that closes).
 */
#define TAIL_DIRECT	16384

static enum bufferevent_filter_result
gate_out(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
    enum bufferevent_flush_mode mode, void *arg)
{
	struct xd_conn *k = arg;
	size_t n = evbuffer_get_length(src);
	SSL *ssl;
	ssize_t w;
	int r, fd;

	(void)mode;
	if (n == 0 || evbuffer_get_length(dst) > 0)
		return BEV_NEED_MORE;
	if (n > TAIL_DIRECT) {
		n -= TAIL_DIRECT;
		if (limit >= 0 && n > (size_t)limit)
			n = (size_t)limit;
		if (n == 0)
			return BEV_NEED_MORE;
		evbuffer_remove_buffer(src, dst, n);
		return BEV_OK;
	}
	if ((ssl = bufferevent_openssl_get_ssl(k->under)) != NULL) {
		ERR_clear_error();
		r = SSL_write(ssl, evbuffer_pullup(src, (ev_ssize_t)n), (int)n);
		if (r == (int)n) {
			evbuffer_drain(src, n);
			return BEV_OK;
		}
		ERR_clear_error();
	} else if ((fd = bufferevent_getfd(k->under)) >= 0) {
		/* tcp.plain_http: the same, with send(2); what the socket
		 * does not take is queued */
		if ((w = send(fd, evbuffer_pullup(src, (ev_ssize_t)n), n,
		    MSG_DONTWAIT | MSG_NOSIGNAL)) > 0)
			evbuffer_drain(src, (size_t)w);
		if ((n = evbuffer_get_length(src)) == 0)
			return BEV_OK;
	}
	evbuffer_remove_buffer(src, dst, n);
	return BEV_OK;
}

static enum bufferevent_filter_result
gate_in(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
    enum bufferevent_flush_mode mode, void *arg)
{
	struct xd_conn *k = arg;
	size_t len = evbuffer_get_length(src), n;

	(void)mode;
	if (k->xd == NULL) {    /* the gate stopped: the daemon ends */
		evbuffer_remove_buffer(src, dst, evbuffer_get_length(src));
		return BEV_OK;
	}
	if (k->ta.shut) {
		evbuffer_drain(src, len);
		return BEV_NEED_MORE;
	}
	switch (k->state) {
	case G_HEAD:
		if (len == 0)
			return BEV_NEED_MORE;
		/* the end of the head: an LF, then an empty line; from
		 * where the last look stopped (a byte at a time stays
		 * linear) */
		n = 0;
		if (len > k->scanned) {
			size_t look = len < HEAD_MAX ? len : HEAD_MAX;

			n = xd_gate_head_scan((const char *)evbuffer_pullup(
			    src, (ev_ssize_t)look), look, &k->scanned);
		}
		if (n == 0) {
			if (len >= HEAD_MAX) {
				conn_shut(k, "a head larger than 64 KiB");
				return BEV_ERROR;
			}
			return BEV_NEED_MORE;
		}
		return head_done(k, src, dst, n);
	case G_BODY:
		n = len < k->left ? len : (size_t)k->left;
		if (limit >= 0 && n > (size_t)limit)
			n = (size_t)limit;
		if (n == 0)
			return BEV_NEED_MORE;
		evbuffer_remove_buffer(src, dst, n);
		if ((k->left -= n) == 0)
			k->state = G_WAIT;
		return BEV_OK;
	case G_CHUNKED:
		n = limit >= 0 && len > (size_t)limit ? (size_t)limit : len;
		if (n == 0)
			return BEV_NEED_MORE;
		evbuffer_remove_buffer(src, dst, n);
		return BEV_OK;
	case G_WAIT:
		return BEV_NEED_MORE;
	case G_REFUSED:
		k->dropped += len;
		evbuffer_drain(src, len);
		if (k->dropped > REFUSED_MAX)
			conn_shut(k, "a refused request's body");
		return BEV_NEED_MORE;
	}
	return BEV_NEED_MORE;
}

/*
 * evhttp puts an answer into the filter's output before it enables
 * writing, and the filter moves output down only when something is
 * added while writing is enabled, or when the TLS bufferevent wrote:
 * an answer would sit there.  So what is added is moved down from the
 * loop, once evhttp has enabled writing (then the TLS bufferevent's
 * writes move the rest, UNDER_WRITE_WM at a time).
 */
static void
out_kick(evutil_socket_t fd, short what, void *arg)
{
	struct xd_conn *k = arg;

	(void)fd;
	(void)what;
	bufferevent_flush(k->bev, EV_WRITE, BEV_NORMAL);
}

static void
out_added(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct xd_conn *k = arg;

	(void)buf;
	if (info->n_added > 0 && !event_pending(k->kick, EV_TIMEOUT, NULL))
		event_active(k->kick, EV_TIMEOUT, 0);
}

/* ---- what exec_api.c calls ---- */

struct bufferevent *
xd_gate_bev(struct xd *xd, struct event_base *base, SSL *ssl)
{
	struct xd_gate *g = xd->gate;
	struct bufferevent *under, *bev;
	struct xd_conn *k;

	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (k->ta.timer = evtimer_new(base, conn_timer, k)) == NULL ||
	    (k->kick = evtimer_new(base, out_kick, k)) == NULL) {
		if (k != NULL && k->ta.timer != NULL)
			event_free(k->ta.timer);
		free(k);
		if (ssl != NULL)
			SSL_free(ssl);
		return NULL;
	}
	/* BEV_OPT_CLOSE_ON_FREE: the SSL and the descriptor go with it (and
	 * with the filter, which frees it) */
	under = ssl != NULL ? bufferevent_openssl_socket_new(base, -1, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE) :
	    bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	bev = under == NULL ? NULL : bufferevent_filter_new(under, gate_in,
	    gate_out, BEV_OPT_CLOSE_ON_FREE, conn_gone, k);
	if (bev == NULL || evbuffer_add_cb(bufferevent_get_output(bev),
	    out_added, k) == NULL) {
		if (bev != NULL)
			bufferevent_free(bev);  /* conn_gone frees k */
		else {
			if (under != NULL)
				bufferevent_free(under);
			event_free(k->ta.timer);
			event_free(k->kick);
			free(k);
		}
		return NULL;
	}
	bufferevent_setwatermark(under, EV_READ, 0, UNDER_READ_WM);
	bufferevent_setwatermark(under, EV_WRITE, 0, UNDER_WRITE_WM);
	k->xd = xd;
	k->bev = bev;
	k->under = under;
	k->ta.fd = -1;
	k->state = G_HEAD;
	if (g == NULL) {
		k->xd = NULL;   /* not counted: conn_gone only frees it */
		return bev;
	}
	tcpadmit_conn_add(&g->ta, &k->ta);
	return bev;
}

static struct xd_conn *
conn_of(struct xd *xd, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon != NULL ?
	    evhttp_connection_get_bufferevent(evcon) : NULL;
	struct tcpadmit_conn *t;
	struct xd_conn *k;

	if (bev == NULL || xd->gate == NULL)
		return NULL;
	TAILQ_FOREACH(t, &xd->gate->ta.conns, link)
		if ((k = (struct xd_conn *)t)->bev == bev)
			return k;
	return NULL;
}

void
xd_gate_upgraded(struct xd *xd, struct evhttp_request *req)
{
	struct xd_conn *k = conn_of(xd, req);

	if (k == NULL || k->ta.shut)
		return;
	/* a WebSocket's frames are no request heads: all passes, as a
	 * chunked body does, with no head deadline; the connection is the
	 * terminal's until it closes */
	k->state = G_CHUNKED;
	evtimer_del(k->ta.timer);
	bufferevent_flush(k->bev, EV_READ, BEV_FLUSH);
}

int
xd_gate_chunked(struct xd *xd, struct evhttp_request *req)
{
	struct xd_conn *k = conn_of(xd, req);

	return k != NULL && k->state == G_CHUNKED;
}

void
xd_gate_answered(struct xd *xd, struct evhttp_request *req)
{
	struct xd_conn *k = conn_of(xd, req);

	if (k == NULL || k->ta.shut || k->state != G_WAIT)
		return;
	/* the next head, under a deadline again; one that came already
	 * is passed now, before evhttp looks for it */
	k->state = G_HEAD;
	tcpadmit_conn_arm(&k->ta, xd->cfg->tcp_head_timeout_ms);
	bufferevent_flush(k->bev, EV_READ, BEV_FLUSH);
}

static void
gate_limits(struct xd_gate *g)
{
	const struct xd_cfg *c = g->xd->cfg;

	tcpadmit_set_limits(&g->ta, c->tcp_max_conns, c->tcp_max_conns_per_peer,
	    c->tcp_fd_reserve);
}

int
xd_gate_start(struct xd *xd, struct evhttp_bound_socket *bound,
    xd_gate_role_fn role_of)
{
	struct xd_gate *g = calloc(1, sizeof(*g));

	if (g == NULL)
		return -1;
	tcpadmit_init(&g->ta, xd->base, &gate_names);
	g->xd = xd;
	g->role_of = role_of;
	xd->gate = g;
	gate_limits(g);
	tcpadmit_bind(&g->ta, bound);
	return 0;
}

void
xd_gate_unbind(struct xd *xd)
{
	if (xd->gate != NULL)
		xd->gate->ta.bound = NULL;
}

void
xd_gate_reload(struct xd *xd)
{
	if (xd->gate != NULL)
		gate_limits(xd->gate);
}

/* Their filters may be freed later (evhttp_free): they find no gate
 * and free only themselves. */
static void
conn_forget(struct tcpadmit_conn *t)
{
	evtimer_del(t->timer);
	((struct xd_conn *)t)->xd = NULL;
}

void
xd_gate_stop(struct xd *xd)
{
	struct xd_gate *g = xd->gate;

	if (g == NULL)
		return;
	tcpadmit_stop(&g->ta, conn_forget);
	free(g);
	xd->gate = NULL;
}
