/*
 * exec_os_port.c: the port proxy (DESIGN.md, "Ports, terminals and
 * previews"), one implementation behind two routes: OpenSandbox's
 * ANY /sandboxes/{id}/proxy/{port}/... (xd_os_port, here) and the native
 * ANY /v1/sandboxes/{id}/ports/{port}/... (exec_api.c), both through
 * xd_port_proxy: forwarded over HTTP to 127.0.0.1:{port} inside the
 * sandbox, so that a server a background command started (a dev server,
 * python3 -m http.server) is reachable from the host's side.  The
 * caller's call is the caller's: xd_port_call's callbacks answer an
 * error, free it or keep it.
 *
 * How it reaches in: the sandbox has no network device, only its own
 * loopback.  The backend makes a socket inside the sandbox's network
 * namespace (sbx_backend.net_socket: setns for that one socket(2) call,
 * then back), and the daemon connects it to 127.0.0.1:{port} there and
 * relays from its own side.  Nothing is added to the sandbox (no
 * device, no route, no listener of ours) and nothing of the host's
 * network is reachable from inside; the alternative, a relay through
 * the shim on a Unix socket in the workspace, would put a socket the
 * sandbox can open and race in its own file system.  Where the host
 * cannot reach the sandbox's network at all (gvisor: its stack is the
 * sentry's) the backend's port_connect has its agent connect inside and
 * hands back the agent's connection at once: its answer (port_reply) is
 * read in the loop, bounded (ANSWER_S), before the request goes up, and
 * then its bytes are the TCP connection's.  Nothing waits for it: a
 * server inside that never accepts stalls its own request, not the
 * daemon.
 *
 * The exchange: the request as evhttp read it (body whole, at most
 * max_body_bytes) goes up as HTTP/1.0 with Connection: close, so the
 * answer ends with the connection (or its Content-Length) and is never
 * chunked; hop-by-hop headers are dropped both ways, and so is the
 * access header.  The answer streams back as it comes, the upstream's
 * reads paused while the client has more than stream_watermark bytes
 * queued.
 *
 * A WebSocket (a GET with Upgrade) goes up as HTTP/1.1 with its Upgrade;
 * on the upstream's 101 the daemon sends that head to the client itself
 * on the bufferevent of evhttp's connection (evhttp has no upgrade, and
 * answers nothing more on it), and from then on relays bytes both ways
 * without reading them (each side paused while the other holds
 * RELAY_MAX unwritten), until either side ends; then evhttp's connection
 * is freed, which frees the request and that bufferevent.  Any other
 * answer to an upgrade is 502.
 *
 * Access (exec_os.c checks it before calling here): the header
 * OpenSandbox-Secure-Access with the token endpoints/{port} gave (an
 * HMAC of the sandbox's key and the port: it opens that port of that
 * sandbox only, not execd), or a signed path, the port segment
 * "{port}@{expires}.{sig}" that endpoints/{port}?expires= gave, for a
 * browser preview that cannot send headers, refused after expires.
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "sandbox-glue/executor/execd/exec_os-int.h"

#define HEAD_MAX	(64 * 1024)
#define READ_S		300
#define WRITE_S		60

#define RELAY_MAX	(1024 * 1024)
#define ANSWER_S	10      /* the backend's answer (port_reply) */
#define ANSWER_MAX	4096

struct pxy {
	struct xd_port_call o;
	struct evhttp_connection *evcon;        /* closecb set on it */
	struct bufferevent *up;
	struct bufferevent *down;       /* a WebSocket's: the client's,
	                                 * taken from evhttp after the 101 */
	long port;
	int started;                    /* the reply's head is sent */
	int paused;
	int ws;                         /* an Upgrade request */
	int closing;                    /* one side ended: the other's
	                                 * output drains, then the end */
	int handshake;                  /* the backend's answer (port_reply)
	                                 * comes first: the request waits */
	TAILQ_ENTRY(pxy) link;          /* in pxys from the start to the
	                                 * free (xd_port_proxy_drain) */
};

/* Every exchange under way: the daemon's drain ends them (one daemon per
 * process). */
static TAILQ_HEAD(, pxy) pxys = TAILQ_HEAD_INITIALIZER(pxys);

/* Hop-by-hop, or ours: never forwarded either way. */
static int
hop(const char *h)
{
	static const char *const names[] = { "Connection", "Keep-Alive",
	    "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate",
	    "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Host",
	    "Content-Length", "OpenSandbox-Secure-Access",
	    "X-EXECD-ACCESS-TOKEN", "OPEN-SANDBOX-API-KEY", NULL };
	size_t i;

	for (i = 0; names[i] != NULL; i++)
		if (strcasecmp(h, names[i]) == 0)
			return 1;
	return 0;
}

