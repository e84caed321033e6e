/*
 * kernel.c: send the replace batch, read the table back, remove it.
 *
 * Only our own table is ever named in a request: dumps carry the table
 * as a filter, so other tables are neither changed nor read.
 */
#include "sluice-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include "firewall/fw-int.h"

#define RECV_BUF 65536

static struct mnl_socket *
nl_open(char *err, size_t errlen)
{
	struct mnl_socket *nl = mnl_socket_open(NETLINK_NETFILTER);
	struct timeval tv = { 5, 0 };

	if (nl == NULL) {
		snprintf(err, errlen, "netlink: %s", strerror(errno));
		return NULL;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		snprintf(err, errlen, "netlink bind: %s", strerror(errno));
		mnl_socket_close(nl);
		return NULL;
	}
	/* a kernel that never answers must not hang start-up */
	setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
	    sizeof(tv));
	return nl;
}

static int
send_batch(struct mnl_socket *nl, struct nftnl_batch *b, char *err,
    size_t errlen)
{
	int n = nftnl_batch_iovec_len(b);
	struct iovec *iov = calloc((size_t)n, sizeof(*iov));
	struct sockaddr_nl snl = { .nl_family = AF_NETLINK };
	struct msghdr msg = {
		.msg_name = &snl, .msg_namelen = sizeof(snl),
	};
	ssize_t r;

	int size, i;

	if (iov == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	nftnl_batch_iovec(b, iov, (uint32_t)n);
	/* one sendmsg carries the whole transaction: make room for it */
	for (size = 0, i = 0; i < n; i++)
		size += (int)iov[i].iov_len;
	if (setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_SNDBUFFORCE,
	    &size, sizeof(size)) != 0)
		setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_SNDBUF,
		    &size, sizeof(size));
	msg.msg_iov = iov;
	msg.msg_iovlen = (size_t)n;
	r = sendmsg(mnl_socket_get_fd(nl), &msg, 0);
	free(iov);
	if (r < 0) {
		snprintf(err, errlen, "netlink send: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static const char *
msg_name(uint16_t type)
{
	switch (type & 0xff) {
	case NFT_MSG_NEWTABLE: return "NEWTABLE";
	case NFT_MSG_DELTABLE: return "DELTABLE";
	case NFT_MSG_NEWCHAIN: return "NEWCHAIN";
	case NFT_MSG_NEWSET: return "NEWSET";
	case NFT_MSG_NEWSETELEM: return "NEWSETELEM";
	case NFT_MSG_DELSETELEM: return "DELSETELEM";
	case NFT_MSG_NEWRULE: return "NEWRULE";
	}
	return "message";
}

/* Every inner message asked for an ack: wait for all of them, keeping
 * the first error with the message it belongs to. */
static int
read_acks(struct mnl_socket *nl, uint32_t first, uint32_t count, char *err,
    size_t errlen)
{
	char *buf = malloc(RECV_BUF);
	uint32_t acks = 0;
	int failed = 0;

	if (buf == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	while (acks < count) {
		ssize_t n = recv(mnl_socket_get_fd(nl), buf, RECV_BUF,
		    failed ? MSG_DONTWAIT : 0);
		struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
		int len = (int)n;

		if (n < 0) {
			if (!failed)
				snprintf(err, errlen, "netlink receive: %s",
				    strerror(errno));
			failed = 1;
			break;
		}
		for (; mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
			const struct nlmsgerr *e;

			if (nlh->nlmsg_type != NLMSG_ERROR)
				continue;
			e = mnl_nlmsg_get_payload(nlh);
			acks++;
			if (e->error != 0 && !failed) {
				failed = 1;
				snprintf(err, errlen, "%s (message %u): %s",
				    msg_name(e->msg.nlmsg_type),
				    e->msg.nlmsg_seq - first,
				    strerror(-e->error));
			}
		}
	}
	free(buf);
	return failed ? -1 : 0;
}

static int
talk(struct nftnl_batch *b, uint32_t base, uint32_t end, char *err,
    size_t errlen)
{
	struct mnl_socket *nl = nl_open(err, errlen);
	int ret;

	if (nl == NULL)
		return -1;
	ret = send_batch(nl, b, err, errlen);
	/* BEGIN and END are not acknowledged; everything between is */
	if (ret == 0)
		ret = read_acks(nl, base, end - base - 1, err, errlen);
	mnl_socket_close(nl);
	return ret;
}

static uint32_t
seq_start(void)
{
	return (uint32_t)time(NULL);
}

int
fw_apply(const struct fw_ruleset *rs, char *err, size_t errlen)
{
	uint32_t base = seq_start(), seq = base;
	struct nftnl_batch *b = fw_nl_batch(rs, &seq, 1);
	int ret;

	if (b == NULL) {
		snprintf(err, errlen, "building the batch: out of memory");
		return -1;
	}
	ret = talk(b, base, seq - 1, err, errlen);
	nftnl_batch_free(b);
	if (ret != 0)
		return -1;
	return fw_verify(rs, err, errlen);
}

int
fw_update(const struct fw_ruleset *old, const struct fw_ruleset *rs,
    int *refilled, char *err, size_t errlen)
{
	uint32_t base = seq_start(), seq = base;
	struct nftnl_batch *b;
	int ret;

	if (refilled != NULL)
		*refilled = 0;
	if (old == NULL || !fw_sets_only(old, rs))
		return fw_apply(rs, err, errlen);
	b = fw_nl_set_batch(old, rs, &seq, 1);
	if (b == NULL) {
		snprintf(err, errlen, "building the batch: out of memory");
		return -1;
	}
	ret = talk(b, base, seq - 1, err, errlen);
	nftnl_batch_free(b);
	if (ret == 0)
		ret = fw_verify(rs, err, errlen);
	/* the kernel did not hold old (changed behind our back, removed):
	 * the whole-table replace repairs whatever it held */
	if (ret != 0)
		return fw_apply(rs, err, errlen);
	if (refilled != NULL)
		*refilled = 1;
	return 0;
}

int
fw_remove(const char *table, char *err, size_t errlen)
{
	uint32_t base = seq_start(), seq = base;
	struct nftnl_batch *b = nftnl_batch_alloc(MNL_SOCKET_BUFFER_SIZE,
	    MNL_SOCKET_BUFFER_SIZE);
	struct nftnl_table *t = fw_nl_table(table);
	int ret = -1;

	if (b == NULL || t == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	nftnl_batch_begin(nftnl_batch_buffer(b), seq++);
	nftnl_batch_update(b);
	/* create-if-missing first, so that removing twice succeeds */
	nftnl_table_nlmsg_build_payload(nftnl_nlmsg_build_hdr(
	    nftnl_batch_buffer(b), NFT_MSG_NEWTABLE, NFPROTO_INET,
	    NLM_F_CREATE | NLM_F_ACK, seq++), t);
	nftnl_batch_update(b);
	nftnl_table_nlmsg_build_payload(nftnl_nlmsg_build_hdr(
	    nftnl_batch_buffer(b), NFT_MSG_DELTABLE, NFPROTO_INET,
	    NLM_F_ACK, seq++), t);
	nftnl_batch_update(b);
	nftnl_batch_end(nftnl_batch_buffer(b), seq++);
	nftnl_batch_update(b);
	ret = talk(b, base, seq - 1, err, errlen);
out:
	if (t != NULL)
		nftnl_table_free(t);
	if (b != NULL)
		nftnl_batch_free(b);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Read back */

struct strv {
	char **v;
	size_t n;
	int oom;
};

static void
strv_push(struct strv *s, const char *str)
{
	char **n;

	if (s->oom)
		return;
	n = realloc(s->v, (s->n + 1) * sizeof(*n));
	if (n == NULL || (n[s->n] = strdup(str)) == NULL) {
		if (n != NULL)
			s->v = n;
		s->oom = 1;
		return;
	}
	s->v = n;
	s->n++;
}

static void
strv_clear(struct strv *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* One request (a dump, or a get with NLM_F_ACK); cb gets each reply
 * message, until NLMSG_DONE or the ack. */
static int
dump(struct mnl_socket *nl, struct nlmsghdr *req, mnl_cb_t cb, void *data,
    char *err, size_t errlen)
{
	uint32_t portid = mnl_socket_get_portid(nl);
	char *buf = malloc(RECV_BUF);
	int ret = -1;

	if (buf == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (mnl_socket_sendto(nl, req, req->nlmsg_len) < 0) {
		snprintf(err, errlen, "netlink send: %s", strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, RECV_BUF);
		int r;

		if (n < 0) {
			snprintf(err, errlen, "netlink receive: %s",
			    strerror(errno));
			goto out;
		}
		r = mnl_cb_run(buf, (size_t)n, req->nlmsg_seq, portid, cb, data);
		if (r < 0) {
			snprintf(err, errlen, "read back: %s", strerror(errno));
			goto out;
		}
		if (r == MNL_CB_STOP)
			break;
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

/* "hook prio policy type" per chain, "name" first */
static int
chain_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	char line[160];

	if (c == NULL || nftnl_chain_nlmsg_parse(nlh, c) < 0) {
		if (c != NULL)
			nftnl_chain_free(c);
		return MNL_CB_ERROR;
	}
	snprintf(line, sizeof(line), "%s hook %u prio %d policy %u type %s",
	    nftnl_chain_get_str(c, NFTNL_CHAIN_NAME),
	    nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM),
	    nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO),
	    nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY),
	    nftnl_chain_is_set(c, NFTNL_CHAIN_TYPE) ?
	    nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE) : "-");
	strv_push(data, line);
	nftnl_chain_free(c);
	return MNL_CB_OK;
}

static void
chain_line(const struct fw_ruleset *rs, size_t ci, char *line, size_t len)
{
	snprintf(line, len, "%s hook %d prio %d policy %u type %s",
	    rs->chains[ci].name, rs->chains[ci].hook,
	    rs->chains[ci].nat ? FW_NAT_PRIO : 0, NF_ACCEPT,
	    rs->chains[ci].nat ? "nat" : "filter");
}

static int
set_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftnl_set *s = nftnl_set_alloc();
	char line[160];

	if (s == NULL || nftnl_set_nlmsg_parse(nlh, s) < 0) {
		if (s != NULL)
			nftnl_set_free(s);
		return MNL_CB_ERROR;
	}
	snprintf(line, sizeof(line), "%s type %u len %u flags %#x",
	    nftnl_set_get_str(s, NFTNL_SET_NAME),
	    nftnl_set_get_u32(s, NFTNL_SET_KEY_TYPE),
	    nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN),
	    nftnl_set_get_u32(s, NFTNL_SET_FLAGS));
	strv_push(data, line);
	nftnl_set_free(s);
	return MNL_CB_OK;
}

static void
set_line(const struct fw_ruleset *rs, size_t si, char *line, size_t len)
{
	const struct fw_set *s = &rs->sets[si];
	unsigned type = s->key == FW_KEY_V4 ? 7 : s->key == FW_KEY_V6 ? 8 :
	    s->key == FW_KEY_IFNAME ? 41 : 13;

	snprintf(line, len, "%s type %u len %zu flags %#x", s->name, type,
	    fw_key_len(s->key), s->key == FW_KEY_PORT ? 0 : NFT_SET_INTERVAL);
}

/* A rule as its expressions, counters without their values. */
static void
rule_line(struct nftnl_rule *r, const char *chain, char *line, size_t len)
{
	struct nftnl_expr_iter *it = nftnl_expr_iter_create(r);
	struct nftnl_expr *e;
	size_t used;

	used = (size_t)snprintf(line, len, "%s:", chain);
	if (it == NULL)
		return;
	while ((e = nftnl_expr_iter_next(it)) != NULL && used < len) {
		const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
		char buf[256];

		if (strcmp(name, "counter") == 0)
			snprintf(buf, sizeof(buf), "-");
		else
			nftnl_expr_snprintf(buf, sizeof(buf), e,
			    NFTNL_OUTPUT_DEFAULT, 0);
		used += (size_t)snprintf(line + used, len - used, " [%s %s]",
		    name, buf);
	}
	nftnl_expr_iter_destroy(it);
}

static int
rule_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	char line[2048];

	if (r == NULL || nftnl_rule_nlmsg_parse(nlh, r) < 0) {
		if (r != NULL)
			nftnl_rule_free(r);
		return MNL_CB_ERROR;
	}
	rule_line(r, nftnl_rule_get_str(r, NFTNL_RULE_CHAIN), line,
	    sizeof(line));
	strv_push(data, line);
	nftnl_rule_free(r);
	return MNL_CB_OK;
}

struct elems {
	struct nftnl_set *s;
};

static int
elem_cb(const struct nlmsghdr *nlh, void *data)
{
	struct elems *x = data;

	/* the elements of one dump message accumulate in x->s */
	if (nftnl_set_elems_nlmsg_parse(nlh, x->s) < 0)
		return MNL_CB_ERROR;
	return MNL_CB_OK;
}

struct key_flag {
	uint8_t key[16];
	int end;
};

static int
key_cmp(const void *pa, const void *pb)
{
	const struct key_flag *a = pa, *b = pb;
	int c = memcmp(a->key, b->key, 16);

	/* ranges that touch (ifname "tap*" and "taq") share a key: the
	 * end of the one before the start of the next */
	if (c == 0)
		return b->end - a->end;
	return c;
}

struct keyv {
	struct key_flag *v;
	size_t n;
};

static int
collect_elem(struct nftnl_set_elem *e, void *data)
{
	struct keyv *kv = data;
	struct key_flag k, *n;
	uint32_t len = 0;
	const void *key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);

	memset(&k, 0, sizeof(k));
	if (key == NULL || len > 16)
		return -1;
	memcpy(k.key, key, len);
	k.end = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS) &&
	    (nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS) &
	    NFT_SET_ELEM_INTERVAL_END);
	n = realloc(kv->v, (kv->n + 1) * sizeof(*n));
	if (n == NULL)
		return -1;
	n[kv->n++] = k;
	kv->v = n;
	return 0;
}

