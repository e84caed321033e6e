/*
 * test_config.c: sluiced.json loading, error positions, dump round trip
 * and the policy built from a configuration.
 */
#include "sluice-config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

/* proxy/ spelled out: the top-level config.h is autoconf's. */
#include "proxy/lib/config.h"
/* white-box: the rows (cfg_root_keys), to hold the dump to them */
#include "proxy/lib/config-int.h"

/* DESIGN.md's example, with its one session split into three: the
 * example gives all three transports at once, which a session may not. */
static const char example[] =
	"{\n"
	"  \"runtime_dir\": \"/run/sluice\",\n"
	"  \"ceiling\": \"off\",\n"
	"  \"tenants\": { \"acme\": { \"ceiling\": \"registries\" } },\n"
	"  \"listen\": { \"tcp\": [\"127.0.0.1:3128\"], \"vsock_port\": 3128 },\n"
	"  \"sessions\": [ { \"id\": \"chat-1\", \"tenant\": \"acme\", \"user\": \"alice\",\n"
	"                  \"tier\": \"registries\", \"socket\": \"/path/proxy.sock\" },\n"
	"                { \"id\": \"chat-2\", \"tier\": \"public\", \"source\": \"127.0.0.1\" },\n"
	"                { \"id\": \"chat-3\", \"vsock_cid\": 7 } ],\n"
	"  \"registries\": [ \"pypi.org\", \"files.pythonhosted.org\", \"*.crates.io\" ],\n"
	"  \"ports\": { \"registries\": [443, 80], \"public\": [443, 80] },\n"
	"  \"allow_cidrs\": [], \"deny_cidrs\": [], \"deny_hosts\": [],\n"
	"  \"dns\": { \"servers\": [\"127.0.0.1:5353\"], \"hosts\": { \"pypi.org\": [\"127.0.0.1\"] },\n"
	"           \"timeout_ms\": 3000 },\n"
	"  \"log\": { \"path\": \"/var/log/sluice/connections.jsonl\" },\n"
	"  \"prompt\": { \"timeout_s\": 90, \"deny_quiet_s\": 60 }\n"
	"}\n";

/* Every key, none at its default. */
static const char full[] =
	"{\n"
	"  \"runtime_dir\": \"/tmp/sluice-test\",\n"
	"  \"ceiling\": \"public\",\n"
	"  \"tenants\": { \"acme\": { \"ceiling\": \"registries\" },\n"
	"               \"beta.corp\": { \"ceiling\": \"off\" } },\n"
	"  \"listen\": { \"tcp\": [\"127.0.0.1:3128\", \"[::1]:3129\"],\n"
	"              \"vsock_port\": 1024, \"socket_mode\": \"0600\",\n"
	"              \"socket_group\": \"sluice\",\n"
	"              \"socket_prefixes\": [\"/run/vm\", \"/srv/fc/jail\"] },\n"
	"  \"sessions\": [ { \"id\": \"s1\", \"source\": \"::FFFF:127.0.0.1\" },\n"
	"                { \"id\": \"s2\" } ],\n"
	"  \"registries\": [ \"pypi.org\", \"*.example.org:8443\" ],\n"
	"  \"ports\": { \"registries\": [443], \"public\": [443, 80, 8080] },\n"
	"  \"allow_cidrs\": [\"10.1.0.0/16\"],\n"
	"  \"deny_cidrs\": [\"203.0.113.7\", \"2001:db8::/32\"],\n"
	"  \"deny_hosts\": [\"blocked.example\", \"*.evil.example\"],\n"
	"  \"dns\": { \"servers\": [\"127.0.0.1\", \"[::1]:5353\"],\n"
	"           \"hosts\": { \"Mirror.Example.\": [\"10.1.2.3\", \"::1\"] },\n"
	"           \"timeout_ms\": 1500 },\n"
	"  \"log\": { \"path\": \"/tmp/sluice-test/log.jsonl\",\n"
	"           \"refusals_per_s\": 0, \"refusal_burst\": 7,\n"
	"           \"min_free_bytes\": 1048576,\n"
	"           \"mac_key_file\": \"/etc/s/log.key\" },\n"
	"  \"prompt\": { \"timeout_s\": 30, \"deny_quiet_s\": 0 },\n"
	"  \"events\": { \"ring\": 16, \"max_pending\": 4096, \"heartbeat_s\": 3600 },\n"
	"  \"limits\": { \"max_head\": 16384, \"max_line\": 4096, \"max_headers\": 50,\n"
	"              \"head_timeout_ms\": 2000, \"idle_timeout_s\": 60,\n"
	"              \"connect_timeout_ms\": 3000, \"max_conns_per_session\": 8,\n"
	"              \"max_conns_total\": 64, \"tunnel_buffer\": 65536,\n"
	"              \"max_conns_per_tenant\": 32, \"pressure_pct\": 90,\n"
	"              \"fd_reserve\": 0, \"max_grants_per_session\": 16,\n"
	"              \"max_refusals_per_conn\": 5,\n"
	"              \"drain_timeout_s\": 2 },\n"
	"  \"tls\": { \"sni_check\": false, \"sni_timeout_ms\": 1000,\n"
	"           \"allow_ech\": true, \"plain_http_ports\": [80, 8080] },\n"
	"  \"state_file\": \"/tmp/sluice-test/state.json\",\n"
	"  \"control\": { \"socket\": \"/tmp/sluice-test/ctl.sock\",\n"
	"               \"socket_mode\": \"0600\", \"socket_group\": \"wheel\",\n"
	"               \"admin_uids\": [1000], \"admin_gids\": [10, 11],\n"
	"               \"app_uids\": [1001], \"app_gids\": [],\n"
	"               \"auditor_uids\": [1002, 4294967294], \"auditor_gids\": [12],\n"
	"               \"tcp\": \"127.0.0.1:9443\", \"tls_cert\": \"/etc/s/c.pem\",\n"
	"               \"tls_key\": \"/etc/s/k.pem\", \"client_ca\": \"/etc/s/ca.pem\",\n"
	"               \"tokens\": [ { \"name\": \"ops\", \"role\": \"admin\",\n"
	"                             \"token_file\": \"/etc/s/ops.token\" },\n"
	"                           { \"name\": \"chat\", \"role\": \"app\",\n"
	"                             \"token_file\": \"/etc/s/chat.token\" } ],\n"
	"               \"max_body\": 4096, \"max_conns\": 16,\n"
	"               \"max_conns_per_peer\": 2, \"head_timeout_ms\": 3000 },\n"
	"  \"webhook\": { \"url\": \"HTTPS://Hooks.Example:8443/sluice?x=1\",\n"
	"               \"secret_file\": \"/etc/s/hook.secret\",\n"
	"               \"ca_file\": \"/etc/s/hook-ca.pem\", \"timeout_ms\": 750,\n"
	"               \"hosts\": { \"hooks.example\": [\"127.0.0.1\", \"::1\"] } },\n"
	"  \"firewall\": { \"enabled\": true, \"table\": \"sluice_t-1\", \"uid\": 4242,\n"
	"                \"sandbox_subnets\": [\"10.77.0.0/16\", \"fd77::/64\"],\n"
	"                \"sandbox_interfaces\": [\"br-sandbox\", \"tap*\"],\n"
	"                \"broker_ports\": [3128, 3129] }\n"
	"}\n";

static struct cfg *
load(const char *text, char *err, size_t errlen)
{
	return cfg_load_buffer(text, strlen(text), "t.json", err, errlen);
}

