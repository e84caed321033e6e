/*
 * log.h: the daemons' diagnostics on stderr, systemd style (sluiced's
 * and sluice-execd's: one logger, named by the program).
 *
 * A line is "<N>NAME: LEVEL: message" (NAME "sluiced" unless
 * px_log_set_name said otherwise); journald reads the "<N>" prefix.  Operator lines name their subsystem ("firewall: ...",
 * "reload: ..."); debug lines start with __func__.  This is the leaf
 * every file of sluiced may use: it knows nothing of the daemon.
 */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#define PX_NAME "sluiced"

#define PX_ERR 3
#define PX_WARN 4
#define PX_INFO 6
#define PX_DEBUG 7

/* 1: PX_DEBUG lines are written too (--verbose). */
extern int px_verbose;

void px_log(int prio, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Where lines go instead of stderr (NULL: stderr again); line is the
 * message without prefix or newline.  For tests that read what a module
 * said. */
typedef void (*px_log_sink)(int prio, const char *line);
void px_log_set_sink(px_log_sink sink);

/* The program's name at the head of each line (a string that outlives
 * the logger: a literal). */
void px_log_set_name(const char *name);

#endif /* SLUICE_LOG_H */
