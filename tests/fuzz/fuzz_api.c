/*
 * fuzz_api.c: the control API's handling of one call (api_serve in
 * proxy/api.c: routing, the {id} and {grant} segments, the JSON body
 * and each handler's checks of its fields) on arbitrary requests.
 *
 * Input: byte 0 is the caller (bits 0-1 the role, bit 2 the TLS
 * listener, bit 3: the ctl_* operations fail, bit 4: bound to tenant
 * acme), byte 1 the method; then
 * the path (a '?' starts the query) up to a newline, the Content-Type
 * up to a newline (empty: none), and the rest is the body.
 *
 * The daemon's side (ctl.h, events.h) is stubbed here, and so are
 * evhttp_send_reply and evhttp_send_error: defined in the program they
 * take the place of libevent's, which would write to a connection that
 * these requests do not have.  They note the answer and free the
 * request as libevent does.  Checked for every call: it is answered
 * exactly once (or taken by the event stream); the status is one the
 * API documents; a JSON answer is one strict JSON object, an error one
 * with a string code and message; and a call that reached an operation
 * came with no body or with one that passes jsonstrict_load.
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>

#include "proxy/daemon.h"
#include "proxy/control/api.h"
#include "proxy/control/ctl.h"
#include "proxy/control/control-int.h"
#include "proxy/lib/credspec.h"
#include "proxy/lib/rulespec.h"
#include "proxy/control/events.h"
#include "proxy/lib/jsonstrict.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ------------------------------------------------------------------ */
/* What the call did. */

static struct {
	int answers;             /* replies sent */
	int taken;               /* the event stream took the request */
	int status;
	int acted;               /* a ctl_* operation ran */
	int fail;                /* operations fail (input bit 3) */
	char *body;              /* the reply's body, NUL-terminated */
	size_t body_len;
	int json;                /* its Content-Type is application/json */
} out;

static void
note_answer(struct evhttp_request *req, int status, struct evbuffer *b)
{
	const char *ct = evhttp_find_header(
	    evhttp_request_get_output_headers(req), "Content-Type");
	size_t n = b != NULL ? evbuffer_get_length(b) : 0;

	out.answers++;
	out.status = status;
	out.json = ct != NULL && strncmp(ct, "application/json", 16) == 0;
	free(out.body);
	out.body = malloc(n + 1);
	if (out.body == NULL)
		abort();
	if (n > 0)
		evbuffer_copyout(b, out.body, n);
	out.body[n] = '\0';
	out.body_len = n;
	evhttp_request_free(req);
}

void
evhttp_send_reply(struct evhttp_request *req, int code, const char *reason,
    struct evbuffer *databuf)
{
	(void)reason;
	note_answer(req, code, databuf);
}

void
evhttp_send_error(struct evhttp_request *req, int error, const char *reason)
{
	(void)reason;
	note_answer(req, error, NULL);
}

/* ------------------------------------------------------------------ */
/* Stubs for what sluiced provides. */


void
ev_subscribe(struct evhttp_request *req, int approver, const char *last_id)
{
	(void)approver;
	(void)last_id;
	out.taken++;
	evhttp_request_free(req);
}

static int
op(struct ctl_err *e)
{
	out.acted = 1;
	if (!out.fail)
		return 0;
	e->code = CTL_CONFLICT;
	snprintf(e->msg, sizeof(e->msg), "stub refuses");
	return -1;
}

int
ctl_session_create(const struct ctl_actor *a,
    const struct ctl_session_spec *spec, struct px_session **o,
    struct ctl_err *e)
{
	(void)a;
	(void)spec;
	if (o != NULL)
		*o = NULL;
	return op(e);
}

int
ctl_session_delete(const struct ctl_actor *a, const char *id,
    struct ctl_err *e)
{
	(void)a;
	(void)id;
	return op(e);
}

int
ctl_session_set_tier(const struct ctl_actor *a, const char *id,
    enum pol_tier tier, struct ctl_err *e)
{
	(void)a;
	(void)id;
	(void)tier;
	return op(e);
}

/* The body's rules go through the parser sluiced uses (ctl_util.c),
 * into a session of a state of its own: a refusal says why. */
int
ctl_session_set_egress(const struct ctl_actor *a, const char *id,
    void *egress, struct ctl_err *e)
{
	struct pol_state *st = pol_state_new();
	struct pol_session *ps;
	char why[256] = "";
	int rc;

	(void)a;
	(void)id;
	if (st == NULL || (ps = pol_session_add(st, "f", "t", "u",
	    POL_TIER_OFF)) == NULL)
		abort();
	rc = ctl_egress_set_json(ps, egress, why, sizeof(why));
	if (rc != 0 && why[0] == '\0')
		abort();
	if (rc == 0) {
		json_t *back = ctl_egress_json(ps);

		/* what was set reads back as set, allow then deny */
		if (json_array_size(json_object_get(back, "allow")) +
		    json_array_size(json_object_get(back, "deny")) !=
		    pol_session_egress_count(ps))
			abort();
		json_decref(back);
	}
	pol_state_free(st);
	if (rc != 0) {
		out.acted = 1;
		e->code = CTL_BAD_REQUEST;
		snprintf(e->msg, sizeof(e->msg), "%s", why);
		return -1;
	}
	return op(e);
}

