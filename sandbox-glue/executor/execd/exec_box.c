/*
 * exec_box.c: the sandboxes sluice-execd owns.  Each is a box in
 * memory (struct xd_box) and a directory <state_dir>/<id> holding the
 * record (record.json, struct sbx_rec, as sluice-run writes it), the
 * daemon's own settings of it (execd.json: profile, command limits),
 * the backend's files and, by default, the workspace.
 *
 * A create checks the quotas and takes a uid slot on the loop, then a
 * worker makes the directory, the workspace, the broker session
 * (sluiced), the sandbox (backend), saves the record and commits; a
 * create that fails at any step takes back what it made, the broker
 * session included, so that a refused create leaves nothing behind.
 * A delete destroys the sandbox, archives the workspace (or drops the
 * archive), deletes the broker session and removes the directory, also
 * in a worker.  One that fails once the sandbox is destroyed (the
 * archive cannot be written) leaves the box STOPPED: the workspace and
 * the record stay for a delete again (?archive=discard: without the
 * archive).  While a worker holds a box (op), or it is not running, it
 * takes no command and no change of its workspace (exec_api.c).
 *
 * References: the list holds one, each command and each worker one;
 * xd_box_unref (exec_rec.c) frees a box that has left the list.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

struct box_op {
	struct xd_box *box;
	xd_box_cb cb;
	void *arg;
	char tier[16];
};


static void
box_remove(struct xd_box *b)
{
	TAILQ_REMOVE(&b->xd->boxes, b, link);
	b->state = XD_BOX_GONE;
	xd_box_unref(b);
}

/* An operation on b for cb(arg), run by a worker (box_op_run); NULL
 * and e set when out of memory. */
static struct box_op *
box_op_new(struct xd_box *b, xd_box_cb cb, void *arg, struct xd_perr *e)
{
	struct box_op *op = calloc(1, sizeof(*op));

	if (op == NULL) {
		xd_perr_set(e, 500, "internal", "out of memory");
		return NULL;
	}
	op->box = b;
	op->cb = cb;
	op->arg = arg;
	return op;
}

/* op's worker (what: its name, fn(fnarg) its work, done(op) its answer):
 * the box held by the worker and, busy, marked in an operation (b->op)
 * until done.  -1 and e set when no worker starts: op freed, the box as
 * it was. */
static int
box_op_run(struct box_op *op, const char *what, xd_job_fn fn, void *fnarg,
    xd_job_done done, int busy, struct xd_perr *e)
{
	struct xd_box *b = op->box;
	char err[XD_ERR_MAX];

	b->refs++;
	if (busy)
		b->op = 1;
	if (xd_job_run(b->xd, what, fn, fnarg, done, op, err,
	    sizeof(err)) != 0) {
		b->refs--;
		if (busy)
			b->op = 0;
		free(op);
		return xd_perr_set(e, 500, "internal", "%s", err);
	}
	return 0;
}

/* ---- tree removal (no link followed) ---- */

/*
 * Empty the directory open at dfd and close it, through directory fds
 * only: the workspace is the sandbox user's, and a directory swapped
 * for a link between a check and a path-based call would have root
 * remove files elsewhere.
 */
static void
rm_at(int dfd, int depth)
{
	struct dirent *de;
	DIR *d = fdopendir(dfd);
	int pass, gone;

	if (d == NULL) {
		close(dfd);
		return;
	}
	for (pass = 0, gone = 1; pass < 8 && gone; pass++) {
		gone = 0;
		rewinddir(d);
		while ((de = readdir(d)) != NULL) {
			int fd;

			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
				gone = 1;
				continue;
			}
			if (errno != EISDIR || depth >= 256)
				continue;
			fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				continue;
			rm_at(fd, depth + 1);
			if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) == 0)
				gone = 1;
		}
	}
	closedir(d);
}

static void
rm_tree(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOTDIR || errno == ELOOP)
			(void)unlink(path);
		return;
	}
	rm_at(fd, 0);
	(void)rmdir(path);
}

/* ---- the daemon's settings of a box (execd.json) ---- */

void
xd_box_side_save(const struct xd_box *b)
{
	char p[SBX_PATH_MAX + 32], t[SBX_PATH_MAX + 32];
	json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I}", "profile", b->profile,
	    "timeout_s", (json_int_t)b->lim.timeout_s, "output_cap",
	    (json_int_t)b->lim.output_cap, "disk_bytes",
	    (json_int_t)b->lim.disk_bytes, "inodes",
	    (json_int_t)b->lim.inodes);

	if (o != NULL && b->restored != NULL)
		json_object_set(o, "restored_from", b->restored);
	/* a restarted daemon must not take a destroyed sandbox for a dead
	 * one that a plain delete may remove: it is still stopped */
	if (o != NULL && b->state == XD_BOX_STOPPED)
		json_object_set_new(o, "stopped", json_string(b->stop_note));
	/* made for a warm pool, nobody's yet: a restarted daemon drops it */
	if (o != NULL && b->pool_wait)
		json_object_set_new(o, "pool", json_true());
	snprintf(p, sizeof(p), "%s/execd.json", b->rec.dir);
	snprintf(t, sizeof(t), "%s/execd.json.tmp", b->rec.dir);
	if (o == NULL || json_dump_file(o, t, 0) != 0 || rename(t, p) != 0)
		xd_log(XD_LOG_WARN, "%s: cannot save", p);
	json_decref(o);
}

static void
side_load(struct xd_box *b)
{
	char p[SBX_PATH_MAX + 32];
	json_t *o, *v;

	snprintf(p, sizeof(p), "%s/execd.json", b->rec.dir);
	if ((o = json_load_file(p, 0, NULL)) == NULL)
		return;
	if (json_is_string(v = json_object_get(o, "profile")))
		snprintf(b->profile, sizeof(b->profile), "%s",
		    json_string_value(v));
	if (json_is_integer(v = json_object_get(o, "timeout_s")) &&
	    json_integer_value(v) > 0 && json_integer_value(v) <=
	    b->xd->cfg->max.timeout_s)
		b->lim.timeout_s = (long)json_integer_value(v);
	if (json_is_integer(v = json_object_get(o, "output_cap")) &&
	    json_integer_value(v) >= 0 && json_integer_value(v) <=
	    b->xd->cfg->max.output_cap)
		b->lim.output_cap = (long)json_integer_value(v);
	/* what the workspace was made with (shown, not enforced here) */
	if (json_is_integer(v = json_object_get(o, "disk_bytes")) &&
	    json_integer_value(v) >= 0)
		b->lim.disk_bytes = (uint64_t)json_integer_value(v);
	if (json_is_integer(v = json_object_get(o, "inodes")) &&
	    json_integer_value(v) >= 0)
		b->lim.inodes = (uint64_t)json_integer_value(v);
	if (json_is_object(v = json_object_get(o, "restored_from")))
		b->restored = json_incref(v);
	b->pool_wait = json_is_true(json_object_get(o, "pool"));
	if (json_is_string(v = json_object_get(o, "stopped"))) {
		b->state = XD_BOX_STOPPED;
		snprintf(b->stop_note, sizeof(b->stop_note), "%s",
		    json_string_value(v));
		/* stopped by its archive: tried again after a restart too
		 * (one too large for the tenant's quota is not) */
		b->arch_failed = strncmp(b->stop_note, "archive failed", 14) ==
		    0 && strstr(b->stop_note, "archive_max_bytes_per_tenant") ==
		    NULL;
	}
	json_decref(o);
}

struct xd_box *
xd_box_new(struct xd *xd)
{
	struct xd_box *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return NULL;
	b->xd = xd;
	TAILQ_INIT(&b->cmds);
	b->refs = 1;            /* the list's */
	b->pool_ix = -1;
	b->lim = xd->cfg->def;
	snprintf(b->profile, sizeof(b->profile), "%s", SBX_PROFILE_HOST);
	snprintf(b->broker, sizeof(b->broker), "ok");
	return b;
}

void
xd_box_load_all(struct xd *xd)
{
	DIR *d = opendir(xd->cfg->state_dir);
	struct dirent *de;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char p[SBX_PATH_MAX + 300], err[XD_ERR_MAX];
		struct xd_box *b;

		if (!sbx_id_ok(de->d_name, SBX_ID_MAX))
			continue;
		snprintf(p, sizeof(p), "%s/%s/record.json", xd->cfg->state_dir,
		    de->d_name);
		if (access(p, F_OK) != 0 || (b = xd_box_new(xd)) == NULL)
			continue;
		if (sbx_rec_load(&b->rec, p, err, sizeof(err)) != 0 ||
		    strcmp(b->rec.chat, de->d_name) != 0 ||
		    (b->be = sbx_backend_find(b->rec.backend)) == NULL) {
			xd_log(XD_LOG_WARN, "%s: not adopted: %s", p, err);
			free(b);
			continue;
		}
		b->state = XD_BOX_RUNNING;
		b->lim.sbx = b->rec.lim;
		/* a suspended sandbox stays so until its next use */
		b->used_saved = b->rec.last_used;
		snprintf(b->broker, sizeof(b->broker), "unknown");
		side_load(b);
		/* the record's word on its root is the one that counts */
		if (b->rec.profile[0])
			snprintf(b->profile, sizeof(b->profile), "%s",
			    b->rec.profile);
		if (b->pool_wait) {
			xd_log(XD_LOG_INFO, "sandbox %s: a pool sandbox of an "
			    "earlier run: dropped", b->rec.chat);
			xd_pool_adopt(xd, b);
			continue;
		}
		TAILQ_INSERT_TAIL(&xd->boxes, b, link);
		xd_log(XD_LOG_INFO, "sandbox %s (%s): adopted, %s", b->rec.chat,
		    b->rec.backend, b->state == XD_BOX_STOPPED ? "stopped "
		    "(delete it)" : !b->be->alive(&b->rec) ?
		    "its sandbox is gone (delete it)" : b->rec.suspended ?
		    "suspended" : "running");
	}
	closedir(d);
}

struct xd_box *
xd_box_find(struct xd *xd, const char *tenant, const char *id, int *n)
{
	struct xd_box *b, *hit = NULL;
	int k = 0;

	TAILQ_FOREACH(b, &xd->boxes, link)
		if (strcmp(XD_REC_ID(&b->rec), id) == 0 && (tenant == NULL ||
		    strcmp(b->rec.tenant, tenant) == 0)) {
			k++;
			if (hit == NULL)
				hit = b;
		}
	if (n != NULL)
		*n = k;
	return hit;
}

