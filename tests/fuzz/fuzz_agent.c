/*
 * fuzz_agent.c: the gVisor agent's wire (sandbox-glue/agent/agent_wire.h)
 * as the agent and the host's relay read it: the input is a stream of
 * frames, each header checked by ag_hdr_get and each payload given to its
 * type's parser.
 *
 * Invariants: a header that passes has a known type and a length within
 * that type's bound; a SPAWN that parses has a valid tag, an absolute
 * cwd, at least one argument with a non-empty name, only NAME=value
 * variables, NULL-terminated arrays of the counts said, and built again
 * by ag_spawn_build is the same bytes (nothing was guessed or skipped);
 * an EXIT is a status 0..255 or 129..192; a SIGNAL 1..64; a CONNECT a
 * port 1..65535 and a CONNECTED an errno 0..4095, each put again the same
 * bytes; a PTY or RESIZE a size of two numbers 1..65535, put again the
 * same bytes.  The whole input is also read as CONNECT's answer
 * (ag_connect_answer: what it takes lies within the input), and, as a
 * string, as a hex filter program (ag_hex_decode):
 * what passes is whole 8-byte units and hex again is the same text.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-glue/agent/agent_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INVARIANT(c) do { if (!(c)) abort(); } while (0)

static void
spawn_one(const char *p, size_t n)
{
	struct ag_spawn s;
	char err[256], *again;
	size_t m;
	int i;

	if (ag_spawn_parse(p, n, &s, err, sizeof(err)) != 0) {
		INVARIANT(err[0] != '\0' && s.argv == NULL && s.envp == NULL);
		return;
	}
	INVARIANT(ag_tag_ok(s.tag, strlen(s.tag)) && s.cwd[0] == '/');
	INVARIANT(s.argc >= 1 && s.argc <= AG_ARGC_MAX && s.envc >= 0 &&
	    s.envc <= AG_ENVC_MAX);
	INVARIANT(s.argv[0][0] != '\0' && s.argv[s.argc] == NULL &&
	    s.envp[s.envc] == NULL);
	for (i = 0; i < s.argc; i++)
		INVARIANT(s.argv[i] != NULL);
	for (i = 0; i < s.envc; i++)
		INVARIANT(s.envp[i] != NULL && s.envp[i][0] != '=' &&
		    strchr(s.envp[i], '=') != NULL);
	again = ag_spawn_build(s.tag, s.cwd, s.fsize, s.nofile, s.nproc,
	    s.argv, s.envp, &m);
	INVARIANT(again != NULL && m == n && memcmp(again, p, n) == 0);
	free(again);
	ag_spawn_free(&s);
}

static void
port_one(const char *p, size_t n)
{
	long v = ag_port_parse((const unsigned char *)p, n);
	unsigned char b[2];

	INVARIANT(v == -1 || (v >= 1 && v <= 65535));
	if (v < 0)
		return;
	ag_port_put(b, (int)v);
	INVARIANT(n == 2 && memcmp(b, p, 2) == 0);
}

static void
winsize_one(const char *p, size_t n)
{
	unsigned rows = 0, cols = 0;
	unsigned char b[4];

	if (ag_winsize_parse((const unsigned char *)p, n, &rows, &cols) != 0)
		return;
	INVARIANT(rows >= 1 && rows <= 65535 && cols >= 1 && cols <= 65535);
	ag_winsize_put(b, rows, cols);
	INVARIANT(n == 4 && memcmp(b, p, 4) == 0);
}

static void
unhex_one(const uint8_t *data, size_t size)
{
	static const char hx[] = "0123456789abcdef";
	unsigned char buf[256];
	char *s = malloc(size + 1), again[2 * sizeof(buf) + 1];
	long n, i;

	if (s == NULL)
		return;
	memcpy(s, data, size);
	s[size] = '\0';
	n = ag_hex_decode(s, buf, sizeof(buf), 8);
	if (n >= 0) {
		INVARIANT(n % 8 == 0 && (size_t)n <= sizeof(buf));
		for (i = 0; i < n; i++) {
			again[2 * i] = hx[buf[i] >> 4];
			again[2 * i + 1] = hx[buf[i] & 15];
		}
		again[2 * n] = '\0';
		INVARIANT(strcmp(again, s) == 0);
	}
	free(s);
}

/* The whole input as what the host reads after CONNECT: an answer
 * that is taken was whole in the input, and a refusal's errno is one
 * CONNECTED can say. */
static void
answer_one(const uint8_t *data, size_t size)
{
	unsigned char *copy = malloc(size ? size : 1);
	char err[128];
	size_t used = 0;
	int inside = 0, r;

	if (copy == NULL)
		return;
	memcpy(copy, data, size);
	err[0] = '\0';
	r = ag_connect_answer(copy, size, &used, &inside, err, sizeof(err));
	INVARIANT(r >= -2 && r <= 1);
	if (r == 0 || r == -2)
		INVARIANT(used >= AG_HDR && used <= size);
	if (r == -2)
		INVARIANT(inside > 0 && inside <= 4095);
	if (r == -1)
		INVARIANT(err[0] != '\0');
	free(copy);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	unhex_one(data, size);
	answer_one(data, size);

	while (size - off >= AG_HDR) {
		uint32_t len;
		int type, v;
		long pid;
		char *p;

		if (ag_hdr_get(data + off, &type, &len) != 0)
			break;
		INVARIANT(ag_max(type) != 0 && len <= ag_max(type));
		off += AG_HDR;
		if (len > size - off)
			break;
		/* a copy of its own: the sanitizers see any read past it */
		if ((p = malloc(len ? len : 1)) == NULL)
			break;
		memcpy(p, data + off, len);
		off += len;
		switch (type) {
		case AG_SPAWN:
			spawn_one(p, len);
			break;
		case AG_KILL: case AG_RELEASE:
			(void)ag_tag_ok(p, len);
			break;
		case AG_EXIT:
			v = ag_exit_parse((unsigned char *)p, len);
			INVARIANT(v == -1 || (v >= 0 && v <= 255) ||
			    (v >= 129 && v <= 192));
			break;
		case AG_STARTED:
			pid = ag_started_parse((unsigned char *)p, len);
			INVARIANT(pid == -1 || pid > 0);
			break;
		case AG_SIGNAL:
			v = ag_signal_parse((unsigned char *)p, len);
			INVARIANT(v == -1 || (v >= 1 && v <= 64));
			break;
		case AG_CONNECT:
			port_one(p, len);
			break;
		case AG_CONNECTED:
			v = ag_connected_parse((unsigned char *)p, len);
			INVARIANT(v >= -1 && v <= 4095);
			if (v >= 0) {
				unsigned char b[4];

				ag_connected_put(b, v);
				INVARIANT(len == 4 && memcmp(b, p, 4) == 0);
			}
			break;
		case AG_PTY: case AG_RESIZE:
			winsize_one(p, len);
			break;
		}
		free(p);
	}
	return 0;
}
