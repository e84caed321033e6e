/*
 * test_exec_cmd.c: sluice-execd's commands (sandbox-glue/executor/
 * execd/exec_cmd.c) on the fake backend (fake_sbx.h), whose spawn runs
 * the command for real as the test's user: the exit status and output
 * kept, the output cap (per stream and output_cap_total), the deadline
 * (kill_tree in a worker, the result timed out), one foreground command
 * at a time, the running-command quotas, a background command's ring,
 * and the ring budget (finished commands' rings dropped oldest first,
 * a running one's never).
 */
#include "sluice-config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <jansson.h>

#include "tests/unit/sandbox-glue/executor/execd/fake_sbx.h"

struct fg {
	int done;
	json_t *res;
};

static void
fg_exit(void *arg, struct xd_cmd *c)
{
	struct fg *g = arg;

	g->res = xd_cmd_result(c, 1);
	g->done = 1;
	xd_cmd_free(c);
}

static const struct xd_sink fg_sink = { NULL, fg_exit, NULL };

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
spec_sh(struct xd_cmd_spec *s, char **argv, const char *script,
    long timeout_s, long cap)
{
	memset(s, 0, sizeof(*s));
	argv[0] = "/bin/sh";
	argv[1] = "-c";
	argv[2] = (char *)script;
	argv[3] = NULL;
	s->argv = argv;
	snprintf(s->cwd, sizeof(s->cwd), "/workspace");
	s->timeout_s = timeout_s;
	s->output_cap = cap;
}

/* A foreground command to its end: its result. */
static json_t *
run_fg(struct fake_env *f, struct xd_box *b, const struct xd_cmd_spec *s,
    int ms)
{
	struct fg g = { 0, NULL };
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	assert_non_null(xd_cmd_start(b, s, 0, XD_OUT_KEEP, &fg_sink, &g, &e));
	assert_int_equal(fake_run_until(f, &g.done, ms), 0);
	assert_int_equal(fake_run_jobs(f, 5000), 0);
	assert_non_null(g.res);
	return g.res;
}

static void
t_exit_output(void **state)
{
	struct fake_env *f = *state;
	struct xd_box *b = fake_box(f, "x1", "t1", "u1", 0);
	struct xd_cmd_spec s;
	char *argv[4];
	json_t *r;

	assert_non_null(b);
	spec_sh(&s, argv, "echo out; echo err >&2; pwd -P; exit 3", 10,
	    1000);
	r = run_fg(f, b, &s, 5000);
	assert_int_equal(json_integer_value(json_object_get(r, "exit_code")),
	    3);
	assert_true(json_is_null(json_object_get(r, "signal")));
	assert_false(json_is_true(json_object_get(r, "timed_out")));
	{
		char want[SBX_PATH_MAX + 16], *real;

		/* the fake runs it in the host's view of the workspace */
		assert_non_null(real = realpath(b->rec.workspace, NULL));
		snprintf(want, sizeof(want), "out\n%s\n", real);
		free(real);
		assert_string_equal(json_string_value(json_object_get(r,
		    "stdout")), want);
	}
	assert_string_equal(json_string_value(json_object_get(r, "stderr")),
	    "err\n");
	json_decref(r);
	assert_int_equal(fake->spawn, 1);
	assert_int_equal(fake->release, 1);     /* in a worker, after */
	assert_int_equal(fake->kill_tree, 0);
	assert_int_equal(f->xd.stats.cmds_started, 1);
	assert_int_equal(f->xd.stats.cmds_exited, 1);
	assert_null(b->fg);
	/* the environment is exactly the daemon's and the caller's */
	{
		char *env[] = { "FOO=bar", "HOME=/elsewhere", NULL };

		spec_sh(&s, argv, "echo $FOO $HOME $HTTPS_PROXY", 10, 1000);
		s.env = env;
		r = run_fg(f, b, &s, 5000);
		assert_string_equal(json_string_value(json_object_get(r,
		    "stdout")), "bar /elsewhere http://127.0.0.1:3128\n");
		json_decref(r);
	}
}

static void
t_output_cap(void **state)
{
	struct fake_env *f = *state;
	struct xd_box *b = fake_box(f, "x2", "t1", "u1", 0);
	struct xd_cmd_spec s;
	char *argv[4];
	json_t *r;
	const char *out;

	assert_non_null(b);
	/* 200000 bytes, more than a pipe holds: the command never blocks */
	spec_sh(&s, argv, "i=0; while [ $i -lt 2000 ]; do printf "
	    "'%0100d' 0; i=$((i+1)); done; echo done >&2", 20, 150);
	r = run_fg(f, b, &s, 15000);
	assert_int_equal(json_integer_value(json_object_get(r, "exit_code")),
	    0);
	out = json_string_value(json_object_get(r, "stdout"));
	assert_int_equal(strlen(out), 150);
	assert_true(json_is_true(json_object_get(r, "stdout_truncated")));
	assert_false(json_is_true(json_object_get(r, "stderr_truncated")));
	assert_string_equal(json_string_value(json_object_get(r, "stderr")),
	    "done\n");
	/* no output_cap_total asked: no output_dropped */
	assert_null(json_object_get(r, "output_dropped"));
	json_decref(r);
	/* both streams under one cap: stdout first, then nothing */
	spec_sh(&s, argv, "printf 0123456789; sleep 0.1; printf abcdef >&2",
	    10, 1000);
	s.has_cap_total = 1;
	s.cap_total = 12;
	r = run_fg(f, b, &s, 5000);
	assert_string_equal(json_string_value(json_object_get(r, "stdout")),
	    "0123456789");
	assert_string_equal(json_string_value(json_object_get(r, "stderr")),
	    "ab");
	assert_int_equal(json_integer_value(json_object_get(r,
	    "output_dropped")), 4);
	assert_true(json_is_true(json_object_get(r, "stderr_truncated")));
	json_decref(r);
}

