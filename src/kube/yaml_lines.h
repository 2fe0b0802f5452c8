/* yaml_lines.h - the line of a field in YAML text, for messages. */
#ifndef GH_KUBE_YAML_LINES_H
#define GH_KUBE_YAML_LINES_H

#include <stddef.h>

/* The 1-based line, within buf[0..len) (the first document), of the key or
 * list item that path names ("spec.rules[0].match.class", "spec.rulez",
 * "spec.rules[2]"); 0 when the path is not there or the text does not
 * parse. */
int gh_yaml_line_of(const char *buf, size_t len, const char *path);

#endif
