/*
 * roles.h: which role a local caller has, from its SO_PEERCRED uid and
 * groups.  One rule for the two daemons that take Unix-socket callers
 * (sluiced's control API, sluice-execd's API), so that the same caller
 * never has two roles (issue 20, point 11).
 */
#ifndef SLUICE_ROLES_H
#define SLUICE_ROLES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Least to most; the values of enum cfg_role (proxy/lib/config.h) and
 * enum xd_role (sandbox-glue/executor/execd/execd-int.h). */
enum roles_role {
	ROLES_NONE = 0,
	ROLES_AUDITOR,
	ROLES_APP,
	ROLES_ADMIN,
	ROLES__COUNT
};

/* One role's list of uids or gids. */
struct roles_list {
	const uint32_t *ids;
	size_t n;
};

/*
 * The rule: uid 0 is admin; else the uid is looked up in the admin, app
 * and auditor uid lists, in that order; only when none has it are the
 * gids (the primary and the supplementary ones) looked up in the admin,
 * app and auditor group lists, in that order.  The first list that
 * matches gives the role; none: ROLES_NONE.  uids and gids are indexed
 * by enum roles_role (ROLES_NONE unused).
 */
enum roles_role roles_resolve(uid_t uid, const gid_t *gids, size_t ngids,
    const struct roles_list uids[ROLES__COUNT],
    const struct roles_list groups[ROLES__COUNT]);

/* Groups of a peer looked at: its primary and at most this many more. */
#define ROLES_GROUPS_MAX 256

/*
 * The peer of the Unix socket fd (SO_PEERCRED): its uid, and in gids
 * its primary group then its supplementary ones (SO_PEERGROUPS, where
 * the kernel has it), at most ROLES_GROUPS_MAX + 1 in all, for
 * roles_resolve.  0, or -1 when the socket says nothing.
 */
int roles_peer(int fd, uid_t *uid, gid_t gids[ROLES_GROUPS_MAX + 1],
    size_t *ngids) SLUICE_MUSTCHECK;

#endif
