/*
 * sbx_gvisor.c: the gVisor backend.  Every sandbox is one runsc container
 * with --network=none (loopback only), its own runsc state directory
 * (rec->dir/runsc) and an OCI bundle (rec->dir/bundle) whose read-only
 * root is the sandbox's image (rec->image, sbx_image.h) mounted on the
 * host at bundle/rootfs, its passwd and group bound over for the sandbox's
 * host uid, or without one a template shared by the state directory's
 * sandboxes (gv_template), which holds the host's /etc entries, with the
 * host's /usr bound, like the ns backend's root.  runsc is always run
 * through fork/exec with an argv, under a filter that spares it an RCU
 * grace period at each start (gv_membarrier_filter).
 *
 * Facts about runsc 20221219 (Debian 12) that shape this file:
 * - the ptrace platform works everywhere; kvm may hang (nested guests);
 * - connecting to the bound session socket needs --host-uds=open, and
 *   gVisor checks the socket file's owner and mode against the sandbox
 *   uid, which is the host uid (no user namespace for files; OCI uid
 *   mappings are not applied to files either).  So the sandbox user is
 *   not SBX_UID but rec->host_uid, the ns backend's host uid of SBX_UID
 *   in the sandbox's slot: unprivileged, its own, and never a real host
 *   account's or another sandbox's (sluice-run hands out the slots of
 *   both backends from one set);
 * - "runsc exec --detach" is broken (it re-executes itself with its
 *   flags after the command), so the shim is run by the container's
 *   init: the agent (sandbox-glue/agent/agent.h), which also reaps
 *   orphans and starts commands (sbx_gv_agent.c);
 * - with --host-uds=create (in "all"), a socket bound inside on a bind
 *   mount is a host socket the host can connect to: the agent's
 *   <dir>/agent/agent.sock.  A command costs a fork inside instead of a
 *   runsc exec (~60 ms of the client alone); runsc exec stays for
 *   sandboxes made before and whenever the agent does not answer;
 * - OCI rlimits of an exec'd process are ignored, so commands run by
 *   runsc exec get theirs from prlimit(1) inside (the agent sets them);
 * - with --cgroupfs, gVisor has its own cgroupfs: each command runs in
 *   memory/sluice/<tag> there, which is how kill_tree finds processes
 *   that setsid'd or were reparented to init;
 * - a host fd that is a regular file is written by gVisor at its own
 *   offset (from 0), not the file's: spawn() relays such stdout/stderr
 *   through pipes;
 * - statx() with AT_NO_AUTOMOUNT fails with EINVAL, so coreutils 9.1
 *   "ls -l", "ls PATH" and "stat" fail inside (find, python, pip work;
 *   sluice-run's ls uses find).
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>

#include <jansson.h>

#include "sandbox-glue/agent/agent_wire.h"
#include "sandbox-glue/executor/backend/sbx-int.h"
#include "sandbox-glue/executor/backend/sbx_image_mount.h"

#define GV_MISSING	"runsc not found: install the Debian package runsc"
#define GV_CG		"/sys/fs/cgroup/memory/sluice"	/* inside */
#define GV_HOST_CG	"sluice-gvisor-"	/* + chat.hash, host */
#define GV_ARGS_MAX	48
#define GV_WAIT_MS	60000	/* bound on one runsc management call */
#define GV_SECCOMP_MAX	65536	/* bytes of the seccomp program (hex) */
#define GV_AGENT_WAIT_MS 3000	/* from "runsc run" to the agent's socket */

#if defined(__x86_64__)
#define GV_AUDIT_ARCH	AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define GV_AUDIT_ARCH	AUDIT_ARCH_AARCH64
#endif

/* What every runsc call of one sandbox needs. */
struct gv_ctx {
	char runsc[SBX_PATH_MAX];
	char root[SBX_PATH_MAX + 16];	/* --root=... */
	char id[SBX_PATH_MAX];		/* container id */
	int nocg;			/* created with --ignore-cgroups */
};

/* Runs as root before dropping to the sandbox user: joins the command's
 * cgroup inside gVisor ($1), then setpriv drops to uid $2, gid $3, no
 * groups and no capability.  With $4, the sandbox's seccomp program,
 * sluice-shim installs it first, still as root: no process of the sandbox
 * can trace it out of the way (a sandbox made before there was one has
 * none).  The user's environment is applied only after the drop (env -i)
 * so that LD_PRELOAD and friends never reach the privileged part.  A tag
 * that already exists was claimed by kill_tree: refuse. */
static const char gv_wrapper[] =
	"cg=" GV_CG "/$1; u=$2; g=$3; sc=$4; shift 4; "
	"mkdir \"$cg\" 2>/dev/null && echo $$ > \"$cg/cgroup.procs\" || "
	"{ echo 'sluice: cannot set up the command group' >&2; exit 125; }; "
	"set -- setpriv --reuid=\"$u\" --regid=\"$g\" --clear-groups "
	"--inh-caps=-all --bounding-set=-all --no-new-privs -- \"$@\"; "
	"[ -z \"$sc\" ] || "
	"set -- " SBX_SHIM_PATH " --seccomp \"$sc\" -- \"$@\"; "
	"exec \"$@\"";

/* Kills every process of the command group $1 until it is empty.  mkdir
 * first: if the wrapper has not run yet, its own mkdir now fails and the
 * command never starts. */
static const char gv_killer[] =
	"d=" GV_CG "/$1; mkdir \"$d\" 2>/dev/null; n=0; "
	"while p=$(cat \"$d/cgroup.procs\") && [ -n \"$p\" ]; do "
	"kill -9 $p 2>/dev/null; n=$((n+1)); "
	"[ $n -ge 250 ] && exit 1; sleep 0.02; done; exit 0";

/* The sandbox's seccomp program (hex, sbx_seccomp_hex), kept by create()
 * in <dir>/seccomp.hex for every command: "" when the sandbox was made
 * without one.  malloc'd, NULL on error. */
static char *
gv_seccomp(const struct sbx_rec *rec)
{
	char p[SBX_PATH_MAX + 16], *b;
	ssize_t n = 0, k;
	int fd;

	snprintf(p, sizeof(p), "%s/seccomp.hex", rec->dir);
	if ((b = calloc(1, GV_SECCOMP_MAX + 1)) == NULL)
		return NULL;
	if ((fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return errno == ENOENT ? b : (free(b), NULL);
	while (n < GV_SECCOMP_MAX && (k = read(fd, b + n, (size_t)(
	    GV_SECCOMP_MAX - n))) > 0)
		n += k;
	close(fd);
	b[n] = '\0';
	return b;
}

/* The host cgroup of the sandbox, "/sluice-gvisor-<chat>.<hash>". */
static void
gv_cgname(const struct sbx_rec *rec, char *buf, size_t len)
{
	snprintf(buf, len, "/" GV_HOST_CG "%s.%08x", rec->chat,
	    sbx_dir_hash(rec->dir));
}

/* ---- finding and running runsc ---- */

static int
gv_find_runsc(char *buf, size_t len)
{
	const char *env = getenv("SLUICE_RUNSC"), *path = getenv("PATH");
	char dirs[4096];
	char *save = NULL, *d;

	/* SLUICE_RUNSC names the binary (tests point it at nothing to see
	 * the "not found" path) */
	if (env != NULL && env[0] != '\0') {
		snprintf(buf, len, "%s", env);
		return access(buf, X_OK);
	}
	snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/usr/bin:/sbin:/bin",
	    path != NULL ? path : "");
	for (d = strtok_r(dirs, ":", &save); d != NULL;
	    d = strtok_r(NULL, ":", &save)) {
		if (d[0] != '/')
			continue;
		snprintf(buf, len, "%s/runsc", d);
		if (access(buf, X_OK) == 0)
			return 0;
	}
	return -1;
}

static int
gv_ctx_init(struct gv_ctx *c, const struct sbx_rec *rec, char *err,
    size_t errlen)
{
	memset(c, 0, sizeof(*c));
	if (gv_find_runsc(c->runsc, sizeof(c->runsc)) != 0)
		return sbx_err(err, errlen, GV_MISSING);
	snprintf(c->root, sizeof(c->root), "--root=%s/runsc", rec->dir);
	/* backend_data: "<id>" or "<id> nocg" */
	if (rec->backend_data[0] != '\0') {
		snprintf(c->id, sizeof(c->id), "%s", rec->backend_data);
		c->id[strcspn(c->id, " ")] = '\0';
		c->nocg = strstr(rec->backend_data, " nocg") != NULL;
	} else          /* a new sandbox; older records name theirs */
		snprintf(c->id, sizeof(c->id), "sluice-%s.%08x", rec->chat,
		    sbx_dir_hash(rec->dir));
	return 0;
}

/* argv = runsc, the flags every call shares, then args (NULL ended). */
static int
gv_argv(const struct gv_ctx *c, const char **av, const char *const *args)
{
	int n = 0, i;

	av[n++] = c->runsc;
	av[n++] = c->root;
	av[n++] = "--network=none";
	/* open: the session socket; create: the agent's (agent_wire.h) */
	av[n++] = "--host-uds=all";
	av[n++] = "--cgroupfs";
	av[n++] = "--platform=ptrace";
	if (c->nocg)
		av[n++] = "--ignore-cgroups";
	for (i = 0; args[i] != NULL; i++) {
		if (n >= GV_ARGS_MAX - 1)
			return -1;
		av[n++] = args[i];
	}
	av[n] = NULL;
	return 0;
}

/*
 * In the child that becomes runsc, before its exec: membarrier(2)'s
 * MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED answered as done without
 * doing it.  runsc 20221219 makes that call as it starts (its hostmm
 * package's init), in every one of its processes: a create starts five
 * (runsc run, then the gofer and the sandbox, each of which executes
 * itself again), three of them one after the other.  The kernel answers
 * it after an RCU grace period once the process has threads, which a Go
 * program has by then: 9 ms here, of a start of 17.  Only gVisor's KVM
 * platform uses that registration; ptrace, which gv_argv always asks
 * for, uses MEMBARRIER_CMD_GLOBAL (and later gVisor registers lazily
 * for this very cost).  An error instead of 0 would make runsc log a
 * warning at every start, into the sandbox's log and a runsc exec'd
 * command's stderr.  gofer and sandbox inherit the filter under their
 * own; the sandbox's membarrier(2) is the sentry's and is unchanged.
 * It takes CAP_SYS_ADMIN (no no_new_privs is set): without it, runsc
 * starts as before.
 */
static void
gv_membarrier_filter(void)
{
#ifdef GV_AUDIT_ARCH
	static const struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, GV_AUDIT_ARCH, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 3),
		/* the command, an int: the argument's low word */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
		    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog p = { (unsigned short)(sizeof(f) / sizeof(f[0])),
	    (struct sock_filter *)(uintptr_t)f };

	(void)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p);
