/*
 * ctl_http.h: sluicectl's HTTP/1.1 client for sluiced's control API.
 *
 * One request per connection ("Connection: close"), over the control
 * Unix socket or over TLS to the TCP listener with a bearer token.
 * Blocking in spirit: every wait is a poll(2) bounded by a timeout.
 * Responses are capped in size and parsed strictly (status line,
 * headers, a Content-Length, chunked or read-until-close body).
 */
#ifndef SLUICE_CTL_HTTP_H
#define SLUICE_CTL_HTTP_H

#include <stddef.h>

#define CTLH_HEAD_MAX (64 * 1024)          /* status line + headers */
#define CTLH_BODY_MAX (16 * 1024 * 1024)   /* a body, after de-chunking */

/*
 * An interruption to heed (sluice-run's signals): once fd is readable
 * (the read end of a signal handler's self-pipe, which ctlh never
 * reads), what is under way gets grace_ms more at most and then its
 * waits fail with EINTR: a caller need not sit out the timeout.
 */
struct ctlh_intr {
	int fd;
	int grace_ms;
};

/* Where the API is.  Exactly one of socket and url. */
struct ctlh_target {
	const char *socket;     /* control socket path */
	const char *url;        /* https://host:port */
	const char *token;      /* bearer token (url only), or NULL */
	const char *cacert;     /* CA file to verify the server, or NULL */
	const char *cert;       /* client certificate (PEM chain), or NULL */
	const char *key;        /* its key, or NULL (then taken from cert) */
	int timeout_ms;         /* connect, and each wait after it */
	const struct ctlh_intr *intr;   /* or NULL */
};

struct ctlh_resp {
	int status;
	char reason[64];        /* the reason phrase, sanitised */
	char *body;             /* NUL-terminated (malloc), may hold NULs */
	size_t body_len;
};

/* Outcome of ctlh_request(). */
enum ctlh_rc {
	CTLH_OK = 0,            /* a response was read: look at status */
	CTLH_UNREACHABLE,       /* connect, TLS or certificate failure */
	CTLH_BAD_RESPONSE,      /* timeout or malformed/oversized answer */
	CTLH_USAGE,             /* bad URL, unreadable cert/key/token */
};

/* A request in full: ctlh_send() and ctlh_stream_send(). */
struct ctlh_req {
	const char *method;
	const char *path;               /* with its query, %-encoded */
	const char *accept;             /* NULL: application/json, or
	                                 * text/event-stream for a stream */
	const char *const *headers;     /* extra "Name: value" lines, NULL-
	                                 * terminated, or NULL */
	const char *type;               /* the body's Content-Type (NULL:
	                                 * application/json) */
	const char *body;               /* NULL: none; may hold NULs */
	size_t body_len;
};

/* ctlh_request() with any body, headers and Accept. */
enum ctlh_rc ctlh_send(const struct ctlh_target *t, const struct ctlh_req *q,
    struct ctlh_resp *r, char *err, size_t errlen);

/*
 * Send method path with body (NULL: none; otherwise JSON) and read the
 * response into r.  On anything but CTLH_OK a message is in err and r
 * holds nothing to free.
 */
enum ctlh_rc ctlh_request(const struct ctlh_target *t, const char *method,
    const char *path, const char *body, struct ctlh_resp *r, char *err,
    size_t errlen);
void ctlh_resp_free(struct ctlh_resp *r);

/*
 * Parse a response held whole or in part in buf[0..len).  eof says the
 * peer has closed (a body without length ends there).  Returns 1 with r
 * filled (caller frees), 0 when more bytes are needed, -1 with a message
 * in err when the bytes are not an acceptable response.  Exposed for
 * tests.
 */
int ctlh_parse_response(const char *buf, size_t len, int eof,
    struct ctlh_resp *r, char *err, size_t errlen) SLUICE_MUSTCHECK;

/* Split https://host[:port][/] into host (brackets removed) and port
 * (default 443).  0 / -1. */
int ctlh_parse_url(const char *url, char *host, size_t hostlen,
    char *port, size_t portlen) SLUICE_MUSTCHECK;

/* ---- streams (GET /v1/events) ---- */

struct ctlh_stream;

#define CTLH_AGAIN (-2)         /* ctlh_stream_read: nothing to read now */

/*
 * Send a GET for path with extra header lines (each "Name: value", no
 * CRLF; NULL-terminated list, or NULL) and read the response head within
 * the timeout.  On CTLH_OK r->status is set: a 200 leaves the body to be
 * read from *out (r->body is NULL); any other status reads the whole
 * response into r and *out is NULL.  On other outcomes a message is in
 * err and nothing needs freeing.
 */
enum ctlh_rc ctlh_stream_open(const struct ctlh_target *t, const char *path,
    const char *const *headers, struct ctlh_stream **out,
    struct ctlh_resp *r, char *err, size_t errlen);

/* ctlh_stream_open() of any request (a POST with a body: an exec's
 * events).  A 206 (a range of a file) is a stream too, r->status says
 * which. */
enum ctlh_rc ctlh_stream_send(const struct ctlh_target *t,
    const struct ctlh_req *q, struct ctlh_stream **out, struct ctlh_resp *r,
    char *err, size_t errlen);

/* The descriptor to poll(2) for input. */
int ctlh_stream_fd(const struct ctlh_stream *s);

/*
 * Read body bytes (chunked framing removed) without waiting: >0 bytes,
 * 0 the body ended, CTLH_AGAIN nothing more until the descriptor is
 * readable (call again until then: TLS may hold decrypted bytes), -1 an
 * error (message in err).
 */
long ctlh_stream_read(struct ctlh_stream *s, char *buf, size_t n, char *err,
    size_t errlen);
void ctlh_stream_close(struct ctlh_stream *s);

/* ---- Server-Sent Events parsing ---- */

#define CTLH_SSE_LINE_MAX (1024 * 1024)

/* Called per event: type ("message" by default), its data lines joined
 * by "\n", and the last event id seen ("" if none). */
typedef void (*ctlh_sse_cb)(void *arg, const char *type, const char *data,
    size_t datalen, const char *id);

struct ctlh_sse {
	char *line;             /* the line being read (malloc) */
	size_t linelen, linecap;
	char *data;             /* data lines of the event being read */
	size_t datalen, datacap;
	int has_data;
	int after_cr;           /* a CR ended the last line: skip one LF */
	char type[64];
	char id[128];           /* the last event id (survives events) */
	unsigned long comments; /* comment lines seen (": ping") */
};

void ctlh_sse_init(struct ctlh_sse *p);
/* Feed bytes; calls cb for each complete event.  0, or -1 (message in
 * err) when a line passes CTLH_SSE_LINE_MAX, an event's data passes
 * CTLH_BODY_MAX or memory runs out. */
int ctlh_sse_feed(struct ctlh_sse *p, const char *buf, size_t n,
    ctlh_sse_cb cb, void *arg, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* Forget a half-read event (after a dropped connection); keeps the id. */
void ctlh_sse_reset(struct ctlh_sse *p);
void ctlh_sse_free(struct ctlh_sse *p);

#endif /* SLUICE_CTL_HTTP_H */
