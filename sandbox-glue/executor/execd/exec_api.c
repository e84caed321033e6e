/*
 * exec_api.c: the executor API (DESIGN.md, "Executor API") on
 * <runtime_dir>/exec.sock and, optionally, on TCP with TLS.
 *
 * A request goes: who is calling (SO_PEERCRED on the Unix socket: root
 * is admin, then the roles' uid lists, then their group lists, by
 * proxy/lib/roles.c as sluiced does; a bearer token on TLS,
 * whose SHA-256 is compared with every configured one in constant
 * time), which route (404, or 405 with Allow), may this role call it
 * (403), the query and the body (400, 413), then the handler.  A token
 * bound to a tenant sees and makes only that tenant's sandboxes: another
 * tenant's id is answered as a missing one (404).
 *
 * Handlers that wait for a worker or a command keep their request in
 * xd->calls until they answer; evhttp keeps such a request alive (a
 * client that left only makes the answer go nowhere).  A streamed exec
 * watches its connection's output buffer: above stream_watermark the
 * command's pipes are no longer read, until the buffer has drained.
 *
 * Roles: auditor may read health, sandboxes and command status; app
 * may also make, change and delete sandboxes, run commands, read their
 * output and use the files; admin may do everything.
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdarg.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "proxy/lib/httpauth.h"
#include "proxy/lib/roles.h"
#include "proxy/lib/usock.h"
#include "proxy/lib/util.h"
#include "proxy/lib/apireply.h"
#include "proxy/lib/apitls.h"
#include "sandbox-glue/executor/execd/execd-int.h"

#define HEADERS_MAX	(64 * 1024)
#define HTTP_TIMEOUT_S	60
#define LIST_MAX	10000

enum body_kind { B_NONE, B_JSON, B_JSON_OPT, B_RAW };

struct xd_call;
typedef void (*handler_fn)(struct xd_call *k);

struct route {
	enum evhttp_cmd_type method;
	const char *mname;
	const char *pattern;
	enum xd_role role;
	enum body_kind body;
	const char *query;      /* allowed query keys, ",a,b," */
	handler_fn fn;
};

struct xd_call {
	TAILQ_ENTRY(xd_call) link;
	struct xd *xd;
	struct evhttp_request *req;
	const struct route *route;
	enum xd_role role;
	char who[96];
	char tenant[SBX_ID_MAX + 1];    /* bound by the token, "" none */
	char *arg[XD_ARGS_MAX];
	struct evkeyvalq query;
	int have_query;
	json_t *body;
	struct xd_box *box;
	/* exec */
	struct xd_cmd *cmd;
	int sse;
	struct evhttp_connection *evcon;        /* closecb set on it */
	unsigned char carry[2][4];
	size_t ncarry[2];
	int gone;                       /* the streaming client left */
	int pending;
	/* install: the command, kept while sluiced is asked for the tier */
	int install;
	struct xd_cmd_spec ispec;
	char manager[8];
	/* events: a subscriber */
	struct xd_sub sub;
	/* a file GET, sent from its descriptor as the client reads */
	int file_fd;
	uint64_t file_off, file_left;
	struct event *file_ev;          /* the pump's tick */
	struct xd_share file_share;     /* of reply_total_bytes */
	int file_ending;
	/* an exec's answer, sent by the same pump (file_fd -1): its JSON
	 * text made a piece at a time from the command's kept output, so
	 * that neither its escaped text (up to 6 bytes a byte) nor more
	 * than the pump queues is ever in memory (ans_fill) */
	struct xd_cmd *ans_cmd;
	char *ans_text[3];              /* head, between, tail */
	size_t ans_raw[2];              /* stdout, stderr bytes sent */
	int ans_part;                   /* 0..4: text, out, text, err, text */
	size_t ans_pos;
};

static void h_health(struct xd_call *k);
static void h_healthz(struct xd_call *k);
static void h_list(struct xd_call *k);
static void h_create(struct xd_call *k);
static void h_get(struct xd_call *k);
static void h_patch(struct xd_call *k);
static void h_delete(struct xd_call *k);
static void h_exec(struct xd_call *k);
static void h_cmd_start(struct xd_call *k);
static void h_cmd_list(struct xd_call *k);
static void h_cmd_get(struct xd_call *k);
static void h_cmd_output(struct xd_call *k);
static void h_cmd_stop(struct xd_call *k);
static void h_cancel(struct xd_call *k);
static void h_files_list(struct xd_call *k);
static void h_file_get(struct xd_call *k);
static void h_file_put(struct xd_call *k);
static void h_file_delete(struct xd_call *k);
static void h_edit(struct xd_call *k);
static void h_archive_get(struct xd_call *k);
static void h_archive_put(struct xd_call *k);
static void h_install(struct xd_call *k);
static void h_events(struct xd_call *k);
static void h_metrics(struct xd_call *k);
static void h_node_get(struct xd_call *k);
static void h_node_put(struct xd_call *k);
static void h_pty_start(struct xd_call *k);
static void h_pty_get(struct xd_call *k);
static void h_pty_delete(struct xd_call *k);
static void h_pty_ws(struct xd_call *k);
static void h_port(struct xd_call *k);

#define R(m, pat, role, body, q, fn) \
	{ EVHTTP_REQ_##m, #m, pat, XD_ROLE_##role, body, q, fn }
/* the port proxy: every method it forwards, any query (passed on) */
#define R_PORT(pat) \
	R(GET, pat, APP, B_RAW, "*", h_port), \
	R(POST, pat, APP, B_RAW, "*", h_port), \
	R(PUT, pat, APP, B_RAW, "*", h_port), \
	R(PATCH, pat, APP, B_RAW, "*", h_port), \
	R(DELETE, pat, APP, B_RAW, "*", h_port)

/* The routes, as in the OpenAPI document (sandbox-glue/executor/
 * execd/openapi.json; tests/scenario/t_execd.py checks both ways). */
static const struct route routes[] = {
	/* a load balancer's probe: no role, no token (issue 24 point 8) */
	R(GET, "/healthz", NONE, B_NONE, ",", h_healthz),
	R(GET, "/v1/health", AUDITOR, B_NONE, ",", h_health),
	R(GET, "/v1/metrics", AUDITOR, B_NONE, ",", h_metrics),
	R(GET, "/v1/events", AUDITOR, B_NONE, ",", h_events),
	/* the node: placement and drain (exec_node.c) */
	R(GET, "/v1/node", AUDITOR, B_NONE, ",", h_node_get),
	R(PUT, "/v1/node", ADMIN, B_JSON, ",", h_node_put),
	R(GET, "/v1/sandboxes", AUDITOR, B_NONE, ",tenant,user,", h_list),
	R(POST, "/v1/sandboxes", APP, B_JSON, ",", h_create),
	R(GET, "/v1/sandboxes/{id}", AUDITOR, B_NONE, ",tenant,", h_get),
	R(PATCH, "/v1/sandboxes/{id}", APP, B_JSON, ",tenant,", h_patch),
	R(DELETE, "/v1/sandboxes/{id}", APP, B_NONE, ",archive,tenant,",
	    h_delete),
	R(POST, "/v1/sandboxes/{id}/exec", APP, B_JSON, ",tenant,", h_exec),
	R(POST, "/v1/sandboxes/{id}/commands", APP, B_JSON, ",tenant,",
	    h_cmd_start),
	R(GET, "/v1/sandboxes/{id}/commands", AUDITOR, B_NONE, ",tenant,",
	    h_cmd_list),
	R(GET, "/v1/sandboxes/{id}/commands/{cid}", AUDITOR, B_NONE,
	    ",tenant,", h_cmd_get),
	R(GET, "/v1/sandboxes/{id}/commands/{cid}/output", APP, B_NONE,
	    ",offset,stdout_offset,stderr_offset,encoding,tenant,",
	    h_cmd_output),
	R(POST, "/v1/sandboxes/{id}/commands/{cid}/stop", APP, B_NONE,
	    ",tenant,", h_cmd_stop),
	R(POST, "/v1/sandboxes/{id}/cancel", APP, B_JSON_OPT, ",tenant,",
	    h_cancel),
	R(GET, "/v1/sandboxes/{id}/files", APP, B_NONE,
	    ",path,glob,recursive,tenant,", h_files_list),
	R(GET, "/v1/sandboxes/{id}/files/{path}", APP, B_NONE, ",tenant,",
	    h_file_get),
	R(PUT, "/v1/sandboxes/{id}/files/{path}", APP, B_RAW, ",tenant,",
	    h_file_put),
	R(DELETE, "/v1/sandboxes/{id}/files/{path}", APP, B_NONE, ",tenant,",
	    h_file_delete),
	R(POST, "/v1/sandboxes/{id}/edit", APP, B_JSON, ",tenant,", h_edit),
	/* batch files: a directory as a tar (exec_tar.c) */
	R(GET, "/v1/sandboxes/{id}/archive", APP, B_NONE, ",path,tenant,",
	    h_archive_get),
	R(PUT, "/v1/sandboxes/{id}/archive", APP, B_RAW, ",path,tenant,",
	    h_archive_put),
	R(POST, "/v1/sandboxes/{id}/install", APP, B_JSON, ",tenant,",
	    h_install),
	/* terminals (exec_pty.c): a session is a command on a pty */
	R(POST, "/v1/sandboxes/{id}/pty", APP, B_JSON_OPT, ",tenant,",
	    h_pty_start),
	R(GET, "/v1/sandboxes/{id}/pty/{sid}", APP, B_NONE, ",tenant,",
	    h_pty_get),
	R(DELETE, "/v1/sandboxes/{id}/pty/{sid}", APP, B_NONE, ",tenant,",
	    h_pty_delete),
	R(GET, "/v1/sandboxes/{id}/pty/{sid}/ws", APP, B_NONE,
	    ",since,takeover,tenant,", h_pty_ws),
	/* ports: 127.0.0.1:{port} inside (exec_os_port.c) */
	R_PORT("/v1/sandboxes/{id}/ports/{port}"),
	R_PORT("/v1/sandboxes/{id}/ports/{port}/"),
	R_PORT("/v1/sandboxes/{id}/ports/{port}/{path}"),
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))



void
xd_api_print_routes(void)
{
	size_t i;

	for (i = 0; i < NROUTES; i++)
		printf("%s %s\n", routes[i].mname, routes[i].pattern);
}

int
xd_api_pending(const struct xd *xd)
{
	return !TAILQ_EMPTY(&xd->calls);
}

/* ---- calls ---- */

static void
call_free(struct xd_call *k)
{
	if (k->file_ev != NULL)
		event_free(k->file_ev);
	if (k->file_fd >= 0)
		close(k->file_fd);
	if (k->ans_cmd != NULL)
		xd_cmd_free(k->ans_cmd);
	free(k->ans_text[0]);
	free(k->ans_text[1]);
	free(k->ans_text[2]);
	k->xd->reply_queued -= k->file_share.queued;
	if (k->pending)
		TAILQ_REMOVE(&k->xd->calls, k, link);
	if (k->evcon != NULL)
		evhttp_connection_set_closecb(k->evcon, NULL, NULL);
	if (k->have_query)
		evhttp_clear_headers(&k->query);
	xd_args_free(k->arg, XD_ARGS_MAX);
	xd_cmd_spec_free(&k->ispec);
	json_decref(k->body);
	if (k->box != NULL)
		xd_box_unref(k->box);
	free(k);
}

/* The handler answers later: keep the call. */
static void
call_wait(struct xd_call *k)
{
	k->pending = 1;
	TAILQ_INSERT_TAIL(&k->xd->calls, k, link);
}

static void
reply_json(struct xd_call *k, int status, json_t *j)
{
	apireply_json(k->req, status, j);
	call_free(k);
}

static void
reply_perr(struct xd_call *k, struct xd_perr *e)
{
	xd_reply_perr(k->req, e);
	xd_perr_clear(e);
	call_free(k);
}

