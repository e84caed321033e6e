/*
 * exec_os_mp.c: multipart/form-data (RFC 7578 on RFC 2046) as
 * OpenSandbox's POST /files/upload sends it: pairs of a part named
 * "metadata" (JSON) and one named "file" (the bytes).
 *
 * Pure: the whole body is in memory (the listener's body limit bounds
 * it), nothing is copied, every part is pointers into the body.  The
 * grammar kept:
 *
 *   preamble? "--" B [LWS] CRLF
 *   ( headers CRLF body CRLF "--" B ( [LWS] CRLF | "--" ) )...
 *
 * A delimiter is CRLF "--" B; the first one may start the body without
 * its CRLF.  Header lines end with CRLF (a bare LF is taken too, as
 * browsers never send it but curl's users do); folded lines are
 * refused.  Content-Disposition must be form-data with a name; its
 * parameters are token or quoted-string (backslash escapes kept as they
 * are: the caller compares names, it does not unescape them).
 */
#include "sluice-config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sandbox-glue/executor/execd/exec_os-int.h"

#define BOUNDARY_MAX	70
#define HEADER_LINES_MAX 16

static int
tchar(int c)
{
	return c > 0x20 && c < 0x7f && strchr("()<>@,;:\\\"/[]?={}", c) ==
	    NULL;
}

int
xd_mp_boundary(const char *ct, char *out, size_t outlen)
{
	const char *p;
	size_t n = 0;

	if (ct == NULL || strncasecmp(ct, "multipart/form-data", 19) != 0)
		return -1;
	p = ct + 19;
	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != ';')
			return -1;
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, "boundary=", 9) == 0) {
			p += 9;
			if (*p == '"') {
				for (p++; *p && *p != '"'; p++) {
					if (n + 1 >= outlen || n >= BOUNDARY_MAX ||
					    (unsigned char)*p < 0x20 ||
					    (unsigned char)*p >= 0x7f)
						return -1;
					out[n++] = *p;
				}
				if (*p != '"')
					return -1;
				p++;
			} else
				for (; *p && *p != ';' && *p != ' ' &&
				    *p != '\t'; p++) {
					if (n + 1 >= outlen || n >= BOUNDARY_MAX ||
					    (unsigned char)*p <= 0x20 ||
					    (unsigned char)*p >= 0x7f)
						return -1;
					out[n++] = *p;
				}
			out[n] = '\0';
			if (n == 0)
				return -1;
			/* one boundary: a second one is refused */
			for (; *p; p++)
				if (strncasecmp(p, "boundary=", 9) == 0)
					return -1;
			return 0;
		}
		/* another parameter: skip token=token|quoted */
		while (*p && tchar((unsigned char)*p))
			p++;
		if (*p != '=')
			return -1;
		p++;
		if (*p == '"') {
			for (p++; *p && *p != '"'; p++)
				if (*p == '\\' && p[1])
					p++;
			if (*p != '"')
				return -1;
			p++;
		} else
			while (*p && tchar((unsigned char)*p))
				p++;
	}
	return -1;
}

/* The end of the line starting at p (before CRLF or LF), NULL none
 * before e; *next past it. */
static const unsigned char *
line_end(const unsigned char *p, const unsigned char *e,
    const unsigned char **next)
{
	const unsigned char *lf = memchr(p, '\n', (size_t)(e - p));

	if (lf == NULL)
		return NULL;
	*next = lf + 1;
	return lf > p && lf[-1] == '\r' ? lf - 1 : lf;
}

/* A parameter value of a Content-Disposition line [p, e): token or
 * quoted string; the value's span, *after past it. */
static int
param_value(const unsigned char *p, const unsigned char *e,
    const unsigned char **v, size_t *vlen, const unsigned char **after)
{
	if (p < e && *p == '"') {
		const unsigned char *s = ++p;

		while (p < e && *p != '"') {
			if (*p == '\\' && p + 1 < e)
				p++;
			p++;
		}
		if (p >= e)
			return -1;
		*v = s;
		*vlen = (size_t)(p - s);
		*after = p + 1;
		return 0;
	}
	*v = p;
	while (p < e && tchar(*p))
		p++;
	if (p == *v)
		return -1;
	*vlen = (size_t)(p - *v);
	*after = p;
	return 0;
}

