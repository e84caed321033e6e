/*
 * sbx_ns.c: the Linux namespaces backend.
 *
 * A sandbox is a holder process ("init", pid 1 of its own pid namespace)
 * that owns a user, mount, pid, net, ipc and uts namespace.  Its root is
 * read-only: the sandbox's image (rec->image, sbx_image.h), mounted on the
 * host's side and attached in its mount namespace, or without one a tmpfs
 * with the host's /usr and a few /etc files.  It pivots into it, brings
 * loopback up, starts sluice-shim and then reaps.  With cgroup v1 it is
 * also the sandbox's agent: commands are forked inside by a worker of
 * its, one connection each (see "the agent" below).  Otherwise (v2, no
 * cgroups, no socket) commands enter its namespaces with setns(2), user
 * first, and are forked once more so that they are children in its pid
 * namespace.  Either way whatever they leave behind reparents to the
 * holder and survives.
 *
 * Process trees are found through cgroups when the host lets us make
 * them (a v1 freezer per command, or a v2 group per command), and
 * otherwise by walking /proc for processes of the sandbox's pid
 * namespace that were not there when the command started (so, without
 * cgroups, a timeout also takes what a concurrent command of the same
 * chat started meanwhile).  A setsid double fork escapes neither.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>

#include "sandbox-glue/agent/agent_wire.h"
#include "sandbox-glue/executor/backend/sbx-int.h"
#include "sandbox-glue/executor/backend/sbx_image_mount.h"

#define CG_V1		"/sys/fs/cgroup"
#define CG_NAME		"sluice-run"
#define INIT_STACK	(256 * 1024)
#define ROOT_TMPFS	"size=16m,mode=0755"
/* where the new root is built, in the holder's private mount namespace
 * (hiding the host's directory there only from the holder) */
#define ROOT_BUILD	"/tmp"

extern char **environ;

/* ---- small file helpers ---- */

static int
write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;
	size_t n = strlen(s);

	if (fd < 0)
		return -1;
	if (write(fd, s, n) != (ssize_t)n)
		rc = -1;
	if (close(fd) != 0)
		rc = -1;
	return rc;
}

/*
 * Close every descriptor but 0-2 and those in keep: the holder and the
 * command's parent never exec, so without this they would keep the
 * caller's lock files (and their flocks) open for their whole life.
 */
static void
close_others(const int *keep, int nkeep)
{
	struct dirent *de;
	int fds[1024], n = 0, i, k;
	DIR *d = opendir("/proc/self/fd");

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL && n < 1024)
		if (de->d_name[0] != '.')
			fds[n++] = atoi(de->d_name);
	closedir(d);
	for (i = 0; i < n; i++) {
		if (fds[i] <= 2)
			continue;
		for (k = 0; k < nkeep && keep[k] != fds[i]; k++)
			;
		if (k == nkeep)
			close(fds[i]);
	}
}

/* ---- cgroups ---- */

/*
 * rec->cgroup holds "v1", "v2:<dir>" or "" (none).  v1 uses the memory,
 * pids, cpu and freezer hierarchies under /sys/fs/cgroup/<c>/sluice-run/
 * <chat>, with one freezer child per command; v2 uses <root>/sluice-run/
 * <chat>/init for the holder and <chat>/<tag> per command.
 */
static const char *const cg_v1_ctl[] = { "memory", "pids", "cpu", "freezer" };
#define CG_V1_N (sizeof(cg_v1_ctl) / sizeof(cg_v1_ctl[0]))

/* The group's name: the chat and a hash of its state directory, so that
 * two state directories (two test runs) never share a group. */
static void
cg_name(char *buf, size_t len, const struct sbx_rec *rec)
{
	snprintf(buf, len, "%s.%08x", rec->chat,
	    (unsigned)sbx_dir_hash(rec->dir));
}

static void
cg_path(char *buf, size_t len, const struct sbx_rec *rec, const char *ctl,
    const char *sub, const char *file)
{
	char n[SBX_ID_MAX + 16];

	cg_name(n, sizeof(n), rec);
	if (strncmp(rec->cgroup, "v2:", 3) == 0)
		snprintf(buf, len, "%s/%s/%s%s%s%s%s", rec->cgroup + 3, CG_NAME,
		    n, sub ? "/" : "", sub ? sub : "", file ? "/" : "",
		    file ? file : "");
	else
		snprintf(buf, len, "%s/%s/%s/%s%s%s%s%s", CG_V1, ctl, CG_NAME,
		    n, sub ? "/" : "", sub ? sub : "", file ? "/" : "",
		    file ? file : "");
}

static int
cg_is_v2(const struct sbx_rec *rec)
{
	return strncmp(rec->cgroup, "v2:", 3) == 0;
}

static int
cg_write(const struct sbx_rec *rec, const char *ctl, const char *sub,
    const char *file, const char *val)
{
	char p[SBX_PATH_MAX + 128];

	cg_path(p, sizeof(p), rec, ctl, sub, file);
	return write_file(p, val);
}

/* mkdir 0755, an existing directory is fine */
#define mkdir_ok(p)	sbx_mkdir((p), 0755)

/* Find a v2 mount: /sys/fs/cgroup itself when it is cgroup2, else (with
 * hybrid set) the unified hierarchy of a hybrid host, which has no
 * controllers but can still freeze and kill. */
static int
cg_v2_root(char *buf, size_t len, int hybrid)
{
	struct stat st;

	if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0) {
		snprintf(buf, len, "/sys/fs/cgroup");
		return 0;
	}
	if (hybrid && stat("/sys/fs/cgroup/unified/cgroup.controllers", &st)
	    == 0) {
		snprintf(buf, len, "/sys/fs/cgroup/unified");
		return 0;
	}
	return -1;
}

/* Set one limit; a failure is added to the note. */
static void
cg_limit(struct sbx_rec *rec, const char *ctl, const char *file,
    unsigned long long v, int cpu_max)
{
	char val[64];
	size_t n = strlen(rec->note);

	if (cpu_max)
		snprintf(val, sizeof(val), "%llu 100000", v);
	else
		snprintf(val, sizeof(val), "%llu", v);
	if (cg_write(rec, ctl, NULL, file, val) == 0)
		return;
	snprintf(rec->note + n, sizeof(rec->note) - n, "%s%s not set (%s)",
	    n ? "; " : "", file, strerror(errno));
}

/* Make the groups of one version; -1 with the failing path in p. */
static int
cg_make(struct sbx_rec *rec, char *p, size_t plen)
{
	size_t i;

	if (cg_is_v2(rec)) {
		snprintf(p, plen, "%s/%s", rec->cgroup + 3, CG_NAME);
		if (mkdir_ok(p) != 0)
			return -1;
		/* let the sandboxes' groups have the controllers; where
		 * they are not available the limits below say so */
		snprintf(p, plen, "%s/cgroup.subtree_control", rec->cgroup + 3);
		(void)write_file(p, "+memory +pids +cpu");
		snprintf(p, plen, "%s/%s/cgroup.subtree_control", rec->cgroup + 3,
		    CG_NAME);
		(void)write_file(p, "+memory +pids +cpu");
		cg_path(p, plen, rec, NULL, NULL, NULL);
		if (mkdir_ok(p) != 0)
			return -1;
		cg_path(p, plen, rec, NULL, "init", NULL);
		return mkdir_ok(p);
	}
	for (i = 0; i < CG_V1_N; i++) {
		snprintf(p, plen, "%s/%s/%s", CG_V1, cg_v1_ctl[i], CG_NAME);
		if (mkdir_ok(p) != 0)
			return -1;
		cg_path(p, plen, rec, cg_v1_ctl[i], NULL, NULL);
		if (mkdir_ok(p) != 0)
			return -1;
	}
	return 0;
}

/*
 * Make the sandbox's groups and set its limits.  rec->cgroup on entry:
 * "" choose (v1 where its freezer is writable, else v2), "v1" or "v2"
 * only that one, "off" none.  On return "v1", "v2:<root>" or "" (none,
 * with a note).
 */
static void
cg_setup(struct sbx_rec *rec)
{
	char p[SBX_PATH_MAX + 128], root[256], want[8];
	const struct sbx_limits *l = &rec->lim;

	snprintf(want, sizeof(want), "%.7s", rec->cgroup);
	rec->cgroup[0] = '\0';
	if (strcmp(want, "off") == 0) {
		snprintf(rec->note, sizeof(rec->note), "cgroups off by "
		    "configuration: no memory/pids/cpu limits, process trees "
		    "found through /proc");
		return;
	}
	snprintf(p, sizeof(p), "%s/freezer", CG_V1);
	if (strcmp(want, "v2") != 0 && access(p, W_OK) == 0)
		snprintf(rec->cgroup, sizeof(rec->cgroup), "v1");
	else if (strcmp(want, "v1") != 0 && cg_v2_root(root, sizeof(root),
	    strcmp(want, "v2") == 0) == 0)
		snprintf(rec->cgroup, sizeof(rec->cgroup), "v2:%s", root);
	else {
		snprintf(rec->note, sizeof(rec->note), "no writable cgroup%s%s: "
		    "no memory/pids/cpu limits, process trees found through "
		    "/proc", want[0] ? " " : " v1 or v2", want);
		return;
	}
	if (cg_make(rec, p, sizeof(p)) != 0) {
		snprintf(rec->note, sizeof(rec->note), "cgroup %.2s: %.160s: %s; "
		    "no memory/pids/cpu limits, process trees found through "
		    "/proc", rec->cgroup, p, strerror(errno));
		rec->cgroup[0] = '\0';
		return;
	}
	if (!cg_is_v2(rec)) {
		if (l->memory_bytes) {
			char v[32];

			cg_limit(rec, "memory", "memory.limit_in_bytes",
			    l->memory_bytes, 0);
			/* no swap on top, where swap accounting is on */
			snprintf(v, sizeof(v), "%llu",
			    (unsigned long long)l->memory_bytes);
			(void)cg_write(rec, "memory", NULL,
			    "memory.memsw.limit_in_bytes", v);
		}
		if (l->pids)
			cg_limit(rec, "pids", "pids.max", l->pids, 0);
		if (l->cpu_pct) {
			cg_limit(rec, "cpu", "cpu.cfs_period_us", 100000, 0);
			cg_limit(rec, "cpu", "cpu.cfs_quota_us", l->cpu_pct * 1000,
			    0);
		}
		return;
	}
	if (l->memory_bytes) {
		cg_limit(rec, NULL, "memory.max", l->memory_bytes, 0);
		(void)cg_write(rec, NULL, NULL, "memory.swap.max", "0");
	}
	if (l->pids)
		cg_limit(rec, NULL, "pids.max", l->pids, 0);
	if (l->cpu_pct)
		cg_limit(rec, NULL, "cpu.max", l->cpu_pct * 1000, 1);
}

/* Move process who into the sandbox's groups; sub is the per-command
 * group (made here) or NULL for the holder.  Done from the host side:
 * the holder, once in its user namespace, may no longer write there. */
static int
cg_join(const struct sbx_rec *rec, const char *sub, pid_t who)
{
	char p[SBX_PATH_MAX + 128], pid[32];
	size_t i;

	snprintf(pid, sizeof(pid), "%d", (int)who);
	if (rec->cgroup[0] == '\0')
		return 0;
	if (cg_is_v2(rec)) {
		cg_path(p, sizeof(p), rec, NULL, sub ? sub : "init", NULL);
		if (mkdir_ok(p) != 0)
			return -1;
		return cg_write(rec, NULL, sub ? sub : "init", "cgroup.procs",
		    pid);
	}
	for (i = 0; i < CG_V1_N; i++) {
		const char *s = strcmp(cg_v1_ctl[i], "freezer") == 0 ? sub :
		    NULL;

		cg_path(p, sizeof(p), rec, cg_v1_ctl[i], s, NULL);
		if (mkdir_ok(p) != 0)
			return -1;
		if (cg_write(rec, cg_v1_ctl[i], s, "cgroup.procs", pid) != 0)
			return -1;
	}
	return 0;
}

/*
 * The holder placed in its groups at its birth (issue 26 point 2).  A
 * process moved there after the clone (its pid written to cgroup.procs)
 * takes the kernel's cgroup_threadgroup_rwsem for writing, which waits
 * for an RCU grace period: 10-19 ms of a 25 ms create on this 2-core
 * host, on the first of the four v1 hierarchies.  On v2 the clone puts
 * the child there (clone3 with CLONE_INTO_CGROUP, ns_create).  v1 has no
 * such flag, but a thread that moves only itself (0 written to a group's
 * tasks file) needs no such lock (the kernel's cgroup_procs_write_start:
 * neither exec nor exit can race it), and a child is born in the groups
 * of the thread that clones it: the creating thread steps into the
 * sandbox's groups for the clone and back into its own right after it.
 * Where a step fails, the move after the clone (cg_join) as before.
 */
struct cg_back {
	size_t n;                       /* hierarchies stepped into */
	char tasks[CG_V1_N][SBX_PATH_MAX];      /* this thread's own */
};

/* The tasks file of this thread's own group in hierarchy ctl (the
 * /proc/thread-self/cgroup line whose controllers name it). */
