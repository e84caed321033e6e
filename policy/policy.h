/*
 * policy.h: sluice's decision logic, the contract of policy/.
 *
 * Pure C over libc: no I/O, no allocation outside the objects below, no
 * libevent.  Everything the proxy decides (canonical targets, address
 * classes, host lists, tiers, ceilings, sessions, grants, the decision
 * itself) comes from here so that the log, the client's answer and the
 * tests all see one truth.
 *
 * Error idiom: functions that can fail return 0 on success and -1 on
 * failure, or a `enum pol_reason` where the failure needs a name.
 * Ownership is in the verb: _new returns an object the caller frees with
 * _free; _add copies its string arguments.
 */
#ifndef SLUICE_POLICY_H
#define SLUICE_POLICY_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Reason codes.  Logs, webhooks, tests and clients carry the strings, so
 * a code is never reordered, renumbered or reused: append only. */
enum pol_reason {
	POL_R_NONE = 0,            /* "" : no refusal */
	POL_R_BAD_REQUEST = 1,     /* malformed HTTP */
	POL_R_BAD_TARGET = 2,      /* malformed or non-canonical host, scheme, form */
	POL_R_PORT_NOT_ALLOWED = 3,
	POL_R_ADMIN_DENY = 4,
	POL_R_NETWORK_OFF = 5,     /* ceiling is off */
	POL_R_ABOVE_CEILING = 6,
	POL_R_PRIVATE_ADDRESS = 7, /* every resolved address is in a refused class */
	POL_R_SESSION_UNKNOWN = 8,
	POL_R_SNI_MISMATCH = 9,
	POL_R_SNI_MISSING = 10,
	POL_R_NOT_TLS = 11,
	POL_R_HOST_MISMATCH = 12,
	POL_R_PROMPT_TIMEOUT = 13,
	POL_R_NO_APPROVER = 14,
	POL_R_USER_DENIED = 15,
	POL_R_DNS_FAILED = 16,     /* NXDOMAIN, SERVFAIL, no address */
	POL_R_DNS_TIMEOUT = 17,
	POL_R_UPSTREAM_FAILED = 18,   /* every checked address refused the connect */
	POL_R_UPSTREAM_TIMEOUT = 19,
	POL_R_TOO_MANY_CONNECTIONS = 20,
	POL_R_HEAD_TOO_LARGE = 21,
	POL_R_HEAD_TIMEOUT = 22,
	POL_R_METHOD_NOT_ALLOWED = 23, /* TRACE, TRACK, unregistered methods */
	POL_R_LOG_UNAVAILABLE = 24,    /* fail closed: the record could not be written */
	POL_R_SHUTTING_DOWN = 25,
	POL_R_IDLE_TIMEOUT = 26,       /* close reason */
	POL_R_SESSION_CLOSED = 27,     /* close reason: session removed */
	POL_R_CEILING_LOWERED = 28,    /* close reason: tunnel no longer admitted */
	POL_R_TIER_LOWERED = 29,       /* a prompt ended: the chat's tier went down */
	POL_R_ECH_REFUSED = 30,        /* ClientHello hides its name (ECH, ESNI) */
	POL_R_CONNECT_PLAIN_PORT = 31, /* CONNECT to a port that carries plain HTTP */
	POL_R_SELF_TARGET = 32,        /* transparent: dialled the listener itself */
	POL_R_TOO_MANY_INTERIM = 33,   /* the upstream sent 1xx answers without end */
	POL_R_TOO_MANY_REFUSALS = 34,  /* the connection was refused too often */
	POL_R_UPSTREAM_TLS = 35,       /* inspected: the upstream's certificate
	                                * did not verify, or its TLS failed */
	POL_R_RULE_DENIED = 36,        /* a request rule (or a built-in one)
	                                * denies this method and path */
	POL_R_SESSION_DENIED = 37,     /* the session's own egress rules deny
	                                * this host (no prompt) */
	POL_R__COUNT
};

/* "bad_target", ...; "" for POL_R_NONE; "unknown" out of range. */
const char *pol_reason_name(enum pol_reason r);
/* HTTP status a refusal with this reason is answered with (400, 403, 421,
 * 429, 502, 503, 504). */
int pol_reason_status(enum pol_reason r);
/* One sentence a person or a model can act on: why, and what would allow
 * it.  Never NULL. */
const char *pol_reason_hint(enum pol_reason r);

