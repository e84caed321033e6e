/*
 * decide.c: the admin configuration and the two questions asked of it:
 * may this session reach this (host, port) (pol_decide), and may the
 * connection dial this address (pol_check_addr).
 */
#include "sluice-config.h"

#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy-int.h"

struct cidr {
	struct pol_addr net;   /* host bits are zero */
	unsigned len;
	int allow;
};

/*
 * The built-in registry list: the package indexes and the file hosts
 * they redirect to, for the ecosystems a sandbox installs from.  Only
 * hosts run by the registries themselves; general CDNs and code hosts
 * (github.com, storage.googleapis.com) stay out, since they would admit
 * arbitrary content and exfiltration.  Add more with "registries".
 */
static const char *const default_registries[] = {
	/* PyPI */
	"pypi.org", "files.pythonhosted.org",
	/* npm, Yarn */
	"registry.npmjs.org", "registry.yarnpkg.com",
	/* crates.io */
	"crates.io", "static.crates.io", "index.crates.io",
	/* Go modules: proxy and checksum database */
	"proxy.golang.org", "sum.golang.org",
	/* RubyGems (index., api. and friends) */
	"rubygems.org", "*.rubygems.org",
	/* Maven Central */
	"repo.maven.apache.org", "repo1.maven.org",
	/* Debian */
	"deb.debian.org", "security.debian.org",
	/* Ubuntu (country mirrors are cc.archive.ubuntu.com) */
	"archive.ubuntu.com", "security.ubuntu.com", "*.archive.ubuntu.com",
	"ports.ubuntu.com",
	/* Alpine, NuGet, Packagist */
	"dl-cdn.alpinelinux.org", "api.nuget.org", "repo.packagist.org",
};

static void
ports_set(struct port_set *p, const uint16_t *ports, size_t n)
{
	if (n > 0)
		memcpy(p->ports, ports, n * sizeof(*ports));
	p->n = n;
}

static int
port_in(const struct port_set *p, uint16_t port)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if (p->ports[i] == port)
			return 1;
	return 0;
}

struct pol_config *
pol_config_new(void)
{
	static const uint16_t web[] = { 443, 80 };
	struct pol_config *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->registries = pol_hostset_new();
	c->deny_hosts = pol_hostset_new();
	if (c->registries == NULL || c->deny_hosts == NULL) {
		pol_config_free(c);
		return NULL;
	}
	ports_set(&c->reg_ports, web, 2);
	ports_set(&c->pub_ports, web, 2);
	return c;
}

void
pol_config_free(struct pol_config *c)
{
	if (c == NULL)
		return;
	pol_hostset_free(c->registries);
	pol_hostset_free(c->deny_hosts);
	free(c->cidrs);
	free(c->host_addrs);
	pol__rules_free(c->rules);
	free(c);
}


int
pol_config_add_registry(struct pol_config *c, const char *pattern)
{
	return c != NULL ? pol_hostset_add(c->registries, pattern) : -1;
}

int
pol_config_add_default_registries(struct pol_config *c)
{
	size_t i;

	for (i = 0; i < sizeof(default_registries) /
	    sizeof(*default_registries); i++)
		if (pol_config_add_registry(c, default_registries[i]) < 0)
			return -1;
	return 0;
}

int
pol_config_add_deny_host(struct pol_config *c, const char *pattern)
{
	return c != NULL ? pol_hostset_add(c->deny_hosts, pattern) : -1;
}

size_t
pol_config_registry_count(const struct pol_config *c)
{
	return c != NULL ? pol_hostset_count(c->registries) : 0;
}

int
pol_config_set_ports(struct pol_config *c, enum pol_tier t,
    const uint16_t *ports, size_t n)
{
	struct port_set *p;
	size_t i;

	if (c == NULL || n > PORTS_MAX || (n > 0 && ports == NULL))
		return -1;
	if (t == POL_TIER_REGISTRIES)
		p = &c->reg_ports;
	else if (t == POL_TIER_PUBLIC)
		p = &c->pub_ports;
	else
		return -1;
	for (i = 0; i < n; i++)
		if (ports[i] == 0)
			return -1;
	ports_set(p, ports, n);
	return 0;
}

