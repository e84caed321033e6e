/*
 * image_verbs.c: sluice-run's image verbs (image_verbs.h): build, list
 * and rm on the image store, root.  The installed sluice-run runs them
 * through image_main; the backends' test driver
 * (tests/executor/sluice-run-local.c) through image_verb.
 */
#include "sluice-config.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "sandbox-glue/executor/backend/sbx.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"
#include "sandbox-glue/executor/image/sbx_image.h"
#include "sandbox-glue/executor/cli/image_verbs.h"
#include "sandbox-glue/executor/cli/run_api.h"
#include "sandbox-glue/executor/cli/run_out.h"

#define PROG		"sluice-run"
#define DEF_STATE	"/run/sluice-run"
#define DEF_CONTROL	"/run/sluice/control.sock"

static void
json_out(json_t *o)
{
	/* ASCII only (\uXXXX beyond): the same strings to a JSON reader,
	 * and nothing a terminal would act on when shown raw */
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS |
	    JSON_ENSURE_ASCII);

	if (s == NULL)
		run_die(EX_FAIL, "cannot encode JSON");
	printf("%s\n", s);
	free(s);
	json_decref(o);
}

static int
img_exit(int rc)
{
	return rc == SBX_IMG_MISSING || rc == SBX_IMG_IN_USE ||
	    rc == SBX_IMG_UNKNOWN || rc == SBX_IMG_FORBIDDEN ? EX_IMAGE :
	    EX_FAIL;
}

static void
mib(char *buf, size_t len, uint64_t n)
{
	snprintf(buf, len, "%.1f MiB", (double)n / (1 << 20));
}

static int
cmd_image_build(const struct sbx_cfg *c, int json, int cached,
    const char *profile)
{
	const char *dirs[] = { c->profiles_dir, SLUICE_PROFILES_PATH, NULL };
	struct sbx_build_opts o;
	struct sbx_build_res r;
	char err[1024], a[32], b[32];
	int rc;

	if (profile == NULL || !sbx_id_ok(profile, SBX_ID_MAX) ||
	    strcmp(profile, SBX_PROFILE_HOST) == 0)
		run_die(EX_USAGE, "image build: a profile name (image build "
		    "PROFILE)");
	memset(&o, 0, sizeof(o));
	o.image_dir = c->image_dir;
	o.profile_dirs = dirs;
	o.profile = profile;
	o.suite = c->image_suite;
	o.sources = c->image_sources;
	o.cached = cached;
	o.timeout_s = 3600;
	o.verbose = !json;
	if ((rc = sbx_image_build(&o, &r, err, sizeof(err))) != 0)
		run_die(img_exit(rc), "image build %s: %s", profile,
		    run_safe(err));
	if (json) {
		json_out(json_pack("{s:s,s:s,s:s,s:b,s:b,s:I,s:I,s:I,s:I}",
		    "profile", profile, "digest", r.digest, "inputs", r.inputs,
		    "reused", r.reused, "cached", r.cached,
		    "size", (json_int_t)r.size,
		    "tree_bytes", (json_int_t)r.tree_bytes,
		    "packages", (json_int_t)r.npackages,
		    "build_ms", (json_int_t)r.build_ms));
		return EX_OK;
	}
	mib(a, sizeof(a), r.size);
	mib(b, sizeof(b), r.tree_bytes);
	if (r.cached)
		printf("profile %s: image %s (%s), built before from the same "
		    "inputs\n", profile, r.digest, a);
	else
		printf("profile %s: image %s (%s, %s of files, %zu packages) "
		    "%s in %.0f s\n", profile, r.digest, a, b, r.npackages,
		    r.reused ? "unchanged: the same bytes again," : "built",
		    (double)r.build_ms / 1000);
	return EX_OK;
}

static int
cmd_image_list(const struct sbx_cfg *c, int json)
{
	char err[512];
	json_t *o = sbx_image_list(c->image_dir, err, sizeof(err)), *e;
	size_t i;

	if (o == NULL)
		run_die(EX_FAIL, "image list: %s", run_safe(err));
	if (json) {
		json_out(o);
		return EX_OK;
	}
	printf("%-12s %-20s %10s %-20s %5s\n", "DIGEST", "PROFILES", "SIZE",
	    "BUILT", "USERS");
	json_array_foreach(json_object_get(o, "images"), i, e) {
		char names[128] = "", sz[32], when[32] = "-";
		json_t *n;
		size_t k;
		time_t t = (time_t)json_integer_value(json_object_get(e,
		    "built"));
		struct tm tm;

		json_array_foreach(json_object_get(e, "profiles"), k, n)
			snprintf(names + strlen(names), sizeof(names) -
			    strlen(names), "%s%s", k ? "," : "",
			    json_string_value(n));
		mib(sz, sizeof(sz), (uint64_t)json_integer_value(
		    json_object_get(e, "size")));
		if (t > 0 && gmtime_r(&t, &tm) != NULL)
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		printf("%-12.12s %-20s %10s %-20s %5lld\n",
		    json_string_value(json_object_get(e, "digest")),
		    names[0] ? names : "-", sz, when,
		    (long long)json_integer_value(json_object_get(e,
		    "users")));
	}
	json_decref(o);
	return EX_OK;
}

