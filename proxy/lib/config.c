/*
 * config.c: load sluiced.json, its defaults, its release, and the policy
 * built from it.
 *
 * jansson parses; the rows of config_keys.c validate, through the engine
 * of config_engine.c; errors find their line and column with
 * config_pos.c.  The files call each other in one direction only:
 * config.c and config_dump.c -> config_keys.c -> config_engine.c ->
 * config_pos.c.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "proxy/lib/config-int.h"
#include "proxy/lib/util.h"
#include "proxy/lib/jsonstrict.h"

#define CFG_FILE_MAX (16u * 1024 * 1024)

/* ------------------------------------------------------------------ */
/* Public API. */

/* The rows' defaults; the built-in registry list is policy/'s. */
static struct cfg *
cfg_defaults(void)
{
	struct cfg *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	if (cfg_keys_default(cfg_root_keys, c) != 0) {
		cfg_free(c);
		return NULL;
	}
	c->registries_default = 1;
	return c;
}


void
cfg_free(struct cfg *c)
{
	size_t i;

	if (c == NULL)
		return;
	free(c->source_path);
	free(c->runtime_dir);
	free(c->user);
	for (i = 0; i < c->ntenants; i++)
		free(c->tenants[i].name);
	free(c->tenants);
	util_strv_free(c->listen_tcp, c->nlisten_tcp);
	util_strv_free(c->listen_transparent, c->nlisten_transparent);
	free(c->socket_group);
	free(c->log_mac_key_file);
	util_strv_free(c->socket_prefixes, c->nsocket_prefixes);
	for (i = 0; i < c->nsessions; i++) {
		free(c->sessions[i].id);
		free(c->sessions[i].tenant);
		free(c->sessions[i].user);
		free(c->sessions[i].socket);
		free(c->sessions[i].source);
	}
	free(c->sessions);
	util_strv_free(c->registries, c->nregistries);
	free(c->ports_registries);
	free(c->ports_public);
	free(c->sni_ports);
	free(c->plain_ports);
	free(c->firewall.table);
	util_strv_free(c->firewall.sandbox_subnets, c->firewall.nsandbox_subnets);
	util_strv_free(c->firewall.sandbox_interfaces,
	    c->firewall.nsandbox_interfaces);
	free(c->firewall.broker_ports);
	util_strv_free(c->inspect.hosts, c->inspect.nhosts);
	free(c->inspect.ca_cert);
	free(c->inspect.ca_key);
	free(c->inspect.upstream_ca_file);
	for (i = 0; i < c->nrules; i++) {
		free(c->rules[i].name);
		util_strv_free(c->rules[i].hosts, c->rules[i].nhosts);
		util_strv_free(c->rules[i].methods, c->rules[i].nmethods);
		util_strv_free(c->rules[i].paths, c->rules[i].npaths);
	}
	free(c->rules);
	free(c->credentials.file);
	util_strv_free(c->allow_cidrs, c->nallow_cidrs);
	util_strv_free(c->deny_cidrs, c->ndeny_cidrs);
	util_strv_free(c->deny_hosts, c->ndeny_hosts);
	util_strv_free(c->dns_servers, c->ndns_servers);
	for (i = 0; i < c->ndns_hosts; i++) {
		free(c->dns_hosts[i].name);
		free(c->dns_hosts[i].addrs);
	}
	free(c->dns_hosts);
	free(c->log_path);
	free(c->state_file);
	free(c->control.socket);
	free(c->control.socket_group);
	for (i = 0; i <= CFG_ROLE_ADMIN; i++) {
		free(c->control.uids[i].ids);
		free(c->control.gids[i].ids);
	}
	free(c->control.tcp);
	free(c->control.tls_cert);
	free(c->control.tls_key);
	free(c->control.client_ca);
	for (i = 0; i < c->control.ntokens; i++) {
		free(c->control.tokens[i].name);
		free(c->control.tokens[i].token_file);
		free(c->control.tokens[i].tenant);
	}
	free(c->control.tokens);
	free(c->webhook.url);
	free(c->webhook.host);
	free(c->webhook.path);
	free(c->webhook.secret_file);
	free(c->webhook.ca_file);
	for (i = 0; i < c->webhook.nhosts; i++) {
		free(c->webhook.hosts[i].name);
		free(c->webhook.hosts[i].addrs);
	}
	free(c->webhook.hosts);
	free(c);
}

