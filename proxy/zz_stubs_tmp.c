/*
 * TEMPORARY, not part of any release: stand-ins for webhook.c while it
 * is written on its branch, so that main builds with prompt.c.  Delete
 * this file (and its line in proxy/include.am) when webhook.c is
 * merged.  (events.c is merged: its stand-ins are gone.)
 */
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "webhook.h"
int wh_configured(void) { return 0; }
void wh_prompt(const char *id, const void *j) { (void)id; (void)j; }
void wh_prompt_done(const char *id) { (void)id; }
