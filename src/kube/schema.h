/* schema.h - checks a JSON value against a CRD's OpenAPI v3 schema the way
 * the API server would refuse it (kubectl apply's strict field validation):
 * types (int-or-string included), unknown fields (with the closest known
 * name), required fields, enums, bounds of numbers, strings and lists, and
 * patterns (POSIX extended regular expressions: the CRDs' patterns use only
 * that common subset). CEL rules (x-kubernetes-validations) are not run. */
#ifndef GH_KUBE_SCHEMA_H
#define GH_KUBE_SCHEMA_H

#include <stddef.h>

#include <jansson.h>

/* One problem: where (a path such as "spec.rules[0].match.class") and what. */
struct gh_schema_problem {
    char path[200];
    char msg[240];
};

/* Called for each problem found, in document order; a non-zero return stops
 * the walk. */
typedef int (*gh_schema_report_fn)(void *ctx, const struct gh_schema_problem *p);

/* Checks value (borrowed) at path `at` against schema (an openAPIV3Schema
 * node, borrowed). Returns how many problems were reported. */
size_t gh_schema_check(const json_t *schema, const json_t *value, const char *at,
                       gh_schema_report_fn report, void *ctx);

/* The RecoveryPolicy CRD's text (deploy/crds/gpuheal.io_recoverypolicies.yaml,
 * embedded at build time by gh-policygen). */
const char *gh_crd_recoverypolicy_yaml(void);

#endif
