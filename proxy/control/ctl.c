/*
 * ctl.c: the daemon side of the control plane: the operations of ctl.h
 * (sessions, grants, ceilings, prompt answers, JSON views).  The state
 * file is state.c's, the metrics text metrics.c's.
 *
 * Every change goes the same way: check, apply in memory, write the
 * admin record (who, what, before and after), save the state file, and
 * only then act on it (events, closing what it no longer admits).  Until
 * the loop runs again nobody sees the change, so the record comes before
 * the change takes effect: a record that cannot be written undoes the
 * change and the call fails with CTL_LOG_UNAVAILABLE (503); nothing
 * happens that the log does not show.  A change whose state cannot be
 * saved is undone too and a second record says so (outcome "undone"),
 * so what survives a restart is always what the API and the log say.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "proxy/daemon.h"
#include "proxy/relay/relay.h"
#include "proxy/control/ctl.h"
#include "proxy/control/control-int.h"
#include "proxy/control/events.h"

/* ------------------------------------------------------------------ */
/* Events (events.h): what changed, for the event stream. */

static void
session_event(const char *action, json_t *session)
{
	if (session != NULL)
		ev_publish("session", json_pack("{s:s,s:o}", "action", action,
		    "session", session));
}

/* ------------------------------------------------------------------ */
/* Admin records. */

/*
 * What an admin record says changed: {"before": B, "after": A} (the
 * session or ceiling view; references stolen, NULL is null), or for a
 * grant {"grant": {"host","port"}, "grants": N}: the change and the count
 * after it, not both lists.
 */
static json_t *
change_ba(json_t *before, json_t *after)
{
	return json_pack("{s:o,s:o}", "before", before ? before : json_null(),
	    "after", after ? after : json_null());
}

static json_t *
change_grant(const char *host, uint16_t port, size_t ngrants)
{
	return json_pack("{s:{s:s,s:i},s:I}", "grant", "host", host, "port",
	    (int)port, "grants", (json_int_t)ngrants);
}

/* Writes an admin record with the fields of change (borrowed) in order.
 * 0 / -1 when the record could not be written (logged). */
static int
admin_record_s(const struct ctl_actor *a, const char *action,
    const char *session, const char *target, json_t *change,
    const char *outcome)
{
	struct clog_rec *r;
	const char *k;
	json_t *v;

	if (change == NULL)
		goto fail;      /* out of memory: no record, no change */
	r = clog_rec_new("admin");
	clog_rec_str(r, "action", action);
	if (session != NULL)
		clog_rec_str(r, "session", session);
	clog_rec_str(r, "who", a ? a->who : "sluiced");
	clog_rec_str(r, "role", a ? a->role : NULL);
	clog_rec_str(r, "target", target);
	json_object_foreach(change, k, v)
		clog_rec_json(r, k, json_incref(v));
	clog_rec_str(r, "outcome", outcome);
	if (clog_write(px.log, r) == 0)
		return 0;
fail:
	px_log(PX_ERR, "%s: cannot write the admin record for %s", __func__,
	    action);
	return -1;
}

/*
 * The record of a change about to take effect (outcome "ok"); when it
 * cannot be written, e says so and the caller undoes the change.
 */
static int
admin_commit(const struct ctl_actor *a, const char *action,
    const char *session, const char *target, json_t *change,
    struct ctl_err *e)
{
	if (admin_record_s(a, action, session, target, change, "ok") != 0)
		return ctl_fail(e, CTL_LOG_UNAVAILABLE, "the connection log "
		    "cannot be written (%s): %s was not done",
		    clog_path(px.log), action);
	return 0;
}

/* The state file did not take a change its record announced: the change
 * is undone (or, outcome "not_saved", could not be) and a record says so;
 * e keeps the state file's error. */
static void
admin_undone(const struct ctl_actor *a, const char *action,
    const char *session, const char *target, json_t *change,
    const char *outcome)
{
	if (admin_record_s(a, action, session, target, change, outcome) != 0)
		px_log(PX_ERR, "%s: %s: the log says done, but the state file "
		    "did not take it and it was %s", __func__, action,
		    strcmp(outcome, "undone") == 0 ? "undone" : "not saved");
}

