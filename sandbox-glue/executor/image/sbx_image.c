/*
 * sbx_image.c: profiles and the image store (sbx_image.h); what the
 * backends call, the mounting, is sbx_image_mount.c, the builder
 * sbx_image_build.c.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "proxy/lib/config_engine.h"
#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/util.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"
#include "sandbox-glue/executor/image/sbx_image.h"

const char *
sbx_img_code(int rc)
{
	switch (rc) {
	case SBX_IMG_MISSING:
		return "image_missing";
	case SBX_IMG_IN_USE:
		return "image_in_use";
	case SBX_IMG_UNKNOWN:
		return "profile_unknown";
	case SBX_IMG_FORBIDDEN:
		return "profile_forbidden";
	default:
		return "image_failed";
	}
}

/* ---- names and hashes ---- */

int
sbx_pkg_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n < 2 || n > 100 || !((s[0] >= 'a' && s[0] <= 'z') ||
	    (s[0] >= '0' && s[0] <= '9')))
		return 0;
	for (i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '+' || s[i] == '-' || s[i] == '.'))
			return 0;
	return 1;
}

/* A Python module path: identifiers joined by dots. */
static int
module_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 100 || s[0] == '.' || s[n - 1] == '.' ||
	    strstr(s, "..") != NULL)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '_' || s[i] == '.'))
			return 0;
	return !(s[0] >= '0' && s[0] <= '9');
}

/* ---- profiles ---- */


void
sbx_profile_free(struct sbx_profile *p)
{
	util_strv_free(p->packages, p->npackages);
	util_strv_free(p->python, p->npython);
	util_strv_free(p->commands, p->ncommands);
	memset(p, 0, sizeof(*p));
}

/* Append s to *v unless it is there; 0/-1. */
static int
strv_add(char ***v, size_t *n, const char *s)
{
	char **nv, *d;
	size_t i;

	for (i = 0; i < *n; i++)
		if (strcmp((*v)[i], s) == 0)
			return 0;
	if (*n >= SBX_PROFILE_ITEMS_MAX || (d = strdup(s)) == NULL)
		return -1;
	if ((nv = realloc(*v, (*n + 1) * sizeof(char *))) == NULL) {
		free(d);
		return -1;
	}
	*v = nv;
	(*v)[(*n)++] = d;
	return 0;
}

/*
 * A command line to check, or a description: printable, one line,
 * bounded.  C1 controls (U+0080..U+009F, C2 80..C2 9F in UTF-8) are
 * refused as C0 ones are: U+009B is a CSI to a terminal that shows
 * the profile list.
 */
static int
command_ok(const char *s)
{
	size_t n = strlen(s);
	const unsigned char *u = (const unsigned char *)s;

	if (n == 0 || n > 1024)
		return 0;
	for (; *u != '\0'; u++)
		if (*u < 0x20 || *u == 0x7f || (*u == 0xc2 && u[1] >= 0x80 &&
		    u[1] <= 0x9f))
			return 0;
	return 1;
}

/* ---- a profile's file, on the configuration's row engine
 * (proxy/lib/config_engine.h): errors read "profile NAME:LINE:COL:
 * PATH: what", as the daemons' configuration files' do ---- */

/* Each string of a list: one of what the list holds (it says so). */
static int
pkg_check(struct cfg_ctx *x, const char *s)
{
	char b[80];

	return sbx_pkg_ok(s) ? 0 : cfg_fail(x, "bad package name %s "
	    "(expected a Debian package's: [a-z0-9][a-z0-9+.-]+)",
	    cfg_shown(s, b, sizeof(b)));
}

static int
module_check(struct cfg_ctx *x, const char *s)
{
	char b[80];

	return module_ok(s) ? 0 : cfg_fail(x, "bad module %s (expected a "
	    "Python module path: identifiers joined by dots)", cfg_shown(s, b,
	    sizeof(b)));
}

static int
command_check(struct cfg_ctx *x, const char *s)
{
	return command_ok(s) ? 0 : cfg_fail(x, "expected a command line: "
	    "printable, one line, 1 to 1024 bytes");
}

/* A list row: strings passing k->check, each kept once, its count at
 * k->noff of the same struct. */
