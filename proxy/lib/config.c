/*
 * config.c: load, validate and print sluiced.json.
 *
 * jansson parses; a table per JSON object validates.  jansson keeps no
 * source positions for values, so errors find theirs with a small token
 * walker over the original text (it only ever reads text jansson has
 * accepted, or, for syntax errors, the prefix jansson read before it
 * stopped).
 */
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

/* ------------------------------------------------------------------ */
/* Schema tables. */

/*
 * One row per key.  The kind is the field's type: it says how the value
 * is read (unless fn reads it: a check the kind alone cannot say), what
 * the field holds by default (cfg_keys_default) and how --print-config
 * prints it (dump_value).  Keys of a type of their own are read by fn and
 * printed by hand (K_TENANTS ... K_TOKENS); K_FN rows sit only inside an
 * object printed by hand (a session).
 */
enum cfg_kind {
	K_INT,          /* int in lo..hi */
	K_SIZE,         /* size_t in lo..hi */
	K_BOOL,         /* int, 0 or 1 */
	K_TIER,         /* enum pol_tier */
	K_ROLE,         /* enum cfg_role, read by fn */
	K_MODE,         /* unsigned permission bits: "0660" (or 432) */
	K_UID,          /* int64_t, a uid or null (-1) */
	K_STR,          /* char *, not empty */
	K_PATH,         /* char *, absolute: a directory or file sluiced makes */
	K_FILE,         /* char *: a file name or null (an optional file) */
	K_OPT,          /* char *: a string or null, read by fn */
	K_IDS,          /* struct cfg_idlist */
	K_STRV,         /* char **, count at noff; each string passes check */
	K_PORTS,        /* uint16_t *, count at noff */
	K_HOSTS,        /* struct cfg_hostmap *, count at noff */
	K_OBJ,          /* an object: the rows sub, same base */
	K_TENANTS,      /* struct cfg_tenant *, count at noff; each: sub */
	K_SESSIONS,     /* struct cfg_session *, count at noff */
	K_REGISTRIES,   /* char ** in struct cfg, count at noff; null (the
	                 * built-in list) when registries_default */
	K_TOKENS,       /* struct cfg_token *, count at noff; each: sub */
	K_FN,           /* read by fn, printed by whoever prints its object */
};

struct cfg_key;
typedef int (*key_fn)(struct cfg_ctx *, json_t *, void *base);

/* KF_LAST: printed after the other keys of its object, where
 * --print-config has always put it (tls.sni_ports) */
#define KF_LAST 1u

struct cfg_key {
	const char *name;
	enum cfg_kind kind;
	size_t off;                  /* the field, into base */
	size_t noff;                 /* a list's count, into base */
	long long lo, hi;            /* K_INT, K_SIZE: bounds */
	long long def;               /* default of a number, tier, mode, uid */
	const char *sdef;            /* default of a string (NULL: none) */
	const uint16_t *pdef;        /* K_PORTS default, 0-terminated */
	const struct cfg_key *sub;   /* K_OBJ, K_TENANTS, K_TOKENS */
	str_check check;             /* K_STRV: each string, or NULL */
	key_fn fn;                   /* reads the value in place of the kind */
	unsigned flags;              /* KF_LAST */
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
	size_t *count = (size_t *)(void *)((char *)base + k->noff);
	long long n;

