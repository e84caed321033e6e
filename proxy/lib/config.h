/*
 * config.h: sluiced's JSON configuration (sluiced.json(5)).
 *
 * Every key is optional and has an embedded default, so sluiced starts
 * with no file at all.  Unknown keys and wrong types are errors that name
 * the JSON path and, where the file has one, the line and column.  A
 * loaded configuration is immutable; reload builds a new one and swaps.
 */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "policy/policy.h"

#define CFG_DEFAULT_PATH "/etc/sluice/sluiced.json"

struct cfg_session {
	char *id;
	char *tenant;           /* may be "" */
	char *user;             /* may be "" */
	enum pol_tier tier;
	/* exactly one transport; none given -> socket under runtime_dir */
	char *socket;           /* NULL unless given */
	char *source;           /* canonical IP text, NULL unless given */
	struct pol_addr source_addr;
	int64_t vsock_cid;      /* -1 unless given */
};

struct cfg_tenant {
	char *name;
	enum pol_tier ceiling;
};

struct cfg_hostmap {
	char *name;             /* canonical host */
	struct pol_addr *addrs;
	size_t naddrs;
};

/* Control API roles, least to most (a uid in two lists gets the higher). */
enum cfg_role {
	CFG_ROLE_NONE = 0,
	CFG_ROLE_AUDITOR,
	CFG_ROLE_APP,
	CFG_ROLE_ADMIN,
};
const char *cfg_role_name(enum cfg_role r);

/* A bearer token for the control API's TCP listener; the secret stays in
 * its file (read by the API, never copied into the configuration). */
struct cfg_token {
	char *name;
	enum cfg_role role;
	char *token_file;
	char *tenant;           /* NULL: bound to none; else its credentials
	                           and request rules only (sluiced(8)) */
};

struct cfg_idlist {
	uint32_t *ids;
	size_t n;
};

struct cfg_control {
	char *socket;               /* "<runtime_dir>/control.sock" */
	unsigned socket_mode;       /* 0660 */
	char *socket_group;         /* NULL: process group */
	/* indexed by enum cfg_role (NONE unused); uid 0 is always admin */
	struct cfg_idlist uids[CFG_ROLE_ADMIN + 1];
	struct cfg_idlist gids[CFG_ROLE_ADMIN + 1];
	char *tcp;                  /* "addr:port" with TLS, NULL: none */
	char *tls_cert, *tls_key;   /* required with tcp */
	char *client_ca;            /* NULL: no client certificates */
	struct cfg_token *tokens; size_t ntokens;
	size_t max_body;            /* 65536 */
	int max_conns;              /* 64: on tcp at once */
	int max_conns_per_peer;     /* 8: on tcp from one address */
	int head_timeout_ms;        /* 10000: accept to a whole request (tcp) */
};

/* Prompts POSTed to the operator's endpoint (webhook.h).  The secret
 * stays in its file; the webhook module reads it. */
struct cfg_webhook {
	char *url;                  /* "https://host[:port]/path", NULL: none */
	char *host;                 /* from url: canonical name or IP text */
	uint16_t port;              /* from url, 443 when absent */
	char *path;                 /* from url: "/" at least, query kept */
	char *secret_file;          /* required with url */
	char *ca_file;              /* NULL: the system store */
	int timeout_ms;             /* 5000: one attempt */
	struct cfg_hostmap *hosts; size_t nhosts;   /* before c-ares */
};

/* sluice's own nftables table (firewall/fw.h); off unless enabled. */
struct cfg_firewall {
	int enabled;                /* 0 */
	char *table;                /* "sluice": table inet <table> */
	int64_t uid;                /* self guard skuid; -1 (null): none */
	char **sandbox_subnets; size_t nsandbox_subnets;   /* CIDRs */
	/* interface names, "name" or "name*" (pol_ifname_check) */
	char **sandbox_interfaces; size_t nsandbox_interfaces;
	uint16_t *broker_ports; size_t nbroker_ports;      /* needed with subnets */
};

/* inspect: TLS inspection of the hosts an admin names (sluiced.json(5)). */
struct cfg_inspect {
	char **hosts; size_t nhosts;     /* names and "*.suffix"; none: off */
	char *ca_cert;                   /* the inspection CA (PEM); made at
	                                    the first start when it and
	                                    ca_key are both missing */
	char *ca_key;                    /* its key: root-only; the proxy
	                                    process never reads it */
	char *upstream_ca_file;          /* NULL: the system trust store */
	int leaf_cache;                  /* leaves kept (LRU), 1024 */
	int leaf_days;                   /* a leaf's validity, 30 */
};

/* rules: request rules (sluiced.json(5) "rules"), in order. */
struct cfg_rule {
	char *name;                      /* given, or "rule-<index>" */
	char **hosts; size_t nhosts;     /* names, *.suffix, optional :port */
	char **methods; size_t nmethods; /* none: any */
	char **paths; size_t npaths;     /* globs; none: any */
	int action;                      /* enum pol_rule_action */
	int has_name;
};

/* credentials: where the values of /v1/credentials live. */
struct cfg_credentials {
	char *file;                      /* mode 0600, the proxy user's,
	                                    apart from the state file */
};

struct cfg {
	char *source_path;      /* file it came from, or NULL for defaults */
	char *runtime_dir;      /* "/run/sluice" */
	char *state_file;       /* "/var/lib/sluice/state.json" */
	/* started as root, the proxy process runs as this user ("root":
	 * it keeps root); read at start only */
	char *user;             /* "sluice" */
	enum pol_tier ceiling;  /* "off" */
	struct cfg_tenant *tenants; size_t ntenants;

