/*
 * exec_os_cfg.c: the "opensandbox" block of sluice-execd's configuration
 * (DESIGN.md, "The OpenSandbox-compatible API"):
 *
 *   "opensandbox": {
 *     "listen": "127.0.0.1:8090",
 *     "plain_http": false,             plain HTTP off loopback: say so
 *     "tls_cert": "...", "tls_key": "...",   else TLS
 *     "endpoint_host": "sbx.example:8090",   what endpoints answer
 *     "api_keys": [ {"name", "file", "tenant", "user"?} ],
 *     "images": { "chathub-sandbox:1": "base", "*": "base" },
 *     "max_timeout_s": 3600,
 *     "workdir": "/tmp/workspace"      stands for /workspace ("" none)
 *   }
 *
 * A key file holds one key (16 to 256 printable bytes); only its
 * SHA-256 is kept.  Read by sluiced's row engine (proxy/lib/
 * config_engine.h) as the rest of the file is: exec_cfg.c's row
 * "opensandbox" calls xd_os_cfg_read with its context, so that errors
 * say "file:line:column: opensandbox.api_keys[0].file: what".
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "proxy/lib/config_engine.h"
#include "proxy/lib/httpauth.h"
#include "sandbox-glue/executor/execd/exec_os-int.h"

#define KEY_MIN		16
#define KEY_MAX		256
#define OS_TIMEOUT_DEFAULT	86400		/* max_timeout_s */
#define OS_WORKDIR_DEFAULT	"/tmp/workspace"	/* ChatHub's */

/* A key file: as a token file (httpauth_token_file), 16 to 256; x at
 * the entry's file. */
static int
key_load(struct cfg_ctx *x, struct xd_os_key *k)
{
	char w[160];
	int others;

	if (httpauth_token_file(k->file, KEY_MIN, KEY_MAX, k->digest, &others,
	    w, sizeof(w)) != 0)
		return cfg_fail(x, "%s: %s", k->file, w);
	return 0;
}

/* Whether HOST:PORT's host is loopback (127.0.0.0/8, ::1, localhost). */
static int
loopback(const char *listen)
{
	return strncmp(listen, "127.", 4) == 0 || strncmp(listen, "[::1]:",
	    6) == 0 || strncmp(listen, "localhost:", 10) == 0;
}

/* A path that can stand for /workspace: absolute, canonical, with a
 * parent directory for its link, and not the workspace itself. */
static int
workdir_ok(const char *w)
{
	const char *p;

	if (w[0] != '/' || strspn(w, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") != strlen(w) ||
	    strstr(w, "//") != NULL || w[strlen(w) - 1] == '/' ||
	    strrchr(w, '/') == w || strcmp(w, "/workspace") == 0 ||
	    strncmp(w, "/workspace/", 11) == 0)
		return 0;
	for (p = w; p != NULL; p = strchr(p + 1, '/'))
		if (strncmp(p, "/./", 3) == 0 || strncmp(p, "/../", 4) == 0 ||
		    strcmp(p, "/.") == 0 || strcmp(p, "/..") == 0)
			return 0;
	return 1;
}

/* ---- the rows (proxy/lib/config_engine.h), at struct xd_os_cfg ---- */

static int
k_listen(struct cfg_ctx *x, json_t *v, void *base)
{
	struct xd_os_cfg *c = base;
	const char *colon;
	char *end;
	long port;

	if (cfg_get_buf(x, v, sizeof(c->listen), 0, c->listen) != 0)
		return -1;
	if (c->listen[0] && ((colon = strrchr(c->listen, ':')) == NULL ||
	    (port = strtol(colon + 1, &end, 10)) <= 0 || port > 65535 ||
	    *end != '\0' || colon == c->listen))
		return cfg_fail(x, "expected HOST:PORT (\"127.0.0.1:8090\", "
		    "\"[::1]:8090\")");
	return 0;
}

static int
k_endpoint_host(struct cfg_ctx *x, json_t *v, void *base)
{
	struct xd_os_cfg *c = base;

	if (cfg_get_buf(x, v, sizeof(c->endpoint_host), 0,
	    c->endpoint_host) != 0)
		return -1;
	if (strpbrk(c->endpoint_host, "/ \t?#@") != NULL ||
	    strstr(c->endpoint_host, "://") != NULL)
		return cfg_fail(x, "expected HOST[:PORT], no scheme and no "
		    "path");
	return 0;
}

static int
k_workdir(struct cfg_ctx *x, json_t *v, void *base)
{
	struct xd_os_cfg *c = base;

	if (cfg_get_buf(x, v, sizeof(c->workdir), 0, c->workdir) != 0)
		return -1;
	if (c->workdir[0] && !workdir_ok(c->workdir))
		return cfg_fail(x, "expected an absolute path of letters, "
		    "digits, '.', '_', '-' and '/', with a parent, no '.' or "
		    "'..' component, no trailing '/', not /workspace or under "
		    "it");
	return 0;
}

static int
k_tenant(struct cfg_ctx *x, json_t *v, void *base)
{
	struct xd_os_key *k = base;

	if (cfg_get_buf(x, v, sizeof(k->tenant), 0, k->tenant) != 0)
		return -1;
	if (!sbx_id_ok(k->tenant, SBX_ID_MAX))
		return cfg_fail(x, "expected 1 to 64 of A-Z a-z 0-9 . _ -");
	return 0;
}

#define KBUF(n, f, fl) { n, K_BUF, .off = offsetof(struct xd_os_key, f), \
	.size = sizeof(((struct xd_os_key *)0)->f), .flags = (fl) }

