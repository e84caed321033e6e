/*
 * sluicectl: one command line for sluiced's control API and its
 * connection log, for admins at a terminal and for scripts.
 *
 * Options before the command are global; options after it belong to the
 * command, global ones still allowed there.  The one name both use is
 * --socket: after "session create" it is the new session's socket, so the
 * control socket must then be given before the command (or by
 * $SLUICE_CONTROL_SOCKET).
 *
 * Exit codes are part of the interface (sluicectl(1)): 0 ok, 1 the API
 * refused (4xx) or the log failed verification, 2 usage, 3 sluiced not
 * reachable, 4 server error (5xx or an unreadable answer).
 */
#ifdef HAVE_CONFIG_H
#include "sluice-config.h"
#endif

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "proxy/lib/clog.h"
#include "proxy/sluicectl/console.h"
#include "proxy/sluicectl/ctl_http.h"
#include "proxy/sluicectl/ctl_log.h"
#include "policy/policy.h"
#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/util.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0"
#endif

#define EX_OK 0
#define EX_REFUSED 1
#define EX_USAGE 2
#define EX_UNREACHABLE 3
#define EX_SERVER 4

#define DEFAULT_SOCKET "/run/sluice/control.sock"
#define DEFAULT_LOG "/var/log/sluice/connections.jsonl"
#define DEFAULT_EXEC_SOCKET "/run/sluice-execd/exec.sock"
#define TIMEOUT_MS 30000
#define TOKEN_MAX 4096

enum opt_id {
	/* global */
	O_SOCKET = 1, O_URL, O_TOKEN_FILE, O_CACERT, O_CERT, O_KEY, O_JSON,
	O_LOG, O_HELP, O_VERSION,
	/* per command; a bit each in opts.seen */
	O_FILE, O_TENANT, O_USER, O_TIER, O_VSOCK_CID, O_SOURCE,
	O_CLOSE_EXCEEDING, O_FOLLOW, O_LINES, O_SESSION, O_HOST, O_DECISION,
	O_REASON, O_EVENT, O_SINCE, O_UNTIL, O_PREV, O_SESSION_SOCKET,
	O_YES_ALL, O_DENY_ALL, O_ANCHOR, O_PORT, O_EXEC_SOCKET, O_RULE,
	O_CREDENTIAL,
};
/* more than 32 options: the masks are 64 bits */
#define BIT(o) ((uint64_t)1 << (o))
#define GLOBAL_BITS (BIT(O_SOCKET) | BIT(O_URL) | BIT(O_TOKEN_FILE) | \
	BIT(O_CACERT) | BIT(O_CERT) | BIT(O_KEY) | BIT(O_JSON) | BIT(O_LOG) | \
	BIT(O_HELP) | BIT(O_VERSION))

static const struct option long_opts[] = {
	{ "socket", required_argument, NULL, O_SOCKET },
	{ "url", required_argument, NULL, O_URL },
	{ "token-file", required_argument, NULL, O_TOKEN_FILE },
	{ "cacert", required_argument, NULL, O_CACERT },
	{ "cert", required_argument, NULL, O_CERT },
	{ "key", required_argument, NULL, O_KEY },
	{ "json", no_argument, NULL, O_JSON },
	{ "log", required_argument, NULL, O_LOG },
	{ "help", no_argument, NULL, O_HELP },
	{ "version", no_argument, NULL, O_VERSION },
	{ "file", required_argument, NULL, O_FILE },
	{ "tenant", required_argument, NULL, O_TENANT },
	{ "user", required_argument, NULL, O_USER },
	{ "tier", required_argument, NULL, O_TIER },
	{ "vsock-cid", required_argument, NULL, O_VSOCK_CID },
	{ "source", required_argument, NULL, O_SOURCE },
	{ "close-exceeding", no_argument, NULL, O_CLOSE_EXCEEDING },
	{ "follow", no_argument, NULL, O_FOLLOW },
	{ "lines", required_argument, NULL, O_LINES },
	{ "session", required_argument, NULL, O_SESSION },
	{ "host", required_argument, NULL, O_HOST },
	{ "decision", required_argument, NULL, O_DECISION },
	{ "reason", required_argument, NULL, O_REASON },
	{ "event", required_argument, NULL, O_EVENT },
	{ "rule", required_argument, NULL, O_RULE },
	{ "credential", required_argument, NULL, O_CREDENTIAL },
	{ "since", required_argument, NULL, O_SINCE },
	{ "until", required_argument, NULL, O_UNTIL },
	{ "prev", required_argument, NULL, O_PREV },
	{ "anchor", required_argument, NULL, O_ANCHOR },
	{ "yes-all", no_argument, NULL, O_YES_ALL },
	{ "deny-all", no_argument, NULL, O_DENY_ALL },
	{ "port", required_argument, NULL, O_PORT },
	{ "exec-socket", required_argument, NULL, O_EXEC_SOCKET },
	{ NULL, 0, NULL, 0 },
};

struct opts {
	const char *socket, *url, *token_file, *cacert, *cert, *key, *log;
	int json;
	uint64_t seen;
	const char *tenant, *user, *tier, *vsock_cid, *source, *sess_socket;
	int close_exceeding, follow;
	long lines;
	struct ctlog_filter filter;
	const char *prev;
	struct clog_anchor anchors[16];     /* log verify --anchor SEQ:HASH */
	size_t nanchors;
	char *token;            /* read from --token-file or $SLUICE_TOKEN */
	long port;              /* console --port */
	const char *exec_socket;
};

static volatile sig_atomic_t stop_flag;

static void
on_stop(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void verrx_msg(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));

/* "sluicectl: " and the message, a line on stderr. */
static void
verrx_msg(const char *fmt, va_list ap)
{
	fputs("sluicectl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static void errx_msg(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void
errx_msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verrx_msg(fmt, ap);
	va_end(ap);
}

static void
usage(FILE *f)
{
	fputs(
"usage: sluicectl [global options] command [arguments]\n"
"\n"
"  health\n"
"  ceiling [get]\n"
"  ceiling set TIER [--tenant T] [--close-exceeding]\n"
"  ceiling clear --tenant T\n"
"  session list\n"
"  session show ID\n"
"  session create ID --tenant T --user U --tier TIER\n"
"                 [--socket PATH | --vsock-cid N | --source ADDR]\n"
"  session set-tier ID TIER\n"
"  session delete ID\n"
"  grant add|remove ID HOST:PORT\n"
"  grant list ID\n"
"  rule list\n"
"  rule show NAME\n"
"  rule add RULE        (a JSON object, or - for standard input)\n"
"  rule replace RULES   ({\"rules\": [...]} or [...], or -)\n"
"  rule delete NAME\n"
"  prompts list\n"
"  prompts answer ID allow_once|allow_chat|deny\n"
"  prompts watch [--yes-all | --deny-all]\n"
"  log tail [-f] [-n N] [--file PATH]\n"
"  log query [--session S] [--tenant T] [--host H] [--decision D]\n"
"            [--reason R] [--event E] [--rule NAME] [--credential NAME]\n"
"            [--since TS] [--until TS] [--file PATH]\n"
"  log verify [--file PATH] [--prev HASH] [--anchor SEQ:HASH]...\n"
"             [--key FILE]   (the log's MAC key, log.mac_key_file)\n"
"  console [--port P] [--exec-socket PATH]\n"
"\n"
"global options:\n"
"  --socket PATH      control socket (default $SLUICE_CONTROL_SOCKET or\n"
"                     " DEFAULT_SOCKET ")\n"
"  --url https://H:P  the TLS listener instead, with --token-file F (or\n"
"                     $SLUICE_TOKEN), --cacert F, --cert F --key F\n"
"  --json             machine output (JSON; JSON Lines for log commands)\n"
"  --log PATH         connection log (default " DEFAULT_LOG ")\n"
"  -h, --help         this text\n"
"  --version          print the version\n"
"\n"
"exit: 0 ok, 1 refused (4xx) or verification failed, 2 usage,\n"
"      3 sluiced unreachable, 4 server error\n", f);
}

static int
usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verrx_msg(fmt, ap);
	va_end(ap);
	fputs("(sluicectl --help for usage)\n", stderr);
	return EX_USAGE;
}

/* ---- validation ---- */

/* Ids go into URL paths: the API's own rule (pol_id_valid),
 * [A-Za-z0-9._-]{1,64} not starting with a dot. */