static void
test_defaults(void **state)
{
	char err[256] = "";
	struct cfg *c = cfg_load(NULL, err, sizeof(err));

	(void)state;
	assert_non_null(c);
	assert_null(c->source_path);
	assert_string_equal(c->runtime_dir, "/run/sluice");
	assert_int_equal(c->ceiling, POL_TIER_OFF);
	assert_int_equal(c->ntenants, 0);
	assert_int_equal(c->nlisten_tcp, 0);
	assert_int_equal(c->vsock_port, -1);
	assert_int_equal(c->socket_mode, 0660);
	assert_null(c->socket_group);
	assert_int_equal(c->nsocket_prefixes, 0);    /* none: admins too */
	assert_int_equal(c->nsessions, 0);
	assert_true(c->registries_default);
	assert_null(c->registries);
	assert_int_equal(c->nports_registries, 2);
	assert_int_equal(c->ports_registries[0], 443);
	assert_int_equal(c->ports_registries[1], 80);
	assert_int_equal(c->nports_public, 2);
	assert_int_equal(c->ports_public[0], 443);
	assert_int_equal(c->ports_public[1], 80);
	assert_int_equal(c->nallow_cidrs + c->ndeny_cidrs + c->ndeny_hosts, 0);
	assert_int_equal(c->ndns_servers + c->ndns_hosts, 0);
	assert_int_equal(c->dns_timeout_ms, 3000);
	assert_string_equal(c->log_path, "/var/log/sluice/connections.jsonl");
	assert_int_equal(c->prompt_timeout_s, 90);
	assert_int_equal(c->prompt_deny_quiet_s, 60);
	assert_int_equal(c->events_ring, 1024);
	assert_int_equal(c->events_max_pending, 262144);
	assert_int_equal(c->events_heartbeat_s, 15);
	assert_int_equal(c->max_head, 32768);
	assert_int_equal(c->max_line, 8192);
	assert_int_equal(c->max_headers, 100);
	assert_int_equal(c->head_timeout_ms, 10000);
	assert_int_equal(c->idle_timeout_s, 300);
	assert_int_equal(c->connect_timeout_ms, 10000);
	assert_int_equal(c->max_conns_per_session, 256);
	assert_int_equal(c->max_conns_total, 4096);
	assert_int_equal(c->max_conns_per_tenant, 1024);
	assert_int_equal(c->pressure_pct, 75);
	assert_int_equal(c->fd_reserve, 256);
	assert_int_equal(c->tunnel_buffer, 256 * 1024);
	assert_null(c->webhook.url);
	assert_null(c->webhook.host);
	assert_null(c->webhook.secret_file);
	assert_null(c->webhook.ca_file);
	assert_int_equal(c->webhook.timeout_ms, 5000);
	assert_int_equal(c->webhook.nhosts, 0);
	assert_int_equal(c->drain_timeout_s, 10);
	assert_int_equal(c->sni_check, 1);
	assert_int_equal(c->sni_timeout_ms, 5000);
	assert_int_equal(c->allow_ech, 0);
	assert_int_equal(c->nplain_ports, 1);
	assert_int_equal(c->plain_ports[0], 80);
	assert_string_equal(c->state_file, "/var/lib/sluice/state.json");
	assert_string_equal(c->control.socket, "/run/sluice/control.sock");
	assert_int_equal(c->control.socket_mode, 0660);
	assert_null(c->control.socket_group);
	assert_int_equal(c->control.uids[CFG_ROLE_ADMIN].n +
	    c->control.gids[CFG_ROLE_ADMIN].n + c->control.uids[CFG_ROLE_APP].n +
	    c->control.gids[CFG_ROLE_APP].n +
	    c->control.uids[CFG_ROLE_AUDITOR].n +
	    c->control.gids[CFG_ROLE_AUDITOR].n, 0);
	assert_null(c->control.tcp);
	assert_null(c->control.tls_cert);
	assert_null(c->control.tls_key);
	assert_null(c->control.client_ca);
	assert_int_equal(c->control.ntokens, 0);
	assert_int_equal(c->control.max_body, 65536);
	assert_int_equal(c->control.max_conns, 64);
	assert_int_equal(c->control.max_conns_per_peer, 8);
	assert_int_equal(c->control.head_timeout_ms, 10000);
	cfg_free(c);

	/* An empty object is the same configuration as no file. */
	c = load("{}", err, sizeof(err));
	assert_non_null(c);
	assert_string_equal(c->runtime_dir, "/run/sluice");
	assert_int_equal(c->max_conns_total, 4096);
	assert_string_equal(c->control.socket, "/run/sluice/control.sock");
	cfg_free(c);

	/* The default control socket follows runtime_dir, before or after. */
	c = load("{\"control\": {\"max_body\": 2048}, "
	    "\"runtime_dir\": \"/tmp/rd\"}", err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	assert_string_equal(c->control.socket, "/tmp/rd/control.sock");
	assert_int_equal(c->control.max_body, 2048);
	cfg_free(c);
}

static void
test_example(void **state)
{
	char err[256] = "";
	struct cfg *c = load(example, err, sizeof(err));

	(void)state;
	if (c == NULL)
		fail_msg("%s", err);
	assert_int_equal(c->ceiling, POL_TIER_OFF);
	assert_int_equal(c->ntenants, 1);
	assert_string_equal(c->tenants[0].name, "acme");
	assert_int_equal(c->tenants[0].ceiling, POL_TIER_REGISTRIES);
	assert_int_equal(c->nlisten_tcp, 1);
	assert_string_equal(c->listen_tcp[0], "127.0.0.1:3128");
	assert_int_equal(c->vsock_port, 3128);
	assert_int_equal(c->nsessions, 3);
	assert_string_equal(c->sessions[0].id, "chat-1");
	assert_string_equal(c->sessions[0].tenant, "acme");
	assert_string_equal(c->sessions[0].user, "alice");
	assert_int_equal(c->sessions[0].tier, POL_TIER_REGISTRIES);
	assert_string_equal(c->sessions[0].socket, "/path/proxy.sock");
	assert_null(c->sessions[0].source);
	assert_int_equal(c->sessions[0].vsock_cid, -1);
	assert_string_equal(c->sessions[1].tenant, "");
	assert_string_equal(c->sessions[1].user, "");
	assert_int_equal(c->sessions[1].tier, POL_TIER_PUBLIC);
	assert_string_equal(c->sessions[1].source, "127.0.0.1");
	assert_int_equal(c->sessions[1].source_addr.family, AF_INET);
	assert_null(c->sessions[1].socket);
	assert_int_equal(c->sessions[2].vsock_cid, 7);
	assert_int_equal(c->sessions[2].tier, POL_TIER_OFF);
	assert_false(c->registries_default);
	assert_int_equal(c->nregistries, 3);
	assert_string_equal(c->registries[2], "*.crates.io");
	assert_int_equal(c->ndns_servers, 1);
	assert_string_equal(c->dns_servers[0], "127.0.0.1:5353");
	assert_int_equal(c->ndns_hosts, 1);
	assert_string_equal(c->dns_hosts[0].name, "pypi.org");
	assert_int_equal(c->dns_hosts[0].naddrs, 1);
	assert_int_equal(c->dns_hosts[0].addrs[0].a[0], 127);
	cfg_free(c);
}

static void
test_full(void **state)
{
	char err[256] = "", buf[64];
	struct cfg *c = load(full, err, sizeof(err));

	(void)state;
	if (c == NULL)
		fail_msg("%s", err);
	assert_string_equal(c->runtime_dir, "/tmp/sluice-test");
	assert_int_equal(c->ceiling, POL_TIER_PUBLIC);
	assert_int_equal(c->ntenants, 2);
	assert_string_equal(c->tenants[1].name, "beta.corp");
	assert_int_equal(c->socket_mode, 0600);
	assert_string_equal(c->socket_group, "sluice");
	assert_int_equal(c->nsocket_prefixes, 2);
	assert_string_equal(c->socket_prefixes[0], "/run/vm");
	assert_string_equal(c->socket_prefixes[1], "/srv/fc/jail");
	/* Sources are kept in canonical form. */
	assert_string_equal(c->sessions[0].source, "::ffff:127.0.0.1");
	assert_string_equal(c->dns_hosts[0].name, "mirror.example");
	assert_int_equal(c->dns_hosts[0].naddrs, 2);
	assert_string_equal(pol_addr_format(&c->dns_hosts[0].addrs[1], buf,
	    sizeof(buf)), "::1");
	assert_int_equal(c->nports_public, 3);
	assert_int_equal(c->ports_public[2], 8080);
	assert_int_equal(c->max_head, 16384);
	assert_int_equal(c->tunnel_buffer, 65536);
	assert_int_equal(c->max_grants_per_session, 16);
	assert_int_equal(c->max_refusals_per_conn, 5);
	assert_int_equal(c->log_refusals_per_s, 0);
	assert_int_equal(c->log_refusal_burst, 7);
	assert_int_equal(c->log_min_free_bytes, 1048576);
	assert_string_equal(c->log_mac_key_file, "/etc/s/log.key");
	assert_int_equal(c->drain_timeout_s, 2);
	assert_string_equal(c->state_file, "/tmp/sluice-test/state.json");
	assert_string_equal(c->control.socket, "/tmp/sluice-test/ctl.sock");
	assert_int_equal(c->control.socket_mode, 0600);
	assert_string_equal(c->control.socket_group, "wheel");
	assert_int_equal(c->control.uids[CFG_ROLE_ADMIN].n, 1);
	assert_int_equal(c->control.uids[CFG_ROLE_ADMIN].ids[0], 1000);
	assert_int_equal(c->control.gids[CFG_ROLE_ADMIN].n, 2);
	assert_int_equal(c->control.gids[CFG_ROLE_ADMIN].ids[1], 11);
	assert_int_equal(c->control.uids[CFG_ROLE_APP].ids[0], 1001);
	assert_int_equal(c->control.gids[CFG_ROLE_APP].n, 0);
	assert_int_equal(c->control.uids[CFG_ROLE_AUDITOR].ids[1], 4294967294u);
	assert_int_equal(c->control.gids[CFG_ROLE_AUDITOR].ids[0], 12);
	assert_string_equal(c->control.tcp, "127.0.0.1:9443");
	assert_string_equal(c->control.tls_cert, "/etc/s/c.pem");
	assert_string_equal(c->control.tls_key, "/etc/s/k.pem");
	assert_string_equal(c->control.client_ca, "/etc/s/ca.pem");
	assert_int_equal(c->control.ntokens, 2);
	assert_string_equal(c->control.tokens[1].name, "chat");
	assert_int_equal(c->control.tokens[1].role, CFG_ROLE_APP);
	assert_int_equal(c->control.tokens[0].role, CFG_ROLE_ADMIN);
	assert_string_equal(c->control.tokens[0].token_file,
	    "/etc/s/ops.token");
	assert_int_equal(c->control.max_body, 4096);
	assert_int_equal(c->control.max_conns, 16);
	assert_int_equal(c->control.max_conns_per_peer, 2);
	assert_int_equal(c->control.head_timeout_ms, 3000);
	assert_int_equal(c->max_conns_per_tenant, 32);
	assert_int_equal(c->pressure_pct, 90);
	assert_int_equal(c->fd_reserve, 0);
	assert_string_equal(cfg_role_name(CFG_ROLE_AUDITOR), "auditor");
	assert_int_equal(c->sni_check, 0);
	assert_int_equal(c->sni_timeout_ms, 1000);
	assert_int_equal(c->allow_ech, 1);
	assert_int_equal(c->nplain_ports, 2);
	assert_int_equal(c->plain_ports[0], 80);
	assert_int_equal(c->plain_ports[1], 8080);
	assert_int_equal(c->prompt_deny_quiet_s, 0);
	assert_int_equal(c->events_ring, 16);
	assert_int_equal(c->events_max_pending, 4096);
	assert_int_equal(c->events_heartbeat_s, 3600);
	/* The URL is kept as given and split into canonical parts. */
	assert_string_equal(c->webhook.url,
	    "HTTPS://Hooks.Example:8443/sluice?x=1");
	assert_string_equal(c->webhook.host, "hooks.example");
	assert_int_equal(c->webhook.port, 8443);
	assert_string_equal(c->webhook.path, "/sluice?x=1");
	assert_string_equal(c->webhook.secret_file, "/etc/s/hook.secret");
	assert_string_equal(c->webhook.ca_file, "/etc/s/hook-ca.pem");
	assert_int_equal(c->webhook.timeout_ms, 750);
	assert_int_equal(c->webhook.nhosts, 1);
	assert_string_equal(c->webhook.hosts[0].name, "hooks.example");
	assert_int_equal(c->webhook.hosts[0].naddrs, 2);
	assert_string_equal(pol_addr_format(&c->webhook.hosts[0].addrs[1], buf,
	    sizeof(buf)), "::1");
	cfg_free(c);

	/* The integer spelling of a mode. */
	c = load("{\"listen\": {\"socket_mode\": 416}}", err, sizeof(err));
	assert_non_null(c);
	assert_int_equal(c->socket_mode, 0640);
	cfg_free(c);
}

#define LONG100 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

struct err_case {
	const char *what;
	const char *text;
	const char *prefix;   /* "t.json:LINE:COL: PATH: " */
	const char *message;  /* a substring of the rest */
};

static const struct err_case err_cases[] = {
	{ "syntax error",
	  "{\n  \"ceiling\": \"off\",\n  \"log\": {\"path\": }\n}",
	  "t.json:3:19: log.path: ", "unexpected token" },
	{ "syntax error in an array",
	  "{\"deny_hosts\": [\"a.example\",, \"b\"]}",
	  "t.json:1:29: deny_hosts[1]: ", "unexpected token" },
	{ "empty input", "", "t.json:1:1: (root): ", "expected" },
	{ "not an object", "[1]", "t.json:1:1: (root): ", "expected an object" },
	{ "unknown key at depth",
	  "{\"dns\": {\"timeout_ms\": 5,\n  \"bogus\": 1}}",
	  "t.json:2:3: dns.bogus: ", "unknown key" },
	{ "unknown top key", "{\"celing\": \"off\"}",
	  "t.json:1:2: celing: ", "unknown key" },
	{ "wrong type", "{\"dns\": {\"timeout_ms\": \"5\"}}",
	  "t.json:1:24: dns.timeout_ms: ", "expected an integer" },
	{ "real for an integer", "{\"prompt\": {\"timeout_s\": 1.5}}",
	  "t.json:1:26: prompt.timeout_s: ", "expected an integer" },
	{ "events ring too small", "{\"events\": {\"ring\": 15}}",
	  "t.json:1:21: events.ring: ", "out of range" },
	{ "events ring too large", "{\"events\": {\"ring\": 100001}}",
	  "t.json:1:21: events.ring: ", "out of range" },
	{ "events max_pending too small",
	  "{\"events\": {\"max_pending\": 4095}}",
	  "t.json:1:28: events.max_pending: ", "out of range" },
	{ "events max_pending too large",
	  "{\"events\": {\"max_pending\": 67108865}}",
	  "t.json:1:28: events.max_pending: ", "out of range" },
	{ "events heartbeat zero", "{\"events\": {\"heartbeat_s\": 0}}",
	  "t.json:1:28: events.heartbeat_s: ", "out of range" },
	{ "events heartbeat too long",
	  "{\"events\": {\"heartbeat_s\": 3601}}",
	  "t.json:1:28: events.heartbeat_s: ", "out of range" },
	{ "events heartbeat as string",
	  "{\"events\": {\"heartbeat_s\": \"15\"}}",
	  "t.json:1:28: events.heartbeat_s: ", "expected an integer" },
	{ "events unknown key", "{\"events\": {\"size\": 5}}",
	  "t.json:1:13: events.size: ", "unknown key" },
	{ "object for a section", "{\"limits\": []}",
	  "t.json:1:12: limits: ", "expected an object" },
	{ "bool as string", "{\"tls\": {\"sni_check\": \"yes\"}}",
	  "t.json:1:23: tls.sni_check: ", "expected true or false" },
	{ "allow_ech as number", "{\"tls\": {\"allow_ech\": 1}}",
	  "t.json:1:23: tls.allow_ech: ", "expected true or false" },
	{ "plain port zero", "{\"tls\": {\"plain_http_ports\": [80, 0]}}",
	  "t.json:1:35: tls.plain_http_ports[1]: ", "out of range" },
	{ "port out of range",
	  "{\"ports\": {\"public\": [443,\n    70000]}}",
	  "t.json:2:5: ports.public[1]: ", "out of range" },
	{ "port zero", "{\"ports\": {\"registries\": [0]}}",
	  "t.json:1:27: ports.registries[0]: ", "out of range" },
	{ "bad tier",
	  "{\"tenants\": {\"acme\": {\"ceiling\": \"full\"}}}",
	  "t.json:1:34: tenants.acme.ceiling: ", "unknown tier" },
	{ "bad session tier",
	  "{\"sessions\": [{\"id\": \"a\", \"tier\": \"Public\"}]}",
	  "t.json:1:35: sessions[0].tier: ", "unknown tier" },
	{ "bad CIDR",
	  "{\"deny_cidrs\": [\"10.0.0.0/8\", \"10.0.0.0/33\"]}",
	  "t.json:1:31: deny_cidrs[1]: ", "bad CIDR" },
	{ "bad allow CIDR", "{\"allow_cidrs\": [\"127.1/8\"]}",
	  "t.json:1:18: allow_cidrs[0]: ", "bad CIDR" },
	{ "bad host pattern",
	  "{\"deny_hosts\": [\"ok.example\", \"bad host\"]}",
	  "t.json:1:31: deny_hosts[1]: ", "bad host pattern" },
	{ "bad registry", "{\"registries\": [\"pypi.org\", \"\"]}",
	  "t.json:1:29: registries[1]: ", "bad registry pattern" },
	{ "duplicate session id",
	  "{\"sessions\": [\n {\"id\": \"a\"},\n {\"id\": \"a\"}]}",
	  "t.json:3:9: sessions[1].id: ", "duplicate session id" },
	{ "two transports",
	  "{\"sessions\": [{\"id\": \"a\", \"source\": \"127.0.0.1\", \"vsock_cid\": 7}]}",
	  "t.json:1:50: sessions[0].vsock_cid: ", "at most one" },
	{ "duplicate key",
	  "{\"dns\": {\"timeout_ms\": 1,\n \"timeout_ms\": 2}}",
	  "t.json:2:2: dns.timeout_ms: ", "duplicate object key" },
	{ "missing session id", "{\"sessions\": [{\"id\": \"a\"}, {}]}",
	  "t.json:1:28: sessions[1]: ", "missing key \"id\"" },
	{ "bad session id", "{\"sessions\": [{\"id\": \"a b\"}]}",
	  "t.json:1:22: sessions[0].id: ", "bad session id" },
	{ "duplicate source",
	  "{\"sessions\": [{\"id\": \"a\", \"source\": \"127.0.0.1\"},\n"
	  "{\"id\": \"b\", \"source\": \"127.0.0.1\"}]}",
	  "t.json:2:23: sessions[1].source: ", "already belongs to sessions[0]" },
	{ "duplicate vsock cid",
	  "{\"sessions\": [{\"id\": \"a\", \"vsock_cid\": 9},\n"
	  "{\"id\": \"b\", \"vsock_cid\": 9}]}",
	  "t.json:2:26: sessions[1].vsock_cid: ", "already belongs" },
	{ "duplicate socket",
	  "{\"sessions\": [{\"id\": \"a\", \"socket\": \"/s\"},\n"
	  "{\"id\": \"b\", \"socket\": \"/s\"}]}",
	  "t.json:2:23: sessions[1].socket: ", "already belongs" },
	{ "host vsock cid", "{\"sessions\": [{\"id\": \"a\", \"vsock_cid\": 2}]}",
	  "t.json:1:40: sessions[0].vsock_cid: ", "host's own CID" },
	{ "hypervisor vsock cid", "{\"sessions\": [{\"id\": \"a\", \"vsock_cid\": 0}]}",
	  "t.json:1:40: sessions[0].vsock_cid: ", "out of range" },
	{ "bad source", "{\"sessions\": [{\"id\": \"a\", \"source\": \"127.1\"}]}",
	  "t.json:1:37: sessions[0].source: ", "bad source address" },
	{ "relative socket", "{\"sessions\": [{\"id\": \"a\", \"socket\": \"x\"}]}",
	  "t.json:1:37: sessions[0].socket: ", "absolute path" },
	{ "tenant without ceiling", "{\"tenants\": {\"acme\": {}}}",
	  "t.json:1:22: tenants.acme: ", "missing key \"ceiling\"" },
	{ "bad tenant name", "{\"tenants\": {\"a/b\": {\"ceiling\": \"off\"}}}",
	  "t.json:1:14: tenants[\"a/b\"]: ", "bad tenant name" },
	{ "bad listen address", "{\"listen\": {\"tcp\": [\"localhost:3128\"]}}",
	  "t.json:1:21: listen.tcp[0]: ", "bad listen address" },
	{ "bad socket mode", "{\"listen\": {\"socket_mode\": \"0999\"}}",
	  "t.json:1:28: listen.socket_mode: ", "octal" },
	{ "decimal socket mode", "{\"listen\": {\"socket_mode\": 660}}",
	  "t.json:1:28: listen.socket_mode: ", "out of range" },
	{ "socket prefixes not a list",
	  "{\"listen\": {\"socket_prefixes\": \"/run/vm\"}}",
	  "t.json:1:32: listen.socket_prefixes: ", "array of strings" },
	{ "relative socket prefix",
	  "{\"listen\": {\"socket_prefixes\": [\"/run/vm\", \"vm\"]}}",
	  "t.json:1:44: listen.socket_prefixes[1]: ", "absolute" },
	{ "socket prefix with ..",
	  "{\"listen\": {\"socket_prefixes\": [\"/run/../etc\"]}}",
	  "t.json:1:33: listen.socket_prefixes[0]: ", "\"..\"" },
	{ "socket prefix with a trailing slash",
	  "{\"listen\": {\"socket_prefixes\": [\"/run/vm/\"]}}",
	  "t.json:1:33: listen.socket_prefixes[0]: ", "empty path component" },
	{ "socket prefix /",
	  "{\"listen\": {\"socket_prefixes\": [\"/\"]}}",
	  "t.json:1:33: listen.socket_prefixes[0]: ", "every path" },
	{ "session socket with .",
	  "{\"sessions\": [{\"id\": \"a\", \"socket\": \"/run/./a.sock\"}]}",
	  "t.json:1:37: sessions[0].socket: ", "\"..\"" },
	{ "control socket with ..",
	  "{\"control\": {\"socket\": \"/run/x/../ctl.sock\"}}",
	  "t.json:1:24: control.socket: ", "\"..\"" },
	{ "session id with a leading dot",
	  "{\"sessions\": [{\"id\": \".a\"}]}",
	  "t.json:1:22: sessions[0].id: ", "not starting with a dot" },
	{ "bad dns server", "{\"dns\": {\"servers\": [\"1.2.3.4:0\"]}}",
	  "t.json:1:22: dns.servers[0]: ", "bad DNS server" },
	{ "bad dns host name", "{\"dns\": {\"hosts\": {\"1.2.3.4\": [\"1.2.3.4\"]}}}",
	  "t.json:1:20: dns.hosts[\"1.2.3.4\"]: ", "bad host name" },
	{ "escaped key on the path",
	  "{\"dns\": {\"hosts\": {\"a.example\": [\"1.2.3.4\"], "
	  "\"b\\u002eexample\": [\"1.2.3.4\", \"nope\"]}}}",
	  "t.json:1:76: dns.hosts[\"b.example\"][1]: ", "bad address" },
	{ "columns count characters",
	  "{\"log\": {\"path\": \"/tmp/\xc3\xa9\"}, \"ceiling\": \"x\"}",
	  "t.json:1:40: ceiling: ", "unknown tier" },
	{ "empty log path", "{\"log\": {\"path\": \"\"}}",
	  "t.json:1:18: log.path: ", "must not be empty" },
	{ "limit out of range", "{\"limits\": {\"max_headers\": 0}}",
	  "t.json:1:28: limits.max_headers: ", "out of range" },
	{ "a bucket that holds nothing",
	  "{\"log\": {\"refusal_burst\": 0}}",
	  "t.json:1:27: log.refusal_burst: ", "out of range" },
	{ "a negative refusal rate",
	  "{\"log\": {\"refusals_per_s\": -1}}",
	  "t.json:1:28: log.refusals_per_s: ", "out of range" },
	{ "negative free bytes",
	  "{\"log\": {\"min_free_bytes\": -5}}",
	  "t.json:1:28: log.min_free_bytes: ", "out of range" },
	{ "no refusal per connection",
	  "{\"limits\": {\"max_refusals_per_conn\": 0}}",
	  "t.json:1:38: limits.max_refusals_per_conn: ", "out of range" },
	{ "a key file that is not a string",
	  "{\"log\": {\"mac_key_file\": 7}}",
	  "t.json:1:26: log.mac_key_file: ", "expected" },
	{ "no grants at all",
	  "{\"limits\": {\"max_grants_per_session\": 0}}",
	  "t.json:1:39: limits.max_grants_per_session: ", "out of range" },
	{ "an explicit max_line above max_head",
	  "{\"limits\": {\"max_head\": 1024, \"max_line\": 2048}}",
	  "t.json:1:43: limits.max_line: ", "exceeds limits.max_head" },
	{ "DESIGN.md session with every transport",
	  "{\"sessions\": [ { \"id\": \"chat-1\", \"tenant\": \"acme\", "
	  "\"user\": \"alice\", \"tier\": \"registries\", "
	  "\"socket\": \"/path/proxy.sock\", \"source\": \"127.0.0.1\", "
	  "\"vsock_cid\": 7 } ]}",
	  "t.json:1:121: sessions[0].source: ", "at most one" },
	{ "unknown control key", "{\"control\": {\"sockets\": 1}}",
	  "t.json:1:14: control.sockets: ", "unknown key" },
	{ "relative control socket", "{\"control\": {\"socket\": \"c.sock\"}}",
	  "t.json:1:24: control.socket: ", "absolute path" },
	{ "bad control socket mode",
	  "{\"control\": {\"socket_mode\": \"rw\"}}",
	  "t.json:1:29: control.socket_mode: ", "octal" },
	{ "control socket group type",
	  "{\"control\": {\"socket_group\": 5}}",
	  "t.json:1:30: control.socket_group: ", "group name or null" },
	{ "uid list type", "{\"control\": {\"app_uids\": 1000}}",
	  "t.json:1:26: control.app_uids: ", "array of numeric ids" },
	{ "uid out of range", "{\"control\": {\"admin_uids\": [1, -1]}}",
	  "t.json:1:32: control.admin_uids[1]: ", "out of range" },
	{ "gid as a name", "{\"control\": {\"auditor_gids\": [\"adm\"]}}",
	  "t.json:1:31: control.auditor_gids[0]: ", "expected an integer" },
	{ "control tcp by name", "{\"control\": {\"tcp\": \"localhost:1\"}}",
	  "t.json:1:21: control.tcp: ", "bad listen address" },
	{ "control tcp without tls",
	  "{\"control\": {\"tcp\": \"127.0.0.1:9443\"}}",
	  "t.json:1:21: control.tcp: ", "TLS only" },
	{ "control tcp without tokens",
	  "{\"control\": {\"tcp\": \"127.0.0.1:9443\", \"tls_cert\": \"/c\", "
	  "\"tls_key\": \"/k\"}}",
	  "t.json:1:21: control.tcp: ", "no control.tokens" },
	{ "token without a file",
	  "{\"control\": {\"tokens\": [{\"name\": \"a\", \"role\": \"app\"}]}}",
	  "t.json:1:25: control.tokens[0]: ", "missing key \"token_file\"" },
	{ "token role", "{\"control\": {\"tokens\": [{\"role\": \"root\"}]}}",
	  "t.json:1:34: control.tokens[0].role: ", "unknown role" },
	{ "token name", "{\"control\": {\"tokens\": [{\"name\": \"a b\"}]}}",
	  "t.json:1:34: control.tokens[0].name: ", "bad token name" },
	{ "duplicate token name",
	  "{\"control\": {\"tokens\": [{\"name\": \"a\", \"role\": \"app\", "
	  "\"token_file\": \"/t\"}, {\"name\": \"a\"}]}}",
	  "t.json:1:84: control.tokens[1].name: ", "duplicate token name" },
	{ "unknown token key",
	  "{\"control\": {\"tokens\": [{\"token\": \"secret\"}]}}",
	  "t.json:1:26: control.tokens[0].token: ", "unknown key" },
	{ "max_body too small", "{\"control\": {\"max_body\": 10}}",
	  "t.json:1:26: control.max_body: ", "out of range" },
	{ "control max_conns zero", "{\"control\": {\"max_conns\": 0}}",
	  "t.json:1:27: control.max_conns: ", "out of range" },
	{ "control max_conns_per_peer zero",
	  "{\"control\": {\"max_conns_per_peer\": 0}}",
	  "t.json:1:36: control.max_conns_per_peer: ", "out of range" },
	{ "control head_timeout_ms too short",
	  "{\"control\": {\"head_timeout_ms\": 10}}",
	  "t.json:1:33: control.head_timeout_ms: ", "out of range" },
	{ "pressure_pct over 100", "{\"limits\": {\"pressure_pct\": 101}}",
	  "t.json:1:29: limits.pressure_pct: ", "out of range" },
	{ "max_conns_per_tenant zero",
	  "{\"limits\": {\"max_conns_per_tenant\": 0}}",
	  "t.json:1:37: limits.max_conns_per_tenant: ", "out of range" },
	{ "fd_reserve negative", "{\"limits\": {\"fd_reserve\": -1}}",
	  "t.json:1:27: limits.fd_reserve: ", "out of range" },
	{ "webhook over plain http",
	  "{\"webhook\": {\"url\": \"http://hooks.example/\", "
	  "\"secret_file\": \"/s\"}}",
	  "t.json:1:21: webhook.url: ", "not an https:// URL" },
	{ "webhook url with a user",
	  "{\"webhook\": {\"url\": \"https://u:p@hooks.example/\"}}",
	  "t.json:1:21: webhook.url: ", "no user name" },
	{ "webhook url with a bad port",
	  "{\"webhook\": {\"url\": \"https://hooks.example:0/\"}}",
	  "t.json:1:21: webhook.url: ", "bad host or port" },
	{ "webhook url with a space",
	  "{\"webhook\": {\"url\": \"https://hooks.example/a b\"}}",
	  "t.json:1:21: webhook.url: ", "printable" },
	{ "webhook url with a fragment",
	  "{\"webhook\": {\"url\": \"https://hooks.example/#x\"}}",
	  "t.json:1:21: webhook.url: ", "fragment" },
	{ "webhook without a secret",
	  "{\"webhook\": {\"url\": \"https://hooks.example/\"}}",
	  "t.json:1:21: webhook.url: ", "webhook.secret_file" },
	{ "webhook timeout", "{\"webhook\": {\"timeout_ms\": 0}}",
	  "t.json:1:28: webhook.timeout_ms: ", "out of range" },
	{ "webhook host map address",
	  "{\"webhook\": {\"hosts\": {\"h.example\": [\"h\"]}}}",
	  "t.json:1:38: webhook.hosts[\"h.example\"][0]: ", "bad address" },
	{ "webhook unknown key", "{\"webhook\": {\"secret\": \"x\"}}",
	  "t.json:1:14: webhook.secret: ", "unknown key" },
	{ "user name", "{\"user\": \"9sluice\"}",
	  "t.json:1:10: user: ", "bad user name" },
	{ "user name with a slash", "{\"user\": \"../root\"}",
	  "t.json:1:10: user: ", "bad user name" },
	{ "user type", "{\"user\": 0}",
	  "t.json:1:10: user: ", "expected" },
	{ "firewall table name",
	  "{\"firewall\": {\"table\": \"1abc\"}}",
	  "t.json:1:24: firewall.table: ", "bad table name" },
	{ "firewall table name too long",
	  "{\"firewall\": {\"table\": \"" "abcdefghijabcdefghijabcdefghijab" "\"}}",
	  "t.json:1:24: firewall.table: ", "bad table name" },
	{ "firewall uid", "{\"firewall\": {\"uid\": -1}}",
	  "t.json:1:22: firewall.uid: ", "out of range" },
	{ "firewall uid type", "{\"firewall\": {\"uid\": \"root\"}}",
	  "t.json:1:22: firewall.uid: ", "expected" },
	{ "firewall enabled type", "{\"firewall\": {\"enabled\": 1}}",
	  "t.json:1:26: firewall.enabled: ", "expected" },
	{ "firewall subnet host bits",
	  "{\"firewall\": {\"sandbox_subnets\": [\"10.0.0.1/8\"],"
	  " \"broker_ports\": [3128]}}",
	  "t.json:1:35: firewall.sandbox_subnets[0]: ", "host bits" },
	{ "firewall subnet without prefix",
	  "{\"firewall\": {\"sandbox_subnets\": [\"10.0.0.0\"]}}",
	  "t.json:1:35: firewall.sandbox_subnets[0]: ", "bad subnet" },
	{ "firewall subnet prefix",
	  "{\"firewall\": {\"sandbox_subnets\": [\"fd00::/129\"]}}",
	  "t.json:1:35: firewall.sandbox_subnets[0]: ", "bad subnet" },
	{ "firewall port", "{\"firewall\": {\"broker_ports\": [0]}}",
	  "t.json:1:32: firewall.broker_ports[0]: ", "out of range" },
	{ "firewall subnets without ports",
	  "{\"firewall\": {\"sandbox_subnets\": [\"10.0.0.0/8\"]}}",
	  "t.json:1:14: firewall.broker_ports: ", "broker's ports" },
	{ "firewall interface too long",
	  "{\"firewall\": {\"sandbox_interfaces\": [\"eth0\", "
	  "\"x234567890123456\"], \"broker_ports\": [3128]}}",
	  "t.json:1:46: firewall.sandbox_interfaces[1]: ", "1 to 15 bytes" },
	{ "firewall interface wildcard inside",
	  "{\"firewall\": {\"sandbox_interfaces\": [\"ta*p\"]}}",
	  "t.json:1:38: firewall.sandbox_interfaces[0]: ", "'*'" },
	{ "firewall interface bare wildcard",
	  "{\"firewall\": {\"sandbox_interfaces\": [\"*\"]}}",
	  "t.json:1:38: firewall.sandbox_interfaces[0]: ", "not an interface" },
	{ "firewall interface slash",
	  "{\"firewall\": {\"sandbox_interfaces\": [\"a/b\"]}}",
	  "t.json:1:38: firewall.sandbox_interfaces[0]: ", "printable ASCII" },
	{ "firewall interfaces without ports",
	  "{\"firewall\": {\"sandbox_interfaces\": [\"tap0\"]}}",
	  "t.json:1:14: firewall.broker_ports: ", "sandbox_interfaces need" },
	{ "firewall unknown key", "{\"firewall\": {\"owner\": true}}",
	  "t.json:1:15: firewall.owner: ", "unknown key" },
	{ "default control socket too long",
	  "{\"runtime_dir\": \"/" LONG100 LONG100 "\"}",
	  "t.json:1:17: runtime_dir: ", "control socket" },
};

#undef LONG100
static void
test_errors(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(err_cases) / sizeof(err_cases[0]); i++) {
		const struct err_case *e = &err_cases[i];
		char err[512] = "";
		struct cfg *c = load(e->text, err, sizeof(err));

		if (c != NULL) {
			cfg_free(c);
			fail_msg("%s: accepted", e->what);
		}
		if (strncmp(err, e->prefix, strlen(e->prefix)) != 0 ||
		    strstr(err + strlen(e->prefix), e->message) == NULL)
			fail_msg("%s: got \"%s\", want \"%s...%s...\"", e->what,
			    err, e->prefix, e->message);
	}
}

