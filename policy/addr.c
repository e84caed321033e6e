/*
 * addr.c: strict address literals and their intrinsic classes.
 *
 * Every literal target and every resolved answer goes through
 * pol_addr_classify, so the one question "may we dial this?" has one
 * answer.  Anything not known to be globally reachable unicast is refused;
 * IPv6 forms that carry an IPv4 address are judged by that address.
 */
#include "sluice-config.h"

#include <sys/socket.h>
#include <arpa/inet.h>
#include <string.h>

#include "policy/policy-int.h"

static const char *const class_names[POL_AC__COUNT] = {
	[POL_AC_PUBLIC] = "public",
	[POL_AC_LOOPBACK] = "loopback",
	[POL_AC_UNSPECIFIED] = "unspecified",
	[POL_AC_LINK_LOCAL] = "link_local",
	[POL_AC_PRIVATE] = "private",
	[POL_AC_CGNAT] = "cgnat",
	[POL_AC_MULTICAST] = "multicast",
	[POL_AC_BROADCAST] = "broadcast",
	[POL_AC_RESERVED] = "reserved",
	[POL_AC_DOCUMENTATION] = "documentation",
	[POL_AC_BENCHMARK] = "benchmark",
	[POL_AC_METADATA] = "metadata",
	[POL_AC_HOST_OWN] = "host_own",
	[POL_AC_EMBEDDED] = "embedded",
};

const char *
pol_addr_class_name(enum pol_addr_class c)
{
	if ((int)c < 0 || c >= POL_AC__COUNT)
		return "unknown";
	return class_names[c];
}

/* ------------------------------------------------------------------ */
/* Parsing */

/*
 * Exactly four decimal octets, each "0" or 1..255 without a leading zero.
 * inet_aton would accept 127.1, 0x7f.1, 0177.0.0.1 and 2130706433, all
 * of which other parsers read differently: refusing them is the point.
 */
static int
parse_v4(const char *s, size_t len, uint8_t out[4])
{
	size_t i = 0;
	int part;

	for (part = 0; part < 4; part++) {
		unsigned v = 0;
		size_t start = i;

		if (part > 0) {
			if (i >= len || s[i] != '.')
				return -1;
			start = ++i;
		}
		while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 3)
			v = v * 10 + (unsigned)(s[i++] - '0');
		if (i == start || v > 255)
			return -1;
		if (s[start] == '0' && i - start > 1)
			return -1;
		out[part] = (uint8_t)v;
	}
	return i == len ? 0 : -1;
}

static int
parse_v6(const char *s, size_t len, uint8_t out[16])
{
	char buf[INET6_ADDRSTRLEN];
	size_t i;

	if (len == 0 || len >= sizeof(buf))
		return -1;
	/* inet_pton needs a C string; refuse anything it might stop at or
	 * treat specially (zone ids, brackets, NUL). */
	for (i = 0; i < len; i++) {
		char ch = s[i];

		if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
		    (ch >= 'A' && ch <= 'F') || ch == ':' || ch == '.'))
			return -1;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	return inet_pton(AF_INET6, buf, out) == 1 ? 0 : -1;
}

int
pol_addr_parse(const char *s, size_t len, struct pol_addr *out)
{
	struct pol_addr a;

	if (s == NULL || out == NULL)
		return -1;
	memset(&a, 0, sizeof(a));
	if (memchr(s, ':', len) != NULL) {
		if (parse_v6(s, len, a.a) < 0)
			return -1;
		a.family = AF_INET6;
	} else {
		if (parse_v4(s, len, a.a) < 0)
			return -1;
		a.family = AF_INET;
	}
	*out = a;
	return 0;
}

char *
pol_addr_format(const struct pol_addr *a, char *buf, size_t len)
{
	if (buf == NULL || len == 0)
		return buf;
	buf[0] = '\0';
	if (a == NULL || (a->family != AF_INET && a->family != AF_INET6))
		return buf;
	if (a->family == AF_INET && len >= 16) {
		/* by hand: glibc's inet_ntop goes through sprintf, and two
		 * log records per request format three or four addresses */
		char *p = buf;
		int i;

		for (i = 0; i < 4; i++) {
			unsigned v = a->a[i];

			if (i > 0)
				*p++ = '.';
			if (v >= 100)
				*p++ = (char)('0' + v / 100);
			if (v >= 10)
				*p++ = (char)('0' + v / 10 % 10);
			*p++ = (char)('0' + v % 10);
		}
		*p = '\0';
		return buf;
	}
	if (inet_ntop(a->family, a->a, buf, (socklen_t)len) == NULL)
		buf[0] = '\0';
	return buf;
}

