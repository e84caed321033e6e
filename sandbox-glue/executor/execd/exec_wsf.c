/*
 * exec_wsf.c: RFC 6455 framing, the server's side (exec_wsf.h).
 *
 * A frame is taken only when it is whole in the caller's bytes (its
 * head, at most 14 bytes, and its payload): the caller holds what came
 * in an evbuffer and passes it again with more.  A frame's declared
 * length is checked against the limit before its payload is waited
 * for, so that a client cannot make the caller buffer more than the
 * limit and a head.  Payloads are unmasked into the reader's own
 * buffer (never in place: the caller's bytes are const).
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/exec_wsf.h"

#define WS_GUID	"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

void
xd_wsf_init(struct xd_wsf *w, size_t max_msg)
{
	memset(w, 0, sizeof(*w));
	w->max_msg = max_msg;
	w->frag_op = XD_WSF_CONT;
}

void
xd_wsf_free(struct xd_wsf *w)
{
	free(w->msg);
	w->msg = NULL;
	w->msg_len = w->msg_cap = 0;
}

int
xd_wsf_utf8(const unsigned char *b, size_t n)
{
	size_t i = 0;
	uint32_t cp;
	int k;

	while (i < n) {
		if ((k = util_utf8_seq(b + i, n - i, &cp, NULL)) <= 0)
			return 0;
		i += (size_t)k;
	}
	return 1;
}

static enum xd_wsf_rc
fail(struct xd_wsf *w, struct xd_wsf_msg *m, int code, const char *why)
{
	w->failed = 1;
	m->code = code;
	m->why = why;
	m->data = NULL;
	m->len = 0;
	return XD_WSF_FAIL;
}

/* Room for msg_len + n in msg (n within max_msg, checked before). */
static int
room(struct xd_wsf *w, size_t n)
{
	size_t cap;
	unsigned char *p;

	if (w->msg_len + n <= w->msg_cap && w->msg != NULL)
		return 0;
	cap = w->msg_cap ? w->msg_cap : 256;
	while (cap < w->msg_len + n)
		cap *= 2;
	if ((p = realloc(w->msg, cap)) == NULL)
		return -1;
	w->msg = p;
	w->msg_cap = cap;
	return 0;
}

/* A close code a peer may send (7.4.1, 7.4.2): 1000-1003, 1007-1011,
 * 3000-4999. */
static int
close_code_ok(int c)
{
	return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1011) ||
	    (c >= 3000 && c <= 4999);
}

enum xd_wsf_rc
xd_wsf_read(struct xd_wsf *w, const unsigned char *b, size_t n, size_t *used,
    struct xd_wsf_msg *m)
{
	size_t hl = 2, i;
	uint64_t len;
	int fin, op, masked;
	const unsigned char *key, *pl;
	unsigned char *to;

