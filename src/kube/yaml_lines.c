/* yaml_lines.c - where in a YAML document a value is: the line of the key
 * (or list item) a path such as "spec.rules[0].match.class" names, so that
 * a message about a field points at its line, not the document's first. */
#include "kube/yaml_lines.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <yaml.h>

#define DEPTH_MAX 64
#define PATH_MAX_LEN 256

struct level {
    bool map;      /* a mapping (else a sequence) */
    bool want_key; /* mapping: the next scalar is a key */
    long index;    /* sequence: the next item's index */
    size_t len;    /* path length at this level */
};

/* Appends the child name of the value about to start at top to path:
 * ".key" or "[i]"; returns false when it does not fit. */
static bool child(char *path, size_t *len, const struct level *top, const char *key)
{
    int w = top->map ? snprintf(path + *len, PATH_MAX_LEN - *len, "%s%s", *len ? "." : "", key)
                     : snprintf(path + *len, PATH_MAX_LEN - *len, "[%ld]", top->index);
    if (w < 0 || (size_t)w >= PATH_MAX_LEN - *len)
        return false;
    *len += (size_t)w;
    return true;
}

int gh_yaml_line_of(const char *buf, size_t len, const char *want)
{
    yaml_parser_t p;
    if (!want || !yaml_parser_initialize(&p))
        return 0;
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    struct level st[DEPTH_MAX];
    int depth = 0, line = 0;
    char path[PATH_MAX_LEN] = "";
    size_t plen = 0;
    char key[PATH_MAX_LEN] = "";
    size_t key_line = 0;
    bool done = false;
    while (!done && !line) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev))
            break;
        yaml_event_type_t t = ev.type;
        bool node = t == YAML_SCALAR_EVENT || t == YAML_MAPPING_START_EVENT ||
                    t == YAML_SEQUENCE_START_EVENT || t == YAML_ALIAS_EVENT;
        struct level *top = depth ? &st[depth - 1] : NULL;
        if (node && top && top->map && top->want_key) {
            /* a key: remember it; its value's path is decided by it */
            snprintf(key, sizeof key, "%s",
                     t == YAML_SCALAR_EVENT ? (const char *)ev.data.scalar.value : "?");
            key_line = ev.start_mark.line + 1;
            top->want_key = false;
            yaml_event_delete(&ev);
            continue;
        }
        if (node) {
            /* a value: its path, and the line of its key or item */
            size_t saved = plen;
            size_t at_line = top && top->map ? key_line : ev.start_mark.line + 1;
            bool fits = !top || child(path, &plen, top, key);
            if (fits && !strcmp(path, want))
                line = (int)at_line;
            if (top && top->map)
                top->want_key = true;
            else if (top)
                top->index++;
            if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT) {
                if (depth == DEPTH_MAX)
                    break;
                st[depth++] = (struct level){t == YAML_MAPPING_START_EVENT, true, 0, plen};
            } else {
                plen = saved;
                path[plen] = '\0';
            }
        } else if (t == YAML_MAPPING_END_EVENT || t == YAML_SEQUENCE_END_EVENT) {
            if (depth)
                depth--;
            /* back to the parent's path */
            plen = depth ? st[depth - 1].len : 0;
            path[plen] = '\0';
        } else if (t == YAML_DOCUMENT_END_EVENT || t == YAML_STREAM_END_EVENT) {
            done = true;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return line;
}
