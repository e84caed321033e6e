/*
 * http.c: strict HTTP/1.x head parser and body framer (see http.h).
 *
 * The parser works on whatever has arrived so far and is called again
 * with the longer buffer.  Every complete line is checked as soon as it
 * is seen, so a malformed head is refused before the rest arrives, and
 * limits are enforced on partial heads too so a slow sender cannot make
 * us buffer without bound.  A caller's struct http_parse_state remembers
 * how far the lines were checked, so a head that arrives a byte at a time
 * costs each byte once (plus one last pass over the whole head), not once
 * per call.
 */
#include "sluice-config.h"

#include <limits.h>
#include <string.h>

#include "proxy/lib/util.h"
#include "proxy/lib/http.h"

void
http_limits_default(struct http_limits *l)
{
	l->max_line = 8192;
	l->max_head = 32768;
	l->max_headers = 100;
}

/* ------------------------------------------------------------------ */
/* Character classes (RFC 9110 5.6.2), ASCII only. */

static int
is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int
is_vchar(unsigned char c)
{
	return c >= 0x21 && c <= 0x7e;
}

/* Field values and reason phrases: VCHAR, SP, HT.  obs-text (>= 0x80) is
 * refused: names compared downstream must mean one thing everywhere. */
static int
is_field_char(unsigned char c)
{
	return is_vchar(c) || c == ' ' || c == '\t';
}

static int
is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

static int
lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

static inline int
ci_equal_n(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t i;

	if (alen != blen)
		return 0;
	for (i = 0; i < alen; i++)
		if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
			return 0;
	return 1;
}

/* inline: with a literal b the length is known when compiled, and most
 * names differ from it in length (the hop-by-hop check asks eleven per
 * header) */
static inline int
ci_equal(const char *a, size_t alen, const char *b)
{
	return ci_equal_n(a, alen, b, strlen(b));
}

static int
all_tchars(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (!is_tchar((unsigned char)s[i]))
			return 0;
	return 1;
}

/* ------------------------------------------------------------------ */
/* Comma-separated token lists (Connection, Transfer-Encoding). */

enum list_rc { LIST_END = 0, LIST_ITEM = 1, LIST_BAD = -1 };

/*
 * Next element of "#token" starting at *p.  Empty elements are skipped
 * when allow_empty is set (RFC 9110 5.6.1.2 asks recipients to accept
 * them) and refused otherwise; anything but a bare token is refused,
 * which also refuses parameters.
 */
static enum list_rc
list_next(const char **p, const char *end, int allow_empty,
    const char **tok, size_t *toklen)
{
	const char *s = *p;

	for (;;) {
		while (s < end && is_ows((unsigned char)*s))
			s++;
		if (s == end)
			return LIST_END;
		if (*s != ',')
			break;
		if (!allow_empty)
			return LIST_BAD;
		s++;
	}
	*tok = s;
	while (s < end && is_tchar((unsigned char)*s))
		s++;
	*toklen = (size_t)(s - *tok);
	if (*toklen == 0)
		return LIST_BAD;
	while (s < end && is_ows((unsigned char)*s))
		s++;
	if (s < end) {
		if (*s != ',')
			return LIST_BAD;
		s++;
		/* A trailing comma is an empty last element. */
		if (!allow_empty) {
			const char *t = s;

			while (t < end && is_ows((unsigned char)*t))
				t++;
			if (t == end)
				return LIST_BAD;
		}
	}
	*p = s;
	return LIST_ITEM;
}

/* ------------------------------------------------------------------ */
/* Lines. */

#define FAIL(st, msg) do { if (why != NULL) *why = (msg); return (st); } while (0)

/*
 * Find the CRLF ending the line at pos within buf[0..len), looking from
 * *from on (bytes before it were looked at by an earlier call); on
 * INCOMPLETE, *from says where to look next time.  A CR not followed by
 * LF, or an LF not preceded by CR, is an error wherever it is.  The line
 * (without CRLF) may be at most max_line bytes.
 */
static enum http_status
line_scan(const char *buf, size_t len, size_t pos, size_t *from,
    size_t max_line, size_t *eol, const char **why)
{
	size_t i;

	for (i = *from > pos ? *from : pos; i < len; i++) {
		if (i - pos > max_line)
			FAIL(HTTP_PARSE_TOO_LARGE, "a line of the head is too long");
		if (buf[i] == '\n')
			FAIL(HTTP_PARSE_ERROR, "bare LF in the head (CRLF only)");
		if (buf[i] != '\r')
			continue;
		if (i + 1 == len) {
			*from = i;      /* the LF may come next */
			return HTTP_PARSE_INCOMPLETE;
		}
		if (buf[i + 1] != '\n')
			FAIL(HTTP_PARSE_ERROR, "bare CR in the head (CRLF only)");
		*eol = i;
		return HTTP_PARSE_OK;
	}
	if (len - pos > max_line)
		FAIL(HTTP_PARSE_TOO_LARGE, "a line of the head is too long");
	*from = len;
	return HTTP_PARSE_INCOMPLETE;
}

