/*
 * exec_cfg.c: sluice-execd's configuration.  Embedded defaults, then a
 * JSON file over them; unknown keys, wrong types and values out of range
 * are refused with "file:line:column: key.path: what".  jansson keeps no
 * positions of values, so a small scanner finds the key's place in the
 * text jansson has accepted (proxy/lib/config.c does the same for
 * sluiced's file; its walker is private to it).
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

#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/config.h"
#include "proxy/lib/httpauth.h"
#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/execd/exec_os-int.h"

#ifndef SLUICE_SHIM_PATH
#define SLUICE_SHIM_PATH "/usr/local/bin/sluice-shim"
#endif

#define CFG_FILE_MAX	(1 << 20)
#define DEPTH_MAX	6

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

/* ---- positions ---- */

struct cx {
	const char *text, *name;
	size_t len;
	char *err;
	size_t errlen;
	const char *path[DEPTH_MAX];
	size_t depth;
};

static const char *
sk_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* p at '"': just past the closing quote. */
static const char *
sk_str(const char *p, const char *e)
{
	for (p++; p < e && *p != '"'; p++)
		if (*p == '\\')
			p++;
	return p < e ? p + 1 : e;
}

static const char *
sk_val(const char *p, const char *e)
{
	int depth = 0;

	p = sk_ws(p, e);
	do {
		if (p >= e)
			return e;
		if (*p == '"')
			p = sk_str(p, e);
		else {
			if (*p == '{' || *p == '[')
				depth++;
			else if (*p == '}' || *p == ']')
				depth--;
			p++;
			if (depth == 0)
				while (p < e && strchr("{}[],\" \t\r\n:", *p) ==
				    NULL)
					p++;
		}
	} while (depth > 0);
	return p;
}

/* Where the value at path[0..n) starts (the key itself with at_key),
 * or the deepest object on the way. */
static const char *
locate(const char *text, size_t len, const char *const *path, size_t n,
    int at_key)
{
	const char *p = text, *e = text + len, *key = NULL;
	size_t i;

	p = sk_ws(p, e);
	for (i = 0; i < n; i++) {
		const char *obj = p;
		int found = 0;

		if (p >= e || *p != '{')
			return obj;
		p = sk_ws(p + 1, e);
		while (p < e && *p == '"') {
			const char *ks = p + 1, *ke;

			key = p;
			p = sk_str(p, e);
			ke = p - 1;
			p = sk_ws(p, e);
			if (p < e && *p == ':')
				p = sk_ws(p + 1, e);
			if ((size_t)(ke - ks) == strlen(path[i]) &&
			    memcmp(ks, path[i], (size_t)(ke - ks)) == 0) {
				found = 1;
				break;
			}
			p = sk_ws(sk_val(p, e), e);
			if (p < e && *p == ',')
				p = sk_ws(p + 1, e);
		}
		if (!found)
			return obj;
	}
	return at_key && key != NULL ? key : p;
}

static int cfail(struct cx *x, const char *key, int at_key, const char *fmt,
    ...) __attribute__((format(printf, 4, 5)));

static int
cfail(struct cx *x, const char *key, int at_key, const char *fmt, ...)
{
	const char *path[DEPTH_MAX + 1], *at, *q;
	char pbuf[256] = "", msg[XD_ERR_MAX];
	size_t n = 0, i, o = 0;
	int line = 1, col = 1;
	va_list ap;

	for (i = 0; i < x->depth; i++)
		path[n++] = x->path[i];
	if (key != NULL)
		path[n++] = key;
	for (i = 0; i < n; i++)
		o += (size_t)snprintf(pbuf + o, o < sizeof(pbuf) ?
		    sizeof(pbuf) - o : 0, "%s%s", i ? "." : "", path[i]);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	at = locate(x->text, x->len, path, n, at_key);
	for (q = x->text; q < at; q++) {
		if (*q == '\n') {
			line++;
			col = 1;
		} else if (((unsigned char)*q & 0xc0) != 0x80)
			col++;
	}
	snprintf(x->err, x->errlen, "%s:%d:%d: %s: %s", x->name, line, col,
	    n ? pbuf : "(top)", msg);
	return -1;
}

/* lifecycle.archive_store: a directory (archive_dir's other name) or
 * "s3://bucket/prefix" with lifecycle.archive_s3 {endpoint, region,
 * access_key_file, secret_key_file} (exec_s3.c). */
static int c_str(struct cx *x, json_t *o, const char *key, char *buf,
    size_t len, int abs_path);
static int c_obj(struct cx *x, json_t *o, const char *key, json_t **out);
static int c_keys(struct cx *x, json_t *o, const char *const *keys);

