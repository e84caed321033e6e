/*
 * agent_wire.c: frames of the agent's wire (agent_wire.h), strictly
 * parsed.  libc only.
 */
#include "sluice-config.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandbox-glue/agent/agent_wire.h"

extern char **environ;

uint32_t
ag_max(int type)
{
	switch (type) {
	case AG_SPAWN:
		return AG_SPAWN_MAX;
	case AG_STDIN: case AG_STDOUT: case AG_STDERR:
		return AG_DATA_MAX;
	case AG_SIGNAL:
		return 1;
	case AG_CONNECT:
		return 2;
	case AG_PTY: case AG_RESIZE: case AG_CONNECTED:
		return 4;
	case AG_KILL: case AG_RELEASE:
		return AG_TAG_MAX;
	case AG_STARTED:
		return 4;
	case AG_EXIT:
		return 2;
	case AG_ERROR:
		return AG_ERR_MAX;
	}
	return 0;
}

/* The 4-byte big-endian numbers: a header's length, STARTED,
 * CONNECTED. */
static void
be32_put(unsigned char p[4], uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t
be32_get(const unsigned char p[4])
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

void
ag_hdr_put(unsigned char h[AG_HDR], int type, uint32_t len)
{
	h[0] = (unsigned char)type;
	h[1] = h[2] = h[3] = 0;
	be32_put(h + 4, len);
}

int
ag_hdr_get(const unsigned char h[AG_HDR], int *type, uint32_t *len)
{
	uint32_t l = be32_get(h + 4);
	uint32_t max = ag_max(h[0]);

	if (h[1] != 0 || h[2] != 0 || h[3] != 0 || max == 0 || l > max)
		return -1;
	*type = h[0];
	*len = l;
	return 0;
}

int
ag_tag_ok(const char *p, size_t n)
{
	size_t i;

	if (n == 0 || n > AG_TAG_MAX || (n == 1 && p[0] == '.') ||
	    (n == 2 && p[0] == '.' && p[1] == '.'))
		return 0;
	for (i = 0; i < n; i++)
		if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' &&
		    p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9') ||
		    p[i] == '.' || p[i] == '_' || p[i] == '-'))
			return 0;
	return 1;
}

/* A decimal of at most 20 digits, no leading zero, that fits. */
static int
ag_num(const char *s, uint64_t *v)
{
	size_t n = strlen(s), i;
	uint64_t r = 0;

	if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (r > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return -1;
		r = r * 10 + (uint64_t)(s[i] - '0');
	}
	*v = r;
	return 0;
}

int
ag_spawn_parse(const char *p, size_t n, struct ag_spawn *s, char *err,
    size_t errlen)
{
	const char *f[6];
	uint64_t argc;
	size_t off = 0, k, nstr = 0;
	int i;

	memset(s, 0, sizeof(*s));
	if (n == 0 || p[n - 1] != '\0') {
		snprintf(err, errlen, "spawn: the last string is not ended");
		return -1;
	}
	for (k = 0; k < n; k++)
		if (p[k] == '\0')
			nstr++;
	if (nstr < 7) {
		snprintf(err, errlen, "spawn: too few fields");
		return -1;
	}
	for (i = 0; i < 6; i++) {
		f[i] = p + off;
		off += strlen(f[i]) + 1;
	}
	s->tag = f[0];
	s->cwd = f[1];
	if (!ag_tag_ok(s->tag, strlen(s->tag))) {
		snprintf(err, errlen, "spawn: bad tag");
		return -1;
	}
	if (s->cwd[0] != '/' || strlen(s->cwd) > AG_CWD_MAX) {
		snprintf(err, errlen, "spawn: cwd is not an absolute path");
		return -1;
	}
	if (ag_num(f[2], &s->fsize) != 0 || ag_num(f[3], &s->nofile) != 0 ||
	    ag_num(f[4], &s->nproc) != 0 || ag_num(f[5], &argc) != 0) {
		snprintf(err, errlen, "spawn: bad number");
		return -1;
	}
	if (argc < 1 || argc > AG_ARGC_MAX || argc > nstr - 6 ||
	    nstr - 6 - argc > AG_ENVC_MAX) {
		snprintf(err, errlen, "spawn: bad argument or variable count");
		return -1;
	}
	s->argc = (int)argc;
	s->envc = (int)(nstr - 6 - argc);
	s->argv = calloc((size_t)s->argc + 1, sizeof(char *));
	s->envp = calloc((size_t)s->envc + 1, sizeof(char *));
	if (s->argv == NULL || s->envp == NULL) {
		snprintf(err, errlen, "spawn: out of memory");
		goto fail;
	}
	for (i = 0; i < s->argc; i++) {
		s->argv[i] = (char *)(p + off);
		off += strlen(s->argv[i]) + 1;
	}
	if (s->argv[0][0] == '\0') {
		snprintf(err, errlen, "spawn: empty command name");
		goto fail;
	}
	for (i = 0; i < s->envc; i++) {
		const char *e = p + off;
		const char *eq = strchr(e, '=');

		if (eq == NULL || eq == e) {
			snprintf(err, errlen, "spawn: variable %d is not "
			    "NAME=value", i);
			goto fail;
		}
		s->envp[i] = (char *)e;
		off += strlen(e) + 1;
	}
	if (off != n) {
		snprintf(err, errlen, "spawn: bytes after the last string");
		goto fail;
	}
	return 0;
fail:
	ag_spawn_free(s);
	return -1;
}

