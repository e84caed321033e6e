/*
 * signer.c: the connection log's signer process and the proxy's client
 * of it (signer.h).
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "proxy/lib/clog.h"
#include "proxy/lib/log.h"
#include "proxy/lib/util.h"
#include "proxy/signer.h"

#define SIGNER_REQ_LEN (1 + 8 + 64 + 64)
#define SIGNER_ANS_LEN (1 + 64)
#define SIGNER_WAIT_MS 2000     /* the proxy waits this long for a mac */

static int
hex64(const char *s)
{
	size_t i;

	for (i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int
signer_load_key(const char *path, unsigned char *key, size_t *keylen,
    char *err, size_t errlen)
{
	struct stat st;
	size_t got = 0;
	ssize_t n;
	int fd, rc = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0)
		return errf(err, errlen, "log.mac_key_file %s: %s", path,
		    strerror(errno));
	if (fstat(fd, &st) != 0) {
		errf(err, errlen, "log.mac_key_file %s: %s", path,
		    strerror(errno));
		goto done;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0 ||
	    st.st_uid != geteuid()) {
		errf(err, errlen, "log.mac_key_file %s: must be a regular file "
		    "of uid %u with no access for group and others (mode "
		    "0600 or 0400): the proxy's user must not read it", path,
		    (unsigned)geteuid());
		goto done;
	}
	if ((n = util_read_full(fd, key, SIGNER_KEY_MAX)) < 0) {
		errf(err, errlen, "log.mac_key_file %s: %s", path,
		    strerror(errno));
		goto done;
	}
	got = (size_t)n;
	if (got == SIGNER_KEY_MAX) {
		char extra;

		if (read(fd, &extra, 1) != 0) {
			errf(err, errlen, "log.mac_key_file %s: more than %d "
			    "bytes", path, SIGNER_KEY_MAX);
			goto done;
		}
	}
	if (got < SIGNER_KEY_MIN) {
		errf(err, errlen, "log.mac_key_file %s: %zu bytes, at least %d "
		    "wanted (head -c 32 /dev/urandom)", path, got,
		    SIGNER_KEY_MIN);
		goto done;
	}
	*keylen = got;
	rc = 0;
done:
	if (rc != 0)
		OPENSSL_cleanse(key, SIGNER_KEY_MAX);
	close(fd);
	return rc;
}

/* ---- the signer process ---- */

int
signer_serve(int fd, const unsigned char *key, size_t keylen, uint64_t seq,
    const char *hash)
{
	unsigned char req[SIGNER_REQ_LEN + 1];
	char ans[SIGNER_ANS_LEN], head[65], before[65], mac[65];
	int have_before = 0;
	uint64_t s;
	ssize_t n;

	snprintf(head, sizeof(head), "%s", hash);
	for (;;) {
		/* a closed socket: the proxy is done with the signer */
		if ((n = util_recv(fd, req, sizeof(req), 0)) <= 0)
			return n == 0 ? 0 : -1;
		memset(ans, '0', sizeof(ans));
		ans[0] = 'N';
		if (n == SIGNER_REQ_LEN && req[0] == 'S' &&
		    hex64((const char *)req + 9) && hex64((const char *)req + 73)) {
			const char *prev = (const char *)req + 9;
			const char *h = (const char *)req + 73;
			int next, again;

			memcpy(&s, req + 1, 8);
			/* the record after the head, or the head's own
			 * record once more (its write failed) */
			next = s == seq + 1 && memcmp(prev, head, 64) == 0;
			again = have_before && s == seq &&
			    memcmp(prev, before, 64) == 0;
			if ((next || again) &&
			    clog_mac(key, keylen, h, mac) == 0) {
				if (next) {
					memcpy(before, head, sizeof(before));
					have_before = 1;
					seq = s;
				}
				memcpy(head, h, 64);
				head[64] = '\0';
				ans[0] = 'K';
				memcpy(ans + 1, mac, 64);
			}
		}
		while (send(fd, ans, sizeof(ans), 0) < 0)
			if (errno != EINTR)
				return -1;
	}
}

/* ---- the proxy's side ---- */

int
signer_sign(void *arg, uint64_t seq, const char *prev, const char *hash,
    char mac[65])
{
	struct signer *sg = arg;
	unsigned char req[SIGNER_REQ_LEN];
	char ans[SIGNER_ANS_LEN + 1];
	ssize_t n;
	const char *why = "no answer";

	if (sg == NULL || sg->fd < 0)
		return -1;
	req[0] = 'S';
	memcpy(req + 1, &seq, 8);
	memcpy(req + 9, prev, 64);
	memcpy(req + 73, hash, 64);
	n = util_send(sg->fd, req, sizeof(req), MSG_NOSIGNAL);
	if (n != (ssize_t)sizeof(req)) {
		why = strerror(errno);
		goto fail;
	}
	/* a few microseconds normally; a signer that hangs must not hold
	 * the proxy for long */
	if (util_wait_readable(sg->fd, SIGNER_WAIT_MS) <= 0)
		goto fail;
	n = util_recv(sg->fd, ans, sizeof(ans), 0);
	if (n != SIGNER_ANS_LEN || ans[0] != 'K') {
		why = n == 0 ? "the signer is gone" : n == SIGNER_ANS_LEN ?
		    "refused: not the record after the chain it signed" :
		    "a bad answer";
		goto fail;
	}
	memcpy(mac, ans + 1, 64);
	mac[64] = '\0';
	if (sg->failing)
		px_log(PX_INFO, "log signer: signing again");
	sg->failing = 0;
	return 0;
fail:
	if (!sg->failing)
		px_log(PX_ERR, "log signer: no mac for record %llu (%s): records "
		    "are not written, connections are refused",
		    (unsigned long long)seq, why);
	sg->failing = 1;
	return -1;
}
