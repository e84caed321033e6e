/*
 * exec_pty.c: terminals (DESIGN.md, "Ports, terminals and previews";
 * issue 22 point 8): a shell on a pty inside a sandbox, driven over a
 * WebSocket.
 *
 * A terminal is a background command (exec_cmd.c) started with
 * spec.pty: the daemon opens the pty (posix_openpt) and hands its slave
 * to the backend's spawn as stdin, so the shell runs where every
 * command runs (the sandbox user, its cgroups and namespaces, killed
 * with its tree); the wrapper inside (setsid -c) makes the slave its
 * controlling terminal and points stdout and stderr at it, so that
 * Ctrl-C, job control and `stty size` work as on any terminal.  A
 * backend whose commands' stdin is relayed (gvisor: no tty_stdin) makes
 * a terminal inside and relays it to this one (sbx.h, cmd.tty): there
 * its keeper owns the terminal (no setsid -c), and a resize and a signal
 * go to it through the backend's resize and tty_signal.  Its
 * output is the command's stdout ring (ring_bytes): offsets count from
 * the terminal's first byte, and a replay since an offset starts at the
 * oldest byte still kept.  The session id is the command's id.
 *
 * The WebSocket (OpenSandbox's protocol, opensandbox-api.md §5):
 *  server to client: binary frames whose first byte names the channel,
 *    0x01 output, 0x02 the wrapper's stderr, 0x03 a replay: an 8-byte
 *    big-endian offset, then the bytes from it; text frames of JSON
 *    {"type": "connected", "session_id", "mode": "pty", "offset"} (the
 *    offset of the next live byte: a replay, if asked for, comes next
 *    and ends there), {"type": "exit", "exit_code"}, {"type": "error",
 *    "code", "error"};
 *  client to server: binary 0x00 then input bytes, or JSON {"type":
 *    "stdin", "data"}, {"type": "resize", "cols", "rows"}, {"type":
 *    "signal", "signal": "SIGINT" | "INT" | 2} (to the terminal's
 *    foreground process group).
 * One client at a time: another gets 409 ALREADY_CONNECTED unless it
 * asks ?takeover=1; then the first gets an error TAKEN_OVER and a close
 * frame 4001.  A client that leaves detaches: the shell runs on, its
 * output kept in the ring.  A client more than CLIENT_QUEUE_MAX behind
 * is closed (1008): it reattaches with ?since= its offset.
 * The framing is exec_wsf.c's.
 */
#include "sluice-config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "proxy/lib/jsonstrict.h"
#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/execd/exec_wsf.h"

#define MSG_MAX			(64 * 1024)     /* a client message */
#define CLIENT_QUEUE_MAX	(4 * 1024 * 1024)
#define CLOSE_WAIT_S		5
#define CODE_TAKEN_OVER		4001

struct xd_ptyc {
	struct xd *xd;
	struct xd_cmd *cmd;             /* NULL once detached or gone */
	struct evhttp_connection *evcon;
	struct bufferevent *bev;
	struct xd_wsf rd;
	struct event *ev_close;         /* the closing handshake's bound */
	int closing;                    /* our close frame is sent */
	int peer_closed;                /* the client's close came */
	int64_t close_by;               /* monotonic ms: freed by then */
};

static void conn_output(void *arg, struct xd_cmd *c, int stream,
    const unsigned char *b, size_t n);
static void conn_exit(void *arg, struct xd_cmd *c);
static void conn_gone(void *arg, struct xd_cmd *c);

static const struct xd_sink pty_sink = { conn_output, conn_exit, conn_gone };

/* ---- sending ---- */

static void
send_frame(struct xd_ptyc *p, enum xd_wsf_op op, const void *pre, size_t npre,
    const void *b, size_t n)
{
	struct evbuffer *o = bufferevent_get_output(p->bev);
	unsigned char h[10];

	evbuffer_add(o, h, xd_wsf_head(h, op, (uint64_t)(npre + n)));
	if (npre > 0)
		evbuffer_add(o, pre, npre);
	if (n > 0)
		evbuffer_add(o, b, n);
}

static void
send_json(struct xd_ptyc *p, json_t *j)
{
	char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (s != NULL)
		send_frame(p, XD_WSF_TEXT, NULL, 0, s, strlen(s));
	free(s);
}