/* The key of a box's archive: of its tenant and id whatever its host
 * key (a sandbox made before ids were per tenant has its id for one). */
static void
arch_key(const struct sbx_rec *r, char out[SBX_ID_MAX + 1])
{
	xd_key(r->tenant, XD_REC_ID(r), out);
}

void
xd_box_counts(struct xd *xd, const char *tenant, const char *user,
    long *total, long *nt, long *nu)
{
	struct xd_box *b;

	*total = *nt = *nu = 0;
	TAILQ_FOREACH(b, &xd->boxes, link) {
		(*total)++;
		if (tenant != NULL && tenant[0] && strcmp(b->rec.tenant,
		    tenant) == 0)
			(*nt)++;
		/* a user is counted within the tenant */
		if (user != NULL && user[0] && strcmp(b->rec.user, user) == 0 &&
		    strcmp(b->rec.tenant, tenant ? tenant : "") == 0)
			(*nu)++;
	}
}

static int
quota(struct xd_perr *e, const char *scope, long limit, long in_use)
{
	xd_perr_set(e, 429, "quota_exceeded", "%s quota: %ld of %ld in use",
	    scope, in_use, limit);
	e->extra = json_pack("{s:s,s:I,s:I}", "scope", scope, "limit",
	    (json_int_t)limit, "in_use", (json_int_t)in_use);
	return -1;
}

/* The ids of the listed boxes (in a worker: as they were at its fork):
 * their archives are being restored or written, or are theirs. */
static json_t *
live_ids(struct xd *xd)
{
	json_t *o = json_object();
	struct xd_box *b;
	char k[SBX_ID_MAX + 1];

	TAILQ_FOREACH(b, &xd->boxes, link) {
		arch_key(&b->rec, k);
		json_object_set_new(o, k, json_true());
	}
	return o;
}

/* Each archive a sweep removed: logged, counted and audited. */
static void
arch_evicted_note(struct xd *xd, json_t *evicted)
{
	json_t *v;
	size_t i;

	json_array_foreach(evicted, i, v) {
		const char *why = json_string_value(json_object_get(v,
		    "reason")), *id = json_string_value(json_object_get(v,
		    "id")), *file = json_string_value(json_object_get(v,
		    "file")), *tn = json_string_value(json_object_get(v,
		    "tenant")), *us = json_string_value(json_object_get(v,
		    "user"));

		if (why == NULL)
			continue;
		if (strcmp(why, "orphan") == 0) {
			xd->stats.arch_orphans++;
			xd_log(XD_LOG_INFO, "archive file %s: removed (orphaned: "
			    "no committed archive names it)", file ? file : "?");
		} else {
			if (strcmp(why, "expired") == 0)
				xd->stats.arch_expired++;
			else
				xd->stats.arch_evicted++;
			xd_log(XD_LOG_INFO, "archive of %s (tenant %s): removed "
			    "(%s)", id ? id : "?", tn ? tn : "", why);
		}
		xd_audit_box(xd, "archive_evict", "sluice-execd", "daemon",
		    id ? id : "", tn ? tn : "", us ? us : "", 200, NULL,
		    json_incref(v));
	}
}

/* ---- create ---- */

static json_t *
fail_json(int status, const char *code, const char *msg)
{
	return json_pack("{s:b,s:i,s:s,s:s}", "ok", 0, "status", status,
	    "code", code, "message", msg);
}

/* In the worker. */
/* The sandbox's directory, a stale one (a killed create's) removed
 * first: NULL, or the failure (*made: the directory is there). */
static json_t *
create_dir(struct xd_box *b, int *made)
{
	const char *sd = b->xd->cfg->state_dir;
	struct sbx_rec *r = &b->rec;
	char err[XD_ERR_MAX], rp[SBX_PATH_MAX + 16];
	struct stat st;

	*made = 0;
	if (util_mkdir_p(sd, 0711) != 0) {
		snprintf(err, sizeof(err), "%.300s: %s", sd, strerror(errno));
		return fail_json(500, "internal", err);
	}
	/* a directory without a record is what a killed create left */
	snprintf(rp, sizeof(rp), "%s/record.json", r->dir);
	if (lstat(r->dir, &st) == 0) {
		if (access(rp, F_OK) == 0)
			return fail_json(409, "exists", "a sandbox of that id "
			    "exists (made by another program)");
		if (snprintf(r->workspace, sizeof(r->workspace),
		    "%s/workspace", r->dir) >= (int)sizeof(r->workspace) ||
		    xd_ws_remove(r) != 0)
			return fail_json(500, "internal", "a workspace left "
			    "mounted by an earlier create cannot be unmounted");
		rm_tree(r->dir);
	}
	if (mkdir(r->dir, 0711) != 0) {
		snprintf(err, sizeof(err), "%.300s: %s", r->dir, strerror(errno));
		return fail_json(500, "internal", err);
	}
	*made = 1;
	if (snprintf(r->workspace, sizeof(r->workspace), "%s/workspace",
	    r->dir) >= (int)sizeof(r->workspace))
		return fail_json(500, "internal", "workspace: path too long");
	return NULL;
}

/* The workspace's file system: NULL, or the failure. */
static json_t *
create_workspace(struct xd_box *b)
{
	char err[XD_ERR_MAX], m[XD_ERR_MAX + 16];
	int nospace;

	if (xd_ws_make(b->xd->cfg->mke2fs, b->xd->cfg->state_dir, &b->rec,
	    &b->lim, &nospace, err, sizeof(err)) == 0) {
		b->rec.workspace_made = 1;
		return NULL;
	}
	snprintf(m, sizeof(m), "workspace: %s", err);
	/* the admission's figures were right at its time; something else
	 * took the space since */
	return nospace ? json_pack("{s:b,s:i,s:s,s:s,s:s}", "ok", 0,
	    "status", 503, "code", "backend_unavailable", "message", m,
	    "reason", "disk_full") : fail_json(500, "internal", m);
}

/*
 * With a store, its archive of this id (made here or on another host of
 * the fleet), fetched and checked for its owner as a local one is at
 * the create's admission; a store that does not answer fails the
 * create: an empty sandbox archived later would replace the archive it
 * holds.  NULL (b->restore set when there is one), or the failure.
 */
static json_t *
create_fetch(struct xd_box *b)
{
	const struct xd_cfg *c = b->xd->cfg;
	struct sbx_rec *r = &b->rec;
	char ak[SBX_ID_MAX + 1], err[XD_ERR_MAX], m[XD_ERR_MAX + 256];
	struct xd_perr pe;
	json_t *meta = NULL, *res;
	int found, bad;

	if (c->s3.url[0] == '\0')
		return NULL;
	arch_key(r, ak);
	if (xd_arch_fetch(c, ak, &found, err, sizeof(err)) != 0) {
		snprintf(m, sizeof(m), "archive store %.200s: %s", c->s3.url,
		    err);
		return json_pack("{s:b,s:i,s:s,s:s,s:s,s:s}", "ok", 0,
		    "status", 503, "code", "backend_unavailable", "message", m,
		    "reason", "archive_store", "archive", "not_restored");
	}
	memset(&pe, 0, sizeof(pe));
	if (found && xd_box_arch_owner(c, ak, r->tenant, r->user, 1, &meta,
	    &bad, &pe) != 0) {
		xd_arch_discard(c, ak);
		res = fail_json(pe.status, pe.code, pe.msg);
		xd_perr_clear(&pe);
		return res;
	}
	json_decref(meta);
	b->restore = found;
	return NULL;
}

/* The archive of an earlier sandbox of this id, into the empty
 * workspace before anything runs in it: NULL, or the failure. */
static json_t *
create_restore(struct xd_box *b)
{
	char err[XD_ERR_MAX], m[XD_ERR_MAX + 128];
	int corrupt;

	if (!b->restore || xd_arch_restore(b->xd->cfg, &b->rec, &b->restored,
	    &corrupt, err, sizeof(err)) == 0)
		return NULL;
	snprintf(m, sizeof(m), "sandbox %s: %s%s", b->rec.chat, err, corrupt ?
	    " (nothing restored; DELETE /v1/sandboxes/{id}?archive=discard "
	    "drops the archive)" : "");
	return json_pack("{s:b,s:i,s:s,s:s,s:s}", "ok", 0, "status", 409,
	    "code", "conflict", "message", m, "archive", corrupt ? "corrupt" :
	    "not_restored");
}

/*
 * Restored and the sandbox made: the archive has done its work (kept,
 * it would count against the tenant's archives and its workspace be on
 * the disk twice); not before, as a create that fails after the restore
 * takes the workspace back.  The store's too, unless another host
 * archived the id anew meanwhile.
 */
static void
drop_restored(struct xd_box *b)
{
	char ak[SBX_ID_MAX + 1], err[XD_ERR_MAX];

	if (b->restored == NULL)
		return;
	arch_key(&b->rec, ak);
	if (xd_arch_drop(b->xd->cfg, ak, json_string_value(json_object_get(
	    b->restored, "sha256")), err, sizeof(err)) != 0)
		xd_log(XD_LOG_WARN, "sandbox %s: restored; its archive stays "
		    "in the store: %s", b->rec.chat, err);
}

