/*
 * exec_files.c: the files API, done by the daemon on the host side of
 * the workspace (rec->workspace is the host directory of /workspace).
 *
 * The workspace belongs to the sandbox: whatever it holds was planted
 * by code we do not trust.  So:
 *  - every path is resolved by openat2(2) relative to the workspace's
 *    directory fd with RESOLVE_IN_ROOT (".." and absolute symbolic links
 *    stay inside it, as if it were "/"), RESOLVE_NO_MAGICLINKS
 *    (/proc/self/fd/N tricks) and RESOLVE_NO_XDEV; the last component
 *    is opened O_NOFOLLOW: a link named by the caller is refused, not
 *    followed, and parents are walked one openat2 at a time;
 *  - the I/O runs with the file system uid and gid of the sandbox's
 *    host user (setfsuid/setfsgid: the daemon is one thread): the kernel
 *    then checks permissions as for that user, root's overrides are
 *    gone, and what the daemon creates belongs to the sandbox user;
 *  - reads take regular files only (opened O_NONBLOCK, so a FIFO never
 *    blocks the loop), no larger than max_file_bytes.
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
#include <unistd.h>

#include <linux/openat2.h>

#include "sandbox-glue/executor/execd/execd-int.h"

#define LIST_DEPTH_MAX	32

/* errno after a failed call on path, as the API says it. */
static const struct xd_errno_msg fe_msgs[] = {
	{ ENOENT, 404, "not_found", "no such file" },
	{ ENOTDIR, 404, "not_found", "a parent is not a directory" },
	{ ELOOP, 400, "bad_request", "a symbolic link (the files API does "
	    "not follow the last one)" },
	{ EXDEV, 400, "bad_request", "crosses a mount point" },
	{ EACCES, 403, "forbidden", "permission denied (as the sandbox "
	    "user)" },
	{ EPERM, 403, "forbidden", "permission denied (as the sandbox "
	    "user)" },
	{ EISDIR, 400, "bad_request", "a directory" },
	{ ENOTEMPTY, 409, "conflict", "a directory that is not empty" },
	{ EEXIST, 409, "conflict", "a directory that is not empty" },
	{ ENOSPC, 413, "too_large", "no space left in the workspace" },
	{ EDQUOT, 413, "too_large", "no space left in the workspace" },
	{ EFBIG, 413, "too_large", "no space left in the workspace" },
	{ ENAMETOOLONG, 400, "bad_request", "name too long" },
	{ ENXIO, 400, "bad_request", "not a regular file" },
	{ 0, 0, NULL, NULL }
};

static int
fe_errno(struct xd_perr *e, const char *path, int err)
{
	const struct xd_errno_msg *m = xd_errno_find(fe_msgs, err);
	char buf[XD_ERR_MAX / 2];

	if (m != NULL)
		return xd_perr_set(e, m->status, m->code, "%s: %s", path,
		    m->msg);
	snprintf(buf, sizeof(buf), "%s: %s", path, strerror(err));
	return xd_perr_set(e, 500, "internal", "%s", buf);
}

/* The caller's path as one inside the workspace (xd_path_norm) into
 * norm, SBX_PATH_MAX bytes; -1 and e set when it is not one. */
static int
norm_of(const char *path, char *norm, struct xd_perr *e)
{
	if (xd_path_norm(path, norm, SBX_PATH_MAX) != 0)
		return xd_perr_set(e, 400, "bad_request", "%s: the files API "
		    "reaches /workspace only", "path");
	return 0;
}

/* The file system identity of the sandbox user, and back (exec_os_fs.c
 * works the same way). */
void
xd_fs_as_user(const struct sbx_rec *r)
{
	(void)setfsgid(r->host_gid);
	(void)setfsuid(r->host_uid);
}

void
xd_fs_as_root(void)
{
	(void)setfsuid(0);
	(void)setfsgid(0);
}

int
xd_fs_enter(const struct sbx_rec *r, struct xd_perr *e)
{
	int ws = open(r->workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);

	if (ws < 0)
		return xd_perr_set(e, 500, "internal", "the workspace: %s",
		    strerror(errno));
	xd_fs_as_user(r);
	return ws;
}

void
xd_fs_leave(int ws)
{
	xd_fs_as_root();
	if (ws >= 0)
		close(ws);
}

int
xd_fs_open_in(int ws, const char *path, int flags, mode_t mode)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.mode = (flags & O_CREAT) ? mode : 0;
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
	    RESOLVE_NO_XDEV;
	return (int)syscall(SYS_openat2, ws, path[0] ? path : ".", &how,
	    sizeof(how));
}

