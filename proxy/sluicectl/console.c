/*
 * console.c: the web console's HTTP server (evhttp on loopback).
 *
 * A request goes: is the Host loopback (403: a name that resolved here
 * is DNS rebinding), is an Origin it carries this one (403), does a
 * request that changes anything carry one at all (403), is it the
 * one-time token (303 to "/" with the cookie set), does it carry the
 * session cookie (403), and then: a page file, one of the console's own
 * calls (/api/console, /api/reasons, /api/log, /api/events), or a call
 * from the route table passed on to sluiced or the executor with the
 * caller's body.  Answers pass through with their status; bodies are
 * checked to be JSON first.
 *
 * The event stream is relayed one browser stream to one stream from
 * sluiced, so that sluiced counts an approver exactly while a page is
 * watching (no page, no approver: prompts are refused at once as
 * no_approver, as they would be without the console).  Each event is
 * parsed and written again (type checked, data a JSON object dumped on
 * one line), so nothing sluiced relays from a sandbox can frame an
 * event of its own.
 *
 * evhttp 2.1 notes, as in proxy/control/events.c: a connection that
 * fails before we answer leaves the request to us (freed in the close
 * callback); connections are freed from the loop, never inside evhttp's
 * own call stack.  A browser that closes its event stream is seen at
 * once (evhttp reads a connection whose reply has started), so the
 * approver it was goes with it; t_console checks that.
 */
#ifdef HAVE_CONFIG_H
#include "sluice-config.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "policy/policy.h"
#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/util.h"
#include "proxy/sluicectl/console.h"
#include "proxy/sluicectl/console_log.h"
#include "proxy/sluicectl/console_up.h"
#include "proxy/sluicectl/ctl_http.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0"
#endif

#define CON_HEADERS_MAX 16384
#define CON_BODY_MAX 65536
#define CON_TIMEOUT_S 30        /* a browser's request, an API call */
#define CON_RELAYS_MAX 16       /* event streams at once */
#define CON_JOBS_MAX 4          /* log readers at once */
#define RELAY_PENDING_MAX (1024 * 1024)
#define RELAY_PING_S 15
#define RELAY_IDLE_S 75         /* sluiced pings every 15 s by default */
#define RELAY_OPEN_MS 5000      /* the stream's head from a local socket */

/* ------------------------------------------------------------------ */
/* Token, cookie, Host and Origin. */

