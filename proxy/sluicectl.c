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
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "clog.h"
#include "ctl_http.h"
#include "ctl_log.h"
#include "policy.h"

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
};
#define BIT(o) (1u << (o))
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
	{ "since", required_argument, NULL, O_SINCE },
	{ "until", required_argument, NULL, O_UNTIL },
	{ "prev", required_argument, NULL, O_PREV },
	{ NULL, 0, NULL, 0 },
};

struct opts {
	const char *socket, *url, *token_file, *cacert, *cert, *key, *log;
	int json;
	unsigned seen;
	const char *tenant, *user, *tier, *vsock_cid, *source, *sess_socket;
	int close_exceeding, follow;
	long lines;
	struct ctlog_filter filter;
	const char *prev;
	char *token;            /* read from --token-file or $SLUICE_TOKEN */
};

static volatile sig_atomic_t stop_flag;

static void
on_stop(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void errx_msg(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void
errx_msg(const char *fmt, ...)
{
	va_list ap;

	fputs("sluicectl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
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
"  log tail [-f] [-n N] [--file PATH]\n"
"  log query [--session S] [--tenant T] [--host H] [--decision D]\n"
"            [--reason R] [--event E] [--since TS] [--until TS] [--file PATH]\n"
"  log verify [--file PATH] [--prev HASH]\n"
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

	fputs("sluicectl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(sluicectl --help for usage)\n", stderr);
	return EX_USAGE;
}

/* ---- validation ---- */

/* Ids go into URL paths: the API's own rule, [A-Za-z0-9._-]{1,64}. */
static int
id_valid(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static int
check_id(const char *what, const char *s)
{
	if (!id_valid(s))
		return usage_error("bad %s %s: 1 to 64 of A-Z a-z 0-9 . _ -",
		    what, s);
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

static void
print_api_error(const struct ctlh_resp *r)
{
	json_t *doc, *e;
	const char *code = NULL, *msg = NULL;
	char c[128], m[600];

	doc = json_loadb(r->body ? r->body : "", r->body_len, 0, NULL);
	e = json_object_get(doc, "error");
	if (json_is_object(e)) {
		code = json_string_value(json_object_get(e, "code"));
		msg = json_string_value(json_object_get(e, "message"));
	}
	if (code != NULL && msg != NULL) {
		clog_sanitize(code, strlen(code), c, sizeof(c), 100);
		clog_sanitize(msg, strlen(msg), m, sizeof(m), 500);
		errx_msg("%d %s: %s", r->status, c, m);
	} else if (code != NULL || msg != NULL) {
		const char *one = code ? code : msg;
		clog_sanitize(one, strlen(one), m, sizeof(m), 500);
		errx_msg("%d %s", r->status, m);
	} else {
		errx_msg("%d %s", r->status, r->reason[0] ? r->reason :
		    "error");
	}
	json_decref(doc);
}

/* Call the API; body is stolen.  EX_OK with rp->doc set on 2xx. */
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
	switch (rc) {
	case CTLH_OK:
		break;
	case CTLH_USAGE:
		errx_msg("%s", err);
		return EX_USAGE;
	case CTLH_UNREACHABLE:
		errx_msg("cannot reach sluiced: %s", err);
		return EX_UNREACHABLE;
	case CTLH_BAD_RESPONSE:
	default:
		errx_msg("bad answer from sluiced: %s", err);
		return EX_SERVER;
	}
	if (rp->resp.status >= 400) {
		print_api_error(&rp->resp);
		return rp->resp.status < 500 ? EX_REFUSED : EX_SERVER;
	}
	if (rp->resp.status >= 300) {
		errx_msg("unexpected %d %s", rp->resp.status, rp->resp.reason);
		return EX_SERVER;
	}
	rp->doc = json_loadb(rp->resp.body, rp->resp.body_len, 0, &je);
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
	fwrite(rp->resp.body, 1, rp->resp.body_len, stdout);
	if (rp->resp.body_len == 0 ||
	    rp->resp.body[rp->resp.body_len - 1] != '\n')
		fputc('\n', stdout);
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
	unsigned allowed = 0;
	json_t *body;
	struct reply rp;
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
		rc = api(o, "GET", "/v1/ceiling", NULL, &rp);
		if (rc == EX_OK) {
			if (o->json)
				print_raw(&rp);
			else
				print_ceiling(rp.doc);
		}
		reply_free(&rp);
		return rc;
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
	struct reply rp;
	int rc;

	rc = api(o, method, path, body, &rp);
	if (rc == EX_OK) {
		if (o->json)
			print_raw(&rp);
		else
			print_session(rp.doc);
	}
	reply_free(&rp);
	return rc;
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
	unsigned allowed = 0;
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
		rc = api(o, "GET", "/v1/sessions", NULL, &rp);
		if (rc == EX_OK) {
			if (o->json)
				print_raw(&rp);
			else
				print_sessions(rp.doc);
		}
		reply_free(&rp);
		return rc;
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

/* ---- log ---- */

static int
log_verify(const struct opts *o, const char *path)
{
	uint64_t records = 0, bad = 0;
	char err[512];
	int r;

	r = clog_verify_file(path, o->prev, &records, &bad, err, sizeof(err));
	if (o->json) {
		json_t *doc = json_pack("{s:s, s:b, s:I}", "file", path,
		    "ok", r == 0, "records", (json_int_t)records);
		char *text;
		if (doc != NULL && r != 0) {
			json_object_set_new(doc, "line", bad ?
			    json_integer((json_int_t)bad) : json_null());
			json_object_set_new(doc, "error", json_string(err));
		}
		text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
		if (text != NULL)
			puts(text);
		free(text);
		json_decref(doc);
	} else if (r == 0) {
		printf("%s: %" PRIu64 " record(s), chain intact\n", path,
		    records);
	} else {
		char safe[600];
		clog_sanitize(err, strlen(err), safe, sizeof(safe), 512);
		printf("%s: %s\n", path, safe);
		if (bad > 0)
			printf("%s: %" PRIu64 " record(s) verified before "
			    "line %" PRIu64 "\n", path, records, bad);
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
	unsigned filt = BIT(O_SESSION) | BIT(O_TENANT) | BIT(O_HOST) |
	    BIT(O_DECISION) | BIT(O_REASON) | BIT(O_EVENT) | BIT(O_SINCE) |
	    BIT(O_UNTIL);
	unsigned allowed;
	uint64_t matched = 0;
	char err[512];

	if (strcmp(sub, "tail") == 0)
		allowed = BIT(O_FOLLOW) | BIT(O_LINES);
	else if (strcmp(sub, "query") == 0)
		allowed = filt;
	else if (strcmp(sub, "verify") == 0)
		allowed = BIT(O_PREV);
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
	case O_SINCE: o->filter.since = a; break;
	case O_UNTIL: o->filter.until = a; break;
	case O_PREV: o->prev = a; break;
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
	else if (strcmp(cmd, "log") == 0)
		rc = cmd_log(&o, nsub, sub);
	else
		rc = usage_error("unknown command %s", cmd);
	free(o.token);
	if (fflush(stdout) != 0 && rc == EX_OK && errno != EPIPE) {
		errx_msg("output: %s", strerror(errno));
		rc = EX_SERVER;
	}
	return rc;
}