/*
 * The directory that holds norm's last component (an O_PATH fd) and
 * that component in base.  create: missing parents are made (0755, the
 * sandbox user's), one component at a time.
 */
static int
parent_of(int ws, const char *norm, int create, char *base, size_t blen,
    struct xd_perr *e)
{
	const char *slash = strrchr(norm, '/');
	char parent[SBX_PATH_MAX * 2];
	size_t plen = slash ? (size_t)(slash - norm) : 0;
	int fd;

	if (norm[0] == '\0')
		return xd_perr_set(e, 400, "bad_request", "%s: the workspace itself",
		    "/workspace");
	if (snprintf(base, blen, "%s", slash ? slash + 1 : norm) >= (int)blen ||
	    plen >= sizeof(parent))
		return xd_perr_set(e, 400, "bad_request", "%s: name too long", norm);
	memcpy(parent, norm, plen);
	parent[plen] = '\0';
	fd = xd_fs_open_in(ws, parent, O_PATH | O_DIRECTORY, 0);
	if (fd >= 0 || errno != ENOENT || !create) {
		if (fd < 0)
			return fe_errno(e, norm, errno);
		return fd;
	}
	/* make the parents: each prefix resolved inside, then made in
	 * the one before it */
	{
		char pre[SBX_PATH_MAX * 2];
		size_t i = 0;
		int prev = dup(ws);

		if (prev < 0)
			return fe_errno(e, norm, errno);
		while (i < plen) {
			size_t n = strcspn(parent + i, "/");
			char comp[256];

			if (n >= sizeof(comp)) {
				close(prev);
				return xd_perr_set(e, 400, "bad_request", "%s: name too "
				    "long", norm);
			}
			memcpy(comp, parent + i, n);
			comp[n] = '\0';
			memcpy(pre, parent, i + n);
			pre[i + n] = '\0';
			fd = xd_fs_open_in(ws, pre, O_PATH | O_DIRECTORY,
			    0);
			if (fd < 0 && errno == ENOENT) {
				if (mkdirat(prev, comp, 0755) != 0 &&
				    errno != EEXIST) {
					int k = errno;

					close(prev);
					return fe_errno(e, norm, k);
				}
				fd = xd_fs_open_in(ws, pre, O_PATH |
				    O_DIRECTORY, 0);
			}
			if (fd < 0) {
				int k = errno;

				close(prev);
				return fe_errno(e, norm, k);
			}
			close(prev);
			prev = fd;
			i += n;
			while (parent[i] == '/')
				i++;
		}
		return prev;
	}
}

/* ---- list ---- */

static const char *
type_name(mode_t m)
{
	if (S_ISREG(m)) return "file";
	if (S_ISDIR(m)) return "dir";
	if (S_ISLNK(m)) return "symlink";
	if (S_ISFIFO(m)) return "fifo";
	if (S_ISSOCK(m)) return "socket";
	if (S_ISCHR(m)) return "char";
	if (S_ISBLK(m)) return "block";
	return "other";
}

struct walk {
	const char *glob;
	int recursive, truncated;
	size_t max;
	json_t *out;
};

static int
glob_match(const struct walk *w, const char *rel, const char *name)
{
	if (w->glob == NULL || w->glob[0] == '\0')
		return 1;
	if (strchr(w->glob, '/') != NULL)
		return fnmatch(w->glob, rel, FNM_PATHNAME) == 0;
	return fnmatch(w->glob, name, 0) == 0;
}

/* Entries of the directory open at dfd (closed here); rel: its path
 * from the listed directory ("" for it), shown: from the workspace. */