static int
cg_v1_own(const char *ctl, char *buf, size_t len)
{
	char line[SBX_PATH_MAX], *c, *path, *tok, *save;
	FILE *f = fopen("/proc/thread-self/cgroup", "re");
	int rc = -1;

	if (f == NULL)
		return -1;
	while (rc != 0 && fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if ((c = strchr(line, ':')) == NULL ||
		    (path = strchr(c + 1, ':')) == NULL)
			continue;
		*path++ = '\0';
		for (tok = strtok_r(c + 1, ",", &save); tok != NULL;
		    tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, ctl) == 0 && snprintf(buf, len,
			    "%s/%s%s/tasks", CG_V1, ctl, strcmp(path, "/") ==
			    0 ? "" : path) < (int)len) {
				rc = 0;
				break;
			}
	}
	fclose(f);
	return rc;
}

/* This thread back in its own groups (those cg_v1_enter stepped out
 * of).  A group that would not take it back (removed meanwhile, not
 * ours to remove) leaves it at that hierarchy's root rather than in the
 * sandbox's group, whose kill at destroy would reach this process; -1
 * when even that failed. */
static int
cg_v1_leave(struct cg_back *bk)
{
	char root[SBX_PATH_MAX];
	int rc = 0;

	while (bk->n > 0) {
		bk->n--;
		if (write_file(bk->tasks[bk->n], "0") == 0)
			continue;
		snprintf(root, sizeof(root), "%s/%s/tasks", CG_V1,
		    cg_v1_ctl[bk->n]);
		fprintf(stderr, "sluice-run: back to %s: %s; to %s\n",
		    bk->tasks[bk->n], strerror(errno), root);
		if (write_file(root, "0") != 0)
			rc = -1;
	}
	return rc;
}

/* This thread into the sandbox's v1 groups (the holder's, no sub);
 * -1 (nothing moved) when one cannot be entered. */
static int
cg_v1_enter(const struct sbx_rec *rec, struct cg_back *bk)
{
	char p[SBX_PATH_MAX + 128];
	size_t i;

	bk->n = 0;
	for (i = 0; i < CG_V1_N; i++) {
		cg_path(p, sizeof(p), rec, cg_v1_ctl[i], NULL, "tasks");
		if (cg_v1_own(cg_v1_ctl[i], bk->tasks[i],
		    sizeof(bk->tasks[i])) != 0 || write_file(p, "0") != 0) {
			(void)cg_v1_leave(bk);
			return -1;
		}
		bk->n = i + 1;
	}
	return 0;
}

/* Pids in a group file (cgroup.procs); returns how many were signalled. */
static int
cg_signal(const char *procs, int sig)
{
	char line[32];
	FILE *f = fopen(procs, "re");
	int n = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		pid_t pid = (pid_t)atoi(line);

		if (pid > 0 && kill(pid, sig) == 0)
			n++;
	}
	fclose(f);
	return n;
}

/* v1 freezer: set state and wait (bounded) until it holds. */
static int
cg_v1_freeze(const struct sbx_rec *rec, const char *sub, int freeze)
{
	char p[SBX_PATH_MAX + 128], st[32];
	int i;

	cg_path(p, sizeof(p), rec, "freezer", sub, "freezer.state");
	if (write_file(p, freeze ? "FROZEN" : "THAWED") != 0)
		return -1;
	for (i = 0; i < 200; i++) {
		if (img_read_line(AT_FDCWD, p, st, sizeof(st)) != 0)
			return -1;
		if (strncmp(st, freeze ? "FROZEN" : "THAWED", 6) == 0)
			return 0;
		if (freeze)
			write_file(p, "FROZEN");
		usleep(5000);
	}
	return -1;
}

/* Kill everything in a group; the group is removed when empty. */
static void
cg_kill(const struct sbx_rec *rec, const char *sub)
{
	char p[SBX_PATH_MAX + 128], d[SBX_PATH_MAX + 128];
	int i;

	if (cg_is_v2(rec)) {
		cg_path(p, sizeof(p), rec, NULL, sub, "cgroup.kill");
		if (write_file(p, "1") != 0) {
			cg_path(p, sizeof(p), rec, NULL, sub, "cgroup.freeze");
			write_file(p, "1");
			cg_path(p, sizeof(p), rec, NULL, sub, "cgroup.procs");
			cg_signal(p, SIGKILL);
			cg_path(p, sizeof(p), rec, NULL, sub, "cgroup.freeze");
			write_file(p, "0");
		}
		cg_path(d, sizeof(d), rec, NULL, sub, NULL);
	} else {
		cg_v1_freeze(rec, sub, 1);
		cg_path(p, sizeof(p), rec, "freezer", sub, "cgroup.procs");
		cg_signal(p, SIGKILL);
		cg_v1_freeze(rec, sub, 0);
		cg_path(d, sizeof(d), rec, "freezer", sub, NULL);
	}
	for (i = 0; i < 200 && rmdir(d) != 0 && errno == EBUSY; i++)
		usleep(5000);
}

/* Remove a per-command group if it is empty; if background processes
 * remain, leave it (they keep running; destroy() removes it). */
static void
cg_release(const struct sbx_rec *rec, const char *sub)
{
	char d[SBX_PATH_MAX + 128];

	if (rec->cgroup[0] == '\0' || sub == NULL || sub[0] == '\0')
		return;
	cg_path(d, sizeof(d), rec, cg_is_v2(rec) ? NULL : "freezer", sub, NULL);
	(void)rmdir(d);
}

/* Remove all of the sandbox's groups (children first). */
static void
cg_remove_all(const struct sbx_rec *rec)
{
	char p[SBX_PATH_MAX + 128];
	struct dirent *de;
	size_t i, n = cg_is_v2(rec) ? 1 : CG_V1_N;
	DIR *d;
	int k;

	if (rec->cgroup[0] == '\0')
		return;
	for (i = 0; i < n; i++) {
		const char *ctl = cg_is_v2(rec) ? NULL : cg_v1_ctl[i];

		cg_path(p, sizeof(p), rec, ctl, NULL, NULL);
		if ((d = opendir(p)) != NULL) {
			while ((de = readdir(d)) != NULL) {
				char c[SBX_PATH_MAX + 400];

				if (de->d_type != DT_DIR || de->d_name[0] == '.')
					continue;
				snprintf(c, sizeof(c), "%s/%s", p, de->d_name);
				for (k = 0; k < 100 && rmdir(c) != 0 &&
				    errno == EBUSY; k++)
					usleep(10000);
			}
			closedir(d);
		}
		for (k = 0; k < 100 && rmdir(p) != 0 && errno == EBUSY; k++)
			usleep(10000);
	}
}

/* ---- /proc walk: processes of the sandbox's pid namespace ---- */

static int
ns_ino(pid_t pid, const char *ns, char *buf, size_t len)
{
	char p[64];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)pid, ns);
	if ((n = readlink(p, buf, len - 1)) < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* Processes that ran before a command: (pid, start time) pairs. */
struct snap {
	size_t n;
	struct { pid_t pid; uint64_t start; } *v;
};

static int
snap_has(const struct snap *s, pid_t pid, uint64_t start)
{
	size_t i;

	for (i = 0; s != NULL && i < s->n; i++)
		if (s->v[i].pid == pid && s->v[i].start == start)
			return 1;
	return 0;
}

/*
 * Signal the processes of the sandbox's pid namespace other than its
 * holder and those in pre (NULL: none).  With out, record them there
 * instead of signalling.  Returns how many.
 */
static int
proc_signal_x(const struct sbx_rec *rec, const struct snap *pre, int sig,
    FILE *out)
{
	char want[64], have[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (ns_ino(rec->init_pid, "pid", want, sizeof(want)) != 0)
		return 0;
	if ((d = opendir("/proc")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		pid_t pid = (pid_t)atoi(de->d_name);
		uint64_t st;

		if (pid <= 0 || pid == rec->init_pid)
			continue;
		if (ns_ino(pid, "pid", have, sizeof(have)) != 0 ||
		    strcmp(have, want) != 0)
			continue;
		st = sbx_proc_start(pid);
		if (st == 0 || snap_has(pre, pid, st))
			continue;
		if (out != NULL) {
			fprintf(out, "%d %llu\n", (int)pid,
			    (unsigned long long)st);
			n++;
		} else if (kill(pid, sig) == 0)
			n++;
	}
	closedir(d);
	return n;
}

static int
proc_signal(const struct sbx_rec *rec, int sig)
{
	return proc_signal_x(rec, NULL, sig, NULL);
}

/* Without cgroups a command's tree is "what was not there before it":
 * the snapshot is kept in rec->dir/pre-<tag> for kill_tree. */
static void
snap_path(char *buf, size_t len, const struct sbx_rec *rec, const char *tag)
{
	snprintf(buf, len, "%s/pre-%s", rec->dir, tag);
}

static void
snap_save(const struct sbx_rec *rec, const char *tag)
{
	char p[SBX_PATH_MAX + 160];
	FILE *f;

	snap_path(p, sizeof(p), rec, tag);
	if ((f = fopen(p, "we")) == NULL)
		return;
	proc_signal_x(rec, NULL, 0, f);
	fclose(f);
}

static void
snap_load(const struct sbx_rec *rec, const char *tag, struct snap *s)
{
	char p[SBX_PATH_MAX + 160];
	unsigned long long st;
	void *nv;
	FILE *f;
	int pid;

	memset(s, 0, sizeof(*s));
	snap_path(p, sizeof(p), rec, tag);
	if ((f = fopen(p, "re")) == NULL)
		return;
	while (fscanf(f, "%d %llu", &pid, &st) == 2) {
		if ((nv = realloc(s->v, (s->n + 1) * sizeof(*s->v))) == NULL)
			break;
		s->v = nv;
		s->v[s->n].pid = (pid_t)pid;
		s->v[s->n].start = st;
		s->n++;
	}
	fclose(f);
}

/* Live (not zombie) processes whose pid namespace is want. */
static int
proc_count_ns(const char *want)
{
	char have[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	if ((d = opendir("/proc")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		pid_t pid = (pid_t)atoi(de->d_name);

		if (pid > 0 && ns_ino(pid, "pid", have, sizeof(have)) == 0 &&
		    strcmp(have, want) == 0 && sbx_proc_start(pid) != 0)
			n++;
	}
	closedir(d);
	return n;
}

/* Boot-time clock ticks now, comparable with /proc starttime. */
static uint64_t
ticks_now(void)
{
	struct timespec ts;
	long hz = sysconf(_SC_CLK_TCK);

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * hz + (uint64_t)ts.tv_nsec / (1000000000 / hz);
}

/* ---- becoming the sandbox user (in the holder's namespaces) ---- */

static void
set_rlimit(int res, uint64_t v)
{
	struct rlimit rl = { (rlim_t)v, (rlim_t)v };

	(void)setrlimit(res, &rl);
}

/*
 * The first of become_user: the bounding and ambient sets emptied,
 * no_new_privs, the seccomp filter (nothing the process does until its
 * exec is a call the filter refuses).  The filter was compiled before
 * (the holder's, or the daemon's for the setns path): nothing here
 * allocates, as a process made by ag_vfork may not.  Returns -1 with
 * errno and *what.
 */
static int
confine_early(const char **what)
{
	static char sc_err[200];
	int c;

	*what = "bounding set";
	for (c = 0; c <= 63; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
			return -1;
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	*what = "seccomp";
	if (sbx_seccomp_load(sc_err, sizeof(sc_err)) != 0) {
		*what = sc_err;
		return -1;
	}
	return 0;
}

/* Drop to SBX_UID with no capabilities, no_new_privs, seccomp and the
 * rlimits.  Returns -1 with errno; the caller reports and _exits. */
static int
become_user(const struct sbx_rec *rec, const char **what)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	gid_t g = SBX_GID;

	if (confine_early(what) != 0)
		return -1;
	set_rlimit(RLIMIT_CORE, 0);
	if (rec->lim.nofile)
		set_rlimit(RLIMIT_NOFILE, rec->lim.nofile);
	if (rec->lim.fsize_bytes)
		set_rlimit(RLIMIT_FSIZE, rec->lim.fsize_bytes);
	if (rec->lim.nproc)
		set_rlimit(RLIMIT_NPROC, rec->lim.nproc);
	*what = "setgroups";
	if (setgroups(1, &g) != 0)
		return -1;
	*what = "setresgid";
	if (setresgid(SBX_GID, SBX_GID, SBX_GID) != 0)
		return -1;
	*what = "setresuid";
	if (setresuid(SBX_UID, SBX_UID, SBX_UID) != 0)
		return -1;
	*what = "capset";
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capset, &h, d) != 0)
		return -1;
	*what = "no_new_privs";
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	umask(022);
	return 0;
}

/* ---- the holder ---- */

struct init_arg {
	struct sbx_rec *rec;
	int go_rd;              /* parent says: maps written */
	int rep_wr;             /* we say: a NUL byte ok, or an error line */
	int commit_fd;          /* parent says: the record names us */
	int log_fd;
	/* O_PATH descriptors of the bind sources, opened by the holder
	 * while it still has the host's uid 0: as the mapped uid it could
	 * not search directories like a 0700 /root or mktemp -d */
	int src_fd[3];          /* workspace, session dir, shim */
	int image_fd;           /* the image's detached mount (sbx_image.h),
	                         * -1: the host's /usr */
	int cg_fd;              /* the sandbox's v1 freezer group, for the
	                         * agent's command groups; -1: no agent */
	int lis_fd[2];          /* the shim's listeners (shim_listeners) */
	int nlis;
};

enum { SRC_WS, SRC_SESS, SRC_SHIM };

static const char *
src_path(const struct init_arg *a, int which, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", a->src_fd[which]);
	return buf;
}

static void
init_fail(struct init_arg *a, const char *what, const char *path)
{
	char m[SBX_PATH_MAX + 256];
	int n;

	n = snprintf(m, sizeof(m), "%s %s: %s", what, path ? path : "",
	    strerror(errno));
	if (n > 0)
		(void)!write(a->rep_wr, m, (size_t)n < sizeof(m) ? (size_t)n :
		    sizeof(m) - 1);
	_exit(1);
}

/* Mount flags a bind remount must keep (locked in a user namespace). */
static unsigned long
kept_flags(const char *path)
{
	struct statvfs sv;
	unsigned long f = 0;

	if (statvfs(path, &sv) != 0)
		return 0;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

/* Bind host path src on dst (made as a dir or a file), optionally
 * read-only. */
static int
bind_at(const char *src, const char *dst, int ro, int dir)
{
	if (dir) {
		if (mkdir_ok(dst) != 0)
			return -1;
	} else if (access(dst, F_OK) != 0 && sbx_write_file(dst, NULL, 0644) != 0)
		return -1;
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0)
		return -1;
	if (ro && mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY |
	    kept_flags(dst), NULL) != 0)
		return -1;
	return 0;
}

static void
etc_build(struct init_arg *a, const char *root)
{
	char src[SBX_PATH_MAX], dst[SBX_PATH_MAX * 2];
	struct stat st;
	size_t i;

	snprintf(dst, sizeof(dst), "%s/etc", root);
	if (mkdir_ok(dst) != 0)
		init_fail(a, "mkdir", dst);
	for (i = 0; i < sbx_etc_keep_n; i++) {
		snprintf(src, sizeof(src), "/etc/%s", sbx_etc_keep[i]);
		snprintf(dst, sizeof(dst), "%s/etc/%s", root, sbx_etc_keep[i]);
		if (lstat(src, &st) != 0)
			continue;
		if (S_ISLNK(st.st_mode))
			sbx_copy_link(src, dst);
		else if (S_ISDIR(st.st_mode)) {
			if (bind_at(src, dst, 1, 1) != 0)
				init_fail(a, "bind", src);
		} else if (S_ISREG(st.st_mode) && bind_at(src, dst, 1, 0) != 0)
			/* a read-only bind shares the host's pages: a copy
			 * in the root's tmpfs cost every sandbox ~230 KiB
			 * of memory (issue 26, density) */
			(void)sbx_copy_file(src, dst);
	}
	if (sbx_etc_ids(root, SBX_UID, SBX_GID, dst, sizeof(dst)) != 0)
		init_fail(a, "write", dst);
}

static void
dev_build(struct init_arg *a, const char *root)
{
	static const char *const nodes[] = { "null", "zero", "full", "random",
	    "urandom", "tty" };
	static const char *const links[][2] = { { "fd", "/proc/self/fd" },
	    { "stdin", "/proc/self/fd/0" }, { "stdout", "/proc/self/fd/1" },
	    { "stderr", "/proc/self/fd/2" }, { "ptmx", "pts/ptmx" } };
	char src[64], dst[SBX_PATH_MAX + 64];
	size_t i;

	snprintf(dst, sizeof(dst), "%s/dev", root);
	if (mkdir_ok(dst) != 0 || mount("tmpfs", dst, "tmpfs", MS_NOSUID |
	    MS_NOEXEC, "size=64k,mode=0755") != 0)
		init_fail(a, "mount tmpfs", dst);
	for (i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
		snprintf(dst, sizeof(dst), "%s/dev/%s", root, nodes[i]);
		if (access(src, F_OK) == 0 && bind_at(src, dst, 0, 0) != 0)
			init_fail(a, "bind", src);
	}
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(dst, sizeof(dst), "%s/dev/%s", root, links[i][0]);
		(void)!symlink(links[i][1], dst);
	}
	snprintf(dst, sizeof(dst), "%s/dev/shm", root);
	if (mkdir_ok(dst) != 0 || mount("tmpfs", dst, "tmpfs", MS_NOSUID |
	    MS_NODEV, "size=64m,mode=1777") != 0)
		init_fail(a, "mount tmpfs", dst);
	snprintf(dst, sizeof(dst), "%s/dev/pts", root);
	/* ptys are a convenience: go on without them */
	if (mkdir_ok(dst) == 0)
		(void)mount("devpts", dst, "devpts", MS_NOSUID | MS_NOEXEC,
		    "newinstance,ptmxmode=0666,mode=0620");
}

/*
 * The shim of an image's sandbox: copied from the host into a tmpfs of
 * its own on /opt/sluice, read-only once there.  A bind would show the
 * host path of the file in every mountinfo of the sandbox.
 */
static void
shim_copy(struct init_arg *a, const char *root)
{
	char p[SBX_PATH_MAX + 64], src[64], opt[64], buf[65536];
	struct stat st;
	int in, out;
	ssize_t n;

	snprintf(src, sizeof(src), "/proc/self/fd/%d", a->src_fd[SRC_SHIM]);
	if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0 || fstat(in, &st) != 0)
		init_fail(a, "open", a->rec->shim);
	snprintf(p, sizeof(p), "%s/opt/sluice", root);
	snprintf(opt, sizeof(opt), "size=%llu,mode=0755",
	    (unsigned long long)st.st_size + (64 << 10));
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, opt) != 0)
		init_fail(a, "mount tmpfs", p);
	snprintf(p, sizeof(p), "%s%s", root, SBX_SHIM_PATH);
	if ((out = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755)) < 0)
		init_fail(a, "create", p);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			init_fail(a, "write", p);
	if (n < 0 || close(out) != 0)
		init_fail(a, "copy", a->rec->shim);
	close(in);
	snprintf(p, sizeof(p), "%s/opt/sluice", root);
	if (mount(NULL, p, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
	    opt) != 0)
		init_fail(a, "remount read-only", p);
}

