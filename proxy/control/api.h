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
struct evhttp_request;
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

/*
 * One call whose caller is known, apart from the connection it came on:
 * a caller in no role refused (401 on TLS, 403 on the Unix socket), the
 * route (404, 405), no query, the role, the {id} and {grant} segments,
 * the body (what the route takes, read as jsonstrict.h says), then the
 * handler.  req is answered exactly once, or taken over by the event
 * stream.  The request callback calls it once it knows the caller; the
 * fuzz harness (tests/fuzz/fuzz_api.c) calls it with requests of its own.
 */
struct api_call_in {
	int tls;                 /* came on the TLS listener */
	int role;                /* enum cfg_role of the caller */
	const char *who;         /* the caller, as audit records name it */
	const char *tenant;      /* a token's tenant (control.tokens[].tenant);
	                            NULL: bound to none */
	int method;              /* enum evhttp_cmd_type */
	const char *path;        /* decoded by evhttp, without the query */
	const char *query;       /* NULL: none */
	size_t max_body;         /* evhttp has enforced it; checked again */
};
void api_serve(struct evhttp_request *req, const struct api_call_in *in);

#endif /* SLUICE_API_H */
