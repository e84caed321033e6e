/*
 * splice.c: zero-copy tunnel relay with splice(2).
 *
 * Once a tunnel is established and checked, its bytes never need to
 * enter user space: each direction moves socket -> pipe -> socket with
 * splice(2).  Bufferevents are dropped at that point (their reads ask
 * FIONREAD before every read and copy through evbuffers, which made a
 * tunnel cost four times the CPU of a direct copy).
 *
 * Backpressure: a direction reads from its source only while its pipe
 * has room; a full pipe waits for the destination to become writable.
 * So a tunnel holds at most two pipe buffers, and those are kernel
 * memory.  Pipes are made on the first byte, so idle tunnels hold none.
 *
 * Half-close: EOF from a source is passed on as shutdown(SHUT_WR) once
 * its pipe is empty; the tunnel ends when both directions have ended.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/relay/relay-int.h"

#define SPL_PIPE_SIZE (256 * 1024)

struct spl_dir {
	struct px_conn *c;
	struct spl_dir *peer;      /* the other direction */
	int src, dst;              /* sockets */
	int p[2];                  /* pipe, -1 until the first byte */
	size_t inpipe;             /* bytes in the pipe */
	size_t cap;                /* pipe capacity */
	struct evbuffer *pend;     /* bytes bufferevents still held */
	struct event *rd;          /* src readable */
	struct event *wr;          /* dst writable */
	int eof;                   /* src ended */
	int shut;                  /* dst shut for writing */
	uint64_t *count;
};

struct px_splice {
	struct spl_dir d[2];       /* 0: client -> upstream, 1: back */
	int cli_fd, up_fd;
};

static void dir_pump(struct spl_dir *d);

/*
 * Empty pipes of finished tunnels, kept for the next ones: a short
 * tunnel would otherwise spend more system calls making and sizing its
 * two pipes than relaying its bytes.  Bounded, so an idle broker holds
 * few descriptors.
 */
#define SPL_POOL_MAX 64
static int pool[SPL_POOL_MAX][2];
static size_t pool_cap[SPL_POOL_MAX];
static int npool;

static int
dir_pipe(struct spl_dir *d)
{
	int sz;

	if (d->p[0] >= 0)
		return 0;
	if (npool > 0) {
		npool--;
		d->p[0] = pool[npool][0];
		d->p[1] = pool[npool][1];
		d->cap = pool_cap[npool];
		return 0;
	}
	if (pipe2(d->p, O_NONBLOCK | O_CLOEXEC) != 0)
		return -1;
	/* a larger pipe means fewer wake-ups per byte on bulk tunnels;
	 * the kernel may give less, and says how much */
	sz = fcntl(d->p[1], F_SETPIPE_SZ, (int)px.cfg->tunnel_buffer <
	    SPL_PIPE_SIZE ? (int)px.cfg->tunnel_buffer : SPL_PIPE_SIZE);
	if (sz <= 0)
		sz = fcntl(d->p[1], F_GETPIPE_SZ);
	d->cap = sz > 0 ? (size_t)sz : 65536;
	return 0;
}

static void
dir_close_pipe(struct spl_dir *d)
{
	if (d->p[0] < 0)
		return;
	/* only an empty pipe may carry the next tunnel's bytes */
	if (d->inpipe == 0 && npool < SPL_POOL_MAX) {
		pool[npool][0] = d->p[0];
		pool[npool][1] = d->p[1];
		pool_cap[npool] = d->cap;
		npool++;
	} else {
		close(d->p[0]);
		close(d->p[1]);
	}
	d->p[0] = d->p[1] = -1;
}

/* At exit, so leak checkers see every descriptor closed. */
void
px_splice_cleanup(void)
{
	while (npool > 0) {
		npool--;
		close(pool[npool][0]);
		close(pool[npool][1]);
	}
}

static int
tunnel_done(const struct px_splice *s)
{
	return s->d[0].shut && s->d[1].shut;
}

