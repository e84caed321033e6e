/*
 * fuzz_fwmsg.c: the firewall helper's only input, an APPLY packet from
 * the (untrusted) proxy process, through the same steps the helper
 * takes before any netlink: decode, then fw_build and render.
 *
 * Besides memory errors the harness traps when an accepted packet is
 * not canonical (encoding what was decoded must give the same bytes, so
 * no two packets mean the same thing) or holds a string outside its
 * alphabet, and when a built ruleset names a table the packet did not.
 * The reply decoder, the proxy's only input from the helper, gets the
 * same bytes.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "firewall/fw.h"
#include "firewall/fwmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static void
check_list(const char *const *v, size_t n)
{
	size_t i, j;

	for (i = 0; i < n; i++) {
		CHECK(v[i][0] != '\0' && strlen(v[i]) < 256);
		for (j = 0; v[i][j] != '\0'; j++)
			CHECK(strchr("0123456789abcdefABCDEF.:/[]", v[i][j])
			    != NULL);
	}
}

static void
check_ifnames(const char *const *v, size_t n)
{
	size_t i, j;

	for (i = 0; i < n; i++) {
		CHECK(v[i][0] != '\0' && strlen(v[i]) < 256);
		for (j = 0; v[i][j] != '\0'; j++)
			CHECK(v[i][j] > ' ' && v[i][j] < 0x7f &&
			    strchr("/:\"\\", v[i][j]) == NULL);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fw_msg_apply m;
	struct fw_ruleset *rs;
	char err[512], text[64];
	uint8_t *copy, *again;
	size_t len;
	char *t;

	/* An exact-size copy lets ASan see any read past the end. */
	copy = malloc(size ? size : 1);
	again = malloc(FW_MSG_MAX);
	if (copy == NULL || again == NULL) {
		free(copy);
		free(again);
		return 0;
	}
	memcpy(copy, data, size);
	if (fw_msg_decode_apply(copy, size, &m, err, sizeof(err)) == 0) {
		CHECK(strlen(m.fc.table) > 0 && strlen(m.fc.table) < FW_TABLE_MAX);
		check_list(m.fc.allow_cidrs, m.fc.nallow_cidrs);
		check_list(m.fc.deny_cidrs, m.fc.ndeny_cidrs);
		check_list(m.fc.resolvers, m.fc.nresolvers);
		check_list(m.fc.sandbox_subnets, m.fc.nsandbox_subnets);
		check_ifnames(m.fc.sandbox_interfaces,
		    m.fc.nsandbox_interfaces);
		check_list(m.fc.broker_addrs, m.fc.nbroker_addrs);
		CHECK(fw_msg_encode_apply(&m.fc, again, FW_MSG_MAX, &len, err,
		    sizeof(err)) == 0);
		CHECK(len == size && memcmp(again, copy, size) == 0);
		rs = fw_build(&m.fc, err, sizeof(err));
		if (rs != NULL) {
			CHECK(strcmp(fw_table_name(rs), m.fc.table) == 0);
			t = fw_render(rs);
			CHECK(t != NULL);
			free(t);
			fw_free(rs);
		}
	}
	fw_msg_apply_clear(&m);
	/* a reply decodes or is refused; either way text is a string */
	if (fw_msg_decode_reply(copy, size, text, sizeof(text)) >= 0)
		CHECK(memchr(text, '\0', sizeof(text)) != NULL);
	free(copy);
	free(again);
	return 0;
}
