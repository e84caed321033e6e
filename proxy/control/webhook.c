/*
 * webhook.c: prompts POSTed to the operator's HTTPS endpoint.
 *
 * One delivery per prompt id.  An attempt resolves the URL's host (the
 * webhook.hosts map, then c-ares; an IP literal needs neither), dials the
 * address with evhttp over a fresh TLS bufferevent (SNI and certificate
 * name from the URL), and ends in done_cb or at its own deadline.  A 2xx
 * ends the delivery; anything else waits a backoff with jitter and tries
 * again, until the prompt is done (wh_prompt_done) or its own expiry.
 *
 * The webhook is the operator's endpoint, often internal: the sandbox
 * address policy does not apply to it.
 *
 * evhttp calls done_cb from inside its connection code, where the
 * connection must not be freed.  So done_cb only records the outcome and
 * activates the delivery's timer; the timer callback tears down and
 * decides.  The timer also carries the attempt deadline and the backoff
 * wait, so a delivery has exactly one thing pending at a time.
 *
 * What an answer may cost is bounded: its header section (WH_HEAD_MAX,
 * evhttp's own limit), its body (WH_RESP_MAX), everything one attempt
 * receives (WH_ATTEMPT_MAX) and everything the attempts in flight hold
 * together (WH_HELD_MAX).  An attempt is charged each byte it receives
 * and, until its header section ends, WH_LINE_COST for each line, which
 * evhttp keeps as a header of its own; the charge stands until the
 * attempt ends.  Past a bound the attempt fails like any other.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/util.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "proxy/lib/clog.h"
#include "proxy/lib/config.h"
#include "proxy/lib/dns.h"
#include "proxy/lib/log.h"
#include "proxy/lib/util.h"
#include "proxy/control/webhook.h"
#include "proxy/lib/jsonstrict.h"

#define WH_SECRET_MAX 4096
#define WH_RESP_MAX 65536
#define WH_HEAD_MAX 8192
#define WH_LINE_COST 128          /* a parsed header: entry, key, value */
#define WH_ATTEMPT_MAX (256 * 1024)
#define WH_HELD_MAX (4 * 1024 * 1024)
#define WH_MAX_PENDING 1024
#define WH_BACKOFF_MIN_MS 500
#define WH_BACKOFF_MAX_MS 30000

/* Settings of one configuration; a reload builds new ones and swaps. */
struct wh_conf {
	SSL_CTX *ctx;
	struct dns *dns;              /* NULL when the host is a literal */
	char *host;                   /* canonical name or IP text */
	int literal;
	uint16_t port;
	char *path;
	char hosthdr[POL_HOST_MAX + 16];
	unsigned char *secret;
	size_t secret_len;
	int timeout_ms;
};

enum wh_phase {
	WH_WAIT,          /* backoff before the next attempt */
	WH_RESOLVE,       /* dnsq pending; timer is the attempt deadline */
	WH_SEND,          /* evcon pending; timer is the attempt deadline */
	WH_REAP,          /* done_cb ran; timer is active now */
};

struct wh_delivery {
	char id[64];
	char *body;
	size_t body_len;
	enum wh_phase phase;
	int attempt;                  /* 1-based, of the current one */
	unsigned addr_next;           /* rotates through resolved addresses */
	struct event *timer;
	struct dns_query *dnsq;
	struct evhttp_connection *evcon;
	struct evbuffer_cb_entry *incb;  /* counts what evcon receives */
	size_t rcvd;                  /* bytes this attempt received */
	size_t held;                  /* charged to this attempt, in wh.held */
	int head_done;                /* the final header section is read */
	struct timespec t_attempt;
	time_t expires;               /* no attempt starts after this */
	/* outcome recorded by done_cb */
	int status;                   /* HTTP status, 0: transport failure */
	char why[200];
	char addr[64];                /* dialed address, for messages */
	char *resp;                   /* 2xx body, NUL-terminated */
	size_t resp_len;
	TAILQ_ENTRY(wh_delivery) entry;
};

/* Applies a decision found in an answer (wh_init's). */
static wh_answer_fn answer_fn;

static struct {
	struct event_base *base;
	struct wh_conf *conf;         /* NULL: no webhook */
	TAILQ_HEAD(, wh_delivery) q;
	size_t n;
	size_t held;                  /* sum of the attempts' charges */
} wh = { .q = TAILQ_HEAD_INITIALIZER(wh.q) };

