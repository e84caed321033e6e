/*
 * sbx_image_build.c: the image builder (sbx_image.h).  mmdebstrap makes
 * a Debian tree of the profile's packages from the configured mirror in
 * a private mount namespace; the tree gets what a read-only root needs
 * (the sandbox's mount points, its passwd, group, hosts and hostname, an
 * empty /dev); mkfs.erofs packs it with every mtime and the UUID fixed,
 * and the sha256 of the result names it.
 *
 * Reproducible: SOURCE_DATE_EPOCH, a fixed mtime and UUID, mkfs.erofs's
 * sorted directories, mmdebstrap's removal of what differs from build to
 * build (logs, ldconfig's aux-cache, machine-id), the host's hostname and
 * resolv.conf replaced, so that two builds of the same inputs from a
 * mirror serving the same package versions make the same bytes.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "proxy/lib/jsonstrict.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"
#include "sandbox-glue/executor/backend/sbx_root.h"
#include "sandbox-glue/executor/image/sbx_image.h"

#define TOOL_PATH	"PATH=/usr/sbin:/usr/bin:/sbin:/bin"
#define CAPTURE_MAX	(256 * 1024)
#define LOG_TAIL	4096

/* What dpkg leaves out of every image: manual pages, info and the
 * documentation but its copyright files (part of the format). */
static const char *const dpkg_excludes[] = {
	"--dpkgopt=path-exclude=/usr/share/man/*",
	"--dpkgopt=path-exclude=/usr/share/info/*",
	"--dpkgopt=path-exclude=/usr/share/doc/*",
	"--dpkgopt=path-include=/usr/share/doc/*/copyright",
};

static volatile sig_atomic_t build_stop;

static void
on_stop(int sig)
{
	build_stop = sig;
}

/*
 * Run argv (argv[0] an absolute path or found in TOOL_PATH) with envp,
 * stdin /dev/null, stdout and stderr into logfd, or captured into out
 * (NUL-terminated, cut at outlen) when out is set; in a session of its
 * own (a terminal's Ctrl-C reaches us, and we stop the whole group),
 * with privns in a private mount namespace (what mmdebstrap mounts in its
 * chroot never shows on the host and dies with it).  Bounded by
 * timeout_s and by build_stop.  The exit status, or -1 (err says).
 */
static int
run_tool(char *const argv[], char *const envp[], int logfd, char *out,
    size_t outlen, long timeout_s, int privns, char *err, size_t errlen)
{
	int pp[2] = { -1, -1 }, st = 0, nul;
	int64_t deadline = sbx_now_ms() + timeout_s * 1000;
	size_t got = 0;
	siginfo_t si;
	pid_t pid;

	if (out != NULL && pipe2(pp, O_CLOEXEC) != 0)
		return sbx_err(err, errlen, "pipe: %s", strerror(errno));
	if ((pid = fork()) < 0) {
		if (pp[0] >= 0) {
			close(pp[0]);
			close(pp[1]);
		}
		return sbx_err(err, errlen, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		sigset_t none;
		int o = out != NULL ? pp[1] : logfd;

		(void)setsid();
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (privns && (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/",
		    NULL, MS_REC | MS_PRIVATE, NULL) != 0)) {
			dprintf(o, "sluice-run: private mount namespace: %s\n",
			    strerror(errno));
			_exit(126);
		}
		if ((nul = open("/dev/null", O_RDONLY)) < 0 || dup2(nul, 0) < 0 ||
		    dup2(o, 1) < 0 || dup2(o, 2) < 0)
			_exit(126);
		closefrom(3);
		if (strchr(argv[0], '/') == NULL) {
			char p[256];
			const char *dirs[] = { "/usr/sbin", "/usr/bin", "/sbin",
			    "/bin" };
			size_t i;

			for (i = 0; i < 4; i++) {
				snprintf(p, sizeof(p), "%s/%s", dirs[i], argv[0]);
				if (access(p, X_OK) == 0)
					execve(p, argv, envp);
			}
			dprintf(2, "sluice-run: %s: not found (apt-get install "
			    "%s)\n", argv[0], strcmp(argv[0], "mkfs.erofs") == 0
			    ? "erofs-utils" : argv[0]);
			_exit(127);
		}
		execve(argv[0], argv, envp);
		_exit(127);
	}
	if (pp[1] >= 0)
		close(pp[1]);
	for (;;) {
		if (pp[0] >= 0) {
			struct pollfd pf = { pp[0], POLLIN, 0 };
			char buf[4096];
			ssize_t n;

			if (poll(&pf, 1, 50) > 0) {
				n = read(pp[0], buf, sizeof(buf));
				if (n > 0 && got + 1 < outlen) {
					size_t k = (size_t)n < outlen - 1 - got ?
					    (size_t)n : outlen - 1 - got;

					memcpy(out + got, buf, k);
					got += k;
				} else if (n == 0) {
					close(pp[0]);
					pp[0] = -1;
				}
			}
		} else
			usleep(50000);
		/* exited, not reaped yet: its process group stays ours to
		 * kill until it is */
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) ==
		    0 && si.si_pid == pid) {
			/* what is left in the pipe, then stop */
			if (pp[0] >= 0) {
				char buf[4096];
				ssize_t n;

				(void)fcntl(pp[0], F_SETFL, O_NONBLOCK);
				while ((n = read(pp[0], buf, sizeof(buf))) > 0 &&
				    got + 1 < outlen) {
					size_t k = (size_t)n < outlen - 1 - got ?
					    (size_t)n : outlen - 1 - got;

					memcpy(out + got, buf, k);
					got += k;
				}
				close(pp[0]);
				pp[0] = -1;
			}
			break;
		}
		if (build_stop || sbx_now_ms() > deadline) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			if (pp[0] >= 0)
				close(pp[0]);
			if (out != NULL)
				out[got] = '\0';
			return sbx_err(err, errlen, "%s: %s", argv[0], build_stop ?
			    "interrupted" : "took too long (killed)");
		}
	}
	if (out != NULL)
		out[got] = '\0';
	/* what it started and left in its group goes with it */
	kill(-pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st))
		return sbx_err(err, errlen, "%s: killed by signal %d", argv[0],
		    WTERMSIG(st));
	return WEXITSTATUS(st);
}