static const struct cfg_key key_keys[] = {
	KBUF("name", name, 0),
	KBUF("file", file, KF_ABS),
	{ "tenant", K_FN, .fn = k_tenant },
	KBUF("user", user, 0),
	{ .name = NULL }
};

/* api_keys[i]: one key, read and checked against those before it. */
static int
k_api_keys(struct cfg_ctx *x, json_t *a, void *base)
{
	struct xd_os_cfg *c = base;
	json_t *t;
	size_t i, j;

	if (!json_is_array(a) || json_array_size(a) > XD_OS_KEYS_MAX)
		return cfg_fail(x, "expected an array of at most %d keys",
		    XD_OS_KEYS_MAX);
	c->nkeys = 0;
	json_array_foreach(a, i, t) {
		struct xd_os_key *ky = &c->keys[c->nkeys];

		memset(ky, 0, sizeof(*ky));
		cfg_ctx_idx(x, i);
		if (cfg_walk_object(x, t, key_keys, ky) != 0)
			return -1;
		if (!ky->name[0] || !ky->file[0] || !ky->tenant[0])
			return cfg_fail(x, "name, file and tenant are required "
			    "(a key names the tenant whose sandboxes it sees)");
		for (j = 0; j < c->nkeys; j++)
			if (strcmp(c->keys[j].name, ky->name) == 0)
				return cfg_fail(x, "name %s used twice",
				    ky->name);
		cfg_ctx_key(x, "file");
		if (key_load(x, ky) != 0)
			return -1;
		cfg_ctx_pop(x);
		for (j = 0; j < c->nkeys; j++)
			if (memcmp(c->keys[j].digest, ky->digest, 32) == 0)
				return cfg_fail(x, "the same key as [%zu]: a "
				    "key names one tenant", j);
		cfg_ctx_pop(x);
		c->nkeys++;
	}
	return 0;
}

/* "images": image URI -> profile. */
static int
k_images(struct cfg_ctx *x, json_t *a, void *base)
{
	struct xd_os_cfg *c = base;
	const char *k, *p;
	char b[80];
	json_t *v;

	if (!json_is_object(a) || json_object_size(a) > XD_OS_IMAGES_MAX)
		return cfg_fail(x, "expected an object of at most %d image URI "
		    "-> profile", XD_OS_IMAGES_MAX);
	c->nimages = 0;
	json_object_foreach(a, k, v) {
		cfg_ctx_key(x, k);
		if (!k[0] || strlen(k) >= sizeof(c->images[0].uri))
			return cfg_fail_key(x, "expected an image URI of 1 to "
			    "%zu bytes", sizeof(c->images[0].uri) - 1);
		if (cfg_get_str(x, v, &p) != 0)
			return -1;
		if (!sbx_id_ok(p, SBX_ID_MAX))
			return cfg_fail(x, "bad profile name %s (expected "
			    "base, media, minimal, host or an admin's)",
			    cfg_shown(p, b, sizeof(b)));
		snprintf(c->images[c->nimages].uri,
		    sizeof(c->images[0].uri), "%s", k);
		snprintf(c->images[c->nimages].profile,
		    sizeof(c->images[0].profile), "%s", p);
		c->nimages++;
		cfg_ctx_pop(x);
	}
	return 0;
}

#define OBUF(n, f, fl) { n, K_BUF, .off = offsetof(struct xd_os_cfg, f), \
	.size = sizeof(((struct xd_os_cfg *)0)->f), .flags = (fl) }

static const struct cfg_key os_keys[] = {
	{ "listen", K_FN, .fn = k_listen },
	{ "plain_http", K_BOOL, .off = offsetof(struct xd_os_cfg,
	    plain_http) },
	OBUF("tls_cert", tls_cert, KF_ABS),
	OBUF("tls_key", tls_key, KF_ABS),
	{ "endpoint_host", K_FN, .fn = k_endpoint_host },
	{ "api_keys", K_FN, .fn = k_api_keys },
	{ "images", K_FN, .fn = k_images },
	{ "max_timeout_s", K_LONG, .off = offsetof(struct xd_os_cfg,
	    max_timeout_s), .lo = 60, .hi = 30 * 86400 },
	{ "workdir", K_FN, .fn = k_workdir },
	{ .name = NULL }
};

/* Fails at opensandbox.k. */
static int
at_fail(struct cfg_ctx *x, const char *k, const char *msg)
{
	cfg_ctx_key(x, k);
	return cfg_fail(x, "%s", msg);
}

