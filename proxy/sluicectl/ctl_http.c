/*
 * ctl_http.c: the control API client of sluicectl.
 *
 * One request per connection keeps the client simple and the server's
 * keep-alive handling out of the picture.  The descriptor is non-blocking
 * so that every wait, TLS included, goes through poll(2) with what is
 * left of one deadline for the whole exchange: a server that stalls or
 * drips bytes cannot hold a script forever.
 */
#ifdef HAVE_CONFIG_H
#include "sluice-config.h"
#endif

#include "proxy/sluicectl/ctl_http.h"
#include "proxy/lib/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0"
#endif

struct conn {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
	int64_t deadline;       /* CLOCK_MONOTONIC ms */
	const struct ctlh_intr *intr;
	int intr_seen;          /* intr->fd was readable: deadline cut */
};

/* ---- response parsing ---- */

static int
is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return 1;
	return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Position of "\r\n\r\n" in buf, or -1. */
static long
find_head_end(const char *buf, size_t len)
{
	size_t i;

	for (i = 0; i + 3 < len; i++)
		if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' &&
		    buf[i + 3] == '\n')
			return (long)i;
	return -1;
}

/* Strict decimal without sign, at most CTLH_BODY_MAX. */
static int
parse_length(const char *s, size_t n, size_t *out)
{
	size_t v = 0, i;

	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (size_t)(s[i] - '0');
		if (v > CTLH_BODY_MAX)
			return -2;
	}
	*out = v;
	return 0;
}

struct head {
	int status;
	char reason[64];
	int chunked;
	int has_length;
	size_t length;
};

static int
parse_status_line(const char *p, size_t n, struct head *h, char *err,
    size_t errlen)
{
	size_t i, o = 0;

	if (n < 12 || (memcmp(p, "HTTP/1.1 ", 9) != 0 &&
	    memcmp(p, "HTTP/1.0 ", 9) != 0) ||
	    p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' ||
	    p[11] < '0' || p[11] > '9' || (n > 12 && p[12] != ' ')) {
		errf(err, errlen, "bad status line");
		return -1;
	}
	h->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	for (i = 13; i < n && o + 1 < sizeof(h->reason); i++) {
		unsigned char c = (unsigned char)p[i];
		h->reason[o++] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
	}
	h->reason[o] = '\0';
	return 0;
}

static int
parse_header_line(const char *p, size_t n, struct head *h, char *err,
    size_t errlen)
{
	const char *colon = memchr(p, ':', n);
	const char *v, *end = p + n;
	size_t namelen, i, len;
	int r;

	if (colon == NULL || colon == p) {
		errf(err, errlen, "bad header line");
		return -1;
	}
	namelen = (size_t)(colon - p);
	for (i = 0; i < namelen; i++)
		if (!is_tchar((unsigned char)p[i])) {
			errf(err, errlen, "bad header name");
			return -1;
		}
	v = colon + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	for (i = 0; v + i < end; i++)
		if ((unsigned char)v[i] < 0x20 && v[i] != '\t') {
			errf(err, errlen, "control character in a header");
			return -1;
		}
	if (namelen == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
		r = parse_length(v, (size_t)(end - v), &len);
		if (r == -2) {
			errf(err, errlen, "body larger than %d bytes",
			    CTLH_BODY_MAX);
			return -1;
		}
		if (r != 0 || (h->has_length && h->length != len)) {
			errf(err, errlen, "bad Content-Length");
			return -1;
		}
		h->has_length = 1;
		h->length = len;
	} else if (namelen == 17 &&
	    strncasecmp(p, "Transfer-Encoding", 17) == 0) {
		if ((size_t)(end - v) != 7 || strncasecmp(v, "chunked", 7) != 0) {
			errf(err, errlen, "unsupported Transfer-Encoding");
			return -1;
		}
		h->chunked = 1;
	}
	return 0;
}

static int
parse_head(const char *buf, size_t headlen, struct head *h, char *err,
    size_t errlen)
{
	const char *p = buf, *end = buf + headlen, *eol;
	int first = 1;

	memset(h, 0, sizeof(*h));
	while (p < end) {
		eol = p;
		/* the terminator's CRLF follows end, so eol[1] is readable */
		while (eol < end && !(eol[0] == '\r' && eol[1] == '\n'))
			eol++;
		if (memchr(p, '\n', (size_t)(eol - p)) != NULL ||
		    memchr(p, '\r', (size_t)(eol - p)) != NULL) {
			errf(err, errlen, "bare CR or LF in the head");
			return -1;
		}
		if (first) {
			if (parse_status_line(p, (size_t)(eol - p), h, err,
			    errlen) != 0)
				return -1;
			first = 0;
		} else if (parse_header_line(p, (size_t)(eol - p), h, err,
		    errlen) != 0) {
			return -1;
		}
		p = eol + 2;
	}
	if (first) {
		errf(err, errlen, "empty response head");
		return -1;
	}
	return 0;
}

static int
copy_body(const char *src, size_t n, struct ctlh_resp *r, char *err,
    size_t errlen)
{
	r->body = malloc(n + 1);
	if (r->body == NULL) {
		errf(err, errlen, "out of memory");
		return -1;
	}
	if (n > 0)
		memcpy(r->body, src, n);
	r->body[n] = '\0';
	r->body_len = n;
	return 0;
}