/* ------------------------------------------------------------------ */
/* Tiers, ordered off < registries < public. */
enum pol_tier {
	POL_TIER_OFF = 0,
	POL_TIER_REGISTRIES = 1,
	POL_TIER_PUBLIC = 2,
};
const char *pol_tier_name(enum pol_tier t);
int pol_tier_parse(const char *s, enum pol_tier *out) SLUICE_MUSTCHECK; /* 0 / -1 */

/* ------------------------------------------------------------------ */
/* Addresses. */
struct pol_addr {
	int family;          /* AF_INET or AF_INET6 */
	uint8_t a[16];       /* network order; AF_INET uses a[0..3] */
};

/* Address classes; POL_AC_PUBLIC is the only one the tiers admit.
 * Append only (class names appear in logs). */
enum pol_addr_class {
	POL_AC_PUBLIC = 0,
	POL_AC_LOOPBACK,
	POL_AC_UNSPECIFIED,
	POL_AC_LINK_LOCAL,
	POL_AC_PRIVATE,        /* RFC 1918, ULA fc00::/7 */
	POL_AC_CGNAT,          /* 100.64.0.0/10 */
	POL_AC_MULTICAST,
	POL_AC_BROADCAST,
	POL_AC_RESERVED,       /* 0/8, 240/4, 192.0.0/24, other IANA special */
	POL_AC_DOCUMENTATION,  /* 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32 */
	POL_AC_BENCHMARK,      /* 198.18.0.0/15, 2001:2::/48 */
	POL_AC_METADATA,       /* cloud metadata endpoints */
	POL_AC_HOST_OWN,       /* one of the broker host's own addresses */
	POL_AC_EMBEDDED,       /* IPv6 form embedding a refused IPv4 address */
	POL_AC__COUNT
};
const char *pol_addr_class_name(enum pol_addr_class c);

/* Strict literal parsers.  IPv4: exactly four decimal octets without
 * leading zeros (127.1, 0x7f.0.0.1, 0177.0.0.1, 2130706433 fail).  IPv6:
 * inet_pton syntax without brackets or zone id.  Return 0 / -1. */
int pol_addr_parse(const char *s, size_t len, struct pol_addr *out) SLUICE_MUSTCHECK;
/* Canonical text (inet_ntop); buf of at least 46 bytes.  Returns buf. */
char *pol_addr_format(const struct pol_addr *a, char *buf, size_t len);
/* Intrinsic class, ignoring the admin CIDR lists and host addresses. */
enum pol_addr_class pol_addr_classify(const struct pol_addr *a);

/* ------------------------------------------------------------------ */
/* Targets: canonical (host, port).  Parsing refuses rather than repairs. */
#define POL_HOST_MAX 253
/* Longest session, tenant or chat id (pol_id_valid). */
#define POL_ID_MAX 64

enum pol_host_kind { POL_HOST_NAME, POL_HOST_V4, POL_HOST_V6 };

struct pol_target {
	enum pol_host_kind kind;
	char host[POL_HOST_MAX + 1]; /* lower-case name without trailing dot,
	                                dotted quad, or canonical IPv6 text
	                                (no brackets) */
	uint16_t port;
	struct pol_addr addr;        /* valid for POL_HOST_V4 / POL_HOST_V6 */
};

/* A host alone (Host header value without port, SNI, config entries).
 * Names: LDH labels of 1..63 bytes, total <= 253, ASCII only (punycode
 * accepted), case folded, one trailing dot removed, no empty label.
 * '_' is accepted inside labels (seen in real registry CDNs).  IPv6 only
 * inside brackets when brackets_ok.  Returns POL_R_NONE or POL_R_BAD_TARGET. */
enum pol_reason pol_host_parse(const char *s, size_t len, int brackets_ok,
    struct pol_target *out);

/* CONNECT authority form "host:port" / "[v6]:port"; the port is required
 * (1..65535, decimal, no leading zeros). */
enum pol_reason pol_target_parse_authority(const char *s, size_t len,
    struct pol_target *out);

/* Absolute-form "http://authority/path?query".  Only the http scheme
 * (case-insensitive); no userinfo; port defaults to 80.  On success
 * *path and *path_len point into s at the origin-form part ("/" when the URI
 * has an empty path: then *path is a static "/").  Fragments refused. */
enum pol_reason pol_target_parse_uri(const char *s, size_t len,
    struct pol_target *out, const char **path, size_t *path_len);

/* "host" or "host:port" as a Host header; default_port when absent. */
enum pol_reason pol_target_parse_hostport(const char *s, size_t len,
    uint16_t default_port, struct pol_target *out);