static void
root_build(struct init_arg *a)
{
	struct sbx_rec *rec = a->rec;
	char root[SBX_PATH_MAX], p[SBX_PATH_MAX * 2];
	char opt[128], src[64];
	struct stat st;
	size_t i;

	snprintf(root, sizeof(root), "%s", ROOT_BUILD);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		init_fail(a, "make-rprivate", "/");
	if (a->image_fd >= 0) {
		/* the image is the root, mount points and /etc included;
		 * mounted on the host's side (a user namespace may not mount
		 * EROFS), attached here */
		if (syscall(SYS_move_mount, a->image_fd, "", AT_FDCWD, root,
		    MOVE_MOUNT_F_EMPTY_PATH) != 0)
			init_fail(a, "attach the image at", root);
		close(a->image_fd);
		a->image_fd = -1;
	} else {
		if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV,
		    ROOT_TMPFS) != 0)
			init_fail(a, "mount tmpfs", root);
		snprintf(p, sizeof(p), "%s/usr", root);
		if (bind_at("/usr", p, 1, 1) != 0)
			init_fail(a, "bind", "/usr");
		for (i = 0; i < sbx_root_top_n; i++) {
			snprintf(src, sizeof(src), "/%s", sbx_root_top[i]);
			snprintf(p, sizeof(p), "%s/%s", root, sbx_root_top[i]);
			if (lstat(src, &st) != 0)
				continue;
			if (S_ISLNK(st.st_mode))
				sbx_copy_link(src, p);
			else if (S_ISDIR(st.st_mode) && bind_at(src, p, 1, 1) !=
			    0)
				init_fail(a, "bind", src);
		}
		etc_build(a, root);
	}
	dev_build(a, root);
	snprintf(p, sizeof(p), "%s/proc", root);
	if (mkdir_ok(p) != 0 || mount("proc", p, "proc", MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, NULL) != 0)
		init_fail(a, "mount proc", p);
	snprintf(p, sizeof(p), "%s/tmp", root);
	snprintf(opt, sizeof(opt), "size=%llu,mode=1777",
	    (unsigned long long)(rec->lim.tmp_bytes ? rec->lim.tmp_bytes :
	    64ull << 20));
	if (mkdir_ok(p) != 0 || mount("tmpfs", p, "tmpfs", MS_NOSUID |
	    MS_NODEV, opt) != 0)
		init_fail(a, "mount tmpfs", p);
	snprintf(p, sizeof(p), "%s/var", root);
	(void)mkdir_ok(p);
	snprintf(p, sizeof(p), "%s/var/tmp", root);
	(void)!symlink("/tmp", p);
	snprintf(p, sizeof(p), "%s/home", root);
	(void)mkdir_ok(p);
	snprintf(p, sizeof(p), "%s%s", root, SBX_HOME);
	snprintf(opt, sizeof(opt), "size=%llu,mode=0700,uid=%d,gid=%d",
	    (unsigned long long)(rec->lim.home_bytes ? rec->lim.home_bytes :
	    64ull << 20), SBX_UID, SBX_GID);
	if (mkdir_ok(p) != 0 || mount("tmpfs", p, "tmpfs", MS_NOSUID |
	    MS_NODEV, opt) != 0)
		init_fail(a, "mount tmpfs", p);
	snprintf(p, sizeof(p), "%s%s", root, SBX_WORKDIR);
	if (bind_at(src_path(a, SRC_WS, src, sizeof(src)), p, 0, 1) != 0)
		init_fail(a, "bind", rec->workspace);
	if (mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV |
	    kept_flags(p), NULL) != 0)
		init_fail(a, "remount nosuid", p);
	snprintf(p, sizeof(p), "%s/run", root);
	if (mkdir_ok(p) != 0 || mount("tmpfs", p, "tmpfs", MS_NOSUID |
	    MS_NODEV | MS_NOEXEC, "size=1m,mode=0755") != 0)
		init_fail(a, "mount tmpfs", p);
	snprintf(p, sizeof(p), "%s%s", root, SBX_SOCK_DIR);
	if (bind_at(src_path(a, SRC_SESS, src, sizeof(src)), p, 0, 1) != 0)
		init_fail(a, "bind", rec->session_dir);
	snprintf(p, sizeof(p), "%s/opt", root);
	(void)mkdir_ok(p);
	snprintf(p, sizeof(p), "%s/opt/sluice", root);
	(void)mkdir_ok(p);
	snprintf(p, sizeof(p), "%s%s", root, SBX_SHIM_PATH);
	if (rec->image[0] != '\0')
		shim_copy(a, root);
	else if (bind_at(src_path(a, SRC_SHIM, src, sizeof(src)), p, 1, 0) !=
	    0)
		init_fail(a, "bind", rec->shim);
	snprintf(p, sizeof(p), "%s/root", root);
	(void)mkdir(p, 0700);

	/* pivot into it and drop the host's tree */
	if (chdir(root) != 0)
		init_fail(a, "chdir", root);
	if (syscall(SYS_pivot_root, ".", ".") != 0)
		init_fail(a, "pivot_root", root);
	if (umount2(".", MNT_DETACH) != 0)
		init_fail(a, "umount old root", "");
	if (chdir("/") != 0)
		init_fail(a, "chdir", "/");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY |
	    MS_NOSUID | MS_NODEV, NULL) != 0)
		init_fail(a, "remount read-only", "/");
}

static void
loopback_up(struct init_arg *a)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		init_fail(a, "socket", "lo");
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		init_fail(a, "SIOCGIFFLAGS", "lo");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
		init_fail(a, "SIOCSIFFLAGS", "lo");
	close(s);
}

static pid_t
shim_start(struct init_arg *a)
{
	static char *const argv[] = { "sluice-shim", NULL };
	static char *const argv_fd[2][6] = {
		{ "sluice-shim", "-L", "3", NULL },
		{ "sluice-shim", "-L", "3", "-L", "4", NULL } };
	static char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
	const char *what;
	int i;
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	/* the holder's listeners at 3 (and 4), kept across the exec: they
	 * are above 9, so neither is overwritten before it is copied */
	for (i = 0; i < a->nlis; i++)
		if (dup2(a->lis_fd[i], 3 + i) < 0) {
			fprintf(stderr, "sluice-run init: shim: dup2: %s\n",
			    strerror(errno));
			_exit(126);
		}
	if (become_user(a->rec, &what) != 0) {
		fprintf(stderr, "sluice-run init: shim: %s: %s\n", what,
		    strerror(errno));
		_exit(126);
	}
	execve(SBX_SHIM_PATH, a->nlis > 0 ? argv_fd[a->nlis - 1] : argv, envp);
	fprintf(stderr, "sluice-run init: exec %s: %s\n", SBX_SHIM_PATH,
	    strerror(errno));
	_exit(127);
}

/*
 * The holder is a clone of its creator, sluice-run or the daemon, with
 * its command line: as pid 1 of the sandbox anyone inside could read the
 * host paths and options in it (/proc/1/cmdline).  The argument area is
 * overwritten in place with "sbx-init" (its bounds are in /proc/self/stat,
 * fields 48 and 49).
 */
static void
hide_cmdline(void)
{
	char buf[1024], *p;
	unsigned long long start = 0, end = 0;
	int i, fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	/* the command name may hold spaces: count from after the last ')',
	 * which ends field 2 */
	if ((p = strrchr(buf, ')')) == NULL)
		return;
	for (i = 2; i < 48 && p != NULL; i++)  /* to the space before 48 */
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p + 1, "%llu %llu", &start, &end) != 2 ||
	    end <= start || end - start > (1ull << 20))
		return;
	memset((void *)(uintptr_t)start, 0, (size_t)(end - start));
	snprintf((char *)(uintptr_t)start, (size_t)(end - start), "sbx-init");
}

