/*
 * exec_node.c: the node interface (DESIGN.md, "Archive store and the
 * node interface"; issue 25): GET /v1/node says what a fleet controller
 * places sandboxes by (host, version, backends, capacity, draining),
 * PUT /v1/node {"draining": true|false} takes the host out of the fleet
 * and back.
 *
 * Draining: xd_box_create refuses every create with 503
 * backend_unavailable, reason "draining" (the error codes stay as the
 * SDKs know them); a timer (NODE_TICK_MS) removes each sandbox, its
 * workspace archived first as the lifecycle's removal by age does
 * (reason "drain"), at its first idle point: not being created, changed
 * or deleted, no foreground command, no background command running, no
 * kill worker.  A command is never cut short by a drain.  Once no
 * sandbox is left the node says so: remaining 0, an event "node"
 * "drained", a log line.  The drain is kept in <state_dir>/node.json, so
 * a restarted daemon (a node being maintained, a DaemonSet's pod
 * replaced) stays drained until PUT {"draining": false}; its adopted
 * sandboxes are drained as they go idle.
 *
 * Nothing here blocks: /proc/meminfo and statvfs (xd_box_storage) are
 * read on the loop; the backends' probe comes from exec_health.c's
 * worker, whose document the handler passes in.
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "sandbox-glue/executor/execd/execd-int.h"

#define NODE_TICK_MS	500
#define NODE_RETRY_S	10      /* after a removal that failed */
#define NODE_FILE	"node.json"

static void
node_path(const struct xd *xd, char *p, size_t len)
{
	snprintf(p, len, "%s/%s", xd->cfg->state_dir, NODE_FILE);
}

/* Live sandboxes: every box still listed (creating, running, being
 * deleted, stopped). */
static long
node_remaining(const struct xd *xd)
{
	const struct xd_box *b;
	long n = 0;

	TAILQ_FOREACH(b, &xd->boxes, link)
		n += b->state != XD_BOX_GONE;
	return n;
}

/* At an idle point: nothing under way in it, no command running. */
static int
node_idle(const struct xd_box *b)
{
	const struct xd_cmd *c;

	if ((b->state != XD_BOX_RUNNING && b->state != XD_BOX_STOPPED) ||
	    b->op || b->fg != NULL || b->proc_jobs > 0)
		return 0;
	TAILQ_FOREACH(c, &b->cmds, link)
		if (c->running)
			return 0;
	return 1;
}

static int
node_save(const struct xd *xd)
{
	char p[SBX_PATH_MAX + 32], tmp[SBX_PATH_MAX + 40];
	json_t *o;
	int rc;

	node_path(xd, p, sizeof(p));
	if (!xd->node_draining)
		return unlink(p) != 0 && errno != ENOENT ? -1 : 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	o = json_pack("{s:b,s:I}", "draining", 1, "since",
	    (json_int_t)xd->node_since);
	if (o == NULL)
		return -1;
	rc = json_dump_file(o, tmp, JSON_COMPACT) == 0 && rename(tmp, p) == 0 ?
	    0 : -1;
	if (rc != 0)
		(void)unlink(tmp);
	json_decref(o);
	return rc;
}

static void
node_removed(void *arg, struct xd_box *b, struct xd_perr *e)
{
	struct xd *xd = arg;

	if (b == NULL) {
		xd_log(XD_LOG_WARN, "drain: a removal failed (tried again in "
		    "%d s): %s", NODE_RETRY_S, e->msg);
		xd_perr_clear(e);
		return;
	}
	xd->node_removed++;
	xd_audit_box(xd, "remove", "sluice-execd", "daemon",
	    XD_REC_ID(&b->rec), b->rec.tenant, b->rec.user, 200, NULL,
	    json_pack("{s:s,s:O?}", "reason", "drain", "archive",
	    b->archived));
}

static void node_arm(struct xd *xd);