static int
rd_list(struct cfg_ctx *x, const struct cfg_key *k, json_t *a, void *field)
{
	size_t *n = (size_t *)(void *)((char *)field - k->off + k->noff);
	const char *s;
	json_t *e;
	size_t i;

	if (!json_is_array(a))
		return cfg_fail(x, "expected an array of strings");
	json_array_foreach(a, i, e) {
		cfg_ctx_idx(x, i);
		if (cfg_get_str(x, e, &s) != 0 || k->check(x, s) != 0)
			return -1;
		if (strv_add((char ***)field, n, s) != 0)
			return cfg_fail(x, "more than %d (or out of memory)",
			    SBX_PROFILE_ITEMS_MAX);
		cfg_ctx_pop(x);
	}
	return 0;
}

static int
k_description(struct cfg_ctx *x, json_t *v, void *base)
{
	struct sbx_profile *p = base;
	const char *s;

	if (cfg_get_str(x, v, &s) != 0)
		return -1;
	if (!command_ok(s) || strlen(s) >= sizeof(p->description))
		return cfg_fail(x, "expected one printable line under %zu "
		    "bytes", sizeof(p->description));
	memcpy(p->description, s, strlen(s) + 1);
	return 0;
}

static int
k_extends(struct cfg_ctx *x, json_t *v, void *base)
{
	struct sbx_profile *p = base;
	const char *s;
	char b[80];

	if (cfg_get_str(x, v, &s) != 0)
		return -1;
	if (!sbx_id_ok(s, SBX_ID_MAX) || strcmp(s, SBX_PROFILE_HOST) == 0)
		return cfg_fail(x, "bad profile name %s (expected 1 to %d of "
		    "A-Z a-z 0-9 . _ -, not \"" SBX_PROFILE_HOST "\")",
		    cfg_shown(s, b, sizeof(b)), SBX_ID_MAX);
	snprintf(p->extends, sizeof(p->extends), "%s", s);
	return 0;
}

#define LIST(k, f, c) { k, K_FN, .off = offsetof(struct sbx_profile, f), \
	.noff = offsetof(struct sbx_profile, n##f), .rd = rd_list, \
	.check = (c) }

static const struct cfg_key check_keys[] = {
	LIST("python", python, module_check),
	LIST("commands", commands, command_check),
	{ .name = NULL }
};

static const struct cfg_key profile_keys[] = {
	{ "description", K_FN, .fn = k_description },
	{ "extends", K_FN, .fn = k_extends },
	LIST("packages", packages, pkg_check),
	{ "check", K_OBJ, .sub = check_keys },
	{ .name = NULL }
};

int
sbx_profile_parse(struct sbx_profile *p, const char *name, const char *text,
    size_t len, char *err, size_t errlen)
{
	struct cfg_ctx x;
	char label[SBX_ID_MAX + 16];
	json_t *o;
	int rc = -1;

	memset(p, 0, sizeof(*p));
	if (!sbx_id_ok(name, SBX_ID_MAX) || strcmp(name, SBX_PROFILE_HOST) == 0)
		return sbx_err(err, errlen, "profile name: 1 to %d of A-Z a-z "
		    "0-9 . _ -, not \"" SBX_PROFILE_HOST "\"", SBX_ID_MAX);
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(label, sizeof(label), "profile %s", name);
	cfg_ctx_init(&x, text, len, label, err, errlen);
	if ((o = cfg_parse_text(&x)) == NULL)
		return -1;
	if (cfg_walk_object(&x, o, profile_keys, p) != 0)
		goto out;
	if (p->npackages == 0 && p->extends[0] == '\0') {
		cfg_ctx_key(&x, "packages");
		cfg_fail(&x, "none (and extends nothing)");
		goto out;
	}
	rc = 0;
out:
	json_decref(o);
	return rc;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The file <dir>/<name>.json of the first dir that has one. */
static int
prof_find(const char *const *dirs, const char *name, char *path, size_t len)
{
	size_t i;

	for (i = 0; dirs != NULL && dirs[i] != NULL; i++) {
		if (dirs[i][0] == '\0')
			continue;
		if (snprintf(path, len, "%s/%s.json", dirs[i], name) >=
		    (int)len)
			continue;
		if (access(path, F_OK) == 0)
			return 0;
	}
	return -1;
}

/* path's bytes (at most max), NUL-terminated, malloc'd. */
static char *
slurp(const char *path, size_t max, size_t *len)
{
	char *b = malloc(max + 1);
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), e;

	if (fd < 0 || b == NULL) {
		if (fd >= 0)
			close(fd);
		free(b);
		return NULL;
	}
	n = util_read_full(fd, b, max + 1);
	e = n < 0 ? errno : EFBIG;
	close(fd);
	if (n < 0 || (size_t)n > max) {
		free(b);
		errno = e;
		return NULL;
	}
	b[n] = '\0';
	*len = (size_t)n;
	return b;
}

