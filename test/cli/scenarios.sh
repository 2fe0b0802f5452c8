#!/usr/bin/env bash
# scenarios.sh - the labelled scenario suite (test/scenarios) scored by
# `gpuheal scenario score`, and the contract of `gpuheal diagnose` and
# `gpuheal policy lint` (spec sections 2 and 3): deterministic output, stdin
# equal to a file, bad lines reported with their line number while the rest
# still decides, lint problems with line numbers.
set -euo pipefail
bin=${GH_BIN:?GH_BIN is the directory of the built binaries}/gpuheal
src=${GH_SOURCE_DIR:?GH_SOURCE_DIR is the source tree}
scn=$src/test/scenarios
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. The suite: every scenario decides as labelled.
"$bin" scenario score "$scn"

# 2. Deterministic, and stdin is the same as a file.
"$bin" diagnose "$scn/xid-storm.jsonl" > "$tmp/a"
"$bin" diagnose "$scn/xid-storm.jsonl" > "$tmp/b"
"$bin" diagnose - < "$scn/xid-storm.jsonl" > "$tmp/c"
cmp -s "$tmp/a" "$tmp/b" || fail "diagnose is not deterministic"
cmp -s "$tmp/a" "$tmp/c" || fail "diagnose from stdin differs from the file"
[ "$(wc -l < "$tmp/a")" -eq 1 ] || fail "xid-storm: expected one incident"
# Shuffled input decides the same (replay sorts by ts, stable).
head -n 1 "$scn/straggler-one-gpu.jsonl" > "$tmp/shuf.jsonl"
tail -n +2 "$scn/straggler-one-gpu.jsonl" | awk 'BEGIN{srand(7)}{print rand() "\t" $0}' | sort -k1,1 | cut -f2- >> "$tmp/shuf.jsonl"
"$bin" diagnose "$scn/straggler-one-gpu.jsonl" | sed 's/"id":"[^"]*",//' > "$tmp/s1"
"$bin" diagnose "$tmp/shuf.jsonl" | sed 's/"id":"[^"]*",//' > "$tmp/s2"
cmp -s "$tmp/s1" "$tmp/s2" || fail "shuffled lines changed the decision"

# 3. Every incident line has the spec's fields.
for f in "$scn"/xid79-fell-off-bus.jsonl "$scn"/app-xid13-many-gpus.jsonl "$scn"/sdc-replica-checksum.jsonl; do
  "$bin" diagnose "$f" > "$tmp/inc"
  while IFS= read -r line; do
    for key in '"id":' '"class":' '"first_ts":' '"decided_ts":' '"actions":[' '"evidence":[' '"rule":' '"reason":'; do
      case $line in *"$key"*) ;; *) fail "$f: incident without $key: $line" ;; esac
    done
  done < "$tmp/inc"
done
"$bin" diagnose "$scn/app-xid13-many-gpus.jsonl" | grep -q '"class":"application","node":' && fail "an application incident blames a node"

# 4. Bad lines: reported with the line number on stderr, the rest used.
rc=0
"$bin" diagnose "$scn/bad-lines.jsonl" > "$tmp/out" 2> "$tmp/err" || rc=$?
[ "$rc" -eq 0 ] || fail "bad lines should not fail diagnose (rc $rc)"
grep -q 'line 2:' "$tmp/err" || fail "no line number for a bad line: $(cat "$tmp/err")"
grep -q 'line 4:' "$tmp/err" || fail "no line number for a bad ts"
grep -q '"class":"gpu_memory"' "$tmp/out" || fail "the good lines did not decide"
rc=0
"$bin" diagnose --strict "$scn/bad-lines.jsonl" > /dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "--strict should fail on bad lines (rc $rc)"
rc=0
"$bin" diagnose "$tmp/does-not-exist.jsonl" > /dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "a missing file should fail (rc $rc)"