static void reply_err(struct xd_call *k, int status, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
reply_err(struct xd_call *k, int status, const char *code, const char *fmt,
    ...)
{
	struct xd_perr e;
	va_list ap;

	memset(&e, 0, sizeof(e));
	e.status = status;
	e.code = code;
	va_start(ap, fmt);
	vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
	va_end(ap);
	reply_perr(k, &e);
}

static const char *
q(struct xd_call *k, const char *key)
{
	return k->have_query ? evhttp_find_header(&k->query, key) : NULL;
}

/* A yes/no query parameter (1, true, 0, false; none: no) into *v: 0, or
 * -1 when it is something else, answered 400 with what. */
static int
q_bool(struct xd_call *k, const char *key, const char *what, int *v)
{
	if (xd_q_bool(q(k, key), v) != 0) {
		reply_err(k, 400, "bad_request", "%s", what);
		return -1;
	}
	return 0;
}

/* Whether b is of another tenant than the caller's token (one bound
 * to none sees every tenant's). */
static int
foreign(const struct xd_call *k, const struct xd_box *b)
{
	return k->tenant[0] && strcmp(b->rec.tenant, k->tenant) != 0;
}

/* The box of {id}, visible to this caller; else answered 404.  Another
 * tenant's sandbox is answered exactly as a missing one: a 403 told a
 * tenant which ids other tenants use (issue 20). */
/* The tenant whose {id} a call means: its token's; for a caller bound
 * to none ?tenant=, else NULL (any: ids are per tenant, so an id that
 * several tenants hold needs ?tenant=).  *other: ?tenant= names another
 * tenant than the token's. */
static const char *
call_tenant(struct xd_call *k, int *other)
{
	const char *t = q(k, "tenant");

	*other = k->tenant[0] && t != NULL && strcmp(t, k->tenant) != 0;
	return k->tenant[0] ? k->tenant : t;
}

/* The box of {id} for this caller, NULL none (nothing answered). */
static struct xd_box *
box_lookup(struct xd_call *k, int *n)
{
	int other;
	const char *t = call_tenant(k, &other);
	struct xd_box *b;

	*n = 0;
	if (other)
		return NULL;
	b = xd_box_find(k->xd, t, k->arg[0], n);
	return b != NULL && b->state != XD_BOX_GONE && !foreign(k, b) ? b :
	    NULL;
}

static struct xd_box *
box_of(struct xd_call *k)
{
	int n;
	struct xd_box *b = box_lookup(k, &n);

	if (n > 1) {
		/* one bound to no tenant, an id of several tenants */
		struct xd_perr e;

		memset(&e, 0, sizeof(e));
		e.status = 400;
		e.code = "bad_request";
		e.extra = json_pack("{s:s,s:i}", "reason", "ambiguous",
		    "tenants", n);
		snprintf(e.msg, sizeof(e.msg), "sandbox %s: %d tenants have a "
		    "sandbox of this id: name one with ?tenant=", k->arg[0],
		    n);
		reply_perr(k, &e);
		return NULL;
	}
	if (b == NULL) {
		reply_err(k, 404, "not_found", "no sandbox %s", k->arg[0]);
		return NULL;
	}
	k->box = b;
	b->refs++;
	return b;
}

/* The box of {id} for a call that changes its workspace (files, edit):
 * refused (409) unless it is running and no worker holds it.  A delete
 * archives the workspace, then removes it, in a worker: nothing may
 * move under it meanwhile.  (A suspended one was resumed by call_uses;
 * commands are refused the same way by xd_cmd_start.) */
static struct xd_box *
box_for_change(struct xd_call *k)
{
	struct xd_box *b = box_of(k);

	if (b != NULL && (b->state != XD_BOX_RUNNING || b->op)) {
		reply_err(k, 409, "conflict", "sandbox %s is being created, "
		    "changed or deleted, or is stopped: its workspace takes "
		    "no change now", k->arg[0]);
		return NULL;
	}
	return b;
}

/* The audit record of a lifecycle call: b the sandbox (NULL: what the
 * body named), e the refusal (NULL: done). */
static void
audit_call(struct xd_call *k, const char *action, const struct xd_box *b,
    int status, const struct xd_perr *e)
{
	const char *id = k->arg[0], *tenant = "", *user = "";

	if (b != NULL) {
		id = XD_REC_ID(&b->rec);
		tenant = b->rec.tenant;
		user = b->rec.user;
	} else if (k->body != NULL) {
		const char *s;

		if (id == NULL && (s = json_string_value(json_object_get(
		    k->body, "id"))) != NULL)
			id = s;
		if ((s = json_string_value(json_object_get(k->body,
		    "tenant"))) != NULL)
			tenant = s;
		if ((s = json_string_value(json_object_get(k->body, "user")))
		    != NULL)
			user = s;
	}
	if (b == NULL && k->box != NULL) {
		tenant = k->box->rec.tenant;
		user = k->box->rec.user;
	}
	/* a made sandbox names its root: profile and image digest */
	xd_audit_box(k->xd, action, k->who, xd_role_name(k->role),
	    id != NULL ? id : "", tenant, user, e != NULL ? e->status : status,
	    e != NULL ? e->code : NULL, e != NULL ? json_pack("{s:s}",
	    "message", e->msg) : b != NULL && strcmp(action, "create") == 0 ?
	    json_pack("{s:s,s:s?}", "profile", b->rec.profile[0] ?
	    b->rec.profile : SBX_PROFILE_HOST, "image", b->rec.image[0] ?
	    b->rec.image : NULL) : NULL);
}

/* An operation that failed: audited, then answered with e. */
static void
fail_call(struct xd_call *k, const char *action, struct xd_perr *e)
{
	audit_call(k, action, NULL, 0, e);
	reply_perr(k, e);
}

/* A change to b that was done, with what its audit record adds. */
static void
audit_done(struct xd_call *k, const char *action, const struct xd_box *b,
    int status, json_t *extra)
{
	xd_audit_box(k->xd, action, k->who, xd_role_name(k->role),
	    XD_REC_ID(&b->rec), b->rec.tenant, b->rec.user, status, NULL,
	    extra);
}

/* ---- sandboxes ---- */

static void
health_cb(void *arg, json_t *h)
{
	struct xd_call *k = arg;

	reply_json(k, 200, h);
}

static void
h_health(struct xd_call *k)
{
	call_wait(k);
	if (xd_health(k->xd, health_cb, k) != 0)
		/* no worker: answer without the broker's state */
		health_cb(k, xd_health_json(k->xd, NULL, 0, "cannot start a worker"));
}

/*
 * GET /healthz: whether a sandbox can be made now, for a load balancer,
 * which has no token: so it says no more than {ok, image_ready}.  ok:
 * the default backend works, sluiced answers, the default profile's
 * image is built and the daemon is not draining (SIGTERM's drain or
 * PUT /v1/node's); 200 then, else 503.
 * What a probe costs (a worker that forks the backends' probes) is
 * paid at most once a second: callers without a token may ask as often
 * as they like.  Once there is an answer every call is answered from it
 * at once, and one older than HEALTHZ_CACHE_MS starts a probe in the
 * background for the calls after (so no caller waits for a probe but
 * the first: a balancer's check stays under a millisecond however many
 * sandboxes the probe walks).
 */
#define HEALTHZ_CACHE_MS	1000

static int hz_ok = -1, hz_image, hz_probing;
static int64_t hz_at;
/* a reload forgets the answer: a probe begun before it is not kept */
static unsigned hz_gen, hz_probe_gen;

static void
healthz_reply(struct xd_call *k)
{
	int ok = hz_ok == 1 && hz_image && !k->xd->draining &&
	    !k->xd->node_draining;

	reply_json(k, ok ? 200 : 503, json_pack("{s:b,s:b}", "ok", ok,
	    "image_ready", hz_image));
}

/* A probe's answer kept (h consumed). */
static void
healthz_keep(struct xd *xd, json_t *h)
{
	const char *prof = xd->cfg->profile;
	json_t *n;
	size_t i;

	hz_probing = 0;
	if (hz_probe_gen != hz_gen) {
		json_decref(h);
		return;
	}
	/* "profiles" lists host and each profile whose image is present */
	hz_image = strcmp(prof, SBX_PROFILE_HOST) == 0;
	json_array_foreach(json_object_get(h, "profiles"), i, n)
		if (json_is_string(n) && strcmp(json_string_value(n), prof) ==
		    0)
			hz_image = 1;
	hz_ok = json_is_true(json_object_get(h, "ok"));
	hz_at = util_now_ms();
	json_decref(h);
}

static void
healthz_cb(void *arg, json_t *h)
{
	struct xd_call *k = arg;

	healthz_keep(k->xd, h);
	healthz_reply(k);
}

static void
healthz_bg_cb(void *arg, json_t *h)
{
	healthz_keep(arg, h);
}

static void
h_healthz(struct xd_call *k)
{
	if (hz_ok >= 0) {
		if (util_now_ms() - hz_at >= HEALTHZ_CACHE_MS && !hz_probing) {
			hz_probe_gen = hz_gen;
			if (xd_health(k->xd, healthz_bg_cb, k->xd) == 0)
				hz_probing = 1;
		}
		healthz_reply(k);
		return;
	}
	call_wait(k);
	hz_probe_gen = hz_gen;
	if (xd_health(k->xd, healthz_cb, k) != 0)
		healthz_cb(k, xd_health_json(k->xd, NULL, 0, "cannot start a "
		    "worker"));
}

static void
h_list(struct xd_call *k)
{
	const char *tenant = q(k, "tenant"), *user = q(k, "user");
	json_t *a = json_array();
	struct xd_box *b;

	if (k->tenant[0]) {
		if (tenant != NULL && strcmp(tenant, k->tenant) != 0) {
			json_decref(a);
			reply_err(k, 403, "forbidden", "this token sees tenant "
			    "%s only", k->tenant);
			return;
		}
		tenant = k->tenant;
	}
	TAILQ_FOREACH(b, &k->xd->boxes, link) {
		if (tenant != NULL && strcmp(b->rec.tenant, tenant) != 0)
			continue;
		if (user != NULL && strcmp(b->rec.user, user) != 0)
			continue;
		json_array_append_new(a, xd_box_json(b));
	}
	reply_json(k, 200, json_pack("{s:o}", "sandboxes", a));
}

static void
create_cb(void *arg, struct xd_box *b, struct xd_perr *e)
{
	struct xd_call *k = arg;

	if (b == NULL) {
		fail_call(k, "create", e);
		return;
	}
	if (b->restored != NULL)
		audit_done(k, "create", b, 201, json_pack("{s:O}",
		    "restored_from", b->restored));
	else
		audit_call(k, "create", b, 201, NULL);
	reply_json(k, 201, xd_box_json(b));
}

static void
h_create(struct xd_call *k)
{
	const struct xd_cfg *c = k->xd->cfg;
	struct xd_create_spec s;
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if (xd_create_parse(k->body, &c->def, &c->max, c->tier, c->backend, &s,
	    &e) != 0) {
		reply_perr(k, &e);
		return;
	}
	if (k->tenant[0]) {
		if (s.tenant[0] && strcmp(s.tenant, k->tenant) != 0) {
			reply_err(k, 403, "forbidden", "this token creates "
			    "sandboxes of tenant %s only", k->tenant);
			return;
		}
		snprintf(s.tenant, sizeof(s.tenant), "%s", k->tenant);
		s.bound = 1;
	}
	if (k->xd->draining) {
		reply_err(k, 503, "backend_unavailable", "the executor is "
		    "shutting down");
		return;
	}
	call_wait(k);
	if (xd_box_create(k->xd, &s, create_cb, k, &e) != 0)
		fail_call(k, "create", &e);
}

static void
get_net_cb(void *arg, struct xd_box *b, struct xd_perr *e)
{
	struct xd_call *k = arg;

	/* sluiced unreachable or refusing: the record still answers, its
	 * network says so */
	(void)b;
	if (e != NULL)
		xd_perr_clear(e);
	reply_json(k, 200, xd_box_json(k->box));
}

/* The sandbox with its network as sluiced has it now: a session that
 * vanished (sluiced restarted, or it was deleted) is made again here. */
static void
h_get(struct xd_call *k)
{
	struct xd_box *b = box_of(k);
	struct xd_perr e;

	if (b == NULL)
		return;
	memset(&e, 0, sizeof(e));
	if (b->state != XD_BOX_RUNNING) {
		reply_json(k, 200, xd_box_json(b));
		return;
	}
	call_wait(k);
	if (xd_box_network(b, get_net_cb, k, &e) != 0) {
		xd_perr_clear(&e);
		reply_json(k, 200, xd_box_json(b));
	}
}

static void
box_cb(void *arg, struct xd_box *b, struct xd_perr *e)
{
	struct xd_call *k = arg;

	if (b == NULL) {
		fail_call(k, "tier", e);
		return;
	}
	audit_done(k, "tier", b, 200, json_pack("{s:s}", "tier",
	    b->rec.tier));
	reply_json(k, 200, xd_box_json(b));
}

static void
h_patch(struct xd_call *k)
{
	static const char *const keys[] = { "network", NULL };
	struct xd_box *b = box_of(k);
	struct xd_perr e;
	char tier[16];
	json_t *net;
	const char *key;
	json_t *v;

	if (b == NULL)
		return;
	memset(&e, 0, sizeof(e));
	json_object_foreach(k->body, key, v)
		if (strcmp(key, keys[0]) != 0) {
			reply_err(k, 400, "bad_request", "PATCH takes "
			    "{\"network\":{\"tier\"}} only");
			return;
		}
	net = json_object_get(k->body, "network");
	if (net == NULL || xd_tier_parse(net, tier, sizeof(tier), &e) != 0) {
		if (e.status == 0)
			reply_err(k, 400, "bad_request", "network.tier is "
			    "required");
		else
			reply_perr(k, &e);
		return;
	}
	call_wait(k);
	if (xd_box_set_tier(b, tier, box_cb, k, &e) != 0)
		fail_call(k, "tier", &e);
}

static void
delete_cb(void *arg, struct xd_box *b, struct xd_perr *e)
{
	struct xd_call *k = arg;

	if (b == NULL) {
		fail_call(k, "delete", e);
		return;
	}
	audit_done(k, "delete", b, 200, json_pack("{s:s,s:o}", "broker",
	    b->broker, "archive", b->del_archive ? json_incref(b->archived) :
	    json_string("discarded")));
	reply_json(k, 200, json_pack("{s:s,s:b,s:s,s:o}", "id", XD_REC_ID(&b->rec),
	    "deleted", 1, "broker", b->broker, "archive", b->del_archive ?
	    json_incref(b->archived) : json_string("discarded")));
}

/* With an S3 store, in a worker: the archive of the id found in the
 * store (the caller's tenant, ?tenant=, or the one tenant with an
 * archive of the id) and removed, as discard_gone does in archive_dir:
 * {status, code, message, extra} or {status 200, tenant, user}. */
static json_t *
discard_store_child(void *arg)
{
	struct xd_call *k = arg;
	const struct xd_cfg *c = k->xd->cfg;
	char ak[SBX_ID_MAX + 1], err[XD_ERR_MAX];
	const char *t, *mt, *mu;
	json_t *m = NULL, *list, *a, *res;
	size_t i;
	int bad, rc, n = 0;

	t = call_tenant(k, &bad);
	xd_key(t != NULL && !bad ? t : "", k->arg[0], ak);
	if (t == NULL) {
		if ((list = xd_arch_store_list(c, err, sizeof(err))) == NULL)
			goto store;
		json_array_foreach(list, i, a)
			if (json_is_string(json_object_get(a, "id")) &&
			    strcmp(json_string_value(json_object_get(a, "id")),
			    k->arg[0]) == 0 && n++ == 0)
				snprintf(ak, sizeof(ak), "%s", json_string_value(
				    json_object_get(a, "key")));
		json_decref(list);
		if (n > 1)
			return json_pack("{s:i,s:s,s:s,s:{s:s,s:i}}", "status",
			    400, "code", "bad_request", "message", "several "
			    "tenants have an archive of this id in the store: "
			    "name one with ?tenant=", "extra", "reason",
			    "ambiguous", "tenants", n);
	}
	if ((m = xd_arch_store_meta(c, ak, &rc, err, sizeof(err))) == NULL &&
	    rc < 0 && strstr(err, "does not read") == NULL)
		goto store;
	mt = m != NULL ? json_string_value(json_object_get(m, "tenant")) : "";
	mu = m != NULL ? json_string_value(json_object_get(m, "user")) : "";
	/* another tenant's archive: as if there were none; unreadable
	 * metadata: only a caller bound to no tenant drops it */
	if ((m == NULL && (rc == 1 || k->tenant[0])) || (m != NULL &&
	    k->tenant[0] && strcmp(mt, k->tenant) != 0)) {
		json_decref(m);
		return json_pack("{s:i,s:s,s:s}", "status", 404, "code",
		    "not_found", "message", "no sandbox and no archive of it");
	}
	if (xd_arch_drop(c, ak, NULL, err, sizeof(err)) != 0) {
		json_decref(m);
		goto store;
	}
	res = json_pack("{s:i,s:s,s:s}", "status", 200, "tenant", mt ? mt :
	    "", "user", mu ? mu : "");
	json_decref(m);
	return res;
store:
	return json_pack("{s:i,s:s,s:s,s:{s:s}}", "status", 503, "code",
	    "backend_unavailable", "message", err, "extra", "reason",
	    "archive_store");
}

static void
discard_store_done(void *arg, json_t *res)
{
	struct xd_call *k = arg;
	json_int_t st = json_integer_value(json_object_get(res, "status"));
	struct xd_perr e;

	if (st == 200) {
		xd_audit_box(k->xd, "discard", k->who, xd_role_name(k->role),
		    k->arg[0], json_string_value(json_object_get(res,
		    "tenant")), json_string_value(json_object_get(res, "user")),
		    200, NULL, NULL);
		reply_json(k, 200, json_pack("{s:s,s:b,s:s}", "id", k->arg[0],
		    "deleted", 0, "archive", "discarded"));
	} else {
		memset(&e, 0, sizeof(e));
		e.status = st >= 400 && st < 600 ? (int)st : 500;
		e.code = st == 404 ? "not_found" : st == 400 ? "bad_request" :
		    st == 503 ? "backend_unavailable" : "internal";
		snprintf(e.msg, sizeof(e.msg), "archive %s: %s", k->arg[0],
		    res != NULL && json_is_string(json_object_get(res,
		    "message")) ? json_string_value(json_object_get(res,
		    "message")) : "the worker died");
		if (json_is_object(json_object_get(res, "extra")))
			e.extra = json_incref(json_object_get(res, "extra"));
		reply_perr(k, &e);
	}
	json_decref(res);
}

/* DELETE ?archive=discard of a sandbox that is gone: its archive goes
 * (seed 001's "Clear"); 404 when there is none either. */
static void
discard_gone(struct xd_call *k)
{
	struct xd_perr e;
	json_t *m;
	const char *t;
	int bad;
	char ak[SBX_ID_MAX + 1];

	/* the archive of the id in the caller's tenant (one bound to none:
	 * of ?tenant=, else the one tenant with an archive of the id, as a
	 * sandbox's id is looked up; none: the sandboxes without a tenant) */
	/* the store's archive, asked in a worker */
	if (k->xd->cfg->s3.url[0] != '\0') {
		char err[XD_ERR_MAX];

		call_wait(k);
		if (xd_job_run(k->xd, "discard", discard_store_child, k,
		    discard_store_done, k, err, sizeof(err)) != 0)
			reply_err(k, 503, "backend_unavailable", "%s", err);
		return;
	}
	t = call_tenant(k, &bad);
	xd_key(t != NULL && !bad ? t : "", k->arg[0], ak);
	if (t == NULL) {
		json_t *list = xd_arch_list(k->xd->cfg), *a;
		size_t i;
		int n = 0;

		json_array_foreach(list, i, a)
			if (json_is_string(json_object_get(a, "key")) &&
			    strcmp(json_string_value(json_object_get(a, "id")),
			    k->arg[0]) == 0 && n++ == 0)
				snprintf(ak, sizeof(ak), "%s", json_string_value(
				    json_object_get(a, "key")));
		json_decref(list);
		if (n > 1) {
			memset(&e, 0, sizeof(e));
			e.status = 400;
			e.code = "bad_request";
			e.extra = json_pack("{s:s,s:i}", "reason", "ambiguous",
			    "tenants", n);
			snprintf(e.msg, sizeof(e.msg), "archive %s: %d tenants "
			    "have an archive of this id: name one with "
			    "?tenant=", k->arg[0], n);
			reply_perr(k, &e);
			return;
		}
	}
	/* the archive's owner as create checks it (the user aside: DELETE
	 * checks the tenant only) */
	memset(&e, 0, sizeof(e));
	if (xd_box_arch_owner(k->xd->cfg, ak, k->tenant, NULL,
	    k->tenant[0] != '\0', &m, &bad, &e) != 0) {
		/* another tenant's archive: as if there were none (DELETE
		 * checks no user, so 403 is only that) */
		if (e.status != 403) {
			reply_perr(k, &e);
			return;
		}
		xd_perr_clear(&e);
		m = NULL;
		bad = 0;
	}
	if (m == NULL && !bad) {
		reply_err(k, 404, "not_found", "no sandbox %s and no archive "
		    "of it", k->arg[0]);
		return;
	}
	t = m != NULL ? json_string_value(json_object_get(m, "tenant")) : "";
	xd_arch_discard(k->xd->cfg, ak);
	xd_audit_box(k->xd, "discard", k->who, xd_role_name(k->role),
	    k->arg[0], t != NULL ? t : "", m != NULL ? json_string_value(
	    json_object_get(m, "user")) : "", 200, NULL, NULL);
	json_decref(m);
	reply_json(k, 200, json_pack("{s:s,s:b,s:s}", "id", k->arg[0],
	    "deleted", 0, "archive", "discarded"));
}

static void
h_delete(struct xd_call *k)
{
	const char *ar = q(k, "archive");
	struct xd_box *b;
	struct xd_perr e;
	int n;

	if (ar != NULL && strcmp(ar, "discard") != 0 && strcmp(ar, "keep") !=
	    0) {
		reply_err(k, 400, "bad_request", "archive: keep or discard");
		return;
	}
	if (ar != NULL && strcmp(ar, "discard") == 0 && (b = box_lookup(k,
	    &n)) == NULL && n <= 1) {
		discard_gone(k);
		return;
	}
	if ((b = box_of(k)) == NULL)
		return;
	memset(&e, 0, sizeof(e));
	call_wait(k);
	if (xd_box_delete(b, ar == NULL || strcmp(ar, "keep") == 0, "delete",
	    delete_cb, k, &e) != 0)
		fail_call(k, "delete", &e);
}

/* ---- commands ---- */

static int
spec_of(struct xd_call *k, int background, struct xd_cmd_spec *s)
{
	const struct xd_cfg *c = k->xd->cfg;
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if (xd_cmd_spec_parse(k->body, &k->box->lim, c->max.timeout_s,
	    c->max.output_cap, background, s, &e) != 0) {
		reply_perr(k, &e);
		return -1;
	}
	return 0;
}

/* Server-Sent Events: one "event:" and one "data:" line (JSON, so no
 * newline of the output breaks the frame). */
static void
sse_send(struct xd_call *k, const char *event, json_t *data)
{
	xd_stream_json(k->req, event, data, NULL, NULL, 0);
}

static void
sse_flushed(struct evhttp_connection *evcon, void *arg)
{
	struct xd_call *k = arg;

	(void)evcon;
	if (k->cmd != NULL && k->cmd->paused && xd_stream_caught_up(k->req,
	    k->xd->cfg->stream_watermark))
		xd_cmd_pause(k->cmd, 0);
}

static void
sink_output(void *arg, struct xd_cmd *c, int stream, const unsigned char *b,
    size_t n)
{
	struct xd_call *k = arg;
	unsigned char *buf;
	size_t whole;

	if (k->gone || (buf = xd_utf8_carry(k->carry[stream],
	    &k->ncarry[stream], b, n, c->base64, &whole)) == NULL)
		return;
	/* a slow reader: stop reading the command until it has caught up */
	if (xd_stream_json(k->req, stream ? "stderr" : "stdout", json_pack(
	    "{s:o}", "data", xd_text_json(buf, whole, c->base64)), sse_flushed,
	    k, k->xd->cfg->stream_watermark))
		xd_cmd_pause(c, 1);
	free(buf);
}

static void ans_stream(struct xd_call *k, struct xd_cmd *c, json_t *r);

static void
sink_exit(void *arg, struct xd_cmd *c)
{
	struct xd_call *k = arg;
	json_t *r;
	int i;

	if (k->sse) {
		for (i = 0; i < 2; i++)
			if (k->ncarry[i] > 0) {
				/* a character the command never finished */
				json_t *d = json_pack("{s:o}", "data",
				    xd_text_json(k->carry[i], k->ncarry[i], 0));

				sse_send(k, i ? "stderr" : "stdout", d);
			}
		r = xd_cmd_result(c, 0);
		if (k->install && r != NULL) {
			json_object_set_new(r, "manager", json_string(
			    k->manager));
			json_object_set(r, "command", c->argv);
		}
		sse_send(k, "exit", r);
		if (k->evcon != NULL) {
			evhttp_connection_set_closecb(k->evcon, NULL, NULL);
			k->evcon = NULL;
		}
		evhttp_send_reply_end(k->req);
		k->cmd = NULL;
		xd_cmd_free(c);
		call_free(k);
		return;
	}
	k->cmd = NULL;
	r = xd_cmd_result(c, 0);
	if (k->install && r != NULL) {
		json_object_set_new(r, "manager", json_string(k->manager));
		json_object_set(r, "command", c->argv);
	}
	ans_stream(k, c, r);
}

static const struct xd_sink exec_sink = { sink_output, sink_exit, NULL };

static void
on_client_close(struct evhttp_connection *evcon, void *arg)
{
	struct xd_call *k = arg;

	(void)evcon;
	/* the answer goes nowhere; the command runs to its end or its
	 * deadline, and the request is freed when it is answered */
	k->evcon = NULL;
	k->gone = 1;
	if (k->cmd != NULL)
		xd_cmd_pause(k->cmd, 0);
}

static int
wants_sse(struct xd_call *k)
{
	const char *a = evhttp_find_header(evhttp_request_get_input_headers(
	    k->req), "Accept");

	return a != NULL && strstr(a, "text/event-stream") != NULL;
}

/* Who started c, for its audit record. */
static void
cmd_caller(struct xd_call *k, struct xd_cmd *c)
{
	snprintf(c->who, sizeof(c->who), "%s", k->who);
	snprintf(c->role, sizeof(c->role), "%s", xd_role_name(k->role));
	c->install = k->install;
}

/* Start s as b's foreground command answered by exec_sink (k waits
 * once started). */
static void
fg_start(struct xd_call *k, struct xd_box *b, const struct xd_cmd_spec *s)
{
	struct xd_perr e;
	struct evkeyvalq *h;

	memset(&e, 0, sizeof(e));
	k->sse = wants_sse(k);
	k->cmd = xd_cmd_start(b, s, 0, k->sse ? XD_OUT_STREAM : XD_OUT_KEEP,
	    &exec_sink, k, &e);
	if (k->cmd == NULL) {
		reply_perr(k, &e);
		return;
	}
	cmd_caller(k, k->cmd);
	if (!k->pending)
		call_wait(k);
	if (k->sse) {
		h = evhttp_request_get_output_headers(k->req);
		evhttp_add_header(h, "Content-Type", "text/event-stream");
		evhttp_add_header(h, "Cache-Control", "no-store");
		evhttp_send_reply_start(k->req, 200, "OK");
		if ((k->evcon = evhttp_request_get_connection(k->req)) != NULL)
			evhttp_connection_set_closecb(k->evcon, on_client_close,
			    k);
		sse_send(k, "start", json_pack("{s:s}", "id", k->cmd->id));
	}
}

static void
h_exec(struct xd_call *k)
{
	struct xd_cmd_spec s;
	struct xd_box *b = box_of(k);

	if (b == NULL || spec_of(k, 0, &s) != 0)
		return;
	fg_start(k, b, &s);
	xd_cmd_spec_free(&s);
}

/* sluiced said what the sandbox's network admits: a registry or not */
static void
install_net_cb(void *arg, struct xd_box *b, struct xd_perr *e)
{
	struct xd_call *k = arg;

	if (b == NULL) {
		reply_perr(k, e);
		return;
	}
	if (b->state != XD_BOX_RUNNING) {
		reply_err(k, 404, "not_found", "sandbox %s was deleted",
		    XD_REC_ID(&b->rec));
		return;
	}
	/* tiers are off < registries < public: only off admits none */
	if (strcmp(b->eff_tier, "off") == 0) {
		struct xd_perr ne;

		memset(&ne, 0, sizeof(ne));
		ne.status = 403;
		ne.code = "network_not_permitted";
		/* what the sandbox asked for and the ceiling that cut it
		 * (null: sluiced had no session to say) */
		ne.extra = json_pack("{s:s,s:s,s:s,s:o}", "effective_tier",
		    b->eff_tier, "broker", b->broker, "tier", b->rec.tier,
		    "ceiling", strcmp(b->broker, "missing") != 0 &&
		    b->ceiling[0] ? json_string(b->ceiling) : json_null());
		snprintf(ne.msg, sizeof(ne.msg), "sandbox %s: %s admits no "
		    "package registry", XD_REC_ID(&b->rec), strcmp(b->broker,
		    "missing") == 0 ? "sluiced has no session for it, so it "
		    "has no network; it" : "its effective tier \"off\"");
		audit_call(k, "install", b, 0, &ne);
		reply_perr(k, &ne);
		return;
	}
	fg_start(k, b, &k->ispec);
}

static void
h_install(struct xd_call *k)
{
	const struct xd_cfg *c = k->xd->cfg;
	struct xd_box *b = box_of(k);
	struct xd_perr e;

	if (b == NULL)
		return;
	memset(&e, 0, sizeof(e));
	if (xd_install_parse(k->body, &b->lim, c->max.timeout_s,
	    c->max.output_cap, &k->ispec, k->manager, sizeof(k->manager),
	    &e) != 0) {
		reply_perr(k, &e);
		return;
	}
	k->install = 1;
	/* busy now rather than after asking sluiced */
	if (b->fg != NULL) {
		reply_err(k, 429, "busy", "sandbox %s runs a command already",
		    XD_REC_ID(&b->rec));
		return;
	}
	call_wait(k);
	if (xd_box_network(b, install_net_cb, k, &e) != 0)
		reply_perr(k, &e);
}

static void
h_cmd_start(struct xd_call *k)
{
	struct xd_cmd_spec s;
	struct xd_perr e;
	struct xd_box *b = box_of(k);
	struct xd_cmd *c;

	if (b == NULL || spec_of(k, 1, &s) != 0)
		return;
	memset(&e, 0, sizeof(e));
	c = xd_cmd_start(b, &s, 1, XD_OUT_RING, NULL, NULL, &e);
	xd_cmd_spec_free(&s);
	if (c == NULL) {
		reply_perr(k, &e);
		return;
	}
	cmd_caller(k, c);
	reply_json(k, 202, json_pack("{s:s,s:s}", "id", c->id, "status",
	    "running"));
}

static void
h_cmd_list(struct xd_call *k)
{
	struct xd_box *b = box_of(k);
	json_t *a;
	struct xd_cmd *c;

	if (b == NULL)
		return;
	a = json_array();
	if (b->fg != NULL)
		json_array_append_new(a, xd_cmd_status(b->fg));
	TAILQ_FOREACH(c, &b->cmds, link)
		json_array_append_new(a, xd_cmd_status(c));
	reply_json(k, 200, json_pack("{s:o}", "commands", a));
}

static struct xd_cmd *
cmd_of(struct xd_call *k)
{
	struct xd_box *b = box_of(k);
	struct xd_cmd *c;

	if (b == NULL)
		return NULL;
	if ((c = xd_cmd_find(b, k->arg[1])) == NULL)
		reply_err(k, 404, "not_found", "no command %s in sandbox %s",
		    k->arg[1], k->arg[0]);
	return c;
}

/* ---- ports ---- */

static void
port_fail(void *arg, int status, const char *code, const char *msg)
{
	struct xd_call *k = arg;
	struct xd_perr e;
	char reason[40];
	size_t i;

	/* the proxy's OpenSandbox code, lower case, as the reason */
	for (i = 0; code[i] != '\0' && i < sizeof(reason) - 1; i++)
		reason[i] = (char)(code[i] >= 'A' && code[i] <= 'Z' ? code[i] -
		    'A' + 'a' : code[i]);
	reason[i] = '\0';
	memset(&e, 0, sizeof(e));
	xd_perr_set(&e, status, status == 400 || status == 405 ?
	    "bad_request" : status == 409 ? "conflict" : status == 501 ?
	    "backend_unavailable" : status == 502 ? "bad_gateway" :
	    status == 503 ? "backend_unavailable" : "internal", "%s", msg);
	e.extra = json_pack("{s:s}", "reason", reason);
	reply_perr(k, &e);
}

static void
port_done(void *arg)
{
	call_free(arg);
}

static void
port_wait(void *arg)
{
	call_wait(arg);
}

/* ANY /v1/sandboxes/{id}/ports/{port}[/...]: the path after the port
 * and the query go up as they came (not decoded). */
static void
h_port(struct xd_call *k)
{
	struct xd_box *b = box_of(k);
	const struct evhttp_uri *uri;
	const char *path, *rest;
	struct xd_port_call o;
	char *end;
	long port;
	int i;

	if (b == NULL)
		return;         /* answered: k is gone */
	uri = evhttp_request_get_evhttp_uri(k->req);
	path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	errno = 0;
	port = strtol(k->arg[1], &end, 10);
	if (errno != 0 || end == k->arg[1] || *end != '\0' || port < 1 ||
	    port > 65535 || k->arg[1][0] == '0') {
		reply_err(k, 400, "bad_request", "port: 1 to 65535");
		return;
	}
	/* the raw path past "/v1/sandboxes/{id}/ports/{port}" */
	rest = path != NULL ? path : "";
	for (i = 0; i < 5 && rest != NULL; i++)
		rest = strchr(rest + 1, '/');
	if (rest == NULL)
		rest = "";
	memset(&o, 0, sizeof(o));
	o.xd = k->xd;
	o.box = b;
	o.req = k->req;
	o.fail = port_fail;
	o.done = port_done;
	o.wait = port_wait;
	o.arg = k;
	o.drop = "Authorization";
	o.mark = "X-Sluice-Upstream";
	xd_port_proxy(&o, port, rest, uri != NULL ? evhttp_uri_get_query(uri) :
	    NULL);
}

/* ---- terminals ---- */

static int q_u64(struct xd_call *k, const char *key, uint64_t *v);

static void
h_pty_start(struct xd_call *k)
{
	struct xd_box *b = box_of(k);
	struct xd_perr e;
	struct xd_cmd *c;

	if (b == NULL)
		return;
	memset(&e, 0, sizeof(e));
	if ((c = xd_pty_start(b, k->body, &e)) == NULL) {
		reply_perr(k, &e);
		return;
	}
	cmd_caller(k, c);
	reply_json(k, 201, xd_pty_status(c));
}

static struct xd_cmd *
pty_of(struct xd_call *k)
{
	struct xd_cmd *c = cmd_of(k);

	if (c != NULL && !c->is_pty) {
		reply_err(k, 404, "not_found", "%s is a command, not a "
		    "terminal", k->arg[1]);
		return NULL;
	}
	return c;
}

static void
h_pty_get(struct xd_call *k)
{
	struct xd_cmd *c = pty_of(k);

	if (c != NULL)
		reply_json(k, 200, xd_pty_status(c));
}

static void
h_pty_delete(struct xd_call *k)
{
	struct xd_cmd *c = pty_of(k);

	if (c == NULL)
		return;
	if (c->running)
		xd_cmd_kill(c, "stop");
	reply_json(k, 200, xd_pty_status(c));
}

static void
h_pty_ws(struct xd_call *k)
{
	struct xd_cmd *c = pty_of(k);
	struct xd_perr e;
	uint64_t since = 0;
	int has_since, takeover;

	if (c == NULL)
		return;         /* answered: k is gone */
	has_since = q(k, "since") != NULL;
	if (q_u64(k, "since", &since) != 0 || q_bool(k, "takeover",
	    "takeover: 1 or 0", &takeover) != 0)
		return;
	memset(&e, 0, sizeof(e));
	if (xd_pty_attach(c, k->req, has_since, since, takeover, &e) != 0) {
		reply_perr(k, &e);
		return;
	}
	/* the connection is the terminal's now: no answer from here */
	call_free(k);
}

static void
h_cmd_get(struct xd_call *k)
{
	struct xd_cmd *c = cmd_of(k);

	if (c != NULL)
		reply_json(k, 200, xd_cmd_status(c));
}

static int
q_u64(struct xd_call *k, const char *key, uint64_t *v)
{
	if (xd_q_u64(q(k, key), v) != 0) {
		reply_err(k, 400, "bad_request", "%s: a byte offset", key);
		return -1;
	}
	return 0;
}

static void
h_cmd_output(struct xd_call *k)
{
	struct xd_cmd *c = cmd_of(k);
	const char *enc;
	uint64_t off[2] = { 0, 0 }, o = 0;

	if (c == NULL)
		return;         /* answered, k freed */
	enc = q(k, "encoding");
	if (enc != NULL && strcmp(enc, "base64") != 0 && strcmp(enc, "utf-8")
	    != 0) {
		reply_err(k, 400, "bad_request", "encoding: utf-8 or base64");
		return;
	}
	if (q_u64(k, "offset", &o) != 0)
		return;
	off[0] = off[1] = o;
	if (q_u64(k, "stdout_offset", &off[0]) != 0 ||
	    q_u64(k, "stderr_offset", &off[1]) != 0)
		return;
	reply_json(k, 200, xd_cmd_output(c, off, enc != NULL && strcmp(enc,
	    "base64") == 0));
}

static void
h_cmd_stop(struct xd_call *k)
{
	struct xd_cmd *c = cmd_of(k);

	if (c == NULL)
		return;
	xd_cmd_kill(c, c->background ? "stop" : "cancel");
	reply_json(k, 202, xd_cmd_status(c));
}

static void
h_cancel(struct xd_call *k)
{
	struct xd_box *b = box_of(k);
	json_t *all;
	struct xd_cmd *c;
	int n = 0;

	if (b == NULL)
		return;         /* answered, k freed */
	all = json_object_get(k->body, "all");
	if (k->body != NULL && (json_object_size(k->body) > (all ? 1u : 0u) ||
	    (all != NULL && !json_is_boolean(all)))) {
		reply_err(k, 400, "bad_request", "cancel takes {\"all\": "
		    "true|false}");
		return;
	}
	if (b->fg != NULL && b->fg->running) {
		xd_cmd_kill(b->fg, "cancel");
		n++;
	}
	if (json_is_true(all))
		TAILQ_FOREACH(c, &b->cmds, link)
			if (c->running) {
				xd_cmd_kill(c, "cancel");
				n++;
			}
	reply_json(k, 200, json_pack("{s:i}", "cancelled", n));
}

/* ---- the node (exec_node.c) ---- */

static void
node_cb(void *arg, json_t *h)
{
	struct xd_call *k = arg;

	reply_json(k, 200, xd_node_json(k->xd, h));
}

static void
h_node_get(struct xd_call *k)
{
	call_wait(k);
	if (xd_health(k->xd, node_cb, k) != 0)
		node_cb(k, xd_health_json(k->xd, NULL, 0, "cannot start a "
		    "worker"));
}

static void
h_node_put(struct xd_call *k)
{
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if (xd_node_set(k->xd, k->body, k->who, xd_role_name(k->role), &e) !=
	    0) {
		reply_perr(k, &e);
		return;
	}
	reply_json(k, 200, xd_node_state(k->xd));
}

/* ---- events and metrics ---- */

/* The end of a subscriber: the stream closed (the terminal chunk
 * queued when the connection is still there) and the call freed. */
static void
sub_end(struct xd_call *k)
{
	xd_event_unsub(k->xd, &k->sub);
	if (k->evcon != NULL) {
		evhttp_connection_set_closecb(k->evcon, NULL, NULL);
		k->evcon = NULL;
	}
	evhttp_send_reply_end(k->req);
	call_free(k);
}

static void
sub_end_later(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sub_end(arg);
}

static void
sub_frame(void *arg, const char *frame, size_t n)
{
	static const char dropped[] = "event: dropped\ndata: {\"reason\":"
	    "\"slow reader\"}\n\n";
	struct xd_call *k = arg;
	struct evbuffer *b;

	if (k->gone)
		return;
	if ((b = evbuffer_new()) == NULL)
		return;
	/* a reader that does not keep up is dropped: what it has not read
	 * stays below events_buffer_bytes and one event */
	if (xd_req_queued(k->req) > k->xd->cfg->events_buffer) {
		k->xd->stats.events_dropped++;
		xd_log(XD_LOG_INFO, "%s: events: a slow reader dropped",
		    k->who);
		evbuffer_add(b, dropped, sizeof(dropped) - 1);
		evhttp_send_reply_chunk(k->req, b);
		evbuffer_free(b);
		k->gone = 1;
		xd_event_unsub(k->xd, &k->sub);
		/* not from inside xd_event's walk: it frees k */
		if (event_base_once(k->xd->base, -1, EV_TIMEOUT, sub_end_later,
		    k, NULL) != 0)
			sub_end(k);
		return;
	}
	evbuffer_add(b, frame, n);
	evhttp_send_reply_chunk(k->req, b);
	evbuffer_free(b);
}

static void
sub_closed(struct evhttp_connection *evcon, void *arg)
{
	struct xd_call *k = arg;

	(void)evcon;
	k->evcon = NULL;
	if (k->gone)
		return;         /* sub_end_later is on its way */
	k->gone = 1;
	xd_event_unsub(k->xd, &k->sub);
	if (event_base_once(k->xd->base, -1, EV_TIMEOUT, sub_end_later, k,
	    NULL) != 0)
		xd_log(XD_LOG_WARN, "events: cannot end a stream");
}

static void
h_events(struct xd_call *k)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(k->req);
	struct evbuffer *b;

	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_send_reply_start(k->req, 200, "OK");
	if ((k->evcon = evhttp_request_get_connection(k->req)) != NULL)
		evhttp_connection_set_closecb(k->evcon, sub_closed, k);
	/* a first comment: the client knows it is subscribed */
	if ((b = evbuffer_new()) != NULL) {
		evbuffer_add_printf(b, ": subscribed\n\n");
		evhttp_send_reply_chunk(k->req, b);
		evbuffer_free(b);
	}
	k->sub.fn = sub_frame;
	k->sub.arg = k;
	snprintf(k->sub.tenant, sizeof(k->sub.tenant), "%s", k->tenant);
	k->sub.role = k->role;
	xd_event_sub(k->xd, &k->sub);
}

