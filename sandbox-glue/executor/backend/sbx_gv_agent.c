/*
 * sbx_gv_agent.c: the host side of the gVisor backend's agent
 * (sandbox-glue/agent/agent.h, agent_wire.h): a command is one
 * connection to <dir>/agent/agent.sock, which runsc's --host-uds=create
 * made a host socket when the agent bound it inside.
 *
 * spawn() is called in the daemon and returns a child of the caller
 * whose exit status is the command's: once the agent says STARTED, a
 * forked relay keeps the connection and passes stdin to it, STDOUT and
 * STDERR frames to the command's fds (write(2): a regular file keeps its
 * offset and O_APPEND, which "runsc exec" did not), the signals it gets
 * (TERM, INT, HUP, QUIT, USR1, USR2) on as SIGNAL frames, and exits with
 * the command's status (128 + N for a signal, as "runsc exec").
 *
 * A terminal (cmd->tty): PTY before SPAWN asks the agent for a terminal
 * inside of the caller's size; the caller's slave (fd_in) is set raw, so
 * that the line discipline is the inside one's alone, and the relay
 * writes the inside output to it.  sbx_gv_agent_resize and
 * sbx_gv_agent_tty_signal reach the relay with a queued real-time signal
 * (SIGRTMIN: the size in its value; SIGRTMIN+1: the signal), which it
 * passes on as RESIZE and SIGNAL frames.
 *
 * The port proxy (sbx_gv_agent_port_connect): one connection, CONNECT
 * sent and not waited for (the caller's loop reads CONNECTED through
 * sbx_gv_agent_port_reply); after it the connection is the TCP
 * connection's bytes.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <termios.h>
#include <sys/un.h>
#include <unistd.h>

#include "sandbox-glue/agent/agent_wire.h"
#include "sandbox-glue/executor/backend/sbx-int.h"

#define GA_REPLY_MS	10000	/* STARTED, or KILL's and RELEASE's EXIT */
#define GA_KILL_MS	15000	/* the agent kills for up to 5 s */

/* A connection to the sandbox's agent, -1 when it is not there.  Through
 * /proc/self/fd: the state directory's path may not fit sun_path. */
static int
ga_connect_x(const struct sbx_rec *rec, int flags)
{
	struct sockaddr_un sa;
	char dir[SBX_PATH_MAX + 16];
	int dfd, fd = -1;

	snprintf(dir, sizeof(dir), "%s/agent", rec->dir);
	if ((dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/" AG_SOCK,
	    dfd);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0)) >=
	    0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		fd = -1;
	}
	close(dfd);
	return fd;
}

static int
ga_connect(const struct sbx_rec *rec)
{
	return ga_connect_x(rec, 0);
}

/* One frame within ms; 0, or -1 (timeout, EOF, a bad frame). */
static int
ga_read(int fd, int ms, int *type, void *buf, size_t cap, size_t *n)
{
	struct pollfd pf = { fd, POLLIN, 0 };
	int r;

	while ((r = poll(&pf, 1, ms)) < 0 && errno == EINTR)
		;
	if (r <= 0)
		return -1;
	return ag_read_frame(fd, type, buf, cap, n);
}

int
sbx_gv_agent_call(const struct sbx_rec *rec, int type, const char *tag,
    char *err, size_t errlen)
{
	unsigned char buf[AG_ERR_MAX + 1];
	size_t n;
	int fd, t, rc = 1;

	if ((fd = ga_connect(rec)) < 0)
		return 1;
	if (ag_write_frame(fd, type, tag, strlen(tag)) != 0 ||
	    ga_read(fd, type == AG_KILL ? GA_KILL_MS : GA_REPLY_MS, &t, buf,
	    sizeof(buf) - 1, &n) != 0)
		goto out;
	if (t == AG_EXIT && ag_exit_parse(buf, n) == 0)
		rc = 0;
	else {
		buf[t == AG_ERROR ? n : 0] = '\0';
		rc = sbx_err(err, errlen, "agent: %s", t == AG_ERROR ?
		    (char *)buf : "not done");
	}
out:
	close(fd);
	return rc;
}

/* ---- the relay, a child of the caller ---- */

static volatile sig_atomic_t ga_sigs[65];
/* a terminal's: the size to tell (rows << 16 | cols), 0 none */
static volatile sig_atomic_t ga_ws;

