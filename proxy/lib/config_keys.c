/*
 * config_keys.c: the schema of sluiced.json, one row per key (struct
 * cfg_key, config-int.h): its field, kind, bounds and default, and the
 * handlers of the keys a kind alone cannot check; then the checks
 * between keys, run once everything is read.  A new key is a row here,
 * a field in config.h and a paragraph in sluiced.json(5); its default
 * and its --print-config line come from the row.
 */
#include "sluice-config.h"

#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <jansson.h>

#include "proxy/lib/config-int.h"
#include "proxy/lib/usock.h"

#define SUN_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path))

/* 1 when s is 1..max characters, a letter or _ first, then letters,
 * digits, _ and the characters of more. */
static int
ident_ok(const char *s, size_t max, const char *more)
{
	size_t i, n = strlen(s);

	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' ||
		    (i > 0 && ((s[i] >= '0' && s[i] <= '9') ||
		    strchr(more, s[i]) != NULL))))
			return 0;
	return n > 0 && n <= max;
}

/* A name ident_ok takes into *out; what names it in the error. */
static int
ident_set(struct cfg_ctx *x, json_t *v, size_t max, const char *more,
    const char *what, char **out)
{
	const char *s;
	char b[80];

	if (cfg_get_str(x, v, &s) != 0)
		return -1;
	if (!ident_ok(s, max, more))
		return cfg_fail(x, "bad %s %s (letters, digits, _%s and -, "
		    "starting with a letter or _, at most %zu)", what,
		    cfg_shown(s, b, sizeof(b)), strchr(more, '.') != NULL ?
		    " ." : "", max);
	return cfg_set_str(x, s, out);
}

/* A user name as useradd accepts it, so a typo is found by
 * --check-config, not at the next start. */
static int
k_user(struct cfg_ctx *x, json_t *v, void *base)
{
	return ident_set(x, v, 32, "-.", "user name",
	    &((struct cfg *)base)->user);
}

static const struct cfg_key tenant_keys[] = {
	{ "ceiling", K_TIER, .off = offsetof(struct cfg_tenant, ceiling) },
	{ .name = NULL }
};

static int
k_tenants(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	const char *name;
	json_t *m;

	if (!json_is_object(v))
		return cfg_fail(x, "expected an object of tenants");
	c->tenants = cfg_calloc(x, json_object_size(v), sizeof(*c->tenants));
	if (c->tenants == NULL)
		return -1;
	json_object_foreach(v, name, m) {
		struct cfg_tenant *t = &c->tenants[c->ntenants];

		cfg_ctx_key(x, name);
		if (!pol_id_valid(name))
			return cfg_fail_key(x, "bad tenant name (expected "
			    "1 to 64 of A-Z a-z 0-9 . _ -)");
		if ((t->name = strdup(name)) == NULL)
			return cfg_fail(x, "out of memory");
		c->ntenants++;
		if (json_is_object(m) && json_object_get(m, "ceiling") == NULL)
			return cfg_fail(x, "missing key \"ceiling\"");
		if (cfg_walk_object(x, m, tenant_keys, t) != 0)
			return -1;
		cfg_ctx_pop(x);
	}
	return 0;
}

static int
check_listen(struct cfg_ctx *x, const char *s)
{
	struct pol_target t;
	char b[80];

	if (pol_target_parse_authority(s, strlen(s), &t) != POL_R_NONE ||
	    t.kind == POL_HOST_NAME)
		return cfg_fail(x, "bad listen address %s (expected "
		    "ADDRESS:PORT or [IPV6]:PORT)", cfg_shown(s, b, sizeof(b)));
	return 0;
}

static int
k_listen_transparent(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	size_t i;

	if (cfg_get_str_list(x, v, check_listen, &c->listen_transparent,
	    &c->nlisten_transparent) != 0)
		return -1;
	c->transparent_port = 0;
	for (i = 0; i < c->nlisten_transparent; i++) {
		const char *s = c->listen_transparent[i];
		struct pol_target t;

		(void)pol_target_parse_authority(s, strlen(s), &t);
		/* one redirect target: "redirect to :PORT" lands on the
		 * address of the interface the packet came in on */
		if (i > 0 && t.port != c->transparent_port)
			return cfg_fail(x, "every transparent listener needs "
			    "the same port (the firewall redirects to one)");
		c->transparent_port = t.port;
	}
	return 0;
}

static int
k_vsock_port(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	long long n;

	if (cfg_get_int(x, v, -1, INT_MAX, &n) != 0)
		return -1;
	if (n == 0)
		return cfg_fail(x, "expected a port (1..%d) or -1 for none",
		    INT_MAX);
	c->vsock_port = (int)n;
	return 0;
}

static int
k_socket_group(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return cfg_get_opt_str(x, v, "a group name", &c->socket_group);
}

/* Row parts: a field of struct cfg, a list of it and its count, a
 * number's bounds and default. */
#define F(field) .off = offsetof(struct cfg, field)
#define LIST(field, count) F(field), .noff = offsetof(struct cfg, count)
#define NUM(lo_, hi_, def_) .lo = (lo_), .hi = (hi_), .def = (def_)

/* listen.socket_prefixes: where an admin may put a session's socket;
 * "/" would be every path */
static int
check_prefix(struct cfg_ctx *x, const char *s)
{
	char why[128], b[80];

	if (strcmp(s, "/") == 0)
		return cfg_fail(x, "\"/\" would admit every path");
	if (usock_path_check(s, why, sizeof(why)) != 0)
		return cfg_fail(x, "%s: %s", cfg_shown(s, b, sizeof(b)), why);
	return 0;
}

