/*
 * util.h: small helpers every program of sluice shares (sluiced,
 * sluicectl, sluice-run).  libc only.
 */
#ifndef SLUICE_UTIL_H
#define SLUICE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* glibc's sys/queue.h lacks the _SAFE walkers the BSDs have */
#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

/*
 * The error idiom: format a message into err (when err is not NULL and
 * errlen not 0) and return -1, so that a failing path reads
 * "return errf(err, errlen, "...", ...);".
 */
int errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* mkdir -p: path and every missing parent, each made with mode.  0, or
 * -1 with errno (ENAMETOOLONG for a path longer than PATH_MAX). */
int util_mkdir_p(const char *path, mode_t mode) SLUICE_MUSTCHECK;

/* mkdir -p of the directory part of path ("a/b/c" makes "a/b"); nothing
 * for a path with no directory part.  0 / -1 with errno. */
int util_mkdir_parent(const char *path, mode_t mode) SLUICE_MUSTCHECK;

/* The directory part of path into dir: "/" for "/x", "" for "x".  0, or
 * -1 when it does not fit. */
int util_parent_dir(const char *path, char *dir, size_t len) SLUICE_MUSTCHECK;

/* "2026-12-01T21:28:39Z" (UTC, seconds); len of at least 21. */
void util_rfc3339(time_t t, char *buf, size_t len);

/*
 * One UTF-8 sequence at s[0..n) (n > 0), by Unicode's table 3-7 (no
 * overlong forms, no surrogates, nothing past U+10FFFF): its length, 1
 * to 4, with *cp set; 0 when n cuts it short (the bytes so far could
 * still begin a valid one); -1 when it is ill-formed.  On 0 and -1,
 * *bad (when bad is not NULL) is the length of the maximal ill-formed
 * prefix, at least 1: what a sanitizer replaces by one '?'.  The one
 * decoder of sluice (the log, the configurations, the executor's
 * output).
 */
int util_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp,
    size_t *bad);

/* Frees the n strings of v, then v (NULL and 0 are fine). */
void util_strv_free(char **v, size_t n);

/*
 * The reason phrase of an HTTP status, one table for every server of
 * sluice (the relay's refusals, the control API, the executor's API);
 * "Error" for a status it does not name.
 */
const char *util_http_phrase(int status);

/*
 * recv(2) and send(2) again while a signal interrupts them: what the
 * call returns, errno set on -1.  For the helpers' sockets, where a
 * signal is no reason to give up.
 */
ssize_t util_recv(int fd, void *buf, size_t len, int flags) SLUICE_MUSTCHECK;
ssize_t util_send(int fd, const void *buf, size_t len, int flags)
    SLUICE_MUSTCHECK;

/*
 * Waits up to timeout_ms for fd to be readable, again with the whole
 * timeout when a signal interrupts (a signal may lengthen the wait):
 * poll(2)'s answer, > 0 readable, 0 timed out, -1 with errno.
 */
int util_wait_readable(int fd, int timeout_ms) SLUICE_MUSTCHECK;

/* CLOCK_MONOTONIC in milliseconds: for deadlines and durations. */
int64_t util_now_ms(void);

/* CLOCK_REALTIME in milliseconds since the epoch: for times shown to a
 * person or a client (timestamps), never for durations. */
int64_t util_wall_ms(void);

/* The value of the hex digit c (either case), or -1. */
int util_hexval(int c);

/*
 * path replaced by data[0..len) as one step: a temporary file beside it
 * (path.tmp, made afresh with mode, never through a link), written,
 * fsynced, renamed over path, the directory fsynced; the parent made
 * (0750) when missing.  A crash leaves the old file or the new one,
 * never half of either.  0, or -1 with errno (the temporary removed).
 */
int util_write_atomic(const char *path, const void *data, size_t len,
    mode_t mode) SLUICE_MUSTCHECK;

/* Reads fd until len bytes or its end, again when a signal interrupts:
 * the count (below len: the end came first), or -1 with errno. */
ssize_t util_read_full(int fd, void *buf, size_t len) SLUICE_MUSTCHECK;
/* Closes whichever of a pair of descriptors (a pipe's, a socketpair's)
 * is open and sets both to -1: a cleanup path's one line. */
void util_close_pair(int fd[2]);

#endif /* SLUICE_UTIL_H */
