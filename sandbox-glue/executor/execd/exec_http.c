/*
 * exec_http.c: the answers of sluice-execd.  Every error has one shape,
 * {"error": {"code", "message", ...}}, with the codes of DESIGN.md's
 * Executor API; output bytes become JSON text here.
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "proxy/lib/apireply.h"
#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"

/* Length of the UTF-8 sequence at b[0..n): 1..4 when valid and whole,
 * 0 when cut short by n (could still be valid), -1 invalid. */
static int
utf8_seq(const unsigned char *b, size_t n)
{
	uint32_t cp;

	return util_utf8_seq(b, n, &cp, NULL);
}

size_t
xd_utf8_whole(const unsigned char *b, size_t n)
{
	size_t back;

	/* only a sequence that could still complete is held back */
	for (back = 1; back <= 3 && back <= n; back++) {
		const unsigned char *p = b + n - back;

		if ((*p & 0xc0) != 0x80) {
			if (*p >= 0xc2 && *p <= 0xf4 && utf8_seq(p, back) == 0)
				return n - back;
			break;
		}
	}
	return n;
}

static json_t *
b64_json(const unsigned char *b, size_t n)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
	    "qrstuvwxyz0123456789+/";
	size_t i, j = 0;
	char *o = malloc((n + 2) / 3 * 4 + 1);
	json_t *s;

	if (o == NULL)
		return NULL;
	for (i = 0; i + 2 < n; i += 3) {
		o[j++] = t[b[i] >> 2];
		o[j++] = t[((b[i] & 3) << 4) | (b[i + 1] >> 4)];
		o[j++] = t[((b[i + 1] & 15) << 2) | (b[i + 2] >> 6)];
		o[j++] = t[b[i + 2] & 63];
	}
	if (i < n) {
		o[j++] = t[b[i] >> 2];
		if (i + 1 < n) {
			o[j++] = t[((b[i] & 3) << 4) | (b[i + 1] >> 4)];
			o[j++] = t[(b[i + 1] & 15) << 2];
		} else {
			o[j++] = t[(b[i] & 3) << 4];
			o[j++] = '=';
		}
		o[j++] = '=';
	}
	s = json_stringn(o, j);
	free(o);
	return s;
}

json_t *
xd_text_json(const unsigned char *b, size_t n, int base64)
{
	char *o;
	size_t i = 0, j = 0;
	json_t *s;

	if (base64)
		return b64_json(b, n);
	if ((o = malloc(n * 3 + 1)) == NULL)
		return NULL;
	while (i < n) {
		int k = utf8_seq(b + i, n - i);

		if (k <= 0) {
			/* each byte of a bad (or cut) sequence: U+FFFD */
			memcpy(o + j, "\xef\xbf\xbd", 3);
			j += 3;
			i++;
			continue;
		}
		memcpy(o + j, b + i, (size_t)k);
		j += (size_t)k;
		i += (size_t)k;
	}
	s = json_stringn(o, j);
	free(o);
	return s;
}

size_t
xd_text_esc(const unsigned char *b, size_t n, int base64, size_t *pos,
    char *out, size_t room)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
	    "qrstuvwxyz0123456789+/";
	static const char hx[] = "0123456789abcdef";
	size_t i = *pos, j = 0, tl, adv;
	char tmp[8];

	while (i < n) {
		if (base64) {
			/* 3 bytes a group: *pos stays on a group's start */
			unsigned v = (unsigned)b[i] << 16;

			adv = n - i < 3 ? n - i : 3;
			if (adv > 1)
				v |= (unsigned)b[i + 1] << 8;
			if (adv > 2)
				v |= b[i + 2];
			tmp[0] = t[(v >> 18) & 63];
			tmp[1] = t[(v >> 12) & 63];
			tmp[2] = adv > 1 ? t[(v >> 6) & 63] : '=';
			tmp[3] = adv > 2 ? t[v & 63] : '=';
			tl = 4;
		} else if (b[i] >= 0x20 && b[i] < 0x7f && b[i] != '"' &&
		    b[i] != '\\') {
			/* a run of what stays as it is, at once: the length of
			 * 2 x output_cap bytes is counted on the loop */
			size_t r = i + 1;

			while (r < n && b[r] >= 0x20 && b[r] < 0x7f &&
			    b[r] != '"' && b[r] != '\\')
				r++;
			tl = r - i;
			if (out != NULL) {
				if (tl > room - j)
					tl = room - j;
				if (tl == 0)
					break;
				memcpy(out + j, b + i, tl);
			}
			j += tl;
			i += tl;
			continue;
		} else {
			int k = utf8_seq(b + i, n - i);

			adv = k > 0 ? (size_t)k : 1;
			if (k <= 0) {
				/* each byte of a bad (or cut) sequence */
				memcpy(tmp, "\xef\xbf\xbd", 3);
				tl = 3;
			} else if (k > 1) {
				memcpy(tmp, b + i, adv);
				tl = adv;
			} else if (b[i] == '"' || b[i] == '\\') {
				tmp[0] = '\\';
				tmp[1] = (char)b[i];
				tl = 2;
			} else if (b[i] < 0x20) {
				const char *sh = b[i] == '\n' ? "n" : b[i] == '\t' ?
				    "t" : b[i] == '\r' ? "r" : b[i] == '\b' ? "b" :
				    b[i] == '\f' ? "f" : NULL;

				tmp[0] = '\\';
				if (sh != NULL) {
					tmp[1] = sh[0];
					tl = 2;
				} else {
					memcpy(tmp + 1, "u00", 3);
					tmp[4] = hx[b[i] >> 4];
					tmp[5] = hx[b[i] & 15];
					tl = 6;
				}
			} else {
				tmp[0] = (char)b[i];
				tl = 1;
			}
		}
		if (out != NULL) {
			if (j + tl > room)
				break;
			memcpy(out + j, tmp, tl);
		}
		j += tl;
		i += adv;
	}
	*pos = i;
	return j;
}

