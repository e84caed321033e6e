/*
 * exec_tar.c: batch files (issue 24 point 7): a tar into a directory of
 * the workspace (PUT /v1/sandboxes/{id}/archive?path=DIR) and a
 * directory of it out as a tar (GET).
 *
 * Neither is parsed nor made by the daemon: both run in
 * `sluice-execd --tar-helper put|get DIR`, launched as the restore's
 * helper is (xd_arch_helper_spawn, exec_arch.c): a child that has become
 * the sandbox's host uid and gid (no group, no capability, no new
 * privileges), cwd the workspace, exec'd, so that it holds nothing of
 * the daemon's memory or descriptors.
 *
 * PUT.  The body (at most max_archive_bytes; a tar, or a tar compressed
 * with gzip or zstd: libarchive reads the format from the bytes) is
 * buffered by evhttp, then a worker (exec_job.c) copies it into a memfd,
 * the helper's stdin, and waits for the helper's result; the sandbox is
 * held meanwhile (box->op: no command, no file change, no delete: 409).
 * The helper extracts every entry into a staging directory of its own,
 * <workspace>/.sluice-tar.<pid>, each parent opened with openat2
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV from the
 * staging directory (so no link, whether from the archive or planted by
 * the running sandbox, is ever followed) and each name made with
 * O_EXCL / O_NOFOLLOW.  The entries are checked as the restore checks
 * them (xd_arch_refused: no absolute name, no "..", files, directories,
 * symbolic links and hard links to a file made earlier from the same
 * archive only), but where the restore skips, this refuses: the first
 * refused entry (a name, its type, a link in its path, a name already
 * made as another type) ends it with 400 naming the entry.  Past
 * max_archive_bytes of uncompressed data, or when the workspace's quota
 * is full, it ends with 413.  Only once every entry is in the staging
 * directory is DIR made (missing parents too; resolved RESOLVE_IN_ROOT as
 * the files API does) and the staged tree merged into it: a pass that
 * changes nothing finds the conflicts (a directory of the archive where
 * DIR holds a file, or the other way: 409 naming it), then renames: a
 * name DIR lacks is renamed in whole, a directory both hold is merged
 * into, a file or link DIR holds is replaced (rename(2): atomically).
 * Any failure removes the staging directory: nothing is written to DIR
 * unless the whole archive was extracted.  (What cannot be undone: the
 * renames themselves, should the sandbox, running meanwhile, change DIR
 * between the check and a rename; and a helper killed (its 600 s bound)
 * leaves its staging directory, which the next PUT removes.)  Modes:
 * permission bits only (no setuid, setgid, sticky); directories get the
 * owner's rwx added.  Owner: the sandbox user.  Modification times are
 * kept for files and directories.
 *
 * GET.  The helper opens DIR (RESOLVE_IN_ROOT | RESOLVE_NO_XDEV | no
 * magic links), writes one line of JSON on its stdout ({"ok":true} or
 * {"status","code","error"}), then the tar (pax): directories, regular
 * files and symbolic links (as links, never followed), walked through
 * directory descriptors opened O_NOFOLLOW; fifos, sockets and devices
 * are left out.  The daemon reads that line first (an error is answered
 * with its status), then sends the tar chunked as the client reads it,
 * paced as a file GET is (reply_buffer_bytes queued per connection,
 * reply_total_bytes in all, reply_timeout_ms without a read drops the
 * client): while the client does not read, the daemon does not read the
 * pipe and the helper blocks.  A helper that fails half-way (exit status
 * not 0) ends the connection without the last chunk, so the client sees
 * a cut answer, never a short tar that looks whole.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/openat2.h>

#include <archive.h>
#include <archive_entry.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "proxy/lib/apireply.h"
#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"

#define TAR_STAGE	".sluice-tar."
#define TAR_DEPTH_MAX	128
#define TAR_LINE_MAX	2048            /* the GET helper's first line */
#define TAR_START_MS	30000           /* ... comes within */
#define TAR_TICK_MS	200
#define TAR_READ_MAX	(256 * 1024)    /* of the pipe at once */

/* ---- pure checks (tests/fuzz/fuzz_execapi.c) ---- */

int
xd_tar_dir_parse(const char *q, char *out, size_t len, struct xd_perr *e)
{
	if (xd_path_norm(q != NULL ? q : "", out, len) != 0) {
		return xd_perr_set(e, 400, "bad_request", "path: a "
		    "directory of /workspace (relative, or under /workspace)");
	}
	if (strncmp(out, TAR_STAGE, sizeof(TAR_STAGE) - 1) == 0) {
		return xd_perr_set(e, 400, "bad_request", "path: %s* is the "
		    "archive calls' own", TAR_STAGE);
	}
	return 0;
}

/* A tar header block: its checksum (the field counted as spaces) is
 * the octal number the field holds, unsigned or signed sum. */
static int
tar_header_ok(const unsigned char *b)
{
	unsigned long want = 0, u = 0;
	long s = 0;
	int i, digits = 0;

	for (i = 148; i < 156 && b[i] == ' '; i++)
		;
	for (; i < 156 && b[i] >= '0' && b[i] <= '7'; i++, digits++)
		want = want * 8 + (unsigned long)(b[i] - '0');
	if (digits == 0)
		return 0;
	for (i = 0; i < 512; i++) {
		unsigned char c = i >= 148 && i < 156 ? ' ' : b[i];

		u += c;
		s += (signed char)c;
	}
	return u == want || (unsigned long)s == want;
}

const char *
xd_tar_body_kind(const unsigned char *b, size_t n)
{
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return "gzip";
	if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f &&
	    b[3] == 0xfd)
		return "zstd";
	if (n >= 512 && tar_header_ok(b))
		return "tar";
	/* an empty archive: end-of-archive blocks only */
	if (n >= 1024 && n % 512 == 0) {
		size_t i;

		for (i = 0; i < n && b[i] == 0; i++)
			;
		if (i == n)
			return "tar";
	}
	return NULL;
}

