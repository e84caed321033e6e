/*
 * forward.c: absolute-form http:// requests, one exchange at a time.
 *
 * The request head is rewritten to origin form without hop-by-hop
 * headers (Proxy-Authorization never goes upstream); bodies pass through
 * unchanged while http_body_feed() finds where each message ends, so the
 * next request on a keep-alive connection is decided on its own.
 * Pipelined requests wait in the client's input until the exchange
 * before them is complete.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/relay/relay-int.h"

/*
 * 1xx answers passed on before the final one.  An upstream sends one 100
 * Continue and maybe a 103 Early Hints or two; one that keeps sending
 * them would hold the exchange open forever.
 */
#define PX_MAX_INTERIM 8

static void exchange_done(struct px_conn *c);

/*
 * Requests whose head waits in c->up's output for their allow record:
 * the records of one loop pass are written together at its end (one
 * write(2) for all), and only then do the heads go upstream.  Should
 * that write fail, or any write since the first of them was queued,
 * they are refused: no byte of a request goes upstream before its
 * record is in the file.
 */
static TAILQ_HEAD(, px_conn) waiting = TAILQ_HEAD_INITIALIZER(waiting);
static uint64_t waiting_failed0;   /* clog_failed() when the first came */

void
px_forward_unwait(struct px_conn *c)
{
	if (!c->log_wait)
		return;
	TAILQ_REMOVE(&waiting, c, lwentry);
	c->log_wait = 0;
}

void
px_forward_log_written(int ok)
{
	struct px_conn *c;

	ok = ok && clog_failed(px.log) == waiting_failed0;
	while ((c = TAILQ_FIRST(&waiting)) != NULL) {
		px_forward_unwait(c);
		if (PX_GONE(c) || c->up == NULL)
			continue;
		if (ok) {
			px_out_flush(c->up);
			continue;
		}
		px_log(PX_DEBUG, "%s: conn %llu: allow record not written",
		    __func__, (unsigned long long)c->id);
		c->logged_decision = 0;
		px_conn_refuse(c, POL_R_LOG_UNAVAILABLE, NULL);
	}
}

static void
limits(struct http_limits *lim)
{
	lim->max_head = px.cfg->max_head;
	lim->max_line = px.cfg->max_line;
	lim->max_headers = px.cfg->max_headers;
}

struct piece {
	const char *p;
	size_t n;
};

/*
 * A head as it goes on: the pieces of its start line, m's end-to-end
 * headers, the pieces of what follows them (a Connection line), then
 * the empty line.  Written into one reserved stretch of out with one
 * commit: four evbuffer_add calls per header, each running out's
 * callbacks, cost more than the copying.
 */
static void
put_head(struct evbuffer *out, const struct piece *start, size_t nstart,
    const struct http_msg *m, const unsigned char *drop,
    const struct piece *tail, size_t ntail)
{
	unsigned char keep[HTTP_MAX_HEADERS_HARD];
	struct evbuffer_iovec v;
	size_t i, len = 2;
	char *p;

	for (i = 0; i < nstart; i++)
		len += start[i].n;
	for (i = 0; i < ntail; i++)
		len += tail[i].n;
	for (i = 0; i < m->nheaders; i++) {
		const struct http_header *h = &m->headers[i];

		keep[i] = !http_is_hop_by_hop(m, h) &&
		    (drop == NULL || !drop[i]);
		if (keep[i])
			len += h->name_len + h->value_len + 4;
	}
	if (evbuffer_reserve_space(out, (ev_ssize_t)len, &v, 1) < 1 ||
	    v.iov_len < len) {
		/* no contiguous room: piece by piece, as it comes */
		for (i = 0; i < nstart; i++)
			evbuffer_add(out, start[i].p, start[i].n);
		for (i = 0; i < m->nheaders; i++) {
			const struct http_header *h = &m->headers[i];

			if (!keep[i])
				continue;
			evbuffer_add(out, h->name, h->name_len);
			evbuffer_add(out, ": ", 2);
			evbuffer_add(out, h->value, h->value_len);
			evbuffer_add(out, "\r\n", 2);
		}
		for (i = 0; i < ntail; i++)
			evbuffer_add(out, tail[i].p, tail[i].n);
		evbuffer_add(out, "\r\n", 2);
		return;
	}
	p = v.iov_base;
	for (i = 0; i < nstart; i++) {
		memcpy(p, start[i].p, start[i].n);
		p += start[i].n;
	}
	for (i = 0; i < m->nheaders; i++) {
		const struct http_header *h = &m->headers[i];

		if (!keep[i])
			continue;
		memcpy(p, h->name, h->name_len);
		p += h->name_len;
		*p++ = ':';
		*p++ = ' ';
		memcpy(p, h->value, h->value_len);
		p += h->value_len;
		*p++ = '\r';
		*p++ = '\n';
	}
	for (i = 0; i < ntail; i++) {
		memcpy(p, tail[i].p, tail[i].n);
		p += tail[i].n;
	}
	*p++ = '\r';
	*p++ = '\n';
	v.iov_len = len;
	evbuffer_commit_space(out, &v, 1);
}

