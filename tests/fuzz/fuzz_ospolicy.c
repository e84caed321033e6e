/*
 * fuzz_ospolicy.c: the OpenSandbox egress policy bodies of sluice-execd
 * (sandbox-glue/executor/execd/exec_os_eg.c): a NetworkPolicy at create
 * or POST/PUT /policy, the rules of PATCH /policy and the targets of
 * DELETE /policy, on arbitrary bytes.  The input is one JSON document
 * per line: the policy, then the PATCH body, then the DELETE body.
 * Checked:
 *  - a refusal says why (400 with a message), an acceptance is a
 *    policy {defaultAction: allow|deny, egress: [{action, target}]};
 *  - a normalised policy parses again to itself;
 *  - a merge puts the incoming rules first, never holds a target twice
 *    from the incoming, and merging the same rules again changes
 *    nothing;
 *  - after a drop no rule of a dropped target is left;
 *  - sluiced's body names each target at most once, in allow or deny.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-glue/executor/execd/exec_os-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *
line(const uint8_t **p, const uint8_t *end)
{
	const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
	const uint8_t *e = nl != NULL ? nl : end;
	json_t *j = json_loadb((const char *)*p, (size_t)(e - *p),
	    JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);

	*p = nl != NULL ? nl + 1 : end;
	return j;
}

static void
refused(int rc, struct xd_perr *e, json_t *out)
{
	if (rc != 0 && (e->status != 400 || e->msg[0] == '\0' || out != NULL))
		abort();
	xd_perr_clear(e);
}

static void
shape(json_t *p)
{
	const char *da = json_string_value(json_object_get(p,
	    "defaultAction"));
	json_t *r;
	size_t i;

	if (da == NULL || (strcmp(da, "allow") != 0 && strcmp(da, "deny") !=
	    0) || !json_is_array(json_object_get(p, "egress")) ||
	    json_object_size(p) != 2)
		abort();
	json_array_foreach(json_object_get(p, "egress"), i, r) {
		const char *a = json_string_value(json_object_get(r, "action"));

		if (a == NULL || (strcmp(a, "allow") != 0 && strcmp(a,
		    "deny") != 0) || !json_is_string(json_object_get(r,
		    "target")) || json_object_size(r) != 2)
			abort();
	}
	if (strcmp(xd_os_policy_tier(p), strcmp(da, "allow") == 0 ? "public" :
	    "off") != 0)
		abort();
}

static void
broker(json_t *p)
{
	char *s = xd_os_policy_broker(p);
	json_t *b = s != NULL ? json_loads(s, 0, NULL) : NULL, *seen, *t;
	size_t i, k;

	if (b == NULL)
		abort();
	seen = json_object();
	for (k = 0; k < 2; k++)
		json_array_foreach(json_object_get(b, k ? "deny" : "allow"), i,
		    t) {
			if (json_object_get(seen, json_string_value(t)) != NULL)
				abort();
			json_object_set_new(seen, json_string_value(t),
			    json_true());
		}
	json_decref(seen);
	json_decref(b);
	free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;
	json_t *np = line(&p, end), *in = line(&p, end), *tg = line(&p, end);
	json_t *pol = NULL, *again = NULL, *m = NULL, *m2 = NULL, *d = NULL;
	struct xd_perr e;
	size_t i, j;
	int rc;

	memset(&e, 0, sizeof(e));
	rc = xd_os_policy_parse(np, &pol, &e);
	refused(rc, &e, pol);
	if (rc != 0)
		goto out;
	shape(pol);
	broker(pol);
	if (xd_os_policy_parse(pol, &again, &e) != 0 || !json_equal(pol,
	    again))
		abort();
	rc = xd_os_policy_merge(pol, in, &m, &e);
	refused(rc, &e, m);
	if (rc == 0) {
		json_t *r, *q;

		shape(m);
		broker(m);
		/* the incoming's first rule of each target leads, in order */
		j = 0;
		json_array_foreach(in, i, r) {
			size_t k;
			int dup = 0;

			for (k = 0; k < i; k++)
				if (json_equal(json_object_get(json_array_get(in,
				    k), "target"), json_object_get(r,
				    "target")))
					dup = 1;
			if (dup)
				continue;
			q = json_array_get(json_object_get(m, "egress"), j++);
			if (!json_equal(json_object_get(q, "target"),
			    json_object_get(r, "target")) || !json_equal(
			    json_object_get(q, "action"), json_object_get(r,
			    "action")))
				abort();
		}
		if (xd_os_policy_merge(m, in, &m2, &e) != 0 || !json_equal(m,
		    m2))
			abort();
	}
	rc = xd_os_policy_drop(pol, tg, &d, &e);
	refused(rc, &e, d);
	if (rc == 0) {
		json_t *r, *t;

		shape(d);
		json_array_foreach(json_object_get(d, "egress"), i, r)
			json_array_foreach(tg, j, t)
				if (json_equal(t, json_object_get(r, "target")))
					abort();
	}
out:
	json_decref(np);
	json_decref(in);
	json_decref(tg);
	json_decref(pol);
	json_decref(again);
	json_decref(m);
	json_decref(m2);
	json_decref(d);
	return 0;
}
