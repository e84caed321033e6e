/*
 * peer.c: identity keys from accepted peer addresses.
 */
#include "sluice-config.h"

#include <string.h>
#include <netinet/in.h>
#include <linux/vm_sockets.h>

#include "proxy/lib/peer.h"

int
peer_identify(const struct sockaddr *sa, socklen_t len, struct peer_id *out)
{
	memset(out, 0, sizeof(*out));
	if (sa == NULL || len < (socklen_t)sizeof(sa_family_t))
		return -1;
	switch (sa->sa_family) {
	case AF_UNIX:
		out->kind = PEER_UNIX;
		return 0;
	case AF_INET: {
		const struct sockaddr_in *in = (const void *)sa;

		if (len < (socklen_t)sizeof(*in))
			return -1;
		out->kind = PEER_IP;
		out->ip.family = AF_INET;
		memcpy(out->ip.a, &in->sin_addr, 4);
		out->port = ntohs(in->sin_port);
		return 0;
	}
	case AF_INET6: {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		if (len < (socklen_t)sizeof(*in6))
			return -1;
		out->kind = PEER_IP;
		out->port = ntohs(in6->sin6_port);
		/* a v4 client on a dual-stack listener is that v4 address,
		 * or a session keyed by 127.0.0.5 would never match */
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			out->ip.family = AF_INET;
			memcpy(out->ip.a, &in6->sin6_addr.s6_addr[12], 4);
		} else {
			out->ip.family = AF_INET6;
			memcpy(out->ip.a, &in6->sin6_addr, 16);
		}
		return 0;
	}
	case AF_VSOCK: {
		const struct sockaddr_vm *vm = (const void *)sa;

		if (len < (socklen_t)sizeof(*vm))
			return -1;
		out->kind = PEER_VSOCK;
		out->cid = vm->svm_cid;
		return 0;
	}
	default:
		return -1;
	}
}

int
peer_same_host(const struct sockaddr_storage *a,
    const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)(const void *)a)->
		    sin_addr, &((const struct sockaddr_in *)(const void *)b)->
		    sin_addr, sizeof(struct in_addr)) == 0;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->
		    sin6_addr, &((const struct sockaddr_in6 *)(const void *)b)->
		    sin6_addr, sizeof(struct in6_addr)) == 0;
	return 0;
}