static void
send_error(struct xd_ptyc *p, const char *code, const char *msg)
{
	send_json(p, json_pack("{s:s,s:s,s:s}", "type", "error", "code", code,
	    "error", msg));
}

static void
conn_free(struct xd_ptyc *p)
{
	struct evhttp_connection *evcon = p->evcon;

	if (p->cmd != NULL && p->cmd->sink_arg == p)
		xd_cmd_detach(p->cmd);
	p->cmd = NULL;
	if (p->ev_close != NULL)
		event_free(p->ev_close);
	xd_wsf_free(&p->rd);
	free(p);
	/* evhttp's connection owns the bufferevent and the request:
	 * freeing it frees both */
	if (evcon != NULL) {
		evhttp_connection_set_closecb(evcon, NULL, NULL);
		evhttp_connection_free(evcon);
	}
}

static void
on_close_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct xd_ptyc *p = arg;
	struct timeval tv = { 0, 20000 };

	(void)fd;
	(void)what;
	/* both closes done: free once our close is written (the layer
	 * under a filter calls back no one when it has), within the
	 * bound */
	if (p->peer_closed && p->closing && xd_bev_queued(p->bev) > 0 &&
	    sbx_now_ms() < p->close_by) {
		evtimer_add(p->ev_close, &tv);
		return;
	}
	conn_free(p);
}

/* Both closes are done: free p once what it sent is written. */
static void
conn_done(struct xd_ptyc *p)
{
	struct timeval now = { 0, 0 };

	bufferevent_disable(p->bev, EV_READ);
	if (p->close_by == 0)
		p->close_by = sbx_now_ms() + CLOSE_WAIT_S * 1000;
	evtimer_add(p->ev_close, &now);
}

/* Start the closing handshake: detach, send code and why, wait a
 * bounded time for the client's close (or its end). */
static void
conn_close(struct xd_ptyc *p, int code, const char *why)
{
	unsigned char pl[125];
	struct timeval tv = { CLOSE_WAIT_S, 0 };

	if (p->cmd != NULL && p->cmd->sink_arg == p)
		xd_cmd_detach(p->cmd);
	p->cmd = NULL;
	if (p->closing)
		return;
	p->closing = 1;
	send_frame(p, XD_WSF_CLOSE, NULL, 0, pl, xd_wsf_close_payload(pl,
	    code, why));
	if (p->peer_closed) {
		/* ours answered theirs: done once it is written */
		conn_done(p);
		return;
	}
	p->close_by = sbx_now_ms() + CLOSE_WAIT_S * 1000;
	evtimer_add(p->ev_close, &tv);
}

/* ---- the command's side ---- */

static void
conn_output(void *arg, struct xd_cmd *c, int stream, const unsigned char *b,
    size_t n)
{
	struct xd_ptyc *p = arg;
	unsigned char ch = stream == 0 ? 0x01 : 0x02;

	(void)c;
	if (p->closing)
		return;
	if (xd_bev_queued(p->bev) + n > CLIENT_QUEUE_MAX) {
		/* a client that does not read: the ring keeps the output,
		 * it comes back with ?since= */
		send_error(p, "RUNTIME_ERROR", "the client reads too slowly: "
		    "reattach with ?since=");
		conn_close(p, XD_WSF_POLICY, "too slow");
		return;
	}
	send_frame(p, XD_WSF_BINARY, &ch, 1, b, n);
}

static void
conn_exit(void *arg, struct xd_cmd *c)
{
	struct xd_ptyc *p = arg;

	send_json(p, json_pack("{s:s,s:s,s:I,s:I}", "type", "exit",
	    "session_id", c->id, "exit_code", xd_cmd_exit_code(c, NULL), "offset",
	    (json_int_t)c->out[0].total));
	conn_close(p, XD_WSF_NORMAL, "the terminal's shell exited");
}

static void
conn_gone(void *arg, struct xd_cmd *c)
{
	struct xd_ptyc *p = arg;

	(void)c;
	p->cmd = NULL;
	c->sink = NULL;
	c->sink_arg = NULL;
	send_error(p, "SESSION_GONE", "the terminal is gone");
	conn_close(p, XD_WSF_GOING_AWAY, "the terminal is gone");
}

