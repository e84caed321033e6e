/*
 * exec_os.c: the OpenSandbox-compatible API (DESIGN.md, "The
 * OpenSandbox-compatible API"): a second listener of sluice-execd
 * ("opensandbox".listen), so that OpenSandbox's SDKs and the apps on
 * them (ChatHub) run unchanged on sluice's sandboxes.
 *
 * Lifecycle, at /v1/... and /... (the reference server mounts both),
 * with the header OPEN-SANDBOX-API-KEY: the key names a tenant (and a
 * user, else the metadata's "sluice.user") and sees only that tenant's
 * sandboxes (another tenant's id is answered as a missing one):
 *
 *   POST   /sandboxes                        202 (image.uri -> profile)
 *   GET    /sandboxes[?state=&metadata=&page=&pageSize=]
 *   GET    /sandboxes/{id}     DELETE /sandboxes/{id} (204)
 *   PATCH  /sandboxes/{id}/metadata          JSON merge patch
 *   POST   /sandboxes/{id}/pause|resume      202
 *   POST   /sandboxes/{id}/renew-expiration  {expiresAt}
 *   GET    /sandboxes/{id}/endpoints/{port}  44772 execd, 18080 egress,
 *          any other the port proxy (?expires= a signed preview path)
 *
 * A sandbox made here is an ordinary sluice sandbox (xd_box_create: the
 * same id in the native API, its events, audit records and broker
 * session); what OpenSandbox says of it and sluice does not keep is in
 * its record (exec_os_http.c).  Its "timeout" is its lifetime: a sweep
 * deletes it at expiresAt, which renew-expiration moves.  States:
 * creating Pending, running Running, suspended Paused, deleting
 * Stopping, stopped Failed, removed (a record without a sandbox)
 * Terminated.
 *
 * execd, under /sandboxes/{id}/execd/..., with the header
 * X-EXECD-ACCESS-TOKEN that endpoints/44772 gave: exec_os_execd.c; the
 * egress sidecar under /sandboxes/{id}/egress/... with
 * OPENSANDBOX-EGRESS-AUTH: exec_os_eg.c; the port proxy under
 * /sandboxes/{id}/proxy/{port}/... with OpenSandbox-Secure-Access or a
 * signed path: exec_os_port.c.  Snapshots, pools and diagnostics answer
 * 501 NOT_SUPPORTED naming what is missing.
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include "proxy/lib/util.h"
#include "proxy/lib/apireply.h"
#include "sandbox-glue/executor/execd/exec_os-int.h"

#define EXECD_PORT	44772
#define EGRESS_PORT	18080
#define SWEEP_S		5
#define DEFAULT_ENTRY	"[\"tail\",\"-f\",\"/dev/null\"]"
#define PREVIEW_MAX_S	(7 * 86400)

/* RFC 3339 to unix milliseconds: -1 not one. */
static int64_t
parse_time(const char *s)
{
	struct tm tm;
	const char *p;
	char *end;
	int64_t t, ms = 0;
	long oh = 0, om = 0;

	if (s == NULL)
		return -1;
	memset(&tm, 0, sizeof(tm));
	if ((p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
		return -1;
	if (*p == '.') {
		long frac = 0, digits = 0;

		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 3)
				frac = frac * 10 + (*p - '0');
		while (digits > 0 && digits < 3) {
			frac *= 10;
			digits++;
		}
		ms = frac;
	}
	t = (int64_t)timegm(&tm);
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1;

		oh = strtol(p + 1, &end, 10);
		if (*end != ':')
			return -1;
		om = strtol(end + 1, &end, 10);
		p = end;
		t -= sign * (oh * 3600 + om * 60);
	} else
		return -1;
	if (*p != '\0')
		return -1;
	return t * 1000 + ms;
}

/* ---- sandboxes as OpenSandbox shows them ---- */

static const char *
state_of(const struct xd_box *b)
{
	if (b == NULL || b->state == XD_BOX_GONE)
		return "Terminated";
	switch (b->state) {
	case XD_BOX_CREATING: return "Pending";
	case XD_BOX_DELETING: return "Stopping";
	case XD_BOX_STOPPED: return "Failed";
	default: break;
	}
	if (!b->be->alive(&b->rec))
		return "Failed";
	return b->rec.suspended ? "Paused" : "Running";
}

static json_t *
sandbox_json(const struct xd_box *b, json_t *rec, const char *id)
{
	json_t *o, *img = json_object_get(rec, "image");
	json_t *ent = json_object_get(rec, "entrypoint");
	json_t *meta = json_object_get(rec, "metadata");
	json_int_t exp = json_integer_value(json_object_get(rec, "expiresAt"));
	int64_t created = rec != NULL ? json_integer_value(json_object_get(rec,
	    "createdAt")) : (int64_t)b->rec.created * 1000;
	const char *st = state_of(b);

	o = json_pack("{s:s,s:{s:s},s:O,s:O,s:o,s:o}", "id", b ? XD_REC_ID(&b->rec) :
	    id, "status", "state", st, "metadata", meta ? meta :
	    json_object(), "entrypoint", ent ? ent : json_pack("[s]",
	    "/bin/sh"), "createdAt", xd_os_iso_ms(created), "expiresAt",
	    exp > 0 ? xd_os_iso_ms(exp * 1000) : json_null());
	if (o == NULL)
		return NULL;
	/* json_pack's O took a reference of what it made here too */
	if (meta == NULL)
		json_decref(json_object_get(o, "metadata"));
	if (ent == NULL)
		json_decref(json_object_get(o, "entrypoint"));
	if (json_is_string(img))
		json_object_set_new(o, "image", json_pack("{s:O}", "uri", img));
	if (strcmp(st, "Terminated") == 0)
		json_object_set_new(json_object_get(o, "status"), "reason",
		    json_string(json_is_true(json_object_get(rec, "expired")) ?
		    "ttl_expiry" : "removed"));
	if (b != NULL && b->rec.suspended)
		json_object_set_new(json_object_get(o, "status"), "reason",
		    json_string("paused"));
	return o;
}

/* The id a record keeps ("" none). */
static const char *
rec_id(json_t *rec)
{
	const char *t = json_string_value(json_object_get(rec, "id"));

	return t != NULL ? t : "";
}

/* The tenant this API's record of id gives ("" none). */
static const char *
rec_tenant(json_t *rec)
{
	const char *t = json_string_value(json_object_get(rec, "tenant"));

	return t != NULL ? t : "";
}

/* The box of {id} for the caller's key: NULL answered 404 (a rec
 * without a box: *rec set, NULL returned, not answered when
 * rec_ok). */