/* One value under one name: the HELP and TYPE lines, then the value. */
static void
metric_u64(struct evbuffer *o, const char *name, const char *type,
    const char *help, uint64_t v)
{
	evbuffer_add_printf(o, "# HELP sluice_execd_%s %s\n# TYPE "
	    "sluice_execd_%s %s\nsluice_execd_%s %llu\n", name, help, name,
	    type, name, (unsigned long long)v);
}

/* The disk: the state dir's file system and what takes it; the
 * archives per tenant (a tenant that is no id, from a metadata file put
 * there by hand, as ""). */
static void
metrics_storage(struct xd *xd, struct evbuffer *o)
{
	struct xd_storage st;
	json_t *list = xd_arch_list_shown(xd), *a, *per = json_object(), *t;
	const char *tn;
	size_t i;
	uint64_t bytes = 0;

	xd_box_storage(xd, &st, 0);
	json_array_foreach(list, i, a) {
		tn = json_string_value(json_object_get(a, "tenant"));
		if (tn == NULL || !sbx_id_ok(tn, SBX_ID_MAX))
			tn = "";
		if ((t = json_object_get(per, tn)) == NULL) {
			t = json_pack("{s:I,s:I}", "n", (json_int_t)0, "b",
			    (json_int_t)0);
			json_object_set_new(per, tn, t);
		}
		json_object_set_new(t, "n", json_integer(json_integer_value(
		    json_object_get(t, "n")) + 1));
		json_object_set_new(t, "b", json_integer(json_integer_value(
		    json_object_get(t, "b")) + json_integer_value(
		    json_object_get(a, "bytes"))));
		bytes += (uint64_t)json_integer_value(json_object_get(a,
		    "bytes"));
	}
	evbuffer_add_printf(o, "# HELP sluice_execd_storage_bytes The state "
	    "dir's file system: free, total, headroom (what a workspace may "
	    "take: free less the reserve and the workspaces' bytes not yet "
	    "allocated), reserve (quotas.disk_reserve_mb), workspaces (disk_mb "
	    "of the live sandboxes), workspaces_unallocated, archives.\n"
	    "# TYPE sluice_execd_storage_bytes gauge\n");
	if (st.ok)
		evbuffer_add_printf(o, "sluice_execd_storage_bytes{what=\"free\"}"
		    " %llu\nsluice_execd_storage_bytes{what=\"total\"} %llu\n"
		    "sluice_execd_storage_bytes{what=\"headroom\"} %lld\n",
		    (unsigned long long)st.free, (unsigned long long)st.total,
		    (long long)st.headroom);
	evbuffer_add_printf(o, "sluice_execd_storage_bytes{what=\"reserve\"} "
	    "%llu\nsluice_execd_storage_bytes{what=\"workspaces\"} %llu\n"
	    "sluice_execd_storage_bytes{what=\"workspaces_unallocated\"} "
	    "%llu\nsluice_execd_storage_bytes{what=\"archives\"} %llu\n",
	    (unsigned long long)st.reserve, (unsigned long long)st.workspaces,
	    (unsigned long long)st.unallocated, (unsigned long long)bytes);
	evbuffer_add_printf(o, "# HELP sluice_execd_archives Archives kept, "
	    "per tenant.\n# TYPE sluice_execd_archives gauge\n");
	json_object_foreach(per, tn, t)
		evbuffer_add_printf(o, "sluice_execd_archives{tenant=\"%s\"} "
		    "%lld\n", tn, (long long)json_integer_value(
		    json_object_get(t, "n")));
	evbuffer_add_printf(o, "# HELP sluice_execd_archive_bytes Bytes of "
	    "the archives kept, per tenant.\n# TYPE sluice_execd_archive_bytes"
	    " gauge\n");
	json_object_foreach(per, tn, t)
		evbuffer_add_printf(o, "sluice_execd_archive_bytes{tenant=\"%s\"}"
		    " %lld\n", tn, (long long)json_integer_value(
		    json_object_get(t, "b")));
	json_decref(per);
	json_decref(list);
}