/*
 * An interface name as the kernel accepts one (dev_valid_name: 1 to 15
 * bytes, not "." or "..", no '/', ':' or white space), further held to
 * printable ASCII without '"' and '\\' so that nft prints it as given,
 * and with one trailing '*' allowed: "tap*" stands for every name that
 * starts with "tap" (nft's iifname "tap*"); a bare "*" is refused.  0,
 * or -1 with the reason in why.  Here rather than in firewall/ so that
 * the configuration reader checks a name without linking the firewall.
 */
#define POL_IFNAME_MAX 16       /* IFNAMSIZ incl. NUL */
int pol_ifname_check(const char *s, char *why, size_t whylen) SLUICE_MUSTCHECK;

/* ------------------------------------------------------------------ */
/* Host sets: exact names and "*.suffix" (subdomains only; the apex needs
 * its own entry), each with an optional ":port".  An entry without a port
 * matches the ports passed to pol_hostset_match.  Lookup cost depends on
 * the length of the name, not the size of the set. */
struct pol_hostset;
struct pol_hostset *pol_hostset_new(void);
void pol_hostset_free(struct pol_hostset *s);
/* 0, or -1 for a malformed pattern. */
int pol_hostset_add(struct pol_hostset *s, const char *pattern) SLUICE_MUSTCHECK;
/* 1 when pattern is one pol_hostset_add takes (a name or *.suffix, with
 * an optional :port), else 0. */
int pol_hostset_pattern_valid(const char *pattern);
size_t pol_hostset_count(const struct pol_hostset *s);
/* 1 if (host, port) matches; portless entries match when port is one of
 * default_ports (pass n_default 0 to accept any port for them). */
int pol_hostset_match(const struct pol_hostset *s, const char *host,
    uint16_t port, const uint16_t *default_ports, size_t n_default);

/* ------------------------------------------------------------------ */
/* The admin configuration the decision reads.  Built once per load and
 * immutable afterwards; the proxy swaps whole objects on reload. */
struct pol_config;
struct pol_config *pol_config_new(void);
void pol_config_free(struct pol_config *c);
int pol_config_add_registry(struct pol_config *c, const char *pattern) SLUICE_MUSTCHECK;
/* The built-in registry list (PyPI, npm, crates.io, Go modules,
 * RubyGems, Maven Central, Debian and Ubuntu archives). */
int pol_config_add_default_registries(struct pol_config *c) SLUICE_MUSTCHECK;
int pol_config_add_deny_host(struct pol_config *c, const char *pattern) SLUICE_MUSTCHECK;
/* "a.b.c.d/len", "v6/len" or a bare address; allow=1 for allow_cidrs. */
int pol_config_add_cidr(struct pol_config *c, const char *cidr, int allow) SLUICE_MUSTCHECK;
/* Ports a tier admits (registries and public); replaces the previous set. */
int pol_config_set_ports(struct pol_config *c, enum pol_tier t,
    const uint16_t *ports, size_t n) SLUICE_MUSTCHECK;
/* The broker host's own addresses (classified POL_AC_HOST_OWN). */
int pol_config_add_host_addr(struct pol_config *c, const struct pol_addr *a) SLUICE_MUSTCHECK;
size_t pol_config_registry_count(const struct pol_config *c);

/* ------------------------------------------------------------------ */
/* Runtime state: ceilings and sessions with their grants. */
struct pol_state;
struct pol_session;

struct pol_state *pol_state_new(void);
void pol_state_free(struct pol_state *st);  /* frees its sessions */

void pol_state_set_ceiling(struct pol_state *st, enum pol_tier t);
enum pol_tier pol_state_global_ceiling(const struct pol_state *st);
/* Per-tenant ceiling; the effective value never exceeds the global one. */
int pol_state_set_tenant_ceiling(struct pol_state *st, const char *tenant,
    enum pol_tier t) SLUICE_MUSTCHECK;
int pol_state_clear_tenant_ceiling(struct pol_state *st, const char *tenant) SLUICE_MUSTCHECK;
/* Effective ceiling for a tenant (NULL or unknown: the global one). */
enum pol_tier pol_state_ceiling(const struct pol_state *st,
    const char *tenant);
/* Iterate tenant ceilings: idx from 0; returns 0 and fills, -1 past end. */
int pol_state_tenant_at(const struct pol_state *st, size_t idx,
    const char **tenant, enum pol_tier *t);

