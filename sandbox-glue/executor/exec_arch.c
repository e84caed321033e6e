/*
 * exec_arch.c: a sandbox's workspace as an archive, written before the
 * sandbox is removed (by age or by DELETE) and restored by the next
 * create of the same id.  Blocking: it runs in the create and delete
 * workers only.
 *
 * <archive_dir>/<id>.tar.zst is a pax tar compressed with zstd;
 * <archive_dir>/<id>.json, written after it, says whose it is (tenant,
 * user), when and why it was made, its size and its SHA-256.  A restore
 * reads the archive through one descriptor: the digest of what it reads
 * must be the one the metadata names, else it is refused as corrupt,
 * before a byte is extracted.
 *
 * Writing: after the sandbox is destroyed, so nothing inside moves;
 * the tree is walked through directory descriptors, no link followed;
 * regular files, directories and symbolic links are kept (the links as
 * links), nothing else (fifos, sockets, devices), and lost+found, the
 * file system's own, is left out.
 *
 * Restoring: into the new, empty workspace before the sandbox starts,
 * in a child that has become the sandbox's host uid and gid (no group,
 * no capability): the kernel's permissions and the workspace's own
 * quota (a loop-mounted ext4 of disk_bytes and inodes) bound what it
 * can write, wherever a hostile archive points.  On top of that each
 * entry is checked: a name that is absolute, holds "..", or is empty is
 * skipped; only files, directories and symbolic links are made (hard
 * links and device, fifo or socket entries are skipped); a symbolic
 * link whose relative target climbs above /workspace is skipped (an
 * absolute target names the sandbox's own root, as a venv's
 * bin/python -> /usr/bin/python3 does, and is kept: the host follows
 * no link inside a workspace); libarchive refuses to write through a
 * link (ARCHIVE_EXTRACT_SECURE_SYMLINKS), and modes lose their setuid,
 * setgid and sticky bits.  What was skipped is named in the result.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd-int.h"
#include "sandbox-glue/executor/sbx_cfg.h"

#define ARCH_DEPTH_MAX	128
#define ARCH_SKIPPED_MAX 100    /* named in the result; the rest counted */
#define ARCH_META_MAX	(64 * 1024)

static int
arch_path(const struct xd_cfg *c, const char *id, const char *ext, char *out,
    size_t len)
{
	if (!sbx_id_ok(id, SBX_ID_MAX) || snprintf(out, len, "%s/%s%s",
	    c->archive_dir, id, ext) >= (int)len)
		return -1;
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

struct wr {
	struct archive *a;
	struct archive_entry *e;
	uint64_t files, bytes;
	char err[XD_ERR_MAX];
};

static int
wr_fail(struct wr *w, const char *what, const char *path)
{
	snprintf(w->err, sizeof(w->err), "%s %.200s: %s", what, path,
	    w->a != NULL && archive_error_string(w->a) != NULL ?
	    archive_error_string(w->a) : strerror(errno));
	return -1;
}

static int
wr_head(struct wr *w, const char *path, const struct stat *st,
    const char *link)
{
	archive_entry_clear(w->e);
	archive_entry_set_pathname(w->e, path);
	archive_entry_set_mode(w->e, st->st_mode & (S_IFMT | 07777));
	archive_entry_set_mtime(w->e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	archive_entry_set_size(w->e, S_ISREG(st->st_mode) ? st->st_size : 0);
	if (link != NULL)
		archive_entry_set_symlink(w->e, link);
	if (archive_write_header(w->a, w->e) != ARCHIVE_OK)
		return wr_fail(w, "archive", path);
	return 0;
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
		char path[4096], link[4096], buf[65536];
		struct stat st;
		ssize_t n;
		int fd;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") ==
		    0 || (depth == 0 && strcmp(de->d_name, "lost+found") == 0))
			continue;
		if (snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ?
		    "/" : "", de->d_name) >= (int)sizeof(path))
			continue;       /* deeper than the kernel lets a path */
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (depth >= ARCH_DEPTH_MAX)
				continue;
			if ((fd = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
				continue;
			if (wr_head(w, path, &st, NULL) != 0) {
				close(fd);
				rc = -1;
				break;
			}
			rc = wr_dir(w, fd, path, depth + 1);
		} else if (S_ISLNK(st.st_mode)) {
			n = readlinkat(dirfd(d), de->d_name, link,
			    sizeof(link) - 1);
			if (n < 0)
				continue;
			link[n] = '\0';
			rc = wr_head(w, path, &st, link);
		} else if (S_ISREG(st.st_mode)) {
			if ((fd = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_NOFOLLOW | O_CLOEXEC)) < 0)
				continue;
			if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
			    wr_head(w, path, &st, NULL) != 0) {
				close(fd);
				rc = w->err[0] ? -1 : 0;
				continue;
			}
			/* the size in the header is what is written: a file
			 * that shrank is padded, one that grew cut */
			{
				uint64_t left = (uint64_t)st.st_size;

				while (left > 0 && (n = read(fd, buf, left <
				    sizeof(buf) ? (size_t)left : sizeof(buf)))
				    > 0) {
					if (archive_write_data(w->a, buf,
					    (size_t)n) < 0) {
						rc = wr_fail(w, "archive", path);
						break;
					}
					left -= (uint64_t)n;
				}
				memset(buf, 0, sizeof(buf));
				while (rc == 0 && left > 0) {
					n = left < sizeof(buf) ? (ssize_t)left :
					    (ssize_t)sizeof(buf);
					if (archive_write_data(w->a, buf,
					    (size_t)n) < 0)
						rc = wr_fail(w, "archive", path);
					left -= (uint64_t)n;
				}
			}
			close(fd);
			w->files++;
			w->bytes += (uint64_t)st.st_size;
		}
		/* fifos, sockets and devices are not kept */
	}
	closedir(d);
	return rc;
}

