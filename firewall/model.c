/*
 * model.c: from fw_config to the ruleset model (sets normalised).
 */
#include "sluice-config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/policy.h"
#include "firewall/fw-int.h"

#include <linux/netfilter.h>

/*
 * The refused ranges, kept here rather than derived from policy/ (whose
 * tables are classification code, not prefix lists).  Keep in step with
 * policy/addr.c; test_fw checks that the two agree.
 *
 * policy/ also judges IPv6 forms that embed an IPv4 address by the
 * address they carry.  The firewall follows it: the forms policy/ never
 * admits are listed whole below, and the NAT64 and 6to4 images of every
 * refused IPv4 range (and of deny_cidrs) are added by add_v4_images.
 * Teredo is the exception: its client address sits inverted in the low
 * 32 bits, after the server's, so no prefix matches "a refused client";
 * the firewall drops all of 2001::/32, stricter than policy/, which
 * admits a Teredo address of a public client (then upstream_failed).
 */
static const char *const refused_v4[] = {
	"0.0.0.0/8",            /* this network, 0.0.0.0 */
	"10.0.0.0/8",           /* RFC 1918 */
	"100.64.0.0/10",        /* CGNAT (holds Alibaba's 100.100.100.200) */
	"127.0.0.0/8",          /* loopback */
	"169.254.0.0/16",       /* link-local, most metadata endpoints */
	"172.16.0.0/12",        /* RFC 1918 */
	"192.0.0.0/24",         /* IETF protocol assignments, Oracle metadata */
	"192.0.2.0/24",         /* documentation */
	"192.88.99.0/24",       /* 6to4 relay anycast */
	"192.168.0.0/16",       /* RFC 1918 */
	"198.18.0.0/15",        /* benchmarking */
	"198.51.100.0/24",      /* documentation */
	"203.0.113.0/24",       /* documentation */
	"224.0.0.0/4",          /* multicast */
	"240.0.0.0/4",          /* reserved, broadcast */
	"168.63.129.16/32",     /* Azure WireServer, public-looking metadata */
};

static const char *const refused_v6[] = {
	"::/96",                /* unspecified, loopback, IPv4-compatible */
	"::ffff:0:0:0/96",      /* IPv4-translated (SIIT), not global */
	"64:ff9b:1::/48",       /* NAT64 local use (RFC 8215) */
	"100::/64",             /* discard */
	"2001::/32",            /* Teredo (see above) */
	"2001:2::/48",          /* benchmarking */
	"2001:db8::/32",        /* documentation */
	"3fff::/20",            /* documentation */
	"5f00::/16",            /* SRv6 SIDs */
	"fc00::/7",             /* ULA, AWS metadata fd00:ec2::254 */
	"fe80::/10",            /* link-local */
	"fec0::/10",            /* site-local */
	"ff00::/8",             /* multicast */
};

size_t
fw_key_len(enum fw_key k)
{
	switch (k) {
	case FW_KEY_V4:
		return 4;
	case FW_KEY_V6:
		return 16;
	case FW_KEY_PORT:
		return 2;
	case FW_KEY_IFNAME:
		return FW_IFNAME_MAX;
	}
	return 0;
}

int
fw_set_family_v6(const struct fw_set *s)
{
	return s->key == FW_KEY_V6;
}

int
fw_be_inc(uint8_t *a, size_t len)
{
	size_t i = len;

	while (i-- > 0)
		if (++a[i] != 0)
			return 0;
	return 1;
}