int
sbx_profile_load(struct sbx_profile *p, const char *const *dirs,
    const char *name, char *err, size_t errlen)
{
	char seen[SBX_PROFILE_DEPTH_MAX][SBX_ID_MAX + 1], cur[SBX_ID_MAX + 1];
	char path[SBX_PATH_MAX];
	struct sbx_profile q;
	size_t len, i;
	int depth, k;
	char *text;

	memset(p, 0, sizeof(*p));
	snprintf(cur, sizeof(cur), "%s", name);
	for (depth = 0; cur[0] != '\0'; depth++) {
		if (depth >= SBX_PROFILE_DEPTH_MAX) {
			sbx_profile_free(p);
			return sbx_err(err, errlen, "profile %s: extends more "
			    "than %d deep", name, SBX_PROFILE_DEPTH_MAX);
		}
		for (k = 0; k < depth; k++)
			if (strcmp(seen[k], cur) == 0) {
				sbx_profile_free(p);
				return sbx_err(err, errlen, "profile %s: extends "
				    "itself (through %s)", name, cur);
			}
		snprintf(seen[depth], sizeof(seen[depth]), "%s", cur);
		if (!sbx_id_ok(cur, SBX_ID_MAX) || prof_find(dirs, cur, path,
		    sizeof(path)) != 0) {
			sbx_profile_free(p);
			sbx_err(err, errlen, "profile_unknown: no profile %s%s%s",
			    cur, depth ? " (extended by " : "", depth ? name : "");
			if (depth)
				snprintf(err + strlen(err), errlen - strlen(err),
				    ")");
			return SBX_IMG_UNKNOWN;
		}
		if ((text = slurp(path, SBX_PROFILE_FILE_MAX, &len)) == NULL) {
			sbx_profile_free(p);
			return sbx_err(err, errlen, "%s: %s", path,
			    strerror(errno));
		}
		k = sbx_profile_parse(depth ? &q : p, cur, text, len, err,
		    errlen);
		free(text);
		if (k != 0) {
			if (depth)
				sbx_profile_free(&q);
			sbx_profile_free(p);
			return -1;
		}
		if (depth == 0) {
			snprintf(p->path, sizeof(p->path), "%s", path);
			snprintf(cur, sizeof(cur), "%s", p->extends);
			continue;
		}
		/* what it extends comes first in the checks */
		for (i = 0; i < q.npackages; i++)
			k |= strv_add(&p->packages, &p->npackages,
			    q.packages[i]);
		for (i = 0; i < p->npython; i++)
			k |= strv_add(&q.python, &q.npython, p->python[i]);
		for (i = 0; i < p->ncommands; i++)
			k |= strv_add(&q.commands, &q.ncommands,
			    p->commands[i]);
		util_strv_free(p->python, p->npython);
		util_strv_free(p->commands, p->ncommands);
		p->python = q.python;
		p->npython = q.npython;
		p->commands = q.commands;
		p->ncommands = q.ncommands;
		q.python = q.commands = NULL;
		q.npython = q.ncommands = 0;
		snprintf(cur, sizeof(cur), "%s", q.extends);
		sbx_profile_free(&q);
		if (k != 0) {
			sbx_profile_free(p);
			return sbx_err(err, errlen, "profile %s: more than %d "
			    "items", name, SBX_PROFILE_ITEMS_MAX);
		}
	}
	qsort(p->packages, p->npackages, sizeof(char *), cmp_str);
	return 0;
}

