#!/usr/bin/env bash
# controller_telemetry.sh - the controller keeps training telemetry in its
# audit store for the report's step chart: the straggler scenario's 1600
# step signals posted to a running gpuheal-controller (local control plane
# of test/kube) show up as per-rank bucket rows within a few flush
# intervals while it runs (its writer thread, not a shutdown flush), and
# `gpuheal report --db ... job/ml/llm` then draws the job's step chart with
# one series per rank (16).
#
# Needs GH_BIN, GH_SOURCE_DIR, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_SOURCE_DIR:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-tel-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-tel.XXXXXX)
CTL_PID=""
. "$(dirname "$0")/lib.sh"

cleanup() {
  [ -n "$CTL_PID" ] && kill "$CTL_PID" 2>/dev/null && wait "$CTL_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  rm_tmp
}
trap cleanup EXIT

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
DB="sqlite:$TMP/audit.db"

"$GH_BIN/gpuheal-controller" --kubeconfig "$GH_KUBECONFIG" --listen 127.0.0.1:0 \
  --token-file "$TMP/token" --db "$DB" --watch-namespace "$NS" \
  --node-selector "gpuheal.io/pool=$NS" --lease-namespace "$NS" \
  --identity "tel-$$" > "$TMP/ctl.out" 2> "$TMP/ctl.log" &
CTL_PID=$!
wait_for 20 grep -qE "^listening on port [0-9]+$" "$TMP/ctl.out" ||
  { echo "FAIL: controller start"; tail -20 "$TMP/ctl.log"; exit 1; }
PORT=$(sed -nE 's/^listening on port ([0-9]+)$/\1/p' "$TMP/ctl.out" | tail -n 1)

grep '"kind":"step"' "$GH_SOURCE_DIR/test/scenarios/straggler-one-node.jsonl" > "$TMP/steps.jsonl"
check "1600 step signals posted" \
  "$GH_BIN/gpuheal" inject --controller "http://127.0.0.1:$PORT" --token-file "$TMP/token" "$TMP/steps.jsonl"

rows() {
  python3 -c "import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(c.execute(\"SELECT COUNT(*), COALESCE(SUM(n), 0) FROM telemetry WHERE job = 'ml/llm'\").fetchone()[1])" \
    "$TMP/audit.db" 2>/dev/null
}
all_rows() { [ "$(rows)" = 1600 ]; }
check "all 1600 samples in the store while the controller runs" wait_for 15 all_rows
check "bucket rows: 16 ranks, far fewer rows than samples" python3 -c "import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
n, ranks = c.execute(\"SELECT COUNT(*), COUNT(DISTINCT rank_no) FROM telemetry WHERE job = 'ml/llm'\").fetchone()
assert ranks == 16 and 16 * 20 <= n <= 16 * 30, (n, ranks)" "$TMP/audit.db"

kill "$CTL_PID"
st=0
wait "$CTL_PID" || st=$?
CTL_PID=""
check "controller exits 0" test "$st" -eq 0

"$GH_BIN/gpuheal" report --html "$TMP/r.html" --db "$DB" job/ml/llm > "$TMP/r.msg" 2>&1
check "report from the store" test -s "$TMP/r.html"
check "report: the job's step chart" grep -q 'class="step-chart" data-job="ml/llm"' "$TMP/r.html"
check "report: one series per rank" test "$(grep -o '<polyline class="series' "$TMP/r.html" | wc -l)" -eq 16

echo "controller_telemetry: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
