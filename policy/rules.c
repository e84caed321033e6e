/*
 * rules.c: request rules (policy.h, "Request rules"): which method and
 * path a rule matches on which hosts, the first match of a list, and
 * the built-in rules after it.  Pure: the caller passes the request and
 * a scratch buffer for its normalized path.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy-int.h"

struct rule {
	char name[POL_RULE_NAME_MAX + 1];
	char *tenant;                    /* NULL: every tenant */
	struct pol_hostset *hosts;
	char **methods;
	size_t nmethods;
	char **paths;
	size_t npaths;
	enum pol_rule_action action;
};

struct pol__rules {
	struct rule *v;
	size_t n, cap;
};

static const char *const action_names[] = {
	[POL_RA_ALLOW] = "allow",
	[POL_RA_DENY] = "deny",
	[POL_RA_PROMPT] = "prompt",
};

const char *
pol_rule_action_name(enum pol_rule_action a)
{
	if ((int)a < 0 ||
	    (size_t)a >= sizeof(action_names) / sizeof(*action_names))
		return "unknown";
	return action_names[a];
}

int
pol_rule_action_parse(const char *s, enum pol_rule_action *out)
{
	size_t i;

	if (s == NULL)
		return -1;
	for (i = 0; i < sizeof(action_names) / sizeof(*action_names); i++)
		if (strcmp(s, action_names[i]) == 0) {
			*out = (enum pol_rule_action)i;
			return 0;
		}
	return -1;
}

static void
strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void
rule_clear(struct rule *r)
{
	free(r->tenant);
	pol_hostset_free(r->hosts);
	strv_free(r->methods, r->nmethods);
	strv_free(r->paths, r->npaths);
	memset(r, 0, sizeof(*r));
}

void
pol__rules_free(struct pol__rules *rs)
{
	size_t i;

	if (rs == NULL)
		return;
	for (i = 0; i < rs->n; i++)
		rule_clear(&rs->v[i]);
	free(rs->v);
	free(rs);
}

int
pol_rule_method_valid(const char *m)
{
	size_t i, n = m != NULL ? strlen(m) : 0;

	if (n == 0 || n > 23)
		return 0;
	for (i = 0; i < n; i++)
		if (!((m[i] >= 'A' && m[i] <= 'Z') || m[i] == '-'))
			return 0;
	return 1;
}

int
pol_rule_glob_valid(const char *g)
{
	size_t i, n = g != NULL ? strlen(g) : 0;

	if (n == 0 || n > 1024 || (g[0] != '/' && g[0] != '*'))
		return 0;
	for (i = 0; i < n; i++)
		if (g[i] <= ' ' || g[i] > '~' || g[i] == '?' || g[i] == '#')
			return 0;
	return 1;
}

int
pol_glob_match(const char *pat, const char *s, size_t n)
{
	const char *star = NULL;
	size_t i = 0, back = 0;

	/* the classic one-star backtrack: linear in n per star */
	for (;;) {
		if (*pat == '*') {
			while (*pat == '*')
				pat++;
			if (*pat == '\0')
				return 1;
			star = pat;
			back = i;
			continue;
		}
		if (i == n)
			return *pat == '\0';
		if (*pat != '\0' && *pat == s[i]) {
			pat++;
			i++;
			continue;
		}
		if (star == NULL)
			return 0;
		pat = star;
		i = ++back;
	}
}

