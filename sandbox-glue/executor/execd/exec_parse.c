/*
 * exec_parse.c: what a client of sluice-execd sends, parsed and checked
 * with no I/O (tests/fuzz/fuzz_execapi.c runs every function here on
 * arbitrary bytes): route patterns, paths of the files API, Range, the
 * bodies of create, PATCH and commands.
 *
 * Limits: an app may ask for less than the admin's maximum, never more.
 * More is refused (400 bad_request naming the field and the maximum)
 * rather than clamped: a sandbox that silently got less memory than its
 * caller planned for fails later and far from the cause.
 */
#include "sluice-config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/apiroute.h"
#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

#define ARGV_MAX	4096
#define ARG_MAX_BYTES	(256 * 1024)    /* all of argv, and all of env */
#define ENV_MAX		256

void
xd_perr_clear(struct xd_perr *e)
{
	json_decref(e->extra);
	memset(e, 0, sizeof(*e));
}

int
xd_perr_set(struct xd_perr *e, int status, const char *code,
    const char *fmt, ...)
{
	va_list ap;

	e->status = status;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- routes ---- */

/* Percent-decode s[0..n) into a new string; NULL for a bad escape or a
 * NUL ('+' is a plus: this is a path, not a form). */
static char *
pct_decode(const char *s, size_t n)
{
	char *o = malloc(n + 1);
	size_t i, j = 0;

	if (o == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			int h, l;

			if (i + 2 >= n || (h = util_hexval(s[i + 1])) < 0 ||
			    (l = util_hexval(s[i + 2])) < 0)
				goto bad;
			c = h * 16 + l;
			i += 2;
		}
		if (c == 0)
			goto bad;
		o[j++] = (char)c;
	}
	o[j] = '\0';
	return o;
bad:
	free(o);
	return NULL;
}

void
xd_args_free(char **args, size_t nargs)
{
	size_t i;

	for (i = 0; i < nargs; i++) {
		free(args[i]);
		args[i] = NULL;
	}
}

int
xd_route_match(const char *pattern, const char *path, char **args,
    size_t nargs)
{
	struct apiroute_cap caps[XD_ARGS_MAX];
	size_t i, n;

	for (i = 0; i < nargs; i++)
		args[i] = NULL;
	if (!apiroute_match(pattern, path, caps, nargs < XD_ARGS_MAX ? nargs :
	    XD_ARGS_MAX, &n))
		return 0;
	for (i = 0; i < n; i++)
		if ((args[i] = pct_decode(caps[i].p, caps[i].n)) == NULL) {
			xd_args_free(args, nargs);
			return -1;
		}
	return 1;
}

/* ---- paths ---- */

int
xd_path_norm(const char *in, char *out, size_t outlen)
{
	size_t o = 0, n;
	const char *p = in;

	if (outlen == 0)
		return -1;
	if (p[0] == '/') {
		/* the one absolute path the files API reaches */
		if (strncmp(p, SBX_WORKDIR, strlen(SBX_WORKDIR)) != 0 ||
		    (p[strlen(SBX_WORKDIR)] != '/' &&
		    p[strlen(SBX_WORKDIR)] != '\0'))
			return -1;
		p += strlen(SBX_WORKDIR);
	}
	out[0] = '\0';
	while (*p != '\0') {
		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (n == 0)
			break;
		if (n == 1 && p[0] == '.') {
			/* nothing */
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			/* up one, never above the top */
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			out[o] = '\0';
		} else {
			if (o + (o ? 1 : 0) + n + 1 > outlen)
				return -1;
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
			out[o] = '\0';
		}
		p += n;
	}
	return 0;
}

/* ---- Range ---- */