json_t *
xd_box_create_child(void *arg)
{
	struct xd_box *b = arg;
	struct xd *xd = b->xd;
	struct sbx_rec *r = &b->rec;
	struct xd_perr be;
	char err[XD_ERR_MAX];
	int session = 0, made;
	json_t *res;

	memset(&be, 0, sizeof(be));
	if ((res = create_dir(b, &made)) != NULL) {
		if (!made)
			return res;
		goto fail;
	}
	if ((res = create_workspace(b)) != NULL ||
	    (res = create_fetch(b)) != NULL ||
	    (res = create_restore(b)) != NULL)
		goto fail;
	/* the record before anything is made outside the directory: a
	 * worker killed from here on leaves what delete can take down */
	if (xd_rec_save(r) != 0) {
		res = fail_json(500, "internal", "cannot save the record");
		goto fail;
	}
	xd_box_side_save(b);
	/* the broker session first: no sandbox without its policy */
	if (xd_broker_create(xd->cfg, r, r->session_dir,
	    sizeof(r->session_dir), &be) != 0) {
		res = fail_json(be.status, be.code, be.msg);
		goto fail;
	}
	session = 1;
	xd_broker_socket_own(r);
	/* its trust store and credentials before anything runs */
	if (xd_broker_sbx_env(xd->cfg, r, b->creds, b->ncreds, &be) != 0) {
		res = fail_json(be.status, be.code, be.msg);
		goto fail;
	}
	if (b->be->create(r, err, sizeof(err)) != 0) {
		char m[XD_ERR_MAX + 32];

		snprintf(m, sizeof(m), "backend %s: %s", b->be->name, err);
		res = fail_json(503, "backend_unavailable", m);
		goto fail;
	}
	/* a pool's sandbox waits without a session: nothing it could reach
	 * until a take makes one, under the same name, whose socket
	 * sluiced puts in the directory the sandbox has bound (sluiced
	 * leaves it when the session goes) */
	if (b->pool_wait && xd_broker_delete(xd->cfg, r->chat, &be) != 0) {
		(void)b->be->destroy(r, err, sizeof(err));
		res = fail_json(be.status, be.code, be.msg);
		goto fail;
	}
	if (xd_rec_save(r) != 0) {
		(void)b->be->destroy(r, err, sizeof(err));
		res = fail_json(500, "internal", "cannot save the record");
		goto fail;
	}
	if (b->be->commit != NULL)
		b->be->commit(r);
	drop_restored(b);
	return json_pack("{s:b,s:o,s:O?}", "ok", 1, "record", sbx_rec_json(r),
	    "restored", b->restored);
fail:
	if (session && xd_broker_delete(xd->cfg, r->chat, &be) != 0)
		xd_log(XD_LOG_WARN, "sandbox %s: broker session left: %s",
		    r->chat, be.msg);
	xd_broker_sbx_env_drop(r);
	if (r->session_dir[0])
		(void)rmdir(r->session_dir);
	/* never remove files under a mount that is still there */
	if (xd_ws_remove(r) == 0)
		rm_tree(r->dir);
	return res;
}

static void
perr_from(struct xd_perr *e, json_t *res, const char *what)
{
	const char *code = json_string_value(json_object_get(res, "code"));
	const char *msg = json_string_value(json_object_get(res, "message"));
	json_int_t st = json_integer_value(json_object_get(res, "status"));

	e->status = st >= 400 && st < 600 ? (int)st : 500;
	/* the code is one of ours; keep the pointer to a literal */
	e->code = "internal";
	if (code != NULL) {
		static const char *const codes[] = { "bad_request",
		    "forbidden", "network_not_permitted", "not_found",
		    "exists", "conflict", "backend_unavailable",
		    "broker_unavailable", NULL };
		size_t i;

		for (i = 0; codes[i] != NULL; i++)
			if (strcmp(codes[i], code) == 0)
				e->code = codes[i];
	}
	snprintf(e->msg, sizeof(e->msg), "%s", msg ? msg : what);
	if (json_is_string(json_object_get(res, "archive")) ||
	    json_is_string(json_object_get(res, "reason"))) {
		e->extra = json_object();
		if (json_is_string(json_object_get(res, "archive")))
			json_object_set(e->extra, "archive", json_object_get(
			    res, "archive"));
		if (json_is_string(json_object_get(res, "reason")))
			json_object_set(e->extra, "reason", json_object_get(
			    res, "reason"));
	}
}

/* A worker's answer as an error, res NULL when the worker died (died
 * says so). */
static void
perr_of(struct xd_perr *e, json_t *res, const char *died, const char *what)
{
	if (res == NULL)
		xd_perr_set(e, 500, "internal", "%s", died);
	else
		perr_from(e, res, what);
}

/* ---- storage: what the workspaces and archives take ---- */

/* The bytes of a live box's workspace not yet allocated on disk: all of
 * it while its create has not made the image, what a sparse image (made
 * before images were allocated whole, or where fallocate is not
 * supported) has not taken yet. */
static uint64_t
box_unallocated(const struct xd_box *b)
{
	char img[SBX_PATH_MAX + 32];
	struct stat st;
	uint64_t have;

	if (b->lim.disk_bytes == 0)
		return 0;
	snprintf(img, sizeof(img), "%s/workspace.img", b->rec.dir);
	if (lstat(img, &st) != 0 || !S_ISREG(st.st_mode))
		return b->state == XD_BOX_CREATING ? b->lim.disk_bytes : 0;
	have = (uint64_t)st.st_blocks * 512;
	return have >= b->lim.disk_bytes ? 0 : b->lim.disk_bytes - have;
}

json_t *
xd_arch_list_shown(struct xd *xd)
{
	/* with a store, its archives (every host's) as the last sweep
	 * listed them: the loop does not ask the store */
	if (xd->cfg->s3.url[0] != '\0')
		return xd->arch_store != NULL ? json_incref(xd->arch_store) :
		    json_array();
	return xd_arch_list(xd->cfg);
}

void
xd_box_storage(struct xd *xd, struct xd_storage *s, int archives)
{
	const struct xd_cfg *c = xd->cfg;
	char p[SBX_PATH_MAX], *slash;
	struct statvfs v;
	struct xd_box *b;
	json_t *list, *a;
	size_t i;

	memset(s, 0, sizeof(*s));
	s->reserve = c->disk_reserve;
	TAILQ_FOREACH(b, &xd->boxes, link) {
		s->workspaces += b->lim.disk_bytes;
		s->unallocated += box_unallocated(b);
	}
	/* the state dir's file system (the nearest directory there is:
	 * the first create makes the state dir) */
	snprintf(p, sizeof(p), "%s", c->state_dir);
	while (statvfs(p, &v) != 0) {
		if (errno != ENOENT || (slash = strrchr(p, '/')) == NULL ||
		    slash == p)
			goto archives;
		*slash = '\0';
	}
	s->ok = 1;
	s->free = (uint64_t)v.f_bavail * v.f_frsize;
	s->total = (uint64_t)v.f_blocks * v.f_frsize;
	s->headroom = (int64_t)s->free - (int64_t)s->unallocated -
	    (int64_t)s->reserve;
archives:
	if (!archives || (list = xd_arch_list_shown(xd)) == NULL)
		return;
	json_array_foreach(list, i, a) {
		s->archives += (uint64_t)json_integer_value(json_object_get(a,
		    "bytes"));
		s->narchives++;
	}
	json_decref(list);
}

static void
box_create_done(void *arg, json_t *res)
{
	struct box_op *op = arg;
	struct xd_box *b = op->box;
	struct xd_perr e;
	char err[XD_ERR_MAX];

	memset(&e, 0, sizeof(e));
	b->xd->creating--;
	b->op = 0;
	if (json_is_true(json_object_get(res, "ok"))) {
		char *s = json_dumps(json_object_get(res, "record"), 0);

		if (s != NULL && sbx_rec_parse(&b->rec, s, strlen(s), err,
		    sizeof(err)) == 0) {
			free(s);
			b->state = XD_BOX_RUNNING;
			b->used_saved = b->rec.last_used;
			if (json_is_object(json_object_get(res, "restored"))) {
				b->restored = json_incref(json_object_get(res,
				    "restored"));
				b->xd->stats.restored++;
			}
			xd_log(XD_LOG_INFO, "sandbox %s: created (%s, tenant "
			    "%s)", b->rec.chat, b->rec.backend, b->rec.tenant);
			b->xd->stats.created++;
			xd_event(b->xd, "sandbox", "created", b->rec.tenant,
			    json_pack("{s:s,s:s,s:s,s:s,s:s}", "id", XD_REC_ID(&b->rec),
			    "tenant", b->rec.tenant, "user", b->rec.user,
			    "backend", b->rec.backend, "tier", b->rec.tier));
			if (b->restored != NULL)
				xd_event(b->xd, "sandbox", "restored",
				    b->rec.tenant, json_pack(
				    "{s:s,s:s,s:s,s:O}", "id", XD_REC_ID(&b->rec),
				    "tenant", b->rec.tenant, "user",
				    b->rec.user, "restored_from", b->restored));
			op->cb(op->arg, b, NULL);
			goto out;
		}
		free(s);
		xd_perr_set(&e, 500, "internal", "the created record does not read "
		    "back");
	} else if (res == NULL)
		xd_perr_set(&e, 500, "internal", "the create worker died");
	else
		perr_from(&e, res, "create failed");
	xd_log(XD_LOG_INFO, "sandbox %s: not created: %s", b->rec.chat, e.msg);
	b->xd->stats.create_failed++;
	op->cb(op->arg, NULL, &e);
	xd_perr_clear(&e);
	box_remove(b);
out:
	xd_box_unref(b);        /* the worker's */
	json_decref(res);
	free(op);
}

/*
 * The sandbox's root: the profile asked for (or the daemon's), if the
 * tenant may use it (tenant_profiles: 403 forbidden), and its newest
 * image (none built: 503 backend_unavailable, reason image_missing; the
 * backend's create takes the image under the store's lock and fails the
 * same way should a sweep take it meanwhile).  An image's sandbox runs
 * the static shim: the image's libc is not the host's.
 */
int
xd_box_pick_root(const struct xd_cfg *c, const struct xd_create_spec *s,
    struct sbx_rec *r, struct xd_perr *e)
{
	const char *prof = s->profile[0] ? s->profile : c->profile;
	char err[XD_ERR_MAX];
	int rc;

	if (!sbx_profile_allowed(c->tenant_profiles, s->tenant, prof)) {
		e->extra = json_pack("{s:s,s:s}", "reason", "profile_forbidden",
		    "profile", prof);
		return xd_perr_set(e, 403, "forbidden", "%s", s->tenant[0] ? "this tenant "
		    "may not use that profile (tenant_profiles)" : "a sandbox "
		    "without a tenant may not use that profile "
		    "(tenant_profiles)");
	}
	if ((rc = sbx_image_pick(r, c->image_dir, prof, err, sizeof(err))) !=
	    0) {
		e->extra = json_pack("{s:s,s:s}", "reason", rc ==
		    SBX_IMG_MISSING ? "image_missing" : "image_failed",
		    "profile", prof);
		return xd_perr_set(e, 503, "backend_unavailable", "%s", err);
	}
	if (r->image[0] != '\0' && !c->shim_static_ok) {
		snprintf(err, sizeof(err), "shim_static %.300s: not a static "
		    "executable, which an image's sandbox needs (make "
		    "sandbox-glue/shim/sluice-shim-static; set \"shim_static\"; "
		    "reload)",
		    c->shim_static);
		e->extra = json_pack("{s:s}", "reason", "shim_static");
		return xd_perr_set(e, 503, "backend_unavailable", "%s", err);
	}
	return 0;
}

