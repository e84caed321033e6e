/*
 * target.c: hosts, authorities, absolute URIs and Host headers turned
 * into one canonical (host, port), or refused.
 *
 * Nothing is repaired: an input that two reasonable parsers could read
 * as different hosts (short or octal IPv4 forms, userinfo, backslashes,
 * percent escapes, Unicode look-alikes, zone ids) is refused, so the
 * policy, the log and the dialer cannot disagree about the target.
 */
#include "sluice-config.h"

#include <sys/socket.h>
#include <string.h>

#include "policy/policy-int.h"

#define LABEL_MAX 63

int
pol__port_parse(const char *s, size_t len, uint16_t *out)
{
	unsigned v = 0;
	size_t i;

	if (s == NULL || len == 0 || len > 5 || s[0] == '0')
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > 65535)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

static int
is_ldh(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
}

static int
is_hex(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
	    (ch >= 'A' && ch <= 'F');
}

/*
 * Whether a URL parser (WHATWG, inet_aton) would read this last label as
 * a number and so the whole host as an IPv4 address: all decimal digits,
 * or 0x followed by hex digits.  Such hosts must be strict dotted quads.
 */
static int
label_is_numeric(const char *s, size_t len)
{
	size_t i;

	if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < len; i++)
			if (!is_hex(s[i]))
				return 0;
		return 1;
	}
	for (i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

static enum pol_reason
set_literal(const struct pol_addr *a, enum pol_host_kind kind,
    struct pol_target *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = kind;
	out->addr = *a;
	pol_addr_format(a, out->host, sizeof(out->host));
	return out->host[0] != '\0' ? POL_R_NONE : POL_R_BAD_TARGET;
}

static enum pol_reason
parse_bracketed(const char *s, size_t len, struct pol_target *out)
{
	struct pol_addr a;

	if (len < 2 || s[len - 1] != ']')
		return POL_R_BAD_TARGET;
	/* Brackets are for IPv6 only: [allowed.com] and [1.2.3.4] are
	 * refused (smokescreen CVE-2022-29188). */
	if (memchr(s + 1, ':', len - 2) == NULL ||
	    pol_addr_parse(s + 1, len - 2, &a) < 0 || a.family != AF_INET6)
		return POL_R_BAD_TARGET;
	return set_literal(&a, POL_HOST_V6, out);
}

static enum pol_reason
parse_name(const char *s, size_t len, struct pol_target *out)
{
	size_t i, label_start = 0, last_label;
	int had_dot = 0;
	struct pol_addr a;

	for (i = 0; i < len; i++)
		if (!is_ldh(s[i]) && s[i] != '.')
			return POL_R_BAD_TARGET;
	if (len > 0 && s[len - 1] == '.') {
		had_dot = 1;
		len--;
	}
	if (len == 0 || len > POL_HOST_MAX)
		return POL_R_BAD_TARGET;

	for (i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		/* Labels: 1..63 bytes, no hyphen at either end. */
		if (i == label_start || i - label_start > LABEL_MAX ||
		    s[label_start] == '-' || s[i - 1] == '-')
			return POL_R_BAD_TARGET;
		label_start = i + 1;
	}

	last_label = len;
	while (last_label > 0 && s[last_label - 1] != '.')
		last_label--;
	if (label_is_numeric(s + last_label, len - last_label)) {
		/* "1.2.3.4." is refused rather than repaired: a literal has
		 * exactly one spelling. */
		if (had_dot || pol_addr_parse(s, len, &a) < 0 ||
		    a.family != AF_INET)
			return POL_R_BAD_TARGET;
		return set_literal(&a, POL_HOST_V4, out);
	}

	memset(out, 0, sizeof(*out));
	out->kind = POL_HOST_NAME;
	for (i = 0; i < len; i++) {
		char ch = s[i];

		out->host[i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
	}
	out->host[len] = '\0';
	return POL_R_NONE;
}

enum pol_reason
pol_host_parse(const char *s, size_t len, int brackets_ok,
    struct pol_target *out)
{
	struct pol_target t;
	enum pol_reason r;

	if (s == NULL || out == NULL || len == 0)
		return POL_R_BAD_TARGET;
	if (s[0] == '[') {
		if (!brackets_ok)
			return POL_R_BAD_TARGET;
		r = parse_bracketed(s, len, &t);
	} else {
		r = parse_name(s, len, &t);
	}
	if (r == POL_R_NONE)
		*out = t;
	return r;
}

/*
 * Split "host[:port]".  A bracketed host ends at its ']'; otherwise the
 * last ':' separates the port (a name or dotted quad holds no ':', and an
 * unbracketed IPv6 literal then fails as a host).
 */
static enum pol_reason
parse_hostport(const char *s, size_t len, int port_required,
    uint16_t default_port, struct pol_target *out)
{
	size_t host_len = len;
	const char *colon = NULL;
	struct pol_target t;
	uint16_t port = default_port;
	enum pol_reason r;
	size_t i;

	if (s == NULL || out == NULL || len == 0)
		return POL_R_BAD_TARGET;
	if (s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (close == NULL)
			return POL_R_BAD_TARGET;
		host_len = (size_t)(close - s) + 1;
		if (host_len < len) {
			if (s[host_len] != ':')
				return POL_R_BAD_TARGET;
			colon = s + host_len;
		}
	} else {
		for (i = len; i > 0; i--) {
			if (s[i - 1] == ':') {
				colon = s + i - 1;
				host_len = i - 1;
				break;
			}
		}
	}
	if (colon != NULL) {
		if (pol__port_parse(colon + 1, len - host_len - 1, &port) < 0)
			return POL_R_BAD_TARGET;
	} else if (port_required) {
		return POL_R_BAD_TARGET;
	}
	if (port == 0)
		return POL_R_BAD_TARGET;
	r = pol_host_parse(s, host_len, 1, &t);
	if (r != POL_R_NONE)
		return r;
	t.port = port;
	*out = t;
	return POL_R_NONE;
}

enum pol_reason
pol_target_parse_authority(const char *s, size_t len, struct pol_target *out)
{
	return parse_hostport(s, len, 1, 0, out);
}

enum pol_reason
pol_target_parse_hostport(const char *s, size_t len, uint16_t default_port,
    struct pol_target *out)
{
	return parse_hostport(s, len, 0, default_port, out);
}

static int
scheme_is_http(const char *s, size_t len)
{
	static const char http[] = "http://";
	size_t i;

	if (len < sizeof(http) - 1)
		return 0;
	for (i = 0; i < sizeof(http) - 1; i++) {
		char ch = s[i];

		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch + 32);
		if (ch != http[i])
			return 0;
	}
	return 1;
}

/* Path and query bytes: visible ASCII only.  '#' (fragment) and '\'
 * (read as '/' by WHATWG parsers) are refused as parser differentials. */
static int
path_ok(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch <= 0x20 || ch >= 0x7f || ch == '#' || ch == '\\')
			return 0;
	}
	return 1;
}