static struct xd_box *
box_of(struct xd_os_call *k, json_t **recp, int rec_ok)
{
	/* ids are per tenant: the key's tenant names the sandbox */
	struct xd_box *b = xd_box_find(k->xd, k->key->tenant, k->arg[0], NULL);
	char key[SBX_ID_MAX + 1];
	json_t *rec;

	xd_os_key(k->key->tenant, k->arg[0], key);
	rec = xd_os_rec(k->xd->os, key);

	*recp = NULL;
	if (b != NULL && b->state == XD_BOX_GONE)
		b = NULL;
	if (b != NULL && strcmp(b->rec.tenant, k->key->tenant) != 0)
		b = NULL;
	if (rec != NULL && strcmp(json_string_value(json_object_get(rec,
	    "tenant")) ? json_string_value(json_object_get(rec, "tenant")) :
	    "", k->key->tenant) != 0)
		rec = NULL;
	if (b == NULL && (rec == NULL || !rec_ok)) {
		xd_os_reply_err(k, 404, "SANDBOX_NOT_FOUND", "no sandbox %s",
		    k->arg[0]);
		return NULL;
	}
	*recp = rec;
	if (b != NULL) {
		k->box = b;
		b->refs++;
	}
	return b;
}

/* ---- create ---- */

static int
str_map(json_t *v)
{
	const char *key;
	json_t *x;

	if (v == NULL || json_is_null(v))
		return 1;
	if (!json_is_object(v))
		return 0;
	json_object_foreach(v, key, x)
		if (!json_is_string(x))
			return 0;
	return 1;
}

/* ChatHub's working directory (opensandbox.workdir) inside the new
 * sandbox, a link to /workspace, so that a command naming it finds the
 * workspace; where that cannot be (a backend whose files the host does
 * not see), its paths and cwd still stand for the workspace. */
static void
workdir_link(struct xd_box *b)
{
	char err[XD_ERR_MAX];
	int rootfd;

	if (!b->xd->cfg->os.workdir[0] || b->be->root_fd == NULL)
		return;
	if ((rootfd = b->be->root_fd(&b->rec, err, sizeof(err))) < 0 ||
	    xd_osfs_workdir_link(&b->rec, rootfd, err, sizeof(err)) != 0)
		xd_log(XD_LOG_WARN, "opensandbox: sandbox %s: %s",
		    XD_REC_ID(&b->rec), err);
	if (rootfd >= 0)
		close(rootfd);
}

static void
gone_cb(void *arg, struct xd_box *b, struct xd_perr *e)
{
	(void)arg;
	if (b == NULL) {
		xd_log(XD_LOG_WARN, "opensandbox: a sandbox whose network "
		    "policy failed was not deleted: %s", e->msg);
		xd_perr_clear(e);
	}
}

/* The create's networkPolicy rules are in force (policy), or not (e):
 * then the sandbox goes again, since it would run without them. */
static void
create_policy_cb(struct xd_os_call *k, json_t *policy, struct xd_perr *e)
{
	char key[SBX_ID_MAX + 1];
	json_t *rec = json_object_get(k->body, "_rec");
	struct xd_box *b = k->box;
	struct xd_perr e2;

	if (policy != NULL) {
		xd_os_reply_json(k, 202, sandbox_json(b, rec,
		    XD_REC_ID(&b->rec)));
		return;
	}
	memset(&e2, 0, sizeof(e2));
	if (xd_box_delete(b, 0, "delete", gone_cb, NULL, &e2) != 0) {
		xd_log(XD_LOG_WARN, "opensandbox: %s", e2.msg);
		xd_perr_clear(&e2);
	}
	if (xd_os_rec_key(rec, key) == 0)
		xd_os_rec_drop(k->xd->os, key);
	xd_os_reply_perr(k, e);
}

static void
create_cb(void *arg, struct xd_box *b, struct xd_perr *e)
{
	char key[SBX_ID_MAX + 1];
	struct xd_os_call *k = arg;
	json_t *rec = json_object_get(k->body, "_rec"), *pol;
	struct xd_perr e2;

	if (b == NULL) {
		xd_audit_box(k->xd, "create", k->who, "app",
		    json_string_value(json_object_get(rec, "id")),
		    k->key->tenant, "", e->status, e->code, json_pack("{s:s}",
		    "message", e->msg));
		if (xd_os_rec_key(rec, key) == 0)
			xd_os_rec_drop(k->xd->os, key);
		xd_os_reply_perr(k, e);
		return;
	}
	xd_audit_box(k->xd, "create", k->who, "app", XD_REC_ID(&b->rec),
	    b->rec.tenant, b->rec.user, 202, NULL, json_pack("{s:s,s:s,s:O}",
	    "api", "opensandbox", "profile", b->rec.profile[0] ?
	    b->rec.profile : "host", "image_uri", json_object_get(rec,
	    "image")));
	(void)!xd_os_rec_save(k->xd->os, rec);
	workdir_link(b);
	pol = json_object_get(k->body, "_policy");
	if (json_array_size(json_object_get(pol, "egress")) > 0) {
		/* the rules before the sandbox is handed over: a target
		 * denied must be so from the first command on */
		k->box = b;
		b->refs++;
		memset(&e2, 0, sizeof(e2));
		if (xd_os_policy_apply(k, b, pol, create_policy_cb, &e2) != 0)
			create_policy_cb(k, NULL, &e2);
		return;
	}
	if (pol != NULL) {
		json_object_set(rec, "policy", pol);
		(void)!xd_os_rec_save(k->xd->os, rec);
	}
	xd_os_reply_json(k, 202, sandbox_json(b, rec, XD_REC_ID(&b->rec)));
}

/* What a create asks for that sluice does not do or that is malformed:
 * answered here (501 or 400) and -1; else 0 with the image's uri, its
 * profile and the user (the key's, else metadata's "sluice.user"). */
