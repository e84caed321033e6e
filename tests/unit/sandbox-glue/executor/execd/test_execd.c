/*
 * test_execd.c: sluice-execd's pure parts: the configuration (defaults,
 * line:column of errors, maxima), route patterns, files paths, Range,
 * the create and command bodies (an app may ask for less than the
 * maximum, never more), and output bytes as JSON text.
 */
#include "sluice-config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "proxy/lib/config.h"
#include "sandbox-glue/executor/execd/execd-int.h"

static int
cfg(struct xd_cfg *c, const char *text, char *err, size_t errlen)
{
	xd_cfg_defaults(c);
	err[0] = '\0';
	return xd_cfg_parse(c, text, strlen(text), "x.json", err, errlen);
}

/* "pools": each entry's limits read as a create's (issue 26 point 1) */
static void
t_cfg_pools(void **state)
{
	static struct xd_cfg c;
	char err[512];

	(void)state;
	assert_int_equal(cfg(&c, "{}", err, sizeof(err)), 0);
	assert_int_equal(c.npools, 0);
	assert_int_equal(c.pool_fills, 1);
	assert_int_equal(cfg(&c, "{\"limits\": {\"memory_mb\": 512},\n"
	    "\"pools\": [{\"size\": 3, \"limits\": {\"disk_mb\": 16}},\n"
	    "{\"backend\": \"gvisor\", \"size\": 1}], \"pool_fills\": 2}",
	    err, sizeof(err)), 0);
	assert_int_equal(c.npools, 2);
	assert_int_equal(c.pool_fills, 2);
	assert_string_equal(c.pools[0].backend, "ns");
	assert_string_equal(c.pools[0].profile, "host");
	assert_int_equal(c.pools[0].size, 3);
	/* the defaults as a create gets them, the workspace asked for */
	assert_int_equal(c.pools[0].lim.sbx.memory_bytes, 512ull << 20);
	assert_int_equal(c.pools[0].lim.disk_bytes, 16ull << 20);
	assert_int_equal(c.pools[0].lim.inodes, (16ull << 20) /
	    XD_WS_INODE_BYTES);
	assert_string_equal(c.pools[1].backend, "gvisor");
	assert_true(xd_lims_eq(&c.pools[1].lim, &c.def));
	assert_int_equal(cfg(&c, "{\"pools\": [{\"size\": 1,\n"
	    "\"limits\": {\"disk_mb\": 4}}]}", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "x.json:1:12: pools[0]: limits.disk_mb"));
	assert_int_equal(cfg(&c, "{\"pools\": [{\"size\": 1},\n"
	    "{\"size\": 2}]}", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "[1]: the same backend, profile and "
	    "limits as [0]"));
	assert_int_equal(cfg(&c, "{\"pools\": [{\"size\": 2000}]}", err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "pools[0].size: 2000 is out of range "
	    "(0..1024)"));
	assert_int_equal(cfg(&c, "{\"pools\": [{\"sise\": 2}]}", err,
	    sizeof(err)), -1);
	assert_int_equal(cfg(&c, "{\"pool_fills\": 0}", err, sizeof(err)),
	    -1);
	assert_int_equal(cfg(&c, "{\"pools\": {}}", err, sizeof(err)), -1);
}

/* One reader for both daemons (issue 21 point 5): the same fault in
 * sluice-execd's file and in sluiced.json is worded the same way, at
 * file:line:column and the key's path. */
static void
t_cfg_same_words(void **state)
{
	static const struct {
		const char *xd, *px, *want;
	} t[] = {
		{ "{\"slots\": \"x\"}", "{\"dns\": {\"timeout_ms\": \"x\"}}",
		    ": expected an integer" },
		{ "{\"slots\": 5000}", "{\"dns\": {\"timeout_ms\": -5}}",
		    " is out of range (" },
		{ "{\"nope\": 1}", "{\"nope\": 1}",
		    "x.json:1:2: nope: unknown key (expected one of: " },
		{ "{\"log\": 1}", "{\"log\": 1}",
		    "x.json:1:9: log: expected an object" },
		{ "{\"log\": {\"path\": 1}}", "{\"user\": 1}",
		    ": expected a string" },
		{ "{\"tcp\": {\"plain_http\": 1}}",
		    "{\"tls\": {\"sni_check\": 1}}",
		    ": expected true or false" },
		{ "{\"slots\": 1,\n \"slots\": 2}", "{\"user\": \"a\",\n "
		    "\"user\": \"b\"}", "x.json:2:2: " },
		{ "[]", "[]", "x.json:1:1: (root): " },
	};
	static struct xd_cfg c;
	char xerr[512], perr[512];
	struct cfg *pc;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		assert_int_equal(cfg(&c, t[i].xd, xerr, sizeof(xerr)), -1);
		perr[0] = '\0';
		pc = cfg_load_buffer(t[i].px, strlen(t[i].px), "x.json", perr,
		    sizeof(perr));
		assert_null(pc);
		if (strstr(xerr, t[i].want) == NULL ||
		    strstr(perr, t[i].want) == NULL)
			fail_msg("%zu: want %s\n execd:   %s\n sluiced: %s", i,
			    t[i].want, xerr, perr);
	}
}

