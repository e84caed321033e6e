/*
 * tunnel.c: CONNECT tunnels, and the byte relay the forwarder shares.
 *
 * Backpressure: a side stops reading while the other side's output holds
 * tunnel_buffer bytes or more, and starts again when it drained to half
 * of that, so a tunnel never buffers more than 2 x tunnel_buffer.  A
 * read watermark on the source alone would not bound anything, because
 * the read callback empties the source's input at once.
 *
 * Half-close: EOF from one side is passed on as shutdown(SHUT_WR) once
 * everything before it was written; the other direction keeps flowing.
 * The tunnel ends when both directions ended and both outputs are empty.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy/relay/relay-int.h"
#include "proxy/lib/sni.h"

static struct bufferevent *
other(struct px_conn *c, struct bufferevent *bev)
{
	return bev == c->cli ? c->up : c->cli;
}

static void
maybe_done(struct px_conn *c)
{
	if (PX_GONE(c))
		return;
	if (c->cli_eof && c->up_eof && c->cli_shut && c->up_shut)
		px_conn_close(c, POL_R_NONE);
}

/* Pass EOF on once everything before it has left. */
static void
pass_eof(struct px_conn *c, struct bufferevent *dst)
{
	int *shut = dst == c->up ? &c->up_shut : &c->cli_shut;
	int src_eof = dst == c->up ? c->cli_eof : c->up_eof;

	if (!src_eof || *shut ||
	    evbuffer_get_length(bufferevent_get_output(dst)) != 0)
		return;
	shutdown(bufferevent_getfd(dst), SHUT_WR);
	*shut = 1;
}

static void
relay_read(struct bufferevent *src, void *arg)
{
	struct px_conn *c = arg;
	struct bufferevent *dst = other(c, src);
	struct evbuffer *in = bufferevent_get_input(src);
	struct evbuffer *out = bufferevent_get_output(dst);
	size_t n = evbuffer_get_length(in);

	if (src == c->cli)
		c->bytes_up += n;
	else
		c->bytes_down += n;
	evbuffer_add_buffer(out, in);
	px_conn_touch(c);
	if (evbuffer_get_length(out) >= px.cfg->tunnel_buffer) {
		bufferevent_disable(src, EV_READ);
		bufferevent_setwatermark(dst, EV_WRITE,
		    px.cfg->tunnel_buffer / 2, 0);
	}
}

static void
relay_write(struct bufferevent *dst, void *arg)
{
	struct px_conn *c = arg;
	struct bufferevent *src = other(c, dst);
	int src_eof = src == c->cli ? c->cli_eof : c->up_eof;

	px_conn_touch(c);
	if (!src_eof && !(bufferevent_get_enabled(src) & EV_READ)) {
		bufferevent_enable(src, EV_READ);
		bufferevent_setwatermark(dst, EV_WRITE, 0, 0);
	}
	pass_eof(c, dst);
	maybe_done(c);
}

static void
relay_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;
	struct bufferevent *dst = other(c, bev);

	if (what & BEV_EVENT_EOF) {
		if (bev == c->cli)
			c->cli_eof = 1;
		else
			c->up_eof = 1;
		/* the write callback must fire when dst drains fully */
		bufferevent_setwatermark(dst, EV_WRITE, 0, 0);
		pass_eof(c, dst);
		maybe_done(c);
		return;
	}
	/* an error on either side ends the tunnel; no clean way to tell
	 * the other side more than a close */
	px_conn_close(c, POL_R_NONE);
}

void
px_tunnel_relay(struct px_conn *c)
{
	size_t chunk = px.cfg->tunnel_buffer < 65536 ?
	    px.cfg->tunnel_buffer : 65536;
	struct timeval tv = { px.cfg->idle_timeout_s, 0 };

	if (PX_GONE(c))
		return;
	c->state = PX_S_TUNNEL;
	/* a tunnel needs neither the head nor its parse: idle tunnels are
	 * what a broker holds by the thousand */
	free(c->req);
	c->req = NULL;
	free(c->head);
	c->head = NULL;
	evtimer_del(c->timer);
	evtimer_add(c->timer, &tv);
	if (px_splice_start(c) == 0 || PX_GONE(c))
		return;
	/* no pipes to be had: relay through the bufferevents */
	c->cli_eof = c->up_eof = c->cli_shut = c->up_shut = 0;
	bufferevent_setwatermark(c->cli, EV_READ, 0, 0);
	bufferevent_setwatermark(c->up, EV_READ, 0, 0);
	bufferevent_setcb(c->cli, relay_read, relay_write, relay_event, c);
	bufferevent_setcb(c->up, relay_read, relay_write, relay_event, c);
	bufferevent_set_max_single_read(c->cli, chunk);
	bufferevent_set_max_single_read(c->up, chunk);
	bufferevent_set_max_single_write(c->cli, chunk);
	bufferevent_set_max_single_write(c->up, chunk);
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
	bufferevent_enable(c->up, EV_READ | EV_WRITE);
	/* bytes the client sent right after its CONNECT head (often the
	 * ClientHello) are already waiting */
	if (evbuffer_get_length(bufferevent_get_input(c->cli)) > 0)
		relay_read(c->cli, c);
}