/* The first line of a tool's answer, or "" (the tool's version...). */
static void
tool_line(char *const argv[], char *buf, size_t len)
{
	char *const envp[] = { TOOL_PATH, "LC_ALL=C", NULL };
	char e[64];

	if (run_tool(argv, envp, -1, buf, len, 30, 0, e, sizeof(e)) != 0)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* VERSION_CODENAME of /etc/os-release. */
static int
host_suite(char *buf, size_t len)
{
	char line[256];
	FILE *f = fopen("/etc/os-release", "re");
	int rc = -1;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "VERSION_CODENAME=", 17) == 0) {
			char *v = line + 17;

			v[strcspn(v, "\n")] = '\0';
			if (*v == '"' && v[1] != '\0') {
				v++;
				v[strcspn(v, "\"")] = '\0';
			}
			if (*v != '\0' && snprintf(buf, len, "%s", v) < (int)len)
				rc = 0;
		}
	fclose(f);
	return rc;
}

char *
sbx_host_sources(const char *arch, char *err, size_t errlen)
{
	char *const argv[] = { "apt-get", "indextargets", "--format",
	    "$(ORIGIN)|$(REPO_URI)|$(RELEASE)|$(COMPONENT)|$(ARCHITECTURE)",
	    "Created-By: Packages", NULL };
	char *const envp[] = { TOOL_PATH, "LC_ALL=C", NULL };
	char *buf = malloc(CAPTURE_MAX), *out = NULL, *l, *save = NULL;
	struct { char key[600]; char comps[200]; } *v = NULL, *nv;
	size_t n = 0, i, k, len = 0;
	int st;

	if (buf == NULL)
		return NULL;
	st = run_tool(argv, envp, -1, buf, CAPTURE_MAX, 60, 0, err, errlen);
	if (st != 0) {
		if (st > 0)
			sbx_err(err, errlen, "apt-get indextargets: exit %d", st);
		goto out;
	}
	/* one line per (repository, suite) of Debian's own archive for
	 * arch, its components gathered: other origins (a vendor's
	 * repository) have no place in a Debian image */
	for (l = strtok_r(buf, "\n", &save); l != NULL;
	    l = strtok_r(NULL, "\n", &save)) {
		char *f[5], *p = l;
		char key[600];

		for (i = 0; i < 5; i++) {
			f[i] = p;
			p = strchr(p, '|');
			if (p == NULL && i < 4)
				break;
			if (p != NULL)
				*p++ = '\0';
		}
		if (i < 5 || strcmp(f[0], "Debian") != 0 || strcmp(f[4], arch) !=
		    0 || strspn(f[1], "abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:/._-+~%@") !=
		    strlen(f[1]) || !sbx_id_ok(f[2], 64) || !sbx_id_ok(f[3], 64))
			continue;
		snprintf(key, sizeof(key), "%s %s", f[1], f[2]);
		for (k = 0; k < n && strcmp(v[k].key, key) != 0; k++)
			;
		if (k == n) {
			if ((nv = realloc(v, (n + 1) * sizeof(*v))) == NULL)
				goto out;
			v = nv;
			memset(&v[n], 0, sizeof(v[n]));
			snprintf(v[n].key, sizeof(v[n].key), "%s", key);
			n++;
		}
		/* components kept in the order apt gives them, once */
		{
			char pat[80];

			snprintf(pat, sizeof(pat), " %s ", f[3]);
			if (strstr(v[k].comps, pat) == NULL && strlen(v[k].comps)
			    + strlen(f[3]) + 3 < sizeof(v[k].comps)) {
				if (v[k].comps[0] == '\0')
					strcat(v[k].comps, " ");
				strcat(v[k].comps, f[3]);
				strcat(v[k].comps, " ");
			}
		}
	}
	if (n == 0) {
		sbx_err(err, errlen, "no Debian sources for %s in the host's apt "
		    "configuration (apt-get update, or set image_sources)",
		    arch);
		goto out;
	}
	if ((out = malloc(n * 820 + 1)) == NULL)
		goto out;
	out[0] = '\0';
	for (k = 0; k < n; k++) {
		size_t cl = strlen(v[k].comps);

		/* "deb URI SUITE comp...": comps holds " c1 c2 " */
		len += (size_t)sprintf(out + len, "deb %s%.*s\n", v[k].key,
		    (int)(cl > 0 ? cl - 1 : 0), v[k].comps);
	}
out:
	free(v);
	free(buf);
	return out;
}

