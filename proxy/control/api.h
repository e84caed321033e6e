/*
 * api.h: sluiced's control API (DESIGN.md "Control API", sluiced(8)).
 *
 * HTTP/1.1 with JSON bodies, served by evhttp on a Unix socket (roles
 * from the peer's uid and gids) and, when configured, on TCP with TLS
 * (roles from bearer tokens).  The API parses, authenticates, authorises
 * and maps results; every change is done by ctl.h, which also writes the
 * admin record and saves the state file.
 */
#ifndef SLUICE_API_H
#define SLUICE_API_H

#include <stddef.h>

struct event_base;
struct cfg;

/*
 * Start listening as c->control says.  Call once the sessions are
 * restored and before sluiced reports ready.  Returns -1 with a message
 * in err (nothing is left listening then).  c need not outlive the call.
 */
int api_start(struct event_base *base, const struct cfg *c, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

/*
 * Apply a reloaded configuration: callers, tokens (token files are read
 * again), limits, and the listeners when their keys changed; the TLS
 * certificate and key are read again in any case.  On -1 (logged) the
 * running API is kept as it was.
 */
int api_reload(const struct cfg *c);

/* Close the listeners and their connections, remove the control socket. */
void api_stop(void);

#endif /* SLUICE_API_H */