	if (k->fn != NULL)
		return k->fn(x, v, base);
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
	case K_MODE:
		return get_mode(x, v, (unsigned *)(void *)field);
	case K_UID:
		if (json_is_null(v)) {
			*(int64_t *)(void *)field = -1;
			return 0;
		}
		if (get_int(x, v, 0, 0xfffffffeLL, &n) != 0)
			return -1;
		*(int64_t *)(void *)field = n;
		return 0;
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
	case K_IDS:
		return get_id_list(x, v, (struct cfg_idlist *)(void *)field);
	case K_STRV:
		return get_str_list(x, v, k->check, (char ***)(void *)field,
		    count);
	case K_PORTS:
		return get_port_list(x, v, (uint16_t **)(void *)field, count);
	case K_HOSTS:
		return get_hostmap(x, v, (struct cfg_hostmap **)(void *)field,
		    count);
	case K_OBJ:
		return walk_object(x, v, k->sub, base);
	case K_ROLE:
	case K_OPT:
	case K_TENANTS:
	case K_SESSIONS:
	case K_REGISTRIES:
	case K_TOKENS:
	case K_FN:
		break;          /* read by fn */
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

/* Fills base with the defaults of the rows (and of the objects below);
 * lists other than ports start empty, types of their own are left to
 * their owner.  -1 when out of memory (base is then safe to free). */
static int
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
			if (cfg_keys_default(k->sub, base) != 0)
				return -1;
			break;
		case K_IDS:
		case K_STRV:
		case K_HOSTS:
		case K_TENANTS:
		case K_SESSIONS:
		case K_REGISTRIES:
		case K_TOKENS:
		case K_FN:
			break;
		}
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
	{ "ceiling", K_TIER, .off = offsetof(struct cfg_tenant, ceiling) },
	{ .name = NULL }
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
k_socket_group(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return get_opt_str(x, v, "a group name", &c->socket_group);
}

/* Row parts: a field of struct cfg, a list of it and its count, a
 * number's bounds and default. */
#define F(field) .off = offsetof(struct cfg, field)
#define LIST(field, count) F(field), .noff = offsetof(struct cfg, count)
#define NUM(lo_, hi_, def_) .lo = (lo_), .hi = (hi_), .def = (def_)

