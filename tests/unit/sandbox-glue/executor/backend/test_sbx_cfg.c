/*
 * test_sbx_cfg.c: sluice-run's configuration checks, record files and
 * name checks (sandbox-glue/executor/backend/sbx_cfg.c), and the
 * sandboxes' seccomp filter (sbx_seccomp.c) in a child of the test.
 */
#include "sluice-config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "sandbox-glue/executor/backend/sbx-int.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

static int
parse(struct sbx_cfg *c, const char *text, char *err, size_t errlen)
{
	sbx_cfg_defaults(c, "/run/sluice-run", "/run/sluice/control.sock",
	    "/usr/bin/sluice-shim");
	err[0] = '\0';
	return sbx_cfg_parse(c, text, strlen(text), "t.json", err, errlen);
}

static void
t_cfg_defaults_and_values(void **state)
{
	struct sbx_cfg c;
	char err[256];

	(void)state;
	assert_int_equal(parse(&c, "{}", err, sizeof(err)), 0);
	assert_int_equal(c.timeout_default, 120);
	assert_int_equal(c.timeout_max, 1680);
	assert_int_equal(c.output_cap, 65536);
	assert_int_equal(c.max_file_bytes, 64l << 20);
	assert_string_equal(c.backend, "ns");
	assert_string_equal(c.tier, "registries");
	assert_int_equal(c.uid_base, 1000000000ul);
	assert_int_equal(c.lim.memory_bytes, 2048ull << 20);
	assert_int_equal(parse(&c, "{\"backend\":\"gvisor\",\"timeout\":30,"
	    "\"cgroups\":false,\"limits\":{\"memory_mb\":256,\"nproc\":0}}",
	    err, sizeof(err)), 0);
	assert_string_equal(c.backend, "gvisor");
	assert_int_equal(c.timeout_default, 30);
	assert_string_equal(c.cgroups, "off");
	assert_int_equal(c.lim.memory_bytes, 256ull << 20);
	assert_int_equal(c.lim.nproc, 0);
	assert_int_equal(parse(&c, "{\"cgroups\":\"auto\"}", err,
	    sizeof(err)), 0);
	assert_string_equal(c.cgroups, "");
	assert_int_equal(parse(&c, "{\"max_file_bytes\":1}", err,
	    sizeof(err)), 0);
	assert_int_equal(c.max_file_bytes, 1);
	assert_string_equal(c.workspace_root, "");
	assert_int_equal(parse(&c, "{\"workspace_root\":\"/srv/ws\"}", err,
	    sizeof(err)), 0);
	assert_string_equal(c.workspace_root, "/srv/ws");
}

/* The image settings: defaults, values as kept, and who may use which
 * profile. */
static void
t_cfg_images(void **state)
{
	struct sbx_cfg c;
	char err[256];

	(void)state;
	assert_int_equal(parse(&c, "{}", err, sizeof(err)), 0);
	assert_string_equal(c.image_dir, "/var/lib/sluice-run/images");
	assert_string_equal(c.profiles_dir, "/etc/sluice/profiles");
	assert_string_equal(c.profile, "host");
	assert_string_equal(c.image_sources, "");
	assert_true(sbx_cfg_profile_ok(&c, "acme", "base"));
	assert_true(sbx_cfg_profile_ok(&c, "", "host"));
	assert_int_equal(parse(&c, "{\"image_dir\":\"/srv/img\",\"profile\":"
	    "\"base\",\"shim_static\":\"/s\",\"image_suite\":\"trixie\","
	    "\"image_sources\":[\"deb http://m/debian trixie main\",\"deb "
	    "http://m/s trixie-security main contrib\"],\"tenant_profiles\":"
	    "{\"acme\":[\"base\",\"media\"],\"lab\":[],\"*\":[\"minimal\","
	    "\"host\"]}}", err, sizeof(err)), 0);
	assert_string_equal(c.image_dir, "/srv/img");
	assert_string_equal(c.profile, "base");
	assert_string_equal(c.image_suite, "trixie");
	assert_string_equal(c.image_sources, "deb http://m/debian trixie main\n"
	    "deb http://m/s trixie-security main contrib\n");
	assert_string_equal(c.tenant_profiles, "acme base media\nlab\n"
	    "* minimal host\n");
	/* a tenant's own line decides, else the "*" line */
	assert_true(sbx_cfg_profile_ok(&c, "acme", "base"));
	assert_true(sbx_cfg_profile_ok(&c, "acme", "media"));
	assert_false(sbx_cfg_profile_ok(&c, "acme", "minimal"));
	assert_false(sbx_cfg_profile_ok(&c, "acme", "bas"));
	assert_false(sbx_cfg_profile_ok(&c, "acme", "basex"));
	assert_false(sbx_cfg_profile_ok(&c, "lab", "minimal"));
	assert_false(sbx_cfg_profile_ok(&c, "ac", "base"));
	assert_true(sbx_cfg_profile_ok(&c, "ac", "minimal"));
	assert_true(sbx_cfg_profile_ok(&c, "", "host"));
	assert_false(sbx_cfg_profile_ok(&c, "", "base"));
	/* without a "*" line, a tenant not named may use nothing */
	assert_int_equal(parse(&c, "{\"tenant_profiles\":{\"acme\":[\"base\"]}}",
	    err, sizeof(err)), 0);
	assert_false(sbx_cfg_profile_ok(&c, "other", "base"));
	assert_false(sbx_cfg_profile_ok(&c, "", "host"));
	assert_true(sbx_cfg_profile_ok(&c, "acme", "base"));
}