/* Rebuild ranges from start and end elements in ascending order; the
 * 0 end sentinel has no start before it and is skipped. */
static int
elems_to_ranges(const struct fw_set *fs, struct key_flag *k, size_t n,
    struct fw_range **out, size_t *nout)
{
	size_t klen = fw_key_len(fs->key), i;
	struct fw_range *r = calloc(n + 1, sizeof(*r));
	size_t nr = 0;
	int open = 0;

	if (r == NULL)
		return -1;
	if (n > 0)
		qsort(k, n, sizeof(*k), key_cmp);
	for (i = 0; i < n; i++) {
		if (fs->key == FW_KEY_PORT) {
			memcpy(r[nr].lo, k[i].key, klen);
			memcpy(r[nr++].hi, k[i].key, klen);
			continue;
		}
		if (!k[i].end) {
			if (open)
				goto bad;
			memcpy(r[nr].lo, k[i].key, klen);
			memset(r[nr].hi, 0xff, klen);
			open = 1;
			continue;
		}
		if (!open)
			continue;       /* sentinel */
		memcpy(r[nr].hi, k[i].key, klen);
		/* hi = end - 1 */
		{
			size_t j = klen;

			while (j-- > 0)
				if (r[nr].hi[j]-- != 0)
					break;
		}
		nr++;
		open = 0;
	}
	if (open)
		nr++;
	*out = r;
	*nout = nr;
	return 0;
bad:
	free(r);
	return -1;
}

