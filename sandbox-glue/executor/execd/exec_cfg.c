/*
 * exec_cfg.c: sluice-execd's configuration.  Embedded defaults, then a
 * JSON file over them, read by sluiced's engine (proxy/lib/
 * config_engine.h) against the rows below: unknown keys, wrong types and
 * values out of range are refused as sluiced.json's are,
 * "file:line:column: key.path: what".
 *
 * Token files hold one bearer token each; only its SHA-256 is kept, the
 * text is wiped once hashed.
 */
#include "sluice-config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "proxy/lib/config.h"
#include "proxy/lib/config_engine.h"
#include "proxy/lib/httpauth.h"
#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/execd/exec_os-int.h"

#ifndef SLUICE_SHIM_PATH
#define SLUICE_SHIM_PATH "/usr/local/bin/sluice-shim"
#endif

#define CFG_FILE_MAX	(1 << 20)

void
xd_sha256(const void *s, size_t n, unsigned char out[32])
{
	unsigned int len = 32;

	if (EVP_Digest(s, n, out, &len, EVP_sha256(), NULL) != 1)
		memset(out, 0, 32);
}

const struct xd_token *
xd_token_find(const struct xd_cfg *c, const char *tok)
{
	unsigned char d[HTTPAUTH_DIGEST_LEN];
	const struct xd_token *hit = NULL;
	size_t i;

	if (httpauth_digest(tok, d) != 0)
		return NULL;
	/* every hash compared, in constant time: the timing says nothing
	 * of which token came close */
	for (i = 0; i < c->ntokens; i++)
		if (httpauth_same(d, c->tokens[i].digest))
			hit = &c->tokens[i];
	OPENSSL_cleanse(d, sizeof(d));
	return hit;
}

void
xd_cfg_defaults(struct xd_cfg *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->runtime_dir, sizeof(c->runtime_dir), "/run/sluice-execd");
	snprintf(c->state_dir, sizeof(c->state_dir), "/var/lib/sluice-execd");
	snprintf(c->control, sizeof(c->control), "/run/sluice/control.sock");
	c->control_timeout_ms = 10000;
	snprintf(c->shim, sizeof(c->shim), "%s", SLUICE_SHIM_PATH);
	snprintf(c->mke2fs, sizeof(c->mke2fs), "/usr/sbin/mke2fs");
	/* sluice-run's store: "sluice-run image build" fills it */
	snprintf(c->image_dir, sizeof(c->image_dir),
	    "/var/lib/sluice-run/images");
	snprintf(c->profile, sizeof(c->profile), "%s", SBX_PROFILE_HOST);
	snprintf(c->shim_static, sizeof(c->shim_static), "%s",
	    SLUICE_SHIM_STATIC_PATH);
	snprintf(c->audit_log, sizeof(c->audit_log),
	    "/var/log/sluice/execd.jsonl");
	snprintf(c->backend, sizeof(c->backend), "ns");
	snprintf(c->tier, sizeof(c->tier), "off");
	/* apart from sluice-run's ranges (1000000000...): both may run on
	 * one host while sluice-run moves onto the API */
	c->uid_base = 1200000000ul;
	c->slots = 1024;
	c->socket_mode = 0660;
	c->def.sbx.memory_bytes = 2048ull << 20;
	c->def.sbx.pids = 512;
	c->def.sbx.cpu_pct = 100;
	c->def.sbx.tmp_bytes = 512ull << 20;
	c->def.sbx.home_bytes = 1024ull << 20;
	c->def.sbx.fsize_bytes = 1024ull << 20;
	c->def.sbx.nofile = 1024;
	c->def.sbx.nproc = 512;
	c->def.timeout_s = 120;
	c->def.output_cap = 64 * 1024;
	c->def.disk_bytes = 1024ull << 20;
	c->def.inodes = 65536;
	c->max.sbx.memory_bytes = 8192ull << 20;
	c->max.sbx.pids = 4096;
	c->max.sbx.cpu_pct = 400;
	c->max.sbx.tmp_bytes = 4096ull << 20;
	c->max.sbx.home_bytes = 8192ull << 20;
	c->max.sbx.fsize_bytes = 8192ull << 20;
	c->max.sbx.nofile = 65536;
	c->max.sbx.nproc = 4096;
	c->max.timeout_s = 28 * 60;
	c->max.output_cap = 64l << 20;
	c->max.disk_bytes = 16384ull << 20;
	c->max.inodes = 1048576;
	c->max_total = 200;
	c->max_per_tenant = 50;
	c->max_per_user = 5;
	c->max_creates = 4;
	c->disk_reserve = 1024ull << 20;
	c->max_background = 16;
	c->max_cmds = 256;
	c->max_cmds_tenant = 64;
	c->idle_after = 600;
	c->remove_after = 86400;
	c->arch_max_age = 30 * 86400;
	c->arch_max_count = 100;
	c->arch_max_bytes = 10240ull << 20;
	snprintf(c->archive_dir, sizeof(c->archive_dir), "%.400s/.archive",
	    c->state_dir);
	c->keep_finished = 32;
	c->max_file_bytes = 64ull << 20;
	c->max_body_bytes = 1 << 20;
	c->max_archive_bytes = 256ull << 20;
	c->ring_bytes = 1 << 20;
	/* 48 x 2 rings of 1 MiB per sandbox would pin 96 MiB each after
	 * their commands ended: one budget for the host instead */
	c->ring_budget = 256ull << 20;
	c->stream_watermark = 256 * 1024;
	c->events_buffer = 1024 * 1024;
	c->drain_s = 10;
	c->reply_buffer = 256 * 1024;
	c->reply_total = 32ull << 20;
	c->reply_timeout_ms = 30000;
	/* an app's backend holds a connection per exec it waits on and per
	 * event stream, for many chats at once, from one address: the caps
	 * are for what a peer without a token can hold (a head at most),
	 * not for how busy an app may be */
	c->tcp_max_conns = 1024;
	c->tcp_max_conns_per_peer = 256;
	c->tcp_head_timeout_ms = 10000;
	c->tcp_fd_reserve = 64;
	c->art.file_bytes = 20ull << 20;
	c->art.count = 20;
	c->art.total_bytes = 50ull << 20;
	c->snap_entries = 10000;
	c->pool_fills = 1;
}

void
xd_key(const char *tenant, const char *id, char out[SBX_ID_MAX + 1])
{
	unsigned char d[32];
	char *buf;
	size_t tl = strlen(tenant), il = strlen(id), i, n;

	if (tl == 0 || (buf = malloc(tl + il + 1)) == NULL) {
		snprintf(out, SBX_ID_MAX + 1, "%s", id);
		return;
	}
	memcpy(buf, tenant, tl);
	buf[tl] = '\0';
	memcpy(buf + tl + 1, id, il);
	xd_sha256(buf, tl + il + 1, d);
	free(buf);
	n = il < XD_KEY_PREFIX ? il : XD_KEY_PREFIX;
	memcpy(out, id, n);
	out[n++] = '.';
	for (i = 0; i < 4; i++)
		snprintf(out + n + 2 * i, 3, "%02x", d[i]);
}

