/*
 * ctl.h: what the control plane may do to a running sluiced.
 *
 * The control API (api.c) parses, authenticates and authorises; these
 * operations write the admin record to the connection log, change the
 * daemon and save the state file (a change the log cannot record is not
 * made: CTL_LOG_UNAVAILABLE).  Each returns 0, or -1 with a code and a
 * message in *e (the API maps codes to statuses).
 */
#ifndef SLUICE_CTL_H
#define SLUICE_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "proxy/lib/util.h"

struct px_session;
struct cfg;
struct relay_cred;

enum ctl_code {
	CTL_OK = 0,
	CTL_BAD_REQUEST,     /* 400: a value the operation cannot take */
	CTL_NOT_FOUND,       /* 404 */
	CTL_CONFLICT,        /* 409: duplicate id, transport in use */
	CTL_INTERNAL,        /* 500: the state file could not be saved, ... */
	CTL_UNAVAILABLE,     /* 503: shutting down */
	CTL_FORBIDDEN,       /* 403: not for this caller's role */
	CTL_LOG_UNAVAILABLE, /* 503 "log_unavailable": the admin record could
	                        not be written, so the change was not made */
	CTL_TOO_MANY_GRANTS, /* 409 "too_many_grants": the session has
	                        limits.max_grants_per_session */
	CTL_HOST_NOT_INSPECTED, /* 400 "host_not_inspected": a rule names a
	                        host whose requests sluice never sees */
	CTL_TOO_MANY_RULES,  /* 409 "too_many_rules": CTL_RULES_MAX */
};

struct ctl_err {
	enum ctl_code code;
	char msg[256];
};

/* Who asked, for the admin record: "uid:1000", "token:ops", "root". */
struct ctl_actor {
	char who[96];
	const char *role;    /* "admin", "app", "auditor" */
	const char *tenant;  /* a token bound to a tenant (control.tokens[].
	                        tenant): its tenant; NULL: bound to none */
};

/* A session to create.  At most one transport; none: a socket under
 * runtime_dir.  A socket elsewhere is for an admin, under
 * listen.socket_prefixes (sluiced(8), "Session sockets"). */
struct ctl_session_spec {
	const char *id, *tenant, *user;
	enum pol_tier tier;
	int admin;               /* the caller has the admin role */
	const char *socket;      /* NULL */
	const char *source;      /* NULL; an IP literal */
	int64_t vsock_cid;       /* -1 */
};

/* Sessions.  ctl_session_create makes the listener before it returns. */
int ctl_session_create(const struct ctl_actor *a,
    const struct ctl_session_spec *spec, struct px_session **out,
    struct ctl_err *e) SLUICE_MUSTCHECK;
int ctl_session_delete(const struct ctl_actor *a, const char *id,
    struct ctl_err *e) SLUICE_MUSTCHECK;
int ctl_session_set_tier(const struct ctl_actor *a, const char *id,
    enum pol_tier tier, struct ctl_err *e) SLUICE_MUSTCHECK;

/* Grants: canonical host and port. */
int ctl_grant_add(const struct ctl_actor *a, const char *id,
    const char *host, uint16_t port, struct ctl_err *e) SLUICE_MUSTCHECK;
int ctl_grant_remove(const struct ctl_actor *a, const char *id,
    const char *host, uint16_t port, struct ctl_err *e) SLUICE_MUSTCHECK;

/* Egress rules (the session's own allowed and denied names, set whole:
 * {"allow": [...], "deny": [...]}, at most CTL_EGRESS_MAX each); open
 * connections they now refuse are closed. */
#define CTL_EGRESS_MAX 256
int ctl_session_set_egress(const struct ctl_actor *a, const char *id,
    void *egress, struct ctl_err *e) SLUICE_MUSTCHECK;

/*
 * Ceilings.  tenant NULL sets the global one.  Lowering applies to new
 * connections at once; with close_exceeding, open tunnels and exchanges
 * the new ceiling no longer admits are closed (ceiling_lowered).
 * clear removes a tenant's own ceiling.
 */
int ctl_ceiling_set(const struct ctl_actor *a, const char *tenant,
    enum pol_tier tier, int close_exceeding, size_t *closed,
    struct ctl_err *e) SLUICE_MUSTCHECK;
int ctl_ceiling_clear(const struct ctl_actor *a, const char *tenant,
    struct ctl_err *e) SLUICE_MUSTCHECK;

/* An audit record for a refused call (403) or any other admin event. */
void ctl_audit(const struct ctl_actor *a, const char *action,
    const char *target, const char *outcome);

/* Prompts (DESIGN.md "Prompts").  ctl_prompt_answer: CTL_NOT_FOUND for
 * an unknown id, CTL_CONFLICT for one already answered or expired. */
int ctl_prompt_answer(const struct ctl_actor *a, const char *id,
    enum pol_answer ans, struct ctl_err *e) SLUICE_MUSTCHECK;
/* {"prompts": [PROMPT...]} of the pending prompts; one prompt by id
 * (pending or recently answered), or NULL. */
void *ctl_json_prompts(void);
void *ctl_json_prompt(const char *id);