/* Error texts stay printable whatever the input holds. */
static void
test_error_printable(void **state)
{
	static const char text[] = "{\"tenants\": {\"a\\u0001\\n\": 1}}";
	char err[512] = "";
	struct cfg *c;
	size_t i;

	(void)state;
	c = load(text, err, sizeof(err));
	assert_null(c);
	assert_non_null(strstr(err, "tenants[\"a??\"]"));
	for (i = 0; err[i] != '\0'; i++)
		assert_true(err[i] >= 0x20 && err[i] < 0x7f);

	/* A message is cut to the buffer, still terminated. */
	memset(err, 'x', sizeof(err));
	assert_null(cfg_load_buffer("{\"x\": 1}", 8, "t.json", err, 10));
	assert_int_equal(strlen(err), 9);
	/* No buffer at all is fine. */
	assert_null(cfg_load_buffer("{\"x\": 1}", 8, "t.json", NULL, 0));
	/* Bytes after the given length are not read. */
	c = cfg_load_buffer("{}garbage", 2, "t.json", err, sizeof(err));
	assert_non_null(c);
	cfg_free(c);
}

/* Object o of a dump has exactly the keys of the rows keys, and so on
 * down (objects, and each tenant's and token's object). */
static void
dump_has_rows(json_t *o, const struct cfg_key *keys, const char *at)
{
	const struct cfg_key *k;
	const char *name;
	json_t *v, *e;
	char sub[160];
	size_t n = 0, i;

	if (!json_is_object(o))
		fail_msg("%s: not an object in the dump", at);
	for (k = keys; k->name != NULL; k++, n++) {
		snprintf(sub, sizeof(sub), "%s%s%s", at, *at ? "." : "",
		    k->name);
		if ((v = json_object_get(o, k->name)) == NULL)
			fail_msg("%s: a row, not in the dump", sub);
		if (k->kind == K_OBJ)
			dump_has_rows(v, k->sub, sub);
		if (k->kind == K_TENANTS)
			json_object_foreach(v, name, e)
				dump_has_rows(e, k->sub, sub);
		if (k->kind == K_TOKENS)
			for (i = 0; i < json_array_size(v); i++)
				dump_has_rows(json_array_get(v, i), k->sub, sub);
	}
	if (json_object_size(o) != n)
		json_object_foreach(o, name, v) {
			for (k = keys; k->name != NULL; k++)
				if (strcmp(k->name, name) == 0)
					break;
			if (k->name == NULL)
				fail_msg("%s%s%s: in the dump, not a row", at,
				    *at ? "." : "", name);
		}
}

