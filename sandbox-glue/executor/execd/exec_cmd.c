/*
 * exec_cmd.c: one command in a sandbox, on the loop.
 *
 * spawn() (sbx.h) runs here, in the daemon: it returns once the
 * command's process is set up, and the main process it returns is a
 * child of the daemon.  From then on everything is an event: the pidfd
 * of that process (its exit), the read ends of its stdout and stderr
 * pipes, the write end of its stdin pipe, the deadline timer.  The
 * deadline is the daemon's: a client that leaves does not keep a
 * command alive past it.  Killing (kill_tree) and the per-command
 * clean-up (release) may block (runsc), so they run in workers.
 *
 * Output: a foreground command keeps the first output_cap bytes of
 * each stream, and of both together output_cap_total when asked (the
 * rest is read and counted, so the command never blocks on a full
 * pipe), or passes them to its sink as they come
 * (streaming), where the sink may pause reading while its client is
 * slow: the pipe then fills and the command waits, and the daemon holds
 * no more than the sink's watermark.  A background command keeps the
 * last ring_bytes of each stream in a ring; offsets count from the
 * command's first byte, and a read from before the oldest byte kept
 * starts at the oldest one (the answer says where).
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"

#define PROXY_URL	"http://127.0.0.1:3128"
#define READ_CHUNK	65536
#define PTY_IN_MAX	(1024 * 1024)   /* a terminal's unwritten input */
#define BACKSTOP_S	10      /* after a kill, the host process goes */

static const char *const env_base[] = {
	"PATH=" SBX_HOME "/.local/bin:/usr/local/sbin:/usr/local/bin:"
	    "/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=" SBX_HOME, "USER=user", "LOGNAME=user",
	"SHELL=/bin/bash", "LANG=C.UTF-8", "TMPDIR=/tmp",
	"HTTP_PROXY=" PROXY_URL, "HTTPS_PROXY=" PROXY_URL,
	"http_proxy=" PROXY_URL, "https_proxy=" PROXY_URL,
	"NO_PROXY=localhost,127.0.0.1,::1",
	"no_proxy=localhost,127.0.0.1,::1",
	"PIP_PROXY=" PROXY_URL,
	/* the system is read-only: pip installs into ~/.local (PEP 668) */
	"PIP_BREAK_SYSTEM_PACKAGES=1",
	"npm_config_prefix=" SBX_HOME "/.local",
	"npm_config_proxy=" PROXY_URL,
	"npm_config_https_proxy=" PROXY_URL,
	"CARGO_HTTP_PROXY=" PROXY_URL,
	"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.proxy",
	"GIT_CONFIG_VALUE_0=" PROXY_URL,
};
#define ENV_BASE_N	(sizeof(env_base) / sizeof(env_base[0]))

static int64_t
now_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *
time_json(int64_t ms)
{
	char buf[64];
	time_t t = (time_t)(ms / 1000);
	struct tm g;

	if (ms <= 0 || gmtime_r(&t, &g) == NULL)
		return json_null();
	snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
	    g.tm_year + 1900, g.tm_mon + 1, g.tm_mday, g.tm_hour, g.tm_min,
	    g.tm_sec, (int)(ms % 1000));
	return json_string(buf);
}

/* The sandbox's own variables, a JSON array of "K=V" (NULL: none): the
 * trust store where its bundle is (xd_broker_trust), the credentials'
 * placeholders (xd_broker_sbx_env). */
static json_t *
box_env(const struct xd_box *b)
{
	static const char *const ca_vars[] = { "SSL_CERT_FILE",
	    "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",
	    "PIP_CERT", "CURL_CA_BUNDLE" };
	char p[SBX_PATH_MAX + 32];
	json_t *a = NULL;
	struct stat st;
	size_t i;

	snprintf(p, sizeof(p), "%s/" XD_ENV_FILE, b->rec.dir);
	if (access(p, F_OK) == 0 && ((a = json_load_file(p, 0, NULL)) ==
	    NULL || !json_is_array(a))) {
		xd_log(XD_LOG_WARN, "%s: not a JSON array: left out", p);
		json_decref(a);
		a = NULL;
	}
	snprintf(p, sizeof(p), "%s/" XD_CA_FILE, b->rec.session_dir);
	if (b->rec.session_dir[0] == '\0' || lstat(p, &st) != 0 ||
	    !S_ISREG(st.st_mode))
		return a;
	if (a == NULL && (a = json_array()) == NULL)
		return NULL;
	for (i = 0; i < sizeof(ca_vars) / sizeof(ca_vars[0]); i++)
		json_array_append_new(a, json_sprintf("%s=" SBX_SOCK_DIR "/"
		    XD_CA_FILE, ca_vars[i]));
	return a;
}

/* The environment: the base, the sandbox's (benv, may be NULL), PWD
 * (*pwd, to free), then the caller's (theirs win). */
static char **
env_build(const struct xd_cmd_spec *s, const json_t *benv, char **pwd)
{
	size_t n = 0, i, j, extra = 0, nb = json_array_size(benv);
	char **v;

	while (s->env != NULL && s->env[extra] != NULL)
		extra++;
	if ((v = calloc(ENV_BASE_N + nb + extra + 2, sizeof(char *))) == NULL)
		return NULL;
	for (i = 0; i < ENV_BASE_N; i++)
		v[n++] = (char *)env_base[i];
	for (i = 0; i < nb; i++) {
		const char *t = json_string_value(json_array_get(benv, i));

		if (t != NULL && strchr(t, '=') != NULL)
			v[n++] = (char *)t;
	}
	if (asprintf(pwd, "PWD=%s", s->cwd) < 0) {
		*pwd = NULL;
		free(v);
		return NULL;
	}
	v[n++] = *pwd;
	for (i = 0; i < extra; i++) {
		size_t k = strcspn(s->env[i], "=");

		for (j = 0; j < n; j++)
			if (strncmp(v[j], s->env[i], k) == 0 && v[j][k] == '=')
				break;
		v[j] = s->env[i];
		if (j == n)
			n++;
	}
	v[n] = NULL;
	return v;
}