int
sbx_image_inputs(const struct sbx_profile *p, const char *suite,
    const char *sources, const char *arch, char hex[SBX_DIGEST_HEX + 1],
    char **canon)
{
	json_t *o, *pk = json_array(), *src = json_array();
	const char *l, *e;
	char **v = NULL, *text = NULL, line[1024];
	size_t i;
	int rc = -1;

	if (canon != NULL)
		*canon = NULL;
	if (pk == NULL || src == NULL ||
	    (v = malloc((p->npackages + 1) * sizeof(char *))) == NULL)
		goto out;
	/* sorted whatever the caller did: the order of a list is not an
	 * input */
	for (i = 0; i < p->npackages; i++)
		v[i] = p->packages[i];
	qsort(v, p->npackages, sizeof(char *), cmp_str);
	for (i = 0; i < p->npackages; i++)
		if (i == 0 || strcmp(v[i], v[i - 1]) != 0)
			json_array_append_new(pk, json_string(v[i]));
	for (l = sources; l != NULL && *l != '\0'; l = *e ? e + 1 : e) {
		size_t n;

		e = l + strcspn(l, "\n");
		while (l < e && (*l == ' ' || *l == '\t'))
			l++;
		n = (size_t)(e - l);
		while (n > 0 && (l[n - 1] == ' ' || l[n - 1] == '\t' ||
		    l[n - 1] == '\r'))
			n--;
		if (n == 0 || n >= sizeof(line))
			continue;
		memcpy(line, l, n);
		line[n] = '\0';
		json_array_append_new(src, json_string(line));
	}
	o = json_pack("{s:i, s:O, s:s, s:O, s:s, s:I, s:s}",
	    "format", SBX_IMAGE_FORMAT, "packages", pk, "suite", suite,
	    "sources", src, "arch", arch, "epoch", (json_int_t)SBX_IMAGE_EPOCH,
	    "fs", "erofs lz4hc");
	if (o == NULL)
		goto out;
	text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (text == NULL)
		goto out;
	sbx_sha256_hex(text, strlen(text), hex);
	if (canon != NULL) {
		*canon = text;
		text = NULL;
	}
	rc = 0;
out:
	free(text);
	free(v);
	json_decref(pk);
	json_decref(src);
	return rc;
}

/* ---- the store ---- */

int
sbx_image_file(char *buf, size_t len, const char *image_dir,
    const char *digest)
{
	if (!sbx_digest_ok(digest) || snprintf(buf, len, "%s/%s" SBX_IMAGE_EXT,
	    image_dir, digest) >= (int)len)
		return -1;
	return 0;
}

int
sbx_image_current(const char *image_dir, const char *profile,
    char digest[SBX_DIGEST_HEX + 1], char *err, size_t errlen)
{
	char p[SBX_PATH_MAX + 80], line[128];
	struct stat st;

	digest[0] = '\0';
	if (!sbx_id_ok(profile, SBX_ID_MAX))
		return sbx_err(err, errlen, "bad profile name");
	snprintf(p, sizeof(p), "%s/profiles/%s", image_dir, profile);
	if (img_read_line(AT_FDCWD, p, line, sizeof(line)) != 0 ||
	    !sbx_digest_ok(line)) {
		sbx_err(err, errlen, "image_missing: profile %s has no image "
		    "in %s (sluice-run image build %s)", profile, image_dir,
		    profile);
		return SBX_IMG_MISSING;
	}
	if (sbx_image_file(p, sizeof(p), image_dir, line) != 0 ||
	    stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
		sbx_err(err, errlen, "image_missing: the image %.12s of profile "
		    "%s is not in %s (sluice-run image build %s)", line, profile,
		    image_dir, profile);
		return SBX_IMG_MISSING;
	}
	memcpy(digest, line, SBX_DIGEST_HEX + 1);
	return 0;
}

