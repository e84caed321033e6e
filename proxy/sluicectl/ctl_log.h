/*
 * ctl_log.h: sluicectl's commands on the connection log file itself
 * (tail, query), which need no running daemon.  The record format is
 * clog.h's; verify is clog_verify_file().
 *
 * Text output is one fixed-width line per record with every string
 * sanitised for the terminal; JSON output is the log's own lines, byte
 * for byte, so that they still verify (a control, bidi or zero-width
 * character that sluiced would have escaped is escaped here too).
 */
#ifndef SLUICE_CTL_LOG_H
#define SLUICE_CTL_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>

/* A NULL member does not filter. */
struct ctlog_filter {
	const char *session, *tenant, *host, *decision, *reason, *event;
	const char *rule;       /* request_rule */
	const char *credential;
	const char *since;      /* ts >= since */
	const char *until;      /* ts's first strlen(until) bytes <= until */
};

struct ctlog_opts {
	int json;               /* raw JSON Lines instead of text */
	FILE *out;
	FILE *diag;             /* warnings (lines that are not records) */
};

/* 1 when s is an RFC 3339 UTC prefix such as 2024, 2024-05-01 or
 * 2024-05-01T10:00:00.5Z. */
int ctlog_ts_valid(const char *s);

/* 1 when the record (a jansson json_t *) passes the filter. */
int ctlog_match(const void *rec, const struct ctlog_filter *f);

/* Print records of path that pass f; *matched counts them.  0 / -1. */
int ctlog_query(const char *path, const struct ctlog_filter *f,
    const struct ctlog_opts *o, uint64_t *matched, char *err, size_t errlen) SLUICE_MUSTCHECK;

/*
 * Print the last n complete lines of path; with follow, keep printing
 * lines as they are appended, reopening the path when it is replaced
 * (rotation: another inode) or truncated, until *stop becomes nonzero
 * or the output fails.  0 / -1.
 */
int ctlog_tail(const char *path, long n, int follow,
    const volatile sig_atomic_t *stop, const struct ctlog_opts *o, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

#endif /* SLUICE_CTL_LOG_H */