/* ---- output ---- */

/* What output_cap_total leaves of keep (both streams' kept bytes). */
static size_t
total_room(const struct xd_cmd *c, size_t keep)
{
	size_t used = c->out[0].len + c->out[1].len, room;

	if (c->cap_total < 0)
		return keep;
	room = (size_t)c->cap_total > used ? (size_t)c->cap_total - used : 0;
	return keep < room ? keep : room;
}

static void
take(struct xd_cmd *c, int i, const unsigned char *b, size_t n)
{
	struct xd_stream *s = &c->out[i];
	size_t keep, pos, first, n0 = n;
	const unsigned char *b0 = b;

	s->total += n;
	switch (c->mode) {
	case XD_OUT_KEEP:
		keep = s->len < s->cap ? s->cap - s->len : 0;
		if (keep > n)
			keep = n;
		keep = total_room(c, keep);
		memcpy(s->buf + s->len, b, keep);
		s->len += keep;
		s->dropped += n - keep;
		break;
	case XD_OUT_STREAM:
		/* len counts what was passed on */
		keep = s->len < s->cap ? s->cap - s->len : 0;
		if (keep > n)
			keep = n;
		keep = total_room(c, keep);
		s->len += keep;
		s->dropped += n - keep;
		if (keep > 0 && c->sink != NULL && c->sink->output != NULL)
			c->sink->output(c->sink_arg, c, i, b, keep);
		break;
	case XD_OUT_RING:
		if (n > s->cap) {
			b += n - s->cap;
			n = s->cap;
		}
		pos = (size_t)((s->total - n) % s->cap);
		first = s->cap - pos < n ? s->cap - pos : n;
		memcpy(s->buf + pos, b, first);
		memcpy(s->buf, b + first, n - first);
		if (s->len < s->cap)
			s->len = s->len + n > s->cap ? s->cap : s->len + n;
		/* a terminal's attached client sees it as it comes (the
		 * ring keeps it for a replay) */
		if (c->sink != NULL && c->sink->output != NULL)
			c->sink->output(c->sink_arg, c, i, b0, n0);
		break;
	}
}

static void
stream_close(struct xd_stream *s)
{
	if (s->ev != NULL) {
		event_free(s->ev);
		s->ev = NULL;
	}
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
	}
}

static void
on_out(evutil_socket_t fd, short what, void *arg)
{
	struct xd_cmd *c = arg;
	unsigned char buf[READ_CHUNK];
	int i = fd == c->out[0].fd ? 0 : 1;
	ssize_t n;

	(void)what;
	n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		stream_close(&c->out[i]);
		return;
	}
	take(c, i, buf, (size_t)n);
}

static void
in_close(struct xd_cmd *c)
{
	if (c->ev_in != NULL) {
		event_free(c->ev_in);
		c->ev_in = NULL;
	}
	if (c->in_fd >= 0) {
		close(c->in_fd);
		c->in_fd = -1;
	}
	if (c->in != NULL) {
		evbuffer_free(c->in);
		c->in = NULL;
	}
}

static void
on_in(evutil_socket_t fd, short what, void *arg)
{
	struct xd_cmd *c = arg;
	int n;

	(void)fd;
	(void)what;
	n = evbuffer_write(c->in, c->in_fd);
	if (c->pty_fd >= 0 && !(n < 0 && errno != EAGAIN && errno != EINTR)) {
		/* a terminal's input stays open for more */
		if (evbuffer_get_length(c->in) == 0)
			event_del(c->ev_in);
		return;
	}
	if ((n < 0 && errno != EAGAIN && errno != EINTR) ||
	    evbuffer_get_length(c->in) == 0)
		in_close(c);    /* all given, or the command closed it */
}

int
xd_cmd_input(struct xd_cmd *c, const void *b, size_t n)
{
	if (c->pty_fd < 0 || c->in == NULL || c->ev_in == NULL ||
	    evbuffer_get_length(c->in) + n > PTY_IN_MAX)
		return -1;
	if (evbuffer_add(c->in, b, n) != 0)
		return -1;
	event_add(c->ev_in, NULL);
	return 0;
}

/* ---- workers: kill_tree, release ---- */

struct proc_job {
	struct xd_box *box;
	struct sbx_proc proc;
	int kill;
};

static json_t *
proc_job_child(void *arg)
{
	struct proc_job *pj = arg;
	char err[XD_ERR_MAX] = "";
	int rc = 0;

	if (pj->kill)
		rc = pj->box->be->kill_tree(&pj->box->rec, &pj->proc, err,
		    sizeof(err));
	else
		pj->box->be->release(&pj->box->rec, &pj->proc);
	return json_pack("{s:b,s:s}", "ok", rc == 0, "error", err);
}

static void
proc_job_done(void *arg, json_t *res)
{
	struct proc_job *pj = arg;
	json_t *ok = json_object_get(res, "ok");

	if (pj->kill && !json_is_true(ok))
		xd_log(XD_LOG_WARN, "sandbox %s: kill of command group %s: %s",
		    pj->box->rec.chat, pj->proc.tag,
		    json_string_value(json_object_get(res, "error")) ?
		    json_string_value(json_object_get(res, "error")) :
		    "the worker died");
	json_decref(res);
	pj->box->proc_jobs--;
	xd_box_unref(pj->box);
	free(pj);
}

