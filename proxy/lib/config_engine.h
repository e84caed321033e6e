/*
 * config_engine.h: the table-driven JSON configuration reader both
 * daemons use (sluiced.json through config_keys.c's rows, sluice-execd's
 * through exec_cfg.c's).  A table of rows (struct cfg_key) says each
 * key's name, kind, field, bounds and default; cfg_walk_object reads an
 * object against it, refusing unknown keys.  Every error is worded one
 * way: "FILE:LINE:COL: PATH: message", the position found in the text
 * (jansson keeps none) by config_pos.c, the path the key's (a.b[2].c).
 */
#ifndef SLUICE_CONFIG_ENGINE_H
#define SLUICE_CONFIG_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "proxy/lib/config.h"

#define CFG_PATH_MAX 8     /* the schema nests three deep */
#define CFG_POS_MAX 32     /* frames the position walker tracks */

/* One step of a JSON path: an object key (key != NULL) or an array index. */
struct cfg_pel {
	const char *key;
	size_t keylen;
	size_t idx;
};

/* One load: the text and its name, where errors go, the path being read
 * (depth may exceed CFG_PATH_MAX: deeper steps are not kept). */
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

/* ---- config_pos.c */

/* Where the value at path starts (or its key, with at_key); NULL if the
 * text has no such path. */
const char *cfg_pos_locate(const char *text, size_t len,
    const struct cfg_pel *path, size_t n, int at_key);
/* For a syntax error at byte offset pos: the start of the token jansson
 * stopped on, and in path[*n] the path it sits at. */
const char *cfg_pos_until(const char *text, size_t len, size_t pos,
    struct cfg_pel path[CFG_POS_MAX], size_t *n);
/* 1-based line and column (in UTF-8 characters) of at in text. */
void cfg_pos_linecol(const char *text, const char *at, int *line, int *col);

/* ---- config_engine.c: rows */

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
	K_PATH,         /* char *, absolute: a path sluiced makes */
	K_FILE,         /* char *: a file name or null (an optional file) */
	K_OPT,          /* char *: a string or null, read by fn */
	K_IDS,          /* struct cfg_idlist */
	K_STRV,         /* char **, count at noff; each string passes check */
	K_PORTS,        /* uint16_t *, count at noff */
	K_HOSTS,        /* struct cfg_hostmap *, count at noff */
	K_OBJ,          /* an object: the rows sub, at base + off */
	K_TENANTS,      /* struct cfg_tenant *, count at noff; each: sub */
	K_SESSIONS,     /* struct cfg_session *, count at noff */
	K_REGISTRIES,   /* char ** in struct cfg, count at noff; null (the
	                 * built-in list) when registries_default */
	K_TOKENS,       /* struct cfg_token *, count at noff; each: sub */
	K_RULES,        /* struct cfg_rule *, count at noff */
	K_FN,           /* read by fn, printed by whoever prints its object */
	K_LONG,         /* long in lo..hi */
	K_U64,          /* uint64_t: the value in lo..hi, stored times mult
	                 * (a size in MiB kept in bytes) */
	K_BUF,          /* char[size]: a string shorter than size ("" too);
	                 * an absolute path with KF_ABS */
};

/* Reads one value at x's path into base; reports its own error. */
typedef int (*key_fn)(struct cfg_ctx *x, json_t *v, void *base);
/* Checks one string of a K_STRV list (and may note it, e.g. in trial). */
typedef int (*str_check)(struct cfg_ctx *x, const char *s);
struct cfg_key;
/* Reads one value into the row's field (base + k->off), for a reader
 * shared by rows of several fields; reports its own error. */
typedef int (*field_fn)(struct cfg_ctx *x, const struct cfg_key *k,
    json_t *v, void *field);

/* KF_LAST: printed after the other keys of its object, where
 * --print-config has always put it (tls.sni_ports) */
#define KF_LAST 1u
/* KF_ABS: a K_BUF holding an absolute path */
#define KF_ABS 2u
/* KF_NULL: a K_BUF that null leaves empty (a key with no default, which
 * --print-config prints as null until it is set) */
#define KF_NULL 4u
/* Flags from KF_OWN up are the table's owner's, for its field_fns. */
#define KF_OWN 0x100u

