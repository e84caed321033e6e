/*
 * sluice-shim.c: the in-sandbox relay.  Listens on loopback TCP and
 * passes each connection, byte for byte, to the session's Unix socket (or
 * to vsock) where sluiced applies the policy.  No policy here and nothing
 * beyond libc, so the one file can be built statically and copied into
 * any image.
 *
 * One poll(2) loop, nonblocking sockets, two bounded buffers per relay.
 */
#include "sluice-config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/vm_sockets.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "sandbox-glue/agent/agent.h"
#include "sandbox-glue/agent/agent_wire.h"

#define SHIM_NAME		"sluice-shim"
#define SHIM_DEFAULT_SOCKET	"/run/sluice/proxy.sock"
#define SHIM_DEFAULT_PORT	3128
#define SHIM_DEFAULT_MAX	256
#define SHIM_MAX_LISTENERS	16
#define SHIM_BUF_SIZE		(64 * 1024)
#define SHIM_ACCEPT_BURST	32
#define SHIM_SUN_PATH		sizeof(((struct sockaddr_un *)0)->sun_path)
/* vsock connects can hang; Unix ones finish at once */
#define SHIM_CONNECT_MS		10000
/* after EMFILE, the pending connection stays in the backlog: polling the
 * listener again at once would only spin */
#define SHIM_ACCEPT_PAUSE_MS	1000

enum { EX_SHIM_OK = 0, EX_SHIM_RUNTIME = 1, EX_SHIM_USAGE = 2 };
enum { SIDE_CLIENT = 0, SIDE_UPSTREAM = 1 };

struct shim_listener {
	int		 fd;
	char		 name[INET6_ADDRSTRLEN + 8];
};

/* Bytes read from one side, waiting to be written to the other. */
struct shim_half {
	char		 buf[SHIM_BUF_SIZE];
	size_t		 off;
	size_t		 len;
	int		 eof;		/* read() gave 0 */
	int		 shut;		/* that EOF passed on (SHUT_WR) */
};

struct shim_relay {
	int		 fd[2];
	struct shim_half half[2];	/* [i]: bytes read from fd[i] */
	int		 connecting;
	long long	 connect_deadline;
	char		 peer[INET6_ADDRSTRLEN + 8];
};

struct shim {
	struct shim_listener lis[SHIM_MAX_LISTENERS];
	size_t		 nlis;
	int		 lis_explicit;
	const char	*unix_path;
	unsigned int	 vsock_port;
	unsigned int	 vsock_cid;
	int		 use_vsock;
	size_t		 max_relays;
	struct shim_relay **relays;
	size_t		 nrelays;
	long long	 accept_paused_until;
	char		 target[80];
};

static volatile sig_atomic_t shim_stop;

static void
shim_log(const char *fmt, ...)
{
	va_list ap;
	char line[512];

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one write per line: concurrent writers do not interleave */
	dprintf(STDERR_FILENO, "%s: %s\n", SHIM_NAME, line);
}

static void
shim_usage(FILE *f)
{
	fprintf(f,
"usage: " SHIM_NAME " [-l addr:port | -L fd]... [-u path | -v port [-c cid]] [-m max]\n"
"Relay loopback TCP connections to the sluice session socket.\n"
"\n"
"  -l, --listen ADDR:PORT  listen here (repeatable; default 127.0.0.1:3128\n"
"                          and [::1]:3128)\n"
"  -L, --listen-fd FD      accept on this listening socket, inherited\n"
"                          (repeatable; instead of the default listeners)\n"
"  -u, --unix PATH         relay to this Unix socket (default " SHIM_DEFAULT_SOCKET ")\n"
"  -v, --vsock PORT        relay to AF_VSOCK on this port instead\n"
"  -c, --cid CID           vsock CID to connect to (default 2, the host)\n"
"  -m, --max-conns N       at most N relays at once (default %d)\n"
"  -h, --help              print this help and exit\n"
"  -V, --version           print the version and exit\n"
"\n"
"Exit status: 0 stopped by SIGTERM or SIGINT, 1 runtime error, 2 usage error.\n",
	    SHIM_DEFAULT_MAX);
}

