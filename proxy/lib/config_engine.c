/*
 * config_engine.c: the row engine of sluiced.json.  Walks a JSON object
 * against a table of rows (struct cfg_key), reads each value by its
 * kind or its handler, fills a struct with the rows' defaults, and words
 * the errors: "FILE:LINE:COL: PATH: message", printable and bounded.  It
 * knows no key: the rows are config_keys.c's (sluiced.json) and
 * exec_cfg.c's (sluice-execd's file); config_engine.h is its contract.
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proxy/lib/config_engine.h"
#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/util.h"

/* ------------------------------------------------------------------ */
/* Error messages. */

static int
key_plain(const char *k, size_t n)
{
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)k[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
			return 0;
	}
	return 1;
}

/* Appends to buf (always terminated), truncating quietly. */
static void
bputs(char *buf, size_t len, size_t *at, const char *s, size_t n)
{
	while (n-- > 0 && *at + 1 < len)
		buf[(*at)++] = *s++;
	if (len > 0)
		buf[*at < len ? *at : len - 1] = '\0';
}

/* Printable ASCII only: the text may come from anywhere (fuzzing). */
void
cfg_bputs_shown(char *buf, size_t len, size_t *at, const char *s, size_t n,
    size_t max)
{
	size_t i;

	for (i = 0; i < n && i < max; i++) {
		char ch = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';

		bputs(buf, len, at, &ch, 1);
	}
	if (n > max)
		bputs(buf, len, at, "...", 3);
}

static void
path_format(const struct cfg_pel *path, size_t n, char *buf, size_t len)
{
	size_t i, at = 0;
	char num[32];

	bputs(buf, len, &at, "", 0);
	if (n == 0)
		bputs(buf, len, &at, "(root)", 6);
	for (i = 0; i < n; i++) {
		if (path[i].key == NULL) {
			snprintf(num, sizeof(num), "[%zu]", path[i].idx);
			bputs(buf, len, &at, num, strlen(num));
		} else if (key_plain(path[i].key, path[i].keylen)) {
			if (i > 0)
				bputs(buf, len, &at, ".", 1);
			bputs(buf, len, &at, path[i].key, path[i].keylen);
		} else {
			bputs(buf, len, &at, "[\"", 2);
			cfg_bputs_shown(buf, len, &at, path[i].key,
			    path[i].keylen, 64);
			bputs(buf, len, &at, "\"]", 2);
		}
	}
}

/* A string value for a message: quoted, printable, bounded. */
const char *
cfg_shown(const char *s, char *buf, size_t len)
{
	size_t at = 0;

	bputs(buf, len, &at, "\"", 1);
	cfg_bputs_shown(buf, len, &at, s, strlen(s), 64);
	bputs(buf, len, &at, "\"", 1);
	return buf;
}

void
cfg_err_write(struct cfg_ctx *x, const char *at, const struct cfg_pel *path,
    size_t n, const char *msg)
{
	char pbuf[256];
	int line, col;

	if (x->err == NULL || x->errlen == 0)
		return;
	path_format(path, n, pbuf, sizeof(pbuf));
	if (at != NULL) {
		cfg_pos_linecol(x->text, at, &line, &col);
		snprintf(x->err, x->errlen, "%s:%d:%d: %s: %s", x->name, line,
		    col, pbuf, msg);
	} else {
		snprintf(x->err, x->errlen, "%s: %s: %s", x->name, pbuf, msg);
	}
}

void
cfg_ctx_init(struct cfg_ctx *x, const char *text, size_t len,
    const char *name, char *err, size_t errlen)
{
	memset(x, 0, sizeof(*x));
	x->name = name != NULL ? name : "<buffer>";
	x->text = text != NULL ? text : "";
	x->len = text != NULL ? len : 0;
	x->err = err;
	x->errlen = errlen;
}

/* At the token jansson stopped on, and the path it sits at. */
static void
syntax_error(struct cfg_ctx *x, const json_error_t *je)
{
	struct cfg_pel path[CFG_POS_MAX];
	const char *at;
	size_t n, pos = je->position > 0 ? (size_t)je->position : 0;
	char msg[JSON_ERROR_TEXT_LENGTH + 1];

	/* jansson's text can quote input bytes; keep the message printable. */
	n = 0;
	cfg_bputs_shown(msg, sizeof(msg), &n, je->text, strnlen(je->text,
	    sizeof(je->text)), sizeof(msg));
	at = cfg_pos_until(x->text, x->len, pos, path, &n);
	cfg_err_write(x, at, path, n, msg);
}

