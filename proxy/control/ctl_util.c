/*
 * ctl_util.c: helpers the files of proxy/control/ share (control-int.h).
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>

#include "proxy/control/control-int.h"

int
ctl_fail(struct ctl_err *e, enum ctl_code code, const char *fmt, ...)
{
	va_list ap;

	if (e != NULL) {
		e->code = code;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return -1;
}

/*
 * A grant's host as the policy stores it: a name (brackets refused), or
 * an IP literal in canonical text, IPv6 with or without brackets.
 */
int
ctl_grant_host(const char *host, struct pol_target *t)
{
	size_t len = strlen(host);

	if (len > 2 && host[0] == '[' && host[len - 1] == ']') {
		host++;
		len -= 2;
	}
	if (memchr(host, ':', len) != NULL) {
		memset(t, 0, sizeof(*t));
		if (pol_addr_parse(host, len, &t->addr) != 0 ||
		    t->addr.family != AF_INET6)
			return -1;
		t->kind = POL_HOST_V6;
		pol_addr_format(&t->addr, t->host, sizeof(t->host));
		return 0;
	}
	return pol_host_parse(host, len, 0, t) == POL_R_NONE ? 0 : -1;
}

json_t *
ctl_grants_json(const struct pol_session *ps)
{
	json_t *a = json_array();
	const char *host;
	uint16_t port;
	size_t i;

	for (i = 0; pol_session_grant_at(ps, i, &host, &port) == 0; i++)
		json_array_append_new(a, json_pack("{s:s,s:i}", "host", host,
		    "port", (int)port));
	return a;
}

json_t *
ctl_egress_json(const struct pol_session *ps)
{
	json_t *al = json_array(), *dn = json_array();
	const char *p;
	size_t i;
	int deny;

	for (i = 0; pol_session_egress_at(ps, i, &p, &deny) == 0; i++)
		json_array_append_new(deny ? dn : al, json_string(p));
	return json_pack("{s:o,s:o}", "allow", al, "deny", dn);
}

int
ctl_egress_set_json(struct pol_session *ps, json_t *o, char *why,
    size_t wlen)
{
	const char *av[2][CTL_EGRESS_MAX];
	size_t n[2] = { 0, 0 }, i, k, bad;
	json_t *a, *v;

	if (o != NULL && !json_is_object(o)) {
		snprintf(why, wlen, "egress: expected an object");
		return -1;
	}
	for (k = 0; k < 2; k++) {
		a = o != NULL ? json_object_get(o, k ? "deny" : "allow") : NULL;
		if (a == NULL || json_is_null(a))
			continue;
		if (!json_is_array(a) || json_array_size(a) > CTL_EGRESS_MAX) {
			snprintf(why, wlen, "egress.%s: an array of at most %d "
			    "names", k ? "deny" : "allow", CTL_EGRESS_MAX);
			return -1;
		}
		json_array_foreach(a, i, v) {
			if (!json_is_string(v)) {
				snprintf(why, wlen, "egress.%s[%zu]: expected a "
				    "string", k ? "deny" : "allow", i);
				return -1;
			}
			av[k][n[k]++] = json_string_value(v);
		}
	}
	if (pol_session_set_egress(ps, av[0], n[0], av[1], n[1], &bad) != 0) {
		if (bad == SIZE_MAX)
			snprintf(why, wlen, "out of memory");
		else
			snprintf(why, wlen, "egress.%s[%zu]: \"%.80s\" is not a "
			    "host name or \"*.\" and a domain", bad < n[0] ?
			    "allow" : "deny", bad < n[0] ? bad : bad - n[0],
			    bad < n[0] ? av[0][bad] : av[1][bad - n[0]]);
		return -1;
	}
	return 0;
}
