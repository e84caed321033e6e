/*
 * test_fwmsg.c: the proxy <-> firewall helper messages (fwmsg.h): round
 * trips, every malformed shape refused, and the helper's request loop
 * over a real socketpair with fake kernel operations (no netlink: the
 * loop's decisions, not the kernel's, are under test here).
 */
#include "sluice-config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "firewall/fw.h"
#include "firewall/fwmsg.h"

static const char *allow[] = { "10.1.0.0/16", "fd00::/8" };
static const char *deny[] = { "192.0.2.0/24" };
static const char *res[] = { "10.0.0.3", "[fd00::53]:53" };
static const char *subnets[] = { "10.77.0.0/16" };
static const char *ifaces[] = { "br-sandbox", "tap*" };
static const char *baddrs[] = { "10.77.0.1", "::/0" };
static const uint16_t ports[] = { 3128, 8080 };

static void
sample(struct fw_config *fc, const char *table)
{
	memset(fc, 0, sizeof(*fc));
	fc->table = table;
	fc->uid = 4243;
	fc->allow_cidrs = allow;
	fc->nallow_cidrs = 2;
	fc->deny_cidrs = deny;
	fc->ndeny_cidrs = 1;
	fc->resolvers = res;
	fc->nresolvers = 2;
	fc->sandbox_subnets = subnets;
	fc->nsandbox_subnets = 1;
	fc->sandbox_interfaces = ifaces;
	fc->nsandbox_interfaces = 2;
	fc->broker_addrs = baddrs;
	fc->nbroker_addrs = 2;
	fc->broker_ports = ports;
	fc->nbroker_ports = 2;
	fc->transparent_port = 3129;
}

static size_t
encode(const struct fw_config *fc, uint8_t *buf, size_t cap)
{
	char err[256];
	size_t len = 0;

	if (fw_msg_encode_apply(fc, buf, cap, &len, err, sizeof(err)) != 0)
		fail_msg("encode: %s", err);
	return len;
}

/* decode must refuse buf with a message containing want */
static void
refused(const uint8_t *buf, size_t len, const char *want)
{
	struct fw_msg_apply m;
	char err[256];
	int r = fw_msg_decode_apply(buf, len, &m, err, sizeof(err));

	fw_msg_apply_clear(&m);
	if (r == 0)
		fail_msg("accepted a malformed message (%zu bytes, want %s)",
		    len, want ? want : "any error");
	if (want != NULL && strstr(err, want) == NULL)
		fail_msg("error \"%s\" does not say \"%s\"", err, want);
}

static void
test_round_trip(void **state)
{
	uint8_t buf[4096];
	struct fw_config fc;
	struct fw_msg_apply m;
	char err[256];
	size_t len, i;

	(void)state;
	sample(&fc, "sluice");
	len = encode(&fc, buf, sizeof(buf));
	assert_int_equal(fw_msg_decode_apply(buf, len, &m, err, sizeof(err)),
	    0);
	assert_string_equal(m.fc.table, "sluice");
	assert_int_equal(m.fc.uid, 4243);
	assert_int_equal(m.fc.nallow_cidrs, 2);
	for (i = 0; i < 2; i++)
		assert_string_equal(m.fc.allow_cidrs[i], allow[i]);
	assert_int_equal(m.fc.ndeny_cidrs, 1);
	assert_string_equal(m.fc.deny_cidrs[0], deny[0]);
	assert_int_equal(m.fc.nresolvers, 2);
	assert_string_equal(m.fc.resolvers[1], res[1]);
	assert_int_equal(m.fc.nsandbox_subnets, 1);
	assert_string_equal(m.fc.sandbox_subnets[0], subnets[0]);
	assert_int_equal(m.fc.nsandbox_interfaces, 2);
	assert_string_equal(m.fc.sandbox_interfaces[0], ifaces[0]);
	assert_string_equal(m.fc.sandbox_interfaces[1], ifaces[1]);
	assert_int_equal(m.fc.nbroker_addrs, 2);
	assert_string_equal(m.fc.broker_addrs[1], baddrs[1]);
	assert_int_equal(m.fc.nbroker_ports, 2);
	assert_int_equal(m.fc.broker_ports[1], 8080);
	assert_int_equal(m.fc.transparent_port, 3129);
	fw_msg_apply_clear(&m);

	/* no uid, empty lists */
	memset(&fc, 0, sizeof(fc));
	fc.uid = -1;
	len = encode(&fc, buf, sizeof(buf));
	assert_int_equal(fw_msg_decode_apply(buf, len, &m, err, sizeof(err)),
	    0);
	assert_string_equal(m.fc.table, FW_DEFAULT_TABLE);
	assert_int_equal(m.fc.uid, -1);
	assert_int_equal(m.fc.nallow_cidrs + m.fc.nbroker_ports +
	    m.fc.nsandbox_interfaces, 0);
	fw_msg_apply_clear(&m);
}