int
image_verb(const struct sbx_cfg *c, int json, int cached, char **args)
{
	char err[512], d[SBX_DIGEST_HEX + 1];
	int rc;

	if (args[0] == NULL)
		run_die(EX_USAGE, "image: build, list or rm");
	if (strcmp(args[0], "build") == 0) {
		const char *prof = NULL;
		int i;

		/* its option may follow "build" */
		for (i = 1; args[i] != NULL; i++)
			if (strcmp(args[i], "--cached") == 0)
				cached = 1;
			else if (prof == NULL && args[i][0] != '-')
				prof = args[i];
			else
				run_die(EX_USAGE,
				    "image build [--cached] PROFILE");
		return cmd_image_build(c, json, cached, prof);
	}
	if (strcmp(args[0], "list") == 0)
		return cmd_image_list(c, json);
	if (strcmp(args[0], "rm") == 0) {
		if (args[1] == NULL)
			run_die(EX_USAGE, "image rm PROFILE|DIGEST");
		if ((rc = sbx_image_rm(c->image_dir, args[1], d, err,
		    sizeof(err))) != 0)
			run_die(img_exit(rc), "image rm: %s", run_safe(err));
		if (json)
			json_out(json_pack("{s:s,s:b}", "digest", d, "removed",
			    1));
		else
			printf("removed image %s\n", d);
		return EX_OK;
	}
	run_die(EX_USAGE, "image: build, list or rm, not %s",
	    run_safe(args[0]));
}

static void
usage(FILE *f)
{
	fprintf(f,
"usage: " PROG " [--json] [--config FILE] image build|list|rm ...\n"
"  image build [--cached] PROFILE   build the profile's root image\n"
"  image list\n"
"  image rm PROFILE|DIGEST   (refused while a sandbox uses it)\n"
"The image store is root's (image_dir of the configuration).\n"
"exit: 0 ok, 1 failure, 2 usage, 9 image (missing, in use, unknown or\n"
"      forbidden profile).  See sluice-run(1).\n");
}

int
image_main(int argc, char **argv)
{
	enum { O_JSON = 256, O_STATE, O_CONTROL, O_CONFIG, O_CACHED, O_HELP };
	static const struct option lo[] = {
		{ "json", no_argument, NULL, O_JSON },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "control", required_argument, NULL, O_CONTROL },
		{ "config", required_argument, NULL, O_CONFIG },
		{ "cached", no_argument, NULL, O_CACHED },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	static struct sbx_cfg cfg;
	const char *state = NULL, *config = NULL;
	char err[512];
	int c, pass, json = 0, cached = 0;

	sbx_cfg_defaults(&cfg, DEF_STATE, DEF_CONTROL, SLUICE_SHIM_PATH);
	/* "+": stop at the verb, then at the first word after its options */
	for (pass = 0; pass < 2; pass++) {
		while ((c = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
			switch (c) {
			case O_JSON: json = 1; break;
			case O_STATE: state = optarg; break;
			case O_CONTROL: break;  /* the local mode's: unused */
			case O_CONFIG: config = optarg; break;
			case O_CACHED: cached = 1; break;
			case 'h': case O_HELP: usage(stdout); return EX_OK;
			default: usage(stderr); return EX_USAGE;
			}
		}
		if (pass == 0) {
			if (optind >= argc || strcmp(argv[optind], "image") != 0) {
				usage(stderr);
				return EX_USAGE;
			}
			optind++;
		}
	}
	if (config != NULL)
		if (sbx_cfg_load(&cfg, config, err, sizeof(err)) != 0)
			run_die(EX_USAGE, "%s", err);
	if (state != NULL)
		snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", state);
	if (cfg.state_dir[0] != '/')
		run_die(EX_USAGE, "--state-dir: an absolute path");
	if (geteuid() != 0)
		run_die(EX_FAIL,
		    "must run as root (the image store is root's)");
	return image_verb(&cfg, json, cached, argv + optind);
}