static void
h_metrics(struct xd_call *k)
{
	const struct xd_cfg *c = k->xd->cfg;
	const struct xd_stats *st = &k->xd->stats;
	struct evbuffer *o = evbuffer_new();
	long n[5] = { 0, 0, 0, 0, 0 }, fg = 0, bg = 0, subs = 0;
	struct xd_box *b;
	struct xd_cmd *x;
	struct xd_sub *s;

	if (o == NULL) {
		reply_err(k, 500, "internal", "out of memory");
		return;
	}
	TAILQ_FOREACH(b, &k->xd->boxes, link) {
		n[b->state <= XD_BOX_GONE ? b->state : XD_BOX_GONE]++;
		fg += b->fg != NULL;
		TAILQ_FOREACH(x, &b->cmds, link)
			bg += x->running;
	}
	TAILQ_FOREACH(s, &k->xd->subs, link)
		subs++;
#define M(name, type, help) evbuffer_add_printf(o, "# HELP sluice_execd_" \
	name " " help "\n# TYPE sluice_execd_" name " " type "\n")
	xd_node_metrics(k->xd, o);
	xd_pool_metrics(k->xd, o);
	M("sandboxes", "gauge", "Sandboxes by state.");
	evbuffer_add_printf(o, "sluice_execd_sandboxes{state=\"creating\"} "
	    "%ld\nsluice_execd_sandboxes{state=\"running\"} %ld\n"
	    "sluice_execd_sandboxes{state=\"deleting\"} %ld\n"
	    "sluice_execd_sandboxes{state=\"stopped\"} %ld\n",
	    n[XD_BOX_CREATING], n[XD_BOX_RUNNING], n[XD_BOX_DELETING],
	    n[XD_BOX_STOPPED]);
	metric_u64(o, "sandboxes_created_total", "counter",
	    "Sandboxes created.", st->created);
	metric_u64(o, "sandbox_creates_failed_total", "counter",
	    "Creates that failed.", st->create_failed);
	metric_u64(o, "sandboxes_removed_total", "counter",
	    "Sandboxes removed.", st->removed);
	M("sandboxes_suspended", "gauge", "Sandboxes suspended (unused for "
	    "lifecycle.idle_after).");
	{
		long ns = 0;

		TAILQ_FOREACH(b, &k->xd->boxes, link)
			ns += b->state == XD_BOX_RUNNING && b->rec.suspended;
		evbuffer_add_printf(o, "sluice_execd_sandboxes_suspended %ld\n",
		    ns);
	}
	M("lifecycle_total", "counter", "Suspended, resumed, removed by age, "
	    "archived, restored, archives that failed, expired, evicted by a "
	    "tenant's quota, orphaned files removed.");
	evbuffer_add_printf(o, "sluice_execd_lifecycle_total{what="
	    "\"suspended\"} %llu\nsluice_execd_lifecycle_total{what="
	    "\"resumed\"} %llu\nsluice_execd_lifecycle_total{what="
	    "\"removed_idle\"} %llu\nsluice_execd_lifecycle_total{what="
	    "\"archived\"} %llu\nsluice_execd_lifecycle_total{what="
	    "\"restored\"} %llu\nsluice_execd_lifecycle_total{what="
	    "\"archive_failed\"} %llu\nsluice_execd_lifecycle_total{what="
	    "\"archive_expired\"} %llu\nsluice_execd_lifecycle_total{what="
	    "\"archive_evicted\"} %llu\nsluice_execd_lifecycle_total{what="
	    "\"archive_orphan\"} %llu\n",
	    (unsigned long long)st->suspended, (unsigned long long)st->resumed,
	    (unsigned long long)st->removed_idle,
	    (unsigned long long)st->archived, (unsigned long long)st->restored,
	    (unsigned long long)st->archive_failed,
	    (unsigned long long)st->arch_expired,
	    (unsigned long long)st->arch_evicted,
	    (unsigned long long)st->arch_orphans);
	M("commands_running", "gauge", "Commands running.");
	evbuffer_add_printf(o, "sluice_execd_commands_running{kind="
	    "\"foreground\"} %ld\nsluice_execd_commands_running{kind="
	    "\"background\"} %ld\n", fg, bg);
	metric_u64(o, "commands_started_total", "counter",
	    "Commands started.", st->cmds_started);
	metric_u64(o, "commands_exited_total", "counter",
	    "Commands ended.", st->cmds_exited);
	metric_u64(o, "commands_timed_out_total", "counter",
	    "Commands killed at their deadline.", st->timed_out);
	metric_u64(o, "commands_oom_killed_total", "counter",
	    "Commands the OOM killer hit.", st->oom_killed);
	metric_u64(o, "commands_cancelled_total", "counter",
	    "Commands cancelled or stopped.", st->cancelled);
	M("quota_limit", "gauge", "Configured quotas (0: none).");
	evbuffer_add_printf(o, "sluice_execd_quota_limit{scope=\"global\"} "
	    "%ld\nsluice_execd_quota_limit{scope=\"tenant\"} %ld\n"
	    "sluice_execd_quota_limit{scope=\"user\"} %ld\n"
	    "sluice_execd_quota_limit{scope=\"creates\"} %ld\n"
	    "sluice_execd_quota_limit{scope=\"background_per_sandbox\"} "
	    "%ld\nsluice_execd_quota_limit{scope=\"commands\"} %ld\n"
	    "sluice_execd_quota_limit{scope=\"commands_per_tenant\"} %ld\n"
	    "sluice_execd_quota_limit{scope=\"creates_per_tenant\"} %ld\n",
	    c->max_total, c->max_per_tenant, c->max_per_user,
	    c->max_creates, c->max_background, c->max_cmds,
	    c->max_cmds_tenant, xd_cfg_creates_tenant(c));
	M("quota_in_use", "gauge", "What counts against the global quotas.");
	evbuffer_add_printf(o, "sluice_execd_quota_in_use{scope=\"global\"} "
	    "%ld\nsluice_execd_quota_in_use{scope=\"creates\"} %ld\n"
	    "sluice_execd_quota_in_use{scope=\"commands\"} %ld\n",
	    n[XD_BOX_CREATING] + n[XD_BOX_RUNNING], k->xd->creating,
	    fg + bg);
	metrics_storage(k->xd, o);
	M("event_subscribers", "gauge", "GET /v1/events streams open.");
	evbuffer_add_printf(o, "sluice_execd_event_subscribers %ld\n", subs);
	metric_u64(o, "event_subscribers_dropped_total", "counter",
	    "Slow event readers dropped.", st->events_dropped);
	metric_u64(o, "ring_bytes", "gauge",
	    "Bytes held by background commands' output rings.",
	    k->xd->ring_held);
	metric_u64(o, "ring_budget_bytes", "gauge",
	    "ring_budget_bytes (0: none).", c->ring_budget);
	metric_u64(o, "ring_dropped_total", "counter",
	    "Finished commands whose output was dropped for ring_budget_bytes.",
	    st->ring_dropped);
	metric_u64(o, "ring_dropped_bytes_total", "counter",
	    "Output bytes dropped with them.", st->ring_dropped_bytes);
