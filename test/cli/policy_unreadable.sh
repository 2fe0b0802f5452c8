#!/usr/bin/env bash
# A policy path that opens but cannot be read (a directory) is refused by
# each of the three policy loaders (`gpuheal policy lint`, `gpuheal diagnose
# --policy`, `gpuheal-controller --policy`) with the system's reason; it used
# to be parsed as whatever was read before the error (a directory was
# reported by all three as an "empty policy").
set -uo pipefail
bin=${GH_BIN:?GH_BIN is the directory of the built binaries}
src=${GH_SOURCE_DIR:?GH_SOURCE_DIR is the source tree}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
mkdir "$tmp/dir"
scen=$(ls "$src"/test/scenarios/*.jsonl | head -n 1)

"$bin/gpuheal" policy lint "$tmp/dir" > "$tmp/o1" 2> "$tmp/e1"; rc=$?
[ "$rc" = 1 ] && grep -qx "$tmp/dir: Is a directory" "$tmp/e1" && ! grep -q 'empty policy' "$tmp/o1" \
  && ok "policy lint: a directory is refused: $(cat "$tmp/e1")" \
  || bad "policy lint (exit $rc): $(cat "$tmp/o1" "$tmp/e1" | head -c 300)"

"$bin/gpuheal" diagnose --policy "$tmp/dir" "$scen" > "$tmp/o2" 2> "$tmp/e2"; rc=$?
[ "$rc" != 0 ] && grep -qx "gpuheal: $tmp/dir: Is a directory" "$tmp/e2" && [ ! -s "$tmp/o2" ] \
  && ok "diagnose --policy: a directory is refused: $(cat "$tmp/e2")" \
  || bad "diagnose --policy (exit $rc): $(cat "$tmp/o2" "$tmp/e2" | head -c 300)"

"$bin/gpuheal-controller" --policy "$tmp/dir" > "$tmp/o3" 2> "$tmp/e3" < /dev/null; rc=$?
[ "$rc" = 1 ] && grep -qx "gpuheal-controller: --policy $tmp/dir: Is a directory" "$tmp/e3" \
  && ok "gpuheal-controller --policy: a directory is refused: $(cat "$tmp/e3")" \
  || bad "gpuheal-controller --policy (exit $rc): $(cat "$tmp/o3" "$tmp/e3" | head -c 300)"

# a readable policy still loads (the check does not refuse every file)
"$bin/gpuheal" policy default > "$tmp/p.yaml"
"$bin/gpuheal" policy lint "$tmp/p.yaml" | grep -q ': ok (' && ok "policy lint: a readable file still loads" \
  || bad "policy lint of the default policy failed"
"$bin/gpuheal" diagnose --policy "$tmp/p.yaml" "$scen" > /dev/null 2>&1 \
  && ok "diagnose --policy: a readable file still loads" || bad "diagnose --policy of the default policy failed"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