static void
round_trip(const char *text)
{
	char err[512] = "";
	struct cfg *a, *b;
	char *da, *db;
	json_t *j;

	a = text != NULL ? load(text, err, sizeof(err)) :
	    cfg_load(NULL, err, sizeof(err));
	if (a == NULL)
		fail_msg("%s", err);
	da = cfg_dump(a);
	assert_non_null(da);
	b = cfg_load_buffer(da, strlen(da), "dump", err, sizeof(err));
	if (b == NULL)
		fail_msg("dump not accepted: %s\n%s", err, da);
	db = cfg_dump(b);
	assert_non_null(db);
	assert_string_equal(da, db);

	/* The dump names every key the schema has, defaults included,
	 * and nothing else. */
	j = json_loads(da, 0, NULL);
	assert_non_null(j);
	dump_has_rows(j, cfg_root_keys, "");
	json_decref(j);

	assert_int_equal(b->nsessions, a->nsessions);
	assert_int_equal(b->registries_default, a->registries_default);
	assert_int_equal(b->socket_mode, a->socket_mode);
	assert_int_equal(b->nsocket_prefixes, a->nsocket_prefixes);
	assert_string_equal(b->control.socket, a->control.socket);
	assert_int_equal(b->control.ntokens, a->control.ntokens);
	assert_int_equal(b->control.max_body, a->control.max_body);
	assert_int_equal(b->events_ring, a->events_ring);
	assert_int_equal(b->events_max_pending, a->events_max_pending);
	assert_int_equal(b->events_heartbeat_s, a->events_heartbeat_s);
	cfg_free(a);
	cfg_free(b);
	free(da);
	free(db);
}