static int
create_check(struct xd_os_call *k, const char **urip, const char **profilep,
    const char **userp)
{
	const struct xd_os_cfg *oc = &k->xd->cfg->os;
	json_t *body = k->body, *img = json_object_get(body, "image");
	json_t *to = json_object_get(body, "timeout");
	json_t *rl = json_object_get(body, "resourceLimits");
	json_t *meta = json_object_get(body, "metadata");
	json_t *env = json_object_get(body, "env");
	json_t *ent = json_object_get(body, "entrypoint");
	json_t *vol = json_object_get(body, "volumes"), *plat =
	    json_object_get(body, "platform"), *cp = json_object_get(body,
	    "credentialProxy");
	const char *uri, *profile, *user = *userp;
	char list[1024] = "";
	size_t i, o = 0;

	if (json_object_get(body, "snapshotId") != NULL && !json_is_null(
	    json_object_get(body, "snapshotId"))) {
		xd_os_reply_err(k, 501, "NOT_SUPPORTED", "snapshotId: sluice "
		    "takes no snapshots of a sandbox (its workspace is "
		    "archived on delete; see sluice-execd(8))");
		return -1;
	}
	if (!json_is_object(img) || (uri = json_string_value(json_object_get(
	    img, "uri"))) == NULL || !uri[0]) {
		xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY", "image.uri is "
		    "required");
		return -1;
	}
	if ((profile = xd_os_image_profile(oc, uri)) == NULL) {
		for (i = 0; i < oc->nimages; i++)
			o += (size_t)snprintf(list + o, o < sizeof(list) ?
			    sizeof(list) - o : 0, "%s%s", i ? ", " : "",
			    oc->images[i].uri);
		xd_os_reply_err(k, 400, "IMAGE_NOT_ALLOWED", "image %s is not "
		    "one this server runs; it runs: %s", uri, list);
		return -1;
	}
	if (json_is_object(plat) && json_is_string(json_object_get(plat,
	    "os")) && strcmp(json_string_value(json_object_get(plat, "os")),
	    "linux") != 0) {
		xd_os_reply_err(k, 501, "NOT_SUPPORTED", "platform.os %s: sluice "
		    "runs Linux sandboxes only", json_string_value(
		    json_object_get(plat, "os")));
		return -1;
	}
	if (json_is_array(vol) && json_array_size(vol) > 0) {
		xd_os_reply_err(k, 501, "NOT_SUPPORTED", "volumes: a sluice "
		    "sandbox mounts its own workspace only");
		return -1;
	}
	if (json_is_object(cp) && json_is_true(json_object_get(cp,
	    "enabled"))) {
		xd_os_reply_err(k, 501, "NOT_SUPPORTED", "credentialProxy: use "
		    "sluice's request rules and credentials (sluiced)");
		return -1;
	}
	if (to != NULL && !json_is_null(to) && (!json_is_integer(to) ||
	    json_integer_value(to) < 60 || json_integer_value(to) >
	    oc->max_timeout_s)) {
		xd_os_reply_err(k, 400, "INVALID_TIMEOUT", "timeout: 60 to %ld "
		    "seconds (this server's maximum timeout), or null",
		    oc->max_timeout_s);
		return -1;
	}
	if (!str_map(meta) || !str_map(env) || !str_map(rl) || (ent != NULL &&
	    !json_is_null(ent) && !json_is_array(ent))) {
		xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY", "metadata, env "
		    "and resourceLimits: maps of strings; entrypoint: an "
		    "array");
		return -1;
	}
	if (json_is_object(meta)) {
		const char *mk;
		json_t *mv;

		json_object_foreach(meta, mk, mv)
			if (strncmp(mk, "opensandbox.io/", 15) == 0) {
				xd_os_reply_err(k, 400, "INVALID_METADATA", "%s: "
				    "the opensandbox.io/ prefix is reserved",
				    mk);
				return -1;
			}
		if (!user[0] && json_is_string(json_object_get(meta,
		    "sluice.user")))
			user = json_string_value(json_object_get(meta,
			    "sluice.user"));
	}
	*urip = uri;
	*profilep = profile;
	*userp = user;
	return 0;
}

/* resourceLimits as a create's limits (above the admin's maximum held
 * to it: OpenSandbox's SDK asks for 1 CPU and 2 GiB unasked); NULL when
 * malformed, answered here. */
static json_t *
create_limits(struct xd_os_call *k, json_t *rl)
{
	const struct xd_cfg *c = k->xd->cfg;
	json_t *lims;
	long v;

	lims = json_object();
	if (json_is_object(rl)) {
		const char *cpu = json_string_value(json_object_get(rl, "cpu"));
		const char *mem = json_string_value(json_object_get(rl,
		    "memory"));

		if (cpu != NULL) {
			if (xd_os_cpu_pct(cpu, &v) != 0) {
				json_decref(lims);
				xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY",
				    "resourceLimits.cpu: \"500m\", \"1\"");
				return NULL;
			}
			if (c->max.sbx.cpu_pct && (uint64_t)v >
			    c->max.sbx.cpu_pct)
				v = (long)c->max.sbx.cpu_pct;
			json_object_set_new(lims, "cpu_pct", json_integer(v));
		}
		if (mem != NULL) {
			if (xd_os_mem_mb(mem, &v) != 0) {
				json_decref(lims);
				xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY",
				    "resourceLimits.memory: \"512Mi\", \"2Gi\"");
				return NULL;
			}
			if (c->max.sbx.memory_bytes && (uint64_t)v << 20 >
			    c->max.sbx.memory_bytes)
				v = (long)(c->max.sbx.memory_bytes >> 20);
			json_object_set_new(lims, "memory_mb", json_integer(v));
		}
	}
	return lims;
}

static void
h_create(struct xd_os_call *k)
{
	char key[SBX_ID_MAX + 1];
	const struct xd_cfg *c = k->xd->cfg;
	json_t *body = k->body;
	json_t *to = json_object_get(body, "timeout");
	json_t *rl = json_object_get(body, "resourceLimits");
	json_t *np = json_object_get(body, "networkPolicy");
	json_t *meta = json_object_get(body, "metadata");
	json_t *env = json_object_get(body, "env");
	json_t *ent = json_object_get(body, "entrypoint");
	const char *uri, *profile, *user = k->key->user, *tier = c->tier;
	unsigned char rnd[8];
	char id[40];
	struct xd_create_spec s;
	struct xd_perr e;
	json_t *native, *lims, *rec, *pol;

	memset(&e, 0, sizeof(e));
	if (create_check(k, &uri, &profile, &user) != 0)
		return;
	if (np != NULL && !json_is_null(np)) {
		/* the tier now, the rules once the session is there
		 * (create_cb) */
		if (xd_os_policy_parse(np, &pol, &e) != 0) {
			xd_os_reply_perr(k, &e);
			return;
		}
		tier = xd_os_policy_tier(pol);
		json_object_set_new(k->body, "_policy", pol);
	}
	if ((lims = create_limits(k, rl)) == NULL)
		return;
	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		json_decref(lims);
		xd_os_reply_err(k, 500, "RUNTIME_ERROR", "no random bytes");
		return;
	}
	/* 48 random bits: unique on a host, and short, since the host's
	 * name of a tenant's sandbox adds 9 characters and sluiced's
	 * session socket <runtime_dir>/sessions/<key>/proxy.sock must fit
	 * in a socket address (107 bytes) */
	snprintf(id, sizeof(id), "os-%02x%02x%02x%02x%02x%02x", rnd[0],
	    rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	native = json_pack("{s:s,s:s,s:s,s:s,s:{s:s},s:o}", "id", id, "tenant",
	    k->key->tenant, "user", user, "profile", profile, "network",
	    "tier", tier, "limits", lims);
	if (native == NULL || xd_create_parse(native, &c->def, &c->max, c->tier,
	    c->backend, &s, &e) != 0) {
		json_decref(native);
		if (e.status == 0) {
			e.status = 400;
			e.code = "INVALID_REQUEST_BODY";
			snprintf(e.msg, sizeof(e.msg), "user: at most 128 "
			    "bytes");
		}
		xd_os_reply_perr(k, &e);
		return;
	}
	json_decref(native);
	s.bound = 1;
	rec = json_pack("{s:s,s:s,s:s,s:s,s:O,s:O,s:I,s:I}", "id", id,
	    "tenant", k->key->tenant, "user", s.user, "image", uri, "metadata",
	    json_is_object(meta) ? meta : json_object(), "env",
	    json_is_object(env) ? env : json_object(), "createdAt",
	    (json_int_t)util_wall_ms(), "expiresAt", json_is_integer(to) ?
	    (json_int_t)(time(NULL) + json_integer_value(to)) : 0);
	if (rec == NULL) {
		xd_os_reply_err(k, 500, "RUNTIME_ERROR", "out of memory");
		return;
	}
	if (!json_is_object(meta))
		json_decref(json_object_get(rec, "metadata"));
	if (!json_is_object(env))
		json_decref(json_object_get(rec, "env"));
	json_object_set(rec, "entrypoint", json_is_array(ent) ? ent :
	    json_loads(DEFAULT_ENTRY, 0, NULL));
	if (!json_is_array(ent))
		json_decref(json_object_get(rec, "entrypoint"));
	/* kept with the call until the create ends; known at once so that
	 * a GET during the create finds it */
	json_object_set_new(k->body, "_rec", rec);
	xd_os_key(k->key->tenant, id, key);
	json_object_set(k->xd->os->recs, key, rec);
	if (k->xd->draining) {
		json_object_del(k->xd->os->recs, key);
		xd_os_reply_err(k, 503, "UNAVAILABLE", "the executor is "
		    "shutting down");
		return;
	}
	xd_os_call_wait(k);
	if (xd_box_create(k->xd, &s, create_cb, k, &e) != 0) {
		json_object_del(k->xd->os->recs, key);
		xd_os_reply_perr(k, &e);
	}
}

