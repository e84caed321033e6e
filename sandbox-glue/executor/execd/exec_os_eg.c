/*
 * exec_os_eg.c: OpenSandbox's egress sidecar, served by sluice-execd
 * under /sandboxes/{id}/egress (what endpoints/18080 names), mapped onto
 * the sandbox's broker session (DESIGN.md, "The OpenSandbox-compatible
 * API"; specs/egress-api.yaml):
 *
 *   GET        /policy   {status, mode, enforcementMode, reason?, policy}
 *   PATCH      /policy   [NetworkRule]: merged, the incoming first (the
 *                        first rule of a duplicate target wins)
 *   DELETE     /policy   [target]: those rules removed
 *   POST|PUT   /policy   NetworkPolicy: replaced whole
 *   GET        /healthz
 *
 * A NetworkPolicy {defaultAction: allow|deny, egress: [{action, target}]}
 * becomes the session's tier (allow: public, deny: off; sluiced's
 * ceiling still bounds both) and its own egress rules in sluiced (PUT
 * /v1/sessions/{id}/egress): a denied target is refused at once
 * (session_denied, no prompt), an allowed one (exact or "*.domain") is
 * admitted within the ceiling, and a host no rule names is the tier's,
 * so under "deny" it still raises sluice's prompt to the app.  The
 * policy as given is kept in the sandbox's record and echoed by GET.
 * exec_os.c has checked the OPENSANDBOX-EGRESS-AUTH token and holds the
 * box (k->box).
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "sandbox-glue/executor/execd/exec_os-int.h"

#define RULES_MAX	256
#define TARGET_MAX	253

struct eg_op {
	struct xd_os_call *k;
	struct xd_box *box;
	json_t *policy;                 /* to keep once sluiced took it */
	char *body;                     /* sluiced's {"allow","deny"} */
	char tier[16];
	xd_os_policy_done done;
};

/* One rule {action, target}: 0, -1 with e. */
static int
rule_ok(json_t *r, size_t i, struct xd_perr *e)
{
	const char *a = json_string_value(json_object_get(r, "action"));
	const char *t = json_string_value(json_object_get(r, "target"));

	if (!json_is_object(r) || a == NULL || t == NULL)
		return xd_perr_set(e, 400, "INVALID_REQUEST_BODY", "egress[%zu]:"
		    " {\"action\": \"allow\"|\"deny\", \"target\": \"a host "
		    "name or *.domain\"}", i);
	if (strcmp(a, "allow") != 0 && strcmp(a, "deny") != 0)
		return xd_perr_set(e, 400, "INVALID_REQUEST_BODY", "egress[%zu]"
		    ".action: allow or deny", i);
	if (!t[0] || strlen(t) > TARGET_MAX)
		return xd_perr_set(e, 400, "INVALID_REQUEST_BODY", "egress[%zu]"
		    ".target: 1 to %d characters", i, TARGET_MAX);
	return 0;
}

int
xd_os_policy_parse(json_t *np, json_t **out, struct xd_perr *e)
{
	json_t *eg, *r, *rules;
	const char *da;
	size_t i;

	*out = NULL;
	if (!json_is_object(np))
		return xd_perr_set(e, 400, "INVALID_REQUEST_BODY", "networkPolicy:"
		    " an object {defaultAction, egress}");
	eg = json_object_get(np, "egress");
	da = json_string_value(json_object_get(np, "defaultAction"));
	if (json_object_get(np, "defaultAction") != NULL && !json_is_null(
	    json_object_get(np, "defaultAction")) && (da == NULL ||
	    (strcmp(da, "allow") != 0 && strcmp(da, "deny") != 0)))
		return xd_perr_set(e, 400, "INVALID_REQUEST_BODY", "networkPolicy"
		    ".defaultAction: allow or deny");
	if (eg != NULL && !json_is_null(eg) && (!json_is_array(eg) ||
	    json_array_size(eg) > RULES_MAX))
		return xd_perr_set(e, 400, "INVALID_REQUEST_BODY", "networkPolicy"
		    ".egress: an array of at most %d rules", RULES_MAX);
	rules = json_array();
	json_array_foreach(json_is_array(eg) ? eg : NULL, i, r) {
		if (rule_ok(r, i, e) != 0) {
			json_decref(rules);
			return -1;
		}
		json_array_append_new(rules, json_pack("{s:O,s:O}", "action",
		    json_object_get(r, "action"), "target",
		    json_object_get(r, "target")));
	}
	/* OpenSandbox's default is deny */
	*out = json_pack("{s:s,s:o}", "defaultAction", da != NULL ? da :
	    "deny", "egress", rules);
	return *out != NULL ? 0 : xd_perr_set(e, 500, "RUNTIME_ERROR",
	    "out of memory");
}