long
xd_cfg_creates_tenant(const struct xd_cfg *c)
{
	long n = c->max_creates_tenant > 0 ? c->max_creates_tenant :
	    c->max_creates / 2;

	/* a share, not a floor: with quotas.creates 1 the one create may
	 * be any tenant's */
	if (n < 1)
		n = 1;
	return n > c->max_creates ? c->max_creates : n;
}

/* ---- the rows ----
 *
 * One row per key (proxy/lib/config_engine.h): its kind, field, range;
 * the engine reads a value of the row's kind, refuses unknown keys and
 * words every error "FILE:LINE:COL: PATH: what", as for sluiced.json.
 * The defaults stay in xd_cfg_defaults; checks that involve two keys or
 * a file run once everything is read (cfg_after). */

#define XKF_GROUPS	KF_OWN          /* ids: groups, not users */
#define XKF_STRMODE	(KF_OWN << 1)   /* a mode as a string only */
#define U64_ANY		(long long)(UINT64_MAX >> 1)
#define MB		(1ull << 20)

static enum xd_role
role_of(const char *s)
{
	if (strcmp(s, "admin") == 0)
		return XD_ROLE_ADMIN;
	if (strcmp(s, "app") == 0)
		return XD_ROLE_APP;
	if (strcmp(s, "auditor") == 0)
		return XD_ROLE_AUDITOR;
	return XD_ROLE_NONE;
}

/* uids (users) or gids (XKF_GROUPS): numbers or names. */
static int
rd_ids(struct cfg_ctx *x, const struct cfg_key *k, json_t *a, void *field)
{
	struct xd_ids *ids = field;
	int groups = (k->flags & XKF_GROUPS) != 0;
	char b[80];
	json_t *v;
	size_t i;

	if (!json_is_array(a) || json_array_size(a) > 64)
		return cfg_fail(x, "expected an array of at most 64 %s",
		    groups ? "group names or gids" : "user names or uids");
	ids->n = 0;
	json_array_foreach(a, i, v) {
		const char *s = json_string_value(v);

		cfg_ctx_idx(x, i);
		if (json_is_integer(v) && json_integer_value(v) >= 0 &&
		    json_integer_value(v) < 4294967295ll) {
			ids->v[ids->n++] = (uint32_t)json_integer_value(v);
		} else if (s != NULL && groups) {
			struct group *g = getgrnam(s);

			if (g == NULL)
				return cfg_fail(x, "no group %s",
				    cfg_shown(s, b, sizeof(b)));
			ids->v[ids->n++] = g->gr_gid;
		} else if (s != NULL) {
			struct passwd *pw = getpwnam(s);

			if (pw == NULL)
				return cfg_fail(x, "no user %s",
				    cfg_shown(s, b, sizeof(b)));
			ids->v[ids->n++] = pw->pw_uid;
		} else {
			return cfg_fail(x, "expected a name or a number");
		}
		cfg_ctx_pop(x);
	}
	return 0;
}

/* A socket's group (socket.group, control.socket_group: null none):
 * a group's name or a number, its gid kept. */
static int
k_sock_group(struct cfg_ctx *x, json_t *v, void *base)
{
	struct xd_cfg *c = base;
	struct group *g;
	char *end, b[80];
	unsigned long n;

	if (json_is_null(v) && strcmp(x->path[x->depth - 1].key,
	    "socket_group") == 0) {
		c->socket_group[0] = '\0';
		return 0;
	}
	if (cfg_get_buf(x, v, sizeof(c->socket_group), 0,
	    c->socket_group) != 0)
		return -1;
	if (!c->socket_group[0])
		return 0;
	g = getgrnam(c->socket_group);
	n = strtoul(c->socket_group, &end, 10);
	if (g != NULL)
		c->socket_gid = g->gr_gid;
	else if (*end == '\0' && isdigit((unsigned char)c->socket_group[0]))
		c->socket_gid = (gid_t)n;
	else
		return cfg_fail(x, "no group %s", cfg_shown(c->socket_group, b,
		    sizeof(b)));
	return 0;
}

/* The API socket's mode: the owner keeps rw (socket.mode: a string). */
static int
rd_sock_mode(struct cfg_ctx *x, const struct cfg_key *k, json_t *v,
    void *field)
{
	unsigned m;

	if ((k->flags & XKF_STRMODE) && !json_is_string(v))
		return cfg_fail(x, "expected an octal mode string such as "
		    "\"0660\"");
	if (cfg_get_mode(x, v, &m) != 0)
		return -1;
	if ((m & 0600) != 0600)
		return cfg_fail(x, "mode %04o takes rw from the owner "
		    "(expected one such as \"0660\")", m);
	*(int *)field = (int)m;
	return 0;
}

static int
k_backend(struct cfg_ctx *x, json_t *v, void *base)
{
	struct xd_cfg *c = base;
	char b[80];

	if (cfg_get_buf(x, v, sizeof(c->backend), 0, c->backend) != 0)
		return -1;
	if (sbx_backend_find(c->backend) == NULL)
		return cfg_fail(x, "unknown backend %s (expected ns or gvisor)",
		    cfg_shown(c->backend, b, sizeof(b)));
	return 0;
}

static int
k_profile(struct cfg_ctx *x, json_t *v, void *base)
{
	struct xd_cfg *c = base;
	char b[80];

	if (cfg_get_buf(x, v, sizeof(c->profile), 0, c->profile) != 0)
		return -1;
	if (!sbx_id_ok(c->profile, SBX_ID_MAX))
		return cfg_fail(x, "bad profile name %s (expected host, "
		    "minimal, base, media or an admin's)", cfg_shown(c->profile,
		    b, sizeof(b)));
	return 0;
}

/* A tier's name; which tiers exist is sluiced's to say. */
static int
k_tier(struct cfg_ctx *x, json_t *v, void *base)
{
	struct xd_cfg *c = base;
	char b[80];
	size_t i;

	if (cfg_get_buf(x, v, sizeof(c->tier), 0, c->tier) != 0)
		return -1;
	for (i = 0; c->tier[i]; i++)
		if (!isalnum((unsigned char)c->tier[i]) && c->tier[i] != '_' &&
		    c->tier[i] != '-')
			break;
	if (!c->tier[0] || c->tier[i])
		return cfg_fail(x, "bad tier name %s (expected off, "
		    "registries, public or another of sluiced's)",
		    cfg_shown(c->tier, b, sizeof(b)));
	return 0;
}

static int
k_cgroups(struct cfg_ctx *x, json_t *v, void *base)
{
	struct xd_cfg *c = base;
	char b[80];

	if (cfg_get_buf(x, v, sizeof(c->cgroups), 0, c->cgroups) != 0)
		return -1;
	if (c->cgroups[0] && strcmp(c->cgroups, "v1") && strcmp(c->cgroups,
	    "v2") && strcmp(c->cgroups, "off"))
		return cfg_fail(x, "unknown cgroups %s (expected \"\", \"v1\", "
		    "\"v2\" or \"off\")", cfg_shown(c->cgroups, b, sizeof(b)));
	return 0;
}