static int
verify_elems(struct mnl_socket *nl, const struct fw_ruleset *rs, size_t si,
    uint32_t seq, char *err, size_t errlen)
{
	const struct fw_set *fs = &rs->sets[si];
	char req[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct elems x;
	struct keyv keys = { NULL, 0 };
	struct fw_range *r = NULL;
	size_t nr = 0, i, klen = fw_key_len(fs->key);
	int ret = -1;

	x.s = fw_nl_set(rs, si, 0);
	if (x.s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETSETELEM, NFPROTO_INET,
	    NLM_F_DUMP | NLM_F_ACK, seq);
	nftnl_set_elems_nlmsg_build_payload(nlh, x.s);
	if (dump(nl, nlh, elem_cb, &x, err, errlen) != 0)
		goto out;
	if (nftnl_set_elem_foreach(x.s, collect_elem, &keys) < 0 ||
	    elems_to_ranges(fs, keys.v, keys.n, &r, &nr) != 0) {
		snprintf(err, errlen, "set %s: unreadable elements", fs->name);
		goto out;
	}
	for (i = 0; i < nr && i < fs->n; i++)
		if (memcmp(r[i].lo, fs->r[i].lo, klen) != 0 ||
		    memcmp(r[i].hi, fs->r[i].hi, klen) != 0)
			break;
	if (nr != fs->n || i < nr) {
		snprintf(err, errlen, "set %s: %zu ranges in the kernel, "
		    "%zu expected, first difference at %zu", fs->name, nr,
		    fs->n, i);
		goto out;
	}
	ret = 0;
out:
	free(r);
	free(keys.v);
	nftnl_set_free(x.s);
	return ret;
}

static int
compare(const char *what, struct strv *got, char **want, size_t nwant,
    char *err, size_t errlen)
{
	size_t i;

	if (got->oom) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < got->n || i < nwant; i++) {
		const char *g = i < got->n ? got->v[i] : "(none)";
		const char *w = i < nwant ? want[i] : "(none)";

		if (strcmp(g, w) != 0) {
			size_t at = 0;

			/* show the texts from just before they part */
			while (g[at] != '\0' && g[at] == w[at])
				at++;
			at = at > 40 ? at - 40 : 0;
			snprintf(err, errlen, "%s %zu differs: kernel \"%.100s\","
			    " expected \"%.100s\"", what, i, g + at, w + at);
			return -1;
		}
	}
	return 0;
}