void
ag_spawn_free(struct ag_spawn *s)
{
	free(s->argv);
	free(s->envp);
	s->argv = s->envp = NULL;
}

/* Appends s and its NUL; -1 past AG_SPAWN_MAX. */
static int
ag_cat(char *b, size_t *n, const char *s)
{
	size_t l = strlen(s) + 1;

	if (*n + l > AG_SPAWN_MAX)
		return -1;
	memcpy(b + *n, s, l);
	*n += l;
	return 0;
}

char *
ag_spawn_build(const char *tag, const char *cwd, uint64_t fsize,
    uint64_t nofile, uint64_t nproc, char *const *argv, char *const *envp,
    size_t *n)
{
	char num[4][24], *b;
	int argc = 0, i;

	*n = 0;
	while (argv != NULL && argv[argc] != NULL)
		argc++;
	if (argc == 0 || argc > AG_ARGC_MAX ||
	    !ag_tag_ok(tag, strlen(tag)) || cwd[0] != '/' ||
	    (b = malloc(AG_SPAWN_MAX)) == NULL)
		return NULL;
	snprintf(num[0], sizeof(num[0]), "%llu", (unsigned long long)fsize);
	snprintf(num[1], sizeof(num[1]), "%llu", (unsigned long long)nofile);
	snprintf(num[2], sizeof(num[2]), "%llu", (unsigned long long)nproc);
	snprintf(num[3], sizeof(num[3]), "%d", argc);
	if (ag_cat(b, n, tag) || ag_cat(b, n, cwd) || ag_cat(b, n, num[0]) ||
	    ag_cat(b, n, num[1]) || ag_cat(b, n, num[2]) ||
	    ag_cat(b, n, num[3]))
		goto fail;
	for (i = 0; i < argc; i++)
		if (ag_cat(b, n, argv[i]) != 0)
			goto fail;
	for (i = 0; envp != NULL && envp[i] != NULL; i++) {
		if (i >= AG_ENVC_MAX)
			goto fail;
		/* what the parser refuses is left out, as env -i would */
		if (envp[i][0] == '=' || strchr(envp[i], '=') == NULL)
			continue;
		if (ag_cat(b, n, envp[i]) != 0)
			goto fail;
	}
	return b;
fail:
	free(b);
	return NULL;
}

void
ag_exit_put(unsigned char p[2], int kind, int value)
{
	p[0] = (unsigned char)kind;
	p[1] = (unsigned char)value;
}

int
ag_exit_parse(const unsigned char *p, size_t n)
{
	if (n != 2 || p[0] > 1 || (p[0] == 1 && (p[1] < 1 || p[1] > 64)))
		return -1;
	return p[0] == 0 ? p[1] : 128 + p[1];
}

void
ag_started_put(unsigned char p[4], long pid)
{
	be32_put(p, (uint32_t)pid);
}

long
ag_started_parse(const unsigned char *p, size_t n)
{
	uint32_t v;

	if (n != 4)
		return -1;
	v = be32_get(p);
	return v == 0 || v > 0x3fffffff ? -1 : (long)v;
}

int
ag_signal_parse(const unsigned char *p, size_t n)
{
	return n == 1 && p[0] >= 1 && p[0] <= 64 ? p[0] : -1;
}

void
ag_port_put(unsigned char p[2], int port)
{
	p[0] = (unsigned char)(port >> 8);
	p[1] = (unsigned char)port;
}

long
ag_port_parse(const unsigned char *p, size_t n)
{
	long v;

	if (n != 2)
		return -1;
	v = (long)p[0] << 8 | p[1];
	return v == 0 ? -1 : v;
}

void
ag_connected_put(unsigned char p[4], int err)
{
	be32_put(p, (uint32_t)err);
}

int
ag_connected_parse(const unsigned char *p, size_t n)
{
	uint32_t v;

	if (n != 4)
		return -1;
	v = be32_get(p);
	return v > 4095 ? -1 : (int)v;
}