static void
proc_job(struct xd_box *b, const struct sbx_proc *p, int kill)
{
	struct proc_job *pj = calloc(1, sizeof(*pj));
	char err[XD_ERR_MAX];

	if (pj == NULL)
		return;
	pj->box = b;
	pj->proc = *p;
	pj->kill = kill;
	b->refs++;
	if (xd_job_run(b->xd, kill ? "kill_tree" : "release",
	    proc_job_child, pj, proc_job_done, pj, err, sizeof(err)) != 0) {
		xd_log(XD_LOG_ERR, "sandbox %s: %s: %s", b->rec.chat,
		    kill ? "kill" : "release", err);
		b->refs--;
		free(pj);
		return;
	}
	b->proc_jobs++;
}

/* ---- the end ---- */

struct late_release {
	struct xd_box *box;
	struct sbx_proc proc;
};

static void
late_release_cb(evutil_socket_t fd, short what, void *arg)
{
	struct late_release *lr = arg;

	(void)fd;
	(void)what;
	lr->box->be->release(&lr->box->rec, &lr->proc);
	xd_box_unref(lr->box);
	free(lr);
}

/*
 * ns's release of an agent's command group: an rmdir, after the answer
 * has gone out (a timer, not an event made active at once: the loop
 * writes the answer on its next turn, before it runs the timers that
 * fell due by then).  On cgroup v1 the rmdir waits for the kernel's
 * cgroup lock, which the sandbox's next command process, made ahead,
 * holds across an RCU grace period while it joins its own group (some
 * milliseconds after an idle spell): that wait was in every answer.
 * Inline when it cannot be put off.
 */
static void
release_late(struct xd_box *b, const struct sbx_proc *p)
{
	static const struct timeval soon = { 0, 1 };
	struct late_release *lr = malloc(sizeof(*lr));

	if (lr != NULL) {
		lr->box = b;
		lr->proc = *p;
		b->refs++;
		if (event_base_once(b->xd->base, -1, EV_TIMEOUT,
		    late_release_cb, lr, &soon) == 0)
			return;
		b->refs--;
		free(lr);
	}
	b->be->release(&b->rec, p);
}

static void
cmd_finish(struct xd_cmd *c, int st)
{
	struct xd_box *b = c->box;
	unsigned char buf[READ_CHUNK];
	struct sbx_proc proc;
	int i, k;
	uint64_t after;
	json_int_t code, sig;

	c->running = 0;
	c->status = st;
	c->ended_ms = now_unix_ms();
	if (c->ev_exit != NULL) {
		event_free(c->ev_exit);
		c->ev_exit = NULL;
	}
	if (c->pidfd >= 0) {
		close(c->pidfd);
		c->pidfd = -1;
	}
	if (c->proc.pid == 0 && c->proc.fd >= 0) {
		close(c->proc.fd);
		c->proc.fd = -1;
	}
	if (c->ev_deadline != NULL) {
		event_free(c->ev_deadline);
		c->ev_deadline = NULL;
	}
	if (c->ev_backstop != NULL) {
		event_free(c->ev_backstop);
		c->ev_backstop = NULL;
	}
	/* the main process is gone: what is already in the pipes is its
	 * output (the ns drainer hands it over before the exit), not what
	 * background children may still write */
	for (i = 0; i < 2; i++) {
		for (k = 0; k < 64 && c->out[i].fd >= 0; k++) {
			ssize_t n = read(c->out[i].fd, buf, sizeof(buf));

			if (n <= 0)
				break;
			take(c, i, buf, (size_t)n);
		}
		stream_close(&c->out[i]);
	}
	in_close(c);
	if (c->pty_fd >= 0) {
		close(c->pty_fd);
		c->pty_fd = -1;
	}
	if (c->snap != NULL) {
		c->changes = xd_snap_diff(c->snap, b->rec.workspace,
		    &b->xd->cfg->art);
		xd_snap_free(c->snap);
		c->snap = NULL;
	}
	if (c->oom_known && b->be->oom_kills != NULL &&
	    b->be->oom_kills(&b->rec, &after) == 0 && after > c->oom_before)
		c->oom_killed = 1;
	if (b->fg == c)
		b->fg = NULL;
	xd_log(XD_LOG_DEBUG, "sandbox %s: command %s ended (0x%x)",
	    b->rec.chat, c->id, st);
	code = xd_cmd_exit_code(c, &sig);
	xd_audit_cmd(c, code, sig);
	b->xd->stats.cmds_exited++;
	b->xd->stats.timed_out += c->timed_out != 0;
	b->xd->stats.oom_killed += c->oom_killed != 0;
	b->xd->stats.cancelled += c->cancelled || c->stopped;
	{
		json_t *res = xd_cmd_result(c, 0);

		if (res != NULL) {
			json_object_set_new(res, "sandbox", json_string(
			    XD_REC_ID(&b->rec)));
			json_object_set_new(res, "tenant", json_string(
			    b->rec.tenant));
			json_object_set_new(res, "background", json_boolean(
			    c->background));
			/* the result's lists are not the event's business */
			json_object_del(res, "changed");
			json_object_del(res, "artifacts");
			json_object_del(res, "artifacts_skipped");
		}
		xd_event(b->xd, "command", "exited", b->rec.tenant, res);
	}
	/* the answer first: the clean-up below forks a worker and writes
	 * the record, which the caller need not wait for */
	proc = c->proc;
	b->refs++;
	if (!c->background && c->sink != NULL && c->sink->exit != NULL)
		c->sink->exit(c->sink_arg, c);          /* may free c */
	else if (!c->background)
		xd_cmd_free(c);         /* nobody waits for it */
	else {
		/* keep the newest finished ones */
		struct xd_cmd *x, *tmp;
		long done = 0;

		/* a terminal's client is told and let go first (it does
		 * not free c) */
		if (c->sink != NULL && c->sink->exit != NULL)
			c->sink->exit(c->sink_arg, c);

		TAILQ_FOREACH(x, &b->cmds, link)
			if (!x->running)
				done++;
		TAILQ_FOREACH_SAFE(x, &b->cmds, link, tmp) {
			if (done <= b->xd->cfg->keep_finished)
				break;
			if (!x->running) {
				xd_cmd_free(x);
				done--;
			}
		}
		/* its ring may go now, as may older ones */
		xd_cmd_ring_budget(b->xd);
	}
	/* ns's release is an rmdir and an unlink, which do not block for
	 * long: not worth a worker's fork per command (gvisor's may run
	 * runsc), but not worth the answer's wait either (release_late).
	 * Only for its agent's commands ("a..."), whose group is empty
	 * once the main process is reaped; the setns path's drainer may
	 * still be leaving it, which the worker's fork gives time.
	 * gvisor's agent commands ("a...") release nothing on the host
	 * (the agent removed the group as the command exited): at once */
	if (strcmp(b->be->name, "ns") == 0 && proc.tag[0] == 'a')
		release_late(b, &proc);
	else if (strcmp(b->be->name, "gvisor") == 0 && proc.tag[0] == 'a')
		b->be->release(&b->rec, &proc);
	else
		proc_job(b, &proc, 0);
	/* only last_used changed: written as xd_box_use writes it, at most
	 * every so often (a restart's idle clock may be that much early),
	 * not a record rewrite per command */
	xd_box_used(b, (int64_t)time(NULL));
	xd_box_unref(b);
}