static int
cfg_store(struct cx *x, json_t *o, struct xd_cfg *c,
    const char *const *s3keys)
{
	char st[SBX_PATH_MAX], e[XD_ERR_MAX], key[256];
	json_t *s3;
	int rc;

	st[0] = '\0';
	if (c_str(x, o, "archive_store", st, sizeof(st), 0) != 0 ||
	    c_obj(x, o, "archive_s3", &s3) != 0)
		return -1;
	if (strncmp(st, "s3://", 5) != 0) {
		if (s3 != NULL)
			return cfail(x, "archive_s3", 1, "only with an "
			    "archive_store of s3://bucket/prefix");
		if (st[0] == '\0')
			return 0;
		if (st[0] != '/')
			return cfail(x, "archive_store", 0, "an absolute path "
			    "(a local directory) or s3://bucket/prefix");
		if (json_object_get(o, "archive_dir") != NULL &&
		    strcmp(st, c->archive_dir) != 0)
			return cfail(x, "archive_store", 0, "archive_dir names "
			    "another directory (archive_store is its other "
			    "name: set one)");
		if (strlen(st) >= sizeof(c->archive_dir) - SBX_ID_MAX - 32)
			return cfail(x, "archive_store", 0, "a path too long");
		snprintf(c->archive_dir, sizeof(c->archive_dir), "%s", st);
		return 0;
	}
	if (xd_s3_parse_url(st, &c->s3, e, sizeof(e)) != 0)
		return cfail(x, "archive_store", 0, "%s", e);
	if (s3 == NULL)
		return cfail(x, "archive_store", 0, "an s3:// store needs "
		    "lifecycle.archive_s3 {endpoint, region, access_key_file, "
		    "secret_key_file}");
	x->path[x->depth++] = "archive_s3";
	snprintf(c->s3.region, sizeof(c->s3.region), "us-east-1");
	if (c_keys(x, s3, s3keys) != 0 ||
	    c_str(x, s3, "endpoint", c->s3.endpoint, sizeof(c->s3.endpoint),
	    0) != 0 || c_str(x, s3, "region", c->s3.region,
	    sizeof(c->s3.region), 0) != 0 ||
	    c_str(x, s3, "access_key_file", c->s3.access_key_file,
	    sizeof(c->s3.access_key_file), 1) != 0 ||
	    c_str(x, s3, "secret_key_file", c->s3.secret_key_file,
	    sizeof(c->s3.secret_key_file), 1) != 0)
		return -1;
	rc = -1;
	if (xd_s3_endpoint_ok(c->s3.endpoint, e, sizeof(e)) != 0)
		cfail(x, "endpoint", 0, "%s", e);
	else if (c->s3.region[0] == '\0' || strpbrk(c->s3.region, "/ \n") !=
	    NULL)
		cfail(x, "region", 0, "a region's name (us-east-1)");
	else if (c->s3.access_key_file[0] == '\0')
		cfail(x, "access_key_file", 0, "needed (a file of one line, "
		    "mode 0600)");
	else if (c->s3.secret_key_file[0] == '\0')
		cfail(x, "secret_key_file", 0, "needed (a file of one line, "
		    "mode 0600)");
	/* read now so that a key anyone may read is refused at the
	 * start (each request reads them again: a fixed key needs no
	 * restart) */
	else if (xd_s3_key_read(c->s3.access_key_file, key, sizeof(key), e,
	    sizeof(e)) != 0)
		cfail(x, "access_key_file", 0, "%s", e);
	else if (OPENSSL_cleanse(key, sizeof(key)), xd_s3_key_read(
	    c->s3.secret_key_file, key, sizeof(key), e, sizeof(e)) != 0)
		cfail(x, "secret_key_file", 0, "%s", e);
	else
		rc = 0;
	OPENSSL_cleanse(key, sizeof(key));
	x->depth--;
	return rc;
}

/* ---- typed members ---- */

static int
c_keys(struct cx *x, json_t *o, const char *const *keys)
{
	const char *k = jsonstrict_unknown_key(o, keys);

	return k != NULL ? cfail(x, k, 1, "unknown key") : 0;
}

static int
c_obj(struct cx *x, json_t *o, const char *key, json_t **out)
{
	json_t *v = json_object_get(o, key);

	*out = NULL;
	if (v == NULL)
		return 0;
	if (!json_is_object(v))
		return cfail(x, key, 0, "an object");
	*out = v;
	return 0;
}

static int
c_str(struct cx *x, json_t *o, const char *key, char *buf, size_t len,
    int abs_path)
{
	json_t *v = json_object_get(o, key);
	const char *s;

	if (v == NULL)
		return 0;
	if (!json_is_string(v) || (s = json_string_value(v)) == NULL ||
	    strlen(s) != json_string_length(v))
		return cfail(x, key, 0, "a string");
	if (strlen(s) >= len)
		return cfail(x, key, 0, "at most %zu bytes", len - 1);
	if (abs_path && s[0] != '/')
		return cfail(x, key, 0, "an absolute path");
	snprintf(buf, len, "%s", s);
	return 0;
}

static int
c_long(struct cx *x, json_t *o, const char *key, long *dst, long lo, long hi)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi)
		return cfail(x, key, 0, "an integer from %ld to %ld", lo, hi);
	*dst = (long)json_integer_value(v);
	return 0;
}

/* A size in units of mult; 0 allowed when zero_ok (no limit). */
static int
c_u64(struct cx *x, json_t *o, const char *key, uint64_t *dst, uint64_t mult,
    int zero_ok)
{
	json_t *v = json_object_get(o, key);
	json_int_t n;

	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || (n = json_integer_value(v)) < (zero_ok ? 0 :
	    1) || (uint64_t)n > (UINT64_MAX >> 1) / mult)
		return cfail(x, key, 0, "an integer of at least %d",
		    zero_ok ? 0 : 1);
	*dst = (uint64_t)n * mult;
	return 0;
}

