/*
 * state.c: the runtime state the decision reads: the global and
 * per-tenant ceilings, and the sessions with their tiers and grants.
 *
 * Lists are plain arrays searched linearly: sessions number in the
 * thousands at most and grants per session in the tens, and keeping
 * insertion order makes the _at iterators stable for the control API.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy-int.h"

#define ID_MAX POL_ID_MAX

struct tenant {
	char *name;
	enum pol_tier tier;    /* as set; clamped to the global one on read */
};

struct grant {
	char *host;
	uint16_t port;
};

struct pol_session {
	char id[ID_MAX + 1];
	char *tenant;
	char *user;
	enum pol_tier tier;
	struct grant *grants;
	size_t n_grants;
	/* egress rules: the patterns as set (allow ones first) and the
	 * sets they make */
	char **eg_pat;
	size_t n_eg, n_eg_allow;
	struct pol_hostset *eg_allow, *eg_deny;
};

struct pol_state {
	enum pol_tier ceiling;
	struct tenant *tenants;
	size_t n_tenants;
	struct pol_session **sessions;
	size_t n_sessions;
};

static int
tier_valid(enum pol_tier t)
{
	return t == POL_TIER_OFF || t == POL_TIER_REGISTRIES ||
	    t == POL_TIER_PUBLIC;
}

static char *
dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = malloc(n);

	if (p != NULL)
		memcpy(p, s, n);
	return p;
}

/* Grow an array of n elements by one; 0 / -1. */
static int
grow_one(void **arr, size_t n, size_t elem)
{
	void *p;

	if (n + 1 > ((size_t)-1) / elem)
		return -1;
	p = realloc(*arr, (n + 1) * elem);
	if (p == NULL)
		return -1;
	*arr = p;
	return 0;
}

int
pol_id_valid(const char *id)
{
	size_t i;

	/* ids name directories (<runtime_dir>/sessions/<id>/): ".", ".."
	 * and hidden names are not ids */
	if (id == NULL || id[0] == '.')
		return 0;
	for (i = 0; id[i] != '\0'; i++) {
		char ch = id[i];

		if (i >= ID_MAX)
			return 0;
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
		    ch == '-'))
			return 0;
	}
	return i > 0;
}

/* ------------------------------------------------------------------ */
/* Ceilings */

struct pol_state *
pol_state_new(void)
{
	struct pol_state *st = calloc(1, sizeof(*st));

	if (st != NULL)
		st->ceiling = POL_TIER_OFF;   /* DESIGN.md: default off */
	return st;
}

static void
session_free(struct pol_session *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->n_grants; i++)
		free(s->grants[i].host);
	free(s->grants);
	for (i = 0; i < s->n_eg; i++)
		free(s->eg_pat[i]);
	free(s->eg_pat);
	pol_hostset_free(s->eg_allow);
	pol_hostset_free(s->eg_deny);
	free(s->tenant);
	free(s->user);
	free(s);
}

void
pol_state_free(struct pol_state *st)
{
	size_t i;

	if (st == NULL)
		return;
	for (i = 0; i < st->n_tenants; i++)
		free(st->tenants[i].name);
	free(st->tenants);
	for (i = 0; i < st->n_sessions; i++)
		session_free(st->sessions[i]);
	free(st->sessions);
	free(st);
}

void
pol_state_set_ceiling(struct pol_state *st, enum pol_tier t)
{
	if (st != NULL && tier_valid(t))
		st->ceiling = t;
}

enum pol_tier
pol_state_global_ceiling(const struct pol_state *st)
{
	return st != NULL ? st->ceiling : POL_TIER_OFF;
}

static struct tenant *
tenant_find(const struct pol_state *st, const char *name)
{
	size_t i;

	for (i = 0; i < st->n_tenants; i++)
		if (strcmp(st->tenants[i].name, name) == 0)
			return &st->tenants[i];
	return NULL;
}

int
pol_state_set_tenant_ceiling(struct pol_state *st, const char *tenant,
    enum pol_tier t)
{
	struct tenant *te;
	char *name;

	if (st == NULL || !pol_id_valid(tenant) || !tier_valid(t))
		return -1;
	te = tenant_find(st, tenant);
	if (te != NULL) {
		te->tier = t;
		return 0;
	}
	name = dup_str(tenant);
	if (name == NULL ||
	    grow_one((void **)&st->tenants, st->n_tenants,
	    sizeof(*st->tenants)) < 0) {
		free(name);
		return -1;
	}
	st->tenants[st->n_tenants].name = name;
	st->tenants[st->n_tenants].tier = t;
	st->n_tenants++;
	return 0;
}

