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

#endif
