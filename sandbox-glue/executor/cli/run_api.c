/*
 * run_api.c: sluice-run as the command line of sluice-execd.  Every verb
 * is a call of the executor API (sluice-execd(8), API) on its Unix
 * socket, through proxy/sluicectl/ctl_http.c, the one control-API
 * client.  The daemon decides the caller's role from SO_PEERCRED, so a
 * member of its app group needs no root, and it alone makes sandboxes.
 *
 * Output: text for people, or with --json the API's JSON as it came.
 * An API error is "sluice-run: CODE: message (key value, ...)" on
 * stderr (and its JSON on stdout with --json) and an exit status from
 * its code (api_exit; run_api.h).
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "proxy/sluicectl/ctl_http.h"
#include "sandbox-glue/executor/cli/run_api.h"
#include "sandbox-glue/executor/cli/run_out.h"
#include "sandbox-glue/executor/backend/sbx.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

#define PROG		"sluice-run"
#define DEF_SOCKET	"/run/sluice-execd/exec.sock"
#define CALL_MS		120000  /* a call's connect and each wait */
#define CANCEL_MS	5000    /* the cancel of an interrupted exec */
#define GRACE_MS	3000    /* interrupted: for the start event's id */
#define CANCEL_WAIT_S	15      /* then for the result (the daemon's kill
                                 * backstop is 10 s) */
#define STDIN_MAX	(64u << 20)     /* --stdin */
#define WRITE_MAX	(1024u << 20)   /* write: what is read of stdin */

static struct ctlh_target T;
static int opt_json;

/* the verb's options */
static const char *o_id, *o_tenant, *o_user, *o_tier, *o_profile;
static const char *o_backend, *o_cwd, *o_shell, *o_glob, *o_manager;
static const char *o_old, *o_new;
static long o_timeout = -1, o_cap = -1, o_offset = -1;
static int o_stdin, o_all, o_discard, o_recursive, o_follow;
static json_t *o_env, *o_limits;

static volatile sig_atomic_t got_signal;
static int sig_pipe[2] = { -1, -1 };    /* written by on_signal */

static void
json_out(json_t *o)
{
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_ENSURE_ASCII |
	    JSON_ENCODE_ANY);

	if (s == NULL)
		run_die(EX_FAIL, "out of memory");
	fputs(s, stdout);
	fputc('\n', stdout);
	free(s);
}

static const char *
jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : "-";
}

/* ---- URLs ---- */

/* Append s %-encoded to the path being built: all but unreserved
 * characters, and "/" (kept when keep_slash, except a leading one, which
 * the route would take for an empty segment). */
static void
pct(char *buf, size_t len, const char *s, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = strlen(buf);
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p; p++) {
		int plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <=
		    'z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p) ||
		    (*p == '/' && keep_slash && p != (const unsigned char *)s);

		if (o + 4 >= len)
			run_die(EX_USAGE, "path too long");
		if (plain)
			buf[o++] = (char)*p;
		else {
			buf[o++] = '%';
			buf[o++] = hex[*p >> 4];
			buf[o++] = hex[*p & 15];
		}
	}
	buf[o] = '\0';
}

/* "/v1/sandboxes/ID" + tail (already %-encoded) */
static void
box_path(char *buf, size_t len, const char *tail)
{
	snprintf(buf, len, "/v1/sandboxes/");
	pct(buf, len, o_id, 0);
	if (strlen(buf) + strlen(tail) >= len)
		run_die(EX_USAGE, "path too long");
	strcat(buf, tail);
}

/* ---- errors ---- */

/* The exit status of an API error (sluice-run(1), EXIT STATUS). */
static int
api_exit(const char *code, json_t *err)
{
	static const struct {
		const char *code;
		int ex;
	} map[] = {
		{ "bad_request", EX_USAGE }, { "not_found", EX_NOSANDBOX },
		{ "quota_exceeded", EX_QUOTA },
		{ "broker_unavailable", EX_BROKER }, { "exists", EX_EXISTS },
		{ "backend_unavailable", EX_BACKEND }, { "busy", EX_BUSY },
		{ "conflict", EX_CONFLICT },
		{ "network_not_permitted", EX_NETWORK },
		{ "forbidden", EX_DENIED }, { "unauthorized", EX_DENIED },
		{ "too_large", EX_TOOLARGE },
	};
	const char *reason = json_string_value(json_object_get(err, "reason"));
	size_t i;

	/* the image and profile refusals keep the local mode's status,
	 * whichever HTTP code carries them (403, 503) */
	if (reason != NULL && (strcmp(reason, "image_missing") == 0 ||
	    strcmp(reason, "image_in_use") == 0 ||
	    strcmp(reason, "profile_unknown") == 0 ||
	    strcmp(reason, "profile_forbidden") == 0))
		return EX_IMAGE;
	for (i = 0; code != NULL && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(code, map[i].code) == 0)
			return map[i].ex;
	return EX_FAIL;
}

/* Report a response that is not a success; its exit status. */
static int
api_error(const struct ctlh_resp *r)
{
	json_t *o = r->body_len ? json_loadb(r->body, r->body_len,
	    JSON_ALLOW_NUL, NULL) : NULL;
	json_t *e = json_object_get(o, "error"), *v;
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *key;
	char extra[512] = "";
	size_t n = 0;
	int ex;

	if (!json_is_object(e) || code == NULL) {
		json_decref(o);
		fprintf(stderr, PROG ": HTTP %d %s\n", r->status,
		    run_safe(r->reason));
		return r->status == 413 ? EX_TOOLARGE : r->status == 404 ?
		    EX_NOSANDBOX : EX_FAIL;
	}
	/* the fields beside code and message: scope, limit and in_use of
	 * a quota, field and max of a limit, reason, effective_tier... */
	json_object_foreach(e, key, v) {
		char val[128];

		if (strcmp(key, "code") == 0 || strcmp(key, "message") == 0)
			continue;
		if (json_is_string(v))
			snprintf(val, sizeof(val), "%s", run_safe(
			    json_string_value(v)));
		else if (json_is_integer(v))
			snprintf(val, sizeof(val), "%lld",
			    (long long)json_integer_value(v));
		else if (json_is_boolean(v) || json_is_null(v))
			snprintf(val, sizeof(val), "%s", json_is_true(v) ?
			    "true" : json_is_null(v) ? "null" : "false");
		else
			continue;
		n += (size_t)snprintf(extra + n, sizeof(extra) - n,
		    "%s%s %s", n ? ", " : " (", run_safe(key), val);
		/* cut: what is written stops at the array's end, and so
		 * does n (extra + n must stay inside it) */
		if (n >= sizeof(extra))
			n = sizeof(extra) - 1;
	}
	if (n > 0 && n + 2 < sizeof(extra))
		strcat(extra, ")");
	fprintf(stderr, PROG ": %s: %s%s\n", run_safe(code), run_safe(
	    json_string_value(json_object_get(e, "message"))), extra);
	if (opt_json)
		json_out(o);
	ex = api_exit(code, e);
	json_decref(o);
	return ex;
}

static void
unreachable(enum ctlh_rc rc, const char *err)
{
	run_die(rc == CTLH_USAGE ? EX_USAGE : EX_EXECD, "%s: %s",
	    run_safe(T.socket),
	    run_safe(err));
}

/*
 * One call; on a 2xx the parsed JSON body (NULL for an empty or non-JSON
 * one) in *out and EX_OK, else the error reported and its exit status.
 * body: JSON to send (NULL none).
 */
