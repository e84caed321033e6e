/*
 * fake_sbx.c: the fake backend, the fake sluiced and the daemon's state
 * for the executor's unit tests (fake_sbx.h says what each does).
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "tests/unit/sandbox-glue/executor/execd/fake_sbx.h"

struct fake_sbx *fake;

/* ---- the backend ---- */

static int
f_available(char *err, size_t errlen)
{
	fake->available++;
	if (fake->fail_available)
		return sbx_err(err, errlen, "fake: not available");
	return 0;
}

static int
f_create(struct sbx_rec *rec, char *err, size_t errlen)
{
	fake->create++;
	if (fake->fail_create)
		return sbx_err(err, errlen, "fake: create failed");
	rec->init_pid = getpid();
	snprintf(rec->note, sizeof(rec->note), "fake");
	return 0;
}

static void
exec_cmd(const struct sbx_cmd *cmd)
{
	static const char *const dirs[] = { "/usr/bin/", "/bin/", NULL };
	const char *a0 = cmd->argv[0];
	char p[512];
	size_t i;

	if (strchr(a0, '/') != NULL) {
		execve(a0, cmd->argv, cmd->envp);
		return;
	}
	for (i = 0; dirs[i] != NULL; i++) {
		snprintf(p, sizeof(p), "%s%s", dirs[i], a0);
		execve(p, cmd->argv, cmd->envp);
	}
}

static int
f_spawn(struct sbx_rec *rec, const struct sbx_cmd *cmd, struct sbx_proc *out,
    char *err, size_t errlen)
{
	pid_t pid;

	fake->spawn++;
	if (fake->fail_spawn)
		return sbx_err(err, errlen, "fake: spawn failed");
	if ((pid = fork()) < 0)
		return sbx_err(err, errlen, "fork: %s", strerror(errno));
	if (pid == 0) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		sigaction(SIGPIPE, &sa, NULL);
		setpgid(0, 0);
		if (dup2(cmd->fd_in, 0) < 0 || dup2(cmd->fd_out, 1) < 0 ||
		    dup2(cmd->fd_err, 2) < 0 || chdir(rec->workspace) != 0)
			_exit(126);
		exec_cmd(cmd);
		_exit(127);
	}
	setpgid(pid, pid);      /* either side first: no race with kill */
	out->pid = pid;
	out->start_ms = sbx_now_ms();
	snprintf(out->tag, sizeof(out->tag), "pg%d", (int)pid);
	return 0;
}

static int
f_kill_tree(struct sbx_rec *rec, const struct sbx_proc *p, char *err,
    size_t errlen)
{
	(void)rec;
	fake->kill_tree++;
	if (kill(-p->pid, SIGKILL) != 0 && errno != ESRCH)
		return sbx_err(err, errlen, "kill: %s", strerror(errno));
	return 0;
}

static void
f_release(struct sbx_rec *rec, const struct sbx_proc *p)
{
	(void)rec;
	(void)p;
	fake->release++;
}

static int
f_suspend(struct sbx_rec *rec, char *err, size_t errlen)
{
	fake->suspend++;
	if (fake->fail_suspend)
		return sbx_err(err, errlen, "fake: suspend failed");
	rec->suspended = 1;
	return 0;
}

static int
f_resume(struct sbx_rec *rec, char *err, size_t errlen)
{
	fake->resume++;
	if (fake->fail_resume)
		return sbx_err(err, errlen, "fake: resume failed");
	rec->suspended = 0;
	return 0;
}

static int
f_alive(const struct sbx_rec *rec)
{
	(void)rec;
	return !fake->dead;
}

static int
f_destroy(struct sbx_rec *rec, char *err, size_t errlen)
{
	(void)rec;
	fake->destroy++;
	if (fake->fail_destroy)
		return sbx_err(err, errlen, "fake: destroy failed");
	return 0;
}

static void
f_commit(struct sbx_rec *rec)
{
	(void)rec;
	fake->commit++;
}

const struct sbx_backend fake_backend = {
	.name = "fake",
	.available = f_available,
	.create = f_create,
	.spawn = f_spawn,
	.kill_tree = f_kill_tree,
	.release = f_release,
	.suspend = f_suspend,
	.resume = f_resume,
	.alive = f_alive,
	.destroy = f_destroy,
	.root_fd = NULL,
	.commit = f_commit,
	.oom_kills = NULL,
};