static int
random_hex(char *out, size_t outlen)
{
	unsigned char b[CONSOLE_SECRET_HEX / 2];
	size_t got = 0, i;
	ssize_t n;

	if (outlen < sizeof(b) * 2 + 1)
		return -1;
	while (got < sizeof(b)) {
		n = getrandom(b + got, sizeof(b) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	for (i = 0; i < sizeof(b); i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	OPENSSL_cleanse(b, sizeof(b));
	return 0;
}

int
console_auth_init(struct console_auth *a, int port)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->cookie, sizeof(a->cookie), "sluice_console_%d", port);
	return random_hex(a->token, sizeof(a->token));
}

/* Constant time in the bytes of want; the length is no secret. */
static int
secret_eq(const char *want, const char *got, size_t gotlen)
{
	return want[0] != '\0' && gotlen == strlen(want) &&
	    CRYPTO_memcmp(want, got, gotlen) == 0;
}

int
console_auth_redeem(struct console_auth *a, const char *presented)
{
	char secret[sizeof(a->secret)];

	if (presented == NULL || a->token_used ||
	    !secret_eq(a->token, presented, strlen(presented)))
		return 0;
	if (random_hex(secret, sizeof(secret)) != 0)
		return 0;
	a->token_used = 1;
	OPENSSL_cleanse(a->token, sizeof(a->token));
	memcpy(a->secret, secret, sizeof(secret));
	return 1;
}

int
console_auth_cookie(const struct console_auth *a, const char *h)
{
	size_t namelen = strlen(a->cookie), n;
	const char *p = h, *end, *v;
	int ok = 0;

	if (h == NULL || a->secret[0] == '\0')
		return 0;
	/* every cookie of our name: one set by another server on this
	 * host (cookies do not keep ports apart) must not hide ours */
	while (*p != '\0') {
		while (*p == ' ' || *p == ';')
			p++;
		end = strchr(p, ';');
		if (end == NULL)
			end = p + strlen(p);
		n = (size_t)(end - p);
		while (n > 0 && p[n - 1] == ' ')
			n--;
		if (n > namelen && p[namelen] == '=' &&
		    strncmp(p, a->cookie, namelen) == 0) {
			v = p + namelen + 1;
			if (secret_eq(a->secret, v, n - namelen - 1))
				ok = 1;
		}
		p = end;
	}
	return ok;
}

/* ":digits" (1 to 5 of them) or nothing. */
static int
port_suffix_ok(const char *p)
{
	size_t n;

	if (*p == '\0')
		return 1;
	if (*p != ':')
		return 0;
	n = strspn(p + 1, "0123456789");
	return n >= 1 && n <= 5 && p[1 + n] == '\0';
}

int
console_host_ok(const char *host)
{
	static const char *const names[] = { "localhost", "127.0.0.1",
	    "[::1]", NULL };
	size_t i, n;

	if (host == NULL)
		return 0;
	for (i = 0; names[i] != NULL; i++) {
		n = strlen(names[i]);
		if (strncasecmp(host, names[i], n) == 0 &&
		    port_suffix_ok(host + n))
			return 1;
	}
	return 0;
}

int
console_origin_ok(const char *origin, const char *host)
{
	if (origin == NULL || host == NULL || !console_host_ok(host) ||
	    strncmp(origin, "http://", 7) != 0)
		return 0;
	return strcasecmp(origin + 7, host) == 0;
}

/* ------------------------------------------------------------------ */
/* Routes: what a page may ask of the two APIs. */

static const struct console_route routes[] = {
	{ "GET", CUP_SLUICED, "/v1/health", 0, 0 },
	{ "GET", CUP_SLUICED, "/v1/ceiling", 0, 0 },
	{ "PUT", CUP_SLUICED, "/v1/ceiling", 1, 0 },
	{ "GET", CUP_SLUICED, "/v1/sessions", 0, 0 },
	{ "GET", CUP_SLUICED, "/v1/sessions/{id}", 0, 0 },
	{ "PATCH", CUP_SLUICED, "/v1/sessions/{id}", 1, 0 },
	{ "DELETE", CUP_SLUICED, "/v1/sessions/{id}", 0, 0 },
	{ "DELETE", CUP_SLUICED, "/v1/sessions/{id}/grants/{grant}", 0, 0 },
	{ "GET", CUP_SLUICED, "/v1/prompts", 0, 0 },
	{ "POST", CUP_SLUICED, "/v1/prompts/{id}", 1, 0 },
	{ "GET", CUP_SLUICED, "/v1/rules", 0, 0 },
	{ "GET", CUP_SLUICED, "/v1/credentials", 0, 1 },
	{ "GET", CUP_EXEC, "/v1/health", 0, 0 },
	{ "GET", CUP_EXEC, "/v1/sandboxes", 0, 0 },
	{ "GET", CUP_EXEC, "/v1/sandboxes/{id}", 0, 0 },
	{ "PATCH", CUP_EXEC, "/v1/sandboxes/{id}", 1, 0 },
	{ "DELETE", CUP_EXEC, "/v1/sandboxes/{id}", 0, 0 },
	{ "GET", CUP_EXEC, "/v1/sandboxes/{id}/commands", 0, 0 },
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

static const char id_chars[] = "abcdefghijklmnopqrstuvwxyz"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

/* One path segment against one pattern segment. */
static int
seg_match(const char *pat, size_t plen, const char *seg, size_t slen)
{
	size_t i;

	if (plen == 4 && memcmp(pat, "{id}", 4) == 0) {
		/* "." and ".." are ids by their characters, and path steps
		 * to anything that reads them as such */
		if (slen < 1 || slen > 64 || (seg[0] == '.' && (slen == 1 ||
		    (slen == 2 && seg[1] == '.'))))
			return 0;
		for (i = 0; i < slen; i++)
			if (strchr(id_chars, seg[i]) == NULL || seg[i] == '\0')
				return 0;
		return 1;
	}
	if (plen == 7 && memcmp(pat, "{grant}", 7) == 0) {
		/* host:port, percent-encoded as the page sends it; sluiced
		 * decodes and checks it */
		if (slen < 3 || slen > 600 || memchr(seg, ':', slen) == NULL)
			return 0;
		for (i = 0; i < slen; i++)
			if (seg[i] == '\0' || strchr("abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~%:[]-",
			    seg[i]) == NULL)
				return 0;
		return 1;
	}
	return plen == slen && memcmp(pat, seg, slen) == 0;
}

static int
path_match(const char *pat, const char *path)
{
	const char *pe, *se;

	for (;;) {
		if (*pat != '/' || *path != '/')
			return 0;
		pat++;
		path++;
		pe = strchr(pat, '/');
		se = strchr(path, '/');
		if (pe == NULL)
			pe = pat + strlen(pat);
		if (se == NULL)
			se = path + strlen(path);
		if (!seg_match(pat, (size_t)(pe - pat), path,
		    (size_t)(se - path)))
			return 0;
		pat = pe;
		path = se;
		if (*pat == '\0' || *path == '\0')
			return *pat == '\0' && *path == '\0';
	}
}

const struct console_route *
console_route_find(const char *method, const char *path, char *upath,
    size_t upathlen, int *status)
{
	enum console_upstream up;
	const char *rest;
	size_t i;
	int path_seen = 0;

	*status = 404;
	if (strncmp(path, "/api/sluiced/", 13) == 0) {
		up = CUP_SLUICED;
		rest = path + 12;
	} else if (strncmp(path, "/api/exec/", 10) == 0) {
		up = CUP_EXEC;
		rest = path + 9;
	} else
		return NULL;
	for (i = 0; i < NROUTES; i++) {
		if (routes[i].up != up || !path_match(routes[i].pattern, rest))
			continue;
		path_seen = 1;
		if (strcmp(routes[i].method, method) != 0)
			continue;
		if (strlen(rest) >= upathlen)
			return NULL;
		snprintf(upath, upathlen, "%s", rest);
		return &routes[i];
	}
	if (path_seen)
		*status = 405;
	return NULL;
}

/* ------------------------------------------------------------------ */
/* The page files. */

const struct console_asset *
console_asset_find(const char *path, const char **type)
{
	static const struct { const char *ext, *type; } types[] = {
		{ ".html", "text/html; charset=utf-8" },
		{ ".css", "text/css; charset=utf-8" },
		{ ".js", "text/javascript; charset=utf-8" },
		{ ".svg", "image/svg+xml" },
		{ ".png", "image/png" },
	};
	const struct console_asset *a = NULL;
	const char *name, *dot;
	size_t i;

	if (path == NULL || path[0] != '/')
		return NULL;
	name = strcmp(path, "/") == 0 ? "index.html" : path + 1;
	for (i = 0; console_assets[i].name != NULL && a == NULL; i++)
		if (strcmp(console_assets[i].name, name) == 0)
			a = &console_assets[i];
	if (a == NULL)
		return NULL;
	*type = "application/octet-stream";
	dot = strrchr(name, '.');
	for (i = 0; dot != NULL && i < sizeof(types) / sizeof(*types); i++)
		if (strcmp(dot, types[i].ext) == 0)
			*type = types[i].type;
	return a;
}

/* ------------------------------------------------------------------ */
/* The server. */

/* A browser request waiting on an API call or a log reader. */
struct op {
	TAILQ_ENTRY(op) entry;
	struct console *c;
	struct evhttp_request *req;
	struct evhttp_connection *evcon;
	struct cup *up;
	struct clj *job;
	char what[32];           /* "sluiced", "the executor", "log" */
	int names_only;          /* console_route.names_only */
};

/* One browser event stream and its stream from sluiced. */
struct relay {
	TAILQ_ENTRY(relay) entry;
	struct console *c;
	struct evhttp_request *req;
	struct evhttp_connection *evcon;
	struct ctlh_stream *st;
	struct ctlh_sse sse;
	struct event *up_rd;     /* sluiced's stream is readable */
	struct event *kill;      /* deferred teardown */
	size_t pending;          /* bytes queued to the browser */
	time_t last_up;          /* last bytes from sluiced */
	int dead;
	int ended;               /* sluiced ended it: end the reply too */
};

TAILQ_HEAD(op_list, op);
TAILQ_HEAD(relay_list, relay);

struct console {
	struct event_base *base;
	struct evhttp *http;
	char *socket, *exec_socket, *log, *log_default;
	int port;
	struct console_auth auth;
	struct op_list ops;
	struct relay_list relays;
	size_t nrelays, njobs;
	struct event *ping;
};

/* Headers every answer carries: nothing from elsewhere, no framing, no
 * caching, no referrer (the token URL must not travel). */
static void
common_headers(struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Security-Policy", "default-src 'self'; "
	    "img-src 'self' data:; object-src 'none'; base-uri 'none'; "
	    "form-action 'self'; frame-ancestors 'none'");
	evhttp_add_header(h, "X-Frame-Options", "DENY");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_add_header(h, "Referrer-Policy", "no-referrer");
	evhttp_add_header(h, "Cross-Origin-Opener-Policy", "same-origin");
	evhttp_add_header(h, "Cross-Origin-Resource-Policy", "same-origin");
}

static void
send_body(struct evhttp_request *req, int status, const char *type,
    const char *body, size_t len)
{
	struct evbuffer *b = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_remove_header(h, "Content-Type");
	evhttp_add_header(h, "Content-Type", type);
	if (b != NULL)
		evbuffer_add(b, body, len);
	evhttp_send_reply(req, status, NULL, b);
	if (b != NULL)
		evbuffer_free(b);
}

static void send_error(struct evhttp_request *req, int status,
    const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The APIs' error shape: {"error":{"code","message"}}. */
static void
send_error(struct evhttp_request *req, int status, const char *code,
    const char *fmt, ...)
{
	char *text;
	va_list ap;

	va_start(ap, fmt);
	text = clj_error_vtext(code, fmt, ap);
	va_end(ap);
	if (text == NULL) {
		send_body(req, 500, "text/plain; charset=utf-8", "out of memory",
		    13);
		return;
	}
	send_body(req, status, "application/json", text, strlen(text));
	free(text);
}

static void
send_json(struct evhttp_request *req, int status, json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (text == NULL) {
		send_error(req, 500, "internal", "out of memory");
		return;
	}
	send_body(req, status, "application/json", text, strlen(text));
	free(text);
}

/* The page a browser gets without a session: no data, a way on. */
static void
send_signin(struct evhttp_request *req, const char *why)
{
	static const char head[] = "<!doctype html>\n<html lang=\"en\"><head>"
	    "<meta charset=\"utf-8\"><title>sluice console</title></head>"
	    "<body><h1>sluice console</h1><p>";
	static const char tail[] = "</p><p>Open the URL that <code>sluicectl "
	    "console</code> printed; the link works once. If you have just "
	    "opened it, <a href=\"/\">continue to the console</a>.</p>"
	    "</body></html>\n";
	struct evbuffer *b = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Type", "text/html; charset=utf-8");
	if (b != NULL) {
		/* why is one of our own fixed sentences */
		evbuffer_add(b, head, sizeof(head) - 1);
		evbuffer_add(b, why, strlen(why));
		evbuffer_add(b, tail, sizeof(tail) - 1);
	}
	evhttp_send_reply(req, 403, "Forbidden", b);
	if (b != NULL)
		evbuffer_free(b);
}

/* ---- pending operations ---- */

static void
op_free(struct op *o)
{
	TAILQ_REMOVE(&o->c->ops, o, entry);
	if (o->job != NULL)
		o->c->njobs--;
	cup_cancel(o->up);
	clj_cancel(o->job);
	free(o);
}

/* The browser's connection is going before we answered. */
static void
op_on_close(struct evhttp_connection *evcon, void *arg)
{
	struct op *o = arg;

	(void)evcon;
	if (o->req != NULL && evhttp_request_get_connection(o->req) == NULL)
		evhttp_request_free(o->req);
	o->req = NULL;
	op_free(o);
}

static struct op *
op_new(struct console *c, struct evhttp_request *req, const char *what)
{
	struct op *o = calloc(1, sizeof(*o));

	if (o == NULL)
		return NULL;
	o->c = c;
	o->req = req;
	o->evcon = evhttp_request_get_connection(req);
	snprintf(o->what, sizeof(o->what), "%s", what);
	TAILQ_INSERT_TAIL(&c->ops, o, entry);
	if (o->evcon != NULL)
		evhttp_connection_set_closecb(o->evcon, op_on_close, o);
	return o;
}

/* Detach from the browser's connection; the caller answers o->req. */
static struct evhttp_request *
op_finish(struct op *o)
{
	struct evhttp_request *req = o->req;

	if (o->evcon != NULL)
		evhttp_connection_set_closecb(o->evcon, NULL, NULL);
	o->up = NULL;            /* freed by its own code after the callback */
	o->job = NULL;
	if (req == NULL)
		return NULL;
	return req;
}

/* An API's answer: passed on when it is JSON (or empty). */
/* A credential list as the console shows it: what names it and where
 * it goes, never its placeholder (which a page has no use for and a
 * sandbox's request could carry).  A new reference, or NULL. */
static json_t *
credentials_names(const json_t *doc)
{
	static const char *const keep[] = { "name", "tenant", "hosts",
	    "methods", "paths", "updated", NULL };
	const json_t *a = json_object_get(doc, "credentials"), *x;
	json_t *out = json_array(), *o;
	size_t i, k;

	if (!json_is_array(a) || out == NULL) {
		json_decref(out);
		return NULL;
	}
	json_array_foreach(a, i, x) {
		if ((o = json_object()) == NULL)
			break;
		for (k = 0; keep[k] != NULL; k++)
			if (json_object_get(x, keep[k]) != NULL)
				json_object_set(o, keep[k],
				    json_object_get(x, keep[k]));
		json_object_set_new(o, "header", json_deep_copy(json_object_get(
		    json_object_get(x, "inject"), "header")));
		json_array_append_new(out, o);
	}
	return json_pack("{s:o}", "credentials", out);
}

static void
on_upstream(void *arg, const struct ctlh_resp *r, const char *err)
{
	struct op *o = arg;
	struct evhttp_request *req = op_finish(o);
	json_t *doc, *cut;

	if (req != NULL) {
		if (r == NULL) {
			send_error(req, 502, "unreachable", "%s", err);
		} else if (r->body_len == 0) {
			send_body(req, r->status, "application/json", "{}", 2);
		} else if ((doc = jsonstrict_load(r->body, r->body_len,
		    NULL)) == NULL) {
			send_error(req, 502, "bad_gateway", "%s answered %d "
			    "without a JSON body", o->what, r->status);
		} else if (o->names_only && r->status == 200) {
			cut = credentials_names(doc);
			json_decref(doc);
			if (cut == NULL)
				send_error(req, 502, "bad_gateway", "%s answered "
				    "no credential list", o->what);
			else
				send_json(req, 200, cut);
		} else {
			json_decref(doc);
			send_body(req, r->status, "application/json", r->body,
			    r->body_len);
		}
	}
	o->req = NULL;
	op_free(o);
}

static void
on_job(void *arg, int status, const char *json, size_t len)
{
	struct op *o = arg;
	struct evhttp_request *req = op_finish(o);

	/* the job frees itself after this callback */
	o->c->njobs--;
	if (req != NULL)
		send_body(req, status, "application/json", json, len);
	o->req = NULL;
	TAILQ_REMOVE(&o->c->ops, o, entry);
	free(o);
}

/* ---- the console's own calls ---- */

static void
api_console(struct console *c, struct evhttp_request *req)
{
	struct passwd *pw = getpwuid(getuid());
	char uid[32];

	snprintf(uid, sizeof(uid), "uid:%u", (unsigned)getuid());
	send_json(req, 200, json_pack("{s:s,s:i,s:s,s:s,s:s?,s:s?,s:i}",
	    "version", PACKAGE_VERSION, "uid", (int)getuid(),
	    "user", pw && pw->pw_name ? pw->pw_name : uid,
	    "socket", c->socket, "exec_socket", c->exec_socket,
	    "log", c->log, "port", c->port));
}

static void
api_reasons(struct evhttp_request *req)
{
	json_t *a = json_array();
	int r;

	for (r = 1; a != NULL && r < POL_R__COUNT; r++)
		json_array_append_new(a, json_pack("{s:s,s:i,s:s}", "name",
		    pol_reason_name((enum pol_reason)r), "status",
		    pol_reason_status((enum pol_reason)r), "hint",
		    pol_reason_hint((enum pol_reason)r)));
	send_json(req, 200, json_pack("{s:o}", "reasons", a));
}

/* A filter value from the query: short, printable, or 400. */
static int
query_value(struct evhttp_request *req, struct evkeyvalq *q,
    const char *key, const char **out)
{
	const char *v = evhttp_find_header(q, key);
	const unsigned char *p;

	*out = NULL;
	if (v == NULL || *v == '\0')
		return 0;
	if (strlen(v) > 256) {
		send_error(req, 400, "bad_request", "%s: too long", key);
		return -1;
	}
	for (p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 || *p == 0x7f) {
			send_error(req, 400, "bad_request", "%s: a control "
			    "character", key);
			return -1;
		}
	*out = v;
	return 0;
}

static void
api_log(struct console *c, struct evhttp_request *req, const char *query,
    int verify)
{
	static const char *const known[] = { "session", "tenant", "host",
	    "decision", "reason", "event", "since", "until", "limit", NULL };
	struct clj_where w = { c->log, c->socket, c->log_default };
	struct ctlog_filter f;
	struct evkeyvalq q;
	struct evkeyval *kv;
	const char *lim = NULL;
	char err[256], *end;
	long limit = 200;
	struct op *o;
	size_t i;

	memset(&f, 0, sizeof(f));
	TAILQ_INIT(&q);
	if (query != NULL && evhttp_parse_query_str(query, &q) != 0) {
		send_error(req, 400, "bad_request", "bad query string");
		goto out;
	}
	if (verify && query != NULL) {
		send_error(req, 400, "bad_request", "verify takes no "
		    "parameters");
		goto out;
	}
	TAILQ_FOREACH(kv, &q, next) {
		for (i = 0; known[i] != NULL; i++)
			if (strcmp(kv->key, known[i]) == 0)
				break;
		if (known[i] == NULL) {
			send_error(req, 400, "bad_request", "unknown parameter "
			    "(session, tenant, host, decision, reason, event, "
			    "since, until, limit)");
			goto out;
		}
	}
	if (query_value(req, &q, "session", &f.session) ||
	    query_value(req, &q, "tenant", &f.tenant) ||
	    query_value(req, &q, "host", &f.host) ||
	    query_value(req, &q, "decision", &f.decision) ||
	    query_value(req, &q, "reason", &f.reason) ||
	    query_value(req, &q, "event", &f.event) ||
	    query_value(req, &q, "since", &f.since) ||
	    query_value(req, &q, "until", &f.until) ||
	    query_value(req, &q, "limit", &lim))
		goto out;
	if ((f.since && !ctlog_ts_valid(f.since)) ||
	    (f.until && !ctlog_ts_valid(f.until))) {
		send_error(req, 400, "bad_request", "since and until want an "
		    "RFC 3339 UTC prefix such as 2024-05-01 or "
		    "2024-05-01T10:00:00Z");
		goto out;
	}
	if (lim != NULL) {
		errno = 0;
		limit = strtol(lim, &end, 10);
		if (*end != '\0' || errno != 0 || limit < 1 ||
		    limit > CLJ_LIMIT_MAX) {
			send_error(req, 400, "bad_request", "limit: 1 to %d",
			    CLJ_LIMIT_MAX);
			goto out;
		}
	}
	if (c->njobs >= CON_JOBS_MAX) {
		send_error(req, 503, "busy", "%d log reads are running",
		    CON_JOBS_MAX);
		goto out;
	}
	if ((o = op_new(c, req, "log")) == NULL) {
		send_error(req, 500, "internal", "out of memory");
		goto out;
	}
	/* the child gets its copy of f (and q's strings) with fork */
	o->job = verify ? clj_verify(c->base, &w, on_job, o, err,
	    sizeof(err)) : clj_query(c->base, &w, &f, (size_t)limit, on_job,
	    o, err, sizeof(err));
	if (o->job == NULL) {
		op_finish(o);
		o->req = NULL;
		op_free(o);
		send_error(req, 500, "internal", "%s", err);
		goto out;
	}
	c->njobs++;
out:
	evhttp_clear_headers(&q);
}

/* ---- routed calls ---- */

static int
is_json_type(const char *t)
{
	size_t n = strlen("application/json");

	return t != NULL && strncasecmp(t, "application/json", n) == 0 &&
	    (t[n] == '\0' || t[n] == ';' || t[n] == ' ');
}

static void
api_routed(struct console *c, struct evhttp_request *req, const char *path,
    const char *method, const char *query)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	const struct console_route *rt;
	const char *sock, *body = NULL;
	char upath[1024], err[256];
	json_t *doc;
	struct op *o;
	int status;

	rt = console_route_find(method, path, upath, sizeof(upath), &status);
	if (rt == NULL) {
		if (status == 405)
			send_error(req, 405, "method_not_allowed", "%s is not "
			    "allowed on %s", method, path);
		else
			send_error(req, 404, "not_found", "no such call");
		return;
	}
	if (query != NULL) {
		send_error(req, 400, "bad_request", "these calls take no "
		    "query parameters");
		return;
	}
	sock = rt->up == CUP_EXEC ? c->exec_socket : c->socket;
	if (sock == NULL) {
		send_error(req, 503, "no_executor", "no executor socket "
		    "configured");
		return;
	}
	if (rt->body) {
		if (!is_json_type(evhttp_find_header(
		    evhttp_request_get_input_headers(req), "Content-Type"))) {
			send_error(req, 415, "unsupported_media_type", "send "
			    "Content-Type: application/json");
			return;
		}
		body = (const char *)evbuffer_pullup(in, -1);
		doc = body ? jsonstrict_load(body, len, NULL) : NULL;
		if (!json_is_object(doc)) {
			json_decref(doc);
			send_error(req, 400, "bad_request", "the body must be "
			    "one JSON object");
			return;
		}
		json_decref(doc);
	} else if (len != 0) {
		send_error(req, 400, "bad_request", "this call takes no body");
		return;
	}
	if ((o = op_new(c, req, rt->up == CUP_EXEC ? "the executor" :
	    "sluiced")) == NULL) {
		send_error(req, 500, "internal", "out of memory");
		return;
	}
	o->names_only = rt->names_only;
	o->up = cup_request(c->base, sock, method, upath, body, body ? len : 0,
	    CON_TIMEOUT_S, on_upstream, o, err, sizeof(err));
	if (o->up == NULL) {
		op_finish(o);
		o->req = NULL;
		op_free(o);
		send_error(req, 502, "unreachable", "%s", err);
	}
}

/* ---- the event stream relay ---- */

static void
relay_free(struct relay *r)
{
	TAILQ_REMOVE(&r->c->relays, r, entry);
	r->c->nrelays--;
	if (r->up_rd != NULL)
		event_free(r->up_rd);
	if (r->kill != NULL)
		event_free(r->kill);
	ctlh_stream_close(r->st);
	ctlh_sse_free(&r->sse);
	free(r);
}

/* Stop both sides at once; the browser's connection goes from the loop. */
static void
relay_drop(struct relay *r, int ended)
{
	if (r->dead)
		return;
	r->dead = 1;
	r->ended = ended;
	if (r->up_rd != NULL) {
		event_free(r->up_rd);
		r->up_rd = NULL;
	}
	ctlh_stream_close(r->st);
	r->st = NULL;
	event_active(r->kill, EV_TIMEOUT, 0);
}

static void
relay_on_kill(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	struct evhttp_connection *evcon = r->evcon;
	struct evhttp_request *req = r->req;
	int ended = r->ended;

	(void)fd;
	(void)what;
	evhttp_connection_set_closecb(evcon, NULL, NULL);
	relay_free(r);
	/* sluiced ended its stream: end ours, and the browser reconnects
	 * (with Last-Event-ID); otherwise the browser is gone or stuck */
	if (ended)
		evhttp_send_reply_end(req);
	else
		evhttp_connection_free(evcon);
}

static void
relay_on_close(struct evhttp_connection *evcon, void *arg)
{
	struct relay *r = arg;

	(void)evcon;
	if (evhttp_request_get_connection(r->req) == NULL)
		evhttp_request_free(r->req);
	relay_free(r);
}

static void
relay_on_flushed(struct evhttp_connection *evcon, void *arg)
{
	struct relay *r = arg;
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);

	r->pending = bev ? evbuffer_get_length(bufferevent_get_output(bev)) :
	    0;
}

