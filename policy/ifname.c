/*
 * ifname.c: pol_ifname_check (policy.h): the one rule for an interface
 * name, shared by the configuration reader and the firewall.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

int
pol_ifname_check(const char *s, char *why, size_t whylen)
{
	size_t i, n = strlen(s);

	if (n == 0 || n >= POL_IFNAME_MAX) {
		snprintf(why, whylen, "an interface name has 1 to %d bytes",
		    POL_IFNAME_MAX - 1);
		return -1;
	}
	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0 ||
	    strcmp(s, "*") == 0) {
		snprintf(why, whylen, "\"%s\" is not an interface name", s);
		return -1;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '*' && i == n - 1)
			continue;
		/* the kernel refuses '/', ':' and white space; the rest is
		 * ours: what nft prints back unquoted inside "..." */
		if (c <= 0x20 || c >= 0x7f || c == '/' || c == ':' ||
		    c == '"' || c == '\\' || c == '*') {
			snprintf(why, whylen, "%s in an interface name",
			    c == '*' ? "'*' other than at the end" :
			    "a byte other than printable ASCII without "
			    "/ : \" \\");
			return -1;
		}
	}
	return 0;
}
