/*
 * ctl.c: the daemon side of the control plane.
 *
 * Every change goes the same way: check, apply, save the state file,
 * write an admin record (who, what, before and after).  A change whose
 * state cannot be saved is undone and reported, so what survives a
 * restart is always what the API said it did.
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

#include "px.h"
#include "ctl.h"
#include "events.h"
#include "jsonstrict.h"

/* Ceilings the API set; they win over the configuration file's. */
static json_t *api_ceiling;      /* {"tier": T|null, "tenants": {..}} */

/* Far above what any state saves to; ctl_state_save refuses more, so
 * that a file it writes is always one the next start can read. */
#define CTL_STATE_MAX (64u << 20)

static int
fail(struct ctl_err *e, enum ctl_code code, const char *fmt, ...)
{
	va_list ap;

	if (e != NULL) {
		e->code = code;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return -1;
}

/*
 * A grant's host as the policy stores it: a name (brackets refused), or
 * an IP literal in canonical text, IPv6 with or without brackets.
 */
static int
grant_host(const char *host, struct pol_target *t)
{
	size_t len = strlen(host);

	if (len > 2 && host[0] == '[' && host[len - 1] == ']') {
		host++;
		len -= 2;
	}
	if (memchr(host, ':', len) != NULL) {
		memset(t, 0, sizeof(*t));
		if (pol_addr_parse(host, len, &t->addr) != 0 ||
		    t->addr.family != AF_INET6)
			return -1;
		t->kind = POL_HOST_V6;
		pol_addr_format(&t->addr, t->host, sizeof(t->host));
		return 0;
	}
	return pol_host_parse(host, len, 0, t) == POL_R_NONE ? 0 : -1;
}

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

static void
admin_record_s(const struct ctl_actor *a, const char *action,
    const char *session, const char *target, json_t *before, json_t *after,
    const char *outcome)
{
	struct clog_rec *r = clog_rec_new("admin");

	clog_rec_str(r, "action", action);
	if (session != NULL)
		clog_rec_str(r, "session", session);
	clog_rec_str(r, "who", a ? a->who : "sluiced");
	clog_rec_str(r, "role", a ? a->role : NULL);
	clog_rec_str(r, "target", target);
	clog_rec_json(r, "before", before ? before : json_null());
	clog_rec_json(r, "after", after ? after : json_null());
	clog_rec_str(r, "outcome", outcome);
	if (clog_write(px.log, r) != 0)
		px_log(PX_ERR, "%s: cannot write the admin record for %s",
		    __func__, action);
}

static void
admin_record(const struct ctl_actor *a, const char *action,
    const char *target, json_t *before, json_t *after, const char *outcome)
{
	admin_record_s(a, action, NULL, target, before, after, outcome);
}

void
ctl_audit(const struct ctl_actor *a, const char *action, const char *target,
    const char *outcome)
{
	admin_record(a, action, target, NULL, NULL, outcome);
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

static json_t *
grants_json(const struct pol_session *ps)
{
	json_t *a = json_array();
	const char *host;
	uint16_t port;
	size_t i;

	for (i = 0; pol_session_grant_at(ps, i, &host, &port) == 0; i++)
		json_array_append_new(a, json_pack("{s:s,s:i}", "host", host,
		    "port", (int)port));
	return a;
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
	    "s:o,s:{s:I,s:I,s:I,s:I}}",
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
	    "grants", grants_json(ps),
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
	    "source", api_ceiling != NULL ? "api" : "config");
}

static int
count_tunnels(void)
{
	struct px_conn *c;
	int n = 0;

	TAILQ_FOREACH(c, &px.conns, entry)
		if (c->state == PX_S_TUNNEL)
			n++;
	return n;
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
	return json_pack("{s:s,s:s,s:I,s:i,s:I,s:i,s:i,s:{s:s,s:b,s:I,s:I},"
	    "s:{s:s,s:s,s:s?,s:s?},s:s,s:b,s:I}",
	    "status", clog_healthy(px.log) && !px.draining ? "ok" : "degraded",
	    "version", PACKAGE_VERSION,
	    "uptime_s", (json_int_t)(time(NULL) - px.started),
	    "listeners", nl,
	    "sessions", (json_int_t)pol_session_count(px.state),
	    "connections", px.nconns,
	    "tunnels", count_tunnels(),
	    "log",
		"path", clog_path(px.log),
		"healthy", clog_healthy(px.log),
		"records", (json_int_t)clog_written(px.log),
		"failures", (json_int_t)clog_failed(px.log),
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
/* Metrics, Prometheus text format 0.0.4. */

static void
label_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n') {
			fputs("\\n", f);
			continue;
		}
		fputc(*s, f);
	}
}