void
ctl_audit(const struct ctl_actor *a, const char *action, const char *target,
    const char *outcome)
{
	json_t *change = change_ba(NULL, NULL);

	(void)admin_record_s(a, action, NULL, target, change, outcome);
	json_decref(change);
}

/* ------------------------------------------------------------------ */
/* JSON views. */

static const char *
transport_name(enum px_transport t)
{
	switch (t) {
	case PX_T_UNIX: return "unix";
	case PX_T_TCP: return "tcp";
	case PX_T_VSOCK: return "vsock";
	case PX_T_TRANSPARENT: return "transparent";
	}
	return "unknown";
}

void *
ctl_json_session(const struct px_session *s)
{
	const struct pol_session *ps = s->pol;
	enum pol_tier tier = pol_session_tier(ps);
	enum pol_tier ceil = pol_state_ceiling(px.state,
	    pol_session_tenant(ps));
	char src[48];

	if (s->transport == PX_T_TCP)
		pol_addr_format(&s->source, src, sizeof(src));
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:b,s:i,"
	    "s:o,s:o,s:{s:I,s:I,s:I,s:I}}",
	    "id", pol_session_id(ps),
	    "tenant", pol_session_tenant(ps),
	    "user", pol_session_user(ps),
	    "tier", pol_tier_name(tier),
	    "ceiling", pol_tier_name(ceil),
	    "effective_tier", pol_tier_name(tier < ceil ? tier : ceil),
	    "transport", transport_name(s->transport),
	    "socket", s->transport == PX_T_UNIX ?
		json_string(s->socket_path) : json_null(),
	    "source", s->transport == PX_T_TCP ? json_string(src) :
		json_null(),
	    "vsock_cid", s->transport == PX_T_VSOCK ?
		json_integer(s->vsock_cid) : json_null(),
	    "from_config", s->from_config,
	    "connections", s->nconns,
	    "grants", ctl_grants_json(ps),
	    "egress", ctl_egress_json(ps),
	    "counters",
		"allowed", (json_int_t)s->n_allowed,
		"denied", (json_int_t)s->n_denied,
		"bytes_up", (json_int_t)s->bytes_up,
		"bytes_down", (json_int_t)s->bytes_down);
}

void *
ctl_json_sessions(void)
{
	json_t *a = json_array();
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry)
		json_array_append_new(a, ctl_json_session(s));
	return json_pack("{s:o}", "sessions", a);
}

void *
ctl_json_ceiling(void)
{
	json_t *t = json_object();
	const char *tenant;
	enum pol_tier tier;
	size_t i;

	for (i = 0; pol_state_tenant_at(px.state, i, &tenant, &tier) == 0; i++)
		json_object_set_new(t, tenant, json_string(pol_tier_name(
		    pol_state_ceiling(px.state, tenant))));
	return json_pack("{s:s,s:o,s:s}",
	    "tier", pol_tier_name(pol_state_global_ceiling(px.state)),
	    "tenants", t,
	    "source", ctl_api_ceiling != NULL ? "api" : "config");
}

void *
ctl_json_health(void)
{
	static const char *const fw_names[] = {
		"disabled", "applied", "failed"
	};
	struct px_listener *l;
	char at[32];
	struct tm tm;
	int nl = 0;

	TAILQ_FOREACH(l, &px.listeners, entry)
		nl++;
	at[0] = '\0';
	if (px.fw.applied_at != 0 && gmtime_r(&px.fw.applied_at, &tm) != NULL)
		strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_pack("{s:s,s:s,s:I,s:i,s:I,s:i,s:i,"
	    "s:{s:s,s:b,s:I,s:I,s:o,s:b,s:I,s:I,s:s,s:b},"
	    "s:{s:s,s:s,s:s?,s:s?},s:s,s:b,s:I}",
	    "status", clog_healthy(px.log) && !px.draining ? "ok" : "degraded",
	    "version", PACKAGE_VERSION,
	    "uptime_s", (json_int_t)(time(NULL) - px.started),
	    "listeners", nl,
	    "sessions", (json_int_t)pol_session_count(px.state),
	    "connections", px_relay_nconns(),
	    "tunnels", px_relay_count_tunnels(),
	    "log",
		"path", clog_path(px.log),
		"healthy", clog_healthy(px.log),
		"records", (json_int_t)clog_written(px.log),
		"failures", (json_int_t)clog_failed(px.log),
		"free_bytes", clog_free_bytes(px.log) == UINT64_MAX ?
		    json_null() : json_integer((json_int_t)
		    clog_free_bytes(px.log)),
		"low_space", clog_low_space(px.log),
		"refusals_folded", (json_int_t)px_refusals_folded_total,
		"seq", (json_int_t)clog_last_seq(px.log),
		"hash", clog_last_hash(px.log),
		"keyed", clog_keyed(px.log),
	    "firewall",
		"status", fw_names[px.fw.status],
		"table", px.fw.table,
		"applied_at", at[0] != '\0' ? at : NULL,
		"error", px.fw.error[0] != '\0' ? px.fw.error : NULL,
	    "ceiling", pol_tier_name(pol_state_global_ceiling(px.state)),
	    "draining", px.draining,
	    "approvers", (json_int_t)ev_approvers());
}