static int
id_valid(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= 64 && s[0] != '.' &&
	    strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static int
check_id(const char *what, const char *s)
{
	if (!id_valid(s))
		return usage_error("bad %s %s: 1 to 64 of A-Z a-z 0-9 . _ -, "
		    "not starting with a dot", what, s);
	return EX_OK;
}

static int
check_tier(const char *s)
{
	enum pol_tier t;

	if (pol_tier_parse(s, &t) != 0)
		return usage_error("bad tier %s: off, registries or public", s);
	return EX_OK;
}

static int
printable(const char *s)
{
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 0;
	return 1;
}

/* HOST:PORT, HOST may be [v6].  host gets the bare name. */
static int
parse_hostport(const char *s, char *host, size_t hostlen, long *port)
{
	const char *c = strrchr(s, ':');
	size_t n;
	char *end;

	if (c == NULL || c == s || c[1] == '\0')
		return -1;
	errno = 0;
	*port = strtol(c + 1, &end, 10);
	if (*end != '\0' || errno != 0 || *port < 1 || *port > 65535 ||
	    c[1] < '0' || c[1] > '9')
		return -1;
	n = (size_t)(c - s);
	if (s[0] == '[') {
		if (n < 3 || s[n - 1] != ']')
			return -1;
		s++;
		n -= 2;
	}
	if (n == 0 || n >= hostlen)
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	if (strpbrk(host, " \t/?#@[]") != NULL || !printable(host))
		return -1;
	return 0;
}

/* Percent-encode all but unreserved characters (RFC 3986). */
static void
pct_encode(const char *in, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	unsigned char c;

	for (; *in && o + 4 < outlen; in++) {
		c = (unsigned char)*in;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~') {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
}

/* ---- tables ---- */

struct table {
	size_t ncols, nrows, cap;
	char **cells;           /* nrows * ncols */
};

static size_t
text_width(const char *s)
{
	size_t w = 0;

	/* count code points, not bytes: continuation bytes add nothing */
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

static void
table_add(struct table *t, const char *const *row)
{
	char **nc;
	size_t i;

	if (t->nrows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		nc = realloc(t->cells, cap * t->ncols * sizeof(*nc));
		if (nc == NULL) {
			errx_msg("out of memory");
			exit(EX_SERVER);
		}
		t->cells = nc;
		t->cap = cap;
	}
	for (i = 0; i < t->ncols; i++) {
		char buf[600];
		const char *v = row[i] ? row[i] : "-";
		/* what the server sends reaches a terminal: keep it inert */
		clog_sanitize(v, strlen(v), buf, sizeof(buf), 512);
		t->cells[t->nrows * t->ncols + i] = strdup(buf);
		if (t->cells[t->nrows * t->ncols + i] == NULL) {
			errx_msg("out of memory");
			exit(EX_SERVER);
		}
	}
	t->nrows++;
}

static void
table_print(struct table *t, FILE *out)
{
	size_t w[16] = { 0 }, r, c, n;

	for (r = 0; r < t->nrows; r++)
		for (c = 0; c < t->ncols && c < 16; c++) {
			n = text_width(t->cells[r * t->ncols + c]);
			if (n > w[c])
				w[c] = n;
		}
	for (r = 0; r < t->nrows; r++) {
		for (c = 0; c < t->ncols; c++) {
			const char *v = t->cells[r * t->ncols + c];
			fputs(v, out);
			if (c + 1 < t->ncols && c < 16)
				fprintf(out, "%*s", (int)(w[c] - text_width(v) +
				    2), "");
		}
		fputc('\n', out);
	}
	for (r = 0; r < t->nrows * t->ncols; r++)
		free(t->cells[r]);
	free(t->cells);
	t->cells = NULL;
	t->nrows = t->cap = 0;
}

/* A JSON scalar as text; "-" for null or absent. */
static const char *
scalar(const json_t *v, char *buf, size_t buflen)
{
	if (v == NULL || json_is_null(v))
		return "-";
	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_integer(v)) {
		snprintf(buf, buflen, "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
		return buf;
	}
	if (json_is_real(v)) {
		snprintf(buf, buflen, "%g", json_real_value(v));
		return buf;
	}
	if (json_is_true(v))
		return "yes";
	if (json_is_false(v))
		return "no";
	return NULL;
}

/* Add key/value rows for v, nested objects as a.b, arrays of scalars
 * joined, other arrays as a[i]. */
static void
flatten(struct table *t, const char *prefix, const json_t *v)
{
	char buf[64], key[256], *joined;
	const char *s, *k;
	const json_t *x;
	size_t i, len;
	int all_scalar = 1;

	if ((s = scalar(v, buf, sizeof(buf))) != NULL) {
		const char *row[2] = { prefix, s };
		table_add(t, row);
		return;
	}
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x) {
			snprintf(key, sizeof(key), "%s%s%s", prefix,
			    *prefix ? "." : "", k);
			flatten(t, key, x);
		}
		return;
	}
	json_array_foreach(v, i, x)
		if (scalar(x, buf, sizeof(buf)) == NULL)
			all_scalar = 0;
	if (all_scalar) {
		len = 1;
		json_array_foreach(v, i, x)
			len += strlen(scalar(x, buf, sizeof(buf))) + 2;
		joined = calloc(1, len);
		if (joined == NULL)
			return;
		json_array_foreach(v, i, x) {
			if (i > 0)
				strcat(joined, ", ");
			strcat(joined, scalar(x, buf, sizeof(buf)));
		}
		{
			const char *row[2] = { prefix, i ? joined : "-" };
			table_add(t, row);
		}
		free(joined);
		return;
	}
	json_array_foreach(v, i, x) {
		snprintf(key, sizeof(key), "%s[%zu]", prefix, i);
		flatten(t, key, x);
	}
}

/* ---- API calls ---- */

struct reply {
	struct ctlh_resp resp;
	json_t *doc;            /* parsed body of a 2xx */
};

static void
reply_free(struct reply *r)
{
	ctlh_resp_free(&r->resp);
	json_decref(r->doc);
	r->doc = NULL;
}

/* "STATUS code: message" from an error answer, sanitised. */
static void
api_error_text(const struct ctlh_resp *r, char *out, size_t outlen)
{
	json_t *doc, *e;
	const char *code = NULL, *msg = NULL;
	char c[128], m[600];

	doc = jsonstrict_load(r->body, r->body_len, NULL);
	e = json_object_get(doc, "error");
	if (json_is_object(e)) {
		code = json_string_value(json_object_get(e, "code"));
		msg = json_string_value(json_object_get(e, "message"));
	}
	if (code != NULL && msg != NULL) {
		clog_sanitize(code, strlen(code), c, sizeof(c), 100);
		clog_sanitize(msg, strlen(msg), m, sizeof(m), 500);
		snprintf(out, outlen, "%d %s: %s", r->status, c, m);
	} else if (code != NULL || msg != NULL) {
		const char *one = code ? code : msg;
		clog_sanitize(one, strlen(one), m, sizeof(m), 500);
		snprintf(out, outlen, "%d %s", r->status, m);
	} else {
		snprintf(out, outlen, "%d %s", r->status, r->reason[0] ?
		    r->reason : "error");
	}
	json_decref(doc);
}

static void
print_api_error(const struct ctlh_resp *r)
{
	char m[800];

	api_error_text(r, m, sizeof(m));
	errx_msg("%s", m);
}

/* Call the API; body is stolen.  EX_OK with rp->doc set on 2xx. */
/* The exit status, and the message, of a call that got no HTTP answer
 * (rc, from ctlh_request or ctlh_stream_open, is not CTLH_OK). */
static int
transport_exit(enum ctlh_rc rc, const char *err)
{
	switch (rc) {
	case CTLH_USAGE:
		errx_msg("%s", err);
		return EX_USAGE;
	case CTLH_UNREACHABLE:
		errx_msg("cannot reach sluiced: %s", err);
		return EX_UNREACHABLE;
	default:
		errx_msg("bad answer from sluiced: %s", err);
		return EX_SERVER;
	}
}

static int
api(const struct opts *o, const char *method, const char *path,
    json_t *body, struct reply *rp)
{
	struct ctlh_target t = {
		.socket = o->socket, .url = o->url, .token = o->token,
		.cacert = o->cacert, .cert = o->cert, .key = o->key,
		.timeout_ms = TIMEOUT_MS,
	};
	char err[512], *text = NULL;
	json_error_t je;
	enum ctlh_rc rc;

	memset(rp, 0, sizeof(*rp));
	if (body != NULL) {
		text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		if (text == NULL) {
			errx_msg("out of memory");
			return EX_SERVER;
		}
	}
	rc = ctlh_request(&t, method, path, text, &rp->resp, err, sizeof(err));
	free(text);
	if (rc != CTLH_OK)
		return transport_exit(rc, err);
	if (rp->resp.status >= 400) {
		print_api_error(&rp->resp);
		return rp->resp.status < 500 ? EX_REFUSED : EX_SERVER;
	}
	if (rp->resp.status >= 300) {
		errx_msg("unexpected %d %s", rp->resp.status, rp->resp.reason);
		return EX_SERVER;
	}
	rp->doc = jsonstrict_load(rp->resp.body, rp->resp.body_len, &je);
	if (!json_is_object(rp->doc)) {
		errx_msg("bad answer from sluiced: %s", rp->doc ?
		    "not a JSON object" : je.text);
		return EX_SERVER;
	}
	return EX_OK;
}

/* --json: the API's body as is, one line. */
static void
print_raw(const struct reply *rp)
{
	size_t n = 0;
	char *safe = clog_json_escape(rp->resp.body ? rp->resp.body : "",
	    rp->resp.body_len, &n);

	/* the same JSON, with nothing a terminal would act on left raw */
	if (safe == NULL) {
		errx_msg("out of memory");
		exit(EX_SERVER);
	}
	fwrite(safe, 1, n, stdout);
	if (n == 0 || safe[n - 1] != '\n')
		fputc('\n', stdout);
	free(safe);
}

/* ---- health ---- */

static int
cmd_health(const struct opts *o, int argc, char **argv)
{
	struct table t = { .ncols = 2 };
	struct reply rp;
	int rc;

	if (argc != 0)
		return usage_error("health takes no arguments");
	rc = api(o, "GET", "/v1/health", NULL, &rp);
	if (rc == EX_OK) {
		if (o->json)
			print_raw(&rp);
		else {
			flatten(&t, "", rp.doc);
			table_print(&t, stdout);
		}
	}
	reply_free(&rp);
	return rc;
}

/* ---- ceiling ---- */

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Call the API and show the answer: as it came with --json, else as a
 * table drawn by show. */
static int
api_show(const struct opts *o, const char *method, const char *path,
    json_t *body, void (*show)(const json_t *))
{
	struct reply rp;
	int rc = api(o, method, path, body, &rp);

	if (rc == EX_OK) {
		if (o->json)
			print_raw(&rp);
		else
			show(rp.doc);
	}
	reply_free(&rp);
	return rc;
}

static void
print_ceiling(const json_t *doc)
{
	struct table t = { .ncols = 2 };
	const json_t *tenants = json_object_get(doc, "tenants"), *v;
	const char *row[2], *k, **keys = NULL;
	char buf[64], scope[200];
	size_t n = 0, i;

	row[0] = "SCOPE";
	row[1] = "CEILING";
	table_add(&t, row);
	row[0] = "global";
	row[1] = scalar(json_object_get(doc, "tier"), buf, sizeof(buf));
	table_add(&t, row);
	if (json_is_object(tenants) && json_object_size(tenants) > 0) {
		keys = calloc(json_object_size(tenants), sizeof(*keys));
		if (keys != NULL) {
			json_object_foreach((json_t *)tenants, k, v)
				keys[n++] = k;
			qsort(keys, n, sizeof(*keys), cmp_str);
		}
		for (i = 0; i < n; i++) {
			snprintf(scope, sizeof(scope), "tenant %s", keys[i]);
			row[0] = scope;
			row[1] = scalar(json_object_get(tenants, keys[i]), buf,
			    sizeof(buf));
			table_add(&t, row);
		}
		free(keys);
	}
	table_print(&t, stdout);
}

static int
ceiling_put(const struct opts *o, json_t *body)
{
	struct reply rp;
	const json_t *closed;
	/* api() takes the body: read what we need from it first */
	int asked = json_is_true(json_object_get(body, "close_exceeding"));
	int rc;

	rc = api(o, "PUT", "/v1/ceiling", body, &rp);
	if (rc == EX_OK) {
		if (o->json)
			print_raw(&rp);
		else {
			print_ceiling(rp.doc);
			closed = json_object_get(rp.doc, "closed");
			/* nothing is closed unless asked: say so only then */
			if (json_is_integer(closed) && asked)
				printf("closed %" JSON_INTEGER_FORMAT
				    " connection(s) above the new ceiling\n",
				    json_integer_value(closed));
		}
	}
	reply_free(&rp);
	return rc;
}

static int
cmd_ceiling(const struct opts *o, int argc, char **argv)
{
	const char *sub = argc > 0 ? argv[0] : "get";
	uint64_t allowed = 0;
	json_t *body;
	int rc;

	if (strcmp(sub, "set") == 0)
		allowed = BIT(O_TENANT) | BIT(O_CLOSE_EXCEEDING);
	else if (strcmp(sub, "clear") == 0)
		allowed = BIT(O_TENANT);
	else if (strcmp(sub, "get") != 0)
		return usage_error("ceiling: unknown subcommand %s", sub);
	if (o->seen & ~allowed)
		return usage_error("ceiling %s: option not accepted here", sub);

	if (strcmp(sub, "get") == 0) {
		if (argc > 1)
			return usage_error("ceiling get takes no arguments");
		return api_show(o, "GET", "/v1/ceiling", NULL, print_ceiling);
	}
	if (strcmp(sub, "clear") == 0) {
		if (argc != 1 || o->tenant == NULL)
			return usage_error("usage: ceiling clear --tenant T");
		body = json_pack("{s:{s:n}}", "tenants", o->tenant);
		return ceiling_put(o, body);
	}
	if (argc != 2)
		return usage_error("usage: ceiling set TIER [--tenant T] "
		    "[--close-exceeding]");
	if ((rc = check_tier(argv[1])) != EX_OK)
		return rc;
	if (o->tenant != NULL)
		body = json_pack("{s:{s:s}}", "tenants", o->tenant, argv[1]);
	else
		body = json_pack("{s:s}", "tier", argv[1]);
	if (body != NULL && o->close_exceeding)
		json_object_set_new(body, "close_exceeding", json_true());
	return ceiling_put(o, body);
}

/* ---- sessions ---- */

static const char *
endpoint(const json_t *s, char *buf, size_t buflen)
{
	const json_t *v;

	if ((v = json_object_get(s, "socket")) && json_is_string(v))
		return json_string_value(v);
	if ((v = json_object_get(s, "source")) && json_is_string(v))
		return json_string_value(v);
	if ((v = json_object_get(s, "vsock_cid")) && json_is_integer(v)) {
		snprintf(buf, buflen, "cid %" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
		return buf;
	}
	return "-";
}

static void
print_sessions(const json_t *doc)
{
	struct table t = { .ncols = 10 };
	static const char *const head[10] = { "ID", "TENANT", "USER", "TIER",
	    "EFFECTIVE", "TRANSPORT", "ENDPOINT", "CONNS", "GRANTS",
	    "ORIGIN" };
	static const char *const keys[6] = { "id", "tenant", "user", "tier",
	    "effective_tier", "transport" };
	const json_t *s, *list = json_object_get(doc, "sessions");
	char b[8][64], ng[32];
	const char *row[10];
	size_t i, k;

	table_add(&t, head);
	json_array_foreach(list, i, s) {
		for (k = 0; k < 6; k++)
			row[k] = scalar(json_object_get(s, keys[k]), b[k], 64);
		row[6] = endpoint(s, b[6], 64);
		row[7] = scalar(json_object_get(s, "connections"), b[7], 64);
		snprintf(ng, sizeof(ng), "%zu",
		    json_array_size(json_object_get(s, "grants")));
		row[8] = ng;
		row[9] = json_is_true(json_object_get(s, "from_config")) ?
		    "config" : "api";
		table_add(&t, row);
	}
	table_print(&t, stdout);
}

static char *
grants_text(const json_t *grants)
{
	const json_t *g;
	size_t i, len = 1, o = 0;
	char *out;

	json_array_foreach(grants, i, g)
		len += strlen(json_string_value(json_object_get(g, "host")) ?
		    json_string_value(json_object_get(g, "host")) : "?") + 12;
	out = malloc(len);
	if (out == NULL)
		return NULL;
	out[0] = '\0';
	json_array_foreach(grants, i, g) {
		const char *h = json_string_value(json_object_get(g, "host"));
		int ipv6 = h != NULL && strchr(h, ':') != NULL;
		o += (size_t)snprintf(out + o, len - o, "%s%s%s%s:%"
		    JSON_INTEGER_FORMAT, i ? " " : "", ipv6 ? "[" : "",
		    h ? h : "?", ipv6 ? "]" : "",
		    json_integer_value(json_object_get(g, "port")));
	}
	return out;
}

static void
print_session(const json_t *s)
{
	static const char *const order[] = { "id", "tenant", "user", "tier",
	    "ceiling", "effective_tier", "transport", "socket", "source",
	    "vsock_cid", "from_config", "connections", NULL };
	struct table t = { .ncols = 2 };
	const char *row[2], *k;
	const json_t *v;
	char buf[64], *g;
	size_t i;
	int known;

	for (i = 0; order[i] != NULL; i++) {
		row[0] = order[i];
		row[1] = scalar(json_object_get(s, order[i]), buf, sizeof(buf));
		table_add(&t, row);
	}
	flatten(&t, "counters", json_object_get(s, "counters") ?
	    json_object_get(s, "counters") : json_null());
	g = grants_text(json_object_get(s, "grants"));
	row[0] = "grants";
	row[1] = g && *g ? g : "-";
	table_add(&t, row);
	free(g);
	/* fields a newer sluiced adds are shown too */
	json_object_foreach((json_t *)s, k, v) {
		known = strcmp(k, "counters") == 0 || strcmp(k, "grants") == 0;
		for (i = 0; order[i] != NULL && !known; i++)
			known = strcmp(k, order[i]) == 0;
		if (!known)
			flatten(&t, k, v);
	}
	table_print(&t, stdout);
}

static int
session_call(const struct opts *o, const char *method, const char *path,
    json_t *body)
{
	return api_show(o, method, path, body, print_session);
}

static int
session_create(const struct opts *o, const char *id)
{
	json_t *body;
	long long cid;
	char *end;
	int n = 0, rc;

	if (o->tenant == NULL || o->user == NULL || o->tier == NULL)
		return usage_error("session create needs --tenant, --user "
		    "and --tier");
	if ((rc = check_tier(o->tier)) != EX_OK)
		return rc;
	if (!printable(o->tenant) || !printable(o->user) || !*o->tenant ||
	    !*o->user)
		return usage_error("bad --tenant or --user");
	n = (o->sess_socket != NULL) + (o->vsock_cid != NULL) +
	    (o->source != NULL);
	if (n > 1)
		return usage_error("give at most one of --socket, --vsock-cid "
		    "and --source");
	body = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "tenant",
	    o->tenant, "user", o->user, "tier", o->tier);
	if (body == NULL)
		return usage_error("bad session fields (not UTF-8?)");
	if (o->sess_socket != NULL)
		json_object_set_new(body, "socket", json_string(o->sess_socket));
	if (o->source != NULL)
		json_object_set_new(body, "source", json_string(o->source));
	if (o->vsock_cid != NULL) {
		errno = 0;
		cid = strtoll(o->vsock_cid, &end, 10);
		if (*end != '\0' || errno != 0 || end == o->vsock_cid ||
		    cid < 0 || cid > 0xffffffffLL) {
			json_decref(body);
			return usage_error("bad --vsock-cid %s", o->vsock_cid);
		}
		json_object_set_new(body, "vsock_cid", json_integer(cid));
	}
	return session_call(o, "POST", "/v1/sessions", body);
}

static int
cmd_session(const struct opts *o, int argc, char **argv)
{
	const char *sub = argc > 0 ? argv[0] : "";
	char path[128];
	struct reply rp;
	uint64_t allowed = 0;
	int rc, want = 2;

	if (strcmp(sub, "create") == 0)
		allowed = BIT(O_TENANT) | BIT(O_USER) | BIT(O_TIER) |
		    BIT(O_VSOCK_CID) | BIT(O_SOURCE) | BIT(O_SESSION_SOCKET);
	if (strcmp(sub, "list") == 0)
		want = 1;
	else if (strcmp(sub, "set-tier") == 0)
		want = 3;
	else if (strcmp(sub, "show") != 0 && strcmp(sub, "create") != 0 &&
	    strcmp(sub, "delete") != 0)
		return usage_error("session: list, show, create, set-tier or "
		    "delete");
	if (o->seen & ~allowed)
		return usage_error("session %s: option not accepted here", sub);
	if (argc != want)
		return usage_error("session %s: wrong number of arguments",
		    sub);
	if (want == 1) {
		return api_show(o, "GET", "/v1/sessions", NULL, print_sessions);
	}
	if ((rc = check_id("session id", argv[1])) != EX_OK)
		return rc;
	snprintf(path, sizeof(path), "/v1/sessions/%s", argv[1]);
	if (strcmp(sub, "show") == 0)
		return session_call(o, "GET", path, NULL);
	if (strcmp(sub, "create") == 0)
		return session_create(o, argv[1]);
	if (strcmp(sub, "set-tier") == 0) {
		if ((rc = check_tier(argv[2])) != EX_OK)
			return rc;
		return session_call(o, "PATCH", path,
		    json_pack("{s:s}", "tier", argv[2]));
	}
	rc = api(o, "DELETE", path, NULL, &rp);
	if (rc == EX_OK) {
		if (o->json)
			print_raw(&rp);
		else
			printf("deleted session %s\n", argv[1]);
	}
	reply_free(&rp);
	return rc;
}

/* ---- grants ---- */

static int
grant_list(const struct opts *o, const char *id)
{
	struct table t = { .ncols = 2 };
	struct reply rp;
	const json_t *grants, *g;
	const char *row[2];
	char path[128], b1[64], b2[64];
	size_t i;
	int rc;

	snprintf(path, sizeof(path), "/v1/sessions/%s", id);
	rc = api(o, "GET", path, NULL, &rp);
	if (rc != EX_OK)
		goto done;
	grants = json_object_get(rp.doc, "grants");
	if (o->json) {
		json_t *out = json_pack("{s:s, s:O}", "session", id, "grants",
		    grants ? (json_t *)grants : json_array());
		char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
		if (text != NULL)
			puts(text);
		free(text);
		json_decref(out);
		goto done;
	}
	row[0] = "HOST";
	row[1] = "PORT";
	table_add(&t, row);
	json_array_foreach(grants, i, g) {
		row[0] = scalar(json_object_get(g, "host"), b1, sizeof(b1));
		row[1] = scalar(json_object_get(g, "port"), b2, sizeof(b2));
		table_add(&t, row);
	}
	table_print(&t, stdout);
done:
	reply_free(&rp);
	return rc;
}

static int
cmd_grant(const struct opts *o, int argc, char **argv)
{
	const char *sub = argc > 0 ? argv[0] : "";
	char host[256], enc[800], path[1024];
	struct reply rp;
	long port;
	int rc, add;

	if (o->seen != 0)
		return usage_error("grant: option not accepted here");
	if (strcmp(sub, "list") == 0) {
		if (argc != 2)
			return usage_error("usage: grant list ID");
		if ((rc = check_id("session id", argv[1])) != EX_OK)
			return rc;
		return grant_list(o, argv[1]);
	}
	add = strcmp(sub, "add") == 0;
	if (!add && strcmp(sub, "remove") != 0)
		return usage_error("grant: add, remove or list");
	if (argc != 3)
		return usage_error("usage: grant %s ID HOST:PORT", sub);
	if ((rc = check_id("session id", argv[1])) != EX_OK)
		return rc;
	if (parse_hostport(argv[2], host, sizeof(host), &port) != 0)
		return usage_error("bad HOST:PORT %s", argv[2]);
	if (add) {
		snprintf(path, sizeof(path), "/v1/sessions/%s/grants", argv[1]);
		rc = api(o, "POST", path, json_pack("{s:s, s:i}", "host", host,
		    "port", (int)port), &rp);
	} else {
		pct_encode(host, enc, sizeof(enc));
		snprintf(path, sizeof(path), "/v1/sessions/%s/grants/%s:%ld",
		    argv[1], enc, port);
		rc = api(o, "DELETE", path, NULL, &rp);
	}
	if (rc == EX_OK) {
		if (o->json)
			print_raw(&rp);
		else
			printf("%s %s for session %s\n", add ? "granted" :
			    "removed", argv[2], argv[1]);
	}
	reply_free(&rp);
	return rc;
}

/* ---- request rules (the control API's; sluiced(8) "Request rules") ---- */

static const char *
strv_text(const json_t *a, char *buf, size_t buflen)
{
	const json_t *x;
	size_t i, at = 0;

	if (!json_is_array(a) || json_array_size(a) == 0)
		return "*";
	buf[0] = '\0';
	json_array_foreach(a, i, x) {
		const char *v = json_string_value(x);
		int n = snprintf(buf + at, buflen - at, "%s%s", i ? "," : "",
		    v ? v : "?");

		if (n < 0 || (size_t)n >= buflen - at)
			break;
		at += (size_t)n;
	}
	return buf;
}

static void
rule_row(struct table *t, const json_t *r, const char *source)
{
	char b[5][512];
	const char *row[7];
	const json_t *tn = json_object_get(r, "tenant");

	row[0] = source;
	row[1] = scalar(json_object_get(r, "name"), b[0], sizeof(b[0]));
	row[2] = json_is_string(tn) ? json_string_value(tn) : "*";
	row[3] = scalar(json_object_get(r, "action"), b[1], sizeof(b[1]));
	row[4] = strv_text(json_object_get(r, "hosts"), b[2], sizeof(b[2]));
	row[5] = strv_text(json_object_get(r, "methods"), b[3], sizeof(b[3]));
	row[6] = strv_text(json_object_get(r, "paths"), b[4], sizeof(b[4]));
	table_add(t, row);
}

/* Every rule in the order requests meet them: the file's, the API's,
 * the built-in ones. */
static void
print_rules(const json_t *doc)
{
	struct table t = { .ncols = 7 };
	static const char *const head[7] = { "SOURCE", "NAME", "TENANT",
	    "ACTION", "HOSTS", "METHODS", "PATHS" };
	const json_t *r;
	size_t i;

	table_add(&t, head);
	json_array_foreach(json_object_get(doc, "config"), i, r)
		rule_row(&t, r, "config");
	json_array_foreach(json_object_get(doc, "rules"), i, r)
		rule_row(&t, r, "api");
	json_array_foreach(json_object_get(doc, "builtin"), i, r) {
		const char *row[7] = { "builtin", json_string_value(r), "*",
		    "deny", "-", "-", "-" };

		if (row[1] != NULL)
			table_add(&t, row);
	}
	table_print(&t, stdout);
}

static void
print_rule(const json_t *doc)
{
	struct table t = { .ncols = 2 };

	flatten(&t, "", doc);
	table_print(&t, stdout);
}

/* A JSON argument, or standard input for "-". */
static json_t *
json_arg(const char *arg)
{
	json_error_t je;
	json_t *j;

	if (strcmp(arg, "-") == 0) {
		char *buf = NULL;
		size_t len = 0, cap = 0, r;

		for (;;) {
			if (len == cap) {
				char *nb;

				if (cap >= (1u << 20)) {
					free(buf);
					errx_msg("standard input: more than 1 MiB");
					return NULL;
				}
				nb = realloc(buf, cap = cap ? cap * 2 : 4096);
				if (nb == NULL) {
					free(buf);
					errx_msg("out of memory");
					return NULL;
				}
				buf = nb;
			}
			if ((r = fread(buf + len, 1, cap - len, stdin)) == 0)
				break;
			len += r;
		}
		j = jsonstrict_load(buf ? buf : "", len, &je);
		free(buf);
	} else
		j = jsonstrict_load(arg, strlen(arg), &je);
	if (j == NULL)
		errx_msg("bad JSON: %s", je.text);
	return j;
}

static int
cmd_rule(const struct opts *o, int argc, char **argv)
{
	const char *sub = argc > 0 ? argv[0] : "list";
	char path[128];
	struct reply rp;
	json_t *body;
	int rc;

	if (o->seen != 0)
		return usage_error("rule: option not accepted here");
	if (strcmp(sub, "list") == 0) {
		if (argc > 1)
			return usage_error("rule list takes no arguments");
		return api_show(o, "GET", "/v1/rules", NULL, print_rules);
	}
	if (strcmp(sub, "show") == 0 || strcmp(sub, "delete") == 0) {
		if (argc != 2)
			return usage_error("usage: rule %s NAME", sub);
		if ((rc = check_id("rule name", argv[1])) != EX_OK)
			return rc;
		snprintf(path, sizeof(path), "/v1/rules/%s", argv[1]);
		if (strcmp(sub, "show") == 0)
			return api_show(o, "GET", path, NULL, print_rule);
		rc = api(o, "DELETE", path, NULL, &rp);
		if (rc == EX_OK) {
			if (o->json)
				print_raw(&rp);
			else
				printf("deleted rule %s\n", argv[1]);
		}
		reply_free(&rp);
		return rc;
	}
	if (strcmp(sub, "add") != 0 && strcmp(sub, "replace") != 0)
		return usage_error("rule: list, show, add, replace or delete");
	if (argc != 2)
		return usage_error("usage: rule %s JSON|-", sub);
	if ((body = json_arg(argv[1])) == NULL)
		return EX_USAGE;
	if (strcmp(sub, "add") == 0) {
		if (!json_is_object(body)) {
			json_decref(body);
			return usage_error("rule add: expected a JSON object");
		}
		return api_show(o, "POST", "/v1/rules", body, print_rule);
	}
	/* a bare array is the list */
	if (json_is_array(body))
		body = json_pack("{s:o}", "rules", body);
	return api_show(o, "PUT", "/v1/rules", body, print_rules);
}

/* ---- prompts ---- */

#define WATCH_RETRIES 5         /* reconnect attempts before giving up */
#define WATCH_BACKOFF0_MS 200   /* first retry delay, doubled each time */
#define WATCH_IDLE_MS 75000     /* silence (no event, no ping) = dropped */
#define WATCH_MSGS 6            /* status lines kept on the TTY screen */

static const char *const decisions[] = { "allow_once", "allow_chat", "deny",
    NULL };

static int
decision_valid(const char *s)
{
	size_t i;

	for (i = 0; decisions[i] != NULL; i++)
		if (strcmp(s, decisions[i]) == 0)
			return 1;
	return 0;
}

/* A string field of a server document, sanitised for a terminal. */
static const char *
field(const json_t *doc, const char *key, char *buf, size_t buflen)
{
	char num[64];
	const char *v = scalar(json_object_get(doc, key), num, sizeof(num));

	if (v == NULL)
		v = "?";
	clog_sanitize(v, strlen(v), buf, buflen, buflen > 8 ? buflen - 8 :
	    buflen);
	return buf;
}

/* host:port with brackets around an IPv6 address. */
static const char *
prompt_target(const json_t *p, char *buf, size_t buflen)
{
	char h[300], port[64];

	field(p, "host", h, sizeof(h));
	field(p, "port", port, sizeof(port));
	snprintf(buf, buflen, strchr(h, ':') ? "[%s]:%s" : "%s:%s", h, port);
	return buf;
}

static void
fmt_left(long s, char *buf, size_t buflen)
{
	if (s < 0)
		s = 0;
	if (s >= 60)
		snprintf(buf, buflen, "%ldm%02lds", s / 60, s % 60);
	else
		snprintf(buf, buflen, "%lds", s);
}

static void
print_prompts(const json_t *doc)
{
	struct table t = { .ncols = 6 };
	static const char *const head[6] = { "ID", "SESSION", "METHOD",
	    "HOST:PORT", "WAITING", "EXPIRES IN" };
	const json_t *p, *list = json_object_get(doc, "prompts");
	char b[4][64], hp[400], left[32];
	const char *row[6];
	size_t i;

	table_add(&t, head);
	json_array_foreach(list, i, p) {
		row[0] = scalar(json_object_get(p, "id"), b[0], 64);
		row[1] = scalar(json_object_get(p, "session"), b[1], 64);
		row[2] = scalar(json_object_get(p, "method"), b[2], 64);
		row[3] = prompt_target(p, hp, sizeof(hp));
		row[4] = scalar(json_object_get(p, "waiting"), b[3], 64);
		fmt_left((long)json_integer_value(json_object_get(p,
		    "expires_in_s")), left, sizeof(left));
		row[5] = left;
		table_add(&t, row);
	}
	table_print(&t, stdout);
}

/* ---- prompts watch ---- */

struct pitem {
	char id[80];
	json_t *doc;            /* the PROMPT */
	int64_t deadline;       /* CLOCK_MONOTONIC ms */
	int64_t retry_at;       /* --yes-all/--deny-all: next try after a
	                         * failed answer */
	int skipped;
};

struct watch {
	const struct opts *o;
	int tty;                /* stdin is a terminal: full screen */
	const char *autoans;    /* --yes-all / --deny-all, or NULL */
	struct pitem *items;
	size_t n, cap;
	char cur[80];           /* plain mode: the prompt last asked about */
	struct ctlh_sse sse;
	struct ctlh_stream *st;
	int64_t last_bytes;
	int attempts;
	int64_t reconnect_at;   /* 0: connected or not scheduled */
	char msgs[WATCH_MSGS][400];
	int nmsg;
	int dirty;
	int quit;
	int rc;
	int stdin_open;
	char line[256];         /* plain mode: a key line being read */
	size_t linelen;
};

static struct termios saved_tty;
static volatile sig_atomic_t tty_raw;

static void
tty_restore(void)
{
	if (tty_raw) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tty);
		tty_raw = 0;
		/* leave the cursor visible */
		if (write(STDOUT_FILENO, "\033[?25h", 6) < 0)
			return;
	}
}

