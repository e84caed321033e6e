/*
 * fw_tool: drive firewall/ from a sluiced.json for the namespace test.
 *
 *   fw_tool print|netlink|apply|verify|remove CONFIG
 *   fw_tool update OLD NEW
 *
 * update brings the kernel from OLD's table to NEW's (fw_update) and
 * prints "refilled" (sets refilled in place) or "replaced".
 * print and netlink need no kernel.  The others refuse to run in the
 * host's network namespace (fw_in_host_netns), whatever the caller.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/lib/config.h"
#include "firewall/fw.h"
#include "proxy/fwcfg.h"

/* OLD's ruleset from a configuration file, or NULL with a message. */
static struct fw_ruleset *
load_rs(const char *path)
{
	struct fw_config fc;
	struct fw_ruleset *rs = NULL;
	struct cfg *c;
	char err[512];

	c = cfg_load(path, err, sizeof(err));
	if (c == NULL) {
		fprintf(stderr, "fw_tool: %s\n", err);
		return NULL;
	}
	if (fw_config_from_cfg(&fc, c, NULL) == 0) {
		rs = fw_build(&fc, err, sizeof(err));
		if (rs == NULL)
			fprintf(stderr, "fw_tool: %s: %s\n", path, err);
		fw_config_clear(&fc);
	}
	cfg_free(c);
	return rs;
}

static int
update(const char *old_path, const char *new_path)
{
	struct fw_ruleset *old = load_rs(old_path), *rs = load_rs(new_path);
	char err[512];
	int refilled, ret = 1;

	if (old != NULL && rs != NULL) {
		if (fw_update(old, rs, &refilled, err, sizeof(err)) != 0)
			fprintf(stderr, "fw_tool: update: %s\n", err);
		else {
			printf("%s\n", refilled ? "refilled" : "replaced");
			ret = 0;
		}
	}
	fw_free(old);
	fw_free(rs);
	return ret;
}

int
main(int argc, char **argv)
{
	struct fw_config fc;
	struct fw_ruleset *rs = NULL;
	struct cfg *c;
	char err[512];
	const char *cmd;
	char *text;
	int ret = 1;

	if (argc == 4 && strcmp(argv[1], "update") == 0) {
		if (fw_in_host_netns()) {
			fprintf(stderr, "fw_tool: refusing to touch nftables "
			    "in the host's network namespace\n");
			return 2;
		}
		return update(argv[2], argv[3]);
	}
	if (argc != 3) {
		fprintf(stderr, "usage: fw_tool print|netlink|apply|verify|"
		    "remove CONFIG | update OLD NEW\n");
		return 2;
	}
	cmd = argv[1];
	if (strcmp(cmd, "print") != 0 && strcmp(cmd, "netlink") != 0 &&
	    fw_in_host_netns()) {
		fprintf(stderr, "fw_tool: refusing to touch nftables in the "
		    "host's network namespace (run under unshare -n)\n");
		return 2;
	}
	c = cfg_load(argv[2], err, sizeof(err));
	if (c == NULL) {
		fprintf(stderr, "fw_tool: %s\n", err);
		return 2;
	}
	if (fw_config_from_cfg(&fc, c, NULL) != 0) {
		fprintf(stderr, "fw_tool: out of memory\n");
		goto out;
	}
	if (strcmp(cmd, "remove") == 0) {
		if (fw_remove(c->firewall.table, err, sizeof(err)) != 0)
			goto fail;
		ret = 0;
		goto out;
	}
	rs = fw_build(&fc, err, sizeof(err));
	if (rs == NULL)
		goto fail;
	if (strcmp(cmd, "print") == 0 || strcmp(cmd, "netlink") == 0) {
		text = cmd[0] == 'p' ? fw_render(rs) : fw_render_netlink(rs);
		if (text == NULL)
			goto out;
		fputs(text, stdout);
		free(text);
		ret = 0;
	} else if (strcmp(cmd, "apply") == 0) {
		if (fw_apply(rs, err, sizeof(err)) != 0)
			goto fail;
		ret = 0;
	} else if (strcmp(cmd, "verify") == 0) {
		if (fw_verify(rs, err, sizeof(err)) != 0)
			goto fail;
		ret = 0;
	} else {
		fprintf(stderr, "fw_tool: unknown command %s\n", cmd);
		ret = 2;
	}
	goto out;
fail:
	fprintf(stderr, "fw_tool: %s: %s\n", cmd, err);
out:
	fw_free(rs);
	fw_config_clear(&fc);
	cfg_free(c);
	return ret;
}