/* ------------------------------------------------------------------ */
/* Sessions and grants. */

int
ctl_session_create(const struct ctl_actor *a,
    const struct ctl_session_spec *spec, struct px_session **out,
    struct ctl_err *e)
{
	struct cfg_session cs;
	struct px_session *s;
	enum px_refusal ref;
	json_t *change;
	char why[512];
	int logged;
	int ntransports = (spec->socket != NULL) + (spec->source != NULL) +
	    (spec->vsock_cid >= 0);

	if (px.draining)
		return ctl_fail(e, CTL_UNAVAILABLE, "sluiced is shutting down");
	if (!pol_id_valid(spec->id))
		return ctl_fail(e, CTL_BAD_REQUEST, "id: must match "
		    "[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}");
	if (spec->tenant[0] != '\0' && !pol_id_valid(spec->tenant))
		return ctl_fail(e, CTL_BAD_REQUEST, "tenant: must match "
		    "[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}");
	if (ntransports > 1)
		return ctl_fail(e, CTL_BAD_REQUEST, "a session has at most one of "
		    "socket, source and vsock_cid");
	if (px_session_find(spec->id) != NULL)
		return ctl_fail(e, CTL_CONFLICT, "session %s exists", spec->id);
	memset(&cs, 0, sizeof(cs));
	cs.id = (char *)spec->id;
	cs.tenant = (char *)spec->tenant;
	cs.user = (char *)spec->user;
	cs.tier = spec->tier;
	cs.vsock_cid = spec->vsock_cid;
	if (spec->vsock_cid == 0 || spec->vsock_cid == 2 ||
	    spec->vsock_cid > 0xfffffffeLL)
		return ctl_fail(e, CTL_BAD_REQUEST, "vsock_cid: 1 or 3..4294967294");
	if (spec->source != NULL) {
		if (pol_addr_parse(spec->source, strlen(spec->source),
		    &cs.source_addr) != 0)
			return ctl_fail(e, CTL_BAD_REQUEST, "source: not an IP "
			    "address");
		cs.source = (char *)spec->source;
	}
	/* shown in records and views as it is: nothing a terminal would
	 * act on (the path's form is the registry's to check) */
	if (spec->socket != NULL &&
	    !clog_text_safe(spec->socket, strlen(spec->socket)))
		return ctl_fail(e, CTL_BAD_REQUEST, "socket: control, bidi or "
		    "zero-width characters, or not UTF-8");
	cs.socket = (char *)spec->socket;
	if (px_session_transport_taken(&cs))
		return ctl_fail(e, CTL_CONFLICT, "that transport belongs to "
		    "another session");
	/* the socket's path is the registry's to check (session.c) */
	s = px_session_create(&cs, spec->admin ? PX_ORIGIN_ADMIN :
	    PX_ORIGIN_APP, &ref, why, sizeof(why));
	if (s == NULL)
		return ctl_fail(e, ref == PX_REF_FORBIDDEN ? CTL_FORBIDDEN :
		    ref == PX_REF_TAKEN ? CTL_CONFLICT : ref == PX_REF_BAD ?
		    CTL_BAD_REQUEST : CTL_INTERNAL, "%s", why);
	change = change_ba(NULL, ctl_json_session(s));
	logged = admin_commit(a, "session_create", spec->id, spec->id, change,
	    e) == 0;
	if (!logged || ctl_state_save(e) != 0) {
		/* nothing has reached the session yet: the loop has not run */
		if (logged)
			admin_undone(a, "session_create", spec->id, spec->id,
			    change, "undone");
		px_session_destroy(s, POL_R_SESSION_CLOSED);
		json_decref(change);
		return -1;
	}
	json_decref(change);
	session_event("create", ctl_json_session(s));     /* events */
	if (out != NULL)
		*out = s;
	return 0;
}

