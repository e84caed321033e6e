/*
 * nl.c: the ruleset as libnftnl objects and one replace batch.
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "firewall/fw-int.h"

/* <linux/netfilter/nf_nat.h> pulls in <linux/in.h>, which clashes with
 * the libc headers; the flag is kernel ABI */
#ifndef NF_NAT_RANGE_PROTO_SPECIFIED
#define NF_NAT_RANGE_PROTO_SPECIFIED (1 << 1)
#endif

/* nft datatype ids (nftables include/datatype.h) */
#define NFT_TYPE_IPV4 7
#define NFT_TYPE_IPV6 8
#define NFT_TYPE_INET_SERVICE 13
#define NFT_TYPE_IFNAME 41

static int
add_expr(struct nftnl_rule *r, struct nftnl_expr *e)
{
	if (e == NULL)
		return -1;
	nftnl_rule_add_expr(r, e);
	return 0;
}

static struct nftnl_expr *
e_meta(uint32_t key)
{
	struct nftnl_expr *e = nftnl_expr_alloc("meta");

	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
	}
	return e;
}

static struct nftnl_expr *
e_cmp(uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("cmp");

	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
		nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	}
	return e;
}

static struct nftnl_expr *
e_payload(uint32_t base, uint32_t off, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("payload");

	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
	}
	return e;
}

static struct nftnl_expr *
e_lookup(const struct fw_set *s)
{
	struct nftnl_expr *e = nftnl_expr_alloc("lookup");

	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
		nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, s->name);
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, s->id);
		/* explicit, as the kernel reports it on read back */
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, 0);
	}
	return e;
}

/* ct state established,related: (state & (EST|REL)) != 0 */
static int
add_ct_established(struct nftnl_rule *r)
{
	uint32_t mask = NF_CT_STATE_BIT(IP_CT_ESTABLISHED) |
	    NF_CT_STATE_BIT(IP_CT_RELATED), zero = 0;
	struct nftnl_expr *e = nftnl_expr_alloc("ct");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	nftnl_rule_add_expr(r, e);
	e = nftnl_expr_alloc("bitwise");
	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, sizeof(uint32_t));
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, sizeof(mask));
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, sizeof(zero));
	nftnl_rule_add_expr(r, e);
	return add_expr(r, e_cmp(NFT_CMP_NEQ, &zero, sizeof(zero)));
}

struct deps {
	uint8_t nfproto;        /* 0: not yet checked in this rule */
	uint8_t l4proto;
};

/* "ip daddr" needs meta nfproto == ipv4 first, once per rule, as nft
 * emits it (a repeated check would print as "meta nfproto ipv4"). */
static int
add_nfproto(struct nftnl_rule *r, struct deps *d, uint8_t proto)
{
	if (d->nfproto == proto)
		return 0;
	d->nfproto = proto;
	if (add_expr(r, e_meta(NFT_META_NFPROTO)) != 0)
		return -1;
	return add_expr(r, e_cmp(NFT_CMP_EQ, &proto, 1));
}

