/*
 * hostset.c: a set of host patterns ("name", "*.suffix", each with an
 * optional ":port") answering "does (host, port) match?".
 *
 * One open-addressing hash table keyed by (name, wildcard).  A lookup
 * probes the exact name, then each suffix after a label boundary as a
 * wildcard key, so it costs O(labels) probes whatever the set's size:
 * a 100,000-entry registry mirror list is as fast as a ten-entry one.
 */
#include "sluice-config.h"

#include <stdlib.h>
#include <string.h>

#include "policy/policy-int.h"

struct hs_entry {
	char *name;          /* canonical name; NULL marks an empty slot */
	size_t len;
	uint64_t hash;
	int wild;            /* "*.name": strict subdomains of name */
	int any_port;        /* a portless pattern was added */
	uint16_t *ports;     /* explicit ports, unsorted, no duplicates */
	size_t n_ports;
};

struct pol_hostset {
	struct hs_entry *slots;
	size_t cap;          /* power of two */
	size_t used;         /* occupied slots */
	size_t count;        /* distinct (pattern, port) pairs */
};

#define HS_MIN_CAP 16

static uint64_t
hs_hash(const char *s, size_t len, int wild)
{
	/* FNV-1a; the patterns come from the administrator, not from
	 * sandboxes, so flooding resistance is not needed. */
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	h ^= (uint64_t)(wild ? 0x2a : 0x17);
	h *= 0x100000001b3ull;
	return h;
}

struct pol_hostset *
pol_hostset_new(void)
{
	struct pol_hostset *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->slots = calloc(HS_MIN_CAP, sizeof(*s->slots));
	if (s->slots == NULL) {
		free(s);
		return NULL;
	}
	s->cap = HS_MIN_CAP;
	return s;
}

void
pol_hostset_free(struct pol_hostset *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->cap; i++) {
		free(s->slots[i].name);
		free(s->slots[i].ports);
	}
	free(s->slots);
	free(s);
}

size_t
pol_hostset_count(const struct pol_hostset *s)
{
	return s != NULL ? s->count : 0;
}

static struct hs_entry *
hs_find(const struct pol_hostset *s, const char *name, size_t len, int wild,
    uint64_t h)
{
	size_t mask = s->cap - 1, i = (size_t)h & mask;

	/* The load factor stays below 3/4, so an empty slot ends the probe. */
	for (;;) {
		struct hs_entry *e = &s->slots[i];

		if (e->name == NULL)
			return e;
		if (e->hash == h && e->wild == wild && e->len == len &&
		    memcmp(e->name, name, len) == 0)
			return e;
		i = (i + 1) & mask;
	}
}

static int
hs_grow(struct pol_hostset *s)
{
	struct hs_entry *old = s->slots;
	size_t old_cap = s->cap, i;

	if (s->cap > ((size_t)-1) / 2 / sizeof(*s->slots))
		return -1;
	s->slots = calloc(s->cap * 2, sizeof(*s->slots));
	if (s->slots == NULL) {
		s->slots = old;
		return -1;
	}
	s->cap *= 2;
	for (i = 0; i < old_cap; i++) {
		if (old[i].name != NULL)
			*hs_find(s, old[i].name, old[i].len, old[i].wild,
			    old[i].hash) = old[i];
	}
	free(old);
	return 0;
}

static int
hs_has_port(const struct hs_entry *e, uint16_t port)
{
	size_t i;

	for (i = 0; i < e->n_ports; i++)
		if (e->ports[i] == port)
			return 1;
	return 0;
}

static int
hs_add_port(struct hs_entry *e, uint16_t port)
{
	uint16_t *p;

	p = realloc(e->ports, (e->n_ports + 1) * sizeof(*p));
	if (p == NULL)
		return -1;
	e->ports = p;
	e->ports[e->n_ports++] = port;
	return 0;
}

int
pol_hostset_add(struct pol_hostset *s, const char *pattern)
{
	const char *host, *colon;
	size_t len, host_len;
	struct pol_target t;
	struct hs_entry *e;
	uint16_t port = 0;
	int wild = 0;
	uint64_t h;

	if (s == NULL || pattern == NULL)
		return -1;
	host = pattern;
	len = strlen(pattern);
	if (len >= 2 && host[0] == '*' && host[1] == '.') {
		wild = 1;
		host += 2;
		len -= 2;
	}
	colon = memchr(host, ':', len);
	host_len = colon != NULL ? (size_t)(colon - host) : len;
	if (colon != NULL &&
	    pol__port_parse(colon + 1, len - host_len - 1, &port) < 0)
		return -1;
	/* Names only: address literals belong in the CIDR lists, where
	 * every spelling of an address is compared as an address. */
	if (pol_host_parse(host, host_len, 0, &t) != POL_R_NONE ||
	    t.kind != POL_HOST_NAME)
		return -1;
	len = strlen(t.host);

	if ((s->used + 1) * 4 > s->cap * 3 && hs_grow(s) < 0)
		return -1;
	h = hs_hash(t.host, len, wild);
	e = hs_find(s, t.host, len, wild, h);
	if (e->name == NULL) {
		e->name = malloc(len + 1);
		if (e->name == NULL)
			return -1;
		memcpy(e->name, t.host, len + 1);
		e->len = len;
		e->hash = h;
		e->wild = wild;
		e->any_port = 0;
		e->ports = NULL;
		e->n_ports = 0;
		s->used++;
	}
	if (port == 0) {
		if (!e->any_port)
			s->count++;
		e->any_port = 1;
	} else if (!hs_has_port(e, port)) {
		if (hs_add_port(e, port) < 0)
			return -1;
		s->count++;
	}
	return 0;
}

static int
port_listed(uint16_t port, const uint16_t *ports, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ports[i] == port)
			return 1;
	return 0;
}

static int
hs_entry_admits(const struct pol_hostset *s, const char *name, size_t len,
    int wild, uint16_t port, const uint16_t *defaults, size_t n_default)
{
	const struct hs_entry *e;

	e = hs_find(s, name, len, wild, hs_hash(name, len, wild));
	if (e->name == NULL)
		return 0;
	if (e->any_port && (n_default == 0 ||
	    port_listed(port, defaults, n_default)))
		return 1;
	return hs_has_port(e, port);
}

int
pol_hostset_match(const struct pol_hostset *s, const char *host,
    uint16_t port, const uint16_t *default_ports, size_t n_default)
{
	char name[POL__HOSTBUF];
	size_t len, i;

	if (s == NULL || host == NULL || s->used == 0)
		return 0;
	/* Fold the case and one trailing dot here too, so a caller holding
	 * a raw name cannot miss an entry (or a deny) by spelling. */
	len = strnlen(host, POL__HOSTBUF);
	if (len > 0 && host[len - 1] == '.')
		len--;
	if (len == 0 || len > POL_HOST_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		char ch = host[i];

		name[i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
	}
	name[len] = '\0';

	if (hs_entry_admits(s, name, len, 0, port, default_ports, n_default))
		return 1;
	for (i = 0; i < len; i++) {
		if (name[i] != '.')
			continue;
		if (hs_entry_admits(s, name + i + 1, len - i - 1, 1, port,
		    default_ports, n_default))
			return 1;
	}
	return 0;
}

int
pol_hostset_pattern_valid(const char *pattern)
{
	struct pol_hostset *hs = pol_hostset_new();
	int ok = hs != NULL && pol_hostset_add(hs, pattern) == 0;

	pol_hostset_free(hs);
	return ok;
}