void
xd_reply_perr(struct evhttp_request *req, struct xd_perr *e)
{
	json_t *x = e->extra;

	e->extra = NULL;
	apireply_error(req, e->status ? e->status : 500,
	    e->code ? e->code : "internal", x, "%s", e->msg);
}

void
xd_conn_release(struct evhttp_connection *evcon, int cut)
{
	struct bufferevent *bev;

	evhttp_connection_set_closecb(evcon, NULL, NULL);
	if (cut && (bev = evhttp_connection_get_bufferevent(evcon)) != NULL &&
	    bufferevent_getfd(bev) >= 0)
		shutdown(bufferevent_getfd(bev), SHUT_RDWR);
}

int
xd_q_bool(const char *s, int *v)
{
	*v = s != NULL && (strcmp(s, "1") == 0 || strcmp(s, "true") == 0);
	return s == NULL || *v || strcmp(s, "0") == 0 ||
	    strcmp(s, "false") == 0 ? 0 : -1;
}

int
xd_q_u64(const char *s, uint64_t *v)
{
	unsigned long long x;
	char *end;

	if (s == NULL)
		return 0;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (*s < '0' || *s > '9' || *end != '\0' || errno != 0)
		return -1;
	*v = x;
	return 0;
}

size_t
xd_bev_queued(struct bufferevent *bev)
{
	struct bufferevent *under = bev != NULL ?
	    bufferevent_get_underlying(bev) : NULL;

	return (bev != NULL ? evbuffer_get_length(bufferevent_get_output(bev)) :
	    0) + (under != NULL ? evbuffer_get_length(bufferevent_get_output(
	    under)) : 0);
}

size_t
xd_conn_queued(struct evhttp_connection *evcon)
{
	return xd_bev_queued(evcon != NULL ?
	    evhttp_connection_get_bufferevent(evcon) : NULL);
}

size_t
xd_req_queued(struct evhttp_request *req)
{
	return xd_conn_queued(evhttp_request_get_connection(req));
}

unsigned char *
xd_utf8_carry(unsigned char *carry, size_t *ncarry, const unsigned char *b,
    size_t n, int raw, size_t *whole)
{
	unsigned char *buf = malloc(n + 4);
	size_t len;

	*whole = 0;
	if (buf == NULL)
		return NULL;
	memcpy(buf, carry, *ncarry);
	len = *ncarry;
	memcpy(buf + len, b, n);
	len += n;
	*whole = raw ? len : xd_utf8_whole(buf, len);
	*ncarry = len - *whole;
	memcpy(carry, buf + *whole, len - *whole);
	if (*whole == 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

int
xd_stream_json(struct evhttp_request *req, const char *event, json_t *j,
    void (*flushed)(struct evhttp_connection *, void *), void *arg,
    size_t watermark)
{
	char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	struct evbuffer *b;

	json_decref(j);
	if (s == NULL || (b = evbuffer_new()) == NULL) {
		free(s);
		return 0;
	}
	if (event != NULL)
		evbuffer_add_printf(b, "event: %s\ndata: %s\n\n", event, s);
	else
		evbuffer_add_printf(b, "%s\n\n", s);
	free(s);
	evhttp_send_reply_chunk_with_cb(req, b, flushed, arg);
	evbuffer_free(b);
	return xd_req_queued(req) > watermark;
}

void
xd_share_seen(struct xd *xd, struct xd_share *s, size_t q)
{
	if (q < s->queued) {
		s->moved_ms = sbx_now_ms();
		xd->reply_queued -= s->queued - q;
		s->queued = q;
	}
}

size_t
xd_share_room(const struct xd *xd, size_t q)
{
	const struct xd_cfg *c = xd->cfg;
	size_t room;

	if (q > c->reply_buffer / 2 || xd->reply_queued >= c->reply_total)
		return 0;
	room = (size_t)(c->reply_buffer - q);
	if (room > c->reply_total - xd->reply_queued)
		room = (size_t)(c->reply_total - xd->reply_queued);
	return room;
}

void
xd_share_send(struct xd *xd, struct xd_share *s, struct evhttp_request *req,
    struct evbuffer *b, void (*drained)(struct evhttp_connection *, void *),
    void *arg)
{
	size_t n = evbuffer_get_length(b);

	s->queued += n;
	xd->reply_queued += n;
	s->moved_ms = sbx_now_ms();
	evhttp_send_reply_chunk_with_cb(req, b, drained, arg);
}

int
xd_share_stalled(const struct xd *xd, const struct xd_share *s)
{
	return sbx_now_ms() - s->moved_ms > xd->cfg->reply_timeout_ms;
}

int
xd_stream_caught_up(struct evhttp_request *req, size_t watermark)
{
	return xd_req_queued(req) <=
	    watermark / 2;
}

void
xd_reply_text(struct evhttp_request *req, const char *type,
    struct evbuffer *b)
{
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", type);
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}