/* ---- get, list, delete ---- */

static void
h_get(struct xd_os_call *k)
{
	json_t *rec;
	struct xd_box *b = box_of(k, &rec, 1);

	if (b == NULL && rec == NULL)
		return;
	xd_os_reply_json(k, 200, sandbox_json(b, rec, k->arg[0]));
}

/* "k=v&k2=v2" (url-encoded as one query value) all in meta. */
static int
meta_match(json_t *meta, const char *filter)
{
	struct evkeyvalq q;
	struct evkeyval *kv;
	int ok = 1;

	if (filter == NULL || !filter[0])
		return 1;
	TAILQ_INIT(&q);
	if (evhttp_parse_query_str(filter, &q) != 0)
		return 0;
	TAILQ_FOREACH(kv, &q, next) {
		const char *v = json_string_value(json_object_get(meta,
		    kv->key));

		if (v == NULL || strcmp(v, kv->value) != 0)
			ok = 0;
	}
	evhttp_clear_headers(&q);
	return ok;
}

static void
h_list(struct xd_os_call *k)
{
	char key[SBX_ID_MAX + 1];
	const char *ps = xd_os_q(k, "page"), *pss = xd_os_q(k, "pageSize");
	const char *mf = xd_os_q(k, "metadata");
	json_t *all = json_array(), *items, *seen = json_object(), *rec, *o;
	struct evkeyval *kv;
	struct xd_box *b;
	const char *id;
	long page = 1, size = 20, total, i;
	int nstates = 0;

	if ((ps && (page = strtol(ps, NULL, 10)) < 1) || (pss && ((size =
	    strtol(pss, NULL, 10)) < 1 || size > 1000))) {
		json_decref(all);
		json_decref(seen);
		xd_os_reply_err(k, 400, "INVALID_REQUEST", "page >= 1, pageSize "
		    "1 to 1000");
		return;
	}
	if (k->query != NULL)
		TAILQ_FOREACH(kv, k->query, next)
			if (strcmp(kv->key, "state") == 0)
				nstates++;
	TAILQ_FOREACH(b, &k->xd->boxes, link) {
		if (b->state == XD_BOX_GONE || strcmp(b->rec.tenant,
		    k->key->tenant) != 0)
			continue;
		xd_os_key(b->rec.tenant, XD_REC_ID(&b->rec), key);
		rec = xd_os_rec(k->xd->os, key);
		json_object_set_new(seen, key, json_true());
		json_array_append_new(all, sandbox_json(b, rec, XD_REC_ID(&b->rec)));
	}
	json_object_foreach(k->xd->os->recs, id, rec) {
		const char *t = json_string_value(json_object_get(rec,
		    "tenant"));

		if (json_object_get(seen, id) != NULL || t == NULL ||
		    strcmp(t, k->key->tenant) != 0)
			continue;
		/* a record without its sandbox: named by the id it keeps */
		json_array_append_new(all, sandbox_json(NULL, rec,
		    json_string_value(json_object_get(rec, "id"))));
	}
	json_decref(seen);
	items = json_array();
	total = 0;
	for (i = 0; i < (long)json_array_size(all); i++) {
		const char *st;
		int ok = nstates == 0;

		o = json_array_get(all, (size_t)i);
		st = json_string_value(json_object_get(json_object_get(o,
		    "status"), "state"));
		if (!ok)
			TAILQ_FOREACH(kv, k->query, next)
				if (strcmp(kv->key, "state") == 0 &&
				    strcasecmp(kv->value, st) == 0)
					ok = 1;
		if (!ok || !meta_match(json_object_get(o, "metadata"), mf))
			continue;
		if (total >= (page - 1) * size && total < page * size)
			json_array_append(items, o);
		total++;
	}
	json_decref(all);
	xd_os_reply_json(k, 200, json_pack("{s:o,s:{s:I,s:I,s:I,s:I,s:b}}",
	    "items", items, "pagination", "page", (json_int_t)page, "pageSize",
	    (json_int_t)size, "totalItems", (json_int_t)total, "totalPages",
	    (json_int_t)((total + size - 1) / size), "hasNextPage", page *
	    size < total));
}

static void
delete_cb(void *arg, struct xd_box *b, struct xd_perr *e)
{
	char key[SBX_ID_MAX + 1];
	struct xd_os_call *k = arg;

	if (b == NULL) {
		xd_os_reply_perr(k, e);
		return;
	}
	xd_audit_box(k->xd, "delete", k->who, "app", XD_REC_ID(&b->rec),
	    b->rec.tenant, b->rec.user, 204, NULL, json_pack("{s:s,s:s}",
	    "api", "opensandbox", "archive", "discarded"));
	xd_os_key(b->rec.tenant, XD_REC_ID(&b->rec), key);
	xd_os_rec_drop(k->xd->os, key);
	xd_os_reply_empty(k, 204);
}

static void
h_delete(struct xd_os_call *k)
{
	json_t *rec;
	struct xd_box *b = box_of(k, &rec, 1);
	struct xd_perr e;

	if (b == NULL) {
		if (rec != NULL) {
			/* removed meanwhile (sluice's lifecycle): the
			 * record goes */
			char key[SBX_ID_MAX + 1];

			xd_os_key(k->key->tenant, k->arg[0], key);
			xd_os_rec_drop(k->xd->os, key);
			xd_os_reply_empty(k, 204);
		}
		return;
	}
	memset(&e, 0, sizeof(e));
	xd_os_call_wait(k);
	/* OpenSandbox's delete is the end of the sandbox: no archive */
	if (xd_box_delete(b, 0, "delete", delete_cb, k, &e) != 0)
		xd_os_reply_perr(k, &e);
}

