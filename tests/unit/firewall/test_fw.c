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

#include <sys/uio.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <arpa/inet.h>

#include "proxy/lib/config.h"
#include "firewall/fw.h"
#include "proxy/fwcfg.h"
#include "firewall/fw-int.h"
#include "policy/policy.h"

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
	check_golden("iface", 0);
}

static void
test_golden_netlink(void **state)
{
	(void)state;
	check_golden("full", 1);
	check_golden("changed", 1);
	check_golden("self", 1);
	check_golden("transparent", 1);
	check_golden("iface", 1);
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


/* Interface names: the kernel's rules, a trailing '*' for a prefix,
 * nested entries folded, touching ones kept apart, nft's text. */
static void
test_ifnames(void **state)
{
	const char *good[] = { "eth0", "br-sandbox", "tap*", "a",
	    "x23456789012345", "veth.7@x", "v*" };
	const char *bad[] = { "", "x234567890123456", ".", "..", "*",
	    "ta*p", "a b", "a/b", "a:b", "a\"b", "a\\b", "caf\xc3\xa9",
	    "tab\t", "**" };
	const char *list[] = { "veth7", "tap0", "veth*", "tap", "vm-*",
	    "vm.", "tap0", "ve*" };
	const uint16_t ports[] = { 3128 };
	const char *baddr[] = { "10.0.0.1" };
	struct fw_range r[8];
	struct fw_config fc;
	struct fw_ruleset *a, *b;
	char why[120], err[256], *t;
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(*good); i++)
		if (pol_ifname_check(good[i], why, sizeof(why)) != 0)
			fail_msg("%s refused: %s", good[i], why);
	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		if (pol_ifname_check(bad[i], why, sizeof(why)) == 0)
			fail_msg("\"%s\" accepted", bad[i]);

	/* "tap*" is the prefix block, "tap" and "tap0" names in it */
	for (i = 0; i < 8; i++)
		assert_int_equal(fw_ifname_parse(list[i], &r[i]), 0);
	fmt(FW_KEY_IFNAME, &r[2], "\"veth*\"");
	fmt(FW_KEY_IFNAME, &r[1], "\"tap0\"");
	assert_int_equal(r[2].hi[4], 0xff);
	assert_int_equal(r[2].hi[15], 0xff);
	assert_int_equal(r[1].hi[4], 0);
	n = fw_ifnames_normalise(r, 8);
	/* tap, tap0 (once), ve* (holding veth* and veth7), vm-*, vm. */
	assert_int_equal(n, 5);
	fmt(FW_KEY_IFNAME, &r[0], "\"tap\"");
	fmt(FW_KEY_IFNAME, &r[1], "\"tap0\"");
	fmt(FW_KEY_IFNAME, &r[2], "\"ve*\"");
	fmt(FW_KEY_IFNAME, &r[3], "\"vm-*\"");
	fmt(FW_KEY_IFNAME, &r[4], "\"vm.\"");

	/* the guard from interfaces alone; a list change is a refill */
	memset(&fc, 0, sizeof(fc));
	fc.uid = -1;
	fc.sandbox_interfaces = list;
	fc.nsandbox_interfaces = 2;
	fc.broker_ports = ports;
	fc.nbroker_ports = 1;
	fc.broker_addrs = baddr;
	fc.nbroker_addrs = 1;
	fc.transparent_port = 3129;
	a = fw_build(&fc, err, sizeof(err));
	if (a == NULL)
		fail_msg("%s", err);
	t = fw_render(a);
	assert_non_null(strstr(t, "type ifname\n\t\tflags interval\n"
	    "\t\telements = { \"tap0\",\n\t\t\t     \"veth7\" }"));
	/* the broker ports on the broker's addresses only */
	assert_non_null(strstr(t, "iifname @sandbox_ifaces ip daddr @broker4 "
	    "tcp dport @broker_ports counter packets 0 bytes 0 accept\n"));
	assert_non_null(strstr(t, "iifname @sandbox_ifaces ip6 daddr @broker6 "
	    "tcp dport @broker_ports counter packets 0 bytes 0 accept\n"));
	assert_non_null(strstr(t, "set broker4 {\n\t\ttype ipv4_addr\n"
	    "\t\tflags interval\n\t\telements = { 10.0.0.1 }\n"));
	assert_non_null(strstr(t, "set broker6 {\n\t\ttype ipv6_addr\n"
	    "\t\tflags interval\n\t}\n"));
	assert_non_null(strstr(t, "iifname @sandbox_ifaces counter packets "
	    "0 bytes 0 drop\n\t}\n\n\tchain forward"));
	assert_non_null(strstr(t, "iifname @sandbox_ifaces tcp dport "
	    "@redirect_ports counter packets 0 bytes 0 redirect to :3129"));
	/* no subnets: no address rules, no other-sandbox drop */
	assert_null(strstr(t, "saddr"));
	assert_null(strstr(t, "@sandbox4"));
	free(t);
	fc.nsandbox_interfaces = 5;
	b = fw_build(&fc, err, sizeof(err));
	assert_non_null(b);
	assert_int_equal(fw_sets_only(a, b), 1);
	fw_free(b);
	fc.nsandbox_interfaces = 0;
	b = fw_build(&fc, err, sizeof(err));
	assert_non_null(b);
	assert_int_equal(fw_sets_only(a, b), 0);
	t = fw_render(b);
	assert_string_equal(t, "table inet sluice {\n}\n");
	free(t);
	fw_free(b);
	fw_free(a);

	baddr[0] = "10.0.0.1:3128";
	assert_null(fw_build(&fc, err, sizeof(err)));
	assert_non_null(strstr(err, "broker_addrs"));
	baddr[0] = "fd00::1";
	/* the helper rebuilds from what the proxy sent: checked again */
	fc.sandbox_interfaces = bad;
	fc.nsandbox_interfaces = 6;
	assert_null(fw_build(&fc, err, sizeof(err)));
	assert_non_null(strstr(err, "sandbox_interfaces"));
}

