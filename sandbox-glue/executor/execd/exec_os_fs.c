/*
 * exec_os_fs.c: what OpenSandbox's execd does to files and that the
 * native files API (exec_files.c) has no call for: FileInfo, listing to
 * a depth, search, mkdir -p, rm -rf, chmod, rename, replace-all.
 *
 * The same confinement as exec_files.c (its comment says why): paths
 * are xd_path_norm'ed (/workspace/... or relative to it, nothing
 * else), resolved with openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV from the workspace's fd, the last component never
 * followed, and the work done with the sandbox user's file system uid
 * and gid.  A tree is walked and removed with openat/unlinkat relative
 * to directory fds opened O_NOFOLLOW, so a link planted meanwhile
 * leads nowhere outside.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "sandbox-glue/executor/execd/exec_os-int.h"

#define DEPTH_MAX	32
#define RM_DEPTH_MAX	256

/* errors are set with xd_perr_set (exec_parse.c) */
#define oe xd_perr_set

static const struct xd_errno_msg oe_msgs[] = {
	{ ENOENT, 404, "not_found", "no such file or directory" },
	{ ENOTDIR, 404, "not_found", "no such file or directory" },
	{ ELOOP, 400, "bad_request", "a symbolic link (not followed)" },
	{ EXDEV, 400, "bad_request", "crosses a mount point" },
	{ EACCES, 403, "forbidden", "permission denied (as the sandbox "
	    "user)" },
	{ EPERM, 403, "forbidden", "permission denied (as the sandbox "
	    "user)" },
	{ EEXIST, 409, "conflict", "exists" },
	{ ENOTEMPTY, 409, "conflict", "exists" },
	{ ENOSPC, 413, "too_large", "no space left in the workspace" },
	{ EDQUOT, 413, "too_large", "no space left in the workspace" },
	{ EFBIG, 413, "too_large", "no space left in the workspace" },
	{ EISDIR, 400, "bad_request", "a directory" },
	{ 0, 0, NULL, NULL }
};

static int
oe_errno(struct xd_perr *e, const char *path, int err)
{
	const struct xd_errno_msg *m = xd_errno_find(oe_msgs, err);

	if (m != NULL)
		return oe(e, m->status, m->code, "/workspace/%s: %s", path,
		    m->msg);
	return oe(e, 500, "internal", "/workspace/%s: %s", path,
	    strerror(err));
}

/* The path that stands for /workspace ("opensandbox".workdir), "" none:
 * set once at start (xd_osfs_workdir). */
static char workdir[128];

void
xd_osfs_workdir(const char *w)
{
	snprintf(workdir, sizeof(workdir), "%s", w != NULL ? w : "");
}

const char *
xd_osfs_unalias(const char *in, char *buf, size_t len)
{
	size_t wl = strlen(workdir);

	if (in == NULL || !wl || strncmp(in, workdir, wl) != 0 || (in[wl] !=
	    '\0' && in[wl] != '/') || (size_t)snprintf(buf, len,
	    "/workspace%s", in + wl) >= len)
		return in;
	return buf;
}

static int
norm_of(const char *in, char *out, size_t len, struct xd_perr *e)
{
	char buf[SBX_PATH_MAX + 16];

	in = xd_osfs_unalias(in, buf, sizeof(buf));
	if (in == NULL || xd_path_norm(in, out, len) != 0)
		return oe(e, 400, "INVALID_PATH", "%s: a path under /workspace%s%s"
		    " (sluice's sandboxes reach their workspace only)", in ?
		    in : "(none)", workdir[0] ? " or " : "", workdir);
	return 0;
}

/* norm's parent (O_PATH) and its last component. */
static int
parent(int ws, const char *norm, char *base, size_t blen, struct xd_perr *e)
{
	const char *slash = strrchr(norm, '/');
	char dir[SBX_PATH_MAX];
	size_t dl = slash ? (size_t)(slash - norm) : 0;
	int fd;

	if (!norm[0])
		return oe(e, 400, "bad_request", "/workspace itself");
	if (snprintf(base, blen, "%s", slash ? slash + 1 : norm) >= (int)blen)
		return oe(e, 400, "bad_request", "a name too long");
	memcpy(dir, norm, dl);
	dir[dl] = '\0';
	if ((fd = xd_fs_open_in(ws, dir, O_PATH | O_DIRECTORY, 0)) < 0)
		return oe_errno(e, norm, errno);
	return fd;
}