/* tcsetattr(3) is async-signal-safe: restore at once, not after a
 * request that may take a while to finish. */
static void
on_watch_stop(int sig)
{
	(void)sig;
	tty_restore();
	stop_flag = 1;
}

static int
tty_setup(void)
{
	struct termios t;

	if (tcgetattr(STDIN_FILENO, &saved_tty) != 0)
		return -1;
	t = saved_tty;
	/* no line editing, no echo; ^C still signals, output still maps
	 * NL to CRNL */
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) != 0)
		return -1;
	tty_raw = 1;
	atexit(tty_restore);
	return 0;
}

static void watch_msg(struct watch *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A status line: printed in plain mode, kept for the screen otherwise. */
static void
watch_msg(struct watch *w, const char *fmt, ...)
{
	va_list ap;
	char buf[400];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!w->tty) {
		printf("%s\n", buf);
		fflush(stdout);
		return;
	}
	if (w->nmsg == WATCH_MSGS) {
		memmove(w->msgs[0], w->msgs[1], sizeof(w->msgs[0]) *
		    (WATCH_MSGS - 1));
		w->nmsg--;
	}
	snprintf(w->msgs[w->nmsg++], sizeof(w->msgs[0]), "%s", buf);
	w->dirty = 1;
}

static struct pitem *
item_find(struct watch *w, const char *id)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		if (strcmp(w->items[i].id, id) == 0)
			return &w->items[i];
	return NULL;
}

