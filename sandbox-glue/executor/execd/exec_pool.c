/*
 * exec_pool.c: warm pools (issue 26 point 1).
 *
 * "pools" names, per backend, profile and limits, how many sandboxes
 * wait made in advance: holder, namespaces (or runsc), root, workspace
 * file system, shim, broker session, all as a create makes them
 * (xd_box_create_child) but for nobody: no tenant, no user, under a host
 * key of their own ("pool-<12 hex digits>", which is also their
 * state directory, cgroups and broker session id for life); the broker
 * session the create made is deleted once the sandbox is up (sluiced
 * leaves its directory, which the sandbox has bound), so a waiting
 * sandbox reaches nothing.  A create that asks for exactly a pool's
 * backend, profile and limits, restores no archive and would get the
 * image the pool's sandbox has, takes one (exec_box.c, box_take): its
 * broker session is made for the caller's tenant, user and tier (same
 * id, so the socket lands in the bound directory), its credentials and
 * trust store written, its record saved as the caller's.  A pool's sandbox has never
 * run a command and is never given back: a taken one is deleted as any
 * other, so nothing of one tenant reaches another.
 *
 * Waiting sandboxes are in xd->pool, never in xd->boxes: no route,
 * listing, quota, lifecycle sweep or metric of sandboxes sees them;
 * they hold their uid slot (xd_box_slot).  The refill is the CPU
 * budget: at most pool_fills pool creates at once, none while a create
 * of the API is under way nor for POOL_QUIET_MS after one began (the
 * create, and the first commands that follow it, come first: a fill
 * beside them took a 2-core host's first exec from 4 to 20 ms), a
 * failed fill waits POOL_RETRY_S before that pool is tried again.
 *
 * A pool sandbox is dropped (deleted, no archive) when its pool is gone
 * or changed by a reload, when the daemon drains (the drain waits for
 * those workers) or the node does (PUT /v1/node), and when a restarted
 * daemon finds one (its side file says "pool": true): no pool sandbox
 * outlives the run that made it.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

#define POOL_RETRY_S	10      /* after a failed fill */
#define POOL_TICK_MS	1000    /* when every pool is full */
#define POOL_FAST_MS	50      /* when one is not */

static void pool_tick(evutil_socket_t fd, short what, void *arg);

static void
pool_gone(struct xd *xd, struct xd_box *b)
{
	TAILQ_REMOVE(&xd->pool, b, link);
	b->state = XD_BOX_GONE;
	xd_box_unref(b);        /* the list's */
}

static void
pool_drop_done(void *arg, json_t *res)
{
	struct xd_box *b = arg;
	struct xd *xd = b->xd;

	b->op = 0;
	if (json_is_true(json_object_get(res, "ok"))) {
		xd_log(XD_LOG_DEBUG, "pool sandbox %s: dropped", b->rec.chat);
		xd->pool_dropped++;
		pool_gone(xd, b);
	} else {
		/* tried again at the next tick (or by the next run) */
		xd_log(XD_LOG_WARN, "pool sandbox %s: cannot drop: %s",
		    b->rec.chat, json_string_value(json_object_get(res,
		    "message")) ? json_string_value(json_object_get(res,
		    "message")) : "the worker died");
		b->state = XD_BOX_STOPPED;
	}
	xd_box_unref(b);        /* the worker's */
	json_decref(res);
}

/* Deleted as a delete does, without an archive. */
static void
pool_drop(struct xd *xd, struct xd_box *b)
{
	char err[XD_ERR_MAX];

	b->pool_ix = -1;
	b->state = XD_BOX_DELETING;
	b->op = 1;
	b->del_archive = 0;
	snprintf(b->del_reason, sizeof(b->del_reason), "pool");
	b->refs++;
	if (xd_job_run(xd, "pool-drop", xd_box_delete_child, b,
	    pool_drop_done, b, err, sizeof(err)) != 0) {
		xd_log(XD_LOG_WARN, "pool sandbox %s: cannot drop: %s",
		    b->rec.chat, err);
		b->refs--;
		b->op = 0;
		b->state = XD_BOX_STOPPED;
	}
}

static void
pool_fill_done(void *arg, json_t *res)
{
	struct xd_box *b = arg;
	struct xd *xd = b->xd;
	char err[XD_ERR_MAX];
	char *s = NULL;

	b->op = 0;
	xd->pool_filling--;
	if (json_is_true(json_object_get(res, "ok")) && (s = json_dumps(
	    json_object_get(res, "record"), 0)) != NULL &&
	    sbx_rec_parse(&b->rec, s, strlen(s), err, sizeof(err)) == 0) {
		b->state = XD_BOX_RUNNING;
		b->used_saved = b->rec.last_used;
		xd->pool_filled++;
		xd_log(XD_LOG_DEBUG, "pool sandbox %s: ready (%s)",
		    b->rec.chat, b->rec.backend);
		/* its pool changed or the daemon drains meanwhile */
		if (b->pool_ix < 0 || xd->draining)
			pool_drop(xd, b);
	} else {
		const char *m = json_string_value(json_object_get(res,
		    "message"));

		xd_log(XD_LOG_WARN, "pool sandbox %s: not made: %s (pool "
		    "tried again in %d s)", b->rec.chat, m ? m : res == NULL ?
		    "the worker died" : "the record does not read back",
		    POOL_RETRY_S);
		xd->pool_fill_failed++;
		if (b->pool_ix >= 0 && (size_t)b->pool_ix < XD_POOLS_MAX)
			xd->pool_retry[b->pool_ix] = (int64_t)time(NULL) +
			    POOL_RETRY_S;
		/* the worker left nothing (as a failed create) */
		pool_gone(xd, b);
	}
	free(s);
	xd_box_unref(b);        /* the worker's */
	json_decref(res);
	xd_pool_arm(xd, 0);
}

