/*
 * image_verbs.h: sluice-run's image verbs (image build, list, rm: the
 * administrator's, root), on the image store (image/sbx_image.h); the
 * exit statuses are run_api.h's.
 */
#ifndef SLUICE_IMAGE_VERBS_H
#define SLUICE_IMAGE_VERBS_H

#include "sandbox-glue/executor/backend/sbx_cfg.h"

/* The verb: args are what follows "image" (build [--cached] PROFILE,
 * list, rm PROFILE|DIGEST), NULL-terminated; c gives the store
 * (image_dir, profiles_dir, image_suite, image_sources); json: the
 * answer as JSON; cached: build's --cached given before the verb.
 * Returns the exit status; exits on an error (after a message on
 * stderr). */
int image_verb(const struct sbx_cfg *c, int json, int cached, char **args);

/* sluice-run [--json] [--config FILE] image VERB ...: the options of the
 * image verbs, the configuration, then image_verb as root.  Returns the
 * exit status. */
int image_main(int argc, char **argv);

#endif /* SLUICE_IMAGE_VERBS_H */
