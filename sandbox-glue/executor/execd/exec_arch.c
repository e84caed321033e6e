/*
 * exec_arch.c: a sandbox's workspace as an archive, written before the
 * sandbox is removed (by age or by DELETE) and restored by the next
 * create of the same id.  Blocking: it runs in the create and delete
 * workers only.
 *
 * <archive_dir>/<id>.<sha12>.tar.zst is a pax tar compressed with zstd,
 * named by the start of its SHA-256; <archive_dir>/<id>.json says whose
 * it is (tenant, user), when and why it was made, the file ("file"), its
 * size and its SHA-256.  The commit: the tar is written under a
 * temporary name, synced and renamed to its own name, the JSON written,
 * synced and renamed over the old one (that rename is the commit), the
 * directory synced, and only then the previous archive's file removed:
 * a failure or a crash anywhere leaves the previous archive whole (the
 * workspace is removed after this returns).  An archive of before
 * ("file": "tar.zst") is <id>.tar.zst, still read.  A restore reads the
 * archive through one descriptor: the digest of what it reads must be
 * the one the metadata names, else it is refused as corrupt, before a
 * byte is extracted.
 *
 * Writing: after the sandbox is destroyed, so nothing inside moves;
 * the tree is walked through directory descriptors, no link followed,
 * not leaving the workspace's file system; regular files, directories
 * and symbolic links are kept (the links as links, a file's further hard
 * links as hard link entries, a sparse file's holes as holes: neither
 * is read twice or at all), nothing else (fifos, sockets, devices), and
 * lost+found, the file system's own, is left out.  What is not kept is
 * named in the metadata's "skipped" (with why); more bytes read than the
 * workspace's size fails the archive.  Names are kept as bytes
 * (hdrcharset=BINARY): the daemon runs in the C locale.
 *
 * Restoring: into the new, empty workspace before the sandbox starts,
 * in a child that has become the sandbox's host uid and gid (no group,
 * no capability) and then exec'd sluice-execd --restore-helper (the
 * archive on its stdin, the result on its stdout, the workspace its
 * cwd, no environment): what parses the archive the sandbox shaped holds
 * no copy of the daemon's memory (the TLS key, the tokens' digests) and
 * no descriptor of it.  The kernel's permissions and the workspace's own
 * quota (a loop-mounted ext4 of disk_bytes and inodes) bound what it
 * can write, wherever a hostile archive points.  On top of that each
 * entry is checked: a name that is absolute, holds "..", or is empty is
 * skipped; only files, directories and symbolic links are made, and
 * hard links to a regular file made earlier from the same archive
 * (device, fifo or socket entries and other hard links are skipped); a
 * symbolic link is kept whatever its target (relative and climbing out,
 * or absolute, as a venv's bin/python -> ../../../usr/bin/python3 or
 * /usr/bin/python3): nothing follows it, as the restore writes through
 * no link (ARCHIVE_EXTRACT_SECURE_SYMLINKS) and the host resolves paths
 * in a workspace with RESOLVE_IN_ROOT; modes lose their setuid, setgid
 * and sticky bits.  What was skipped is named in the result (names cut
 * to valid UTF-8).  The parent reads the child's result to its end
 * (what passes ARCH_RESULT_MAX is drained, not kept), then waits; a
 * child that takes ARCH_RESTORE_S is killed and the restore fails.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <search.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

#define ARCH_DEPTH_MAX	128
#define ARCH_SKIPPED_MAX 100    /* named in the result; the rest counted */
#define ARCH_NAME_MAX	256     /* bytes of a skipped name named */
#define ARCH_META_MAX	(256 * 1024)    /* 100 skipped names fit */
#define ARCH_RESULT_MAX	(256 * 1024)    /* of the child's result kept */
#define ARCH_RESTORE_S	600     /* a restore's child is killed after */
#define ARCH_ZERO_MAX	(1ul << 30)     /* of a hole handed over at once */
#define ARCH_SPARSE_MAX	(1 << 20)       /* data extents of a file mapped */
/* a store's file no metadata names, removed after (another host may be
 * between its tar's upload and its metadata's) */
#define ARCH_ORPHAN_S_STORE	3600
#define ARCH_STR2(x)	#x
#define ARCH_STR(x)	ARCH_STR2(x)

/* The writes the workspace's quota (or the archive's disk) refused. */
static int
full(int e)
{
	return e == ENOSPC || e == EDQUOT;
}

/* s in out as at most max - 1 bytes of valid UTF-8 (max >= 8): an
 * invalid byte (and a control character, which JSON would make six)
 * becomes '?', a longer name is cut and ends in "...".  Names go into
 * JSON, which takes nothing else. */
static const char *
utf8_clip(const char *s, char *out, size_t max)
{
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	size_t i = 0, o = 0, n, k;
	uint32_t cp;

	while (u[i] != '\0') {
		if (u[i] < 0x20 || u[i] == 0x7f)
			n = 0, cp = 0;
		else if (u[i] < 0x80)
			n = 1, cp = u[i];
		else if (u[i] >= 0xc2 && u[i] <= 0xdf)
			n = 2, cp = u[i] & 0x1f;
		else if (u[i] >= 0xe0 && u[i] <= 0xef)
			n = 3, cp = u[i] & 0x0f;
		else if (u[i] >= 0xf0 && u[i] <= 0xf4)
			n = 4, cp = u[i] & 0x07;
		else
			n = 0, cp = 0;
		for (k = 1; k < n; k++) {
			if ((u[i + k] & 0xc0) != 0x80) {
				n = 0;  /* stops at the NUL too */
				break;
			}
			cp = cp << 6 | (u[i + k] & 0x3f);
		}
		/* overlong, a surrogate, past U+10FFFF */
		if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
		    || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
			n = 0;
		if (o + (n ? n : 1) + 4 > max) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (n == 0) {
			out[o++] = '?';
			i++;
		} else {
			memcpy(out + o, u + i, n);
			o += n;
			i += n;
		}
	}
	out[o] = '\0';
	return out;
}

/* A name kept in a list of what was skipped: {path, why}, at most
 * ARCH_SKIPPED_MAX named, all counted. */
static void
skip_note(json_t *list, uint64_t *count, const char *path, const char *why)
{
	char p[ARCH_NAME_MAX], w[ARCH_NAME_MAX];

	if ((*count)++ < ARCH_SKIPPED_MAX && list != NULL)
		json_array_append_new(list, json_pack("{s:s,s:s}", "path",
		    utf8_clip(path, p, sizeof(p)), "why", utf8_clip(why, w,
		    sizeof(w))));
}

static int
arch_path(const struct xd_cfg *c, const char *id, const char *ext, char *out,
    size_t len)
{
	if (!sbx_id_ok(id, SBX_ID_MAX) || snprintf(out, len, "%s/%s%s",
	    c->archive_dir, id, ext) >= (int)len)
		return -1;
	return 0;
}

/* The archive file id's metadata m names: "<id>.<12 hex>.tar.zst", or
 * the old "tar.zst" (<id>.tar.zst); anything else -1. */
static int
arch_file(const struct xd_cfg *c, const char *id, json_t *m, char *out,
    size_t len)
{
	const char *f = json_string_value(json_object_get(m, "file"));
	size_t n = strlen(id), i;

	if (f == NULL || strcmp(f, "tar.zst") == 0)
		return arch_path(c, id, ".tar.zst", out, len);
	if (strlen(f) != n + 1 + 12 + 8 || strncmp(f, id, n) != 0 ||
	    f[n] != '.' || strcmp(f + n + 13, ".tar.zst") != 0)
		return -1;
	for (i = n + 1; i < n + 13; i++)
		if (!((f[i] >= '0' && f[i] <= '9') || (f[i] >= 'a' &&
		    f[i] <= 'f')))
			return -1;
	return arch_path(c, id, f + n, out, len);
}

