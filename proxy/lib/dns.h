/*
 * dns.h: name resolution with c-ares inside sluiced's libevent loop.
 *
 * One channel per daemon.  A static host map answers configured names
 * without a query (the answers are still classified by the caller).  Each
 * query has its own deadline; c-ares 1.18 cannot cancel one query, so a
 * cancelled or expired query is marked abandoned and its late answer is
 * dropped.  A and AAAA are asked together and reported once, with every
 * address, unsorted (ARES_AI_NOSORT: sorting would open side sockets).
 */
#ifndef SLUICE_DNS_H
#define SLUICE_DNS_H

#include <stddef.h>

#include "policy/policy.h"

struct event_base;
struct dns;
struct dns_query;

enum dns_status {
	DNS_OK = 0,
	DNS_NOTFOUND,     /* NXDOMAIN, NODATA */
	DNS_FAILED,       /* SERVFAIL, refused, malformed, no servers */
	DNS_TIMEOUT,      /* the per-query deadline passed */
};
const char *dns_status_name(enum dns_status s);

#define DNS_MAX_ADDRS 32

/* addrs valid only during the call; n may be 0 with DNS_OK never. */
typedef void (*dns_cb)(void *arg, enum dns_status st,
    const struct pol_addr *addrs, size_t n, long elapsed_us);

struct dns_host {
	const char *name;            /* canonical */
	const struct pol_addr *addrs;
	size_t naddrs;
};

/*
 * servers: "ip" or "ip:port" / "[v6]:port" strings; n 0 means the
 * system's resolv.conf.  timeout_ms is the whole deadline of a query.
 * Returns NULL with err on failure.
 */
struct dns *dns_new(struct event_base *base, const char *const *servers,
    size_t nservers, const struct dns_host *hosts, size_t nhosts,
    int timeout_ms, char *err, size_t errlen);
void dns_free(struct dns *d);   /* pending callbacks are not called */

/*
 * Resolve name (canonical, not a literal).  The callback is never called
 * from inside dns_resolve (answers from the host map are delivered from
 * the loop), so callers need not be re-entrant.  Returns NULL on
 * allocation failure.
 */
struct dns_query *dns_resolve(struct dns *d, const char *name, dns_cb cb,
    void *arg);
/* The callback will not be called.  q is invalid afterwards. */
void dns_cancel(struct dns_query *q);

#endif /* SLUICE_DNS_H */
