#!/usr/bin/env bash
# `gpuheal policy lint` on RecoveryPolicy objects (what users kubectl apply):
# deploy/policy-default.yaml passes; a bad rule, a wrong apiVersion or kind,
# a missing name or spec each fail with exit 1 and a line naming the object,
# the field and the line its document starts on; several objects in one
# file (---) are each checked; a bad match.conditions entry is named; the
# policy file form still lints as before.
# Prints ok/FAIL lines and "policy_lint_objects: N passed, N failed".
set -uo pipefail
cd "$GH_SOURCE_DIR"
g=${GH_BIN:?}/gpuheal
pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
t=$(mktemp -d "${TMPDIR:-/tmp}/gh-lintobj.XXXXXX")
trap 'rm -rf "$t"' EXIT
# lint FILE WANT_RC WANT_LINE...: exit status and each line of the output
lint() {
  local f=$1 rc=$2; shift 2
  local out st
  out=$("$g" policy lint "$f" 2>&1); st=$?
  local want; want=$(printf '%s\n' "$@")
  if [ "$st" = "$rc" ] && [ "$out" = "$want" ]; then ok "lint $(basename "$f"): exit $st, $(tail -n 1 <<<"$out")"
  else bad "lint $f: exit $st (want $rc)"; diff <(echo "$want") <(echo "$out") | sed 's/^/     | /'; fi
}
n=$(grep -c '^  - name:' deploy/policy-default.yaml)
lint deploy/policy-default.yaml 0 "deploy/policy-default.yaml: ok (1 RecoveryPolicy, $n rules, 0 warnings)"

# every bad class is reported, each at its own line (the CRD's schema, as
# the API server checks it; issue 26: line 1 and only the first before)
sed 's/class: gpu_hardware/class: gpu_hw/' deploy/policy-default.yaml > "$t/badclass.yaml"
want=()
while IFS=: read -r ln _; do
  ri=$(( $(head -n "$ln" "$t/badclass.yaml" | grep -c '^  - name:') - 1 ))
  want+=("$t/badclass.yaml:$ln: error: RecoveryPolicy \"default\": spec.rules[$ri].match.class: \"gpu_hw\" is not one of the allowed values")
done < <(grep -n 'class: gpu_hw' "$t/badclass.yaml")
lint "$t/badclass.yaml" 1 "${want[@]}" "$t/badclass.yaml: ${#want[@]} errors"
sed 's|^apiVersion: gpuheal.io/v1alpha1|apiVersion: gpuheal.io/v1|' deploy/policy-default.yaml > "$t/api.yaml"
lint "$t/api.yaml" 1 "$t/api.yaml:1: error: apiVersion \"gpuheal.io/v1\": expected gpuheal.io/v1alpha1" \
  "$t/api.yaml: 1 error"
printf 'apiVersion: gpuheal.io/v1alpha1\nkind: Incident\nmetadata: {name: x}\nspec: {}\n' > "$t/kind.yaml"
lint "$t/kind.yaml" 1 "$t/kind.yaml:1: error: kind \"Incident\": expected RecoveryPolicy" "$t/kind.yaml: 1 error"
printf 'apiVersion: gpuheal.io/v1alpha1\nkind: RecoveryPolicy\nspec: {rules: []}\n' > "$t/noname.yaml"
lint "$t/noname.yaml" 1 "$t/noname.yaml:1: error: metadata.name missing" "$t/noname.yaml: 1 error"
printf 'apiVersion: gpuheal.io/v1alpha1\nkind: RecoveryPolicy\nmetadata: {name: x}\n' > "$t/nospec.yaml"
lint "$t/nospec.yaml" 1 "$t/nospec.yaml:1: error: RecoveryPolicy \"x\": spec missing" "$t/nospec.yaml: 1 error"

# two objects: the second's bad code is reported at its own line
{ cat deploy/policy-default.yaml; echo ---; sed 's/name: default/name: two/; s/codes: \[79\]/codes: [79000]/' deploy/policy-default.yaml; } > "$t/two.yaml"
second=$(grep -n 'codes: \[79000\]' "$t/two.yaml" | head -1 | cut -d: -f1)
lint "$t/two.yaml" 1 \
  "$t/two.yaml:$second: error: RecoveryPolicy \"two\": spec.rules[1].match.codes[0]: 79000 is above the maximum 65535" \
  "$t/two.yaml: 1 error"
{ cat deploy/policy-default.yaml; echo ---; sed 's/name: default/name: two/' deploy/policy-default.yaml; echo ---; } > "$t/two-ok.yaml"
lint "$t/two-ok.yaml" 0 "$t/two-ok.yaml: ok (2 RecoveryPolicies, $((2 * n)) rules, 0 warnings)"

