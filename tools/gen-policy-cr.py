#!/usr/bin/env python3
"""gen-policy-cr.py - mirrors the engine's default policy (data/policy-default.yaml)
and the XID catalog (data/xid-catalog.tsv) into the RecoveryPolicy CR form that
deploy/crds/gpuheal.io_recoverypolicies.yaml defines.

Writes deploy/policy-default.yaml (the RecoveryPolicy object) and
deploy/helm/gpuheal/files/policy-rules.yaml (its rules, the chart's default).
`--check` compares instead of writing (test/integration/deploy_manifests.sh).

The CR schema is narrower than the engine's policy language; the mapping:
  * match.class is one enum value: a rule over several classes becomes one
    rule per class; a rule without a class gets the class its kind always
    has in the engine (sxid/nvlink/pcie -> interconnect, XID 79 -> the
    catalog's class), and probe_result gets one rule per class a failed
    probe can be classified as (det_hardware.c on_probe).
  * actions [catalog] (the catalog's per-code actions) becomes one rule per
    (class, severity, actions) group of catalog codes, with `codes` listing
    them; min_severity on xid rules is expressed by those code lists.
  * min_severity on other kinds, debounce and boot_grace have no CR field:
    they are kept in the rule's description ("engine: ...").
  * escalate {after: N, within: W, actions: [...]}: the base actions, then
    the escalation's actions that are not already there; the last base action
    carries escalateAfter: W and maxRetries: N-2 (incidents of the rule on the
    same node or job repeated before the escalation applies).
Engine settings (reorder window, straggler, sdc, flapping ...) are not part
of the CR: they stay the engine's (data/policy-default.yaml).
"""
import argparse
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEPLOY = os.path.join(REPO, "deploy")
SEVERITIES = ["info", "low", "medium", "high", "critical"]
HW_CLASSES = ["gpu_hardware", "gpu_memory", "interconnect", "thermal_power"]
PROBE_CLASSES = ["gpu_hardware", "silent_data_corruption", "interconnect", "network", "gpu_memory"]
KIND_CLASS = {"sxid": "interconnect", "nvlink": "interconnect", "pcie": "interconnect",
              "gpu_lost": "gpu_hardware", "row_remap": "gpu_memory", "ecc": "gpu_memory",
              "nic": "network", "replica_checksum": "silent_data_corruption"}