/* who may use which profile: sluice-run's table (sbx_cfg.h) */
static int
k_tenant_profiles(struct cfg_ctx *x, json_t *v, void *base)
{
	struct xd_cfg *c = base;

	return sbx_tenant_profiles_read(x, v, c->tenant_profiles,
	    sizeof(c->tenant_profiles));
}

/* lifecycle.archive_store, read by lc_store once the rest is: a
 * string of a path's length here. */
static int
k_store(struct cfg_ctx *x, json_t *v, void *base)
{
	char st[SBX_PATH_MAX];

	(void)base;
	return cfg_get_buf(x, v, sizeof(st), 0, st);
}

/* Keys read once everything else is (cfg_after): only their type
 * here. */
static int
k_string(struct cfg_ctx *x, json_t *v, void *base)
{
	const char *s;

	(void)base;
	return cfg_get_str(x, v, &s);
}

static int
k_object(struct cfg_ctx *x, json_t *v, void *base)
{
	(void)base;
	return json_is_object(v) ? 0 : cfg_fail(x, "expected an object");
}

/* null: none (lifecycle.archive_s3 without an S3 store) */
static int
k_object_or_null(struct cfg_ctx *x, json_t *v, void *base)
{
	return json_is_null(v) ? 0 : k_object(x, v, base);
}

static int
k_pools(struct cfg_ctx *x, json_t *v, void *base)
{
	(void)base;
	if (!json_is_array(v) || json_array_size(v) > XD_POOLS_MAX)
		return cfg_fail(x, "expected an array of at most %d pools",
		    XD_POOLS_MAX);
	return 0;
}

/* "opensandbox": the compatible API (exec_os_cfg.c). */
static int
k_opensandbox(struct cfg_ctx *x, json_t *v, void *base)
{
	return xd_os_cfg_read(x, v, &((struct xd_cfg *)base)->os);
}

/* One bearer token: its file read and hashed now. */
static int
rd_role(struct cfg_ctx *x, const struct cfg_key *k, json_t *v, void *field)
{
	const char *s;
	char b[80];

	(void)k;
	if (cfg_get_str(x, v, &s) != 0)
		return -1;
	if ((*(enum xd_role *)field = role_of(s)) == XD_ROLE_NONE)
		return cfg_fail(x, "unknown role %s (expected admin, app or "
		    "auditor)", cfg_shown(s, b, sizeof(b)));
	return 0;
}

static const struct cfg_key token_keys[] = {
	{ "name", K_BUF, .off = offsetof(struct xd_token, name),
	    .size = sizeof(((struct xd_token *)0)->name) },
	{ "file", K_BUF, .off = offsetof(struct xd_token, file),
	    .size = sizeof(((struct xd_token *)0)->file), .flags = KF_ABS },
	{ "role", K_FN, .off = offsetof(struct xd_token, role),
	    .rd = rd_role },
	{ "tenant", K_BUF, .off = offsetof(struct xd_token, tenant),
	    .size = sizeof(((struct xd_token *)0)->tenant) },
	{ .name = NULL }
};

static int
k_tokens(struct cfg_ctx *x, json_t *a, void *base)
{
	struct xd_cfg *c = base;
	char why[160];
	json_t *t;
	size_t i;
	int others;

	if (!json_is_array(a) || json_array_size(a) > XD_TOKENS_MAX)
		return cfg_fail(x, "expected an array of at most %d tokens",
		    XD_TOKENS_MAX);
	c->ntokens = 0;
	json_array_foreach(a, i, t) {
		struct xd_token *k = &c->tokens[c->ntokens];

		memset(k, 0, sizeof(*k));
		k->role = XD_ROLE_APP;
		cfg_ctx_idx(x, i);
		if (cfg_walk_object(x, t, token_keys, k) != 0)
			return -1;
		if (!k->name[0] || !k->file[0])
			return cfg_fail(x, "name and file are required");
		if (k->tenant[0] && k->role == XD_ROLE_ADMIN)
			return cfg_fail(x, "an admin token sees every tenant; "
			    "bind app or auditor tokens");
		/* httpauth_token_file: a link followed, as a Kubernetes
		 * Secret's files are links; a regular file */
		cfg_ctx_key(x, "file");
		if (httpauth_token_file(k->file, HTTPAUTH_TOKEN_MIN,
		    HTTPAUTH_TOKEN_MAX, k->digest, &others, why,
		    sizeof(why)) != 0)
			return cfg_fail(x, "%s: %s", k->file, why);
		cfg_ctx_pop(x);
		cfg_ctx_pop(x);
		c->ntokens++;
	}
	return 0;
}

#define BUF(k, f, fl) { k, K_BUF, .off = offsetof(struct xd_cfg, f), \
	.size = sizeof(((struct xd_cfg *)0)->f), .flags = (fl) }
#define LONG(k, f, l, h) { k, K_LONG, .off = offsetof(struct xd_cfg, f), \
	.lo = (l), .hi = (h) }
#define U64(k, f, l, h, m) { k, K_U64, .off = offsetof(struct xd_cfg, f), \
	.lo = (l), .hi = (h), .mult = (m) }
#define LU64(k, f, m) { k, K_U64, .off = offsetof(struct xd_lims, f), \
	.lo = 0, .hi = U64_ANY / (long long)(m), .mult = (m) }

/* "limits" and "limits_max": the rows at the struct xd_lims */
static const struct cfg_key lims_keys[] = {
	LU64("memory_mb", sbx.memory_bytes, MB),
	LU64("pids", sbx.pids, 1),
	LU64("cpu_pct", sbx.cpu_pct, 1),
	LU64("tmp_mb", sbx.tmp_bytes, MB),
	LU64("home_mb", sbx.home_bytes, MB),
	LU64("fsize_mb", sbx.fsize_bytes, MB),
	LU64("nofile", sbx.nofile, 1),
	LU64("nproc", sbx.nproc, 1),
	{ "timeout_s", K_LONG, .off = offsetof(struct xd_lims, timeout_s),
	    .lo = 1, .hi = 24 * 3600 },
	{ "output_cap", K_LONG, .off = offsetof(struct xd_lims, output_cap),
	    .lo = 0, .hi = 1l << 30 },
	LU64("disk_mb", disk_bytes, MB),
	LU64("inodes", inodes, 1),
	{ .name = NULL }
};

static const struct cfg_key socket_keys[] = {
	{ "group", K_FN, .fn = k_sock_group },
	{ "mode", K_FN, .off = offsetof(struct xd_cfg, socket_mode),
	    .rd = rd_sock_mode, .flags = XKF_STRMODE },
	{ .name = NULL }
};