static void
relay_send(struct relay *r, const char *text, size_t len)
{
	struct evbuffer *b;

	if (r->dead)
		return;
	/* a browser that does not read loses its stream; it reconnects
	 * with Last-Event-ID and sluiced replays from its ring */
	if (r->pending + len > RELAY_PENDING_MAX) {
		relay_drop(r, 0);
		return;
	}
	if ((b = evbuffer_new()) == NULL || evbuffer_add(b, text, len) != 0) {
		if (b != NULL)
			evbuffer_free(b);
		relay_drop(r, 0);
		return;
	}
	r->pending += len;
	evhttp_send_reply_chunk_with_cb(r->req, b, relay_on_flushed, r);
	evbuffer_free(b);
}

static int
event_type_ok(const char *t)
{
	size_t n = strlen(t);

	return n >= 1 && n <= 32 && strspn(t, "abcdefghijklmnopqrstuvwxyz_")
	    == n;
}

/* One event from sluiced, written again for the browser. */
static void
relay_on_event(void *arg, const char *type, const char *data, size_t len,
    const char *id)
{
	struct relay *r = arg;
	json_t *doc;
	char *json = NULL, *frame = NULL;
	int n;

	if (!event_type_ok(type))
		return;
	doc = jsonstrict_load(data, len, NULL);
	if (json_is_object(doc))
		json = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (json == NULL)
		return;
	/* compact JSON holds no raw newline: one data line */
	if (id[0] != '\0' && strspn(id, "0123456789") == strlen(id) &&
	    strlen(id) <= 20)
		n = asprintf(&frame, "id: %s\nevent: %s\ndata: %s\n\n", id,
		    type, json);
	else
		n = asprintf(&frame, "event: %s\ndata: %s\n\n", type, json);
	free(json);
	if (n < 0)
		return;
	relay_send(r, frame, (size_t)n);
	free(frame);
}