int
xd_box_arch_owner(const struct xd_cfg *c, const char *id, const char *tenant,
    const char *user, int bound, json_t **meta, int *corrupt,
    struct xd_perr *e)
{
	int bad;
	json_t *m = xd_arch_meta(c, id, &bad);
	const char *mt, *mu;

	*meta = NULL;
	*corrupt = bad;
	if (bad && user == NULL && !bound)
		return 0;
	if (bad) {
		/* whose it is is not known: neither restored nor dropped by
		 * a caller of one tenant; one bound to none may drop it */
		e->extra = json_pack("{s:s}", "archive", "corrupt");
		return xd_perr_set(e, 409, "conflict", "%s", bound ? "the archive of this id "
		    "does not read, so whose it is is not known (a caller "
		    "bound to no tenant drops it: DELETE /v1/sandboxes/{id}"
		    "?archive=discard&tenant={tenant})" : "the archive of this "
		    "id does not read (DELETE /v1/sandboxes/{id}?archive="
		    "discard&tenant={tenant} drops it)");
	}
	if (m == NULL)
		return 0;
	mt = json_string_value(json_object_get(m, "tenant"));
	mu = json_string_value(json_object_get(m, "user"));
	if ((user != NULL || bound) && strcmp(mt ? mt : "",
	    tenant) != 0) {
		json_decref(m);
		return xd_perr_set(e, 403, "forbidden", "this id's archived workspace "
		    "belongs to another tenant");
	}
	if (user != NULL && strcmp(mu ? mu : "", user) != 0) {
		json_decref(m);
		return xd_perr_set(e, 403, "forbidden", "this id's archived workspace "
		    "belongs to another user");
	}
	*meta = m;
	return 0;
}

/*
 * A create is admitted only while its workspace fits in the free space
 * of the state dir's file system beside what is promised already: the
 * bytes of the live workspaces not yet allocated (creates under way,
 * sparse images) and quotas.disk_reserve_mb kept for the archives, the
 * records and whatever else lives there (issue 20 point 4).  Images are
 * allocated whole when made, so the allocated ones are in the free
 * space already.  503 backend_unavailable, reason disk_full, with the
 * figures: the host is full, not the tenant's quota (429), and another
 * host of a fleet may take it; a code of its own would be one more that
 * every client of DESIGN.md's error list must learn for the same
 * "not here, not now".
 */
static int
box_admit(struct xd *xd, const struct xd_create_spec *s, struct xd_perr *e)
{
	struct xd_storage st;
	char m[XD_ERR_MAX];

	xd_box_storage(xd, &st, 0);
	if (!st.ok || st.headroom >= (int64_t)s->lim.disk_bytes)
		return 0;
	snprintf(m, sizeof(m), "the host's disk is full: a workspace of %llu "
	    "MiB does not fit in the %llu MiB free on the state dir's file "
	    "system beside %llu MiB promised to workspaces and the reserve "
	    "of %llu MiB (quotas.disk_reserve_mb)",
	    (unsigned long long)(s->lim.disk_bytes >> 20),
	    (unsigned long long)(st.free >> 20),
	    (unsigned long long)(st.unallocated >> 20),
	    (unsigned long long)(st.reserve >> 20));
	xd_log(XD_LOG_WARN, "sandbox %s: not created: %s", s->id, m);
	e->extra = json_pack("{s:s,s:I,s:I,s:I,s:I}", "reason", "disk_full",
	    "needed_bytes", (json_int_t)s->lim.disk_bytes, "free_bytes",
	    (json_int_t)st.free, "committed_bytes",
	    (json_int_t)st.unallocated, "reserve_bytes",
	    (json_int_t)st.reserve);
	return xd_perr_set(e, 503, "backend_unavailable", "%s", m);
}

int
xd_box_slot(struct xd *xd)
{
	unsigned char used[1024];
	struct xd_box *x;
	unsigned long i;

	memset(used, 0, sizeof(used));
	TAILQ_FOREACH(x, &xd->boxes, link)
		if (x->rec.slot >= 0 && x->rec.slot < 1024)
			used[x->rec.slot] = 1;
	/* the pools' sandboxes hold theirs */
	TAILQ_FOREACH(x, &xd->pool, link)
		if (x->rec.slot >= 0 && x->rec.slot < 1024)
			used[x->rec.slot] = 1;
	for (i = 0; i < xd->cfg->slots && i < 1024; i++)
		if (!used[i])
			return (int)i;
	return -1;
}

int
xd_box_rec_init(struct xd *xd, struct xd_box *b, const char *key,
    const struct xd_lims *lim)
{
	const struct xd_cfg *c = xd->cfg;

	snprintf(b->rec.chat, sizeof(b->rec.chat), "%s", key);
	snprintf(b->rec.backend, sizeof(b->rec.backend), "%s", b->be->name);
	/* gVisor starts the shim as every sandbox's agent and init: its
	 * static copy, where there is one, loads no library through the
	 * gofer (the agent answered ~15 ms sooner after "runsc run") */
	snprintf(b->rec.shim, sizeof(b->rec.shim), "%s", b->rec.image[0] ||
	    (strcmp(b->be->name, "gvisor") == 0 &&
	    c->shim_static_ok) ? c->shim_static : c->shim);
	snprintf(b->rec.cgroup, sizeof(b->rec.cgroup), "%s", c->cgroups);
	if (snprintf(b->rec.dir, sizeof(b->rec.dir), "%s/%s", c->state_dir,
	    key) >= (int)sizeof(b->rec.dir))
		return -1;
	b->rec.uid_count = 65536;
	b->rec.uid_base = (uid_t)(c->uid_base + (unsigned long)b->rec.slot *
	    65536);
	b->rec.host_uid = b->rec.uid_base + SBX_UID;
	b->rec.host_gid = b->rec.uid_base + SBX_GID;
	b->rec.created = b->rec.last_used = (int64_t)time(NULL);
	b->rec.lim = lim->sbx;
	b->lim = *lim;
	snprintf(b->profile, sizeof(b->profile), "%s", b->rec.profile);
	return 0;
}

/*
 * The take of a pool's sandbox, in the worker: it was made as nobody's
 * (no tenant, no user, never a command run in it, no broker session
 * since it was made); now its broker session is made under its name
 * (the socket in the directory the sandbox has bound) for the tenant,
 * user and tier asked for, with its trust store and credentials, and
 * the record says whose it is: one call to sluiced.  Whatever fails
 * takes the whole sandbox down (as the pool sandbox it was: no archive
 * of the id asked for is touched).
 */
static json_t *
box_take_child(void *arg)
{
	struct xd_box *b = arg;
	struct xd *xd = b->xd;
	struct sbx_rec *r = &b->rec;
	struct xd_perr be;
	char sd[SBX_PATH_MAX];
	json_t *res;

	memset(&be, 0, sizeof(be));
	if (xd_broker_create(xd->cfg, r, sd, sizeof(sd), &be) != 0) {
		res = fail_json(be.status, be.code, be.msg);
		goto fail;
	}
	if (strcmp(sd, r->session_dir) != 0) {
		res = fail_json(503, "broker_unavailable", "sluiced put the "
		    "session's socket elsewhere than the pool sandbox has "
		    "bound");
		goto fail;
	}
	xd_broker_socket_own(r);
	if (xd_broker_sbx_env(xd->cfg, r, b->creds, b->ncreds, &be) != 0) {
		res = fail_json(be.status, be.code, be.msg);
		goto fail;
	}
	if (xd_rec_save(r) != 0) {
		res = fail_json(500, "internal", "cannot save the record");
		goto fail;
	}
	xd_box_side_save(b);
	return json_pack("{s:b,s:o}", "ok", 1, "record", sbx_rec_json(r));
fail:
	r->id[0] = r->tenant[0] = r->user[0] = '\0';
	b->del_archive = 0;
	json_decref(xd_box_delete_child(b));
	return res;
}

/* A pool's sandbox for s, bound to it by a worker; box_create_done
 * ends it as a create. */
static int
box_take(struct xd *xd, struct xd_box *b, const struct xd_create_spec *s,
    xd_box_cb cb, void *arg, struct xd_perr *e)
{
	struct box_op *op;
	char err[XD_ERR_MAX];

	if ((op = calloc(1, sizeof(*op))) == NULL) {
		b->pool_ix = -1;
		xd_pool_adopt(xd, b);   /* dropped */
		return xd_perr_set(e, 500, "internal", "out of memory");
	}
	snprintf(b->rec.id, sizeof(b->rec.id), "%s", s->id);
	snprintf(b->rec.tenant, sizeof(b->rec.tenant), "%s", s->tenant);
	snprintf(b->rec.user, sizeof(b->rec.user), "%s", s->user);
	snprintf(b->rec.tier, sizeof(b->rec.tier), "%s", s->tier);
	b->rec.created = b->rec.last_used = (int64_t)time(NULL);
	memcpy(b->creds, s->creds, sizeof(b->creds));
	b->ncreds = s->ncreds;
	b->pooled = 1;
	b->pool_wait = 0;
	b->pool_ix = -1;
	b->state = XD_BOX_CREATING;
	b->op = 1;
	op->box = b;
	op->cb = cb;
	op->arg = arg;
	b->refs++;              /* the worker's */
	if (xd_job_run(xd, "take", box_take_child, b, box_create_done, op,
	    err, sizeof(err)) != 0) {
		b->refs--;
		b->op = 0;
		b->state = XD_BOX_RUNNING;
		b->rec.id[0] = b->rec.tenant[0] = b->rec.user[0] = '\0';
		xd_pool_adopt(xd, b);   /* dropped */
		free(op);
		return xd_perr_set(e, 500, "internal", "%s", err);
	}
	TAILQ_INSERT_TAIL(&xd->boxes, b, link);
	xd->creating++;
	xd->pool_taken++;
	return 0;
}

