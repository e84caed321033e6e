/*
 * config.c: load, validate and print sluiced.json.
 *
 * jansson parses; a table per JSON object validates.  jansson keeps no
 * source positions for values, so errors find theirs with a small token
 * walker over the original text (it only ever reads text jansson has
 * accepted, or, for syntax errors, the prefix jansson read before it
 * stopped).
 */
#include "sluice-config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "proxy/lib/config.h"
#include "firewall/fw.h"

#define CFG_FILE_MAX (16u * 1024 * 1024)
#define CFG_PATH_MAX 8     /* the schema nests three deep */
#define WALK_MAX 32        /* frames the position walker tracks */
#define SUN_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path))

/* One step of a JSON path: an object key (key != NULL) or an array index. */
struct cfg_pel {
	const char *key;
	size_t keylen;
	size_t idx;
};

struct cfg_ctx {
	const char *name;
	const char *text;
	size_t len;
	char *err;
	size_t errlen;
	struct cfg_pel path[CFG_PATH_MAX];
	size_t depth;
	struct pol_config *trial;  /* policy entries are validated by adding them */
	struct cfg *c;
};

/* ------------------------------------------------------------------ */
/* Position walker. */

enum { W_OBJ = 1, W_ARR = 2 };
enum { S_KEY, S_COLON, S_VALUE, S_AFTER };

struct walk_frame {
	int type;
	int state;
	const char *key;   /* raw text between the quotes */
	size_t keylen;
	size_t idx;
};

struct walk {
	const char *p, *end;
	struct walk_frame f[WALK_MAX];
	size_t depth;         /* may exceed WALK_MAX: deeper frames untracked */
	const char *tok;      /* start of the token just read */
	size_t path_depth;    /* frames that make up the token's path */
	int is_key, is_value;
};

static int
walk_ws(int ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static int
walk_delim(int ch)
{
	return walk_ws(ch) || ch == '{' || ch == '}' || ch == '[' ||
	    ch == ']' || ch == ',' || ch == ':' || ch == '"';
}

static struct walk_frame *
walk_top(struct walk *w)
{
	if (w->depth == 0 || w->depth > WALK_MAX)
		return NULL;
	return &w->f[w->depth - 1];
}

/* Reads one token and updates the frames; 0 at the end of the text.
 * Tolerates any input: on broken text the path is only a best guess. */
static int
walk_next(struct walk *w)
{
	struct walk_frame *top;
	const char *q;
	int closed = 0;
	char ch;

	while (w->p < w->end && walk_ws((unsigned char)*w->p))
		w->p++;
	if (w->p >= w->end)
		return 0;
	w->tok = q = w->p;
	ch = *q;
	if (ch == '"') {
		for (q++; q < w->end && *q != '"'; q++)
			if (*q == '\\' && q + 1 < w->end)
				q++;
		closed = q < w->end;
		w->p = closed ? q + 1 : q;
	} else if (walk_delim((unsigned char)ch)) {
		w->p = q + 1;
	} else {
		while (q < w->end && !walk_delim((unsigned char)*q))
			q++;
		w->p = q;
	}
	top = walk_top(w);
	w->is_key = w->is_value = 0;
	w->path_depth = w->depth;
	switch (ch) {
	case ',':
		if (top != NULL) {
			top->state = top->type == W_OBJ ? S_KEY : S_VALUE;
			top->key = NULL;
			if (top->type == W_ARR)
				top->idx++;
		}
		return 1;
	case ':':
		if (top != NULL)
			top->state = S_VALUE;
		return 1;
	case '}':
	case ']':
		if (w->depth > 0)
			w->depth--;
		if ((top = walk_top(w)) != NULL)
			top->state = S_AFTER;
		return 1;
	}
	if (top != NULL && top->type == W_OBJ && top->state == S_KEY &&
	    ch == '"') {
		w->is_key = 1;
		top->key = w->tok + 1;
		top->keylen = (size_t)(w->p - w->tok) - (closed ? 2 : 1);
		top->state = S_COLON;
		return 1;
	}
	w->is_value = 1;
	if (top != NULL)
		top->state = S_AFTER;
	if (ch == '{' || ch == '[') {
		if (w->depth < WALK_MAX) {
			struct walk_frame *f = &w->f[w->depth];

			memset(f, 0, sizeof(*f));
			f->type = ch == '{' ? W_OBJ : W_ARR;
			f->state = ch == '{' ? S_KEY : S_VALUE;
		}
		w->depth++;
	}
	return 1;
}

static int
hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static long
hex4(const char *s, const char *end)
{
	long v = 0;
	int i, h;

	if (end - s < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		if ((h = hexval((unsigned char)s[i])) < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

/* Compares raw JSON string content (escapes undecoded) with a decoded
 * UTF-8 key. */
static int
raw_key_eq(const char *r, size_t n, const char *key)
{
	const char *end = r + n;
	size_t k = 0, klen = strlen(key);

	while (r < end) {
		unsigned char u[4];
		size_t ulen = 1;

		if (*r != '\\') {
			u[0] = (unsigned char)*r++;
		} else if (end - r < 2) {
			return 0;
		} else if (r[1] != 'u') {
			const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
			const char *hit = strchr(from, r[1]);

			if (hit == NULL || r[1] == '\0')
				return 0;
			u[0] = (unsigned char)to[hit - from];
			r += 2;
		} else {
			long cp = hex4(r + 2, end), lo;

			if (cp < 0)
				return 0;
			r += 6;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (end - r < 6 || r[0] != '\\' || r[1] != 'u' ||
				    (lo = hex4(r + 2, end)) < 0xdc00 || lo > 0xdfff)
					return 0;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				r += 6;
			}
			if (cp < 0x80) {
				u[0] = (unsigned char)cp;
			} else if (cp < 0x800) {
				u[0] = (unsigned char)(0xc0 | (cp >> 6));
				u[1] = (unsigned char)(0x80 | (cp & 0x3f));
				ulen = 2;
			} else if (cp < 0x10000) {
				u[0] = (unsigned char)(0xe0 | (cp >> 12));
				u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
				u[2] = (unsigned char)(0x80 | (cp & 0x3f));
				ulen = 3;
			} else {
				u[0] = (unsigned char)(0xf0 | (cp >> 18));
				u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
				u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
				u[3] = (unsigned char)(0x80 | (cp & 0x3f));
				ulen = 4;
			}
		}
		if (klen - k < ulen || memcmp(key + k, u, ulen) != 0)
			return 0;
		k += ulen;
	}
	return k == klen;
}

static int
walk_path_eq(const struct walk *w, const struct cfg_pel *want, size_t n)
{
	size_t i;

	if (w->path_depth != n || n > WALK_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		const struct walk_frame *f = &w->f[i];

		if (want[i].key != NULL) {
			if (f->type != W_OBJ || f->key == NULL ||
			    !raw_key_eq(f->key, f->keylen, want[i].key))
				return 0;
		} else if (f->type != W_ARR || f->idx != want[i].idx) {
			return 0;
		}
	}
	return 1;
}

/* Where the value at path starts (or its key, with at_key); NULL if the
 * text has no such path. */
static const char *
walk_locate(const char *text, size_t len, const struct cfg_pel *path,
    size_t n, int at_key)
{
	struct walk w;

	memset(&w, 0, sizeof(w));
	w.p = text;
	w.end = text + len;
	while (walk_next(&w)) {
		if ((at_key && w.is_key) || (!at_key && w.is_value)) {
			if (walk_path_eq(&w, path, n))
				return w.tok;
		}
	}
	return NULL;
}

/* For a syntax error at byte offset pos: the start of the token jansson
 * stopped on and the path it sits at.  That token is the broken one, so
 * it only counts when it names a key (a duplicate key). */
static const char *
walk_until(const char *text, size_t len, size_t pos,
    struct cfg_pel path[WALK_MAX], size_t *n)
{
	struct walk w;
	const char *last = text;
	size_t i, ntok = 0;

	memset(&w, 0, sizeof(w));
	w.p = text;
	w.end = text + (pos < len ? pos : len);
	while (walk_next(&w))
		ntok++;
	memset(&w, 0, sizeof(w));
	w.p = text;
	w.end = text + (pos < len ? pos : len);
	for (i = 0; i + 1 < ntok; i++)
		walk_next(&w);
	if (ntok > 0) {
		const struct walk_frame *top = walk_top(&w);

		while (w.p < w.end && walk_ws((unsigned char)*w.p))
			w.p++;
		last = w.p;
		if (w.p < w.end && *w.p == '"' && top != NULL && top->type == W_OBJ &&
		    top->state == S_KEY)
			walk_next(&w);
	}
	*n = 0;
	for (i = 0; i < w.depth && i < WALK_MAX; i++) {
		const struct walk_frame *f = &w.f[i];

		if (f->type == W_OBJ && f->key == NULL)
			break;
		path[*n].key = f->type == W_OBJ ? f->key : NULL;
		path[*n].keylen = f->keylen;
		path[*n].idx = f->idx;
		(*n)++;
	}
	return last;
}

static void
text_linecol(const char *text, const char *at, int *line, int *col)
{
	const char *q;

	*line = 1;
	*col = 1;
	for (q = text; q < at; q++) {
		if (*q == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)*q & 0xc0) != 0x80) {
			(*col)++;
		}
	}
}

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
static void
bputs_shown(char *buf, size_t len, size_t *at, const char *s, size_t n,
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
			bputs_shown(buf, len, &at, path[i].key, path[i].keylen, 64);
			bputs(buf, len, &at, "\"]", 2);
		}
	}
}

