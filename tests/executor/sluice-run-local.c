/*
 * sluice-run-local.c: the backends' test driver (sluice-run-local,
 * built for make check only, never installed): sluice-run's local mode,
 * the backends (sandbox-glue/executor/backend/sbx.h) driven directly,
 * root only, without sluice-execd, for tests/scenario/t_run.py,
 * t_run_gvisor.py and t_image.py.  One persistent sandbox per chat,
 * commands run in it with a timeout and capped output, the broker
 * session made and removed through sluiced's control socket; the image
 * verbs are the installed sluice-run's (cli/image_verbs.c).  Like
 * tests/fw/fw_tool.c for the firewall, it is no part of the product.
 *
 * Local state: <state-dir>/.lock (exclusive for create, destroy, gc;
 * shared for list), <state-dir>/<chat>/record.json (struct sbx_rec),
 * <chat>/lock (held while the record changes), <chat>/run/<tag> (a
 * running command: the pid to wait for, used by cancel and destroy).  No
 * daemon: every invocation reads the state, acts, and leaves.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/openat2.h>

#include <jansson.h>

#include "sandbox-glue/executor/backend/sbx.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"
#include "sandbox-glue/executor/image/sbx_image.h"
#include "sandbox-glue/executor/cli/image_verbs.h"
#include "sandbox-glue/executor/cli/run_api.h"

#define PROG		"sluice-run"
#define DEF_STATE	"/run/sluice-run"
#define DEF_CONTROL	"/run/sluice/control.sock"
#define PROXY_URL	"http://127.0.0.1:3128"

/* ---- configuration (sbx_cfg.c) ---- */

static struct sbx_cfg C;
static int opt_json;