/*
 * Move the body bytes of the current message from src to dst, as far as
 * they have arrived and dst has room.  Returns -1 on a framing error.
 */
static int
pump_body(struct px_conn *c, struct bufferevent *src, struct bufferevent *dst,
    struct http_body_state *st, uint64_t *count)
{
	struct evbuffer *in = bufferevent_get_input(src);
	struct evbuffer *out = bufferevent_get_output(dst);

	while (!st->done && evbuffer_get_length(in) > 0) {
		struct evbuffer_iovec v;
		long n;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		n = http_body_feed(st, v.iov_base, v.iov_len);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		evbuffer_remove_buffer(in, out, (size_t)n);
		*count += (uint64_t)n;
	}
	/* before the backpressure check: what the socket takes now does
	 * not count against the buffer */
	px_out_flush(dst);
	if (evbuffer_get_length(out) >= px.cfg->tunnel_buffer) {
		bufferevent_disable(src, EV_READ);
		bufferevent_setwatermark(dst, EV_WRITE,
		    px.cfg->tunnel_buffer / 2, 0);
	} else if (!st->done)
		bufferevent_enable(src, EV_READ);
	return 0;
}

/* A header line with a credential's value in it. */
static void
wipe_free(char *p, size_t n)
{
	if (p == NULL)
		return;
	explicit_bzero(p, n);
	free(p);
}

static void
fwd_fail(struct px_conn *c, enum pol_reason reason, const char *why)
{
	px_log(PX_DEBUG, "%s: conn %llu: %s", __func__,
	    (unsigned long long)c->id, why);
	if (!c->resp_head_done) {
		c->fwd_close_after = 1;
		px_conn_log_close(c, reason);
		px_conn_answer(c, reason, why, 0);
	} else
		px_conn_close(c, reason);
}

static void
send_response_head(struct px_conn *c, const struct http_msg *r)
{
	struct evbuffer *out = bufferevent_get_output(c->cli);
	int interim = r->status >= 100 && r->status < 200;
	char line[16];
	struct piece start[3], tail[1];

	/* the parser admits three-digit statuses only */
	memcpy(line, "HTTP/1.1 000 ", 13);
	line[9] = (char)('0' + r->status / 100 % 10);
	line[10] = (char)('0' + r->status / 10 % 10);
	line[11] = (char)('0' + r->status % 10);
	start[0] = (struct piece){ line, 13 };
	start[1] = (struct piece){ r->reason_phrase, r->reason_len };
	start[2] = (struct piece){ "\r\n", 2 };
	if (!interim) {
		if (!r->keep_alive || r->body == HTTP_BODY_UNTIL_CLOSE)
			c->fwd_close_after = 1;
		tail[0] = c->fwd_close_after ?
		    (struct piece){ "Connection: close\r\n", 19 } :
		    (struct piece){ "Connection: keep-alive\r\n", 24 };
	}
	put_head(out, start, 3, r, NULL, tail, interim ? 0 : 1);
	/* a final head goes out with the first body bytes (pump_body) */
	if (interim)
		px_out_flush(c->cli);
}

