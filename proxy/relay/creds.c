/*
 * creds.c: credential placeholders in the requests sluiced forwards.
 *
 * A sandbox holds only a placeholder ("sluice-cred:<name>:<secret>") of
 * a credential (POST /v1/credentials): the credential's own, or one
 * whose secret is bound to the sandbox's session (cred_session_secret,
 * taken from that session only).  In a request on an inspected TLS
 * leg to one of the credential's hosts, of a session of its tenant, with
 * a method and path the credential admits, and after the policy and the
 * request rules allowed it, sluiced puts the real value in the header
 * the credential names (inject.header, formatted with inject.format):
 * every client-sent header of that name and every header that carried
 * the placeholder are replaced, never merged.  Anywhere else (plain
 * HTTP, another host or tenant, a method or path not admitted, an
 * unknown or revoked placeholder) a header carrying a placeholder is
 * removed, so the placeholder never leaves and the value never goes
 * where it does not belong.  Only headers are looked at: their text,
 * and the decoded user-pass of a "Basic <base64>" value, where a
 * client given the placeholder as a password (pip's index URL, netrc)
 * puts it.  A credential of format "Basic" goes out as "Basic " and the
 * base64 of its value (user:password).
 *
 * The credentials themselves are the control plane's: the relay finds
 * them through px_hooks.cred_find for the time of one call.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/lib/credspec.h"
#include "proxy/relay/relay-int.h"

static const char prefix[] = PX_CRED_PREFIX;
#define PREFIX_LEN (sizeof(prefix) - 1)

static const char *
find(const char *s, size_t n, size_t *at)
{
	size_t i;

	for (i = *at; i + PREFIX_LEN <= n; i++)
		if (memcmp(s + i, prefix, PREFIX_LEN) == 0) {
			*at = i + PREFIX_LEN;
			return s + i;
		}
	return NULL;
}

static int
id_char(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
	    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
}

/* The placeholder starting after the prefix at s[at]: name and secret
 * copied out.  0 / -1 (not a placeholder's shape). */
