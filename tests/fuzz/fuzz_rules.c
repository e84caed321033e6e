/*
 * fuzz_rules.c: request rules, as the configuration gives them and as a
 * request meets them.  The input is a rules array (JSON) and, after the
 * first NUL byte, a request line "METHOD HOST PATH".
 *
 * Invariants: rules that load build into a policy (the load checked
 * everything the build refuses); a normalized path is absolute, has no
 * empty, "." or ".." segment, and normalizes to itself; a rule that
 * matches a request names a rule of the list or a built-in one, and the
 * same request matches the same rule again.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/lib/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INVARIANT(c) do { if (!(c)) abort(); } while (0)

static const char head[] =
    "{\"inspect\": {\"hosts\": [\"a.test\", \"*.b.test\"]},"
    " \"registries\": [\"reg.b.test\"], \"rules\": ";

static void
check_normal(const char *p, size_t n)
{
	char *o1 = malloc(n + 1), *o2 = malloc(n + 1);
	size_t k;

	INVARIANT(o1 != NULL && o2 != NULL);
	if (pol_path_normalize(p, n, o1, n + 1, NULL, NULL) == 0) {
		k = strlen(o1);
		INVARIANT(k >= 1 && k <= n && o1[0] == '/');
		INVARIANT(strstr(o1, "//") == NULL);
		INVARIANT(strstr(o1, "/./") == NULL);
		INVARIANT(strstr(o1, "/../") == NULL);
		INVARIANT(!(k >= 2 && strcmp(o1 + k - 2, "/.") == 0));
		INVARIANT(!(k >= 3 && strcmp(o1 + k - 3, "/..") == 0));
		/* '%' is decoded once: a decoded '%' may start an escape the
		 * second pass reads, so only escape-free outputs are fixed
		 * points */
		if (memchr(o1, '%', k) == NULL && memchr(o1, '?', k) == NULL) {
			INVARIANT(pol_path_normalize(o1, k, o2, n + 1, NULL,
			    NULL) == 0);
			INVARIANT(strcmp(o1, o2) == 0);
		}
	}
	free(o1);
	free(o2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t rlen = nul ? (size_t)(nul - data) : size;
	char err[512], *text, method[32], host[300], *path;
	struct cfg *c;
	struct pol_config *p;
	struct pol_target t;
	struct pol_rule_match m1, m2;
	char *scratch;
	size_t plen;

	if (nul != NULL) {
		const char *req = (const char *)nul + 1;
		size_t qn = size - rlen - 1;

		check_normal(req, qn);
	}
	text = malloc(sizeof(head) + rlen + 2);
	if (text == NULL)
		return 0;
	memcpy(text, head, sizeof(head) - 1);
	memcpy(text + sizeof(head) - 1, data, rlen);
	memcpy(text + sizeof(head) - 1 + rlen, "}", 2);
	err[0] = '\0';
	c = cfg_load_buffer(text, strlen(text), "fuzz.json", err, sizeof(err));
	free(text);
	if (c == NULL) {
		INVARIANT(err[0] != '\0');
		return 0;
	}
	p = cfg_build_policy(c, err, sizeof(err));
	INVARIANT(p != NULL);
	INVARIANT(pol_config_rule_count(p) == c->nrules);
	if (nul == NULL) {
		pol_config_free(p);
		cfg_free(c);
		return 0;
	}
	/* "METHOD HOST PATH" */
	path = malloc(size - rlen);
	if (path == NULL)
		goto out;
	memcpy(path, nul + 1, size - rlen - 1);
	path[size - rlen - 1] = '\0';
	if (sscanf(path, "%31s %299s", method, host) == 2) {
		const char *sp = strchr(path, ' ');

		sp = sp ? strchr(sp + 1, ' ') : NULL;
		if (sp != NULL && pol_host_parse(host, strlen(host), 0, &t) ==
		    POL_R_NONE) {
			sp++;
			plen = strlen(sp);
			t.port = 443;
			scratch = malloc(plen + 1);
			if (scratch != NULL &&
			    pol_rules_match(p, NULL, &t, method, sp, plen,
			    scratch, plen + 1, &m1) == POL_R_NONE) {
				INVARIANT(pol_rules_match(p, NULL, &t, method,
				    sp, plen, scratch, plen + 1, &m2) ==
				    POL_R_NONE);
				INVARIANT(m1.matched == m2.matched &&
				    strcmp(m1.name, m2.name) == 0);
				if (m1.matched && !m1.builtin) {
					INVARIANT(m1.index < c->nrules);
					INVARIANT(strcmp(c->rules[m1.index].name,
					    m1.name) == 0);
				}
				if (m1.builtin)
					INVARIANT(m1.action == POL_RA_DENY &&
					    strncmp(m1.name, "builtin:", 8) == 0);
			}
			free(scratch);
		}
	}
	free(path);
out:
	pol_config_free(p);
	cfg_free(c);
	return 0;
}