static int
disposition(const unsigned char *p, const unsigned char *e,
    struct xd_mp_part *part)
{
	int have_name = 0;

	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	if ((size_t)(e - p) < 9 || strncasecmp((const char *)p, "form-data",
	    9) != 0)
		return -1;
	p += 9;
	for (;;) {
		const unsigned char *ks, *v, *after;
		size_t kl, vl;

		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		if (p == e)
			break;
		if (*p != ';')
			return -1;
		p++;
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		ks = p;
		while (p < e && tchar(*p) && *p != '*')
			p++;
		kl = (size_t)(p - ks);
		if (p < e && *p == '*')       /* filename*=: RFC 5987 */
			p++;
		if (kl == 0 || p >= e || *p != '=')
			return -1;
		p++;
		if (param_value(p, e, &v, &vl, &after) != 0)
			return -1;
		p = after;
		if (kl == 4 && strncasecmp((const char *)ks, "name", 4) == 0) {
			if (have_name)
				return -1;
			have_name = 1;
			part->name = (const char *)v;
			part->nlen = vl;
		} else if (kl == 8 && strncasecmp((const char *)ks, "filename",
		    8) == 0 && part->filename == NULL) {
			part->filename = (const char *)v;
			part->fnlen = vl;
		}
	}
	return have_name ? 0 : -1;
}

int
xd_mp_parse(const unsigned char *body, size_t len, const char *boundary,
    struct xd_mp_part *parts, size_t max, size_t *n, const char **why)
{
	const unsigned char *e = body + len, *p, *d;
	char delim[BOUNDARY_MAX + 5];
	size_t dl, bl = strlen(boundary);

	*n = 0;
	if (bl == 0 || bl > BOUNDARY_MAX) {
		*why = "a boundary of 1 to 70 characters";
		return -1;
	}
	/* "\r\n--B" */
	dl = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
	/* the first delimiter: at the start, or after a preamble */
	if (len >= dl - 2 && memcmp(body, delim + 2, dl - 2) == 0)
		p = body + dl - 2;
	else {
		d = memmem(body, len, delim, dl);
		if (d == NULL) {
			*why = "no boundary in the body";
			return -1;
		}
		p = d + dl;
	}
	for (;;) {
		struct xd_mp_part part;
		const unsigned char *le, *next, *data;
		int lines = 0, have_cd = 0;

		/* after a delimiter: "--" ends, else LWS CRLF */
		if (e - p >= 2 && p[0] == '-' && p[1] == '-')
			return 0;       /* the epilogue is ignored */
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		if ((le = line_end(p, e, &next)) == NULL || le != p) {
			*why = "a delimiter not followed by a line end";
			return -1;
		}
		p = next;
		memset(&part, 0, sizeof(part));
		/* headers up to an empty line */
		for (;;) {
			const unsigned char *colon;

			if ((le = line_end(p, e, &next)) == NULL) {
				*why = "a part's headers do not end";
				return -1;
			}
			if (le == p) {
				p = next;
				break;
			}
			if (++lines > HEADER_LINES_MAX || *p == ' ' ||
			    *p == '\t') {
				*why = "too many or folded header lines";
				return -1;
			}
			colon = memchr(p, ':', (size_t)(le - p));
			if (colon == NULL || colon == p) {
				*why = "a header line without a name";
				return -1;
			}
			if (colon - p == 19 && strncasecmp((const char *)p,
			    "Content-Disposition", 19) == 0) {
				if (have_cd++ || disposition(colon + 1, le,
				    &part) != 0) {
					*why = "Content-Disposition: form-data; "
					    "name=... (once)";
					return -1;
				}
			} else if (colon - p == 12 && strncasecmp((const
			    char *)p, "Content-Type", 12) == 0) {
				const unsigned char *v = colon + 1;

				while (v < le && (*v == ' ' || *v == '\t'))
					v++;
				part.ctype = (const char *)v;
				part.ctlen = (size_t)(le - v);
			}
			p = next;
		}
		if (!have_cd) {
			*why = "a part without Content-Disposition";
			return -1;
		}
		data = p;
		d = memmem(p, (size_t)(e - p), delim, dl);
		if (d == NULL) {
			*why = "a part without its closing boundary";
			return -1;
		}
		part.data = data;
		part.len = (size_t)(d - data);
		if (*n >= max) {
			*why = "too many parts";
			return -1;
		}
		parts[(*n)++] = part;
		p = d + dl;
	}
}