static void
t_deadline(void **state)
{
	struct fake_env *f = *state;
	struct xd_box *b = fake_box(f, "x3", "t1", "u1", 0);
	struct xd_cmd_spec s;
	char *argv[4];
	json_t *r;
	time_t t0 = time(NULL);

	assert_non_null(b);
	/* the shell's child too: kill_tree takes the whole group */
	spec_sh(&s, argv, "sleep 60 & sleep 60; echo never", 1, 1000);
	r = run_fg(f, b, &s, 8000);
	assert_true(json_is_true(json_object_get(r, "timed_out")));
	assert_int_equal(json_integer_value(json_object_get(r, "signal")), 9);
	assert_int_equal(json_integer_value(json_object_get(r, "exit_code")),
	    137);
	assert_string_equal(json_string_value(json_object_get(r, "stdout")),
	    "");
	assert_true(time(NULL) - t0 < 6);
	json_decref(r);
	assert_int_equal(fake->kill_tree, 1);
	assert_int_equal(f->xd.stats.timed_out, 1);
}

static void
t_fg_busy_and_quotas(void **state)
{
	struct fake_env *f = *state;
	struct xd_box *b = fake_box(f, "x4", "t1", "u1", 0);
	struct xd_box *o = fake_box(f, "x5", "t1", "u2", 1);
	struct xd_cmd_spec s;
	struct xd_perr e;
	struct xd_cmd *c, *bg;
	struct fg g = { 0, NULL };
	char *argv[4];

	assert_non_null(b);
	assert_non_null(o);
	memset(&e, 0, sizeof(e));
	spec_sh(&s, argv, "sleep 30", 0, 1000);
	assert_non_null(c = xd_cmd_start(b, &s, 0, XD_OUT_KEEP, &fg_sink, &g,
	    &e));
	/* one foreground command per sandbox */
	assert_null(xd_cmd_start(b, &s, 0, XD_OUT_KEEP, &fg_sink, &g, &e));
	assert_int_equal(e.status, 429);
	assert_string_equal(e.code, "busy");
	xd_perr_clear(&e);
	/* running commands of the tenant: the other sandbox's count */
	f->cfg.max_cmds_tenant = 1;
	assert_null(xd_cmd_start(o, &s, 1, XD_OUT_RING, NULL, NULL, &e));
	assert_int_equal(e.status, 429);
	assert_string_equal(json_string_value(json_object_get(e.extra,
	    "scope")), "tenant");
	xd_perr_clear(&e);
	f->cfg.max_cmds_tenant = 0;
	/* and on the host */
	f->cfg.max_cmds = 1;
	assert_null(xd_cmd_start(o, &s, 1, XD_OUT_RING, NULL, NULL, &e));
	assert_string_equal(json_string_value(json_object_get(e.extra,
	    "scope")), "global");
	xd_perr_clear(&e);
	f->cfg.max_cmds = 0;
	/* background commands per sandbox */
	f->cfg.max_background = 1;
	assert_non_null(bg = xd_cmd_start(o, &s, 1, XD_OUT_RING, NULL, NULL,
	    &e));
	assert_null(xd_cmd_start(o, &s, 1, XD_OUT_RING, NULL, NULL, &e));
	assert_string_equal(json_string_value(json_object_get(e.extra,
	    "scope")), "sandbox");
	xd_perr_clear(&e);
	/* a sandbox whose holder died takes none */
	fake->dead = 1;
	assert_null(xd_cmd_start(o, &s, 0, XD_OUT_KEEP, &fg_sink, &g, &e));
	assert_int_equal(e.status, 503);
	xd_perr_clear(&e);
	fake->dead = 0;
	/* cancel both */
	xd_cmd_kill(c, "cancel");
	xd_cmd_kill(bg, "stop");
	assert_int_equal(fake_run_until(f, &g.done, 8000), 0);
	{
		int i;

		for (i = 0; i < 400 && bg->running; i++)
			event_base_loop(f->xd.base, EVLOOP_ONCE);
	}
	assert_false(bg->running);
	assert_int_equal(fake_run_jobs(f, 5000), 0);
	assert_true(json_is_true(json_object_get(g.res, "cancelled")));
	json_decref(g.res);
	assert_int_equal(fake->kill_tree, 2);
	{
		json_t *st = xd_cmd_status(bg);

		assert_string_equal(json_string_value(json_object_get(st,
		    "status")), "exited");
		assert_true(json_is_true(json_object_get(st, "cancelled")));
		json_decref(st);
	}
}

