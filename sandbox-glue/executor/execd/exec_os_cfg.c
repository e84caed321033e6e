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
 * SHA-256 is kept.  exec_cfg.c calls xd_os_cfg_parse and turns its
 * (key, why) into "file:line:column: opensandbox.key: why".
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/httpauth.h"
#include "sandbox-glue/executor/execd/exec_os-int.h"

#define KEY_MIN		16
#define KEY_MAX		256
#define OS_TIMEOUT_DEFAULT	86400		/* max_timeout_s */
#define OS_WORKDIR_DEFAULT	"/tmp/workspace"	/* ChatHub's */

/* SHA-256 here, not exec_cfg.c's xd_sha256: exec_cfg.c calls this
 * file, and no two files call each other (tests/layering.sh). */

static int
ofail(char *key, size_t klen, const char *k, char *err, size_t errlen,
    const char *why)
{
	snprintf(key, klen, "%s", k);
	snprintf(err, errlen, "%s", why);
	return -1;
}

static int
str_of(json_t *o, const char *k, char *buf, size_t len, int abs, char *why,
    size_t wlen)
{
	json_t *v = json_object_get(o, k);
	const char *s;

	if (v == NULL)
		return 0;
	if (!json_is_string(v) || (s = json_string_value(v)) == NULL ||
	    strlen(s) != json_string_length(v)) {
		snprintf(why, wlen, "a string");
		return -1;
	}
	if (strlen(s) >= len) {
		snprintf(why, wlen, "at most %zu bytes", len - 1);
		return -1;
	}
	if (abs && s[0] != '/') {
		snprintf(why, wlen, "an absolute path");
		return -1;
	}
	snprintf(buf, len, "%s", s);
	return 0;
}