static void
t_cfg(void **state)
{
	struct xd_cfg c;
	char err[512];

	(void)state;
	assert_int_equal(cfg(&c, "{}", err, sizeof(err)), 0);
	assert_int_equal(c.def.timeout_s, 120);
	assert_int_equal(c.max.timeout_s, 1680);
	assert_int_equal(c.def.output_cap, 65536);
	assert_int_equal(c.socket_mode, 0660);
	assert_string_equal(c.tier, "off");
	assert_int_equal(cfg(&c, "{\"quotas\": {\"per_user\": 3}, "
	    "\"limits\": {\"memory_mb\": 100}, \"socket\": {\"mode\": "
	    "\"0600\", \"group\": \"4242\"}, \"roles\": {\"app\": "
	    "{\"uids\": [1234], \"groups\": [77]}}}", err, sizeof(err)), 0);
	assert_int_equal(c.max_per_user, 3);
	assert_int_equal(c.def.sbx.memory_bytes, 100ull << 20);
	assert_int_equal(c.socket_gid, 4242);
	assert_int_equal(c.uids[XD_ROLE_APP].v[0], 1234);
	/* positions: the value of a nested key, an unknown key itself */
	assert_int_equal(cfg(&c, "{\n  \"limits\": {\n    \"pids\": -1\n  }\n}",
	    err, sizeof(err)), -1);
	assert_non_null(strstr(err, "x.json:3:13: limits.pids: "));
	assert_int_equal(cfg(&c, "{\"a\": 1}", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "x.json:1:2: a: unknown key"));
	assert_int_equal(cfg(&c, "{\"tier\": \"a b\"}", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "x.json:1:10: tier:"));
	/* a syntax error: jansson's position */
	assert_int_equal(cfg(&c, "{\n\"x\" 1}", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "x.json:2:"));
	/* a default above its maximum; TCP without TLS */
	assert_int_equal(cfg(&c, "{\"limits\": {\"timeout_s\": 100}, "
	    "\"limits_max\": {\"timeout_s\": 50}}", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "limits.timeout_s"));
	assert_int_equal(cfg(&c, "{\"tcp\": {\"listen\": \"127.0.0.1:1\"}}",
	    err, sizeof(err)), -1);
	assert_non_null(strstr(err, "plain_http is true: tls_cert and "
	    "tls_key are required"));
	assert_int_equal(cfg(&c, "{\"socket\": {\"mode\": \"0066\"}}", err,
	    sizeof(err)), -1);
	assert_int_equal(cfg(&c, "{\"backend\": \"kvm\"}", err, sizeof(err)),
	    -1);
	/* the audit log: a default under /var/log/sluice, an absolute path */
	assert_int_equal(cfg(&c, "{}", err, sizeof(err)), 0);
	assert_string_equal(c.audit_log, "/var/log/sluice/execd.jsonl");
	assert_int_equal(c.events_buffer, 1048576);
	assert_int_equal(cfg(&c, "{\"log\": {\"path\": \"/x/a.jsonl\"}}", err,
	    sizeof(err)), 0);
	assert_string_equal(c.audit_log, "/x/a.jsonl");
	assert_int_equal(cfg(&c, "{\"log\": {\"path\": \"rel\"}}", err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "log.path"));
	assert_int_equal(cfg(&c, "{\"log\": {\"file\": \"/x\"}}", err,
	    sizeof(err)), -1);
	/* lifecycle and command quotas: defaults, keys, ranges */
	assert_int_equal(cfg(&c, "{}", err, sizeof(err)), 0);
	assert_int_equal(c.idle_after, 600);
	assert_int_equal(c.remove_after, 86400);
	assert_string_equal(c.archive_dir, "/var/lib/sluice-execd/.archive");
	assert_int_equal(c.max_cmds, 256);
	assert_int_equal(c.max_cmds_tenant, 64);
	assert_int_equal(cfg(&c, "{\"state_dir\": \"/s\", \"lifecycle\": "
	    "{\"idle_after\": 2, \"remove_after\": 5}, \"quotas\": "
	    "{\"commands\": 3, \"commands_per_tenant\": 0}}", err,
	    sizeof(err)), 0);
	assert_int_equal(c.idle_after, 2);
	assert_int_equal(c.remove_after, 5);
	assert_string_equal(c.archive_dir, "/s/.archive");
	assert_int_equal(c.max_cmds, 3);
	assert_int_equal(c.max_cmds_tenant, 0);
	assert_int_equal(cfg(&c, "{\"lifecycle\": {\"archive_dir\": "
	    "\"/a\", \"idle_after\": 0}}", err, sizeof(err)), 0);
	assert_string_equal(c.archive_dir, "/a");
	assert_int_equal(cfg(&c, "{\"lifecycle\": {\"idle_after\": 10, "
	    "\"remove_after\": 5}}", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "lifecycle.remove_after: at least"));
	assert_int_equal(cfg(&c, "{\"lifecycle\": {\"archive_dir\": "
	    "\"rel\"}}", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "lifecycle.archive_dir"));
	assert_int_equal(cfg(&c, "{\"lifecycle\": {\"idle\": 1}}", err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "lifecycle.idle: unknown key"));
	assert_int_equal(cfg(&c, "{\"lifecycle\": {\"idle_after\": -1}}",
	    err, sizeof(err)), -1);
	assert_int_equal(cfg(&c, "{\"quotas\": {\"commands\": -1}}", err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "quotas.commands"));
	/* the opensandbox block on the same rows: the path to the key */
	assert_int_equal(cfg(&c, "{\"opensandbox\": {\"api_keys\": [\n"
	    "  {\"name\": \"a\", \"nope\": 1}]}}", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "x.json:2:17: "
	    "opensandbox.api_keys[0].nope: unknown key (expected one of: name, file, tenant, user)"));
	assert_int_equal(cfg(&c, "{\"opensandbox\": {\"images\": "
	    "{\"i:1\": 5}}}", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "opensandbox.images[\"i:1\"]: expected a "
	    "string"));
}