static void attempt_start(struct wh_delivery *d);

/* ------------------------------------------------------------------ */
/* Signature. */

int
wh_sign(const void *key, size_t keylen, const char *timestamp,
    const char *body, size_t bodylen, char out[WH_SIG_LEN])
{
	static const char hex[] = "0123456789abcdef";
	EVP_MAC *mac = NULL;
	EVP_MAC_CTX *ctx = NULL;
	OSSL_PARAM params[2];
	unsigned char md[32];
	size_t mdlen = 0, i;
	int rc = -1;

	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if ((mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL ||
	    (ctx = EVP_MAC_CTX_new(mac)) == NULL ||
	    !EVP_MAC_init(ctx, key, keylen, params) ||
	    !EVP_MAC_update(ctx, (const unsigned char *)timestamp,
	    strlen(timestamp)) ||
	    !EVP_MAC_update(ctx, (const unsigned char *)".", 1) ||
	    !EVP_MAC_update(ctx, (const unsigned char *)body, bodylen) ||
	    !EVP_MAC_final(ctx, md, &mdlen, sizeof(md)) || mdlen != 32)
		goto out;
	memcpy(out, "sha256=", 7);
	for (i = 0; i < mdlen; i++) {
		out[7 + 2 * i] = hex[md[i] >> 4];
		out[8 + 2 * i] = hex[md[i] & 15];
	}
	out[7 + 2 * mdlen] = '\0';
	rc = 0;
out:
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	OPENSSL_cleanse(md, sizeof(md));
	return rc;
}

/* ------------------------------------------------------------------ */
/* Settings. */

/* The whole file is the secret, less trailing line ends (editors add
 * one).  Never logged. */
static int
secret_read(const char *path, unsigned char **out, size_t *outlen,
    char *err, size_t errlen)
{
	unsigned char *buf;
	ssize_t r;
	size_t n = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "secret_file %s: %s", path,
		    strerror(errno));
		return -1;
	}
	if ((buf = malloc(WH_SECRET_MAX + 1)) == NULL) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	while (n <= WH_SECRET_MAX &&
	    (r = read(fd, buf + n, WH_SECRET_MAX + 1 - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "secret_file %s: %s", path,
			    strerror(errno));
			goto bad;
		}
		n += (size_t)r;
	}
	close(fd);
	fd = -1;
	if (n > WH_SECRET_MAX) {
		snprintf(err, errlen, "secret_file %s: longer than %d bytes",
		    path, WH_SECRET_MAX);
		goto bad;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n == 0) {
		snprintf(err, errlen, "secret_file %s: empty", path);
		goto bad;
	}
	*out = buf;
	*outlen = n;
	return 0;
bad:
	if (fd >= 0)
		close(fd);
	OPENSSL_cleanse(buf, WH_SECRET_MAX + 1);
	free(buf);
	return -1;
}

static void
conf_free(struct wh_conf *k)
{
	if (k == NULL)
		return;
	SSL_CTX_free(k->ctx);
	if (k->dns)
		dns_free(k->dns);
	free(k->host);
	free(k->path);
	if (k->secret) {
		OPENSSL_cleanse(k->secret, k->secret_len);
		free(k->secret);
	}
	free(k);
}

static SSL_CTX *
ctx_new(const char *ca_file, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	unsigned long e;

	if (ctx == NULL)
		goto fail;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, ca_file,
	    NULL) != 1 : SSL_CTX_set_default_verify_paths(ctx) != 1)
		goto fail;
	return ctx;
fail:
	e = ERR_get_error();
	snprintf(err, errlen, "TLS context%s%s: %s", ca_file ? " with " : "",
	    ca_file ? ca_file : "", e ? ERR_reason_error_string(e) :
	    "out of memory");
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return NULL;
}