int
fw_cidr_parse(const char *s, enum fw_key *key, struct fw_range *out)
{
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	struct pol_addr a;
	unsigned long plen;
	size_t klen, i;
	char *end;

	if (pol_addr_parse(s, alen, &a) != 0)
		return -1;
	*key = a.family == AF_INET ? FW_KEY_V4 : FW_KEY_V6;
	klen = fw_key_len(*key);
	plen = klen * 8;
	if (slash != NULL) {
		if (slash[1] < '0' || slash[1] > '9' ||
		    (slash[1] == '0' && slash[2] != '\0'))
			return -1;
		plen = strtoul(slash + 1, &end, 10);
		if (*end != '\0' || plen > klen * 8)
			return -1;
	}
	memset(out, 0, sizeof(*out));
	for (i = 0; i < klen; i++) {
		unsigned bits = plen > i * 8 ? (unsigned)(plen - i * 8) : 0;
		uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff00 >> bits);

		/* masked, as nft does with "10.1.2.3/8" */
		out->lo[i] = a.a[i] & mask;
		out->hi[i] = (uint8_t)(out->lo[i] | (uint8_t)~mask);
	}
	return 0;
}

static int
range_cmp(const void *pa, const void *pb)
{
	const struct fw_range *a = pa, *b = pb;

	/* unused bytes are zero, so comparing all 16 orders any width */
	return memcmp(a->lo, b->lo, sizeof(a->lo));
}

size_t
fw_ranges_normalise(struct fw_range *r, size_t n, size_t klen)
{
	size_t i, out = 0;

	if (n == 0)
		return 0;
	qsort(r, n, sizeof(*r), range_cmp);
	for (i = 1; i < n; i++) {
		struct fw_range *cur = &r[out];
		uint8_t next[16];
		int wrap;

		memcpy(next, cur->hi, klen);
		wrap = fw_be_inc(next, klen);
		/* overlapping or adjacent: lo <= hi + 1 */
		if (wrap || memcmp(r[i].lo, next, klen) <= 0) {
			if (memcmp(r[i].hi, cur->hi, klen) > 0)
				memcpy(cur->hi, r[i].hi, klen);
			continue;
		}
		r[++out] = r[i];
	}
	return out + 1;
}

_Static_assert(FW_IFNAME_MAX == POL_IFNAME_MAX, "one interface name size");

