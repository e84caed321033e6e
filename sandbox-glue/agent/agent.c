/*
 * agent.c: the in-sandbox agent (agent.h).  One poll loop in the first
 * process (accept, reap, restart INIT), one process per connection.
 * libc only.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "sandbox-glue/agent/agent.h"
#include "sandbox-glue/agent/agent_wire.h"

#define AG_CG		"/sys/fs/cgroup/memory/sluice"
#define AG_PROG_MAX	4096	/* struct sock_filter entries */
#define AG_KILL_ROUNDS	250
#define AG_DRAIN_MS	2000	/* output still coming after the exit */
#define AG_CONNECT_MS	5000	/* CONNECT's connect inside */
#define AG_RELAY_BUF	(64 * 1024)	/* CONNECT's relay, each way */
/* A command's input read ahead of it, so that a signal, a resize or a
 * terminal's ^C behind input it does not read is not kept waiting:
 * four frames' worth at most, then the host waits. */
#define AG_IN_MAX	(4 * AG_DATA_MAX)
/* on a terminal's ctl, with the signal's number: typed (^C), so the
 * unread input goes unless NOFLSH, as Linux's terminal drops it */
#define AG_SIG_TYPED	0x80

extern char **environ;

static uid_t ag_uid;
static gid_t ag_gid;
static struct sock_filter ag_prog[AG_PROG_MAX];
static struct sock_fprog ag_fprog;
static int ag_sigpipe[2] = { -1, -1 };
static volatile sig_atomic_t ag_term;

static void
ag_log(const char *fmt, ...)
{
	char b[600];
	va_list ap;
	int n;

	n = snprintf(b, sizeof(b), "sluice-agent[%d]: ", (int)getpid());
	va_start(ap, fmt);
	vsnprintf(b + n, sizeof(b) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n = (int)strlen(b);
	b[n++] = '\n';
	(void)!write(2, b, (size_t)n);
}

/* The seccomp program from hex ("" none); -1 when not one. */
static int
ag_prog_load(const char *hex)
{
	long n;

	if (hex[0] == '\0')
		return 0;
	if ((n = ag_hex_decode(hex, ag_prog, sizeof(ag_prog),
	    sizeof(ag_prog[0]))) < 0)
		return -1;
	ag_fprog.len = (unsigned short)((size_t)n / sizeof(ag_prog[0]));
	ag_fprog.filter = ag_prog;
	return 0;
}

static void
ag_on_signal(int sig)
{
	int e = errno;

	if (sig == SIGTERM)
		ag_term = 1;
	if (ag_sigpipe[1] >= 0)
		(void)!write(ag_sigpipe[1], "", 1);
	errno = e;
}

/* In a child: the drop to the sandbox user, for good (the seccomp
 * program is inherited: agent_main installed it in itself).  0, or -1
 * and a message. */
static int
ag_drop(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	/* the bounding set is empty since agent_main (ag_bounding_drop),
	 * and this process has it from there: nothing of the agent's
	 * capabilities can come back through an exec */
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (setgroups(0, NULL) != 0 || setresgid(ag_gid, ag_gid, ag_gid) != 0 ||
	    setresuid(ag_uid, ag_uid, ag_uid) != 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		ag_log("dropping to %u:%u: %s", (unsigned)ag_uid,
		    (unsigned)ag_gid, strerror(errno));
		return -1;
	}
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capset, &h, d) != 0) {
		ag_log("capset: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* What setpriv --bounding-set=-all did, once for every process the
 * agent starts (they inherit it): 64 prctl calls per command were
 * ~1 ms of each under gVisor's ptrace platform.  The agent keeps its
 * own permitted and effective capabilities. */
static int
ag_bounding_drop(void)
{
	int cap;

	for (cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
			ag_log("bounding set: %s", strerror(errno));
			return -1;
		}
	return 0;
}

static int
ag_init_main(void *arg)
{
	static char *envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin",
	    "HOME=/home/user", NULL };
	char **argv = arg;

	ag_signals_default();
	closefrom(3);
	if (chdir("/") != 0 || ag_drop() != 0)
		_exit(125);
	environ = envp;
	execvp(argv[0], argv);
	ag_log("%s: %s", argv[0], strerror(errno));
	_exit(127);
}

static pid_t
ag_start_init(char **argv)
{
	return ag_vfork(ag_init_main, argv);
}

/* ---- one connection ---- */

static void
ag_cg_path(char *b, size_t n, const char *tag, const char *file)
{
	snprintf(b, n, AG_CG "/%s%s%s", tag, file ? "/" : "", file ? file : "");
}

/* Kills every process of the group until it is empty (bounded).  The
 * mkdir first: a command not yet started then fails to join it. */
static int
ag_cg_kill(const char *tag)
{
	char p[256], buf[4096];
	int i, fd;
	ssize_t n;

	ag_cg_path(p, sizeof(p), tag, NULL);
	(void)mkdir(p, 0755);
	ag_cg_path(p, sizeof(p), tag, "cgroup.procs");
	for (i = 0; i < AG_KILL_ROUNDS; i++) {
		char *s, *e;
		int any = 0;

		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			return -1;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n < 0)
			return -1;
		buf[n] = '\0';
		for (s = buf; *s != '\0'; s = e) {
			long v = strtol(s, &e, 10);

			if (e == s)
				break;
			if (v > 1) {
				(void)kill((pid_t)v, SIGKILL);
				any = 1;
			}
			while (*e == '\n' || *e == ' ')
				e++;
		}
		if (!any)
			return 0;
		{
			struct timespec ts = { 0, 20 * 1000 * 1000 };

			nanosleep(&ts, NULL);
		}
	}
	return -1;
}

