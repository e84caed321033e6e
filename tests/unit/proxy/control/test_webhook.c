/*
 * test_webhook.c: the delivery signature (vectors from Python's hmac),
 * start-up checks of the settings, and retries against a refused port
 * on 127.0.0.1.  webhook.c is linked alone: it needs nothing of the
 * daemon but an answer function and the logger, whose lines the test
 * reads through a sink.
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>
#include <jansson.h>

#include "proxy/lib/config.h"
#include "proxy/lib/log.h"
#include "proxy/control/webhook.h"

/* ------------------------------------------------------------------ */
/* What the module says (px_log's sink), and an answer function. */

static char logged[8192];

static void
log_sink(int prio, const char *line)
{
	size_t at = strlen(logged);

	(void)prio;
	snprintf(logged + at, sizeof(logged) - at, "%s\n", line);
}

static int
fake_answer(const char *id, enum pol_answer ans, char *msg, size_t msglen)
{
	(void)id; (void)ans;
	snprintf(msg, msglen, "not pending");
	return -1;
}

/* ------------------------------------------------------------------ */

static void
sig_is(const void *key, size_t keylen, const char *ts, const char *body,
    size_t bodylen, const char *want_hex)
{
	char sig[WH_SIG_LEN], want[WH_SIG_LEN];

	snprintf(want, sizeof(want), "sha256=%s", want_hex);
	assert_int_equal(wh_sign(key, keylen, ts, body, bodylen, sig), 0);
	assert_string_equal(sig, want);
}

static void
test_sign_vectors(void **state)
{
	static const char body[] = "{\"id\":\"p-1\",\"host\":\"example.com\"}";
	static const unsigned char bin[] = { 0, 1, 'k', 'e', 'y', 0xff };
	char longkey[100], longbody[1000], sig[WH_SIG_LEN];

	(void)state;
	/* python3: hmac.new(key, ts + b"." + body, hashlib.sha256) */
	sig_is("It is a secret", 14, "1700000000", body, strlen(body),
	    "8ae02b8c7df27a7206af64f5647c720b3e98d439b1dad02ef127422d42c40ed3");
	sig_is(bin, sizeof(bin), "0", "", 0,
	    "622569f8aa645112229024da5c98809b99dd122aefb55edc2287fa814aa50d1e");
	/* a key longer than the block is hashed first */
	memset(longkey, 'k', sizeof(longkey));
	memset(longbody, 'x', sizeof(longbody));
	sig_is(longkey, sizeof(longkey), "1700000000", longbody,
	    sizeof(longbody),
	    "e06ecdb6ea96934983075a075a7e2a66a594e5c1d42ab40fc283bc26a7e7e737");

	/* the timestamp is covered: another one, another signature */
	assert_int_equal(wh_sign("It is a secret", 14, "1700000001", body,
	    strlen(body), sig), 0);
	assert_string_not_equal(sig, "sha256=8ae02b8c7df27a7206af64f5647c720b"
	    "3e98d439b1dad02ef127422d42c40ed3");
	assert_int_equal(strlen(sig), WH_SIG_LEN - 1);
}

/* ------------------------------------------------------------------ */

static char tmpdir[64];