int
fw_ifname_parse(const char *s, struct fw_range *out)
{
	char why[80];
	size_t n = strlen(s);

	if (pol_ifname_check(s, why, sizeof(why)) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	if (s[n - 1] == '*') {
		/* the prefix block, as nft encodes iifname "tap*" in a set */
		memcpy(out->lo, s, n - 1);
		memcpy(out->hi, s, n - 1);
		memset(out->hi + n - 1, 0xff, FW_IFNAME_MAX - (n - 1));
		return 0;
	}
	memcpy(out->lo, s, n);
	memcpy(out->hi, s, n);
	return 0;
}

size_t
fw_ifnames_normalise(struct fw_range *r, size_t n)
{
	size_t i, out = 0;

	if (n == 0)
		return 0;
	qsort(r, n, sizeof(*r), range_cmp);
	for (i = 1; i < n; i++) {
		/* names and prefix blocks nest or are apart: one starting
		 * inside the last kept is inside it */
		if (memcmp(r[i].lo, r[out].hi, FW_IFNAME_MAX) <= 0) {
			if (memcmp(r[i].hi, r[out].hi, FW_IFNAME_MAX) > 0)
				memcpy(r[out].hi, r[i].hi, FW_IFNAME_MAX);
			continue;
		}
		r[++out] = r[i];
	}
	return out + 1;
}

/* "name" or "name*" as nft prints an ifname range */
static void
ifname_format(const struct fw_range *r, char *buf, size_t len)
{
	size_t n = strnlen((const char *)r->lo, FW_IFNAME_MAX), i;
	int wild = 0;

	for (i = n; i < FW_IFNAME_MAX && r->hi[i] == 0xff; i++)
		;
	if (i == FW_IFNAME_MAX && n < FW_IFNAME_MAX)
		wild = 1;
	snprintf(buf, len, "\"%.*s%s\"", (int)n, (const char *)r->lo,
	    wild ? "*" : "");
}

static int
is_prefix(const struct fw_range *r, size_t klen, unsigned *plen)
{
	size_t i;
	unsigned len = 0;
	int host = 0;

	/* lo's bits up to len equal hi's; after len lo is 0 and hi is 1 */
	for (i = 0; i < klen * 8; i++) {
		int lb = (r->lo[i / 8] >> (7 - i % 8)) & 1;
		int hb = (r->hi[i / 8] >> (7 - i % 8)) & 1;

		if (!host && lb == hb) {
			len++;
			continue;
		}
		host = 1;
		if (lb != 0 || hb != 1)
			return 0;
	}
	*plen = len;
	return 1;
}

static void
addr_text(enum fw_key k, const uint8_t *a, char *buf, size_t len)
{
	if (k == FW_KEY_PORT) {
		snprintf(buf, len, "%u", (unsigned)(a[0] << 8 | a[1]));
		return;
	}
	if (inet_ntop(k == FW_KEY_V4 ? AF_INET : AF_INET6, a, buf,
	    (socklen_t)len) == NULL)
		snprintf(buf, len, "?");
}

void
fw_range_format(enum fw_key k, const struct fw_range *r, char *buf,
    size_t len)
{
	size_t klen = fw_key_len(k);
	char lo[48], hi[48];
	unsigned plen;

	if (k == FW_KEY_IFNAME) {
		ifname_format(r, buf, len);
		return;
	}
	addr_text(k, r->lo, lo, sizeof(lo));
	if (memcmp(r->lo, r->hi, klen) == 0) {
		snprintf(buf, len, "%s", lo);
		return;
	}
	if (k != FW_KEY_PORT && is_prefix(r, klen, &plen)) {
		snprintf(buf, len, "%s/%u", lo, plen);
		return;
	}
	addr_text(k, r->hi, hi, sizeof(hi));
	snprintf(buf, len, "%s-%s", lo, hi);
}

/* ------------------------------------------------------------------ */

static int
set_add(struct fw_ruleset *rs, const char *name, enum fw_key key)
{
	struct fw_set *s = &rs->sets[rs->nsets];

	snprintf(s->name, sizeof(s->name), "%s", name);
	s->key = key;
	s->id = (uint32_t)rs->nsets + 1;
	return (int)rs->nsets++;
}

static int
range_push(struct fw_set *s, const struct fw_range *r)
{
	struct fw_range *n = realloc(s->r, (s->n + 1) * sizeof(*n));

	if (n == NULL)
		return -1;
	s->r = n;
	s->r[s->n++] = *r;
	return 0;
}

/* Add CIDR list entries to the v4 or v6 set of a pair. */
static int
add_cidrs(struct fw_ruleset *rs, int set4, int set6, const char *what,
    const char *const *v, size_t n, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct fw_range r;
		enum fw_key k;

		if (fw_cidr_parse(v[i], &k, &r) != 0) {
			snprintf(err, errlen, "%s: bad CIDR \"%s\"", what, v[i]);
			return -1;
		}
		if (range_push(&rs->sets[k == FW_KEY_V4 ? set4 : set6], &r))
			goto oom;
	}
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/*
 * The IPv6 forms that carry each IPv4 range of set4 in a prefix, into
 * set6: NAT64 64:ff9b::/96 (RFC 6052, the address in the low 32 bits)
 * and 6to4 2002::/16 (RFC 3056, in bits 16-47).  policy/ refuses those
 * forms of a refused or denied IPv4 address and admits the others, so
 * the NAT64 of public addresses keeps working.  IPv4-mapped addresses
 * need nothing: the kernel sends them as IPv4, which set4 matches.
 */
static int
add_v4_images(struct fw_ruleset *rs, int set4, int set6)
{
	const struct fw_set *s4 = &rs->sets[set4];
	size_t i, n = s4->n;

	for (i = 0; i < n; i++) {
		const struct fw_range *v4 = &s4->r[i];
		struct fw_range r;

		memset(&r, 0, sizeof(r));
		r.lo[1] = r.hi[1] = 0x64;
		r.lo[2] = r.hi[2] = 0xff;
		r.lo[3] = r.hi[3] = 0x9b;
		memcpy(r.lo + 12, v4->lo, 4);
		memcpy(r.hi + 12, v4->hi, 4);
		if (range_push(&rs->sets[set6], &r) != 0)
			return -1;
		memset(&r, 0, sizeof(r));
		r.lo[0] = r.hi[0] = 0x20;
		r.lo[1] = r.hi[1] = 0x02;
		memcpy(r.lo + 2, v4->lo, 4);
		memcpy(r.hi + 2, v4->hi, 4);
		memset(r.hi + 6, 0xff, 10);
		if (range_push(&rs->sets[set6], &r) != 0)
			return -1;
	}
	return 0;
}

/* A resolver is "ip", "ip:port" or "[v6]:port"; the port is not kept:
 * the guard admits the configured DNS servers on any port. */
static int
add_resolvers(struct fw_ruleset *rs, int set4, int set6,
    const struct fw_config *fc, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < fc->nresolvers; i++) {
		const char *s = fc->resolvers[i], *end;
		struct pol_addr a;
		struct fw_range r;
		size_t len;

		if (s[0] == '[') {
			end = strchr(s, ']');
			s++;
			len = end ? (size_t)(end - s) : 0;
		} else {
			end = strchr(s, ':');
			/* two colons: a bare IPv6 address */
			if (end != NULL && strchr(end + 1, ':') != NULL)
				end = NULL;
			len = end ? (size_t)(end - s) : strlen(s);
		}
		if (len == 0 || pol_addr_parse(s, len, &a) != 0) {
			snprintf(err, errlen, "resolvers: bad address \"%s\"",
			    fc->resolvers[i]);
			return -1;
		}
		memset(&r, 0, sizeof(r));
		memcpy(r.lo, a.a, a.family == AF_INET ? 4 : 16);
		memcpy(r.hi, r.lo, sizeof(r.hi));
		if (range_push(&rs->sets[a.family == AF_INET ? set4 : set6],
		    &r) != 0) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	return 0;
}

static int
port_push(struct fw_set *s, uint16_t port)
{
	struct fw_range r;

	memset(&r, 0, sizeof(r));
	r.lo[0] = r.hi[0] = (uint8_t)(port >> 8);
	r.lo[1] = r.hi[1] = (uint8_t)port;
	return range_push(s, &r);
}

static int
add_ports(struct fw_set *s, const struct fw_config *fc)
{
	size_t i;

	for (i = 0; i < fc->nbroker_ports; i++)
		if (port_push(s, fc->broker_ports[i]) != 0)
			return -1;
	return 0;
}

static int
chain_add(struct fw_ruleset *rs, const char *name, int hook,
    const char *hook_name)
{
	struct fw_chain *c = &rs->chains[rs->nchains];

	c->name = name;
	c->hook = hook;
	c->hook_name = hook_name;
	c->nat = 0;
	return (int)rs->nchains++;
}

static void
rule_add(struct fw_ruleset *rs, int chain, enum fw_verdict v, size_t n,
    const struct fw_term *t)
{
	struct fw_rule *r = &rs->rules[rs->nrules++];
	size_t i;

	r->chain = chain;
	r->verdict = v;
	r->nt = n;
	for (i = 0; i < n; i++) {
		r->t[i] = t[i];
		if (t[i].kind == FW_T_SADDR_SET ||
		    t[i].kind == FW_T_DADDR_SET ||
		    t[i].kind == FW_T_IIFNAME_SET ||
		    t[i].kind == FW_T_TCP_DPORT_SET)
			rs->sets[t[i].set].used = 1;
	}
}

#define TERM_CT { FW_T_CT_EST, 0, -1 }
#define TERM_UID(u) { FW_T_SKUID, (u), -1 }
#define TERM_SRC(s) { FW_T_SADDR_SET, 0, (s) }
#define TERM_DST(s) { FW_T_DADDR_SET, 0, (s) }
#define TERM_TCP(s) { FW_T_TCP_DPORT_SET, 0, (s) }
#define TERM_ICMP6(type) { FW_T_ICMPV6_TYPE, (type), -1 }
#define TERM_IIF(s) { FW_T_IIFNAME_SET, 0, (s) }
#define RULE(rs, c, v, ...) do { \
	const struct fw_term t_[] = { __VA_ARGS__ }; \
	rule_add((rs), (c), (v), sizeof(t_) / sizeof(*t_), t_); \
} while (0)