/* A timeout_max under the default lowers the default timeout. */
static void
t_cfg_timeout_max_lowers_default(void **state)
{
	struct sbx_cfg c;
	char err[256];

	(void)state;
	assert_int_equal(parse(&c, "{\"timeout_max\":60}", err, sizeof(err)),
	    0);
	assert_int_equal(c.timeout_default, 60);
	assert_int_equal(parse(&c, "{\"timeout_max\":60,\"timeout\":61}", err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "t.json:1:29: timeout: 61 is out of "
	    "range (1..60, timeout_max)"));
}

static void
t_cfg_refusals(void **state)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{ "{\"bogus\":1}", "t.json:1:2: bogus: unknown key (expected "
		    "one of: state_dir, " },
		{ "{\"limits\":{\"cpu\":1}}", "t.json:1:12: limits.cpu: unknown "
		    "key" },
		{ "{\"limits\":[]}", "limits: expected an object" },
		{ "{\"timeout\":0}", "timeout: 0 is out of range (1..1680)" },
		{ "{\"timeout_max\":1681}", "timeout_max: 1681 is out of range" },
		{ "{\"output_cap\":\"1\"}", "output_cap: expected an integer" },
		{ "{\"max_file_bytes\":0}", "max_file_bytes: 0 is out of range" },
		{ "{\"max_file_bytes\":1099511627777}", "max_file_bytes: "
		    "1099511627777 is out of range (1..1099511627776)" },
		{ "{\"uid_base\":1000}", "uid_base: 1000 is out of range" },
		{ "{\"backend\":\"lxc\"}", "backend: unknown backend \"lxc\"" },
		{ "{\"tier\":\"\\u001b[2J\"}", "tier: bad tier name \"?[2J\"" },
		{ "{\"cgroups\":\"v3\"}", "cgroups: unknown cgroups \"v3\"" },
		{ "{\"tier\":\"a\",\"tier\":\"b\"}", "t.json:1:13: tier: "
		    "duplicate object key" },
		{ "[]", "t.json:1:1: (root): expected an object" },
		{ "{\"\\u001b[2J\":1}", "[\"?[2J\"]: unknown key" },
		{ "{\"workspace_root\":\"/\"}", "workspace_root: expected an "
		    "absolute path below" },
		{ "{\"workspace_root\":\"/srv\"}", "workspace_root: expected" },
		{ "{\"workspace_root\":\"/etc/ws\"}", "workspace_root: expected" },
		{ "{\"workspace_root\":\"srv/ws\"}", "workspace_root: expected" },
		{ "{\"image_dir\":\"img\"}", "image_dir: expected an absolute" },
		{ "{\"image_dir\":\"\"}", "image_dir: expected an absolute" },
		{ "{\"profiles_dir\":\"p\"}", "profiles_dir: expected an "
		    "absolute path of one line (or \"\", none)" },
		{ "{\"shim_static\":\"s\"}", "shim_static: expected an "
		    "absolute" },
		{ "{\"profile\":\"../x\"}", "profile: bad profile name "
		    "\"../x\" (expected \"host\" or" },
		{ "{\"profile\":\"\"}", "profile: bad profile name \"\"" },
		{ "{\"image_suite\":\"a b\"}", "image_suite: bad suite name" },
		{ "{\"image_sources\":\"deb x\"}", "image_sources: expected an "
		    "array" },
		{ "{\"image_sources\":[\"http://m/debian\"]}",
		    "image_sources[0]: expected a line \"deb URI" },
		{ "{\"image_sources\":[\"deb http://m\\nfoo\"]}",
		    "image_sources[0]: expected a line" },
		{ "{\"tenant_profiles\":[]}", "tenant_profiles: expected an "
		    "object" },
		{ "{\"tenant_profiles\":{\"a b\":[]}}", "t.json:1:21: "
		    "tenant_profiles[\"a b\"]: expected a tenant's id or \"*\"" },
		{ "{\"tenant_profiles\":{\"a\":\"base\"}}", "tenant_profiles.a: "
		    "expected an array" },
		{ "{\"tenant_profiles\":{\"a\":[\"x y\"]}}", "t.json:1:26: "
		    "tenant_profiles.a[0]: bad profile name \"x y\"" },
	};
	struct sbx_cfg c;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(&c, bad[i].text, err, sizeof(err)), -1);
		if (strstr(err, bad[i].msg) == NULL)
			fail_msg("%s: got \"%s\", want \"%s\"", bad[i].text, err,
			    bad[i].msg);
	}
}

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void
t_rec_round_trip_and_refusals(void **state)
{
	struct sbx_rec r, again;
	char err[256], *d;
	json_t *o;

	(void)state;
	memset(&r, 0, sizeof(r));
	snprintf(r.chat, sizeof(r.chat), "c1");
	snprintf(r.user, sizeof(r.user), "Zo\xc3\xab");
	snprintf(r.backend, sizeof(r.backend), "gvisor");
	snprintf(r.workspace, sizeof(r.workspace), "/w");
	r.host_uid = 1000001000u;
	r.slot = 3;
	r.init_start = 1ull << 40;
	r.workspace_made = 1;
	r.workspace_given = 1;
	r.workspace_uid = 1234;
	r.workspace_gid = 4321;
	r.workspace_mode = 02755;
	r.lim.memory_bytes = 5;
	snprintf(r.profile, sizeof(r.profile), "base");
	snprintf(r.image, sizeof(r.image), "%064d", 7);
	snprintf(r.image_path, sizeof(r.image_path), "/var/lib/img/%064d.erofs",
	    7);
	o = sbx_rec_json(&r);
	assert_non_null(o);
	d = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	assert_int_equal(sbx_rec_parse(&again, d, strlen(d), err, sizeof(err)),
	    0);
	free(d);
	assert_memory_equal(&r, &again, sizeof(r));
#define BAD(text, msg) do { \
	assert_int_equal(sbx_rec_parse(&again, text, strlen(text), err, \
	    sizeof(err)), -1); \
	assert_non_null(strstr(err, msg)); \
} while (0)
	BAD("{\"chat\":\"../x\"}", "chat");
	BAD("{\"chat\":\"c\",\"slot\":1024}", "slot");
	BAD("{\"chat\":\"c\",\"init_pid\":-2}", "init_pid");
	BAD("{\"chat\":\"c\",\"suspended\":1}", "suspended: a boolean");
	BAD("{\"chat\":\"c\",\"tier\":\"0123456789abcdef\"}", "tier: a string");
	BAD("{\"chat\":\"c\",\"limits\":{\"pids\":-1}}", "pids");
	BAD("{\"chat\":\"c\",\"workspace_mode\":4096}", "workspace_mode");
	BAD("[]", "not a JSON object");
	/* a record names an image of a store, no other file */
	BAD("{\"chat\":\"c\",\"profile\":\"a/b\"}", "profile");
	BAD("{\"chat\":\"c\",\"image\":\"abc\",\"image_path\":\"/i/abc.erofs\"}",
	    "image: a sha256");
	BAD("{\"chat\":\"c\",\"image\":\"" D64 "\",\"image_path\":\"/i/"
	    D64 ".img\"}", "image: a sha256");
	BAD("{\"chat\":\"c\",\"image\":\"" D64 "\",\"image_path\":\"/i/"
	    "1" D64 ".erofs\"}", "image: a sha256");
	BAD("{\"chat\":\"c\",\"image\":\"" D64 "\",\"image_path\":\"i/"
	    D64 ".erofs\"}", "image: a sha256");
	BAD("{\"chat\":\"c\",\"image\":\"" D64 "\",\"image_path\":\"/i/../"
	    D64 ".erofs\"}", "image: a sha256");
	BAD("{\"chat\":\"c\",\"image\":\"" D64 "\"}", "image: a sha256");
	BAD("{\"chat\":\"c\",\"image_path\":\"/i/" D64 ".erofs\"}",
	    "image_path without image");
	{
		const char *ok = "{\"chat\":\"c\",\"image\":\"" D64 "\","
		    "\"image_path\":\"/i/" D64 ".erofs\"}";

		assert_int_equal(sbx_rec_parse(&again, ok, strlen(ok), err,
		    sizeof(err)), 0);
	}