/*
 * The methods of the IANA HTTP Method Registry, except PRI (the HTTP/2
 * connection preface, never a request), plus QUERY and TRACK (named so
 * that it can be refused).  Anything else is HTTP_M_UNKNOWN: an upstream
 * that gives an unregistered token a meaning of its own is not asked.
 */
static enum http_method
method_of(const char *s, size_t n)
{
	static const struct {
		const char *name;
		enum http_method m;
	} tab[] = {
		{ "GET", HTTP_M_GET }, { "HEAD", HTTP_M_HEAD },
		{ "POST", HTTP_M_POST }, { "PUT", HTTP_M_PUT },
		{ "DELETE", HTTP_M_DELETE }, { "OPTIONS", HTTP_M_OPTIONS },
		{ "PATCH", HTTP_M_PATCH }, { "CONNECT", HTTP_M_CONNECT },
		{ "TRACE", HTTP_M_TRACE }, { "TRACK", HTTP_M_TRACK },
		{ "ACL", HTTP_M_OTHER }, { "BASELINE-CONTROL", HTTP_M_OTHER },
		{ "BIND", HTTP_M_OTHER }, { "CHECKIN", HTTP_M_OTHER },
		{ "CHECKOUT", HTTP_M_OTHER }, { "COPY", HTTP_M_OTHER },
		{ "LABEL", HTTP_M_OTHER }, { "LINK", HTTP_M_OTHER },
		{ "LOCK", HTTP_M_OTHER }, { "MERGE", HTTP_M_OTHER },
		{ "MKACTIVITY", HTTP_M_OTHER }, { "MKCALENDAR", HTTP_M_OTHER },
		{ "MKCOL", HTTP_M_OTHER }, { "MKREDIRECTREF", HTTP_M_OTHER },
		{ "MKWORKSPACE", HTTP_M_OTHER }, { "MOVE", HTTP_M_OTHER },
		{ "ORDERPATCH", HTTP_M_OTHER }, { "PROPFIND", HTTP_M_OTHER },
		{ "PROPPATCH", HTTP_M_OTHER }, { "QUERY", HTTP_M_OTHER },
		{ "REBIND", HTTP_M_OTHER }, { "REPORT", HTTP_M_OTHER },
		{ "SEARCH", HTTP_M_OTHER }, { "UNBIND", HTTP_M_OTHER },
		{ "UNCHECKOUT", HTTP_M_OTHER }, { "UNLINK", HTTP_M_OTHER },
		{ "UNLOCK", HTTP_M_OTHER }, { "UPDATE", HTTP_M_OTHER },
		{ "UPDATEREDIRECTREF", HTTP_M_OTHER },
		{ "VERSION-CONTROL", HTTP_M_OTHER },
	};
	size_t i;

	/* Methods are case-sensitive (RFC 9110 9.1). */
	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (strlen(tab[i].name) == n && memcmp(tab[i].name, s, n) == 0)
			return tab[i].m;
	return HTTP_M_UNKNOWN;
}

/* "HTTP/1.0" or "HTTP/1.1", exactly (the name is case-sensitive). */
static int
parse_version(const char *s, size_t n)
{
	if (n != 8 || memcmp(s, "HTTP/1.", 7) != 0)
		return -1;
	if (s[7] == '0')
		return 0;
	if (s[7] == '1')
		return 1;
	return -1;
}

