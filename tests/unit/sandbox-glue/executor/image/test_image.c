/*
 * test_image.c: sandbox images (sandbox-glue/executor/image/sbx_image.c)
 * without mounting anything: profiles (the files of the tree included), the
 * inputs of a build, the store's names, uses, removals and sweeps, and
 * the static-executable check of the shim.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox-glue/executor/backend/sbx_cfg.h"
#include "sandbox-glue/executor/image/sbx_image.h"

static char tmp[256];

static void
put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(tmp, sizeof(tmp), "/tmp/sluice-test-image.XXXXXX");
	assert_non_null(mkdtemp(tmp));
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	sbx_image_rm_tree(tmp);
	return 0;
}

static void
t_names(void **state)
{
	(void)state;
	assert_true(sbx_digest_ok("0123456789abcdef0123456789abcdef0123456789a"
	    "bcdef0123456789abcdef"));
	assert_false(sbx_digest_ok("0123456789ABCDEF0123456789abcdef0123456789a"
	    "bcdef0123456789abcdef"));
	assert_false(sbx_digest_ok("0123456789abcdef"));
	assert_true(sbx_pkg_ok("python3-pandas"));
	assert_true(sbx_pkg_ok("g++"));
	assert_true(sbx_pkg_ok("libstdc++6"));
	assert_false(sbx_pkg_ok("Python3"));
	assert_false(sbx_pkg_ok("-o"));
	assert_false(sbx_pkg_ok("a"));
	assert_false(sbx_pkg_ok("curl,wget"));
	assert_false(sbx_pkg_ok("curl wget"));
	assert_false(sbx_pkg_ok("?essential"));
	assert_string_equal(sbx_img_code(SBX_IMG_MISSING), "image_missing");
	assert_string_equal(sbx_img_code(SBX_IMG_IN_USE), "image_in_use");
	assert_string_equal(sbx_img_code(SBX_IMG_FORBIDDEN),
	    "profile_forbidden");
}

static void
t_profile_parse(void **state)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{ "{\"packages\":[\"curl\"],\"x\":1}", "profile t:1:22: x: "
		    "unknown key (expected one of: description, extends, "
		    "packages, check)" },
		{ "{\"packages\":[\"curl\"],\"check\":{\"x\":1}}",
		    "t:1:31: check.x: unknown key" },
		{ "{\"packages\":[\"curl,wget\"]}", "t:1:14: packages[0]: bad "
		    "package name \"curl,wget\"" },
		{ "{\"packages\":[\"--allow-unauthenticated\"]}",
		    "packages[0]: bad package name" },
		{ "{\"packages\":\"curl\"}", "packages: expected an array" },
		{ "{\"packages\":[]}", "t:1:13: packages: none (and extends "
		    "nothing)" },
		{ "{\"packages\":[\"curl\"],\"check\":{\"python\":[\"os; "
		    "import x\"]}}", "check.python[0]: bad module" },
		{ "{\"packages\":[\"curl\"],\"check\":{\"commands\":[\"a\\nb\"]}}",
		    "check.commands[0]: expected a command line" },
		{ "{\"packages\":[\"curl\"],\"extends\":\"../x\"}",
		    "extends: bad profile name \"../x\"" },
		{ "{\"packages\":[\"curl\"],\"extends\":\"host\"}",
		    "extends: bad profile name \"host\"" },
		{ "{\"packages\":[\"curl\"],\"description\":\"a\\u001b[2J\"}",
		    "description: expected one printable line" },
		{ "[]", "profile t:1:1: (root): expected an object" },
		{ "{\"packages\":[\"curl\"],\"packages\":[\"jq\"]}",
		    "profile t:1:22: packages: duplicate object key" },
	};
	struct sbx_profile p;
	char err[256];
	size_t i;

	(void)state;
	{
		const char *ok = "{\"description\":\"d\",\"packages\":[\"jq\","
		    "\"curl\",\"jq\"],\"check\":{\"python\":[\"os.path\"],"
		    "\"commands\":[\"jq --version\"]}}";

		assert_int_equal(sbx_profile_parse(&p, "t", ok, strlen(ok), err,
		    sizeof(err)), 0);
	}
	assert_int_equal(p.npackages, 2);       /* once each */
	assert_string_equal(p.python[0], "os.path");
	assert_string_equal(p.commands[0], "jq --version");
	assert_string_equal(p.description, "d");
	sbx_profile_free(&p);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_not_equal(sbx_profile_parse(&p, "t", bad[i].text,
		    strlen(bad[i].text), err, sizeof(err)), 0);
		sbx_profile_free(&p);
		if (strstr(err, bad[i].msg) == NULL)
			fail_msg("%s: got \"%s\", want \"%s\"", bad[i].text, err,
			    bad[i].msg);
	}
	assert_int_not_equal(sbx_profile_parse(&p, "host", "{\"packages\":"
	    "[\"curl\"]}", 21, err, sizeof(err)), 0);
	sbx_profile_free(&p);
}

