/*
 * test_exec_box.c: sluice-execd's sandboxes (sandbox-glue/executor/
 * execd/exec_box.c) on the fake backend and a fake sluiced (fake_sbx.h):
 * a create that works, one that fails at the backend (the broker
 * session and the directory taken back, the box gone) or at sluiced
 * (no sandbox made), the quotas (global, per tenant, per user, and
 * the uid slots), a delete, one whose archive cannot be written (the
 * box STOPPED, its workspace kept, then a delete without the archive),
 * and the lifecycle sweep (suspend when idle, resume on use, removal by
 * age).  No root: the workspace is a plain directory of the test's
 * user.
 */
#include "sluice-config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <jansson.h>

#include "tests/unit/sandbox-glue/executor/execd/fake_sbx.h"

struct done {
	int called;
	struct xd_box *box;
	int status;
	char code[64];
	char msg[XD_ERR_MAX];
};


/* The host-side name (key) of tenant t1's sandbox id: ids are per
 * tenant, so state dirs, sessions and archives are named by it. */
static const char *
key1(const char *id)
{
	static char k[4][SBX_ID_MAX + 1];
	static int n;
	char *o = k[n++ % 4];

	xd_key("t1", id, o);
	return o;
}

static void
on_done(void *arg, struct xd_box *b, struct xd_perr *e)
{
	struct done *d = arg;

	d->called = 1;
	d->box = b;
	d->status = e != NULL ? e->status : 0;
	snprintf(d->code, sizeof(d->code), "%s", e != NULL && e->code ?
	    e->code : "");
	snprintf(d->msg, sizeof(d->msg), "%s", e != NULL ? e->msg : "");
}

static int
setup(void **state)
{
	struct fake_env *f = calloc(1, sizeof(*f));

	if (f == NULL || fake_env_setup(f) != 0) {
		fprintf(stderr, "fake environment: setup failed\n");
		return -1;
	}
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fake_env *f = *state;

	fake_env_teardown(f);
	free(f);
	return 0;
}

static void
spec_init(struct xd_create_spec *s, const char *id, const char *tenant,
    const char *user, const struct xd_cfg *c)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->tenant, sizeof(s->tenant), "%s", tenant);
	snprintf(s->user, sizeof(s->user), "%s", user);
	snprintf(s->tier, sizeof(s->tier), "off");
	snprintf(s->backend, sizeof(s->backend), "fake");
	s->lim = c->def;
}

static int
exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

/* A create through the worker; the box (running) or NULL. */
static struct xd_box *
create(struct fake_env *f, const char *id, const char *tenant,
    const char *user, struct done *d)
{
	struct xd_create_spec s;
	struct xd_perr e;

	memset(d, 0, sizeof(*d));
	memset(&e, 0, sizeof(e));
	spec_init(&s, id, tenant, user, &f->cfg);
	assert_int_equal(xd_box_create(&f->xd, &s, on_done, d, &e), 0);
	assert_int_equal(f->xd.creating, 1);
	assert_int_equal(xd_box_find(&f->xd, NULL, id, NULL)->state, XD_BOX_CREATING);
	assert_int_equal(fake_run_until(f, &d->called, 10000), 0);
	assert_int_equal(fake_run_jobs(f, 5000), 0);
	assert_int_equal(f->xd.creating, 0);
	return d->box;
}

static void
need_own_uid(void)
{
	unsigned long base;

	if (!fake_uid_base(&base))
		skip();         /* no uid base maps slot 0 to this user */
}

