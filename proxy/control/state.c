/*
 * state.c: the state file (ctl.h, ctl_state_load / ctl_state_save) and
 * the ceilings the control API set, which the file keeps.
 *
 * The file holds what the API made (sessions, grants, ceilings, request
 * rules) so that a restart restores it before sluiced reports ready; it
 * is replaced by rename, so a crash leaves the old file or the new one,
 * never half.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "proxy/daemon.h"
#include "proxy/relay/relay.h"
#include "proxy/control/ctl.h"
#include "proxy/control/control-int.h"
#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/rulespec.h"

/* Ceilings the API set; they win over the configuration file's. */
json_t *ctl_api_ceiling;          /* {"tier": T|null, "tenants": {..}} */
/* The API's request rules as kept (rules.c puts them in force). */
json_t *ctl_api_rules;            /* [RULE...] or NULL */

/* Far above what any state saves to; a save of more fails, so that a
 * file written is always one the next start can read. */
#define CTL_STATE_MAX (64u << 20)

static json_t *
state_json(void)
{
	json_t *sessions = json_array();
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry) {
		json_t *o;
		char src[48];

		if (s->from_config) {
			/* the file declares these; only grants and egress
			 * rules are ours */
			if (pol_session_grant_count(s->pol) == 0 &&
			    pol_session_egress_count(s->pol) == 0)
				continue;
			o = json_pack("{s:s,s:b,s:o,s:o}", "id",
			    pol_session_id(s->pol), "from_config", 1,
			    "grants", ctl_grants_json(s->pol), "egress",
			    ctl_egress_json(s->pol));
			json_array_append_new(sessions, o);
			continue;
		}
		o = json_pack("{s:s,s:s,s:s,s:s,s:o}",
		    "id", pol_session_id(s->pol),
		    "tenant", pol_session_tenant(s->pol),
		    "user", pol_session_user(s->pol),
		    "tier", pol_tier_name(pol_session_tier(s->pol)),
		    "grants", ctl_grants_json(s->pol));
		if (pol_session_egress_count(s->pol) > 0)
			json_object_set_new(o, "egress",
			    ctl_egress_json(s->pol));
		if (s->transport == PX_T_UNIX)
			json_object_set_new(o, "socket",
			    json_string(s->socket_path));
		else if (s->transport == PX_T_TCP) {
			pol_addr_format(&s->source, src, sizeof(src));
			json_object_set_new(o, "source", json_string(src));
		} else
			json_object_set_new(o, "vsock_cid",
			    json_integer(s->vsock_cid));
		json_array_append_new(sessions, o);
	}
	return json_pack("{s:i,s:O,s:o,s:o}", "version", 1,
	    "ceiling", ctl_api_ceiling ? ctl_api_ceiling : json_null(),
	    "sessions", sessions, "rules", ctl_api_rules ?
	    json_incref(ctl_api_rules) : json_array());
}

void *
ctl_json_state(void)
{
	return state_json();
}


/* Through util_write_atomic: a crash leaves the old state or the new
 * one, never half of either. */
static int
state_write(struct ctl_err *e)
{
	const char *path = px.cfg->state_file;
	json_t *j = state_json();
	char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) :
	    NULL;
	size_t len;
	int rc = -1;

	json_decref(j);
	if (text == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	len = strlen(text);
	if (len + 1 > CTL_STATE_MAX)
		errno = EFBIG;
	else {
		char *nl = realloc(text, len + 2);

		if (nl == NULL)
			errno = ENOMEM;
		else {
			text = nl;
			memcpy(text + len, "\n", 2);
			rc = util_write_atomic(path, text, len + 1, 0640);
		}
	}
	if (rc != 0) {
		ctl_fail(e, CTL_INTERNAL, "cannot save the state file %s: %s",
		    path, strerror(errno));
		px_log(PX_ERR, "%s: %s", __func__, e ? e->msg : "failed");
	}
	free(text);
	return rc;
}