struct cfg_key {
	const char *name;
	enum cfg_kind kind;
	size_t off;                  /* the field, into base */
	size_t noff;                 /* a list's count, into base */
	long long lo, hi;            /* K_INT, K_SIZE: bounds */
	long long def;               /* default of a number, tier, mode, uid */
	const char *sdef;            /* default of a string (NULL: none) */
	const uint16_t *pdef;        /* K_PORTS default, 0-terminated */
	const struct cfg_key *sub;   /* K_OBJ (its rows at base + off),
	                              * K_TENANTS, K_TOKENS */
	str_check check;             /* K_STRV: each string, or NULL */
	key_fn fn;                   /* reads the value in place of the kind */
	unsigned flags;              /* KF_LAST, KF_ABS, the owner's */
	size_t size;                 /* K_BUF: the buffer's size */
	unsigned long long mult;     /* K_U64: units of the value (0: 1) */
	field_fn rd;                 /* reads the field in place of the kind */
};

/* A load's context: x zeroed, then the text, its name and where errors
 * go. */
void cfg_ctx_init(struct cfg_ctx *x, const char *text, size_t len,
    const char *name, char *err, size_t errlen);
/* Parses x's text (jansson, duplicate keys refused); NULL with x's error
 * ("FILE:LINE:COL: PATH: what jansson says") on a syntax error. */
json_t *cfg_parse_text(struct cfg_ctx *x);

/* Reads object v against the rows keys into base; unknown keys fail. */
int cfg_walk_object(struct cfg_ctx *x, json_t *v, const struct cfg_key *keys,
    void *base) SLUICE_MUSTCHECK;
/* Fills base with the rows' defaults (and of the K_OBJ rows below);
 * -1 when out of memory, base then safe to free. */
int cfg_keys_default(const struct cfg_key *keys, void *base) SLUICE_MUSTCHECK;

/* ---- config_engine.c: errors, at x's current path; all return -1 */

int cfg_fail(struct cfg_ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Points at the key rather than its value (unknown or bad keys). */
int cfg_fail_key(struct cfg_ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cfg_err_write(struct cfg_ctx *x, const char *at,
    const struct cfg_pel *path, size_t n, const char *msg);
/* A string value for a message: quoted, printable, bounded; in buf. */
const char *cfg_shown(const char *s, char *buf, size_t len);
/* Appends printable ASCII of s[0..n) (at most max, then "...") to buf. */
void cfg_bputs_shown(char *buf, size_t len, size_t *at, const char *s,
    size_t n, size_t max);
/* x's path: push a key or an index, pop. */
void cfg_ctx_key(struct cfg_ctx *x, const char *key);
void cfg_ctx_idx(struct cfg_ctx *x, size_t idx);
void cfg_ctx_pop(struct cfg_ctx *x);

/* ---- config_engine.c: value readers; each reports its own error */

int cfg_get_str(struct cfg_ctx *x, json_t *v, const char **out)
    SLUICE_MUSTCHECK;
int cfg_get_int(struct cfg_ctx *x, json_t *v, long long lo, long long hi,
    long long *out) SLUICE_MUSTCHECK;
/* A string or null (NULL); what says what the string is. */
int cfg_get_opt_str(struct cfg_ctx *x, json_t *v, const char *what,
    char **out) SLUICE_MUSTCHECK;
/* An array of strings, each passing check; replaces *out. */
int cfg_get_str_list(struct cfg_ctx *x, json_t *v, str_check check,
    char ***out, size_t *n) SLUICE_MUSTCHECK;
/* A permission mode: "0660" or a number up to 0777. */
int cfg_get_mode(struct cfg_ctx *x, json_t *v, unsigned *out) SLUICE_MUSTCHECK;
/* A string shorter than size into buf[size] ("" too); an absolute
 * path with abs. */
int cfg_get_buf(struct cfg_ctx *x, json_t *v, size_t size, int abs,
    char *buf) SLUICE_MUSTCHECK;
/* Replaces *out with a copy of s. */
int cfg_set_str(struct cfg_ctx *x, const char *s, char **out) SLUICE_MUSTCHECK;
void *cfg_calloc(struct cfg_ctx *x, size_t n, size_t size);

#endif /* SLUICE_CONFIG_ENGINE_H */