json_t *
cfg_parse_text(struct cfg_ctx *x)
{
	json_error_t je;
	json_t *root = jsonstrict_load(x->text, x->len, &je);

	if (root == NULL)
		syntax_error(x, &je);
	return root;
}

static int cfg_vfail(struct cfg_ctx *x, int at_key, const char *fmt,
    va_list ap) __attribute__((format(printf, 3, 0)));

/* Reports at the current path; when the text lacks it (a default broke
 * a cross-check), at the deepest part of it the text has. */
static int
cfg_vfail(struct cfg_ctx *x, int at_key, const char *fmt, va_list ap)
{
	char msg[512];
	const char *at = NULL;
	size_t depth = x->depth < CFG_PATH_MAX ? x->depth : CFG_PATH_MAX;
	size_t n = depth;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (x->text != NULL) {
		at = cfg_pos_locate(x->text, x->len, x->path, n, at_key);
		while (at == NULL && n > 0) {
			n--;
			at = cfg_pos_locate(x->text, x->len, x->path, n, 0);
		}
	}
	cfg_err_write(x, at, x->path, depth, msg);
	return -1;
}

int
cfg_fail(struct cfg_ctx *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cfg_vfail(x, 0, fmt, ap);
	va_end(ap);
	return -1;
}

/* Points at the key rather than its value (unknown or bad keys). */
int
cfg_fail_key(struct cfg_ctx *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cfg_vfail(x, 1, fmt, ap);
	va_end(ap);
	return -1;
}

/* One step deeper: an object's key, or (key NULL) an array's index.
 * Past CFG_PATH_MAX only the depth is counted. */
static void
cfg_ctx_push(struct cfg_ctx *x, const char *key, size_t idx)
{
	if (x->depth < CFG_PATH_MAX) {
		x->path[x->depth].key = key;
		x->path[x->depth].keylen = key != NULL ? strlen(key) : 0;
		x->path[x->depth].idx = idx;
	}
	x->depth++;
}

void
cfg_ctx_key(struct cfg_ctx *x, const char *key)
{
	cfg_ctx_push(x, key, 0);
}

void
cfg_ctx_idx(struct cfg_ctx *x, size_t idx)
{
	cfg_ctx_push(x, NULL, idx);
}

void
cfg_ctx_pop(struct cfg_ctx *x)
{
	x->depth--;
}

/* ------------------------------------------------------------------ */
/* Value readers: each reports its own error at the current path. */

int
cfg_get_str(struct cfg_ctx *x, json_t *v, const char **out)
{
	*out = "";
	if (!json_is_string(v))
		return cfg_fail(x, "expected a string");
	*out = json_string_value(v);
	return 0;
}

int
cfg_get_int(struct cfg_ctx *x, json_t *v, long long lo, long long hi,
    long long *out)
{
	long long n;

	*out = 0;
	if (!json_is_integer(v))
		return cfg_fail(x, "expected an integer");
	n = (long long)json_integer_value(v);
	if (n < lo || n > hi)
		return cfg_fail(x, "%lld is out of range (%lld..%lld)", n, lo,
		    hi);
	*out = n;
	return 0;
}

static int
get_tier(struct cfg_ctx *x, json_t *v, enum pol_tier *out)
{
	const char *s;
	char b[80];

	if (cfg_get_str(x, v, &s) != 0)
		return -1;
	if (pol_tier_parse(s, out) != 0)
		return cfg_fail(x, "unknown tier %s (expected off, registries "
		    "or public)", cfg_shown(s, b, sizeof(b)));
	return 0;
}

int
cfg_set_str(struct cfg_ctx *x, const char *s, char **out)
{
	char *d = strdup(s);

	if (d == NULL)
		return cfg_fail(x, "out of memory");
	free(*out);
	*out = d;
	return 0;
}

void *
cfg_calloc(struct cfg_ctx *x, size_t n, size_t size)
{
	void *p = calloc(n > 0 ? n : 1, size);

	if (p == NULL)
		cfg_fail(x, "out of memory");
	return p;
}

/* An array of strings, each passing check; replaces *out. */
int
cfg_get_str_list(struct cfg_ctx *x, json_t *v, str_check check, char ***out,
    size_t *n)
{
	size_t i, count;
	char **list;

	if (!json_is_array(v))
		return cfg_fail(x, "expected an array of strings");
	count = json_array_size(v);
	if ((list = cfg_calloc(x, count, sizeof(*list))) == NULL)
		return -1;
	while (*n > 0)
		free((*out)[--*n]);
	free(*out);
	*out = list;
	for (i = 0; i < count; i++) {
		const char *s;

		cfg_ctx_idx(x, i);
		if (cfg_get_str(x, json_array_get(v, i), &s) != 0 ||
		    (check != NULL && check(x, s) != 0))
			return -1;
		if ((list[i] = strdup(s)) == NULL)
			return cfg_fail(x, "out of memory");
		*n = i + 1;
		cfg_ctx_pop(x);
	}
	return 0;
}