static void
t_create(void **state)
{
	struct fake_env *f = *state;
	struct done d;
	struct xd_box *b;
	char p[SBX_PATH_MAX + 32];

	need_own_uid();
	b = create(f, "c1", "t1", "u1", &d);
	assert_non_null(b);
	assert_int_equal(d.status, 0);
	assert_int_equal(b->state, XD_BOX_RUNNING);
	assert_int_equal(b->rec.slot, 0);
	assert_int_equal(fake->available, 1);
	assert_int_equal(fake->create, 1);
	assert_int_equal(fake->commit, 1);
	assert_int_equal(fake->sessions_made, 1);
	assert_int_equal(fake->sessions_deleted, 0);
	assert_string_equal(fake->last_session, key1("c1"));
	/* the worker's record came back: the backend's note and the
	 * session directory sluiced named */
	assert_string_equal(b->rec.note, "fake");
	snprintf(p, sizeof(p), "%s/sessions/%s", f->dir, key1("c1"));
	assert_string_equal(b->rec.session_dir, p);
	snprintf(p, sizeof(p), "%s/%s/record.json", f->cfg.state_dir,
	    key1("c1"));
	assert_true(exists(p));
	assert_true(exists(b->rec.workspace));
	assert_int_equal(f->xd.stats.created, 1);
	/* the same id again: 409 at once */
	{
		struct xd_create_spec s;
		struct xd_perr e;

		memset(&e, 0, sizeof(e));
		spec_init(&s, "c1", "t1", "u1", &f->cfg);
		assert_int_equal(xd_box_create(&f->xd, &s, on_done, &d, &e),
		    -1);
		assert_int_equal(e.status, 409);
		assert_string_equal(e.code, "exists");
		xd_perr_clear(&e);
	}
}

/* The backend's create fails after the broker session was made: the
 * session is deleted, the directory removed, the box gone. */
static void
t_create_rollback(void **state)
{
	struct fake_env *f = *state;
	struct done d;
	char p[SBX_PATH_MAX + 32];

	need_own_uid();
	fake->fail_create = 1;
	assert_null(create(f, "rb", "t1", "u1", &d));
	assert_int_equal(d.status, 503);
	assert_string_equal(d.code, "backend_unavailable");
	assert_non_null(strstr(d.msg, "fake: create failed"));
	assert_int_equal(fake->create, 1);
	assert_int_equal(fake->commit, 0);
	assert_int_equal(fake->sessions_made, 1);
	assert_int_equal(fake->sessions_deleted, 1);
	snprintf(p, sizeof(p), "%s/%s", f->cfg.state_dir, key1("rb"));
	assert_false(exists(p));
	assert_null(xd_box_find(&f->xd, NULL, "rb", NULL));
	assert_int_equal(f->xd.stats.create_failed, 1);
	/* and the id is free again */
	fake->fail_create = 0;
	assert_non_null(create(f, "rb", "t1", "u1", &d));
}

/* sluiced refuses the session: no sandbox is made. */
static void
t_create_broker_refused(void **state)
{
	struct fake_env *f = *state;
	struct done d;
	char p[SBX_PATH_MAX + 32];

	need_own_uid();
	fake->broker_status = 403;
	assert_null(create(f, "br", "t1", "u1", &d));
	assert_int_equal(d.status, 403);
	assert_string_equal(d.code, "network_not_permitted");
	assert_int_equal(fake->create, 0);
	assert_int_equal(fake->sessions_deleted, 0);
	snprintf(p, sizeof(p), "%s/%s", f->cfg.state_dir, key1("br"));
	assert_false(exists(p));
	assert_null(xd_box_find(&f->xd, NULL, "br", NULL));
}

/* The backend is not available: refused at once, nothing started. */
static void
t_create_unavailable(void **state)
{
	struct fake_env *f = *state;
	struct xd_create_spec s;
	struct xd_perr e;
	struct done d;

	memset(&e, 0, sizeof(e));
	fake->fail_available = 1;
	spec_init(&s, "un", "t1", "u1", &f->cfg);
	assert_int_equal(xd_box_create(&f->xd, &s, on_done, &d, &e), -1);
	assert_int_equal(e.status, 503);
	assert_true(TAILQ_EMPTY(&f->xd.jobs));
	assert_null(xd_box_find(&f->xd, NULL, "un", NULL));
	xd_perr_clear(&e);
	/* an unknown backend likewise */
	fake->fail_available = 0;
	snprintf(s.backend, sizeof(s.backend), "ns");
	assert_int_equal(xd_box_create(&f->xd, &s, on_done, &d, &e), -1);
	assert_int_equal(e.status, 503);
	xd_perr_clear(&e);
}

