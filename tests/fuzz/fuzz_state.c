/*
 * fuzz_state.c: the state file's reader (ctl_state_restore in
 * proxy/ctl.c) on arbitrary bytes.
 *
 * Each input starts from a fresh policy state holding one session the
 * configuration declares ("cfg1", whose grants the file may carry).
 * Besides not crashing or leaking: a refusal says why, and a document
 * that restores saves (ctl_json_state, what ctl_state_save writes) to
 * one that restores again, into a fresh state, to the same document.
 *
 * The daemon's side is stubbed here: px_session_create does what
 * listen.c does for the policy state and the session list, without a
 * listener; prompts, connections and events are not there.
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proxy/daemon.h"
#include "proxy/control/ctl.h"
#include "proxy/control/events.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ------------------------------------------------------------------ */
/* Stubs for what sluiced provides. */

/* state.c and ctl_util.c are built in; the sessions registry
 * (session.c) is reduced to what restoring needs: no listeners. */

struct px_session *
px_session_find(const char *id)
{
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry)
		if (strcmp(pol_session_id(s->pol), id) == 0)
			return s;
	return NULL;
}

struct px_session *
px_session_create(const struct cfg_session *cs, enum px_origin origin,
    enum px_refusal *why, char *err, size_t errlen)
{
	struct px_session *s = calloc(1, sizeof(*s));
	char path[512];

	if (s == NULL)
		abort();
	TAILQ_INIT(&s->conns);
	s->vsock_cid = -1;
	s->from_config = origin == PX_ORIGIN_FILE;
	if (cs->source != NULL) {
		s->transport = PX_T_TCP;
		s->source = cs->source_addr;
	} else if (cs->vsock_cid >= 0) {
		s->transport = PX_T_VSOCK;
		s->vsock_cid = cs->vsock_cid;
	} else {
		s->transport = PX_T_UNIX;
		if (cs->socket != NULL)
			snprintf(path, sizeof(path), "%s", cs->socket);
		else
			snprintf(path, sizeof(path), "/run/sluice/sessions/%s/"
			    "proxy.sock", cs->id);
		if ((s->socket_path = strdup(path)) == NULL)
			abort();
	}
	s->pol = pol_session_add(px.state, cs->id, cs->tenant, cs->user,
	    cs->tier);
	if (s->pol == NULL) {
		snprintf(err, errlen, "cannot add session");
		if (why != NULL)
			*why = PX_REF_BAD;
		free(s->socket_path);
		free(s);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&px.sessions, s, entry);
	return s;
}

void
px_session_destroy(struct px_session *s, enum pol_reason why)
{
	(void)why;
	TAILQ_REMOVE(&px.sessions, s, entry);
	pol_session_remove(px.state, s->pol);
	free(s->socket_path);
	free(s);
}

/* ------------------------------------------------------------------ */

static void
fresh(void)
{
	struct cfg_session cs;
	char err[64];

	if ((px.state = pol_state_new()) == NULL)
		abort();
	TAILQ_INIT(&px.sessions);
	TAILQ_INIT(&px.listeners);
	memset(&cs, 0, sizeof(cs));
	cs.id = (char *)"cfg1";
	cs.tenant = (char *)"acme";
	cs.user = (char *)"alice";
	cs.tier = POL_TIER_REGISTRIES;
	cs.vsock_cid = -1;
	if (px_session_create(&cs, PX_ORIGIN_FILE, NULL, err, sizeof(err)) ==
	    NULL)
		abort();
}

static void
clear(void)
{
	struct px_session *s;

	while ((s = TAILQ_FIRST(&px.sessions)) != NULL)
		px_session_destroy(s, POL_R_SESSION_CLOSED);
	pol_state_free(px.state);
	px.state = NULL;
}

/* Restores text; on success the saved document (new reference). */
static json_t *
restore(const char *text, size_t len)
{
	char err[512];

	err[0] = '\0';
	fresh();
	if (ctl_state_restore(text, len, "fuzz.json", err,
	    sizeof(err)) != 0) {
		if (err[0] == '\0')
			abort();
		clear();
		return NULL;
	}
	return ctl_json_state();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *s1, *s2;
	char *text;

	s1 = restore((const char *)data, size);
	if (s1 == NULL)
		return 0;
	text = json_dumps(s1, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	clear();
	if (text == NULL)
		abort();
	s2 = restore(text, strlen(text));
	if (s2 == NULL || !json_equal(s1, s2))
		abort();
	clear();
	json_decref(s1);
	json_decref(s2);
	free(text);
	return 0;
}