static int
call(const char *method, const char *path, json_t *body, json_t **out)
{
	struct ctlh_req q = { .method = method, .path = path };
	struct ctlh_resp r;
	char err[512], *b = NULL;
	enum ctlh_rc rc;
	int ex = EX_OK;

	*out = NULL;
	if (body != NULL) {
		if ((b = json_dumps(body, JSON_COMPACT)) == NULL)
			run_die(EX_FAIL, "out of memory");
		q.body = b;
		q.body_len = strlen(b);
	}
	rc = ctlh_send(&T, &q, &r, err, sizeof(err));
	free(b);
	if (rc != CTLH_OK)
		unreachable(rc, err);
	if (r.status < 200 || r.status > 299)
		ex = api_error(&r);
	else if (r.body_len > 0)
		*out = json_loadb(r.body, r.body_len, JSON_ALLOW_NUL, NULL);
	ctlh_resp_free(&r);
	return ex;
}

/* call() and, with --json, the answer printed. */
static int
call_print(const char *method, const char *path, json_t *body, json_t **out)
{
	int ex = call(method, path, body, out);

	if (ex == EX_OK && opt_json && *out != NULL)
		json_out(*out);
	return ex;
}

/*
 * GET path for a verb that writes the answer as text: 1 when *out is the
 * caller's to write; 0 when nothing is left to do (the call failed, or
 * --json printed the answer), with *ex the exit status.
 */
static int
get_text(const char *path, json_t **out, int *ex)
{
	*ex = call_print("GET", path, NULL, out);
	if (*ex == EX_OK && !opt_json)
		return 1;
	json_decref(*out);
	*out = NULL;
	return 0;
}

static void
need_id(const char *verb)
{
	if (o_id == NULL)
		run_die(EX_USAGE, "%s: --chat ID (or --id ID)", verb);
	if (!sbx_id_ok(o_id, SBX_ID_MAX))
		run_die(EX_USAGE,
		    "--chat: 1 to %d of [A-Za-z0-9_.-], not starting "
		    "with a dot", SBX_ID_MAX);
}

static const char *
one_arg(char **args, const char *usage)
{
	if (args[0] == NULL || args[1] != NULL)
		run_die(EX_USAGE, "usage: " PROG " %s", usage);
	return args[0];
}

static void
no_args(char **args, const char *verb)
{
	if (args[0] != NULL)
		run_die(EX_USAGE, "%s: unexpected argument %s", verb,
		    run_safe(args[0]));
}

/* ---- text output ---- */

static void
ms_time(json_t *v, char *buf, size_t len)
{
	time_t t;
	struct tm tm;

	snprintf(buf, len, "-");
	if (json_is_integer(v)) {
		json_int_t x = json_integer_value(v);

		/* the API gives seconds or milliseconds since the epoch */
		t = (time_t)(x > 100000000000LL ? x / 1000 : x);
		if (gmtime_r(&t, &tm) != NULL)
			strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	} else if (json_is_string(v))
		snprintf(buf, len, "%s", run_safe(json_string_value(v)));
}

/* A scalar as text into buf. */
static void
scalar(json_t *v, char *buf, size_t len)
{
	if (json_is_string(v))
		snprintf(buf, len, "%s", run_safe(json_string_value(v)));
	else if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, len, "%g", json_real_value(v));
	else if (json_is_true(v))
		snprintf(buf, len, "true");
	else if (json_is_false(v))
		snprintf(buf, len, "false");
	else
		snprintf(buf, len, "-");
}

/* "key: value" per member; an object member as "key: k=v k=v", an array
 * of scalars joined by spaces. */
static void
print_fields(json_t *o, const char *indent)
{
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v) {
		char b[1024];

		printf("%s%s:", indent, run_safe(key));
		if (json_is_object(v)) {
			const char *k2;
			json_t *v2;

			json_object_foreach(v, k2, v2) {
				if (json_is_object(v2) || json_is_array(v2))
					continue;
				scalar(v2, b, sizeof(b));
				printf(" %s=%s", run_safe(k2), b);
			}
		} else if (json_is_array(v)) {
			size_t i;
			json_t *e;

			json_array_foreach(v, i, e) {
				if (json_is_object(e) || json_is_array(e))
					continue;
				scalar(e, b, sizeof(b));
				printf(" %s", b);
			}
		} else {
			if ((strcmp(key, "created") == 0 || strcmp(key,
			    "last_used") == 0 || strcmp(key, "started") == 0 ||
			    strcmp(key, "ended") == 0) && json_is_integer(v))
				ms_time(v, b, sizeof(b));
			else
				scalar(v, b, sizeof(b));
			printf(" %s", b);
		}
		putchar('\n');
	}
}

/* argv of a command as one line, cut */
static void
argv_line(json_t *a, char *buf, size_t len)
{
	size_t i, o = 0;
	json_t *w;

	buf[0] = '\0';
	json_array_foreach(a, i, w) {
		if (o + 2 >= len)
			break;
		o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? " " : "",
		    run_safe(json_string_value(w)));
	}
	if (o >= len)
		buf[len - 1] = '\0';
}

/* ---- base64 (the bytes of output in text mode) ---- */

static int
b64v(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Write all of p; -1 when fd takes no more (a closed pipe: the rest
 * is dropped). */
static int
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Decode s (padded base64) and write it to fd; -1 if s is not base64. */
static int
b64_write(int fd, const char *s, size_t n)
{
	unsigned char out[3 * 1024];
	size_t o = 0, i;
	unsigned acc = 0;
	int bits = 0, v;

	for (i = 0; i < n; i++) {
		if (s[i] == '=')
			break;
		if ((v = b64v((unsigned char)s[i])) < 0)
			return -1;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
		if (o == sizeof(out)) {
			if (write_all(fd, (const char *)out, o) != 0)
				return 0;       /* a closed pipe: drop */
			o = 0;
		}
	}
	(void)write_all(fd, (const char *)out, o);
	return 0;
}

/* ---- signals: an interrupted exec cancels its command ---- */

static const int caught[] = { SIGINT, SIGTERM, SIGHUP };

/* The first signal is noted (and wakes the waits through sig_pipe);
 * the next one has its default action: a second Ctrl-C ends sluice-run
 * at once, whatever it waits for. */
static void
on_signal(int sig)
{
	struct sigaction sa;
	int e = errno;
	size_t i;

	got_signal = sig;
	if (sig_pipe[1] >= 0)
		(void)!write(sig_pipe[1], "", 1);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(caught) / sizeof(caught[0]); i++)
		sigaction(caught[i], &sa, NULL);
	errno = e;
}

static void
catch_signals(void)
{
	static struct ctlh_intr intr;
	struct sigaction sa;
	size_t i;

	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		run_die(EX_FAIL, "pipe: %s", strerror(errno));
	/* a call under way when the signal comes gets GRACE_MS: the
	 * answer's head and start event, to cancel by its id */
	intr.fd = sig_pipe[0];
	intr.grace_ms = GRACE_MS;
	T.intr = &intr;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;      /* no SA_RESTART: poll returns */
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(caught) / sizeof(caught[0]); i++)
		sigaction(caught[i], &sa, NULL);
}

/* Interrupted before anything could be cancelled: end as the signal
 * would have. */
static void
die_of_signal(const char *why)
    __attribute__((noreturn));

static void
die_of_signal(const char *why)
{
	int sig = got_signal;

	fprintf(stderr, PROG ": interrupted %s; a command the daemon "
	    "started runs to its deadline (" PROG " cancel)\n", why);
	fflush(NULL);
	signal(sig, SIG_DFL);
	raise(sig);
	exit(128 + sig);
}