/* uids (users) or gids (groups): numbers or names. */
static int
c_ids(struct cx *x, json_t *o, const char *key, struct xd_ids *ids,
    int groups)
{
	json_t *a = json_object_get(o, key), *v;
	size_t i;

	if (a == NULL)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > 64)
		return cfail(x, key, 0, "an array of at most 64 %s",
		    groups ? "group names or gids" : "user names or uids");
	ids->n = 0;
	json_array_foreach(a, i, v) {
		if (json_is_integer(v) && json_integer_value(v) >= 0 &&
		    json_integer_value(v) < 4294967295ll) {
			ids->v[ids->n++] = (uint32_t)json_integer_value(v);
			continue;
		}
		if (json_is_string(v) && groups) {
			struct group *g = getgrnam(json_string_value(v));

			if (g == NULL)
				return cfail(x, key, 0, "no group %.64s",
				    json_string_value(v));
			ids->v[ids->n++] = g->gr_gid;
			continue;
		}
		if (json_is_string(v)) {
			struct passwd *pw = getpwnam(json_string_value(v));

			if (pw == NULL)
				return cfail(x, key, 0, "no user %.64s",
				    json_string_value(v));
			ids->v[ids->n++] = pw->pw_uid;
			continue;
		}
		return cfail(x, key, 0, "names or numbers");
	}
	return 0;
}

static int
c_lims(struct cx *x, json_t *root, const char *key, struct xd_lims *l)
{
	static const char *const keys[] = { "memory_mb", "pids", "cpu_pct",
	    "tmp_mb", "home_mb", "fsize_mb", "nofile", "nproc", "timeout_s",
	    "output_cap", "disk_mb", "inodes", NULL };
	json_t *o;
	int rc;

	if (c_obj(x, root, key, &o) != 0)
		return -1;
	if (o == NULL)
		return 0;
	x->path[x->depth++] = key;
	rc = c_keys(x, o, keys) != 0 ||
	    c_u64(x, o, "memory_mb", &l->sbx.memory_bytes, 1 << 20, 1) != 0 ||
	    c_u64(x, o, "pids", &l->sbx.pids, 1, 1) != 0 ||
	    c_u64(x, o, "cpu_pct", &l->sbx.cpu_pct, 1, 1) != 0 ||
	    c_u64(x, o, "tmp_mb", &l->sbx.tmp_bytes, 1 << 20, 1) != 0 ||
	    c_u64(x, o, "home_mb", &l->sbx.home_bytes, 1 << 20, 1) != 0 ||
	    c_u64(x, o, "fsize_mb", &l->sbx.fsize_bytes, 1 << 20, 1) != 0 ||
	    c_u64(x, o, "nofile", &l->sbx.nofile, 1, 1) != 0 ||
	    c_u64(x, o, "nproc", &l->sbx.nproc, 1, 1) != 0 ||
	    c_long(x, o, "timeout_s", &l->timeout_s, 1, 24 * 3600) != 0 ||
	    c_long(x, o, "output_cap", &l->output_cap, 0, 1l << 30) != 0 ||
	    c_u64(x, o, "disk_mb", &l->disk_bytes, 1 << 20, 1) != 0 ||
	    c_u64(x, o, "inodes", &l->inodes, 1, 1) != 0 ? -1 : 0;
	x->depth--;
	return rc;
}

/* A default above its maximum could never be asked for. */
static int
c_lims_check(struct cx *x, const struct xd_lims *d, const struct xd_lims *m)
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

	x->path[x->depth++] = "limits";
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		uint64_t dv = *(const uint64_t *)(const void *)((const char *)
		    &d->sbx + f[i].off);
		uint64_t mv = *(const uint64_t *)(const void *)((const char *)
		    &m->sbx + f[i].off);

		if (mv != 0 && (dv == 0 || dv > mv))
			return cfail(x, f[i].key, 0, "the default is above "
			    "limits_max.%s (%llu)", f[i].key,
			    (unsigned long long)(mv / f[i].mult));
	}
	if (d->timeout_s > m->timeout_s)
		return cfail(x, "timeout_s", 0, "above limits_max.timeout_s");
	if (d->output_cap > m->output_cap)
		return cfail(x, "output_cap", 0, "above limits_max.output_cap");
	if (m->disk_bytes && (d->disk_bytes > m->disk_bytes ||
	    d->disk_bytes == 0))
		return cfail(x, "disk_mb", 0, "above limits_max.disk_mb (0, no "
		    "quota, is above any)");
	if (m->inodes && (d->inodes > m->inodes || d->inodes == 0))
		return cfail(x, "inodes", 0, "above limits_max.inodes (0, no "
		    "limit, is above any)");
	/* below that mke2fs cannot make an ext4 with a journal */
	if ((d->disk_bytes && d->disk_bytes < (8ull << 20)) ||
	    (d->disk_bytes && d->inodes < 64))
		return cfail(x, "disk_mb", 0, "a workspace is at least 8 MB "
		    "and 64 inodes");
	x->depth--;
	return 0;
}

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

/* Read and hash one token file (httpauth_token_file: a link followed,
 * as a Kubernetes Secret's files are links; a regular file). */
static int
token_load(struct cx *x, struct xd_token *t, const char *key)
{
	char why[160];
	int others;

	if (httpauth_token_file(t->file, HTTPAUTH_TOKEN_MIN,
	    HTTPAUTH_TOKEN_MAX, t->digest, &others, why,
	    sizeof(why)) != 0)
		return cfail(x, key, 0, "%s: %s", t->file, why);
	return 0;
}