static int
get_port_list(struct cfg_ctx *x, json_t *v, uint16_t **out, size_t *n)
{
	size_t i, count;
	uint16_t *list;
	long long p;

	if (!json_is_array(v))
		return cfg_fail(x, "expected an array of ports");
	count = json_array_size(v);
	if ((list = cfg_calloc(x, count, sizeof(*list))) == NULL)
		return -1;
	free(*out);
	*out = list;
	*n = 0;
	for (i = 0; i < count; i++) {
		cfg_ctx_idx(x, i);
		if (cfg_get_int(x, json_array_get(v, i), 1, 65535, &p) != 0)
			return -1;
		list[(*n)++] = (uint16_t)p;
		cfg_ctx_pop(x);
	}
	return 0;
}

/* uids or gids: (uid_t)-1 means "no change" to chown and is refused. */
static int
get_id_list(struct cfg_ctx *x, json_t *v, struct cfg_idlist *out)
{
	size_t i, count;
	uint32_t *list;
	long long id;

	if (!json_is_array(v))
		return cfg_fail(x, "expected an array of numeric ids");
	count = json_array_size(v);
	if ((list = cfg_calloc(x, count, sizeof(*list))) == NULL)
		return -1;
	free(out->ids);
	out->ids = list;
	out->n = 0;
	for (i = 0; i < count; i++) {
		cfg_ctx_idx(x, i);
		if (cfg_get_int(x, json_array_get(v, i), 0, 0xfffffffeLL,
		    &id) != 0)
			return -1;
		list[out->n++] = (uint32_t)id;
		cfg_ctx_pop(x);
	}
	return 0;
}

int
cfg_get_mode(struct cfg_ctx *x, json_t *v, unsigned *out)
{
	unsigned mode = 0;
	const char *s;
	size_t i;

	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);

		if (n < 0 || n > 0777)
			return cfg_fail(x, "mode %lld is out of range (write "
			    "it as an octal string such as \"0660\")",
			    (long long)n);
		*out = (unsigned)n;
		return 0;
	}
	if (!json_is_string(v))
		return cfg_fail(x, "expected an octal mode string such as "
		    "\"0660\"");
	s = json_string_value(v);
	for (i = 0; s[i] != '\0'; i++) {
		if (i >= 4 || s[i] < '0' || s[i] > '7')
			break;
		mode = mode * 8 + (unsigned)(s[i] - '0');
	}
	if (i == 0 || s[i] != '\0' || mode > 0777)
		return cfg_fail(x, "expected an octal mode string such as "
		    "\"0660\"");
	*out = mode;
	return 0;
}

/* A string shorter than size into buf[size] ("" too); absolute with
 * abs. */
int
cfg_get_buf(struct cfg_ctx *x, json_t *v, size_t size, int abs, char *buf)
{
	const char *s;
	size_t n;

	if (cfg_get_str(x, v, &s) != 0)
		return -1;
	if ((n = strlen(s)) >= size)
		return cfg_fail(x, "%zu bytes is too long (at most %zu)", n,
		    size > 0 ? size - 1 : 0);
	if (abs && s[0] != '/')
		return cfg_fail(x, "expected an absolute path");
	memcpy(buf, s, n + 1);
	return 0;
}

/* A string or null (NULL); what says what the string is. */
int
cfg_get_opt_str(struct cfg_ctx *x, json_t *v, const char *what, char **out)
{
	const char *s;

	if (json_is_null(v)) {
		free(*out);
		*out = NULL;
		return 0;
	}
	if (!json_is_string(v))
		return cfg_fail(x, "expected %s or null", what);
	s = json_string_value(v);
	if (*s == '\0')
		return cfg_fail(x, "must not be empty");
	return cfg_set_str(x, s, out);
}

static int
dns_host_addrs(struct cfg_ctx *x, json_t *v, struct cfg_hostmap *h)
{
	size_t i;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return cfg_fail(x, "expected a non-empty array of addresses");
	h->addrs = cfg_calloc(x, json_array_size(v), sizeof(*h->addrs));
	if (h->addrs == NULL)
		return -1;
	for (i = 0; i < json_array_size(v); i++) {
		const char *s;
		char b[80];

		cfg_ctx_idx(x, i);
		if (cfg_get_str(x, json_array_get(v, i), &s) != 0)
			return -1;
		if (pol_addr_parse(s, strlen(s), &h->addrs[i]) != 0)
			return cfg_fail(x, "bad address %s (expected an IPv4 "
			    "or IPv6 address)", cfg_shown(s, b, sizeof(b)));
		h->naddrs = i + 1;
		cfg_ctx_pop(x);
	}
	return 0;
}

