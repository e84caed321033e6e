/*
 * sbx_gvisor.c: the gVisor backend (runsc, --network=none).  Not built
 * yet: every call says so, and available() lets sluice-run refuse early.
 */
#include "sluice-config.h"

#include "sandbox-glue/sbx.h"

#define NOT_YET "runsc backend not built yet"

static int
gv_available(char *err, size_t errlen)
{
	return sbx_err(err, errlen, NOT_YET);
}

static int
gv_create(struct sbx_rec *rec, char *err, size_t errlen)
{
	(void)rec;
	return sbx_err(err, errlen, NOT_YET);
}

static int
gv_spawn(struct sbx_rec *rec, const struct sbx_cmd *cmd,
    struct sbx_proc *out, char *err, size_t errlen)
{
	(void)rec; (void)cmd; (void)out;
	return sbx_err(err, errlen, NOT_YET);
}

static int
gv_kill_tree(struct sbx_rec *rec, const struct sbx_proc *p, char *err,
    size_t errlen)
{
	(void)rec; (void)p;
	return sbx_err(err, errlen, NOT_YET);
}

static void
gv_release(struct sbx_rec *rec, const struct sbx_proc *p)
{
	(void)rec; (void)p;
}

static int
gv_suspend(struct sbx_rec *rec, char *err, size_t errlen)
{
	(void)rec;
	return sbx_err(err, errlen, NOT_YET);
}

static int
gv_resume(struct sbx_rec *rec, char *err, size_t errlen)
{
	(void)rec;
	return sbx_err(err, errlen, NOT_YET);
}

static int
gv_alive(const struct sbx_rec *rec)
{
	(void)rec;
	return 0;
}

static int
gv_destroy(struct sbx_rec *rec, char *err, size_t errlen)
{
	(void)rec; (void)err; (void)errlen;
	return 0;       /* nothing was ever made */
}

const struct sbx_backend sbx_gvisor_backend = {
	.name = "gvisor",
	.available = gv_available,
	.create = gv_create,
	.spawn = gv_spawn,
	.kill_tree = gv_kill_tree,
	.release = gv_release,
	.suspend = gv_suspend,
	.resume = gv_resume,
	.alive = gv_alive,
	.destroy = gv_destroy,
};