static const struct cfg_key listen_keys[] = {
	{ "tcp", K_STRV, LIST(listen_tcp, nlisten_tcp), .check = check_listen },
	{ "transparent", K_STRV, LIST(listen_transparent, nlisten_transparent),
	  .fn = k_listen_transparent },
	{ "vsock_port", K_INT, F(vsock_port), .def = -1, .fn = k_vsock_port },
	{ "socket_mode", K_MODE, F(socket_mode), .def = 0660 },
	{ "socket_group", K_OPT, F(socket_group), .fn = k_socket_group },
	{ "socket_prefixes", K_STRV, LIST(socket_prefixes, nsocket_prefixes),
	  .check = check_prefix },
	{ .name = NULL }
};

/* Sessions: x->c->sessions[x->c->nsessions - 1] is the one being read. */

static int
session_transport(struct cfg_ctx *x, struct cfg_session *s)
{
	if (s->socket != NULL || s->source != NULL || s->vsock_cid >= 0)
		return cfg_fail_key(x, "a session has at most one of socket, "
		    "source and vsock_cid");
	return 0;
}

static int
k_sess_id(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	const char *id;
	char b[80];
	size_t i;

	if (cfg_get_str(x, v, &id) != 0)
		return -1;
	if (!pol_id_valid(id))
		return cfg_fail(x, "bad session id %s (expected 1 to 64 of "
		    "A-Z a-z 0-9 . _ -, not starting with a dot)",
		    cfg_shown(id, b, sizeof(b)));
	for (i = 0; x->c->sessions + i < s; i++)
		if (x->c->sessions[i].id != NULL &&
		    strcmp(x->c->sessions[i].id, id) == 0)
			return cfg_fail(x, "duplicate session id %s (also "
			    "sessions[%zu])", cfg_shown(id, b, sizeof(b)), i);
	return cfg_set_str(x, id, &s->id);
}

static int
k_sess_tenant(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	const char *t;

	if (cfg_get_str(x, v, &t) != 0)
		return -1;
	if (*t != '\0' && !pol_id_valid(t))
		return cfg_fail(x, "bad tenant name (expected 1 to 64 of "
		    "A-Z a-z 0-9 . _ -)");
	return cfg_set_str(x, t, &s->tenant);
}

static int
k_sess_user(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	const char *u;

	if (cfg_get_str(x, v, &u) != 0)
		return -1;
	if (strlen(u) > 256)
		return cfg_fail(x, "longer than 256 bytes");
	return cfg_set_str(x, u, &s->user);
}

static int
k_sess_socket(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	const char *p;
	char b[80], why[128];
	size_t i;

	if (session_transport(x, s) != 0 || cfg_get_str(x, v, &p) != 0)
		return -1;
	if (p[0] != '/')
		return cfg_fail(x, "expected an absolute path");
	if (strlen(p) >= SUN_PATH_MAX)
		return cfg_fail(x, "longer than a socket path can be (%zu "
		    "bytes)", SUN_PATH_MAX - 1);
	if (usock_path_check(p, why, sizeof(why)) != 0)
		return cfg_fail(x, "%s: %s", cfg_shown(p, b, sizeof(b)), why);
	for (i = 0; x->c->sessions + i < s; i++)
		if (x->c->sessions[i].socket != NULL &&
		    strcmp(x->c->sessions[i].socket, p) == 0)
			return cfg_fail(x, "socket %s already belongs to "
			    "sessions[%zu]", cfg_shown(p, b, sizeof(b)), i);
	return cfg_set_str(x, p, &s->socket);
}

static int
k_sess_source(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	char canon[64], b[80];
	const char *p;
	size_t i;

	if (session_transport(x, s) != 0 || cfg_get_str(x, v, &p) != 0)
		return -1;
	if (pol_addr_parse(p, strlen(p), &s->source_addr) != 0)
		return cfg_fail(x, "bad source address %s (expected an IPv4 "
		    "or IPv6 address)", cfg_shown(p, b, sizeof(b)));
	pol_addr_format(&s->source_addr, canon, sizeof(canon));
	for (i = 0; x->c->sessions + i < s; i++)
		if (x->c->sessions[i].source != NULL &&
		    strcmp(x->c->sessions[i].source, canon) == 0)
			return cfg_fail(x, "source %s already belongs to "
			    "sessions[%zu]", canon, i);
	return cfg_set_str(x, canon, &s->source);
}

static int
k_sess_cid(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_session *s = base;
	long long cid;
	size_t i;

	if (session_transport(x, s) != 0)
		return -1;
	/* 0 is the hypervisor, 2 the host (no sandbox is either) and
	 * 0xffffffff is "any"; 1 is local loopback, for tests on a host */
	if (cfg_get_int(x, v, 1, 0xfffffffeLL, &cid) != 0)
		return -1;
	if (cid == 2)
		return cfg_fail(x, "2 is the host's own CID, not a sandbox's");
	for (i = 0; x->c->sessions + i < s; i++)
		if (x->c->sessions[i].vsock_cid == cid)
			return cfg_fail(x, "vsock_cid %lld already belongs to "
			    "sessions[%zu]", cid, i);
	s->vsock_cid = cid;
	return 0;
}

/* printed by hand (dump_sessions): some keys only when given */
static const struct cfg_key session_keys[] = {
	{ "id", K_FN, .fn = k_sess_id },
	{ "tenant", K_FN, .fn = k_sess_tenant },
	{ "user", K_FN, .fn = k_sess_user },
	{ "tier", K_TIER, .off = offsetof(struct cfg_session, tier) },
	{ "socket", K_FN, .fn = k_sess_socket },
	{ "source", K_FN, .fn = k_sess_source },
	{ "vsock_cid", K_FN, .fn = k_sess_cid },
	{ .name = NULL }
};

