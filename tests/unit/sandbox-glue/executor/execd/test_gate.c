/*
 * test_gate.c: what sluice-execd's TCP gate (sandbox-glue/executor/
 * execd/exec_gate.c) decides from a request head before evhttp reads
 * it: where the head ends (also a byte at a time), its fields, the
 * bearer token's role, Content-Length as evhttp reads it, the verdict
 * (shut, refuse without the body, pass with exactly the body) and the
 * refused head as evhttp gets it.
 */
#include "sluice-config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <jansson.h>

#include "sandbox-glue/executor/execd/execd-int.h"

static struct xd_cfg cfg;

static void
add_token(const char *tok, enum xd_role role)
{
	struct xd_token *t = &cfg.tokens[cfg.ntokens++];

	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", tok);
	xd_sha256(tok, strlen(tok), t->digest);
	t->role = role;
}

static int
setup(void **state)
{
	(void)state;
	xd_cfg_defaults(&cfg);
	add_token("tok-admin", XD_ROLE_ADMIN);
	add_token("tok-app", XD_ROLE_APP);
	add_token("tok-audit", XD_ROLE_AUDITOR);
	return 0;
}

/* A small route table: /v1/admin needs admin, writes need app. */
static enum xd_role
role_of(const char *method, const char *path)
{
	if (strncmp(path, "/v1/admin", 9) == 0)
		return XD_ROLE_ADMIN;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return XD_ROLE_APP;
	return XD_ROLE_AUDITOR;
}

static enum xd_gate_what
decide(const char *head, struct xd_gate_verdict *v)
{
	return xd_gate_decide(&cfg, role_of, head, strlen(head), v);
}

static void
t_end(void **state)
{
	const char *h = "GET / HTTP/1.1\r\nHost: x\r\n\r\nBODY";
	size_t scanned = 0, i, got = 0;

	(void)state;
	assert_int_equal(xd_gate_head_end(h, strlen(h)), strlen(h) - 4);
	assert_int_equal(xd_gate_head_end("GET / HTTP/1.1\n\nX", 17), 16);
	assert_int_equal(xd_gate_head_end("GET / HTTP/1.1\r\nHost: x\r\n",
	    25), 0);
	/* an end cut after its CR is not one yet */
	assert_int_equal(xd_gate_head_end("GET / HTTP/1.1\r\n\r", 17), 0);
	/* CR CR LF is no empty line */
	assert_int_equal(xd_gate_head_end("GET / HTTP/1.1\r\n\r\r\n", 19), 0);
	/* a byte at a time: found when its last byte comes, at once */
	for (i = 1; i <= strlen(h) && got == 0; i++)
		got = xd_gate_head_scan(h, i, &scanned);
	assert_int_equal(got, strlen(h) - 4);
	assert_int_equal(i - 1, strlen(h) - 4);
	/* two bytes at a time across "\n\r\n" */
	scanned = 0;
	got = 0;
	for (i = 2; i <= strlen(h) + 1 && got == 0; i += 2)
		got = xd_gate_head_scan(h, i > strlen(h) ? strlen(h) : i,
		    &scanned);
	assert_int_equal(got, strlen(h) - 4);
	/* nothing to look at: nothing found, the look still counted */
	scanned = 0;
	assert_int_equal(xd_gate_head_scan(NULL, 10, &scanned), 0);
	assert_int_equal(scanned, 10);
}

static void
t_parse(void **state)
{
	struct xd_gate_head h;
	const char *s = "POST /v1/x?y HTTP/1.1\r\nauthorization:  Bearer "
	    "tok-app \t\r\nContent-Length:\t12 \r\nTransfer-Encoding: "
	    "chunked\r\nX: y\r\n\r\n";

	(void)state;
	assert_int_equal(xd_gate_head_parse(s, strlen(s), &h), 0);
	assert_int_equal(h.mlen, 4);
	assert_memory_equal(h.method, "POST", 4);
	assert_int_equal(h.plen, 7);
	assert_memory_equal(h.path, "/v1/x?y", 7);
	assert_int_equal(h.nauth, 1);
	assert_int_equal(h.alen, 14);
	assert_memory_equal(h.auth, "Bearer tok-app", 14);
	assert_int_equal(h.ncl, 1);
	assert_int_equal(h.cllen, 2);
	assert_int_equal(xd_gate_cl_value(&h), 12);
	assert_int_equal(h.nte, 1);
	assert_int_equal(xd_gate_head_role(&cfg, &h), XD_ROLE_APP);
	/* no request line, a folded line, a line without a colon */
	assert_int_equal(xd_gate_head_parse("GET\r\n\r\n", 7, &h), -1);
	assert_int_equal(xd_gate_head_parse("GET /\r\n\r\n", 9, &h), -1);
	s = "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n";
	assert_int_equal(xd_gate_head_parse(s, strlen(s), &h), -1);
	s = "GET / HTTP/1.1\r\nAb\r\n\r\n";
	assert_int_equal(xd_gate_head_parse(s, strlen(s), &h), -1);
	/* a key with a space before its colon is not the header (nor is
	 * it to evhttp) */
	s = "GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\n";
	assert_int_equal(xd_gate_head_parse(s, strlen(s), &h), 0);
	assert_int_equal(h.ncl, 0);
}