/* ---- create, list, get, tier, destroy ---- */

static int
cmd_create(char **args)
{
	json_t *b, *out = NULL;
	int ex;

	need_id("create");
	no_args(args, "create");
	b = json_pack("{s:s}", "id", o_id);
	if (o_tenant)
		json_object_set_new(b, "tenant", json_string(o_tenant));
	if (o_user)
		json_object_set_new(b, "user", json_string(o_user));
	if (o_tier)
		json_object_set_new(b, "network", json_pack("{s:s}", "tier",
		    o_tier));
	if (o_profile)
		json_object_set_new(b, "profile", json_string(o_profile));
	if (o_backend)
		json_object_set_new(b, "backend", json_string(o_backend));
	if (o_timeout >= 0)
		json_object_set_new(o_limits, "timeout_s", json_integer(
		    o_timeout));
	if (o_cap >= 0)
		json_object_set_new(o_limits, "output_cap", json_integer(o_cap));
	if (json_object_size(o_limits) > 0)
		json_object_set(b, "limits", o_limits);
	ex = call_print("POST", "/v1/sandboxes", b, &out);
	json_decref(b);
	if (ex == EX_OK && !opt_json)
		printf("%s: %s on %s, profile %s, tier %s\n", run_safe(o_id),
		    jstr(out, "state"), jstr(out, "backend"), jstr(out,
		    "profile"), jstr(json_object_get(out, "network"), "tier"));
	json_decref(out);
	return ex;
}

static int
cmd_list(char **args)
{
	char path[512] = "/v1/sandboxes";
	json_t *out = NULL, *e;
	size_t i;
	int ex;

	no_args(args, "list");
	if (o_tenant || o_user) {
		strcat(path, "?");
		if (o_tenant) {
			strcat(path, "tenant=");
			pct(path, sizeof(path), o_tenant, 0);
		}
		if (o_user) {
			strcat(path, o_tenant ? "&user=" : "user=");
			pct(path, sizeof(path), o_user, 0);
		}
	}
	if (!get_text(path, &out, &ex))
		return ex;
	printf("%-24s %-12s %-12s %-9s %-7s %-10s %-10s %s\n", "ID", "TENANT",
	    "USER", "STATE", "BACKEND", "PROFILE", "TIER", "LAST_USED");
	json_array_foreach(json_object_get(out, "sandboxes"), i, e) {
		char when[32];

		ms_time(json_object_get(e, "last_used"), when, sizeof(when));
		printf("%-24s %-12s %-12s %-9s %-7s %-10s %-10s %s\n",
		    run_safe(jstr(e, "id")), run_safe(jstr(e, "tenant")),
		    run_safe(jstr(e, "user")), jstr(e, "state"),
		    jstr(e, "backend"), run_safe(jstr(e, "profile")),
		    jstr(json_object_get(e, "network"), "tier"), when);
	}
	json_decref(out);
	return EX_OK;
}

static int
cmd_get(char **args)
{
	char path[512];
	json_t *out = NULL;
	int ex;

	need_id("get");
	no_args(args, "get");
	box_path(path, sizeof(path), "");
	if ((ex = call_print("GET", path, NULL, &out)) == EX_OK && !opt_json)
		print_fields(out, "");
	json_decref(out);
	return ex;
}

static int
cmd_tier(char **args)
{
	char path[512];
	const char *tier = o_tier;
	json_t *b, *out = NULL;
	int ex;

	need_id("tier");
	if (args[0] != NULL)
		tier = one_arg(args, "tier --chat ID off|registries|public");
	if (tier == NULL)
		run_die(EX_USAGE, "usage: " PROG " tier --chat ID "
		    "off|registries|public");
	box_path(path, sizeof(path), "");
	b = json_pack("{s:{s:s}}", "network", "tier", tier);
	ex = call_print("PATCH", path, b, &out);
	json_decref(b);
	if (ex == EX_OK && !opt_json)
		printf("%s: tier %s\n", run_safe(o_id),
		    jstr(json_object_get(out, "network"), "tier"));
	json_decref(out);
	return ex;
}

static int
cmd_destroy(char **args)
{
	char path[512];
	json_t *out = NULL;
	int ex;

	need_id("destroy");
	no_args(args, "destroy");
	box_path(path, sizeof(path), o_discard ? "?archive=discard" : "");
	/* --discard of an id whose sandbox is gone (removed by age): only
	 * its archive was there to drop ("deleted": false) */
	if ((ex = call_print("DELETE", path, NULL, &out)) == EX_OK && !opt_json)
		printf("%s: %s\n", run_safe(o_id),
		    json_is_false(json_object_get(out, "deleted")) ?
		    "archive discarded (no sandbox)" :
		    "destroyed");
	json_decref(out);
	return ex;
}

/* ---- exec, install: the result streamed ---- */

struct run {
	json_t *result;         /* the exit event's data */
	char *text[2];          /* --json: the output, joined */
	size_t len[2], cap[2];
	int b64;                /* text mode: the data is base64 */
	int bad;
	struct ctlh_sse sse;
	char cmd[128];          /* the start event's command id */
	int cancelled;          /* its stop was asked for */
	time_t sig_at;          /* when the signal was seen, or 0 */
	time_t until;           /* the result is awaited until then */
};

static void
on_event(void *arg, const char *type, const char *data, size_t len,
    const char *id)
{
	struct run *u = arg;
	json_t *o = json_loadb(data, len, JSON_ALLOW_NUL, NULL), *d;
	int i;

	(void)id;
	if (o == NULL) {
		u->bad = 1;
		return;
	}
	i = strcmp(type, "stdout") == 0 ? 0 : strcmp(type, "stderr") == 0 ?
	    1 : -1;
	if (i >= 0) {
		d = json_object_get(o, "data");
		if (!json_is_string(d))
			u->bad = 1;
		else if (opt_json) {
			size_t n = json_string_length(d);

			while (u->len[i] + n + 1 > u->cap[i]) {
				size_t c = u->cap[i] ? u->cap[i] * 2 : 65536;
				char *nb = realloc(u->text[i], c);

				if (nb == NULL)
					run_die(EX_FAIL, "out of memory");
				u->text[i] = nb;
				u->cap[i] = c;
			}
			memcpy(u->text[i] + u->len[i], json_string_value(d), n);
			u->len[i] += n;
		} else if (!u->b64)
			write_all(i + 1, json_string_value(d),
			    json_string_length(d));
		else if (b64_write(i + 1, json_string_value(d),
		    json_string_length(d)) != 0)
			u->bad = 1;
	} else if (strcmp(type, "exit") == 0) {
		json_decref(u->result);
		u->result = json_incref(o);
	} else if (strcmp(type, "start") == 0) {
		const char *cid = json_string_value(json_object_get(o, "id"));

		if (cid != NULL && strlen(cid) < sizeof(u->cmd))
			snprintf(u->cmd, sizeof(u->cmd), "%s", cid);
	}
	json_decref(o);
}

/*
 * Ask the daemon to stop command cid (POST .../commands/CID/stop: for
 * the foreground command it is a cancel): by its id, not the sandbox's
 * foreground command, which is another client's once ours has ended.
 * Within CANCEL_MS, and not interrupted: the signal that asked for it
 * has been seen.
 */