static void
relay_on_up(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	char buf[16384], err[256];
	long n;
	int i;

	(void)fd;
	(void)what;
	for (i = 0; i < 64 && !r->dead; i++) {
		n = ctlh_stream_read(r->st, buf, sizeof(buf), err, sizeof(err));
		if (n == CTLH_AGAIN)
			return;
		if (n <= 0) {
			relay_drop(r, 1);
			return;
		}
		r->last_up = time(NULL);
		if (ctlh_sse_feed(&r->sse, buf, (size_t)n, relay_on_event, r,
		    err, sizeof(err)) != 0) {
			relay_drop(r, 1);
			return;
		}
	}
}

static void
on_ping(evutil_socket_t fd, short what, void *arg)
{
	static const char ping[] = ": ping\n\n";
	struct console *c = arg;
	struct relay *r, *tmp;
	time_t now = time(NULL);

	(void)fd;
	(void)what;
	TAILQ_FOREACH_SAFE(r, &c->relays, entry, tmp) {
		if (r->dead)
			continue;
		if (now - r->last_up > RELAY_IDLE_S)
			relay_drop(r, 1);
		else if (r->pending == 0)
			relay_send(r, ping, sizeof(ping) - 1);
	}
}

static void
api_events(struct console *c, struct evhttp_request *req)
{
	struct ctlh_target t = { .socket = c->socket,
	    .timeout_ms = RELAY_OPEN_MS };
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	const char *last = evhttp_find_header(
	    evhttp_request_get_input_headers(req), "Last-Event-ID");
	const struct timeval wtv = { CON_TIMEOUT_S, 0 };
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct bufferevent *bev;
	const char *headers[2] = { NULL, NULL };
	char hdr[64], err[512];
	struct ctlh_stream *st = NULL;
	struct ctlh_resp resp;
	struct relay *r;
	enum ctlh_rc rc;

	if (c->nrelays >= CON_RELAYS_MAX || evcon == NULL) {
		send_error(req, 503, "busy", "%d event streams are open",
		    CON_RELAYS_MAX);
		return;
	}
	/* a replay point the browser kept: sluiced's own ids, digits */
	if (last != NULL && *last != '\0' && strlen(last) <= 20 &&
	    strspn(last, "0123456789") == strlen(last)) {
		snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", last);
		headers[0] = hdr;
	}
	/* blocking, but only for the head from a local socket */
	rc = ctlh_stream_open(&t, "/v1/events", headers, &st, &resp, err,
	    sizeof(err));
	if (rc != CTLH_OK) {
		send_error(req, 502, "unreachable", "%s", err);
		return;
	}
	if (st == NULL) {
		/* sluiced refused (the auditor role, say): its answer */
		json_t *doc = jsonstrict_load(resp.body, resp.body_len, NULL);
		if (doc != NULL)
			send_body(req, resp.status, "application/json",
			    resp.body, resp.body_len);
		else
			send_error(req, 502, "bad_gateway", "sluiced answered "
			    "%d", resp.status);
		json_decref(doc);
		ctlh_resp_free(&resp);
		return;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		ctlh_stream_close(st);
		send_error(req, 500, "internal", "out of memory");
		return;
	}
	r->c = c;
	r->req = req;
	r->evcon = evcon;
	r->st = st;
	r->last_up = time(NULL);
	ctlh_sse_init(&r->sse);
	TAILQ_INSERT_TAIL(&c->relays, r, entry);
	c->nrelays++;
	bev = evhttp_connection_get_bufferevent(evcon);
	r->kill = event_new(c->base, -1, 0, relay_on_kill, r);
	r->up_rd = event_new(c->base, ctlh_stream_fd(st), EV_READ | EV_PERSIST,
	    relay_on_up, r);
	if (r->kill == NULL || r->up_rd == NULL || event_add(r->up_rd, NULL)) {
		relay_free(r);
		send_error(req, 500, "internal", "out of memory");
		return;
	}
	evhttp_remove_header(h, "Content-Type");
	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_send_reply_start(req, 200, "OK");
	evhttp_connection_set_closecb(evcon, relay_on_close, r);
	/* the browser sends nothing more: a write timeout only */
	if (bev != NULL)
		bufferevent_set_timeouts(bev, NULL, &wtv);
	/* reconnect soon after an end; the first bytes open the stream */
	relay_send(r, "retry: 2000\n\n", 13);
	/* bytes that came with the head are in the stream, not the socket */
	relay_on_up(-1, EV_READ, r);
}