int
xd_box_create(struct xd *xd, const struct xd_create_spec *s, xd_box_cb cb,
    void *arg, struct xd_perr *e)
{
	const struct xd_cfg *c = xd->cfg;
	struct xd_box *b, *x;
	struct box_op *op;
	long total, nt, nu;
	char err[XD_ERR_MAX];
	int restore;
	char key[SBX_ID_MAX + 1];

	xd_pool_quiet(xd);
	/* PUT /v1/node {"draining": true} (exec_node.c) */
	if (xd->node_draining) {
		e->extra = json_pack("{s:s}", "reason", "draining");
		return xd_perr_set(e, 503, "backend_unavailable", "this node is "
		    "draining (PUT /v1/node): make the sandbox on another "
		    "node");
	}
	/* ids are per tenant: only the caller's tenant's sandbox of the id
	 * is in the way (another's is not there for it) */
	if (xd_box_find(xd, s->tenant, s->id, NULL) != NULL)
		return xd_perr_set(e, 409, "exists", "a sandbox of that id exists");
	xd_key(s->tenant, s->id, key);
	TAILQ_FOREACH(x, &xd->boxes, link)
		if (strcmp(x->rec.chat, key) == 0) {
			/* a tenant-less id shaped as a tenant's key, or one of
			 * before ids were per tenant: the host's name is
			 * taken */
			xd_log(XD_LOG_WARN, "sandbox %s (tenant %s): its key %s "
			    "is sandbox %s's (tenant %s)", s->id, s->tenant, key,
			    XD_REC_ID(&x->rec), x->rec.tenant);
			return xd_perr_set(e, 409, "exists", "a sandbox of that id "
			    "exists");
		}
	if (xd->creating >= c->max_creates)
		return quota(e, "creates", c->max_creates, xd->creating);
	/* creates under way are few (workers, the disk): a tenant holds a
	 * share of them, so that one tenant's flood of creates does not
	 * answer every other tenant's 429 (those without a tenant share
	 * one share) */
	{
		long mine = 0, share = xd_cfg_creates_tenant(c);

		TAILQ_FOREACH(x, &xd->boxes, link)
			if (x->state == XD_BOX_CREATING &&
			    strcmp(x->rec.tenant, s->tenant) == 0)
				mine++;
		if (mine >= share) {
			quota(e, "tenant", share, mine);
			json_object_set_new(e->extra, "resource",
			    json_string("creates"));
			snprintf(e->msg, sizeof(e->msg), "creates under way of "
			    "this tenant: %ld of %ld (quotas.creates_per_tenant)",
			    mine, share);
			return -1;
		}
	}
	xd_box_counts(xd, s->tenant, s->user, &total, &nt, &nu);
	if (c->max_total && total >= c->max_total)
		return quota(e, "global", c->max_total, total);
	if (s->tenant[0] && c->max_per_tenant && nt >= c->max_per_tenant)
		return quota(e, "tenant", c->max_per_tenant, nt);
	if (s->user[0] && c->max_per_user && nu >= c->max_per_user)
		return quota(e, "user", c->max_per_user, nu);
	{
		/* an archive of this id is restored for its owner only */
		json_t *m;
		int bad;

		if (xd_box_arch_owner(c, key, s->tenant, s->user,
		    s->bound, &m, &bad, e) != 0)
			return -1;
		restore = m != NULL;
		json_decref(m);
	}
	if (box_admit(xd, s, e) != 0)
		return -1;
	/* a warm pool's sandbox when one waits for exactly this (never for
	 * a restore: the archive goes into an empty workspace before the
	 * sandbox starts); the root checked as a cold create checks it */
	if (!restore && c->npools > 0) {
		struct sbx_rec root;

		memset(&root, 0, sizeof(root));
		if (xd_box_pick_root(c, s, &root, e) != 0)
			return -1;
		if ((b = xd_pool_take(xd, s, root.image)) != NULL)
			return box_take(xd, b, s, cb, arg, e);
	}
	if ((b = xd_box_new(xd)) == NULL)
		return xd_perr_set(e, 500, "internal", "out of memory");
	b->restore = restore;
	memcpy(b->creds, s->creds, sizeof(b->creds));
	b->ncreds = s->ncreds;
	if ((b->be = sbx_backend_find(s->backend)) == NULL)
		snprintf(err, sizeof(err), "unknown backend");
	if (b->be == NULL || b->be->available(err, sizeof(err)) != 0) {
		free(b);
		e->extra = json_pack("{s:s}", "backend", s->backend);
		return xd_perr_set(e, 503, "backend_unavailable", "%s", err);
	}
	if (access(c->shim, X_OK) != 0) {
		free(b);
		snprintf(err, sizeof(err), "sluice-shim %.300s: %s (set \"shim\")",
		    c->shim, strerror(errno));
		return xd_perr_set(e, 503, "backend_unavailable", "%s", err);
	}
	if (xd_box_pick_root(c, s, &b->rec, e) != 0) {
		free(b);
		return -1;
	}
	if ((b->rec.slot = xd_box_slot(xd)) < 0) {
		free(b);
		return quota(e, "global", (long)c->slots, (long)c->slots);
	}
	snprintf(b->rec.id, sizeof(b->rec.id), "%s", s->id);
	snprintf(b->rec.tenant, sizeof(b->rec.tenant), "%s", s->tenant);
	snprintf(b->rec.user, sizeof(b->rec.user), "%s", s->user);
	snprintf(b->rec.tier, sizeof(b->rec.tier), "%s", s->tier);
	if (xd_box_rec_init(xd, b, key, &s->lim) != 0) {
		free(b);
		return xd_perr_set(e, 500, "internal", "state_dir too long");
	}
	b->state = XD_BOX_CREATING;
	b->op = 1;
	if ((op = calloc(1, sizeof(*op))) == NULL) {
		free(b);
		return xd_perr_set(e, 500, "internal", "out of memory");
	}
	op->box = b;
	op->cb = cb;
	op->arg = arg;
	b->refs++;              /* the worker's */
	if (xd_job_run(xd, "create", xd_box_create_child, b, box_create_done, op,
	    err, sizeof(err)) != 0) {
		free(op);
		free(b);
		return xd_perr_set(e, 500, "internal", "%s", err);
	}
	TAILQ_INSERT_TAIL(&xd->boxes, b, link);
	xd->creating++;
	return 0;
}

/* ---- delete ---- */

/* A delete that failed, as the worker saw it: what it did before (the
 * loop's box learns it in box_delete_done, the worker being a fork). */
static json_t *
del_fail(int status, const char *code, const char *msg, int resumed,
    int destroyed, const char *archive)
{
	return json_pack("{s:b,s:i,s:s,s:s,s:b,s:b,s:s?}", "ok", 0, "status",
	    status, "code", code, "message", msg, "resumed", resumed,
	    "destroyed", destroyed, "archive", archive);
}

/* In the worker. */
json_t *
xd_box_delete_child(void *arg)
{
	struct xd_box *b = arg;
	struct sbx_rec *r = &b->rec;
	struct xd_perr be;
	char err[XD_ERR_MAX];
	const char *left = NULL;
	/* a stopped box's sandbox was destroyed by an earlier delete */
	int resumed = 0, destroyed = b->stop_note[0] != '\0';

	json_t *meta = NULL, *res, *evicted = NULL, *live;
	const struct xd_cfg *c = b->xd->cfg;
	char ak[SBX_ID_MAX + 1];

	memset(&be, 0, sizeof(be));
	arch_key(r, ak);
	if (!destroyed) {
		/* a frozen sandbox is thawed so that its processes die */
		if (r->suspended && b->be->alive(r)) {
			if (b->be->resume(r, err, sizeof(err)) != 0)
				xd_log(XD_LOG_WARN, "sandbox %s: resume before "
				    "delete: %s", r->chat, err);
			else
				resumed = 1;
		}
		if (b->be->destroy(r, err, sizeof(err)) != 0)
			return del_fail(503, "backend_unavailable", err,
			    resumed, 0, NULL);
		destroyed = 1;
	}
	/* the sandbox is down and the API changes nothing in the workspace
	 * of a box that is not running (exec_api.c, box_for_change), so
	 * nothing moves in it: archive it (still mounted here) or drop any
	 * archive of the id */
	if (!b->del_archive) {
		if (xd_arch_drop(b->xd->cfg, ak, NULL, err, sizeof(err)) != 0)
			xd_log(XD_LOG_WARN, "sandbox %s: its archive stays in "
			    "the store: %s", r->chat, err);
	} else if (r->workspace[0] && xd_arch_write(b->xd->cfg, r,
	    b->lim.disk_bytes, b->del_reason, &meta, err, sizeof(err)) != 0) {
		char m[XD_ERR_MAX + 160];

		/* its policy goes with the sandbox; the workspace stays
		 * for the next try */
		if (xd_broker_delete(b->xd->cfg, r->chat, &be) != 0)
			xd_log(XD_LOG_WARN, "sandbox %s: broker session left: "
			    "%s", r->chat, be.msg);
		snprintf(m, sizeof(m), "archive failed: %s", err);
		res = del_fail(500, "internal", m, resumed, 1, "failed");
		json_object_set_new(res, "broker_deleted", json_boolean(
		    be.status == 0));
		return res;
	}
	/* the tenant's archives held to their quotas, the oldest evicted
	 * first (a cache of past chats); one that alone is over the bytes
	 * is not kept: the delete fails as an archive that cannot be
	 * written does (stopped; ?archive=discard removes it) */
	if (meta != NULL && c->arch_max_bytes > 0 && (uint64_t)
	    json_integer_value(json_object_get(meta, "bytes")) >
	    c->arch_max_bytes) {
		char m[XD_ERR_MAX];

		if (xd_arch_drop(c, ak, json_string_value(json_object_get(meta,
		    "sha256")), err, sizeof(err)) != 0)
			xd_log(XD_LOG_WARN, "sandbox %s: its archive stays in "
			    "the store: %s", r->chat, err);
		snprintf(m, sizeof(m), "archive failed: %lld bytes, more than "
		    "lifecycle.archive_max_bytes_per_tenant (%llu): not kept",
		    (long long)json_integer_value(json_object_get(meta,
		    "bytes")), (unsigned long long)c->arch_max_bytes);
		json_decref(meta);
		if (xd_broker_delete(c, r->chat, &be) != 0)
			xd_log(XD_LOG_WARN, "sandbox %s: broker session left: "
			    "%s", r->chat, be.msg);
		res = del_fail(500, "internal", m, resumed, 1, "failed");
		json_object_set_new(res, "broker_deleted", json_boolean(
		    be.status == 0));
		/* the same again next time: not tried again on its own */
		json_object_set_new(res, "archive_final", json_true());
		return res;
	}
	if (meta != NULL && (live = live_ids(b->xd)) != NULL) {
		evicted = xd_arch_sweep(c, r->tenant, ak, live,
		    (int64_t)time(NULL));
		json_decref(live);
	}
	/* the sandbox is gone; a broker session sluiced cannot be asked to
	 * drop now is named in the answer (and the log) */
	if (xd_broker_delete(b->xd->cfg, r->chat, &be) != 0) {
		xd_log(XD_LOG_WARN, "sandbox %s: broker session left: %s",
		    r->chat, be.msg);
		left = be.msg;
	}
	/* the sandbox is down: its mounts of the workspace went with it */
	if (xd_ws_remove(r) != 0)
		return del_fail(503, "backend_unavailable", "the workspace "
		    "cannot be unmounted (delete again)", resumed, 1, NULL);
	if (r->workspace_made)
		rm_tree(r->workspace);
	rm_tree(r->dir);
	/* an image a rebuild replaced goes with its last sandbox */
	{
		char store[SBX_PATH_MAX];

		if (r->image[0] && sbx_image_store_of(r, store,
		    sizeof(store)) == 0)
			(void)sbx_image_sweep(store);
	}
	xd_broker_sbx_env_drop(r);
	if (r->session_dir[0])
		(void)rmdir(r->session_dir);    /* sluiced leaves it, empty */
	return json_pack("{s:b,s:s?,s:o?,s:o?}", "ok", 1, "broker_left", left,
	    "archive", meta, "evicted", evicted);
}