static void
walk_dir(struct walk *w, int dfd, const char *rel, const char *shown,
    int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (d == NULL) {
		close(dfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		char r2[SBX_PATH_MAX * 2], s2[SBX_PATH_MAX * 2], mode[8];
		struct stat st;
		json_t *o;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") ==
		    0)
			continue;
		if (json_array_size(w->out) >= w->max) {
			w->truncated = 1;
			break;
		}
		if (snprintf(r2, sizeof(r2), "%s%s%s", rel, rel[0] ? "/" : "",
		    de->d_name) >= (int)sizeof(r2) ||
		    snprintf(s2, sizeof(s2), "%s%s%s", shown, shown[0] ? "/" :
		    "", de->d_name) >= (int)sizeof(s2))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) !=
		    0)
			continue;
		if (glob_match(w, r2, de->d_name)) {
			snprintf(mode, sizeof(mode), "%04o",
			    (unsigned)(st.st_mode & 07777));
			o = json_pack("{s:o,s:s,s:I,s:s,s:I}", "path",
			    xd_text_json((const unsigned char *)s2, strlen(s2),
			    0), "type", type_name(st.st_mode), "size",
			    (json_int_t)st.st_size, "mode", mode, "mtime",
			    (json_int_t)st.st_mtime);
			if (o != NULL && S_ISLNK(st.st_mode)) {
				char t[SBX_PATH_MAX];
				ssize_t n = readlinkat(dirfd(d), de->d_name, t,
				    sizeof(t));

				if (n >= 0 && (size_t)n < sizeof(t))
					json_object_set_new(o, "target",
					    xd_text_json((unsigned char *)t,
					    (size_t)n, 0));
			}
			if (o != NULL)
				json_array_append_new(w->out, o);
		}
		if (w->recursive && S_ISDIR(st.st_mode) &&
		    depth < LIST_DEPTH_MAX) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0)
				walk_dir(w, sub, r2, s2, depth + 1);
		}
		if (w->truncated)
			break;
	}
	closedir(d);
}

int
xd_fs_list(const struct sbx_rec *r, const char *dir, const char *glob,
    int recursive, size_t max_entries, json_t **out, struct xd_perr *e)
{
	char norm[SBX_PATH_MAX];
	struct walk w;
	int ws, dfd, rc = -1;

	*out = NULL;
	if (norm_of(dir ? dir : "", norm, e) != 0)
		return -1;
	if ((ws = xd_fs_enter(r, e)) < 0)
		return -1;
	dfd = xd_fs_open_in(ws, norm, O_RDONLY | O_DIRECTORY, 0);
	if (dfd < 0) {
		fe_errno(e, norm[0] ? norm : "/workspace", errno);
		goto out;
	}
	memset(&w, 0, sizeof(w));
	w.glob = glob;
	w.recursive = recursive;
	w.max = max_entries;
	w.out = json_array();
	walk_dir(&w, dfd, "", norm, 0);
	*out = json_pack("{s:o,s:o,s:b}", "path", xd_text_json((const
	    unsigned char *)norm, strlen(norm), 0), "entries", w.out,
	    "truncated", w.truncated);
	rc = 0;
out:
	xd_fs_leave(ws);
	return rc;
}

/* ---- read ---- */

int
xd_fs_open_read(const struct sbx_rec *r, const char *path, int *fdp,
    uint64_t *size, struct xd_perr *e)
{
	char norm[SBX_PATH_MAX];
	struct stat st;
	int ws, fd;

	*fdp = -1;
	if (norm_of(path, norm, e) != 0)
		return -1;
	if (norm[0] == '\0')
		return xd_perr_set(e, 400, "bad_request", "%s: a directory (list it "
		    "with GET /files?path=)", "/workspace");
	if ((ws = xd_fs_enter(r, e)) < 0)
		return -1;
	fd = xd_fs_open_in(ws, norm, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_NOCTTY, 0);
	xd_fs_leave(ws);
	if (fd < 0)
		return fe_errno(e, norm, errno);
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		if (S_ISDIR(st.st_mode))
			return xd_perr_set(e, 400, "bad_request", "%s: a directory (list "
			    "it with GET /files?path=)", norm);
		return xd_perr_set(e, 400, "bad_request", "%s: not a regular file", norm);
	}
	*fdp = fd;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* ---- write ---- */