/* In the command's child, before the drop: never returns.  It runs
 * on the worker's memory (ag_vfork): it changes no global but environ,
 * which the worker puts back. */
static void ag_keep(int ctl);

static void
ag_child(const struct ag_spawn *s, int in, int out, int err, int ctl)
{
	char p[256], num[24];
	struct rlimit rl;
	int fd;

	ag_signals_default();
	(void)setsid();
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 ||
	    (ctl >= 0 && dup2(ctl, 3) < 0))
		_exit(125);
	closefrom(ctl >= 0 ? 4 : 3);
	/* a terminal's keeper: the terminal is its session's */
	if (ctl >= 0 && ioctl(0, TIOCSCTTY, 0) != 0) {
		ag_log("a terminal: TIOCSCTTY: %s", strerror(errno));
		_exit(125);
	}
	ag_cg_path(p, sizeof(p), s->tag, NULL);
	snprintf(num, sizeof(num), "%d\n", (int)getpid());
	/* a tag that already exists was claimed by a kill: refuse */
	if (mkdir(p, 0755) != 0 || (ag_cg_path(p, sizeof(p), s->tag,
	    "cgroup.procs"), fd = open(p, O_WRONLY | O_CLOEXEC)) < 0 ||
	    write(fd, num, strlen(num)) < 0) {
		ag_log("sluice: cannot set up the command group");
		_exit(125);
	}
	close(fd);
	if (ag_drop() != 0)
		_exit(125);
	rl.rlim_cur = rl.rlim_max = 0;
	(void)setrlimit(RLIMIT_CORE, &rl);
	if (s->fsize) {
		rl.rlim_cur = rl.rlim_max = (rlim_t)s->fsize;
		(void)setrlimit(RLIMIT_FSIZE, &rl);
	}
	if (s->nofile) {
		rl.rlim_cur = rl.rlim_max = (rlim_t)s->nofile;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (s->nproc) {
		rl.rlim_cur = rl.rlim_max = (rlim_t)s->nproc;
		(void)setrlimit(RLIMIT_NPROC, &rl);
	}
	if (ctl >= 0)
		ag_keep(3);
	/* entered as the sandbox user: its permissions, as under ns */
	if (chdir(s->cwd) != 0) {
		dprintf(2, "sluice: cannot change directory to '%s': %s\n",
		    s->cwd, strerror(errno));
		_exit(125);
	}
	/* execvp looks argv[0] up in the command's own PATH */
	environ = s->envp;
	execvp(s->argv[0], s->argv);
	dprintf(2, "sluice: %s: %s\n", s->argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

struct ag_kid {
	const struct ag_spawn *s;
	int in, out, err;
};

static int
ag_kid_main(void *arg)
{
	const struct ag_kid *k = arg;

	ag_child(k->s, k->in, k->out, k->err, -1);
	return 125;
}

/* The command's process (ag_vfork). Its pid, or -1. */
static pid_t
ag_spawn_child(const struct ag_spawn *s, int in, int out, int err)
{
	struct ag_kid k = { s, in, out, err };

	return ag_vfork(ag_kid_main, &k);
}

static volatile sig_atomic_t ag_keep_chld;

static void
ag_keep_on_chld(int sig)
{
	(void)sig;
	ag_keep_chld = 1;
}

/*
 * A terminal's keeper, in the command's child after the drop: the
 * session leader whose controlling terminal the slave (0) is, because
 * only a process of that session may ask it its foreground process group
 * (TIOCGPGRP; gVisor answers nobody outside, on the master neither), and
 * gVisor's line discipline sends no signal for Ctrl-C.  It forks the
 * command into a process group of its own, in the foreground, returns
 * there (which goes on to exec it), and here sends each signal number
 * the worker writes on ctl to the foreground group, until the command
 * exits; then it exits with its status (128 + N for a signal).
 */
static void
ag_keep(int ctl)
{
	struct sigaction sa;
	sigset_t chld, old;
	pid_t c, pg;
	int st = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ag_keep_on_chld;
	sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGTTOU, &sa, NULL);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	if ((c = fork()) < 0)
		_exit(125);
	if (c == 0) {
		close(ctl);
		(void)setpgid(0, 0);
		/* both sides, as shells do: a shell that checks before the
		 * keeper has done it would stop itself (SIGTTIN) */
		(void)tcsetpgrp(0, getpid());
		ag_signals_default();
		return;
	}
	(void)setpgid(c, c);
	(void)tcsetpgrp(0, c);
	close(1);
	close(2);
	for (;;) {
		struct pollfd pf = { ctl, POLLIN, 0 };
		unsigned char b;
		pid_t w;

		while ((w = waitpid(c, &st, WNOHANG)) < 0 && errno == EINTR)
			;
		if (w == c)
			break;
		ag_keep_chld = 0;
		if (ppoll(&pf, ctl >= 0 ? 1 : 0, NULL, &old) < 0)
			continue;
		if (!(pf.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (read(ctl, &b, 1) != 1) {
			/* the worker is gone: only the exit is waited for */
			close(ctl);
			ctl = -1;
			continue;
		}
		if (b & AG_SIG_TYPED) {
			struct termios t;

			b &= (unsigned char)~AG_SIG_TYPED;
			/* what the terminal holds goes, where it can
			 * (gVisor's answers ENOTTY and keeps it: only
			 * what the worker held is dropped then) */
			if (tcgetattr(0, &t) == 0 && !(t.c_lflag & NOFLSH))
				(void)tcflush(0, TCIFLUSH);
		}
		pg = tcgetpgrp(0);
		if (b < 1 || b > 64 || kill(pg > 1 ? -pg : -c, b) != 0)
			(void)kill(-c, b >= 1 && b <= 64 ? b : SIGINT);
	}
	_exit(WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st));
}

/* A terminal's command: its keeper (ag_keep) forked, whose pid this is,
 * or -1.  A fork, not ag_vfork: the keeper never execs. */
static pid_t
ag_spawn_tty(const struct ag_spawn *s, int slave, int ctl)
{
	pid_t pid = fork();

	if (pid == 0)
		ag_child(s, slave, slave, slave, ctl);
	return pid;
}

/* The output of one stream as a frame; -1 when the host is gone. 0 at
 * EOF or would-block with *open cleared at EOF. */
static int
ag_pump(int conn, int *fd, int type)
{
	static char buf[AG_DATA_MAX];
	ssize_t n = read(*fd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return 0;
	}
	return ag_write_frame(conn, type, buf, (size_t)n);
}

/* A terminal of ws's size: 0, *m its master, *s its slave (neither
 * the agent's controlling terminal: O_NOCTTY), or -1. */
static int
ag_pty_open(const struct winsize *ws, int *m, int *s)
{
	char name[64];

	*s = -1;
	if ((*m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
		return -1;
	if (grantpt(*m) != 0 || unlockpt(*m) != 0 || ptsname_r(*m, name,
	    sizeof(name)) != 0 || (*s = open(name, O_RDWR | O_NOCTTY |
	    O_CLOEXEC)) < 0 || ioctl(*m, TIOCSWINSZ, ws) != 0) {
		int e = errno;

		close(*m);
		if (*s >= 0)
			close(*s);
		*m = *s = -1;
		errno = e;
		return -1;
	}
	return 0;
}

static void
ag_close_all(int a, int b, int c, int d)
{
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	if (c >= 0)
		close(c);
	if (d >= 0)
		close(d);
}

/* A terminal's input, n bytes in b: the characters that make a signal
 * under ISIG (intr, quit, susp of the terminal's settings, which the
 * master reads) taken out and their signals sent through the keeper
 * (ctl), as Linux's line discipline does and gVisor's does not (nor
 * is ^C echoed).  Unless NOFLSH, what came before such a character is
 * dropped with it, and *flushed set: the caller drops the input it
 * holds, as Linux flushes the terminal's.  How many bytes are left. */
static size_t
ag_tty_isig(int m, int ctl, char *b, size_t n, int *flushed)
{
	struct termios t;
	size_t i, k = 0;

	*flushed = 0;
	if (m < 0 || tcgetattr(m, &t) != 0 || !(t.c_lflag & ISIG))
		return n;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)b[i], sg = 0;

		if (c == _POSIX_VDISABLE)
			;
		else if (c == t.c_cc[VINTR])
			sg = SIGINT;
		else if (c == t.c_cc[VQUIT])
			sg = SIGQUIT;
		else if (c == t.c_cc[VSUSP])
			sg = SIGTSTP;
		if (sg == 0) {
			b[k++] = b[i];
			continue;
		}
		if (!(t.c_lflag & NOFLSH)) {
			k = 0;
			*flushed = 1;
			sg |= AG_SIG_TYPED;
		}
		(void)!write(ctl, &sg, 1);
	}
	return k;
}

static void ag_worker_done(void);

/* ws NULL: the command on pipes; else on a terminal of that size
 * (agent_wire.h, PTY): the master is both the input (pin[1]) and the
 * output (pout[0], a copy), no stderr of its own. */
static void
ag_serve_spawn(int conn, char *req, size_t n, const struct winsize *ws)
{
	static char in[AG_IN_MAX], fr[AG_DATA_MAX];
	struct ag_spawn s;
	char err[AG_ERR_MAX];
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int st = 0, exited = 0, sl = -1, ctl[2] = { -1, -1 };
	long long exit_ms = 0;
	/* in[inoff..inlen): read from the host, not yet by the command;
	 * in_eof: the host's end of input, after it */
	size_t inlen = 0, inoff = 0;
	int in_eof = 0;
	unsigned char b[4];
	pid_t pid;

	if (ag_spawn_parse(req, n, &s, err, sizeof(err)) != 0) {
		(void)ag_write_frame(conn, AG_ERROR, err, strlen(err));
		return;
	}
	if (ws != NULL) {
		if (ag_pty_open(ws, &pin[1], &sl) != 0 || (pout[0] = fcntl(
		    pin[1], F_DUPFD_CLOEXEC, 0)) < 0 || pipe2(ctl,
		    O_CLOEXEC) != 0 || (pid = ag_spawn_tty(&s, sl,
		    ctl[0])) < 0) {
			snprintf(err, sizeof(err), "agent: a terminal: %s",
			    strerror(errno));
			(void)ag_write_frame(conn, AG_ERROR, err, strlen(err));
			if (pin[1] >= 0)
				close(pin[1]);
			if (pout[0] >= 0)
				close(pout[0]);
			if (sl >= 0)
				close(sl);
			if (ctl[0] >= 0) {
				close(ctl[0]);
				close(ctl[1]);
			}
			ag_spawn_free(&s);
			return;
		}
		close(sl);
		close(ctl[0]);
		/* a keeper gone does not end this worker */
		(void)fcntl(ctl[1], F_SETFL, O_NONBLOCK);
	} else if (pipe2(pin, O_CLOEXEC) != 0 || pipe2(pout, O_CLOEXEC) !=
	    0 || pipe2(perr, O_CLOEXEC) != 0 ||
	    (pid = ag_spawn_child(&s, pin[0], pout[1], perr[1])) < 0) {
		snprintf(err, sizeof(err), "agent: %s", strerror(errno));
		(void)ag_write_frame(conn, AG_ERROR, err, strlen(err));
		return;
	} else {
		close(pin[0]);
		close(pout[1]);
		close(perr[1]);
	}
	(void)fcntl(pin[1], F_SETFL, O_NONBLOCK);
	(void)fcntl(pout[0], F_SETFL, O_NONBLOCK);
	if (perr[0] >= 0)
		(void)fcntl(perr[0], F_SETFL, O_NONBLOCK);
	ag_started_put(b, pid);
	if (ag_write_frame(conn, AG_STARTED, b, 4) != 0)
		goto gone;
	for (;;) {
		struct pollfd pf[5];
		int np = 0, ci = -1, oi = -1, ei = -1, ii = -1, t;
		int polled_after_exit = exited;

		/* the host's end of input, once what came before it is in */
		if (in_eof && inlen == 0 && pin[1] >= 0) {
			close(pin[1]);
			pin[1] = -1;
		}
		pf[np].fd = ag_sigpipe[0];
		pf[np++].events = POLLIN;
		/* the host is read while a whole frame fits: its signals and
		 * resizes do not wait for the command to read its input */
		if (AG_IN_MAX - (inlen - inoff) >= AG_DATA_MAX) {
			ci = np;
			pf[np].fd = conn;
			pf[np++].events = POLLIN;
		}
		if (inlen > inoff && pin[1] >= 0) {
			ii = np;
			pf[np].fd = pin[1];
			pf[np++].events = POLLOUT;
		}
		if (pout[0] >= 0) {
			oi = np;
			pf[np].fd = pout[0];
			pf[np++].events = POLLIN;
		}
		if (perr[0] >= 0) {
			ei = np;
			pf[np].fd = perr[0];
			pf[np++].events = POLLIN;
		}
		/* after the exit: what is in the pipes, then stop even if a
		 * background job holds them open */
		if (poll(pf, (nfds_t)np, exited ? 0 : -1) < 0) {
			/* SIGCHLD: the revents are not set, so none is
			 * taken (a blocking read of the connection would
			 * wait for the host forever) */
			if (errno != EINTR)
				goto gone;
			for (t = 0; t < np; t++)
				pf[t].revents = 0;
		}
		if (pf[0].revents) {
			char c[64];

			(void)!read(ag_sigpipe[0], c, sizeof(c));
		}
		if (!exited && waitpid(pid, &st, WNOHANG) == pid) {
			exited = 1;
			exit_ms = ag_now_ms();
		}
		if (oi >= 0 && pf[oi].revents && ag_pump(conn, &pout[0],
		    AG_STDOUT) != 0)
			goto gone;
		if (ei >= 0 && pf[ei].revents && ag_pump(conn, &perr[0],
		    AG_STDERR) != 0)
			goto gone;
		if (ii >= 0 && pf[ii].revents) {
			ssize_t w = write(pin[1], in + inoff, inlen - inoff);

			if (w < 0 && errno != EAGAIN && errno != EINTR) {
				/* the command closed its stdin: drop it */
				inlen = inoff = 0;
				close(pin[1]);
				pin[1] = -1;
			} else if (w > 0 && (inoff += (size_t)w) == inlen)
				inlen = inoff = 0;
		}
		if (ci >= 0 && pf[ci].revents) {
			size_t len;
			int flushed;

			if (ag_read_frame(conn, &t, fr, sizeof(fr), &len) != 0)
				goto gone;
			if (t == AG_STDIN && len == 0 && ws != NULL) {
				/* a terminal's end of input is its hang-up
				 * (the host's terminal went: the daemon
				 * restarted or died), as closing a master
				 * is on ns: SIGHUP to its foreground group */
				unsigned char sg = SIGHUP;

				(void)!write(ctl[1], &sg, 1);
				inlen = inoff = 0;
				if (pin[1] >= 0)
					close(pin[1]);
				pin[1] = -1;
			} else if (t == AG_STDIN && len == 0)
				in_eof = 1;
			else if (t == AG_STDIN && !in_eof) {
				if (ws != NULL) {
					len = ag_tty_isig(pin[1], ctl[1], fr,
					    len, &flushed);
					if (flushed)
						inlen = inoff = 0;
				}
				if (pin[1] < 0)
					;	/* the command's stdin is shut */
				else if (inlen == 0) {
					memcpy(in, fr, len);
					inoff = 0;
					inlen = len;
				} else {
					/* room: AG_IN_MAX less what is
					 * held is at least a frame */
					memmove(in, in + inoff, inlen - inoff);
					inlen -= inoff;
					inoff = 0;
					memcpy(in + inlen, fr, len);
					inlen += len;
				}
			} else if (t == AG_STDIN)
				;	/* after its end: not the command's */
			else if (t == AG_SIGNAL && ag_signal_parse(
			    (unsigned char *)fr, len) > 0) {
				unsigned char sg = (unsigned char)
				    ag_signal_parse((unsigned char *)fr, len);

				/* a terminal's: its foreground group, which
				 * only its keeper can name */
				if (ws != NULL)
					(void)!write(ctl[1], &sg, 1);
				else
					(void)kill(pid, sg);
			} else if (t == AG_RESIZE && ws != NULL) {
				struct winsize w;
				unsigned r, c;

				if (ag_winsize_parse((unsigned char *)fr, len,
				    &r, &c) != 0)
					goto gone;
				memset(&w, 0, sizeof(w));
				w.ws_row = (unsigned short)r;
				w.ws_col = (unsigned short)c;
				/* the master closed with the input: the
				 * copy that reads is the terminal still */
				(void)ioctl(pout[0] >= 0 ? pout[0] : pin[1],
				    TIOCSWINSZ, &w);
			} else
				goto gone;	/* not in this conversation */
		}
		/* stop once a poll made after the exit finds nothing more
		 * to read (a job left behind may hold the pipes open) */
		if (polled_after_exit && (((pout[0] < 0 ||
		    !(pf[oi].revents & POLLIN)) &&
		    (perr[0] < 0 || !(pf[ei].revents & POLLIN))) ||
		    ag_now_ms() - exit_ms > AG_DRAIN_MS))
			break;
	}
	{
		unsigned char e[2];
		char p[256];

		/* the command's group goes with it (what the host's RELEASE
		 * did, one more connection per command): fails, harmlessly,
		 * while a background job of it is still in it */
		ag_cg_path(p, sizeof(p), s.tag, NULL);
		(void)rmdir(p);
		if (WIFSIGNALED(st))
			ag_exit_put(e, 1, WTERMSIG(st));
		else
			ag_exit_put(e, 0, WEXITSTATUS(st));
		ag_worker_done();
		(void)ag_write_frame(conn, AG_EXIT, e, 2);
	}
	ag_spawn_free(&s);
	ag_close_all(pin[1], pout[0], perr[0], ctl[1]);
	return;
gone:
	/* the host's end went away before the exit was told: the command
	 * is nobody's any more */
	(void)ag_cg_kill(s.tag);
	ag_spawn_free(&s);
	ag_close_all(pin[1], pout[0], perr[0], ctl[1]);
}

/* ---- CONNECT: a TCP connection inside, relayed ---- */

/* One way of the relay: bytes read from one side, not yet written to
 * the other; at EOF (and all written) the other side's write half is
 * shut, as the reader's peer shut its own. */
struct ag_way {
	char buf[AG_RELAY_BUF];
	size_t len, off;
	int from, to;
	int eof, shut;
};

/* Reads into w or writes out of it, as poll said: -1 when the relay
 * ends (an error on either side). */
static int
ag_way_step(struct ag_way *w, short rev_from, short rev_to)
{
	ssize_t k;

	if (w->len == 0 && !w->eof && (rev_from & (POLLIN | POLLHUP |
	    POLLERR))) {
		k = read(w->from, w->buf, sizeof(w->buf));
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (k == 0)
			w->eof = 1;
		if (k > 0) {
			w->len = (size_t)k;
			w->off = 0;
		}
	}
	if (w->len > 0 && (rev_to & (POLLOUT | POLLHUP | POLLERR))) {
		k = write(w->to, w->buf + w->off, w->len - w->off);
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (k > 0 && (w->off += (size_t)k) == w->len)
			w->len = w->off = 0;
	}
	if (w->eof && w->len == 0 && !w->shut) {
		(void)shutdown(w->to, SHUT_WR);
		w->shut = 1;
	}
	return 0;
}

/* Connects to 127.0.0.1:port here, tells the host how that went, then
 * relays until both ways have ended or either side fails.  In a worker
 * dropped to the sandbox user (ag_serve), never the first process: a
 * connection may last as long as its client wants. */
static void
ag_serve_connect(int conn, int port)
{
	static struct ag_way up, down;	/* host to server, server to host */
	struct sockaddr_in sa;
	struct pollfd pf = { -1, POLLOUT, 0 };
	unsigned char b[4];
	socklen_t sl = sizeof(int);
	int tcp, e = 0, r;
	long long t0 = ag_now_ms();

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0)) < 0)
		e = errno;
	else if (connect(tcp, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		e = errno;
		pf.fd = tcp;
		while (e == EINPROGRESS || e == EINTR) {
			long long left = AG_CONNECT_MS - (ag_now_ms() - t0);

			if (left <= 0) {
				e = ETIMEDOUT;
				break;
			}
			r = poll(&pf, 1, (int)left);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 || getsockopt(tcp, SOL_SOCKET, SO_ERROR, &e,
			    &sl) != 0)
				e = errno;
			else if (r == 0)
				e = EINPROGRESS;	/* the loop's bound */
		}
	}
	if (e <= 0 || e > 4095)
		e = e == 0 ? 0 : EIO;
	ag_connected_put(b, e);
	if (ag_write_frame(conn, AG_CONNECTED, b, 4) != 0 || e != 0)
		goto done;
	(void)fcntl(conn, F_SETFL, O_NONBLOCK);
	up.len = up.off = 0;
	up.eof = up.shut = 0;
	up.from = conn;
	up.to = tcp;
	down.len = down.off = 0;
	down.eof = down.shut = 0;
	down.from = tcp;
	down.to = conn;
	while (!(up.shut && down.shut)) {
		struct pollfd p[2];

		/* each side: reading while its way's buffer is empty,
		 * writing while the other way's is not; the server's side
		 * with nothing to wait for is left out (its POLLHUP would
		 * spin); the host's stays, for its POLLHUP: a host that
		 * has closed (its client gone, the daemon dead) ends the
		 * relay even when the server never answers the half-close
		 * (an AF_UNIX POLLHUP is both ways shut, not a half-close) */
		p[0].fd = conn;
		p[0].events = (short)((up.len == 0 && !up.eof ? POLLIN : 0) |
		    (down.len > 0 ? POLLOUT : 0));
		p[1].fd = tcp;
		p[1].events = (short)((down.len == 0 && !down.eof ? POLLIN :
		    0) | (up.len > 0 ? POLLOUT : 0));
		p[0].revents = p[1].revents = 0;
		if (p[1].events == 0)
			p[1].fd = -1;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (ag_way_step(&up, p[0].revents, p[1].revents) != 0 ||
		    ag_way_step(&down, p[1].revents, p[0].revents) != 0)
			break;
		if (up.eof && (p[0].revents & (POLLHUP | POLLERR)))
			break;
	}