	*used = 0;
	memset(m, 0, sizeof(*m));
	if (w->failed)
		return fail(w, m, XD_WSF_PROTOCOL, "the connection failed");
	if (n < 2)
		return XD_WSF_MORE;
	fin = b[0] & 0x80;
	op = b[0] & 0x0f;
	masked = b[1] & 0x80;
	len = b[1] & 0x7f;
	if (b[0] & 0x70)
		return fail(w, m, XD_WSF_PROTOCOL, "a reserved bit is set (no "
		    "extension was agreed)");
	if (op != XD_WSF_CONT && op != XD_WSF_TEXT && op != XD_WSF_BINARY &&
	    op != XD_WSF_CLOSE && op != XD_WSF_PING && op != XD_WSF_PONG)
		return fail(w, m, XD_WSF_PROTOCOL, "a reserved opcode");
	if (!masked)
		return fail(w, m, XD_WSF_PROTOCOL, "a client frame is not "
		    "masked");
	if (op >= 0x8 && (!fin || len > 125))
		return fail(w, m, XD_WSF_PROTOCOL, "a control frame is "
		    "fragmented or longer than 125 bytes");
	if (len == 126) {
		if (n < 4)
			return XD_WSF_MORE;
		len = ((uint64_t)b[2] << 8) | b[3];
		hl = 4;
		if (len < 126)
			return fail(w, m, XD_WSF_PROTOCOL, "a length not in "
			    "its shortest form");
	} else if (len == 127) {
		if (n < 10)
			return XD_WSF_MORE;
		len = 0;
		for (i = 2; i < 10; i++)
			len = (len << 8) | b[i];
		hl = 10;
		if (len >> 63)
			return fail(w, m, XD_WSF_PROTOCOL, "a length with its "
			    "top bit set");
		if (len <= 0xffff)
			return fail(w, m, XD_WSF_PROTOCOL, "a length not in "
			    "its shortest form");
	}
	/* the order of the frames, before the payload is waited for */
	if (op == XD_WSF_CONT && w->frag_op == XD_WSF_CONT)
		return fail(w, m, XD_WSF_PROTOCOL, "a continuation frame "
		    "with no message to continue");
	if ((op == XD_WSF_TEXT || op == XD_WSF_BINARY) && w->frag_op !=
	    XD_WSF_CONT)
		return fail(w, m, XD_WSF_PROTOCOL, "a new message inside a "
		    "fragmented one");
	if (op < 0x8 && (len > w->max_msg || (op == XD_WSF_CONT &&
	    len > w->max_msg - w->msg_len)))
		return fail(w, m, XD_WSF_TOO_BIG, "a message over the limit");
	if (n - hl < 4 || n - hl - 4 < len)
		return XD_WSF_MORE;
	key = b + hl;
	pl = key + 4;
	*used = hl + 4 + (size_t)len;
	if (op >= 0x8) {
		for (i = 0; i < len; i++)
			w->ctl[i] = pl[i] ^ key[i & 3];
		m->op = (enum xd_wsf_op)op;
		m->data = w->ctl;
		m->len = (size_t)len;
		if (op != XD_WSF_CLOSE)
			return XD_WSF_MSG;
		m->code = 1005;
		if (len == 1)
			return fail(w, m, XD_WSF_PROTOCOL, "a close frame of "
			    "one byte");
		if (len >= 2) {
			m->code = (w->ctl[0] << 8) | w->ctl[1];
			if (!close_code_ok(m->code))
				return fail(w, m, XD_WSF_PROTOCOL, "a close "
				    "code a peer may not send");
			if (!xd_wsf_utf8(w->ctl + 2, (size_t)len - 2))
				return fail(w, m, XD_WSF_BAD_DATA, "a close "
				    "reason that is not UTF-8");
			m->data = w->ctl + 2;
			m->len = (size_t)len - 2;
		}
		return XD_WSF_MSG;
	}
	if (op != XD_WSF_CONT) {
		w->frag_op = (enum xd_wsf_op)op;
		w->msg_len = 0;
	}
	if (room(w, (size_t)len) != 0)
		return fail(w, m, XD_WSF_TOO_BIG, "out of memory");
	to = w->msg + w->msg_len;
	for (i = 0; i < len; i++)
		to[i] = pl[i] ^ key[i & 3];
	w->msg_len += (size_t)len;
	if (!fin)
		return XD_WSF_MORE;
	m->op = w->frag_op;
	m->data = w->msg;
	m->len = w->msg_len;
	w->frag_op = XD_WSF_CONT;
	w->msg_len = 0;
	if (m->op == XD_WSF_TEXT && !xd_wsf_utf8(m->data, m->len))
		return fail(w, m, XD_WSF_BAD_DATA, "a text message that is "
		    "not UTF-8");
	return XD_WSF_MSG;
}

size_t
xd_wsf_head(unsigned char h[10], enum xd_wsf_op op, uint64_t len)
{
	int i;

	h[0] = 0x80 | (unsigned char)op;
	if (len < 126) {
		h[1] = (unsigned char)len;
		return 2;
	}
	if (len <= 0xffff) {
		h[1] = 126;
		h[2] = (unsigned char)(len >> 8);
		h[3] = (unsigned char)len;
		return 4;
	}
	h[1] = 127;
	for (i = 0; i < 8; i++)
		h[2 + i] = (unsigned char)(len >> (56 - 8 * i));
	return 10;
}

size_t
xd_wsf_close_payload(unsigned char p[125], int code, const char *why)
{
	size_t n = why != NULL ? strlen(why) : 0;

	if (n > 123)
		n = 123;
	/* not in the middle of a character */
	while (n > 0 && n < strlen(why) && ((unsigned char)why[n] & 0xc0) ==
	    0x80)
		n--;
	p[0] = (unsigned char)(code >> 8);
	p[1] = (unsigned char)code;
	if (n > 0)
		memcpy(p + 2, why, n);
	return n + 2;
}

int
xd_wsf_accept(const char *key, char out[29])
{
	unsigned char raw[32], md[SHA_DIGEST_LENGTH];
	char buf[24 + sizeof(WS_GUID)];
	int n;

	/* 16 bytes in base64: 22 characters and "==" */
	if (key == NULL || strlen(key) != 24 || key[22] != '=' || key[23] !=
	    '=')
		return -1;
	n = EVP_DecodeBlock(raw, (const unsigned char *)key, 24);
	if (n != 18)    /* 16 and the padding's two zeros */
		return -1;
	memcpy(buf, key, 24);
	memcpy(buf + 24, WS_GUID, sizeof(WS_GUID) - 1);
	SHA1((const unsigned char *)buf, 24 + sizeof(WS_GUID) - 1, md);
	if (EVP_EncodeBlock((unsigned char *)out, md, sizeof(md)) != 28)
		return -1;
	out[28] = '\0';
	return 0;
}
