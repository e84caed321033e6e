/*
 * test_signer.c: the log signer (proxy/signer.c): it signs the record
 * after the chain head it keeps, or that record once more, and nothing
 * else; the key file it accepts.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proxy/lib/clog.h"
#include "proxy/signer.h"

static const unsigned char key[] = "an example key of thirty-two+ bytes";
#define H(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c \
	c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c
#define H0 H("0")
#define HA H("a")
#define HB H("b")
#define HC H("c")
#define HD H("d")

struct fx {
	struct signer sg;
	pid_t pid;
};

static int
start(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	int sv[2];

	assert_non_null(fx);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	fx->pid = fork();
	assert_true(fx->pid >= 0);
	if (fx->pid == 0) {
		close(sv[0]);
		/* the chain so far: 5 records, the last one's hash HA */
		_exit(signer_serve(sv[1], key, sizeof(key) - 1, 5, HA) == 0 ?
		    0 : 1);
	}
	close(sv[1]);
	fx->sg.fd = sv[0];
	*state = fx;
	return 0;
}

static int
stop(void **state)
{
	struct fx *fx = *state;
	int st = 0;

	close(fx->sg.fd);
	assert_int_equal(waitpid(fx->pid, &st, 0), fx->pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	free(fx);
	return 0;
}

static int
sign(struct fx *fx, uint64_t seq, const char *prev, const char *hash)
{
	char mac[65], want[65];

	if (signer_sign(&fx->sg, seq, prev, hash, mac) != 0)
		return -1;
	assert_int_equal(clog_mac(key, sizeof(key) - 1, hash, want), 0);
	assert_string_equal(mac, want);
	return 0;
}

static void
test_chain_rule(void **state)
{
	struct fx *fx = *state;

	/* not the record after the head */
	assert_int_equal(sign(fx, 5, H0, HB), -1);
	assert_int_equal(sign(fx, 7, HA, HB), -1);
	assert_int_equal(sign(fx, 6, HC, HB), -1);
	/* the next one, then that one again (its write failed) */
	assert_int_equal(sign(fx, 6, HA, HB), 0);
	assert_int_equal(sign(fx, 6, HA, HC), 0);
	/* the chain goes on from what was signed last */
	assert_int_equal(sign(fx, 7, HB, HD), -1);
	assert_int_equal(sign(fx, 7, HC, HD), 0);
	/* older records are never signed again: append, not rewrite */
	assert_int_equal(sign(fx, 6, HA, HB), -1);
	assert_int_equal(sign(fx, 5, H0, HA), -1);
	assert_int_equal(sign(fx, 1, H0, HB), -1);
	assert_int_equal(sign(fx, 8, HD, HA), 0);
}

static void
test_bad_requests(void **state)
{
	struct fx *fx = *state;
	unsigned char junk[200];
	char ans[70];

	memset(junk, 'S', sizeof(junk));
	assert_int_equal(send(fx->sg.fd, junk, 10, 0), 10);
	assert_int_equal(recv(fx->sg.fd, ans, sizeof(ans), 0), 65);
	assert_int_equal(ans[0], 'N');
	/* the right length, not hex */
	assert_int_equal(send(fx->sg.fd, junk, 137, 0), 137);
	assert_int_equal(recv(fx->sg.fd, ans, sizeof(ans), 0), 65);
	assert_int_equal(ans[0], 'N');
	assert_int_equal(sign(fx, 6, HA, HB), 0);
}

static void
write_key(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd;

	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void
test_load_key(void **state)
{
	char dir[] = "/tmp/test_signer.XXXXXX", path[64], link[64], err[512];
	unsigned char k[SIGNER_KEY_MAX];
	static char big[SIGNER_KEY_MAX + 1];
	size_t n = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/key", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	write_key(path, key, sizeof(key) - 1, 0600);
	assert_int_equal(signer_load_key(path, k, &n, err, sizeof(err)), 0);
	assert_int_equal(n, sizeof(key) - 1);
	assert_memory_equal(k, key, n);
	write_key(path, key, sizeof(key) - 1, 0400);
	assert_int_equal(signer_load_key(path, k, &n, err, sizeof(err)), 0);
	/* others or the group may read it: the proxy's user might */
	write_key(path, key, sizeof(key) - 1, 0640);
	assert_int_equal(signer_load_key(path, k, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no access for group and others"));
	write_key(path, key, sizeof(key) - 1, 0604);
	assert_int_equal(signer_load_key(path, k, &n, err, sizeof(err)), -1);
	/* too short, too long */
	write_key(path, "short", 5, 0600);
	assert_int_equal(signer_load_key(path, k, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "at least 32"));
	memset(big, 'k', sizeof(big));
	write_key(path, big, sizeof(big), 0600);
	assert_int_equal(signer_load_key(path, k, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than"));
	write_key(path, big, SIGNER_KEY_MAX, 0600);
	assert_int_equal(signer_load_key(path, k, &n, err, sizeof(err)), 0);
	assert_int_equal(n, SIGNER_KEY_MAX);
	/* not through a link, not a directory, not missing */
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(signer_load_key(link, k, &n, err, sizeof(err)), -1);
	assert_int_equal(signer_load_key(dir, k, &n, err, sizeof(err)), -1);
	unlink(link);
	unlink(path);
	assert_int_equal(signer_load_key(path, k, &n, err, sizeof(err)), -1);
	rmdir(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_chain_rule, start, stop),
		cmocka_unit_test_setup_teardown(test_bad_requests, start, stop),
		cmocka_unit_test(test_load_key),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
