/*
 * rules.c: request rules through the control API (GET/POST/PUT
 * /v1/rules, GET/DELETE /v1/rules/{id}; sluiced(8) "Request rules").
 *
 * The API's rules come after the configuration's (the file is the
 * operator's and the API cannot get in front of it) and before the
 * built-in ones, in the order the API gave them; each applies to every
 * tenant or to one.  They are kept in the state file, so a restart
 * restores them, and a reload puts them after the new configuration's
 * rules again (main.c refuses a reload they no longer fit).  A change
 * is checked whole on a scratch policy, recorded, saved and only then
 * put into the running policy, between two requests: no tunnel drops.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <jansson.h>

#include "proxy/daemon.h"
#include "proxy/control/ctl.h"
#include "proxy/control/control-int.h"
#include "proxy/lib/rulespec.h"

static struct rule_spec *rules;      /* the API's, in order */
static size_t nrules;

static void
list_free(struct rule_spec *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		rule_spec_free(&v[i]);
	free(v);
}

void
ctl_rules_free(void)
{
	list_free(rules, nrules);
	rules = NULL;
	nrules = 0;
	json_decref(ctl_api_rules);
	ctl_api_rules = NULL;
}

static ssize_t
find_in(const struct rule_spec *v, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return (ssize_t)i;
	return -1;
}

/* Append v[0..n) to p.  0, or -1 with err naming the rule. */
static int
add_all(struct pol_config *p, const struct rule_spec *v, size_t n,
    char *err, size_t errlen)
{
	struct pol_rule_spec ps;
	const char *why;
	size_t i;

	for (i = 0; i < n; i++) {
		rule_spec_pol(&v[i], &ps);
		if (pol_config_add_rule(p, &ps, &why) != 0)
			return errf(err, errlen, "rule %s: %s", v[i].name,
			    why != NULL ? why : "refused");
	}
	return 0;
}

/* The list of a [RULE...] array (ctl_api_rules), or NULL with err. */
static struct rule_spec *
list_of(json_t *a, size_t *n, char *err, size_t errlen)
{
	struct rule_spec *v;
	json_t *o;
	size_t i;
	char why[200];

	*n = 0;
	if ((v = calloc(json_array_size(a) + 1, sizeof(*v))) == NULL) {
		errf(err, errlen, "out of memory");
		return NULL;
	}
	json_array_foreach(a, i, o) {
		if (rule_spec_parse(o, &v[i], why, sizeof(why)) != 0) {
			list_free(v, *n);
			errf(err, errlen, "rules[%zu]: %s", i, why);
			return NULL;
		}
		*n = i + 1;
	}
	return v;
}

