/*
 * exec_pool_list.c: the warm pools' waiting list, below exec_box.c: a
 * create takes a waiting sandbox out of it (xd_pool_take), a record of
 * an earlier run's pool sandbox is put back in it to be dropped
 * (xd_pool_adopt), a create quiets the refill (xd_pool_quiet).  What
 * makes and drops pool sandboxes (exec_pool.c) is above exec_box.c and
 * runs from the pools' timer, which these only arm: so the two files do
 * not call each other.
 */
#include "sluice-config.h"

#include <string.h>

#include <event2/event.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

#define POOL_QUIET_MS	250     /* no fill so soon after a create */

void
xd_pool_arm(struct xd *xd, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (xd->ev_pool != NULL)
		(void)event_add(xd->ev_pool, &tv);
}

void
xd_pool_adopt(struct xd *xd, struct xd_box *b)
{
	b->pool_ix = -1;
	b->pool_wait = 1;
	if (b->state != XD_BOX_STOPPED)
		b->state = XD_BOX_RUNNING;
	TAILQ_INSERT_TAIL(&xd->pool, b, link);
	xd_pool_arm(xd, 0);
}

struct xd_box *
xd_pool_take(struct xd *xd, const struct xd_create_spec *s,
    const char *image)
{
	const struct xd_cfg *c = xd->cfg;
	const char *prof = s->profile[0] ? s->profile : c->profile;
	struct xd_box *b, *tmp;

	TAILQ_FOREACH_SAFE(b, &xd->pool, link, tmp) {
		const struct xd_pool_cfg *p;

		if (b->op || b->state != XD_BOX_RUNNING || b->pool_ix < 0 ||
		    (size_t)b->pool_ix >= c->npools)
			continue;
		p = &c->pools[b->pool_ix];
		if (strcmp(p->backend, s->backend) != 0 ||
		    strcmp(p->profile, prof) != 0 ||
		    !xd_lims_eq(&p->lim, &s->lim))
			continue;
		/* a rebuilt image since it was made: a cold create would
		 * get the new one, so does the pool from now on */
		if (strcmp(b->rec.image, image) != 0) {
			b->pool_ix = -1;        /* the next tick drops it */
			xd_pool_arm(xd, 0);
			continue;
		}
		/* the pool list's reference goes with it to boxes */
		TAILQ_REMOVE(&xd->pool, b, link);
		return b;
	}
	return NULL;
}

void
xd_pool_quiet(struct xd *xd)
{
	xd->pool_quiet_until = sbx_now_ms() + POOL_QUIET_MS;
	if (xd->cfg->npools > 0)
		xd_pool_arm(xd, POOL_QUIET_MS + 1);
}