static void
die(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

static void
die(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

/*
 * s as it may be printed on a terminal (sbx_text_safe: controls, C1,
 * bidirectional and invisible characters escaped), for messages that
 * hold names and paths from callers or sandboxes.  Four at a time.
 */
static const char *
safe(const char *s)
{
	static char buf[4][4 * SBX_PATH_MAX + 1];
	static int k;

	k = (k + 1) % 4;
	sbx_text_safe(s, buf[k], sizeof(buf[k]));
	return buf[k];
}

/* ---- ids, paths, locks ---- */

static void
chat_dir(char *buf, size_t len, const char *chat)
{
	if (snprintf(buf, len, "%s/%s", C.state_dir, chat) >= (int)len)
		die(EX_USAGE, "state directory path too long");
}

/*
 * flock path (created unless must_exist); returns the fd, -1 when busy
 * (LOCK_NB) or, with must_exist, when the file is gone; exits on other
 * errors.  destroy removes a chat's directory, lock file included, while
 * holding the lock: a waiter then holds a lock on a file nobody else
 * will open, so once locked the fd must still be the file at path
 * (else: open again).
 */
static int
lock_path(const char *path, int how, int must_exist)
{
	struct stat a, b;
	int fd;

	for (;;) {
		fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW |
		    (must_exist ? 0 : O_CREAT), 0600);
		if (fd < 0 && must_exist && errno == ENOENT)
			return -1;
		if (fd < 0)
			die(EX_FAIL, "%s: %s", path, strerror(errno));
		while (flock(fd, how) != 0) {
			if (errno == EINTR)
				continue;
			if (errno == EWOULDBLOCK) {
				close(fd);
				return -1;
			}
			die(EX_FAIL, "flock %s: %s", path, strerror(errno));
		}
		if (fstat(fd, &a) == 0 && lstat(path, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return fd;
		close(fd);
	}
}

static int
lock_global(int how)
{
	char p[SBX_PATH_MAX + 16];

	if (mkdir(C.state_dir, 0711) != 0 && errno != EEXIST)
		die(EX_FAIL, "%s: %s", C.state_dir, strerror(errno));
	snprintf(p, sizeof(p), "%s/.lock", C.state_dir);
	return lock_path(p, how, 0);
}

/* The chat's lock, or -1 when the chat has no directory. */
static int
lock_chat(const char *chat, int how)
{
	char d[SBX_PATH_MAX], p[SBX_PATH_MAX + 16];
	struct stat st;

	chat_dir(d, sizeof(d), chat);
	if (lstat(d, &st) != 0 || !S_ISDIR(st.st_mode))
		return -1;
	snprintf(p, sizeof(p), "%s/lock", d);
	/* create makes the lock file right after the directory; a missing
	 * one means not made yet or destroyed meanwhile */
	return lock_path(p, how, 1);
}

static void
unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* ---- records ---- */

/* The chat's record; -1 (quietly) when there is none or it is not
 * the chat's. */
static int
rec_load(const char *chat, struct sbx_rec *r)
{
	char p[SBX_PATH_MAX + 32], err[256];

	snprintf(p, sizeof(p), "%s/%s/record.json", C.state_dir, chat);
	if (sbx_rec_load(r, p, err, sizeof(err)) != 0) {
		if (access(p, F_OK) == 0)
			fprintf(stderr, PROG ": %s: %s\n", chat, err);
		return -1;
	}
	return strcmp(r->chat, chat) == 0 ? 0 : -1;
}

/* Write record.json through a temporary file and rename. */
static int
rec_save(const struct sbx_rec *r)
{
	char p[SBX_PATH_MAX + 32], t[SBX_PATH_MAX + 32];
	json_t *o = sbx_rec_json(r);
	int rc;

	snprintf(p, sizeof(p), "%s/record.json", r->dir);
	snprintf(t, sizeof(t), "%s/record.json.tmp", r->dir);
	rc = json_dump_file(o, t, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(o);
	if (rc != 0 || rename(t, p) != 0) {
		fprintf(stderr, PROG ": %s: cannot save the record\n", p);
		return -1;
	}
	return 0;
}

/* Chat names of all records (malloc'd, NULL-terminated). */
static char **
chats_all(void)
{
	char **v = calloc(1, sizeof(char *));
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	if (v == NULL)
		die(EX_FAIL, "out of memory");
	if ((d = opendir(C.state_dir)) == NULL)
		return v;
	while ((de = readdir(d)) != NULL) {
		char p[SBX_PATH_MAX + 300];
		char **nv;

		if (!sbx_id_ok(de->d_name, SBX_ID_MAX))
			continue;
		snprintf(p, sizeof(p), "%s/%s/record.json", C.state_dir,
		    de->d_name);
		if (access(p, F_OK) != 0)
			continue;
		if ((nv = realloc(v, (n + 2) * sizeof(char *))) == NULL)
			die(EX_FAIL, "out of memory");
		v = nv;
		v[n++] = strdup(de->d_name);
		v[n] = NULL;
	}
	closedir(d);
	return v;
}

static void
chats_free(char **v)
{
	size_t i;

	for (i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/*
 * Empty the directory open at dfd and close it.  Everything goes through
 * the directory fds (unlinkat, openat with O_NOFOLLOW): the workspace
 * belongs to the sandbox user (an unprivileged host uid), and a
 * directory swapped for a symbolic link between a check and a path-based
 * call would have root remove files outside it.  Depth is bounded by the
 * descriptors it takes.
 */
static void
rm_at(int dfd, int depth)
{
	struct dirent *de;
	DIR *d = fdopendir(dfd);
	int pass, gone;

	if (d == NULL) {
		close(dfd);
		return;
	}
	/* removing while reading may skip entries: go again while it
	 * removes something */
	for (pass = 0, gone = 1; pass < 8 && gone; pass++) {
		gone = 0;
		rewinddir(d);
		while ((de = readdir(d)) != NULL) {
			int fd;

			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
				gone = 1;
				continue;
			}
			if (errno != EISDIR || depth >= 256)
				continue;
			fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				continue;
			/* nor into another file system: an image still
			 * mounted in a sandbox's directory is not to be
			 * emptied (it is read-only anyway, and large) */
			{
				struct stat a, b;

				if (fstat(dirfd(d), &a) != 0 || fstat(fd, &b) !=
				    0 || a.st_dev != b.st_dev) {
					close(fd);
					continue;
				}
			}
			rm_at(fd, depth + 1);
			if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) == 0)
				gone = 1;
		}
	}
	closedir(d);
}

/* Remove a directory tree (no symlink following, see rm_at). */
static void
rm_tree(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOTDIR || errno == ELOOP)
			unlink(path);
		return;
	}
	rm_at(fd, 0);
	rmdir(path);
}

/* ---- a workspace given with --workspace ---- */

/*
 * --workspace DIR hands a host directory to the sandbox user, so only one
 * that is new or empty, and only under the configured workspace_root (a
 * directory of root's that nobody else may write, never / nor the
 * system's trees): a root-owned /etc/x or someone's home must never
 * change hands.  DIR is relative to workspace_root or absolute under it;
 * every directory from workspace_root down to it must be root's and not
 * writable by group or others, so nobody can swap a link in later.  A
 * new one is made (and removed on destroy); an empty one keeps its
 * owner, group and mode in the record, and destroy gives it back with
 * them, the files the sandbox made in it included.
 */
struct ws_pick {
	int parent;                     /* descriptor of DIR's parent */
	char base[NAME_MAX + 1];        /* DIR's last component */
	struct stat st;                 /* DIR when it exists */
	int exists;
};

static int
ws_dir_ok(int fd, const char *name, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return sbx_err(err, errlen, "%s: %s", safe(name),
		    strerror(errno));
	if (st.st_uid != 0 || (st.st_mode & 022))
		return sbx_err(err, errlen, "%s: must be root's and not "
		    "writable by group or others", safe(name));
	return 0;
}

/* 1 when the directory open at fd has no entry, 0 if it has, -1 error. */
static int
dir_empty(int fd)
{
	int d = dup(fd), n = 0;
	struct dirent *de;
	DIR *dp;

	if (d < 0 || (dp = fdopendir(d)) == NULL) {
		if (d >= 0)
			close(d);
		return -1;
	}
	while ((de = readdir(dp)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..")
		    != 0)
			n++;
	closedir(dp);
	return n == 0;
}

/* Check DIR and fill r->workspace and what destroy needs; nothing
 * changes yet (ws_take). */
static int
ws_check(const char *given, struct sbx_rec *r, struct ws_pick *w, char *err,
    size_t errlen)
{
	char root[PATH_MAX], state[PATH_MAX], parent[PATH_MAX];
	char path[2 * PATH_MAX], *slash, *comp, *save = NULL;
	size_t rl, n;
	int fd, nfd;

	memset(w, 0, sizeof(*w));
	w->parent = -1;
	if (C.workspace_root[0] == '\0')
		return sbx_err(err, errlen, "--workspace: no workspace_root in "
		    "the configuration");
	if (realpath(C.workspace_root, root) == NULL)
		return sbx_err(err, errlen, "workspace_root %s: %s",
		    safe(C.workspace_root), strerror(errno));
	if (sbx_path_system(root))
		return sbx_err(err, errlen, "workspace_root %s: a system "
		    "directory", safe(root));
	rl = strlen(root);
	/* the state directory's entries are chats: not workspaces */
	if (realpath(C.state_dir, state) != NULL && ((strncmp(state, root, rl)
	    == 0 && (state[rl] == '\0' || state[rl] == '/')) || (strncmp(root,
	    state, strlen(state)) == 0 && root[strlen(state)] == '/')))
		return sbx_err(err, errlen, "workspace_root %s: overlaps the "
		    "state directory", safe(root));
	if (snprintf(path, sizeof(path), "%s%s%s", given[0] == '/' ? "" : root,
	    given[0] == '/' ? "" : "/", given) >= (int)sizeof(path))
		return sbx_err(err, errlen, "--workspace: path too long");
	for (n = strlen(path); n > 1 && path[n - 1] == '/'; n--)
		path[n - 1] = '\0';
	slash = strrchr(path, '/');
	if (strlen(slash + 1) >= sizeof(w->base) || strcmp(slash + 1, ".") ==
	    0 || strcmp(slash + 1, "..") == 0 || slash[1] == '\0')
		return sbx_err(err, errlen, "--workspace %s: not a directory "
		    "name", safe(given));
	snprintf(w->base, sizeof(w->base), "%s", slash + 1);
	*slash = '\0';
	if (realpath(path[0] ? path : "/", parent) == NULL)
		return sbx_err(err, errlen, "--workspace %s: %s", safe(given),
		    strerror(errno));
	if (strncmp(parent, root, rl) != 0 || (parent[rl] != '\0' &&
	    parent[rl] != '/'))
		return sbx_err(err, errlen, "--workspace %s: not under "
		    "workspace_root %s", safe(given), safe(root));
	if (snprintf(r->workspace, sizeof(r->workspace), "%s/%s", parent,
	    w->base) >= (int)sizeof(r->workspace))
		return sbx_err(err, errlen, "--workspace: path too long");
	/* root and each directory down to the parent: root's alone */
	if ((fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return sbx_err(err, errlen, "%s: %s", safe(root),
		    strerror(errno));
	if (ws_dir_ok(fd, root, err, errlen) != 0)
		goto fail;
	for (comp = strtok_r(parent + rl, "/", &save); comp != NULL;
	    comp = strtok_r(NULL, "/", &save)) {
		if ((nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) < 0) {
			sbx_err(err, errlen, "%s: %s", safe(comp),
			    strerror(errno));
			goto fail;
		}
		close(fd);
		fd = nfd;
		if (ws_dir_ok(fd, comp, err, errlen) != 0)
			goto fail;
	}
	if (fstatat(fd, w->base, &w->st, AT_SYMLINK_NOFOLLOW) == 0) {
		struct stat ps;
		int dfd, e;

		if (!S_ISDIR(w->st.st_mode)) {
			sbx_err(err, errlen, "--workspace %s: %s", safe(given),
			    S_ISLNK(w->st.st_mode) ? "a symbolic link" :
			    "not a directory");
			goto fail;
		}
		if (fstat(fd, &ps) != 0 || ps.st_dev != w->st.st_dev) {
			sbx_err(err, errlen, "--workspace %s: a mount point",
			    safe(given));
			goto fail;
		}
		if ((dfd = openat(fd, w->base, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) < 0) {
			sbx_err(err, errlen, "--workspace %s: %s", safe(given),
			    strerror(errno));
			goto fail;
		}
		e = dir_empty(dfd);
		close(dfd);
		if (e != 1) {
			sbx_err(err, errlen, "--workspace %s: %s", safe(given),
			    e == 0 ? "not empty (only a new or empty directory "
			    "is handed to a sandbox)" : strerror(errno));
			goto fail;
		}
		w->exists = 1;
		r->workspace_given = 1;
		r->workspace_uid = w->st.st_uid;
		r->workspace_gid = w->st.st_gid;
		r->workspace_mode = w->st.st_mode & 07777;
	} else if (errno == ENOENT)
		r->workspace_made = 1;
	else {
		sbx_err(err, errlen, "--workspace %s: %s", safe(given),
		    strerror(errno));
		goto fail;
	}
	w->parent = fd;
	return 0;
fail:
	close(fd);
	return -1;
}

/* Make or take the directory ws_check chose and hand it to the sandbox
 * user; *changed once it has changed. */
static int
ws_take(struct sbx_rec *r, struct ws_pick *w, int *changed, char *err,
    size_t errlen)
{
	struct stat st;
	int dfd = -1, rc = -1;

	if (!w->exists) {
		if (mkdirat(w->parent, w->base, 0750) != 0) {
			sbx_err(err, errlen, "%s: %s", safe(r->workspace),
			    strerror(errno));
			goto out;
		}
		*changed = 1;
	}
	if ((dfd = openat(w->parent, w->base, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) < 0 || fstat(dfd, &st) != 0) {
		sbx_err(err, errlen, "%s: %s", safe(r->workspace),
		    strerror(errno));
		goto out;
	}
	if (w->exists && (st.st_dev != w->st.st_dev || st.st_ino !=
	    w->st.st_ino || dir_empty(dfd) != 1)) {
		sbx_err(err, errlen, "%s: changed while it was checked",
		    safe(r->workspace));
		goto out;
	}
	*changed = 1;
	if (fchown(dfd, r->host_uid, r->host_gid) != 0) {
		sbx_err(err, errlen, "chown %s: %s", safe(r->workspace),
		    strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (dfd >= 0)
		close(dfd);
	close(w->parent);
	w->parent = -1;
	return rc;
}

/* Entries under dfd owned by the sandbox's uids or gids become the
 * owner's again (no link followed: fchownat on the entry itself). */
static void
ws_give_back_at(const struct sbx_rec *r, int dfd, int depth)
{
	uid_t lo = r->uid_base, hi = r->uid_base + r->uid_count;
	struct dirent *de;
	struct stat st;
	DIR *d = fdopendir(dfd);

	if (d == NULL) {
		close(dfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		uid_t u;
		gid_t g;
		int fd;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") ==
		    0 || fstatat(dirfd(d), de->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		u = st.st_uid >= lo && st.st_uid < hi ? r->workspace_uid :
		    st.st_uid;
		g = st.st_gid >= lo && st.st_gid < hi ? r->workspace_gid :
		    st.st_gid;
		/* the kernel drops setuid and setgid bits on the way */
		if ((u != st.st_uid || g != st.st_gid) && fchownat(dirfd(d),
		    de->d_name, u, g, AT_SYMLINK_NOFOLLOW) != 0)
			fprintf(stderr, PROG ": chown %s/%s: %s\n",
			    safe(r->workspace), safe(de->d_name),
			    strerror(errno));
		if (!S_ISDIR(st.st_mode) || depth >= 256)
			continue;
		if ((fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) >= 0)
			ws_give_back_at(r, fd, depth + 1);
	}
	closedir(d);
}

/* destroy of a sandbox given an empty directory: it and what the
 * sandbox made in it go back to the directory's owner, with its mode. */
static void
ws_give_back(const struct sbx_rec *r)
{
	int fd = open(r->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC), sub;

	if (fd < 0) {
		fprintf(stderr, PROG ": workspace %s: %s\n", safe(r->workspace),
		    strerror(errno));
		return;
	}
	if ((sub = dup(fd)) >= 0)
		ws_give_back_at(r, sub, 0);
	if (fchown(fd, r->workspace_uid, r->workspace_gid) != 0 ||
	    fchmod(fd, r->workspace_mode) != 0)
		fprintf(stderr, PROG ": workspace %s: %s\n", safe(r->workspace),
		    strerror(errno));
	close(fd);
}

/* ---- sluiced control socket: one HTTP/1.1 request ---- */

/*
 * Send method path body over the Unix socket and return the status;
 * body of the answer in *resp (malloc) or NULL.  -1 with err when the
 * socket cannot be reached or the answer is not HTTP.
 */
static int
broker_call(const char *method, const char *path, const char *body,
    char **resp, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	char head[512], *buf = NULL, *nb;
	const char *p;
	size_t len = 0, cap = 0, blen = body ? strlen(body) : 0;
	int fd, status = -1;
	struct pollfd pfd;
	int64_t deadline = sbx_now_ms() + 10000;
	ssize_t n;

	*resp = NULL;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(C.control) >= sizeof(sun.sun_path))
		return sbx_err(err, errlen, "control socket path too long");
	memcpy(sun.sun_path, C.control, strlen(C.control));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return sbx_err(err, errlen, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		sbx_err(err, errlen, "cannot reach sluiced at %s: %s",
		    C.control, strerror(errno));
		close(fd);
		return -1;
	}
	n = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: sluiced\r\n"
	    "Connection: close\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\n\r\n", method, path, blen);
	if (write(fd, head, (size_t)n) != n || (blen && write(fd, body, blen)
	    != (ssize_t)blen)) {
		sbx_err(err, errlen, "sluiced at %s: write: %s", C.control,
		    strerror(errno));
		close(fd);
		return -1;
	}
	for (;;) {
		int64_t left = deadline - sbx_now_ms();

		if (left <= 0) {
			sbx_err(err, errlen, "sluiced at %s: no answer in 10 s",
			    C.control);
			goto out;
		}
		pfd.fd = fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
			break;
		if (len + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 16384;
			if (cap > (4u << 20) || (nb = realloc(buf, cap)) == NULL) {
				sbx_err(err, errlen, "sluiced: answer too large");
				goto out;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (buf != NULL)
		buf[len] = '\0';
	if (sbx_http_split(buf, len, &status, &p) != 0) {
		sbx_err(err, errlen, "sluiced at %s: not an HTTP answer",
		    C.control);
		goto out;
	}
	if (p != NULL)
		*resp = strdup(p);
out:
	free(buf);
	close(fd);
	return status;
}

static int
broker_delete(const char *chat, char *err, size_t errlen)
{
	char path[128], *resp = NULL, m[256];
	int st;

	snprintf(path, sizeof(path), "/v1/sessions/%s", chat);
	st = broker_call("DELETE", path, NULL, &resp, err, errlen);
	if (st < 0)
		return -1;
	if (st != 200 && st != 204 && st != 404) {
		sbx_err(err, errlen, "sluiced refused to delete session %s "
		    "(%d): %s", chat, st, sbx_broker_msg(resp, m, sizeof(m)));
		free(resp);
		return -1;
	}
	free(resp);
	return 0;
}

/* Hand the session socket to the sandbox user: sluiced makes it 0660
 * root's, and a restarted sluiced makes it afresh. */
static void
socket_own(const struct sbx_rec *r)
{
	char p[SBX_PATH_MAX + 16];
	struct stat st;

	snprintf(p, sizeof(p), "%s/proxy.sock", r->session_dir);
	if (lstat(p, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    (st.st_uid != r->host_uid || st.st_gid != r->host_gid))
		if (lchown(p, r->host_uid, r->host_gid) != 0)
			fprintf(stderr, PROG ": chown %s: %s\n", p,
			    strerror(errno));
}

/* ---- output ---- */

/* Valid UTF-8 copy of b[0..n) (bad bytes become U+FFFD). */
static json_t *
json_text(const unsigned char *b, size_t n)
{
	char *o = malloc(n * 3 + 1);
	size_t i = 0, j = 0;
	json_t *s;

	if (o == NULL)
		die(EX_FAIL, "out of memory");
	while (i < n) {
		unsigned c = b[i];
		size_t k, need = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 :
		    (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
		int ok = need != 9 && i + need < n + (need ? 0 : 1) &&
		    (need == 0 || i + need < n);

		for (k = 1; ok && k <= need; k++)
			if ((b[i + k] & 0xc0) != 0x80)
				ok = 0;
		if (ok && need == 1 && c < 0xc2)
			ok = 0;
		if (ok && need == 2 && ((c == 0xe0 && b[i + 1] < 0xa0) ||
		    (c == 0xed && b[i + 1] >= 0xa0)))
			ok = 0;
		if (ok && need == 3 && ((c == 0xf0 && b[i + 1] < 0x90) ||
		    c > 0xf4 || (c == 0xf4 && b[i + 1] >= 0x90)))
			ok = 0;
		if (!ok || (c == 0)) {
			if (c == 0 && ok) {
				o[j++] = ' ';   /* jansson: no NULs */
				i++;
				continue;
			}
			memcpy(o + j, "\xef\xbf\xbd", 3);
			j += 3;
			i++;
			continue;
		}
		memcpy(o + j, b + i, need + 1);
		j += need + 1;
		i += need + 1;
	}
	s = json_stringn(o, j);
	free(o);
	return s;
}

static void
json_out(json_t *o)
{
	/* ASCII only (\uXXXX beyond): the same strings to a JSON reader,
	 * and nothing a terminal would act on when shown raw */
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS |
	    JSON_ENSURE_ASCII);

	if (s == NULL)
		die(EX_FAIL, "cannot encode JSON");
	printf("%s\n", s);
	free(s);
	json_decref(o);
}

/* ---- the commands' environment ---- */

struct envv {
	char **v;
	size_t n;
};

static void
env_set(struct envv *e, const char *kv)
{
	size_t klen = strcspn(kv, "="), i;
	char **nv;

	for (i = 0; i < e->n; i++)
		if (strncmp(e->v[i], kv, klen) == 0 && e->v[i][klen] == '=') {
			free(e->v[i]);
			e->v[i] = strdup(kv);
			return;
		}
	if ((nv = realloc(e->v, (e->n + 2) * sizeof(char *))) == NULL)
		die(EX_FAIL, "out of memory");
	e->v = nv;
	e->v[e->n++] = strdup(kv);
	e->v[e->n] = NULL;
}

/* A clean environment: nothing of the host's, the proxy set for every
 * client we know, then the caller's --env. */
static void
env_base(struct envv *e)
{
	static const char *const base[] = {
		"PATH=" SBX_HOME "/.local/bin:/usr/local/sbin:/usr/local/bin:"
		    "/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" SBX_HOME, "USER=user", "LOGNAME=user",
		"SHELL=/bin/bash", "LANG=C.UTF-8", "TMPDIR=/tmp",
		"PWD=" SBX_WORKDIR,
		"HTTP_PROXY=" PROXY_URL, "HTTPS_PROXY=" PROXY_URL,
		"http_proxy=" PROXY_URL, "https_proxy=" PROXY_URL,
		"NO_PROXY=localhost,127.0.0.1,::1",
		"no_proxy=localhost,127.0.0.1,::1",
		"PIP_PROXY=" PROXY_URL,
		/* the system is read-only anyway: let pip fall back to a
		 * user install (~/.local) instead of refusing (PEP 668) */
		"PIP_BREAK_SYSTEM_PACKAGES=1",
		"npm_config_prefix=" SBX_HOME "/.local",
		"npm_config_proxy=" PROXY_URL,
		"npm_config_https_proxy=" PROXY_URL,
		"CARGO_HTTP_PROXY=" PROXY_URL,
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.proxy",
		"GIT_CONFIG_VALUE_0=" PROXY_URL,
	};
	size_t i;

	for (i = 0; i < sizeof(base) / sizeof(base[0]); i++)
		env_set(e, base[i]);
}

/* ---- running one command ---- */

struct result {
	int exit_code;
	int timed_out, cancelled;
	int cut;                /* OUT_PASS: stdout passed its cap, killed */
	int64_t duration_ms;
	unsigned char *out[2];
	size_t len[2];
	unsigned long long dropped[2];
};

static void
run_file(char *buf, size_t len, const struct sbx_rec *r, const char *tag)
{
	snprintf(buf, len, "%s/run/%s", r->dir, tag);
}

/*
 * Resume the sandbox if suspended, check it is alive and spawn argv in
 * it; called with the chat lock held.  fd_out/fd_err -1: pipes made here
 * (*pout, *perr).
 */
static int
start_cmd(struct sbx_rec *r, const struct sbx_backend *be, char **argv,
    struct envv *env, int fd_in, int fd_out, int fd_err, int *pout,
    int *perr, struct sbx_proc *pr)
{
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 };
	char err[512], p[SBX_PATH_MAX + 200], pid[48];
	struct sbx_cmd cmd;
	int fd;

	if (!be->alive(r)) {
		fprintf(stderr, PROG ": the sandbox of chat %s is gone (its "
		    "holder died); destroy it and create it again\n", r->chat);
		return -1;
	}
	if (r->suspended) {
		if (be->resume(r, err, sizeof(err)) != 0) {
			fprintf(stderr, PROG ": resume: %s\n", err);
			return -1;
		}
		rec_save(r);
	}
	socket_own(r);
	if (fd_out < 0 && (pipe2(po, O_CLOEXEC) != 0 ||
	    pipe2(pe, O_CLOEXEC) != 0)) {
		fprintf(stderr, PROG ": pipe: %s\n", strerror(errno));
		return -1;
	}
	memset(&cmd, 0, sizeof(cmd));
	cmd.argv = argv;
	cmd.envp = env->v;
	cmd.fd_in = fd_in;
	cmd.fd_out = fd_out >= 0 ? fd_out : po[1];
	cmd.fd_err = fd_err >= 0 ? fd_err : pe[1];
	cmd.cwd = SBX_WORKDIR;
	if (be->spawn(r, &cmd, pr, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": %s\n", err);
		if (po[0] >= 0) {
			close(po[0]); close(po[1]);
			close(pe[0]); close(pe[1]);
		}
		return -1;
	}
	if (po[0] >= 0) {
		close(po[1]);
		close(pe[1]);
		*pout = po[0];
		*perr = pe[0];
	}
	snprintf(p, sizeof(p), "%s/run", r->dir);
	(void)mkdir(p, 0700);
	run_file(p, sizeof(p), r, pr->tag);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600))
	    >= 0) {
		/* with its start time: a run file whose sluice-run was
		 * killed must be told from a running command (no process
		 * of ours for it, pid 0: we stand for it) */
		pid_t who = pr->pid ? pr->pid : getpid();

		snprintf(pid, sizeof(pid), "%d %llu\n", (int)who,
		    (unsigned long long)sbx_proc_start(who));
		(void)!write(fd, pid, strlen(pid));
		close(fd);
	}
	return 0;
}

static volatile sig_atomic_t got_signal;

static void
on_signal(int sig)
{
	got_signal = sig;
}

/* SIGINT, SIGTERM and SIGHUP while a command runs cancel it: its tree
 * is killed rather than left running without anyone reading it. */
static void
catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static int
pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* How collect() treats the command's output (flags). */
enum {
	OUT_ECHO = 1,   /* kept bytes are also written through as they come */
	OUT_PASS = 2,   /* stdout is written through, not kept, at most cap[0]
	                 * bytes: past them the command is killed (res->cut) */
};

/* m bytes of stream i: keep what fits under cap (or pass it on, see
 * OUT_PASS), echo kept bytes, count the rest. */
static void
take(struct result *res, int i, const char *buf, size_t m, long cap,
    int how)
{
	size_t keep;

	keep = res->len[i] < (size_t)cap ? (size_t)cap - res->len[i] : 0;
	if (keep > m)
		keep = m;
	if (i == 0 && (how & OUT_PASS)) {
		if (keep)
			(void)!write(1, buf, keep);
		if (keep < m)
			res->cut = 1;
	} else {
		memcpy(res->out[i] + res->len[i], buf, keep);
		if ((how & OUT_ECHO) && keep)
			(void)!write(i ? 2 : 1, buf, keep);
	}
	res->len[i] += keep;
	res->dropped[i] += m - keep;
}

/* Reap pr, bounded when it was just killed: should the backend fail to
 * end it (a stuck runsc), kill the host process so that we return.  A
 * command without a process of ours (pid 0) is reaped through its fd
 * (the backend's reap()), taken for killed when that does not come. */
static void
reap(const struct sbx_backend *be, struct sbx_proc *pr, int *st, int killed)
{
	int64_t until = sbx_now_ms() + 10000;
	pid_t w, pid = pr->pid;

	if (pid == 0) {
		struct pollfd p = { pr->fd, POLLIN, 0 };

		*st = SIGKILL;
		while (sbx_now_ms() < until || !killed) {
			if (poll(&p, 1, 100) > 0 && be->reap(pr, st) == 0)
				break;
		}
		close(pr->fd);
		pr->fd = -1;
		return;
	}
	if (!killed) {
		while (waitpid(pid, st, 0) < 0 && errno == EINTR)
			;
		return;
	}
	while ((w = waitpid(pid, st, WNOHANG)) == 0 && sbx_now_ms() < until)
		usleep(10000);
	if (w == 0) {
		fprintf(stderr, PROG ": process %d outlived the kill, killing "
		    "it\n", (int)pid);
		kill(pid, SIGKILL);
		while (waitpid(pid, st, 0) < 0 && errno == EINTR)
			;
	}
}

/*
 * Read both pipes into res (cap[i] bytes kept of stream i, the rest read
 * and counted) until the main process exits or the timeout passes; how:
 * OUT_ECHO (text mode) writes kept bytes through as they come, OUT_PASS
 * passes stdout on instead of keeping it.
 */
static void
collect(struct sbx_rec *r, const struct sbx_backend *be, struct sbx_proc *pr,
    int fo, int fe, long timeout_s, const long cap[2], int how,
    struct result *res)
{
	int64_t deadline = pr->start_ms + timeout_s * 1000;
	/* the exit: the pid's pidfd, or the backend's fd (pid 0) */
	int pfd_pid = pr->pid ? pidfd_open_(pr->pid) : pr->fd;
	int fds[2] = { fo, fe }, i, k, st = 0;
	int exited = 0, killed = 0;
	char buf[65536], err[256];

	for (i = 0; i < 2; i++)
		if ((res->out[i] = malloc(cap[i] > 0 && !(i == 0 &&
		    (how & OUT_PASS)) ? (size_t)cap[i] + 1 : 1)) == NULL)
			die(EX_FAIL, "out of memory");
	while (!exited) {
		struct pollfd p[3];
		int n = 0, fdi[3];
		int64_t left = deadline - sbx_now_ms();

		if (left <= 0 || got_signal || res->cut) {
			if (res->cut)
				;       /* said by the caller */
			else if (left <= 0)
				res->timed_out = 1;
			else
				res->cancelled = 1;
			if (be->kill_tree(r, pr, err, sizeof(err)) != 0)
				fprintf(stderr, PROG ": %s\n", err);
			killed = 1;
			break;
		}
		for (i = 0; i < 2; i++)
			if (fds[i] >= 0) {
				p[n].fd = fds[i];
				p[n].events = POLLIN;
				fdi[n++] = i;
			}
		if (pfd_pid >= 0) {
			p[n].fd = pfd_pid;
			p[n].events = POLLIN;
			fdi[n++] = 2;
		}
		/* without a pidfd (kernels before 5.3) the exit is polled */
		if (left > (pfd_pid >= 0 ? 60000 : 50))
			left = pfd_pid >= 0 ? 60000 : 50;
		if (poll(p, n, (int)left) < 0 && errno != EINTR)
			break;
		if (pfd_pid < 0 && pr->pid && waitpid(pr->pid, &st, WNOHANG) ==
		    pr->pid) {
			exited = 2;
			break;
		}
		for (k = 0; k < n; k++) {
			ssize_t m;

			if (p[k].revents == 0)
				continue;
			if (fdi[k] == 2) {
				if (pr->pid == 0 && be->reap(pr, &st) == 0) {
					close(pr->fd);
					pr->fd = pfd_pid = -1;
					exited = 2;
				} else if (pr->pid)
					exited = 1;
				continue;
			}
			i = fdi[k];
			m = read(fds[i], buf, sizeof(buf));
			if (m <= 0) {
				close(fds[i]);
				fds[i] = -1;
				continue;
			}
			take(res, i, buf, (size_t)m, cap[i], how);
		}
	}
	/* the main process is gone: take what is already in the pipes,
	 * not what background children may still write */
	for (i = 0; i < 2; i++) {
		int fl;

		if (fds[i] < 0)
			continue;
		fl = fcntl(fds[i], F_GETFL);
		fcntl(fds[i], F_SETFL, fl | O_NONBLOCK);
		for (k = 0; k < 64; k++) {
			ssize_t m = read(fds[i], buf, sizeof(buf));

			if (m <= 0)
				break;
			take(res, i, buf, (size_t)m, cap[i], how);
		}
		close(fds[i]);
	}
	if (exited != 2)
		reap(be, pr, &st, killed);
	if (pfd_pid >= 0 && pr->pid)
		close(pfd_pid);
	res->duration_ms = sbx_now_ms() - pr->start_ms;
	if (WIFEXITED(st))
		res->exit_code = WEXITSTATUS(st);
	else
		res->exit_code = 128 + WTERMSIG(st);
}

/* After the command: forget the run file, note the use. */
static void
finish_cmd(const char *chat, const struct sbx_backend *be,
    struct sbx_proc *pr, struct result *res)
{
	char p[SBX_PATH_MAX + 200], c[SBX_PATH_MAX + 220];
	struct sbx_rec r;
	int lk = lock_chat(chat, LOCK_EX);

	if (lk < 0 || rec_load(chat, &r) != 0) {
		unlock(lk);
		return;         /* destroyed meanwhile */
	}
	run_file(p, sizeof(p), &r, pr->tag);
	snprintf(c, sizeof(c), "%s.cancelled", p);
	if (access(c, F_OK) == 0)
		res->cancelled = 1;
	unlink(c);
	unlink(p);
	be->release(&r, pr);
	r.last_used = time(NULL);
	rec_save(&r);
	unlock(lk);
}

/* ---- subcommands ---- */

static const char *o_chat, *o_tenant = "", *o_user = "", *o_tier,
    *o_backend, *o_workspace, *o_profile;
static int o_cached;
static long o_timeout = -1, o_cap = -1, o_idle = -1, o_remove = -1;
static int o_stdin;
static struct envv o_env;

static const struct sbx_backend *
backend_of(const char *name)
{
	const struct sbx_backend *be = sbx_backend_find(name);

	if (be == NULL)
		die(EX_USAGE, "unknown backend %s (ns, gvisor)", safe(name));
	return be;
}

static void
need_chat(void)
{
	if (o_chat == NULL)
		die(EX_USAGE, "--chat ID is required");
	if (!sbx_id_ok(o_chat, SBX_ID_MAX))
		die(EX_USAGE, "bad chat id \"%s\" (1 to 64 of A-Z a-z 0-9 . _ "
		    "-, the first a letter or digit)", safe(o_chat));
}

static int
cmd_create(void)
{
	const struct sbx_backend *be = backend_of(o_backend ? o_backend :
	    C.backend);
	struct sbx_rec r;
	char err[1024], *body = NULL, *resp = NULL, m[512];
	char **all, d[SBX_PATH_MAX];
	int lk, clk, st, rc = EX_FAIL, session = 0;
	long nt = 0, nu = 0, ntot = 0;
	unsigned long used[1024 / (8 * sizeof(unsigned long))] = { 0 };
	size_t i;
	json_t *o;
	struct stat sst;
	struct ws_pick ws;
	int ws_changed = 0;

	need_chat();
	if (o_tenant[0] && !sbx_id_ok(o_tenant, SBX_ID_MAX))
		die(EX_USAGE, "bad tenant \"%s\"", safe(o_tenant));
	/* list prints them on a terminal, sluiced takes them whole */
	if (!sbx_user_ok(o_user))
		die(EX_USAGE, "bad user (at most %d bytes of UTF-8 without "
		    "control characters)", SBX_USER_MAX);
	if (o_tier != NULL && !sbx_id_ok(o_tier, sizeof(((struct sbx_rec *)
	    0)->tier) - 1))
		die(EX_USAGE, "bad tier (a tier name: public, registries...)");
	if (be->available(err, sizeof(err)) != 0)
		die(EX_BACKEND, "backend %s: %s", be->name, err);
	if (access(C.shim, X_OK) != 0)
		die(EX_FAIL, "sluice-shim %s: %s (set \"shim\" in the "
		    "configuration)", C.shim, strerror(errno));
	/* no interruption between the chat's directory and its record: a
	 * directory without a record could be neither created again nor
	 * destroyed, and what was made so far would stay.  A create ends
	 * within bounds (sluiced 10 s, each runsc call 60 s). */
	{
		sigset_t ss;

		sigemptyset(&ss);
		sigaddset(&ss, SIGINT);
		sigaddset(&ss, SIGTERM);
		sigaddset(&ss, SIGHUP);
		sigaddset(&ss, SIGQUIT);
		sigprocmask(SIG_BLOCK, &ss, NULL);
	}
	lk = lock_global(LOCK_EX);
	chat_dir(d, sizeof(d), o_chat);
	if (lstat(d, &sst) == 0) {
		char rp[SBX_PATH_MAX + 16];

		/* only create makes a chat's directory, and it holds the
		 * global lock until the record is saved (right after the
		 * directory and the workspace): without a record it is what
		 * a killed create left, with nothing made yet */
		snprintf(rp, sizeof(rp), "%s/record.json", d);
		if (access(rp, F_OK) == 0 || errno != ENOENT) {
			unlock(lk);
			die(EX_EXISTS, "chat %s has a sandbox already", o_chat);
		}
		rm_tree(d);
	}
	/* quotas and a free uid range, under the global lock */
	all = chats_all();
	for (i = 0; all[i] != NULL; i++) {
		struct sbx_rec o2;

		if (rec_load(all[i], &o2) != 0)
			continue;
		ntot++;
		if (o_tenant[0] && strcmp(o2.tenant, o_tenant) == 0)
			nt++;
		if (o_tenant[0] && o_user[0] && strcmp(o2.tenant, o_tenant) == 0
		    && strcmp(o2.user, o_user) == 0)
			nu++;
		else if (!o_tenant[0] && o_user[0] && strcmp(o2.user, o_user)
		    == 0)
			nu++;
		if (o2.slot >= 0 && o2.slot < 1024)
			used[o2.slot / (8 * sizeof(unsigned long))] |= 1ul <<
			    (o2.slot % (8 * sizeof(unsigned long)));
	}
	chats_free(all);
	if (C.max_total && ntot >= C.max_total) {
		unlock(lk);
		die(EX_QUOTA, "quota: the host has %ld live sandboxes (max_total "
		    "%ld)", ntot, C.max_total);
	}
	if (o_tenant[0] && C.max_per_tenant && nt >= C.max_per_tenant) {
		unlock(lk);
		die(EX_QUOTA, "quota: tenant %s has %ld live sandboxes "
		    "(max_per_tenant %ld)", o_tenant, nt, C.max_per_tenant);
	}
	if (o_user[0] && C.max_per_user && nu >= C.max_per_user) {
		unlock(lk);
		die(EX_QUOTA, "quota: user %s%s%s has %ld live sandboxes "
		    "(max_per_user %ld)", safe(o_user), o_tenant[0] ?
		    " of tenant " : "", o_tenant, nu, C.max_per_user);
	}
	memset(&r, 0, sizeof(r));
	r.slot = -1;
	for (i = 0; i < C.slots && i < 1024; i++)
		if (!(used[i / (8 * sizeof(unsigned long))] & (1ul << (i %
		    (8 * sizeof(unsigned long)))))) {
			r.slot = (int)i;
			break;
		}
	if (r.slot < 0) {
		unlock(lk);
		die(EX_QUOTA, "quota: no free uid range (%lu in use)", C.slots);
	}
	/* the root: the profile's newest image now; the backend's create
	 * takes it under the store's lock, and says image_missing should it
	 * have gone meanwhile */
	{
		const char *prof = o_profile ? o_profile : C.profile;
		int irc;

		if (!sbx_cfg_profile_ok(&C, o_tenant, prof)) {
			unlock(lk);
			die(EX_IMAGE, "profile_forbidden: %s%s may not use "
			    "profile %s (tenant_profiles)", o_tenant[0] ?
			    "tenant " : "a sandbox without a tenant", o_tenant,
			    prof);
		}
		if ((irc = sbx_image_pick(&r, C.image_dir, prof, err,
		    sizeof(err))) != 0) {
			unlock(lk);
			die(irc == SBX_IMG_MISSING ? EX_IMAGE : EX_FAIL, "%s",
			    safe(err));
		}
		if (r.image[0] != '\0' && !sbx_elf_static(C.shim_static)) {
			unlock(lk);
			die(EX_FAIL, "shim_static %s: not a static executable: an "
			    "image's sandbox runs the shim on the image's libc "
			    "(make sandbox-glue/shim/sluice-shim-static; set "
			    "\"shim_static\" in the configuration)",
			    safe(C.shim_static));
		}
	}
	snprintf(r.chat, sizeof(r.chat), "%s", o_chat);
	snprintf(r.tenant, sizeof(r.tenant), "%s", o_tenant);
	snprintf(r.user, sizeof(r.user), "%s", o_user);
	snprintf(r.tier, sizeof(r.tier), "%s", o_tier ? o_tier : C.tier);
	snprintf(r.backend, sizeof(r.backend), "%s", be->name);
	snprintf(r.dir, sizeof(r.dir), "%s", d);
	snprintf(r.shim, sizeof(r.shim), "%s", r.image[0] ? C.shim_static :
	    C.shim);
	r.uid_count = 65536;
	r.uid_base = (uid_t)(C.uid_base + (unsigned long)r.slot * 65536);
	r.host_uid = r.uid_base + SBX_UID;
	r.host_gid = r.uid_base + SBX_GID;
	r.created = r.last_used = time(NULL);
	r.lim = C.lim;
	snprintf(r.cgroup, sizeof(r.cgroup), "%s", C.cgroups);
	if (mkdir(d, 0711) != 0) {
		unlock(lk);
		die(EX_FAIL, "%s: %s", d, strerror(errno));
	}
	{
		char p[SBX_PATH_MAX + 16];

		snprintf(p, sizeof(p), "%s/lock", d);
		clk = lock_path(p, LOCK_EX, 0);
	}
	if (o_workspace != NULL) {
		if (ws_check(o_workspace, &r, &ws, err, sizeof(err)) != 0) {
			fprintf(stderr, PROG ": %s\n", err);
			rc = EX_USAGE;
			goto fail;
		}
		/* the record first: a create killed from here on is undone
		 * by destroy, which gives the directory back */
		if (rec_save(&r) != 0 || ws_take(&r, &ws, &ws_changed, err,
		    sizeof(err)) != 0) {
			if (ws.parent >= 0)
				close(ws.parent);
			else
				fprintf(stderr, PROG ": %s\n", err);
			goto fail;
		}
	} else {
		if (snprintf(r.workspace, sizeof(r.workspace), "%s/workspace",
		    d) >= (int)sizeof(r.workspace)) {
			fprintf(stderr, PROG ": state directory path too long\n");
			r.workspace[0] = '\0';
			rc = EX_USAGE;
			goto fail;
		}
		if (mkdir(r.workspace, 0750) != 0) {
			fprintf(stderr, PROG ": %s: %s\n", r.workspace,
			    strerror(errno));
			goto fail;
		}
		r.workspace_made = 1;
		ws_changed = 1;
		if (chown(r.workspace, r.host_uid, r.host_gid) != 0) {
			fprintf(stderr, PROG ": chown %s: %s\n", r.workspace,
			    strerror(errno));
			goto fail;
		}
	}
	/* the record now, before anything is made outside the state
	 * directory: a create killed from here on leaves a sandbox that
	 * destroy and gc can take down (backends cope with half-made) */
	if (rec_save(&r) != 0)
		goto fail;
	/* the broker session first: no sandbox without its policy */
	o = json_pack("{s:s,s:s,s:s,s:s}", "id", r.chat, "tenant", r.tenant,
	    "user", r.user, "tier", r.tier);
	/* whole: a user name of 128 bytes escapes to several times that */
	body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (body == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		goto fail;
	}
	st = broker_call("POST", "/v1/sessions", body, &resp, err,
	    sizeof(err));
	free(body);
	body = NULL;
	if (st < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		rc = EX_BROKER;
		goto fail;
	}
	if (st != 201 && st != 200) {
		fprintf(stderr, PROG ": sluiced refused session %s (%d): %s\n",
		    r.chat, st, sbx_broker_msg(resp, m, sizeof(m)));
		rc = EX_BROKER;
		goto fail;
	}
	session = 1;
	if (sbx_broker_socket(resp, r.session_dir, sizeof(r.session_dir), err,
	    sizeof(err)) != 0) {
		fprintf(stderr, PROG ": sluiced's session %s: %s\n", r.chat,
		    err);
		rc = EX_BROKER;
		goto fail;
	}
	free(resp);
	resp = NULL;
	socket_own(&r);
	if (be->create(&r, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": backend %s: %s\n", be->name, safe(err));
		/* the image went between the pick and the backend's take */
		rc = strncmp(err, "image_missing:", 14) == 0 ? EX_IMAGE :
		    EX_BACKEND;
		goto fail;
	}
	if (rec_save(&r) != 0) {
		be->destroy(&r, err, sizeof(err));
		goto fail;
	}
	if (be->commit != NULL)
		be->commit(&r);
	unlock(clk);
	unlock(lk);
	if (opt_json) {
		json_t *j = sbx_rec_json(&r);

		json_object_set_new(j, "state", json_string("running"));
		json_out(j);
	} else {
		printf("created sandbox for chat %s (backend %s, workspace %s, "
		    "profile %s%s%.12s)\n", r.chat, r.backend, safe(r.workspace),
		    r.profile, r.image[0] ? ", image " : ": the host's /usr",
		    r.image);
		if (r.note[0])
			printf("note: %s\n", safe(r.note));
	}
	return EX_OK;
fail:
	free(resp);
	free(body);
	if (session && broker_delete(r.chat, err, sizeof(err)) != 0)
		fprintf(stderr, PROG ": %s\n", err);
	/* only what this create changed: a directory ws_check chose may
	 * have come meanwhile */
	if (ws_changed && r.workspace_made && r.workspace[0])
		rm_tree(r.workspace);
	else if (ws_changed && r.workspace_given)
		ws_give_back(&r);
	rm_tree(d);
	unlock(clk);
	unlock(lk);
	return rc;
}

/* Load the chat's record under its lock, or exit EX_NOSANDBOX. */
static int
open_chat(struct sbx_rec *r, int how, int fail_code)
{
	int lk;

	need_chat();
	lk = lock_chat(o_chat, how);
	if (lk < 0 || rec_load(o_chat, r) != 0) {
		unlock(lk);
		die(fail_code, "no sandbox for chat %s", o_chat);
	}
	return lk;
}

/*
 * Start argv in the chat's sandbox with fd_in as its stdin and collect
 * its output (see collect).  Commands never
 * get sluice-run's own stdout or stderr, only pipes: a host terminal
 * would let them push input into it (TIOCSTI), a host file or socket
 * would be theirs to use in ways the caller did not mean.
 */
static void
run_common(char **argv, int fd_in, long timeout, const long cap[2], int how,
    int fail_code, struct result *res)
{
	const struct sbx_backend *be;
	struct sbx_rec r;
	struct sbx_proc pr;
	int lk, fo = -1, fe = -1;

	/* before the command starts: a signal then cancels it, rather than
	 * leaving it running with nobody to wait for it */
	catch_signals();
	lk = open_chat(&r, LOCK_EX, fail_code);
	be = backend_of(r.backend);
	if (start_cmd(&r, be, argv, &o_env, fd_in, -1, -1, &fo, &fe, &pr) !=
	    0) {
		unlock(lk);
		exit(EX_EXECFAIL);
	}
	r.last_used = time(NULL);
	rec_save(&r);
	unlock(lk);
	memset(res, 0, sizeof(*res));
	collect(&r, be, &pr, fo, fe, timeout, cap, how, res);
	finish_cmd(o_chat, be, &pr, res);
}

/*
 * The caller's stdin for a command, through a pipe fed by a child of
 * ours (never the host fd itself: see run_common).  Returns the read
 * end; *pump is the child, to be killed and reaped after the command.
 */
static int
stdin_pipe(pid_t *pump)
{
	char buf[65536];
	int p[2], fd;
	ssize_t n, w, off;
	pid_t parent;

	if (pipe2(p, O_CLOEXEC) != 0)
		die(EX_EXECFAIL, "pipe: %s", strerror(errno));
	parent = getpid();
	if ((*pump = fork()) < 0)
		die(EX_EXECFAIL, "fork: %s", strerror(errno));
	if (*pump == 0) {
		/* a terminal may never say EOF: do not outlive sluice-run
		 * (which may exit early: no such sandbox) */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != parent)
			_exit(0);
		/* nor keep the caller's stdout and stderr open (the pipe
		 * moved out of their way first, should they be closed) */
		if (p[1] <= 2 && (p[1] = fcntl(p[1], F_DUPFD, 3)) < 0)
			_exit(1);
		if ((fd = open("/dev/null", O_WRONLY)) >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		for (fd = 3; fd < p[1]; fd++)
			close(fd);
		closefrom(p[1] + 1);
		for (;;) {
			n = read(0, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				_exit(n == 0 ? 0 : 1);
			for (off = 0; off < n; off += w)
				if ((w = write(p[1], buf + off,
				    (size_t)(n - off))) < 0) {
					if (errno == EINTR) {
						w = 0;
						continue;
					}
					_exit(1);       /* the reader left */
				}
		}
	}
	close(p[1]);
	return p[0];
}

static void
pump_end(pid_t pump)
{
	if (pump <= 0)
		return;
	kill(pump, SIGKILL);
	while (waitpid(pump, NULL, 0) < 0 && errno == EINTR)
		;
}

static long
timeout_of(void)
{
	long timeout = o_timeout >= 0 ? o_timeout : C.timeout_default;

	if (timeout < 1 || timeout > C.timeout_max)
		die(EX_USAGE, "--timeout: 1 to %ld seconds", C.timeout_max);
	return timeout;
}

static int
cmd_exec(char **argv)
{
	long timeout = timeout_of();
	long cap = o_cap >= 0 ? o_cap : C.output_cap;
	struct result res;
	pid_t pump = -1;
	int fd_in, i;

	if (argv[0] == NULL)
		die(EX_USAGE, "exec: no command (exec --chat ID -- CMD...)");
	if (cap > (64l << 20))
		die(EX_USAGE, "--output-cap: at most 64 MiB");
	need_chat();
	fd_in = o_stdin ? stdin_pipe(&pump) : open("/dev/null", O_RDONLY |
	    O_CLOEXEC);
	{
		const long caps[2] = { cap, cap };

		run_common(argv, fd_in, timeout, caps, opt_json ? 0 : OUT_ECHO,
		    EX_EXECFAIL, &res);
	}
	pump_end(pump);
	if (opt_json) {
		json_out(json_pack("{s:i,s:o,s:o,s:b,s:b,s:b,s:b,s:I}",
		    "exit_code", res.exit_code,
		    "stdout", json_text(res.out[0], res.len[0]),
		    "stderr", json_text(res.out[1], res.len[1]),
		    "stdout_truncated", res.dropped[0] > 0,
		    "stderr_truncated", res.dropped[1] > 0,
		    "timed_out", res.timed_out, "cancelled", res.cancelled,
		    "duration_ms", (json_int_t)res.duration_ms));
	} else {
		fflush(stdout);
		for (i = 0; i < 2; i++)
			if (res.dropped[i])
				fprintf(stderr, "\n" PROG ": %s truncated: kept "
				    "%zu bytes, dropped %llu (--output-cap %ld)"
				    "\n", i ? "stderr" : "stdout", res.len[i],
				    res.dropped[i], cap);
		if (res.timed_out)
			fprintf(stderr, PROG ": timed out after %ld s: the "
			    "command and everything it started were killed\n",
			    timeout);
		else if (res.cancelled)
			fprintf(stderr, PROG ": cancelled\n");
	}
	free(res.out[0]);
	free(res.out[1]);
	if (res.timed_out)
		return EX_TIMEOUT;
	return res.exit_code;
}

/* What the programs run by read, write and ls say, as ours: one
 * escaped line each, without their own name (strip). */
static void
relay_errs(const char *verb, struct result *res, const char *strip)
{
	char *s = (char *)res->out[1], *nl;
	size_t k = strlen(strip);

	if (res->len[1] == 0)
		return;
	s[res->len[1]] = '\0';
	for (; *s != '\0'; s = nl) {
		if ((nl = strchr(s, '\n')) != NULL)
			*nl++ = '\0';
		else
			nl = s + strlen(s);
		if (strncmp(s, strip, k) == 0)
			s += k;
		if (*s != '\0')
			fprintf(stderr, PROG ": %s: %s\n", verb, safe(s));
	}
}

/*
 * ls (and read and write with gvisor): fixed programs inside the sandbox,
 * as the sandbox user, so a path (relative to /workspace, or absolute)
 * names the sandbox's file whatever ".." or symbolic links it holds: the
 * host's files are out of reach as they are for any command.  Absolute
 * program paths: ~/.local/bin comes first in PATH and is the user's.
 */
static int
file_status(const char *verb, struct result *res)
{
	int rc = EX_OK;

	if (res->timed_out) {
		fprintf(stderr, PROG ": %s timed out\n", verb);
		rc = EX_TIMEOUT;
	} else if (res->cancelled) {
		fprintf(stderr, PROG ": %s cancelled\n", verb);
		rc = EX_FAIL;
	} else if (res->exit_code != 0)
		rc = EX_FAIL;
	free(res->out[0]);
	free(res->out[1]);
	return rc;
}

#define ERR_CAP	(64l << 10)     /* bytes of a file program's messages */

/*
 * read and write move the bytes of one regular file and nothing else:
 * the path's last component is never followed, nor any magic link, and
 * what was opened must be a regular file (a link to /dev/zero, a fifo, a
 * device, a directory are refused, a fifo without waiting); read passes
 * at most max_file_bytes and says so when the file had more (EX_CUT).
 * The path is relative to /workspace, or absolute, and names the
 * sandbox's file whatever ".." or links it holds.
 *
 * Where the host can open the sandbox's root (be->root_fd: ns), a child
 * of ours opens the file in it with openat2(RESOLVE_IN_ROOT), as the
 * sandbox user (its uid, gid and permissions, the sandbox's mounts):
 * nothing runs in the sandbox, nothing there can get in the way.
 * Elsewhere (gvisor) sluice-shim's file modes do the same inside, as the
 * sandbox user, and what they pass on is capped here all the same.
 */
static void
file_child(const struct sbx_rec *r, int rootfd, const char *path, int wr,
    long timeout)
{
	const char *verb = wr ? "write" : "read";
	char p[SBX_PATH_MAX * 2], buf[65536];
	unsigned long long done = 0, max = (unsigned long long)C.max_file_bytes;
	struct open_how how;
	gid_t g = r->host_gid;
	struct stat st;
	int fd, in, out;
	ssize_t n;

	alarm((unsigned)timeout);
	if (setgroups(1, &g) != 0 || setresgid(g, g, g) != 0 ||
	    setresuid(r->host_uid, r->host_uid, r->host_uid) != 0) {
		fprintf(stderr, PROG ": %s: setresuid: %s\n", verb,
		    strerror(errno));
		_exit(EX_FAIL);
	}
	/* after the uid change, which clears them: end with sluice-run, and
	 * be nobody's to trace */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	umask(022);
	if (wr && r->lim.fsize_bytes) {
		struct rlimit rl = { (rlim_t)r->lim.fsize_bytes,
		    (rlim_t)r->lim.fsize_bytes };

		(void)setrlimit(RLIMIT_FSIZE, &rl);
		signal(SIGXFSZ, SIG_IGN);       /* EFBIG, said below */
	}
	if (snprintf(p, sizeof(p), "%s%s", path[0] == '/' ? "" :
	    SBX_WORKDIR "/", path) >= (int)sizeof(p)) {
		fprintf(stderr, PROG ": %s: path too long\n", verb);
		_exit(EX_FAIL);
	}
	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)((wr ? O_WRONLY | O_CREAT : O_RDONLY) |
	    O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	how.mode = wr ? 0666 : 0;
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
	if ((fd = (int)syscall(SYS_openat2, rootfd, p, &how, sizeof(how))) <
	    0) {
		fprintf(stderr, PROG ": %s: %s: %s\n", verb, safe(path),
		    errno == ELOOP ? "a symbolic link (not followed)" :
		    errno == ENXIO ? "not a regular file" : strerror(errno));
		_exit(EX_FAIL);
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, PROG ": %s: %s: not a regular file\n", verb,
		    safe(path));
		_exit(EX_FAIL);
	}
	if (fcntl(fd, F_SETFL, 0) != 0 || (wr && ftruncate(fd, 0) != 0)) {
		fprintf(stderr, PROG ": %s: %s: %s\n", verb, safe(path),
		    strerror(errno));
		_exit(EX_FAIL);
	}
	in = wr ? 0 : fd;
	out = wr ? fd : 1;
	for (;;) {
		size_t want = sizeof(buf), off = 0;
		int last = 0;

		/* one byte past max tells "cut" from "exactly max" */
		if (!wr && max - done + 1 < want)
			want = (size_t)(max - done + 1);
		if ((n = read(in, buf, want)) < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, PROG ": %s: %s: %s\n", verb, wr ?
			    "stdin" : safe(path), strerror(errno));
			_exit(EX_FAIL);
		}
		if (n == 0)
			break;
		if (!wr && done + (size_t)n > max) {
			n = (ssize_t)(max - done);
			last = 1;
		}
		while (off < (size_t)n) {
			ssize_t w = write(out, buf + off, (size_t)n - off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				fprintf(stderr, PROG ": %s: %s: %s\n", verb,
				    wr ? safe(path) : "stdout",
				    strerror(errno));
				_exit(EX_FAIL);
			}
			off += (size_t)w;
		}
		done += (size_t)n;
		if (last) {
			fprintf(stderr, PROG ": read: %s: more than %llu "
			    "bytes, cut there (max_file_bytes)\n", safe(path),
			    max);
			_exit(EX_CUT);
		}
	}
	if (wr && close(fd) != 0) {
		fprintf(stderr, PROG ": write: %s: %s\n", safe(path),
		    strerror(errno));
		_exit(EX_FAIL);
	}
	_exit(EX_OK);
}

/* The root of r's sandbox for openat2, or -1 when the backend has none
 * or the kernel no openat2 (before 5.6). */
static int
file_root(const struct sbx_backend *be, struct sbx_rec *r)
{
	struct open_how how;
	char err[256];
	int fd, t;

	if (be->root_fd == NULL)
		return -1;
	if ((fd = be->root_fd(r, err, sizeof(err))) < 0)
		die(EX_FAIL, "%s", err);
	memset(&how, 0, sizeof(how));
	how.flags = O_PATH | O_CLOEXEC;
	how.resolve = RESOLVE_IN_ROOT;
	if ((t = (int)syscall(SYS_openat2, fd, ".", &how, sizeof(how))) < 0 &&
	    errno == ENOSYS) {
		close(fd);
		return -1;
	}
	if (t >= 0)
		close(t);
	return fd;
}

/* read or write through sluice-shim inside the sandbox. */
static int
file_shim(const char *path, int wr, long timeout)
{
	const char *verb = wr ? "write" : "read";
	char maxs[32], *argv[] = { SBX_SHIM_PATH, wr ? "--write-file" :
	    "--read-file", (char *)path, maxs, NULL };
	const long caps[2] = { wr ? 0 : C.max_file_bytes, ERR_CAP };
	struct result res;
	pid_t pump = -1;
	int fd_in, cut, rc;

	snprintf(maxs, sizeof(maxs), "%ld", C.max_file_bytes);
	if (wr)
		argv[3] = NULL;
	fd_in = wr ? stdin_pipe(&pump) : open("/dev/null", O_RDONLY |
	    O_CLOEXEC);
	run_common(argv, fd_in, timeout, caps, wr ? 0 : OUT_PASS,
	    EX_NOSANDBOX, &res);
	pump_end(pump);
	relay_errs(verb, &res, "sluice-shim: ");
	/* the shim stops at max_file_bytes and exits 3; should something
	 * in the sandbox make it go on, it is cut here */
	cut = !wr && (res.cut || (res.exit_code == 3 && !res.timed_out &&
	    !res.cancelled));
	if (res.cut)
		fprintf(stderr, PROG ": read: %s: more than %ld bytes, cut "
		    "there (max_file_bytes)\n", safe(path), C.max_file_bytes);
	rc = file_status(verb, &res);
	return cut ? EX_CUT : rc;
}

static int
file_cmd(char **args, int wr)
{
	const struct sbx_backend *be;
	struct sbx_rec r;
	long timeout = timeout_of();
	int lk, rootfd, st;
	pid_t pid;

	need_chat();
	if (args[0] == NULL || args[0][0] == '\0')
		die(EX_USAGE, "%s: a PATH is required", wr ? "write" : "read");
	lk = open_chat(&r, LOCK_EX, EX_NOSANDBOX);
	be = backend_of(r.backend);
	rootfd = file_root(be, &r);
	if (rootfd >= 0) {
		/* a use, as a command's: not idle for gc */
		r.last_used = time(NULL);
		rec_save(&r);
	}
	unlock(lk);
	if (rootfd < 0)
		return file_shim(args[0], wr, timeout);
	if ((pid = fork()) < 0)
		die(EX_FAIL, "fork: %s", strerror(errno));
	if (pid == 0)
		file_child(&r, rootfd, args[0], wr, timeout);
	close(rootfd);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if ((lk = lock_chat(o_chat, LOCK_EX)) >= 0 && rec_load(o_chat, &r) ==
	    0) {
		r.last_used = time(NULL);
		rec_save(&r);
	}
	unlock(lk);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) {
		fprintf(stderr, PROG ": %s timed out\n", wr ? "write" : "read");
		return EX_TIMEOUT;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : EX_FAIL;
}

static int
cmd_read(char **args)
{
	return file_cmd(args, 0);
}

static int
cmd_write(char **args)
{
	return file_cmd(args, 1);
}

/* One entry of ls, pointing into the collected output. */
struct ls_ent {
	const char *name, *target;
	size_t nlen, tlen;
	char type;              /* find's %y: f d l p s c b ... */
	unsigned mode;          /* permission bits, setuid etc. included */
	long long uid, gid, size, mtime;
};

static int
ls_cmp(const void *a, const void *b)
{
	const struct ls_ent *x = a, *y = b;
	size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
	int c = memcmp(x->name, y->name, n);

	if (c != 0)
		return c;
	return x->nlen < y->nlen ? -1 : x->nlen > y->nlen;
}

static const char *
ls_type(char t)
{
	switch (t) {
	case 'f': return "file";
	case 'd': return "dir";
	case 'l': return "symlink";
	case 'p': return "fifo";
	case 's': return "socket";
	case 'c': return "char";
	case 'b': return "block";
	default: return "other";
	}
}

/* "drwxr-xr-x" */
static void
ls_mode(char t, unsigned m, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	int i;

	out[0] = t == 'f' ? '-' : strchr("dlpscb", t) && t ? t : '?';
	for (i = 0; i < 9; i++)
		out[1 + i] = (m & (0400u >> i)) ? rwx[i] : '-';
	if (m & 04000)
		out[3] = out[3] == 'x' ? 's' : 'S';
	if (m & 02000)
		out[6] = out[6] == 'x' ? 's' : 'S';
	if (m & 01000)
		out[9] = out[9] == 'x' ? 't' : 'T';
	out[10] = '\0';
}

/* A name on one text line, escaped as everything we print (safe). */
static void
ls_put(const char *s, size_t n)
{
	char *b = malloc(4 * n + 1);

	if (b == NULL)
		die(EX_FAIL, "out of memory");
	sbx_text_safen(s, n, b, 4 * n + 1);
	fputs(b, stdout);
	free(b);
}

/*
 * Parse find's records, "depth/type/mode/uid/gid/size/mtime/name\0
 * target\0" (the name is last: a file name holds no '/', the start
 * point's may).  Returns how many entries are in *out (malloc'd).
 */
static size_t
ls_parse(char *b, size_t n, const char *given, struct ls_ent **out)
{
	struct ls_ent *v = NULL, *nv, e;
	size_t cnt = 0, cap = 0;
	char *p = b, *end = b + n;

	while (p < end) {
		char *rec_end = memchr(p, '\0', (size_t)(end - p)), *f[8], *t;
		long long num[7];
		int i;

		if (rec_end == NULL)
			break;          /* truncated */
		t = rec_end + 1;
		if (t >= end || (rec_end = memchr(t, '\0', (size_t)(end - t)))
		    == NULL)
			break;
		f[0] = p;
		for (i = 1; i < 8; i++) {
			if ((f[i] = strchr(f[i - 1], '/')) == NULL)
				break;
			*f[i]++ = '\0';
		}
		p = rec_end + 1;
		if (i < 8)
			continue;
		for (i = 0; i < 7; i++)
			num[i] = i == 1 ? 0 : strtoll(f[i], NULL, i == 2 ? 8 : 10);
		memset(&e, 0, sizeof(e));
		e.type = f[1][0];
		e.mode = (unsigned)num[2] & 07777;
		e.uid = num[3];
		e.gid = num[4];
		e.size = num[5];
		e.mtime = num[6];
		e.name = f[7];
		e.nlen = strlen(f[7]);
		e.target = t;
		e.tlen = strlen(t);
		if (num[0] == 0) {
			if (e.type == 'd')
				continue;       /* list its entries, not it */
			e.name = given;         /* a file: itself, as named */
			e.nlen = strlen(given);
		}
		if (cnt == cap) {
			cap = cap ? cap * 2 : 64;
			if ((nv = realloc(v, cap * sizeof(*v))) == NULL)
				die(EX_FAIL, "out of memory");
			v = nv;
		}
		v[cnt++] = e;
	}
	if (cnt > 1)            /* qsort(NULL, 0, ...) is undefined */
		qsort(v, cnt, sizeof(*v), ls_cmp);
	*out = v;
	return cnt;
}

#define LS_CAP  (16l << 20)     /* bytes of listing kept */

/*
 * ls runs find(1) with a fixed -printf format rather than ls -l, whose
 * statx(AT_NO_AUTOMOUNT) runsc 20221219 refuses: the same output on both
 * backends, and names with any bytes survive (NUL separated).
 */
static int
cmd_ls(char **args)
{
	const char *given = args[0] != NULL ? args[0] : ".";
	char *start, *argv[10];
	struct ls_ent *v = NULL;
	struct result res;
	size_t n, i;
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC), rc;
	long timeout = timeout_of();
	json_t *a;

	need_chat();
	if (given[0] == '\0')
		die(EX_USAGE, "ls: an empty PATH");
	/* "./" before a relative path: find would take "-x", "!" or "("
	 * for an expression */
	if (asprintf(&start, "%s%s", given[0] == '/' ? "" : "./", given) < 0)
		die(EX_FAIL, "out of memory");
	argv[0] = "/usr/bin/find";
	argv[1] = "-H";         /* a start point that is a link: follow */
	argv[2] = start;
	argv[3] = "-maxdepth";
	argv[4] = "1";
	argv[5] = "-printf";
	argv[6] = "%d/%y/%m/%U/%G/%s/%T@/%f\\0%l\\0";
	argv[7] = NULL;
	{
		const long caps[2] = { LS_CAP, LS_CAP };

		run_common(argv, devnull, timeout, caps, 0, EX_NOSANDBOX, &res);
	}
	free(start);
	n = ls_parse((char *)res.out[0], res.len[0], given, &v);
	/* find's complaints, as ours */
	relay_errs("ls", &res, "/usr/bin/find: ");
	if (res.dropped[0] > 0)
		fprintf(stderr, PROG ": ls: listing truncated after %zu "
		    "entries\n", n);
	if (opt_json) {
		a = json_array();
		for (i = 0; i < n; i++) {
			char mode[8];
			json_t *o;

			snprintf(mode, sizeof(mode), "%04o", v[i].mode);
			o = json_pack("{s:o,s:s,s:s,s:I,s:I,s:I,s:I}", "name",
			    json_text((const unsigned char *)v[i].name,
			    v[i].nlen), "type", ls_type(v[i].type), "mode",
			    mode, "uid", (json_int_t)v[i].uid, "gid",
			    (json_int_t)v[i].gid, "size", (json_int_t)v[i].size,
			    "mtime", (json_int_t)v[i].mtime);
			if (v[i].type == 'l')
				json_object_set_new(o, "target", json_text(
				    (const unsigned char *)v[i].target,
				    v[i].tlen));
			json_array_append_new(a, o);
		}
		json_out(json_pack("{s:o,s:o,s:b}", "path", json_text(
		    (const unsigned char *)given, strlen(given)), "entries",
		    a, "truncated", res.dropped[0] > 0));
	} else
		for (i = 0; i < n; i++) {
			char mode[11], tm[32];
			time_t t = (time_t)v[i].mtime;
			struct tm g;

			ls_mode(v[i].type, v[i].mode, mode);
			if (gmtime_r(&t, &g) == NULL ||
			    strftime(tm, sizeof(tm), "%Y-%m-%dT%H:%M:%SZ", &g) ==
			    0)
				snprintf(tm, sizeof(tm), "?");
			printf("%s %lld %lld %lld %s ", mode, v[i].uid, v[i].gid,
			    v[i].size, tm);
			ls_put(v[i].name, v[i].nlen);
			if (v[i].type == 'l') {
				fputs(" -> ", stdout);
				ls_put(v[i].target, v[i].tlen);
			}
			putchar('\n');
		}
	free(v);
	rc = file_status("ls", &res);
	return rc == EX_OK && res.dropped[0] > 0 ? EX_FAIL : rc;
}

/*
 * Whether the run file's command still runs (its main process, by pid
 * and start time).  A run file outlives a sluice-run that was killed;
 * left, it would keep gc off the sandbox for ever.  A stale one is
 * removed here, with the command's per-command resources (its
 * background processes stay, as after any command).
 */
static int
run_live(struct sbx_rec *r, const struct sbx_backend *be, const char *tag)
{
	char f[SBX_PATH_MAX + 300], buf[64];
	unsigned long long st = 0;
	struct sbx_proc pr;
	int fd, pid = 0;
	ssize_t k;

	snprintf(f, sizeof(f), "%s/run/%s", r->dir, tag);
	if ((fd = open(f, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	if (sscanf(buf, "%d %llu", &pid, &st) != 2)
		return 1;       /* being written, or old: assume it runs */
	if (pid > 0 && st != 0 && sbx_proc_start(pid) == st)
		return 1;
	memset(&pr, 0, sizeof(pr));
	pr.pid = pid;
	snprintf(pr.tag, sizeof(pr.tag), "%s", tag);
	be->release(r, &pr);
	unlink(f);
	strcat(f, ".cancelled");
	unlink(f);
	return 0;
}

/* Kill every running command of r (run files). */
static int
kill_running(struct sbx_rec *r, const struct sbx_backend *be, int mark)
{
	char p[SBX_PATH_MAX + 16], err[256];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(p, sizeof(p), "%s/run", r->dir);
	if ((d = opendir(p)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		struct sbx_proc pr;
		char f[SBX_PATH_MAX + 300], buf[32];
		int fd;
		ssize_t k;

		if (de->d_name[0] == '.' || strchr(de->d_name, '.') ||
		    !run_live(r, be, de->d_name))
			continue;
		memset(&pr, 0, sizeof(pr));
		if (snprintf(pr.tag, sizeof(pr.tag), "%s", de->d_name) >=
		    (int)sizeof(pr.tag))
			continue;
		snprintf(f, sizeof(f), "%s/%s", p, de->d_name);
		if ((fd = open(f, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[k > 0 ? k : 0] = '\0';
		pr.pid = (pid_t)atoi(buf);
		if (mark) {
			strcat(f, ".cancelled");
			if ((fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600))
			    >= 0)
				close(fd);
		}
		if (r->suspended)
			be->resume(r, err, sizeof(err));
		be->kill_tree(r, &pr, err, sizeof(err));
		n++;
	}
	closedir(d);
	return n;
}

static int
cmd_cancel(void)
{
	struct sbx_rec r;
	int lk = open_chat(&r, LOCK_EX, EX_NOSANDBOX);
	int n = kill_running(&r, backend_of(r.backend), 1);

	rec_save(&r);
	unlock(lk);
	if (opt_json)
		json_out(json_pack("{s:i}", "cancelled", n));
	else
		printf("cancelled %d command%s\n", n, n == 1 ? "" : "s");
	return EX_OK;
}

/* Tear a sandbox down with both locks held.  0, or -1 (message shown). */
static int
destroy_locked(struct sbx_rec *r)
{
	const struct sbx_backend *be = backend_of(r->backend);
	char err[512];
	int rc = 0;

	kill_running(r, be, 1);
	if (be->destroy(r, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": %s: %s\n", r->chat, err);
		rc = -1;
	}
	if (broker_delete(r->chat, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": %s: %s\n", r->chat, err);
		rc = -1;
	}
	if (rc != 0) {
		rec_save(r);
		return -1;
	}
	if (r->workspace_made)
		rm_tree(r->workspace);
	else if (r->workspace_given)
		ws_give_back(r);
	rm_tree(r->dir);
	(void)rmdir(r->session_dir);    /* sluiced leaves it, empty */
	/* an image that a rebuild replaced goes with its last sandbox */
	{
		char store[SBX_PATH_MAX];

		if (sbx_image_store_of(r, store, sizeof(store)) == 0)
			(void)sbx_image_sweep(store);
	}
	return 0;
}

static int
cmd_destroy(void)
{
	struct sbx_rec r;
	int g, lk, rc;

	need_chat();
	g = lock_global(LOCK_EX);
	lk = open_chat(&r, LOCK_EX, EX_NOSANDBOX);
	rc = destroy_locked(&r);
	unlock(lk);
	unlock(g);
	if (rc != 0)
		return EX_FAIL;
	if (opt_json)
		json_out(json_pack("{s:s,s:b}", "chat", r.chat, "destroyed", 1));
	else
		printf("destroyed sandbox of chat %s\n", r.chat);
	return EX_OK;
}

static const char *
state_of(const struct sbx_rec *r)
{
	const struct sbx_backend *be = sbx_backend_find(r->backend);

	if (be == NULL || !be->alive(r))
		return "dead";
	return r->suspended ? "suspended" : "running";
}

static int
cmd_list(void)
{
	int g = lock_global(LOCK_SH);
	char **all = chats_all();
	json_t *a = json_array();
	time_t now = time(NULL);
	size_t i;

	if (!opt_json)
		printf("%-24s %-12s %-12s %-10s %-7s %-9s %8s %s\n", "CHAT",
		    "TENANT", "USER", "TIER", "BACKEND", "STATE", "IDLE_S",
		    "PROFILE");
	for (i = 0; all[i] != NULL; i++) {
		struct sbx_rec r;

		if (rec_load(all[i], &r) != 0)
			continue;
		if (opt_json) {
			json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,"
			    "s:I,s:I,s:I,s:s,s:s,s:s}", "chat", r.chat, "tenant",
			    r.tenant, "user", r.user, "tier", r.tier, "backend",
			    r.backend, "state", state_of(&r), "workspace",
			    r.workspace, "created", (json_int_t)r.created,
			    "last_used", (json_int_t)r.last_used, "init_pid",
			    (json_int_t)r.init_pid, "note", r.note,
			    "profile", r.profile[0] ? r.profile :
			    SBX_PROFILE_HOST, "image", r.image);

			json_array_append_new(a, o);
		} else {
			/* records are ours, but names came from callers:
			 * nothing of them may act on the terminal */
			char te[4 * SBX_ID_MAX + 1], us[4 * SBX_USER_MAX + 1];
			char ti[4 * sizeof(r.tier) + 1];
			char be[4 * sizeof(r.backend) + 1];

			sbx_text_safe(r.tenant[0] ? r.tenant : "-", te,
			    sizeof(te));
			sbx_text_safe(r.user[0] ? r.user : "-", us, sizeof(us));
			sbx_text_safe(r.tier, ti, sizeof(ti));
			sbx_text_safe(r.backend, be, sizeof(be));
			printf("%-24s %-12s %-12s %-10s %-7s %-9s %8lld %s\n",
			    r.chat, te, us, ti, be, state_of(&r),
			    (long long)(now - r.last_used), r.profile[0] ?
			    r.profile : SBX_PROFILE_HOST);
		}
	}
	chats_free(all);
	unlock(g);
	if (opt_json)
		json_out(json_pack("{s:o}", "sandboxes", a));
	else
		json_decref(a);
	return EX_OK;
}

static int
cmd_gc(void)
{
	long idle = o_idle >= 0 ? o_idle : C.idle_after;
	long old = o_remove >= 0 ? o_remove : C.remove_after;
	int g = lock_global(LOCK_EX), rc = EX_OK;
	char **all = chats_all(), err[256];
	json_t *sus = json_array(), *rem = json_array();
	time_t now = time(NULL);
	size_t i;

	for (i = 0; all[i] != NULL; i++) {
		struct sbx_rec r;
		const struct sbx_backend *be;
		char p[SBX_PATH_MAX + 16];
		int lk = lock_chat(all[i], LOCK_EX | LOCK_NB), busy = 0;
		DIR *d;
		struct dirent *de;

		if (lk < 0 || rec_load(all[i], &r) != 0) {
			unlock(lk);
			continue;       /* busy: next round */
		}
		be = backend_of(r.backend);
		snprintf(p, sizeof(p), "%s/run", r.dir);
		if ((d = opendir(p)) != NULL) {
			while ((de = readdir(d)) != NULL)
				if (de->d_name[0] != '.' && !strchr(de->d_name,
				    '.') && run_live(&r, be, de->d_name))
					busy = 1;
			closedir(d);
		}
		if (!be->alive(&r) || (!busy && now - r.last_used >= old)) {
			if (destroy_locked(&r) == 0)
				json_array_append_new(rem, json_string(r.chat));
			else
				rc = EX_FAIL;
		} else if (!busy && !r.suspended && now - r.last_used >= idle) {
			if (be->suspend(&r, err, sizeof(err)) == 0) {
				rec_save(&r);
				json_array_append_new(sus, json_string(r.chat));
			} else {
				fprintf(stderr, PROG ": suspend %s: %s\n", r.chat,
				    err);
				rc = EX_FAIL;
			}
		}
		unlock(lk);
	}
	chats_free(all);
	if (access(C.image_dir, F_OK) == 0)
		(void)sbx_image_sweep(C.image_dir);
	unlock(g);
	if (opt_json)
		json_out(json_pack("{s:o,s:o}", "suspended", sus, "removed",
		    rem));
	else {
		printf("suspended %zu, removed %zu\n", json_array_size(sus),
		    json_array_size(rem));
		json_decref(sus);
		json_decref(rem);
	}
	return rc;
}

static void
usage(FILE *f)
{
	fprintf(f,
"usage: sluice-run-local [--local] [--json] [--state-dir DIR]\n"
"                  [--control SOCKET] [--config FILE] COMMAND [options]\n"
"sluice-run's local mode (root), the build tree's driver of the backends\n"
"for their tests: the backends driven directly, without sluice-execd.\n"
"The installed sluice-run calls sluice-execd's API (sluice-run --help).\n"
"commands:\n"
"  create --chat ID [--tenant T] [--user U] [--tier TIER]\n"
"         [--backend ns|gvisor] [--workspace DIR] [--profile P]\n"
"  exec --chat ID [--timeout S] [--output-cap BYTES] [--env K=V]...\n"
"       [--stdin] -- CMD [ARG]...\n"
"  write --chat ID [--timeout S] PATH   stdin to PATH (relative to\n"
"                            /workspace; as the sandbox user)\n"
"  read --chat ID [--timeout S] PATH    PATH to stdout (at most\n"
"                            max_file_bytes; regular files only)\n"
"  ls --chat ID [--timeout S] [PATH]    one line per entry, sorted:\n"
"                            MODE UID GID SIZE MTIME NAME [-> TARGET]\n"
"  cancel --chat ID          kill the running commands' process trees\n"
"  destroy --chat ID\n"
"  list\n"
"  gc [--idle-after S] [--remove-after S]\n"
"  image build [--cached] PROFILE   build the profile's root image\n"
"  image list\n"
"  image rm PROFILE|DIGEST   (refused while a sandbox uses it)\n"
"defaults: timeout 120 s (max 1680), output cap 65536 bytes per stream;\n"
"state " DEF_STATE ", control " DEF_CONTROL ".\n"
"exit: 0 ok, 1 failure, 2 usage, 3 no sandbox, 4 quota, 5 sluiced,\n"
"      6 exists, 7 backend, 8 read cut, 9 image (missing, in use,\n"
"      unknown or forbidden profile); exec: the command's status,\n"
"      124 timeout, 125 could not run.  See sluice-run(1).\n");
}

static long
num_arg(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi)
		die(EX_USAGE, "%s: expected %ld to %ld", opt, lo, hi);
	return v;
}

static int
local_main(int argc, char **argv)
{
	enum { O_JSON = 256, O_STATE, O_CONTROL, O_CONFIG, O_CHAT, O_TENANT,
	    O_USER, O_TIER, O_BACKEND, O_WS, O_TIMEOUT, O_CAP, O_ENV, O_IDLE,
	    O_REMOVE, O_STDIN, O_HELP, O_PROFILE, O_CACHED, O_LOCAL };
	static const struct option lo[] = {
		{ "json", no_argument, NULL, O_JSON },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "control", required_argument, NULL, O_CONTROL },
		{ "config", required_argument, NULL, O_CONFIG },
		{ "chat", required_argument, NULL, O_CHAT },
		{ "tenant", required_argument, NULL, O_TENANT },
		{ "user", required_argument, NULL, O_USER },
		{ "tier", required_argument, NULL, O_TIER },
		{ "backend", required_argument, NULL, O_BACKEND },
		{ "workspace", required_argument, NULL, O_WS },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "output-cap", required_argument, NULL, O_CAP },
		{ "env", required_argument, NULL, O_ENV },
		{ "idle-after", required_argument, NULL, O_IDLE },
		{ "remove-after", required_argument, NULL, O_REMOVE },
		{ "stdin", no_argument, NULL, O_STDIN },
		{ "profile", required_argument, NULL, O_PROFILE },
		{ "cached", no_argument, NULL, O_CACHED },
		{ "help", no_argument, NULL, O_HELP },
		{ "local", no_argument, NULL, O_LOCAL },
		{ NULL, 0, NULL, 0 },
	};
	const char *state = NULL, *control = NULL, *config = NULL;
	const char *verb = NULL;
	static struct envv extra;
	char err[512];
	size_t i;
	int c, pass;

	signal(SIGPIPE, SIG_IGN);
	sbx_cfg_defaults(&C, DEF_STATE, DEF_CONTROL, SLUICE_SHIM_PATH);
	snprintf(C.shim_static, sizeof(C.shim_static), "%s",
	    SLUICE_SHIM_STATIC_PATH);
	/* "+": stop at the subcommand, then at "--" after its options */
	for (pass = 0; pass < 2; pass++) {
		while ((c = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
			switch (c) {
			case O_JSON: opt_json = 1; break;
			case O_STATE: state = optarg; break;
			case O_CONTROL: control = optarg; break;
			case O_CONFIG: config = optarg; break;
			case O_CHAT: o_chat = optarg; break;
			case O_TENANT: o_tenant = optarg; break;
			case O_USER: o_user = optarg; break;
			case O_TIER: o_tier = optarg; break;
			case O_BACKEND: o_backend = optarg; break;
			case O_WS: o_workspace = optarg; break;
			case O_TIMEOUT:
				o_timeout = num_arg("--timeout", optarg, 1,
				    LONG_MAX / 2);
				break;
			case O_CAP:
				o_cap = num_arg("--output-cap", optarg, 0,
				    64l << 20);
				break;
			case O_ENV:
				if (strchr(optarg, '=') == NULL ||
				    optarg[0] == '=')
					die(EX_USAGE, "--env: expected "
					    "NAME=VALUE");
				env_set(&extra, optarg);
				break;
			case O_IDLE:
				o_idle = num_arg("--idle-after", optarg, 0,
				    LONG_MAX / 2);
				break;
			case O_REMOVE:
				o_remove = num_arg("--remove-after", optarg, 0,
				    LONG_MAX / 2);
				break;
			case O_STDIN: o_stdin = 1; break;
			case O_PROFILE:
				if (strcmp(optarg, SBX_PROFILE_HOST) != 0 &&
				    !sbx_id_ok(optarg, SBX_ID_MAX))
					die(EX_USAGE, "--profile: \"host\" or a "
					    "profile name");
				o_profile = optarg;
				break;
			case O_CACHED: o_cached = 1; break;
			case O_LOCAL: break;    /* main() chose this mode */
			case 'h': case O_HELP: usage(stdout); return EX_OK;
			default: usage(stderr); return EX_USAGE;
			}
		}
		if (pass == 0) {
			if (optind >= argc) {
				usage(stderr);
				return EX_USAGE;
			}
			verb = argv[optind++];
		}
	}
	if (config != NULL)
		if (sbx_cfg_load(&C, config, err, sizeof(err)) != 0)
			die(EX_USAGE, "%s", err);
	if (state != NULL)
		snprintf(C.state_dir, sizeof(C.state_dir), "%s", state);
	if (control != NULL)
		snprintf(C.control, sizeof(C.control), "%s", control);
	if (C.state_dir[0] != '/')
		die(EX_USAGE, "--state-dir: an absolute path");
	if (geteuid() != 0)
		die(EX_FAIL, "must run as root (it makes namespaces, mounts "
		    "and cgroups; without --local, sluice-execd does)");
	env_base(&o_env);
	for (i = 0; i < extra.n; i++)
		env_set(&o_env, extra.v[i]);
	if (strcmp(verb, "create") == 0)
		return cmd_create();
	if (strcmp(verb, "exec") == 0)
		return cmd_exec(argv + optind);
	if (strcmp(verb, "write") == 0)
		return cmd_write(argv + optind);
	if (strcmp(verb, "read") == 0)
		return cmd_read(argv + optind);
	if (strcmp(verb, "ls") == 0)
		return cmd_ls(argv + optind);
	if (strcmp(verb, "cancel") == 0)
		return cmd_cancel();
	if (strcmp(verb, "destroy") == 0)
		return cmd_destroy();
	if (strcmp(verb, "list") == 0)
		return cmd_list();
	if (strcmp(verb, "gc") == 0)
		return cmd_gc();
	if (strcmp(verb, "image") == 0)
		return image_verb(&C, opt_json, o_cached, argv + optind);
	die(EX_USAGE, "unknown command %s (try --help)", safe(verb));
}

/* The local mode alone: --local is accepted (and needed by nothing) so
 * that a command line of the local mode is one of this driver. */
int
main(int argc, char **argv)
{
	return local_main(argc, argv);
}
