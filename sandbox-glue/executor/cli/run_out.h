/*
 * run_out.h: what sluice-run's verbs (run_api.c, image_verbs.c) say on
 * the terminal when they give up, and how they quote what came from
 * callers and sandboxes.  Shared by sluice-run and the backends' test
 * driver (it links image_verbs.c).
 */
#ifndef SLUICE_RUN_OUT_H
#define SLUICE_RUN_OUT_H

/* "sluice-run: " and the message on stderr, then exit(code). */
void run_die(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/*
 * s as it may be printed on a terminal (sbx_text_safe: controls, C1,
 * bidirectional and invisible characters escaped); NULL as "".  The
 * result lives until the fourth call after this one: four may stand in
 * one message.
 */
const char *run_safe(const char *s);

#endif /* SLUICE_RUN_OUT_H */