	/* listen */
	char **listen_tcp; size_t nlisten_tcp;    /* "addr:port", "[v6]:port" */
	/* listen.transparent: where the firewall's redirect lands; every
	 * entry has the same port, transparent_port (0: none) */
	char **listen_transparent; size_t nlisten_transparent;
	uint16_t transparent_port;
	int vsock_port;                            /* -1: no vsock listener */
	unsigned socket_mode;                      /* session sockets, 0660 */
	char *socket_group;                        /* NULL: process group */
	/* absolute directories an admin may put a session socket under
	 * (sluiced(8), "Session sockets"); none by default */
	char **socket_prefixes; size_t nsocket_prefixes;

	struct cfg_session *sessions; size_t nsessions;

	/* policy inputs, kept as text for --print-config */
	char **registries; size_t nregistries;     /* NULL: built-in list */
	int registries_default;                    /* 1 if the built-in list is used */
	uint16_t *ports_registries; size_t nports_registries;  /* 443, 80 */
	uint16_t *ports_public; size_t nports_public;          /* 443, 80 */
	char **allow_cidrs; size_t nallow_cidrs;
	char **deny_cidrs; size_t ndeny_cidrs;
	char **deny_hosts; size_t ndeny_hosts;

	/* dns */
	char **dns_servers; size_t ndns_servers;   /* "ip[:port]"; none: resolv.conf */
	struct cfg_hostmap *dns_hosts; size_t ndns_hosts;
	int dns_timeout_ms;                        /* 3000 */

	/* log */
	char *log_path;                            /* "/var/log/sluice/connections.jsonl" */
	int log_refusals_per_s;                    /* 20 per session; 0: no limit */
	int log_refusal_burst;                     /* 100 */
	size_t log_min_free_bytes;                 /* 64 MiB; 0: no warning */
	char *log_mac_key_file;                    /* NULL: no mac; read at start */

	/* prompt */
	int prompt_timeout_s;                      /* 90 */
	int prompt_deny_quiet_s;                   /* 60 */

	/* events: the control API's event stream */
	size_t events_ring;                        /* 1024 events kept for replay */
	size_t events_max_pending;                 /* 256 KiB unsent per subscriber */
	int events_heartbeat_s;                    /* 15 */

	/* limits */
	size_t max_head;                           /* 32768 */
	size_t max_line;                           /* 8192 */
	size_t max_headers;                        /* 100 */
	int head_timeout_ms;                       /* 10000 */
	int idle_timeout_s;                        /* 300 */
	int connect_timeout_ms;                    /* 10000 */
	int max_conns_per_session;                 /* 256 */
	int max_conns_total;                       /* 4096 */
	int max_conns_per_tenant;                  /* 1024: a tenant's sessions together */
	int pressure_pct;                          /* 75: of max_conns_total, then fair shares */
	int fd_reserve;                            /* 256: descriptors control.tcp leaves free */
	int max_grants_per_session;                /* 256 */
	int max_refusals_per_conn;                 /* 100 */
	size_t tunnel_buffer;                      /* per direction, 256 KiB */
	int drain_timeout_s;                       /* 10: SIGTERM drain deadline */
	int sni_check;                             /* 1: CONNECT :443 needs matching SNI */
	int sni_timeout_ms;                        /* 5000: wait for the ClientHello */
	uint16_t *sni_ports; size_t nsni_ports;    /* tls.sni_ports, [443] */
	int allow_ech;                             /* 0: ECH/ESNI hellos are refused */
	uint16_t *plain_ports; size_t nplain_ports;/* tls.plain_http_ports, [80]: no CONNECT */

	struct cfg_control control;
	struct cfg_webhook webhook;
	struct cfg_firewall firewall;
	struct cfg_inspect inspect;
	struct cfg_rule *rules; size_t nrules;
	struct cfg_credentials credentials;
};

/*
 * Load a configuration: path NULL gives the embedded defaults alone.
 * Returns NULL on error with a message in err such as
 * "sluiced.json:12:5: dns.timeout_ms: expected an integer".
 */
struct cfg *cfg_load(const char *path, char *err, size_t errlen);
/* Parse from memory (fuzzing, tests); name is used in messages. */
struct cfg *cfg_load_buffer(const char *buf, size_t len, const char *name,
    char *err, size_t errlen);
void cfg_free(struct cfg *c);

/* The effective configuration as JSON text (caller frees with free()). */
char *cfg_dump(const struct cfg *c);

/*
 * Build the policy inputs (registries, ports, CIDRs, deny hosts) into a
 * new pol_config.  Returns NULL with err on a bad entry (cfg_load already
 * checked them, so this only fails on memory).
 */
struct pol_config *cfg_build_policy(const struct cfg *c, char *err,
    size_t errlen);

/* A rule host ("name", "*.suffix", either with ":port") that sluice can
 * see requests of: covered by inspect.hosts, or with a port of
 * tls.plain_http_ports (plain HTTP only).  1 when it can.  The
 * configuration's rules and the control API's are held to it. */
int cfg_rule_host_seen(const struct cfg *c, const char *pat);

/* 1 if port is one of ports[0..n) (tls.sni_ports, plain_http_ports...). */
int cfg_port_in(const uint16_t *ports, size_t n, uint16_t port);

#endif /* SLUICE_CONFIG_H */