static const struct cfg_key quotas_keys[] = {
	LONG("sandboxes", max_total, 0, 1000000),
	LONG("per_tenant", max_per_tenant, 0, 1000000),
	LONG("per_user", max_per_user, 0, 1000000),
	LONG("creates", max_creates, 1, 1024),
	LONG("creates_per_tenant", max_creates_tenant, 1, 1024),
	LONG("background_per_sandbox", max_background, 0, 1024),
	LONG("finished_per_sandbox", keep_finished, 0, 1024),
	LONG("commands", max_cmds, 0, 1000000),
	LONG("commands_per_tenant", max_cmds_tenant, 0, 1000000),
	U64("disk_reserve_mb", disk_reserve, 0, U64_ANY / (long long)MB, MB),
	{ .name = NULL }
};

/* archive_store and archive_s3 are read by lc_store, after the rest */
static const struct cfg_key lifecycle_keys[] = {
	LONG("idle_after", idle_after, 0, 31622400),
	LONG("remove_after", remove_after, 0, 31622400),
	{ "archive_dir", K_BUF, .off = offsetof(struct xd_cfg, archive_dir),
	    .size = SBX_PATH_MAX - SBX_ID_MAX - 32, .flags = KF_ABS },
	LONG("archive_max_age", arch_max_age, 0, 31622400 * 10l),
	LONG("archive_max_count_per_tenant", arch_max_count, 0, 100000000),
	U64("archive_max_bytes_per_tenant", arch_max_bytes, 0, U64_ANY, 1),
	{ "archive_store", K_FN, .fn = k_store },
	{ "archive_s3", K_FN, .fn = k_object_or_null },
	{ .name = NULL }
};

static const struct cfg_key s3_keys[] = {
	{ "endpoint", K_BUF, .off = offsetof(struct xd_s3, endpoint),
	    .size = sizeof(((struct xd_s3 *)0)->endpoint) },
	{ "region", K_BUF, .off = offsetof(struct xd_s3, region),
	    .size = sizeof(((struct xd_s3 *)0)->region) },
	{ "access_key_file", K_BUF, .off = offsetof(struct xd_s3,
	    access_key_file), .size = sizeof(((struct xd_s3 *)0)->
	    access_key_file), .flags = KF_ABS },
	{ "secret_key_file", K_BUF, .off = offsetof(struct xd_s3,
	    secret_key_file), .size = sizeof(((struct xd_s3 *)0)->
	    secret_key_file), .flags = KF_ABS },
	{ .name = NULL }
};

static const struct cfg_key log_keys[] = {
	BUF("path", audit_log, KF_ABS),
	{ .name = NULL }
};

static const struct cfg_key artifacts_keys[] = {
	U64("file_bytes", art.file_bytes, 0, U64_ANY, 1),
	{ "count", K_SIZE, .off = offsetof(struct xd_cfg, art.count),
	    .lo = 0, .hi = 10000 },
	U64("total_bytes", art.total_bytes, 0, U64_ANY, 1),
	LONG("walk_entries", snap_entries, 1, 10000000),
	{ .name = NULL }
};

#define IDS(k, f, fl) { k, K_FN, .off = offsetof(struct xd_cfg, f), \
	.rd = rd_ids, .flags = (fl) }

static const struct cfg_key admin_keys[] = {
	IDS("uids", uids[XD_ROLE_ADMIN], 0),
	IDS("groups", gids[XD_ROLE_ADMIN], XKF_GROUPS),
	{ .name = NULL }
};

static const struct cfg_key app_keys[] = {
	IDS("uids", uids[XD_ROLE_APP], 0),
	IDS("groups", gids[XD_ROLE_APP], XKF_GROUPS),
	{ .name = NULL }
};

static const struct cfg_key auditor_keys[] = {
	IDS("uids", uids[XD_ROLE_AUDITOR], 0),
	IDS("groups", gids[XD_ROLE_AUDITOR], XKF_GROUPS),
	{ .name = NULL }
};

/* "roles": the older spelling of control's *_uids and *_gids */
static const struct cfg_key roles_keys[] = {
	{ "admin", K_OBJ, .sub = admin_keys },
	{ "app", K_OBJ, .sub = app_keys },
	{ "auditor", K_OBJ, .sub = auditor_keys },
	{ .name = NULL }
};

/*
 * sluiced's spelling of the socket and the roles (issue 24 point 2), so
 * that an operator writes one "control" block for both daemons.
 * "socket" and "roles" stay, as older aliases; a file that sets the same
 * thing both ways is refused (cfg_after: which one wins would be a
 * guess).  The values are sluiced's too: ids as numbers (names are also
 * taken, as in "roles"), the mode an octal string or a number.
 */
static const struct cfg_key control_keys[] = {
	{ "socket_group", K_FN, .fn = k_sock_group },
	{ "socket_mode", K_FN, .off = offsetof(struct xd_cfg, socket_mode),
	    .rd = rd_sock_mode },
	IDS("admin_uids", uids[XD_ROLE_ADMIN], 0),
	IDS("admin_gids", gids[XD_ROLE_ADMIN], XKF_GROUPS),
	IDS("app_uids", uids[XD_ROLE_APP], 0),
	IDS("app_gids", gids[XD_ROLE_APP], XKF_GROUPS),
	IDS("auditor_uids", uids[XD_ROLE_AUDITOR], 0),
	IDS("auditor_gids", gids[XD_ROLE_AUDITOR], XKF_GROUPS),
	{ .name = NULL }
};

static const struct cfg_key tcp_keys[] = {
	BUF("listen", tcp, 0),
	BUF("tls_cert", tls_cert, KF_ABS | KF_NULL),
	BUF("tls_key", tls_key, KF_ABS | KF_NULL),
	{ "tokens", K_FN, .fn = k_tokens },
	LONG("max_conns", tcp_max_conns, 1, 100000),
	LONG("max_conns_per_peer", tcp_max_conns_per_peer, 1, 100000),
	LONG("head_timeout_ms", tcp_head_timeout_ms, 100, 600000),
	LONG("fd_reserve", tcp_fd_reserve, 0, 65536),
	{ "plain_http", K_BOOL, .off = offsetof(struct xd_cfg, tcp_plain) },
	{ .name = NULL }
};

