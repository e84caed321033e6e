/*
 * fuzz_http.c: the HTTP head parser and the body framer.
 *
 * The first byte picks the mode and its parameters:
 *   bits 0-1  0: request head, then its body through the framer
 *             1: response head (bits 2-5 pick the request method)
 *             2: body framer alone (bits 2-3 pick the kind)
 *             3: request head with small limits
 * The rest is the message.  Besides memory errors, the harness traps on
 * broken invariants: pointers outside the buffer, a prefix of a parsed
 * head that is not INCOMPLETE, a resumed parse (the head handed over in
 * growing pieces) that ends otherwise than one call on the same bytes, or
 * a framer whose result depends on how the input is split.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/lib/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct http_msg msg, msg2;

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static int
inside(const char *p, size_t n, const char *buf, size_t len)
{
	return p >= buf && p + n <= buf + len;
}

static void
check_msg(const struct http_msg *m, const char *buf, size_t len, int is_req)
{
	size_t i;

	CHECK(m->head_len >= 4 && m->head_len <= len);
	CHECK(memcmp(buf + m->head_len - 4, "\r\n\r\n", 4) == 0);
	CHECK(m->version_minor == 0 || m->version_minor == 1);
	if (is_req) {
		CHECK(inside(m->method, m->method_len, buf, m->head_len));
		CHECK(inside(m->target, m->target_len, buf, m->head_len));
		CHECK(m->host_idx < (int)m->nheaders);
		if (m->m == HTTP_M_CONNECT)
			CHECK(m->body == HTTP_BODY_NONE);
		CHECK(m->body != HTTP_BODY_UNTIL_CLOSE);
	} else {
		CHECK(m->status >= 100 && m->status <= 599);
		CHECK(inside(m->reason_phrase, m->reason_len, buf, m->head_len));
	}
	for (i = 0; i < m->nheaders; i++) {
		const struct http_header *h = &m->headers[i];

		CHECK(inside(h->name, h->name_len, buf, m->head_len));
		CHECK(inside(h->value, h->value_len, buf, m->head_len));
		CHECK(h->name_len > 0);
		(void)http_is_hop_by_hop(m, h);
		/* duplicates are refused, so a Content-Length is the one */
		if (h->name_len == 14 &&
		    strncasecmp(h->name, "content-length", 14) == 0)
			CHECK(http_find_header(m, "Content-Length") == (int)i);
	}
}

/* Feed all of buf at once and again in pieces; the two must agree. */
static void
frame_body(enum http_body kind, uint64_t cl, size_t max_line,
    const char *buf, size_t len, unsigned seed)
{
	struct http_body_state a, b;
	long ra, rb = 0, r;
	size_t pos = 0;
	int err = 0;

	http_body_init(&a, kind, cl, max_line);
	http_body_init(&b, kind, cl, max_line);
	ra = http_body_feed(&a, buf, len);
	CHECK(ra >= -1 && ra <= (long)len);
	while (pos < len && !b.done) {
		size_t piece = 1 + (seed % 5);

		seed = seed * 1103515245u + 12345u;
		if (piece > len - pos)
			piece = len - pos;
		r = http_body_feed(&b, buf + pos, piece);
		if (r < 0) {
			err = 1;
			break;
		}
		CHECK((size_t)r <= piece);
		CHECK((size_t)r == piece || b.done);
		rb += r;
		pos += (size_t)r;
	}
	if (ra < 0) {
		CHECK(err);
		return;
	}
	CHECK(!err && ra == rb && a.done == b.done);
	if (kind == HTTP_BODY_UNTIL_CLOSE)
		CHECK(!a.done && ra == (long)len);
}

/*
 * Hand buf over in growing prefixes (steps from seed) with one resume
 * state, as sluiced does with its reads: the first status that is not
 * INCOMPLETE, and the head, must be those of one call on that prefix.
 */