/* ------------------------------------------------------------------ */
/* The set-refill batch, decoded from its bytes: one line a message
 * ("NEWSETELEM sluice/refused4 create,ack 24 elements"), the elements
 * below it when elems is set.  nmsgs/maxlen: NEWSETELEM count and the
 * longest message. */

struct batch_stats {
	size_t newelem_msgs, elems, maxlen;
};

/* One element: its key in hex, "end" for an interval end, "udata"
 * when it carries user data (the open-interval hint).  libnftnl numbers
 * the element nests 1, 2, ... rather than NFTA_LIST_ELEM; the kernel
 * does not look at the type. */
static size_t
elem_decode(FILE *f, const struct nlattr *el, int print)
{
	const struct nlattr *a, *d;
	char hex[40] = "";
	uint32_t flags = 0;
	int udata = 0;

	mnl_attr_for_each_nested(a, el) {
		switch (mnl_attr_get_type(a)) {
		case NFTA_SET_ELEM_KEY:
			mnl_attr_for_each_nested(d, a) {
				const uint8_t *v = mnl_attr_get_payload(d);
				uint16_t i, n = mnl_attr_get_payload_len(d);

				assert_int_equal(mnl_attr_get_type(d),
				    NFTA_DATA_VALUE);
				assert_true(n <= 16);
				for (i = 0; i < n; i++)
					snprintf(hex + 2 * i, 3, "%02x", v[i]);
			}
			break;
		case NFTA_SET_ELEM_FLAGS:
			flags = ntohl(mnl_attr_get_u32(a));
			break;
		case NFTA_SET_ELEM_USERDATA:
			udata = 1;
			break;
		default:
			fail_msg("unexpected element attribute %u",
			    mnl_attr_get_type(a));
		}
	}
	if (print)
		fprintf(f, "  %s%s%s\n", hex,
		    flags & NFT_SET_ELEM_INTERVAL_END ? " end" : "",
		    udata ? " udata" : "");
	return 1;
}

