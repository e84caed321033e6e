/*
 * test_policy.c: unit tests for policy/ (parsing, classes, host sets,
 * CIDR precedence, state and the decision order).
 *
 * The bypass vectors are those of anchors.md section 6 that concern
 * parsing or classification; each row states the outcome it must get.
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "policy/policy.h"

/* ------------------------------------------------------------------ */
/* Helpers */

static struct pol_addr
addr(const char *s)
{
	struct pol_addr a;

	assert_int_equal(pol_addr_parse(s, strlen(s), &a), 0);
	return a;
}

static enum pol_addr_class
class_of(const char *s)
{
	struct pol_addr a = addr(s);

	return pol_addr_classify(&a);
}

/* pol_check_addr against a config with no CIDR lists or host addresses. */
static enum pol_reason
check_plain(const char *s, enum pol_addr_class *cls)
{
	struct pol_config *c = pol_config_new();
	struct pol_addr a = addr(s);
	enum pol_reason r;

	assert_non_null(c);
	r = pol_check_addr(c, &a, cls);
	pol_config_free(c);
	return r;
}

/* ------------------------------------------------------------------ */
/* anchors.md section 6 */

enum form { F_URI, F_AUTH, F_HOST, F_HOSTPORT };
enum outcome {
	REFUSED,   /* refused at parse with bad_target */
	LITERAL,   /* parsed as an address literal of class cls, and then
	              refused by pol_check_addr unless cls is public */
	NAME,      /* parsed as the name canon; DNS answering `resolved`
	              gets that address refused by pol_check_addr */
};

struct vec {
	int num;
	enum form form;
	const char *in;
	enum outcome out;
	const char *canon;
	int cls;
	const char *resolved;
	uint16_t port;             /* expected port, 0: not checked */
};

static const struct vec vectors[] = {
	{ 1, F_URI, "http://127.0.0.1/", LITERAL, "127.0.0.1", POL_AC_LOOPBACK, NULL, 80 },
	{ 2, F_URI, "http://127.1/", REFUSED, NULL, 0, NULL, 0 },
	{ 2, F_URI, "http://127.0.1/", REFUSED, NULL, 0, NULL, 0 },
	{ 3, F_URI, "http://2130706433/", REFUSED, NULL, 0, NULL, 0 },
	{ 4, F_URI, "http://0x7f000001/", REFUSED, NULL, 0, NULL, 0 },
	{ 5, F_URI, "http://017700000001/", REFUSED, NULL, 0, NULL, 0 },
	{ 6, F_URI, "http://0177.0.0.1/", REFUSED, NULL, 0, NULL, 0 },
	{ 6, F_URI, "http://0x7f.0.0.1/", REFUSED, NULL, 0, NULL, 0 },
	{ 7, F_URI, "http://0127.0.0.1/", REFUSED, NULL, 0, NULL, 0 },
	{ 8, F_URI, "http://127.000.000.001/", REFUSED, NULL, 0, NULL, 0 },
	{ 8, F_URI, "http://127.127.127.127/", LITERAL, "127.127.127.127", POL_AC_LOOPBACK, NULL, 80 },
	{ 9, F_URI, "http://0/", REFUSED, NULL, 0, NULL, 0 },
	{ 9, F_URI, "http://0.0.0.0:22/", LITERAL, "0.0.0.0", POL_AC_UNSPECIFIED, NULL, 22 },
	{ 10, F_URI, "http://[::]/", LITERAL, "::", POL_AC_UNSPECIFIED, NULL, 80 },
	{ 11, F_URI, "http://[::1]/", LITERAL, "::1", POL_AC_LOOPBACK, NULL, 80 },
	{ 11, F_URI, "http://[0000::1]/", LITERAL, "::1", POL_AC_LOOPBACK, NULL, 80 },
	{ 12, F_URI, "http://[::ffff:127.0.0.1]/", LITERAL, "::ffff:127.0.0.1", POL_AC_EMBEDDED, NULL, 80 },
	{ 12, F_URI, "http://[0:0:0:0:0:ffff:127.0.0.1]/", LITERAL, "::ffff:127.0.0.1", POL_AC_EMBEDDED, NULL, 80 },
	{ 12, F_URI, "http://[::ffff:7f00:1]/", LITERAL, "::ffff:127.0.0.1", POL_AC_EMBEDDED, NULL, 80 },
	{ 13, F_URI, "http://[::127.0.0.1]/", LITERAL, "::127.0.0.1", POL_AC_EMBEDDED, NULL, 80 },
	{ 14, F_HOST, "localhost", NAME, "localhost", POL_AC_LOOPBACK, "127.0.0.1", 0 },
	{ 14, F_HOST, "LOCALHOST", NAME, "localhost", POL_AC_LOOPBACK, "127.0.0.1", 0 },
	{ 14, F_HOST, "localhost.", NAME, "localhost", POL_AC_LOOPBACK, "127.0.0.1", 0 },
	{ 14, F_HOST, "foo.localhost", NAME, "foo.localhost", POL_AC_LOOPBACK, "127.0.0.1", 0 },
	{ 15, F_HOST, "127.0.0.1.nip.io", NAME, "127.0.0.1.nip.io", POL_AC_LOOPBACK, "127.0.0.1", 0 },
	{ 15, F_HOST, "company.127.0.0.1.nip.io", NAME, "company.127.0.0.1.nip.io", POL_AC_LOOPBACK, "127.0.0.1", 0 },
	{ 15, F_HOST, "localh.st", NAME, "localh.st", POL_AC_LOOPBACK, "127.0.0.1", 0 },
	{ 16, F_HOST, "localtest.me", NAME, "localtest.me", POL_AC_LOOPBACK, "::1", 0 },
	{ 17, F_HOST, "\xe2\x91\xa0\xe2\x91\xa1\xe2\x91\xa6.\xe2\x93\xaa.\xe2\x93\xaa.\xe2\x91\xa0", REFUSED, NULL, 0, NULL, 0 },
	{ 17, F_HOST, "\xef\xbc\x91\xef\xbc\x92\xef\xbc\x97\xef\xbc\x8e\xef\xbc\x90\xef\xbc\x8e\xef\xbc\x90\xef\xbc\x8e\xef\xbc\x91", REFUSED, NULL, 0, NULL, 0 },
	{ 17, F_HOST, "127\xe3\x80\x82" "0\xe3\x80\x82" "0\xe3\x80\x82" "1", REFUSED, NULL, 0, NULL, 0 },
	{ 17, F_URI, "http://127\xe3\x80\x82" "0\xe3\x80\x82" "0\xe3\x80\x82" "1/", REFUSED, NULL, 0, NULL, 0 },
	{ 18, F_HOST, "\xe2\x93\x9b\xe2\x93\x9e\xe2\x93\x92\xe2\x93\x90\xe2\x93\x9b\xe2\x93\x97\xe2\x93\x9e\xe2\x93\xa2\xe2\x93\xa3", REFUSED, NULL, 0, NULL, 0 },
	{ 18, F_HOST, "\xef\xbc\xac\xef\xbc\xaf\xef\xbc\xa3\xef\xbc\xa1\xef\xbc\xac\xef\xbc\xa8\xef\xbc\xaf\xef\xbc\xb3\xef\xbc\xb4", REFUSED, NULL, 0, NULL, 0 },
	{ 19, F_URI, "http://169.254.169.254/latest/meta-data/", LITERAL, "169.254.169.254", POL_AC_METADATA, NULL, 80 },
	{ 20, F_URI, "http://2852039166/", REFUSED, NULL, 0, NULL, 0 },
	{ 21, F_URI, "http://0xA9FEA9FE/", REFUSED, NULL, 0, NULL, 0 },
	{ 21, F_URI, "http://0xA9.0xFE.0xA9.0xFE/", REFUSED, NULL, 0, NULL, 0 },
	{ 22, F_URI, "http://0251.0376.0251.0376/", REFUSED, NULL, 0, NULL, 0 },
	{ 22, F_URI, "http://0251.00376.000251.0000376/", REFUSED, NULL, 0, NULL, 0 },
	{ 23, F_URI, "http://0251.254.169.254/", REFUSED, NULL, 0, NULL, 0 },
	{ 24, F_URI, "http://169.254.43518/", REFUSED, NULL, 0, NULL, 0 },
	{ 25, F_URI, "http://7147006462/", REFUSED, NULL, 0, NULL, 0 },
	{ 26, F_URI, "http://425.510.425.510/", REFUSED, NULL, 0, NULL, 0 },
	{ 27, F_URI, "http://0x41414141A9FEA9FE/", REFUSED, NULL, 0, NULL, 0 },
	{ 28, F_URI, "http://[::ffff:a9fe:a9fe]/", LITERAL, "::ffff:169.254.169.254", POL_AC_EMBEDDED, NULL, 80 },
	{ 28, F_URI, "http://[0:0:0:0:0:ffff:169.254.169.254]/", LITERAL, "::ffff:169.254.169.254", POL_AC_EMBEDDED, NULL, 80 },
	{ 29, F_URI, "http://[::ffff:0:a9fe:a9fe]/", LITERAL, "::ffff:0:a9fe:a9fe", POL_AC_EMBEDDED, NULL, 80 },
	{ 30, F_URI, "http://[64:ff9b::a9fe:a9fe]/", LITERAL, "64:ff9b::a9fe:a9fe", POL_AC_EMBEDDED, NULL, 80 },
	{ 31, F_URI, "http://[2002:a9fe:a9fe::]/", LITERAL, "2002:a9fe:a9fe::", POL_AC_EMBEDDED, NULL, 80 },
	{ 32, F_URI, "http://[2001::5601:5601]/", LITERAL, "2001::5601:5601", POL_AC_EMBEDDED, NULL, 80 },
	{ 33, F_URI, "http://[fd00:ec2::254]/", LITERAL, "fd00:ec2::254", POL_AC_METADATA, NULL, 80 },
	{ 34, F_URI, "http://metadata.google.internal/", NAME, "metadata.google.internal", POL_AC_METADATA, "169.254.169.254", 80 },
	{ 34, F_URI, "http://metadata/", NAME, "metadata", POL_AC_METADATA, "169.254.169.254", 80 },
	{ 35, F_URI, "http://instance-data/", NAME, "instance-data", POL_AC_METADATA, "169.254.169.254", 80 },
	{ 35, F_URI, "http://169.254.169.254.nip.io/", NAME, "169.254.169.254.nip.io", POL_AC_METADATA, "169.254.169.254", 80 },
	{ 36, F_URI, "http://169.254.170.2/v2/credentials/abc", LITERAL, "169.254.170.2", POL_AC_METADATA, NULL, 80 },
	{ 37, F_URI, "http://100.100.100.200/latest/meta-data/", LITERAL, "100.100.100.200", POL_AC_METADATA, NULL, 80 },
	{ 38, F_URI, "http://192.0.0.192/latest/", LITERAL, "192.0.0.192", POL_AC_METADATA, NULL, 80 },
	{ 39, F_URI, "http://168.63.129.16/", LITERAL, "168.63.129.16", POL_AC_METADATA, NULL, 80 },
	{ 40, F_URI, "http://10.1/", REFUSED, NULL, 0, NULL, 0 },
	{ 40, F_URI, "http://167772161/", REFUSED, NULL, 0, NULL, 0 },
	{ 40, F_URI, "http://012.0.0.1/", REFUSED, NULL, 0, NULL, 0 },
	{ 41, F_URI, "http://3232235521/", REFUSED, NULL, 0, NULL, 0 },
	{ 41, F_URI, "http://0300.0250.0.1/", REFUSED, NULL, 0, NULL, 0 },
	{ 42, F_URI, "http://100.64.0.1/", LITERAL, "100.64.0.1", POL_AC_CGNAT, NULL, 80 },
	{ 42, F_URI, "http://1681915905/", REFUSED, NULL, 0, NULL, 0 },
	{ 43, F_URI, "http://[fc00::1]/", LITERAL, "fc00::1", POL_AC_PRIVATE, NULL, 80 },
	{ 43, F_URI, "http://[fd12:3456::1]/", LITERAL, "fd12:3456::1", POL_AC_PRIVATE, NULL, 80 },
	{ 44, F_URI, "http://[fe80::1%25eth0]/", REFUSED, NULL, 0, NULL, 0 },
	{ 44, F_HOSTPORT, "[fe80::1%eth0]", REFUSED, NULL, 0, NULL, 0 },
	{ 44, F_AUTH, "[fe80::1%eth0]:443", REFUSED, NULL, 0, NULL, 0 },
	{ 44, F_HOST, "::ffff:1.2.3.4%x.allowed.com", REFUSED, NULL, 0, NULL, 0 },
	{ 44, F_URI, "http://[fe80::1]/", LITERAL, "fe80::1", POL_AC_LINK_LOCAL, NULL, 80 },
	{ 45, F_HOST, "224.0.0.1", LITERAL, "224.0.0.1", POL_AC_MULTICAST, NULL, 0 },
	{ 45, F_HOST, "255.255.255.255", LITERAL, "255.255.255.255", POL_AC_BROADCAST, NULL, 0 },
	{ 45, F_HOST, "240.0.0.1", LITERAL, "240.0.0.1", POL_AC_RESERVED, NULL, 0 },
	{ 45, F_HOST, "198.18.0.1", LITERAL, "198.18.0.1", POL_AC_BENCHMARK, NULL, 0 },
	{ 45, F_HOST, "192.0.0.8", LITERAL, "192.0.0.8", POL_AC_RESERVED, NULL, 0 },
	{ 50, F_URI, "http://allowed.com@evil.com/", REFUSED, NULL, 0, NULL, 0 },
	{ 50, F_URI, "http://evil.com#@allowed.com/", REFUSED, NULL, 0, NULL, 0 },
	{ 51, F_URI, "http://1.1.1.1 &@2.2.2.2# @3.3.3.3/", REFUSED, NULL, 0, NULL, 0 },
	{ 52, F_URI, "http://127.1.1.1:80\\@127.2.2.2:80/", REFUSED, NULL, 0, NULL, 0 },
	{ 52, F_URI, "http://127.1.1.1:80\\@@127.2.2.2:80/", REFUSED, NULL, 0, NULL, 0 },
	{ 52, F_URI, "http://127.1.1.1:80:\\@@127.2.2.2:80/", REFUSED, NULL, 0, NULL, 0 },
	{ 52, F_URI, "http://127.1.1.1:80#\\@127.2.2.2:80/", REFUSED, NULL, 0, NULL, 0 },
	{ 53, F_HOST, "allowed.com.", NAME, "allowed.com", 0, NULL, 0 },
	{ 53, F_HOST, "ALLOWED.com", NAME, "allowed.com", 0, NULL, 0 },
	{ 53, F_AUTH, "ALLOWED.com.:443", NAME, "allowed.com", 0, NULL, 443 },
	{ 53, F_HOSTPORT, "[allowed.com]", REFUSED, NULL, 0, NULL, 0 },
	{ 53, F_AUTH, "[allowed.com]:443", REFUSED, NULL, 0, NULL, 0 },
	{ 54, F_HOST, "\xe2\x93\x94\xe2\x93\xa7\xe2\x93\x90\xe2\x93\x9c\xe2\x93\x9f\xe2\x93\x9b\xe2\x93\x94.\xe2\x93\x92\xe2\x93\x9e\xe2\x93\x9c", REFUSED, NULL, 0, NULL, 0 },
	{ 54, F_URI, "http://%65vil.com/", REFUSED, NULL, 0, NULL, 0 },
	{ 54, F_HOST, "evil.com%00.allowed.com", REFUSED, NULL, 0, NULL, 0 },
	{ 58, F_AUTH, "allowed.com:22", NAME, "allowed.com", 0, NULL, 22 },
	{ 60, F_AUTH, "169.254.169.254:80", LITERAL, "169.254.169.254", POL_AC_METADATA, NULL, 80 },
	{ 60, F_AUTH, "[::1]:8080", LITERAL, "::1", POL_AC_LOOPBACK, NULL, 8080 },
	{ 61, F_URI, "gopher://127.0.0.1:6379/_INFO", REFUSED, NULL, 0, NULL, 0 },
	{ 61, F_URI, "dict://127.0.0.1:11211/stat", REFUSED, NULL, 0, NULL, 0 },
	{ 61, F_URI, "file:///etc/passwd", REFUSED, NULL, 0, NULL, 0 },
	{ 61, F_URI, "ftp://127.0.0.1/", REFUSED, NULL, 0, NULL, 0 },
	{ 61, F_URI, "https://example.com/", REFUSED, NULL, 0, NULL, 0 },
	{ 66, F_AUTH, "allowed.com:443\r\nX-Injected: 1", REFUSED, NULL, 0, NULL, 0 },
	{ 66, F_AUTH, "allowed.com\r\nX-Injected: 1:443", REFUSED, NULL, 0, NULL, 0 },
	{ 66, F_HOSTPORT, "allowed.com\r\nX-Injected: 1", REFUSED, NULL, 0, NULL, 0 },
	{ 66, F_URI, "http://allowed.com\r\nX-Injected: 1/", REFUSED, NULL, 0, NULL, 0 },
};