/* Instead of libsbx.a's table: every name is the fake. */
const struct sbx_backend *
sbx_backend_find(const char *name)
{
	return strcmp(name, "fake") == 0 ? &fake_backend : NULL;
}

/*
 * The workspaces here are plain directories (disk_bytes 0): nothing is
 * ever mounted on them, and root's umount2 of one says EINVAL, which
 * exec_ws.c takes for "not mounted".  Without root the kernel says
 * EPERM first, which it takes for a mount it cannot remove.  So the
 * tests' umount2 (it comes before libc's in the link) answers as root
 * would be answered; as root it is the system call.
 */
int
umount2(const char *target, int flags)
{
	if (geteuid() == 0)
		return (int)syscall(SYS_umount2, target, flags);
	errno = EINVAL;
	return -1;
}

/* ---- sluiced ---- */

static void
reply(struct evhttp_request *req, int status, const char *body)
{
	struct evbuffer *b = evbuffer_new();

	evbuffer_add_printf(b, "%s", body);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "application/json");
	evhttp_send_reply(req, status, "X", b);
	evbuffer_free(b);
}

static void
on_sluiced(struct evhttp_request *req, void *arg)
{
	struct fake_env *f = arg;
	const char *uri = evhttp_request_get_uri(req);
	enum evhttp_cmd_type m = evhttp_request_get_command(req);

	if (m == EVHTTP_REQ_POST && strcmp(uri, "/v1/sessions") == 0) {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t n = evbuffer_get_length(in);
		json_t *o = json_loadb((const char *)evbuffer_pullup(in, -1), n,
		    0, NULL);
		const char *id = json_string_value(json_object_get(o, "id"));
		char body[1024];

		if (fake->broker_status != 0 || id == NULL) {
			json_decref(o);
			reply(req, fake->broker_status ? fake->broker_status :
			    400, "{\"error\":{\"code\":\"x\",\"message\":"
			    "\"fake sluiced refuses\"}}");
			return;
		}
		fake->sessions_made++;
		snprintf(fake->last_session, sizeof(fake->last_session), "%s",
		    id);
		snprintf(body, sizeof(body), "{\"id\":\"%s\",\"socket\":"
		    "\"%s/sessions/%s/proxy.sock\"}", id, f->dir, id);
		json_decref(o);
		reply(req, 201, body);
		return;
	}
	if (m == EVHTTP_REQ_DELETE && strncmp(uri, "/v1/sessions/", 13) == 0) {
		fake->sessions_deleted++;
		reply(req, 200, "{}");
		return;
	}
	reply(req, 404, "{\"error\":{\"code\":\"not_found\",\"message\":"
	    "\"fake sluiced\"}}");
}

static int
sluiced_listen(struct fake_env *f)
{
	struct sockaddr_un sa;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->cfg.control) >=
	    (int)sizeof(sa.sun_path))
		return -1;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, 16) != 0 || evutil_make_socket_nonblocking(fd) != 0 ||
	    (f->sluiced = evhttp_new(f->xd.base)) == NULL ||
	    evhttp_accept_socket(f->sluiced, fd) != 0) {
		close(fd);
		return -1;
	}
	evhttp_set_gencb(f->sluiced, on_sluiced, f);
	return 0;
}

/* ---- the daemon's state ---- */

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

int
fake_uid_base(unsigned long *base)
{
	uid_t u = getuid();

	if (u == 0) {
		*base = 0;              /* root may give it to anyone */
		return 1;
	}
	if (u < SBX_UID || getgid() != u)
		return 0;       /* host_gid = host_uid's base + SBX_GID */
	*base = (unsigned long)(u - SBX_UID);
	return 1;
}

