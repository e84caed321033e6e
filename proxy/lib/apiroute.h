/*
 * apiroute.h: the route matching both daemons' APIs share (sluiced's
 * control API, sluice-execd's API and its OpenSandbox routes): a route
 * is a method and a path pattern whose "{name}" segments capture, and a
 * method's name as the Allow header and the audit records spell it.
 * Pure: no allocation, no daemon state.
 */
#ifndef SLUICE_APIROUTE_H
#define SLUICE_APIROUTE_H

#include <stddef.h>

#include <event2/http.h>

/* One captured segment: p[0..n) of the path matched, not decoded. */
struct apiroute_cap {
	const char *p;
	size_t n;
};

/*
 * Matches path against pattern segment by segment.  A "{name}" segment
 * captures one non-empty segment (no '/'); a last "{path}" captures the
 * non-empty rest, slashes and all.  Captures go to caps in order; a
 * pattern with more than ncap of them never matches.  1 when path
 * matches (*n captures), else 0.
 */
int apiroute_match(const char *pattern, const char *path,
    struct apiroute_cap *caps, size_t ncap, size_t *n);

/* "GET", "PATCH", ...; "?" for a method libevent does not name. */
const char *apiroute_method_name(enum evhttp_cmd_type m);

#endif /* SLUICE_APIROUTE_H */