static void
box_delete_done(void *arg, json_t *res)
{
	struct box_op *op = arg;
	struct xd_box *b = op->box;
	struct xd_perr e;
	struct xd_cmd *c;

	memset(&e, 0, sizeof(e));
	b->op = 0;
	if (json_is_true(json_object_get(res, "ok"))) {
		const char *left = json_string_value(json_object_get(res,
		    "broker_left"));

		xd_log(XD_LOG_INFO, "sandbox %s: deleted", b->rec.chat);
		if (left != NULL)
			snprintf(b->broker, sizeof(b->broker), "left");
		b->xd->stats.removed++;
		if (json_is_object(json_object_get(res, "archive"))) {
			b->archived = json_incref(json_object_get(res,
			    "archive"));
			b->xd->stats.archived++;
		}
		xd_event(b->xd, "sandbox", "removed", b->rec.tenant, json_pack(
		    "{s:s,s:s,s:s,s:s,s:s,s:O?}", "id", XD_REC_ID(&b->rec), "tenant",
		    b->rec.tenant, "user", b->rec.user, "broker", b->broker,
		    "reason", b->del_reason, "archive", b->del_archive ?
		    b->archived : NULL));
		op->cb(op->arg, b, NULL);
		arch_evicted_note(b->xd, json_object_get(res, "evicted"));
		/* finished background commands go with it; running ones
		 * end with their sandbox and are freed then */
		while ((c = TAILQ_FIRST(&b->cmds)) != NULL && !c->running)
			xd_cmd_free(c);
		box_remove(b);
	} else {
		perr_of(&e, res, "the delete worker died", "delete failed");
		if (json_is_string(json_object_get(res, "archive"))) {
			b->xd->stats.archive_failed++;
			b->arch_failed = !json_is_true(json_object_get(res,
			    "archive_final"));
		}
		/* what the worker did, which its fork did to its own copy */
		if (json_is_true(json_object_get(res, "resumed")))
			b->rec.suspended = 0;
		if (json_is_true(json_object_get(res, "destroyed")) ||
		    b->stop_note[0]) {
			/* the sandbox is gone: stopped, not running, until a
			 * delete gets through (?archive=discard without the
			 * archive) */
			b->state = XD_BOX_STOPPED;
			b->eff_tier[0] = '\0';
			b->ceiling[0] = '\0';
			snprintf(b->stop_note, sizeof(b->stop_note), "%s",
			    e.msg[0] ? e.msg : "delete failed");
			if (json_is_true(json_object_get(res, "broker_deleted")))
				snprintf(b->broker, sizeof(b->broker), "deleted");
			xd_log(XD_LOG_WARN, "sandbox %s: stopped: %s",
			    b->rec.chat, b->stop_note);
			snprintf(e.msg + strlen(e.msg), sizeof(e.msg) -
			    strlen(e.msg), "%s", "; the sandbox is stopped "
			    "(DELETE ?archive=discard removes it without an "
			    "archive)");
		} else
			b->state = XD_BOX_RUNNING;
		(void)!xd_rec_save(&b->rec);
		xd_box_side_save(b);
		op->cb(op->arg, NULL, &e);
	}
	xd_box_unref(b);
	json_decref(res);
	free(op);
}

int
xd_box_delete(struct xd_box *b, int archive, const char *reason,
    xd_box_cb cb, void *arg, struct xd_perr *e)
{
	struct box_op *op;
	struct xd_cmd *c;

	enum xd_box_state was = b->state;

	/* a stopped one (its sandbox destroyed) may be deleted again */
	if (b->op || (b->state != XD_BOX_RUNNING && b->state !=
	    XD_BOX_STOPPED))
		return xd_perr_set(e, 409, "conflict", "the sandbox is being created, "
		    "changed or deleted");
	if ((op = box_op_new(b, cb, arg, e)) == NULL)
		return -1;
	b->state = XD_BOX_DELETING;
	b->del_archive = archive;
	snprintf(b->del_reason, sizeof(b->del_reason), "%s", reason);
	/* destroy kills every process; their results say cancelled */
	if (b->fg != NULL)
		b->fg->cancelled = 1;
	TAILQ_FOREACH(c, &b->cmds, link)
		if (c->running)
			c->cancelled = 1;
	if (box_op_run(op, "delete", xd_box_delete_child, b, box_delete_done,
	    1, e) != 0) {
		b->state = was;
		return -1;
	}
	return 0;
}

/* ---- tier ---- */

static json_t *
box_tier_child(void *arg)
{
	struct box_op *op = arg;
	struct xd_perr be;

	memset(&be, 0, sizeof(be));
	if (xd_broker_tier(op->box->xd->cfg, op->box->rec.chat, op->tier,
	    &be) != 0)
		return fail_json(be.status, be.code, be.msg);
	return json_pack("{s:b}", "ok", 1);
}

static void
box_tier_done(void *arg, json_t *res)
{
	struct box_op *op = arg;
	struct xd_box *b = op->box;
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	b->op = 0;
	if (json_is_true(json_object_get(res, "ok"))) {
		snprintf(b->rec.tier, sizeof(b->rec.tier), "%s", op->tier);
		snprintf(b->broker, sizeof(b->broker), "ok");
		if (b->state == XD_BOX_RUNNING)
			(void)!xd_rec_save(&b->rec);
		op->cb(op->arg, b, NULL);
	} else {
		perr_of(&e, res, "the worker died", "tier change failed");
		op->cb(op->arg, NULL, &e);
	}
	xd_box_unref(b);
	json_decref(res);
	free(op);
}

int
xd_box_set_tier(struct xd_box *b, const char *tier, xd_box_cb cb, void *arg,
    struct xd_perr *e)
{
	struct box_op *op;

	if (b->op || b->state != XD_BOX_RUNNING)
		return xd_perr_set(e, 409, "conflict", "the sandbox is being created, "
		    "changed or deleted");
	if ((op = box_op_new(b, cb, arg, e)) == NULL)
		return -1;
	snprintf(op->tier, sizeof(op->tier), "%s", tier);
	return box_op_run(op, "tier", box_tier_child, op, box_tier_done, 1, e);
}

/* ---- the network as sluiced sees it ---- */

static json_t *
box_net_child(void *arg)
{
	struct box_op *op = arg;
	const struct xd_cfg *c = op->box->xd->cfg;
	const struct sbx_rec *r = &op->box->rec;
	struct xd_perr be;
	char eff[16], ceil[16], dir[SBX_PATH_MAX];
	int repaired = 0;

	memset(&be, 0, sizeof(be));
	if (xd_broker_get(c, r->chat, eff, sizeof(eff), ceil, sizeof(ceil),
	    &be) != 0) {
		if (be.status != 404)
			return fail_json(be.status, be.code, be.msg);
		/* sluiced restarted or the session was deleted: make it
		 * again with the sandbox's tier.  sluiced puts its socket
		 * where it was (the directory the sandbox has mounted), or
		 * the sandbox could not reach it: then it is taken back. */
		memset(&be, 0, sizeof(be));
		if (xd_broker_create(c, r, dir, sizeof(dir), &be) != 0)
			return json_pack("{s:b,s:i,s:s,s:s,s:b}", "ok", 0,
			    "status", 404, "code", "not_found", "message",
			    be.msg, "repair_failed", 1);
		if (strcmp(dir, r->session_dir) != 0) {
			(void)!xd_broker_delete(c, r->chat, &be);
			return json_pack("{s:b,s:i,s:s,s:s,s:b}", "ok", 0,
			    "status", 404, "code", "not_found", "message",
			    "sluiced made the session elsewhere", "repair_failed",
			    1);
		}
		xd_broker_socket_own(r);
		repaired = 1;
		if (xd_broker_get(c, r->chat, eff, sizeof(eff), ceil,
		    sizeof(ceil), &be) != 0)
			return fail_json(be.status, be.code, be.msg);
	}
	return json_pack("{s:b,s:s,s:s,s:b}", "ok", 1, "effective_tier", eff,
	    "ceiling", ceil, "repaired", repaired);
}