static void
resume_agrees(const char *buf, size_t len, const struct http_limits *lim,
    int is_req, enum http_method m, unsigned seed)
{
	struct http_parse_state ps;
	enum http_status st = HTTP_PARSE_INCOMPLETE, want;
	size_t k = 0;

	memset(&ps, 0, sizeof(ps));
	while (st == HTTP_PARSE_INCOMPLETE && k < len) {
		k += 1 + seed % 13;
		seed = seed * 1103515245u + 12345u;
		if (k > len)
			k = len;
		st = is_req ?
		    http_parse_request_resume(buf, k, lim, &ps, &msg2, NULL) :
		    http_parse_response_resume(buf, k, lim, m, &ps, &msg2,
		    NULL);
		want = is_req ? http_parse_request(buf, k, lim, &msg, NULL) :
		    http_parse_response(buf, k, lim, m, &msg, NULL);
		CHECK(st == want);
	}
	if (st == HTTP_PARSE_OK)
		CHECK(msg2.head_len == msg.head_len &&
		    msg2.nheaders == msg.nheaders && msg2.body == msg.body);
}

static void
parse_request(const char *buf, size_t len, const struct http_limits *lim)
{
	enum http_status st;
	const char *why = NULL;

	resume_agrees(buf, len, lim, 1, HTTP_M_OTHER, (unsigned)len);
	st = http_parse_request(buf, len, lim, &msg, &why);
	CHECK(st == HTTP_PARSE_OK || st == HTTP_PARSE_INCOMPLETE ||
	    why != NULL);
	if (st != HTTP_PARSE_OK)
		return;
	check_msg(&msg, buf, len, 1);
	/* nothing short of the whole head is a head */
	CHECK(http_parse_request(buf, msg.head_len - 1, lim, &msg2, NULL) ==
	    HTTP_PARSE_INCOMPLETE);
	CHECK(http_parse_request(buf, msg.head_len / 2, lim, &msg2, NULL) ==
	    HTTP_PARSE_INCOMPLETE);
	frame_body(msg.body, msg.content_length, lim->max_line,
	    buf + msg.head_len, len - msg.head_len, (unsigned)len);
}

static void
parse_response(const char *buf, size_t len, enum http_method m)
{
	struct http_limits lim;
	enum http_status st;

	http_limits_default(&lim);
	resume_agrees(buf, len, &lim, 0, m, (unsigned)len);
	st = http_parse_response(buf, len, &lim, m, &msg, NULL);
	if (st != HTTP_PARSE_OK)
		return;
	check_msg(&msg, buf, len, 0);
	CHECK(http_parse_response(buf, msg.head_len - 1, &lim, m, &msg2,
	    NULL) == HTTP_PARSE_INCOMPLETE);
	if (msg.body == HTTP_BODY_UNTIL_CLOSE)
		CHECK(!msg.keep_alive);
	frame_body(msg.body, msg.content_length, lim.max_line,
	    buf + msg.head_len, len - msg.head_len, (unsigned)len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_limits lim;
	const char *buf;
	char *copy;
	size_t len;
	uint8_t mode;

	if (size < 1)
		return 0;
	mode = data[0];
	len = size - 1;
	/* An exact-size copy lets ASan see any read past the end. */
	copy = malloc(len ? len : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data + 1, len);
	buf = copy;
	http_limits_default(&lim);
	switch (mode & 3) {
	case 0:
		parse_request(buf, len, &lim);
		break;
	case 1:
		parse_response(buf, len,
		    (enum http_method)((mode >> 2) % (HTTP_M_UNKNOWN + 1)));
		break;
	case 2:
		frame_body((enum http_body)((mode >> 2) & 3),
		    (uint64_t)(mode >> 4) * 7, 16 + (mode >> 4),
		    buf, len, mode);
		break;
	default:
		lim.max_line = 16 + (mode >> 2);
		lim.max_head = 64 + 4 * (mode >> 2);
		lim.max_headers = (mode >> 4);
		parse_request(buf, len, &lim);
		break;
	}
	free(copy);
	return 0;
}
