/* json.h - reading jansson objects by key path: the one accessor for
 * "the string at metadata.name, or NULL" that every module needs when it
 * reads a Kubernetes object, a signal or a stored record.
 *
 * Every call takes a borrowed object (may be NULL) and a path of object keys
 * ended by the macros' own NULL; it never allocates and returns borrowed
 * values (owned by the object) or a plain number. A missing key, a non-object
 * on the way or a value of the wrong type gives NULL (or the default). */
#ifndef GH_COMMON_JSON_H
#define GH_COMMON_JSON_H

#include <jansson.h>
#include <stdint.h>

/* The value at the key path (borrowed), or NULL. */
json_t *gh_json_get_path(const json_t *o, const char *const *keys);
/* The string at the key path (borrowed), or NULL when missing or not a string. */
const char *gh_json_str_path(const json_t *o, const char *const *keys);
/* The integer at the key path, or def when missing or not an integer. */
int64_t gh_json_int_path(const json_t *o, int64_t def, const char *const *keys);

/* gh_json_str(pod, "spec", "nodeName"): the path as arguments (at least one). */
#define gh_json_get(o, ...) gh_json_get_path((o), (const char *const[]){__VA_ARGS__, NULL})
#define gh_json_str(o, ...) gh_json_str_path((o), (const char *const[]){__VA_ARGS__, NULL})
#define gh_json_int(o, def, ...) gh_json_int_path((o), (def), (const char *const[]){__VA_ARGS__, NULL})

#endif