/* ---- the client's side ---- */

static int
sig_of(json_t *v)
{
	static const struct { const char *name; int sig; } sigs[] = {
		{ "INT", SIGINT }, { "TERM", SIGTERM }, { "KILL", SIGKILL },
		{ "HUP", SIGHUP }, { "QUIT", SIGQUIT }, { "TSTP", SIGTSTP },
		{ "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "USR1", SIGUSR1 },
		{ "USR2", SIGUSR2 }, { "WINCH", SIGWINCH },
	};
	const char *s;
	size_t i;

	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);

		for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			if (sigs[i].sig == n)
				return (int)n;
		return -1;
	}
	if ((s = json_string_value(v)) == NULL)
		return -1;
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strcasecmp(s, sigs[i].name) == 0)
			return sigs[i].sig;
	return -1;
}

static void
on_json(struct xd_ptyc *p, const unsigned char *b, size_t n)
{
	struct xd_cmd *c = p->cmd;
	json_error_t je;
	json_t *j = json_loadb((const char *)b, n, JSON_REJECT_DUPLICATES, &je);
	const char *type = json_string_value(json_object_get(j, "type"));
	const char *data;
	struct winsize ws;
	json_int_t cols, rows;
	pid_t pg;
	int sig;

	if (!json_is_object(j) || type == NULL) {
		send_error(p, "INVALID_FRAME", "a text frame is a JSON object "
		    "with a \"type\"");
		goto done;
	}
	if (strcmp(type, "stdin") == 0) {
		if ((data = json_string_value(json_object_get(j, "data"))) ==
		    NULL)
			send_error(p, "INVALID_FRAME", "stdin: \"data\", a "
			    "string");
		else if (xd_cmd_input(c, data, json_string_length(
		    json_object_get(j, "data"))) != 0)
			send_error(p, "STDIN_WRITE_FAILED", "the terminal "
			    "takes no more input now");
	} else if (strcmp(type, "resize") == 0) {
		cols = json_integer_value(json_object_get(j, "cols"));
		rows = json_integer_value(json_object_get(j, "rows"));
		if (cols < 1 || cols > 10000 || rows < 1 || rows > 10000) {
			send_error(p, "INVALID_FRAME", "resize: \"cols\" and "
			    "\"rows\", integers 1..10000");
			goto done;
		}
		memset(&ws, 0, sizeof(ws));
		ws.ws_col = (unsigned short)cols;
		ws.ws_row = (unsigned short)rows;
		/* the kernel sends SIGWINCH to the foreground group; a
		 * terminal inside the sandbox (gvisor) is told as well */
		if (c->pty_fd < 0 || ioctl(c->pty_fd, TIOCSWINSZ, &ws) != 0 ||
		    (c->box->be->resize != NULL && (!c->running ||
		    c->box->be->resize(&c->proc, (unsigned)rows,
		    (unsigned)cols) != 0)))
			send_error(p, "RUNTIME_ERROR", "resize failed");
	} else if (strcmp(type, "signal") == 0) {
		if ((sig = sig_of(json_object_get(j, "signal"))) < 0) {
			send_error(p, "INVALID_FRAME", "signal: one of INT, "
			    "TERM, KILL, HUP, QUIT, TSTP, CONT, STOP, USR1, "
			    "USR2, WINCH (a name, SIG-prefixed or not, or its "
			    "number)");
			goto done;
		}
		/* the foreground process group, as the daemon's pid
		 * namespace numbers it; never the daemon's own group (a
		 * terminal with none left answers 0 or -1) */
		if (c->box->be->tty_signal != NULL) {
			/* the terminal is inside: so is its group */
			if (!c->running || c->box->be->tty_signal(&c->proc,
			    sig) != 0)
				send_error(p, "RUNTIME_ERROR", "no process to "
				    "signal");
		} else if (c->pty_fd < 0 || ioctl(c->pty_fd, TIOCGPGRP, &pg) !=
		    0 || pg <= 1 || pg == getpgrp() || kill(-pg, sig) != 0)
			send_error(p, "RUNTIME_ERROR", "no process to signal");
	} else
		send_error(p, "INVALID_FRAME", "type: stdin, resize or signal");
done:
	json_decref(j);
}