/* The state file's array of the list (new reference) or NULL. */
static json_t *
json_of(const struct rule_spec *v, size_t n)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < n; i++)
		if (json_array_append_new(a, rule_spec_json(&v[i])) != 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

int
ctl_rules_apply(struct pol_config *p, const struct cfg *c, char *err,
    size_t errlen)
{
	struct rule_spec *v;
	size_t i, n;

	/* the state file's (ctl_state_load checked them) become the list */
	if (ctl_api_rules != NULL) {
		if ((v = list_of(ctl_api_rules, &n, err, errlen)) == NULL)
			return -1;
		list_free(rules, nrules);
		rules = v;
		nrules = n;
	}
	for (i = 0; c != NULL && i < nrules; i++) {
		size_t j;

		for (j = 0; j < c->nrules; j++)
			if (strcmp(c->rules[j].name, rules[i].name) == 0)
				return errf(err, errlen, "rule %s of the control "
				    "API (state file) has the name of rules[%zu] "
				    "of the configuration: rename one (DELETE "
				    "/v1/rules/%s)", rules[i].name, j,
				    rules[i].name);
		/* kept, but said: it matches nothing until sluice sees them */
		for (j = 0; j < rules[i].nhosts; j++)
			if (!cfg_rule_host_seen(c, rules[i].hosts[j]))
				px_log(PX_WARN, "rule %s of the control API: "
				    "sluice no longer sees the requests of %s "
				    "(inspect.hosts, tls.plain_http_ports)",
				    rules[i].name, rules[i].hosts[j]);
	}
	return add_all(p, rules, nrules, err, errlen);
}

/*
 * The whole new list v[0..n) checked against the running configuration:
 * names unique and none a configuration rule's, every host one whose
 * requests sluice sees, and the lot accepted by a scratch policy.
 */
static int
check_list(const struct rule_spec *v, size_t n, struct ctl_err *e)
{
	struct pol_config *scratch;
	char why[200];
	size_t i, j;
	int rc;

	if (n > CTL_RULES_MAX)
		return ctl_fail(e, CTL_TOO_MANY_RULES, "at most %d rules "
		    "through the control API", CTL_RULES_MAX);
	for (i = 0; i < n; i++) {
		for (j = 0; j < i; j++)
			if (strcmp(v[i].name, v[j].name) == 0)
				return ctl_fail(e, CTL_CONFLICT, "rules[%zu]: "
				    "the name %s is also rules[%zu]'s", i,
				    v[i].name, j);
		for (j = 0; px.cfg != NULL && j < px.cfg->nrules; j++)
			if (strcmp(v[i].name, px.cfg->rules[j].name) == 0)
				return ctl_fail(e, CTL_CONFLICT, "rule %s: the "
				    "configuration has a rule of this name "
				    "(rules[%zu])", v[i].name, j);
		for (j = 0; px.cfg != NULL && j < v[i].nhosts; j++)
			if (!cfg_rule_host_seen(px.cfg, v[i].hosts[j]))
				return ctl_fail(e, CTL_HOST_NOT_INSPECTED,
				    "rule %s: hosts[%zu]: sluice never sees the "
				    "requests of %.120s: add it to inspect.hosts "
				    "(at the next start), or name it with a port of "
				    "tls.plain_http_ports (\"host:80\") for plain "
				    "HTTP only", v[i].name, j, v[i].hosts[j]);
	}
	if ((scratch = pol_config_new()) == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	rc = add_all(scratch, v, n, why, sizeof(why));
	pol_config_free(scratch);
	if (rc != 0)
		return ctl_fail(e, CTL_BAD_REQUEST, "%s", why);
	return 0;
}

static int
record(const struct ctl_actor *a, const char *action, const char *name,
    const char *tenant, size_t count, const char *outcome)
{
	struct clog_rec *r = clog_rec_new("admin");
	char target[POL_RULE_NAME_MAX + 32];

	if (name != NULL)
		snprintf(target, sizeof(target), "rule %s", name);
	else
		snprintf(target, sizeof(target), "rules (%zu)", count);
	clog_rec_str(r, "action", action);
	clog_rec_str(r, "who", a ? a->who : "sluiced");
	clog_rec_str(r, "role", a ? a->role : NULL);
	clog_rec_str(r, "target", target);
	if (name != NULL)
		clog_rec_str(r, "rule", name);
	if (tenant != NULL)
		clog_rec_str(r, "tenant", tenant);
	clog_rec_str(r, "outcome", outcome);
	return clog_write(px.log, r);
}

/*
 * Make next[0..n) the API's rules: recorded, saved, then in force.  On
 * success next is owned here; on failure the caller keeps it.
 */
static int
commit(const struct ctl_actor *a, const char *action, const char *name,
    const char *tenant, struct rule_spec *next, size_t n, struct ctl_err *e)
{
	struct rule_spec *old = rules;
	size_t nold = nrules;
	json_t *jold = ctl_api_rules, *jnext = json_of(next, n);
	char err[200];

	if (jnext == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	if (record(a, action, name, tenant, n, "ok") != 0) {
		json_decref(jnext);
		return ctl_fail(e, CTL_LOG_UNAVAILABLE, "the connection log "
		    "cannot be written (%s): %s was not done",
		    clog_path(px.log), action);
	}
	ctl_api_rules = jnext;
	if (ctl_state_save(e) != 0) {
		ctl_api_rules = jold;
		json_decref(jnext);
		(void)record(a, action, name, tenant, n, "undone");
		return -1;
	}
	json_decref(jold);
	rules = next;
	nrules = n;
	/* the configuration's rules stay; the API's follow them again */
	pol_config_rules_truncate(px.pol, px.cfg->nrules);
	if (add_all(px.pol, rules, nrules, err, sizeof(err)) != 0)
		/* only memory: checked on a scratch policy already */
		px_log(PX_ERR, "%s: the control API's rules are not all in "
		    "force: %s", __func__, err);
	list_free(old, nold);
	return 0;
}

/* A copy of the list with room for one more. */
static struct rule_spec *
copy_list(struct ctl_err *e)
{
	struct rule_spec *v = calloc(nrules + 1, sizeof(*v));
	json_t *j;
	size_t i;
	char why[200];

	if (v == NULL) {
		ctl_fail(e, CTL_INTERNAL, "out of memory");
		return NULL;
	}
	/* through JSON: one deep-copy path, the one the state file takes */
	for (i = 0; i < nrules; i++) {
		j = rule_spec_json(&rules[i]);
		if (j == NULL || rule_spec_parse(j, &v[i], why,
		    sizeof(why)) != 0) {
			json_decref(j);
			list_free(v, i);
			ctl_fail(e, CTL_INTERNAL, "out of memory");
			return NULL;
		}
		json_decref(j);
	}
	return v;
}

int
ctl_rule_put(const struct ctl_actor *a, void *body, void **out,
    int *created, struct ctl_err *e)
{
	struct rule_spec s, *next;
	ssize_t at;
	size_t n;
	char why[200];

	*out = NULL;
	if (rule_spec_parse(body, &s, why, sizeof(why)) != 0)
		return ctl_fail(e, CTL_BAD_REQUEST, "%s", why);
	if ((next = copy_list(e)) == NULL) {
		rule_spec_free(&s);
		return -1;
	}
	at = find_in(next, nrules, s.name);
	*created = at < 0;
	n = nrules;
	if (at >= 0) {
		/* the same name: replaced where it stands (first match) */
		rule_spec_free(&next[at]);
		next[at] = s;
	} else
		next[n++] = s;
	memset(&s, 0, sizeof(s));
	if (check_list(next, n, e) != 0 ||
	    commit(a, "rule_set", next[at >= 0 ? at : (ssize_t)n - 1].name,
	    next[at >= 0 ? at : (ssize_t)n - 1].tenant, next, n, e) != 0) {
		list_free(next, n);
		return -1;
	}
	*out = rule_spec_json(&rules[at >= 0 ? at : (ssize_t)n - 1]);
	return 0;
}

int
ctl_rules_replace(const struct ctl_actor *a, void *body, void **out,
    struct ctl_err *e)
{
	json_t *b = body, *arr = json_object_get(b, "rules"), *o;
	struct rule_spec *next;
	size_t i, n = 0;
	char why[200];

	*out = NULL;
	if (!json_is_object(b) || json_object_size(b) != 1 ||
	    !json_is_array(arr))
		return ctl_fail(e, CTL_BAD_REQUEST, "expected {\"rules\": "
		    "[RULE...]}");
	if (json_array_size(arr) > CTL_RULES_MAX)
		return ctl_fail(e, CTL_TOO_MANY_RULES, "at most %d rules "
		    "through the control API", CTL_RULES_MAX);
	if ((next = calloc(json_array_size(arr) + 1, sizeof(*next))) == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	json_array_foreach(arr, i, o) {
		if (rule_spec_parse(o, &next[i], why, sizeof(why)) != 0) {
			list_free(next, n);
			return ctl_fail(e, CTL_BAD_REQUEST, "rules[%zu]: %s", i,
			    why);
		}
		n = i + 1;
	}
	if (check_list(next, n, e) != 0 ||
	    commit(a, "rules_replace", NULL, NULL, next, n, e) != 0) {
		list_free(next, n);
		return -1;
	}
	*out = ctl_rules_json(NULL);
	return 0;
}

int
ctl_rule_delete(const struct ctl_actor *a, const char *name,
    struct ctl_err *e)
{
	struct rule_spec *next;
	ssize_t at = find_in(rules, nrules, name);
	char tenant[POL_ID_MAX + 1];

	if (at < 0)
		return ctl_fail(e, CTL_NOT_FOUND, "no rule %s in the control "
		    "API's rules%s", name, px.cfg != NULL &&
		    px.cfg->nrules > 0 ? " (the configuration's are changed "
		    "in its file)" : "");
	if ((next = copy_list(e)) == NULL)
		return -1;
	snprintf(tenant, sizeof(tenant), "%s", rules[at].tenant != NULL ?
	    rules[at].tenant : "");
	rule_spec_free(&next[at]);
	memmove(next + at, next + at + 1, (nrules - (size_t)at - 1) *
	    sizeof(*next));
	if (commit(a, "rule_delete", name, tenant[0] ? tenant : NULL, next,
	    nrules - 1, e) != 0) {
		list_free(next, nrules - 1);
		return -1;
	}
	return 0;
}

/* A rule a caller bound to tenant may see. */
static int
visible(const struct rule_spec *s, const char *tenant)
{
	return tenant == NULL || s->tenant == NULL ||
	    strcmp(s->tenant, tenant) == 0;
}

void *
ctl_rules_json(const char *tenant)
{
	json_t *api = json_array(), *conf = json_array();
	size_t i;

	for (i = 0; api != NULL && i < nrules; i++)
		if (visible(&rules[i], tenant))
			json_array_append_new(api, rule_spec_json(&rules[i]));
	for (i = 0; conf != NULL && px.cfg != NULL && i < px.cfg->nrules;
	    i++) {
		const struct cfg_rule *r = &px.cfg->rules[i];
		struct rule_spec v = {
			r->name, NULL, r->hosts, r->nhosts, r->methods,
			r->nmethods, r->paths, r->npaths,
			(enum pol_rule_action)r->action,
		};

		json_array_append_new(conf, rule_spec_json(&v));
	}
	return json_pack("{s:o,s:o,s:[ss]}", "rules", api, "config", conf,
	    "builtin", POL_RULE_BUILTIN_REGISTRIES, POL_RULE_BUILTIN_GIT_PUSH);
}

void *
ctl_rule_json(const char *name, const char *tenant)
{
	ssize_t at = find_in(rules, nrules, name);

	if (at < 0 || !visible(&rules[at], tenant))
		return NULL;
	return rule_spec_json(&rules[at]);
}
