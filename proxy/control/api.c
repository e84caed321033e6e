/*
 * api.c: the control API over evhttp.
 *
 * One request goes: who is calling (SO_PEERCRED on the Unix socket, a
 * bearer token on TLS), which route (404, 405), may this role call it
 * (403, with an audit record), is the input well formed (400, 415), and
 * then one ctl_* call whose result is mapped to a status.  Every error
 * has the same JSON shape.  The configuration is copied in, because a
 * reload frees the one it came from.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>

#include "proxy/daemon.h"
#include "proxy/lib/httpauth.h"
#include "proxy/lib/apireply.h"
#include "proxy/lib/apitls.h"
#include "proxy/lib/tcpadmit.h"
#include "proxy/lib/apiroute.h"
#include "proxy/lib/roles.h"
#include "proxy/lib/usock.h"
#include "proxy/lib/util.h"
#include "proxy/control/ctl.h"
#include "proxy/control/api.h"
#include "proxy/control/events.h"
#include "proxy/lib/jsonstrict.h"

#define API_HEADERS_MAX 16384
#define API_TIMEOUT_S 30
#define API_USER_MAX 256

#define R_AUDITOR (1u << CFG_ROLE_AUDITOR)
#define R_APP (1u << CFG_ROLE_APP)
#define R_ADMIN (1u << CFG_ROLE_ADMIN)
#define R_ALL (R_AUDITOR | R_APP | R_ADMIN)

struct api_token {
	char name[65];
	enum cfg_role role;
	char tenant[65];         /* "": bound to no tenant */
	unsigned char digest[SHA256_DIGEST_LENGTH];
};

/* Who may call. */
struct api_acl {
	struct cfg_idlist uids[CFG_ROLE_ADMIN + 1];
	struct cfg_idlist gids[CFG_ROLE_ADMIN + 1];
	struct api_token *tokens;
	size_t ntokens;
};

struct api_unix {
	struct evhttp *http;
	char *path;              /* canonical (usock.h) */
	unsigned mode;
	char *group;
	struct usock_id sock;    /* the file we made, so that stop never
	                            unlinks another's */
};

struct api_tls {
	struct evhttp *http;
	struct evhttp_bound_socket *bound;   /* its listener */
	char *addr;
	SSL_CTX *ctx;            /* read at each accept: reload swaps it */
};

/*
 * One connection of the TCP listener (see "Connections of the TCP
 * listener" below): made in tls_bev, freed only when its SSL is (by
 * libevent, once the bufferevent is destroyed and its descriptor
 * closed), so while it exists fd is this connection's.
 */
struct api_conn {
	struct tcpadmit_conn ta; /* first: the caps' view of it */
	SSL *ssl;
	struct bufferevent *bev; /* evhttp's: never freed here */
	int serving;             /* a whole request is being answered */
};

/* A reply waiting for the state's save (send_text). */
struct held {
	struct evhttp_request *req;
	int status;
	const char *type;        /* a literal */
	char *text;
	size_t len;
	TAILQ_ENTRY(held) entry;
};

static struct {
	struct event_base *base;
	struct api_acl acl;
	size_t max_body;
	struct api_unix un;
	struct api_tls tls;
	/* the TCP listener's connections and caps */
	struct tcpadmit ta;
	int head_timeout_ms;
	/* group commit (state.c): the replies of requests that changed the
	 * state wait for its save */
	int serving;             /* a route's handler is running */
	unsigned long long gen0; /* ctl_state_gen() when it began */
	TAILQ_HEAD(, held) held;
} api;

/* SSL ex_data index of an SSL's api_conn. */
static int conn_idx = -1;

/* Listener kinds, passed to the request callback. */
static int kind_unix = 0, kind_tls = 1;

/* One request being answered. */
struct call {
	struct evhttp_request *req;
	int tls;
	enum evhttp_cmd_type method;
	size_t max_body;
	enum cfg_role role;
	struct ctl_actor actor;
	char tenant[65];         /* a bound token's; actor.tenant points here */
	const struct route *route;
	char id[65];             /* {id} */
	char *grant;             /* {grant}, percent-decoded */
	json_t *body;
};

typedef void (*handler_fn)(struct call *);

struct route {
	const char *pattern;     /* segments; {id} and {grant} capture */
	enum evhttp_cmd_type method;
	unsigned roles;
	const char *action;      /* names the call in audit records */
	handler_fn fn;
	int body;                /* 1: takes a JSON object */
};

/* ------------------------------------------------------------------ */
/* Answers. */

/*
 * The reply of a request whose handler changed the state waits for the
 * save that holds the change (state.c, group commit): sent once it is
 * durable, or a 500 saying the change is not saved.  evhttp keeps a
 * request whose client went away meanwhile until it is answered (then
 * it frees it), so a held one is always ours to answer.
 */
static void
unsaved(struct evhttp_request *req, const char *why)
{
	apireply_error_now(req, 500, "internal", "the change is in force but "
	    "the state file could not be saved (it is tried again at the "
	    "next change); a restart would lose it: %s", why);
}

static void
api_saved(int ok, const char *why)
{
	struct held *h;

	while ((h = TAILQ_FIRST(&api.held)) != NULL) {
		TAILQ_REMOVE(&api.held, h, entry);
		if (ok || h->status >= 400)
			apireply_text_now(h->req, h->status, h->type,
			    h->text, h->len);
		else
			unsaved(h->req, why);
		free(h->text);
		free(h);
	}
}

/* Every reply (apireply's sink): held (api_saved) when this request
 * changed the state. */
static void
send_text(struct evhttp_request *req, int status, const char *type,
    const char *text, size_t len)
{
	struct ctl_err e = { CTL_OK, "" };
	struct held *h;

	if (!api.serving || ctl_state_gen() == api.gen0) {
		apireply_text_now(req, status, type, text, len);
		return;
	}
	if ((h = calloc(1, sizeof(*h))) == NULL ||
	    (h->text = malloc(len + 1)) == NULL) {
		free(h);
		/* no memory to wait with: the save is made at once, and a
		 * change it could not save is not acknowledged */
		if (ctl_state_flush(&e) != 0 && status < 400)
			unsaved(req, e.msg);
		else
			apireply_text_now(req, status, type, text, len);
		return;
	}
	memcpy(h->text, text, len);
	h->text[len] = '\0';
	h->len = len;
	h->req = req;
	h->status = status;
	h->type = type;
	TAILQ_INSERT_TAIL(&api.held, h, entry);
}

static void
send_ctl_error(struct evhttp_request *req, const struct ctl_err *e)
{
	const char *code = NULL;
	int status;

	switch (e->code) {
	case CTL_BAD_REQUEST: status = 400; break;
	case CTL_FORBIDDEN: status = 403; break;
	case CTL_NOT_FOUND: status = 404; break;
	case CTL_CONFLICT: status = 409; break;
	case CTL_UNAVAILABLE: status = 503; break;
	case CTL_LOG_UNAVAILABLE:
		status = 503;
		code = "log_unavailable";
		break;
	case CTL_TOO_MANY_GRANTS:
		status = 409;
		code = "too_many_grants";
		break;
	case CTL_HOST_NOT_INSPECTED:
		status = 400;
		code = "host_not_inspected";
		break;
	case CTL_TOO_MANY_RULES:
		status = 409;
		code = "too_many_rules";
		break;
	default: status = 500; break;
	}
	apireply_error(req, status, code != NULL ? code :
	    apireply_status_code(status), NULL, "%s",
	    e->msg[0] != '\0' ? e->msg : "the operation failed");
}

