/*
 * console_log.h: the console's reads of the connection log file, each
 * in a child process.
 *
 * A query or a chain verification reads the whole file: in the
 * console's own process it would stop the event loop (and with it the
 * prompt cards' stream) for as long as that takes.  The child reads with
 * the console user's own rights, as `sluicectl log` does, writes its
 * answer (a status line, then JSON) to a pipe and exits; it has a time
 * limit of its own.
 */
#ifndef SLUICE_CONSOLE_LOG_H
#define SLUICE_CONSOLE_LOG_H

#include <stdarg.h>
#include <stddef.h>

#include "proxy/sluicectl/ctl_log.h"

struct event_base;
struct clj;

#define CLJ_LIMIT_MAX 1000      /* records one query answers with */
#define CLJ_OUT_MAX (48 * 1024 * 1024)
#define CLJ_TIME_LIMIT_S 120

/* Where the log is: path, else what sluiced's health on socket names,
 * else fallback. */
struct clj_where {
	const char *path;
	const char *socket;
	const char *fallback;
};

/* status is an HTTP status (200, 403 for an unreadable log, 404 for a
 * missing one, 500, 504 past the time limit); json its body.  Exactly
 * once unless cancelled; the job is freed after. */
typedef void (*clj_done_fn)(void *arg, int status, const char *json,
    size_t len);

/* The last limit (1..CLJ_LIMIT_MAX) records that pass f, oldest first:
 * {"file","matched","records":[...],"bad_lines"}. */
struct clj *clj_query(struct event_base *base, const struct clj_where *w,
    const struct ctlog_filter *f, size_t limit, clj_done_fn done, void *arg,
    char *err, size_t errlen);

/* The hash chain: {"file","ok","records","fragments","last_seq",
 * "last_hash","line","error","anchor","keyed"}.  When the path is
 * sluiced's, the record its health names as the last must be in the
 * file (anchor: seq, hash, found); macs are not checked (keyed says
 * whether the records carry them). */
struct clj *clj_verify(struct event_base *base, const struct clj_where *w,
    clj_done_fn done, void *arg, char *err, size_t errlen);

/* Kill and reap the child; done is not called. */
void clj_cancel(struct clj *j);

/* The APIs' error shape, {"error":{"code","message"}}, as a JSON text
 * (malloc; NULL when out of memory): the console's answers use it too. */
char *clj_error_vtext(const char *code, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* The work of a query, as the child does it, into a JSON text (malloc)
 * and a status.  Exposed for tests. */
char *clj_query_text(const char *path, const struct ctlog_filter *f,
    size_t limit, int *status);

#endif /* SLUICE_CONSOLE_LOG_H */
