/*
 * sbx_cfg.c: sluice-run's parsers (sbx_cfg.h): its configuration, its
 * record files and sluiced's answers, with the checks of names.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "proxy/lib/config_engine.h"
#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/util.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

/* ---- names ---- */

int
sbx_path_system(const char *path)
{
	static const char *const sys[] = { "/bin", "/boot", "/dev", "/etc",
	    "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/sbin",
	    "/sys", "/usr" };
	const char *p;
	size_t i, n;

	if (path[0] != '/')
		return 1;
	/* "/", "/x", "/x/": the root, a top-level directory */
	for (p = path + 1; *p == '/'; p++)
		;
	p += strcspn(p, "/");
	while (*p == '/')
		p++;
	if (*p == '\0')
		return 1;
	for (i = 0; i < sizeof(sys) / sizeof(sys[0]); i++) {
		n = strlen(sys[i]);
		if (strncmp(path, sys[i], n) == 0 && (path[n] == '\0' ||
		    path[n] == '/'))
			return 1;
	}
	return 0;
}

int
sbx_id_ok(const char *s, size_t max)
{
	size_t n = strlen(s), i;

	/* the first character alphanumeric: no ".", "..", ".lock" (the
	 * state directory's own files), nothing that reads as an option */
	if (n == 0 || n > max || !((s[0] >= 'a' && s[0] <= 'z') ||
	    (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

/* Length of the UTF-8 sequence at s[0..n) (1 to 4), its code point in
 * *cp; 0 when it is not valid UTF-8 or cut short (util_utf8_seq). */
static size_t
utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	int k = util_utf8_seq(s, n, cp, NULL);

	return k > 0 ? (size_t)k : 0;
}

static int
is_control(unsigned long cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

/*
 * Characters that change how the text around them reads without being
 * seen: bidirectional controls (a name that shows as "txt.exe" and is
 * "exe.txt"), zero-width and other invisible format characters, line
 * and paragraph separators.
 */
static int
is_format(unsigned long cp)
{
	return cp == 0xad || cp == 0x61c || cp == 0x180e ||
	    (cp >= 0x200b && cp <= 0x200f) ||   /* ZWSP ZWNJ ZWJ LRM RLM */
	    (cp >= 0x2028 && cp <= 0x202e) ||   /* LS PS LRE RLE PDF LRO RLO */
	    (cp >= 0x2060 && cp <= 0x206f) ||   /* WJ, LRI RLI FSI PDI... */
	    cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb) ||
	    (cp >= 0xe0000 && cp <= 0xe007f);   /* tags */
}

int
sbx_user_ok(const char *s)
{
	size_t n = strlen(s), i = 0, k;
	uint32_t cp;

	if (n > SBX_USER_MAX)
		return 0;
	while (i < n) {
		if ((k = utf8_seq((const unsigned char *)s + i, n - i, &cp)) ==
		    0 || is_control(cp))
			return 0;
		i += k;
	}
	return 1;
}

void
sbx_text_safen(const char *s, size_t n, char *out, size_t outlen)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, j = 0, k, m;
	uint32_t cp;

	if (outlen == 0)
		return;
	while (i < n) {
		k = utf8_seq(u + i, n - i, &cp);
		if (k == 0 || is_control(cp) || is_format(cp) || cp == '\\') {
			/* every byte of it, so that nothing of it acts */
			if (k == 0)
				k = 1;
			if (j + 4 * k + 1 > outlen)
				break;
			for (m = 0; m < k; m++, j += 4)
				snprintf(out + j, 5, "\\%03o", u[i + m]);
		} else {
			if (j + k + 1 > outlen)
				break;
			memcpy(out + j, u + i, k);
			j += k;
		}
		i += k;
	}
	out[j] = '\0';
}

void
sbx_text_safe(const char *s, char *out, size_t outlen)
{
	sbx_text_safen(s, strlen(s), out, outlen);
}

/* ---- configuration ---- */

void
sbx_cfg_defaults(struct sbx_cfg *c, const char *state_dir,
    const char *control, const char *shim)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->state_dir, sizeof(c->state_dir), "%s", state_dir);
	snprintf(c->control, sizeof(c->control), "%s", control);
	snprintf(c->shim, sizeof(c->shim), "%s", shim);
	snprintf(c->backend, sizeof(c->backend), "ns");
	snprintf(c->tier, sizeof(c->tier), "registries");
	c->timeout_default = 120;
	c->timeout_max = 1680;
	c->output_cap = 64 * 1024;
	c->max_file_bytes = 64l << 20;
	c->max_per_tenant = 50;
	c->max_per_user = 5;
	c->max_total = 200;
	c->idle_after = 15 * 60;
	c->remove_after = 24 * 3600;
	c->uid_base = 1000000000ul;
	c->slots = SBX_SLOTS_MAX;
	c->lim.memory_bytes = 2048ull << 20;
	c->lim.pids = 512;
	c->lim.cpu_pct = 100;
	c->lim.tmp_bytes = 512ull << 20;
	c->lim.home_bytes = 1024ull << 20;
	c->lim.fsize_bytes = 1024ull << 20;
	c->lim.nofile = 1024;
	c->lim.nproc = 512;
	snprintf(c->image_dir, sizeof(c->image_dir), "/var/lib/sluice-run/"
	    "images");
	snprintf(c->profiles_dir, sizeof(c->profiles_dir), "/etc/sluice/"
	    "profiles");
	snprintf(c->profile, sizeof(c->profile), "host");
}