/* A string value for a message: quoted, printable, bounded. */
static const char *
shown(const char *s, char *buf, size_t len)
{
	size_t at = 0;

	bputs(buf, len, &at, "\"", 1);
	bputs_shown(buf, len, &at, s, strlen(s), 64);
	bputs(buf, len, &at, "\"", 1);
	return buf;
}

static void
err_write(struct cfg_ctx *x, const char *at, const struct cfg_pel *path,
    size_t n, const char *msg)
{
	char pbuf[256];
	int line, col;

	if (x->err == NULL || x->errlen == 0)
		return;
	path_format(path, n, pbuf, sizeof(pbuf));
	if (at != NULL) {
		text_linecol(x->text, at, &line, &col);
		snprintf(x->err, x->errlen, "%s:%d:%d: %s: %s", x->name, line,
		    col, pbuf, msg);
	} else {
		snprintf(x->err, x->errlen, "%s: %s: %s", x->name, pbuf, msg);
	}
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
		at = walk_locate(x->text, x->len, x->path, n, at_key);
		while (at == NULL && n > 0) {
			n--;
			at = walk_locate(x->text, x->len, x->path, n, 0);
		}
	}
	err_write(x, at, x->path, depth, msg);
	return -1;
}

static int cfg_fail(struct cfg_ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int cfg_fail_key(struct cfg_ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
cfg_fail(struct cfg_ctx *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cfg_vfail(x, 0, fmt, ap);
	va_end(ap);
	return -1;
}

/* Points at the key rather than its value (unknown or bad keys). */
static int
cfg_fail_key(struct cfg_ctx *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cfg_vfail(x, 1, fmt, ap);
	va_end(ap);
	return -1;
}

static void
ctx_key(struct cfg_ctx *x, const char *key)
{
	if (x->depth < CFG_PATH_MAX) {
		x->path[x->depth].key = key;
		x->path[x->depth].keylen = strlen(key);
		x->path[x->depth].idx = 0;
	}
	x->depth++;
}

static void
ctx_idx(struct cfg_ctx *x, size_t idx)
{
	if (x->depth < CFG_PATH_MAX) {
		x->path[x->depth].key = NULL;
		x->path[x->depth].keylen = 0;
		x->path[x->depth].idx = idx;
	}
	x->depth++;
}

static void
ctx_pop(struct cfg_ctx *x)
{
	x->depth--;
}

/* ------------------------------------------------------------------ */
/* Value readers: each reports its own error at the current path. */

static int
get_str(struct cfg_ctx *x, json_t *v, const char **out)
{
	*out = "";
	if (!json_is_string(v))
		return cfg_fail(x, "expected a string");
	*out = json_string_value(v);
	return 0;
}

static int
get_int(struct cfg_ctx *x, json_t *v, long long lo, long long hi,
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

	if (get_str(x, v, &s) != 0)
		return -1;
	if (pol_tier_parse(s, out) != 0)
		return cfg_fail(x, "unknown tier %s (expected off, registries "
		    "or public)", shown(s, b, sizeof(b)));
	return 0;
}

static int
set_str(struct cfg_ctx *x, const char *s, char **out)
{
	char *d = strdup(s);

	if (d == NULL)
		return cfg_fail(x, "out of memory");
	free(*out);
	*out = d;
	return 0;
}

static void *
cfg_calloc(struct cfg_ctx *x, size_t n, size_t size)
{
	void *p = calloc(n > 0 ? n : 1, size);

	if (p == NULL)
		cfg_fail(x, "out of memory");
	return p;
}

static int
port_text_ok(const char *s, size_t n)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 5 || s[0] == '0')
		return 0;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v <= 65535;
}

typedef int (*str_check)(struct cfg_ctx *, const char *);

/* An array of strings, each passing check; replaces *out. */
static int
get_str_list(struct cfg_ctx *x, json_t *v, str_check check, char ***out,
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

		ctx_idx(x, i);
		if (get_str(x, json_array_get(v, i), &s) != 0 ||
		    (check != NULL && check(x, s) != 0))
			return -1;
		if ((list[i] = strdup(s)) == NULL)
			return cfg_fail(x, "out of memory");
		*n = i + 1;
		ctx_pop(x);
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
		ctx_idx(x, i);
		if (get_int(x, json_array_get(v, i), 1, 65535, &p) != 0)
			return -1;
		list[(*n)++] = (uint16_t)p;
		ctx_pop(x);
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
		ctx_idx(x, i);
		if (get_int(x, json_array_get(v, i), 0, 0xfffffffeLL, &id) != 0)
			return -1;
		list[out->n++] = (uint32_t)id;
		ctx_pop(x);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Schema tables. */

static int
get_opt_str(struct cfg_ctx *x, json_t *v, const char *what, char **out)
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
	return set_str(x, s, out);
}

/* K_FILE: a file name or null (an optional file) */
enum cfg_kind { K_INT, K_SIZE, K_BOOL, K_TIER, K_STR, K_PATH, K_FILE, K_OBJ,
    K_FN, K_IDS };

struct cfg_key;
typedef int (*key_fn)(struct cfg_ctx *, json_t *, void *base);

struct cfg_key {
	const char *name;
	enum cfg_kind kind;
	size_t off;                  /* into base */
	long long lo, hi;            /* K_INT, K_SIZE */
	const struct cfg_key *sub;   /* K_OBJ: same base */
	key_fn fn;                   /* K_FN */
};

static int walk_object(struct cfg_ctx *x, json_t *v, const struct cfg_key *keys,
    void *base);

