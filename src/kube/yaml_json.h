/* yaml_json.h - YAML text (one document, via libyaml) into the jansson tree
 * every other gpuheal module reads, so YAML and JSON configs share one walker.
 *
 * Bounded: input size, nesting depth and node count are capped; aliases and
 * merge keys are refused (no billion-laughs); duplicate keys are an error. */
#ifndef GH_KUBE_YAML_JSON_H
#define GH_KUBE_YAML_JSON_H

#include <stddef.h>

#include <jansson.h>

#include "common/err.h"

#define GH_YAML_MAX_INPUT (4u << 20) /* bytes */
#define GH_YAML_MAX_DEPTH 64
#define GH_YAML_MAX_NODES 200000

/* Parses the first document of buf[0..len) into *out (new reference, caller
 * json_decref()s). Plain scalars resolve as YAML 1.2 core schema (null, true,
 * false, integers, floats); quoted scalars stay strings; an empty document
 * gives JSON null. Returns GH_OK, GH_EINVAL (syntax; err says where),
 * GH_ELIMIT, GH_EUNSUPPORTED (aliases, non-scalar keys) or GH_ENOMEM. */
int gh_yaml_to_json(const char *buf, size_t len, json_t **out, struct gh_err *err);

#endif
