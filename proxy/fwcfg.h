/*
 * fwcfg.h: the firewall's configuration from sluiced's (the adapter that
 * keeps firewall/ free of proxy/: fw.h knows only struct fw_config).
 */
#ifndef SLUICE_FWCFG_H
#define SLUICE_FWCFG_H

#include "firewall/fw.h"

/*
 * From sluiced's configuration: firewall.*, allow_cidrs, deny_cidrs, the
 * addresses of listen.tcp and listen.transparent (broker_addrs; a
 * wildcard "[::]" listener, dual stack, stands for both families) (a
 * null firewall.uid is the uid of "user" when that user exists and is not
 * root: the uid the proxy process dials as), and
 * the resolvers from dns.servers or, when that is empty, the nameserver
 * lines of resolv_conf (NULL: none).  fc borrows c's strings; release
 * with fw_config_clear.  0 / -1 (memory).
 */
struct cfg;
int fw_config_from_cfg(struct fw_config *fc, const struct cfg *c,
    const char *resolv_conf) SLUICE_MUSTCHECK;
void fw_config_clear(struct fw_config *fc);

#endif /* SLUICE_FWCFG_H */