{ cat deploy/policy-default.yaml; echo ---; echo '# only a comment'; echo ---; cat deploy/policy-default.yaml; } > "$t/dup.yaml"
lint "$t/dup.yaml" 1 \
  "$t/dup.yaml:$(( $(wc -l < deploy/policy-default.yaml) + 4 )): error: RecoveryPolicy \"default\" appears twice in the file (applied, the second replaces the first)" \
  "$t/dup.yaml: 1 error"

# match.conditions (Node conditions): each must be a condition type
sed 's/conditions: \[KernelDeadlock, /conditions: ["", /' deploy/policy-default.yaml > "$t/cond.yaml"
ri=$(( $(grep '^  - name:' deploy/policy-default.yaml | grep -n 'node-cannot-run-work' | cut -d: -f1) - 1 ))
cl=$(grep -n 'conditions: \["",' "$t/cond.yaml" | head -1 | cut -d: -f1)
lint "$t/cond.yaml" 1 \
  "$t/cond.yaml:$cl: error: RecoveryPolicy \"default\": spec.rules[$ri].match.conditions[0]: empty (at least 1 character)" \
  "$t/cond.yaml: 1 error"

# the file form, unchanged
"$g" policy default > "$t/file.yaml"
r=$("$g" policy default | grep -cE '^  - name:|^- name:')
lint "$t/file.yaml" 0 "$t/file.yaml: ok ($r rules, 0 warnings)"
printf 'version: 1\nbogus: 1\nrules: []\n' > "$t/bogus.yaml"
out=$("$g" policy lint "$t/bogus.yaml" 2>&1); st=$?
[ $st = 1 ] && grep -q 'unknown top-level key "bogus"' <<<"$out" && ok "file form: unknown key still refused" ||
  bad "file form: exit $st: $out"

# Issue 26: what a new user typed - a boolean misspelt, a misspelt key, a
# misspelt class and action: each refused at its line, with "did you mean"
cat > "$t/typos.yaml" <<'YAML'
apiVersion: gpuheal.io/v1alpha1
kind: RecoveryPolicy
metadata:
  name: typos
spec:
  dryRun: flase
  rulez:
    - name: a
      match: {class: gpu_hardwre, codes: [79]}
      actions: [{action: drain_nod}]
YAML
lint "$t/typos.yaml" 1 \
  "$t/typos.yaml:5: error: RecoveryPolicy \"typos\": spec.rules: required, missing" \
  "$t/typos.yaml:6: error: RecoveryPolicy \"typos\": spec.dryRun: a boolean (true or false) is needed, not a string \"flase\"" \
  "$t/typos.yaml:7: error: RecoveryPolicy \"typos\": spec.rulez: unknown field \"rulez\" (did you mean \"rules\"?)" \
  "$t/typos.yaml: 3 errors"
sed -i 's/rulez:/rules:/' "$t/typos.yaml"
lint "$t/typos.yaml" 1 \
  "$t/typos.yaml:6: error: RecoveryPolicy \"typos\": spec.dryRun: a boolean (true or false) is needed, not a string \"flase\"" \
  "$t/typos.yaml:9: error: RecoveryPolicy \"typos\": spec.rules[0].match.class: \"gpu_hardwre\" is not one of the allowed values (did you mean \"gpu_hardware\"?)" \
  "$t/typos.yaml:10: error: RecoveryPolicy \"typos\": spec.rules[0].actions[0].action: \"drain_nod\" is not one of the allowed values (did you mean \"drain_node\"?)" \
  "$t/typos.yaml: 3 errors"

# The policy file form: a misspelt key gets "did you mean", and the rule
# it broke does not make the rules after it "never match" (it used to).
cat > "$t/file-typo.yaml" <<'YAML'
version: 1
rules:
  - name: a
    match: {kind: xid, codes: [79]}
    actions: [isolate_node]
  - name: b
    match: {clas: gpu_hardware}
    actions: [drain_node]
  - name: c
    match: {class: gpu_hardware, kind: xid}
    actions: [drain_node]
YAML
lint "$t/file-typo.yaml" 1 \
  "$t/file-typo.yaml:7: error: match: unknown key \"clas\" (did you mean \"class\"?)" \
  "$t/file-typo.yaml: 1 error"

echo "policy_lint_objects: $pass passed, $fail failed"
[ $fail = 0 ]
