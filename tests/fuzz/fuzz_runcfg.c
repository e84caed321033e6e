/*
 * fuzz_runcfg.c: sluice-run's parsers (sandbox-glue/sbx_cfg.c) on
 * arbitrary bytes.  The first byte picks the parser, the rest is its
 * input:
 *   'c'  the configuration: a refusal says why; an accepted one keeps
 *        every value in its documented range;
 *   'r'  a record file: a record that loads saves to JSON that loads
 *        back to the same record;
 *   'h'  an answer of sluiced (raw HTTP): status, error message (one
 *        line, no control characters) and session socket directory;
 *   'p'  a profile (sbx_image.c): an accepted one holds only package
 *        names, bounded lists of one-line checks, and has inputs;
 *   other: the names: sbx_id_ok, sbx_user_ok and sbx_text_safe (whose
 *        output holds no control character and fits).
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-glue/executor/backend/sbx_cfg.h"
#include "sandbox-glue/executor/image/sbx_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* No C0, DEL or C1 (as UTF-8) in a NUL-terminated line. */
static void
check_line(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i;

	for (i = 0; u[i] != '\0'; i++)
		if (u[i] < 0x20 || u[i] == 0x7f || (u[i] == 0xc2 &&
		    u[i + 1] >= 0x80 && u[i + 1] <= 0x9f))
			abort();
}

static void
fuzz_cfg(const char *text, size_t len)
{
	struct sbx_cfg c;
	char err[512];

	sbx_cfg_defaults(&c, "/run/sluice-run", "/run/sluice/control.sock",
	    "/usr/bin/sluice-shim");
	err[0] = '\0';
	if (sbx_cfg_parse(&c, text, len, "fuzz.json", err, sizeof(err)) != 0) {
		if (err[0] == '\0')
			abort();
		return;
	}
	if (c.timeout_max < 1 || c.timeout_max > 1680 ||
	    c.timeout_default < 1 || c.timeout_default > c.timeout_max ||
	    c.output_cap < 0 || c.output_cap > (64l << 20) ||
	    c.max_total < 0 || c.max_per_user < 0 || c.max_per_tenant < 0 ||
	    c.idle_after < 0 || c.remove_after < 0 ||
	    c.uid_base < 65536 ||
	    c.uid_base + 65536ul * SBX_SLOTS_MAX > 4000000000ul ||
	    sbx_backend_find(c.backend) == NULL ||
	    !sbx_id_ok(c.tier, sizeof(c.tier) - 1) ||
	    (c.cgroups[0] != '\0' && strcmp(c.cgroups, "v1") != 0 &&
	    strcmp(c.cgroups, "v2") != 0 && strcmp(c.cgroups, "off") != 0) ||
	    memchr(c.state_dir, '\0', sizeof(c.state_dir)) == NULL ||
	    memchr(c.shim, '\0', sizeof(c.shim)) == NULL ||
	    c.image_dir[0] != '/' ||
	    (strcmp(c.profile, "host") != 0 && !sbx_id_ok(c.profile,
	    SBX_ID_MAX)) ||
	    (c.image_sources[0] != '\0' && strncmp(c.image_sources, "deb ",
	    4) != 0))
		abort();
	check_line(c.image_dir);
	/* the tenant lines answer without reading past them */
	(void)sbx_cfg_profile_ok(&c, "acme", "base");
	(void)sbx_cfg_profile_ok(&c, "", "host");
}

static void
fuzz_profile(const char *text, size_t len)
{
	struct sbx_profile p;
	char err[512], hex[SBX_DIGEST_HEX + 1];
	size_t i;

	err[0] = '\0';
	if (sbx_profile_parse(&p, "fuzz", text, len, err, sizeof(err)) != 0) {
		sbx_profile_free(&p);
		if (err[0] == '\0')
			abort();
		check_line(err);
		return;
	}
	if (p.npackages > SBX_PROFILE_ITEMS_MAX || p.npython >
	    SBX_PROFILE_ITEMS_MAX || p.ncommands > SBX_PROFILE_ITEMS_MAX)
		abort();
	for (i = 0; i < p.npackages; i++)
		if (!sbx_pkg_ok(p.packages[i]))
			abort();
	for (i = 0; i < p.ncommands; i++)
		check_line(p.commands[i]);
	check_line(p.description);
	if (sbx_image_inputs(&p, "bookworm", "deb http://m/d bookworm main\n",
	    "amd64", hex, NULL) != 0 || !sbx_digest_ok(hex))
		abort();
	sbx_profile_free(&p);
}

static void
fuzz_rec(const char *text, size_t len)
{
	struct sbx_rec r, again;
	char err[512], *dump;
	json_t *o;

	err[0] = '\0';
	if (sbx_rec_parse(&r, text, len, err, sizeof(err)) != 0) {
		if (err[0] == '\0')
			abort();
		return;
	}
	if (!sbx_id_ok(r.chat, SBX_ID_MAX) || r.slot < -1 ||
	    r.slot >= SBX_SLOTS_MAX || r.init_pid < 0)
		abort();
	if ((o = sbx_rec_json(&r)) == NULL)
		abort();
	dump = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (dump == NULL)
		abort();
	if (sbx_rec_parse(&again, dump, strlen(dump), err, sizeof(err)) != 0 ||
	    memcmp(&r, &again, sizeof(r)) != 0)
		abort();
	free(dump);
}

static void
fuzz_http(const char *text, size_t len)
{
	char *buf = malloc(len + 1), msg[256], dir[SBX_PATH_MAX], err[256];
	const char *body;
	int status;

	if (buf == NULL)
		return;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (sbx_http_split(buf, len, &status, &body) == 0) {
		if (status < 0 || status > 999 || (body != NULL &&
		    (body < buf || body > buf + len)))
			abort();
		sbx_broker_msg(body, msg, sizeof(msg));
		check_line(msg);
		err[0] = '\0';
		if (sbx_broker_socket(body, dir, sizeof(dir), err,
		    sizeof(err)) == 0) {
			if (dir[0] != '/' || strlen(dir) >= sizeof(dir))
				abort();
		} else if (err[0] == '\0')
			abort();
	}
	free(buf);
}

static void
fuzz_names(const char *text, size_t len)
{
	char *s = malloc(len + 1), out[97];

	if (s == NULL)
		return;
	memcpy(s, text, len);
	s[len] = '\0';
	(void)sbx_id_ok(s, SBX_ID_MAX);
	if (sbx_user_ok(s)) {
		if (strlen(s) > SBX_USER_MAX)
			abort();
		check_line(s);
	}
	sbx_text_safe(s, out, sizeof(out));
	if (strlen(out) >= sizeof(out))
		abort();
	check_line(out);
	free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data + 1;

	if (size == 0)
		return 0;
	switch (data[0]) {
	case 'c':
		fuzz_cfg(text, size - 1);
		break;
	case 'r':
		fuzz_rec(text, size - 1);
		break;
	case 'h':
		fuzz_http(text, size - 1);
		break;
	case 'p':
		fuzz_profile(text, size - 1);
		break;
	default:
		fuzz_names(text, size - 1);
		break;
	}
	return 0;
}