static void
pxy_free(struct pxy *p)
{
	TAILQ_REMOVE(&pxys, p, link);
	if (p->up != NULL)
		bufferevent_free(p->up);
	if (p->evcon != NULL) {
		evhttp_connection_set_closecb(p->evcon, NULL, NULL);
		p->evcon = NULL;
	}
	free(p);
}

static void
efail(const struct xd_port_call *o, int status, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
efail(const struct xd_port_call *o, int status, const char *code,
    const char *fmt, ...)
{
	char m[XD_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	o->fail(o->arg, status, code, m);
}

/* Ends the exchange: the reply's end if it was started, else an error
 * (status, code, message). */
static void
pxy_end(struct pxy *p, int status, const char *code, const char *msg)
{
	struct xd_port_call o = p->o;
	int started = p->started;

	pxy_free(p);
	if (started) {
		evhttp_send_reply_end(o.req);
		o.done(o.arg);
	} else
		o.fail(o.arg, status, code, msg);
}

static void
flushed(struct evhttp_connection *evcon, void *arg)
{
	struct pxy *p = arg;

	(void)evcon;
	if (p->paused && xd_req_queued(p->o.req) <=
	    p->o.xd->cfg->stream_watermark / 2) {
		p->paused = 0;
		bufferevent_enable(p->up, EV_READ);
	}
}

static void
client_closed(struct evhttp_connection *evcon, void *arg)
{
	struct pxy *p = arg;
	struct xd_port_call o = p->o;

	(void)evcon;
	p->evcon = NULL;
	/* evhttp left the request to us: ending it frees it */
	pxy_free(p);
	if (o.req != NULL)
		evhttp_send_reply_end(o.req);
	o.done(o.arg);
}

/* Only visible ASCII (and, in values, spaces, tabs and bytes above
 * 0x7f, as RFC 9110's obs-text). */
static int
visible(const char *s, int value)
{
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p; p++)
		if (*p == 0x7f || (*p < 0x21 && !(value && (*p == ' ' ||
		    *p == '\t'))) || (!value && *p > 0x7f))
			return 0;
	return 1;
}

int
xd_os_port_head(char *h, int upgrade, long *status, const char **reason,
    void (*fn)(void *arg, const char *name, const char *value), void *arg)
{
	char *line, *save = NULL, *c, *sp;
	int first = 1, chunked = 0;

	*status = 0;
	*reason = "";
	for (line = strtok_r(h, "\r\n", &save); line != NULL; line =
	    strtok_r(NULL, "\r\n", &save)) {
		if (first) {
			first = 0;
			if (strncmp(line, "HTTP/1.", 7) != 0 || strlen(line) < 12 ||
			    line[8] != ' ' || strspn(line + 9, "0123456789") !=
			    3 || (line[12] != ' ' && line[12] != '\0'))
				return -1;
			*status = strtol(line + 9, NULL, 10);
			if (upgrade ? *status != 101 : (*status < 200 ||
			    *status > 599))
				return -1;
			*reason = line[12] == ' ' ? line + 13 : "";
			if (!visible(*reason, 1))
				return -1;
			continue;
		}
		if ((c = strchr(line, ':')) == NULL || c == line ||
		    ((sp = strpbrk(line, " \t")) != NULL && sp < c))
			return -1;
		*c++ = '\0';
		c += strspn(c, " \t");
		/* a name of visible characters, a value without controls:
		 * what the client gets is nothing the sandbox could use to
		 * split or smuggle a header */
		if (!visible(line, 0) || !visible(c, 1))
			return -1;
		if (strcasecmp(line, "Transfer-Encoding") == 0)
			chunked = 1;
		if (strcasecmp(line, "Content-Length") == 0) {
			if (!c[0] || c[strspn(c, "0123456789")] != '\0' ||
			    strlen(c) > 18)
				return -1;
			fn(arg, "Content-Length", c);
		} else if (!hop(line) || (upgrade && strcasecmp(line,
		    "Upgrade") == 0))
			fn(arg, line, c);
	}
	/* a 1xx would be followed by another head (not for an HTTP/1.0
	 * request), and chunked is not for one either */
	return first || chunked ? -1 : 0;
}

static void
add_header(void *arg, const char *name, const char *value)
{
	evhttp_add_header(arg, name, value);
}

/* The answer's head, whole in in: start the reply.  0, or -1 with the
 * 502 already sent (p freed). */
static int
head(struct pxy *p, struct evbuffer *in, size_t hlen)
{
	struct evkeyvalq *oh = evhttp_request_get_output_headers(p->o.req);
	char *h = malloc(hlen + 1);
	const char *reason;
	long status;

	if (h == NULL) {
		pxy_end(p, 500, "RUNTIME_ERROR", "out of memory");
		return -1;
	}
	evbuffer_remove(in, h, hlen);
	h[hlen] = '\0';
	if (xd_os_port_head(h, 0, &status, &reason, add_header, oh) != 0) {
		free(h);
		evhttp_clear_headers(oh);
		pxy_end(p, 502, "BAD_GATEWAY", "the server in the sandbox "
		    "answered with no HTTP/1 head sluice can forward (a "
		    "malformed head, a 1xx, or chunked to an HTTP/1.0 "
		    "request)");
		return -1;
	}
	if (p->o.mark != NULL)
		evhttp_add_header(oh, p->o.mark, "1");
	evhttp_send_reply_start(p->o.req, (int)status, reason);
	free(h);
	p->started = 1;
	return 0;
}

/* ---- a WebSocket: after the 101, bytes both ways ---- */

static void
ws_header(void *arg, const char *name, const char *value)
{
	evbuffer_add_printf(arg, "%s: %s\r\n", name, value);
}

static void
ws_end(struct pxy *p)
{
	struct xd_port_call o = p->o;
	struct evhttp_connection *evcon = p->evcon;

	/* evhttp's connection owns the client's bufferevent and the
	 * request: freeing it frees both */
	if (evcon != NULL)
		evhttp_connection_set_closecb(evcon, NULL, NULL);
	p->evcon = NULL;
	TAILQ_REMOVE(&pxys, p, link);
	if (p->up != NULL)
		bufferevent_free(p->up);
	free(p);
	if (evcon != NULL)
		evhttp_connection_free(evcon);
	o.done(o.arg);
}

static void ws_read(struct bufferevent *bev, void *arg);
static void ws_event(struct bufferevent *bev, short what, void *arg);
static void ws_write(struct bufferevent *bev, void *arg);

static void
ws_read(struct bufferevent *bev, void *arg)
{
	struct pxy *p = arg;
	struct bufferevent *to = bev == p->up ? p->down : p->up;
	struct evbuffer *o = bufferevent_get_output(to);

	evbuffer_add_buffer(o, bufferevent_get_input(bev));
	if (evbuffer_get_length(o) >= RELAY_MAX) {
		/* the other side is slow: read no more until it drained */
		bufferevent_disable(bev, EV_READ);
		bufferevent_setwatermark(to, EV_WRITE, RELAY_MAX / 2, 0);
	}
}

/* to has written down to half (or, closing, all): the side that feeds
 * it reads again (or the end) */
static void
ws_write(struct bufferevent *to, void *arg)
{
	struct pxy *p = arg;
	struct bufferevent *from = to == p->up ? p->down : p->up;

	if (p->closing) {
		if (evbuffer_get_length(bufferevent_get_output(to)) == 0)
			ws_end(p);
		return;
	}
	bufferevent_setwatermark(to, EV_WRITE, 0, 0);
	bufferevent_enable(from, EV_READ);
}

static void
ws_event(struct bufferevent *bev, short what, void *arg)
{
	struct pxy *p = arg;
	struct bufferevent *to = bev == p->up ? p->down : p->up;

	/* either side's end or error ends both, once what it sent is
	 * written to the other (bounded: RELAY_MAX and that side's
	 * write timeout) */
	if ((what & BEV_EVENT_EOF) && !p->closing) {
		struct timeval wt = { WRITE_S, 0 };

		ws_read(bev, p);
		if (evbuffer_get_length(bufferevent_get_output(to)) > 0) {
			p->closing = 1;
			bufferevent_disable(bev, EV_READ);
			bufferevent_disable(to, EV_READ);
			bufferevent_setwatermark(to, EV_WRITE, 0, 0);
			bufferevent_set_timeouts(to, NULL, &wt);
			return;
		}
	}
	ws_end(p);
}

/* The upstream's 101 in in: send it to the client raw and relay. */
static int
ws_start(struct pxy *p, struct evbuffer *in, size_t hlen)
{
	struct evbuffer *hb;
	const char *reason;
	char *h = malloc(hlen + 1);
	long status;

	if (h == NULL || (hb = evbuffer_new()) == NULL) {
		free(h);
		pxy_end(p, 500, "RUNTIME_ERROR", "out of memory");
		return -1;
	}
	evbuffer_remove(in, h, hlen);
	h[hlen] = '\0';
	evbuffer_add_printf(hb, "HTTP/1.1 101 Switching Protocols\r\n");
	if (xd_os_port_head(h, 1, &status, &reason, ws_header, hb) != 0 ||
	    p->evcon == NULL || (p->down = evhttp_connection_get_bufferevent(
	    p->evcon)) == NULL) {
		free(h);
		evbuffer_free(hb);
		pxy_end(p, 502, "BAD_GATEWAY", "the server in the sandbox did "
		    "not switch to the protocol asked for (no 101 sluice can "
		    "forward)");
		return -1;
	}
	free(h);
	evbuffer_add_printf(hb, "Connection: Upgrade\r\n\r\n");
	/* evhttp answers nothing more on this connection: its
	 * bufferevent is ours until ws_end frees the connection */
	p->started = 1;
	/* the TCP listener's gate passes what comes from now on */
	xd_gate_upgraded(p->o.xd, p->o.req);
	bufferevent_setcb(p->down, ws_read, ws_write, ws_event, p);
	bufferevent_setcb(p->up, ws_read, ws_write, ws_event, p);
	bufferevent_set_timeouts(p->down, NULL, NULL);
	bufferevent_set_timeouts(p->up, NULL, NULL);
	evbuffer_add_buffer(bufferevent_get_output(p->down), hb);
	evbuffer_free(hb);
	evbuffer_add_buffer(bufferevent_get_output(p->down), in);
	bufferevent_enable(p->down, EV_READ | EV_WRITE);
	bufferevent_enable(p->up, EV_READ | EV_WRITE);
	/* what the client sent after its head (it should wait for the
	 * 101, but may not) */
	if (evbuffer_get_length(bufferevent_get_input(p->down)) > 0)
		ws_read(p->down, p);
	return 0;
}

/* The backend's answer to port_connect at the start of in: 0 connected
 * (the request goes up now), -1 not yet or the exchange ended. */
static int
answer(struct pxy *p, struct evbuffer *in)
{
	const struct sbx_backend *be = p->o.box->be;
	size_t len = evbuffer_get_length(in), used = 0;
	struct timeval rt = { READ_S, 0 }, wt = { WRITE_S, 0 };
	char err[XD_ERR_MAX], m[XD_ERR_MAX + 80];
	unsigned char *b;
	int inside = 0, r;

	if (len > ANSWER_MAX)
		len = ANSWER_MAX;
	if ((b = evbuffer_pullup(in, (ev_ssize_t)len)) == NULL && len > 0) {
		pxy_end(p, 500, "RUNTIME_ERROR", "out of memory");
		return -1;
	}
	r = be->port_reply(b, len, &used, &inside, err, sizeof(err));
	if (r == 1 && len == ANSWER_MAX)
		r = errf(err, sizeof(err), "the sandbox's agent: protocol "
		    "error");
	if (r == 1)
		return -1;
	if (r == -2) {
		snprintf(m, sizeof(m), "nothing listens on port %ld in the "
		    "sandbox (127.0.0.1:%ld): %s", p->port, p->port,
		    strerror(inside));
		pxy_end(p, 502, "PORT_UNREACHABLE", m);
		return -1;
	}
	if (r != 0) {
		pxy_end(p, 409, "SANDBOX_NOT_RUNNING", err);
		return -1;
	}
	evbuffer_drain(in, used);
	p->handshake = 0;
	bufferevent_set_timeouts(p->up, &rt, &wt);
	bufferevent_enable(p->up, EV_WRITE);
	return 0;
}

static void
up_read(struct bufferevent *bev, void *arg)
{
	struct pxy *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr e;

	if (p->handshake && answer(p, in) != 0)
		return;
	if (!p->started) {
		e = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (e.pos < 0) {
			if (evbuffer_get_length(in) > HEAD_MAX)
				pxy_end(p, 502, "BAD_GATEWAY", "the server in the "
				    "sandbox sent a head of more than 64 KiB");
			return;
		}
		/* a WebSocket's head is the upgrade; the rest is frames */
		if (p->ws) {
			(void)ws_start(p, in, (size_t)e.pos + 4);
			return;
		}
		if (head(p, in, (size_t)e.pos + 4) != 0)
			return;
	}
	if (evbuffer_get_length(in) == 0)
		return;
	evhttp_send_reply_chunk_with_cb(p->o.req, in, flushed, p);
	if (xd_req_queued(p->o.req) > p->o.xd->cfg->stream_watermark) {
		p->paused = 1;
		bufferevent_disable(bev, EV_READ);
	}
}

static void
up_event(struct bufferevent *bev, short what, void *arg)
{
	struct pxy *p = arg;
	char m[160];

	if (what & BEV_EVENT_CONNECTED)
		return;
	if (p->handshake) {
		pxy_end(p, 409, "SANDBOX_NOT_RUNNING", what & BEV_EVENT_TIMEOUT ?
		    "the sandbox's agent did not answer" : "the sandbox's "
		    "agent closed without an answer");
		return;
	}
	if ((what & BEV_EVENT_EOF) && p->started) {
		/* the end of the answer (HTTP/1.0: the close) */
		up_read(bev, p);
		pxy_end(p, 0, NULL, NULL);
		return;
	}
	if (p->started) {
		/* cut short: the client sees the connection end early */
		pxy_end(p, 0, NULL, NULL);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT)
		snprintf(m, sizeof(m), "the server on port %ld in the sandbox "
		    "did not answer in time", p->port);
	else if (what & BEV_EVENT_EOF)
		snprintf(m, sizeof(m), "the server on port %ld in the sandbox "
		    "closed without an answer", p->port);
	else
		snprintf(m, sizeof(m), "nothing listens on port %ld in the "
		    "sandbox (127.0.0.1:%ld): %s", p->port, p->port,
		    strerror(EVUTIL_SOCKET_ERROR()));
	pxy_end(p, 502, "PORT_UNREACHABLE", m);
}

void
xd_port_proxy(const struct xd_port_call *oc, long port, const char *rest,
    const char *q)
{
	struct evhttp_request *req = oc->req;
	struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
	struct evbuffer *body = evhttp_request_get_input_buffer(req), *o;
	const char *upgrade, *mn;
	struct timeval rt = { READ_S, 0 }, wt = { WRITE_S, 0 };
	struct sockaddr_in sin;
	struct evkeyval *kv;
	struct pxy *p;
	char err[XD_ERR_MAX];
	int fd, connected = 0;

	switch (evhttp_request_get_command(req)) {
	case EVHTTP_REQ_GET: mn = "GET"; break;
	case EVHTTP_REQ_POST: mn = "POST"; break;
	case EVHTTP_REQ_HEAD: mn = "HEAD"; break;
	case EVHTTP_REQ_PUT: mn = "PUT"; break;
	case EVHTTP_REQ_DELETE: mn = "DELETE"; break;
	case EVHTTP_REQ_OPTIONS: mn = "OPTIONS"; break;
	case EVHTTP_REQ_PATCH: mn = "PATCH"; break;
	default:
		efail(oc, 405, "METHOD_NOT_ALLOWED", "the port proxy "
		    "forwards GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
		return;
	}
	/* a GET is let through while draining (on a connection kept
	 * alive), but an exchange begun now would only be ended by the
	 * drain (xd_port_proxy_drain) */
	if (oc->xd->draining) {
		efail(oc, 503, "UNAVAILABLE", "the executor is shutting down");
		return;
	}
	upgrade = evhttp_find_header(ih, "Upgrade");
	if (upgrade != NULL && (strcmp(mn, "GET") != 0 || strpbrk(upgrade,
	    "\r\n") != NULL)) {
		efail(oc, 400, "INVALID_REQUEST", "an Upgrade is a GET");
		return;
	}
	if (oc->box->be->net_socket == NULL &&
	    oc->box->be->port_connect == NULL) {
		efail(oc, 501, "NOT_SUPPORTED", "the port proxy: the %s "
		    "backend's network is not reachable from the host",
		    oc->box->be->name);
		return;
	}
	/* made inside (gvisor's agent): asked for here, its answer read
	 * in the loop (answer) before the request goes up */
	if (oc->box->be->net_socket == NULL) {
		connected = 1;
		fd = oc->box->be->port_connect(&oc->box->rec, (int)port, err,
		    sizeof(err));
	} else
		fd = oc->box->be->net_socket(&oc->box->rec, err, sizeof(err));
	if (fd < 0) {
		efail(oc, 409, "SANDBOX_NOT_RUNNING", "%s", err);
		return;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL || (p->up =
	    bufferevent_socket_new(oc->xd->base, fd, BEV_OPT_CLOSE_ON_FREE)) ==
	    NULL) {
		if (p == NULL || p->up == NULL)
			close(fd);
		free(p);
		efail(oc, 500, "RUNTIME_ERROR", "out of memory");
		return;
	}
	p->o = *oc;
	TAILQ_INSERT_TAIL(&pxys, p, link);
	p->port = port;
	p->ws = upgrade != NULL;
	p->handshake = connected;
	o = bufferevent_get_output(p->up);
	/* an upgrade needs HTTP/1.1 (RFC 6455); anything else goes as
	 * HTTP/1.0, so that its answer ends with the connection */
	evbuffer_add_printf(o, "%s %s%s%s HTTP/1.%d\r\nHost: 127.0.0.1:%ld\r\n"
	    "Connection: %s\r\n", mn, rest[0] ? rest : "/", q ? "?" : "",
	    q ? q : "", p->ws, port, p->ws ? "Upgrade" : "close");
	if (p->ws)
		evbuffer_add_printf(o, "Upgrade: %s\r\n", upgrade);
	TAILQ_FOREACH(kv, ih, next)
		if (!hop(kv->key) && (oc->drop == NULL || strcasecmp(kv->key,
		    oc->drop) != 0) && strpbrk(kv->key, "\r\n") == NULL &&
		    strpbrk(kv->value, "\r\n") == NULL)
			evbuffer_add_printf(o, "%s: %s\r\n", kv->key, kv->value);
	if (evbuffer_get_length(body) > 0 || strcmp(mn, "POST") == 0 ||
	    strcmp(mn, "PUT") == 0 || strcmp(mn, "PATCH") == 0)
		evbuffer_add_printf(o, "Content-Length: %zu\r\n",
		    evbuffer_get_length(body));
	evbuffer_add(o, "\r\n", 2);
	evbuffer_add_buffer(o, body);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bufferevent_setcb(p->up, up_read, NULL, up_event, p);
	if (p->handshake) {
		struct timeval at = { ANSWER_S, 0 };

		bufferevent_set_timeouts(p->up, &at, &wt);
	} else
		bufferevent_set_timeouts(p->up, &rt, &wt);
	oc->wait(oc->arg);
	if ((p->evcon = evhttp_request_get_connection(req)) != NULL)
		evhttp_connection_set_closecb(p->evcon, client_closed, p);
	if (!connected && bufferevent_socket_connect(p->up, (struct sockaddr *)
	    &sin, sizeof(sin)) != 0) {
		snprintf(err, sizeof(err), "nothing listens on port %ld in the "
		    "sandbox: %s", port, strerror(errno));
		pxy_end(p, 502, "PORT_UNREACHABLE", err);
		return;
	}
	/* the request waits for the backend's answer (answer) */
	bufferevent_enable(p->up, p->handshake ? EV_READ : EV_READ | EV_WRITE);
}

/*
 * The daemon drains (SIGTERM): a WebSocket relay is no answer under way
 * and would hold the exit for good, so it ends at the drain's start
 * (all 0), as a terminal's attachment does; an answer still coming
 * when drain_s has passed is cut (all 1), as foreground commands are
 * cancelled then, and one not started gets a 503.  What the client sees
 * is the connection's end, as when the server inside goes.
 */
void
xd_port_proxy_drain(int all)
{
	struct pxy *p, *next;

	for (p = TAILQ_FIRST(&pxys); p != NULL; p = next) {
		next = TAILQ_NEXT(p, link);
		if (p->ws && p->started)
			ws_end(p);
		else if (all)
			pxy_end(p, 503, "UNAVAILABLE", "the executor is "
			    "shutting down");
	}
}

/* ---- OpenSandbox's /proxy/{port} ---- */

static void
os_fail(void *arg, int status, const char *code, const char *msg)
{
	xd_os_reply_err(arg, status, code, "%s", msg);
}

static void
os_done(void *arg)
{
	xd_os_call_free(arg);
}

static void
os_wait(void *arg)
{
	xd_os_call_wait(arg);
}

void
xd_os_port(struct xd_os_call *k, long port, const char *rest)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(k->req);
	struct xd_port_call o;

	memset(&o, 0, sizeof(o));
	o.xd = k->xd;
	o.box = k->box;
	o.req = k->req;
	o.fail = os_fail;
	o.done = os_done;
	o.wait = os_wait;
	o.arg = k;
	xd_port_proxy(&o, port, rest, uri != NULL ? evhttp_uri_get_query(uri) :
	    NULL);
}