/* ---- the rows (proxy/lib/config_engine.h): sluice-run's file is read
 * as the daemons' are, its errors "NAME:LINE:COL: PATH: what" ---- */

/* A line of text without control characters. */
static int
cfg_line_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

/* A profile's name: "host" or an id. */
static int
cfg_profile_name_ok(const char *s)
{
	return strcmp(s, "host") == 0 || sbx_id_ok(s, SBX_ID_MAX);
}

static int
k_backend(struct cfg_ctx *x, json_t *v, void *base)
{
	struct sbx_cfg *c = base;
	char b[80];

	if (cfg_get_buf(x, v, sizeof(c->backend), 0, c->backend) != 0)
		return -1;
	if (c->backend[0] == '\0' || sbx_backend_find(c->backend) == NULL)
		return cfg_fail(x, "unknown backend %s (expected ns or gvisor)",
		    cfg_shown(c->backend, b, sizeof(b)));
	return 0;
}

static int
k_tier(struct cfg_ctx *x, json_t *v, void *base)
{
	struct sbx_cfg *c = base;
	char b[80];

	if (cfg_get_buf(x, v, sizeof(c->tier), 0, c->tier) != 0)
		return -1;
	if (!sbx_id_ok(c->tier, sizeof(c->tier) - 1))
		return cfg_fail(x, "bad tier name %s (expected off, "
		    "registries, public or another of sluiced's)", cfg_shown(c->tier, b,
		    sizeof(b)));
	return 0;
}

static int
k_workspace_root(struct cfg_ctx *x, json_t *v, void *base)
{
	struct sbx_cfg *c = base;

	if (cfg_get_buf(x, v, sizeof(c->workspace_root), 0,
	    c->workspace_root) != 0)
		return -1;
	if (c->workspace_root[0] != '\0' && sbx_path_system(c->workspace_root))
		return cfg_fail(x, "expected an absolute path below a "
		    "top-level directory, not in /etc, /usr, /root and the "
		    "like");
	return 0;
}

/* image_dir, profiles_dir, shim_static: absolute paths of one line
 * (KF_OWN: "" allowed, none) */
#define XKF_NONE_OK	KF_OWN

static int
rd_dir(struct cfg_ctx *x, const struct cfg_key *k, json_t *v, void *field)
{
	char *s = field;

	if (cfg_get_buf(x, v, k->size, 0, s) != 0)
		return -1;
	if (s[0] == '\0' && (k->flags & XKF_NONE_OK))
		return 0;
	if (s[0] != '/' || !cfg_line_ok(s))
		return cfg_fail(x, "expected an absolute path of one line%s",
		    k->flags & XKF_NONE_OK ? " (or \"\", none)" : "");
	return 0;
}