int
xd_os_cfg_read(struct cfg_ctx *x, json_t *o, struct xd_os_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->max_timeout_s = OS_TIMEOUT_DEFAULT;
	snprintf(c->workdir, sizeof(c->workdir), "%s", OS_WORKDIR_DEFAULT);
	if (cfg_walk_object(x, o, os_keys, c) != 0)
		return -1;
	if (!c->listen[0])
		return 0;
	if (c->tls_cert[0] != '\0' || c->tls_key[0] != '\0') {
		if (!c->tls_cert[0] || !c->tls_key[0])
			return at_fail(x, c->tls_cert[0] ? "tls_key" :
			    "tls_cert", "TLS needs both tls_cert and tls_key");
	} else if (!loopback(c->listen) && !c->plain_http)
		return at_fail(x, "listen", "not a loopback address: API keys "
		    "and access tokens would cross the network in the clear; "
		    "give tls_cert and tls_key, or say \"plain_http\": true "
		    "(behind a TLS proxy of your own)");
	if (c->nkeys == 0)
		return at_fail(x, "api_keys", "listen is set but no key is: "
		    "every call would be refused (401)");
	if (c->nimages == 0)
		return at_fail(x, "images", "listen is set but no image is "
		    "mapped to a profile: every create would be refused (give "
		    "\"*\": \"base\" for any image)");
	return 0;
}

json_t *
xd_os_cfg_json(const struct xd_os_cfg *c)
{
	json_t *o, *a, *im;
	size_t i;

	if (!c->listen[0])
		/* off: the defaults a block with a listen address would
		 * start from (tls_cert and tls_key have none) */
		return json_pack("{s:s,s:b,s:s,s:I,s:s,s:[],s:{}}", "listen", "",
		    "plain_http", 0, "endpoint_host", "", "max_timeout_s",
		    (json_int_t)OS_TIMEOUT_DEFAULT, "workdir", OS_WORKDIR_DEFAULT,
		    "api_keys",
		    "images");
	a = json_array();
	for (i = 0; i < c->nkeys; i++)
		json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:s?}",
		    "name", c->keys[i].name, "file", c->keys[i].file,
		    "tenant", c->keys[i].tenant, "user", c->keys[i].user[0] ?
		    c->keys[i].user : NULL));
	im = json_object();
	for (i = 0; i < c->nimages; i++)
		json_object_set_new(im, c->images[i].uri, json_string(
		    c->images[i].profile));
	o = json_pack("{s:s,s:b,s:s,s:s,s:s,s:I,s:s,s:o,s:o}", "listen",
	    c->listen, "plain_http", c->plain_http, "tls_cert", c->tls_cert,
	    "tls_key", c->tls_key, "endpoint_host", c->endpoint_host,
	    "max_timeout_s", (json_int_t)c->max_timeout_s, "workdir",
	    c->workdir, "api_keys", a, "images", im);
	return o;
}

const struct xd_os_key *
xd_os_key_find(const struct xd_os_cfg *c, const char *tok)
{
	unsigned char d[HTTPAUTH_DIGEST_LEN];
	const struct xd_os_key *hit = NULL;
	size_t i;

	if (tok == NULL || !tok[0] || strlen(tok) > KEY_MAX)
		return NULL;
	if (httpauth_digest(tok, d) != 0)
		return NULL;
	for (i = 0; i < c->nkeys; i++)
		if (httpauth_same(d, c->keys[i].digest))
			hit = &c->keys[i];
	return hit;
}

const char *
xd_os_image_profile(const struct xd_os_cfg *c, const char *uri)
{
	size_t i;

	for (i = 0; i < c->nimages; i++)
		if (strcmp(c->images[i].uri, uri) == 0)
			return c->images[i].profile;
	for (i = 0; i < c->nimages; i++)
		if (strcmp(c->images[i].uri, "*") == 0)
			return c->images[i].profile;
	return NULL;
}

int
xd_os_cpu_pct(const char *s, long *pct)
{
	char *end;
	double v;

	if (s == NULL || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || v <= 0 || v > 1e6)
		return -1;
	if (strcmp(end, "m") == 0)
		v /= 1000.0;
	else if (*end != '\0')
		return -1;
	*pct = (long)(v * 100.0 + 0.5);
	if (*pct < 1)
		*pct = 1;
	return 0;
}

int
xd_os_mem_mb(const char *s, long *mb)
{
	static const struct {
		const char *u;
		double mult;    /* bytes */
	} units[] = {
		{ "", 1 }, { "k", 1e3 }, { "M", 1e6 }, { "G", 1e9 },
		{ "T", 1e12 }, { "Ki", 1024.0 }, { "Mi", 1048576.0 },
		{ "Gi", 1073741824.0 }, { "Ti", 1099511627776.0 },
	};
	char *end;
	double v;
	size_t i;

	if (s == NULL || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || v <= 0 || v > 1e15)
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(end, units[i].u) == 0) {
			double b = v * units[i].mult;

			*mb = (long)((b + 1048575.0) / 1048576.0);
			if (*mb < 1)
				*mb = 1;
			return 0;
		}
	return -1;
}
