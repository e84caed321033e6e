/*
 * netns.c: are we in the host's network namespace?  Tests and tools that
 * change nftables refuse to run there.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "firewall/fw.h"

int
fw_in_host_netns(void)
{
	char self[64], host[64];
	const char *env;
	ssize_t n;

	n = readlink("/proc/self/ns/net", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	n = readlink("/proc/1/ns/net", host, sizeof(host) - 1);
	if (n > 0) {
		host[n] = '\0';
		return strcmp(self, host) == 0;
	}
	/* pid 1 may be unreadable (not dumpable, another user): only a
	 * namespace recorded by the caller before unshare will do */
	env = getenv("SLUICE_FW_HOST_NETNS");
	if (env == NULL || strncmp(env, "net:[", 5) != 0)
		return 1;
	return strcmp(self, env) == 0;
}