#undef BAD
}

static void
t_names(void **state)
{
	char out[64], big[200];

	(void)state;
	assert_true(sbx_user_ok(""));
	assert_true(sbx_user_ok("alice@example.org"));
	assert_true(sbx_user_ok("Zo\xc3\xab"));
	assert_false(sbx_user_ok("a\x1b[2J"));
	assert_false(sbx_user_ok("a\x7f"));
	assert_false(sbx_user_ok("a\xc2\x9b"));
	assert_false(sbx_user_ok("\xff"));
	assert_false(sbx_user_ok("\xed\xa0\x80"));     /* a surrogate */
	memset(big, 'x', 129);
	big[129] = '\0';
	assert_false(sbx_user_ok(big));
	big[128] = '\0';
	assert_true(sbx_user_ok(big));
	sbx_text_safe("a\x1b]0;x\x07 \\ Zo\xc3\xab \xc2\x9b\xff", out,
	    sizeof(out));
	assert_string_equal(out, "a\\033]0;x\\007 \\134 Zo\xc3\xab "
	    "\\302\\233\\377");
	sbx_text_safe("\x01\x01", out, 6);      /* no escape cut in two */
	assert_string_equal(out, "\\001");
	/* bidirectional overrides and invisible characters, as bytes */
	sbx_text_safe("a\xe2\x80\xae" "b\xe2\x80\x8b" "c\xe2\x81\xa6" "d"
	    "\xef\xbb\xbf\xc2\xad\xe2\x80\xa8.", big, sizeof(big));
	assert_string_equal(big, "a\\342\\200\\256b\\342\\200\\213c"
	    "\\342\\201\\246d\\357\\273\\277\\302\\255\\342\\200\\250.");
	/* what reads as it is stays */
	sbx_text_safe("\xe2\x80\x90 \xe2\x82\xac \xf0\x9f\x98\x80", out,
	    sizeof(out));
	assert_string_equal(out, "\xe2\x80\x90 \xe2\x82\xac \xf0\x9f\x98\x80");
	sbx_text_safen("ab\x1b", 2, out, sizeof(out));
	assert_string_equal(out, "ab");
	/* never a workspace nor their root */
	assert_true(sbx_path_system("/"));
	assert_true(sbx_path_system("//"));
	assert_true(sbx_path_system("/home"));
	assert_true(sbx_path_system("/home/"));
	assert_true(sbx_path_system("/etc/x"));
	assert_true(sbx_path_system("/usr"));
	assert_true(sbx_path_system("/root/ws"));
	assert_true(sbx_path_system("/proc/1/root"));
	assert_true(sbx_path_system("rel/x"));
	assert_false(sbx_path_system("/srv/ws"));
	assert_false(sbx_path_system("/var/lib/sluice-ws"));
	assert_false(sbx_path_system("/etcetera/ws"));
	assert_true(sbx_id_ok("chat-1.a_b", SBX_ID_MAX));
	assert_false(sbx_id_ok(".lock", SBX_ID_MAX));
	assert_false(sbx_id_ok("-x", SBX_ID_MAX));
}