int
fake_env_setup(struct fake_env *f)
{
	struct timeval tv = { 0, 10000 };
	struct xd_cfg *c = &f->cfg;
	unsigned long base;

	memset(f, 0, sizeof(*f));
	if (fake == NULL && (fake = mmap(NULL, sizeof(*fake), PROT_READ |
	    PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED) {
		fake = NULL;
		return -1;
	}
	memset(fake, 0, sizeof(*fake));
	snprintf(f->dir, sizeof(f->dir), "/tmp/xdtest.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	xd_cfg_defaults(c);
	snprintf(c->state_dir, sizeof(c->state_dir), "%s/state", f->dir);
	snprintf(c->runtime_dir, sizeof(c->runtime_dir), "%s/run", f->dir);
	snprintf(c->control, sizeof(c->control), "%s/ctl.sock", f->dir);
	snprintf(c->archive_dir, sizeof(c->archive_dir), "%s/archives",
	    f->dir);
	snprintf(c->image_dir, sizeof(c->image_dir), "%s/images", f->dir);
	snprintf(c->shim, sizeof(c->shim), "/bin/true");
	snprintf(c->backend, sizeof(c->backend), "fake");
	c->control_timeout_ms = 5000;
	c->def.disk_bytes = 0;          /* a plain directory: no mke2fs */
	c->disk_reserve = 0;
	c->uid_base = fake_uid_base(&base) ? base : c->uid_base;
	if (mkdir(c->state_dir, 0711) != 0)
		return -1;
	f->xd.cfg = c;
	TAILQ_INIT(&f->xd.boxes);
	TAILQ_INIT(&f->xd.jobs);
	TAILQ_INIT(&f->xd.calls);
	TAILQ_INIT(&f->xd.subs);
	signal(SIGPIPE, SIG_IGN);
	if ((f->xd.base = event_base_new()) == NULL ||
	    (f->tick = event_new(f->xd.base, -1, EV_PERSIST, on_tick, f)) ==
	    NULL || event_add(f->tick, &tv) != 0)
		return -1;
	return sluiced_listen(f);
}

static void
rm_rf(const char *dir)
{
	char cmd[600];

	/* the test's own temporary directory, made by mkdtemp above */
	if (strncmp(dir, "/tmp/xdtest.", 12) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

void
fake_env_teardown(struct fake_env *f)
{
	fake_run_jobs(f, 5000);
	xd_box_sweep_stop(&f->xd);
	xd_box_free_all(&f->xd);
	if (f->sluiced != NULL)
		evhttp_free(f->sluiced);
	if (f->tick != NULL)
		event_free(f->tick);
	if (f->xd.base != NULL)
		event_base_free(f->xd.base);
	if (f->dir[0])
		rm_rf(f->dir);
}

static int64_t
mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int
fake_run_until(struct fake_env *f, const int *flag, int ms)
{
	int64_t end = mono_ms() + ms;

	while (!*flag) {
		if (mono_ms() > end)
			return -1;
		event_base_loop(f->xd.base, EVLOOP_ONCE);
	}
	return 0;
}

int
fake_run_jobs(struct fake_env *f, int ms)
{
	int64_t end = mono_ms() + ms;

	while (!TAILQ_EMPTY(&f->xd.jobs)) {
		if (mono_ms() > end)
			return -1;
		event_base_loop(f->xd.base, EVLOOP_ONCE);
	}
	return 0;
}

struct xd_box *
fake_box(struct fake_env *f, const char *id, const char *tenant,
    const char *user, int slot)
{
	struct xd_box *b = calloc(1, sizeof(*b));
	struct sbx_rec *r;

	if (b == NULL)
		return NULL;
	r = &b->rec;
	b->xd = &f->xd;
	TAILQ_INIT(&b->cmds);
	b->refs = 1;
	b->lim = f->cfg.def;
	b->be = &fake_backend;
	b->state = XD_BOX_RUNNING;
	snprintf(b->profile, sizeof(b->profile), "%s", SBX_PROFILE_HOST);
	snprintf(b->broker, sizeof(b->broker), "ok");
	snprintf(r->chat, sizeof(r->chat), "%s", id);
	snprintf(r->tenant, sizeof(r->tenant), "%s", tenant);
	snprintf(r->user, sizeof(r->user), "%s", user);
	snprintf(r->backend, sizeof(r->backend), "fake");
	snprintf(r->tier, sizeof(r->tier), "off");
	if (snprintf(r->dir, sizeof(r->dir), "%s/%s", f->cfg.state_dir, id) >=
	    (int)sizeof(r->dir) || snprintf(r->workspace,
	    sizeof(r->workspace), "%s/workspace", r->dir) >=
	    (int)sizeof(r->workspace)) {
		free(b);
		return NULL;
	}
	r->slot = slot;
	r->host_uid = getuid();
	r->host_gid = getgid();
	r->created = r->last_used = (int64_t)time(NULL);
	if (mkdir(r->dir, 0711) != 0 || mkdir(r->workspace, 0750) != 0 ||
	    xd_rec_save(r) != 0) {
		free(b);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&f->xd.boxes, b, link);
	return b;
}
