/* test_tproxy.c: transparent mode's pure parts: addresses from
 * SO_ORIGINAL_DST answers, targets from redirected requests. */
#include "sluice-config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <cmocka.h>

#include "proxy/lib/tproxy.h"

static void
test_sockaddr(void **state)
{
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_un un;
	struct pol_addr a;
	uint16_t port = 0;
	char buf[64];

	(void)state;
	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_port = htons(443);
	inet_pton(AF_INET, "198.51.100.10", &in.sin_addr);
	assert_int_equal(tp_addr_from_sockaddr((struct sockaddr *)&in,
	    sizeof(in), &a, &port), 0);
	assert_int_equal(a.family, AF_INET);
	assert_memory_equal(a.a, "\xc6\x33\x64\x0a", 4);
	assert_int_equal(port, 443);
	tp_format_dst(&a, port, buf, sizeof(buf));
	assert_string_equal(buf, "198.51.100.10:443");
	/* the kernel's answer is sized to the family: short is refused */
	assert_int_equal(tp_addr_from_sockaddr((struct sockaddr *)&in, 8,
	    &a, &port), -1);

	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	in6.sin6_port = htons(80);
	inet_pton(AF_INET6, "2001:db8::10", &in6.sin6_addr);
	assert_int_equal(tp_addr_from_sockaddr((struct sockaddr *)&in6,
	    sizeof(in6), &a, &port), 0);
	assert_int_equal(a.family, AF_INET6);
	assert_int_equal(port, 80);
	tp_format_dst(&a, port, buf, sizeof(buf));
	assert_string_equal(buf, "[2001:db8::10]:80");

	/* a v4 client of a dual-stack socket is the v4 address */
	inet_pton(AF_INET6, "::ffff:10.200.0.2", &in6.sin6_addr);
	assert_int_equal(tp_addr_from_sockaddr((struct sockaddr *)&in6,
	    sizeof(in6), &a, &port), 0);
	assert_int_equal(a.family, AF_INET);
	assert_memory_equal(a.a, "\x0a\xc8\x00\x02", 4);

	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	assert_int_equal(tp_addr_from_sockaddr((struct sockaddr *)&un,
	    sizeof(un), &a, &port), -1);
}

static enum pol_reason
target(const char *head, uint16_t port, struct pol_target *t, char *path,
    size_t pathlen)
{
	struct http_limits lim;
	struct http_msg *m = malloc(sizeof(*m));
	const char *why = NULL, *p = NULL;
	size_t plen = 0;
	enum pol_reason r;

	assert_non_null(m);
	http_limits_default(&lim);
	assert_int_equal(http_parse_request(head, strlen(head), &lim, m, &why),
	    HTTP_PARSE_OK);
	r = tp_http_target(m, port, t, &p, &plen);
	snprintf(path, pathlen, "%.*s", (int)plen, p ? p : "");
	free(m);
	return r;
}

static void
test_http_target(void **state)
{
	struct pol_target t;
	char path[128];

	(void)state;
	/* origin form: Host names the host, the redirect the port */
	assert_int_equal(target("GET /simple/x?y=1 HTTP/1.1\r\n"
	    "Host: Allowed.Test\r\n\r\n", 80, &t, path, sizeof(path)),
	    POL_R_NONE);
	assert_string_equal(t.host, "allowed.test");
	assert_int_equal(t.port, 80);
	assert_string_equal(path, "/simple/x?y=1");
	assert_int_equal(target("GET / HTTP/1.1\r\nHost: allowed.test:80\r\n"
	    "\r\n", 80, &t, path, sizeof(path)), POL_R_NONE);
	/* a port of its own is not where the client went */
	assert_int_equal(target("GET / HTTP/1.1\r\nHost: allowed.test:8080"
	    "\r\n\r\n", 80, &t, path, sizeof(path)), POL_R_HOST_MISMATCH);
	assert_string_equal(t.host, "");
	/* no Host, no name */
	assert_int_equal(target("GET / HTTP/1.0\r\n\r\n", 80, &t, path,
	    sizeof(path)), POL_R_BAD_REQUEST);
	/* non-canonical hosts are refused, not repaired */
	assert_int_equal(target("GET / HTTP/1.1\r\nHost: 127.1\r\n\r\n", 80,
	    &t, path, sizeof(path)), POL_R_BAD_TARGET);
	/* IPv4 literal as Host: policy decides the address */
	assert_int_equal(target("GET / HTTP/1.1\r\nHost: 198.51.100.10\r\n"
	    "\r\n", 80, &t, path, sizeof(path)), POL_R_NONE);
	assert_int_equal(t.kind, POL_HOST_V4);

	/* absolute form: the URI names it, Host must agree */
	assert_int_equal(target("GET http://allowed.test/a HTTP/1.1\r\n"
	    "Host: allowed.test\r\n\r\n", 80, &t, path, sizeof(path)),
	    POL_R_NONE);
	assert_string_equal(t.host, "allowed.test");
	assert_string_equal(path, "/a");
	assert_int_equal(target("GET http://allowed.test/a HTTP/1.1\r\n"
	    "Host: other.test\r\n\r\n", 80, &t, path, sizeof(path)),
	    POL_R_HOST_MISMATCH);
	assert_int_equal(target("GET http://allowed.test:81/ HTTP/1.1\r\n"
	    "Host: allowed.test:81\r\n\r\n", 80, &t, path, sizeof(path)),
	    POL_R_HOST_MISMATCH);
	assert_int_equal(target("GET https://allowed.test/ HTTP/1.1\r\n"
	    "Host: allowed.test\r\n\r\n", 80, &t, path, sizeof(path)),
	    POL_R_BAD_TARGET);

	/* a proxy request has no place here */
	assert_int_equal(target("CONNECT allowed.test:443 HTTP/1.1\r\n"
	    "Host: allowed.test:443\r\n\r\n", 80, &t, path, sizeof(path)),
	    POL_R_BAD_TARGET);
	assert_int_equal(target("OPTIONS * HTTP/1.1\r\nHost: allowed.test\r\n"
	    "\r\n", 80, &t, path, sizeof(path)), POL_R_BAD_TARGET);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sockaddr),
		cmocka_unit_test(test_http_target),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