/*
 * Group commit (issue 26).  A change asks for a save; the save is made
 * by a zero timer, that is at the end of the loop's pass (after the
 * requests read in it), once for every change of the pass, and the API
 * holds the reply of each request that changed the state until that
 * save has returned (api.c): nothing acknowledged can be lost, and a
 * burst of changes (a pool's sandboxes taken at once, each a session)
 * costs a write and two fsyncs per pass instead of per change.  The
 * loop is blocked by the save as it was by each one before; requests
 * that arrive meanwhile are read in the next pass and share the next
 * save.  The file, its format and its atomic replacement are the same.
 *
 * What changes is a save that fails (disk full, I/O error, no memory to
 * serialize the state, a state over CTL_STATE_MAX): it happens after the
 * pass's changes were made in memory, so they are not undone one by one
 * as a failed save of one change was; the requests that made them are
 * answered 500 (the message says the change is in force but not saved),
 * the failure is logged, and the next change (or the stop) tries the
 * save again.  Only a save that cannot be deferred is made at once, in
 * ctl_state_save, and its failure refuses that one change (its caller
 * undoes it, as before): no loop yet, or no memory for the timer or to
 * arm it.  A reply the API has no memory to hold flushes the save at
 * once too (ctl_state_flush), and is a 500 when it failed.
 */
static struct event *save_ev;
static unsigned long long save_asked, save_done;
static void (*save_hook)(int ok, const char *why);

/* The save asked for (arg: a struct ctl_err * that hears why it
 * failed, or NULL). */
static void
save_run(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_err e = { CTL_OK, "" };
	unsigned long long upto = save_asked;
	int ok;

	(void)fd;
	(void)what;
	if (save_done == upto)
		return;
	ok = state_write(&e) == 0;
	if (ok)
		save_done = upto;
	else if (arg != NULL)
		*(struct ctl_err *)arg = e;
	if (save_hook != NULL)
		save_hook(ok, e.msg);
}

int
ctl_state_save(struct ctl_err *e)
{
	static const struct timeval now = { 0, 0 };

	if (save_ev == NULL && px.base != NULL)
		save_ev = evtimer_new(px.base, save_run, NULL);
	/* no loop (or no memory for the timer): at once, as before */
	if (save_ev == NULL)
		return state_write(e);
	save_asked++;
	if (!evtimer_pending(save_ev, NULL) && evtimer_add(save_ev, &now) != 0) {
		save_asked--;
		return state_write(e);
	}
	return 0;
}

unsigned long long
ctl_state_gen(void)
{
	return save_asked;
}

void
ctl_state_hook(void (*fn)(int ok, const char *why))
{
	save_hook = fn;
}

int
ctl_state_flush(struct ctl_err *e)
{
	save_run(-1, 0, e);
	if (save_ev != NULL)
		event_free(save_ev);
	save_ev = NULL;
	return save_done == save_asked ? 0 : -1;
}

int
ctl_apply_ceiling_json(json_t *c, char *err, size_t errlen)
{
	json_t *tier = json_object_get(c, "tier");
	json_t *tenants = json_object_get(c, "tenants");
	const char *name;
	json_t *v;
	enum pol_tier t;

	if (tier != NULL && !json_is_null(tier)) {
		if (!json_is_string(tier) ||
		    pol_tier_parse(json_string_value(tier), &t) != 0) {
			snprintf(err, errlen, "ceiling.tier: not a tier");
			return -1;
		}
		pol_state_set_ceiling(px.state, t);
	}
	if (tenants != NULL && !json_is_object(tenants)) {
		snprintf(err, errlen, "ceiling.tenants: expected an object");
		return -1;
	}
	json_object_foreach(tenants, name, v) {
		if (!json_is_string(v) ||
		    pol_tier_parse(json_string_value(v), &t) != 0 ||
		    pol_state_set_tenant_ceiling(px.state, name, t) != 0) {
			snprintf(err, errlen, "ceiling.tenants.%s: not a tier",
			    name);
			return -1;
		}
	}
	return 0;
}

int
ctl_apply_file_ceilings(const struct cfg *c)
{
	const char *tenant;
	enum pol_tier t;
	size_t i;
	int rc = 0;

	/* forget tenant ceilings the file no longer names */
	while (pol_state_tenant_at(px.state, 0, &tenant, &t) == 0) {
		char name[128];

		snprintf(name, sizeof(name), "%s", tenant);
		if (pol_state_clear_tenant_ceiling(px.state, name) != 0)
			break;   /* cannot happen: it was just listed */
	}
	pol_state_set_ceiling(px.state, c->ceiling);
	for (i = 0; i < c->ntenants; i++)
		if (pol_state_set_tenant_ceiling(px.state, c->tenants[i].name,
		    c->tenants[i].ceiling) != 0)
			rc = -1;
	return rc;
}

void
ctl_apply_api_ceilings(void)
{
	char err[128];

	if (ctl_api_ceiling != NULL && ctl_apply_ceiling_json(ctl_api_ceiling, err,
	    sizeof(err)) != 0)
		px_log(PX_ERR, "%s: %s", __func__, err);
}