static void
cancel_cmd(const char *cid)
{
	struct ctlh_target t = T;
	struct ctlh_req q = { .method = "POST" };
	struct ctlh_resp r;
	char path[700], tail[400] = "/commands/", err[512];
	enum ctlh_rc rc;

	pct(tail, sizeof(tail), cid, 0);
	strcat(tail, "/stop");
	box_path(path, sizeof(path), tail);
	q.path = path;
	t.intr = NULL;
	t.timeout_ms = CANCEL_MS;
	rc = ctlh_send(&t, &q, &r, err, sizeof(err));
	if (rc != CTLH_OK) {
		fprintf(stderr, PROG ": cancelling %s: %s\n", run_safe(cid),
		    run_safe(err));
		return;
	}
	/* a 404: it has ended (and gone) meanwhile */
	if ((r.status < 200 || r.status > 299) && r.status != 404)
		fprintf(stderr, PROG ": cancelling %s: HTTP %d %s\n",
		    run_safe(cid), r.status, run_safe(r.reason));
	ctlh_resp_free(&r);
}

/* The exit status of a command's result, with what text mode says. */
static int
result_exit(json_t *r)
{
	json_t *code = json_object_get(r, "exit_code");
	const char *f[2] = { "stdout", "stderr" };
	int i;

	if (!opt_json) {
		for (i = 0; i < 2; i++) {
			char k[32];

			snprintf(k, sizeof(k), "%s_truncated", f[i]);
			if (json_is_true(json_object_get(r, k)))
				fprintf(stderr, PROG ": %s cut at the output "
				    "cap\n", f[i]);
		}
		if (json_is_true(json_object_get(r, "oom_killed")))
			fprintf(stderr, PROG ": the command was killed: out "
			    "of memory\n");
		if (json_is_true(json_object_get(r, "timed_out")))
			fprintf(stderr, PROG ": the command timed out\n");
		else if (json_is_true(json_object_get(r, "cancelled")))
			fprintf(stderr, PROG ": the command was cancelled\n");
	}
	if (json_is_true(json_object_get(r, "timed_out")))
		return EX_TIMEOUT;
	if (!json_is_integer(code))
		return EX_EXECFAIL;
	return (int)(json_integer_value(code) & 0xff);
}

/* What pump() does with a stream. */
struct pump {
	/* each piece of the body: 0, or -1 to stop (message in err) */
	int (*data)(void *arg, const char *buf, size_t n, char *err,
	    size_t errlen);
	/* before each read (NULL: none): 0, or -1 to stop */
	int (*tick)(void *arg, char *err, size_t errlen);
	void *arg;
	int idle_ms;            /* a longer wait is an error; 0: tick's */
	int wake_fd;            /* woken by it too (sig_pipe), or -1 */
};

/* Read st to its end: 0, or -1 with a message in err. */
static int
pump(struct ctlh_stream *st, const struct pump *pp, char *err,
    size_t errlen)
{
	char buf[65536];

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = ctlh_stream_fd(st), .events = POLLIN },
			{ .fd = pp->wake_fd, .events = POLLIN },
		};
		long n;
		int r;

		if (pp->tick != NULL && pp->tick(pp->arg, err, errlen) != 0)
			return -1;
		n = ctlh_stream_read(st, buf, sizeof(buf), err, errlen);
		if (n > 0) {
			if (pp->data(pp->arg, buf, (size_t)n, err, errlen) != 0)
				return -1;
			continue;
		}
		if (n == 0)
			return 0;
		if (n == -1)
			return -1;
		/* CTLH_AGAIN: wait; tick, when there is one, bounds it all */
		r = poll(p, pp->wake_fd >= 0 ? 2 : 1, pp->idle_ms > 0 ?
		    pp->idle_ms : 1000);
		if (r == 0 && pp->idle_ms > 0) {
			snprintf(err, errlen, "reading the stream: timed out");
			return -1;
		}
		if (r < 0 && errno != EINTR) {
			snprintf(err, errlen, "poll: %s", strerror(errno));
			return -1;
		}
	}
}

static int
run_data(void *arg, const char *buf, size_t n, char *err, size_t errlen)
{
	struct run *u = arg;

	return ctlh_sse_feed(&u->sse, buf, n, on_event, u, err, errlen);
}

/* A signal: stop our command once its id is known; the result is then
 * awaited CANCEL_WAIT_S more; without an id in GRACE_MS, give up. */
static int
run_tick(void *arg, char *err, size_t errlen)
{
	struct run *u = arg;
	time_t now = time(NULL);
	char c;

	if (got_signal && u->sig_at == 0) {
		u->sig_at = now;
		while (read(sig_pipe[0], &c, 1) > 0)
			;       /* non-blocking: what woke the poll */
	}
	if (got_signal && !u->cancelled && u->cmd[0] != '\0') {
		u->cancelled = 1;
		cancel_cmd(u->cmd);
		if (u->until > time(NULL) + CANCEL_WAIT_S)
			u->until = time(NULL) + CANCEL_WAIT_S;
	}
	if (got_signal && !u->cancelled && now - u->sig_at >
	    (GRACE_MS + 999) / 1000)
		die_of_signal("before the command's start event");
	if (time(NULL) > u->until) {
		snprintf(err, errlen, "no answer in time");
		return -1;
	}
	return 0;
}

/*
 * POST body to the sandbox's tail (/exec, /install) asking for events;
 * stdout and stderr written as they come (text; as bytes when b64: exec
 * takes "encoding", install does not) or joined into the result
 * (--json); the command's exit status.  A signal to sluice-run
 * cancels the command (the daemon kills its tree) and the result is
 * still awaited, as the local mode does.
 */
static int
run_streamed(const char *tail, json_t *body, int b64)
{
	struct ctlh_req q = { .method = "POST", .accept = "text/event-stream" };
	struct ctlh_stream *st = NULL;
	struct ctlh_resp r;
	struct run u = { 0 };
	struct pump pp = { .data = run_data, .tick = run_tick, .arg = &u };
	char path[512], err[512] = "", *b;
	enum ctlh_rc rc;
	int ex;

	box_path(path, sizeof(path), tail);
	u.b64 = b64 && !opt_json;
	if (u.b64)
		json_object_set_new(body, "encoding", json_string("base64"));
	if ((b = json_dumps(body, JSON_COMPACT)) == NULL)
		run_die(EX_FAIL, "out of memory");
	q.path = path;
	q.body = b;
	q.body_len = strlen(b);
	catch_signals();
	pp.wake_fd = sig_pipe[0];
	rc = ctlh_stream_send(&T, &q, &st, &r, err, sizeof(err));
	free(b);
	if (rc != CTLH_OK && got_signal)
		die_of_signal("before the daemon answered");
	if (rc != CTLH_OK)
		unreachable(rc, err);
	if (st == NULL) {
		ex = r.status >= 200 && r.status <= 299 ? EX_EXECFAIL :
		    api_error(&r);
		if (ex == EX_EXECFAIL)
			fprintf(stderr, PROG ": HTTP %d without events\n",
			    r.status);
		ctlh_resp_free(&r);
		return ex;
	}
	ctlh_sse_init(&u.sse);
	/* the daemon holds the deadline (at most 28 minutes); this bounds
	 * a daemon that stops talking */
	u.until = time(NULL) + (o_timeout > 0 ? o_timeout : 1680) + 300;
	(void)pump(st, &pp, err, sizeof(err));
	ctlh_sse_free(&u.sse);
	ctlh_stream_close(st);
	if (u.result == NULL || u.bad) {
		fprintf(stderr, PROG ": the command's result was lost%s%s\n",
		    err[0] ? ": " : "", err[0] ? run_safe(err) : "");
		json_decref(u.result);
		free(u.text[0]);
		free(u.text[1]);
		return EX_EXECFAIL;
	}
	if (opt_json) {
		/* the API's result, its output joined from the events */
		json_object_set_new(u.result, "stdout", json_stringn_nocheck(
		    u.text[0] ? u.text[0] : "", u.len[0]));
		json_object_set_new(u.result, "stderr", json_stringn_nocheck(
		    u.text[1] ? u.text[1] : "", u.len[1]));
		json_out(u.result);
	}
	free(u.text[0]);
	free(u.text[1]);
	ex = result_exit(u.result);
	json_decref(u.result);
	return ex;
}