static void
node_tick(evutil_socket_t fd, short what, void *arg)
{
	struct xd *xd = arg;
	int64_t now = (int64_t)time(NULL);
	struct xd_box *b, *next;
	struct xd_perr e;
	long left;

	(void)fd;
	(void)what;
	if (!xd->node_draining)
		return;
	/* the daemon's own shutdown (SIGTERM) leaves the sandboxes be */
	for (b = TAILQ_FIRST(&xd->boxes); !xd->draining && b != NULL;
	    b = next) {
		next = TAILQ_NEXT(b, link);
		if (!node_idle(b) || now < b->lc_retry)
			continue;
		b->lc_retry = now + NODE_RETRY_S;
		memset(&e, 0, sizeof(e));
		xd_log(XD_LOG_INFO, "sandbox %s: draining: removing (archived "
		    "first)", b->rec.chat);
		if (xd_box_delete(b, 1, "drain", node_removed, xd, &e) != 0) {
			xd_log(XD_LOG_WARN, "sandbox %s: drain: %s", b->rec.chat,
			    e.msg);
			xd_perr_clear(&e);
		}
	}
	left = node_remaining(xd);
	if (left == 0 && !xd->node_drained) {
		xd->node_drained = 1;
		xd_log(XD_LOG_INFO, "drained: no sandbox left (%llu removed)",
		    (unsigned long long)xd->node_removed);
		xd_event(xd, "node", "drained", "", json_pack("{s:I,s:I}",
		    "remaining", (json_int_t)0, "removed",
		    (json_int_t)xd->node_removed));
	} else if (left > 0)
		xd->node_drained = 0;
	node_arm(xd);
}

static void
node_arm(struct xd *xd)
{
	struct timeval tv = { 0, NODE_TICK_MS * 1000 };

	if (xd->ev_node == NULL &&
	    (xd->ev_node = evtimer_new(xd->base, node_tick, xd)) == NULL) {
		xd_log(XD_LOG_ERR, "drain: cannot make its timer");
		return;
	}
	if (event_add(xd->ev_node, &tv) != 0)
		xd_log(XD_LOG_ERR, "drain: cannot set its timer");
}

int
xd_node_start(struct xd *xd)
{
	char p[SBX_PATH_MAX + 32];
	json_error_t je;
	json_t *o;

	node_path(xd, p, sizeof(p));
	if ((o = json_load_file(p, 0, &je)) == NULL) {
		if (access(p, F_OK) == 0)
			xd_log(XD_LOG_WARN, "%s: %s: taken as not draining", p,
			    je.text);
		return 0;
	}
	if (json_is_true(json_object_get(o, "draining"))) {
		xd->node_draining = 1;
		xd->node_since = json_integer_value(json_object_get(o,
		    "since"));
		xd_log(XD_LOG_INFO, "draining (since %lld, %s): creates are "
		    "refused, sandboxes removed as they go idle",
		    (long long)xd->node_since, p);
		node_arm(xd);
	}
	json_decref(o);
	return 0;
}

void
xd_node_stop(struct xd *xd)
{
	if (xd->ev_node != NULL) {
		event_free(xd->ev_node);
		xd->ev_node = NULL;
	}
}

int
xd_node_set(struct xd *xd, json_t *body, const char *who, const char *role,
    struct xd_perr *e)
{
	json_t *v = json_object_get(body, "draining");
	int on, was = xd->node_draining;

	if (!json_is_object(body) || json_object_size(body) != 1 ||
	    !json_is_boolean(v)) {
		xd_perr_set(e, 400, "bad_request", "the body is "
		    "{\"draining\": true|false} and nothing else");
		e->extra = json_pack("{s:s}", "field", "draining");
		return -1;
	}
	on = json_is_true(v);
	if (on != was) {
		int64_t since = xd->node_since;

		xd->node_draining = on;
		xd->node_since = on ? (int64_t)time(NULL) : 0;
		if (node_save(xd) != 0) {
			xd->node_draining = was;
			xd->node_since = since;
			return xd_perr_set(e, 500, "internal", "%.300s/%s: "
			    "%.150s", xd->cfg->state_dir, NODE_FILE,
			    strerror(errno));
		}
		xd->node_drained = 0;
		xd_log(XD_LOG_INFO, "%s by %s (%s): %ld sandboxes", on ?
		    "draining" : "no longer draining", who, role,
		    node_remaining(xd));
		xd_event(xd, "node", on ? "draining" : "undrained", "",
		    json_pack("{s:b,s:I}", "draining", on, "remaining",
		    (json_int_t)node_remaining(xd)));
		if (on)
			node_arm(xd);
		else if (xd->ev_node != NULL)
			event_del(xd->ev_node);
	}
	xd_audit_box(xd, on ? "drain" : "undrain", who, role, "", "", "", 200,
	    NULL, json_pack("{s:b,s:I}", "changed", on != was, "remaining",
	    (json_int_t)node_remaining(xd)));
	return 0;
}