static int
k_profile(struct cfg_ctx *x, json_t *v, void *base)
{
	struct sbx_cfg *c = base;
	char b[80];

	if (cfg_get_buf(x, v, sizeof(c->profile), 0, c->profile) != 0)
		return -1;
	if (!cfg_profile_name_ok(c->profile))
		return cfg_fail(x, "bad profile name %s (expected \"host\" or "
		    "a profile's name)", cfg_shown(c->profile, b, sizeof(b)));
	return 0;
}

static int
k_image_suite(struct cfg_ctx *x, json_t *v, void *base)
{
	struct sbx_cfg *c = base;
	char b[80];

	if (cfg_get_buf(x, v, sizeof(c->image_suite), 0, c->image_suite) != 0)
		return -1;
	if (c->image_suite[0] != '\0' && !sbx_id_ok(c->image_suite,
	    sizeof(c->image_suite) - 1))
		return cfg_fail(x, "bad suite name %s (expected bookworm or "
		    "the like)", cfg_shown(c->image_suite, b, sizeof(b)));
	return 0;
}

/* image_sources: apt lines ("deb ..."), kept one a line. */
static int
k_image_sources(struct cfg_ctx *x, json_t *v, void *base)
{
	struct sbx_cfg *c = base;
	size_t i, n = 0, k;
	const char *l;
	json_t *e;

	c->image_sources[0] = '\0';
	if (!json_is_array(v) || json_array_size(v) > 32)
		return cfg_fail(x, "expected an array of at most 32 apt lines");
	json_array_foreach(v, i, e) {
		cfg_ctx_idx(x, i);
		if (cfg_get_str(x, e, &l) != 0)
			return -1;
		if (strncmp(l, "deb ", 4) != 0 || !cfg_line_ok(l))
			return cfg_fail(x, "expected a line \"deb URI SUITE "
			    "COMPONENT...\"");
		k = strlen(l);
		if (n + k + 2 > sizeof(c->image_sources))
			return cfg_fail(x, "the lines are over %zu bytes in "
			    "all", sizeof(c->image_sources));
		memcpy(c->image_sources + n, l, k);
		n += k;
		c->image_sources[n++] = '\n';
		c->image_sources[n] = '\0';
		cfg_ctx_pop(x);
	}
	return 0;
}

/* tenant_profiles: { "TENANT" or "*": [profile, ...] }, kept as one
 * "TENANT P1 P2" line each (sluice-execd keeps the same table). */
int
sbx_tenant_profiles_read(struct cfg_ctx *x, json_t *v, char *tab,
    size_t tablen)
{
	const char *t, *p;
	json_t *a, *e;
	size_t i, n = 0, k;
	char b[80];

	tab[0] = '\0';
	if (!json_is_object(v))
		return cfg_fail(x, "expected an object of tenant: [profile, "
		    "...]");
	json_object_foreach(v, t, a) {
		cfg_ctx_key(x, t);
		if (strcmp(t, "*") != 0 && !sbx_id_ok(t, SBX_ID_MAX))
			return cfg_fail_key(x, "expected a tenant's id or "
			    "\"*\"");
		if (!json_is_array(a))
			return cfg_fail(x, "expected an array of profile "
			    "names");
		k = strlen(t);
		if (n + k + 2 > tablen)
			goto toolong;
		memcpy(tab + n, t, k);
		n += k;
		json_array_foreach(a, i, e) {
			cfg_ctx_idx(x, i);
			if (cfg_get_str(x, e, &p) != 0)
				return -1;
			if (!cfg_profile_name_ok(p))
				return cfg_fail(x, "bad profile name %s",
				    cfg_shown(p, b, sizeof(b)));
			k = strlen(p);
			if (n + k + 3 > tablen)
				goto toolong;
			tab[n++] = ' ';
			memcpy(tab + n, p, k);
			n += k;
			cfg_ctx_pop(x);
		}
		tab[n++] = '\n';
		tab[n] = '\0';
		cfg_ctx_pop(x);
	}
	return 0;
toolong:
	return cfg_fail(x, "the table is over %zu bytes in all", tablen);
}