#undef M
	xd_reply_text(k->req, "text/plain; version=0.0.4", o);
	call_free(k);
}

/* ---- files ---- */

static void
h_files_list(struct xd_call *k)
{
	struct xd_box *b = box_of(k);
	struct xd_perr e;
	json_t *out;
	int rec;

	if (b == NULL)
		return;         /* answered, k freed */
	memset(&e, 0, sizeof(e));
	if (q_bool(k, "recursive", "recursive: 0 or 1", &rec) != 0)
		return;
	if (xd_fs_list(&b->rec, q(k, "path"), q(k, "glob"), rec, LIST_MAX,
	    &out, &e) != 0) {
		reply_perr(k, &e);
		return;
	}
	reply_json(k, 200, out);
}

/*
 * A file GET is sent from its descriptor, as the client reads: at most
 * reply_buffer_bytes of it queued per connection, reply_total_bytes in
 * all (a stream waits for the others to drain), and a client that reads
 * nothing for reply_timeout_ms is dropped.  The length is told first
 * (Content-Length), so a file the sandbox shrank meanwhile ends the
 * connection short.
 */
#define FILE_TICK_MS	200

static void file_pump(struct xd_call *k);

static void
file_end_later(evutil_socket_t fd, short what, void *arg)
{
	struct xd_call *k = arg;

	(void)fd;
	(void)what;
	/* the request is freed by this when its connection is gone */
	evhttp_send_reply_end(k->req);
	call_free(k);
}