struct set_ids {
	int refused4, refused6, allow4, allow6, dns4, dns6;
	int sandbox4, sandbox6, broker4, broker6, ports, redirect, ifaces;
};

/* The interface list into its set; entries were checked by config_keys.c,
 * but the helper gets them from the proxy, so again here. */
static int
add_ifnames(struct fw_ruleset *rs, int set, const struct fw_config *fc,
    char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < fc->nsandbox_interfaces; i++) {
		struct fw_range r;
		char why[120];

		if (pol_ifname_check(fc->sandbox_interfaces[i], why,
		    sizeof(why)) != 0 ||
		    fw_ifname_parse(fc->sandbox_interfaces[i], &r) != 0) {
			snprintf(err, errlen, "sandbox_interfaces: \"%.20s\": "
			    "%s", fc->sandbox_interfaces[i], why);
			return -1;
		}
		if (range_push(&rs->sets[set], &r) != 0) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	return 0;
}

static int
build_sets(struct fw_ruleset *rs, const struct fw_config *fc,
    struct set_ids *id, char *err, size_t errlen)
{
	id->allow4 = set_add(rs, "allow4", FW_KEY_V4);
	id->allow6 = set_add(rs, "allow6", FW_KEY_V6);
	id->dns4 = set_add(rs, "resolvers4", FW_KEY_V4);
	id->dns6 = set_add(rs, "resolvers6", FW_KEY_V6);
	id->refused4 = set_add(rs, "refused4", FW_KEY_V4);
	id->refused6 = set_add(rs, "refused6", FW_KEY_V6);
	id->sandbox4 = set_add(rs, "sandbox4", FW_KEY_V4);
	id->sandbox6 = set_add(rs, "sandbox6", FW_KEY_V6);
	id->broker4 = set_add(rs, "broker4", FW_KEY_V4);
	id->broker6 = set_add(rs, "broker6", FW_KEY_V6);
	id->ports = set_add(rs, "broker_ports", FW_KEY_PORT);
	id->redirect = set_add(rs, "redirect_ports", FW_KEY_PORT);
	id->ifaces = set_add(rs, "sandbox_ifaces", FW_KEY_IFNAME);

