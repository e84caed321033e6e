/*
 * Unit tests of sluicectl's modules: the HTTP response parser and URL
 * splitter of ctl_http.c, the time prefixes and filters of ctl_log.c.
 */
#include "sluice-config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "proxy/sluicectl/ctl_http.h"
#include "proxy/sluicectl/ctl_log.h"

static int
parse(const char *s, int eof, struct ctlh_resp *r, char *err)
{
	return ctlh_parse_response(s, strlen(s), eof, r, err, 256);
}

static void
test_content_length(void **state)
{
	struct ctlh_resp r;
	char err[256];
	const char *s = "HTTP/1.1 201 Created\r\nContent-Type: application/json"
	    "\r\nContent-Length: 13\r\n\r\n{\"id\":\"c-1\"}\n";

	(void)state;
	assert_int_equal(parse(s, 0, &r, err), 1);
	assert_int_equal(r.status, 201);
	assert_string_equal(r.reason, "Created");
	assert_int_equal(r.body_len, 13);
	assert_memory_equal(r.body, "{\"id\":\"c-1\"}\n", 13);
	ctlh_resp_free(&r);
}

/* Every strict prefix needs more bytes; at EOF each one is an error. */
static void
test_every_prefix(void **state)
{
	const char *s = "HTTP/1.1 409 Conflict\r\nContent-Length: 5\r\n"
	    "Server: x\r\n\r\nhello";
	size_t n = strlen(s), i;
	struct ctlh_resp r;
	char err[256];

	(void)state;
	for (i = 0; i < n; i++) {
		assert_int_equal(ctlh_parse_response(s, i, 0, &r, err, 256), 0);
		assert_int_equal(ctlh_parse_response(s, i, 1, &r, err, 256),
		    -1);
	}
	assert_int_equal(ctlh_parse_response(s, n, 0, &r, err, 256), 1);
	assert_int_equal(r.status, 409);
	assert_string_equal(r.body, "hello");
	ctlh_resp_free(&r);
}

static void
test_chunked(void **state)
{
	const char *s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "4;ext=1\r\n{\"a\"\r\nA\r\n:[1,2,3]}\n\r\n0\r\nX-T: y\r\n\r\n";
	size_t n = strlen(s), i;
	struct ctlh_resp r;
	char err[256];

	(void)state;
	for (i = 0; i < n; i++)
		assert_int_equal(ctlh_parse_response(s, i, 0, &r, err, 256), 0);
	assert_int_equal(ctlh_parse_response(s, n, 0, &r, err, 256), 1);
	assert_int_equal(r.body_len, 14);
	assert_string_equal(r.body, "{\"a\":[1,2,3]}\n");
	ctlh_resp_free(&r);
}

static void
test_until_close(void **state)
{
	const char *s = "HTTP/1.0 500 Internal\r\n\r\n{\"error\":{}}";
	struct ctlh_resp r;
	char err[256];

	(void)state;
	assert_int_equal(parse(s, 0, &r, err), 0);
	assert_int_equal(parse(s, 1, &r, err), 1);
	assert_int_equal(r.status, 500);
	assert_string_equal(r.body, "{\"error\":{}}");
	ctlh_resp_free(&r);
}

static void
test_no_content(void **state)
{
	struct ctlh_resp r;
	char err[256];

	(void)state;
	assert_int_equal(parse("HTTP/1.1 204 No Content\r\n\r\n", 0, &r, err),
	    1);
	assert_int_equal(r.body_len, 0);
	assert_non_null(r.body);
	ctlh_resp_free(&r);
}

static void
test_malformed(void **state)
{
	static const char *const bad[] = {
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/2 200 OK\r\n\r\n",
		"HTTP/1.1 200OK\r\n\r\n",
		"HTTP/1.1 600 Nope\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\nX: y\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2"
		    "\r\n\r\nab",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\n: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\001b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "123456789\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "zz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "2\r\nabXY0\r\n\r\n",
		NULL,
	};
	struct ctlh_resp r;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; bad[i] != NULL; i++) {
		err[0] = '\0';
		if (parse(bad[i], 0, &r, err) != -1)
			fail_msg("accepted: %s", bad[i]);
		assert_true(err[0] != '\0');
	}
}

