/*
 * http.h: the strict HTTP/1.1 message parser of sluiced's front end.
 *
 * Pure C, no I/O: the caller hands a contiguous buffer holding what has
 * arrived so far.  Parsing refuses rather than repairs (DESIGN.md, "What
 * the proxy accepts"): CRLF only, no obs-fold, no whitespace before a
 * colon, no NUL or control bytes, bounded line, header count and head
 * size, and framing checks against request smuggling.
 *
 * The parsed structures point into the caller's buffer; they are valid as
 * long as that buffer is.
 */
#ifndef SLUICE_HTTP_H
#define SLUICE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

#define HTTP_MAX_HEADERS_HARD 128

struct http_limits {
	size_t max_line;      /* request/status line and each header line */
	size_t max_head;      /* whole head including the blank line */
	size_t max_headers;   /* <= HTTP_MAX_HEADERS_HARD */
};
/* 8 KiB lines, 32 KiB head, 100 headers. */
void http_limits_default(struct http_limits *l);

struct http_header {
	const char *name;
	size_t name_len;
	const char *value;      /* OWS trimmed on both ends */
	size_t value_len;
};

/*
 * HTTP_M_OTHER: a registered method framed like any other (PROPFIND,
 * MKCOL, ...).  HTTP_M_UNKNOWN: a token that is no method of the IANA
 * registry (or PRI, the HTTP/2 preface); sluiced refuses it, as it does
 * TRACE and TRACK (method_not_allowed).  No known method is longer than
 * 17 bytes.
 */
enum http_method {
	HTTP_M_OTHER = 0, HTTP_M_GET, HTTP_M_HEAD, HTTP_M_POST, HTTP_M_PUT,
	HTTP_M_DELETE, HTTP_M_OPTIONS, HTTP_M_PATCH, HTTP_M_CONNECT,
	HTTP_M_TRACE, HTTP_M_TRACK, HTTP_M_UNKNOWN,
};

/* Message framing, from RFC 9112 section 6. */
enum http_body {
	HTTP_BODY_NONE = 0,     /* no body */
	HTTP_BODY_LENGTH,       /* content_length bytes */
	HTTP_BODY_CHUNKED,      /* Transfer-Encoding ends in chunked */
	HTTP_BODY_UNTIL_CLOSE,  /* responses only: read to EOF */
};

struct http_msg {
	/* request line */
	const char *method; size_t method_len;
	enum http_method m;
	const char *target; size_t target_len;
	/* status line */
	int status;
	const char *reason_phrase; size_t reason_len;

	int version_minor;       /* HTTP/1.0 -> 0, HTTP/1.1 -> 1 */
	struct http_header headers[HTTP_MAX_HEADERS_HARD];
	size_t nheaders;
	size_t head_len;         /* bytes of the head including final CRLF */

	enum http_body body;
	uint64_t content_length; /* for HTTP_BODY_LENGTH */
	int keep_alive;          /* per version and Connection header */
	int expect_continue;     /* Expect: 100-continue */
	/* Index of Host (requests) or -1 if absent. */
	int host_idx;
};

enum http_status {
	HTTP_PARSE_OK = 0,
	HTTP_PARSE_INCOMPLETE,  /* need more bytes; none of the limits hit */
	HTTP_PARSE_ERROR,       /* malformed: answer 400 (reason bad_request) */
	HTTP_PARSE_TOO_LARGE,   /* a limit was hit: answer 431/400 (head_too_large) */
};

/*
 * Parse a request head from buf[0..len).  On HTTP_PARSE_OK, msg is filled
 * and msg->head_len tells how many bytes the head used; bytes after it
 * belong to the body or the tunnel.  On any other status msg holds
 * nothing of use.  On HTTP_PARSE_ERROR and HTTP_PARSE_TOO_LARGE, *why (if
 * not NULL) gets a static one-line explanation for the refusal body.
 *
 * Empty lines before the request line are skipped (RFC 9112 2.2) and
 * count towards the head.  Request framing rules: Content-Length
 * together with Transfer-Encoding, duplicate or differing Content-Length,
 * more than one Transfer-Encoding line or one that is not exactly
 * "chunked" (case-insensitive token), or a CONNECT with a body are all
 * errors.  HTTP/1.0 and HTTP/1.1 only.
 */