static int
k_sessions(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	size_t i;

	if (!json_is_array(v))
		return cfg_fail(x, "expected an array of sessions");
	c->sessions = cfg_calloc(x, json_array_size(v), sizeof(*c->sessions));
	if (c->sessions == NULL)
		return -1;
	for (i = 0; i < json_array_size(v); i++) {
		struct cfg_session *s = &c->sessions[c->nsessions++];

		s->tier = POL_TIER_OFF;
		s->vsock_cid = -1;
		cfg_ctx_idx(x, i);
		if (cfg_walk_object(x, json_array_get(v, i), session_keys,
		    s) != 0)
			return -1;
		if (s->id == NULL)
			return cfg_fail(x, "missing key \"id\"");
		if ((s->tenant == NULL &&
		    cfg_set_str(x, "", &s->tenant) != 0) ||
		    (s->user == NULL && cfg_set_str(x, "", &s->user) != 0))
			return -1;
		cfg_ctx_pop(x);
	}
	return 0;
}

static int
check_registry(struct cfg_ctx *x, const char *s)
{
	char b[80];

	if (pol_config_add_registry(x->trial, s) != 0)
		return cfg_fail(x, "bad registry pattern %s (expected a host "
		    "name or *.suffix, with an optional :port)",
		    cfg_shown(s, b, sizeof(b)));
	return 0;
}

static int
k_registries(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	if (json_is_null(v)) {
		c->registries_default = 1;
		return 0;
	}
	c->registries_default = 0;
	return cfg_get_str_list(x, v, check_registry, &c->registries,
	    &c->nregistries);
}

static const uint16_t web_ports[] = { 443, 80, 0 };
static const uint16_t tls_ports[] = { 443, 0 };
static const uint16_t http_ports[] = { 80, 0 };

static const struct cfg_key ports_keys[] = {
	{ "registries", K_PORTS, LIST(ports_registries, nports_registries),
	  .pdef = web_ports },
	{ "public", K_PORTS, LIST(ports_public, nports_public),
	  .pdef = web_ports },
	{ .name = NULL }
};

static int
check_cidr(struct cfg_ctx *x, const char *s, int allow)
{
	char b[80];

	if (pol_config_add_cidr(x->trial, s, allow) != 0)
		return cfg_fail(x, "bad CIDR %s (expected ADDRESS or "
		    "ADDRESS/PREFIX)", cfg_shown(s, b, sizeof(b)));
	return 0;
}

static int
check_allow_cidr(struct cfg_ctx *x, const char *s)
{
	return check_cidr(x, s, 1);
}

static int
check_deny_cidr(struct cfg_ctx *x, const char *s)
{
	return check_cidr(x, s, 0);
}

static int
check_deny_host(struct cfg_ctx *x, const char *s)
{
	char b[80];

	if (pol_config_add_deny_host(x->trial, s) != 0)
		return cfg_fail(x, "bad host pattern %s (expected a host name "
		    "or *.suffix, with an optional :port)",
		    cfg_shown(s, b, sizeof(b)));
	return 0;
}

static int
port_text_ok(const char *s, size_t n)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 5 || s[0] == '0')
		return 0;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v <= 65535;
}

/* "ip", "ip:port", "[v6]" or "[v6]:port". */
static int
check_dns_server(struct cfg_ctx *x, const char *s)
{
	const char *addr = s, *port = NULL, *colon;
	struct pol_addr a;
	size_t alen;
	char b[80];

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (close == NULL || (close[1] != '\0' && close[1] != ':'))
			goto bad;
		addr = s + 1;
		alen = (size_t)(close - addr);
		if (close[1] == ':')
			port = close + 2;
	} else if ((colon = strchr(s, ':')) != NULL &&
	    strchr(colon + 1, ':') == NULL) {
		alen = (size_t)(colon - s);
		port = colon + 1;
	} else {
		alen = strlen(s);
	}
	if (pol_addr_parse(addr, alen, &a) != 0)
		goto bad;
	if (s[0] == '[' && a.family == AF_INET)
		goto bad;
	if (port != NULL && !port_text_ok(port, strlen(port)))
		goto bad;
	return 0;
bad:
	return cfg_fail(x, "bad DNS server %s (expected IP, IP:PORT or "
	    "[IPV6]:PORT)", cfg_shown(s, b, sizeof(b)));
}

static const struct cfg_key dns_keys[] = {
	{ "servers", K_STRV, LIST(dns_servers, ndns_servers),
	  .check = check_dns_server },
	{ "hosts", K_HOSTS, LIST(dns_hosts, ndns_hosts) },
	{ "timeout_ms", K_INT, F(dns_timeout_ms), NUM(1, 600000, 3000) },
	{ .name = NULL }
};

static const struct cfg_key log_keys[] = {
	{ "path", K_STR, F(log_path),
	  .sdef = "/var/log/sluice/connections.jsonl" },
	{ "refusals_per_s", K_INT, F(log_refusals_per_s), NUM(0, 1000000, 20) },
	{ "refusal_burst", K_INT, F(log_refusal_burst), NUM(1, 1000000, 100) },
	{ "min_free_bytes", K_SIZE, F(log_min_free_bytes),
	  NUM(0, (long long)1 << 50, 64 * 1048576) },
	{ "mac_key_file", K_FILE, F(log_mac_key_file) },
	{ .name = NULL }
};

static const struct cfg_key prompt_keys[] = {
	{ "timeout_s", K_INT, F(prompt_timeout_s), NUM(1, 86400, 90) },
	{ "deny_quiet_s", K_INT, F(prompt_deny_quiet_s), NUM(0, 86400, 60) },
	{ .name = NULL }
};

static const struct cfg_key events_keys[] = {
	{ "ring", K_SIZE, F(events_ring), NUM(16, 100000, 1024) },
	{ "max_pending", K_SIZE, F(events_max_pending),
	  NUM(4096, 64 * 1048576, 256 * 1024) },
	{ "heartbeat_s", K_INT, F(events_heartbeat_s), NUM(1, 3600, 15) },
	{ .name = NULL }
};