/* Ids match [A-Za-z0-9._-]{1,64}.  Returns NULL on a bad or duplicate id. */
struct pol_session *pol_session_add(struct pol_state *st, const char *id,
    const char *tenant, const char *user, enum pol_tier tier);
struct pol_session *pol_session_find(const struct pol_state *st,
    const char *id);
void pol_session_remove(struct pol_state *st, struct pol_session *s);
size_t pol_session_count(const struct pol_state *st);
struct pol_session *pol_session_at(const struct pol_state *st, size_t idx);
/* 1 to POL_ID_MAX of A-Z a-z 0-9 . _ -, not starting with a dot (so
 * never "." or "..": an id names a directory).  POL_ID_WHAT says so in
 * the API bodies' errors ("name: expected " POL_ID_WHAT). */
int pol_id_valid(const char *id);
#define POL_ID_WHAT	"1 to 64 of A-Z a-z 0-9 . _ -, not starting with a dot"

const char *pol_session_id(const struct pol_session *s);
const char *pol_session_tenant(const struct pol_session *s); /* "" if none */
const char *pol_session_user(const struct pol_session *s);   /* "" if none */
enum pol_tier pol_session_tier(const struct pol_session *s);
void pol_session_set_tier(struct pol_session *s, enum pol_tier t);
/* Grants: canonical host (as in pol_target.host) and port. */
int pol_session_grant(struct pol_session *s, const char *host, uint16_t port) SLUICE_MUSTCHECK;
int pol_session_revoke(struct pol_session *s, const char *host, uint16_t port) SLUICE_MUSTCHECK;
int pol_session_has_grant(const struct pol_session *s, const char *host,
    uint16_t port);
size_t pol_session_grant_count(const struct pol_session *s);
int pol_session_grant_at(const struct pol_session *s, size_t idx,
    const char **host, uint16_t *port);
/* Egress rules: the session's own allowed and denied names (exact or
 * "*.suffix", as pol_hostset_add takes them), set as a whole.  A denied
 * name is refused at once (session_denied, no prompt), whatever the
 * tier; an allowed one is admitted on the public tier's ports within
 * the ceiling, as a grant is.  0, or -1 with *bad the index (allow
 * first, then deny) of a malformed pattern, or SIZE_MAX out of memory;
 * the old rules stay on failure. */
int pol_session_set_egress(struct pol_session *s, const char *const *allow,
    size_t nallow, const char *const *deny, size_t ndeny, size_t *bad) SLUICE_MUSTCHECK;
size_t pol_session_egress_count(const struct pol_session *s);
/* The idx-th rule as set (allow ones first): its pattern, *deny 1/0. */
int pol_session_egress_at(const struct pol_session *s, size_t idx,
    const char **pattern, int *deny);
/* 1 if the session's egress rules deny (host, port), resp. allow it on
 * one of the ports passed (n 0: any). */
int pol_session_egress_denies(const struct pol_session *s, const char *host,
    uint16_t port);
int pol_session_egress_allows(const struct pol_session *s, const char *host,
    uint16_t port, const uint16_t *ports, size_t n);

/* ------------------------------------------------------------------ */
/* The decision. */
enum pol_verdict { POL_ALLOW, POL_DENY, POL_PROMPT };

/* What admitted an allowed target (logged as "rule"). */
enum pol_rule {
	POL_RULE_NONE = 0,
	POL_RULE_REGISTRIES,   /* registry host list under tier >= registries */
	POL_RULE_PUBLIC,       /* tier public */
	POL_RULE_GRANT,        /* an earlier "Allow for this chat" */
	POL_RULE_PROMPT,       /* the user answered a prompt with an allow */
	POL_RULE_SESSION,      /* the session's own egress rules allow it */
};
const char *pol_rule_name(enum pol_rule r);  /* "", "registries", ... */
const char *pol_verdict_name(enum pol_verdict v); /* allow, deny, prompt */

struct pol_decision {
	enum pol_verdict verdict;
	enum pol_reason reason;    /* POL_R_NONE for allow and prompt */
	enum pol_rule rule;        /* for allow */
	enum pol_tier tier;        /* the session's own tier */
	enum pol_tier ceiling;     /* effective ceiling of its tenant */
	enum pol_tier effective;   /* min(tier, ceiling) */
};

