/*
 * exec_health.c: GET /v1/health and sluice-execd --doctor.  Each backend
 * with ok and, when it cannot be used here, the reason: its available(),
 * then a probe in the health worker (ns: the namespaces it makes,
 * unshared in a child, with cgroups that cannot be written as a note;
 * gvisor: runsc --version runs); kvm, which this build has no backend for, with that reason;
 * whether sluiced answers on its control socket; the profiles; what
 * the quotas leave.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox-glue/executor/execd/execd-int.h"

/* Run argv (stdout and stderr to /dev/null) for at most ms: its exit
 * status, or -1 when it could not run or did not end. */
static int
run_bounded(char *const *argv, int ms)
{
	pid_t pid = fork();
	int st = 0, i;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
		}
		closefrom(3);
		execv(argv[0], argv);
		_exit(127);
	}
	for (i = 0; i < ms / 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* What the ns backend needs beyond its available(): the namespaces it
 * makes, tried in a child; cgroups only limit, so their absence is a
 * note, not a refusal. */
static void
probe_ns(char *why, size_t len, char *note, size_t nlen)
{
	int p[2], e = 0;
	pid_t pid;

	if (pipe(p) != 0) {
		snprintf(why, len, "pipe: %s", strerror(errno));
		return;
	}
	if ((pid = fork()) == 0) {
		close(p[0]);
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
		    CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0)
			e = errno;
		(void)!write(p[1], &e, sizeof(e));
		_exit(0);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &e, sizeof(e)) != (ssize_t)sizeof(e))
		snprintf(why, len, "cannot probe the namespaces");
	else if (e != 0)
		snprintf(why, len, "user namespaces refused: unshare: %s%s",
		    strerror(e), e == EPERM || e == EACCES ? " (AppArmor, "
		    "user.max_user_namespaces or a container's seccomp?)" : "");
	close(p[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	if (access("/sys/fs/cgroup/freezer", W_OK) != 0 &&
	    access("/sys/fs/cgroup/cgroup.subtree_control", W_OK) != 0 &&
	    access("/sys/fs/cgroup/unified/cgroup.subtree_control", W_OK) != 0)
		snprintf(note, nlen, "cgroups not writable: no memory, pids or "
		    "cpu limits, process trees found through /proc");
}

static void
probe_gvisor(char *why, size_t len)
{
	static const char *const where[] = { "/usr/bin/runsc",
	    "/usr/sbin/runsc", "/usr/local/bin/runsc", NULL };
	char *argv[] = { NULL, "--version", NULL };
	size_t i;

	for (i = 0; where[i] != NULL && access(where[i], X_OK) != 0; i++)
		;
	if (where[i] == NULL)
		return;         /* available() says why */
	argv[0] = (char *)where[i];
	if (run_bounded(argv, 5000) != 0)
		snprintf(why, len, "%s --version does not run", where[i]);
}

/* In the worker: each backend's available() and the probes. */
static json_t *
backends_probe(void)
{
	const struct sbx_backend *const bes[] = { &sbx_ns_backend,
	    &sbx_gvisor_backend };
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < 2; i++) {
		char err[XD_ERR_MAX] = "", note[XD_ERR_MAX] = "";
		int ok = bes[i]->available(err, sizeof(err)) == 0;
		json_t *o;

		if (ok && bes[i] == &sbx_ns_backend)
			probe_ns(err, sizeof(err), note, sizeof(note));
		else if (ok)
			probe_gvisor(err, sizeof(err));
		ok = ok && err[0] == '\0';
		o = json_pack("{s:s,s:b,s:s?}", "name", bes[i]->name, "ok", ok,
		    "reason", ok ? NULL : err);
		if (note[0])
			json_object_set_new(o, "note", json_string(note));
		json_array_append_new(a, o);
	}
	json_array_append_new(a, json_pack("{s:s,s:b,s:s}", "name", "kvm",
	    "ok", 0, "reason", "no kvm (microVM) backend in this build: "
	    "sandboxes run on ns or gvisor"));
	return a;
}

static int
backend_ok(json_t *bes, const char *name)
{
	size_t i;
	json_t *b;

	json_array_foreach(bes, i, b)
		if (strcmp(json_string_value(json_object_get(b, "name")), name)
		    == 0)
			return json_is_true(json_object_get(b, "ok"));
	return 0;
}

