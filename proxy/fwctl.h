/*
 * fwctl.h: sluiced's firewall glue (sluiced(8), FIREWALL and PROCESS
 * MODEL).  Started as root with firewall.enabled, sluiced forks the
 * helper before reading anything untrusted (fwctl_spawn_helper), applies
 * the table before any listener (fwctl_start), and applies the reloaded
 * configuration's table as the last step of a reload that may fail
 * (fwctl_reload).  px.fw (daemon.h) says how it went.
 */
#ifndef SLUICE_FWCTL_H
#define SLUICE_FWCTL_H

#include <stddef.h>

#include "proxy/lib/util.h"

struct cfg;
struct priv_user;

/* Fork the helper when c enables the firewall; as_user: the user the
 * helper becomes (NULL: stays root).  0 / -1 (logged). */
int fwctl_spawn_helper(const struct cfg *c, const struct priv_user *as_user)
    SLUICE_MUSTCHECK;
/* At start: apply and read back, or refuse to start.  0 / -1 (logged). */
int fwctl_start(const struct cfg *c) SLUICE_MUSTCHECK;
/*
 * On reload, the last step that may fail: apply nc's table if it differs
 * from the one in the kernel.  On failure the running table is kept (the
 * batch is atomic), health says "failed" until an apply succeeds, and -1
 * is returned with err.  Disabling leaves the table in the kernel.
 */
int fwctl_reload(const struct cfg *nc, char *err, size_t errlen)
    SLUICE_MUSTCHECK;
/* At exit: the memory and the helper; the table stays. */
void fwctl_shutdown(void);
/*
 * --print-firewall (remove 0) needs no kernel and works whether or not
 * the firewall is enabled; --remove-firewall (remove 1) deletes the
 * configured table, and with SLUICE_FW_NETNS_GUARD=1 in the environment
 * (the test harness sets it) refuses in the host's network namespace.
 * Returns the exit status.
 */
int fwctl_command(const char *path, int remove);

#endif /* SLUICE_FWCTL_H */