static int
k_tenant_profiles(struct cfg_ctx *x, json_t *v, void *base)
{
	struct sbx_cfg *c = base;

	return sbx_tenant_profiles_read(x, v, c->tenant_profiles,
	    sizeof(c->tenant_profiles));
}

/* false is "off", true "auto" (kept as "": the host's) */
static int
k_cgroups(struct cfg_ctx *x, json_t *v, void *base)
{
	struct sbx_cfg *c = base;
	const char *s = json_is_false(v) ? "off" : json_is_true(v) ? "auto" :
	    json_string_value(v);
	char b[80];

	if (s == NULL)
		return cfg_fail(x, "expected a string or true or false");
	if (strcmp(s, "auto") && strcmp(s, "v1") && strcmp(s, "v2") &&
	    strcmp(s, "off"))
		return cfg_fail(x, "unknown cgroups %s (expected \"auto\", "
		    "\"v1\", \"v2\" or \"off\")", cfg_shown(s, b, sizeof(b)));
	snprintf(c->cgroups, sizeof(c->cgroups), "%s", strcmp(s, "auto") ?
	    s : "");
	return 0;
}

#define LIM(k, f, m) { k, K_U64, .off = offsetof(struct sbx_limits, f), \
	.lo = 0, .hi = INT64_MAX >> 21, .mult = (m) }

static const struct cfg_key lim_keys[] = {
	LIM("memory_mb", memory_bytes, 1 << 20),
	LIM("pids", pids, 1),
	LIM("cpu_pct", cpu_pct, 1),
	LIM("tmp_mb", tmp_bytes, 1 << 20),
	LIM("home_mb", home_bytes, 1 << 20),
	LIM("fsize_mb", fsize_bytes, 1 << 20),
	LIM("nofile", nofile, 1),
	LIM("nproc", nproc, 1),
	{ .name = NULL }
};

#define BUF(k, f) { k, K_BUF, .off = offsetof(struct sbx_cfg, f), \
	.size = sizeof(((struct sbx_cfg *)0)->f) }
#define DIR(k, f, fl) { k, K_FN, .off = offsetof(struct sbx_cfg, f), \
	.size = sizeof(((struct sbx_cfg *)0)->f), .rd = rd_dir, .flags = (fl) }
#define NUM(k, f, l, h) { k, K_LONG, .off = offsetof(struct sbx_cfg, f), \
	.lo = (l), .hi = (h) }

static const struct cfg_key cfg_keys[] = {
	BUF("state_dir", state_dir),
	BUF("control", control),
	BUF("shim", shim),
	{ "backend", K_FN, .fn = k_backend },
	{ "tier", K_FN, .fn = k_tier },
	/* timeout: under timeout_max too, once both are read */
	NUM("timeout", timeout_default, 1, 1680),
	NUM("timeout_max", timeout_max, 1, 1680),
	NUM("output_cap", output_cap, 0, 64l << 20),
	NUM("max_file_bytes", max_file_bytes, 1, 1l << 40),
	NUM("max_per_tenant", max_per_tenant, 0, 1000000),
	NUM("max_per_user", max_per_user, 0, 1000000),
	NUM("max_total", max_total, 0, 1000000),
	NUM("idle_after", idle_after, 0, LONG_MAX / 2),
	NUM("remove_after", remove_after, 0, LONG_MAX / 2),
	NUM("uid_base", uid_base, 65536, 4000000000l - 65536l * SBX_SLOTS_MAX),
	{ "cgroups", K_FN, .fn = k_cgroups },
	{ "limits", K_OBJ, .off = offsetof(struct sbx_cfg, lim),
	    .sub = lim_keys },
	{ "workspace_root", K_FN, .fn = k_workspace_root },
	DIR("image_dir", image_dir, 0),
	DIR("profiles_dir", profiles_dir, XKF_NONE_OK),
	{ "profile", K_FN, .fn = k_profile },
	DIR("shim_static", shim_static, XKF_NONE_OK),
	{ "image_suite", K_FN, .fn = k_image_suite },
	{ "image_sources", K_FN, .fn = k_image_sources },
	{ "tenant_profiles", K_FN, .fn = k_tenant_profiles },
	{ .name = NULL }
};