static void
t_cl(void **state)
{
	struct xd_gate_head h;

	(void)state;
	memset(&h, 0, sizeof(h));
#define CL(s)	(h.cl = (s), h.cllen = strlen(s), xd_gate_cl_value(&h))
	assert_int_equal(CL("0"), 0);
	assert_int_equal(CL("007"), 7);
	assert_int_equal(CL("999999999999999999"), 999999999999999999LL);
	assert_int_equal(CL("1000000000000000000"), -1);  /* 19 digits */
	assert_int_equal(CL(""), -1);
	assert_int_equal(CL("+5"), -1);
	assert_int_equal(CL("-1"), -1);
	assert_int_equal(CL("5 5"), -1);
	assert_int_equal(CL("0x10"), -1);
#undef CL
}

static void
t_role(void **state)
{
	struct xd_gate_head h;
	char big[5000];

	(void)state;
	memset(&h, 0, sizeof(h));
#define ROLE(s, n)	(h.auth = (s), h.alen = strlen(s), h.nauth = (n), \
	xd_gate_head_role(&cfg, &h))
	assert_int_equal(ROLE("Bearer tok-admin", 1), XD_ROLE_ADMIN);
	assert_int_equal(ROLE("bearer    tok-audit", 1), XD_ROLE_AUDITOR);
	assert_int_equal(ROLE("Bearer tok-admin", 2), XD_ROLE_NONE);
	assert_int_equal(ROLE("Basic tok-admin", 1), XD_ROLE_NONE);
	assert_int_equal(ROLE("Bearer", 1), XD_ROLE_NONE);
	assert_int_equal(ROLE("Bearer ", 1), XD_ROLE_NONE);
	assert_int_equal(ROLE("Bearer tok-admi", 1), XD_ROLE_NONE);
	assert_int_equal(ROLE("Bearer tok-adminx", 1), XD_ROLE_NONE);
	/* a NUL inside: not the token before it */
	h.auth = "Bearer tok-app\0x";
	h.alen = 16;
	assert_int_equal(xd_gate_head_role(&cfg, &h), XD_ROLE_NONE);
	/* longer than any token may be */
	memset(big, 'a', sizeof(big));
	memcpy(big, "Bearer ", 7);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(ROLE(big, 1), XD_ROLE_NONE);
#undef ROLE
}