def load_catalog(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            c = line.split("\t")
            rows.append({"code": int(c[0]), "class": c[3], "severity": c[4],
                         "flags": c[5], "actions": c[6].split(",")})
    return rows


def as_list(v):
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def slug(s):
    return s.replace("_", "-")


def note(match):
    extra = []
    for key in ("min_severity", "debounce", "boot_grace"):
        if key in match:
            extra.append(f"{key} {match[key]}")
    return ("engine: " + ", ".join(extra)) if extra else ""


def actions_with_escalation(base, escalate):
    out = [{"action": a} for a in base]
    if escalate:
        esc = escalate[0]
        out[-1]["escalateAfter"] = str(esc["within"])
        out[-1]["maxRetries"] = max(0, int(esc["after"]) - 2)
        for a in esc["actions"]:
            if a not in base:
                out.append({"action": a})
    return out


def cr_rule(name, desc, cls, kinds, codes, match, actions):
    m = {"class": cls}
    if codes:
        m["codes"] = codes
    if kinds:
        m["kinds"] = kinds
    if "condition" in match:
        m["conditions"] = as_list(match["condition"])
    if "threshold" in match:
        m["threshold"] = match["threshold"]
    if "repetitions" in match:
        m["repetitions"] = int(match["repetitions"])
    if "window" in match:
        m["window"] = str(match["window"])
    r = {"name": name[:63].rstrip("-")}
    if desc:
        r["description"] = desc
    r["match"] = m
    r["actions"] = actions
    return r


def convert(policy, catalog):
    by_code = {r["code"]: r for r in catalog}
    out = []
    for rule in policy["rules"]:
        name, match = rule["name"], rule["match"]
        kinds = as_list(match.get("kind"))
        codes = as_list(match.get("codes"))
        classes = as_list(match.get("class"))
        esc = rule.get("escalate")
        desc = note(match)
        if not classes:
            if "probe_result" in kinds:
                classes = PROBE_CLASSES
            elif codes and kinds == ["xid"]:
                classes = sorted({by_code[c]["class"] for c in codes})
            else:
                classes = sorted({KIND_CLASS[k] for k in kinds})
        if rule["actions"] == ["catalog"]:
            # one rule per (class, severity, catalog actions): the codes say it.
            lo = SEVERITIES.index(match.get("min_severity", "info"))
            # the earlier xid rules took the higher severities: exact tier here.
            tier = SEVERITIES[lo]
            for cls in classes:
                groups = {}
                for r in catalog:
                    if r["class"] == cls and r["severity"] == tier:
                        groups.setdefault(tuple(r["actions"]), []).append(r["code"])
                for acts, cs in sorted(groups.items(), key=lambda kv: kv[1][0]):
                    tag = "-".join(a.split("_")[0] for a in acts)
                    out.append(cr_rule(f"{name}-{slug(cls)}-{tag}",
                                       f"catalog {tier} {cls} XIDs; " + (desc or "engine: actions [catalog]"),
                                       cls, kinds, cs, {}, actions_with_escalation(list(acts), esc)))
            continue
        if kinds == ["xid"] and "min_severity" in match and not codes:
            # xid-low-repeating: all codes of the tier, the rule's own actions.
            tier = match["min_severity"]
            for cls in classes:
                cs = [r["code"] for r in catalog if r["class"] == cls and r["severity"] == tier]
                if cs:
                    out.append(cr_rule(f"{name}-{slug(cls)}", desc, cls, kinds, cs, match,
                                       actions_with_escalation(rule["actions"], esc)))
            continue
        for cls in classes:
            n = name if len(classes) == 1 else f"{name}-{slug(cls)}"
            out.append(cr_rule(n, desc, cls, kinds, codes, match,
                               actions_with_escalation(rule["actions"], esc)))
    names = [r["name"] for r in out]
    assert len(names) == len(set(names)), "duplicate rule names"
    assert len(out) <= 64, f"{len(out)} rules: the CRD allows 64"
    return out


HEADER = """\
# GENERATED by tools/gen-policy-cr.py from data/policy-default.yaml and
# data/xid-catalog.tsv - do not edit; edit those and re-run the script.
"""

POLICY_HEADER = HEADER + """\
#
# The default RecoveryPolicy: the engine's default rules in the CR form of
# deploy/crds/gpuheal.io_recoverypolicies.yaml (mapping notes: the script's
# header; what the CR cannot say is kept in each rule's description).
# Apply after the CRDs:  kubectl apply -f deploy/policy-default.yaml
# Rollout: set dryRun: true first, read the Incidents (kubectl get incidents,
# gpuheal explain), then set it back to false to enforce.
"""


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def dump(obj):
    return yaml.dump(obj, Dumper=_NoAliases, sort_keys=False, default_flow_style=None, width=100)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="compare, do not write")
    args = ap.parse_args()
    with open(os.path.join(REPO, "data", "policy-default.yaml"), encoding="utf-8") as f:
        policy = yaml.safe_load(f)
    rules = convert(policy, load_catalog(os.path.join(REPO, "data", "xid-catalog.tsv")))
    cr = {
        "apiVersion": "gpuheal.io/v1alpha1",
        "kind": "RecoveryPolicy",
        "metadata": {"name": "default", "labels": {"app.kubernetes.io/part-of": "gpuheal"}},
        "spec": {
            "priority": 0,
            "dryRun": False,
            "budgets": {"maxUnavailableNodes": "5%", "maxActionsPerHour": 20,
                        "nodeCooldown": "30m", "requireApproval": False},
            "rules": rules,
        },
    }
    files = {
        os.path.join(DEPLOY, "policy-default.yaml"): POLICY_HEADER + dump(cr),
        os.path.join(DEPLOY, "helm", "gpuheal", "files", "policy-rules.yaml"):
            HEADER + "# The chart's default RecoveryPolicy rules (values: policy.rules: [] uses these).\n"
            + dump(rules),
    }
    stale = 0
    for path, text in files.items():
        if args.check:
            try:
                with open(path, encoding="utf-8") as f:
                    same = f.read() == text
            except FileNotFoundError:
                same = False
            if not same:
                print(f"stale: {os.path.relpath(path, REPO)} (run tools/gen-policy-cr.py)")
                stale = 1
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"wrote {os.path.relpath(path, REPO)} ({len(rules)} rules)")
    return stale


if __name__ == "__main__":
    sys.exit(main())
