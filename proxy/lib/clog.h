/*
 * clog.h: the connection log, JSON Lines with a SHA-256 hash chain.
 *
 * One record per decision, prompt, answer, close and admin action
 * (DESIGN.md, "Connection log").  Every record carries "seq" (monotonic
 * across restarts: the tail of an existing log is read at open), "ts"
 * (RFC 3339 UTC with milliseconds), "prev" (the hash of the record before,
 * 64 zeros for the first record ever) and, last, "hash".
 *
 * Chain rule, so that a verifier works on the exact bytes and needs no
 * canonical JSON: a line is
 *     <body>,"hash":"<hex>"}\n
 * where <body> is the record serialised compactly up to but excluding its
 * closing brace, and hash = hex(SHA-256(<body>)).  <body> contains "prev".
 *
 * Strings from the sandbox go through clog_rec_str(), which sanitises
 * (C0/C1 controls, DEL, U+2028/2029, bidi controls and zero-width
 * characters and invalid UTF-8 become '?') and caps them.
 *
 * Fail closed: clog_write() returns -1 when the record could not be
 * written whole; the proxy then refuses the connection.  Writes are
 * single write(2) calls on an O_APPEND descriptor, of one record or of
 * the records queued with clog_queue() and the one written after them.
 */
#ifndef SLUICE_CLOG_H
#define SLUICE_CLOG_H

#include <stddef.h>
#include <stdint.h>

#define CLOG_STR_CAP 512     /* bytes kept of one sandbox string */

struct clog;
struct clog_rec;

/*
 * Open (create 0640) the log at path, or "-" for stdout.  Reads the last
 * complete line of an existing file to continue seq and the chain; a last
 * line that does not parse is an error (a verifier would flag it too).
 * A torn tail (bytes after the last newline, from a crash mid-write) is
 * skipped: the chain continues from the line before it and the next record
 * starts on a new line; the verifier still reports the torn line.
 * Returns NULL and fills err on failure.
 */
struct clog *clog_open(const char *path, char *err, size_t errlen);
/* Reopen the same path (after logrotate moved it); the chain continues
 * from the last hash written.  0 / -1. */
int clog_reopen(struct clog *l) SLUICE_MUSTCHECK;
void clog_close(struct clog *l);
/* 1 while the last write succeeded. */
int clog_healthy(const struct clog *l);
uint64_t clog_last_seq(const struct clog *l);
const char *clog_path(const struct clog *l);
/* Records written / failed since open (for health and metrics). */
uint64_t clog_written(const struct clog *l);
uint64_t clog_failed(const struct clog *l);
/* Tell fn (may be NULL) when the log's file system gets fewer than bytes
 * free (low 1; 0: never) and when it has room again (low 0); looked at
 * now and then at most once a second as records are written. */
typedef void (*clog_space_fn)(const char *path, int low,
    uint64_t free_bytes, uint64_t min_free);
void clog_set_min_free(struct clog *l, uint64_t bytes, clog_space_fn fn);
/* Free bytes at the last look (UINT64_MAX: unknown, or stdout), and 1
 * while that is below the minimum. */
uint64_t clog_free_bytes(const struct clog *l);
int clog_low_space(const struct clog *l);

/*
 * A keyed chain (sluiced(8), "Connection log"): with a signer set, each
 * line carries after its hash a "mac", HMAC-SHA256 under a key the
 * writer never holds, over the 64 hex characters of the hash:
 *     <body>,"hash":"<hex>","mac":"<hex>"}\n
 * sign gets the record's seq, prev and hash and fills mac (64 hex and a
 * NUL); -1 means no mac, and the record is not written (fail closed).
 */
typedef int (*clog_sign_fn)(void *arg, uint64_t seq, const char *prev,
    const char *hash, char mac[65]);
void clog_set_signer(struct clog *l, clog_sign_fn fn, void *arg);
/* 1 with a signer set. */
int clog_keyed(const struct clog *l);
/* The hash of the last record written or found at open (64 zeros for
 * an empty log): with clog_last_seq, the head of the chain. */
const char *clog_last_hash(const struct clog *l);

/* Record builder; fields keep insertion order after ts, seq, event. */
struct clog_rec *clog_rec_new(const char *event);
void clog_rec_free(struct clog_rec *r);
/* Trusted strings (our own names, codes). NULL val -> JSON null. */
void clog_rec_str(struct clog_rec *r, const char *key, const char *val);
/* Untrusted bytes from the sandbox: sanitised and capped. */
void clog_rec_ustr(struct clog_rec *r, const char *key, const char *val,
    size_t len);
