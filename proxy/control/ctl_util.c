/*
 * ctl_util.c: helpers the files of proxy/control/ share (control-int.h).
 */
#include "sluice-config.h"

#include <stdarg.h>
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