static void
expect_quota(struct fake_env *f, const char *id, const char *tenant,
    const char *user, const char *scope, long limit, long in_use)
{
	struct xd_create_spec s;
	struct xd_perr e;
	struct done d;

	memset(&e, 0, sizeof(e));
	spec_init(&s, id, tenant, user, &f->cfg);
	assert_int_equal(xd_box_create(&f->xd, &s, on_done, &d, &e), -1);
	assert_int_equal(e.status, 429);
	assert_string_equal(e.code, "quota_exceeded");
	assert_string_equal(json_string_value(json_object_get(e.extra,
	    "scope")), scope);
	assert_int_equal(json_integer_value(json_object_get(e.extra,
	    "limit")), limit);
	assert_int_equal(json_integer_value(json_object_get(e.extra,
	    "in_use")), in_use);
	assert_null(xd_box_find(&f->xd, NULL, id, NULL));
	xd_perr_clear(&e);
}

/* Admitted: the create started (its outcome is not this test's). */
static void
expect_admitted(struct fake_env *f, const char *id, const char *tenant,
    const char *user)
{
	struct xd_create_spec s;
	struct xd_perr e;
	struct done d;

	memset(&e, 0, sizeof(e));
	memset(&d, 0, sizeof(d));
	spec_init(&s, id, tenant, user, &f->cfg);
	assert_int_equal(xd_box_create(&f->xd, &s, on_done, &d, &e), 0);
	assert_int_equal(fake_run_until(f, &d.called, 10000), 0);
	assert_int_equal(fake_run_jobs(f, 5000), 0);
}

static void
t_quotas(void **state)
{
	struct fake_env *f = *state;
	long total, nt, nu;

	f->cfg.max_per_tenant = 2;
	f->cfg.max_per_user = 1;
	f->cfg.max_total = 4;
	assert_non_null(fake_box(f, "a1", "ta", "alice", 0));
	/* alice has hers: per user, within her tenant */
	expect_quota(f, "a2", "ta", "alice", "user", 1, 1);
	/* the same user name in another tenant is another user */
	xd_box_counts(&f->xd, "tb", "alice", &total, &nt, &nu);
	assert_int_equal(total, 1);
	assert_int_equal(nt, 0);
	assert_int_equal(nu, 0);
	assert_non_null(fake_box(f, "a3", "ta", "bob", 1));
	/* the tenant is full, whoever asks */
	expect_quota(f, "a4", "ta", "carol", "tenant", 2, 2);
	expect_quota(f, "a4", "ta", "", "tenant", 2, 2);
	assert_non_null(fake_box(f, "b1", "tb", "alice", 2));
	assert_non_null(fake_box(f, "n1", "", "", 3));
	/* the host is full */
	expect_quota(f, "b2", "tb", "dave", "global", 4, 4);
	/* the creates under way */
	f->cfg.max_total = 0;
	f->xd.creating = f->cfg.max_creates;
	expect_quota(f, "b2", "tb", "dave", "creates", f->cfg.max_creates,
	    f->cfg.max_creates);
	f->xd.creating = 0;
	/* uid slots: all four taken */
	f->cfg.slots = 4;
	expect_quota(f, "b2", "tb", "dave", "global", 4, 4);
	f->cfg.slots = 5;
	/* below every quota: admitted (and its worker run) */
	expect_admitted(f, "b2", "tb", "dave");
	/* the quotas refused before the backend was asked; the slots
	 * after (it was asked for the refused one and the admitted one) */
	assert_int_equal(fake->available, 2);
}

/* A delete: the sandbox destroyed, the workspace archived, the broker
 * session deleted, the directory gone. */
