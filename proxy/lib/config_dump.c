/*
 * config_dump.c: --print-config, the effective configuration as JSON.
 * The rows print themselves by kind in table order (dump_value); only
 * the sessions, whose transport keys appear when given, are printed by
 * hand.  The output is pinned by tests/scenario/golden/print_config_*.
 */
#include "sluice-config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proxy/lib/config-int.h"

/* jansson's setters steal the value and fail on NULL; count failures. */
static void
jset(json_t *o, const char *key, json_t *v, int *bad)
{
	if (v == NULL || json_object_set_new(o, key, v) != 0)
		*bad = 1;
}

static void
jpush(json_t *a, json_t *v, int *bad)
{
	if (v == NULL || json_array_append_new(a, v) != 0)
		*bad = 1;
}

static json_t *
jstrv(char *const *v, size_t n, int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < n; i++)
		jpush(a, json_string(v[i]), bad);
	return a;
}

static json_t *
jports(const uint16_t *p, size_t n, int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < n; i++)
		jpush(a, json_integer(p[i]), bad);
	return a;
}

static json_t *
jobj(int *bad)
{
	json_t *o = json_object();

	if (o == NULL)
		*bad = 1;
	return o;
}

static json_t *
jhostmap(const struct cfg_hostmap *m, size_t n, int *bad)
{
	json_t *hosts = jobj(bad);
	char buf[64];
	size_t i, j;

	for (i = 0; hosts != NULL && i < n; i++) {
		json_t *a = json_array();

		if (a == NULL) {
			*bad = 1;
			break;
		}
		for (j = 0; j < m[i].naddrs; j++)
			jpush(a, json_string(pol_addr_format(&m[i].addrs[j],
			    buf, sizeof(buf))), bad);
		jset(hosts, m[i].name, a, bad);
	}
	return hosts;
}

static json_t *
jids(const struct cfg_idlist *l, int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < l->n; i++)
		jpush(a, json_integer(l->ids[i]), bad);
	return a;
}

static json_t *
jopt(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}

static json_t *dump_keys(const struct cfg_key *keys, const void *base,
    int *bad);

/* Printed by hand: socket, source and vsock_cid only when given. */
static json_t *
dump_sessions(const struct cfg_session *ss, size_t n, int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < n; i++) {
		const struct cfg_session *s = &ss[i];
		json_t *o = jobj(bad);

		if (o == NULL)
			break;
		jset(o, "id", json_string(s->id), bad);
		jset(o, "tenant", json_string(s->tenant ? s->tenant : ""), bad);
		jset(o, "user", json_string(s->user ? s->user : ""), bad);
		jset(o, "tier", json_string(pol_tier_name(s->tier)), bad);
		if (s->socket != NULL)
			jset(o, "socket", json_string(s->socket), bad);
		if (s->source != NULL)
			jset(o, "source", json_string(s->source), bad);
		if (s->vsock_cid >= 0)
			jset(o, "vsock_cid", json_integer(s->vsock_cid), bad);
		jpush(a, o, bad);
	}
	return a;
}

/* Printed by hand: methods and paths only when given. */
static json_t *
dump_rules(const struct cfg_rule *rs, size_t n, int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < n; i++) {
		const struct cfg_rule *r = &rs[i];
		json_t *o = jobj(bad);

		if (o == NULL)
			break;
		jset(o, "name", json_string(r->name), bad);
		jset(o, "hosts", jstrv(r->hosts, r->nhosts, bad), bad);
		if (r->nmethods > 0)
			jset(o, "methods", jstrv(r->methods, r->nmethods, bad),
			    bad);
		if (r->npaths > 0)
			jset(o, "paths", jstrv(r->paths, r->npaths, bad), bad);
		jset(o, "action", json_string(pol_rule_action_name(
		    (enum pol_rule_action)r->action)), bad);
		jpush(a, o, bad);
	}
	return a;
}

/* {"name": {tenant's rows}} */
static json_t *
dump_tenants(const struct cfg_key *k, const struct cfg_tenant *t, size_t n,
    int *bad)
{
	json_t *o = jobj(bad);
	size_t i;

	for (i = 0; o != NULL && i < n; i++)
		jset(o, t[i].name, dump_keys(k->sub, &t[i], bad), bad);
	return o;
}