int
xd_os_policy_merge(json_t *cur, json_t *in, json_t **out, struct xd_perr *e)
{
	json_t *seen, *r, *rules;
	size_t i;

	*out = NULL;
	if (!json_is_array(in) || json_array_size(in) == 0)
		return xd_perr_set(e, 400, "INVALID_REQUEST_BODY", "expected an "
		    "array of at least one rule");
	seen = json_object();
	rules = json_array();
	/* the incoming first; of a duplicate target the first rule wins */
	json_array_foreach(in, i, r) {
		if (rule_ok(r, i, e) != 0)
			goto fail;
		if (json_object_get(seen, json_string_value(json_object_get(r,
		    "target"))) != NULL)
			continue;
		json_object_set_new(seen, json_string_value(json_object_get(r,
		    "target")), json_true());
		json_array_append_new(rules, json_pack("{s:O,s:O}", "action",
		    json_object_get(r, "action"), "target",
		    json_object_get(r, "target")));
	}
	json_array_foreach(json_object_get(cur, "egress"), i, r)
		if (json_object_get(seen, json_string_value(json_object_get(r,
		    "target"))) == NULL)
			json_array_append(rules, r);
	if (json_array_size(rules) > RULES_MAX) {
		xd_perr_set(e, 400, "INVALID_REQUEST_BODY", "at most %d rules",
		    RULES_MAX);
		goto fail;
	}
	json_decref(seen);
	*out = json_pack("{s:s,s:o}", "defaultAction", xd_os_policy_tier(cur)[0]
	    == 'p' ? "allow" : "deny", "egress", rules);
	return *out != NULL ? 0 : xd_perr_set(e, 500, "RUNTIME_ERROR",
	    "out of memory");
fail:
	json_decref(seen);
	json_decref(rules);
	return -1;
}

int
xd_os_policy_drop(json_t *cur, json_t *targets, json_t **out,
    struct xd_perr *e)
{
	json_t *rules, *r, *t;
	size_t i, j;
	int drop;

	*out = NULL;
	if (!json_is_array(targets))
		return xd_perr_set(e, 400, "INVALID_REQUEST_BODY", "expected an "
		    "array of targets");
	json_array_foreach(targets, i, t)
		if (!json_is_string(t))
			return xd_perr_set(e, 400, "INVALID_REQUEST_BODY",
			    "[%zu]: expected a target (a string)", i);
	rules = json_array();
	json_array_foreach(json_object_get(cur, "egress"), i, r) {
		drop = 0;
		json_array_foreach(targets, j, t)
			if (json_equal(t, json_object_get(r, "target")))
				drop = 1;
		if (!drop)
			json_array_append(rules, r);
	}
	*out = json_pack("{s:s,s:o}", "defaultAction", xd_os_policy_tier(cur)[0]
	    == 'p' ? "allow" : "deny", "egress", rules);
	return *out != NULL ? 0 : xd_perr_set(e, 500, "RUNTIME_ERROR",
	    "out of memory");
}

const char *
xd_os_policy_tier(json_t *policy)
{
	const char *da = json_string_value(json_object_get(policy,
	    "defaultAction"));

	return da != NULL && strcmp(da, "allow") == 0 ? "public" : "off";
}