/* A mapped address (::ffff:a.b.c.d) is the IPv4 address on the wire;
 * store and compare it as such so v4 lists cover both spellings. */
static struct pol_addr
unmap(const struct pol_addr *a)
{
	struct pol_addr v4;

	if (pol__addr_embedded_v4(a, &v4) == POL__EMB_MAPPED)
		return v4;
	return *a;
}

int
pol_config_add_host_addr(struct pol_config *c, const struct pol_addr *a)
{
	struct pol_addr *p;

	if (c == NULL || a == NULL ||
	    (a->family != AF_INET && a->family != AF_INET6))
		return -1;
	p = realloc(c->host_addrs, (c->n_host_addrs + 1) * sizeof(*p));
	if (p == NULL)
		return -1;
	c->host_addrs = p;
	c->host_addrs[c->n_host_addrs++] = unmap(a);
	return 0;
}

/* ------------------------------------------------------------------ */
/* CIDR lists */

static int
prefix_match(const struct pol_addr *a, const struct pol_addr *net,
    unsigned len)
{
	unsigned full = len / 8, rem = len % 8;

	if (a->family != net->family || memcmp(a->a, net->a, full) != 0)
		return 0;
	return rem == 0 ||
	    ((a->a[full] ^ net->a[full]) & (uint8_t)(0xff << (8 - rem))) == 0;
}

static int
host_bits_zero(const struct pol_addr *a, unsigned len)
{
	unsigned bits = a->family == AF_INET ? 32 : 128, i;

	for (i = len; i < bits; i++)
		if (a->a[i / 8] & (0x80 >> (i % 8)))
			return 0;
	return 1;
}

int
pol_config_add_cidr(struct pol_config *c, const char *cidr, int allow)
{
	const char *slash;
	struct pol_addr net;
	struct cidr *p;
	size_t alen, i;
	unsigned len, max;

	if (c == NULL || cidr == NULL)
		return -1;
	slash = strchr(cidr, '/');
	alen = slash != NULL ? (size_t)(slash - cidr) : strlen(cidr);
	if (pol_addr_parse(cidr, alen, &net) < 0)
		return -1;
	max = net.family == AF_INET ? 32 : 128;
	len = max;
	if (slash != NULL) {
		const char *d = slash + 1;

		/* Decimal, no sign, no leading zeros ("0" alone is fine). */
		if (d[0] == '\0' || (d[0] == '0' && d[1] != '\0') ||
		    strlen(d) > 3)
			return -1;
		for (len = 0, i = 0; d[i] != '\0'; i++) {
			if (d[i] < '0' || d[i] > '9')
				return -1;
			len = len * 10 + (unsigned)(d[i] - '0');
		}
		if (len > max)
			return -1;
	}
	/* "10.0.0.1/8" is ambiguous (a typo for /32, or for 10.0.0.0/8?):
	 * refused rather than masked. */
	if (!host_bits_zero(&net, len))
		return -1;
	if (net.family == AF_INET6 && len >= 96 &&
	    pol__addr_embedded_v4(&net, NULL) == POL__EMB_MAPPED) {
		net = unmap(&net);
		len -= 96;
	}
	p = realloc(c->cidrs, (c->n_cidrs + 1) * sizeof(*p));
	if (p == NULL)
		return -1;
	c->cidrs = p;
	c->cidrs[c->n_cidrs].net = net;
	c->cidrs[c->n_cidrs].len = len;
	c->cidrs[c->n_cidrs].allow = allow != 0;
	c->n_cidrs++;
	return 0;
}

enum cidr_verdict { CIDR_NONE, CIDR_DENY, CIDR_ALLOW };

/* Most specific prefix wins; on equal prefixes deny wins.  A linear scan:
 * admin CIDR lists are short, and this runs once per dialed address. */