static int
dec_u64(const char **p, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	if (!isdigit((unsigned char)*s))
		return -1;
	for (; isdigit((unsigned char)*s); s++) {
		if (x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*v = x;
	*p = s;
	return 0;
}

int
xd_range_parse(const char *h, uint64_t size, uint64_t *from, uint64_t *to)
{
	const char *p = h;
	uint64_t a, b;

	if (h == NULL || strncmp(p, "bytes=", 6) != 0)
		return 0;
	p += 6;
	while (*p == ' ')
		p++;
	if (strchr(p, ',') != NULL)
		return 0;       /* several ranges: the whole file (RFC 9110) */
	if (*p == '-') {
		p++;
		if (dec_u64(&p, &b) != 0 || *p != '\0')
			return 0;
		if (b == 0 || size == 0)
			return -1;
		*from = b >= size ? 0 : size - b;
		*to = size - 1;
		return 1;
	}
	if (dec_u64(&p, &a) != 0 || *p != '-')
		return 0;
	p++;
	if (*p == '\0')
		b = UINT64_MAX;
	else if (dec_u64(&p, &b) != 0 || *p != '\0' || b < a)
		return 0;
	if (a >= size)
		return -1;
	*from = a;
	*to = b >= size ? size - 1 : b;
	return 1;
}

/* ---- bodies ---- */

static int
want_object(json_t *body, struct xd_perr *e)
{
	if (!json_is_object(body))
		return xd_perr_set(e, 400, "bad_request", "expected a JSON object");
	return 0;
}

/* Keys of o all in keys, else 400 naming the first other one. */
static int
keys_only(json_t *o, const char *const *keys, const char *where,
    struct xd_perr *e)
{
	const char *k = jsonstrict_unknown_key(o, keys);
	char shown[4 * 64 + 1];

	if (k == NULL)
		return 0;
	sbx_text_safe(k, shown, sizeof(shown));
	return xd_perr_set(e, 400, "bad_request", "%s%sunknown key \"%s\"",
	    where, where[0] ? ": " : "", shown);
}

/* A string member that fits buf (missing leaves buf), no NUL. */
static int
get_str(json_t *o, const char *key, char *buf, size_t len, int required,
    struct xd_perr *e)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL) {
		if (required)
			return xd_perr_set(e, 400, "bad_request", "%s is required",
			    key);
		return 0;
	}
	if (!json_is_string(v) || json_string_length(v) >= len ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return xd_perr_set(e, 400, "bad_request", "%s: a string of at most "
		    "%zu bytes", key, len - 1);
	memcpy(buf, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/* One limit: key in units of mult; 1..max (max 0: any). */
static int
get_lim(json_t *o, const char *key, uint64_t mult, uint64_t *dst,
    uint64_t max, struct xd_perr *e)
{
	json_t *v = json_object_get(o, key);
	json_int_t n;

	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || (n = json_integer_value(v)) < 1 ||
	    (uint64_t)n > UINT64_MAX / mult)
		return xd_perr_set(e, 400, "bad_request", "limits.%s: a positive "
		    "integer", key);
	if (max != 0 && (uint64_t)n * mult > max) {
		e->extra = json_pack("{s:s,s:I}", "field", key, "max",
		    (json_int_t)(max / mult));
		return xd_perr_set(e, 400, "bad_request", "limits.%s: at most %llu "
		    "(the administrator's maximum)", key,
		    (unsigned long long)(max / mult));
	}
	*dst = (uint64_t)n * mult;
	return 0;
}

/* An index URL of a package manager's configuration: https://, a host,
 * a path; no user-pass, query, fragment or byte a configuration line
 * would read otherwise. */
static int
index_url_ok(const char *u)
{
	const char *p;

	if (strncmp(u, "https://", 8) != 0 || u[8] == '\0' || u[8] == '/')
		return 0;
	for (p = u; *p != '\0'; p++)
		if (*p <= ' ' || *p >= 0x7f || strchr("@?#\"'\\;", *p) != NULL)
			return 0;
	return 1;
}

/* One of "credentials": a name, or {"name", "for"?, "index"?}. */
static int
cred_ask_parse(json_t *v, struct xd_cred_ask *a, struct xd_perr *e)
{
	static const char *const ckeys[] = { "name", "for", "index", NULL };
	const char *n = json_string_value(v);

	memset(a, 0, sizeof(*a));
	if (json_is_object(v)) {
		if (keys_only(v, ckeys, "credentials[]", e) != 0 ||
		    get_str(v, "for", a->for_, sizeof(a->for_), 0, e) != 0 ||
		    get_str(v, "index", a->index, sizeof(a->index), 0, e) != 0)
			return -1;
		n = json_string_value(json_object_get(v, "name"));
		if (a->for_[0] != '\0' && strcmp(a->for_, "npm") != 0 &&
		    strcmp(a->for_, "pip") != 0)
			return xd_perr_set(e, 400, "bad_request", "credentials[]."
			    "for: npm or pip");
		if (a->index[0] != '\0' && a->for_[0] == '\0')
			return xd_perr_set(e, 400, "bad_request", "credentials[]."
			    "index: only with \"for\"");
		if (a->index[0] != '\0' && !index_url_ok(a->index))
			return xd_perr_set(e, 400, "bad_request", "credentials[]."
			    "index: an https:// URL of at most %d bytes, without "
			    "user, query or fragment", XD_CRED_INDEX_MAX - 1);
	}
	if (n == NULL || !sbx_id_ok(n, SBX_ID_MAX))
		return xd_perr_set(e, 400, "bad_request", "credentials: a name "
		    "is 1 to 64 of A-Z a-z 0-9 . _ -, the first a letter or "
		    "digit");
	snprintf(a->name, sizeof(a->name), "%s", n);
	return 0;
}

int
xd_create_parse(json_t *body, const struct xd_lims *def,
    const struct xd_lims *max, const char *def_tier, const char *def_backend,
    struct xd_create_spec *s, struct xd_perr *e)
{
	static const char *const keys[] = { "id", "tenant", "user",
	    "network", "profile", "limits", "backend", "credentials", NULL };
	static const char *const lkeys[] = { "memory_mb", "pids", "cpu_pct",
	    "tmp_mb", "home_mb", "fsize_mb", "nofile", "nproc", "timeout_s",
	    "output_cap", "disk_mb", "inodes", NULL };
	json_t *net, *l, *cr, *v;
	uint64_t t, cap;
	int ino_asked = 0;
	size_t i, j;

	memset(s, 0, sizeof(*s));
	s->lim = *def;
	snprintf(s->tier, sizeof(s->tier), "%s", def_tier);
	snprintf(s->backend, sizeof(s->backend), "%s", def_backend);
	/* "": the daemon's "profile" */
	if (want_object(body, e) != 0 || keys_only(body, keys, "", e) != 0 ||
	    get_str(body, "id", s->id, sizeof(s->id), 1, e) != 0 ||
	    get_str(body, "tenant", s->tenant, sizeof(s->tenant), 0, e) != 0 ||
	    get_str(body, "user", s->user, sizeof(s->user), 0, e) != 0 ||
	    get_str(body, "profile", s->profile, sizeof(s->profile), 0, e) !=
	    0 || get_str(body, "backend", s->backend, sizeof(s->backend), 0, e)
	    != 0)
		return -1;
	if (!sbx_id_ok(s->id, SBX_ID_MAX))
		return xd_perr_set(e, 400, "bad_request", "id: 1 to 64 of A-Z a-z 0-9 "
		    ". _ -, the first a letter or digit");
	if (s->tenant[0] && !sbx_id_ok(s->tenant, SBX_ID_MAX))
		return xd_perr_set(e, 400, "bad_request", "tenant: 1 to 64 of A-Z a-z "
		    "0-9 . _ -, the first a letter or digit");
	if (!sbx_user_ok(s->user))
		return xd_perr_set(e, 400, "bad_request", "user: at most %d bytes of "
		    "UTF-8 without control characters", SBX_USER_MAX);
	if (s->profile[0] && !sbx_id_ok(s->profile, sizeof(s->profile) - 1))
		return xd_perr_set(e, 400, "bad_request", "profile: a profile name "
		    "(host, minimal, base, media or an admin's)");
	if (sbx_backend_find(s->backend) == NULL)
		return xd_perr_set(e, 400, "bad_request", "backend: ns or gvisor");
	if ((net = json_object_get(body, "network")) != NULL) {
		static const char *const nkeys[] = { "tier", NULL };

		if (!json_is_object(net))
			return xd_perr_set(e, 400, "bad_request", "network: an object "
			    "{\"tier\"}");
		if (keys_only(net, nkeys, "network", e) != 0 ||
		    xd_tier_parse(net, s->tier, sizeof(s->tier), e) != 0)
			return -1;
	}
	if ((cr = json_object_get(body, "credentials")) != NULL) {
		if (!json_is_array(cr) || json_array_size(cr) > XD_CREDS_MAX)
			return xd_perr_set(e, 400, "bad_request", "credentials: an "
			    "array of at most %d credential names or {\"name\", "
			    "\"for\", \"index\"}", XD_CREDS_MAX);
		json_array_foreach(cr, i, v) {
			if (cred_ask_parse(v, &s->creds[i], e) != 0)
				return -1;
			for (j = 0; j < i; j++)
				if (strcmp(s->creds[j].name, s->creds[i].name) ==
				    0)
					return xd_perr_set(e, 400, "bad_request",
					    "credentials: %s named twice",
					    s->creds[i].name);
			s->ncreds = (int)i + 1;
		}
	}
	if ((l = json_object_get(body, "limits")) != NULL) {
		if (!json_is_object(l))
			return xd_perr_set(e, 400, "bad_request", "limits: an object");
		t = (uint64_t)s->lim.timeout_s;
		cap = (uint64_t)s->lim.output_cap;
		if (keys_only(l, lkeys, "limits", e) != 0 ||
		    get_lim(l, "memory_mb", 1 << 20, &s->lim.sbx.memory_bytes,
		    max->sbx.memory_bytes, e) != 0 ||
		    get_lim(l, "pids", 1, &s->lim.sbx.pids, max->sbx.pids, e) !=
		    0 || get_lim(l, "cpu_pct", 1, &s->lim.sbx.cpu_pct,
		    max->sbx.cpu_pct, e) != 0 ||
		    get_lim(l, "tmp_mb", 1 << 20, &s->lim.sbx.tmp_bytes,
		    max->sbx.tmp_bytes, e) != 0 ||
		    get_lim(l, "home_mb", 1 << 20, &s->lim.sbx.home_bytes,
		    max->sbx.home_bytes, e) != 0 ||
		    get_lim(l, "fsize_mb", 1 << 20, &s->lim.sbx.fsize_bytes,
		    max->sbx.fsize_bytes, e) != 0 ||
		    get_lim(l, "nofile", 1, &s->lim.sbx.nofile,
		    max->sbx.nofile, e) != 0 ||
		    get_lim(l, "nproc", 1, &s->lim.sbx.nproc, max->sbx.nproc,
		    e) != 0 ||
		    get_lim(l, "timeout_s", 1, &t, (uint64_t)max->timeout_s, e)
		    != 0 ||
		    get_lim(l, "output_cap", 1, &cap, (uint64_t)max->output_cap,
		    e) != 0 ||
		    get_lim(l, "disk_mb", 1 << 20, &s->lim.disk_bytes,
		    max->disk_bytes, e) != 0 ||
		    get_lim(l, "inodes", 1, &s->lim.inodes, max->inodes, e) != 0)
			return -1;
		/* what mke2fs can make (and a workspace needs); the field
		 * named, as for a value above the maximum */
		if (s->lim.disk_bytes && s->lim.disk_bytes < (8ull << 20)) {
			e->extra = json_pack("{s:s,s:i}", "field", "disk_mb",
			    "min", 8);
			return xd_perr_set(e, 400, "bad_request", "limits.disk_mb: a "
			    "workspace is at least 8 MB");
		}
		if (s->lim.disk_bytes && s->lim.inodes < 64) {
			e->extra = json_pack("{s:s,s:i}", "field", "inodes",
			    "min", 64);
			return xd_perr_set(e, 400, "bad_request", "limits.inodes: a "
			    "workspace has at least 64 inodes");
		}
		/* inodes asked for that the size cannot hold: refused, not
		 * left to fail in mke2fs (a 500) */
		ino_asked = json_object_get(l, "inodes") != NULL;
		if (s->lim.disk_bytes && ino_asked &&
		    s->lim.inodes > s->lim.disk_bytes / XD_WS_INODE_MIN) {
			e->extra = json_pack("{s:s,s:I}", "field", "inodes",
			    "max", (json_int_t)(s->lim.disk_bytes /
			    XD_WS_INODE_MIN));
			return xd_perr_set(e, 400, "bad_request", "limits.inodes: at "
			    "most %llu for disk_mb %llu (one per %d bytes)",
			    (unsigned long long)(s->lim.disk_bytes /
			    XD_WS_INODE_MIN), (unsigned long long)
			    (s->lim.disk_bytes >> 20), XD_WS_INODE_MIN);
		}
		s->lim.timeout_s = (long)t;
		s->lim.output_cap = (long)cap;
	}
	/* a default inode count (the daemon's, for its default size) is
	 * scaled down to what a small workspace holds */
	if (s->lim.disk_bytes && !ino_asked && s->lim.inodes >
	    s->lim.disk_bytes / XD_WS_INODE_BYTES)
		s->lim.inodes = s->lim.disk_bytes / XD_WS_INODE_BYTES;
	return 0;
}

int
xd_tier_parse(json_t *body, char *tier, size_t len, struct xd_perr *e)
{
	char t[16] = "";

	if (want_object(body, e) != 0 || get_str(body, "tier", t, sizeof(t),
	    1, e) != 0)
		return -1;
	/* sluiced knows the tiers; the name only has to be one */
	if (!sbx_id_ok(t, sizeof(t) - 1))
		return xd_perr_set(e, 400, "bad_request", "tier: a tier name (off, "
		    "registries, public...)");
	snprintf(tier, len, "%s", t);
	return 0;
}

void
xd_cmd_spec_free(struct xd_cmd_spec *s)
{
	size_t i;

	for (i = 0; s->argv != NULL && s->argv[i] != NULL; i++)
		free(s->argv[i]);
	free(s->argv);
	for (i = 0; s->env != NULL && s->env[i] != NULL; i++)
		free(s->env[i]);
	free(s->env);
	free(s->stdin_data);
	memset(s, 0, sizeof(*s));
}

/* A JSON string as a C string: no NUL inside. */
static const char *
cstr(json_t *v)
{
	if (!json_is_string(v) ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return NULL;
	return json_string_value(v);
}

static int
env_key_ok(const char *k)
{
	size_t i;

	if (!(isalpha((unsigned char)k[0]) || k[0] == '_'))
		return 0;
	for (i = 1; k[i] != '\0'; i++)
		if (!(isalnum((unsigned char)k[i]) || k[i] == '_'))
			return 0;
	return i <= 128;
}

static long
get_long(json_t *o, const char *key, long dflt, long lo, long hi,
    struct xd_perr *e, int *bad)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL)
		return dflt;
	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi) {
		e->extra = json_pack("{s:s,s:I}", "field", key, "max",
		    (json_int_t)hi);
		xd_perr_set(e, 400, "bad_request", "%s: an integer from %ld to %ld",
		    key, lo, hi);
		*bad = 1;
		return dflt;
	}
	return (long)json_integer_value(v);
}