static int
table_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftnl_table *t = nftnl_table_alloc();

	if (t == NULL || nftnl_table_nlmsg_parse(nlh, t) < 0) {
		if (t != NULL)
			nftnl_table_free(t);
		return MNL_CB_ERROR;
	}
	*(uint32_t *)data = nftnl_table_get_u32(t, NFTNL_TABLE_USE);
	nftnl_table_free(t);
	return MNL_CB_OK;
}

/*
 * The kernel does not filter chain dumps by table, so each chain is
 * asked for by name (other tables stay unread) and the table's use
 * count (its chains and sets) catches any extra one.
 */
static int
verify_chains(struct mnl_socket *nl, const struct fw_ruleset *rs,
    uint32_t *seq, char *err, size_t errlen)
{
	char req[MNL_SOCKET_BUFFER_SIZE], *want[FW_CHAINS_MAX];
	char lines[FW_CHAINS_MAX][160];
	struct nftnl_table *t = fw_nl_table(rs->table);
	struct strv got = { NULL, 0, 0 };
	struct nlmsghdr *nlh;
	uint32_t use = UINT32_MAX;
	size_t i, n;
	int ret = -1;

	if (t == NULL)
		return -1;
	nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETTABLE, NFPROTO_INET,
	    NLM_F_ACK, (*seq)++);
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	if (dump(nl, nlh, table_cb, &use, err, errlen) != 0)
		goto out;
	for (i = 0, n = rs->nchains; i < rs->nsets; i++)
		n += rs->sets[i].used ? 1 : 0;
	if (use != n) {
		snprintf(err, errlen, "table %s holds %u chains and sets, "
		    "%zu expected", rs->table, use, n);
		goto out;
	}
	for (i = 0; i < rs->nchains; i++) {
		struct nftnl_chain *c = nftnl_chain_alloc();

		if (c == NULL)
			goto out;
		nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, rs->table);
		nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, rs->chains[i].name);
		nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETCHAIN,
		    NFPROTO_INET, NLM_F_ACK, (*seq)++);
		nftnl_chain_nlmsg_build_payload(nlh, c);
		nftnl_chain_free(c);
		if (dump(nl, nlh, chain_cb, &got, err, errlen) != 0)
			goto out;
		chain_line(rs, i, lines[i], sizeof(lines[i]));
		want[i] = lines[i];
	}
	ret = compare("chain", &got, want, rs->nchains, err, errlen);