int
sbx_image_pick(struct sbx_rec *rec, const char *image_dir,
    const char *profile, char *err, size_t errlen)
{
	char d[SBX_DIGEST_HEX + 1];
	int rc;

	rec->image[0] = rec->image_path[0] = '\0';
	snprintf(rec->profile, sizeof(rec->profile), "%s", profile);
	if (strcmp(profile, SBX_PROFILE_HOST) == 0)
		return 0;
	if (image_dir[0] != '/')
		return sbx_err(err, errlen, "image_dir: an absolute path");
	if ((rc = sbx_image_current(image_dir, profile, d, err, errlen)) != 0)
		return rc;
	memcpy(rec->image, d, sizeof(d));
	if (sbx_image_file(rec->image_path, sizeof(rec->image_path), image_dir,
	    d) != 0)
		return sbx_err(err, errlen, "image_dir: path too long");
	return 0;
}

/* Users of digest, the store locked; stale ones removed when prune. */
static int
users_locked(const char *dir, const char *digest, int prune)
{
	char p[SBX_PATH_MAX + 160], sbxdir[SBX_PATH_MAX], mine[128];
	char q[SBX_PATH_MAX + 32];
	struct dirent *de;
	int n = 0, dfd;
	DIR *d;

	snprintf(p, sizeof(p), "%s/users/%s", dir, digest);
	if ((dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) <
	    0)
		return errno == ENOENT ? 0 : -1;
	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		/* the sandbox says which image it uses: a directory that
		 * is gone, or names another (the chat made again), is no
		 * user */
		if (img_read_line(dirfd(d), de->d_name, sbxdir, sizeof(sbxdir)) ==
		    0 && sbxdir[0] == '/' && snprintf(q, sizeof(q),
		    "%s/image.digest", sbxdir) < (int)sizeof(q) &&
		    img_read_line(AT_FDCWD, q, mine, sizeof(mine)) == 0 &&
		    strcmp(mine, digest) == 0) {
			n++;
			continue;
		}
		if (prune)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
	if (prune && n == 0)
		(void)rmdir(p);
	return n;
}

int
sbx_image_users(const char *image_dir, const char *digest)
{
	int lk = img_lock(image_dir, LOCK_EX), n;

	if (lk < 0)
		return -1;
	n = users_locked(image_dir, digest, 1);
	img_unlock(lk);
	return n;
}

/* Digests named by profiles/ (with the names), malloc'd lines
 * "<digest> <name>\n"; "" when none. */
static char *
named_digests(const char *dir)
{
	char p[SBX_PATH_MAX + 16], line[128], *out = calloc(1, 1), *nv;
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	if (out == NULL)
		return NULL;
	snprintf(p, sizeof(p), "%s/profiles", dir);
	if ((d = opendir(p)) == NULL)
		return out;
	while ((de = readdir(d)) != NULL) {
		size_t k;

		if (!sbx_id_ok(de->d_name, SBX_ID_MAX) || img_read_line(dirfd(d),
		    de->d_name, line, sizeof(line)) != 0 || !sbx_digest_ok(line))
			continue;
		k = SBX_DIGEST_HEX + strlen(de->d_name) + 2;
		if ((nv = realloc(out, n + k + 1)) == NULL)
			break;
		out = nv;
		snprintf(out + n, k + 1, "%s %s\n", line, de->d_name);
		n += k;
	}
	closedir(d);
	return out;
}

static int
is_named(const char *named, const char *digest)
{
	const char *l;

	for (l = named; l != NULL && *l != '\0'; l += strcspn(l, "\n") + 1)
		if (strncmp(l, digest, SBX_DIGEST_HEX) == 0)
			return 1;
	return 0;
}

typedef char digest_t[SBX_DIGEST_HEX + 1];

static int
cmp_digest(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* The digests of the images in the store, sorted (malloc'd, count in
 * *n), NULL on error. */
static digest_t *
image_digests(const char *dir, size_t *n)
{
	digest_t *v = NULL, *nv;
	struct dirent *de;
	DIR *d;

	*n = 0;
	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT ? calloc(1, SBX_DIGEST_HEX + 1) : NULL;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);

		if (l != SBX_DIGEST_HEX + strlen(SBX_IMAGE_EXT) ||
		    strcmp(de->d_name + SBX_DIGEST_HEX, SBX_IMAGE_EXT) != 0)
			continue;
		if ((nv = realloc(v, (*n + 1) * sizeof(*v))) == NULL)
			break;
		v = nv;
		memcpy(v[*n], de->d_name, SBX_DIGEST_HEX);
		v[*n][SBX_DIGEST_HEX] = '\0';
		if (sbx_digest_ok(v[*n]))
			(*n)++;
	}
	closedir(d);
	if (v == NULL)
		v = calloc(1, SBX_DIGEST_HEX + 1);
	if (v != NULL)
		qsort(v, *n, sizeof(*v), cmp_digest);
	return v;
}

