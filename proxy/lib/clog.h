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

/*
 * Verify a log file.  Returns 0 if every line parses, seq increases by
 * one, prev matches the previous hash and each hash matches its body.
 * Otherwise -1 with *bad_line (1-based) and a message in err.  start_prev
 * may be NULL (accept whatever the first line's prev is: a rotated file).
 */
int clog_verify_file(const char *path, const char *start_prev,
    uint64_t *records, uint64_t *bad_line, char *err, size_t errlen) SLUICE_MUSTCHECK;

#endif /* SLUICE_CLOG_H */