/*
 * Decide on a canonical target for a session, in DESIGN.md's order:
 *  1. port admitted by nothing (tier ports, port-scoped registry entries,
 *     grants) -> deny port_not_allowed;
 *  2. deny_hosts or (literal) deny_cidrs -> deny admin_deny;
 *  2b. the session's egress rules deny it -> deny session_denied;
 *  3. admitted by the effective tier -> allow;
 *  4. granted for this chat, or its egress rules allow it -> allow
 *     (rule grant, session) within the ceiling;
 *  5. admitted by the ceiling but not the chat -> prompt;
 *  6. deny network_off (ceiling off) or above_ceiling.
 * Malformed targets never get here: the parsers refuse them.
 */
void pol_decide(const struct pol_config *c, const struct pol_state *st,
    const struct pol_session *s, const struct pol_target *t,
    struct pol_decision *out);

/*
 * Check one address the connection may dial (a resolved answer or the
 * literal target).  deny_cidrs and allow_cidrs: the most specific prefix
 * wins and deny wins a tie; an allow_cidrs match admits any class.  With
 * no CIDR match, only POL_AC_PUBLIC is admitted.  Returns POL_R_NONE,
 * POL_R_ADMIN_DENY or POL_R_PRIVATE_ADDRESS; *cls gets the class.
 */
enum pol_reason pol_check_addr(const struct pol_config *c,
    const struct pol_addr *a, enum pol_addr_class *cls);

/* ------------------------------------------------------------------ */
/* Prompt bookkeeping (DESIGN.md "Prompts"): which pending prompt a new
 * request joins, the per-chat cap, and the quiet period after a deny.
 * Pure: the caller passes the time and owns the prompts themselves
 * (an opaque owner pointer per entry). */

/* How a prompt ended.  The log, the API and the webhook carry the names. */
enum pol_answer {
	POL_ANSWER_ALLOW_ONCE = 0,
	POL_ANSWER_ALLOW_CHAT = 1,
	POL_ANSWER_DENY = 2,
	POL_ANSWER_TIMEOUT = 3,      /* never given by a person */
	POL_ANSWER__COUNT
};
/* "allow_once", "allow_chat", "deny", "timeout"; "unknown" out of range. */
const char *pol_answer_name(enum pol_answer a);
/* The answers a person may give (not "timeout").  0 / -1. */
int pol_answer_parse(const char *s, enum pol_answer *out) SLUICE_MUSTCHECK;
/* 1 for allow_once and allow_chat. */
int pol_answer_allows(enum pol_answer a);

struct pol_prompts;

/* per_session: pending prompts one chat may have at once (>= 1);
 * quiet_max: deny quiet periods kept at once (0: none).  NULL: memory. */
struct pol_prompts *pol_prompts_new(size_t per_session, size_t quiet_max);
void pol_prompts_free(struct pol_prompts *pp);

enum pol_prompt_join {
	POL_PJ_NEW,      /* no prompt for this place yet, and room for one */
	POL_PJ_JOIN,     /* *owner is the pending prompt to wait on */
	POL_PJ_FULL,     /* the chat has per_session prompts pending */
	POL_PJ_QUIET,    /* a person denied this place a moment ago */
};
/* Where a request of session for host:port goes, at time now. */
enum pol_prompt_join pol_prompts_join(struct pol_prompts *pp,
    const char *session, const char *host, uint16_t port, int64_t now,
    void **owner);
/* A new pending prompt (strings copied).  0 / -1 (memory). */
int pol_prompts_add(struct pol_prompts *pp, const char *session,
    const char *host, uint16_t port, void *owner) SLUICE_MUSTCHECK;
/* The prompt of owner is no longer pending (answered or expired). */
void pol_prompts_remove(struct pol_prompts *pp, void *owner);
size_t pol_prompts_pending(const struct pol_prompts *pp);
/* A person's deny at time now: requests of session for host:port are
 * refused without a new prompt until until.  Expired entries make room;
 * when the table is still full nothing is kept (the next request asks
 * again: a question more, never a hole). */
void pol_prompts_quiet(struct pol_prompts *pp, const char *session,
    const char *host, uint16_t port, int64_t now, int64_t until);

/* The same with a rule name as part of the place: a request rule's
 * prompt (rule not empty) is its own question, apart from the host's
 * prompt for the same host and port ("" is the host's). */
enum pol_prompt_join pol_prompts_join_rule(struct pol_prompts *pp,
    const char *session, const char *host, uint16_t port, const char *rule,
    int64_t now, void **owner);
int pol_prompts_add_rule(struct pol_prompts *pp, const char *session,
    const char *host, uint16_t port, const char *rule,
    void *owner) SLUICE_MUSTCHECK;
