/*
 * transparent.c: connections the firewall redirected to sluiced.
 *
 * A sandbox client that ignores HTTP_PROXY dials the origin itself; the
 * table's nat prerouting chain sends its TCP 80 and 443 here.  The
 * source address names the session (as on the TCP listener), conntrack
 * the original destination.  Port 80 (any port not in tls.sni_ports) is
 * read as HTTP by conn.c with the Host header as the target; a TLS port
 * waits here for the ClientHello and takes the name from its SNI.
 * Either way the decision is the one a CONNECT or absolute-form request
 * for name:port would get, prompts included, and sluiced resolves the
 * name and dials what it resolved: never the original address, so a
 * forged SNI or Host cannot reach an address its name does not have.
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proxy/relay/relay-int.h"
#include "proxy/lib/sni.h"
#include "proxy/lib/tproxy.h"

static int
tls_port(uint16_t port)
{
	return cfg_port_in(px.cfg->sni_ports, px.cfg->nsni_ports, port);
}

enum pol_reason
px_tp_setup(struct px_conn *c, int fd)
{
	switch (tp_orig_dst(fd, &c->tp_dst, &c->tp_port)) {
	case 0:
		break;
	case 1:
		/* dialled directly: the Host or SNI would be decided for
		 * the listener's own port, a destination the client never
		 * had.  Refused before any decision, with an HTTP answer
		 * (a client that dials a proxy port speaks HTTP); the
		 * record keeps orig_dst. */
		return POL_R_SELF_TARGET;
	default:
		px_log(PX_WARN, "%s: conn %llu (%s): no original destination: "
		    "%s", __func__, (unsigned long long)c->id, c->peer,
		    strerror(errno));
		c->tp_port = 0;
		return POL_R_BAD_TARGET;
	}
	c->tp_tls = tls_port(c->tp_port);
	return POL_R_NONE;
}

static void
decide(struct px_conn *c)
{
	struct px_session *s = c->session;

	if (PX_GONE(c))
		return;
	if (!px_conn_admissible(c, s))
		return;
	if (!px_conn_decide(c, s) || PX_GONE(c))
		return;
	px_upstream_start(c);
}

static void
hello_read(struct bufferevent *bev, void *arg)
{
	struct px_conn *c = arg;
	enum pol_reason r;
	enum sni_status st;
	char name[256];

	if (PX_GONE(c) || c->state != PX_S_SNI)
		return;
	st = px_sni_peek(c, name, sizeof(name));
	switch (st) {
	case SNI_INCOMPLETE:
		return;
	case SNI_NONE:
		px_conn_refuse(c, POL_R_SNI_MISSING, "A client redirected to "
		    "sluice must name its host in the TLS SNI.");
		return;
	case SNI_NOT_TLS:
	case SNI_MALFORMED:
	case SNI_ECH:
	case SNI_OK:
		break;
	}
	bufferevent_disable(c->cli, EV_READ);
	evtimer_del(c->timer);
	if (st == SNI_ECH) {
		/* the outer name is not what the server is asked for: no
		 * decision on it, only the record of what was offered */
		snprintf(c->sni, sizeof(c->sni), "%s", name);
		px_conn_refuse(c, POL_R_ECH_REFUSED, NULL);
		return;
	}
	if (st != SNI_OK) {
		px_conn_refuse(c, POL_R_NOT_TLS, NULL);
		return;
	}
	snprintf(c->sni, sizeof(c->sni), "%s", name);
	r = pol_host_parse(name, strlen(name), 0, &c->target);
	if (r != POL_R_NONE) {
		memset(&c->target, 0, sizeof(c->target));
		px_conn_refuse(c, r, NULL);
		return;
	}
	c->target.port = c->tp_port;
	decide(c);
}

static void
hello_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;

	/* gone before its ClientHello: nothing to decide or record */
	px_conn_close(c, POL_R_NONE);
}

void
px_tp_tls_start(struct px_conn *c)
{
	struct timeval tv;

	clock_gettime(CLOCK_MONOTONIC, &c->t_start);
	/* what prompts, events and records call it: the same decision as
	 * a CONNECT to name:port */
	snprintf(c->method, sizeof(c->method), "CONNECT");
	c->nrequests = 1;
	c->state = PX_S_SNI;
	bufferevent_setcb(c->cli, hello_read, NULL, hello_event, c);
	bufferevent_setwatermark(c->cli, EV_READ, 0, SNI_MAX_HELLO);
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
	tv.tv_sec = px.cfg->sni_timeout_ms / 1000;
	tv.tv_usec = (px.cfg->sni_timeout_ms % 1000) * 1000;
	evtimer_del(c->timer);
	evtimer_add(c->timer, &tv);
}

void
px_tp_tls_established(struct px_conn *c)
{
	if (PX_GONE(c))
		return;
	if (px_conn_log_allow(c) != 0) {
		px_conn_refuse(c, POL_R_LOG_UNAVAILABLE, NULL);
		return;
	}
	/* the ClientHello waits in the client's input; the relay sends it
	 * first */
	px_tunnel_relay(c);
}