static int
shim_parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > max)
		return -1;
	*out = v;
	return 0;
}

/* "1.2.3.4:P" or "[v6]:P"; numeric only, so no resolver is linked in. */
static int
shim_parse_addr(const char *arg, struct sockaddr_storage *ss, socklen_t *sslen)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *colon, *h = arg;
	size_t hlen;
	unsigned long port;
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	colon = strrchr(arg, ':');
	if (colon == NULL || shim_parse_uint(colon + 1, 65535, &port) == -1 ||
	    port == 0)
		return -1;
	hlen = (size_t)(colon - arg);
	if (*h == '[') {
		if (hlen < 2 || arg[hlen - 1] != ']')
			return -1;
		h++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= sizeof(host))
		return -1;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (h == arg && inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		*sslen = sizeof(*sin);
		return 0;
	}
	if (h != arg && inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		*sslen = sizeof(*sin6);
		return 0;
	}
	return -1;
}

static void
shim_addr_name(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s4->sin_port));
	} else
		snprintf(buf, len, "?");
}

/*
 * Returns 0, or -1 with errno set.  A default address the kernel cannot
 * offer (IPv6 disabled) is reported by the caller, not fatal.
 */
static int
shim_listen_one(struct shim *sh, const struct sockaddr *sa, socklen_t salen)
{
	struct shim_listener *l;
	int fd, one = 1, saved;

	if (sh->nlis == SHIM_MAX_LISTENERS) {
		errno = ENOSPC;
		return -1;
	}
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd == -1)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1)
		goto fail;
	if (sa->sa_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) == -1)
		goto fail;
	if (bind(fd, sa, salen) == -1 || listen(fd, SOMAXCONN) == -1)
		goto fail;
	l = &sh->lis[sh->nlis++];
	l->fd = fd;
	shim_addr_name(sa, l->name, sizeof(l->name));
	return 0;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

/*
 * An inherited socket that already listens (the ns backend's holder
 * makes the sandbox's listeners before it starts the shim, so that a
 * connection made the moment the sandbox is ready waits in the backlog
 * rather than being refused while the shim starts).  Returns 0, or -1
 * with errno set.
 */
static int
shim_listen_fd(struct shim *sh, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss), olen;
	struct shim_listener *l;
	int on = 0, fl;

	olen = sizeof(on);
	if (sh->nlis == SHIM_MAX_LISTENERS) {
		errno = ENOSPC;
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &olen) == -1 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) == -1)
		return -1;
	if (!on || (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
		errno = EINVAL;     /* not a listening TCP socket */
		return -1;
	}
	if ((fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) == -1)
		return -1;
	l = &sh->lis[sh->nlis++];
	l->fd = fd;
	shim_addr_name((struct sockaddr *)&ss, l->name, sizeof(l->name));
	return 0;
}

static int
shim_listen_defaults(struct shim *sh)
{
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(SHIM_DEFAULT_PORT);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (shim_listen_one(sh, (struct sockaddr *)&sin, sizeof(sin)) == -1) {
		shim_log("listen 127.0.0.1:%d: %s", SHIM_DEFAULT_PORT,
		    strerror(errno));
		return -1;
	}
	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(SHIM_DEFAULT_PORT);
	sin6.sin6_addr = in6addr_loopback;
	if (shim_listen_one(sh, (struct sockaddr *)&sin6, sizeof(sin6)) == -1) {
		if (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL) {
			shim_log("listen [::1]:%d: %s", SHIM_DEFAULT_PORT,
			    strerror(errno));
			return -1;
		}
		/* a sandbox without IPv6 still gets its IPv4 proxy */
		shim_log("listen [::1]:%d: %s (IPv4 only)", SHIM_DEFAULT_PORT,
		    strerror(errno));
	}
	return 0;
}