static int
key_unknown(struct cfg_ctx *x, const struct cfg_key *keys)
{
	char list[256];
	size_t at = 0;
	const struct cfg_key *k;

	bputs(list, sizeof(list), &at, "", 0);
	for (k = keys; k->name != NULL; k++) {
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
	long long n;

	switch (k->kind) {
	case K_INT:
		if (get_int(x, v, k->lo, k->hi, &n) != 0)
			return -1;
		*(int *)(void *)field = (int)n;
		return 0;
	case K_SIZE:
		if (get_int(x, v, k->lo, k->hi, &n) != 0)
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
	case K_STR: {
		const char *s;

		if (get_str(x, v, &s) != 0)
			return -1;
		if (*s == '\0')
			return cfg_fail(x, "must not be empty");
		return set_str(x, s, (char **)(void *)field);
	}
	case K_PATH: {          /* a directory or file sluiced makes: absolute */
		const char *s;

		if (get_str(x, v, &s) != 0)
			return -1;
		if (s[0] != '/')
			return cfg_fail(x, "expected an absolute path");
		return set_str(x, s, (char **)(void *)field);
	}
	case K_FILE:
		return get_opt_str(x, v, "a file name", (char **)(void *)field);
	case K_OBJ:
		return walk_object(x, v, k->sub, base);
	case K_FN:
		return k->fn(x, v, base);
	case K_IDS:
		return get_id_list(x, v, (struct cfg_idlist *)(void *)field);
	}
	return -1;
}

static int
walk_object(struct cfg_ctx *x, json_t *v, const struct cfg_key *keys,
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
		ctx_key(x, name);
		if (k->name == NULL)
			return key_unknown(x, keys);
		if (key_apply(x, k, m, base) != 0)
			return -1;
		ctx_pop(x);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Key handlers. */

/* A user name as useradd accepts it, so a typo is found by
 * --check-config, not at the next start. */
static int
k_user(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	const char *s;
	char b[80];
	size_t i, n;

	if (get_str(x, v, &s) != 0)
		return -1;
	n = strlen(s);
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' ||
		    (i > 0 && ((s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		    s[i] == '.'))))
			break;
	if (n == 0 || n > 32 || i < n)
		return cfg_fail(x, "bad user name %s (letters, digits, _ . "
		    "and -, starting with a letter or _, at most 32)",
		    shown(s, b, sizeof(b)));
	return set_str(x, s, &c->user);
}

static const struct cfg_key tenant_keys[] = {
	{ "ceiling", K_TIER, offsetof(struct cfg_tenant, ceiling), 0, 0, NULL, NULL },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

static int
k_tenants(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	const char *name;
	json_t *m;

	if (!json_is_object(v))
		return cfg_fail(x, "expected an object of tenants");
	c->tenants = cfg_calloc(x, json_object_size(v), sizeof(*c->tenants));
	if (c->tenants == NULL)
		return -1;
	json_object_foreach(v, name, m) {
		struct cfg_tenant *t = &c->tenants[c->ntenants];

		ctx_key(x, name);
		if (!pol_id_valid(name))
			return cfg_fail_key(x, "bad tenant name (expected "
			    "1 to 64 of A-Z a-z 0-9 . _ -)");
		if ((t->name = strdup(name)) == NULL)
			return cfg_fail(x, "out of memory");
		c->ntenants++;
		if (json_is_object(m) && json_object_get(m, "ceiling") == NULL)
			return cfg_fail(x, "missing key \"ceiling\"");
		if (walk_object(x, m, tenant_keys, t) != 0)
			return -1;
		ctx_pop(x);
	}
	return 0;
}

static int
check_listen(struct cfg_ctx *x, const char *s)
{
	struct pol_target t;
	char b[80];

	if (pol_target_parse_authority(s, strlen(s), &t) != POL_R_NONE ||
	    t.kind == POL_HOST_NAME)
		return cfg_fail(x, "bad listen address %s (expected "
		    "ADDRESS:PORT or [IPV6]:PORT)", shown(s, b, sizeof(b)));
	return 0;
}

static int
k_listen_tcp(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_str_list(x, v, check_listen, &c->listen_tcp,
	    &c->nlisten_tcp);
}

static int
k_listen_transparent(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	size_t i;

	if (get_str_list(x, v, check_listen, &c->listen_transparent,
	    &c->nlisten_transparent) != 0)
		return -1;
	c->transparent_port = 0;
	for (i = 0; i < c->nlisten_transparent; i++) {
		const char *s = c->listen_transparent[i];
		struct pol_target t;

		(void)pol_target_parse_authority(s, strlen(s), &t);
		/* one redirect target: "redirect to :PORT" lands on the
		 * address of the interface the packet came in on */
		if (i > 0 && t.port != c->transparent_port)
			return cfg_fail(x, "every transparent listener needs "
			    "the same port (the firewall redirects to one)");
		c->transparent_port = t.port;
	}
	return 0;
}

static int
k_vsock_port(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	long long n;

	if (get_int(x, v, -1, INT_MAX, &n) != 0)
		return -1;
	if (n == 0)
		return cfg_fail(x, "expected a port (1..%d) or -1 for none",
		    INT_MAX);
	c->vsock_port = (int)n;
	return 0;
}

static int
get_mode(struct cfg_ctx *x, json_t *v, unsigned *out)
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

/* A string or null (NULL); what says what the string is. */

static int
k_socket_mode(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_mode(x, v, &c->socket_mode);
}

static int
k_socket_group(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_opt_str(x, v, "a group name", &c->socket_group);
}

static const struct cfg_key listen_keys[] = {
	{ "tcp", K_FN, 0, 0, 0, NULL, k_listen_tcp },
	{ "transparent", K_FN, 0, 0, 0, NULL, k_listen_transparent },
	{ "vsock_port", K_FN, 0, 0, 0, NULL, k_vsock_port },
	{ "socket_mode", K_FN, 0, 0, 0, NULL, k_socket_mode },
	{ "socket_group", K_FN, 0, 0, 0, NULL, k_socket_group },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

/* Sessions: x->c->sessions[x->c->nsessions - 1] is the one being read. */

static int
session_transport(struct cfg_ctx *x, struct cfg_session *s)
{
	if (s->socket != NULL || s->source != NULL || s->vsock_cid >= 0)
		return cfg_fail_key(x, "a session has at most one of socket, "
		    "source and vsock_cid");
	return 0;
}

static int
k_sess_id(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	const char *id;
	char b[80];
	size_t i;

	if (get_str(x, v, &id) != 0)
		return -1;
	if (!pol_id_valid(id))
		return cfg_fail(x, "bad session id %s (expected 1 to 64 of "
		    "A-Z a-z 0-9 . _ -)", shown(id, b, sizeof(b)));
	for (i = 0; x->c->sessions + i < s; i++)
		if (x->c->sessions[i].id != NULL &&
		    strcmp(x->c->sessions[i].id, id) == 0)
			return cfg_fail(x, "duplicate session id %s (also "
			    "sessions[%zu])", shown(id, b, sizeof(b)), i);
	return set_str(x, id, &s->id);
}

static int
k_sess_tenant(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	const char *t;

	if (get_str(x, v, &t) != 0)
		return -1;
	if (*t != '\0' && !pol_id_valid(t))
		return cfg_fail(x, "bad tenant name (expected 1 to 64 of "
		    "A-Z a-z 0-9 . _ -)");
	return set_str(x, t, &s->tenant);
}

static int
k_sess_user(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	const char *u;

	if (get_str(x, v, &u) != 0)
		return -1;
	if (strlen(u) > 256)
		return cfg_fail(x, "longer than 256 bytes");
	return set_str(x, u, &s->user);
}

static int
k_sess_socket(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	const char *p;
	char b[80];
	size_t i;

	if (session_transport(x, s) != 0 || get_str(x, v, &p) != 0)
		return -1;
	if (p[0] != '/')
		return cfg_fail(x, "expected an absolute path");
	if (strlen(p) >= SUN_PATH_MAX)
		return cfg_fail(x, "longer than a socket path can be (%zu "
		    "bytes)", SUN_PATH_MAX - 1);
	for (i = 0; x->c->sessions + i < s; i++)
		if (x->c->sessions[i].socket != NULL &&
		    strcmp(x->c->sessions[i].socket, p) == 0)
			return cfg_fail(x, "socket %s already belongs to "
			    "sessions[%zu]", shown(p, b, sizeof(b)), i);
	return set_str(x, p, &s->socket);
}

static int
k_sess_source(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	char canon[64], b[80];
	const char *p;
	size_t i;

	if (session_transport(x, s) != 0 || get_str(x, v, &p) != 0)
		return -1;
	if (pol_addr_parse(p, strlen(p), &s->source_addr) != 0)
		return cfg_fail(x, "bad source address %s (expected an IPv4 "
		    "or IPv6 address)", shown(p, b, sizeof(b)));
	pol_addr_format(&s->source_addr, canon, sizeof(canon));
	for (i = 0; x->c->sessions + i < s; i++)
		if (x->c->sessions[i].source != NULL &&
		    strcmp(x->c->sessions[i].source, canon) == 0)
			return cfg_fail(x, "source %s already belongs to "
			    "sessions[%zu]", canon, i);
	return set_str(x, canon, &s->source);
}

static int
k_sess_cid(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	long long cid;
	size_t i;

	if (session_transport(x, s) != 0)
		return -1;
	/* 0 is the hypervisor, 2 the host (no sandbox is either) and
	 * 0xffffffff is "any"; 1 is local loopback, for tests on a host */
	if (get_int(x, v, 1, 0xfffffffeLL, &cid) != 0)
		return -1;
	if (cid == 2)
		return cfg_fail(x, "2 is the host's own CID, not a sandbox's");
	for (i = 0; x->c->sessions + i < s; i++)
		if (x->c->sessions[i].vsock_cid == cid)
			return cfg_fail(x, "vsock_cid %lld already belongs to "
			    "sessions[%zu]", cid, i);
	s->vsock_cid = cid;
	return 0;
}

static const struct cfg_key session_keys[] = {
	{ "id", K_FN, 0, 0, 0, NULL, k_sess_id },
	{ "tenant", K_FN, 0, 0, 0, NULL, k_sess_tenant },
	{ "user", K_FN, 0, 0, 0, NULL, k_sess_user },
	{ "tier", K_TIER, offsetof(struct cfg_session, tier), 0, 0, NULL, NULL },
	{ "socket", K_FN, 0, 0, 0, NULL, k_sess_socket },
	{ "source", K_FN, 0, 0, 0, NULL, k_sess_source },
	{ "vsock_cid", K_FN, 0, 0, 0, NULL, k_sess_cid },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

static int
k_sessions(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	size_t i;

	if (!json_is_array(v))
		return cfg_fail(x, "expected an array of sessions");
	c->sessions = cfg_calloc(x, json_array_size(v), sizeof(*c->sessions));
	if (c->sessions == NULL)
		return -1;
	for (i = 0; i < json_array_size(v); i++) {
		struct cfg_session *s = &c->sessions[c->nsessions++];

		s->tier = POL_TIER_OFF;
		s->vsock_cid = -1;
		ctx_idx(x, i);
		if (walk_object(x, json_array_get(v, i), session_keys, s) != 0)
			return -1;
		if (s->id == NULL)
			return cfg_fail(x, "missing key \"id\"");
		if ((s->tenant == NULL && set_str(x, "", &s->tenant) != 0) ||
		    (s->user == NULL && set_str(x, "", &s->user) != 0))
			return -1;
		ctx_pop(x);
	}
	return 0;
}

static int
check_registry(struct cfg_ctx *x, const char *s)
{
	char b[80];

	if (pol_config_add_registry(x->trial, s) != 0)
		return cfg_fail(x, "bad registry pattern %s (expected a host "
		    "name or *.suffix, with an optional :port)",
		    shown(s, b, sizeof(b)));
	return 0;
}

static int
k_registries(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	if (json_is_null(v)) {
		c->registries_default = 1;
		return 0;
	}
	c->registries_default = 0;
	return get_str_list(x, v, check_registry, &c->registries,
	    &c->nregistries);
}

static int
k_ports_reg(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_port_list(x, v, &c->ports_registries,
	    &c->nports_registries);
}

static int
k_ports_pub(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_port_list(x, v, &c->ports_public, &c->nports_public);
}

static const struct cfg_key ports_keys[] = {
	{ "registries", K_FN, 0, 0, 0, NULL, k_ports_reg },
	{ "public", K_FN, 0, 0, 0, NULL, k_ports_pub },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

static int
check_cidr(struct cfg_ctx *x, const char *s, int allow)
{
	char b[80];

	if (pol_config_add_cidr(x->trial, s, allow) != 0)
		return cfg_fail(x, "bad CIDR %s (expected ADDRESS or "
		    "ADDRESS/PREFIX)", shown(s, b, sizeof(b)));
	return 0;
}

static int
check_allow_cidr(struct cfg_ctx *x, const char *s)
{
	return check_cidr(x, s, 1);
}

static int
check_deny_cidr(struct cfg_ctx *x, const char *s)
{
	return check_cidr(x, s, 0);
}

static int
check_deny_host(struct cfg_ctx *x, const char *s)
{
	char b[80];

	if (pol_config_add_deny_host(x->trial, s) != 0)
		return cfg_fail(x, "bad host pattern %s (expected a host name "
		    "or *.suffix, with an optional :port)",
		    shown(s, b, sizeof(b)));
	return 0;
}

static int
k_allow_cidrs(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_str_list(x, v, check_allow_cidr, &c->allow_cidrs,
	    &c->nallow_cidrs);
}

static int
k_deny_cidrs(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_str_list(x, v, check_deny_cidr, &c->deny_cidrs,
	    &c->ndeny_cidrs);
}

static int
k_deny_hosts(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_str_list(x, v, check_deny_host, &c->deny_hosts,
	    &c->ndeny_hosts);
}

/* "ip", "ip:port", "[v6]" or "[v6]:port". */
static int
check_dns_server(struct cfg_ctx *x, const char *s)
{
	const char *addr = s, *port = NULL, *colon;
	struct pol_addr a;
	size_t alen;
	char b[80];

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (close == NULL || (close[1] != '\0' && close[1] != ':'))
			goto bad;
		addr = s + 1;
		alen = (size_t)(close - addr);
		if (close[1] == ':')
			port = close + 2;
	} else if ((colon = strchr(s, ':')) != NULL &&
	    strchr(colon + 1, ':') == NULL) {
		alen = (size_t)(colon - s);
		port = colon + 1;
	} else {
		alen = strlen(s);
	}
	if (pol_addr_parse(addr, alen, &a) != 0)
		goto bad;
	if (s[0] == '[' && a.family == AF_INET)
		goto bad;
	if (port != NULL && !port_text_ok(port, strlen(port)))
		goto bad;
	return 0;
bad:
	return cfg_fail(x, "bad DNS server %s (expected IP, IP:PORT or "
	    "[IPV6]:PORT)", shown(s, b, sizeof(b)));
}

static int
k_dns_servers(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_str_list(x, v, check_dns_server, &c->dns_servers,
	    &c->ndns_servers);
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

		ctx_idx(x, i);
		if (get_str(x, json_array_get(v, i), &s) != 0)
			return -1;
		if (pol_addr_parse(s, strlen(s), &h->addrs[i]) != 0)
			return cfg_fail(x, "bad address %s (expected an IPv4 "
			    "or IPv6 address)", shown(s, b, sizeof(b)));
		h->naddrs = i + 1;
		ctx_pop(x);
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

		ctx_key(x, name);
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
		ctx_pop(x);
	}
	return 0;
}

static int
k_dns_hosts(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_hostmap(x, v, &c->dns_hosts, &c->ndns_hosts);
}

static const struct cfg_key dns_keys[] = {
	{ "servers", K_FN, 0, 0, 0, NULL, k_dns_servers },
	{ "hosts", K_FN, 0, 0, 0, NULL, k_dns_hosts },
	{ "timeout_ms", K_INT, offsetof(struct cfg, dns_timeout_ms), 1, 600000,
	  NULL, NULL },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

static const struct cfg_key log_keys[] = {
	{ "path", K_STR, offsetof(struct cfg, log_path), 0, 0, NULL, NULL },
	{ "refusals_per_s", K_INT, offsetof(struct cfg, log_refusals_per_s), 0,
	  1000000, NULL, NULL },
	{ "refusal_burst", K_INT, offsetof(struct cfg, log_refusal_burst), 1,
	  1000000, NULL, NULL },
	{ "min_free_bytes", K_SIZE, offsetof(struct cfg, log_min_free_bytes), 0,
	  (long long)1 << 50, NULL, NULL },
	{ "mac_key_file", K_FILE, offsetof(struct cfg, log_mac_key_file), 0, 0,
	  NULL, NULL },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

static const struct cfg_key prompt_keys[] = {
	{ "timeout_s", K_INT, offsetof(struct cfg, prompt_timeout_s), 1, 86400,
	  NULL, NULL },
	{ "deny_quiet_s", K_INT, offsetof(struct cfg, prompt_deny_quiet_s), 0,
	  86400, NULL, NULL },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

static const struct cfg_key events_keys[] = {
	{ "ring", K_SIZE, offsetof(struct cfg, events_ring), 16, 100000,
	  NULL, NULL },
	{ "max_pending", K_SIZE, offsetof(struct cfg, events_max_pending),
	  4096, 64 * 1048576, NULL, NULL },
	{ "heartbeat_s", K_INT, offsetof(struct cfg, events_heartbeat_s), 1,
	  3600, NULL, NULL },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

#define LIM(name, kind, field, lo, hi) \
	{ name, kind, offsetof(struct cfg, field), lo, hi, NULL, NULL }

static const struct cfg_key limits_keys[] = {
	LIM("max_head", K_SIZE, max_head, 1024, 1048576),
	LIM("max_line", K_SIZE, max_line, 256, 1048576),
	LIM("max_headers", K_SIZE, max_headers, 1, 10000),
	LIM("head_timeout_ms", K_INT, head_timeout_ms, 100, 600000),
	LIM("idle_timeout_s", K_INT, idle_timeout_s, 1, 86400),
	LIM("connect_timeout_ms", K_INT, connect_timeout_ms, 100, 600000),
	LIM("max_conns_per_session", K_INT, max_conns_per_session, 1, 1000000),
	LIM("max_conns_total", K_INT, max_conns_total, 1, 1000000),
	LIM("max_grants_per_session", K_INT, max_grants_per_session, 1,
	    100000),
	LIM("max_refusals_per_conn", K_INT, max_refusals_per_conn, 1, 1000000),
	LIM("tunnel_buffer", K_SIZE, tunnel_buffer, 4096, 64 * 1048576),
	LIM("drain_timeout_s", K_INT, drain_timeout_s, 0, 3600),
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

static int
k_sni_ports(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_port_list(x, v, &c->sni_ports, &c->nsni_ports);
}

static const struct cfg_key tls_keys[] = {
	{ "sni_check", K_BOOL, offsetof(struct cfg, sni_check), 0, 0, NULL,
	  NULL },
	{ "sni_ports", K_FN, 0, 0, 0, NULL, k_sni_ports },
	LIM("sni_timeout_ms", K_INT, sni_timeout_ms, 100, 600000),
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};


/* control: the control API's listeners, callers and limits. */

static int
k_ctl_socket(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	const char *p;

	if (get_str(x, v, &p) != 0)
		return -1;
	if (p[0] != '/')
		return cfg_fail(x, "expected an absolute path");
	if (strlen(p) >= SUN_PATH_MAX)
		return cfg_fail(x, "longer than a socket path can be (%zu "
		    "bytes)", SUN_PATH_MAX - 1);
	return set_str(x, p, &c->control.socket);
}

static int
k_ctl_socket_mode(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_mode(x, v, &c->control.socket_mode);
}

static int
k_ctl_socket_group(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_opt_str(x, v, "a group name", &c->control.socket_group);
}

static int
k_ctl_tcp(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	if (!json_is_null(v) && json_is_string(v) &&
	    check_listen(x, json_string_value(v)) != 0)
		return -1;
	return get_opt_str(x, v, "ADDRESS:PORT", &c->control.tcp);
}

static const char *const role_names[] = {
	[CFG_ROLE_NONE] = "none",
	[CFG_ROLE_AUDITOR] = "auditor",
	[CFG_ROLE_APP] = "app",
	[CFG_ROLE_ADMIN] = "admin",
};

const char *
cfg_role_name(enum cfg_role r)
{
	if ((size_t)r >= sizeof(role_names) / sizeof(role_names[0]))
		return "none";
	return role_names[r];
}

static int
k_tok_name(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_token *t = base;
	const char *name;
	char b[80];
	size_t i;

	if (get_str(x, v, &name) != 0)
		return -1;
	if (!pol_id_valid(name))
		return cfg_fail(x, "bad token name %s (expected 1 to 64 of "
		    "A-Z a-z 0-9 . _ -)", shown(name, b, sizeof(b)));
	for (i = 0; x->c->control.tokens + i < t; i++)
		if (strcmp(x->c->control.tokens[i].name, name) == 0)
			return cfg_fail(x, "duplicate token name %s (also "
			    "control.tokens[%zu])", shown(name, b, sizeof(b)),
			    i);
	return set_str(x, name, &t->name);
}

static int
k_tok_role(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_token *t = base;
	const char *r;
	char b[80];

	if (get_str(x, v, &r) != 0)
		return -1;
	if (strcmp(r, "admin") == 0)
		t->role = CFG_ROLE_ADMIN;
	else if (strcmp(r, "app") == 0)
		t->role = CFG_ROLE_APP;
	else if (strcmp(r, "auditor") == 0)
		t->role = CFG_ROLE_AUDITOR;
	else
		return cfg_fail(x, "unknown role %s (expected admin, app or "
		    "auditor)", shown(r, b, sizeof(b)));
	return 0;
}

static const struct cfg_key token_keys[] = {
	{ "name", K_FN, 0, 0, 0, NULL, k_tok_name },
	{ "role", K_FN, 0, 0, 0, NULL, k_tok_role },
	{ "token_file", K_STR, offsetof(struct cfg_token, token_file), 0, 0,
	  NULL, NULL },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

static int
k_ctl_tokens(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	static const char *const need[] = { "name", "role", "token_file" };
	size_t i, j;

	if (!json_is_array(v))
		return cfg_fail(x, "expected an array of tokens");
	c->control.tokens = cfg_calloc(x, json_array_size(v),
	    sizeof(*c->control.tokens));
	if (c->control.tokens == NULL)
		return -1;
	for (i = 0; i < json_array_size(v); i++) {
		json_t *o = json_array_get(v, i);
		struct cfg_token *t = &c->control.tokens[c->control.ntokens++];

		ctx_idx(x, i);
		if (walk_object(x, o, token_keys, t) != 0)
			return -1;
		for (j = 0; j < sizeof(need) / sizeof(need[0]); j++)
			if (json_object_get(o, need[j]) == NULL)
				return cfg_fail(x, "missing key \"%s\"",
				    need[j]);
		ctx_pop(x);
	}
	return 0;
}

/*
 * "https://host[:port][/path]": the scheme only https (any case), no
 * userinfo or fragment, a path of printable characters.  The parts are
 * kept so that the webhook module does not parse again.
 */
static int
webhook_url(struct cfg_ctx *x, const char *u, struct cfg_webhook *w)
{
	static const char https[] = "https://";
	const char *auth, *end, *p;
	struct pol_target t;
	char b[80];
	size_t i;

	for (i = 0; i < sizeof(https) - 1; i++)
		if (u[i] == '\0' || tolower((unsigned char)u[i]) != https[i])
			return cfg_fail(x, "%s is not an https:// URL (the "
			    "webhook is TLS only)", shown(u, b, sizeof(b)));
	auth = u + i;
	end = auth + strcspn(auth, "/?#");
	if (memchr(auth, '@', (size_t)(end - auth)) != NULL)
		return cfg_fail(x, "no user name or password in the URL");
	if (*end == '#' || strchr(end, '#') != NULL)
		return cfg_fail(x, "no fragment (#) in the URL");
	for (p = end; *p != '\0'; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return cfg_fail(x, "the URL's path must be printable "
			    "ASCII without spaces");
	if (end == auth || pol_target_parse_hostport(auth,
	    (size_t)(end - auth), 443, &t) != POL_R_NONE || t.port == 0)
		return cfg_fail(x, "bad host or port in %s",
		    shown(u, b, sizeof(b)));
	free(w->host);
	free(w->path);
	w->host = strdup(t.host);
	w->port = t.port;
	if (*end == '?') {
		w->path = malloc(strlen(end) + 2);
		if (w->path != NULL) {
			w->path[0] = '/';
			strcpy(w->path + 1, end);
		}
	} else {
		w->path = strdup(*end == '\0' ? "/" : end);
	}
	if (w->host == NULL || w->path == NULL)
		return cfg_fail(x, "out of memory");
	return 0;
}

static int
k_wh_url(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	if (json_is_string(v) && *json_string_value(v) != '\0' &&
	    webhook_url(x, json_string_value(v), &c->webhook) != 0)
		return -1;
	return get_opt_str(x, v, "an https:// URL", &c->webhook.url);
}

static int
k_wh_hosts(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_hostmap(x, v, &c->webhook.hosts, &c->webhook.nhosts);
}

static const struct cfg_key webhook_keys[] = {
	{ "url", K_FN, 0, 0, 0, NULL, k_wh_url },
	{ "secret_file", K_FILE, offsetof(struct cfg, webhook.secret_file), 0, 0,
	  NULL, NULL },
	{ "ca_file", K_FILE, offsetof(struct cfg, webhook.ca_file), 0, 0, NULL,
	  NULL },
	{ "timeout_ms", K_INT, offsetof(struct cfg, webhook.timeout_ms), 100,
	  600000, NULL, NULL },
	{ "hosts", K_FN, 0, 0, 0, NULL, k_wh_hosts },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

#define CTL(name, kind, field) \
	{ name, kind, offsetof(struct cfg, control.field), 0, 0, NULL, NULL }

static const struct cfg_key control_keys[] = {
	{ "socket", K_FN, 0, 0, 0, NULL, k_ctl_socket },
	{ "socket_mode", K_FN, 0, 0, 0, NULL, k_ctl_socket_mode },
	{ "socket_group", K_FN, 0, 0, 0, NULL, k_ctl_socket_group },
	CTL("admin_uids", K_IDS, uids[CFG_ROLE_ADMIN]),
	CTL("admin_gids", K_IDS, gids[CFG_ROLE_ADMIN]),
	CTL("app_uids", K_IDS, uids[CFG_ROLE_APP]),
	CTL("app_gids", K_IDS, gids[CFG_ROLE_APP]),
	CTL("auditor_uids", K_IDS, uids[CFG_ROLE_AUDITOR]),
	CTL("auditor_gids", K_IDS, gids[CFG_ROLE_AUDITOR]),
	{ "tcp", K_FN, 0, 0, 0, NULL, k_ctl_tcp },
	{ "tls_cert", K_FILE, offsetof(struct cfg, control.tls_cert), 0, 0, NULL,
	  NULL },
	{ "tls_key", K_FILE, offsetof(struct cfg, control.tls_key), 0, 0, NULL,
	  NULL },
	{ "client_ca", K_FILE, offsetof(struct cfg, control.client_ca), 0, 0,
	  NULL, NULL },
	{ "tokens", K_FN, 0, 0, 0, NULL, k_ctl_tokens },
	{ "max_body", K_SIZE, offsetof(struct cfg, control.max_body), 1024,
	  16 * 1048576, NULL, NULL },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

/* ------------------------------------------------------------------ */
/* firewall */

static int
k_fw_table(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	const char *s;
	char b[80];
	size_t i, n;

	if (get_str(x, v, &s) != 0)
		return -1;
	n = strlen(s);
	/* nft's identifier syntax, within NFT_TABLE_MAXNAMELEN */
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' ||
		    (i > 0 && ((s[i] >= '0' && s[i] <= '9') || s[i] == '-'))))
			break;
	if (n == 0 || n > 31 || i < n)
		return cfg_fail(x, "bad table name %s (letters, digits, _ "
		    "and -, starting with a letter or _, at most 31)",
		    shown(s, b, sizeof(b)));
	return set_str(x, s, &c->firewall.table);
}

static int
k_fw_uid(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	long long id;

	if (json_is_null(v)) {
		c->firewall.uid = -1;
		return 0;
	}
	if (get_int(x, v, 0, 0xfffffffeLL, &id) != 0)
		return -1;
	c->firewall.uid = id;
	return 0;
}

/* ADDRESS/PREFIX with no host bits: a subnet, not an address in one */
static int
check_subnet(struct cfg_ctx *x, const char *s)
{
	const char *slash = strchr(s, '/');
	struct pol_addr a;
	unsigned long len = 0;
	unsigned i, max;
	char b[80], *end = NULL;

	if (slash == NULL || pol_addr_parse(s, (size_t)(slash - s), &a) != 0)
		goto bad;
	max = a.family == AF_INET ? 32 : 128;
	if (slash[1] < '0' || slash[1] > '9' ||
	    (slash[1] == '0' && slash[2] != '\0'))
		goto bad;
	len = strtoul(slash + 1, &end, 10);
	if (*end != '\0' || len > max)
		goto bad;
	for (i = (unsigned)len; i < max; i++)
		if (a.a[i / 8] & (0x80 >> (i % 8)))
			return cfg_fail(x, "subnet %s has host bits set",
			    shown(s, b, sizeof(b)));
	return 0;
bad:
	return cfg_fail(x, "bad subnet %s (expected ADDRESS/PREFIX)",
	    shown(s, b, sizeof(b)));
}

static int
k_fw_subnets(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_str_list(x, v, check_subnet, &c->firewall.sandbox_subnets,
	    &c->firewall.nsandbox_subnets);
}

static int
check_ifname(struct cfg_ctx *x, const char *s)
{
	char why[120], b[80];

	if (fw_ifname_check(s, why, sizeof(why)) != 0)
		return cfg_fail(x, "bad interface name %s: %s",
		    shown(s, b, sizeof(b)), why);
	return 0;
}

static int
k_fw_ifaces(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_str_list(x, v, check_ifname,
	    &c->firewall.sandbox_interfaces, &c->firewall.nsandbox_interfaces);
}

static int
k_fw_ports(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_port_list(x, v, &c->firewall.broker_ports,
	    &c->firewall.nbroker_ports);
}

static const struct cfg_key firewall_keys[] = {
	{ "enabled", K_BOOL, offsetof(struct cfg, firewall.enabled), 0, 0,
	  NULL, NULL },
	{ "table", K_FN, 0, 0, 0, NULL, k_fw_table },
	{ "uid", K_FN, 0, 0, 0, NULL, k_fw_uid },
	{ "sandbox_subnets", K_FN, 0, 0, 0, NULL, k_fw_subnets },
	{ "sandbox_interfaces", K_FN, 0, 0, 0, NULL, k_fw_ifaces },
	{ "broker_ports", K_FN, 0, 0, 0, NULL, k_fw_ports },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

static const struct cfg_key root_keys[] = {
	{ "runtime_dir", K_PATH, offsetof(struct cfg, runtime_dir), 0, 0, NULL,
	  NULL },
	{ "state_file", K_PATH, offsetof(struct cfg, state_file), 0, 0, NULL,
	  NULL },
	{ "user", K_FN, 0, 0, 0, NULL, k_user },
	{ "ceiling", K_TIER, offsetof(struct cfg, ceiling), 0, 0, NULL, NULL },
	{ "tenants", K_FN, 0, 0, 0, NULL, k_tenants },
	{ "listen", K_OBJ, 0, 0, 0, listen_keys, NULL },
	{ "sessions", K_FN, 0, 0, 0, NULL, k_sessions },
	{ "registries", K_FN, 0, 0, 0, NULL, k_registries },
	{ "ports", K_OBJ, 0, 0, 0, ports_keys, NULL },
	{ "allow_cidrs", K_FN, 0, 0, 0, NULL, k_allow_cidrs },
	{ "deny_cidrs", K_FN, 0, 0, 0, NULL, k_deny_cidrs },
	{ "deny_hosts", K_FN, 0, 0, 0, NULL, k_deny_hosts },
	{ "dns", K_OBJ, 0, 0, 0, dns_keys, NULL },
	{ "log", K_OBJ, 0, 0, 0, log_keys, NULL },
	{ "prompt", K_OBJ, 0, 0, 0, prompt_keys, NULL },
	{ "events", K_OBJ, 0, 0, 0, events_keys, NULL },
	{ "limits", K_OBJ, 0, 0, 0, limits_keys, NULL },
	{ "tls", K_OBJ, 0, 0, 0, tls_keys, NULL },
	{ "control", K_OBJ, 0, 0, 0, control_keys, NULL },
	{ "webhook", K_OBJ, 0, 0, 0, webhook_keys, NULL },
	{ "firewall", K_OBJ, 0, 0, 0, firewall_keys, NULL },
	{ NULL, K_INT, 0, 0, 0, NULL, NULL }
};

static int
cfg_check_control(struct cfg_ctx *x, json_t *root)
{
	struct cfg_control *k = &x->c->control;
	json_t *jc = json_object_get(root, "control");
	static const char name[] = "/control.sock";
	char *p;

	/* the default socket follows runtime_dir, wherever that key is */
	if (json_object_get(jc, "socket") == NULL) {
		if (strlen(x->c->runtime_dir) + strlen(name) >= SUN_PATH_MAX) {
			ctx_key(x, "runtime_dir");
			return cfg_fail(x, "too long for the control socket "
			    "under it; give control.socket or a shorter "
			    "runtime_dir");
		}
		if ((p = malloc(strlen(x->c->runtime_dir) + sizeof(name))) ==
		    NULL)
			return cfg_fail(x, "out of memory");
		strcpy(p, x->c->runtime_dir);
		strcat(p, name);
		free(k->socket);
		k->socket = p;
	}
	if (k->tcp == NULL)
		return 0;
	ctx_key(x, "control");
	ctx_key(x, "tcp");
	if (k->tls_cert == NULL || k->tls_key == NULL)
		return cfg_fail(x, "the TCP listener is TLS only: give "
		    "control.tls_cert and control.tls_key");
	if (k->ntokens == 0)
		return cfg_fail(x, "no control.tokens: every call on the TCP "
		    "listener would be refused");
	ctx_pop(x);
	ctx_pop(x);
	return 0;
}

/* Checks between keys, run once everything is read. */
static int
cfg_cross_check(struct cfg_ctx *x, json_t *root)
{
	struct cfg *c = x->c;
	static const char sess[] = "/sessions/", sock[] = "/proxy.sock";
	size_t i;

	/* a line limit left at its default follows a smaller head limit;
	 * one the file names must fit */
	if (c->max_line > c->max_head && json_object_get(json_object_get(root,
	    "limits"), "max_line") == NULL)
		c->max_line = c->max_head;
	if (c->max_line > c->max_head) {
		ctx_key(x, "limits");
		ctx_key(x, "max_line");
		return cfg_fail(x, "%zu exceeds limits.max_head (%zu)",
		    c->max_line, c->max_head);
	}
	for (i = 0; i < c->nsessions; i++) {
		const struct cfg_session *s = &c->sessions[i];

		if (s->socket != NULL || s->source != NULL || s->vsock_cid >= 0)
			continue;
		if (strlen(c->runtime_dir) + strlen(sess) + strlen(s->id) +
		    strlen(sock) >= SUN_PATH_MAX) {
			ctx_key(x, "sessions");
			ctx_idx(x, i);
			return cfg_fail(x, "the default socket path under "
			    "runtime_dir is too long; give \"socket\" or a "
			    "shorter runtime_dir");
		}
	}
	if (c->webhook.url != NULL && c->webhook.secret_file == NULL) {
		ctx_key(x, "webhook");
		ctx_key(x, "url");
		return cfg_fail(x, "a webhook needs webhook.secret_file (its "
		    "deliveries are signed)");
	}
	if ((c->firewall.nsandbox_subnets > 0 ||
	    c->firewall.nsandbox_interfaces > 0) &&
	    c->firewall.nbroker_ports == 0 && c->transparent_port == 0) {
		ctx_key(x, "firewall");
		ctx_key(x, "broker_ports");
		/* otherwise the guard would leave the sandboxes no way out */
		return cfg_fail(x, "%s need the broker's ports",
		    c->firewall.nsandbox_subnets > 0 ? "sandbox_subnets" :
		    "sandbox_interfaces");
	}
	return cfg_check_control(x, root);
}

/* ------------------------------------------------------------------ */
/* Public API. */

static struct cfg *
cfg_defaults(void)
{
	static const uint16_t ports[] = { 443, 80 };
	struct cfg *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->ceiling = POL_TIER_OFF;
	c->vsock_port = -1;
	c->socket_mode = 0660;
	c->registries_default = 1;
	c->dns_timeout_ms = 3000;
	c->prompt_timeout_s = 90;
	c->prompt_deny_quiet_s = 60;
	c->events_ring = 1024;
	c->events_max_pending = 262144;
	c->events_heartbeat_s = 15;
	c->max_head = 32768;
	c->max_line = 8192;
	c->max_headers = 100;
	c->head_timeout_ms = 10000;
	c->idle_timeout_s = 300;
	c->connect_timeout_ms = 10000;
	c->max_conns_per_session = 256;
	c->max_conns_total = 4096;
	c->max_grants_per_session = 256;
	c->max_refusals_per_conn = 100;
	c->log_refusals_per_s = 20;
	c->log_refusal_burst = 100;
	c->log_min_free_bytes = 64 * 1048576;
	c->tunnel_buffer = 256 * 1024;
	c->drain_timeout_s = 10;
	c->sni_check = 1;
	c->sni_timeout_ms = 5000;
	c->runtime_dir = strdup("/run/sluice");
	c->log_path = strdup("/var/log/sluice/connections.jsonl");
	c->state_file = strdup("/var/lib/sluice/state.json");
	c->user = strdup("sluice");
	c->control.socket = strdup("/run/sluice/control.sock");
	c->control.socket_mode = 0660;
	c->control.max_body = 65536;
	c->webhook.timeout_ms = 5000;
	c->firewall.table = strdup("sluice");
	c->firewall.uid = -1;
	c->ports_registries = malloc(sizeof(ports));
	c->ports_public = malloc(sizeof(ports));
	c->sni_ports = malloc(sizeof(ports[0]));
	if (c->runtime_dir == NULL || c->log_path == NULL ||
	    c->state_file == NULL || c->user == NULL ||
	    c->control.socket == NULL ||
	    c->ports_registries == NULL || c->ports_public == NULL ||
	    c->sni_ports == NULL || c->firewall.table == NULL) {
		cfg_free(c);
		return NULL;
	}
	memcpy(c->ports_registries, ports, sizeof(ports));
	memcpy(c->ports_public, ports, sizeof(ports));
	c->nports_registries = c->nports_public = 2;
	c->sni_ports[0] = 443;
	c->nsni_ports = 1;
	return c;
}

static void
strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void
cfg_free(struct cfg *c)
{
	size_t i;

	if (c == NULL)
		return;
	free(c->source_path);
	free(c->runtime_dir);
	free(c->user);
	for (i = 0; i < c->ntenants; i++)
		free(c->tenants[i].name);
	free(c->tenants);
	strv_free(c->listen_tcp, c->nlisten_tcp);
	strv_free(c->listen_transparent, c->nlisten_transparent);
	free(c->socket_group);
	for (i = 0; i < c->nsessions; i++) {
		free(c->sessions[i].id);
		free(c->sessions[i].tenant);
		free(c->sessions[i].user);
		free(c->sessions[i].socket);
		free(c->sessions[i].source);
	}
	free(c->sessions);
	strv_free(c->registries, c->nregistries);
	free(c->ports_registries);
	free(c->ports_public);
	free(c->sni_ports);
	free(c->firewall.table);
	strv_free(c->firewall.sandbox_subnets, c->firewall.nsandbox_subnets);
	strv_free(c->firewall.sandbox_interfaces,
	    c->firewall.nsandbox_interfaces);
	free(c->firewall.broker_ports);
	strv_free(c->allow_cidrs, c->nallow_cidrs);
	strv_free(c->deny_cidrs, c->ndeny_cidrs);
	strv_free(c->deny_hosts, c->ndeny_hosts);
	strv_free(c->dns_servers, c->ndns_servers);
	for (i = 0; i < c->ndns_hosts; i++) {
		free(c->dns_hosts[i].name);
		free(c->dns_hosts[i].addrs);
	}
	free(c->dns_hosts);
	free(c->log_path);
	free(c->log_mac_key_file);
	free(c->state_file);
	free(c->control.socket);
	free(c->control.socket_group);
	for (i = 0; i <= CFG_ROLE_ADMIN; i++) {
		free(c->control.uids[i].ids);
		free(c->control.gids[i].ids);
	}
	free(c->control.tcp);
	free(c->control.tls_cert);
	free(c->control.tls_key);
	free(c->control.client_ca);
	for (i = 0; i < c->control.ntokens; i++) {
		free(c->control.tokens[i].name);
		free(c->control.tokens[i].token_file);
	}
	free(c->control.tokens);
	free(c->webhook.url);
	free(c->webhook.host);
	free(c->webhook.path);
	free(c->webhook.secret_file);
	free(c->webhook.ca_file);
	for (i = 0; i < c->webhook.nhosts; i++) {
		free(c->webhook.hosts[i].name);
		free(c->webhook.hosts[i].addrs);
	}
	free(c->webhook.hosts);
	free(c);
}

static void
err_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
err_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void
syntax_error(struct cfg_ctx *x, const json_error_t *je)
{
	struct cfg_pel path[WALK_MAX];
	const char *at;
	size_t n, pos = je->position > 0 ? (size_t)je->position : 0;
	char msg[JSON_ERROR_TEXT_LENGTH + 1];

	/* jansson's text can quote input bytes; keep the message printable. */
	n = 0;
	bputs_shown(msg, sizeof(msg), &n, je->text, strnlen(je->text,
	    sizeof(je->text)), sizeof(msg));
	at = walk_until(x->text, x->len, pos, path, &n);
	err_write(x, at, path, n, msg);
}

struct cfg *
cfg_load_buffer(const char *buf, size_t len, const char *name, char *err,
    size_t errlen)
{
	struct cfg_ctx x;
	json_error_t je;
	json_t *root = NULL;
	struct cfg *c;

	memset(&x, 0, sizeof(x));
	x.name = name != NULL ? name : "<buffer>";
	x.text = buf != NULL ? buf : "";
	x.len = buf != NULL ? len : 0;
	x.err = err;
	x.errlen = errlen;
	if ((c = x.c = cfg_defaults()) == NULL ||
	    (x.trial = pol_config_new()) == NULL) {
		err_set(err, errlen, "%s: out of memory", x.name);
		goto fail;
	}
	root = json_loadb(x.text, x.len, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL) {
		syntax_error(&x, &je);
		goto fail;
	}
	if (walk_object(&x, root, root_keys, c) != 0 ||
	    cfg_cross_check(&x, root) != 0)
		goto fail;
	json_decref(root);
	pol_config_free(x.trial);
	return c;
fail:
	json_decref(root);
	pol_config_free(x.trial);
	cfg_free(c);
	return NULL;
}

static char *
read_file(const char *path, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	size_t have = 0;
	ssize_t r;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		err_set(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		err_set(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	if ((uintmax_t)st.st_size > CFG_FILE_MAX) {
		err_set(err, errlen, "%s: larger than %u bytes", path,
		    CFG_FILE_MAX);
		goto fail;
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		err_set(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	/* The file may shrink or grow while read; take what is there up
	 * to the size seen. */
	while (have < (size_t)st.st_size) {
		r = read(fd, buf + have, (size_t)st.st_size - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err_set(err, errlen, "%s: %s", path, strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		have += (size_t)r;
	}
	close(fd);
	buf[have] = '\0';
	*len = have;
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

struct cfg *
cfg_load(const char *path, char *err, size_t errlen)
{
	struct cfg *c;
	char *text;
	size_t len;

	if (path == NULL) {
		if ((c = cfg_defaults()) == NULL)
			err_set(err, errlen, "out of memory");
		return c;
	}
	if ((text = read_file(path, &len, err, errlen)) == NULL)
		return NULL;
	c = cfg_load_buffer(text, len, path, err, errlen);
	free(text);
	if (c != NULL && (c->source_path = strdup(path)) == NULL) {
		err_set(err, errlen, "%s: out of memory", path);
		cfg_free(c);
		return NULL;
	}
	return c;
}

/* ------------------------------------------------------------------ */
/* Dump. */

/* jansson's setters steal the value and fail on NULL; count failures. */
static void
jset(json_t *o, const char *key, json_t *v, int *bad)
{
	if (v == NULL || json_object_set_new(o, key, v) != 0)
		*bad = 1;
}

static void
jpush(json_t *a, json_t *v, int *bad)
{
	if (v == NULL || json_array_append_new(a, v) != 0)
		*bad = 1;
}

static json_t *
jstrv(char *const *v, size_t n, int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < n; i++)
		jpush(a, json_string(v[i]), bad);
	return a;
}

static json_t *
jports(const uint16_t *p, size_t n, int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < n; i++)
		jpush(a, json_integer(p[i]), bad);
	return a;
}

static json_t *
jobj(int *bad)
{
	json_t *o = json_object();

	if (o == NULL)
		*bad = 1;
	return o;
}

static void
dump_sessions(const struct cfg *c, json_t *root, int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return;
	}
	for (i = 0; i < c->nsessions; i++) {
		const struct cfg_session *s = &c->sessions[i];
		json_t *o = jobj(bad);

		if (o == NULL)
			break;
		jset(o, "id", json_string(s->id), bad);
		jset(o, "tenant", json_string(s->tenant ? s->tenant : ""), bad);
		jset(o, "user", json_string(s->user ? s->user : ""), bad);
		jset(o, "tier", json_string(pol_tier_name(s->tier)), bad);
		if (s->socket != NULL)
			jset(o, "socket", json_string(s->socket), bad);
		if (s->source != NULL)
			jset(o, "source", json_string(s->source), bad);
		if (s->vsock_cid >= 0)
			jset(o, "vsock_cid", json_integer(s->vsock_cid), bad);
		jpush(a, o, bad);
	}
	jset(root, "sessions", a, bad);
}

static json_t *
jhostmap(const struct cfg_hostmap *m, size_t n, int *bad)
{
	json_t *hosts = jobj(bad);
	char buf[64];
	size_t i, j;

	for (i = 0; hosts != NULL && i < n; i++) {
		json_t *a = json_array();

		if (a == NULL) {
			*bad = 1;
			break;
		}
		for (j = 0; j < m[i].naddrs; j++)
			jpush(a, json_string(pol_addr_format(&m[i].addrs[j],
			    buf, sizeof(buf))), bad);
		jset(hosts, m[i].name, a, bad);
	}
	return hosts;
}

static void
dump_dns(const struct cfg *c, json_t *root, int *bad)
{
	json_t *dns = jobj(bad);
	json_t *hosts = jhostmap(c->dns_hosts, c->ndns_hosts, bad);

	if (dns != NULL) {
		jset(dns, "servers", jstrv(c->dns_servers, c->ndns_servers,
		    bad), bad);
		jset(dns, "hosts", hosts, bad);
		jset(dns, "timeout_ms", json_integer(c->dns_timeout_ms), bad);
	} else {
		json_decref(hosts);
	}
	jset(root, "dns", dns, bad);
}

static json_t *
jids(const struct cfg_idlist *l, int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < l->n; i++)
		jpush(a, json_integer(l->ids[i]), bad);
	return a;
}

static json_t *
jopt(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}

/* The secret itself is never in the configuration, only its file. */
static void
dump_webhook(const struct cfg *c, json_t *root, int *bad)
{
	const struct cfg_webhook *w = &c->webhook;
	json_t *o = jobj(bad);

	if (o != NULL) {
		jset(o, "url", jopt(w->url), bad);
		jset(o, "secret_file", jopt(w->secret_file), bad);
		jset(o, "ca_file", jopt(w->ca_file), bad);
		jset(o, "timeout_ms", json_integer(w->timeout_ms), bad);
		jset(o, "hosts", jhostmap(w->hosts, w->nhosts, bad), bad);
	}
	jset(root, "webhook", o, bad);
}

static void
dump_firewall(const struct cfg *c, json_t *root, int *bad)
{
	const struct cfg_firewall *f = &c->firewall;
	json_t *o = jobj(bad);

	if (o != NULL) {
		jset(o, "enabled", json_boolean(f->enabled), bad);
		jset(o, "table", json_string(f->table), bad);
		jset(o, "uid", f->uid < 0 ? json_null() :
		    json_integer((json_int_t)f->uid), bad);
		jset(o, "sandbox_subnets", jstrv(f->sandbox_subnets,
		    f->nsandbox_subnets, bad), bad);
		jset(o, "sandbox_interfaces", jstrv(f->sandbox_interfaces,
		    f->nsandbox_interfaces, bad), bad);
		jset(o, "broker_ports", jports(f->broker_ports,
		    f->nbroker_ports, bad), bad);
	}
	jset(root, "firewall", o, bad);
}

static void
dump_control(const struct cfg *c, json_t *root, int *bad)
{
	const struct cfg_control *k = &c->control;
	json_t *o = jobj(bad), *toks = json_array();
	char mode[8];
	size_t i;

	if (o == NULL || toks == NULL) {
		*bad = 1;
		json_decref(o);
		json_decref(toks);
		return;
	}
	snprintf(mode, sizeof(mode), "%04o", k->socket_mode & 0777);
	jset(o, "socket", json_string(k->socket), bad);
	jset(o, "socket_mode", json_string(mode), bad);
	jset(o, "socket_group", jopt(k->socket_group), bad);
	jset(o, "admin_uids", jids(&k->uids[CFG_ROLE_ADMIN], bad), bad);
	jset(o, "admin_gids", jids(&k->gids[CFG_ROLE_ADMIN], bad), bad);
	jset(o, "app_uids", jids(&k->uids[CFG_ROLE_APP], bad), bad);
	jset(o, "app_gids", jids(&k->gids[CFG_ROLE_APP], bad), bad);
	jset(o, "auditor_uids", jids(&k->uids[CFG_ROLE_AUDITOR], bad), bad);
	jset(o, "auditor_gids", jids(&k->gids[CFG_ROLE_AUDITOR], bad), bad);
	jset(o, "tcp", jopt(k->tcp), bad);
	jset(o, "tls_cert", jopt(k->tls_cert), bad);
	jset(o, "tls_key", jopt(k->tls_key), bad);
	jset(o, "client_ca", jopt(k->client_ca), bad);
	for (i = 0; i < k->ntokens; i++)
		jpush(toks, json_pack("{s:s,s:s,s:s}",
		    "name", k->tokens[i].name,
		    "role", cfg_role_name(k->tokens[i].role),
		    "token_file", k->tokens[i].token_file), bad);
	jset(o, "tokens", toks, bad);
	jset(o, "max_body", json_integer((json_int_t)k->max_body), bad);
	jset(root, "control", o, bad);
}

static json_t *
dump_tree(const struct cfg *c, int *bad)
{
	json_t *root = jobj(bad), *o;
	char mode[8];
	size_t i;

	if (root == NULL)
		return NULL;
	jset(root, "runtime_dir", json_string(c->runtime_dir), bad);
	jset(root, "state_file", json_string(c->state_file), bad);
	jset(root, "user", json_string(c->user), bad);
	jset(root, "ceiling", json_string(pol_tier_name(c->ceiling)), bad);
	if ((o = jobj(bad)) != NULL) {
		for (i = 0; i < c->ntenants; i++) {
			json_t *t = json_pack("{s:s}", "ceiling",
			    pol_tier_name(c->tenants[i].ceiling));

			jset(o, c->tenants[i].name, t, bad);
		}
	}
	jset(root, "tenants", o, bad);

	if ((o = jobj(bad)) != NULL) {
		snprintf(mode, sizeof(mode), "%04o", c->socket_mode & 0777);
		jset(o, "tcp", jstrv(c->listen_tcp, c->nlisten_tcp, bad), bad);
		jset(o, "transparent", jstrv(c->listen_transparent,
		    c->nlisten_transparent, bad), bad);
		jset(o, "vsock_port", json_integer(c->vsock_port), bad);
		jset(o, "socket_mode", json_string(mode), bad);
		jset(o, "socket_group", c->socket_group != NULL ?
		    json_string(c->socket_group) : json_null(), bad);
	}
	jset(root, "listen", o, bad);
	dump_sessions(c, root, bad);

	/* The built-in list lives in policy/; null names it. */
	jset(root, "registries", c->registries_default ? json_null() :
	    jstrv(c->registries, c->nregistries, bad), bad);
	if ((o = jobj(bad)) != NULL) {
		jset(o, "registries", jports(c->ports_registries,
		    c->nports_registries, bad), bad);
		jset(o, "public", jports(c->ports_public, c->nports_public,
		    bad), bad);
	}
	jset(root, "ports", o, bad);
	jset(root, "allow_cidrs", jstrv(c->allow_cidrs, c->nallow_cidrs, bad),
	    bad);
	jset(root, "deny_cidrs", jstrv(c->deny_cidrs, c->ndeny_cidrs, bad),
	    bad);
	jset(root, "deny_hosts", jstrv(c->deny_hosts, c->ndeny_hosts, bad),
	    bad);
	dump_dns(c, root, bad);

	jset(root, "log", json_pack("{s:s,s:i,s:i,s:I,s:o}", "path", c->log_path,
	    "refusals_per_s", c->log_refusals_per_s,
	    "refusal_burst", c->log_refusal_burst,
	    "min_free_bytes", (json_int_t)c->log_min_free_bytes,
	    "mac_key_file", jopt(c->log_mac_key_file)), bad);
	jset(root, "prompt", json_pack("{s:i,s:i}",
	    "timeout_s", c->prompt_timeout_s,
	    "deny_quiet_s", c->prompt_deny_quiet_s), bad);
	jset(root, "events", json_pack("{s:I,s:I,s:i}",
	    "ring", (json_int_t)c->events_ring,
	    "max_pending", (json_int_t)c->events_max_pending,
	    "heartbeat_s", c->events_heartbeat_s), bad);
	jset(root, "limits", json_pack("{s:I,s:I,s:I,s:i,s:i,s:i,s:i,s:i,s:i,s:i,"
	    "s:I,s:i}",
	    "max_head", (json_int_t)c->max_head,
	    "max_line", (json_int_t)c->max_line,
	    "max_headers", (json_int_t)c->max_headers,
	    "head_timeout_ms", c->head_timeout_ms,
	    "idle_timeout_s", c->idle_timeout_s,
	    "connect_timeout_ms", c->connect_timeout_ms,
	    "max_conns_per_session", c->max_conns_per_session,
	    "max_conns_total", c->max_conns_total,
	    "max_grants_per_session", c->max_grants_per_session,
	    "max_refusals_per_conn", c->max_refusals_per_conn,
	    "tunnel_buffer", (json_int_t)c->tunnel_buffer,
	    "drain_timeout_s", c->drain_timeout_s), bad);
	jset(root, "tls", json_pack("{s:b,s:i,s:o}",
	    "sni_check", c->sni_check,
	    "sni_timeout_ms", c->sni_timeout_ms,
	    "sni_ports", jports(c->sni_ports, c->nsni_ports, bad)), bad);
	dump_control(c, root, bad);
	dump_webhook(c, root, bad);
	dump_firewall(c, root, bad);
	return root;
}

char *
cfg_dump(const struct cfg *c)
{
	json_t *root;
	char *text = NULL, *out;
	size_t n;
	int bad = 0;

	if (c == NULL)
		return NULL;
	root = dump_tree(c, &bad);
	if (root != NULL && !bad)
		text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (text == NULL)
		return NULL;
	/* A trailing newline makes --print-config output a proper file. */
	n = strlen(text);
	if ((out = realloc(text, n + 2)) == NULL) {
		free(text);
		return NULL;
	}
	out[n] = '\n';
	out[n + 1] = '\0';
	return out;
}

/* ------------------------------------------------------------------ */

struct pol_config *
cfg_build_policy(const struct cfg *c, char *err, size_t errlen)
{
	struct pol_config *p = pol_config_new();
	const char *what = "out of memory";
	size_t i;

	if (p == NULL)
		goto fail;
	if (c->registries_default) {
		if (pol_config_add_default_registries(p) != 0) {
			what = "built-in registries rejected";
			goto fail;
		}
	}
	for (i = 0; !c->registries_default && i < c->nregistries; i++) {
		if (pol_config_add_registry(p, c->registries[i]) != 0) {
			what = "registries: entry rejected";
			goto fail;
		}
	}
	if (pol_config_set_ports(p, POL_TIER_REGISTRIES, c->ports_registries,
	    c->nports_registries) != 0 ||
	    pol_config_set_ports(p, POL_TIER_PUBLIC, c->ports_public,
	    c->nports_public) != 0) {
		what = "ports rejected";
		goto fail;
	}
	for (i = 0; i < c->nallow_cidrs; i++)
		if (pol_config_add_cidr(p, c->allow_cidrs[i], 1) != 0) {
			what = "allow_cidrs: entry rejected";
			goto fail;
		}
	for (i = 0; i < c->ndeny_cidrs; i++)
		if (pol_config_add_cidr(p, c->deny_cidrs[i], 0) != 0) {
			what = "deny_cidrs: entry rejected";
			goto fail;
		}
	for (i = 0; i < c->ndeny_hosts; i++)
		if (pol_config_add_deny_host(p, c->deny_hosts[i]) != 0) {
			what = "deny_hosts: entry rejected";
			goto fail;
		}
	return p;
fail:
	err_set(err, errlen, "%s: %s", c->source_path != NULL ?
	    c->source_path : "configuration", what);
	pol_config_free(p);
	return NULL;
}
