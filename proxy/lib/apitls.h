/*
 * apitls.h: the TLS server context of an API's TCP listener, the same
 * for both daemons (sluiced's control.tcp, sluice-execd's tcp.listen):
 * TLS 1.2 at least, no renegotiation and no compression, the server's
 * cipher order, the certificate chain and its key (checked to match)
 * and, with a client CA, client certificates required and verified.
 */
#ifndef SLUICE_APITLS_H
#define SLUICE_APITLS_H

#include <stddef.h>

#include <openssl/ssl.h>

/* The configuration's names of the three files, for the error. */
struct apitls_names {
	const char *cert, *key, *client_ca;
};

/* client_ca NULL: no client certificates asked for.  NULL with err
 * ("NAME FILE: what OpenSSL says"). */
SSL_CTX *apitls_ctx_new(const char *cert, const char *key,
    const char *client_ca, const struct apitls_names *names, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

#endif /* SLUICE_APITLS_H */