/* Stop sending: the answer ended (done), the client went (evcon NULL)
 * or must go (shut its connection). */
static void
file_finish(struct xd_call *k, int shut)
{
	struct evhttp_connection *evcon = k->evcon;

	if (k->file_ending)
		return;
	k->file_ending = 1;
	if (k->file_ev != NULL)
		event_del(k->file_ev);
	if (evcon != NULL) {
		xd_conn_release(evcon, shut);
		k->evcon = NULL;
	}
	/* not from inside evhttp's callbacks: it may free the request */
	if (event_base_once(k->xd->base, -1, EV_TIMEOUT, file_end_later, k,
	    NULL) != 0)
		xd_log(XD_LOG_WARN, "files: cannot end an answer");
}

static void
file_closed(struct evhttp_connection *evcon, void *arg)
{
	struct xd_call *k = arg;

	(void)evcon;
	k->evcon = NULL;
	file_finish(k, 0);
}

static void
file_drained(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	file_pump(arg);
}

static void
file_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	file_pump(arg);
}

/* The next at most n bytes of an exec's answer into p (see ans_stream):
 * 0 only at its end. */
static size_t
ans_fill(struct xd_call *k, char *p, size_t n)
{
	const struct xd_cmd *c = k->ans_cmd;
	size_t got = 0, w, len;
	int i;

	while (got < n && k->ans_part < 5) {
		if (k->ans_part % 2 == 0) {
			const char *t = k->ans_text[k->ans_part / 2];

			len = strlen(t);
			w = len - k->ans_pos < n - got ? len - k->ans_pos :
			    n - got;
			memcpy(p + got, t + k->ans_pos, w);
			k->ans_pos += w;
			got += w;
			if (k->ans_pos < len)
				break;
		} else {
			i = k->ans_part / 2;
			w = xd_text_esc(c->out[i].buf, k->ans_raw[i], c->base64,
			    &k->ans_pos, p + got, n - got);
			got += w;
			if (k->ans_pos < k->ans_raw[i]) {
				if (w == 0)
					break;  /* no room for the next one */
				continue;
			}
		}
		k->ans_part++;
		k->ans_pos = 0;
	}
	return got;
}

static void
file_pump(struct xd_call *k)
{
	struct timeval tv = { 0, FILE_TICK_MS * 1000 };
	size_t q, room, n;
	struct evbuffer *b;
	ssize_t r;
	char *p;

	if (k->file_ending)
		return;
	if (k->evcon == NULL) {
		file_finish(k, 0);
		return;
	}
	q = xd_req_queued(k->req);
	xd_share_seen(k->xd, &k->file_share, q);
	if (k->file_left == 0) {
		if (q == 0) {
			file_finish(k, 0);
			return;
		}
	} else if ((room = xd_share_room(k->xd, q)) > 0) {
		n = k->file_left < room ? (size_t)k->file_left : room;
		if ((b = evbuffer_new()) == NULL)
			goto tick;
		if ((p = malloc(n)) == NULL) {
			evbuffer_free(b);
			goto tick;
		}
		r = k->file_fd >= 0 ? pread(k->file_fd, p, n,
		    (off_t)k->file_off) : (ssize_t)ans_fill(k, p, n);
		if (r == 0 && k->file_fd < 0) {
			/* an answer's next piece needs more room than the
			 * budget has left now */
			free(p);
			evbuffer_free(b);
			goto tick;
		}
		if (r <= 0) {
			/* the sandbox shrank it meanwhile: the length told
			 * cannot be kept */
			free(p);
			evbuffer_free(b);
			xd_log(XD_LOG_INFO, "files: %s: shorter than it was, "
			    "the answer is cut", k->arg[1]);
			file_finish(k, 1);
			return;
		}
		evbuffer_add(b, p, (size_t)r);
		free(p);
		k->file_off += (uint64_t)r;
		k->file_left -= (uint64_t)r;
		xd_share_send(k->xd, &k->file_share, k->req, b, file_drained,
		    k);
		evbuffer_free(b);
	}
	if (xd_share_stalled(k->xd, &k->file_share)) {
		xd_log(XD_LOG_INFO, "%s: files: a client that read nothing for "
		    "reply_timeout_ms dropped", k->who);
		file_finish(k, 1);
		return;
	}
tick:
	evtimer_add(k->file_ev, &tv);
}

static void
file_stream(struct xd_call *k, int fd, uint64_t from, uint64_t len,
    int status)
{
	char cl[32];

	k->file_fd = fd;
	k->file_off = from;
	k->file_left = len;
	k->file_share.moved_ms = sbx_now_ms();
	if ((k->file_ev = evtimer_new(k->xd->base, file_tick, k)) == NULL) {
		reply_err(k, 500, "internal", "out of memory");
		return;
	}
	snprintf(cl, sizeof(cl), "%llu", (unsigned long long)len);
	evhttp_add_header(evhttp_request_get_output_headers(k->req),
	    "Content-Length", cl);
	call_wait(k);
	evhttp_send_reply_start(k->req, status, util_http_phrase(status));
	if ((k->evcon = evhttp_request_get_connection(k->req)) != NULL)
		evhttp_connection_set_closecb(k->evcon, file_closed, k);
	file_pump(k);
}

/*
 * An exec's answer: r (consumed) is its result without the output,
 * which follows as "stdout" and "stderr", escaped from the command's
 * kept bytes as the pump asks (c is kept until then).  The answer is
 * sent as a file GET's is: its length told first, at most
 * reply_buffer_bytes queued per connection and reply_total_bytes in
 * all, a client that reads nothing for reply_timeout_ms dropped.
 * Issue 20 point 6: an answer of 2 x output_cap bytes of control
 * characters is 12 x output_cap of JSON, which a client that does not
 * read held in the daemon's memory, outside every limit.
 */
static void
ans_stream(struct xd_call *k, struct xd_cmd *c, json_t *r)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(k->req);
	char *head = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL, cl[32];
	uint64_t len = 0;
	size_t pos, n, i;

	json_decref(r);
	k->ans_cmd = c;
	if (head == NULL || (n = strlen(head)) < 2 || head[n - 1] != '}' ||
	    (k->ans_text[0] = malloc(n + 16)) == NULL ||
	    (k->ans_text[1] = strdup("\",\"stderr\":\"")) == NULL ||
	    (k->ans_text[2] = strdup("\"}\n")) == NULL ||
	    (k->file_ev = evtimer_new(k->xd->base, file_tick, k)) == NULL) {
		free(head);
		reply_err(k, 500, "internal", "out of memory");
		return;
	}
	/* {...,"stdout":"<out>","stderr":"<err>"} */
	memcpy(k->ans_text[0], head, n - 1);
	snprintf(k->ans_text[0] + n - 1, 16, "%s\"stdout\":\"", n > 2 ?
	    "," : "");
	free(head);
	for (i = 0; i < 2; i++) {
		k->ans_raw[i] = c->out[i].len;
		/* a character cut by the cap is not shown as U+FFFD */
		if (!c->base64 && c->out[i].dropped > 0)
			k->ans_raw[i] = xd_utf8_whole(c->out[i].buf,
			    k->ans_raw[i]);
		pos = 0;
		len += xd_text_esc(c->out[i].buf, k->ans_raw[i], c->base64,
		    &pos, NULL, 0);
	}
	for (i = 0; i < 3; i++)
		len += strlen(k->ans_text[i]);
	k->file_left = len;
	k->file_share.moved_ms = sbx_now_ms();
	evhttp_remove_header(h, "Content-Type");
	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "Cache-Control", "no-store");
	snprintf(cl, sizeof(cl), "%llu", (unsigned long long)len);
	evhttp_add_header(h, "Content-Length", cl);
	if (!k->pending)
		call_wait(k);
	evhttp_send_reply_start(k->req, 200, util_http_phrase(200));
	if ((k->evcon = evhttp_request_get_connection(k->req)) != NULL)
		evhttp_connection_set_closecb(k->evcon, file_closed, k);
	file_pump(k);
}

static void
h_file_get(struct xd_call *k)
{
	struct xd_box *b = box_of(k);
	struct evkeyvalq *oh;
	struct evbuffer *body;
	uint64_t size, from = 0, to = 0;
	struct xd_perr e;
	int fd, rr, status = 200;
	char cr[96];

	if (b == NULL)
		return;
	memset(&e, 0, sizeof(e));
	if (xd_fs_open_read(&b->rec, k->arg[1], &fd, &size, &e) != 0) {
		reply_perr(k, &e);
		return;
	}
	rr = xd_range_parse(evhttp_find_header(evhttp_request_get_input_headers(
	    k->req), "Range"), size, &from, &to);
	if (rr < 0) {
		close(fd);
		snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
		evhttp_add_header(evhttp_request_get_output_headers(k->req),
		    "Content-Range", cr);
		reply_err(k, 416, "bad_request", "range outside the file (%llu "
		    "bytes)", (unsigned long long)size);
		return;
	}
	if (rr == 0) {
		from = 0;
		to = size ? size - 1 : 0;
	}
	if ((size > 0 ? to - from + 1 : 0) > k->xd->cfg->max_file_bytes) {
		close(fd);
		e.extra = json_pack("{s:I,s:I}", "size", (json_int_t)size,
		    "limit", (json_int_t)k->xd->cfg->max_file_bytes);
		e.status = 413;
		e.code = "too_large";
		snprintf(e.msg, sizeof(e.msg), "%s: %llu bytes, more than "
		    "max_file_bytes (ask for a Range)", k->arg[1],
		    (unsigned long long)size);
		reply_perr(k, &e);
		return;
	}
	oh = evhttp_request_get_output_headers(k->req);
	evhttp_add_header(oh, "Content-Type", "application/octet-stream");
	evhttp_add_header(oh, "Accept-Ranges", "bytes");
	evhttp_add_header(oh, "Cache-Control", "no-store");
	if (rr > 0) {
		status = 206;
		snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu",
		    (unsigned long long)from, (unsigned long long)to,
		    (unsigned long long)size);
		evhttp_add_header(oh, "Content-Range", cr);
	}
	if (size == 0) {
		close(fd);
		if ((body = evbuffer_new()) == NULL) {
			reply_err(k, 500, "internal", "out of memory");
			return;
		}
		evhttp_send_reply(k->req, status, util_http_phrase(status),
		    body);
		evbuffer_free(body);
		call_free(k);
		return;
	}
	file_stream(k, fd, from, to - from + 1, status);
}

