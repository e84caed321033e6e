/*
 * exec_rec.c: a sandbox's record on disk (<state_dir>/<id>/record.json,
 * the struct sbx_rec sluice-run writes too) and the lifetime of a box in
 * memory.  Below both exec_cmd.c and exec_box.c: a command that ends
 * notes the use in the record and lets go of its box.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

/* Through a temporary file and rename: a reader (or a restart) sees the
 * old record or the new one. */
int
xd_rec_save(const struct sbx_rec *r)
{
	char p[SBX_PATH_MAX + 32], t[SBX_PATH_MAX + 32];
	json_t *o = sbx_rec_json(r);
	int rc;

	snprintf(p, sizeof(p), "%s/record.json", r->dir);
	snprintf(t, sizeof(t), "%s/record.json.tmp", r->dir);
	rc = o != NULL ? json_dump_file(o, t, JSON_INDENT(1) | JSON_SORT_KEYS)
	    : -1;
	json_decref(o);
	if (rc != 0 || rename(t, p) != 0) {
		xd_log(XD_LOG_ERR, "%s: cannot save the record", p);
		(void)unlink(t);
		return -1;
	}
	return 0;
}

void
xd_box_unref(struct xd_box *b)
{
	if (--b->refs > 0 || b->state != XD_BOX_GONE)
		return;
	json_decref(b->restored);
	json_decref(b->archived);
	free(b);
}

/* A use of b now: last_used, saved at most every XD_USED_SAVE_S (or
 * idle_after / 10) seconds (exec_box.c says why). */
void
xd_box_used(struct xd_box *b, int64_t now)
{
	const struct xd_cfg *c = b->xd->cfg;
	int64_t lag;

	b->rec.last_used = now;
	if (b->state != XD_BOX_RUNNING)
		return;
	lag = c->idle_after > 0 && c->idle_after / 10 < XD_USED_SAVE_S ?
	    c->idle_after / 10 : XD_USED_SAVE_S;
	if (now - b->used_saved >= lag) {
		b->used_saved = now;
		(void)!xd_rec_save(&b->rec);
	}
}
