/*
 * peer.h: the identity an accepted socket carries.
 *
 * A sandbox never names its chat; the transport does (DESIGN.md,
 * "Transports and identity").  This turns an accepted peer address into
 * the key sluiced looks its session up by: the source IP of a TCP peer
 * (an IPv4 client on a dual-stack socket is its IPv4 address) or the
 * CID the host kernel stamped on a vsock peer.  Pure C, no I/O.
 */
#ifndef SLUICE_PEER_H
#define SLUICE_PEER_H

#include <stdint.h>
#include <sys/socket.h>

#include "policy/policy.h"

enum peer_kind { PEER_UNIX, PEER_IP, PEER_VSOCK };

struct peer_id {
	enum peer_kind kind;
	struct pol_addr ip;      /* PEER_IP */
	uint16_t port;           /* PEER_IP, host order */
	uint32_t cid;            /* PEER_VSOCK */
};

/* 0, or -1 for an address too short for its family or of another
 * family. */
int peer_identify(const struct sockaddr *sa, socklen_t len,
    struct peer_id *out) SLUICE_MUSTCHECK;

/* 1 when a and b are the same IPv4 or IPv6 host (ports aside): how the
 * two APIs' TCP listeners count connections per peer. */
int peer_same_host(const struct sockaddr_storage *a,
    const struct sockaddr_storage *b);

#endif /* SLUICE_PEER_H */