char *
xd_os_policy_broker(json_t *policy)
{
	json_t *al = json_array(), *dn = json_array(), *seen = json_object();
	json_t *r, *o;
	size_t i;
	char *s;

	json_array_foreach(json_object_get(policy, "egress"), i, r) {
		const char *t = json_string_value(json_object_get(r, "target"));

		if (t == NULL || json_object_get(seen, t) != NULL)
			continue;
		json_object_set_new(seen, t, json_true());
		json_array_append_new(strcmp(json_string_value(json_object_get(r,
		    "action")), "deny") == 0 ? dn : al, json_string(t));
	}
	json_decref(seen);
	o = json_pack("{s:o,s:o}", "allow", al, "deny", dn);
	s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

/* ---- applying a policy: the tier, then the rules (in a worker) ---- */

static void
op_end(struct eg_op *op, struct xd_perr *e)
{
	op->done(op->k, e == NULL ? op->policy : NULL, e);
	xd_box_unref(op->box);
	json_decref(op->policy);
	free(op->body);
	free(op);
}

static json_t *
eg_child(void *arg)
{
	struct eg_op *op = arg;
	struct xd_perr be;

	memset(&be, 0, sizeof(be));
	if (xd_broker_egress(op->box->xd->cfg, op->box->rec.chat, op->body,
	    &be) != 0)
		return json_pack("{s:b,s:i,s:s,s:s}", "ok", 0, "status",
		    be.status, "code", be.code ? be.code : "internal", "message",
		    be.msg);
	return json_pack("{s:b}", "ok", 1);
}

static void
eg_done(void *arg, json_t *res)
{
	char key[SBX_ID_MAX + 1];
	struct eg_op *op = arg;
	struct xd_box *b = op->box;
	struct xd_perr e;
	json_t *rec;
	json_int_t st;

	memset(&e, 0, sizeof(e));
	if (!json_is_true(json_object_get(res, "ok"))) {
		st = json_integer_value(json_object_get(res, "status"));
		xd_perr_set(&e, st == 400 ? 400 : st >= 400 && st < 600 ?
		    (int)st : 500, st == 400 ? "INVALID_REQUEST_BODY" :
		    "RUNTIME_ERROR", "%s", res == NULL ? "the worker died" :
		    json_string_value(json_object_get(res, "message")));
		json_decref(res);
		op_end(op, &e);
		return;
	}
	json_decref(res);
	xd_os_key(b->rec.tenant, XD_REC_ID(&b->rec), key);
	if ((rec = xd_os_rec(b->xd->os, key)) != NULL) {
		json_object_set(rec, "policy", op->policy);
		(void)!xd_os_rec_save(b->xd->os, rec);
	}
	xd_audit_box(b->xd, "egress", op->k->who, "app", XD_REC_ID(&b->rec),
	    b->rec.tenant, b->rec.user, 200, NULL, json_pack("{s:s,s:O}",
	    "api", "opensandbox", "policy", op->policy));
	op_end(op, NULL);
}

static void
eg_start(struct eg_op *op)
{
	char err[XD_ERR_MAX];
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if (xd_job_run(op->box->xd, "egress", eg_child, op, eg_done, op, err,
	    sizeof(err)) != 0) {
		xd_perr_set(&e, 500, "RUNTIME_ERROR", "%s", err);
		op_end(op, &e);
	}
}

static void
tier_cb(void *arg, struct xd_box *b, struct xd_perr *e)
{
	struct eg_op *op = arg;

	if (b == NULL) {
		op_end(op, e);
		return;
	}
	eg_start(op);
}

int
xd_os_policy_apply(struct xd_os_call *k, struct xd_box *b, json_t *policy,
    xd_os_policy_done done, struct xd_perr *e)
{
	struct eg_op *op;

	if ((op = calloc(1, sizeof(*op))) == NULL || (op->body =
	    xd_os_policy_broker(policy)) == NULL) {
		free(op);
		return xd_perr_set(e, 500, "RUNTIME_ERROR", "out of memory");
	}
	op->k = k;
	op->box = b;
	b->refs++;
	op->policy = json_incref(policy);
	op->done = done;
	snprintf(op->tier, sizeof(op->tier), "%s", xd_os_policy_tier(policy));
	xd_os_call_wait(k);
	if (strcmp(b->rec.tier, op->tier) != 0) {
		if (xd_box_set_tier(b, op->tier, tier_cb, op, e) != 0) {
			b->refs--;
			json_decref(op->policy);
			free(op->body);
			free(op);
			return -1;
		}
		return 0;
	}
	eg_start(op);
	return 0;
}

/* ---- the routes ---- */

/* The policy in force: the record's, else the tier's with no rules. */
static json_t *
current(struct xd_os_call *k)
{
	char key[SBX_ID_MAX + 1];
	struct xd_box *b = k->box;
	json_t *rec, *p;

	xd_os_key(b->rec.tenant, XD_REC_ID(&b->rec), key);
	rec = xd_os_rec(k->xd->os, key);
	if ((p = json_object_get(rec, "policy")) != NULL && json_is_object(p))
		return json_deep_copy(p);
	return json_pack("{s:s,s:[]}", "defaultAction", strcmp(b->rec.tier,
	    "public") == 0 ? "allow" : "deny", "egress");
}

static json_t *
status_json(json_t *policy)
{
	const char *da = json_string_value(json_object_get(policy,
	    "defaultAction"));
	int deny = da == NULL || strcmp(da, "deny") == 0;
	int rules = json_array_size(json_object_get(policy, "egress")) > 0;

	return json_pack("{s:s,s:s,s:s,s:s,s:O}", "status", "ok", "mode",
	    rules ? "rules" : deny ? "deny_all" : "allow_all",
	    "enforcementMode", "sluice", "reason", deny ? "hosts no rule "
	    "names raise sluice's approval prompt to the app (within the "
	    "administrator's ceiling)" : "hosts no rule names are allowed "
	    "within the administrator's ceiling", "policy", policy);
}

static void
applied(struct xd_os_call *k, json_t *policy, struct xd_perr *e)
{
	if (policy == NULL) {
		xd_os_reply_perr(k, e);
		return;
	}
	xd_os_reply_json(k, 200, status_json(policy));
}

static void
apply(struct xd_os_call *k, json_t *policy)
{
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if (xd_os_policy_apply(k, k->box, policy, applied, &e) != 0)
		xd_os_reply_perr(k, &e);
	json_decref(policy);
}

/* PATCH (merge) or DELETE (drop) against the policy in force. */
static void
h_change(struct xd_os_call *k, int patch)
{
	json_t *cur = current(k), *np;
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if ((patch ? xd_os_policy_merge(cur, k->body, &np, &e) :
	    xd_os_policy_drop(cur, k->body, &np, &e)) != 0) {
		json_decref(cur);
		xd_os_reply_perr(k, &e);
		return;
	}
	json_decref(cur);
	apply(k, np);
}

static void
h_replace(struct xd_os_call *k)
{
	json_t *np;
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if (xd_os_policy_parse(k->body, &np, &e) != 0) {
		xd_os_reply_perr(k, &e);
		return;
	}
	apply(k, np);
}

void
xd_os_egress(struct xd_os_call *k, const char *rest)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(k->req);
	struct evbuffer *in = evhttp_request_get_input_buffer(k->req);
	size_t len = evbuffer_get_length(in);
	json_error_t je;

	if (strcmp(rest, "/healthz") == 0 && m == EVHTTP_REQ_GET) {
		xd_os_reply_empty(k, 200);
		return;
	}
	if (strncmp(rest, "/credential-vault", 17) == 0) {
		xd_os_reply_err(k, 501, "NOT_SUPPORTED", "the credential vault:"
		    " use sluice's credentials (sluiced's POST /v1/credentials)"
		    ", which a sandbox only ever sees as a placeholder");
		return;
	}
	if (strcmp(rest, "/policy") != 0) {
		xd_os_reply_err(k, 404, "NOT_FOUND", "no such egress route %s",
		    rest);
		return;
	}
	if (m == EVHTTP_REQ_GET) {
		json_t *cur = current(k);

		xd_os_reply_json(k, 200, status_json(cur));
		json_decref(cur);
		return;
	}
	if (m != EVHTTP_REQ_PATCH && m != EVHTTP_REQ_DELETE && m !=
	    EVHTTP_REQ_POST && m != EVHTTP_REQ_PUT) {
		xd_os_reply_err(k, 405, "METHOD_NOT_ALLOWED", "/policy: GET, "
		    "PATCH, DELETE, POST or PUT");
		return;
	}
	if (len > k->xd->cfg->max_body_bytes) {
		xd_os_reply_err(k, 413, "REQUEST_TOO_LARGE", "more than "
		    "max_body_bytes");
		return;
	}
	k->body = len ? json_loadb((const char *)evbuffer_pullup(in, -1), len,
	    JSON_REJECT_DUPLICATES, &je) : NULL;
	if (m == EVHTTP_REQ_PATCH || m == EVHTTP_REQ_DELETE ?
	    !json_is_array(k->body) : !json_is_object(k->body)) {
		xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY", "expected a "
		    "JSON %s", m == EVHTTP_REQ_PATCH ? "array of rules" : m ==
		    EVHTTP_REQ_DELETE ? "array of targets" : "NetworkPolicy");
		return;
	}
	if (m == EVHTTP_REQ_PATCH || m == EVHTTP_REQ_DELETE)
		h_change(k, m == EVHTTP_REQ_PATCH);
	else
		h_replace(k);
}
