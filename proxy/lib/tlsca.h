/*
 * tlsca.h: the TLS inspection CA (sluiced(8), TLS INSPECTION).
 *
 * The CA's private key lives in a helper process (priv.c,
 * priv_ca_spawn), never in the proxy: the proxy makes each leaf's key
 * pair itself and asks the helper to sign a certificate for one name
 * and that public key.  The helper signs only names of inspect.hosts
 * (the set it was started with), so a proxy taken over cannot have a
 * certificate made for any other host.
 *
 * Messages (one per SOCK_SEQPACKET packet):
 *   request  'L', the name, NUL, the leaf's public key (DER
 *            SubjectPublicKeyInfo)
 *   answer   'C', the certificate (DER)  or  'N', why (text)
 * At start the helper says 'R' and the CA certificate (PEM), or 'E' and
 * why, once.
 */
#ifndef SLUICE_TLSCA_H
#define SLUICE_TLSCA_H

#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "policy/policy.h"

#define TLSCA_MSG_MAX 8192      /* one packet, either way */
#define TLSCA_NAME_MAX 253

/*
 * The CA at cert_path and key_path: made (an EC P-256 key, 0600, and a
 * self-signed certificate valid ten years, 0644) when both files are
 * missing (*made = 1), else loaded and checked: the key must be a
 * regular file of the caller's uid with no access for group and others,
 * the certificate a CA certificate for that key, valid now.  0 / -1
 * with err.
 */
int tlsca_ensure(const char *cert_path, const char *key_path, X509 **cert,
    EVP_PKEY **key, int *made, char *err, size_t errlen) SLUICE_MUSTCHECK;

/* The certificate at path (PEM), checked to be a CA valid now; NULL
 * with err. */
X509 *tlsca_load_cert(const char *path, char *err, size_t errlen);

/* A leaf for exactly name (subject CN and one DNS subjectAltName) with
 * public key pub, issued by ca/cakey, valid days (and never past the
 * CA's end).  NULL with err. */
X509 *tlsca_issue(X509 *ca, EVP_PKEY *cakey, const char *name,
    EVP_PKEY *pub, int days, char *err, size_t errlen);

/* A request as the helper reads it: 0 with the name (a canonical host
 * name) and the key's DER in place, -1 for anything else. */
int tlsca_parse_request(const unsigned char *msg, size_t n,
    char name[TLSCA_NAME_MAX + 1], const unsigned char **spki,
    size_t *spkilen) SLUICE_MUSTCHECK;

/* The helper's loop on fd: signs for names hosts matches.  0 when the
 * proxy closes its end, -1 on a socket error. */
int tlsca_serve(int fd, X509 *ca, EVP_PKEY *cakey,
    const struct pol_hostset *hosts, int days) SLUICE_MUSTCHECK;

/* The proxy's side: ask the helper on fd for a leaf for name and key's
 * public half; waits at most two seconds.  NULL with err. */
X509 *tlsca_request(int fd, const char *name, EVP_PKEY *key, char *err,
    size_t errlen);

#endif /* SLUICE_TLSCA_H */
