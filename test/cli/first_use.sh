#!/usr/bin/env bash
# What a new user reads first (issue 26 item 4), checked as they read it:
# `gpuheal xid` has a header, names the rule that decides and that rule's
# actions (not the catalog's suggestions: XID 79's default rule does not
# drain), says "not in catalog" once, and follows --policy; `explain` and
# `timeline` without --db say how to name the audit store; a straggler's
# reason says which costs are the policy's defaults.
set -uo pipefail
gh="$GH_BIN/gpuheal"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { local what="$1"; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

"$gh" xid 79 154 9999 > "$tmp/xid" 2>&1
check "xid: a header line names the columns" grep -q '^CODE  *CLASS  *SEVERITY  *RULE  *ACTIONS' "$tmp/xid"
check "xid 79: the default rule gpu-fell-off-bus and its actions, no drain_node" \
  grep -Eq '^79 .* gpu-fell-off-bus +isolate_node,restart_from_checkpoint,reboot_node ' "$tmp/xid"
check "xid 79: drain_node (a catalog suggestion the rule does not take) not printed" \
  bash -c "! grep '^79 ' '$tmp/xid' | grep -q drain_node"
check "xid 154: the line's stated recovery action comes first" \
  grep -Eq "^154 .*the line's stated action" "$tmp/xid"
is_once() { [ "$(grep '^9999 ' "$tmp/xid" | grep -o 'not in' | wc -l)" = 1 ]; }
check "xid 9999: 'not in the catalog' said once" is_once
cat > "$tmp/p.yaml" <<'YAML'
version: 1
rules:
  - name: my-bus-rule
    match: {kind: xid, codes: [79]}
    actions: [drain_node]
YAML
"$gh" xid --policy "$tmp/p.yaml" 79 > "$tmp/xid2" 2>&1
check "xid --policy: the given policy's rule and actions" grep -Eq '^79 .* my-bus-rule +drain_node ' "$tmp/xid2"
"$gh" xid --json 79 > "$tmp/xid.json" 2>&1
check "xid --json: the rule next to the catalog's suggestions" python3 -c "
import json,sys; d=json.load(open('$tmp/xid.json'))
assert d['rule']['name']=='gpu-fell-off-bus' and 'drain_node' not in d['rule']['actions'], d
assert 'drain_node' in d['actions'], d"

# explain / timeline with no store at the default path and no --db
for c in explain timeline; do
  (cd "$tmp" && env -u GPUHEAL_DB "$gh" $c node/n1 > "$tmp/$c.out" 2> "$tmp/$c.err"); rc=$?
  check "$c without --db: exit 1, says the default is missing and how to name a store" \
    bash -c "[ $rc = 1 ] && grep -q 'no database at' '$tmp/$c.err' && grep -q -- '--db sqlite:PATH' '$tmp/$c.err' && grep -q GPUHEAL_DB '$tmp/$c.err'"
done
GPUHEAL_DB=sqlite:"$tmp/none.db" "$gh" explain node/n1 > /dev/null 2> "$tmp/given.err"
check "explain with a store named: no hint about the default" bash -c "! grep -q 'that is the default' '$tmp/given.err'"

# A straggler's reason says when the remaining run and restart cost are the
# policy's defaults ("remaining 24.00 h" read as if the job had said so).
scn="${GH_SOURCE_DIR:-$(dirname "$0")/../..}/test/scenarios"
"$gh" diagnose "$scn/ext-straggler-1of64.jsonl" > "$tmp/strag.out" 2>&1
check "straggler reason: the 24 h remaining run is said to be the policy's default" \
  grep -q "remaining 24.00 h, exceeds the restart cost of 0.17 h (remaining run and restart cost: the policy's defaults, the job does not say)" "$tmp/strag.out"
"$gh" diagnose "$scn/gray-ib-retrain-job-ending.jsonl" > "$tmp/net.out" 2>&1
check "a job that states its remaining run: only the restart cost is called a default" \
  grep -q "over the remaining 0.25 h do not exceed a restart's 0.17 h (restart cost: the policy's defaults, the job does not say)" "$tmp/net.out"

# The controller's --help states the budget a chart install has in force
# (it said "(10, 10%)" while the chart's policy sets 5%).
src="${GH_SOURCE_DIR:-$(dirname "$0")/../..}"
chart=$(sed -n 's/^ *maxUnavailableNodes: *"\{0,1\}\([0-9]*%\{0,1\}\)"\{0,1\}.*/\1/p' "$src/deploy/helm/gpuheal/values.yaml" | head -1)
help=$("$GH_BIN/gpuheal-controller" --help 2>&1 | grep -- '--max-unavailable')
check "controller --help: the default budget and the chart's ($chart) as the values say" \
  bash -c "[ -n '$chart' ] && grep -q \"the chart's sets $chart\" <<< \"\$1\" && grep -q '10 nodes and 10%, the lower' <<< \"\$1\"" _ "$help"

echo "first_use: $pass passed, $fail failed"
[ $fail -eq 0 ]