/* ---- dispatch ---- */

static const char *
method_name(enum evhttp_cmd_type m)
{
	switch (m) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_PATCH: return "PATCH";
	case EVHTTP_REQ_DELETE: return "DELETE";
	default: return NULL;
	}
}

/* ?token=... on "/": the first use sets the cookie. */
static int
try_token(struct console *c, struct evhttp_request *req, const char *query)
{
	struct evkeyvalq q;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	const char *tok;
	char cookie[256];
	int ok;

	TAILQ_INIT(&q);
	if (query == NULL || evhttp_parse_query_str(query, &q) != 0 ||
	    (tok = evhttp_find_header(&q, "token")) == NULL) {
		evhttp_clear_headers(&q);
		return 0;
	}
	ok = console_auth_redeem(&c->auth, tok);
	evhttp_clear_headers(&q);
	if (!ok) {
		/* a used link in a browser that already has the session
		 * just loses the token from its address bar */
		if (console_auth_cookie(&c->auth, evhttp_find_header(
		    evhttp_request_get_input_headers(req), "Cookie"))) {
			evhttp_add_header(h, "Location", "/");
			evhttp_send_reply(req, 303, "See Other", NULL);
		} else
			send_signin(req, "This link is not valid (wrong, or "
			    "used already).");
		return 1;
	}
	snprintf(cookie, sizeof(cookie), "%s=%s; Path=/; HttpOnly; "
	    "SameSite=Strict", c->auth.cookie, c->auth.secret);
	evhttp_add_header(h, "Set-Cookie", cookie);
	evhttp_add_header(h, "Location", "/");
	evhttp_send_reply(req, 303, "See Other", NULL);
	return 1;
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	struct console *c = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *host = evhttp_find_header(in, "Host");
	const char *origin = evhttp_find_header(in, "Origin");
	const char *site = evhttp_find_header(in, "Sec-Fetch-Site");
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
	const char *method = method_name(evhttp_request_get_command(req));
	const struct console_asset *a;
	const char *type;
	int api, reads;

	common_headers(req);
	if (method == NULL || path == NULL || path[0] != '/') {
		send_error(req, 400, "bad_request", "bad request");
		return;
	}
	reads = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	if (!console_host_ok(host)) {
		send_error(req, 403, "forbidden", "the Host must be localhost, "
		    "127.0.0.1 or [::1]");
		return;
	}
	/* a page elsewhere (another port is another origin) may send
	 * requests here: refuse what it sends, and any change without
	 * an Origin to show where it comes from */
	if (origin != NULL && !console_origin_ok(origin, host)) {
		send_error(req, 403, "forbidden", "foreign Origin");
		return;
	}
	if (!reads && origin == NULL) {
		send_error(req, 403, "forbidden", "a change needs an Origin "
		    "header");
		return;
	}
	api = strncmp(path, "/api/", 5) == 0;
	if (api && site != NULL && strcmp(site, "same-origin") != 0) {
		send_error(req, 403, "forbidden", "calls come from the "
		    "console's own pages (Sec-Fetch-Site)");
		return;
	}
	/* GET only: nothing but a person's browser uses up the token */
	if (strcmp(method, "GET") == 0 && strcmp(path, "/") == 0 &&
	    try_token(c, req, query))
		return;
	if (!console_auth_cookie(&c->auth, evhttp_find_header(in, "Cookie"))) {
		if (api)
			send_error(req, 403, "forbidden", "no console session: "
			    "open the URL sluicectl console printed");
		else
			send_signin(req, "You are not signed in.");
		return;
	}
	if (!api) {
		if (!reads || (a = console_asset_find(path, &type)) == NULL) {
			send_error(req, reads ? 404 : 405, reads ? "not_found" :
			    "method_not_allowed", "no such page");
			return;
		}
		send_body(req, 200, type, (const char *)a->data, a->len);
		return;
	}
	if (strcmp(path, "/api/console") == 0 && reads)
		api_console(c, req);
	else if (strcmp(path, "/api/reasons") == 0 && reads)
		api_reasons(req);
	else if (strcmp(path, "/api/log") == 0 && reads)
		api_log(c, req, query, 0);
	else if (strcmp(path, "/api/log/verify") == 0 && reads)
		api_log(c, req, query, 1);
	else if (strcmp(path, "/api/events") == 0 && reads && query == NULL)
		api_events(c, req);
	else if (strcmp(path, "/api/console") == 0 ||
	    strcmp(path, "/api/reasons") == 0 ||
	    strcmp(path, "/api/log") == 0 ||
	    strcmp(path, "/api/log/verify") == 0 ||
	    strcmp(path, "/api/events") == 0)
		send_error(req, reads ? 400 : 405, reads ? "bad_request" :
		    "method_not_allowed", "not like this");
	else
		api_routed(c, req, path, method, query);
}