static int
hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int
pol_path_normalize(const char *p, size_t n, char *out, size_t outlen,
    const char **query, size_t *qlen)
{
	const char *q = memchr(p, '?', n);
	size_t pn = q != NULL ? (size_t)(q - p) : n;
	size_t i, o = 0, seg, k;
	int trailing = 0;

	if (query != NULL) {
		*query = q != NULL ? q + 1 : "";
		*qlen = q != NULL ? n - pn - 1 : 0;
	}
	if (outlen < pn + 1 || pn == 0 || p[0] != '/')
		return -1;
	/* decode into out (never longer than the input) */
	for (i = 0; i < pn; i++) {
		char ch = p[i];

		if (ch == '%') {
			int hi, lo;

			if (i + 2 >= pn)
				return -1;
			hi = hexval(p[i + 1]);
			lo = hexval(p[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			ch = (char)(hi * 16 + lo);
			i += 2;
		} else if (ch == '\0' || ch == '#')
			return -1;
		out[o++] = ch;
	}
	out[o] = '\0';
	/* segments, in place: the write position never passes the read
	 * position.  k: where the output ends; seg: start of a segment */
	k = 0;
	i = 0;
	while (i < o) {
		size_t len;

		while (i < o && out[i] == '/')
			i++;
		seg = i;
		while (i < o && out[i] != '/')
			i++;
		len = i - seg;
		trailing = i == o ? (len == 0 ||
		    (len == 1 && out[seg] == '.') ||
		    (len == 2 && out[seg] == '.' && out[seg + 1] == '.')) :
		    trailing;
		if (len == 0 || (len == 1 && out[seg] == '.'))
			continue;
		if (len == 2 && out[seg] == '.' && out[seg + 1] == '.') {
			while (k > 0 && out[k - 1] != '/')
				k--;
			if (k > 0)
				k--;   /* the '/' before the dropped segment */
			continue;
		}
		out[k++] = '/';
		memmove(out + k, out + seg, len);
		k += len;
		trailing = 0;
	}
	if (k == 0 || trailing)
		out[k++] = '/';
	out[k] = '\0';
	return 0;
}

static char **
strv_copy(const char *const *v, size_t n)
{
	char **c = calloc(n ? n : 1, sizeof(*c));
	size_t i;

	if (c == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if ((c[i] = strdup(v[i])) == NULL) {
			strv_free(c, i);
			return NULL;
		}
	return c;
}

int
pol_config_add_rule(struct pol_config *c, const struct pol_rule_spec *sp,
    const char **why)
{
	struct pol__rules **rsp, *rs;
	struct rule r;
	size_t i;

	*why = "out of memory";
	if (c == NULL || sp == NULL)
		return -1;
	if (sp->name == NULL || !pol_id_valid(sp->name)) {
		*why = "a rule name is 1 to 64 of A-Z a-z 0-9 . _ -";
		return -1;
	}
	if (sp->tenant != NULL && !pol_id_valid(sp->tenant)) {
		*why = "bad tenant name";
		return -1;
	}
	if (sp->nhosts == 0) {
		*why = "a rule names at least one host";
		return -1;
	}
	for (i = 0; i < sp->nmethods; i++)
		if (!pol_rule_method_valid(sp->methods[i])) {
			*why = "a method is an upper-case token (GET, POST, ...)";
			return -1;
		}
	for (i = 0; i < sp->npaths; i++)
		if (!pol_rule_glob_valid(sp->paths[i])) {
			*why = "a path is a glob starting with / or *, printable "
			    "ASCII without spaces, ? or #, at most 1024 bytes";
			return -1;
		}
	if ((int)sp->action < 0 || sp->action > POL_RA_PROMPT) {
		*why = "the action is allow, deny or prompt";
		return -1;
	}
	rsp = &c->rules;
	for (i = 0; *rsp != NULL && i < (*rsp)->n; i++)
		if (strcmp((*rsp)->v[i].name, sp->name) == 0 &&
		    ((*rsp)->v[i].tenant == NULL) == (sp->tenant == NULL) &&
		    (sp->tenant == NULL ||
		    strcmp((*rsp)->v[i].tenant, sp->tenant) == 0)) {
			*why = "another rule has this name";
			return -1;
		}
	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "%s", sp->name);
	r.action = sp->action;
	if ((sp->tenant != NULL && (r.tenant = strdup(sp->tenant)) == NULL) ||
	    (r.hosts = pol_hostset_new()) == NULL)
		goto fail;
	for (i = 0; i < sp->nhosts; i++)
		if (pol_hostset_add(r.hosts, sp->hosts[i]) != 0) {
			*why = "a host is a name or *.suffix with an optional "
			    ":port";
			goto fail;
		}
	if ((r.methods = strv_copy(sp->methods, sp->nmethods)) == NULL)
		goto fail;
	r.nmethods = sp->nmethods;
	if ((r.paths = strv_copy(sp->paths, sp->npaths)) == NULL)
		goto fail;
	r.npaths = sp->npaths;
	if (*rsp == NULL && (*rsp = calloc(1, sizeof(**rsp))) == NULL)
		goto fail;
	rs = *rsp;
	if (rs->n == rs->cap) {
		size_t ncap = rs->cap ? rs->cap * 2 : 8;
		struct rule *nv = realloc(rs->v, ncap * sizeof(*nv));

		if (nv == NULL)
			goto fail;
		rs->v = nv;
		rs->cap = ncap;
	}
	rs->v[rs->n++] = r;
	*why = NULL;
	return 0;
fail:
	rule_clear(&r);
	return -1;
}

void
pol_config_rules_truncate(struct pol_config *c, size_t n)
{
	struct pol__rules *rs = c != NULL ? c->rules : NULL;

	while (rs != NULL && rs->n > n)
		rule_clear(&rs->v[--rs->n]);
}

size_t
pol_config_rule_count(const struct pol_config *c)
{
	const struct pol__rules *rs = c != NULL ? c->rules : NULL;

	return rs != NULL ? rs->n : 0;
}

int
pol_host_pattern_covered(const char *const *patterns, size_t n,
    const char *pat)
{
	const char *colon = strchr(pat, ':');
	size_t pn = colon ? (size_t)(colon - pat) : strlen(pat), i;
	int wild = pn >= 2 && pat[0] == '*' && pat[1] == '.';
	const char *name = wild ? pat + 2 : pat;
	size_t nn = wild ? pn - 2 : pn;

	for (i = 0; i < n; i++) {
		const char *h = patterns[i];
		size_t hn;

		if (strncmp(h, "*.", 2) != 0) {
			/* an exact name covers only itself */
			if (!wild && strlen(h) == nn && memcmp(h, name, nn) == 0)
				return 1;
			continue;
		}
		h += 2;
		hn = strlen(h);
		if (nn > hn && name[nn - hn - 1] == '.' &&
		    memcmp(name + nn - hn, h, hn) == 0)
			return 1;
		if (wild && nn == hn && memcmp(name, h, hn) == 0)
			return 1;
	}
	return 0;
}

static int
rule_matches(const struct rule *r, const char *tenant,
    const struct pol_target *t, const char *method, const char *npath,
    size_t nlen)
{
	size_t i;

	if (r->tenant != NULL && (tenant == NULL ||
	    strcmp(r->tenant, tenant) != 0))
		return 0;
	if (!pol_hostset_match(r->hosts, t->host, t->port, NULL, 0))
		return 0;
	if (r->nmethods > 0) {
		for (i = 0; i < r->nmethods; i++)
			if (strcmp(r->methods[i], method) == 0)
				break;
		if (i == r->nmethods)
			return 0;
	}
	if (r->npaths > 0) {
		for (i = 0; i < r->npaths; i++)
			if (pol_glob_match(r->paths[i], npath, nlen))
				break;
		if (i == r->npaths)
			return 0;
	}
	return 1;
}

static int
ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* git's smart-HTTP push: POST .../git-receive-pack, and the discovery
 * that precedes it, GET .../info/refs?service=git-receive-pack */
static int
git_push(const char *npath, size_t nlen, const char *query, size_t qlen)
{
	static const char svc[] = "service=git-receive-pack";
	size_t i;

	if (ends_with(npath, nlen, "/git-receive-pack"))
		return 1;
	if (!ends_with(npath, nlen, "/info/refs"))
		return 0;
	for (i = 0; i + sizeof(svc) - 1 <= qlen; i++)
		if ((i == 0 || query[i - 1] == '&') &&
		    memcmp(query + i, svc, sizeof(svc) - 1) == 0)
			return 1;
	return 0;
}

enum pol_reason
pol_rules_match(const struct pol_config *c, const char *tenant,
    const struct pol_target *t, const char *method, const char *path,
    size_t path_len, char *scratch, size_t scratch_len,
    struct pol_rule_match *out)
{
	const struct pol__rules *rs = c->rules;
	const char *query;
	size_t i, nlen, qlen;

	memset(out, 0, sizeof(*out));
	if (tenant != NULL && *tenant == '\0')
		tenant = NULL;
	if (pol_path_normalize(path, path_len, scratch, scratch_len, &query,
	    &qlen) != 0)
		return POL_R_BAD_TARGET;
	nlen = strlen(scratch);
	for (i = 0; rs != NULL && i < rs->n; i++)
		if (rule_matches(&rs->v[i], tenant, t, method, scratch, nlen)) {
			out->matched = 1;
			out->action = rs->v[i].action;
			out->index = i;
			snprintf(out->name, sizeof(out->name), "%s",
			    rs->v[i].name);
			return POL_R_NONE;
		}
	if (t->kind == POL_HOST_NAME &&
	    pol_hostset_match(c->registries, t->host, t->port, NULL, 0) &&
	    strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		out->matched = out->builtin = 1;
		out->action = POL_RA_DENY;
		snprintf(out->name, sizeof(out->name), "%s",
		    POL_RULE_BUILTIN_REGISTRIES);
		return POL_R_NONE;
	}
	if (git_push(scratch, nlen, query, qlen)) {
		out->matched = out->builtin = 1;
		out->action = POL_RA_DENY;
		snprintf(out->name, sizeof(out->name), "%s",
		    POL_RULE_BUILTIN_GIT_PUSH);
	}
	return POL_R_NONE;
}
