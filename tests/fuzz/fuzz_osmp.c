/*
 * fuzz_osmp.c: the multipart/form-data parser of the OpenSandbox API's
 * POST /files/upload (sandbox-glue/executor/execd/exec_os_mp.c) on
 * arbitrary bytes.  The input's first line is the Content-Type, the
 * rest the body.  Checked:
 *  - the boundary read from the Content-Type is 1 to 70 bytes without
 *    controls (spaces only when quoted);
 *  - every part lies inside the body, in order, without overlap; its
 *    name, filename and Content-Type inside the body too; no part's data
 *    holds the delimiter (CRLF "--" boundary);
 *  - a second parse gives the same parts (no hidden state);
 *  - each part's data framed again in a body of its own (a fixed name)
 *    parses back to exactly those bytes.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-glue/executor/execd/exec_os-int.h"

#define MAXP	64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
inside(const void *p, size_t n, const uint8_t *b, size_t len)
{
	const uint8_t *q = p;

	if (p == NULL)
		return;
	if (q < b || q + n > b + len)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xd_mp_part p[MAXP], p2[MAXP], r[1];
	char ct[512], bnd[80], delim[80];
	const uint8_t *nl = memchr(data, '\n', size < 511 ? size : 511);
	const uint8_t *body;
	const char *why = NULL;
	size_t cl, len, n = 0, n2 = 0, i, dl;
	uint8_t *copy;

	if (nl == NULL)
		return 0;
	cl = (size_t)(nl - data);
	memcpy(ct, data, cl);
	ct[cl] = '\0';
	if (strlen(ct) != cl)
		return 0;
	if (xd_mp_boundary(ct, bnd, sizeof(bnd)) != 0)
		return 0;
	if (strlen(bnd) == 0 || strlen(bnd) > 70)
		abort();
	for (i = 0; bnd[i]; i++)
		if ((unsigned char)bnd[i] < 0x20 || bnd[i] == 0x7f)
			abort();
	len = size - cl - 1;
	/* a copy of its own: reads past the body are ASan's to find */
	copy = malloc(len ? len : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, nl + 1, len);
	body = copy;
	if (xd_mp_parse(body, len, bnd, p, MAXP, &n, &why) != 0) {
		if (why == NULL)
			abort();
		free(copy);
		return 0;
	}
	dl = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", bnd);
	for (i = 0; i < n; i++) {
		inside(p[i].data, p[i].len, body, len);
		inside(p[i].name, p[i].nlen, body, len);
		inside(p[i].filename, p[i].fnlen, body, len);
		inside(p[i].ctype, p[i].ctlen, body, len);
		if (p[i].name == NULL)
			abort();
		if (i > 0 && p[i].data < p[i - 1].data + p[i - 1].len)
			abort();
		if (p[i].len >= dl && memmem(p[i].data, p[i].len, delim, dl) !=
		    NULL)
			abort();
	}
	if (xd_mp_parse(body, len, bnd, p2, MAXP, &n2, &why) != 0 || n2 != n)
		abort();
	for (i = 0; i < n; i++)
		if (p2[i].data != p[i].data || p2[i].len != p[i].len ||
		    p2[i].nlen != p[i].nlen || p2[i].name != p[i].name)
			abort();
	for (i = 0; i < n; i++) {
		static const char head[] = "\r\nContent-Disposition: form-data;"
		    " name=\"f\"\r\n\r\n";
		size_t bl = strlen(bnd), m = 0, rn = 0;
		uint8_t *f = malloc(2 + bl + sizeof(head) + p[i].len + dl + 8);

		if (f == NULL)
			break;
		memcpy(f + m, "--", 2);
		m += 2;
		memcpy(f + m, bnd, bl);
		m += bl;
		memcpy(f + m, head, sizeof(head) - 1);
		m += sizeof(head) - 1;
		memcpy(f + m, p[i].data, p[i].len);
		m += p[i].len;
		memcpy(f + m, delim, dl);
		m += dl;
		memcpy(f + m, "--\r\n", 4);
		m += 4;
		/* the boundary holds no CR, so the delimiter cannot start
		 * inside the data and end in the frame */
		if (xd_mp_parse(f, m, bnd, r, 1, &rn, &why) != 0 || rn != 1 ||
		    r[0].len != p[i].len || (p[i].len && memcmp(r[0].data,
		    p[i].data, p[i].len) != 0) || r[0].nlen != 1 ||
		    r[0].name[0] != 'f')
			abort();
		free(f);
	}
	free(copy);
	return 0;
}
