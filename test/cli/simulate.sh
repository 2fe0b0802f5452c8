#!/usr/bin/env bash
# gpuheal simulate and gpuheal advise checkpoint end to end: Young/Daly
# figures of the worked example; data/sim-presets.yaml equals the compiled-in
# presets; JSON output carries the documented fields and a fixed seed
# reproduces it byte for byte; the table; a checkpoint-interval sweep writes
# an SVG; bad usage exits 2 with a message.
set -uo pipefail
gh="$GH_BIN/gpuheal"
src="$GH_SOURCE_DIR"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { local what="$1"; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

# advise: reliability-numbers.md 4.2, scenario A with a 60 s stall and R = 10 min.
out=$("$gh" advise checkpoint --mtbf 185.6m --stall 60 --restart 10m)
check "advise: Young 19.3 min" grep -q '= 1156 s (19.3 min)' <<< "$out"
check "advise: Daly 18.6 min" grep -q '= 1116 s (18.6 min)' <<< "$out"
check "advise: Daly ETTR 0.853" grep -q "at Daly's tau 0.852[5-9]\|at Daly's tau 0.853" <<< "$out"
check "advise: prints the formulas" grep -q 'sqrt(2 delta M)' <<< "$out"
"$gh" advise checkpoint --mtbf 11136 --stall 60 --json > "$tmp/adv.json"
check "advise --json" python3 -c "
import json; d=json.load(open('$tmp/adv.json'))
assert abs(d['young_s']-1155.9) < 1 and abs(d['daly_s']-1116) < 1, d"
"$gh" advise checkpoint --job ml/llm --db x.db > /dev/null 2> "$tmp/err"; rc=$?
check "advise --job/--db without --stall: exit 2" test $rc -eq 2
check "advise --job/--db says why" grep -q 'audit store' "$tmp/err"
"$gh" advise checkpoint --mtbf 1h > /dev/null 2>&1; rc=$?
check "advise without --stall: exit 2" test $rc -eq 2
"$gh" advise checkpoint --mtbf -5 --stall 1 > /dev/null 2>&1; rc=$?
check "advise with a negative MTBF: exit 2" test $rc -eq 2

# Presets: the data file is the compiled-in table.
"$gh" simulate --print-presets > "$tmp/presets.yaml"
if diff -u "$src/data/sim-presets.yaml" "$tmp/presets.yaml" > "$tmp/diff"; then
  ok "data/sim-presets.yaml equals the compiled-in presets"
else
  bad "data/sim-presets.yaml differs from 'gpuheal simulate --print-presets':"; head -20 "$tmp/diff"
fi
check "--list-presets names llama3-16k" grep -q '^llama3-16k ' <("$gh" simulate --list-presets)

# JSON: fields, sanity, reproducibility.
args=(simulate --preset llama3-16k --days 4 --rate-scale 3 --seed 9 --json)
"$gh" "${args[@]}" > "$tmp/a.json" 2> "$tmp/err" || bad "simulate --json failed: $(cat "$tmp/err")"
"$gh" "${args[@]}" > "$tmp/b.json"
check "a fixed seed reproduces the output exactly" cmp -s "$tmp/a.json" "$tmp/b.json"
"$gh" "${args[@]/--seed 9/}" --seed 10 > "$tmp/c.json"
check "another seed gives another run" bash -c "! cmp -s '$tmp/a.json' '$tmp/c.json'"
check "JSON fields and sanity" python3 -c "
import json; d=json.load(open('$tmp/a.json'))
for k in ('ettr','goodput','interruptions','mttr_s','wasted_gpu_hours','false_isolations','checkpoint_interval_s'):
    assert k in d, k
assert 0 < d['ettr'] < 1 and 0 < d['goodput'] <= d['ettr'], d
assert d['interruptions']['total'] > 0 and 'gpu_hard' in d['interruptions']
assert d['wasted_gpu_hours']['total'] > 0 and 'lost_work' in d['wasted_gpu_hours']
assert abs(d['productive_gpu_hours'] + d['wasted_gpu_hours']['total'] - d['job_gpu_hours']) < 1e-6 * d['job_gpu_hours']
assert d['engine']['late_signals'] == 0 and d['engine']['incidents'] > 0
assert d['gpus'] == 16384 and d['days'] == 4 and d['policy'] == 'gpuheal'"

# Options change what they say they change.
"$gh" simulate --gpus 1024 --gpus-per-node 4 --days 2 --only-class gpu_hard,hbm_ecc \
  --checkpoint-stall 5 --checkpoint-interval 300 --restart 120 --policy xid-only --runs 2 --json \
  > "$tmp/o.json" 2> "$tmp/err" || bad "options run failed: $(cat "$tmp/err")"
check "options reach the model" python3 -c "
import json; d=json.load(open('$tmp/o.json'))
assert d['gpus'] == 1024 and d['gpus_per_node'] == 4 and d['nodes'] == 256 and d['runs'] == 2, d
assert d['checkpoint_interval_s'] == 300 and d['checkpoint_stall_s'] == 5 and d['restart_s'] == 120
assert d['policy'] == 'xid-only'
i = d['interruptions']
assert all(v == 0 for k, v in i.items() if k not in ('gpu_hard', 'hbm_ecc', 'total')), i"

# The job's replica-checksum comparisons: every one ships (agreeing too),
# on their own random stream (comparing more often changes no fault).
"$gh" simulate --days 2 --seed 4 --sdc-check 0 --json > "$tmp/k0.json"
"$gh" simulate --days 2 --seed 4 --sdc-check 60 --json > "$tmp/k60.json"
check "--sdc-check 60 ships the comparisons, same faults" python3 -c "
import json; a=json.load(open('$tmp/k0.json')); b=json.load(open('$tmp/k60.json'))
assert b['engine']['signals'] > a['engine']['signals'] + 2 * 86400 / 60 * 3, (a['engine'], b['engine'])
assert a['interruptions']['gpu_hard'] == b['interruptions']['gpu_hard'], (a['interruptions'], b['interruptions'])
assert 'human_rollbacks' in b"
"$gh" simulate --sdc-check -1 > /dev/null 2>&1; rc=$?
check "simulate --sdc-check -1: exit 2" test $rc -eq 2

# The job's sampled step telemetry (loss included) ships on a stream of its
# own: reporting changes no fault.
"$gh" simulate --days 2 --seed 4 --report 0 --json > "$tmp/r0.json"
"$gh" simulate --days 2 --seed 4 --report 60 --json > "$tmp/r60.json"
check "--report 60 ships step reports, same faults" python3 -c "
import json; a=json.load(open('$tmp/r0.json')); b=json.load(open('$tmp/r60.json'))
assert b['engine']['signals'] > a['engine']['signals'] + 2 * 86400 / 60 * 1.5, (a['engine'], b['engine'])
assert a['interruptions']['gpu_hard'] == b['interruptions']['gpu_hard'], (a['interruptions'], b['interruptions'])"
for a in "--sdc-spike 1.5" "--sdc-spike -0.1" "--report -1"; do
  # shellcheck disable=SC2086
  "$gh" simulate $a > /dev/null 2>&1; rc=$?
  check "simulate $a: exit 2" test $rc -eq 2
done

# The correlated processes: on in the presets, --no-correlated and a 0 scale
# turn them off; the false isolations per 10,000 GPU-days are in the JSON.
"$gh" simulate --days 3 --seed 2 --leaf-reboot 300 --json > "$tmp/c1.json"
"$gh" simulate --days 3 --seed 2 --leaf-reboot 300 --no-correlated --json > "$tmp/c0.json"
"$gh" simulate --days 3 --seed 2 --leaf-reboot 0 --rollout 0 --check-misfire 0 --json > "$tmp/cz.json"
check "correlated processes: fields, on and off" python3 -c "
import json; a=json.load(open('$tmp/c1.json')); b=json.load(open('$tmp/c0.json')); z=json.load(open('$tmp/cz.json'))
for k in ('false_isolations_correlated','false_isolations_by_class','false_isolations_per_10k_gpu_days',
          'false_isolations_correlated_per_10k_gpu_days','cluster_gpu_days'):
    assert k in a, k
assert a['engine']['signals'] > b['engine']['signals'], (a['engine'], b['engine'])
assert b == z, 'off and rate 0 differ'
assert b['false_isolations_correlated'] == 0 and 'leaf_reboot' in b['false_isolations_by_class']
assert abs(a['cluster_gpu_days'] - 2089 * 8 * 3) < 1e-6, a['cluster_gpu_days']
f = a['false_isolations'] / a['cluster_gpu_days'] * 1e4
assert abs(a['false_isolations_per_10k_gpu_days'] - f) <= 1e-6 * f, a"
check "table: false isolations per 10,000 GPU-days" grep -q '^  false isolations .* per 10,000 GPU-days' \
  <("$gh" simulate --days 1)
for a in "--leaf-reboot -1" "--rollout x" "--check-misfire -0.5"; do
  # shellcheck disable=SC2086
  "$gh" simulate $a > /dev/null 2>&1; rc=$?
  check "simulate $a: exit 2" test $rc -eq 2
done

# A policy file works like a built-in one.
"$gh" policy default > "$tmp/policy.yaml" 2> /dev/null
if [ -s "$tmp/policy.yaml" ]; then
  "$gh" simulate --days 2 --seed 3 --policy "$tmp/policy.yaml" --json > "$tmp/f.json" 2> "$tmp/err"
  "$gh" simulate --days 2 --seed 3 --json > "$tmp/g.json"
  check "--policy FILE (the default policy) = --policy gpuheal" python3 -c "
import json; a=json.load(open('$tmp/f.json')); b=json.load(open('$tmp/g.json'))
assert a['ettr'] == b['ettr'] and a['engine'] == b['engine'], (a['ettr'], b['ettr'])"
fi

# The table.
"$gh" simulate --days 2 > "$tmp/table" 2>&1
check "table: ETTR, goodput, MTTR, wasted" bash -c "grep -q '^  ETTR ' '$tmp/table' && grep -q '^  goodput' '$tmp/table' && grep -q '^  MTTR' '$tmp/table' && grep -q 'wasted GPU-hours' '$tmp/table'"

# Sweep: an SVG (and a PNG where rsvg-convert exists).
"$gh" simulate --gpus 1024 --days 3 --rate-scale 20 --sweep checkpoint-interval --points 4 \
  --out "$tmp/sweep" > "$tmp/sweep.txt" 2> "$tmp/err" || bad "sweep failed: $(cat "$tmp/err")"
check "sweep writes an SVG with one line per policy" bash -c "
  grep -q '<svg' '$tmp/sweep.svg' && [ \$(grep -c '<polyline' '$tmp/sweep.svg') -eq 4 ] &&
  grep -q 'k8s-default' '$tmp/sweep.svg' && grep -q 'gpuheal' '$tmp/sweep.svg'"
check "sweep prints the table" grep -q 'interval_s' "$tmp/sweep.txt"
if command -v rsvg-convert > /dev/null; then
  check "sweep writes a PNG" test -s "$tmp/sweep.png"
else
  check "sweep says the PNG was skipped" grep -q 'PNG skipped' "$tmp/sweep.txt"
fi

# Usage errors.
for a in "--gpus 1001" "--days 0" "--days x" "--only-class bogus" "--preset nope" "--policy nope" \
         "--checkpoint-interval -1" "--runs 0" "--sweep other" "--frobnicate"; do
  # shellcheck disable=SC2086
  "$gh" simulate $a > /dev/null 2> "$tmp/err"; rc=$?
  if [ $rc -eq 2 ] || { [ $rc -eq 1 ] && [ "$a" = "--policy nope" ]; }; then
    if [ -s "$tmp/err" ]; then ok "simulate $a: exit $rc with a message"; else bad "simulate $a: no message"; fi
  else
    bad "simulate $a: exit $rc"
  fi
done

# Issue 26: the table's counts read as counts: whole numbers for one run
# ("interruptions 503", not "503.0"), means with a decimal for several.
"$gh" simulate --preset llama3-16k --days 4 --rate-scale 3 --seed 9 > "$tmp/one.txt" 2>&1
check "one run: interruptions and isolations as whole numbers" \
  grep -Eq '^  interruptions +[0-9]+$' "$tmp/one.txt"
check "one run: no count with a decimal" \
  bash -c "! grep -E '^  (interruptions|isolations|rolled back by people) +[0-9]+\.[0-9]' '$tmp/one.txt'"
"$gh" simulate --preset llama3-16k --days 4 --rate-scale 3 --seed 9 --runs 2 > "$tmp/two.txt" 2>&1
check "two runs: counts are said to be means per run, with a decimal" \
  bash -c "grep -q 'means per run over 2 runs' '$tmp/two.txt' && grep -Eq '^  interruptions +[0-9]+\.[0-9]$' '$tmp/two.txt'"

echo "simulate: $pass passed, $fail failed"
[ $fail -eq 0 ]