static void
h_file_put(struct xd_call *k)
{
	struct xd_box *b = box_for_change(k);
	struct evbuffer *in;
	size_t len;
	struct xd_perr e;

	if (b == NULL)
		return;         /* answered, k freed */
	in = evhttp_request_get_input_buffer(k->req);
	len = evbuffer_get_length(in);
	memset(&e, 0, sizeof(e));
	if (len > k->xd->cfg->max_file_bytes) {
		reply_err(k, 413, "too_large", "more than max_file_bytes "
		    "(%llu)", (unsigned long long)k->xd->cfg->max_file_bytes);
		return;
	}
	if (xd_fs_write(&b->rec, k->arg[1], len ? evbuffer_pullup(in, -1) :
	    (unsigned char *)"", len, &e) != 0) {
		reply_perr(k, &e);
		return;
	}
	reply_json(k, 201, json_pack("{s:s,s:I}", "path", k->arg[1], "size",
	    (json_int_t)len));
}

static void
h_file_delete(struct xd_call *k)
{
	struct xd_box *b = box_for_change(k);
	struct xd_perr e;

	if (b == NULL)
		return;
	memset(&e, 0, sizeof(e));
	if (xd_fs_delete(&b->rec, k->arg[1], &e) != 0) {
		reply_perr(k, &e);
		return;
	}
	reply_json(k, 200, json_pack("{s:s,s:b}", "path", k->arg[1],
	    "deleted", 1));
}

static void
h_edit(struct xd_call *k)
{
	static const char *const keys[] = { "path", "old", "new", NULL };
	struct xd_box *b = box_for_change(k);
	json_t *p, *o, *n, *v, *out;
	struct xd_perr e;
	const char *key;
	size_t i;

	if (b == NULL)
		return;
	memset(&e, 0, sizeof(e));
	json_object_foreach(k->body, key, v) {
		for (i = 0; keys[i] != NULL && strcmp(keys[i], key); i++)
			;
		if (keys[i] == NULL) {
			reply_err(k, 400, "bad_request", "edit takes path, old "
			    "and new");
			return;
		}
	}
	p = json_object_get(k->body, "path");
	o = json_object_get(k->body, "old");
	n = json_object_get(k->body, "new");
	if (!json_is_string(p) || !json_is_string(o) || !json_is_string(n) ||
	    strlen(json_string_value(p)) != json_string_length(p)) {
		reply_err(k, 400, "bad_request", "path, old and new: strings");
		return;
	}
	if (xd_fs_edit(&b->rec, json_string_value(p), json_string_value(o),
	    json_string_length(o), json_string_value(n), json_string_length(n),
	    k->xd->cfg->max_file_bytes, &out, &e) != 0) {
		reply_perr(k, &e);
		return;
	}
	reply_json(k, 200, out);
}

/* ---- batch files (exec_tar.c) ---- */

static void
archive_put_cb(void *arg, json_t *res, struct xd_perr *e)
{
	struct xd_call *k = arg;

	if (e != NULL)
		reply_perr(k, e);
	else
		reply_json(k, 200, res);
}

static void
h_archive_put(struct xd_call *k)
{
	struct xd_box *b = box_for_change(k);
	struct xd_perr e;

	if (b == NULL)
		return;         /* answered, k freed */
	memset(&e, 0, sizeof(e));
	if (xd_tar_put(b, evhttp_request_get_input_buffer(k->req), q(k,
	    "path"), archive_put_cb, k, &e) != 0) {
		reply_perr(k, &e);
		return;
	}
	call_wait(k);
}

static void
archive_get_done(void *arg)
{
	call_free(arg);         /* answered by exec_tar.c */
}

static void
h_archive_get(struct xd_call *k)
{
	struct xd_box *b = box_of(k);
	struct xd_perr e;

	if (b == NULL)
		return;
	memset(&e, 0, sizeof(e));
	call_wait(k);
	if (xd_tar_get(k->xd, k->req, b, q(k, "path"), k->who,
	    archive_get_done, k, &e) != 0)
		reply_perr(k, &e);
}

/* ---- who is calling ---- */

_Static_assert((int)XD_ROLE_AUDITOR == (int)ROLES_AUDITOR &&
    (int)XD_ROLE_APP == (int)ROLES_APP && (int)XD_ROLE_ADMIN ==
    (int)ROLES_ADMIN && (int)XD_ROLE__COUNT == (int)ROLES__COUNT,
    "enum xd_role is enum roles_role");

static void
identify_unix(struct xd_call *k, int fd)
{
	const struct xd_cfg *c = k->xd->cfg;
	gid_t gids[ROLES_GROUPS_MAX + 1];
	struct roles_list u[ROLES__COUNT], g[ROLES__COUNT];
	size_t ngids;
	uid_t uid;
	int r;

	k->role = XD_ROLE_NONE;
	snprintf(k->who, sizeof(k->who), "unix:unknown");
	if (roles_peer(fd, &uid, gids, &ngids) != 0)
		return;
	snprintf(k->who, sizeof(k->who), "uid:%lu", (unsigned long)uid);
	/* sluiced's rule, in one place for both daemons: uids before
	 * groups, so a uid in the app list stays app whatever its groups */
	memset(u, 0, sizeof(u));
	memset(g, 0, sizeof(g));
	for (r = XD_ROLE_AUDITOR; r <= XD_ROLE_ADMIN; r++) {
		u[r].ids = c->uids[r].v;
		u[r].n = c->uids[r].n;
		g[r].ids = c->gids[r].v;
		g[r].n = c->gids[r].n;
	}
	k->role = (enum xd_role)roles_resolve(uid, gids, ngids, u, g);
}

static void
identify_token(struct xd_call *k)
{
	const struct xd_token *hit;
	const char *v;

	k->role = XD_ROLE_NONE;
	if ((v = httpauth_bearer(evhttp_request_get_input_headers(k->req),
	    HTTPAUTH_TOKEN_MAX)) == NULL ||
	    (hit = xd_token_find(k->xd->cfg, v)) == NULL)
		return;
	k->role = hit->role;
	snprintf(k->tenant, sizeof(k->tenant), "%s", hit->tenant);
	snprintf(k->who, sizeof(k->who), "token:%s", hit->name);
}

/* ---- the request callback ---- */

static int
call_known(struct xd *xd, struct evhttp_request *req)
{
	struct xd_call *k;

	TAILQ_FOREACH(k, &xd->calls, link)
		if (k->req == req)
			return 1;
	return 0;
}

/* Whether method and path are a route that needs no role (/healthz):
 * served to any caller, with or without a token. */
static int
route_open(enum evhttp_cmd_type m, const char *path)
{
	size_t i;

	for (i = 0; path != NULL && i < NROUTES; i++)
		if (routes[i].role == XD_ROLE_NONE && routes[i].method == m &&
		    strcmp(routes[i].pattern, path) == 0)
			return 1;
	return 0;
}

/* The route of path and method; NULL with *path_known when the path is
 * served with other methods (their names in allow). */
static const struct route *
route_find(enum evhttp_cmd_type m, const char *path, char **args,
    int *path_known, int *bad, char *allow, size_t alen)
{
	size_t i, o = 0;
	const struct route *hit = NULL;
	char *tmp[XD_ARGS_MAX];

	*path_known = *bad = 0;
	allow[0] = '\0';
	for (i = 0; i < NROUTES; i++) {
		int r = xd_route_match(routes[i].pattern, path, tmp,
		    XD_ARGS_MAX);

		if (r < 0) {
			*bad = 1;
			continue;
		}
		if (r == 0)
			continue;
		*path_known = 1;
		o += (size_t)snprintf(allow + o, o < alen ? alen - o : 0,
		    "%s%s", o ? ", " : "", routes[i].mname);
		if (hit == NULL && routes[i].method == m) {
			hit = &routes[i];
			memcpy(args, tmp, sizeof(tmp));
		} else
			xd_args_free(tmp, XD_ARGS_MAX);
	}
	return hit;
}

/* The role the route of method and target needs (exec_gate.c, before
 * evhttp has the body); the lowest when none matches or the target does
 * not parse: the request callback answers that with 400, 404 or 405. */
static enum xd_role
route_role(const char *method, const char *target)
{
	struct evhttp_uri *u = evhttp_uri_parse_with_flags(target, 0);
	const char *path = u != NULL ? evhttp_uri_get_path(u) : NULL;
	enum xd_role need = XD_ROLE_AUDITOR;
	char *tmp[XD_ARGS_MAX];
	size_t i;

	for (i = 0; path != NULL && i < NROUTES; i++) {
		if (strcmp(routes[i].mname, method) != 0)
			continue;
		if (xd_route_match(routes[i].pattern, path, tmp,
		    XD_ARGS_MAX) == 1) {
			xd_args_free(tmp, XD_ARGS_MAX);
			need = routes[i].role;
			break;
		}
	}
	if (u != NULL)
		evhttp_uri_free(u);
	return need;
}

static int
read_query(struct xd_call *k, const struct evhttp_uri *uri)
{
	const char *qs = evhttp_uri_get_query(uri);
	struct evkeyval *kv;
	char key[72];

	if (qs == NULL)
		return 0;
	TAILQ_INIT(&k->query);
	if (evhttp_parse_query_str(qs, &k->query) != 0) {
		evhttp_clear_headers(&k->query);
		/* the port proxy passes any query on as it came */
		if (strcmp(k->route->query, "*") == 0)
			return 0;
		reply_err(k, 400, "bad_request", "the query does not parse");
		return -1;
	}
	k->have_query = 1;
	if (strcmp(k->route->query, "*") == 0)
		return 0;
	TAILQ_FOREACH(kv, &k->query, next) {
		snprintf(key, sizeof(key), ",%.64s,", kv->key);
		if (strstr(k->route->query, key) == NULL ||
		    strlen(kv->key) > 64) {
			reply_err(k, 400, "bad_request", "%s %s takes no query "
			    "parameter %.64s", k->route->mname,
			    k->route->pattern, kv->key);
			return -1;
		}
	}
	return 0;
}

static int
read_body(struct xd_call *k)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(k->req);
	size_t len = evbuffer_get_length(in);
	json_error_t je;

	switch (k->route->body) {
	case B_RAW:
		return 0;
	case B_NONE:
		if (len != 0) {
			reply_err(k, 400, "bad_request", "this call takes no "
			    "body");
			return -1;
		}
		return 0;
	case B_JSON_OPT:
		if (len == 0)
			return 0;
		/* FALLTHROUGH */
	case B_JSON:
		break;
	}
	if (len > k->xd->cfg->max_body_bytes) {
		reply_err(k, 413, "too_large", "the body is larger than %llu "
		    "bytes", (unsigned long long)k->xd->cfg->max_body_bytes);
		return -1;
	}
	if (len == 0) {
		reply_err(k, 400, "bad_request", "expected a JSON object body");
		return -1;
	}
	k->body = json_loadb((const char *)evbuffer_pullup(in, -1), len,
	    JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(k->body)) {
		reply_err(k, 400, "bad_request", "body: not a JSON object "
		    "(line %d column %d)", je.line, je.column);
		return -1;
	}
	return 0;
}

struct listener {
	struct xd *xd;
	int tls;
};

static struct listener l_unix, l_tls;

/*
 * What counts as use of a sandbox (exec_box.c, lifecycle): every route
 * under /v1/sandboxes/{id} an app calls (commands, output, files, edit,
 * install, cancel, PATCH), which resumes a suspended sandbox first; not
 * what an auditor may call (GET of the sandbox or of its commands: they
 * show the state without changing it) and not DELETE (the delete worker
 * thaws the sandbox to destroy it).  -1: answered.
 */
static int
call_uses(struct xd_call *k)
{
	static const char pre[] = "/v1/sandboxes/{id}";
	struct xd_box *b;
	struct xd_perr e;
	int n;

	if (k->route->role < XD_ROLE_APP || strncmp(k->route->pattern, pre,
	    sizeof(pre) - 1) != 0 || (k->route->method == EVHTTP_REQ_DELETE &&
	    k->route->pattern[sizeof(pre) - 1] == '\0'))
		return 0;
	if ((b = box_lookup(k, &n)) == NULL)
		return 0;       /* the handler answers 404 (or 400) */
	memset(&e, 0, sizeof(e));
	if (xd_box_use(b, k->who, xd_role_name(k->role), &e) != 0) {
		reply_perr(k, &e);
		return -1;
	}
	return 0;
}

static void
on_answered(struct evhttp_request *req, void *arg)
{
	xd_gate_answered(arg, req);
}

