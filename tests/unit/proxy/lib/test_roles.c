/* test_roles.c: the one role rule of both daemons (proxy/lib/roles.c):
 * root is admin, uids before groups, admin > app > auditor within a
 * kind. */
#include "sluice-config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "proxy/lib/roles.h"

static const uint32_t u_admin[] = { 1000 }, u_app[] = { 1001, 1005 },
    u_aud[] = { 1002, 1005 };
static const uint32_t g_admin[] = { 50 }, g_app[] = { 51 }, g_aud[] = { 52 };

static struct roles_list uids[ROLES__COUNT], gids[ROLES__COUNT];

static int
setup(void **state)
{
	(void)state;
	memset(uids, 0, sizeof(uids));
	memset(gids, 0, sizeof(gids));
	uids[ROLES_ADMIN] = (struct roles_list){ u_admin, 1 };
	uids[ROLES_APP] = (struct roles_list){ u_app, 2 };
	uids[ROLES_AUDITOR] = (struct roles_list){ u_aud, 2 };
	gids[ROLES_ADMIN] = (struct roles_list){ g_admin, 1 };
	gids[ROLES_APP] = (struct roles_list){ g_app, 1 };
	gids[ROLES_AUDITOR] = (struct roles_list){ g_aud, 1 };
	return 0;
}

static enum roles_role
of(uid_t uid, const gid_t *g, size_t n)
{
	return roles_resolve(uid, g, n, uids, gids);
}

static void
test_root(void **state)
{
	(void)state;
	assert_int_equal(of(0, NULL, 0), ROLES_ADMIN);
	memset(uids, 0, sizeof(uids));
	memset(gids, 0, sizeof(gids));
	assert_int_equal(of(0, NULL, 0), ROLES_ADMIN);
}

static void
test_uid_before_groups(void **state)
{
	gid_t adm[] = { 99, 50 }, aud[] = { 52 };

	(void)state;
	/* the case of issue 20: app by uid, in the admin group: app */
	assert_int_equal(of(1001, adm, 2), ROLES_APP);
	/* auditor by uid stays auditor in the admin group */
	assert_int_equal(of(1002, adm, 2), ROLES_AUDITOR);
	/* admin by uid in the auditor group: admin */
	assert_int_equal(of(1000, aud, 1), ROLES_ADMIN);
}

static void
test_within_kind(void **state)
{
	gid_t app_aud[] = { 52, 51 }, all[] = { 52, 51, 50 };

	(void)state;
	/* uid in the app and the auditor lists: the higher */
	assert_int_equal(of(1005, NULL, 0), ROLES_APP);
	/* groups only: the highest list that has one of them */
	assert_int_equal(of(2000, app_aud, 2), ROLES_APP);
	assert_int_equal(of(2000, all, 3), ROLES_ADMIN);
}

static void
test_none(void **state)
{
	gid_t other[] = { 7, 8 };

	(void)state;
	assert_int_equal(of(2000, other, 2), ROLES_NONE);
	assert_int_equal(of(2000, NULL, 0), ROLES_NONE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_root, setup),
		cmocka_unit_test_setup(test_uid_before_groups, setup),
		cmocka_unit_test_setup(test_within_kind, setup),
		cmocka_unit_test_setup(test_none, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