static void
t_delete(void **state)
{
	struct fake_env *f = *state;
	struct xd_perr e;
	struct done d;
	struct xd_box *b;
	char p[SBX_PATH_MAX + 64];
	FILE *fp;

	memset(&e, 0, sizeof(e));
	assert_non_null(b = fake_box(f, "d1", "t1", "u1", 0));
	snprintf(p, sizeof(p), "%s/hello.txt", b->rec.workspace);
	assert_non_null(fp = fopen(p, "w"));
	fputs("hello\n", fp);
	fclose(fp);
	memset(&d, 0, sizeof(d));
	assert_int_equal(xd_box_delete(b, 1, "delete", on_done, &d, &e), 0);
	assert_int_equal(b->state, XD_BOX_DELETING);
	/* while it is deleted, nothing else */
	assert_int_equal(xd_box_delete(b, 1, "delete", on_done, &d, &e), -1);
	assert_int_equal(e.status, 409);
	xd_perr_clear(&e);
	assert_int_equal(fake_run_until(f, &d.called, 10000), 0);
	assert_int_equal(fake_run_jobs(f, 5000), 0);
	assert_int_equal(d.status, 0);
	assert_int_equal(fake->destroy, 1);
	assert_int_equal(fake->sessions_deleted, 1);
	assert_null(xd_box_find(&f->xd, NULL, "d1", NULL));
	snprintf(p, sizeof(p), "%s/%s", f->cfg.state_dir, key1("d1"));
	assert_false(exists(p));
	snprintf(p, sizeof(p), "%s/%s.json", f->cfg.archive_dir, key1("d1"));
	assert_true(exists(p));
	assert_int_equal(f->xd.stats.archived, 1);
	assert_int_equal(f->xd.stats.removed, 1);
}

/* The archive cannot be written: the box is STOPPED (its sandbox
 * destroyed, its workspace kept), then deleted without the archive. */
static void
t_delete_stopped(void **state)
{
	struct fake_env *f = *state;
	struct xd_perr e;
	struct done d;
	struct xd_box *b;
	char p[SBX_PATH_MAX + 64];
	FILE *fp;

	memset(&e, 0, sizeof(e));
	/* the archive directory under a file: it cannot be made */
	snprintf(p, sizeof(p), "%s/notadir", f->dir);
	assert_non_null(fp = fopen(p, "w"));
	fclose(fp);
	assert_true(snprintf(f->cfg.archive_dir, sizeof(f->cfg.archive_dir),
	    "%s/arch", p) < (int)sizeof(f->cfg.archive_dir));
	assert_non_null(b = fake_box(f, "s1", "t1", "u1", 0));
	memset(&d, 0, sizeof(d));
	assert_int_equal(xd_box_delete(b, 1, "delete", on_done, &d, &e), 0);
	assert_int_equal(fake_run_until(f, &d.called, 10000), 0);
	assert_int_equal(fake_run_jobs(f, 5000), 0);
	assert_null(d.box);
	assert_int_equal(d.status, 500);
	assert_non_null(strstr(d.msg, "archive failed"));
	assert_int_equal(b->state, XD_BOX_STOPPED);
	assert_non_null(strstr(b->stop_note, "archive failed"));
	assert_string_equal(b->broker, "deleted");
	assert_int_equal(fake->destroy, 1);
	assert_int_equal(fake->sessions_deleted, 1);
	assert_int_equal(f->xd.stats.archive_failed, 1);
	assert_ptr_equal(xd_box_find(&f->xd, NULL, "s1", NULL), b);
	assert_true(exists(b->rec.workspace));
	/* a restarted daemon would see it stopped too */
	snprintf(p, sizeof(p), "%s/execd.json", b->rec.dir);
	{
		json_t *o = json_load_file(p, 0, NULL);

		assert_non_null(o);
		assert_true(json_is_string(json_object_get(o, "stopped")));
		json_decref(o);
	}
	/* a stopped box takes no command */
	{
		struct xd_cmd_spec s;
		char *argv[] = { "true", NULL };

		memset(&s, 0, sizeof(s));
		s.argv = argv;
		snprintf(s.cwd, sizeof(s.cwd), "/workspace");
		assert_null(xd_cmd_start(b, &s, 0, XD_OUT_KEEP, NULL, NULL,
		    &e));
		assert_int_equal(e.status, 409);
		xd_perr_clear(&e);
	}
	/* deleted again without the archive: gone, not destroyed twice */
	memset(&d, 0, sizeof(d));
	assert_int_equal(xd_box_delete(b, 0, "delete", on_done, &d, &e), 0);
	assert_int_equal(fake_run_until(f, &d.called, 10000), 0);
	assert_int_equal(fake_run_jobs(f, 5000), 0);
	assert_int_equal(d.status, 0);
	assert_int_equal(fake->destroy, 1);
	assert_null(xd_box_find(&f->xd, NULL, "s1", NULL));
	snprintf(p, sizeof(p), "%s/%s", f->cfg.state_dir, key1("s1"));
	assert_false(exists(p));
}