/* Remove the image, its metadata, its users/ directory and every
 * profile name of it; the store locked. */
static void
remove_locked(const char *dir, const char *digest)
{
	char p[SBX_PATH_MAX + 160], line[128];
	struct dirent *de;
	DIR *d;

	snprintf(p, sizeof(p), "%s/profiles", dir);
	if ((d = opendir(p)) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (de->d_name[0] != '.' && img_read_line(dirfd(d),
			    de->d_name, line, sizeof(line)) == 0 &&
			    strcmp(line, digest) == 0)
				(void)unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	snprintf(p, sizeof(p), "%s/%s" SBX_IMAGE_EXT, dir, digest);
	(void)unlink(p);
	snprintf(p, sizeof(p), "%s/%s.json", dir, digest);
	(void)unlink(p);
	(void)users_locked(dir, digest, 1);
	snprintf(p, sizeof(p), "%s/users/%s", dir, digest);
	(void)rmdir(p);
}

json_t *
sbx_image_list(const char *image_dir, char *err, size_t errlen)
{
	digest_t *v;
	char p[SBX_PATH_MAX + 160], *named;
	json_t *arr = json_array();
	size_t n = 0, i;
	int lk;

	if ((lk = img_lock(image_dir, LOCK_EX)) < 0 && errno != ENOENT) {
		json_decref(arr);
		sbx_err(err, errlen, "%s: %s", image_dir, strerror(errno));
		return NULL;
	}
	v = image_digests(image_dir, &n);
	named = named_digests(image_dir);
	for (i = 0; v != NULL && named != NULL && i < n; i++) {
		json_t *o, *meta, *names = json_array(), *pk;
		struct stat st;
		const char *l;
		json_error_t je;

		snprintf(p, sizeof(p), "%s/%s.json", image_dir, v[i]);
		meta = jsonstrict_load_file(p, 8 << 20, &je);
		for (l = named; *l != '\0'; l += strcspn(l, "\n") + 1)
			if (strncmp(l, v[i], SBX_DIGEST_HEX) == 0) {
				char nm[SBX_ID_MAX + 1];

				snprintf(nm, sizeof(nm), "%.*s", (int)strcspn(
				    l + SBX_DIGEST_HEX + 1, "\n"),
				    l + SBX_DIGEST_HEX + 1);
				json_array_append_new(names, json_string(nm));
			}
		snprintf(p, sizeof(p), "%s/%s" SBX_IMAGE_EXT, image_dir, v[i]);
		if (stat(p, &st) != 0)
			st.st_size = 0;
		pk = json_object_get(meta, "packages");
		o = json_pack("{s:s, s:s, s:I, s:O, s:o, s:i, s:I, s:s}",
		    "digest", v[i], "file", p, "size", (json_int_t)st.st_size,
		    "built", json_object_get(meta, "built") ?
		    json_object_get(meta, "built") : json_null(),
		    "profiles", names,
		    "users", lk >= 0 ? users_locked(image_dir, v[i], 1) : 0,
		    "packages", (json_int_t)(json_is_object(pk) ?
		    json_object_size(pk) : 0),
		    "profile", json_string_value(json_object_get(meta,
		    "profile")) ? json_string_value(json_object_get(meta,
		    "profile")) : "");
		if (o != NULL)
			json_array_append_new(arr, o);
		json_decref(meta);
	}
	img_unlock(lk);
	if (v == NULL || named == NULL) {
		free(v);
		free(named);
		json_decref(arr);
		sbx_err(err, errlen, "%s: %s", image_dir, strerror(errno));
		return NULL;
	}
	free(v);
	free(named);
	return json_pack("{s:o}", "images", arr);
}

int
sbx_image_rm(const char *image_dir, const char *what,
    char digest[SBX_DIGEST_HEX + 1], char *err, size_t errlen)
{
	digest_t *v = NULL;
	size_t n = 0, i, k = strlen(what), found = 0;
	int lk, rc = -1, users;

	digest[0] = '\0';
	if ((lk = img_lock(image_dir, LOCK_EX)) < 0)
		return sbx_err(err, errlen, "%s: %s", image_dir,
		    strerror(errno));
	if (k >= 12 && k <= SBX_DIGEST_HEX && strspn(what,
	    "0123456789abcdef") == k) {
		if ((v = image_digests(image_dir, &n)) == NULL) {
			sbx_err(err, errlen, "%s: %s", image_dir,
			    strerror(errno));
			goto out;
		}
		for (i = 0; i < n; i++)
			if (strncmp(v[i], what, k) == 0) {
				memcpy(digest, v[i], SBX_DIGEST_HEX + 1);
				found++;
			}
		if (found > 1) {
			sbx_err(err, errlen, "%s names %zu images: give more "
			    "digits", what, found);
			goto out;
		}
	}
	if (found == 0 && sbx_image_current(image_dir, what, digest, err,
	    errlen) != 0) {
		sbx_err(err, errlen, "image_missing: no image %s in %s", what,
		    image_dir);
		rc = SBX_IMG_MISSING;
		goto out;
	}
	if ((users = users_locked(image_dir, digest, 1)) != 0) {
		sbx_err(err, errlen, "image_in_use: %.12s is the root of %d "
		    "sandbox%s: destroy %s first", digest, users < 0 ? 0 : users,
		    users == 1 ? "" : "es", users == 1 ? "it" : "them");
		rc = SBX_IMG_IN_USE;
		goto out;
	}
	remove_locked(image_dir, digest);
	rc = 0;
out:
	free(v);
	img_unlock(lk);
	return rc;
}

/* Remove the tree at dirfd/name without following links nor leaving
 * the file system of dirfd (a build's /proc or /dev, should a killed
 * mmdebstrap have left one mounted, is not ours to empty). */
static void
rm_tree_at(int at, const char *name, dev_t dev, int depth)
{
	struct dirent *de;
	struct stat st;
	int fd;
	DIR *d;

	if (unlinkat(at, name, 0) == 0 || (errno != EISDIR &&
	    errno != EPERM) || depth > 64)
		return;
	if ((fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return;
	if (fstat(fd, &st) != 0 || st.st_dev != dev || (d = fdopendir(fd)) ==
	    NULL) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") !=
		    0)
			rm_tree_at(dirfd(d), de->d_name, dev, depth + 1);
	closedir(d);
	(void)unlinkat(at, name, AT_REMOVEDIR);
}

void
sbx_image_rm_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return;
	rm_tree_at(AT_FDCWD, path, st.st_dev, 0);
}

int
sbx_image_sweep(const char *image_dir)
{
	digest_t *v;
	char *named, p[SBX_PATH_MAX + 300];
	struct dirent *de;
	size_t n = 0, i;
	int lk, gone = 0;
	DIR *d;

	if ((lk = img_lock(image_dir, LOCK_EX)) < 0)
		return 0;
	v = image_digests(image_dir, &n);
	named = named_digests(image_dir);
	for (i = 0; v != NULL && named != NULL && i < n; i++)
		if (!is_named(named, v[i]) && users_locked(image_dir, v[i], 1) ==
		    0) {
			remove_locked(image_dir, v[i]);
			gone++;
		}
	free(v);
	free(named);
	/* builds whose builder is gone: their lock is free */
	if ((d = opendir(image_dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			int fd;

			if (strncmp(de->d_name, ".build-", 7) != 0)
				continue;
			snprintf(p, sizeof(p), "%s/%s/lock", image_dir,
			    de->d_name);
			if ((fd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) >= 0 &&
			    flock(fd, LOCK_EX | LOCK_NB) != 0) {
				close(fd);
				continue;       /* building */
			}
			snprintf(p, sizeof(p), "%s/%s", image_dir, de->d_name);
			sbx_image_rm_tree(p);
			if (fd >= 0)
				close(fd);
		}
		closedir(d);
	}
	img_unlock(lk);
	return gone;
}