	if (add_cidrs(rs, id->refused4, id->refused6, "refused", refused_v4,
	    sizeof(refused_v4) / sizeof(*refused_v4), err, errlen) != 0 ||
	    add_cidrs(rs, id->refused4, id->refused6, "refused", refused_v6,
	    sizeof(refused_v6) / sizeof(*refused_v6), err, errlen) != 0 ||
	    add_cidrs(rs, id->refused4, id->refused6, "deny_cidrs",
	    fc->deny_cidrs, fc->ndeny_cidrs, err, errlen) != 0)
		return -1;
	if (add_v4_images(rs, id->refused4, id->refused6) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (add_cidrs(rs, id->allow4, id->allow6, "allow_cidrs",
	    fc->allow_cidrs, fc->nallow_cidrs, err, errlen) != 0 ||
	    add_cidrs(rs, id->sandbox4, id->sandbox6, "sandbox_subnets",
	    fc->sandbox_subnets, fc->nsandbox_subnets, err, errlen) != 0 ||
	    add_cidrs(rs, id->broker4, id->broker6, "broker_addrs",
	    fc->broker_addrs, fc->nbroker_addrs, err, errlen) != 0 ||
	    add_resolvers(rs, id->dns4, id->dns6, fc, err, errlen) != 0 ||
	    add_ifnames(rs, id->ifaces, fc, err, errlen) != 0)
		return -1;
	if (add_ports(&rs->sets[id->ports], fc) != 0 ||
	    (fc->transparent_port != 0 &&
	    (port_push(&rs->sets[id->ports], fc->transparent_port) != 0 ||
	    port_push(&rs->sets[id->redirect], 80) != 0 ||
	    port_push(&rs->sets[id->redirect], 443) != 0))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* sluiced's own new connections: allowed and resolvers first, then the
 * refused classes.  Established traffic (replies to clients of sluiced
 * on private addresses) is accepted before any of it. */
static void
build_self_guard(struct fw_ruleset *rs, const struct set_ids *id,
    uint32_t uid)
{
	int c = chain_add(rs, "output", NF_INET_LOCAL_OUT, "output");

	RULE(rs, c, FW_ACCEPT, TERM_CT);
	RULE(rs, c, FW_ACCEPT, TERM_UID(uid), TERM_DST(id->allow4));
	RULE(rs, c, FW_ACCEPT, TERM_UID(uid), TERM_DST(id->allow6));
	RULE(rs, c, FW_ACCEPT, TERM_UID(uid), TERM_DST(id->dns4));
	RULE(rs, c, FW_ACCEPT, TERM_UID(uid), TERM_DST(id->dns6));
	RULE(rs, c, FW_DROP, TERM_UID(uid), TERM_DST(id->refused4));
	RULE(rs, c, FW_DROP, TERM_UID(uid), TERM_DST(id->refused6));
}

static void
build_sandbox_guard(struct fw_ruleset *rs, const struct set_ids *id,
    int subnets, int ifaces)
{
	int in = chain_add(rs, "input", NF_INET_LOCAL_IN, "input");
	int fwd = chain_add(rs, "forward", NF_INET_FORWARD, "forward");
	int s4 = id->sandbox4, s6 = id->sandbox6, ifs = id->ifaces;
	int b4 = id->broker4, b6 = id->broker6;

	/* the broker ports on the addresses the broker listens on, not on
	 * every address of the host: another service sharing a port number
	 * on another address stays out of reach */
	if (subnets) {
		RULE(rs, in, FW_ACCEPT, TERM_SRC(s4), TERM_DST(b4),
		    TERM_TCP(id->ports));
		RULE(rs, in, FW_ACCEPT, TERM_SRC(s6), TERM_DST(b6),
		    TERM_TCP(id->ports));
		/* IPv6 address resolution is ICMPv6 and would meet the drop
		 * below: the sandbox's solicitation for the broker and its
		 * advertisement answering the broker's (both sent from its
		 * subnet address).  ARP is not IP and never reaches an inet
		 * hook; router discovery and DAD use link-local or
		 * unspecified sources, outside the subnets; ICMP errors
		 * from a sandbox would only concern connections the broker
		 * opens to it, and it opens none. */
		RULE(rs, in, FW_ACCEPT, TERM_SRC(s6),
		    TERM_ICMP6(FW_ICMPV6_ND_NS));
		RULE(rs, in, FW_ACCEPT, TERM_SRC(s6),
		    TERM_ICMP6(FW_ICMPV6_ND_NA));
		RULE(rs, in, FW_DROP, TERM_SRC(s4));
		RULE(rs, in, FW_DROP, TERM_SRC(s6));
	}
	if (ifaces) {
		/* whatever the source address (link-local, forged, or in
		 * no subnet at all): the interface the packet came in on
		 * decides.  Neighbour solicitations and advertisements may
		 * come from link-local or unspecified (DAD) sources here. */
		RULE(rs, in, FW_ACCEPT, TERM_IIF(ifs), TERM_DST(b4),
		    TERM_TCP(id->ports));
		RULE(rs, in, FW_ACCEPT, TERM_IIF(ifs), TERM_DST(b6),
		    TERM_TCP(id->ports));
		RULE(rs, in, FW_ACCEPT, TERM_IIF(ifs),
		    TERM_ICMP6(FW_ICMPV6_ND_NS));
		RULE(rs, in, FW_ACCEPT, TERM_IIF(ifs),
		    TERM_ICMP6(FW_ICMPV6_ND_NA));
		RULE(rs, in, FW_DROP, TERM_IIF(ifs));
	}

	/* the explicit drops come first so that even replies never reach
	 * another sandbox or a private address; each has its counter */
	if (subnets) {
		RULE(rs, fwd, FW_DROP, TERM_SRC(s4), TERM_DST(s4));
		RULE(rs, fwd, FW_DROP, TERM_SRC(s6), TERM_DST(s6));
		RULE(rs, fwd, FW_DROP, TERM_SRC(s4), TERM_DST(id->refused4));
		RULE(rs, fwd, FW_DROP, TERM_SRC(s6), TERM_DST(id->refused6));
		RULE(rs, fwd, FW_ACCEPT, TERM_SRC(s4), TERM_CT);
		RULE(rs, fwd, FW_ACCEPT, TERM_SRC(s6), TERM_CT);
		RULE(rs, fwd, FW_DROP, TERM_SRC(s4));
		RULE(rs, fwd, FW_DROP, TERM_SRC(s6));
	}
	if (ifaces) {
		if (subnets) {
			RULE(rs, fwd, FW_DROP, TERM_IIF(ifs), TERM_DST(s4));
			RULE(rs, fwd, FW_DROP, TERM_IIF(ifs), TERM_DST(s6));
		}
		RULE(rs, fwd, FW_DROP, TERM_IIF(ifs), TERM_DST(id->refused4));
		RULE(rs, fwd, FW_DROP, TERM_IIF(ifs), TERM_DST(id->refused6));
		RULE(rs, fwd, FW_ACCEPT, TERM_IIF(ifs), TERM_CT);
		RULE(rs, fwd, FW_DROP, TERM_IIF(ifs));
	}
}

/* Transparent mode: the sandboxes' web traffic goes to sluiced's
 * transparent listener on the address it came in on; the input guard
 * then sees the transparent port, which is among the broker ports. */
static void
build_redirect(struct fw_ruleset *rs, const struct set_ids *id,
    uint16_t port, int subnets, int ifaces)
{
	int c = chain_add(rs, "prerouting", NF_INET_PRE_ROUTING,
	    "prerouting");

	rs->chains[c].nat = 1;
	rs->redirect_port = port;
	if (subnets) {
		RULE(rs, c, FW_REDIRECT, TERM_SRC(id->sandbox4),
		    TERM_TCP(id->redirect));
		RULE(rs, c, FW_REDIRECT, TERM_SRC(id->sandbox6),
		    TERM_TCP(id->redirect));
	}
	if (ifaces)
		RULE(rs, c, FW_REDIRECT, TERM_IIF(id->ifaces),
		    TERM_TCP(id->redirect));
}

/* A plain set holds single keys: sort and drop repeats, never merge
 * neighbours into ranges. */
static size_t
ports_dedupe(struct fw_range *r, size_t n)
{
	size_t i, out = 0;

	if (n == 0)
		return 0;
	qsort(r, n, sizeof(*r), range_cmp);
	for (i = 1; i < n; i++)
		if (memcmp(r[i].lo, r[out].lo, 2) != 0)
			r[++out] = r[i];
	return out + 1;
}

static int
valid_table_name(const char *t)
{
	size_t i, n = strlen(t);

	if (n == 0 || n >= FW_TABLE_MAX)
		return 0;
	/* nft's identifier syntax, so the rendered text loads as is */
	for (i = 0; i < n; i++) {
		char ch = t[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    ch == '_' || (i > 0 && ((ch >= '0' && ch <= '9') ||
		    ch == '-'))))
			return 0;
	}
	return 1;
}

struct fw_ruleset *
fw_build(const struct fw_config *fc, char *err, size_t errlen)
{
	const char *table = fc->table ? fc->table : FW_DEFAULT_TABLE;
	struct fw_ruleset *rs;
	struct set_ids id;
	size_t i;
	int subnets, ifaces;

	if (!valid_table_name(table)) {
		snprintf(err, errlen, "table: bad name \"%s\"", table);
		return NULL;
	}
	if (fc->uid < -1 || fc->uid > (int64_t)UINT32_MAX - 1) {
		snprintf(err, errlen, "uid: out of range");
		return NULL;
	}
	rs = calloc(1, sizeof(*rs));
	if (rs == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(rs->table, sizeof(rs->table), "%s", table);
	if (build_sets(rs, fc, &id, err, errlen) != 0)
		goto fail;
	for (i = 0; i < rs->nsets; i++) {
		struct fw_set *s = &rs->sets[i];

		if (s->key == FW_KEY_PORT)
			s->n = ports_dedupe(s->r, s->n);
		else if (s->key == FW_KEY_IFNAME)
			s->n = fw_ifnames_normalise(s->r, s->n);
		else
			s->n = fw_ranges_normalise(s->r, s->n,
			    fw_key_len(s->key));
	}
	if (fc->uid >= 0)
		build_self_guard(rs, &id, (uint32_t)fc->uid);
	subnets = fc->nsandbox_subnets > 0;
	ifaces = fc->nsandbox_interfaces > 0;
	if (subnets || ifaces)
		build_sandbox_guard(rs, &id, subnets, ifaces);
	if ((subnets || ifaces) && fc->transparent_port != 0)
		build_redirect(rs, &id, fc->transparent_port, subnets, ifaces);
	return rs;
fail:
	fw_free(rs);
	return NULL;
}

void
fw_free(struct fw_ruleset *rs)
{
	size_t i;

	if (rs == NULL)
		return;
	for (i = 0; i < rs->nsets; i++)
		free(rs->sets[i].r);
	free(rs);
}

const char *
fw_table_name(const struct fw_ruleset *rs)
{
	return rs->table;
}

static int
set_same(const struct fw_set *a, const struct fw_set *b)
{
	size_t klen = fw_key_len(a->key), i;

	if (a->key != b->key || a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++)
		if (memcmp(a->r[i].lo, b->r[i].lo, klen) != 0 ||
		    memcmp(a->r[i].hi, b->r[i].hi, klen) != 0)
			return 0;
	return 1;
}

int
fw_set_changed(const struct fw_ruleset *a, const struct fw_ruleset *b,
    size_t si)
{
	return !set_same(&a->sets[si], &b->sets[si]);
}

/* Same table, chains, rules and declared sets: only elements differ. */
int
fw_sets_only(const struct fw_ruleset *a, const struct fw_ruleset *b)
{
	size_t i, j;

	if (strcmp(a->table, b->table) != 0 || a->nsets != b->nsets ||
	    a->nchains != b->nchains || a->nrules != b->nrules ||
	    a->redirect_port != b->redirect_port)
		return 0;
	for (i = 0; i < a->nsets; i++)
		if (strcmp(a->sets[i].name, b->sets[i].name) != 0 ||
		    a->sets[i].key != b->sets[i].key ||
		    a->sets[i].used != b->sets[i].used)
			return 0;
	for (i = 0; i < a->nchains; i++)
		if (strcmp(a->chains[i].name, b->chains[i].name) != 0 ||
		    a->chains[i].hook != b->chains[i].hook ||
		    a->chains[i].nat != b->chains[i].nat)
			return 0;
	for (i = 0; i < a->nrules; i++) {
		const struct fw_rule *x = &a->rules[i], *y = &b->rules[i];

		if (x->chain != y->chain || x->nt != y->nt ||
		    x->verdict != y->verdict)
			return 0;
		for (j = 0; j < x->nt; j++)
			if (x->t[j].kind != y->t[j].kind ||
			    x->t[j].uid != y->t[j].uid ||
			    x->t[j].set != y->t[j].set)
				return 0;
	}
	return 1;
}
