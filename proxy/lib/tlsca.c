/*
 * tlsca.c: the inspection CA, its leaves, and the helper's wire format
 * (tlsca.h).
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "proxy/lib/tlsca.h"
#include "proxy/lib/util.h"

#define TLSCA_WAIT_MS 2000
#define TLSCA_CA_DAYS 3650

static const char *
ssl_why(void)
{
	static char buf[256];
	unsigned long e = ERR_get_error();

	ERR_clear_error();
	if (e == 0)
		return "unknown error";
	ERR_error_string_n(e, buf, sizeof(buf));
	return buf;
}

static int
add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ex;
	int ok;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (ex == NULL)
		return -1;
	ok = X509_add_ext(cert, ex, -1);
	X509_EXTENSION_free(ex);
	return ok ? 0 : -1;
}

static int
random_serial(X509 *cert)
{
	unsigned char b[16];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return -1;
	b[0] &= 0x7f;   /* positive */
	b[0] |= 0x40;   /* and of full length */
	bn = BN_bin2bn(b, sizeof(b), NULL);
	if (bn == NULL)
		return -1;
	ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != NULL;
	BN_free(bn);
	return ok ? 0 : -1;
}

static EVP_PKEY *
ec_key(void)
{
	return EVP_EC_gen("P-256");
}

/* ---- the CA ---- */

static int
write_file(const char *path, mode_t mode, const void *data, size_t len,
    char *err, size_t errlen)
{
	const char *p = data;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, mode);

	if (fd < 0)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			errf(err, errlen, "%s: %s", path, strerror(errno));
			close(fd);
			unlink(path);
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	if (fchmod(fd, mode) != 0 || fsync(fd) != 0 || close(fd) != 0) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		unlink(path);
		return -1;
	}
	return 0;
}

/* PEM of an object into a malloc'ed buffer. */
static char *
pem_of(int (*w)(BIO *, void *), void *obj, size_t *len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p, *out = NULL;
	long n;

	if (b == NULL)
		return NULL;
	if (w(b, obj) == 1 && (n = BIO_get_mem_data(b, &p)) > 0 &&
	    (out = malloc((size_t)n + 1)) != NULL) {
		memcpy(out, p, (size_t)n);
		out[n] = '\0';
		*len = (size_t)n;
	}
	BIO_free(b);
	return out;
}

static int
w_cert(BIO *b, void *o)
{
	return PEM_write_bio_X509(b, o);
}

static int
w_key(BIO *b, void *o)
{
	return PEM_write_bio_PrivateKey(b, o, NULL, NULL, 0, NULL, NULL);
}

static int
make_ca(const char *cert_path, const char *key_path, char *err,
    size_t errlen)
{
	EVP_PKEY *key = ec_key();
	X509 *cert = X509_new();
	X509_NAME *nm;
	unsigned char rnd[6];
	char cn[64], host[64] = "host", *kpem = NULL, *cpem = NULL;
	size_t klen = 0, clen = 0;
	int rc = -1;

	if (key == NULL || cert == NULL || RAND_bytes(rnd, sizeof(rnd)) != 1) {
		errf(err, errlen, "making the inspection CA: %s", ssl_why());
		goto done;
	}
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	/* never the same name twice: a CA made per deployment */
	snprintf(cn, sizeof(cn), "sluice inspection CA %.24s %02x%02x%02x%02x"
	    "%02x%02x", host, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	nm = X509_get_subject_name(cert);
	if (X509_set_version(cert, 2) != 1 || random_serial(cert) != 0 ||
	    X509_NAME_add_entry_by_txt(nm, "O", MBSTRING_ASC,
	    (const unsigned char *)"sluice", -1, -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC,
	    (const unsigned char *)cn, -1, -1, 0) != 1 ||
	    X509_set_issuer_name(cert, nm) != 1 ||
	    X509_gmtime_adj(X509_getm_notBefore(cert), -3600) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(cert),
	    (long)TLSCA_CA_DAYS * 86400) == NULL ||
	    X509_set_pubkey(cert, key) != 1 ||
	    add_ext(cert, cert, NID_basic_constraints,
	    "critical,CA:TRUE,pathlen:0") != 0 ||
	    add_ext(cert, cert, NID_key_usage,
	    "critical,keyCertSign,cRLSign") != 0 ||
	    add_ext(cert, cert, NID_subject_key_identifier, "hash") != 0 ||
	    X509_sign(cert, key, EVP_sha256()) <= 0 ||
	    (kpem = pem_of(w_key, key, &klen)) == NULL ||
	    (cpem = pem_of(w_cert, cert, &clen)) == NULL) {
		errf(err, errlen, "making the inspection CA: %s", ssl_why());
		goto done;
	}
	/* the key first: a certificate alone would be a half-made CA */
	if (write_file(key_path, 0600, kpem, klen, err, errlen) != 0)
		goto done;
	if (write_file(cert_path, 0644, cpem, clen, err, errlen) != 0) {
		unlink(key_path);
		goto done;
	}
	rc = 0;
done:
	if (kpem != NULL) {
		OPENSSL_cleanse(kpem, klen);
		free(kpem);
	}
	free(cpem);
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}