/* Pass EOF on when nothing before it is left to write. */
static void
dir_maybe_shut(struct spl_dir *d)
{
	if (!d->eof || d->shut || d->inpipe != 0 ||
	    (d->pend != NULL && evbuffer_get_length(d->pend) != 0))
		return;
	/* when the other way is already shut, both sockets close next:
	 * the shutdown would tell the peer nothing the close does not */
	if (!d->peer->shut)
		shutdown(d->dst, SHUT_WR);
	d->shut = 1;
	event_del(d->wr);
	dir_close_pipe(d);
}

/* Write what the pipe (or the leftover buffer) holds; -1 on error. */
static int
dir_flush(struct spl_dir *d)
{
	ssize_t n;

	while (d->pend != NULL && evbuffer_get_length(d->pend) > 0) {
		n = evbuffer_write(d->pend, d->dst);
		if (n < 0)
			return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
		if (n == 0)
			return 0;
	}
	while (d->inpipe > 0) {
		n = splice(d->p[0], NULL, d->dst, NULL, d->inpipe,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0)
			return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
		if (n == 0)
			return -1;
		d->inpipe -= (size_t)n;
	}
	return 0;
}

/* Read what fits into the pipe; -1 on error. */
static int
dir_fill(struct spl_dir *d)
{
	ssize_t n;
	int rounds = 0;

	/* bounded: one busy tunnel must not starve the others; the
	 * level-triggered event fires again for the rest */
	while (!d->eof && d->inpipe < d->cap && rounds++ < 8) {
		size_t asked, want;

		if (dir_pipe(d) != 0)
			return -1;
		asked = d->cap - d->inpipe;
		n = splice(d->src, NULL, d->p[1], NULL, asked,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -1;
		}
		if (n == 0) {
			d->eof = 1;
			break;
		}
		d->inpipe += (size_t)n;
		*d->count += (uint64_t)n;
		want = (size_t)n;
		/* push it on at once: a short message waits for nobody */
		if (dir_flush(d) != 0)
			return -1;
		if (d->inpipe > 0)
			break;   /* the destination is full: wait for it */
		/* a short read drained the socket: asking again would only
		 * return EAGAIN; the level-triggered event says when more
		 * arrives */
		if (want < asked)
			break;
	}
	return 0;
}

/* Arm exactly the events this direction waits for. */
static void
dir_arm(struct spl_dir *d)
{
	int pending = d->inpipe > 0 ||
	    (d->pend != NULL && evbuffer_get_length(d->pend) > 0);

	if (pending && !d->shut)
		event_add(d->wr, NULL);
	else
		event_del(d->wr);
	if (!d->eof && !pending)
		event_add(d->rd, NULL);
	else
		event_del(d->rd);
}

static void
dir_pump(struct spl_dir *d)
{
	struct px_conn *c = d->c;
	struct px_splice *s = c->spl;

	if (dir_flush(d) != 0 || dir_fill(d) != 0) {
		px_conn_close(c, POL_R_NONE);
		return;
	}
	dir_maybe_shut(d);
	if (tunnel_done(s)) {
		px_conn_close(c, POL_R_NONE);
		return;
	}
	dir_arm(d);
	px_conn_touch(c);
}

static void
on_event(evutil_socket_t fd, short what, void *arg)
{
	dir_pump(arg);
}

static int
dir_init(struct spl_dir *d, struct px_conn *c, int src, int dst,
    struct evbuffer *held, uint64_t *count)
{
	d->c = c;
	d->src = src;
	d->dst = dst;
	d->p[0] = d->p[1] = -1;
	d->cap = 65536;            /* until the pipe says what it holds */
	d->count = count;
	if (held != NULL && evbuffer_get_length(held) > 0) {
		d->pend = evbuffer_new();
		if (d->pend == NULL)
			return -1;
		evbuffer_add_buffer(d->pend, held);
	}
	d->rd = event_new(px.base, src, EV_READ | EV_PERSIST, on_event, d);
	d->wr = event_new(px.base, dst, EV_WRITE | EV_PERSIST, on_event, d);
	return d->rd != NULL && d->wr != NULL ? 0 : -1;
}