static void
on_msg(struct xd_ptyc *p, const struct xd_wsf_msg *m)
{
	switch (m->op) {
	case XD_WSF_PING:
		if (!p->closing)
			send_frame(p, XD_WSF_PONG, NULL, 0, m->data, m->len);
		break;
	case XD_WSF_PONG:
		break;
	case XD_WSF_CLOSE:
		p->peer_closed = 1;
		if (p->closing) {
			conn_done(p);
			return;
		}
		/* the client detaches: echo its code */
		conn_close(p, m->code == 1005 ? XD_WSF_NORMAL : m->code, "");
		break;
	case XD_WSF_BINARY:
		if (p->closing || p->cmd == NULL)
			break;
		if (m->len < 1 || m->data[0] != 0x00)
			send_error(p, "INVALID_FRAME", "a binary frame is 0x00 "
			    "and input bytes");
		else if (m->len > 1 && xd_cmd_input(p->cmd, m->data + 1,
		    m->len - 1) != 0)
			send_error(p, "STDIN_WRITE_FAILED", "the terminal takes "
			    "no more input now");
		break;
	case XD_WSF_TEXT:
		if (!p->closing && p->cmd != NULL)
			on_json(p, m->data, m->len);
		break;
	default:
		break;
	}
}

static void
conn_read(struct bufferevent *bev, void *arg)
{
	struct xd_ptyc *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct xd_wsf_msg m;
	enum xd_wsf_rc rc;
	size_t used, n;

	for (;;) {
		/* a frame is at most MSG_MAX and a 14-byte head: more need
		 * not be contiguous */
		n = evbuffer_get_length(in);
		if (n > MSG_MAX + 14)
			n = MSG_MAX + 14;
		if (n == 0)
			return;
		rc = xd_wsf_read(&p->rd, evbuffer_pullup(in, (ev_ssize_t)n), n,
		    &used, &m);
		evbuffer_drain(in, used);
		if (rc == XD_WSF_FAIL) {
			evbuffer_drain(in, evbuffer_get_length(in));
			bufferevent_disable(bev, EV_READ);
			if (p->closing) {
				conn_done(p);
				return;
			}
			conn_close(p, m.code, m.why);
			return;
		}
		if (rc == XD_WSF_MSG) {
			on_msg(p, &m);
			/* both closes done: nothing more is read */
			if (p->peer_closed && p->closing)
				return;
			continue;
		}
		if (used == 0)
			return;
	}
}

static void
conn_write(struct bufferevent *bev, void *arg)
{
	(void)bev;
	(void)arg;
	/* the end after both closes is conn_done's timer */
}

static void
conn_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	/* the client went (EOF, error): it detached */
	conn_free(arg);
}

/* ---- the routes' side ---- */