static void
item_remove(struct watch *w, struct pitem *it)
{
	size_t i = (size_t)(it - w->items);

	json_decref(it->doc);
	memmove(&w->items[i], &w->items[i + 1], (w->n - i - 1) *
	    sizeof(*it));
	w->n--;
	w->dirty = 1;
}

static void
item_describe(const json_t *p, char *buf, size_t buflen)
{
	char id[80], s[80], te[80], u[80], m[32], hp[400], path[300], wt[32];
	char left[32];
	const json_t *pv = json_object_get(p, "path");

	fmt_left((long)json_integer_value(json_object_get(p, "expires_in_s")),
	    left, sizeof(left));
	snprintf(buf, buflen, "prompt %s: session %s tenant %s user %s: "
	    "%s %s%s%s waiting %s, expires in %s",
	    field(p, "id", id, sizeof(id)), field(p, "session", s, sizeof(s)),
	    field(p, "tenant", te, sizeof(te)), field(p, "user", u, sizeof(u)),
	    field(p, "method", m, sizeof(m)), prompt_target(p, hp, sizeof(hp)),
	    json_is_string(pv) ? " " : "", json_is_string(pv) ?
	    field(p, "path", path, sizeof(path)) : "",
	    field(p, "waiting", wt, sizeof(wt)), left);
}