static enum pol_reason
parse_form(enum form f, const char *s, size_t len, struct pol_target *t)
{
	const char *path;
	size_t plen;

	switch (f) {
	case F_URI:
		return pol_target_parse_uri(s, len, t, &path, &plen);
	case F_AUTH:
		return pol_target_parse_authority(s, len, t);
	case F_HOST:
		return pol_host_parse(s, len, 1, t);
	case F_HOSTPORT:
		return pol_target_parse_hostport(s, len, 80, t);
	}
	return POL_R_BAD_REQUEST;
}

/* On failure, name the vector (inputs may hold CR/LF: print the number
 * and the row index, not the bytes). */
#define VEC_CHECK(v, i, cond) do { \
	if (!(cond)) { \
		print_error("anchors #%d (row %zu): %s\n", (v)->num, (i), \
		    #cond); \
		fail(); \
	} \
} while (0)

static void
run_vector(const struct vec *v, size_t i)
{
	struct pol_target t;
	enum pol_reason r;
	enum pol_addr_class cls;

	memset(&t, 0, sizeof(t));
	r = parse_form(v->form, v->in, strlen(v->in), &t);
	if (v->out == REFUSED) {
		VEC_CHECK(v, i, r == POL_R_BAD_TARGET);
		return;
	}
	VEC_CHECK(v, i, r == POL_R_NONE);
	VEC_CHECK(v, i, strcmp(t.host, v->canon) == 0);
	VEC_CHECK(v, i, v->port == 0 || t.port == v->port);
	if (v->out == LITERAL) {
		VEC_CHECK(v, i, t.kind != POL_HOST_NAME);
		VEC_CHECK(v, i, (int)pol_addr_classify(&t.addr) == v->cls);
		r = check_plain(t.host, &cls);
		VEC_CHECK(v, i, (int)cls == v->cls);
		VEC_CHECK(v, i, r == (v->cls == POL_AC_PUBLIC ? POL_R_NONE :
		    POL_R_PRIVATE_ADDRESS));
		return;
	}
	VEC_CHECK(v, i, t.kind == POL_HOST_NAME);
	if (v->resolved != NULL) {
		r = check_plain(v->resolved, &cls);
		VEC_CHECK(v, i, (int)cls == v->cls);
		VEC_CHECK(v, i, r == POL_R_PRIVATE_ADDRESS);
	}
}

static void
test_anchor_vectors(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(vectors) / sizeof(*vectors); i++)
		run_vector(&vectors[i], i);
}

/* #54 with a real NUL byte inside the length, and a hostset pattern
 * using a zone id (#44) */
