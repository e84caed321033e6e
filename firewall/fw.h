/*
 * fw.h: sluice's own nftables table (DESIGN.md "Firewall").
 *
 * One table (default "inet sluice") built from the configuration:
 *  - self guard: an output-hook chain that drops sluiced's own new
 *    connections (meta skuid) to refused address classes, after accepting
 *    the admin allow_cidrs and the configured DNS servers;
 *  - sandbox guard: from the sandbox subnets (by source address) and
 *    from the sandbox interfaces (by input interface, whatever the
 *    source address) only the broker's ports on the broker's listening
 *    addresses are reachable on input;
 *    forwarding from them is dropped except replies to established
 *    connections, with private, metadata and other-sandbox destinations
 *    dropped by rules of their own;
 *  - transparent mode: a nat prerouting chain redirecting the sandbox
 *    subnets' and interfaces' TCP 80 and 443 to sluiced's transparent
 *    port, which the input guard admits with the broker's ports.
 * Every rule has a counter.  The table is replaced atomically in one
 * netlink batch, has no owner flag (the rules outlive sluiced: a crash
 * fails closed), and no other table is ever read or changed.
 *
 * The ruleset is a pure value: fw_build needs no kernel, fw_render gives
 * the exact text `nft list table` prints for it, fw_render_netlink the
 * libnftnl debug text of the batch's objects.  Only fw_apply, fw_verify,
 * fw_remove and fw_table_exists talk netlink (CAP_NET_ADMIN); in sluiced
 * they run in the firewall helper process alone (fwmsg.h).
 */
#ifndef SLUICE_FW_H
#define SLUICE_FW_H

#include <stddef.h>
#include <stdint.h>

#define FW_DEFAULT_TABLE "sluice"
#define FW_TABLE_MAX 32          /* NFT_TABLE_MAXNAMELEN incl. NUL */

struct fw_config {
	const char *table;                     /* NULL: FW_DEFAULT_TABLE */
	int64_t uid;                           /* self guard skuid; -1: none */
	/* "a.b.c.d[/len]" or "v6[/len]" */
	const char *const *allow_cidrs; size_t nallow_cidrs;
	const char *const *deny_cidrs; size_t ndeny_cidrs;
	/* DNS servers sluiced queries ("ip" or "ip:port", "[v6]:port"):
	 * accepted by the self guard before the refused classes */
	const char *const *resolvers; size_t nresolvers;
	const char *const *sandbox_subnets; size_t nsandbox_subnets;
	/* interface names, "name" or "name*" (pol_ifname_check) */
	const char *const *sandbox_interfaces; size_t nsandbox_interfaces;
	const uint16_t *broker_ports; size_t nbroker_ports;
	/* where the broker listens ("addr[/len]"): the sandboxes reach the
	 * broker ports on these destination addresses only; a wildcard
	 * listener is "0.0.0.0/0" (and "::/0"); none: no broker port */
	const char *const *broker_addrs; size_t nbroker_addrs;
	uint16_t transparent_port;             /* 0: no redirect */
	char **owned_resolvers;                /* the adapter's (proxy/fwcfg.h) */
	char **owned_broker_addrs;
};


/* An interface name's size (IFNAMSIZ incl. NUL); its rule is
 * pol_ifname_check (policy/policy.h). */
#define FW_IFNAME_MAX 16

struct fw_ruleset;

/* Build and normalise; NULL with a message in err on a bad entry. */
struct fw_ruleset *fw_build(const struct fw_config *fc, char *err,
    size_t errlen);
void fw_free(struct fw_ruleset *rs);
const char *fw_table_name(const struct fw_ruleset *rs);

/* `nft list table inet NAME` text of a freshly applied ruleset (counters
 * at zero); also loadable with `nft -f`.  Caller frees. */
char *fw_render(const struct fw_ruleset *rs);
/* The batch's objects as libnftnl prints them (nftnl_*_snprintf), one
 * per line group, for golden tests.  Caller frees. */
char *fw_render_netlink(const struct fw_ruleset *rs);

/*
 * Replace the table in one batch (NEWTABLE, DELTABLE, NEWTABLE, chains,
 * sets, elements, rules), then read it back and compare (fw_verify).
 * 0 / -1 with err.
 */
int fw_apply(const struct fw_ruleset *rs, char *err, size_t errlen) SLUICE_MUSTCHECK;
/*
 * Bring the kernel from old (the ruleset applied last; NULL: unknown) to
 * rs.  When the two differ only in set elements (fw_sets_only), one
 * batch flushes and refills the changed sets: the rules and their
 * counters stay, and the kernel swaps the sets in one transaction, so no
 * packet sees a half-filled set.  Otherwise, or when that batch or its
 * read back fails (the kernel was not in old's state), fw_apply.  Then
 * read back as fw_apply does.  *refilled (may be NULL) is 1 when the
 * sets were refilled in place.  0 / -1 with err.
 */
int fw_update(const struct fw_ruleset *old, const struct fw_ruleset *rs,
    int *refilled, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* 1 if a and b have the same table, chains, rules and sets, so that
 * only the sets' elements differ. */
int fw_sets_only(const struct fw_ruleset *a, const struct fw_ruleset *b);
/* Read the kernel's table back and compare it with rs.  0 / -1 with err
 * naming the first difference. */
int fw_verify(const struct fw_ruleset *rs, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* Delete the table; a missing table is success. */
int fw_remove(const char *table, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* 1 if table inet NAME exists, 0 if not, -1 with err. */
int fw_table_exists(const char *table, char *err, size_t errlen) SLUICE_MUSTCHECK;

/*
 * Safety belt for tests and tools: 1 if this process is (or may be) in
 * the host's network namespace, 0 if it is known to be in another.  The
 * host namespace is /proc/1/ns/net; where that cannot be read, the
 * SLUICE_FW_HOST_NETNS environment variable ("net:[N]", recorded by the
 * caller before unshare) stands in, and with neither the answer is 1.
 */
int fw_in_host_netns(void);

#endif /* SLUICE_FW_H */