static void
on_exit_ev(evutil_socket_t fd, short what, void *arg)
{
	struct xd_cmd *c = arg;
	int st = 0;
	pid_t w;

	(void)fd;
	(void)what;
	if (c->proc.pid == 0) {
		/* no process of ours: the backend's connection says */
		if (c->box->be->reap(&c->proc, &st) != 0)
			return;
		cmd_finish(c, st);
		return;
	}
	w = waitpid(c->proc.pid, &st, WNOHANG);
	if (w == 0)
		return;         /* polled (no pidfd), still running */
	if (w < 0)
		st = 125 << 8;  /* reaped elsewhere: an error to report */
	cmd_finish(c, st);
}

static void
on_backstop(evutil_socket_t fd, short what, void *arg)
{
	struct xd_cmd *c = arg;

	(void)fd;
	(void)what;
	if (c->proc.pid == 0) {
		/* no process of ours to kill: no longer waited for */
		xd_log(XD_LOG_WARN, "sandbox %s: command %s outlived its kill "
		    "by %d s: taken for killed", c->box->rec.chat, c->id,
		    BACKSTOP_S);
		cmd_finish(c, SIGKILL);
		return;
	}
	/* kill_tree did not end it (a stuck runsc): the host process */
	xd_log(XD_LOG_WARN, "sandbox %s: command %s outlived its kill by %d "
	    "s: killing process %d", c->box->rec.chat, c->id, BACKSTOP_S,
	    (int)c->proc.pid);
	kill(c->proc.pid, SIGKILL);
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct xd_cmd *c = arg;

	(void)fd;
	(void)what;
	c->timed_out = 1;
	xd_cmd_kill(c, "timeout");
}

void
xd_cmd_kill(struct xd_cmd *c, const char *why)
{
	struct timeval tv = { BACKSTOP_S, 0 };

	if (!c->running)
		return;
	if (strcmp(why, "cancel") == 0)
		c->cancelled = 1;
	else if (strcmp(why, "stop") == 0)
		c->stopped = 1;
	if (c->kill_sent)
		return;
	c->kill_sent = 1;
	xd_log(XD_LOG_DEBUG, "sandbox %s: command %s: kill (%s)",
	    c->box->rec.chat, c->id, why);
	proc_job(c->box, &c->proc, 1);
	if ((c->ev_backstop = evtimer_new(c->box->xd->base, on_backstop, c)) !=
	    NULL)
		evtimer_add(c->ev_backstop, &tv);
}

void
xd_cmd_pause(struct xd_cmd *c, int pause)
{
	int i;

	if (c->paused == pause)
		return;
	c->paused = pause;
	for (i = 0; i < 2; i++)
		if (c->out[i].ev != NULL) {
			if (pause)
				event_del(c->out[i].ev);
			else
				event_add(c->out[i].ev, NULL);
		}
}

void
xd_cmd_detach(struct xd_cmd *c)
{
	c->sink = NULL;
	c->sink_arg = NULL;
	/* nobody reads: never wait for a reader that will not come */
	xd_cmd_pause(c, 0);
}

/* ---- start ---- */


/* Let go of c's output buffers; a ring's bytes leave the host's
 * count (ring_budget_bytes). */
static void
out_release(struct xd *xd, struct xd_cmd *c)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (c->out[i].buf != NULL && c->mode == XD_OUT_RING)
			xd->ring_held -= c->out[i].cap;
		free(c->out[i].buf);
		c->out[i].buf = NULL;
	}
}

void
xd_cmd_ring_budget(struct xd *xd)
{
	uint64_t budget = xd->cfg->ring_budget;
	struct xd_cmd *c, *old;
	struct xd_box *b;
	int i;

	while (budget > 0 && xd->ring_held > budget) {
		/* the finished command that ended first: its output is the
		 * one least likely still wanted */
		old = NULL;
		TAILQ_FOREACH(b, &xd->boxes, link)
			TAILQ_FOREACH(c, &b->cmds, link)
				if (!c->running && c->mode == XD_OUT_RING &&
				    c->out[0].buf != NULL && (old == NULL ||
				    c->ended_ms < old->ended_ms))
					old = c;
		if (old == NULL)
			return;         /* running ones only: they stay */
		for (i = 0; i < 2; i++) {
			xd->stats.ring_dropped_bytes += old->out[i].len;
			old->out[i].len = 0;
		}
		out_release(xd, old);
		old->out_dropped = 1;
		xd->stats.ring_dropped++;
		xd_log(XD_LOG_DEBUG, "sandbox %s: command %s: output dropped "
		    "(ring_budget_bytes)", old->box->rec.chat, old->id);
	}
}