static int
c_tcp(struct cx *x, struct xd_cfg *c, json_t *o)
{
	static const char *const keys[] = { "listen", "tls_cert", "tls_key",
	    "tokens", "max_conns", "max_conns_per_peer", "head_timeout_ms",
	    "fd_reserve", "plain_http", NULL };
	static const char *const tkeys[] = { "name", "file", "role", "tenant",
	    NULL };
	json_t *a, *t, *v;
	size_t i;

	if (c_keys(x, o, keys) != 0 ||
	    c_str(x, o, "listen", c->tcp, sizeof(c->tcp), 0) != 0 ||
	    c_str(x, o, "tls_cert", c->tls_cert, sizeof(c->tls_cert), 1) != 0 ||
	    c_str(x, o, "tls_key", c->tls_key, sizeof(c->tls_key), 1) != 0 ||
	    c_long(x, o, "max_conns", &c->tcp_max_conns, 1, 100000) != 0 ||
	    c_long(x, o, "max_conns_per_peer", &c->tcp_max_conns_per_peer, 1,
	    100000) != 0 ||
	    c_long(x, o, "head_timeout_ms", &c->tcp_head_timeout_ms, 100,
	    600000) != 0 ||
	    c_long(x, o, "fd_reserve", &c->tcp_fd_reserve, 0, 65536) != 0)
		return -1;
	if ((v = json_object_get(o, "plain_http")) != NULL) {
		if (!json_is_boolean(v))
			return cfail(x, "plain_http", 0, "true or false");
		c->tcp_plain = json_is_true(v);
	}
	/* plain HTTP only when asked for by name (issue 24 point 9): a
	 * token then crosses the network in the clear */
	if (c->tcp_plain && (c->tls_cert[0] || c->tls_key[0]))
		return cfail(x, "plain_http", 0, "plain HTTP has no "
		    "certificate: drop tls_cert and tls_key, or plain_http");
	if (c->tcp[0] && !c->tcp_plain && (!c->tls_cert[0] || !c->tls_key[0]))
		return cfail(x, "listen", 0, "TCP is served with TLS unless "
		    "plain_http is true: tls_cert and tls_key are required");
	if ((a = json_object_get(o, "tokens")) == NULL)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > XD_TOKENS_MAX)
		return cfail(x, "tokens", 0, "an array of at most %d tokens",
		    XD_TOKENS_MAX);
	c->ntokens = 0;
	x->path[x->depth++] = "tokens";
	json_array_foreach(a, i, t) {
		struct xd_token *k = &c->tokens[c->ntokens];
		char role[16] = "";

		memset(k, 0, sizeof(*k));
		if (!json_is_object(t))
			return cfail(x, NULL, 0, "[%zu]: an object", i);
		if (c_keys(x, t, tkeys) != 0 ||
		    c_str(x, t, "name", k->name, sizeof(k->name), 0) != 0 ||
		    c_str(x, t, "file", k->file, sizeof(k->file), 1) != 0 ||
		    c_str(x, t, "role", role, sizeof(role), 0) != 0 ||
		    c_str(x, t, "tenant", k->tenant, sizeof(k->tenant), 0) != 0)
			return -1;
		if (!k->name[0] || !k->file[0])
			return cfail(x, NULL, 0, "[%zu]: name and file are "
			    "required", i);
		if ((k->role = role_of(role[0] ? role : "app")) ==
		    XD_ROLE_NONE)
			return cfail(x, NULL, 0, "[%zu].role: admin, app or "
			    "auditor", i);
		if (k->tenant[0] && k->role == XD_ROLE_ADMIN)
			return cfail(x, NULL, 0, "[%zu]: an admin token sees "
			    "every tenant; bind app or auditor tokens", i);
		if (token_load(x, k, "file") != 0)
			return -1;
		c->ntokens++;
	}
	x->depth--;
	return 0;
}

/* socket_group's gid: a group's name, or a number. */
static int
sock_gid(struct cx *x, struct xd_cfg *c, const char *key)
{
	struct group *g;
	char *end;
	unsigned long v;

	if (!c->socket_group[0])
		return 0;
	g = getgrnam(c->socket_group);
	v = strtoul(c->socket_group, &end, 10);
	if (g != NULL)
		c->socket_gid = g->gr_gid;
	else if (*end == '\0' && isdigit((unsigned char)c->socket_group[0]))
		c->socket_gid = (gid_t)v;
	else
		return cfail(x, key, 0, "no group %.64s", c->socket_group);
	return 0;
}

/*
 * sluiced's spelling of the socket and the roles (issue 24 point 2), so
 * that an operator writes one "control" block for both daemons:
 * control.socket_group, socket_mode and admin_uids ... auditor_gids.
 * "socket" and "roles" stay, as older aliases; a file that sets the same
 * thing both ways is refused (which one wins would be a guess).  The
 * values are sluiced's too: ids as numbers (names are also taken, as in
 * "roles"), the mode an octal string or a number.
 */
