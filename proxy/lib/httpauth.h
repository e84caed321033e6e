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

/* A token's length in its file and in a request, for both APIs. */
#define HTTPAUTH_TOKEN_MIN	16
#define HTTPAUTH_TOKEN_MAX	4096
#define HTTPAUTH_DIGEST_LEN	32      /* SHA-256 */

/*
 * A token file (a link followed: Kubernetes Secrets are links; the file
 * reached a regular one): one token of min to max (at most
 * HTTPAUTH_TOKEN_MAX) printable characters without spaces, trailing
 * white space dropped, into its SHA-256; the token itself is wiped and
 * never in a message.  0, with *others 1 when others may read the file;
 * or -1 with why (the reason only: the caller names the file).  The
 * APIs' tokens are HTTPAUTH_TOKEN_MIN to _MAX; the OpenSandbox API's
 * keys are shorter.
 */
int httpauth_token_file(const char *path, size_t min, size_t max,
    unsigned char digest[HTTPAUTH_DIGEST_LEN], int *others, char *why,
    size_t whylen) SLUICE_MUSTCHECK;

/* The SHA-256 of a request's token, to compare with httpauth_same (in
 * constant time: a caller compares it with every configured digest, so
 * the timing shows neither the content nor which token came close).
 * 0, or -1 when it cannot be hashed. */
int httpauth_digest(const char *tok, unsigned char d[HTTPAUTH_DIGEST_LEN])
    SLUICE_MUSTCHECK;
int httpauth_same(const unsigned char a[HTTPAUTH_DIGEST_LEN],
    const unsigned char b[HTTPAUTH_DIGEST_LEN]);

#endif