out:
	strv_clear(&got);
	return ret;
}

static int
verify_sets(struct mnl_socket *nl, const struct fw_ruleset *rs,
    uint32_t seq, char *err, size_t errlen)
{
	char req[MNL_SOCKET_BUFFER_SIZE], *want[FW_SETS_MAX];
	char lines[FW_SETS_MAX][160];
	struct nftnl_set *s = nftnl_set_alloc();
	struct strv got = { NULL, 0, 0 };
	struct nlmsghdr *nlh;
	size_t i, n = 0;
	int ret = -1;

	if (s == NULL)
		return -1;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, rs->table);
	nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETSET, NFPROTO_INET,
	    NLM_F_DUMP | NLM_F_ACK, seq);
	nftnl_set_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	if (dump(nl, nlh, set_cb, &got, err, errlen) != 0)
		goto out;
	for (i = 0; i < rs->nsets; i++) {
		if (!rs->sets[i].used)
			continue;
		set_line(rs, i, lines[n], sizeof(lines[n]));
		want[n] = lines[n];
		n++;
	}
	/* the kernel lists sets in creation order, which is ours */
	ret = compare("set", &got, want, n, err, errlen);
out:
	strv_clear(&got);
	return ret;
}

static int
verify_rules(struct mnl_socket *nl, const struct fw_ruleset *rs,
    uint32_t seq, char *err, size_t errlen)
{
	char req[MNL_SOCKET_BUFFER_SIZE];
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct strv got = { NULL, 0, 0 }, want = { NULL, 0, 0 };
	struct nlmsghdr *nlh;
	size_t ci, i;
	int ret = -1;

	if (r == NULL)
		return -1;
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, rs->table);
	nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETRULE, NFPROTO_INET,
	    NLM_F_DUMP | NLM_F_ACK, seq);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	nftnl_rule_free(r);
	if (dump(nl, nlh, rule_cb, &got, err, errlen) != 0)
		goto out;
	/* the dump walks chains in creation order, rules in position */
	for (ci = 0; ci < rs->nchains; ci++)
		for (i = 0; i < rs->nrules; i++) {
			char line[2048];

			if (rs->rules[i].chain != (int)ci)
				continue;
			r = fw_nl_rule(rs, i);
			if (r == NULL) {
				want.oom = 1;
				continue;
			}
			rule_line(r, rs->chains[ci].name, line, sizeof(line));
			nftnl_rule_free(r);
			strv_push(&want, line);
		}
	if (want.oom) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	ret = compare("rule", &got, want.v, want.n, err, errlen);