/* ------------------------------------------------------------------ */
/* Life cycle. */

static char *
dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

struct console *
console_new(struct event_base *base, const struct console_cfg *cfg,
    char *err, size_t errlen)
{
	const struct timeval tv = { RELAY_PING_S, 0 };
	struct evhttp_bound_socket *bs;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct console *c;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		errf(err, errlen, "out of memory");
		return NULL;
	}
	c->base = base;
	TAILQ_INIT(&c->ops);
	TAILQ_INIT(&c->relays);
	c->socket = strdup(cfg->socket);
	c->exec_socket = dup_or_null(cfg->exec_socket);
	c->log = dup_or_null(cfg->log);
	c->log_default = dup_or_null(cfg->log_default);
	c->http = evhttp_new(base);
	c->ping = event_new(base, -1, EV_PERSIST, on_ping, c);
	if (c->socket == NULL || c->http == NULL || c->ping == NULL ||
	    (cfg->exec_socket && c->exec_socket == NULL) ||
	    (cfg->log && c->log == NULL) ||
	    (cfg->log_default && c->log_default == NULL)) {
		errf(err, errlen, "out of memory");
		goto fail;
	}
	evhttp_set_max_headers_size(c->http, CON_HEADERS_MAX);
	evhttp_set_max_body_size(c->http, CON_BODY_MAX);
	evhttp_set_timeout(c->http, CON_TIMEOUT_S);
	evhttp_set_allowed_methods(c->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
	    EVHTTP_REQ_POST | EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH |
	    EVHTTP_REQ_DELETE);
	/* no Content-Type by default: each answer names its own */
	evhttp_set_default_content_type(c->http, NULL);
	evhttp_set_gencb(c->http, on_request, c);
	bs = evhttp_bind_socket_with_handle(c->http, "127.0.0.1",
	    (ev_uint16_t)cfg->port);
	if (bs == NULL) {
		errf(err, errlen, "cannot listen on 127.0.0.1:%d: %s",
		    cfg->port, strerror(errno));
		goto fail;
	}
	if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss,
	    &sl) != 0 || ss.ss_family != AF_INET) {
		errf(err, errlen, "getsockname: %s", strerror(errno));
		goto fail;
	}
	c->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	/* ::1 on the same port where the host has IPv6; a host without it
	 * is served on 127.0.0.1 alone */
	if (evhttp_bind_socket_with_handle(c->http, "::1",
	    (ev_uint16_t)c->port) == NULL && errno != EADDRNOTAVAIL &&
	    errno != EAFNOSUPPORT)
		fprintf(stderr, "sluicectl: console: not on [::1]:%d: %s\n",
		    c->port, strerror(errno));
	if (console_auth_init(&c->auth, c->port) != 0) {
		errf(err, errlen, "no random bytes for the token");
		goto fail;
	}
	if (event_add(c->ping, &tv) != 0) {
		errf(err, errlen, "cannot start the timer");
		goto fail;
	}
	return c;
