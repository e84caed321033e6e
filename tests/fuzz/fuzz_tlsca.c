/*
 * fuzz_tlsca.c: the inspection CA helper's request reader (tlsca.h).
 *
 * Input is one packet as the helper receives it from the proxy (which it
 * does not trust).  Besides memory errors the harness traps when a
 * request is accepted whose name is not a canonical host name, or whose
 * key does not span exactly the rest of the packet.  The key of an
 * accepted request is then decoded as the helper decodes it.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "proxy/lib/tlsca.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[TLSCA_NAME_MAX + 1];
	const unsigned char *spki, *p;
	struct pol_target t;
	size_t spkilen, nl;
	EVP_PKEY *k;
	uint8_t *copy;

	/* an exact-size copy lets ASan see any read past the end */
	copy = malloc(size ? size : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	if (tlsca_parse_request(copy, size, name, &spki, &spkilen) == 0) {
		nl = strlen(name);
		CHECK(nl > 0 && nl <= TLSCA_NAME_MAX);
		CHECK(pol_host_parse(name, nl, 0, &t) == POL_R_NONE);
		CHECK(t.kind == POL_HOST_NAME && strcmp(t.host, name) == 0);
		CHECK(copy[0] == 'L' && memcmp(copy + 1, name, nl) == 0);
		CHECK(spki == copy + 2 + nl && spkilen == size - 2 - nl);
		CHECK(spkilen > 0);
		p = spki;
		k = d2i_PUBKEY(NULL, &p, (long)spkilen);
		if (k != NULL)
			CHECK(p > spki && p <= spki + spkilen);
		EVP_PKEY_free(k);
		ERR_clear_error();
	}
	free(copy);
	return 0;
}
