/*
 * credspec.c: credentials as given and kept (credspec.h).
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "proxy/lib/credspec.h"
#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/util.h"

void
cred_spec_free(struct cred_spec *s)
{
	if (s == NULL)
		return;
	free(s->name);
	free(s->tenant);
	util_strv_free(s->hosts, s->nhosts);
	pol_hostset_free(s->hs);
	free(s->header);
	free(s->format);
	util_strv_free(s->methods, s->nmethods);
	util_strv_free(s->paths, s->npaths);
	if (s->value != NULL) {
		explicit_bzero(s->value, strlen(s->value));
		free(s->value);
	}
	explicit_bzero(s->secret, sizeof(s->secret));
	memset(s, 0, sizeof(*s));
}

static const char host_what[] = "a host name or *.suffix, with an optional "
    ":port";

/* Any string: what hosts' items are is checked as they are added. */
static int
any_string(const char *s)
{
	(void)s;
	return 1;
}

/* A header token (RFC 9110), 1..64. */
static int
token_ok(const char *s)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";
	size_t i, n = strlen(s);

	if (n == 0 || n > 64)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || strchr(extra, s[i]) != NULL))
			return 0;
	return 1;
}

/* What may stand in a header value: visible ASCII and spaces (no CR, LF,
 * NUL or other controls: a value must not start another header). */
static int
field_ok(const char *s, size_t max)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return 0;
	return s[0] != ' ' && s[n - 1] != ' ';
}

int
cred_spec_parse(json_t *o, int stored, struct cred_spec *out, char *err,
    size_t errlen)
{
	static const char *const api_keys[] = { "name", "tenant", "hosts",
	    "inject", "methods", "paths", "value", NULL };
	/* the state file keeps the secret and the time too */
	static const char *const stored_keys[] = { "name", "tenant", "hosts",
	    "inject", "methods", "paths", "value", "secret", "updated",
	    NULL };
	const char *name, *tenant, *header, *format, *value, *secret, *k;
	json_t *inj, *v;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(o))
		return errf(err, errlen, "expected a JSON object");
	if ((k = jsonstrict_unknown_key(o, stored ? stored_keys : api_keys)) !=
	    NULL)
		return errf(err, errlen, "%.64s: unknown field (expected "
		    "name, tenant, hosts, inject, methods, paths, value)", k);
	if (jsonstrict_str(o, "name", 1, &name, err, errlen) != 0 ||
	    jsonstrict_str(o, "tenant", 1, &tenant, err, errlen) != 0 ||
	    jsonstrict_str(o, "value", 1, &value, err, errlen) != 0)
		return -1;
	if (jsonstrict_check("name", name, pol_id_valid, POL_ID_WHAT, err,
	    errlen) != 0 || jsonstrict_check("tenant", tenant, pol_id_valid,
	    POL_ID_WHAT, err, errlen) != 0)
		return -1;
	if (!field_ok(value, CRED_VALUE_MAX))
		return errf(err, errlen, "value: expected 1 to %d bytes of "
		    "visible ASCII or spaces (not at either end)",
		    CRED_VALUE_MAX);
	inj = json_object_get(o, "inject");
	if (!json_is_object(inj) || json_object_size(inj) > 2)
		return errf(err, errlen, "inject: expected {\"header\", "
		    "\"format\"}");
	if (jsonstrict_str(inj, "header", 1, &header, err, errlen) != 0 ||
	    jsonstrict_str(inj, "format", 0, &format, err, errlen) != 0)
		return -1;
	if (json_object_size(inj) == 2 && format == NULL)
		return errf(err, errlen, "inject: expected {\"header\", "
		    "\"format\"}");
	if (format == NULL)
		format = "{}";
	if (!token_ok(header))
		return errf(err, errlen, "inject.header: expected a header "
		    "name");
	if (strcmp(format, CRED_FORMAT_BASIC) == 0) {
		/* HTTP Basic (RFC 7617): the value is the whole user-pass */
		if (strchr(value, ':') == NULL)
			return errf(err, errlen, "value: format \"Basic\" "
			    "expects user:password");
	} else {
		const char *b = strstr(format, "{}");

		if (!field_ok(format, CRED_FORMAT_MAX) || b == NULL ||
		    strstr(b + 2, "{}") != NULL)
			return errf(err, errlen, "inject.format: expected up "
			    "to %d bytes of visible ASCII with one {} (where the "
			    "value goes), or \"Basic\"", CRED_FORMAT_MAX);
	}
	if ((out->name = strdup(name)) == NULL ||
	    (out->tenant = strdup(tenant)) == NULL ||
	    (out->header = strdup(header)) == NULL ||
	    (out->format = strdup(format)) == NULL ||
	    (out->value = strdup(value)) == NULL ||
	    (out->hs = pol_hostset_new()) == NULL) {
		cred_spec_free(out);
		return errf(err, errlen, "out of memory");
	}
	/* each host is checked once, by adding it: pol_hostset_add
	 * refuses what pol_hostset_pattern_valid would (which is an add
	 * to a set of its own), so that one is asked only to tell a bad
	 * host from a want of memory */
	if (jsonstrict_strv(o, "hosts", 1, 64, 0, any_string, host_what,
	    &out->hosts, &out->nhosts, err, errlen) != 0) {
		cred_spec_free(out);
		return -1;
	}
	for (i = 0; i < out->nhosts; i++)
		if (pol_hostset_add(out->hs, out->hosts[i]) != 0) {
			if (pol_hostset_pattern_valid(out->hosts[i]))
				errf(err, errlen, "out of memory");
			else
				errf(err, errlen, "hosts[%zu]: expected %s", i,
				    host_what);
			cred_spec_free(out);
			return -1;
		}
	if (jsonstrict_strv(o, "methods", 0, 64, 0, pol_rule_method_valid, "an "
	    "upper-case method", &out->methods, &out->nmethods, err,
	    errlen) != 0 ||
	    jsonstrict_strv(o, "paths", 0, 64, 0, pol_rule_glob_valid, "a path glob "
	    "starting with / or *", &out->paths, &out->npaths, err,
	    errlen) != 0) {
		cred_spec_free(out);
		return -1;
	}
	if (stored) {
		if (jsonstrict_str(o, "secret", 1, &secret, err, errlen) != 0) {
			cred_spec_free(out);
			return -1;
		}
		for (i = 0; secret[i] != '\0'; i++)
			if (!((secret[i] >= '0' && secret[i] <= '9') ||
			    (secret[i] >= 'a' && secret[i] <= 'f')))
				break;
		if (i != CRED_SECRET_LEN || secret[i] != '\0') {
			cred_spec_free(out);
			return errf(err, errlen, "secret: expected %d lower-case "
			    "hex digits", CRED_SECRET_LEN);
		}
		memcpy(out->secret, secret, CRED_SECRET_LEN + 1);
		v = json_object_get(o, "updated");
		out->updated = json_is_integer(v) ? json_integer_value(v) : 0;
	}
	return 0;
}