static const struct cfg_key xd_root_keys[] = {
	{ "runtime_dir", K_BUF, .off = offsetof(struct xd_cfg, runtime_dir),
	    .size = SBX_PATH_MAX - 32, .flags = KF_ABS },
	{ "state_dir", K_BUF, .off = offsetof(struct xd_cfg, state_dir),
	    .size = SBX_PATH_MAX - SBX_ID_MAX - 32, .flags = KF_ABS },
	{ "control_socket", K_BUF, .off = offsetof(struct xd_cfg, control),
	    .size = 108, .flags = KF_ABS },
	{ "control_timeout_ms", K_INT, .off = offsetof(struct xd_cfg,
	    control_timeout_ms), .lo = 100, .hi = 120000 },
	BUF("shim", shim, KF_ABS),
	BUF("mke2fs", mke2fs, KF_ABS),
	{ "backend", K_FN, .fn = k_backend },
	{ "tier", K_FN, .fn = k_tier },
	{ "cgroups", K_FN, .fn = k_cgroups },
	LONG("uid_base", uid_base, 65536, 4000000000l - 65536l * 1024),
	LONG("slots", slots, 1, 1024),
	{ "socket", K_OBJ, .sub = socket_keys },
	{ "limits", K_OBJ, .off = offsetof(struct xd_cfg, def),
	    .sub = lims_keys },
	{ "limits_max", K_OBJ, .off = offsetof(struct xd_cfg, max),
	    .sub = lims_keys },
	{ "quotas", K_OBJ, .sub = quotas_keys },
	U64("max_file_bytes", max_file_bytes, 1, 1ll << 32, 1),
	U64("max_body_bytes", max_body_bytes, 1, 64ll << 20, 1),
	U64("ring_bytes", ring_bytes, 4096, 64ll << 20, 1),
	U64("ring_budget_bytes", ring_budget, 0, U64_ANY, 1),
	U64("stream_watermark", stream_watermark, 1, U64_ANY, 1),
	LONG("drain_s", drain_s, 0, 3600),
	{ "roles", K_OBJ, .sub = roles_keys },
	{ "control", K_OBJ, .sub = control_keys },
	{ "tcp", K_OBJ, .sub = tcp_keys },
	{ "artifacts", K_OBJ, .sub = artifacts_keys },
	{ "log", K_OBJ, .sub = log_keys },
	U64("events_buffer_bytes", events_buffer, 1, U64_ANY, 1),
	{ "image_dir", K_BUF, .off = offsetof(struct xd_cfg, image_dir),
	    .size = SBX_PATH_MAX - SBX_DIGEST_HEX - 16, .flags = KF_ABS },
	{ "profile", K_FN, .fn = k_profile },
	BUF("shim_static", shim_static, KF_ABS),
	{ "tenant_profiles", K_FN, .fn = k_tenant_profiles },
	{ "lifecycle", K_OBJ, .sub = lifecycle_keys },
	U64("reply_buffer_bytes", reply_buffer, 4096, 64ll << 20, 1),
	U64("reply_total_bytes", reply_total, 1, 4ll << 30, 1),
	LONG("reply_timeout_ms", reply_timeout_ms, 1000, 3600000),
	U64("max_archive_bytes", max_archive_bytes, 4096, 4ll << 30, 1),
	{ "opensandbox", K_FN, .fn = k_opensandbox },
	{ "pools", K_FN, .fn = k_pools },
	LONG("pool_fills", pool_fills, 1, 16),
	{ .name = NULL }
};

/* ---- checks between keys, once everything is read ---- */