/* A terminal for spec: *pm its master (close-on-exec, the daemon's),
 * pi[0] (the command's stdin) its slave in place of the stdin pipe's
 * read end.  The slave is opened O_NOCTTY: the command's wrapper makes
 * it its controlling terminal inside the sandbox (setsid -c). */
static int
pty_open(const struct xd_cmd_spec *spec, int *pm, int pi[2],
    struct xd_perr *e)
{
	struct winsize ws;
	char name[64];
	int m, s;

	if ((m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, name,
	    sizeof(name)) != 0 || (s = open(name, O_RDWR | O_NOCTTY |
	    O_CLOEXEC)) < 0) {
		xd_perr_set(e, 500, "internal", "a terminal: %s",
		    strerror(errno));
		if (m >= 0)
			close(m);
		return -1;
	}
	memset(&ws, 0, sizeof(ws));
	ws.ws_col = spec->cols ? spec->cols : 80;
	ws.ws_row = spec->rows ? spec->rows : 24;
	(void)ioctl(m, TIOCSWINSZ, &ws);
	close(pi[0]);
	pi[0] = s;
	*pm = m;
	return 0;
}

/* May b start a command now?  Its state, a foreground one already
 * running, the background, host and tenant quotas, its holder alive.
 * 0, or -1 with e. */
static int
cmd_admit(struct xd_box *b, int background, struct xd_perr *e)
{
	struct xd *xd = b->xd;
	struct xd_cmd *x;
	long nbg = 0;

	if (b->state != XD_BOX_RUNNING || b->op) {
		xd_perr_set(e, 409, "conflict", "the sandbox is being "
		    "created, changed or deleted");
		return -1;
	}
	if (!background && b->fg != NULL) {
		xd_perr_set(e, 429, "busy", "a foreground command runs in "
		    "this sandbox: %s", b->fg->id);
		return -1;
	}
	TAILQ_FOREACH(x, &b->cmds, link)
		if (x->running)
			nbg++;
	if (background && nbg >= xd->cfg->max_background) {
		xd_perr_set(e, 429, "quota_exceeded", "background commands "
		    "of this sandbox");
		e->extra = json_pack("{s:s,s:I,s:I}", "scope", "sandbox",
		    "limit", (json_int_t)xd->cfg->max_background, "in_use",
		    (json_int_t)nbg);
		return -1;
	}
	{
		/* running commands, foreground and background, on the host
		 * and of this sandbox's tenant */
		struct xd_box *o;
		long all = 0, ten = 0, n;

		TAILQ_FOREACH(o, &xd->boxes, link) {
			n = o->fg != NULL && o->fg->running;
			TAILQ_FOREACH(x, &o->cmds, link)
				n += x->running;
			all += n;
			if (b->rec.tenant[0] && strcmp(o->rec.tenant,
			    b->rec.tenant) == 0)
				ten += n;
		}
		if (xd->cfg->max_cmds && all >= xd->cfg->max_cmds) {
			xd_perr_set(e, 429, "quota_exceeded", "running "
			    "commands on this host");
			e->extra = json_pack("{s:s,s:s,s:I,s:I}", "scope",
			    "global", "resource", "commands", "limit",
			    (json_int_t)xd->cfg->max_cmds, "in_use",
			    (json_int_t)all);
			return -1;
		}
		if (b->rec.tenant[0] && xd->cfg->max_cmds_tenant &&
		    ten >= xd->cfg->max_cmds_tenant) {
			xd_perr_set(e, 429, "quota_exceeded", "running "
			    "commands of this tenant");
			e->extra = json_pack("{s:s,s:s,s:s,s:I,s:I}", "scope",
			    "tenant", "resource", "commands", "tenant",
			    b->rec.tenant, "limit",
			    (json_int_t)xd->cfg->max_cmds_tenant, "in_use",
			    (json_int_t)ten);
			return -1;
		}
	}
	if (!b->be->alive(&b->rec)) {
		xd_perr_set(e, 503, "backend_unavailable", "the sandbox is "
		    "gone (its holder died); delete it and create it again");
		return -1;
	}
	return 0;
}

/* c started, its stdout and stderr read from out_fd and err_fd, its
 * stdin written to in_fd (all now c's): its output, its input, its
 * exit and its deadline watched from the loop. */