static json_t *
time_json(const struct timespec *ts)
{
	char buf[48];
	struct tm g;
	time_t t = ts->tv_sec;

	if (gmtime_r(&t, &g) == NULL)
		return json_null();
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &g);
	return json_string(buf);
}

static const char *
type_of(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "directory";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

/* FileInfo of st at /workspace/rel; owner and group the ids inside the
 * sandbox (its uid 0 is the host's uid_base). */
static json_t *
info_json(const struct sbx_rec *r, const char *rel, const struct stat *st)
{
	char path[SBX_PATH_MAX + 16], own[24], grp[24], mode[8];
	long u = (long)st->st_uid - (long)r->uid_base;
	long g = (long)st->st_gid - (long)r->uid_base;

	snprintf(path, sizeof(path), "/workspace%s%s", rel[0] ? "/" : "", rel);
	if (u >= 0 && u < (long)r->uid_count)
		snprintf(own, sizeof(own), "%ld", u);
	else
		snprintf(own, sizeof(own), "nobody");
	if (g >= 0 && g < (long)r->uid_count)
		snprintf(grp, sizeof(grp), "%ld", g);
	else
		snprintf(grp, sizeof(grp), "nogroup");
	snprintf(mode, sizeof(mode), "%o", (unsigned)(st->st_mode & 07777));
	return json_pack("{s:o,s:s,s:I,s:o,s:o,s:s,s:s,s:I}", "path",
	    xd_text_json((const unsigned char *)path, strlen(path), 0),
	    "type", type_of(st->st_mode), "size", (json_int_t)st->st_size,
	    "modified_at", time_json(&st->st_mtim), "created_at",
	    time_json(&st->st_ctim), "owner", own, "group", grp, "mode",
	    (json_int_t)strtol(mode, NULL, 10));
}

int
xd_osfs_info(const struct sbx_rec *r, const char *path, json_t **out,
    struct xd_perr *e)
{
	char norm[SBX_PATH_MAX];
	struct stat st;
	int ws, fd;

	*out = NULL;
	if (norm_of(path, norm, sizeof(norm), e) != 0 ||
	    (ws = xd_fs_enter(r, e)) < 0)
		return -1;
	fd = xd_fs_open_in(ws, norm, O_PATH | O_NOFOLLOW, 0);
	if (fd < 0 || fstat(fd, &st) != 0) {
		int k = errno;

		if (fd >= 0)
			close(fd);
		xd_fs_leave(ws);
		return oe(e, k == ENOENT || k == ENOTDIR ? 404 : 500,
		    k == ENOENT || k == ENOTDIR ? "FILE_NOT_FOUND" : "internal",
		    "%s: %s", path, strerror(k));
	}
	close(fd);
	xd_fs_leave(ws);
	*out = info_json(r, norm, &st);
	return 0;
}

/* ---- list and search ---- */

struct olist {
	const struct sbx_rec *r;
	const char *pattern;
	int depth;
	size_t max;
	int truncated;
	json_t *out;
};

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
pat_match(const char *pat, const char *rel, const char *name)
{
	const char *p = pat;

	if (pat == NULL || !pat[0] || strcmp(pat, "**") == 0 ||
	    strcmp(pat, "**/*") == 0)
		return 1;
	/* "**" as "any directories": "**" + "/x" matches x at any depth */
	while (strncmp(p, "**/", 3) == 0)
		p += 3;
	if (strchr(p, '/') == NULL)
		return fnmatch(p, name, 0) == 0;
	return fnmatch(p, rel, 0) == 0 || fnmatch(pat, rel, 0) == 0;
}

/* The directory open at dfd (closed here), rel its path from the
 * workspace. */
static void
olist_dir(struct olist *w, int dfd, const char *rel, int level)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0, i;

	if (d == NULL) {
		close(dfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		char **nn;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			if (cap > 65536 || (nn = realloc(names, cap *
			    sizeof(*names))) == NULL)
				break;
			names = nn;
		}
		if ((names[n] = strdup(de->d_name)) == NULL)
			break;
		n++;
	}
	qsort(names, n, sizeof(*names), cmp_str);
	for (i = 0; i < n; i++) {
		char r2[SBX_PATH_MAX];
		struct stat st;

		if (w->truncated || json_array_size(w->out) >= w->max) {
			w->truncated = 1;
			break;
		}
		if (snprintf(r2, sizeof(r2), "%s%s%s", rel, rel[0] ? "/" : "",
		    names[i]) >= (int)sizeof(r2) || fstatat(dirfd(d), names[i],
		    &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (w->pattern == NULL || pat_match(w->pattern, r2 + 0,
		    names[i]))
			json_array_append_new(w->out, info_json(w->r, r2, &st));
		if (S_ISDIR(st.st_mode) && (w->pattern != NULL ? level <
		    DEPTH_MAX : level + 1 < w->depth)) {
			int sub = openat(dirfd(d), names[i], O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0)
				olist_dir(w, sub, r2, level + 1);
		}
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
}

int
xd_osfs_list(const struct sbx_rec *r, const char *dir, int depth,
    const char *pattern, size_t max, json_t **out, struct xd_perr *e)
{
	char norm[SBX_PATH_MAX];
	struct olist w;
	struct stat st;
	int ws, dfd;

	*out = NULL;
	if (norm_of(dir, norm, sizeof(norm), e) != 0 ||
	    (ws = xd_fs_enter(r, e)) < 0)
		return -1;
	/* a symbolic link named is refused, not listed through */
	dfd = xd_fs_open_in(ws, norm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	if (dfd < 0) {
		int k = errno;

		xd_fs_leave(ws);
		if (k == ENOTDIR || k == ELOOP)
			return oe(e, 400, "INVALID_PATH", "%s: not a directory "
			    "(a symbolic link is not followed)", dir);
		return oe(e, k == ENOENT ? 404 : 500, k == ENOENT ?
		    "FILE_NOT_FOUND" : "internal", "%s: %s", dir, strerror(k));
	}
	if (fstat(dfd, &st) != 0) {
		close(dfd);
		xd_fs_leave(ws);
		return oe(e, 500, "internal", "%s: %s", dir, strerror(errno));
	}
	memset(&w, 0, sizeof(w));
	w.r = r;
	w.pattern = pattern;
	w.depth = depth < 1 ? 1 : depth > DEPTH_MAX ? DEPTH_MAX : depth;
	w.max = max;
	w.out = json_array();
	olist_dir(&w, dfd, norm, 0);
	xd_fs_leave(ws);
	*out = w.out;
	return 0;
}

/* ---- mkdir -p ---- */

int
xd_osfs_mkdir(const struct sbx_rec *r, const char *path, int mode,
    struct xd_perr *e)
{
	char norm[SBX_PATH_MAX], pre[SBX_PATH_MAX];
	size_t i = 0, len;
	int ws, fd, rc = -1;

	if (norm_of(path, norm, sizeof(norm), e) != 0 ||
	    (ws = xd_fs_enter(r, e)) < 0)
		return -1;
	len = strlen(norm);
	if (len == 0) {
		xd_fs_leave(ws);
		return 0;
	}
	/* each prefix resolved inside, made in the one before it */
	for (;;) {
		size_t n = strcspn(norm + i, "/");
		const char *slash;
		char comp[256];
		int pfd;

		if (n >= sizeof(comp)) {
			oe(e, 400, "bad_request", "%s: a name too long", path);
			goto out;
		}
		memcpy(pre, norm, i + n);
		pre[i + n] = '\0';
		fd = xd_fs_open_in(ws, pre, O_PATH | O_DIRECTORY |
		    O_NOFOLLOW, 0);
		if (fd < 0 && errno == ENOENT) {
			memcpy(comp, norm + i, n);
			comp[n] = '\0';
			slash = i > 0 ? pre + i - 1 : NULL;
			if (slash != NULL)
				pre[i - 1] = '\0';
			pfd = xd_fs_open_in(ws, slash ? pre : "", O_PATH |
			    O_DIRECTORY, 0);
			if (pfd < 0 || (mkdirat(pfd, comp, (mode_t)(mode &
			    07777)) != 0 && errno != EEXIST)) {
				int k = errno;

				if (pfd >= 0)
					close(pfd);
				oe_errno(e, norm, k);
				goto out;
			}
			close(pfd);
			memcpy(pre, norm, i + n);
			pre[i + n] = '\0';
			fd = xd_fs_open_in(ws, pre, O_PATH | O_DIRECTORY |
		    O_NOFOLLOW, 0);
		}
		if (fd < 0) {
			oe_errno(e, norm, errno);
			goto out;
		}
		close(fd);
		i += n;
		while (norm[i] == '/')
			i++;
		if (i >= len)
			break;
	}
	rc = 0;
out:
	xd_fs_leave(ws);
	return rc;
}

/* ---- rm -rf ---- */

static int
rm_in(int dfd, const char *name, int level)
{
	int sub, rc = 0;
	DIR *d;
	struct dirent *de;

	if (unlinkat(dfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return errno == ENOENT ? 0 : -1;
	if (level > RM_DEPTH_MAX)
		return -1;
	sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	if (sub < 0 || (d = fdopendir(sub)) == NULL) {
		if (sub >= 0)
			close(sub);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (rm_in(dirfd(d), de->d_name, level + 1) != 0)
			rc = -1;
	}
	closedir(d);
	if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno !=
	    ENOENT)
		rc = -1;
	return rc;
}

int
xd_osfs_rmtree(const struct sbx_rec *r, const char *path, struct xd_perr *e)
{
	char norm[SBX_PATH_MAX], base[256];
	int ws, pfd, rc;

	if (norm_of(path, norm, sizeof(norm), e) != 0)
		return -1;
	if (!norm[0])
		return oe(e, 400, "bad_request", "/workspace itself is not "
		    "removed");
	if ((ws = xd_fs_enter(r, e)) < 0)
		return -1;
	if ((pfd = parent(ws, norm, base, sizeof(base), e)) < 0) {
		xd_fs_leave(ws);
		return -1;
	}
	rc = rm_in(pfd, base, 0);
	if (rc != 0)
		oe_errno(e, norm, errno ? errno : EIO);
	close(pfd);
	xd_fs_leave(ws);
	return rc;
}

/* ---- chmod, rename, replace, read ---- */

int
xd_osfs_chmod(const struct sbx_rec *r, const char *path, int mode,
    struct xd_perr *e)
{
	char norm[SBX_PATH_MAX], proc[64];
	struct stat st;
	int ws, fd, rc = -1;

	if (norm_of(path, norm, sizeof(norm), e) != 0 ||
	    (ws = xd_fs_enter(r, e)) < 0)
		return -1;
	fd = xd_fs_open_in(ws, norm, O_PATH | O_NOFOLLOW, 0);
	if (fd < 0 || fstat(fd, &st) != 0) {
		oe_errno(e, norm, errno);
		goto out;
	}
	if (S_ISLNK(st.st_mode)) {
		oe(e, 400, "bad_request", "%s: a symbolic link", path);
		goto out;
	}
	/* through the descriptor: no name is looked up again */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (chmod(proc, (mode_t)(mode & 07777)) != 0) {
		oe_errno(e, norm, errno);
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	xd_fs_leave(ws);
	return rc;
}

int
xd_osfs_rename(const struct sbx_rec *r, const char *src, const char *dst,
    struct xd_perr *e)
{
	char ns[SBX_PATH_MAX], nd[SBX_PATH_MAX], bs[256], bd[256];
	int ws, ps = -1, pd = -1, rc = -1;

	if (norm_of(src, ns, sizeof(ns), e) != 0 || norm_of(dst, nd,
	    sizeof(nd), e) != 0 || (ws = xd_fs_enter(r, e)) < 0)
		return -1;
	if ((ps = parent(ws, ns, bs, sizeof(bs), e)) < 0 || (pd = parent(ws,
	    nd, bd, sizeof(bd), e)) < 0)
		goto out;
	if (renameat(ps, bs, pd, bd) != 0) {
		oe_errno(e, ns, errno);
		goto out;
	}
	rc = 0;
out:
	if (ps >= 0)
		close(ps);
	if (pd >= 0)
		close(pd);
	xd_fs_leave(ws);
	return rc;
}

int
xd_osfs_read(const struct sbx_rec *r, const char *path, uint64_t max,
    unsigned char **buf, size_t *len, struct xd_perr *e)
{
	char ub[SBX_PATH_MAX + 16];
	uint64_t size;
	ssize_t k;
	size_t n = 0;
	int fd;

	*buf = NULL;
	*len = 0;
	path = xd_osfs_unalias(path, ub, sizeof(ub));
	if (xd_fs_open_read(r, path, &fd, &size, e) != 0)
		return -1;
	if (size > max) {
		close(fd);
		return oe(e, 413, "too_large", "%s: %llu bytes, more than "
		    "max_file_bytes", path, (unsigned long long)size);
	}
	if ((*buf = malloc(size + 1)) == NULL) {
		close(fd);
		return oe(e, 500, "internal", "out of memory");
	}
	while (n < size && (k = pread(fd, *buf + n, size - n, (off_t)n)) > 0)
		n += (size_t)k;
	close(fd);
	*len = n;
	return 0;
}

int
xd_osfs_replace(const struct sbx_rec *r, const char *path, const char *old,
    size_t oldn, const char *new_, size_t newn, uint64_t max, long *count,
    struct xd_perr *e)
{
	char ub[SBX_PATH_MAX + 16];
	unsigned char *buf, *out = NULL, *p, *hit;
	size_t len, o = 0, cap;
	long c = 0;
	int rc;

	*count = 0;
	if (oldn == 0)
		return oe(e, 400, "INVALID_REQUEST_BODY", "%s: old is empty",
		    path);
	if (xd_osfs_read(r, path, max, &buf, &len, e) != 0)
		return -1;
	for (p = buf; (hit = memmem(p, len - (size_t)(p - buf), old, oldn)) !=
	    NULL; p = hit + oldn)
		c++;
	if (c == 0) {
		free(buf);
		return 0;       /* nothing to replace: the file stays */
	}
	cap = len + (size_t)c * newn;
	if ((uint64_t)(len - (size_t)c * oldn + (size_t)c * newn) > max) {
		free(buf);
		return oe(e, 413, "too_large", "%s: the result is larger than "
		    "max_file_bytes", path);
	}
	if ((out = malloc(cap + 1)) == NULL) {
		free(buf);
		return oe(e, 500, "internal", "out of memory");
	}
	for (p = buf; (hit = memmem(p, len - (size_t)(p - buf), old, oldn)) !=
	    NULL; p = hit + oldn) {
		memcpy(out + o, p, (size_t)(hit - p));
		o += (size_t)(hit - p);
		memcpy(out + o, new_, newn);
		o += newn;
	}
	memcpy(out + o, p, len - (size_t)(p - buf));
	o += len - (size_t)(p - buf);
	free(buf);
	rc = xd_fs_write(r, xd_osfs_unalias(path, ub, sizeof(ub)), out, o, e);
	free(out);
	if (rc == 0)
		*count = c;
	return rc;
}

int
xd_osfs_workdir_link(const struct sbx_rec *r, int rootfd, char *err,
    size_t errlen)
{
	const char *slash = strrchr(workdir, '/');
	char dir[sizeof(workdir)], target[SBX_PATH_MAX];
	struct open_how how;
	ssize_t n;
	int dfd, rc = 0;

	if (!workdir[0] || slash == NULL)
		return 0;
	memcpy(dir, workdir + 1, (size_t)(slash - workdir));
	dir[slash - workdir > 0 ? slash - workdir - 1 : 0] = '\0';
	memset(&how, 0, sizeof(how));
	how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
	/* the sandbox's /tmp is a mount of its own: no RESOLVE_NO_XDEV */
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
	xd_fs_as_user(r);
	dfd = (int)syscall(SYS_openat2, rootfd, dir[0] ? dir : ".", &how,
	    sizeof(how));
	if (dfd < 0) {
		snprintf(err, errlen, "%s: its parent: %s", workdir,
		    strerror(errno));
		rc = -1;
	} else if (symlinkat("/workspace", dfd, slash + 1) != 0) {
		/* there already: fine if it is that link */
		n = errno == EEXIST ? readlinkat(dfd, slash + 1, target,
		    sizeof(target) - 1) : -1;
		if (n < 0 || (size_t)n != 10 || memcmp(target, "/workspace",
		    10) != 0) {
			snprintf(err, errlen, "%s: %s", workdir, n < 0 &&
			    errno != EEXIST ? strerror(errno) : "there "
			    "already, and not a link to /workspace");
			rc = -1;
		}
	}
	xd_fs_as_root();
	if (dfd >= 0)
		close(dfd);
	return rc;
}