static void
read_response(struct px_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->up);
	struct http_limits lim;
	struct http_msg r;
	const char *why = NULL;
	enum http_status st;
	size_t len, n;

	if (PX_GONE(c) || c->state != PX_S_FWD)
		return;
	limits(&lim);
	while (!c->resp_head_done) {
		len = evbuffer_get_length(in);
		if (len == 0)
			return;
		if (evbuffer_get_length(bufferevent_get_output(c->cli)) >=
		    px.cfg->tunnel_buffer) {
			/* heads obey the same backpressure as bodies: read
			 * on when the client has taken its share (fwd_write) */
			bufferevent_disable(c->up, EV_READ);
			bufferevent_setwatermark(c->cli, EV_WRITE,
			    px.cfg->tunnel_buffer / 2, 0);
			return;
		}
		n = len < lim.max_head ? len : lim.max_head;
		st = http_parse_response_resume((const char *)evbuffer_pullup(
		    in, (ev_ssize_t)n), n, &lim, c->req->m, &c->resp_ps, &r,
		    &why);
		if (st == HTTP_PARSE_INCOMPLETE)
			return;
		memset(&c->resp_ps, 0, sizeof(c->resp_ps));
		if (st != HTTP_PARSE_OK || r.status == 101) {
			fwd_fail(c, POL_R_UPSTREAM_FAILED, why ? why : "The "
			    "upstream answered with a protocol switch.");
			return;
		}
		if (r.status < 200 && ++c->resp_interim > PX_MAX_INTERIM) {
			fwd_fail(c, POL_R_TOO_MANY_INTERIM, "The upstream sent "
			    "too many interim (1xx) answers.");
			return;
		}
		send_response_head(c, &r);
		c->bytes_down += r.head_len;
		evbuffer_drain(in, r.head_len);
		if (r.status >= 100 && r.status < 200)
			continue;   /* 100 Continue: the real answer follows */
		c->resp_head_done = 1;
		http_body_init(&c->resp_body, r.body, r.content_length,
		    lim.max_line);
		if (r.body == HTTP_BODY_NONE)
			c->resp_body.done = 1;
	}
	if (pump_body(c, c->up, c->cli, &c->resp_body, &c->bytes_down) != 0) {
		px_conn_close(c, POL_R_UPSTREAM_FAILED);
		return;
	}
	if (c->resp_body.done && c->req_body.done)
		exchange_done(c);
}

static void
up_read(struct bufferevent *bev, void *arg)
{
	struct px_conn *c = arg;

	px_conn_touch(c);
	read_response(c);
}

static void
cli_body_read(struct bufferevent *bev, void *arg)
{
	struct px_conn *c = arg;

	if (PX_GONE(c) || c->state != PX_S_FWD)
		return;
	px_conn_touch(c);
	if (c->req_body.done)
		return;   /* a pipelined request waits its turn */
	if (pump_body(c, c->cli, c->up, &c->req_body, &c->bytes_up) != 0) {
		px_conn_close(c, POL_R_BAD_REQUEST);
		return;
	}
	if (c->req_body.done) {
		/* hold pipelined bytes to one head's worth */
		bufferevent_setwatermark(c->cli, EV_READ, 0,
		    px.cfg->max_head + 1);
		if (c->resp_body.done && c->resp_head_done)
			exchange_done(c);
	}
}

/* Output drained: resume the side backpressure stopped. */
static void
fwd_write(struct bufferevent *dst, void *arg)
{
	struct px_conn *c = arg;

	if (PX_GONE(c) || c->state != PX_S_FWD)
		return;
	/* drained: the next bytes are written as they come (px_out_flush) */
	if (evbuffer_get_length(bufferevent_get_output(dst)) == 0)
		bufferevent_disable(dst, EV_WRITE);
	bufferevent_setwatermark(dst, EV_WRITE, 0, 0);
	if (dst == c->up && !c->req_body.done)
		bufferevent_enable(c->cli, EV_READ);
	else if (dst == c->cli && c->up != NULL && !c->resp_body.done) {
		bufferevent_enable(c->up, EV_READ);
		/* a head held back by the watermark is already buffered:
		 * no read event will come for it */
		if (!c->resp_head_done &&
		    evbuffer_get_length(bufferevent_get_input(c->up)) > 0)
			read_response(c);
	}
}

static void
up_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;

	if ((what & BEV_EVENT_EOF) && c->resp_head_done &&
	    c->resp_body.kind == HTTP_BODY_UNTIL_CLOSE) {
		/* the body ends with the connection */
		read_response(c);
		if (PX_GONE(c) || c->state != PX_S_FWD)
			return;   /* read_response closed it or moved on */
		c->resp_body.done = 1;
		c->req_body.done = 1;
		c->fwd_close_after = 1;
		exchange_done(c);
		return;
	}
	fwd_fail(c, POL_R_UPSTREAM_FAILED, (what & BEV_EVENT_EOF) ?
	    "The upstream closed the connection before its answer was "
	    "complete." : "The upstream connection failed.");
}

static void
cli_fwd_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;

	px_conn_close(c, POL_R_NONE);
}