/* A max_line left at its default follows a smaller max_head. */
static void
test_max_line_follows_head(void **state)
{
	char err[512];
	const char *t = "{\"limits\": {\"max_head\": 1024}}";
	struct cfg *c = cfg_load_buffer(t, strlen(t), "t.json", err,
	    sizeof(err));

	(void)state;
	if (c == NULL)
		fail_msg("%s", err);
	assert_int_equal(c->max_head, 1024);
	assert_int_equal(c->max_line, 1024);
	cfg_free(c);
}

static void
test_dump_round_trip(void **state)
{
	char err[256];
	struct cfg *c;
	char *d;

	(void)state;
	round_trip(NULL);
	round_trip(example);
	round_trip(full);

	/* Defaults appear filled in; the built-in registry list as null. */
	c = cfg_load(NULL, err, sizeof(err));
	assert_non_null(c);
	d = cfg_dump(c);
	assert_non_null(d);
	assert_non_null(strstr(d, "\"registries\": null"));
	assert_non_null(strstr(d, "\"socket_mode\": \"0660\""));
	assert_non_null(strstr(d, "\"socket_prefixes\": []"));
	assert_non_null(strstr(d, "\"max_conns_total\": 4096"));
	assert_non_null(strstr(d, "\"sni_check\": true"));
	assert_non_null(strstr(d, "\"allow_ech\": false"));
	assert_non_null(strstr(d, "\"plain_http_ports\": [\n      80\n    ]"));
	assert_non_null(strstr(d, "\"socket\": \"/run/sluice/control.sock\""));
	assert_non_null(strstr(d, "\"client_ca\": null"));
	assert_non_null(strstr(d, "\"max_body\": 65536"));
	assert_non_null(strstr(d, "\"url\": null"));
	assert_non_null(strstr(d, "\"timeout_ms\": 5000"));
	assert_non_null(strstr(d, "\"enabled\": false"));
	assert_non_null(strstr(d, "\"uid\": null"));
	assert_int_equal(d[strlen(d) - 1], '\n');
	free(d);
	cfg_free(c);
}

