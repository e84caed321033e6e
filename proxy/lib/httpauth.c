/* httpauth.c: see httpauth.h. */

#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "proxy/lib/httpauth.h"

const char *
httpauth_bearer(const struct evkeyvalq *h, size_t max)
{
	const struct evkeyval *kv;
	const char *v = NULL;
	size_t len;
	int n = 0;

	TAILQ_FOREACH(kv, h, next)
		if (strcasecmp(kv->key, "Authorization") == 0) {
			v = kv->value;
			n++;
		}
	if (n != 1 || strncasecmp(v, "Bearer ", 7) != 0)
		return NULL;
	for (v += 7; *v == ' '; v++)
		;
	len = strlen(v);
	return len == 0 || len > max ? NULL : v;
}

int
httpauth_token_file(const char *path, size_t min, size_t max,
    unsigned char digest[HTTPAUTH_DIGEST_LEN], int *others, char *why,
    size_t whylen)
{
	char buf[HTTPAUTH_TOKEN_MAX + 2];
	struct stat st;
	size_t len = 0, i;
	ssize_t r;
	int fd, rc = -1;

	*others = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "not a regular file");
		goto out;
	}
	while (len < sizeof(buf) - 1) {
		r = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
	    buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	for (i = 0; i < len; i++)
		if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f)
			break;
	if (max > HTTPAUTH_TOKEN_MAX)
		max = HTTPAUTH_TOKEN_MAX;
	if (len < min || len > max || i != len) {
		snprintf(why, whylen, "expected %zu to %zu printable characters "
		    "without spaces", min, max);
		goto out;
	}
	if (EVP_Digest(buf, len, digest, NULL, EVP_sha256(), NULL) != 1) {
		snprintf(why, whylen, "cannot hash it");
		goto out;
	}
	*others = (st.st_mode & 0007) != 0;
	rc = 0;
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	close(fd);
	return rc;
}

int
httpauth_digest(const char *tok, unsigned char d[HTTPAUTH_DIGEST_LEN])
{
	return EVP_Digest(tok, strlen(tok), d, NULL, EVP_sha256(), NULL) == 1 ?
	    0 : -1;
}

int
httpauth_same(const unsigned char a[HTTPAUTH_DIGEST_LEN],
    const unsigned char b[HTTPAUTH_DIGEST_LEN])
{
	return CRYPTO_memcmp(a, b, HTTPAUTH_DIGEST_LEN) == 0;
}
