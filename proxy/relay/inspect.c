/*
 * inspect.c: TLS inspection of the hosts of inspect.hosts.
 *
 * A CONNECT to such a host goes the usual way (decided, resolved, every
 * address checked, dialed); then, before the client hears 200, sluiced
 * opens its own TLS to the upstream and verifies it (the system's trust
 * store plus inspect.upstream_ca_file, the CONNECT's name checked with
 * SSL_set1_host): a certificate that does not verify is 502
 * upstream_tls.  After the 200 sluiced terminates the client's TLS with
 * a leaf for exactly that name, issued by the inspection CA's helper
 * (tlsca.h: the CA key never enters this process; each leaf's key is
 * made here and only its public half is sent), and reads HTTP/1.1
 * requests from it as conn.c reads plain ones: each request is parsed
 * by the same strict parser, decided on its own, and forwarded by
 * forward.c over the verified upstream TLS, which is kept between
 * requests and dialed again (and verified again) when it went away.
 *
 * Both legs are libevent's OpenSSL bufferevents over the sockets
 * themselves (the socket bufferevent is given up for one that owns the
 * same descriptor): px_out_flush leaves their writing to libevent.
 * ALPN offers and accepts only http/1.1.
 *
 * Leaves are kept in a bounded LRU (inspect.leaf_cache), looked up by
 * name; one near its end is made again.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "proxy/relay/relay-int.h"
#include "proxy/lib/tlsca.h"

struct leaf {
	char name[TLSCA_NAME_MAX + 1];
	X509 *cert;
	EVP_PKEY *key;
	time_t renew_at;                 /* made again from then on */
	TAILQ_ENTRY(leaf) entry;
};

static struct {
	int on;
	int ca_fd;
	X509 *ca;
	char *ca_pem;                    /* the same, as PEM */
	struct pol_hostset *hosts;
	char **names;                    /* inspect.hosts as given */
	size_t nnames;
	SSL_CTX *srv;                    /* toward the client */
	SSL_CTX *up;                     /* toward the upstream */
	TAILQ_HEAD(leaf_head, leaf) leaves; /* most recently used first */
	size_t nleaves, max_leaves;
	uint64_t made, hits;
} in = { .ca_fd = -1, .leaves = TAILQ_HEAD_INITIALIZER(in.leaves) };

static const unsigned char alpn_h1[] = "\x08http/1.1";

static const char *
ssl_err(void)
{
	static char buf[200];
	unsigned long e = ERR_peek_last_error();

	if (e == 0)
		snprintf(buf, sizeof(buf), "connection closed");
	else
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return buf;
}

static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *cli, unsigned int clilen, void *arg)
{
	unsigned char *o;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&o, outlen, alpn_h1, sizeof(alpn_h1) - 1,
	    cli, clilen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;   /* no ALPN: HTTP/1.1 anyway */
	*out = o;
	return SSL_TLSEXT_ERR_OK;
}

