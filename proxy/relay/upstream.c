/*
 * upstream.c: resolve once, check every address, dial only checked ones.
 *
 * The addresses a connection dials are exactly those pol_check_addr
 * admitted from the one answer it got: nothing resolves the name again,
 * so a rebinding answer cannot slip in between the check and the connect.
 */
#include "sluice-config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>

#include "proxy/relay/relay-int.h"

static void connect_next(struct px_conn *c);

static void
to_sockaddr(const struct pol_addr *a, uint16_t port,
    struct sockaddr_storage *ss, int *len)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		memcpy(&in->sin_addr, a->a, 4);
		*len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		memcpy(&in6->sin6_addr, a->a, 16);
		*len = sizeof(*in6);
	}
}

/* Keep the admitted addresses; refuse when none is left. */
static void
check_addrs(struct px_conn *c)
{
	enum pol_reason r, worst = POL_R_PRIVATE_ADDRESS;
	enum pol_addr_class cls;
	size_t i;

	if (PX_GONE(c))
		return;
	c->nchecked = 0;
	for (i = 0; i < c->naddrs; i++) {
		r = pol_check_addr(px.pol, &c->addrs[i], &cls);
		if (r == POL_R_NONE)
			c->checked[c->nchecked++] = c->addrs[i];
		else if (r == POL_R_ADMIN_DENY)
			worst = r;
	}
	if (c->nchecked == 0) {
		px_conn_refuse(c, worst, NULL);
		return;
	}
	c->next_try = 0;
	c->last_fail = POL_R_UPSTREAM_FAILED;
	c->state = PX_S_CONNECT;
	connect_next(c);
}

static void
on_dns(void *arg, enum dns_status st, const struct pol_addr *addrs,
    size_t n, long elapsed_us)
{
	struct px_conn *c = arg;

	c->dnsq = NULL;
	px_count_dns(elapsed_us);
	if (st == DNS_TIMEOUT) {
		px_conn_refuse(c, POL_R_DNS_TIMEOUT, NULL);
		return;
	}
	if (st != DNS_OK || n == 0) {
		px_conn_refuse(c, POL_R_DNS_FAILED, st == DNS_NOTFOUND ?
		    "The name does not exist." : "The name could not be "
		    "resolved.");
		return;
	}
	if (n > DNS_MAX_ADDRS)
		n = DNS_MAX_ADDRS;
	memcpy(c->addrs, addrs, n * sizeof(*addrs));
	c->naddrs = n;
	check_addrs(c);
}

void
px_upstream_start(struct px_conn *c)
{
	if (PX_GONE(c))
		return;
	/* a fresh dial: a kept connection (a request answered after a
	 * prompt) is not the one it makes */
	px_upstream_drop(c);
	c->state = PX_S_RESOLVE;
	c->dialed_idx = -1;
	if (c->target.kind != POL_HOST_NAME) {
		c->addrs[0] = c->target.addr;
		c->naddrs = 1;
		check_addrs(c);
		return;
	}
	c->dnsq = dns_resolve(px.dns, c->target.host, on_dns, c);
	if (c->dnsq == NULL)
		px_conn_refuse(c, POL_R_DNS_FAILED, NULL);
}

void
px_upstream_drop(struct px_conn *c)
{
	if (c->up == NULL)
		return;
	px_forward_unwait(c);
	bufferevent_free(c->up);
	c->up = NULL;
	c->up_tls = 0;
	c->up_host[0] = '\0';
	c->up_port = 0;
}

void
px_upstream_cancel(struct px_conn *c)
{
	if (c->dnsq != NULL) {
		dns_cancel(c->dnsq);
		c->dnsq = NULL;
	}
}

static void
connected(struct px_conn *c)
{
	int one = 1;

	if (PX_GONE(c))
		return;
	c->dialed_idx = (int)c->next_try - 1;
	setsockopt(bufferevent_getfd(c->up), IPPROTO_TCP, TCP_NODELAY, &one,
	    sizeof(one));
	bufferevent_set_timeouts(c->up, NULL, NULL);
	px_conn_touch(c);
	if (c->inspect) {
		/* verified TLS first; it goes on from there */
		px_inspect_upstream(c);
	} else if (c->tp_tls) {
		px_tp_tls_established(c);
	} else if (c->req->m == HTTP_M_CONNECT) {
		px_tunnel_established(c);
	} else {
		snprintf(c->up_host, sizeof(c->up_host), "%s", c->target.host);
		c->up_port = c->target.port;
		/* keep the dialed address first: a kept connection reuses it */
		if (c->dialed_idx != 0) {
			c->checked[0] = c->checked[c->dialed_idx];
			c->dialed_idx = 0;
		}
		px_forward_start(c);
	}
}

static void
up_connect_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		connected(c);
		return;
	}
	c->last_fail = (what & BEV_EVENT_TIMEOUT) ?
	    POL_R_UPSTREAM_TIMEOUT : POL_R_UPSTREAM_FAILED;
	px_log(PX_DEBUG, "%s: conn %llu: connect failed (%s)", __func__,
	    (unsigned long long)c->id, pol_reason_name(c->last_fail));
	px_upstream_drop(c);
	connect_next(c);
}

static void
connect_next(struct px_conn *c)
{
	struct sockaddr_storage ss;
	struct timeval tv;
	int len;

	if (PX_GONE(c))
		return;
	while (c->next_try < c->nchecked) {
		const struct pol_addr *a = &c->checked[c->next_try++];

		to_sockaddr(a, c->target.port, &ss, &len);
		c->up = bufferevent_socket_new(px.base, -1,
		    BEV_OPT_CLOSE_ON_FREE);
		if (c->up == NULL)
			break;
		bufferevent_setcb(c->up, NULL, NULL, up_connect_event, c);
		tv.tv_sec = px.cfg->connect_timeout_ms / 1000;
		tv.tv_usec = (px.cfg->connect_timeout_ms % 1000) * 1000;
		bufferevent_set_timeouts(c->up, NULL, &tv);
		if (bufferevent_socket_connect(c->up, (struct sockaddr *)&ss,
		    len) == 0)
			return;   /* up_connect_event reports */
		px_upstream_drop(c);
		c->last_fail = POL_R_UPSTREAM_FAILED;
	}
	px_conn_refuse(c, c->last_fail, NULL);
}