int
sbx_cfg_parse(struct sbx_cfg *c, const char *text, size_t len,
    const char *name, char *err, size_t errlen)
{
	struct cfg_ctx x;
	json_t *o;
	int rc = -1;

	cfg_ctx_init(&x, text, len, name, err, errlen);
	if ((o = cfg_parse_text(&x)) == NULL)
		return -1;
	if (cfg_walk_object(&x, o, cfg_keys, c) != 0)
		goto out;
	if (json_object_get(o, "timeout") == NULL) {
		/* a timeout_max under the default timeout lowers the
		 * default: else every exec without --timeout would be
		 * refused */
		if (c->timeout_default > c->timeout_max)
			c->timeout_default = c->timeout_max;
	} else if (c->timeout_default > c->timeout_max) {
		cfg_ctx_key(&x, "timeout");
		cfg_fail(&x, "%ld is out of range (1..%ld, timeout_max)",
		    c->timeout_default, c->timeout_max);
		goto out;
	}
	rc = 0;
out:
	json_decref(o);
	return rc;
}

int
sbx_cfg_profile_ok(const struct sbx_cfg *c, const char *tenant,
    const char *profile)
{
	return sbx_profile_allowed(c->tenant_profiles, tenant, profile);
}

int
sbx_profile_allowed(const char *tab, const char *tenant, const char *profile)
{
	const char *line, *want[2] = { tenant, "*" };
	size_t tl, pl = strlen(profile);
	int w;

	if (tab[0] == '\0')
		return 1;
	/* the tenant's own line decides; only without one the "*" line */
	for (w = 0; w < 2; w++) {
		if (want[w] == NULL || want[w][0] == '\0')
			continue;
		tl = strlen(want[w]);
		for (line = tab; *line != '\0';
		    line += strcspn(line, "\n") + 1) {
			const char *p, *end = line + strcspn(line, "\n");

			if (strncmp(line, want[w], tl) != 0 || (line[tl] != ' ' &&
			    line[tl] != '\n'))
				continue;
			for (p = line + tl; p < end; p += strcspn(p, " \n")) {
				p++;
				if ((size_t)(end - p) >= pl && strncmp(p, profile,
				    pl) == 0 && (p[pl] == ' ' || p[pl] == '\n'))
					return 1;
			}
			return 0;
		}
	}
	return 0;
}

/* path's bytes (at most max) into *buf (malloc'd, NUL-terminated). */
static int
read_all(const char *path, size_t max, char **buf, size_t *len, char *err,
    size_t errlen)
{
	char *b = NULL;
	size_t n = 0;
	ssize_t k;
	int fd;

	*buf = NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return sbx_err(err, errlen, "%s: %s", path, strerror(errno));
	if ((b = malloc(max + 2)) == NULL) {
		close(fd);
		return sbx_err(err, errlen, "out of memory");
	}
	while (n <= max && (k = read(fd, b + n, max + 1 - n)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			sbx_err(err, errlen, "%s: %s", path, strerror(errno));
			goto fail;
		}
		n += (size_t)k;
	}
	if (n > max) {
		sbx_err(err, errlen, "%s: larger than %zu bytes", path, max);
		goto fail;
	}
	close(fd);
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
fail:
	close(fd);
	free(b);
	return -1;
}

int
sbx_cfg_load(struct sbx_cfg *c, const char *path, char *err, size_t errlen)
{
	char *buf;
	size_t len;
	int rc;

	if (read_all(path, SBX_CFG_FILE_MAX, &buf, &len, err, errlen) != 0)
		return -1;
	rc = sbx_cfg_parse(c, buf, len, path, err, errlen);
	free(buf);
	return rc;
}

/* ---- records ---- */