static enum cidr_verdict
cidr_lookup(const struct pol_config *c, const struct pol_addr *a)
{
	enum cidr_verdict v = CIDR_NONE;
	unsigned best = 0;
	size_t i;

	for (i = 0; i < c->n_cidrs; i++) {
		const struct cidr *e = &c->cidrs[i];

		if (!prefix_match(a, &e->net, e->len))
			continue;
		if (v == CIDR_NONE || e->len > best ||
		    (e->len == best && !e->allow)) {
			v = e->allow ? CIDR_ALLOW : CIDR_DENY;
			best = e->len;
		}
	}
	return v;
}

/*
 * The verdict of the CIDR lists for an address.  Besides the address
 * itself, a deny covering the IPv4 address an IPv6 form embeds also
 * applies: denying 10.0.0.0/8 must not be undone by 2002:a00:1::.
 * (An IPv4 allow does not admit such forms; mapped ones are IPv4.)
 */
static enum cidr_verdict
cidr_check(const struct pol_config *c, const struct pol_addr *a)
{
	struct pol_addr eff = unmap(a), v4;
	enum pol__emb emb = pol__addr_embedded_v4(a, &v4);

	if (emb != POL__EMB_NONE && emb != POL__EMB_MAPPED &&
	    cidr_lookup(c, &v4) == CIDR_DENY)
		return CIDR_DENY;
	return cidr_lookup(c, &eff);
}

static int
is_host_own(const struct pol_config *c, const struct pol_addr *a)
{
	struct pol_addr eff = unmap(a), v4;
	int emb = pol__addr_embedded_v4(a, &v4) != POL__EMB_NONE;
	size_t i;

	for (i = 0; i < c->n_host_addrs; i++) {
		const struct pol_addr *h = &c->host_addrs[i];
		size_t n = h->family == AF_INET ? 4 : 16;

		if (h->family == eff.family && memcmp(h->a, eff.a, n) == 0)
			return 1;
		if (emb && h->family == AF_INET && memcmp(h->a, v4.a, 4) == 0)
			return 1;
	}
	return 0;
}

enum pol_reason
pol_check_addr(const struct pol_config *c, const struct pol_addr *a,
    enum pol_addr_class *cls)
{
	enum pol_addr_class k;
	enum cidr_verdict v = CIDR_NONE;

	if (a == NULL || (a->family != AF_INET && a->family != AF_INET6)) {
		if (cls != NULL)
			*cls = POL_AC_RESERVED;
		return POL_R_PRIVATE_ADDRESS;
	}
	k = pol_addr_classify(a);
	if (c != NULL) {
		if (is_host_own(c, a))
			k = POL_AC_HOST_OWN;
		v = cidr_check(c, a);
	}
	if (cls != NULL)
		*cls = k;
	if (v == CIDR_DENY)
		return POL_R_ADMIN_DENY;
	if (v == CIDR_ALLOW || k == POL_AC_PUBLIC)
		return POL_R_NONE;
	return POL_R_PRIVATE_ADDRESS;
}

/* ------------------------------------------------------------------ */
/* The decision */

static int
registry_match(const struct pol_config *c, const struct pol_target *t)
{
	/* Port 0 never occurs in a target: an empty registries port list
	 * must admit no portless entry, while n_default 0 would mean "any". */
	static const uint16_t none[] = { 0 };
	const struct port_set *p = &c->reg_ports;

	if (p->n == 0)
		return pol_hostset_match(c->registries, t->host, t->port,
		    none, 1);
	return pol_hostset_match(c->registries, t->host, t->port, p->ports,
	    p->n);
}

/* What the tier admits for this target, POL_RULE_NONE if nothing. */
static enum pol_rule
tier_admits(const struct pol_config *c, const struct pol_target *t,
    enum pol_tier tier)
{
	if (tier >= POL_TIER_REGISTRIES && registry_match(c, t))
		return POL_RULE_REGISTRIES;
	if (tier == POL_TIER_PUBLIC && port_in(&c->pub_ports, t->port))
		return POL_RULE_PUBLIC;
	return POL_RULE_NONE;
}