static void
t_decide(void **state)
{
	struct xd_gate_verdict v;

	(void)state;
	/* passes: exactly its body */
	assert_int_equal(decide("POST /v1/sandboxes HTTP/1.1\r\nAuthorization: "
	    "Bearer tok-app\r\nContent-Length: 17\r\n\r\n", &v), XD_GATE_PASS);
	assert_int_equal(v.body, 17);
	assert_false(v.chunked);
	assert_int_equal(v.role, XD_ROLE_APP);
	assert_int_equal(v.need, XD_ROLE_APP);
	/* a higher role passes too */
	assert_int_equal(decide("POST /v1/sandboxes HTTP/1.1\r\nAuthorization: "
	    "Bearer tok-admin\r\nTransfer-Encoding: Chunked\r\n\r\n", &v),
	    XD_GATE_PASS);
	assert_true(v.chunked);
	assert_int_equal(v.body, 0);
	/* chunked wins over Content-Length (as evhttp reads it) */
	assert_int_equal(decide("PUT /v1/a HTTP/1.1\r\nAuthorization: Bearer "
	    "tok-app\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
	    "\r\n", &v), XD_GATE_PASS);
	assert_true(v.chunked);
	/* another coding is not chunked: the length counts */
	assert_int_equal(decide("PUT /v1/a HTTP/1.1\r\nAuthorization: Bearer "
	    "tok-app\r\nContent-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\n",
	    &v), XD_GATE_PASS);
	assert_false(v.chunked);
	assert_int_equal(v.body, 5);
	/* HEAD and TRACE carry no body whatever they say */
	assert_int_equal(decide("HEAD /v1/health HTTP/1.1\r\nAuthorization: "
	    "Bearer tok-audit\r\nContent-Length: 10\r\n\r\n", &v),
	    XD_GATE_PASS);
	assert_int_equal(v.body, 0);
	assert_false(v.chunked);
	/* a huge length passes as it is (evhttp's body limit answers) */
	assert_int_equal(decide("PUT /v1/a HTTP/1.1\r\nAuthorization: Bearer "
	    "tok-app\r\nContent-Length: 999999999999999999\r\n\r\n", &v),
	    XD_GATE_PASS);
	assert_int_equal(v.body, 999999999999999999ULL);
	/* refused: no token, an unknown one, too low a role */
	assert_int_equal(decide("GET /v1/health HTTP/1.1\r\n\r\n", &v),
	    XD_GATE_REFUSE);
	assert_int_equal(v.role, XD_ROLE_NONE);
	assert_int_equal(decide("POST /v1/sandboxes HTTP/1.1\r\nAuthorization: "
	    "Bearer nope\r\nContent-Length: 5\r\n\r\n", &v), XD_GATE_REFUSE);
	assert_int_equal(decide("POST /v1/sandboxes HTTP/1.1\r\nAuthorization: "
	    "Bearer tok-audit\r\nContent-Length: 5\r\n\r\n", &v),
	    XD_GATE_REFUSE);
	assert_int_equal(v.role, XD_ROLE_AUDITOR);
	assert_int_equal(v.need, XD_ROLE_APP);
	assert_int_equal(decide("GET /v1/admin/x HTTP/1.1\r\nAuthorization: "
	    "Bearer tok-app\r\n\r\n", &v), XD_GATE_REFUSE);
	assert_int_equal(v.need, XD_ROLE_ADMIN);
	assert_int_equal(v.body, 0);
	/* shut: does not parse, two lengths, a bad one, two codings; a bad
	 * length shuts even with a good token */
	assert_int_equal(decide("GARBAGE\r\n\r\n", &v), XD_GATE_SHUT);
	assert_non_null(v.why);
	assert_int_equal(decide("POST / HTTP/1.1\r\nAuthorization: Bearer "
	    "tok-admin\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	    &v), XD_GATE_SHUT);
	assert_non_null(strstr(v.why, "body length"));
	assert_int_equal(decide("POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
	    &v), XD_GATE_SHUT);
	assert_int_equal(decide("POST / HTTP/1.1\r\nTransfer-Encoding: chunked"
	    "\r\nTransfer-Encoding: chunked\r\n\r\n", &v), XD_GATE_SHUT);
	/* a target longer than the route table looks at: the lowest role */
	{
		char h[1200 + 64];

		snprintf(h, sizeof(h), "POST /v1/admin/%01100d HTTP/1.1\r\n"
		    "Authorization: Bearer tok-audit\r\n\r\n", 0);
		assert_int_equal(decide(h, &v), XD_GATE_PASS);
		assert_int_equal(v.need, XD_ROLE_AUDITOR);
	}
}

static void
t_refused(void **state)
{
	const char *h = "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"
	    "Authorization: Bearer nope\r\ncontent-length: 5\r\n"
	    "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n"
	    "Connection: keep-alive\r\nX-Content-Length: 3\r\n\r\n";
	const char *want = "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"
	    "Authorization: Bearer nope\r\nX-Content-Length: 3\r\n"
	    "Connection: close\r\n\r\n";
	struct evbuffer *out = evbuffer_new();
	struct xd_gate_verdict v;
	size_t n;
	char *s;

	(void)state;
	assert_non_null(out);
	assert_int_equal(xd_gate_head_refused(out, h, strlen(h)), 0);
	n = evbuffer_get_length(out);
	s = calloc(1, n + 1);
	assert_non_null(s);
	evbuffer_remove(out, s, n);
	assert_string_equal(s, want);
	/* and it is refused again, with no body to wait for */
	assert_int_equal(xd_gate_decide(&cfg, role_of, s, n, &v),
	    XD_GATE_REFUSE);
	free(s);
	evbuffer_free(out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_end),
		cmocka_unit_test(t_parse),
		cmocka_unit_test(t_cl),
		cmocka_unit_test(t_role),
		cmocka_unit_test(t_decide),
		cmocka_unit_test(t_refused),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
