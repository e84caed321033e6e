/*
 * exec_os-int.h: the OpenSandbox-compatible API of sluice-execd
 * (DESIGN.md, "The OpenSandbox-compatible API"; the protocol in
 * ../shared/research/opensandbox-api.md).  Included only inside
 * sandbox-glue/executor/execd/ (and by tests/fuzz/fuzz_osmp.c).
 *
 * The files, bottom up (each calls only those above it and the
 * daemon's lower files, execd-int.h):
 *
 *   exec_os_mp.c     multipart/form-data (pure: fuzz_osmp drives it)
 *   exec_os_cfg.c    the "opensandbox" configuration block
 *   exec_os_fs.c     the files and directories execd calls for, confined
 *                    as exec_files.c is (openat2 RESOLVE_IN_ROOT, as the
 *                    sandbox's host uid)
 *   exec_os_http.c   calls: replies in OpenSandbox's error shape, the
 *                    records of what OpenSandbox says of a sandbox
 *                    (image, metadata, env, expiry), access tokens
 *   exec_os_execd.c  execd's routes under /sandboxes/{id}/execd
 *   exec_os_eg.c     the egress sidecar's routes under
 *                    /sandboxes/{id}/egress: the broker session's tier
 *                    and egress rules
 *   exec_os_port.c   the port proxy, /sandboxes/{id}/proxy/{port}/...,
 *                    into 127.0.0.1:{port} inside the sandbox
 *   exec_os.c        the listener, the lifecycle routes, the router
 */
#ifndef SLUICE_EXEC_OS_INT_H
#define SLUICE_EXEC_OS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <jansson.h>

#include "sandbox-glue/executor/execd/execd-int.h"

/* ---- exec_os_mp.c ---- */

struct xd_mp_part {
	const char *name;               /* form field name, not terminated */
	size_t nlen;
	const char *filename;           /* NULL none */
	size_t fnlen;
	const char *ctype;              /* NULL none */
	size_t ctlen;
	const unsigned char *data;
	size_t len;
};

/* The boundary of a "multipart/form-data; boundary=..." Content-Type
 * (quoted or not, 1..70 characters): 0, -1 not one. */
int xd_mp_boundary(const char *ctype, char *out, size_t outlen)
    SLUICE_MUSTCHECK;
/* The parts of body[0..len) (pointers into it), at most max: 0 with *n,
 * -1 with *why (a malformed body, too many parts). */
int xd_mp_parse(const unsigned char *body, size_t len, const char *boundary,
    struct xd_mp_part *parts, size_t max, size_t *n, const char **why)
    SLUICE_MUSTCHECK;

/* ---- exec_os_cfg.c (the struct is in execd-int.h) ---- */

struct xd_os_cfg;
struct cfg_ctx;
/* Reads the "opensandbox" object o into c (its defaults first), x at
 * "opensandbox" (proxy/lib/config_engine.h): -1 with x's error. */
int xd_os_cfg_read(struct cfg_ctx *x, json_t *o, struct xd_os_cfg *c)
    SLUICE_MUSTCHECK;
json_t *xd_os_cfg_json(const struct xd_os_cfg *c);
/* The key that is tok (constant time per key), NULL none. */
const struct xd_os_key *xd_os_key_find(const struct xd_os_cfg *c,
    const char *tok);
/* The profile of an image URI, NULL none ("*" the default). */
const char *xd_os_image_profile(const struct xd_os_cfg *c, const char *uri);
/* "cpu" ("500m", "1", "2.5") in percent of a CPU and "memory" ("512Mi",
 * "2Gi", "1G", "1048576") in MiB: 0 with the value, -1 not one. */
int xd_os_cpu_pct(const char *s, long *pct) SLUICE_MUSTCHECK;
int xd_os_mem_mb(const char *s, long *mb) SLUICE_MUSTCHECK;

/* ---- exec_os_fs.c (confined like exec_files.c; e as there) ---- */

/* The path that stands for /workspace in the paths below and in a
 * command's cwd (ChatHub's /tmp/workspace; "" none), set at start. */
void xd_osfs_workdir(const char *w);
/* in with that path's prefix as /workspace (in buf), else in itself. */
const char *xd_osfs_unalias(const char *in, char *buf, size_t len);
/* Make it a symbolic link to /workspace inside the sandbox (its parent
 * must be there, /tmp for the default), as the sandbox's user; 0, or -1
 * with why (nothing made). */
int xd_osfs_workdir_link(const struct sbx_rec *r, int rootfd, char *err,
    size_t errlen) SLUICE_MUSTCHECK;
