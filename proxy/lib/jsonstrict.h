/*
 * jsonstrict.h: the one way sluice's programs read a JSON text.
 *
 * jansson's defaults leave room for two readers of the same bytes to see
 * different documents: json_loads stops at a NUL byte and takes what came
 * before it, and a key given twice keeps its last value.  A gateway in
 * front of a webhook receiver, or any tool that reads the state file,
 * could then act on another decision than sluiced.  Every JSON text that
 * sluiced, sluicectl and sluice-run read goes through here: webhook
 * answers, control API bodies and answers, the configuration, the state
 * file, connection log records, sluice-run's files.
 *
 * The rules: exactly one JSON object or array (the callers say which),
 * nothing after it but white space, no key twice in any object, no NUL
 * byte anywhere in the text and no \u0000 in a string (strings stay C
 * strings), valid UTF-8.
 */
#ifndef SLUICE_JSONSTRICT_H
#define SLUICE_JSONSTRICT_H

#include <stddef.h>

#include <jansson.h>

/* buf[0..len) under the rules above; NULL with err filled (line, column,
 * position and text as jansson gives them) when it breaks one. */
json_t *jsonstrict_load(const char *buf, size_t len, json_error_t *err);

/* A regular file of at most max bytes, read whole, then as above.  For a
 * file that cannot be read err has line -1 and the reason in its text. */
json_t *jsonstrict_load_file(const char *path, size_t max,
    json_error_t *err);

/*
 * The fields of an API body (the control API's rules and credentials),
 * each error naming the key.  jsonstrict_str: a string without NUL at
 * key, *out pointing into o; absent or null is fine unless required.
 * jsonstrict_strv: an array of at most max such strings, each one ok()
 * says is what (the error says "key[i]: expected what"), none twice
 * when unique; a required one has at least one; copied into a new
 * NULL-ended *out (util_strv_free) even on failure, *n what was copied.
 * 0, or -1 with err.
 */
typedef int (*jsonstrict_item_ok)(const char *s);
/* The first key of object o that is not in keys (NULL-ended), or NULL
 * when every key is one of them: the caller says so in its own words. */
const char *jsonstrict_unknown_key(json_t *o, const char *const *keys);
int jsonstrict_str(json_t *o, const char *key, int required,
    const char **out, char *err, size_t errlen) SLUICE_MUSTCHECK;
int jsonstrict_strv(json_t *o, const char *key, int required, size_t max,
    int unique, jsonstrict_item_ok ok, const char *what, char ***out,
    size_t *n, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* A string already read (v) that ok() refuses: -1 with err "key:
 * expected what"; else 0. */
int jsonstrict_check(const char *key, const char *v, jsonstrict_item_ok ok,
    const char *what, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* And back: n strings as a JSON array, NULL when out of memory. */
json_t *jsonstrict_strv_json(char *const *v, size_t n);

#endif /* SLUICE_JSONSTRICT_H */