static void
decode_msg(FILE *f, const struct nlmsghdr *nlh, int elems,
    struct batch_stats *st)
{
	uint16_t type = nlh->nlmsg_type;
	const char *name, *table = "?", *set = "?";
	const struct nlattr *a, *list = NULL;
	size_t n = 0;
	int id = 0;

	if (nlh->nlmsg_len > st->maxlen)
		st->maxlen = nlh->nlmsg_len;
	if (type == NFNL_MSG_BATCH_BEGIN || type == NFNL_MSG_BATCH_END) {
		fprintf(f, "%s\n", type == NFNL_MSG_BATCH_BEGIN ? "BEGIN" :
		    "END");
		return;
	}
	assert_int_equal(type >> 8, NFNL_SUBSYS_NFTABLES);
	switch (type & 0xff) {
	case NFT_MSG_NEWSETELEM: name = "NEWSETELEM"; break;
	case NFT_MSG_DELSETELEM: name = "DELSETELEM"; break;
	default:
		fail_msg("unexpected message %#x in a set batch", type);
		return;
	}
	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
		switch (mnl_attr_get_type(a)) {
		case NFTA_SET_ELEM_LIST_TABLE:
			table = mnl_attr_get_str(a);
			break;
		case NFTA_SET_ELEM_LIST_SET:
			set = mnl_attr_get_str(a);
			break;
		case NFTA_SET_ELEM_LIST_SET_ID:
			id = 1;
			break;
		case NFTA_SET_ELEM_LIST_ELEMENTS:
			list = a;
			break;
		}
	}
	if (list != NULL)
		mnl_attr_for_each_nested(a, list)
			n += elem_decode(f, a, 0);
	fprintf(f, "%s %s/%s%s%s %zu elements%s\n", name, table, set,
	    nlh->nlmsg_flags & NLM_F_CREATE ? " create" : "",
	    nlh->nlmsg_flags & NLM_F_ACK ? " ack" : "", n, id ? " id" : "");
	if ((type & 0xff) == NFT_MSG_NEWSETELEM) {
		st->newelem_msgs++;
		st->elems += n;
	}
	if (elems && list != NULL)
		mnl_attr_for_each_nested(a, list)
			elem_decode(f, a, 1);
}

static char *
decode_batch(struct nftnl_batch *b, int elems, struct batch_stats *st)
{
	int n = nftnl_batch_iovec_len(b), i;
	struct iovec *iov = calloc((size_t)n, sizeof(*iov));
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_non_null(iov);
	assert_non_null(f);
	memset(st, 0, sizeof(*st));
	nftnl_batch_iovec(b, iov, (uint32_t)n);
	for (i = 0; i < n; i++) {
		const struct nlmsghdr *nlh = iov[i].iov_base;
		int left = (int)iov[i].iov_len;

		for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left))
			decode_msg(f, nlh, elems, st);
		assert_int_equal(left, 0);
	}
	free(iov);
	fclose(f);
	return out;
}

static void
test_golden_set_update(void **state)
{
	struct fw_ruleset *full = build_from("full");
	struct fw_ruleset *upd = build_from("update");
	struct fw_ruleset *chg = build_from("changed");
	struct batch_stats st;
	struct nftnl_batch *b;
	uint32_t seq = 0;
	char *want, *got;

	(void)state;
	/* only elements differ: a refill; chains/rules/uid differ: not */
	assert_int_equal(fw_sets_only(full, upd), 1);
	assert_int_equal(fw_sets_only(upd, full), 1);
	assert_int_equal(fw_sets_only(full, chg), 0);
	assert_int_equal(fw_sets_only(chg, full), 0);
	{
		/* the redirect's port and the nat chain are structure */
		struct fw_ruleset *t1 = build_from("transparent");
		struct fw_ruleset *t2 = build_from("transparent");

		assert_int_equal(fw_sets_only(t1, t2), 1);
		assert_int_equal(fw_sets_only(t1, full), 0);
		t2->redirect_port++;
		assert_int_equal(fw_sets_only(t1, t2), 0);
		fw_free(t1);
		fw_free(t2);
	}

	b = fw_nl_set_batch(full, upd, &seq, 1);
	assert_non_null(b);
	got = decode_batch(b, 1, &st);
	nftnl_batch_free(b);
	want = slurp("tests/fw/golden/update.netlink");
	if (strcmp(want, got) != 0)
		fail_msg("tests/fw/golden/update.netlink differs; got:\n%s",
		    got);
	free(want);
	free(got);
	/* BEGIN, 3 x (flush, add), END: allow4, refused4 and refused6,
	 * which holds the NAT64 and 6to4 images of deny_cidrs */
	assert_int_equal(seq, 8);

	/* nothing changed: an empty transaction */
	seq = 0;
	b = fw_nl_set_batch(full, full, &seq, 1);
	assert_non_null(b);
	got = decode_batch(b, 0, &st);
	nftnl_batch_free(b);
	assert_string_equal(got, "BEGIN\nEND\n");
	free(got);
	fw_free(full);
	fw_free(upd);
	fw_free(chg);
}