int
ctl_session_delete(const struct ctl_actor *a, const char *id,
    struct ctl_err *e)
{
	struct px_session *s = px_session_find(id);
	json_t *change;

	if (s == NULL)
		return ctl_fail(e, CTL_NOT_FOUND, "no session %s", id);
	if (s->from_config)
		return ctl_fail(e, CTL_CONFLICT, "session %s is declared in the "
		    "configuration file; remove it there and reload", id);
	change = change_ba(ctl_json_session(s), NULL);
	/* closing its connections cannot be undone: the record first */
	if (admin_commit(a, "session_delete", id, id, change, e) != 0) {
		json_decref(change);
		return -1;
	}
	px_session_destroy(s, POL_R_SESSION_CLOSED);
	if (ctl_state_save(e) != 0) {
		/* gone now; the old state restores it at the next start */
		admin_undone(a, "session_delete", id, id, change, "not_saved");
		json_decref(change);
		return -1;
	}
	json_decref(change);
	session_event("delete", json_pack("{s:s}", "id", id));   /* events */
	return 0;
}

int
ctl_session_set_tier(const struct ctl_actor *a, const char *id,
    enum pol_tier tier, struct ctl_err *e)
{
	struct px_session *s = px_session_find(id);
	enum pol_tier old;
	json_t *before, *change;
	int logged;

	if (s == NULL)
		return ctl_fail(e, CTL_NOT_FOUND, "no session %s", id);
	if (s->from_config)
		return ctl_fail(e, CTL_CONFLICT, "session %s is declared in the "
		    "configuration file; change its tier there and reload", id);
	old = pol_session_tier(s->pol);
	before = ctl_json_session(s);
	pol_session_set_tier(s->pol, tier);
	change = change_ba(before, ctl_json_session(s));
	logged = admin_commit(a, "session_set_tier", id, id, change, e) == 0;
	if (!logged || ctl_state_save(e) != 0) {
		if (logged)
			admin_undone(a, "session_set_tier", id, id, change,
			    "undone");
		pol_session_set_tier(s->pol, old);
		json_decref(change);
		return -1;
	}
	json_decref(change);
	session_event("set_tier", ctl_json_session(s));   /* events */
	if (tier < old)
		px_prompts_deny_session(s, POL_R_TIER_LOWERED);
	else
		px_prompts_recheck(s);
	return 0;
}

