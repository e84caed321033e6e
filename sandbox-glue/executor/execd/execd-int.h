/*
 * execd-int.h: the private contract between the files of sluice-execd,
 * the session executor service (DESIGN.md, "Sandbox glue" and "Executor
 * API").  Included only inside sandbox-glue/executor/execd/.
 *
 * One process, one libevent loop, run as root beside sluiced.  The
 * files, bottom up (each calls only those above it; tests/layering.sh
 * checks that no two call each other):
 *
 *   exec_parse.c   pure parsers of what a client sends (route patterns,
 *                  paths, Range, the create and command bodies, limits):
 *                  no I/O, so tests/fuzz/fuzz_execapi.c drives them
 *   exec_http.c    replies: JSON, the error shape, text of output bytes
 *   exec_s3.c      the archive store in S3-compatible storage: SigV4,
 *                  uploads in parts, lists (blocking: in workers only)
 *   exec_cfg.c     the configuration: defaults, JSON with line:column
 *                  errors, token files hashed, --print-config
 *   exec_gate.c    the TCP listener's connections: caps, the head's
 *                  deadline, its token and role checked before any body
 *                  is read (a filter under evhttp)
 *   exec_job.c     forked workers for the calls that block (see below)
 *   exec_broker.c  sluiced's control API through proxy/sluicectl's
 *                  client (blocking: only ever called inside a worker)
 *   exec_files.c   the files API: openat2 inside the workspace, as the
 *                  sandbox's host uid
 *   exec_ws.c      the workspace as a loop-mounted ext4 of its own (the
 *                  kernel enforces its bytes and inodes)
 *   exec_snap.c    workspace snapshots: what a command changed, its
 *                  artifacts under outputs/ with SHA-256
 *   exec_events.c  sandbox and command events for GET /v1/events
 *   exec_audit.c   the audit log: a record per lifecycle action and per
 *                  command, in the connection log's hash-chained format
 *   exec_cmd.c     commands: spawn, pipes, deadline, output kept, capped,
 *                  streamed or in a ring, kill, exit
 *   exec_box.c     the sandboxes: records, quotas, uid slots, create,
 *                  delete and tier through workers
 *   exec_health.c  GET /v1/health and --doctor
 *   exec_node.c    GET and PUT /v1/node: what a fleet places sandboxes
 *                  by, and the node's drain
 *   exec_wsf.c     RFC 6455 framing, the server's side (exec_wsf.h: no
 *                  socket, no loop; fuzzed alone)
 *   exec_pty.c     terminals: a shell on a pty in a sandbox over a
 *                  WebSocket, output offsets, replay, takeover
 *   exec_api.c     the listeners' request callback: roles, routes,
 *                  bodies, every handler
 *   execd.c        main: options, configuration, signals, reload, drain
 *
 * Blocking.  The backends (sbx.h) fork, wait and run runsc; sluiced's
 * client waits on a socket.  Nothing of that runs on the loop:
 *  - spawn() runs in the daemon: it forks and returns once the command's
 *    process is set up (ns: it waits for the setns/exec handshake, a
 *    few ms: `true` runs from spawn to exit in 5 ms here; gvisor: one
 *    fork, runsc runs in the child);
 *    the command's main process is a child of the daemon, watched with a
 *    pidfd, its pipes read by events;
 *  - create, destroy, the tier change, kill_tree and release run in a
 *    forked worker (xd_job_run) that reports one JSON object on a pipe
 *    and exits: a create takes 30-150 ms (ns, measured) to seconds
 *    (gvisor), a
 *    runsc kill or a slow sluiced as much as their bounds (60 s, 10 s),
 *    and the backends keep per-process state (ns_commit_fd) that must
 *    not be shared by two creates.  A worker is a fork of the daemon, so
 *    it reads the box it was given as it was at the fork.
 *
 * Seams for what comes next (issue 12), each a place to add to rather
 * than a rewrite:
 *  - artifacts and changes: xd_cmd's exit path (cmd_finish in
 *    exec_cmd.c) is where a snapshot taken in xd_cmd_start is compared;
 *    results are built by xd_cmd_result;
 *  - install: done (h_install in exec_api.c, xd_install_parse; the
 *    tier from sluiced through xd_box_network);
 *  - workspace quota: box_create_child in exec_box.c makes the
 *    workspace (a loop mount or a project quota goes there, and its
 *    removal in box_delete_child);
 *  - suspend/resume/remove/archive: struct xd_box has last_used; a
 *    timer in exec_box.c walks xd->boxes; xd_cmd_start is the one place
 *    a command starts (resume there);
 *  - audit log: done (exec_audit.c; records from exec_api.c's handlers
 *    and cmd_finish); suspend/remove by age will add theirs;
 *  - restart adoption: xd_box_load_all adopts records at start (running
 *    sandboxes keep running); commands started by an earlier daemon are
 *    not known to this one yet;
 *  - reconciliation with sluiced: xd_box_network (GET of one sandbox,
 *    install) asks sluiced and makes a vanished session again;
 *    box->broker says what it found; exec does not ask (its latency);
 *  - events and metrics: done (exec_events.c; xd_event from exec_box.c
 *    and exec_cmd.c); suspend/resume will emit theirs there.
 */
#ifndef SLUICE_EXECD_INT_H
#define SLUICE_EXECD_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <jansson.h>

#include "proxy/lib/log.h"
#include "proxy/lib/usock.h"
#include "sandbox-glue/executor/backend/sbx.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"
#include "sandbox-glue/executor/image/sbx_image.h"

#define XD_NAME		"sluice-execd"
#define XD_ERR_MAX	512

/* ---- diagnostics: the daemons' one logger (proxy/lib/log.h), named
 * XD_NAME by main ---- */

#define XD_LOG_ERR	PX_ERR
#define XD_LOG_WARN	PX_WARN
#define XD_LOG_INFO	PX_INFO
#define XD_LOG_DEBUG	PX_DEBUG
#define xd_log		px_log

/* ---- roles ---- */

enum xd_role {
	XD_ROLE_NONE = 0,
	XD_ROLE_AUDITOR,        /* read-only: health, sandboxes, commands */
	XD_ROLE_APP,            /* sandboxes, commands, files */
	XD_ROLE_ADMIN,          /* everything */
	XD_ROLE__COUNT
};
const char *xd_role_name(enum xd_role r);

/* ---- limits a sandbox is made with (exec_parse.c, exec_cfg.c) ---- */

/* What an app may ask for per sandbox: the backend's limits plus the
 * command defaults.  0 in sbx means "no limit" to the backends; an
 * admin maximum of 0 lets an app ask for anything. */
struct xd_lims {
	struct sbx_limits sbx;
	long timeout_s;         /* a command's default deadline */
	long output_cap;        /* bytes kept per stream and command */
	/* The workspace: an ext4 file system of disk_bytes with inodes
	 * inodes, loop-mounted (exec_ws.c); disk_bytes 0: a plain
	 * directory of the state dir's file system, no quota. */
	uint64_t disk_bytes, inodes;
};

/* The inodes of a workspace (issue 24 point 5): an inode count not
 * asked for (the daemon's default, made for its default size) is
 * scaled down to one per XD_WS_INODE_BYTES of disk_bytes (ext4's own
 * ratio for small file systems: the inode tables then take 1/16 of it,
 * so that a small workspace stays mostly usable); one asked for may be
 * up to one per XD_WS_INODE_MIN bytes (one per 1 KiB block, the most
 * mke2fs makes), more is refused with 400. */
#define XD_WS_INODE_BYTES	4096
#define XD_WS_INODE_MIN		1024

/* ---- exec_cfg.c ---- */

struct xd_ids {
	size_t n;
	uint32_t v[64];
};

struct xd_token {
	char name[64];
	char file[SBX_PATH_MAX];
	unsigned char digest[32];       /* SHA-256 of the token */
	enum xd_role role;
	char tenant[SBX_ID_MAX + 1];    /* "" unbound */
};

#define XD_TOKENS_MAX	64

/* What a command's result carries of outputs/ (exec_snap.c). */
struct xd_art_lims {
	uint64_t file_bytes;    /* per file (0 any) */
	size_t count;           /* per command */
	uint64_t total_bytes;   /* per command (0 any) */
};

/* The "opensandbox" block (exec_os_cfg.c; the API in exec_os*.c). */
#define XD_OS_KEYS_MAX		16
#define XD_OS_IMAGES_MAX	32

struct xd_os_key {
	char name[64];
	char file[SBX_PATH_MAX];
	unsigned char digest[32];       /* SHA-256 of the key */
	char tenant[SBX_ID_MAX + 1];
	char user[SBX_USER_MAX + 1];    /* "" the metadata's sluice.user */
};

struct xd_os_cfg {
	char listen[128];               /* "" off */
	int plain_http;
	char tls_cert[SBX_PATH_MAX], tls_key[SBX_PATH_MAX];
	char endpoint_host[160];        /* endpoints' host[:port], "" listen */
	long max_timeout_s;
	char workdir[128];              /* stands for /workspace, "" none */
	struct xd_os_key keys[XD_OS_KEYS_MAX];
	size_t nkeys;
	struct {
		char uri[256];
		char profile[SBX_ID_MAX + 1];
	} images[XD_OS_IMAGES_MAX];
	size_t nimages;
};

/* lifecycle.archive_store "s3://bucket/prefix" and lifecycle.archive_s3
 * (exec_s3.c) */