/* A long deny list: the refill is split into several NEWSETELEM
 * messages, each under the 16-bit attribute limit, none lost. */
static void
test_set_update_split(void **state)
{
	enum { N = 6000 };
	const char *sub[] = { "10.77.0.0/16" };
	const uint16_t ports[] = { 3128 };
	char **deny = calloc(N, sizeof(*deny)), err[256], *got;
	struct fw_config fc;
	struct fw_ruleset *a, *b;
	struct nftnl_batch *batch;
	struct batch_stats st;
	uint32_t seq = 0;
	size_t i;

	(void)state;
	assert_non_null(deny);
	for (i = 0; i < N; i++) {
		/* every other address of 44.0.0.0/16 and up: no merging */
		assert_true(asprintf(&deny[i], "44.%zu.%zu.%zu",
		    i / 32768, (i / 128) % 256, (i % 128) * 2) > 0);
	}
	memset(&fc, 0, sizeof(fc));
	fc.uid = 1000;
	fc.sandbox_subnets = sub;
	fc.nsandbox_subnets = 1;
	fc.broker_ports = ports;
	fc.nbroker_ports = 1;
	a = fw_build(&fc, err, sizeof(err));
	assert_non_null(a);
	fc.deny_cidrs = (const char *const *)deny;
	fc.ndeny_cidrs = N;
	b = fw_build(&fc, err, sizeof(err));
	assert_non_null(b);
	assert_int_equal(fw_sets_only(a, b), 1);

	batch = fw_nl_set_batch(a, b, &seq, 1);
	assert_non_null(batch);
	got = decode_batch(batch, 0, &st);
	nftnl_batch_free(batch);
	/* refused4 changed, and refused6 with the NAT64 and 6to4 image of
	 * every address (apart, so none merges): a flush of each, then the
	 * refills in parts */
	{
		const char *p = "BEGIN\nDELSETELEM sluice/refused4 ack 0 "
		    "elements\nNEWSETELEM sluice/refused4 create ack ";

		assert_memory_equal(got, p, strlen(p));
		assert_non_null(strstr(got, "DELSETELEM sluice/refused6 ack 0 "
		    "elements\nNEWSETELEM sluice/refused6 create ack "));
	}
	assert_true(st.newelem_msgs >= 3);
	/* each range a start and an end, but 240.0.0.0/4 and ff00::/8
	 * reach the top (no end) and 0.0.0.0/8 and ::/96 the bottom (no
	 * sentinel) */
	assert_string_equal(b->sets[4].name, "refused4");
	assert_string_equal(b->sets[5].name, "refused6");
	assert_true(b->sets[4].n > N);
	assert_int_equal(b->sets[5].n, a->sets[5].n + 2 * N);
	assert_int_equal(st.elems, 2 * b->sets[4].n - 1 +
	    2 * b->sets[5].n - 1);
	assert_true(st.maxlen <= 65535 + 64);
	/* the other way round: the built-in ranges come back */
	seq = 0;
	batch = fw_nl_set_batch(b, a, &seq, 1);
	assert_non_null(batch);
	free(decode_batch(batch, 0, &st));
	nftnl_batch_free(batch);
	assert_int_equal(st.newelem_msgs, 2);
	free(got);
	for (i = 0; i < N; i++)
		free(deny[i]);
	free(deny);
	fw_free(a);
	fw_free(b);
}