static void
box_net_done(void *arg, json_t *res)
{
	struct box_op *op = arg;
	struct xd_box *b = op->box;
	const char *eff = json_string_value(json_object_get(res,
	    "effective_tier"));
	json_int_t st = json_integer_value(json_object_get(res, "status"));
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if (json_is_true(json_object_get(res, "ok")) && eff != NULL) {
		const char *ceil = json_string_value(json_object_get(res,
		    "ceiling"));

		snprintf(b->eff_tier, sizeof(b->eff_tier), "%s", eff);
		snprintf(b->ceiling, sizeof(b->ceiling), "%s", ceil != NULL ?
		    ceil : "");
		if (json_is_true(json_object_get(res, "repaired"))) {
			xd_log(XD_LOG_WARN, "sandbox %s: sluiced had no session "
			    "for it: made again (tier %s)", b->rec.chat,
			    b->rec.tier);
			snprintf(b->broker, sizeof(b->broker), "repaired");
		} else
			snprintf(b->broker, sizeof(b->broker), "ok");
		op->cb(op->arg, b, NULL);
	} else if (st == 404) {
		/* the session is gone and could not be made again: the
		 * sandbox has no network */
		snprintf(b->eff_tier, sizeof(b->eff_tier), "off");
		b->ceiling[0] = '\0';
		snprintf(b->broker, sizeof(b->broker), "missing");
		op->cb(op->arg, b, NULL);
	} else {
		perr_of(&e, res, "the worker died", "the broker session");
		if (e.status == 503) {
			snprintf(b->broker, sizeof(b->broker), "unreachable");
			b->eff_tier[0] = '\0';
		}
		op->cb(op->arg, NULL, &e);
	}
	xd_box_unref(b);
	json_decref(res);
	free(op);
}

int
xd_box_network(struct xd_box *b, xd_box_cb cb, void *arg, struct xd_perr *e)
{
	struct box_op *op;

	if (b->state != XD_BOX_RUNNING)
		return xd_perr_set(e, 409, "conflict", "the sandbox is being created "
		    "or deleted");
	if ((op = box_op_new(b, cb, arg, e)) == NULL)
		return -1;
	return box_op_run(op, "network", box_net_child, op, box_net_done, 0,
	    e);
}

/* ---- what GET shows ---- */

static json_t *
time_s(int64_t t)
{
	char buf[32];
	time_t tt = (time_t)t;
	struct tm g;

	if (t <= 0 || gmtime_r(&tt, &g) == NULL)
		return json_null();
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &g);
	return json_string(buf);
}

static const char *
state_name(const struct xd_box *b)
{
	switch (b->state) {
	case XD_BOX_CREATING: return "creating";
	case XD_BOX_DELETING: return "deleting";
	case XD_BOX_STOPPED: return "stopped";
	case XD_BOX_GONE: return "deleted";
	default: break;
	}
	if (!b->be->alive(&b->rec))
		return "dead";
	return b->rec.suspended ? "suspended" : "running";
}

json_t *
xd_box_json(const struct xd_box *b)
{
	const struct sbx_limits *l = &b->rec.lim;
	struct xd_cmd *c;
	long bg = 0;

	TAILQ_FOREACH(c, &b->cmds, link)
		if (c->running)
			bg++;
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:o,"
	    "s:{s:s,s:s,s:s,s:o},"
	    "s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I},"
	    "s:{s:b,s:I},s:o,s:o,s:s,s:O?,s:o,s:o}",
	    "id", XD_REC_ID(&b->rec), "tenant", b->rec.tenant, "user", b->rec.user,
	    "state", state_name(b), "backend", b->rec.backend,
	    "profile", b->profile, "image", b->rec.image[0] ?
	    json_string(b->rec.image) : json_null(),
	    "network", "tier", b->rec.tier, "broker", b->broker,
	    /* sluiced's session of it (ids are per tenant, session ids
	     * unique on the host: its key) */
	    "session", b->rec.chat,
	    "effective_tier", b->eff_tier[0] ? json_string(b->eff_tier) :
	    json_null(),
	    "limits", "memory_mb", (json_int_t)(l->memory_bytes >> 20),
	    "pids", (json_int_t)l->pids, "cpu_pct", (json_int_t)l->cpu_pct,
	    "tmp_mb", (json_int_t)(l->tmp_bytes >> 20),
	    "home_mb", (json_int_t)(l->home_bytes >> 20),
	    "fsize_mb", (json_int_t)(l->fsize_bytes >> 20),
	    "nofile", (json_int_t)l->nofile, "nproc", (json_int_t)l->nproc,
	    "timeout_s", (json_int_t)b->lim.timeout_s,
	    "output_cap", (json_int_t)b->lim.output_cap,
	    "disk_mb", (json_int_t)(b->lim.disk_bytes >> 20),
	    "inodes", (json_int_t)b->lim.inodes,
	    "usage", "foreground", b->fg != NULL, "background_running",
	    (json_int_t)bg,
	    "created", time_s(b->rec.created),
	    "last_used", time_s(b->rec.last_used),
	    "note", b->rec.note, "restored_from", b->restored,
	    "reason", b->state == XD_BOX_STOPPED ? json_string(b->stop_note) :
	    json_null(), "pooled", json_boolean(b->pooled));
}

void
xd_box_free_all(struct xd *xd)
{
	struct xd_box *b;
	struct xd_cmd *c;

	while ((b = TAILQ_FIRST(&xd->boxes)) != NULL) {
		b->refs++;
		/* the newest use the lag kept from the disk (xd_box_used):
		 * the next daemon's idle clock starts from it */
		if (b->state == XD_BOX_RUNNING && b->used_saved !=
		    b->rec.last_used)
			(void)!xd_rec_save(&b->rec);
		if (b->fg != NULL)
			xd_cmd_forget(b->fg);
		while ((c = TAILQ_FIRST(&b->cmds)) != NULL)
			xd_cmd_forget(c);
		box_remove(b);
		xd_box_unref(b);
	}
}

/* ---- lifecycle: suspend, resume, remove by age ---- */

/*
 * A sandbox is unused when no app has called on it (xd_box_use: every
 * app route on /v1/sandboxes/{id}) and no command of it ran for a
 * while: last_used is the later of the last call and the last command's
 * end, and a sandbox with a command running is never idle.  GET of the
 * sandbox and of its commands (what an auditor may do) only look: they
 * neither resume it nor count as use.
 *
 * ns freezes the sandbox's cgroup (cgroup.freeze, v2; the v1 freezer):
 * one write, done here on the loop, and its processes take no CPU until
 * thawed; gVisor's sandbox is paused with `runsc pause`, the runtime's
 * own way (its host cgroup is not always there: --ignore-cgroups), which
 * runs runsc and so blocks the loop for that run (here: pause 50 ms,
 * resume 31 ms; ns: freeze 7 ms on the v1 freezer, which is waited for,
 * thaw under 1 ms).
 *
 * last_used is in the record: saved, for calls and for commands that
 * end, at most every XD_USED_SAVE_S seconds (or idle_after / 10 when
 * shorter; xd_box_used in exec_rec.c), so a restarted daemon suspends
 * a sandbox at most that much early, and a command that ends does not
 * rewrite the record each time (issue 26 point 4).
 */
/* the longest wait between two failed removals by age of a box */
#define LC_RETRY_MAX_S	(6 * 3600)

static void
lc_audit(struct xd_box *b, const char *action, const char *who,
    const char *role, int status, const char *code, json_t *detail)
{
	xd_audit_box(b->xd, action, who, role, XD_REC_ID(&b->rec), b->rec.tenant,
	    b->rec.user, status, code, detail);
}

int
xd_box_use(struct xd_box *b, const char *who, const char *role,
    struct xd_perr *e)
{
	int64_t now = (int64_t)time(NULL);
	char err[XD_ERR_MAX];

	if (b->state != XD_BOX_RUNNING)
		return 0;
	b->rec.last_used = now;
	b->lc_backoff = 0;      /* in use: a removal by age starts afresh */
	if (b->rec.suspended && b->be->alive(&b->rec)) {
		int64_t t0 = sbx_now_ms();

		if (b->be->resume(&b->rec, err, sizeof(err)) != 0) {
			xd_log(XD_LOG_WARN, "sandbox %s: cannot resume: %s",
			    b->rec.chat, err);
			lc_audit(b, "resume", who, role, 503,
			    "backend_unavailable", json_pack("{s:s}", "message",
			    err));
			return xd_perr_set(e, 503, "backend_unavailable", "%s", err);
		}
		xd_log(XD_LOG_INFO, "sandbox %s: resumed (%lld ms)", b->rec.chat,
		    (long long)(sbx_now_ms() - t0));
		b->xd->stats.resumed++;
		xd_event(b->xd, "sandbox", "resumed", b->rec.tenant,
		    json_pack("{s:s,s:s,s:s}", "id", XD_REC_ID(&b->rec),
		    "tenant", b->rec.tenant, "user",
		    b->rec.user));
		lc_audit(b, "resume", who, role, 200, NULL, NULL);
		b->used_saved = 0;      /* the state changed: save now */
	} else if (b->rec.suspended)
		b->rec.suspended = 0;   /* its sandbox died: nothing to thaw */
	xd_box_used(b, now);
	return 0;
}

/* Busy: not to be frozen or removed now.  A kill_tree or release
 * worker after a command's end counts: frozen under it (the v1 freezer)
 * its SIGKILL would wait for a thaw.  A stopped box (its sandbox gone)
 * is never frozen but its removal is tried again. */
static int
lc_busy(const struct xd_box *b)
{
	const struct xd_cmd *c;

	if ((b->state != XD_BOX_RUNNING && b->state != XD_BOX_STOPPED) ||
	    b->op || b->fg != NULL || b->proc_jobs > 0)
		return 1;
	TAILQ_FOREACH(c, &b->cmds, link)
		if (c->running)
			return 1;
	return 0;
}

static void
lc_removed(void *arg, struct xd_box *b, struct xd_perr *e)
{
	struct xd *xd = arg;

	(void)xd;
	if (b == NULL) {
		/* the box is still listed (its delete failed): try again
		 * later, not on every tick */
		xd_log(XD_LOG_WARN, "removal by age failed: %s", e->msg);
		xd_perr_clear(e);
		return;
	}
	xd->stats.removed_idle++;
	lc_audit(b, "remove", "sluice-execd", "daemon", 200, NULL, json_pack(
	    "{s:s,s:O?}", "reason", "idle", "archive", b->archived));
}

/* A delete whose archive failed, tried again by the sweep. */
static void
arch_retried(void *arg, struct xd_box *b, struct xd_perr *e)
{
	(void)arg;
	if (b == NULL) {
		xd_log(XD_LOG_WARN, "archive tried again, failed: %s", e->msg);
		xd_perr_clear(e);
		return;
	}
	xd_log(XD_LOG_INFO, "sandbox %s: archived at last and removed",
	    b->rec.chat);
	lc_audit(b, "remove", "sluice-execd", "daemon", 200, NULL, json_pack(
	    "{s:s,s:O?}", "reason", b->del_reason, "archive", b->archived));
}