/* Add or refresh a pending prompt. */
static void
item_upsert(struct watch *w, const json_t *p)
{
	const char *id = json_string_value(json_object_get(p, "id"));
	const char *state = json_string_value(json_object_get(p, "state"));
	struct pitem *it, *ni;
	json_int_t left = json_integer_value(json_object_get(p,
	    "expires_in_s"));
	char desc[1200];

	if (id == NULL || !id_valid(id) ||
	    (state != NULL && strcmp(state, "pending") != 0))
		return;
	it = item_find(w, id);
	if (it == NULL) {
		if (w->n == w->cap) {
			size_t cap = w->cap ? w->cap * 2 : 16;
			ni = realloc(w->items, cap * sizeof(*ni));
			if (ni == NULL)
				return;
			w->items = ni;
			w->cap = cap;
		}
		it = &w->items[w->n++];
		memset(it, 0, sizeof(*it));
		snprintf(it->id, sizeof(it->id), "%s", id);
		item_describe(p, desc, sizeof(desc));
		watch_msg(w, "%s", desc);
	} else {
		json_decref(it->doc);
	}
	it->doc = json_deep_copy(p);
	it->deadline = util_now_ms() + (left > 0 ? (int64_t)left * 1000 : 0);
	w->dirty = 1;
}

/* The prompt the next key answers: the oldest one not skipped. */
static struct pitem *
item_current(struct watch *w)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		if (!w->items[i].skipped)
			return &w->items[i];
	return NULL;
}

static void
watch_answer(struct watch *w, struct pitem *it, const char *decision)
{
	struct ctlh_target t = {
		.socket = w->o->socket, .url = w->o->url, .token = w->o->token,
		.cacert = w->o->cacert, .cert = w->o->cert, .key = w->o->key,
		.timeout_ms = TIMEOUT_MS,
	};
	struct ctlh_resp r;
	char path[128], err[512], id[80], body[64], m[600];
	json_t *doc;
	enum ctlh_rc rc;

	snprintf(id, sizeof(id), "%s", it->id);
	snprintf(path, sizeof(path), "/v1/prompts/%s", id);
	snprintf(body, sizeof(body), "{\"decision\":\"%s\"}", decision);
	rc = ctlh_request(&t, "POST", path, body, &r, err, sizeof(err));
	if (rc != CTLH_OK) {
		clog_sanitize(err, strlen(err), m, sizeof(m), 500);
		watch_msg(w, "%s: %s not sent: %s", id, decision, m);
		it->retry_at = util_now_ms() + 1000;
		return;
	}
	if (r.status >= 200 && r.status < 300) {
		char st[64], wt[32];
		doc = jsonstrict_load(r.body, r.body_len, NULL);
		watch_msg(w, "%s: %s (waiting %s)", id, doc ? field(doc,
		    "state", st, sizeof(st)) : decision, doc ? field(doc,
		    "waiting", wt, sizeof(wt)) : "?");
		json_decref(doc);
		item_remove(w, it);
	} else {
		api_error_text(&r, m, sizeof(m));
		watch_msg(w, "%s: %s refused: %s", id, decision, m);
		/* gone or answered already: nothing left to answer */
		if (r.status == 404 || r.status == 409)
			item_remove(w, it);
		else
			it->retry_at = util_now_ms() + 1000;
	}
	ctlh_resp_free(&r);
}

static void
on_event(void *arg, const char *type, const char *data, size_t len,
    const char *id)
{
	struct watch *w = arg;
	struct pitem *it;
	json_t *doc;
	char by[100], ans[64];

	(void)id;
	doc = jsonstrict_load(data, len, NULL);
	if (!json_is_object(doc))
		goto done;
	if (strcmp(type, "prompt") == 0) {
		item_upsert(w, doc);
	} else if (strcmp(type, "prompt_resolved") == 0) {
		const char *pid = json_string_value(json_object_get(doc, "id"));
		it = pid ? item_find(w, pid) : NULL;
		if (it != NULL) {
			watch_msg(w, "%s: resolved elsewhere: %s by %s", it->id,
			    field(doc, "answer", ans, sizeof(ans)),
			    field(doc, "by", by, sizeof(by)));
			item_remove(w, it);
		}
	}
done:
	json_decref(doc);
}

/* Replace the pending set by GET /v1/prompts; skip marks survive. */
static int
watch_list(struct watch *w)
{
	struct reply rp;
	const json_t *list, *p;
	size_t i, j;
	int rc, found;

	rc = api(w->o, "GET", "/v1/prompts", NULL, &rp);
	if (rc != EX_OK) {
		reply_free(&rp);
		return rc;
	}
	list = json_object_get(rp.doc, "prompts");
	for (i = w->n; i-- > 0;) {
		found = 0;
		json_array_foreach(list, j, p)
			if (json_is_string(json_object_get(p, "id")) &&
			    strcmp(json_string_value(json_object_get(p, "id")),
			    w->items[i].id) == 0)
				found = 1;
		if (!found)
			item_remove(w, &w->items[i]);
	}
	json_array_foreach(list, j, p)
		item_upsert(w, p);
	reply_free(&rp);
	return EX_OK;
}