int
px_inspect_init(const struct cfg *c, int ca_fd, const char *ca_pem,
    char *err, size_t errlen)
{
	BIO *b;
	size_t i;

	if (c->inspect.nhosts == 0)
		return 0;
	in.hosts = pol_hostset_new();
	if (in.hosts == NULL)
		return errf(err, errlen, "out of memory");
	in.names = calloc(c->inspect.nhosts, sizeof(*in.names));
	if (in.names == NULL)
		return errf(err, errlen, "out of memory");
	for (i = 0; i < c->inspect.nhosts; i++) {
		if (pol_hostset_add(in.hosts, c->inspect.hosts[i]) != 0)
			return errf(err, errlen, "inspect.hosts: bad %s",
			    c->inspect.hosts[i]);
		if ((in.names[i] = strdup(c->inspect.hosts[i])) == NULL)
			return errf(err, errlen, "out of memory");
		in.nnames = i + 1;
	}
	b = BIO_new_mem_buf(ca_pem, -1);
	in.ca = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	if (in.ca == NULL)
		return errf(err, errlen, "the CA helper sent no certificate");
	if ((in.ca_pem = strdup(ca_pem)) == NULL)
		return errf(err, errlen, "out of memory");

	in.srv = SSL_CTX_new(TLS_server_method());
	in.up = SSL_CTX_new(TLS_client_method());
	if (in.srv == NULL || in.up == NULL)
		return errf(err, errlen, "TLS: %s", ssl_err());
	SSL_CTX_set_min_proto_version(in.srv, TLS1_2_VERSION);
	SSL_CTX_set_options(in.srv, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* no tickets: nothing to keep per client, no write after the
	 * handshake that nobody asked for */
	SSL_CTX_set_num_tickets(in.srv, 0);
	SSL_CTX_set_session_cache_mode(in.srv, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_alpn_select_cb(in.srv, alpn_select, NULL);

	SSL_CTX_set_min_proto_version(in.up, TLS1_2_VERSION);
	SSL_CTX_set_options(in.up, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_verify(in.up, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_set_default_verify_paths(in.up) != 1)
		return errf(err, errlen, "TLS: the system trust store: %s",
		    ssl_err());
	if (c->inspect.upstream_ca_file != NULL &&
	    SSL_CTX_load_verify_locations(in.up, c->inspect.upstream_ca_file,
	    NULL) != 1)
		return errf(err, errlen, "inspect.upstream_ca_file %s: %s",
		    c->inspect.upstream_ca_file, ssl_err());
	if (SSL_CTX_set_alpn_protos(in.up, alpn_h1, sizeof(alpn_h1) - 1) != 0)
		return errf(err, errlen, "TLS: ALPN: %s", ssl_err());
	in.ca_fd = ca_fd;
	in.max_leaves = (size_t)c->inspect.leaf_cache;
	in.on = 1;
	return 0;
}

static void
leaf_free(struct leaf *l)
{
	X509_free(l->cert);
	EVP_PKEY_free(l->key);
	free(l);
}

void
px_inspect_cleanup(void)
{
	struct leaf *l;

	while ((l = TAILQ_FIRST(&in.leaves)) != NULL) {
		TAILQ_REMOVE(&in.leaves, l, entry);
		leaf_free(l);
	}
	in.nleaves = 0;
	SSL_CTX_free(in.srv);
	SSL_CTX_free(in.up);
	X509_free(in.ca);
	free(in.ca_pem);
	in.ca_pem = NULL;
	pol_hostset_free(in.hosts);
	for (; in.nnames > 0; in.nnames--)
		free(in.names[in.nnames - 1]);
	free(in.names);
	in.names = NULL;
	in.srv = in.up = NULL;
	in.ca = NULL;
	in.hosts = NULL;
	in.on = 0;
}

int
px_inspect_host(const struct pol_target *t)
{
	return in.on && t->kind == POL_HOST_NAME &&
	    pol_hostset_match(in.hosts, t->host, t->port, NULL, 0);
}

const char *
px_inspect_ca_pem(void)
{
	return in.on ? in.ca_pem : NULL;
}

int
px_inspect_covers(const char *pattern)
{
	return in.on && pol_host_pattern_covered((const char *const *)in.names,
	    in.nnames, pattern);
}

/* The leaf for name: from the cache, or made now (a key here, the
 * certificate from the helper).  NULL with err. */
static struct leaf *
leaf_get(const char *name, char *err, size_t errlen)
{
	struct leaf *l;
	time_t now = time(NULL);
	const ASN1_TIME *end;
	int days = 0, secs = 0;

	TAILQ_FOREACH(l, &in.leaves, entry)
		if (strcmp(l->name, name) == 0)
			break;
	if (l != NULL && now < l->renew_at) {
		in.hits++;
		if (l != TAILQ_FIRST(&in.leaves)) {
			TAILQ_REMOVE(&in.leaves, l, entry);
			TAILQ_INSERT_HEAD(&in.leaves, l, entry);
		}
		return l;
	}
	if (l != NULL) {
		TAILQ_REMOVE(&in.leaves, l, entry);
		in.nleaves--;
		leaf_free(l);
	}
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		errf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->key = EVP_EC_gen("P-256");
	if (l->key == NULL) {
		errf(err, errlen, "making a key: %s", ssl_err());
		leaf_free(l);
		return NULL;
	}
	l->cert = tlsca_request(in.ca_fd, name, l->key, err, errlen);
	if (l->cert == NULL) {
		leaf_free(l);
		return NULL;
	}
	if (X509_check_issued(in.ca, l->cert) != X509_V_OK) {
		errf(err, errlen, "the CA helper sent a certificate it did "
		    "not issue");
		leaf_free(l);
		return NULL;
	}
	/* made again a day before its end (or half way, if shorter) */
	end = X509_get0_notAfter(l->cert);
	if (ASN1_TIME_diff(&days, &secs, NULL, end) != 1)
		days = secs = 0;
	l->renew_at = now + ((long)days * 86400 + secs) -
	    (days >= 2 ? 86400 : ((long)days * 86400 + secs) / 2);
	in.made++;
	TAILQ_INSERT_HEAD(&in.leaves, l, entry);
	in.nleaves++;
	while (in.nleaves > in.max_leaves) {
		struct leaf *old = TAILQ_LAST(&in.leaves, leaf_head);

		TAILQ_REMOVE(&in.leaves, old, entry);
		in.nleaves--;
		leaf_free(old);
	}
	return l;
}

/* Give up the socket bufferevent *bevp for an OpenSSL one on the same
 * descriptor.  0, or -1 with *bevp NULL and the descriptor closed. */
static int
to_tls(struct bufferevent **bevp, SSL *ssl, enum bufferevent_ssl_state st)
{
	evutil_socket_t fd = bufferevent_getfd(*bevp);

	/* the old one must not close what the new one takes */
	bufferevent_setfd(*bevp, -1);
	bufferevent_free(*bevp);
	*bevp = bufferevent_openssl_socket_new(px.base, fd, ssl, st,
	    BEV_OPT_CLOSE_ON_FREE);
	if (*bevp == NULL) {
		SSL_free(ssl);
		close(fd);
		return -1;
	}
	/* many servers close without close_notify; bodies are framed by
	 * the HTTP parser, which finds a message cut short */
	bufferevent_openssl_set_allow_dirty_shutdown(*bevp, 1);
	return 0;
}

/* ---- the upstream leg ---- */

static void
up_tls_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	char detail[700];
	long vr;

	if (PX_GONE(c))
		return;
	if (what & BEV_EVENT_CONNECTED) {
		bufferevent_set_timeouts(c->up, NULL, NULL);
		c->up_tls = 1;
		snprintf(c->up_host, sizeof(c->up_host), "%s", c->target.host);
		c->up_port = c->target.port;
		/* keep the dialed address first: a kept connection reuses it */
		if (c->dialed_idx > 0) {
			c->checked[0] = c->checked[c->dialed_idx];
			c->dialed_idx = 0;
		}
		if (c->req->m == HTTP_M_CONNECT)
			px_tunnel_established(c);
		else
			px_forward_start(c);
		return;
	}
	vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
	if (vr != X509_V_OK)
		snprintf(detail, sizeof(detail), "The certificate of %s did "
		    "not verify: %s.", c->target.host,
		    X509_verify_cert_error_string(vr));
	else if (what & BEV_EVENT_TIMEOUT)
		snprintf(detail, sizeof(detail), "The TLS handshake with %s "
		    "timed out.", c->target.host);
	else
		snprintf(detail, sizeof(detail), "The TLS handshake with %s "
		    "failed: %s.", c->target.host, ssl_err());
	ERR_clear_error();
	px_log(PX_DEBUG, "%s: conn %llu: %s", __func__,
	    (unsigned long long)c->id, detail);
	px_conn_refuse(c, POL_R_UPSTREAM_TLS, detail);
}

void
px_inspect_upstream(struct px_conn *c)
{
	struct timeval tv;
	SSL *ssl;

	if (PX_GONE(c))
		return;
	ssl = SSL_new(in.up);
	if (ssl == NULL || SSL_set_tlsext_host_name(ssl, c->target.host) != 1 ||
	    SSL_set1_host(ssl, c->target.host) != 1) {
		SSL_free(ssl);
		ERR_clear_error();
		px_conn_refuse(c, POL_R_UPSTREAM_FAILED, NULL);
		return;
	}
	X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(ssl),
	    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (to_tls(&c->up, ssl, BUFFEREVENT_SSL_CONNECTING) != 0) {
		px_conn_refuse(c, POL_R_UPSTREAM_FAILED, NULL);
		return;
	}
	bufferevent_setcb(c->up, NULL, NULL, up_tls_event, c);
	tv.tv_sec = px.cfg->connect_timeout_ms / 1000;
	tv.tv_usec = (px.cfg->connect_timeout_ms % 1000) * 1000;
	bufferevent_set_timeouts(c->up, &tv, &tv);
	bufferevent_enable(c->up, EV_READ | EV_WRITE);
}

/* ---- the client leg ---- */

static void
cli_tls_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	const char *sn;

	if (PX_GONE(c))
		return;
	if (!(what & BEV_EVENT_CONNECTED)) {
		px_log(PX_DEBUG, "%s: conn %llu: client TLS: %s", __func__,
		    (unsigned long long)c->id, ssl_err());
		px_conn_close(c, POL_R_NONE);
		return;
	}
	sn = ssl ? SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) : NULL;
	if (sn != NULL) {
		snprintf(c->sni, sizeof(c->sni), "%s", sn);
		if (strcasecmp(sn, c->target.host) != 0) {
			px_conn_close(c, POL_R_SNI_MISMATCH);
			return;
		}
	} else if (px.cfg->sni_check && cfg_port_in(px.cfg->sni_ports,
	    px.cfg->nsni_ports, c->target.port)) {
		px_conn_close(c, POL_R_SNI_MISSING);
		return;
	}
	c->cli_tls = 1;
	c->insp = c->target;
	c->insp_answered = c->answered;
	c->insp_answer = c->answer;
	/* the CONNECT's records end here; each request inside has its own
	 * decision and close */
	px_conn_log_close(c, POL_R_NONE);
	px_conn_next_request(c);
}