/* Returns the exit status to use, or -1 to go on. */
static int
shim_parse_args(struct shim *sh, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen",	required_argument, NULL, 'l' },
		{ "listen-fd",	required_argument, NULL, 'L' },
		{ "unix",	required_argument, NULL, 'u' },
		{ "vsock",	required_argument, NULL, 'v' },
		{ "cid",	required_argument, NULL, 'c' },
		{ "max-conns",	required_argument, NULL, 'm' },
		{ "help",	no_argument, NULL, 'h' },
		{ "version",	no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	struct sockaddr_storage ss;
	socklen_t sslen;
	unsigned long v;
	int ch, have_unix = 0, have_cid = 0;

	while ((ch = getopt_long(argc, argv, "l:L:u:v:c:m:hV", opts,
	    NULL)) != -1) {
		switch (ch) {
		case 'l':
			if (shim_parse_addr(optarg, &ss, &sslen) == -1) {
				shim_log("-l %s: want ADDR:PORT or [ADDR6]:PORT "
				    "with a numeric address", optarg);
				return EX_SHIM_USAGE;
			}
			if (shim_listen_one(sh, (struct sockaddr *)&ss,
			    sslen) == -1) {
				shim_log("listen %s: %s", optarg,
				    strerror(errno));
				return EX_SHIM_RUNTIME;
			}
			sh->lis_explicit = 1;
			break;
		case 'L':
			if (shim_parse_uint(optarg, INT_MAX, &v) == -1 ||
			    v < 3) {
				shim_log("-L %s: want a descriptor from 3 up",
				    optarg);
				return EX_SHIM_USAGE;
			}
			if (shim_listen_fd(sh, (int)v) == -1) {
				shim_log("listen-fd %s: %s", optarg,
				    errno == EINVAL ? "not a listening TCP "
				    "socket" : strerror(errno));
				return EX_SHIM_RUNTIME;
			}
			sh->lis_explicit = 1;
			break;
		case 'u':
			if (*optarg == '\0' || strlen(optarg) >= SHIM_SUN_PATH) {
				shim_log("-u %s: path empty or too long", optarg);
				return EX_SHIM_USAGE;
			}
			sh->unix_path = optarg;
			have_unix = 1;
			break;
		case 'v':
			if (shim_parse_uint(optarg, UINT32_MAX - 1, &v) == -1) {
				shim_log("-v %s: not a vsock port", optarg);
				return EX_SHIM_USAGE;
			}
			sh->vsock_port = (unsigned int)v;
			sh->use_vsock = 1;
			break;
		case 'c':
			if (shim_parse_uint(optarg, UINT32_MAX - 1, &v) == -1) {
				shim_log("-c %s: not a vsock CID", optarg);
				return EX_SHIM_USAGE;
			}
			sh->vsock_cid = (unsigned int)v;
			have_cid = 1;
			break;
		case 'm':
			if (shim_parse_uint(optarg, 65536, &v) == -1 || v == 0) {
				shim_log("-m %s: want 1 to 65536", optarg);
				return EX_SHIM_USAGE;
			}
			sh->max_relays = v;
			break;
		case 'h':
			shim_usage(stdout);
			return EX_SHIM_OK;
		case 'V':
			printf("%s %s\n", SHIM_NAME, PACKAGE_VERSION);
			return EX_SHIM_OK;
		default:
			shim_usage(stderr);
			return EX_SHIM_USAGE;
		}
	}
	if (optind != argc) {
		shim_log("unexpected argument %s", argv[optind]);
		return EX_SHIM_USAGE;
	}
	if (have_unix && sh->use_vsock) {
		shim_log("-u and -v exclude each other");
		return EX_SHIM_USAGE;
	}
	if (have_cid && !sh->use_vsock) {
		shim_log("-c needs -v");
		return EX_SHIM_USAGE;
	}
	if (sh->use_vsock)
		snprintf(sh->target, sizeof(sh->target), "vsock %u:%u",
		    sh->vsock_cid, sh->vsock_port);
	else
		snprintf(sh->target, sizeof(sh->target), "%s", sh->unix_path);
	return -1;
}

/*
 * Starts the connection to sluiced.  Returns the fd (maybe still
 * connecting, *connecting set) or -1 with errno set.
 */
static int
shim_connect_upstream(const struct shim *sh, int *connecting)
{
	struct sockaddr_un sun;
	struct sockaddr_vm svm;
	const struct sockaddr *sa;
	socklen_t salen;
	int fd, saved;

	if (sh->use_vsock) {
		memset(&svm, 0, sizeof(svm));
		svm.svm_family = AF_VSOCK;
		svm.svm_cid = sh->vsock_cid;
		svm.svm_port = sh->vsock_port;
		sa = (const struct sockaddr *)&svm;
		salen = sizeof(svm);
	} else {
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		memcpy(sun.sun_path, sh->unix_path, strlen(sh->unix_path));
		sa = (const struct sockaddr *)&sun;
		salen = sizeof(sun);
	}
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd == -1)
		return -1;
	*connecting = 0;
	if (connect(fd, sa, salen) == -1) {
		if (errno != EINPROGRESS) {
			saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		*connecting = 1;
	}
	return fd;
}

static void
shim_relay_free(struct shim *sh, size_t i)
{
	struct shim_relay *r = sh->relays[i];

	close(r->fd[SIDE_CLIENT]);
	close(r->fd[SIDE_UPSTREAM]);
	free(r);
	sh->relays[i] = sh->relays[--sh->nrelays];
}

static void
shim_accept_one(struct shim *sh, struct shim_listener *l)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	struct shim_relay *r;
	char peer[INET6_ADDRSTRLEN + 8];
	int fd, up, connecting, s;

	fd = accept4(l->fd, (struct sockaddr *)&ss, &sslen,
	    SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd == -1) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM) {
			shim_log("accept %s: %s (pausing %d ms)", l->name,
			    strerror(errno), SHIM_ACCEPT_PAUSE_MS);
			sh->accept_paused_until = ag_now_ms() +
			    SHIM_ACCEPT_PAUSE_MS;
		}
		return;
	}
	shim_addr_name((struct sockaddr *)&ss, peer, sizeof(peer));
	if (sh->nrelays >= sh->max_relays) {
		shim_log("refused %s: %zu relays open (-m)", peer, sh->nrelays);
		close(fd);
		return;
	}
	up = shim_connect_upstream(sh, &connecting);
	if (up == -1) {
		shim_log("connect %s: %s", sh->target, strerror(errno));
		if (errno == EMFILE || errno == ENFILE)
			sh->accept_paused_until = ag_now_ms() +
			    SHIM_ACCEPT_PAUSE_MS;
		close(fd);
		return;
	}
	r = malloc(sizeof(*r));
	if (r == NULL) {
		shim_log("relay %s: %s", peer, strerror(errno));
		close(up);
		close(fd);
		return;
	}
	r->fd[SIDE_CLIENT] = fd;
	r->fd[SIDE_UPSTREAM] = up;
	for (s = 0; s < 2; s++) {
		r->half[s].off = r->half[s].len = 0;
		r->half[s].eof = r->half[s].shut = 0;
	}
	r->connecting = connecting;
	r->connect_deadline = ag_now_ms() + SHIM_CONNECT_MS;
	memcpy(r->peer, peer, sizeof(peer));
	sh->relays[sh->nrelays++] = r;
}