static void
ga_on_signal(int sig)
{
	if (sig > 0 && sig < 65)
		ga_sigs[sig] = 1;
}

/* SIGRTMIN (a size) and SIGRTMIN+1 (a signal) from resize and
 * tty_signal: the value says which size or signal. */
static void
ga_on_tty(int sig, siginfo_t *si, void *uc)
{
	int v = si->si_value.sival_int;

	(void)uc;
	if (sig == SIGRTMIN && v > 0)
		ga_ws = v;
	else if (sig == SIGRTMIN + 1 && v > 0 && v < 65)
		ga_sigs[v] = 1;
}

static void
ga_say(const char *s)
{
	(void)!write(2, s, strlen(s));
}

/* fd 0 the command's stdin, 1 and 2 its stdout and stderr, 3 the
 * connection; tty: a terminal's (fd 1 its slave too).  Never returns. */
static void
ga_relay(int tty)
{
	static const int fwd[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
	    SIGUSR2 };
	static unsigned char ob[AG_HDR + AG_DATA_MAX], ib[AG_HDR + AG_DATA_MAX];
	size_t olen = 0, ooff = 0, ilen = 0, i;
	struct sigaction sa;
	sigset_t block, none;
	int in_open = 1;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ga_on_signal;
	sigemptyset(&block);
	for (i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++) {
		sigaction(fwd[i], &sa, NULL);
		sigaddset(&block, fwd[i]);
	}
	if (tty) {
		sa.sa_handler = NULL;
		sa.sa_sigaction = ga_on_tty;
		sa.sa_flags = SA_SIGINFO;
		sigaction(SIGRTMIN, &sa, NULL);
		sigaction(SIGRTMIN + 1, &sa, NULL);
		sigaddset(&block, SIGRTMIN);
		sigaddset(&block, SIGRTMIN + 1);
		sa.sa_sigaction = NULL;
		sa.sa_flags = 0;
	}
	sigprocmask(SIG_BLOCK, &block, NULL);
	sigemptyset(&none);
	/* the agent closes its end once it has sent the exit: a stdin
	 * frame (the EOF execd sends when the command's input closes) may
	 * meet that close, and SIGPIPE would end this relay before it read
	 * the output and the exit still queued on the socket */
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	(void)fcntl(3, F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd pf[2];
		int np = 1, t;
		uint32_t len;
		ssize_t k;

		/* signals first, each once, when nothing else is queued */
		for (i = 1; i < 65 && olen == 0; i++)
			if (ga_sigs[i]) {
				ga_sigs[i] = 0;
				ag_hdr_put(ob, AG_SIGNAL, 1);
				ob[AG_HDR] = (unsigned char)i;
				olen = AG_HDR + 1;
				ooff = 0;
			}
		if (olen == 0 && ga_ws != 0) {
			int v = ga_ws;

			ga_ws = 0;
			ag_hdr_put(ob, AG_RESIZE, 4);
			ag_winsize_put(ob + AG_HDR, (unsigned)v >> 16,
			    (unsigned)v & 0xffff);
			olen = AG_HDR + 4;
			ooff = 0;
		}
		if (olen == 0 && in_open) {
			/* the next stdin frame, when the last one is gone */
			struct pollfd q = { 0, POLLIN, 0 };

			if (poll(&q, 1, 0) > 0) {
				k = read(0, ob + AG_HDR, AG_DATA_MAX);
				if (k < 0 && errno != EINTR && errno != EAGAIN)
					k = 0;
				if (k >= 0) {
					ag_hdr_put(ob, AG_STDIN, (uint32_t)k);
					olen = AG_HDR + (size_t)k;
					ooff = 0;
					in_open = k > 0;
				}
			}
		}
		pf[0].fd = 3;
		pf[0].events = POLLIN | (olen ? POLLOUT : 0);
		if (olen == 0 && in_open) {
			pf[1].fd = 0;
			pf[1].events = POLLIN;
			np = 2;
		}
		if (ppoll(pf, (nfds_t)np, NULL, &none) < 0) {
			if (errno != EINTR)
				_exit(125);
			continue;	/* a signal to pass on; no revents */
		}
		if (olen && (pf[0].revents & POLLOUT)) {
			k = write(3, ob + ooff, olen - ooff);
			if (k > 0 && (ooff += (size_t)k) == olen)
				olen = ooff = 0;
			else if (k < 0 && errno != EINTR && errno != EAGAIN) {
				/* the agent takes no more (it has told the
				 * exit): what it sent is still to be read */
				olen = ooff = 0;
				in_open = 0;
				for (i = 0; i < 65; i++)
					ga_sigs[i] = 0;
				ga_ws = 0;
			}
		}
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		k = read(3, ib + ilen, sizeof(ib) - ilen);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0) {
			ga_say("sluice: the sandbox's agent went away\n");
			_exit(125);
		}
		ilen += (size_t)k;
		while (ilen >= AG_HDR) {
			if (ag_hdr_get(ib, &t, &len) != 0 || (t != AG_STDOUT &&
			    t != AG_STDERR && t != AG_EXIT)) {
				ga_say("sluice: the sandbox's agent: protocol "
				    "error\n");
				_exit(125);
			}
			if (ilen < AG_HDR + len)
				break;
			if (t == AG_EXIT) {
				int st = ag_exit_parse(ib + AG_HDR, len);

				_exit(st < 0 ? 125 : st);
			}
			{
				const unsigned char *p = ib + AG_HDR;
				size_t left = len;

				while (left > 0) {
					k = write(t == AG_STDOUT ? 1 : 2, p,
					    left);
					if (k < 0 && errno == EINTR)
						continue;
					if (k <= 0)
						break;	/* nobody reads: drop */
					p += k;
					left -= (size_t)k;
				}
			}
			memmove(ib, ib + AG_HDR + len, ilen - AG_HDR - len);
			ilen -= AG_HDR + len;
		}
	}
}