/* Chunk size line at p (up to end); *next after its CRLF.  1 done,
 * 0 need more, -1 bad. */
static int
chunk_size(const char *p, const char *end, size_t *size, const char **next)
{
	size_t v = 0;
	const char *q = p;
	int digits = 0;

	for (; q < end; q++) {
		int d = util_hexval((unsigned char)*q);

		if (d < 0)
			break;
		if (++digits > 8)
			return -1;
		v = v * 16 + (size_t)d;
	}
	if (q == end)
		return 0;
	if (digits == 0 || (*q != ';' && *q != '\r'))
		return -1;
	/* extensions are ignored up to the line end */
	for (; q + 1 < end; q++) {
		if (q[0] == '\r' && q[1] == '\n') {
			*size = v;
			*next = q + 2;
			return 1;
		}
		if (*q == '\n')
			return -1;
	}
	return (q - p > 256) ? -1 : 0;
}

static int
parse_chunked(const char *p, const char *end, struct ctlh_resp *r,
    char *err, size_t errlen)
{
	char *out = NULL;
	size_t total = 0, size = 0;
	const char *next;
	int k, n;

	for (n = 0; ; n++) {
		k = chunk_size(p, end, &size, &next);
		if (k <= 0)
			goto stop;
		p = next;
		if (size == 0)
			break;
		if (size > CTLH_BODY_MAX - total) {
			errf(err, errlen, "body larger than %d bytes",
			    CTLH_BODY_MAX);
			k = -1;
			goto fail;
		}
		if ((size_t)(end - p) < size + 2) {
			k = 0;
			goto fail;
		}
		if (p[size] != '\r' || p[size + 1] != '\n') {
			errf(err, errlen, "bad chunk terminator");
			k = -1;
			goto fail;
		}
		if (r != NULL) {
			char *nb = realloc(out, total + size + 1);
			if (nb == NULL) {
				errf(err, errlen, "out of memory");
				k = -1;
				goto fail;
			}
			out = nb;
			memcpy(out + total, p, size);
		}
		total += size;
		p += size + 2;
	}
	/* trailer fields, then an empty line */
	for (n = 0; n < 64; n++) {
		const char *q = p;
		while (q + 1 < end && !(q[0] == '\r' && q[1] == '\n'))
			q++;
		if (q + 1 >= end) {
			k = 0;
			goto fail;
		}
		if (q == p) {
			if (copy_body(out ? out : "", total, r, err, errlen) != 0) {
				k = -1;
				goto fail;
			}
			free(out);
			return 1;
		}
		p = q + 2;
	}
	errf(err, errlen, "too many trailer fields");
	k = -1;
	goto fail;
stop:
	if (k < 0)
		errf(err, errlen, "bad chunk size");
fail:
	free(out);
	return k;
}

int
ctlh_parse_response(const char *buf, size_t len, int eof,
    struct ctlh_resp *r, char *err, size_t errlen)
{
	struct head h;
	const char *body;
	size_t avail;
	long he;
	int k;

	memset(r, 0, sizeof(*r));
	he = find_head_end(buf, len > CTLH_HEAD_MAX + 4 ? CTLH_HEAD_MAX + 4 :
	    len);
	if (he < 0) {
		if (len > CTLH_HEAD_MAX) {
			errf(err, errlen, "response head larger than %d "
			    "bytes", CTLH_HEAD_MAX);
			return -1;
		}
		if (eof) {
			errf(err, errlen, len ? "connection closed inside "
			    "the response head" : "connection closed without "
			    "a response");
			return -1;
		}
		return 0;
	}
	if (parse_head(buf, (size_t)he, &h, err, errlen) != 0)
		return -1;
	if (h.status < 200) {
		errf(err, errlen, "unexpected interim response %d",
		    h.status);
		return -1;
	}
	body = buf + he + 4;
	avail = len - (size_t)he - 4;
	r->status = h.status;
	memcpy(r->reason, h.reason, sizeof(r->reason));
	if (h.status == 204 || h.status == 304) {
		k = copy_body("", 0, r, err, errlen) == 0 ? 1 : -1;
	} else if (h.chunked) {
		k = parse_chunked(body, buf + len, r, err, errlen);
		if (k == 0 && eof) {
			errf(err, errlen, "connection closed inside the "
			    "chunked body");
			k = -1;
		}
	} else if (h.has_length) {
		if (avail >= h.length)
			k = copy_body(body, h.length, r, err, errlen) == 0 ?
			    1 : -1;
		else if (eof) {
			errf(err, errlen, "connection closed after %zu of "
			    "%zu body bytes", avail, h.length);
			k = -1;
		} else
			k = 0;
	} else if (avail > CTLH_BODY_MAX) {
		errf(err, errlen, "body larger than %d bytes",
		    CTLH_BODY_MAX);
		k = -1;
	} else if (eof) {
		k = copy_body(body, avail, r, err, errlen) == 0 ? 1 : -1;
	} else {
		k = 0;
	}
	if (k != 1) {
		free(r->body);
		memset(r, 0, sizeof(*r));
	}
	return k;
}

void
ctlh_resp_free(struct ctlh_resp *r)
{
	if (r == NULL)
		return;
	free(r->body);
	r->body = NULL;
	r->body_len = 0;
}