static int
c_control(struct cx *x, struct xd_cfg *c, json_t *root)
{
	static const char *const keys[] = { "socket_group", "socket_mode",
	    "admin_uids", "admin_gids", "app_uids", "app_gids",
	    "auditor_uids", "auditor_gids", NULL };
	json_t *o, *m;
	size_t i;
	int roles = 0;

	if (c_obj(x, root, "control", &o) != 0)
		return -1;
	if (o == NULL)
		return 0;
	x->path[x->depth++] = "control";
	if (c_keys(x, o, keys) != 0)
		return -1;
	for (i = 2; keys[i] != NULL; i++)
		roles |= json_object_get(o, keys[i]) != NULL;
	if (roles && json_object_get(root, "roles") != NULL)
		return cfail(x, NULL, 0, "the roles are set here and in "
		    "\"roles\": write them one way (control.*_uids and "
		    "*_gids, as in sluiced.json; roles is the older alias)");
	if ((json_object_get(o, "socket_group") != NULL ||
	    json_object_get(o, "socket_mode") != NULL) &&
	    json_object_get(root, "socket") != NULL)
		return cfail(x, NULL, 0, "the socket is set here and in "
		    "\"socket\": write it one way (control.socket_group and "
		    "socket_mode, as in sluiced.json; socket is the older "
		    "alias)");
	for (i = 2; keys[i] != NULL; i++) {
		enum xd_role r = role_of(i < 4 ? "admin" : i < 6 ? "app" :
		    "auditor");

		if (c_ids(x, o, keys[i], i % 2 ? &c->gids[r] : &c->uids[r],
		    i % 2) != 0)
			return -1;
	}
	if ((m = json_object_get(o, "socket_group")) != NULL) {
		if (json_is_null(m))
			c->socket_group[0] = '\0';
		else if (c_str(x, o, "socket_group", c->socket_group,
		    sizeof(c->socket_group), 0) != 0 ||
		    sock_gid(x, c, "socket_group") != 0)
			return -1;
	}
	if ((m = json_object_get(o, "socket_mode")) != NULL) {
		const char *str = json_string_value(m);
		char *end = NULL;
		long v = json_is_integer(m) ? (long)json_integer_value(m) :
		    str != NULL && *str ? strtol(str, &end, 8) : -1;

		if ((end != NULL && *end != '\0') || v < 0 || v > 0777 ||
		    (v & 0600) != 0600)
			return cfail(x, "socket_mode", 0, "an octal string such "
			    "as \"0660\" (the owner keeps rw)");
		c->socket_mode = (int)v;
	}
	x->depth--;
	return 0;
}

/*
 * "pools": [{"backend", "profile", "size", "limits"}], at most
 * XD_POOLS_MAX; each entry's limits read as a create's "limits" are
 * (xd_create_parse, with the defaults and maxima parsed above), so that
 * a create matches a pool when it would get exactly those limits.
 * Parsed last: the defaults, maxima, backend and profile are final.
 */
static int
c_pools(struct cx *x, struct xd_cfg *c, json_t *root)
{
	static const char *const pkeys[] = { "backend", "profile", "size",
	    "limits", NULL };
	json_t *a = json_object_get(root, "pools"), *o, *body;
	struct xd_create_spec s;
	struct xd_perr e;
	size_t i, k;
	char ix[16];
	int rc;

	c->npools = 0;
	if (a == NULL)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > XD_POOLS_MAX)
		return cfail(x, "pools", 0, "an array of at most %d pools",
		    XD_POOLS_MAX);
	x->path[x->depth++] = "pools";
	json_array_foreach(a, i, o) {
		struct xd_pool_cfg *p = &c->pools[i];
		const char *be, *pr;

		snprintf(ix, sizeof(ix), "[%d]", (int)i);  /* i < XD_POOLS_MAX */
		if (!json_is_object(o))
			return cfail(x, NULL, 0, "%s: an object", ix);
		if (c_keys(x, o, pkeys) != 0 || c_long(x, o, "size", &p->size,
		    0, 1024) != 0)
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
			cfail(x, NULL, 0, "%s: %s", ix, e.msg[0] ? e.msg :
			    "out of memory");
			xd_perr_clear(&e);
			return -1;
		}
		if (strcmp(s.backend, "ns") != 0 && strcmp(s.backend,
		    "gvisor") != 0)
			return cfail(x, NULL, 0, "%s: backend \"ns\" or "
			    "\"gvisor\"", ix);
		snprintf(p->backend, sizeof(p->backend), "%s", s.backend);
		snprintf(p->profile, sizeof(p->profile), "%s", s.profile[0] ?
		    s.profile : c->profile);
		p->lim = s.lim;
		for (k = 0; k < i; k++)
			if (strcmp(c->pools[k].backend, p->backend) == 0 &&
			    strcmp(c->pools[k].profile, p->profile) == 0 &&
			    xd_lims_eq(&c->pools[k].lim, &p->lim))
				return cfail(x, NULL, 0, "%s: the same backend, "
				    "profile and limits as [%zu]", ix, k);
		c->npools = i + 1;
	}
	x->depth--;
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

/* The top level's paths, names and numbers; backend, profile, cgroups
 * and tier checked. */