#endif
}

/*
 * In the child that becomes runsc, after closefrom: descriptor
 * GV_FD_HIGH, the read end of an empty pipe whose write end is closed
 * (it reads EOF and names no file of the host), left open across the
 * exec.  The kernel grows a process's descriptor table when a
 * descriptor past its size is made, and waits for an RCU grace period
 * first when the table is shared by threads, as a Go program's is: the
 * sandbox moves its stdio to descriptors 256-258 as it boots (18 ms
 * here), the gofer and runsc itself go past 64.  A table is made as big
 * as the highest open descriptor of the process it is copied from at
 * fork, and an exec keeps it: with this one open in runsc, runsc, the
 * gofer and the sandbox start with 512 slots.  runsc closes no
 * descriptor it does not know, so those two keep it too, open, as it
 * is: nothing can be done with it but reading its end and closing it
 * (a descriptor of /dev/null instead would let the gofer, root, change
 * that file's mode).  The sandbox's own processes never see host
 * descriptors.
 */
#define GV_FD_HIGH	300

static void
gv_fd_reserve(void)
{
	int p[2];

	if (pipe(p) != 0)
		return;
	close(p[1]);
	if (p[0] != GV_FD_HIGH) {
		(void)dup2(p[0], GV_FD_HIGH);
		close(p[0]);
	}
}

/* In a forked child: fds 0-2 from in/out/err, nothing else open but
 * gv_fd_reserve's, signals back to default, then runsc.  own_session:
 * the gofer that "runsc create" leaves behind would otherwise stay in
 * the caller's process group, and a Ctrl-C there would take the
 * sandbox's files away. */
static void
gv_exec_child(const char **av, int in, int out, int errfd, int own_session)
{
	sigset_t all;

	gv_membarrier_filter();
	if (own_session)
		(void)setsid();
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if ((in != 0 && dup2(in, 0) < 0) || (out != 1 && dup2(out, 1) < 0) ||
	    (errfd != 2 && dup2(errfd, 2) < 0))
		_exit(127);
	closefrom(3);
	gv_fd_reserve();
	execv(av[0], (char *const *)av);
	_exit(127);
}

/* The last non-empty line of the file's last 4 KiB into msg: runsc
 * says why it failed there. */
