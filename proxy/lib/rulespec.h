/*
 * rulespec.h: a request rule as the control API gives it (POST and PUT
 * /v1/rules) and as the state file keeps it, read and checked.  Pure:
 * no daemon state; whether sluice sees its hosts' requests (inspect.hosts,
 * tls.plain_http_ports) and whether its name is free are the caller's to
 * check.
 */
#ifndef SLUICE_RULESPEC_H
#define SLUICE_RULESPEC_H

#include <stddef.h>

#include <jansson.h>

#include "policy/policy.h"

#define RULE_SPEC_LIST_MAX 64    /* hosts, methods, paths: each */

struct rule_spec {
	char *name;
	char *tenant;                    /* NULL: every tenant */
	char **hosts; size_t nhosts;     /* names, *.suffix, optional :port */
	char **methods; size_t nmethods; /* none: any */
	char **paths; size_t npaths;     /* globs; none: any */
	enum pol_rule_action action;
};

/*
 * Read o, {"name", "tenant"?, "hosts", "methods"?, "paths"?, "action"},
 * into out (zeroed first); unknown keys are refused.  0, or -1 with err
 * naming the field ("hosts[2]: expected ...") and out freed.
 */
int rule_spec_parse(json_t *o, struct rule_spec *out, char *err,
    size_t errlen) SLUICE_MUSTCHECK;
void rule_spec_free(struct rule_spec *s);
/* The rule as answers and the state file show it (tenant null for
 * every tenant; methods and paths [] for any).  New reference or NULL. */
json_t *rule_spec_json(const struct rule_spec *s);
/* The policy's view of s (pointers into s). */
void rule_spec_pol(const struct rule_spec *s, struct pol_rule_spec *out);

#endif /* SLUICE_RULESPEC_H */