/* ---- metadata, pause, resume, renew ---- */

static json_t *
rec_for(struct xd_os_call *k, struct xd_box *b, json_t *rec)
{
	char key[SBX_ID_MAX + 1];
	if (rec != NULL)
		return rec;
	/* a sandbox made by the native API: a record of its own now */
	rec = json_pack("{s:s,s:s,s:s,s:{},s:{},s:I,s:I}", "id", XD_REC_ID(&b->rec),
	    "tenant", b->rec.tenant, "user", b->rec.user, "metadata", "env",
	    "createdAt", (json_int_t)b->rec.created * 1000, "expiresAt",
	    (json_int_t)0);
	xd_os_key(b->rec.tenant, XD_REC_ID(&b->rec), key);
	json_object_set_new(k->xd->os->recs, key, rec);
	return rec;
}

static void
h_metadata(struct xd_os_call *k)
{
	json_t *rec, *meta, *v;
	struct xd_box *b = box_of(k, &rec, 0);
	const char *key;

	if (b == NULL)
		return;
	json_object_foreach(k->body, key, v) {
		if (strncmp(key, "opensandbox.io/", 15) == 0 || (!json_is_null(
		    v) && !json_is_string(v))) {
			xd_os_reply_err(k, 400, "INVALID_METADATA", "%s: a "
			    "string or null (the opensandbox.io/ prefix is "
			    "reserved)", key);
			return;
		}
	}
	rec = rec_for(k, b, rec);
	if (!json_is_object(meta = json_object_get(rec, "metadata"))) {
		json_object_set_new(rec, "metadata", json_object());
		meta = json_object_get(rec, "metadata");
	}
	json_object_foreach(k->body, key, v) {
		if (json_is_null(v))
			json_object_del(meta, key);
		else
			json_object_set(meta, key, v);
	}
	(void)!xd_os_rec_save(k->xd->os, rec);
	xd_os_reply_json(k, 200, sandbox_json(b, rec, XD_REC_ID(&b->rec)));
}

static void
h_pause(struct xd_os_call *k)
{
	json_t *rec;
	struct xd_box *b = box_of(k, &rec, 0);
	struct xd_cmd *c;
	char err[XD_ERR_MAX];

	if (b == NULL)
		return;
	if (b->rec.suspended) {
		xd_os_reply_empty(k, 202);
		return;
	}
	if (b->state != XD_BOX_RUNNING || b->op || b->fg != NULL ||
	    b->proc_jobs > 0) {
		xd_os_reply_err(k, 409, "SANDBOX_BUSY", "sandbox %s is busy "
		    "(a command, a create, a delete)", XD_REC_ID(&b->rec));
		return;
	}
	TAILQ_FOREACH(c, &b->cmds, link)
		if (c->running) {
			xd_os_reply_err(k, 409, "SANDBOX_BUSY", "sandbox %s "
			    "runs background command %s: sluice pauses idle "
			    "sandboxes only (stop it first)", XD_REC_ID(&b->rec),
			    c->id);
			return;
		}
	if (b->be->suspend(&b->rec, err, sizeof(err)) != 0) {
		xd_os_reply_err(k, 503, "BACKEND_UNAVAILABLE", "cannot pause: "
		    "%s", err);
		return;
	}
	(void)!xd_rec_save(&b->rec);
	b->xd->stats.suspended++;
	xd_event(b->xd, "sandbox", "suspended", b->rec.tenant, json_pack(
	    "{s:s,s:s,s:s,s:s}", "id", XD_REC_ID(&b->rec), "tenant", b->rec.tenant,
	    "user", b->rec.user, "reason", "pause"));
	xd_audit_box(k->xd, "suspend", k->who, "app", XD_REC_ID(&b->rec),
	    b->rec.tenant, b->rec.user, 202, NULL, json_pack("{s:s,s:s}",
	    "api", "opensandbox", "reason", "pause"));
	xd_os_reply_empty(k, 202);
}

static void
h_resume(struct xd_os_call *k)
{
	json_t *rec;
	struct xd_box *b = box_of(k, &rec, 0);
	struct xd_perr e;

	if (b == NULL)
		return;
	memset(&e, 0, sizeof(e));
	if (xd_box_use(b, k->who, "app", &e) != 0) {
		xd_os_reply_perr(k, &e);
		return;
	}
	xd_os_reply_empty(k, 202);
}

static void
h_renew(struct xd_os_call *k)
{
	json_t *rec;
	struct xd_box *b = box_of(k, &rec, 0);
	int64_t t;

	if (b == NULL)
		return;
	t = parse_time(json_string_value(json_object_get(k->body,
	    "expiresAt")));
	if (t < 0 || t <= util_wall_ms()) {
		xd_os_reply_err(k, 400, "INVALID_EXPIRATION", "expiresAt: an "
		    "RFC 3339 time in the future");
		return;
	}
	rec = rec_for(k, b, rec);
	json_object_set_new(rec, "expiresAt", json_integer((t + 999) / 1000));
	(void)!xd_os_rec_save(k->xd->os, rec);
	(void)!xd_box_use(b, k->who, "app", &(struct xd_perr){ 0 });
	xd_os_reply_json(k, 200, json_pack("{s:o}", "expiresAt",
	    xd_os_iso_ms(((t + 999) / 1000) * 1000)));
}

/* Any other port: the port proxy into the sandbox (exec_os_port.c),
 * with the port's token in OpenSandbox-Secure-Access, or with expires=
 * a signed path for a browser preview (no headers). */
static void
endpoint_port(struct xd_os_call *k, struct xd_box *b, const char *host,
    long port)
{
	char key[SBX_ID_MAX + 1], tok[65], ep[600];
	const char *ex = xd_os_q(k, "expires");
	long long exp = 0, now = (long long)time(NULL);
	char *end;

	xd_os_key(b->rec.tenant, XD_REC_ID(&b->rec), key);
	if (ex != NULL) {
		errno = 0;
		exp = strtoll(ex, &end, 10);
		if (errno != 0 || end == ex || *end != '\0' || exp <= now ||
		    exp > now + PREVIEW_MAX_S) {
			xd_os_reply_err(k, 400, "INVALID_EXPIRES", "expires: "
			    "unix seconds in the future, at most %d days away",
			    PREVIEW_MAX_S / 86400);
			return;
		}
	}
	xd_os_port_token(k->xd->os, key, port, exp, tok);
	if (exp > 0) {
		snprintf(ep, sizeof(ep), "%s/sandboxes/%s/proxy/%ld@%lld.%s",
		    host, XD_REC_ID(&b->rec), port, exp, tok);
		xd_os_reply_json(k, 200, json_pack("{s:s}", "endpoint", ep));
		return;
	}
	snprintf(ep, sizeof(ep), "%s/sandboxes/%s/proxy/%ld", host,
	    XD_REC_ID(&b->rec), port);
	xd_os_reply_json(k, 200, json_pack("{s:s,s:{s:s}}", "endpoint", ep,
	    "headers", "OpenSandbox-Secure-Access", tok));
}