/* Fails at a.b (b NULL: at a) with the message. */
static int at_fail(struct cfg_ctx *x, const char *a, const char *b,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int
at_fail(struct cfg_ctx *x, const char *a, const char *b, const char *fmt,
    ...)
{
	char msg[XD_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (a != NULL)
		cfg_ctx_key(x, a);
	if (b != NULL)
		cfg_ctx_key(x, b);
	return cfg_fail(x, "%s", msg);
}

/* A default above its maximum could never be asked for. */
static int
lims_check(struct cfg_ctx *x, const struct xd_lims *d, const struct xd_lims *m)
{
	static const struct {
		const char *key;
		size_t off;
		uint64_t mult;
	} f[] = {
		{ "memory_mb", offsetof(struct sbx_limits, memory_bytes), 1 << 20 },
		{ "pids", offsetof(struct sbx_limits, pids), 1 },
		{ "cpu_pct", offsetof(struct sbx_limits, cpu_pct), 1 },
		{ "tmp_mb", offsetof(struct sbx_limits, tmp_bytes), 1 << 20 },
		{ "home_mb", offsetof(struct sbx_limits, home_bytes), 1 << 20 },
		{ "fsize_mb", offsetof(struct sbx_limits, fsize_bytes), 1 << 20 },
		{ "nofile", offsetof(struct sbx_limits, nofile), 1 },
		{ "nproc", offsetof(struct sbx_limits, nproc), 1 },
	};
	size_t i;

	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		uint64_t dv = *(const uint64_t *)(const void *)((const char *)
		    &d->sbx + f[i].off);
		uint64_t mv = *(const uint64_t *)(const void *)((const char *)
		    &m->sbx + f[i].off);

		if (mv != 0 && (dv == 0 || dv > mv))
			return at_fail(x, "limits", f[i].key, "the default is "
			    "above limits_max.%s (%llu)", f[i].key,
			    (unsigned long long)(mv / f[i].mult));
	}
	if (d->timeout_s > m->timeout_s)
		return at_fail(x, "limits", "timeout_s", "above "
		    "limits_max.timeout_s");
	if (d->output_cap > m->output_cap)
		return at_fail(x, "limits", "output_cap", "above "
		    "limits_max.output_cap");
	if (m->disk_bytes && (d->disk_bytes > m->disk_bytes ||
	    d->disk_bytes == 0))
		return at_fail(x, "limits", "disk_mb", "above "
		    "limits_max.disk_mb (0, no quota, is above any)");
	if (m->inodes && (d->inodes > m->inodes || d->inodes == 0))
		return at_fail(x, "limits", "inodes", "above limits_max.inodes "
		    "(0, no limit, is above any)");
	/* below that mke2fs cannot make an ext4 with a journal */
	if ((d->disk_bytes && d->disk_bytes < (8ull << 20)) ||
	    (d->disk_bytes && d->inodes < 64))
		return at_fail(x, "limits", "disk_mb", "a workspace is at "
		    "least 8 MB and 64 inodes");
	return 0;
}

/* lifecycle.archive_store: a directory (archive_dir's other name) or
 * "s3://bucket/prefix" with lifecycle.archive_s3 {endpoint, region,
 * access_key_file, secret_key_file} (exec_s3.c).  x at lifecycle. */
static int
lc_store(struct cfg_ctx *x, json_t *o, struct xd_cfg *c)
{
	json_t *sv = json_object_get(o, "archive_store");
	json_t *s3 = json_object_get(o, "archive_s3");
	char e[XD_ERR_MAX], key[256];

	/* null: none (what --print-config prints without an S3 store) */
	if (json_is_null(s3))
		s3 = NULL;
	const char *st = sv != NULL ? json_string_value(sv) : "";
	int rc;

	if (strncmp(st, "s3://", 5) != 0) {
		if (s3 != NULL) {
			cfg_ctx_key(x, "archive_s3");
			return cfg_fail_key(x, "only with an archive_store of "
			    "s3://bucket/prefix");
		}
		if (st[0] == '\0')
			return 0;
		cfg_ctx_key(x, "archive_store");
		if (st[0] != '/')
			return cfg_fail(x, "expected an absolute path (a local "
			    "directory) or s3://bucket/prefix");
		if (json_object_get(o, "archive_dir") != NULL &&
		    strcmp(st, c->archive_dir) != 0)
			return cfg_fail(x, "archive_dir names another "
			    "directory (archive_store is its other name: set "
			    "one)");
		if (cfg_get_buf(x, sv, SBX_PATH_MAX - SBX_ID_MAX - 32, 1,
		    c->archive_dir) != 0)
			return -1;
		cfg_ctx_pop(x);
		return 0;
	}
	if (xd_s3_parse_url(st, &c->s3, e, sizeof(e)) != 0)
		return at_fail(x, "archive_store", NULL, "%s", e);
	if (s3 == NULL)
		return at_fail(x, "archive_store", NULL, "an s3:// store needs "
		    "lifecycle.archive_s3 {endpoint, region, access_key_file, "
		    "secret_key_file}");
	cfg_ctx_key(x, "archive_s3");
	snprintf(c->s3.region, sizeof(c->s3.region), "us-east-1");
	if (cfg_walk_object(x, s3, s3_keys, &c->s3) != 0)
		return -1;
	rc = -1;
	if (xd_s3_endpoint_ok(c->s3.endpoint, e, sizeof(e)) != 0)
		at_fail(x, "endpoint", NULL, "%s", e);
	else if (c->s3.region[0] == '\0' || strpbrk(c->s3.region, "/ \n") !=
	    NULL)
		at_fail(x, "region", NULL, "a region's name (us-east-1)");
	else if (c->s3.access_key_file[0] == '\0')
		at_fail(x, "access_key_file", NULL, "needed (a file of one "
		    "line, mode 0600)");
	else if (c->s3.secret_key_file[0] == '\0')
		at_fail(x, "secret_key_file", NULL, "needed (a file of one "
		    "line, mode 0600)");
	/* read now so that a key anyone may read is refused at the
	 * start (each request reads them again: a fixed key needs no
	 * restart) */
	else if (xd_s3_key_read(c->s3.access_key_file, key, sizeof(key), e,
	    sizeof(e)) != 0)
		at_fail(x, "access_key_file", NULL, "%s", e);
	else if (OPENSSL_cleanse(key, sizeof(key)), xd_s3_key_read(
	    c->s3.secret_key_file, key, sizeof(key), e, sizeof(e)) != 0)
		at_fail(x, "secret_key_file", NULL, "%s", e);
	else
		rc = 0;
	OPENSSL_cleanse(key, sizeof(key));
	cfg_ctx_pop(x);
	return rc;
}

/* "lifecycle": the archives under the state directory unless named
 * ("." : no sandbox id starts with a dot); ages; the store. */
static int
lc_check(struct cfg_ctx *x, json_t *root, struct xd_cfg *c)
{
	json_t *o = json_object_get(root, "lifecycle");

	if (o == NULL || json_object_get(o, "archive_dir") == NULL)
		snprintf(c->archive_dir, sizeof(c->archive_dir),
		    "%.400s/.archive", c->state_dir);
	if (c->idle_after && c->remove_after && c->remove_after <
	    c->idle_after)
		return at_fail(x, "lifecycle", "remove_after", "at least "
		    "idle_after (%ld), or 0 (never)", c->idle_after);
	if (o == NULL)
		return 0;
	cfg_ctx_key(x, "lifecycle");
	if (lc_store(x, o, c) != 0)
		return -1;
	cfg_ctx_pop(x);
	return 0;
}

/* "tcp": plain HTTP only when asked for by name (issue 24 point 9): a
 * token then crosses the network in the clear. */
static int
tcp_check(struct cfg_ctx *x, const struct xd_cfg *c)
{
	if (c->tcp_plain && (c->tls_cert[0] || c->tls_key[0]))
		return at_fail(x, "tcp", "plain_http", "plain HTTP has no "
		    "certificate: drop tls_cert and tls_key, or plain_http");
	if (c->tcp[0] && !c->tcp_plain && (!c->tls_cert[0] || !c->tls_key[0]))
		return at_fail(x, "tcp", "listen", "TCP is served with TLS "
		    "unless plain_http is true: tls_cert and tls_key are "
		    "required");
	return 0;
}

/* One spelling per thing: "control" or its older aliases. */
static int
control_check(struct cfg_ctx *x, json_t *root)
{
	json_t *o = json_object_get(root, "control");
	const struct cfg_key *k;
	int roles = 0;

	if (o == NULL)
		return 0;
	for (k = control_keys + 2; k->name != NULL; k++)
		roles |= json_object_get(o, k->name) != NULL;
	if (roles && json_object_get(root, "roles") != NULL)
		return at_fail(x, "control", NULL, "the roles are set here and "
		    "in \"roles\": write them one way (control.*_uids and "
		    "*_gids, as in sluiced.json; roles is the older alias)");
	if ((json_object_get(o, "socket_group") != NULL ||
	    json_object_get(o, "socket_mode") != NULL) &&
	    json_object_get(root, "socket") != NULL)
		return at_fail(x, "control", NULL, "the socket is set here and "
		    "in \"socket\": write it one way (control.socket_group "
		    "and socket_mode, as in sluiced.json; socket is the older "
		    "alias)");
	return 0;
}

/* a pool's backend, profile and limits are a create's, read as one */
static const struct cfg_key pool_keys[] = {
	{ "backend", K_FN, .fn = k_string },
	{ "profile", K_FN, .fn = k_string },
	{ "size", K_LONG, .off = offsetof(struct xd_pool_cfg, size),
	    .lo = 0, .hi = 1024 },
	{ "limits", K_FN, .fn = k_object },
	{ .name = NULL }
};

/*
 * "pools": [{"backend", "profile", "size", "limits"}], at most
 * XD_POOLS_MAX; each entry's limits read as a create's "limits" are
 * (xd_create_parse, with the defaults and maxima read), so that a create
 * matches a pool when it would get exactly those limits.  Read last:
 * the defaults, maxima, backend and profile are final.
 */
static int
pools_read(struct cfg_ctx *x, json_t *root, struct xd_cfg *c)
{
	json_t *a = json_object_get(root, "pools"), *o, *body;
	struct xd_create_spec s;
	struct xd_perr e;
	size_t i, k;
	int rc;

	c->npools = 0;
	if (a == NULL)
		return 0;
	cfg_ctx_key(x, "pools");
	json_array_foreach(a, i, o) {
		struct xd_pool_cfg *p = &c->pools[i];
		const char *be, *pr;

		cfg_ctx_idx(x, i);
		memset(p, 0, sizeof(*p));
		if (cfg_walk_object(x, o, pool_keys, p) != 0)
			return -1;
		be = json_string_value(json_object_get(o, "backend"));
		pr = json_string_value(json_object_get(o, "profile"));
		body = json_pack("{s:s,s:s,s:s}", "id", "pool", "backend", be ?
		    be : c->backend, "profile", pr ? pr : c->profile);
		if (body != NULL && json_object_get(o, "limits") != NULL)
			json_object_set(body, "limits", json_object_get(o,
			    "limits"));
		memset(&e, 0, sizeof(e));
		rc = body != NULL ? xd_create_parse(body, &c->def, &c->max,
		    c->tier, c->backend, &s, &e) : -1;
		json_decref(body);
		if (rc != 0) {
			cfg_fail(x, "%s", e.msg[0] ? e.msg : "out of memory");
			xd_perr_clear(&e);
			return -1;
		}
		if (strcmp(s.backend, "ns") != 0 && strcmp(s.backend,
		    "gvisor") != 0)
			return cfg_fail(x, "a pool's backend is \"ns\" or "
			    "\"gvisor\"");
		snprintf(p->backend, sizeof(p->backend), "%s", s.backend);
		snprintf(p->profile, sizeof(p->profile), "%s", s.profile[0] ?
		    s.profile : c->profile);
		p->lim = s.lim;
		for (k = 0; k < i; k++)
			if (strcmp(c->pools[k].backend, p->backend) == 0 &&
			    strcmp(c->pools[k].profile, p->profile) == 0 &&
			    xd_lims_eq(&c->pools[k].lim, &p->lim))
				return cfg_fail(x, "the same backend, profile "
				    "and limits as [%zu]", k);
		c->npools = i + 1;
		cfg_ctx_pop(x);
	}
	cfg_ctx_pop(x);
	return 0;
}

int
xd_lims_eq(const struct xd_lims *a, const struct xd_lims *b)
{
	return a->sbx.memory_bytes == b->sbx.memory_bytes &&
	    a->sbx.pids == b->sbx.pids && a->sbx.cpu_pct == b->sbx.cpu_pct &&
	    a->sbx.tmp_bytes == b->sbx.tmp_bytes &&
	    a->sbx.home_bytes == b->sbx.home_bytes &&
	    a->sbx.fsize_bytes == b->sbx.fsize_bytes &&
	    a->sbx.nofile == b->sbx.nofile && a->sbx.nproc == b->sbx.nproc &&
	    a->timeout_s == b->timeout_s && a->output_cap == b->output_cap &&
	    a->disk_bytes == b->disk_bytes && a->inodes == b->inodes;
}

/* Checks between keys, in the order the sections are documented. */
static int
cfg_after(struct cfg_ctx *x, json_t *root, struct xd_cfg *c)
{
	if (lims_check(x, &c->def, &c->max) != 0 ||
	    lc_check(x, root, c) != 0)
		return -1;
	if (c->reply_total < c->reply_buffer)
		return at_fail(x, "reply_total_bytes", NULL, "below "
		    "reply_buffer_bytes (%llu)",
		    (unsigned long long)c->reply_buffer);
	if (control_check(x, root) != 0 || tcp_check(x, c) != 0)
		return -1;
	if (c->os.listen[0] && c->tcp[0] && strcmp(c->os.listen, c->tcp) == 0)
		return at_fail(x, "opensandbox", "listen", "the same address "
		    "as tcp.listen");
	return pools_read(x, root, c);
}

int
xd_cfg_parse(struct xd_cfg *c, const char *text, size_t len,
    const char *name, char *err, size_t errlen)
{
	struct cfg_ctx x;
	json_t *root;
	int rc = -1;

	cfg_ctx_init(&x, text, len, name, err, errlen);
	if ((root = cfg_parse_text(&x)) == NULL)
		return -1;
	if (!json_is_object(root)) {
		cfg_fail(&x, "the configuration is one JSON object");
		goto out;
	}
	if (cfg_walk_object(&x, root, xd_root_keys, c) != 0 ||
	    cfg_after(&x, root, c) != 0)
		goto out;
	rc = 0;
out:
	json_decref(root);
	return rc;
}

int
xd_cfg_load(struct xd_cfg *c, const char *path, char *err, size_t errlen)
{
	char *buf;
	ssize_t n;
	size_t len = 0;
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if ((buf = malloc(CFG_FILE_MAX + 1)) == NULL) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	while (len <= CFG_FILE_MAX && (n = read(fd, buf + len,
	    CFG_FILE_MAX + 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (len > CFG_FILE_MAX) {
		free(buf);
		snprintf(err, errlen, "%s: larger than %d bytes", path,
		    CFG_FILE_MAX);
		return -1;
	}
	rc = xd_cfg_parse(c, buf, len, path, err, errlen);
	free(buf);
	return rc;
}

static json_t *
lims_json(const struct xd_lims *l)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
	    "memory_mb", (json_int_t)(l->sbx.memory_bytes >> 20),
	    "pids", (json_int_t)l->sbx.pids,
	    "cpu_pct", (json_int_t)l->sbx.cpu_pct,
	    "tmp_mb", (json_int_t)(l->sbx.tmp_bytes >> 20),
	    "home_mb", (json_int_t)(l->sbx.home_bytes >> 20),
	    "fsize_mb", (json_int_t)(l->sbx.fsize_bytes >> 20),
	    "nofile", (json_int_t)l->sbx.nofile,
	    "nproc", (json_int_t)l->sbx.nproc,
	    "timeout_s", (json_int_t)l->timeout_s,
	    "output_cap", (json_int_t)l->output_cap,
	    "disk_mb", (json_int_t)(l->disk_bytes >> 20),
	    "inodes", (json_int_t)l->inodes);
}

static json_t *
ids_json(const struct xd_ids *ids)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < ids->n; i++)
		json_array_append_new(a, json_integer(ids->v[i]));
	return a;
}

