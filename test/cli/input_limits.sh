#!/usr/bin/env bash
# Bad input that used to cost memory or time (issue 15 item 12):
# - `gpuheal diagnose` and `report --scenario` on a scenario with a 128 MiB
#   line: the line is refused while it is read ("line N: longer than 65536
#   bytes: skipped"), memory stays flat (peak RSS within 40 MB of the same
#   file without that line; it used to hold the whole line), and the lines
#   around it still decide;
# - `gpuheal policy lint` on a flow list nested 100,000 deep: refused at
#   once, naming the line and the 64-level limit (it used to take time
#   growing with the square of the depth).
set -uo pipefail
bin=${GH_BIN:?GH_BIN is the directory of the built binaries}/gpuheal
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
[ -x /usr/bin/time ] || { echo "skip: no /usr/bin/time"; exit 0; }

# rss_kb OUT ERR CMD...: runs CMD, prints its peak RSS in KB.
rss_kb() {
  local out=$1 err=$2; shift 2
  /usr/bin/time -f '%M' -o "$tmp/rss" "$@" > "$out" 2> "$err"
  echo "$?" > "$tmp/rc"
  cat "$tmp/rss" | tail -n 1
}

xid='{"ts":"2026-11-29T07:05:00.000000Z","node":"gpu-02","gpu":3,"pci":"0000:3b:00.0","source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."}'
head='{"scenario":"long-line","nodes":["gpu-01","gpu-02"],"gpus_per_node":8}'
step='{"ts":"2026-11-29T07:04:00.000000Z","source":"telemetry","kind":"step","job":"ml/llm","rank":0,"step":1,"step_ms":1000}'
{ echo "$head"; echo "$step"; echo "$xid"; } > "$tmp/small.jsonl"
{ echo "$head"; echo "$step"
  printf '{"ts":"2026-11-29T07:04:30.000000Z","msg":"'; head -c $((128 * 1024 * 1024)) /dev/zero | tr '\0' a; echo '"}'
  echo "$xid"; } > "$tmp/long.jsonl"

small=$(rss_kb "$tmp/d0" "$tmp/e0" "$bin" diagnose "$tmp/small.jsonl")
long=$(rss_kb "$tmp/d1" "$tmp/e1" "$bin" diagnose "$tmp/long.jsonl")
rc=$(cat "$tmp/rc")
grep -q 'line 3: longer than 65536 bytes: skipped' "$tmp/e1" \
  && ok "diagnose: the 128 MiB line is refused naming line 3" || bad "diagnose: stderr: $(head -c 300 "$tmp/e1")"
[ $((long - small)) -lt 40000 ] && ok "diagnose: peak RSS $long KB with the long line, $small KB without" \
  || bad "diagnose: peak RSS $long KB with the long line, $small KB without (the line was held)"
grep -q '"class":"gpu_hardware"' "$tmp/d1" && cmp -s "$tmp/d0" "$tmp/d1" \
  && ok "diagnose: the lines around it decide as without it (exit $rc)" || bad "diagnose: output differs: $(cat "$tmp/d1")"

small=$(rss_kb "$tmp/r0" "$tmp/f0" "$bin" report --html "$tmp/small.html" --scenario "$tmp/small.jsonl")
long=$(rss_kb "$tmp/r1" "$tmp/f1" "$bin" report --html "$tmp/long.html" --scenario "$tmp/long.jsonl")
[ $((long - small)) -lt 40000 ] && ok "report --scenario: peak RSS $long KB with the long line, $small KB without" \
  || bad "report --scenario: peak RSS $long KB with the long line, $small KB without"
grep -q 'long.jsonl: line 3: longer than 65536 bytes' "$tmp/f1" && ok "report --scenario: says the long line was skipped: $(grep -m1 'line' "$tmp/f1")" \
  || bad "report --scenario: stderr: $(head -c 300 "$tmp/f1")"
grep -q 'fallen off the bus' "$tmp/long.html" && ok "report --scenario: the XID after the long line is in the report" \
  || bad "report --scenario: the XID is not in the report"

# policy lint: nesting.
{ echo "version: 1"; printf 'rules: '; head -c 100000 /dev/zero | tr '\0' '['; head -c 100000 /dev/zero | tr '\0' ']'; echo; } > "$tmp/deep.yaml"
"$bin" policy lint "$tmp/deep.yaml" > "$tmp/l1" 2>&1
rc=$?
[ $rc = 1 ] && grep -q 'deep.yaml:2: error: nested deeper than 64 levels' "$tmp/l1" \
  && ok "policy lint: 100,000-deep flow list refused: $(head -n 1 "$tmp/l1")" || bad "policy lint (exit $rc): $(head -c 300 "$tmp/l1")"
# 64 levels are not refused for their depth (the schema has its own say).
{ echo "version: 1"; printf 'rules: '; head -c 63 /dev/zero | tr '\0' '['; head -c 63 /dev/zero | tr '\0' ']'; echo; } > "$tmp/d64.yaml"
"$bin" policy lint "$tmp/d64.yaml" > "$tmp/l2" 2>&1
grep -q 'nested deeper' "$tmp/l2" && bad "policy lint: 64 levels refused as too deep" \
  || ok "policy lint: 64 levels are within the limit: $(tail -n 1 "$tmp/l2")"
"$bin" policy default > "$tmp/default.yaml"
"$bin" policy lint "$tmp/default.yaml" | grep -q ': ok (' && ok "policy lint: the default policy is ok" \
  || bad "policy lint: the default policy: $("$bin" policy lint "$tmp/default.yaml")"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