static int
write_all(int fd, const void *data, size_t n)
{
	const char *p = data;
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int
xd_fs_write(const struct sbx_rec *r, const char *path, const void *data,
    size_t n, struct xd_perr *e)
{
	char norm[SBX_PATH_MAX], base[256];
	struct stat st;
	int ws, pfd = -1, fd = -1, rc = -1;

	if (norm_of(path, norm, e) != 0)
		return -1;
	if ((ws = xd_fs_enter(r, e)) < 0)
		return -1;
	if ((pfd = parent_of(ws, norm, 1, base, sizeof(base), e)) < 0)
		goto out;
	fd = openat(pfd, base, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
	    O_NOCTTY | O_CLOEXEC, 0644);
	if (fd < 0) {
		fe_errno(e, norm, errno);
		goto out;
	}
	/* truncated only once it is known to be a regular file */
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		xd_perr_set(e, 400, "bad_request", "%s: not a regular file", norm);
		goto out;
	}
	if (ftruncate(fd, 0) != 0 || write_all(fd, data, n) != 0) {
		fe_errno(e, norm, errno);
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (pfd >= 0)
		close(pfd);
	xd_fs_leave(ws);
	return rc;
}

int
xd_fs_delete(const struct sbx_rec *r, const char *path, struct xd_perr *e)
{
	char norm[SBX_PATH_MAX], base[256];
	int ws, pfd, rc = -1;

	if (norm_of(path, norm, e) != 0)
		return -1;
	if ((ws = xd_fs_enter(r, e)) < 0)
		return -1;
	if ((pfd = parent_of(ws, norm, 0, base, sizeof(base), e)) < 0)
		goto out;
	/* the name itself: a link goes, not what it names */
	if (unlinkat(pfd, base, 0) != 0 && (errno != EISDIR ||
	    unlinkat(pfd, base, AT_REMOVEDIR) != 0))
		fe_errno(e, norm, errno);
	else
		rc = 0;
	close(pfd);
out:
	xd_fs_leave(ws);
	return rc;
}

/* ---- edit ---- */

int
xd_fs_edit(const struct sbx_rec *r, const char *path, const char *old,
    size_t oldn, const char *new_, size_t newn, uint64_t max, json_t **out,
    struct xd_perr *e)
{
	char norm[SBX_PATH_MAX], base[256], tmp[300];
	char *buf = NULL, *hit, *nb = NULL;
	uint64_t size;
	struct stat st;
	size_t len = 0, nlen;
	ssize_t k;
	int fd = -1, ws = -1, pfd = -1, tfd = -1, rc = -1;
	static unsigned seq;

	*out = NULL;
	if (oldn == 0)
		return xd_perr_set(e, 400, "bad_request", "%s: old is empty", "edit");
	if (xd_fs_open_read(r, path, &fd, &size, e) != 0)
		return -1;
	(void)!xd_path_norm(path, norm, sizeof(norm));
	if (size > max) {
		xd_perr_set(e, 413, "too_large", "%s: larger than max_file_bytes", norm);
		goto out;
	}
	if (fstat(fd, &st) != 0 || (buf = malloc(size + 1)) == NULL) {
		xd_perr_set(e, 500, "internal", "%s: out of memory", norm);
		goto out;
	}
	while (len < size && (k = read(fd, buf + len, size - len)) > 0)
		len += (size_t)k;
	if ((hit = memmem(buf, len, old, oldn)) == NULL) {
		xd_perr_set(e, 409, "conflict", "%s: old text not found", norm);
		goto out;
	}
	if (memmem(hit + 1, len - (size_t)(hit - buf) - 1, old, oldn) != NULL) {
		xd_perr_set(e, 409, "conflict", "%s: old text is not unique", norm);
		goto out;
	}
	nlen = len - oldn + newn;
	if (nlen > max) {
		xd_perr_set(e, 413, "too_large", "%s: the result is larger than "
		    "max_file_bytes", norm);
		goto out;
	}
	if ((nb = malloc(nlen + 1)) == NULL) {
		xd_perr_set(e, 500, "internal", "%s: out of memory", norm);
		goto out;
	}
	memcpy(nb, buf, (size_t)(hit - buf));
	memcpy(nb + (hit - buf), new_, newn);
	memcpy(nb + (hit - buf) + newn, hit + oldn, len - (size_t)(hit - buf) -
	    oldn);
	/* a new file renamed over the old one: a reader in the sandbox
	 * sees the old text or the new, never half */
	if ((ws = xd_fs_enter(r, e)) < 0)
		goto out;
	if ((pfd = parent_of(ws, norm, 0, base, sizeof(base), e)) < 0)
		goto out_user;
	snprintf(tmp, sizeof(tmp), ".%.200s.sluice-edit-%d-%u", base,
	    (int)getpid(), seq++);
	tfd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, st.st_mode & 07777);
	if (tfd < 0) {
		fe_errno(e, norm, errno);
		goto out_user;
	}
	if (write_all(tfd, nb, nlen) != 0 || fchmod(tfd, st.st_mode & 07777)
	    != 0 || renameat(pfd, tmp, pfd, base) != 0) {
		fe_errno(e, norm, errno);
		(void)unlinkat(pfd, tmp, 0);
		goto out_user;
	}
	*out = json_pack("{s:o,s:I,s:i}", "path", xd_text_json((const
	    unsigned char *)norm, strlen(norm), 0), "size", (json_int_t)nlen,
	    "replaced", 1);
	rc = 0;
out_user:
	xd_fs_as_root();
out:
	if (tfd >= 0)
		close(tfd);
	if (pfd >= 0)
		close(pfd);
	if (ws >= 0)
		close(ws);
	if (fd >= 0)
		close(fd);
	free(buf);
	free(nb);
	return rc;
}