/* An admin's profile comes before a built-in one of the same name; what
 * it extends adds packages and checks (its checks first); cycles and
 * unknown names are refused. */
static void
t_profile_load(void **state)
{
	char a[300], b[300], f[400], err[256];
	const char *dirs[] = { a, b, NULL };
	struct sbx_profile p;

	(void)state;
	snprintf(a, sizeof(a), "%s/admin", tmp);
	snprintf(b, sizeof(b), "%s/builtin", tmp);
	assert_int_equal(mkdir(a, 0755), 0);
	assert_int_equal(mkdir(b, 0755), 0);
	snprintf(f, sizeof(f), "%s/low.json", b);
	put(f, "{\"packages\":[\"zlib1g\",\"curl\"],\"check\":{\"python\":"
	    "[\"json\"],\"commands\":[\"curl -V\"]}}");
	snprintf(f, sizeof(f), "%s/mid.json", b);
	put(f, "{\"packages\":[\"jq\"]}");
	snprintf(f, sizeof(f), "%s/mid.json", a);
	put(f, "{\"extends\":\"low\",\"packages\":[\"jq\",\"curl\"],\"check\":"
	    "{\"python\":[\"ssl\",\"json\"]}}");
	assert_int_equal(sbx_profile_load(&p, dirs, "mid", err, sizeof(err)),
	    0);
	assert_string_equal(p.path, f);
	assert_int_equal(p.npackages, 3);
	assert_string_equal(p.packages[0], "curl");
	assert_string_equal(p.packages[1], "jq");
	assert_string_equal(p.packages[2], "zlib1g");
	assert_int_equal(p.npython, 2);
	assert_string_equal(p.python[0], "json");
	assert_string_equal(p.python[1], "ssl");
	assert_int_equal(p.ncommands, 1);
	sbx_profile_free(&p);
	snprintf(f, sizeof(f), "%s/loop1.json", a);
	put(f, "{\"extends\":\"loop2\",\"packages\":[\"jq\"]}");
	snprintf(f, sizeof(f), "%s/loop2.json", a);
	put(f, "{\"extends\":\"loop1\",\"packages\":[\"jq\"]}");
	assert_int_equal(sbx_profile_load(&p, dirs, "loop1", err, sizeof(err)),
	    -1);
	assert_non_null(strstr(err, "extends itself"));
	assert_int_equal(sbx_profile_load(&p, dirs, "nosuch", err, sizeof(err)),
	    SBX_IMG_UNKNOWN);
	assert_non_null(strstr(err, "profile_unknown: no profile nosuch"));
	snprintf(f, sizeof(f), "%s/orphan.json", a);
	put(f, "{\"extends\":\"gone\"}");
	assert_int_equal(sbx_profile_load(&p, dirs, "orphan", err, sizeof(err)),
	    SBX_IMG_UNKNOWN);
	assert_non_null(strstr(err, "no profile gone (extended by orphan)"));
	assert_int_equal(sbx_profile_load(&p, dirs, "../admin/mid", err,
	    sizeof(err)), SBX_IMG_UNKNOWN);
}

/* The profiles of the tree: seed 000's lists, media on base on minimal. */
static void
t_profiles_of_the_tree(void **state)
{
	static const char *const base_pk[] = { "python3-pandas",
	    "python3-matplotlib", "python3-openpyxl", "python3-docx",
	    "python3-pypdf", "python3-pil", "jq", "ripgrep", "sqlite3", "zip",
	    "git", "curl", "nodejs", "npm", "fonts-dejavu-core", "python3",
	    "ca-certificates" };
	static const char *const media_pk[] = { "ffmpeg", "sox",
	    "imagemagick" };
	const char *srcdir = getenv("SLUICE_SRCDIR");
	char d[512], err[256];
	const char *dirs[] = { d, NULL };
	struct sbx_profile p;
	size_t i, k;

	(void)state;
	snprintf(d, sizeof(d), "%s/sandbox-glue/executor/image/profiles",
	    srcdir ? srcdir : ".");
	assert_int_equal(sbx_profile_load(&p, dirs, "minimal", err,
	    sizeof(err)), 0);
	assert_int_equal(p.npackages, 3);
	sbx_profile_free(&p);
	if (sbx_profile_load(&p, dirs, "media", err, sizeof(err)) != 0)
		fail_msg("media: %s", err);
	for (i = 0; i < sizeof(base_pk) / sizeof(base_pk[0]) +
	    sizeof(media_pk) / sizeof(media_pk[0]); i++) {
		const char *want = i < sizeof(base_pk) / sizeof(base_pk[0]) ?
		    base_pk[i] : media_pk[i - sizeof(base_pk) /
		    sizeof(base_pk[0])];

		for (k = 0; k < p.npackages && strcmp(p.packages[k], want) != 0;
		    k++)
			;
		if (k == p.npackages)
			fail_msg("media lacks %s", want);
	}
	for (k = 0; k < p.npython && strcmp(p.python[k], "pandas") != 0; k++)
		;
	assert_true(k < p.npython);
	for (k = 0; k < p.ncommands && strncmp(p.commands[k], "ffmpeg ", 7) !=
	    0; k++)
		;
	assert_true(k < p.ncommands);
	sbx_profile_free(&p);
}