struct xd_cmd *
xd_pty_start(struct xd_box *b, json_t *body, struct xd_perr *e)
{
	static const char *const keys[] = { "command", "cwd", "env", "cols",
	    "rows", NULL };
	const struct xd_cfg *cfg = b->xd->cfg;
	json_t *argv, *env, *n = NULL, *v;
	const char *key, *cmd = NULL;
	json_int_t cols = 80, rows = 24;
	struct xd_cmd_spec s;
	struct xd_cmd *c;

	if (!b->be->tty_stdin && b->be->resize == NULL) {
		xd_perr_set(e, 501, "backend_unavailable", "terminals: the %s "
		    "backend relays a command's stdin, so no pty reaches it",
		    b->be->name);
		e->extra = json_pack("{s:s}", "reason", "no_terminal");
		return NULL;
	}
	if (body != NULL && !json_is_object(body)) {
		xd_perr_set(e, 400, "bad_request", "the body is a JSON object");
		return NULL;
	}
	if (body != NULL && (key = jsonstrict_unknown_key(body, keys)) !=
	    NULL) {
		xd_perr_set(e, 400, "bad_request", "unknown key \"%.64s\" "
		    "(command, cwd, env, cols, rows)", key);
		return NULL;
	}
	if ((v = json_object_get(body, "command")) != NULL && ((cmd =
	    json_string_value(v)) == NULL || !cmd[0])) {
		xd_perr_set(e, 400, "bad_request", "command: a non-empty string "
		    "(run by bash -c), or absent for an interactive shell");
		return NULL;
	}
	if ((v = json_object_get(body, "cols")) != NULL)
		cols = json_is_integer(v) ? json_integer_value(v) : 0;
	if ((v = json_object_get(body, "rows")) != NULL)
		rows = json_is_integer(v) ? json_integer_value(v) : 0;
	if (cols < 1 || cols > 10000 || rows < 1 || rows > 10000) {
		xd_perr_set(e, 400, "bad_request", "cols and rows: integers "
		    "1..10000");
		return NULL;
	}
	/* inside: a session of its own whose controlling terminal is the
	 * pty (stdin), stdout and stderr pointed at it, then the shell;
	 * where the terminal is made inside (gvisor) the backend's keeper
	 * has made it the session's already */
	argv = b->be->tty_stdin ? json_pack("[s,s,s,s,s,s,s,s]", "setsid",
	    "-w", "-c", "/bin/sh", "-c", "exec \"$@\" >&0 2>&0", "sh",
	    "/bin/bash") : json_pack("[s,s,s,s,s]", "/bin/sh", "-c",
	    "exec \"$@\" >&0 2>&0", "sh", "/bin/bash");
	if (argv != NULL) {
		if (cmd != NULL) {
			json_array_append_new(argv, json_string("-c"));
			json_array_append_new(argv, json_string(cmd));
		} else
			json_array_append_new(argv, json_string("-i"));
	}
	env = json_object_get(body, "env") != NULL ? json_deep_copy(
	    json_object_get(body, "env")) : json_object();
	if (json_is_object(env) && json_object_get(env, "TERM") == NULL)
		json_object_set_new(env, "TERM", json_string("xterm-256color"));
	n = json_pack("{s:o,s:o,s:b}", "cmd", argv, "env", env, "changed", 0);
	if (n == NULL) {
		xd_perr_set(e, 500, "internal", "out of memory");
		return NULL;
	}
	if ((v = json_object_get(body, "cwd")) != NULL)
		json_object_set(n, "cwd", v);
	memset(&s, 0, sizeof(s));
	if (xd_cmd_spec_parse(n, &b->lim, cfg->max.timeout_s,
	    cfg->max.output_cap, 1, &s, e) != 0) {
		json_decref(n);
		return NULL;
	}
	json_decref(n);
	s.pty = 1;
	s.cols = (unsigned short)cols;
	s.rows = (unsigned short)rows;
	c = xd_cmd_start(b, &s, 1, XD_OUT_RING, NULL, NULL, e);
	xd_cmd_spec_free(&s);
	return c;
}

json_t *
xd_pty_status(const struct xd_cmd *c)
{
	struct winsize ws;
	json_t *o;

	memset(&ws, 0, sizeof(ws));
	if (c->pty_fd >= 0)
		(void)ioctl(c->pty_fd, TIOCGWINSZ, &ws);
	o = json_pack("{s:s,s:b,s:I,s:I,s:b}", "session_id", c->id,
	    "running", c->running, "output_offset",
	    (json_int_t)c->out[0].total, "oldest_offset",
	    (json_int_t)(c->out[0].buf != NULL ? c->out[0].total -
	    c->out[0].len : c->out[0].total), "attached", c->sink ==
	    &pty_sink);
	if (o != NULL && c->running) {
		json_object_set_new(o, "cols", json_integer(ws.ws_col));
		json_object_set_new(o, "rows", json_integer(ws.ws_row));
	}
	if (o != NULL && !c->running)
		json_object_set_new(o, "exit_code", json_integer(
		    xd_cmd_exit_code(c, NULL)));
	return o;
}