static int
grant_change(const struct ctl_actor *a, const char *id, const char *host,
    uint16_t port, int add, struct ctl_err *e)
{
	struct px_session *s = px_session_find(id);
	struct pol_target t;
	char target[POL_HOST_MAX + 80];
	const char *action = add ? "grant_add" : "grant_remove";
	json_t *change;
	size_t n;
	int logged;

	if (s == NULL)
		return ctl_fail(e, CTL_NOT_FOUND, "no session %s", id);
	if (port == 0)
		return ctl_fail(e, CTL_BAD_REQUEST, "port: 1..65535");
	if (ctl_grant_host(host, &t) != 0)
		return ctl_fail(e, CTL_BAD_REQUEST, "host: not a canonical host "
		    "name or address");
	if (add && pol_session_has_grant(s->pol, t.host, port))
		return 0;   /* already granted: nothing changes */
	/* every grant is kept, saved and checked on each decision of the
	 * chat: a bounded number of them */
	n = pol_session_grant_count(s->pol);
	if (add && n >= (size_t)px.cfg->max_grants_per_session)
		return ctl_fail(e, CTL_TOO_MANY_GRANTS, "session %s has %zu "
		    "grants, limits.max_grants_per_session; remove one first",
		    id, n);
	if (add) {
		if (pol_session_grant(s->pol, t.host, port) != 0)
			return ctl_fail(e, CTL_INTERNAL, "out of memory");
	} else if (pol_session_revoke(s->pol, t.host, port) != 0)
		return ctl_fail(e, CTL_NOT_FOUND, "no grant %s:%u for %s", t.host,
		    port, id);
	snprintf(target, sizeof(target), "%s %s:%u", id, t.host, port);
	/* the record names the change, not the lists before and after */
	change = change_grant(t.host, port, pol_session_grant_count(s->pol));
	logged = admin_commit(a, action, id, target, change, e) == 0;
	if (!logged || ctl_state_save(e) != 0) {
		/* undo: what was not logged and saved did not happen */
		if ((add ? pol_session_revoke(s->pol, t.host, port) :
		    pol_session_grant(s->pol, t.host, port)) != 0)
			px_log(PX_ERR, "%s: %s %s:%u: cannot undo the change "
			    "the state file did not take", __func__, id, t.host,
			    port);
		else if (logged)
			admin_undone(a, action, id, target, change, "undone");
		json_decref(change);
		return -1;
	}
	json_decref(change);
	if (!add)
		px_relay_close_exceeding(s);
	return 0;
}

int
ctl_grant_add(const struct ctl_actor *a, const char *id, const char *host,
    uint16_t port, struct ctl_err *e)
{
	return grant_change(a, id, host, port, 1, e);
}

int
ctl_grant_remove(const struct ctl_actor *a, const char *id,
    const char *host, uint16_t port, struct ctl_err *e)
{
	return grant_change(a, id, host, port, 0, e);
}