json_t *
xd_node_state(struct xd *xd)
{
	json_t *o = json_pack("{s:b}", "draining", xd->node_draining);

	if (o != NULL && xd->node_draining) {
		json_object_set_new(o, "remaining",
		    json_integer(node_remaining(xd)));
		json_object_set_new(o, "since", json_integer(xd->node_since));
		json_object_set_new(o, "removed",
		    json_integer((json_int_t)xd->node_removed));
	}
	return o;
}

/* MemTotal and MemAvailable of /proc/meminfo, in bytes (0 unknown). */
static void
node_mem(uint64_t *total, uint64_t *avail)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	unsigned long long v;

	*total = *avail = 0;
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "MemTotal: %llu kB", &v) == 1)
			*total = (uint64_t)v * 1024;
		else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
			*avail = (uint64_t)v * 1024;
	}
	fclose(f);
}

json_t *
xd_node_json(struct xd *xd, json_t *health)
{
	const struct xd_cfg *c = xd->cfg;
	struct xd_storage st;
	char host[256];
	uint64_t mt, ma;
	long total, nt, nu, cpus = sysconf(_SC_NPROCESSORS_ONLN);
	json_t *bes = json_array(), *b, *o, *d;
	size_t i;

	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	json_array_foreach(json_object_get(health, "backends"), i, b)
		json_array_append_new(bes, json_pack("{s:O?,s:b,s:O?}", "name",
		    json_object_get(b, "name"), "ok",
		    json_is_true(json_object_get(b, "ok")), "reason",
		    json_object_get(b, "reason")));
	xd_box_counts(xd, NULL, NULL, &total, &nt, &nu);
	xd_box_storage(xd, &st, 0);
	node_mem(&mt, &ma);
	o = json_pack("{s:s,s:s,s:b,s:s,s:o,s:O?,s:{s:I,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:o,s:o}}",
	    "host", host, "version", PACKAGE_VERSION,
	    "ok", json_is_true(json_object_get(health, "ok")),
	    "default_backend", c->backend, "backends", bes,
	    "broker", json_object_get(health, "broker"),
	    "capacity",
	    "slots", (json_int_t)c->slots,
	    "sandboxes", (json_int_t)total,
	    "sandboxes_limit", (json_int_t)c->max_total,
	    "creates", (json_int_t)xd->creating,
	    "cpus", (json_int_t)(cpus > 0 ? cpus : 0),
	    "memory_total_bytes", (json_int_t)mt,
	    "memory_available_bytes", (json_int_t)ma,
	    "disk_headroom_bytes", st.ok ? json_integer((json_int_t)
	    st.headroom) : json_null(),
	    "disk_free_bytes", st.ok ? json_integer((json_int_t)st.free) :
	    json_null());
	json_decref(health);
	if (o != NULL && (d = xd_node_state(xd)) != NULL) {
		json_object_update(o, d);
		json_decref(d);
	}
	return o;
}

void
xd_node_metrics(struct xd *xd, struct evbuffer *o)
{
	evbuffer_add_printf(o, "# HELP sluice_execd_draining 1 while the "
	    "node drains (PUT /v1/node).\n# TYPE sluice_execd_draining gauge\n"
	    "sluice_execd_draining %d\n", xd->node_draining ? 1 : 0);
	evbuffer_add_printf(o, "# HELP sluice_execd_drain_remaining Sandboxes "
	    "left on a draining node (0 when not draining).\n# TYPE "
	    "sluice_execd_drain_remaining gauge\nsluice_execd_drain_remaining "
	    "%ld\n", xd->node_draining ? node_remaining(xd) : 0L);
	evbuffer_add_printf(o, "# HELP sluice_execd_drain_removed_total "
	    "Sandboxes removed (archived) by drains.\n# TYPE "
	    "sluice_execd_drain_removed_total counter\n"
	    "sluice_execd_drain_removed_total %llu\n",
	    (unsigned long long)xd->node_removed);
}
