/*
 * signer.h: the connection log's signer (sluiced(8), PROCESS MODEL).
 *
 * With log.mac_key_file, the key that keys the log's chain never enters
 * the proxy process: started as root, sluiced forks the signer (priv.c,
 * priv_signer_spawn), which reads the key before it drops to the
 * proxy's user with no capabilities and no core dumps, and then answers
 * one question over a SOCK_SEQPACKET socketpair: the mac of a record's
 * hash (clog_mac: HMAC-SHA256 over its 64 hex characters).
 *
 * The signer keeps the head of the chain it signed (seq and hash) and
 * signs only the record after it, or that record once more (a write that
 * failed after signing), so a proxy taken over later cannot have older
 * records signed again: it can append, not rewrite.
 *
 * Messages (native byte order, one per packet):
 *   request  'S', seq (8 bytes), prev (64 hex), hash (64 hex)
 *   answer   'K', mac (64 hex)  or  'N', 64 bytes of '0' (refused)
 * At start the child says 'R' (ready) or 'E' and a message, once.
 */
#ifndef SLUICE_SIGNER_H
#define SLUICE_SIGNER_H

#include <stddef.h>
#include <stdint.h>

#define SIGNER_KEY_MIN 32      /* bytes; a shorter key is refused */
#define SIGNER_KEY_MAX 4096

/*
 * Read the key file: its bytes as they are, SIGNER_KEY_MIN to
 * SIGNER_KEY_MAX of them.  A file that is not a regular file, that its
 * group or others may read or write, or that belongs to another user
 * than the caller (root when sluiced starts as root) is refused: the
 * proxy's user must not be able to read it.  0 / -1 with err.
 */
int signer_load_key(const char *path, unsigned char *key, size_t *keylen,
    char *err, size_t errlen) SLUICE_MUSTCHECK;

/* The signer's loop on fd, from the chain head (seq, hash); returns 0
 * when the proxy closes its end, -1 on a socket error. */
int signer_serve(int fd, const unsigned char *key, size_t keylen,
    uint64_t seq, const char *hash);

/* The proxy's side: a clog_sign_fn (clog.h) with arg a struct signer. */
struct signer {
	int fd;
	int failing;            /* the last answer was no mac (logged once) */
};
int signer_sign(void *arg, uint64_t seq, const char *prev, const char *hash,
    char mac[65]);

#endif /* SLUICE_SIGNER_H */