static json_t *
lim_json(const struct sbx_limits *l)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
	    "memory_bytes", (json_int_t)l->memory_bytes,
	    "pids", (json_int_t)l->pids, "cpu_pct", (json_int_t)l->cpu_pct,
	    "tmp_bytes", (json_int_t)l->tmp_bytes,
	    "home_bytes", (json_int_t)l->home_bytes,
	    "fsize_bytes", (json_int_t)l->fsize_bytes,
	    "nofile", (json_int_t)l->nofile, "nproc", (json_int_t)l->nproc);
}

json_t *
sbx_rec_json(const struct sbx_rec *r)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:b,s:b,s:I,s:I,"
	    "s:I,s:s,s:s,s:I,s:I,s:I,s:I,s:i,s:I,s:I,s:I,s:I,s:b,s:s,s:s,s:s,"
	    "s:o,s:s,s:s,s:s}",
	    "chat", r->chat, "id", r->id, "tenant", r->tenant, "user", r->user,
	    "tier", r->tier, "backend", r->backend, "dir", r->dir,
	    "workspace", r->workspace, "workspace_made", r->workspace_made,
	    "workspace_given", r->workspace_given,
	    "workspace_uid", (json_int_t)r->workspace_uid,
	    "workspace_gid", (json_int_t)r->workspace_gid,
	    "workspace_mode", (json_int_t)r->workspace_mode,
	    "session_dir", r->session_dir, "shim", r->shim,
	    "uid_base", (json_int_t)r->uid_base,
	    "uid_count", (json_int_t)r->uid_count,
	    "host_uid", (json_int_t)r->host_uid,
	    "host_gid", (json_int_t)r->host_gid, "slot", r->slot,
	    "init_pid", (json_int_t)r->init_pid,
	    "init_start", (json_int_t)r->init_start,
	    "created", (json_int_t)r->created,
	    "last_used", (json_int_t)r->last_used,
	    "suspended", r->suspended, "cgroup", r->cgroup, "note", r->note,
	    "backend_data", r->backend_data, "limits", lim_json(&r->lim),
	    "profile", r->profile, "image", r->image,
	    "image_path", r->image_path);
}

/* A string field: missing is "", too long is an error (never cut). */
static int
rec_s(json_t *o, const char *k, char *out, size_t len, char *err,
    size_t errlen)
{
	json_t *v = json_object_get(o, k);

	out[0] = '\0';
	if (v == NULL)
		return 0;
	if (!json_is_string(v) || json_string_length(v) >= len ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return sbx_err(err, errlen, "record: %s: a string under %zu "
		    "bytes", k, len);
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/* An integer field from lo to hi; missing is 0. */
static int
rec_i(json_t *o, const char *k, int64_t lo, int64_t hi, int64_t *out,
    char *err, size_t errlen)
{
	json_t *v = json_object_get(o, k);

	*out = 0;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi)
		return sbx_err(err, errlen, "record: %s: an integer from "
		    "%lld to %lld", k, (long long)lo, (long long)hi);
	*out = (int64_t)json_integer_value(v);
	return 0;
}

static int
rec_b(json_t *o, const char *k, int *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, k);

	*out = 0;
	if (v == NULL)
		return 0;
	if (!json_is_boolean(v))
		return sbx_err(err, errlen, "record: %s: a boolean", k);
	*out = json_is_true(v);
	return 0;
}

/* digest: 64 lower-case hex digits; path: absolute, ending in
 * "/<digest>.erofs", without "." or ".." components. */
static int
rec_image_ok(const char *digest, const char *path)
{
	size_t i, n = strlen(path);

	for (i = 0; digest[i] != '\0'; i++)
		if (!((digest[i] >= '0' && digest[i] <= '9') ||
		    (digest[i] >= 'a' && digest[i] <= 'f')))
			return 0;
	if (i != 64 || path[0] != '/' || n < 72 || path[n - 71] != '/' ||
	    strncmp(path + n - 70, digest, 64) != 0 ||
	    strcmp(path + n - 6, ".erofs") != 0 || strstr(path, "/./") ||
	    strstr(path, "/../") || strstr(path, "//") || !cfg_line_ok(path))
		return 0;
	return 1;
}