/* Read all of stdin (at most max bytes) into a malloc'd buffer. */
static char *
slurp(size_t max, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap), *nb;
	ssize_t r;

	if (b == NULL)
		run_die(EX_FAIL, "out of memory");
	for (;;) {
		if (n == cap) {
			if (cap >= max)
				run_die(EX_TOOLARGE,
				    "standard input: more than %zu "
				    "bytes", max);
			if ((nb = realloc(b, cap * 2)) == NULL)
				run_die(EX_FAIL, "out of memory");
			b = nb;
			cap *= 2;
		}
		r = read(0, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			run_die(EX_FAIL, "standard input: %s", strerror(errno));
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return b;
}

/* The command body of exec and start: argv (after --) or --shell. */
static json_t *
cmd_body(char **argv, const char *verb)
{
	json_t *b = json_object(), *a;
	size_t i;

	if ((o_shell != NULL) == (argv[0] != NULL))
		run_die(EX_USAGE, "%s: a command after -- or --shell SCRIPT",
		    verb);
	if (o_shell != NULL)
		json_object_set_new(b, "shell", json_string(o_shell));
	else {
		a = json_array();
		for (i = 0; argv[i] != NULL; i++) {
			json_t *w = json_string(argv[i]);

			if (w == NULL)
				run_die(EX_USAGE,
				    "%s: the API takes UTF-8 words",
				    verb);
			json_array_append_new(a, w);
		}
		json_object_set_new(b, "cmd", a);
	}
	if (json_object_size(o_env) > 0)
		json_object_set(b, "env", o_env);
	if (o_cwd)
		json_object_set_new(b, "cwd", json_string(o_cwd));
	if (o_timeout >= 0)
		json_object_set_new(b, "timeout_s", json_integer(o_timeout));
	if (o_cap >= 0)
		json_object_set_new(b, "output_cap", json_integer(o_cap));
	if (o_stdin) {
		size_t n;
		char *in = slurp(STDIN_MAX, &n);
		json_t *s = json_stringn(in, n);

		free(in);
		if (s == NULL)
			run_die(EX_USAGE,
			    "--stdin: the API takes text (UTF-8); "
			    "write a binary file with write");
		json_object_set_new(b, "stdin", s);
	}
	return b;
}

static int
cmd_exec(char **argv)
{
	json_t *b;
	int ex;

	need_id("exec");
	b = cmd_body(argv, "exec");
	ex = run_streamed("/exec", b, 1);
	json_decref(b);
	return ex;
}

static int
cmd_install(char **args)
{
	json_t *b, *p = json_array();
	size_t i;
	int ex;

	need_id("install");
	if (o_manager == NULL || args[0] == NULL)
		run_die(EX_USAGE, "usage: " PROG " install --chat ID --manager "
		    "pip|npm PACKAGE...");
	for (i = 0; args[i] != NULL; i++)
		json_array_append_new(p, json_string(args[i]));
	b = json_pack("{s:s,s:o}", "manager", o_manager, "packages", p);
	if (o_timeout >= 0)
		json_object_set_new(b, "timeout_s", json_integer(o_timeout));
	ex = run_streamed("/install", b, 0);
	json_decref(b);
	return ex;
}

/* ---- background commands ---- */

static int
cmd_start(char **argv)
{
	char path[512];
	json_t *b, *out = NULL;
	int ex;

	need_id("start");
	b = cmd_body(argv, "start");
	box_path(path, sizeof(path), "/commands");
	ex = call_print("POST", path, b, &out);
	json_decref(b);
	if (ex == EX_OK && !opt_json)
		printf("%s\n", run_safe(jstr(out, "id")));
	json_decref(out);
	return ex;
}

static void
cmd_line(json_t *c)
{
	char started[32], a[256], code[16];

	ms_time(json_object_get(c, "started"), started, sizeof(started));
	argv_line(json_object_get(c, "argv"), a, sizeof(a));
	scalar(json_object_get(c, "exit_code"), code, sizeof(code));
	printf("%-8s %-8s %-4s %-4s %-20s %s\n", run_safe(jstr(c, "id")),
	    jstr(c, "status"), code, json_is_true(json_object_get(c,
	    "background")) ? "bg" : "fg", started, a);
}

static int
cmd_commands(char **args)
{
	char path[512], tail[300] = "/commands";
	json_t *out = NULL, *c;
	size_t i;
	int ex;

	need_id("commands");
	if (args[0] != NULL) {
		strcat(tail, "/");
		pct(tail, sizeof(tail), one_arg(args, "commands --chat ID "
		    "[CID]"), 0);
	}
	box_path(path, sizeof(path), tail);
	if (!get_text(path, &out, &ex))
		return ex;
	printf("%-8s %-8s %-4s %-4s %-20s %s\n", "ID", "STATUS", "EXIT",
	    "KIND", "STARTED", "ARGV");
	if (args[0] != NULL)
		cmd_line(out);
	else
		json_array_foreach(json_object_get(out, "commands"), i, c)
			cmd_line(c);
	json_decref(out);
	return EX_OK;
}

/*
 * A background command's output from --offset (default 0): text mode
 * writes its stdout and stderr bytes; --follow asks again from where
 * the last answer ended until the command has exited.
 */
static int
cmd_output(char **args)
{
	const char *cid = one_arg(args, "output --chat ID [--offset N] "
	    "[--follow] CID");
	unsigned long long off[2];
	char path[700], tail[400];
	json_t *out = NULL;
	int ex, i, rounds;

	need_id("output");
	off[0] = off[1] = o_offset > 0 ? (unsigned long long)o_offset : 0;
	/* --follow: one round a fifth of a second; a day at most */
	for (rounds = 0; rounds < 5 * 86400; rounds++) {
		int running;

		snprintf(tail, sizeof(tail), "/commands/");
		pct(tail, sizeof(tail), cid, 0);
		snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail),
		    "/output?stdout_offset=%llu&stderr_offset=%llu%s", off[0],
		    off[1], opt_json ? "" : "&encoding=base64");
		box_path(path, sizeof(path), tail);
		if ((ex = call_print("GET", path, NULL, &out)) != EX_OK)
			return ex;
		for (i = 0; i < 2 && !opt_json; i++) {
			json_t *s = json_object_get(out, i ? "stderr" :
			    "stdout"), *d = json_object_get(s, "data");

			if (json_is_string(d) && b64_write(i + 1,
			    json_string_value(d), json_string_length(d)) != 0)
				run_die(EX_FAIL, "output: not base64");
		}
		for (i = 0; i < 2; i++) {
			json_t *n = json_object_get(json_object_get(out, i ?
			    "stderr" : "stdout"), "next");

			if (json_is_integer(n))
				off[i] = (unsigned long long)json_integer_value(n);
		}
		running = strcmp(jstr(out, "status"), "running") == 0;
		json_decref(out);
		out = NULL;
		if (!o_follow || !running)
			break;
		usleep(200000);
	}
	return EX_OK;
}

