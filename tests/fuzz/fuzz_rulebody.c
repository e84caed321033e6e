/*
 * fuzz_rulebody.c: the bodies of POST /v1/rules (one rule) and PUT
 * /v1/rules ({"rules": [...]}), read as the control API reads them
 * (jsonstrict_load, then rule_spec_parse; proxy/lib/rulespec.h).
 *
 * Invariants: a refusal says why; a rule that is read prints as JSON
 * that reads back to the same JSON; and the policy takes every rule
 * read (rulespec.h's promise: only a name taken twice is refused, and
 * then exactly when the list has one twice).
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/policy.h"
#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/rulespec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INVARIANT(c) do { if (!(c)) abort(); } while (0)
#define MAXN 64

/* Reads o; on success checks the round trip and adds it to p.  1: read,
 * 0: refused; *dup set when the policy refused it for its name alone. */
static int
one(json_t *o, struct pol_config *p, int *dup)
{
	struct rule_spec s, s2;
	struct pol_rule_spec ps;
	json_t *j, *j2;
	const char *why;
	char err[256];

	err[0] = '\0';
	if (rule_spec_parse(o, &s, err, sizeof(err)) != 0) {
		INVARIANT(err[0] != '\0');
		return 0;
	}
	INVARIANT(s.name != NULL && s.nhosts >= 1);
	j = rule_spec_json(&s);
	INVARIANT(j != NULL);
	INVARIANT(rule_spec_parse(j, &s2, err, sizeof(err)) == 0);
	j2 = rule_spec_json(&s2);
	INVARIANT(j2 != NULL && json_equal(j, j2));
	json_decref(j);
	json_decref(j2);
	rule_spec_free(&s2);
	rule_spec_pol(&s, &ps);
	if (pol_config_add_rule(p, &ps, &why) != 0) {
		INVARIANT(why != NULL && strstr(why, "name") != NULL);
		*dup = 1;
	}
	rule_spec_free(&s);
	return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t je;
	json_t *root, *a, *o;
	struct pol_config *p;
	const char *names[MAXN];
	size_t i, j, nread = 0;
	int dup = 0, twice = 0, all = 1;

	root = jsonstrict_load((const char *)data, size, &je);
	if (root == NULL)
		return 0;
	p = pol_config_new();
	INVARIANT(p != NULL);
	a = json_object_get(root, "rules");
	if (json_is_array(a) && json_object_size(root) == 1) {
		json_array_foreach(a, i, o) {
			if (!one(o, p, &dup)) {
				all = 0;
				continue;
			}
			if (nread < MAXN)
				names[nread] = json_string_value(
				    json_object_get(o, "name"));
			nread++;
		}
		/* the policy refuses a name only when one is there twice
		 * (tenants apart: every tenant's and one tenant's may share) */
		for (i = 0; all && nread <= MAXN && i < nread; i++)
			for (j = 0; j < i; j++)
				if (strcmp(names[i], names[j]) == 0)
					twice = 1;
		if (all && nread <= MAXN && !twice)
			INVARIANT(!dup);
		if (dup)
			INVARIANT(twice || !all || nread > MAXN);
	} else {
		(void)one(root, p, &dup);
		INVARIANT(!dup);
	}
	pol_config_free(p);
	json_decref(root);
	return 0;
}