static void
test_malformed(void **state)
{
	uint8_t buf[4096], bad[4096];
	struct fw_config fc;
	size_t len, n, at;

	(void)state;
	sample(&fc, "sluice");
	len = encode(&fc, buf, sizeof(buf));

	/* every truncation, with the length field fixed up or not */
	for (n = 0; n < len; n++) {
		memcpy(bad, buf, n);
		refused(bad, n, NULL);
		if (n >= FW_MSG_HDR) {
			uint32_t pl = (uint32_t)(n - FW_MSG_HDR);

			bad[4] = (uint8_t)(pl >> 24);
			bad[5] = (uint8_t)(pl >> 16);
			bad[6] = (uint8_t)(pl >> 8);
			bad[7] = (uint8_t)pl;
			refused(bad, n, NULL);
		}
	}
	/* a byte after the last field */
	memcpy(bad, buf, len);
	bad[len] = 0;
	bad[7]++;
	refused(bad, len + 1, "after the last field");
	/* header fields */
	memcpy(bad, buf, len);
	bad[0] ^= 0xff;
	refused(bad, len, "magic");
	memcpy(bad, buf, len);
	bad[2] = 2;
	refused(bad, len, "version");
	memcpy(bad, buf, len);
	bad[3] = FW_MSG_OK;
	refused(bad, len, "type");
	memcpy(bad, buf, len);
	bad[7]--;
	refused(bad, len, "length field");
	/* the table: "sluice" at 9..14 */
	memcpy(bad, buf, len);
	bad[10] = '/';
	refused(bad, len, "table");
	memcpy(bad, buf, len);
	bad[8] = 0;
	refused(bad, len, "table");
	/* has_uid 2; a uid without has_uid */
	at = FW_MSG_HDR + 1 + 6;
	memcpy(bad, buf, len);
	bad[at] = 2;
	refused(bad, len, "uid");
	memcpy(bad, buf, len);
	bad[at] = 0;
	refused(bad, len, "uid");
	/* a list entry outside the address alphabet: allow_cidrs[0][0] */
	at += 5 + 2 + 1;
	memcpy(bad, buf, len);
	bad[at] = 'x';
	refused(bad, len, "allow_cidrs[0]");
	memcpy(bad, buf, len);
	bad[at] = '\0';
	refused(bad, len, "allow_cidrs[0]");
	/* an entry count larger than the list */
	memcpy(bad, buf, len);
	bad[at - 2] = 0xff;
	refused(bad, len, "allow_cidrs");
	/* interface names: their own alphabet, no '"', space, '/' or
	 * ':' (a '*' passes here: fw_build checks where it stands) */
	{
		const uint8_t *p = memmem(buf, len, "br-sandbox", 10);
		static const char no[] = "\" /:\\\x7f\x80";

		assert_non_null(p);
		at = (size_t)(p - buf);
		for (n = 0; n < sizeof(no) - 1; n++) {
			memcpy(bad, buf, len);
			bad[at + 2] = (uint8_t)no[n];
			refused(bad, len, "sandbox_interfaces[0]");
		}
		memcpy(bad, buf, len);
		bad[at - 3] = 0xff;     /* the count */
		refused(bad, len, "sandbox_interfaces");
		/* broker_addrs: the address alphabet */
		p = memmem(buf, len, "10.77.0.1\x04::/0", 14);
		assert_non_null(p);
		memcpy(bad, buf, len);
		bad[p - buf] = 'x';
		refused(bad, len, "broker_addrs[0]");
	}
	/* broker port 0: the two bytes before the transparent port */
	memcpy(bad, buf, len);
	bad[len - 4] = 0;
	bad[len - 3] = 0;
	refused(bad, len, "broker_ports");
	/* no transparent port (the length field says so too) */
	memcpy(bad, buf, len);
	bad[7] -= 2;
	refused(bad, len - 2, "transparent_port");
	/* longer than a packet may be */
	refused(buf, FW_MSG_MAX + 1, "length");
}

