/*
 * render.c: the ruleset as `nft list table` prints it (nft 1.0.6).
 *
 * The text is byte for byte what nft shows after fw_apply, so the
 * namespace test can compare the kernel's view with it, and it loads
 * with `nft -f` for admins who want to inspect or stage it.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>

#include "firewall/fw-int.h"

static const char *const key_type[] = {
	[FW_KEY_V4] = "ipv4_addr",
	[FW_KEY_V6] = "ipv6_addr",
	[FW_KEY_PORT] = "inet_service",
	[FW_KEY_IFNAME] = "ifname",
};

/* nft wraps element lists by key width: so many per line. */
static size_t
per_line(enum fw_key k)
{
	switch (k) {
	case FW_KEY_V4:
		return 2;
	case FW_KEY_V6:
		return 1;
	case FW_KEY_PORT:
		return 5;
	case FW_KEY_IFNAME:
		return 1;
	}
	return 1;
}

static void
render_set(FILE *f, const struct fw_set *s)
{
	size_t i;

	fprintf(f, "\tset %s {\n\t\ttype %s\n", s->name, key_type[s->key]);
	if (s->key != FW_KEY_PORT)
		fprintf(f, "\t\tflags interval\n");
	if (s->n > 0) {
		fprintf(f, "\t\telements = { ");
		for (i = 0; i < s->n; i++) {
			char buf[100];

			if (i > 0)
				fprintf(f, i % per_line(s->key) == 0 ?
				    ",\n\t\t\t     " : ", ");
			fw_range_format(s->key, &s->r[i], buf, sizeof(buf));
			fputs(buf, f);
		}
		fprintf(f, " }\n");
	}
	fprintf(f, "\t}\n");
}

static void
render_term(FILE *f, const struct fw_ruleset *rs, const struct fw_term *t)
{
	const struct fw_set *s = t->set >= 0 ? &rs->sets[t->set] : NULL;

	switch (t->kind) {
	case FW_T_CT_EST:
		fprintf(f, "ct state established,related ");
		break;
	case FW_T_SKUID:
		fprintf(f, "meta skuid %u ", t->uid);
		break;
	case FW_T_SADDR_SET:
	case FW_T_DADDR_SET:
		fprintf(f, "%s %s @%s ", fw_set_family_v6(s) ? "ip6" : "ip",
		    t->kind == FW_T_SADDR_SET ? "saddr" : "daddr", s->name);
		break;
	case FW_T_TCP_DPORT_SET:
		fprintf(f, "tcp dport @%s ", s->name);
		break;
	case FW_T_IIFNAME_SET:
		fprintf(f, "iifname @%s ", s->name);
		break;
	case FW_T_ICMPV6_TYPE:
		/* nft names the types it knows; these are the ones built */
		if (t->uid == FW_ICMPV6_ND_NS)
			fprintf(f, "icmpv6 type nd-neighbor-solicit ");
		else if (t->uid == FW_ICMPV6_ND_NA)
			fprintf(f, "icmpv6 type nd-neighbor-advert ");
		else
			fprintf(f, "icmpv6 type %u ", t->uid);
		break;
	}
}

static void
render_chain(FILE *f, const struct fw_ruleset *rs, size_t ci)
{
	const struct fw_chain *c = &rs->chains[ci];
	size_t i, j;

	fprintf(f, "\tchain %s {\n", c->name);
	fprintf(f, "\t\ttype %s hook %s priority %s; policy accept;\n",
	    c->nat ? "nat" : "filter", c->hook_name,
	    c->nat ? "dstnat" : "filter");
	for (i = 0; i < rs->nrules; i++) {
		const struct fw_rule *r = &rs->rules[i];

		if (r->chain != (int)ci)
			continue;
		fprintf(f, "\t\t");
		for (j = 0; j < r->nt; j++)
			render_term(f, rs, &r->t[j]);
		if (r->verdict == FW_REDIRECT)
			fprintf(f, "counter packets 0 bytes 0 redirect to "
			    ":%u\n", (unsigned)rs->redirect_port);
		else
			fprintf(f, "counter packets 0 bytes 0 %s\n",
			    r->verdict == FW_ACCEPT ? "accept" : "drop");
	}
	fprintf(f, "\t}\n");
}

char *
fw_render(const struct fw_ruleset *rs)
{
	char *out = NULL;
	size_t len = 0, i;
	int first = 1;
	FILE *f;

	f = open_memstream(&out, &len);
	if (f == NULL)
		return NULL;
	fprintf(f, "table inet %s {\n", rs->table);
	for (i = 0; i < rs->nsets; i++) {
		if (!rs->sets[i].used)
			continue;
		if (!first)
			fputc('\n', f);
		first = 0;
		render_set(f, &rs->sets[i]);
	}
	for (i = 0; i < rs->nchains; i++) {
		if (!first)
			fputc('\n', f);
		first = 0;
		render_chain(f, rs, i);
	}
	fprintf(f, "}\n");
	if (ferror(f)) {
		fclose(f);
		free(out);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
