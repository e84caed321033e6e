/*
 * fwmsg.h: the messages between sluiced's proxy process and its firewall
 * helper (sluiced(8), PROCESS MODEL), and the helper's request loop.
 *
 * The helper is the only part of sluiced that keeps a capability
 * (CAP_NET_ADMIN).  It reads nothing but these messages from a
 * SOCK_SEQPACKET socketpair, one message per packet, and treats the
 * proxy as untrusted: every message is length-checked field by field,
 * the configuration it carries is rebuilt and re-validated by fw_build,
 * and only a table of sluice's own can be replaced (see fw_helper_run).
 *
 * Wire format, all integers big-endian:
 *
 *   header   u16 magic 0x534c ("SL"), u8 version 1, u8 type,
 *            u32 payload length (the packet's length minus 8)
 *   APPLY    str8 table; u8 has_uid (0 or 1); u32 uid (0 unless has_uid);
 *            list allow_cidrs, deny_cidrs, resolvers, sandbox_subnets;
 *            ilist sandbox_interfaces; list broker_addrs;
 *            u16 count + count x u16 broker port (1..65535);
 *            u16 transparent port (0: no redirect)
 *   OK, ERR  str16 text (printable ASCII)
 *
 *   str8     u8 length 1..255, bytes;  str16: u16 length 0..1024, bytes
 *   list     u16 count 0..FW_MSG_LIST_MAX, count x str8 whose bytes
 *            are hex digits and . : / [ ] only (addresses, prefixes)
 *   ilist    as list, but the bytes are printable ASCII other than
 *            space / : " and backslash (interface names; fw_build
 *            checks the rest, pol_ifname_check)
 *
 * Nothing may follow the last field; anything else is refused.
 */
#ifndef SLUICE_FWMSG_H
#define SLUICE_FWMSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "firewall/fw.h"

#define FW_MSG_MAGIC 0x534c
#define FW_MSG_VERSION 1
#define FW_MSG_HDR 8
#define FW_MSG_MAX (128 * 1024)      /* one packet, header included */
#define FW_MSG_LIST_MAX 4096
#define FW_MSG_PORTS_MAX 64
#define FW_MSG_TEXT_MAX 1024

enum fw_msg_type {
	FW_MSG_APPLY = 1,       /* proxy -> helper */
	FW_MSG_OK = 0x81,       /* helper -> proxy */
	FW_MSG_ERR = 0x82,
};

/* A decoded APPLY: fc points into the storage below. */
struct fw_msg_apply {
	struct fw_config fc;
	char *strings;                  /* every string, NUL-terminated */
	const char **ptrs;              /* the lists' entries */
	uint16_t *ports;
};

/* APPLY for fc into buf; *len is the packet length.  0 / -1 with err
 * (a field the format cannot carry, or more than cap bytes). */
int fw_msg_encode_apply(const struct fw_config *fc, uint8_t *buf, size_t cap,
    size_t *len, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* Strict parse of one APPLY packet.  0 / -1 with err naming the field.
 * Release with fw_msg_apply_clear (also after a failure). */
int fw_msg_decode_apply(const uint8_t *buf, size_t len,
    struct fw_msg_apply *out, char *err, size_t errlen) SLUICE_MUSTCHECK;
void fw_msg_apply_clear(struct fw_msg_apply *a);

/* OK or ERR with text (cut at FW_MSG_TEXT_MAX, non-printable bytes
 * replaced by '?').  Returns the packet length. */
size_t fw_msg_encode_reply(uint8_t *buf, size_t cap, int ok,
    const char *text);
/* 1 (OK) / 0 (ERR) with the text in text, or -1 if malformed. */
int fw_msg_decode_reply(const uint8_t *buf, size_t len, char *text,
    size_t textlen) SLUICE_MUSTCHECK;

/*
 * The helper's request loop on fd: one reply for every request, until
 * the proxy closes its end (then 0: the tables stay as they are, which
 * is what fails closed) or the socket fails (-1).  start_table is the
 * table named by the configuration sluiced started with, read before
 * the proxy handled any untrusted input: that table, and afterwards the
 * one last applied, may be replaced; any other name only if no table of
 * that name exists, so that the proxy can never make the helper replace
 * or delete another program's table.  The operations are fw_apply and
 * friends in sluiced; tests give fakes.
 */
struct fw_helper_ops {
	int (*apply)(const struct fw_ruleset *rs, char *err, size_t errlen);
	int (*verify)(const struct fw_ruleset *rs, char *err, size_t errlen);
	int (*remove)(const char *table, char *err, size_t errlen);
	/* 1: a table of that name exists, 0: not, -1: error */
	int (*exists)(const char *table, char *err, size_t errlen);
	void (*log)(int prio, const char *msg);     /* syslog priorities */
	/* fw_update: refill the sets in place when only they changed; NULL:
	 * every change is an apply */
	int (*update)(const struct fw_ruleset *old, const struct fw_ruleset *rs,
	    int *refilled, char *err, size_t errlen);
};
int fw_helper_run(int fd, const char *start_table,
    const struct fw_helper_ops *ops);

/*
 * The proxy's side: send APPLY for fc and wait (at most timeout_ms) for
 * the reply.  0 on success, with err holding the helper's word for what
 * it did ("applied", or "refilled" when only set elements changed and
 * the rules and counters stayed); -1 with err when the helper (or the encoder)
 * refused the request; -2 with err when the socket failed, timed out or
 * answered out of format: the helper is of no further use, and the
 * caller closes fd.
 */
int fw_helper_apply(int fd, const struct fw_config *fc, int timeout_ms,
    char *err, size_t errlen) SLUICE_MUSTCHECK;

#endif /* SLUICE_FWMSG_H */