/* ---- URL ---- */

int
ctlh_parse_url(const char *url, char *host, size_t hostlen, char *port,
    size_t portlen)
{
	const char *p, *hs, *he, *ps = NULL, *end;
	size_t n;
	long v;
	char *ep;

	if (strncasecmp(url, "https://", 8) != 0)
		return -1;
	p = url + 8;
	end = p + strcspn(p, "/?#");
	if (*end != '\0' && strcmp(end, "/") != 0)
		return -1;
	if (memchr(p, '@', (size_t)(end - p)) != NULL)
		return -1;
	if (*p == '[') {
		hs = p + 1;
		he = memchr(hs, ']', (size_t)(end - hs));
		if (he == NULL)
			return -1;
		if (he + 1 < end) {
			if (he[1] != ':')
				return -1;
			ps = he + 2;
		}
	} else {
		hs = p;
		he = memchr(p, ':', (size_t)(end - p));
		if (he != NULL)
			ps = he + 1;
		else
			he = end;
	}
	n = (size_t)(he - hs);
	if (n == 0 || n >= hostlen)
		return -1;
	memcpy(host, hs, n);
	host[n] = '\0';
	if (strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789.-:_%") != n)
		return -1;
	if (ps == NULL) {
		snprintf(port, portlen, "443");
		return 0;
	}
	if (ps == end || (size_t)(end - ps) > 5 || *ps < '0' || *ps > '9')
		return -1;
	v = strtol(ps, &ep, 10);
	if (ep != end || v < 1 || v > 65535)
		return -1;
	snprintf(port, portlen, "%ld", v);
	return 0;
}

/* ---- transport ---- */

/* Wait for events on c until its deadline: 0, or -1 with errno
 * ETIMEDOUT, or EINTR when the deadline was an interruption's. */
static int
wait_fd(struct conn *c, short events)
{
	struct pollfd pfd[2];
	int64_t left;
	nfds_t nfds;
	int r;

	for (;;) {
		left = c->deadline - util_now_ms();
		if (left <= 0) {
			errno = c->intr_seen ? EINTR : ETIMEDOUT;
			return -1;
		}
		pfd[0].fd = c->fd;
		pfd[0].events = events;
		pfd[0].revents = 0;
		nfds = 1;
		if (c->intr != NULL && !c->intr_seen) {
			/* a descriptor, not a flag: a signal between a
			 * check and poll(2) would be missed */
			pfd[1].fd = c->intr->fd;
			pfd[1].events = POLLIN;
			pfd[1].revents = 0;
			nfds = 2;
		}
		r = poll(pfd, nfds, left > INT_MAX ? INT_MAX : (int)left);
		if (r > 0 && nfds == 2 && pfd[1].revents != 0) {
			c->intr_seen = 1;
			if (c->deadline > util_now_ms() + c->intr->grace_ms)
				c->deadline = util_now_ms() + c->intr->grace_ms;
			if (pfd[0].revents == 0)
				continue;
		}
		if (r > 0)
			return 0;
		if (r == 0) {
			errno = c->intr_seen ? EINTR : ETIMEDOUT;
			return -1;
		}
		if (errno != EINTR)
			return -1;
	}
}

static int
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) ? -1 : 0;
}

static int
open_unix(struct conn *c, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		errf(err, errlen, "%s: socket path too long", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		errf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* a local connect does not wait on the network: blocking is fine */
	if (connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		errf(err, errlen, "connect %s: %s", path, strerror(errno));
		return -1;
	}
	return set_nonblock(c->fd);
}

static int
connect_one(struct conn *c, const struct addrinfo *ai)
{
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	c->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, ai->ai_protocol);
	if (c->fd < 0)
		return -1;
	if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -1;
	if (wait_fd(c, POLLOUT) != 0)
		return -1;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
		return -1;
	if (soerr != 0) {
		errno = soerr;
		return -1;
	}
	return 0;
}

static int
open_tcp(struct conn *c, const char *host, const char *port, char *err,
    size_t errlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	int r, saved = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	r = getaddrinfo(host, port, &hints, &res);
	if (r != 0) {
		errf(err, errlen, "%s: %s", host, gai_strerror(r));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if (connect_one(c, ai) == 0) {
			freeaddrinfo(res);
			return 0;
		}
		saved = errno;
		if (c->fd >= 0)
			close(c->fd);
		c->fd = -1;
	}
	freeaddrinfo(res);
	errf(err, errlen, "connect %s port %s: %s", host, port,
	    strerror(saved));
	return -1;
}

static void
ssl_err(char *err, size_t errlen, const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();

	if (e == 0)
		errf(err, errlen, "%s failed", what);
	else {
		ERR_error_string_n(e, buf, sizeof(buf));
		errf(err, errlen, "%s: %s", what, buf);
	}
	ERR_clear_error();
}

