/*
 * bench_policy.c: nanoseconds per pol_decide with a 100,000-entry host
 * list.
 *
 * The registry list is the one a decision consults for a session at tier
 * "registries" under a public ceiling, so each decision walks the port
 * check, deny_hosts, the registry list and the grants.  Half the list is
 * exact names, half "*.suffix"; the targets are one third exact hits, one
 * third wildcard hits (a subdomain) and one third misses (which end in a
 * prompt).  The verdicts are counted and checked so the work cannot be
 * optimised away and a broken list shows as a failure, not a fast time.
 *
 * Output: one JSON line {"ns": per decision, "parse_ns": per CONNECT
 * authority parse plus decision, ...}.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/policy.h"

#define BP_HOSTS 100000
#define BP_TARGETS 3000
#define BP_ROUNDS 300          /* 900,000 decisions per measurement */
#define BP_PORT 443

struct bp_case {
	struct pol_target t;
	char authority[POL_HOST_MAX + 8];
	enum pol_verdict want;
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Deterministic names: pkg-<i>.mirror-<i % 97>.example-registry.org */
static void
host_name(char *buf, size_t len, unsigned i)
{
	snprintf(buf, len, "pkg-%u.mirror-%u.example-registry.org", i,
	    i % 97);
}

static int
fill_config(struct pol_config *c)
{
	static const uint16_t ports[] = { 80, 443 };
	char name[128], pat[160];
	unsigned i;

	for (i = 0; i < BP_HOSTS; i++) {
		host_name(name, sizeof(name), i);
		if (i % 2 == 0)
			snprintf(pat, sizeof(pat), "%s", name);
		else
			snprintf(pat, sizeof(pat), "*.%s", name);
		if (pol_config_add_registry(c, pat) != 0)
			return -1;
	}
	for (i = 0; i < 100; i++) {
		snprintf(pat, sizeof(pat), "blocked-%u.example.net", i);
		if (pol_config_add_deny_host(c, pat) != 0)
			return -1;
	}
	if (pol_config_set_ports(c, POL_TIER_REGISTRIES, ports, 2) != 0 ||
	    pol_config_set_ports(c, POL_TIER_PUBLIC, ports, 2) != 0)
		return -1;
	return 0;
}

static int
make_cases(struct bp_case *cases, size_t n)
{
	char name[160];
	size_t i;

	for (i = 0; i < n; i++) {
		/* spread over the list: a multiplier coprime to its size */
		unsigned h = (unsigned)((i * 7919u) % BP_HOSTS);

		switch (i % 3) {
		case 0:      /* exact entry: h made even */
			h &= ~1u;
			host_name(name, sizeof(name), h);
			cases[i].want = POL_ALLOW;
			break;
		case 1:      /* subdomain of a wildcard entry: h made odd */
			h |= 1u;
			if (h >= BP_HOSTS)
				h -= 2;
			snprintf(name, sizeof(name), "cdn.");
			host_name(name + 4, sizeof(name) - 4, h);
			cases[i].want = POL_ALLOW;
			break;
		default:     /* not on the list */
			snprintf(name, sizeof(name),
			    "www.site-%zu.example.com", i);
			cases[i].want = POL_PROMPT;
			break;
		}
		snprintf(cases[i].authority, sizeof(cases[i].authority),
		    "%s:%d", name, BP_PORT);
		if (pol_target_parse_authority(cases[i].authority,
		    strlen(cases[i].authority), &cases[i].t) != POL_R_NONE)
			return -1;
	}
	return 0;
}

int
main(void)
{
	struct pol_config *c = pol_config_new();
	struct pol_state *st = pol_state_new();
	struct pol_session *s = NULL;
	struct bp_case *cases = calloc(BP_TARGETS, sizeof(*cases));
	struct pol_decision d;
	size_t r, i, bad = 0, allowed = 0;
	double t0, decide_s, parse_s, build_s;
	int rc = 1;

	if (c == NULL || st == NULL || cases == NULL)
		goto out;
	t0 = now_s();
	if (fill_config(c) != 0) {
		fprintf(stderr, "bench_policy: cannot build the host list\n");
		goto out;
	}
	build_s = now_s() - t0;
	pol_state_set_ceiling(st, POL_TIER_PUBLIC);
	s = pol_session_add(st, "bench", NULL, NULL, POL_TIER_REGISTRIES);
	if (s == NULL || make_cases(cases, BP_TARGETS) != 0) {
		fprintf(stderr, "bench_policy: cannot set up the targets\n");
		goto out;
	}

	t0 = now_s();
	for (r = 0; r < BP_ROUNDS; r++) {
		for (i = 0; i < BP_TARGETS; i++) {
			pol_decide(c, st, s, &cases[i].t, &d);
			bad += d.verdict != cases[i].want;
			allowed += d.verdict == POL_ALLOW;
		}
	}
	decide_s = now_s() - t0;

	/* what the proxy does per CONNECT: parse the authority, decide */
	t0 = now_s();
	for (r = 0; r < BP_ROUNDS / 3; r++) {
		for (i = 0; i < BP_TARGETS; i++) {
			struct pol_target t;

			if (pol_target_parse_authority(cases[i].authority,
			    strlen(cases[i].authority), &t) != POL_R_NONE) {
				bad++;
				continue;
			}
			pol_decide(c, st, s, &t, &d);
			bad += d.verdict != cases[i].want;
		}
	}
	parse_s = now_s() - t0;

	if (bad != 0) {
		fprintf(stderr, "bench_policy: %zu decisions were not the "
		    "expected verdict\n", bad);
		goto out;
	}
	printf("{\"hosts\":%zu,\"decisions\":%zu,\"allowed\":%zu,"
	    "\"ns\":%.1f,\"parse_ns\":%.1f,\"build_ms\":%.1f}\n",
	    pol_config_registry_count(c), (size_t)BP_ROUNDS * BP_TARGETS,
	    allowed, decide_s * 1e9 / ((double)BP_ROUNDS * BP_TARGETS),
	    parse_s * 1e9 / ((double)(BP_ROUNDS / 3) * BP_TARGETS),
	    build_s * 1e3);
	rc = 0;
out:
	free(cases);
	pol_state_free(st);
	pol_config_free(c);
	return rc;
}