static void
t_inputs(void **state)
{
	char *a[] = { "python3", "curl" }, *b[] = { "curl", "python3",
	    "curl" };
	struct sbx_profile p, q;
	char h1[65], h2[65], h3[65], h4[65], *canon;

	(void)state;
	memset(&p, 0, sizeof(p));
	memset(&q, 0, sizeof(q));
	p.packages = a;
	p.npackages = 2;
	q.packages = b;
	q.npackages = 3;
	assert_int_equal(sbx_image_inputs(&p, "bookworm", "deb http://m/d "
	    "bookworm main\n", "amd64", h1, &canon), 0);
	assert_non_null(strstr(canon, "\"packages\":[\"curl\",\"python3\"]"));
	assert_non_null(strstr(canon, "\"sources\":[\"deb http://m/d bookworm "
	    "main\"]"));
	free(canon);
	/* order, repeats, blank lines and trailing blanks are not inputs */
	assert_int_equal(sbx_image_inputs(&q, "bookworm", "\n  deb http://m/d "
	    "bookworm main \n\n", "amd64", h2, NULL), 0);
	assert_string_equal(h1, h2);
	assert_int_equal(sbx_image_inputs(&p, "trixie", "deb http://m/d "
	    "bookworm main\n", "amd64", h3, NULL), 0);
	assert_string_not_equal(h1, h3);
	assert_int_equal(sbx_image_inputs(&p, "bookworm", "deb http://m/d "
	    "bookworm main contrib\n", "amd64", h4, NULL), 0);
	assert_string_not_equal(h1, h4);
	assert_true(sbx_digest_ok(h1));
}

/* A fake image (any bytes: nothing is mounted here) named by its sha256;
 * its digest into d. */
static void
fake_image(const char *store, const char *bytes, char d[65])
{
	char p[400];

	sbx_sha256_hex(bytes, strlen(bytes), d);
	snprintf(p, sizeof(p), "%s/%s.erofs", store, d);
	put(p, bytes);
}

/* A sandbox directory that uses digest d, as sbx_image_attach leaves it
 * (sbx_image.h: users/<d>/<sha256 of dir> and <dir>/image.digest). */
static void
fake_user(const char *store, const char *dir, const char *d)
{
	char p[600], h[65];

	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(p, sizeof(p), "%s/image.digest", dir);
	put(p, d);
	snprintf(p, sizeof(p), "%s/users", store);
	(void)mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/users/%s", store, d);
	(void)mkdir(p, 0755);
	sbx_sha256_hex(dir, strlen(dir), h);
	snprintf(p, sizeof(p), "%s/users/%s/%s", store, d, h);
	put(p, dir);
}