int
xd_cmd_spec_parse(json_t *body, const struct xd_lims *lim, long timeout_max,
    long cap_max, int background, struct xd_cmd_spec *s, struct xd_perr *e)
{
	static const char *const keys[] = { "cmd", "shell", "env", "cwd",
	    "timeout_s", "stdin", "output_cap", "output_cap_total", "encoding",
	    "changed", NULL };
	json_t *cmd, *sh, *env, *v;
	const char *str, *k;
	size_t i, n, bytes = 0;
	int bad = 0;

	memset(s, 0, sizeof(*s));
	if (want_object(body, e) != 0 || keys_only(body, keys, "", e) != 0)
		return -1;
	cmd = json_object_get(body, "cmd");
	sh = json_object_get(body, "shell");
	if ((cmd == NULL) == (sh == NULL))
		return xd_perr_set(e, 400, "bad_request", "exactly one of \"cmd\" "
		    "(an argv array) and \"shell\" (a string)");
	if (cmd != NULL) {
		if (!json_is_array(cmd) || (n = json_array_size(cmd)) == 0 ||
		    n > ARGV_MAX)
			return xd_perr_set(e, 400, "bad_request", "cmd: an array of 1 "
			    "to %d strings", ARGV_MAX);
		if ((s->argv = calloc(n + 1, sizeof(char *))) == NULL)
			return xd_perr_set(e, 500, "internal", "out of memory");
		for (i = 0; i < n; i++) {
			if ((str = cstr(json_array_get(cmd, i))) == NULL ||
			    (bytes += strlen(str) + 1) > ARG_MAX_BYTES) {
				xd_perr_set(e, 400, "bad_request", "cmd[%zu]: a string "
				    "without NUL (%d bytes in all at most)", i,
				    ARG_MAX_BYTES);
				goto fail;
			}
			if ((s->argv[i] = strdup(str)) == NULL)
				goto oom;
		}
		if (s->argv[0][0] == '\0') {
			xd_perr_set(e, 400, "bad_request", "cmd[0]: empty");
			goto fail;
		}
	} else {
		if ((str = cstr(sh)) == NULL || strlen(str) > ARG_MAX_BYTES) {
			xd_perr_set(e, 400, "bad_request", "shell: a string without "
			    "NUL of at most %d bytes", ARG_MAX_BYTES);
			goto fail;
		}
		if ((s->argv = calloc(4, sizeof(char *))) == NULL ||
		    (s->argv[0] = strdup("/bin/sh")) == NULL ||
		    (s->argv[1] = strdup("-c")) == NULL ||
		    (s->argv[2] = strdup(str)) == NULL)
			goto oom;
	}
	if ((env = json_object_get(body, "env")) != NULL) {
		if (!json_is_object(env) || json_object_size(env) > ENV_MAX) {
			xd_perr_set(e, 400, "bad_request", "env: an object of at most "
			    "%d string values", ENV_MAX);
			goto fail;
		}
		if ((s->env = calloc(json_object_size(env) + 1,
		    sizeof(char *))) == NULL)
			goto oom;
		i = 0;
		bytes = 0;
		json_object_foreach(env, k, v) {
			if (!env_key_ok(k) || (str = cstr(v)) == NULL ||
			    (bytes += strlen(k) + strlen(str) + 2) >
			    ARG_MAX_BYTES) {
				xd_perr_set(e, 400, "bad_request", "env: names of "
				    "[A-Za-z_][A-Za-z0-9_]*, string values "
				    "without NUL");
				goto fail;
			}
			if (asprintf(&s->env[i], "%s=%s", k, str) < 0) {
				s->env[i] = NULL;
				goto oom;
			}
			i++;
		}
	}
	snprintf(s->cwd, sizeof(s->cwd), SBX_WORKDIR);
	if ((v = json_object_get(body, "cwd")) != NULL) {
		if ((str = cstr(v)) == NULL || str[0] == '\0' ||
		    strlen(str) + strlen(SBX_WORKDIR) + 2 > sizeof(s->cwd)) {
			xd_perr_set(e, 400, "bad_request", "cwd: a path");
			goto fail;
		}
		/* inside the sandbox: the backend chdirs there */
		if (str[0] == '/')
			snprintf(s->cwd, sizeof(s->cwd), "%s", str);
		else
			snprintf(s->cwd, sizeof(s->cwd), SBX_WORKDIR "/%s", str);
	}
	s->timeout_s = get_long(body, "timeout_s", background ? 0 :
	    lim->timeout_s, 1, timeout_max, e, &bad);
	if (bad)
		goto fail;
	s->output_cap = get_long(body, "output_cap", lim->output_cap, 0,
	    cap_max, e, &bad);
	if (bad)
		goto fail;
	/* the whole answer, both streams: at most what they could keep */
	if (json_object_get(body, "output_cap_total") != NULL) {
		if (background) {
			xd_perr_set(e, 400, "bad_request", "output_cap_total: for exec "
			    "only (a background command keeps a ring)");
			goto fail;
		}
		s->cap_total = get_long(body, "output_cap_total", 0, 0,
		    cap_max > LONG_MAX / 2 ? LONG_MAX : 2 * cap_max, e, &bad);
		if (bad)
			goto fail;
		s->has_cap_total = 1;
	}
	if ((v = json_object_get(body, "stdin")) != NULL) {
		if (!json_is_string(v)) {
			xd_perr_set(e, 400, "bad_request", "stdin: a string");
			goto fail;
		}
		s->stdin_len = json_string_length(v);
		if ((s->stdin_data = malloc(s->stdin_len + 1)) == NULL)
			goto oom;
		memcpy(s->stdin_data, json_string_value(v), s->stdin_len + 1);
	}
	if ((v = json_object_get(body, "encoding")) != NULL) {
		if ((str = cstr(v)) == NULL || (strcmp(str, "utf-8") != 0 &&
		    strcmp(str, "base64") != 0)) {
			xd_perr_set(e, 400, "bad_request", "encoding: \"utf-8\" or "
			    "\"base64\"");
			goto fail;
		}
		s->base64 = strcmp(str, "base64") == 0;
	}
	/* the workspace is walked before and after the command only for a
	 * caller that wants to know what changed (issue 26 point 4) */
	if ((v = json_object_get(body, "changed")) != NULL) {
		if (!json_is_boolean(v)) {
			xd_perr_set(e, 400, "bad_request", "changed: a boolean");
			goto fail;
		}
		s->no_changes = json_is_false(v);
	}
	return 0;
oom:
	xd_perr_set(e, 500, "internal", "out of memory");
fail:
	xd_cmd_spec_free(s);
	return -1;
}

