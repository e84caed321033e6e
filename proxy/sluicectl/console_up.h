/*
 * console_up.h: the console's calls to a control socket, without
 * blocking its event loop.
 *
 * One request per connection ("Connection: close") to a Unix socket,
 * the answer read to the server's close and parsed by
 * ctlh_parse_response(), so it is held to the same limits as every
 * other sluicectl call.  Bounded by a timeout for the whole exchange.
 */
#ifndef SLUICE_CONSOLE_UP_H
#define SLUICE_CONSOLE_UP_H

#include <stddef.h>

#include "proxy/sluicectl/ctl_http.h"

struct event_base;
struct cup;

/* The outcome, exactly once, unless cancelled first: r set (status,
 * body) when a response was read, else NULL and a reason in err.  The
 * call is freed when the callback returns; r with it. */
typedef void (*cup_done_fn)(void *arg, const struct ctlh_resp *r,
    const char *err);

#define CUP_MAX (4 * 1024 * 1024)   /* head and body of one answer */

/*
 * Send method path (body: NULL, or bodylen bytes of JSON) to the Unix
 * socket at path sock.  NULL with a message in err when it cannot even
 * start (path too long, no memory); a socket that does not answer is
 * reported through done.
 */
struct cup *cup_request(struct event_base *base, const char *sock,
    const char *method, const char *path, const char *body, size_t bodylen,
    int timeout_s, cup_done_fn done, void *arg, char *err, size_t errlen);

/* Forget a call that has not completed; done is not called. */
void cup_cancel(struct cup *u);

#endif /* SLUICE_CONSOLE_UP_H */