static void
h_endpoint(struct xd_os_call *k)
{
	char key[SBX_ID_MAX + 1];
	const struct xd_os_cfg *oc = &k->xd->cfg->os;
	const char *host = oc->endpoint_host, *hh;
	json_t *rec;
	struct xd_box *b = box_of(k, &rec, 0);
	char tok[65], ep[512];
	long port;
	char *end;

	if (b == NULL)
		return;
	port = strtol(k->arg[1], &end, 10);
	if (*end != '\0' || port < 1 || port > 65535) {
		xd_os_reply_err(k, 400, "INVALID_PORT", "port: 1 to 65535");
		return;
	}
	/* the host the client reached us by, unless configured */
	if (!host[0]) {
		hh = evhttp_find_header(evhttp_request_get_input_headers(
		    k->req), "Host");
		host = hh != NULL && hh[0] && strlen(hh) < 200 && strpbrk(hh,
		    "/ \t@?#") == NULL ? hh : oc->listen;
	}
	if (port != EXECD_PORT && port != EGRESS_PORT) {
		endpoint_port(k, b, host, port);
		return;
	}
	if (xd_os_q(k, "expires") != NULL) {
		xd_os_reply_err(k, 501, "NOT_SUPPORTED", "signed endpoints "
		    "(expires=) of execd and egress: their endpoints carry a "
		    "per-sandbox token instead");
		return;
	}
	snprintf(ep, sizeof(ep), "%s/sandboxes/%s/%s", host, XD_REC_ID(&b->rec),
	    port == EXECD_PORT ? "execd" : "egress");
	/* the token stands for this tenant's sandbox only (xd_os_key) */
	xd_os_key(b->rec.tenant, XD_REC_ID(&b->rec), key);
	xd_os_token(k->xd->os, key, tok);
	xd_os_reply_json(k, 200, json_pack("{s:s,s:{s:s}}", "endpoint", ep,
	    "headers", port == EXECD_PORT ? "X-EXECD-ACCESS-TOKEN" :
	    "OPENSANDBOX-EGRESS-AUTH", tok));
}

/* ---- expiry ---- */

static void
expired_cb(void *arg, struct xd_box *b, struct xd_perr *e)
{
	char key[SBX_ID_MAX + 1];
	struct xd *xd = arg;
	json_t *rec;

	if (b == NULL) {
		xd_log(XD_LOG_WARN, "opensandbox: expiry: %s", e->msg);
		xd_perr_clear(e);
		return;
	}
	xd_audit_box(xd, "delete", "sluice-execd", "daemon", XD_REC_ID(&b->rec),
	    b->rec.tenant, b->rec.user, 200, NULL, json_pack("{s:s,s:s}",
	    "api", "opensandbox", "reason", "ttl_expiry"));
	xd_os_key(b->rec.tenant, XD_REC_ID(&b->rec), key);
	if ((rec = xd_os_rec(xd->os, key)) != NULL) {
		json_object_set_new(rec, "expired", json_true());
		(void)!xd_os_rec_save(xd->os, rec);
	}
}

static void
sweep(evutil_socket_t fd, short what, void *arg)
{
	struct xd *xd = arg;
	struct timeval tv = { SWEEP_S, 0 };
	json_int_t now = (json_int_t)time(NULL);
	const char *id;
	json_t *rec;

	(void)fd;
	(void)what;
	json_object_foreach(xd->os->recs, id, rec) {
		json_int_t exp = json_integer_value(json_object_get(rec,
		    "expiresAt"));
		struct xd_box *b;
		struct xd_perr e;

		if (exp <= 0 || exp > now || (b = xd_box_find(xd,
		    rec_tenant(rec), json_string_value(json_object_get(rec,
		    "id")), NULL)) == NULL ||
		    b->state != XD_BOX_RUNNING || b->op)
			continue;
		xd_log(XD_LOG_INFO, "opensandbox: sandbox %s expired", id);
		memset(&e, 0, sizeof(e));
		if (xd_box_delete(b, 0, "delete", expired_cb, xd, &e) != 0) {
			xd_log(XD_LOG_WARN, "opensandbox: expiry of %s: %s", id,
			    e.msg);
			xd_perr_clear(&e);
		}
	}
	evtimer_add(xd->os->ev_sweep, &tv);
}

/* ---- the request callback ---- */

static void
h_unsupported(struct xd_os_call *k, const char *what)
{
	xd_os_reply_err(k, 501, "NOT_SUPPORTED", "sluice does not provide %s",
	    what);
}

struct lroute {
	enum evhttp_cmd_type m;
	const char *pattern;
	int body;               /* 0 none, 1 object, 2 optional object */
	void (*fn)(struct xd_os_call *k);
};

static const struct lroute lroutes[] = {
	{ EVHTTP_REQ_POST, "/sandboxes", 1, h_create },
	{ EVHTTP_REQ_GET, "/sandboxes", 0, h_list },
	{ EVHTTP_REQ_GET, "/sandboxes/{id}", 0, h_get },
	{ EVHTTP_REQ_DELETE, "/sandboxes/{id}", 0, h_delete },
	{ EVHTTP_REQ_PATCH, "/sandboxes/{id}/metadata", 1, h_metadata },
	{ EVHTTP_REQ_POST, "/sandboxes/{id}/pause", 2, h_pause },
	{ EVHTTP_REQ_POST, "/sandboxes/{id}/resume", 2, h_resume },
	{ EVHTTP_REQ_POST, "/sandboxes/{id}/renew-expiration", 1, h_renew },
	{ EVHTTP_REQ_GET, "/sandboxes/{id}/endpoints/{port}", 0, h_endpoint },
};

/* A call to a sandbox's execd (egress 0) or egress sidecar (1), with
 * the token its endpoint gave. */
