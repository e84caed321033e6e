/*
 * exec_os_execd.c: OpenSandbox's execd, served by sluice-execd itself
 * under /sandboxes/{id}/execd (the sandbox has no network device for an
 * execd of its own to listen on).  exec_os.c has checked the access
 * token and found the box (k->box, held); the routes here are those of
 * components/execd/pkg/web/router.go that ChatHub's tools and the SDK's
 * files and commands facades call:
 *
 *   GET    /ping
 *   POST   /command                 {command, cwd?, background?, timeout? (ms), envs?}
 *   DELETE /command?id=
 *   GET    /command/status/{cid}
 *   GET    /command/{cid}/logs?cursor=
 *   GET    /files/info?path=...     DELETE /files?path=...
 *   POST   /files/upload (multipart)    GET /files/download?path= (Range)
 *   GET    /files/search?path=&pattern=
 *   POST   /files/replace[?verbose=true]   /files/mv   /files/permissions
 *   GET    /directories/list?path=&depth=
 *   POST   /directories             DELETE /directories?path=...
 *   ANY    /proxy/{port}/...        the port proxy (exec_os_port.c)
 *
 * and answers 501 NOT_SUPPORTED, naming it, for what sluice does not do
 * (code-interpreter contexts, bash sessions, PTYs, metrics).
 *
 * The command stream is OpenSandbox's (controller/sse.go): each event a
 * raw JSON object and a blank line, no "data:" prefix: init (text: the
 * command id), stdout/stderr (text: a chunk, whole UTF-8 characters),
 * ping every PING_S, then execution_complete {execution_time} on exit
 * 0 or error {ename "CommandExecError", evalue "<exit code>",
 * traceback}.  A background command's stream ends after init; its
 * output is read with /logs, whose cursor is one integer for the two
 * rings: stderr's offset * 2^26 + stdout's (each stream's offset is
 * kept below 2^26 and 2^27, inside a JavaScript number).
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/exec_os-int.h"

#define PING_S		15
#define LIST_MAX	10000
#define PARTS_MAX	64
#define CURSOR_SHIFT	(1ull << 26)

/* ---- the command stream ---- */

static void
ev_send(struct xd_os_call *k, json_t *ev)
{
	if (ev == NULL)
		return;
	json_object_set_new(ev, "timestamp", json_integer(util_wall_ms()));
	if (k->gone) {
		json_decref(ev);
		return;
	}
	xd_stream_json(k->req, NULL, ev, NULL, NULL, 0);
}

static void
flushed(struct evhttp_connection *evcon, void *arg)
{
	struct xd_os_call *k = arg;

	(void)evcon;
	if (k->cmd != NULL && k->cmd->paused && xd_stream_caught_up(k->req,
	    k->xd->cfg->stream_watermark))
		xd_cmd_pause(k->cmd, 0);
}

static void
sink_output(void *arg, struct xd_cmd *c, int stream, const unsigned char *b,
    size_t n)
{
	struct xd_os_call *k = arg;
	unsigned char *buf;
	size_t whole;

	if (k->gone || (buf = xd_utf8_carry(k->carry[stream],
	    &k->ncarry[stream], b, n, 0, &whole)) == NULL)
		return;
	if (xd_stream_json(k->req, NULL, json_pack("{s:s,s:o,s:I}", "type",
	    stream ? "stderr" : "stdout", "text", xd_text_json(buf, whole, 0),
	    "timestamp", (json_int_t)util_wall_ms()), flushed, k,
	    k->xd->cfg->stream_watermark))
		xd_cmd_pause(c, 1);
	free(buf);
}

static void
sink_exit(void *arg, struct xd_cmd *c)
{
	struct xd_os_call *k = arg;
	json_int_t code = xd_cmd_exit_code(c, NULL);
	char ev[24];
	int i;

	for (i = 0; i < 2; i++)
		if (k->ncarry[i] > 0)
			ev_send(k, json_pack("{s:s,s:o}", "type", i ? "stderr" :
			    "stdout", "text", xd_text_json(k->carry[i],
			    k->ncarry[i], 0)));
	if (code == 0 && !c->timed_out && !c->cancelled)
		ev_send(k, json_pack("{s:s,s:I}", "type", "execution_complete",
		    "execution_time", (json_int_t)(c->ended_ms -
		    c->started_ms)));
	else {
		snprintf(ev, sizeof(ev), "%lld", (long long)code);
		ev_send(k, json_pack("{s:s,s:{s:s,s:s,s:[s]}}", "type", "error",
		    "error", "ename", "CommandExecError", "evalue", ev,
		    "traceback", c->timed_out ? "the command ran past its "
		    "timeout and was killed" : c->cancelled ? "the command "
		    "was interrupted" : c->oom_killed ? "the sandbox ran out "
		    "of memory" : "the command exited with a non-zero "
		    "status"));
	}
	if (k->evcon != NULL) {
		evhttp_connection_set_closecb(k->evcon, NULL, NULL);
		k->evcon = NULL;
	}
	evhttp_send_reply_end(k->req);
	k->cmd = NULL;
	xd_cmd_free(c);
	xd_os_call_free(k);
}