static int
cmd_stop(char **args)
{
	const char *cid = one_arg(args, "stop --chat ID CID");
	char path[700], tail[300] = "/commands/";
	json_t *out = NULL;
	int ex;

	need_id("stop");
	pct(tail, sizeof(tail), cid, 0);
	strcat(tail, "/stop");
	box_path(path, sizeof(path), tail);
	if ((ex = call_print("POST", path, NULL, &out)) == EX_OK && !opt_json)
		printf("%s: stopped\n", run_safe(cid));
	json_decref(out);
	return ex;
}

static int
cmd_cancel(char **args)
{
	char path[512];
	json_t *b, *out = NULL;
	int ex;

	need_id("cancel");
	no_args(args, "cancel");
	box_path(path, sizeof(path), "/cancel");
	b = json_pack("{s:b}", "all", o_all);
	ex = call_print("POST", path, b, &out);
	json_decref(b);
	if (ex == EX_OK && !opt_json)
		printf("cancelled %lld\n", (long long)json_integer_value(
		    json_object_get(out, "cancelled")));
	json_decref(out);
	return ex;
}

/* ---- files ---- */

static void
file_path(char *buf, size_t len, const char *p)
{
	char tail[3 * SBX_PATH_MAX + 16] = "/files/";

	if (p[0] == '\0')
		run_die(EX_USAGE, "an empty path");
	pct(tail, sizeof(tail), p, 1);
	box_path(buf, len, tail);
}

static int
stdout_data(void *arg, const char *buf, size_t n, char *err, size_t errlen)
{
	(void)arg;
	(void)err;
	(void)errlen;
	(void)write_all(1, buf, n);     /* a closed stdout: read on, drop */
	return 0;
}

/* Stream a GET of path to stdout; *ex the exit status (EX_OK when the
 * bytes came); the error's JSON (a 413's limit) in *errj. */
static int
get_to_stdout(const char *path, const char *range, json_t **errj)
{
	const char *hdr[2] = { range, NULL };
	struct ctlh_req q = { .method = "GET", .path = path,
	    .accept = "application/octet-stream", .headers = range ? hdr :
	    NULL };
	struct ctlh_stream *st = NULL;
	struct ctlh_resp r;
	struct pump pp = { .data = stdout_data, .idle_ms = CALL_MS,
	    .wake_fd = -1 };
	char err[512] = "";
	enum ctlh_rc rc;
	int ex = EX_OK;

	*errj = NULL;
	rc = ctlh_stream_send(&T, &q, &st, &r, err, sizeof(err));
	if (rc != CTLH_OK)
		unreachable(rc, err);
	if (st == NULL) {
		if (r.status == 413 && r.body_len > 0) {
			/* the caller may ask again for a range */
			*errj = json_loadb(r.body, r.body_len,
			    JSON_ALLOW_NUL, NULL);
			ctlh_resp_free(&r);
			return EX_TOOLARGE;
		}
		ex = r.status >= 200 && r.status <= 299 ? EX_OK : api_error(&r);
		if (ex == EX_OK)
			write_all(1, r.body, r.body_len);
		ctlh_resp_free(&r);
		return ex;
	}
	if (pump(st, &pp, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": %s\n", run_safe(err));
		ex = EX_EXECD;
	}
	ctlh_stream_close(st);
	return ex;
}

static int
cmd_read(char **args)
{
	const char *p = one_arg(args, "read --chat ID PATH");
	char path[4 * SBX_PATH_MAX], range[64];
	json_t *e = NULL, *lim;
	long long max;
	int ex;

	need_id("read");
	file_path(path, sizeof(path), p);
	if ((ex = get_to_stdout(path, NULL, &e)) != EX_TOOLARGE || e == NULL)
		return ex;
	/* larger than max_file_bytes: that many bytes, and exit 8, as
	 * the local mode does */
	lim = json_object_get(json_object_get(e, "error"), "limit");
	if (!json_is_integer(lim) || json_integer_value(lim) <= 0) {
		struct ctlh_resp r = { .status = 413 };

		r.body = json_dumps(e, 0);
		r.body_len = r.body ? strlen(r.body) : 0;
		ex = api_error(&r);
		free(r.body);
		json_decref(e);
		return ex;
	}
	max = (long long)json_integer_value(lim);
	json_decref(e);
	snprintf(range, sizeof(range), "Range: bytes=0-%lld", max - 1);
	if ((ex = get_to_stdout(path, range, &e)) != EX_OK) {
		json_decref(e);
		return ex;
	}
	fprintf(stderr, PROG ": %s: more than %lld bytes, cut there\n",
	    run_safe(p), max);
	return EX_CUT;
}

static int
cmd_write(char **args)
{
	const char *p = one_arg(args, "write --chat ID PATH < DATA");
	struct ctlh_req q = { .method = "PUT",
	    .type = "application/octet-stream" };
	struct ctlh_resp r;
	char path[4 * SBX_PATH_MAX], err[512], *data;
	size_t n;
	enum ctlh_rc rc;
	int ex = EX_OK;

	need_id("write");
	file_path(path, sizeof(path), p);
	data = slurp(WRITE_MAX, &n);
	q.path = path;
	q.body = data;
	q.body_len = n;
	rc = ctlh_send(&T, &q, &r, err, sizeof(err));
	free(data);
	if (rc != CTLH_OK)
		unreachable(rc, err);
	if (r.status < 200 || r.status > 299)
		ex = api_error(&r);
	else if (opt_json)
		printf("%.*s\n", (int)r.body_len, r.body);
	ctlh_resp_free(&r);
	return ex;
}

static int
cmd_rm(char **args)
{
	const char *p = one_arg(args, "rm --chat ID PATH");
	char path[4 * SBX_PATH_MAX];
	json_t *out = NULL;
	int ex;

	need_id("rm");
	file_path(path, sizeof(path), p);
	ex = call_print("DELETE", path, NULL, &out);
	json_decref(out);
	return ex;
}

/* "-rw-r--r--" from the entry's type and octal mode */
static void
mode_str(const char *type, const char *mode, char out[11])
{
	static const struct {
		const char *t;
		char c;
	} ty[] = { { "file", '-' }, { "dir", 'd' }, { "symlink", 'l' },
	    { "fifo", 'p' }, { "socket", 's' }, { "char", 'c' },
	    { "block", 'b' } };
	unsigned long m = mode ? strtoul(mode, NULL, 8) : 0;
	const char *rwx = "rwxrwxrwx";
	size_t i;

	out[0] = '?';
	for (i = 0; i < sizeof(ty) / sizeof(ty[0]); i++)
		if (type && strcmp(type, ty[i].t) == 0)
			out[0] = ty[i].c;
	for (i = 0; i < 9; i++)
		out[1 + i] = (m >> (8 - i)) & 1 ? rwx[i] : '-';
	if (m & 04000)
		out[3] = out[3] == 'x' ? 's' : 'S';
	if (m & 02000)
		out[6] = out[6] == 'x' ? 's' : 'S';
	if (m & 01000)
		out[9] = out[9] == 'x' ? 't' : 'T';
	out[10] = '\0';
}