static int
restore_grants(struct px_session *s, json_t *grants, char *err,
    size_t errlen)
{
	size_t i;
	json_t *g;

	if (grants == NULL)
		return 0;
	if (!json_is_array(grants)) {
		snprintf(err, errlen, "session %s: grants: expected an array",
		    pol_session_id(s->pol));
		return -1;
	}
	json_array_foreach(grants, i, g) {
		json_t *h = json_object_get(g, "host");
		json_int_t p = json_integer_value(json_object_get(g, "port"));
		struct pol_target t;

		if (!json_is_string(h) || p < 1 || p > 65535 ||
		    ctl_grant_host(json_string_value(h), &t) != 0 ||
		    pol_session_grant(s->pol, t.host, (uint16_t)p) != 0) {
			snprintf(err, errlen, "session %s: grants[%zu]: bad "
			    "grant", pol_session_id(s->pol), i);
			return -1;
		}
	}
	return 0;
}

static int
restore_egress(struct px_session *s, json_t *egress, char *err,
    size_t errlen)
{
	char why[256];

	if (egress == NULL)
		return 0;
	if (ctl_egress_set_json(s->pol, egress, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "session %s: %s", pol_session_id(s->pol),
		    why);
		return -1;
	}
	return 0;
}

static int
restore_session(json_t *o, size_t idx, char *err, size_t errlen)
{
	struct cfg_session cs;
	struct px_session *s;
	json_t *id = json_object_get(o, "id");
	const char *tier;
	char why[256];
	int rc = -1;

	memset(&cs, 0, sizeof(cs));
	cs.vsock_cid = -1;
	if (!json_is_string(id) || !pol_id_valid(json_string_value(id))) {
		snprintf(err, errlen, "sessions[%zu]: bad id", idx);
		return -1;
	}
	if (json_is_true(json_object_get(o, "from_config"))) {
		/* grants of a session the configuration declares */
		s = px_session_find(json_string_value(id));
		if (s == NULL) {
			px_log(PX_WARN, "%s: grants for %s dropped: the "
			    "configuration no longer declares it", __func__,
			    json_string_value(id));
			return 0;
		}
		return restore_grants(s, json_object_get(o, "grants"), err,
		    errlen) != 0 ? -1 : restore_egress(s, json_object_get(o,
		    "egress"), err, errlen);
	}
	cs.id = (char *)json_string_value(id);
	cs.tenant = (char *)json_string_value(json_object_get(o, "tenant"));
	cs.user = (char *)json_string_value(json_object_get(o, "user"));
	tier = json_string_value(json_object_get(o, "tier"));
	if (cs.tenant == NULL || cs.user == NULL || tier == NULL ||
	    pol_tier_parse(tier, &cs.tier) != 0) {
		snprintf(err, errlen, "sessions[%zu] (%s): tenant, user or "
		    "tier missing or wrong", idx, cs.id);
		return -1;
	}
	cs.socket = (char *)json_string_value(json_object_get(o, "socket"));
	if (json_is_string(json_object_get(o, "source"))) {
		const char *src = json_string_value(json_object_get(o,
		    "source"));

		if (pol_addr_parse(src, strlen(src), &cs.source_addr) != 0) {
			snprintf(err, errlen, "sessions[%zu] (%s): bad source",
			    idx, cs.id);
			return -1;
		}
		cs.source = (char *)src;
	}
	if (json_is_integer(json_object_get(o, "vsock_cid")))
		cs.vsock_cid = json_integer_value(json_object_get(o,
		    "vsock_cid"));
	if (px_session_find(cs.id) != NULL) {
		snprintf(err, errlen, "sessions[%zu]: %s is also declared in "
		    "the configuration", idx, cs.id);
		return -1;
	}
	/* what an admin made: the default socket, or one under
	 * listen.socket_prefixes */
	s = px_session_create(&cs, PX_ORIGIN_ADMIN, NULL, why, sizeof(why));
	if (s == NULL && cs.socket != NULL) {
		/* an older sluiced's state, a prefix gone from the file, an
		 * edited file: the session stays, on its default socket */
		px_log(PX_WARN, "%s: session %s: %s; restored on its default "
		    "socket instead", __func__, cs.id, why);
		cs.socket = NULL;
		s = px_session_create(&cs, PX_ORIGIN_ADMIN, NULL, why,
		    sizeof(why));
	}
	if (s == NULL) {
		snprintf(err, errlen, "sessions[%zu] (%s): %s", idx, cs.id, why);
		return -1;
	}
	rc = restore_grants(s, json_object_get(o, "grants"), err, errlen);
	if (rc == 0)
		rc = restore_egress(s, json_object_get(o, "egress"), err,
		    errlen);
	return rc;
}