/* Text from the caller inside a message: printable, bounded. */
static const char *
shown(const char *s, char *buf, size_t len)
{
	size_t i, at = 0;

	for (i = 0; s[i] != '\0' && at + 4 < len && i < 64; i++)
		buf[at++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	if (s[i] != '\0' && at + 4 < len) {
		memcpy(buf + at, "...", 3);
		at += 3;
	}
	buf[at] = '\0';
	return buf;
}

/* ------------------------------------------------------------------ */
/* Input. */

enum ftype { F_STR, F_INT, F_BOOL, F_OBJ, F_ARR };

struct field {
	const char *name;
	enum ftype type;
	int required;
	json_t *v;               /* out: NULL when absent or null */
};

static const char *
ftype_text(enum ftype t)
{
	switch (t) {
	case F_STR: return "a string";
	case F_INT: return "an integer";
	case F_BOOL: return "true or false";
	case F_OBJ: return "an object";
	case F_ARR: return "an array";
	}
	return "a value";
}

static int
ftype_ok(enum ftype t, json_t *v)
{
	switch (t) {
	case F_STR: return json_is_string(v);
	case F_INT: return json_is_integer(v);
	case F_BOOL: return json_is_boolean(v);
	case F_OBJ: return json_is_object(v);
	case F_ARR: return json_is_array(v);
	}
	return 0;
}

/* Reads the body's fields; answers 400 and returns -1 on anything else. */
static int
fields_get(struct call *k, struct field *f, size_t n)
{
	char list[256], b[80];
	const char *key;
	size_t i, at = 0;
	json_t *v;

	list[0] = '\0';
	for (i = 0; i < n; i++)
		at += (size_t)snprintf(list + at, at < sizeof(list) ?
		    sizeof(list) - at : 0, "%s%s", i ? ", " : "", f[i].name);
	json_object_foreach(k->body, key, v) {
		for (i = 0; i < n; i++)
			if (strcmp(f[i].name, key) == 0)
				break;
		if (i == n) {
			apireply_fail(k->req, 400, "%s: unknown field (expected "
			    "one of: %s)", shown(key, b, sizeof(b)), list);
			return -1;
		}
		if (json_is_null(v) && !f[i].required)
			continue;
		if (!ftype_ok(f[i].type, v)) {
			apireply_fail(k->req, 400, "%s: expected %s", f[i].name,
			    ftype_text(f[i].type));
			return -1;
		}
		f[i].v = v;
	}
	for (i = 0; i < n; i++) {
		if (f[i].required && f[i].v == NULL) {
			apireply_fail(k->req, 400, "%s: required", f[i].name);
			return -1;
		}
	}
	return 0;
}

static int
tier_get(struct call *k, const char *path, json_t *v, enum pol_tier *out)
{
	char b[80];

	if (pol_tier_parse(json_string_value(v), out) != 0) {
		apireply_fail(k->req, 400, "%s: unknown tier \"%s\" (expected off, "
		    "registries or public)", path,
		    shown(json_string_value(v), b, sizeof(b)));
		return -1;
	}
	return 0;
}

/* "application/json", any case, optionally with parameters. */
static int
is_json_type(const char *ct)
{
	static const char want[] = "application/json";
	size_t n = sizeof(want) - 1;

	if (ct == NULL || strncasecmp(ct, want, n) != 0)
		return 0;
	ct += n;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return *ct == '\0' || *ct == ';';
}

/* The body as the route wants it: none, or one JSON object. */
static int
read_body(struct call *k)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(k->req);
	size_t len = evbuffer_get_length(in);
	const char *ct;
	json_error_t je;
	char b[200];

	if (!k->route->body) {
		if (len != 0) {
			apireply_fail(k->req, 400, "this call takes no body");
			return -1;
		}
		return 0;
	}
	if (len == 0) {
		apireply_fail(k->req, 400, "expected a JSON object body");
		return -1;
	}
	if (len > k->max_body) {   /* evhttp caps it first; kept for safety */
		apireply_fail(k->req, 413, "the body is larger than %zu bytes",
		    k->max_body);
		return -1;
	}
	ct = evhttp_find_header(evhttp_request_get_input_headers(k->req),
	    "Content-Type");
	if (!is_json_type(ct)) {
		apireply_fail(k->req, 415, "the body must be application/json");
		return -1;
	}
	/* one object, no key twice, nothing after it, no NUL byte */
	k->body = jsonstrict_load((const char *)evbuffer_pullup(in, -1), len,
	    &je);
	if (k->body == NULL) {
		apireply_fail(k->req, 400, "body: invalid JSON at line %d column "
		    "%d: %s", je.line, je.column, shown(je.text, b, sizeof(b)));
		return -1;
	}
	if (!json_is_object(k->body)) {
		apireply_fail(k->req, 400, "body: expected a JSON object");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Handlers. */

static void
h_health(struct call *k)
{
	json_t *h = ctl_json_health();

	/* the caller's own role, so that a client (sluicectl console) can
	 * leave out what that role may not do without trying it: a refused
	 * call is an audit record */
	if (h != NULL) {
		json_t *c = json_pack("{s:s,s:s}", "role", k->actor.role,
		    "who", k->actor.who);

		if (c != NULL && k->actor.tenant != NULL)
			json_object_set_new(c, "tenant",
			    json_string(k->actor.tenant));
		json_object_set_new(h, "caller", c);
	}
	apireply_json(k->req, 200, h);
}

static void
h_ceiling_get(struct call *k)
{
	apireply_json(k->req, 200, ctl_json_ceiling());
}

/* Checks every value before changing anything. */
static int
ceiling_tenants_check(struct call *k, json_t *tenants)
{
	const char *name;
	enum pol_tier t;
	char b[80], path[128];
	json_t *v;

	json_object_foreach(tenants, name, v) {
		snprintf(path, sizeof(path), "tenants.%s",
		    shown(name, b, sizeof(b)));
		if (!pol_id_valid(name)) {
			apireply_fail(k->req, 400, "%s: bad tenant name (expected "
			    "1 to 64 of A-Z a-z 0-9 . _ -, not starting with "
			    "a dot)", path);
			return -1;
		}
		if (json_is_null(v))
			continue;
		if (!json_is_string(v)) {
			apireply_fail(k->req, 400, "%s: expected a tier or null",
			    path);
			return -1;
		}
		if (tier_get(k, path, v, &t) != 0)
			return -1;
	}
	return 0;
}

static void
h_ceiling_put(struct call *k)
{
	struct field f[] = {
		{ "tier", F_STR, 0, NULL },
		{ "tenants", F_OBJ, 0, NULL },
		{ "close_exceeding", F_BOOL, 0, NULL },
	};
	struct ctl_err e = { CTL_OK, "" };
	size_t closed = 0, n;
	enum pol_tier t = POL_TIER_OFF;
	int close_ex;
	const char *name;
	json_t *v, *j;

	if (fields_get(k, f, 3) != 0)
		return;
	if (f[0].v == NULL && f[1].v == NULL) {
		apireply_fail(k->req, 400, "expected \"tier\" or \"tenants\"");
		return;
	}
	if ((f[0].v != NULL && tier_get(k, "tier", f[0].v, &t) != 0) ||
	    (f[1].v != NULL && ceiling_tenants_check(k, f[1].v) != 0))
		return;
	close_ex = f[2].v != NULL && json_is_true(f[2].v);
	if (f[0].v != NULL) {
		n = 0;
		if (ctl_ceiling_set(&k->actor, NULL, t, close_ex, &n, &e) != 0)
			goto fail;
		closed += n;
	}
	json_object_foreach(f[1].v, name, v) {
		n = 0;
		if (json_is_null(v)) {
			/* clearing what is not set leaves what PUT asked for */
			if (ctl_ceiling_clear(&k->actor, name, &e) != 0 &&
			    e.code != CTL_NOT_FOUND)
				goto fail;
			continue;
		}
		if (pol_tier_parse(json_string_value(v), &t) != 0) {
			/* checked above; never guess a tier */
			e.code = CTL_BAD_REQUEST;
			snprintf(e.msg, sizeof(e.msg), "tenants.%s: not a tier",
			    name);
			goto fail;
		}
		if (ctl_ceiling_set(&k->actor, name, t, close_ex, &n, &e) != 0)
			goto fail;
		closed += n;
	}
	j = ctl_json_ceiling();
	if (j != NULL)
		json_object_set_new(j, "closed", json_integer((json_int_t)closed));
	apireply_json(k->req, 200, j);
	return;
fail:
	send_ctl_error(k->req, &e);
}

/* doc's array under key without the entries of another tenant than
 * a bound caller's (doc consumed; a new reference). */
static json_t *
tenant_only(const struct call *k, json_t *doc, const char *key)
{
	json_t *a = json_object_get(doc, key), *x;
	size_t i;

	if (k->actor.tenant == NULL || !json_is_array(a))
		return doc;
	for (i = json_array_size(a); i-- > 0; ) {
		x = json_object_get(json_array_get(a, i), "tenant");
		if (!json_is_string(x) ||
		    strcmp(json_string_value(x), k->actor.tenant) != 0)
			json_array_remove(a, i);
	}
	return doc;
}

static void
h_sessions_list(struct call *k)
{
	apireply_json(k->req, 200, tenant_only(k, ctl_json_sessions(),
	    "sessions"));
}

static int
user_ok(const char *u)
{
	size_t i;

	for (i = 0; u[i] != '\0'; i++)
		if ((unsigned char)u[i] < 0x20 || u[i] == 0x7f)
			return 0;
	return i <= API_USER_MAX;
}

static void
h_session_create(struct call *k)
{
	struct field f[] = {
		{ "id", F_STR, 1, NULL },
		{ "tenant", F_STR, 1, NULL },
		{ "user", F_STR, 1, NULL },
		{ "tier", F_STR, 1, NULL },
		{ "socket", F_STR, 0, NULL },
		{ "vsock_cid", F_INT, 0, NULL },
		{ "source", F_STR, 0, NULL },
	};
	struct ctl_session_spec spec;
	struct ctl_err e = { CTL_OK, "" };
	struct px_session *s = NULL;
	char loc[128], b[80];

	if (fields_get(k, f, 7) != 0)
		return;
	memset(&spec, 0, sizeof(spec));
	spec.id = json_string_value(f[0].v);
	spec.tenant = json_string_value(f[1].v);
	spec.user = json_string_value(f[2].v);
	if (k->actor.tenant != NULL &&
	    strcmp(spec.tenant, k->actor.tenant) != 0) {
		apireply_fail(k->req, 403, "tenant: this caller is bound to tenant "
		    "%s and makes only its sessions", k->actor.tenant);
		return;
	}
	spec.admin = k->role == CFG_ROLE_ADMIN;
	spec.socket = f[4].v ? json_string_value(f[4].v) : NULL;
	spec.source = f[6].v ? json_string_value(f[6].v) : NULL;
	spec.vsock_cid = f[5].v ? json_integer_value(f[5].v) : -1;
	if (!pol_id_valid(spec.id)) {
		apireply_fail(k->req, 400, "id: bad session id \"%s\" (expected 1 "
		    "to 64 of A-Z a-z 0-9 . _ -, not starting with a dot)",
		    shown(spec.id, b, sizeof(b)));
		return;
	}
	if (spec.tenant[0] != '\0' && !pol_id_valid(spec.tenant)) {
		apireply_fail(k->req, 400, "tenant: bad tenant name (expected \"\" "
		    "or 1 to 64 of A-Z a-z 0-9 . _ -, not starting with a "
		    "dot)");
		return;
	}
	if (!user_ok(spec.user)) {
		apireply_fail(k->req, 400, "user: at most %d bytes, no control "
		    "characters", API_USER_MAX);
		return;
	}
	if (tier_get(k, "tier", f[3].v, &spec.tier) != 0)
		return;
	if (f[5].v != NULL && (spec.vsock_cid < 1 ||
	    spec.vsock_cid > 0xfffffffeLL || spec.vsock_cid == 2)) {
		apireply_fail(k->req, 400, "vsock_cid: expected 1 or 3 to "
		    "4294967294");
		return;
	}
	if (ctl_session_create(&k->actor, &spec, &s, &e) != 0) {
		/* a socket the role may not have: refused, like a route */
		if (e.code == CTL_FORBIDDEN) {
			char target[200];

			snprintf(target, sizeof(target), "POST /v1/sessions "
			    "(socket %s)", spec.socket ? spec.socket : "-");
			ctl_audit(&k->actor, "session_create", target,
			    "forbidden");
		}
		send_ctl_error(k->req, &e);
		return;
	}
	snprintf(loc, sizeof(loc), "/v1/sessions/%s", spec.id);
	evhttp_add_header(evhttp_request_get_output_headers(k->req),
	    "Location", loc);
	apireply_json(k->req, 201, ctl_json_session(s));
}

static void
h_session_get(struct call *k)
{
	struct px_session *s = px_session_find(k->id);

	if (s == NULL) {
		apireply_fail(k->req, 404, "no session %s", k->id);
		return;
	}
	apireply_json(k->req, 200, ctl_json_session(s));
}

static void
h_session_patch(struct call *k)
{
	struct field f[] = { { "tier", F_STR, 1, NULL } };
	struct ctl_err e = { CTL_OK, "" };
	struct px_session *s;
	enum pol_tier t;

	if (fields_get(k, f, 1) != 0 || tier_get(k, "tier", f[0].v, &t) != 0)
		return;
	if (ctl_session_set_tier(&k->actor, k->id, t, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	if ((s = px_session_find(k->id)) == NULL) {
		apireply_fail(k->req, 404, "no session %s", k->id);
		return;
	}
	apireply_json(k->req, 200, ctl_json_session(s));
}

static void
h_session_delete(struct call *k)
{
	struct ctl_err e = { CTL_OK, "" };

	if (ctl_session_delete(&k->actor, k->id, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	apireply_json(k->req, 200, json_pack("{s:s}", "deleted", k->id));
}

/* The session's own egress rules, set whole (ctl_session_set_egress):
 * {"allow": [names], "deny": [names]}, exact or "*." and a domain. */
static void
h_session_egress(struct call *k)
{
	struct field f[] = {
		{ "allow", F_ARR, 0, NULL },
		{ "deny", F_ARR, 0, NULL },
	};
	struct ctl_err e = { CTL_OK, "" };
	struct px_session *s;

	if (fields_get(k, f, 2) != 0)
		return;
	if (ctl_session_set_egress(&k->actor, k->id, k->body, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	s = px_session_find(k->id);
	apireply_json(k->req, 200, s != NULL ? ctl_json_session(s) : json_object());
}

/* A grant names one host: a DNS name or an address, never a pattern. */
static int
grant_host(struct call *k, const char *h, struct pol_target *t)
{
	char b[80], br[POL_HOST_MAX + 3];

	if (strchr(h, '*') != NULL) {
		apireply_fail(k->req, 400, "host: \"%s\" is a pattern; a grant "
		    "names one host", shown(h, b, sizeof(b)));
		return -1;
	}
	/* IPv6 with or without brackets */
	if (h[0] != '[' && strchr(h, ':') != NULL &&
	    strlen(h) + 3 <= sizeof(br)) {
		snprintf(br, sizeof(br), "[%s]", h);
		h = br;
	}
	if (pol_host_parse(h, strlen(h), 1, t) != POL_R_NONE) {
		apireply_fail(k->req, 400, "host: \"%s\" is not a host name or "
		    "address (lower or upper case ASCII, no port, no escapes)",
		    shown(h, b, sizeof(b)));
		return -1;
	}
	return 0;
}

static json_t *
grant_json(const char *id, const struct pol_target *t)
{
	return json_pack("{s:s,s:s,s:i}", "session", id, "host", t->host,
	    "port", (int)t->port);
}

static void
h_grant_add(struct call *k)
{
	struct field f[] = {
		{ "host", F_STR, 1, NULL },
		{ "port", F_INT, 1, NULL },
	};
	struct ctl_err e = { CTL_OK, "" };
	struct pol_target t;
	struct px_session *s;
	json_int_t port;
	int existed;

	if (fields_get(k, f, 2) != 0 ||
	    grant_host(k, json_string_value(f[0].v), &t) != 0)
		return;
	port = json_integer_value(f[1].v);
	if (port < 1 || port > 65535) {
		apireply_fail(k->req, 400, "port: expected 1 to 65535");
		return;
	}
	t.port = (uint16_t)port;
	s = px_session_find(k->id);
	existed = s != NULL && pol_session_has_grant(s->pol, t.host, t.port);
	if (ctl_grant_add(&k->actor, k->id, t.host, t.port, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	apireply_json(k->req, existed ? 200 : 201, grant_json(k->id, &t));
}

static void
h_grant_remove(struct call *k)
{
	struct ctl_err e = { CTL_OK, "" };
	struct pol_target t;
	char b[80];
	json_t *j;

	if (strchr(k->grant, '*') != NULL ||
	    pol_target_parse_authority(k->grant, strlen(k->grant), &t) !=
	    POL_R_NONE) {
		apireply_fail(k->req, 400, "grant: \"%s\" is not HOST:PORT or "
		    "[IPV6]:PORT", shown(k->grant, b, sizeof(b)));
		return;
	}
	if (ctl_grant_remove(&k->actor, k->id, t.host, t.port, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	j = grant_json(k->id, &t);
	if (j != NULL)
		json_object_set_new(j, "removed", json_true());
	apireply_json(k->req, 200, j);
}

static void
h_metrics(struct call *k)
{
	char *text = ctl_metrics_text();

	if (text == NULL) {
		apireply_fail(k->req, 500, "out of memory");
		return;
	}
	apireply_text(k->req, 200, "text/plain; version=0.0.4", text,
	    strlen(text));
	free(text);
}

/* The stream takes the request over; api.c is done with it. */
static void
h_events(struct call *k)
{
	const char *last = evhttp_find_header(
	    evhttp_request_get_input_headers(k->req), "Last-Event-ID");

	/* only app and admin reach this route, and both may answer */
	ev_subscribe(k->req, 1, last);
}

static void
h_prompts_list(struct call *k)
{
	apireply_json(k->req, 200, tenant_only(k, ctl_json_prompts(),
	    "prompts"));
}

static void
h_prompt_get(struct call *k)
{
	json_t *j = ctl_json_prompt(k->id);

	if (j == NULL) {
		apireply_fail(k->req, 404, "no prompt %s", k->id);
		return;
	}
	apireply_json(k->req, 200, j);
}

static void
h_prompt_answer(struct call *k)
{
	struct field f[] = { { "decision", F_STR, 1, NULL } };
	struct ctl_err e = { CTL_OK, "" };
	enum pol_answer ans;
	json_t *j;
	char b[80];

	if (fields_get(k, f, 1) != 0)
		return;
	if (pol_answer_parse(json_string_value(f[0].v), &ans) != 0) {
		apireply_fail(k->req, 400, "decision: unknown decision \"%s\" "
		    "(expected allow_once, allow_chat or deny)",
		    shown(json_string_value(f[0].v), b, sizeof(b)));
		return;
	}
	if (ctl_prompt_answer(&k->actor, k->id, ans, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	if ((j = ctl_json_prompt(k->id)) == NULL) {
		apireply_fail(k->req, 404, "no prompt %s", k->id);
		return;
	}
	apireply_json(k->req, 200, j);
}

/* Credentials: the value is write-only (never in an answer). */
static void
h_cred_put(struct call *k)
{
	struct ctl_err e = { CTL_OK, "" };
	void *j = NULL;
	int created = 0;
	char loc[96];

	if (ctl_cred_put(&k->actor, k->body, &j, &created, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	snprintf(loc, sizeof(loc), "/v1/credentials/%s",
	    json_string_value(json_object_get(j, "name")));
	evhttp_add_header(evhttp_request_get_output_headers(k->req),
	    "Location", loc);
	apireply_json(k->req, created ? 201 : 200, j);
}

static void
h_creds_list(struct call *k)
{
	apireply_json(k->req, 200, ctl_creds_json(k->actor.tenant));
}

static void
h_cred_get(struct call *k)
{
	json_t *j = ctl_cred_json(k->id, k->actor.tenant);

	if (j == NULL) {
		apireply_fail(k->req, 404, "no credential %s", k->id);
		return;
	}
	apireply_json(k->req, 200, j);
}

static void
h_cred_delete(struct call *k)
{
	struct ctl_err e = { CTL_OK, "" };

	if (ctl_cred_delete(&k->actor, k->id, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	apireply_json(k->req, 200, json_pack("{s:s,s:b}", "name", k->id,
	    "removed", 1));
}

/* Request rules: the API's, after the configuration's (rules.c). */
static void
h_rule_put(struct call *k)
{
	struct ctl_err e = { CTL_OK, "" };
	void *j = NULL;
	int created = 0;
	char loc[96];

	if (ctl_rule_put(&k->actor, k->body, &j, &created, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	snprintf(loc, sizeof(loc), "/v1/rules/%s",
	    json_string_value(json_object_get(j, "name")));
	evhttp_add_header(evhttp_request_get_output_headers(k->req),
	    "Location", loc);
	apireply_json(k->req, created ? 201 : 200, j);
}

static void
h_rules_replace(struct call *k)
{
	struct ctl_err e = { CTL_OK, "" };
	void *j = NULL;

	if (ctl_rules_replace(&k->actor, k->body, &j, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	apireply_json(k->req, 200, j);
}

static void
h_rules_list(struct call *k)
{
	apireply_json(k->req, 200, ctl_rules_json(k->actor.tenant));
}

static void
h_rule_get(struct call *k)
{
	json_t *j = ctl_rule_json(k->id, k->actor.tenant);

	if (j == NULL) {
		apireply_fail(k->req, 404, "no rule %s in the control API's rules",
		    k->id);
		return;
	}
	apireply_json(k->req, 200, j);
}

static void
h_rule_delete(struct call *k)
{
	struct ctl_err e = { CTL_OK, "" };

	if (ctl_rule_delete(&k->actor, k->id, &e) != 0) {
		send_ctl_error(k->req, &e);
		return;
	}
	apireply_json(k->req, 200, json_pack("{s:s,s:b}", "name", k->id,
	    "removed", 1));
}

/* The CA a sandbox trusts for inspected hosts (sluice-execd fetches it). */
static void
h_inspect_ca(struct call *k)
{
	const char *pem = ctl_inspect_ca();

	if (pem == NULL) {
		apireply_fail(k->req, 404, "TLS inspection is off "
		    "(inspect.hosts is empty)");
		return;
	}
	apireply_text(k->req, 200, "application/x-pem-file", pem, strlen(pem));
}

static const struct route routes[] = {
	{ "/v1/health", EVHTTP_REQ_GET, R_ALL, "health", h_health, 0 },
	{ "/v1/ceiling", EVHTTP_REQ_GET, R_ADMIN | R_AUDITOR, "ceiling_get",
	  h_ceiling_get, 0 },
	{ "/v1/ceiling", EVHTTP_REQ_PUT, R_ADMIN, "ceiling_set",
	  h_ceiling_put, 1 },
	{ "/v1/sessions", EVHTTP_REQ_GET, R_ALL, "session_list",
	  h_sessions_list, 0 },
	{ "/v1/sessions", EVHTTP_REQ_POST, R_ADMIN | R_APP, "session_create",
	  h_session_create, 1 },
	{ "/v1/sessions/{id}", EVHTTP_REQ_GET, R_ALL, "session_get",
	  h_session_get, 0 },
	{ "/v1/sessions/{id}", EVHTTP_REQ_PATCH, R_ADMIN | R_APP,
	  "session_set_tier", h_session_patch, 1 },
	{ "/v1/sessions/{id}", EVHTTP_REQ_DELETE, R_ADMIN | R_APP,
	  "session_delete", h_session_delete, 0 },
	{ "/v1/sessions/{id}/egress", EVHTTP_REQ_PUT, R_ADMIN | R_APP,
	  "session_set_egress", h_session_egress, 1 },
	{ "/v1/sessions/{id}/grants", EVHTTP_REQ_POST, R_ADMIN | R_APP,
	  "grant_add", h_grant_add, 1 },
	{ "/v1/sessions/{id}/grants/{grant}", EVHTTP_REQ_DELETE,
	  R_ADMIN | R_APP, "grant_remove", h_grant_remove, 0 },
	{ "/v1/metrics", EVHTTP_REQ_GET, R_ADMIN | R_AUDITOR, "metrics",
	  h_metrics, 0 },
	{ "/v1/events", EVHTTP_REQ_GET, R_ADMIN | R_APP, "events",
	  h_events, 0 },
	{ "/v1/prompts", EVHTTP_REQ_GET, R_ADMIN | R_APP, "prompt_list",
	  h_prompts_list, 0 },
	{ "/v1/prompts/{id}", EVHTTP_REQ_GET, R_ADMIN | R_APP, "prompt_get",
	  h_prompt_get, 0 },
	{ "/v1/prompts/{id}", EVHTTP_REQ_POST, R_ADMIN | R_APP,
	  "prompt_answer", h_prompt_answer, 1 },
	{ "/v1/credentials", EVHTTP_REQ_GET, R_ADMIN | R_APP,
	  "credential_list", h_creds_list, 0 },
	{ "/v1/credentials", EVHTTP_REQ_POST, R_ADMIN | R_APP,
	  "credential_set", h_cred_put, 1 },
	{ "/v1/credentials/{id}", EVHTTP_REQ_GET, R_ADMIN | R_APP,
	  "credential_get", h_cred_get, 0 },
	{ "/v1/credentials/{id}", EVHTTP_REQ_DELETE, R_ADMIN | R_APP,
	  "credential_delete", h_cred_delete, 0 },
	{ "/v1/rules", EVHTTP_REQ_GET, R_ALL, "rule_list", h_rules_list, 0 },
	{ "/v1/rules", EVHTTP_REQ_POST, R_ADMIN, "rule_set", h_rule_put, 1 },
	{ "/v1/rules", EVHTTP_REQ_PUT, R_ADMIN, "rules_replace",
	  h_rules_replace, 1 },
	{ "/v1/rules/{id}", EVHTTP_REQ_GET, R_ALL, "rule_get", h_rule_get, 0 },
	{ "/v1/rules/{id}", EVHTTP_REQ_DELETE, R_ADMIN, "rule_delete",
	  h_rule_delete, 0 },
	{ "/v1/inspect/ca", EVHTTP_REQ_GET, R_ALL, "inspect_ca",
	  h_inspect_ca, 0 },
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

/* ------------------------------------------------------------------ */
/* Routing. */

/* Finds the route; on a miss answers 404 or 405 (with Allow) only when
 * answer is set, so that callers not yet identified learn nothing. */
static int
route_find(struct call *k, const char *path, struct apiroute_cap caps[2],
    int answer)
{
	enum evhttp_cmd_type m = k->method;
	char allow[128];
	size_t i, n, at = 0;
	int seen = 0;

	allow[0] = '\0';
	for (i = 0; i < NROUTES; i++) {
		if (!apiroute_match(routes[i].pattern, path, caps, 2, &n))
			continue;
		if (routes[i].method == m) {
			k->route = &routes[i];
			return 0;
		}
		seen = 1;
		at += (size_t)snprintf(allow + at, at < sizeof(allow) ?
		    sizeof(allow) - at : 0, "%s%s", at ? ", " : "",
		    apiroute_method_name(routes[i].method));
	}
	if (!answer)
		return -1;
	if (!seen) {
		apireply_fail(k->req, 404, "no such resource");
		return -1;
	}
	evhttp_add_header(evhttp_request_get_output_headers(k->req), "Allow",
	    allow);
	apireply_fail(k->req, 405, "%s is not allowed here (allowed: %s)",
	    apiroute_method_name(m), allow);
	return -1;
}

/* The {id} and {grant} segments, checked. */
static int
route_args(struct call *k, const struct apiroute_cap caps[2])
{
	const char *pat = k->route->pattern;
	char raw[80], b[80];
	size_t n;

	if (strstr(pat, "{id}") != NULL) {
		if (caps[0].n >= sizeof(k->id)) {
			apireply_fail(k->req, 400, "id: longer than 64 characters");
			return -1;
		}
		memcpy(k->id, caps[0].p, caps[0].n);
		k->id[caps[0].n] = '\0';
		if (!pol_id_valid(k->id)) {
			apireply_fail(k->req, 400, "id: bad %s id \"%s\" "
			    "(expected 1 to 64 of A-Z a-z 0-9 . _ -, not "
			    "starting with a dot)",
			    strncmp(pat, "/v1/prompts/", 12) == 0 ? "prompt" :
			    strncmp(pat, "/v1/credentials/", 16) == 0 ?
			    "credential" : strncmp(pat, "/v1/rules/", 10) == 0 ?
			    "rule" : "session", shown(k->id, b, sizeof(b)));
			return -1;
		}
	}
	if (strstr(pat, "{grant}") != NULL) {
		if (caps[1].n >= sizeof(raw) * 4) {
			apireply_fail(k->req, 400, "grant: too long");
			return -1;
		}
		k->grant = evhttp_uridecode(caps[1].p, 0, &n);
		/* the decoded text must be plain text: no NUL, no '/' */
		if (k->grant == NULL || strlen(k->grant) != n ||
		    strchr(k->grant, '/') != NULL) {
			snprintf(raw, sizeof(raw), "%.*s", (int)(caps[1].n < 64 ?
			    caps[1].n : 64), caps[1].p);
			apireply_fail(k->req, 400, "grant: \"%s\" is not HOST:PORT",
			    shown(raw, b, sizeof(b)));
			return -1;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Callers. */

_Static_assert((int)CFG_ROLE_AUDITOR == (int)ROLES_AUDITOR &&
    (int)CFG_ROLE_APP == (int)ROLES_APP && (int)CFG_ROLE_ADMIN ==
    (int)ROLES_ADMIN, "enum cfg_role is enum roles_role");

/* The one rule of proxy/lib/roles.c (sluice-execd resolves its callers
 * with it too). */
static enum cfg_role
role_of(uid_t uid, const gid_t *gids, size_t ngids)
{
	struct roles_list u[ROLES__COUNT], g[ROLES__COUNT];
	int r;

	memset(u, 0, sizeof(u));
	memset(g, 0, sizeof(g));
	for (r = CFG_ROLE_AUDITOR; r <= CFG_ROLE_ADMIN; r++) {
		u[r].ids = api.acl.uids[r].ids;
		u[r].n = api.acl.uids[r].n;
		g[r].ids = api.acl.gids[r].ids;
		g[r].n = api.acl.gids[r].n;
	}
	return (enum cfg_role)roles_resolve(uid, gids, ngids, u, g);
}

static void
identify_unix(struct call *k, int fd)
{
	gid_t gids[ROLES_GROUPS_MAX + 1];
	size_t ngids;
	uid_t uid;

	k->role = CFG_ROLE_NONE;
	snprintf(k->actor.who, sizeof(k->actor.who), "unix:unknown");
	if (roles_peer(fd, &uid, gids, &ngids) != 0)
		return;
	k->role = role_of(uid, gids, ngids);
	if (uid == 0)
		snprintf(k->actor.who, sizeof(k->actor.who), "root");
	else
		snprintf(k->actor.who, sizeof(k->actor.who), "uid:%lu",
		    (unsigned long)uid);
}

/* "Bearer TOKEN": the token's hash against every configured hash, all
 * of them compared in constant time, so neither the content nor which
 * token came close shows in the timing. */
static void
identify_token(struct call *k)
{
	unsigned char d[HTTPAUTH_DIGEST_LEN];
	const struct api_token *hit = NULL;
	const char *v;
	size_t i;

	k->role = CFG_ROLE_NONE;
	if ((v = httpauth_bearer(evhttp_request_get_input_headers(k->req),
	    HTTPAUTH_TOKEN_MAX)) == NULL || httpauth_digest(v, d) != 0)
		return;
	for (i = 0; i < api.acl.ntokens; i++)
		if (httpauth_same(d, api.acl.tokens[i].digest))
			hit = &api.acl.tokens[i];
	OPENSSL_cleanse(d, sizeof(d));
	if (hit == NULL)
		return;
	k->role = hit->role;
	snprintf(k->actor.who, sizeof(k->actor.who), "token:%s", hit->name);
	snprintf(k->tenant, sizeof(k->tenant), "%s", hit->tenant);
}

static void
peer_text(struct evhttp_request *req, char *buf, size_t len)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	char *addr = NULL;
	ev_uint16_t port = 0;

	if (evcon != NULL)
		evhttp_connection_get_peer(evcon, &addr, &port);
	snprintf(buf, len, "tcp:%s:%u", addr ? addr : "?", (unsigned)port);
}

/* A refusal record names the call (or "api_call" for no known route)
 * and the method and path asked for. */
static void
audit_refusal(struct call *k, const char *path, const char *outcome)
{
	char target[160];

	snprintf(target, sizeof(target), "%s %.120s",
	    apiroute_method_name(k->method), path);
	ctl_audit(&k->actor, k->route ? k->route->action : "api_call",
	    target, outcome);
}

/*
 * A caller bound to a tenant (control.tokens[].tenant) reaches only that
 * tenant's sessions and prompts: another's is not found (404, as if it
 * were not there); the event stream and the metrics, which are not cut
 * to one tenant, are refused (403).  Lists are cut in their handlers,
 * credentials and rules in theirs.  0: go on; -1: answered.
 */
static int
tenant_scope(struct call *k)
{
	const char *pat = k->route->pattern, *t = NULL;
	struct px_session *s;
	json_t *p;
	int other;

	if (k->actor.tenant == NULL)
		return 0;
	if (strcmp(pat, "/v1/events") == 0 || strcmp(pat, "/v1/metrics") == 0) {
		audit_refusal(k, pat, "forbidden");
		apireply_fail(k->req, 403, "%s is not cut to one tenant: a caller "
		    "bound to tenant %s may not call it", pat, k->actor.tenant);
		return -1;
	}
	if (strncmp(pat, "/v1/sessions/{id}", 17) == 0) {
		if ((s = px_session_find(k->id)) != NULL &&
		    strcmp(pol_session_tenant(s->pol), k->actor.tenant) != 0) {
			apireply_fail(k->req, 404, "no session %s", k->id);
			return -1;
		}
	} else if (strcmp(pat, "/v1/prompts/{id}") == 0) {
		if ((p = ctl_json_prompt(k->id)) != NULL) {
			t = json_string_value(json_object_get(p, "tenant"));
			other = t == NULL || strcmp(t, k->actor.tenant) != 0;
			json_decref(p);
			if (other) {
				apireply_fail(k->req, 404, "no prompt %s", k->id);
				return -1;
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The request callback. */

static int conn_request(struct evhttp_request *req, SSL *ssl);

static void
on_request(struct evhttp_request *req, void *arg)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ?
	    evhttp_connection_get_bufferevent(evcon) : NULL;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	struct api_call_in in;
	struct call k;

	memset(&k, 0, sizeof(k));
	k.req = req;
	k.tls = arg == &kind_tls;
	if (k.tls) {
		/* evhttp serves plain HTTP when the bevcb fails: never */
		if (bev == NULL || bufferevent_openssl_get_ssl(bev) == NULL) {
			apireply_fail(req, 500, "TLS setup failed");
			return;
		}
		if (conn_request(req, bufferevent_openssl_get_ssl(bev)) != 0) {
			apireply_fail(req, 503, "too many control connections");
			return;
		}
		identify_token(&k);
		if (k.role == CFG_ROLE_NONE)
			peer_text(req, k.actor.who, sizeof(k.actor.who));
	} else {
		identify_unix(&k, bev ? bufferevent_getfd(bev) : -1);
	}
	memset(&in, 0, sizeof(in));
	in.tls = k.tls;
	in.role = k.role;
	in.who = k.actor.who;
	in.tenant = k.tenant[0] != '\0' ? k.tenant : NULL;
	in.method = evhttp_request_get_command(req);
	in.path = uri ? evhttp_uri_get_path(uri) : NULL;
	in.query = uri ? evhttp_uri_get_query(uri) : NULL;
	in.max_body = api.max_body;
	api_serve(req, &in);
}

void
api_serve(struct evhttp_request *req, const struct api_call_in *in)
{
	const char *path = in->path != NULL ? in->path : "";
	struct apiroute_cap caps[2];
	struct call k;
	int found;

	memset(&k, 0, sizeof(k));
	k.req = req;
	k.tls = in->tls;
	k.method = (enum evhttp_cmd_type)in->method;
	k.max_body = in->max_body;
	k.role = (enum cfg_role)in->role;
	snprintf(k.actor.who, sizeof(k.actor.who), "%s", in->who);
	k.actor.role = cfg_role_name(k.role);
	if (in->tenant != NULL && in->tenant[0] != '\0') {
		snprintf(k.tenant, sizeof(k.tenant), "%s", in->tenant);
		k.actor.tenant = k.tenant;
	}
	found = route_find(&k, path, caps, 0) == 0;
	if (k.role == CFG_ROLE_NONE) {
		if (k.tls) {
			audit_refusal(&k, path, "unauthorized");
			evhttp_add_header(evhttp_request_get_output_headers(req),
			    "WWW-Authenticate", "Bearer realm=\"sluice\"");
			apireply_fail(req, 401, "a valid bearer token is required");
		} else {
			audit_refusal(&k, path, "forbidden");
			apireply_fail(req, 403, "%s is in no role of the control "
			    "API (control.*_uids, control.*_gids)",
			    k.actor.who);
		}
		goto out;
	}
	if (!found) {
		route_find(&k, path, caps, 1);
		goto out;
	}
	if (in->query != NULL) {
		apireply_fail(req, 400, "the API takes no query parameters");
		goto out;
	}
	if (!(k.route->roles & (1u << k.role))) {
		audit_refusal(&k, path, "forbidden");
		apireply_fail(req, 403, "the %s role may not call %s %s",
		    k.actor.role, apiroute_method_name(k.route->method),
		    k.route->pattern);
		goto out;
	}
	if (route_args(&k, caps) != 0 || tenant_scope(&k) != 0 ||
	    read_body(&k) != 0)
		goto out;
	api.serving = 1;
	api.gen0 = ctl_state_gen();
	k.route->fn(&k);
	api.serving = 0;
out:
	json_decref(k.body);
	free(k.grant);
}

/* ------------------------------------------------------------------ */
/* Configuration copies. */

static void
idlist_free(struct cfg_idlist *l)
{
	free(l->ids);
	l->ids = NULL;
	l->n = 0;
}

static int
idlist_copy(struct cfg_idlist *to, const struct cfg_idlist *from)
{
	to->n = 0;
	to->ids = calloc(from->n ? from->n : 1, sizeof(*to->ids));
	if (to->ids == NULL)
		return -1;
	if (from->n > 0)
		memcpy(to->ids, from->ids, from->n * sizeof(*to->ids));
	to->n = from->n;
	return 0;
}

static void
acl_free(struct api_acl *a)
{
	int r;

	for (r = 0; r <= CFG_ROLE_ADMIN; r++) {
		idlist_free(&a->uids[r]);
		idlist_free(&a->gids[r]);
	}
	if (a->tokens != NULL)
		OPENSSL_cleanse(a->tokens, a->ntokens * sizeof(*a->tokens));
	free(a->tokens);
	memset(a, 0, sizeof(*a));
}

/* Reads a token file into its hash (httpauth_token_file). */
static int
token_load(const struct cfg_token *ct, struct api_token *t, char *err,
    size_t errlen)
{
	char why[160];
	int others;

	snprintf(t->name, sizeof(t->name), "%s", ct->name);
	t->role = ct->role;
	snprintf(t->tenant, sizeof(t->tenant), "%s", ct->tenant != NULL ?
	    ct->tenant : "");
	if (httpauth_token_file(ct->token_file, HTTPAUTH_TOKEN_MIN,
	    HTTPAUTH_TOKEN_MAX, t->digest, &others, why,
	    sizeof(why)) != 0) {
		snprintf(err, errlen, "token %s: %s: %s", ct->name,
		    ct->token_file, why);
		return -1;
	}
	if (others)
		px_log(PX_WARN, "%s: token %s: %s is readable by others",
		    __func__, ct->name, ct->token_file);
	return 0;
}

static int
acl_build(const struct cfg_control *cc, struct api_acl *a, char *err,
    size_t errlen)
{
	size_t i;
	int r;

	memset(a, 0, sizeof(*a));
	for (r = 0; r <= CFG_ROLE_ADMIN; r++)
		if (idlist_copy(&a->uids[r], &cc->uids[r]) != 0 ||
		    idlist_copy(&a->gids[r], &cc->gids[r]) != 0)
			goto oom;
	a->tokens = calloc(cc->ntokens ? cc->ntokens : 1, sizeof(*a->tokens));
	if (a->tokens == NULL)
		goto oom;
	for (i = 0; i < cc->ntokens; i++) {
		if (token_load(&cc->tokens[i], &a->tokens[i], err,
		    errlen) != 0) {
			acl_free(a);
			return -1;
		}
		a->ntokens = i + 1;
	}
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	acl_free(a);
	return -1;
}

/* ------------------------------------------------------------------ */
/*
 * Connections of the TCP listener.
 *
 * control.tcp is open to anyone who can reach it, before any token, so
 * its connections are capped and held to deadlines: control.max_conns in
 * all, control.max_conns_per_peer from one address, and
 * control.head_timeout_ms from the accept (or from the previous answer
 * on a kept connection) to a whole request, TLS handshake included; a
 * byte now and then does not extend it.  And the listener leaves
 * limits.fd_reserve descriptors to the proxy.
 *
 * evhttp (libevent 2.1.12) has none of this, and it owns each connection
 * and its bufferevent: it tells us of a connection only in the bufferevent
 * callback (tls_bev), before the descriptor is set, and then only once a
 * whole request has arrived.  So:
 *  - tls_bev makes an api_conn and ties it to the SSL it makes; the SSL's
 *    ex_data free callback (conn_gone) is the one place it is freed.
 *    libevent frees the SSL when it destroys the bufferevent, after
 *    closing the descriptor, so while an api_conn exists its descriptor
 *    is still this connection's and touching it is no use after free;
 *    nothing here frees anything of evhttp's.
 *  - a connection is ended by shutdown(2) of its descriptor, which evhttp
 *    reads as the peer hanging up, in any phase it waits to read in, and
 *    frees the connection itself.
 *  - tls_bev counts the connection and looks at the free descriptors
 *    (the accepted one is taken already), so that the listener stops
 *    within its accept loop; a zero timer, run once evhttp has set the
 *    descriptor, admits it or not (its peer's count, or what tls_bev
 *    found), then holds the deadline; on_request stops it and the
 *    request's completion starts it again.
 *  - at control.max_conns the listener is disabled (the kernel queues
 *    the rest) until a connection is gone; with too few descriptors, or
 *    when accept(2) fails for want of them, until a look twice a second
 *    finds enough.
 */

static const struct tcpadmit_names tcp_names = {
	"control.tcp", "control.max_conns", "control.max_conns_per_peer",
	"limits.fd_reserve",
};

static void
conn_arm(struct api_conn *k)
{
	tcpadmit_conn_arm(&k->ta, api.head_timeout_ms);
}

static int
conn_admit(struct api_conn *k)
{
	return tcpadmit_conn_admit(&api.ta, &k->ta, bufferevent_getfd(k->bev));
}

static void
conn_timer(evutil_socket_t fd, short ev, void *arg)
{
	struct api_conn *k = arg;

	(void)fd;
	(void)ev;
	if (k->ta.shut || k->serving)
		return;
	if (!k->ta.admitted) {
		if (conn_admit(k) == 0)
			conn_arm(k);
		return;
	}
	tcpadmit_conn_shut(&api.ta, &k->ta, "control.head_timeout_ms");
}

static struct api_conn *
conn_of(SSL *ssl)
{
	return ssl != NULL && conn_idx >= 0 ? SSL_get_ex_data(ssl, conn_idx) :
	    NULL;
}

/* A kept connection's next request has control.head_timeout_ms again. */
static void
conn_answered(struct evhttp_request *req, void *arg)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev;
	struct api_conn *k;

	(void)arg;
	if (evcon == NULL ||
	    (bev = evhttp_connection_get_bufferevent(evcon)) == NULL ||
	    (k = conn_of(bufferevent_openssl_get_ssl(bev))) == NULL ||
	    k->ta.shut)
		return;
	k->serving = 0;
	conn_arm(k);
}

/* A whole request arrived on ssl's connection: no deadline while it is
 * answered (an event stream may last).  -1: the connection may not stay
 * (admitted only now, which a zero timer makes all but impossible). */
static int
conn_request(struct evhttp_request *req, SSL *ssl)
{
	struct api_conn *k = conn_of(ssl);

	if (k == NULL)
		return 0;       /* made before the limits (no ex_data): none */
	if (!k->ta.admitted && conn_admit(k) != 0)
		return -1;
	if (k->ta.shut)
		return -1;
	k->serving = 1;
	evtimer_del(k->ta.timer);
	evhttp_request_set_on_complete_cb(req, conn_answered, NULL);
	return 0;
}

/* The SSL is being freed, so is its connection: forget it. */
static void
conn_gone(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
    void *argp)
{
	struct api_conn *k = ptr;

	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	if (k == NULL)
		return;
	tcpadmit_conn_remove(&api.ta, &k->ta);
	event_free(k->ta.timer);
	free(k);
}

/* A connection still open at stop (tcpadmit_stop): its SSL may be freed
 * later, by event_base_free, when api is gone. */
static void
conn_forget(struct tcpadmit_conn *t)
{
	struct api_conn *k = (struct api_conn *)t;

	SSL_set_ex_data(k->ssl, conn_idx, NULL);
	event_free(t->timer);
	free(k);
}

static void
conn_limits(const struct cfg *c)
{
	api.head_timeout_ms = c->control.head_timeout_ms;
	tcpadmit_set_limits(&api.ta, c->control.max_conns,
	    c->control.max_conns_per_peer, c->fd_reserve);
}

/* ------------------------------------------------------------------ */
/* Listeners. */

static struct evhttp *
http_new(int *kind)
{
	struct evhttp *h = evhttp_new(api.base);

	if (h == NULL)
		return NULL;
	evhttp_set_gencb(h, on_request, kind);
	/* every method reaches on_request, which answers 405 itself */
	evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_PATCH);
	evhttp_set_max_body_size(h, (ev_ssize_t)api.max_body);
	evhttp_set_max_headers_size(h, API_HEADERS_MAX);
	evhttp_set_timeout(h, API_TIMEOUT_S);
	evhttp_set_default_content_type(h, "application/json");
	/* an oversized body is read and dropped, so the client gets 413 */
	evhttp_set_flags(h, EVHTTP_SERVER_LINGERING_CLOSE);
	return h;
}

static int
group_lookup(const char *name, gid_t *gid, char *err, size_t errlen)
{
	struct group *g;

	*gid = (gid_t)-1;
	if (name == NULL)
		return 0;
	errno = 0;
	if ((g = getgrnam(name)) == NULL) {
		snprintf(err, errlen, "control.socket_group: no group %s",
		    name);
		return -1;
	}
	*gid = g->gr_gid;
	return 0;
}

/*
 * The control socket (usock.h): never replaces a file that is not a
 * socket or a socket someone serves, never follows a link on the way,
 * and is reachable only once its mode and group are set.
 */
static int
unix_listen(const struct cfg_control *cc, struct api_unix *u, char *err,
    size_t errlen)
{
	char canon[PATH_MAX], why[PATH_MAX + 128];
	gid_t gid;
	int fd;

	memset(u, 0, sizeof(u[0]));
	/* the path's form is checked with the configuration (and the
	 * default's, under runtime_dir, is resolved here) */
	if (group_lookup(cc->socket_group, &gid, err, errlen) != 0)
		return -1;
	if (usock_canon(cc->socket, canon, sizeof(canon), why,
	    sizeof(why)) != 0 ||
	    (fd = usock_listen(canon, (mode_t)cc->socket_mode, gid, 0755, 128,
	    &u->sock, why, sizeof(why))) < 0)
		return errf(err, errlen, "%s", why);
	u->path = strdup(canon);
	u->group = cc->socket_group ? strdup(cc->socket_group) : NULL;
	u->mode = cc->socket_mode;
	if (u->path == NULL || (cc->socket_group && u->group == NULL) ||
	    (u->http = http_new(&kind_unix)) == NULL ||
	    evhttp_accept_socket_with_handle(u->http, fd) == NULL) {
		usock_unlink(canon, &u->sock);
		if (u->http != NULL)
			evhttp_free(u->http);
		close(fd);
		free(u->path);
		free(u->group);
		memset(u, 0, sizeof(u[0]));
		return errf(err, errlen, "%s: out of memory", cc->socket);
	}
	return 0;
}

static void
unix_close(struct api_unix *u)
{
	if (u->http != NULL)
		evhttp_free(u->http);
	if (u->path != NULL)
		usock_unlink(u->path, &u->sock);
	free(u->path);
	free(u->group);
	memset(u, 0, sizeof(*u));
}

static SSL_CTX *
tls_ctx_new(const struct cfg_control *cc, char *err, size_t errlen)
{
	static const struct apitls_names names = { "control.tls_cert",
	    "control.tls_key", "control.client_ca" };

	return apitls_ctx_new(cc->tls_cert, cc->tls_key, cc->client_ca,
	    &names, err, errlen);
}

/* evhttp asks for each accepted connection's bufferevent, before it
 * sets the descriptor: the connection is counted here, admitted by its
 * zero timer. */
static struct bufferevent *
tls_bev(struct event_base *base, void *arg)
{
	struct bufferevent *bev;
	struct api_conn *k;
	SSL *ssl;

	(void)arg;
	if (api.tls.ctx == NULL || (ssl = SSL_new(api.tls.ctx)) == NULL)
		return NULL;
	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (k->ta.timer = evtimer_new(base, conn_timer, k)) == NULL) {
		free(k);
		SSL_free(ssl);
		return NULL;
	}
	/* BEV_OPT_CLOSE_ON_FREE: libevent frees the SSL with the
	 * bufferevent (which conn_gone relies on), and on failure here */
	bev = bufferevent_openssl_socket_new(base, -1, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL || SSL_set_ex_data(ssl, conn_idx, k) != 1) {
		if (bev != NULL)
			bufferevent_free(bev);
		event_free(k->ta.timer);
		free(k);
		return NULL;
	}
	k->ssl = ssl;
	k->bev = bev;
	tcpadmit_conn_add(&api.ta, &k->ta);
	return bev;
}

static struct evhttp *
tls_listen(const char *addr, struct evhttp_bound_socket **bound, char *err,
    size_t errlen)
{
	struct pol_target t;
	struct evhttp *h;

	if (pol_target_parse_authority(addr, strlen(addr), &t) != POL_R_NONE ||
	    t.kind == POL_HOST_NAME) {
		snprintf(err, errlen, "control.tcp: bad address %s", addr);
		return NULL;
	}
	if ((h = http_new(&kind_tls)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	evhttp_set_bevcb(h, tls_bev, NULL);
	if ((*bound = evhttp_bind_socket_with_handle(h, t.host, t.port)) ==
	    NULL) {
		snprintf(err, errlen, "control.tcp %s: %s", addr,
		    strerror(errno));
		evhttp_free(h);
		return NULL;
	}
	return h;
}

static void
tls_close(struct api_tls *t)
{
	if (t->http != NULL)
		evhttp_free(t->http);   /* its connections' SSLs go later */
	if (t->bound != NULL)
		tcpadmit_bind(&api.ta, NULL);
	if (t->ctx != NULL)
		SSL_CTX_free(t->ctx);
	free(t->addr);
	memset(t, 0, sizeof(*t));
}

/* ------------------------------------------------------------------ */
/* Contract. */

int
api_start(struct event_base *base, const struct cfg *c, char *err,
    size_t errlen)
{
	const struct cfg_control *cc = &c->control;

	memset(&api, 0, sizeof(api));
	api.base = base;
	TAILQ_INIT(&api.held);
	ctl_state_hook(api_saved);
	apireply_set_sink(send_text);
	api.max_body = cc->max_body;
	tcpadmit_init(&api.ta, base, &tcp_names);
	conn_limits(c);
	if (conn_idx < 0 && (conn_idx = SSL_get_ex_new_index(0, NULL, NULL,
	    NULL, conn_gone)) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (acl_build(cc, &api.acl, err, errlen) != 0 ||
	    unix_listen(cc, &api.un, err, errlen) != 0)
		goto fail;
	if (cc->tcp != NULL) {
		if ((api.tls.ctx = tls_ctx_new(cc, err, errlen)) == NULL ||
		    (api.tls.http = tls_listen(cc->tcp, &api.tls.bound, err,
		    errlen)) == NULL ||
		    (api.tls.addr = strdup(cc->tcp)) == NULL) {
			if (api.tls.http != NULL)
				snprintf(err, errlen, "out of memory");
			goto fail;
		}
		tcpadmit_bind(&api.ta, api.tls.bound);
	}
	px_log(PX_INFO, "control API on %s%s%s", api.un.path,
	    cc->tcp ? " and TLS " : "", cc->tcp ? cc->tcp : "");
	return 0;
fail:
	api_stop();
	return -1;
}

int
api_reload(const struct cfg *c)
{
	const struct cfg_control *cc = &c->control;
	struct api_acl acl;
	struct api_unix nu;
	struct evhttp *nt = NULL;
	struct evhttp_bound_socket *nbound = NULL;
	SSL_CTX *ctx = NULL;
	char err[512], canon[PATH_MAX], *addr = NULL;
	gid_t gid;
	int newsock;

	memset(&nu, 0, sizeof(nu));
	if (api.base == NULL)
		return -1;
	/* everything that can fail, before anything changes */
	if (acl_build(cc, &acl, err, sizeof(err)) != 0)
		goto fail_log;
	if (group_lookup(cc->socket_group, &gid, err, sizeof(err)) != 0)
		goto fail;
	if (cc->tcp != NULL && (ctx = tls_ctx_new(cc, err, sizeof(err))) ==
	    NULL)
		goto fail;
	if (cc->tcp != NULL && (api.tls.addr == NULL ||
	    strcmp(api.tls.addr, cc->tcp) != 0)) {
		if ((addr = strdup(cc->tcp)) == NULL) {
			snprintf(err, sizeof(err), "out of memory");
			goto fail;
		}
		if ((nt = tls_listen(cc->tcp, &nbound, err, sizeof(err))) ==
		    NULL)
			goto fail;
	}
	newsock = usock_canon(cc->socket, canon, sizeof(canon), NULL, 0) != 0 ||
	    strcmp(api.un.path, canon) != 0;
	if (newsock && unix_listen(cc, &nu, err, sizeof(err)) != 0)
		goto fail;

	acl_free(&api.acl);
	api.acl = acl;
	api.max_body = cc->max_body;
	conn_limits(c);
	if (newsock) {
		unix_close(&api.un);
		api.un = nu;
	} else {
		if (usock_perms(api.un.path, &api.un.sock,
		    (mode_t)cc->socket_mode, gid, err, sizeof(err)) != 0)
			px_log(PX_ERR, "%s: control socket: %s", __func__, err);
		api.un.mode = cc->socket_mode;
		free(api.un.group);
		api.un.group = cc->socket_group ? strdup(cc->socket_group) :
		    NULL;
		evhttp_set_max_body_size(api.un.http,
		    (ev_ssize_t)api.max_body);
	}
	if (cc->tcp == NULL) {
		tls_close(&api.tls);
	} else {
		if (nt != NULL) {
			if (api.tls.http != NULL)
				evhttp_free(api.tls.http);
			free(api.tls.addr);
			api.tls.http = nt;
			api.tls.bound = nbound;
			api.tls.addr = addr;
			tcpadmit_bind(&api.ta, nbound);
		}
		if (api.tls.ctx != NULL)
			SSL_CTX_free(api.tls.ctx);   /* live SSLs hold a ref */
		api.tls.ctx = ctx;
		evhttp_set_max_body_size(api.tls.http,
		    (ev_ssize_t)api.max_body);
	}
	return 0;
fail:
	acl_free(&acl);
fail_log:
	if (nt != NULL)
		evhttp_free(nt);
	if (ctx != NULL)
		SSL_CTX_free(ctx);
	free(addr);
	px_log(PX_ERR, "%s: keeping the running control API: %s", __func__,
	    err);
	return -1;
}

void
api_stop(void)
{
	/* the changes not saved yet saved now, and their replies sent,
	 * before the listeners go */
	if (api.base != NULL) {
		(void)ctl_state_flush(NULL);
		api_saved(0, "sluiced is stopping");
	}
	ctl_state_hook(NULL);
	apireply_set_sink(NULL);
	unix_close(&api.un);
	tls_close(&api.tls);
	tcpadmit_stop(&api.ta, conn_forget);
	acl_free(&api.acl);
	api.base = NULL;
}