static const struct xd_sink os_sink = { sink_output, sink_exit, NULL };

static void
client_closed(struct evhttp_connection *evcon, void *arg)
{
	struct xd_os_call *k = arg;

	(void)evcon;
	k->evcon = NULL;
	k->gone = 1;
	if (k->cmd != NULL)
		xd_cmd_pause(k->cmd, 0);
}

static void
ping_tick(evutil_socket_t fd, short what, void *arg)
{
	struct xd_os_call *k = arg;
	struct timeval tv = { PING_S, 0 };

	(void)fd;
	(void)what;
	if (k->gone)
		return;
	ev_send(k, json_pack("{s:s}", "type", "ping"));
	evtimer_add(k->ev_ping, &tv);
}

static void
stream_start(struct xd_os_call *k)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(k->req);

	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-cache");
	evhttp_add_header(h, "X-Accel-Buffering", "no");
	evhttp_send_reply_start(k->req, 200, "OK");
}

/* The native command body of an OpenSandbox RunCommandRequest. */
static json_t *
native_cmd(struct xd_os_call *k, struct xd_perr *e)
{
	static const char *const keys[] = { "command", "cwd", "background",
	    "timeout", "uid", "gid", "envs", NULL };
	char rkey[SBX_ID_MAX + 1];
	json_t *rec;
	json_t *cmd = json_object_get(k->body, "command");
	json_t *cwd = json_object_get(k->body, "cwd");
	json_t *to = json_object_get(k->body, "timeout");
	json_t *envs = json_object_get(k->body, "envs");
	json_t *env = json_object(), *n, *v;
	const char *key;
	size_t i;

	xd_os_key(k->box->rec.tenant, XD_REC_ID(&k->box->rec), rkey);
	rec = xd_os_rec(k->xd->os, rkey);
	json_object_foreach(k->body, key, v) {
		for (i = 0; keys[i] != NULL && strcmp(keys[i], key); i++)
			;
		if (keys[i] == NULL) {
			xd_perr_set(e, 400, "INVALID_REQUEST_BODY",
			    "unknown field %s", key);
			json_decref(env);
			return NULL;
		}
	}
	if (!json_is_string(cmd) || json_string_length(cmd) == 0 ||
	    (cwd != NULL && !json_is_null(cwd) && !json_is_string(cwd)) ||
	    (to != NULL && !json_is_null(to) && (!json_is_integer(to) ||
	    json_integer_value(to) < 0)) || (envs != NULL && !json_is_null(
	    envs) && !json_is_object(envs))) {
		xd_perr_set(e, 400, "INVALID_REQUEST_BODY", "command (a "
		    "string), cwd?, background?, timeout? (ms), envs? (an "
		    "object)");
		json_decref(env);
		return NULL;
	}
	if ((json_object_get(k->body, "uid") != NULL && !json_is_null(
	    json_object_get(k->body, "uid"))) || (json_object_get(k->body,
	    "gid") != NULL && !json_is_null(json_object_get(k->body, "gid")))) {
		xd_perr_set(e, 501, "NOT_SUPPORTED", "uid/gid: sluice runs "
		    "every command as the sandbox's user");
		json_decref(env);
		return NULL;
	}
	/* the create's env, then the call's */
	if (rec != NULL && json_is_object(json_object_get(rec, "env")))
		json_object_update(env, json_object_get(rec, "env"));
	if (json_is_object(envs))
		json_object_update(env, envs);
	n = json_pack("{s:O,s:o}", "shell", cmd, "env", env);
	if (json_is_string(cwd) && json_string_length(cwd) > 0) {
		char buf[SBX_PATH_MAX + 16];

		/* the workdir is the workspace, also where no link to it
		 * could be made (xd_osfs_workdir_link) */
		json_object_set_new(n, "cwd", json_string(xd_osfs_unalias(
		    json_string_value(cwd), buf, sizeof(buf))));
	}
	if (json_is_integer(to) && json_integer_value(to) > 0)
		json_object_set_new(n, "timeout_s", json_integer(
		    (json_integer_value(to) + 999) / 1000));
	return n;
}