static int
c_top(struct cx *x, struct xd_cfg *c, json_t *root)
{
	long ub = (long)c->uid_base, slots = (long)c->slots;
	long t = c->control_timeout_ms;
	json_t *o;
	size_t i;

	if (c_str(x, root, "runtime_dir", c->runtime_dir,
	    sizeof(c->runtime_dir) - 32, 1) != 0 ||
	    c_str(x, root, "state_dir", c->state_dir, sizeof(c->state_dir) -
	    SBX_ID_MAX - 32, 1) != 0 ||
	    c_str(x, root, "control_socket", c->control, 108, 1) != 0 ||
	    c_long(x, root, "control_timeout_ms", &t, 100, 120000) != 0)
		return -1;
	c->control_timeout_ms = (int)t;
	if (c_str(x, root, "shim", c->shim, sizeof(c->shim), 1) != 0 ||
	    c_str(x, root, "image_dir", c->image_dir, sizeof(c->image_dir) -
	    SBX_DIGEST_HEX - 16, 1) != 0 ||
	    c_str(x, root, "profile", c->profile, sizeof(c->profile), 0) != 0 ||
	    c_str(x, root, "shim_static", c->shim_static,
	    sizeof(c->shim_static), 1) != 0 ||
	    c_str(x, root, "mke2fs", c->mke2fs, sizeof(c->mke2fs), 1) != 0 ||
	    c_str(x, root, "backend", c->backend, sizeof(c->backend), 0) != 0 ||
	    c_str(x, root, "tier", c->tier, sizeof(c->tier), 0) != 0 ||
	    c_str(x, root, "cgroups", c->cgroups, sizeof(c->cgroups), 0) != 0 ||
	    c_long(x, root, "uid_base", &ub, 65536, 4000000000l - 65536l *
	    1024) != 0 ||
	    c_long(x, root, "slots", &slots, 1, 1024) != 0)
		return -1;
	c->uid_base = (unsigned long)ub;
	c->slots = (unsigned long)slots;
	if (sbx_backend_find(c->backend) == NULL)
		return cfail(x, "backend", 0, "ns or gvisor");
	if (!sbx_id_ok(c->profile, SBX_ID_MAX))
		return cfail(x, "profile", 0, "a profile name (host, minimal, "
		    "base, media or an admin's)");
	if ((o = json_object_get(root, "tenant_profiles")) != NULL) {
		char e2[XD_ERR_MAX];

		if (sbx_tenant_profiles_parse(c->tenant_profiles,
		    sizeof(c->tenant_profiles), o, e2, sizeof(e2)) != 0) {
			/* "config: tenant_profiles...: what" */
			const char *w = strstr(e2, ": ");

			return cfail(x, "tenant_profiles", 0, "%s", w != NULL &&
			    (w = strstr(w + 2, ": ")) != NULL ? w + 2 : e2);
		}
	}
	if (c->cgroups[0] && strcmp(c->cgroups, "v1") && strcmp(c->cgroups,
	    "v2") && strcmp(c->cgroups, "off"))
		return cfail(x, "cgroups", 0, "\"\", \"v1\", \"v2\" or "
		    "\"off\"");
	for (i = 0; c->tier[i]; i++)
		if (!isalnum((unsigned char)c->tier[i]) && c->tier[i] != '_' &&
		    c->tier[i] != '-')
			break;
	if (!c->tier[0] || c->tier[i])
		return cfail(x, "tier", 0, "a tier name (off, registries, "
		    "public)");
	return 0;
}

/* "socket": the API socket's group and mode. */
static int
c_socket(struct cx *x, struct xd_cfg *c, json_t *o)
{
	static const char *const skeys[] = { "group", "mode", NULL };
	json_t *m;

	if (c_keys(x, o, skeys) != 0 || c_str(x, o, "group",
	    c->socket_group, sizeof(c->socket_group), 0) != 0)
		return -1;
	if ((m = json_object_get(o, "mode")) != NULL) {
		const char *s = json_string_value(m);
		char *end;
		long v = s ? strtol(s, &end, 8) : -1;

		if (s == NULL || *s == '\0' || *end != '\0' || v < 0 ||
		    v > 0777 || (v & 0600) != 0600)
			return cfail(x, "mode", 0, "an octal string such as "
			    "\"0660\" (the owner keeps rw)");
		c->socket_mode = (int)v;
	}
	return sock_gid(x, c, "group");
}

/* "quotas" */
static int
c_quotas(struct cx *x, struct xd_cfg *c, json_t *o)
{
	static const char *const qkeys[] = { "sandboxes", "per_tenant",
	    "per_user", "creates", "background_per_sandbox",
	    "finished_per_sandbox", "commands", "commands_per_tenant",
	    "disk_reserve_mb", "creates_per_tenant", NULL };

	if (c_keys(x, o, qkeys) != 0 ||
	    c_long(x, o, "sandboxes", &c->max_total, 0, 1000000) != 0 ||
	    c_long(x, o, "per_tenant", &c->max_per_tenant, 0, 1000000) != 0 ||
	    c_long(x, o, "per_user", &c->max_per_user, 0, 1000000) != 0 ||
	    c_long(x, o, "creates", &c->max_creates, 1, 1024) != 0 ||
	    c_long(x, o, "creates_per_tenant", &c->max_creates_tenant, 1,
	    1024) != 0 ||
	    c_long(x, o, "background_per_sandbox", &c->max_background, 0,
	    1024) != 0 ||
	    c_long(x, o, "finished_per_sandbox", &c->keep_finished, 0,
	    1024) != 0 ||
	    c_long(x, o, "commands", &c->max_cmds, 0, 1000000) != 0 ||
	    c_long(x, o, "commands_per_tenant", &c->max_cmds_tenant, 0,
	    1000000) != 0 ||
	    c_u64(x, o, "disk_reserve_mb", &c->disk_reserve, 1 << 20, 1) != 0)
		return -1;
	return 0;
}

/* "lifecycle": ages, the archives and their store. */
static int
c_lifecycle(struct cx *x, struct xd_cfg *c, json_t *o)
{
	static const char *const fkeys[] = { "idle_after", "remove_after",
	    "archive_dir", "archive_max_age", "archive_max_count_per_tenant",
	    "archive_max_bytes_per_tenant", "archive_store", "archive_s3",
	    NULL };
	static const char *const s3keys[] = { "endpoint", "region",
	    "access_key_file", "secret_key_file", NULL };

	if (c_keys(x, o, fkeys) != 0 ||
	    c_long(x, o, "idle_after", &c->idle_after, 0, 31622400) != 0 ||
	    c_long(x, o, "remove_after", &c->remove_after, 0, 31622400) != 0 ||
	    c_str(x, o, "archive_dir", c->archive_dir,
	    sizeof(c->archive_dir) - SBX_ID_MAX - 32, 1) != 0 ||
	    c_long(x, o, "archive_max_age", &c->arch_max_age, 0,
	    31622400 * 10l) != 0 ||
	    c_long(x, o, "archive_max_count_per_tenant", &c->arch_max_count,
	    0, 100000000) != 0 ||
	    c_u64(x, o, "archive_max_bytes_per_tenant", &c->arch_max_bytes, 1,
	    1) != 0 ||
	    cfg_store(x, o, c, s3keys) != 0)
		return -1;
	if (c->idle_after && c->remove_after && c->remove_after <
	    c->idle_after)
		return cfail(x, "remove_after", 0, "at least idle_after (%ld), "
		    "or 0 (never)", c->idle_after);
	return 0;
}