/* What side s of relay r waits for; 0 means nothing. */
static short
shim_relay_events(const struct shim_relay *r, int s)
{
	const struct shim_half *in = &r->half[s], *out = &r->half[!s];
	short ev = 0;

	if (s == SIDE_UPSTREAM && r->connecting)
		return POLLOUT;
	if (!in->eof && in->off + in->len < SHIM_BUF_SIZE)
		ev |= POLLIN;
	if (out->len > 0 && !r->connecting)
		ev |= POLLOUT;
	return ev;
}

/* Returns -1 when the relay is over (error logged). */
static int
shim_relay_finish_connect(struct shim *sh, struct shim_relay *r)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(r->fd[SIDE_UPSTREAM], SOL_SOCKET, SO_ERROR, &err,
	    &len) == -1)
		err = errno;
	if (err != 0) {
		shim_log("connect %s: %s", sh->target, strerror(err));
		return -1;
	}
	r->connecting = 0;
	return 0;
}

static const char *
shim_side_name(int s)
{
	return s == SIDE_CLIENT ? "client" : "upstream";
}

/* One read from side s into its half.  Returns -1 on error (logged). */
static int
shim_relay_read(struct shim_relay *r, int s)
{
	struct shim_half *h = &r->half[s];
	ssize_t n;

	n = recv(r->fd[s], h->buf + h->off + h->len,
	    SHIM_BUF_SIZE - h->off - h->len, 0);
	if (n == -1) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 0;
		shim_log("relay %s: read %s: %s", r->peer, shim_side_name(s),
		    strerror(errno));
		return -1;
	}
	if (n == 0)
		h->eof = 1;
	h->len += (size_t)n;
	return 0;
}