static json_t *
common(const struct cred_spec *s)
{
	char ph[POL_ID_MAX + CRED_SECRET_LEN + 32];

	snprintf(ph, sizeof(ph), "sluice-cred:%s:%s", s->name, s->secret);
	return json_pack("{s:s,s:s,s:o,s:{s:s,s:s},s:o,s:o,s:s,s:I}",
	    "name", s->name, "tenant", s->tenant,
	    "hosts", jsonstrict_strv_json(s->hosts, s->nhosts),
	    "inject", "header", s->header, "format", s->format,
	    "methods", jsonstrict_strv_json(s->methods, s->nmethods),
	    "paths", jsonstrict_strv_json(s->paths, s->npaths),
	    "placeholder", ph, "updated", (json_int_t)s->updated);
}

json_t *
cred_spec_json(const struct cred_spec *s)
{
	return common(s);
}

json_t *
cred_spec_stored_json(const struct cred_spec *s)
{
	json_t *j = common(s);

	if (j == NULL)
		return NULL;
	json_object_del(j, "placeholder");
	if (json_object_set_new(j, "secret", json_string(s->secret)) != 0 ||
	    json_object_set_new(j, "value", json_string(s->value)) != 0) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* ---- HTTP Basic (inject.format "Basic") ---- */

static int
b64_val(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/* The user-pass of a header value "Basic <base64>" (the scheme in any
 * case), decoded into out (at most outcap bytes).  Its length, or -1
 * when v is not that (another scheme, not base64, too long). */
long
cred_basic_decode(const char *v, size_t n, char *out, size_t outcap)
{
	size_t i = 0, k = 0, bits = 0, end;
	unsigned long acc = 0;
	int d;

	if (n < 6 || strncasecmp(v, "Basic", 5) != 0 ||
	    (v[5] != ' ' && v[5] != '\t'))
		return -1;
	for (i = 5; i < n && (v[i] == ' ' || v[i] == '\t'); i++)
		;
	for (end = n; end > i && (v[end - 1] == ' ' || v[end - 1] == '\t');
	    end--)
		;
	for (; end > i && v[end - 1] == '='; end--)
		;
	for (; i < end; i++) {
		if ((d = b64_val((unsigned char)v[i])) < 0)
			return -1;
		acc = (acc << 6) | (unsigned long)d;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (k == outcap)
				return -1;
			out[k++] = (char)((acc >> bits) & 0xff);
		}
	}
	return (long)k;
}

/* base64 of s[0..n) into out (4 * ((n + 2) / 3) bytes). */
size_t
cred_b64_encode(const char *s, size_t n, char *out)
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *u = (const unsigned char *)s;
	size_t i, k = 0;
	unsigned long w;

	for (i = 0; i + 2 < n; i += 3) {
		w = (unsigned long)u[i] << 16 | (unsigned long)u[i + 1] << 8 |
		    u[i + 2];
		out[k++] = al[(w >> 18) & 63];
		out[k++] = al[(w >> 12) & 63];
		out[k++] = al[(w >> 6) & 63];
		out[k++] = al[w & 63];
	}
	if (i < n) {
		w = (unsigned long)u[i] << 16 |
		    (i + 1 < n ? (unsigned long)u[i + 1] << 8 : 0);
		out[k++] = al[(w >> 18) & 63];
		out[k++] = al[(w >> 12) & 63];
		out[k++] = i + 1 < n ? al[(w >> 6) & 63] : '=';
		out[k++] = '=';
	}
	return k;
}

/* ---- a sandbox's own placeholder ---- */

int
cred_session_secret(const char *secret, const char *session,
    char out[CRED_SECRET_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE], msg[16 + 512];
	unsigned int mdlen = 0;
	size_t sn = strlen(session), i;

	out[0] = '\0';
	if (sn > sizeof(msg) - 12)
		return -1;
	memcpy(msg, "sluice-cred:", 12);
	memcpy(msg + 12, session, sn);
	if (HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, 12 + sn, md,
	    &mdlen) == NULL || mdlen * 2 < CRED_SECRET_LEN)
		return -1;
	for (i = 0; i < CRED_SECRET_LEN / 2; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[CRED_SECRET_LEN] = '\0';
	OPENSSL_cleanse(md, sizeof(md));
	return 0;
}