static void
h_command(struct xd_os_call *k)
{
	const struct xd_cfg *c = k->xd->cfg;
	int bg = json_is_true(json_object_get(k->body, "background"));
	struct xd_cmd_spec s;
	struct xd_perr e;
	struct xd_cmd *cmd;
	struct timeval tv = { PING_S, 0 };
	json_t *n;

	memset(&e, 0, sizeof(e));
	if ((n = native_cmd(k, &e)) == NULL) {
		xd_os_reply_perr(k, &e);
		return;
	}
	if (xd_cmd_spec_parse(n, &k->box->lim, c->max.timeout_s,
	    c->max.output_cap, bg, &s, &e) != 0) {
		json_decref(n);
		xd_os_reply_perr(k, &e);
		return;
	}
	json_decref(n);
	cmd = xd_cmd_start(k->box, &s, bg, bg ? XD_OUT_RING : XD_OUT_STREAM,
	    bg ? NULL : &os_sink, bg ? NULL : k, &e);
	xd_cmd_spec_free(&s);
	if (cmd == NULL) {
		xd_os_reply_perr(k, &e);
		return;
	}
	snprintf(cmd->who, sizeof(cmd->who), "%s", k->who);
	snprintf(cmd->role, sizeof(cmd->role), "app");
	stream_start(k);
	ev_send(k, json_pack("{s:s,s:s}", "type", "init", "text", cmd->id));
	if (bg) {
		/* the client polls /command/status and /logs */
		evhttp_send_reply_end(k->req);
		xd_os_call_free(k);
		return;
	}
	k->cmd = cmd;
	xd_os_call_wait(k);
	if ((k->evcon = evhttp_request_get_connection(k->req)) != NULL)
		evhttp_connection_set_closecb(k->evcon, client_closed, k);
	if ((k->ev_ping = evtimer_new(k->xd->base, ping_tick, k)) != NULL)
		evtimer_add(k->ev_ping, &tv);
}

static struct xd_cmd *
cmd_of(struct xd_os_call *k, const char *id)
{
	struct xd_cmd *c = id != NULL ? xd_cmd_find(k->box, id) : NULL;

	if (c == NULL)
		xd_os_reply_err(k, 404, "COMMAND_NOT_FOUND", "no command %s in "
		    "sandbox %s", id ? id : "(no id)", XD_REC_ID(&k->box->rec));
	return c;
}

static void
h_interrupt(struct xd_os_call *k)
{
	struct xd_cmd *c = cmd_of(k, xd_os_q(k, "id"));

	if (c == NULL)
		return;
	if (c->running)
		xd_cmd_kill(c, c->background ? "stop" : "cancel");
	xd_os_reply_empty(k, 200);
}

static void
h_status(struct xd_os_call *k, const char *id)
{
	struct xd_cmd *c = cmd_of(k, id);
	json_t *o, *a;

	if (c == NULL)
		return;
	a = json_array_get(c->argv, 2);
	o = json_pack("{s:s,s:O,s:b,s:o,s:o}", "id", c->id, "content", a ? a :
	    c->argv, "running", c->running, "started_at", xd_os_iso_ms(
	    c->started_ms), "finished_at", c->running ? json_null() :
	    xd_os_iso_ms(c->ended_ms));
	if (!c->running) {
		json_int_t code = xd_cmd_exit_code(c, NULL);

		json_object_set_new(o, "exit_code", json_integer(code));
		if (c->timed_out || c->cancelled || c->stopped || code != 0)
			json_object_set_new(o, "error", json_string(
			    c->timed_out ? "timed out" : c->cancelled ||
			    c->stopped ? "interrupted" : "non-zero exit"));
	} else
		json_object_set_new(o, "exit_code", json_null());
	xd_os_reply_json(k, 200, o);
}

static void
h_logs(struct xd_os_call *k, const char *id)
{
	struct xd_cmd *c = cmd_of(k, id);
	const char *cur;
	uint64_t cursor = 0, off[2];
	struct evbuffer *b;
	json_t *o;
	char next[32];
	int i;

	if (c == NULL)
		return;
	if ((cur = xd_os_q(k, "cursor")) != NULL && cur[0]) {
		char *end;

		errno = 0;
		cursor = strtoull(cur, &end, 10);
		if (*end != '\0' || errno != 0 || cur[0] == '-') {
			xd_os_reply_err(k, 400, "INVALID_REQUEST", "cursor: a "
			    "number this server returned");
			return;
		}
	}
	off[0] = cursor % CURSOR_SHIFT;
	off[1] = cursor / CURSOR_SHIFT;
	if ((o = xd_cmd_output(c, off, 0)) == NULL || (b = evbuffer_new()) ==
	    NULL) {
		json_decref(o);
		xd_os_reply_err(k, 500, "RUNTIME_ERROR", "out of memory");
		return;
	}
	for (i = 0; i < 2; i++) {
		json_t *r = json_object_get(o, i ? "stderr" : "stdout");
		const char *d = json_string_value(json_object_get(r, "data"));
		json_int_t nx = json_integer_value(json_object_get(r, "next"));

		if (d != NULL)
			evbuffer_add(b, d, strlen(d));
		off[i] = (uint64_t)nx;
	}
	json_decref(o);
	/* past what the cursor can say: the stream's offset stays at the
	 * edge (what follows is read again, never skipped) */
	if (off[0] >= CURSOR_SHIFT)
		off[0] = CURSOR_SHIFT - 1;
	if (off[1] >= 2 * CURSOR_SHIFT)
		off[1] = 2 * CURSOR_SHIFT - 1;
	snprintf(next, sizeof(next), "%llu", (unsigned long long)(off[1] *
	    CURSOR_SHIFT + off[0]));
	evhttp_add_header(evhttp_request_get_output_headers(k->req),
	    "EXECD-COMMANDS-TAIL-CURSOR", next);
	xd_reply_text(k->req, "text/plain; charset=utf-8", b);
	xd_os_call_free(k);
}

