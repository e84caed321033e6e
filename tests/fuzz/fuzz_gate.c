/*
 * fuzz_gate.c: the request heads sluice-execd's TCP listener reads before
 * evhttp does (sandbox-glue/executor/execd/exec_gate.c), on arbitrary
 * bytes.  The first byte seeds how the rest arrives (chunks of 1 to 64
 * bytes, or all at once), the rest is what a peer sends:
 *  - the head's end as the filter finds it, chunk by chunk, looking
 *    again only past what it looked at, is where the whole bytes say
 *    it is, and nothing before it is an end;
 *  - the verdict on the head: a parse that fails or a bad body length
 *    shuts; a head passes only with a known token of at least the
 *    route's role (the token checked here again, byte for byte), with
 *    exactly its Content-Length or its chunked body (never for HEAD or
 *    TRACE);
 *  - a refused head as evhttp gets it: one head, ending where it ends,
 *    its request line and Authorization kept, no Content-Length,
 *    Transfer-Encoding or Expect, "Connection: close" last; and the
 *    gate refuses it again, never passing a body.
 * Tokens: "tok-admin" (admin), "tok-app" (app), "tok-audit" (auditor).
 * Routes: /v1/admin... needs admin, any other method than GET or HEAD
 * app, GET /healthz no role (it passes without a token, never with a
 * body), the rest auditor.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "sandbox-glue/executor/execd/execd-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEAD_MAX	(64 * 1024)     /* as exec_gate.c */

static struct xd_cfg cfg;
static int ready;

static const struct {
	const char *tok;
	enum xd_role role;
} toks[] = {
	{ "tok-admin", XD_ROLE_ADMIN },
	{ "tok-app", XD_ROLE_APP },
	{ "tok-audit", XD_ROLE_AUDITOR },
};

static void
setup(void)
{
	size_t i;

	xd_cfg_defaults(&cfg);
	for (i = 0; i < sizeof(toks) / sizeof(toks[0]); i++) {
		struct xd_token *t = &cfg.tokens[cfg.ntokens++];

		memset(t, 0, sizeof(*t));
		strcpy(t->name, toks[i].tok);
		xd_sha256(toks[i].tok, strlen(toks[i].tok), t->digest);
		t->role = toks[i].role;
	}
	ready = 1;
}

static enum xd_role
role_of(const char *method, const char *path)
{
	if (method == NULL || path == NULL)
		abort();
	if (strncmp(path, "/v1/admin", 9) == 0)
		return XD_ROLE_ADMIN;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return XD_ROLE_APP;
	if (strcmp(path, "/healthz") == 0)
		return XD_ROLE_NONE;
	return XD_ROLE_AUDITOR;
}

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

static int
in(const char *p, size_t n, const char *b, size_t len)
{
	return n == 0 || (p >= b && p + n <= b + len);
}

/* The role the head's token has, found again the plain way. */
static enum xd_role
role_again(const struct xd_gate_head *h)
{
	const char *v = h->auth;
	size_t n = h->alen, i;

	if (h->nauth != 1 || n < 7 || strncasecmp(v, "Bearer ", 7) != 0)
		return XD_ROLE_NONE;
	for (v += 7, n -= 7; n > 0 && *v == ' '; v++, n--)
		;
	for (i = 0; i < sizeof(toks) / sizeof(toks[0]); i++)
		if (strlen(toks[i].tok) == n && memcmp(toks[i].tok, v, n) == 0)
			return toks[i].role;
	return XD_ROLE_NONE;
}

