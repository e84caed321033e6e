/*
 * fuzz_creds.c: the body of POST /v1/credentials (and an entry of the
 * credentials file) through cred_spec_parse.
 *
 * Invariants: a refusal says why and never repeats the value; what is
 * accepted has a value and a format that cannot start another header
 * (no CR, LF or NUL), one "{}" in its format, and hosts that make a
 * host set; its answer (cred_spec_json) never carries the value, and
 * its file form reads back as the same credential.  A format without
 * "{}" is "Basic", whose value is user:password.
 *
 * An input starting with 'B' is, after it, a header value for
 * cred_basic_decode (the relay's reader of a sandbox's Basic header):
 * what it decodes fits the buffer, and base64 of it decodes back to the
 * same bytes.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proxy/lib/credspec.h"
#include "proxy/lib/jsonstrict.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INVARIANT(c) do { if (!(c)) abort(); } while (0)

static int
has_ctl(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return 1;
	return 0;
}

/* Does value stand in o outside its "value" member (a key, or another
 * member's text, at any depth)? */
static int
named_elsewhere(json_t *o, const char *value)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_string(o))
		return strstr(json_string_value(o), value) != NULL;
	if (json_is_array(o)) {
		json_array_foreach(o, i, v)
			if (named_elsewhere(v, value))
				return 1;
		return 0;
	}
	json_object_foreach(o, k, v) {
		if (strstr(k, value) != NULL)
			return 1;
		if (strcmp(k, "value") != 0 && named_elsewhere(v, value))
			return 1;
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t je;
	json_t *o = jsonstrict_load((const char *)data, size, &je), *a, *st;
	struct cred_spec s, back;
	char err[256];
	const char *value;
	size_t i;

	if (size > 0 && data[0] == 'B') {
		char out[512], enc[4 * (512 / 3 + 1) + 8], back2[512];
		long n = cred_basic_decode((const char *)data + 1, size - 1, out,
		    sizeof(out)), m;

		INVARIANT(n >= -1 && n <= (long)sizeof(out));
		if (n >= 0) {
			memcpy(enc, "Basic ", 6);
			m = (long)cred_b64_encode(out, (size_t)n, enc + 6);
			INVARIANT(m == 4 * ((n + 2) / 3));
			m = cred_basic_decode(enc, (size_t)m + 6, back2,
			    sizeof(back2));
			INVARIANT(m == n && memcmp(out, back2, (size_t)n) == 0);
		}
		return 0;
	}
	if (o == NULL)
		return 0;
	err[0] = '\0';
	value = json_string_value(json_object_get(o, "value"));
	if (cred_spec_parse(o, 0, &s, err, sizeof(err)) != 0) {
		INVARIANT(err[0] != '\0');
		/* the value never shows in an error, unless the input
		 * also names it elsewhere (an unknown key the error quotes
		 * may contain it: that is the key, not the value) */
		if (value != NULL && strlen(value) >= 8 &&
		    !named_elsewhere(o, value))
			INVARIANT(strstr(err, value) == NULL);
		json_decref(o);
		return 0;
	}
	INVARIANT(s.value != NULL && s.value[0] != '\0' && !has_ctl(s.value));
	INVARIANT(!has_ctl(s.format) && !has_ctl(s.header));
	if (strcmp(s.format, CRED_FORMAT_BASIC) == 0)
		INVARIANT(strchr(s.value, ':') != NULL);
	else {
		INVARIANT(strstr(s.format, "{}") != NULL);
		INVARIANT(strstr(strstr(s.format, "{}") + 2, "{}") == NULL);
	}
	INVARIANT(s.nhosts > 0 && pol_hostset_count(s.hs) > 0);
	memcpy(s.secret, "0123456789abcdef0123456789abcdef", CRED_SECRET_LEN);
	s.secret[CRED_SECRET_LEN] = '\0';
	a = cred_spec_json(&s);
	INVARIANT(a != NULL && json_object_get(a, "value") == NULL &&
	    json_object_get(a, "secret") == NULL);
	/* the placeholder is the one the relay parses */
	INVARIANT(strncmp(json_string_value(json_object_get(a, "placeholder")),
	    "sluice-cred:", 12) == 0);
	json_decref(a);
	st = cred_spec_stored_json(&s);
	INVARIANT(st != NULL);
	INVARIANT(cred_spec_parse(st, 1, &back, err, sizeof(err)) == 0);
	INVARIANT(strcmp(back.value, s.value) == 0 &&
	    strcmp(back.name, s.name) == 0 &&
	    strcmp(back.format, s.format) == 0 &&
	    strcmp(back.secret, s.secret) == 0 && back.nhosts == s.nhosts);
	for (i = 0; i < s.nhosts; i++)
		INVARIANT(strcmp(back.hosts[i], s.hosts[i]) == 0);
	cred_spec_free(&back);
	json_decref(st);
	cred_spec_free(&s);
	json_decref(o);
	return 0;
}
