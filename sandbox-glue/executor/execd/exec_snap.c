/*
 * exec_snap.c: what a command changed in its workspace.  A snapshot is
 * (path, type, size, mtime_ns, inode) of every entry under the
 * workspace, taken when a command starts and when it ends; the two
 * compared give "changed" (created, modified, deleted), and the regular
 * files created or modified under outputs/ are the artifacts (size and
 * SHA-256), within the configured limits.
 *
 * The walk runs in the daemon as root on the host's view of the
 * workspace, through directory fds only: each directory is opened with
 * O_NOFOLLOW from its parent's fd, entries are lstat'ed (fstatat
 * AT_SYMLINK_NOFOLLOW), a symbolic link is an entry and never a way
 * out, and artifacts are opened with openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, so nothing outside the workspace is read.
 * Bounded: at most cfg->snap_entries entries and 64 levels; outputs/ is
 * walked first, so its artifacts survive a workspace too large for the
 * cap; past the cap "changed" is not computed (changed_truncated), as a
 * partial walk cannot tell "deleted" from "not reached".
 *
 * Changes by other commands running at the same time (background ones)
 * fall in the same window and are reported too.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "sandbox-glue/executor/execd/execd-int.h"

#define SNAP_DEPTH	64
#define OUTPUTS		"outputs"

struct snap_ent {
	char *path;
	mode_t mode;
	uint64_t size, ino;
	int64_t mtime_ns;
};

struct xd_snap {
	struct snap_ent *e;
	size_t n, cap, max;
	int truncated;          /* the cap or the depth stopped the walk */
	int outputs_complete;   /* outputs/ was walked in full */
};

static int
snap_add(struct xd_snap *s, const char *path, const struct stat *st)
{
	struct snap_ent *e;

	if (s->n >= s->max) {
		s->truncated = 1;
		return -1;
	}
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 256;

		if ((e = realloc(s->e, nc * sizeof(*e))) == NULL) {
			s->truncated = 1;
			return -1;
		}
		s->e = e;
		s->cap = nc;
	}
	e = &s->e[s->n];
	if ((e->path = strdup(path)) == NULL) {
		s->truncated = 1;
		return -1;
	}
	e->mode = st->st_mode;
	e->size = (uint64_t)st->st_size;
	e->ino = (uint64_t)st->st_ino;
	e->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000ll +
	    st->st_mtim.tv_nsec;
	s->n++;
	return 0;
}

/* The entries of the directory open at dfd (consumed) named prefix;
 * skip: a name of the top level left for later (outputs/ goes first). */
static void
snap_walk(struct xd_snap *s, int dfd, const char *prefix, int depth,
    const char *skip)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (d == NULL) {
		close(dfd);
		return;
	}
	while (!s->truncated && (de = readdir(d)) != NULL) {
		char p[SBX_PATH_MAX * 2];
		struct stat st;
		int fd;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    (skip != NULL && strcmp(de->d_name, skip) == 0))
			continue;
		if (snprintf(p, sizeof(p), "%s%s%s", prefix, prefix[0] ? "/" :
		    "", de->d_name) >= (int)sizeof(p))
			continue;       /* longer than a path can be shown */
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) !=
		    0 || snap_add(s, p, &st) != 0)
			continue;
		if (!S_ISDIR(st.st_mode))
			continue;
		if (depth + 1 >= SNAP_DEPTH) {
			s->truncated = 1;
			break;
		}
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0)
			snap_walk(s, fd, p, depth + 1, NULL);
	}
	closedir(d);
}

static int
ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct snap_ent *)a)->path,
	    ((const struct snap_ent *)b)->path);
}

struct xd_snap *
xd_snap_take(const char *workspace, size_t max_entries)
{
	struct xd_snap *s = calloc(1, sizeof(*s));
	struct stat st;
	int ws, fd;

	if (s == NULL)
		return NULL;
	s->max = max_entries;
	ws = open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ws < 0) {
		s->truncated = 1;
		return s;
	}
	/* outputs/ first: its artifacts do not depend on the rest */
	if (fstatat(ws, OUTPUTS, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    snap_add(s, OUTPUTS, &st) == 0 && S_ISDIR(st.st_mode) &&
	    (fd = openat(ws, OUTPUTS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_NONBLOCK | O_CLOEXEC)) >= 0)
		snap_walk(s, fd, OUTPUTS, 1, NULL);
	s->outputs_complete = !s->truncated;
	if ((fd = dup(ws)) >= 0)
		snap_walk(s, fd, "", 0, OUTPUTS);
	else
		s->truncated = 1;
	close(ws);
	if (s->n > 1)           /* qsort(NULL, 0, ...) is undefined */
		qsort(s->e, s->n, sizeof(*s->e), ent_cmp);
	return s;
}