static int
add_term(struct nftnl_rule *r, const struct fw_ruleset *rs,
    const struct fw_term *t, struct deps *d)
{
	const struct fw_set *s = t->set >= 0 ? &rs->sets[t->set] : NULL;
	uint8_t tcp = 6, icmp6 = 58, type;
	int v6;

	switch (t->kind) {
	case FW_T_CT_EST:
		return add_ct_established(r);
	case FW_T_SKUID:
		/* host order, like every meta value */
		if (add_expr(r, e_meta(NFT_META_SKUID)) != 0)
			return -1;
		return add_expr(r, e_cmp(NFT_CMP_EQ, &t->uid,
		    sizeof(t->uid)));
	case FW_T_SADDR_SET:
	case FW_T_DADDR_SET:
		v6 = fw_set_family_v6(s);
		if (add_nfproto(r, d, v6 ? NFPROTO_IPV6 : NFPROTO_IPV4) != 0)
			return -1;
		/* ip saddr +12, daddr +16; ip6 saddr +8, daddr +24 */
		if (add_expr(r, e_payload(NFT_PAYLOAD_NETWORK_HEADER,
		    v6 ? (t->kind == FW_T_SADDR_SET ? 8 : 24) :
		    (t->kind == FW_T_SADDR_SET ? 12 : 16), v6 ? 16 : 4)) != 0)
			return -1;
		return add_expr(r, e_lookup(s));
	case FW_T_TCP_DPORT_SET:
		if (d->l4proto != tcp) {
			d->l4proto = tcp;
			if (add_expr(r, e_meta(NFT_META_L4PROTO)) != 0 ||
			    add_expr(r, e_cmp(NFT_CMP_EQ, &tcp, 1)) != 0)
				return -1;
		}
		if (add_expr(r, e_payload(NFT_PAYLOAD_TRANSPORT_HEADER, 2,
		    2)) != 0)
			return -1;
		return add_expr(r, e_lookup(s));
	case FW_T_IIFNAME_SET:
		/* the name, IFNAMSIZ bytes NUL padded, into the lookup */
		if (add_expr(r, e_meta(NFT_META_IIFNAME)) != 0)
			return -1;
		return add_expr(r, e_lookup(s));
	case FW_T_ICMPV6_TYPE:
		/* nft's dependencies: nfproto ipv6 (unless an ip6 term gave
		 * it), l4proto ipv6-icmp, then the type byte at offset 0 */
		if (add_nfproto(r, d, NFPROTO_IPV6) != 0)
			return -1;
		if (d->l4proto != icmp6) {
			d->l4proto = icmp6;
			if (add_expr(r, e_meta(NFT_META_L4PROTO)) != 0 ||
			    add_expr(r, e_cmp(NFT_CMP_EQ, &icmp6, 1)) != 0)
				return -1;
		}
		if (add_expr(r, e_payload(NFT_PAYLOAD_TRANSPORT_HEADER, 0,
		    1)) != 0)
			return -1;
		type = (uint8_t)t->uid;
		return add_expr(r, e_cmp(NFT_CMP_EQ, &type, 1));
	}
	return -1;
}

/* redirect to :port: the port in a register (network order), then
 * redir with NF_NAT_RANGE_PROTO_SPECIFIED, as nft emits it (nft leaves
 * out proto_max, which the kernel takes as equal to proto_min) */
static int
add_redirect(struct nftnl_rule *r, uint16_t port)
{
	/* network order; <arpa/inet.h> clashes with <linux/netfilter.h> */
	uint8_t be[2] = { (uint8_t)(port >> 8), (uint8_t)port };
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
	nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, be, sizeof(be));
	nftnl_rule_add_expr(r, e);
	e = nftnl_expr_alloc("redir");
	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
	/* the kernel fills in max = min and reports both on read back */
	nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MAX, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_FLAGS,
	    NF_NAT_RANGE_PROTO_SPECIFIED);
	nftnl_rule_add_expr(r, e);
	return 0;
}

struct nftnl_rule *
fw_nl_rule(const struct fw_ruleset *rs, size_t ri)
{
	const struct fw_rule *fr = &rs->rules[ri];
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nftnl_expr *e;
	struct deps d = { 0, 0 };
	size_t i;

	if (r == NULL)
		return NULL;
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, rs->table);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, rs->chains[fr->chain].name);
	for (i = 0; i < fr->nt; i++)
		if (add_term(r, rs, &fr->t[i], &d) != 0)
			goto fail;
	if (add_expr(r, nftnl_expr_alloc("counter")) != 0)
		goto fail;
	if (fr->verdict == FW_REDIRECT) {
		if (add_redirect(r, rs->redirect_port) != 0)
			goto fail;
		return r;
	}
	e = nftnl_expr_alloc("immediate");
	if (e == NULL)
		goto fail;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT,
	    fr->verdict == FW_ACCEPT ? NF_ACCEPT : NF_DROP);
	nftnl_rule_add_expr(r, e);
	return r;
fail:
	nftnl_rule_free(r);
	return NULL;
}

struct nftnl_table *
fw_nl_table(const char *name)
{
	struct nftnl_table *t = nftnl_table_alloc();

	if (t == NULL)
		return NULL;
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, name);
	/* no NFTNL_TABLE_FLAGS owner: the table must outlive sluiced */
	return t;
}

static struct nftnl_chain *
fw_nl_chain(const struct fw_ruleset *rs, size_t ci)
{
	const struct fw_chain *fc = &rs->chains[ci];
	struct nftnl_chain *c = nftnl_chain_alloc();

	if (c == NULL)
		return NULL;
	nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, rs->table);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, fc->name);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, fc->nat ? "nat" : "filter");
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, (uint32_t)fc->hook);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, fc->nat ? FW_NAT_PRIO : 0);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	return c;
}