/* What the engine takes for granted of a row. */
static void
rows_check(const struct cfg_key *keys, int printed, const char *at)
{
	const struct cfg_key *k;
	char sub[160];
	size_t i;

	for (k = keys; k->name != NULL; k++) {
		snprintf(sub, sizeof(sub), "%s%s%s", at, *at ? "." : "",
		    k->name);
		switch (k->kind) {
		case K_ROLE:
		case K_OPT:
		case K_TENANTS:
		case K_SESSIONS:
		case K_REGISTRIES:
		case K_TOKENS:
		case K_FN:
			/* no reader of their own */
			if (k->fn == NULL)
				fail_msg("%s: kind %d needs fn", sub, k->kind);
			break;
		case K_INT:
		case K_SIZE:
			/* the default is a value the file could give */
			if (k->fn == NULL && (k->def < k->lo || k->def > k->hi))
				fail_msg("%s: default %lld outside %lld..%lld",
				    sub, k->def, k->lo, k->hi);
			break;
		case K_PORTS:
			for (i = 0; k->pdef != NULL && k->pdef[i] != 0; i++)
				assert_true(i < 64);
			break;
		default:
			break;
		}
		/* the dump walks these; a K_FN row only prints by hand */
		if (printed && k->kind == K_FN)
			fail_msg("%s: K_FN in a table the dump walks", sub);
		if (k->kind == K_OBJ || k->kind == K_TENANTS ||
		    k->kind == K_TOKENS) {
			if (k->sub == NULL)
				fail_msg("%s: no sub rows", sub);
			rows_check(k->sub, printed, sub);
		}
	}
}