static void
test_encode_refuses(void **state)
{
	static const char *odd[] = { "10.0.0.0/8 drop" };
	static const char *oddif[] = { "eth0\" accept" };
	static const char *longname = "a_table_name_of_more_than_255_characters"
	    "_________________________________________________________________"
	    "_________________________________________________________________"
	    "_________________________________________________________________"
	    "_________________________________________";
	uint8_t buf[4096];
	struct fw_config fc;
	char err[256];
	size_t len;

	(void)state;
	sample(&fc, "sluice");
	fc.deny_cidrs = odd;
	assert_int_equal(fw_msg_encode_apply(&fc, buf, sizeof(buf), &len, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "deny_cidrs"));
	sample(&fc, "sluice");
	fc.sandbox_interfaces = oddif;
	fc.nsandbox_interfaces = 1;
	assert_int_equal(fw_msg_encode_apply(&fc, buf, sizeof(buf), &len, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "sandbox_interfaces"));
	sample(&fc, longname);
	assert_int_equal(fw_msg_encode_apply(&fc, buf, sizeof(buf), &len, err,
	    sizeof(err)), -1);
	sample(&fc, "sluice");
	assert_int_equal(fw_msg_encode_apply(&fc, buf, 20, &len, err,
	    sizeof(err)), -1);
}