void
ag_winsize_put(unsigned char p[4], unsigned rows, unsigned cols)
{
	p[0] = (unsigned char)(rows >> 8);
	p[1] = (unsigned char)rows;
	p[2] = (unsigned char)(cols >> 8);
	p[3] = (unsigned char)cols;
}

int
ag_winsize_parse(const unsigned char *p, size_t n, unsigned *rows,
    unsigned *cols)
{
	unsigned r, c;

	if (n != 4)
		return -1;
	r = (unsigned)p[0] << 8 | p[1];
	c = (unsigned)p[2] << 8 | p[3];
	if (r == 0 || c == 0)
		return -1;
	*rows = r;
	*cols = c;
	return 0;
}

static int
ag_io(int fd, void *b, size_t n, int wr)
{
	char *c = b;
	ssize_t k;

	while (n > 0) {
		k = wr ? write(fd, c, n) : read(fd, c, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0)
			errno = 0;
		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

int
ag_write_frame(int fd, int type, const void *p, size_t n)
{
	unsigned char h[AG_HDR];

	if (n > ag_max(type)) {
		errno = EMSGSIZE;
		return -1;
	}
	ag_hdr_put(h, type, (uint32_t)n);
	if (ag_io(fd, h, sizeof(h), 1) != 0)
		return -1;
	return n == 0 ? 0 : ag_io(fd, (void *)p, n, 1);
}

int
ag_read_frame(int fd, int *type, void *buf, size_t cap, size_t *n)
{
	unsigned char h[AG_HDR];
	uint32_t len;

	if (ag_io(fd, h, sizeof(h), 0) != 0)
		return -1;
	if (ag_hdr_get(h, type, &len) != 0 || len > cap) {
		errno = EPROTO;
		return -1;
	}
	*n = len;
	return len == 0 ? 0 : ag_io(fd, buf, len, 0);
}

void
ag_signals_default(void)
{
	struct sigaction sa;
	sigset_t none;
	int i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (i = 1; i < NSIG; i++)
		(void)sigaction(i, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

int
ag_connect_answer(const void *buf, size_t len, size_t *used, int *inside,
    char *err, size_t errlen)
{
	const unsigned char *b = buf;
	uint32_t n;
	int t, e;

	if (len < AG_HDR)
		return 1;
	if (ag_hdr_get(b, &t, &n) != 0 || (t != AG_CONNECTED &&
	    t != AG_ERROR)) {
		snprintf(err, errlen, "the sandbox's agent: protocol error");
		return -1;
	}
	if (len - AG_HDR < n)
		return 1;
	*used = AG_HDR + n;
	if (t == AG_ERROR) {
		/* its text, made printable (it is the agent's, not ours) */
		size_t i, k = 0;
		char m[AG_ERR_MAX + 1];

		for (i = 0; i < n && k < AG_ERR_MAX; i++)
			m[k++] = b[AG_HDR + i] >= 0x20 && b[AG_HDR + i] < 0x7f ?
			    (char)b[AG_HDR + i] : '?';
		m[k] = '\0';
		snprintf(err, errlen, "the sandbox's agent: %s", m);
		return -1;
	}
	if ((e = ag_connected_parse(b + AG_HDR, n)) < 0) {
		snprintf(err, errlen, "the sandbox's agent: protocol error");
		return -1;
	}
	if (e == 0)
		return 0;
	*inside = e;
	return -2;
}

/* A sanitizer's runtime knows nothing of a child that shares its
 * memory on a stack of ours (it fails the child, exit status 1, before
 * the exec): a fork there, slower and the same. */
#if defined(__SANITIZE_ADDRESS__)
#define AG_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AG_SANITIZED 1
#endif
#endif

#ifdef AG_SANITIZED
pid_t
ag_vfork(int (*fn)(void *), void *arg)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn(arg));
	return pid;
}
#else
pid_t
ag_vfork(int (*fn)(void *), void *arg)
{
	static char stack[256 * 1024] __attribute__((aligned(16)));
	char **env = environ;
	sigset_t all, old;
	pid_t pid;

	/* no handler of the caller's may run on the child's side before
	 * it has set them all back (it unblocks them then) */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid = clone(fn, stack + sizeof(stack), CLONE_VM | CLONE_VFORK |
	    SIGCHLD, arg);
	environ = env;
	sigprocmask(SIG_SETMASK, &old, NULL);
	return pid;
}
#endif

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

long
ag_hex_decode(const char *hex, void *out, size_t cap, size_t unit)
{
	unsigned char *b = out;
	size_t n = strlen(hex), i;

	if (n % (2 * unit) != 0 || n / 2 > cap)
		return -1;
	for (i = 0; i < n / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		b[i] = (unsigned char)(hi << 4 | lo);
	}
	return (long)(n / 2);
}

long long
ag_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