static void
t_broker_answers(void **state)
{
	char buf[] = "HTTP/1.1 201 Created\r\nA: b\r\n\r\n{\"socket\":"
	    "\"/run/s/c1/proxy.sock\"}", dir[64], err[128], msg[64];
	const char *body;
	int st;

	(void)state;
	assert_int_equal(sbx_http_split(buf, strlen(buf), &st, &body), 0);
	assert_int_equal(st, 201);
	assert_int_equal(sbx_broker_socket(body, dir, sizeof(dir), err,
	    sizeof(err)), 0);
	assert_string_equal(dir, "/run/s/c1");
	assert_int_equal(sbx_broker_socket("{\"socket\":\"/p.sock\"}", dir,
	    sizeof(dir), err, sizeof(err)), -1);
	assert_int_equal(sbx_broker_socket("{\"socket\":\"p.sock\"}", dir,
	    sizeof(dir), err, sizeof(err)), -1);
	assert_int_equal(sbx_http_split("HTTP/1.1 2x1 X\r\n", 16, &st, &body),
	    -1);
	assert_int_equal(sbx_http_split("SSH-2.0-x\r\n", 11, &st, &body), -1);
	sbx_broker_msg("{\"error\":\"bad \\u001b[2J\\nnext\"}", msg,
	    sizeof(msg));
	assert_string_equal(msg, "bad \\033[2J");
	sbx_broker_msg("{\"error\":{\"code\":\"conflict\",\"message\":"
	    "\"session c1 exists\"}}", msg, sizeof(msg));
	assert_string_equal(msg, "session c1 exists");

	/* one JSON object and nothing else: a key twice, text after it */
	assert_int_equal(sbx_broker_socket("{\"socket\":\"/run/s/a/p.sock\","
	    "\"socket\":\"/run/s/b/p.sock\"}", dir, sizeof(dir), err,
	    sizeof(err)), -1);
	assert_int_equal(sbx_broker_socket("{\"socket\":\"/run/s/a/p.sock\"}"
	    " {}", dir, sizeof(dir), err, sizeof(err)), -1);
	/* an answer with a NUL byte is not one: the body after it would be
	 * another answer to another reader */
	{
		static const char nul[] = "HTTP/1.1 201 Created\r\n\r\n"
		    "{\"socket\":\"/run/s/c1/p.sock\"}\0{\"socket\":\"/x/p\"}";

		assert_int_equal(sbx_http_split(nul, sizeof(nul) - 1, &st,
		    &body), -1);
	}
}