/* The shim's port (sluice-shim's default: 127.0.0.1:3128). */
#define NS_SHIM_PORT	3128

/* One listener of the shim's port on the loopback address sa (made by
 * the holder, above fd 9); -1 with errno. */
static int
shim_listener(const struct sockaddr *sa, socklen_t salen)
{
	int fd, hi = -1, one = 1, saved;

	if ((fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
	    (sa->sa_family != AF_INET6 || setsockopt(fd, IPPROTO_IPV6,
	    IPV6_V6ONLY, &one, sizeof(one)) == 0) && bind(fd, sa, salen) ==
	    0 && listen(fd, SOMAXCONN) == 0)
		hi = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	saved = errno;
	close(fd);
	errno = saved;
	return hi;
}

/*
 * The shim's listeners, 127.0.0.1 and [::1] on its port, made by the
 * holder before it starts the shim (issue 26 point 2), which takes them
 * with --listen-fd: the sandbox is ready as soon as they exist (a
 * connection made before the shim accepts waits in the backlog), not
 * once a poll of /proc/net/tcp sees the shim listening (4-5 ms of a
 * create here: the shim's exec and start, and the poll's 2 ms steps),
 * and a shim restarted after a crash takes the same sockets, so the
 * port never refuses.  Without IPv6 the IPv4 one alone, as the shim
 * does; without the IPv4 one (cannot happen in a fresh network
 * namespace) none, and the shim makes its own as before.
 */
static void
shim_listeners(struct init_arg *a)
{
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;

	a->nlis = 0;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(NS_SHIM_PORT);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((a->lis_fd[0] = shim_listener((struct sockaddr *)&sin,
	    sizeof(sin))) < 0) {
		fprintf(stderr, "sluice-run init: listen 127.0.0.1:%d: %s (the "
		    "shim listens itself)\n", NS_SHIM_PORT, strerror(errno));
		return;
	}
	a->nlis = 1;
	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(NS_SHIM_PORT);
	sin6.sin6_addr = in6addr_loopback;
	if ((a->lis_fd[1] = shim_listener((struct sockaddr *)&sin6,
	    sizeof(sin6))) >= 0)
		a->nlis = 2;
}

/* 1 when a TCP socket of this network namespace listens on port (the
 * reader's own: /proc/self/net/tcp). */
static int
tcp_listening(unsigned port)
{
	char line[256];
	unsigned lport, state;
	int found = 0;
	FILE *f = fopen("/proc/self/net/tcp", "re");

	if (f == NULL)
		return -1;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		/* "  0: 0100007F:0C38 00000000:0000 0A ..." (0A: LISTEN) */
		if (sscanf(line, " %*u: %*x:%x %*x:%*x %x", &lport, &state) ==
		    2 && lport == port && state == 0x0A)
			found = 1;
	fclose(f);
	return found;
}

/*
 * Wait (bounded) until the shim listens, so that the sandbox is ready
 * only once a command can reach the proxy: on a loaded machine the
 * shim's exec and bind took longer than the first command after the
 * create, whose curl found nothing on 127.0.0.1:3128.  Read from
 * /proc, not probed with a connection, which the shim would relay to
 * sluiced as an empty one (and a log record).  A shim that never
 * listens says why in init.log; the sandbox comes up all the same.
 */
static void
shim_wait(int64_t budget_ms)
{
	int64_t end = sbx_now_ms() + budget_ms;
	struct timespec ts = { 0, 2 * 1000 * 1000 };

	while (tcp_listening(NS_SHIM_PORT) == 0 && sbx_now_ms() < end)
		nanosleep(&ts, NULL);
}

static volatile sig_atomic_t init_stop;

static void
on_term(int sig)
{
	(void)sig;
	init_stop = 1;
}

/* ---- the agent: commands forked inside by the holder's workers ---- */

/*
 * A command's last steps, in its own process inside the namespaces, on
 * both paths: its fds, its own session (no controlling terminal, so
 * /dev/tty is not the caller's: keys, TIOCSTI), the directory, the drop
 * to the sandbox user (become_user), exactly envp.  Never returns.
 */
static void
cmd_exec(const struct sbx_rec *rec, int in, int out, int err,
    const char *cwd, char *const *argv, char *const *envp)
{
	const char *what = "dup2";
	char m[512];
	int n, e;

	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		goto fail;
	closefrom(3);
	what = "setsid";
	if (setsid() < 0)
		goto fail;
	what = "chdir";
	if (chdir(cwd ? cwd : SBX_WORKDIR) != 0)
		goto fail;
	if (become_user(rec, &what) != 0)
		goto fail;
	environ = (char **)envp;
	execvp(argv[0], argv);
	e = errno;
	/* no stdio: under ag_vfork this runs on the worker's memory, and
	 * dprintf allocates */
	n = snprintf(m, sizeof(m), "sluice-run: %s: %s\n", argv[0],
	    strerror(e));
	(void)!write(2, m, n > 0 && (size_t)n < sizeof(m) ? (size_t)n :
	    sizeof(m) - 1);
	_exit(e == ENOENT ? 127 : 126);
fail:
	n = snprintf(m, sizeof(m), "sluice-run: %s: %s\n", what,
	    strerror(errno));
	(void)!write(2, m, n > 0 && (size_t)n < sizeof(m) ? (size_t)n :
	    sizeof(m) - 1);
	_exit(125);
}

/*
 * The holder listens on AG_DIR/AG_SOCK (agent_wire.h), in a directory
 * of /dev that only root inside may enter; the host reaches it through
 * /proc/<holder>/root.  Workers wait in accept(): a worker serves one
 * command at a time and then waits for the next, so commands that come
 * one after another are served by the same worker and cost no fork of
 * the holder (a copy of the daemon: its page tables and ~270 mappings,
 * then the exec's teardown of them, were most of a command's start).
 * The holder makes a worker when a connection waits and none is idle:
 * the first command after an idle spell, or one beside a command still
 * running.  A command is then one connection: the worker takes SPAWN
 * with the command's three host fds (SCM_RIGHTS), makes the command's
 * group under the host's tag (a child of the sandbox's v1 freezer
 * group, which create() gave to the sandbox's root; kill_tree and
 * release find it as they find the setns path's), starts the command's
 * process as vfork does (ag_vfork: no copy of the worker's memory; the
 * process moves itself into the group, confines itself as the setns
 * path's does, cmd_exec, and execs), says STARTED, and does what the
 * drainer does there: passes output on until the command exits, hands
 * over what is buffered, closes the host's fds, says EXIT, then drops
 * what background jobs still write before it waits for the next
 * connection.  The worker stays in the sandbox's group, so once the
 * command's process is reaped its group holds only what it left
 * running.  A connection that ends before STARTED kills the group (the
 * host gave up); one that ends after it leaves the command running
 * (the daemon died: its commands run on, as the setns path's do) and
 * its EXIT unsaid.  The command's memory, pids and cpu groups are the
 * holder's: the sandbox's.
 */
#define AG_KILL_ROUNDS	100
#define AG_WORKER_IDLE	4	/* a worker's exit status: retired, idle */
/* How long a worker waits for a command before it retires: a sandbox
 * in use keeps one ready, an idle one is its holder and shim alone
 * (issue 26, density: a worker is a copy of the daemon's page tables
 * and mappings). */
#define AG_IDLE_MS	30000
/* Workers idle through a window this long were not needed: they retire
 * (ag_surplus). */
#define AG_SURPLUS_MS	5000
/* The workers the holder knows of: idle ones wait in accept().  More
 * busy at once than this and a connection waits for one to be free. */
#define AG_WORKERS_MAX	1024

static int ag_lfd = -1;
static int64_t ag_retry_ms;     /* no worker made before (one failed) */
static int ag_sigp[2] = { -1, -1 };
/* worker -> holder: its pid when it waits for a connection again, its
 * negated pid when it has taken one (4 bytes: one atomic pipe write) */
static int ag_nfd[2] = { -1, -1 };
static struct {
	pid_t pid;
	int idle;
	int told;               /* SIGUSR1 sent: it retires */
	int64_t since;          /* idle since (ms) */
} ag_wk[AG_WORKERS_MAX];
static int ag_nwk;

static void
ag_on_chld(int sig)
{
	int e = errno;

	(void)sig;
	if (ag_sigp[1] >= 0)
		(void)!write(ag_sigp[1], "", 1);
	errno = e;
}

static void
ag_off(const char *why)
{
	if (ag_lfd >= 0) {
		fprintf(stderr, "sluice-run init: agent off: %s (commands "
		    "enter with setns)\n", why);
		close(ag_lfd);
		(void)unlink(AG_DIR "/" AG_SOCK);
	}
	ag_lfd = -1;
}

/* In the holder, after the pivot: the socket, or nothing (setns). */
static void
ag_setup(struct init_arg *a)
{
	struct sockaddr_un sa;
	struct sigaction act;
	char err[256];

	if (a->cg_fd < 0)
		return;
	/* the workers make a group per command: a holder that cannot
	 * leaves commands to setns, rather than failing each */
	if (mkdirat(a->cg_fd, "agent-probe", 0755) != 0 ||
	    unlinkat(a->cg_fd, "agent-probe", AT_REMOVEDIR) != 0) {
		fprintf(stderr, "sluice-run init: agent: command groups: %s "
		    "(commands enter with setns)\n", strerror(errno));
		return;
	}
	/* compiled once here, for every command's process, which may not
	 * compile it itself (ag_vfork: no allocation); should it fail,
	 * the setns path compiles it again and says why */
	if (sbx_seccomp_prepare(err, sizeof(err)) != 0) {
		fprintf(stderr, "sluice-run init: agent: seccomp: %s "
		    "(commands enter with setns)\n", err);
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", AG_DIR, AG_SOCK);
	if ((mkdir(AG_DIR, 0700) != 0 && errno != EEXIST) ||
	    pipe2(ag_sigp, O_CLOEXEC | O_NONBLOCK) != 0 ||
	    pipe2(ag_nfd, O_CLOEXEC | O_NONBLOCK) != 0 ||
	    (ag_lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) < 0) {
		fprintf(stderr, "sluice-run init: agent: %s (commands enter "
		    "with setns)\n", strerror(errno));
		return;
	}
	if (bind(ag_lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(ag_lfd, 64) != 0) {
		ag_off(strerror(errno));
		return;
	}
	memset(&act, 0, sizeof(act));
	act.sa_handler = ag_on_chld;
	act.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &act, NULL);
}

/* Kill what is in a command group (bounded). */
static void
ag_kill_group(int cgfd, const char *tag)
{
	char p[AG_TAG_MAX + 16], buf[4096];
	pid_t me = getpid();
	int i, fd;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/cgroup.procs", tag);
	for (i = 0; i < AG_KILL_ROUNDS; i++) {
		char *s, *e;
		int any = 0;

		if ((fd = openat(cgfd, p, O_RDONLY | O_CLOEXEC)) < 0)
			return;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n < 0)
			return;
		buf[n] = '\0';
		for (s = buf; *s != '\0'; s = e) {
			long v = strtol(s, &e, 10);

			if (e == s)
				break;
			if (v > 1 && v != me && kill((pid_t)v, SIGKILL) == 0)
				any = 1;
			while (*e == '\n')
				e++;
		}
		if (!any)
			return;
		usleep(5000);
	}
}

/* Blocking write of all of p, 0 or -1. */
static int
ag_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t k = write(fd, c, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

/* One read of a command's pipe passed to the host's fd (dropped once
 * the host's end is gone or handed back): 1 passed, 2 nothing there
 * yet, 0 at EOF. */
static int
ag_pass(int *pfd, int *hfd)
{
	static char buf[16384];
	ssize_t n = read(*pfd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 2;
	if (n <= 0) {
		close(*pfd);
		*pfd = -1;
		return 0;
	}
	if (*hfd >= 0 && ag_write_all(*hfd, buf, (size_t)n) != 0) {
		close(*hfd);
		*hfd = -1;
	}
	return 1;
}

/* A SPAWN frame (AG_HDR, its payload req[0..n)) with three fds; 0 or -1.
 * The host sends it to the worker, the worker on to its command
 * process. */
static int
ag_send_spawn(int fd, const char *req, size_t n, const int fds[3])
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(3 * sizeof(int))];
	} u;
	unsigned char hdr[AG_HDR];
	struct iovec iov[2];
	struct msghdr m;
	size_t off;
	ssize_t k;

	ag_hdr_put(hdr, AG_SPAWN, (uint32_t)n);
	memset(&m, 0, sizeof(m));
	memset(&u, 0, sizeof(u));
	iov[0].iov_base = hdr;
	iov[0].iov_len = sizeof(hdr);
	iov[1].iov_base = (void *)(uintptr_t)req;
	iov[1].iov_len = n;
	m.msg_iov = iov;
	m.msg_iovlen = 2;
	m.msg_control = u.b;
	m.msg_controllen = sizeof(u.b);
	CMSG_FIRSTHDR(&m)->cmsg_level = SOL_SOCKET;
	CMSG_FIRSTHDR(&m)->cmsg_type = SCM_RIGHTS;
	CMSG_FIRSTHDR(&m)->cmsg_len = CMSG_LEN(3 * sizeof(int));
	memcpy(CMSG_DATA(CMSG_FIRSTHDR(&m)), fds, 3 * sizeof(int));
	while ((k = sendmsg(fd, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (k < (ssize_t)sizeof(hdr))
		return -1;
	/* the rest of a large request, without the fds */
	for (off = (size_t)k - sizeof(hdr); off < n; ) {
		k = send(fd, req + off, n - off, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		off += (size_t)k;
	}
	return 0;
}

/* The SPAWN frame and its three fds (in, out, err); 0, or -1. */
static int
ag_recv_spawn(int conn, char *req, size_t cap, size_t *len, int fds[3])
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(3 * sizeof(int))];
	} u;
	unsigned char hdr[AG_HDR];
	struct msghdr m;
	struct iovec iov = { hdr, sizeof(hdr) };
	struct cmsghdr *c;
	uint32_t n;
	size_t got = 0;
	ssize_t k, r;
	int t;

	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.b;
	m.msg_controllen = sizeof(u.b);
	while ((k = recvmsg(conn, &m, MSG_WAITALL | MSG_CMSG_CLOEXEC)) < 0 &&
	    errno == EINTR)
		;
	r = k;
	if (k != (ssize_t)sizeof(hdr) || (c = CMSG_FIRSTHDR(&m)) == NULL ||
	    c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(3 * sizeof(int)))
		goto fail;
	memcpy(fds, CMSG_DATA(c), 3 * sizeof(int));
	if (ag_hdr_get(hdr, &t, &n) != 0 || t != AG_SPAWN || n > cap)
		goto fail;
	while (got < n) {
		k = read(conn, req + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			goto fail;
		got += (size_t)k;
	}
	*len = n;
	return 0;
fail:
	/* what came with it, whatever its count (the worker lives on) */
	for (c = r > 0 ? CMSG_FIRSTHDR(&m) : NULL; c != NULL;
	    c = CMSG_NXTHDR(&m, c)) {
		size_t i, nfd;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfd; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int),
			    sizeof(fd));
			close(fd);
		}
	}
	fds[0] = fds[1] = fds[2] = -1;
	return -1;
}

