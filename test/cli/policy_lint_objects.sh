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

sed 's/class: gpu_hardware/class: gpu_hw/' deploy/policy-default.yaml > "$t/badclass.yaml"
lint "$t/badclass.yaml" 1 \
  "$t/badclass.yaml:1: error: RecoveryPolicy \"default\": spec.rules[0].match.class: unknown class \"gpu_hw\"" \
  "$t/badclass.yaml: 1 error"
sed 's|^apiVersion: gpuheal.io/v1alpha1|apiVersion: gpuheal.io/v1|' deploy/policy-default.yaml > "$t/api.yaml"
lint "$t/api.yaml" 1 "$t/api.yaml:1: error: apiVersion \"gpuheal.io/v1\": expected gpuheal.io/v1alpha1" \
  "$t/api.yaml: 1 error"
printf 'apiVersion: gpuheal.io/v1alpha1\nkind: Incident\nmetadata: {name: x}\nspec: {}\n' > "$t/kind.yaml"
lint "$t/kind.yaml" 1 "$t/kind.yaml:1: error: kind \"Incident\": expected RecoveryPolicy" "$t/kind.yaml: 1 error"
printf 'apiVersion: gpuheal.io/v1alpha1\nkind: RecoveryPolicy\nspec: {rules: []}\n' > "$t/noname.yaml"
lint "$t/noname.yaml" 1 "$t/noname.yaml:1: error: metadata.name missing" "$t/noname.yaml: 1 error"
printf 'apiVersion: gpuheal.io/v1alpha1\nkind: RecoveryPolicy\nmetadata: {name: x}\n' > "$t/nospec.yaml"
lint "$t/nospec.yaml" 1 "$t/nospec.yaml:1: error: RecoveryPolicy \"x\": spec missing" "$t/nospec.yaml: 1 error"

# two objects: the second's bad code is reported at the line its document starts
{ cat deploy/policy-default.yaml; echo ---; sed 's/name: default/name: two/; s/codes: \[79\]/codes: [79000]/' deploy/policy-default.yaml; } > "$t/two.yaml"
second=$(( $(wc -l < deploy/policy-default.yaml) + 2 ))
lint "$t/two.yaml" 1 \
  "$t/two.yaml:$second: error: RecoveryPolicy \"two\": spec.rules[1].match.codes[0]: an integer 0-65535" \
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
lint "$t/cond.yaml" 1 \
  "$t/cond.yaml:1: error: RecoveryPolicy \"default\": spec.rules[$ri].match.conditions[0]: a condition type of 1-63 characters" \
  "$t/cond.yaml: 1 error"

# the file form, unchanged
"$g" policy default > "$t/file.yaml"
r=$("$g" policy default | grep -cE '^  - name:|^- name:')
lint "$t/file.yaml" 0 "$t/file.yaml: ok ($r rules, 0 warnings)"
printf 'version: 1\nbogus: 1\nrules: []\n' > "$t/bogus.yaml"
out=$("$g" policy lint "$t/bogus.yaml" 2>&1); st=$?
[ $st = 1 ] && grep -q 'unknown top-level key "bogus"' <<<"$out" && ok "file form: unknown key still refused" ||
  bad "file form: exit $st: $out"

echo "policy_lint_objects: $pass passed, $fail failed"
[ $fail = 0 ]