static void
on_request_l(struct evhttp_request *req, void *arg)
{
	struct listener *l = arg;
	struct xd *xd = l->xd;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ?
	    evhttp_connection_get_bufferevent(evcon) : NULL;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	struct xd_call *k;
	int known, bad;
	char allow[128];

	if (uri == NULL || call_known(xd, req)) {
		/* evhttp answers what it could not read (400, 413) itself */
		evhttp_send_error(req, 400, NULL);
		return;
	}
	if ((k = calloc(1, sizeof(*k))) == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	k->xd = xd;
	k->req = req;
	k->file_fd = -1;
	if (l->tls) {
		struct bufferevent *under = bev != NULL ?
		    bufferevent_get_underlying(bev) : NULL;

		/* evhttp serves plain HTTP when the bevcb fails: never (the
		 * TLS bufferevent is under exec_gate.c's filter; a socket
		 * one under tcp.plain_http) */
		if (under == NULL || (!xd->cfg->tcp_plain &&
		    bufferevent_openssl_get_ssl(under) == NULL)) {
			reply_err(k, 500, "internal", "TLS setup failed");
			return;
		}
		/* the gate lets the next head in once this is answered; a
		 * chunked body was passed as it came, so nothing after it
		 * is read: the answer closes */
		evhttp_request_set_on_complete_cb(req, on_answered, xd);
		if (xd_gate_chunked(xd, req))
			evhttp_add_header(evhttp_request_get_output_headers(req),
			    "Connection", "close");
		identify_token(k);
	} else
		identify_unix(k, bev ? bufferevent_getfd(bev) : -1);
	if (k->role == XD_ROLE_NONE && !route_open(evhttp_request_get_command(
	    req), path)) {
		if (l->tls) {
			evhttp_add_header(evhttp_request_get_output_headers(req),
			    "WWW-Authenticate", "Bearer realm=\"sluice-execd\"");
			reply_err(k, 401, "unauthorized", "a valid bearer token "
			    "is required");
		} else
			reply_err(k, 403, "forbidden", "%s is in no role of the "
			    "executor API (roles.*.uids, roles.*.groups)",
			    k->who);
		return;
	}
	k->route = route_find(evhttp_request_get_command(req), path ? path :
	    "", k->arg, &known, &bad, allow, sizeof(allow));
	if (k->route == NULL) {
		if (known) {
			evhttp_add_header(evhttp_request_get_output_headers(req),
			    "Allow", allow);
			reply_err(k, 405, "bad_request", "%s: methods %s",
			    path, allow);
		} else if (bad)
			reply_err(k, 400, "bad_request", "a path segment does "
			    "not decode");
		else
			reply_err(k, 404, "not_found", "no such route");
		return;
	}
	if (k->role < k->route->role) {
		reply_err(k, 403, "forbidden", "the %s role may not call %s %s",
		    xd_role_name(k->role), k->route->mname, k->route->pattern);
		return;
	}
	if (xd->draining && k->route->method != EVHTTP_REQ_GET) {
		reply_err(k, 503, "backend_unavailable", "the executor is "
		    "shutting down");
		return;
	}
	if (read_query(k, uri) != 0 || read_body(k) != 0)
		return;
	xd_log(XD_LOG_DEBUG, "%s %s %s", k->who, k->route->mname, path);
	if (call_uses(k) != 0)
		return;
	k->route->fn(k);
}

/* ---- listeners ---- */

static struct evhttp *
http_new(struct xd *xd, struct listener *l)
{
	struct evhttp *h = evhttp_new(xd->base);
	uint64_t max = xd->cfg->max_file_bytes > xd->cfg->max_body_bytes ?
	    xd->cfg->max_file_bytes : xd->cfg->max_body_bytes;

	/* evhttp takes a PUT of an archive up to max_archive_bytes (and a
	 * little: its handler answers 413), not twice it */
	if (2 * max <= xd->cfg->max_archive_bytes)
		max = xd->cfg->max_archive_bytes / 2 + 1;

	if (h == NULL)
		return NULL;
	l->xd = xd;
	evhttp_set_gencb(h, on_request_l, l);
	/* every method reaches the callback, which answers 405 itself */
	evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_PATCH);
	/* evhttp refuses a body above its limit with a page of its own,
	 * not our error shape: its limit is twice ours, so that what is
	 * too large reaches read_body and h_file_put, which answer 413
	 * too_large; only a body more than twice the limit gets evhttp's
	 * 413 (lingering close: read and dropped) */
	evhttp_set_max_body_size(h, (ev_ssize_t)(2 * max));
	evhttp_set_max_headers_size(h, HEADERS_MAX);
	evhttp_set_timeout(h, HTTP_TIMEOUT_S);
	evhttp_set_default_content_type(h, "application/json");
	evhttp_set_flags(h, EVHTTP_SERVER_LINGERING_CLOSE);
	return h;
}

/*
 * exec.sock, made the way sluiced makes its sockets (proxy/lib/usock.h):
 * no link on the way followed, mode and group set before the name
 * appears, a stale socket replaced but never one someone serves.
 */
static int
unix_listen(struct xd *xd, char *err, size_t errlen)
{
	char path[SBX_PATH_MAX + 16];
	gid_t gid = xd->cfg->socket_group[0] ? xd->cfg->socket_gid :
	    (gid_t)-1;
	int fd;

	if (snprintf(path, sizeof(path), "%s/exec.sock", xd->cfg->runtime_dir)
	    >= (int)sizeof(path) || usock_path_check(path, err, errlen) != 0 ||
	    usock_canon(path, xd->sock_path, sizeof(xd->sock_path), err,
	    errlen) != 0)
		return -1;
	if ((fd = usock_listen(xd->sock_path, (mode_t)xd->cfg->socket_mode,
	    gid, 0755, 128, &xd->sock_id, err, errlen)) < 0) {
		xd->sock_path[0] = '\0';
		return -1;
	}
	if ((xd->http_unix = http_new(xd, &l_unix)) == NULL ||
	    (xd->bound_unix = evhttp_accept_socket_with_handle(xd->http_unix,
	    fd)) == NULL) {
		snprintf(err, errlen, "%s: out of memory", xd->sock_path);
		if (xd->http_unix != NULL)
			evhttp_free(xd->http_unix);
		xd->http_unix = NULL;
		close(fd);
		usock_unlink(xd->sock_path, &xd->sock_id);
		xd->sock_path[0] = '\0';
		return -1;
	}
	return 0;
}

static SSL_CTX *
tls_ctx_new(const struct xd_cfg *c, char *err, size_t errlen)
{
	static const struct apitls_names names = { "tcp.tls_cert",
	    "tcp.tls_key", NULL };

	return apitls_ctx_new(c->tls_cert, c->tls_key, NULL, &names, err,
	    errlen);
}

static struct bufferevent *
tls_bev(struct event_base *base, void *arg)
{
	struct xd *xd = arg;
	SSL *ssl;

	if (xd->tls_ctx == NULL || (ssl = SSL_new(xd->tls_ctx)) == NULL)
		return NULL;
	return xd_gate_bev(xd, base, ssl);
}

/* tcp.plain_http: the gate's filter over a socket bufferevent */
static struct bufferevent *
plain_bev(struct event_base *base, void *arg)
{
	return xd_gate_bev(arg, base, NULL);
}

static int
tls_listen(struct xd *xd, char *err, size_t errlen)
{
	char host[128], *colon;
	long port;

	snprintf(host, sizeof(host), "%s", xd->cfg->tcp);
	if ((colon = strrchr(host, ':')) == NULL) {
		snprintf(err, errlen, "tcp.listen: HOST:PORT");
		return -1;
	}
	*colon = '\0';
	port = strtol(colon + 1, NULL, 10);
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		if (host[0] && host[strlen(host) - 1] == ']')
			host[strlen(host) - 1] = '\0';
	}
	if (port <= 0 || port > 65535) {
		snprintf(err, errlen, "tcp.listen: bad port");
		return -1;
	}
	if (!xd->cfg->tcp_plain && (xd->tls_ctx = tls_ctx_new(xd->cfg, err,
	    errlen)) == NULL)
		return -1;
	if ((xd->http_tls = http_new(xd, &l_tls)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* l_tls is the TCP listener: bearer tokens, with or without TLS */
	l_tls.tls = 1;
	evhttp_set_bevcb(xd->http_tls, xd->cfg->tcp_plain ? plain_bev :
	    tls_bev, xd);
	if (xd->cfg->tcp_plain)
		xd_log(XD_LOG_WARN, "tcp.plain_http: %s serves PLAIN HTTP, "
		    "WITHOUT TLS: bearer tokens and every body cross the "
		    "network in the clear; use it on a private network only",
		    xd->cfg->tcp);
	if ((xd->bound_tls = evhttp_bind_socket_with_handle(xd->http_tls, host,
	    (ev_uint16_t)port)) == NULL) {
		snprintf(err, errlen, "tcp.listen %s: %s", xd->cfg->tcp,
		    strerror(errno));
		evhttp_free(xd->http_tls);
		xd->http_tls = NULL;
		return -1;
	}
	if (xd_gate_start(xd, xd->bound_tls, route_role) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int
xd_api_listen(struct xd *xd, char *err, size_t errlen)
{
	if (unix_listen(xd, err, errlen) != 0)
		return -1;
	if (xd->cfg->tcp[0] && tls_listen(xd, err, errlen) != 0)
		return -1;
	return 0;
}

int
xd_api_reload(struct xd *xd, char *err, size_t errlen)
{
	uint64_t max = xd->cfg->max_file_bytes > xd->cfg->max_body_bytes ?
	    xd->cfg->max_file_bytes : xd->cfg->max_body_bytes;

	/* evhttp takes a PUT of an archive up to max_archive_bytes (and a
	 * little: its handler answers 413), not twice it */
	if (2 * max <= xd->cfg->max_archive_bytes)
		max = xd->cfg->max_archive_bytes / 2 + 1;

	if (xd->http_tls != NULL && xd->cfg->tcp_plain) {
		evhttp_set_max_body_size(xd->http_tls, (ev_ssize_t)(2 * max));
		xd_gate_reload(xd);
	} else if (xd->http_tls != NULL) {
		SSL_CTX *n = tls_ctx_new(xd->cfg, err, errlen);

		if (n == NULL)
			return -1;
		/* connections made keep their SSL; new ones get the new
		 * certificate */
		SSL_CTX_free(xd->tls_ctx);
		xd->tls_ctx = n;
		evhttp_set_max_body_size(xd->http_tls, (ev_ssize_t)(2 * max));
		xd_gate_reload(xd);
	}
	/* /healthz probes again with the new configuration */
	hz_ok = -1;
	hz_gen++;
	if (xd->http_unix != NULL) {
		evhttp_set_max_body_size(xd->http_unix, (ev_ssize_t)(2 * max));
		/* the group and mode may have changed */
		if (xd->sock_path[0] && usock_perms(xd->sock_path, &xd->sock_id,
		    (mode_t)xd->cfg->socket_mode, xd->cfg->socket_group[0] ?
		    xd->cfg->socket_gid : (gid_t)-1, err, errlen) != 0)
			xd_log(XD_LOG_WARN, "reload: %s", err);
	}
	return 0;
}

void
xd_api_stop_accepting(struct xd *xd)
{
	struct xd_sub *sub;

	/* event streams have no end of their own: they end with the
	 * daemon */
	while ((sub = TAILQ_FIRST(&xd->subs)) != NULL)
		sub_end(sub->arg);
	if (xd->bound_unix != NULL) {
		evhttp_del_accept_socket(xd->http_unix, xd->bound_unix);
		xd->bound_unix = NULL;
	}
	if (xd->bound_tls != NULL) {
		xd_gate_unbind(xd);
		evhttp_del_accept_socket(xd->http_tls, xd->bound_tls);
		xd->bound_tls = NULL;
	}
	/* a new daemon may bind it now */
	if (xd->sock_path[0])
		usock_unlink(xd->sock_path, &xd->sock_id);
	xd->sock_path[0] = '\0';
}

void
xd_api_close(struct xd *xd)
{
	struct xd_sub *s;

	while ((s = TAILQ_FIRST(&xd->subs)) != NULL) {
		struct xd_call *k = s->arg;

		xd_event_unsub(xd, s);
		if (k->evcon != NULL)
			evhttp_connection_set_closecb(k->evcon, NULL, NULL);
		k->evcon = NULL;
		call_free(k);
	}
	if (xd->http_unix != NULL) {
		evhttp_free(xd->http_unix);
		xd->http_unix = NULL;
	}
	xd_gate_stop(xd);
	if (xd->http_tls != NULL) {
		evhttp_free(xd->http_tls);
		xd->http_tls = NULL;
	}
	if (xd->tls_ctx != NULL) {
		SSL_CTX_free(xd->tls_ctx);
		xd->tls_ctx = NULL;
	}
	if (xd->sock_path[0])
		usock_unlink(xd->sock_path, &xd->sock_id);
	xd->sock_path[0] = '\0';
}