out:
	strv_clear(&got);
	strv_clear(&want);
	return ret;
}

int
fw_verify(const struct fw_ruleset *rs, char *err, size_t errlen)
{
	struct mnl_socket *nl = nl_open(err, errlen);
	uint32_t seq = seq_start();
	size_t i;
	int ret = -1;

	if (nl == NULL)
		return -1;
	if (verify_chains(nl, rs, &seq, err, errlen) != 0 ||
	    verify_sets(nl, rs, seq++, err, errlen) != 0 ||
	    verify_rules(nl, rs, seq++, err, errlen) != 0)
		goto out;
	for (i = 0; i < rs->nsets; i++)
		if (rs->sets[i].used &&
		    verify_elems(nl, rs, i, seq++, err, errlen) != 0)
			goto out;
	ret = 0;
out:
	mnl_socket_close(nl);
	return ret;
}

/* 1 if table inet NAME exists, 0 if not; the request names the table,
 * so nothing of another table is read. */
int
fw_table_exists(const char *table, char *err, size_t errlen)
{
	char req[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl;
	struct nftnl_table *t;
	struct nlmsghdr *nlh;
	uint32_t use = 0;
	int ret = -1;

	if ((t = fw_nl_table(table)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if ((nl = nl_open(err, errlen)) == NULL) {
		nftnl_table_free(t);
		return -1;
	}
	nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETTABLE, NFPROTO_INET,
	    NLM_F_ACK, seq_start());
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	errno = 0;
	if (dump(nl, nlh, table_cb, &use, err, errlen) == 0)
		ret = 1;
	else if (errno == ENOENT)
		ret = 0;
	mnl_socket_close(nl);
	return ret;
}