static void
t_arch_entries(void **state)
{
	const char *c = NULL;

	(void)state;
	assert_null(xd_arch_refused("a/b.txt", 'f', NULL, 0, &c));
	assert_string_equal(c, "a/b.txt");
	assert_null(xd_arch_refused("./a", 'd', NULL, 0, &c));
	assert_string_equal(c, "a");
	assert_string_equal(xd_arch_refused("./", 'd', NULL, 0, &c), "");
	assert_string_equal(xd_arch_refused(".", 'd', NULL, 0, &c), "");
	assert_non_null(strstr(xd_arch_refused("/etc/x", 'f', NULL, 0, &c),
	    "absolute"));
	assert_non_null(strstr(xd_arch_refused("../x", 'f', NULL, 0, &c),
	    ".."));
	assert_non_null(strstr(xd_arch_refused("a/../../x", 'f', NULL, 0,
	    &c), ".."));
	assert_non_null(strstr(xd_arch_refused("a/..", 'd', NULL, 0, &c),
	    ".."));
	assert_null(xd_arch_refused("a/..b", 'f', NULL, 0, &c));
	/* hard links: to a name inside (the restore then wants a file it
	 * made from the same archive), nothing else */
	assert_non_null(strstr(xd_arch_refused("h", 'f', NULL, 1, &c),
	    "hard link"));
	assert_non_null(strstr(xd_arch_refused("h", 'f', "/etc/shadow", 1,
	    &c), "outside"));
	assert_non_null(strstr(xd_arch_refused("h", 'f', "a/../../x", 1, &c),
	    "outside"));
	assert_non_null(strstr(xd_arch_refused("h", 'f', ".", 1, &c),
	    "hard link"));
	assert_null(xd_arch_refused("h", 'f', "./a/big", 1, &c));
	assert_string_equal(c, "h");
	assert_null(xd_arch_refused("d/h", 0, "big", 1, &c));
	assert_non_null(strstr(xd_arch_refused("../h", 'f', "big", 1, &c),
	    ".."));
	assert_non_null(xd_arch_refused("dev", '?', NULL, 0, &c));
	/* symbolic links: any target, relative and climbing out or
	 * absolute (a venv's bin/python): nothing follows them */
	assert_null(xd_arch_refused("l", 'l', "b.txt", 0, &c));
	assert_null(xd_arch_refused("a/l", 'l', "../b.txt", 0, &c));
	assert_null(xd_arch_refused("a/./l", 'l', "../b", 0, &c));
	assert_null(xd_arch_refused("venv/bin/python", 'l',
	    "/usr/bin/python3", 0, &c));
	assert_null(xd_arch_refused("venv/bin/python", 'l',
	    "../../../usr/bin/python3", 0, &c));
	assert_null(xd_arch_refused("l", 'l', "../etc", 0, &c));
	assert_null(xd_arch_refused("./a/./l", 'l', "./../..", 0, &c));
	assert_non_null(xd_arch_refused("l", 'l', "", 0, &c));
	assert_non_null(xd_arch_refused("l", 'l', NULL, 0, &c));
	assert_non_null(xd_arch_refused(NULL, 'f', NULL, 0, &c));
}

