/* json.c - key-path accessors over jansson objects (see json.h). */
#include "common/json.h"

json_t *gh_json_get_path(const json_t *o, const char *const *keys)
{
    json_t *v = (json_t *)o;
    for (; *keys; keys++) {
        if (!json_is_object(v))
            return NULL;
        v = json_object_get(v, *keys);
    }
    return v;
}

const char *gh_json_str_path(const json_t *o, const char *const *keys)
{
    return json_string_value(gh_json_get_path(o, keys));
}

int64_t gh_json_int_path(const json_t *o, int64_t def, const char *const *keys)
{
    const json_t *v = gh_json_get_path(o, keys);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}