/* METRIC{session="<id>"[,LABEL]} V */
static void
session_sample(FILE *f, const char *metric, const struct px_session *s,
    const char *label, unsigned long long v)
{
	fprintf(f, "%s{session=\"", metric);
	label_escape(f, pol_session_id(s->pol));
	fprintf(f, "\"%s%s} %llu\n", label ? "," : "", label ? label : "", v);
}

char *
ctl_metrics_text(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct px_session *s;
	uint64_t cum = 0;
	int v, r, i;

	if (f == NULL)
		return NULL;
	fputs("# HELP sluice_decisions_total Decisions by verdict and reason.\n"
	    "# TYPE sluice_decisions_total counter\n", f);
	for (v = 0; v < 3; v++)
		for (r = 0; r < POL_R__COUNT; r++)
			if (px.m.decisions[v][r] != 0 || r == POL_R_NONE)
				fprintf(f, "sluice_decisions_total{decision=\"%s\","
				    "reason=\"%s\"} %llu\n",
				    pol_verdict_name((enum pol_verdict)v),
				    pol_reason_name((enum pol_reason)r),
				    (unsigned long long)px.m.decisions[v][r]);
	fputs("# HELP sluice_closes_total Allowed connections closed, by "
	    "reason.\n# TYPE sluice_closes_total counter\n", f);
	for (r = 0; r < POL_R__COUNT; r++)
		if (px.m.closes[r] != 0 || r == POL_R_NONE)
			fprintf(f, "sluice_closes_total{reason=\"%s\"} %llu\n",
			    pol_reason_name((enum pol_reason)r),
			    (unsigned long long)px.m.closes[r]);
	fprintf(f, "# HELP sluice_bytes_total Bytes relayed.\n"
	    "# TYPE sluice_bytes_total counter\n"
	    "sluice_bytes_total{direction=\"up\"} %llu\n"
	    "sluice_bytes_total{direction=\"down\"} %llu\n",
	    (unsigned long long)px.m.bytes_up,
	    (unsigned long long)px.m.bytes_down);
	fprintf(f, "# HELP sluice_accepted_total Connections accepted.\n"
	    "# TYPE sluice_accepted_total counter\n"
	    "sluice_accepted_total %llu\n"
	    "# HELP sluice_open_connections Client connections open.\n"
	    "# TYPE sluice_open_connections gauge\n"
	    "sluice_open_connections %d\n"
	    "# HELP sluice_open_tunnels CONNECT tunnels relaying.\n"
	    "# TYPE sluice_open_tunnels gauge\n"
	    "sluice_open_tunnels %d\n"
	    "# HELP sluice_sessions Sessions.\n"
	    "# TYPE sluice_sessions gauge\n"
	    "sluice_sessions %zu\n"
	    "# HELP sluice_log_healthy 1 while the connection log is writable.\n"
	    "# TYPE sluice_log_healthy gauge\n"
	    "sluice_log_healthy %d\n",
	    (unsigned long long)px.m.accepted, px.nconns, count_tunnels(),
	    pol_session_count(px.state), clog_healthy(px.log));
	fputs("# HELP sluice_dns_duration_seconds Name resolution latency.\n"
	    "# TYPE sluice_dns_duration_seconds histogram\n", f);
	for (i = 0; i < PX_DNS_BUCKETS; i++) {
		cum += px.m.dns[i];
		fprintf(f, "sluice_dns_duration_seconds_bucket{le=\"%g\"} %llu\n",
		    px_dns_bucket_us[i] / 1e6, (unsigned long long)cum);
	}
	cum += px.m.dns[PX_DNS_BUCKETS];
	fprintf(f, "sluice_dns_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
	    "sluice_dns_duration_seconds_sum %.6f\n"
	    "sluice_dns_duration_seconds_count %llu\n",
	    (unsigned long long)cum, px.m.dns_sum_s,
	    (unsigned long long)px.m.dns_count);
	{
		static const char *const kinds[5] = {
			"allow_once", "allow_chat", "deny", "timeout", "policy"
		};

		fprintf(f, "# HELP sluice_prompts_pending Prompts waiting for "
		    "an answer.\n# TYPE sluice_prompts_pending gauge\n"
		    "sluice_prompts_pending %zu\n"
		    "# HELP sluice_approvers Event-stream subscribers that "
		    "may answer prompts.\n# TYPE sluice_approvers gauge\n"
		    "sluice_approvers %zu\n"
		    "# HELP sluice_prompts_total Prompts raised.\n"
		    "# TYPE sluice_prompts_total counter\n"
		    "sluice_prompts_total %llu\n"
		    "# HELP sluice_prompt_answers_total Prompts resolved, by "
		    "answer (timeout and policy: resolved by sluiced).\n"
		    "# TYPE sluice_prompt_answers_total counter\n",
		    px_prompts_pending(), ev_approvers(),
		    (unsigned long long)px.m.prompts_raised);
		for (i = 0; i < 5; i++)
			fprintf(f, "sluice_prompt_answers_total{answer=\"%s\"} "
			    "%llu\n", kinds[i],
			    (unsigned long long)px.m.prompts_answered[i]);
		fprintf(f, "# HELP sluice_prompt_answer_seconds Time from a "
		    "prompt to a person's answer.\n"
		    "# TYPE sluice_prompt_answer_seconds summary\n"
		    "sluice_prompt_answer_seconds_sum %.3f\n"
		    "sluice_prompt_answer_seconds_count %llu\n",
		    px.m.prompt_latency_sum_s,
		    (unsigned long long)px.m.prompt_latency_count);
	}
	fputs("# HELP sluice_session_decisions_total Decisions per session.\n"
	    "# TYPE sluice_session_decisions_total counter\n", f);
	TAILQ_FOREACH(s, &px.sessions, entry) {
		session_sample(f, "sluice_session_decisions_total", s,
		    "decision=\"allow\"", s->n_allowed);
		session_sample(f, "sluice_session_decisions_total", s,
		    "decision=\"deny\"", s->n_denied);
	}
	fputs("# HELP sluice_session_bytes_total Bytes per session.\n"
	    "# TYPE sluice_session_bytes_total counter\n", f);
	TAILQ_FOREACH(s, &px.sessions, entry) {
		session_sample(f, "sluice_session_bytes_total", s,
		    "direction=\"up\"", s->bytes_up);
		session_sample(f, "sluice_session_bytes_total", s,
		    "direction=\"down\"", s->bytes_down);
	}
	fputs("# HELP sluice_session_open_connections Open connections per "
	    "session.\n# TYPE sluice_session_open_connections gauge\n", f);
	TAILQ_FOREACH(s, &px.sessions, entry)
		session_sample(f, "sluice_session_open_connections", s, NULL,
		    (unsigned long long)s->nconns);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ------------------------------------------------------------------ */
/* State file. */

static json_t *
state_json(void)
{
	json_t *sessions = json_array();
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry) {
		json_t *o;
		char src[48];

		if (s->from_config) {
			/* the file declares these; only grants are ours */
			if (pol_session_grant_count(s->pol) == 0)
				continue;
			o = json_pack("{s:s,s:b,s:o}", "id",
			    pol_session_id(s->pol), "from_config", 1,
			    "grants", grants_json(s->pol));
			json_array_append_new(sessions, o);
			continue;
		}
		o = json_pack("{s:s,s:s,s:s,s:s,s:o}",
		    "id", pol_session_id(s->pol),
		    "tenant", pol_session_tenant(s->pol),
		    "user", pol_session_user(s->pol),
		    "tier", pol_tier_name(pol_session_tier(s->pol)),
		    "grants", grants_json(s->pol));
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
	return json_pack("{s:i,s:O,s:o}", "version", 1,
	    "ceiling", api_ceiling ? api_ceiling : json_null(),
	    "sessions", sessions);
}

void *
ctl_json_state(void)
{
	return state_json();
}

static int
fsync_dir(const char *path)
{
	char dir[PATH_MAX], *slash;
	int fd, rc;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

static int
mkdir_parent(const char *path)
{
	char dir[PATH_MAX], *p;

	snprintf(dir, sizeof(dir), "%s", path);
	p = strrchr(dir, '/');
	if (p == NULL || p == dir)
		return 0;
	*p = '\0';
	return px_mkdir_p(dir, 0750);
}

/* Write to a temporary file, fsync, rename over, fsync the directory:
 * a crash leaves the old state or the new one, never half of either. */
int
ctl_state_save(struct ctl_err *e)
{
	const char *path = px.cfg->state_file;
	char tmp[PATH_MAX];
	json_t *j = state_json();
	char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) :
	    NULL;
	size_t len, off = 0;
	int fd = -1;

	json_decref(j);
	if (text == NULL)
		return fail(e, CTL_INTERNAL, "out of memory");
	len = strlen(text);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp) ||
	    mkdir_parent(path) != 0)
		goto bad;
	if (len + 1 > CTL_STATE_MAX) {
		errno = EFBIG;
		goto bad;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0)
		goto bad;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto bad;
		off += (size_t)n;
	}
	if (write(fd, "\n", 1) != 1 || fsync(fd) != 0 || close(fd) != 0) {
		fd = -1;
		goto bad;
	}
	fd = -1;
	if (rename(tmp, path) != 0 || fsync_dir(path) != 0)
		goto bad;
	free(text);
	return 0;