struct xd_s3 {
	char url[512];                  /* "": no store, archive_dir only */
	char bucket[64];
	char prefix[256];
	char endpoint[256];             /* http(s)://host[:port] */
	char region[64];
	char access_key_file[SBX_PATH_MAX];
	char secret_key_file[SBX_PATH_MAX];
};

/*
 * One warm pool ("pools"): size sandboxes of this backend and profile,
 * made with lim (what a create with the entry's "limits" gets), waiting
 * for a create that asks for exactly that (exec_pool.c).
 */
#define XD_POOLS_MAX	8
struct xd_pool_cfg {
	char backend[16];
	char profile[SBX_ID_MAX + 1];   /* resolved: never "" */
	long size;
	struct xd_lims lim;
};

struct xd_cfg {
	char runtime_dir[SBX_PATH_MAX];
	char state_dir[SBX_PATH_MAX];
	char control[SBX_PATH_MAX];     /* sluiced's control socket */
	int control_timeout_ms;
	char shim[SBX_PATH_MAX];
	char mke2fs[SBX_PATH_MAX];      /* makes workspace file systems */
	char audit_log[SBX_PATH_MAX];   /* log.path: the audit log */
	char backend[16];
	char tier[16];
	char cgroups[8];
	unsigned long uid_base, slots;
	char socket_group[64];          /* "" none: root's group */
	gid_t socket_gid;
	int socket_mode;
	struct xd_lims def, max;        /* defaults, admin maxima */
	long max_total, max_per_tenant, max_per_user, max_creates;
	long max_creates_tenant;        /* creates under way of one tenant
	                                 * (0: half of max_creates, at least
	                                 * 1): one tenant's flood leaves the
	                                 * others creates (exec_box.c) */
	uint64_t disk_reserve;          /* quotas.disk_reserve_mb: of the
	                                 * state dir's file system kept free
	                                 * of workspaces (exec_box.c) */
	long max_background;            /* running, per sandbox */
	long max_cmds, max_cmds_tenant; /* running commands (foreground and
	                                 * background) on the host, of a
	                                 * tenant; 0 no limit */
	/* lifecycle: unused this long, a sandbox is suspended, then
	 * archived and removed (0: never) */
	long idle_after, remove_after;
	char archive_dir[SBX_PATH_MAX];
	/* lifecycle.archive_store "s3://...": archive_dir is then only
	 * where an archive is made and fetched to (url "" : the archives
	 * live in archive_dir) */
	struct xd_s3 s3;
	/* the archives: expired this long after they were made, and at
	 * most so many and so many bytes per tenant (0: no limit) */
	long arch_max_age;
	long arch_max_count;
	uint64_t arch_max_bytes;
	long keep_finished;             /* finished ones kept, per sandbox */
	uint64_t max_file_bytes;
	uint64_t max_body_bytes;        /* JSON bodies */
	uint64_t max_archive_bytes;     /* PUT .../archive: the body, and
	                                 * the tar it holds uncompressed */
	uint64_t ring_bytes;            /* per stream, background commands */
	uint64_t ring_budget;           /* every ring of the host (0 none):
	                                 * over it, finished commands' rings
	                                 * go, oldest first (exec_cmd.c) */
	uint64_t stream_watermark;      /* bytes queued for a client */
	uint64_t events_buffer;         /* queued for an events reader */
	/* a file GET's answer (exec_api.c): queued per connection, in all,
	 * and how long a client may read nothing */
	uint64_t reply_buffer, reply_total;
	long reply_timeout_ms;
	long drain_s;
	struct xd_art_lims art;
	long snap_entries;              /* entries walked per snapshot */
	struct xd_ids uids[XD_ROLE__COUNT], gids[XD_ROLE__COUNT];
	/* images (sbx_image.h), as sluice-run's keys of the same names */
	char image_dir[SBX_PATH_MAX];   /* the store */
	char profile[SBX_ID_MAX + 1];   /* of a create without "profile" */
	char shim_static[SBX_PATH_MAX]; /* the shim bound into images */
	/* shim_static is a static executable (sbx_elf_static): not a key,
	 * read once where the configuration is read (start, SIGHUP) rather
	 * than at every create */
	int shim_static_ok;
	char tenant_profiles[4096];     /* sbx_profile_allowed's table */
	char tcp[128];                  /* "" off */
	int tcp_plain;                  /* tcp.plain_http: no TLS */
	char tls_cert[SBX_PATH_MAX], tls_key[SBX_PATH_MAX];
	/* tcp.listen's connections (exec_gate.c): in all, from one address,
	 * the deadline of a head, descriptors left to the rest */
	long tcp_max_conns, tcp_max_conns_per_peer, tcp_head_timeout_ms;
	long tcp_fd_reserve;
	struct xd_token tokens[XD_TOKENS_MAX];
	size_t ntokens;
	struct xd_os_cfg os;            /* "opensandbox" (exec_os_cfg.c) */
	/* warm pools (exec_pool.c): "pools" and "pool_fills" */
	struct xd_pool_cfg pools[XD_POOLS_MAX];
	size_t npools;
	long pool_fills;                /* pool creates in flight at most */
};

void xd_cfg_defaults(struct xd_cfg *c);
/* quotas.creates_per_tenant as it applies (its default: half of
 * quotas.creates, at least 1; never more than quotas.creates). */
long xd_cfg_creates_tenant(const struct xd_cfg *c);
/* Apply the JSON text over c (defaults first).  Errors as
 * "name:line:column: key.path: what". */
int xd_cfg_parse(struct xd_cfg *c, const char *text, size_t len,
    const char *name, char *err, size_t errlen) SLUICE_MUSTCHECK;
int xd_cfg_load(struct xd_cfg *c, const char *path, char *err,
    size_t errlen) SLUICE_MUSTCHECK;
/* The effective configuration (token digests left out). */
json_t *xd_cfg_json(const struct xd_cfg *c);
/* SHA-256 of s[0..n) (for token checks). */
void xd_sha256(const void *s, size_t n, unsigned char out[32]);
/*
 * Ids are per tenant (issue 20 point 9): tenant A's "chat-1" and tenant
 * B's are two sandboxes.  What names one on the host (its state dir,
 * cgroups, sluiced's session, its archive) is its key: the id itself
 * for a sandbox without a tenant (as before), else the id's first 55
 * characters, ".", and 8 hex digits of SHA-256(tenant NUL id): a chat
 * id of at most SBX_ID_MAX characters (short: sluiced's session socket
 * is <runtime_dir>/sessions/<key>/proxy.sock, within a socket path's
 * 107 bytes), unique on the host unless two tenants' digests of one id
 * or a tenant-less id shaped like a key meet it (a create checks: 409
 * exists, logged).  A record made before has no "id": its key is its
 * id.
 */
#define XD_KEY_PREFIX	55
void xd_key(const char *tenant, const char *id, char out[SBX_ID_MAX + 1]);
/* The API's id of a record. */
#define XD_REC_ID(r)	((r)->id[0] != '\0' ? (r)->id : (r)->chat)

/* The configured token that is tok (each compared in constant time),
 * NULL none. */
const struct xd_token *xd_token_find(const struct xd_cfg *c, const char *tok);

/* ---- exec_parse.c ---- */

#define XD_ARGS_MAX	3

/* Match path (raw, percent-encoded) against an OpenAPI-style pattern
 * ("/v1/sandboxes/{id}/files/{path}": {x} is one segment, a final
 * {path} the rest).  1 with the decoded arguments (malloc'd, in order)
 * in args, 0 no match, -1 a segment that does not decode (bad %xx, a
 * NUL). */
int xd_route_match(const char *pattern, const char *path, char **args,
    size_t nargs) SLUICE_MUSTCHECK;
void xd_args_free(char **args, size_t nargs);
/* A file name "<id>.json" whose id passes sbx_id_ok: 1 with id (at
 * least SBX_ID_MAX + 1 bytes) set; else 0.  The records and archives
 * are kept under such names. */
int xd_json_name_id(const char *name, char *id);

/* A path of the files API, relative to /workspace: "/workspace/a/b",
 * "a/./b" and "x/../a/b" all give "a/b"; ".." at the top stays at the
 * top (as the kernel's RESOLVE_IN_ROOT does); "" is the workspace.
 * -1 for other absolute paths, NULs, or more than out holds. */
int xd_path_norm(const char *in, char *out, size_t outlen) SLUICE_MUSTCHECK;

/* "bytes=A-B" | "bytes=A-" | "bytes=-N" against a file of size:
 * 1 with [*from, *to] (inclusive), 0 no Range or one to ignore (not
 * bytes, several ranges), -1 not satisfiable. */
int xd_range_parse(const char *h, uint64_t size, uint64_t *from,
    uint64_t *to) SLUICE_MUSTCHECK;

/* What a refused body says: the HTTP status, the error code and the
 * extra fields (may stay NULL). */
struct xd_perr {
	int status;
	const char *code;
	char msg[XD_ERR_MAX];
	json_t *extra;
};
void xd_perr_clear(struct xd_perr *e);
/* Set e (status, code, a message) and return -1: the daemon's one
 * error setter (sluiced's answers, exec_broker.c, included). */