static int
elem_add(struct nftnl_set *s, const uint8_t *key, size_t klen, int end,
    int open)
{
	struct nftnl_set_elem *e = nftnl_set_elem_alloc();

	if (e == NULL)
		return -1;
	nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, (uint32_t)klen);
	if (end)
		nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS,
		    NFT_SET_ELEM_INTERVAL_END);
	if (open) {
		/* lets `nft list` print "240.0.0.0/4", not a range */
		struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(16);

		if (u == NULL || !nftnl_udata_put_u32(u,
		    NFTNL_UDATA_SET_ELEM_FLAGS,
		    NFTNL_SET_ELEM_F_INTERVAL_OPEN)) {
			nftnl_udata_buf_free(u);
			nftnl_set_elem_free(e);
			return -1;
		}
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_USERDATA,
		    nftnl_udata_buf_data(u), nftnl_udata_buf_len(u));
		nftnl_udata_buf_free(u);
	}
	nftnl_set_elem_add(s, e);
	return 0;
}

/*
 * Interval encoding (tech.md 1): [a, b] is a start element a and an end
 * element b + 1; a range reaching the top has no end element; a first
 * range not starting at zero is preceded by the end sentinel 0.
 */
static int
add_elements(struct nftnl_set *s, const struct fw_set *fs)
{
	size_t klen = fw_key_len(fs->key), i;
	static const uint8_t zero[16];

	if (fs->key == FW_KEY_PORT) {
		for (i = 0; i < fs->n; i++)
			if (elem_add(s, fs->r[i].lo, klen, 0, 0) != 0)
				return -1;
		return 0;
	}
	if (fs->n > 0 && memcmp(fs->r[0].lo, zero, klen) != 0)
		if (elem_add(s, zero, klen, 1, 0) != 0)
			return -1;
	for (i = 0; i < fs->n; i++) {
		uint8_t next[16];
		int top;

		memcpy(next, fs->r[i].hi, klen);
		top = fw_be_inc(next, klen);
		if (elem_add(s, fs->r[i].lo, klen, 0, top) != 0)
			return -1;
		if (!top && elem_add(s, next, klen, 1, 0) != 0)
			return -1;
	}
	return 0;
}

struct nftnl_set *
fw_nl_set(const struct fw_ruleset *rs, size_t si, int with_elems)
{
	const struct fw_set *fs = &rs->sets[si];
	struct nftnl_set *s = nftnl_set_alloc();
	uint32_t type = fs->key == FW_KEY_V4 ? NFT_TYPE_IPV4 :
	    fs->key == FW_KEY_V6 ? NFT_TYPE_IPV6 :
	    fs->key == FW_KEY_IFNAME ? NFT_TYPE_IFNAME : NFT_TYPE_INET_SERVICE;

	if (s == NULL)
		return NULL;
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	nftnl_set_set_str(s, NFTNL_SET_TABLE, rs->table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, fs->name);
	nftnl_set_set_u32(s, NFTNL_SET_ID, fs->id);
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS,
	    fs->key == FW_KEY_PORT ? 0 : NFT_SET_INTERVAL);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, type);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, (uint32_t)fw_key_len(fs->key));
	if (with_elems && add_elements(s, fs) != 0) {
		nftnl_set_free(s);
		return NULL;
	}
	return s;
}

/* ------------------------------------------------------------------ */
/* The batch */

static void
put_hdr_table(struct nftnl_batch *b, uint16_t type, uint16_t flags,
    uint32_t *seq, const struct nftnl_table *t)
{
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(nftnl_batch_buffer(b),
	    type, NFPROTO_INET, flags, (*seq)++);

	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_batch_update(b);
}

/* Elements go in messages of their own, split by the iterator so that
 * long lists stay under the 64 KiB attribute limit. */
static int
put_elements(struct nftnl_batch *b, struct nftnl_set *s, uint16_t flags,
    uint32_t *seq)
{
	struct nftnl_set_elems_iter *it = nftnl_set_elems_iter_create(s);
	int ret = 0;

	if (it == NULL)
		return -1;
	/* the builder returns 1 while elements remain for another message */
	do {
		struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(
		    nftnl_batch_buffer(b), NFT_MSG_NEWSETELEM, NFPROTO_INET,
		    flags, (*seq)++);

		ret = nftnl_set_elems_nlmsg_build_payload_iter(nlh, it);
		nftnl_batch_update(b);
	} while (ret == 1);
	if (ret < 0)
		ret = -1;
	nftnl_set_elems_iter_destroy(it);
	return ret;
}