static void
test_rows(void **state)
{
	(void)state;
	rows_check(cfg_root_keys, 1, "");
}

static void
test_firewall(void **state)
{
	char err[512] = "";
	struct cfg *c;

	(void)state;
	c = cfg_load(NULL, err, sizeof(err));
	assert_non_null(c);
	/* off by default: nothing changes for existing users */
	assert_int_equal(c->firewall.enabled, 0);
	assert_string_equal(c->firewall.table, "sluice");
	assert_int_equal(c->firewall.uid, -1);
	assert_int_equal(c->firewall.nsandbox_subnets, 0);
	assert_int_equal(c->firewall.nsandbox_interfaces, 0);
	assert_int_equal(c->firewall.nbroker_ports, 0);
	cfg_free(c);

	c = load(full, err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	assert_int_equal(c->firewall.enabled, 1);
	assert_string_equal(c->firewall.table, "sluice_t-1");
	assert_int_equal(c->firewall.uid, 4242);
	assert_int_equal(c->firewall.nsandbox_subnets, 2);
	assert_string_equal(c->firewall.sandbox_subnets[1], "fd77::/64");
	assert_int_equal(c->firewall.nsandbox_interfaces, 2);
	assert_string_equal(c->firewall.sandbox_interfaces[1], "tap*");
	assert_int_equal(c->firewall.nbroker_ports, 2);
	assert_int_equal(c->firewall.broker_ports[1], 3129);
	cfg_free(c);

	/* null is the default: no self guard */
	c = load("{\"firewall\": {\"uid\": null, \"table\": \"_x\"}}", err,
	    sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	assert_int_equal(c->firewall.uid, -1);
	assert_string_equal(c->firewall.table, "_x");
	cfg_free(c);
}

static void
test_transparent(void **state)
{
	char err[512] = "";
	struct cfg *c;

	(void)state;
	c = cfg_load(NULL, err, sizeof(err));
	assert_non_null(c);
	assert_int_equal(c->nlisten_transparent, 0);
	assert_int_equal(c->transparent_port, 0);
	cfg_free(c);

	c = load("{\"listen\": {\"transparent\": [\"0.0.0.0:3129\", "
	    "\"[::]:3129\"]}, \"firewall\": {\"sandbox_subnets\": "
	    "[\"10.200.0.0/24\"]}}", err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	/* the transparent port alone lets the sandboxes reach sluiced */
	assert_int_equal(c->nlisten_transparent, 2);
	assert_int_equal(c->transparent_port, 3129);
	cfg_free(c);

	/* one redirect target: every listener on the same port */
	c = load("{\"listen\": {\"transparent\": [\"0.0.0.0:3129\", "
	    "\"[::]:3130\"]}}", err, sizeof(err));
	assert_null(c);
	assert_non_null(strstr(err, "same port"));
	c = load("{\"listen\": {\"transparent\": [\"localhost:3129\"]}}",
	    err, sizeof(err));
	assert_null(c);
	assert_non_null(strstr(err, "bad listen address"));
}

static void
test_load_file(void **state)
{
	char path[] = "/tmp/test_config_XXXXXX";
	char err[512] = "";
	struct cfg *c;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, example, strlen(example)),
	    (ssize_t)strlen(example));
	close(fd);
	c = cfg_load(path, err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	assert_string_equal(c->source_path, path);
	assert_int_equal(c->nsessions, 3);
	cfg_free(c);

	/* Errors name the file. */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "{\n\"x\": 1}", 9), 9);
	close(fd);
	assert_null(cfg_load(path, err, sizeof(err)));
	assert_int_equal(strncmp(err, path, strlen(path)), 0);
	assert_non_null(strstr(err, ":2:1: x: unknown key"));
	unlink(path);

	assert_null(cfg_load(path, err, sizeof(err)));
	assert_int_equal(strncmp(err, path, strlen(path)), 0);
	assert_null(cfg_load("/", err, sizeof(err)));
}