/* The table of sbx_profile_allowed back as its JSON: {} when any
 * tenant may use any profile. */
static json_t *
tenant_profiles_json(const char *tab)
{
	json_t *o = json_object(), *a;
	const char *line, *p, *end;

	for (line = tab; o != NULL && *line != '\0'; line = end + (*end ==
	    '\n')) {
		char name[SBX_ID_MAX + 2];
		size_t k;

		end = line + strcspn(line, "\n");
		k = strcspn(line, " \n");
		if (k >= sizeof(name) || (a = json_array()) == NULL)
			break;
		memcpy(name, line, k);
		name[k] = '\0';
		for (p = line + k; p < end && *p == ' '; p += k) {
			p++;
			k = strcspn(p, " \n");
			json_array_append_new(a, json_stringn(p, k));
		}
		json_object_set_new(o, name, a);
	}
	return o;
}

json_t *
xd_cfg_json(const struct xd_cfg *c)
{
	json_t *ctl = json_object(), *toks = json_array(), *o, *t;
	char mode[8], key[32];
	int r;
	size_t i;

	/* the socket and the roles in sluiced's spelling, the one both
	 * daemons take (socket and roles are its aliases) */
	for (r = XD_ROLE_AUDITOR; r < XD_ROLE__COUNT; r++) {
		snprintf(key, sizeof(key), "%s_uids", xd_role_name(
		    (enum xd_role)r));
		json_object_set_new(ctl, key, ids_json(&c->uids[r]));
		snprintf(key, sizeof(key), "%s_gids", xd_role_name(
		    (enum xd_role)r));
		json_object_set_new(ctl, key, ids_json(&c->gids[r]));
	}
	for (i = 0; i < c->ntokens; i++) {
		o = json_pack("{s:s,s:s,s:s}", "name", c->tokens[i].name, "file",
		    c->tokens[i].file, "role", xd_role_name(c->tokens[i].role));
		if (c->tokens[i].tenant[0])
			json_object_set_new(o, "tenant",
			    json_string(c->tokens[i].tenant));
		json_array_append_new(toks, o);
	}
	snprintf(mode, sizeof(mode), "%04o", (unsigned)c->socket_mode);
	json_object_set_new(ctl, "socket_group", c->socket_group[0] ?
	    json_string(c->socket_group) : json_null());
	json_object_set_new(ctl, "socket_mode", json_string(mode));
	o = json_pack("{s:s,s:s,s:s,s:i,s:s,s:s,s:s,s:s,s:s,s:I,s:I,"
	    "s:o,s:o,"
	    "s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I},"
	    "s:I,s:I,s:I,s:I,s:I,s:I,s:o}",
	    "runtime_dir", c->runtime_dir, "state_dir", c->state_dir,
	    "control_socket", c->control,
	    "control_timeout_ms", c->control_timeout_ms,
	    "shim", c->shim, "mke2fs", c->mke2fs, "backend", c->backend,
	    "tier", c->tier,
	    "cgroups", c->cgroups, "uid_base", (json_int_t)c->uid_base,
	    "slots", (json_int_t)c->slots,
	    "limits", lims_json(&c->def), "limits_max", lims_json(&c->max),
	    "quotas", "sandboxes", (json_int_t)c->max_total,
	    "per_tenant", (json_int_t)c->max_per_tenant,
	    "per_user", (json_int_t)c->max_per_user,
	    "creates", (json_int_t)c->max_creates,
	    "creates_per_tenant", (json_int_t)xd_cfg_creates_tenant(c),
	    "background_per_sandbox", (json_int_t)c->max_background,
	    "finished_per_sandbox", (json_int_t)c->keep_finished,
	    "max_file_bytes", (json_int_t)c->max_file_bytes,
	    "max_body_bytes", (json_int_t)c->max_body_bytes,
	    "ring_bytes", (json_int_t)c->ring_bytes,
	    "ring_budget_bytes", (json_int_t)c->ring_budget,
	    "stream_watermark", (json_int_t)c->stream_watermark,
	    "drain_s", (json_int_t)c->drain_s,
	    "control", ctl);
	if (o != NULL)
		json_object_set_new(o, "artifacts", json_pack("{s:I,s:I,s:I,"
		    "s:I}", "file_bytes", (json_int_t)c->art.file_bytes, "count",
		    (json_int_t)c->art.count, "total_bytes",
		    (json_int_t)c->art.total_bytes, "walk_entries",
		    (json_int_t)c->snap_entries));
	if (o != NULL) {
		json_object_set_new(o, "image_dir", json_string(c->image_dir));
		json_object_set_new(o, "profile", json_string(c->profile));
		json_object_set_new(o, "shim_static", json_string(
		    c->shim_static));
		json_object_set_new(o, "tenant_profiles", tenant_profiles_json(
		    c->tenant_profiles));
		json_object_set_new(o, "log", json_pack("{s:s}", "path",
		    c->audit_log));
		json_object_set_new(o, "events_buffer_bytes", json_integer(
		    (json_int_t)c->events_buffer));
		json_object_set_new(o, "reply_buffer_bytes", json_integer(
		    (json_int_t)c->reply_buffer));
		json_object_set_new(o, "reply_total_bytes", json_integer(
		    (json_int_t)c->reply_total));
		json_object_set_new(o, "reply_timeout_ms", json_integer(
		    (json_int_t)c->reply_timeout_ms));
		json_object_set_new(o, "max_archive_bytes", json_integer(
		    (json_int_t)c->max_archive_bytes));
		json_object_set_new(o, "lifecycle", json_pack("{s:I,s:I,s:s,"
		    "s:I,s:I,s:I}", "idle_after", (json_int_t)c->idle_after,
		    "remove_after", (json_int_t)c->remove_after, "archive_dir",
		    c->archive_dir, "archive_max_age",
		    (json_int_t)c->arch_max_age, "archive_max_count_per_tenant",
		    (json_int_t)c->arch_max_count,
		    "archive_max_bytes_per_tenant",
		    (json_int_t)c->arch_max_bytes));
		json_object_set_new(json_object_get(o, "lifecycle"),
		    "archive_store", json_string(c->s3.url[0] ? c->s3.url :
		    c->archive_dir));
		/* the key files' paths, never what they hold */
		json_object_set_new(json_object_get(o, "lifecycle"),
		    "archive_s3", c->s3.url[0] ? json_pack("{s:s,s:s,s:s,s:s}",
		    "endpoint", c->s3.endpoint, "region", c->s3.region,
		    "access_key_file", c->s3.access_key_file,
		    "secret_key_file", c->s3.secret_key_file) : json_null());
		json_object_set_new(json_object_get(o, "quotas"), "commands",
		    json_integer((json_int_t)c->max_cmds));
		json_object_set_new(json_object_get(o, "quotas"),
		    "commands_per_tenant", json_integer(
		    (json_int_t)c->max_cmds_tenant));
		json_object_set_new(json_object_get(o, "quotas"),
		    "disk_reserve_mb", json_integer(
		    (json_int_t)(c->disk_reserve >> 20)));
	}
	/* printed when off too, every key with its default ("listen" "" is
	 * no TCP listener); the certificate and key have none (a path is
	 * absolute): null until set */
	if (o == NULL)
		json_decref(toks);
	else if ((t = json_pack("{s:s,s:b,s:o,s:o,s:o,"
		    "s:I,s:I,s:I,s:I}", "listen", c->tcp, "plain_http",
		    c->tcp_plain, "tls_cert", c->tls_cert[0] ?
		    json_string(c->tls_cert) : json_null(),
		    "tls_key", c->tls_key[0] ? json_string(c->tls_key) :
		    json_null(), "tokens", toks, "max_conns",
		    (json_int_t)c->tcp_max_conns, "max_conns_per_peer",
		    (json_int_t)c->tcp_max_conns_per_peer, "head_timeout_ms",
		    (json_int_t)c->tcp_head_timeout_ms, "fd_reserve",
		    (json_int_t)c->tcp_fd_reserve)) != NULL) {
		json_object_set_new(o, "tcp", t);
	}
	if (o != NULL)
		json_object_set_new(o, "opensandbox", xd_os_cfg_json(&c->os));
	if (o != NULL) {
		json_t *pools = json_array();

		for (i = 0; i < c->npools; i++)
			json_array_append_new(pools, json_pack("{s:s,s:s,s:I,"
			    "s:o}", "backend", c->pools[i].backend, "profile",
			    c->pools[i].profile, "size",
			    (json_int_t)c->pools[i].size, "limits",
			    lims_json(&c->pools[i].lim)));
		json_object_set_new(o, "pools", pools);
		json_object_set_new(o, "pool_fills", json_integer(
		    (json_int_t)c->pool_fills));
	}
	return o;
}

/* A role's name, from the one table of sluiced's configuration. */
_Static_assert((int)XD_ROLE_ADMIN == (int)CFG_ROLE_ADMIN &&
    (int)XD_ROLE_AUDITOR == (int)CFG_ROLE_AUDITOR,
    "enum xd_role is enum cfg_role");

const char *
xd_role_name(enum xd_role r)
{
	return cfg_role_name((enum cfg_role)r);
}