/* The top level's sizes and times, each in its range. */
static int
c_sizes(struct cx *x, struct xd_cfg *c, json_t *root)
{
	if (c_u64(x, root, "max_file_bytes", &c->max_file_bytes, 1, 0) != 0 ||
	    c_u64(x, root, "max_body_bytes", &c->max_body_bytes, 1, 0) != 0 ||
	    c_u64(x, root, "max_archive_bytes", &c->max_archive_bytes, 1,
	    0) != 0 ||
	    c_u64(x, root, "ring_bytes", &c->ring_bytes, 1, 0) != 0 ||
	    c_u64(x, root, "ring_budget_bytes", &c->ring_budget, 1, 1) != 0 ||
	    c_u64(x, root, "events_buffer_bytes", &c->events_buffer, 1, 0) !=
	    0 ||
	    c_u64(x, root, "stream_watermark", &c->stream_watermark, 1, 0) !=
	    0 || c_long(x, root, "drain_s", &c->drain_s, 0, 3600) != 0 ||
	    c_u64(x, root, "reply_buffer_bytes", &c->reply_buffer, 1, 0) !=
	    0 || c_u64(x, root, "reply_total_bytes", &c->reply_total, 1, 0) !=
	    0 || c_long(x, root, "reply_timeout_ms", &c->reply_timeout_ms,
	    1000, 3600000) != 0)
		return -1;
	if (c->reply_buffer < 4096 || c->reply_buffer > (64ull << 20))
		return cfail(x, "reply_buffer_bytes", 0, "4096 to 64 MiB");
	if (c->reply_total < c->reply_buffer || c->reply_total > (4ull << 30))
		return cfail(x, "reply_total_bytes", 0, "reply_buffer_bytes to "
		    "4 GiB");
	if (c->max_file_bytes > (1ull << 32))
		return cfail(x, "max_file_bytes", 0, "at most 4 GiB");
	if (c->max_archive_bytes < 4096 || c->max_archive_bytes > (4ull <<
	    30))
		return cfail(x, "max_archive_bytes", 0, "4096 to 4 GiB");
	if (c->max_body_bytes > (64ull << 20))
		return cfail(x, "max_body_bytes", 0, "at most 64 MiB");
	if (c->ring_bytes > (64ull << 20) || c->ring_bytes < 4096)
		return cfail(x, "ring_bytes", 0, "4096 to 64 MiB");
	return 0;
}

/* "artifacts" */
static int
c_artifacts(struct cx *x, struct xd_cfg *c, json_t *o)
{
	static const char *const akeys[] = { "file_bytes", "count",
	    "total_bytes", "walk_entries", NULL };
	long n = (long)c->art.count;

	if (c_keys(x, o, akeys) != 0 ||
	    c_u64(x, o, "file_bytes", &c->art.file_bytes, 1, 1) != 0 ||
	    c_long(x, o, "count", &n, 0, 10000) != 0 ||
	    c_u64(x, o, "total_bytes", &c->art.total_bytes, 1, 1) != 0 ||
	    c_long(x, o, "walk_entries", &c->snap_entries, 1, 10000000) != 0)
		return -1;
	c->art.count = (size_t)n;
	return 0;
}

/* "roles": uids and groups per role. */
static int
c_roles(struct cx *x, struct xd_cfg *c, json_t *o)
{
	static const char *const rkeys[] = { "admin", "app", "auditor", NULL };
	static const char *const idkeys[] = { "uids", "groups", NULL };
	size_t i;

	if (c_keys(x, o, rkeys) != 0)
		return -1;
	for (i = 0; rkeys[i] != NULL; i++) {
		json_t *r;
		enum xd_role role = role_of(rkeys[i]);

		if (c_obj(x, o, rkeys[i], &r) != 0)
			return -1;
		if (r == NULL)
			continue;
		x->path[x->depth++] = rkeys[i];
		if (c_keys(x, r, idkeys) != 0 ||
		    c_ids(x, r, "uids", &c->uids[role], 0) != 0 ||
		    c_ids(x, r, "groups", &c->gids[role], 1) != 0)
			return -1;
		x->depth--;
	}
	return 0;
}

/* "opensandbox": the compatible API (exec_os_cfg.c). */
static int
c_opensandbox(struct cx *x, struct xd_cfg *c, json_t *o)
{
	char okey[64], oerr[XD_ERR_MAX];

	if (xd_os_cfg_parse(&c->os, o, okey, sizeof(okey), oerr,
	    sizeof(oerr)) != 0)
		return cfail(x, okey[0] && !strchr(okey, '[') ? okey : NULL, 0,
		    "%s%s%s", strchr(okey, '[') ? okey : "", strchr(okey, '[') ?
		    ": " : "", oerr);
	if (c->os.listen[0] && c->tcp[0] && strcmp(c->os.listen, c->tcp) == 0)
		return cfail(x, NULL, 0, "listen: the same address as "
		    "tcp.listen");
	return 0;
}

