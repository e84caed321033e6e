/*
 * fuzz_ws.c: the WebSocket frames a client sends the terminal
 * (xd_wsf_read in sandbox-glue/executor/execd/exec_wsf.c), on arbitrary
 * bytes.  The first byte sets how the input is cut into the reads the
 * loop would make (its value + 1 bytes at a time, the rest of the
 * buffer passed again as bytes come, as conn_read does).  Checked: a
 * step never takes more than it was given; a message is a data message
 * (text or binary) or a control frame; a text message and a close
 * reason are UTF-8; a data message is at most the limit, a control
 * payload at most 125 bytes; a close code is one a peer may send (or
 * 1005 for none); a failure carries a code and a reason and the reader
 * stays failed.  Frame heads the writer makes are read back by the
 * length they announce.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-glue/executor/execd/exec_wsf.h"

#define LIMIT	4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_msg(const struct xd_wsf_msg *m)
{
	switch (m->op) {
	case XD_WSF_TEXT:
		if (m->len > LIMIT || !xd_wsf_utf8(m->data, m->len))
			abort();
		break;
	case XD_WSF_BINARY:
		if (m->len > LIMIT)
			abort();
		break;
	case XD_WSF_CLOSE:
		if (m->len > 123 || !xd_wsf_utf8(m->data, m->len) ||
		    !(m->code == 1005 || (m->code >= 1000 && m->code <= 1003) ||
		    (m->code >= 1007 && m->code <= 1011) ||
		    (m->code >= 3000 && m->code <= 4999)))
			abort();
		break;
	case XD_WSF_PING:
	case XD_WSF_PONG:
		if (m->len > 125)
			abort();
		break;
	default:
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xd_wsf w;
	struct xd_wsf_msg m;
	enum xd_wsf_rc rc;
	unsigned char h[10], p[125];
	size_t step, have = 0, off, used, n;
	uint64_t len;

	if (size == 0)
		return 0;
	step = (size_t)data[0] + 1;
	data++;
	size--;
	xd_wsf_init(&w, LIMIT);
	/* bytes come step at a time; what was not taken stays */
	off = 0;
	while (off < size) {
		have = have + step > size - off ? size - off : have + step;
		rc = xd_wsf_read(&w, data + off, have, &used, &m);
		if (used > have)
			abort();
		off += used;
		have -= used;
		if (rc == XD_WSF_FAIL) {
			if (m.code < 1000 || m.why == NULL || !w.failed)
				abort();
			if (xd_wsf_read(&w, data, size, &used, &m) !=
			    XD_WSF_FAIL || used != 0)
				abort();
			break;
		}
		if (rc == XD_WSF_MSG)
			check_msg(&m);
		else if (used == 0 && have == size - off)
			break;  /* all given and no frame whole */
	}
	xd_wsf_free(&w);
	/* the writer's heads announce the length given */
	len = size > 8 ? ((uint64_t)data[0] << 32 | (uint64_t)data[1] << 16 |
	    data[2]) : size;
	n = xd_wsf_head(h, XD_WSF_BINARY, len);
	if (h[0] != 0x82 || (h[1] & 0x80) || (n == 2 && h[1] != len) ||
	    (n == 4 && (h[1] != 126 || (uint64_t)(h[2] << 8 | h[3]) != len)) ||
	    (n == 10 && h[1] != 127))
		abort();
	{
		char why[201];
		size_t k = size < 200 ? size : 200;

		memcpy(why, data, k);
		why[k] = '\0';
		n = xd_wsf_close_payload(p, 1000, why);
		if (n < 2 || n > 125 || n - 2 > strlen(why))
			abort();
	}
	return 0;
}