static void
execd_call(struct xd_os_call *k, const char *path, int egress)
{
	char key[SBX_ID_MAX + 1];
	const char *hdr = egress ? "OPENSANDBOX-EGRESS-AUTH" :
	    "X-EXECD-ACCESS-TOKEN";
	struct xd_box *b, *c;
	struct xd_perr e;
	const char *rest, *rk;
	json_t *rec;

	/* the token is one tenant's sandbox's (HMAC of its key): ids are
	 * per tenant, so the sandbox is the one of that id whose key the
	 * token was made for, and a wrong token says nothing of ids */
	b = NULL;
	TAILQ_FOREACH(c, &k->xd->boxes, link) {
		if (c->state == XD_BOX_GONE ||
		    strcmp(XD_REC_ID(&c->rec), k->arg[0]) != 0)
			continue;
		xd_os_key(c->rec.tenant, k->arg[0], key);
		if (xd_os_token_ok(k->xd->os, key, k->req, hdr)) {
			b = c;
			break;
		}
	}
	if (b == NULL) {
		/* a right token of a sandbox that is gone (its record
		 * stays until it is deleted here) is 404, any other 401 */
		json_object_foreach(k->xd->os->recs, rk, rec)
			if (strcmp(rec_id(rec), k->arg[0]) == 0 &&
			    xd_os_token_ok(k->xd->os, rk, k->req, hdr)) {
				xd_os_reply_err(k, 404, "SANDBOX_NOT_FOUND",
				    "no sandbox %s", k->arg[0]);
				return;
			}
		apireply_json(k->req, 401, json_pack("{s:s++}", "error",
		    "Unauthorized: ", hdr, " missing or wrong"));
		xd_os_call_free(k);
		return;
	}
	k->box = b;
	b->refs++;
	snprintf(k->who, sizeof(k->who), "opensandbox:%s", egress ? "egress" :
	    "execd");
	/* what follows /sandboxes/{id}/execd|egress (the id is one
	 * segment) */
	rest = path + 11;
	rest += strcspn(rest, "/") + (egress ? 7 : 6);
	if (!rest[0])
		rest = "/";
	if (egress) {
		/* the policy is the broker's: no need to wake the sandbox */
		xd_os_egress(k, rest);
		return;
	}
	/* a call is a use: a paused sandbox is resumed first */
	memset(&e, 0, sizeof(e));
	if (strcmp(rest, "/ping") != 0 && xd_box_use(b, k->who, "app", &e) !=
	    0) {
		xd_os_reply_perr(k, &e);
		return;
	}
	xd_os_execd(k, rest);
}

/* /sandboxes/{id}/proxy/{port}[@{expires}.{sig}][/...]: the port
 * proxy, with the port's token or a signed path (exec_os_port.c). */
static void
proxy_call(struct xd_os_call *k, const char *path)
{
	char id[SBX_ID_MAX + 1], key[SBX_ID_MAX + 1];
	const char *p = path + 11, *seg, *rest, *tok;
	long long exp = 0;
	struct xd_box *b, *c;
	struct xd_perr e;
	size_t n = strcspn(p, "/"), m;
	char segb[128], *end;
	long port;

	if (n == 0 || n > SBX_ID_MAX) {
		xd_os_reply_err(k, 404, "SANDBOX_NOT_FOUND", "no such sandbox");
		return;
	}
	memcpy(id, p, n);
	id[n] = '\0';
	seg = p + n + 7;        /* "/proxy/" */
	m = strcspn(seg, "/");
	rest = seg + m;
	if (m == 0 || m >= sizeof(segb)) {
		xd_os_reply_err(k, 400, "INVALID_PORT", "port: 1 to 65535");
		return;
	}
	memcpy(segb, seg, m);
	segb[m] = '\0';
	errno = 0;
	port = strtol(segb, &end, 10);
	if (errno != 0 || end == segb || port < 1 || port > 65535 ||
	    (*end != '\0' && *end != '@')) {
		xd_os_reply_err(k, 400, "INVALID_PORT", "port: 1 to 65535");
		return;
	}
	tok = evhttp_find_header(evhttp_request_get_input_headers(k->req),
	    "OpenSandbox-Secure-Access");
	if (*end == '@') {
		exp = strtoll(end + 1, &end, 10);
		if (*end != '.' || exp <= 0) {
			xd_os_reply_err(k, 400, "INVALID_PORT", "a signed port "
			    "segment is {port}@{expires}.{signature}");
			return;
		}
		tok = end + 1;
		if (exp < (long long)time(NULL)) {
			xd_os_reply_err(k, 401, "UNAUTHORIZED", "this preview "
			    "link expired; ask for a new one");
			return;
		}
	}
	/* the token is of one tenant's sandbox and port (ids are per
	 * tenant): the sandbox of that id whose key it was made for */
	b = NULL;
	TAILQ_FOREACH(c, &k->xd->boxes, link) {
		if (c->state == XD_BOX_GONE || strcmp(XD_REC_ID(&c->rec), id) !=
		    0)
			continue;
		xd_os_key(c->rec.tenant, id, key);
		if (xd_os_port_token_ok(k->xd->os, key, port, exp, tok)) {
			b = c;
			break;
		}
	}
	if (b == NULL) {
		xd_os_reply_err(k, 401, "UNAUTHORIZED", "OpenSandbox-Secure-"
		    "Access missing or wrong for this sandbox's port (get it "
		    "from endpoints/{port})");
		return;
	}
	k->box = b;
	b->refs++;
	snprintf(k->who, sizeof(k->who), "opensandbox:proxy");
	memset(&e, 0, sizeof(e));
	if (xd_box_use(b, k->who, "app", &e) != 0) {
		xd_os_reply_perr(k, &e);
		return;
	}
	xd_os_port(k, port, rest);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	struct xd *xd = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL, *qs, *key;
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	struct xd_os_call *k;
	size_t i, len = evbuffer_get_length(in);
	int known = 0;
	json_error_t je;

	if ((k = calloc(1, sizeof(*k))) == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	k->xd = xd;
	k->req = req;
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "X-Request-ID", "sluice");
	if (path == NULL) {
		xd_os_reply_err(k, 400, "INVALID_REQUEST", "no path");
		return;
	}
	if ((qs = evhttp_uri_get_query(uri)) != NULL) {
		if ((k->query = calloc(1, sizeof(*k->query))) == NULL) {
			xd_os_reply_err(k, 500, "RUNTIME_ERROR", "out of memory");
			return;
		}
		TAILQ_INIT(k->query);
		if (evhttp_parse_query_str(qs, k->query) != 0) {
			xd_os_reply_err(k, 400, "INVALID_REQUEST", "the query "
			    "does not parse");
			return;
		}
	}
	if (strncmp(path, "/v1/", 4) == 0)
		path += 3;
	/* execd: /sandboxes/{id}/execd[/...] with its token */
	if (xd_route_match("/sandboxes/{id}/execd", path, k->arg, 1) == 1 ||
	    xd_route_match("/sandboxes/{id}/execd/{path}", path, k->arg, 2) ==
	    1) {
		execd_call(k, path, 0);
		return;
	}
	xd_args_free(k->arg, XD_ARGS_MAX);
	if (xd_route_match("/sandboxes/{id}/egress/{path}", path, k->arg, 2) ==
	    1) {
		execd_call(k, path, 1);
		return;
	}
	xd_args_free(k->arg, XD_ARGS_MAX);
	if (strncmp(path, "/sandboxes/", 11) == 0 && strncmp(path + 11 +
	    strcspn(path + 11, "/"), "/proxy/", 7) == 0) {
		proxy_call(k, path);
		return;
	}
	xd_args_free(k->arg, XD_ARGS_MAX);
	key = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "OPEN-SANDBOX-API-KEY");
	if ((k->key = xd_os_key_find(&xd->cfg->os, key)) == NULL) {
		xd_os_reply_err(k, 401, "UNAUTHORIZED", "a valid "
		    "OPEN-SANDBOX-API-KEY header is required");
		return;
	}
	snprintf(k->who, sizeof(k->who), "opensandbox:%s", k->key->name);
	if (strncmp(path, "/snapshots", 10) == 0 || (xd_route_match(
	    "/sandboxes/{id}/snapshots", path, k->arg, 1) == 1)) {
		h_unsupported(k, "snapshots of a sandbox's memory and file "
		    "system (its workspace is archived on a native delete)");
		return;
	}
	xd_args_free(k->arg, XD_ARGS_MAX);
	if (strncmp(path, "/pools", 6) == 0 || strstr(path, "/diagnostics") !=
	    NULL || strstr(path, "/proxy/") != NULL) {
		h_unsupported(k, "pools, diagnostics and the port proxy");
		return;
	}
	for (i = 0; i < sizeof(lroutes) / sizeof(lroutes[0]); i++) {
		int r = xd_route_match(lroutes[i].pattern, path, k->arg,
		    XD_ARGS_MAX);

		if (r < 0) {
			xd_os_reply_err(k, 400, "INVALID_REQUEST", "a path "
			    "segment does not decode");
			return;
		}
		if (r == 0)
			continue;
		known = 1;
		if (lroutes[i].m != m) {
			xd_args_free(k->arg, XD_ARGS_MAX);
			continue;
		}
		if (lroutes[i].body) {
			if (len > xd->cfg->max_body_bytes) {
				xd_os_reply_err(k, 413, "REQUEST_TOO_LARGE",
				    "more than max_body_bytes");
				return;
			}
			if (len > 0)
				k->body = json_loadb((const char *)
				    evbuffer_pullup(in, -1), len,
				    JSON_REJECT_DUPLICATES, &je);
			else if (lroutes[i].body == 2)
				k->body = json_object();
			if (!json_is_object(k->body)) {
				xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY",
				    "expected a JSON object");
				return;
			}
		}
		if (xd->draining && m != EVHTTP_REQ_GET) {
			xd_os_reply_err(k, 503, "UNAVAILABLE", "the executor "
			    "is shutting down");
			return;
		}
		xd_log(XD_LOG_DEBUG, "%s %s", k->who, path);
		lroutes[i].fn(k);
		return;
	}
	if (known)
		xd_os_reply_err(k, 405, "METHOD_NOT_ALLOWED", "%s: not with "
		    "this method", path);
	else
		xd_os_reply_err(k, 404, "NOT_FOUND", "no such route %s", path);
}