/* ---- install ---- */

#define PKGS_MAX	64
#define PKG_LEN_MAX	214     /* npm's longest name; PEP 508 has none */

static int
pep508_name_ch(int c)
{
	return isalnum(c) || c == '.' || c == '_' || c == '-';
}

/*
 * A PEP 508 requirement without URL or marker: NAME[EXTRAS][SPEC], NAME
 * of letters, digits, ".", "_", "-" starting and ending with a letter or
 * digit, EXTRAS "[a,b]" of such names, SPEC one or more comma-separated
 * clauses OP VERSION (OP of ==, !=, <=, >=, <, >, ~=, ===; VERSION of
 * letters, digits, ".", "*", "+", "!", "_", "-").  No space, no "@", no
 * ";", no "/" or ":": nothing pip could take for an option, a path or a
 * URL.
 */
static int
pip_req_ok(const char *s)
{
	size_t i = 0, j;

	if (!isalnum((unsigned char)s[0]))
		return 0;
	while (pep508_name_ch((unsigned char)s[i]))
		i++;
	if (!isalnum((unsigned char)s[i - 1]))
		return 0;
	if (s[i] == '[') {
		for (i++;;) {
			j = i;
			while (pep508_name_ch((unsigned char)s[i]))
				i++;
			if (i == j || !isalnum((unsigned char)s[j]) ||
			    !isalnum((unsigned char)s[i - 1]))
				return 0;
			if (s[i] == ']')
				break;
			if (s[i++] != ',')
				return 0;
		}
		i++;
	}
	while (s[i] != '\0') {
		j = i;
		while (s[i] == '=' || s[i] == '!' || s[i] == '<' ||
		    s[i] == '>' || s[i] == '~')
			i++;
		if (!((i - j == 1 && (s[j] == '<' || s[j] == '>')) ||
		    (i - j == 2 && s[j + 1] == '=' && strchr("=!<>~", s[j])) ||
		    (i - j == 3 && strncmp(s + j, "===", 3) == 0)))
			return 0;
		j = i;
		while (s[i] != '\0' && (isalnum((unsigned char)s[i]) ||
		    strchr(".*+!_-", s[i]) != NULL))
			i++;
		if (i == j)
			return 0;
		if (s[i] == ',' && s[i + 1] != '\0')
			i++;
		else if (s[i] != '\0')
			return 0;
	}
	return 1;
}

