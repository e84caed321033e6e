/*
 * fuzz_config.c: cfg_load_buffer on arbitrary bytes.
 *
 * Besides not crashing or leaking, a configuration that loads must dump
 * to text that loads again and dumps the same (the --print-config
 * promise), and a refusal must always say why.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* proxy/ spelled out: the top-level config.h is autoconf's. */
#include "proxy/lib/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct cfg *c, *again;
	struct pol_config *p;
	char *d1, *d2;

	err[0] = '\0';
	c = cfg_load_buffer((const char *)data, size, "fuzz.json", err,
	    sizeof(err));
	if (c == NULL) {
		if (err[0] == '\0')
			abort();
		return 0;
	}
	if ((d1 = cfg_dump(c)) != NULL) {
		again = cfg_load_buffer(d1, strlen(d1), "dump.json", err,
		    sizeof(err));
		if (again == NULL)
			abort();
		d2 = cfg_dump(again);
		if (d2 != NULL && strcmp(d1, d2) != 0)
			abort();
		free(d2);
		cfg_free(again);
		free(d1);
	}
	p = cfg_build_policy(c, err, sizeof(err));
	pol_config_free(p);
	cfg_free(c);
	return 0;
}