static void
gv_last_line(const char *path, char *msg, size_t msglen)
{
	char buf[4096], *p, *line;
	struct stat st;
	ssize_t n;
	int fd;

	if (msg == NULL || msglen == 0 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_size > (off_t)sizeof(buf) - 1)
		(void)lseek(fd, st.st_size - (off_t)sizeof(buf) + 1, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	line = (p = strrchr(buf, '\n')) != NULL ? p + 1 : buf;
	if (snprintf(msg, msglen, "%s", line) >= (int)msglen)
		msg[msglen - 1] = '\0';
}

/*
 * Runs one runsc management command, bounded by GV_WAIT_MS.  stdin is
 * /dev/null; stdout and stderr go to <dir>/runsc.<pid>.out (one per
 * process: sluice-run invocations may overlap), whose last line is
 * copied into msg.  stdio_fd, when not -1, becomes the command's
 * stdout/stderr instead (the container's init inherits the stdio of
 * "runsc run": the bounded log's pipe); the last line of init.log
 * goes to msg when runsc fails.  Returns the exit status, or -1 if runsc
 * could not be run or was killed.
 */
static int
gv_run(const struct gv_ctx *c, const struct sbx_rec *rec,
    const char *const *args, int stdio_fd, char *msg, size_t msglen)
{
	const char *av[GV_ARGS_MAX];
	char outp[SBX_PATH_MAX + 16], logp[SBX_PATH_MAX + 16];
	int in = -1, out = -1, st, rc = -1, pfd;
	int64_t deadline;
	pid_t pid, w;

	if (msg != NULL && msglen > 0)
		msg[0] = '\0';
	if (gv_argv(c, av, args) != 0)
		return sbx_err(msg, msglen, "too many runsc arguments");
	snprintf(outp, sizeof(outp), "%s/runsc.%d.out", rec->dir,
	    (int)getpid());
	snprintf(logp, sizeof(logp), "%s/init.log", rec->dir);
	in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	out = stdio_fd >= 0 ? fcntl(stdio_fd, F_DUPFD_CLOEXEC, 3) :
	    open(outp, O_WRONLY | O_CREAT | O_CLOEXEC | O_TRUNC, 0600);
	if (in < 0 || out < 0) {
		sbx_err(msg, msglen, "%s: %s", outp, strerror(errno));
		goto out;
	}
	if ((pid = fork()) < 0) {
		sbx_err(msg, msglen, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		gv_exec_child(av, in, out, out, 1);
	deadline = sbx_now_ms() + GV_WAIT_MS;
	/* woken by the exit itself (a poll every 5 ms cost 2.5 ms a call
	 * on average, and a create or a delete makes several) */
	pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	while ((w = waitpid(pid, &st, WNOHANG)) == 0 && sbx_now_ms() < deadline)
		if (pfd >= 0) {
			struct pollfd pf = { pfd, POLLIN, 0 };

			(void)poll(&pf, 1, (int)(deadline - sbx_now_ms()));
		} else
			usleep(5000);
	if (pfd >= 0)
		close(pfd);
	if (w == 0) {
		/* runsc hung (seen with --platform=kvm in nested VMs) */
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		sbx_err(msg, msglen, "runsc %s: no answer in %d s", args[0],
		    GV_WAIT_MS / 1000);
		goto out;
	}
	if (w < 0) {
		sbx_err(msg, msglen, "waitpid: %s", strerror(errno));
		goto out;
	}
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (stdio_fd < 0)
		gv_last_line(outp, msg, msglen);
	else if (rc != 0) {
		/* runsc's complaint went through the log's reader */
		sbx_log_flush(stdio_fd);
		gv_last_line(logp, msg, msglen);
	}
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (stdio_fd < 0)
		unlink(outp);
	return rc;
}

/* ---- the bundle ---- */

static int
gv_mount_add(json_t *mounts, const char *dst, const char *type,
    const char *src, const char *const *opts)
{
	json_t *m, *o;
	int i;

	o = json_array();
	for (i = 0; opts != NULL && opts[i] != NULL; i++)
		json_array_append_new(o, json_string(opts[i]));
	m = json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type", type,
	    "source", src, "options", o);
	if (m == NULL)
		return -1;
	return json_array_append_new(mounts, m);
}

static int
gv_bind(json_t *mounts, const char *dst, const char *src, int ro)
{
	const char *opts[] = { "rbind", ro ? "ro" : "rw", "nosuid", "nodev",
	    NULL };

	return gv_mount_add(mounts, dst, "bind", src, opts);
}

/*
 * The root of a sandbox without an image: one directory for all the
 * sandboxes of a state directory, <state>/.gvisor-root/<signature>,
 * read-only to them (gVisor mounts its root so).  It holds the mount
 * points, the top-level symlinks of a merged-/usr host, the shim
 * (rec->shim: the static one where there is one) and an /etc of the
 * host's entries of sbx_etc_keep, directories copied whole (they were
 * bound one by one: nine bind mounts with the shim's on a Debian 12
 * host, a gofer connection and a mount in the sentry each, ~10 ms of
 * every create); passwd and group are the sandbox's own, bound over the
 * template's.  The signature hashes the boot id and the identity
 * (inode, size, times, mode, owner) of every source entry but links
 * (their names, and their directory's times), the shim's too, so a
 * change on the host makes a new template for the sandboxes made after
 * it: a sandbox sees what it would have seen bound at its create; and
 * since nothing is synced, a template a crash cut short is never taken
 * after the reboot.  A template is made under a temporary name
 * (.tmp-<pid>-<signature>) and renamed into place (concurrent creates:
 * one wins, the other takes it).  A sandbox's bundle/rootfs is a
 * symlink to its template, which keeps it: an older template is removed
 * once no sandbox links to it and none picked it for a minute, renamed
 * to .del-* first (a removal cut short leaves no template's name).  The
 * pick and the link, and each removal's check and rename, hold a lock
 * on <state>/.gvisor-root (gv_tpl_lock).
 */
#define GV_TPL_DIR	".gvisor-root"
#define GV_TPL_LAYOUT	1	/* changes with what gv_tpl_fill makes */
#define GV_TPL_GRACE_S	60	/* picked this recently: in use */
#define GV_TPL_DEPTH	16	/* directory levels copied and hashed */

static const char *const gv_tpl_dirs[] = { "usr", "etc", "proc", "dev",
    "dev/sluice-agent", "sys", "tmp", "home", "home/user", "workspace",
    "run", "run/sluice", "opt", "opt/sluice", "var", "root" };

static void
gv_h(uint64_t *h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		*h = (*h ^ b[i]) * 1099511628211ull;
}

static void
gv_h_stat(uint64_t *h, const char *name, const struct stat *st)
{
	uint64_t v[12] = { (uint64_t)st->st_dev, (uint64_t)st->st_ino,
	    (uint64_t)st->st_mode, (uint64_t)st->st_uid, (uint64_t)st->st_gid,
	    (uint64_t)st->st_size, (uint64_t)st->st_mtim.tv_sec,
	    (uint64_t)st->st_mtim.tv_nsec, (uint64_t)st->st_ctim.tv_sec,
	    (uint64_t)st->st_ctim.tv_nsec, (uint64_t)st->st_nlink, 0 };

	gv_h(h, name, strlen(name) + 1);
	gv_h(h, v, sizeof(v));
}

/* dfd/name and, a directory, what is under it (down to depth). */
static void
gv_sig_at(uint64_t *h, int dfd, const char *name, int depth)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		gv_h(h, name, strlen(name) + 1);
		return;
	}
	gv_h_stat(h, name, &st);
	if (!S_ISDIR(st.st_mode) || depth >= GV_TPL_DEPTH ||
	    (fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		else if (de->d_type == DT_LNK)
			/* a link is replaced, never changed: the directory's
			 * times say so (most entries here: ssl/certs,
			 * alternatives; their stat was 1 ms of a create) */
			gv_h(h, de->d_name, strlen(de->d_name) + 1);
		else
			gv_sig_at(h, dirfd(d), de->d_name, depth + 1);
	closedir(d);
}

/* The signature of what a template made now would hold. */
static uint64_t
gv_tpl_sig(const struct sbx_rec *rec)
{
	uint64_t h = 14695981039346656037ull;
	int v = GV_TPL_LAYOUT, fd;
	struct stat st;
	size_t i;

	gv_h(&h, &v, sizeof(v));
	/* this boot's: a template a crash or a power loss left half
	 * written (nothing in it is synced) is never taken after it */
	if ((fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY |
	    O_CLOEXEC)) >= 0) {
		char boot[64];
		ssize_t n = read(fd, boot, sizeof(boot));

		if (n > 0)
			gv_h(&h, boot, (size_t)n);
		close(fd);
	}
	gv_h(&h, rec->shim, strlen(rec->shim) + 1);
	if (stat(rec->shim, &st) == 0)
		gv_h_stat(&h, "shim", &st);
	if ((fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		/* a top-level directory is a mount point, not copied */
		for (i = 0; i < sbx_root_top_n; i++)
			gv_sig_at(&h, fd, sbx_root_top[i], GV_TPL_DEPTH);
		close(fd);
	}
	if ((fd = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		for (i = 0; i < sbx_etc_keep_n; i++)
			gv_sig_at(&h, fd, sbx_etc_keep[i], 0);
		close(fd);
	}
	return h;
}

/* Owner, mode (no set-id bit) and times of st on dfd/name.  The owner
 * where the state dir's file system takes it (the copy is root's
 * otherwise, as nearly all of /etc is); the mode always: the copy was
 * made 0600 or 0700. */
static int
gv_tpl_meta(int dfd, const char *name, const struct stat *st)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	(void)!fchownat(dfd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW);
	if (!S_ISLNK(st->st_mode) && fchmodat(dfd, name, st->st_mode & 0777,
	    0) != 0)
		return -1;
	(void)utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

/* A source entry under /etc the template goes without (what): the host
 * changed it while it was copied, or it cannot be read; the create goes
 * on (the sandbox would have seen it so bound). */
static void
gv_tpl_warn(const char *rel, const char *what, int e)
{
	fprintf(stderr, "sluice-execd: gVisor template: /etc/%s: %s (%s)\n",
	    rel, what, e != 0 ? strerror(e) : "changed while copied");
}

/* The content of sfd/name (st: its lstat, a regular file others may
 * read) into out.  Opened without following a link or blocking on a
 * fifo put there since, and copied only if it is still that file and
 * others may still read it; else, or on a read error, out stays empty.
 * -1 only when out cannot be written. */
static int
gv_tpl_content(int sfd, const char *name, const char *rel,
    const struct stat *st, int out)
{
	char buf[16384];
	struct stat fst;
	ssize_t n;
	int in, e = 0;

	if ((in = openat(sfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW |
	    O_CLOEXEC)) < 0) {
		gv_tpl_warn(rel, "copied empty", errno);
		return 0;
	}
	if (fstat(in, &fst) != 0 || !S_ISREG(fst.st_mode) ||
	    !(fst.st_mode & S_IROTH) || fst.st_dev != st->st_dev ||
	    fst.st_ino != st->st_ino) {
		gv_tpl_warn(rel, "copied empty", 0);
		close(in);
		return 0;
	}
	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			e = errno;
			break;
		}
		if (write(out, buf, (size_t)n) != n) {
			close(in);
			return -1;
		}
	}
	close(in);
	if (e != 0) {
		gv_tpl_warn(rel, "copied empty", e);
		if (ftruncate(out, 0) != 0)
			return -1;
	}
	return 0;
}

/*
 * sfd/name (rel: its path under /etc) copied to dfd/name, a directory
 * with what is under it, owner and mode kept.  What others may not read
 * is copied empty (a file) or without its entries (a directory): the
 * sandbox's user, never its owner or in its group, could not read it
 * bound either, and a key the host keeps there stays where it was.
 * Sockets, fifos and devices are left out; so is, with a warning, what
 * cannot be read (gv_tpl_warn).  0, or -1 (errno) when the template
 * cannot be written.
 */
static int
gv_tpl_copy(int sfd, int dfd, const char *name, const char *rel, int depth)
{
	char lnk[SBX_PATH_MAX], sub[SBX_PATH_MAX];
	struct stat st, fst;
	ssize_t n;
	int in, out, rc = 0;

	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno != ENOENT)
			gv_tpl_warn(rel, "left out", errno);
		return 0;
	}
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlinkat(sfd, name, lnk, sizeof(lnk) - 1)) < 0) {
			gv_tpl_warn(rel, "left out", errno);
			return 0;
		}
		lnk[n] = '\0';
		if (symlinkat(lnk, dfd, name) != 0)
			return -1;
	} else if (S_ISDIR(st.st_mode)) {
		struct dirent *de;
		DIR *d = NULL;

		if (mkdirat(dfd, name, 0700) != 0)
			return -1;
		if (depth < GV_TPL_DEPTH && (st.st_mode & (S_IROTH | S_IXOTH)) ==
		    (S_IROTH | S_IXOTH)) {
			if ((out = openat(dfd, name, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC)) < 0)
				return -1;
			in = openat(sfd, name, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			if (in < 0 || fstat(in, &fst) != 0 ||
			    fst.st_dev != st.st_dev || fst.st_ino != st.st_ino ||
			    (d = fdopendir(in)) == NULL) {
				gv_tpl_warn(rel, "copied empty", in < 0 ? errno :
				    0);
				if (in >= 0)
					close(in);
			}
			while (d != NULL && rc == 0 && (de = readdir(d)) != NULL)
				if (strcmp(de->d_name, ".") != 0 &&
				    strcmp(de->d_name, "..") != 0) {
					snprintf(sub, sizeof(sub), "%s/%s", rel,
					    de->d_name);
					rc = gv_tpl_copy(dirfd(d), out,
					    de->d_name, sub, depth + 1);
				}
			if (d != NULL)
				closedir(d);
			close(out);
			if (rc != 0)
				return -1;
		}
	} else if (S_ISREG(st.st_mode)) {
		if ((out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL |
		    O_CLOEXEC, 0600)) < 0)
			return -1;
		if (st.st_mode & S_IROTH)
			rc = gv_tpl_content(sfd, name, rel, &st, out);
		if (close(out) != 0 || rc != 0)
			return -1;
	} else
		return 0;
	return gv_tpl_meta(dfd, name, &st);
}

static int
gv_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	(void)(flag == FTW_DP ? rmdir(p) : unlink(p));
	return 0;
}

/* path and what is under it (a template: the daemon's own files), on
 * path's file system only: a template's usr (and bin, lib... of a host
 * without a merged /usr) is a mount point of the host's in runsc's
 * namespace, and a bind there that showed on the host is never walked */
