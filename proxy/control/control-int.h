/*
 * control-int.h: what the files of proxy/control/ share and nobody else
 * may use (ctl.h is the contract).
 */
#ifndef SLUICE_CONTROL_INT_H
#define SLUICE_CONTROL_INT_H

#include <stddef.h>

#include <jansson.h>

#include "policy/policy.h"
#include "proxy/control/ctl.h"

/* Fill e (when not NULL) and return -1. */
int ctl_fail(struct ctl_err *e, enum ctl_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A grant's host as the policy stores it: a name (brackets refused), or
 * an IP literal in canonical text.  0 / -1. */
int ctl_grant_host(const char *host, struct pol_target *t) SLUICE_MUSTCHECK;
/* [{"host","port"}...] of a session's grants (new reference). */
json_t *ctl_grants_json(const struct pol_session *ps);
/* The session's egress rules as set: {"allow": [...], "deny": [...]}. */
json_t *ctl_egress_json(const struct pol_session *ps);
/* Set them from such an object (NULL: none): 0, -1 with why. */
int ctl_egress_set_json(struct pol_session *ps, json_t *o, char *why,
    size_t wlen);

/* state.c: the ceilings the API set ({"tier": T|null, "tenants": {..}},
 * NULL: none), kept in the state file; ctl.c changes them. */
extern json_t *ctl_api_ceiling;
/* Apply such a ceiling object to px.state.  0 / -1 with err. */
int ctl_apply_ceiling_json(json_t *c, char *err, size_t errlen) SLUICE_MUSTCHECK;

/* state.c: the request rules the API made ([RULE...], NULL: none), as
 * the state file keeps them and ctl_state_load checked them; rules.c
 * changes them and puts them in force. */
extern json_t *ctl_api_rules;

#endif /* SLUICE_CONTROL_INT_H */