/* Sync a directory: the renames in it are on disk. */
static int
dir_sync(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

int
xd_arch_dir_check(const struct xd_cfg *c, char *err, size_t len)
{
	struct stat st;

	/* made 0700 by the first archive */
	if (stat(c->archive_dir, &st) != 0)
		return errno == ENOENT ? 0 : errf(err, len, "lifecycle."
		    "archive_dir %.300s: %s", c->archive_dir, strerror(errno));
	/* who may write in it may swap one sandbox's archive for another's
	 * (the metadata names its tenant and user, the digest only binds the
	 * two together) */
	if (!S_ISDIR(st.st_mode))
		return errf(err, len, "lifecycle.archive_dir %.300s: not a "
		    "directory", c->archive_dir);
	if (st.st_uid != geteuid() || (st.st_mode & 022) != 0)
		return errf(err, len, "lifecycle.archive_dir %.300s: owned by "
		    "uid %u, mode %04o: it must be the daemon's (uid %u) and "
		    "writable by no group or other", c->archive_dir,
		    (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
		    (unsigned)geteuid());
	return 0;
}

static void
hex32(const unsigned char d[32], char out[65])
{
	static const char h[] = "0123456789abcdef";
	int i;

	for (i = 0; i < 32; i++) {
		out[2 * i] = h[d[i] >> 4];
		out[2 * i + 1] = h[d[i] & 15];
	}
	out[64] = '\0';
}

/* SHA-256 of what fd holds from its start, its size in *n; the offset
 * left at 0. */
static int
fd_sha256(int fd, char hex[65], uint64_t *n)
{
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	unsigned char buf[65536], d[32];
	unsigned int dl = 32;
	ssize_t r;
	int rc = -1;

	*n = 0;
	if (m == NULL || EVP_DigestInit_ex(m, EVP_sha256(), NULL) != 1 ||
	    lseek(fd, 0, SEEK_SET) != 0)
		goto out;
	while ((r = read(fd, buf, sizeof(buf))) > 0) {
		if (EVP_DigestUpdate(m, buf, (size_t)r) != 1)
			goto out;
		*n += (uint64_t)r;
	}
	if (r < 0 || EVP_DigestFinal_ex(m, d, &dl) != 1 ||
	    lseek(fd, 0, SEEK_SET) != 0)
		goto out;
	hex32(d, hex);
	rc = 0;
out:
	EVP_MD_CTX_free(m);
	return rc;
}

/* ---- writing ---- */

/* An inode with more links, as first archived. */
struct wr_ino {
	dev_t dev;
	ino_t ino;
	char path[];
};

struct wr {
	struct archive *a;
	struct archive_entry *e;
	dev_t dev;                      /* the workspace's file system */
	uint64_t files, bytes;
	uint64_t cap, read;             /* bytes read: at most cap */
	void *inos;                     /* tsearch of struct wr_ino */
	json_t *skipped;
	uint64_t nskip;
	const char *zeros;              /* ARCH_ZERO_MAX bytes, for holes */
	char buf[65536], link[4096];    /* off the stack of the recursion */
	char err[XD_ERR_MAX];
};

static int
ino_cmp(const void *a, const void *b)
{
	const struct wr_ino *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static int
wr_fail(struct wr *w, const char *what, const char *path)
{
	char p[ARCH_NAME_MAX];

	snprintf(w->err, sizeof(w->err), "%s %s: %s", what, utf8_clip(path,
	    p, sizeof(p)), w->a != NULL && archive_error_string(w->a) !=
	    NULL ? archive_error_string(w->a) : strerror(errno));
	return -1;
}

static void
wr_skip(struct wr *w, const char *path, const char *why, int e)
{
	char m[160];

	if (e != 0) {
		snprintf(m, sizeof(m), "%s: %s", why, strerror(e));
		why = m;
	}
	skip_note(w->skipped, &w->nskip, path, why);
}

/* The entry's header; the caller has set its sparse map, if any.
 * hard: an earlier entry of the same inode. */
static int
wr_head(struct wr *w, const char *path, const struct stat *st,
    const char *link, const char *hard, void (*map)(struct wr *, void *),
    void *arg)
{
	archive_entry_clear(w->e);
	archive_entry_set_pathname(w->e, path);
	archive_entry_set_mode(w->e, st->st_mode & (S_IFMT | 07777));
	archive_entry_set_mtime(w->e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	archive_entry_set_size(w->e, S_ISREG(st->st_mode) && hard == NULL ?
	    st->st_size : 0);
	if (link != NULL)
		archive_entry_set_symlink(w->e, link);
	if (hard != NULL)
		archive_entry_set_hardlink(w->e, hard);
	if (map != NULL)
		map(w, arg);
	/* ARCHIVE_WARN: written, with a note (hdrcharset=BINARY makes a
	 * name that is no UTF-8 in this locale none) */
	if (archive_write_header(w->a, w->e) < ARCHIVE_WARN)
		return wr_fail(w, "archive", path);
	return 0;
}

struct wr_ext {
	off_t off, len;
};

struct wr_map {
	struct wr_ext *x;
	size_t n, max;
	off_t size;
	uint64_t data;                  /* bytes in the extents */
};

static void
wr_map_set(struct wr *w, void *arg)
{
	struct wr_map *m = arg;
	size_t i;

	for (i = 0; i < m->n; i++)
		archive_entry_sparse_add_entry(w->e, m->x[i].off, m->x[i].len);
	/* a hole to the end (or all hole): an empty extent at the end */
	if (m->n == 0 || m->x[m->n - 1].off + m->x[m->n - 1].len < m->size)
		archive_entry_sparse_add_entry(w->e, m->size, 0);
}

/* The data extents of fd (size bytes) in m: holes are neither read nor
 * stored (the extents of a file are at most its blocks, which the
 * workspace's size bounds).  Past ARCH_SPARSE_MAX, or out of memory,
 * the last extent runs to the end (what it covers is read, holes as
 * zeros, and counted); no SEEK_DATA: one extent. */
static void
wr_extents(int fd, off_t size, struct wr_map *m)
{
	off_t off = 0, d, h;
	size_t i;

	m->n = 0;
	m->size = size;
	m->data = 0;
	while (off < size) {
		if ((d = lseek(fd, off, SEEK_DATA)) < 0) {
			if (errno == ENXIO)
				break;  /* a hole to the end */
			d = off;        /* not told: all data */
			h = size;
		} else if ((h = lseek(fd, d, SEEK_HOLE)) < 0 || h > size)
			h = size;
		if (d >= size)
			break;
		if (m->n == m->max) {
			struct wr_ext *x = NULL;

			if (m->max < ARCH_SPARSE_MAX)
				x = realloc(m->x, 2 * m->max * sizeof(*x));
			if (x == NULL) {
				m->x[m->n - 1].len = size - m->x[m->n - 1].off;
				break;
			}
			m->x = x;
			m->max *= 2;
		}
		m->x[m->n].off = d;
		m->x[m->n].len = h - d;
		m->n++;
		off = h;
	}
	for (i = 0; i < m->n; i++)
		m->data += (uint64_t)m->x[i].len;
}

/* Hand the writer len zero bytes: a hole (not written) or what a file
 * that shrank or failed to read no longer gives. */
static int
wr_zeros(struct wr *w, uint64_t len, const char *path)
{
	while (len > 0) {
		size_t n = len < ARCH_ZERO_MAX ? (size_t)len : ARCH_ZERO_MAX;

		if (archive_write_data(w->a, w->zeros, n) < 0)
			return wr_fail(w, "archive", path);
		len -= n;
	}
	return 0;
}

/* A regular file open at fd, its further links as hard links. */
static int
wr_file(struct wr *w, int fd, const char *path, const struct stat *st)
{
	struct wr_map *m;
	struct wr_ino k, *in = NULL, **f;
	off_t at = 0;
	int rc = -1, bad = 0;
	size_t i;

	if (st->st_nlink > 1) {
		k.dev = st->st_dev;
		k.ino = st->st_ino;
		if ((f = tfind(&k, &w->inos, ino_cmp)) != NULL) {
			if (wr_head(w, path, st, NULL, (*f)->path, NULL, NULL)
			    != 0)
				return -1;
			w->files++;
			return 0;
		}
	}
	if ((m = calloc(1, sizeof(*m))) == NULL || (m->x = malloc(64 *
	    sizeof(*m->x))) == NULL) {
		free(m);
		return wr_fail(w, "archive", path);
	}
	m->max = 64;
	wr_extents(fd, st->st_size, m);
	/* the workspace holds no more than its size: more read means it is
	 * not what it seems (or not ours); refused, not cut */
	if (m->data > w->cap - w->read) {
		snprintf(w->err, sizeof(w->err), "the workspace holds more "
		    "than its size (%llu bytes) to read: not archived",
		    (unsigned long long)w->cap);
		goto out;
	}
	w->read += m->data;
	if (wr_head(w, path, st, NULL, NULL, m->n == 1 && m->x[0].off == 0 &&
	    m->x[0].len == st->st_size ? NULL : wr_map_set, m) != 0)
		goto out;
	/* the size in the header is what is written: what a file no longer
	 * gives is zeros, and named */
	for (i = 0; i < m->n; i++) {
		off_t end = m->x[i].off + m->x[i].len;

		if (wr_zeros(w, (uint64_t)(m->x[i].off - at), path) != 0)
			goto out;
		for (at = m->x[i].off; at < end && !bad; ) {
			size_t want = end - at < (off_t)sizeof(w->buf) ?
			    (size_t)(end - at) : sizeof(w->buf);
			ssize_t n = pread(fd, w->buf, want, at);

			if (n <= 0) {
				wr_skip(w, path, n < 0 ? "read error, the rest "
				    "kept as zeros" : "shorter than its size, "
				    "the rest kept as zeros", n < 0 ? errno : 0);
				bad = 1;
				break;
			}
			if (archive_write_data(w->a, w->buf, (size_t)n) < 0) {
				wr_fail(w, "archive", path);
				goto out;
			}
			at += n;
		}
		if (bad)
			break;
	}
	if (wr_zeros(w, (uint64_t)(st->st_size - at), path) != 0)
		goto out;
	if (st->st_nlink > 1 && (in = malloc(sizeof(*in) + strlen(path) +
	    1)) != NULL) {
		in->dev = st->st_dev;
		in->ino = st->st_ino;
		strcpy(in->path, path);
		if (tsearch(in, &w->inos, ino_cmp) == NULL)
			free(in);       /* its links read again: no harm */
	}
	w->files++;
	w->bytes += (uint64_t)st->st_size;
	rc = 0;
out:
	free(m->x);
	free(m);
	return rc;
}

/* The directory open at dfd, as prefix ("" the top).  Closes dfd. */
static int
wr_dir(struct wr *w, int dfd, const char *prefix, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int rc = 0;

	if (d == NULL) {
		close(dfd);
		return wr_fail(w, "open", prefix);
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		char path[4096];
		struct stat st;
		ssize_t n;
		int fd;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") ==
		    0 || (depth == 0 && strcmp(de->d_name, "lost+found") == 0))
			continue;
		if (snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ?
		    "/" : "", de->d_name) >= (int)sizeof(path)) {
			wr_skip(w, path, "name of 4096 bytes or more", 0);
			continue;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) !=
		    0) {
			wr_skip(w, path, "stat", errno);
			continue;
		}
		if (st.st_dev != w->dev) {
			wr_skip(w, path, "another file system", 0);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (depth >= ARCH_DEPTH_MAX) {
				wr_skip(w, path, "deeper than 128 directories",
				    0);
				continue;
			}
			if ((fd = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
				wr_skip(w, path, "open", errno);
				continue;
			}
			if (wr_head(w, path, &st, NULL, NULL, NULL, NULL) != 0) {
				close(fd);
				rc = -1;
				break;
			}
			rc = wr_dir(w, fd, path, depth + 1);
		} else if (S_ISLNK(st.st_mode)) {
			n = readlinkat(dirfd(d), de->d_name, w->link,
			    sizeof(w->link) - 1);
			if (n < 0) {
				wr_skip(w, path, "readlink", errno);
				continue;
			}
			w->link[n] = '\0';
			rc = wr_head(w, path, &st, w->link, NULL, NULL, NULL);
		} else if (S_ISREG(st.st_mode)) {
			/* no fifo swapped in blocks the open, the read leaves
			 * the atime be */
			if ((fd = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_NONBLOCK | O_NOATIME | O_NOFOLLOW | O_CLOEXEC)) <
			    0 && errno == EPERM)
				fd = openat(dirfd(d), de->d_name, O_RDONLY |
				    O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0) {
				wr_skip(w, path, "open", errno);
				continue;
			}
			if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
			    st.st_dev != w->dev) {
				wr_skip(w, path, "changed while read", 0);
				close(fd);
				continue;
			}
			rc = wr_file(w, fd, path, &st);
			close(fd);
		} else
			wr_skip(w, path, "not a file, directory or link", 0);
	}
	closedir(d);
	return rc;
}