/* The compiled program is well-formed hex, and loaded (no privilege
 * needed under no_new_privs) it refuses and lets through as meant. */
static void
t_seccomp(void **state)
{
	char err[256], *hex;
	size_t i, n;
	pid_t pid;
	int st;

	(void)state;
	hex = sbx_seccomp_hex(err, sizeof(err));
	if (hex == NULL)
		fail_msg("sbx_seccomp_hex: %s", err);
	n = strlen(hex);
	assert_true(n > 0 && n % 16 == 0);
	for (i = 0; i < n; i++)
		assert_non_null(strchr("0123456789abcdef", hex[i]));
	free(hex);
	if ((pid = fork()) == 0) {
		int fd;

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		    sbx_seccomp_load(err, sizeof(err)) != 0)
			_exit(10);
		errno = 0;
		if (syscall(SYS_keyctl, 0, -3, 0) != -1 || errno != EPERM)
			_exit(11);
		if (syscall(SYS_unshare, 0x10000000) != -1 || errno != EPERM)
			_exit(12);
		if (socket(AF_NETLINK, SOCK_RAW, 0) != -1 ||
		    errno != EAFNOSUPPORT)
			_exit(13);
		if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
			_exit(14);
		close(fd);
		if (syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
			_exit(15);
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_cfg_defaults_and_values),
		cmocka_unit_test(t_cfg_timeout_max_lowers_default),
		cmocka_unit_test(t_cfg_images),
		cmocka_unit_test(t_cfg_refusals),
		cmocka_unit_test(t_rec_round_trip_and_refusals),
		cmocka_unit_test(t_names),
		cmocka_unit_test(t_broker_answers),
		cmocka_unit_test(t_seccomp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