/* An archive_dir that is there: the daemon's, no group or other write
 * (who may write there may swap one sandbox's archive for another's). */
static void
t_arch_dir(void **state)
{
	struct xd_cfg c;
	char dir[] = "/tmp/test_execd.XXXXXX", err[XD_ERR_MAX];

	(void)state;
	xd_cfg_defaults(&c);
	assert_non_null(mkdtemp(dir));
	snprintf(c.archive_dir, sizeof(c.archive_dir), "%s/none", dir);
	assert_int_equal(xd_arch_dir_check(&c, err, sizeof(err)), 0);
	snprintf(c.archive_dir, sizeof(c.archive_dir), "%s", dir);
	assert_int_equal(chmod(dir, 0700), 0);
	assert_int_equal(xd_arch_dir_check(&c, err, sizeof(err)), 0);
	assert_int_equal(chmod(dir, 0770), 0);
	assert_int_equal(xd_arch_dir_check(&c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "lifecycle.archive_dir"));
	assert_int_equal(chmod(dir, 0757), 0);
	assert_int_equal(xd_arch_dir_check(&c, err, sizeof(err)), -1);
	assert_int_equal(rmdir(dir), 0);
}

static void
t_routes(void **state)
{
	char *a[XD_ARGS_MAX];

	(void)state;
	assert_int_equal(xd_route_match("/v1/sandboxes/{id}", "/v1/sandboxes/"
	    "s%2D1", a, XD_ARGS_MAX), 1);
	assert_string_equal(a[0], "s-1");
	xd_args_free(a, XD_ARGS_MAX);
	assert_int_equal(xd_route_match("/v1/sandboxes/{id}", "/v1/sandboxes/"
	    "s1/exec", a, XD_ARGS_MAX), 0);
	assert_int_equal(xd_route_match("/v1/sandboxes/{id}", "/v1/sandboxes/",
	    a, XD_ARGS_MAX), 0);
	assert_int_equal(xd_route_match("/v1/sandboxes/{id}/files/{path}",
	    "/v1/sandboxes/s1/files/a/b%20c", a, XD_ARGS_MAX), 1);
	assert_string_equal(a[0], "s1");
	assert_string_equal(a[1], "a/b c");
	xd_args_free(a, XD_ARGS_MAX);
	/* a NUL or a broken escape does not decode */
	assert_int_equal(xd_route_match("/v1/sandboxes/{id}", "/v1/sandboxes/"
	    "a%00", a, XD_ARGS_MAX), -1);
	assert_int_equal(xd_route_match("/v1/sandboxes/{id}", "/v1/sandboxes/"
	    "a%4", a, XD_ARGS_MAX), -1);
}

static void
t_paths(void **state)
{
	char o[64];

	(void)state;
	assert_int_equal(xd_path_norm("a/./b//c", o, sizeof(o)), 0);
	assert_string_equal(o, "a/b/c");
	assert_int_equal(xd_path_norm("/workspace/a/../b", o, sizeof(o)), 0);
	assert_string_equal(o, "b");
	assert_int_equal(xd_path_norm("../../etc/passwd", o, sizeof(o)), 0);
	assert_string_equal(o, "etc/passwd");
	assert_int_equal(xd_path_norm("/workspace", o, sizeof(o)), 0);
	assert_string_equal(o, "");
	assert_int_equal(xd_path_norm("/etc/passwd", o, sizeof(o)), -1);
	assert_int_equal(xd_path_norm("/workspacex/a", o, sizeof(o)), -1);
}