static enum http_status
parse_request_line(const char *s, size_t n, struct http_msg *msg,
    const char **why)
{
	const char *sp1, *sp2, *end = s + n;
	const char *p;

	sp1 = memchr(s, ' ', n);
	if (sp1 == NULL)
		FAIL(HTTP_PARSE_ERROR, "request line is not: method target version");
	if (!all_tchars(s, (size_t)(sp1 - s)))
		FAIL(HTTP_PARSE_ERROR, "method is not a token");
	sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
	if (sp2 == NULL)
		FAIL(HTTP_PARSE_ERROR, "request line has no HTTP version");
	if (sp2 == sp1 + 1)
		FAIL(HTTP_PARSE_ERROR, "request line must use single spaces");
	for (p = sp1 + 1; p < sp2; p++)
		if (!is_vchar((unsigned char)*p))
			FAIL(HTTP_PARSE_ERROR, "request target has a control or non-ASCII byte");
	msg->version_minor = parse_version(sp2 + 1, (size_t)(end - sp2 - 1));
	if (msg->version_minor < 0)
		FAIL(HTTP_PARSE_ERROR, "only HTTP/1.0 and HTTP/1.1 are accepted");
	msg->method = s;
	msg->method_len = (size_t)(sp1 - s);
	msg->m = method_of(s, msg->method_len);
	msg->target = sp1 + 1;
	msg->target_len = (size_t)(sp2 - sp1 - 1);
	return HTTP_PARSE_OK;
}

/* "HTTP/1.x SP 3DIGIT SP reason"; the SP before an empty reason is
 * tolerated when missing since it cannot change the framing. */
static enum http_status
parse_status_line(const char *s, size_t n, struct http_msg *msg,
    const char **why)
{
	size_t i;

	if (n < 12 || s[8] != ' ')
		FAIL(HTTP_PARSE_ERROR, "status line is not: version code reason");
	msg->version_minor = parse_version(s, 8);
	if (msg->version_minor < 0)
		FAIL(HTTP_PARSE_ERROR, "only HTTP/1.0 and HTTP/1.1 are accepted");
	for (i = 9; i < 12; i++)
		if (s[i] < '0' || s[i] > '9')
			FAIL(HTTP_PARSE_ERROR, "status code is not three digits");
	msg->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
	if (msg->status < 100 || msg->status > 599)
		FAIL(HTTP_PARSE_ERROR, "status code out of range");
	msg->reason_phrase = s + n;
	msg->reason_len = 0;
	if (n == 12)
		return HTTP_PARSE_OK;
	if (s[12] != ' ')
		FAIL(HTTP_PARSE_ERROR, "status code is not three digits");
	for (i = 13; i < n; i++)
		if (!is_field_char((unsigned char)s[i]))
			FAIL(HTTP_PARSE_ERROR, "reason phrase has a control or non-ASCII byte");
	msg->reason_phrase = s + 13;
	msg->reason_len = n - 13;
	return HTTP_PARSE_OK;
}

static enum http_status
parse_header_line(const char *s, size_t n, struct http_header *h,
    const char **why)
{
	const char *colon, *v, *vend, *p;

	if (is_ows((unsigned char)s[0]))
		FAIL(HTTP_PARSE_ERROR, "obsolete line folding is not accepted");
	colon = memchr(s, ':', n);
	if (colon == NULL)
		FAIL(HTTP_PARSE_ERROR, "header line has no colon");
	for (p = s; p < colon; p++) {
		if (is_ows((unsigned char)*p))
			FAIL(HTTP_PARSE_ERROR, "whitespace in or after a header name");
		if (!is_tchar((unsigned char)*p))
			FAIL(HTTP_PARSE_ERROR, "header name is not a token");
	}
	if (colon == s)
		FAIL(HTTP_PARSE_ERROR, "empty header name");
	v = colon + 1;
	vend = s + n;
	while (v < vend && is_ows((unsigned char)*v))
		v++;
	while (vend > v && is_ows((unsigned char)vend[-1]))
		vend--;
	for (p = v; p < vend; p++)
		if (!is_field_char((unsigned char)*p))
			FAIL(HTTP_PARSE_ERROR, "header value has a NUL, control or non-ASCII byte");
	h->name = s;
	h->name_len = (size_t)(colon - s);
	h->value = v;
	h->value_len = (size_t)(vend - v);
	return HTTP_PARSE_OK;
}

/* ------------------------------------------------------------------ */
/* Header semantics and framing. */

struct framing {
	int cl_seen;
	uint64_t cl;
	int te_seen;           /* Transfer-Encoding header lines */
	int te_codings;        /* codings in them */
	int te_chunked_last;   /* the final coding is chunked */
	int te_chunked_early;  /* chunked somewhere before the final coding */
	int conn_close;
	int conn_keep_alive;
};

static enum http_status
parse_content_length(const struct http_header *h, struct framing *f,
    const char **why)
{
	uint64_t v = 0;
	size_t i;

	if (f->cl_seen)
		FAIL(HTTP_PARSE_ERROR, "more than one Content-Length");
	if (h->value_len == 0)
		FAIL(HTTP_PARSE_ERROR, "Content-Length is not a decimal number");
	for (i = 0; i < h->value_len; i++) {
		unsigned d = (unsigned char)h->value[i] - '0';

		if (d > 9)
			FAIL(HTTP_PARSE_ERROR, "Content-Length is not a decimal number");
		if (v > (UINT64_MAX - d) / 10)
			FAIL(HTTP_PARSE_ERROR, "Content-Length is too large");
		v = v * 10 + d;
	}
	f->cl_seen = 1;
	f->cl = v;
	return HTTP_PARSE_OK;
}