done:
	if (tcp >= 0)
		close(tcp);
}

static void
ag_serve(int conn)
{
	static char req[AG_SPAWN_MAX];
	unsigned char e[2];
	char tag[AG_TAG_MAX + 1], p[256];
	size_t n;
	int t;

	if (ag_read_frame(conn, &t, req, sizeof(req), &n) != 0)
		return;
	if (t == AG_SPAWN) {
		ag_serve_spawn(conn, req, n, NULL);
		return;
	}
	if (t == AG_CONNECT) {
		long port = ag_port_parse((unsigned char *)req, n);

		if (port < 0) {
			(void)ag_write_frame(conn, AG_ERROR, "bad port", 8);
			return;
		}
		/* the relay passes the sandbox's bytes for as long as its
		 * client wants: as the sandbox user, not with the agent's
		 * capabilities; so this worker ends with it (it could not
		 * start a command again) */
		if (ag_drop() != 0) {
			static const char m[] = "cannot drop to the sandbox "
			    "user";

			(void)ag_write_frame(conn, AG_ERROR, m, sizeof(m) - 1);
			_exit(1);
		}
		ag_serve_connect(conn, (int)port);
		_exit(0);
	}
	if (t == AG_PTY) {
		struct winsize ws;
		unsigned r, c;

		memset(&ws, 0, sizeof(ws));
		if (ag_winsize_parse((unsigned char *)req, n, &r, &c) != 0 ||
		    ag_read_frame(conn, &t, req, sizeof(req), &n) != 0 ||
		    t != AG_SPAWN) {
			(void)ag_write_frame(conn, AG_ERROR, "bad request", 11);
			return;
		}
		ws.ws_row = (unsigned short)r;
		ws.ws_col = (unsigned short)c;
		ag_serve_spawn(conn, req, n, &ws);
		return;
	}
	if ((t != AG_KILL && t != AG_RELEASE) || !ag_tag_ok(req, n)) {
		(void)ag_write_frame(conn, AG_ERROR, "bad request", 11);
		return;
	}
	memcpy(tag, req, n);
	tag[n] = '\0';
	if (t == AG_KILL)
		ag_exit_put(e, 0, ag_cg_kill(tag) == 0 ? 0 : 1);
	else {
		ag_cg_path(p, sizeof(p), tag, NULL);
		/* fails, harmlessly, while background jobs are in it */
		(void)rmdir(p);
		ag_exit_put(e, 0, 0);
	}
	(void)ag_write_frame(conn, AG_EXIT, e, 2);
}