/* ---- files ---- */

/* The box's workspace takes changes now (not being made, deleted or
 * changed by a worker). */
static int
changeable(struct xd_os_call *k)
{
	if (k->box->state != XD_BOX_RUNNING || k->box->op) {
		xd_os_reply_err(k, 409, "CONFLICT", "sandbox %s is being "
		    "created, changed or deleted", XD_REC_ID(&k->box->rec));
		return 0;
	}
	return 1;
}

/* Every value of the query key, in order. */
static size_t
q_all(struct xd_os_call *k, const char *key, const char **out, size_t max)
{
	struct evkeyval *kv;
	size_t n = 0;

	if (k->query == NULL)
		return 0;
	TAILQ_FOREACH(kv, k->query, next)
		if (strcmp(kv->key, key) == 0 && n < max)
			out[n++] = kv->value;
	return n;
}

/* FileInfo's path under the workdir's name when the caller named the
 * workdir (ChatHub lists /tmp/workspace and shows the paths it gets
 * relative to it): "/workspace/a" as "<workdir>/a". */
static void
realias(json_t *fi, const char *asked)
{
	char ub[SBX_PATH_MAX + 16], out[SBX_PATH_MAX + 160];
	const char *p = json_string_value(json_object_get(fi, "path"));
	size_t wl;

	if (p == NULL || xd_osfs_unalias(asked, ub, sizeof(ub)) == asked ||
	    strncmp(p, "/workspace", 10) != 0 || (p[10] != '\0' &&
	    p[10] != '/'))
		return;
	/* the workdir is what asked starts with and ub does not */
	wl = strlen(asked) - (strlen(ub) - 10);
	if ((size_t)snprintf(out, sizeof(out), "%.*s%s", (int)wl, asked,
	    p + 10) < sizeof(out))
		json_object_set_new(fi, "path", json_string(out));
}

static void
h_info(struct xd_os_call *k)
{
	const char *paths[64];
	size_t n = q_all(k, "path", paths, 64), i;
	json_t *o = json_object(), *fi;
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if (n == 0) {
		json_decref(o);
		xd_os_reply_err(k, 400, "MISSING_QUERY", "path is required");
		return;
	}
	for (i = 0; i < n; i++) {
		if (xd_osfs_info(&k->box->rec, paths[i], &fi, &e) != 0) {
			json_decref(o);
			xd_os_reply_perr(k, &e);
			return;
		}
		realias(fi, paths[i]);
		json_object_set_new(o, paths[i], fi);
	}
	xd_os_reply_json(k, 200, o);
}

static void
h_paths(struct xd_os_call *k, int dirs)
{
	char ub[SBX_PATH_MAX + 16];
	const char *paths[64];
	size_t n = q_all(k, "path", paths, 64), i;
	struct xd_perr e;

	memset(&e, 0, sizeof(e));
	if (!changeable(k))
		return;
	if (n == 0) {
		xd_os_reply_err(k, 400, "MISSING_QUERY", "path is required");
		return;
	}
	for (i = 0; i < n; i++)
		if ((dirs ? xd_osfs_rmtree(&k->box->rec, paths[i], &e) :
		    xd_fs_delete(&k->box->rec, xd_osfs_unalias(paths[i], ub,
		    sizeof(ub)), &e)) != 0) {
			if (e.status == 404 && dirs) {
				/* rm -rf of what is not there */
				xd_perr_clear(&e);
				memset(&e, 0, sizeof(e));
				continue;
			}
			xd_os_reply_perr(k, &e);
			return;
		}
	xd_os_reply_empty(k, 200);
}

/* OpenSandbox's mode: the octal digits as a decimal integer (755). */
static int
mode_of(json_t *v, int def)
{
	json_int_t m;
	int r = 0, mul = 1;

	if (!json_is_integer(v))
		return def;
	m = json_integer_value(v);
	if (m < 0 || m > 7777)
		return -1;
	for (; m > 0; m /= 10, mul *= 8) {
		if (m % 10 > 7)
			return -1;
		r += (int)(m % 10) * mul;
	}
	return r;
}

/* POST /directories {path: {mode}}: mkdir -p, mode 755 when none
 * given; POST /files/permissions {path: {mode, owner, group}}: chmod.
 * An owner or a group is refused: every file of a sluice sandbox
 * belongs to its one user. */
static void
set_modes(struct xd_os_call *k, int mkdirs)
{
	const char *path;
	json_t *v;
	struct xd_perr e;
	int mode, owner;

	memset(&e, 0, sizeof(e));
	if (!changeable(k))
		return;
	json_object_foreach(k->body, path, v) {
		owner = !mkdirs && (json_object_get(v, "owner") != NULL ||
		    json_object_get(v, "group") != NULL);
		if ((mode = mode_of(json_object_get(v, "mode"), mkdirs ? 0755 :
		    -2)) < 0) {
			if (mode == -2 && owner)
				goto owner;
			xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY", "%s: "
			    "mode: octal digits (%s)", path, mkdirs ? "755" :
			    "644");
			return;
		}
		if ((mkdirs ? xd_osfs_mkdir(&k->box->rec, path, mode, &e) :
		    xd_osfs_chmod(&k->box->rec, path, mode, &e)) != 0) {
			xd_os_reply_perr(k, &e);
			return;
		}
		if (owner)
			goto owner;
	}
	xd_os_reply_empty(k, 200);
	return;