static void
t_store(void **state)
{
	char store[300], p[600], err[512], x[65], y[65], z[65], got[65];
	char sbx1[400], sbx2[400];
	struct sbx_rec rec;
	json_t *l;
	int fd;

	(void)state;
	snprintf(store, sizeof(store), "%s/store", tmp);
	snprintf(p, sizeof(p), "%s/profiles", store);
	assert_int_equal(mkdir(store, 0755), 0);
	assert_int_equal(mkdir(p, 0755), 0);
	memset(&rec, 0, sizeof(rec));
	assert_int_equal(sbx_image_pick(&rec, store, "minimal", err,
	    sizeof(err)), SBX_IMG_MISSING);
	assert_non_null(strstr(err, "image_missing: profile minimal has no "
	    "image"));
	assert_int_equal(sbx_image_pick(&rec, store, "host", err, sizeof(err)),
	    0);
	assert_string_equal(rec.profile, "host");
	assert_string_equal(rec.image, "");
	fake_image(store, "old bytes", x);
	fake_image(store, "new bytes", y);
	fake_image(store, "orphan", z);
	snprintf(p, sizeof(p), "%s/profiles/minimal", store);
	put(p, x);
	assert_int_equal(sbx_image_current(store, "minimal", got, err,
	    sizeof(err)), 0);
	assert_string_equal(got, x);
	assert_int_equal(sbx_image_pick(&rec, store, "minimal", err,
	    sizeof(err)), 0);
	assert_string_equal(rec.image, x);
	snprintf(p, sizeof(p), "%s/%s.erofs", store, x);
	assert_string_equal(rec.image_path, p);
	assert_int_equal(sbx_image_store_of(&rec, p, sizeof(p)), 0);
	assert_string_equal(p, store);
	/* one sandbox on x, then the profile rebuilt: y is the newest */
	snprintf(sbx1, sizeof(sbx1), "%s/sbx1", tmp);
	fake_user(store, sbx1, x);
	snprintf(rec.dir, sizeof(rec.dir), "%s", sbx1);
	snprintf(p, sizeof(p), "%s/profiles/minimal", store);
	put(p, y);
	assert_int_equal(sbx_image_users(store, x), 1);
	assert_int_equal(sbx_image_users(store, y), 0);
	/* the sweep takes z (no profile, no user), keeps x (in use) and y
	 * (named) */
	assert_int_equal(sbx_image_sweep(store), 1);
	snprintf(p, sizeof(p), "%s/%s.erofs", store, z);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(sbx_image_rm(store, x, got, err, sizeof(err)),
	    SBX_IMG_IN_USE);
	assert_non_null(strstr(err, "image_in_use"));
	l = sbx_image_list(store, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(json_array_size(json_object_get(l, "images")), 2);
	json_decref(l);
	/* the sandbox goes: x with it */
	sbx_image_detach(&rec);
	snprintf(p, sizeof(p), "%s/image.digest", sbx1);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(sbx_image_users(store, x), 0);
	assert_int_equal(sbx_image_sweep(store), 1);
	snprintf(p, sizeof(p), "%s/%s.erofs", store, x);
	assert_int_equal(access(p, F_OK), -1);
	/* a user whose directory names another image (the chat made again)
	 * or is gone is stale */
	snprintf(sbx2, sizeof(sbx2), "%s/sbx2", tmp);
	fake_user(store, sbx2, y);
	assert_int_equal(sbx_image_users(store, y), 1);
	snprintf(p, sizeof(p), "%s/image.digest", sbx2);
	put(p, z);
	assert_int_equal(sbx_image_users(store, y), 0);
	put(p, y);
	assert_int_equal(sbx_image_users(store, y), 0);  /* pruned */
	snprintf(sbx1, sizeof(sbx1), "%s/sbx3", tmp);
	fake_user(store, sbx1, y);
	sbx_image_rm_tree(sbx1);
	assert_int_equal(sbx_image_users(store, y), 0);
	/* rm by prefix and by profile; the profile's name goes too */
	assert_int_equal(sbx_image_rm(store, "0123", got, err, sizeof(err)),
	    SBX_IMG_MISSING);
	assert_int_equal(sbx_image_rm(store, "minimal", got, err, sizeof(err)),
	    0);
	assert_string_equal(got, y);
	snprintf(p, sizeof(p), "%s/profiles/minimal", store);
	assert_int_equal(access(p, F_OK), -1);
	/* a build whose builder is gone goes with the sweep; a running one
	 * (its lock held) stays */
	snprintf(p, sizeof(p), "%s/.build-1", store);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/.build-1/lock", store);
	put(p, "");
	snprintf(p, sizeof(p), "%s/.build-2", store);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/.build-2/lock", store);
	put(p, "");
	fd = open(p, O_RDWR);
	assert_true(fd >= 0 && flock(fd, LOCK_EX) == 0);
	(void)sbx_image_sweep(store);
	snprintf(p, sizeof(p), "%s/.build-1", store);
	assert_int_equal(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/.build-2", store);
	assert_int_equal(access(p, F_OK), 0);
	close(fd);
}

static void
t_elf_static(void **state)
{
	const char *bld = getenv("SLUICE_BUILDDIR");
	char p[512];

	(void)state;
	assert_false(sbx_elf_static("/proc/self/exe"));  /* dynamic */
	assert_false(sbx_elf_static("/etc/passwd"));
	assert_false(sbx_elf_static("/nonexistent"));
	snprintf(p, sizeof(p), "%s/sandbox-glue/shim/sluice-shim-static", bld ?
	    bld : ".");
	if (access(p, F_OK) == 0)
		assert_true(sbx_elf_static(p));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_names),
		cmocka_unit_test(t_profile_parse),
		cmocka_unit_test_setup_teardown(t_profile_load, setup, teardown),
		cmocka_unit_test(t_profiles_of_the_tree),
		cmocka_unit_test(t_inputs),
		cmocka_unit_test_setup_teardown(t_store, setup, teardown),
		cmocka_unit_test(t_elf_static),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