static void watch_read(struct watch *w);

/* Connect the event stream; EX_OK, or the exit code of a failure. */
static int
watch_connect(struct watch *w)
{
	struct ctlh_target t = {
		.socket = w->o->socket, .url = w->o->url, .token = w->o->token,
		.cacert = w->o->cacert, .cert = w->o->cert, .key = w->o->key,
		.timeout_ms = TIMEOUT_MS,
	};
	struct ctlh_resp r;
	char err[512], hdr[160];
	const char *headers[2] = { NULL, NULL };
	enum ctlh_rc rc;

	if (w->sse.id[0] != '\0') {
		snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", w->sse.id);
		headers[0] = hdr;
	}
	rc = ctlh_stream_open(&t, "/v1/events", headers, &w->st, &r, err,
	    sizeof(err));
	if (rc != CTLH_OK)
		return transport_exit(rc, err);
	if (w->st == NULL) {
		print_api_error(&r);
		rc = r.status >= 400 && r.status < 500 ? EX_REFUSED : EX_SERVER;
		ctlh_resp_free(&r);
		return (int)rc;
	}
	ctlh_sse_reset(&w->sse);
	w->last_bytes = util_now_ms();
	/* bytes that came with the head wait in the stream, not in the
	 * socket: poll(2) would not report them */
	watch_read(w);
	return EX_OK;
}

/* Schedule the next connection attempt, or give up. */
static void
watch_retry(struct watch *w)
{
	if (++w->attempts > WATCH_RETRIES) {
		errx_msg("giving up after %d attempts", w->attempts - 1);
		w->rc = EX_UNREACHABLE;
		w->quit = 1;
		return;
	}
	w->reconnect_at = util_now_ms() + ((int64_t)WATCH_BACKOFF0_MS <<
	    (w->attempts - 1));
}

static void
watch_drop(struct watch *w, const char *why)
{
	ctlh_stream_close(w->st);
	w->st = NULL;
	w->dirty = 1;
	watch_retry(w);
	if (w->quit)
		return;
	/* plain mode keeps stdout for prompts and answers */
	if (w->tty)
		watch_msg(w, "event stream lost (%s): reconnecting in %lld ms",
		    why, (long long)(w->reconnect_at - util_now_ms()));
	else
		errx_msg("event stream lost (%s): reconnecting in %lld ms",
		    why, (long long)(w->reconnect_at - util_now_ms()));
}

/* Read what the stream has; on its end schedule a reconnect. */
static void
watch_read(struct watch *w)
{
	char buf[16384], err[256];
	long n;
	int i;

	for (i = 0; i < 1024 && w->st != NULL; i++) {
		n = ctlh_stream_read(w->st, buf, sizeof(buf), err, sizeof(err));
		if (n == CTLH_AGAIN)
			return;
		if (n <= 0) {
			watch_drop(w, n == 0 ? "closed" : err);
			return;
		}
		w->last_bytes = util_now_ms();
		/* a good read means the connection is back for real */
		w->attempts = 0;
		if (ctlh_sse_feed(&w->sse, buf, (size_t)n, on_event, w, err,
		    sizeof(err)) != 0) {
			watch_drop(w, err);
			return;
		}
	}
}

static void
watch_reconnect(struct watch *w)
{
	int rc;

	w->reconnect_at = 0;
	rc = watch_connect(w);
	if (rc == EX_OK) {
		rc = watch_list(w);
		if (rc == EX_OK)
			return;
		ctlh_stream_close(w->st);
		w->st = NULL;
	}
	if (rc != EX_UNREACHABLE && rc != EX_SERVER) {
		w->rc = rc;
		w->quit = 1;
		return;
	}
	watch_retry(w);
}

static void
watch_key(struct watch *w, int key)
{
	struct pitem *it = item_current(w);

	if (key == 'q') {
		w->quit = 1;
		return;
	}
	if (strchr("ocds", key) == NULL || key == '\0') {
		if (key > 0x20 && key < 0x7f)
			watch_msg(w, "unknown key %c: o once, c chat, d deny, "
			    "s skip, q quit", key);
		return;
	}
	if (it == NULL) {
		watch_msg(w, "no prompt to answer");
		return;
	}
	if (key == 's') {
		it->skipped = 1;
		watch_msg(w, "%s: skipped (left pending)", it->id);
		w->dirty = 1;
		return;
	}
	watch_answer(w, it, key == 'o' ? "allow_once" : key == 'c' ?
	    "allow_chat" : "deny");
}

static void
watch_stdin(struct watch *w)
{
	char buf[256];
	ssize_t n, i;

	n = read(STDIN_FILENO, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		w->stdin_open = 0;
		/* with nobody to press keys, a manual approver is done */
		if (w->autoans == NULL)
			w->quit = 1;
		return;
	}
	for (i = 0; i < n && !w->quit; i++) {
		if (w->tty) {
			if (w->autoans == NULL || buf[i] == 'q')
				watch_key(w, (unsigned char)buf[i]);
			continue;
		}
		/* one key a line: its first non-blank character */
		if (buf[i] != '\n') {
			if (w->linelen + 1 < sizeof(w->line))
				w->line[w->linelen++] = buf[i];
			continue;
		}
		w->line[w->linelen] = '\0';
		{
			const char *k = w->line + strspn(w->line, " \t\r");
			if (*k != '\0' && (w->autoans == NULL || *k == 'q'))
				watch_key(w, (unsigned char)*k);
		}
		w->linelen = 0;
	}
}

static void
watch_expire(struct watch *w)
{
	int64_t now = util_now_ms();
	size_t i;

	for (i = w->n; i-- > 0;)
		if (w->items[i].deadline <= now) {
			watch_msg(w, "%s: expired", w->items[i].id);
			item_remove(w, &w->items[i]);
		}
}

static void
watch_auto(struct watch *w)
{
	int64_t now = util_now_ms();
	size_t i;
	int k;

	/* answering removes items: restart the scan after each, bounded */
	for (k = 0; k < 10000 && !stop_flag; k++) {
		for (i = 0; i < w->n; i++)
			if (w->items[i].retry_at <= now)
				break;
		if (i == w->n)
			return;
		watch_answer(w, &w->items[i], w->autoans);
	}
}

/* Plain mode: ask about the current prompt once. */
static void
watch_ask(struct watch *w)
{
	struct pitem *it = item_current(w);

	if (it == NULL) {
		w->cur[0] = '\0';
		return;
	}
	if (strcmp(w->cur, it->id) == 0)
		return;
	snprintf(w->cur, sizeof(w->cur), "%s", it->id);
	printf("answer %s? [o]nce [c]hat [d]eny [s]kip [q]uit\n", it->id);
	fflush(stdout);
}

static void
watch_draw(struct watch *w)
{
	struct pitem *cur = item_current(w);
	int64_t now = util_now_ms();
	char s[40], te[40], u[40], m[16], hp[400], wt[16], left[32], pth[80];
	char id[80];
	size_t i;
	int k;

	printf("\033[H\033[2J\033[?25l");
	printf("sluicectl prompts watch: %zu pending%s\n\n", w->n, w->st ?
	    "" : "  (reconnecting)");
	printf("  %-20s %-16s %-12s %-12s %-8s %-28s %-7s %s\n", "ID",
	    "SESSION", "TENANT", "USER", "METHOD", "HOST:PORT", "WAITING",
	    "LEFT");
	for (i = 0; i < w->n; i++) {
		const json_t *p = w->items[i].doc;
		fmt_left((long)((w->items[i].deadline - now + 999) / 1000),
		    left, sizeof(left));
		printf("%c %-20s %-16s %-12s %-12s %-8s %-28s %-7s %s%s\n",
		    &w->items[i] == cur ? '>' : ' ',
		    field(p, "id", id, sizeof(id)),
		    field(p, "session", s, sizeof(s)),
		    field(p, "tenant", te, sizeof(te)),
		    field(p, "user", u, sizeof(u)),
		    field(p, "method", m, sizeof(m)),
		    prompt_target(p, hp, sizeof(hp)),
		    field(p, "waiting", wt, sizeof(wt)), left,
		    w->items[i].skipped ? "  (skipped)" : "");
		if (json_is_string(json_object_get(p, "path")))
			printf("  %-20s path %s\n", "",
			    field(p, "path", pth, sizeof(pth)));
	}
	if (cur != NULL)
		printf("\nanswer %s: [o] allow once  [c] allow for this chat  "
		    "[d] deny  [s] skip  [q] quit\n", cur->id);
	else
		printf("\nwaiting for prompts  [q] quit\n");
	printf("\n");
	for (k = 0; k < w->nmsg; k++)
		printf("%s\n", w->msgs[k]);
	fflush(stdout);
	w->dirty = 0;
}