/* ------------------------------------------------------------------ */
/* IPv4 classes */

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int
in_v4(uint32_t a, uint32_t net, unsigned len)
{
	uint32_t mask = len == 0 ? 0 : 0xffffffffu << (32 - len);

	return (a & mask) == net;
}

/* The metadata endpoints are checked before the broader ranges they sit
 * in (link-local, CGNAT, IETF special, public), so logs name them. */
static const uint32_t metadata_v4[] = {
	0xa9fea9feu,  /* 169.254.169.254: AWS, GCP, Azure, OpenStack, ... */
	0xa9feaa02u,  /* 169.254.170.2: AWS ECS task credentials */
	0x646464c8u,  /* 100.100.100.200: Alibaba Cloud */
	0xc00000c0u,  /* 192.0.0.192: Oracle Cloud */
	0xa83f8110u,  /* 168.63.129.16: Azure WireServer (public-looking) */
};

struct v4_range {
	uint32_t net;
	uint8_t len;
	uint8_t cls;
};

/* First match wins, so narrower ranges precede the ones holding them. */
static const struct v4_range v4_ranges[] = {
	{ 0x00000000u, 32, POL_AC_UNSPECIFIED },   /* 0.0.0.0 */
	{ 0x00000000u, 8, POL_AC_RESERVED },       /* 0/8 "this network" */
	{ 0x0a000000u, 8, POL_AC_PRIVATE },        /* 10/8 */
	{ 0x64400000u, 10, POL_AC_CGNAT },         /* 100.64/10 */
	{ 0x7f000000u, 8, POL_AC_LOOPBACK },       /* 127/8 */
	{ 0xa9fe0000u, 16, POL_AC_LINK_LOCAL },    /* 169.254/16 */
	{ 0xac100000u, 12, POL_AC_PRIVATE },       /* 172.16/12 */
	{ 0xc0000000u, 24, POL_AC_RESERVED },      /* 192.0.0/24 IETF */
	{ 0xc0000200u, 24, POL_AC_DOCUMENTATION }, /* 192.0.2/24 */
	{ 0xc0586300u, 24, POL_AC_RESERVED },      /* 192.88.99/24 6to4 relay */
	{ 0xc0a80000u, 16, POL_AC_PRIVATE },       /* 192.168/16 */
	{ 0xc6120000u, 15, POL_AC_BENCHMARK },     /* 198.18/15 */
	{ 0xc6336400u, 24, POL_AC_DOCUMENTATION }, /* 198.51.100/24 */
	{ 0xcb007100u, 24, POL_AC_DOCUMENTATION }, /* 203.0.113/24 */
	{ 0xe0000000u, 4, POL_AC_MULTICAST },      /* 224/4 */
	{ 0xffffffffu, 32, POL_AC_BROADCAST },     /* 255.255.255.255 */
	{ 0xf0000000u, 4, POL_AC_RESERVED },       /* 240/4 */
};

static enum pol_addr_class
classify_v4(uint32_t a)
{
	size_t i;

	for (i = 0; i < sizeof(metadata_v4) / sizeof(*metadata_v4); i++)
		if (a == metadata_v4[i])
			return POL_AC_METADATA;
	for (i = 0; i < sizeof(v4_ranges) / sizeof(*v4_ranges); i++)
		if (in_v4(a, v4_ranges[i].net, v4_ranges[i].len))
			return (enum pol_addr_class)v4_ranges[i].cls;
	return POL_AC_PUBLIC;
}

/* ------------------------------------------------------------------ */
/* IPv6 */

static int
zero(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != 0)
			return 0;
	return 1;
}

static void
set_v4(struct pol_addr *v4, const uint8_t *p, int invert)
{
	int i;

	memset(v4, 0, sizeof(*v4));
	v4->family = AF_INET;
	for (i = 0; i < 4; i++)
		v4->a[i] = invert ? (uint8_t)~p[i] : p[i];
}

enum pol__emb
pol__addr_embedded_v4(const struct pol_addr *a, struct pol_addr *v4)
{
	const uint8_t *b = a->a;
	struct pol_addr tmp;

	if (v4 == NULL)
		v4 = &tmp;
	if (a->family != AF_INET6)
		return POL__EMB_NONE;
	if (zero(b, 10) && b[10] == 0xff && b[11] == 0xff) {
		set_v4(v4, b + 12, 0);
		return POL__EMB_MAPPED;
	}
	if (zero(b, 12)) {
		/* :: and ::1 are the v6 unspecified and loopback addresses,
		 * not compatible forms of 0.0.0.0 and 0.0.0.1. */
		if (zero(b + 12, 3) && b[15] <= 1)
			return POL__EMB_NONE;
		set_v4(v4, b + 12, 0);
		return POL__EMB_COMPAT;
	}
	if (zero(b, 8) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 &&
	    b[11] == 0) {
		set_v4(v4, b + 12, 0);
		return POL__EMB_TRANSLATED;
	}
	if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b &&
	    zero(b + 4, 8)) {
		set_v4(v4, b + 12, 0);
		return POL__EMB_NAT64;
	}
	if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b &&
	    b[4] == 0x00 && b[5] == 0x01) {
		/* RFC 8215 local-use: the prefix length is a local choice;
		 * read the /96 layout, the common one. */
		set_v4(v4, b + 12, 0);
		return POL__EMB_NAT64_LOCAL;
	}
	if (b[0] == 0x20 && b[1] == 0x02) {
		set_v4(v4, b + 2, 0);
		return POL__EMB_6TO4;
	}
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {
		/* Teredo stores the client address inverted (RFC 4380). */
		set_v4(v4, b + 12, 1);
		return POL__EMB_TEREDO;
	}
	return POL__EMB_NONE;
}