static int
rec_apply(struct sbx_rec *r, json_t *o, char *err, size_t errlen)
{
	static const struct {
		const char *k;
		size_t off, len;
	} strs[] = {
#define S_(f) { #f, offsetof(struct sbx_rec, f), \
	sizeof(((struct sbx_rec *)0)->f) }
		S_(chat), S_(id), S_(tenant), S_(user), S_(tier), S_(backend),
		S_(dir), S_(workspace), S_(session_dir), S_(shim), S_(cgroup),
		S_(note), S_(backend_data), S_(profile), S_(image),
		S_(image_path),
#undef S_
	};
	static const char *const lims[] = { "memory_bytes", "pids",
	    "cpu_pct", "tmp_bytes", "home_bytes", "fsize_bytes", "nofile",
	    "nproc" };
	uint64_t *limv[] = { &r->lim.memory_bytes, &r->lim.pids,
	    &r->lim.cpu_pct, &r->lim.tmp_bytes, &r->lim.home_bytes,
	    &r->lim.fsize_bytes, &r->lim.nofile, &r->lim.nproc };
	const int64_t uid_hi = (int64_t)UINT32_MAX - 1;
	int64_t v[13];
	json_t *l;
	size_t i;

	if (!json_is_object(o))
		return sbx_err(err, errlen, "record: not a JSON object");
	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (rec_s(o, strs[i].k, (char *)r + strs[i].off, strs[i].len,
		    err, errlen) != 0)
			return -1;
	if (!sbx_id_ok(r->chat, SBX_ID_MAX))
		return sbx_err(err, errlen, "record: chat: a chat id");
	if (r->id[0] != '\0' && !sbx_id_ok(r->id, SBX_ID_MAX))
		return sbx_err(err, errlen, "record: id: a chat id");
	/* an image is a file of a store named by its digest: a record may
	 * not have a backend mount something else as a root */
	if (r->profile[0] != '\0' && !cfg_profile_name_ok(r->profile))
		return sbx_err(err, errlen, "record: profile: a profile name");
	if (r->image[0] != '\0' && !rec_image_ok(r->image, r->image_path))
		return sbx_err(err, errlen, "record: image: a sha256 and "
		    "image_path /.../<it>.erofs");
	if (r->image[0] == '\0' && r->image_path[0] != '\0')
		return sbx_err(err, errlen, "record: image_path without image");
	if (rec_b(o, "workspace_made", &r->workspace_made, err, errlen) ||
	    rec_b(o, "workspace_given", &r->workspace_given, err, errlen) ||
	    rec_i(o, "workspace_uid", 0, uid_hi, &v[10], err, errlen) ||
	    rec_i(o, "workspace_gid", 0, uid_hi, &v[11], err, errlen) ||
	    rec_i(o, "workspace_mode", 0, 07777, &v[12], err, errlen) ||
	    rec_b(o, "suspended", &r->suspended, err, errlen) ||
	    rec_i(o, "uid_base", 0, uid_hi, &v[0], err, errlen) ||
	    rec_i(o, "uid_count", 0, uid_hi, &v[1], err, errlen) ||
	    rec_i(o, "host_uid", 0, uid_hi, &v[2], err, errlen) ||
	    rec_i(o, "host_gid", 0, uid_hi, &v[3], err, errlen) ||
	    rec_i(o, "slot", -1, SBX_SLOTS_MAX - 1, &v[4], err, errlen) ||
	    rec_i(o, "init_pid", 0, INT_MAX, &v[5], err, errlen) ||
	    rec_i(o, "init_start", 0, INT64_MAX, &v[6], err, errlen) ||
	    rec_i(o, "created", 0, INT64_MAX, &v[7], err, errlen) ||
	    rec_i(o, "last_used", 0, INT64_MAX, &v[8], err, errlen))
		return -1;
	r->uid_base = (uid_t)v[0];
	r->uid_count = (uid_t)v[1];
	r->host_uid = (uid_t)v[2];
	r->host_gid = (gid_t)v[3];
	r->slot = (int)v[4];
	r->init_pid = (pid_t)v[5];
	r->init_start = (uint64_t)v[6];
	r->created = v[7];
	r->last_used = v[8];
	r->workspace_uid = (uid_t)v[10];
	r->workspace_gid = (gid_t)v[11];
	r->workspace_mode = (unsigned)v[12];
	if ((l = json_object_get(o, "limits")) != NULL) {
		if (!json_is_object(l))
			return sbx_err(err, errlen, "record: limits: an object");
		for (i = 0; i < sizeof(lims) / sizeof(lims[0]); i++) {
			if (rec_i(l, lims[i], 0, INT64_MAX, &v[9], err,
			    errlen) != 0)
				return -1;
			*limv[i] = (uint64_t)v[9];
		}
	}
	return 0;
}