static int
prompts_watch(const struct opts *o)
{
	struct watch w;
	struct sigaction sa;
	struct pollfd pfd[2];
	int64_t now, next_draw = 0, wait;
	int rc, nfd, si, ti;

	memset(&w, 0, sizeof(w));
	w.o = o;
	w.rc = EX_OK;
	w.stdin_open = 1;
	w.autoans = (o->seen & BIT(O_YES_ALL)) ? "allow_once" :
	    (o->seen & BIT(O_DENY_ALL)) ? "deny" : NULL;
	ctlh_sse_init(&w.sse);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_watch_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	/* the screen is for a person at a terminal; automatic answers and
	 * pipes get plain lines */
	w.tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) &&
	    w.autoans == NULL && tty_setup() == 0;
	/* the stream first, then the list: a prompt raised in between is
	 * in one or the other */
	rc = watch_connect(&w);
	if (rc == EX_OK)
		rc = watch_list(&w);
	if (rc != EX_OK)
		goto done;
	/* scripts learn that sluiced now has an approver */
	watch_msg(&w, "watching for prompts (%zu pending)", w.n);
	w.dirty = 1;
	while (!w.quit && !stop_flag) {
		now = util_now_ms();
		watch_expire(&w);
		if (w.autoans != NULL)
			watch_auto(&w);
		if (w.tty && (w.dirty || now >= next_draw)) {
			watch_draw(&w);
			next_draw = now + 1000 - now % 1000;
		} else if (!w.tty && w.autoans == NULL)
			watch_ask(&w);
		if (w.st == NULL && w.reconnect_at != 0 &&
		    now >= w.reconnect_at) {
			watch_reconnect(&w);
			continue;
		}
		if (w.st != NULL && now - w.last_bytes > WATCH_IDLE_MS) {
			watch_drop(&w, "no heartbeat");
			continue;
		}
		nfd = 0;
		si = ti = -1;
		if (w.stdin_open) {
			pfd[nfd].fd = STDIN_FILENO;
			pfd[nfd].events = POLLIN;
			si = nfd++;
		}
		if (w.st != NULL) {
			pfd[nfd].fd = ctlh_stream_fd(w.st);
			pfd[nfd].events = POLLIN;
			ti = nfd++;
		}
		wait = 1000 - now % 1000;
		if (w.st == NULL && w.reconnect_at != 0 &&
		    w.reconnect_at - now < wait)
			wait = w.reconnect_at - now;
		if (wait < 1)
			wait = 1;
		if (poll(pfd, (nfds_t)nfd, (int)wait) <= 0)
			continue;
		if (ti >= 0 && pfd[ti].revents != 0)
			watch_read(&w);
		if (si >= 0 && pfd[si].revents != 0)
			watch_stdin(&w);
	}
	rc = w.rc;
done:
	tty_restore();
	if (w.tty)
		printf("\n");
	ctlh_stream_close(w.st);
	ctlh_sse_free(&w.sse);
	while (w.n > 0)
		item_remove(&w, &w.items[w.n - 1]);
	free(w.items);
	return rc;
}

static int
cmd_prompts(const struct opts *o, int argc, char **argv)
{
	const char *sub = argc > 0 ? argv[0] : "";
	char path[128];
	struct reply rp;
	int rc;

	if (strcmp(sub, "watch") == 0) {
		if (o->seen & ~(BIT(O_YES_ALL) | BIT(O_DENY_ALL)))
			return usage_error("prompts watch: option not accepted "
			    "here");
		if ((o->seen & BIT(O_YES_ALL)) && (o->seen & BIT(O_DENY_ALL)))
			return usage_error("give --yes-all or --deny-all, not "
			    "both");
		if (o->json)
			return usage_error("prompts watch has no --json output");
		if (argc != 1)
			return usage_error("prompts watch takes no arguments");
		return prompts_watch(o);
	}
	if (o->seen != 0)
		return usage_error("prompts %s: option not accepted here", sub);
	if (strcmp(sub, "list") == 0) {
		if (argc != 1)
			return usage_error("prompts list takes no arguments");
		return api_show(o, "GET", "/v1/prompts", NULL, print_prompts);
	}
	if (strcmp(sub, "answer") != 0)
		return usage_error("prompts: list, answer or watch");
	if (argc != 3)
		return usage_error("usage: prompts answer ID allow_once|"
		    "allow_chat|deny");
	if ((rc = check_id("prompt id", argv[1])) != EX_OK)
		return rc;
	if (!decision_valid(argv[2]))
		return usage_error("bad answer %s: allow_once, allow_chat or "
		    "deny", argv[2]);
	snprintf(path, sizeof(path), "/v1/prompts/%s", argv[1]);
	rc = api(o, "POST", path, json_pack("{s:s}", "decision", argv[2]),
	    &rp);
	if (rc == EX_OK) {
		if (o->json)
			print_raw(&rp);
		else {
			struct table t = { .ncols = 2 };
			flatten(&t, "", rp.doc);
			table_print(&t, stdout);
		}
	}
	reply_free(&rp);
	return rc;
}

/* ---- log ---- */

/* The MAC key of log verify --key: the file's bytes, as sluiced reads
 * log.mac_key_file. */
static int
read_mac_key(const char *file, unsigned char *key, size_t *keylen)
{
	FILE *f = fopen(file, "rb");
	size_t n;

	if (f == NULL) {
		errx_msg("--key %s: %s", file, strerror(errno));
		return -1;
	}
	n = fread(key, 1, 4097, f);
	fclose(f);
	if (n < 32 || n > 4096) {
		errx_msg("--key %s: %zu bytes; a MAC key has 32 to 4096", file,
		    n);
		OPENSSL_cleanse(key, 4097);
		return -1;
	}
	*keylen = n;
	return 0;
}

/* A torn fragment the verifier skipped: said, not a failure. */
static void
verify_note(void *arg, uint64_t line, const char *msg)
{
	json_t *notes = arg;
	char safe[300];

	clog_sanitize(msg, strlen(msg), safe, sizeof(safe), 256);
	if (notes != NULL)
		json_array_append_new(notes, json_pack("{s:I,s:s}", "line",
		    (json_int_t)line, "note", safe));
	else
		printf("line %" PRIu64 ": %s\n", line, safe);
}

static int
log_verify(const struct opts *o, const char *path)
{
	struct clog_verify_opts vo;
	struct clog_verify_result res;
	json_t *notes;
	unsigned char key[4097];
	size_t keylen = 0;
	char err[512];
	int r;

	/* in log verify, --key is the log's MAC key (log.mac_key_file), not
	 * a TLS client key */
	if (o->key != NULL && read_mac_key(o->key, key, &keylen) != 0)
		return EX_USAGE;
	notes = o->json ? json_array() : NULL;
	memset(&vo, 0, sizeof(vo));
	vo.start_prev = o->prev;
	vo.key = o->key ? key : NULL;
	vo.keylen = keylen;
	vo.anchors = o->anchors;
	vo.nanchors = o->nanchors;
	vo.note = verify_note;
	vo.arg = notes;
	r = clog_verify(path, &vo, &res, err, sizeof(err));
	OPENSSL_cleanse(key, sizeof(key));
	if (o->json) {
		json_t *doc = json_pack("{s:s, s:b, s:I, s:I, s:o, s:I, s:I}",
		    "file", path, "ok", r == 0, "records",
		    (json_int_t)res.records, "fragments",
		    (json_int_t)res.fragments, "notes",
		    notes ? notes : json_array(), "macs",
		    (json_int_t)res.macs, "anchors", (json_int_t)res.anchors);
		char *text;
		if (doc != NULL && r != 0) {
			json_object_set_new(doc, "line", res.bad_line ?
			    json_integer((json_int_t)res.bad_line) :
			    json_null());
			json_object_set_new(doc, "error", json_string(err));
		}
		if (doc != NULL && r == 0 && res.records > 0) {
			json_object_set_new(doc, "last_seq",
			    json_integer((json_int_t)res.last_seq));
			json_object_set_new(doc, "last_hash",
			    json_string(res.last_hash));
		}
		text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
		if (text != NULL)
			puts(text);
		free(text);
		json_decref(doc);
	} else if (r == 0) {
		printf("%s: %" PRIu64 " record(s), chain intact", path,
		    res.records);
		if (res.fragments > 0)
			printf(" (%" PRIu64 " torn fragment(s) skipped)",
			    res.fragments);
		if (o->key != NULL)
			printf(", %" PRIu64 " mac(s) verified", res.macs);
		if (o->nanchors > 0)
			printf(", %zu anchor(s) found", o->nanchors);
		printf("\n");
		if (res.records > 0)
			printf("%s: last record seq %" PRIu64 " hash %s\n", path,
			    res.last_seq, res.last_hash);
	} else {
		char safe[600];
		clog_sanitize(err, strlen(err), safe, sizeof(safe), 512);
		printf("%s: %s\n", path, safe);
		if (res.bad_line > 0)
			printf("%s: %" PRIu64 " record(s) verified before "
			    "line %" PRIu64 "\n", path, res.records,
			    res.bad_line);
	}
	return r == 0 ? EX_OK : EX_REFUSED;
}

