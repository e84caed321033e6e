/* test_peer.c: identity keys from accepted peer addresses. */
#include "sluice-config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <linux/vm_sockets.h>
#include <cmocka.h>

#include "proxy/lib/peer.h"

static void
test_ipv4(void **state)
{
	struct sockaddr_in in;
	struct peer_id id;

	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_port = htons(4242);
	inet_pton(AF_INET, "127.0.0.5", &in.sin_addr);
	assert_int_equal(peer_identify((struct sockaddr *)&in, sizeof(in),
	    &id), 0);
	assert_int_equal(id.kind, PEER_IP);
	assert_int_equal(id.ip.family, AF_INET);
	assert_memory_equal(id.ip.a, "\x7f\x00\x00\x05", 4);
	assert_int_equal(id.port, 4242);
	/* truncated */
	assert_int_equal(peer_identify((struct sockaddr *)&in, 8, &id), -1);
}

static void
test_ipv6_and_mapped(void **state)
{
	struct sockaddr_in6 in6;
	struct peer_id id;

	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, "::ffff:127.0.0.9", &in6.sin6_addr);
	assert_int_equal(peer_identify((struct sockaddr *)&in6, sizeof(in6),
	    &id), 0);
	assert_int_equal(id.ip.family, AF_INET);
	assert_memory_equal(id.ip.a, "\x7f\x00\x00\x09", 4);

	inet_pton(AF_INET6, "2001:db8::7", &in6.sin6_addr);
	assert_int_equal(peer_identify((struct sockaddr *)&in6, sizeof(in6),
	    &id), 0);
	assert_int_equal(id.ip.family, AF_INET6);
	assert_memory_equal(id.ip.a, &in6.sin6_addr, 16);
}

static void
test_vsock(void **state)
{
	struct sockaddr_vm vm;
	struct peer_id id;

	memset(&vm, 0, sizeof(vm));
	vm.svm_family = AF_VSOCK;
	vm.svm_cid = 7;
	vm.svm_port = 1234;
	assert_int_equal(peer_identify((struct sockaddr *)&vm, sizeof(vm),
	    &id), 0);
	assert_int_equal(id.kind, PEER_VSOCK);
	assert_int_equal(id.cid, 7);
	assert_int_equal(peer_identify((struct sockaddr *)&vm, 4, &id), -1);
}

static void
test_other(void **state)
{
	struct sockaddr_un un;
	struct sockaddr sa;
	struct peer_id id;

	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	assert_int_equal(peer_identify((struct sockaddr *)&un, sizeof(un),
	    &id), 0);
	assert_int_equal(id.kind, PEER_UNIX);
	memset(&sa, 0, sizeof(sa));
	sa.sa_family = AF_PACKET;
	assert_int_equal(peer_identify(&sa, sizeof(sa), &id), -1);
	assert_int_equal(peer_identify(NULL, 0, &id), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipv4),
		cmocka_unit_test(test_ipv6_and_mapped),
		cmocka_unit_test(test_vsock),
		cmocka_unit_test(test_other),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