static void
test_head_cap(void **state)
{
	size_t n = CTLH_HEAD_MAX + 100;
	char *s = malloc(n + 1);
	struct ctlh_resp r;
	char err[256];

	(void)state;
	assert_non_null(s);
	memcpy(s, "HTTP/1.1 200 OK\r\nX: ", 20);
	memset(s + 20, 'a', n - 20);
	s[n] = '\0';
	assert_int_equal(ctlh_parse_response(s, n, 0, &r, err, sizeof(err)),
	    -1);
	free(s);
}

static void
test_url(void **state)
{
	char h[64], p[8];

	(void)state;
	assert_int_equal(ctlh_parse_url("https://broker.test:8443", h,
	    sizeof(h), p, sizeof(p)), 0);
	assert_string_equal(h, "broker.test");
	assert_string_equal(p, "8443");
	assert_int_equal(ctlh_parse_url("HTTPS://[::1]:9/", h, sizeof(h), p,
	    sizeof(p)), 0);
	assert_string_equal(h, "::1");
	assert_string_equal(p, "9");
	assert_int_equal(ctlh_parse_url("https://127.0.0.1", h, sizeof(h), p,
	    sizeof(p)), 0);
	assert_string_equal(p, "443");
	assert_int_equal(ctlh_parse_url("http://a:1", h, sizeof(h), p,
	    sizeof(p)), -1);
	assert_int_equal(ctlh_parse_url("https://u@a:1", h, sizeof(h), p,
	    sizeof(p)), -1);
	assert_int_equal(ctlh_parse_url("https://a:0", h, sizeof(h), p,
	    sizeof(p)), -1);
	assert_int_equal(ctlh_parse_url("https://a:65536", h, sizeof(h), p,
	    sizeof(p)), -1);
	assert_int_equal(ctlh_parse_url("https://a:1/v1", h, sizeof(h), p,
	    sizeof(p)), -1);
	assert_int_equal(ctlh_parse_url("https://:1", h, sizeof(h), p,
	    sizeof(p)), -1);
	assert_int_equal(ctlh_parse_url("https://[::1", h, sizeof(h), p,
	    sizeof(p)), -1);
}

static void
test_ts_prefix(void **state)
{
	(void)state;
	assert_true(ctlog_ts_valid("2024"));
	assert_true(ctlog_ts_valid("2024-05-01"));
	assert_true(ctlog_ts_valid("2024-05-01T10"));
	assert_true(ctlog_ts_valid("2024-05-01T10:00:00Z"));
	assert_true(ctlog_ts_valid("2024-05-01T10:00:00.123Z"));
	assert_false(ctlog_ts_valid("202"));
	assert_false(ctlog_ts_valid("2024/05/01"));
	assert_false(ctlog_ts_valid("2024-05-01 10:00"));
	assert_false(ctlog_ts_valid("2024-05-01T10:00:00+02:00"));
	assert_false(ctlog_ts_valid("yesterday"));
}

static void
test_match(void **state)
{
	json_t *rec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:n}",
	    "ts", "2024-05-01T10:30:00.000Z", "event", "decision",
	    "session", "s1", "host", "pypi.org", "decision", "deny",
	    "reason");
	struct ctlog_filter f;

	(void)state;
	assert_non_null(rec);
	memset(&f, 0, sizeof(f));
	assert_true(ctlog_match(rec, &f));
	f.session = "s1";
	f.host = "PyPI.org";
	f.decision = "deny";
	assert_true(ctlog_match(rec, &f));
	f.reason = "admin_deny";       /* reason is null in the record */
	assert_false(ctlog_match(rec, &f));
	f.reason = NULL;
	f.since = "2024-05-01T10:30";
	f.until = "2024-05-01";
	assert_true(ctlog_match(rec, &f));
	f.until = "2024-05-01T10:29";
	assert_false(ctlog_match(rec, &f));
	f.until = NULL;
	f.since = "2024-05-02";
	assert_false(ctlog_match(rec, &f));
	f.since = NULL;
	f.session = "s2";
	assert_false(ctlog_match(rec, &f));
	json_decref(rec);
}

