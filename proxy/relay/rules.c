/*
 * rules.c: request rules applied to the requests sluice reads (plain
 * HTTP, and the requests inside inspected tunnels), after the host was
 * allowed.  The matching is policy/'s (pol_rules_match, the rules of the
 * running pol_config, so a reload swaps them between two requests and
 * no tunnel is dropped); here: the answer (go on, 403 rule_denied, or a
 * prompt showing method and path) and the rules a person allowed for
 * the chat ("allow_chat" on a rule's prompt).
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/relay/relay-int.h"

/* A rule a person allowed for a chat: its requests that the rule would
 * prompt for go on without asking.  Ends with the session. */
struct rgrant {
	struct px_session *s;
	char name[POL_RULE_NAME_MAX + 1];
	TAILQ_ENTRY(rgrant) entry;
};
static TAILQ_HEAD(, rgrant) grants = TAILQ_HEAD_INITIALIZER(grants);

static struct rgrant *
grant_find(const struct px_session *s, const char *name)
{
	struct rgrant *g;

	TAILQ_FOREACH(g, &grants, entry)
		if (g->s == s && strcmp(g->name, name) == 0)
			return g;
	return NULL;
}

void
px_rules_grant(struct px_session *s, const char *name)
{
	struct rgrant *g;

	if (s == NULL || grant_find(s, name) != NULL)
		return;
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return;   /* the next request asks again: never a hole */
	g->s = s;
	snprintf(g->name, sizeof(g->name), "%s", name);
	TAILQ_INSERT_TAIL(&grants, g, entry);
}

void
px_rules_forget(struct px_session *s)
{
	struct rgrant *g, *tmp;

	TAILQ_FOREACH_SAFE(g, &grants, entry, tmp)
		if (s == NULL || g->s == s) {
			TAILQ_REMOVE(&grants, g, entry);
			free(g);
		}
}

static const char *
builtin_detail(const char *name)
{
	if (strcmp(name, POL_RULE_BUILTIN_REGISTRIES) == 0)
		return "The registry hosts are read-only (GET and HEAD): "
		    "installing works, publishing does not, unless an "
		    "administrator's rule allows it.";
	if (strcmp(name, POL_RULE_BUILTIN_GIT_PUSH) == 0)
		return "git push (git-receive-pack) is refused unless an "
		    "administrator's rule allows it.";
	return "";
}

int
px_rules_check(struct px_conn *c)
{
	struct pol_rule_match m;
	enum pol_reason r;
	char detail[POL_RULE_NAME_MAX + 256];
	char *scratch;

	if (PX_GONE(c))
		return 0;
	if (c->rule_done || c->req == NULL || c->req->m == HTTP_M_CONNECT ||
	    c->path == NULL)
		return 1;
	if ((scratch = malloc(c->path_len + 1)) == NULL) {
		px_conn_close(c, POL_R_NONE);
		return 0;
	}
	r = pol_rules_match(px.pol, c->session != NULL ?
	    pol_session_tenant(c->session->pol) : NULL, &c->target,
	    c->method, c->path, c->path_len, scratch, c->path_len + 1, &m);
	free(scratch);
	if (r != POL_R_NONE) {
		c->dec.verdict = POL_DENY;
		px_conn_refuse(c, r, "Its path has a bad or NUL percent "
		    "escape, or is not absolute.");
		return 0;
	}
	if (!m.matched)
		return 1;
	snprintf(c->rule, sizeof(c->rule), "%s", m.name);
	switch (m.action) {
	case POL_RA_ALLOW:
		c->rule_done = 1;
		return 1;
	case POL_RA_PROMPT:
		if (grant_find(c->session, m.name) != NULL) {
			c->rule_done = 1;
			return 1;
		}
		c->rule_held = 1;
		c->dec.verdict = POL_PROMPT;
		px_prompt_request(c);
		return 0;
	case POL_RA_DENY:
	default:
		snprintf(detail, sizeof(detail), "Rule \"%s\" denies it.%s%s",
		    m.name, m.builtin ? " " : "", builtin_detail(m.name));
		c->dec.verdict = POL_DENY;
		px_conn_refuse(c, POL_R_RULE_DENIED, detail);
		return 0;
	}
}