fail:
	console_free(c);
	return NULL;
}

int
console_port(const struct console *c)
{
	return c->port;
}

const char *
console_token(const struct console *c)
{
	return c->auth.token;
}

void
console_free(struct console *c)
{
	struct relay *r;
	struct op *o;

	if (c == NULL)
		return;
	while ((r = TAILQ_FIRST(&c->relays)) != NULL) {
		struct evhttp_connection *evcon = r->evcon;
		struct evhttp_request *req = r->req;
		int dead = r->dead, ended = r->ended;

		evhttp_connection_set_closecb(evcon, NULL, NULL);
		relay_free(r);
		if (dead && !ended)
			evhttp_connection_free(evcon);
		else
			evhttp_send_reply_end(req);
	}
	while ((o = TAILQ_FIRST(&c->ops)) != NULL) {
		/* evhttp_free below frees the requests with their
		 * connections */
		if (o->evcon != NULL)
			evhttp_connection_set_closecb(o->evcon, NULL, NULL);
		o->req = NULL;
		op_free(o);
	}
	if (c->http != NULL)
		evhttp_free(c->http);
	if (c->ping != NULL)
		event_free(c->ping);
	OPENSSL_cleanse(&c->auth, sizeof(c->auth));
	free(c->socket);
	free(c->exec_socket);
	free(c->log);
	free(c->log_default);
	free(c);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	fprintf(stderr, "sluicectl: console: stopping (signal %d)\n",
	    (int)sig);
	event_base_loopexit(arg, NULL);
}

