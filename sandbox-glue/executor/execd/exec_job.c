/*
 * exec_job.c: forked workers.  A backend call that blocks (create,
 * destroy, kill_tree, release: fork/waitpid, runsc) or a call to sluiced
 * runs in a child of the daemon that writes one JSON object to a pipe
 * and exits; the loop reads the pipe and, at its end, reaps the child
 * and hands the object to the caller.  The child keeps nothing of the
 * daemon's open descriptors but stderr and the pipe, and never returns
 * to the loop.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"

#define JOB_RESULT_MAX	(1 << 20)

static void
job_end(struct xd_job *j)
{
	json_t *res = NULL;
	json_error_t je;
	size_t len;
	int st = 0;

	/* what the worker wrote before it exited is in the pipe */
	while (evbuffer_get_length(j->buf) <= JOB_RESULT_MAX &&
	    evbuffer_read(j->buf, j->fd, 65536) > 0)
		;
	len = evbuffer_get_length(j->buf);
	event_free(j->ev);
	if (j->ev_exit != NULL)
		event_free(j->ev_exit);
	if (j->pidfd >= 0)
		close(j->pidfd);
	close(j->fd);
	while (waitpid(j->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (len > 0)
		res = json_loadb((const char *)evbuffer_pullup(j->buf, -1), len,
		    0, &je);
	if (res == NULL && len > 0)
		/* what it was: a cut or doubled result is not a dead worker */
		xd_log(XD_LOG_ERR, "worker %s (pid %d): its result does not "
		    "read (%zu bytes, status 0x%x): %s at %d: %.*s", j->what,
		    (int)j->pid, len, st, je.text, je.position,
		    (int)(len < 80 ? len : 80),
		    (const char *)evbuffer_pullup(j->buf, -1));
	else if (res == NULL)
		xd_log(XD_LOG_ERR, "worker %s (pid %d) ended without a result "
		    "(status 0x%x)", j->what, (int)j->pid, st);
	TAILQ_REMOVE(&j->xd->jobs, j, link);
	evbuffer_free(j->buf);
	j->done(j->arg, res);
	free(j);
}

static void
job_read(evutil_socket_t fd, short what, void *arg)
{
	struct xd_job *j = arg;
	int n;

	(void)fd;
	(void)what;
	n = evbuffer_read(j->buf, j->fd, 65536);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0 && evbuffer_get_length(j->buf) <= JOB_RESULT_MAX)
		return;
	job_end(j);
}

/* The worker exited: a process it left behind (a sandbox's holder, a
 * logger) may still hold the pipe open, so its exit, not the pipe's
 * end, says the result is complete. */
static void
job_exited(evutil_socket_t fd, short what, void *arg)
{
	struct xd_job *j = arg;
	siginfo_t si;

	(void)fd;
	(void)what;
	/* a wake-up of a worker that has not exited (seen under bursts of
	 * creates and deletes: the answer was then read before it was
	 * written, the worker's write met a closed pipe and its sandbox
	 * was left made, or half deleted, as a failure) is not its end */
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)j->pid, &si, WEXITED | WNOHANG | WNOWAIT) ==
	    0 && si.si_pid == 0) {
		if (j->early++ == 0)
			xd_log(XD_LOG_WARN, "worker %s (pid %d): its pidfd said "
			    "it ended before it did (ignored)", j->what,
			    (int)j->pid);
		return;
	}
	job_end(j);
}

int
xd_job_run(struct xd *xd, const char *what, xd_job_fn fn, void *fnarg,
    xd_job_done done, void *donearg, char *err, size_t errlen)
{
	struct xd_job *j = calloc(1, sizeof(*j));
	int p[2] = { -1, -1 };
	pid_t pid;

	if (j == NULL || pipe2(p, O_CLOEXEC) != 0 ||
	    (j->buf = evbuffer_new()) == NULL) {
		snprintf(err, errlen, "worker: %s", strerror(errno));
		goto fail;
	}
	if ((pid = fork()) < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		json_t *res;
		char *s;
		size_t len, off = 0;
		ssize_t w;
		struct sigaction sa;

		/* the daemon's signal plumbing is not ours: default, but
		 * a peer that went away is an error, not our death */
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGCHLD, &sa, NULL);
		sa.sa_handler = SIG_IGN;
		sigaction(SIGPIPE, &sa, NULL);
		close(p[0]);
		if (p[1] != 3) {
			if (dup2(p[1], 3) < 0)
				_exit(1);
			close(p[1]);
		}
		/* what the backends exec (runsc, its helpers) gets no copy */
		(void)fcntl(3, F_SETFD, FD_CLOEXEC);
		/* listeners, clients, other workers' pipes, the loop */
		closefrom(4);
		res = fn(fnarg);
		s = res != NULL ? json_dumps(res, JSON_COMPACT) : NULL;
		len = s != NULL ? strlen(s) : 0;
		/* the daemon says only that nothing came: say why here */
		if (s == NULL)
			xd_log(XD_LOG_ERR, "worker %s (pid %d): %s", what,
			    (int)getpid(), res == NULL ? "its body returned "
			    "no result" : "its result does not encode");
		while (off < len) {
			w = write(3, s + off, len - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				xd_log(XD_LOG_ERR, "worker %s (pid %d): its "
				    "result not sent (%zu of %zu bytes): %s",
				    what, (int)getpid(), off, len, w < 0 ?
				    strerror(errno) : "no progress");
				break;
			}
			off += (size_t)w;
		}
		_exit(0);
	}
	close(p[1]);
	p[1] = -1;
	evutil_make_socket_nonblocking(p[0]);
	j->xd = xd;
	j->pid = pid;
	j->fd = p[0];
	j->done = done;
	j->arg = donearg;
	snprintf(j->what, sizeof(j->what), "%s", what);
	j->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (j->pidfd >= 0 && ((j->ev_exit = event_new(xd->base, j->pidfd,
	    EV_READ, job_exited, j)) == NULL || event_add(j->ev_exit, NULL) !=
	    0)) {
		/* the pipe's end alone says it then */
		if (j->ev_exit != NULL)
			event_free(j->ev_exit);
		j->ev_exit = NULL;
		close(j->pidfd);
		j->pidfd = -1;
	}
	if ((j->ev = event_new(xd->base, p[0], EV_READ | EV_PERSIST, job_read,
	    j)) == NULL || event_add(j->ev, NULL) != 0) {
		/* cannot watch it: wait for it here (rare, and bounded
		 * by the worker's own bounds) */
		snprintf(err, errlen, "worker: cannot watch");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (j->ev != NULL)
			event_free(j->ev);
		if (j->ev_exit != NULL)
			event_free(j->ev_exit);
		if (j->pidfd >= 0)
			close(j->pidfd);
		goto fail;
	}
	TAILQ_INSERT_TAIL(&xd->jobs, j, link);
	xd_log(XD_LOG_DEBUG, "worker %s started (pid %d)", what, (int)pid);
	return 0;
fail:
	util_close_pair(p);
	if (j != NULL && j->buf != NULL)
		evbuffer_free(j->buf);
	free(j);
	return -1;
}

void
xd_job_wait_all(struct xd *xd, int timeout_ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!TAILQ_EMPTY(&xd->jobs)) {
		event_base_loop(xd->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) /
		    1000000 > timeout_ms)
			break;
		usleep(5000);
	}
}