static int
check_ca(X509 *cert, const char *path, char *err, size_t errlen)
{
	if (X509_check_ca(cert) != 1)
		return errf(err, errlen, "inspect.ca_cert %s: not a CA "
		    "certificate (basicConstraints CA:TRUE wanted)", path);
	if (X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0)
		return errf(err, errlen, "inspect.ca_cert %s: not valid yet",
		    path);
	if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0)
		return errf(err, errlen, "inspect.ca_cert %s: expired: make "
		    "a new CA (or move both files away and sluiced makes one)",
		    path);
	return 0;
}

X509 *
tlsca_load_cert(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	X509 *cert;

	if (f == NULL) {
		errf(err, errlen, "inspect.ca_cert %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (cert == NULL) {
		errf(err, errlen, "inspect.ca_cert %s: not a PEM certificate "
		    "(%s)", path, ssl_why());
		return NULL;
	}
	if (check_ca(cert, path, err, errlen) != 0) {
		X509_free(cert);
		return NULL;
	}
	return cert;
}

static EVP_PKEY *
load_key(const char *path, char *err, size_t errlen)
{
	struct stat st;
	EVP_PKEY *key = NULL;
	FILE *f;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0) {
		errf(err, errlen, "inspect.ca_key %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (st.st_mode & 077) != 0 || st.st_uid != geteuid()) {
		errf(err, errlen, "inspect.ca_key %s: must be a regular file "
		    "of uid %u with no access for group and others (mode "
		    "0600 or 0400): the proxy's user must not read it", path,
		    (unsigned)geteuid());
		close(fd);
		return NULL;
	}
	if ((f = fdopen(fd, "r")) == NULL) {
		errf(err, errlen, "inspect.ca_key %s: %s", path,
		    strerror(errno));
		close(fd);
		return NULL;
	}
	key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (key == NULL)
		errf(err, errlen, "inspect.ca_key %s: not a PEM private key "
		    "without a passphrase (%s)", path, ssl_why());
	return key;
}

int
tlsca_ensure(const char *cert_path, const char *key_path, X509 **cert,
    EVP_PKEY **key, int *made, char *err, size_t errlen)
{
	int have_cert = access(cert_path, F_OK) == 0;
	int have_key = access(key_path, F_OK) == 0;

	*cert = NULL;
	*key = NULL;
	*made = 0;
	if (!have_cert && !have_key) {
		if (make_ca(cert_path, key_path, err, errlen) != 0)
			return -1;
		*made = 1;
	} else if (!have_cert || !have_key)
		return errf(err, errlen, "inspect: %s exists but %s does not: "
		    "give both files of the CA, or neither (sluiced then makes "
		    "one)", have_cert ? cert_path : key_path,
		    have_cert ? key_path : cert_path);
	if ((*key = load_key(key_path, err, errlen)) == NULL)
		return -1;
	if ((*cert = tlsca_load_cert(cert_path, err, errlen)) == NULL)
		goto fail;
	if (X509_check_private_key(*cert, *key) != 1) {
		ERR_clear_error();
		errf(err, errlen, "inspect.ca_cert %s does not match "
		    "inspect.ca_key %s", cert_path, key_path);
		goto fail;
	}
	return 0;
fail:
	X509_free(*cert);
	EVP_PKEY_free(*key);
	*cert = NULL;
	*key = NULL;
	return -1;
}

/* ---- leaves ---- */

X509 *
tlsca_issue(X509 *ca, EVP_PKEY *cakey, const char *name, EVP_PKEY *pub,
    int days, char *err, size_t errlen)
{
	X509 *cert = X509_new();
	X509_NAME *nm;
	char san[TLSCA_NAME_MAX + 8];
	long secs = (long)days * 86400;

	if (cert == NULL)
		goto fail;
	nm = X509_get_subject_name(cert);
	snprintf(san, sizeof(san), "DNS:%s", name);
	if (X509_set_version(cert, 2) != 1 || random_serial(cert) != 0 ||
	    X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC,
	    (const unsigned char *)name, -1, -1, 0) != 1 ||
	    X509_set_issuer_name(cert, X509_get_subject_name(ca)) != 1 ||
	    X509_gmtime_adj(X509_getm_notBefore(cert), -3600) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(cert), secs) == NULL)
		goto fail;
	/* never past the CA's own end */
	if (ASN1_TIME_compare(X509_get0_notAfter(cert),
	    X509_get0_notAfter(ca)) > 0 &&
	    X509_set1_notAfter(cert, X509_get0_notAfter(ca)) != 1)
		goto fail;
	if (X509_set_pubkey(cert, pub) != 1 ||
	    add_ext(cert, ca, NID_basic_constraints, "critical,CA:FALSE") != 0 ||
	    add_ext(cert, ca, NID_key_usage,
	    "critical,digitalSignature,keyEncipherment") != 0 ||
	    add_ext(cert, ca, NID_ext_key_usage, "serverAuth") != 0 ||
	    add_ext(cert, ca, NID_subject_alt_name, san) != 0 ||
	    add_ext(cert, ca, NID_subject_key_identifier, "hash") != 0 ||
	    add_ext(cert, ca, NID_authority_key_identifier, "keyid") != 0 ||
	    X509_sign(cert, cakey, EVP_sha256()) <= 0)
		goto fail;
	return cert;