static void
dir_free(struct spl_dir *d)
{
	if (d->rd)
		event_free(d->rd);
	if (d->wr)
		event_free(d->wr);
	if (d->pend)
		evbuffer_free(d->pend);
	dir_close_pipe(d);
}

/* Take the socket out of its bufferevent without closing it. */
static int
steal_fd(struct bufferevent *bev)
{
	int fd = bufferevent_getfd(bev);

	bufferevent_disable(bev, EV_READ | EV_WRITE);
	bufferevent_setfd(bev, -1);
	return fd;
}

/*
 * Switch an established tunnel from bufferevents to splice.  Bytes the
 * bufferevents still hold (the 200 not yet written, early client bytes)
 * are written first.  Returns -1 if the switch failed (the connection is
 * left as it was).
 */
int
px_splice_start(struct px_conn *c)
{
	struct px_splice *s;
	struct evbuffer *to_up, *to_cli;

	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -1;
	/* what the client sent after its head goes upstream first; what
	 * is queued for the client (the 200) goes to the client first */
	to_up = evbuffer_new();
	to_cli = evbuffer_new();
	if (to_up == NULL || to_cli == NULL)
		goto fail;
	/* a socket bufferevent freezes the start of its output so only it
	 * drains it; these bufferevents are about to go */
	evbuffer_unfreeze(bufferevent_get_output(c->cli), 1);
	evbuffer_unfreeze(bufferevent_get_output(c->up), 1);
	c->bytes_up += evbuffer_get_length(bufferevent_get_input(c->cli));
	evbuffer_add_buffer(to_up, bufferevent_get_input(c->cli));
	evbuffer_add_buffer(to_up, bufferevent_get_output(c->up));
	evbuffer_add_buffer(to_cli, bufferevent_get_output(c->cli));
	c->bytes_down += evbuffer_get_length(bufferevent_get_input(c->up));
	evbuffer_add_buffer(to_cli, bufferevent_get_input(c->up));
	s->cli_fd = steal_fd(c->cli);
	s->up_fd = steal_fd(c->up);
	bufferevent_free(c->cli);
	bufferevent_free(c->up);
	c->cli = c->up = NULL;
	c->spl = s;
	if (dir_init(&s->d[0], c, s->cli_fd, s->up_fd, to_up,
	    &c->bytes_up) != 0 ||
	    dir_init(&s->d[1], c, s->up_fd, s->cli_fd, to_cli,
	    &c->bytes_down) != 0) {
		evbuffer_free(to_up);
		evbuffer_free(to_cli);
		px_conn_close(c, POL_R_NONE);
		return 0;   /* closed: nothing left to fall back to */
	}
	evbuffer_free(to_up);
	evbuffer_free(to_cli);
	s->d[0].peer = &s->d[1];
	s->d[1].peer = &s->d[0];
	c->state = PX_S_TUNNEL;
	/* write what the bufferevents held; no read yet: the client has
	 * rarely sent more than its head before it saw the 200 */
	if (dir_flush(&s->d[0]) != 0 || dir_flush(&s->d[1]) != 0) {
		px_conn_close(c, POL_R_NONE);
		return 0;
	}
	dir_arm(&s->d[0]);
	dir_arm(&s->d[1]);
	return 0;
fail:
	if (to_up)
		evbuffer_free(to_up);
	if (to_cli)
		evbuffer_free(to_cli);
	free(s);
	return -1;
}

void
px_splice_free(struct px_splice *s)
{
	if (s == NULL)
		return;
	dir_free(&s->d[0]);
	dir_free(&s->d[1]);
	close(s->cli_fd);
	close(s->up_fd);
	free(s);
}
