/*
 * test_fw.c: the firewall ruleset with no kernel: normalisation, text
 * and netlink goldens (tests/fw/golden/), errors.
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

#include "config.h"
#include "fw.h"
#include "fw-int.h"

static char *
slurp(const char *rel)
{
	const char *dir = getenv("SLUICE_SRCDIR");
	char path[4096];
	char *buf;
	long n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir ? dir : ".", rel);
	f = fopen(path, "r");
	if (f == NULL)
		fail_msg("cannot open %s", path);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static struct fw_ruleset *
build_from(const char *name)
{
	const char *dir = getenv("SLUICE_SRCDIR");
	char path[4096], err[512];
	struct fw_config fc;
	struct fw_ruleset *rs;
	struct cfg *c;

	snprintf(path, sizeof(path), "%s/tests/fw/%s.json", dir ? dir : ".",
	    name);
	c = cfg_load(path, err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	assert_int_equal(fw_config_from_cfg(&fc, c, NULL), 0);
	rs = fw_build(&fc, err, sizeof(err));
	if (rs == NULL)
		fail_msg("%s", err);
	fw_config_clear(&fc);
	cfg_free(c);
	return rs;
}

static void
check_golden(const char *name, int netlink)
{
	struct fw_ruleset *rs = build_from(name);
	char rel[256], *want, *got;

	snprintf(rel, sizeof(rel), "tests/fw/golden/%s.%s", name,
	    netlink ? "netlink" : "nft");
	want = slurp(rel);
	got = netlink ? fw_render_netlink(rs) : fw_render(rs);
	assert_non_null(got);
	if (strcmp(want, got) != 0)
		fail_msg("%s differs; got:\n%s", rel, got);
	free(want);
	free(got);
	fw_free(rs);
}

static void
test_golden_text(void **state)
{
	(void)state;
	check_golden("full", 0);
	check_golden("changed", 0);
	check_golden("self", 0);
	check_golden("transparent", 0);
}

static void
test_golden_netlink(void **state)
{
	(void)state;
	check_golden("full", 1);
	check_golden("changed", 1);
	check_golden("self", 1);
	check_golden("transparent", 1);
}

static void
range(const char *cidr, struct fw_range *r, enum fw_key want)
{
	enum fw_key k;

	if (fw_cidr_parse(cidr, &k, r) != 0)
		fail_msg("%s refused", cidr);
	assert_int_equal(k, want);
}

static void
fmt(enum fw_key k, const struct fw_range *r, const char *want)
{
	char buf[100];

	fw_range_format(k, r, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

static void
test_cidr_parse(void **state)
{
	struct fw_range r;
	enum fw_key k;

	(void)state;
	range("10.1.2.3/8", &r, FW_KEY_V4);     /* masked, like nft */
	fmt(FW_KEY_V4, &r, "10.0.0.0/8");
	range("10.1.2.3", &r, FW_KEY_V4);
	fmt(FW_KEY_V4, &r, "10.1.2.3");
	range("0.0.0.0/0", &r, FW_KEY_V4);
	fmt(FW_KEY_V4, &r, "0.0.0.0/0");
	range("fe80::1/10", &r, FW_KEY_V6);
	fmt(FW_KEY_V6, &r, "fe80::/10");
	range("::1", &r, FW_KEY_V6);
	fmt(FW_KEY_V6, &r, "::1");
	assert_int_equal(fw_cidr_parse("10.0.0.0/33", &k, &r), -1);
	assert_int_equal(fw_cidr_parse("10.0.0.0/", &k, &r), -1);
	assert_int_equal(fw_cidr_parse("10.0.0.0/08", &k, &r), -1);
	assert_int_equal(fw_cidr_parse("10.0.0.0/8x", &k, &r), -1);
	assert_int_equal(fw_cidr_parse("10.0.0/8", &k, &r), -1);
	assert_int_equal(fw_cidr_parse("::/129", &k, &r), -1);
	assert_int_equal(fw_cidr_parse("", &k, &r), -1);
}