/* ------------------------------------------------------------------ */
/* The self guard and the sandbox guard against policy/'s address check */

static const struct fw_set *
set_named(const struct fw_ruleset *rs, const char *name)
{
	size_t i;

	for (i = 0; i < rs->nsets; i++)
		if (strcmp(rs->sets[i].name, name) == 0)
			return &rs->sets[i];
	fail_msg("no set %s", name);
	return NULL;
}

static int
set_has(const struct fw_set *s, const uint8_t *a)
{
	size_t klen = fw_key_len(s->key), i;

	for (i = 0; i < s->n; i++)
		if (memcmp(s->r[i].lo, a, klen) <= 0 &&
		    memcmp(a, s->r[i].hi, klen) <= 0)
			return 1;
	return 0;
}

/* The IPv6 forms policy/ reads an IPv4 address out of (policy-int.h),
 * with salt in the bits the form leaves free. */
enum v4_form {
	F_COMPAT, F_TRANSLATED, F_NAT64, F_NAT64_LOCAL, F_6TO4, F_TEREDO,
	F__COUNT
};

static void
embed(enum v4_form f, const uint8_t *v4, uint8_t salt, struct pol_addr *a)
{
	int i;

	memset(a, 0, sizeof(*a));
	a->family = AF_INET6;
	switch (f) {
	case F_COMPAT:
		memcpy(a->a + 12, v4, 4);
		break;
	case F_TRANSLATED:
		a->a[8] = a->a[9] = 0xff;
		memcpy(a->a + 12, v4, 4);
		break;
	case F_NAT64:
	case F_NAT64_LOCAL:
		a->a[1] = 0x64;
		a->a[2] = 0xff;
		a->a[3] = 0x9b;
		if (f == F_NAT64_LOCAL) {
			a->a[5] = 1;
			memset(a->a + 6, salt, 6);
		}
		memcpy(a->a + 12, v4, 4);
		break;
	case F_6TO4:
		a->a[0] = 0x20;
		a->a[1] = 0x02;
		memcpy(a->a + 2, v4, 4);
		memset(a->a + 6, salt, 10);
		break;
	case F_TEREDO:
		a->a[0] = 0x20;
		a->a[1] = 0x01;
		memset(a->a + 4, salt, 8);   /* server, flags, port */
		for (i = 0; i < 4; i++)
			a->a[12 + i] = (uint8_t)~v4[i];
		break;
	default:
		fail_msg("form %d", (int)f);
	}
}

static void
v4_step(uint8_t *a, int dir)
{
	int i;

	/* +1 or -1, wrapping: the neighbours of a range's ends */
	for (i = 3; i >= 0; i--) {
		a[i] = (uint8_t)(a[i] + dir);
		if (a[i] != (dir > 0 ? 0 : 0xff))
			break;
	}
}

/* What the kernel does with a destination of uid's connections: the
 * self guard accepts allow and resolvers, then drops refused. */
static int
guard_drops(const struct fw_ruleset *rs, const struct pol_addr *a)
{
	int v6 = a->family == AF_INET6;

	if (set_has(set_named(rs, v6 ? "allow6" : "allow4"), a->a) ||
	    set_has(set_named(rs, v6 ? "resolvers6" : "resolvers4"), a->a))
		return 0;
	return set_has(set_named(rs, v6 ? "refused6" : "refused4"), a->a);
}

