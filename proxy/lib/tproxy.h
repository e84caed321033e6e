/*
 * tproxy.h: the pure parts of transparent mode (DESIGN.md "Firewall").
 *
 * The firewall redirects a sandbox's TCP 80 and 443 to sluiced's
 * transparent listener.  Such a connection carries no proxy request: its
 * original destination comes from conntrack (SO_ORIGINAL_DST), the name
 * from the TLS SNI or the Host header, and the session from the source
 * address, as on the TCP listener.  The name, not the original address,
 * is what policy decides and what sluiced resolves and dials, so a
 * spoofed SNI or Host reaches only what the name is allowed to reach.
 */
#ifndef SLUICE_TPROXY_H
#define SLUICE_TPROXY_H

#include <stdint.h>
#include <sys/socket.h>

#include "policy/policy.h"
#include "proxy/lib/http.h"

/* Address and port (host order) of an AF_INET or AF_INET6 sockaddr; a
 * v4-mapped IPv6 address is given as the IPv4 address it carries.
 * 0 / -1 (another family, short length). */
int tp_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len,
    struct pol_addr *a, uint16_t *port) SLUICE_MUSTCHECK;

/* The original destination of an accepted, redirected connection:
 * getsockopt SO_ORIGINAL_DST (IPv4, also for a v4 client on a dual-stack
 * socket) or IP6T_SO_ORIGINAL_DST (IPv6).  0; 1 when it is the socket's
 * own local address and port (nothing redirected it: the client dialled
 * the listener itself); -1 with errno (ENOENT: no conntrack entry). */
int tp_orig_dst(int fd, struct pol_addr *a, uint16_t *port) SLUICE_MUSTCHECK;

/* "198.51.100.10:443" or "[2001:db8::1]:80"; buf of 56 bytes or more. */
void tp_format_dst(const struct pol_addr *a, uint16_t port, char *buf,
    size_t len);

/*
 * The target of a request that arrived by redirect to orig_port: the
 * Host header names the host (origin form "GET /path"), or an absolute
 * form "http://host/path" does and Host must agree.  The port is always
 * the original destination's: a Host or URI naming another port is
 * refused (host_mismatch), as is a request without Host (bad_request),
 * CONNECT and asterisk form (bad_target).  *path points into req's
 * target.  Returns POL_R_NONE or the refusal.
 */
enum pol_reason tp_http_target(const struct http_msg *req, uint16_t orig_port,
    struct pol_target *t, const char **path, size_t *path_len);

#endif /* SLUICE_TPROXY_H */
