/*
 * console.h: `sluicectl console`, a web console served on loopback.
 *
 * The server listens on 127.0.0.1 (and ::1) only and holds no authority
 * of its own: every API call a page makes is made by this process to
 * sluiced's control socket (and to the executor's exec.sock when it
 * answers), as the user who started it, so the page has exactly that
 * user's role.  The way in is a one-time token in the URL printed at
 * start; its first use sets a session cookie (HttpOnly, SameSite=Strict)
 * and redirects to the URL without it.  Every request must carry the
 * cookie and a loopback Host; a request that changes anything must also
 * carry an Origin equal to http://<Host>.  The pages (HTML, CSS, JS) are
 * compiled into the binary (console_assets.c, generated from
 * proxy/sluicectl/console/).
 */
#ifndef SLUICE_CONSOLE_H
#define SLUICE_CONSOLE_H

#include <stddef.h>

struct event_base;

struct console_cfg {
	const char *socket;      /* sluiced's control socket */
	const char *exec_socket; /* the executor's, or NULL for none */
	const char *log;         /* the connection log, or NULL: the path
	                          * sluiced's health names */
	const char *log_default; /* when sluiced does not answer */
	int port;                /* 0: one the kernel picks */
};

struct console;

/* Bind 127.0.0.1 (and ::1 where the host has it) on base.  NULL with a
 * message in err. */
struct console *console_new(struct event_base *base,
    const struct console_cfg *cfg, char *err, size_t errlen);
int console_port(const struct console *c);
/* The one-time token (64 hex digits) the URL carries. */
const char *console_token(const struct console *c);
void console_free(struct console *c);

/* Serve until SIGINT or SIGTERM, printing the URL to stdout first.
 * Returns sluicectl's exit code. */
int console_run(const struct console_cfg *cfg);

/* ---- pieces exposed for tests ---- */

#define CONSOLE_SECRET_HEX 64   /* 32 random bytes, hex */

struct console_auth {
	char token[CONSOLE_SECRET_HEX + 1];   /* in the URL; one use */
	int token_used;
	char secret[CONSOLE_SECRET_HEX + 1];  /* the cookie's value; "" until
	                                       * the token is used */
	char cookie[48];                      /* the cookie's name */
};

/* A fresh token; the cookie is named after the port (cookies are not
 * kept apart by port, two consoles must not overwrite each other's).
 * 0 / -1 (no randomness). */
int console_auth_init(struct console_auth *a, int port) SLUICE_MUSTCHECK;
/* 1 when presented is the token and it was not used yet: it is used up
 * and a new session secret made.  0 otherwise.  Constant time in the
 * token's bytes. */
int console_auth_redeem(struct console_auth *a, const char *presented);
/* 1 when the Cookie header (or NULL) carries the session secret. */
int console_auth_cookie(const struct console_auth *a, const char *header);
/* 1 for a Host header naming loopback: localhost, 127.0.0.1 or [::1],
 * with an optional port.  Anything else is a name that resolved here
 * (DNS rebinding) or a proxy's doing. */
int console_host_ok(const char *host);
/* 1 when origin is exactly http://<host> (host as the Host header). */
int console_origin_ok(const char *origin, const char *host);

/* Where an /api/ path goes. */
enum console_upstream { CUP_SLUICED, CUP_EXEC };

struct console_route {
	const char *method;
	enum console_upstream up;
	const char *pattern;     /* the upstream path; {id} and {grant}
	                          * match one segment */
	int body;                /* takes a JSON object */
	int names_only;          /* the answer's "credentials" are cut to
	                          * name, tenant, hosts, inject.header,
	                          * methods, paths (no placeholder) */
};

/*
 * Find the route for method and path (/api/sluiced/v1/... or
 * /api/exec/v1/...).  On a match, the route, with the upstream path in
 * upath.  NULL otherwise, with *status 404 (no such path) or 405 (not
 * with that method).
 */
const struct console_route *console_route_find(const char *method,
    const char *path, char *upath, size_t upathlen, int *status);

/* Embedded files (console_assets.c). */
struct console_asset {
	const char *name;        /* "index.html" */
	const unsigned char *data;
	size_t len;
};
extern const struct console_asset console_assets[];  /* name NULL ends */

/* The asset a GET path names ("/" is index.html), or NULL; *type gets
 * its Content-Type. */
const struct console_asset *console_asset_find(const char *path,
    const char **type);

#endif /* SLUICE_CONSOLE_H */