int
sbx_rec_parse(struct sbx_rec *r, const char *text, size_t len, char *err,
    size_t errlen)
{
	json_error_t je;
	json_t *o;
	int rc;

	memset(r, 0, sizeof(*r));
	o = jsonstrict_load(text, len, &je);
	if (o == NULL) {
		char t[4 * sizeof(je.text)];

		sbx_text_safe(je.text, t, sizeof(t));
		return sbx_err(err, errlen, "record:%d: %s", je.line, t);
	}
	rc = rec_apply(r, o, err, errlen);
	json_decref(o);
	return rc;
}

int
sbx_rec_load(struct sbx_rec *r, const char *path, char *err, size_t errlen)
{
	char *buf;
	size_t len;
	int rc;

	memset(r, 0, sizeof(*r));
	if (read_all(path, SBX_REC_FILE_MAX, &buf, &len, err, errlen) != 0)
		return -1;
	rc = sbx_rec_parse(r, buf, len, err, errlen);
	free(buf);
	return rc;
}

/* ---- sluiced's answers ---- */

int
sbx_http_split(const char *buf, size_t len, int *status, const char **body)
{
	const char *p;
	int i;

	*status = -1;
	*body = NULL;
	/* the body is read as a C string: an answer with a NUL byte in it
	 * could mean something else to another reader, so it is not one */
	if (buf == NULL || len < 12 || memchr(buf, '\0', len) != NULL ||
	    strncmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ')
		return -1;
	for (i = 9; i < 12; i++)
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
	*status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] -
	    '0');
	if ((p = strstr(buf, "\r\n\r\n")) != NULL)
		*body = p + 4;
	return 0;
}

const char *
sbx_broker_msg(const char *body, char *buf, size_t len)
{
	json_t *o = body ? jsonstrict_load(body, strlen(body), NULL) : NULL;
	json_t *ev = json_object_get(o, "error");
	/* {"error":"text"} or {"error":{"code":..,"message":"text"}} */
	const char *e = json_is_object(ev) ? json_string_value(
	    json_object_get(ev, "message")) : json_string_value(ev);
	char line[512];

	snprintf(line, sizeof(line), "%s", e ? e : body ? body : "");
	json_decref(o);
	line[strcspn(line, "\r\n")] = '\0';
	sbx_text_safe(line, buf, len);
	return buf;
}

int
sbx_broker_socket(const char *body, char *dir, size_t dirlen, char *err,
    size_t errlen)
{
	json_t *o = body ? jsonstrict_load(body, strlen(body), NULL) : NULL;
	const char *sock = json_string_value(json_object_get(o, "socket"));
	const char *slash;
	size_t n;
	int rc = -1;

	if (sock == NULL || sock[0] != '/') {
		sbx_err(err, errlen, "no Unix socket in the answer");
		goto out;
	}
	slash = strrchr(sock, '/');
	n = (size_t)(slash - sock);
	if (n == 0 || n >= dirlen || slash[1] == '\0') {
		sbx_err(err, errlen, "unusable socket path in the answer");
		goto out;
	}
	memcpy(dir, sock, n);
	dir[n] = '\0';
	rc = 0;
out:
	json_decref(o);
	return rc;
}