static int
sni_port(uint16_t port)
{
	return px.cfg->sni_check &&
	    cfg_port_in(px.cfg->sni_ports, px.cfg->nsni_ports, port);
}

static void
refuse_tunnel(struct px_conn *c, enum pol_reason why)
{
	if (PX_GONE(c))
		return;
	/* the allow record stands; this one says why it was cut */
	if (px_rec_decision(c, POL_DENY, why) != 0)
		px_log(PX_ERR, "%s: conn %llu: cannot write the record",
		    __func__, (unsigned long long)c->id);
	/* the 200 may still be queued: let the client see it, then the
	 * close, as it would had the hello come later */
	px_upstream_drop(c);
	px_conn_flush_close(c, why);
}

enum sni_status
px_sni_peek(struct px_conn *c, char *name, size_t namelen)
{
	struct evbuffer *in = bufferevent_get_input(c->cli);
	size_t len = evbuffer_get_length(in);
	size_t n = len < SNI_MAX_HELLO ? len : SNI_MAX_HELLO;
	enum sni_status st;

	if (len == 0)
		return SNI_INCOMPLETE;
	/* peek only: the ClientHello goes upstream unchanged */
	st = sni_parse(evbuffer_pullup(in, (ev_ssize_t)n), n, name, namelen);
	if (st == SNI_INCOMPLETE && len >= SNI_MAX_HELLO)
		return SNI_NOT_TLS;     /* no hello is that long */
	if (st == SNI_ECH && px.cfg->allow_ech)
		/* the admin accepts that the outer name is all we see */
		return name[0] != '\0' ? SNI_OK : SNI_NONE;
	return st;
}

static void
sni_read(struct bufferevent *bev, void *arg)
{
	struct px_conn *c = arg;
	struct pol_target t;
	char name[256];

	if (PX_GONE(c) || c->state != PX_S_SNI)
		return;
	switch (px_sni_peek(c, name, sizeof(name))) {
	case SNI_INCOMPLETE:
		return;
	case SNI_NONE:
		refuse_tunnel(c, POL_R_SNI_MISSING);
		return;
	case SNI_NOT_TLS:
	case SNI_MALFORMED:
		refuse_tunnel(c, POL_R_NOT_TLS);
		return;
	case SNI_ECH:
		/* the record shows the outer name the hello offered */
		snprintf(c->sni, sizeof(c->sni), "%s", name);
		refuse_tunnel(c, POL_R_ECH_REFUSED);
		return;
	case SNI_OK:
		break;
	}
	snprintf(c->sni, sizeof(c->sni), "%s", name);
	if (pol_host_parse(name, strlen(name), 0, &t) != POL_R_NONE ||
	    strcmp(t.host, c->target.host) != 0) {
		refuse_tunnel(c, POL_R_SNI_MISMATCH);
		return;
	}
	px_tunnel_relay(c);
}

static void
sni_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;

	px_conn_close(c, bev == c->cli ? POL_R_SNI_MISSING :
	    POL_R_UPSTREAM_FAILED);
}

void
px_tunnel_established(struct px_conn *c)
{
	struct timeval tv;

	if (PX_GONE(c))
		return;
	if (px_conn_log_allow(c) != 0) {
		px_conn_refuse(c, POL_R_LOG_UNAVAILABLE, NULL);
		return;
	}
	evbuffer_add(bufferevent_get_output(c->cli),
	    "HTTP/1.1 200 Connection established\r\n\r\n", 39);
	/* now, not on the next writable event: the client's first bytes
	 * (its ClientHello) come that much sooner */
	px_out_flush(c->cli);
	if (c->inspect) {
		(void)px_inspect_client(c);
		return;
	}
	if (!sni_port(c->target.port)) {
		px_tunnel_relay(c);
		return;
	}
	/* nothing flows upstream until the ClientHello names the host */
	c->state = PX_S_SNI;
	bufferevent_disable(c->up, EV_READ);
	bufferevent_setcb(c->up, NULL, NULL, sni_event, c);
	bufferevent_setcb(c->cli, sni_read, NULL, sni_event, c);
	bufferevent_setwatermark(c->cli, EV_READ, 0, SNI_MAX_HELLO);
	bufferevent_enable(c->cli, EV_READ);
	evtimer_del(c->timer);
	tv.tv_sec = px.cfg->sni_timeout_ms / 1000;
	tv.tv_usec = (px.cfg->sni_timeout_ms % 1000) * 1000;
	evtimer_add(c->timer, &tv);
	sni_read(c->cli, c);
}
