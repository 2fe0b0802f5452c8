#!/usr/bin/env bash
# Every field of the CRDs in deploy/crds has a description (what `kubectl
# explain` shows): a walk of each openAPIV3Schema, the root, every property
# and the properties of array items, failing on a missing or empty one and
# naming it (metadata aside: the API server allows nothing in it, and explain
# shows ObjectMeta's own). test/integration/kube_crds.sh reads some through
# kubectl explain.
set -uo pipefail
cd "$GH_SOURCE_DIR"
python3 - deploy/crds/*.yaml <<'PY'
import sys, yaml
bad = total = 0
def walk(crd, node, path):
    global bad, total
    if path == "metadata":
        return  # the API server refuses anything in it: explain shows ObjectMeta's own
    total += 1
    d = node.get("description") if isinstance(node, dict) else None
    if not isinstance(d, str) or not d.strip():
        print("FAIL %s: %s has no description" % (crd, path or "(the kind)"))
        bad += 1
    for k, v in (node.get("properties") or {}).items():
        walk(crd, v, (path + "." if path else "") + k)
    items = node.get("items")
    if isinstance(items, dict):
        for k, v in (items.get("properties") or {}).items():
            walk(crd, v, path + "[]." + k)
for f in sys.argv[1:]:
    doc = yaml.safe_load(open(f))
    for v in doc["spec"]["versions"]:
        walk(doc["metadata"]["name"], v["schema"]["openAPIV3Schema"], "")
print("crd_descriptions: %d fields, %d without a description" % (total, bad))
sys.exit(1 if bad else 0)
PY