static void
t_range(void **state)
{
	uint64_t f, t;

	(void)state;
	assert_int_equal(xd_range_parse("bytes=2-5", 10, &f, &t), 1);
	assert_true(f == 2 && t == 5);
	assert_int_equal(xd_range_parse("bytes=2-", 10, &f, &t), 1);
	assert_true(f == 2 && t == 9);
	assert_int_equal(xd_range_parse("bytes=-3", 10, &f, &t), 1);
	assert_true(f == 7 && t == 9);
	assert_int_equal(xd_range_parse("bytes=5-100", 10, &f, &t), 1);
	assert_true(t == 9);
	assert_int_equal(xd_range_parse("bytes=10-", 10, &f, &t), -1);
	assert_int_equal(xd_range_parse("bytes=1-2,4-5", 10, &f, &t), 0);
	assert_int_equal(xd_range_parse("items=1-2", 10, &f, &t), 0);
	assert_int_equal(xd_range_parse("bytes=5-2", 10, &f, &t), 0);
}

static void
t_bodies(void **state)
{
	struct xd_cfg c;
	struct xd_create_spec s;
	struct xd_cmd_spec cs;
	struct xd_perr e;
	json_t *j;
	char err[256];

	(void)state;
	assert_int_equal(cfg(&c, "{}", err, sizeof(err)), 0);
	memset(&e, 0, sizeof(e));
	j = json_loads("{\"id\":\"a\",\"limits\":{\"memory_mb\":512,"
	    "\"timeout_s\":60}}", 0, NULL);
	assert_int_equal(xd_create_parse(j, &c.def, &c.max, "off", "ns", &s,
	    &e), 0);
	assert_int_equal(s.lim.sbx.memory_bytes, 512ull << 20);
	assert_int_equal(s.lim.timeout_s, 60);
	assert_string_equal(s.tier, "off");
	json_decref(j);
	/* more than the maximum: refused, naming field and max */
	j = json_loads("{\"id\":\"a\",\"limits\":{\"memory_mb\":9000}}", 0,
	    NULL);
	assert_int_equal(xd_create_parse(j, &c.def, &c.max, "off", "ns", &s,
	    &e), -1);
	assert_int_equal(e.status, 400);
	assert_string_equal(json_string_value(json_object_get(e.extra,
	    "field")), "memory_mb");
	assert_int_equal(json_integer_value(json_object_get(e.extra, "max")),
	    8192);
	xd_perr_clear(&e);
	json_decref(j);
	j = json_loads("{\"cmd\":[\"echo\",\"x\"],\"env\":{\"A\":\"1\"},"
	    "\"cwd\":\"sub\"}", 0, NULL);
	assert_int_equal(xd_cmd_spec_parse(j, &c.def, c.max.timeout_s,
	    c.max.output_cap, 0, &cs, &e), 0);
	assert_string_equal(cs.argv[1], "x");
	assert_string_equal(cs.env[0], "A=1");
	assert_string_equal(cs.cwd, "/workspace/sub");
	assert_int_equal(cs.timeout_s, 120);
	assert_int_equal(cs.output_cap, 65536);
	xd_cmd_spec_free(&cs);
	json_decref(j);
	/* background: no deadline unless asked */
	j = json_loads("{\"shell\":\"true\"}", 0, NULL);
	assert_int_equal(xd_cmd_spec_parse(j, &c.def, c.max.timeout_s,
	    c.max.output_cap, 1, &cs, &e), 0);
	assert_int_equal(cs.timeout_s, 0);
	assert_string_equal(cs.argv[0], "/bin/sh");
	xd_cmd_spec_free(&cs);
	json_decref(j);
	j = json_loads("{\"shell\":\"true\",\"timeout_s\":5000}", 0, NULL);
	assert_int_equal(xd_cmd_spec_parse(j, &c.def, c.max.timeout_s,
	    c.max.output_cap, 0, &cs, &e), -1);
	xd_perr_clear(&e);
	json_decref(j);
	j = json_loads("{\"shell\":\"true\",\"cmd\":[\"x\"]}", 0, NULL);
	assert_int_equal(xd_cmd_spec_parse(j, &c.def, c.max.timeout_s,
	    c.max.output_cap, 0, &cs, &e), -1);
	xd_perr_clear(&e);
	json_decref(j);
}

