/*
 * sni.c: find the server_name in a TLS ClientHello (see sni.h).
 *
 * The handshake message is first gathered from as many handshake records
 * as it spans (RFC 8446 5.1 lets a sender fragment it), then walked with
 * every length checked against its enclosing one.  Nothing is decided on
 * a partial hello, so a truncated hello can only be SNI_INCOMPLETE.
 */
#include "sluice-config.h"

#include <string.h>

#include "proxy/lib/sni.h"

#define TLS_CT_HANDSHAKE 22
#define TLS_HS_CLIENT_HELLO 1
#define TLS_RECORD_HDR 5
#define TLS_HS_HDR 4
#define TLS_MAX_FRAGMENT 16384
#define TLS_EXT_SERVER_NAME 0
#define TLS_EXT_ECH 0xfe0d          /* encrypted_client_hello */
#define TLS_EXT_ESNI 0xffce         /* encrypted_server_name (drafts) */
#define TLS_SN_HOST_NAME 0

/* A bounds-checked reader over the hello body. */
struct rd {
	const uint8_t *p;
	size_t left;
};

static int
rd_u8(struct rd *r, size_t *v)
{
	if (r->left < 1)
		return -1;
	*v = r->p[0];
	r->p++;
	r->left--;
	return 0;
}

static int
rd_u16(struct rd *r, size_t *v)
{
	if (r->left < 2)
		return -1;
	*v = (size_t)r->p[0] << 8 | r->p[1];
	r->p += 2;
	r->left -= 2;
	return 0;
}

/* Take n bytes as a sub-reader. */
static int
rd_sub(struct rd *r, size_t n, struct rd *sub)
{
	if (r->left < n)
		return -1;
	sub->p = r->p;
	sub->left = n;
	r->p += n;
	r->left -= n;
	return 0;
}

static int
rd_vec8(struct rd *r, struct rd *sub)
{
	size_t n;

	return rd_u8(r, &n) < 0 ? -1 : rd_sub(r, n, sub);
}

static int
rd_vec16(struct rd *r, struct rd *sub)
{
	size_t n;

	return rd_u16(r, &n) < 0 ? -1 : rd_sub(r, n, sub);
}

/*
 * The server_name extension body (RFC 6066 3).  More than one host_name
 * is refused: a server might pick another one than we checked.  Names
 * must be printable ASCII so that what we compare is what the server
 * reads (an embedded NUL would cut our copy short).
 */
static enum sni_status
parse_server_name(struct rd ext, char *out, size_t outlen, int *found)
{
	struct rd list, name;
	size_t type, i;

	if (rd_vec16(&ext, &list) < 0 || ext.left != 0 || list.left == 0)
		return SNI_MALFORMED;
	while (list.left > 0) {
		if (rd_u8(&list, &type) < 0 || rd_vec16(&list, &name) < 0)
			return SNI_MALFORMED;
		if (type != TLS_SN_HOST_NAME)
			continue;
		if (*found || name.left == 0 || out == NULL ||
		    name.left >= outlen)
			return SNI_MALFORMED;
		for (i = 0; i < name.left; i++)
			if (name.p[i] < 0x21 || name.p[i] > 0x7e)
				return SNI_MALFORMED;
		memcpy(out, name.p, name.left);
		out[name.left] = '\0';
		*found = 1;
	}
	return SNI_OK;
}

static enum sni_status
parse_hello(const uint8_t *body, size_t len, char *out, size_t outlen)
{
	struct rd r = { body, len }, skip, exts, ext;
	size_t type;
	int found = 0, seen_sn = 0, hidden = 0;
	enum sni_status st;

	/* legacy_version, random, session id, suites, compression */
	if (rd_sub(&r, 2 + 32, &skip) < 0 || rd_vec8(&r, &skip) < 0 ||
	    skip.left > 32 || rd_vec16(&r, &skip) < 0 || skip.left < 2 ||
	    skip.left % 2 != 0 || rd_vec8(&r, &skip) < 0 || skip.left < 1)
		return SNI_MALFORMED;
	if (r.left == 0)
		return SNI_NONE;       /* a hello without extensions */
	if (rd_vec16(&r, &exts) < 0 || r.left != 0)
		return SNI_MALFORMED;
	while (exts.left > 0) {
		if (rd_u16(&exts, &type) < 0 || rd_vec16(&exts, &ext) < 0)
			return SNI_MALFORMED;
		if (type == TLS_EXT_ECH || type == TLS_EXT_ESNI)
			hidden = 1;     /* decided once the whole hello parsed */
		if (type != TLS_EXT_SERVER_NAME)
			continue;
		if (seen_sn++)
			return SNI_MALFORMED;  /* duplicate extension */
		st = parse_server_name(ext, out, outlen, &found);
		if (st != SNI_OK)
			return st;
	}
	if (hidden) {
		if (!found && out != NULL && outlen > 0)
			out[0] = '\0';
		return SNI_ECH;
	}
	return found ? SNI_OK : SNI_NONE;
}

/* Whether the gathered bytes start a ClientHello; sets *need once the
 * handshake header is complete.  -1 when they cannot. */
static int
hello_header(const uint8_t *hs, size_t have, size_t *need)
{
	size_t hlen;

	if (have >= 1 && hs[0] != TLS_HS_CLIENT_HELLO)
		return -1;
	if (have < TLS_HS_HDR)
		return 0;
	hlen = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
	if (hlen > SNI_MAX_HELLO)
		return -1;
	*need = TLS_HS_HDR + hlen;
	return 0;
}

enum sni_status
sni_parse(const uint8_t *buf, size_t len, char *out, size_t outlen)
{
	uint8_t hs[TLS_HS_HDR + SNI_MAX_HELLO];
	size_t have = 0, need = SIZE_MAX, pos = 0;

	if (len >= 1 && buf[0] != TLS_CT_HANDSHAKE)
		return SNI_NOT_TLS;
	if (len >= 2 && buf[1] != 3)
		return SNI_NOT_TLS;

	/* Concatenate record fragments until the handshake message is whole;
	 * need stays SIZE_MAX until its 4-byte header has arrived. */
	for (;;) {
		size_t rlen, avail, take;

		if (hello_header(hs, have, &need) < 0)
			return SNI_MALFORMED;
		if (have >= need)
			break;
		if (len - pos < TLS_RECORD_HDR)
			return SNI_INCOMPLETE;
		if (buf[pos] != TLS_CT_HANDSHAKE || buf[pos + 1] != 3)
			return SNI_MALFORMED;
		rlen = (size_t)buf[pos + 3] << 8 | buf[pos + 4];
		if (rlen == 0 || rlen > TLS_MAX_FRAGMENT)
			return SNI_MALFORMED;
		pos += TLS_RECORD_HDR;
		avail = len - pos < rlen ? len - pos : rlen;
		take = avail < sizeof(hs) - have ? avail : sizeof(hs) - have;
		memcpy(hs + have, buf + pos, take);
		have += take;
		if (avail < rlen) {
			/* This record is still arriving: done only if what came
			 * already completes the hello. */
			if (hello_header(hs, have, &need) < 0)
				return SNI_MALFORMED;
			if (have < need)
				return SNI_INCOMPLETE;
			break;
		}
		pos += rlen;
	}
	return parse_hello(hs + TLS_HS_HDR, need - TLS_HS_HDR, out, outlen);
}