/* fd00:ec2::254, AWS IMDS over IPv6 (inside ULA, so checked first). */
static const uint8_t metadata_v6[][16] = {
	{ 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54 },
};

static int
in_v6(const uint8_t *a, const uint8_t *net, unsigned len)
{
	unsigned full = len / 8, rem = len % 8;

	if (memcmp(a, net, full) != 0)
		return 0;
	if (rem == 0)
		return 1;
	return ((a[full] ^ net[full]) & (uint8_t)(0xff << (8 - rem))) == 0;
}

struct v6_range {
	uint8_t net[16];
	uint8_t len;
	uint8_t cls;
};

/* Checked after the embedding forms; first match wins. */
static const struct v6_range v6_ranges[] = {
	{ { 0x20, 0x01, 0x00, 0x02 }, 48, POL_AC_BENCHMARK },     /* 2001:2::/48 */
	{ { 0x20, 0x01 }, 23, POL_AC_RESERVED },   /* 2001::/23 IETF protocol */
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32, POL_AC_DOCUMENTATION }, /* 2001:db8::/32 */
	{ { 0x3f, 0xff }, 20, POL_AC_DOCUMENTATION },             /* 3fff::/20 */
	{ { 0x5f, 0x00 }, 16, POL_AC_RESERVED },   /* 5f00::/16 SRv6 SIDs */
	{ { 0xfc }, 7, POL_AC_PRIVATE },           /* fc00::/7 ULA */
	{ { 0xfe, 0x80 }, 10, POL_AC_LINK_LOCAL }, /* fe80::/10 */
	{ { 0xfe, 0xc0 }, 10, POL_AC_RESERVED },   /* fec0::/10 site-local */
	{ { 0xff }, 8, POL_AC_MULTICAST },         /* ff00::/8 */
	/* Only 2000::/3 is global unicast; the rest of the space
	 * (::/8 including 100::/64 discard, ...) is reserved. */
};

static enum pol_addr_class
classify_v6(const struct pol_addr *a)
{
	const uint8_t *b = a->a;
	struct pol_addr v4;
	enum pol__emb emb;
	size_t i;

	if (zero(b, 15) && b[15] == 0)
		return POL_AC_UNSPECIFIED;
	if (zero(b, 15) && b[15] == 1)
		return POL_AC_LOOPBACK;
	for (i = 0; i < sizeof(metadata_v6) / sizeof(*metadata_v6); i++)
		if (memcmp(b, metadata_v6[i], 16) == 0)
			return POL_AC_METADATA;

	emb = pol__addr_embedded_v4(a, &v4);
	if (emb != POL__EMB_NONE) {
		if (classify_v4(be32(v4.a)) != POL_AC_PUBLIC)
			return POL_AC_EMBEDDED;
		switch (emb) {
		case POL__EMB_MAPPED:  /* dials the v4 address itself */
		case POL__EMB_NAT64:   /* the well-known prefix reaches it */
		case POL__EMB_6TO4:
		case POL__EMB_TEREDO:
			return POL_AC_PUBLIC;
		default:  /* deprecated or local-use, not global */
			return POL_AC_RESERVED;
		}
	}
	for (i = 0; i < sizeof(v6_ranges) / sizeof(*v6_ranges); i++)
		if (in_v6(b, v6_ranges[i].net, v6_ranges[i].len))
			return (enum pol_addr_class)v6_ranges[i].cls;
	if ((b[0] & 0xe0) != 0x20)
		return POL_AC_RESERVED;
	return POL_AC_PUBLIC;
}

enum pol_addr_class
pol_addr_classify(const struct pol_addr *a)
{
	if (a == NULL)
		return POL_AC_RESERVED;
	if (a->family == AF_INET)
		return classify_v4(be32(a->a));
	if (a->family == AF_INET6)
		return classify_v6(a);
	/* Not an address we could dial: never public. */
	return POL_AC_RESERVED;
}