/* Say at start whether sluiced answers and with which role: the page
 * works (and keeps trying) either way. */
static void
say_role(const char *sock)
{
	struct ctlh_target t = { .socket = sock, .timeout_ms = 5000 };
	struct ctlh_resp r;
	char err[512];
	json_t *doc, *caller;

	if (ctlh_request(&t, "GET", "/v1/health", NULL, &r, err,
	    sizeof(err)) != CTLH_OK) {
		fprintf(stderr, "sluicectl: console: sluiced does not answer "
		    "(%s); the pages will keep trying\n", err);
		return;
	}
	doc = jsonstrict_load(r.body, r.body_len, NULL);
	caller = json_object_get(doc, "caller");
	if (r.status == 200 && json_is_string(json_object_get(caller, "role")))
		printf("sluiced on %s: you are %s, role %s\n", sock,
		    json_string_value(json_object_get(caller, "who")),
		    json_string_value(json_object_get(caller, "role")));
	else if (r.status != 200)
		fprintf(stderr, "sluicectl: console: sluiced answers %d: this "
		    "user has no role in its control API\n", r.status);
	json_decref(doc);
	ctlh_resp_free(&r);
}

int
console_run(const struct console_cfg *cfg)
{
	struct event_base *base = event_base_new();
	struct event *si = NULL, *st = NULL;
	struct console *c = NULL;
	char err[512];
	int rc = 3;

	if (base == NULL) {
		fprintf(stderr, "sluicectl: console: no event loop\n");
		return 4;
	}
	si = evsignal_new(base, SIGINT, on_signal, base);
	st = evsignal_new(base, SIGTERM, on_signal, base);
	if (si == NULL || st == NULL || event_add(si, NULL) != 0 ||
	    event_add(st, NULL) != 0) {
		fprintf(stderr, "sluicectl: console: cannot watch signals\n");
		rc = 4;
		goto done;
	}
	if ((c = console_new(base, cfg, err, sizeof(err))) == NULL) {
		fprintf(stderr, "sluicectl: console: %s\n", err);
		rc = 2;
		goto done;
	}
	say_role(cfg->socket);
	printf("sluicectl console: serving on 127.0.0.1 and [::1] port %d\n"
	    "Open this URL in a browser on this host (it works once):\n\n"
	    "    http://127.0.0.1:%d/?token=%s\n\n"
	    "From another machine, forward a port over SSH first:\n"
	    "    ssh -L 8080:127.0.0.1:%d THIS-HOST\n"
	    "and open http://127.0.0.1:8080/?token=%s there.\n",
	    c->port, c->port, c->auth.token, c->port, c->auth.token);
	fflush(stdout);
	event_base_dispatch(base);
	rc = 0;
done:
	console_free(c);
	if (si != NULL)
		event_free(si);
	if (st != NULL)
		event_free(st);
	event_base_free(base);
	return rc;
}