/* What the command's process needs (ag_cmd_main runs on its worker's
 * memory: the request, the group, the three fds). */
struct ag_cmd {
	struct init_arg *a;
	const struct ag_spawn *s;
	int in, out, err;
};

/*
 * The command's process (ag_vfork: the worker waits until it has
 * exec'd or exited).  It moves itself into its group, made by the
 * worker: through tasks, not cgroup.procs, which as one thread it may,
 * and which takes no cgroup_threadgroup_rwsem (whose RCU grace period,
 * 10-19 ms here, the first command after a create would wait for).
 * Then the confinement of the setns path (cmd_exec).  Never returns.
 */
static int
ag_cmd_main(void *arg)
{
	const struct ag_cmd *c = arg;
	char p[AG_TAG_MAX + 16], m[AG_TAG_MAX + 200];
	int fd, n;

	ag_signals_default();
	snprintf(p, sizeof(p), "%s/tasks", c->s->tag);
	if ((fd = openat(c->a->cg_fd, p, O_WRONLY | O_CLOEXEC)) < 0 ||
	    write(fd, "0", 1) != 1) {
		/* no stdio here (cmd_exec says why) */
		n = snprintf(m, sizeof(m), "sluice-run: command group %s: "
		    "%s\n", c->s->tag, strerror(errno));
		(void)!write(c->err, m, n > 0 && (size_t)n < sizeof(m) ?
		    (size_t)n : sizeof(m) - 1);
		_exit(125);
	}
	close(fd);
	cmd_exec(c->a->rec, c->in, c->out, c->err, c->s->cwd, c->s->argv,
	    c->s->envp);
	return 125;
}

static void
ag_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The worker tells the holder it waits again (idle) or has taken a
 * connection. */
static void
ag_note(int idle)
{
	pid_t v = idle ? getpid() : -getpid();

	(void)!write(ag_nfd[1], &v, sizeof(v));
}

/* The output pipes after the exit: what is buffered is the command's,
 * then the host's ends go. */
static void
ag_flush(int *po, int *pe, int *ho, int *he)
{
	int i, *p[2] = { po, pe }, *h[2] = { ho, he };

	for (i = 0; i < 2; i++) {
		int r = 0;

		if (*p[i] < 0)
			continue;
		(void)fcntl(*p[i], F_SETFL, O_NONBLOCK);
		while (r++ < 256 && ag_pass(p[i], h[i]) == 1)
			;
		if (*p[i] >= 0)
			(void)fcntl(*p[i], F_SETFL, 0);
		if (*h[i] >= 0)
			close(*h[i]);
		*h[i] = -1;
	}
}

/* Until the command has exited: output passed on as it comes.  Its
 * wait status, or -1 (poll failed). */
