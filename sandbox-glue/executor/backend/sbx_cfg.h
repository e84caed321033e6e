/*
 * sbx_cfg.h: the parsers of sluice-run, kept apart from the CLI so that
 * each has a fuzz harness (tests/fuzz/fuzz_runcfg.c) and unit tests:
 * its JSON configuration, its per-chat record files (struct sbx_rec),
 * the answers of sluiced's control API, and the checks and escaping of
 * the names it is given (chat, tenant, user).
 *
 * Error idiom as in sbx.h: 0 on success, -1 with a one-line message in
 * err.  Nothing here prints or exits.
 */
#ifndef SLUICE_SBX_CFG_H
#define SLUICE_SBX_CFG_H

#include <stddef.h>

#include <jansson.h>

#include "sandbox-glue/executor/backend/sbx.h"

#define SBX_CFG_FILE_MAX	(1 << 20)	/* bytes of a config file */
#define SBX_REC_FILE_MAX	(1 << 20)	/* bytes of a record file */
#define SBX_SLOTS_MAX		1024		/* uid ranges of 65536 */

/* sluice-run's settings: defaults, then the configuration file. */
struct sbx_cfg {
	char state_dir[SBX_PATH_MAX];
	char control[SBX_PATH_MAX];
	char shim[SBX_PATH_MAX];
	char backend[16];
	char tier[16];
	long timeout_default, timeout_max;
	long output_cap;
	long max_file_bytes;    /* read: bytes of a file passed on */
	long max_per_tenant, max_per_user, max_total;
	long idle_after, remove_after;
	unsigned long uid_base, slots;
	char cgroups[8];        /* "", "v1", "v2", "off" */
	char workspace_root[SBX_PATH_MAX];      /* --workspace only under it;
	                                         * "": no --workspace */
	struct sbx_limits lim;
	/* images (sbx_image.h) */
	char image_dir[SBX_PATH_MAX];   /* the store */
	char profiles_dir[SBX_PATH_MAX];/* the admin's profiles, searched
	                                 * before the built-in ones */
	char profile[SBX_ID_MAX + 1];   /* of create without --profile */
	char shim_static[SBX_PATH_MAX]; /* the shim bound into images */
	char image_suite[32];           /* "": the host's */
	char image_sources[4096];       /* apt lines, one a line; "": the
	                                 * host's Debian sources */
	char tenant_profiles[4096];     /* "TENANT P1 P2...\n" a line, "*"
	                                 * for any other tenant; "": no
	                                 * restriction */
};

/* The built-in defaults; shim is the installed sluice-shim's path. */
void sbx_cfg_defaults(struct sbx_cfg *c, const char *state_dir,
    const char *control, const char *shim);
/* Apply the JSON configuration text[0..len) (name: for messages) over
 * c.  Unknown keys, wrong types and values out of range are refused, as
 * the daemons' files' are ("NAME:LINE:COL: PATH: what"); on failure c
 * may be partly changed. */
int sbx_cfg_parse(struct sbx_cfg *c, const char *text, size_t len,
    const char *name, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* The same from a file (at most SBX_CFG_FILE_MAX bytes). */
int sbx_cfg_load(struct sbx_cfg *c, const char *path, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

/* 1 when tenant ("" none) may make sandboxes of profile under
 * c->tenant_profiles: its own line, else the "*" line, else (no line
 * for it) not at all; without tenant_profiles, any profile. */
int sbx_cfg_profile_ok(const struct sbx_cfg *c, const char *tenant,
    const char *profile);
/* The same over a table of that form (sluice-execd's). */
int sbx_profile_allowed(const char *tab, const char *tenant,
    const char *profile);
/* tenant_profiles' JSON ({"TENANT" or "*": [profile, ...]}) into such a
 * table of tablen bytes, read at x's path (proxy/lib/config_engine.h:
 * both programs' files are read by that engine); -1 with x's error. */
struct cfg_ctx;
int sbx_tenant_profiles_read(struct cfg_ctx *x, json_t *v, char *tab,
    size_t tablen) SLUICE_MUSTCHECK;

/* The record as saved (new reference) and read back.  sbx_rec_parse
 * refuses what sluice-run could not have written: a string too long for
 * its field (a truncated path would name another file), a bad chat id,
 * negative numbers, a slot out of range. */
json_t *sbx_rec_json(const struct sbx_rec *r);
int sbx_rec_parse(struct sbx_rec *r, const char *text, size_t len,
    char *err, size_t errlen) SLUICE_MUSTCHECK;
int sbx_rec_load(struct sbx_rec *r, const char *path, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

/* 1 when the absolute path is "/", a top-level directory or in one of
 * the system's trees (/bin /boot /dev /etc /lib* /proc /root /sbin /sys
 * /usr): never a workspace nor the root of workspaces. */
int sbx_path_system(const char *path);

/* A chat or tenant id: 1 to max of A-Z a-z 0-9 . _ -, the first a
 * letter or digit. */
int sbx_id_ok(const char *s, size_t max);
/* A user name: valid UTF-8 of at most SBX_USER_MAX bytes without
 * control characters (sluiced refuses C0 and DEL; C1 too here). */
int sbx_user_ok(const char *s);
/* s for one line of a terminal, the one escaping of every text that
 * sluice-run prints: C0, DEL and C1 controls, bidirectional and
 * invisible format characters (U+00AD, U+061C, U+180E, U+200B-U+200F,
 * U+2028-U+202E, U+2060-U+206F, U+FEFF, U+FFF9-U+FFFB, tags), backslash
 * and bytes that are not UTF-8 as \ooo (each byte); cut to fit out (at
 * most 4 bytes of out per byte of s, and one for the NUL).  _n: the n
 * bytes at s (no NUL among them). */
void sbx_text_safe(const char *s, char *out, size_t outlen);
void sbx_text_safen(const char *s, size_t n, char *out, size_t outlen);

/*
 * sluiced's answers.  sbx_http_split: status and body of a raw HTTP
 * response buf[0..len) (buf NUL-terminated at len); -1 when it is not
 * HTTP or holds a NUL byte.  sbx_broker_msg: the "error" (or its "message") of a JSON error
 * body, or the body, as one safe line.  sbx_broker_socket: the directory of the session's
 * Unix socket from the answer to POST /v1/sessions.  JSON is read as
 * proxy/jsonstrict.h says.
 */
int sbx_http_split(const char *buf, size_t len, int *status,
    const char **body) SLUICE_MUSTCHECK;
const char *sbx_broker_msg(const char *body, char *buf, size_t len);
int sbx_broker_socket(const char *body, char *dir, size_t dirlen,
    char *err, size_t errlen) SLUICE_MUSTCHECK;

#endif /* SLUICE_SBX_CFG_H */