/* Wait as SSL asks after a WANT_*; -1 on anything else. */
static int
ssl_wait(struct conn *c, int ret)
{
	switch (SSL_get_error(c->ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		return wait_fd(c, POLLIN);
	case SSL_ERROR_WANT_WRITE:
		return wait_fd(c, POLLOUT);
	default:
		return -1;
	}
}

static int
is_ip_literal(const char *host)
{
	unsigned char a[16];

	return inet_pton(AF_INET, host, a) == 1 ||
	    inet_pton(AF_INET6, host, a) == 1;
}

static enum ctlh_rc
tls_setup(struct conn *c, const struct ctlh_target *t, const char *host,
    char *err, size_t errlen)
{
	c->ctx = SSL_CTX_new(TLS_client_method());
	if (c->ctx == NULL) {
		ssl_err(err, errlen, "SSL_CTX_new");
		return CTLH_UNREACHABLE;
	}
	SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
	/* responses are framed by length: a missing close_notify is EOF */
	SSL_CTX_set_options(c->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	if (t->cacert != NULL) {
		if (SSL_CTX_load_verify_locations(c->ctx, t->cacert,
		    NULL) != 1) {
			ssl_err(err, errlen, t->cacert);
			return CTLH_USAGE;
		}
	} else if (SSL_CTX_set_default_verify_paths(c->ctx) != 1) {
		ssl_err(err, errlen, "default CA paths");
		return CTLH_USAGE;
	}
	if (t->cert != NULL) {
		const char *key = t->key ? t->key : t->cert;
		if (SSL_CTX_use_certificate_chain_file(c->ctx, t->cert) != 1) {
			ssl_err(err, errlen, t->cert);
			return CTLH_USAGE;
		}
		if (SSL_CTX_use_PrivateKey_file(c->ctx, key,
		    SSL_FILETYPE_PEM) != 1 ||
		    SSL_CTX_check_private_key(c->ctx) != 1) {
			ssl_err(err, errlen, key);
			return CTLH_USAGE;
		}
	}
	c->ssl = SSL_new(c->ctx);
	if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1) {
		ssl_err(err, errlen, "SSL_new");
		return CTLH_UNREACHABLE;
	}
	if (is_ip_literal(host)) {
		X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
		if (X509_VERIFY_PARAM_set1_ip_asc(vp, host) != 1) {
			ssl_err(err, errlen, "verify address");
			return CTLH_UNREACHABLE;
		}
	} else if (SSL_set_tlsext_host_name(c->ssl, host) != 1 ||
	    SSL_set1_host(c->ssl, host) != 1) {
		ssl_err(err, errlen, "server name");
		return CTLH_UNREACHABLE;
	}
	return CTLH_OK;
}

static enum ctlh_rc
tls_handshake(struct conn *c, char *err, size_t errlen)
{
	int r, i;
	long vr;

	for (i = 0; i < 10000; i++) {
		ERR_clear_error();
		r = SSL_connect(c->ssl);
		if (r == 1)
			return CTLH_OK;
		if (ssl_wait(c, r) != 0)
			break;
	}
	vr = SSL_get_verify_result(c->ssl);
	if (vr != X509_V_OK)
		errf(err, errlen, "TLS: server certificate: %s",
		    X509_verify_cert_error_string(vr));
	else if (errno == ETIMEDOUT && ERR_peek_error() == 0)
		errf(err, errlen, "TLS handshake timed out");
	else
		ssl_err(err, errlen, "TLS handshake");
	return CTLH_UNREACHABLE;
}

static int
conn_write(struct conn *c, const char *p, size_t n)
{
	ssize_t w;
	int r;

	while (n > 0) {
		if (c->ssl != NULL) {
			ERR_clear_error();
			r = SSL_write(c->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
			if (r > 0) {
				p += r;
				n -= (size_t)r;
			} else if (ssl_wait(c, r) != 0)
				return -1;
			continue;
		}
		w = send(c->fd, p, n, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd(c, POLLOUT) != 0)
				return -1;
		} else {
			return -1;
		}
	}
	return 0;
}

/* >0 bytes, 0 EOF, -1 error or timeout. */
static ssize_t
conn_read(struct conn *c, char *p, size_t n)
{
	ssize_t r;
	int k;

	for (;;) {
		if (c->ssl != NULL) {
			ERR_clear_error();
			k = SSL_read(c->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
			if (k > 0)
				return k;
			if (SSL_get_error(c->ssl, k) == SSL_ERROR_ZERO_RETURN)
				return 0;
			if (ssl_wait(c, k) != 0)
				return SSL_get_error(c->ssl, k) ==
				    SSL_ERROR_SYSCALL && errno == 0 ? 0 : -1;
			continue;
		}
		r = recv(c->fd, p, n, 0);
		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (wait_fd(c, POLLIN) != 0)
			return -1;
	}
}

static void
conn_close(struct conn *c)
{
	if (c->ssl != NULL)
		SSL_free(c->ssl);
	if (c->ctx != NULL)
		SSL_CTX_free(c->ctx);
	if (c->fd >= 0)
		close(c->fd);
	c->ssl = NULL;
	c->ctx = NULL;
	c->fd = -1;
}

static int
token_ok(const char *tok)
{
	const unsigned char *p;

	if (*tok == '\0')
		return 0;
	for (p = (const unsigned char *)tok; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f)
			return 0;
	return 1;
}

/* The Host header: the URL's authority as written, or "localhost". */
static void
host_header(const struct ctlh_target *t, char *out, size_t outlen)
{
	const char *p;
	size_t n;

	if (t->url == NULL) {
		snprintf(out, outlen, "localhost");
		return;
	}
	p = t->url + 8;
	n = strcspn(p, "/?#");
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* extra: header lines, each ending in CRLF, or "".  A body of blen
 * bytes (NULL: none) goes with type as its Content-Type; it may hold
 * NULs, so it is appended, not formatted. */
static char *
build_request(const struct ctlh_target *t, const char *method,
    const char *path, const char *type, const char *body, size_t blen,
    const char *accept, const char *extra, size_t *outlen)
{
	char hosth[300], *head = NULL, *out;
	int n;

	if (body == NULL)
		blen = 0;
	host_header(t, hosth, sizeof(hosth));
	n = asprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n"
	    "User-Agent: sluicectl/%s\r\nAccept: %s\r\n"
	    "Connection: close\r\n%s%s%s%s%s%s%sContent-Length: %zu\r\n\r\n",
	    method, path, hosth, PACKAGE_VERSION, accept, extra,
	    t->token ? "Authorization: Bearer " : "",
	    t->token ? t->token : "", t->token ? "\r\n" : "",
	    body ? "Content-Type: " : "", body ? type : "",
	    body ? "\r\n" : "", blen);
	if (n < 0)
		return NULL;
	if ((out = realloc(head, (size_t)n + blen + 1)) == NULL) {
		free(head);
		return NULL;
	}
	if (blen > 0)
		memcpy(out + n, body, blen);
	out[(size_t)n + blen] = '\0';
	*outlen = (size_t)n + blen;
	return out;
}

/* Connect to the target (TLS included) within c->deadline. */
static enum ctlh_rc
open_target(struct conn *c, const struct ctlh_target *t, char *err,
    size_t errlen)
{
	char host[256], port[8];
	enum ctlh_rc rc;

	c->deadline = util_now_ms() +
	    (t->timeout_ms > 0 ? t->timeout_ms : 30000);
	c->intr = t->intr;
	if (t->token != NULL && !token_ok(t->token)) {
		errf(err, errlen, "the token holds spaces or control "
		    "characters");
		return CTLH_USAGE;
	}
	if (t->url == NULL)
		return open_unix(c, t->socket, err, errlen) == 0 ? CTLH_OK :
		    CTLH_UNREACHABLE;
	if (ctlh_parse_url(t->url, host, sizeof(host), port,
	    sizeof(port)) != 0) {
		errf(err, errlen, "%s: not an https://host:port URL",
		    t->url);
		return CTLH_USAGE;
	}
	if (open_tcp(c, host, port, err, errlen) != 0)
		return CTLH_UNREACHABLE;
	rc = tls_setup(c, t, host, err, errlen);
	if (rc != CTLH_OK)
		return rc;
	return tls_handshake(c, err, errlen);
}

enum ctlh_rc
ctlh_request(const struct ctlh_target *t, const char *method,
    const char *path, const char *body, struct ctlh_resp *r, char *err,
    size_t errlen)
{
	struct ctlh_req q = { .method = method, .path = path, .body = body,
	    .body_len = body ? strlen(body) : 0 };

	return ctlh_send(t, &q, r, err, errlen);
}

/* Join header lines into "Name: value\r\n..."; NULL if one is unsafe. */
static char *
extra_headers(const char *const *headers)
{
	size_t len = 1, i;
	char *out;

	for (i = 0; headers != NULL && headers[i] != NULL; i++) {
		if (strpbrk(headers[i], "\r\n") != NULL)
			return NULL;
		len += strlen(headers[i]) + 2;
	}
	out = malloc(len);
	if (out == NULL)
		return NULL;
	out[0] = '\0';
	for (i = 0; headers != NULL && headers[i] != NULL; i++) {
		strcat(out, headers[i]);
		strcat(out, "\r\n");
	}
	return out;
}

/* The request of q, its extra headers checked. */
static char *
build_req(const struct ctlh_target *t, const struct ctlh_req *q,
    const char *accept, size_t *outlen, char *err, size_t errlen)
{
	char *extra = extra_headers(q->headers), *req;

	if (extra == NULL) {
		errf(err, errlen, "bad header line or out of memory");
		return NULL;
	}
	req = build_request(t, q->method, q->path, q->type ? q->type :
	    "application/json", q->body, q->body_len, q->accept ? q->accept :
	    accept, extra, outlen);
	free(extra);
	if (req == NULL)
		errf(err, errlen, "out of memory");
	return req;
}

/*
 * Connect and send q (Accept: accept unless q says), leaving c to read
 * the response.  A failed write is not the end: the server may have
 * answered and closed early (a refusal: a body over its limit), so
 * CTLH_OK comes back with the write's errno in *wr_errno, to be told
 * when no response can be read.
 */
static enum ctlh_rc
send_request(struct conn *c, const struct ctlh_target *t,
    const struct ctlh_req *q, const char *accept, int *wr_errno, char *err,
    size_t errlen)
{
	char *req;
	size_t reqlen = 0;
	enum ctlh_rc rc;

	*wr_errno = 0;
	rc = open_target(c, t, err, errlen);
	if (rc != CTLH_OK)
		return rc;
	req = build_req(t, q, accept, &reqlen, err, errlen);
	if (req == NULL)
		return CTLH_USAGE;
	if (conn_write(c, req, reqlen) != 0)
		*wr_errno = errno != 0 ? errno : EIO;
	free(req);
	return CTLH_OK;
}

static enum ctlh_rc read_response(struct conn *c, struct ctlh_stream *s,
    struct ctlh_resp *r, int *streamed, char *err, size_t errlen);

enum ctlh_rc
ctlh_send(const struct ctlh_target *t, const struct ctlh_req *q,
    struct ctlh_resp *r, char *err, size_t errlen)
{
	struct conn c = { .fd = -1 };
	enum ctlh_rc rc;
	int we, streamed;

	memset(r, 0, sizeof(*r));
	rc = send_request(&c, t, q, "application/json", &we, err, errlen);
	if (rc == CTLH_OK)
		rc = read_response(&c, NULL, r, &streamed, err, errlen);
	if (rc == CTLH_BAD_RESPONSE && we != 0) {
		errf(err, errlen, "sending the request: %s", we == ETIMEDOUT ?
		    "timed out" : strerror(we));
		rc = CTLH_UNREACHABLE;
	}
	conn_close(&c);
	return rc;
}

/* ---- streams ---- */

enum frame { FR_CLOSE, FR_LENGTH, FR_CHUNKED };
enum chunk_state { CS_SIZE, CS_EXT, CS_SIZE_LF, CS_DATA, CS_DATA_CR,
	CS_DATA_LF, CS_DONE };

struct ctlh_stream {
	struct conn c;
	enum frame frame;
	size_t left;            /* FR_LENGTH: body bytes to go */
	enum chunk_state cs;
	size_t chunk;           /* chunk size, then what is left of it */
	int digits, extlen;
	char *held;             /* body bytes that came with the head */
	size_t heldlen, heldoff;
	int ended;
};

/* Raw bytes without waiting: >0, 0 EOF, CTLH_AGAIN, -1. */
static long
conn_read_nowait(struct conn *c, char *p, size_t n)
{
	ssize_t r;
	int k, e;

	if (c->ssl != NULL) {
		ERR_clear_error();
		errno = 0;
		k = SSL_read(c->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
		if (k > 0)
			return k;
		e = SSL_get_error(c->ssl, k);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
			return CTLH_AGAIN;
		if (e == SSL_ERROR_ZERO_RETURN ||
		    (e == SSL_ERROR_SYSCALL && errno == 0))
			return 0;
		return -1;
	}
	for (;;) {
		r = recv(c->fd, p, n, 0);
		if (r >= 0)
			return (long)r;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return CTLH_AGAIN;
		return -1;
	}
}

/* Remove chunked framing from buf[0..n) in place; returns the body bytes
 * left at buf's start, or -1. */
static long
dechunk(struct ctlh_stream *s, char *buf, size_t n)
{
	size_t i = 0, o = 0, take;
	int d;
	char ch;

	while (i < n && s->cs != CS_DONE) {
		ch = buf[i];
		switch (s->cs) {
		case CS_SIZE:
			d = util_hexval((unsigned char)ch);
			if (d < 0 && s->digits > 0 &&
			    (ch == ';' || ch == '\r')) {
				s->cs = ch == ';' ? CS_EXT : CS_SIZE_LF;
				s->extlen = 0;
				i++;
				continue;
			}
			if (d < 0)
				return -1;
			if (++s->digits > 8)
				return -1;
			s->chunk = s->chunk * 16 + (size_t)d;
			i++;
			break;
		case CS_EXT:
			if (ch == '\r')
				s->cs = CS_SIZE_LF;
			else if (ch == '\n' || ++s->extlen > 256)
				return -1;
			i++;
			break;
		case CS_SIZE_LF:
			if (ch != '\n')
				return -1;
			i++;
			s->cs = s->chunk == 0 ? CS_DONE : CS_DATA;
			break;
		case CS_DATA:
			take = n - i < s->chunk ? n - i : s->chunk;
			memmove(buf + o, buf + i, take);
			o += take;
			i += take;
			s->chunk -= take;
			if (s->chunk == 0)
				s->cs = CS_DATA_CR;
			break;
		case CS_DATA_CR:
		case CS_DATA_LF:
			if (ch != (s->cs == CS_DATA_CR ? '\r' : '\n'))
				return -1;
			i++;
			if (s->cs == CS_DATA_CR)
				s->cs = CS_DATA_LF;
			else {
				s->cs = CS_SIZE;
				s->digits = 0;
				s->chunk = 0;
			}
			break;
		case CS_DONE:
			break;
		}
	}
	/* the last chunk ends the body; trailers are not read */
	if (s->cs == CS_DONE)
		s->ended = 1;
	return (long)o;
}

long
ctlh_stream_read(struct ctlh_stream *s, char *buf, size_t n, char *err,
    size_t errlen)
{
	long got, out;
	int i;

	if (n == 0)
		return CTLH_AGAIN;
	/* bounded: each round either returns or consumes framing bytes */
	for (i = 0; i < 1000; i++) {
		if (s->ended)
			return 0;
		if (s->heldoff < s->heldlen) {
			got = (long)(s->heldlen - s->heldoff < n ?
			    s->heldlen - s->heldoff : n);
			memcpy(buf, s->held + s->heldoff, (size_t)got);
			s->heldoff += (size_t)got;
		} else {
			got = conn_read_nowait(&s->c, buf, n);
			if (got == CTLH_AGAIN)
				return CTLH_AGAIN;
			if (got < 0) {
				errf(err, errlen, "reading the stream: %s",
				    errno ? strerror(errno) : "TLS error");
				return -1;
			}
			if (got == 0) {
				if (s->frame != FR_CLOSE) {
					errf(err, errlen, "the stream was "
					    "cut short");
					return -1;
				}
				s->ended = 1;
				return 0;
			}
		}
		if (s->frame == FR_CLOSE)
			return got;
		if (s->frame == FR_LENGTH) {
			if ((size_t)got >= s->left) {
				got = (long)s->left;
				s->ended = 1;
			}
			s->left -= (size_t)got;
			if (got > 0)
				return got;
			continue;
		}
		out = dechunk(s, buf, (size_t)got);
		if (out < 0) {
			errf(err, errlen, "bad chunked framing in the "
			    "stream");
			return -1;
		}
		if (out > 0)
			return out;
	}
	return CTLH_AGAIN;
}

int
ctlh_stream_fd(const struct ctlh_stream *s)
{
	return s->c.fd;
}

void
ctlh_stream_close(struct ctlh_stream *s)
{
	if (s == NULL)
		return;
	conn_close(&s->c);
	free(s->held);
	free(s);
}

/* The head is in buf[0..he): set up s to read the body of a 200. */
static int
stream_start(struct ctlh_stream *s, const struct head *h, const char *body,
    size_t avail, char *err, size_t errlen)
{
	s->frame = h->chunked ? FR_CHUNKED : h->has_length ? FR_LENGTH :
	    FR_CLOSE;
	s->left = h->length;
	/* an empty body is over before a byte is read */
	s->ended = s->frame == FR_LENGTH && s->left == 0;
	s->cs = CS_SIZE;
	if (avail > 0) {
		s->held = malloc(avail);
		if (s->held == NULL) {
			errf(err, errlen, "out of memory");
			return -1;
		}
		memcpy(s->held, body, avail);
		s->heldlen = avail;
	}
	return 0;
}

enum ctlh_rc
ctlh_stream_open(const struct ctlh_target *t, const char *path,
    const char *const *headers, struct ctlh_stream **out,
    struct ctlh_resp *r, char *err, size_t errlen)
{
	struct ctlh_req q = { .method = "GET", .path = path,
	    .headers = headers };

	return ctlh_stream_send(t, &q, out, r, err, errlen);
}

/*
 * Read the response on c into r.  With s (c is s's), a 200 or 206 head
 * is enough: s is set up to read its body, *streamed is 1 and r holds
 * the status only.
 */
static enum ctlh_rc
read_response(struct conn *c, struct ctlh_stream *s, struct ctlh_resp *r,
    int *streamed, char *err, size_t errlen)
{
	size_t cap = 16384, len = 0;
	char *buf = malloc(cap), *nb;
	enum ctlh_rc rc = CTLH_BAD_RESPONSE;
	struct head h;
	ssize_t n;
	long he = -1;
	int k, eof = 0;

	*streamed = 0;
	if (buf == NULL) {
		errf(err, errlen, "out of memory");
		return rc;
	}
	for (;;) {
		if (s != NULL && he < 0 && (he = find_head_end(buf, len >
		    CTLH_HEAD_MAX + 4 ? CTLH_HEAD_MAX + 4 : len)) >= 0) {
			if (parse_head(buf, (size_t)he, &h, err, errlen) != 0)
				break;
			/* 206: a range of a file, read as it comes too */
			if (h.status == 200 || h.status == 206) {
				if (stream_start(s, &h, buf + he + 4,
				    len - (size_t)he - 4, err, errlen) != 0)
					break;
				r->status = h.status;
				memcpy(r->reason, h.reason, sizeof(r->reason));
				*streamed = 1;
				rc = CTLH_OK;
				break;
			}
		}
		/* not a stream: the whole answer */
		k = ctlh_parse_response(buf, len, eof, r, err, errlen);
		if (k == 1) {
			rc = CTLH_OK;
			break;
		}
		if (k < 0)
			break;
		if (len == cap) {
			if (cap >= CTLH_HEAD_MAX + CTLH_BODY_MAX * 2) {
				errf(err, errlen, "response too large");
				break;
			}
			nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				errf(err, errlen, "out of memory");
				break;
			}
			buf = nb;
			cap *= 2;
		}
		n = conn_read(c, buf + len, cap - len);
		if (n < 0) {
			errf(err, errlen, "reading the response: %s",
			    errno == ETIMEDOUT ? "timed out" :
			    (errno ? strerror(errno) : "TLS error"));
			break;
		}
		if (n == 0)
			eof = 1;
		len += (size_t)n;
	}
	free(buf);
	return rc;
}

enum ctlh_rc
ctlh_stream_send(const struct ctlh_target *t, const struct ctlh_req *q,
    struct ctlh_stream **out, struct ctlh_resp *r, char *err, size_t errlen)
{
	struct ctlh_stream *s;
	enum ctlh_rc rc;
	int we = 0, streamed = 0;

	*out = NULL;
	memset(r, 0, sizeof(*r));
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		errf(err, errlen, "out of memory");
		return CTLH_USAGE;
	}
	s->c.fd = -1;
	rc = send_request(&s->c, t, q, "text/event-stream", &we, err, errlen);
	if (rc == CTLH_OK)
		rc = read_response(&s->c, s, r, &streamed, err, errlen);
	if (rc == CTLH_BAD_RESPONSE && we != 0) {
		errf(err, errlen, "sending the request: %s", we == ETIMEDOUT ?
		    "timed out" : strerror(we));
		rc = CTLH_UNREACHABLE;
	}
	if (rc == CTLH_OK && streamed) {
		*out = s;
		s = NULL;
	}
	ctlh_stream_close(s);
	return rc;
}

/* ---- Server-Sent Events ---- */

void
ctlh_sse_init(struct ctlh_sse *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->type, sizeof(p->type), "message");
}