static int
meta_save(const char *path, json_t *m)
{
	char tmp[SBX_PATH_MAX + 96];

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (json_dump_file(m, tmp, JSON_COMPACT) != 0 || rename(tmp, path) !=
	    0) {
		(void)unlink(tmp);
		return -1;
	}
	return 0;
}

int
xd_arch_write(const struct xd_cfg *c, const struct sbx_rec *r,
    const char *reason, json_t **meta, char *err, size_t len)
{
	char tar[SBX_PATH_MAX + 80], tmp[SBX_PATH_MAX + 90];
	char mp[SBX_PATH_MAX + 80], hex[65];
	struct wr w;
	uint64_t size;
	int fd = -1, wfd, rc = -1;
	json_t *m;

	*meta = NULL;
	memset(&w, 0, sizeof(w));
	if (arch_path(c, r->chat, ".tar.zst", tar, sizeof(tar)) != 0 ||
	    arch_path(c, r->chat, ".json", mp, sizeof(mp)) != 0)
		return errf(err, len, "archive_dir: path too long");
	snprintf(tmp, sizeof(tmp), "%s.tmp", tar);
	if (util_mkdir_p(c->archive_dir, 0700) != 0)
		return errf(err, len, "%.300s: %s", c->archive_dir,
		    strerror(errno));
	if ((wfd = open(r->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return errf(err, len, "workspace %.300s: %s", r->workspace,
		    strerror(errno));
	if ((fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0) {
		close(wfd);
		return errf(err, len, "%.300s: %s", tmp, strerror(errno));
	}
	if ((w.a = archive_write_new()) == NULL ||
	    (w.e = archive_entry_new()) == NULL ||
	    archive_write_add_filter_zstd(w.a) != ARCHIVE_OK ||
	    archive_write_set_format_pax_restricted(w.a) != ARCHIVE_OK ||
	    archive_write_open_fd(w.a, fd) != ARCHIVE_OK) {
		close(wfd);
		wr_fail(&w, "archive", tmp);
		goto out;
	}
	if (wr_dir(&w, wfd, "", 0) != 0)
		goto out;
	if (archive_write_close(w.a) != ARCHIVE_OK) {
		wr_fail(&w, "archive", tmp);
		goto out;
	}
	if (fsync(fd) != 0 || fd_sha256(fd, hex, &size) != 0) {
		wr_fail(&w, "write", tmp);
		goto out;
	}
	if (rename(tmp, tar) != 0) {
		wr_fail(&w, "rename", tar);
		goto out;
	}
	m = json_pack("{s:s,s:s,s:s,s:I,s:s,s:s,s:s,s:I,s:I,s:I}", "id",
	    r->chat, "tenant", r->tenant, "user", r->user, "archived",
	    (json_int_t)time(NULL), "reason", reason, "file", "tar.zst",
	    "sha256", hex, "bytes", (json_int_t)size, "files",
	    (json_int_t)w.files, "content_bytes", (json_int_t)w.bytes);
	if (m == NULL || meta_save(mp, m) != 0) {
		json_decref(m);
		(void)unlink(tar);
		snprintf(w.err, sizeof(w.err), "%.300s: cannot write", mp);
		goto out;
	}
	*meta = m;
	rc = 0;
out:
	if (w.a != NULL)
		archive_write_free(w.a);
	if (w.e != NULL)
		archive_entry_free(w.e);
	close(fd);
	if (rc != 0) {
		(void)unlink(tmp);
		snprintf(err, len, "%s", w.err[0] ? w.err : "archive failed");
	}
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

void
xd_arch_discard(const struct xd_cfg *c, const char *id)
{
	char p[SBX_PATH_MAX + 80];

	/* the metadata first: without it there is no archive */
	if (arch_path(c, id, ".json", p, sizeof(p)) == 0)
		(void)unlink(p);
	if (arch_path(c, id, ".tar.zst", p, sizeof(p)) == 0)
		(void)unlink(p);
}

/* ---- restoring ---- */

const char *
xd_arch_refused(const char *p, char type, const char *t, int hardlink,
    const char **clean)
{
	const char *s;
	int depth = 0;
	size_t n;

	if (p == NULL)
		return "no name";
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	*clean = p;
	if (p[0] == '\0' || strcmp(p, ".") == 0)
		return "";      /* the top: nothing to make */
	if (p[0] == '/')
		return "absolute name";
	for (s = p; *s; s += n + (s[n] == '/')) {
		n = strcspn(s, "/");
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return "\"..\" in the name";
	}
	if (hardlink)
		return "hard link";
	if (type == 'l') {
		if (t == NULL || t[0] == '\0')
			return "link without a target";
		if (t[0] == '/')
			return NULL;    /* the sandbox's own root */
		/* the link's directory, then its target, lexically */
		for (s = p; *s; s += n + (s[n] == '/'))
			if ((n = strcspn(s, "/")) > 0 && s[n] == '/' &&
			    !(n == 1 && s[0] == '.'))
				depth++;
		for (s = t; *s; s += n + (s[n] == '/')) {
			n = strcspn(s, "/");
			if (n == 2 && s[0] == '.' && s[1] == '.') {
				if (--depth < 0)
					return "link pointing outside the "
					    "workspace";
			} else if (n > 0 && !(n == 1 && s[0] == '.'))
				depth++;
		}
		return NULL;
	}
	if (type != 'f' && type != 'd')
		return "not a file, directory or link";
	return NULL;
}

static const char *
entry_refused(struct archive_entry *e, const char **pp)
{
	mode_t ft = archive_entry_filetype(e);
	char type = ft == AE_IFREG ? 'f' : ft == AE_IFDIR ? 'd' : ft ==
	    AE_IFLNK ? 'l' : '?';

	return xd_arch_refused(archive_entry_pathname(e), type,
	    archive_entry_symlink(e), archive_entry_hardlink(e) != NULL, pp);
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
	char msg[XD_ERR_MAX];

	if (d == NULL || skipped == NULL)
		return 1;
	/* no ARCHIVE_EXTRACT_UNLINK: with it, SECURE_SYMLINKS removes a link
	 * in the way and goes on; without it, the entry is refused */
	archive_write_disk_set_options(d, ARCHIVE_EXTRACT_TIME |
	    ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
	    ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *p = NULL, *why = entry_refused(e, &p);

		if (why != NULL && why[0] == '\0')
			continue;
		if (why == NULL) {
			archive_entry_set_pathname(e, p);
			archive_entry_set_perm(e, archive_entry_perm(e) & 0777);
			archive_entry_set_uid(e, getuid());
			archive_entry_set_gid(e, getgid());
			if (archive_write_header(d, e) < ARCHIVE_WARN) {
				const char *s = archive_error_string(d);

				/* a write the kernel refused (the quota) ends
				 * the restore; a refused path is skipped */
				if (archive_errno(d) == ENOSPC ||
				    archive_errno(d) == EDQUOT) {
					err = "the archive does not fit the "
					    "workspace";
					break;
				}
				why = s != NULL ? s : "refused";
			} else if (archive_entry_filetype(e) == AE_IFREG) {
				const void *buf;
				size_t n;
				la_int64_t off;

				while ((r = archive_read_data_block(a, &buf, &n,
				    &off)) == ARCHIVE_OK)
					if (archive_write_data_block(d, buf, n,
					    off) < ARCHIVE_WARN)
						break;
				if (r != ARCHIVE_EOF) {
					snprintf(msg, sizeof(msg), "%s: %.200s",
					    p, r == ARCHIVE_OK ?
					    archive_error_string(d) :
					    archive_error_string(a));
					err = archive_errno(d) == ENOSPC ||
					    archive_errno(d) == EDQUOT ?
					    "the archive does not fit the "
					    "workspace" : msg;
					break;
				}
				files++;
				bytes += (uint64_t)archive_entry_size(e);
			}
			if (why == NULL &&
			    archive_write_finish_entry(d) < ARCHIVE_WARN &&
			    (archive_errno(d) == ENOSPC ||
			    archive_errno(d) == EDQUOT)) {
				err = "the archive does not fit the workspace";
				break;
			}
		}
		if (why != NULL) {
			if (nskip++ < ARCH_SKIPPED_MAX)
				json_array_append_new(skipped, json_pack(
				    "{s:s,s:s}", "path",
				    archive_entry_pathname(e) ?
				    archive_entry_pathname(e) : "", "why", why));
		}
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
		res = json_pack("{s:s}", "error", err);
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
xd_arch_restore(const struct xd_cfg *c, const struct sbx_rec *r,
    json_t **out, int *corrupt, char *err, size_t len)
{
	char tar[SBX_PATH_MAX + 80], hex[65], buf[16384];
	const char *want;
	json_t *m, *res = NULL;
	uint64_t size;
	int fd, wfd = -1, p[2] = { -1, -1 }, st, bad;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	*out = NULL;
	*corrupt = 0;
	if ((m = xd_arch_meta(c, r->chat, &bad)) == NULL) {
		*corrupt = bad;
		return bad ? errf(err, len, "the archive's metadata does not "
		    "read") : 0;
	}
	want = json_string_value(json_object_get(m, "sha256"));
	if (arch_path(c, r->chat, ".tar.zst", tar, sizeof(tar)) != 0 ||
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
	if ((pid = fork()) < 0) {
		errf(err, len, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		struct archive *a;
		FILE *f;

		close(p[0]);
		/* the sandbox's host ids, nothing more, and no way back */
		if (setgroups(0, NULL) != 0 || setresgid(r->host_gid,
		    r->host_gid, r->host_gid) != 0 || setresuid(r->host_uid,
		    r->host_uid, r->host_uid) != 0 || prctl(PR_SET_NO_NEW_PRIVS,
		    1, 0, 0, 0) != 0 || fchdir(wfd) != 0 ||
		    (f = fdopen(p[1], "w")) == NULL)
			_exit(1);
		umask(022);
		if ((a = archive_read_new()) == NULL ||
		    archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
		    archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
		    archive_read_support_format_tar(a) != ARCHIVE_OK ||
		    archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
			fprintf(f, "{\"error\":\"the archive does not open: "
			    "not a tar\"}");
			fflush(f);
			_exit(1);
		}
		_exit(extract(a, f));
	}
	close(p[1]);
	p[1] = -1;
	while (got < sizeof(buf) - 1 && (n = read(p[0], buf + got,
	    sizeof(buf) - 1 - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	res = json_loads(buf, 0, NULL);
	if (res == NULL || json_object_get(res, "error") != NULL) {
		errf(err, len, "restore: %.300s", res ? json_string_value(
		    json_object_get(res, "error")) : "the extracting process "
		    "died");
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
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	if (wfd >= 0)
		close(wfd);
	close(fd);
	json_decref(m);
	return -1;
}