/* [{token's rows}]: the secret stays in its file */
static json_t *
dump_tokens(const struct cfg_key *k, const struct cfg_token *t, size_t n,
    int *bad)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < n; i++)
		jpush(a, dump_keys(k->sub, &t[i], bad), bad);
	return a;
}

/* A list row's count. */
static size_t
row_count(const struct cfg_key *k, const void *base)
{
	return *(const size_t *)(const void *)((const char *)base + k->noff);
}

/* One row's value; NULL (counted by jset) when it cannot be printed. */
static json_t *
dump_value(const struct cfg_key *k, const void *base, int *bad)
{
	const char *field = (const char *)base + k->off;
	char mode[8];
	int64_t id;

	switch (k->kind) {
	case K_INT:
		return json_integer(*(const int *)(const void *)field);
	case K_SIZE:
		return json_integer((json_int_t)*(const size_t *)(const void *)
		    field);
	case K_BOOL:
		return json_boolean(*(const int *)(const void *)field);
	case K_TIER:
		return json_string(pol_tier_name(*(const enum pol_tier *)
		    (const void *)field));
	case K_ROLE:
		return json_string(cfg_role_name(*(const enum cfg_role *)
		    (const void *)field));
	case K_MODE:
		snprintf(mode, sizeof(mode), "%04o",
		    *(const unsigned *)(const void *)field & 0777);
		return json_string(mode);
	case K_UID:
		id = *(const int64_t *)(const void *)field;
		return id < 0 ? json_null() : json_integer((json_int_t)id);
	case K_STR:
	case K_PATH:
		return json_string(*(char *const *)(const void *)field);
	case K_FILE:
	case K_OPT:
		return jopt(*(char *const *)(const void *)field);
	case K_IDS:
		return jids((const struct cfg_idlist *)(const void *)field,
		    bad);
	case K_STRV:
		return jstrv(*(char **const *)(const void *)field,
		    row_count(k, base), bad);
	case K_PORTS:
		return jports(*(uint16_t *const *)(const void *)field,
		    row_count(k, base), bad);
	case K_HOSTS:
		return jhostmap(*(struct cfg_hostmap *const *)
		    (const void *)field, row_count(k, base), bad);
	case K_OBJ:
		return dump_keys(k->sub, field, bad);
	case K_LONG:
		return json_integer((json_int_t)*(const long *)(const void *)
		    field);
	case K_U64:
		return json_integer((json_int_t)(*(const uint64_t *)
		    (const void *)field / (k->mult ? k->mult : 1)));
	case K_BUF:
		return json_string(field);
	case K_TENANTS:
		return dump_tenants(k, *(struct cfg_tenant *const *)
		    (const void *)field, row_count(k, base), bad);
	case K_SESSIONS:
		return dump_sessions(*(struct cfg_session *const *)
		    (const void *)field, row_count(k, base), bad);
	case K_REGISTRIES:
		/* The built-in list lives in policy/; null names it. */
		return ((const struct cfg *)base)->registries_default ?
		    json_null() : jstrv(*(char **const *)(const void *)field,
		    row_count(k, base), bad);
	case K_TOKENS:
		return dump_tokens(k, *(struct cfg_token *const *)
		    (const void *)field, row_count(k, base), bad);
	case K_RULES:
		return dump_rules(*(struct cfg_rule *const *)
		    (const void *)field, row_count(k, base), bad);
	case K_FN:
		break;
	}
	return NULL;
}

/* An object of the rows in table order, KF_LAST rows last. */
static json_t *
dump_keys(const struct cfg_key *keys, const void *base, int *bad)
{
	const struct cfg_key *k;
	json_t *o = jobj(bad);
	unsigned last;

	for (last = 0; o != NULL && last < 2; last++)
		for (k = keys; k->name != NULL; k++)
			if (((k->flags & KF_LAST) != 0) == last)
				jset(o, k->name, dump_value(k, base, bad), bad);
	return o;
}

char *
cfg_dump(const struct cfg *c)
{
	json_t *root;
	char *text = NULL, *out;
	size_t n;
	int bad = 0;

	if (c == NULL)
		return NULL;
	root = dump_keys(cfg_root_keys, c, &bad);
	if (root != NULL && !bad)
		text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (text == NULL)
		return NULL;
	/* A trailing newline makes --print-config output a proper file. */
	n = strlen(text);
	if ((out = realloc(text, n + 2)) == NULL) {
		free(text);
		return NULL;
	}
	out[n] = '\n';
	out[n + 1] = '\0';
	return out;
}