int
xd_pty_attach(struct xd_cmd *c, struct evhttp_request *req, int has_since,
    uint64_t since, int takeover, struct xd_perr *e)
{
	struct xd *xd = c->box->xd;
	struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
	const char *up = evhttp_find_header(ih, "Upgrade");
	const char *conn = evhttp_find_header(ih, "Connection");
	const char *ver = evhttp_find_header(ih, "Sec-WebSocket-Version");
	const char *key = evhttp_find_header(ih, "Sec-WebSocket-Key");
	struct evhttp_connection *evcon;
	struct xd_ptyc *p, *old;
	char accept[29];
	unsigned char *rb = NULL, pre[9];
	uint64_t off = since;
	size_t rn = 0;
	int i;

	if (!c->is_pty) {
		xd_perr_set(e, 404, "not_found", "%s is a command, not a "
		    "terminal", c->id);
		return -1;
	}
	if (up == NULL || strcasecmp(up, "websocket") != 0 || conn == NULL ||
	    strcasestr(conn, "upgrade") == NULL) {
		xd_perr_set(e, 400, "bad_request", "a WebSocket: GET with "
		    "Upgrade: websocket and Connection: Upgrade");
		return -1;
	}
	if (ver == NULL || strcmp(ver, "13") != 0) {
		xd_perr_set(e, 400, "bad_request", "Sec-WebSocket-Version: 13");
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Sec-WebSocket-Version", "13");
		return -1;
	}
	if (xd_wsf_accept(key, accept) != 0) {
		xd_perr_set(e, 400, "bad_request", "Sec-WebSocket-Key: 16 bytes "
		    "in base64");
		return -1;
	}
	if (!c->running) {
		xd_perr_set(e, 409, "conflict", "terminal %s has exited (its "
		    "output: GET .../commands/%s/output)", c->id, c->id);
		return -1;
	}
	old = c->sink == &pty_sink ? c->sink_arg : NULL;
	if (old != NULL && !takeover) {
		xd_perr_set(e, 409, "conflict", "a client is attached to "
		    "terminal %s (ask ?takeover=1)", c->id);
		e->extra = json_pack("{s:s}", "reason", "ALREADY_CONNECTED");
		return -1;
	}
	/* the closing's timer made with the connection: a close never
	 * lacks its bound, and a connection is freed only where every
	 * other is (conn_free: its timer, the client's end), never in the
	 * middle of reading its frames */
	if ((evcon = evhttp_request_get_connection(req)) == NULL ||
	    evhttp_connection_get_bufferevent(evcon) == NULL ||
	    (p = calloc(1, sizeof(*p))) == NULL) {
		xd_perr_set(e, 500, "internal", "out of memory");
		return -1;
	}
	if ((p->ev_close = evtimer_new(xd->base, on_close_timeout, p)) ==
	    NULL || (has_since && xd_cmd_ring(c, 0, &off, &rb, &rn) != 0)) {
		if (p->ev_close != NULL)
			event_free(p->ev_close);
		free(p);
		xd_perr_set(e, 500, "internal", "out of memory");
		return -1;
	}
	if (old != NULL) {
		send_error(old, "TAKEN_OVER", "another client took the "
		    "terminal over");
		conn_close(old, CODE_TAKEN_OVER, "taken over");
	}
	p->xd = xd;
	p->cmd = c;
	p->evcon = evcon;
	p->bev = evhttp_connection_get_bufferevent(evcon);
	xd_wsf_init(&p->rd, MSG_MAX);
	/* evhttp answers nothing more on this connection: its
	 * bufferevent is ours until conn_free frees the connection */
	evhttp_connection_set_closecb(evcon, NULL, NULL);
	xd_gate_upgraded(xd, req);
	bufferevent_setcb(p->bev, conn_read, conn_write, conn_event, p);
	bufferevent_set_timeouts(p->bev, NULL, NULL);
	evbuffer_add_printf(bufferevent_get_output(p->bev),
	    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", accept);
	c->sink = &pty_sink;
	c->sink_arg = p;
	send_json(p, json_pack("{s:s,s:s,s:s,s:I}", "type", "connected",
	    "session_id", c->id, "mode", "pty", "offset",
	    (json_int_t)c->out[0].total));
	if (has_since) {
		pre[0] = 0x03;
		for (i = 0; i < 8; i++)
			pre[1 + i] = (unsigned char)(off >> (56 - 8 * i));
		send_frame(p, XD_WSF_BINARY, pre, 9, rb, rn);
		free(rb);
	}
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
	/* what the client sent after its head */
	if (evbuffer_get_length(bufferevent_get_input(p->bev)) > 0)
		conn_read(p->bev, p);
	return 0;
}