static void
test_normalise(void **state)
{
	struct fw_range r[6];
	size_t n;

	(void)state;
	/* out of order, overlapping, adjacent, contained, apart */
	range("10.2.0.0/16", &r[0], FW_KEY_V4);
	range("10.0.0.0/16", &r[1], FW_KEY_V4);
	range("10.1.0.0/16", &r[2], FW_KEY_V4);     /* adjacent to both */
	range("10.1.2.0/24", &r[3], FW_KEY_V4);     /* contained */
	range("10.4.0.0/16", &r[4], FW_KEY_V4);     /* a gap before it */
	range("255.255.255.255", &r[5], FW_KEY_V4); /* the top */
	n = fw_ranges_normalise(r, 6, 4);
	assert_int_equal(n, 3);
	fmt(FW_KEY_V4, &r[0], "10.0.0.0-10.2.255.255");
	fmt(FW_KEY_V4, &r[1], "10.4.0.0/16");
	fmt(FW_KEY_V4, &r[2], "255.255.255.255");

	/* merging up to the top of the space does not wrap */
	range("240.0.0.0/4", &r[0], FW_KEY_V4);
	range("224.0.0.0/4", &r[1], FW_KEY_V4);
	range("0.0.0.0/1", &r[2], FW_KEY_V4);
	range("128.0.0.0/2", &r[3], FW_KEY_V4);
	n = fw_ranges_normalise(r, 4, 4);
	assert_int_equal(n, 2);
	fmt(FW_KEY_V4, &r[0], "0.0.0.0-191.255.255.255");
	fmt(FW_KEY_V4, &r[1], "224.0.0.0/3");
	range("0.0.0.0/0", &r[2], FW_KEY_V4);
	n = fw_ranges_normalise(r, 3, 4);
	assert_int_equal(n, 1);
	fmt(FW_KEY_V4, &r[0], "0.0.0.0/0");
	assert_int_equal(fw_ranges_normalise(r, 0, 4), 0);
}

static void
test_empty_and_errors(void **state)
{
	struct fw_config fc;
	struct fw_ruleset *rs;
	const char *bad[] = { "10.0.0.0/8", "not-a-cidr" };
	const char *res[] = { "10.0.0.2:53", "[fd00::1]:5353", "fd00::2" };
	char err[256], *t;

	(void)state;
	memset(&fc, 0, sizeof(fc));
	fc.uid = -1;
	rs = fw_build(&fc, err, sizeof(err));
	assert_non_null(rs);
	assert_string_equal(fw_table_name(rs), "sluice");
	t = fw_render(rs);
	/* neither guard configured: an empty table of our own */
	assert_string_equal(t, "table inet sluice {\n}\n");
	free(t);
	fw_free(rs);

	fc.table = "9lives";
	assert_null(fw_build(&fc, err, sizeof(err)));
	assert_non_null(strstr(err, "table"));
	fc.table = "a_name_that_is_far_too_long_to_fit";
	assert_null(fw_build(&fc, err, sizeof(err)));
	fc.table = "x";
	fc.uid = 0x100000000LL;
	assert_null(fw_build(&fc, err, sizeof(err)));
	assert_non_null(strstr(err, "uid"));
	fc.uid = 7;
	fc.deny_cidrs = bad;
	fc.ndeny_cidrs = 2;
	assert_null(fw_build(&fc, err, sizeof(err)));
	assert_non_null(strstr(err, "not-a-cidr"));
	fc.ndeny_cidrs = 1;
	fc.resolvers = res;
	fc.nresolvers = 3;
	rs = fw_build(&fc, err, sizeof(err));
	if (rs == NULL)
		fail_msg("%s", err);
	t = fw_render(rs);
	assert_non_null(strstr(t, "table inet x {"));
	assert_non_null(strstr(t, "elements = { 10.0.0.2 }"));
	/* neighbours merge into one range */
	assert_non_null(strstr(t, "elements = { fd00::1-fd00::2 }"));
	assert_non_null(strstr(t, "meta skuid 7 ip daddr @refused4"));
	assert_null(strstr(t, "chain forward"));
	free(t);
	fw_free(rs);
	res[0] = "[fd00::1";
	assert_null(fw_build(&fc, err, sizeof(err)));
	assert_non_null(strstr(err, "resolvers"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_text),
		cmocka_unit_test(test_golden_netlink),
		cmocka_unit_test(test_cidr_parse),
		cmocka_unit_test(test_normalise),
		cmocka_unit_test(test_empty_and_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