static void
cmd_watch(struct xd *xd, struct xd_cmd *c, const struct xd_cmd_spec *spec,
    int out_fd, int err_fd, int in_fd)
{
	int i;

	c->running = 1;
	c->started_ms = now_unix_ms();
	c->start_mono_ms = c->proc.start_ms ? c->proc.start_ms : sbx_now_ms();
	c->out[0].fd = out_fd;
	c->out[1].fd = err_fd;
	for (i = 0; i < 2; i++) {
		evutil_make_socket_nonblocking(c->out[i].fd);
		c->out[i].ev = event_new(xd->base, c->out[i].fd, EV_READ |
		    EV_PERSIST, on_out, c);
		if (c->out[i].ev != NULL)
			event_add(c->out[i].ev, NULL);
	}
	/* stdin: what the caller gave, then EOF */
	c->in_fd = in_fd;
	if (c->pty_fd >= 0 && c->in_fd >= 0 && (c->in = evbuffer_new()) !=
	    NULL) {
		evutil_make_socket_nonblocking(c->in_fd);
		c->ev_in = event_new(xd->base, c->in_fd, EV_WRITE | EV_PERSIST,
		    on_in, c);
	} else if (spec->stdin_len > 0 && (c->in = evbuffer_new()) != NULL) {
		evutil_make_socket_nonblocking(c->in_fd);
		evbuffer_add(c->in, spec->stdin_data, spec->stdin_len);
		c->ev_in = event_new(xd->base, c->in_fd, EV_WRITE | EV_PERSIST,
		    on_in, c);
		if (c->ev_in != NULL)
			event_add(c->ev_in, NULL);
	} else
		in_close(c);
	/* the exit: the backend's connection (no process of ours), a pidfd
	 * where the kernel has them (5.3), else a poll */
	if (c->proc.pid == 0) {
		c->ev_exit = event_new(xd->base, c->proc.fd, EV_READ |
		    EV_PERSIST, on_exit_ev, c);
		if (c->ev_exit != NULL)
			event_add(c->ev_exit, NULL);
	} else if ((c->pidfd = (int)syscall(SYS_pidfd_open, c->proc.pid,
	    0)) >= 0) {
		c->ev_exit = event_new(xd->base, c->pidfd, EV_READ | EV_PERSIST,
		    on_exit_ev, c);
		if (c->ev_exit != NULL)
			event_add(c->ev_exit, NULL);
	} else {
		struct timeval tv = { 0, 20000 };

		c->ev_exit = event_new(xd->base, -1, EV_PERSIST, on_exit_ev, c);
		if (c->ev_exit != NULL)
			event_add(c->ev_exit, &tv);
	}
	if (c->timeout_s > 0) {
		struct timeval tv = { c->timeout_s, 0 };

		if ((c->ev_deadline = evtimer_new(xd->base, on_deadline, c)) !=
		    NULL)
			evtimer_add(c->ev_deadline, &tv);
	}
	if (c->ev_exit == NULL || (c->timeout_s > 0 && c->ev_deadline ==
	    NULL)) {
		/* no way to watch it: it must not run unwatched */
		xd_log(XD_LOG_ERR, "sandbox %s: cannot watch command %s",
		    c->box->rec.chat, c->id);
		xd_cmd_kill(c, "cancel");
	}
}

/* The log line, the counter and the event of a command started. */
static void
cmd_started(struct xd *xd, struct xd_box *b, const struct xd_cmd *c,
    int background)
{
	/* the group says how the backend started it (gvisor: "a..." by
	 * its in-sandbox agent, "c..." by a runsc exec) */
	xd_log(XD_LOG_DEBUG, "sandbox %s: command %s started (pid %d, "
	    "group %s)", b->rec.chat, c->id, (int)c->proc.pid, c->proc.tag);
	xd->stats.cmds_started++;
	{
		char prog[256], hex[65];

		xd_event_argv(c->argv, prog, sizeof(prog), hex);
		xd_event(xd, "command", "started", b->rec.tenant, json_pack(
		    "{s:s,s:s,s:s,s:b,s:s,s:s}", "sandbox", XD_REC_ID(&b->rec),
		    "tenant", b->rec.tenant, "id", c->id, "background",
		    background, "program", prog, "argv_sha256", hex));
	}
}

struct xd_cmd *
xd_cmd_start(struct xd_box *b, const struct xd_cmd_spec *spec,
    int background, enum xd_out_mode mode, const struct xd_sink *sink,
    void *sink_arg, struct xd_perr *e)
{
	struct xd *xd = b->xd;
	struct xd_cmd *c = NULL;
	struct sbx_cmd sc;
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 }, pi[2] = { -1, -1 }, i;
	int pm = -1, pd[2] = { -1, -1 };
	char err[XD_ERR_MAX], **env = NULL, *pwd = NULL;
	json_t *benv = NULL;

	if (cmd_admit(b, background, e) != 0)
		return NULL;
	benv = box_env(b);
	if ((c = calloc(1, sizeof(*c))) == NULL || (env = env_build(spec, benv,
	    &pwd)) == NULL)
		goto oom;
	c->box = b;
	c->background = background;
	c->mode = mode;
	c->pidfd = c->in_fd = c->pty_fd = -1;
	c->out[0].fd = c->out[1].fd = -1;
	c->timeout_s = spec->timeout_s;
	c->cap = spec->output_cap;
	c->cap_total = spec->has_cap_total ? spec->cap_total : -1;
	c->base64 = spec->base64;
	c->sink = sink;
	c->sink_arg = sink_arg;
	snprintf(c->id, sizeof(c->id), "c%lu", ++b->cmd_seq);
	snprintf(c->cwd, sizeof(c->cwd), "%s", spec->cwd);
	for (i = 0; i < 2; i++) {
		c->out[i].cap = mode == XD_OUT_RING ? xd->cfg->ring_bytes :
		    (size_t)spec->output_cap;
		if (mode != XD_OUT_STREAM && (c->out[i].buf = malloc(
		    c->out[i].cap + 1)) == NULL)
			goto oom;
		if (mode == XD_OUT_RING)
			xd->ring_held += c->out[i].cap;
	}
	if ((c->argv = json_array()) == NULL)
		goto oom;
	for (i = 0; spec->argv[i] != NULL; i++)
		json_array_append_new(c->argv, xd_text_json((const unsigned
		    char *)spec->argv[i], strlen(spec->argv[i]), 0));
	if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0 ||
	    pipe2(pi, O_CLOEXEC) != 0) {
		xd_perr_set(e, 500, "internal", "pipe: %s", strerror(errno));
		goto fail;
	}
	if (spec->pty && pty_open(spec, &pm, pi, e) != 0)
		goto fail;
	/* the terminal's master read and written as the output and the
	 * input: its two copies made before the command starts, so that
	 * wanting a descriptor refuses the command rather than leaving
	 * one running unwatched */
	if (pm >= 0 && ((pd[0] = fcntl(pm, F_DUPFD_CLOEXEC, 0)) < 0 ||
	    (pd[1] = fcntl(pm, F_DUPFD_CLOEXEC, 0)) < 0)) {
		xd_perr_set(e, 500, "internal", "a terminal: %s",
		    strerror(errno));
		goto fail;
	}
	memset(&sc, 0, sizeof(sc));
	sc.argv = spec->argv;
	sc.envp = env;
	sc.fd_in = pi[0];
	sc.fd_out = po[1];
	sc.fd_err = pe[1];
	sc.cwd = spec->cwd;
	sc.tty = spec->pty;
	c->oom_known = b->be->oom_kills != NULL &&
	    b->be->oom_kills(&b->rec, &c->oom_before) == 0;
	xd_broker_socket_own(&b->rec);
	/* the workspace before: what the command changes is the
	 * difference at its end (a walk of up to snap_entries entries, not
	 * made for a caller that said "changed": false) */
	if (!spec->no_changes && (c->snap = xd_snap_take(b->rec.workspace,
	    (size_t)xd->cfg->snap_entries)) == NULL)
		goto oom;
	if (b->be->spawn(&b->rec, &sc, &c->proc, err, sizeof(err)) != 0) {
		xd_perr_set(e, 503, "backend_unavailable", "cannot start the "
		    "command: %.400s", err);
		goto fail;
	}
	close(po[1]);
	close(pe[1]);
	close(pi[0]);
	po[1] = pe[1] = pi[0] = -1;
	if (pm >= 0) {
		/* the terminal: its master is the output and the input; the
		 * stdout pipe goes (the command writes to the pty; its
		 * wrapper's own complaints go to stderr's pipe) */
		close(po[0]);
		close(pi[1]);
		po[0] = pd[0];
		pi[1] = pd[1];
		pd[0] = pd[1] = -1;
		c->pty_fd = pm;
		pm = -1;
		c->is_pty = 1;
	}
	cmd_watch(xd, c, spec, po[0], pe[0], pi[1]);
	po[0] = pe[0] = pi[1] = -1;
	b->refs++;
	if (background)
		TAILQ_INSERT_TAIL(&b->cmds, c, link);
	else
		b->fg = c;
	b->rec.last_used = (int64_t)time(NULL);
	free(pwd);
	free(env);
	json_decref(benv);
	cmd_started(xd, b, c, background);
	if (mode == XD_OUT_RING)
		xd_cmd_ring_budget(xd);
	return c;