/* ---- Server-Sent Events ---- */

struct got {
	int n;
	char type[8][64], data[8][256], id[8][128];
};

static void
collect(void *arg, const char *type, const char *data, size_t len,
    const char *id)
{
	struct got *g = arg;

	assert_true(g->n < 8);
	assert_int_equal(strlen(data), len);
	snprintf(g->type[g->n], 64, "%s", type);
	snprintf(g->data[g->n], 256, "%s", data);
	snprintf(g->id[g->n], 128, "%s", id);
	g->n++;
}

static const char sse_text[] =
    ": ping\n\n"
    "id: 7\nevent: prompt\ndata: {\"id\":\"p-1\"}\n\n"
    "id: 8\r\nevent: prompt_resolved\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n"
    "event: x\rdata\rretry: 10\r\r"
    "data: tail-not-dispatched";

static void
check_sse(const struct got *g, const struct ctlh_sse *p)
{
	assert_int_equal(g->n, 3);
	assert_string_equal(g->type[0], "prompt");
	assert_string_equal(g->data[0], "{\"id\":\"p-1\"}");
	assert_string_equal(g->id[0], "7");
	assert_string_equal(g->type[1], "prompt_resolved");
	assert_string_equal(g->data[1], "{\"a\":\n1}");
	assert_string_equal(g->id[1], "8");
	/* a bare "data" field is an empty line of data; the id carries on */
	assert_string_equal(g->type[2], "x");
	assert_string_equal(g->data[2], "");
	assert_string_equal(g->id[2], "8");
	assert_int_equal(p->comments, 1);
}

/* Whole, and fed one byte at a time (a CR at a read's end, then LF). */
static void
test_sse_events(void **state)
{
	struct ctlh_sse p;
	struct got g;
	char err[128];
	size_t i;

	(void)state;
	memset(&g, 0, sizeof(g));
	ctlh_sse_init(&p);
	assert_int_equal(ctlh_sse_feed(&p, sse_text, sizeof(sse_text) - 1,
	    collect, &g, err, sizeof(err)), 0);
	check_sse(&g, &p);
	ctlh_sse_free(&p);

	memset(&g, 0, sizeof(g));
	ctlh_sse_init(&p);
	for (i = 0; i < sizeof(sse_text) - 1; i++)
		assert_int_equal(ctlh_sse_feed(&p, sse_text + i, 1, collect, &g,
		    err, sizeof(err)), 0);
	check_sse(&g, &p);
	/* after a drop the half event is gone, the last id stays */
	ctlh_sse_reset(&p);
	assert_int_equal(ctlh_sse_feed(&p, "\n", 1, collect, &g, err,
	    sizeof(err)), 0);
	assert_int_equal(g.n, 3);
	assert_string_equal(p.id, "8");
	ctlh_sse_free(&p);
}

static void
test_sse_limits(void **state)
{
	struct ctlh_sse p;
	struct got g;
	char err[128], *big;
	size_t n = CTLH_SSE_LINE_MAX + 10;

	(void)state;
	memset(&g, 0, sizeof(g));
	ctlh_sse_init(&p);
	big = malloc(n);
	assert_non_null(big);
	memset(big, 'a', n);
	memcpy(big, "data: ", 6);
	assert_int_equal(ctlh_sse_feed(&p, big, n, collect, &g, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "longer"));
	free(big);
	ctlh_sse_reset(&p);
	/* an id too long to send back is ignored */
	{
		char line[300] = "id: ";
		memset(line + 4, '9', 200);
		strcpy(line + 204, "\ndata: x\n\n");
		assert_int_equal(ctlh_sse_feed(&p, line, strlen(line), collect,
		    &g, err, sizeof(err)), 0);
	}
	assert_int_equal(g.n, 1);
	assert_string_equal(g.id[0], "");
	ctlh_sse_free(&p);
}