int
pol_state_clear_tenant_ceiling(struct pol_state *st, const char *tenant)
{
	struct tenant *te;
	size_t i;

	if (st == NULL || tenant == NULL)
		return -1;
	te = tenant_find(st, tenant);
	if (te == NULL)
		return -1;
	i = (size_t)(te - st->tenants);
	free(te->name);
	memmove(te, te + 1, (st->n_tenants - i - 1) * sizeof(*te));
	st->n_tenants--;
	return 0;
}

enum pol_tier
pol_state_ceiling(const struct pol_state *st, const char *tenant)
{
	const struct tenant *te;

	if (st == NULL)
		return POL_TIER_OFF;
	if (tenant == NULL || tenant[0] == '\0')
		return st->ceiling;
	te = tenant_find(st, tenant);
	if (te == NULL)
		return st->ceiling;
	/* Stored as set, clamped here: raising the global ceiling later
	 * restores the tenant's own value instead of a stale clamp. */
	return te->tier < st->ceiling ? te->tier : st->ceiling;
}

int
pol_state_tenant_at(const struct pol_state *st, size_t idx,
    const char **tenant, enum pol_tier *t)
{
	if (st == NULL || idx >= st->n_tenants)
		return -1;
	if (tenant != NULL)
		*tenant = st->tenants[idx].name;
	if (t != NULL)
		*t = st->tenants[idx].tier;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Sessions */

struct pol_session *
pol_session_add(struct pol_state *st, const char *id, const char *tenant,
    const char *user, enum pol_tier tier)
{
	struct pol_session *s = NULL;

	if (st == NULL || !pol_id_valid(id) || !tier_valid(tier) ||
	    pol_session_find(st, id) != NULL)
		return NULL;
	if (tenant != NULL && tenant[0] != '\0' && !pol_id_valid(tenant))
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		goto fail;
	memcpy(s->id, id, strlen(id) + 1);
	s->tenant = dup_str(tenant != NULL ? tenant : "");
	s->user = dup_str(user != NULL ? user : "");
	s->tier = tier;
	if (s->tenant == NULL || s->user == NULL ||
	    grow_one((void **)&st->sessions, st->n_sessions,
	    sizeof(*st->sessions)) < 0)
		goto fail;
	st->sessions[st->n_sessions++] = s;
	return s;
fail:
	session_free(s);
	return NULL;
}

struct pol_session *
pol_session_find(const struct pol_state *st, const char *id)
{
	size_t i;

	if (st == NULL || id == NULL)
		return NULL;
	for (i = 0; i < st->n_sessions; i++)
		if (strcmp(st->sessions[i]->id, id) == 0)
			return st->sessions[i];
	return NULL;
}

void
pol_session_remove(struct pol_state *st, struct pol_session *s)
{
	size_t i;

	if (st == NULL || s == NULL)
		return;
	for (i = 0; i < st->n_sessions; i++) {
		if (st->sessions[i] != s)
			continue;
		memmove(&st->sessions[i], &st->sessions[i + 1],
		    (st->n_sessions - i - 1) * sizeof(*st->sessions));
		st->n_sessions--;
		session_free(s);
		return;
	}
}

size_t
pol_session_count(const struct pol_state *st)
{
	return st != NULL ? st->n_sessions : 0;
}

struct pol_session *
pol_session_at(const struct pol_state *st, size_t idx)
{
	if (st == NULL || idx >= st->n_sessions)
		return NULL;
	return st->sessions[idx];
}

const char *
pol_session_id(const struct pol_session *s)
{
	return s != NULL ? s->id : "";
}

const char *
pol_session_tenant(const struct pol_session *s)
{
	return s != NULL ? s->tenant : "";
}

const char *
pol_session_user(const struct pol_session *s)
{
	return s != NULL ? s->user : "";
}

enum pol_tier
pol_session_tier(const struct pol_session *s)
{
	return s != NULL ? s->tier : POL_TIER_OFF;
}

void
pol_session_set_tier(struct pol_session *s, enum pol_tier t)
{
	if (s != NULL && tier_valid(t))
		s->tier = t;
}

/* ------------------------------------------------------------------ */
/* Grants */

/* Grants are stored in the canonical form pol_decide compares against,
 * so "Example.COM." and "example.com" are one grant. */
static int
grant_canon(const char *host, char *out)
{
	struct pol_target t;
	size_t len;

	if (host == NULL)
		return -1;
	len = strlen(host);
	if (host[0] != '[' && memchr(host, ':', len) != NULL) {
		/* IPv6 as pol_target.host holds it: without brackets. */
		if (pol_addr_parse(host, len, &t.addr) < 0)
			return -1;
		pol_addr_format(&t.addr, out, POL__HOSTBUF);
		return out[0] != '\0' ? 0 : -1;
	}
	if (pol_host_parse(host, len, 1, &t) != POL_R_NONE)
		return -1;
	memcpy(out, t.host, strlen(t.host) + 1);
	return 0;
}

static struct grant *
grant_find(const struct pol_session *s, const char *canon, uint16_t port)
{
	size_t i;

	for (i = 0; i < s->n_grants; i++)
		if (s->grants[i].port == port &&
		    strcmp(s->grants[i].host, canon) == 0)
			return &s->grants[i];
	return NULL;
}

int
pol_session_grant(struct pol_session *s, const char *host, uint16_t port)
{
	char canon[POL__HOSTBUF];
	char *h;

	if (s == NULL || port == 0 || grant_canon(host, canon) < 0)
		return -1;
	if (grant_find(s, canon, port) != NULL)
		return 0;
	h = dup_str(canon);
	if (h == NULL || grow_one((void **)&s->grants, s->n_grants,
	    sizeof(*s->grants)) < 0) {
		free(h);
		return -1;
	}
	s->grants[s->n_grants].host = h;
	s->grants[s->n_grants].port = port;
	s->n_grants++;
	return 0;
}

int
pol_session_revoke(struct pol_session *s, const char *host, uint16_t port)
{
	char canon[POL__HOSTBUF];
	struct grant *g;
	size_t i;

	if (s == NULL || grant_canon(host, canon) < 0)
		return -1;
	g = grant_find(s, canon, port);
	if (g == NULL)
		return -1;
	i = (size_t)(g - s->grants);
	free(g->host);
	memmove(g, g + 1, (s->n_grants - i - 1) * sizeof(*g));
	s->n_grants--;
	return 0;
}

int
pol_session_has_grant(const struct pol_session *s, const char *host,
    uint16_t port)
{
	if (s == NULL || host == NULL)
		return 0;
	/* Callers pass pol_target.host, already canonical. */
	return grant_find(s, host, port) != NULL;
}

size_t
pol_session_grant_count(const struct pol_session *s)
{
	return s != NULL ? s->n_grants : 0;
}

int
pol_session_grant_at(const struct pol_session *s, size_t idx,
    const char **host, uint16_t *port)
{
	if (s == NULL || idx >= s->n_grants)
		return -1;
	if (host != NULL)
		*host = s->grants[idx].host;
	if (port != NULL)
		*port = s->grants[idx].port;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Egress rules */

int
pol_session_set_egress(struct pol_session *s, const char *const *allow,
    size_t nallow, const char *const *deny, size_t ndeny, size_t *bad)
{
	struct pol_hostset *sa = NULL, *sd = NULL;
	char **pat = NULL;
	size_t i, n = nallow + ndeny, dummy;

	if (bad == NULL)
		bad = &dummy;
	*bad = SIZE_MAX;
	if (s == NULL || (nallow > 0 && allow == NULL) || (ndeny > 0 &&
	    deny == NULL))
		return -1;
	if ((sa = pol_hostset_new()) == NULL || (sd = pol_hostset_new()) ==
	    NULL || (n > 0 && (pat = calloc(n, sizeof(*pat))) == NULL))
		goto fail;
	for (i = 0; i < n; i++) {
		const char *p = i < nallow ? allow[i] : deny[i - nallow];

		if (p == NULL || pol_hostset_add(i < nallow ? sa : sd, p) != 0) {
			*bad = i;
			goto fail;
		}
		if ((pat[i] = dup_str(p)) == NULL)
			goto fail;
	}
	for (i = 0; i < s->n_eg; i++)
		free(s->eg_pat[i]);
	free(s->eg_pat);
	pol_hostset_free(s->eg_allow);
	pol_hostset_free(s->eg_deny);
	s->eg_pat = pat;
	s->n_eg = n;
	s->n_eg_allow = nallow;
	s->eg_allow = sa;
	s->eg_deny = sd;
	return 0;
fail:
	for (i = 0; pat != NULL && i < n; i++)
		free(pat[i]);
	free(pat);
	pol_hostset_free(sa);
	pol_hostset_free(sd);
	return -1;
}

size_t
pol_session_egress_count(const struct pol_session *s)
{
	return s != NULL ? s->n_eg : 0;
}

int
pol_session_egress_at(const struct pol_session *s, size_t idx,
    const char **pattern, int *deny)
{
	if (s == NULL || idx >= s->n_eg)
		return -1;
	if (pattern != NULL)
		*pattern = s->eg_pat[idx];
	if (deny != NULL)
		*deny = idx >= s->n_eg_allow;
	return 0;
}

int
pol_session_egress_denies(const struct pol_session *s, const char *host,
    uint16_t port)
{
	return s != NULL && s->eg_deny != NULL && host != NULL &&
	    pol_hostset_match(s->eg_deny, host, port, NULL, 0);
}

int
pol_session_egress_allows(const struct pol_session *s, const char *host,
    uint16_t port, const uint16_t *ports, size_t n)
{
	return s != NULL && s->eg_allow != NULL && host != NULL &&
	    pol_hostset_match(s->eg_allow, host, port, ports, n);
}