/* ---- the tree ---- */

/* Unlink dir/name and write it anew with text (no link followed). */
static int
tree_write(int dfd, const char *name, const char *text, mode_t mode)
{
	size_t n = strlen(text);
	int fd, rc = 0;

	(void)unlinkat(dfd, name, 0);
	if ((fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, mode)) < 0)
		return -1;
	if (n > 0 && write(fd, text, n) != (ssize_t)n)
		rc = -1;
	if (fchmod(fd, mode) != 0 || close(fd) != 0)
		rc = -1;
	return rc;
}

/* Empty the directory dfd/name (not following links), keep it. */
static void
tree_empty(int dfd, const char *name)
{
	struct dirent *de;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	char p[SBX_PATH_MAX];
	DIR *d;

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			continue;
		snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", dirfd(d),
		    de->d_name);
		sbx_image_rm_tree(p);
	}
	closedir(d);
}

/*
 * What a read-only root needs that packages do not make: the sandbox's
 * mount points (nothing can be made in the image later), an empty file
 * for the shim to be bound on, /var/tmp as /tmp, the sandbox user's
 * passwd and group (uid SBX_UID: the ns backend's; gVisor binds its own),
 * loopback-only hosts, hostname "sandbox" and an empty resolv.conf
 * instead of the build host's, and an empty /dev (each sandbox mounts its
 * own).  Everything through descriptors, never following a link.
 */