static void
exchange_done(struct px_conn *c)
{
	if (PX_GONE(c))
		return;
	px_conn_log_close(c, POL_R_NONE);
	if (c->fwd_close_after) {
		/* drop the upstream; flush the answer, then close */
		px_upstream_drop(c);
		px_conn_flush_close(c, POL_R_NONE);
		return;
	}
	px_conn_next_request(c);
}

void
px_forward_start(struct px_conn *c)
{
	struct evbuffer *out;
	/* a request without a body sends nothing upstream but its head:
	 * that can wait for the pass's one log write; one with a body
	 * streams it, so its record is written now */
	int queued = 0;
	unsigned char drop[HTTP_MAX_HEADERS_HARD];
	char *inject;
	size_t inject_len;

	if (PX_GONE(c))
		return;
	/* placeholders: what goes in, what comes out (for the record) */
	inject = px_creds_plan(c, drop, &inject_len);
	if (c->req->body == HTTP_BODY_NONE) {
		int rc = px_rec_allow_queued(c);

		if (rc < 0) {
			wipe_free(inject, inject_len);
			px_conn_refuse(c, POL_R_LOG_UNAVAILABLE, NULL);
			return;
		}
		queued = rc == 0;
		c->logged_decision = 1;
	} else if (px_conn_log_allow(c) != 0) {
		wipe_free(inject, inject_len);
		px_conn_refuse(c, POL_R_LOG_UNAVAILABLE, NULL);
		return;
	}
	c->state = PX_S_FWD;
	c->resp_head_done = 0;
	c->resp_interim = 0;
	memset(&c->resp_ps, 0, sizeof(c->resp_ps));
	c->fwd_close_after = !c->req->keep_alive || px.draining;
	memset(&c->resp_body, 0, sizeof(c->resp_body));
	http_body_init(&c->req_body, c->req->body, c->req->content_length,
	    px.cfg->max_line);
	if (c->req->body == HTTP_BODY_NONE)
		c->req_body.done = 1;

	/* writes go out from the callback that queues them (px_out_flush);
	 * libevent writes only what a socket did not take at once */
	if (evbuffer_get_length(bufferevent_get_output(c->cli)) == 0)
		bufferevent_disable(c->cli, EV_WRITE);
	if (evbuffer_get_length(bufferevent_get_output(c->up)) == 0)
		bufferevent_disable(c->up, EV_WRITE);
	out = bufferevent_get_output(c->up);
	/* the method as parsed, whole (c->method is a bounded copy for
	 * the records) */
	{
		struct piece start[4] = {
			{ c->req->method, c->req->method_len }, { " ", 1 },
			{ c->path, c->path_len }, { " HTTP/1.1\r\n", 11 },
		};
		struct piece tail[1] = { { inject, inject_len } };

		put_head(out, start, 4, c->req, drop, tail, inject ? 1 : 0);
		wipe_free(inject, inject_len);
	}
	c->bytes_up += c->head_len;

	bufferevent_setcb(c->up, up_read, fwd_write, up_event, c);
	bufferevent_setcb(c->cli, cli_body_read, fwd_write, cli_fwd_event, c);
	bufferevent_setwatermark(c->cli, EV_READ, 0, 0);
	bufferevent_setwatermark(c->up, EV_READ, 0, 0);
	bufferevent_enable(c->up, EV_READ);
	bufferevent_enable(c->cli, EV_READ);
	if (queued) {
		if (TAILQ_EMPTY(&waiting))
			waiting_failed0 = clog_failed(px.log);
		TAILQ_INSERT_TAIL(&waiting, c, lwentry);
		c->log_wait = 1;
	} else
		px_out_flush(c->up);
	evtimer_del(c->timer);
	{
		struct timeval tv = { px.cfg->idle_timeout_s, 0 };

		evtimer_add(c->timer, &tv);
	}
	if (!c->req_body.done) {
		/* the body sent with the head is pumped now, and a framing
		 * error in it closes c (issue 20: a trailer line without a
		 * colon, in the same write as the head, closed c here and
		 * the rest of this function used the freed connection) */
		cli_body_read(c->cli, c);
		if (PX_GONE(c) || c->state != PX_S_FWD)
			return;
	} else
		bufferevent_setwatermark(c->cli, EV_READ, 0,
		    px.cfg->max_head + 1);
	if (evbuffer_get_length(bufferevent_get_input(c->up)) > 0)
		read_response(c);
}
