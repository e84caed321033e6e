/*
 * roles.c: the role of a local caller (roles.h).  sluiced's documented
 * rule (sluiced(8), "Transports and roles") is the one: a caller named
 * by its uid is not raised or lowered by a group it happens to be in.
 */
#include "sluice-config.h"

#include <sys/socket.h>

#include "proxy/lib/roles.h"

static int
roles_has(const struct roles_list *l, uint32_t id)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (l->ids[i] == id)
			return 1;
	return 0;
}

enum roles_role
roles_resolve(uid_t uid, const gid_t *gids, size_t ngids,
    const struct roles_list uids[ROLES__COUNT],
    const struct roles_list groups[ROLES__COUNT])
{
	int r;
	size_t i;

	if (uid == 0)
		return ROLES_ADMIN;
	for (r = ROLES_ADMIN; r > ROLES_NONE; r--)
		if (roles_has(&uids[r], (uint32_t)uid))
			return (enum roles_role)r;
	for (r = ROLES_ADMIN; r > ROLES_NONE; r--)
		for (i = 0; i < ngids; i++)
			if (roles_has(&groups[r], (uint32_t)gids[i]))
				return (enum roles_role)r;
	return ROLES_NONE;
}

int
roles_peer(int fd, uid_t *uid, gid_t gids[ROLES_GROUPS_MAX + 1],
    size_t *ngids)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	*ngids = 0;
	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0)
		return -1;
	*uid = uc.uid;
	gids[(*ngids)++] = uc.gid;
#ifdef SO_PEERGROUPS
	len = (socklen_t)(ROLES_GROUPS_MAX * sizeof(gid_t));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gids + 1, &len) == 0)
		*ngids += len / sizeof(gid_t);
#endif
	return 0;
}