int
px_inspect_client(struct px_conn *c)
{
	char err[300];
	struct leaf *l;
	SSL *ssl;

	if (PX_GONE(c))
		return -1;
	if (evbuffer_get_length(bufferevent_get_input(c->cli)) != 0) {
		/* a ClientHello sent before the 200: the TLS bufferevent
		 * reads the socket, not what the plain one already read */
		px_log(PX_DEBUG, "%s: conn %llu: bytes before the 200",
		    __func__, (unsigned long long)c->id);
		px_conn_close(c, POL_R_BAD_REQUEST);
		return -1;
	}
	if (evbuffer_get_length(bufferevent_get_output(c->cli)) != 0) {
		px_conn_close(c, POL_R_NONE);   /* the 200 did not leave */
		return -1;
	}
	l = leaf_get(c->target.host, err, sizeof(err));
	if (l == NULL) {
		px_log(PX_ERR, "inspect: %s: %s", c->target.host, err);
		px_conn_close(c, POL_R_UPSTREAM_FAILED);
		return -1;
	}
	ssl = SSL_new(in.srv);
	if (ssl == NULL || SSL_use_certificate(ssl, l->cert) != 1 ||
	    SSL_use_PrivateKey(ssl, l->key) != 1) {
		SSL_free(ssl);
		px_log(PX_ERR, "inspect: %s: %s", c->target.host, ssl_err());
		px_conn_close(c, POL_R_UPSTREAM_FAILED);
		return -1;
	}
	if (to_tls(&c->cli, ssl, BUFFEREVENT_SSL_ACCEPTING) != 0) {
		px_conn_close(c, POL_R_NONE);
		return -1;
	}
	/* the handshake has the ClientHello's deadline */
	c->state = PX_S_SNI;
	bufferevent_setcb(c->cli, NULL, NULL, cli_tls_event, c);
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
	return 0;
}
