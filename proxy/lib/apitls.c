/*
 * apitls.c: an API's TLS server context (apitls.h).
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "proxy/lib/apitls.h"

/* err: "NAME FILE: reason", OpenSSL's queue (or errno) emptied */
static void
tls_error(const char *name, const char *file, char *err, size_t errlen)
{
	char buf[256];
	unsigned long e = ERR_get_error();

	if (e == 0)
		snprintf(buf, sizeof(buf), "%s", strerror(errno));
	else
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	snprintf(err, errlen, "%s %s: %s", name, file, buf);
}

SSL_CTX *
apitls_ctx_new(const char *cert, const char *key, const char *client_ca,
    const struct apitls_names *names, char *err, size_t errlen)
{
	/* resumed sessions keep the verified client certificate */
	static const unsigned char sid[] = "sluice-api";
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (ctx == NULL) {
		tls_error("TLS", "context", err, errlen);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		tls_error(names->cert, cert, err, errlen);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		tls_error(names->key, key, err, errlen);
		goto fail;
	}
	if (client_ca != NULL) {
		STACK_OF(X509_NAME) *ca;

		if (SSL_CTX_load_verify_locations(ctx, client_ca, NULL) != 1 ||
		    (ca = SSL_load_client_CA_file(client_ca)) == NULL) {
			tls_error(names->client_ca, client_ca, err, errlen);
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ctx, ca);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
		    SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}
