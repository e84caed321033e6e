/*
 * sni.h: read the server name from the first TLS record of a tunnel.
 *
 * Pure C, no I/O.  sluiced peeks at the bytes a client sends after a
 * CONNECT to port 443 and checks that the ClientHello names the CONNECT
 * host (DESIGN.md: sni_mismatch, sni_missing, not_tls).
 */
#ifndef SLUICE_SNI_H
#define SLUICE_SNI_H

#include <stddef.h>
#include <stdint.h>

enum sni_status {
	SNI_OK = 0,          /* a host_name was found */
	SNI_INCOMPLETE,      /* a TLS handshake record so far, need more bytes */
	SNI_NONE,            /* a whole ClientHello without server_name */
	SNI_NOT_TLS,         /* the bytes are not a TLS handshake record */
	SNI_MALFORMED,       /* a ClientHello whose lengths do not add up */
	SNI_ECH,             /* a whole ClientHello with encrypted_client_hello
	                      * or the draft ESNI extension: its server_name
	                      * (out, "" if none) is only the outer name */
};

/* The largest ClientHello we wait for (a record may be fragmented; we
 * accept the hello spread over records up to this many bytes). */
#define SNI_MAX_HELLO 16384

/*
 * Parse buf[0..len).  On SNI_OK out holds the name as sent (NUL
 * terminated, at most outlen-1 bytes; a longer name is SNI_MALFORMED).
 * The caller canonicalises it with pol_host_parse before comparing.
 * A hello that carries encrypted_client_hello (0xfe0d, TLS Encrypted
 * Client Hello) or encrypted_server_name (0xffce, the ESNI drafts) is
 * SNI_ECH rather than SNI_OK or SNI_NONE: the name it shows may not be
 * the one the server is asked for, so the check means nothing unless
 * the caller admits that.  A malformed hello stays SNI_MALFORMED.
 */
enum sni_status sni_parse(const uint8_t *buf, size_t len, char *out,
    size_t outlen);

#endif /* SLUICE_SNI_H */