int
ctl_session_set_egress(const struct ctl_actor *a, const char *id,
    void *egress, struct ctl_err *e)
{
	struct px_session *s = px_session_find(id);
	char why[256];
	json_t *before, *change;
	int logged;

	if (s == NULL)
		return ctl_fail(e, CTL_NOT_FOUND, "no session %s", id);
	before = ctl_egress_json(s->pol);
	if (ctl_egress_set_json(s->pol, egress, why, sizeof(why)) != 0) {
		json_decref(before);
		return ctl_fail(e, CTL_BAD_REQUEST, "%s", why);
	}
	change = change_ba(json_incref(before), ctl_egress_json(s->pol));
	logged = admin_commit(a, "session_egress", id, id, change, e) == 0;
	if (!logged || ctl_state_save(e) != 0) {
		/* undo: what was not logged and saved did not happen */
		if (ctl_egress_set_json(s->pol, before, why, sizeof(why)) != 0)
			px_log(PX_ERR, "%s: %s: cannot undo the change the state "
			    "file did not take: %s", __func__, id, why);
		else if (logged)
			admin_undone(a, "session_egress", id, id, change,
			    "undone");
		json_decref(before);
		json_decref(change);
		return -1;
	}
	json_decref(before);
	json_decref(change);
	session_event("set_egress", ctl_json_session(s));
	/* a name now denied closes what is open to it */
	px_relay_close_exceeding(s);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Ceilings. */

static json_t *
api_ceiling_copy(void)
{
	if (ctl_api_ceiling == NULL)
		return json_pack("{s:n,s:{}}", "tier", "tenants");
	return json_deep_copy(ctl_api_ceiling);
}

static int
ceiling_commit(const struct ctl_actor *a, json_t *next, const char *target,
    int close_ex, size_t *closed, struct ctl_err *e)
{
	json_t *before = ctl_json_ceiling(), *prev = ctl_api_ceiling;
	json_t *change = NULL;
	char err[256] = "";
	int logged;

	ctl_api_ceiling = next;
	/* rebuild from the file's values, then the API's on top */
	if (ctl_apply_file_ceilings(px.cfg) != 0)
		snprintf(err, sizeof(err), "out of memory");
	if (err[0] == '\0' &&
	    ctl_apply_ceiling_json(ctl_api_ceiling, err, sizeof(err)) == 0) {
		change = change_ba(json_incref(before), ctl_json_ceiling());
		logged = admin_commit(a, "ceiling_set", NULL, target, change,
		    e) == 0;
		if (logged && ctl_state_save(e) == 0)
			goto done;
		if (logged)
			admin_undone(a, "ceiling_set", NULL, target, change,
			    "undone");
	}
	if (e != NULL && e->code == CTL_OK)
		ctl_fail(e, CTL_BAD_REQUEST, "%s", err);
	ctl_api_ceiling = prev;
	json_decref(next);
	/* the file's ceilings were rebuilt above: back to the old ones */
	if (ctl_apply_file_ceilings(px.cfg) != 0)
		px_log(PX_ERR, "%s: a tenant ceiling could not be restored "
		    "(out of memory)", __func__);
	ctl_apply_api_ceilings();
	json_decref(before);
	json_decref(change);
	return -1;
done:
	json_decref(prev);
	json_decref(before);
	json_decref(change);
	if (closed != NULL)
		*closed = close_ex ? px_relay_close_exceeding(NULL) : 0;
	px_prompts_recheck(NULL);
	ev_publish("ceiling", ctl_json_ceiling());        /* events */
	return 0;
}

int
ctl_ceiling_set(const struct ctl_actor *a, const char *tenant,
    enum pol_tier tier, int close_ex, size_t *closed, struct ctl_err *e)
{
	json_t *next = api_ceiling_copy();

	if (e != NULL)
		e->code = CTL_OK;
	if (tenant == NULL)
		json_object_set_new(next, "tier",
		    json_string(pol_tier_name(tier)));
	else {
		json_t *t = json_object_get(next, "tenants");

		if (!pol_id_valid(tenant)) {
			json_decref(next);
			return ctl_fail(e, CTL_BAD_REQUEST, "tenant: must match "
			    "[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}");
		}
		if (!json_is_object(t)) {
			t = json_object();
			json_object_set_new(next, "tenants", t);
		}
		json_object_set_new(t, tenant,
		    json_string(pol_tier_name(tier)));
	}
	return ceiling_commit(a, next, tenant ? tenant : "global", close_ex,
	    closed, e);
}

int
ctl_ceiling_clear(const struct ctl_actor *a, const char *tenant,
    struct ctl_err *e)
{
	json_t *next = api_ceiling_copy();
	json_t *t = json_object_get(next, "tenants");

	if (e != NULL)
		e->code = CTL_OK;
	if (tenant == NULL || !json_is_object(t) ||
	    json_object_get(t, tenant) == NULL) {
		json_decref(next);
		return ctl_fail(e, CTL_NOT_FOUND, "no ceiling set for tenant %s",
		    tenant ? tenant : "(none)");
	}
	json_object_del(t, tenant);
	return ceiling_commit(a, next, tenant, 0, NULL, e);
}

/* ------------------------------------------------------------------ */
/* Prompts: the answer of a person (API) or of the webhook. */

int
ctl_prompt_answer(const struct ctl_actor *a, const char *id,
    enum pol_answer ans, struct ctl_err *e)
{
	struct px_prompt_view v;

	switch (px_prompt_lookup(id, &v)) {
	case PX_PROMPT_NONE:
		return ctl_fail(e, CTL_NOT_FOUND, "no prompt %s", id);
	case PX_PROMPT_DONE:
		return ctl_fail(e, CTL_CONFLICT, "prompt %s was already answered "
		    "(%s)", id, pol_answer_name(v.answer));
	case PX_PROMPT_PENDING:
		break;
	}
	if (ans == POL_ANSWER_TIMEOUT)
		return ctl_fail(e, CTL_BAD_REQUEST, "\"timeout\" is not an answer");
	if (ans == POL_ANSWER_ALLOW_CHAT && v.session_alive &&
	    ctl_grant_add(a, v.session, v.host, v.port, e) != 0)
		return -1;   /* not granted: the prompt stays pending */
	if (px_prompt_resolve(id, ans, a ? a->who : "sluiced") != 0)
		return ctl_fail(e, CTL_CONFLICT, "prompt %s is no longer pending",
		    id);
	return 0;
}

void *
ctl_json_prompts(void)
{
	return px_prompts_json();
}

void *
ctl_json_prompt(const char *id)
{
	return px_prompt_json(id);
}

const char *
ctl_inspect_ca(void)
{
	return px_inspect_ca_pem();
}