static const struct cfg_key limits_keys[] = {
	{ "max_head", K_SIZE, F(max_head), NUM(1024, 1048576, 32768) },
	{ "max_line", K_SIZE, F(max_line), NUM(256, 1048576, 8192) },
	{ "max_headers", K_SIZE, F(max_headers), NUM(1, 10000, 100) },
	{ "head_timeout_ms", K_INT, F(head_timeout_ms),
	  NUM(100, 600000, 10000) },
	{ "idle_timeout_s", K_INT, F(idle_timeout_s), NUM(1, 86400, 300) },
	{ "connect_timeout_ms", K_INT, F(connect_timeout_ms),
	  NUM(100, 600000, 10000) },
	{ "max_conns_per_session", K_INT, F(max_conns_per_session),
	  NUM(1, 1000000, 256) },
	{ "max_conns_total", K_INT, F(max_conns_total),
	  NUM(1, 1000000, 4096) },
	{ "max_conns_per_tenant", K_INT, F(max_conns_per_tenant),
	  NUM(1, 1000000, 1024) },
	{ "pressure_pct", K_INT, F(pressure_pct), NUM(1, 100, 75) },
	{ "fd_reserve", K_INT, F(fd_reserve), NUM(0, 65536, 256) },
	{ "max_grants_per_session", K_INT, F(max_grants_per_session),
	  NUM(1, 100000, 256) },
	{ "max_refusals_per_conn", K_INT, F(max_refusals_per_conn),
	  NUM(1, 1000000, 100) },
	{ "tunnel_buffer", K_SIZE, F(tunnel_buffer),
	  NUM(4096, 64 * 1048576, 256 * 1024) },
	{ "drain_timeout_s", K_INT, F(drain_timeout_s), NUM(0, 3600, 10) },
	{ .name = NULL }
};

static const struct cfg_key tls_keys[] = {
	{ "sni_check", K_BOOL, F(sni_check), .def = 1 },
	{ "sni_ports", K_PORTS, LIST(sni_ports, nsni_ports), .pdef = tls_ports,
	  .flags = KF_LAST },
	{ "sni_timeout_ms", K_INT, F(sni_timeout_ms), NUM(100, 600000, 5000) },
	{ "allow_ech", K_BOOL, F(allow_ech), .def = 0, .flags = KF_LAST },
	{ "plain_http_ports", K_PORTS, LIST(plain_ports, nplain_ports),
	  .pdef = http_ports, .flags = KF_LAST },
	{ .name = NULL }
};

/* control: the control API's listeners, callers and limits. */

static int
k_ctl_socket(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	const char *p;
	char why[128], b[80];

	if (cfg_get_str(x, v, &p) != 0)
		return -1;
	if (p[0] != '/')
		return cfg_fail(x, "expected an absolute path");
	if (strlen(p) >= SUN_PATH_MAX)
		return cfg_fail(x, "longer than a socket path can be (%zu "
		    "bytes)", SUN_PATH_MAX - 1);
	if (usock_path_check(p, why, sizeof(why)) != 0)
		return cfg_fail(x, "%s: %s", cfg_shown(p, b, sizeof(b)), why);
	return cfg_set_str(x, p, &c->control.socket);
}

static int
k_ctl_socket_group(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	return cfg_get_opt_str(x, v, "a group name", &c->control.socket_group);
}

static int
k_ctl_tcp(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	if (!json_is_null(v) && json_is_string(v) &&
	    check_listen(x, json_string_value(v)) != 0)
		return -1;
	return cfg_get_opt_str(x, v, "ADDRESS:PORT", &c->control.tcp);
}

static const char *const role_names[] = {
	[CFG_ROLE_NONE] = "none",
	[CFG_ROLE_AUDITOR] = "auditor",
	[CFG_ROLE_APP] = "app",
	[CFG_ROLE_ADMIN] = "admin",
};

const char *
cfg_role_name(enum cfg_role r)
{
	if ((size_t)r >= sizeof(role_names) / sizeof(role_names[0]))
		return "none";
	return role_names[r];
}

static int
k_tok_name(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_token *t = base;
	const char *name;
	char b[80];
	size_t i;

	if (cfg_get_str(x, v, &name) != 0)
		return -1;
	if (!pol_id_valid(name))
		return cfg_fail(x, "bad token name %s (expected 1 to 64 of "
		    "A-Z a-z 0-9 . _ -)", cfg_shown(name, b, sizeof(b)));
	for (i = 0; x->c->control.tokens + i < t; i++)
		if (strcmp(x->c->control.tokens[i].name, name) == 0)
			return cfg_fail(x, "duplicate token name %s (also "
			    "control.tokens[%zu])",
			    cfg_shown(name, b, sizeof(b)), i);
	return cfg_set_str(x, name, &t->name);
}

static int
k_tok_role(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_token *t = base;
	const char *r;
	char b[80];

	if (cfg_get_str(x, v, &r) != 0)
		return -1;
	if (strcmp(r, "admin") == 0)
		t->role = CFG_ROLE_ADMIN;
	else if (strcmp(r, "app") == 0)
		t->role = CFG_ROLE_APP;
	else if (strcmp(r, "auditor") == 0)
		t->role = CFG_ROLE_AUDITOR;
	else
		return cfg_fail(x, "unknown role %s (expected admin, app or "
		    "auditor)", cfg_shown(r, b, sizeof(b)));
	return 0;
}

static int
k_tok_tenant(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_token *t = base;
	const char *name;
	char b[80];

	if (json_is_null(v))
		return 0;
	if (cfg_get_str(x, v, &name) != 0)
		return -1;
	if (!pol_id_valid(name))
		return cfg_fail(x, "bad tenant name %s (expected 1 to 64 of "
		    "A-Z a-z 0-9 . _ -)", cfg_shown(name, b, sizeof(b)));
	return cfg_set_str(x, name, &t->tenant);
}