static int
parse(const char *s, size_t n, size_t at, char *name, char *secret)
{
	size_t i = at, k = 0;

	while (i < n && id_char(s[i]) && k < POL_ID_MAX)
		name[k++] = s[i++];
	name[k] = '\0';
	if (k == 0 || i >= n || s[i] != ':')
		return -1;
	i++;
	k = 0;
	while (i < n && k < PX_CRED_SECRET_LEN &&
	    ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
		secret[k++] = s[i++];
	secret[k] = '\0';
	if (k != PX_CRED_SECRET_LEN || (i < n && (id_char(s[i]))))
		return -1;
	return 0;
}

/* The credential may go into c's request. */
static int
applies(const struct px_conn *c, const struct relay_cred *cr)
{
	size_t i;

	if (!c->cli_tls || !c->up_tls || c->session == NULL ||
	    strcmp(pol_session_tenant(c->session->pol), cr->tenant) != 0 ||
	    c->target.kind != POL_HOST_NAME ||
	    !pol_hostset_match(cr->hosts, c->target.host, c->target.port,
	    NULL, 0))
		return 0;
	if (cr->nmethods > 0) {
		for (i = 0; i < cr->nmethods; i++)
			if (strcmp(cr->methods[i], c->method) == 0)
				break;
		if (i == cr->nmethods)
			return 0;
	}
	if (cr->npaths > 0) {
		char *scratch = malloc(c->path_len + 1);
		int ok = 0;

		if (scratch == NULL || c->path == NULL)
			goto done;
		if (pol_path_normalize(c->path, c->path_len, scratch,
		    c->path_len + 1, NULL, NULL) != 0)
			goto done;
		for (i = 0; i < cr->npaths && !ok; i++)
			ok = pol_glob_match(cr->paths[i], scratch,
			    strlen(scratch));
done:
		free(scratch);
		return ok;
	}
	return 1;
}

/* 1 when v[0..n) says the Basic scheme (any case, then a blank). */
static int
basic_scheme(const char *v, size_t n)
{
	while (n > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		n--;
	}
	return n > 5 && strncasecmp(v, "Basic", 5) == 0 &&
	    (v[5] == ' ' || v[5] == '\t');
}

char *
px_creds_plan(struct px_conn *c, unsigned char *drop, size_t *linelen)
{
	const struct http_msg *m = c->req;
	const struct relay_cred *use = NULL;
	char name[POL_ID_MAX + 1], secret[PX_CRED_SECRET_LEN + 1];
	char dec[PX_CRED_BASIC_MAX];
	size_t i, at, hn, fn, vn;
	const char *brace;
	char *line, *p;

	c->cred[0] = '\0';
	c->cred_removed = 0;
	*linelen = 0;
	memset(drop, 0, m->nheaders);
	for (i = 0; i < m->nheaders; i++) {
		const struct http_header *h = &m->headers[i];
		const char *ph, *v = h->value;
		size_t vlen = h->value_len;
		long dn;
		int pass;

		/* pass 0: the text; pass 1: a Basic value's user-pass */
		for (pass = 0; pass < 2; pass++) {
			if (pass == 1) {
				dn = cred_basic_decode(h->value, h->value_len,
				    dec, sizeof(dec));
				if (dn <= 0 && basic_scheme(h->value,
				    h->value_len)) {
					/* a placeholder could hide in what
					 * does not decode (another alphabet,
					 * too long): it never leaves */
					drop[i] = 1;
					c->cred_removed++;
				}
				if (dn <= 0)
					break;
				v = dec;
				vlen = (size_t)dn;
			}
			at = 0;
			while ((ph = find(v, vlen, &at)) != NULL) {
				const struct relay_cred *cr = NULL;

				drop[i] = 1;
				if (parse(v, vlen, at, name, secret) == 0 &&
				    px_hooks.cred_find != NULL)
					cr = px_hooks.cred_find(name, secret,
					    c->session != NULL ?
					    pol_session_id(c->session->pol) :
					    NULL);
				if (cr != NULL && applies(c, cr) &&
				    (use == NULL || use == cr))
					use = cr;   /* one per request */
				else
					c->cred_removed++;
			}
		}
	}
	explicit_bzero(secret, sizeof(secret));
	explicit_bzero(dec, sizeof(dec));
	if (use == NULL)
		return NULL;
	for (i = 0; i < m->nheaders; i++) {
		const struct http_header *h = &m->headers[i];

		if (h->name_len == strlen(use->header) &&
		    strncasecmp(h->name, use->header, h->name_len) == 0)
			drop[i] = 1;
	}
	hn = strlen(use->header);
	vn = strlen(use->value);
	if (strcmp(use->format, CRED_FORMAT_BASIC) == 0) {
		/* "Name: Basic " + base64(user:password) + CRLF */
		if ((line = malloc(hn + 10 + 4 * ((vn + 2) / 3) + 3)) == NULL) {
			c->cred_removed++;
			return NULL;
		}
		p = line;
		memcpy(p, use->header, hn);
		p += hn;
		memcpy(p, ": Basic ", 8);
		p += 8;
		p += cred_b64_encode(use->value, vn, p);
		memcpy(p, "\r\n", 2);
		p += 2;
		*linelen = (size_t)(p - line);
		snprintf(c->cred, sizeof(c->cred), "%s", use->name);
		return line;
	}
	/* "Name: " + format with its "{}" replaced by the value + CRLF */
	brace = strstr(use->format, "{}");
	fn = strlen(use->format);
	if (brace == NULL || (line = malloc(hn + fn + vn + 5)) == NULL) {
		c->cred_removed++;
		return NULL;
	}
	p = line;
	memcpy(p, use->header, hn);
	p += hn;
	memcpy(p, ": ", 2);
	p += 2;
	memcpy(p, use->format, (size_t)(brace - use->format));
	p += brace - use->format;
	memcpy(p, use->value, vn);
	p += vn;
	memcpy(p, brace + 2, fn - (size_t)(brace - use->format) - 2);
	p += fn - (size_t)(brace - use->format) - 2;
	memcpy(p, "\r\n", 2);
	p += 2;
	*linelen = (size_t)(p - line);
	snprintf(c->cred, sizeof(c->cred), "%s", use->name);
	return line;
}