/* JSON views (jansson json_t *, new reference) for the API. */
void *ctl_json_health(void);
void *ctl_json_ceiling(void);
void *ctl_json_session(const struct px_session *s);
void *ctl_json_sessions(void);
/* Prometheus text exposition; caller frees. */
char *ctl_metrics_text(void);

/* State file: load at start (before listeners are reported ready) and
 * save after every change.  ctl_state_load returns -1 with a message
 * when the file exists but cannot be used.
 *
 * ctl_state_save asks for a save (group commit, state.c): with the loop
 * running it is made once at the end of the loop's pass for all the
 * changes of the pass, and the API holds the replies of the requests
 * that made them until it is durable (ctl_state_gen tells a request
 * whether it changed the state; the hook hears of each save: ok 0 with
 * the reason when it failed); without a loop at once.  ctl_state_flush
 * makes a save still asked for now (at stop, or when a reply cannot be
 * held): 0 when every change asked for is saved, else -1 with e (may be
 * NULL) saying why. */
int ctl_state_load(const char *path, char *err, size_t errlen) SLUICE_MUSTCHECK;
int ctl_state_save(struct ctl_err *e) SLUICE_MUSTCHECK;
unsigned long long ctl_state_gen(void);
void ctl_state_hook(void (*fn)(int ok, const char *why));
int ctl_state_flush(struct ctl_err *e);
/* The configuration file's ceilings (global and per tenant) replace
 * those in force; -1 when a tenant's could not be set (memory). */
int ctl_apply_file_ceilings(const struct cfg *c) SLUICE_MUSTCHECK;
/* After a reload: re-apply the ceilings the control API set (they win
 * over the file's). */
void ctl_apply_api_ceilings(void);
/* The same from text[0..len), named name in messages, and the document
 * ctl_state_save writes (json_t *, new reference); the fuzz harness
 * tests/fuzz/fuzz_state.c checks that one loads back to the other. */
int ctl_state_restore(const char *text, size_t len, const char *name,
    char *err, size_t errlen) SLUICE_MUSTCHECK;
void *ctl_json_state(void);

/* Credentials (creds.c; sluiced(8) "Credentials").  The values stay in
 * path (credentials.file, 0600), read at start: a missing file is none;
 * one group or others may read is refused.  0 / -1 with err. */
int ctl_creds_load(const char *path, char *err, size_t errlen) SLUICE_MUSTCHECK;
void ctl_creds_free(void);
/* POST /v1/credentials: body checked, hosts inspected, added or (the same
 * name) replaced for the next request; *out its JSON (no value).  A
 * caller bound to a tenant (a->tenant) sets only that tenant's
 * (CTL_FORBIDDEN), replaces none of another's (CTL_CONFLICT) and
 * deletes none (CTL_NOT_FOUND). */
int ctl_cred_put(const struct ctl_actor *a, void *body, void **out,
    int *created, struct ctl_err *e) SLUICE_MUSTCHECK;
int ctl_cred_delete(const struct ctl_actor *a, const char *name,
    struct ctl_err *e) SLUICE_MUSTCHECK;
/* {"credentials": [...]} / one, never a value; NULL: no such one.
 * tenant not NULL (a caller bound to it): only that tenant's. */
void *ctl_creds_json(const char *tenant);
void *ctl_cred_json(const char *name, const char *tenant);
/*
 * Request rules of the control API (rules.c; sluiced(8) "Request
 * rules"): after the configuration's, in order, kept in the state file.
 * ctl_rule_put: POST /v1/rules, a new name appended, a known one
 * replaced where it stands; ctl_rules_replace: PUT /v1/rules
 * {"rules": [...]}, the whole list.  *out: the rule / the list (new
 * references).  Writes are the admin's (api.c checks the role).
 */
#define CTL_RULES_MAX 256
int ctl_rule_put(const struct ctl_actor *a, void *body, void **out,
    int *created, struct ctl_err *e) SLUICE_MUSTCHECK;
int ctl_rules_replace(const struct ctl_actor *a, void *body, void **out,
    struct ctl_err *e) SLUICE_MUSTCHECK;
int ctl_rule_delete(const struct ctl_actor *a, const char *name,
    struct ctl_err *e) SLUICE_MUSTCHECK;
/* {"rules": [the API's], "config": [the file's], "builtin": [names]};
 * tenant not NULL: of the API's, only those for every tenant or for
 * that one.  One rule of the API's by name, NULL: none (or not
 * visible to tenant). */
void *ctl_rules_json(const char *tenant);
void *ctl_rule_json(const char *name, const char *tenant);
/* Append the API's rules to p, a policy built from c (start: after
 * ctl_state_load; reload: before the swap).  -1 with err when one no
 * longer fits (a configuration rule took its name). */
int ctl_rules_apply(struct pol_config *p, const struct cfg *c, char *err,
    size_t errlen) SLUICE_MUSTCHECK;
void ctl_rules_free(void);

/* GET /v1/inspect/ca: the inspection CA as PEM, NULL when inspection
 * is off. */
const char *ctl_inspect_ca(void);
/* The relay's cred_find hook. */
const struct relay_cred *ctl_cred_find(const char *name,
    const char *secret, const char *session);

#endif /* SLUICE_CTL_H */