/* m as path, durably: a temporary file synced, renamed over path, the
 * directory synced.  The rename is the commit. */
static int
meta_save(const char *dir, const char *path, json_t *m)
{
	char tmp[SBX_PATH_MAX + 96], *s = json_dumps(m, JSON_COMPACT);
	size_t n, off = 0;
	ssize_t k;
	int fd = -1, rc = -1;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (s == NULL || (fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC |
	    O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		goto out;
	for (n = strlen(s); off < n; off += (size_t)k)
		if ((k = write(fd, s + off, n - off)) <= 0)
			goto out;
	if (fsync(fd) != 0 || close(fd) != 0) {
		fd = -1;
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) != 0)
		goto out;
	rc = dir_sync(dir);
out:
	if (fd >= 0)
		close(fd);
	if (rc != 0)
		(void)unlink(tmp);
	free(s);
	return rc;
}

/* ---- the store (lifecycle.archive_store "s3://"): objects named as
 * the local files are, <key>.json (the commit) beside
 * <key>.<sha12>.tar.zst, under the prefix; key is xd_key(tenant, id),
 * so a tenant's archive of an id is one name for every host ---- */

static json_t *
store_meta(const struct xd_cfg *c, const char *ak, int *rc, char *err,
    size_t len)
{
	char name[SBX_ID_MAX + 8], *b;
	size_t n;
	json_t *m;

	snprintf(name, sizeof(name), "%s.json", ak);
	if ((b = xd_s3_get_mem(&c->s3, name, ARCH_META_MAX, &n, rc, err,
	    len)) == NULL)
		return NULL;
	m = json_loadb(b, n, 0, NULL);
	free(b);
	if (m == NULL || !json_is_string(json_object_get(m, "sha256")) ||
	    !json_is_string(json_object_get(m, "tenant")) ||
	    !json_is_string(json_object_get(m, "user")) ||
	    !json_is_string(json_object_get(m, "file"))) {
		json_decref(m);
		*rc = -1;
		errf(err, len, "the store's metadata of %s does not read", ak);
		return NULL;
	}
	return m;
}

/* The store's name of the archive file m names ("<key>.<12 hex>
 * .tar.zst"): 0, -1 not one. */
static int
store_file(const struct xd_cfg *c, const char *ak, json_t *m, char *out,
    size_t len)
{
	char f[SBX_PATH_MAX + 80];

	if (arch_file(c, ak, m, f, sizeof(f)) != 0)
		return -1;
	snprintf(out, len, "%s", strrchr(f, '/') + 1);
	return 0;
}

static int
store_push(const struct xd_cfg *c, const char *ak, const char *tar,
    json_t *m, char *err, size_t len)
{
	char name[SBX_ID_MAX + 8], file[SBX_ID_MAX + 32], pf[SBX_ID_MAX + 32];
	char *s = NULL;
	json_t *prev;
	int rc, fd, had = 0;

	/* the archive of before, whose file goes once this one is in */
	prev = store_meta(c, ak, &rc, err, len);
	if (rc < 0 && prev == NULL && strstr(err, "does not read") == NULL)
		return -1;
	had = prev != NULL && store_file(c, ak, prev, pf, sizeof(pf)) == 0;
	json_decref(prev);
	if (store_file(c, ak, m, file, sizeof(file)) != 0)
		return errf(err, len, "the archive's name does not read");
	if ((fd = open(tar, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errf(err, len, "%.300s: %s", tar, strerror(errno));
	rc = xd_s3_put_file(&c->s3, file, fd, err, len);
	close(fd);
	if (rc != 0)
		return -1;
	snprintf(name, sizeof(name), "%s.json", ak);
	/* the metadata last: it is the commit, on every host */
	if ((s = json_dumps(m, JSON_COMPACT)) == NULL ||
	    xd_s3_put_mem(&c->s3, name, s, strlen(s), err, len) != 0) {
		char e2[XD_ERR_MAX];

		if (s == NULL)
			errf(err, len, "out of memory");
		if (!had || strcmp(pf, file) != 0)
			if (xd_s3_delete(&c->s3, file, e2, sizeof(e2)) != 0)
				xd_log(XD_LOG_WARN, "archive %s: the store's "
				    "file %s stays (the orphans' sweep takes it)",
				    ak, file);
		free(s);
		return -1;
	}
	free(s);
	if (had && strcmp(pf, file) != 0) {
		char e2[XD_ERR_MAX];

		/* left behind, the orphans' sweep takes it */
		if (xd_s3_delete(&c->s3, pf, e2, sizeof(e2)) != 0)
			xd_log(XD_LOG_WARN, "archive %s: the store's older file "
			    "stays: %s", ak, e2);
	}
	return 0;
}

int
xd_arch_fetch(const struct xd_cfg *c, const char *ak, int *found,
    char *err, size_t len)
{
	char file[SBX_ID_MAX + 32], tar[SBX_PATH_MAX + 80];
	char tmp[SBX_PATH_MAX + 90], mp[SBX_PATH_MAX + 80];
	json_t *m;
	int rc, fd;
	uint64_t max;

	*found = 0;
	/* the store's copy is the archive: a local one of an earlier fetch
	 * may be one another host has restored and removed since */
	xd_arch_discard(c, ak);
	if ((m = store_meta(c, ak, &rc, err, len)) == NULL)
		return rc == 1 ? 0 : -1;
	max = (uint64_t)json_integer_value(json_object_get(m, "bytes"));
	if (store_file(c, ak, m, file, sizeof(file)) != 0 ||
	    arch_path(c, ak, file + strlen(ak), tar, sizeof(tar)) != 0 ||
	    arch_path(c, ak, ".json", mp, sizeof(mp)) != 0) {
		json_decref(m);
		return errf(err, len, "the store's metadata of %s names no "
		    "archive file", ak);
	}
	if (util_mkdir_p(c->archive_dir, 0700) != 0) {
		json_decref(m);
		return errf(err, len, "%.300s: %s", c->archive_dir,
		    strerror(errno));
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", tar);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0) {
		json_decref(m);
		return errf(err, len, "%.300s: %s", tmp, strerror(errno));
	}
	/* the digest is checked by the restore, as a local archive's; a
	 * file the metadata names and the store lacks is the metadata
	 * alone here, which the restore refuses as a missing archive (409
	 * corrupt, as a local one: ?archive=discard drops it) */
	rc = xd_s3_get_fd(&c->s3, file, fd, max, err, len);
	if (rc == 1)
		rc = meta_save(c->archive_dir, mp, m) != 0 ? errf(err, len,
		    "%.300s: cannot write", mp) : 0;
	else if (rc == 0 && (fsync(fd) != 0 || rename(tmp, tar) != 0 ||
	    meta_save(c->archive_dir, mp, m) != 0))
		rc = errf(err, len, "%.300s: cannot write", tar);
	(void)unlink(tmp);
	close(fd);
	json_decref(m);
	if (rc != 0) {
		(void)unlink(tmp);
		xd_arch_discard(c, ak);
		return -1;
	}
	*found = 1;
	return 0;
}

int
xd_arch_drop(const struct xd_cfg *c, const char *ak, const char *sha,
    char *err, size_t len)
{
	char name[SBX_ID_MAX + 8], file[SBX_ID_MAX + 32];
	json_t *m;
	int rc;

	xd_arch_discard(c, ak);
	if (c->s3.url[0] == '\0')
		return 0;
	if ((m = store_meta(c, ak, &rc, err, len)) == NULL)
		return rc == 1 ? 0 : -1;
	/* another host archived the id anew since: that one stays */
	if (sha != NULL && strcmp(sha, json_string_value(json_object_get(m,
	    "sha256"))) != 0) {
		json_decref(m);
		return 0;
	}
	rc = store_file(c, ak, m, file, sizeof(file));
	json_decref(m);
	snprintf(name, sizeof(name), "%s.json", ak);
	/* the metadata first: without it there is no archive */
	if (xd_s3_delete(&c->s3, name, err, len) != 0)
		return -1;
	if (rc == 0 && xd_s3_delete(&c->s3, file, err, len) != 0)
		xd_log(XD_LOG_WARN, "archive %s: the store's file stays (the "
		    "orphans' sweep takes it): %s", ak, err);
	return 0;
}

/* The store's archives as xd_arch_list's entries, and every object
 * ({name, size, mtime}) in *objs: NULL with err. */
static json_t *
store_list(const struct xd_cfg *c, json_t **objs, char *err, size_t len)
{
	json_t *all = xd_s3_list(&c->s3, err, len), *list, *o, *m, *sizes;
	char ak[SBX_ID_MAX + 1], file[SBX_ID_MAX + 32];
	const char *nm;
	size_t i;
	int rc;

	*objs = NULL;
	if (all == NULL)
		return NULL;
	list = json_array();
	sizes = json_object();
	json_array_foreach(all, i, o)
		json_object_set(sizes, json_string_value(json_object_get(o,
		    "name")), json_object_get(o, "size"));
	json_array_foreach(all, i, o) {
		nm = json_string_value(json_object_get(o, "name"));
		if (!xd_json_name_id(nm, ak))
			continue;
		if ((m = store_meta(c, ak, &rc, err, len)) == NULL) {
			if (rc == 1)
				continue;       /* gone meanwhile */
			if (strstr(err, "does not read") == NULL) {
				json_decref(list);
				json_decref(all);
				json_decref(sizes);
				return NULL;
			}
			json_array_append_new(list, json_pack("{s:s,s:s,s:b,"
			    "s:s,s:I}", "id", ak, "key", ak, "corrupt", 1,
			    "tenant", "", "bytes", (json_int_t)0));
			continue;
		}
		if (store_file(c, ak, m, file, sizeof(file)) != 0)
			file[0] = '\0';
		json_array_append_new(list, json_pack("{s:s,s:s,s:O,s:O,s:I,"
		    "s:I,s:s}", "id", json_is_string(json_object_get(m, "id")) ?
		    json_string_value(json_object_get(m, "id")) : ak, "key", ak,
		    "tenant", json_object_get(m, "tenant"), "user",
		    json_object_get(m, "user"), "archived",
		    json_integer_value(json_object_get(m, "archived")), "bytes",
		    json_integer_value(json_object_get(sizes, file)), "file",
		    file));
		json_decref(m);
	}
	json_decref(sizes);
	*objs = all;
	return list;
}

json_t *
xd_arch_store_meta(const struct xd_cfg *c, const char *key, int *rc,
    char *err, size_t len)
{
	return store_meta(c, key, rc, err, len);
}

json_t *
xd_arch_store_list(const struct xd_cfg *c, char *err, size_t len)
{
	json_t *objs, *list = store_list(c, &objs, err, len);

	json_decref(objs);
	return list;
}

/* Objects of the store no committed metadata names (a tar whose
 * metadata's PUT failed, or whose replacement left it), older than
 * ARCH_ORPHAN_S_STORE by their LastModified (none that says no time)
 * and of no live key. */
static void
store_orphans(const struct xd_cfg *c, json_t *objs, json_t *list,
    json_t *live, int64_t now, json_t *out)
{
	json_t *named = json_object(), *o, *a;
	char ak[SBX_ID_MAX + 1], e[XD_ERR_MAX];
	const char *nm;
	size_t i, n;

	json_array_foreach(list, i, a)
		if (json_is_string(json_object_get(a, "file")))
			json_object_set_new(named, json_string_value(
			    json_object_get(a, "file")), json_true());
	json_array_foreach(objs, i, o) {
		nm = json_string_value(json_object_get(o, "name"));
		n = strlen(nm);
		/* <key>.<12 hex>.tar.zst */
		if (n <= 21 || n - 21 > SBX_ID_MAX || strcmp(nm + n - 8,
		    ".tar.zst") != 0 || json_object_get(named, nm) != NULL ||
		    json_integer_value(json_object_get(o, "mtime")) < 0 ||
		    json_integer_value(json_object_get(o, "mtime")) >
		    now - ARCH_ORPHAN_S_STORE)
			continue;
		memcpy(ak, nm, n - 21);
		ak[n - 21] = '\0';
		if (json_object_get(live, ak) != NULL)
			continue;
		if (xd_s3_delete(&c->s3, nm, e, sizeof(e)) == 0)
			json_array_append_new(out, json_pack("{s:s,s:s,s:I}",
			    "file", nm, "reason", "orphan", "bytes",
			    json_integer_value(json_object_get(o, "size"))));
	}
	json_decref(named);
}

static void
ino_free(void *p)
{
	free(p);
}

int
xd_arch_write(const struct xd_cfg *c, const struct sbx_rec *r,
    uint64_t disk_bytes, const char *reason, json_t **meta, char *err,
    size_t len)
{
	char tar[SBX_PATH_MAX + 80], tmp[SBX_PATH_MAX + 90], name[32];
	char mp[SBX_PATH_MAX + 80], hex[65], old[SBX_PATH_MAX + 80];
	struct wr *w;
	struct stat st;
	struct statvfs vfs;
	uint64_t size;
	int fd = -1, wfd, rc = -1, bad, had = 0;
	json_t *m = NULL, *prev;
	char ak[SBX_ID_MAX + 1];

	*meta = NULL;
	/* named by tenant and id, whatever the sandbox's host key */
	xd_key(r->tenant, XD_REC_ID(r), ak);
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return errf(err, len, "archive: out of memory");
	if (arch_path(c, ak, ".tar.zst.tmp", tmp, sizeof(tmp)) != 0 ||
	    arch_path(c, ak, ".json", mp, sizeof(mp)) != 0) {
		free(w);
		return errf(err, len, "archive_dir: path too long");
	}
	/* the archive of before, whose file goes once this one is in */
	if ((prev = xd_arch_meta(c, ak, &bad)) != NULL)
		had = arch_file(c, ak, prev, old, sizeof(old)) == 0;
	json_decref(prev);
	if (util_mkdir_p(c->archive_dir, 0700) != 0) {
		errf(err, len, "%.300s: %s", c->archive_dir, strerror(errno));
		free(w);
		return -1;
	}
	if ((wfd = open(r->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0 || fstat(wfd, &st) != 0 ||
	    fstatvfs(wfd, &vfs) != 0) {
		errf(err, len, "workspace %.300s: %s", r->workspace,
		    strerror(errno));
		if (wfd >= 0)
			close(wfd);
		free(w);
		return -1;
	}
	w->dev = st.st_dev;
	/* what may be read: the workspace's size, or without a quota of its
	 * own the file system it is on */
	w->cap = disk_bytes ? disk_bytes : (uint64_t)vfs.f_blocks *
	    vfs.f_frsize;
	w->skipped = json_array();
	w->zeros = mmap(NULL, ARCH_ZERO_MAX, PROT_READ, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (w->zeros == MAP_FAILED) {
		w->zeros = NULL;
		close(wfd);
		wr_fail(w, "archive", "holes");
		goto out;
	}
	if ((fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0) {
		close(wfd);
		wr_fail(w, "open", tmp);
		goto out;
	}
	/* names as the bytes they are: in the C locale a name that is not
	 * ASCII does not translate to UTF-8 */
	if ((w->a = archive_write_new()) == NULL ||
	    (w->e = archive_entry_new()) == NULL ||
	    archive_write_add_filter_zstd(w->a) != ARCHIVE_OK ||
	    archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
	    archive_write_set_options(w->a, "hdrcharset=BINARY") !=
	    ARCHIVE_OK || archive_write_open_fd(w->a, fd) != ARCHIVE_OK) {
		close(wfd);
		wr_fail(w, "archive", tmp);
		goto out;
	}
	if (wr_dir(w, wfd, "", 0) != 0)
		goto out;
	if (archive_write_close(w->a) != ARCHIVE_OK) {
		wr_fail(w, "archive", tmp);
		goto out;
	}
	if (fsync(fd) != 0 || fd_sha256(fd, hex, &size) != 0) {
		wr_fail(w, "write", tmp);
		goto out;
	}
	snprintf(name, sizeof(name), ".%.12s.tar.zst", hex);
	if (arch_path(c, ak, name, tar, sizeof(tar)) != 0 ||
	    rename(tmp, tar) != 0 || dir_sync(c->archive_dir) != 0) {
		wr_fail(w, "rename", tar);
		goto out;
	}
	m = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:s+,s:s,s:I,s:I,s:I,s:I,"
	    "s:O}", "id", XD_REC_ID(r), "key", ak, "tenant", r->tenant,
	    "user", r->user, "archived",
	    (json_int_t)time(NULL), "reason", reason, "file", ak, name,
	    "sha256", hex, "bytes", (json_int_t)size, "files",
	    (json_int_t)w->files, "content_bytes", (json_int_t)w->bytes,
	    "skipped_count", (json_int_t)w->nskip, "skipped", w->skipped);
	if (m == NULL || meta_save(c->archive_dir, mp, m) != 0) {
		json_decref(m);
		m = NULL;
		/* the previous archive stays whole: its file too, should
		 * this one have its name */
		if (!had || strcmp(old, tar) != 0)
			(void)unlink(tar);
		snprintf(w->err, sizeof(w->err), "%.300s: cannot write", mp);
		goto out;
	}
	if (had && strcmp(old, tar) != 0)
		(void)unlink(old);
	/* a store's archive is its copy there: the local one was the way
	 * up (a failed upload leaves nothing here, and the workspace is
	 * kept by the caller for the next try) */
	if (c->s3.url[0] != '\0') {
		char se[XD_ERR_MAX];

		rc = store_push(c, ak, tar, m, se, sizeof(se));
		xd_arch_discard(c, ak);
		if (rc != 0) {
			json_decref(m);
			m = NULL;
			snprintf(w->err, sizeof(w->err), "archive store %.100s: "
			    "%.380s", c->s3.url, se);
			rc = -1;
			goto out;
		}
	}
	*meta = m;
	rc = 0;
out:
	if (w->a != NULL)
		archive_write_free(w->a);
	if (w->e != NULL)
		archive_entry_free(w->e);
	if (fd >= 0)
		close(fd);
	if (w->zeros != NULL)
		munmap((void *)w->zeros, ARCH_ZERO_MAX);
	tdestroy(w->inos, ino_free);
	json_decref(w->skipped);
	if (rc != 0) {
		(void)unlink(tmp);
		snprintf(err, len, "%s", w->err[0] ? w->err : "archive failed");
	}
	free(w);
	return rc;
}

json_t *
xd_arch_meta(const struct xd_cfg *c, const char *id, int *bad)
{
	char mp[SBX_PATH_MAX + 80];
	json_t *m;
	struct stat st;

	*bad = 0;
	if (arch_path(c, id, ".json", mp, sizeof(mp)) != 0 ||
	    lstat(mp, &st) != 0)
		return NULL;
	if (!S_ISREG(st.st_mode) || st.st_size > ARCH_META_MAX ||
	    (m = json_load_file(mp, 0, NULL)) == NULL ||
	    !json_is_string(json_object_get(m, "sha256")) ||
	    !json_is_string(json_object_get(m, "tenant")) ||
	    !json_is_string(json_object_get(m, "user"))) {
		*bad = 1;
		return NULL;
	}
	return m;
}

json_t *
xd_arch_list(const struct xd_cfg *c)
{
	DIR *d = opendir(c->archive_dir);
	struct dirent *de;
	json_t *list = json_array(), *m;
	char id[SBX_ID_MAX + 1], f[SBX_PATH_MAX + 80];
	struct stat st;
	int bad;

	if (d == NULL) {
		if (errno == ENOENT)
			return list;
		json_decref(list);
		return NULL;
	}
	while (list != NULL && (de = readdir(d)) != NULL) {
		/* <id>.json is the commit of id's archive */
		if (!xd_json_name_id(de->d_name, id))
			continue;
		if ((m = xd_arch_meta(c, id, &bad)) == NULL) {
			if (bad)
				json_array_append_new(list, json_pack("{s:s,s:s,"
				    "s:b,s:s,s:I}", "id", id, "key", id, "corrupt",
				    1, "tenant", "", "bytes", (json_int_t)0));
			continue;
		}
		if (arch_file(c, id, m, f, sizeof(f)) != 0 || lstat(f, &st) !=
		    0)
			st.st_size = 0;
		/* id: the API's (of the metadata; before ids were per
		 * tenant, the name's), key: the name's */
		json_array_append_new(list, json_pack("{s:s,s:s,s:O,s:O,s:I,"
		    "s:I,s:s}", "id", json_is_string(json_object_get(m, "id")) ?
		    json_string_value(json_object_get(m, "id")) : id, "key", id,
		    "tenant", json_object_get(m, "tenant"),
		    "user", json_object_get(m, "user"), "archived",
		    json_integer_value(json_object_get(m, "archived")), "bytes",
		    (json_int_t)st.st_size, "file", strrchr(f, '/') != NULL ?
		    strrchr(f, '/') + 1 : f));
		json_decref(m);
	}
	closedir(d);
	return list;
}

/* ---- limits: age, per-tenant quotas, orphans ---- */

struct arch_ent {
	const char *id, *key, *tenant, *user;
	int64_t archived;
	uint64_t bytes;
	int gone;
};

static int
ent_cmp(const void *a, const void *b)
{
	const struct arch_ent *x = a, *y = b;
	int t = strcmp(x->tenant, y->tenant);

	if (t != 0)
		return t;
	if (x->archived != y->archived)
		return x->archived < y->archived ? -1 : 1;
	return strcmp(x->key, y->key);
}

static void
evict(const struct xd_cfg *c, struct arch_ent *e, const char *why,
    json_t *out)
{
	char err[XD_ERR_MAX];

	if (xd_arch_drop(c, e->key, NULL, err, sizeof(err)) != 0) {
		xd_log(XD_LOG_WARN, "archive %s: not evicted (%s): %s", e->key,
		    why, err);
		return;
	}
	e->gone = 1;
	json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s,s:I,s:I}",
	    "id", e->id, "tenant", e->tenant, "user", e->user, "reason", why,
	    "archived", (json_int_t)e->archived, "bytes",
	    (json_int_t)e->bytes));
}

/* Whether name (in archive_dir) is a file some committed metadata
 * names: "<id>.<12 hex>.tar.zst" of <id>.json's "file", or "<id>.tar.zst"
 * of one whose file is the old "tar.zst" (ids may hold dots: both
 * readings are tried).  *live: an id it may be of is in live. */
static int
tar_named(const struct xd_cfg *c, const char *name, json_t *live, int *live_)
{
	char id[SBX_ID_MAX + 1], f[SBX_PATH_MAX + 80];
	size_t n = strlen(name), k;
	json_t *m;
	int bad, named = 0, r;

	*live_ = 0;
	for (r = 0; r < 2 && !named; r++) {
		/* r 0: <id>.tar.zst; r 1: <id>.<12 hex>.tar.zst */
		k = r == 0 ? n - 8 : n >= 8 + 13 ? n - 8 - 13 : 0;
		if (k == 0 || k > SBX_ID_MAX)
			continue;
		memcpy(id, name, k);
		id[k] = '\0';
		if (!sbx_id_ok(id, SBX_ID_MAX))
			continue;
		if (json_object_get(live, id) != NULL)
			*live_ = 1;
		if ((m = xd_arch_meta(c, id, &bad)) == NULL) {
			/* unreadable metadata: whose file it is not known */
			named |= bad;
			continue;
		}
		named = arch_file(c, id, m, f, sizeof(f)) == 0 &&
		    strcmp(strrchr(f, '/') + 1, name) == 0;
		json_decref(m);
	}
	return named;
}

/* Files of the archive dir no committed archive names: a tar without
 * its JSON (a crash between the tar's rename and the JSON's commit, or
 * after the JSON's replacement and before the old tar's removal) and
 * the temporary files of a write that did not end.  Only those older
 * than ARCH_ORPHAN_S (a write under way renames its tar just before its
 * commit) and of no live sandbox (whose delete may be writing). */
#define ARCH_ORPHAN_S	60
static void
sweep_orphans(const struct xd_cfg *c, json_t *live, int64_t now,
    json_t *out)
{
	DIR *d = opendir(c->archive_dir);
	struct dirent *de;
	struct stat st;
	char id[SBX_ID_MAX + 1];
	size_t n, k;
	int isl;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		const char *nm = de->d_name;

		n = strlen(nm);
		if (fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode) || (int64_t)st.st_mtime >
		    now - ARCH_ORPHAN_S)
			continue;
		if (n > 8 && strcmp(nm + n - 8, ".tar.zst") == 0) {
			if (tar_named(c, nm, live, &isl) || isl)
				continue;
		} else if ((n > 12 && strcmp(nm + n - 12, ".tar.zst.tmp") ==
		    0) || (n > 9 && strcmp(nm + n - 9, ".json.tmp") == 0)) {
			k = n - (nm[n - 5] == 'n' ? 9 : 12);
			if (k > SBX_ID_MAX)
				continue;
			memcpy(id, nm, k);
			id[k] = '\0';
			if (json_object_get(live, id) != NULL)
				continue;
		} else
			continue;
		if (unlinkat(dirfd(d), nm, 0) == 0)
			json_array_append_new(out, json_pack("{s:s,s:s,s:I}",
			    "file", nm, "reason", "orphan", "bytes",
			    (json_int_t)st.st_size));
	}
	closedir(d);
}

static int
key_gone(const struct arch_ent *e, size_t n, const char *key)
{
	size_t i;

	for (i = 0; key != NULL && i < n; i++)
		if (e[i].gone && strcmp(e[i].key, key) == 0)
			return 1;
	return 0;
}

static void
stage_sweep(const struct xd_cfg *c, json_t *live, int64_t now)
{
	json_t *list = xd_arch_list(c), *a;
	char mp[SBX_PATH_MAX + 80];
	const char *k;
	struct stat st;
	size_t i;

	json_array_foreach(list, i, a) {
		k = json_string_value(json_object_get(a, "key"));
		if (k == NULL || json_object_get(live, k) != NULL ||
		    arch_path(c, k, ".json", mp, sizeof(mp)) != 0 ||
		    lstat(mp, &st) != 0 || (int64_t)st.st_mtime > now -
		    ARCH_ORPHAN_S)
			continue;
		xd_log(XD_LOG_INFO, "archive %s: a local copy left in %s "
		    "(the store holds the archives): removed", k,
		    c->archive_dir);
		xd_arch_discard(c, k);
	}
	json_decref(list);
}

json_t *
xd_arch_sweep(const struct xd_cfg *c, const char *tenant, const char *keep,
    json_t *live, int64_t now)
{
	return xd_arch_sweep_kept(c, tenant, keep, live, now, NULL);
}

json_t *
xd_arch_sweep_kept(const struct xd_cfg *c, const char *tenant,
    const char *keep, json_t *live, int64_t now, json_t **kept)
{
	json_t *list, *out = json_array(), *a, *objs = NULL;
	struct arch_ent *e = NULL;
	size_t n = 0, i, j, g;
	char se[XD_ERR_MAX];

	if (kept != NULL)
		*kept = NULL;
	if (c->s3.url[0] != '\0') {
		if ((list = store_list(c, &objs, se, sizeof(se))) == NULL)
			xd_log(XD_LOG_WARN, "the archives' sweep: the store "
			    "%s: %s", c->s3.url, se);
	} else
		list = xd_arch_list(c);
	if (list == NULL || out == NULL)
		goto done;
	if ((e = calloc(json_array_size(list) + 1, sizeof(*e))) == NULL)
		goto done;
	json_array_foreach(list, i, a) {
		const char *t = json_string_value(json_object_get(a, "tenant"));

		/* unreadable metadata: not known whose (a discard only) */
		if (json_is_true(json_object_get(a, "corrupt")) || t == NULL ||
		    (tenant != NULL && strcmp(t, tenant) != 0))
			continue;
		e[n].id = json_string_value(json_object_get(a, "id"));
		e[n].key = json_string_value(json_object_get(a, "key"));
		e[n].tenant = t;
		e[n].user = json_string_value(json_object_get(a, "user"));
		if (e[n].user == NULL)
			e[n].user = "";
		e[n].archived = json_integer_value(json_object_get(a,
		    "archived"));
		e[n].bytes = (uint64_t)json_integer_value(json_object_get(a,
		    "bytes"));
		n++;
	}
	qsort(e, n, sizeof(*e), ent_cmp);
	/* an archive of a live sandbox is being restored (its create) or
	 * was just written (keep): never taken from under it */
	for (i = 0; c->arch_max_age > 0 && i < n; i++)
		if (e[i].archived + c->arch_max_age <= now &&
		    json_object_get(live, e[i].key) == NULL &&
		    (keep == NULL || strcmp(e[i].key, keep) != 0))
			evict(c, &e[i], "expired", out);
	/* per tenant, oldest first, until the rest fits */
	for (g = 0; g < n; g = j) {
		uint64_t bytes = 0, count = 0;

		for (j = g; j < n && strcmp(e[j].tenant, e[g].tenant) == 0; j++)
			if (!e[j].gone) {
				bytes += e[j].bytes;
				count++;
			}
		for (i = g; i < j; i++) {
			int over_n = c->arch_max_count > 0 && count >
			    (uint64_t)c->arch_max_count;
			int over_b = c->arch_max_bytes > 0 && bytes >
			    c->arch_max_bytes;

			if (!over_n && !over_b)
				break;
			if (e[i].gone || json_object_get(live, e[i].key) != NULL ||
			    (keep != NULL && strcmp(e[i].key, keep) == 0))
				continue;
			evict(c, &e[i], over_n ? "quota_count" : "quota_bytes",
			    out);
			bytes -= e[i].bytes;
			count--;
		}
	}
	if (tenant == NULL)
		sweep_orphans(c, live, now, out);
	if (tenant == NULL && objs != NULL)
		store_orphans(c, objs, list, live, now, out);
	/* with a store, archive_dir is the way up and down only: what a
	 * crash left there (its sandbox, adopted, is archived again; a
	 * restore's create fetches again) goes */
	if (tenant == NULL && c->s3.url[0] != '\0')
		stage_sweep(c, live, now);
	if (kept != NULL && objs != NULL) {
		json_t *k = json_array();

		for (i = 0, j = 0; j < json_array_size(list); j++) {
			a = json_array_get(list, j);
			/* e[] holds the readable ones in list's order: those
			 * evicted are gone */
			if (!json_is_true(json_object_get(a, "corrupt")) &&
			    json_string_value(json_object_get(a, "tenant")) !=
			    NULL && (tenant == NULL || strcmp(json_string_value(
			    json_object_get(a, "tenant")), tenant) == 0) &&
			    key_gone(e, n, json_string_value(json_object_get(a,
			    "key"))))
				continue;
			json_array_append(k, a);
		}
		*kept = k;
	}
done:
	free(e);
	json_decref(list);
	json_decref(objs);
	return out;
}

void
xd_arch_adopt(const struct xd_cfg *c)
{
	json_t *list = xd_arch_list(c), *a, *m;
	char ak[SBX_ID_MAX + 1], f[SBX_PATH_MAX + 80], nf[SBX_PATH_MAX + 80];
	char mp[SBX_PATH_MAX + 80], np[SBX_PATH_MAX + 80];
	const char *id, *t, *fn;
	size_t i;
	int bad;

	json_array_foreach(list, i, a) {
		id = json_string_value(json_object_get(a, "key"));
		t = json_string_value(json_object_get(a, "tenant"));
		if (id == NULL || t == NULL || t[0] == '\0' ||
		    (m = xd_arch_meta(c, id, &bad)) == NULL)
			continue;
		/* made before ids were per tenant: named by its id alone */
		xd_key(t, id, ak);
		if (json_object_get(m, "key") != NULL || strcmp(ak, id) == 0 ||
		    arch_file(c, id, m, f, sizeof(f)) != 0 ||
		    (fn = strrchr(f, '/')) == NULL ||
		    snprintf(nf, sizeof(nf), "%s/%s%s", c->archive_dir, ak,
		    fn + 1 + strlen(id)) >= (int)sizeof(nf) ||
		    arch_path(c, id, ".json", mp, sizeof(mp)) != 0 ||
		    arch_path(c, ak, ".json", np, sizeof(np)) != 0 ||
		    access(np, F_OK) == 0) {
			json_decref(m);
			continue;
		}
		/* a link of the tar under its new name, the new metadata
		 * (its commit), then the old names go: a crash between
		 * leaves the old archive or both, never neither */
		json_object_set_new(m, "key", json_string(ak));
		/* "tar.zst" (the oldest naming): <key>.tar.zst says itself */
		if (strcmp(fn + 1 + strlen(id), ".tar.zst") != 0)
			json_object_set_new(m, "file", json_string(strrchr(nf,
			    '/') + 1));
		if (link(f, nf) != 0 || meta_save(c->archive_dir, np, m) != 0) {
			xd_log(XD_LOG_WARN, "archive of %s (tenant %s): cannot be "
			    "renamed to %s", id, t, ak);
			(void)unlink(nf);
		} else {
			(void)unlink(mp);
			(void)unlink(f);
			xd_log(XD_LOG_INFO, "archive of %s (tenant %s): now %s "
			    "(ids are per tenant)", id, t, ak);
		}
		json_decref(m);
	}
	json_decref(list);
}

void
xd_arch_discard(const struct xd_cfg *c, const char *id)
{
	char p[SBX_PATH_MAX + 80], f[SBX_PATH_MAX + 80];
	int bad, named = 0;
	json_t *m = xd_arch_meta(c, id, &bad);

	if (m != NULL)
		named = arch_file(c, id, m, f, sizeof(f)) == 0;
	json_decref(m);
	/* the metadata first: without it there is no archive */
	if (arch_path(c, id, ".json", p, sizeof(p)) == 0)
		(void)unlink(p);
	if (named)
		(void)unlink(f);
	else if (arch_path(c, id, ".tar.zst", p, sizeof(p)) == 0)
		(void)unlink(p);
}

/* ---- restoring ---- */

/* p without its leading "./"; whether it names something under the
 * top without "..": NULL yes, else why not. */
static const char *
name_refused(const char *p, const char **clean)
{
	const char *s;
	size_t n;

	while (p[0] == '.' && p[1] == '/')
		p += 2;
	*clean = p;
	if (p[0] == '\0' || strcmp(p, ".") == 0)
		return "";      /* the top */
	if (p[0] == '/')
		return "absolute name";
	for (s = p; *s; s += n + (s[n] == '/')) {
		n = strcspn(s, "/");
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return "\"..\" in the name";
	}
	return NULL;
}

const char *
xd_arch_refused(const char *p, char type, const char *t, int hardlink,
    const char **clean)
{
	const char *why, *tc;

	if (p == NULL)
		return "no name";
	if ((why = name_refused(p, clean)) != NULL)
		return why;
	/* a hard link to a name of the workspace (the restore makes it only
	 * when that is a file it made from the same archive) */
	if (hardlink) {
		if (t == NULL || (why = name_refused(t, &tc)) != NULL)
			return why != NULL && why[0] ? "hard link outside the "
			    "workspace" : "hard link without a target";
		return NULL;
	}
	/* whatever it points to: nothing follows it (see the top) */
	if (type == 'l')
		return t == NULL || t[0] == '\0' ? "link without a target" :
		    NULL;
	if (type != 'f' && type != 'd')
		return "not a file, directory or link";
	return NULL;
}

static const char *
entry_refused(struct archive_entry *e, const char **pp)
{
	mode_t ft = archive_entry_filetype(e);
	const char *h = archive_entry_hardlink(e);
	char type = ft == AE_IFREG ? 'f' : ft == AE_IFDIR ? 'd' : ft ==
	    AE_IFLNK ? 'l' : '?';

	return xd_arch_refused(archive_entry_pathname(e), type, h != NULL ?
	    h : archive_entry_symlink(e), h != NULL, pp);
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* In the child, as the sandbox's uid, cwd the workspace: extract a,
 * the outcome as one JSON object on out. */
static int
extract(struct archive *a, FILE *out)
{
	struct archive *d = archive_write_disk_new();
	struct archive_entry *e;
	json_t *res, *skipped = json_array();
	uint64_t files = 0, bytes = 0, nskip = 0;
	int r, rc = 1;
	const char *err = NULL;
	char msg[XD_ERR_MAX], cut[ARCH_NAME_MAX], clean[XD_ERR_MAX];
	void *made = NULL;              /* files made: hard links' targets */
	static const char *nofit = "the archive does not fit the workspace";

	if (d == NULL || skipped == NULL)
		return 1;
	/* no ARCHIVE_EXTRACT_UNLINK: with it, SECURE_SYMLINKS removes a link
	 * in the way and goes on; without it, the entry is refused */
	archive_write_disk_set_options(d, ARCHIVE_EXTRACT_TIME |
	    ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
	    ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
	/* ARCHIVE_WARN: a name not translated to this (C) locale, read as
	 * its bytes */
	while ((r = archive_read_next_header(a, &e)) >= ARCHIVE_WARN &&
	    r != ARCHIVE_EOF) {
		const char *p = NULL, *why = entry_refused(e, &p), *h;
		char *name = NULL, *target = NULL, **k;

		if (why != NULL && why[0] == '\0')
			continue;
		h = archive_entry_hardlink(e);
		if (why == NULL && h != NULL) {
			while (h[0] == '.' && h[1] == '/')
				h += 2;
			if (tfind(h, &made, str_cmp) == NULL)
				why = "hard link to no file made before";
			else if ((target = strdup(h)) == NULL)
				why = "out of memory";
		}
		/* p points into e's own name: a copy to set it from */
		if (why == NULL && (name = strdup(p)) == NULL)
			why = "out of memory";
		if (why == NULL) {
			archive_entry_set_pathname(e, name);
			if (target != NULL) {
				archive_entry_set_hardlink(e, target);
				archive_entry_set_size(e, 0);
			}
			archive_entry_set_perm(e, archive_entry_perm(e) & 0777);
			archive_entry_set_uid(e, getuid());
			archive_entry_set_gid(e, getgid());
			if (archive_write_header(d, e) < ARCHIVE_WARN) {
				const char *s = archive_error_string(d);

				/* a write the kernel refused (the quota) ends
				 * the restore; a refused path is skipped */
				if (full(archive_errno(d))) {
					err = nofit;
					free(name);
					free(target);
					break;
				}
				why = s != NULL ? s : "refused";
			} else if (archive_entry_filetype(e) == AE_IFREG &&
			    target == NULL) {
				const void *buf;
				size_t n;
				la_int64_t off;

				while ((r = archive_read_data_block(a, &buf, &n,
				    &off)) == ARCHIVE_OK || r == ARCHIVE_WARN)
					if (archive_write_data_block(d, buf, n,
					    off) < ARCHIVE_WARN)
						break;
				if (r != ARCHIVE_EOF) {
					snprintf(msg, sizeof(msg), "%s: %.200s",
					    utf8_clip(name, cut, sizeof(cut)),
					    r >= ARCHIVE_WARN ?
					    archive_error_string(d) :
					    archive_error_string(a));
					err = full(archive_errno(d)) ? nofit :
					    msg;
					free(name);
					free(target);
					break;
				}
				files++;
				bytes += (uint64_t)archive_entry_size(e);
			} else if (target != NULL)
				files++;
			if (why == NULL &&
			    archive_write_finish_entry(d) < ARCHIVE_WARN &&
			    full(archive_errno(d))) {
				err = nofit;
				free(name);
				free(target);
				break;
			}
			/* a file made: a later hard link may name it (the
			 * name kept in the tree, not freed) */
			if (why == NULL && archive_entry_filetype(e) ==
			    AE_IFREG && target == NULL && (k = tsearch(name,
			    &made, str_cmp)) != NULL && *k == name)
				name = NULL;
		}
		if (why != NULL)
			skip_note(skipped, &nskip, archive_entry_pathname(e),
			    why);
		free(name);
		free(target);
	}
	if (err == NULL && r != ARCHIVE_EOF) {
		snprintf(msg, sizeof(msg), "the archive does not read: %.200s",
		    archive_error_string(a));
		err = msg;
	}
	if (err == NULL && archive_write_close(d) != ARCHIVE_OK)
		err = "cannot finish the restore";
	archive_write_free(d);
	if (err != NULL)
		res = json_pack("{s:s}", "error", utf8_clip(err, clean,
		    sizeof(clean)));
	else {
		res = json_pack("{s:I,s:I,s:I,s:O}", "files", (json_int_t)files,
		    "bytes", (json_int_t)bytes, "skipped_count",
		    (json_int_t)nskip, "skipped", skipped);
		rc = 0;
	}
	json_decref(skipped);
	if (res != NULL) {
		json_dumpf(res, out, JSON_COMPACT);
		fflush(out);
	}
	json_decref(res);
	return rc;
}

int
xd_arch_restore_helper(void)
{
	struct archive *a;
	FILE *f;

	/* only ever the restore's child, dropped to a sandbox's uid: run by
	 * hand as root it would write the archive into the cwd as root */
	if (geteuid() == 0 || getuid() == 0) {
		fprintf(stderr, XD_NAME ": --restore-helper is sluice-execd's "
		    "own (it does not run as root)\n");
		return 2;
	}
	if ((f = fdopen(1, "w")) == NULL)
		return 1;
	if ((a = archive_read_new()) == NULL ||
	    archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
	    archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
	    archive_read_support_format_tar(a) != ARCHIVE_OK ||
	    archive_read_open_fd(a, 0, 65536) != ARCHIVE_OK) {
		fprintf(f, "{\"error\":\"the archive does not open: not a "
		    "tar\"}");
		fflush(f);
		return 1;
	}
	return extract(a, f);
}

/* The child's result read to its end (what passes ARCH_RESULT_MAX
 * drained, not kept: the child never blocks on a full pipe), by the
 * deadline; then the child reaped.  The result, or NULL with why. */
static char *
child_result(pid_t pid, int fd, const char **why)
{
	char *buf = malloc(ARCH_RESULT_MAX + 1), sink[16384];
	struct timespec now, end;
	size_t got = 0;
	int st, over = 0, late = 0, eof = 0;
	ssize_t n;

	*why = "the extracting process died";
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ARCH_RESTORE_S;
	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		long ms;

		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (long)(end.tv_sec - now.tv_sec) * 1000 + (end.tv_nsec -
		    now.tv_nsec) / 1000000;
		if (ms <= 0) {
			late = 1;
			break;
		}
		if ((n = poll(&pf, 1, ms > 60000 ? 60000 : (int)ms)) < 0 &&
		    errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (buf != NULL && got < ARCH_RESULT_MAX)
			n = read(fd, buf + got, ARCH_RESULT_MAX - got);
		else
			n = read(fd, sink, sizeof(sink));
		if (n == 0) {
			eof = 1;        /* the child is at its _exit */
			break;
		}
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			break;
		}
		if (buf != NULL && got < ARCH_RESULT_MAX)
			got += (size_t)n;
		else
			over = 1;
	}
	/* still running: late, or its pipe failed */
	if (!eof)
		(void)kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (late)
		*why = "the restore took longer than " ARCH_STR(ARCH_RESTORE_S)
		    " s and was stopped";
	else if (over)
		*why = "the restore's result is too long";
	if (buf == NULL || late || over) {
		free(buf);
		return NULL;
	}
	buf[got] = '\0';
	return buf;
}

static const char *const restore_args[] = { "--restore-helper", NULL };

int
xd_arch_helper_spawn(const struct sbx_rec *r, int in, int wfd, int out,
    const char *const *args, pid_t *pidp)
{
	pid_t pid;

	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		static const char nohelper[] = "{\"error\":\"the helper does "
		    "not run\"}\n";
		char *argv[8] = { (char *)XD_NAME };
		char *envp[] = { NULL };
		struct sigaction sa;
		int nul, i;

		for (i = 0; i < 6 && args[i] != NULL; i++)
			argv[i + 1] = (char *)args[i];
		argv[i + 1] = NULL;
		/* the daemon's signal plumbing is not the helper's */
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		for (i = 1; i < NSIG; i++)
			(void)sigaction(i, &sa, NULL);
		/* the sandbox's host ids, nothing more, and no way back */
		if (setgroups(0, NULL) != 0 || setresgid(r->host_gid,
		    r->host_gid, r->host_gid) != 0 || setresuid(r->host_uid,
		    r->host_uid, r->host_uid) != 0 || prctl(PR_SET_NO_NEW_PRIVS,
		    1, 0, 0, 0) != 0 || fchdir(wfd) != 0)
			_exit(1);
		umask(022);
		/* the helper gets its input on 0, the result pipe on 1 and
		 * nothing else of the daemon: not its memory (the TLS key,
		 * the tokens' digests), which an exec drops, nor a descriptor
		 * (fds 0-2 are open in the daemon: the dups do not overlap) */
		if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 ||
		    dup2(in >= 0 ? in : nul, 0) != 0 || dup2(out, 1) != 1 ||
		    dup2(nul, 2) != 2)
			_exit(1);
		closefrom(3);
		execve("/proc/self/exe", argv, envp);
		(void)!write(1, nohelper, sizeof(nohelper) - 1);
		_exit(127);
	}
	*pidp = pid;
	return 0;
}

char *
xd_arch_helper_wait(pid_t pid, int fd, const char **why)
{
	return child_result(pid, fd, why);
}

const char *
xd_arch_clip(const char *s, char *out, size_t max)
{
	return utf8_clip(s, out, max);
}

int
xd_arch_restore(const struct xd_cfg *c, const struct sbx_rec *r,
    json_t **out, int *corrupt, char *err, size_t len)
{
	char tar[SBX_PATH_MAX + 80], hex[65], *buf;
	const char *want, *why;
	json_t *m, *res = NULL;
	uint64_t size;
	int fd, wfd = -1, p[2] = { -1, -1 }, bad;
	pid_t pid;
	char ak[SBX_ID_MAX + 1];

	*out = NULL;
	*corrupt = 0;
	xd_key(r->tenant, XD_REC_ID(r), ak);
	if ((m = xd_arch_meta(c, ak, &bad)) == NULL) {
		*corrupt = bad;
		return bad ? errf(err, len, "the archive's metadata does not "
		    "read") : 0;
	}
	want = json_string_value(json_object_get(m, "sha256"));
	if (arch_file(c, ak, m, tar, sizeof(tar)) != 0 ||
	    (fd = open(tar, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		*corrupt = 1;
		json_decref(m);
		return errf(err, len, "the archive is missing (%s)",
		    strerror(errno));
	}
	if (fd_sha256(fd, hex, &size) != 0 || strcmp(hex, want) != 0) {
		*corrupt = 1;
		errf(err, len, "the archive is corrupt: its SHA-256 is %s, "
		    "its metadata says %.64s", hex, want);
		goto fail;
	}
	if ((wfd = open(r->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0 || pipe2(p, O_CLOEXEC) != 0) {
		errf(err, len, "workspace: %s", strerror(errno));
		goto fail;
	}
	if (xd_arch_helper_spawn(r, fd, wfd, p[1], restore_args, &pid) != 0) {
		errf(err, len, "fork: %s", strerror(errno));
		goto fail;
	}
	close(p[1]);
	p[1] = -1;
	buf = child_result(pid, p[0], &why);
	res = buf != NULL ? json_loads(buf, 0, NULL) : NULL;
	free(buf);
	if (res == NULL || json_object_get(res, "error") != NULL) {
		errf(err, len, "restore: %.300s", res ? json_string_value(
		    json_object_get(res, "error")) : why);
		json_decref(res);
		goto fail;
	}
	json_object_set(res, "archived", json_object_get(m, "archived"));
	json_object_set(res, "sha256", json_object_get(m, "sha256"));
	json_object_set(res, "reason", json_object_get(m, "reason"));
	*out = res;
	close(p[0]);
	close(wfd);
	close(fd);
	json_decref(m);
	return 0;
fail:
	util_close_pair(p);
	if (wfd >= 0)
		close(wfd);
	close(fd);
	json_decref(m);
	return -1;
}