static void
gv_rm_tree(const char *path)
{
	(void)nftw(path, gv_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* A new template's content in t (a directory of mode 0700). */
static int
gv_tpl_fill(const struct sbx_rec *rec, const char *t, char *err,
    size_t errlen)
{
	char p[SBX_PATH_MAX * 2];
	struct stat st;
	int sfd = -1, dfd = -1, rc = -1;
	size_t i;

	for (i = 0; i < sizeof(gv_tpl_dirs) / sizeof(gv_tpl_dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", t, gv_tpl_dirs[i]);
		if (mkdir(p, 0755) != 0)
			return sbx_err(err, errlen, "mkdir %s: %s", p,
			    strerror(errno));
	}
	snprintf(p, sizeof(p), "%s/var/tmp", t);
	if (symlink("/tmp", p) != 0)
		return sbx_err(err, errlen, "%s: %s", p, strerror(errno));
	/* a top-level directory (a host without a merged /usr) is a
	 * mount point, bound per sandbox (gv_config) */
	for (i = 0; i < sbx_root_top_n; i++) {
		snprintf(p, sizeof(p), "/%s", sbx_root_top[i]);
		if (lstat(p, &st) != 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", t, sbx_root_top[i]);
		if (S_ISLNK(st.st_mode)) {
			/* a template without /bin would stay in use */
			char src[SBX_PATH_MAX], lnk[SBX_PATH_MAX];
			ssize_t n;

			snprintf(src, sizeof(src), "/%s", sbx_root_top[i]);
			if ((n = readlink(src, lnk, sizeof(lnk) - 1)) < 0)
				return sbx_err(err, errlen, "%s: %s", src,
				    strerror(errno));
			lnk[n] = '\0';
			if (symlink(lnk, p) != 0)
				return sbx_err(err, errlen, "%s: %s", p,
				    strerror(errno));
		} else if (S_ISDIR(st.st_mode) && mkdir(p, 0755) != 0)
			return sbx_err(err, errlen, "mkdir %s: %s", p,
			    strerror(errno));
	}
	snprintf(p, sizeof(p), "%s/etc", t);
	if ((sfd = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		sbx_err(err, errlen, "/etc: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < sbx_etc_keep_n; i++)
		if (gv_tpl_copy(sfd, dfd, sbx_etc_keep[i], sbx_etc_keep[i],
		    0) != 0) {
			sbx_err(err, errlen, "/etc/%s: %s", sbx_etc_keep[i],
			    strerror(errno));
			goto out;
		}
	/* passwd and group: bound over by each sandbox's own */
	if (sbx_etc_ids(t, SBX_UID, SBX_GID, p, sizeof(p)) != 0) {
		sbx_err(err, errlen, "%s: %s", p, strerror(errno));
		goto out;
	}
	snprintf(p, sizeof(p), "%s%s", t, SBX_SHIM_PATH);
	if (sbx_copy_file(rec->shim, p) != 0 || chmod(p, 0755) != 0) {
		sbx_err(err, errlen, "%s: %s", rec->shim, strerror(errno));
		goto out;
	}
	if (chmod(t, 0755) != 0) {
		sbx_err(err, errlen, "%s: %s", t, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	return rc;
}

/* 1 when a sandbox directory under state links its rootfs to t.  By the
 * template's name (the link's last component): the state dir may be
 * spelled otherwise since the links were made. */
static int
gv_tpl_used(const char *state, const char *t)
{
	char p[SBX_PATH_MAX * 2], l[SBX_PATH_MAX * 2];
	const char *name = strrchr(t, '/') != NULL ? strrchr(t, '/') + 1 : t;
	struct dirent *de;
	ssize_t n;
	DIR *d;
	int used = 0;

	if ((d = opendir(state)) == NULL)
		return 1;       /* not known: kept */
	while (!used && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s/bundle/rootfs", state, de->d_name);
		if ((n = readlink(p, l, sizeof(l) - 1)) > 0) {
			l[n] = '\0';
			used = strcmp(strrchr(l, '/') != NULL ? strrchr(l, '/') +
			    1 : l, name) == 0;
		}
	}
	closedir(d);
	return used;
}

/* The templates' lock (flock on base, held for short steps only): a
 * create's pick and its sandbox's link to it, against the cleanup's
 * check and rename of a template.  The descriptor, or -1. */
static int
gv_tpl_lock(const char *base)
{
	int fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	while (fd >= 0 && flock(fd, LOCK_EX) != 0)
		if (errno != EINTR) {
			close(fd);
			return -1;
		}
	return fd;
}

/* base/name removed: renamed to a .del- name first, so a tree cut short
 * (a crash) never keeps a template's name; the next cleanup ends it. */
static void
gv_tpl_rm(const char *base, const char *name)
{
	static unsigned seq;
	char p[SBX_PATH_MAX * 2], q[SBX_PATH_MAX * 2];

	snprintf(p, sizeof(p), "%s/%s", base, name);
	snprintf(q, sizeof(q), "%s/.del-%d-%u-%.64s", base, (int)getpid(),
	    __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED), name);
	if (rename(p, q) == 0)
		gv_rm_tree(q);
}

/* base/.tmp-<pid>-...: 1 when its create is gone (its process is). */
static int
gv_tpl_orphan(const char *name)
{
	long pid = strtol(name + 5, NULL, 10);

	return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 &&
	    errno == ESRCH;
}

/* The templates under base other than keep that no sandbox uses and
 * none picked for a minute; leftovers of creates killed while making
 * one (.tmp-*: its process gone, or a minute old) and of removals cut
 * short (.del-*). */
static void
gv_tpl_gc(const char *state, const char *base, const char *keep)
{
	char p[SBX_PATH_MAX * 2];
	struct dirent *de;
	struct stat st;
	DIR *d;
	int lk;

	if ((d = opendir(base)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", base, de->d_name);
		if (strcmp(p, keep) == 0 || lstat(p, &st) != 0)
			continue;
		if (strncmp(de->d_name, ".del-", 5) == 0) {
			gv_rm_tree(p);
			continue;
		}
		if (strncmp(de->d_name, ".tmp-", 5) == 0) {
			if (gv_tpl_orphan(de->d_name) ||
			    st.st_mtime <= time(NULL) - GV_TPL_GRACE_S)
				gv_tpl_rm(base, de->d_name);
			continue;
		}
		if (st.st_mtime > time(NULL) - GV_TPL_GRACE_S ||
		    (lk = gv_tpl_lock(base)) < 0)
			continue;
		/* again under the lock: a create may have picked it */
		if (lstat(p, &st) == 0 &&
		    st.st_mtime <= time(NULL) - GV_TPL_GRACE_S &&
		    !gv_tpl_used(state, p)) {
			char q[SBX_PATH_MAX * 2];

			snprintf(q, sizeof(q), "%s/.del-%d-gc-%.64s", base,
			    (int)getpid(), de->d_name);
			if (rename(p, q) == 0) {
				close(lk);
				gv_rm_tree(q);
				continue;
			}
		}
		close(lk);
	}
	closedir(d);
}

/* link (a sandbox's bundle/rootfs) made a symlink to t */
static int
gv_tpl_point(const char *t, const char *link, char *err, size_t errlen)
{
	if ((unlink(link) != 0 && errno != ENOENT) || symlink(t, link) != 0)
		return sbx_err(err, errlen, "%s: %s", link, strerror(errno));
	return 0;
}

/* The template for rec (made if it is not there) into t, and link a
 * symlink to it, both under the templates' lock (gv_tpl_lock): from
 * then on the link keeps it. */
static int
gv_template(const struct sbx_rec *rec, const char *link, char *t,
    size_t tlen, char *err, size_t errlen)
{
	char state[SBX_PATH_MAX], base[SBX_PATH_MAX + 32];
	char tmp[SBX_PATH_MAX + 96];
	uint64_t sig = gv_tpl_sig(rec);
	struct stat st;
	size_t n;
	int lk, rc;

	n = strrchr(rec->dir, '/') != NULL ? (size_t)(strrchr(rec->dir, '/') -
	    rec->dir) : 0;
	if (n == 0 || n >= sizeof(state))
		return sbx_err(err, errlen, "%s: no parent directory", rec->dir);
	memcpy(state, rec->dir, n);
	state[n] = '\0';
	snprintf(base, sizeof(base), "%s/" GV_TPL_DIR, state);
	if (snprintf(t, tlen, "%s/%016llx", base, (unsigned long long)sig) >=
	    (int)tlen)
		return sbx_err(err, errlen, "%s: path too long", base);
	if (sbx_mkdir(base, 0711) != 0 || (lk = gv_tpl_lock(base)) < 0)
		return sbx_err(err, errlen, "%s: %s", base, strerror(errno));
	if (lstat(t, &st) == 0 && S_ISDIR(st.st_mode)) {
		/* picked: not collected for a while (gv_tpl_gc) */
		(void)utimensat(AT_FDCWD, t, NULL, 0);
		rc = gv_tpl_point(t, link, err, errlen);
		close(lk);
		return rc;
	}
	close(lk);
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%d-%016llx", base, (int)getpid(),
	    (unsigned long long)sig);
	gv_rm_tree(tmp);
	if (mkdir(tmp, 0700) != 0)
		return sbx_err(err, errlen, "mkdir %s: %s", tmp,
		    strerror(errno));
	if (gv_tpl_fill(rec, tmp, err, errlen) != 0) {
		gv_tpl_rm(base, strrchr(tmp, '/') + 1);
		return -1;
	}
	if ((lk = gv_tpl_lock(base)) < 0) {
		sbx_err(err, errlen, "%s: %s", base, strerror(errno));
		gv_tpl_rm(base, strrchr(tmp, '/') + 1);
		return -1;
	}
	if (rename(tmp, t) != 0) {
		int e = errno;

		/* another create made it meanwhile */
		if ((e != EEXIST && e != ENOTEMPTY) || lstat(t, &st) != 0) {
			close(lk);
			gv_tpl_rm(base, strrchr(tmp, '/') + 1);
			return sbx_err(err, errlen, "rename %s: %s", t,
			    strerror(e));
		}
		(void)utimensat(AT_FDCWD, t, NULL, 0);
		rc = gv_tpl_point(t, link, err, errlen);
		close(lk);
		gv_tpl_rm(base, strrchr(tmp, '/') + 1);
	} else {
		rc = gv_tpl_point(t, link, err, errlen);
		close(lk);
	}
	if (rc == 0)
		gv_tpl_gc(state, base, t);
	return rc;
}

/* Binds of the host's top-level directories (a host without a merged
 * /usr): the template has their mount points. */
static int
gv_top_binds(json_t *mounts)
{
	char src[SBX_PATH_MAX];
	struct stat st;
	size_t i;

	for (i = 0; i < sbx_root_top_n; i++) {
		snprintf(src, sizeof(src), "/%s", sbx_root_top[i]);
		if (lstat(src, &st) == 0 && S_ISDIR(st.st_mode) &&
		    gv_bind(mounts, src, src, 1) != 0)
			return -1;
	}
	return 0;
}

static json_t *
gv_caps(const char *const *names)
{
	json_t *a = json_array(), *r;
	int i;

	for (i = 0; names != NULL && names[i] != NULL; i++)
		json_array_append_new(a, json_string(names[i]));
	r = json_pack("{s:O, s:O, s:O, s:o, s:O}", "bounding", a,
	    "effective", a, "permitted", a, "inheritable", json_array(),
	    "ambient", a);
	json_decref(a);
	return r;
}

/* 1 while something is mounted on the bundle's rootfs. */
static int
gv_rootfs_mounted(const struct sbx_rec *rec)
{
	char b[SBX_PATH_MAX + 16], r[SBX_PATH_MAX + 32];
	struct stat sb, sr;

	snprintf(b, sizeof(b), "%s/bundle", rec->dir);
	snprintf(r, sizeof(r), "%s/bundle/rootfs", rec->dir);
	return stat(b, &sb) == 0 && lstat(r, &sr) == 0 && S_ISDIR(sr.st_mode) &&
	    sr.st_dev != sb.st_dev;
}

/* Unmount the image from the bundle's rootfs (bounded: a mount on a
 * mount comes off too). */
static void
gv_image_unroot(const struct sbx_rec *rec)
{
	char r[SBX_PATH_MAX + 32];
	int i;

	snprintf(r, sizeof(r), "%s/bundle/rootfs", rec->dir);
	for (i = 0; i < 8 && gv_rootfs_mounted(rec); i++)
		if (umount2(r, MNT_DETACH | UMOUNT_NOFOLLOW) != 0)
			break;
}

/* The sandbox's passwd and group in <dir>/etc, for
 * gv_config to bind over its root's. */
static int
gv_ids(const struct sbx_rec *rec, char *err, size_t errlen)
{
	char r[SBX_PATH_MAX + 32], failed[SBX_PATH_MAX + 32];

	snprintf(r, sizeof(r), "%s/etc", rec->dir);
	if (sbx_mkdir(r, 0755) != 0)
		return sbx_err(err, errlen, "%s: %s", r, strerror(errno));
	if (sbx_etc_ids(rec->dir, (unsigned)rec->host_uid,
	    (unsigned)rec->host_gid, failed, sizeof(failed)) != 0)
		return sbx_err(err, errlen, "%s: %s", failed, strerror(errno));
	return 0;
}

/*
 * The image as the bundle's rootfs: mounted on the host (runsc's gofer
 * serves the sentry from there), read-only, nosuid, nodev; and the
 * sandbox's passwd and group (the sandbox user is rec->host_uid) in
 * <dir>/etc, bound over the image's by gv_config.  destroy() unmounts.
 */
static int
gv_image_root(struct sbx_rec *rec, char *err, size_t errlen)
{
	char r[SBX_PATH_MAX + 32];
	int m;

	if (gv_ids(rec, err, errlen) != 0)
		return -1;
	snprintf(r, sizeof(r), "%s/bundle/rootfs", rec->dir);
	gv_image_unroot(rec);
	if (sbx_mkdir(r, 0755) != 0)
		return sbx_err(err, errlen, "mkdir %s: %s", r, strerror(errno));
	if ((m = sbx_image_attach(rec, err, errlen)) < 0)
		return -1;
	if (syscall(SYS_move_mount, m, "", AT_FDCWD, r,
	    MOVE_MOUNT_F_EMPTY_PATH) != 0) {
		sbx_err(err, errlen, "attach the image at %s: %s", r,
		    strerror(errno));
		close(m);
		return -1;
	}
	close(m);
	return 0;
}

/* config.json: init as the sandbox user, no capabilities, the mounts,
 * and host cgroup limits when with_cg. */
static int
gv_config(struct sbx_rec *rec, const char *bundle, int with_cg,
    const char *sc, char *err, size_t errlen)
{
	static const char *const mopt_ro[] = { "ro", "nosuid", "nodev",
	    "noexec", NULL };
	static const char *const agent_caps[] = { "CAP_SETUID", "CAP_SETGID",
	    "CAP_SETPCAP", "CAP_KILL", "CAP_DAC_OVERRIDE", NULL };
	char path[SBX_PATH_MAX + 32], tmp_size[48], home_size[48];
	char root[SBX_PATH_MAX + 96];
	char uid[24], gid[24], passwd[SBX_PATH_MAX + 16];
	char auid[16], agid[16];
	char group[SBX_PATH_MAX + 16];
	char cgpath[SBX_ID_MAX + 48], agent[SBX_PATH_MAX + 16];
	json_t *cfg = NULL, *mounts, *linux_, *res;
	const char *o_tmp[] = { tmp_size, "mode=1777", "nosuid", "nodev",
	    NULL };
	const char *o_home[] = { home_size, "mode=0700", uid, gid, "nosuid",
	    "nodev", NULL };
	int rc = -1, agent_mp = 1;

	mounts = json_array();
	snprintf(path, sizeof(path), "%s/rootfs", bundle);
	snprintf(root, sizeof(root), "rootfs");
	if (rec->image[0] == '\0') {
		/* the shared template (gv_template), which the sandbox's
		 * bundle/rootfs links to */
		if (gv_template(rec, path, root, sizeof(root), err,
		    errlen) != 0)
			goto out;
		if (gv_top_binds(mounts) != 0) {
			sbx_err(err, errlen, "out of memory");
			goto out;
		}
	} else {
		/* runsc's gofer makes a bind's mount point in the root on
		 * the host: a read-only image without one cannot take the
		 * agent's directory (the sandbox would not boot), so its
		 * agent finds no socket and its commands go through runsc
		 * exec */
		struct stat st;
		char mp[SBX_PATH_MAX + 64];

		snprintf(mp, sizeof(mp), "%s%s", path, AG_DIR);
		agent_mp = stat(mp, &st) == 0 && S_ISDIR(st.st_mode);
	}
	snprintf(tmp_size, sizeof(tmp_size), "size=%llu",
	    (unsigned long long)(rec->lim.tmp_bytes ? rec->lim.tmp_bytes :
	    64ull << 20));
	snprintf(home_size, sizeof(home_size), "size=%llu",
	    (unsigned long long)(rec->lim.home_bytes ? rec->lim.home_bytes :
	    64ull << 20));
	snprintf(uid, sizeof(uid), "uid=%u", (unsigned)rec->host_uid);
	snprintf(gid, sizeof(gid), "gid=%u", (unsigned)rec->host_gid);
	snprintf(passwd, sizeof(passwd), "%s/etc/passwd", rec->dir);
	snprintf(agent, sizeof(agent), "%s/agent", rec->dir);
	snprintf(group, sizeof(group), "%s/etc/group", rec->dir);
	if (gv_mount_add(mounts, "/proc", "proc", "proc", NULL) != 0 ||
	    gv_mount_add(mounts, "/dev", "tmpfs", "tmpfs", NULL) != 0 ||
	    gv_mount_add(mounts, "/sys", "sysfs", "sysfs", mopt_ro) != 0 ||
	    (rec->image[0] == '\0' && gv_bind(mounts, "/usr", "/usr", 1) != 0)
	    || gv_bind(mounts, "/etc/passwd", passwd, 1) != 0 ||
	    gv_bind(mounts, "/etc/group", group, 1) != 0 ||
	    gv_bind(mounts, SBX_WORKDIR, rec->workspace, 0) != 0 ||
	    gv_bind(mounts, SBX_SOCK_DIR, rec->session_dir, 0) != 0 ||
	    /* the template has its copy */
	    (rec->image[0] != '\0' && gv_bind(mounts, SBX_SHIM_PATH, rec->shim,
	    1) != 0) ||
	    (agent_mp && gv_bind(mounts, AG_DIR, agent, 0) != 0) ||
	    gv_mount_add(mounts, "/tmp", "tmpfs", "tmpfs", o_tmp) != 0 ||
	    gv_mount_add(mounts, SBX_HOME, "tmpfs", "tmpfs", o_home) != 0) {
		sbx_err(err, errlen, "out of memory");
		goto out;
	}
	linux_ = json_pack("{s:[{s:s},{s:s},{s:s},{s:s},{s:s}]}", "namespaces",
	    "type", "pid", "type", "network", "type", "ipc", "type", "uts",
	    "type", "mount");
	if (linux_ != NULL && with_cg) {
		gv_cgname(rec, cgpath, sizeof(cgpath));
		res = json_object();
		if (rec->lim.memory_bytes)
			json_object_set_new(res, "memory", json_pack("{s:I}",
			    "limit", (json_int_t)rec->lim.memory_bytes));
		if (rec->lim.cpu_pct)
			json_object_set_new(res, "cpu", json_pack("{s:I, s:I}",
			    "quota", (json_int_t)(rec->lim.cpu_pct * 1000),
			    "period", (json_int_t)100000));
		json_object_set_new(linux_, "cgroupsPath", json_string(cgpath));
		json_object_set_new(linux_, "resources", res);
	}
	/* the first process is the agent (sandbox-glue/agent/agent.h),
	 * root inside with the capabilities it needs to drop to the
	 * sandbox user and to empty command groups: it runs the shim (its
	 * INIT, started again a second after it ends; no shell loop around
	 * it, whose start through the gofer delayed the agent's first
	 * worker and the shim's listening by ~15 ms) and every command as
	 * the sandbox user under the sandbox's seccomp filter (runsc's
	 * --oci-seccomp would apply one to this process only, not to runsc
	 * exec: sluice-shim does both); it reaps what is reparented */
	snprintf(auid, sizeof(auid), "%u", (unsigned)rec->host_uid);
	snprintf(agid, sizeof(agid), "%u", (unsigned)rec->host_gid);
	cfg = json_pack("{s:s, s:{s:{s:I, s:I}, s:[s,s,s,s,s,s,s], "
	    "s:[s,s], s:s, s:o, s:b}, s:{s:s, s:b}, s:s, s:o, s:o}",
	    "ociVersion", "1.0.0",
	    "process", "user", "uid", (json_int_t)0, "gid", (json_int_t)0,
	    "args", SBX_SHIM_PATH, "--agent", auid, agid, sc, "--",
	    SBX_SHIM_PATH,
	    "env", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" SBX_HOME,
	    "cwd", "/",
	    "capabilities", gv_caps(agent_caps), "noNewPrivileges", 1,
	    "root", "path", root, "readonly", 1,
	    "hostname", "sandbox",
	    "mounts", mounts,
	    "linux", linux_);
	mounts = NULL;
	if (cfg == NULL) {
		sbx_err(err, errlen, "cannot build config.json");
		goto out;
	}
	snprintf(path, sizeof(path), "%s/config.json", bundle);
	if (json_dump_file(cfg, path, JSON_INDENT(1)) != 0) {
		sbx_err(err, errlen, "cannot write %s", path);
		goto out;
	}
	rc = 0;
out:
	json_decref(mounts);
	json_decref(cfg);
	return rc;
}

/* ---- the backend ---- */

static int
gv_available(char *err, size_t errlen)
{
	char p[SBX_PATH_MAX];

	if (gv_find_runsc(p, sizeof(p)) != 0)
		return sbx_err(err, errlen, GV_MISSING);
	return 0;
}

static void
gv_note(struct sbx_rec *rec, const char *s)
{
	size_t n = strlen(rec->note);

	snprintf(rec->note + n, sizeof(rec->note) - n, "%s%s", n ? "; " : "",
	    s);
}

/* runsc exec as root inside with the given capabilities, argv of a
 * fixed shell script and its one argument. */
static int
gv_root_sh(const struct gv_ctx *c, const struct sbx_rec *rec,
    const char *cap, const char *script, const char *arg, char *msg,
    size_t msglen)
{
	const char *a[16];
	int n = 0;

	a[n++] = "exec";
	a[n++] = "--user=0:0";
	a[n++] = "--cwd=/";
	if (cap != NULL) {
		a[n++] = "--cap";
		a[n++] = cap;
	}
	a[n++] = c->id;
	a[n++] = "/bin/sh";
	a[n++] = "-c";
	a[n++] = script;
	a[n++] = "sh";
	a[n++] = arg;
	a[n] = NULL;
	return gv_run(c, rec, a, -1, msg, msglen);
}

static int gv_destroy(struct sbx_rec *rec, char *err, size_t errlen);

/* 1 once the agent answers (a RELEASE of a group that is not there),
 * waiting up to GV_AGENT_WAIT_MS after "runsc run" for it to listen;
 * 0 when it does not (a shim without --agent: runsc exec then). */
static int
gv_agent_up(const struct sbx_rec *rec)
{
	int64_t until = sbx_now_ms() + GV_AGENT_WAIT_MS;
	char e[8];

	do {
		int r = sbx_gv_agent_call(rec, AG_RELEASE, "probe", e,
		    sizeof(e));

		if (r == 0)
			return 1;
		if (r < 0)
			return 0;
		usleep(1000);
	} while (sbx_now_ms() < until);
	return 0;
}

static int
gv_create(struct sbx_rec *rec, char *err, size_t errlen)
{
	struct gv_ctx c;
	char bundle[SBX_PATH_MAX + 16], pidf[SBX_PATH_MAX + 16];
	char logp[SBX_PATH_MAX + 16], rootd[SBX_PATH_MAX + 16], msg[512];
	char agentd[SBX_PATH_MAX + 16];
	char sock[SBX_PATH_MAX + 16], scp[SBX_PATH_MAX + 16], *sc = NULL;
	char buf[32], want[8];
	int with_cg, try, fd, logfd = -1;
	ssize_t n;

	if (gv_ctx_init(&c, rec, err, errlen) != 0)
		return -1;
	/* gVisor keeps host uids for files: the sandbox user is host uid
	 * rec->host_uid (see the top), which must own the workspace and
	 * may use the socket.  uid 0 would be the host's root, and a low
	 * uid a real account of the host. */
	if (rec->host_uid < 65536 || rec->host_gid < 65536)
		return sbx_err(err, errlen, "sandbox uid %u: not an "
		    "unprivileged per-sandbox uid", (unsigned)rec->host_uid);
	if (lchown(rec->workspace, rec->host_uid, rec->host_gid) != 0)
		return sbx_err(err, errlen, "chown %s: %s", rec->workspace,
		    strerror(errno));
	snprintf(sock, sizeof(sock), "%s/proxy.sock", rec->session_dir);
	if (lchown(sock, rec->host_uid, rec->host_gid) != 0 && errno != ENOENT)
		return sbx_err(err, errlen, "chown %s: %s", sock,
		    strerror(errno));
	snprintf(bundle, sizeof(bundle), "%s/bundle", rec->dir);
	snprintf(pidf, sizeof(pidf), "%s/runsc.pid", rec->dir);
	snprintf(logp, sizeof(logp), "%s/init.log", rec->dir);
	snprintf(rootd, sizeof(rootd), "%s/runsc", rec->dir);
	snprintf(agentd, sizeof(agentd), "%s/agent", rec->dir);
	/* 0700 root: the sandbox user cannot reach the agent's socket */
	if (sbx_mkdir(bundle, 0700) != 0 || sbx_mkdir(rootd, 0700) != 0 ||
	    sbx_mkdir(agentd, 0700) != 0)
		return sbx_err(err, errlen, "mkdir %s: %s", bundle,
		    strerror(errno));
	with_cg = rec->lim.memory_bytes != 0 || rec->lim.cpu_pct != 0;
	/* sluice-run's "cgroups" setting: "" (auto), "v1" and "v2" let
	 * runsc use the host's hierarchy, whichever it is (runsc picks
	 * the version itself); on return rec->cgroup names the host group,
	 * or is "" */
	snprintf(want, sizeof(want), "%.7s", rec->cgroup);
	rec->cgroup[0] = '\0';
	if (strcmp(want, "off") == 0) {
		/* turned off in sluice-run's configuration: runsc must not
		 * touch the host's cgroups either (commands' groups live in
		 * gVisor's own cgroupfs and stay) */
		c.nocg = 1;
		if (with_cg)
			gv_note(rec, "memory/cpu limits not applied: cgroups "
			    "are off");
		with_cg = 0;
	}
	if (rec->lim.pids)
		gv_note(rec, "pids: not applied under gVisor (its host "
		    "cgroup would count the sentry's threads); nproc is");
	/* the seccomp program of every process, kept for spawn() */
	snprintf(scp, sizeof(scp), "%s/seccomp.hex", rec->dir);
	if ((sc = sbx_seccomp_hex(err, errlen)) == NULL)
		return -1;
	if (strlen(sc) > GV_SECCOMP_MAX || sbx_write_file(scp, sc, 0600) != 0) {
		sbx_err(err, errlen, "%s: cannot write it", scp);
		free(sc);
		return -1;
	}
	/* the container's stdio, so the shim's stderr: bounded, as a
	 * sandbox can make the shim log as much as it likes */
	if ((logfd = sbx_log_start(rec->dir, rec->shim, err,
	    errlen)) < 0) {
		free(sc);
		return -1;
	}
	if (rec->image[0] != '\0' ? gv_image_root(rec, err, errlen) != 0 :
	    gv_ids(rec, err, errlen) != 0)
		goto fail;
	for (try = 0; try < 2; try++) {
		/* create and start in one runsc: the second one's start-up
		 * and its connection to the sandbox were ~60 ms of a create */
		const char *cr[] = { "run", "--detach", "--bundle", bundle,
		    "--pid-file", pidf, c.id, NULL };

		if (gv_config(rec, bundle, with_cg && !c.nocg, sc, err,
		    errlen) != 0)
			goto fail;
		if (gv_run(&c, rec, cr, logfd, msg, sizeof(msg)) == 0)
			break;
		/* the real reason is in the runsc log; one retry without
		 * host cgroups covers hosts where they cannot be written */
		{
			const char *del[] = { "delete", "--force", c.id, NULL };

			(void)gv_run(&c, rec, del, -1, NULL, 0);
		}
		if (c.nocg) {
			sbx_err(err, errlen, "runsc run: %s (%s)", msg,
			    logp);
			goto fail;
		}
		c.nocg = 1;
	}
	if (snprintf(rec->backend_data, sizeof(rec->backend_data), "%s%s",
	    c.id, c.nocg ? " nocg" : "") >= (int)sizeof(rec->backend_data)) {
		sbx_err(err, errlen, "container id too long");
		goto fail;
	}
	if (c.nocg && with_cg)
		gv_note(rec, "memory/cpu limits not applied: runsc could not "
		    "set up host cgroups");
	else if (with_cg)
		gv_cgname(rec, rec->cgroup, sizeof(rec->cgroup));
	if ((fd = open(pidf, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		rec->init_pid = (pid_t)atoi(buf);
		rec->init_start = rec->init_pid > 0 ?
		    sbx_proc_start(rec->init_pid) : 0;
	}
	/* the parent of the per-command groups; also proves that the
	 * sandbox has its cgroupfs.  The agent makes it before it listens
	 * (and does not listen without it): its answer says so, without
	 * the cost of a runsc exec */
	if (!gv_agent_up(rec) && gv_root_sh(&c, rec, "CAP_DAC_OVERRIDE",
	    "mkdir -p " GV_CG, "", msg, sizeof(msg)) != 0) {
		sbx_err(err, errlen, "runsc exec (command groups): %s", msg);
		goto fail;
	}
	close(logfd);
	free(sc);
	return 0;
fail:
	close(logfd);
	free(sc);
	{
		char e2[8];

		gv_destroy(rec, e2, sizeof(e2));
	}
	return -1;
}

/* Appends a string to a JSON array. */
static int
gv_push(json_t *a, const char *s)
{
	return json_array_append_new(a, json_string(s));
}

static int
gv_is_file(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

/*
 * In the forked child of spawn() when stdout or stderr is a regular
 * file: gVisor would write such a file at its own offset (from 0), so
 * "sluice-run read ... >>log" would overwrite and "2>&1" would garble.
 * Those streams go through pipes; this process copies them to the files
 * with write(), which keeps the file's offset and O_APPEND, and exits
 * with the status of "runsc exec" once it ends.  Never returns.
 */
static void
gv_relay(const char **av, const struct sbx_cmd *cmd)
{
	int fds[2] = { cmd->fd_out, cmd->fd_err }, rd[2] = { -1, -1 };
	int wr[2], p[2], i, fd, st = 0;
	char buf[16384];
	ssize_t n;
	pid_t pid;

	for (i = 0; i < 2; i++) {
		wr[i] = fds[i];
		if (!gv_is_file(fds[i]))
			continue;
		if (pipe2(p, O_CLOEXEC) != 0)
			_exit(125);
		rd[i] = p[0];
		wr[i] = p[1];
	}
	if ((pid = fork()) < 0)
		_exit(125);
	if (pid == 0)
		gv_exec_child(av, cmd->fd_in, wr[0], wr[1], 0);
	/* keep only the files and our pipe ends: a copy of sluice-run's
	 * lock or pipes here would outlive it */
	for (fd = 3; fd < 1024; fd++)
		if (fd != fds[0] && fd != fds[1] && fd != rd[0] && fd != rd[1])
			close(fd);
	for (;;) {
		struct pollfd pf[2];
		int idx[2], np = 0, k;

		for (i = 0; i < 2; i++)
			if (rd[i] >= 0) {
				pf[np].fd = rd[i];
				pf[np].events = POLLIN;
				pf[np].revents = 0;
				idx[np++] = i;
			}
		if (np > 0)
			(void)poll(pf, np, 100);
		else
			usleep(100000);
		for (k = 0; k < np; k++) {
			if (pf[k].revents == 0)
				continue;
			i = idx[k];
			if ((n = read(rd[i], buf, sizeof(buf))) <= 0) {
				close(rd[i]);
				rd[i] = -1;
			} else if (write(fds[i], buf, n) != n)
				_exit(125);
		}
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
	}
	/* a background job may hold a pipe open: once the command has
	 * ended, take what is there and stop */
	for (i = 0; i < 2; i++)
		if (rd[i] >= 0) {
			(void)fcntl(rd[i], F_SETFL, O_NONBLOCK);
			while ((n = read(rd[i], buf, sizeof(buf))) > 0)
				if (write(fds[i], buf, n) != n)
					break;
		}
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static int
gv_spawn(struct sbx_rec *rec, const struct sbx_cmd *cmd, struct sbx_proc *out,
    char *err, size_t errlen)
{
	static unsigned seq;
	static const char *const caps[] = { "CAP_SETUID", "CAP_SETGID",
	    "CAP_SETPCAP", NULL };
	struct gv_ctx c;
	char procf[SBX_PATH_MAX + 160], lim[64], uid[16], gid[16], *sc = NULL;
	const char *av[GV_ARGS_MAX];
	json_t *args = NULL, *p = NULL;
	int i, fd, rc = -1;
	pid_t pid;

	if (gv_ctx_init(&c, rec, err, errlen) != 0)
		return -1;
	if (cmd->argv == NULL || cmd->argv[0] == NULL)
		return sbx_err(err, errlen, "empty command");
	/* env -i would take it for a variable */
	if (strchr(cmd->argv[0], '=') != NULL)
		return sbx_err(err, errlen, "a command name may not hold '='");
	memset(out, 0, sizeof(*out));
	/* the agent's when it is up ("a..." tags, so kill_tree and release
	 * know whom to ask), else one runsc exec ("c...") */
	snprintf(out->tag, sizeof(out->tag), "a%lld-%d-%u",
	    (long long)sbx_now_ms(), (int)getpid(), seq);
	if ((rc = sbx_gv_agent_spawn(rec, cmd, out, err, errlen)) != 1) {
		seq++;
		return rc;
	}
	rc = -1;
	memset(out, 0, sizeof(*out));
	snprintf(out->tag, sizeof(out->tag), "c%lld-%d-%u",
	    (long long)sbx_now_ms(), (int)getpid(), seq++);
	args = json_array();
	gv_push(args, "/bin/sh");
	gv_push(args, "-c");
	gv_push(args, gv_wrapper);
	gv_push(args, "sh");
	gv_push(args, out->tag);
	/* the record's: a sandbox made before per-sandbox uids keeps its
	 * own (1000) */
	snprintf(uid, sizeof(uid), "%u", (unsigned)rec->host_uid);
	snprintf(gid, sizeof(gid), "%u", (unsigned)rec->host_gid);
	gv_push(args, uid);
	gv_push(args, gid);
	if ((sc = gv_seccomp(rec)) == NULL) {
		sbx_err(err, errlen, "%s/seccomp.hex: %s", rec->dir,
		    strerror(errno));
		goto out;
	}
	gv_push(args, sc);
	{
		/* exec'd processes do not get OCI rlimits: set them inside,
		 * after the drop (lowering needs no privilege) */
		gv_push(args, "prlimit");
		gv_push(args, "--core=0");
		if (rec->lim.fsize_bytes) {
			snprintf(lim, sizeof(lim), "--fsize=%llu",
			    (unsigned long long)rec->lim.fsize_bytes);
			gv_push(args, lim);
		}
		if (rec->lim.nofile) {
			snprintf(lim, sizeof(lim), "--nofile=%llu",
			    (unsigned long long)rec->lim.nofile);
			gv_push(args, lim);
		}
		if (rec->lim.nproc) {
			snprintf(lim, sizeof(lim), "--nproc=%llu",
			    (unsigned long long)rec->lim.nproc);
			gv_push(args, lim);
		}
		gv_push(args, "--");
	}
	gv_push(args, "env");
	gv_push(args, "-i");
	/* the directory is entered as the sandbox user, after the drop (runsc
	 * would enter it as root, and fail with its own words and 128): a
	 * missing one is exit 125 and env's message, as under ns */
	gv_push(args, "-C");
	gv_push(args, cmd->cwd != NULL ? cmd->cwd : SBX_WORKDIR);
	gv_push(args, "--");	/* what follows are assignments, never options */
	for (i = 0; cmd->envp != NULL && cmd->envp[i] != NULL; i++)
		if (strchr(cmd->envp[i], '=') != NULL)
			gv_push(args, cmd->envp[i]);
	for (i = 0; cmd->argv[i] != NULL; i++)
		gv_push(args, cmd->argv[i]);
	/* the process file keeps the environment out of the host's ps */
	p = json_pack("{s:{s:i, s:i}, s:o, s:[s], s:s, s:o, s:b}",
	    "user", "uid", 0, "gid", 0, "args", args,
	    "env", "PATH=/usr/local/bin:/usr/bin:/bin",
	    "cwd", "/",
	    "capabilities", gv_caps(caps), "noNewPrivileges", 0);
	args = NULL;
	snprintf(procf, sizeof(procf), "%s/exec-%s.json", rec->dir, out->tag);
	/* 0600: the environment may hold tokens */
	fd = open(procf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (p == NULL || fd < 0 || json_dumpfd(p, fd, 0) != 0) {
		sbx_err(err, errlen, "cannot write %s", procf);
		if (fd >= 0)
			close(fd);
		goto out;
	}
	if (close(fd) != 0) {
		sbx_err(err, errlen, "%s: %s", procf, strerror(errno));
		goto out;
	}
	{
		const char *a[] = { "exec", "--process", procf, c.id, NULL };

		if (gv_argv(&c, av, a) != 0) {
			sbx_err(err, errlen, "too many runsc arguments");
			goto out;
		}
	}
	out->start_ms = sbx_now_ms();
	if ((pid = fork()) < 0) {
		sbx_err(err, errlen, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		if (gv_is_file(cmd->fd_out) || gv_is_file(cmd->fd_err))
			gv_relay(av, cmd);
		gv_exec_child(av, cmd->fd_in, cmd->fd_out, cmd->fd_err, 0);
	}
	/* "runsc exec" exits with the command's status, 128+N for a signal */
	out->pid = pid;
	rc = 0;
out:
	free(sc);
	json_decref(args);
	json_decref(p);
	return rc;
}

static int
gv_kill_tree(struct sbx_rec *rec, const struct sbx_proc *p, char *err,
    size_t errlen)
{
	struct gv_ctx c;
	char msg[256];

	/* the agent's command groups are where runsc exec's are: if the
	 * agent cannot empty one, the runsc exec below still can */
	if (p->tag[0] == 'a' && sbx_gv_agent_call(rec, AG_KILL, p->tag, msg,
	    sizeof(msg)) == 0)
		return 0;
	if (gv_ctx_init(&c, rec, err, errlen) != 0)
		return -1;
	if (gv_root_sh(&c, rec, "CAP_KILL", gv_killer, p->tag, msg,
	    sizeof(msg)) != 0)
		return sbx_err(err, errlen, "killing command group %s: %s",
		    p->tag, msg[0] ? msg : "still not empty");
	return 0;
}

static void
gv_release(struct sbx_rec *rec, const struct sbx_proc *p)
{
	struct gv_ctx c;
	char procf[SBX_PATH_MAX + 160];

	/* the agent removes an agent command's group itself once the
	 * command has exited (a RELEASE was one more connection, and one
	 * more worker forked inside, per command): nothing to do here,
	 * and nothing that blocks (execd calls this inline for them) */
	if (p->tag[0] == 'a')
		return;
	snprintf(procf, sizeof(procf), "%s/exec-%s.json", rec->dir, p->tag);
	unlink(procf);
	if (gv_ctx_init(&c, rec, NULL, 0) != 0)
		return;
	/* fails, harmlessly, while background processes are in the group */
	(void)gv_root_sh(&c, rec, NULL, "rmdir " GV_CG "/\"$1\" 2>/dev/null; "
	    "exit 0", p->tag, NULL, 0);
}

static int
gv_pause(struct sbx_rec *rec, const char *verb, char *err, size_t errlen)
{
	struct gv_ctx c;
	char msg[256];
	const char *a[] = { verb, NULL, NULL };

	if (gv_ctx_init(&c, rec, err, errlen) != 0)
		return -1;
	a[1] = c.id;
	if (gv_run(&c, rec, a, -1, msg, sizeof(msg)) != 0)
		return sbx_err(err, errlen, "runsc %s: %s", verb, msg);
	return 0;
}

static int
gv_suspend(struct sbx_rec *rec, char *err, size_t errlen)
{
	if (gv_pause(rec, "pause", err, errlen) != 0)
		return -1;
	rec->suspended = 1;
	return 0;
}

static int
gv_resume(struct sbx_rec *rec, char *err, size_t errlen)
{
	if (gv_pause(rec, "resume", err, errlen) != 0)
		return -1;
	rec->suspended = 0;
	return 0;
}

static int
gv_alive(const struct sbx_rec *rec)
{
	if (rec->init_pid <= 0 || rec->init_start == 0)
		return 0;
	return sbx_proc_start(rec->init_pid) == rec->init_start;
}

/* Waits up to ms for the process (pid, started at start) to be gone
 * or a zombie; 0 then, -1 when it is still there. */
static int
gv_wait_gone(pid_t pid, unsigned long long start, int ms)
{
	int64_t until = sbx_now_ms() + ms;

	while (start != 0 && sbx_proc_start(pid) == start) {
		if (sbx_now_ms() >= until)
			return -1;
		usleep(1000);
	}
	return 0;
}

/* The gofer of this sandbox (runsc's state file names it; its command
 * line must say runsc-gofer and this sandbox's --root, so that a pid
 * reused since is never taken for it), and its start time; 0 when it
 * is not there. */
static pid_t
gv_gofer(const struct gv_ctx *c, const struct sbx_rec *rec,
    unsigned long long *start)
{
	char p[SBX_PATH_MAX * 4], cmd[SBX_PATH_MAX + 64];
	json_int_t v = 0;
	json_t *j;
	ssize_t n;
	int fd;

	*start = 0;
	if (snprintf(p, sizeof(p), "%s/runsc/%s_sandbox:%s.state", rec->dir,
	    c->id, c->id) >= (int)sizeof(p) ||
	    (j = json_load_file(p, 0, NULL)) == NULL)
		return 0;
	v = json_integer_value(json_object_get(j, "goferPid"));
	json_decref(j);
	if (v <= 1 || v > 0x3fffffff)
		return 0;
	snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)v);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, cmd, sizeof(cmd) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	cmd[n] = '\0';
	/* argv[0] "runsc-gofer", argv[1] "--root=<dir>/runsc" */
	if (strcmp(cmd, "runsc-gofer") != 0 || (size_t)n < sizeof("runsc-gofer")
	    || strcmp(cmd + sizeof("runsc-gofer"), c->root) != 0)
		return 0;
	*start = sbx_proc_start((pid_t)v);
	return *start != 0 ? (pid_t)v : 0;
}

/*
 * The sandbox ended without runsc: its process and its gofer killed,
 * runsc's state (the sandbox's own --root) removed.  "runsc delete"
 * kills the same two but then waits, polling every 100 ms, for the
 * sandbox process to leave the process table, which only its parent's
 * reaping does: runsc's exit left it to the host's PID 1, and a PID 1
 * that reaps slowly made every delete take seconds.  A zombie holds
 * nothing of the sandbox's (memory, files, mounts, its cgroup).  0, or
 * -1 when runsc delete is still needed.
 */
static int
gv_kill_direct(const struct gv_ctx *c, struct sbx_rec *rec)
{
	char p[SBX_PATH_MAX + 16];
	unsigned long long gst;
	struct dirent *de;
	pid_t gofer;
	DIR *d;

	if (!gv_alive(rec))
		return -1;
	gofer = gv_gofer(c, rec, &gst);
	if (kill(rec->init_pid, SIGKILL) != 0 ||
	    gv_wait_gone(rec->init_pid, rec->init_start, 5000) != 0)
		return -1;
	/* the gofer leaves once the sandbox's connections close; a kill
	 * makes sure */
	if (gofer > 0 && (kill(gofer, SIGKILL) != 0 ||
	    gv_wait_gone(gofer, gst, 5000) != 0))
		return -1;
	snprintf(p, sizeof(p), "%s/runsc", rec->dir);
	if ((d = opendir(p)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			(void)unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	return 0;
}

static int
gv_destroy(struct sbx_rec *rec, char *err, size_t errlen)
{
	static const char *const ctl[] = { "memory", "cpu", "cpuacct", "pids",
	    "cpuset", "blkio", "devices", "freezer", "net_cls", "net_prio",
	    "perf_event", "hugetlb", "systemd", "unified", NULL };
	struct gv_ctx c;
	char msg[256], p[SBX_PATH_MAX + 64], cg[SBX_ID_MAX + 48];
	int i, have = gv_ctx_init(&c, rec, NULL, 0) == 0;
	int64_t until;

	if (have && gv_kill_direct(&c, rec) == 0)
		have = 0;	/* runsc has nothing more to do */
	if (have) {
		const char *r[] = { "resume", c.id, NULL };
		const char *k[] = { "kill", c.id, "KILL", NULL };
		const char *d[] = { "delete", "--force", c.id, NULL };
		const char *s[] = { "state", c.id, NULL };

		/* a paused sandbox must run to die */
		(void)gv_run(&c, rec, r, -1, NULL, 0);
		(void)gv_run(&c, rec, k, -1, NULL, 0);
		(void)gv_run(&c, rec, d, -1, msg, sizeof(msg));
		if (gv_run(&c, rec, s, -1, NULL, 0) == 0)
			return sbx_err(err, errlen, "runsc delete %s: %s",
			    c.id, msg);
	}
	/* without runsc (removed since create) the sandbox process still
	 * has to go */
	for (i = 0; i < 200 && gv_alive(rec); i++) {
		if (i == 0 || i == 100)
			kill(rec->init_pid, SIGKILL);
		usleep(10000);
	}
	if (gv_alive(rec))
		return sbx_err(err, errlen, "sandbox process %d does not die",
		    (int)rec->init_pid);
	/* the gofer is gone: the image comes off the host (the loop
	 * device, if there was one, clears itself with its last mount) */
	gv_image_unroot(rec);
	if (gv_rootfs_mounted(rec))
		return sbx_err(err, errlen, "%s/bundle/rootfs: still mounted",
		    rec->dir);
	sbx_image_detach(rec);
	sbx_log_stop(rec->dir);
	/* runsc delete removes them; this covers a runsc that died and
	 * gv_kill_direct, after which the threads of the sandbox process
	 * and its ptrace stubs may still be leaving them for a moment
	 * (EBUSY): bounded */
	gv_cgname(rec, cg, sizeof(cg));
	until = sbx_now_ms() + 3000;
	for (i = 0; ctl[i] != NULL; i++) {
		snprintf(p, sizeof(p), "/sys/fs/cgroup/%s%s", ctl[i], cg);
		while (rmdir(p) != 0 && errno == EBUSY && sbx_now_ms() < until)
			usleep(1000);
	}
	snprintf(p, sizeof(p), "/sys/fs/cgroup%s", cg);
	while (rmdir(p) != 0 && errno == EBUSY && sbx_now_ms() < until)
		usleep(1000);
	return 0;
}

/*
 * The OOM kills in the sandbox's host cgroup (runsc made it, from
 * cgroupsPath: rec->cgroup; "" when created without host cgroups).  The
 * memory limit is the whole sandbox's there, so a command that takes too
 * much is killed by the host's OOM killer inside that group: its
 * memory.events (v2) or memory.oom_control (v1) counts it.
 */
static int
gv_oom_kills(const struct sbx_rec *rec, uint64_t *n)
{
	char p[SBX_PATH_MAX + 64], line[128];
	unsigned long long v;
	size_t i;
	FILE *f;
	int rc = -1;

	if (rec->cgroup[0] != '/')
		return -1;
	for (i = 0; i < 2 && rc != 0; i++) {
		if (i == 0)
			snprintf(p, sizeof(p), "/sys/fs/cgroup%s/memory.events",
			    rec->cgroup);
		else
			snprintf(p, sizeof(p), "/sys/fs/cgroup/memory%s/"
			    "memory.oom_control", rec->cgroup);
		if ((f = fopen(p, "re")) == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL)
			if (sscanf(line, "oom_kill %llu", &v) == 1) {
				*n = v;
				rc = 0;
			}
		fclose(f);
	}
	return rc;
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
	.oom_kills = gv_oom_kills,
	.port_connect = sbx_gv_agent_port_connect,
	.port_reply = sbx_gv_agent_port_reply,
	.resize = sbx_gv_agent_resize,
	.tty_signal = sbx_gv_agent_tty_signal,
};
