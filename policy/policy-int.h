/*
 * policy-int.h: helpers shared by the files of policy/ only.  Nothing
 * outside policy/ includes this header; policy.h is the contract.
 */
#ifndef SLUICE_POLICY_INT_H
#define SLUICE_POLICY_INT_H

#include "policy/policy.h"

/* Strict decimal port: 1..65535, no sign, no leading zeros. 0 / -1. */
int pol__port_parse(const char *s, size_t len, uint16_t *out);

/*
 * The IPv4 address an IPv6 address stands for when it uses one of the
 * embedding forms (mapped, compatible, translated, NAT64 64:ff9b::/96
 * and 64:ff9b:1::/48, 6to4, Teredo client).  Returns the form, POL__EMB_NONE
 * when the address embeds nothing (or is IPv4).
 */
enum pol__emb {
	POL__EMB_NONE = 0,
	POL__EMB_MAPPED,       /* ::ffff:0:0/96: the socket really dials v4 */
	POL__EMB_COMPAT,       /* ::/96 minus :: and ::1 */
	POL__EMB_TRANSLATED,   /* ::ffff:0:0:0/96 */
	POL__EMB_NAT64,        /* 64:ff9b::/96 */
	POL__EMB_NAT64_LOCAL,  /* 64:ff9b:1::/48, read as a /96 */
	POL__EMB_6TO4,         /* 2002::/16 */
	POL__EMB_TEREDO,       /* 2001::/32 */
};
enum pol__emb pol__addr_embedded_v4(const struct pol_addr *a,
    struct pol_addr *v4);

/* Longest suffix-free canonical host text fits here (with NUL). */
#define POL__HOSTBUF (POL_HOST_MAX + 1)

/* The admin configuration (decide.c builds and reads it; rules.c keeps
 * the request rules in it). */
#define PORTS_MAX 64

struct port_set {
	uint16_t ports[PORTS_MAX];
	size_t n;
};

struct cidr;
struct pol__rules;

struct pol_config {
	struct pol_hostset *registries;
	struct pol_hostset *deny_hosts;
	struct cidr *cidrs;
	size_t n_cidrs;
	struct port_set reg_ports;
	struct port_set pub_ports;
	struct pol_addr *host_addrs;
	size_t n_host_addrs;
	struct pol__rules *rules;        /* rules.c */
};

/* rules.c: the rules of a pol_config, freed with it. */
void pol__rules_free(struct pol__rules *r);

#endif /* SLUICE_POLICY_INT_H */
