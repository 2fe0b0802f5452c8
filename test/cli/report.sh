#!/usr/bin/env bash
# report.sh - the contract of `gpuheal report --html` without a browser:
# usage errors, a missing store fails without leaving a file, the page is
# written whole (temporary file renamed) and byte-for-byte deterministic,
# "-" is standard output, subjects narrow it, bad lines are skipped, and a
# long scenario still gives a small page (decimated, and saying so).
set -euo pipefail
bin=${GH_BIN:?GH_BIN is the directory of the built binaries}/gpuheal
src=${GH_SOURCE_DIR:?GH_SOURCE_DIR is the source tree}
scn=$src/test/scenarios
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_rc N CMD...: CMD exits with N.
expect_rc() {
  local want=$1 rc=0
  shift
  "$@" > "$tmp/out" 2> "$tmp/err" || rc=$?
  [ "$rc" -eq "$want" ] || { cat "$tmp/err" >&2; fail "exit $rc, not $want: $*"; }
}

"$bin" --help | grep -q '^  report ' || fail "report is not in the command list"
"$bin" report --help | grep -q -- '--scenario FILE' || fail "report --help"

# 1. Usage errors.
expect_rc 2 "$bin" report
expect_rc 2 "$bin" report --html "$tmp/x.html" --bogus
expect_rc 2 "$bin" report --html "$tmp/x.html" --db "sqlite:$tmp/a.db" --scenario "$scn/xid79-fell-off-bus.jsonl"
expect_rc 2 "$bin" report --html "$tmp/x.html" --scenario -
expect_rc 2 "$bin" report --html "$tmp/x.html" --scenario "$scn/xid79-fell-off-bus.jsonl" pod/ml/w-0
expect_rc 2 "$bin" report --html "$tmp/x.html" --scenario "$scn/xid79-fell-off-bus.jsonl" gpu-03
expect_rc 2 "$bin" report --html "$tmp/x.html" --scenario "$scn/xid79-fell-off-bus.jsonl" node/a node/b
expect_rc 2 "$bin" report --html "$tmp/x.html" --limit 0
[ ! -e "$tmp/x.html" ] || fail "a usage error wrote a page"

# 2. A store that does not exist, a scenario that does not exist: exit 1, no page.
expect_rc 1 "$bin" report --html "$tmp/x.html" --db "sqlite:$tmp/none.db"
expect_rc 1 "$bin" report --html "$tmp/x.html" --scenario "$tmp/none.jsonl"
[ -z "$(ls "$tmp" | grep -v -e '^out$' -e '^err$')" ] || fail "a failed run left files: $(ls "$tmp")"

# 3. Written whole, deterministic, and the same on standard output.
"$bin" report --html "$tmp/a.html" --scenario "$scn/xid79-fell-off-bus.jsonl" > "$tmp/msg"
grep -q "wrote $tmp/a.html (1 incidents, 43 signals)" "$tmp/msg" || fail "summary line: $(cat "$tmp/msg")"
"$bin" report --html "$tmp/b.html" --scenario "$scn/xid79-fell-off-bus.jsonl" > /dev/null
"$bin" report --html - --scenario "$scn/xid79-fell-off-bus.jsonl" > "$tmp/c.html"
cmp -s "$tmp/a.html" "$tmp/b.html" || fail "report is not deterministic"
cmp -s "$tmp/a.html" "$tmp/c.html" || fail "--html - differs from the file"
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary file left behind"
head -c 15 "$tmp/a.html" | grep -q '<!DOCTYPE html>' || fail "not an HTML page"
tail -n 1 "$tmp/a.html" | grep -q '</html>' || fail "page not complete"
grep -q '<td class="node blamed">gpu-03</td>' "$tmp/a.html" || fail "xid79: blamed node"
grep -qi '<script' "$tmp/a.html" && fail "the page has a script"

# 4. Subjects.
"$bin" report --html "$tmp/n.html" --scenario "$scn/xid79-fell-off-bus.jsonl" node/gpu-03 > /dev/null
grep -q 'data-node="gpu-03"' "$tmp/n.html" || fail "node subject: its lanes"
grep -q 'data-node="gpu-01"' "$tmp/n.html" && fail "node subject: another node's lane"
"$bin" report --html "$tmp/j.html" --scenario "$scn/hardware-and-app-two-jobs.jsonl" job/ml/a > /dev/null ||
  fail "job subject"
grep -q '<h1>gpuheal report: job ml/a</h1>' "$tmp/j.html" || fail "job subject: heading"

# 5. Bad lines are skipped and counted.
"$bin" report --html "$tmp/bad.html" --scenario "$scn/bad-lines.jsonl" > "$tmp/msg"
grep -q 'bad lines skipped' "$tmp/msg" || fail "bad lines not reported: $(cat "$tmp/msg")"

# 6. A long run: 128 ranks x 1000 steps gives a small page, decimated.
"$bin" scenario gen --ranks 128 --steps 1000 --fault slow-node --seed 3 > "$tmp/long.jsonl"
"$bin" report --html "$tmp/long.html" --scenario "$tmp/long.jsonl" > /dev/null
size=$(wc -c < "$tmp/long.html")
[ "$size" -lt 1000000 ] || fail "long run: page of $size bytes"
grep -q 'Points averaged for drawing' "$tmp/long.html" || fail "long run: decimation not said"
grep -q 'More than 64 ranks: drawn per node' "$tmp/long.html" || fail "long run: per-node chart not said"
grep -q 'polyline class="series blamed"' "$tmp/long.html" || fail "long run: slow node not highlighted"

# Issue 26: a rank a restart moved to another node is a new series named
# after that node (keyed by rank alone, its times after the move were drawn
# under the first node's name)
python3 - > "$tmp/moved.jsonl" <<'PY'
import json
print(json.dumps({"scenario": "moved", "nodes": ["n1", "n2", "n3"], "gpus_per_node": 8,
                  "jobs": [{"name": "ml/j", "nodes": ["n1", "n2"], "ranks_per_node": 1}]}))
for step in range(1, 11):
    placed = ((0, "n1"), (1, "n2")) if step <= 5 else ((0, "n3"), (1, "n2"))
    for rank, node in placed:
        print(json.dumps({"ts": "2026-11-29T07:00:%02d.000000Z" % (step * 3), "node": node, "gpu": 0,
                          "source": "telemetry", "kind": "step", "job": "ml/j", "rank": rank,
                          "step": step, "step_ms": 1000.0}))
PY
"$bin" report --scenario "$tmp/moved.jsonl" --html "$tmp/moved.html" 2> /dev/null || fail "moved: report"
titles=$(grep -o '<title>rank [0-9] on [^<]*' "$tmp/moved.html" | sed 's/<title>//' | sort | tr '\n' ';')
[ "$titles" = "rank 0 on n1 GPU 0;rank 0 on n3 GPU 0;rank 1 on n2 GPU 0;" ] ||
  fail "moved rank: series are [$titles], want rank 0 on n1, rank 0 on n3, rank 1 on n2"
echo "report: ok"