/* data lines without the blank line that ends an event: the event
 * being read is capped at CTLH_BODY_MAX, not grown without end */
static void
test_sse_data_cap(void **state)
{
	struct ctlh_sse p;
	struct got g;
	char err[128], *line;
	size_t n = CTLH_SSE_LINE_MAX / 2, i;
	int rc = 0;

	(void)state;
	memset(&g, 0, sizeof(g));
	ctlh_sse_init(&p);
	line = malloc(n);
	assert_non_null(line);
	memset(line, 'a', n);
	memcpy(line, "data: ", 6);
	line[n - 1] = '\n';
	/* bounded: twice the cap's worth of lines */
	for (i = 0; i < 2 * (CTLH_BODY_MAX / n) + 2 && rc == 0; i++)
		rc = ctlh_sse_feed(&p, line, n, collect, &g, err, sizeof(err));
	assert_int_equal(rc, -1);
	assert_non_null(strstr(err, "event data"));
	assert_true(i <= CTLH_BODY_MAX / (n - 7) + 1);
	assert_true(p.datacap <= 2u * CTLH_BODY_MAX);
	assert_int_equal(g.n, 0);
	free(line);
	/* after a reset the parser reads events again */
	ctlh_sse_reset(&p);
	assert_int_equal(ctlh_sse_feed(&p, "data: x\n\n", 9, collect, &g, err,
	    sizeof(err)), 0);
	assert_int_equal(g.n, 1);
	ctlh_sse_free(&p);
}

static long
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A server that takes the connection (the backlog) and never answers:
 * the interruption's descriptor cuts the wait to its grace, not the
 * timeout. */
static void
test_interrupted_wait(void **state)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct ctlh_intr intr = { .grace_ms = 100 };
	struct ctlh_target t = { .timeout_ms = 20000, .intr = &intr };
	struct ctlh_resp r;
	char dir[] = "/tmp/test_sluicectl.XXXXXX", err[256];
	int ls, pfd[2];
	long t0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/s", dir);
	ls = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(ls >= 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(ls, 4), 0);
	assert_int_equal(pipe(pfd), 0);
	intr.fd = pfd[0];
	t.socket = sun.sun_path;
	assert_int_equal(write(pfd[1], "", 1), 1);
	t0 = mono_ms();
	assert_int_equal(ctlh_request(&t, "GET", "/v1/x", NULL, &r, err,
	    sizeof(err)), CTLH_BAD_RESPONSE);
	assert_true(mono_ms() - t0 < 5000);
	assert_non_null(strstr(err, "nterrupted"));
	/* without it, the same wait is the timeout's */
	t.intr = NULL;
	t.timeout_ms = 300;
	t0 = mono_ms();
	assert_int_equal(ctlh_request(&t, "GET", "/v1/x", NULL, &r, err,
	    sizeof(err)), CTLH_BAD_RESPONSE);
	assert_true(mono_ms() - t0 >= 250);
	assert_non_null(strstr(err, "timed out"));
	close(pfd[0]);
	close(pfd[1]);
	close(ls);
	unlink(sun.sun_path);
	rmdir(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_content_length),
		cmocka_unit_test(test_every_prefix),
		cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_until_close),
		cmocka_unit_test(test_no_content),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_head_cap),
		cmocka_unit_test(test_url),
		cmocka_unit_test(test_ts_prefix),
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_sse_events),
		cmocka_unit_test(test_sse_limits),
		cmocka_unit_test(test_sse_data_cap),
		cmocka_unit_test(test_interrupted_wait),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