/*
 * A grant is an answer to a prompt, and prompts only arise under the
 * ceiling, so a grant never reaches past it: ceiling off admits no grant,
 * a registries ceiling only grants on registry hosts (any port, since an
 * app may grant a non-standard port), a public ceiling any host.  Without
 * this, lowering the ceiling would leave every old grant working.
 */
static int
ceiling_admits_grant(const struct pol_config *c, const struct pol_target *t,
    enum pol_tier ceiling)
{
	if (ceiling == POL_TIER_PUBLIC)
		return 1;
	if (ceiling == POL_TIER_REGISTRIES)
		return pol_hostset_match(c->registries, t->host, t->port,
		    NULL, 0);
	return 0;
}

static void
deny(struct pol_decision *out, enum pol_reason r)
{
	out->verdict = POL_DENY;
	out->reason = r;
	out->rule = POL_RULE_NONE;
}

void
pol_decide(const struct pol_config *c, const struct pol_state *st,
    const struct pol_session *s, const struct pol_target *t,
    struct pol_decision *out)
{
	enum pol_rule rule;
	int granted;

	if (out == NULL)
		return;
	memset(out, 0, sizeof(*out));
	out->tier = pol_session_tier(s);
	out->ceiling = pol_state_ceiling(st,
	    s != NULL ? pol_session_tenant(s) : NULL);
	out->effective = out->tier < out->ceiling ? out->tier : out->ceiling;
	if (c == NULL || t == NULL || t->host[0] == '\0' || t->port == 0) {
		deny(out, POL_R_BAD_TARGET);
		return;
	}
	granted = pol_session_has_grant(s, t->host, t->port);

	/* 1. A port nothing could ever admit. */
	if (!port_in(&c->reg_ports, t->port) &&
	    !port_in(&c->pub_ports, t->port) &&
	    !registry_match(c, t) && !granted) {
		deny(out, POL_R_PORT_NOT_ALLOWED);
		return;
	}
	/* 2. The administrator's deny lists. */
	if (pol_hostset_match(c->deny_hosts, t->host, t->port, NULL, 0) ||
	    (t->kind != POL_HOST_NAME && cidr_check(c, &t->addr) == CIDR_DENY)) {
		deny(out, POL_R_ADMIN_DENY);
		return;
	}
	/* 2b. The session's own denied names: refused at once, since its
	 * app named them (no prompt would say more). */
	if (pol_session_egress_denies(s, t->host, t->port)) {
		deny(out, POL_R_SESSION_DENIED);
		return;
	}
	/* 3. The effective tier. */
	rule = tier_admits(c, t, out->effective);
	if (rule != POL_RULE_NONE) {
		out->verdict = POL_ALLOW;
		out->rule = rule;
		return;
	}
	/* 4. "Allow for this chat", within the ceiling. */
	if (granted && ceiling_admits_grant(c, t, out->ceiling)) {
		out->verdict = POL_ALLOW;
		out->rule = POL_RULE_GRANT;
		return;
	}
	/* 4b. The session's own allowed names, on the public tier's ports,
	 * within the ceiling as a grant is. */
	if (pol_session_egress_allows(s, t->host, t->port, c->pub_ports.ports,
	    c->pub_ports.n) && ceiling_admits_grant(c, t, out->ceiling)) {
		out->verdict = POL_ALLOW;
		out->rule = POL_RULE_SESSION;
		return;
	}
	/* 5. The ceiling would admit it: ask. */
	if (tier_admits(c, t, out->ceiling) != POL_RULE_NONE) {
		out->verdict = POL_PROMPT;
		return;
	}
	/* 6. */
	deny(out, out->ceiling == POL_TIER_OFF ? POL_R_NETWORK_OFF :
	    POL_R_ABOVE_CEILING);
}
