/*
 * sluice-run.c: the command line of the session executor.  Every verb is
 * a call of sluice-execd's API (run_api.c): the daemon alone makes
 * sandboxes.  The verb image is the image store's (image_verbs.c: build,
 * list, rm; root).  There is no local mode here: the backends are driven
 * directly only by the build tree's test driver
 * (tests/executor/sluice-run-local.c).
 */
#include "sluice-config.h"

#include <stdio.h>
#include <string.h>

#include "sandbox-glue/executor/cli/image_verbs.h"
#include "sandbox-glue/executor/cli/run_api.h"

/*
 * --local anywhere before "--" is refused; the verb image is
 * image_main's; everything else is the API's.  The verb is the first
 * word that is neither an option nor an option's argument.
 */
int
main(int argc, char **argv)
{
	static const char *const with_arg[] = { "--state-dir", "--control",
	    "--config", "--chat", "--tenant", "--user", "--tier", "--backend",
	    "--workspace", "--timeout", "--output-cap", "--env",
	    "--idle-after", "--remove-after", "--profile", "--socket", "--id",
	    "--limit", "--cwd", "--shell", "--glob", "--offset", "--manager",
	    "--old", "--new", NULL };
	const char *verb = NULL;
	int i, k;

	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--local") == 0) {
			/* the installed command line makes no sandbox of
			 * its own */
			fprintf(stderr, "sluice-run: --local: not in this "
			    "sluice-run: sandboxes are sluice-execd's (the "
			    "build tree's sluice-run-local drives the backends "
			    "for their tests)\n");
			return EX_USAGE;
		}
		if (argv[i][0] != '-') {
			if (verb == NULL)
				verb = argv[i];
			continue;
		}
		for (k = 0; with_arg[k] != NULL; k++)
			if (strcmp(argv[i], with_arg[k]) == 0) {
				i++;    /* its argument */
				break;
			}
	}
	if (verb != NULL && strcmp(verb, "image") == 0)
		return image_main(argc, argv);
	return run_api_main(argc, argv);
}