static struct dns *
resolver_new(const struct cfg *c, char *err, size_t errlen)
{
	const struct cfg_webhook *w = &c->webhook;
	struct dns_host *hosts;
	struct dns *d;
	size_t i;

	hosts = calloc(w->nhosts + 1, sizeof(*hosts));
	if (hosts == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (i = 0; i < w->nhosts; i++) {
		hosts[i].name = w->hosts[i].name;
		hosts[i].addrs = w->hosts[i].addrs;
		hosts[i].naddrs = w->hosts[i].naddrs;
	}
	d = dns_new(wh.base, (const char *const *)c->dns_servers,
	    c->ndns_servers, hosts, w->nhosts, w->timeout_ms, err, errlen);
	free(hosts);
	return d;
}

static struct wh_conf *
conf_new(const struct cfg *c, char *err, size_t errlen)
{
	const struct cfg_webhook *w = &c->webhook;
	struct wh_conf *k;
	struct pol_target t;
	char e2[256];

	if ((k = calloc(1, sizeof(*k))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	k->port = w->port;
	k->timeout_ms = w->timeout_ms;
	k->host = strdup(w->host);
	k->path = strdup(w->path);
	if (k->host == NULL || k->path == NULL) {
		snprintf(err, errlen, "out of memory");
		goto bad;
	}
	k->literal = pol_host_parse(k->host, strlen(k->host), 0, &t) ==
	    POL_R_NONE ? t.kind != POL_HOST_NAME : 1;
	snprintf(k->hosthdr, sizeof(k->hosthdr), "%s%s%s", strchr(k->host,
	    ':') ? "[" : "", k->host, strchr(k->host, ':') ? "]" : "");
	if (k->port != 443)
		snprintf(k->hosthdr + strlen(k->hosthdr), sizeof(k->hosthdr) -
		    strlen(k->hosthdr), ":%u", k->port);
	if (secret_read(w->secret_file, &k->secret, &k->secret_len, err,
	    errlen) != 0)
		goto bad;
	if ((k->ctx = ctx_new(w->ca_file, err, errlen)) == NULL)
		goto bad;
	if (!k->literal && (k->dns = resolver_new(c, e2, sizeof(e2))) ==
	    NULL) {
		snprintf(err, errlen, "resolver: %s", e2);
		goto bad;
	}
	return k;
bad:
	conf_free(k);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Deliveries. */

static long
ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)(t.tv_sec - t0->tv_sec) * 1000 +
	    (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void
timer_in(struct wh_delivery *d, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(d->timer, &tv);
}

/* Stop whatever the current attempt has pending. */
static void
attempt_abort(struct wh_delivery *d)
{
	evtimer_del(d->timer);
	if (d->dnsq != NULL) {
		dns_cancel(d->dnsq);
		d->dnsq = NULL;
	}
	if (d->evcon != NULL) {
		if (d->incb != NULL)
			evbuffer_remove_cb_entry(bufferevent_get_input(
			    evhttp_connection_get_bufferevent(d->evcon)),
			    d->incb);
		/* frees the request without calling done_cb */
		evhttp_connection_free(d->evcon);
		d->evcon = NULL;
	}
	d->incb = NULL;
	wh.held -= d->held;
	d->held = 0;
	d->rcvd = 0;
	d->head_done = 0;
	free(d->resp);
	d->resp = NULL;
	d->resp_len = 0;
}

static void
delivery_free(struct wh_delivery *d)
{
	attempt_abort(d);
	TAILQ_REMOVE(&wh.q, d, entry);
	wh.n--;
	event_free(d->timer);
	free(d->body);
	free(d);
}

static struct wh_delivery *
delivery_find(const char *id)
{
	struct wh_delivery *d;

	TAILQ_FOREACH(d, &wh.q, entry)
		if (strcmp(d->id, id) == 0)
			return d;
	return NULL;
}

/* Exponential backoff with jitter: a uniform wait in [b/2, b]. */
static long
backoff_ms(int attempt)
{
	long b = WH_BACKOFF_MIN_MS;
	uint32_t r;

	while (--attempt > 0 && b < WH_BACKOFF_MAX_MS)
		b *= 2;
	if (b > WH_BACKOFF_MAX_MS)
		b = WH_BACKOFF_MAX_MS;
	evutil_secure_rng_get_bytes(&r, sizeof(r));
	return b / 2 + (long)(r % (uint32_t)(b / 2 + 1));
}

/* One diagnostic line per failed attempt, then the next or the end. */
static void
attempt_failed(struct wh_delivery *d, const char *why)
{
	long wait = backoff_ms(d->attempt);

	attempt_abort(d);
	if (time(NULL) + wait / 1000 >= d->expires) {
		px_log(PX_WARN, "webhook: prompt %s attempt %d failed after "
		    "%ld ms: %s; the prompt expires first, giving up", d->id,
		    d->attempt, ms_since(&d->t_attempt), why);
		delivery_free(d);
		return;
	}
	px_log(PX_WARN, "webhook: prompt %s attempt %d failed after %ld ms: "
	    "%s; retrying in %ld ms", d->id, d->attempt,
	    ms_since(&d->t_attempt), why, wait);
	d->phase = WH_WAIT;
	timer_in(d, wait);
}

static void
apply_answer(struct wh_delivery *d)
{
	enum pol_answer ans;
	char msg[256] = "";
	json_error_t je;
	json_t *j = NULL, *dec;
	const char *bad = NULL;
	char id[sizeof(d->id)], why[200];

	snprintf(id, sizeof(id), "%s", d->id);
	/* exactly one object, no key twice, nothing after it: a gateway in
	 * front of the receiver must not read another decision than ours */
	if (d->resp != NULL && d->resp_len > 0) {
		j = jsonstrict_load(d->resp, d->resp_len, &je);
		bad = j == NULL ? je.text : !json_is_object(j) ?
		    "not a JSON object" : NULL;
	}
	if (bad != NULL)   /* jansson quotes the input: the receiver's bytes */
		clog_sanitize(bad, strnlen(bad, sizeof(je.text)), why,
		    sizeof(why), 160);
	dec = bad == NULL ? json_object_get(j, "decision") : NULL;
	px_log(PX_INFO, "webhook: prompt %s attempt %d delivered (HTTP %d, "
	    "%ld ms)%s", d->id, d->attempt, d->status,
	    ms_since(&d->t_attempt), dec != NULL ? "" : "; no decision");
	if (bad != NULL)
		px_log(PX_WARN, "webhook: prompt %s: ignoring the answer, it "
		    "is not one JSON object: %s", id, why);
	/* the delivery ends first: answering calls wh_prompt_done */
	delivery_free(d);
	if (dec == NULL) {
		json_decref(j);
		return;
	}
	if (!json_is_string(dec) || pol_answer_parse(json_string_value(dec),
	    &ans) != 0) {
		px_log(PX_WARN, "webhook: prompt %s: ignoring an unknown "
		    "decision in the answer", id);
	} else if (answer_fn == NULL ||
	    answer_fn(id, ans, msg, sizeof(msg)) != 0) {
		px_log(PX_INFO, "webhook: prompt %s: decision %s not applied: "
		    "%s", id, pol_answer_name(ans), msg);
	}
	json_decref(j);
}

static void
on_timer(evutil_socket_t fd, short ev, void *arg)
{
	struct wh_delivery *d = arg;

	(void)fd;
	(void)ev;
	switch (d->phase) {
	case WH_WAIT:
		if (time(NULL) >= d->expires) {
			delivery_free(d);
			return;
		}
		d->attempt++;
		attempt_start(d);
		return;
	case WH_RESOLVE:
	case WH_SEND:
		attempt_failed(d, "timed out");
		return;
	case WH_REAP:
		if (d->status >= 200 && d->status <= 299) {
			apply_answer(d);
			return;
		}
		attempt_failed(d, d->why);
		return;
	}
}

static const char *
req_error_name(enum evhttp_request_error e)
{
	switch (e) {
	case EVREQ_HTTP_TIMEOUT: return "timed out";
	case EVREQ_HTTP_EOF: return "connection closed";
	case EVREQ_HTTP_INVALID_HEADER: return "bad response header";
	case EVREQ_HTTP_BUFFER_ERROR: return "connection failed";
	case EVREQ_HTTP_REQUEST_CANCEL: return "cancelled";
	case EVREQ_HTTP_DATA_TOO_LONG: return "response too long";
	}
	return "failed";
}

static void
on_req_error(enum evhttp_request_error e, void *arg)
{
	struct wh_delivery *d = arg;

	/* a bound that was passed has said why already */
	if (d->why[0] != '\0')
		return;
	/* evhttp reports an oversized header section as a bad one */
	if (e == EVREQ_HTTP_INVALID_HEADER && !d->head_done &&
	    d->rcvd > WH_HEAD_MAX)
		snprintf(d->why, sizeof(d->why), "response header section "
		    "longer than %d bytes", WH_HEAD_MAX);
	else
		snprintf(d->why, sizeof(d->why), "%s", req_error_name(e));
}

/* The attempt is decided (failed, or answered): tear it down outside
 * evhttp's own call stack, from the timer. */
static void
reap_soon(struct wh_delivery *d)
{
	d->phase = WH_REAP;
	evtimer_del(d->timer);
	event_active(d->timer, EV_TIMEOUT, 1);
}

/* Every change of the connection's input buffer: charge what arrived. */
static void
on_input(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct wh_delivery *d = arg;
	struct evbuffer_ptr p;
	size_t charge = info->n_added, len = evbuffer_get_length(b);

	if (info->n_added == 0 || d->phase != WH_SEND)
		return;
	d->rcvd += info->n_added;
	if (!d->head_done && evbuffer_ptr_set(b, &p, len > info->n_added ?
	    len - info->n_added : 0, EVBUFFER_PTR_SET) == 0) {
		/* the new bytes are the last ones; one line, one header */
		while ((p = evbuffer_search(b, "\n", 1, &p)).pos != -1 &&
		    evbuffer_ptr_set(b, &p, 1, EVBUFFER_PTR_ADD) == 0)
			charge += WH_LINE_COST;
	}
	d->held += charge;
	wh.held += charge;
	if (d->held > WH_ATTEMPT_MAX)
		snprintf(d->why, sizeof(d->why), "the answer is larger than "
		    "%d bytes", WH_ATTEMPT_MAX);
	else if (wh.held > WH_HELD_MAX)
		snprintf(d->why, sizeof(d->why), "answers in flight hold more "
		    "than %d bytes", WH_HELD_MAX);
	else
		return;
	d->status = 0;
	bufferevent_disable(evhttp_connection_get_bufferevent(d->evcon),
	    EV_READ);
	reap_soon(d);
}

/* The end of a header section: a 100 Continue starts another one. */
static int
on_headers(struct evhttp_request *req, void *arg)
{
	struct wh_delivery *d = arg;

	if (evhttp_request_get_response_code(req) >= 200)
		d->head_done = 1;
	return 0;
}

/* The TLS reason of a failed attempt, when there is one. */
static void
tls_reason(struct wh_delivery *d)
{
	struct bufferevent *bev = evhttp_connection_get_bufferevent(d->evcon);
	SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
	unsigned long e, first = 0;
	long v;

	/* libevent also queues bare SSL_get_error() codes (library 0),
	 * e.g. SSL_ERROR_SYSCALL for a refused connection: not TLS news */
	while (bev != NULL && (e = bufferevent_get_openssl_error(bev)) != 0)
		if (first == 0 && ERR_GET_LIB(e) != 0)
			first = e;
	if (ssl != NULL && (v = SSL_get_verify_result(ssl)) != X509_V_OK) {
		snprintf(d->why, sizeof(d->why), "TLS: certificate verify "
		    "failed: %s", X509_verify_cert_error_string(v));
		return;
	}
	if (first != 0)
		snprintf(d->why, sizeof(d->why), "TLS: %s",
		    ERR_reason_error_string(first) ?
		    ERR_reason_error_string(first) : "handshake failed");
}

static void
on_done(struct evhttp_request *req, void *arg)
{
	struct wh_delivery *d = arg;
	struct evbuffer *in;
	size_t n;

	if (d->phase != WH_SEND)
		return;   /* a bound decided the attempt first */
	d->status = req != NULL ? evhttp_request_get_response_code(req) : 0;
	if (d->status == 0) {
		/* 2.1 reports a failed connect or handshake with the request
		 * and no error_cb, later failures with NULL after error_cb;
		 * errno is no longer the connect's by now */
		if (d->why[0] == '\0')
			snprintf(d->why, sizeof(d->why), "cannot connect to "
			    "%s port %u", d->addr, wh.conf ? wh.conf->port : 0);
		tls_reason(d);
	} else if (d->status >= 200 && d->status <= 299) {
		in = evhttp_request_get_input_buffer(req);
		n = in ? evbuffer_get_length(in) : 0;
		if (n > WH_RESP_MAX)
			n = WH_RESP_MAX;
		if ((d->resp = malloc(n + 1)) != NULL) {
			if (n > 0)
				evbuffer_copyout(in, d->resp, n);
			d->resp[n] = '\0';
			d->resp_len = n;
		}
	} else {
		snprintf(d->why, sizeof(d->why), "HTTP %d", d->status);
	}
	reap_soon(d);
}

static int
add_headers(struct wh_delivery *d, struct evhttp_request *req)
{
	const struct wh_conf *k = wh.conf;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char ts[24], sig[WH_SIG_LEN];

	snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
	if (wh_sign(k->secret, k->secret_len, ts, d->body, d->body_len,
	    sig) != 0)
		return -1;
	if (evhttp_add_header(h, "Host", k->hosthdr) != 0 ||
	    evhttp_add_header(h, "User-Agent", PX_NAME "/" VERSION) != 0 ||
	    evhttp_add_header(h, "Content-Type", "application/json") != 0 ||
	    evhttp_add_header(h, "Connection", "close") != 0 ||
	    evhttp_add_header(h, "X-Sluice-Event", "prompt") != 0 ||
	    evhttp_add_header(h, "X-Sluice-Delivery", d->id) != 0 ||
	    evhttp_add_header(h, "X-Sluice-Timestamp", ts) != 0 ||
	    evhttp_add_header(h, "X-Sluice-Signature", sig) != 0)
		return -1;
	return evbuffer_add(evhttp_request_get_output_buffer(req), d->body,
	    d->body_len);
}

static struct bufferevent *
tls_bev(void)
{
	const struct wh_conf *k = wh.conf;
	struct bufferevent *bev;
	SSL *ssl = SSL_new(k->ctx);

	if (ssl == NULL)
		return NULL;
	if (k->literal) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
		    k->host) != 1)
			goto bad;
	} else if (SSL_set_tlsext_host_name(ssl, k->host) != 1 ||
	    SSL_set1_host(ssl, k->host) != 1) {
		goto bad;
	}
	bev = bufferevent_openssl_socket_new(wh.base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE |
	    BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL)
		goto bad;
	/* many servers close without close_notify */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
bad:
	SSL_free(ssl);
	return NULL;
}

static void
dial(struct wh_delivery *d, const char *ip)
{
	const struct wh_conf *k = wh.conf;
	struct timeval tv = { k->timeout_ms / 1000,
	    (k->timeout_ms % 1000) * 1000 };
	struct evhttp_request *req;
	struct bufferevent *bev;

	d->phase = WH_SEND;
	d->why[0] = '\0';
	snprintf(d->addr, sizeof(d->addr), "%s", ip);
	if ((bev = tls_bev()) == NULL) {
		attempt_failed(d, "cannot set up TLS");
		return;
	}
	/* an IP literal: with a name evhttp would resolve by blocking */
	d->evcon = evhttp_connection_base_bufferevent_new(wh.base, NULL, bev,
	    ip, k->port);
	if (d->evcon == NULL) {
		bufferevent_free(bev);
		attempt_failed(d, "out of memory");
		return;
	}
	evhttp_connection_set_timeout_tv(d->evcon, &tv);
	evhttp_connection_set_retries(d->evcon, 0);
	evhttp_connection_set_max_headers_size(d->evcon, WH_HEAD_MAX);
	evhttp_connection_set_max_body_size(d->evcon, WH_RESP_MAX);
	d->incb = evbuffer_add_cb(bufferevent_get_input(bev), on_input, d);
	if (d->incb == NULL ||
	    (req = evhttp_request_new(on_done, d)) == NULL) {
		attempt_failed(d, "out of memory");
		return;
	}
	evhttp_request_set_error_cb(req, on_req_error);
	evhttp_request_set_header_cb(req, on_headers);
	if (add_headers(d, req) != 0) {
		evhttp_request_free(req);
		attempt_failed(d, "cannot build the request");
		return;
	}
	errno = 0;
	if (evhttp_make_request(d->evcon, req, EVHTTP_REQ_POST, k->path) !=
	    0) {
		/* 2.1 leaves a refused request to its caller */
		evhttp_request_free(req);
		attempt_failed(d, "cannot start the request");
	}
}

static void
on_resolved(void *arg, enum dns_status st, const struct pol_addr *addrs,
    size_t n, long elapsed_us)
{
	struct wh_delivery *d = arg;
	char ip[64], why[160];

	(void)elapsed_us;
	d->dnsq = NULL;
	if (st != DNS_OK || n == 0) {
		snprintf(why, sizeof(why), "resolving %s: %s", wh.conf->host,
		    dns_status_name(st));
		attempt_failed(d, why);
		return;
	}
	/* a failing address gives way to the next on the next attempt */
	pol_addr_format(&addrs[d->addr_next++ % n], ip, sizeof(ip));
	dial(d, ip);
}

static void
attempt_start(struct wh_delivery *d)
{
	const struct wh_conf *k = wh.conf;

	clock_gettime(CLOCK_MONOTONIC, &d->t_attempt);
	d->status = 0;
	d->why[0] = '\0';
	/* one deadline for the whole attempt, resolution included */
	timer_in(d, k->timeout_ms);
	if (k->literal) {
		dial(d, k->host);
		return;
	}
	d->phase = WH_RESOLVE;
	d->dnsq = dns_resolve(k->dns, k->host, on_resolved, d);
	if (d->dnsq == NULL)
		attempt_failed(d, "out of memory");
}

/* ------------------------------------------------------------------ */
/* Public API. */

int
wh_configured(void)
{
	return wh.conf != NULL;
}

void
wh_prompt(const char *id, const void *prompt_json)
{
	const json_t *p = prompt_json;
	struct wh_delivery *d;
	json_int_t life;

	if (wh.conf == NULL || id == NULL || strlen(id) >= sizeof(d->id) ||
	    delivery_find(id) != NULL)
		return;
	if (wh.n >= WH_MAX_PENDING) {
		d = TAILQ_FIRST(&wh.q);
		px_log(PX_WARN, "webhook: %d deliveries pending; dropping "
		    "prompt %s", WH_MAX_PENDING, d->id);
		delivery_free(d);
	}
	if ((d = calloc(1, sizeof(*d))) == NULL)
		goto oom;
	snprintf(d->id, sizeof(d->id), "%s", id);
	{
		char *raw = json_dumps(p, JSON_COMPACT);

		/* a receiver may show them to a person: escaped, not raw */
		d->body = raw ? clog_json_escape(raw, strlen(raw), NULL) : NULL;
		free(raw);
	}
	d->timer = evtimer_new(wh.base, on_timer, d);
	if (d->body == NULL || d->timer == NULL) {
		if (d->timer)
			event_free(d->timer);
		free(d->body);
		free(d);
		goto oom;
	}
	d->body_len = strlen(d->body);
	/* a safety net: the prompt manager also says when it is done */
	life = json_integer_value(json_object_get(p, "expires_in_s"));
	d->expires = time(NULL) + (life > 0 ? (time_t)life : 3600);
	d->attempt = 1;
	TAILQ_INSERT_TAIL(&wh.q, d, entry);
	wh.n++;
	attempt_start(d);
	return;
oom:
	px_log(PX_ERR, "webhook: prompt %s: out of memory", id);
}

void
wh_prompt_done(const char *id)
{
	struct wh_delivery *d = id ? delivery_find(id) : NULL;

	if (d != NULL)
		delivery_free(d);
}

static void
drop_all(void)
{
	struct wh_delivery *d;

	while ((d = TAILQ_FIRST(&wh.q)) != NULL)
		delivery_free(d);
}

int
wh_init(struct event_base *base, const struct cfg *c, wh_answer_fn answer,
    char *err, size_t errlen)
{
	wh.base = base;
	answer_fn = answer;
	if (c->webhook.url == NULL)
		return 0;
	if ((wh.conf = conf_new(c, err, errlen)) == NULL)
		return -1;
	/* host and port only: a query may carry a token */
	px_log(PX_INFO, "webhook: prompts go to %s port %u", wh.conf->hosthdr,
	    wh.conf->port);
	return 0;
}

int
wh_reload(const struct cfg *c)
{
	struct wh_conf *old = wh.conf, *k = NULL;
	struct wh_delivery *d;
	char err[512];

	if (c->webhook.url != NULL &&
	    (k = conf_new(c, err, sizeof(err))) == NULL) {
		px_log(PX_ERR, "webhook: keeping the running settings: %s",
		    err);
		return -1;
	}
	if (k == NULL)
		drop_all();
	/* attempts in flight hold their own TLS objects and finish; those
	 * resolving start again on the new resolver */
	TAILQ_FOREACH(d, &wh.q, entry)
		if (d->phase == WH_RESOLVE) {
			attempt_abort(d);
			d->phase = WH_WAIT;
			event_active(d->timer, EV_TIMEOUT, 1);
			d->attempt--;
		}
	wh.conf = k;
	conf_free(old);
	return 0;
}

void
wh_shutdown(void)
{
	drop_all();
	conf_free(wh.conf);
	wh.conf = NULL;
}