void
xd_snap_free(struct xd_snap *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->n; i++)
		free(s->e[i].path);
	free(s->e);
	free(s);
}

static int
under_outputs(const char *p)
{
	return strncmp(p, OUTPUTS "/", sizeof(OUTPUTS)) == 0;
}

/* SHA-256 of the regular file at path beneath ws, read as it is now;
 * -1 when it is no longer a regular file there. */
static int
file_sha256(int ws, const char *path, uint64_t max, char hex[65],
    uint64_t *size)
{
	struct open_how how;
	unsigned char buf[65536], md[32];
	unsigned int mdlen = 32;
	EVP_MD_CTX *ctx = NULL;
	struct stat st;
	uint64_t total = 0;
	int fd, rc = -1, i;
	ssize_t n;

	memset(&how, 0, sizeof(how));
	how.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	if ((fd = (int)syscall(SYS_openat2, ws, path, &how, sizeof(how))) < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		goto out;
	/* a file still growing is hashed as far as max: the size said is
	 * what was hashed */
	while (total < max && (n = read(fd, buf, sizeof(buf) < max - total ?
	    sizeof(buf) : (size_t)(max - total))) > 0) {
		if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1)
			goto out;
		total += (uint64_t)n;
	}
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
		goto out;
	for (i = 0; i < 32; i++)
		snprintf(hex + i * 2, 3, "%02x", md[i]);
	*size = total;
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	close(fd);
	return rc;
}

static void
change(json_t *a, const struct snap_ent *e, const char *what)
{
	json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:I}", "path",
	    e->path, "change", what, "type", S_ISDIR(e->mode) ? "directory" :
	    S_ISLNK(e->mode) ? "symlink" : S_ISREG(e->mode) ? "file" :
	    "other", "size", (json_int_t)e->size));
}

static void
skipped(json_t *a, const struct snap_ent *e, const char *limit)
{
	json_array_append_new(a, json_pack("{s:s,s:I,s:s}", "path", e->path,
	    "size", (json_int_t)e->size, "limit", limit));
}

json_t *
xd_snap_diff(const struct xd_snap *a, const char *workspace,
    const struct xd_art_lims *lim)
{
	json_t *o, *ch = json_array(), *art = json_array(),
	    *skip = json_array();
	struct xd_snap *b = xd_snap_take(workspace, a->max);
	uint64_t total = 0;
	size_t i = 0, j = 0;
	int ws = -1, whole;

	if (ch == NULL || art == NULL || skip == NULL || b == NULL)
		goto fail;
	whole = !a->truncated && !b->truncated;
	ws = open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	while (i < a->n || j < b->n) {
		int c = i >= a->n ? 1 : j >= b->n ? -1 :
		    strcmp(a->e[i].path, b->e[j].path);
		const struct snap_ent *e;
		int out;

		if (c < 0) {            /* only before: deleted */
			e = &a->e[i++];
			if (whole || (under_outputs(e->path) &&
			    a->outputs_complete && b->outputs_complete))
				change(ch, e, "deleted");
			continue;
		}
		e = &b->e[j++];
		if (c == 0) {
			const struct snap_ent *p = &a->e[i++];

			if (p->size == e->size && p->mtime_ns == e->mtime_ns &&
			    p->ino == e->ino && (p->mode & S_IFMT) ==
			    (e->mode & S_IFMT))
				continue;
		}
		out = under_outputs(e->path) && a->outputs_complete &&
		    b->outputs_complete;
		if (whole || out)
			change(ch, e, c == 0 ? "modified" : "created");
		if (!out || !S_ISREG(e->mode) || ws < 0)
			continue;
		if (lim->file_bytes && e->size > lim->file_bytes)
			skipped(skip, e, "file_bytes");
		else if (json_array_size(art) >= lim->count)
			skipped(skip, e, "count");
		else if (lim->total_bytes && total + e->size > lim->total_bytes)
			skipped(skip, e, "total_bytes");
		else {
			char hex[65];
			uint64_t sz;

			if (file_sha256(ws, e->path, lim->file_bytes ?
			    lim->file_bytes : UINT64_MAX, hex, &sz) != 0)
				continue;       /* gone or replaced meanwhile */
			total += sz;
			json_array_append_new(art, json_pack("{s:s,s:I,s:s}",
			    "path", e->path, "size", (json_int_t)sz, "sha256",
			    hex));
		}
	}
	if (ws >= 0)
		close(ws);
	o = json_pack("{s:o,s:b,s:o,s:o}", "changed", ch, "changed_truncated",
	    !whole, "artifacts", art, "artifacts_skipped", skip);
	xd_snap_free(b);
	return o;
fail:
	json_decref(ch);
	json_decref(art);
	json_decref(skip);
	xd_snap_free(b);
	return NULL;
}
