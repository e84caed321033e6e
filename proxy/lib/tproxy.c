/*
 * tproxy.c: original destination and request target of redirected
 * connections (tproxy.h).
 */
#include "sluice-config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "proxy/lib/tproxy.h"

/* <linux/netfilter_ipv4.h> and <linux/netfilter_ipv6/ip6_tables.h>
 * clash with the libc headers; the values are kernel ABI */
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

int
tp_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len,
    struct pol_addr *a, uint16_t *port)
{
	memset(a, 0, sizeof(*a));
	if (sa->sa_family == AF_INET && len >= (socklen_t)
	    sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;

		a->family = AF_INET;
		memcpy(a->a, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6 && len >= (socklen_t)
	    sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			a->family = AF_INET;
			memcpy(a->a, &in6->sin6_addr.s6_addr[12], 4);
		} else {
			a->family = AF_INET6;
			memcpy(a->a, &in6->sin6_addr, 16);
		}
		*port = ntohs(in6->sin6_port);
		return 0;
	}
	errno = EAFNOSUPPORT;
	return -1;
}

int
tp_orig_dst(int fd, struct pol_addr *a, uint16_t *port)
{
	struct sockaddr_storage local, orig;
	socklen_t len = sizeof(local);
	struct pol_addr la;
	uint16_t lport;

	if (getsockname(fd, (struct sockaddr *)&local, &len) != 0 ||
	    tp_addr_from_sockaddr((struct sockaddr *)&local, len, &la,
	    &lport) != 0)
		return -1;
	memset(&orig, 0, sizeof(orig));
	/* the conntrack entry is of the connection's family, which for a
	 * v4 client on a dual-stack socket is IPv4 */
	if (la.family == AF_INET) {
		len = sizeof(struct sockaddr_in);
		if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &len) != 0)
			return -1;
	} else {
		len = sizeof(struct sockaddr_in6);
		if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &orig,
		    &len) != 0)
			return -1;
	}
	if (tp_addr_from_sockaddr((struct sockaddr *)&orig, len, a, port) != 0)
		return -1;
	/* conntrack tracks connections nothing redirected too; theirs
	 * is the address the socket was reached at */
	if (a->family == la.family && *port == lport &&
	    memcmp(a->a, la.a, a->family == AF_INET ? 4 : 16) == 0)
		return 1;
	return 0;
}

void
tp_format_dst(const struct pol_addr *a, uint16_t port, char *buf, size_t len)
{
	char ip[48];

	pol_addr_format(a, ip, sizeof(ip));
	snprintf(buf, len, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip,
	    (unsigned)port);
}

enum pol_reason
tp_http_target(const struct http_msg *req, uint16_t orig_port,
    struct pol_target *t, const char **path, size_t *path_len)
{
	const struct http_header *hh;
	struct pol_target h;
	enum pol_reason r;

	memset(t, 0, sizeof(*t));
	*path = NULL;
	*path_len = 0;
	if (req->m == HTTP_M_CONNECT || req->target_len == 0)
		return POL_R_BAD_TARGET;
	if (req->host_idx < 0)
		return POL_R_BAD_REQUEST;
	hh = &req->headers[req->host_idx];
	/* the port defaults to the one the client dialed, not to 80 */
	r = pol_target_parse_hostport(hh->value, hh->value_len, orig_port, &h);
	if (r != POL_R_NONE)
		return r;
	if (req->target[0] == '/') {
		*t = h;
		*path = req->target;
		*path_len = req->target_len;
	} else {
		/* absolute form (a client that believes it talks to a proxy,
		 * or RFC 9112 3.2.2): the URI names the host, Host agrees */
		r = pol_target_parse_uri(req->target, req->target_len, t, path,
		    path_len);
		if (r != POL_R_NONE) {
			memset(t, 0, sizeof(*t));
			return r;
		}
		if (strcmp(h.host, t->host) != 0 || h.port != t->port) {
			memset(t, 0, sizeof(*t));
			return POL_R_HOST_MISMATCH;
		}
	}
	if (t->port != orig_port) {
		/* the connection goes where the client sent it: a name for
		 * another port would be decided for a port never dialed */
		memset(t, 0, sizeof(*t));
		return POL_R_HOST_MISMATCH;
	}
	return POL_R_NONE;
}
