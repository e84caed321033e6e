/*
 * http_check.c: runs one byte stream of requests through sluice's
 * request parser, as sluiced does, and says what it made of it as one
 * JSON object on stdout (t_llhttp.py compares that with llhttp's
 * expectations).
 *
 *   http_check FILE
 *
 * What sluiced applies to a request before any policy is consulted is
 * applied here, in its order: the head parser (http_parse_request), the
 * method rule (unknown methods, TRACE and TRACK are refused), the target
 * rule for the absolute and authority forms, and the body framer
 * (http_body_feed).  A CONNECT ends the stream: what follows belongs to
 * the tunnel.  A request that does not keep the connection ends it too:
 * sluiced closes after its exchange and never reads what follows.
 *
 * Output: {"messages": [{"method", "url", "version", "headers":
 * [[name, value]...], "head_end", "end"}...], "outcome": "ok" |
 * "incomplete" | "error" | "tunnel" | "closed", "reason", "why"}.
 * head_end and end are offsets into the stream; end is null when the
 * body did not end within it.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/lib/http.h"
#include "policy/policy.h"

static void
json_str(const char *s, size_t n)
{
	size_t i;

	putchar('"');
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void
json_cstr(const char *s)
{
	if (s == NULL)
		fputs("null", stdout);
	else
		json_str(s, strlen(s));
}

/* The target rule of conn.c's handle_request for the forms that carry
 * a host; origin and asterisk forms are the proxy's business (refused
 * in forward mode, taken with Host in transparent mode), not the
 * parser's. */
static enum pol_reason
target_rule(const struct http_msg *m)
{
	struct pol_target t;
	const char *path;
	size_t path_len;

	if (m->m == HTTP_M_CONNECT)
		return pol_target_parse_authority(m->target, m->target_len,
		    &t);
	if (m->target_len > 0 && m->target[0] != '/' &&
	    !(m->target_len == 1 && m->target[0] == '*'))
		return pol_target_parse_uri(m->target, m->target_len, &t,
		    &path, &path_len);
	return POL_R_NONE;
}

static void
message(const struct http_msg *m, size_t pos, int have_end, size_t end,
    int first)
{
	size_t i;

	printf("%s{\"method\":", first ? "" : ",");
	json_str(m->method, m->method_len);
	fputs(",\"url\":", stdout);
	json_str(m->target, m->target_len);
	printf(",\"version\":\"1.%d\",\"headers\":[", m->version_minor);
	for (i = 0; i < m->nheaders; i++) {
		printf("%s[", i ? "," : "");
		json_str(m->headers[i].name, m->headers[i].name_len);
		putchar(',');
		json_str(m->headers[i].value, m->headers[i].value_len);
		putchar(']');
	}
	printf("],\"head_end\":%zu,\"end\":", pos + m->head_len);
	if (have_end)
		printf("%zu}", end);
	else
		fputs("null}", stdout);
}

int
main(int argc, char **argv)
{
	static char buf[1 << 20];
	static struct http_msg m;
	struct http_limits lim;
	struct http_body_state bs;
	const char *outcome = "ok", *reason = NULL, *why = NULL;
	enum http_status st;
	enum pol_reason r;
	size_t len, pos = 0, end;
	FILE *f;
	long n;
	int first = 1;

	if (argc != 2 || (f = fopen(argv[1], "rb")) == NULL) {
		fprintf(stderr, "usage: http_check FILE\n");
		return 2;
	}
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	http_limits_default(&lim);
	fputs("{\"messages\":[", stdout);
	while (pos < len) {
		st = http_parse_request(buf + pos, len - pos, &lim, &m, &why);
		if (st == HTTP_PARSE_INCOMPLETE) {
			outcome = "incomplete";
			break;
		}
		if (st != HTTP_PARSE_OK) {
			outcome = "error";
			reason = st == HTTP_PARSE_TOO_LARGE ? "head_too_large" :
			    "bad_request";
			break;
		}
		if (m.m == HTTP_M_UNKNOWN || m.m == HTTP_M_TRACE ||
		    m.m == HTTP_M_TRACK) {
			outcome = "error";
			reason = "method_not_allowed";
			break;
		}
		if ((r = target_rule(&m)) != POL_R_NONE) {
			outcome = "error";
			reason = pol_reason_name(r);
			break;
		}
		if (m.m == HTTP_M_CONNECT) {
			message(&m, pos, 1, pos + m.head_len, first);
			outcome = "tunnel";
			break;
		}
		http_body_init(&bs, m.body, m.content_length, lim.max_line);
		n = http_body_feed(&bs, buf + pos + m.head_len,
		    len - pos - m.head_len);
		if (n < 0) {
			message(&m, pos, 0, 0, first);
			outcome = "error";
			reason = "bad_request";
			why = "chunked framing";
			break;
		}
		end = pos + m.head_len + (size_t)n;
		message(&m, pos, bs.done, end, first);
		first = 0;
		if (!bs.done) {
			outcome = "incomplete";
			break;
		}
		pos = end;
		if (!m.keep_alive) {
			if (pos < len)
				outcome = "closed";
			break;
		}
	}
	printf("],\"outcome\":\"%s\",\"reason\":", outcome);
	json_cstr(reason);
	fputs(",\"why\":", stdout);
	json_cstr(why);
	fputs("}\n", stdout);
	return 0;
}
