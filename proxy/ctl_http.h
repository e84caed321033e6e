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

/* Where the API is.  Exactly one of socket and url. */
struct ctlh_target {
	const char *socket;     /* control socket path */
	const char *url;        /* https://host:port */
	const char *token;      /* bearer token (url only), or NULL */
	const char *cacert;     /* CA file to verify the server, or NULL */
	const char *cert;       /* client certificate (PEM chain), or NULL */
	const char *key;        /* its key, or NULL (then taken from cert) */
	int timeout_ms;         /* connect, and each wait after it */
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
    struct ctlh_resp *r, char *err, size_t errlen);

/* Split https://host[:port][/] into host (brackets removed) and port
 * (default 443).  0 / -1. */
int ctlh_parse_url(const char *url, char *host, size_t hostlen,
    char *port, size_t portlen);

#endif /* SLUICE_CTL_HTTP_H */