static void
check_head(const char *b, size_t n)
{
	struct xd_gate_head h;
	struct xd_gate_verdict v, v2;
	struct evbuffer *out;
	const char *o;
	size_t olen, i;
	int64_t cl = 0;

	if (xd_gate_head_parse(b, n, &h) != 0) {
		CHECK(xd_gate_decide(&cfg, role_of, b, n, &v) == XD_GATE_SHUT);
		return;
	}
	CHECK(h.mlen > 0 || h.method == b);
	CHECK(in(h.method, h.mlen, b, n) && in(h.path, h.plen, b, n));
	CHECK(memchr(h.method, ' ', h.mlen) == NULL);
	CHECK(memchr(h.path, ' ', h.plen) == NULL);
	CHECK(in(h.auth, h.alen, b, n) && in(h.cl, h.cllen, b, n) &&
	    in(h.te, h.telen, b, n));
	CHECK(h.cllen == 0 || (h.cl[0] != ' ' && h.cl[0] != '\t' &&
	    h.cl[h.cllen - 1] != ' ' && h.cl[h.cllen - 1] != '\r'));
	CHECK(xd_gate_head_role(&cfg, &h) == role_again(&h));
	if (h.ncl == 1 && (cl = xd_gate_cl_value(&h)) >= 0) {
		/* digits only, at most 18 of them: what they say */
		uint64_t x = 0;

		CHECK(h.cllen > 0 && h.cllen <= 18);
		for (i = 0; i < h.cllen; i++) {
			CHECK(h.cl[i] >= '0' && h.cl[i] <= '9');
			x = x * 10 + (uint64_t)(h.cl[i] - '0');
		}
		CHECK((uint64_t)cl == x);
	}
	switch (xd_gate_decide(&cfg, role_of, b, n, &v)) {
	case XD_GATE_SHUT:
		CHECK(h.ncl > 1 || h.nte > 1 || (h.ncl == 1 && cl < 0));
		CHECK(v.why != NULL);
		return;
	case XD_GATE_PASS: {
		int nobody = (h.mlen == 4 && memcmp(h.method, "HEAD", 4) == 0) ||
		    (h.mlen == 5 && memcmp(h.method, "TRACE", 5) == 0);
		int chunked = h.nte == 1 && h.telen == 7 &&
		    strncasecmp(h.te, "chunked", 7) == 0;

		CHECK(v.role >= v.need);
		/* without a token only a route that needs no role, and
		 * never with a body */
		CHECK(v.role != XD_ROLE_NONE || (v.need == XD_ROLE_NONE &&
		    v.body == 0 && !v.chunked));
		CHECK(v.role == role_again(&h));
		CHECK(v.chunked == (!nobody && chunked));
		CHECK(v.body == (nobody || chunked || h.ncl == 0 ? 0 :
		    (uint64_t)cl));
		return;
	}
	case XD_GATE_REFUSE:
		CHECK(v.role < v.need || v.role == XD_ROLE_NONE);
		CHECK(v.body == 0 && !v.chunked);
		break;
	default:
		abort();
	}
	/* the refused head as evhttp reads it */
	CHECK((out = evbuffer_new()) != NULL);
	CHECK(xd_gate_head_refused(out, b, n) == 0);
	olen = evbuffer_get_length(out);
	o = (const char *)evbuffer_pullup(out, -1);
	CHECK(olen >= 21 && memcmp(o + olen - 21, "Connection: close\r\n\r\n",
	    21) == 0);
	CHECK(xd_gate_head_end(o, olen) == olen);
	{
		const char *nl = memchr(b, '\n', n);

		CHECK(nl != NULL && memcmp(o, b, (size_t)(nl - b) + 1) == 0);
	}
	{
		struct xd_gate_head r;
		enum xd_gate_what d2;

		CHECK(xd_gate_head_parse(o, olen, &r) == 0);
		CHECK(r.ncl == 0 && r.nte == 0);
		CHECK(r.nauth == h.nauth);
		CHECK(r.mlen == h.mlen && memcmp(r.method, h.method,
		    h.mlen) == 0);
		CHECK(r.plen == h.plen && memcmp(r.path, h.path, h.plen) ==
		    0);
		/* no Expect header (the request line is not one) */
		for (i = 1; i + 7 <= olen; i++)
			if (o[i - 1] == '\n' && strncasecmp(o + i, "Expect:",
			    7) == 0)
				abort();
		/* refused again, or, for a route that needs no role
		 * (/healthz) refused only for its body, passed without one */
		d2 = xd_gate_decide(&cfg, role_of, o, olen, &v2);
		CHECK(d2 == XD_GATE_REFUSE || (d2 == XD_GATE_PASS &&
		    v.need == XD_ROLE_NONE && v2.body == 0 && !v2.chunked));
		CHECK(v2.role == v.role && v2.need == v.need);
	}
	evbuffer_free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *b;
	size_t n, e, len, scanned = 0, got = 0;
	uint32_t seed;

	if (!ready)
		setup();
	if (size < 1)
		return 0;
	seed = data[0];
	b = (const char *)data + 1;
	n = size - 1;
	e = xd_gate_head_end(b, n);
	if (e != 0) {
		CHECK(e >= 2 && e <= n && b[e - 1] == '\n');
		CHECK(b[e - 2] == '\n' || (e >= 3 && b[e - 2] == '\r' &&
		    b[e - 3] == '\n'));
		CHECK(xd_gate_head_end(b, e - 1) == 0);
	}
	/* as the filter sees it: chunks, each look from where the last
	 * stopped, at most HEAD_MAX bytes looked at */
	for (len = 0; len < n && got == 0;) {
		size_t step, look;

		seed = seed * 1103515245u + 12345u;
		step = data[0] == 0 ? n : 1 + (seed >> 16) % 64;
		len = len + step > n ? n : len + step;
		look = len < HEAD_MAX ? len : HEAD_MAX;
		if (look <= scanned)
			break;
		got = xd_gate_head_scan(b, look, &scanned);
		CHECK(scanned == look);
		CHECK(got == (e != 0 && e <= look ? e : 0));
	}
	if (e != 0 && e <= HEAD_MAX)
		CHECK(got == e);
	if (e != 0)
		check_head(b, e);
	return 0;
}