static void
decide(const struct pol_config *p, struct pol_state *st,
    const struct pol_session *s, const char *host, uint16_t port,
    struct pol_decision *d)
{
	struct pol_target t;

	assert_int_equal(pol_host_parse(host, strlen(host), 0, &t),
	    POL_R_NONE);
	t.port = port;
	pol_decide(p, st, s, &t, d);
}

static void
test_build_policy(void **state)
{
	char err[256] = "";
	struct cfg *c;
	struct pol_config *p;
	struct pol_state *st;
	struct pol_session *s;
	struct pol_decision d;

	(void)state;
	c = cfg_load(NULL, err, sizeof(err));
	assert_non_null(c);
	p = cfg_build_policy(c, err, sizeof(err));
	if (p == NULL)
		fail_msg("%s", err);
	assert_true(pol_config_registry_count(p) > 3);
	st = pol_state_new();
	assert_non_null(st);
	pol_state_set_ceiling(st, POL_TIER_PUBLIC);
	s = pol_session_add(st, "x", NULL, NULL, POL_TIER_REGISTRIES);
	assert_non_null(s);
	decide(p, st, s, "pypi.org", 443, &d);
	assert_int_equal(d.verdict, POL_ALLOW);
	assert_int_equal(d.rule, POL_RULE_REGISTRIES);
	pol_config_free(p);
	cfg_free(c);

	c = load(example, err, sizeof(err));
	assert_non_null(c);
	p = cfg_build_policy(c, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(pol_config_registry_count(p), 3);
	decide(p, st, s, "files.pythonhosted.org", 80, &d);
	assert_int_equal(d.verdict, POL_ALLOW);
	decide(p, st, s, "registry.npmjs.org", 443, &d);
	assert_int_not_equal(d.verdict, POL_ALLOW);
	pol_config_free(p);
	cfg_free(c);

	c = load(full, err, sizeof(err));
	assert_non_null(c);
	p = cfg_build_policy(c, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(pol_config_registry_count(p), 2);
	/* registries admit only 443 here, so :80 needs the public ceiling
	 * and a prompt... */
	decide(p, st, s, "pypi.org", 80, &d);
	assert_int_equal(d.verdict, POL_PROMPT);
	decide(p, st, s, "pypi.org", 443, &d);
	assert_int_equal(d.verdict, POL_ALLOW);
	/* ...and the deny list wins over everything. */
	pol_session_set_tier(s, POL_TIER_PUBLIC);
	decide(p, st, s, "blocked.example", 443, &d);
	assert_int_equal(d.verdict, POL_DENY);
	assert_int_equal(d.reason, POL_R_ADMIN_DENY);
	decide(p, st, s, "a.evil.example", 8080, &d);
	assert_int_equal(d.reason, POL_R_ADMIN_DENY);
	decide(p, st, s, "fine.example", 8080, &d);
	assert_int_equal(d.verdict, POL_ALLOW);
	decide(p, st, s, "fine.example", 22, &d);
	assert_int_equal(d.reason, POL_R_PORT_NOT_ALLOWED);
	pol_config_free(p);
	cfg_free(c);
	pol_state_free(st);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_example),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_error_printable),
		cmocka_unit_test(test_max_line_follows_head),
		cmocka_unit_test(test_dump_round_trip),
		cmocka_unit_test(test_rows),
		cmocka_unit_test(test_firewall),
		cmocka_unit_test(test_transparent),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_build_policy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