/* ---- the listener ---- */

static struct bufferevent *
tls_bev(struct event_base *base, void *arg)
{
	struct xd *xd = arg;
	SSL *ssl;

	if (xd->os->tls_ctx == NULL || (ssl = SSL_new(xd->os->tls_ctx)) ==
	    NULL)
		return NULL;
	return bufferevent_openssl_socket_new(base, -1, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
}

int
xd_os_listen(struct xd *xd, char *err, size_t errlen)
{
	const struct xd_os_cfg *oc = &xd->cfg->os;
	struct timeval tv = { SWEEP_S, 0 };
	char host[128], *colon;
	struct xd_os *os;
	long port;

	if (!oc->listen[0])
		return 0;
	if ((os = calloc(1, sizeof(*os))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	os->xd = xd;
	TAILQ_INIT(&os->calls);
	xd->os = os;
	xd_osfs_workdir(oc->workdir);
	if (xd_os_recs_load(os, err, errlen) != 0)
		return -1;
	snprintf(host, sizeof(host), "%s", oc->listen);
	colon = strrchr(host, ':');
	*colon = '\0';
	port = strtol(colon + 1, NULL, 10);
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		if (host[0] && host[strlen(host) - 1] == ']')
			host[strlen(host) - 1] = '\0';
	}
	if (oc->tls_cert[0]) {
		if ((os->tls_ctx = SSL_CTX_new(TLS_server_method())) == NULL ||
		    SSL_CTX_set_min_proto_version(os->tls_ctx,
		    TLS1_2_VERSION) != 1 ||
		    SSL_CTX_use_certificate_chain_file(os->tls_ctx,
		    oc->tls_cert) != 1 || SSL_CTX_use_PrivateKey_file(
		    os->tls_ctx, oc->tls_key, SSL_FILETYPE_PEM) != 1) {
			char buf[256];

			ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
			ERR_clear_error();
			snprintf(err, errlen, "opensandbox.tls_cert/tls_key: "
			    "%s", buf);
			return -1;
		}
	}
	if ((os->http = evhttp_new(xd->base)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (os->tls_ctx != NULL)
		evhttp_set_bevcb(os->http, tls_bev, xd);
	evhttp_set_gencb(os->http, on_request, xd);
	evhttp_set_allowed_methods(os->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	/* an upload is the largest body: a file and its multipart frame */
	evhttp_set_max_body_size(os->http, (ev_ssize_t)(xd->cfg->max_file_bytes
	    + xd->cfg->max_body_bytes + 65536));
	evhttp_set_max_headers_size(os->http, 64 * 1024);
	evhttp_set_timeout(os->http, 120);
	evhttp_set_default_content_type(os->http, "application/json");
	if ((os->bound = evhttp_bind_socket_with_handle(os->http, host,
	    (ev_uint16_t)port)) == NULL) {
		snprintf(err, errlen, "opensandbox.listen %s: %s", oc->listen,
		    strerror(errno));
		return -1;
	}
	if ((os->ev_sweep = evtimer_new(xd->base, sweep, xd)) == NULL ||
	    evtimer_add(os->ev_sweep, &tv) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	xd_log(XD_LOG_INFO, "opensandbox: %s://%s/v1", os->tls_ctx ? "https" :
	    "http", oc->listen);
	return 0;
}

void
xd_os_stop_accepting(struct xd *xd)
{
	if (xd->os != NULL && xd->os->bound != NULL) {
		evhttp_del_accept_socket(xd->os->http, xd->os->bound);
		xd->os->bound = NULL;
	}
}

int
xd_os_pending(const struct xd *xd)
{
	return xd->os != NULL && !TAILQ_EMPTY(&xd->os->calls);
}

void
xd_os_close(struct xd *xd)
{
	struct xd_os *os = xd->os;
	struct xd_os_call *k;

	if (os == NULL)
		return;
	while ((k = TAILQ_FIRST(&os->calls)) != NULL) {
		if (k->cmd != NULL)
			xd_cmd_detach(k->cmd);
		xd_os_call_free(k);
	}
	if (os->ev_sweep != NULL)
		event_free(os->ev_sweep);
	if (os->http != NULL)
		evhttp_free(os->http);
	if (os->tls_ctx != NULL)
		SSL_CTX_free(os->tls_ctx);
	json_decref(os->recs);
	OPENSSL_cleanse(os->secret, sizeof(os->secret));
	free(os);
	xd->os = NULL;
}