static int
npm_name_ch(int c)
{
	return islower(c) || isdigit(c) || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

/*
 * An npm package: [@SCOPE/]NAME[@RANGE], SCOPE and NAME of lower-case
 * letters, digits, "-", ".", "_", "~", not starting with "." or "_";
 * RANGE a semver range or a dist-tag: letters, digits and ". ^ ~ < > =
 * | * + -" and spaces, never "/" or ":" (a git URL, a tarball, a path, an
 * alias "npm:").
 */
static int
npm_spec_ok(const char *s)
{
	size_t i = 0, j;

	if (s[0] == '@') {
		for (j = ++i; npm_name_ch((unsigned char)s[i]); i++)
			;
		if (i == j || s[j] == '.' || s[j] == '_' || s[i++] != '/')
			return 0;
	}
	for (j = i; npm_name_ch((unsigned char)s[i]); i++)
		;
	if (i == j || s[j] == '.' || s[j] == '_' || s[j] == '-')
		return 0;
	if (s[i] == '\0')
		return 1;
	if (s[i++] != '@' || s[i] == '\0' || s[i] == '-')
		return 0;
	for (; s[i] != '\0'; i++)
		if (!isalnum((unsigned char)s[i]) && strchr(".^~<>=|*+- ",
		    s[i]) == NULL)
			return 0;
	return 1;
}

int
xd_install_parse(json_t *body, const struct xd_lims *lim, long timeout_max,
    long cap_max, struct xd_cmd_spec *s, char *manager, size_t mlen,
    struct xd_perr *e)
{
	static const char *const keys[] = { "manager", "packages",
	    "timeout_s", NULL };
	/* pip: into ~/.local (the system is read-only), never asking;
	 * npm: into the workspace's node_modules.  The proxy comes from
	 * the environment every command gets (exec_cmd.c). */
	static const char *const pip[] = { "python3", "-m", "pip", "install",
	    "--user", "--no-input", "--disable-pip-version-check",
	    "--progress-bar", "off", NULL };
	static const char *const npm[] = { "npm", "install", "--no-audit",
	    "--no-fund", "--no-update-notifier", NULL };
	const char *const *pre;
	const char *m, *p;
	json_t *pk;
	size_t n, i, npre;
	int bad = 0, is_pip;

	memset(s, 0, sizeof(*s));
	if (want_object(body, e) != 0 || keys_only(body, keys, "", e) != 0)
		return -1;
	m = cstr(json_object_get(body, "manager"));
	if (m == NULL || (strcmp(m, "pip") != 0 && strcmp(m, "npm") != 0))
		return xd_perr_set(e, 400, "bad_request", "manager: \"pip\" or "
		    "\"npm\"");
	is_pip = m[0] == 'p';
	pk = json_object_get(body, "packages");
	if (!json_is_array(pk) || (n = json_array_size(pk)) == 0 ||
	    n > PKGS_MAX)
		return xd_perr_set(e, 400, "bad_request", "packages: an array of 1 to "
		    "%d names", PKGS_MAX);
	for (i = 0; i < n; i++) {
		p = cstr(json_array_get(pk, i));
		if (p == NULL || strlen(p) > PKG_LEN_MAX ||
		    !(is_pip ? pip_req_ok(p) : npm_spec_ok(p))) {
			char shown[4 * 64 + 1];

			sbx_text_safe(p != NULL ? p : "", shown, sizeof(shown));
			xd_perr_set(e, 400, "bad_request", "packages[%zu] \"%s\": not "
			    "%s", i, shown, is_pip ? "a PEP 508 name with "
			    "optional extras and version clauses (no URL, "
			    "option or marker)" : "an npm name with an "
			    "optional @version or range (no URL, path, option "
			    "or alias)");
			e->extra = json_pack("{s:s}", "field", "packages");
			return -1;
		}
	}
	pre = is_pip ? pip : npm;
	for (npre = 0; pre[npre] != NULL; npre++)
		;
	if ((s->argv = calloc(npre + n + 1, sizeof(char *))) == NULL)
		goto oom;
	for (i = 0; i < npre; i++)
		if ((s->argv[i] = strdup(pre[i])) == NULL)
			goto oom;
	for (i = 0; i < n; i++)
		if ((s->argv[npre + i] = strdup(json_string_value(
		    json_array_get(pk, i)))) == NULL)
			goto oom;
	snprintf(s->cwd, sizeof(s->cwd), SBX_WORKDIR);
	s->timeout_s = get_long(body, "timeout_s", lim->timeout_s, 1,
	    timeout_max, e, &bad);
	if (bad)
		goto fail;
	s->output_cap = lim->output_cap < cap_max || cap_max == 0 ?
	    lim->output_cap : cap_max;
	snprintf(manager, mlen, "%s", m);
	return 0;
oom:
	xd_perr_set(e, 500, "internal", "out of memory");
fail:
	xd_cmd_spec_free(s);
	return -1;
}

int
xd_json_name_id(const char *name, char *id)
{
	size_t n = name != NULL ? strlen(name) : 0;

	if (n <= 5 || n - 5 > SBX_ID_MAX || strcmp(name + n - 5, ".json") != 0)
		return 0;
	memcpy(id, name, n - 5);
	id[n - 5] = '\0';
	return sbx_id_ok(id, SBX_ID_MAX);
}

const struct xd_errno_msg *
xd_errno_find(const struct xd_errno_msg *tab, int err)
{
	for (; tab->code != NULL; tab++)
		if (tab->err == err)
			return tab;
	return NULL;
}