static int
tree_finish(const char *root, char *err, size_t errlen)
{
	static const struct { const char *p; mode_t m; } dirs[] = {
		{ "workspace", 0755 }, { "home", 0755 }, { "home/user", 0755 },
		{ "run", 0755 }, { "run/sluice", 0755 }, { "opt", 0755 },
		{ "opt/sluice", 0755 }, { "proc", 0555 }, { "dev", 0755 },
		{ "sys", 0555 }, { "tmp", 01777 }, { "root", 0700 },
		{ "var", 0755 },
	};
	char failed[SBX_PATH_MAX + 32];
	int rfd, efd = -1, rc = -1;
	size_t i;

	if ((rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return sbx_err(err, errlen, "%s: %s", root, strerror(errno));
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		struct stat st;

		if (mkdirat(rfd, dirs[i].p, dirs[i].m) != 0 && errno != EEXIST)
			goto fail_p;
		if (fstatat(rfd, dirs[i].p, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISDIR(st.st_mode)) {
			errno = ENOTDIR;
			goto fail_p;
		}
		if (fchmodat(rfd, dirs[i].p, dirs[i].m, 0) != 0)
			goto fail_p;
		continue;
fail_p:
		sbx_err(err, errlen, "%s/%s: %s", root, dirs[i].p,
		    strerror(errno));
		goto out;
	}
	tree_empty(rfd, "dev");
	/* the gVisor agent's mount point (AG_DIR, sandbox-glue/agent/
	 * agent_wire.h): runsc's gofer makes a bind's mount point in the
	 * root, which an image's is not (a read-only file system) */
	if (mkdirat(rfd, "dev/sluice-agent", 0700) != 0 && errno != EEXIST)
		goto fail;
	tree_empty(rfd, "tmp");
	tree_empty(rfd, "run");
	if (mkdirat(rfd, "run/sluice", 0755) != 0 && errno != EEXIST)
		goto fail;
	if (tree_write(rfd, "opt/sluice/sluice-shim", "", 0755) != 0)
		goto fail;
	{
		char p[SBX_PATH_MAX + 32];

		snprintf(p, sizeof(p), "%s/var/tmp", root);
		sbx_image_rm_tree(p);
		if (symlinkat("/tmp", rfd, "var/tmp") != 0)
			goto fail;
	}
	if ((efd = openat(rfd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0 ||
	    tree_write(efd, "resolv.conf", "", 0644) != 0)
		goto fail;
	/* sbx_etc_ids writes by path: what it writes is unlinked first, so
	 * that it makes new files rather than follow what was there */
	(void)unlinkat(efd, "passwd", 0);
	(void)unlinkat(efd, "group", 0);
	(void)unlinkat(efd, "hosts", 0);
	(void)unlinkat(efd, "hostname", 0);
	if (sbx_etc_ids(root, SBX_UID, SBX_GID, failed, sizeof(failed)) != 0 ||
	    failed[0] == '\0') {
		sbx_err(err, errlen, "%s: %s", failed[0] ? failed : "hostname",
		    strerror(errno));
		goto out;
	}
	rc = 0;
	goto out;
fail:
	sbx_err(err, errlen, "%s: %s", root, strerror(errno));
out:
	if (efd >= 0)
		close(efd);
	close(rfd);
	return rc;
}

/* Bytes of the regular files under dfd (one file system), for the
 * figures. */
static uint64_t
tree_bytes(int dfd, int depth)
{
	struct dirent *de;
	struct stat st, top;
	uint64_t n = 0;
	DIR *d;
	int fd;

	if (depth > 64 || fstat(dfd, &top) != 0 || (fd = dup(dfd)) < 0)
		return 0;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISREG(st.st_mode))
			n += (uint64_t)st.st_size;
		else if (S_ISDIR(st.st_mode) && st.st_dev == top.st_dev) {
			int c = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (c >= 0) {
				n += tree_bytes(c, depth + 1);
				close(c);
			}
		}
	}
	closedir(d);
	return n;
}

/* name: version of each installed package (the tree's dpkg status). */
static json_t *
tree_packages(const char *root)
{
	char p[SBX_PATH_MAX + 32], line[1024], pkg[128] = "", ver[256] = "";
	json_t *o = json_object();
	int inst = 0;
	FILE *f;

	snprintf(p, sizeof(p), "%s/var/lib/dpkg/status", root);
	if (o == NULL || (f = fopen(p, "re")) == NULL)
		return o;
	for (;;) {
		char *l = fgets(line, sizeof(line), f);

		if (l == NULL || line[0] == '\n') {
			if (pkg[0] && inst)
				json_object_set_new(o, pkg, json_string(ver));
			pkg[0] = ver[0] = '\0';
			inst = 0;
			if (l == NULL)
				break;
			continue;
		}
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "Package: ", 9) == 0)
			snprintf(pkg, sizeof(pkg), "%.127s", line + 9);
		else if (strncmp(line, "Version: ", 9) == 0)
			snprintf(ver, sizeof(ver), "%.255s", line + 9);
		else if (strcmp(line, "Status: install ok installed") == 0)
			inst = 1;
	}
	fclose(f);
	return o;
}

/* Why the tool failed, from the log's last 4 KiB: its first error line
 * (apt's and mmdebstrap's "E: ", mkfs.erofs's "<E>"; the cause comes
 * before the summary), else its last line. */
static void
log_tail(const char *path, char *buf, size_t len)
{
	char t[LOG_TAIL + 1], *p, *line = NULL, *save = NULL, *last = NULL;
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	buf[0] = '\0';
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_size > LOG_TAIL)
		(void)lseek(fd, st.st_size - LOG_TAIL, SEEK_SET);
	n = read(fd, t, LOG_TAIL);
	close(fd);
	if (n <= 0)
		return;
	t[n] = '\0';
	for (p = strtok_r(t, "\n", &save); p != NULL;
	    p = strtok_r(NULL, "\n", &save)) {
		if (line == NULL && (strncmp(p, "E: ", 3) == 0 ||
		    strncmp(p, "<E>", 3) == 0))
			line = p;
		if (*p != '\0')
			last = p;
	}
	if (line == NULL)
		line = last;
	if (line != NULL)
		sbx_text_safe(line, buf, len);
}