static enum http_status
parse_transfer_encoding(const struct http_header *h, struct framing *f,
    const char **why)
{
	const char *p = h->value, *end = h->value + h->value_len;
	const char *tok;
	size_t toklen;
	enum list_rc rc;
	int n = 0;

	/* Two lines are one list to some recipients and the first or the
	 * last line to others: refused whatever they say. */
	if (f->te_seen)
		FAIL(HTTP_PARSE_ERROR, "more than one Transfer-Encoding");
	while ((rc = list_next(&p, end, 0, &tok, &toklen)) == LIST_ITEM) {
		if (f->te_chunked_last)
			f->te_chunked_early = 1;
		f->te_chunked_last = ci_equal(tok, toklen, "chunked");
		n++;
	}
	if (rc == LIST_BAD || n == 0)
		FAIL(HTTP_PARSE_ERROR, "Transfer-Encoding is not a list of codings");
	f->te_seen = 1;
	f->te_codings = n;
	return HTTP_PARSE_OK;
}

static enum http_status
parse_connection(const struct http_header *h, struct framing *f,
    const char **why)
{
	const char *p = h->value, *end = h->value + h->value_len;
	const char *tok;
	size_t toklen;
	enum list_rc rc;

	while ((rc = list_next(&p, end, 1, &tok, &toklen)) == LIST_ITEM) {
		/* A proxy that honoured these would strip framing or routing
		 * headers (CVE-2023-49606); refuse instead. */
		if (ci_equal(tok, toklen, "host") ||
		    ci_equal(tok, toklen, "content-length") ||
		    ci_equal(tok, toklen, "transfer-encoding"))
			FAIL(HTTP_PARSE_ERROR, "Connection names Host, Content-Length or Transfer-Encoding");
		if (ci_equal(tok, toklen, "close"))
			f->conn_close = 1;
		else if (ci_equal(tok, toklen, "keep-alive"))
			f->conn_keep_alive = 1;
	}
	if (rc == LIST_BAD)
		FAIL(HTTP_PARSE_ERROR, "Connection is not a list of tokens");
	return HTTP_PARSE_OK;
}

static enum http_status
scan_fields(struct http_msg *msg, int is_request, struct framing *f,
    const char **why)
{
	enum http_status st = HTTP_PARSE_OK;
	size_t i;

	for (i = 0; i < msg->nheaders && st == HTTP_PARSE_OK; i++) {
		const struct http_header *h = &msg->headers[i];

		if (ci_equal(h->name, h->name_len, "content-length"))
			st = parse_content_length(h, f, why);
		else if (ci_equal(h->name, h->name_len, "transfer-encoding"))
			st = parse_transfer_encoding(h, f, why);
		else if (ci_equal(h->name, h->name_len, "connection"))
			st = parse_connection(h, f, why);
		else if (is_request && ci_equal(h->name, h->name_len, "host")) {
			if (msg->host_idx >= 0)
				FAIL(HTTP_PARSE_ERROR, "more than one Host header");
			msg->host_idx = (int)i;
		} else if (is_request && msg->version_minor == 1 &&
		    ci_equal(h->name, h->name_len, "expect") &&
		    ci_equal(h->value, h->value_len, "100-continue"))
			msg->expect_continue = 1;
	}
	if (st != HTTP_PARSE_OK)
		return st;
	if (f->cl_seen && f->te_seen)
		FAIL(HTTP_PARSE_ERROR, "both Content-Length and Transfer-Encoding");
	if (f->te_seen && msg->version_minor == 0)
		FAIL(HTTP_PARSE_ERROR, "Transfer-Encoding in an HTTP/1.0 message");
	if (f->te_chunked_early)
		FAIL(HTTP_PARSE_ERROR, "chunked is not the final transfer coding");
	if (msg->version_minor == 1)
		msg->keep_alive = !f->conn_close;
	else
		msg->keep_alive = f->conn_keep_alive && !f->conn_close;
	return HTTP_PARSE_OK;
}

