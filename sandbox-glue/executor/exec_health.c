/*
 * exec_health.c: GET /v1/health and sluice-execd --doctor.  Each backend
 * with ok and, when it cannot be used here, the reason its available()
 * gives; kvm, which this build has no backend for, with that reason;
 * whether sluiced answers on its control socket; the profiles; what
 * the quotas leave.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-glue/executor/execd-int.h"

static json_t *
backend_json(const struct sbx_backend *be, int *ok)
{
	char err[XD_ERR_MAX] = "";

	*ok = be->available(err, sizeof(err)) == 0;
	return json_pack("{s:s,s:b,s:s?}", "name", be->name, "ok", *ok,
	    "reason", *ok ? NULL : err);
}

json_t *
xd_health_json(struct xd *xd, int broker_ok, const char *why)
{
	const struct xd_cfg *c = xd->cfg;
	json_t *bes = json_array(), *o;
	int ok_ns, ok_gv, ok_def;
	long total, nt, nu;

	json_array_append_new(bes, backend_json(&sbx_ns_backend, &ok_ns));
	json_array_append_new(bes, backend_json(&sbx_gvisor_backend, &ok_gv));
	json_array_append_new(bes, json_pack("{s:s,s:b,s:s}", "name", "kvm",
	    "ok", 0, "reason", "no kvm (microVM) backend in this build: "
	    "sandboxes run on ns or gvisor"));
	ok_def = strcmp(c->backend, "gvisor") == 0 ? ok_gv : ok_ns;
	xd_box_counts(xd, NULL, NULL, &total, &nt, &nu);
	o = json_pack("{s:b,s:s,s:s,s:o,s:{s:b,s:s,s:s?},s:[s],"
	    "s:{s:{s:I,s:I,s:I},s:{s:I,s:I}}}",
	    "ok", ok_def && broker_ok, "version", PACKAGE_VERSION,
	    "default_backend", c->backend, "backends", bes,
	    "broker", "ok", broker_ok, "socket", c->control, "reason",
	    broker_ok ? NULL : why,
	    "profiles", "base",
	    "capacity",
	    "sandboxes", "limit", (json_int_t)c->max_total, "in_use",
	    (json_int_t)total, "left", (json_int_t)(c->max_total ?
	    (c->max_total > total ? c->max_total - total : 0) : -1),
	    "creates", "limit", (json_int_t)c->max_creates, "in_use",
	    (json_int_t)xd->creating);
	return o;
}

struct health_op {
	struct xd *xd;
	void (*cb)(void *arg, json_t *h);
	void *arg;
};

static json_t *
ping_child(void *arg)
{
	struct health_op *op = arg;
	struct xd_broker_err e;

	memset(&e, 0, sizeof(e));
	if (xd_broker_ping(op->xd->cfg, &e) != 0)
		return json_pack("{s:b,s:s}", "ok", 0, "reason", e.msg);
	return json_pack("{s:b}", "ok", 1);
}

static void
ping_done(void *arg, json_t *res)
{
	struct health_op *op = arg;
	const char *why = json_string_value(json_object_get(res, "reason"));

	op->cb(op->arg, xd_health_json(op->xd,
	    json_is_true(json_object_get(res, "ok")), why ? why :
	    "the health worker died"));
	json_decref(res);
	free(op);
}

int
xd_health(struct xd *xd, void (*cb)(void *arg, json_t *h), void *arg)
{
	struct health_op *op = calloc(1, sizeof(*op));
	char err[XD_ERR_MAX];

	if (op == NULL)
		return -1;
	op->xd = xd;
	op->cb = cb;
	op->arg = arg;
	if (xd_job_run(xd, "health", ping_child, op, ping_done, op, err,
	    sizeof(err)) != 0) {
		free(op);
		return -1;
	}
	return 0;
}