struct px_session *
px_session_find(const char *id)
{
	(void)id;
	return NULL;
}

int
ctl_grant_add(const struct ctl_actor *a, const char *id, const char *host,
    uint16_t port, struct ctl_err *e)
{
	(void)a;
	(void)id;
	(void)host;
	(void)port;
	return op(e);
}

int
ctl_grant_remove(const struct ctl_actor *a, const char *id,
    const char *host, uint16_t port, struct ctl_err *e)
{
	(void)a;
	(void)id;
	(void)host;
	(void)port;
	return op(e);
}

int
ctl_ceiling_set(const struct ctl_actor *a, const char *tenant,
    enum pol_tier tier, int close_exceeding, size_t *closed,
    struct ctl_err *e)
{
	(void)a;
	(void)tenant;
	(void)tier;
	(void)close_exceeding;
	*closed = 1;
	return op(e);
}

int
ctl_ceiling_clear(const struct ctl_actor *a, const char *tenant,
    struct ctl_err *e)
{
	(void)a;
	(void)tenant;
	return op(e);
}

/* The stubs save nothing (no group commit to wait for): a reply is
 * never held. */
unsigned long long
ctl_state_gen(void)
{
	return 0;
}

void
ctl_state_hook(void (*fn)(int ok, const char *why))
{
	(void)fn;
}

int
ctl_state_flush(struct ctl_err *e)
{
	(void)e;
	return 0;
}

void
ctl_audit(const struct ctl_actor *a, const char *action, const char *target,
    const char *outcome)
{
	(void)a;
	(void)action;
	(void)target;
	(void)outcome;
}

int
ctl_prompt_answer(const struct ctl_actor *a, const char *id,
    enum pol_answer ans, struct ctl_err *e)
{
	(void)a;
	(void)id;
	(void)ans;
	return op(e);
}

/* The credentials routes parse their body with the real reader. */
int
ctl_cred_put(const struct ctl_actor *a, void *body, void **o, int *created,
    struct ctl_err *e)
{
	struct cred_spec s;

	(void)a;
	*o = NULL;
	*created = 1;
	if (cred_spec_parse(body, 0, &s, e->msg, sizeof(e->msg)) != 0) {
		e->code = CTL_BAD_REQUEST;
		return -1;
	}
	if (op(e) != 0) {
		cred_spec_free(&s);
		return -1;
	}
	*o = cred_spec_json(&s);
	cred_spec_free(&s);
	if (*o == NULL) {
		e->code = CTL_INTERNAL;
		snprintf(e->msg, sizeof(e->msg), "out of memory");
		return -1;
	}
	return 0;
}

int
ctl_cred_delete(const struct ctl_actor *a, const char *name,
    struct ctl_err *e)
{
	(void)a;
	(void)name;
	return op(e);
}

void *
ctl_creds_json(const char *tenant)
{
	(void)tenant;
	return json_pack("{s:[]}", "credentials");
}

void *
ctl_cred_json(const char *name, const char *tenant)
{
	(void)tenant;
	return out.fail ? NULL : json_pack("{s:s}", "name", name);
}

/* The rules routes parse their body with the real reader too. */
int
ctl_rule_put(const struct ctl_actor *a, void *body, void **o, int *created,
    struct ctl_err *e)
{
	struct rule_spec s;

	(void)a;
	*o = NULL;
	*created = 1;
	if (rule_spec_parse(body, &s, e->msg, sizeof(e->msg)) != 0) {
		e->code = CTL_BAD_REQUEST;
		return -1;
	}
	if (op(e) != 0) {
		rule_spec_free(&s);
		return -1;
	}
	*o = rule_spec_json(&s);
	rule_spec_free(&s);
	if (*o == NULL) {
		e->code = CTL_INTERNAL;
		snprintf(e->msg, sizeof(e->msg), "out of memory");
		return -1;
	}
	return 0;
}

int
ctl_rules_replace(const struct ctl_actor *a, void *body, void **o,
    struct ctl_err *e)
{
	(void)a;
	(void)body;
	*o = NULL;
	if (op(e) != 0)
		return -1;
	*o = json_pack("{s:[]}", "rules");
	return 0;
}

int
ctl_rule_delete(const struct ctl_actor *a, const char *name,
    struct ctl_err *e)
{
	(void)a;
	(void)name;
	return op(e);
}

void *
ctl_rules_json(const char *tenant)
{
	(void)tenant;
	return json_pack("{s:[],s:[],s:[]}", "rules", "config", "builtin");
}

void *
ctl_rule_json(const char *name, const char *tenant)
{
	(void)tenant;
	return out.fail ? NULL : json_pack("{s:s}", "name", name);
}

