/*
 * exec_wsf.h: the server side of RFC 6455 framing, as bytes in and
 * bytes out, with no socket and no event loop (so that a fuzz harness
 * drives the reader alone: tests/fuzz/fuzz_ws.c).  libevent's evhttp
 * has no WebSocket server; the terminal (exec_pty.c) speaks through
 * this.
 *
 * The reader takes what a client sent and gives whole messages: data
 * messages (text, binary) reassembled from their fragments, control
 * frames (close, ping, pong) as they come, even between fragments.
 * Anything RFC 6455 says a server must fail the connection for is an
 * error with the close code to send: an unmasked frame (1002), a
 * reserved bit or opcode (1002), a control frame fragmented or over 125
 * bytes (1002), a length not in its shortest form or with the top bit
 * set (1002), a continuation with no message or a new message inside
 * one (1002), a close whose payload is 1 byte or whose code may not be
 * sent (1002), a message over the reader's limit (1009), text or a
 * close reason that is not UTF-8 (1007).  After an error the reader
 * stays failed.
 */
#ifndef SLUICE_EXEC_WSF_H
#define SLUICE_EXEC_WSF_H

#include <stddef.h>
#include <stdint.h>

enum xd_wsf_op {
	XD_WSF_CONT = 0x0,
	XD_WSF_TEXT = 0x1,
	XD_WSF_BINARY = 0x2,
	XD_WSF_CLOSE = 0x8,
	XD_WSF_PING = 0x9,
	XD_WSF_PONG = 0xa,
};

enum xd_wsf_rc {
	XD_WSF_MORE,            /* nothing whole yet: read more */
	XD_WSF_MSG,             /* a message in *m */
	XD_WSF_FAIL,            /* fail the connection: m->code, m->why */
};

/* The closing handshake's codes used here (RFC 6455 7.4.1). */
#define XD_WSF_NORMAL		1000
#define XD_WSF_GOING_AWAY	1001
#define XD_WSF_PROTOCOL		1002
#define XD_WSF_BAD_DATA		1007
#define XD_WSF_POLICY		1008
#define XD_WSF_TOO_BIG		1009

struct xd_wsf_msg {
	enum xd_wsf_op op;      /* TEXT, BINARY, CLOSE, PING, PONG */
	const unsigned char *data;      /* valid until the next call */
	size_t len;
	int code;               /* CLOSE: its code, 1005 none; FAIL: the
	                         * code to close with */
	const char *why;        /* FAIL: for the close's reason */
};

struct xd_wsf {
	size_t max_msg;         /* a data message's limit, fragments
	                         * together */
	int failed;
	enum xd_wsf_op frag_op; /* the fragmented message's op, CONT none */
	unsigned char *msg;     /* its payload so far (and a whole one's) */
	size_t msg_len, msg_cap;
	unsigned char ctl[125]; /* a control frame's payload */
};

/* A reader for messages of at most max_msg bytes. */
void xd_wsf_init(struct xd_wsf *w, size_t max_msg);
void xd_wsf_free(struct xd_wsf *w);

/*
 * One step over the client's bytes b[0..n): *used gets how many it
 * took (MORE: all it could use, maybe 0 when a frame's head or payload
 * is not whole: call again with more).  MSG: one message; call again on
 * the rest.  FAIL: m->code and m->why; the reader is done.
 */
enum xd_wsf_rc xd_wsf_read(struct xd_wsf *w, const unsigned char *b,
    size_t n, size_t *used, struct xd_wsf_msg *m) SLUICE_MUSTCHECK;

/* The head of a server frame (FIN, unmasked) of op and len bytes into
 * h (up to 10 bytes): its length. */
size_t xd_wsf_head(unsigned char h[10], enum xd_wsf_op op, uint64_t len);

/* A close frame's payload: code and reason (cut at 123 bytes, at a
 * UTF-8 boundary) into p[125]: its length. */
size_t xd_wsf_close_payload(unsigned char p[125], int code, const char *why);

/* Sec-WebSocket-Accept of a client's Sec-WebSocket-Key (which must be
 * 16 bytes in base64, 24 characters): 0, or -1 for a bad key. */
int xd_wsf_accept(const char *key, char out[29]) SLUICE_MUSTCHECK;

/* Whether b[0..n) is UTF-8 (no overlongs, no surrogates, to U+10FFFF). */
int xd_wsf_utf8(const unsigned char *b, size_t n);

#endif /* SLUICE_EXEC_WSF_H */
