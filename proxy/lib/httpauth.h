/*
 * httpauth.h: the bearer token of a request, for the two HTTP APIs that
 * take one (sluiced's control API, sluice-execd's API).
 */
#ifndef SLUICE_HTTPAUTH_H
#define SLUICE_HTTPAUTH_H

#include <stddef.h>

struct evkeyvalq;

/*
 * The token of "Authorization: Bearer TOKEN" in the headers h: NULL
 * unless there is exactly one Authorization header (two could let a
 * proxy in front check one while the API reads the other), its scheme
 * is Bearer and the token has 1 to max bytes.  The pointer is into h.
 */
const char *httpauth_bearer(const struct evkeyvalq *h, size_t max);

#endif