struct cfg *
cfg_load_buffer(const char *buf, size_t len, const char *name, char *err,
    size_t errlen)
{
	struct cfg_ctx x;
	json_t *root = NULL;
	struct cfg *c;

	cfg_ctx_init(&x, buf, len, name, err, errlen);
	if ((c = x.c = cfg_defaults()) == NULL ||
	    (x.trial = pol_config_new()) == NULL) {
		errf(err, errlen, "%s: out of memory", x.name);
		goto fail;
	}
	if ((root = cfg_parse_text(&x)) == NULL)
		goto fail;
	if (cfg_walk_object(&x, root, cfg_root_keys, c) != 0 ||
	    cfg_cross_check(&x, root) != 0)
		goto fail;
	json_decref(root);
	pol_config_free(x.trial);
	return c;
fail:
	json_decref(root);
	pol_config_free(x.trial);
	cfg_free(c);
	return NULL;
}

static char *
read_file(const char *path, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	size_t have = 0;
	ssize_t r;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		errf(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	if ((uintmax_t)st.st_size > CFG_FILE_MAX) {
		errf(err, errlen, "%s: larger than %u bytes", path,
		    CFG_FILE_MAX);
		goto fail;
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		errf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	/* The file may shrink or grow while read; take what is there up
	 * to the size seen. */
	while (have < (size_t)st.st_size) {
		r = read(fd, buf + have, (size_t)st.st_size - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			errf(err, errlen, "%s: %s", path, strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		have += (size_t)r;
	}
	close(fd);
	buf[have] = '\0';
	*len = have;
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

struct cfg *
cfg_load(const char *path, char *err, size_t errlen)
{
	struct cfg *c;
	char *text;
	size_t len;

	if (path == NULL) {
		if ((c = cfg_defaults()) == NULL)
			errf(err, errlen, "out of memory");
		return c;
	}
	if ((text = read_file(path, &len, err, errlen)) == NULL)
		return NULL;
	c = cfg_load_buffer(text, len, path, err, errlen);
	free(text);
	if (c != NULL && (c->source_path = strdup(path)) == NULL) {
		errf(err, errlen, "%s: out of memory", path);
		cfg_free(c);
		return NULL;
	}
	return c;
}

/* ------------------------------------------------------------------ */

struct pol_config *
cfg_build_policy(const struct cfg *c, char *err, size_t errlen)
{
	struct pol_config *p = pol_config_new();
	const char *what = "out of memory";
	size_t i;

	if (p == NULL)
		goto fail;
	if (c->registries_default) {
		if (pol_config_add_default_registries(p) != 0) {
			what = "built-in registries rejected";
			goto fail;
		}
	}
	for (i = 0; !c->registries_default && i < c->nregistries; i++) {
		if (pol_config_add_registry(p, c->registries[i]) != 0) {
			what = "registries: entry rejected";
			goto fail;
		}
	}
	if (pol_config_set_ports(p, POL_TIER_REGISTRIES, c->ports_registries,
	    c->nports_registries) != 0 ||
	    pol_config_set_ports(p, POL_TIER_PUBLIC, c->ports_public,
	    c->nports_public) != 0) {
		what = "ports rejected";
		goto fail;
	}
	for (i = 0; i < c->nallow_cidrs; i++)
		if (pol_config_add_cidr(p, c->allow_cidrs[i], 1) != 0) {
			what = "allow_cidrs: entry rejected";
			goto fail;
		}
	for (i = 0; i < c->ndeny_cidrs; i++)
		if (pol_config_add_cidr(p, c->deny_cidrs[i], 0) != 0) {
			what = "deny_cidrs: entry rejected";
			goto fail;
		}
	for (i = 0; i < c->ndeny_hosts; i++)
		if (pol_config_add_deny_host(p, c->deny_hosts[i]) != 0) {
			what = "deny_hosts: entry rejected";
			goto fail;
		}
	for (i = 0; i < c->nrules; i++) {
		const struct cfg_rule *r = &c->rules[i];
		struct pol_rule_spec sp = {
			r->name, NULL,
			(const char *const *)r->hosts, r->nhosts,
			(const char *const *)r->methods, r->nmethods,
			(const char *const *)r->paths, r->npaths,
			(enum pol_rule_action)r->action,
		};

		if (pol_config_add_rule(p, &sp, &what) != 0)
			goto fail;
	}
	return p;
fail:
	errf(err, errlen, "%s: %s", c->source_path != NULL ?
	    c->source_path : "configuration", what);
	pol_config_free(p);
	return NULL;
}

int
cfg_port_in(const uint16_t *ports, size_t n, uint16_t port)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ports[i] == port)
			return 1;
	return 0;
}