/* One sandbox for pool ix, made by a create worker; 0 or -1 (nothing
 * started: no slot, the backend or root not there now). */
static int
pool_fill(struct xd *xd, size_t ix)
{
	const struct xd_cfg *c = xd->cfg;
	const struct xd_pool_cfg *p = &c->pools[ix];
	struct xd_create_spec s;
	struct xd_perr e;
	struct xd_box *b;
	unsigned char rnd[8];
	char key[SBX_ID_MAX + 1], err[XD_ERR_MAX];
	int64_t now = (int64_t)time(NULL);

	if ((b = xd_box_new(xd)) == NULL)
		return -1;
	memset(&s, 0, sizeof(s));
	memset(&e, 0, sizeof(e));
	snprintf(s.profile, sizeof(s.profile), "%s", p->profile);
	if ((b->be = sbx_backend_find(p->backend)) == NULL ||
	    b->be->available(err, sizeof(err)) != 0 ||
	    xd_box_pick_root(c, &s, &b->rec, &e) != 0 ||
	    (b->rec.slot = xd_box_slot(xd)) < 0 ||
	    getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		/* not now: the pool waits as after a failure */
		if (xd->pool_retry[ix] <= now)
			xd_log(XD_LOG_INFO, "pool %zu (%s, %s): no fill now: %s",
			    ix, p->backend, p->profile, e.msg[0] ? e.msg :
			    b->be == NULL ? "unknown backend" : b->rec.slot < 0 ?
			    "no free uid slot" : err);
		xd_perr_clear(&e);
		xd->pool_retry[ix] = now + POOL_RETRY_S;
		free(b);
		return -1;
	}
	/* short: the session's socket path under sluiced's runtime dir
	 * has the room of a sun_path only */
	snprintf(key, sizeof(key), "pool-%02x%02x%02x%02x%02x%02x", rnd[0],
	    rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	snprintf(b->rec.tier, sizeof(b->rec.tier), "%s", c->tier);
	if (xd_box_rec_init(xd, b, key, &p->lim) != 0) {
		free(b);
		return -1;
	}
	b->pool_ix = (int)ix;
	b->pool_wait = 1;
	b->state = XD_BOX_CREATING;
	b->op = 1;
	b->refs++;              /* the worker's */
	if (xd_job_run(xd, "pool-fill", xd_box_create_child, b,
	    pool_fill_done, b, err, sizeof(err)) != 0) {
		xd_log(XD_LOG_WARN, "pool %zu: %s", ix, err);
		free(b);
		return -1;
	}
	TAILQ_INSERT_TAIL(&xd->pool, b, link);
	xd->pool_filling++;
	return 0;
}

static void
pool_tick(evutil_socket_t fd, short what, void *arg)
{
	struct xd *xd = arg;
	const struct xd_cfg *c = xd->cfg;
	int64_t now = (int64_t)time(NULL);
	long have[XD_POOLS_MAX];
	struct xd_box *b, *tmp;
	int short_of = 0;
	size_t i;

	(void)fd;
	(void)what;
	memset(have, 0, sizeof(have));
	/* a node being drained (PUT /v1/node) makes no sandbox: nor keeps
	 * any waiting; they fill again when it is not */
	if (xd->node_draining)
		TAILQ_FOREACH(b, &xd->pool, link)
			b->pool_ix = -1;
	TAILQ_FOREACH_SAFE(b, &xd->pool, link, tmp) {
		if (b->op)
			;       /* a worker has it */
		else if (b->pool_ix < 0 || (size_t)b->pool_ix >= c->npools ||
		    b->state == XD_BOX_STOPPED)
			pool_drop(xd, b);
		if (b->pool_ix >= 0 && (size_t)b->pool_ix < XD_POOLS_MAX)
			have[b->pool_ix]++;
	}
	if (xd->draining)
		return;
	if (xd->node_draining) {
		xd_pool_arm(xd, POOL_TICK_MS);     /* until it ends */
		return;
	}
	if (sbx_now_ms() < xd->pool_quiet_until) {
		xd_pool_arm(xd, xd->pool_quiet_until - sbx_now_ms() + 1);
		return;
	}
	for (i = 0; i < c->npools; i++) {
		/* the API's creates first; then at most pool_fills at once */
		while (have[i] < c->pools[i].size && xd->creating == 0 &&
		    xd->pool_filling < c->pool_fills &&
		    xd->pool_retry[i] <= now && pool_fill(xd, i) == 0)
			have[i]++;
		if (have[i] < c->pools[i].size)
			short_of = 1;
	}
	xd_pool_arm(xd, short_of ? POOL_FAST_MS : POOL_TICK_MS);
}

int
xd_pool_start(struct xd *xd)
{
	if (xd->ev_pool == NULL && (xd->ev_pool = evtimer_new(xd->base,
	    pool_tick, xd)) == NULL)
		return -1;
	xd_pool_arm(xd, 0);
	return 0;
}

void
xd_pool_reload(struct xd *xd)
{
	struct xd_box *b;

	/* the indexes were the old configuration's: every pool sandbox is
	 * dropped and the new pools fill afresh */
	TAILQ_FOREACH(b, &xd->pool, link)
		b->pool_ix = -1;
	memset(xd->pool_retry, 0, sizeof(xd->pool_retry));
	xd_pool_arm(xd, 0);
}

void
xd_pool_stop(struct xd *xd)
{
	struct xd_box *b;

	TAILQ_FOREACH(b, &xd->pool, link)
		b->pool_ix = -1;
	pool_tick(-1, 0, xd);
}

void
xd_pool_free(struct xd *xd)
{
	struct xd_box *b;

	if (xd->ev_pool != NULL)
		event_free(xd->ev_pool);
	xd->ev_pool = NULL;
	while ((b = TAILQ_FIRST(&xd->pool)) != NULL) {
		if (b->state != XD_BOX_GONE)
			xd_log(XD_LOG_WARN, "pool sandbox %s: left (the next "
			    "start drops it)", b->rec.chat);
		b->refs = 1;
		pool_gone(xd, b);
	}
}

void
xd_pool_metrics(struct xd *xd, struct evbuffer *o)
{
	const struct xd_cfg *c = xd->cfg;
	long ready[XD_POOLS_MAX];
	struct xd_box *b;
	size_t i;

	memset(ready, 0, sizeof(ready));
	TAILQ_FOREACH(b, &xd->pool, link)
		if (!b->op && b->state == XD_BOX_RUNNING && b->pool_ix >= 0 &&
		    (size_t)b->pool_ix < c->npools)
			ready[b->pool_ix]++;
	evbuffer_add_printf(o, "# HELP sluice_execd_pool_ready Sandboxes "
	    "waiting in a warm pool.\n# TYPE sluice_execd_pool_ready gauge\n");
	for (i = 0; i < c->npools; i++)
		evbuffer_add_printf(o, "sluice_execd_pool_ready{pool=\"%zu\","
		    "backend=\"%s\",profile=\"%s\"} %ld\n", i,
		    c->pools[i].backend, c->pools[i].profile, ready[i]);
	evbuffer_add_printf(o, "# HELP sluice_execd_pool_size Sandboxes a "
	    "warm pool keeps (pools[].size).\n# TYPE sluice_execd_pool_size "
	    "gauge\n");
	for (i = 0; i < c->npools; i++)
		evbuffer_add_printf(o, "sluice_execd_pool_size{pool=\"%zu\","
		    "backend=\"%s\",profile=\"%s\"} %ld\n", i,
		    c->pools[i].backend, c->pools[i].profile,
		    c->pools[i].size);
	evbuffer_add_printf(o, "# HELP sluice_execd_pool_filling Pool "
	    "sandboxes being made.\n# TYPE sluice_execd_pool_filling gauge\n"
	    "sluice_execd_pool_filling %ld\n", xd->pool_filling);
	evbuffer_add_printf(o, "# HELP sluice_execd_pool_taken_total Creates "
	    "that took a pool's sandbox.\n# TYPE sluice_execd_pool_taken_total "
	    "counter\nsluice_execd_pool_taken_total %llu\n",
	    (unsigned long long)xd->pool_taken);
	evbuffer_add_printf(o, "# HELP sluice_execd_pool_filled_total Pool "
	    "sandboxes made.\n# TYPE sluice_execd_pool_filled_total counter\n"
	    "sluice_execd_pool_filled_total %llu\n",
	    (unsigned long long)xd->pool_filled);
	evbuffer_add_printf(o, "# HELP sluice_execd_pool_fill_failed_total "
	    "Pool sandboxes that could not be made.\n# TYPE "
	    "sluice_execd_pool_fill_failed_total counter\n"
	    "sluice_execd_pool_fill_failed_total %llu\n",
	    (unsigned long long)xd->pool_fill_failed);
	evbuffer_add_printf(o, "# HELP sluice_execd_pool_dropped_total Pool "
	    "sandboxes deleted untaken (pool changed, drain, restart).\n"
	    "# TYPE sluice_execd_pool_dropped_total counter\n"
	    "sluice_execd_pool_dropped_total %llu\n",
	    (unsigned long long)xd->pool_dropped);
}