/* ---- the first process ---- */

/* Workers waiting in accept(), counted in memory the first process and
 * every worker share (NULL when it could not be mapped: each worker
 * then serves one connection).  A hint only: the first process keeps
 * its own list (ag_wk) from the workers' messages. */
static int *ag_nidle;

/* In a worker: its pid, the first process's end of the note pipe, and
 * for the connection it serves, whether it said it waits again
 * (ag_worker_done) and whether it ends instead. */
static pid_t ag_me;
static int ag_note_fd = -1;
static int ag_noted, ag_leaving;

/*
 * A worker is done with its connection but for the last frame: it goes
 * back to accept() (counted idle, -pid on the note pipe) unless another
 * worker already waits there, and says so before that frame.  Said
 * after it, the host's next command (sent once it has the EXIT) could
 * reach the first process first, which would fork a worker for it.
 * Once per connection; nothing in the first process.
 */
static void
ag_worker_done(void)
{
	pid_t msg;

	if (ag_me == 0 || ag_noted)
		return;
	ag_noted = 1;
	if (ag_nidle == NULL || __atomic_load_n(ag_nidle,
	    __ATOMIC_SEQ_CST) > 0) {
		ag_leaving = 1;
		return;
	}
	__atomic_add_fetch(ag_nidle, 1, __ATOMIC_SEQ_CST);
	msg = -ag_me;
	(void)!write(ag_note_fd, &msg, sizeof(msg));
}

