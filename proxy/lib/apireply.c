/*
 * apireply.c: the answers of both APIs (apireply.h).
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "proxy/lib/apireply.h"
#include "proxy/lib/clog.h"
#include "proxy/lib/util.h"

#define MSG_MAX 512

const char *
apireply_status_code(int status)
{
	switch (status) {
	case 400: return "bad_request";
	case 401: return "unauthorized";
	case 403: return "forbidden";
	case 404: return "not_found";
	case 405: return "method_not_allowed";
	case 409: return "conflict";
	case 413: return "payload_too_large";
	case 415: return "unsupported_media_type";
	case 503: return "unavailable";
	default: return "internal";
	}
}

static apireply_sink_fn sink;

void
apireply_set_sink(apireply_sink_fn fn)
{
	sink = fn;
}

void
apireply_text(struct evhttp_request *req, int status, const char *type,
    const char *text, size_t len)
{
	if (sink != NULL)
		sink(req, status, type, text, len);
	else
		apireply_text_now(req, status, type, text, len);
}

void
apireply_text_now(struct evhttp_request *req, int status, const char *type,
    const char *text, size_t len)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *b = evbuffer_new();

	evhttp_remove_header(h, "Content-Type");
	evhttp_add_header(h, "Content-Type", type);
	evhttp_add_header(h, "Cache-Control", "no-store");
	if (b == NULL || evbuffer_add(b, text, len) != 0) {
		if (b != NULL)
			evbuffer_free(b);
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evhttp_send_reply(req, status, util_http_phrase(status), b);
	evbuffer_free(b);
}

/* j (a new reference, consumed) as the text of an answer, escaped and
 * ending in a newline, malloc'd into *text; -1 out of memory. */
static int
json_text(json_t *j, char **text, size_t *len)
{
	char *raw = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	char *t;
	size_t n = 0;

	json_decref(j);
	*text = NULL;
	/* bidi and C1 characters a caller stored reach no terminal raw */
	if (raw != NULL)
		*text = clog_json_escape(raw, strlen(raw), &n);
	free(raw);
	if (*text == NULL)
		return -1;
	/* a newline keeps curl output and shell pipes tidy (without the
	 * memory for it, the answer goes without) */
	if ((t = realloc(*text, n + 2)) != NULL) {
		*text = t;
		t[n++] = '\n';
		t[n] = '\0';
	}
	*len = n;
	return 0;
}

static const char oom[] = "{\"error\":{\"code\":\"internal\","
    "\"message\":\"out of memory\"}}\n";

void
apireply_json(struct evhttp_request *req, int status, json_t *j)
{
	char *text;
	size_t n;

	if (json_text(j, &text, &n) != 0) {
		apireply_text(req, 500, "application/json", oom,
		    sizeof(oom) - 1);
		return;
	}
	apireply_text(req, status, "application/json", text, n);
	free(text);
}

/* {"error": {...}} of code and msg, extra's members added (consumed). */
static json_t *
error_doc(const char *code, json_t *extra, const char *msg)
{
	json_t *e = json_pack("{s:s,s:s}", "code", code, "message", msg);

	if (e == NULL)
		e = json_pack("{s:s,s:s}", "code", code, "message", "?");
	if (extra != NULL && e != NULL)
		json_object_update(e, extra);
	json_decref(extra);
	return e != NULL ? json_pack("{s:o}", "error", e) : NULL;
}

void
apireply_error_now(struct evhttp_request *req, int status, const char *code,
    const char *fmt, ...)
{
	char msg[MSG_MAX], *text;
	size_t n;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (json_text(error_doc(code, NULL, msg), &text, &n) != 0) {
		apireply_text_now(req, 500, "application/json", oom,
		    sizeof(oom) - 1);
		return;
	}
	apireply_text_now(req, status, "application/json", text, n);
	free(text);
}

void
apireply_verror(struct evhttp_request *req, int status, const char *code,
    json_t *extra, const char *fmt, va_list ap)
{
	char msg[MSG_MAX];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	apireply_json(req, status, error_doc(code, extra, msg));
}

void
apireply_error(struct evhttp_request *req, int status, const char *code,
    json_t *extra, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	apireply_verror(req, status, code, extra, fmt, ap);
	va_end(ap);
}

void
apireply_fail(struct evhttp_request *req, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	apireply_verror(req, status, apireply_status_code(status), NULL, fmt,
	    ap);
	va_end(ap);
}
