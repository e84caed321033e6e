/*
 * credspec.h: a credential as POST /v1/credentials gives it (and as the
 * credentials file keeps it), read and checked.  Pure: no daemon state;
 * whether its hosts are inspected is the caller's to check.
 */
#ifndef SLUICE_CREDSPEC_H
#define SLUICE_CREDSPEC_H

#include <stddef.h>

#include <jansson.h>

#include "policy/policy.h"

#define CRED_VALUE_MAX 8192
#define CRED_FORMAT_MAX 256
#define CRED_SECRET_LEN 32       /* hex digits of a placeholder's secret */
/* inject.format "Basic": the value is user:password, sent as
 * "Basic " + base64(value) (RFC 7617); a sandbox's placeholder may come
 * inside a Basic header's user-pass (pip's index URL, netrc) */
#define CRED_FORMAT_BASIC "Basic"

struct cred_spec {
	char *name, *tenant;
	char **hosts; size_t nhosts;     /* names, *.suffix, optional :port */
	struct pol_hostset *hs;
	char *header, *format;           /* inject.header, inject.format */
	char **methods; size_t nmethods;
	char **paths; size_t npaths;
	char *value;                     /* write-only */
	char secret[CRED_SECRET_LEN + 1];/* stored: the placeholder's; "" */
	long long updated;               /* stored: unix time; 0 */
};

/*
 * Read o into out (zeroed first).  stored 0: the API's body
 * {"name","tenant","hosts","inject":{"header","format"},"methods"?,
 * "paths"?,"value"}, unknown keys refused; stored 1: an entry of the
 * credentials file, which also has "secret" and "updated".  0, or -1
 * with err naming the field (never the value); out is then freed.
 */
int cred_spec_parse(json_t *o, int stored, struct cred_spec *out,
    char *err, size_t errlen) SLUICE_MUSTCHECK;
void cred_spec_free(struct cred_spec *s);
/* The JSON an answer shows (no value): name, tenant, hosts, inject,
 * methods, paths, placeholder, updated.  New reference or NULL. */
json_t *cred_spec_json(const struct cred_spec *s);
/* The file's entry: the same with secret and value. */
json_t *cred_spec_stored_json(const struct cred_spec *s);

/* A sandbox's own placeholder secret for credential secret, bound to
 * the sluiced session it runs in: the first CRED_SECRET_LEN hex digits
 * of HMAC-SHA256(key secret, "sluice-cred:" session), into out.  The
 * relay admits it from that session only (the credential's own secret
 * from any of its tenant's); sluice-execd hands it to the sandbox.
 * 0, or -1 (no HMAC). */
int cred_session_secret(const char *secret, const char *session,
    char out[CRED_SECRET_LEN + 1]) SLUICE_MUSTCHECK;

/* The user-pass of a header value "Basic <base64>" (the scheme in any
 * case, blanks around the token), decoded into out (at most outcap
 * bytes, not terminated): its length, or -1 when v is not that
 * (another scheme, a byte outside base64, longer than outcap). */
long cred_basic_decode(const char *v, size_t n, char *out, size_t outcap)
    SLUICE_MUSTCHECK;
/* The base64 of s[0..n) into out, which holds 4 * ((n + 2) / 3)
 * bytes: that length. */
size_t cred_b64_encode(const char *s, size_t n, char *out);

#endif /* SLUICE_CREDSPEC_H */