/* The inspection CA's PEM: inspection on or off as the fuzzer's first
 * byte chose (out.fail), so both answers of GET /v1/inspect/ca run. */
const char *
ctl_inspect_ca(void)
{
	return out.fail ? NULL : "-----BEGIN CERTIFICATE-----\nMA==\n"
	    "-----END CERTIFICATE-----\n";
}

void *
ctl_json_prompts(void)
{
	/* two tenants: a bound caller's list is cut to one */
	return json_pack("{s:[{s:s,s:s},{s:s,s:s}]}", "prompts", "id", "p-1",
	    "tenant", "acme", "id", "p-2", "tenant", "beta");
}

void *
ctl_json_prompt(const char *id)
{
	return out.fail ? NULL : json_pack("{s:s,s:s}", "id", id, "tenant",
	    id[0] == 'a' ? "acme" : "beta");
}

void *
ctl_json_health(void)
{
	return json_pack("{s:s}", "status", "ok");
}

void *
ctl_json_ceiling(void)
{
	return json_pack("{s:s}", "tier", "public");
}

void *
ctl_json_session(const struct px_session *s)
{
	(void)s;
	return json_pack("{s:s}", "id", "s");
}

void *
ctl_json_sessions(void)
{
	return json_pack("{s:[{s:s,s:s},{s:s,s:s}]}", "sessions", "id", "s1",
	    "tenant", "acme", "id", "s2", "tenant", "beta");
}

char *
ctl_metrics_text(void)
{
	return strdup("sluice_up 1\n");
}

/* ------------------------------------------------------------------ */

static const enum evhttp_cmd_type methods[] = {
	EVHTTP_REQ_GET, EVHTTP_REQ_POST, EVHTTP_REQ_HEAD, EVHTTP_REQ_PUT,
	EVHTTP_REQ_DELETE, EVHTTP_REQ_OPTIONS, EVHTTP_REQ_TRACE,
	EVHTTP_REQ_CONNECT, EVHTTP_REQ_PATCH,
};

static int
status_known(int s)
{
	static const int known[] = { 200, 201, 400, 401, 403, 404, 405, 409,
	    413, 415, 500, 503 };
	size_t i;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (known[i] == s)
			return 1;
	return 0;
}

/* The text up to the next newline (or the end) as a string. */
static char *
take_line(const uint8_t **p, const uint8_t *end)
{
	const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n = (size_t)((nl != NULL ? nl : end) - *p);
	char *s = malloc(n + 1);

	if (s == NULL)
		abort();
	memcpy(s, *p, n);
	s[n] = '\0';
	*p = nl != NULL ? nl + 1 : end;
	return s;
}

static void
check_answer(const uint8_t *body, size_t body_len)
{
	json_t *j, *e;

	if (out.answers + out.taken != 1 || (out.taken && out.acted))
		abort();
	if (out.taken)
		return;
	if (!status_known(out.status))
		abort();
	if (out.acted && body_len > 0) {
		j = jsonstrict_load((const char *)body, body_len, NULL);
		if (!json_is_object(j))
			abort();
		json_decref(j);
	}
	if (!out.json)
		return;
	j = jsonstrict_load(out.body, out.body_len, NULL);
	if (!json_is_object(j))
		abort();
	if (out.status >= 400) {
		e = json_object_get(j, "error");
		if (!json_is_string(json_object_get(e, "code")) ||
		    !json_is_string(json_object_get(e, "message")))
			abort();
	}
	json_decref(j);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data + 2, *end = data + size;
	struct evhttp_request *req;
	struct api_call_in in;
	char *path, *query, *ctype;

	if (size < 2)
		return 0;
	memset(&out, 0, sizeof(out));
	out.fail = (data[0] >> 3) & 1;
	memset(&in, 0, sizeof(in));
	in.role = data[0] & 3;
	in.tls = (data[0] >> 2) & 1;
	in.who = "fuzz";
	/* bit 4: a token bound to a tenant (the routes it may not reach,
	 * the lists cut to it) */
	in.tenant = (data[0] >> 4) & 1 ? "acme" : NULL;
	in.method = (int)methods[data[1] % (sizeof(methods) /
	    sizeof(methods[0]))];
	in.max_body = 65536;
	path = take_line(&p, end);
	ctype = take_line(&p, end);
	query = strchr(path, '?');
	if (query != NULL)
		*query++ = '\0';
	in.path = path;
	in.query = query;

	if ((req = evhttp_request_new(NULL, NULL)) == NULL)
		abort();
	/* a value evhttp would not have parsed (a CR) goes no further */
	if (ctype[0] != '\0' && evhttp_add_header(
	    evhttp_request_get_input_headers(req), "Content-Type",
	    ctype) != 0) {
		evhttp_request_free(req);
		goto done;
	}
	if (p < end && evbuffer_add(evhttp_request_get_input_buffer(req), p,
	    (size_t)(end - p)) != 0)
		abort();
	api_serve(req, &in);
	check_answer(p, (size_t)(end - p));
done:
	free(out.body);
	free(path);
	free(ctype);
	return 0;
}