static int
cmd_ls(char **args)
{
	char path[4 * SBX_PATH_MAX], q[3 * SBX_PATH_MAX + 600] = "/files";
	const char *sep = "?";
	json_t *out = NULL, *e;
	size_t i;
	int ex;

	need_id("ls");
	if (args[0] != NULL && args[1] != NULL)
		run_die(EX_USAGE, "usage: " PROG " ls --chat ID [--glob PAT] "
		    "[--recursive] [DIR]");
	if (args[0] != NULL) {
		strcat(q, "?path=");
		pct(q, sizeof(q), args[0], 0);
		sep = "&";
	}
	if (o_glob != NULL) {
		strcat(q, sep);
		strcat(q, "glob=");
		pct(q, sizeof(q), o_glob, 0);
		sep = "&";
	}
	if (o_recursive) {
		strcat(q, sep);
		strcat(q, "recursive=1");
	}
	box_path(path, sizeof(path), q);
	if (!get_text(path, &out, &ex))
		return ex;
	json_array_foreach(json_object_get(out, "entries"), i, e) {
		char m[11], when[32];
		json_t *t = json_object_get(e, "target");

		mode_str(json_string_value(json_object_get(e, "type")),
		    json_string_value(json_object_get(e, "mode")), m);
		ms_time(json_object_get(e, "mtime"), when, sizeof(when));
		printf("%s %10lld %s %s%s%s\n", m, (long long)
		    json_integer_value(json_object_get(e, "size")), when,
		    run_safe(jstr(e, "path")), json_is_string(t) ? " -> " : "",
		    json_is_string(t) ? run_safe(json_string_value(t)) : "");
	}
	if (json_is_true(json_object_get(out, "truncated")))
		fprintf(stderr, PROG ": ls: the listing was cut\n");
	json_decref(out);
	return EX_OK;
}

static int
cmd_edit(char **args)
{
	const char *p = one_arg(args, "edit --chat ID --old TEXT --new TEXT "
	    "PATH");
	char path[512];
	json_t *b, *out = NULL;
	int ex;

	need_id("edit");
	if (o_old == NULL || o_new == NULL)
		run_die(EX_USAGE, "edit: --old TEXT and --new TEXT");
	b = json_pack("{s:s,s:s,s:s}", "path", p, "old", o_old, "new", o_new);
	if (b == NULL)
		run_die(EX_USAGE, "edit: the API takes UTF-8 text");
	box_path(path, sizeof(path), "/edit");
	ex = call_print("POST", path, b, &out);
	json_decref(b);
	json_decref(out);
	return ex;
}

/* ---- health ---- */

static int
cmd_health(char **args, int doctor)
{
	json_t *out = NULL, *e, *br;
	size_t i;
	int ex;

	no_args(args, doctor ? "doctor" : "health");
	if ((ex = call_print("GET", "/v1/health", NULL, &out)) != EX_OK) {
		json_decref(out);
		return ex;
	}
	if (!opt_json) {
		printf("sluice-execd %s: %s\n", run_safe(jstr(out, "version")),
		    json_is_true(json_object_get(out, "ok")) ? "ok" :
		    "NOT ok");
		json_array_foreach(json_object_get(out, "backends"), i, e) {
			const char *why = json_string_value(json_object_get(e,
			    "reason"));
			const char *note = json_string_value(json_object_get(
			    e, "note"));

			printf("backend %s%s: %s%s%s%s%s\n", run_safe(jstr(e,
			    "name")), strcmp(jstr(e, "name"), jstr(out,
			    "default_backend")) ? "" : " (default)",
			    json_is_true(json_object_get(e, "ok")) ? "ok" :
			    "not usable", why ? ": " : "",
			    why ? run_safe(why) : "",
			    note ? "; " : "", note ? run_safe(note) : "");
		}
		br = json_object_get(out, "broker");
		printf("broker %s: %s%s%s\n", run_safe(jstr(br, "socket")),
		    json_is_true(json_object_get(br, "ok")) ? "ok" :
		    "unreachable", json_string_value(json_object_get(br,
		    "reason")) ? ": " : "", json_string_value(json_object_get(
		    br, "reason")) ? run_safe(jstr(br, "reason")) : "");
		printf("profiles:");
		json_array_foreach(json_object_get(out, "profiles"), i, e)
			printf(" %s", run_safe(json_string_value(e)));
		printf(" (default %s)\n", run_safe(jstr(out,
		    "default_profile")));
		e = json_object_get(json_object_get(out, "capacity"),
		    "sandboxes");
		printf("sandboxes: %lld in use, limit %lld\n",
		    (long long)json_integer_value(json_object_get(e, "in_use")),
		    (long long)json_integer_value(json_object_get(e, "limit")));
	}
	/* doctor: whether this host can make sandboxes now */
	if (doctor && !json_is_true(json_object_get(out, "ok")))
		ex = EX_FAIL;
	json_decref(out);
	return ex;
}

/* ---- the command line ---- */

static void
usage(FILE *f)
{
	fprintf(f,
"usage: " PROG " [--json] [--socket PATH] VERB [options]   (sluice-execd's API)\n"
"       " PROG " [--config FILE] image build|list|rm ...   (root: the image store)\n"
"verbs over the API (--chat ID or --id ID names the sandbox):\n"
"  create --chat ID [--tenant T] [--user U] [--tier TIER] [--profile P]\n"
"         [--backend ns|gvisor] [--limit KEY=N]... [--timeout S]\n"
"         [--output-cap BYTES]\n"
"  list [--tenant T] [--user U]      get --chat ID (also: status)\n"
"  exec --chat ID [--timeout S] [--output-cap N] [--cwd DIR] [--env K=V]...\n"
"       [--stdin] (-- CMD [ARG]... | --shell SCRIPT)\n"
"                            output as it comes; exit: the command's status\n"
"  start --chat ID [same options] (-- CMD... | --shell S)   prints its id\n"
"  commands --chat ID [CID]   output --chat ID [--offset N] [--follow] CID\n"
"  stop --chat ID CID         cancel --chat ID [--all]\n"
"  read --chat ID PATH        write --chat ID PATH < DATA   rm --chat ID PATH\n"
"  ls --chat ID [--glob PAT] [--recursive] [DIR]\n"
"  edit --chat ID --old TEXT --new TEXT PATH\n"
"  install --chat ID --manager pip|npm PACKAGE...\n"
"  tier --chat ID off|registries|public\n"
"  destroy --chat ID [--discard]     health     doctor\n"
"socket: --socket, else $SLUICE_EXEC_SOCKET, else " DEF_SOCKET ".\n"
"exit: 0 ok, 1 failure, 2 usage/bad_request, 3 not_found, 4 quota_exceeded,\n"
"      5 broker_unavailable, 6 exists, 7 backend_unavailable, 8 read cut,\n"
"      9 image or profile refused, 10 busy, 11 conflict,\n"
"      12 network_not_permitted, 13 forbidden/unauthorized, 14 too_large,\n"
"      15 sluice-execd unreachable; exec: the command's status, 124 timed\n"
"      out, 125 its result lost.  See sluice-run(1).\n");
}

static long
num_arg(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi)
		run_die(EX_USAGE, "%s: expected %ld to %ld", opt, lo, hi);
	return v;
}

/* NAME=VALUE into o (a string value, or with num a number) */
static void
kv_arg(json_t *o, const char *opt, const char *s, int num)
{
	const char *eq = strchr(s, '=');
	char name[128];

	if (eq == NULL || eq == s || (size_t)(eq - s) >= sizeof(name))
		run_die(EX_USAGE, "%s: expected NAME=VALUE", opt);
	memcpy(name, s, (size_t)(eq - s));
	name[eq - s] = '\0';
	if (num)
		json_object_set_new(o, name, json_integer(num_arg(opt, eq + 1, 0,
		    LONG_MAX / 2)));
	else if (json_object_set_new(o, name, json_string(eq + 1)) != 0)
		run_die(EX_USAGE, "%s: UTF-8 text", opt);
}