void clog_rec_int(struct clog_rec *r, const char *key, int64_t v);
void clog_rec_bool(struct clog_rec *r, const char *key, int v);
/* Array of trusted strings (addresses). */
void clog_rec_strv(struct clog_rec *r, const char *key,
    const char *const *vals, size_t n);
/* Any jansson value (json_t *), reference stolen; for admin records. */
void clog_rec_json(struct clog_rec *r, const char *key, void *json);

/* Write and free the record (always frees).  0 / -1.  Records queued
 * before it go in the same write(2), ahead of it; when that write fails
 * none of them counts. */
int clog_write(struct clog *l, struct clog_rec *r) SLUICE_MUSTCHECK;
/*
 * Chain the record and queue it for the next clog_write or clog_flush
 * (always frees).  For records nothing waits on (a close): the caller
 * flushes before the loop sleeps, so the lines of one loop turn cost one
 * write(2).  A record that must be in the file before the proxy acts on
 * it (a decision) uses clog_write.  -1 when it cannot be built.
 * clog_reopen and clog_close write what is queued first.
 */
int clog_queue(struct clog *l, struct clog_rec *r) SLUICE_MUSTCHECK;
/* Write what clog_queue queued, in one write(2).  0 / -1 (then none of
 * it counts: seq and prev continue from before it). */
int clog_flush(struct clog *l) SLUICE_MUSTCHECK;

/*
 * Sanitise untrusted bytes into out (NUL-terminated, at most cap bytes of
 * text plus "..." when cut).  Returns out.  Exposed for tests and for
 * refusal bodies.
 */
char *clog_sanitize(const char *in, size_t len, char *out, size_t outlen,
    size_t cap);

/* 1 when in is valid UTF-8 with none of the characters clog_sanitize
 * replaces (a string that may be shown as it is). */
int clog_text_safe(const char *in, size_t len);

/*
 * JSON text (jansson's output, or any body about to be printed) with
 * every C0 control but tab, newline and return, DEL, C1 control, bidi
 * and zero-width format character written as a \uXXXX escape, and
 * invalid UTF-8 as \ufffd: still the same JSON, inert on a terminal.
 * Returns malloc'd text (*outlen its length), NULL when out of memory.
 */
char *clog_json_escape(const char *in, size_t len, size_t *outlen);

/*
 * Verify a log file.  Returns 0 if every record parses, seq increases by
 * one, prev matches the previous hash and each hash matches its body.
 * Otherwise -1 with res->bad_line (1-based) and a message in err.
 *
 * Torn fragments, what a write cut short leaves behind (a crash, or a
 * short write that could not be cut back), are reported through note
 * and skipped: lines that start like a record but are not one, when the
 * record after them continues the chain from the record before them,
 * and a last line with no newline.  Anything else that is not a record
 * fails.
 */
/* A record the verifier must find as it was: its seq and hash, kept
 * elsewhere (a SIEM, from /v1/health). */
struct clog_anchor {
	uint64_t seq;
	char hash[65];
};

struct clog_verify_opts {
	/* NULL: accept whatever the first record's prev is (a rotated
	 * file) */
	const char *start_prev;
	/* Non-NULL: every record must carry the mac of its hash under this
	 * key. */
	const void *key;
	size_t keylen;
	/* Each anchor's seq must be a record of the file with its hash: an
	 * anchor before the first record is a cut head (or an older file),
	 * after the last a cut tail, and another hash a rewrite. */
	const struct clog_anchor *anchors;
	size_t nanchors;
	/* A finding that is not a failure (a torn fragment); may be NULL. */
	void (*note)(void *arg, uint64_t line, const char *msg);
	void *arg;
};

struct clog_verify_result {
	uint64_t records;               /* records verified */
	uint64_t bad_line;              /* the failing line, 0 when none */
	uint64_t fragments;             /* torn fragments skipped */
	uint64_t first_seq, last_seq;   /* of the records verified */
	char last_hash[65];             /* "" when none */
	uint64_t macs;                  /* macs checked (with a key) */
	uint64_t anchors;               /* anchors found */
};

int clog_verify(const char *path, const struct clog_verify_opts *o,
    struct clog_verify_result *res, char *err, size_t errlen) SLUICE_MUSTCHECK;

/* hex(HMAC-SHA256(key, the 64 hex characters of hash)) into mac.  0/-1. */
int clog_mac(const void *key, size_t keylen, const char *hash,
    char mac[65]) SLUICE_MUSTCHECK;

/* clog_verify with start_prev alone. */
int clog_verify_file(const char *path, const char *start_prev,
    uint64_t *records, uint64_t *bad_line, char *err, size_t errlen) SLUICE_MUSTCHECK;

#endif /* SLUICE_CLOG_H */
