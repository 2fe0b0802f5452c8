/* policy_cr.h - RecoveryPolicy objects (deploy/crds/gpuheal.io_recoverypolicies.yaml)
 * as the engine's rules: each object's spec.rules checked and converted
 * (the reverse of tools/gen-policy-cr.py), and the set of objects merged
 * into one policy for the engine, highest spec.priority first.
 *
 * Mapping, per rule: match.class -> the rule's class; kinds, codes,
 * threshold, repetitions, window as in the policy YAML; a description
 * containing "engine: min_severity S, debounce D, boot_grace G" (what
 * gen-policy-cr.py writes there) sets those too. actions: the entries up to
 * and including the first with escalateAfter W are the base actions; from
 * the (maxRetries + 2)-th incident of the rule on the same node or job
 * within W, that entry is replaced by the entries after it (the escalation).
 * Without escalateAfter every entry is a base action.
 *
 * An object's spec.nodeSelector limits the nodes its rules govern
 * (gh_policy_crset_governs; the controller's engine skips, for a finding
 * on a node, the rules of objects that do not select it).
 *
 * An object whose rules do not convert is rejected as a whole; the set
 * keeps the last version of it that was accepted. Settings (reorder
 * window, detectors) are never taken from objects: they stay the base
 * policy's (--policy FILE or the built-in one). */
#ifndef GH_CONTROL_POLICY_CR_H
#define GH_CONTROL_POLICY_CR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "engine/policy.h"

/* Appends the rules of spec (a RecoveryPolicy's spec, borrowed) to out.
 * GH_EINVAL with err naming the field ("spec.rules[2].match.class: unknown
 * class \"gpu\"") and out->n_rules unchanged when any rule is invalid;
 * GH_ELIMIT when out would exceed GH_POLICY_MAX_RULES. */
int gh_policy_cr_rules(const json_t *spec, struct gh_policy *out, struct gh_err *err);

/* "90s", "1h30m", "500ms", "7d" (a sum of number+unit terms, units ms, s,
 * m, h, d) into *ns; false for anything else. */
bool gh_policy_cr_duration(const char *s, int64_t *ns);

/* A RecoveryPolicy's spec.nodeSelector (borrowed; NULL or empty: every
 * node) selects a node whose metadata.labels are labels (borrowed; NULL:
 * none) when every label it names is there with the same value. */
bool gh_policy_cr_selects(const json_t *selector, const json_t *labels);

/* A RecoveryPolicy's spec.budgets (borrowed; NULL: none) maxUnavailableNodes
 * as gh_guard_parse_budget reads it (an integer count, or a string "N" or
 * "P%"): *nodes and *pct set (-1: unset; both -1 when the field is absent).
 * GH_EINVAL with err naming the field when it is out of range (a negative
 * count, "150%") or of another type; 0 is zero nodes. */
int gh_policy_cr_budget(const json_t *budgets, int *nodes, double *pct, struct gh_err *err);

/* The verdict on one object, for its status and the log. */
struct gh_policy_cr_verdict {
    bool accepted;
    bool fresh;     /* this version was judged by this call (log it) */
    bool changed;   /* its accepted rules changed (accepted) */
    int rules;      /* rules accepted (of the version in force) */
    char reason[64];/* "Accepted", "InvalidRule", "TooManyRules" */
    char message[GH_ERR_MAX + 64];
};

struct gh_policy_crset;

/* base: borrowed, must outlive the set (its settings, and its rules while
 * no object is accepted). NULL on OOM. */
struct gh_policy_crset *gh_policy_crset_new(const struct gh_policy *base);
void gh_policy_crset_free(struct gh_policy_crset *s);

/* Starts a pass over the objects: each offered again in this pass stays,
 * the others are dropped by gh_policy_crset_end. */
void gh_policy_crset_begin(struct gh_policy_crset *s);
/* Offers one RecoveryPolicy object (borrowed; metadata.name,
 * metadata.generation, spec). A version already judged (same name and
 * generation) is not converted again. */
void gh_policy_crset_offer(struct gh_policy_crset *s, const json_t *obj,
                           struct gh_policy_cr_verdict *v);
/* Ends the pass. Returns a new merged policy (caller frees) when the rules
 * in force differ from those of the previous pass (or the first pass), else
 * NULL. *n_objects: objects whose rules are in force (0: the base's). */
struct gh_policy *gh_policy_crset_end(struct gh_policy_crset *s, int *n_objects);

/* Whether rule (an index into the merged policy of the last pass, which is
 * the engine's: the last one gh_policy_crset_end returned) governs a node
 * whose metadata.labels are labels (borrowed; NULL: none): true when the
 * rule's object has no spec.nodeSelector or its selector selects the
 * node, and for rules of the base policy. When not, why (cap bytes) says
 * so: "RecoveryPolicy NAME governs only nodes with the labels k=v". */
bool gh_policy_crset_governs(const struct gh_policy_crset *s, int rule, const json_t *labels,
                             char *why, size_t cap);
/* True when an object in force has a non-empty spec.nodeSelector (else
 * every rule governs every node). */
bool gh_policy_crset_has_selectors(const struct gh_policy_crset *s);

#endif