json_t *
xd_health_storage(struct xd *xd)
{
	struct xd_storage s;

	xd_box_storage(xd, &s, 1);
	/* null where the file system could not be read */
	return json_pack("{s:s,s:o,s:o,s:o,s:I,s:I,s:I,s:I,s:I}",
	    "path", xd->cfg->state_dir,
	    "free_bytes", s.ok ? json_integer((json_int_t)s.free) : json_null(),
	    "total_bytes", s.ok ? json_integer((json_int_t)s.total) :
	    json_null(),
	    "headroom_bytes", s.ok ? json_integer((json_int_t)s.headroom) :
	    json_null(),
	    "reserve_bytes", (json_int_t)s.reserve,
	    "workspaces_bytes", (json_int_t)s.workspaces,
	    "workspaces_unallocated_bytes", (json_int_t)s.unallocated,
	    "archives_bytes", (json_int_t)s.archives,
	    "archives_count", (json_int_t)s.narchives);
}

json_t *
xd_health_json(struct xd *xd, json_t *bes, int broker_ok, const char *why)
{
	const struct xd_cfg *c = xd->cfg;
	json_t *o;
	int ok_def;
	long total, nt, nu;

	if (bes == NULL)
		bes = backends_probe();
	ok_def = backend_ok(bes, c->backend);
	xd_box_counts(xd, NULL, NULL, &total, &nt, &nu);
	o = json_pack("{s:b,s:s,s:s,s:o,s:{s:b,s:s,s:s?},s:[s],s:s,"
	    "s:{s:{s:I,s:I,s:I},s:{s:I,s:I}}}",
	    "ok", ok_def && broker_ok, "version", PACKAGE_VERSION,
	    "default_backend", c->backend, "backends", bes,
	    "broker", "ok", broker_ok, "socket", c->control, "reason",
	    broker_ok ? NULL : why,
	    "profiles", SBX_PROFILE_HOST, "default_profile", c->profile,
	    "capacity",
	    "sandboxes", "limit", (json_int_t)c->max_total, "in_use",
	    (json_int_t)total, "left", (json_int_t)(c->max_total ?
	    (c->max_total > total ? c->max_total - total : 0) : -1),
	    "creates", "limit", (json_int_t)c->max_creates, "in_use",
	    (json_int_t)xd->creating);
	if (o != NULL)
		json_object_set_new(o, "storage", xd_health_storage(xd));
	/* said wherever an operator looks, not only at start */
	if (o != NULL && c->tcp[0] && c->tcp_plain)
		json_object_set_new(o, "warning", json_sprintf("tcp.plain_http: "
		    "%s is served without TLS: tokens and bodies cross the "
		    "network in the clear", c->tcp));
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
	struct xd_perr e;
	char err[XD_ERR_MAX];
	json_t *o, *im;

	memset(&e, 0, sizeof(e));
	if (xd_broker_ping(op->xd->cfg, &e) != 0)
		o = json_pack("{s:b,s:s,s:o}", "ok", 0, "reason", e.msg,
		    "backends", backends_probe());
	else
		o = json_pack("{s:b,s:o}", "ok", 1, "backends",
		    backends_probe());
	/* the images present (it reads the store under its lock: here,
	 * not in the loop) */
	err[0] = '\0';
	if ((im = sbx_image_list(op->xd->cfg->image_dir, err,
	    sizeof(err))) == NULL)
		im = json_pack("{s:s}", "error", err);
	if (o != NULL)
		json_object_set_new(o, "images", im);
	else
		json_decref(im);
	return o;
}

/* "profiles": host and each profile whose image is present. */
static void
health_images(json_t *h, json_t *res)
{
	json_t *im = json_object_get(res, "images"), *list, *e, *n;
	size_t i, k;

	if (h == NULL || !json_is_object(im))
		return;
	list = json_object_get(h, "profiles");
	json_array_foreach(json_object_get(im, "images"), i, e)
		json_array_foreach(json_object_get(e, "profiles"), k, n)
			json_array_append(list, n);
	if (json_object_get(im, "images") != NULL)
		json_object_set(h, "images", json_object_get(im, "images"));
	else
		json_object_set_new(h, "images", json_pack("{s:O?}", "error",
		    json_object_get(im, "error")));
}

static void
ping_done(void *arg, json_t *res)
{
	struct health_op *op = arg;
	const char *why = json_string_value(json_object_get(res, "reason"));

	json_t *bes = json_object_get(res, "backends");

	json_t *h = xd_health_json(op->xd, bes != NULL ? json_incref(bes) :
	    NULL, json_is_true(json_object_get(res, "ok")), why ? why :
	    "the health worker died");

	health_images(h, res);
	op->cb(op->arg, h);
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