/* A key file: as a token file (httpauth_token_file), 16 to 256. */
static int
key_load(struct xd_os_key *k, char *why, size_t wlen)
{
	char w[160];
	int others;

	if (httpauth_token_file(k->file, KEY_MIN, KEY_MAX, k->digest, &others,
	    w, sizeof(w)) != 0) {
		snprintf(why, wlen, "%s: %s", k->file, w);
		return -1;
	}
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

/* api_keys[i], t: one key, read and checked against those before it;
 * 0, or -1 with key and err set (ofail). */
static int
os_key_parse(struct xd_os_cfg *c, json_t *t, size_t i, char *key,
    size_t klen, char *err, size_t errlen)
{
	static const char *const kkeys[] = { "name", "file", "tenant", "user",
	    NULL };
	struct xd_os_key *ky = &c->keys[c->nkeys];
	char why[XD_ERR_MAX], kp[64];
	const char *k;
	size_t j;

	snprintf(kp, sizeof(kp), "api_keys[%zu]", i);
	if (!json_is_object(t))
		return ofail(key, klen, kp, err, errlen,
		    "an object {name, file, tenant, user?}");
	if ((k = jsonstrict_unknown_key(t, kkeys)) != NULL) {
		snprintf(why, sizeof(why), "unknown key %s", k);
		return ofail(key, klen, kp, err, errlen, why);
	}
	if (str_of(t, "name", ky->name, sizeof(ky->name), 0,
	    why, sizeof(why)) != 0 || str_of(t, "file",
	    ky->file, sizeof(ky->file), 1, why, sizeof(why)) !=
	    0 || str_of(t, "tenant", ky->tenant,
	    sizeof(ky->tenant), 0, why, sizeof(why)) != 0 ||
	    str_of(t, "user", ky->user, sizeof(ky->user), 0,
	    why, sizeof(why)) != 0)
		return ofail(key, klen, kp, err, errlen, why);
	if (!ky->name[0] || !ky->file[0] || !ky->tenant[0])
		return ofail(key, klen, kp, err, errlen,
		    "name, file and tenant are required (a "
		    "key names the tenant whose sandboxes it "
		    "sees)");
	if (!sbx_id_ok(ky->tenant, SBX_ID_MAX))
		return ofail(key, klen, kp, err, errlen,
		    "tenant: 1 to 64 of A-Z a-z 0-9 . _ -");
	for (j = 0; j < c->nkeys; j++)
		if (strcmp(c->keys[j].name, ky->name) == 0)
			return ofail(key, klen, kp, err,
			    errlen, "name: used twice");
	if (key_load(ky, why, sizeof(why)) != 0)
		return ofail(key, klen, kp, err, errlen, why);
	for (j = 0; j < c->nkeys; j++)
		if (memcmp(c->keys[j].digest, ky->digest, 32) ==
		    0)
			return ofail(key, klen, kp, err,
			    errlen, "the same key as another "
			    "entry: a key names one tenant");
	return 0;
}

/* "images": image URI -> profile; 0, or -1 with key and err set. */
static int
os_images_parse(struct xd_os_cfg *c, json_t *a, char *key, size_t klen,
    char *err, size_t errlen)
{
	char why[XD_ERR_MAX];
	const char *k;
	json_t *v;

	if (!json_is_object(a) || json_object_size(a) >
	    XD_OS_IMAGES_MAX)
		return ofail(key, klen, "images", err, errlen,
		    "an object of at most 32 image URI -> profile");
	json_object_foreach(a, k, v) {
		const char *p = json_string_value(v);

		if (p == NULL || !sbx_id_ok(p, SBX_ID_MAX) ||
		    strlen(k) >= sizeof(c->images[0].uri) || !k[0]) {
			snprintf(why, sizeof(why), "%.200s: a profile "
			    "name (base, media, minimal, host or an "
			    "admin's) for an image URI of at most 255 "
			    "bytes", k);
			return ofail(key, klen, "images", err, errlen,
			    why);
		}
		snprintf(c->images[c->nimages].uri,
		    sizeof(c->images[0].uri), "%s", k);
		snprintf(c->images[c->nimages].profile,
		    sizeof(c->images[0].profile), "%s", p);
		c->nimages++;
	}
	return 0;
}

int
xd_os_cfg_parse(struct xd_os_cfg *c, json_t *o, char *key, size_t klen,
    char *err, size_t errlen)
{
	static const char *const keys[] = { "listen", "plain_http",
	    "tls_cert", "tls_key", "endpoint_host", "api_keys", "images",
	    "max_timeout_s", "workdir", NULL };
	char why[XD_ERR_MAX];
	const char *k, *colon;
	json_t *v, *a, *t;
	size_t i;

	memset(c, 0, sizeof(*c));
	c->max_timeout_s = OS_TIMEOUT_DEFAULT;
	snprintf(c->workdir, sizeof(c->workdir), "%s", OS_WORKDIR_DEFAULT);
	key[0] = '\0';
	if (!json_is_object(o))
		return ofail(key, klen, "", err, errlen, "an object");
	if ((k = jsonstrict_unknown_key(o, keys)) != NULL)
		return ofail(key, klen, k, err, errlen, "unknown key");
	if (str_of(o, "listen", c->listen, sizeof(c->listen), 0, why,
	    sizeof(why)) != 0)
		return ofail(key, klen, "listen", err, errlen, why);
	if (str_of(o, "tls_cert", c->tls_cert, sizeof(c->tls_cert), 1, why,
	    sizeof(why)) != 0)
		return ofail(key, klen, "tls_cert", err, errlen, why);
	if (str_of(o, "tls_key", c->tls_key, sizeof(c->tls_key), 1, why,
	    sizeof(why)) != 0)
		return ofail(key, klen, "tls_key", err, errlen, why);
	if (str_of(o, "endpoint_host", c->endpoint_host,
	    sizeof(c->endpoint_host), 0, why, sizeof(why)) != 0)
		return ofail(key, klen, "endpoint_host", err, errlen, why);
	if (strpbrk(c->endpoint_host, "/ \t?#@") != NULL ||
	    strstr(c->endpoint_host, "://") != NULL)
		return ofail(key, klen, "endpoint_host", err, errlen,
		    "HOST[:PORT], no scheme and no path");
	if ((v = json_object_get(o, "plain_http")) != NULL) {
		if (!json_is_boolean(v))
			return ofail(key, klen, "plain_http", err, errlen,
			    "true or false");
		c->plain_http = json_is_true(v);
	}
	if (json_object_get(o, "workdir") != NULL) {
		if (str_of(o, "workdir", c->workdir, sizeof(c->workdir), 0,
		    why, sizeof(why)) != 0)
			return ofail(key, klen, "workdir", err, errlen, why);
		if (c->workdir[0] && !workdir_ok(c->workdir))
			return ofail(key, klen, "workdir", err, errlen, "an "
			    "absolute path of letters, digits, '.', '_', '-' "
			    "and '/', with a parent, no '.' or '..' component, "
			    "no trailing '/', not /workspace or under it");
	}
	if ((v = json_object_get(o, "max_timeout_s")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 60 ||
		    json_integer_value(v) > 30 * 86400)
			return ofail(key, klen, "max_timeout_s", err, errlen,
			    "an integer from 60 to 2592000 (seconds)");
		c->max_timeout_s = (long)json_integer_value(v);
	}
	if (c->listen[0]) {
		long port;
		char *end;

		if ((colon = strrchr(c->listen, ':')) == NULL || (port =
		    strtol(colon + 1, &end, 10)) <= 0 || port > 65535 ||
		    *end != '\0' || colon == c->listen)
			return ofail(key, klen, "listen", err, errlen,
			    "HOST:PORT (\"127.0.0.1:8090\", \"[::1]:8090\")");
		if (c->tls_cert[0] != '\0' || c->tls_key[0] != '\0') {
			if (!c->tls_cert[0] || !c->tls_key[0])
				return ofail(key, klen, c->tls_cert[0] ?
				    "tls_key" : "tls_cert", err, errlen,
				    "TLS needs both tls_cert and tls_key");
		} else if (!loopback(c->listen) && !c->plain_http)
			return ofail(key, klen, "listen", err, errlen,
			    "not a loopback address: API keys and access "
			    "tokens would cross the network in the clear; "
			    "give tls_cert and tls_key, or say \"plain_http\": "
			    "true (behind a TLS proxy of your own)");
	}
	if ((a = json_object_get(o, "api_keys")) != NULL) {
		if (!json_is_array(a) || json_array_size(a) > XD_OS_KEYS_MAX)
			return ofail(key, klen, "api_keys", err, errlen,
			    "an array of at most 16 keys");
		json_array_foreach(a, i, t) {
			if (os_key_parse(c, t, i, key, klen, err, errlen) != 0)
				return -1;
			c->nkeys++;
		}
	}
	if ((a = json_object_get(o, "images")) != NULL &&
	    os_images_parse(c, a, key, klen, err, errlen) != 0)
		return -1;
	if (c->listen[0] && c->nkeys == 0)
		return ofail(key, klen, "api_keys", err, errlen, "listen is "
		    "set but no key is: every call would be refused (401)");
	if (c->listen[0] && c->nimages == 0)
		return ofail(key, klen, "images", err, errlen, "listen is set "
		    "but no image is mapped to a profile: every create would "
		    "be refused (give \"*\": \"base\" for any image)");
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