/* ---- the helper (as the sandbox's uid) ---- */

static int
rin2(int dfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.resolve = resolve | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	return (int)syscall(SYS_openat2, dfd, path[0] ? path : ".", &how,
	    sizeof(how));
}

#define STRICT	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)

static void
say(json_t *j)
{
	char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t n = s != NULL ? strlen(s) : 0, off = 0;
	ssize_t w;

	while (off < n && ((w = write(1, s + off, n - off)) > 0 ||
	    (w < 0 && errno == EINTR)))
		if (w > 0)
			off += (size_t)w;
	(void)!write(1, "\n", 1);
	free(s);
	json_decref(j);
}

static int
fail_out(int status, const char *code, const char *entry, const char *fmt,
    ...) __attribute__((format(printf, 4, 5)));

static int
fail_out(int status, const char *code, const char *entry, const char *fmt,
    ...)
{
	char m[XD_ERR_MAX], c1[XD_ERR_MAX], c2[300];
	va_list ap;
	json_t *j;

	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	j = json_pack("{s:i,s:s,s:s}", "status", status, "code", code,
	    "error", xd_arch_clip(m, c1, sizeof(c1)));
	if (j != NULL && entry != NULL)
		json_object_set_new(j, "entry", json_string(xd_arch_clip(entry,
		    c2, sizeof(c2))));
	say(j);
	return 1;
}

static int
full(int e)
{
	return e == ENOSPC || e == EDQUOT || e == EFBIG;
}