owner:
	xd_os_reply_err(k, 501, "NOT_SUPPORTED", "owner/group: every file of "
	    "a sluice sandbox belongs to its one user");
}

static void
h_mkdirs(struct xd_os_call *k)
{
	set_modes(k, 1);
}

static void
h_perms(struct xd_os_call *k)
{
	set_modes(k, 0);
}

static void
h_mv(struct xd_os_call *k)
{
	json_t *a = k->body, *v;
	struct xd_perr e;
	size_t i;

	memset(&e, 0, sizeof(e));
	if (!changeable(k))
		return;
	if (!json_is_array(a)) {
		xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY", "[{src, "
		    "dest}]");
		return;
	}
	json_array_foreach(a, i, v) {
		const char *s = json_string_value(json_object_get(v, "src"));
		const char *d = json_string_value(json_object_get(v, "dest"));

		if (s == NULL || d == NULL) {
			xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY", "[%zu]: "
			    "src and dest", i);
			return;
		}
		if (xd_osfs_rename(&k->box->rec, s, d, &e) != 0) {
			xd_os_reply_perr(k, &e);
			return;
		}
	}
	xd_os_reply_empty(k, 200);
}

static void
h_replace(struct xd_os_call *k)
{
	const char *verbose = xd_os_q(k, "verbose");
	json_t *out = json_object(), *v;
	const char *path;
	struct xd_perr e;
	long n;

	memset(&e, 0, sizeof(e));
	if (!changeable(k)) {
		json_decref(out);
		return;
	}
	json_object_foreach(k->body, path, v) {
		json_t *o = json_object_get(v, "old"), *nw = json_object_get(v,
		    "new");

		if (!json_is_string(o) || !json_is_string(nw) ||
		    json_string_length(o) == 0) {
			json_decref(out);
			xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY", "%s: "
			    "{old (not empty), new}", path);
			return;
		}
		if (xd_osfs_replace(&k->box->rec, path, json_string_value(o),
		    json_string_length(o), json_string_value(nw),
		    json_string_length(nw), k->xd->cfg->max_file_bytes, &n,
		    &e) != 0) {
			json_decref(out);
			xd_os_reply_perr(k, &e);
			return;
		}
		json_object_set_new(out, path, json_pack("{s:I}",
		    "replacedCount", (json_int_t)n));
	}
	if (verbose != NULL && strcmp(verbose, "true") == 0)
		xd_os_reply_json(k, 200, out);
	else {
		json_decref(out);
		xd_os_reply_empty(k, 200);
	}
}

static void
h_list(struct xd_os_call *k, int search)
{
	const char *path = xd_os_q(k, "path"), *ds = xd_os_q(k, "depth");
	const char *pat = xd_os_q(k, "pattern");
	struct xd_perr e;
	json_t *out;
	long depth = 1;

	memset(&e, 0, sizeof(e));
	if (path == NULL) {
		xd_os_reply_err(k, 400, "MISSING_QUERY", "path is required");
		return;
	}
	if (ds != NULL && ds[0]) {
		char *end;

		depth = strtol(ds, &end, 10);
		if (*end != '\0' || depth < 1 || depth > 32) {
			xd_os_reply_err(k, 400, "INVALID_REQUEST", "depth: 1 "
			    "to 32");
			return;
		}
	}
	if (xd_osfs_list(&k->box->rec, path, (int)depth, search ? (pat &&
	    pat[0] ? pat : "**") : NULL, LIST_MAX, &out, &e) != 0) {
		xd_os_reply_perr(k, &e);
		return;
	}
	{
		json_t *fi;
		size_t i;

		json_array_foreach(out, i, fi)
			realias(fi, path);
	}
	xd_os_reply_json(k, 200, out);
}

