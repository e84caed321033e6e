/*
 * apiroute.c: apiroute_match and apiroute_method_name (apiroute.h).
 */
#include "sluice-config.h"

#include <string.h>

#include "proxy/lib/apiroute.h"

int
apiroute_match(const char *pattern, const char *path,
    struct apiroute_cap *caps, size_t ncap, size_t *n)
{
	const char *p = pattern, *s = path;

	*n = 0;
	while (*p != '\0') {
		if (*p == '{') {
			const char *pe = strchr(p, '}');
			size_t seg;
			int rest;

			if (pe == NULL || *n >= ncap)
				return 0;
			rest = strncmp(p, "{path}", 6) == 0 && pe[1] == '\0';
			seg = rest ? strlen(s) : strcspn(s, "/");
			if (seg == 0)
				return 0;
			caps[*n].p = s;
			caps[(*n)++].n = seg;
			s += seg;
			p = pe + 1;
			continue;
		}
		if (*p != *s)
			return 0;
		p++;
		s++;
	}
	return *s == '\0';
}

const char *
apiroute_method_name(enum evhttp_cmd_type m)
{
	switch (m) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	case EVHTTP_REQ_TRACE: return "TRACE";
	case EVHTTP_REQ_CONNECT: return "CONNECT";
	case EVHTTP_REQ_PATCH: return "PATCH";
	}
	return "?";
}