static const struct cfg_key listen_keys[] = {
	{ "tcp", K_STRV, LIST(listen_tcp, nlisten_tcp), .check = check_listen },
	{ "transparent", K_STRV, LIST(listen_transparent, nlisten_transparent),
	  .fn = k_listen_transparent },
	{ "vsock_port", K_INT, F(vsock_port), .def = -1, .fn = k_vsock_port },
	{ "socket_mode", K_MODE, F(socket_mode), .def = 0660 },
	{ "socket_group", K_OPT, F(socket_group), .fn = k_socket_group },
	{ .name = NULL }
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

/* printed by hand (dump_sessions): some keys only when given */
static const struct cfg_key session_keys[] = {
	{ "id", K_FN, .fn = k_sess_id },
	{ "tenant", K_FN, .fn = k_sess_tenant },
	{ "user", K_FN, .fn = k_sess_user },
	{ "tier", K_TIER, .off = offsetof(struct cfg_session, tier) },
	{ "socket", K_FN, .fn = k_sess_socket },
	{ "source", K_FN, .fn = k_sess_source },
	{ "vsock_cid", K_FN, .fn = k_sess_cid },
	{ .name = NULL }
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

static const uint16_t web_ports[] = { 443, 80, 0 };
static const uint16_t tls_ports[] = { 443, 0 };

static const struct cfg_key ports_keys[] = {
	{ "registries", K_PORTS, LIST(ports_registries, nports_registries),
	  .pdef = web_ports },
	{ "public", K_PORTS, LIST(ports_public, nports_public),
	  .pdef = web_ports },
	{ .name = NULL }
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

static const struct cfg_key dns_keys[] = {
	{ "servers", K_STRV, LIST(dns_servers, ndns_servers),
	  .check = check_dns_server },
	{ "hosts", K_HOSTS, LIST(dns_hosts, ndns_hosts) },
	{ "timeout_ms", K_INT, F(dns_timeout_ms), NUM(1, 600000, 3000) },
	{ .name = NULL }
};

static const struct cfg_key log_keys[] = {
	{ "path", K_STR, F(log_path),
	  .sdef = "/var/log/sluice/connections.jsonl" },
	{ .name = NULL }
};

static const struct cfg_key prompt_keys[] = {
	{ "timeout_s", K_INT, F(prompt_timeout_s), NUM(1, 86400, 90) },
	{ "deny_quiet_s", K_INT, F(prompt_deny_quiet_s), NUM(0, 86400, 60) },
	{ .name = NULL }
};

static const struct cfg_key events_keys[] = {
	{ "ring", K_SIZE, F(events_ring), NUM(16, 100000, 1024) },
	{ "max_pending", K_SIZE, F(events_max_pending),
	  NUM(4096, 64 * 1048576, 256 * 1024) },
	{ "heartbeat_s", K_INT, F(events_heartbeat_s), NUM(1, 3600, 15) },
	{ .name = NULL }
};

static const struct cfg_key limits_keys[] = {
	{ "max_head", K_SIZE, F(max_head), NUM(1024, 1048576, 32768) },
	{ "max_line", K_SIZE, F(max_line), NUM(256, 1048576, 8192) },
	{ "max_headers", K_SIZE, F(max_headers), NUM(1, 10000, 100) },
	{ "head_timeout_ms", K_INT, F(head_timeout_ms),
	  NUM(100, 600000, 10000) },
	{ "idle_timeout_s", K_INT, F(idle_timeout_s), NUM(1, 86400, 300) },
	{ "connect_timeout_ms", K_INT, F(connect_timeout_ms),
	  NUM(100, 600000, 10000) },
	{ "max_conns_per_session", K_INT, F(max_conns_per_session),
	  NUM(1, 1000000, 256) },
	{ "max_conns_total", K_INT, F(max_conns_total),
	  NUM(1, 1000000, 4096) },
	{ "tunnel_buffer", K_SIZE, F(tunnel_buffer),
	  NUM(4096, 64 * 1048576, 256 * 1024) },
	{ "drain_timeout_s", K_INT, F(drain_timeout_s), NUM(0, 3600, 10) },
	{ .name = NULL }
};

static const struct cfg_key tls_keys[] = {
	{ "sni_check", K_BOOL, F(sni_check), .def = 1 },
	{ "sni_ports", K_PORTS, LIST(sni_ports, nsni_ports), .pdef = tls_ports,
	  .flags = KF_LAST },
	{ "sni_timeout_ms", K_INT, F(sni_timeout_ms), NUM(100, 600000, 5000) },
	{ .name = NULL }
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
	{ "name", K_STR, offsetof(struct cfg_token, name), .fn = k_tok_name },
	{ "role", K_ROLE, offsetof(struct cfg_token, role), .fn = k_tok_role },
	{ "token_file", K_STR, .off = offsetof(struct cfg_token, token_file) },
	{ .name = NULL }
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

/* The secret itself is never in the configuration, only its file. */
static const struct cfg_key webhook_keys[] = {
	{ "url", K_OPT, F(webhook.url), .fn = k_wh_url },
	{ "secret_file", K_FILE, F(webhook.secret_file) },
	{ "ca_file", K_FILE, F(webhook.ca_file) },
	{ "timeout_ms", K_INT, F(webhook.timeout_ms), NUM(100, 600000, 5000) },
	{ "hosts", K_HOSTS, LIST(webhook.hosts, webhook.nhosts) },
	{ .name = NULL }
};

static const struct cfg_key control_keys[] = {
	{ "socket", K_PATH, F(control.socket),
	  .sdef = "/run/sluice/control.sock", .fn = k_ctl_socket },
	{ "socket_mode", K_MODE, F(control.socket_mode), .def = 0660 },
	{ "socket_group", K_OPT, F(control.socket_group),
	  .fn = k_ctl_socket_group },
	{ "admin_uids", K_IDS, F(control.uids[CFG_ROLE_ADMIN]) },
	{ "admin_gids", K_IDS, F(control.gids[CFG_ROLE_ADMIN]) },
	{ "app_uids", K_IDS, F(control.uids[CFG_ROLE_APP]) },
	{ "app_gids", K_IDS, F(control.gids[CFG_ROLE_APP]) },
	{ "auditor_uids", K_IDS, F(control.uids[CFG_ROLE_AUDITOR]) },
	{ "auditor_gids", K_IDS, F(control.gids[CFG_ROLE_AUDITOR]) },
	{ "tcp", K_OPT, F(control.tcp), .fn = k_ctl_tcp },
	{ "tls_cert", K_FILE, F(control.tls_cert) },
	{ "tls_key", K_FILE, F(control.tls_key) },
	{ "client_ca", K_FILE, F(control.client_ca) },
	{ "tokens", K_TOKENS, LIST(control.tokens, control.ntokens),
	  .sub = token_keys, .fn = k_ctl_tokens },
	{ "max_body", K_SIZE, F(control.max_body),
	  NUM(1024, 16 * 1048576, 65536) },
	{ .name = NULL }
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
check_ifname(struct cfg_ctx *x, const char *s)
{
	char why[120], b[80];

	if (fw_ifname_check(s, why, sizeof(why)) != 0)
		return cfg_fail(x, "bad interface name %s: %s",
		    shown(s, b, sizeof(b)), why);
	return 0;
}

static const struct cfg_key firewall_keys[] = {
	{ "enabled", K_BOOL, F(firewall.enabled), .def = 0 },
	{ "table", K_STR, F(firewall.table), .sdef = "sluice",
	  .fn = k_fw_table },
	{ "uid", K_UID, F(firewall.uid), .def = -1 },
	{ "sandbox_subnets", K_STRV,
	  LIST(firewall.sandbox_subnets, firewall.nsandbox_subnets),
	  .check = check_subnet },
	{ "sandbox_interfaces", K_STRV,
	  LIST(firewall.sandbox_interfaces, firewall.nsandbox_interfaces),
	  .check = check_ifname },
	{ "broker_ports", K_PORTS,
	  LIST(firewall.broker_ports, firewall.nbroker_ports) },
	{ .name = NULL }
};

static const struct cfg_key root_keys[] = {
	{ "runtime_dir", K_PATH, F(runtime_dir), .sdef = "/run/sluice" },
	{ "state_file", K_PATH, F(state_file),
	  .sdef = "/var/lib/sluice/state.json" },
	{ "user", K_STR, F(user), .sdef = "sluice", .fn = k_user },
	{ "ceiling", K_TIER, F(ceiling), .def = POL_TIER_OFF },
	{ "tenants", K_TENANTS, LIST(tenants, ntenants), .sub = tenant_keys,
	  .fn = k_tenants },
	{ "listen", K_OBJ, .sub = listen_keys },
	{ "sessions", K_SESSIONS, LIST(sessions, nsessions), .fn = k_sessions },
	{ "registries", K_REGISTRIES, LIST(registries, nregistries),
	  .fn = k_registries },
	{ "ports", K_OBJ, .sub = ports_keys },
	{ "allow_cidrs", K_STRV, LIST(allow_cidrs, nallow_cidrs),
	  .check = check_allow_cidr },
	{ "deny_cidrs", K_STRV, LIST(deny_cidrs, ndeny_cidrs),
	  .check = check_deny_cidr },
	{ "deny_hosts", K_STRV, LIST(deny_hosts, ndeny_hosts),
	  .check = check_deny_host },
	{ "dns", K_OBJ, .sub = dns_keys },
	{ "log", K_OBJ, .sub = log_keys },
	{ "prompt", K_OBJ, .sub = prompt_keys },
	{ "events", K_OBJ, .sub = events_keys },
	{ "limits", K_OBJ, .sub = limits_keys },
	{ "tls", K_OBJ, .sub = tls_keys },
	{ "control", K_OBJ, .sub = control_keys },
	{ "webhook", K_OBJ, .sub = webhook_keys },
	{ "firewall", K_OBJ, .sub = firewall_keys },
	{ .name = NULL }
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

/* The rows' defaults; the built-in registry list is policy/'s. */
static struct cfg *
cfg_defaults(void)
{
	struct cfg *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	if (cfg_keys_default(root_keys, c) != 0) {
		cfg_free(c);
		return NULL;
	}
	c->registries_default = 1;
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

static json_t *dump_keys(const struct cfg_key *keys, const void *base,
    int *bad);

/* Printed by hand: socket, source and vsock_cid only when given. */
static json_t *
dump_sessions(const struct cfg_session *ss, size_t n, int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < n; i++) {
		const struct cfg_session *s = &ss[i];
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
	return a;
}

/* {"name": {tenant's rows}} */
static json_t *
dump_tenants(const struct cfg_key *k, const struct cfg_tenant *t, size_t n,
    int *bad)
{
	json_t *o = jobj(bad);
	size_t i;

	for (i = 0; o != NULL && i < n; i++)
		jset(o, t[i].name, dump_keys(k->sub, &t[i], bad), bad);
	return o;
}

/* [{token's rows}]: the secret stays in its file */
static json_t *
dump_tokens(const struct cfg_key *k, const struct cfg_token *t, size_t n,
    int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < n; i++)
		jpush(a, dump_keys(k->sub, &t[i], bad), bad);
	return a;
}

/* A list row's count. */
static size_t
row_count(const struct cfg_key *k, const void *base)
{
	return *(const size_t *)(const void *)((const char *)base + k->noff);
}

/* One row's value; NULL (counted by jset) when it cannot be printed. */
static json_t *
dump_value(const struct cfg_key *k, const void *base, int *bad)
{
	const char *field = (const char *)base + k->off;
	char mode[8];
	int64_t id;

	switch (k->kind) {
	case K_INT:
		return json_integer(*(const int *)(const void *)field);
	case K_SIZE:
		return json_integer((json_int_t)*(const size_t *)(const void *)
		    field);
	case K_BOOL:
		return json_boolean(*(const int *)(const void *)field);
	case K_TIER:
		return json_string(pol_tier_name(*(const enum pol_tier *)
		    (const void *)field));
	case K_ROLE:
		return json_string(cfg_role_name(*(const enum cfg_role *)
		    (const void *)field));
	case K_MODE:
		snprintf(mode, sizeof(mode), "%04o",
		    *(const unsigned *)(const void *)field & 0777);
		return json_string(mode);
	case K_UID:
		id = *(const int64_t *)(const void *)field;
		return id < 0 ? json_null() : json_integer((json_int_t)id);
	case K_STR:
	case K_PATH:
		return json_string(*(char *const *)(const void *)field);
	case K_FILE:
	case K_OPT:
		return jopt(*(char *const *)(const void *)field);
	case K_IDS:
		return jids((const struct cfg_idlist *)(const void *)field,
		    bad);
	case K_STRV:
		return jstrv(*(char **const *)(const void *)field,
		    row_count(k, base), bad);
	case K_PORTS:
		return jports(*(uint16_t *const *)(const void *)field,
		    row_count(k, base), bad);
	case K_HOSTS:
		return jhostmap(*(struct cfg_hostmap *const *)
		    (const void *)field, row_count(k, base), bad);
	case K_OBJ:
		return dump_keys(k->sub, base, bad);
	case K_TENANTS:
		return dump_tenants(k, *(struct cfg_tenant *const *)
		    (const void *)field, row_count(k, base), bad);
	case K_SESSIONS:
		return dump_sessions(*(struct cfg_session *const *)
		    (const void *)field, row_count(k, base), bad);
	case K_REGISTRIES:
		/* The built-in list lives in policy/; null names it. */
		return ((const struct cfg *)base)->registries_default ?
		    json_null() : jstrv(*(char **const *)(const void *)field,
		    row_count(k, base), bad);
	case K_TOKENS:
		return dump_tokens(k, *(struct cfg_token *const *)
		    (const void *)field, row_count(k, base), bad);
	case K_FN:
		break;
	}
	return NULL;
}

/* An object of the rows in table order, KF_LAST rows last. */
static json_t *
dump_keys(const struct cfg_key *keys, const void *base, int *bad)
{
	const struct cfg_key *k;
	json_t *o = jobj(bad);
	unsigned last;

	for (last = 0; o != NULL && last < 2; last++)
		for (k = keys; k->name != NULL; k++)
			if (((k->flags & KF_LAST) != 0) == last)
				jset(o, k->name, dump_value(k, base, bad), bad);
	return o;
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
	root = dump_keys(root_keys, c, &bad);
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