static void
t_text(void **state)
{
	json_t *j;

	(void)state;
	j = xd_text_json((const unsigned char *)"a\xff" "b\xe2\x82\xac", 6, 0);
	assert_string_equal(json_string_value(j), "a\xef\xbf\xbd" "b\xe2\x82\xac");
	json_decref(j);
	j = xd_text_json((const unsigned char *)"\x00\x01", 2, 1);
	assert_string_equal(json_string_value(j), "AAE=");
	json_decref(j);
	/* a character cut at the end waits */
	assert_int_equal(xd_utf8_whole((const unsigned char *)"ab\xe2\x82", 4),
	    2);
	assert_int_equal(xd_utf8_whole((const unsigned char *)"ab\xff", 3), 3);
	assert_int_equal(xd_utf8_whole((const unsigned char *)"\xe2\x82\xac",
	    3), 3);
}

static int
install_ok(const char *manager, const char *pkg)
{
	struct xd_cfg c;
	struct xd_cmd_spec cs;
	struct xd_perr e;
	char m[8], err[256];
	json_t *j;
	int rc;

	assert_int_equal(cfg(&c, "{}", err, sizeof(err)), 0);
	memset(&e, 0, sizeof(e));
	j = json_pack("{s:s,s:[s]}", "manager", manager, "packages", pkg);
	rc = xd_install_parse(j, &c.def, c.max.timeout_s, c.max.output_cap,
	    &cs, m, sizeof(m), &e);
	if (rc == 0) {
		size_t n;

		for (n = 0; cs.argv[n] != NULL; n++)
			;
		/* the package is the last word, as given */
		assert_string_equal(cs.argv[n - 1], pkg);
		assert_string_equal(m, manager);
		assert_string_equal(cs.cwd, "/workspace");
		assert_int_equal(cs.timeout_s, 120);
		xd_cmd_spec_free(&cs);
	} else {
		assert_int_equal(e.status, 400);
		xd_perr_clear(&e);
	}
	json_decref(j);
	return rc == 0;
}

static void
t_install(void **state)
{
	static const char *const pip_good[] = { "requests", "Django==4.2.1",
	    "numpy>=1.24,<2", "a", "zope.interface", "pkg_name-x",
	    "requests[socks,security]~=2.31", "x===1.0.post1", "y!=1.*",
	    "z<=2.0rc1+local", NULL };
	static const char *const pip_bad[] = { "", "-e", "--user", "-r",
	    "http://h/p.whl", "p @ https://h/p", "p@x", "./p", "/abs",
	    "../p", "p;python_version<'3'", "p ==1", "p=1", "p==", "p[",
	    "p[]", "p[a,]", "p[-a]", "-p", "p-", ".p", "p==1,", "p==1;x",
	    "git+https://h/r", "p\\x", "p==1 --hash", "p=<1", NULL };
	static const char *const npm_good[] = { "left-pad", "@types/node",
	    "lodash@4.17.21", "react@^18.2.0", "x@>=1.2 <2 || 3.x",
	    "@scope/pkg@latest", "a.b_c~d", "x@~1.2.3-beta.1", NULL };
	static const char *const npm_bad[] = { "", "-g", "--global",
	    "Upper", "@scope", "@/x", "@s/", ".x", "_x", "-x", "x@",
	    "x@-g", "x@npm:y", "x@file:../y", "git+ssh://h/r",
	    "https://h/x.tgz", "./dir", "/abs", "user/repo", "x@github:u/r",
	    "x@1;rm", NULL };
	size_t i;

	(void)state;
	for (i = 0; pip_good[i] != NULL; i++)
		if (!install_ok("pip", pip_good[i]))
			fail_msg("pip refused \"%s\"", pip_good[i]);
	for (i = 0; pip_bad[i] != NULL; i++)
		if (install_ok("pip", pip_bad[i]))
			fail_msg("pip accepted \"%s\"", pip_bad[i]);
	for (i = 0; npm_good[i] != NULL; i++)
		if (!install_ok("npm", npm_good[i]))
			fail_msg("npm refused \"%s\"", npm_good[i]);
	for (i = 0; npm_bad[i] != NULL; i++)
		if (install_ok("npm", npm_bad[i]))
			fail_msg("npm accepted \"%s\"", npm_bad[i]);
	assert_false(install_ok("apt", "x"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_cfg),
		cmocka_unit_test(t_cfg_same_words),
		cmocka_unit_test(t_cfg_pools),
		cmocka_unit_test(t_arch_entries),
		cmocka_unit_test(t_arch_dir),
		cmocka_unit_test(t_routes),
		cmocka_unit_test(t_paths),
		cmocka_unit_test(t_range),
		cmocka_unit_test(t_bodies),
		cmocka_unit_test(t_text),
		cmocka_unit_test(t_install),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