static int
hex64(const char *s)
{
	return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

static int
cmd_log(struct opts *o, int argc, char **argv)
{
	const char *sub = argc > 0 ? argv[0] : "";
	const char *path = o->log;
	struct ctlog_opts lo = { .json = o->json, .out = stdout,
	    .diag = stderr };
	uint64_t filt = BIT(O_SESSION) | BIT(O_TENANT) | BIT(O_HOST) |
	    BIT(O_DECISION) | BIT(O_REASON) | BIT(O_EVENT) | BIT(O_SINCE) |
	    BIT(O_UNTIL) | BIT(O_RULE) | BIT(O_CREDENTIAL);
	uint64_t allowed;
	uint64_t matched = 0;
	char err[512];

	if (strcmp(sub, "tail") == 0)
		allowed = BIT(O_FOLLOW) | BIT(O_LINES);
	else if (strcmp(sub, "query") == 0)
		allowed = filt;
	else if (strcmp(sub, "verify") == 0)
		allowed = BIT(O_PREV) | BIT(O_ANCHOR);
	else
		return usage_error("log: tail, query or verify");
	if (o->seen & ~(allowed | BIT(O_FILE)))
		return usage_error("log %s: option not accepted here", sub);
	if (argc != 1)
		return usage_error("log %s takes no arguments", sub);
	if (path == NULL)
		path = DEFAULT_LOG;
	if (strcmp(sub, "verify") == 0) {
		if (o->prev != NULL && !hex64(o->prev))
			return usage_error("--prev wants 64 lower-case hex "
			    "digits");
		return log_verify(o, path);
	}
	if (strcmp(sub, "tail") == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_stop;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		if (ctlog_tail(path, o->lines, o->follow, &stop_flag, &lo, err,
		    sizeof(err)) != 0) {
			errx_msg("%s", err);
			return EX_REFUSED;
		}
		return EX_OK;
	}
	if ((o->filter.since && !ctlog_ts_valid(o->filter.since)) ||
	    (o->filter.until && !ctlog_ts_valid(o->filter.until)))
		return usage_error("--since/--until want an RFC 3339 UTC "
		    "prefix such as 2024-05-01 or 2024-05-01T10:00:00Z");
	if (ctlog_query(path, &o->filter, &lo, &matched, err,
	    sizeof(err)) != 0) {
		errx_msg("%s", err);
		return EX_REFUSED;
	}
	return EX_OK;
}

/* ---- console ---- */

static int
cmd_console(const struct opts *o, int argc, char **argv)
{
	struct console_cfg cfg;
	const char *env = getenv("SLUICE_EXEC_SOCKET");

	(void)argv;
	if (o->seen & ~(BIT(O_PORT) | BIT(O_EXEC_SOCKET)))
		return usage_error("console: option not accepted here");
	if (argc != 0)
		return usage_error("console takes no arguments");
	/* the page has the role of the user who runs this, which only the
	 * Unix socket's credentials give */
	if (o->url != NULL)
		return usage_error("console talks to the control socket: --url "
		    "does not apply");
	if (o->json)
		return usage_error("console has no --json output");
	memset(&cfg, 0, sizeof(cfg));
	cfg.socket = o->socket;
	cfg.exec_socket = o->exec_socket ? o->exec_socket : env && *env ?
	    env : DEFAULT_EXEC_SOCKET;
	cfg.log = o->log;
	cfg.log_default = DEFAULT_LOG;
	cfg.port = (int)o->port;
	return console_run(&cfg);
}

/* ---- options ---- */

static char *
read_token(const char *file)
{
	FILE *f = fopen(file, "r");
	char *buf;
	size_t n;

	if (f == NULL) {
		errx_msg("%s: %s", file, strerror(errno));
		return NULL;
	}
	buf = calloc(1, TOKEN_MAX + 2);
	if (buf == NULL) {
		fclose(f);
		return NULL;
	}
	n = fread(buf, 1, TOKEN_MAX + 1, f);
	fclose(f);
	if (n > TOKEN_MAX) {
		errx_msg("%s: longer than %d bytes", file, TOKEN_MAX);
		free(buf);
		return NULL;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' ||
	    buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	return buf;
}

static int
parse_lines(const char *s, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return (*end != '\0' || end == s || errno != 0 || *out < 0 ||
	    *out > 100000000) ? -1 : 0;
}

/* --anchor SEQ:HASH into o->anchors. */
static int
parse_anchor(const char *s, struct opts *o)
{
	const char *c = strchr(s, ':');
	unsigned long long seq;
	char *end;

	if (c == NULL || c == s || o->nanchors == 16 || s[0] < '0' ||
	    s[0] > '9')
		return -1;
	errno = 0;
	seq = strtoull(s, &end, 10);
	if (end != c || errno != 0 || strlen(c + 1) != 64 ||
	    strspn(c + 1, "0123456789abcdef") != 64)
		return -1;
	o->anchors[o->nanchors].seq = seq;
	memcpy(o->anchors[o->nanchors].hash, c + 1, 65);
	o->nanchors++;
	return 0;
}

/* One option; phase 2 (after the command) records command options. */
static int
take_opt(struct opts *o, int c, int after_cmd)
{
	const char *a = optarg;

	if (c == '?' || c == ':')
		return EX_USAGE;
	if (c == 'h')
		c = O_HELP;
	else if (c == 'f')
		c = O_FOLLOW;
	else if (c == 'n')
		c = O_LINES;
	if (c == O_SOCKET && after_cmd)
		c = O_SESSION_SOCKET;   /* resolved once the command is known */
	if (!(BIT(c) & GLOBAL_BITS))
		o->seen |= BIT(c);
	switch (c) {
	case O_SOCKET: o->socket = a; break;
	case O_SESSION_SOCKET: o->sess_socket = a; break;
	case O_URL: o->url = a; break;
	case O_TOKEN_FILE: o->token_file = a; break;
	case O_CACERT: o->cacert = a; break;
	case O_CERT: o->cert = a; break;
	case O_KEY: o->key = a; break;
	case O_JSON: o->json = 1; break;
	case O_LOG: o->log = a; break;
	case O_FILE: o->log = a; break;
	case O_TENANT: o->tenant = a; o->filter.tenant = a; break;
	case O_USER: o->user = a; break;
	case O_TIER: o->tier = a; break;
	case O_VSOCK_CID: o->vsock_cid = a; break;
	case O_SOURCE: o->source = a; break;
	case O_CLOSE_EXCEEDING: o->close_exceeding = 1; break;
	case O_FOLLOW: o->follow = 1; break;
	case O_LINES:
		if (parse_lines(a, &o->lines) != 0)
			return usage_error("bad -n %s", a);
		break;
	case O_SESSION: o->filter.session = a; break;
	case O_HOST: o->filter.host = a; break;
	case O_DECISION: o->filter.decision = a; break;
	case O_REASON: o->filter.reason = a; break;
	case O_EVENT: o->filter.event = a; break;
	case O_RULE: o->filter.rule = a; break;
	case O_CREDENTIAL: o->filter.credential = a; break;
	case O_SINCE: o->filter.since = a; break;
	case O_UNTIL: o->filter.until = a; break;
	case O_PREV: o->prev = a; break;
	case O_ANCHOR:
		if (parse_anchor(a, o) != 0)
			return usage_error("--anchor wants SEQ:HASH (a record's "
			    "seq and its 64 lower-case hex digits), at most 16");
		break;
	case O_YES_ALL: case O_DENY_ALL: break;
	case O_PORT:
		if (parse_lines(a, &o->port) != 0 || o->port > 65535)
			return usage_error("bad --port %s: 0 to 65535", a);
		break;
	case O_EXEC_SOCKET: o->exec_socket = a; break;
	case O_HELP:
		usage(stdout);
		exit(EX_OK);
	case O_VERSION:
		printf("sluicectl %s\n", PACKAGE_VERSION);
		exit(EX_OK);
	default:
		return EX_USAGE;
	}
	return EX_OK;
}

/* Where the API is, from options and the environment. */
static int
resolve_target(struct opts *o)
{
	const char *env;

	if (o->url != NULL && o->socket != NULL)
		return usage_error("give --socket or --url, not both");
	if (o->url == NULL) {
		if (o->token_file || o->cacert || o->cert || o->key)
			return usage_error("--token-file, --cacert, --cert and "
			    "--key go with --url");
		if (o->socket == NULL) {
			env = getenv("SLUICE_CONTROL_SOCKET");
			o->socket = env && *env ? env : DEFAULT_SOCKET;
		}
		return EX_OK;
	}
	if (o->key != NULL && o->cert == NULL)
		return usage_error("--key needs --cert");
	if (o->token_file != NULL) {
		o->token = read_token(o->token_file);
		if (o->token == NULL)
			return EX_USAGE;
	} else if ((env = getenv("SLUICE_TOKEN")) != NULL && *env) {
		o->token = strdup(env);
	}
	return EX_OK;
}

int
main(int argc, char **argv)
{
	struct opts o;
	const char *cmd;
	char **sub;
	int c, nsub, rc, is_log;

	memset(&o, 0, sizeof(o));
	o.lines = 10;
	signal(SIGPIPE, SIG_IGN);

	/* phase 1: global options, up to the command word */
	opterr = 1;
	while ((c = getopt_long(argc, argv, "+hV", long_opts, NULL)) != -1) {
		if (c == 'V')
			c = O_VERSION;
		if (take_opt(&o, c, 0) != EX_OK)
			return usage_error("bad option");
		if (o.seen != 0)
			return usage_error("command options go after the "
			    "command");
	}
	if (optind >= argc) {
		usage(stderr);
		return EX_USAGE;
	}
	cmd = argv[optind];

	/* phase 2: the rest, options anywhere; sub[0] is the command word */
	sub = argv + optind;
	nsub = argc - optind;
	optind = 0;
	while ((c = getopt_long(nsub, sub, "hVfn:", long_opts, NULL)) != -1)
		if (take_opt(&o, c == 'V' ? O_VERSION : c, 1) != EX_OK)
			return EX_USAGE;
	/* positionals after the command word, in order */
	sub += optind;
	nsub -= optind;

	/* --socket after the command is the control socket except for
	 * session create */
	if ((o.seen & BIT(O_SESSION_SOCKET)) && !(strcmp(cmd, "session") == 0
	    && nsub > 0 && strcmp(sub[0], "create") == 0)) {
		o.socket = o.sess_socket;
		o.sess_socket = NULL;
		o.seen &= ~BIT(O_SESSION_SOCKET);
	}
	is_log = strcmp(cmd, "log") == 0;
	if (!is_log && (rc = resolve_target(&o)) != EX_OK)
		return rc;
	if (is_log && o.url != NULL)
		return usage_error("log commands read the file: --url does not "
		    "apply");

	if (strcmp(cmd, "health") == 0) {
		if (o.seen != 0)
			return usage_error("health: option not accepted here");
		rc = cmd_health(&o, nsub, sub);
	} else if (strcmp(cmd, "ceiling") == 0)
		rc = cmd_ceiling(&o, nsub, sub);
	else if (strcmp(cmd, "session") == 0)
		rc = cmd_session(&o, nsub, sub);
	else if (strcmp(cmd, "grant") == 0)
		rc = cmd_grant(&o, nsub, sub);
	else if (strcmp(cmd, "rule") == 0)
		rc = cmd_rule(&o, nsub, sub);
	else if (strcmp(cmd, "prompts") == 0)
		rc = cmd_prompts(&o, nsub, sub);
	else if (strcmp(cmd, "log") == 0)
		rc = cmd_log(&o, nsub, sub);
	else if (strcmp(cmd, "console") == 0)
		rc = cmd_console(&o, nsub, sub);
	else
		rc = usage_error("unknown command %s", cmd);
	free(o.token);
	if (fflush(stdout) != 0 && rc == EX_OK && errno != EPIPE) {
		errx_msg("output: %s", strerror(errno));
		rc = EX_SERVER;
	}
	return rc;
}