/* {"name": ["ip", ...]}: dns.hosts and webhook.hosts. */
static int
get_hostmap(struct cfg_ctx *x, json_t *v, struct cfg_hostmap **out,
    size_t *nout)
{
	const char *name;
	json_t *m;

	if (!json_is_object(v))
		return cfg_fail(x, "expected an object of host names");
	*out = cfg_calloc(x, json_object_size(v), sizeof(**out));
	if (*out == NULL)
		return -1;
	json_object_foreach(v, name, m) {
		struct cfg_hostmap *h = &(*out)[*nout];
		struct pol_target t;
		size_t i;

		cfg_ctx_key(x, name);
		if (pol_host_parse(name, strlen(name), 0, &t) != POL_R_NONE ||
		    t.kind != POL_HOST_NAME)
			return cfg_fail_key(x, "bad host name (expected a DNS "
			    "name such as pypi.org)");
		for (i = 0; i < *nout; i++)
			if (strcmp((*out)[i].name, t.host) == 0)
				return cfg_fail_key(x, "host %s is given twice",
				    t.host);
		if ((h->name = strdup(t.host)) == NULL)
			return cfg_fail(x, "out of memory");
		(*nout)++;
		if (dns_host_addrs(x, m, h) != 0)
			return -1;
		cfg_ctx_pop(x);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Rows. */

static int
key_unknown(struct cfg_ctx *x, const struct cfg_key *keys)
{
	char list[256];
	size_t at = 0;
	const struct cfg_key *k;

	bputs(list, sizeof(list), &at, "", 0);
	for (k = keys; k->name != NULL; k++) {
		/* a list cut short says so: the key may be further on */
		if (at + strlen(k->name) + 2 + 5 >= sizeof(list)) {
			bputs(list, sizeof(list), &at, ", ...", 5);
			break;
		}
		if (k != keys)
			bputs(list, sizeof(list), &at, ", ", 2);
		bputs(list, sizeof(list), &at, k->name, strlen(k->name));
	}
	return cfg_fail_key(x, "unknown key (expected one of: %s)", list);
}

static int
key_apply(struct cfg_ctx *x, const struct cfg_key *k, json_t *v, void *base)
{
	char *field = (char *)base + k->off;
	size_t *count = (size_t *)(void *)((char *)base + k->noff);
	long long n;

	if (k->fn != NULL)
		return k->fn(x, v, base);
	if (k->rd != NULL)
		return k->rd(x, k, v, field);
	switch (k->kind) {
	case K_INT:
		if (cfg_get_int(x, v, k->lo, k->hi, &n) != 0)
			return -1;
		*(int *)(void *)field = (int)n;
		return 0;
	case K_SIZE:
		if (cfg_get_int(x, v, k->lo, k->hi, &n) != 0)
			return -1;
		*(size_t *)(void *)field = (size_t)n;
		return 0;
	case K_BOOL:
		if (!json_is_boolean(v))
			return cfg_fail(x, "expected true or false");
		*(int *)(void *)field = json_is_true(v);
		return 0;
	case K_TIER:
		return get_tier(x, v, (enum pol_tier *)(void *)field);
	case K_MODE:
		return cfg_get_mode(x, v, (unsigned *)(void *)field);
	case K_UID:
		if (json_is_null(v)) {
			*(int64_t *)(void *)field = -1;
			return 0;
		}
		if (cfg_get_int(x, v, 0, 0xfffffffeLL, &n) != 0)
			return -1;
		*(int64_t *)(void *)field = n;
		return 0;
	case K_STR: {
		const char *s;

		if (cfg_get_str(x, v, &s) != 0)
			return -1;
		if (*s == '\0')
			return cfg_fail(x, "must not be empty");
		return cfg_set_str(x, s, (char **)(void *)field);
	}
	case K_PATH: {          /* a file or directory sluiced makes */
		const char *s;

		if (cfg_get_str(x, v, &s) != 0)
			return -1;
		if (s[0] != '/')
			return cfg_fail(x, "expected an absolute path");
		return cfg_set_str(x, s, (char **)(void *)field);
	}
	case K_FILE:
		return cfg_get_opt_str(x, v, "a file name",
		    (char **)(void *)field);
	case K_IDS:
		return get_id_list(x, v, (struct cfg_idlist *)(void *)field);
	case K_STRV:
		return cfg_get_str_list(x, v, k->check, (char ***)(void *)field,
		    count);
	case K_PORTS:
		return get_port_list(x, v, (uint16_t **)(void *)field, count);
	case K_HOSTS:
		return get_hostmap(x, v, (struct cfg_hostmap **)(void *)field,
		    count);
	case K_OBJ:
		return cfg_walk_object(x, v, k->sub, field);
	case K_LONG:
		if (cfg_get_int(x, v, k->lo, k->hi, &n) != 0)
			return -1;
		*(long *)(void *)field = (long)n;
		return 0;
	case K_U64:
		if (cfg_get_int(x, v, k->lo, k->hi, &n) != 0)
			return -1;
		*(uint64_t *)(void *)field = (uint64_t)n * (k->mult ? k->mult :
		    1);
		return 0;
	case K_BUF:
		if ((k->flags & KF_NULL) && json_is_null(v)) {
			if (k->size > 0)
				field[0] = '\0';
			return 0;
		}
		return cfg_get_buf(x, v, k->size, k->flags & KF_ABS, field);
	case K_ROLE:
	case K_OPT:
	case K_TENANTS:
	case K_SESSIONS:
	case K_REGISTRIES:
	case K_TOKENS:
	case K_RULES:
	case K_FN:
		break;          /* read by fn */
	}
	return -1;
}

int
cfg_walk_object(struct cfg_ctx *x, json_t *v, const struct cfg_key *keys,
    void *base)
{
	const char *name;
	json_t *m;

	if (!json_is_object(v))
		return cfg_fail(x, "expected an object");
	json_object_foreach(v, name, m) {
		const struct cfg_key *k;

		for (k = keys; k->name != NULL; k++)
			if (strcmp(k->name, name) == 0)
				break;
		cfg_ctx_key(x, name);
		if (k->name == NULL)
			return key_unknown(x, keys);
		if (key_apply(x, k, m, base) != 0)
			return -1;
		cfg_ctx_pop(x);
	}
	return 0;
}

/* Fills base with the defaults of the rows (and of the objects below);
 * lists other than ports start empty, types of their own are left to
 * their owner.  -1 when out of memory (base is then safe to free). */
int
cfg_keys_default(const struct cfg_key *keys, void *base)
{
	const struct cfg_key *k;

	for (k = keys; k->name != NULL; k++) {
		char *field = (char *)base + k->off;
		size_t n;

		switch (k->kind) {
		case K_INT:
		case K_BOOL:
			*(int *)(void *)field = (int)k->def;
			break;
		case K_SIZE:
			*(size_t *)(void *)field = (size_t)k->def;
			break;
		case K_TIER:
			*(enum pol_tier *)(void *)field = (enum pol_tier)k->def;
			break;
		case K_ROLE:
			*(enum cfg_role *)(void *)field = (enum cfg_role)k->def;
			break;
		case K_MODE:
			*(unsigned *)(void *)field = (unsigned)k->def;
			break;
		case K_UID:
			*(int64_t *)(void *)field = k->def;
			break;
		case K_STR:
		case K_PATH:
		case K_FILE:
		case K_OPT:
			if (k->sdef != NULL && (*(char **)(void *)field =
			    strdup(k->sdef)) == NULL)
				return -1;
			break;
		case K_PORTS:
			for (n = 0; k->pdef != NULL && k->pdef[n] != 0; n++)
				;
			if (n == 0)
				break;
			if ((*(uint16_t **)(void *)field = calloc(n,
			    sizeof(uint16_t))) == NULL)
				return -1;
			memcpy(*(uint16_t **)(void *)field, k->pdef,
			    n * sizeof(uint16_t));
			*(size_t *)(void *)((char *)base + k->noff) = n;
			break;
		case K_OBJ:
			if (cfg_keys_default(k->sub, field) != 0)
				return -1;
			break;
		case K_LONG:
			*(long *)(void *)field = (long)k->def;
			break;
		case K_U64:
			*(uint64_t *)(void *)field = (uint64_t)k->def *
			    (k->mult ? k->mult : 1);
			break;
		case K_BUF:
			if (k->size > 0)
				snprintf(field, k->size, "%s", k->sdef != NULL ?
				    k->sdef : "");
			break;
		case K_IDS:
		case K_STRV:
		case K_HOSTS:
		case K_TENANTS:
		case K_SESSIONS:
		case K_REGISTRIES:
		case K_TOKENS:
		case K_RULES:
		case K_FN:
			break;
		}
	}
	return 0;
}
