/* httpauth.c: see httpauth.h. */

#include "sluice-config.h"

#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/keyvalq_struct.h>

#include "proxy/lib/httpauth.h"

const char *
httpauth_bearer(const struct evkeyvalq *h, size_t max)
{
	const struct evkeyval *kv;
	const char *v = NULL;
	size_t len;
	int n = 0;

	TAILQ_FOREACH(kv, h, next)
		if (strcasecmp(kv->key, "Authorization") == 0) {
			v = kv->value;
			n++;
		}
	if (n != 1 || strncasecmp(v, "Bearer ", 7) != 0)
		return NULL;
	for (v += 7; *v == ' '; v++)
		;
	len = strlen(v);
	return len == 0 || len > max ? NULL : v;
}
