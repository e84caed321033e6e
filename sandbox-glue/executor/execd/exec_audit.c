/*
 * exec_audit.c: the executor's audit log, in the connection log's
 * format (proxy/lib/clog.h: JSON Lines, seq, ts, a SHA-256 hash chain),
 * so that `sluicectl log verify --file PATH` checks it.
 *
 * One record per lifecycle action ("sandbox": create, delete, tier,
 * install refused) when its outcome is known, and one per command
 * ("command") when it has ended: who called (uid:N or token:NAME and
 * the role), the sandbox's tenant and user, the argv (each word
 * sanitised and capped, the whole capped), the cwd, exit code or
 * signal, duration, bytes out, oom_killed, timed_out, cancelled.
 * A record that cannot be written is said on stderr; the command has
 * ended by then, so there is nothing left to refuse.
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proxy/lib/clog.h"
#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"

#define ARGV_WORDS	64      /* words kept of an argv */
#define ARGV_BYTES	2048    /* bytes kept of an argv, all words */
#define WORD_CAP	256     /* bytes kept of one word */

int
xd_audit_open(struct xd *xd, char *err, size_t errlen)
{
	char dir[SBX_PATH_MAX], *slash;

	snprintf(dir, sizeof(dir), "%s", xd->cfg->audit_log);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (util_mkdir_p(dir, 0750) != 0) {
			snprintf(err, errlen, "log.path %s: %s", dir,
			    strerror(errno));
			return -1;
		}
	}
	if ((xd->audit = clog_open(xd->cfg->audit_log, err, errlen)) == NULL)
		return -1;
	return 0;
}

void
xd_audit_reopen(struct xd *xd)
{
	if (xd->audit != NULL && clog_reopen(xd->audit) != 0)
		xd_log(XD_LOG_ERR, "audit log %s: cannot reopen",
		    clog_path(xd->audit));
}

void
xd_audit_close(struct xd *xd)
{
	if (xd->audit != NULL)
		clog_close(xd->audit);
	xd->audit = NULL;
}

static void
put(struct xd *xd, struct clog_rec *r)
{
	if (xd->audit == NULL) {
		clog_rec_free(r);
		return;
	}
	if (clog_write(xd->audit, r) != 0)
		xd_log(XD_LOG_ERR, "audit log %s: a record could not be "
		    "written", clog_path(xd->audit));
}

void
xd_audit_box(struct xd *xd, const char *action, const char *who,
    const char *role, const char *id, const char *tenant, const char *user,
    int status, const char *code, json_t *detail)
{
	struct clog_rec *r = clog_rec_new("sandbox");

	if (r == NULL) {
		json_decref(detail);
		return;
	}
	clog_rec_str(r, "action", action);
	clog_rec_str(r, "who", who);
	clog_rec_str(r, "role", role);
	clog_rec_ustr(r, "sandbox", id, strlen(id));
	clog_rec_ustr(r, "tenant", tenant, strlen(tenant));
	clog_rec_ustr(r, "user", user, strlen(user));
	clog_rec_int(r, "status", status);
	clog_rec_str(r, "code", code);
	if (detail != NULL)
		clog_rec_json(r, "detail", detail);
	put(xd, r);
}

/* The argv as sanitised words, at most ARGV_WORDS and ARGV_BYTES. */
static json_t *
argv_capped(json_t *argv, int *cut)
{
	json_t *a = json_array(), *w;
	char buf[4 * WORD_CAP + 8];
	size_t i, bytes = 0;

	*cut = 0;
	json_array_foreach(argv, i, w) {
		const char *s = json_string_value(w);

		if (s == NULL)
			continue;
		if (i >= ARGV_WORDS || bytes >= ARGV_BYTES) {
			*cut = 1;
			break;
		}
		clog_sanitize(s, json_string_length(w), buf, sizeof(buf),
		    WORD_CAP);
		if (strlen(buf) != json_string_length(w))
			*cut = 1;
		bytes += strlen(buf);
		json_array_append_new(a, json_string(buf));
	}
	return a;
}

void
xd_audit_cmd(const struct xd_cmd *c, json_int_t code, json_int_t sig)
{
	const struct xd_box *b = c->box;
	struct clog_rec *r = clog_rec_new("command");
	int cut;

	if (r == NULL)
		return;
	clog_rec_str(r, "who", c->who[0] ? c->who : "daemon");
	clog_rec_str(r, "role", c->role[0] ? c->role : NULL);
	clog_rec_ustr(r, "sandbox", XD_REC_ID(&b->rec),
	    strlen(XD_REC_ID(&b->rec)));
	clog_rec_ustr(r, "tenant", b->rec.tenant, strlen(b->rec.tenant));
	clog_rec_ustr(r, "user", b->rec.user, strlen(b->rec.user));
	clog_rec_str(r, "command", c->id);
	/* what it ran on: the image's sha256 (null: the host's /usr) */
	clog_rec_str(r, "image", b->rec.image[0] ? b->rec.image : NULL);
	clog_rec_str(r, "kind", c->install ? "install" : c->background ?
	    "background" : "foreground");
	clog_rec_json(r, "argv", argv_capped(c->argv, &cut));
	clog_rec_bool(r, "argv_truncated", cut);
	clog_rec_ustr(r, "cwd", c->cwd, strlen(c->cwd));
	/* as the result says it */
	clog_rec_int(r, "exit_code", code);
	if (sig >= 0)
		clog_rec_int(r, "signal", sig);
	else
		clog_rec_str(r, "signal", NULL);
	clog_rec_int(r, "duration_ms", c->ended_ms - c->started_ms);
	clog_rec_int(r, "stdout_bytes", (int64_t)c->out[0].total);
	clog_rec_int(r, "stderr_bytes", (int64_t)c->out[1].total);
	clog_rec_bool(r, "oom_killed", c->oom_killed);
	clog_rec_bool(r, "timed_out", c->timed_out);
	clog_rec_bool(r, "cancelled", c->cancelled || c->stopped);
	put(b->xd, r);
}