fail:
	errf(err, errlen, "issuing a certificate for %s: %s", name, ssl_why());
	X509_free(cert);
	return NULL;
}

/* ---- the wire ---- */

int
tlsca_parse_request(const unsigned char *msg, size_t n,
    char name[TLSCA_NAME_MAX + 1], const unsigned char **spki,
    size_t *spkilen)
{
	const unsigned char *nul;
	struct pol_target t;
	size_t len;

	if (n < 3 || msg[0] != 'L')
		return -1;
	nul = memchr(msg + 1, '\0', n - 1);
	if (nul == NULL)
		return -1;
	len = (size_t)(nul - (msg + 1));
	if (len == 0 || len > TLSCA_NAME_MAX)
		return -1;
	memcpy(name, msg + 1, len);
	name[len] = '\0';
	/* a canonical name, as the proxy decided it: nothing to repair */
	if (pol_host_parse(name, len, 0, &t) != POL_R_NONE ||
	    t.kind != POL_HOST_NAME || strcmp(t.host, name) != 0)
		return -1;
	*spki = nul + 1;
	*spkilen = n - 1 - len - 1;
	return *spkilen > 0 ? 0 : -1;
}

static int
answer(int fd, char kind, const void *data, size_t len)
{
	unsigned char buf[TLSCA_MSG_MAX];

	if (len > sizeof(buf) - 1)
		len = sizeof(buf) - 1;
	buf[0] = (unsigned char)kind;
	memcpy(buf + 1, data, len);
	while (send(fd, buf, len + 1, MSG_NOSIGNAL) < 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

int
tlsca_serve(int fd, X509 *ca, EVP_PKEY *cakey,
    const struct pol_hostset *hosts, int days)
{
	unsigned char req[TLSCA_MSG_MAX];
	char name[TLSCA_NAME_MAX + 1], err[400];
	const unsigned char *spki, *p;
	size_t spkilen;
	ssize_t n;

	for (;;) {
		EVP_PKEY *pub;
		X509 *leaf;
		unsigned char *der = NULL;
		int dlen;

		/* a closed socket: the proxy is done with the helper */
		if ((n = util_recv(fd, req, sizeof(req), 0)) <= 0)
			return n == 0 ? 0 : -1;
		if (tlsca_parse_request(req, (size_t)n, name, &spki,
		    &spkilen) != 0) {
			if (answer(fd, 'N', "bad request", 11) != 0)
				return -1;
			continue;
		}
		if (!pol_hostset_match(hosts, name, 0, NULL, 0)) {
			snprintf(err, sizeof(err), "%s is not in inspect.hosts",
			    name);
			if (answer(fd, 'N', err, strlen(err)) != 0)
				return -1;
			continue;
		}
		p = spki;
		pub = d2i_PUBKEY(NULL, &p, (long)spkilen);
		if (pub == NULL || p != spki + spkilen) {
			EVP_PKEY_free(pub);
			ERR_clear_error();
			if (answer(fd, 'N', "bad public key", 14) != 0)
				return -1;
			continue;
		}
		leaf = tlsca_issue(ca, cakey, name, pub, days, err,
		    sizeof(err));
		EVP_PKEY_free(pub);
		if (leaf == NULL || (dlen = i2d_X509(leaf, &der)) <= 0 ||
		    (size_t)dlen >= TLSCA_MSG_MAX) {
			X509_free(leaf);
			OPENSSL_free(der);
			if (answer(fd, 'N', err, strlen(err)) != 0)
				return -1;
			continue;
		}
		X509_free(leaf);
		n = answer(fd, 'C', der, (size_t)dlen);
		OPENSSL_free(der);
		if (n != 0)
			return -1;
	}
}

X509 *
tlsca_request(int fd, const char *name, EVP_PKEY *key, char *err,
    size_t errlen)
{
	unsigned char req[TLSCA_MSG_MAX], ans[TLSCA_MSG_MAX + 1];
	unsigned char *spki = NULL;
	const unsigned char *p;
	size_t nl = strlen(name);
	X509 *cert;
	ssize_t n;
	int slen;

	if (fd < 0) {
		errf(err, errlen, "no inspection CA");
		return NULL;
	}
	slen = i2d_PUBKEY(key, &spki);
	if (slen <= 0 || nl == 0 || nl > TLSCA_NAME_MAX ||
	    2 + nl + (size_t)slen > sizeof(req)) {
		OPENSSL_free(spki);
		errf(err, errlen, "cannot encode the request for %s", name);
		return NULL;
	}
	req[0] = 'L';
	memcpy(req + 1, name, nl + 1);
	memcpy(req + 2 + nl, spki, (size_t)slen);
	OPENSSL_free(spki);
	n = util_send(fd, req, 2 + nl + (size_t)slen, MSG_NOSIGNAL);
	if (n < 0) {
		errf(err, errlen, "the CA helper: %s", strerror(errno));
		return NULL;
	}
	/* a signature takes well under a millisecond; a helper that hangs
	 * must not hold the proxy for long */
	if (util_wait_readable(fd, TLSCA_WAIT_MS) <= 0) {
		errf(err, errlen, "the CA helper did not answer");
		return NULL;
	}
	n = util_recv(fd, ans, sizeof(ans) - 1, 0);
	if (n <= 0) {
		errf(err, errlen, "the CA helper is gone");
		return NULL;
	}
	if (ans[0] != 'C') {
		ans[n] = '\0';
		errf(err, errlen, "the CA helper refused %s: %s", name,
		    ans[0] == 'N' ? (const char *)ans + 1 : "a bad answer");
		return NULL;
	}
	p = ans + 1;
	cert = d2i_X509(NULL, &p, (long)(n - 1));
	if (cert == NULL || p != ans + n) {
		X509_free(cert);
		ERR_clear_error();
		errf(err, errlen, "the CA helper sent a bad certificate");
		return NULL;
	}
	if (X509_check_private_key(cert, key) != 1) {
		X509_free(cert);
		ERR_clear_error();
		errf(err, errlen, "the CA helper sent a certificate for "
		    "another key");
		return NULL;
	}
	return cert;
}