void
ctlh_sse_reset(struct ctlh_sse *p)
{
	p->linelen = 0;
	p->datalen = 0;
	p->has_data = 0;
	p->after_cr = 0;
	snprintf(p->type, sizeof(p->type), "message");
}

void
ctlh_sse_free(struct ctlh_sse *p)
{
	free(p->line);
	free(p->data);
	p->line = p->data = NULL;
	p->linecap = p->datacap = 0;
	ctlh_sse_reset(p);
}

static int
grow(char **buf, size_t *cap, size_t need)
{
	size_t nc = *cap ? *cap : 256;
	char *nb;

	if (need <= *cap)
		return 0;
	while (nc < need)
		nc *= 2;
	nb = realloc(*buf, nc);
	if (nb == NULL)
		return -1;
	*buf = nb;
	*cap = nc;
	return 0;
}

/* One complete line (without its end) in p->line. */
static int
sse_line(struct ctlh_sse *p, ctlh_sse_cb cb, void *arg, char *err,
    size_t errlen)
{
	char *line = p->line, *val;
	size_t n = p->linelen, namelen, vlen;

	if (n == 0) {
		/* dispatch; data's final newline is not part of it */
		if (p->has_data) {
			p->data[p->datalen] = '\0';
			cb(arg, p->type, p->data, p->datalen, p->id);
		}
		p->datalen = 0;
		p->has_data = 0;
		snprintf(p->type, sizeof(p->type), "message");
		return 0;
	}
	if (line[0] == ':') {
		p->comments++;
		return 0;
	}
	val = memchr(line, ':', n);
	namelen = val ? (size_t)(val - line) : n;
	if (val != NULL) {
		val++;
		if (val < line + n && *val == ' ')
			val++;
		vlen = (size_t)(line + n - val);
	} else {
		val = line + n;
		vlen = 0;
	}
	if (namelen == 4 && memcmp(line, "data", 4) == 0) {
		/* a server that never ends the event: as much as a body */
		if (p->datalen + vlen + 1 > CTLH_BODY_MAX) {
			errf(err, errlen, "event data larger than %d bytes",
			    CTLH_BODY_MAX);
			return -1;
		}
		if (grow(&p->data, &p->datacap, p->datalen + vlen + 2) != 0) {
			errf(err, errlen, "out of memory");
			return -1;
		}
		if (p->has_data)
			p->data[p->datalen++] = '\n';
		memcpy(p->data + p->datalen, val, vlen);
		p->datalen += vlen;
		p->has_data = 1;
	} else if (namelen == 5 && memcmp(line, "event", 5) == 0) {
		if (vlen >= sizeof(p->type))
			vlen = sizeof(p->type) - 1;
		memcpy(p->type, val, vlen);
		p->type[vlen] = '\0';
		if (vlen == 0)
			snprintf(p->type, sizeof(p->type), "message");
	} else if (namelen == 2 && memcmp(line, "id", 2) == 0) {
		/* an id with NUL, or too long to send back, is ignored */
		if (vlen < sizeof(p->id) && memchr(val, '\0', vlen) == NULL) {
			memcpy(p->id, val, vlen);
			p->id[vlen] = '\0';
		}
	}
	/* retry: and unknown fields are ignored */
	return 0;
}

int
ctlh_sse_feed(struct ctlh_sse *p, const char *buf, size_t n,
    ctlh_sse_cb cb, void *arg, char *err, size_t errlen)
{
	size_t i;
	char c;

	for (i = 0; i < n; i++) {
		c = buf[i];
		if (p->after_cr) {
			p->after_cr = 0;
			if (c == '\n')
				continue;
		}
		if (c == '\r' || c == '\n') {
			p->after_cr = c == '\r';
			if (grow(&p->line, &p->linecap, p->linelen + 1) != 0) {
				errf(err, errlen, "out of memory");
				return -1;
			}
			p->line[p->linelen] = '\0';
			if (sse_line(p, cb, arg, err, errlen) != 0)
				return -1;
			p->linelen = 0;
			continue;
		}
		if (p->linelen >= CTLH_SSE_LINE_MAX) {
			errf(err, errlen, "event line longer than %d bytes",
			    CTLH_SSE_LINE_MAX);
			return -1;
		}
		if (grow(&p->line, &p->linecap, p->linelen + 2) != 0) {
			errf(err, errlen, "out of memory");
			return -1;
		}
		p->line[p->linelen++] = c;
	}
	return 0;
}