static int
ag_follow(pid_t pid, int pidfd, int *conn, int *po, int *pe, int *ho,
    int *he)
{
	int st = 0;

	for (;;) {
		struct pollfd pf[4] = { { pidfd, POLLIN, 0 },
		    { *conn, POLLIN, 0 }, { *po, POLLIN, 0 },
		    { *pe, POLLIN, 0 } };

		if (poll(pf, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		/* the host says nothing after SPAWN: anything is its end,
		 * which no longer kills the command once it has started (a
		 * daemon that died leaves its commands running, as on the
		 * setns path; kills come from the host's kill_tree) */
		if (pf[1].revents) {
			close(*conn);
			*conn = -1;
		}
		if (pf[2].revents)
			(void)ag_pass(po, ho);
		if (pf[3].revents)
			(void)ag_pass(pe, he);
		if (pf[0].revents && waitpid(pid, &st, WNOHANG) == pid)
			return st;
	}
}

/* One command on one connection; every descriptor of it is closed on
 * return.  The group of a command that never started goes with it (the
 * host's release does not know a group it was never told of).  1 when it
 * has told the holder it is idle again (ag_note), else 0. */
static int
ag_serve(struct init_arg *a, int conn)
{
	static char req[AG_SPAWN_MAX];
	struct ag_spawn s;
	struct ag_cmd c;
	char err[AG_ERR_MAX];
	int fds[3] = { -1, -1, -1 }, po[2] = { -1, -1 }, pe[2] = { -1, -1 };
	int pidfd = -1, st, parsed = 0, made = 0, noted = 0;
	unsigned char b[4], e[2];
	pid_t pid = -1;
	size_t n;

	err[0] = '\0';
	if (ag_recv_spawn(conn, req, sizeof(req), &n, fds) != 0)
		goto gone;
	if (ag_spawn_parse(req, n, &s, err, sizeof(err)) != 0)
		goto gone;
	parsed = 1;
	/* the host says nothing after SPAWN: anything to read is its end
	 * (it gave up waiting, NS_AG_REPLY_MS): nothing starts then */
	{
		struct pollfd pf = { conn, POLLIN | POLLRDHUP, 0 };

		if (poll(&pf, 1, 0) != 0)
			goto gone;
	}
	/* the host's tag names the group (kill_tree, release) */
	if (mkdirat(a->cg_fd, s.tag, 0755) != 0) {
		snprintf(err, sizeof(err), "command group %s: %s", s.tag,
		    strerror(errno));
		goto gone;
	}
	made = 1;
	/* the limits of the request: a pooled sandbox gets its tenant's
	 * after the holder was made (this worker's copy of the record) */
	a->rec->lim.fsize_bytes = s.fsize;
	a->rec->lim.nofile = s.nofile;
	a->rec->lim.nproc = s.nproc;
	if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
		snprintf(err, sizeof(err), "agent: %s", strerror(errno));
		goto gone;
	}
	c.a = a;
	c.s = &s;
	c.in = fds[0];
	c.out = po[1];
	c.err = pe[1];
	if ((pid = ag_vfork(ag_cmd_main, &c)) < 0 ||
	    (pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0) {
		snprintf(err, sizeof(err), "agent: %s", strerror(errno));
		goto gone;
	}
	ag_close(&po[1]);
	ag_close(&pe[1]);
	ag_close(&fds[0]);
	ag_started_put(b, pid);
	if (ag_write_frame(conn, AG_STARTED, b, 4) != 0)
		goto gone;
	if ((st = ag_follow(pid, pidfd, &conn, &po[0], &pe[0], &fds[1],
	    &fds[2])) < 0)
		goto gone;
	ag_flush(&po[0], &pe[0], &fds[1], &fds[2]);
	if (WIFSIGNALED(st))
		ag_exit_put(e, 1, WTERMSIG(st));
	else
		ag_exit_put(e, 0, WEXITSTATUS(st));
	/* no background job holds the pipes: this worker is free once the
	 * host has the exit, and the holder must know it first.  Told after,
	 * the next command's connection (sent when the host has the exit)
	 * could reach the holder first, which would fork a worker for it. */
	if (po[0] < 0 && pe[0] < 0) {
		ag_note(1);
		noted = 1;
	}
	if (conn >= 0)
		(void)ag_write_frame(conn, AG_EXIT, e, 2);
	ag_close(&conn);
	ag_close(&pidfd);
	/* background jobs keep the pipes: their writes are dropped */
	while (po[0] >= 0 || pe[0] >= 0) {
		struct pollfd pf[2] = { { po[0], POLLIN, 0 },
		    { pe[0], POLLIN, 0 } };

		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			(void)ag_pass(&po[0], &fds[1]);
		if (pf[1].revents)
			(void)ag_pass(&pe[0], &fds[2]);
	}
	pid = -1;       /* reaped */
	made = 0;       /* the host's from here (release) */
gone:
	if (err[0] != '\0' && conn >= 0)
		(void)ag_write_frame(conn, AG_ERROR, err, strlen(err));
	if (made)
		ag_kill_group(a->cg_fd, s.tag);
	/* (under a sanitizer ag_vfork forks: it may not be in its group
	 * yet) */
	if (pid > 0) {
		(void)kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (made)
		(void)unlinkat(a->cg_fd, s.tag, AT_REMOVEDIR);
	if (parsed)
		ag_spawn_free(&s);
	if (pidfd >= 0)
		close(pidfd);
	util_close_pair(po);
	util_close_pair(pe);
	ag_close(&fds[0]);
	ag_close(&fds[1]);
	ag_close(&fds[2]);
	ag_close(&conn);
	return noted;
}

/* A worker the holder has told to retire (SIGUSR1: more are idle than
 * one); blocked but in ag_next's wait, so that it is never lost. */
static volatile sig_atomic_t ag_retire;

static void
ag_on_retire(int sig)
{
	(void)sig;
	ag_retire = 1;
}

/* A connection for a worker, which waits AG_IDLE_MS at most for one:
 * the connection, -1 (retire: none came, or the holder said so) or -2
 * (it cannot wait: the holder waits a second before the next one). */
static int
ag_next(void)
{
	int64_t end = sbx_now_ms() + AG_IDLE_MS;
	sigset_t open;

	sigemptyset(&open);
	for (;;) {
		struct pollfd pf = { ag_lfd, POLLIN, 0 };
		int64_t left = end - sbx_now_ms();
		struct timespec ts;
		int r, conn;

		if (left <= 0 || ag_retire)
			return -1;
		ts.tv_sec = (time_t)(left / 1000);
		ts.tv_nsec = (long)(left % 1000) * 1000000;
		if ((r = ppoll(&pf, 1, &ts, &open)) < 0 && errno != EINTR)
			return -2;
		if (r <= 0)
			continue;
		/* non-blocking: another worker may have taken it */
		if ((conn = accept4(ag_lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
			return conn;
		if (errno != EINTR && errno != EAGAIN &&
		    errno != ECONNABORTED)
			return -2;
	}
}

/*
 * A worker: waits for a connection, serves its command, waits again;
 * retires once none came for AG_IDLE_MS, or once the holder says more
 * are idle than one (AG_SURPLUS_MS).  Its pid, or -1.
 */
static pid_t
ag_worker(struct init_arg *a)
{
	struct sigaction sa;
	sigset_t usr1;
	pid_t me;
	int conn;

	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	/* blocked from birth: the holder's word waits for ag_next */
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	if ((me = fork()) != 0) {
		sigprocmask(SIG_UNBLOCK, &usr1, NULL);
		return me;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ag_on_retire;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	util_close_pair(ag_sigp);
	close(ag_nfd[0]);
	(void)prctl(PR_SET_NAME, "sbx-agent", 0, 0, 0);
	while ((conn = ag_next()) >= 0) {
		ag_note(0);
		if (!ag_serve(a, conn))
			ag_note(1);
	}
	_exit(conn == -1 ? AG_WORKER_IDLE : 1);
}

static int
ag_wk_find(pid_t pid)
{
	int i;

	for (i = 0; i < ag_nwk; i++)
		if (ag_wk[i].pid == pid)
			return i;
	return -1;
}

/* Idle workers not told to retire. */
static int
ag_free(void)
{
	int i, n = 0;

	for (i = 0; i < ag_nwk; i++)
		n += ag_wk[i].idle && !ag_wk[i].told;
	return n;
}

/* The fewest free workers seen in this AG_SURPLUS_MS window (0: the
 * window has no start yet). */
static int64_t ag_win_start;
static int ag_win_min;

static void
ag_win_see(void)
{
	int f = ag_free();

	if (ag_win_start != 0 && f < ag_win_min)
		ag_win_min = f;
}

/* A worker reaped: 1 when it was one of ours. */
static int
ag_wk_gone(pid_t pid, int status)
{
	int i = ag_wk_find(pid);

	if (i < 0)
		return 0;
	ag_wk[i] = ag_wk[--ag_nwk];
	ag_win_see();
	/* one that failed (its fork, pids.max): not at once again */
	if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 &&
	    WEXITSTATUS(status) != AG_WORKER_IDLE))
		ag_retry_ms = sbx_now_ms() + 1000;
	return 1;
}

/* What the workers said (pid: idle again, -pid: took a connection). */
static void
ag_wk_notes(void)
{
	pid_t got[64];
	ssize_t k;
	int i, j;

	while ((k = read(ag_nfd[0], got, sizeof(got))) > 0)
		for (i = 0; i < k / (ssize_t)sizeof(got[0]); i++) {
			int idle = got[i] > 0;

			if ((j = ag_wk_find(idle ? got[i] : -got[i])) < 0 ||
			    ag_wk[j].idle == idle)
				continue;
			ag_wk[j].idle = idle;
			ag_wk[j].since = sbx_now_ms();
			ag_win_see();
		}
}

/*
 * Workers that were idle through a whole AG_SURPLUS_MS window were not
 * needed in it: that many retire (SIGUSR1; those idle longest first,
 * one free worker always left to AG_IDLE_MS).  Commands side by side
 * leave idle workers behind, and commands one by one would otherwise
 * share them round, so that none is ever idle for AG_IDLE_MS.  The ms
 * until the window's end, or -1 (one worker or none: no window).
 */
static int
ag_surplus(int64_t now)
{
	int n, i;

	if (ag_nwk < 2) {
		ag_win_start = 0;
		return -1;
	}
	if (ag_win_start == 0) {
		ag_win_start = now;
		ag_win_min = ag_free();
	}
	if (now - ag_win_start < AG_SURPLUS_MS)
		return (int)(ag_win_start + AG_SURPLUS_MS - now);
	for (n = ag_win_min < ag_free() - 1 ? ag_win_min : ag_free() - 1;
	    n > 0; n--) {
		int old = -1;

		for (i = 0; i < ag_nwk; i++)
			if (ag_wk[i].idle && !ag_wk[i].told && (old < 0 ||
			    ag_wk[i].since < ag_wk[old].since))
				old = i;
		(void)kill(ag_wk[old].pid, SIGUSR1);
		ag_wk[old].told = 1;
	}
	ag_win_start = now;
	ag_win_min = ag_free();
	return AG_SURPLUS_MS;
}

/*
 * The connections waiting that no worker will take (none could be
 * made): each is told why at once, rather than left to the host's
 * bound (NS_AG_REPLY_MS), which it would wait out in its loop.
 */
static void
ag_refuse(const char *why)
{
	int i, conn;

	for (i = 0; i < 16; i++) {
		if ((conn = accept4(ag_lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			break;
		(void)ag_write_frame(conn, AG_ERROR, why, strlen(why));
		close(conn);
	}
}

/*
 * The holder's wait: a child's exit, a worker's note, a surplus idle
 * worker's time, or (while no worker is idle) a connection, for which it
 * makes one.  busy: a child was just reaped (more may be).
 */
static void
ag_wait(struct init_arg *a, int busy)
{
	struct pollfd pf[3] = { { ag_sigp[0], POLLIN, 0 },
	    { ag_nfd[0], POLLIN, 0 }, { ag_lfd, POLLIN, 0 } };
	int64_t now = sbx_now_ms();
	nfds_t n = 2;
	int ms = busy ? 0 : -1, sm = ag_surplus(now);
	char c[64];
	pid_t pid;

	/* (one told to retire takes no connection) */
	if (ag_free() == 0)
		n = 3;
	if (sm >= 0 && (ms < 0 || sm < ms))
		ms = sm;
	if (poll(pf, n, ms) <= 0)
		return;
	while (read(ag_sigp[0], c, sizeof(c)) > 0)
		;
	ag_wk_notes();
	if (n < 3 || !(pf[2].revents & POLLIN) || ag_free() > 0)
		return;
	if (ag_nwk >= AG_WORKERS_MAX) {
		ag_refuse("too many commands at once");
		return;
	}
	if (now < ag_retry_ms) {
		ag_refuse("no worker: a fork failed a moment ago (the "
		    "sandbox's pids limit?)");
		return;
	}
	if ((pid = ag_worker(a)) < 0) {
		char why[160];

		snprintf(why, sizeof(why), "no worker: fork: %s (the "
		    "sandbox's pids limit?)", strerror(errno));
		fprintf(stderr, "sluice-run init: agent: %s\n", why);
		ag_retry_ms = sbx_now_ms() + 1000;
		ag_refuse(why);
		return;
	}
	memset(&ag_wk[ag_nwk], 0, sizeof(ag_wk[0]));
	ag_wk[ag_nwk].pid = pid;
	ag_wk[ag_nwk].since = sbx_now_ms();
	ag_wk[ag_nwk++].idle = 1;
}

static int
init_main(void *arg)
{
	struct init_arg *a = arg;
	struct sigaction sa;
	pid_t shim, pid;
	int64_t last_start;
	char c;
	int st, fd, busy = 0;

	{
		int keep[5] = { a->go_rd, a->rep_wr, a->log_fd,
		    a->commit_fd, a->image_fd };

		close_others(keep, 5);
	}
	hide_cmdline();
	{
		/* sluice-run blocks signals while it creates: not ours, nor
		 * the shim's */
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
	}
	if (read(a->go_rd, &c, 1) != 1)
		_exit(1);
	close(a->go_rd);
	{
		const char *srcs[3] = { a->rec->workspace,
		    a->rec->session_dir, a->rec->shim };
		int i;

		for (i = 0; i < 3; i++)
			if ((a->src_fd[i] = open(srcs[i], O_PATH |
			    O_CLOEXEC)) < 0)
				init_fail(a, "open", srcs[i]);
	}
	if (setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0)
		init_fail(a, "setresuid", "0");
	/* Until sluice-run has saved the record that names this holder, the
	 * holder dies with it: a create killed half way must not leave a
	 * sandbox nobody can find.  Set after the uid change, which clears
	 * it; then a parent already gone shows as the commit socket's
	 * hang-up (only the parent holds the other end). */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	{
		struct pollfd pf = { a->commit_fd, POLLIN, 0 };

		if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLHUP))
			_exit(1);
	}
	(void)setsid();
	(void)prctl(PR_SET_NAME, "sbx-init", 0, 0, 0);
	if (dup2(a->log_fd, 1) < 0 || dup2(a->log_fd, 2) < 0)
		init_fail(a, "dup2", "log");
	if ((fd = open("/dev/null", O_RDONLY)) >= 0) {
		dup2(fd, 0);
		if (fd > 2)
			close(fd);
	}
	close(a->log_fd);
	/* the agent's command groups go in the sandbox's freezer group,
	 * reached before the pivot hides the host's /sys (v1 only: on v2
	 * and without cgroups commands enter with setns) */
	a->cg_fd = -1;
	if (strcmp(a->rec->cgroup, "v1") == 0) {
		char p[SBX_PATH_MAX + 128];

		cg_path(p, sizeof(p), a->rec, "freezer", NULL, NULL);
		a->cg_fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	root_build(a);
	if (sethostname("sandbox", 7) != 0)
		init_fail(a, "sethostname", "");
	loopback_up(a);
	shim_listeners(a);
	ag_setup(a);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* stderr is the log's pipe: should its reader be gone, a message
	 * is lost, not the sandbox */
	signal(SIGPIPE, SIG_IGN);
	shim = shim_start(a);
	last_start = sbx_now_ms();
	if (shim < 0)
		init_fail(a, "fork", "shim");
	if (a->nlis == 0)
		shim_wait(5000);
	/* ready: one NUL byte (an error is a line of text, and a holder
	 * that died says nothing at all) */
	(void)!write(a->rep_wr, "", 1);
	close(a->rep_wr);
	/* the record is saved (a byte), or the parent died (end of file);
	 * the answer tells the parent it may exit: before it, its death
	 * would still kill us */
	if (read(a->commit_fd, &c, 1) != 1)
		_exit(1);
	(void)prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
	(void)!write(a->commit_fd, "a", 1);
	close(a->commit_fd);
	/* reap all orphans; restart the shim at most once a second; make
	 * an agent's workers */
	while (!init_stop) {
		if (ag_lfd >= 0) {
			ag_wait(a, busy);
			busy = 0;
			if ((pid = waitpid(-1, &st, WNOHANG)) <= 0)
				continue;
			busy = 1;
		} else {
			pid = waitpid(-1, &st, 0);
			if (pid < 0 && errno == ECHILD)
				sleep(1);
		}
		if (pid > 0 && ag_wk_gone(pid, st))
			continue;
		if (pid == shim && !init_stop) {
			int64_t d = sbx_now_ms() - last_start;

			fprintf(stderr, "sluice-run init: shim exited (%d), "
			    "restarting\n", st);
			if (d < 1000)
				usleep((useconds_t)(1000 - d) * 1000);
			shim = shim_start(a);
			last_start = sbx_now_ms();
		}
	}
	return 0;
}

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* clone3's argument as the kernel reads it (linux/sched.h's struct
 * clone_args, whose header clashes with glibc's sched.h) */
struct ns_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack,
	    stack_size, tls, set_tid, set_tid_size, cgroup;
};

/*
 * The holder's clone, in its groups from birth where the kernel allows
 * it (see "placed in its groups at its birth" above): *placed is then 1
 * and no cg_join follows.  v2: clone3 with CLONE_INTO_CGROUP (a kernel
 * before 5.7 says ENOSYS or E2BIG), the child going on as fork's does
 * on a copy of this stack; v1: this thread steps into the groups for
 * the clone.  Otherwise (or when that clone fails: a pids.max that
 * counts this thread too) a plain clone.
 */
static pid_t
holder_clone(struct init_arg *a, char *stack, int *placed)
{
	const struct sbx_rec *rec = a->rec;
	const int ns = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
	    CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
	pid_t pid = -1;

	*placed = 0;
	if (cg_is_v2(rec)) {
#ifdef SYS_clone3
		char p[SBX_PATH_MAX + 128];
		struct ns_clone_args ca;
		int fd;

		cg_path(p, sizeof(p), rec, NULL, "init", NULL);
		if ((fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
			memset(&ca, 0, sizeof(ca));
			ca.flags = (uint64_t)ns | CLONE_INTO_CGROUP;
			ca.exit_signal = SIGCHLD;
			ca.cgroup = (uint64_t)fd;
			pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
			if (pid == 0)
				_exit(init_main(a));
			close(fd);
		}
#endif
	} else if (rec->cgroup[0] != '\0') {
		struct cg_back bk;

		if (cg_v1_enter(rec, &bk) == 0) {
			pid = clone(init_main, stack + INIT_STACK, ns | SIGCHLD,
			    a);
			/* root left these groups a moment ago: only a group
			 * removed meanwhile (not ours to remove) sends this
			 * thread to the hierarchy's root instead; should
			 * that fail too, it must not stay in the sandbox's
			 * group (its kill would reach the daemon) */
			if (cg_v1_leave(&bk) != 0) {
				if (pid > 0) {
					(void)kill(pid, SIGKILL);
					(void)waitpid(pid, NULL, 0);
				}
				errno = EBUSY;
				return -1;
			}
		}
	}
	if (pid > 0) {
		*placed = 1;
		return pid;
	}
	return clone(init_main, stack + INIT_STACK, ns | SIGCHLD, a);
}

/* ---- backend calls ---- */

static int
ns_available(char *err, size_t errlen)
{
	if (geteuid() != 0)
		return sbx_err(err, errlen, "the ns backend needs root");
	if (access("/proc/self/ns/user", F_OK) != 0)
		return sbx_err(err, errlen, "no user namespaces here");
	return 0;
}

static int
write_maps(pid_t pid, const struct sbx_rec *rec)
{
	char p[64], m[64];

	snprintf(m, sizeof(m), "0 %u %u\n", (unsigned)rec->uid_base,
	    (unsigned)rec->uid_count);
	snprintf(p, sizeof(p), "/proc/%d/uid_map", (int)pid);
	if (write_file(p, m) != 0)
		return -1;
	snprintf(p, sizeof(p), "/proc/%d/gid_map", (int)pid);
	return write_file(p, m);
}

static int
ns_destroy(struct sbx_rec *rec, char *err, size_t errlen)
{
	int i;

	(void)err;
	(void)errlen;
	if (rec->init_pid > 0 && sbx_proc_start(rec->init_pid) ==
	    rec->init_start && rec->init_start != 0) {
		/* thaw first: frozen tasks die only once thawed */
		if (rec->cgroup[0] != '\0' && !cg_is_v2(rec))
			cg_v1_freeze(rec, NULL, 0);
		else if (cg_is_v2(rec))
			cg_write(rec, NULL, NULL, "cgroup.freeze", "0");
		char ns[64] = "";

		(void)ns_ino(rec->init_pid, "pid", ns, sizeof(ns));
		proc_signal(rec, SIGCONT);
		/* killing a pid namespace's init kills all of it; wait
		 * (bounded) until the last of it has exited */
		kill(rec->init_pid, SIGKILL);
		for (i = 0; i < 400 && (sbx_proc_start(rec->init_pid) ==
		    rec->init_start || (ns[0] && proc_count_ns(ns) > 0)); i++)
			usleep(5000);
	}
	if (rec->cgroup[0] != '\0') {
		char p[SBX_PATH_MAX + 128];

		/* stragglers (intermediate processes) in the groups */
		if (cg_is_v2(rec)) {
			cg_path(p, sizeof(p), rec, NULL, NULL, "cgroup.kill");
			write_file(p, "1");
		}
		cg_remove_all(rec);
	} else {
		/* a record saved before create made its groups (a create
		 * killed half way) does not name them; their names follow
		 * from the chat and the state directory, so look for them in
		 * both kinds (missing ones are no error) */
		struct sbx_rec t = *rec;
		char root[256];

		snprintf(t.cgroup, sizeof(t.cgroup), "v1");
		cg_remove_all(&t);
		if (cg_v2_root(root, sizeof(root), 1) == 0) {
			snprintf(t.cgroup, sizeof(t.cgroup), "v2:%s", root);
			cg_remove_all(&t);
		}
	}
	/* its writers are gone; what they left in the pipe goes with the
	 * directory */
	sbx_log_stop(rec->dir);
	/* the holder's namespace held the only mount of the image */
	sbx_image_detach(rec);
	rec->init_pid = 0;
	rec->init_start = 0;
	return 0;
}

/* The write end of the commit pipe of the holder made by ns_create in
 * this process (sluice-run makes one sandbox per process), until
 * ns_commit: a socket pair, as the holder answers. */
static int ns_commit_fd = -1;

static int
ns_create(struct sbx_rec *rec, char *err, size_t errlen)
{
	struct init_arg a;
	int go[2] = { -1, -1 }, rep[2] = { -1, -1 }, cm[2] = { -1, -1 };
	int rc = -1, placed;
	char msg[1024];
	char *stack = NULL;
	ssize_t n;
	pid_t pid;

	memset(&a, 0, sizeof(a));
	a.log_fd = -1;
	a.image_fd = -1;
	a.src_fd[0] = a.src_fd[1] = a.src_fd[2] = -1;
	/* bounded: a sandbox can make the shim log as much as it likes */
	if ((a.log_fd = sbx_log_start(rec->dir, rec->shim, err,
	    errlen)) < 0)
		return -1;
	/* from here on failures go to fail: the groups made here must go
	 * (ns_destroy copes with no holder) */
	rec->init_pid = 0;
	rec->init_start = 0;
	/* the image's mount goes to the holder, which attaches it as its
	 * root: once the holder's mount namespace is gone, so is the mount
	 * (and the loop device, if the kernel needed one) */
	if (rec->image[0] != '\0' && (a.image_fd = sbx_image_attach(rec, err,
	    errlen)) < 0)
		goto fail;
	cg_setup(rec);
	if (strcmp(rec->cgroup, "v1") == 0) {
		char p[SBX_PATH_MAX + 128];

		/* the sandbox's root makes the command groups of its agent
		 * in its freezer group (only that: its limits stay root's);
		 * without it commands enter with setns */
		cg_path(p, sizeof(p), rec, "freezer", NULL, NULL);
		(void)!chown(p, rec->uid_base, rec->uid_base);
	}
	if (pipe2(go, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cm) != 0) {
		sbx_err(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	a.rec = rec;
	a.go_rd = go[0];
	a.rep_wr = rep[1];
	a.commit_fd = cm[0];
	if ((stack = malloc(INIT_STACK)) == NULL) {
		sbx_err(err, errlen, "out of memory");
		goto fail;
	}
	pid = holder_clone(&a, stack, &placed);
	if (pid < 0) {
		sbx_err(err, errlen, "clone: %s", strerror(errno));
		goto fail;
	}
	close(go[0]);
	go[0] = -1;
	close(rep[1]);
	rep[1] = -1;
	close(cm[0]);
	cm[0] = -1;
	rec->init_pid = pid;
	rec->init_start = sbx_proc_start(pid);
	if (!placed && cg_join(rec, NULL, pid) != 0) {
		sbx_err(err, errlen, "cgroup join %s: %s", rec->cgroup,
		    strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto fail;
	}
	if (write_maps(pid, rec) != 0) {
		sbx_err(err, errlen, "uid/gid map of %d: %s", (int)pid,
		    strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto fail;
	}
	(void)!write(go[1], "g", 1);
	n = read(rep[0], msg, sizeof(msg) - 1);
	if (n != 1 || msg[0] != '\0') {
		int st;

		if (n < 0)
			n = 0;
		msg[n] = '\0';
		waitpid(pid, &st, 0);
		sbx_err(err, errlen, "sandbox setup: %s", n > 0 ? msg :
		    "the holder died");
		goto fail;
	}
	ns_commit_fd = cm[1];
	cm[1] = -1;
	rc = 0;
	goto out;
fail:
	ns_destroy(rec, NULL, 0);
out:
	if (cm[0] >= 0)
		close(cm[0]);
	if (cm[1] >= 0)
		close(cm[1]);
	if (go[0] >= 0)
		close(go[0]);
	if (go[1] >= 0)
		close(go[1]);
	if (rep[0] >= 0)
		close(rep[0]);
	if (rep[1] >= 0)
		close(rep[1]);
	if (a.log_fd >= 0)
		close(a.log_fd);
	if (a.image_fd >= 0)
		close(a.image_fd);
	free(stack);
	return rc;
}

static int
ns_alive(const struct sbx_rec *rec)
{
	return rec->init_pid > 0 && rec->init_start != 0 &&
	    sbx_proc_start(rec->init_pid) == rec->init_start;
}

/* The holder's root, that is the sandbox's (after its pivot_root). */
static int
ns_root_fd(const struct sbx_rec *rec, char *err, size_t errlen)
{
	char p[64];
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/root", (int)rec->init_pid);
	if (rec->init_pid <= 0 || (fd = open(p, O_PATH | O_DIRECTORY |
	    O_CLOEXEC)) < 0)
		return sbx_err(err, errlen, "the sandbox is gone (its holder "
		    "died)");
	/* checked after the open: the descriptor is then the holder's root,
	 * not that of a process that got its pid later */
	if (!ns_alive(rec)) {
		close(fd);
		return sbx_err(err, errlen, "the sandbox is gone (its holder "
		    "died)");
	}
	return fd;
}

/*
 * The socket is made with the calling thread in the holder's network
 * namespace for the one socket(2) call and moved back at once: a socket
 * belongs to the namespace it was made in for good, so the daemon then
 * connects and relays from its own.  Not coming back would leave the
 * daemon in the sandbox's namespace: that aborts.
 */
static int
ns_net_socket(const struct sbx_rec *rec, char *err, size_t errlen)
{
	char p[64];
	int nsfd, selffd, fd, e;

	snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)rec->init_pid);
	if (rec->init_pid <= 0 || (nsfd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return sbx_err(err, errlen, "the sandbox is gone (its holder "
		    "died)");
	/* checked after the open, as ns_root_fd does */
	if (!ns_alive(rec)) {
		close(nsfd);
		return sbx_err(err, errlen, "the sandbox is gone (its holder "
		    "died)");
	}
	if ((selffd = open("/proc/thread-self/ns/net", O_RDONLY |
	    O_CLOEXEC)) < 0) {
		e = errno;
		close(nsfd);
		return sbx_err(err, errlen, "own network namespace: %s",
		    strerror(e));
	}
	if (setns(nsfd, CLONE_NEWNET) != 0) {
		e = errno;
		close(nsfd);
		close(selffd);
		return sbx_err(err, errlen, "entering the sandbox's network "
		    "namespace: %s", strerror(e));
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	e = errno;
	if (setns(selffd, CLONE_NEWNET) != 0)
		abort();
	close(nsfd);
	close(selffd);
	if (fd < 0)
		return sbx_err(err, errlen, "socket in the sandbox: %s",
		    strerror(e));
	return fd;
}

/* In the intermediate child: enter the holder's namespaces. */
static int
enter_ns(const struct sbx_rec *rec, const char **what)
{
	static const char *const order[] = { "user", "mnt", "pid", "net",
	    "ipc", "uts" };
	int fds[6], i, rc = 0;
	char p[64];

	for (i = 0; i < 6; i++) {
		snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)rec->init_pid,
		    order[i]);
		if ((fds[i] = open(p, O_RDONLY | O_CLOEXEC)) < 0) {
			*what = order[i];
			while (--i >= 0)
				close(fds[i]);
			return -1;
		}
	}
	for (i = 0; i < 6 && rc == 0; i++)
		if (setns(fds[i], 0) != 0) {
			*what = order[i];
			rc = -1;
		}
	for (i = 0; i < 6; i++)
		close(fds[i]);
	return rc;
}

/*
 * The drainer: a child of the command's parent that owns the read ends
 * of the command's output pipes.  It passes output on to the caller
 * until the main process has exited (ctl reaches EOF), then hands over
 * what is already buffered, closes the caller's ends and acknowledges
 * (closes ack); after that it reads and drops whatever background
 * processes still write, until they close their ends.  Without it a
 * background job's next write after the command would raise SIGPIPE or
 * EPIPE.  It runs as the sandbox user's host uid, without privileges.
 */
static void
drainer(const struct sbx_rec *rec, int in[2], int out[2], int ctl, int ack)
{
	char buf[16384];
	int open_in = 2, passing = 1, i;

	(void)prctl(PR_SET_NAME, "sbx-drain", 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	/* it may outlive the caller: hold none of the caller's 0-2 (a
	 * caller waiting for EOF on its output would wait for us) */
	for (i = 0; i <= 2; i++)
		if (i != out[0] && i != out[1] && i != ctl && i != ack &&
		    i != in[0] && i != in[1]) {
			int fd = open("/dev/null", O_RDWR);

			if (fd >= 0 && fd != i) {
				dup2(fd, i);
				close(fd);
			}
		}
	if (setgroups(0, NULL) != 0 || setresgid(rec->host_gid, rec->host_gid,
	    rec->host_gid) != 0 || setresuid(rec->host_uid, rec->host_uid,
	    rec->host_uid) != 0)
		_exit(1);
	(void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	while (open_in > 0 || passing) {
		struct pollfd p[3];
		int n = 0, k;

		for (i = 0; i < 2; i++)
			if (in[i] >= 0) {
				p[n].fd = in[i];
				p[n++].events = POLLIN;
			}
		if (passing) {
			p[n].fd = ctl;
			p[n++].events = POLLIN;
		}
		if (poll(p, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (k = 0; k < n; k++) {
			ssize_t m;

			if (p[k].revents == 0)
				continue;
			if (passing && p[k].fd == ctl) {
				/* main exited: hand over what is buffered */
				for (i = 0; i < 2; i++) {
					int fl, r = 0;

					if (in[i] < 0)
						continue;
					fl = fcntl(in[i], F_GETFL);
					fcntl(in[i], F_SETFL, fl | O_NONBLOCK);
					while (r++ < 256 && (m = read(in[i], buf,
					    sizeof(buf))) > 0)
						if (out[i] >= 0 && write(out[i], buf,
						    (size_t)m) != m) {
							close(out[i]);
							out[i] = -1;
						}
					fcntl(in[i], F_SETFL, fl);
				}
				for (i = 0; i < 2; i++)
					if (out[i] >= 0)
						close(out[i]);
				out[0] = out[1] = -1;
				close(ack);
				passing = 0;
				break;
			}
			for (i = 0; i < 2 && in[i] != p[k].fd; i++)
				;
			if (i == 2)
				continue;
			m = read(in[i], buf, sizeof(buf));
			if (m <= 0) {
				close(in[i]);
				in[i] = -1;
				open_in--;
				continue;
			}
			if (out[i] >= 0 && write(out[i], buf, (size_t)m) != m) {
				close(out[i]);  /* the caller left: drop */
				out[i] = -1;
			}
		}
	}
	_exit(0);
}

/* ---- spawn through the holder's agent ---- */

#define NS_AG_REPLY_MS	10000	/* STARTED (a worker may have to be forked) */
#define NS_AG_EXIT_MS	1000	/* EXIT's payload after its header */

/*
 * The command's connection is readable: its EXIT frame, or its end (the
 * holder died): killed.  The agent writes EXIT's header and payload one
 * after the other: once a byte is there the read waits for the rest, at
 * most NS_AG_EXIT_MS (SO_RCVTIMEO, set by ns_ag_spawn).  The caller
 * watches the connection in its loop: no relay process per command.
 */
static int
ns_reap(struct sbx_proc *p, int *status)
{
	unsigned char buf[AG_HDR + 2];
	size_t n;
	int t, st;

	if (recv(p->fd, buf, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
	    (errno == EAGAIN || errno == EINTR))
		return 1;
	*status = SIGKILL;
	if (ag_read_frame(p->fd, &t, buf, sizeof(buf), &n) == 0 &&
	    t == AG_EXIT && (st = ag_exit_parse(buf, n)) >= 0)
		*status = (st & 0xff) << 8;
	return 0;
}

/*
 * spawn() through the agent: 0 started (out->fd the connection, which
 * says EXIT when the command has ended: ns_reap), 1 no agent there (no
 * connection, or the request could not be sent: nothing runs, use
 * setns), -1 and why (the agent refused it or did not answer; whatever
 * started of it is killed).
 */
static int
ns_ag_spawn(struct sbx_rec *rec, const struct sbx_cmd *cmd,
    struct sbx_proc *out, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	unsigned char buf[AG_ERR_MAX + 1];
	struct pollfd pf;
	char *req = NULL;
	int fd, t, rc = 1, devnull = -1, fds[3];
	size_t n;
	ssize_t k;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/%d/root" AG_DIR "/"
	    AG_SOCK, (int)rec->init_pid);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return 1;
	/* checked after the connect: the socket is then the holder's, not
	 * that of a process that got its pid later */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    !ns_alive(rec))
		goto out;
	req = ag_spawn_build(out->tag, cmd->cwd ? cmd->cwd : SBX_WORKDIR,
	    rec->lim.fsize_bytes, rec->lim.nofile, rec->lim.nproc, cmd->argv,
	    cmd->envp, &n);
	if (req == NULL) {
		rc = sbx_err(err, errlen, "the command and its environment "
		    "are too large (%u bytes at most)", AG_SPAWN_MAX);
		goto out;
	}
	if (cmd->fd_in < 0 && (devnull = open("/dev/null", O_RDONLY |
	    O_CLOEXEC)) < 0)
		goto out;
	fds[0] = cmd->fd_in >= 0 ? cmd->fd_in : devnull;
	fds[1] = cmd->fd_out;
	fds[2] = cmd->fd_err;
	if (ag_send_spawn(fd, req, n, fds) != 0) {
		/* the holder may have refused the connection before the
		 * request was sent (no worker could be made: ag_refuse),
		 * which fails the send: its why is on the connection, and
		 * the setns path would only fail the same way, saying less */
		pf.fd = fd;
		pf.events = POLLIN;
		pf.revents = 0;
		if (poll(&pf, 1, 0) == 1 && ag_read_frame(fd, &t, buf,
		    sizeof(buf) - 1, &n) == 0 && t == AG_ERROR) {
			buf[n] = '\0';
			rc = sbx_err(err, errlen, "agent: %s", (char *)buf);
		}
		goto out;
	}
	/* from here no second try through setns: the command may have
	 * started (until STARTED our end's close kills its group; after a
	 * failure its group is killed below too) */
	pf.fd = fd;
	pf.events = POLLIN;
	pf.revents = 0;
	while ((k = poll(&pf, 1, NS_AG_REPLY_MS)) < 0 && errno == EINTR)
		;
	if (k <= 0 || ag_read_frame(fd, &t, buf, sizeof(buf) - 1, &n) != 0) {
		rc = sbx_err(err, errlen, "the sandbox's agent did not answer");
		goto out;
	}
	if (t == AG_ERROR) {
		buf[n] = '\0';
		rc = sbx_err(err, errlen, "agent: %s", (char *)buf);
		goto out;
	}
	if (t != AG_STARTED || ag_started_parse(buf, n) < 0) {
		rc = sbx_err(err, errlen, "the sandbox's agent: protocol error");
		goto out;
	}
	/* the connection is the command's from here: the agent says EXIT
	 * on it (the caller's loop watches it; a relay process per command
	 * was a third of the round trip), and its end no longer kills the
	 * command (a daemon that dies leaves it running, as it leaves
	 * those of the setns path) */
	{
		struct timeval tv = { NS_AG_EXIT_MS / 1000,
		    NS_AG_EXIT_MS % 1000 * 1000 };

		(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	out->pid = 0;
	out->fd = fd;
	fd = -1;
	rc = 0;
out:
	if (devnull >= 0)
		close(devnull);
	free(req);
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		cg_kill(rec, out->tag);
	return rc;
}

/* One process (sluice-execd) spawns many commands within a clock tick:
 * the tag, which names the command's cgroup, needs more than tick and
 * pid. */
static unsigned tag_seq;

static int
ns_spawn(struct sbx_rec *rec, const struct sbx_cmd *cmd, struct sbx_proc *out,
    char *err, size_t errlen)
{
	int rep[2], rc;
	pid_t pid;
	char msg[256];
	ssize_t n;

	memset(out, 0, sizeof(*out));
	/* tag: boot ticks now, so that the /proc walk can tell this
	 * command's processes from older ones */
	out->start_ms = sbx_now_ms();
	snprintf(out->tag, sizeof(out->tag), "x%llu-%d-%u",
	    (unsigned long long)ticks_now(), (int)getpid(), tag_seq++);
	if (strcmp(rec->cgroup, "v1") == 0) {
		/* "a...": the agent's (its worker is not in the command's
		 * group: once EXIT is said only what the command left
		 * running is), "x...": the setns path's */
		out->tag[0] = 'a';
		if ((rc = ns_ag_spawn(rec, cmd, out, err, errlen)) != 1)
			return rc;
		out->tag[0] = 'x';
	}
	/* (the agent's path checks the holder after its connect) */
	if (!ns_alive(rec))
		return sbx_err(err, errlen, "the sandbox's holder is gone");
	if (rec->cgroup[0] == '\0')
		snap_save(rec, out->tag);
	if (pipe2(rep, O_CLOEXEC) != 0)
		return sbx_err(err, errlen, "pipe: %s", strerror(errno));
	/* compiled once in this process, not in every command's (an error
	 * is the command's to report) */
	(void)sbx_seccomp_prepare(msg, sizeof(msg));
	pid = fork();
	if (pid < 0) {
		close(rep[0]);
		close(rep[1]);
		return sbx_err(err, errlen, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		const char *what = "";
		int pin[2][2], pctl[2], pack[2], st;
		pid_t child, drain;
		char c;

		close(rep[0]);
		{
			int keep[4] = { rep[1], cmd->fd_in, cmd->fd_out,
			    cmd->fd_err };

			close_others(keep, 4);
		}
		signal(SIGPIPE, SIG_DFL);
		if (cg_join(rec, out->tag, getpid()) != 0) {
			what = "cgroup join";
			goto child_fail;
		}
		if (pipe2(pin[0], O_CLOEXEC) != 0 || pipe2(pin[1], O_CLOEXEC)
		    != 0 || pipe2(pctl, O_CLOEXEC) != 0 || pipe2(pack,
		    O_CLOEXEC) != 0) {
			what = "pipe";
			goto child_fail;
		}
		if ((drain = fork()) < 0) {
			what = "fork";
			goto child_fail;
		}
		if (drain == 0) {
			int in[2] = { pin[0][0], pin[1][0] };
			int outs[2] = { cmd->fd_out, cmd->fd_err };

			close(rep[1]);
			close(pin[0][1]);
			close(pin[1][1]);
			close(pctl[1]);
			close(pack[0]);
			close(cmd->fd_in);
			drainer(rec, in, outs, pctl[0], pack[1]);
		}
		close(pin[0][0]);
		close(pin[1][0]);
		close(pctl[0]);
		close(pack[1]);
		close(cmd->fd_out);
		close(cmd->fd_err);
		if (enter_ns(rec, &what) != 0)
			goto child_fail;
		if ((child = fork()) < 0) {
			what = "fork";
			goto child_fail;
		}
		if (child == 0) {
			/* errors go to the command's stderr from here */
			cmd_exec(rec, cmd->fd_in, pin[0][1], pin[1][1], cmd->cwd,
			    cmd->argv, cmd->envp);
		}
		close(rep[1]);
		close(cmd->fd_in);
		close(pin[0][1]);
		close(pin[1][1]);
		while (waitpid(child, &st, 0) < 0 && errno == EINTR)
			;
		/* tell the drainer, wait until it has handed over */
		close(pctl[1]);
		while (read(pack[0], &c, 1) < 0 && errno == EINTR)
			;
		if (WIFEXITED(st))
			_exit(WEXITSTATUS(st));
		_exit(128 + WTERMSIG(st));
child_fail:
		dprintf(rep[1], "%s: %s", what, strerror(errno));
		_exit(125);
	}
	close(rep[1]);
	n = read(rep[0], msg, sizeof(msg) - 1);
	close(rep[0]);
	if (n > 0) {
		msg[n] = '\0';
		waitpid(pid, NULL, 0);
		return sbx_err(err, errlen, "entering the sandbox: %s", msg);
	}
	out->pid = pid;
	return 0;
}

static int
ns_kill_tree(struct sbx_rec *rec, const struct sbx_proc *p, char *err,
    size_t errlen)
{
	struct snap pre;
	int i;

	(void)err;
	(void)errlen;
	if (rec->cgroup[0] != '\0') {
		cg_kill(rec, p->tag);
		return 0;
	}
	/* stop first so nothing forks between the rounds, then kill */
	snap_load(rec, p->tag, &pre);
	for (i = 0; i < 5; i++)
		proc_signal_x(rec, &pre, SIGSTOP, NULL);
	proc_signal_x(rec, &pre, SIGKILL, NULL);
	proc_signal_x(rec, &pre, SIGCONT, NULL);
	free(pre.v);
	return 0;
}

static void
ns_release(struct sbx_rec *rec, const struct sbx_proc *p)
{
	char path[SBX_PATH_MAX + 160];

	cg_release(rec, p->tag);
	snap_path(path, sizeof(path), rec, p->tag);
	(void)unlink(path);
}

/* How many of the sandbox's processes (the holder aside) are not
 * stopped yet (state T, t or Z in /proc/<pid>/stat). */
static int
proc_unstopped(const struct sbx_rec *rec)
{
	char want[64], have[64], p[64], buf[512], *c;
	struct dirent *de;
	DIR *d;
	int n = 0, fd;
	ssize_t k;

	if (ns_ino(rec->init_pid, "pid", want, sizeof(want)) != 0 ||
	    (d = opendir("/proc")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		pid_t pid = (pid_t)atoi(de->d_name);

		if (pid <= 0 || pid == rec->init_pid ||
		    ns_ino(pid, "pid", have, sizeof(have)) != 0 ||
		    strcmp(have, want) != 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (k <= 0)
			continue;
		buf[k] = '\0';
		if ((c = strrchr(buf, ')')) != NULL && c[1] == ' ' &&
		    c[2] != 'T' && c[2] != 't' && c[2] != 'Z')
			n++;
	}
	closedir(d);
	return n;
}

/* Suspension without cgroups: SIGSTOP to every process of the sandbox,
 * again until all are stopped (a stop is asynchronous, and a process
 * forked during the walk was not in it), bounded to about a second. */
static void
proc_stop_all(const struct sbx_rec *rec)
{
	int i;

	for (i = 0; i < 100; i++) {
		proc_signal(rec, SIGSTOP);
		if (proc_unstopped(rec) == 0)
			return;
		usleep(10000);
	}
}

static int
ns_suspend(struct sbx_rec *rec, char *err, size_t errlen)
{
	if (!ns_alive(rec))
		return sbx_err(err, errlen, "the sandbox's holder is gone");
	if (cg_is_v2(rec)) {
		if (cg_write(rec, NULL, NULL, "cgroup.freeze", "1") != 0)
			return sbx_err(err, errlen, "cgroup.freeze: %s",
			    strerror(errno));
	} else if (rec->cgroup[0] != '\0') {
		if (cg_v1_freeze(rec, NULL, 1) != 0)
			return sbx_err(err, errlen, "freezer: %s",
			    strerror(errno));
	} else
		proc_stop_all(rec);
	rec->suspended = 1;
	return 0;
}

static int
ns_resume(struct sbx_rec *rec, char *err, size_t errlen)
{
	if (cg_is_v2(rec)) {
		if (cg_write(rec, NULL, NULL, "cgroup.freeze", "0") != 0)
			return sbx_err(err, errlen, "cgroup.freeze: %s",
			    strerror(errno));
	} else if (rec->cgroup[0] != '\0') {
		if (cg_v1_freeze(rec, NULL, 0) != 0)
			return sbx_err(err, errlen, "freezer: %s",
			    strerror(errno));
	} else
		proc_signal(rec, SIGCONT);
	rec->suspended = 0;
	return 0;
}

/* The oom_kill line of the sandbox group's memory.events (v2) or
 * memory.oom_control (v1): the count covers the group's whole tree. */
static int
ns_oom_kills(const struct sbx_rec *rec, uint64_t *n)
{
	char p[SBX_PATH_MAX + 128], buf[1024], *l;
	unsigned long long v;
	ssize_t got;
	int fd;

	if (rec->cgroup[0] == '\0')
		return -1;
	if (cg_is_v2(rec))
		cg_path(p, sizeof(p), rec, NULL, NULL, "memory.events");
	else
		cg_path(p, sizeof(p), rec, "memory", NULL,
		    "memory.oom_control");
	/* read twice a command: one read, no stdio */
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	got = util_read_full(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got < 0)
		return -1;
	buf[got] = '\0';
	for (l = buf; l != NULL && *l != '\0'; ) {
		if (sscanf(l, "oom_kill %llu", &v) == 1) {
			*n = v;
			return 0;
		}
		if ((l = strchr(l, '\n')) != NULL)
			l++;
	}
	return -1;
}

/* The record names the holder: from now on it outlives sluice-run. */
static void
ns_commit(struct sbx_rec *rec)
{
	char c;

	(void)rec;
	if (ns_commit_fd < 0)
		return;
	if (write(ns_commit_fd, "c", 1) == 1)
		(void)!read(ns_commit_fd, &c, 1);       /* "a", or the holder died */
	close(ns_commit_fd);
	ns_commit_fd = -1;
}

const struct sbx_backend sbx_ns_backend = {
	.name = "ns",
	.available = ns_available,
	.create = ns_create,
	.spawn = ns_spawn,
	.kill_tree = ns_kill_tree,
	.release = ns_release,
	.suspend = ns_suspend,
	.resume = ns_resume,
	.alive = ns_alive,
	.destroy = ns_destroy,
	.root_fd = ns_root_fd,
	.commit = ns_commit,
	.oom_kills = ns_oom_kills,
	.net_socket = ns_net_socket,
	.tty_stdin = 1,
	.reap = ns_reap,
};