enum http_status http_parse_request(const char *buf, size_t len,
    const struct http_limits *lim, struct http_msg *msg, const char **why);

/*
 * Parse a response head.  req_method is the method of the request it
 * answers (HEAD and CONNECT change framing).  1xx, 204 and 304 have no
 * body; otherwise chunked, then Content-Length, else until close.  More
 * than one Transfer-Encoding line is an error here too.
 */
enum http_status http_parse_response(const char *buf, size_t len,
    const struct http_limits *lim, enum http_method req_method,
    struct http_msg *msg, const char **why);

/*
 * The same, resumable: a caller that is handed a head in pieces calls
 * again with the same bytes plus what arrived, and the same state, which
 * it zeroes before the first call for each head.  Lines the state has
 * seen are not scanned again, so the work is linear in the head's size
 * however it is split.  The results are those of the calls above.
 */
struct http_parse_state {
	size_t done;       /* bytes of lines already checked */
	size_t scanned;    /* bytes of the line after them looked at */
	size_t nlines;     /* lines checked: start line, then headers */
};
/* msg was parsed from the head at from; the same head_len bytes are now
 * at to (a copy): point msg into to, instead of parsing the copy again. */
void http_msg_rebase(struct http_msg *msg, const char *from, const char *to);
enum http_status http_parse_request_resume(const char *buf, size_t len,
    const struct http_limits *lim, struct http_parse_state *ps,
    struct http_msg *msg, const char **why);
enum http_status http_parse_response_resume(const char *buf, size_t len,
    const struct http_limits *lim, enum http_method req_method,
    struct http_parse_state *ps, struct http_msg *msg, const char **why);

/* Case-insensitive header lookup: index of the first match or -1. */
int http_find_header(const struct http_msg *msg, const char *name);

/*
 * Hop-by-hop: 1 if this header must not be forwarded: Connection,
 * Proxy-Connection, Keep-Alive, TE, Trailer, Transfer-Encoding is NOT
 * hop-by-hop here (framing is kept end to end), Upgrade,
 * Proxy-Authorization, Proxy-Authenticate, and any name listed in the
 * message's Connection header(s).  Host and Content-Length are never
 * treated as hop-by-hop even if Connection names them (CVE-2023-49606
 * style stripping of framing headers is refused instead: such a request
 * is an error at parse time).
 */
int http_is_hop_by_hop(const struct http_msg *msg, const struct http_header *h);

/*
 * Streaming body framer: tells how many of the next bytes belong to the
 * current message body so the relay can pass them through unchanged, so
 * it admits only what every recipient frames alike.  Chunk sizes are 1
 * to 16 hex digits (leading zeros included); chunk extensions follow
 * RFC 9112 7.1.1 without the optional whitespace (";name", ";name=token",
 * ";name=\"quoted\"", the quoted string closed before the CRLF); trailer
 * lines are field lines (a token, a colon, a field value); size lines and
 * trailer lines are bounded by max_line; bare CR or LF is an error.
 */
struct http_body_state {
	enum http_body kind;
	uint64_t remaining;      /* LENGTH: bytes left; CHUNKED: data left in chunk */
	int phase;               /* private to the framer */
	size_t line_len;         /* private: bytes of the current size/trailer line */
	size_t max_line;
	int done;                /* set once the body is complete */
};
void http_body_init(struct http_body_state *st, enum http_body kind,
    uint64_t content_length, size_t max_line);
/*
 * Consume up to len bytes of body.  Returns the number of bytes that
 * belong to this body (<= len); st->done is set when the body ended within
 * them.  Returns -1 on a framing error.  UNTIL_CLOSE consumes everything
 * and never sets done.
 */
long http_body_feed(struct http_body_state *st, const char *buf, size_t len)
    SLUICE_MUSTCHECK;

#endif /* SLUICE_HTTP_H */
