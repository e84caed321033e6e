/*
 * rulespec.c: request rules as the control API gives them (rulespec.h).
 * The checks are the policy's own (pol_id_valid, pol_rule_method_valid,
 * pol_rule_glob_valid, pol_hostset_add), so a rule read here is one
 * pol_config_add_rule takes, but for a name another rule has.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/lib/rulespec.h"
#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/util.h"

void
rule_spec_free(struct rule_spec *s)
{
	if (s == NULL)
		return;
	free(s->name);
	free(s->tenant);
	util_strv_free(s->hosts, s->nhosts);
	util_strv_free(s->methods, s->nmethods);
	util_strv_free(s->paths, s->npaths);
	memset(s, 0, sizeof(*s));
}

int
rule_spec_parse(json_t *o, struct rule_spec *out, char *err, size_t errlen)
{
	static const char *const keys[] = { "name", "tenant", "hosts",
	    "methods", "paths", "action", NULL };
	const char *name, *tenant, *action, *k;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(o))
		return errf(err, errlen, "expected a JSON object");
	if ((k = jsonstrict_unknown_key(o, keys)) != NULL)
		return errf(err, errlen, "%.64s: unknown field (expected "
		    "name, tenant, hosts, methods, paths, action)", k);
	if (jsonstrict_str(o, "name", 1, &name, err, errlen) != 0 ||
	    jsonstrict_str(o, "tenant", 0, &tenant, err, errlen) != 0 ||
	    jsonstrict_str(o, "action", 1, &action, err, errlen) != 0)
		return -1;
	if (jsonstrict_check("name", name, pol_id_valid, POL_ID_WHAT, err,
	    errlen) != 0 || (tenant != NULL && jsonstrict_check("tenant",
	    tenant, pol_id_valid, POL_ID_WHAT ", or null for every tenant",
	    err, errlen) != 0))
		return -1;
	if (pol_rule_action_parse(action, &out->action) != 0)
		return errf(err, errlen, "action: expected allow, deny or "
		    "prompt");
	if ((out->name = strdup(name)) == NULL ||
	    (tenant != NULL && (out->tenant = strdup(tenant)) == NULL)) {
		rule_spec_free(out);
		return errf(err, errlen, "out of memory");
	}
	if (jsonstrict_strv(o, "hosts", 1, RULE_SPEC_LIST_MAX, 1, pol_hostset_pattern_valid, "a host name or *.suffix, "
	    "with an optional :port", &out->hosts, &out->nhosts, err,
	    errlen) != 0 ||
	    jsonstrict_strv(o, "methods", 0, RULE_SPEC_LIST_MAX, 1, pol_rule_method_valid, "an "
	    "upper-case method (GET, PUT, ...)", &out->methods,
	    &out->nmethods, err, errlen) != 0 ||
	    jsonstrict_strv(o, "paths", 0, RULE_SPEC_LIST_MAX, 1, pol_rule_glob_valid, "a path glob "
	    "starting with / or *, printable ASCII without spaces, ? or #",
	    &out->paths, &out->npaths, err, errlen) != 0) {
		rule_spec_free(out);
		return -1;
	}
	return 0;
}

json_t *
rule_spec_json(const struct rule_spec *s)
{
	return json_pack("{s:s,s:o,s:o,s:o,s:o,s:s}", "name", s->name,
	    "tenant", s->tenant ? json_string(s->tenant) : json_null(),
	    "hosts", jsonstrict_strv_json(s->hosts, s->nhosts),
	    "methods", jsonstrict_strv_json(s->methods, s->nmethods),
	    "paths", jsonstrict_strv_json(s->paths, s->npaths),
	    "action", pol_rule_action_name(s->action));
}

void
rule_spec_pol(const struct rule_spec *s, struct pol_rule_spec *out)
{
	memset(out, 0, sizeof(*out));
	out->name = s->name;
	out->tenant = s->tenant;
	out->hosts = (const char *const *)s->hosts;
	out->nhosts = s->nhosts;
	out->methods = (const char *const *)s->methods;
	out->nmethods = s->nmethods;
	out->paths = (const char *const *)s->paths;
	out->npaths = s->npaths;
	out->action = s->action;
}