int xd_perr_set(struct xd_perr *e, int status, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* How an API says an errno: a table of these, ended by a NULL code;
 * xd_errno_find: err's row, NULL when it has none. */
struct xd_errno_msg {
	int err;
	int status;
	const char *code;
	const char *msg;
};
const struct xd_errno_msg *xd_errno_find(const struct xd_errno_msg *tab,
    int err);

#define XD_CREDS_MAX	16
#define XD_CRED_INDEX_MAX	256

/* A credential a create asks for ("credentials": a name, or {"name",
 * "for", "index"}): its placeholder goes into SLUICE_CRED_<NAME>, and,
 * with "for", into that package manager's own configuration
 * (xd_broker_sbx_env). */
struct xd_cred_ask {
	char name[SBX_ID_MAX + 1];
	char for_[8];                   /* "", "npm", "pip" */
	char index[XD_CRED_INDEX_MAX];  /* https://host[:port]/path, "" */
};

struct xd_create_spec {
	char id[SBX_ID_MAX + 1];
	char tenant[SBX_ID_MAX + 1];
	char user[SBX_USER_MAX + 1];
	char tier[16];
	char profile[SBX_ID_MAX + 1];
	char backend[16];
	struct xd_lims lim;
	int bound;              /* the caller's token is of this tenant */
	/* "credentials": sluiced's credentials of the tenant whose
	 * placeholders the commands get (SLUICE_CRED_<NAME>, npmrc,
	 * pip.conf) */
	struct xd_cred_ask creds[XD_CREDS_MAX];
	int ncreds;
};

/* POST /v1/sandboxes: defaults from def, every limit at most max (an
 * app may ask for less, never more: more is 400 with "field" and
 * "max"). */
int xd_create_parse(json_t *body, const struct xd_lims *def,
    const struct xd_lims *max, const char *def_tier,
    const char *def_backend, struct xd_create_spec *s, struct xd_perr *e)
    SLUICE_MUSTCHECK;

/* The same limits, field by field. */
int xd_lims_eq(const struct xd_lims *a, const struct xd_lims *b);

/* PATCH /v1/sandboxes/{id}: the tier. */
int xd_tier_parse(json_t *body, char *tier, size_t len, struct xd_perr *e)
    SLUICE_MUSTCHECK;

struct xd_cmd_spec {
	char **argv;            /* NULL-terminated, malloc'd */
	char **env;             /* "K=V" of the caller, NULL-terminated */
	char cwd[SBX_PATH_MAX]; /* inside the sandbox */
	long timeout_s;         /* 0: none (a background command) */
	long output_cap;
	long cap_total;         /* "output_cap_total": both streams */
	int has_cap_total;      /* together (exec only) */
	char *stdin_data;
	size_t stdin_len;
	int base64;             /* "encoding": "base64" */
	int no_changes;         /* "changed": false: no snapshot of the
	                         * workspace, no changed nor artifacts */
	int pty;                /* a terminal (exec_pty.c): stdin is a pty's
	                         * slave, its master the output (stream 0)
	                         * and an input that stays open */
	unsigned short cols, rows;      /* the pty's size */
};

/* The body of exec and commands.  lim holds the sandbox's defaults;
 * timeout_max and cap_max the admin's maxima.  A background command
 * without timeout_s runs until stopped. */
int xd_cmd_spec_parse(json_t *body, const struct xd_lims *lim,
    long timeout_max, long cap_max, int background,
    struct xd_cmd_spec *s, struct xd_perr *e) SLUICE_MUSTCHECK;
void xd_cmd_spec_free(struct xd_cmd_spec *s);

/* POST /v1/sandboxes/{id}/install {"manager","packages","timeout_s"?}:
 * pip (PEP 508 names, extras, version clauses) or npm (names, scopes,
 * @version or range) packages, never an option, a URL or a path; s gets
 * the foreground command that installs them, manager "pip" or "npm". */
int xd_install_parse(json_t *body, const struct xd_lims *lim,
    long timeout_max, long cap_max, struct xd_cmd_spec *s, char *manager,
    size_t mlen, struct xd_perr *e) SLUICE_MUSTCHECK;

/* ---- exec_http.c ---- */

struct evhttp_request;
struct evbuffer;

/* Bytes as a JSON string: valid UTF-8 is kept, U+0000 included; each
 * byte of an invalid sequence becomes U+FFFD.  base64: the bytes in
 * standard base64 instead. */
json_t *xd_text_json(const unsigned char *b, size_t n, int base64);
/* xd_text_json's string as the text between the quotes of its JSON
 * (escaped as json_dumps does), a piece at a time: from b[*pos], what
 * fits in room bytes of out, *pos moved past what was written; out
 * NULL: the length of the rest (room not looked at).  So an answer of
 * output is made as it is sent, never whole (exec_api.c). */
size_t xd_text_esc(const unsigned char *b, size_t n, int base64,
    size_t *pos, char *out, size_t room);
/* How many leading bytes of b[0..n) end on a UTF-8 character boundary
 * (a sequence cut at the end is held back for the next chunk). */
size_t xd_utf8_whole(const unsigned char *b, size_t n);

/* Answers: proxy/lib/apireply.h (apireply_json, apireply_error); an
 * error setter's error as {"error": {...}}. */
void xd_reply_perr(struct evhttp_request *req, struct xd_perr *e);
/* Query values, the same on the native and the OpenSandbox routes: a
 * yes/no (1, true, 0, false; NULL: no) and a byte offset (decimal
 * digits; NULL: *v untouched).  0, or -1 when s is something else (the
 * caller answers 400 in its API's words). */
int xd_q_bool(const char *s, int *v) SLUICE_MUSTCHECK;
int xd_q_u64(const char *s, uint64_t *v) SLUICE_MUSTCHECK;
/* b (then freed) as a 200 answer of Content-Type type. */
void xd_reply_text(struct evhttp_request *req, const char *type,
    struct evbuffer *b);
struct evhttp_connection;
/* A streamed answer lets go of its connection: its close callback
 * forgotten; cut: the connection shut too, so the client sees the
 * answer end short rather than wait for the rest. */
void xd_conn_release(struct evhttp_connection *evcon, int cut);
struct bufferevent;
/* Bytes not yet written to a client: its bufferevent's and, on TLS,
 * those exec_gate.c's filter already moved to the one under it (NULL
 * bev or evcon: 0); of a bufferevent, of a connection, of a request.
 * Streams pause above stream_watermark. */
size_t xd_bev_queued(struct bufferevent *bev);
size_t xd_conn_queued(struct evhttp_connection *evcon);
size_t xd_req_queued(struct evhttp_request *req);
/* A command's output as it is streamed: b[0..n) after what was carried
 * from the chunk before (carry, *ncarry: at most 3 bytes of a UTF-8
 * character cut short); the whole characters in a malloc'd buffer,
 * *whole bytes, the cut end carried again.  raw (base64): all of it.
 * NULL when there is nothing whole yet (*whole 0) or no memory. */
unsigned char *xd_utf8_carry(unsigned char *carry, size_t *ncarry,
    const unsigned char *b, size_t n, int raw, size_t *whole);
struct xd;
/* A streamed answer's part of reply_total_bytes (exec_api.c's file and
 * exec answers, exec_tar.c's archives): the bytes it has queued on its
 * connection (counted in xd->reply_queued) and when its client last
 * read.  xd_share_seen: q bytes are still queued there, what the client
 * read since leaves the share.  xd_share_room: how many bytes it may
 * queue now, 0 while more than half of reply_buffer_bytes waits on its
 * connection or reply_total_bytes is taken.  xd_share_send: b to the
 * client (drained(arg) as it drains), in the share.  xd_share_stalled:
 * its client read nothing for reply_timeout_ms. */
struct xd_share {
	size_t queued;
	int64_t moved_ms;
};
void xd_share_seen(struct xd *xd, struct xd_share *s, size_t q);
size_t xd_share_room(const struct xd *xd, size_t q);
void xd_share_send(struct xd *xd, struct xd_share *s,
    struct evhttp_request *req, struct evbuffer *b,
    void (*drained)(struct evhttp_connection *, void *), void *arg);
int xd_share_stalled(const struct xd *xd, const struct xd_share *s);
/* One frame of a stream to req, j consumed: "event: E\ndata: J\n\n"
 * (server-sent events) or, event NULL, "J\n\n" (OpenSandbox's);
 * flushed(arg) is called as it drains.  1 when more than watermark
 * bytes now wait on the connection: the caller pauses its command until
 * xd_stream_caught_up (at most half of them wait). */
int xd_stream_json(struct evhttp_request *req, const char *event,
    json_t *j, void (*flushed)(struct evhttp_connection *, void *),
    void *arg, size_t watermark);
int xd_stream_caught_up(struct evhttp_request *req, size_t watermark);

/* ---- exec_gate.c ---- */

struct xd;
struct bufferevent;
struct event_base;
struct evhttp_bound_socket;
struct ssl_st;
/* The role a route needs (exec_api.c's table; the lowest when none
 * matches, so that evhttp's callback answers 404 or 405). */
typedef enum xd_role (*xd_gate_role_fn)(const char *method,
    const char *path);
/* After the TLS listener is bound: caps and deadlines on its
 * connections. */
int xd_gate_start(struct xd *xd, struct evhttp_bound_socket *bound,
    xd_gate_role_fn role_of) SLUICE_MUSTCHECK;
/* The bufferevent of a new connection (evhttp's bevcb): ssl's, under the
 * gate's filter (ssl NULL: a plain socket one, tcp.plain_http).  NULL
 * (ssl freed) without memory. */
struct bufferevent *xd_gate_bev(struct xd *xd, struct event_base *base,
    struct ssl_st *ssl);
/* A request of the listener was answered: the next head may come. */
void xd_gate_answered(struct xd *xd, struct evhttp_request *req);
/* The request switched to a WebSocket (101 sent, exec_pty.c): from
 * now on everything the peer sends passes, with no head deadline. */
void xd_gate_upgraded(struct xd *xd, struct evhttp_request *req);
/* The request came with a chunked body: its answer must close. */
int xd_gate_chunked(struct xd *xd, struct evhttp_request *req);
/* The listener is gone (drain); the configuration changed (reload). */
void xd_gate_unbind(struct xd *xd);
void xd_gate_reload(struct xd *xd);
void xd_gate_stop(struct xd *xd);
/* The parser under the filter (pure: tests/fuzz/fuzz_gate.c and
 * tests/unit/sandbox-glue/executor/execd/test_gate.c call it).  A
 * head's fields that decide, pointers into the head's bytes. */
struct xd_gate_head {
	const char *method;     /* the request line's first word */
	size_t mlen;
	const char *path;       /* its second (the target) */
	size_t plen;
	const char *auth;       /* the one Authorization value, trimmed */
	size_t alen;
	int nauth;
	const char *cl;         /* Content-Length, trimmed */
	size_t cllen;
	int ncl;
	const char *te;         /* Transfer-Encoding */
	size_t telen;
	int nte;
};
/* Where the head in b[0..n) ends (past its empty line), 0 not yet. */
size_t xd_gate_head_end(const char *b, size_t n);
/* The head's end in b[0..look) (b NULL: none), looking again only from
 * where *scanned (the bytes looked at before, no end in them) says;
 * *scanned becomes look. */
size_t xd_gate_head_scan(const char *b, size_t look, size_t *scanned);
/* 0 with h, -1 not a head evhttp would read the same way. */
int xd_gate_head_parse(const char *b, size_t n, struct xd_gate_head *h)
    SLUICE_MUSTCHECK;
/* The role of the head's bearer token, XD_ROLE_NONE none or unknown. */
enum xd_role xd_gate_head_role(const struct xd_cfg *c,
    const struct xd_gate_head *h);
/* Content-Length as evhttp reads it: -1 bad, else the bytes. */
int64_t xd_gate_cl_value(const struct xd_gate_head *h);
/* What the gate does with the whole head b[0..n). */
enum xd_gate_what {
	XD_GATE_SHUT,           /* the connection is shut (why) */
	XD_GATE_REFUSE,         /* the head without its body, then close */
	XD_GATE_PASS,           /* the head, then body bytes or chunked */
};
struct xd_gate_verdict {
	enum xd_gate_what what;
	const char *why;        /* SHUT */
	enum xd_role role, need;
	uint64_t body;          /* PASS: the body's bytes to pass */
	int chunked;            /* PASS: all passes, the answer closes */
};
int xd_gate_decide(const struct xd_cfg *c, xd_gate_role_fn role_of,
    const char *b, size_t n, struct xd_gate_verdict *v) SLUICE_MUSTCHECK;
/* The refused head as evhttp gets it (no Content-Length,
 * Transfer-Encoding, Expect or Connection; "Connection: close"). */
int xd_gate_head_refused(struct evbuffer *dst, const char *b, size_t n)
    SLUICE_MUSTCHECK;

/* ---- exec_job.c ---- */

struct xd;

/* Runs in the forked worker; returns its result (or NULL). */
typedef json_t *(*xd_job_fn)(void *arg);
/* Runs in the daemon once the worker has exited: its result, NULL when
 * it died without one.  The callee owns result. */
typedef void (*xd_job_done)(void *arg, json_t *result);

struct event;

struct xd_job {
	TAILQ_ENTRY(xd_job) link;
	struct xd *xd;
	char what[32];
	pid_t pid;
	int fd, pidfd;
	struct event *ev, *ev_exit;
	struct evbuffer *buf;
	xd_job_done done;
	void *arg;
	unsigned long early;            /* wake-ups before its exit */
};
TAILQ_HEAD(xd_jobq, xd_job);

int xd_job_run(struct xd *xd, const char *what, xd_job_fn fn, void *fnarg,
    xd_job_done done, void *donearg, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* Wait (bounded, blocking) for the workers still running: drain. */
void xd_job_wait_all(struct xd *xd, int timeout_ms);

/* ---- exec_broker.c (blocking: in workers and --doctor only) ---- */

/* The outcome of a call to sluiced is told as the API reports it, in
 * an xd_perr (status 503 unreachable, 403, 409, ...; extra not set). */

int xd_broker_create(const struct xd_cfg *c, const struct sbx_rec *r,
    char *session_dir, size_t dlen, struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_broker_delete(const struct xd_cfg *c, const char *chat,
    struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_broker_tier(const struct xd_cfg *c, const char *chat,
    const char *tier, struct xd_perr *e) SLUICE_MUSTCHECK;
/* The session's own egress rules, set whole: body is sluiced's
 * {"allow": [...], "deny": [...]} (PUT /v1/sessions/{id}/egress). */
int xd_broker_egress(const struct xd_cfg *c, const char *chat,
    const char *body, struct xd_perr *e) SLUICE_MUSTCHECK;
/* GET /v1/sessions/{chat}: 0 with its effective_tier (the lower of
 * the session's tier and the ceiling) and its ceiling ("" when sluiced
 * did not say); e->status 404 when sluiced has no such session. */
int xd_broker_get(const struct xd_cfg *c, const char *chat, char *eff,
    size_t elen, char *ceil, size_t clen, struct xd_perr *e) SLUICE_MUSTCHECK;
/* 0 when sluiced answers GET /v1/health with 200. */
int xd_broker_ping(const struct xd_cfg *c, struct xd_perr *e) SLUICE_MUSTCHECK;
/* The session socket to the sandbox user (sluiced makes it root's). */
void xd_broker_socket_own(const struct sbx_rec *r);
/* What the sandbox's commands get from sluiced.  The trust store: with
 * inspection on (GET /v1/inspect/ca), the host's anchors and the
 * inspection CA as <dir>/ca.pem of each of dirs (session directories:
 * SBX_SOCK_DIR/ca.pem inside), removed with inspection off; xd_cmd_start
 * names it in SSL_CERT_FILE and the like where it is.  At a create
 * (xd_broker_sbx_env) that and SLUICE_CRED_<NAME>=<placeholder> of each
 * of creds, which must be sluiced's and of r's tenant (else 400), into
 * <r->dir>/env.json (a JSON array of "K=V"), which xd_cmd_start reads;
 * the placeholders of those "for" npm or pip also into the session
 * directory's npmrc and pip.conf (the sandbox user's, 0600), named by
 * NPM_CONFIG_USERCONFIG and PIP_CONFIG_FILE in env.json (400 when the
 * credential's inject is not what that client sends: Authorization,
 * "Bearer {}" for npm, "Basic" for pip). */
#define XD_CA_FILE		"ca.pem"
#define XD_NPMRC_FILE		"npmrc"
#define XD_PIPCONF_FILE		"pip.conf"
#define XD_ENV_FILE		"env.json"
#define XD_HOST_CA_BUNDLE	"/etc/ssl/certs/ca-certificates.crt"
int xd_broker_trust(const struct xd_cfg *c, const char *const *dirs,
    size_t n, struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_broker_sbx_env(const struct xd_cfg *c, const struct sbx_rec *r,
    const struct xd_cred_ask *creds, int ncreds, struct xd_perr *e)
    SLUICE_MUSTCHECK;
/* The bundle, npmrc and pip.conf removed (before the session directory
 * is). */
void xd_broker_sbx_env_drop(const struct sbx_rec *r);

/* ---- exec_rec.c ---- */

/* Save the record (atomically): 0 / -1 (logged). */
int xd_rec_save(const struct sbx_rec *r) SLUICE_MUSTCHECK;

/* ---- exec_ws.c (blocking: in workers) ---- */

/* Make r->workspace: a directory, and when lim->disk_bytes an ext4 of
 * that size and lim->inodes inodes mounted on it (nosuid, nodev),
 * owned by the sandbox user, its image allocated whole and copied from
 * the geometry's template under state_dir (made by mke2fs when
 * missing).  -1 with err, nothing left behind; *nospace 1 when the
 * host's file system had no room for the image. */
int xd_ws_make(const char *mke2fs, const char *state_dir,
    const struct sbx_rec *r,
    const struct xd_lims *lim, int *nospace, char *err, size_t len)
    SLUICE_MUSTCHECK;
/* Unmount whatever is mounted on r->workspace (0 when nothing is);
 * the loop device is released with its last mount. */
int xd_ws_remove(const struct sbx_rec *r) SLUICE_MUSTCHECK;

/* ---- exec_s3.c: the archive store in S3 (blocking: in workers) ---- */

/* Each request reads the key files (xd_s3_key_read) and signs itself
 * (AWS Signature V4, path-style); errors name the method, the object
 * and the store's code, never a key. */
/* A file's upload: one PUT up to this, else a multipart upload in parts
 * of it (the only buffer). */
#define XD_S3_PART	(8u << 20)
/* "s3://bucket/prefix" into s (bucket, prefix without slashes at its
 * ends, url): -1 with err. */
int xd_s3_parse_url(const char *url, struct xd_s3 *s, char *err,
    size_t len) SLUICE_MUSTCHECK;
/* "http(s)://host[:port]": -1 with err. */
int xd_s3_endpoint_ok(const char *ep, char *err, size_t len)
    SLUICE_MUSTCHECK;
/* A key file's one line into out: the file must be a regular file of
 * the daemon's uid readable by no group or other; -1 with err (which
 * names the path, never the text). */
int xd_s3_key_read(const char *path, char *out, size_t len, char *err,
    size_t elen) SLUICE_MUSTCHECK;
/* Object name (under the prefix) from buf / from fd (from its start;
 * multipart past XD_S3_PART): 0, -1 with err. */
int xd_s3_put_mem(const struct xd_s3 *s, const char *name, const void *buf,
    size_t n, char *err, size_t len) SLUICE_MUSTCHECK;
int xd_s3_put_file(const struct xd_s3 *s, const char *name, int fd,
    char *err, size_t len) SLUICE_MUSTCHECK;
/* The object written to fd (at most max bytes, else it fails): 0, 1
 * none, -1 with err. */
int xd_s3_get_fd(const struct xd_s3 *s, const char *name, int fd,
    uint64_t max, char *err, size_t len) SLUICE_MUSTCHECK;
/* The object in memory (NUL-terminated, *n bytes, at most max): *rc 0,
 * 1 none (NULL), -1 with err (NULL). */
char *xd_s3_get_mem(const struct xd_s3 *s, const char *name, size_t max,
    size_t *n, int *rc, char *err, size_t len);
/* Removed (none: 0 too): 0, -1 with err. */
int xd_s3_delete(const struct xd_s3 *s, const char *name, char *err,
    size_t len) SLUICE_MUSTCHECK;
/* The objects right under the prefix: [{name, key, size, mtime}], every
 * page of ListObjectsV2; NULL with err. */
json_t *xd_s3_list(const struct xd_s3 *s, char *err, size_t len);
/* Pure, for the fuzz harness: a ListObjectsV2 answer's objects appended
 * to out as {key, size, mtime (-1 unknown)}, *truncated and the next
 * page's token; -1 when it does not read. */
int xd_s3_list_parse(const char *xml, size_t n, json_t *out, char *token,
    size_t tlen, int *truncated) SLUICE_MUSTCHECK;
/* The text of the first <tag> of an answer (an error's Code, an
 * UploadId): 0, -1 none. */
int xd_s3_xml_text(const char *xml, size_t n, const char *tag, char *out,
    size_t len) SLUICE_MUSTCHECK;

/* ---- exec_arch.c (blocking: in workers) ---- */

/* Archive r->workspace (the sandbox destroyed) as <archive_dir>/<id>
 * .<sha12>.tar.zst and its metadata <id>.json ({id, tenant, user,
 * archived, reason, file, sha256, bytes, files, skipped, ...}),
 * replacing an older one only once it is on disk: 0 with *meta (the
 * metadata), -1 with err and the older one whole.  disk_bytes: the
 * workspace's size (0: none), at most what is read. */
int xd_arch_write(const struct xd_cfg *c, const struct sbx_rec *r,
    uint64_t disk_bytes, const char *reason, json_t **meta, char *err,
    size_t len) SLUICE_MUSTCHECK;
/* An archive_dir that is there must be the daemon's and writable by no
 * group or other: -1 with err. */
int xd_arch_dir_check(const struct xd_cfg *c, char *err, size_t len)
    SLUICE_MUSTCHECK;
/* The metadata of id's archive; NULL none (*bad 0) or unreadable
 * (*bad 1).  Small: the loop may read it. */
json_t *xd_arch_meta(const struct xd_cfg *c, const char *id, int *bad);
/* Whether an archive entry may be restored (pure: the unit test and the
 * fuzz harness call it): NULL yes, "" the top (nothing to make), else
 * why not.  p its name, type 'f' file, 'd' directory, 'l' symbolic link
 * (t its target, any), anything else refused; hardlink: a hard link
 * entry, t its target (a name inside the workspace); *clean gets p
 * without its leading "./". */
const char *xd_arch_refused(const char *p, char type, const char *t,
    int hardlink, const char **clean);
/* The committed archives: [{id (the API's), key (its name), tenant,
 * user, archived, bytes (of its file), file}], metadata that does not
 * read as {id, key, corrupt: true, tenant "", bytes}.  NULL when
 * archive_dir cannot be read (none yet: []).  Reads each metadata file
 * (small). */
json_t *xd_arch_list(const struct xd_cfg *c);
/* Hold the archives to lifecycle.archive_max_age and, per tenant (those
 * without one share ""), archive_max_count_per_tenant and
 * archive_max_bytes_per_tenant, the oldest evicted first; tenant NULL:
 * every tenant, and the orphaned files (a tar no committed metadata
 * names, temporary files) older than a minute removed too; else that
 * tenant's only.  Archives of keys in live (an object keyed by
 * key) and keep are left.  What was removed: [{id, tenant, user, reason
 * ("expired", "quota_count", "quota_bytes"), archived, bytes}] and
 * [{file, reason "orphan", bytes}].  Blocking: in workers. */
json_t *xd_arch_sweep(const struct xd_cfg *c, const char *tenant,
    const char *keep, json_t *live, int64_t now);
/* The same, and with an S3 store *kept: the store's archives the sweep
 * left (xd_arch_list's entries; NULL when the store did not answer). */
json_t *xd_arch_sweep_kept(const struct xd_cfg *c, const char *tenant,
    const char *keep, json_t *live, int64_t now, json_t **kept);
/* At start: archives of a tenant made before ids were per tenant
 * (named by their id, no "key") renamed to their key (xd_key). */
void xd_arch_adopt(const struct xd_cfg *c);
/* Remove id's archive (none: nothing).  The local one only: the loop
 * may call it. */
void xd_arch_discard(const struct xd_cfg *c, const char *id);
/* Remove key's archive here and, with a store, the store's (sha not
 * NULL: only while the store's is the archive of that SHA-256; another
 * host's newer one stays): 0, -1 with err (the store's failed).
 * Blocking: in workers. */
int xd_arch_drop(const struct xd_cfg *c, const char *key, const char *sha,
    char *err, size_t len) SLUICE_MUSTCHECK;
/* With a store: the store's archive of key fetched into archive_dir
 * (the local one dropped first, the store's being the archive), ready
 * for xd_arch_restore: 0 with *found (0: none there), -1 with err (the
 * store failed: nothing may be created over an archive it holds).
 * Blocking: in the create worker. */
int xd_arch_fetch(const struct xd_cfg *c, const char *key, int *found,
    char *err, size_t len) SLUICE_MUSTCHECK;
/* With a store: key's metadata there (*rc 0), NULL with *rc 1 none or -1
 * (err); the store's archives as xd_arch_list's entries (NULL with
 * err).  Blocking: in workers. */
json_t *xd_arch_store_meta(const struct xd_cfg *c, const char *key, int *rc,
    char *err, size_t len);
json_t *xd_arch_store_list(const struct xd_cfg *c, char *err, size_t len);
/* Restore id's archive into the new, empty r->workspace as r->host_uid
 * (exec_arch.c says what is checked): 0 with *out NULL (no archive) or
 * {files, bytes, skipped, archived, sha256, reason}; -1 with err and
 * *corrupt 1 when the archive fails its SHA-256 or is missing. */
int xd_arch_restore(const struct xd_cfg *c, const struct sbx_rec *r,
    json_t **out, int *corrupt, char *err, size_t len) SLUICE_MUSTCHECK;
/* main of sluice-execd --restore-helper, which the restore's child
 * execs as the sandbox's uid: the archive on fd 0 extracted into the
 * cwd, the result (JSON) on fd 1; the exit status. */
int xd_arch_restore_helper(void);
/* The restore's way of running a helper, for exec_tar.c too: fork, the
 * child becomes r's host uid and gid (no group, no capability, no new
 * privileges), cwd the directory wfd, and execs sluice-execd with args
 * (at most 6, NULL-terminated): in (-1: /dev/null) on its fd 0, out on
 * its fd 1, /dev/null on 2, no other descriptor, no environment.  0
 * with *pid, -1 (errno) when the fork fails. */
int xd_arch_helper_spawn(const struct sbx_rec *r, int in, int wfd, int out,
    const char *const *args, pid_t *pid) SLUICE_MUSTCHECK;
/* Blocking: the helper's result read from fd to its end (bounded, the
 * helper killed after 600 s), the helper reaped: the text, or NULL with
 * why. */
char *xd_arch_helper_wait(pid_t pid, int fd, const char **why);
/* s as at most max - 1 bytes of valid UTF-8 without control
 * characters (for JSON). */
const char *xd_arch_clip(const char *s, char *out, size_t max);

/* ---- exec_snap.c ---- */

struct xd_snap;
/* (path, type, size, mtime_ns, inode) of at most max_entries entries
 * under workspace, no link followed.  NULL only without memory. */
struct xd_snap *xd_snap_take(const char *workspace, size_t max_entries);
void xd_snap_free(struct xd_snap *s);
/* Against the workspace now: {"changed":[{path,change,type,size}],
 * "changed_truncated", "artifacts":[{path,size,sha256}],
 * "artifacts_skipped":[{path,size,limit}]}. */
json_t *xd_snap_diff(const struct xd_snap *before, const char *workspace,
    const struct xd_art_lims *lim);

/* ---- exec_files.c ---- */

/* Every call works inside r->workspace as r->host_uid:host_gid;
 * paths are xd_path_norm'ed.  On failure e says status and code. */
int xd_fs_list(const struct sbx_rec *r, const char *dir, const char *glob,
    int recursive, size_t max_entries, json_t **out, struct xd_perr *e)
    SLUICE_MUSTCHECK;
/* An fd open for reading on a regular file and its size. */
int xd_fs_open_read(const struct sbx_rec *r, const char *path, int *fd,
    uint64_t *size, struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_fs_write(const struct sbx_rec *r, const char *path, const void *data,
    size_t n, struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_fs_delete(const struct sbx_rec *r, const char *path,
    struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_fs_edit(const struct sbx_rec *r, const char *path, const char *old,
    size_t oldn, const char *new_, size_t newn, uint64_t max,
    json_t **out, struct xd_perr *e) SLUICE_MUSTCHECK;
/* The pieces both files APIs (this one and exec_os_fs.c) are made of:
 * the file system uid and gid of the sandbox user and back to root;
 * the workspace's O_PATH fd with the caller then as the sandbox user
 * (-1 and e set) and its end; a path opened under that fd with
 * openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV
 * ("" is the workspace itself). */
void xd_fs_as_user(const struct sbx_rec *r);
void xd_fs_as_root(void);
int xd_fs_enter(const struct sbx_rec *r, struct xd_perr *e);
void xd_fs_leave(int ws);
int xd_fs_open_in(int ws, const char *path, int flags, mode_t mode);

/* ---- exec_events.c ---- */

/* A subscriber of GET /v1/events: fn gets each frame ("event: T\n
 * data: {...}\n\n") of the events it may hear, and may unsubscribe s.
 * It carries its caller's tenant and role: a caller bound to a tenant
 * hears that tenant's events only, one bound to none (the Unix socket,
 * an unbound token: admin, app or auditor) every tenant's. */
struct xd_sub {
	TAILQ_ENTRY(xd_sub) link;
	void (*fn)(void *arg, const char *frame, size_t n);
	void *arg;
	int on;
	char tenant[SBX_ID_MAX + 1];    /* "" unbound */
	enum xd_role role;
};
TAILQ_HEAD(xd_subq, xd_sub);

void xd_event_sub(struct xd *xd, struct xd_sub *s);
void xd_event_unsub(struct xd *xd, struct xd_sub *s);
/* type "sandbox" (what: created, removed) or "command" (started,
 * exited) of a sandbox of tenant ("" none); data (consumed) the fields,
 * "what" and "ts_ms" added. */
void xd_event(struct xd *xd, const char *type, const char *what,
    const char *tenant, json_t *data);
/* What a command's events say of its argv, never the argv itself
 * (its arguments may hold anything a tenant typed): the program
 * (argv[0]'s last path component) and the SHA-256 of the argv, each
 * argument followed by a NUL byte, in lower-case hex. */
void xd_event_argv(json_t *argv, char *program, size_t plen,
    char hex[65]);

/* What GET /v1/metrics counts since the start. */
struct xd_stats {
	uint64_t created, create_failed, removed;
	uint64_t cmds_started, cmds_exited, timed_out, oom_killed, cancelled;
	uint64_t events_dropped;
	uint64_t suspended, resumed, removed_idle, archived, restored;
	uint64_t archive_failed;
	uint64_t arch_expired, arch_evicted, arch_orphans;
	uint64_t ring_dropped, ring_dropped_bytes;     /* finished commands'
	                                                 * rings let go of for
	                                                 * ring_budget_bytes */
};

/* ---- exec_audit.c ---- */

struct xd_cmd;
/* Open cfg->audit_log (its directory made 0750): -1 with err. */
int xd_audit_open(struct xd *xd, char *err, size_t errlen) SLUICE_MUSTCHECK;
void xd_audit_reopen(struct xd *xd);
void xd_audit_close(struct xd *xd);
/* One lifecycle record: action ("create", "delete", "tier",
 * "install"), the caller, the sandbox, the outcome (HTTP status and
 * error code or NULL); detail (consumed, may be NULL) more of it. */
void xd_audit_box(struct xd *xd, const char *action, const char *who,
    const char *role, const char *id, const char *tenant, const char *user,
    int status, const char *code, json_t *detail);
/* One record for an ended command, its exit code and signal (-1 none)
 * as xd_cmd_exit_code says them. */
void xd_audit_cmd(const struct xd_cmd *c, json_int_t code, json_int_t sig);

/* ---- exec_cmd.c ---- */

struct xd_box;
struct xd_cmd;

/* Who hears a command: output as it comes (stream mode only) and the
 * end.  arg is the sink's; set NULL by xd_cmd_detach. */
struct xd_sink {
	void (*output)(void *arg, struct xd_cmd *c, int stream,
	    const unsigned char *b, size_t n);
	void (*exit)(void *arg, struct xd_cmd *c);
	/* c is freed with the sink still set (a background command's, when
	 * its sandbox goes or a finished one is dropped); NULL: never */
	void (*gone)(void *arg, struct xd_cmd *c);
};

enum xd_out_mode {
	XD_OUT_KEEP,            /* foreground: the first output_cap bytes */
	XD_OUT_STREAM,          /* foreground: passed to the sink */
	XD_OUT_RING,            /* background: the last ring_bytes */
};

struct xd_stream {
	int fd;
	struct event *ev;
	unsigned char *buf;     /* KEEP: cap bytes; RING: ring_bytes */
	size_t cap, len;
	uint64_t total;         /* bytes read */
	uint64_t dropped;       /* KEEP/STREAM: bytes past the cap */
};

struct xd_cmd {
	TAILQ_ENTRY(xd_cmd) link;
	struct xd_box *box;
	char id[32];
	int background;
	enum xd_out_mode mode;
	struct sbx_proc proc;
	int pidfd;
	struct event *ev_exit, *ev_deadline, *ev_backstop;
	struct xd_stream out[2];
	int in_fd;
	struct event *ev_in;
	struct evbuffer *in;
	long timeout_s, cap;
	long cap_total;                 /* -1: none (output_cap_total) */
	int base64;
	int64_t start_mono_ms;
	int64_t started_ms, ended_ms;   /* unix milliseconds */
	int running;
	int status;                     /* wait status */
	int timed_out, cancelled, stopped, oom_killed, kill_sent;
	uint64_t oom_before;
	int oom_known;
	int paused;
	int out_dropped;                /* RING: its rings went to keep
	                                 * ring_budget_bytes */
	json_t *argv;                   /* for status */
	char cwd[SBX_PATH_MAX];
	char who[96], role[16];         /* the caller, for the audit log */
	int install;                    /* started by install */
	struct xd_snap *snap;           /* the workspace at the start */
	json_t *changes;                /* xd_snap_diff at the end */
	const struct xd_sink *sink;
	void *sink_arg;
	int pty_fd;                     /* a terminal's master, -1 none */
	int is_pty;                     /* started with one (exec_pty.c) */
};
TAILQ_HEAD(xd_cmdq, xd_cmd);

/* Start spec in b (running, no foreground command when !background).
 * NULL with e set on failure. */
struct xd_cmd *xd_cmd_start(struct xd_box *b, const struct xd_cmd_spec *spec,
    int background, enum xd_out_mode mode, const struct xd_sink *sink,
    void *sink_arg, struct xd_perr *e);
/* Kill the command's whole tree (kill_tree in a worker); why: "cancel",
 * "stop", "timeout", "delete". */
void xd_cmd_kill(struct xd_cmd *c, const char *why);
/* Stop (1) or resume (0) reading the command's pipes (stream mode: the
 * client is slow). */
void xd_cmd_pause(struct xd_cmd *c, int pause);
/* Forget the sink (the client left); the command runs to its end. */
void xd_cmd_detach(struct xd_cmd *c);
/* A terminal's input (spec->pty): queued for its master, written as it
 * takes it.  -1 when it has no terminal or more than 1 MiB waits. */
int xd_cmd_input(struct xd_cmd *c, const void *b, size_t n) SLUICE_MUSTCHECK;
struct xd_cmd *xd_cmd_find(struct xd_box *b, const char *id);
/* The result of exec (with_output: stdout and stderr too). */
json_t *xd_cmd_result(const struct xd_cmd *c, int with_output);
json_t *xd_cmd_status(const struct xd_cmd *c);
/* An ended command's exit code as every answer and record says it (a
 * signal death is 128+N, as shells say it); *sig (may be NULL) N, or -1
 * when it was not a signal. */
json_int_t xd_cmd_exit_code(const struct xd_cmd *c, json_int_t *sig);
/* The ring from off[i] of each stream. */
json_t *xd_cmd_output(const struct xd_cmd *c, const uint64_t off[2],
    int base64);
/* The ring of stream i from *off (moved to the oldest byte kept when
 * it is older, to the end when past it): *out (malloc'd, NULL when
 * empty) and *n bytes.  0, -1 without memory. */
int xd_cmd_ring(const struct xd_cmd *c, int i, uint64_t *off,
    unsigned char **out, size_t *n) SLUICE_MUSTCHECK;
/* Keep the rings of every command within ring_budget_bytes: the
 * rings of finished commands go, the oldest ended first; a running
 * command's never (they may stay over it).  Called when a ring is made
 * or a command ends, and after a reload. */
void xd_cmd_ring_budget(struct xd *xd);
/* Free an exited command (a finished background one or the
 * foreground one after its answer). */
void xd_cmd_free(struct xd_cmd *c);
/* At exit: stop watching a command (it runs on) and free it. */
void xd_cmd_forget(struct xd_cmd *c);

/* ---- exec_os_port.c: the port proxy ---- */

/* A call of one of the port proxy's routes (OpenSandbox's /proxy/{port},
 * the native /ports/{port}): what the proxy needs of it, and how it
 * answers an error (fail: status, an OpenSandbox code, a message; the
 * caller answers and frees its call), frees the call once the proxy
 * ended or took its connection (done) or keeps it (wait). */
struct xd_port_call {
	struct xd *xd;
	struct xd_box *box;
	struct evhttp_request *req;
	void (*fail)(void *arg, int status, const char *code, const char *msg);
	void (*done)(void *arg);
	void (*wait)(void *arg);
	void *arg;
	const char *drop;       /* a request header never forwarded (the
	                         * native route's Authorization: sluice's
	                         * token), NULL none */
	const char *mark;       /* a header "1" added to the server's
	                         * answers (the native route's
	                         * X-Sluice-Upstream: what is the server's,
	                         * not sluice's), NULL none */
};
/* Forward o's request (method, headers, body, path rest and query q as
 * they came) to 127.0.0.1:port inside o's sandbox; a WebSocket is relayed
 * after the server's 101. */
void xd_port_proxy(const struct xd_port_call *o, long port, const char *rest,
    const char *q);
/* SIGTERM's drain: WebSocket relays end (all 0); every exchange under
 * way ends too (all 1: drain_s passed, or the exit). */
void xd_port_proxy_drain(int all);

/* ---- exec_pty.c ---- */

/* POST /v1/sandboxes/{id}/pty {command?, cwd?, env?, cols?, rows?}: a
 * terminal, a background command on a pty (its id the session's).
 * NULL with e. */
struct xd_cmd *xd_pty_start(struct xd_box *b, json_t *body, struct xd_perr *e);
/* {session_id, running, output_offset, oldest_offset, attached, cols,
 * rows | exit_code}. */
json_t *xd_pty_status(const struct xd_cmd *c);
/* GET .../pty/{sid}/ws: the WebSocket handshake of req checked, the
 * 101 sent and the connection taken from evhttp (the caller frees its
 * call without answering): 0.  -1 with e, nothing sent (the caller
 * answers).  has_since: replay the ring from since first; takeover: a
 * client attached already is closed (4001), else 409. */
int xd_pty_attach(struct xd_cmd *c, struct evhttp_request *req, int has_since,
    uint64_t since, int takeover, struct xd_perr *e) SLUICE_MUSTCHECK;

/* ---- exec_box.c ---- */

enum xd_box_state {
	XD_BOX_CREATING,
	XD_BOX_RUNNING,
	XD_BOX_DELETING,
	XD_BOX_STOPPED,         /* its sandbox destroyed by a delete that
	                         * failed after (the archive): the workspace
	                         * and the record stay until a delete ends */
	XD_BOX_GONE,            /* removed from the list; freed when unused */
};

struct xd_box {
	TAILQ_ENTRY(xd_box) link;
	struct xd *xd;
	struct sbx_rec rec;
	const struct sbx_backend *be;
	enum xd_box_state state;
	char profile[SBX_ID_MAX + 1];
	struct xd_lims lim;
	char broker[16];                /* "ok", "unknown" */
	char eff_tier[16];              /* sluiced's effective tier, "" not
	                                 * asked yet */
	char ceiling[16];               /* and the session's ceiling */
	int op;                         /* a worker changes the record */
	struct xd_cmd *fg;
	struct xd_cmdq cmds;            /* background, running or done */
	unsigned long cmd_seq;
	int refs;                       /* commands and workers holding it */
	int proc_jobs;                  /* kill_tree and release workers
	                                 * running (exec_cmd.c): the sweep
	                                 * does not freeze under them */
	/* lifecycle (exec_box.c) */
	int64_t used_saved;             /* rec.last_used as last saved */
	int64_t lc_retry;               /* no removal by age before this */
	long lc_backoff;                /* the wait after a failed removal
	                                 * by age (doubled each time) */
	char stop_note[XD_ERR_MAX];     /* STOPPED: why */
	int restore;                    /* create: an archive to restore */
	json_t *restored;               /* what was restored, NULL none */
	int del_archive;                /* delete: archive the workspace */
	char del_reason[16];            /* "delete", "idle" */
	int arch_failed;                /* STOPPED by an archive that failed
	                                 * (the store unreachable, a wrong
	                                 * key, a full disk): archived again
	                                 * by the sweep, with backoff */
	json_t *archived;               /* delete: the archive made */
	/* create: the credentials asked for (xd_create_spec) */
	struct xd_cred_ask creds[XD_CREDS_MAX];
	int ncreds;
	/* exec_pool.c: in xd->pool, the index of its pool in cfg->pools
	 * while it waits (-1: to be dropped, its pool gone or changed, or
	 * a pool sandbox of an earlier run); pooled: taken from a pool */
	int pool_ix;
	int pool_wait;                  /* made for a pool, not taken yet */
	int pooled;
};
TAILQ_HEAD(xd_boxq, xd_box);

/* How a create or delete ends, for the API. */
typedef void (*xd_box_cb)(void *arg, struct xd_box *b, struct xd_perr *e);

/* Read the records under state_dir: each becomes a box (running, or
 * gone with a warning when its sandbox died). */
void xd_box_load_all(struct xd *xd);
/* In a worker: every sandbox's trust bundle made again from sluiced's
 * inspection CA (xd_broker_trust), at start and reload. */
void xd_box_trust_refresh(struct xd *xd);
/* The box of id in tenant (NULL: of any tenant); *n (may be NULL) how
 * many boxes of that id there are (tenant NULL: more than one is for
 * the caller to refuse as ambiguous). */
/* For exec_pool.c, which makes, takes and drops pool sandboxes the way
 * creates and deletes do: a new box (the daemon's defaults), the create
 * and delete workers' bodies (arg: the box), the side file's save, the
 * root a create gets (403/503 with e), a free uid slot (-1 none). */
struct xd_box *xd_box_new(struct xd *xd);
json_t *xd_box_create_child(void *arg);
json_t *xd_box_delete_child(void *arg);
void xd_box_side_save(const struct xd_box *b);
int xd_box_pick_root(const struct xd_cfg *c, const struct xd_create_spec *s,
    struct sbx_rec *r, struct xd_perr *e) SLUICE_MUSTCHECK;
int xd_box_slot(struct xd *xd) SLUICE_MUSTCHECK;
/* The identity and paths of a new box's record: its host key, backend,
 * shim, cgroups setting, directory, uid range, times and limits (the
 * root and slot are set before). -1 when state_dir is too long. */
int xd_box_rec_init(struct xd *xd, struct xd_box *b, const char *key,
    const struct xd_lims *lim) SLUICE_MUSTCHECK;

/* ---- exec_pool.c ---- */

/* The pools' timer, after the records are adopted (a pool sandbox of
 * an earlier run is dropped by its first tick). */
int xd_pool_start(struct xd *xd) SLUICE_MUSTCHECK;
/* Draining or reloaded: every waiting sandbox dropped (the drain waits
 * for those workers); after a reload the new pools fill again. */
void xd_pool_stop(struct xd *xd);
void xd_pool_reload(struct xd *xd);
/* Freed at exit (the drain dropped them; what is left is memory). */
void xd_pool_free(struct xd *xd);
/* ---- exec_pool_list.c: the waiting list, below exec_box.c ---- */

/* The pools' timer (exec_pool.c's tick) in ms from now. */
void xd_pool_arm(struct xd *xd, long ms);
/* A waiting sandbox for s (backend, profile, limits; image: the image
 * sha a cold create would get, "" none), out of the pool; NULL none
 * (one of an older image is left to the next tick to drop). */
struct xd_box *xd_pool_take(struct xd *xd, const struct xd_create_spec *s,
    const char *image);
/* An adopted record of a pool sandbox that was never taken: the pool
 * drops it. */
void xd_pool_adopt(struct xd *xd, struct xd_box *b);
/* A create began: the refill waits a while (the create and its first
 * commands come first). */
void xd_pool_quiet(struct xd *xd);
/* The metrics' lines (sluice_execd_pool_*; exec_pool.c). */
void xd_pool_metrics(struct xd *xd, struct evbuffer *o);

struct xd_box *xd_box_find(struct xd *xd, const char *tenant,
    const char *id, int *n);
/* Quotas, slot, then the create worker; cb once it ends (b on success).
 * -1 with e when refused at once. */
int xd_box_create(struct xd *xd, const struct xd_create_spec *s,
    xd_box_cb cb, void *arg, struct xd_perr *e) SLUICE_MUSTCHECK;
/* archive: the workspace archived first (1) or dropped with any archive
 * of the id (0); reason "delete" or "idle" (events, audit). */
int xd_box_delete(struct xd_box *b, int archive, const char *reason,
    xd_box_cb cb, void *arg, struct xd_perr *e) SLUICE_MUSTCHECK;
/* Whether id's archive is one the caller may have (create restores it,
 * DELETE ?archive=discard drops it): tenant the caller's (create: the
 * sandbox's; discard: the token's, "" unbound), user the sandbox's (NULL:
 * not checked: a discard, as DELETE does not check it); bound: the
 * caller's token is of tenant.  0 with *meta (NULL: no archive, or for
 * a discard by a caller bound to no tenant one whose metadata does not
 * read: *corrupt 1); -1 with e: 409 conflict with archive "corrupt"
 * (the metadata does not read, so whose it is is not known: not
 * restored, and dropped only by a caller bound to no tenant), 403
 * another tenant's or user's. */
int xd_box_arch_owner(const struct xd_cfg *c, const char *id,
    const char *tenant, const char *user, int bound, json_t **meta,
    int *corrupt, struct xd_perr *e) SLUICE_MUSTCHECK;
/* A call of an app uses b now: last_used, and a suspended sandbox is
 * resumed first (an event and an audit record with who and role).
 * -1 with e when it cannot be resumed. */
int xd_box_use(struct xd_box *b, const char *who, const char *role,
    struct xd_perr *e) SLUICE_MUSTCHECK;
/* last_used saved at most this often (exec_rec.c) */
#define XD_USED_SAVE_S	60
/* b was used at now (a command ended): last_used, written to the record
 * when the one on disk is older than the lifecycle's save lag. */
void xd_box_used(struct xd_box *b, int64_t now);
/* The lifecycle timer (idle_after, remove_after): started at start and
 * set again after a reload (its period follows the configuration);
 * stopped at exit. */
int xd_box_sweep_start(struct xd *xd) SLUICE_MUSTCHECK;
void xd_box_sweep_stop(struct xd *xd);
int xd_box_set_tier(struct xd_box *b, const char *tier, xd_box_cb cb,
    void *arg, struct xd_perr *e) SLUICE_MUSTCHECK;
json_t *xd_box_json(const struct xd_box *b);
/* Ask sluiced (in a worker) for the box's session and its effective
 * tier, into b->eff_tier; cb(arg, b, NULL) then, or with e. */
int xd_box_network(struct xd_box *b, xd_box_cb cb, void *arg,
    struct xd_perr *e) SLUICE_MUSTCHECK;
/* Let go of a box (exec_rec.c): freed once gone and unused. */
void xd_box_unref(struct xd_box *b);
/* At exit: free every box and command (the sandboxes stay). */
void xd_box_free_all(struct xd *xd);
/* What the workspaces and the archives take of the disk. */
struct xd_storage {
	int ok;                 /* the state dir's file system was read */
	uint64_t free, total;   /* its bytes free (to the daemon), in all */
	uint64_t reserve;       /* quotas.disk_reserve_mb */
	uint64_t workspaces;    /* disk_mb of the live sandboxes */
	uint64_t unallocated;   /* of those, not yet allocated on disk */
	int64_t headroom;       /* free - unallocated - reserve: what a
	                         * create's workspace may take */
	uint64_t archives, narchives;   /* archives: 0 unless asked */
};
/* archives: list the archives too (reads each one's metadata). */
void xd_box_storage(struct xd *xd, struct xd_storage *s, int archives);
/* The archives health and metrics show: archive_dir's (xd_arch_list),
 * or with an S3 store the store's as the last sweep listed them. */
json_t *xd_arch_list_shown(struct xd *xd);
/* Live sandboxes (creating or running) in total, of tenant, of user. */
void xd_box_counts(struct xd *xd, const char *tenant, const char *user,
    long *total, long *nt, long *nu);

/* ---- exec_health.c ---- */

/* The health document; bes (consumed) the backends as a worker probed
 * them (NULL: probe here), broker_ok/why from a ping. */
json_t *xd_health_json(struct xd *xd, json_t *bes, int broker_ok,
    const char *why);
/* The health document's "storage": the state dir's file system (free,
 * total, headroom), the reserve, the workspaces' bytes (and those not
 * yet allocated), the archives' bytes and count. */
json_t *xd_health_storage(struct xd *xd);
/* Ping sluiced in a worker, then cb(arg, health). */
int xd_health(struct xd *xd, void (*cb)(void *arg, json_t *h), void *arg)
    SLUICE_MUSTCHECK;

/* ---- exec_node.c ---- */

/* At start, after xd_box_load_all: a drain kept in <state_dir>/node.json
 * goes on. */
int xd_node_start(struct xd *xd) SLUICE_MUSTCHECK;
void xd_node_stop(struct xd *xd);
/* PUT /v1/node: body {"draining": bool}; -1 with e (400, 500). */
int xd_node_set(struct xd *xd, json_t *body, const char *who,
    const char *role, struct xd_perr *e) SLUICE_MUSTCHECK;
/* {draining, and while draining remaining, since, removed}. */
json_t *xd_node_state(struct xd *xd);
/* GET /v1/node's document from the health document (consumed). */
json_t *xd_node_json(struct xd *xd, json_t *health);
/* sluice_execd_draining and the drain's figures. */
void xd_node_metrics(struct xd *xd, struct evbuffer *o);

/* ---- exec_tar.c ---- */

/* Batch files: PUT and GET /v1/sandboxes/{id}/archive?path=DIR (see
 * exec_tar.c).  Pure, for the fuzz harness: DIR of the query (NULL: the
 * workspace) normalized into out, -1 with e (400); the kind of a PUT's
 * body from its first bytes ("tar", "gzip", "zstd"; NULL none). */
int xd_tar_dir_parse(const char *q, char *out, size_t len, struct xd_perr *e)
    SLUICE_MUSTCHECK;
const char *xd_tar_body_kind(const unsigned char *b, size_t n);
/* The answer of a PUT: cb(arg, result, NULL) or cb(arg, NULL, e). */
typedef void (*xd_tar_cb)(void *arg, json_t *res, struct xd_perr *e);
/* Extract body (a tar) under dir in a worker, b held (op) meanwhile;
 * the body is drained.  -1 with e when refused at once (413 over
 * max_archive_bytes, 400 not a tar or a bad path). */
int xd_tar_put(struct xd_box *b, struct evbuffer *body, const char *dir,
    xd_tar_cb cb, void *arg, struct xd_perr *e) SLUICE_MUSTCHECK;
/* Answer req with dir as a tar, as the client reads; done(arg) once the
 * answer ended (req answered, one way or another).  -1 with e when
 * refused at once (req not answered). */
int xd_tar_get(struct xd *xd, struct evhttp_request *req, struct xd_box *b,
    const char *dir, const char *who, void (*done)(void *), void *arg,
    struct xd_perr *e) SLUICE_MUSTCHECK;
/* main of sluice-execd --tar-helper put DIR MAX | get DIR (as the
 * sandbox's uid, cwd the workspace). */
int xd_tar_helper(int argc, char **argv);

/* ---- the daemon (execd.c fills it, exec_api.c serves it) ---- */

struct evhttp;
struct evhttp_bound_socket;
struct event_base;
struct ssl_ctx_st;
struct clog;
struct xd_call;
TAILQ_HEAD(xd_callq, xd_call);

struct xd {
	struct event_base *base;
	struct xd_cfg *cfg;
	struct xd_boxq boxes;
	struct xd_jobq jobs;
	struct xd_callq calls;          /* requests waiting for a worker or
	                                 * a command */
	long creating;                  /* creates under way */
	unsigned long job_seq;
	int draining;
	struct evhttp *http_unix, *http_tls;
	struct evhttp_bound_socket *bound_unix, *bound_tls;
	struct ssl_ctx_st *tls_ctx;
	char sock_path[SBX_PATH_MAX + 16];     /* canonical, "" none */
	struct clog *audit;             /* exec_audit.c */
	struct xd_subq subs;            /* exec_events.c */
	struct xd_stats stats;
	uint64_t ring_held;             /* bytes of every command's rings */
	struct usock_id sock_id;
	struct event *ev_sweep;         /* exec_box.c: the lifecycle */
	int arch_sweeping;              /* exec_box.c: its archive worker */
	json_t *arch_store;             /* with an S3 store: its archives
	                                 * (xd_arch_list's entries) as the
	                                 * last sweep left them, for health
	                                 * and metrics (NULL: none yet) */
	struct xd_gate *gate;           /* exec_gate.c: tcp.listen's */
	uint64_t reply_queued;          /* file and exec answers' bytes
	                                 * queued */
	struct xd_os *os;               /* exec_os.c: NULL off */
	/* exec_node.c: PUT /v1/node's drain (xd_box_create refuses while
	 * node_draining) */
	int node_draining, node_drained;
	int64_t node_since;
	uint64_t node_removed;
	struct event *ev_node;
	/* exec_pool.c: the sandboxes waiting in the warm pools (never in
	 * boxes: no route, quota, sweep or listing sees them) */
	struct xd_boxq pool;
	long pool_filling;              /* pool creates under way */
	int64_t pool_retry[XD_POOLS_MAX];       /* no fill before (unix s) */
	struct event *ev_pool;
	int64_t pool_quiet_until;       /* no fill before (monotonic ms) */
	uint64_t pool_filled, pool_taken, pool_fill_failed, pool_dropped;
};

/* ---- exec_api.c ---- */

int xd_api_listen(struct xd *xd, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* New configuration: TLS context and body limits. */
int xd_api_reload(struct xd *xd, char *err, size_t errlen) SLUICE_MUSTCHECK;
void xd_api_close(struct xd *xd);
/* Stop accepting connections (drain); open ones are still served. */
void xd_api_stop_accepting(struct xd *xd);
/* The route table as "METHOD PATTERN" lines (--routes). */
void xd_api_print_routes(void);
/* Pending requests: none left means drained. */
int xd_api_pending(const struct xd *xd);

#endif /* SLUICE_EXECD_INT_H */
