/*
 * fake_sbx.h: sluice-execd's modules on a fake backend and a fake
 * sluiced, so that exec_box.c and exec_cmd.c run in a unit test, fast
 * and without root (tests/unit/sandbox-glue/executor/execd/test_exec_box.c,
 * test_exec_cmd.c).
 *
 * The backend ("fake", struct sbx_backend) makes nothing: create,
 * destroy, suspend, resume, kill_tree and release are counted and may
 * be made to fail.  spawn starts the command for real, as the test's
 * user, without namespaces: a fork that puts the command in a process
 * group of its own (kill_tree kills that group), its fds on 0, 1, 2,
 * its cwd the workspace, its environment exactly cmd->envp; argv[0]
 * without a slash is looked up in /usr/bin and /bin.  A real process
 * because exec_cmd.c watches a pidfd, reads pipes and waits: a faked
 * pid would leave the code under test nothing to watch.
 * The counters live in a shared mapping: the daemon calls most of the
 * backend in forked workers, and the test reads what they did.
 *
 * The link: fake_sbx.c defines sbx_backend_find, so libsbx.a's
 * sbx_backends.o (and the ns and gvisor backends it names) is never
 * pulled in; every box the daemon makes or adopts gets the fake.
 *
 * umount2: without root, EINVAL (what root gets for a directory that is
 * not a mount point: the tests' workspaces are plain directories).
 *
 * sluiced: an evhttp server on the test's own loop, on a Unix socket
 * (cfg->control): POST /v1/sessions answers a session socket (or
 * fake->broker_status), DELETE /v1/sessions/{id} 200; both counted
 * here, in the test's memory (the loop runs while a worker waits).
 */
#ifndef SLUICE_TEST_FAKE_SBX_H
#define SLUICE_TEST_FAKE_SBX_H

#include "sandbox-glue/executor/execd/execd-int.h"

struct fake_sbx {
	/* calls (in workers too) */
	int available, create, spawn, kill_tree, release, suspend, resume,
	    destroy, commit;
	/* make the call fail */
	int fail_available, fail_create, fail_destroy, fail_suspend,
	    fail_resume, fail_spawn;
	int dead;               /* alive() says 0 */
	/* sluiced (the test's loop) */
	int sessions_made, sessions_deleted;
	int broker_status;      /* POST /v1/sessions: 0 answers 201 */
	char last_session[SBX_ID_MAX + 1];
};

extern const struct sbx_backend fake_backend;
extern struct fake_sbx *fake;           /* shared with the workers */

/* The daemon's state as execd.c sets it up: the loop, a configuration
 * under a temporary directory (state, archives, control socket), the
 * queues; the fake sluiced listening. */
struct fake_env {
	struct xd xd;
	struct xd_cfg cfg;
	char dir[256];
	struct evhttp *sluiced;
	struct event *tick;
};

/* 0, or -1 with a message (no temporary directory, no socket). */
int fake_env_setup(struct fake_env *f);
void fake_env_teardown(struct fake_env *f);
/* Run the loop until *flag is set or ms pass: 0 set, -1 timed out. */
int fake_run_until(struct fake_env *f, const int *flag, int ms);
/* Run the loop until the daemon has no worker left. */
int fake_run_jobs(struct fake_env *f, int ms);
/* A running box made directly (not through a create), its record's
 * directory and workspace made under the state directory. */
struct xd_box *fake_box(struct fake_env *f, const char *id,
    const char *tenant, const char *user, int slot);
/* A uid base under which slot 0's sandbox user is the test's own uid
 * (a create chowns the workspace to it); 0 when there is none. */
int fake_uid_base(unsigned long *base);

#endif