oom:
	xd_perr_set(e, 500, "internal", "out of memory");
fail:
	if (pm >= 0)
		close(pm);
	for (i = 0; i < 2; i++) {
		if (pd[i] >= 0)
			close(pd[i]);
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
		if (pi[i] >= 0)
			close(pi[i]);
	}
	free(pwd);
	free(env);
	json_decref(benv);
	if (c != NULL) {
		json_decref(c->argv);
		xd_snap_free(c->snap);
		out_release(xd, c);
		free(c);
	}
	return NULL;
}

struct xd_cmd *
xd_cmd_find(struct xd_box *b, const char *id)
{
	struct xd_cmd *c;

	if (b->fg != NULL && strcmp(b->fg->id, id) == 0)
		return b->fg;
	TAILQ_FOREACH(c, &b->cmds, link)
		if (strcmp(c->id, id) == 0)
			return c;
	return NULL;
}

void
xd_cmd_free(struct xd_cmd *c)
{
	struct xd_box *b = c->box;

	if (c->running)
		return;         /* still watched: cmd_finish comes */
	if (c->sink != NULL && c->sink->gone != NULL)
		c->sink->gone(c->sink_arg, c);
	if (c->background)
		TAILQ_REMOVE(&b->cmds, c, link);
	json_decref(c->argv);
	json_decref(c->changes);
	xd_snap_free(c->snap);
	out_release(b->xd, c);
	free(c);
	xd_box_unref(b);
}

void
xd_cmd_forget(struct xd_cmd *c)
{
	int i;

	/* the daemon exits: the command runs on without it */
	for (i = 0; i < 2; i++)
		stream_close(&c->out[i]);
	in_close(c);
	if (c->ev_exit != NULL)
		event_free(c->ev_exit);
	if (c->ev_deadline != NULL)
		event_free(c->ev_deadline);
	if (c->ev_backstop != NULL)
		event_free(c->ev_backstop);
	if (c->pidfd >= 0)
		close(c->pidfd);
	if (c->pty_fd >= 0)
		close(c->pty_fd);
	c->pty_fd = -1;
	c->ev_exit = c->ev_deadline = c->ev_backstop = NULL;
	c->pidfd = -1;
	c->running = 0;
	if (c->box->fg == c)
		c->box->fg = NULL;
	xd_cmd_free(c);
}

/* ---- results ---- */

json_int_t
xd_cmd_exit_code(const struct xd_cmd *c, json_int_t *sig)
{
	int st = c->status;
	json_int_t code, n = -1;

	if (WIFSIGNALED(st)) {
		n = WTERMSIG(st);
		code = 128 + n;
	} else {
		code = WEXITSTATUS(st);
		/* the backends report a signal death as 128+N, as shells
		 * do */
		if (code > 128 && code < 128 + 65)
			n = code - 128;
	}
	if (sig != NULL)
		*sig = n;
	return code;
}

/* The bytes of s the answer shows: a character cut by the cap is not
 * shown as U+FFFD. */
static size_t
kept_len(const struct xd_cmd *c, const struct xd_stream *s)
{
	if (c->mode == XD_OUT_KEEP && !c->base64 && s->dropped > 0)
		return xd_utf8_whole(s->buf, s->len);
	return s->len;
}

static json_t *
kept_json(const struct xd_cmd *c, const struct xd_stream *s)
{
	return xd_text_json(s->buf, kept_len(c, s), c->base64);
}