static enum http_status
request_framing(struct http_msg *msg, const struct framing *f,
    const char **why)
{
	if (msg->m == HTTP_M_CONNECT) {
		if (f->te_seen || f->cl > 0)
			FAIL(HTTP_PARSE_ERROR, "CONNECT with a body");
		msg->body = HTTP_BODY_NONE;
	} else if (f->te_seen) {
		/* The body goes upstream as it came: a coding before chunked
		 * is one more way for the upstream to read it differently,
		 * and no client needs one. */
		if (!f->te_chunked_last || f->te_codings != 1)
			FAIL(HTTP_PARSE_ERROR, "Transfer-Encoding is not exactly chunked");
		msg->body = HTTP_BODY_CHUNKED;
	} else if (f->cl_seen) {
		msg->body = HTTP_BODY_LENGTH;
		msg->content_length = f->cl;
	} else
		msg->body = HTTP_BODY_NONE;
	return HTTP_PARSE_OK;
}

/* RFC 9112 6.3, in its order. */
static void
response_framing(struct http_msg *msg, const struct framing *f,
    enum http_method req_method)
{
	if (req_method == HTTP_M_HEAD || msg->status < 200 ||
	    msg->status == 204 || msg->status == 304 ||
	    (req_method == HTTP_M_CONNECT && msg->status < 300))
		msg->body = HTTP_BODY_NONE;
	else if (f->te_seen && f->te_chunked_last)
		msg->body = HTTP_BODY_CHUNKED;
	else if (f->te_seen)
		msg->body = HTTP_BODY_UNTIL_CLOSE;
	else if (f->cl_seen) {
		msg->body = HTTP_BODY_LENGTH;
		msg->content_length = f->cl;
	} else
		msg->body = HTTP_BODY_UNTIL_CLOSE;
	if (msg->body == HTTP_BODY_UNTIL_CLOSE)
		msg->keep_alive = 0;
}

/* ------------------------------------------------------------------ */
/* Heads. */

static void
limits_resolve(const struct http_limits *in, struct http_limits *out)
{
	if (in != NULL)
		*out = *in;
	else
		http_limits_default(out);
	if (out->max_headers > HTTP_MAX_HEADERS_HARD)
		out->max_headers = HTTP_MAX_HEADERS_HARD;
}

/*
 * Check the complete lines of buf[0..view) that ps has not checked yet,
 * each once: the start line into msg, header lines into msg's headers
 * when fill is set (else into a scratch field: the caller's buffer may
 * move between calls, so only offsets are kept).  OK once the empty line
 * ending the head is found; *eol is where it starts.
 */
static enum http_status
scan_lines(const char *buf, size_t view, const struct http_limits *lim,
    int is_request, struct http_msg *msg, int fill,
    struct http_parse_state *ps, size_t *eol, const char **why)
{
	struct http_header scratch;
	enum http_status st;
	size_t pos = ps->done;

	for (;;) {
		/* RFC 9112 2.2: empty lines before a request line are
		 * ignored (a client may end a body with an extra CRLF); they
		 * count towards max_head and the head deadline */
		while (is_request && ps->nlines == 0 && pos + 1 < view &&
		    buf[pos] == '\r' && buf[pos + 1] == '\n')
			ps->done = ps->scanned = pos = pos + 2;
		st = line_scan(buf, view, pos, &ps->scanned, lim->max_line,
		    eol, why);
		if (st != HTTP_PARSE_OK)
			return st;
		if (ps->nlines == 0) {
			if (*eol == pos)
				FAIL(HTTP_PARSE_ERROR, "empty line before the start line");
			st = is_request ?
			    parse_request_line(buf + pos, *eol - pos, msg, why) :
			    parse_status_line(buf + pos, *eol - pos, msg, why);
		} else if (*eol == pos) {
			return HTTP_PARSE_OK;
		} else if (ps->nlines - 1 >= lim->max_headers) {
			FAIL(HTTP_PARSE_TOO_LARGE, "too many header lines");
		} else {
			st = parse_header_line(buf + pos, *eol - pos,
			    fill ? &msg->headers[ps->nlines - 1] : &scratch, why);
		}
		if (st != HTTP_PARSE_OK)
			return st;
		ps->nlines++;
		ps->done = ps->scanned = pos = *eol + 2;
	}
}

/* An empty msg; the header slots past those a parse fills are never
 * read, so the 4 KiB of them are left as they are. */
_Static_assert(offsetof(struct http_msg, nheaders) ==
    offsetof(struct http_msg, headers) + sizeof(((struct http_msg *)0)->headers),
    "msg_clear: the fields after headers start at nheaders");

static void
msg_clear(struct http_msg *msg)
{
	memset(msg, 0, offsetof(struct http_msg, headers));
	memset(&msg->nheaders, 0,
	    sizeof(*msg) - offsetof(struct http_msg, nheaders));
	msg->host_idx = -1;
}