/* The digest of an image in the store built from inputs, if any. */
static int
find_inputs(const char *dir, const char *inputs, char digest[SBX_DIGEST_HEX +
    1])
{
	char p[SBX_PATH_MAX + 100];
	struct dirent *de;
	json_error_t je;
	int found = 0;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return 0;
	while (!found && (de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		const char *in;
		struct stat st;
		json_t *m;

		if (l != SBX_DIGEST_HEX + 5 || strcmp(de->d_name + SBX_DIGEST_HEX,
		    ".json") != 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if ((m = jsonstrict_load_file(p, 8 << 20, &je)) == NULL)
			continue;
		in = json_string_value(json_object_get(m, "inputs"));
		memcpy(digest, de->d_name, SBX_DIGEST_HEX);
		digest[SBX_DIGEST_HEX] = '\0';
		if (in != NULL && strcmp(in, inputs) == 0 &&
		    sbx_digest_ok(digest) && sbx_image_file(p, sizeof(p), dir,
		    digest) == 0 && stat(p, &st) == 0 && S_ISREG(st.st_mode))
			found = 1;
		json_decref(m);
	}
	closedir(d);
	if (!found)
		digest[0] = '\0';
	return found;
}

/* profiles/<name> = digest, under the store's lock; 0, or -1 with
 * err. */
static int
set_current(const char *dir, const char *name, const char *digest,
    char *err, size_t errlen)
{
	char p[SBX_PATH_MAX + 100], t[SBX_PATH_MAX + 120], line[80];
	int fd, rc = 0;

	snprintf(p, sizeof(p), "%s/profiles/%s", dir, name);
	snprintf(t, sizeof(t), "%s.tmp%d", p, (int)getpid());
	snprintf(line, sizeof(line), "%s\n", digest);
	if ((fd = open(t, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0644)) < 0)
		return -1;
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
		rc = -1;
	if (close(fd) != 0)
		rc = -1;
	if (rc == 0 && rename(t, p) != 0)
		rc = -1;
	if (rc != 0) {
		sbx_err(err, errlen, "%s: %s", p, strerror(errno));
		unlink(t);
	}
	return rc;
}

/* The argv of mmdebstrap (malloc'd; the strings of p, lines of
 * sources and static ones). */
static char **
mmdebstrap_argv(const struct sbx_profile *p, const char *suite,
    char *sources, const char *root, char **include)
{
	size_t n = 0, i, len = 16, max;
	char **av, *l, *save = NULL;

	for (i = 0; i < p->npackages; i++)
		len += strlen(p->packages[i]) + 1;
	if ((*include = malloc(len)) == NULL)
		return NULL;
	strcpy(*include, "--include=");
	for (i = 0; i < p->npackages; i++) {
		if (i > 0)
			strcat(*include, ",");
		strcat(*include, p->packages[i]);
	}
	max = 16 + sizeof(dpkg_excludes) / sizeof(dpkg_excludes[0]) + 64;
	if ((av = calloc(max, sizeof(char *))) == NULL)
		return NULL;
	av[n++] = "mmdebstrap";
	av[n++] = "--mode=root";
	/* Essential:yes (a shell, coreutils, util-linux's setpriv and
	 * prlimit, which gVisor's commands need) and the profile: no apt
	 * for users who could not run it, no init */
	av[n++] = "--variant=essential";
	av[n++] = "--format=directory";
	av[n++] = "--aptopt=Acquire::Languages \"none\"";
	for (i = 0; i < sizeof(dpkg_excludes) / sizeof(dpkg_excludes[0]); i++)
		av[n++] = (char *)dpkg_excludes[i];
	av[n++] = *include;
	av[n++] = "--";
	av[n++] = (char *)suite;
	av[n++] = (char *)root;
	for (l = strtok_r(sources, "\n", &save); l != NULL && n < max - 1;
	    l = strtok_r(NULL, "\n", &save))
		if (l[0] != '\0')
			av[n++] = l;
	av[n] = NULL;
	return av;
}

/* Run a build tool (run_tool); 0, or -1 with err: its exit status and
 * the build log's telling line. */
static int
build_tool(char *const av[], char *const envp[], int logfd,
    const char *logp, int timeout_s, int privns, char *err, size_t errlen)
{
	char tail[512];
	int st;

	st = run_tool(av, envp, logfd, NULL, 0, timeout_s, privns, err,
	    errlen);
	if (st == 0)
		return 0;
	if (st > 0) {
		log_tail(logp, tail, sizeof(tail));
		sbx_err(err, errlen, "%s: exit %d: %s", av[0], st, tail);
	}
	return -1;
}

/*
 * --cached: an image in the store built from r->inputs becomes the
 * profile's newest and fills r.  1 when there was one, 0 when not, -1
 * with err.
 */
static int
build_from_store(const struct sbx_build_opts *o, const char *name,
    struct sbx_build_res *r, char *err, size_t errlen)
{
	char p[SBX_PATH_MAX + 16];
	struct stat sb;
	json_t *meta;
	int lk, rc = 0;

	if ((lk = img_lock(o->image_dir, LOCK_EX)) < 0) {
		sbx_err(err, errlen, "%s/.lock: %s", o->image_dir,
		    strerror(errno));
		return -1;
	}
	if (!find_inputs(o->image_dir, r->inputs, r->digest))
		goto out;
	rc = -1;
	if (set_current(o->image_dir, name, r->digest, err, errlen) != 0)
		goto out;
	snprintf(p, sizeof(p), "%s/%s" SBX_IMAGE_EXT, o->image_dir,
	    r->digest);
	if (stat(p, &sb) == 0)
		r->size = (uint64_t)sb.st_size;
	snprintf(p, sizeof(p), "%s/%s.json", o->image_dir, r->digest);
	if ((meta = jsonstrict_load_file(p, 8 << 20, NULL)) != NULL) {
		r->npackages = json_object_size(json_object_get(meta,
		    "packages"));
		r->tree_bytes = (uint64_t)json_integer_value(json_object_get(
		    meta, "tree_bytes"));
		json_decref(meta);
	}
	r->cached = r->reused = 1;
	rc = 1;
out:
	img_unlock(lk);
	return rc;
}

/*
 * The build's work directory, <image_dir>/.build-<pid>, made afresh
 * with its lock (*wlock) held while we build: a sweep removes those
 * whose builder is gone.  Made and locked under the store's lock, which
 * the sweep holds too: it never sees one without its lock.  work[0] is
 * '\0' when there is none to remove.  0, or -1 with err.
 */
static int
build_workdir(const char *image_dir, char *work, size_t worklen,
    int *wlock, char *err, size_t errlen)
{
	char p[SBX_PATH_MAX + 100];
	int slock, rc = -1;

	snprintf(work, worklen, "%s/.build-%d", image_dir, (int)getpid());
	if ((slock = img_lock(image_dir, LOCK_EX)) < 0) {
		sbx_err(err, errlen, "%s/.lock: %s", image_dir,
		    strerror(errno));
		work[0] = '\0';
		return -1;
	}
	sbx_image_rm_tree(work);
	/* 0755: apt downloads as its own user (_apt) into the tree */
	if (mkdir(work, 0755) != 0) {
		sbx_err(err, errlen, "%s: %s", work, strerror(errno));
		work[0] = '\0';
		goto out;
	}
	snprintf(p, sizeof(p), "%s/lock", work);
	if ((*wlock = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0600)) < 0 || flock(*wlock, LOCK_EX) != 0) {
		sbx_err(err, errlen, "%s: %s", p, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	img_unlock(slock);
	return rc;
}

/*
 * The tools' environment: envp (16 slots) holds a fixed PATH, locale
 * and epoch, and the caller's proxy settings so they reach apt; nothing
 * else of its environment does.  kv holds the proxy settings' strings.
 */
static void
build_env(char *envp[16], char kv[6][1024], char *epoch)
{
	static const char *const keep[] = { "http_proxy", "https_proxy",
	    "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY" };
	int ne = 0;
	size_t k;

	envp[ne++] = TOOL_PATH;
	envp[ne++] = "LC_ALL=C.UTF-8";
	envp[ne++] = "HOME=/root";
	envp[ne++] = "DEBIAN_FRONTEND=noninteractive";
	envp[ne++] = epoch;
	for (k = 0; k < 6; k++)
		if (getenv(keep[k]) != NULL && snprintf(kv[k], sizeof(kv[k]),
		    "%s=%s", keep[k], getenv(keep[k])) < (int)sizeof(kv[k]))
			envp[ne++] = kv[k];
	envp[ne] = NULL;
}

/*
 * The image file img from the profile: mmdebstrap into root, the tree
 * finished, then mkfs.erofs; r's package count and tree size, *pk the
 * installed packages.  Both tools log to logfd (the file logp).  0, or
 * -1 with err.
 */
static int
build_image_file(const struct sbx_build_opts *o, const struct sbx_profile *p,
    const char *suite, char *sources, const char *root, const char *img,
    int logfd, const char *logp, struct sbx_build_res *r, json_t **pk,
    char *err, size_t errlen)
{
	char epoch[48], uuid[40], tf[48], *envp[16], kv[6][1024];
	char *include = NULL, **av;
	char *const mk[] = { "mkfs.erofs", "--quiet", "-zlz4hc", tf, uuid,
	    (char *)img, (char *)root, NULL };
	int rc = -1, rfd;

	if ((av = mmdebstrap_argv(p, suite, sources, root, &include)) ==
	    NULL) {
		sbx_err(err, errlen, "out of memory");
		goto out;
	}
	snprintf(epoch, sizeof(epoch), "SOURCE_DATE_EPOCH=%lld",
	    (long long)SBX_IMAGE_EPOCH);
	build_env(envp, kv, epoch);
	if (o->verbose)
		fprintf(stderr, "sluice-run: mmdebstrap %s, %zu packages asked "
		    "for (log: %s/logs/%s.log)\n", suite, p->npackages,
		    o->image_dir, p->name);
	if (build_tool(av, envp, logfd, logp, o->timeout_s, 1, err,
	    errlen) != 0 || tree_finish(root, err, errlen) != 0)
		goto out;
	*pk = tree_packages(root);
	r->npackages = json_object_size(*pk);
	if ((rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		r->tree_bytes = tree_bytes(rfd, 0);
		close(rfd);
	}
	snprintf(uuid, sizeof(uuid), "-U%.8s-%.4s-%.4s-%.4s-%.12s",
	    r->inputs, r->inputs + 8, r->inputs + 12, r->inputs + 16,
	    r->inputs + 20);
	snprintf(tf, sizeof(tf), "-T%lld", (long long)SBX_IMAGE_EPOCH);
	dprintf(logfd, "mkfs.erofs --quiet -zlz4hc %s %s %s %s\n", tf, uuid,
	    img, root);
	if (build_tool(mk, envp, logfd, logp, o->timeout_s, 0, err,
	    errlen) != 0)
		goto out;
	rc = 0;
out:
	free(av);
	free(include);
	return rc;
}

/* The image's record (<digest>.json): what it was built from and with,
 * what it holds; NULL when out of memory. */
static json_t *
build_record(const struct sbx_profile *p, const struct sbx_build_res *r,
    const char *canon, const char *suite, const char *arch,
    const char *sources, json_t *pk)
{
	char *const v1[] = { "mmdebstrap", "--version", NULL };
	char *const v2[] = { "dpkg-query", "-W", "-f",
	    "erofs-utils ${Version}\n", "erofs-utils", NULL };
	char m1[128], m2[128];
	json_t *src, *meta;
	json_error_t je;
	const char *l, *e;

	tool_line(v1, m1, sizeof(m1));
	tool_line(v2, m2, sizeof(m2));
	src = json_array();
	for (l = sources; *l != '\0'; l = *e ? e + 1 : e) {
		char line[1024];

		e = l + strcspn(l, "\n");
		if (e > l && (size_t)(e - l) < sizeof(line)) {
			memcpy(line, l, (size_t)(e - l));
			line[e - l] = '\0';
			json_array_append_new(src, json_string(line));
		}
	}
	meta = json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:O, s:O, "
	    "s:I, s:I, s:I, s:I, s:i, s:s, s:s, s:s}",
	    "digest", r->digest, "profile", p->name, "inputs", r->inputs,
	    "inputs_text", jsonstrict_load(canon, strlen(canon), &je),
	    "suite", suite, "arch", arch, "sources", src,
	    "packages", pk, "size", (json_int_t)r->size,
	    "tree_bytes", (json_int_t)r->tree_bytes,
	    "build_ms", (json_int_t)r->build_ms,
	    "built", (json_int_t)time(NULL), "format", SBX_IMAGE_FORMAT,
	    "mmdebstrap", m1, "mkfs", m2, "description", p->description);
	json_decref(src);
	return meta;
}

/*
 * Into the store, under its lock: the image file img as <digest>
 * (kept when the same bytes are there: sandboxes may have it mounted,
 * and its first record), its record, and the profile's newest named.
 * 0, or -1 with err.
 */
static int
build_install(const char *image_dir, const char *name, const char *img,
    json_t *meta, struct sbx_build_res *r, char *err, size_t errlen)
{
	char dst[SBX_PATH_MAX + 100];
	struct stat sb;
	int lk, rc = -1;

	if ((lk = img_lock(image_dir, LOCK_EX)) < 0) {
		sbx_err(err, errlen, "%s/.lock: %s", image_dir,
		    strerror(errno));
		return -1;
	}
	if (sbx_image_file(dst, sizeof(dst), image_dir, r->digest) != 0)
		goto out;
	if (stat(dst, &sb) == 0 && S_ISREG(sb.st_mode))
		r->reused = 1;
	else if (chmod(img, 0644) != 0 || rename(img, dst) != 0) {
		sbx_err(err, errlen, "%s: %s", dst, strerror(errno));
		goto out;
	}
	snprintf(dst, sizeof(dst), "%s/%s.json", image_dir, r->digest);
	if (!r->reused || access(dst, F_OK) != 0) {
		char t[SBX_PATH_MAX + 120];

		snprintf(t, sizeof(t), "%s.tmp%d", dst, (int)getpid());
		if (json_dump_file(meta, t, JSON_INDENT(1) | JSON_SORT_KEYS) !=
		    0 || chmod(t, 0644) != 0 || rename(t, dst) != 0) {
			unlink(t);
			sbx_err(err, errlen, "%s: cannot write it", dst);
			goto out;
		}
	}
	if (set_current(image_dir, name, r->digest, err, errlen) != 0)
		goto out;
	rc = 0;
out:
	img_unlock(lk);
	return rc;
}

int
sbx_image_build(const struct sbx_build_opts *o, struct sbx_build_res *r,
    char *err, size_t errlen)
{
	struct sbx_profile p;
	char suite[64], arch[64], work[SBX_PATH_MAX], root[SBX_PATH_MAX + 8];
	char logp[SBX_PATH_MAX + 16], img[SBX_PATH_MAX + 16];
	char dst[SBX_PATH_MAX + 100];
	char *sources = NULL, *srccopy = NULL, *canon = NULL;
	struct sigaction sa, old[3];
	const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
	json_t *meta = NULL, *pk = NULL;
	int rc = SBX_IMG_FAIL, st, wlock = -1, logfd = -1, fd, i;
	int64_t t0 = sbx_now_ms();
	struct stat sb;

	memset(r, 0, sizeof(*r));
	work[0] = '\0';
	if ((st = sbx_profile_load(&p, o->profile_dirs, o->profile, err,
	    errlen)) != 0)
		return st;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	build_stop = 0;
	for (i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);
	if (o->suite != NULL && o->suite[0] != '\0')
		snprintf(suite, sizeof(suite), "%s", o->suite);
	else if (host_suite(suite, sizeof(suite)) != 0) {
		sbx_err(err, errlen, "no VERSION_CODENAME in /etc/os-release: "
		    "set image_suite");
		goto out;
	}
	{
		char *const av2[] = { "dpkg", "--print-architecture", NULL };

		tool_line(av2, arch, sizeof(arch));
		if (!sbx_id_ok(arch, 32)) {
			sbx_err(err, errlen, "dpkg --print-architecture: no "
			    "answer (is this Debian?)");
			goto out;
		}
	}
	if (o->sources != NULL && o->sources[0] != '\0')
		sources = strdup(o->sources);
	else
		sources = sbx_host_sources(arch, err, errlen);
	if (sources == NULL || (srccopy = strdup(sources)) == NULL)
		goto out;
	if (sbx_image_inputs(&p, suite, sources, arch, r->inputs, &canon) !=
	    0) {
		sbx_err(err, errlen, "out of memory");
		goto out;
	}
	snprintf(dst, sizeof(dst), "%s/profiles", o->image_dir);
	if (util_mkdir_p(dst, 0755) != 0) {
		sbx_err(err, errlen, "%s: %s", dst, strerror(errno));
		goto out;
	}
	if (o->cached && (st = build_from_store(o, p.name, r, err,
	    errlen)) != 0) {
		if (st > 0) {
			r->build_ms = sbx_now_ms() - t0;
			rc = 0;
		}
		goto out;
	}
	if (build_workdir(o->image_dir, work, sizeof(work), &wlock, err,
	    errlen) != 0)
		goto out;
	snprintf(root, sizeof(root), "%s/root", work);
	snprintf(logp, sizeof(logp), "%s/build.log", work);
	snprintf(img, sizeof(img), "%s/image" SBX_IMAGE_EXT, work);
	if (mkdir(root, 0755) != 0 || (logfd = open(logp, O_WRONLY | O_CREAT |
	    O_APPEND | O_CLOEXEC, 0600)) < 0) {
		sbx_err(err, errlen, "%s: %s", work, strerror(errno));
		goto out;
	}
	dprintf(logfd, "sluice-run image build %s\ninputs %s\n%s\n", p.name,
	    r->inputs, canon);
	if (build_image_file(o, &p, suite, srccopy, root, img, logfd, logp, r,
	    &pk, err, errlen) != 0)
		goto out;
	if ((fd = open(img, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 ||
	    fstat(fd, &sb) != 0 || sbx_sha256_fd(fd, r->digest) != 0) {
		sbx_err(err, errlen, "%s: %s", img, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	r->size = (uint64_t)sb.st_size;
	r->build_ms = sbx_now_ms() - t0;
	if ((meta = build_record(&p, r, canon, suite, arch, sources, pk)) ==
	    NULL) {
		sbx_err(err, errlen, "out of memory");
		goto out;
	}
	if (build_install(o->image_dir, p.name, img, meta, r, err,
	    errlen) != 0)
		goto out;
	rc = 0;
out:
	if (logfd >= 0) {
		/* the last build's log, kept for whoever wants to see why */
		char lg[SBX_PATH_MAX + 100];
		size_t el = err != NULL ? strlen(err) : 0;

		close(logfd);
		snprintf(lg, sizeof(lg), "%s/logs", o->image_dir);
		(void)sbx_mkdir(lg, 0755);
		snprintf(lg, sizeof(lg), "%s/logs/%s.log", o->image_dir, p.name);
		if (rename(logp, lg) == 0 && rc != 0 && err != NULL &&
		    el + 16 < errlen)
			snprintf(err + el, errlen - el, " (log: %s)", lg);
	}
	if (work[0] != '\0')
		sbx_image_rm_tree(work);
	if (wlock >= 0)
		close(wlock);
	for (i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	if (rc == 0 && !r->cached)
		(void)sbx_image_sweep(o->image_dir);
	json_decref(meta);
	json_decref(pk);
	free(canon);
	free(sources);
	free(srccopy);
	sbx_profile_free(&p);
	return rc;
}