static void
check_agrees(const char *name)
{
	const char *dir = getenv("SLUICE_SRCDIR");
	char path[4096], err[512], txt[64];
	struct fw_config fc;
	struct fw_ruleset *rs;
	struct pol_config *pc;
	const struct fw_set *r4;
	uint8_t (*probe)[4];
	size_t nprobe = 0, i, k;
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
	/* the proxy's side: the same allow and deny lists */
	pc = pol_config_new();
	assert_non_null(pc);
	for (i = 0; i < c->nallow_cidrs; i++)
		assert_int_equal(pol_config_add_cidr(pc, c->allow_cidrs[i], 1),
		    0);
	for (i = 0; i < c->ndeny_cidrs; i++)
		assert_int_equal(pol_config_add_cidr(pc, c->deny_cidrs[i], 0),
		    0);

	/* IPv4 addresses to try: both ends of every refused range and
	 * their neighbours outside, and a grid through the whole space */
	r4 = set_named(rs, "refused4");
	probe = calloc(4 * r4->n + 3 * 256 + 2, sizeof(*probe));
	assert_non_null(probe);
	for (i = 0; i < r4->n; i++) {
		memcpy(probe[nprobe++], r4->r[i].lo, 4);
		memcpy(probe[nprobe++], r4->r[i].hi, 4);
		memcpy(probe[nprobe], r4->r[i].lo, 4);
		v4_step(probe[nprobe++], -1);
		memcpy(probe[nprobe], r4->r[i].hi, 4);
		v4_step(probe[nprobe++], 1);
	}
	for (i = 0; i < 256; i++) {
		const uint8_t g[3][4] = { { (uint8_t)i, 0, 0, 1 },
		    { (uint8_t)i, 128, 7, 9 }, { (uint8_t)i, 255, 255, 254 } };

		for (k = 0; k < 3; k++)
			memcpy(probe[nprobe++], g[k], 4);
	}
	memcpy(probe[nprobe++], (const uint8_t[]){ 8, 8, 8, 8 }, 4);
	memcpy(probe[nprobe++], (const uint8_t[]){ 169, 254, 169, 254 }, 4);

	for (i = 0; i < nprobe; i++) {
		struct pol_addr v4, v6;
		int pol_refuses, f;
		uint8_t salt;

		memset(&v4, 0, sizeof(v4));
		v4.family = AF_INET;
		memcpy(v4.a, probe[i], 4);
		pol_addr_format(&v4, txt, sizeof(txt));
		pol_refuses = pol_check_addr(pc, &v4, NULL) != POL_R_NONE;
		if (pol_refuses != guard_drops(rs, &v4))
			fail_msg("%s: %s: policy %s, firewall %s", name, txt,
			    pol_refuses ? "refuses" : "admits",
			    pol_refuses ? "admits" : "drops");
		for (f = 0; f < F__COUNT; f++) {
			for (salt = 0; salt < 2; salt++) {
				embed((enum v4_form)f, probe[i],
				    salt ? 0x5a : 0, &v6);
				pol_addr_format(&v6, txt, sizeof(txt));
				pol_refuses = pol_check_addr(pc, &v6, NULL) !=
				    POL_R_NONE;
				if (pol_refuses && !guard_drops(rs, &v6))
					fail_msg("%s: %s: policy refuses, "
					    "firewall admits", name, txt);
				/* Teredo: the firewall drops the whole
				 * prefix (model.c says why) */
				if (!pol_refuses && f != F_TEREDO &&
				    guard_drops(rs, &v6))
					fail_msg("%s: %s: policy admits, "
					    "firewall drops", name, txt);
			}
		}
	}
	free(probe);
	pol_config_free(pc);
	cfg_free(c);
	fw_free(rs);
}

static void
test_guard_agrees_with_policy(void **state)
{
	(void)state;
	check_agrees("self");
	check_agrees("full");
	check_agrees("update");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_text),
		cmocka_unit_test(test_golden_netlink),
		cmocka_unit_test(test_golden_set_update),
		cmocka_unit_test(test_set_update_split),
		cmocka_unit_test(test_cidr_parse),
		cmocka_unit_test(test_normalise),
		cmocka_unit_test(test_empty_and_errors),
		cmocka_unit_test(test_ifnames),
		cmocka_unit_test(test_guard_agrees_with_policy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