/* A worker: waits in accept(), tells the first process it is busy (+pid
 * on nfd: another is made if a connection comes while none waits),
 * serves the connection, and then goes back to accept() (-pid) unless
 * another worker already waits there: one fork per command inside (its
 * own) rather than two, as a worker made per connection cost under
 * gVisor's ptrace platform.  Its pid, -1 when it cannot be made. */
static pid_t
ag_worker(int lfd, const int nfd[2])
{
	struct sigaction act;
	pid_t me, msg;
	int c;

	if ((me = fork()) != 0)
		return me;
	me = ag_me = getpid();
	ag_note_fd = nfd[1];
	/* a wake-up pipe of its own: the first process's would lose its
	 * SIGCHLDs here */
	close(ag_sigpipe[0]);
	close(ag_sigpipe[1]);
	close(nfd[0]);
	memset(&act, 0, sizeof(act));
	act.sa_handler = SIG_DFL;
	sigaction(SIGTERM, &act, NULL);
	if (pipe2(ag_sigpipe, O_CLOEXEC | O_NONBLOCK) != 0)
		_exit(1);
	act.sa_handler = ag_on_signal;
	sigaction(SIGCHLD, &act, NULL);
	for (;;) {
		while ((c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			if (errno != EINTR && errno != ECONNABORTED) {
				if (ag_nidle != NULL)
					__atomic_sub_fetch(ag_nidle, 1,
					    __ATOMIC_SEQ_CST);
				_exit(1);
			}
		if (ag_nidle != NULL)
			__atomic_sub_fetch(ag_nidle, 1, __ATOMIC_SEQ_CST);
		msg = me;
		(void)!write(nfd[1], &msg, sizeof(msg));
		ag_noted = ag_leaving = 0;
		ag_serve(c);
		close(c);
		/* what a command that was cut short left */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		ag_worker_done();
		if (ag_leaving)
			_exit(0);
	}
}

/* The first process's list of its workers, from their messages: idle
 * ones wait in accept(). */
#define AG_WORKERS_MAX	256
static struct {
	pid_t pid;
	int idle;
} ag_wk[AG_WORKERS_MAX];
static int ag_wk_n;

static int
ag_wk_find(pid_t p)
{
	int i;

	for (i = 0; i < ag_wk_n; i++)
		if (ag_wk[i].pid == p)
			return i;
	return -1;
}

static void
ag_wk_set(pid_t p, int idle)
{
	int i = ag_wk_find(p);

	if (i < 0 && ag_wk_n < AG_WORKERS_MAX) {
		i = ag_wk_n++;
		ag_wk[i].pid = p;
	}
	if (i >= 0)
		ag_wk[i].idle = idle;
}

static void
ag_wk_del(pid_t p)
{
	int i = ag_wk_find(p);

	if (i >= 0)
		ag_wk[i] = ag_wk[--ag_wk_n];
}

static int
ag_wk_idle(void)
{
	int i, n = 0;

	for (i = 0; i < ag_wk_n; i++)
		n += ag_wk[i].idle;
	return n;
}

/* --agent UID GID HEX: the user, group and filter of every command,
 * the filter and an empty bounding set on the agent itself: -1, or the
 * exit status (a usage error 2, a filter that will not load 125). */
static int
ag_confine_self(int argc, char **argv)
{
	char *end;

	if (argc < 7 || strcmp(argv[5], "--") != 0) {
		ag_log("usage: --agent UID GID SECCOMP_HEX -- INIT [ARG]...");
		return 2;
	}
	ag_uid = (uid_t)strtoul(argv[2], &end, 10);
	if (*end != '\0' || argv[2][0] == '\0' || ag_uid == 0)
		goto usage;
	ag_gid = (gid_t)strtoul(argv[3], &end, 10);
	if (*end != '\0' || argv[3][0] == '\0' || ag_gid == 0)
		goto usage;
	if (ag_prog_load(argv[4]) != 0) {
		ag_log("--agent: not a filter program");
		return 125;
	}
	if (ag_bounding_drop() != 0)
		return 125;
	/* the sandbox's filter on the agent itself, so on all it starts
	 * (the drop to the user, which it allows, comes after): no process
	 * of the sandbox is without it */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || (ag_fprog.len != 0 &&
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &ag_fprog, 0, 0) != 0)) {
		ag_log("seccomp: %s", strerror(errno));
		return 125;
	}
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	return -1;
usage:
	ag_log("--agent: UID and GID are non-zero numbers");
	return 2;
}