/* Remove what dfd's entry name holds, a tree, no link followed. */
static void
rm_tree(int dfd, const char *name, int depth)
{
	int fd;
	DIR *d;
	struct dirent *de;

	if (unlinkat(dfd, name, 0) == 0 || (errno != EISDIR && errno !=
	    EPERM) || depth > TAR_DEPTH_MAX)
		return;
	if ((fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return;
	(void)fchmod(fd, 0700);
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			rm_tree(dirfd(d), de->d_name, depth + 1);
	closedir(d);
	(void)unlinkat(dfd, name, AT_REMOVEDIR);
}

struct put {
	int ws, stage;
	char stage_name[64];
	uint64_t files, dirs, links, bytes, max;
	void *made;             /* tsearch: files made (hard links' targets) */
	struct dirmode {
		char *name;
		mode_t mode;
		struct timespec mt;
	} *dm;
	size_t ndm, mdm;
};

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The directory of the staged name's parent (O_PATH), its last
 * component in *base; missing parents made (counted), each in the one
 * before it, each opened RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS (never
 * mkdirat through a path: that would follow a link).  -1 with errno. */
static int
stage_parent(struct put *p, char *name, const char **base)
{
	char *slash = strrchr(name, '/'), *c, *next;
	int fd, nfd, k;

	*base = slash != NULL ? slash + 1 : name;
	if ((fd = dup(p->stage)) < 0 || slash == NULL)
		return fd;
	*slash = '\0';
	for (c = name; c != NULL; c = next) {
		if ((next = strchr(c, '/')) != NULL)
			*next = '\0';
		if (c[0] == '\0' || strcmp(c, ".") == 0)
			nfd = dup(fd);
		else if ((nfd = rin2(fd, c, O_PATH | O_DIRECTORY, STRICT)) < 0 &&
		    errno == ENOENT) {
			if (mkdirat(fd, c, 0755) == 0)
				p->dirs++;
			nfd = rin2(fd, c, O_PATH | O_DIRECTORY, STRICT);
		}
		k = errno;
		if (next != NULL)
			*next++ = '/';
		close(fd);
		if ((fd = nfd) < 0) {
			*slash = '/';
			errno = k;
			return -1;
		}
	}
	*slash = '/';
	return fd;
}

static const char *
errno_why(int e)
{
	switch (e) {
	case ELOOP:
		return "a symbolic link in its path (nothing is written "
		    "through a link)";
	case ENOTDIR:
		return "a parent is not a directory";
	case EEXIST:
		return "already in the archive as another type";
	case EXDEV:
		return "leaves the workspace";
	case ENAMETOOLONG:
		return "name too long";
	default:
		return strerror(e);
	}
}

/*
 * The kinds of entries, at base in the staging directory pfd.  Each
 * returns 0 made, 1 with the answer said, or -1 with errno (put_entry
 * says it).
 */

/* A hard link to a file made before from the archive (h). */
static int
put_hardlink(struct put *p, int pfd, const char *base, const char *h,
    const char *shown, char **tname)
{
	const char *tbase;
	int tfd, k;

	while (h[0] == '.' && h[1] == '/')
		h += 2;
	if (tfind(h, &p->made, str_cmp) == NULL)
		return fail_out(400, "bad_request", shown, "%s: refused: a "
		    "hard link to no file made before from the archive",
		    shown);
	if ((*tname = strdup(h)) == NULL ||
	    (tfd = stage_parent(p, *tname, &tbase)) < 0)
		return fail_out(400, "bad_request", shown, "%s: refused: its "
		    "target: %s", shown, errno_why(errno));
	k = linkat(tfd, tbase, pfd, base, 0);
	close(tfd);
	if (k != 0)
		return -1;
	p->links++;
	return 0;
}

/* A directory; its mode and time are set once the tree is whole (the
 * name moves to p->dm). */
static int
put_dir(struct put *p, struct archive_entry *e, int pfd, const char *base,
    const char *shown, char **name)
{
	struct dirmode *dm;
	struct stat st;

	if (mkdirat(pfd, base, 0700) != 0) {
		if (errno != EEXIST || fstatat(pfd, base, &st,
		    AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
			return -1;
	} else
		p->dirs++;
	if (p->ndm == p->mdm) {
		size_t m = p->mdm ? 2 * p->mdm : 64;

		if ((dm = realloc(p->dm, m * sizeof(*dm))) == NULL)
			return fail_out(500, "internal", shown, "out of "
			    "memory");
		p->dm = dm;
		p->mdm = m;
	}
	dm = &p->dm[p->ndm++];
	dm->name = *name;
	*name = NULL;
	dm->mode = (archive_entry_perm(e) & 0777) | 0700;
	dm->mt.tv_sec = archive_entry_mtime(e);
	dm->mt.tv_nsec = archive_entry_mtime_nsec(e);
	return 0;
}

/* A regular file, its bytes within max_archive_bytes in all (the name
 * is kept for the hard links after it). */
static int
put_file(struct put *p, struct archive *a, struct archive_entry *e,
    int pfd, const char *base, const char *shown, char **name)
{
	la_int64_t off, size = archive_entry_size(e);
	struct timespec ts[2];
	const void *buf;
	size_t n;
	int fd, r, rc = -1;

	if (size < 0 || (uint64_t)size > p->max - p->bytes)
		return fail_out(413, "too_large", shown, "the archive holds "
		    "more than max_archive_bytes (%llu) uncompressed",
		    (unsigned long long)p->max);
	if ((fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_NOCTTY | O_CLOEXEC, 0600)) < 0)
		return -1;
	while ((r = archive_read_data_block(a, &buf, &n, &off)) ==
	    ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *b = buf;

		if (off < 0 || (uint64_t)off + n > (uint64_t)size)
			break;
		while (n > 0) {
			ssize_t w = pwrite(fd, b, n, off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				goto out;
			b += w;
			off += w;
			n -= (size_t)w;
		}
	}
	if (r != ARCHIVE_EOF) {
		rc = fail_out(400, "bad_request", shown, "%s: the archive does "
		    "not read: %s", shown, r < ARCHIVE_WARN ?
		    archive_error_string(a) : "data past its size");
		goto out;
	}
	if (ftruncate(fd, size) != 0 || fchmod(fd, archive_entry_perm(e) &
	    0777) != 0)
		goto out;
	ts[0].tv_sec = ts[1].tv_sec = archive_entry_mtime(e);
	ts[0].tv_nsec = ts[1].tv_nsec = archive_entry_mtime_nsec(e);
	(void)futimens(fd, ts);
	p->files++;
	p->bytes += (uint64_t)size;
	if (tsearch(*name, &p->made, str_cmp) != NULL)
		*name = NULL;   /* kept in the tree */
	rc = 0;
out:
	r = errno;
	close(fd);
	errno = r;
	return rc;
}

/* One entry into the staging directory: 0, or 1 with the answer said. */
static int
put_entry(struct put *p, struct archive *a, struct archive_entry *e)
{
	const char *why, *clean = NULL, *base, *h;
	char *name = NULL, *tname = NULL, *s;
	mode_t ft = archive_entry_filetype(e);
	char type = ft == AE_IFREG ? 'f' : ft == AE_IFDIR ? 'd' : ft ==
	    AE_IFLNK ? 'l' : '?';
	const char *shown = archive_entry_pathname(e);
	int pfd = -1, rc = 1, k;
	struct stat st;

	h = archive_entry_hardlink(e);
	why = xd_arch_refused(shown, type, h != NULL ? h :
	    archive_entry_symlink(e), h != NULL, &clean);
	if (why != NULL && why[0] == '\0')
		return 0;       /* the top */
	if (why != NULL)
		return fail_out(400, "bad_request", shown, "%s: refused: %s",
		    shown, why);
	if ((name = strdup(clean)) == NULL)
		return fail_out(500, "internal", shown, "out of memory");
	/* "a/b/" names the directory a/b */
	for (s = name + strlen(name); s > name && s[-1] == '/'; s--)
		s[-1] = '\0';
	if (name[0] == '\0' || strcmp(name, ".") == 0) {
		free(name);
		return 0;
	}
	if ((pfd = stage_parent(p, name, &base)) < 0)
		goto sys;
	if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		rc = fail_out(400, "bad_request", shown, "%s: refused: a name "
		    "ending in . or ..", shown);
		goto out;
	}
	/* a later entry of a name made: replaced, unless a directory */
	if (type != 'd' && fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode)) {
			rc = fail_out(400, "bad_request", shown, "%s: refused: "
			    "already in the archive as a directory", shown);
			goto out;
		}
		(void)unlinkat(pfd, base, 0);
	}
	if (h != NULL)
		rc = put_hardlink(p, pfd, base, h, shown, &tname);
	else if (type == 'd')
		rc = put_dir(p, e, pfd, base, shown, &name);
	else if (type == 'l') {
		rc = symlinkat(archive_entry_symlink(e), pfd, base) != 0 ? -1 :
		    0;
		p->links += rc == 0;
	} else
		rc = put_file(p, a, e, pfd, base, shown, &name);
	if (rc >= 0)
		goto out;
sys:
	k = errno;
	if (full(k))
		rc = fail_out(413, "too_large", shown, "the archive does not "
		    "fit the workspace");
	else
		rc = fail_out(400, "bad_request", shown, "%s: refused: %s",
		    shown, errno_why(k));
out:
	if (pfd >= 0)
		close(pfd);
	free(name);
	free(tname);
	return rc;
}

/* The staged tree against DIR: a directory of one where the other has
 * something else is a conflict (named in bad).  apply: rename. */
static int
merge(int src, int dst, const char *rel, int apply, char *bad, size_t blen,
    int depth)
{
	DIR *d;
	struct dirent *de;
	int fd = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		snprintf(bad, blen, "%s", rel);
		return -1;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		struct stat ss, ds;
		char r2[1024];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(r2, sizeof(r2), "%s%s%s", rel, rel[0] ? "/" : "",
		    de->d_name);
		if (fstatat(dirfd(d), de->d_name, &ss, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (fstatat(dst, de->d_name, &ds, AT_SYMLINK_NOFOLLOW) != 0) {
			if (errno != ENOENT) {
				snprintf(bad, blen, "%s", r2);
				rc = -1;
			} else if (apply && renameat(dirfd(d), de->d_name, dst,
			    de->d_name) != 0) {
				snprintf(bad, blen, "%s", r2);
				rc = -1;
			}
			continue;
		}
		if (S_ISDIR(ss.st_mode) != S_ISDIR(ds.st_mode)) {
			snprintf(bad, blen, "%s", r2);
			rc = -2;
		} else if (S_ISDIR(ss.st_mode)) {
			int s2 = openat(dirfd(d), de->d_name, O_PATH |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int d2 = openat(dst, de->d_name, O_PATH | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);

			if (s2 < 0 || d2 < 0 || depth > TAR_DEPTH_MAX) {
				snprintf(bad, blen, "%s", r2);
				rc = -1;
			} else
				rc = merge(s2, d2, r2, apply, bad, blen,
				    depth + 1);
			if (s2 >= 0)
				close(s2);
			if (d2 >= 0)
				close(d2);
		} else if (apply && renameat(dirfd(d), de->d_name, dst,
		    de->d_name) != 0) {
			snprintf(bad, blen, "%s", r2);
			rc = -1;
		}
	}
	closedir(d);
	return rc;
}

/* DIR (made with its missing parents), resolved inside the workspace. */
static int
dir_make(int ws, char *dir)
{
	char *c;
	int fd = rin2(ws, dir, O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT);

	if (fd >= 0 || errno != ENOENT)
		return fd;
	for (c = dir;; c++) {
		if (*c == '/' || *c == '\0') {
			char save = *c;
			int pfd;
			char *slash;

			*c = '\0';
			if ((pfd = rin2(ws, dir, O_PATH | O_DIRECTORY,
			    RESOLVE_IN_ROOT)) < 0) {
				/* make it in its parent, resolved inside */
				int par;

				slash = strrchr(dir, '/');
				if (slash != NULL)
					*slash = '\0';
				par = rin2(ws, slash != NULL ? dir : "", O_PATH |
				    O_DIRECTORY, RESOLVE_IN_ROOT);
				if (slash != NULL)
					*slash = '/';
				if (par < 0 || (mkdirat(par, slash != NULL ?
				    slash + 1 : dir, 0755) != 0 && errno !=
				    EEXIST)) {
					int k = errno;

					if (par >= 0)
						close(par);
					*c = save;
					errno = k;
					return -1;
				}
				close(par);
			} else
				close(pfd);
			*c = save;
			if (save == '\0')
				break;
		}
	}
	return rin2(ws, dir, O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT);
}

static int
helper_put(const char *dir0, uint64_t max)
{
	struct put p;
	struct archive *a;
	struct archive_entry *e;
	char dir[SBX_PATH_MAX], bad[1024];
	int r, rc = 1, dfd = -1, k;
	size_t i;
	DIR *d;
	struct dirent *de;

	memset(&p, 0, sizeof(p));
	p.max = max;
	p.stage = -1;
	snprintf(dir, sizeof(dir), "%s", dir0);
	if ((p.ws = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return fail_out(500, "internal", NULL, "the workspace: %s",
		    strerror(errno));
	/* a staging directory a killed helper left */
	if ((d = opendir(".")) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (strncmp(de->d_name, TAR_STAGE, sizeof(TAR_STAGE) -
			    1) == 0)
				rm_tree(p.ws, de->d_name, 0);
		closedir(d);
	}
	snprintf(p.stage_name, sizeof(p.stage_name), TAR_STAGE "%d",
	    (int)getpid());
	if (mkdirat(p.ws, p.stage_name, 0700) != 0)
		return full(errno) ? fail_out(413, "too_large", NULL, "the "
		    "workspace is full") : fail_out(500, "internal", NULL,
		    "staging: %s", strerror(errno));
	if ((p.stage = rin2(p.ws, p.stage_name, O_PATH | O_DIRECTORY,
	    STRICT)) < 0) {
		k = errno;
		rm_tree(p.ws, p.stage_name, 0);
		return fail_out(500, "internal", NULL, "staging: %s",
		    strerror(k));
	}
	if ((a = archive_read_new()) == NULL ||
	    archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
	    archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
	    archive_read_support_format_tar(a) != ARCHIVE_OK ||
	    archive_read_open_fd(a, 0, 65536) != ARCHIVE_OK) {
		fail_out(400, "bad_request", NULL, "the body is not a tar "
		    "(or a tar compressed with gzip or zstd): %s", a != NULL &&
		    archive_error_string(a) != NULL ? archive_error_string(a) :
		    "it does not open");
		goto out;
	}
	while ((r = archive_read_next_header(a, &e)) >= ARCHIVE_WARN &&
	    r != ARCHIVE_EOF)
		if (put_entry(&p, a, e) != 0)
			goto out;
	if (r != ARCHIVE_EOF) {
		fail_out(400, "bad_request", NULL, "the archive does not read: "
		    "%s", archive_error_string(a));
		goto out;
	}
	/* the directories' modes and times, deepest (latest made) first */
	for (i = p.ndm; i-- > 0;) {
		int fd = rin2(p.stage, p.dm[i].name, O_RDONLY | O_DIRECTORY,
		    STRICT);
		struct timespec ts[2] = { p.dm[i].mt, p.dm[i].mt };

		if (fd >= 0) {
			(void)fchmod(fd, p.dm[i].mode);
			(void)futimens(fd, ts);
			close(fd);
		}
	}
	if ((dfd = dir_make(p.ws, dir)) < 0) {
		k = errno;
		if (full(k))
			fail_out(413, "too_large", NULL, "the workspace is "
			    "full");
		else if (k == ENOENT)
			fail_out(404, "not_found", NULL, "path %s: a link in it "
			    "leads to nothing in the workspace", dir);
		else
			fail_out(k == ENOTDIR || k == EEXIST ? 409 : 400,
			    k == ENOTDIR || k == EEXIST ? "conflict" :
			    "bad_request", NULL, "path %s: %s", dir[0] ? dir :
			    ".", errno_why(k));
		goto out;
	}
	if ((k = merge(p.stage, dfd, "", 0, bad, sizeof(bad), 0)) != 0) {
		if (k == -2)
			fail_out(409, "conflict", bad, "%s: a directory on one "
			    "side, something else on the other (the archive "
			    "or %s)", bad, dir[0] ? dir : "/workspace");
		else
			fail_out(500, "internal", bad, "%s: cannot read it",
			    bad);
		goto out;
	}
	if (merge(p.stage, dfd, "", 1, bad, sizeof(bad), 0) != 0) {
		fail_out(500, "internal", bad, "%s: not moved into place (the "
		    "sandbox changed %s meanwhile?): the entries before it "
		    "are in place", bad, dir[0] ? dir : "/workspace");
		goto out;
	}
	say(json_pack("{s:s,s:I,s:I,s:I,s:I,s:[]}", "path", dir, "files",
	    (json_int_t)p.files, "dirs", (json_int_t)p.dirs, "links",
	    (json_int_t)p.links, "bytes", (json_int_t)p.bytes, "refused"));
	rc = 0;
out:
	if (a != NULL)
		archive_read_free(a);
	if (dfd >= 0)
		close(dfd);
	close(p.stage);
	rm_tree(p.ws, p.stage_name, 0);
	close(p.ws);
	return rc;
}

/* ---- GET's helper ---- */

struct get {
	struct archive *a;
	struct archive_entry *e;
	char buf[65536], link[4096];
	int failed;
};

static void
get_head(struct get *g, const char *path, const struct stat *st,
    const char *link)
{
	archive_entry_clear(g->e);
	archive_entry_set_pathname(g->e, path);
	archive_entry_set_mode(g->e, st->st_mode & (S_IFMT | 0777));
	archive_entry_set_mtime(g->e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	archive_entry_set_size(g->e, S_ISREG(st->st_mode) ? st->st_size : 0);
	if (link != NULL)
		archive_entry_set_symlink(g->e, link);
	if (archive_write_header(g->a, g->e) < ARCHIVE_WARN)
		g->failed = 1;
}

static void
get_walk(struct get *g, int dfd, const char *rel, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (d == NULL) {
		close(dfd);
		return;
	}
	while (!g->failed && (de = readdir(d)) != NULL) {
		char p[SBX_PATH_MAX * 2];
		struct stat st;
		int fd;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (depth == 0 && rel[0] == '\0' && strncmp(de->d_name,
		    TAR_STAGE, sizeof(TAR_STAGE) - 1) == 0))
			continue;
		if (snprintf(p, sizeof(p), "%s%s%s", rel, rel[0] ? "/" : "",
		    de->d_name) >= (int)sizeof(p) || fstatat(dirfd(d),
		    de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(dirfd(d), de->d_name, g->link,
			    sizeof(g->link) - 1);

			if (n < 0)
				continue;
			g->link[n] = '\0';
			get_head(g, p, &st, g->link);
		} else if (S_ISDIR(st.st_mode)) {
			if (depth >= TAR_DEPTH_MAX || (fd = openat(dirfd(d),
			    de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC)) < 0)
				continue;
			get_head(g, p, &st, NULL);
			get_walk(g, fd, p, depth + 1);
		} else if (S_ISREG(st.st_mode)) {
			uint64_t left;
			ssize_t n;

			if ((fd = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
				continue;
			if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
				close(fd);
				continue;
			}
			get_head(g, p, &st, NULL);
			/* the size told: a file that shrank is padded with
			 * zeros, one that grew is cut */
			for (left = (uint64_t)st.st_size; !g->failed && left >
			    0; left -= (uint64_t)n) {
				n = read(fd, g->buf, left < sizeof(g->buf) ?
				    (size_t)left : sizeof(g->buf));
				if (n < 0 && errno == EINTR) {
					n = 0;
					continue;
				}
				if (n <= 0) {
					memset(g->buf, 0, sizeof(g->buf));
					n = (ssize_t)(left < sizeof(g->buf) ?
					    left : sizeof(g->buf));
				}
				if (archive_write_data(g->a, g->buf, (size_t)n)
				    < 0)
					g->failed = 1;
			}
			close(fd);
		}
		/* fifos, sockets, devices: left out */
	}
	closedir(d);
}

static int
helper_get(const char *dir)
{
	struct get *g = calloc(1, sizeof(*g));
	int ws, dfd;

	if (g == NULL)
		return fail_out(500, "internal", NULL, "out of memory");
	if ((ws = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return fail_out(500, "internal", NULL, "the workspace: %s",
		    strerror(errno));
	if ((dfd = rin2(ws, dir, O_RDONLY | O_DIRECTORY, RESOLVE_IN_ROOT)) <
	    0) {
		int k = errno;

		return fail_out(k == ENOENT || k == ENOTDIR ? 404 : k ==
		    EACCES ? 403 : 400, k == ENOENT || k == ENOTDIR ?
		    "not_found" : k == EACCES ? "forbidden" : "bad_request",
		    NULL, "%s: %s", dir[0] ? dir : "/workspace", k == ENOTDIR ?
		    "not a directory" : strerror(k));
	}
	say(json_pack("{s:b}", "ok", 1));
	if ((g->a = archive_write_new()) == NULL ||
	    (g->e = archive_entry_new()) == NULL ||
	    archive_write_set_format_pax_restricted(g->a) != ARCHIVE_OK ||
	    archive_write_set_options(g->a, "hdrcharset=BINARY") <
	    ARCHIVE_WARN || archive_write_set_bytes_in_last_block(g->a, 1) !=
	    ARCHIVE_OK || archive_write_open_fd(g->a, 1) != ARCHIVE_OK)
		return 1;
	get_walk(g, dfd, "", 0);
	if (g->failed || archive_write_close(g->a) != ARCHIVE_OK)
		return 1;
	archive_write_free(g->a);
	archive_entry_free(g->e);
	return 0;
}

int
xd_tar_helper(int argc, char **argv)
{
	char dir[SBX_PATH_MAX], *end;
	unsigned long long max;

	/* only ever the daemon's child, dropped to a sandbox's uid */
	if (geteuid() == 0 || getuid() == 0) {
		fprintf(stderr, XD_NAME ": --tar-helper is sluice-execd's own "
		    "(it does not run as root)\n");
		return 2;
	}
	if (argc == 4 && strcmp(argv[2], "get") == 0) {
		if (xd_path_norm(argv[3], dir, sizeof(dir)) != 0)
			return fail_out(400, "bad_request", NULL, "path");
		return helper_get(dir);
	}
	if (argc == 5 && strcmp(argv[2], "put") == 0) {
		errno = 0;
		max = strtoull(argv[4], &end, 10);
		if (xd_path_norm(argv[3], dir, sizeof(dir)) != 0 || errno ||
		    *end != '\0')
			return fail_out(400, "bad_request", NULL, "path");
		return helper_put(dir, (uint64_t)max);
	}
	fprintf(stderr, XD_NAME ": --tar-helper put|get DIR [MAX]\n");
	return 2;
}

/* ---- PUT in the daemon ---- */

struct tar_put {
	struct xd_box *b;
	struct evbuffer *body;
	char dir[SBX_PATH_MAX];
	uint64_t max;
	xd_tar_cb cb;
	void *arg;
};

/* In the worker (a fork of the daemon): the body into a memfd, the
 * helper run on it. */
static json_t *
put_child(void *arg)
{
	struct tar_put *t = arg;
	const struct sbx_rec *r = &t->b->rec;
	char maxs[32], *buf;
	const char *args[] = { "--tar-helper", "put", t->dir, maxs, NULL };
	const char *why = "the helper does not run";
	int mfd, wfd, p[2];
	pid_t pid;
	json_t *res;

	snprintf(maxs, sizeof(maxs), "%llu", (unsigned long long)t->max);
	if ((mfd = memfd_create("sluice-tar", MFD_CLOEXEC)) < 0)
		return json_pack("{s:i,s:s,s:s}", "status", 500, "code",
		    "internal", "error", "memfd");
	while (evbuffer_get_length(t->body) > 0)
		if (evbuffer_write(t->body, mfd) <= 0 && errno != EINTR)
			return json_pack("{s:i,s:s,s:s}", "status", 500, "code",
			    "internal", "error", "the body is not kept");
	if (lseek(mfd, 0, SEEK_SET) != 0 || (wfd = open(r->workspace,
	    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return json_pack("{s:i,s:s,s:s}", "status", 500, "code",
		    "internal", "error", "the workspace does not open");
	if (pipe2(p, O_CLOEXEC) != 0 || xd_arch_helper_spawn(r, mfd, wfd,
	    p[1], args, &pid) != 0)
		return json_pack("{s:i,s:s,s:s}", "status", 500, "code",
		    "internal", "error", "the helper does not start");
	close(p[1]);
	close(mfd);
	close(wfd);
	buf = xd_arch_helper_wait(pid, p[0], &why);
	close(p[0]);
	res = buf != NULL ? json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL) :
	    NULL;
	free(buf);
	if (!json_is_object(res)) {
		json_decref(res);
		return json_pack("{s:i,s:s,s:s}", "status", 500, "code",
		    "internal", "error", why);
	}
	return res;
}

static void
put_done(void *arg, json_t *res)
{
	struct tar_put *t = arg;
	struct xd_perr e;
	const char *m;

	t->b->op = 0;
	memset(&e, 0, sizeof(e));
	if (res == NULL || json_object_get(res, "error") != NULL) {
		json_int_t st = json_integer_value(json_object_get(res,
		    "status"));
		const char *ent;

		e.status = st >= 400 && st < 600 ? (int)st : 500;
		e.code = e.status == 400 ? "bad_request" : e.status == 404 ?
		    "not_found" : e.status == 409 ? "conflict" : e.status ==
		    413 ? "too_large" : e.status == 403 ? "forbidden" :
		    "internal";
		m = json_string_value(json_object_get(res, "error"));
		snprintf(e.msg, sizeof(e.msg), "%s", m != NULL ? m : "the "
		    "archive worker died");
		if ((ent = json_string_value(json_object_get(res, "entry"))) !=
		    NULL)
			e.extra = json_pack("{s:s}", "entry", ent);
		json_decref(res);
		t->cb(t->arg, NULL, &e);
	} else {
		json_object_del(res, "status");
		t->cb(t->arg, res, NULL);
	}
	xd_box_unref(t->b);
	free(t);
}

int
xd_tar_put(struct xd_box *b, struct evbuffer *body, const char *dir,
    xd_tar_cb cb, void *arg, struct xd_perr *e)
{
	const struct xd_cfg *c = b->xd->cfg;
	size_t len = evbuffer_get_length(body);
	struct tar_put *t;
	char err[XD_ERR_MAX];

	if (len > c->max_archive_bytes) {
		e->status = 413;
		e->code = "too_large";
		e->extra = json_pack("{s:I,s:I}", "size", (json_int_t)len,
		    "limit", (json_int_t)c->max_archive_bytes);
		snprintf(e->msg, sizeof(e->msg), "the archive is larger than "
		    "max_archive_bytes (%llu)",
		    (unsigned long long)c->max_archive_bytes);
		return -1;
	}
	if (xd_tar_body_kind(evbuffer_pullup(body, len < 1024 ? (ev_ssize_t)len
	    : 1024), len) == NULL) {
		return xd_perr_set(e, 400, "bad_request", "the body is not "
		    "a tar (nor a tar compressed with gzip or zstd)");
	}
	if ((t = calloc(1, sizeof(*t))) == NULL)
		goto nomem;
	if (xd_tar_dir_parse(dir, t->dir, sizeof(t->dir), e) != 0) {
		free(t);
		return -1;
	}
	t->b = b;
	t->body = body;
	t->max = c->max_archive_bytes;
	t->cb = cb;
	t->arg = arg;
	b->op = 1;
	b->refs++;
	if (xd_job_run(b->xd, "archive-put", put_child, t, put_done, t, err,
	    sizeof(err)) != 0) {
		b->op = 0;
		b->refs--;
		free(t);
		return xd_perr_set(e, 503, "backend_unavailable", "%s", err);
	}
	/* the worker has its copy: the daemon's goes now */
	evbuffer_drain(body, len);
	return 0;
nomem:
	return xd_perr_set(e, 500, "internal", "out of memory");
}

/* ---- GET in the daemon ---- */

struct tar_get {
	struct xd *xd;
	struct evhttp_request *req;
	struct evhttp_connection *evcon;
	pid_t pid;
	int pidfd, fd;
	struct event *ev_rd, *ev_tick, *ev_exit;
	char line[TAR_LINE_MAX];
	size_t nline;
	int started, ending, eof, exited, wstatus, rd_on;
	struct xd_share share;          /* of reply_total_bytes */
	int64_t start_ms;
	void (*done)(void *);
	void *arg;
	char who[96];
};

static void
tg_reap(struct tar_get *g)
{
	int st;

	if (g->pid <= 0)
		return;
	if (!g->exited) {
		(void)kill(g->pid, SIGKILL);
		while (waitpid(g->pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	g->pid = 0;
}

static void
tg_free(struct tar_get *g)
{
	tg_reap(g);
	if (g->ev_rd != NULL)
		event_free(g->ev_rd);
	if (g->ev_tick != NULL)
		event_free(g->ev_tick);
	if (g->ev_exit != NULL)
		event_free(g->ev_exit);
	if (g->fd >= 0)
		close(g->fd);
	if (g->pidfd >= 0)
		close(g->pidfd);
	g->xd->reply_queued -= g->share.queued;
	free(g);
}

static void
tg_end_later(evutil_socket_t fd, short what, void *arg)
{
	struct tar_get *g = arg;

	(void)fd;
	(void)what;
	if (g->started)
		evhttp_send_reply_end(g->req);
	g->done(g->arg);
	tg_free(g);
}

/* ok: the last chunk; else the connection is shut (a cut answer). */
static void
tg_finish(struct tar_get *g, int ok)
{
	struct evhttp_connection *evcon = g->evcon;

	if (g->ending)
		return;
	g->ending = 1;
	if (g->ev_rd != NULL)
		event_del(g->ev_rd);
	if (g->ev_tick != NULL)
		event_del(g->ev_tick);
	if (g->ev_exit != NULL)
		event_del(g->ev_exit);
	if (evcon != NULL) {
		xd_conn_release(evcon, !ok);
		g->evcon = NULL;
	}
	if (event_base_once(g->xd->base, -1, EV_TIMEOUT, tg_end_later, g,
	    NULL) != 0)
		xd_log(XD_LOG_WARN, "archive: cannot end an answer");
}

static void tg_pump(struct tar_get *g);

static void
tg_closed(struct evhttp_connection *evcon, void *arg)
{
	struct tar_get *g = arg;

	(void)evcon;
	g->evcon = NULL;
	tg_finish(g, 0);
}

static void
tg_drained(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	tg_pump(arg);
}

static void
tg_event(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	tg_pump(arg);
}

static void
tg_exit(evutil_socket_t fd, short what, void *arg)
{
	struct tar_get *g = arg;

	(void)fd;
	(void)what;
	if (waitpid(g->pid, &g->wstatus, WNOHANG) == g->pid)
		g->exited = 1;
	tg_pump(g);
}

/* Before the answer: the helper's line.  1: answered or started. */
static void
tg_line(struct tar_get *g)
{
	char *nl;
	ssize_t n;
	json_t *j;
	struct evkeyvalq *oh;

	n = read(g->fd, g->line + g->nline, sizeof(g->line) - 1 - g->nline);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		g->nline += (size_t)n;
	g->line[g->nline] = '\0';
	if ((nl = memchr(g->line, '\n', g->nline)) == NULL) {
		if (n > 0 && g->nline < sizeof(g->line) - 1)
			return;
		apireply_error(g->req, 500, "internal", NULL, "the archive "
		    "helper said nothing");
		tg_finish(g, 1);
		return;
	}
	*nl = '\0';
	j = json_loads(g->line, 0, NULL);
	if (!json_is_true(json_object_get(j, "ok"))) {
		json_int_t st = json_integer_value(json_object_get(j,
		    "status"));
		const char *m = json_string_value(json_object_get(j, "error"));
		int s = st >= 400 && st < 600 ? (int)st : 500;

		apireply_error(g->req, s, s == 404 ? "not_found" : s == 403 ?
		    "forbidden" : s == 400 ? "bad_request" : "internal", NULL,
		    "%s", m != NULL ? m : "the archive helper failed");
		json_decref(j);
		tg_finish(g, 1);
		return;
	}
	json_decref(j);
	oh = evhttp_request_get_output_headers(g->req);
	evhttp_add_header(oh, "Content-Type", "application/x-tar");
	evhttp_add_header(oh, "Cache-Control", "no-store");
	evhttp_send_reply_start(g->req, 200, util_http_phrase(200));
	g->started = 1;
	g->share.moved_ms = sbx_now_ms();
	if ((g->evcon = evhttp_request_get_connection(g->req)) != NULL)
		evhttp_connection_set_closecb(g->evcon, tg_closed, g);
	/* what came after the line */
	n = (ssize_t)(g->line + g->nline - (nl + 1));
	if (n > 0) {
		struct evbuffer *b = evbuffer_new();

		if (b != NULL) {
			evbuffer_add(b, nl + 1, (size_t)n);
			xd_share_send(g->xd, &g->share, g->req, b, tg_drained,
			    g);
			evbuffer_free(b);
		}
	}
}

static void
tg_pump(struct tar_get *g)
{
	struct timeval tv = { 0, TAR_TICK_MS * 1000 };
	size_t q, room;
	struct evbuffer *b;
	ssize_t r;
	char *p;

	if (g->ending)
		return;
	if (!g->started) {
		tg_line(g);
		if (g->ending)
			return;
		if (!g->started) {
			if (g->exited || sbx_now_ms() - g->start_ms >
			    TAR_START_MS) {
				apireply_error(g->req, 500, "internal", NULL,
				    "the archive helper did not start");
				tg_finish(g, 1);
				return;
			}
			evtimer_add(g->ev_tick, &tv);
			return;
		}
	}
	if (g->evcon == NULL) {
		tg_finish(g, 0);
		return;
	}
	q = xd_conn_queued(g->evcon);
	xd_share_seen(g->xd, &g->share, q);
	if (q == 0)
		g->share.moved_ms = sbx_now_ms();  /* waiting for the helper */
	if (g->eof && !g->exited && g->pidfd < 0) {
		/* no pidfd: the helper is at its exit once its pipe ended */
		while (waitpid(g->pid, &g->wstatus, 0) < 0 && errno == EINTR)
			;
		g->exited = 1;
	}
	if (g->eof) {
		if (g->exited) {
			tg_finish(g, WIFEXITED(g->wstatus) &&
			    WEXITSTATUS(g->wstatus) == 0);
			return;
		}
	} else if ((room = xd_share_room(g->xd, q)) > 0) {
		if (room > TAR_READ_MAX)
			room = TAR_READ_MAX;
		if ((p = malloc(room)) != NULL) {
			r = read(g->fd, p, room);
			if (r == 0)
				g->eof = 1;
			else if (r < 0 && errno != EAGAIN && errno != EINTR)
				g->eof = 1;
			else if (r > 0 && (b = evbuffer_new()) != NULL) {
				evbuffer_add(b, p, (size_t)r);
				xd_share_send(g->xd, &g->share, g->req, b,
				    tg_drained, g);
				evbuffer_free(b);
			}
			free(p);
		}
		if (!g->eof && !g->rd_on) {
			event_add(g->ev_rd, NULL);
			g->rd_on = 1;
		}
	} else if (g->rd_on) {
		/* the client is behind: the helper waits on its pipe */
		event_del(g->ev_rd);
		g->rd_on = 0;
	}
	if (g->eof && g->rd_on) {
		event_del(g->ev_rd);
		g->rd_on = 0;
	}
	if (xd_share_stalled(g->xd, &g->share)) {
		xd_log(XD_LOG_INFO, "%s: archive: a client that read nothing "
		    "for reply_timeout_ms dropped", g->who);
		tg_finish(g, 0);
		return;
	}
	evtimer_add(g->ev_tick, &tv);
}

int
xd_tar_get(struct xd *xd, struct evhttp_request *req, struct xd_box *b,
    const char *dir, const char *who, void (*done)(void *), void *arg,
    struct xd_perr *e)
{
	const char *args[] = { "--tar-helper", "get", NULL, NULL };
	char norm[SBX_PATH_MAX];
	struct tar_get *g;
	int wfd, p[2] = { -1, -1 };

	if (xd_tar_dir_parse(dir, norm, sizeof(norm), e) != 0)
		return -1;
	args[2] = norm;
	if ((g = calloc(1, sizeof(*g))) == NULL)
		goto nomem;
	g->xd = xd;
	g->req = req;
	g->fd = g->pidfd = -1;
	g->done = done;
	g->arg = arg;
	g->start_ms = sbx_now_ms();
	snprintf(g->who, sizeof(g->who), "%s", who);
	if ((wfd = open(b->rec.workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0) {
		free(g);
		return xd_perr_set(e, 500, "internal", "the workspace: %s",
		    strerror(errno));
	}
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0 ||
	    fcntl(p[1], F_SETFL, 0) != 0 ||     /* the helper's end blocks */
	    xd_arch_helper_spawn(&b->rec, -1, wfd, p[1], args, &g->pid) != 0) {
		util_close_pair(p);
		close(wfd);
		free(g);
		return xd_perr_set(e, 503, "backend_unavailable",
		    "the archive helper does not start");
	}
	close(wfd);
	close(p[1]);
	g->fd = p[0];
	g->pidfd = (int)syscall(SYS_pidfd_open, g->pid, 0);
	if ((g->ev_rd = event_new(xd->base, g->fd, EV_READ | EV_PERSIST,
	    tg_event, g)) == NULL || (g->ev_tick = evtimer_new(xd->base,
	    tg_event, g)) == NULL || (g->pidfd >= 0 && (g->ev_exit =
	    event_new(xd->base, g->pidfd, EV_READ, tg_exit, g)) == NULL)) {
		tg_free(g);
		goto nomem;
	}
	if (g->ev_exit != NULL)
		event_add(g->ev_exit, NULL);
	event_add(g->ev_rd, NULL);
	g->rd_on = 1;
	tg_pump(g);
	return 0;
nomem:
	return xd_perr_set(e, 500, "internal", "out of memory");
}