/* destroy fails: the box runs on (nothing was lost). */
static void
t_delete_destroy_fails(void **state)
{
	struct fake_env *f = *state;
	struct xd_perr e;
	struct done d;
	struct xd_box *b;

	memset(&e, 0, sizeof(e));
	assert_non_null(b = fake_box(f, "f1", "t1", "u1", 0));
	fake->fail_destroy = 1;
	memset(&d, 0, sizeof(d));
	assert_int_equal(xd_box_delete(b, 1, "delete", on_done, &d, &e), 0);
	assert_int_equal(fake_run_until(f, &d.called, 10000), 0);
	assert_int_equal(fake_run_jobs(f, 5000), 0);
	assert_int_equal(d.status, 503);
	assert_int_equal(b->state, XD_BOX_RUNNING);
	assert_int_equal(fake->sessions_deleted, 0);
	assert_true(exists(b->rec.workspace));
}

/* The sweep: an idle box is suspended, a use resumes it; past
 * remove_after a box is removed (archived first). */
static void
t_sweep(void **state)
{
	struct fake_env *f = *state;
	struct xd_box *b, *old;
	struct xd_perr e;
	int never = 0;

	memset(&e, 0, sizeof(e));
	f->cfg.idle_after = 1;
	f->cfg.remove_after = 0;
	assert_non_null(b = fake_box(f, "i1", "t1", "u1", 0));
	b->rec.last_used = (int64_t)time(NULL) - 100;
	assert_int_equal(xd_box_sweep_start(&f->xd), 0);
	(void)fake_run_until(f, &never, 1600);
	assert_int_equal(fake->suspend, 1);
	assert_int_equal(b->rec.suspended, 1);
	assert_int_equal(f->xd.stats.suspended, 1);
	/* suspended once, not again */
	(void)fake_run_until(f, &never, 1200);
	assert_int_equal(fake->suspend, 1);
	assert_int_equal(xd_box_use(b, "test", "app", &e), 0);
	assert_int_equal(fake->resume, 1);
	assert_int_equal(b->rec.suspended, 0);
	assert_int_equal(f->xd.stats.resumed, 1);
	/* removal by age */
	f->cfg.idle_after = 0;
	f->cfg.remove_after = 1;
	assert_non_null(old = fake_box(f, "o1", "t1", "u1", 1));
	old->rec.last_used = (int64_t)time(NULL) - 100;
	b->rec.last_used = (int64_t)time(NULL) + 3600;
	assert_int_equal(xd_box_sweep_start(&f->xd), 0);
	(void)fake_run_until(f, &never, 1600);
	assert_int_equal(fake_run_jobs(f, 5000), 0);
	assert_null(xd_box_find(&f->xd, NULL, "o1", NULL));
	assert_ptr_equal(xd_box_find(&f->xd, NULL, "i1", NULL), b);
	assert_int_equal(f->xd.stats.removed_idle, 1);
	assert_int_equal(f->xd.stats.archived, 1);
	xd_box_sweep_stop(&f->xd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_create, setup, teardown),
		cmocka_unit_test_setup_teardown(t_create_rollback, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_create_broker_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_create_unavailable, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_quotas, setup, teardown),
		cmocka_unit_test_setup_teardown(t_delete, setup, teardown),
		cmocka_unit_test_setup_teardown(t_delete_stopped, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_delete_destroy_fails, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_sweep, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Under LeakSanitizer: the fake daemon's jansson records of boxes that a
 * case left for the next one are not torn down at exit (the test ends
 * with the process); leaks whose allocation is in libjansson are
 * suppressed for this binary only.
 */
const char *__lsan_default_suppressions(void);
const char *
__lsan_default_suppressions(void)
{
	return "leak:libjansson.so\n";
}
