/*
 * fw-int.h: the ruleset model shared by the builder, the nft-text
 * renderer and the netlink encoder.  Rules are short lists of match
 * terms so that both outputs are derived from one description.
 */
#ifndef SLUICE_FW_INT_H
#define SLUICE_FW_INT_H

#include <stddef.h>
#include <stdint.h>

#include "firewall/fw.h"

#define FW_SET_NAME_MAX 16

enum fw_key {
	FW_KEY_V4,      /* ipv4_addr, interval */
	FW_KEY_V6,      /* ipv6_addr, interval */
	FW_KEY_PORT,    /* inet_service, plain */
	FW_KEY_IFNAME,  /* ifname (IFNAMSIZ bytes, NUL padded), interval:
	                   a name is [name, name], "name*" the prefix
	                   block [name 00.., name ff..] */
};

/* Inclusive range, network order, fw_key_len() bytes used. */
struct fw_range {
	uint8_t lo[16];
	uint8_t hi[16];
};

struct fw_set {
	char name[FW_SET_NAME_MAX];
	enum fw_key key;
	struct fw_range *r;
	size_t n;
	int used;               /* referenced by a rule: emitted */
	uint32_t id;            /* NFTNL_SET_ID within the batch */
};

enum fw_term_kind {
	FW_T_CT_EST,            /* ct state established,related */
	FW_T_SKUID,             /* meta skuid N */
	FW_T_SADDR_SET,         /* ip/ip6 saddr @set */
	FW_T_DADDR_SET,         /* ip/ip6 daddr @set */
	FW_T_TCP_DPORT_SET,     /* tcp dport @set */
	FW_T_ICMPV6_TYPE,       /* icmpv6 type N */
	FW_T_IIFNAME_SET,       /* iifname @set */
};

/* The ICMPv6 neighbour discovery types (RFC 4861) the input guard
 * accepts from sandbox subnets: address resolution both ways. */
#define FW_ICMPV6_ND_NS 135
#define FW_ICMPV6_ND_NA 136

struct fw_term {
	enum fw_term_kind kind;
	uint32_t uid;           /* FW_T_SKUID; FW_T_ICMPV6_TYPE: the type */
	int set;                /* index in rs->sets */
};

/* FW_REDIRECT: nat "redirect to :port" (rs->redirect_port) */
enum fw_verdict { FW_ACCEPT, FW_DROP, FW_REDIRECT };

#define FW_TERMS_MAX 4

struct fw_rule {
	int chain;              /* index in rs->chains */
	struct fw_term t[FW_TERMS_MAX];
	size_t nt;
	enum fw_verdict verdict;
};

struct fw_chain {
	const char *name;
	int hook;               /* NF_INET_* */
	const char *hook_name;
	int nat;                /* type nat priority dstnat (-100), else
	                           type filter priority filter (0) */
};

#define FW_SETS_MAX 16
#define FW_CHAINS_MAX 4
#define FW_RULES_MAX 48

struct fw_ruleset {
	char table[FW_TABLE_MAX];
	struct fw_set sets[FW_SETS_MAX];
	size_t nsets;
	struct fw_chain chains[FW_CHAINS_MAX];
	size_t nchains;
	struct fw_rule rules[FW_RULES_MAX];
	size_t nrules;
	uint16_t redirect_port;         /* FW_REDIRECT's target */
};

#define FW_NAT_PRIO (-100)      /* NF_IP_PRI_NAT_DST, nft's "dstnat" */

size_t fw_key_len(enum fw_key k);
/* Text of a range as nft prints it ("10.0.0.0/8", "a-b", "::1", "443"). */
void fw_range_format(enum fw_key k, const struct fw_range *r, char *buf,
    size_t len);
/* Sort and merge overlapping or adjacent ranges in place; returns n. */
size_t fw_ranges_normalise(struct fw_range *r, size_t n, size_t klen);
/* Interface names and prefix blocks: sort, drop the ones inside another,
 * keep neighbours apart (a merged "tap*" and "taq" would be neither a
 * name nor a prefix, and nft keeps them apart too); returns n. */
size_t fw_ifnames_normalise(struct fw_range *r, size_t n);
/* "name" or "name*" (pol_ifname_check's rules) as a range.  0 / -1. */
int fw_ifname_parse(const char *s, struct fw_range *out);
/* Parse "addr[/len]"; family must match key (V4/V6). 0 / -1. */
int fw_cidr_parse(const char *s, enum fw_key *key, struct fw_range *out);
/* a + 1 in place over len bytes; returns 1 on wrap to zero. */
int fw_be_inc(uint8_t *a, size_t len);

/* The family's address terms ("ip"/"ip6"), by key. */
int fw_set_family_v6(const struct fw_set *s);

/* Netlink objects (nl.c); callers free them with nftnl_*_free. */
struct nftnl_batch;
struct nftnl_table;
struct nftnl_chain;
struct nftnl_set;
struct nftnl_rule;
struct nftnl_table *fw_nl_table(const char *name);
struct nftnl_set *fw_nl_set(const struct fw_ruleset *rs, size_t si,
    int with_elems);
struct nftnl_rule *fw_nl_rule(const struct fw_ruleset *rs, size_t ri);
/* A batch page holds any one message: element lists are split at the
 * 16-bit attribute limit, so 64 KiB plus headers (as nft sizes it). */
#define FW_BATCH_PAGE (128 * 1024)
#define FW_BATCH_OVERRUN (65536 + 4096)
/* The whole replace batch, BEGIN to END; seq is advanced. */
struct nftnl_batch *fw_nl_batch(const struct fw_ruleset *rs,
    uint32_t *seq, int with_acks);
/* 1 if set si holds other elements in a than in b (same shape). */
int fw_set_changed(const struct fw_ruleset *a, const struct fw_ruleset *b,
    size_t si);
/* The set-refill batch from old to rs (fw_sets_only(old, rs) holds):
 * for each used set whose elements changed, DELSETELEM with no element
 * list (a flush) and NEWSETELEM messages with rs's elements, split
 * where the list outgrows one message.  BEGIN to END; seq advanced. */
struct nftnl_batch *fw_nl_set_batch(const struct fw_ruleset *old,
    const struct fw_ruleset *rs, uint32_t *seq, int with_acks);

#endif /* SLUICE_FW_INT_H */