static void
test_reply(void **state)
{
	uint8_t buf[FW_MSG_HDR + 2 + FW_MSG_TEXT_MAX];
	char text[64], big[2000];
	size_t n;

	(void)state;
	n = fw_msg_encode_reply(buf, sizeof(buf), 1, "applied");
	assert_int_equal(fw_msg_decode_reply(buf, n, text, sizeof(text)), 1);
	assert_string_equal(text, "applied");
	n = fw_msg_encode_reply(buf, sizeof(buf), 0, "no\nway");
	assert_int_equal(fw_msg_decode_reply(buf, n, text, sizeof(text)), 0);
	assert_string_equal(text, "no?way");
	memset(big, 'e', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	n = fw_msg_encode_reply(buf, sizeof(buf), 0, big);
	assert_int_equal(n, sizeof(buf));
	assert_int_equal(fw_msg_decode_reply(buf, n, text, sizeof(text)), 0);
	assert_int_equal(strlen(text), sizeof(text) - 1);
	n = fw_msg_encode_reply(buf, sizeof(buf), 1, "ok");
	assert_int_equal(fw_msg_decode_reply(buf, n - 1, text, sizeof(text)),
	    -1);
	buf[3] = FW_MSG_APPLY;
	assert_int_equal(fw_msg_decode_reply(buf, n, text, sizeof(text)), -1);
}

/* ------------------------------------------------------------------ */
/* The helper loop with fake kernel operations */

static struct {
	char applied[8][FW_TABLE_MAX];
	int napplied;
	char removed[FW_TABLE_MAX];
	char made[FW_TABLE_MAX];        /* a failed apply left this table */
	int verify_fails;
	int fail_next;                  /* the next apply fails */
	int refills;                    /* sets refilled in place */
} k;

static int
fake_apply(const struct fw_ruleset *rs, char *err, size_t errlen)
{
	if (k.napplied < 8)
		snprintf(k.applied[k.napplied++], FW_TABLE_MAX, "%s",
		    fw_table_name(rs));
	if (k.fail_next || strcmp(fw_table_name(rs), "failing") == 0) {
		k.fail_next = 0;
		snprintf(err, errlen, "kernel says no");
		return -1;
	}
	if (strcmp(fw_table_name(rs), "newfail") == 0) {
		/* committed, but the read back differs */
		snprintf(k.made, sizeof(k.made), "newfail");
		snprintf(err, errlen, "read back differs");
		return -1;
	}
	return 0;
}

static int
fake_verify(const struct fw_ruleset *rs, char *err, size_t errlen)
{
	(void)rs;
	snprintf(err, errlen, "differs");
	return k.verify_fails ? -1 : 0;
}

static int
fake_remove(const char *table, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	snprintf(k.removed, sizeof(k.removed), "%s", table);
	return 0;
}

/* "other" belongs to someone else; "sluice" and the rest do not exist
 * but for what a failed apply left */
static int
fake_exists(const char *table, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return strcmp(table, "other") == 0 || strcmp(table, k.made) == 0;
}

/* fw_update's contract: a change of set elements only is a refill,
 * anything else (and a refill that cannot be done) an apply */
static int
fake_update(const struct fw_ruleset *old, const struct fw_ruleset *rs,
    int *refilled, char *err, size_t errlen)
{
	*refilled = 0;
	if (!k.fail_next && fw_sets_only(old, rs)) {
		*refilled = 1;
		k.refills++;
		return 0;
	}
	return fake_apply(rs, err, errlen);
}

static const struct fw_helper_ops fake_ops = {
	fake_apply, fake_verify, fake_remove, fake_exists, NULL, fake_update
};

static int helper_rc = -5;

static void *
helper_thread(void *arg)
{
	helper_rc = fw_helper_run(*(int *)arg, "sluice", &fake_ops);
	return NULL;
}

static int
call(int fd, const char *table, const char *deny0, char *err, size_t errlen)
{
	struct fw_config fc;
	const char *d[1];

	sample(&fc, table);
	if (deny0 != NULL) {
		d[0] = deny0;
		fc.deny_cidrs = d;
	}
	return fw_helper_apply(fd, &fc, 5000, err, errlen);
}

/* raw bytes in, the reply's ok flag and text out */
static int
raw(int fd, const void *req, size_t len, char *text, size_t textlen)
{
	uint8_t reply[FW_MSG_HDR + 2 + FW_MSG_TEXT_MAX];
	ssize_t n;

	assert_int_equal(send(fd, req, len, 0), (ssize_t)len);
	n = recv(fd, reply, sizeof(reply), 0);
	assert_true(n > 0);
	return fw_msg_decode_reply(reply, (size_t)n, text, textlen);
}

static void
test_helper_loop(void **state)
{
	int sv[2], buf = 131072;
	pthread_t t;
	char err[512];
	uint8_t junk[64], *big;

	(void)state;
	memset(&k, 0, sizeof(k));
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	assert_int_equal(pthread_create(&t, NULL, helper_thread, &sv[1]), 0);

	/* garbage, an unknown type, an oversized packet: refused, and
	 * nothing reaches the kernel */
	memset(junk, 'A', sizeof(junk));
	assert_int_equal(raw(sv[0], junk, sizeof(junk), err, sizeof(err)), 0);
	assert_non_null(strstr(err, "malformed request refused"));
	{
		uint8_t h[8] = { 0x53, 0x4c, 1, 9, 0, 0, 0, 0 };

		assert_int_equal(raw(sv[0], h, sizeof(h), err, sizeof(err)),
		    0);
		assert_non_null(strstr(err, "unknown message type 9"));
	}
	big = calloc(1, FW_MSG_MAX + 100);
	assert_non_null(big);
	assert_int_equal(raw(sv[0], big, FW_MSG_MAX + 100, err, sizeof(err)),
	    0);
	assert_non_null(strstr(err, "at most"));
	free(big);
	assert_int_equal(k.napplied, 0);

	/* the start table may be replaced */
	assert_int_equal(call(sv[0], "sluice", NULL, err, sizeof(err)), 0);
	assert_int_equal(k.napplied, 1);
	assert_string_equal(k.applied[0], "sluice");
	assert_string_equal(err, "applied");

	/* only a set's elements change: refilled in place, no apply */
	assert_int_equal(call(sv[0], "sluice", "192.0.2.9", err, sizeof(err)),
	    0);
	assert_string_equal(err, "refilled");
	assert_int_equal(k.refills, 1);
	assert_int_equal(k.napplied, 1);

	/* a table of another program's is never touched */
	assert_int_equal(call(sv[0], "other", NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is not sluiced's"));
	assert_int_equal(k.napplied, 1);

	/* fw_build re-validates what the decoder let through */
	assert_int_equal(call(sv[0], "sluice", "10.0.0.300/8", err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "deny_cidrs"));
	assert_int_equal(k.napplied, 1);

	/* a new, unused name: applied, the old table removed */
	assert_int_equal(call(sv[0], "fresh", NULL, err, sizeof(err)), 0);
	assert_string_equal(k.applied[1], "fresh");
	assert_string_equal(k.removed, "sluice");

	/* a failed apply of the running table's name whose read back
	 * differs: the running table ("fresh") goes back */
	k.fail_next = 1;
	k.verify_fails = 1;
	assert_int_equal(call(sv[0], "fresh", "192.0.2.7", err, sizeof(err)),
	    -1);
	assert_string_equal(err, "kernel says no");
	assert_int_equal(k.napplied, 4);
	assert_string_equal(k.applied[2], "fresh");
	assert_string_equal(k.applied[3], "fresh");

	/* a failed apply under a new name: the running table is another
	 * one, untouched by the atomic batch, so nothing is restored */
	assert_int_equal(call(sv[0], "failing", NULL, err, sizeof(err)), -1);
	assert_string_equal(err, "kernel says no");
	assert_int_equal(k.napplied, 5);

	/* ... and if it left a table behind, the helper made it, so it
	 * removes it (a retry must not find it "not sluiced's") */
	assert_int_equal(call(sv[0], "newfail", NULL, err, sizeof(err)), -1);
	assert_string_equal(k.removed, "newfail");
	assert_int_equal(k.napplied, 6);
	assert_int_equal(call(sv[0], "fresh", NULL, err, sizeof(err)), 0);
	assert_string_equal(err, "refilled");

	/* the proxy goes: the loop ends cleanly, removing nothing */
	k.removed[0] = '\0';
	close(sv[0]);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(helper_rc, 0);
	assert_string_equal(k.removed, "");
	close(sv[1]);
}

/* The proxy's side when the helper is gone or never was. */
static void
test_helper_gone(void **state)
{
	int sv[2];
	char err[256];

	(void)state;
	assert_int_equal(call(-1, "sluice", NULL, err, sizeof(err)), -2);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(call(sv[0], "sluice", NULL, err, sizeof(err)), -2);
	assert_non_null(strstr(err, "helper is gone"));
	close(sv[0]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_encode_refuses),
		cmocka_unit_test(test_reply),
		cmocka_unit_test(test_helper_loop),
		cmocka_unit_test(test_helper_gone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