/* The verb's command, with its arguments (the options are parsed). */
static int
run_verb(const char *verb, char **args)
{
	if (strcmp(verb, "create") == 0)
		return cmd_create(args);
	if (strcmp(verb, "list") == 0)
		return cmd_list(args);
	if (strcmp(verb, "get") == 0 || strcmp(verb, "status") == 0)
		return cmd_get(args);
	if (strcmp(verb, "exec") == 0)
		return cmd_exec(args);
	if (strcmp(verb, "start") == 0)
		return cmd_start(args);
	if (strcmp(verb, "commands") == 0)
		return cmd_commands(args);
	if (strcmp(verb, "output") == 0)
		return cmd_output(args);
	if (strcmp(verb, "stop") == 0)
		return cmd_stop(args);
	if (strcmp(verb, "cancel") == 0)
		return cmd_cancel(args);
	if (strcmp(verb, "read") == 0)
		return cmd_read(args);
	if (strcmp(verb, "write") == 0)
		return cmd_write(args);
	if (strcmp(verb, "rm") == 0)
		return cmd_rm(args);
	if (strcmp(verb, "ls") == 0)
		return cmd_ls(args);
	if (strcmp(verb, "edit") == 0)
		return cmd_edit(args);
	if (strcmp(verb, "install") == 0)
		return cmd_install(args);
	if (strcmp(verb, "tier") == 0)
		return cmd_tier(args);
	if (strcmp(verb, "destroy") == 0)
		return cmd_destroy(args);
	if (strcmp(verb, "health") == 0)
		return cmd_health(args, 0);
	if (strcmp(verb, "doctor") == 0)
		return cmd_health(args, 1);
	if (strcmp(verb, "gc") == 0)
		run_die(EX_USAGE,
		    "gc is the local mode's: sluice-execd suspends "
		    "and removes its idle sandboxes itself (lifecycle)");
	run_die(EX_USAGE, "unknown command %s (try --help)", run_safe(verb));
}

int
run_api_main(int argc, char **argv)
{
	enum { O_JSON = 256, O_SOCKET, O_CHAT, O_TENANT, O_USER, O_TIER,
	    O_PROFILE, O_BACKEND, O_LIMIT, O_TIMEOUT, O_CAP, O_ENV, O_CWD,
	    O_SHELL, O_STDIN, O_ALL, O_DISCARD, O_GLOB, O_RECURSIVE,
	    O_OFFSET, O_FOLLOW, O_MANAGER, O_OLD, O_NEW, O_LOCALONLY, O_HELP };
	static const struct option lo[] = {
		{ "json", no_argument, NULL, O_JSON },
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "chat", required_argument, NULL, O_CHAT },
		{ "id", required_argument, NULL, O_CHAT },
		{ "tenant", required_argument, NULL, O_TENANT },
		{ "user", required_argument, NULL, O_USER },
		{ "tier", required_argument, NULL, O_TIER },
		{ "profile", required_argument, NULL, O_PROFILE },
		{ "backend", required_argument, NULL, O_BACKEND },
		{ "limit", required_argument, NULL, O_LIMIT },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "output-cap", required_argument, NULL, O_CAP },
		{ "env", required_argument, NULL, O_ENV },
		{ "cwd", required_argument, NULL, O_CWD },
		{ "shell", required_argument, NULL, O_SHELL },
		{ "stdin", no_argument, NULL, O_STDIN },
		{ "all", no_argument, NULL, O_ALL },
		{ "discard", no_argument, NULL, O_DISCARD },
		{ "glob", required_argument, NULL, O_GLOB },
		{ "recursive", no_argument, NULL, O_RECURSIVE },
		{ "offset", required_argument, NULL, O_OFFSET },
		{ "follow", no_argument, NULL, O_FOLLOW },
		{ "manager", required_argument, NULL, O_MANAGER },
		{ "old", required_argument, NULL, O_OLD },
		{ "new", required_argument, NULL, O_NEW },
		/* the local mode's: named, to say so */
		{ "state-dir", required_argument, NULL, O_LOCALONLY },
		{ "control", required_argument, NULL, O_LOCALONLY },
		{ "config", required_argument, NULL, O_LOCALONLY },
		{ "workspace", required_argument, NULL, O_LOCALONLY },
		{ "idle-after", required_argument, NULL, O_LOCALONLY },
		{ "remove-after", required_argument, NULL, O_LOCALONLY },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *verb = NULL, *sock = getenv("SLUICE_EXEC_SOCKET");
	char **args;
	int c, pass, idx;

	signal(SIGPIPE, SIG_IGN);
	o_env = json_object();
	o_limits = json_object();
	if (sock == NULL || sock[0] == '\0')
		sock = DEF_SOCKET;
	/* "+": stop at the verb, then at "--" after its options */
	for (pass = 0; pass < 2; pass++) {
		while ((c = getopt_long(argc, argv, "+h", lo, &idx)) != -1) {
			switch (c) {
			case O_JSON: opt_json = 1; break;
			case O_SOCKET: sock = optarg; break;
			case O_CHAT: o_id = optarg; break;
			case O_TENANT: o_tenant = optarg; break;
			case O_USER: o_user = optarg; break;
			case O_TIER: o_tier = optarg; break;
			case O_PROFILE: o_profile = optarg; break;
			case O_BACKEND: o_backend = optarg; break;
			case O_LIMIT: kv_arg(o_limits, "--limit", optarg, 1);
				break;
			case O_TIMEOUT:
				o_timeout = num_arg("--timeout", optarg, 1,
				    LONG_MAX / 2);
				break;
			case O_CAP:
				o_cap = num_arg("--output-cap", optarg, 0,
				    LONG_MAX / 2);
				break;
			case O_ENV: kv_arg(o_env, "--env", optarg, 0); break;
			case O_CWD: o_cwd = optarg; break;
			case O_SHELL: o_shell = optarg; break;
			case O_STDIN: o_stdin = 1; break;
			case O_ALL: o_all = 1; break;
			case O_DISCARD: o_discard = 1; break;
			case O_GLOB: o_glob = optarg; break;
			case O_RECURSIVE: o_recursive = 1; break;
			case O_OFFSET:
				o_offset = num_arg("--offset", optarg, 0,
				    LONG_MAX / 2);
				break;
			case O_FOLLOW: o_follow = 1; break;
			case O_MANAGER: o_manager = optarg; break;
			case O_OLD: o_old = optarg; break;
			case O_NEW: o_new = optarg; break;
			case O_LOCALONLY:
				run_die(EX_USAGE,
				    "--%s is an option of the local "
				    "mode, which drives the backends without "
				    "sluice-execd (the build tree's "
				    "sluice-run-local, for their tests)",
				    lo[idx].name);
			case 'h': case O_HELP: usage(stdout); return EX_OK;
			default: usage(stderr); return EX_USAGE;
			}
		}
		if (pass == 0) {
			if (optind >= argc) {
				usage(stderr);
				return EX_USAGE;
			}
			verb = argv[optind++];
		}
	}
	args = argv + optind;
	T.socket = sock;
	T.timeout_ms = CALL_MS;
	if (o_timeout > 0)
		T.timeout_ms = (int)((o_timeout > 1680 ? 1680 : o_timeout) *
		    1000 + CALL_MS);
	return run_verb(verb, args);
}