json_t *
xd_cmd_result(const struct xd_cmd *c, int with_output)
{
	json_int_t code, sig;
	json_t *o;

	code = xd_cmd_exit_code(c, &sig);
	o = json_pack("{s:s,s:I,s:o,s:b,s:b,s:b,s:I,s:b,s:b}",
	    "id", c->id, "exit_code", code,
	    "signal", sig >= 0 ? json_integer(sig) : json_null(),
	    "timed_out", c->timed_out, "oom_killed", c->oom_killed,
	    "cancelled", c->cancelled || c->stopped,
	    "duration_ms", (json_int_t)(c->ended_ms - c->started_ms),
	    "stdout_truncated", c->out[0].dropped > 0,
	    "stderr_truncated", c->out[1].dropped > 0);
	if (o == NULL)
		return NULL;
	if (c->base64)
		json_object_set_new(o, "encoding", json_string("base64"));
	/* asked for output_cap_total: the bytes of both streams not in
	 * the answer */
	if (c->cap_total >= 0 && c->mode != XD_OUT_RING)
		json_object_set_new(o, "output_dropped", json_integer(
		    (json_int_t)(c->out[0].total + c->out[1].total -
		    kept_len(c, &c->out[0]) - kept_len(c, &c->out[1]))));
	if (c->changes != NULL)
		json_object_update(o, c->changes);
	if (with_output && c->mode == XD_OUT_KEEP) {
		json_object_set_new(o, "stdout", kept_json(c, &c->out[0]));
		json_object_set_new(o, "stderr", kept_json(c, &c->out[1]));
	}
	return o;
}

json_t *
xd_cmd_status(const struct xd_cmd *c)
{
	json_t *o = json_pack("{s:s,s:s,s:b,s:O,s:o,s:o,s:I,s:I}",
	    "id", c->id, "status", c->running ? "running" : "exited",
	    "background", c->background, "argv", c->argv,
	    "started", time_json(c->started_ms),
	    "ended", c->running ? json_null() : time_json(c->ended_ms),
	    "stdout_bytes", (json_int_t)c->out[0].total,
	    "stderr_bytes", (json_int_t)c->out[1].total);
	json_int_t code, sig;

	/* what is left of a dropped ring is nothing: said so, not taken
	 * for a command that printed nothing more */
	if (o != NULL && c->mode == XD_OUT_RING)
		json_object_set_new(o, "output_dropped", json_boolean(
		    c->out_dropped));
	if (o == NULL || c->running) {
		if (o != NULL)
			json_object_set_new(o, "exit_code", json_null());
		return o;
	}
	code = xd_cmd_exit_code(c, &sig);
	json_object_set_new(o, "exit_code", json_integer(code));
	json_object_set_new(o, "signal", sig >= 0 ? json_integer(sig) :
	    json_null());
	json_object_set_new(o, "timed_out", json_boolean(c->timed_out));
	json_object_set_new(o, "cancelled", json_boolean(c->cancelled ||
	    c->stopped));
	json_object_set_new(o, "oom_killed", json_boolean(c->oom_killed));
	json_object_set_new(o, "duration_ms", json_integer(c->ended_ms -
	    c->started_ms));
	if (c->changes != NULL)
		json_object_update(o, c->changes);
	return o;
}

int
xd_cmd_ring(const struct xd_cmd *c, int i, uint64_t *off, unsigned char **out,
    size_t *n)
{
	const struct xd_stream *s = &c->out[i];
	uint64_t first = s->total - s->len, from;
	size_t pos, a;

	*out = NULL;
	*n = 0;
	if (c->mode != XD_OUT_RING || s->buf == NULL) {
		*off = s->total;
		return 0;
	}
	from = *off < first ? first : *off > s->total ? s->total : *off;
	*n = (size_t)(s->total - from);
	*off = from;
	if ((*out = malloc(*n + 1)) == NULL)
		return -1;
	pos = (size_t)(from % s->cap);
	a = s->cap - pos < *n ? s->cap - pos : *n;
	memcpy(*out, s->buf + pos, a);
	memcpy(*out + a, s->buf, *n - a);
	return 0;
}

static json_t *
ring_json(const struct xd_cmd *c, int i, uint64_t off, int base64)
{
	const struct xd_stream *s = &c->out[i];
	uint64_t first = s->total - s->len, from, n;
	unsigned char *tmp;
	size_t pos, a;
	json_t *o;

	if (c->mode != XD_OUT_RING || s->buf == NULL)
		return json_pack("{s:I,s:I,s:s}", "offset",
		    (json_int_t)s->total, "next", (json_int_t)s->total, "data",
		    "");
	from = off < first ? first : off > s->total ? s->total : off;
	n = s->total - from;
	if ((tmp = malloc(n + 1)) == NULL)
		return NULL;
	pos = (size_t)(from % s->cap);
	a = s->cap - pos < n ? s->cap - pos : (size_t)n;
	memcpy(tmp, s->buf + pos, a);
	memcpy(tmp + a, s->buf, (size_t)n - a);
	/* text: a character still being written waits for the next read */
	if (!base64 && c->running)
		n = xd_utf8_whole(tmp, (size_t)n);
	o = json_pack("{s:I,s:I,s:o}", "offset", (json_int_t)from, "next",
	    (json_int_t)(from + n), "data", xd_text_json(tmp, (size_t)n,
	    base64));
	free(tmp);
	return o;
}

json_t *
xd_cmd_output(const struct xd_cmd *c, const uint64_t off[2], int base64)
{
	json_t *o = xd_cmd_status(c);

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "stdout", ring_json(c, 0, off[0], base64));
	json_object_set_new(o, "stderr", ring_json(c, 1, off[1], base64));
	if (base64)
		json_object_set_new(o, "encoding", json_string("base64"));
	return o;
}