/* An OpenSandbox path: an absolute path under /workspace (or the path
 * that stands for it) or one relative to it; -1 (e: 400) else. */
int xd_osfs_info(const struct sbx_rec *r, const char *path, json_t **out,
    struct xd_perr *e) SLUICE_MUSTCHECK;
/* Entries under dir to depth (1: its own), or with pattern (a glob of
 * names, or of paths when it has a '/' or "**") at any depth: FileInfo
 * objects, lexical order. */
int xd_osfs_list(const struct sbx_rec *r, const char *dir, int depth,
    const char *pattern, size_t max, json_t **out, struct xd_perr *e)
    SLUICE_MUSTCHECK;
int xd_osfs_mkdir(const struct sbx_rec *r, const char *path, int mode,
    struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_osfs_rmtree(const struct sbx_rec *r, const char *path,
    struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_osfs_chmod(const struct sbx_rec *r, const char *path, int mode,
    struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_osfs_rename(const struct sbx_rec *r, const char *src,
    const char *dst, struct xd_perr *e) SLUICE_MUSTCHECK;
/* Replace every occurrence of old in path by new: *count. */
int xd_osfs_replace(const struct sbx_rec *r, const char *path,
    const char *old, size_t oldn, const char *new_, size_t newn,
    uint64_t max, long *count, struct xd_perr *e) SLUICE_MUSTCHECK;
/* Read a whole regular file of at most max bytes. */
int xd_osfs_read(const struct sbx_rec *r, const char *path, uint64_t max,
    unsigned char **buf, size_t *len, struct xd_perr *e) SLUICE_MUSTCHECK;

/* ---- exec_os_http.c ---- */

struct evhttp;
struct evhttp_request;
struct evhttp_connection;
struct evhttp_bound_socket;
struct evkeyvalq;
struct event;
struct ssl_ctx_st;
struct xd_os;

struct xd_os_call {
	TAILQ_ENTRY(xd_os_call) link;
	struct xd *xd;
	struct evhttp_request *req;
	const struct xd_os_key *key;    /* lifecycle: the caller's key */
	char who[96];
	char *arg[XD_ARGS_MAX];
	struct evkeyvalq *query;        /* NULL none */
	json_t *body;                   /* a JSON body, NULL none */
	struct xd_box *box;             /* held (refs) */
	int pending;
	/* a command's stream */
	struct xd_cmd *cmd;
	struct evhttp_connection *evcon;
	unsigned char carry[2][4];
	size_t ncarry[2];
	int gone;
	struct event *ev_ping;
};
TAILQ_HEAD(xd_os_callq, xd_os_call);

struct xd_os {
	struct xd *xd;
	struct evhttp *http;
	struct evhttp_bound_socket *bound;
	struct ssl_ctx_st *tls_ctx;
	struct xd_os_callq calls;
	json_t *recs;                   /* id -> record */
	unsigned char secret[32];       /* access tokens' HMAC key */
	struct event *ev_sweep;         /* expiries */
	char host[160];                 /* endpoints' host[:port] */
};

/* The call's query value of key, NULL none. */
const char *xd_os_q(struct xd_os_call *k, const char *key);
void xd_os_call_free(struct xd_os_call *k);
/* The handler answers later. */
void xd_os_call_wait(struct xd_os_call *k);
void xd_os_reply_json(struct xd_os_call *k, int status, json_t *j);
/* 200 (or status) with an empty body, Content-Length: 0. */
void xd_os_reply_empty(struct xd_os_call *k, int status);
void xd_os_reply_err(struct xd_os_call *k, int status, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* e's status with OpenSandbox's code for it. */
void xd_os_reply_perr(struct xd_os_call *k, struct xd_perr *e);

/* Records: what OpenSandbox says of a sandbox that sluice does not
 * keep.  {id, tenant, user, image, metadata, env, entrypoint,
 * createdAt (ms), expiresAt (s, 0 none), terminated?}; kept under
 * <state_dir>/.opensandbox/. */
int xd_os_recs_load(struct xd_os *os, char *err, size_t errlen)
    SLUICE_MUSTCHECK;
/* Records and access tokens are keyed by the sandbox's host name
 * (xd_key of its tenant and id): ids are per tenant, so the bare id
 * would let one tenant's record or token stand for another's. */
void xd_os_key(const char *tenant, const char *id, char out[SBX_ID_MAX + 1]);
/* The key of a record (its "tenant" and "id"); -1 if it has no id. */
int xd_os_rec_key(json_t *rec, char out[SBX_ID_MAX + 1]) SLUICE_MUSTCHECK;
json_t *xd_os_rec(struct xd_os *os, const char *key);
int xd_os_rec_save(struct xd_os *os, json_t *rec) SLUICE_MUSTCHECK;
void xd_os_rec_drop(struct xd_os *os, const char *key);
/* The access token of sandbox id (HMAC of the secret), hex. */
void xd_os_token(const struct xd_os *os, const char *id, char out[65]);
/* Whether the request carries id's token in header (execd's
 * X-EXECD-ACCESS-TOKEN, the egress sidecar's OPENSANDBOX-EGRESS-AUTH). */
int xd_os_token_ok(const struct xd_os *os, const char *id,
    struct evhttp_request *req, const char *header);

/* A port's token: of the sandbox's key and port (expires 0), or of a
 * signed preview path valid until expires (unix seconds); hex.  Neither
 * opens execd or another port. */
void xd_os_port_token(const struct xd_os *os, const char *key, long port,
    long long expires, char out[65]);
int xd_os_port_token_ok(const struct xd_os *os, const char *key, long port,
    long long expires, const char *tok);

/* Unix milliseconds as OpenSandbox writes a time (RFC 3339, UTC, with
 * milliseconds); null for none (0 or less). */
json_t *xd_os_iso_ms(int64_t ms);

/* ---- exec_os_execd.c ---- */

/* Route an execd call (after /sandboxes/{id}/execd) of box k->box:
 * answers (404/405 itself). */
void xd_os_execd(struct xd_os_call *k, const char *rest);
/* The environment a sandbox's commands get (its create's env). */

/* ---- exec_os_eg.c ---- */

/* An OpenSandbox NetworkPolicy checked and normalised into *out
 * {defaultAction (deny when absent), egress: [{action, target}]}: 0, -1
 * with e (400). */
int xd_os_policy_parse(json_t *np, json_t **out, struct xd_perr *e)
    SLUICE_MUSTCHECK;
/* PATCH: the rules of in (an array, at least one) first, of a
 * duplicate target the first; then cur's others.  DELETE: cur without
 * the rules of targets (an array of strings).  0 with *out, -1 with e
 * (400). */
int xd_os_policy_merge(json_t *cur, json_t *in, json_t **out,
    struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_os_policy_drop(json_t *cur, json_t *targets, json_t **out,
    struct xd_perr *e) SLUICE_MUSTCHECK;
/* sluiced's body {"allow": [...], "deny": [...]} of a policy: the first
 * rule of a target decides it.  NULL out of memory. */
char *xd_os_policy_broker(json_t *policy);
/* The tier a policy's defaultAction stands for: "public" or "off". */
const char *xd_os_policy_tier(json_t *policy);
/* Ends an apply: policy (borrowed) on success, else e. */
typedef void (*xd_os_policy_done)(struct xd_os_call *k, json_t *policy,
    struct xd_perr *e);
/* Put policy in force for box b (its tier, then its rules in sluiced;
 * kept in its record), then done; the call waits.  -1 with e if it
 * could not start. */
int xd_os_policy_apply(struct xd_os_call *k, struct xd_box *b,
    json_t *policy, xd_os_policy_done done, struct xd_perr *e) SLUICE_MUSTCHECK;
/* Route an egress call (after /sandboxes/{id}/egress) of k->box. */
void xd_os_egress(struct xd_os_call *k, const char *rest);

/* ---- exec_os_port.c ---- */

/* An upstream's answer head h (NUL-terminated, cut up in place): its
 * status (200..599; with upgrade 101 only), reason, and each header to
 * forward to fn (hop-by-hop and access headers dropped, Upgrade kept for
 * an upgrade; Content-Length only as digits).  0, or -1 for one the
 * proxy cannot forward (malformed, another status, chunked). */
int xd_os_port_head(char *h, int upgrade, long *status, const char **reason,
    void (*fn)(void *arg, const char *name, const char *value), void *arg)
    SLUICE_MUSTCHECK;
/* Forward the call to 127.0.0.1:port inside k->box (rest: the path
 * after /proxy/{port}, "" or from a '/'); answers. */
void xd_os_port(struct xd_os_call *k, long port, const char *rest);

/* ---- exec_os.c ---- */

int xd_os_listen(struct xd *xd, char *err, size_t errlen) SLUICE_MUSTCHECK;
void xd_os_stop_accepting(struct xd *xd);
void xd_os_close(struct xd *xd);
int xd_os_pending(const struct xd *xd);

#endif /* SLUICE_EXEC_OS_INT_H */