static enum http_status
parse_head(const char *buf, size_t len, const struct http_limits *lim_in,
    int is_request, enum http_method req_method,
    struct http_parse_state *ps, struct http_msg *msg, const char **why)
{
	struct http_parse_state all;
	struct http_limits lim;
	struct framing f;
	enum http_status st;
	size_t view, eol = 0;
	int fresh;

	if (why != NULL)
		*why = NULL;
	limits_resolve(lim_in, &lim);
	/* Never look past max_head: a head not finished by then is too
	 * large whatever follows. */
	view = len < lim.max_head ? len : lim.max_head;
	if (ps->done > view || ps->scanned > view)
		memset(ps, 0, sizeof(*ps));   /* not the bytes it saw */
	/* From the first byte (a head that came in one read, the common
	 * case) the one pass fills msg as it checks; a resumed parse fills
	 * it in a second pass once the head is complete, since the lines
	 * checked earlier may have been in another buffer. */
	fresh = ps->done == 0 && ps->scanned == 0 && ps->nlines == 0;
	if (fresh)
		msg_clear(msg);

	st = scan_lines(buf, view, &lim, is_request, msg, fresh, ps, &eol,
	    why);
	if (st == HTTP_PARSE_INCOMPLETE && len >= lim.max_head)
		FAIL(HTTP_PARSE_TOO_LARGE, "the request or response head is too large");
	if (st != HTTP_PARSE_OK)
		return st;

	memset(&f, 0, sizeof(f));
	if (fresh)
		all = *ps;
	else {
		/* The head is complete and every line passed: one more pass
		 * fills msg with pointers into this buffer. */
		msg_clear(msg);
		memset(&all, 0, sizeof(all));
		st = scan_lines(buf, view, &lim, is_request, msg, 1, &all, &eol,
		    why);
		if (st != HTTP_PARSE_OK)
			return st;
	}
	msg->nheaders = all.nlines - 1;
	msg->head_len = eol + 2;

	st = scan_fields(msg, is_request, &f, why);
	if (st != HTTP_PARSE_OK)
		return st;
	if (is_request)
		return request_framing(msg, &f, why);
	response_framing(msg, &f, req_method);
	return HTTP_PARSE_OK;
}

enum http_status
http_parse_request_resume(const char *buf, size_t len,
    const struct http_limits *lim, struct http_parse_state *ps,
    struct http_msg *msg, const char **why)
{
	return parse_head(buf, len, lim, 1, HTTP_M_OTHER, ps, msg, why);
}

enum http_status
http_parse_response_resume(const char *buf, size_t len,
    const struct http_limits *lim, enum http_method req_method,
    struct http_parse_state *ps, struct http_msg *msg, const char **why)
{
	return parse_head(buf, len, lim, 0, req_method, ps, msg, why);
}

enum http_status
http_parse_request(const char *buf, size_t len, const struct http_limits *lim,
    struct http_msg *msg, const char **why)
{
	struct http_parse_state ps;

	memset(&ps, 0, sizeof(ps));
	return parse_head(buf, len, lim, 1, HTTP_M_OTHER, &ps, msg, why);
}

enum http_status
http_parse_response(const char *buf, size_t len, const struct http_limits *lim,
    enum http_method req_method, struct http_msg *msg, const char **why)
{
	struct http_parse_state ps;

	memset(&ps, 0, sizeof(ps));
	return parse_head(buf, len, lim, 0, req_method, &ps, msg, why);
}

static const char *
rebase(const char *p, const char *from, const char *to, size_t len)
{
	if (p == NULL || p < from || p > from + len)
		return p;      /* not into the head (a static "" or NULL) */
	return to + (p - from);
}

void
http_msg_rebase(struct http_msg *msg, const char *from, const char *to)
{
	size_t i, len = msg->head_len;

	msg->method = rebase(msg->method, from, to, len);
	msg->target = rebase(msg->target, from, to, len);
	msg->reason_phrase = rebase(msg->reason_phrase, from, to, len);
	for (i = 0; i < msg->nheaders; i++) {
		msg->headers[i].name = rebase(msg->headers[i].name, from, to,
		    len);
		msg->headers[i].value = rebase(msg->headers[i].value, from,
		    to, len);
	}
}

int
http_find_header(const struct http_msg *msg, const char *name)
{
	size_t i;

	for (i = 0; i < msg->nheaders; i++)
		if (ci_equal(msg->headers[i].name, msg->headers[i].name_len,
		    name))
			return (int)i;
	return -1;
}

