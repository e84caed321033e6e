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

/* rules.c: the rules of a pol_config (decide.c keeps the pointer). */
struct pol__rules;
void pol__rules_free(struct pol__rules *r);
struct pol__rules **pol__config_rules(struct pol_config *c);
const struct pol__rules *pol__config_rules_c(const struct pol_config *c);
/* (host, port) is on the registry list, whatever the port lists say. */
int pol__config_is_registry(const struct pol_config *c, const char *host,
    uint16_t port);

#endif /* SLUICE_POLICY_INT_H */