/* The state file's rules: an array of at most CTL_RULES_MAX rules
 * that rule_spec_parse reads, no name twice. */
static int
rules_check(json_t *a, char *err, size_t errlen)
{
	struct rule_spec s;
	json_t *o;
	size_t i, j;
	char why[200];

	if (!json_is_array(a) || json_array_size(a) > CTL_RULES_MAX)
		return errf(err, errlen, "rules: expected an array of at most "
		    "%d rules", CTL_RULES_MAX);
	json_array_foreach(a, i, o) {
		if (rule_spec_parse(o, &s, why, sizeof(why)) != 0)
			return errf(err, errlen, "rules[%zu]: %s", i, why);
		rule_spec_free(&s);
		for (j = 0; j < i; j++)
			if (json_equal(json_object_get(o, "name"),
			    json_object_get(json_array_get(a, j), "name")))
				return errf(err, errlen, "rules[%zu]: the name "
				    "of rules[%zu]", i, j);
	}
	return 0;
}

/* j: the state document (consumed), or NULL with je saying why. */
static int
state_restore(json_t *j, const json_error_t *je, const char *path,
    char *err, size_t errlen)
{
	json_t *sessions, *o;
	size_t i;

	if (j == NULL) {
		if (je->line > 0)
			snprintf(err, errlen, "%s:%d:%d: %s", path, je->line,
			    je->column, je->text);
		else
			snprintf(err, errlen, "%s: %s", path, je->text);
		return -1;
	}
	if (!json_is_object(j)) {
		snprintf(err, errlen, "%s: not a JSON object", path);
		goto bad;
	}
	if (json_integer_value(json_object_get(j, "version")) != 1) {
		snprintf(err, errlen, "%s: unknown state version", path);
		goto bad;
	}
	/* the ceilings are what the document says, nothing older */
	json_decref(ctl_api_ceiling);
	ctl_api_ceiling = NULL;
	o = json_object_get(j, "ceiling");
	if (o != NULL && !json_is_null(o)) {
		char why[256];

		if (!json_is_object(o) || ctl_apply_ceiling_json(o, why,
		    sizeof(why)) != 0) {
			snprintf(err, errlen, "%s: %s", path, json_is_object(o) ?
			    why : "ceiling: expected an object or null");
			goto bad;
		}
		ctl_api_ceiling = json_incref(o);
	}
	/* the API's request rules, checked here; rules.c puts them in
	 * force (ctl_rules_apply) */
	json_decref(ctl_api_rules);
	ctl_api_rules = NULL;
	o = json_object_get(j, "rules");
	if (o != NULL && !json_is_null(o)) {
		char why[300];

		if (rules_check(o, why, sizeof(why)) != 0) {
			snprintf(err, errlen, "%s: %s", path, why);
			goto bad;
		}
		ctl_api_rules = json_incref(o);
	}
	sessions = json_object_get(j, "sessions");
	if (sessions != NULL && !json_is_array(sessions)) {
		snprintf(err, errlen, "%s: sessions: expected an array", path);
		goto bad;
	}
	json_array_foreach(sessions, i, o) {
		char why[300];

		if (!json_is_object(o) || restore_session(o, i, why,
		    sizeof(why)) != 0) {
			snprintf(err, errlen, "%s: %s", path,
			    json_is_object(o) ? why : "not an object");
			goto bad;
		}
	}
	json_decref(j);
	return 0;
bad:
	json_decref(j);
	return -1;
}

int
ctl_state_load(const char *path, char *err, size_t errlen)
{
	json_error_t je;
	json_t *j;

	if (access(path, F_OK) != 0 && errno == ENOENT)
		return 0;   /* first start */
	/* as strict as every JSON text sluiced reads (jsonstrict.h) */
	j = jsonstrict_load_file(path, CTL_STATE_MAX, &je);
	return state_restore(j, &je, path, err, errlen);
}

int
ctl_state_restore(const char *text, size_t len, const char *name,
    char *err, size_t errlen)
{
	json_error_t je;

	return state_restore(jsonstrict_load(text, len, &je), &je, name, err,
	    errlen);
}