/* One write to side s from the other side's half. */
static int
shim_relay_write(struct shim_relay *r, int s)
{
	struct shim_half *h = &r->half[!s];
	ssize_t n;

	n = send(r->fd[s], h->buf + h->off, h->len, MSG_NOSIGNAL);
	if (n == -1) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 0;
		shim_log("relay %s: write %s: %s", r->peer, shim_side_name(s),
		    strerror(errno));
		return -1;
	}
	h->off += (size_t)n;
	h->len -= (size_t)n;
	if (h->len == 0)
		h->off = 0;
	return 0;
}

/*
 * Passes each EOF on once its bytes are written.  Returns 1 when both
 * directions are done and the relay can go.
 */
static int
shim_relay_settle(struct shim_relay *r)
{
	int s;

	if (r->connecting)
		return 0;
	for (s = 0; s < 2; s++) {
		struct shim_half *h = &r->half[s];

		if (h->eof && h->len == 0 && !h->shut) {
			/* the peer may be gone already; the next read says so */
			(void)shutdown(r->fd[!s], SHUT_WR);
			h->shut = 1;
		}
	}
	return r->half[0].shut && r->half[1].shut;
}

/* Returns -1 when relay r is over. */
static int
shim_relay_service(struct shim *sh, struct shim_relay *r, const short rev[2],
    long long now)
{
	int s;

	if (r->connecting) {
		if (rev[SIDE_UPSTREAM] != 0) {
			if (shim_relay_finish_connect(sh, r) == -1)
				return -1;
		} else if (now >= r->connect_deadline) {
			shim_log("connect %s: %s", sh->target,
			    strerror(ETIMEDOUT));
			return -1;
		}
	}
	for (s = 0; s < 2; s++) {
		if ((rev[s] & (POLLIN | POLLHUP | POLLERR)) &&
		    (shim_relay_events(r, s) & POLLIN) &&
		    shim_relay_read(r, s) == -1)
			return -1;
	}
	for (s = 0; s < 2; s++) {
		if ((rev[s] & (POLLOUT | POLLHUP | POLLERR)) &&
		    (shim_relay_events(r, s) & POLLOUT) &&
		    shim_relay_write(r, s) == -1)
			return -1;
	}
	return shim_relay_settle(r) ? -1 : 0;
}

static int
shim_poll_timeout(const struct shim *sh, long long now)
{
	long long next = -1;
	size_t i;

	if (sh->accept_paused_until > now)
		next = sh->accept_paused_until;
	for (i = 0; i < sh->nrelays; i++) {
		const struct shim_relay *r = sh->relays[i];

		if (r->connecting && (next == -1 || r->connect_deadline < next))
			next = r->connect_deadline;
	}
	if (next == -1)
		return -1;
	return next <= now ? 0 : (int)(next - now);
}

