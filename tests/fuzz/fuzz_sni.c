/*
 * fuzz_sni.c: the ClientHello server_name reader.
 *
 * Input is the bytes a client sends first in a tunnel.  Besides memory
 * errors the harness traps when a name comes back that is not a printable
 * NUL-terminated string, or when a prefix of the input yields a name
 * other than the one the whole input yields (SNI_ECH's outer name too).
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/lib/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static void
check_name(const char *out, size_t outlen)
{
	size_t n = strnlen(out, outlen), i;

	CHECK(n > 0 && n < outlen);
	for (i = 0; i < n; i++)
		CHECK(out[i] > 0x20 && out[i] < 0x7f);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[256], part[256], tiny[8];
	enum sni_status st, sp;
	uint8_t *copy;
	size_t cut;

	/* An exact-size copy lets ASan see any read past the end. */
	copy = malloc(size ? size : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);

	st = sni_parse(copy, size, out, sizeof(out));
	CHECK(st >= SNI_OK && st <= SNI_ECH);
	if (st == SNI_OK || (st == SNI_ECH && out[0] != '\0'))
		check_name(out, sizeof(out));
	if (size > 0) {
		cut = size > 1 ? (size_t)data[size - 1] % size : 0;
		sp = sni_parse(copy, cut, part, sizeof(part));
		/* a prefix decides only on bytes the whole input has too,
		 * so once it decides it agrees */
		CHECK(sp == SNI_INCOMPLETE || sp == st);
		if (sp == SNI_OK || sp == SNI_ECH)
			CHECK(strcmp(part, out) == 0);
	}
	/* a small buffer refuses long names instead of cutting them */
	sp = sni_parse(copy, size, tiny, sizeof(tiny));
	if (sp == SNI_OK || sp == SNI_ECH) {
		if (sp == SNI_OK || tiny[0] != '\0')
			check_name(tiny, sizeof(tiny));
		CHECK(st == sp && strcmp(tiny, out) == 0);
	}
	free(copy);
	return 0;
}