static void
test_anchor_nul_and_zone_pattern(void **state)
{
	static const char nul[] = "evil.com\0.allowed.com";
	struct pol_hostset *hs = pol_hostset_new();
	struct pol_target t;

	(void)state;
	assert_int_equal(pol_host_parse(nul, sizeof(nul) - 1, 1, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_authority("evil.com\0:443", 13, &t),
	    POL_R_BAD_TARGET);
	assert_non_null(hs);
	assert_int_equal(pol_hostset_add(hs, "::ffff:1.2.3.4%x.allowed.com"),
	    -1);
	assert_int_equal(pol_hostset_add(hs, "*.allowed.com"), 0);
	assert_int_equal(pol_hostset_match(hs, "::ffff:1.2.3.4%x.allowed.com",
	    443, NULL, 0), 1); /* why the parser must refuse it first */
	assert_int_equal(pol_host_parse("::ffff:1.2.3.4%x.allowed.com", 28, 1,
	    &t), POL_R_BAD_TARGET);
	pol_hostset_free(hs);
}

/* #58: a host-only allowance must not open other ports. */
static void
test_anchor_port_not_scoped(void **state)
{
	static const char *const targets[] = {
		"allowed.com:22", "allowed.com:25", "allowed.com:6379",
	};
	struct pol_config *c = pol_config_new();
	struct pol_state *st = pol_state_new();
	struct pol_session *s;
	struct pol_decision d;
	struct pol_target t;
	size_t i;

	(void)state;
	assert_int_equal(pol_config_add_registry(c, "allowed.com"), 0);
	pol_state_set_ceiling(st, POL_TIER_PUBLIC);
	s = pol_session_add(st, "chat-1", NULL, NULL, POL_TIER_PUBLIC);
	assert_non_null(s);
	for (i = 0; i < 3; i++) {
		assert_int_equal(pol_target_parse_authority(targets[i],
		    strlen(targets[i]), &t), POL_R_NONE);
		pol_decide(c, st, s, &t, &d);
		assert_int_equal(d.verdict, POL_DENY);
		assert_int_equal(d.reason, POL_R_PORT_NOT_ALLOWED);
	}
	assert_int_equal(pol_target_parse_authority("allowed.com:443", 15, &t),
	    POL_R_NONE);
	pol_decide(c, st, s, &t, &d);
	assert_int_equal(d.verdict, POL_ALLOW);
	assert_int_equal(d.rule, POL_RULE_REGISTRIES);
	pol_state_free(st);
	pol_config_free(c);
}

/* ------------------------------------------------------------------ */
/* Addresses */

static void
test_addr_parse_strict(void **state)
{
	static const char *const bad[] = {
		"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.04", "01.2.3.4",
		"1..2.3", "1.2.3.4 ", " 1.2.3.4", "+1.2.3.4", "1.2.3.-4",
		"1234.1.1.1", "[::1]", "fe80::1%eth0", "::g", "1:2:3:4:5:6:7:8:9",
		"::ffff:01.2.3.4", "0x1.2.3.4", "1.2.3.4/32",
	};
	struct pol_addr a;
	char buf[64];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_int_equal(pol_addr_parse(bad[i], strlen(bad[i]), &a), -1);
	assert_int_equal(pol_addr_parse("0.0.0.0", 7, &a), 0);
	assert_int_equal(a.family, AF_INET);
	assert_int_equal(pol_addr_parse("255.255.255.255", 15, &a), 0);
	assert_int_equal(a.a[3], 255);
	/* length is honoured: "1.2.3.4" out of "1.2.3.45" */
	assert_int_equal(pol_addr_parse("1.2.3.45", 7, &a), 0);
	assert_string_equal(pol_addr_format(&a, buf, sizeof(buf)), "1.2.3.4");
	assert_int_equal(pol_addr_parse("2001:DB8::A", 11, &a), 0);
	assert_int_equal(a.family, AF_INET6);
	assert_string_equal(pol_addr_format(&a, buf, sizeof(buf)),
	    "2001:db8::a");
}

static void
test_addr_classes(void **state)
{
	(void)state;
	assert_int_equal(class_of("8.8.8.8"), POL_AC_PUBLIC);
	assert_int_equal(class_of("1.1.1.1"), POL_AC_PUBLIC);
	assert_int_equal(class_of("0.1.2.3"), POL_AC_RESERVED);
	assert_int_equal(class_of("10.255.0.1"), POL_AC_PRIVATE);
	assert_int_equal(class_of("172.16.0.1"), POL_AC_PRIVATE);
	assert_int_equal(class_of("172.31.255.255"), POL_AC_PRIVATE);
	assert_int_equal(class_of("172.32.0.1"), POL_AC_PUBLIC);
	assert_int_equal(class_of("192.168.1.1"), POL_AC_PRIVATE);
	assert_int_equal(class_of("100.127.255.255"), POL_AC_CGNAT);
	assert_int_equal(class_of("100.128.0.0"), POL_AC_PUBLIC);
	assert_int_equal(class_of("169.254.1.1"), POL_AC_LINK_LOCAL);
	assert_int_equal(class_of("192.0.2.1"), POL_AC_DOCUMENTATION);
	assert_int_equal(class_of("198.51.100.7"), POL_AC_DOCUMENTATION);
	assert_int_equal(class_of("203.0.113.9"), POL_AC_DOCUMENTATION);
	assert_int_equal(class_of("198.19.255.255"), POL_AC_BENCHMARK);
	assert_int_equal(class_of("198.20.0.0"), POL_AC_PUBLIC);
	assert_int_equal(class_of("239.255.255.255"), POL_AC_MULTICAST);
	assert_int_equal(class_of("255.255.255.254"), POL_AC_RESERVED);
	/* IPv6 */
	assert_int_equal(class_of("2606:4700::1111"), POL_AC_PUBLIC);
	assert_int_equal(class_of("2001:db8::1"), POL_AC_DOCUMENTATION);
	assert_int_equal(class_of("3fff::1"), POL_AC_DOCUMENTATION);
	assert_int_equal(class_of("2001:2::1"), POL_AC_BENCHMARK);
	assert_int_equal(class_of("ff02::1"), POL_AC_MULTICAST);
	assert_int_equal(class_of("fec0::1"), POL_AC_RESERVED);
	assert_int_equal(class_of("100::1"), POL_AC_RESERVED);
	assert_int_equal(class_of("4000::1"), POL_AC_RESERVED);
	/* embedding forms with a public IPv4 inside */
	assert_int_equal(class_of("::ffff:8.8.8.8"), POL_AC_PUBLIC);
	assert_int_equal(class_of("64:ff9b::808:808"), POL_AC_PUBLIC);
	assert_int_equal(class_of("2002:808:808::1"), POL_AC_PUBLIC);
	/* Teredo client 8.8.8.8 is stored as ~8.8.8.8 = f7f7:f7f7 */
	assert_int_equal(class_of("2001:0:4136:e378:8000:63bf:f7f7:f7f7"),
	    POL_AC_PUBLIC);
	assert_int_equal(class_of("2001:0:4136:e378:8000:63bf:8080:80fe"),
	    POL_AC_EMBEDDED); /* ~ = 127.127.127.1 */
	assert_int_equal(class_of("::8.8.8.8"), POL_AC_RESERVED);
	assert_int_equal(class_of("::ffff:0:8.8.8.8"), POL_AC_RESERVED);
	assert_int_equal(class_of("::ffff:10.0.0.1"), POL_AC_EMBEDDED);
	assert_int_equal(class_of("::ffff:0.0.0.0"), POL_AC_EMBEDDED);
	assert_int_equal(class_of("::2"), POL_AC_EMBEDDED); /* 0.0.0.2 */
	assert_int_equal(class_of("64:ff9b::10.0.0.1"), POL_AC_EMBEDDED);
	assert_int_equal(class_of("64:ff9b::100.100.100.200"), POL_AC_EMBEDDED);
	assert_int_equal(class_of("2002:c0a8:101::"), POL_AC_EMBEDDED);
	/* local-use NAT64 64:ff9b:1::/48: never public */
	assert_int_equal(class_of("64:ff9b:1::a9fe:a9fe"), POL_AC_EMBEDDED);
	assert_int_equal(class_of("64:ff9b:1:ab::10.0.0.1"), POL_AC_EMBEDDED);
	assert_int_equal(class_of("64:ff9b:1::808:808"), POL_AC_RESERVED);
	assert_int_equal(class_of("64:ff9b:2::808:808"), POL_AC_RESERVED);
	/* the metadata addresses beat their broader classes */
	assert_int_equal(class_of("169.254.169.254"), POL_AC_METADATA);
	assert_int_equal(class_of("169.254.169.253"), POL_AC_LINK_LOCAL);
	assert_int_equal(class_of("100.100.100.200"), POL_AC_METADATA);
	assert_int_equal(class_of("100.100.100.201"), POL_AC_CGNAT);
	assert_int_equal(class_of("192.0.0.192"), POL_AC_METADATA);
	assert_int_equal(class_of("168.63.129.16"), POL_AC_METADATA);
	assert_int_equal(class_of("168.63.129.17"), POL_AC_PUBLIC);
	assert_int_equal(class_of("fd00:ec2::254"), POL_AC_METADATA);
	assert_int_equal(class_of("fd00:ec2::253"), POL_AC_PRIVATE);
}

static void
test_names(void **state)
{
	int i;

	(void)state;
	assert_string_equal(pol_addr_class_name(POL_AC_PUBLIC), "public");
	assert_string_equal(pol_addr_class_name(POL_AC_EMBEDDED), "embedded");
	assert_string_equal(pol_addr_class_name(POL_AC__COUNT), "unknown");
	assert_string_equal(pol_reason_name(POL_R_NONE), "");
	assert_string_equal(pol_reason_name(POL_R_BAD_TARGET), "bad_target");
	assert_string_equal(pol_reason_name(POL_R_ABOVE_CEILING),
	    "above_ceiling");
	assert_string_equal(pol_reason_name(POL_R_CEILING_LOWERED),
	    "ceiling_lowered");
	assert_string_equal(pol_reason_name(POL_R__COUNT), "unknown");
	assert_int_equal(pol_reason_status(POL_R_HOST_MISMATCH), 421);
	assert_int_equal(pol_reason_status(POL_R_TOO_MANY_CONNECTIONS), 429);
	assert_int_equal(pol_reason_status(POL_R_TOO_MANY_REFUSALS), 429);
	assert_string_equal(pol_reason_name(POL_R_TOO_MANY_REFUSALS),
	    "too_many_refusals");
	assert_int_equal(pol_reason_status(POL_R_UPSTREAM_TLS), 502);
	assert_string_equal(pol_reason_name(POL_R_UPSTREAM_TLS),
	    "upstream_tls");
	assert_int_equal(pol_reason_status(POL_R_RULE_DENIED), 403);
	assert_string_equal(pol_reason_name(POL_R_RULE_DENIED),
	    "rule_denied");
	assert_int_equal(POL_R_RULE_DENIED, 36);
	assert_int_equal(pol_reason_status(POL_R_SESSION_DENIED), 403);
	assert_string_equal(pol_reason_name(POL_R_SESSION_DENIED),
	    "session_denied");
	assert_int_equal(POL_R_SESSION_DENIED, 37);
	assert_string_equal(pol_rule_name(POL_RULE_SESSION), "session");
	assert_int_equal(pol_reason_status(POL_R_DNS_TIMEOUT), 504);
	assert_int_equal(pol_reason_status(POL_R_SHUTTING_DOWN), 503);
	assert_int_equal(pol_reason_status(POL_R_HEAD_TOO_LARGE), 400);
	assert_string_equal(pol_reason_name(POL_R_TOO_MANY_INTERIM),
	    "too_many_interim");
	assert_int_equal(pol_reason_status(POL_R_TOO_MANY_INTERIM), 502);
	for (i = 1; i < POL_R__COUNT; i++) {
		int st = pol_reason_status((enum pol_reason)i);
		const char *h = pol_reason_hint((enum pol_reason)i);

		assert_true(st == 400 || st == 403 || st == 421 || st == 429 ||
		    st == 502 || st == 503 || st == 504);
		assert_true(strlen(pol_reason_name((enum pol_reason)i)) > 0);
		assert_non_null(h);
		assert_true(strlen(h) > 20);
		assert_null(strchr(h, '\n'));
	}
	assert_non_null(pol_reason_hint(POL_R__COUNT));
	assert_string_equal(pol_tier_name(POL_TIER_REGISTRIES), "registries");
	{
		enum pol_tier t;

		assert_int_equal(pol_tier_parse("public", &t), 0);
		assert_int_equal(t, POL_TIER_PUBLIC);
		assert_int_equal(pol_tier_parse("off", &t), 0);
		assert_int_equal(t, POL_TIER_OFF);
		assert_int_equal(pol_tier_parse("Public", &t), -1);
		assert_int_equal(pol_tier_parse("", &t), -1);
	}
	assert_string_equal(pol_rule_name(POL_RULE_GRANT), "grant");
	assert_string_equal(pol_rule_name(POL_RULE_NONE), "");
	assert_string_equal(pol_verdict_name(POL_PROMPT), "prompt");
}

/* ------------------------------------------------------------------ */
/* Targets */

static void
test_target_forms(void **state)
{
	struct pol_target t;
	const char *path;
	size_t plen;
	char long_label[80], long_name[300];
	const char *u;

	(void)state;
	u = "HTTP://Example.COM:8080/a/b?c=d";
	assert_int_equal(pol_target_parse_uri(u, strlen(u), &t, &path, &plen),
	    POL_R_NONE);
	assert_string_equal(t.host, "example.com");
	assert_int_equal(t.port, 8080);
	assert_int_equal(plen, 8);
	assert_memory_equal(path, "/a/b?c=d", 8);
	assert_ptr_equal(path, u + 23);
	u = "http://example.com";
	assert_int_equal(pol_target_parse_uri(u, strlen(u), &t, &path, &plen),
	    POL_R_NONE);
	assert_int_equal(t.port, 80);
	assert_int_equal(plen, 1);
	assert_memory_equal(path, "/", 1);
	u = "http://example.com?x";
	assert_int_equal(pol_target_parse_uri(u, strlen(u), &t, &path, &plen),
	    POL_R_BAD_TARGET);
	u = "http://example.com/a#frag";
	assert_int_equal(pol_target_parse_uri(u, strlen(u), &t, &path, &plen),
	    POL_R_BAD_TARGET);
	u = "http://example.com/a b";
	assert_int_equal(pol_target_parse_uri(u, strlen(u), &t, &path, &plen),
	    POL_R_BAD_TARGET);
	u = "http://user@example.com/";
	assert_int_equal(pol_target_parse_uri(u, strlen(u), &t, &path, &plen),
	    POL_R_BAD_TARGET);
	u = "http:///x";
	assert_int_equal(pol_target_parse_uri(u, strlen(u), &t, &path, &plen),
	    POL_R_BAD_TARGET);
	u = "/origin/form";
	assert_int_equal(pol_target_parse_uri(u, strlen(u), &t, &path, &plen),
	    POL_R_BAD_TARGET);
	u = "http://[2001:db8::1]:8080/";
	assert_int_equal(pol_target_parse_uri(u, strlen(u), &t, &path, &plen),
	    POL_R_NONE);
	assert_int_equal(t.kind, POL_HOST_V6);
	assert_string_equal(t.host, "2001:db8::1");

	/* authority: port required, strict */
	assert_int_equal(pol_target_parse_authority("a.com", 5, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_authority("a.com:", 6, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_authority("a.com:0", 7, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_authority("a.com:0443", 10, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_authority("a.com:65536", 11, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_authority("a.com:+443", 10, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_authority("a.com:65535", 11, &t),
	    POL_R_NONE);
	assert_int_equal(t.port, 65535);
	assert_int_equal(pol_target_parse_authority("::1:443", 7, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_authority("[::1]443", 8, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_authority("[::1]:443", 9, &t),
	    POL_R_NONE);
	assert_int_equal(pol_target_parse_authority("[1.2.3.4]:443", 13, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_authority("1.2.3.4.:443", 12, &t),
	    POL_R_BAD_TARGET);

	/* Host header */
	assert_int_equal(pol_target_parse_hostport("Pypi.org", 8, 80, &t),
	    POL_R_NONE);
	assert_string_equal(t.host, "pypi.org");
	assert_int_equal(t.port, 80);
	assert_int_equal(pol_target_parse_hostport("pypi.org:8080", 13, 80, &t),
	    POL_R_NONE);
	assert_int_equal(t.port, 8080);
	assert_int_equal(pol_target_parse_hostport("[::1]", 5, 443, &t),
	    POL_R_NONE);
	assert_int_equal(t.port, 443);
	assert_int_equal(pol_target_parse_hostport("", 0, 80, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_target_parse_hostport("a.com ", 6, 80, &t),
	    POL_R_BAD_TARGET);

	/* names */
	assert_int_equal(pol_host_parse("xn--bcher-kva.example", 21, 0, &t),
	    POL_R_NONE);
	assert_int_equal(pol_host_parse("_dmarc.a-b.example", 18, 0, &t),
	    POL_R_NONE);
	assert_int_equal(pol_host_parse("-a.example", 10, 0, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_host_parse("a-.example", 10, 0, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_host_parse("a..example", 10, 0, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_host_parse(".a.example", 10, 0, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_host_parse("a.example..", 11, 0, &t),
	    POL_R_BAD_TARGET);
	assert_int_equal(pol_host_parse(".", 1, 0, &t), POL_R_BAD_TARGET);
	assert_int_equal(pol_host_parse("[::1]", 5, 0, &t), POL_R_BAD_TARGET);
	assert_int_equal(pol_host_parse("::1", 3, 1, &t), POL_R_BAD_TARGET);
	assert_int_equal(pol_host_parse("a.123", 5, 0, &t), POL_R_BAD_TARGET);
	assert_int_equal(pol_host_parse("a.0x1f", 6, 0, &t), POL_R_BAD_TARGET);
	assert_int_equal(pol_host_parse("1.2.3.example", 13, 0, &t),
	    POL_R_NONE);
	assert_int_equal(pol_host_parse("8.8.8.8", 7, 0, &t), POL_R_NONE);
	assert_int_equal(t.kind, POL_HOST_V4);
	memset(long_label, 'a', 63);
	memcpy(long_label + 63, ".com", 5);
	assert_int_equal(pol_host_parse(long_label, strlen(long_label), 0, &t),
	    POL_R_NONE);
	memset(long_label, 'a', 64);
	memcpy(long_label + 64, ".com", 5);
	assert_int_equal(pol_host_parse(long_label, strlen(long_label), 0, &t),
	    POL_R_BAD_TARGET);
	/* 253 bytes: 63+1+63+1+63+1+61 */
	memset(long_name, 'a', sizeof(long_name));
	long_name[63] = long_name[127] = long_name[191] = '.';
	assert_int_equal(pol_host_parse(long_name, 253, 0, &t), POL_R_NONE);
	assert_int_equal(strlen(t.host), 253);
	long_name[253] = '.';
	assert_int_equal(pol_host_parse(long_name, 254, 0, &t), POL_R_NONE);
	assert_int_equal(pol_host_parse(long_name, 255, 0, &t),
	    POL_R_BAD_TARGET);
	long_name[253] = 'a';
	assert_int_equal(pol_host_parse(long_name, 254, 0, &t),
	    POL_R_BAD_TARGET);
}

/* ------------------------------------------------------------------ */
/* Host sets */

static const uint16_t web_ports[] = { 443, 80 };

static void
test_hostset_patterns(void **state)
{
	struct pol_hostset *hs = pol_hostset_new();

	(void)state;
	assert_non_null(hs);
	assert_int_equal(pol_hostset_add(hs, "*.example.com"), 0);
	assert_int_equal(pol_hostset_add(hs, "pypi.org"), 0);
	assert_int_equal(pol_hostset_add(hs, "Mirror.Example.NET.:8443"), 0);
	assert_int_equal(pol_hostset_add(hs, "pypi.org"), 0); /* duplicate */
	assert_int_equal(pol_hostset_count(hs), 3);
	/* malformed and literal patterns */
	assert_int_equal(pol_hostset_add(hs, "*"), -1);
	assert_int_equal(pol_hostset_add(hs, "*."), -1);
	assert_int_equal(pol_hostset_add(hs, "a.*.com"), -1);
	assert_int_equal(pol_hostset_add(hs, "**.com"), -1);
	assert_int_equal(pol_hostset_add(hs, "1.2.3.4"), -1);
	assert_int_equal(pol_hostset_add(hs, "*.1.2.3.4"), -1);
	assert_int_equal(pol_hostset_add(hs, "[::1]"), -1);
	assert_int_equal(pol_hostset_add(hs, "::1"), -1);
	assert_int_equal(pol_hostset_add(hs, "a.com:0"), -1);
	assert_int_equal(pol_hostset_add(hs, "a.com:"), -1);
	assert_int_equal(pol_hostset_add(hs, "a.com:99999"), -1);
	assert_int_equal(pol_hostset_add(hs, ""), -1);
	assert_int_equal(pol_hostset_count(hs), 3);

	/* apex vs wildcard */
	assert_int_equal(pol_hostset_match(hs, "a.example.com", 443,
	    web_ports, 2), 1);
	assert_int_equal(pol_hostset_match(hs, "x.y.example.com", 80,
	    web_ports, 2), 1);
	assert_int_equal(pol_hostset_match(hs, "example.com", 443,
	    web_ports, 2), 0);
	assert_int_equal(pol_hostset_match(hs, "badexample.com", 443,
	    web_ports, 2), 0);
	assert_int_equal(pol_hostset_match(hs, "example.com.evil.org", 443,
	    web_ports, 2), 0);
	/* exact entries do not cover subdomains */
	assert_int_equal(pol_hostset_match(hs, "pypi.org", 443,
	    web_ports, 2), 1);
	assert_int_equal(pol_hostset_match(hs, "PyPI.org.", 443,
	    web_ports, 2), 1);
	assert_int_equal(pol_hostset_match(hs, "evil.pypi.org", 443,
	    web_ports, 2), 0);
	/* portless entries follow the default ports */
	assert_int_equal(pol_hostset_match(hs, "pypi.org", 22,
	    web_ports, 2), 0);
	assert_int_equal(pol_hostset_match(hs, "pypi.org", 22, NULL, 0), 1);
	/* port-scoped entries only their port */
	assert_int_equal(pol_hostset_match(hs, "mirror.example.net", 8443,
	    web_ports, 2), 1);
	assert_int_equal(pol_hostset_match(hs, "mirror.example.net", 443,
	    web_ports, 2), 0);
	assert_int_equal(pol_hostset_match(hs, "mirror.example.net", 443,
	    NULL, 0), 0);
	assert_int_equal(pol_hostset_add(hs, "mirror.example.net"), 0);
	assert_int_equal(pol_hostset_count(hs), 4);
	assert_int_equal(pol_hostset_match(hs, "mirror.example.net", 443,
	    web_ports, 2), 1);
	assert_int_equal(pol_hostset_match(hs, "", 443, NULL, 0), 0);
	pol_hostset_free(hs);
}

static void
test_hostset_large(void **state)
{
	struct pol_hostset *hs = pol_hostset_new();
	char name[64];
	int i;

	(void)state;
	assert_non_null(hs);
	for (i = 0; i < 100000; i++) {
		if (i % 2 == 0)
			snprintf(name, sizeof(name), "host%d.example%d.com", i,
			    i % 97);
		else
			snprintf(name, sizeof(name), "*.w%d.example.net", i);
		assert_int_equal(pol_hostset_add(hs, name), 0);
	}
	assert_int_equal(pol_hostset_count(hs), 100000);
	snprintf(name, sizeof(name), "host%d.example%d.com", 4242, 4242 % 97);
	assert_int_equal(pol_hostset_match(hs, name, 443, web_ports, 2), 1);
	snprintf(name, sizeof(name), "host%d.example%d.com", 4243, 4243 % 97);
	assert_int_equal(pol_hostset_match(hs, name, 443, web_ports, 2), 0);
	assert_int_equal(pol_hostset_match(hs, "a.b.w99999.example.net", 443,
	    web_ports, 2), 1);
	assert_int_equal(pol_hostset_match(hs, "w99999.example.net", 443,
	    web_ports, 2), 0);
	assert_int_equal(pol_hostset_match(hs, "a.w99998.example.net", 443,
	    web_ports, 2), 0);
	pol_hostset_free(hs);
}

/* ------------------------------------------------------------------ */
/* CIDR lists and pol_check_addr */

static enum pol_reason
check(const struct pol_config *c, const char *s)
{
	struct pol_addr a = addr(s);
	enum pol_addr_class cls;

	return pol_check_addr(c, &a, &cls);
}

static void
test_cidr_precedence(void **state)
{
	struct pol_config *c;

	(void)state;
	/* a denied CIDR inside an allowed one */
	c = pol_config_new();
	assert_int_equal(pol_config_add_cidr(c, "10.0.0.0/8", 1), 0);
	assert_int_equal(pol_config_add_cidr(c, "10.1.0.0/16", 0), 0);
	assert_int_equal(check(c, "10.1.2.3"), POL_R_ADMIN_DENY);
	assert_int_equal(check(c, "10.2.0.1"), POL_R_NONE);
	assert_int_equal(check(c, "192.168.0.1"), POL_R_PRIVATE_ADDRESS);
	pol_config_free(c);

	/* an allowed CIDR inside a denied one */
	c = pol_config_new();
	assert_int_equal(pol_config_add_cidr(c, "10.1.0.0/16", 1), 0);
	assert_int_equal(pol_config_add_cidr(c, "10.0.0.0/8", 0), 0);
	assert_int_equal(check(c, "10.1.2.3"), POL_R_NONE);
	assert_int_equal(check(c, "10.2.0.1"), POL_R_ADMIN_DENY);
	pol_config_free(c);

	/* equal prefixes: deny wins, in either order */
	c = pol_config_new();
	assert_int_equal(pol_config_add_cidr(c, "192.168.1.0/24", 1), 0);
	assert_int_equal(pol_config_add_cidr(c, "192.168.1.0/24", 0), 0);
	assert_int_equal(pol_config_add_cidr(c, "fd00::/8", 0), 0);
	assert_int_equal(pol_config_add_cidr(c, "fd00::/8", 1), 0);
	assert_int_equal(check(c, "192.168.1.7"), POL_R_ADMIN_DENY);
	assert_int_equal(check(c, "fd12::1"), POL_R_ADMIN_DENY);
	pol_config_free(c);

	/* deny on public space; allow admits any class; v6 and bare */
	c = pol_config_new();
	assert_int_equal(pol_config_add_cidr(c, "8.8.8.0/24", 0), 0);
	assert_int_equal(pol_config_add_cidr(c, "fd12::/16", 1), 0);
	assert_int_equal(pol_config_add_cidr(c, "127.0.0.53", 1), 0);
	assert_int_equal(check(c, "8.8.8.8"), POL_R_ADMIN_DENY);
	assert_int_equal(check(c, "8.8.4.4"), POL_R_NONE);
	assert_int_equal(check(c, "fd12::1"), POL_R_NONE);
	assert_int_equal(check(c, "fd13::1"), POL_R_PRIVATE_ADDRESS);
	assert_int_equal(check(c, "127.0.0.53"), POL_R_NONE);
	assert_int_equal(check(c, "127.0.0.54"), POL_R_PRIVATE_ADDRESS);
	/* other spellings of a denied v4 address are denied too */
	assert_int_equal(check(c, "::ffff:8.8.8.8"), POL_R_ADMIN_DENY);
	assert_int_equal(check(c, "2002:808:808::1"), POL_R_ADMIN_DENY);
	assert_int_equal(check(c, "64:ff9b::8.8.8.8"), POL_R_ADMIN_DENY);
	assert_int_equal(check(c, "64:ff9b::8.8.4.4"), POL_R_NONE);
	pol_config_free(c);

	/* a mapped CIDR is an IPv4 one */
	c = pol_config_new();
	assert_int_equal(pol_config_add_cidr(c, "::ffff:10.0.0.0/112", 1), 0);
	assert_int_equal(check(c, "10.0.0.5"), POL_R_NONE);
	assert_int_equal(check(c, "::ffff:10.0.0.5"), POL_R_NONE);
	assert_int_equal(check(c, "10.1.0.5"), POL_R_PRIVATE_ADDRESS);
	pol_config_free(c);

	/* malformed CIDRs */
	c = pol_config_new();
	assert_int_equal(pol_config_add_cidr(c, "10.0.0.1/8", 0), -1);
	assert_int_equal(pol_config_add_cidr(c, "10.0.0.0/33", 0), -1);
	assert_int_equal(pol_config_add_cidr(c, "10.0.0.0/08", 0), -1);
	assert_int_equal(pol_config_add_cidr(c, "10.0.0.0/", 0), -1);
	assert_int_equal(pol_config_add_cidr(c, "10.0.0.0/8x", 0), -1);
	assert_int_equal(pol_config_add_cidr(c, "10/8", 0), -1);
	assert_int_equal(pol_config_add_cidr(c, "::/129", 0), -1);
	assert_int_equal(pol_config_add_cidr(c, "fe80::/10", 0), 0);
	assert_int_equal(pol_config_add_cidr(c, "0.0.0.0/0", 0), 0);
	assert_int_equal(check(c, "1.1.1.1"), POL_R_ADMIN_DENY);
	assert_int_equal(check(c, "2606:4700::1111"), POL_R_NONE);
	pol_config_free(c);
}

static void
test_host_own(void **state)
{
	struct pol_config *c = pol_config_new();
	struct pol_addr own = addr("8.8.4.4"), own6 = addr("2606:4700::6");
	struct pol_addr a;
	enum pol_addr_class cls;

	(void)state;
	assert_int_equal(pol_config_add_host_addr(c, &own), 0);
	assert_int_equal(pol_config_add_host_addr(c, &own6), 0);
	a = addr("8.8.4.4");
	assert_int_equal(pol_check_addr(c, &a, &cls), POL_R_PRIVATE_ADDRESS);
	assert_int_equal(cls, POL_AC_HOST_OWN);
	a = addr("::ffff:8.8.4.4");
	assert_int_equal(pol_check_addr(c, &a, &cls), POL_R_PRIVATE_ADDRESS);
	assert_int_equal(cls, POL_AC_HOST_OWN);
	a = addr("2606:4700::6");
	assert_int_equal(pol_check_addr(c, &a, &cls), POL_R_PRIVATE_ADDRESS);
	assert_int_equal(cls, POL_AC_HOST_OWN);
	a = addr("8.8.8.8");
	assert_int_equal(pol_check_addr(c, &a, &cls), POL_R_NONE);
	assert_int_equal(cls, POL_AC_PUBLIC);
	/* the intrinsic class is unaffected */
	a = addr("8.8.4.4");
	assert_int_equal(pol_addr_classify(&a), POL_AC_PUBLIC);
	pol_config_free(c);
}

/* ------------------------------------------------------------------ */
/* State and decisions */

struct fixture {
	struct pol_config *c;
	struct pol_state *st;
};

static int
fixture_setup(void **state)
{
	static struct fixture f;

	f.c = pol_config_new();
	f.st = pol_state_new();
	if (f.c == NULL || f.st == NULL)
		return -1;
	if (pol_config_add_registry(f.c, "pypi.org") < 0 ||
	    pol_config_add_registry(f.c, "*.example.com") < 0 ||
	    pol_config_add_registry(f.c, "special.example.org:8443") < 0 ||
	    pol_config_add_deny_host(f.c, "blocked.example.com") < 0 ||
	    pol_config_add_deny_host(f.c, "ssh.evil.org:22") < 0 ||
	    pol_config_add_cidr(f.c, "8.8.8.0/24", 0) < 0)
		return -1;
	*state = &f;
	return 0;
}

static int
fixture_teardown(void **state)
{
	struct fixture *f = *state;

	pol_config_free(f->c);
	pol_state_free(f->st);
	return 0;
}

static struct pol_decision
decide(struct fixture *f, const struct pol_session *s, const char *auth)
{
	struct pol_decision d;
	struct pol_target t;

	assert_int_equal(pol_target_parse_authority(auth, strlen(auth), &t),
	    POL_R_NONE);
	pol_decide(f->c, f->st, s, &t, &d);
	return d;
}

#define assert_decision(d, v, r) do { \
	assert_int_equal((d).verdict, (v)); \
	assert_int_equal((d).reason, (r)); \
} while (0)

static void
test_decide_tiers(void **state)
{
	struct fixture *f = *state;
	struct pol_session *s;
	struct pol_decision d;

	s = pol_session_add(f->st, "t-tiers", NULL, "alice", POL_TIER_PUBLIC);
	assert_non_null(s);

	/* network_off vs above_ceiling */
	pol_state_set_ceiling(f->st, POL_TIER_OFF);
	d = decide(f, s, "pypi.org:443");
	assert_decision(d, POL_DENY, POL_R_NETWORK_OFF);
	assert_int_equal(d.effective, POL_TIER_OFF);
	pol_state_set_ceiling(f->st, POL_TIER_REGISTRIES);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_DENY, POL_R_ABOVE_CEILING);
	d = decide(f, s, "pypi.org:443");
	assert_decision(d, POL_ALLOW, POL_R_NONE);
	assert_int_equal(d.rule, POL_RULE_REGISTRIES);

	/* public tier and ceiling */
	pol_state_set_ceiling(f->st, POL_TIER_PUBLIC);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_ALLOW, POL_R_NONE);
	assert_int_equal(d.rule, POL_RULE_PUBLIC);
	assert_int_equal(d.tier, POL_TIER_PUBLIC);
	assert_int_equal(d.ceiling, POL_TIER_PUBLIC);
	assert_int_equal(d.effective, POL_TIER_PUBLIC);
	d = decide(f, s, "files.example.com:80");
	assert_int_equal(d.rule, POL_RULE_REGISTRIES);

	/* the ceiling lowered below the session's tier */
	pol_state_set_ceiling(f->st, POL_TIER_REGISTRIES);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_DENY, POL_R_ABOVE_CEILING);
	assert_int_equal(d.tier, POL_TIER_PUBLIC);
	assert_int_equal(d.effective, POL_TIER_REGISTRIES);
	d = decide(f, s, "example.com:443"); /* apex of *.example.com */
	assert_decision(d, POL_DENY, POL_R_ABOVE_CEILING);

	/* prompt: the ceiling admits, the chat does not */
	pol_state_set_ceiling(f->st, POL_TIER_PUBLIC);
	pol_session_set_tier(s, POL_TIER_REGISTRIES);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_PROMPT, POL_R_NONE);
	pol_session_set_tier(s, POL_TIER_OFF);
	d = decide(f, s, "pypi.org:443");
	assert_decision(d, POL_PROMPT, POL_R_NONE);
	/* deny paths take precedence over prompting */
	d = decide(f, s, "blocked.example.com:443");
	assert_decision(d, POL_DENY, POL_R_ADMIN_DENY);
	d = decide(f, s, "8.8.8.8:443");
	assert_decision(d, POL_DENY, POL_R_ADMIN_DENY);
	d = decide(f, s, "[::ffff:8.8.8.8]:443");
	assert_decision(d, POL_DENY, POL_R_ADMIN_DENY);
	d = decide(f, s, "8.8.4.4:443");
	assert_decision(d, POL_PROMPT, POL_R_NONE);
	d = decide(f, s, "evil.org:22");
	assert_decision(d, POL_DENY, POL_R_PORT_NOT_ALLOWED);
	/* a port-scoped deny only denies its port */
	d = decide(f, s, "ssh.evil.org:443");
	assert_decision(d, POL_PROMPT, POL_R_NONE);
	pol_session_remove(f->st, s);
}

static void
test_decide_ports(void **state)
{
	struct fixture *f = *state;
	struct pol_session *s;
	struct pol_decision d;
	static const uint16_t only443[] = { 443 };

	s = pol_session_add(f->st, "t-ports", NULL, NULL,
	    POL_TIER_REGISTRIES);
	assert_non_null(s);
	pol_state_set_ceiling(f->st, POL_TIER_REGISTRIES);
	/* a port-scoped registry entry admits its port for its host only */
	d = decide(f, s, "special.example.org:8443");
	assert_decision(d, POL_ALLOW, POL_R_NONE);
	assert_int_equal(d.rule, POL_RULE_REGISTRIES);
	d = decide(f, s, "other.example.org:8443");
	assert_decision(d, POL_DENY, POL_R_PORT_NOT_ALLOWED);
	d = decide(f, s, "special.example.org:443");
	assert_decision(d, POL_DENY, POL_R_ABOVE_CEILING);

	/* tier ports */
	assert_int_equal(pol_config_set_ports(f->c, POL_TIER_REGISTRIES,
	    only443, 1), 0);
	d = decide(f, s, "pypi.org:80");  /* 80 is still a public port */
	assert_decision(d, POL_DENY, POL_R_ABOVE_CEILING);
	assert_int_equal(pol_config_set_ports(f->c, POL_TIER_PUBLIC,
	    only443, 1), 0);
	d = decide(f, s, "pypi.org:80");
	assert_decision(d, POL_DENY, POL_R_PORT_NOT_ALLOWED);
	assert_int_equal(pol_config_set_ports(f->c, POL_TIER_REGISTRIES,
	    NULL, 0), 0);
	d = decide(f, s, "pypi.org:443");
	assert_decision(d, POL_DENY, POL_R_ABOVE_CEILING);
	d = decide(f, s, "special.example.org:8443");
	assert_decision(d, POL_ALLOW, POL_R_NONE);
	assert_int_equal(pol_config_set_ports(f->c, POL_TIER_OFF, only443, 1),
	    -1);
	assert_int_equal(pol_config_set_ports(f->c, POL_TIER_REGISTRIES,
	    web_ports, 2), 0);
	assert_int_equal(pol_config_set_ports(f->c, POL_TIER_PUBLIC,
	    web_ports, 2), 0);

	/* a grant admits its port */
	pol_state_set_ceiling(f->st, POL_TIER_PUBLIC);
	d = decide(f, s, "evil.org:8443");
	assert_decision(d, POL_DENY, POL_R_PORT_NOT_ALLOWED);
	assert_int_equal(pol_session_grant(s, "evil.org", 8443), 0);
	d = decide(f, s, "evil.org:8443");
	assert_decision(d, POL_ALLOW, POL_R_NONE);
	assert_int_equal(d.rule, POL_RULE_GRANT);
	pol_session_remove(f->st, s);
}

/* A session's own egress rules (the OpenSandbox networkPolicy): a denied
 * name is refused at once whatever the tier, an allowed one (wildcards
 * too) is admitted on the web ports within the ceiling, the rest is the
 * tier's and the prompts'. */
static void
test_decide_egress(void **state)
{
	struct fixture *f = *state;
	struct pol_session *s;
	struct pol_decision d;
	const char *allow[] = { "api.example.org", "*.cdn.example.net" };
	const char *deny[] = { "evil.org", "*.evil.net" };
	const char *badp[] = { "bad host" };
	const char *p;
	size_t bad;
	int isdeny;

	s = pol_session_add(f->st, "t-egress", "acme", "bob", POL_TIER_OFF);
	assert_non_null(s);
	pol_state_set_ceiling(f->st, POL_TIER_PUBLIC);
	d = decide(f, s, "api.example.org:443");
	assert_decision(d, POL_PROMPT, POL_R_NONE);
	assert_int_equal(pol_session_set_egress(s, allow, 2, deny, 2, &bad), 0);
	assert_int_equal(pol_session_egress_count(s), 4);
	assert_int_equal(pol_session_egress_at(s, 1, &p, &isdeny), 0);
	assert_string_equal(p, "*.cdn.example.net");
	assert_int_equal(isdeny, 0);
	assert_int_equal(pol_session_egress_at(s, 2, &p, &isdeny), 0);
	assert_string_equal(p, "evil.org");
	assert_int_equal(isdeny, 1);
	assert_int_equal(pol_session_egress_at(s, 4, &p, &isdeny), -1);
	d = decide(f, s, "api.example.org:443");
	assert_decision(d, POL_ALLOW, POL_R_NONE);
	assert_int_equal(d.rule, POL_RULE_SESSION);
	d = decide(f, s, "a.cdn.example.net:80");
	assert_decision(d, POL_ALLOW, POL_R_NONE);
	/* "*." is subdomains only; other ports are not the rule's */
	d = decide(f, s, "cdn.example.net:443");
	assert_decision(d, POL_PROMPT, POL_R_NONE);
	d = decide(f, s, "api.example.org:8443");
	assert_decision(d, POL_DENY, POL_R_PORT_NOT_ALLOWED);
	d = decide(f, s, "other.example.org:443");
	assert_decision(d, POL_PROMPT, POL_R_NONE);
	/* a denied name: at once, even on the public tier */
	pol_session_set_tier(s, POL_TIER_PUBLIC);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_DENY, POL_R_SESSION_DENIED);
	d = decide(f, s, "x.evil.net:80");
	assert_decision(d, POL_DENY, POL_R_SESSION_DENIED);
	d = decide(f, s, "other.example.org:443");
	assert_decision(d, POL_ALLOW, POL_R_NONE);
	/* an allowed name never reaches past the ceiling */
	pol_session_set_tier(s, POL_TIER_OFF);
	pol_state_set_ceiling(f->st, POL_TIER_OFF);
	d = decide(f, s, "api.example.org:443");
	assert_decision(d, POL_DENY, POL_R_NETWORK_OFF);
	pol_state_set_ceiling(f->st, POL_TIER_PUBLIC);
	/* a malformed pattern: refused by index, the old rules kept */
	assert_int_equal(pol_session_set_egress(s, allow, 1, badp, 1, &bad),
	    -1);
	assert_int_equal(bad, 1);
	assert_int_equal(pol_session_egress_count(s), 4);
	/* cleared */
	assert_int_equal(pol_session_set_egress(s, NULL, 0, NULL, 0, &bad), 0);
	assert_int_equal(pol_session_egress_count(s), 0);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_PROMPT, POL_R_NONE);
	pol_state_set_ceiling(f->st, POL_TIER_OFF);
	pol_session_remove(f->st, s);
}

static void
test_decide_grants(void **state)
{
	struct fixture *f = *state;
	struct pol_session *s;
	struct pol_decision d;

	s = pol_session_add(f->st, "t-grants", "acme", "bob",
	    POL_TIER_REGISTRIES);
	assert_non_null(s);
	pol_state_set_ceiling(f->st, POL_TIER_PUBLIC);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_PROMPT, POL_R_NONE);
	assert_int_equal(pol_session_grant(s, "Evil.ORG.", 443), 0);
	assert_int_equal(pol_session_grant(s, "evil.org", 443), 0);
	assert_int_equal(pol_session_grant_count(s), 1);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_ALLOW, POL_R_NONE);
	assert_int_equal(d.rule, POL_RULE_GRANT);
	d = decide(f, s, "evil.org:80");
	assert_decision(d, POL_PROMPT, POL_R_NONE);

	/* a grant against an admin deny: the deny wins */
	assert_int_equal(pol_session_grant(s, "blocked.example.com", 443), 0);
	d = decide(f, s, "blocked.example.com:443");
	assert_decision(d, POL_DENY, POL_R_ADMIN_DENY);
	assert_int_equal(pol_session_grant(s, "8.8.8.8", 443), 0);
	d = decide(f, s, "8.8.8.8:443");
	assert_decision(d, POL_DENY, POL_R_ADMIN_DENY);

	/* a grant never reaches past the ceiling */
	pol_state_set_ceiling(f->st, POL_TIER_REGISTRIES);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_DENY, POL_R_ABOVE_CEILING);
	pol_state_set_ceiling(f->st, POL_TIER_OFF);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_DENY, POL_R_NETWORK_OFF);

	/* revoke */
	pol_state_set_ceiling(f->st, POL_TIER_PUBLIC);
	assert_int_equal(pol_session_revoke(s, "evil.org", 443), 0);
	assert_int_equal(pol_session_revoke(s, "evil.org", 443), -1);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_PROMPT, POL_R_NONE);
	pol_session_remove(f->st, s);
}

static void
test_tenant_ceilings(void **state)
{
	struct fixture *f = *state;
	struct pol_session *s;
	struct pol_decision d;
	const char *name;
	enum pol_tier t;

	s = pol_session_add(f->st, "t-tenant", "acme", NULL, POL_TIER_PUBLIC);
	assert_non_null(s);
	assert_string_equal(pol_session_tenant(s), "acme");
	assert_string_equal(pol_session_user(s), "");

	/* tenant above global: clamped */
	pol_state_set_ceiling(f->st, POL_TIER_REGISTRIES);
	assert_int_equal(pol_state_set_tenant_ceiling(f->st, "acme",
	    POL_TIER_PUBLIC), 0);
	assert_int_equal(pol_state_ceiling(f->st, "acme"), POL_TIER_REGISTRIES);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_DENY, POL_R_ABOVE_CEILING);
	assert_int_equal(d.ceiling, POL_TIER_REGISTRIES);
	/* raising the global ceiling restores the tenant's value */
	pol_state_set_ceiling(f->st, POL_TIER_PUBLIC);
	assert_int_equal(pol_state_ceiling(f->st, "acme"), POL_TIER_PUBLIC);
	d = decide(f, s, "evil.org:443");
	assert_decision(d, POL_ALLOW, POL_R_NONE);

	/* tenant below global */
	assert_int_equal(pol_state_set_tenant_ceiling(f->st, "acme",
	    POL_TIER_OFF), 0);
	assert_int_equal(pol_state_ceiling(f->st, "acme"), POL_TIER_OFF);
	assert_int_equal(pol_state_ceiling(f->st, "other"), POL_TIER_PUBLIC);
	assert_int_equal(pol_state_ceiling(f->st, NULL), POL_TIER_PUBLIC);
	d = decide(f, s, "pypi.org:443");
	assert_decision(d, POL_DENY, POL_R_NETWORK_OFF);
	assert_int_equal(pol_state_tenant_at(f->st, 0, &name, &t), 0);
	assert_string_equal(name, "acme");
	assert_int_equal(t, POL_TIER_OFF);
	assert_int_equal(pol_state_tenant_at(f->st, 1, &name, &t), -1);
	assert_int_equal(pol_state_set_tenant_ceiling(f->st, "bad name",
	    POL_TIER_OFF), -1);
	assert_int_equal(pol_state_clear_tenant_ceiling(f->st, "acme"), 0);
	assert_int_equal(pol_state_clear_tenant_ceiling(f->st, "acme"), -1);
	assert_int_equal(pol_state_ceiling(f->st, "acme"), POL_TIER_PUBLIC);
	pol_session_remove(f->st, s);
}

static void
test_sessions(void **state)
{
	struct pol_state *st = pol_state_new();
	struct pol_session *a, *b;
	const char *host;
	uint16_t port;
	char id[80];

	(void)state;
	assert_int_equal(pol_state_global_ceiling(st), POL_TIER_OFF);
	assert_int_equal(pol_id_valid("chat-1.a_B"), 1);
	assert_int_equal(pol_id_valid(""), 0);
	assert_int_equal(pol_id_valid("a/b"), 0);
	assert_int_equal(pol_id_valid("a b"), 0);
	/* ids name directories: no ".", "..", or hidden names */
	assert_int_equal(pol_id_valid("."), 0);
	assert_int_equal(pol_id_valid(".."), 0);
	assert_int_equal(pol_id_valid(".x"), 0);
	assert_int_equal(pol_id_valid("..x"), 0);
	assert_int_equal(pol_id_valid("x."), 1);
	assert_int_equal(pol_id_valid("x..y"), 1);
	memset(id, 'x', 64);
	id[64] = '\0';
	assert_int_equal(pol_id_valid(id), 1);
	id[64] = 'x';
	id[65] = '\0';
	assert_int_equal(pol_id_valid(id), 0);

	a = pol_session_add(st, "a", "t1", "u1", POL_TIER_REGISTRIES);
	b = pol_session_add(st, "b", NULL, NULL, POL_TIER_OFF);
	assert_non_null(a);
	assert_non_null(b);
	assert_null(pol_session_add(st, "a", NULL, NULL, POL_TIER_OFF));
	assert_null(pol_session_add(st, "c/d", NULL, NULL, POL_TIER_OFF));
	assert_null(pol_session_add(st, "..", NULL, NULL, POL_TIER_OFF));
	assert_null(pol_session_add(st, ".", NULL, NULL, POL_TIER_OFF));
	assert_null(pol_session_add(st, "e", NULL, NULL, (enum pol_tier)7));
	assert_int_equal(pol_session_count(st), 2);
	assert_ptr_equal(pol_session_find(st, "b"), b);
	assert_ptr_equal(pol_session_at(st, 0), a);
	assert_null(pol_session_at(st, 2));
	assert_string_equal(pol_session_id(a), "a");
	assert_string_equal(pol_session_user(a), "u1");

	assert_int_equal(pol_session_grant(a, "pypi.org", 443), 0);
	assert_int_equal(pol_session_grant(a, "[2001:DB8::1]", 443), 0);
	assert_int_equal(pol_session_grant(a, "2001:db8:0::1", 443), 0);
	assert_int_equal(pol_session_grant(a, "bad host", 443), -1);
	assert_int_equal(pol_session_grant(a, "pypi.org", 0), -1);
	assert_int_equal(pol_session_grant_count(a), 2);
	assert_int_equal(pol_session_grant_at(a, 1, &host, &port), 0);
	assert_string_equal(host, "2001:db8::1");
	assert_int_equal(port, 443);
	assert_int_equal(pol_session_has_grant(a, "2001:db8::1", 443), 1);
	assert_int_equal(pol_session_has_grant(a, "pypi.org", 80), 0);
	assert_int_equal(pol_session_grant_at(a, 2, &host, &port), -1);

	pol_session_remove(st, a);
	assert_int_equal(pol_session_count(st), 1);
	assert_null(pol_session_find(st, "a"));
	assert_ptr_equal(pol_session_at(st, 0), b);
	pol_state_free(st);
}

static void
test_default_registries(void **state)
{
	static const char *const hosts[] = {
		"pypi.org", "files.pythonhosted.org", "registry.npmjs.org",
		"registry.yarnpkg.com", "crates.io", "static.crates.io",
		"index.crates.io", "proxy.golang.org", "sum.golang.org",
		"rubygems.org", "index.rubygems.org", "repo.maven.apache.org",
		"repo1.maven.org", "deb.debian.org", "security.debian.org",
		"archive.ubuntu.com", "security.ubuntu.com",
		"us.archive.ubuntu.com",
	};
	struct pol_config *c = pol_config_new();
	struct pol_state *st = pol_state_new();
	struct pol_session *s;
	struct pol_decision d;
	struct pol_target t;
	size_t i;

	(void)state;
	assert_int_equal(pol_config_registry_count(c), 0);
	assert_int_equal(pol_config_add_default_registries(c), 0);
	assert_true(pol_config_registry_count(c) >= 18);
	assert_int_equal(pol_config_add_registry(c, "10.0.0.1"), -1);
	pol_state_set_ceiling(st, POL_TIER_REGISTRIES);
	s = pol_session_add(st, "s", NULL, NULL, POL_TIER_REGISTRIES);
	for (i = 0; i < sizeof(hosts) / sizeof(*hosts); i++) {
		assert_int_equal(pol_host_parse(hosts[i], strlen(hosts[i]), 0,
		    &t), POL_R_NONE);
		t.port = 443;
		pol_decide(c, st, s, &t, &d);
		assert_int_equal(d.verdict, POL_ALLOW);
		assert_int_equal(d.rule, POL_RULE_REGISTRIES);
	}
	assert_int_equal(pol_host_parse("github.com", 10, 0, &t), POL_R_NONE);
	t.port = 443;
	pol_decide(c, st, s, &t, &d);
	assert_decision(d, POL_DENY, POL_R_ABOVE_CEILING);
	pol_state_free(st);
	pol_config_free(c);
}

/* ------------------------------------------------------------------ */
/* Prompt bookkeeping (policy/prompts.c). */

static void
test_answers(void **state)
{
	enum pol_answer a;

	(void)state;
	assert_string_equal(pol_answer_name(POL_ANSWER_ALLOW_ONCE),
	    "allow_once");
	assert_string_equal(pol_answer_name(POL_ANSWER_ALLOW_CHAT),
	    "allow_chat");
	assert_string_equal(pol_answer_name(POL_ANSWER_DENY), "deny");
	assert_string_equal(pol_answer_name(POL_ANSWER_TIMEOUT), "timeout");
	assert_string_equal(pol_answer_name((enum pol_answer)99), "unknown");
	assert_int_equal(pol_answer_parse("allow_chat", &a), 0);
	assert_int_equal(a, POL_ANSWER_ALLOW_CHAT);
	assert_int_equal(pol_answer_parse("deny", &a), 0);
	assert_int_equal(a, POL_ANSWER_DENY);
	/* nobody may answer "timeout": only sluiced ends a prompt so */
	assert_int_equal(pol_answer_parse("timeout", &a), -1);
	assert_int_equal(pol_answer_parse("Deny", &a), -1);
	assert_int_equal(pol_answer_parse("", &a), -1);
	assert_true(pol_answer_allows(POL_ANSWER_ALLOW_ONCE));
	assert_true(pol_answer_allows(POL_ANSWER_ALLOW_CHAT));
	assert_false(pol_answer_allows(POL_ANSWER_DENY));
	assert_false(pol_answer_allows(POL_ANSWER_TIMEOUT));
}

static void
test_prompts_coalesce_and_cap(void **state)
{
	struct pol_prompts *pp = pol_prompts_new(2, 4);
	int a, b, c;
	void *owner;

	(void)state;
	assert_non_null(pp);
	assert_int_equal(pol_prompts_join(pp, "s1", "pypi.org", 443, 100,
	    &owner), POL_PJ_NEW);
	assert_null(owner);
	assert_int_equal(pol_prompts_add(pp, "s1", "pypi.org", 443, &a), 0);
	/* the same place joins; another port or chat does not */
	assert_int_equal(pol_prompts_join(pp, "s1", "pypi.org", 443, 100,
	    &owner), POL_PJ_JOIN);
	assert_ptr_equal(owner, &a);
	assert_int_equal(pol_prompts_join(pp, "s1", "pypi.org", 80, 100,
	    &owner), POL_PJ_NEW);
	assert_int_equal(pol_prompts_join(pp, "s2", "pypi.org", 443, 100,
	    &owner), POL_PJ_NEW);
	assert_int_equal(pol_prompts_add(pp, "s1", "example.com", 443, &b), 0);
	/* two pending for s1: a third place is over the cap, a joiner not */
	assert_int_equal(pol_prompts_join(pp, "s1", "other.org", 443, 100,
	    &owner), POL_PJ_FULL);
	assert_int_equal(pol_prompts_join(pp, "s1", "example.com", 443, 100,
	    &owner), POL_PJ_JOIN);
	assert_ptr_equal(owner, &b);
	/* another chat is not limited by s1's prompts */
	assert_int_equal(pol_prompts_add(pp, "s2", "other.org", 443, &c), 0);
	assert_int_equal(pol_prompts_pending(pp), 3);
	pol_prompts_remove(pp, &a);
	assert_int_equal(pol_prompts_pending(pp), 2);
	assert_int_equal(pol_prompts_join(pp, "s1", "pypi.org", 443, 100,
	    &owner), POL_PJ_NEW);
	assert_int_equal(pol_prompts_join(pp, "s1", "other.org", 443, 100,
	    &owner), POL_PJ_NEW);
	pol_prompts_remove(pp, &a);   /* twice: nothing happens */
	assert_int_equal(pol_prompts_pending(pp), 2);
	/* ids and hosts too long for the table are refused, not cut */
	{
		char longid[POL_ID_MAX + 2];

		memset(longid, 'x', sizeof(longid) - 1);
		longid[sizeof(longid) - 1] = '\0';
		assert_int_equal(pol_prompts_add(pp, longid, "a.org", 1, &c),
		    -1);
	}
	pol_prompts_free(pp);
}

static void
test_prompts_quiet(void **state)
{
	struct pol_prompts *pp = pol_prompts_new(32, 2);
	void *owner;

	(void)state;
	assert_non_null(pp);
	pol_prompts_quiet(pp, "s1", "pypi.org", 443, 100, 160);
	assert_int_equal(pol_prompts_join(pp, "s1", "pypi.org", 443, 159,
	    &owner), POL_PJ_QUIET);
	/* only that chat, host and port */
	assert_int_equal(pol_prompts_join(pp, "s2", "pypi.org", 443, 120,
	    &owner), POL_PJ_NEW);
	assert_int_equal(pol_prompts_join(pp, "s1", "pypi.org", 80, 120,
	    &owner), POL_PJ_NEW);
	/* the period ends */
	assert_int_equal(pol_prompts_join(pp, "s1", "pypi.org", 443, 160,
	    &owner), POL_PJ_NEW);
	/* quiet wins over a pending prompt of the same place */
	assert_int_equal(pol_prompts_add(pp, "s1", "pypi.org", 443, pp), 0);
	pol_prompts_quiet(pp, "s1", "pypi.org", 443, 200, 260);
	assert_int_equal(pol_prompts_join(pp, "s1", "pypi.org", 443, 210,
	    &owner), POL_PJ_QUIET);
	/* a second deny extends the period of the same entry */
	pol_prompts_quiet(pp, "s1", "pypi.org", 443, 250, 400);
	assert_int_equal(pol_prompts_join(pp, "s1", "pypi.org", 443, 300,
	    &owner), POL_PJ_QUIET);
	/* full (2 entries): a third place is not kept, so it asks again */
	pol_prompts_quiet(pp, "s1", "a.org", 443, 300, 400);
	pol_prompts_quiet(pp, "s1", "b.org", 443, 300, 400);
	assert_int_equal(pol_prompts_join(pp, "s1", "b.org", 443, 310,
	    &owner), POL_PJ_NEW);
	/* expired entries make room */
	pol_prompts_quiet(pp, "s1", "b.org", 443, 401, 500);
	assert_int_equal(pol_prompts_join(pp, "s1", "b.org", 443, 450,
	    &owner), POL_PJ_QUIET);
	pol_prompts_free(pp);
	/* no quiet table at all: a deny never silences */
	pp = pol_prompts_new(1, 0);
	assert_non_null(pp);
	pol_prompts_quiet(pp, "s1", "pypi.org", 443, 100, 200);
	assert_int_equal(pol_prompts_join(pp, "s1", "pypi.org", 443, 150,
	    &owner), POL_PJ_NEW);
	pol_prompts_free(pp);
}

/* IPv4 text by hand says what inet_ntop says, at every octet width. */

/* ------------------------------------------------------------------ */
/* Request rules */

static void
test_glob(void **state)
{
	(void)state;
	assert_true(pol_glob_match("/*/git-receive-pack",
	    "/o/r.git/git-receive-pack", 25));
	assert_true(pol_glob_match("/x", "/x", 2));
	assert_false(pol_glob_match("/x", "/xy", 3));
	assert_false(pol_glob_match("/x*", "/", 1));
	assert_true(pol_glob_match("*", "", 0));
	assert_true(pol_glob_match("/a*b*c", "/aXbYbZc", 8));
	assert_false(pol_glob_match("/a*b*c", "/aXbYbZ", 7));
	assert_true(pol_glob_match("**/-/**", "/x/-/y", 6));
	/* only the n bytes count, not what follows them */
	assert_false(pol_glob_match("/ab", "/abc", 2));
	assert_true(pol_rule_glob_valid("/api/*"));
	assert_true(pol_rule_glob_valid("*publish"));
	assert_false(pol_rule_glob_valid("api"));
	assert_false(pol_rule_glob_valid("/a b"));
	assert_false(pol_rule_glob_valid("/a?b"));
	assert_false(pol_rule_glob_valid(""));
	assert_true(pol_rule_method_valid("GET"));
	assert_true(pol_rule_method_valid("M-SEARCH"));
	assert_false(pol_rule_method_valid("get"));
	assert_false(pol_rule_method_valid(""));
}

static void
norm_is(const char *in, const char *want)
{
	char out[256];

	assert_int_equal(pol_path_normalize(in, strlen(in), out, sizeof(out),
	    NULL, NULL), 0);
	assert_string_equal(out, want);
}

static void
test_path_normalize(void **state)
{
	char out[64];
	const char *q;
	size_t ql;

	(void)state;
	norm_is("/", "/");
	norm_is("/a/b", "/a/b");
	norm_is("/a/b/", "/a/b/");
	norm_is("//a///b", "/a/b");
	norm_is("/a/./b/../c", "/a/c");
	norm_is("/a/b/..", "/a/");
	norm_is("/../../x", "/x");
	norm_is("/x/git-receive-pac%6b", "/x/git-receive-pack");
	norm_is("/x%2Fgit-receive-pack", "/x/git-receive-pack");
	norm_is("/x/%2e%2e/y", "/y");
	norm_is("/a?b=/../c", "/a");
	assert_int_equal(pol_path_normalize("/a?x=1&y", 8, out, sizeof(out),
	    &q, &ql), 0);
	assert_int_equal(ql, 5);
	assert_memory_equal(q, "x=1&y", 5);
	assert_int_equal(pol_path_normalize("/a%00", 5, out, sizeof(out),
	    NULL, NULL), -1);
	assert_int_equal(pol_path_normalize("/a%4", 4, out, sizeof(out),
	    NULL, NULL), -1);
	assert_int_equal(pol_path_normalize("/a%zz", 5, out, sizeof(out),
	    NULL, NULL), -1);
	assert_int_equal(pol_path_normalize("a", 1, out, sizeof(out),
	    NULL, NULL), -1);
	assert_int_equal(pol_path_normalize("*", 1, out, sizeof(out),
	    NULL, NULL), -1);
	assert_int_equal(pol_path_normalize("/abc", 4, out, 4, NULL, NULL),
	    -1);
}

static struct pol_target
name_target(const char *host, uint16_t port)
{
	struct pol_target t;

	memset(&t, 0, sizeof(t));
	t.kind = POL_HOST_NAME;
	snprintf(t.host, sizeof(t.host), "%s", host);
	t.port = port;
	return t;
}

/* The rule that decides method path on host:443 for tenant. */
static const char *
rule_for(struct pol_config *c, const char *tenant, const char *host,
    const char *method, const char *path, enum pol_rule_action *a)
{
	static struct pol_rule_match m;
	struct pol_target t = name_target(host, 443);
	char scratch[512];

	assert_int_equal(pol_rules_match(c, tenant, &t, method, path,
	    strlen(path), scratch, sizeof(scratch), &m), POL_R_NONE);
	if (!m.matched)
		return "";
	*a = m.action;
	return m.name;
}

static void
test_rules_match(void **state)
{
	struct pol_config *c = pol_config_new();
	const char *h1[] = { "api.example.com" }, *h2[] = { "*.example.com" };
	const char *hgh[] = { "github.com" };
	const char *post[] = { "POST" }, *get[] = { "GET", "HEAD" };
	const char *pub[] = { "/admin/*", "/x" };
	const char *rp[] = { "/*/git-receive-pack" };
	const char *why;
	enum pol_rule_action a = POL_RA_ALLOW;
	struct pol_rule_spec sp[] = {
		{ "admin-deny", NULL, h1, 1, NULL, 0, pub, 2, POL_RA_DENY },
		{ "posts", NULL, h1, 1, post, 1, NULL, 0, POL_RA_PROMPT },
		{ "acme-gets", "acme", h2, 1, get, 2, NULL, 0, POL_RA_ALLOW },
		{ "push-ok", "acme", hgh, 1, NULL, 0, rp, 1, POL_RA_ALLOW },
	};
	struct pol_rule_spec bad = sp[0];
	size_t i;

	(void)state;
	assert_non_null(c);
	assert_int_equal(pol_config_add_default_registries(c), 0);
	for (i = 0; i < sizeof(sp) / sizeof(*sp); i++)
		assert_int_equal(pol_config_add_rule(c, &sp[i], &why), 0);
	assert_int_equal(pol_config_rule_count(c), 4);
	/* a name once per tenant scope */
	assert_int_equal(pol_config_add_rule(c, &bad, &why), -1);
	assert_non_null(strstr(why, "name"));
	bad.name = "bad name";
	assert_int_equal(pol_config_add_rule(c, &bad, &why), -1);
	bad.name = "b";
	bad.nhosts = 0;
	assert_int_equal(pol_config_add_rule(c, &bad, &why), -1);
	bad.nhosts = 1;
	bad.hosts = (const char *[]){ "10.0.0.1" };
	assert_int_equal(pol_config_add_rule(c, &bad, &why), -1);
	bad.hosts = h1;
	bad.methods = (const char *[]){ "get" };
	bad.nmethods = 1;
	assert_int_equal(pol_config_add_rule(c, &bad, &why), -1);
	bad.nmethods = 0;
	bad.paths = (const char *[]){ "admin" };
	assert_int_equal(pol_config_add_rule(c, &bad, &why), -1);
	assert_int_equal(pol_config_rule_count(c), 4);

	/* first match wins */
	assert_string_equal(rule_for(c, NULL, "api.example.com", "POST",
	    "/admin/x", &a), "admin-deny");
	assert_int_equal(a, POL_RA_DENY);
	/* a spelling of the path does not escape the glob */
	assert_string_equal(rule_for(c, NULL, "api.example.com", "GET",
	    "/public/../admin/%78", &a), "admin-deny");
	assert_string_equal(rule_for(c, NULL, "api.example.com", "GET",
	    "//admin//y?z", &a), "admin-deny");
	assert_string_equal(rule_for(c, NULL, "api.example.com", "POST",
	    "/other", &a), "posts");
	assert_int_equal(a, POL_RA_PROMPT);
	assert_string_equal(rule_for(c, NULL, "api.example.com", "GET",
	    "/other", &a), "");
	/* a tenant's rules are its own */
	assert_string_equal(rule_for(c, "acme", "www.example.com", "GET",
	    "/", &a), "acme-gets");
	assert_int_equal(a, POL_RA_ALLOW);
	assert_string_equal(rule_for(c, "other", "www.example.com", "GET",
	    "/", &a), "");
	assert_string_equal(rule_for(c, "", "www.example.com", "GET",
	    "/", &a), "");

	/* built-in: registries read-only */
	assert_string_equal(rule_for(c, NULL, "registry.npmjs.org", "GET",
	    "/left-pad", &a), "");
	assert_string_equal(rule_for(c, NULL, "registry.npmjs.org", "HEAD",
	    "/left-pad", &a), "");
	assert_string_equal(rule_for(c, NULL, "registry.npmjs.org", "PUT",
	    "/left-pad", &a), POL_RULE_BUILTIN_REGISTRIES);
	assert_int_equal(a, POL_RA_DENY);
	assert_string_equal(rule_for(c, NULL, "upload.pypi.org", "POST",
	    "/legacy/", &a), "");   /* not on the registry list */
	assert_string_equal(rule_for(c, NULL, "pypi.org", "POST",
	    "/legacy/", &a), POL_RULE_BUILTIN_REGISTRIES);
	assert_string_equal(rule_for(c, NULL, "crates.io", "PUT",
	    "/api/v1/crates/new", &a), POL_RULE_BUILTIN_REGISTRIES);

	/* built-in: git push */
	assert_string_equal(rule_for(c, NULL, "gitlab.com", "POST",
	    "/o/r.git/git-receive-pack", &a), POL_RULE_BUILTIN_GIT_PUSH);
	assert_string_equal(rule_for(c, NULL, "gitlab.com", "GET",
	    "/o/r.git/info/refs?service=git-receive-pack", &a),
	    POL_RULE_BUILTIN_GIT_PUSH);
	assert_string_equal(rule_for(c, NULL, "gitlab.com", "GET",
	    "/o/r.git/info/refs?x=1&service=git-receive-pack", &a),
	    POL_RULE_BUILTIN_GIT_PUSH);
	assert_string_equal(rule_for(c, NULL, "gitlab.com", "POST",
	    "/o/r.git/git-receive-pac%6B", &a), POL_RULE_BUILTIN_GIT_PUSH);
	assert_string_equal(rule_for(c, NULL, "gitlab.com", "POST",
	    "/o/r.git/git-upload-pack", &a), "");
	assert_string_equal(rule_for(c, NULL, "gitlab.com", "GET",
	    "/o/r.git/info/refs?service=git-upload-pack", &a), "");
	/* a configured allow comes first */
	assert_string_equal(rule_for(c, "acme", "github.com", "POST",
	    "/o/git-receive-pack", &a), "push-ok");
	assert_int_equal(a, POL_RA_ALLOW);
	assert_string_equal(rule_for(c, "beta", "github.com", "POST",
	    "/o/git-receive-pack", &a), POL_RULE_BUILTIN_GIT_PUSH);

	{
		struct pol_rule_match m;
		struct pol_target t = name_target("gitlab.com", 443);
		char scratch[64];

		assert_int_equal(pol_rules_match(c, NULL, &t, "GET", "/a%00",
		    5, scratch, sizeof(scratch), &m), POL_R_BAD_TARGET);
		assert_int_equal(m.matched, 0);
	}
	assert_string_equal(pol_rule_action_name(POL_RA_PROMPT), "prompt");
	assert_int_equal(pol_rule_action_parse("deny", &a), 0);
	assert_int_equal(a, POL_RA_DENY);
	assert_int_equal(pol_rule_action_parse("Deny", &a), -1);

	/* sluiced keeps the file's rules and puts the API's after them
	 * again: the ones dropped match no more, their names are free */
	pol_config_rules_truncate(c, 1);
	assert_int_equal(pol_config_rule_count(c), 1);
	assert_string_equal(rule_for(c, NULL, "api.example.com", "POST",
	    "/other", &a), "");
	assert_string_equal(rule_for(c, NULL, "api.example.com", "POST",
	    "/admin/x", &a), "admin-deny");
	assert_int_equal(pol_config_add_rule(c, &sp[1], &why), 0);
	assert_string_equal(rule_for(c, NULL, "api.example.com", "POST",
	    "/other", &a), "posts");
	pol_config_rules_truncate(c, 5);
	assert_int_equal(pol_config_rule_count(c), 2);
	pol_config_rules_truncate(c, 0);
	assert_int_equal(pol_config_rule_count(c), 0);
	pol_config_rules_truncate(NULL, 0);
	pol_config_free(c);
}

static void
test_host_pattern_covered(void **state)
{
	const char *in[] = { "insp.test", "*.git.test" };

	(void)state;
	assert_true(pol_host_pattern_covered(in, 2, "insp.test"));
	assert_true(pol_host_pattern_covered(in, 2, "insp.test:443"));
	assert_false(pol_host_pattern_covered(in, 2, "a.insp.test"));
	assert_false(pol_host_pattern_covered(in, 2, "*.insp.test"));
	assert_true(pol_host_pattern_covered(in, 2, "a.git.test"));
	assert_true(pol_host_pattern_covered(in, 2, "*.git.test"));
	assert_true(pol_host_pattern_covered(in, 2, "*.a.git.test"));
	assert_false(pol_host_pattern_covered(in, 2, "git.test"));
	assert_false(pol_host_pattern_covered(in, 2, "xgit.test"));
	assert_false(pol_host_pattern_covered(in, 2, "*.test"));
	assert_false(pol_host_pattern_covered(in, 0, "insp.test"));
}

static void
test_prompts_rule_places(void **state)
{
	struct pol_prompts *pp = pol_prompts_new(8, 8);
	int a, b;
	void *owner;

	(void)state;
	assert_non_null(pp);
	assert_int_equal(pol_prompts_add(pp, "s1", "h.org", 443, &a), 0);
	/* a rule's prompt is not the host's */
	assert_int_equal(pol_prompts_join_rule(pp, "s1", "h.org", 443, "r1",
	    10, &owner), POL_PJ_NEW);
	assert_int_equal(pol_prompts_add_rule(pp, "s1", "h.org", 443, "r1",
	    &b), 0);
	assert_int_equal(pol_prompts_join_rule(pp, "s1", "h.org", 443, "r1",
	    10, &owner), POL_PJ_JOIN);
	assert_ptr_equal(owner, &b);
	assert_int_equal(pol_prompts_join(pp, "s1", "h.org", 443, 10,
	    &owner), POL_PJ_JOIN);
	assert_ptr_equal(owner, &a);
	assert_int_equal(pol_prompts_join_rule(pp, "s1", "h.org", 443, "r2",
	    10, &owner), POL_PJ_NEW);
	pol_prompts_quiet_rule(pp, "s1", "h.org", 443, "r2", 10, 20);
	assert_int_equal(pol_prompts_join_rule(pp, "s1", "h.org", 443, "r2",
	    11, &owner), POL_PJ_QUIET);
	assert_int_equal(pol_prompts_join_rule(pp, "s1", "h.org", 443, "r3",
	    11, &owner), POL_PJ_NEW);
	pol_prompts_free(pp);
}

static void
test_addr_format_v4(void **state)
{
	static const uint8_t octets[] = { 0, 1, 9, 10, 99, 100, 199, 255 };
	struct pol_addr a;
	char got[64], want[64];
	size_t i, j;

	(void)state;
	memset(&a, 0, sizeof(a));
	a.family = AF_INET;
	for (i = 0; i < sizeof(octets); i++)
		for (j = 0; j < sizeof(octets); j++) {
			a.a[0] = octets[i];
			a.a[1] = octets[j];
			a.a[2] = octets[(i + j) % sizeof(octets)];
			a.a[3] = octets[(i * 3 + j) % sizeof(octets)];
			assert_non_null(inet_ntop(AF_INET, a.a, want,
			    sizeof(want)));
			assert_string_equal(pol_addr_format(&a, got,
			    sizeof(got)), want);
		}
	/* a buffer too short for the longest form: what inet_ntop does */
	a.a[0] = a.a[1] = a.a[2] = a.a[3] = 255;
	assert_string_equal(pol_addr_format(&a, got, 8), "");
	a.a[0] = 1;
	a.a[1] = a.a[2] = a.a[3] = 2;
	assert_string_equal(pol_addr_format(&a, got, 8), "1.2.2.2");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_addr_format_v4),
		cmocka_unit_test(test_anchor_vectors),
		cmocka_unit_test(test_anchor_nul_and_zone_pattern),
		cmocka_unit_test(test_anchor_port_not_scoped),
		cmocka_unit_test(test_addr_parse_strict),
		cmocka_unit_test(test_addr_classes),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_target_forms),
		cmocka_unit_test(test_hostset_patterns),
		cmocka_unit_test(test_hostset_large),
		cmocka_unit_test(test_cidr_precedence),
		cmocka_unit_test(test_host_own),
		cmocka_unit_test_setup_teardown(test_decide_tiers,
		    fixture_setup, fixture_teardown),
		cmocka_unit_test_setup_teardown(test_decide_ports,
		    fixture_setup, fixture_teardown),
		cmocka_unit_test_setup_teardown(test_decide_grants,
		    fixture_setup, fixture_teardown),
		cmocka_unit_test_setup_teardown(test_decide_egress,
		    fixture_setup, fixture_teardown),
		cmocka_unit_test_setup_teardown(test_tenant_ceilings,
		    fixture_setup, fixture_teardown),
		cmocka_unit_test(test_sessions),
		cmocka_unit_test(test_default_registries),
		cmocka_unit_test(test_answers),
		cmocka_unit_test(test_prompts_coalesce_and_cap),
		cmocka_unit_test(test_prompts_quiet),
		cmocka_unit_test(test_glob),
		cmocka_unit_test(test_path_normalize),
		cmocka_unit_test(test_rules_match),
		cmocka_unit_test(test_prompts_rule_places),
		cmocka_unit_test(test_host_pattern_covered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