static int
put_sets(struct nftnl_batch *b, const struct fw_ruleset *rs, uint16_t ack,
    uint32_t *seq)
{
	size_t i;

	for (i = 0; i < rs->nsets; i++) {
		struct nftnl_set *s;
		struct nlmsghdr *nlh;
		int r = 0;

		if (!rs->sets[i].used)
			continue;
		s = fw_nl_set(rs, i, 1);
		if (s == NULL)
			return -1;
		nlh = nftnl_nlmsg_build_hdr(nftnl_batch_buffer(b),
		    NFT_MSG_NEWSET, NFPROTO_INET, NLM_F_CREATE | ack, (*seq)++);
		nftnl_set_nlmsg_build_payload(nlh, s);
		nftnl_batch_update(b);
		if (rs->sets[i].n > 0)
			r = put_elements(b, s, NLM_F_CREATE | ack, seq);
		nftnl_set_free(s);
		if (r != 0)
			return -1;
	}
	return 0;
}

struct nftnl_batch *
fw_nl_batch(const struct fw_ruleset *rs, uint32_t *seq, int with_acks)
{
	uint16_t ack = with_acks ? NLM_F_ACK : 0;
	struct nftnl_batch *b;
	struct nftnl_table *t;
	size_t i;

	b = nftnl_batch_alloc(FW_BATCH_PAGE, FW_BATCH_OVERRUN);
	t = fw_nl_table(rs->table);
	if (b == NULL || t == NULL)
		goto fail;
	nftnl_batch_begin(nftnl_batch_buffer(b), (*seq)++);
	nftnl_batch_update(b);
	/* create-if-missing, delete, create: the nft -f replace idiom;
	 * the kernel applies the batch as one transaction */
	put_hdr_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE | ack, seq, t);
	put_hdr_table(b, NFT_MSG_DELTABLE, ack, seq, t);
	put_hdr_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE | ack, seq, t);
	for (i = 0; i < rs->nchains; i++) {
		struct nftnl_chain *c = fw_nl_chain(rs, i);
		struct nlmsghdr *nlh;

		if (c == NULL)
			goto fail;
		nlh = nftnl_nlmsg_build_hdr(nftnl_batch_buffer(b),
		    NFT_MSG_NEWCHAIN, NFPROTO_INET, NLM_F_CREATE | ack, (*seq)++);
		nftnl_chain_nlmsg_build_payload(nlh, c);
		nftnl_chain_free(c);
		nftnl_batch_update(b);
	}
	if (put_sets(b, rs, ack, seq) != 0)
		goto fail;
	for (i = 0; i < rs->nrules; i++) {
		struct nftnl_rule *r = fw_nl_rule(rs, i);
		struct nlmsghdr *nlh;

		if (r == NULL)
			goto fail;
		nlh = nftnl_nlmsg_build_hdr(nftnl_batch_buffer(b),
		    NFT_MSG_NEWRULE, NFPROTO_INET,
		    NLM_F_CREATE | NLM_F_APPEND | ack, (*seq)++);
		nftnl_rule_nlmsg_build_payload(nlh, r);
		nftnl_rule_free(r);
		nftnl_batch_update(b);
	}
	nftnl_batch_end(nftnl_batch_buffer(b), (*seq)++);
	nftnl_batch_update(b);
	nftnl_table_free(t);
	return b;
fail:
	nftnl_table_free(t);
	if (b != NULL)
		nftnl_batch_free(b);
	return NULL;
}

/* DELSETELEM naming the set and no element list: the kernel flushes
 * the set (what `nft flush set` sends), inside the transaction. */
static int
put_flush(struct nftnl_batch *b, const struct fw_ruleset *rs, size_t si,
    uint16_t ack, uint32_t *seq)
{
	struct nftnl_set *s = fw_nl_set(rs, si, 0);
	struct nlmsghdr *nlh;

	if (s == NULL)
		return -1;
	/* the set exists: named, not found by a batch-local id */
	nftnl_set_unset(s, NFTNL_SET_ID);
	nlh = nftnl_nlmsg_build_hdr(nftnl_batch_buffer(b), NFT_MSG_DELSETELEM,
	    NFPROTO_INET, ack, (*seq)++);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	nftnl_batch_update(b);
	return 0;
}