static int
shim_run(struct shim *sh)
{
	struct pollfd *pfd;
	struct timespec ts, *tsp;
	sigset_t unblocked;
	size_t i, npfd, base;
	long long now;
	int timeout, n, rc = -1;

	pfd = calloc(SHIM_MAX_LISTENERS + 2 * sh->max_relays, sizeof(*pfd));
	if (pfd == NULL) {
		shim_log("%s", strerror(errno));
		return -1;
	}
	sigprocmask(SIG_BLOCK, NULL, &unblocked);
	sigdelset(&unblocked, SIGTERM);
	sigdelset(&unblocked, SIGINT);
	while (!shim_stop) {
		now = ag_now_ms();
		npfd = 0;
		for (i = 0; i < sh->nlis; i++) {
			pfd[npfd].fd = sh->accept_paused_until > now ?
			    -1 : sh->lis[i].fd;
			pfd[npfd++].events = POLLIN;
		}
		base = npfd;
		for (i = 0; i < sh->nrelays; i++) {
			int s;

			for (s = 0; s < 2; s++) {
				short ev = shim_relay_events(sh->relays[i], s);

				/* no interest: a negative fd keeps POLLHUP
				 * from waking us in a loop */
				pfd[npfd].fd = ev ? sh->relays[i]->fd[s] : -1;
				pfd[npfd].events = ev;
				pfd[npfd++].revents = 0;
			}
		}
		timeout = shim_poll_timeout(sh, now);
		tsp = NULL;
		if (timeout >= 0) {
			ts.tv_sec = timeout / 1000;
			ts.tv_nsec = (long)(timeout % 1000) * 1000000;
			tsp = &ts;
		}
		/* signals are blocked except inside ppoll: a SIGTERM cannot
		 * slip in between the check of shim_stop and the wait */
		n = ppoll(pfd, npfd, tsp, &unblocked);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			shim_log("poll: %s", strerror(errno));
			goto out;
		}
		now = ag_now_ms();
		/* relays first: accepting moves none of them */
		for (i = sh->nrelays; i-- > 0;) {
			short rev[2];

			rev[0] = pfd[base + 2 * i].revents;
			rev[1] = pfd[base + 2 * i + 1].revents;
			if (shim_relay_service(sh, sh->relays[i], rev,
			    now) == -1)
				shim_relay_free(sh, i);
		}
		for (i = 0; i < sh->nlis; i++) {
			int k;

			if (!(pfd[i].revents & POLLIN))
				continue;
			for (k = 0; k < SHIM_ACCEPT_BURST; k++) {
				size_t before = sh->nrelays;

				if (sh->accept_paused_until > now)
					break;
				errno = 0;
				shim_accept_one(sh, &sh->lis[i]);
				if (sh->nrelays == before &&
				    (errno == EAGAIN || errno == EWOULDBLOCK))
					break;
			}
		}
	}
	rc = 0;
out:
	free(pfd);
	return rc;
}

static void
shim_on_signal(int sig)
{
	(void)sig;
	shim_stop = 1;
}

static int
shim_signals(void)
{
	struct sigaction sa;
	sigset_t set;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	if (sigaction(SIGPIPE, &sa, NULL) == -1)
		return -1;
	sa.sa_handler = shim_on_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) == -1 ||
	    sigaction(SIGINT, &sa, NULL) == -1)
		return -1;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	return sigprocmask(SIG_BLOCK, &set, NULL);
}

/*
 * ---- helpers for sluice-run inside a sandbox ----
 *
 * The one program of ours that every sandbox has, so the few steps
 * sluice-run needs done inside, where the host cannot reach (gVisor),
 * are here: each is a mode named by the first argument and exits.
 *
 * --seccomp HEX -- CMD [ARG]...: install the seccomp program HEX
 * (struct sock_filter[], host byte order, compiled on the host by
 * sluice-run) and exec CMD.  Run before the drop to the sandbox user, so
 * that no process of the sandbox can trace it out of the way.  Exits 125
 * when the filter cannot be installed, 126/127 when CMD cannot be run.
 *
 * --agent UID GID HEX -- INIT [ARG]...: the gVisor backend's agent,
 * the container's first process (sandbox-glue/agent/agent.h).
 *
 * --read-file PATH MAX, --write-file PATH: copy the regular file PATH (at
 * most MAX bytes) to standard output, or standard input to it (made or
 * truncated).  The last component is never followed (O_NOFOLLOW), magic
 * links never (openat2 RESOLVE_NO_MAGICLINKS where the kernel has it),
 * and what was opened must be a regular file (fstat): a link to
 * /dev/zero, a fifo or a device is refused, a fifo without blocking.
 * Exits 0, 1 on error (message on standard error) or 3 when the file
 * had more than MAX bytes (MAX were written).  These run as the sandbox
 * user: sluice-run still caps what it takes from them.
 */
