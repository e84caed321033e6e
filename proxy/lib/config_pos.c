/*
 * config_pos.c: where a JSON path sits in the text, for error messages.
 *
 * jansson keeps no source positions for values, so errors find theirs
 * with a small token walker over the original text.  It only ever reads
 * text jansson has accepted or, for syntax errors, the prefix jansson read
 * before it stopped; on broken text it still ends, with a best guess.
 */
#include "sluice-config.h"

#include <stddef.h>
#include <string.h>

#include "proxy/lib/config-int.h"
#include "proxy/lib/util.h"

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
	struct walk_frame f[CFG_POS_MAX];
	size_t depth;         /* may exceed CFG_POS_MAX: deeper not tracked */
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
	if (w->depth == 0 || w->depth > CFG_POS_MAX)
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
		if (w->depth < CFG_POS_MAX) {
			struct walk_frame *f = &w->f[w->depth];

			memset(f, 0, sizeof(*f));
			f->type = ch == '{' ? W_OBJ : W_ARR;
			f->state = ch == '{' ? S_KEY : S_VALUE;
		}
		w->depth++;
	}
	return 1;
}

static long
hex4(const char *s, const char *end)
{
	long v = 0;
	int i, h;

	if (end - s < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		if ((h = util_hexval((unsigned char)s[i])) < 0)
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

	if (w->path_depth != n || n > CFG_POS_MAX)
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
const char *
cfg_pos_locate(const char *text, size_t len, const struct cfg_pel *path,
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
const char *
cfg_pos_until(const char *text, size_t len, size_t pos,
    struct cfg_pel path[CFG_POS_MAX], size_t *n)
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
	for (i = 0; i < w.depth && i < CFG_POS_MAX; i++) {
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

void
cfg_pos_linecol(const char *text, const char *at, int *line, int *col)
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
