/*
 * fuzz_target.c: every target and address parser of policy/ on the same
 * bytes, with the invariants that make canonicalisation safe: a parsed
 * host is canonical (parsing it again yields itself), and a parsed
 * address formats to text that parses back to the same address.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

/* A broken invariant is a bug the fuzzer must report, not survive. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INVARIANT(c) do { if (!(c)) abort(); } while (0)

static void
check_canonical(const struct pol_target *t)
{
	struct pol_target again;
	size_t n = strlen(t->host);

	INVARIANT(n > 0 && n <= POL_HOST_MAX);
	if (t->kind == POL_HOST_V6) {
		char br[POL_HOST_MAX + 3];

		br[0] = '[';
		memcpy(br + 1, t->host, n);
		br[n + 1] = ']';
		INVARIANT(pol_host_parse(br, n + 2, 1, &again) == POL_R_NONE);
	} else {
		INVARIANT(pol_host_parse(t->host, n, 0, &again) == POL_R_NONE);
	}
	INVARIANT(again.kind == t->kind);
	INVARIANT(strcmp(again.host, t->host) == 0);
	if (t->kind != POL_HOST_NAME)
		(void)pol_addr_classify(&t->addr);
}

static void
fuzz_addr(const char *s, size_t len)
{
	struct pol_addr a, b;
	char buf[64];

	if (pol_addr_parse(s, len, &a) < 0)
		return;
	(void)pol_addr_class_name(pol_addr_classify(&a));
	pol_addr_format(&a, buf, sizeof(buf));
	INVARIANT(pol_addr_parse(buf, strlen(buf), &b) == 0);
	INVARIANT(a.family == b.family && memcmp(a.a, b.a, 16) == 0);
}

static void
fuzz_hostset(const char *s, size_t len)
{
	struct pol_hostset *hs;
	char *pat;

	/* Patterns are C strings: cut at the first NUL. */
	pat = malloc(len + 1);
	if (pat == NULL)
		return;
	memcpy(pat, s, len);
	pat[len] = '\0';
	hs = pol_hostset_new();
	if (hs != NULL) {
		if (pol_hostset_add(hs, pat) == 0)
			INVARIANT(pol_hostset_count(hs) == 1);
		(void)pol_hostset_match(hs, pat, 443, NULL, 0);
		pol_hostset_free(hs);
	}
	free(pat);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s;
	char *copy;
	struct pol_target t;
	const char *path;
	size_t path_len;

	/* An exact-size heap copy, so ASan sees any read past the end. */
	copy = malloc(size ? size : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	s = copy;

	if (pol_target_parse_authority(s, size, &t) == POL_R_NONE) {
		INVARIANT(t.port != 0);
		check_canonical(&t);
	}
	if (pol_target_parse_uri(s, size, &t, &path, &path_len) ==
	    POL_R_NONE) {
		INVARIANT(path_len > 0 && path[0] == '/');
		check_canonical(&t);
	}
	if (pol_target_parse_hostport(s, size, 80, &t) == POL_R_NONE)
		check_canonical(&t);
	if (pol_host_parse(s, size, 0, &t) == POL_R_NONE)
		check_canonical(&t);
	if (pol_host_parse(s, size, 1, &t) == POL_R_NONE)
		check_canonical(&t);
	fuzz_addr(s, size);
	fuzz_hostset(s, size);
	free(copy);
	return 0;
}