void pol_prompts_quiet_rule(struct pol_prompts *pp, const char *session,
    const char *host, uint16_t port, const char *rule, int64_t now,
    int64_t until);

/* ------------------------------------------------------------------ */
/* Request rules (DESIGN.md "Request rules, TLS inspection and
 * credentials"): evaluated per request where sluice sees the request
 * (plain HTTP, and inside inspected tunnels), after the decision above
 * allowed the host; the first rule that matches wins, then the
 * built-in ones.  Kept in the pol_config they were added to. */

#define POL_RULE_NAME_MAX 64
/* Built-in rules, after the configured ones: the registry hosts are
 * read-only (any method but GET and HEAD is denied), and git's
 * smart-HTTP push service is denied on every host. */
#define POL_RULE_BUILTIN_REGISTRIES "builtin:registries-read-only"
#define POL_RULE_BUILTIN_GIT_PUSH "builtin:git-receive-pack"

enum pol_rule_action { POL_RA_ALLOW = 0, POL_RA_DENY, POL_RA_PROMPT };
/* "allow", "deny", "prompt"; "unknown" out of range. */
const char *pol_rule_action_name(enum pol_rule_action a);
int pol_rule_action_parse(const char *s, enum pol_rule_action *out) SLUICE_MUSTCHECK;

struct pol_rule_spec {
	const char *name;            /* pol_id_valid */
	const char *tenant;          /* NULL: every tenant */
	const char *const *hosts;    /* host-set patterns, at least one */
	size_t nhosts;
	const char *const *methods;  /* tokens, exact; none: any method */
	size_t nmethods;
	const char *const *paths;    /* globs (pol_glob_match); none: any */
	size_t npaths;
	enum pol_rule_action action;
};
/* Append a rule (strings copied).  0, or -1 with *why a sentence
 * naming what is wrong (a static string). */
int pol_config_add_rule(struct pol_config *c, const struct pol_rule_spec *r,
    const char **why) SLUICE_MUSTCHECK;
size_t pol_config_rule_count(const struct pol_config *c);
/* Drop the rules after the first n (sluiced keeps the configuration's
 * rules first and puts the control API's after them again on a change;
 * the event loop matches no request in between). */
void pol_config_rules_truncate(struct pol_config *c, size_t n);
/* An HTTP method token of upper-case letters and '-' (1..23 bytes). */
int pol_rule_method_valid(const char *m);
/* A path glob: starts with '/' or '*', printable ASCII without
 * spaces, '?' or '#', at most 1024 bytes. */
int pol_rule_glob_valid(const char *g);
/* '*' matches any run of bytes ('/' included), every other byte
 * itself.  1 on a match. */
int pol_glob_match(const char *pat, const char *s, size_t n);
/* The path of an origin-form target as rules see it: the part before
 * '?' percent-decoded (a %00 or a bad escape fails), "." and ".."
 * segments resolved and empty segments dropped (a trailing '/' kept),
 * so that no spelling of a path escapes a glob.  out gets at least
 * n + 1 bytes.  *query (may be NULL) points into p after the '?', or
 * at "" when there is none.  0 / -1. */
int pol_path_normalize(const char *p, size_t n, char *out, size_t outlen,
    const char **query, size_t *qlen) SLUICE_MUSTCHECK;

/* 1 when every host the pattern ("name" or "*.suffix", an optional
 * ":port" ignored) can match is matched by one of patterns (names and
 * "*.suffix", no port: inspect.hosts): the same name, or a "*.s" of
 * which it is a subdomain (for "*.x": x is s or a subdomain of s). */
int pol_host_pattern_covered(const char *const *patterns, size_t n,
    const char *pattern);

struct pol_rule_match {
	int matched;                 /* 0: no rule applies (allow) */
	int builtin;
	enum pol_rule_action action;
	char name[POL_RULE_NAME_MAX + 1];
	size_t index;                /* of a configured rule */
};
/*
 * The first rule of c for tenant (NULL or "": only rules for every
 * tenant) that matches the request, then the built-in ones.  path is
 * the origin-form target (query included); scratch of at least
 * path_len + 1 bytes.  POL_R_NONE, or POL_R_BAD_TARGET when the path
 * cannot be normalized (out says "no match"; the caller refuses).
 */
enum pol_reason pol_rules_match(const struct pol_config *c,
    const char *tenant, const struct pol_target *t, const char *method,
    const char *path, size_t path_len, char *scratch, size_t scratch_len,
    struct pol_rule_match *out);

#endif /* SLUICE_POLICY_H */