bad:
	fail(e, CTL_INTERNAL, "cannot save the state file %s: %s", path,
	    strerror(errno));
	px_log(PX_ERR, "%s: %s", __func__, e ? e->msg : "failed");
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(text);
	return -1;
}

static int
apply_ceiling_json(json_t *c, char *err, size_t errlen)
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

void
ctl_apply_api_ceilings(void)
{
	char err[128];

	if (api_ceiling != NULL && apply_ceiling_json(api_ceiling, err,
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
		    grant_host(json_string_value(h), &t) != 0 ||
		    pol_session_grant(s->pol, t.host, (uint16_t)p) != 0) {
			snprintf(err, errlen, "session %s: grants[%zu]: bad "
			    "grant", pol_session_id(s->pol), i);
			return -1;
		}
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
		s = ctl_session_find(json_string_value(id));
		if (s == NULL) {
			px_log(PX_WARN, "%s: grants for %s dropped: the "
			    "configuration no longer declares it", __func__,
			    json_string_value(id));
			return 0;
		}
		return restore_grants(s, json_object_get(o, "grants"), err,
		    errlen);
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
	if (ctl_session_find(cs.id) != NULL) {
		snprintf(err, errlen, "sessions[%zu]: %s is also declared in "
		    "the configuration", idx, cs.id);
		return -1;
	}
	s = px_session_create(&cs, 0, why, sizeof(why));
	if (s == NULL) {
		snprintf(err, errlen, "sessions[%zu] (%s): %s", idx, cs.id, why);
		return -1;
	}
	rc = restore_grants(s, json_object_get(o, "grants"), err, errlen);
	return rc;
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
	json_decref(api_ceiling);
	api_ceiling = NULL;
	o = json_object_get(j, "ceiling");
	if (o != NULL && !json_is_null(o)) {
		char why[256];

		if (!json_is_object(o) || apply_ceiling_json(o, why,
		    sizeof(why)) != 0) {
			snprintf(err, errlen, "%s: %s", path, json_is_object(o) ?
			    why : "ceiling: expected an object or null");
			goto bad;
		}
		api_ceiling = json_incref(o);
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

/* ------------------------------------------------------------------ */
/* Sessions and grants. */

struct px_session *
ctl_session_find(const char *id)
{
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry)
		if (strcmp(pol_session_id(s->pol), id) == 0)
			return s;
	return NULL;
}

static int
transport_taken(const struct cfg_session *cs, const char *path)
{
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry) {
		if (cs->source != NULL && s->transport == PX_T_TCP &&
		    memcmp(&s->source, &cs->source_addr,
		    sizeof(s->source)) == 0)
			return 1;
		if (cs->vsock_cid >= 0 && s->transport == PX_T_VSOCK &&
		    s->vsock_cid == cs->vsock_cid)
			return 1;
		if (path != NULL && s->transport == PX_T_UNIX &&
		    strcmp(s->socket_path, path) == 0)
			return 1;
	}
	return 0;
}

int
ctl_session_create(const struct ctl_actor *a,
    const struct ctl_session_spec *spec, struct px_session **out,
    struct ctl_err *e)
{
	struct cfg_session cs;
	struct px_session *s;
	char path[PATH_MAX], why[256];
	int ntransports = (spec->socket != NULL) + (spec->source != NULL) +
	    (spec->vsock_cid >= 0);

	if (px.draining)
		return fail(e, CTL_UNAVAILABLE, "sluiced is shutting down");
	if (!pol_id_valid(spec->id))
		return fail(e, CTL_BAD_REQUEST, "id: must match "
		    "[A-Za-z0-9._-]{1,64}");
	if (spec->tenant[0] != '\0' && !pol_id_valid(spec->tenant))
		return fail(e, CTL_BAD_REQUEST, "tenant: must match "
		    "[A-Za-z0-9._-]{1,64}");
	if (ntransports > 1)
		return fail(e, CTL_BAD_REQUEST, "a session has at most one of "
		    "socket, source and vsock_cid");
	if (ctl_session_find(spec->id) != NULL)
		return fail(e, CTL_CONFLICT, "session %s exists", spec->id);
	memset(&cs, 0, sizeof(cs));
	cs.id = (char *)spec->id;
	cs.tenant = (char *)spec->tenant;
	cs.user = (char *)spec->user;
	cs.tier = spec->tier;
	cs.vsock_cid = spec->vsock_cid;
	if (spec->vsock_cid == 0 || spec->vsock_cid == 2 ||
	    spec->vsock_cid > 0xfffffffeLL)
		return fail(e, CTL_BAD_REQUEST, "vsock_cid: 1 or 3..4294967294");
	if (spec->source != NULL) {
		if (pol_addr_parse(spec->source, strlen(spec->source),
		    &cs.source_addr) != 0)
			return fail(e, CTL_BAD_REQUEST, "source: not an IP "
			    "address");
		cs.source = (char *)spec->source;
	}
	if (spec->socket != NULL) {
		if (spec->socket[0] != '/' || strlen(spec->socket) >= 108)
			return fail(e, CTL_BAD_REQUEST, "socket: an absolute "
			    "path under 108 bytes");
		cs.socket = (char *)spec->socket;
		snprintf(path, sizeof(path), "%s", spec->socket);
	} else
		snprintf(path, sizeof(path), "%s/sessions/%s/proxy.sock",
		    px.cfg->runtime_dir, spec->id);
	if (transport_taken(&cs, ntransports == 0 || spec->socket ? path :
	    NULL))
		return fail(e, CTL_CONFLICT, "that transport belongs to "
		    "another session");
	s = px_session_create(&cs, 0, why, sizeof(why));
	if (s == NULL)
		return fail(e, CTL_BAD_REQUEST, "%s", why);
	if (ctl_state_save(e) != 0) {
		px_session_destroy(s, POL_R_SESSION_CLOSED);
		return -1;
	}
	admin_record_s(a, "session_create", spec->id, spec->id, NULL,
	    ctl_json_session(s), "ok");
	session_event("create", ctl_json_session(s));     /* events */
	if (out != NULL)
		*out = s;
	return 0;
}

int
ctl_session_delete(const struct ctl_actor *a, const char *id,
    struct ctl_err *e)
{
	struct px_session *s = ctl_session_find(id);
	json_t *before;

	if (s == NULL)
		return fail(e, CTL_NOT_FOUND, "no session %s", id);
	if (s->from_config)
		return fail(e, CTL_CONFLICT, "session %s is declared in the "
		    "configuration file; remove it there and reload", id);
	before = ctl_json_session(s);
	px_session_destroy(s, POL_R_SESSION_CLOSED);
	if (ctl_state_save(e) != 0) {
		json_decref(before);
		return -1;   /* gone now; the old state restores it later */
	}
	admin_record_s(a, "session_delete", id, id, before, NULL, "ok");
	session_event("delete", json_pack("{s:s}", "id", id));   /* events */
	return 0;
}

/* Close what a tier or ceiling change no longer admits. */
static size_t
close_exceeding(struct px_session *only)
{
	struct px_conn *c, *tmp;
	struct pol_decision d;
	size_t n = 0;

	TAILQ_FOREACH_SAFE(c, &px.conns, entry, tmp) {
		if (c->session == NULL || (only && c->session != only) ||
		    c->target.host[0] == '\0' || c->state == PX_S_HEAD ||
		    c->state == PX_S_FLUSH)
			continue;
		pol_decide(px.pol, px.state, c->session->pol, &c->target, &d);
		if (d.verdict == POL_ALLOW)
			continue;
		px_conn_close(c, POL_R_CEILING_LOWERED);
		n++;
	}
	return n;
}

int
ctl_session_set_tier(const struct ctl_actor *a, const char *id,
    enum pol_tier tier, struct ctl_err *e)
{
	struct px_session *s = ctl_session_find(id);
	enum pol_tier old;
	json_t *before;

	if (s == NULL)
		return fail(e, CTL_NOT_FOUND, "no session %s", id);
	if (s->from_config)
		return fail(e, CTL_CONFLICT, "session %s is declared in the "
		    "configuration file; change its tier there and reload", id);
	old = pol_session_tier(s->pol);
	before = ctl_json_session(s);
	pol_session_set_tier(s->pol, tier);
	if (ctl_state_save(e) != 0) {
		pol_session_set_tier(s->pol, old);
		json_decref(before);
		return -1;
	}
	admin_record_s(a, "session_set_tier", id, id, before,
	    ctl_json_session(s), "ok");
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
	struct px_session *s = ctl_session_find(id);
	struct pol_target t;
	char target[POL_HOST_MAX + 80];
	json_t *before;

	if (s == NULL)
		return fail(e, CTL_NOT_FOUND, "no session %s", id);
	if (port == 0)
		return fail(e, CTL_BAD_REQUEST, "port: 1..65535");
	if (grant_host(host, &t) != 0)
		return fail(e, CTL_BAD_REQUEST, "host: not a canonical host "
		    "name or address");
	if (add && pol_session_has_grant(s->pol, t.host, port))
		return 0;   /* already granted: nothing changes */
	/* the session's grants before and after, for the admin record */
	before = grants_json(s->pol);
	if (add) {
		if (pol_session_grant(s->pol, t.host, port) != 0) {
			json_decref(before);
			return fail(e, CTL_INTERNAL, "out of memory");
		}
	} else if (pol_session_revoke(s->pol, t.host, port) != 0) {
		json_decref(before);
		return fail(e, CTL_NOT_FOUND, "no grant %s:%u for %s", t.host,
		    port, id);
	}
	if (ctl_state_save(e) != 0) {
		if (add)
			pol_session_revoke(s->pol, t.host, port);
		else
			pol_session_grant(s->pol, t.host, port);
		json_decref(before);
		return -1;
	}
	snprintf(target, sizeof(target), "%s %s:%u", id, t.host, port);
	admin_record_s(a, add ? "grant_add" : "grant_remove", id, target,
	    before, grants_json(s->pol), "ok");
	if (!add)
		close_exceeding(s);
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

/* ------------------------------------------------------------------ */
/* Ceilings. */

static json_t *
api_ceiling_copy(void)
{
	if (api_ceiling == NULL)
		return json_pack("{s:n,s:{}}", "tier", "tenants");
	return json_deep_copy(api_ceiling);
}

static int
ceiling_commit(const struct ctl_actor *a, json_t *next, const char *target,
    int close_ex, size_t *closed, struct ctl_err *e)
{
	json_t *before = ctl_json_ceiling(), *prev = api_ceiling;
	char err[256];

	api_ceiling = next;
	/* rebuild from the file's values, then the API's on top */
	{
		const char *tenant;
		enum pol_tier t;
		size_t i;

		while (pol_state_tenant_at(px.state, 0, &tenant, &t) == 0) {
			char name[128];

			snprintf(name, sizeof(name), "%s", tenant);
			pol_state_clear_tenant_ceiling(px.state, name);
		}
		pol_state_set_ceiling(px.state, px.cfg->ceiling);
		for (i = 0; i < px.cfg->ntenants; i++)
			pol_state_set_tenant_ceiling(px.state,
			    px.cfg->tenants[i].name, px.cfg->tenants[i].ceiling);
	}
	if (apply_ceiling_json(api_ceiling, err, sizeof(err)) != 0 ||
	    ctl_state_save(e) != 0) {
		if (e != NULL && e->code == CTL_OK)
			fail(e, CTL_BAD_REQUEST, "%s", err);
		api_ceiling = prev;
		json_decref(next);
		ctl_apply_api_ceilings();
		json_decref(before);
		return -1;
	}
	json_decref(prev);
	if (closed != NULL)
		*closed = close_ex ? close_exceeding(NULL) : 0;
	px_prompts_recheck(NULL);
	admin_record(a, "ceiling_set", target, before, ctl_json_ceiling(),
	    "ok");
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
			return fail(e, CTL_BAD_REQUEST, "tenant: must match "
			    "[A-Za-z0-9._-]{1,64}");
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
		return fail(e, CTL_NOT_FOUND, "no ceiling set for tenant %s",
		    tenant ? tenant : "(none)");
	}
	json_object_del(t, tenant);
	return ceiling_commit(a, next, tenant, 0, NULL, e);
}