static void
lc_suspend(struct xd_box *b, int64_t idle)
{
	char err[XD_ERR_MAX];
	int64_t t0 = sbx_now_ms();

	if (b->be->suspend(&b->rec, err, sizeof(err)) != 0) {
		xd_log(XD_LOG_WARN, "sandbox %s: cannot suspend: %s",
		    b->rec.chat, err);
		lc_audit(b, "suspend", "sluice-execd", "daemon", 503,
		    "backend_unavailable", json_pack("{s:s}", "message", err));
		/* tried again after another idle_after */
		b->rec.last_used = (int64_t)time(NULL);
		return;
	}
	(void)!xd_rec_save(&b->rec);
	b->used_saved = b->rec.last_used;
	xd_log(XD_LOG_INFO, "sandbox %s: suspended (unused %lld s, %lld ms)",
	    b->rec.chat, (long long)idle, (long long)(sbx_now_ms() - t0));
	b->xd->stats.suspended++;
	xd_event(b->xd, "sandbox", "suspended", b->rec.tenant,
	    json_pack("{s:s,s:s,s:s,s:I}", "id", XD_REC_ID(&b->rec),
	    "tenant", b->rec.tenant, "user", b->rec.user,
	    "idle_s", (json_int_t)idle));
	lc_audit(b, "suspend", "sluice-execd", "daemon", 200, NULL,
	    json_pack("{s:s,s:I}", "reason", "idle", "idle_s",
	    (json_int_t)idle));
}

/* The sweep's period: a quarter of the shorter age, 1 to 60 s, so that
 * a sandbox is suspended or removed at most that late; 0 when both ages
 * are 0 (no sweep). */
static long
lc_period(const struct xd_cfg *c)
{
	long p = 0;

	/* the archives' sweep (quotas after a reload, orphans) runs every
	 * minute at least */
	if (c->idle_after <= 0 && c->remove_after <= 0 && c->arch_max_age <= 0)
		return 60;

	if (c->idle_after > 0)
		p = c->idle_after;
	if (c->remove_after > 0 && (p == 0 || c->remove_after < p))
		p = c->remove_after;
	if (c->arch_max_age > 0 && (p == 0 || c->arch_max_age < p))
		p = c->arch_max_age;
	p /= 4;
	return p < 1 ? 1 : p > 60 ? 60 : p;
}

/* In the worker: the archives held to their limits. */
static json_t *
arch_sweep_child(void *arg)
{
	struct xd *xd = arg;
	json_t *live = live_ids(xd), *ev;

	if (live == NULL)
		return NULL;
	json_t *kept = NULL;

	ev = xd_arch_sweep_kept(xd->cfg, NULL, NULL, live, (int64_t)time(NULL),
	    &kept);
	json_decref(live);
	return json_pack("{s:o?,s:o?}", "evicted", ev, "store", kept);
}

static void
arch_sweep_done(void *arg, json_t *res)
{
	struct xd *xd = arg;

	xd->arch_sweeping = 0;
	arch_evicted_note(xd, json_object_get(res, "evicted"));
	/* the store's archives for health and metrics, as listed */
	if (json_is_array(json_object_get(res, "store"))) {
		json_decref(xd->arch_store);
		xd->arch_store = json_incref(json_object_get(res, "store"));
	}
	json_decref(res);
}

/* ---- the sandboxes' trust bundles (xd_broker_trust) ---- */

static int trust_refreshing;

/* In the worker: the boxes as they were at the fork. */
static json_t *
trust_child(void *arg)
{
	struct xd *xd = arg;
	struct xd_perr be;
	const char **dirs;
	struct xd_box *b;
	size_t n = 0;
	int rc;

	TAILQ_FOREACH(b, &xd->boxes, link)
		n++;
	if ((dirs = calloc(n + 1, sizeof(*dirs))) == NULL)
		return NULL;
	n = 0;
	/* not one a worker is making or taking down */
	TAILQ_FOREACH(b, &xd->boxes, link)
		if (b->state == XD_BOX_RUNNING && !b->op &&
		    b->rec.session_dir[0] != '\0')
			dirs[n++] = b->rec.session_dir;
	memset(&be, 0, sizeof(be));
	rc = xd_broker_trust(xd->cfg, dirs, n, &be);
	free(dirs);
	return rc == 0 ? json_pack("{s:b,s:I}", "ok", 1, "sandboxes",
	    (json_int_t)n) : json_pack("{s:b,s:s}", "ok", 0, "message",
	    be.msg);
}

static void
trust_done(void *arg, json_t *res)
{
	(void)arg;
	trust_refreshing = 0;
	if (res == NULL || !json_is_true(json_object_get(res, "ok")))
		xd_log(XD_LOG_WARN, "the sandboxes' trust bundles: %s",
		    res != NULL ? json_string_value(json_object_get(res,
		    "message")) : "the worker died");
	else
		xd_log(XD_LOG_DEBUG, "the trust bundles of %lld sandbox(es) "
		    "made again", (long long)json_integer_value(
		    json_object_get(res, "sandboxes")));
	json_decref(res);
}

void
xd_box_trust_refresh(struct xd *xd)
{
	char err[XD_ERR_MAX];

	if (trust_refreshing || xd->draining)
		return;
	if (xd_job_run(xd, "trust", trust_child, xd, trust_done, xd, err,
	    sizeof(err)) != 0) {
		xd_log(XD_LOG_WARN, "the sandboxes' trust bundles: %s", err);
		return;
	}
	trust_refreshing = 1;
}

/* One archive sweep at a time, in a worker (it reads every metadata
 * file and removes files). */
static void
arch_sweep_start(struct xd *xd)
{
	char err[XD_ERR_MAX];

	if (xd->arch_sweeping || xd->draining)
		return;
	if (xd_job_run(xd, "archives", arch_sweep_child, xd, arch_sweep_done,
	    xd, err, sizeof(err)) != 0) {
		xd_log(XD_LOG_WARN, "the archives' sweep: %s", err);
		return;
	}
	xd->arch_sweeping = 1;
}

/* After a failed removal the next try waits backoff s (at most
 * LC_RETRY_MAX_S). */
static void
lc_wait(struct xd_box *b, int64_t now, long backoff)
{
	b->lc_backoff = backoff > LC_RETRY_MAX_S ? LC_RETRY_MAX_S : backoff;
	b->lc_retry = now + b->lc_backoff;
}

/* The sweep's delete of b (archived first), done(b's daemon) at its
 * end; one that cannot start is logged as what it could not do. */
static void
lc_delete(struct xd_box *b, const char *reason, xd_box_cb done,
    const char *what)
{
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if (xd_box_delete(b, 1, reason, done, b->xd, &e) != 0) {
		xd_log(XD_LOG_WARN, "sandbox %s: cannot %s: %s", b->rec.chat,
		    what, e.msg);
		xd_perr_clear(&e);
	}
}

static void
lc_sweep(evutil_socket_t fd, short what, void *arg)
{
	struct xd *xd = arg;
	const struct xd_cfg *c = xd->cfg;
	int64_t now = (int64_t)time(NULL), idle;
	struct timeval tv = { 0, 0 };
	struct xd_box *b;

	(void)fd;
	(void)what;
	TAILQ_FOREACH(b, &xd->boxes, link) {
		if (xd->draining || lc_busy(b))
			continue;
		idle = now - b->rec.last_used;
		/* stopped by an archive that failed (the store unreachable or
		 * refusing, a full disk): the delete it was is tried again on
		 * its own, after a sweep's period and then twice as long each
		 * time (at most LC_RETRY_MAX_S), whatever remove_after says;
		 * the workspace waits for it */
		if (b->state == XD_BOX_STOPPED && b->arch_failed) {
			if (b->lc_backoff <= 0) {
				b->lc_backoff = lc_period(c);
				b->lc_retry = now + b->lc_backoff;
				continue;
			}
			if (now < b->lc_retry)
				continue;
			lc_wait(b, now, b->lc_backoff * 2);
			xd_log(XD_LOG_INFO, "sandbox %s: its archive failed: "
			    "trying again (next in %ld s should it fail)",
			    b->rec.chat, b->lc_backoff);
			lc_delete(b, b->del_reason[0] ? b->del_reason :
			    "delete", arch_retried, "archive");
			continue;
		}
		if (c->remove_after > 0 && idle >= c->remove_after &&
		    now >= b->lc_retry) {
			/* should this one fail, the next try waits, twice as
			 * long after each failure (the box is used: afresh) */
			lc_wait(b, now, b->lc_backoff <= 0 ? (c->remove_after <
			    600 ? c->remove_after : 600) : b->lc_backoff * 2);
			xd_log(XD_LOG_INFO, "sandbox %s: unused %lld s: removing "
			    "(archived first)", b->rec.chat, (long long)idle);
			lc_delete(b, "idle", lc_removed, "remove");
			continue;
		}
		if (c->idle_after > 0 && idle >= c->idle_after &&
		    b->state == XD_BOX_RUNNING && !b->rec.suspended &&
		    b->be->alive(&b->rec))
			lc_suspend(b, idle);
	}
	arch_sweep_start(xd);
	tv.tv_sec = lc_period(c);
	if (xd->ev_sweep != NULL && tv.tv_sec > 0)
		(void)event_add(xd->ev_sweep, &tv);
}

int
xd_box_sweep_start(struct xd *xd)
{
	struct timeval tv = { lc_period(xd->cfg), 0 };

	/* again after a reload: the timer is set to the new period, or
	 * taken off when both ages are 0 */
	if (xd->ev_sweep == NULL &&
	    (xd->ev_sweep = evtimer_new(xd->base, lc_sweep, xd)) == NULL)
		return -1;
	/* the archives now: at the start what a crash left, after a reload
	 * the new limits */
	arch_sweep_start(xd);
	if (tv.tv_sec == 0)
		return event_del(xd->ev_sweep) != 0 ? -1 : 0;
	return event_add(xd->ev_sweep, &tv) != 0 ? -1 : 0;
}

void
xd_box_sweep_stop(struct xd *xd)
{
	if (xd->ev_sweep != NULL) {
		event_free(xd->ev_sweep);
		xd->ev_sweep = NULL;
	}
}
