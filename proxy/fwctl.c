/*
 * fwctl.c: sluiced's firewall glue (fwctl.h): when and what to apply.
 *
 * The table is applied at start and on a reload that changes it; it is
 * never removed at exit (the rules outlive sluiced, so that a crash
 * fails closed).  The netlink work is the helper's (priv.h, fwmsg.h);
 * this file decides, keeps the running ruleset to compare against, and
 * writes the status /v1/health shows (px.fw).
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/daemon.h"
#include "proxy/fwctl.h"
#include "proxy/fwcfg.h"
#include "proxy/priv.h"
#include "firewall/fw.h"
#include "firewall/fwmsg.h"

static struct fw_ruleset *fw_rs;   /* in the kernel; NULL: disabled */
static char *fw_text;              /* fw_render(fw_rs), to see changes */
/* The firewall helper: the only process that talks netlink (priv.h). */
static int fw_fd = -1;
static pid_t fw_pid = -1;
#define FW_HELPER_TIMEOUT_MS 30000

/* Ask the helper to apply c's table: it rebuilds, checks, applies and
 * reads back.  0 / -1 with err; a helper that stopped answering is let
 * go (fail closed: its table stays, further applies fail). */
static int
fw_send(const struct cfg *c, char *err, size_t errlen)
{
	struct fw_config fc;
	int r;

	if (fw_fd < 0) {
		snprintf(err, errlen, "no firewall helper: the firewall was "
		    "disabled when sluiced started, or its helper is gone; "
		    "enabling it takes a restart");
		return -1;
	}
	if (fw_config_from_cfg(&fc, c, "/etc/resolv.conf") != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r = fw_helper_apply(fw_fd, &fc, FW_HELPER_TIMEOUT_MS, err, errlen);
	fw_config_clear(&fc);
	if (r == -2) {
		close(fw_fd);
		fw_fd = -1;
		priv_helper_reap(fw_pid, 1000);
		fw_pid = -1;
	}
	return r == 0 ? 0 : -1;
}

/* The ruleset of c and its text.  0 / -1 with err. */
static int
fw_make(const struct cfg *c, struct fw_ruleset **rsp, char **textp,
    char *err, size_t errlen)
{
	struct fw_config fc;

	*rsp = NULL;
	*textp = NULL;
	if (fw_config_from_cfg(&fc, c, "/etc/resolv.conf") != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*rsp = fw_build(&fc, err, errlen);
	fw_config_clear(&fc);
	if (*rsp == NULL)
		return -1;
	*textp = fw_render(*rsp);
	if (*textp == NULL) {
		fw_free(*rsp);
		*rsp = NULL;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static void
fw_set_table(const char *name)
{
	snprintf(px.fw.table, sizeof(px.fw.table), "inet %s", name);
}

/*
 * What the kernel now holds: rs and its text (NULL, NULL when the
 * firewall is off) as table inet <table>, in status since applied_at.
 * What was held before is freed.
 */
static void
fw_hold(struct fw_ruleset *rs, char *text, const char *table,
    enum px_fw_status status, time_t applied_at)
{
	fw_free(fw_rs);
	free(fw_text);
	fw_rs = rs;
	fw_text = text;
	fw_set_table(table);
	px.fw.status = status;
	px.fw.applied_at = applied_at;
	px.fw.error[0] = '\0';
}

int
fwctl_start(const struct cfg *c)
{
	char err[512];
	struct fw_ruleset *rs;
	char *text;

	fw_set_table(c->firewall.table);
	if (!c->firewall.enabled) {
		px.fw.status = PX_FW_DISABLED;
		return 0;
	}
	if (fw_make(c, &rs, &text, err, sizeof(err)) != 0) {
		px_log(PX_ERR, "firewall: table inet %s: %s; sluiced will not "
		    "start without its firewall (firewall.enabled is true)",
		    c->firewall.table, err);
		return -1;
	}
	if (fw_send(c, err, sizeof(err)) != 0) {
		px_log(PX_ERR, "firewall: cannot apply table inet %s: %s; "
		    "sluiced will not start without its firewall (set "
		    "firewall.enabled to false to run without it)",
		    c->firewall.table, err);
		fw_free(rs);
		free(text);
		return -1;
	}
	fw_hold(rs, text, c->firewall.table, PX_FW_APPLIED, time(NULL));
	px_log(PX_INFO, "firewall: table inet %s applied and verified",
	    c->firewall.table);
	return 0;
}

/*
 * On reload, the last step that may fail: apply nc's table if it differs
 * from the one in the kernel.  On failure the running table is kept (the
 * batch is atomic; if the read back found a difference the helper
 * applies the running table again) and -1 returned with err; health then
 * says "failed" until an apply succeeds.  Disabling leaves the table in
 * the kernel, and the helper running, so that enabling it again works.
 */
int
fwctl_reload(const struct cfg *nc, char *err, size_t errlen)
{
	struct fw_ruleset *rs;
	char *text;
	int refilled;

	if (!nc->firewall.enabled) {
		if (fw_rs != NULL)
			px_log(PX_WARN, "firewall: disabled by the new "
			    "configuration; table inet %s stays in the kernel "
			    "(sluiced --remove-firewall removes it)",
			    fw_table_name(fw_rs));
		fw_hold(NULL, NULL, nc->firewall.table, PX_FW_DISABLED, 0);
		return 0;
	}
	if (fw_make(nc, &rs, &text, err, errlen) != 0)
		goto fail;
	if (fw_rs != NULL && strcmp(text, fw_text) == 0) {
		/* unchanged: nothing to apply; the running table is right */
		fw_free(rs);
		free(text);
		px.fw.status = PX_FW_APPLIED;
		px.fw.error[0] = '\0';
		return 0;
	}
	/* the helper refills the sets in place when only their elements
	 * changed (rules and counters stay), else replaces the table; on
	 * failure it restores the running table */
	if (fw_send(nc, err, errlen) != 0) {
		fw_free(rs);
		free(text);
		goto fail;
	}
	refilled = strcmp(err, "refilled") == 0;
	fw_hold(rs, text, nc->firewall.table, PX_FW_APPLIED, time(NULL));
	px_log(PX_INFO, "firewall: table inet %s %s and verified",
	    nc->firewall.table, refilled ? "sets refilled (rules and "
	    "counters kept)" : "re-applied");
	return 0;
fail:
	px.fw.status = PX_FW_FAILED;
	snprintf(px.fw.error, sizeof(px.fw.error), "reload: %s", err);
	return -1;
}

int
fwctl_spawn_helper(const struct cfg *c, const struct priv_user *as_user)
{
	char err[512];

	if (!c->firewall.enabled)
		return 0;
	fw_fd = priv_helper_spawn(c->firewall.table, as_user, &fw_pid, err,
	    sizeof(err));
	if (fw_fd < 0) {
		px_log(PX_ERR, "firewall helper: %s", err);
		return -1;
	}
	return 0;
}

void
fwctl_shutdown(void)
{
	/* the table stays in the kernel: only the memory goes, and the
	 * helper, whose socket closes here */
	fw_free(fw_rs);
	free(fw_text);
	fw_rs = NULL;
	fw_text = NULL;
	if (fw_fd >= 0)
		close(fw_fd);
	fw_fd = -1;
	priv_helper_reap(fw_pid, 2000);
	fw_pid = -1;
}

int
fwctl_command(const char *path, int remove)
{
	struct fw_ruleset *rs = NULL;
	struct fw_config fc;
	char err[512], *text;
	struct cfg *c;
	int rc = 1;

	c = cfg_load(path, err, sizeof(err));
	if (c == NULL) {
		fprintf(stderr, "sluiced: %s\n", err);
		return 1;
	}
	if (remove) {
		const char *g = getenv("SLUICE_FW_NETNS_GUARD");

		if (g != NULL && strcmp(g, "1") == 0 && fw_in_host_netns()) {
			fprintf(stderr, "sluiced: refusing to remove a table in "
			    "the host's network namespace "
			    "(SLUICE_FW_NETNS_GUARD=1)\n");
			goto out;
		}
		if (fw_remove(c->firewall.table, err, sizeof(err)) != 0) {
			fprintf(stderr, "sluiced: remove table inet %s: %s\n",
			    c->firewall.table, err);
			goto out;
		}
		rc = 0;
		goto out;
	}
	if (fw_config_from_cfg(&fc, c, "/etc/resolv.conf") != 0) {
		fprintf(stderr, "sluiced: out of memory\n");
		goto out;
	}
	rs = fw_build(&fc, err, sizeof(err));
	fw_config_clear(&fc);
	if (rs == NULL) {
		fprintf(stderr, "sluiced: firewall: %s\n", err);
		goto out;
	}
	text = fw_render(rs);
	if (text != NULL) {
		fputs(text, stdout);
		free(text);
		rc = fflush(stdout) == 0 ? 0 : 1;
	}
out:
	fw_free(rs);
	cfg_free(c);
	return rc;
}