/* An object at key k of root read by fn, with k on the error path; an
 * absent one is fine. */
static int
c_section(struct cx *x, struct xd_cfg *c, json_t *root, const char *k,
    int (*fn)(struct cx *, struct xd_cfg *, json_t *))
{
	json_t *o;

	if (c_obj(x, root, k, &o) != 0)
		return -1;
	if (o == NULL)
		return 0;
	x->path[x->depth++] = k;
	if (fn(x, c, o) != 0)
		return -1;
	x->depth--;
	return 0;
}

int
xd_cfg_parse(struct xd_cfg *c, const char *text, size_t len,
    const char *name, char *err, size_t errlen)
{
	static const char *const keys[] = { "runtime_dir", "state_dir",
	    "control_socket", "control_timeout_ms", "shim", "mke2fs", "backend", "tier",
	    "cgroups", "uid_base", "slots", "socket", "limits", "limits_max",
	    "quotas", "max_file_bytes", "max_body_bytes", "ring_bytes",
	    "ring_budget_bytes",
	    "stream_watermark", "drain_s", "roles", "control", "tcp",
	    "artifacts", "log",
	    "events_buffer_bytes", "image_dir", "profile", "shim_static",
	    "tenant_profiles", "lifecycle", "reply_buffer_bytes",
	    "reply_total_bytes", "reply_timeout_ms", "max_archive_bytes",
	    "opensandbox", "pools", "pool_fills", NULL };
	static const char *const lkeys[] = { "path", NULL };
	struct cx x;
	json_error_t je;
	json_t *root, *o;
	int rc = -1;

	memset(&x, 0, sizeof(x));
	x.text = text;
	x.len = len;
	x.name = name;
	x.err = err;
	x.errlen = errlen;
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL) {
		snprintf(err, errlen, "%s:%d:%d: %s", name, je.line, je.column,
		    je.text);
		return -1;
	}
	if (!json_is_object(root)) {
		cfail(&x, NULL, 0, "the configuration is one JSON object");
		goto out;
	}
	if (c_keys(&x, root, keys) != 0 || c_top(&x, c, root) != 0 ||
	    c_section(&x, c, root, "socket", c_socket) != 0 ||
	    c_lims(&x, root, "limits", &c->def) != 0 ||
	    c_lims(&x, root, "limits_max", &c->max) != 0 ||
	    c_lims_check(&x, &c->def, &c->max) != 0 ||
	    c_section(&x, c, root, "quotas", c_quotas) != 0)
		goto out;
	/* the archives are under the state directory unless named (".":
	 * no sandbox id starts with a dot) */
	snprintf(c->archive_dir, sizeof(c->archive_dir), "%.400s/.archive",
	    c->state_dir);
	if (c_section(&x, c, root, "lifecycle", c_lifecycle) != 0 ||
	    c_sizes(&x, c, root) != 0)
		goto out;
	if (c_obj(&x, root, "log", &o) != 0)
		goto out;
	if (o != NULL) {
		x.path[x.depth++] = "log";
		if (c_keys(&x, o, lkeys) != 0 || c_str(&x, o, "path",
		    c->audit_log, sizeof(c->audit_log), 1) != 0)
			goto out;
		x.depth--;
	}
	if (c_section(&x, c, root, "artifacts", c_artifacts) != 0 ||
	    c_section(&x, c, root, "roles", c_roles) != 0 ||
	    c_control(&x, c, root) != 0 ||
	    c_section(&x, c, root, "tcp", c_tcp) != 0 ||
	    c_section(&x, c, root, "opensandbox", c_opensandbox) != 0 ||
	    c_long(&x, root, "pool_fills", &c->pool_fills, 1, 16) != 0 ||
	    c_pools(&x, c, root) != 0)
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
	json_t *ctl = json_object(), *toks = json_array(), *o;
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
		if (c->s3.url[0])
			json_object_set_new(json_object_get(o, "lifecycle"),
			    "archive_s3", json_pack("{s:s,s:s,s:s,s:s}",
			    "endpoint", c->s3.endpoint, "region", c->s3.region,
			    "access_key_file", c->s3.access_key_file,
			    "secret_key_file", c->s3.secret_key_file));
		json_object_set_new(json_object_get(o, "quotas"), "commands",
		    json_integer((json_int_t)c->max_cmds));
		json_object_set_new(json_object_get(o, "quotas"),
		    "commands_per_tenant", json_integer(
		    (json_int_t)c->max_cmds_tenant));
		json_object_set_new(json_object_get(o, "quotas"),
		    "disk_reserve_mb", json_integer(
		    (json_int_t)(c->disk_reserve >> 20)));
	}
	if (o != NULL && c->tcp[0])
		json_object_set_new(o, "tcp", json_pack("{s:s,s:b,s:s,s:s,s:o,"
		    "s:I,s:I,s:I,s:I}", "listen", c->tcp, "plain_http",
		    c->tcp_plain, "tls_cert", c->tls_cert,
		    "tls_key", c->tls_key, "tokens", toks, "max_conns",
		    (json_int_t)c->tcp_max_conns, "max_conns_per_peer",
		    (json_int_t)c->tcp_max_conns_per_peer, "head_timeout_ms",
		    (json_int_t)c->tcp_head_timeout_ms, "fd_reserve",
		    (json_int_t)c->tcp_fd_reserve));
	else
		json_decref(toks);
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