/* The socket the backend connects to, or -1: without it (or without
 * the parent of the command groups, so that no command could be
 * killed as a tree) the backend uses runsc exec, and the init runs. */
static int
ag_listen(void)
{
	struct sockaddr_un sa;
	int lfd;

	if (mkdir(AG_CG, 0755) != 0 && errno != EEXIST) {
		ag_log("%s: %s (commands go through runsc exec)", AG_CG,
		    strerror(errno));
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", AG_DIR, AG_SOCK);
	(void)unlink(sa.sun_path);
	if ((lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(lfd, 64) != 0) {
		ag_log("%s: %s (commands go through runsc exec)", sa.sun_path,
		    strerror(errno));
		if (lfd >= 0)
			close(lfd);
		return -1;
	}
	return lfd;
}

int
agent_main(int argc, char **argv)
{
	struct sigaction act;
	pid_t init = -1, w;
	time_t restart = 0, fork_retry = 0;
	int lfd, nfd[2], i, pending = 0, now_ok = 1, rc;
	void *shm;

	if ((rc = ag_confine_self(argc, argv)) >= 0)
		return rc;
	if (pipe2(ag_sigpipe, O_CLOEXEC | O_NONBLOCK) != 0 ||
	    pipe2(nfd, O_CLOEXEC | O_NONBLOCK) != 0)
		return 1;
	memset(&act, 0, sizeof(act));
	act.sa_handler = ag_on_signal;
	sigaction(SIGCHLD, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
	act.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &act, NULL);
	lfd = ag_listen();
	shm = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_ANONYMOUS, -1, 0);
	ag_nidle = shm != MAP_FAILED ? shm : NULL;
	init = ag_start_init(argv + 6);
	while (!ag_term) {
		struct pollfd pf[3];
		int np = 1, st;

		/* the first worker is made before the poll (made after it,
		 * it waited out the poll's second, and so did the backend's
		 * create); another when a connection waits while all are
		 * busy (a command beside a running one) */
		if (lfd >= 0 && now_ok && (ag_wk_n == 0 || (pending &&
		    ag_wk_idle() == 0))) {
			if (ag_nidle != NULL)
				__atomic_add_fetch(ag_nidle, 1,
				    __ATOMIC_SEQ_CST);
			if ((w = ag_worker(lfd, nfd)) > 0)
				ag_wk_set(w, 1);
			else {
				ag_log("fork: %s", strerror(errno));
				if (ag_nidle != NULL)
					__atomic_sub_fetch(ag_nidle, 1,
					    __ATOMIC_SEQ_CST);
				fork_retry = time(NULL) + 1;
			}
		}
		pending = 0;
		pf[0].fd = ag_sigpipe[0];
		pf[0].events = POLLIN;
		if (lfd >= 0) {
			pf[1].fd = nfd[0];
			pf[1].events = POLLIN;
			np = 2;
			/* a connection waiting while every worker is busy
			 * (each goes back to accept() when done, so a
			 * command after a command needs no new one) */
			if (ag_wk_n > 0 && ag_wk_idle() == 0 &&
			    time(NULL) >= fork_retry) {
				pf[2].fd = lfd;
				pf[2].events = POLLIN;
				np = 3;
			}
		}
		if (poll(pf, (nfds_t)np, init < 0 || (lfd >= 0 &&
		    (ag_wk_n == 0 || time(NULL) < fork_retry)) ? 1000 :
		    -1) < 0) {
			if (errno != EINTR)
				break;
			/* not set by an interrupted poll: accept would
			 * block until the next connection */
			pf[0].revents = pf[1].revents = pf[2].revents = 0;
		}
		pending = np == 3 && (pf[2].revents & POLLIN);
		now_ok = time(NULL) >= fork_retry;
		if (pf[0].revents) {
			char c[64];

			while (read(ag_sigpipe[0], c, sizeof(c)) > 0)
				;
		}
		while ((w = waitpid(-1, &st, WNOHANG)) > 0)
			if (w == init) {
				init = -1;
				restart = time(NULL) + 1;
			} else
				ag_wk_del(w);	/* a worker, or an orphan */
		if (init < 0 && time(NULL) >= restart)
			init = ag_start_init(argv + 6);
		if (np >= 2 && pf[1].revents) {
			pid_t got[16];
			ssize_t k = read(nfd[0], got, sizeof(got));

			/* +pid busy, -pid waiting in accept() again */
			for (i = 0; i < k / (ssize_t)sizeof(got[0]); i++)
				if (got[i] > 0)
					ag_wk_set(got[i], 0);
				else if (got[i] < 0)
					ag_wk_set(-got[i], 1);
		}
	}
	if (init > 0)
		(void)kill(init, SIGTERM);
	return 0;
}