/* A background command to its end (RING). */
static struct xd_cmd *
run_bg(struct fake_env *f, struct xd_box *b, const char *script)
{
	struct xd_cmd_spec s;
	struct xd_perr e;
	struct xd_cmd *c;
	char *argv[4];
	int i;

	memset(&e, 0, sizeof(e));
	spec_sh(&s, argv, script, 0, 0);
	assert_non_null(c = xd_cmd_start(b, &s, 1, XD_OUT_RING, NULL, NULL,
	    &e));
	for (i = 0; i < 1000 && c->running; i++)
		event_base_loop(f->xd.base, EVLOOP_ONCE);
	assert_false(c->running);
	/* ended_ms apart */
	usleep(20000);
	return c;
}

static void
t_ring(void **state)
{
	struct fake_env *f = *state;
	struct xd_box *b;
	struct xd_cmd *c;
	uint64_t off[2] = { 0, 0 };
	json_t *o;

	f->cfg.ring_bytes = 16;
	assert_non_null(b = fake_box(f, "r0", "t1", "u1", 0));
	c = run_bg(f, b, "printf 0123456789abcdefghij; printf xy >&2");
	o = xd_cmd_output(c, off, 0);
	/* the last 16 of 20 bytes, from offset 4 */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(o,
	    "stdout"), "offset")), 4);
	assert_string_equal(json_string_value(json_object_get(json_object_get(
	    o, "stdout"), "data")), "456789abcdefghij");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(o,
	    "stdout"), "next")), 20);
	assert_string_equal(json_string_value(json_object_get(json_object_get(
	    o, "stderr"), "data")), "xy");
	json_decref(o);
	off[0] = 18;
	o = xd_cmd_output(c, off, 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(
	    o, "stdout"), "data")), "ij");
	json_decref(o);
	assert_int_equal(f->xd.ring_held, 32);
}

static void
t_ring_budget(void **state)
{
	struct fake_env *f = *state;
	struct xd_box *b1, *b2;
	struct xd_cmd *a, *bb, *c, *d;
	struct xd_cmd_spec s;
	struct xd_perr e;
	char *argv[4];
	json_t *st;

	memset(&e, 0, sizeof(e));
	f->cfg.ring_bytes = 1024;
	f->cfg.ring_budget = 3 * 2 * 1024;      /* three commands' rings */
	assert_non_null(b1 = fake_box(f, "g1", "t1", "u1", 0));
	assert_non_null(b2 = fake_box(f, "g2", "t2", "u2", 1));
	/* oldest first, across sandboxes */
	a = run_bg(f, b1, "echo a");
	bb = run_bg(f, b2, "echo b");
	c = run_bg(f, b1, "echo c");
	assert_int_equal(f->xd.ring_held, 3 * 2 * 1024);
	assert_int_equal(f->xd.stats.ring_dropped, 0);
	/* a fourth ring: the oldest finished one goes */
	spec_sh(&s, argv, "echo d; sleep 30", 0, 0);
	assert_non_null(d = xd_cmd_start(b2, &s, 1, XD_OUT_RING, NULL, NULL,
	    &e));
	assert_int_equal(f->xd.stats.ring_dropped, 1);
	assert_true(a->out_dropped);
	assert_null(a->out[0].buf);
	assert_false(bb->out_dropped);
	assert_false(c->out_dropped);
	assert_int_equal(f->xd.ring_held, 3 * 2 * 1024);
	st = xd_cmd_status(a);
	assert_true(json_is_true(json_object_get(st, "output_dropped")));
	json_decref(st);
	{
		uint64_t off[2] = { 0, 0 };

		st = xd_cmd_output(a, off, 0);
		assert_string_equal(json_string_value(json_object_get(
		    json_object_get(st, "stdout"), "data")), "");
		json_decref(st);
	}
	/* a smaller budget: every finished ring goes, in order; the
	 * running one stays though it alone is over */
	f->cfg.ring_budget = 1024;
	xd_cmd_ring_budget(&f->xd);
	assert_true(bb->out_dropped);
	assert_true(c->out_dropped);
	assert_false(d->out_dropped);
	assert_non_null(d->out[0].buf);
	assert_int_equal(f->xd.ring_held, 2 * 1024);
	assert_int_equal(f->xd.stats.ring_dropped, 3);
	assert_int_equal(f->xd.stats.ring_dropped_bytes, 3 * 2);  /* "a\n".. */
	/* its end: now it goes too */
	xd_cmd_kill(d, "stop");
	{
		int i;

		for (i = 0; i < 1000 && d->running; i++)
			event_base_loop(f->xd.base, EVLOOP_ONCE);
	}
	assert_false(d->running);
	assert_true(d->out_dropped);
	assert_int_equal(f->xd.ring_held, 0);
	assert_int_equal(fake_run_jobs(f, 5000), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_exit_output, setup, teardown),
		cmocka_unit_test_setup_teardown(t_output_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(t_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(t_fg_busy_and_quotas, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(t_ring_budget, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