static void
h_upload(struct xd_os_call *k)
{
	char ub[SBX_PATH_MAX + 16];
	struct evbuffer *in = evhttp_request_get_input_buffer(k->req);
	size_t len = evbuffer_get_length(in), n, i;
	const char *ct = evhttp_find_header(evhttp_request_get_input_headers(
	    k->req), "Content-Type"), *why = NULL;
	struct xd_mp_part parts[PARTS_MAX];
	char boundary[80];
	struct xd_perr e;
	json_t *meta = NULL;

	memset(&e, 0, sizeof(e));
	if (!changeable(k))
		return;
	if (xd_mp_boundary(ct, boundary, sizeof(boundary)) != 0) {
		xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY", "a "
		    "multipart/form-data body with a boundary");
		return;
	}
	if (xd_mp_parse(len ? evbuffer_pullup(in, -1) : (unsigned char *)"",
	    len, boundary, parts, PARTS_MAX, &n, &why) != 0) {
		xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY", "multipart: %s",
		    why);
		return;
	}
	/* pairs: metadata, then file */
	for (i = 0; i < n; i++) {
		const struct xd_mp_part *p = &parts[i];
		json_error_t je;

		if (p->nlen == 8 && memcmp(p->name, "metadata", 8) == 0) {
			json_decref(meta);
			meta = json_loadb((const char *)p->data, p->len,
			    JSON_REJECT_DUPLICATES, &je);
			if (!json_is_object(meta) || !json_is_string(
			    json_object_get(meta, "path"))) {
				json_decref(meta);
				xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY",
				    "part %zu: metadata {path, mode?}", i);
				return;
			}
		} else if (p->nlen == 4 && memcmp(p->name, "file", 4) == 0) {
			const char *path;
			int mode;

			if (meta == NULL) {
				xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY",
				    "part %zu: a file part without the "
				    "metadata part before it", i);
				return;
			}
			path = json_string_value(json_object_get(meta, "path"));
			if (p->len > k->xd->cfg->max_file_bytes) {
				json_decref(meta);
				xd_os_reply_err(k, 413, "FILE_TOO_LARGE", "%s: "
				    "more than max_file_bytes (%llu)", path,
				    (unsigned long long)
				    k->xd->cfg->max_file_bytes);
				return;
			}
			if ((mode = mode_of(json_object_get(meta, "mode"),
			    -2)) == -1 || xd_fs_write(&k->box->rec,
			    xd_osfs_unalias(path, ub, sizeof(ub)),
			    p->data, p->len, &e) != 0 || (mode >= 0 &&
			    xd_osfs_chmod(&k->box->rec, path, mode, &e) != 0)) {
				json_decref(meta);
				if (mode == -1)
					xd_os_reply_err(k, 400,
					    "INVALID_REQUEST_BODY", "mode: "
					    "octal digits (644)");
				else
					xd_os_reply_perr(k, &e);
				return;
			}
			json_decref(meta);
			meta = NULL;
		}
	}
	json_decref(meta);
	xd_os_reply_empty(k, 200);
}

static void
h_download(struct xd_os_call *k)
{
	const char *path = xd_os_q(k, "path");
	struct evkeyvalq *oh = evhttp_request_get_output_headers(k->req);
	unsigned char *buf;
	size_t len;
	uint64_t from = 0, to = 0;
	struct xd_perr e;
	struct evbuffer *b;
	const char *base;
	char h[SBX_PATH_MAX + 64];
	int rr, status = 200;

	memset(&e, 0, sizeof(e));
	if (path == NULL) {
		xd_os_reply_err(k, 400, "MISSING_QUERY", "path is required");
		return;
	}
	if (xd_osfs_read(&k->box->rec, path, k->xd->cfg->max_file_bytes, &buf,
	    &len, &e) != 0) {
		if (e.status == 404)
			e.code = "FILE_NOT_FOUND";
		xd_os_reply_perr(k, &e);
		return;
	}
	rr = xd_range_parse(evhttp_find_header(evhttp_request_get_input_headers(
	    k->req), "Range"), len, &from, &to);
	if (rr < 0) {
		free(buf);
		snprintf(h, sizeof(h), "bytes */%zu", len);
		evhttp_add_header(oh, "Content-Range", h);
		xd_os_reply_err(k, 416, "INVALID_RANGE", "outside the file "
		    "(%zu bytes)", len);
		return;
	}
	if ((b = evbuffer_new()) == NULL) {
		free(buf);
		xd_os_reply_err(k, 500, "RUNTIME_ERROR", "out of memory");
		return;
	}
	if (rr > 0) {
		status = 206;
		snprintf(h, sizeof(h), "bytes %llu-%llu/%zu", (unsigned long
		    long)from, (unsigned long long)to, len);
		evhttp_add_header(oh, "Content-Range", h);
		evbuffer_add(b, buf + from, (size_t)(to - from + 1));
	} else
		evbuffer_add(b, buf, len);
	free(buf);
	base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	snprintf(h, sizeof(h), "attachment; filename=\"%.*s\"",
	    (int)strcspn(base, "\"\\\r\n"), base);
	evhttp_add_header(oh, "Content-Disposition", h);
	evhttp_add_header(oh, "Content-Type", "application/octet-stream");
	evhttp_add_header(oh, "Accept-Ranges", "bytes");
	evhttp_send_reply(k->req, status, util_http_phrase(status), b);
	evbuffer_free(b);
	xd_os_call_free(k);
}

/* ---- the routes ---- */

struct oroute {
	enum evhttp_cmd_type m;
	const char *path;
	int body;               /* 0 none, 1 JSON object, 2 JSON array,
	                         * 3 raw */
	void (*fn)(struct xd_os_call *k);
};