static int
named_in_connection(const struct http_msg *msg, const struct http_header *h)
{
	size_t i;

	for (i = 0; i < msg->nheaders; i++) {
		const struct http_header *c = &msg->headers[i];
		const char *p = c->value, *end = c->value + c->value_len;
		const char *tok;
		size_t toklen;

		if (!ci_equal(c->name, c->name_len, "connection"))
			continue;
		while (list_next(&p, end, 1, &tok, &toklen) == LIST_ITEM)
			if (ci_equal_n(tok, toklen, h->name, h->name_len))
				return 1;
	}
	return 0;
}

int
http_is_hop_by_hop(const struct http_msg *msg, const struct http_header *h)
{
	static const char *const fixed[] = {
		"connection", "proxy-connection", "keep-alive", "te",
		"trailer", "upgrade", "proxy-authorization",
		"proxy-authenticate",
	};
	size_t i;

	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (ci_equal(h->name, h->name_len, fixed[i]))
			return 1;
	if (ci_equal(h->name, h->name_len, "host") ||
	    ci_equal(h->name, h->name_len, "content-length") ||
	    ci_equal(h->name, h->name_len, "transfer-encoding"))
		return 0;
	return named_in_connection(msg, h);
}

/* ------------------------------------------------------------------ */
/* Body framer. */

enum {
	BP_SIZE = 0,    /* hex digits of a chunk size */
	BP_EXT_NAME0,   /* after ';': the first byte of an extension name */
	BP_EXT_NAME,
	BP_EXT_VAL0,    /* after '=': a token or a quoted string */
	BP_EXT_TOKEN,
	BP_EXT_QUOTED,  /* inside the quoted string */
	BP_EXT_QPAIR,   /* after a backslash in it */
	BP_EXT_QEND,    /* after its closing quote */
	BP_SIZE_LF,     /* CR seen after the size line */
	BP_DATA,        /* chunk data, remaining bytes left */
	BP_DATA_CR,     /* CRLF after the data */
	BP_DATA_LF,
	BP_TRAILER,     /* start of a trailer line (or the final CRLF) */
	BP_TRAILER_NAME,
	BP_TRAILER_VALUE,
	BP_TRAILER_LF,
	BP_END_LF,      /* CR of the final empty line seen */
	BP_DONE,
	BP_ERROR,
};

/* 16 hex digits hold any uint64_t; more are only leading zeros, which
 * one recipient may count against a limit and another not. */
#define CHUNK_SIZE_DIGITS 16

void
http_body_init(struct http_body_state *st, enum http_body kind,
    uint64_t content_length, size_t max_line)
{
	memset(st, 0, sizeof(*st));
	st->kind = kind;
	st->max_line = max_line;
	st->phase = BP_SIZE;
	if (kind == HTTP_BODY_LENGTH)
		st->remaining = content_length;
	if (kind == HTTP_BODY_NONE ||
	    (kind == HTTP_BODY_LENGTH && content_length == 0)) {
		st->done = 1;
		st->phase = BP_DONE;
	}
}

/* qdtext of RFC 9110 5.6.4 without obs-text, as in field values. */
static int
is_qdtext(unsigned char c)
{
	return c == '\t' || c == ' ' || c == 0x21 ||
	    (c >= 0x23 && c <= 0x5b) || (c >= 0x5d && c <= 0x7e);
}

/* Bytes of a size or trailer line, bounded by max_line. */
static int
line_byte(struct http_body_state *st)
{
	if (++st->line_len > st->max_line)
		return -1;
	return 0;
}

/* Go to phase next, counting the byte of the line that leads there. */
static int
next_byte(struct http_body_state *st, int next)
{
	st->phase = next;
	return line_byte(st);
}

/* The end of a size line (CR) or the next extension (';'), which may
 * follow a complete extension; -1 for anything else. */
static int
ext_end(struct http_body_state *st, unsigned char c)
{
	if (c == '\r') {
		st->phase = BP_SIZE_LF;
		return 0;
	}
	if (c == ';')
		return next_byte(st, BP_EXT_NAME0);
	return -1;
}

