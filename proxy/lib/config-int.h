/*
 * config-int.h: what the files of sluiced's configuration module share
 * (proxy/lib/config*.c), and white-box tests of it.  Nothing else
 * includes it; the rest of sluiced has config.h.
 *
 *   config.c         load, defaults, free, the policy built (config.h)
 *   config_dump.c    --print-config: the rows printed
 *   config_keys.c    one row per key and its handlers; checks between keys
 *   config_engine.c  the rows walked, read, defaulted; error messages
 *                    (its contract is config_engine.h: sluice-execd's
 *                    configuration is read by it too)
 *   config_pos.c     JSON path -> line:col in the text
 *
 * Calls go down this list, never up (tests/layering.sh refuses a cycle).
 */
#ifndef SLUICE_CONFIG_INT_H
#define SLUICE_CONFIG_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "proxy/lib/config.h"
#include "proxy/lib/config_engine.h"

/* ---- config_keys.c */

extern const struct cfg_key cfg_root_keys[];
/* Checks between keys, run once everything is read. */
int cfg_cross_check(struct cfg_ctx *x, json_t *root) SLUICE_MUSTCHECK;

#endif /* SLUICE_CONFIG_INT_H */