# 5. Policy lint: the default is clean; problems come with line numbers.
"$bin" policy lint "$src/data/policy-default.yaml" | grep -q ': ok ' || fail "default policy not clean"
"$bin" policy default > "$tmp/default.yaml"
cmp -s "$tmp/default.yaml" "$src/data/policy-default.yaml" || fail "built-in policy differs from data/policy-default.yaml"
cat > "$tmp/bad.yaml" <<'YAML'
version: 1
rules:
  - name: app
    match: {class: application}
    actions: [isolate_node]
  - name: typo
    match: {class: gpu_hardwre}
    actions: [none]
YAML
rc=0
"$bin" policy lint "$tmp/bad.yaml" > "$tmp/lint" || rc=$?
[ "$rc" -eq 1 ] || fail "lint should fail a bad policy (rc $rc)"
grep -q "bad.yaml:3: error: .*blames no node" "$tmp/lint" || fail "lint: $(cat "$tmp/lint")"
grep -q "bad.yaml:7: error: .*unknown class" "$tmp/lint" || fail "lint: $(cat "$tmp/lint")"
# A policy given to diagnose is used.
sed 's/actions: \[isolate_node, restart_from_checkpoint, reboot_node\]/actions: [drain_node]/' \
  "$src/data/policy-default.yaml" > "$tmp/mine.yaml"
"$bin" diagnose --policy "$tmp/mine.yaml" "$scn/xid79-fell-off-bus.jsonl" | grep -q '"actions":\["drain_node","restart_from_checkpoint"\]' \
  || fail "--policy not applied (the job XID 79 killed is restarted whatever the rule says)"
# Issue 26: numbers in diagnose's output read as written: a slowdown to 4
# decimals, a step time as its signal gave it (not 0.096642374992370605 or
# 1087.1700000000001, the float and the nearest double's 17 digits).
"$bin" diagnose "$scn/ext-straggler-1of64.jsonl" > "$tmp/digits.out" || fail "diagnose ext-straggler-1of64"
grep -q '"slowdown":0\.[0-9]\{1,4\}[,}]' "$tmp/digits.out" || fail "no slowdown to 4 decimals: $(grep -o '"slowdown":[^,}]*' "$tmp/digits.out" | head -1)"
long=$(grep -oE '[0-9]+\.[0-9]{13,}' "$tmp/digits.out" | head -3 | tr '\n' ' ' || true)
[ -z "$long" ] || fail "numbers with 16+ digits in diagnose's output: $long"

echo "scenarios.sh: ok"

# 6. False isolations and missed restarts are printed as their own lines:
# a scenario whose expectation names another node and wants a restart the
# default policy's rule does not make (a drain-only rule).
mkdir -p "$tmp/lines"
cp "$scn/xid79-fell-off-bus.jsonl" "$tmp/lines/x.jsonl"
node=$("$bin" diagnose "$scn/xid79-fell-off-bus.jsonl" | sed -n 's/.*"node":"\([^"]*\)".*/\1/p' | head -n 1)
[ -n "$node" ] || fail "xid79-fell-off-bus: no node blamed"
cat > "$tmp/lines/x.expect.json" <<'JSON'
{"description": "wrong on purpose", "incidents": [{"class": "gpu_hardware", "node": "nobody",
 "job": "no/such-job", "actions_include": ["restart_from_checkpoint"]}], "allow_extra": true}
JSON
rc=0
"$bin" scenario score "$tmp/lines" > "$tmp/score" || rc=$?
[ "$rc" -eq 1 ] || fail "a failing scenario should fail score (rc $rc)"
grep -q "^    false isolation: $node (gpu_hardware, rule gpu-fell-off-bus)" "$tmp/score" || fail "no false isolation line: $(cat "$tmp/score")"
grep -q "^    missed restart: no/such-job (gpu_hardware)" "$tmp/score" || fail "no missed restart line: $(cat "$tmp/score")"
grep -q "^missed restarts       1" "$tmp/score" || fail "no missed restarts total: $(cat "$tmp/score")"
grep -q "^false isolations      1" "$tmp/score" || fail "no false isolations total: $(cat "$tmp/score")"