static const struct cfg_key token_keys[] = {
	{ "name", K_STR, offsetof(struct cfg_token, name), .fn = k_tok_name },
	{ "role", K_ROLE, offsetof(struct cfg_token, role), .fn = k_tok_role },
	{ "token_file", K_STR, .off = offsetof(struct cfg_token, token_file) },
	{ "tenant", K_OPT, .off = offsetof(struct cfg_token, tenant),
	  .fn = k_tok_tenant },
	{ .name = NULL }
};

static int
k_ctl_tokens(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	static const char *const need[] = { "name", "role", "token_file" };
	size_t i, j;

	if (!json_is_array(v))
		return cfg_fail(x, "expected an array of tokens");
	c->control.tokens = cfg_calloc(x, json_array_size(v),
	    sizeof(*c->control.tokens));
	if (c->control.tokens == NULL)
		return -1;
	for (i = 0; i < json_array_size(v); i++) {
		json_t *o = json_array_get(v, i);
		struct cfg_token *t = &c->control.tokens[c->control.ntokens++];

		cfg_ctx_idx(x, i);
		if (cfg_walk_object(x, o, token_keys, t) != 0)
			return -1;
		for (j = 0; j < sizeof(need) / sizeof(need[0]); j++)
			if (json_object_get(o, need[j]) == NULL)
				return cfg_fail(x, "missing key \"%s\"",
				    need[j]);
		if (t->tenant != NULL && t->role == CFG_ROLE_ADMIN)
			return cfg_fail(x, "token %s: an admin token cannot be "
			    "bound to a tenant (admin is every tenant's); bind "
			    "app or auditor tokens", t->name);
		cfg_ctx_pop(x);
	}
	return 0;
}

/*
 * "https://host[:port][/path]": the scheme only https (any case), no
 * userinfo or fragment, a path of printable characters.  The parts are
 * kept so that the webhook module does not parse again.
 */