/* One byte of the chunked syntax outside chunk data; -1 on error. */
static int
chunk_byte(struct http_body_state *st, unsigned char c)
{
	int d;

	switch (st->phase) {
	case BP_SIZE:
		if (st->line_len > 0 && (c == '\r' || c == ';'))
			return ext_end(st, c);
		d = util_hexval(c);
		if (d < 0 || st->line_len >= CHUNK_SIZE_DIGITS)
			return -1;
		st->remaining = (st->remaining << 4) | (uint64_t)d;
		return line_byte(st);
	/* chunk-ext = *( ";" name [ "=" ( token / quoted-string ) ] ),
	 * without the BWS a sender must not generate (RFC 9110 5.6.3) */
	case BP_EXT_NAME0:
		return is_tchar(c) ? next_byte(st, BP_EXT_NAME) : -1;
	case BP_EXT_NAME:
		if (c == '=')
			return next_byte(st, BP_EXT_VAL0);
		return is_tchar(c) ? line_byte(st) : ext_end(st, c);
	case BP_EXT_VAL0:
		if (c == '"')
			return next_byte(st, BP_EXT_QUOTED);
		return is_tchar(c) ? next_byte(st, BP_EXT_TOKEN) : -1;
	case BP_EXT_TOKEN:
		return is_tchar(c) ? line_byte(st) : ext_end(st, c);
	case BP_EXT_QUOTED:
		/* a CR here is inside the string: whoever reads on past it
		 * frames the body elsewhere, so it is an error */
		if (c == '"')
			return next_byte(st, BP_EXT_QEND);
		if (c == '\\')
			return next_byte(st, BP_EXT_QPAIR);
		return is_qdtext(c) ? line_byte(st) : -1;
	case BP_EXT_QPAIR:
		return is_field_char(c) ? next_byte(st, BP_EXT_QUOTED) : -1;
	case BP_EXT_QEND:
		return ext_end(st, c);
	case BP_SIZE_LF:
		if (c != '\n')
			return -1;
		st->line_len = 0;
		st->phase = st->remaining > 0 ? BP_DATA : BP_TRAILER;
		return 0;
	case BP_DATA_CR:
		if (c != '\r')
			return -1;
		st->phase = BP_DATA_LF;
		return 0;
	case BP_DATA_LF:
		if (c != '\n')
			return -1;
		st->phase = BP_SIZE;
		st->remaining = 0;
		st->line_len = 0;
		return 0;
	case BP_TRAILER:
		if (c == '\r') {
			st->phase = BP_END_LF;
			return 0;
		}
		/* A trailer line is a field line: a token name right before
		 * its colon, no folding, no bare bytes. */
		return is_tchar(c) ? next_byte(st, BP_TRAILER_NAME) : -1;
	case BP_TRAILER_NAME:
		if (c == ':')
			return next_byte(st, BP_TRAILER_VALUE);
		return is_tchar(c) ? line_byte(st) : -1;
	case BP_TRAILER_VALUE:
		if (c == '\r') {
			st->phase = BP_TRAILER_LF;
			return 0;
		}
		return is_field_char(c) ? line_byte(st) : -1;
	case BP_TRAILER_LF:
		if (c != '\n')
			return -1;
		st->line_len = 0;
		st->phase = BP_TRAILER;
		return 0;
	case BP_END_LF:
		if (c != '\n')
			return -1;
		st->phase = BP_DONE;
		st->done = 1;
		return 0;
	default:
		return -1;
	}
}

static long
chunked_feed(struct http_body_state *st, const char *buf, size_t len)
{
	size_t i = 0;

	while (i < len && st->phase != BP_DONE) {
		if (st->phase == BP_DATA) {
			size_t n = len - i;

			if ((uint64_t)n > st->remaining)
				n = (size_t)st->remaining;
			st->remaining -= n;
			i += n;
			if (st->remaining == 0)
				st->phase = BP_DATA_CR;
			continue;
		}
		if (chunk_byte(st, (unsigned char)buf[i]) < 0) {
			st->phase = BP_ERROR;
			return -1;
		}
		i++;
	}
	return (long)i;
}

long
http_body_feed(struct http_body_state *st, const char *buf, size_t len)
{
	size_t n;

	if (st->phase == BP_ERROR)
		return -1;
	if (st->done)
		return 0;
	/* The return type is long; a caller never hands more at once. */
	if (len > (size_t)LONG_MAX)
		len = (size_t)LONG_MAX;
	switch (st->kind) {
	case HTTP_BODY_LENGTH:
		n = len;
		if ((uint64_t)n > st->remaining)
			n = (size_t)st->remaining;
		st->remaining -= n;
		if (st->remaining == 0) {
			st->done = 1;
			st->phase = BP_DONE;
		}
		return (long)n;
	case HTTP_BODY_CHUNKED:
		return chunked_feed(st, buf, len);
	case HTTP_BODY_UNTIL_CLOSE:
		return (long)len;
	default:
		st->done = 1;
		return 0;
	}
}