static void
write_file(const char *name, const char *text, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static struct cfg *
webhook_cfg(const char *url_host_port, const char *secret_path)
{
	char text[1024], err[256];
	struct cfg *c;

	snprintf(text, sizeof(text), "{\"webhook\": {\"url\": "
	    "\"https://%s/hook\", \"secret_file\": \"%s\", \"timeout_ms\": "
	    "1000, \"hosts\": {\"hooks.test\": [\"127.0.0.1\"]}}}",
	    url_host_port, secret_path);
	c = cfg_load_buffer(text, strlen(text), "t.json", err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	return c;
}

static void
test_init_checks(void **state)
{
	struct event_base *base = event_base_new();
	char err[512], path[128], empty[128];
	struct cfg *c;

	(void)state;
	assert_non_null(base);
	/* no webhook: not an approver */
	c = cfg_load_buffer("{}", 2, "t.json", err, sizeof(err));
	assert_non_null(c);
	assert_int_equal(wh_init(base, c, fake_answer, err, sizeof(err)), 0);
	assert_int_equal(wh_configured(), 0);
	cfg_free(c);

	/* a missing secret file stops the start */
	c = webhook_cfg("hooks.test", "/nonexistent/secret");
	assert_int_equal(wh_init(base, c, fake_answer, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/secret"));
	assert_int_equal(wh_configured(), 0);
	cfg_free(c);

	/* so does one that holds only a line end */
	write_file("empty", "\n", empty, sizeof(empty));
	c = webhook_cfg("hooks.test", empty);
	assert_int_equal(wh_init(base, c, fake_answer, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "empty"));
	cfg_free(c);

	/* a good one; the secret never reaches a message */
	write_file("secret", "hunter2-secret\n", path, sizeof(path));
	c = webhook_cfg("hooks.test", path);
	logged[0] = '\0';
	assert_int_equal(wh_init(base, c, fake_answer, err, sizeof(err)), 0);
	assert_int_equal(wh_configured(), 1);
	/* a reload that cannot read its secret keeps the running one */
	cfg_free(c);
	c = webhook_cfg("hooks.test", "/nonexistent/secret");
	assert_int_equal(wh_reload(c), -1);
	assert_int_equal(wh_configured(), 1);
	cfg_free(c);
	/* one without a webhook turns it off */
	c = cfg_load_buffer("{}", 2, "t.json", err, sizeof(err));
	assert_int_equal(wh_reload(c), 0);
	assert_int_equal(wh_configured(), 0);
	cfg_free(c);
	assert_null(strstr(logged, "hunter2"));
	wh_shutdown();
	unlink(path);
	unlink(empty);
	event_base_free(base);
}

/* A port on 127.0.0.1 that refuses: bound, never listening. */
static int
refusing_port(int *fd_out)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	*fd_out = fd;
	return ntohs(sa.sin_port);
}

static int
count(const char *hay, const char *needle)
{
	int n = 0;

	while ((hay = strstr(hay, needle)) != NULL) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

static void
test_retries_then_done(void **state)
{
	struct event_base *base = event_base_new();
	struct timeval tv = { 2, 500000 };
	char err[512], path[128], hp[64];
	struct cfg *c;
	json_t *p;
	int fd, port, n;

	(void)state;
	port = refusing_port(&fd);
	write_file("secret2", "s3cret", path, sizeof(path));
	snprintf(hp, sizeof(hp), "hooks.test:%d", port);
	c = webhook_cfg(hp, path);
	assert_int_equal(wh_init(base, c, fake_answer, err, sizeof(err)), 0);
	p = json_pack("{s:s,s:i}", "id", "p-1", "expires_in_s", 60);
	logged[0] = '\0';
	wh_prompt("p-1", p);
	/* backoff 0.25-0.5 s, then 0.5-1 s: at least two attempts, at most
	 * four, in 2.5 s */
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	n = count(logged, "webhook: prompt p-1 attempt ");
	if (n < 2 || n > 4)
		fail_msg("%d attempts:\n%s", n, logged);
	assert_non_null(strstr(logged, "attempt 1 failed"));
	if (strstr(logged, "cannot connect to 127.0.0.1 port") == NULL)
		fail_msg("%s", logged);
	assert_non_null(strstr(logged, "retrying in"));

	/* done: nothing more is tried */
	wh_prompt_done("p-1");
	logged[0] = '\0';
	tv.tv_sec = 1;
	tv.tv_usec = 200000;
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	assert_int_equal(count(logged, "attempt"), 0);

	json_decref(p);
	wh_shutdown();
	cfg_free(c);
	close(fd);
	unlink(path);
	event_base_free(base);
}

static int
setup(void **state)
{
	(void)state;
	px_log_set_sink(log_sink);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_webhook.XXXXXX");
	return mkdtemp(tmpdir) != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	return rmdir(tmpdir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sign_vectors),
		cmocka_unit_test(test_init_checks),
		cmocka_unit_test(test_retries_then_done),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