static void h_ping(struct xd_os_call *k) { xd_os_reply_empty(k, 200); }
static void h_files_delete(struct xd_os_call *k) { h_paths(k, 0); }
static void h_dirs_delete(struct xd_os_call *k) { h_paths(k, 1); }
static void h_dir_list(struct xd_os_call *k) { h_list(k, 0); }
static void h_search(struct xd_os_call *k) { h_list(k, 1); }

/* ---- terminals (exec_pty.c): OpenSandbox's /pty ---- */

/* POST /pty {cwd?, command?}: {session_id}. */
static void
h_pty_start(struct xd_os_call *k)
{
	json_t *b = json_object(), *v;
	struct xd_perr e;
	struct xd_cmd *c;

	if ((v = json_object_get(k->body, "cwd")) != NULL)
		json_object_set(b, "cwd", v);
	if ((v = json_object_get(k->body, "command")) != NULL &&
	    !(json_is_string(v) && json_string_length(v) == 0))
		json_object_set(b, "command", v);
	memset(&e, 0, sizeof(e));
	c = xd_pty_start(k->box, b, &e);
	json_decref(b);
	if (c == NULL && e.status == 501) {
		xd_os_reply_err(k, 501, "NOT_SUPPORTED", "%s", e.msg);
		xd_perr_clear(&e);
		return;
	}
	if (c == NULL) {
		xd_os_reply_perr(k, &e);
		return;
	}
	snprintf(c->who, sizeof(c->who), "%s", k->who);
	snprintf(c->role, sizeof(c->role), "app");
	xd_os_reply_json(k, 200, json_pack("{s:s}", "session_id", c->id));
}

static struct xd_cmd *
pty_of(struct xd_os_call *k, const char *id)
{
	struct xd_cmd *c = xd_cmd_find(k->box, id);

	if (c == NULL || !c->is_pty) {
		xd_os_reply_err(k, 404, "SESSION_GONE", "no terminal %s in "
		    "sandbox %s", id, XD_REC_ID(&k->box->rec));
		return NULL;
	}
	return c;
}

/* /pty/{id}, /pty/{id}/ws */
static void
h_pty(struct xd_os_call *k, const char *rest)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(k->req);
	const char *since = xd_os_q(k, "since");
	char id[64];
	size_t n = strcspn(rest, "/");
	uint64_t off = 0;
	struct xd_perr e;
	struct xd_cmd *c;
	int takeover;

	if (n == 0 || n >= sizeof(id) || (rest[n] != '\0' && strcmp(rest + n,
	    "/ws") != 0)) {
		xd_os_reply_err(k, 404, "NOT_FOUND", "no such route");
		return;
	}
	memcpy(id, rest, n);
	id[n] = '\0';
	if ((c = pty_of(k, id)) == NULL)
		return;
	if (rest[n] == '\0') {
		if (m == EVHTTP_REQ_GET)
			xd_os_reply_json(k, 200, json_pack("{s:s,s:b,s:I}",
			    "session_id", c->id, "running", c->running,
			    "output_offset", (json_int_t)c->out[0].total));
		else if (m == EVHTTP_REQ_DELETE) {
			if (c->running)
				xd_cmd_kill(c, "stop");
			xd_os_reply_empty(k, 200);
		} else
			xd_os_reply_err(k, 405, "METHOD_NOT_ALLOWED", "GET or "
			    "DELETE");
		return;
	}
	if (m != EVHTTP_REQ_GET) {
		xd_os_reply_err(k, 405, "METHOD_NOT_ALLOWED", "GET (a "
		    "WebSocket)");
		return;
	}
	/* the native route's parsers: the two agree on what a value is */
	if (xd_q_u64(since, &off) != 0) {
		xd_os_reply_err(k, 400, "INVALID_REQUEST", "since: a byte "
		    "offset");
		return;
	}
	if (xd_q_bool(xd_os_q(k, "takeover"), &takeover) != 0) {
		xd_os_reply_err(k, 400, "INVALID_REQUEST", "takeover: 1 or 0");
		return;
	}
	/* ?pty=0 (pipes instead of a terminal) is not made: every session
	 * here is a pty, as the connected message's mode says */
	memset(&e, 0, sizeof(e));
	if (xd_pty_attach(c, k->req, since != NULL, off, takeover, &e) != 0) {
		if (e.status == 409 && c->running) {
			xd_perr_clear(&e);
			xd_os_reply_err(k, 409, "ALREADY_CONNECTED", "a client "
			    "is attached to terminal %s (ask ?takeover=1)",
			    c->id);
		} else
			xd_os_reply_perr(k, &e);
		return;
	}
	/* the connection is the terminal's now */
	xd_os_call_free(k);
}