struct nftnl_batch *
fw_nl_set_batch(const struct fw_ruleset *old, const struct fw_ruleset *rs,
    uint32_t *seq, int with_acks)
{
	uint16_t ack = with_acks ? NLM_F_ACK : 0;
	struct nftnl_batch *b;
	size_t i;

	b = nftnl_batch_alloc(FW_BATCH_PAGE, FW_BATCH_OVERRUN);
	if (b == NULL)
		return NULL;
	nftnl_batch_begin(nftnl_batch_buffer(b), (*seq)++);
	nftnl_batch_update(b);
	for (i = 0; i < rs->nsets; i++) {
		struct nftnl_set *s;
		int r = 0;

		if (!rs->sets[i].used || !fw_set_changed(old, rs, i))
			continue;
		if (put_flush(b, rs, i, ack, seq) != 0)
			goto fail;
		if (rs->sets[i].n == 0)
			continue;
		s = fw_nl_set(rs, i, 1);
		if (s == NULL)
			goto fail;
		nftnl_set_unset(s, NFTNL_SET_ID);
		r = put_elements(b, s, NLM_F_CREATE | ack, seq);
		nftnl_set_free(s);
		if (r != 0)
			goto fail;
	}
	nftnl_batch_end(nftnl_batch_buffer(b), (*seq)++);
	nftnl_batch_update(b);
	return b;
fail:
	nftnl_batch_free(b);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Debug text for golden tests */

static void
put_snprintf(FILE *f, const char *what, int n, const char *buf)
{
	fprintf(f, "%s %s%s\n", what, buf, n >= 4096 ? " [truncated]" : "");
}

static int
put_elem(struct nftnl_set_elem *e, void *data)
{
	char buf[256];
	int n = nftnl_set_elem_snprintf(buf, sizeof(buf), e,
	    NFTNL_OUTPUT_DEFAULT, 0);

	fprintf(data, "  %s%s\n", n > 0 && buf[0] == '\t' ? buf + 1 : buf,
	    n >= (int)sizeof(buf) ? " [truncated]" : "");
	return 0;
}

char *
fw_render_netlink(const struct fw_ruleset *rs)
{
	char *out = NULL, *buf;
	size_t len = 0, i;
	FILE *f;
	struct nftnl_table *t;
	int n;

	buf = malloc(4096);
	f = buf ? open_memstream(&out, &len) : NULL;
	if (f == NULL) {
		free(buf);
		return NULL;
	}
	t = fw_nl_table(rs->table);
	if (t != NULL) {
		n = nftnl_table_snprintf(buf, 4096, t, NFTNL_OUTPUT_DEFAULT, 0);
		put_snprintf(f, "table", n, buf);
		nftnl_table_free(t);
	}
	for (i = 0; i < rs->nchains; i++) {
		struct nftnl_chain *c = fw_nl_chain(rs, i);

		if (c == NULL)
			continue;
		n = nftnl_chain_snprintf(buf, 4096, c, NFTNL_OUTPUT_DEFAULT, 0);
		put_snprintf(f, "chain", n, buf);
		nftnl_chain_free(c);
	}
	for (i = 0; i < rs->nsets; i++) {
		struct nftnl_set *s;

		if (!rs->sets[i].used)
			continue;
		s = fw_nl_set(rs, i, 0);
		if (s == NULL)
			continue;
		n = nftnl_set_snprintf(buf, 4096, s, NFTNL_OUTPUT_DEFAULT, 0);
		put_snprintf(f, "set", n, buf);
		nftnl_set_free(s);
		/* the elements one per line, in the order they are sent */
		s = fw_nl_set(rs, i, 1);
		if (s == NULL)
			continue;
		nftnl_set_elem_foreach(s, put_elem, f);
		nftnl_set_free(s);
	}
	for (i = 0; i < rs->nrules; i++) {
		struct nftnl_rule *r = fw_nl_rule(rs, i);

		if (r == NULL)
			continue;
		n = nftnl_rule_snprintf(buf, 4096, r, NFTNL_OUTPUT_DEFAULT, 0);
		put_snprintf(f, "rule", n, buf);
		nftnl_rule_free(r);
	}
	free(buf);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
