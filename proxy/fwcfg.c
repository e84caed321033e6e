/*
 * fwcfg.c: fw_config from sluiced's configuration (fwcfg.h).
 */
#include "sluice-config.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/lib/config.h"
#include "proxy/fwcfg.h"
#include "policy/policy.h"

/* nameserver lines of resolv.conf: the servers c-ares will use when
 * dns.servers is empty */
static int
read_resolv(const char *path, char ***out, size_t *n)
{
	char line[512];
	FILE *f = fopen(path, "r");
	char **v = NULL;
	size_t count = 0;

	*out = NULL;
	*n = 0;
	if (f == NULL)
		return 0;       /* no file: c-ares falls back to loopback */
	while (fgets(line, sizeof(line), f) != NULL && count < 16) {
		char *p = line, *end, **nv;

		if (strncmp(p, "nameserver", 10) != 0 ||
		    (p[10] != ' ' && p[10] != '\t'))
			continue;
		p += 11;
		p += strspn(p, " \t");
		end = p + strcspn(p, " \t\r\n%");
		*end = '\0';
		if (*p == '\0')
			continue;
		nv = realloc(v, (count + 1) * sizeof(*v));
		if (nv == NULL || (nv[count] = strdup(p)) == NULL) {
			v = nv ? nv : v;
			goto oom;
		}
		v = nv;
		count++;
	}
	fclose(f);
	*out = v;
	*n = count;
	return 0;
oom:
	fclose(f);
	while (count > 0)
		free(v[--count]);
	free(v);
	return -1;
}

/* The addresses sluiced listens on for the sandboxes, from "addr:port"
 * and "[v6]:port": the destinations the input guard admits the broker
 * ports on.  A wildcard is the whole family; "[::]" is dual stack (the
 * listeners leave IPV6_V6ONLY off), so IPv4 too. */
static int
listen_addrs(const struct cfg *c, char ***out, size_t *n)
{
	char *const *lists[2] = { c->listen_tcp, c->listen_transparent };
	size_t lens[2] = { c->nlisten_tcp, c->nlisten_transparent };
	static const uint8_t zero[16];
	size_t l, i, count = 0;
	char **v;

	*out = NULL;
	*n = 0;
	v = calloc(2 * (lens[0] + lens[1]) + 1, sizeof(*v));
	if (v == NULL)
		return -1;
	for (l = 0; l < 2; l++)
		for (i = 0; i < lens[l]; i++) {
			const char *s = lists[l][i];
			struct pol_target t;
			int any;

			if (pol_target_parse_authority(s, strlen(s), &t) !=
			    POL_R_NONE || (t.kind != POL_HOST_V4 &&
			    t.kind != POL_HOST_V6))
				continue;       /* config.c refused it */
			any = memcmp(t.addr.a, zero,
			    t.kind == POL_HOST_V4 ? 4 : 16) == 0;
			if (!any)
				v[count] = strdup(t.host);
			else
				v[count] = strdup(t.kind == POL_HOST_V4 ?
				    "0.0.0.0/0" : "::/0");
			if (v[count++] == NULL)
				goto oom;
			if (any && t.kind == POL_HOST_V6 &&
			    (v[count++] = strdup("0.0.0.0/0")) == NULL)
				goto oom;
		}
	*out = v;
	*n = count;
	return 0;
oom:
	while (count > 0)
		free(v[--count]);
	free(v);
	return -1;
}

/* The self guard follows the proxy process: the uid of "user", which it
 * drops to when started as root.  Never root's: a guard on uid 0 would
 * hold every root process of the host to sluiced's policy. */
static int64_t
fw_default_uid(const char *user)
{
	struct passwd *pw;

	if (user == NULL || strcmp(user, "root") == 0)
		return -1;
	pw = getpwnam(user);
	if (pw == NULL || pw->pw_uid == 0)
		return -1;
	return (int64_t)pw->pw_uid;
}

int
fw_config_from_cfg(struct fw_config *fc, const struct cfg *c,
    const char *resolv_conf)
{
	char **rv;
	size_t n;

	memset(fc, 0, sizeof(*fc));
	fc->table = c->firewall.table;
	fc->uid = c->firewall.uid;
	if (fc->uid < 0)
		fc->uid = fw_default_uid(c->user);
	fc->allow_cidrs = (const char *const *)c->allow_cidrs;
	fc->nallow_cidrs = c->nallow_cidrs;
	fc->deny_cidrs = (const char *const *)c->deny_cidrs;
	fc->ndeny_cidrs = c->ndeny_cidrs;
	fc->sandbox_subnets = (const char *const *)c->firewall.sandbox_subnets;
	fc->nsandbox_subnets = c->firewall.nsandbox_subnets;
	fc->sandbox_interfaces =
	    (const char *const *)c->firewall.sandbox_interfaces;
	fc->nsandbox_interfaces = c->firewall.nsandbox_interfaces;
	fc->broker_ports = c->firewall.broker_ports;
	fc->nbroker_ports = c->firewall.nbroker_ports;
	fc->transparent_port = c->transparent_port;
	if (listen_addrs(c, &fc->owned_broker_addrs, &fc->nbroker_addrs) != 0)
		return -1;
	fc->broker_addrs = (const char *const *)fc->owned_broker_addrs;
	if (c->ndns_servers > 0) {
		fc->resolvers = (const char *const *)c->dns_servers;
		fc->nresolvers = c->ndns_servers;
		return 0;
	}
	if (resolv_conf == NULL)
		return 0;
	if (read_resolv(resolv_conf, &rv, &n) != 0) {
		fw_config_clear(fc);
		return -1;
	}
	fc->resolvers = (const char *const *)rv;
	fc->nresolvers = n;
	fc->owned_resolvers = rv;
	return 0;
}

void
fw_config_clear(struct fw_config *fc)
{
	size_t i;

	if (fc->owned_broker_addrs != NULL) {
		for (i = 0; i < fc->nbroker_addrs; i++)
			free(fc->owned_broker_addrs[i]);
		free(fc->owned_broker_addrs);
	}
	if (fc->owned_resolvers != NULL) {
		for (i = 0; i < fc->nresolvers; i++)
			free(fc->owned_resolvers[i]);
		free(fc->owned_resolvers);
	}
	memset(fc, 0, sizeof(*fc));
}