enum { EX_SHIM_CUT = 3, EX_SHIM_NOFILTER = 125 };

static int
shim_seccomp_main(int argc, char **argv)
{
	static struct sock_filter prog[4096];
	struct sock_fprog fp;
	const char *hex;
	long n;

	if (argc < 5 || strcmp(argv[3], "--") != 0) {
		shim_log("usage: --seccomp HEX -- CMD [ARG]...");
		return EX_SHIM_USAGE;
	}
	hex = argv[2];
	if ((n = ag_hex_decode(hex, prog, sizeof(prog),
	    sizeof(prog[0]))) <= 0) {
		shim_log("--seccomp: not a filter program");
		return EX_SHIM_NOFILTER;
	}
	fp.len = (unsigned short)((size_t)n / sizeof(prog[0]));
	fp.filter = prog;
	/* without CAP_SYS_ADMIN a filter needs no_new_privs; uid changes
	 * (setpriv) still work under it */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0) != 0) {
		shim_log("seccomp: %s", strerror(errno));
		return EX_SHIM_NOFILTER;
	}
	execvp(argv[4], argv + 4);
	shim_log("%s: %s", argv[4], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* open(2) of path without following its last component or any magic
 * link; -1 with errno. */
static int
shim_open_file(const char *path, int flags)
{
	flags |= O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
#ifdef SYS_openat2
	{
		struct open_how how;
		long fd;

		memset(&how, 0, sizeof(how));
		how.flags = (uint64_t)flags;
		how.mode = (flags & O_CREAT) ? 0666 : 0;
		how.resolve = RESOLVE_NO_MAGICLINKS;
		fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
		if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
			return (int)fd;
	}
#endif
	return open(path, flags, 0666);
}

static int
shim_write_all(int fd, const char *b, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, b, n)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int
shim_file_main(int argc, char **argv)
{
	static char buf[SHIM_BUF_SIZE];
	int wr = strcmp(argv[1], "--write-file") == 0, fd, in, out;
	unsigned long long max = 0, done = 0;
	const char *path;
	struct stat st;
	ssize_t n;

	if (argc != (wr ? 3 : 4) || argv[2][0] == '\0' || (!wr &&
	    (argv[3][0] < '0' || argv[3][0] > '9'))) {
		shim_log("usage: --read-file PATH MAX | --write-file PATH");
		return EX_SHIM_USAGE;
	}
	path = argv[2];
	if (!wr && ((max = strtoull(argv[3], NULL, 10)) > (1ull << 62))) {
		shim_log("--read-file: MAX too large");
		return EX_SHIM_USAGE;
	}
	/* not traceable by the sandbox's processes from here on */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if ((fd = shim_open_file(path, wr ? O_WRONLY | O_CREAT :
	    O_RDONLY)) < 0) {
		shim_log("%s: %s", path, errno == ELOOP ? "a symbolic link "
		    "(not followed)" : errno == ENXIO ? "not a regular file" :
		    strerror(errno));
		return EX_SHIM_RUNTIME;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		shim_log("%s: not a regular file", path);
		return EX_SHIM_RUNTIME;
	}
	if (fcntl(fd, F_SETFL, 0) != 0 || (wr && ftruncate(fd, 0) != 0)) {
		shim_log("%s: %s", path, strerror(errno));
		return EX_SHIM_RUNTIME;
	}
	in = wr ? STDIN_FILENO : fd;
	out = wr ? fd : STDOUT_FILENO;
	for (;;) {
		size_t want = sizeof(buf);

		/* one byte past max tells "cut" from "exactly max" */
		if (!wr && max - done + 1 < want)
			want = (size_t)(max - done + 1);
		if ((n = read(in, buf, want)) < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			shim_log("%s: %s", wr ? "stdin" : path,
			    strerror(errno));
			return EX_SHIM_RUNTIME;
		}
		if (n == 0)
			break;
		if (!wr && done + (size_t)n > max) {
			if (shim_write_all(out, buf, (size_t)(max - done)) != 0)
				break;
			shim_log("%s: more than %llu bytes, cut there", path,
			    max);
			return EX_SHIM_CUT;
		}
		if (shim_write_all(out, buf, (size_t)n) != 0) {
			shim_log("%s: %s", wr ? path : "stdout",
			    strerror(errno));
			return EX_SHIM_RUNTIME;
		}
		done += (size_t)n;
	}
	if (wr && close(fd) != 0) {
		shim_log("%s: %s", path, strerror(errno));
		return EX_SHIM_RUNTIME;
	}
	return n == 0 ? EX_SHIM_OK : EX_SHIM_RUNTIME;
}

/*
 * --log MAX: a sandbox's bounded log (the executor's sbx_log_start
 * spawns it): fd 0 the pipe the holder and the shim write to, fd 3 the
 * sandbox's directory.  Appends to init.log; before it would pass MAX
 * bytes, renames it to init.log.1 (replacing the older one) and starts
 * a new one, so a sandbox that logs without end keeps at most twice MAX
 * on the host.  Ends when every write end is closed.  A process of its
 * own so that the log outlives a daemon's restart; this small static
 * program, not a fork of the daemon, so that it costs an idle sandbox
 * little memory (issue 26).
 */
static int
shim_log_main(int argc, char **argv)
{
	char buf[4096], *end;
	struct stat st;
	long long max;
	off_t size = 0;
	ssize_t n, w;
	int fd;

	if (argc != 3 || (max = strtoll(argv[2], &end, 10)) <= 0 ||
	    *end != '\0') {
		shim_log("usage: %s --log MAX-BYTES", SHIM_NAME);
		return EX_SHIM_USAGE;
	}
	(void)prctl(PR_SET_NAME, "sluice-log", 0, 0, 0);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	fd = openat(3, "init.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
	    O_NOFOLLOW, 0600);
	if (fd >= 0 && fstat(fd, &st) == 0)
		size = st.st_size;
	for (;;) {
		n = read(0, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return EX_SHIM_OK;
		if (size + n > max) {
			/* by the directory fd: once destroy has removed the
			 * directory, nothing is made again */
			if (fd >= 0)
				close(fd);
			(void)renameat(3, "init.log", 3, "init.log.1");
			fd = openat(3, "init.log", O_WRONLY | O_CREAT |
			    O_APPEND | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
			size = 0;
		}
		/* without a file the bytes are still taken: the writers
		 * must never block on a full pipe */
		if (fd >= 0 && (w = write(fd, buf, (size_t)n)) > 0)
			size += w;
	}
}

int
main(int argc, char **argv)
{
	struct shim sh;
	size_t i;
	int rc;

	if (argc >= 2 && strcmp(argv[1], "--seccomp") == 0)
		return shim_seccomp_main(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "--agent") == 0)
		return agent_main(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "--log") == 0)
		return shim_log_main(argc, argv);
	if (argc >= 2 && (strcmp(argv[1], "--read-file") == 0 ||
	    strcmp(argv[1], "--write-file") == 0))
		return shim_file_main(argc, argv);

	memset(&sh, 0, sizeof(sh));
	sh.unix_path = SHIM_DEFAULT_SOCKET;
	sh.vsock_cid = VMADDR_CID_HOST;
	sh.max_relays = SHIM_DEFAULT_MAX;
	rc = shim_parse_args(&sh, argc, argv);
	if (rc != -1)
		goto out;
	rc = EX_SHIM_RUNTIME;
	if (!sh.lis_explicit && shim_listen_defaults(&sh) == -1)
		goto out;
	sh.relays = calloc(sh.max_relays, sizeof(*sh.relays));
	if (sh.relays == NULL) {
		shim_log("%s", strerror(errno));
		goto out;
	}
	if (shim_signals() == -1) {
		shim_log("signals: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < sh.nlis; i++)
		shim_log("listening on %s, relaying to %s", sh.lis[i].name,
		    sh.target);
	if (shim_run(&sh) == 0)
		rc = EX_SHIM_OK;
out:
	while (sh.nrelays > 0)
		shim_relay_free(&sh, sh.nrelays - 1);
	free(sh.relays);
	for (i = 0; i < sh.nlis; i++)
		close(sh.lis[i].fd);
	return rc;
}