static int
webhook_url(struct cfg_ctx *x, const char *u, struct cfg_webhook *w)
{
	static const char https[] = "https://";
	const char *auth, *end, *p;
	struct pol_target t;
	char b[80];
	size_t i;

	for (i = 0; i < sizeof(https) - 1; i++)
		if (u[i] == '\0' || tolower((unsigned char)u[i]) != https[i])
			return cfg_fail(x, "%s is not an https:// URL (the "
			    "webhook is TLS only)", cfg_shown(u, b, sizeof(b)));
	auth = u + i;
	end = auth + strcspn(auth, "/?#");
	if (memchr(auth, '@', (size_t)(end - auth)) != NULL)
		return cfg_fail(x, "no user name or password in the URL");
	if (*end == '#' || strchr(end, '#') != NULL)
		return cfg_fail(x, "no fragment (#) in the URL");
	for (p = end; *p != '\0'; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return cfg_fail(x, "the URL's path must be printable "
			    "ASCII without spaces");
	if (end == auth || pol_target_parse_hostport(auth,
	    (size_t)(end - auth), 443, &t) != POL_R_NONE || t.port == 0)
		return cfg_fail(x, "bad host or port in %s",
		    cfg_shown(u, b, sizeof(b)));
	free(w->host);
	free(w->path);
	w->host = strdup(t.host);
	w->port = t.port;
	if (*end == '?') {
		w->path = malloc(strlen(end) + 2);
		if (w->path != NULL) {
			w->path[0] = '/';
			strcpy(w->path + 1, end);
		}
	} else {
		w->path = strdup(*end == '\0' ? "/" : end);
	}
	if (w->host == NULL || w->path == NULL)
		return cfg_fail(x, "out of memory");
	return 0;
}

static int
k_wh_url(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;

	if (json_is_string(v) && *json_string_value(v) != '\0' &&
	    webhook_url(x, json_string_value(v), &c->webhook) != 0)
		return -1;
	return cfg_get_opt_str(x, v, "an https:// URL", &c->webhook.url);
}

/* The secret itself is never in the configuration, only its file. */
static const struct cfg_key webhook_keys[] = {
	{ "url", K_OPT, F(webhook.url), .fn = k_wh_url },
	{ "secret_file", K_FILE, F(webhook.secret_file) },
	{ "ca_file", K_FILE, F(webhook.ca_file) },
	{ "timeout_ms", K_INT, F(webhook.timeout_ms), NUM(100, 600000, 5000) },
	{ "hosts", K_HOSTS, LIST(webhook.hosts, webhook.nhosts) },
	{ .name = NULL }
};

static const struct cfg_key control_keys[] = {
	{ "socket", K_PATH, F(control.socket),
	  .sdef = "/run/sluice/control.sock", .fn = k_ctl_socket },
	{ "socket_mode", K_MODE, F(control.socket_mode), .def = 0660 },
	{ "socket_group", K_OPT, F(control.socket_group),
	  .fn = k_ctl_socket_group },
	{ "admin_uids", K_IDS, F(control.uids[CFG_ROLE_ADMIN]) },
	{ "admin_gids", K_IDS, F(control.gids[CFG_ROLE_ADMIN]) },
	{ "app_uids", K_IDS, F(control.uids[CFG_ROLE_APP]) },
	{ "app_gids", K_IDS, F(control.gids[CFG_ROLE_APP]) },
	{ "auditor_uids", K_IDS, F(control.uids[CFG_ROLE_AUDITOR]) },
	{ "auditor_gids", K_IDS, F(control.gids[CFG_ROLE_AUDITOR]) },
	{ "tcp", K_OPT, F(control.tcp), .fn = k_ctl_tcp },
	{ "tls_cert", K_FILE, F(control.tls_cert) },
	{ "tls_key", K_FILE, F(control.tls_key) },
	{ "client_ca", K_FILE, F(control.client_ca) },
	{ "tokens", K_TOKENS, LIST(control.tokens, control.ntokens),
	  .sub = token_keys, .fn = k_ctl_tokens },
	{ "max_body", K_SIZE, F(control.max_body),
	  NUM(1024, 16 * 1048576, 65536) },
	{ "max_conns", K_INT, F(control.max_conns), NUM(1, 100000, 64) },
	{ "max_conns_per_peer", K_INT, F(control.max_conns_per_peer),
	  NUM(1, 100000, 8) },
	{ "head_timeout_ms", K_INT, F(control.head_timeout_ms),
	  NUM(100, 600000, 10000) },
	{ .name = NULL }
};

/* ------------------------------------------------------------------ */
/* firewall */

/* nft's identifier syntax, within NFT_TABLE_MAXNAMELEN */
static int
k_fw_table(struct cfg_ctx *x, json_t *v, void *base)
{
	return ident_set(x, v, 31, "-", "table name",
	    &((struct cfg *)base)->firewall.table);
}

/* ADDRESS/PREFIX with no host bits: a subnet, not an address in one */
static int
check_subnet(struct cfg_ctx *x, const char *s)
{
	const char *slash = strchr(s, '/');
	struct pol_addr a;
	unsigned long len = 0;
	unsigned i, max;
	char b[80], *end = NULL;

	if (slash == NULL || pol_addr_parse(s, (size_t)(slash - s), &a) != 0)
		goto bad;
	max = a.family == AF_INET ? 32 : 128;
	if (slash[1] < '0' || slash[1] > '9' ||
	    (slash[1] == '0' && slash[2] != '\0'))
		goto bad;
	len = strtoul(slash + 1, &end, 10);
	if (*end != '\0' || len > max)
		goto bad;
	for (i = (unsigned)len; i < max; i++)
		if (a.a[i / 8] & (0x80 >> (i % 8)))
			return cfg_fail(x, "subnet %s has host bits set",
			    cfg_shown(s, b, sizeof(b)));
	return 0;
bad:
	return cfg_fail(x, "bad subnet %s (expected ADDRESS/PREFIX)",
	    cfg_shown(s, b, sizeof(b)));
}

static int
check_ifname(struct cfg_ctx *x, const char *s)
{
	char why[120], b[80];

	if (pol_ifname_check(s, why, sizeof(why)) != 0)
		return cfg_fail(x, "bad interface name %s: %s",
		    cfg_shown(s, b, sizeof(b)), why);
	return 0;
}

static const struct cfg_key firewall_keys[] = {
	{ "enabled", K_BOOL, F(firewall.enabled), .def = 0 },
	{ "table", K_STR, F(firewall.table), .sdef = "sluice",
	  .fn = k_fw_table },
	{ "uid", K_UID, F(firewall.uid), .def = -1 },
	{ "sandbox_subnets", K_STRV,
	  LIST(firewall.sandbox_subnets, firewall.nsandbox_subnets),
	  .check = check_subnet },
	{ "sandbox_interfaces", K_STRV,
	  LIST(firewall.sandbox_interfaces, firewall.nsandbox_interfaces),
	  .check = check_ifname },
	{ "broker_ports", K_PORTS,
	  LIST(firewall.broker_ports, firewall.nbroker_ports) },
	{ .name = NULL }
};

/* ------------------------------------------------------------------ */
/* inspect */

/* A name or "*.suffix", no port, no address: the leaf is made for a
 * name (and inspection applies to CONNECTs to that name on any port). */
static int
check_inspect_host(struct cfg_ctx *x, const char *s)
{
	const char *name = strncmp(s, "*.", 2) == 0 ? s + 2 : s;
	struct pol_hostset *hs;
	struct pol_target t;
	char b[80];
	int bad;

	if (pol_host_parse(name, strlen(name), 0, &t) != POL_R_NONE ||
	    t.kind != POL_HOST_NAME || strcmp(t.host, name) != 0 ||
	    strchr(s, ':') != NULL)
		return cfg_fail(x, "bad inspected host %s (expected a "
		    "canonical host name or *.suffix, no port, no address)",
		    cfg_shown(s, b, sizeof(b)));
	if ((hs = pol_hostset_new()) == NULL)
		return cfg_fail(x, "out of memory");
	bad = pol_hostset_add(hs, s) != 0;
	pol_hostset_free(hs);
	if (bad)
		return cfg_fail(x, "bad inspected host %s",
		    cfg_shown(s, b, sizeof(b)));
	return 0;
}

static const struct cfg_key inspect_keys[] = {
	{ "hosts", K_STRV, LIST(inspect.hosts, inspect.nhosts),
	  .check = check_inspect_host },
	{ "ca_cert", K_PATH, F(inspect.ca_cert),
	  .sdef = "/var/lib/sluice/inspect-ca.pem" },
	{ "ca_key", K_PATH, F(inspect.ca_key),
	  .sdef = "/var/lib/sluice/inspect-ca.key" },
	{ "upstream_ca_file", K_FILE, F(inspect.upstream_ca_file) },
	{ "leaf_cache", K_INT, F(inspect.leaf_cache), NUM(16, 1000000, 1024) },
	{ "leaf_days", K_INT, F(inspect.leaf_days), NUM(1, 397, 30) },
	{ .name = NULL }
};

/* ------------------------------------------------------------------ */
/* rules: x->c->rules[x->c->nrules - 1] is the one being read */

#define RF(field) .off = offsetof(struct cfg_rule, field)
#define RLIST(field, count) RF(field), .noff = offsetof(struct cfg_rule, count)

static int
k_rule_name(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_rule *r = base;
	const char *n;
	char b[80];

	if (cfg_get_str(x, v, &n) != 0)
		return -1;
	if (!pol_id_valid(n))
		return cfg_fail(x, "bad rule name %s (expected 1 to 64 of "
		    "A-Z a-z 0-9 . _ -, not starting with a dot)",
		    cfg_shown(n, b, sizeof(b)));
	r->has_name = 1;
	free(r->name);
	r->name = NULL;
	return cfg_set_str(x, n, &r->name);
}

static int
k_rule_action(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg_rule *r = base;
	enum pol_rule_action a;
	const char *s;

	if (cfg_get_str(x, v, &s) != 0)
		return -1;
	if (pol_rule_action_parse(s, &a) != 0)
		return cfg_fail(x, "expected \"allow\", \"deny\" or "
		    "\"prompt\"");
	r->action = (int)a;
	return 0;
}

static int
check_rule_host(struct cfg_ctx *x, const char *s)
{
	struct pol_hostset *hs = pol_hostset_new();
	char b[80];
	int bad;

	if (hs == NULL)
		return cfg_fail(x, "out of memory");
	bad = pol_hostset_add(hs, s) != 0;
	pol_hostset_free(hs);
	if (bad)
		return cfg_fail(x, "bad rule host %s (expected a host name or "
		    "*.suffix, with an optional :port)",
		    cfg_shown(s, b, sizeof(b)));
	return 0;
}

static int
check_rule_method(struct cfg_ctx *x, const char *s)
{
	char b[80];

	if (!pol_rule_method_valid(s))
		return cfg_fail(x, "bad method %s (expected an upper-case "
		    "token: GET, POST, ...)", cfg_shown(s, b, sizeof(b)));
	return 0;
}

static int
check_rule_path(struct cfg_ctx *x, const char *s)
{
	char b[80];

	if (!pol_rule_glob_valid(s))
		return cfg_fail(x, "bad path glob %s (expected one starting "
		    "with / or *, printable ASCII without spaces, ? or #, at "
		    "most 1024 bytes; * matches any run of bytes)",
		    cfg_shown(s, b, sizeof(b)));
	return 0;
}

/* printed by hand (dump_rules) */
static const struct cfg_key rule_keys[] = {
	{ "name", K_FN, .fn = k_rule_name },
	{ "hosts", K_STRV, RLIST(hosts, nhosts), .check = check_rule_host },
	{ "methods", K_STRV, RLIST(methods, nmethods),
	  .check = check_rule_method },
	{ "paths", K_STRV, RLIST(paths, npaths), .check = check_rule_path },
	{ "action", K_FN, .fn = k_rule_action },
	{ .name = NULL }
};

static int
k_rules(struct cfg_ctx *x, json_t *v, void *base)
{
	struct cfg *c = base;
	size_t i, j;

	if (!json_is_array(v))
		return cfg_fail(x, "expected an array of rules");
	c->rules = cfg_calloc(x, json_array_size(v) ? json_array_size(v) : 1,
	    sizeof(*c->rules));
	if (c->rules == NULL)
		return -1;
	for (i = 0; i < json_array_size(v); i++) {
		struct cfg_rule *r = &c->rules[c->nrules++];
		json_t *o = json_array_get(v, i);
		char dn[32];

		r->action = -1;
		cfg_ctx_idx(x, i);
		if (cfg_walk_object(x, o, rule_keys, r) != 0)
			return -1;
		if (r->nhosts == 0)
			return json_object_get(o, "hosts") != NULL ?
			    cfg_fail_key(x, "a rule names at least one host") :
			    cfg_fail(x, "missing key \"hosts\"");
		if (r->action < 0)
			return cfg_fail(x, "missing key \"action\"");
		if (r->name == NULL) {
			snprintf(dn, sizeof(dn), "rule-%zu", i);
			if (cfg_set_str(x, dn, &r->name) != 0)
				return -1;
		}
		for (j = 0; j + 1 < c->nrules; j++)
			if (strcmp(c->rules[j].name, r->name) == 0)
				return cfg_fail(x, "duplicate rule name \"%s\" "
				    "(also rules[%zu])", r->name, j);
		cfg_ctx_pop(x);
	}
	return 0;
}

int
cfg_rule_host_seen(const struct cfg *c, const char *pat)
{
	const char *colon = strchr(pat, ':');
	size_t i;

	if (colon != NULL) {
		long port = strtol(colon + 1, NULL, 10);

		for (i = 0; i < c->nplain_ports; i++)
			if (c->plain_ports[i] == port)
				return 1;
	}
	return pol_host_pattern_covered((const char *const *)c->inspect.hosts,
	    c->inspect.nhosts, pat);
}

static int
check_rules_seen(struct cfg_ctx *x)
{
	struct cfg *c = x->c;
	size_t i, j;
	char b[80];

	for (i = 0; i < c->nrules; i++)
		for (j = 0; j < c->rules[i].nhosts; j++) {
			if (cfg_rule_host_seen(c, c->rules[i].hosts[j]))
				continue;
			cfg_ctx_key(x, "rules");
			cfg_ctx_idx(x, i);
			cfg_ctx_key(x, "hosts");
			cfg_ctx_idx(x, j);
			return cfg_fail(x, "rule %s names %s, whose requests "
			    "sluice never sees: add it to inspect.hosts, or "
			    "name it with a port of tls.plain_http_ports "
			    "(\"host:80\") for plain HTTP only", c->rules[i].name,
			    cfg_shown(c->rules[i].hosts[j], b, sizeof(b)));
		}
	return 0;
}

/* ------------------------------------------------------------------ */
/* credentials */

static const struct cfg_key credentials_keys[] = {
	{ "file", K_PATH, F(credentials.file),
	  .sdef = "/var/lib/sluice/credentials.json" },
	{ .name = NULL }
};

const struct cfg_key cfg_root_keys[] = {
	{ "runtime_dir", K_PATH, F(runtime_dir), .sdef = "/run/sluice" },
	{ "state_file", K_PATH, F(state_file),
	  .sdef = "/var/lib/sluice/state.json" },
	{ "user", K_STR, F(user), .sdef = "sluice", .fn = k_user },
	{ "ceiling", K_TIER, F(ceiling), .def = POL_TIER_OFF },
	{ "tenants", K_TENANTS, LIST(tenants, ntenants), .sub = tenant_keys,
	  .fn = k_tenants },
	{ "listen", K_OBJ, .sub = listen_keys },
	{ "sessions", K_SESSIONS, LIST(sessions, nsessions), .fn = k_sessions },
	{ "registries", K_REGISTRIES, LIST(registries, nregistries),
	  .fn = k_registries },
	{ "ports", K_OBJ, .sub = ports_keys },
	{ "allow_cidrs", K_STRV, LIST(allow_cidrs, nallow_cidrs),
	  .check = check_allow_cidr },
	{ "deny_cidrs", K_STRV, LIST(deny_cidrs, ndeny_cidrs),
	  .check = check_deny_cidr },
	{ "deny_hosts", K_STRV, LIST(deny_hosts, ndeny_hosts),
	  .check = check_deny_host },
	{ "dns", K_OBJ, .sub = dns_keys },
	{ "log", K_OBJ, .sub = log_keys },
	{ "prompt", K_OBJ, .sub = prompt_keys },
	{ "events", K_OBJ, .sub = events_keys },
	{ "limits", K_OBJ, .sub = limits_keys },
	{ "tls", K_OBJ, .sub = tls_keys },
	{ "control", K_OBJ, .sub = control_keys },
	{ "webhook", K_OBJ, .sub = webhook_keys },
	{ "firewall", K_OBJ, .sub = firewall_keys },
	{ "inspect", K_OBJ, .sub = inspect_keys },
	{ "rules", K_RULES, LIST(rules, nrules), .fn = k_rules },
	{ "credentials", K_OBJ, .sub = credentials_keys },
	{ .name = NULL }
};

static int
cfg_check_control(struct cfg_ctx *x, json_t *root)
{
	struct cfg_control *k = &x->c->control;
	json_t *jc = json_object_get(root, "control");
	static const char name[] = "/control.sock";
	char *p;

	/* the default socket follows runtime_dir, wherever that key is */
	if (json_object_get(jc, "socket") == NULL) {
		if (strlen(x->c->runtime_dir) + strlen(name) >= SUN_PATH_MAX) {
			cfg_ctx_key(x, "runtime_dir");
			return cfg_fail(x, "too long for the control socket "
			    "under it; give control.socket or a shorter "
			    "runtime_dir");
		}
		if ((p = malloc(strlen(x->c->runtime_dir) + sizeof(name))) ==
		    NULL)
			return cfg_fail(x, "out of memory");
		strcpy(p, x->c->runtime_dir);
		strcat(p, name);
		free(k->socket);
		k->socket = p;
	}
	if (k->tcp == NULL)
		return 0;
	cfg_ctx_key(x, "control");
	cfg_ctx_key(x, "tcp");
	if (k->tls_cert == NULL || k->tls_key == NULL)
		return cfg_fail(x, "the TCP listener is TLS only: give "
		    "control.tls_cert and control.tls_key");
	if (k->ntokens == 0)
		return cfg_fail(x, "no control.tokens: every call on the TCP "
		    "listener would be refused");
	cfg_ctx_pop(x);
	cfg_ctx_pop(x);
	return 0;
}

/* Checks between keys, run once everything is read. */
int
cfg_cross_check(struct cfg_ctx *x, json_t *root)
{
	struct cfg *c = x->c;
	static const char sess[] = "/sessions/", sock[] = "/proxy.sock";
	size_t i;

	/* a line limit left at its default follows a smaller head limit;
	 * one the file names must fit */
	if (c->max_line > c->max_head && json_object_get(json_object_get(root,
	    "limits"), "max_line") == NULL)
		c->max_line = c->max_head;
	if (c->max_line > c->max_head) {
		cfg_ctx_key(x, "limits");
		cfg_ctx_key(x, "max_line");
		return cfg_fail(x, "%zu exceeds limits.max_head (%zu)",
		    c->max_line, c->max_head);
	}
	for (i = 0; i < c->nsessions; i++) {
		const struct cfg_session *s = &c->sessions[i];

		if (s->socket != NULL || s->source != NULL || s->vsock_cid >= 0)
			continue;
		if (strlen(c->runtime_dir) + strlen(sess) + strlen(s->id) +
		    strlen(sock) >= SUN_PATH_MAX) {
			cfg_ctx_key(x, "sessions");
			cfg_ctx_idx(x, i);
			return cfg_fail(x, "the default socket path under "
			    "runtime_dir is too long; give \"socket\" or a "
			    "shorter runtime_dir");
		}
	}
	if (c->webhook.url != NULL && c->webhook.secret_file == NULL) {
		cfg_ctx_key(x, "webhook");
		cfg_ctx_key(x, "url");
		return cfg_fail(x, "a webhook needs webhook.secret_file (its "
		    "deliveries are signed)");
	}
	if ((c->firewall.nsandbox_subnets > 0 ||
	    c->firewall.nsandbox_interfaces > 0) &&
	    c->firewall.nbroker_ports == 0 && c->transparent_port == 0) {
		cfg_ctx_key(x, "firewall");
		cfg_ctx_key(x, "broker_ports");
		/* otherwise the guard would leave the sandboxes no way out */
		return cfg_fail(x, "%s need the broker's ports",
		    c->firewall.nsandbox_subnets > 0 ? "sandbox_subnets" :
		    "sandbox_interfaces");
	}
	if (check_rules_seen(x) != 0)
		return -1;
	return cfg_check_control(x, root);
}
