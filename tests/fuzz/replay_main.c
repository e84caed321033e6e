/*
 * replay_main.c: runs a fuzz harness over files given on the command line
 * when the build has no libFuzzer, so the harnesses stay compiled and
 * their seed corpora run as regression tests in every build.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
main(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		uint8_t *buf;
		long n;

		if (f == NULL) {
			perror(argv[i]);
			return 1;
		}
		if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
		    fseek(f, 0, SEEK_SET) != 0) {
			fclose(f);
			return 1;
		}
		buf = malloc((size_t)n + 1);
		if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			fclose(f);
			return 1;
		}
		fclose(f);
		LLVMFuzzerTestOneInput(buf, (size_t)n);
		free(buf);
	}
	return 0;
}
