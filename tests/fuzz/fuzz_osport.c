/*
 * fuzz_osport.c: the answer heads the OpenSandbox port proxy reads from
 * a server inside a sandbox (xd_os_port_head in
 * sandbox-glue/executor/execd/exec_os_port.c), on arbitrary bytes: the
 * sandbox controls them.  Checked for an accepted head: the status is
 * 200..599; each header handed on has a name of visible ASCII without
 * ':' and a value without control characters; no hop-by-hop or access
 * header is handed on; a Content-Length handed on is 1..18 digits; the
 * reason has no CR or LF.  An input starting with 'U' is read as the
 * answer to an Upgrade (the rest): then only a 101 passes, and its
 * Upgrade header is handed on.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sandbox-glue/executor/execd/exec_os-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(void *arg, const char *name, const char *value)
{
	static const char *const hop[] = { "Connection", "Keep-Alive",
	    "Proxy-Connection", "Transfer-Encoding", "Upgrade", "TE",
	    "Trailer", "Host", "OpenSandbox-Secure-Access",
	    "X-EXECD-ACCESS-TOKEN", "OPEN-SANDBOX-API-KEY", NULL };
	const unsigned char *p;
	size_t i;
	int upgrade = *(int *)arg;

	if (!name[0] || strchr(name, ':') != NULL || strpbrk(value, "\r\n") !=
	    NULL)
		abort();
	for (p = (const unsigned char *)name; *p; p++)
		if (*p <= ' ' || *p >= 0x7f)
			abort();
	for (p = (const unsigned char *)value; *p; p++)
		if ((*p < ' ' && *p != '\t') || *p == 0x7f)
			abort();
	for (i = 0; hop[i] != NULL; i++)
		if (strcasecmp(name, hop[i]) == 0 && !(upgrade &&
		    strcasecmp(name, "Upgrade") == 0))
			abort();
	if (strcasecmp(name, "Content-Length") == 0 && (!value[0] ||
	    strlen(value) > 18 || value[strspn(value, "0123456789")] != '\0'))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *h = malloc(size + 1);
	const char *reason;
	long status;
	int upgrade = size > 0 && data[0] == 'U';

	if (h == NULL)
		return 0;
	memcpy(h, data + upgrade, size - (size_t)upgrade);
	h[size - (size_t)upgrade] = '\0';
	if (xd_os_port_head(h, upgrade, &status, &reason, check,
	    &upgrade) == 0) {
		if ((upgrade ? status != 101 : (status < 200 ||
		    status > 599)) || reason == NULL || strpbrk(reason,
		    "\r\n") != NULL)
			abort();
	}
	free(h);
	return 0;
}