static const struct oroute oroutes[] = {
	{ EVHTTP_REQ_GET, "/ping", 0, h_ping },
	{ EVHTTP_REQ_POST, "/command", 1, h_command },
	{ EVHTTP_REQ_DELETE, "/command", 0, h_interrupt },
	{ EVHTTP_REQ_GET, "/files/info", 0, h_info },
	{ EVHTTP_REQ_DELETE, "/files", 0, h_files_delete },
	{ EVHTTP_REQ_POST, "/files/permissions", 1, h_perms },
	{ EVHTTP_REQ_POST, "/files/mv", 2, h_mv },
	{ EVHTTP_REQ_GET, "/files/search", 0, h_search },
	{ EVHTTP_REQ_POST, "/files/replace", 1, h_replace },
	{ EVHTTP_REQ_POST, "/files/upload", 3, h_upload },
	{ EVHTTP_REQ_GET, "/files/download", 0, h_download },
	{ EVHTTP_REQ_GET, "/directories/list", 0, h_dir_list },
	{ EVHTTP_REQ_POST, "/directories", 1, h_mkdirs },
	{ EVHTTP_REQ_DELETE, "/directories", 0, h_dirs_delete },
	{ EVHTTP_REQ_POST, "/pty", 1, h_pty_start },
};

/* What sluice does not do, by path prefix, and why. */
static const struct {
	const char *prefix;
	const char *what;
} unsupported[] = {
	{ "/code", "code-interpreter contexts (/code): sluice has no "
	    "Jupyter kernel; run python with POST /command" },
	{ "/session", "bash sessions (/session): each command is a new "
	    "shell; files and background processes carry over" },
	{ "/metrics", "execd metrics (/metrics): see sluice-execd's GET "
	    "/v1/metrics" },
	{ "/v1/isolated", "isolated sessions (/v1/isolated)" },
};

void
xd_os_execd(struct xd_os_call *k, const char *rest)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(k->req);
	struct evbuffer *in = evhttp_request_get_input_buffer(k->req);
	size_t len = evbuffer_get_length(in), i, pl;
	int known = 0;
	json_error_t je;
	struct xd_perr e;

	/* execd's own port proxy: the execd token opens every port, as
	 * OpenSandbox's does (a command could reach them anyway) */
	if (strncmp(rest, "/proxy/", 7) == 0) {
		char *end;
		long port;

		errno = 0;
		port = strtol(rest + 7, &end, 10);
		if (errno != 0 || end == rest + 7 || port < 1 || port > 65535 ||
		    (*end != '\0' && *end != '/')) {
			xd_os_reply_err(k, 400, "INVALID_PORT", "port: 1 to "
			    "65535");
			return;
		}
		xd_os_port(k, port, end);
		return;
	}
	if (strncmp(rest, "/pty/", 5) == 0) {
		h_pty(k, rest + 5);
		return;
	}
	for (i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++) {
		pl = strlen(unsupported[i].prefix);
		if (strncmp(rest, unsupported[i].prefix, pl) == 0 &&
		    (rest[pl] == '\0' || rest[pl] == '/')) {
			xd_os_reply_err(k, 501, "NOT_SUPPORTED", "sluice does "
			    "not provide %s", unsupported[i].what);
			return;
		}
	}
	/* /command/status/{id} and /command/{id}/logs */
	if (strncmp(rest, "/command/", 9) == 0) {
		const char *id = rest + 9;
		char cid[64];
		size_t n;

		if (m != EVHTTP_REQ_GET) {
			xd_os_reply_err(k, 405, "METHOD_NOT_ALLOWED", "GET "
			    "only");
			return;
		}
		if (strncmp(id, "status/", 7) == 0 && strchr(id + 7, '/') ==
		    NULL) {
			h_status(k, id + 7);
			return;
		}
		n = strcspn(id, "/");
		if (n > 0 && n < sizeof(cid) && strcmp(id + n, "/logs") == 0) {
			memcpy(cid, id, n);
			cid[n] = '\0';
			h_logs(k, cid);
			return;
		}
		xd_os_reply_err(k, 404, "NOT_FOUND", "no such route");
		return;
	}
	for (i = 0; i < sizeof(oroutes) / sizeof(oroutes[0]); i++) {
		if (strcmp(oroutes[i].path, rest) != 0)
			continue;
		known = 1;
		if (oroutes[i].m != m)
			continue;
		if (oroutes[i].body == 1 || oroutes[i].body == 2) {
			if (len > k->xd->cfg->max_body_bytes) {
				xd_os_reply_err(k, 413, "REQUEST_TOO_LARGE",
				    "more than max_body_bytes");
				return;
			}
			k->body = len ? json_loadb((const char *)
			    evbuffer_pullup(in, -1), len,
			    JSON_REJECT_DUPLICATES, &je) : NULL;
			if (oroutes[i].body == 1 ? !json_is_object(k->body) :
			    !json_is_array(k->body)) {
				xd_os_reply_err(k, 400, "INVALID_REQUEST_BODY",
				    "expected a JSON %s", oroutes[i].body ==
				    1 ? "object" : "array");
				return;
			}
		}
		memset(&e, 0, sizeof(e));
		oroutes[i].fn(k);
		return;
	}
	if (known)
		xd_os_reply_err(k, 405, "METHOD_NOT_ALLOWED", "%s: not with "
		    "this method", rest);
	else
		xd_os_reply_err(k, 404, "NOT_FOUND", "no such execd route "
		    "%s", rest);
}