/* A terminal's start: fd_in (the caller's slave) raw, and PTY of its
 * size sent.  0, or -1 and why. */
static int
ga_tty_start(int fd, int slave, char *err, size_t errlen)
{
	unsigned char b[4];
	struct winsize ws;
	struct termios t;

	memset(&ws, 0, sizeof(ws));
	if (ioctl(slave, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 ||
	    ws.ws_col == 0) {
		ws.ws_row = 24;
		ws.ws_col = 80;
	}
	if (tcgetattr(slave, &t) != 0)
		return sbx_err(err, errlen, "a terminal: %s", strerror(errno));
	cfmakeraw(&t);
	if (tcsetattr(slave, TCSANOW, &t) != 0)
		return sbx_err(err, errlen, "a terminal: %s", strerror(errno));
	ag_winsize_put(b, ws.ws_row, ws.ws_col);
	if (ag_write_frame(fd, AG_PTY, b, 4) != 0)
		return sbx_err(err, errlen, "the sandbox's agent: %s",
		    strerror(errno));
	return 0;
}

int
sbx_gv_agent_spawn(const struct sbx_rec *rec, const struct sbx_cmd *cmd,
    struct sbx_proc *out, char *err, size_t errlen)
{
	unsigned char buf[AG_ERR_MAX + 1];
	char *req = NULL;
	sigset_t rt, old;
	size_t n;
	int fd, t, rc = 1;
	pid_t pid;

	if ((fd = ga_connect(rec)) < 0)
		return cmd->tty ? sbx_err(err, errlen, "a terminal needs the "
		    "sandbox's agent, which is not there") : 1;
	req = ag_spawn_build(out->tag, cmd->cwd != NULL ? cmd->cwd :
	    SBX_WORKDIR, rec->lim.fsize_bytes, rec->lim.nofile, rec->lim.nproc,
	    cmd->argv, cmd->envp, &n);
	if (req == NULL) {
		rc = sbx_err(err, errlen, "the command and its environment "
		    "are too large (%u bytes at most)", AG_SPAWN_MAX);
		goto out;
	}
	out->start_ms = sbx_now_ms();
	if (cmd->tty && ga_tty_start(fd, cmd->fd_in, err, errlen) != 0) {
		rc = -1;
		goto out;
	}
	/* no answer (an agent that is going away): the command did not
	 * start, or it is killed as the connection ends; runsc exec then
	 * (a terminal has none) */
	if (ag_write_frame(fd, AG_SPAWN, req, n) != 0 ||
	    ga_read(fd, GA_REPLY_MS, &t, buf, sizeof(buf) - 1, &n) != 0) {
		if (cmd->tty)
			rc = sbx_err(err, errlen, "the sandbox's agent did "
			    "not start the terminal");
		goto out;
	}
	if (t == AG_ERROR) {
		buf[n] = '\0';
		rc = sbx_err(err, errlen, "agent: %s", (char *)buf);
		goto out;
	}
	if (t != AG_STARTED || ag_started_parse(buf, n) < 0) {
		/* runsc exec then, but not for a terminal (its relay's
		 * resize and signals would end a runsc exec) */
		if (cmd->tty)
			rc = sbx_err(err, errlen, "the sandbox's agent: "
			    "protocol error");
		goto out;
	}
	/* a terminal's resize or signal may come as soon as the pid is
	 * known: held pending until the relay has its handler (their
	 * default action would end it) */
	sigemptyset(&rt);
	sigaddset(&rt, SIGRTMIN);
	sigaddset(&rt, SIGRTMIN + 1);
	sigprocmask(SIG_BLOCK, &rt, &old);
	if ((pid = fork()) != 0)
		sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		rc = sbx_err(err, errlen, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		struct sigaction sa;
		struct rlimit nocore = { 0, 0 };
		int c, i0, o, e, s;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		for (s = 1; s < NSIG; s++)
			(void)sigaction(s, &sa, NULL);
		(void)setrlimit(RLIMIT_CORE, &nocore);
		/* above 3 first: the four may overlap 0-3 */
		c = fcntl(fd, F_DUPFD, 10);
		i0 = cmd->fd_in >= 0 ? fcntl(cmd->fd_in, F_DUPFD, 10) :
		    open("/dev/null", O_RDONLY);
		/* a terminal's output is the slave's, as the command's
		 * would be on ns */
		o = fcntl(cmd->tty ? cmd->fd_in : cmd->fd_out, F_DUPFD, 10);
		e = fcntl(cmd->fd_err, F_DUPFD, 10);
		if (c < 0 || i0 < 0 || o < 0 || e < 0 || dup2(i0, 0) < 0 ||
		    dup2(o, 1) < 0 || dup2(e, 2) < 0 || dup2(c, 3) < 0)
			_exit(125);
		/* nothing of the caller's: its locks and pipes would
		 * outlive it here */
		closefrom(4);
		ga_relay(cmd->tty);
	}
	out->pid = pid;
	rc = 0;
out:
	free(req);
	close(fd);
	return rc;
}

int
sbx_gv_agent_resize(const struct sbx_proc *p, unsigned rows, unsigned cols)
{
	union sigval v;

	if (p->pid <= 0 || rows == 0 || cols == 0 || rows > 0x7fff ||
	    cols > 0xffff)
		return -1;
	v.sival_int = (int)(rows << 16 | cols);
	return sigqueue(p->pid, SIGRTMIN, v);
}

int
sbx_gv_agent_tty_signal(const struct sbx_proc *p, int sig)
{
	union sigval v;

	if (p->pid <= 0 || sig < 1 || sig > 64)
		return -1;
	v.sival_int = sig;
	return sigqueue(p->pid, SIGRTMIN + 1, v);
}

int
sbx_gv_agent_port_connect(const struct sbx_rec *rec, int port, char *err,
    size_t errlen)
{
	unsigned char b[AG_HDR + 2];
	int fd;

	if (port < 1 || port > 65535)
		return sbx_err(err, errlen, "port %d: 1..65535", port);
	/* non-blocking from the connect on: a full backlog (an agent that
	 * cannot fork its workers) is EAGAIN at once, not a wait */
	if ((fd = ga_connect_x(rec, SOCK_NONBLOCK)) < 0)
		return sbx_err(err, errlen, "the sandbox's agent is not there "
		    "or takes no connection (is the sandbox running?)");
	/* a new connection's buffer takes these few bytes whole */
	ag_hdr_put(b, AG_CONNECT, 2);
	ag_port_put(b + AG_HDR, port);
	if (write(fd, b, sizeof(b)) != (ssize_t)sizeof(b)) {
		close(fd);
		return sbx_err(err, errlen, "the sandbox's agent: %s",
		    strerror(errno));
	}
	return fd;
}

int
sbx_gv_agent_port_reply(const void *buf, size_t len, size_t *used,
    int *inside, char *err, size_t errlen)
{
	return ag_connect_answer(buf, len, used, inside, err, errlen);
}