enum pol_reason
pol_target_parse_uri(const char *s, size_t len, struct pol_target *out,
    const char **path, size_t *path_len)
{
	size_t start, end;
	struct pol_target t;
	enum pol_reason r;

	if (s == NULL || out == NULL || !scheme_is_http(s, len))
		return POL_R_BAD_TARGET;
	start = sizeof("http://") - 1;
	for (end = start; end < len; end++)
		if (s[end] == '/' || s[end] == '?' || s[end] == '#')
			break;
	if (end == start || memchr(s + start, '@', end - start) != NULL)
		return POL_R_BAD_TARGET;   /* no host, or userinfo */
	if (!path_ok(s + end, len - end))
		return POL_R_BAD_TARGET;
	/* "http://h?q" is legal but needs "/" inserted before the query to
	 * become origin-form; it is refused rather than rewritten. */
	if (end < len && s[end] != '/')
		return POL_R_BAD_TARGET;
	r = parse_hostport(s + start, end - start, 0, 80, &t);
	if (r != POL_R_NONE)
		return r;
	*out = t;
	if (path != NULL && path_len != NULL) {
		if (end == len) {
			*path = "/";
			*path_len = 1;
		} else {
			*path = s + end;
			*path_len = len - end;
		}
	}
	return POL_R_NONE;
}
