#!/usr/bin/env bash
# controller_burst.sh - a burst of faults through the executor's worker pool
# on the local control plane (test/kube): 40 nodes, XID 79 on 30 of them at
# once with --max-unavailable 100% -> all 30 cordoned and tainted, the 10
# others not; in the audit store exactly one isolate_node per node, which
# succeeded, and before every other action of its incident; no intent left
# pending; a Node watch sees no node cordoned twice. Prints the time from
# the injection to the last cordon seen through the watch (not asserted).
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-burst-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-burst.XXXXXX)
CTL_PID=""
WATCH_PID=""
NODES=40
FAULTS=30
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  [ -n "$WATCH_PID" ] && kill "$WATCH_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

command -v sqlite3 >/dev/null || { echo "FAIL: sqlite3 (scripts/install-deps installs it)"; exit 1; }
"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"

# the nodes, in one request
for i in $(seq 1 $NODES); do
  echo ---
  node_yaml "n$i"
done > "$TMP/nodes.yaml"
"$K" create -f "$TMP/nodes.yaml" >/dev/null || { echo "FAIL: nodes"; exit 1; }

CTL_OUT="$TMP/ctl.out"
CTL_LOG="$TMP/ctl.log"
DB="sqlite:$TMP/audit.db"
"$GH_BIN/gpuheal-controller" --kubeconfig "$GH_KUBECONFIG" --listen 127.0.0.1:0 \
  --token-file "$TMP/token" --db "$DB" --watch-namespace "$NS" \
  --node-selector "gpuheal.io/pool=$NS" --lease-namespace "$NS" \
  --lease-duration 4s --renew-deadline 3s --retry-period 1s \
  --reorder-window 200ms --node-cooldown 0s --max-unavailable 100% \
  --max-actions-per-hour 0 --storm-nodes 0 --executor-workers 8 --qps 200 \
  --identity "burst-$$" > "$CTL_OUT" 2> "$CTL_LOG" &
CTL_PID=$!
wait_for 20 grep -qE "^listening on port [0-9]+$" "$CTL_OUT" ||
  { echo "FAIL: controller start"; tail -20 "$CTL_LOG"; exit 1; }
PORT=$(sed -nE 's/^listening on port ([0-9]+)$/\1/p' "$CTL_OUT" | tail -n 1)
wait_for 20 grep -q "event=leading" "$CTL_LOG" || { echo "FAIL: leading"; tail -20 "$CTL_LOG"; exit 1; }

# every change of a node's unschedulable flag, with the time it was seen
# (WATCH_PID is kubectl's: when it ends, the stamping loop reads EOF)
"$K" get nodes -l "gpuheal.io/pool=$NS" --watch --output-watch-events \
  -o jsonpath='{.object.metadata.name} {.object.spec.unschedulable}{"\n"}' 2>/dev/null \
  > >(while read -r n u; do echo "$(date +%s.%N) $n ${u:-false}"; done > "$TMP/watch.txt") &
WATCH_PID=$!
wait_for 10 sh -c "[ \$(wc -l < '$TMP/watch.txt') -ge $NODES ]" || bad "node watch started"

for i in $(seq 1 $FAULTS); do
  echo '{"ts":"'"$(now)"'","node":"'"$NS-n$i"'","gpu":'$((i % 8))',"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.","id":"xid-burst-'"$i"'-'"$RANDOM"'"}'
done > "$TMP/faults.jsonl"
T0=$(date +%s.%N)
"$GH_BIN/gpuheal" inject --controller "http://127.0.0.1:$PORT" --token-file "$TMP/token" - \
  < "$TMP/faults.jsonl" >/dev/null || bad "inject"

cordoned_count() {
  "$K" get nodes -l "gpuheal.io/pool=$NS" -o jsonpath='{range .items[?(@.spec.unschedulable)]}{.metadata.name}{"\n"}{end}' | grep -c .
}
all_cordoned() { [ "$(cordoned_count)" -ge "$FAULTS" ]; }
check "all $FAULTS faulty nodes cordoned" wait_for 60 all_cordoned
sql() { sqlite3 -cmd ".timeout 5000" "$TMP/audit.db" "$1"; }
no_pending() { [ "$(sql "SELECT count(*) FROM intents WHERE state='pending'")" = 0 ]; }
all_recorded() { [ "$(sql "SELECT count(*) FROM incidents WHERE node LIKE '$NS-%'")" -ge "$FAULTS" ]; }
check "all $FAULTS incidents recorded" wait_for 30 all_recorded
check "no intent left pending" wait_for 60 no_pending
sleep 1

cordoned_list=$("$K" get nodes -l "gpuheal.io/pool=$NS" -o jsonpath='{range .items[?(@.spec.unschedulable)]}{.metadata.name}{"\n"}{end}' | sort)
expected=$(for i in $(seq 1 $FAULTS); do echo "$NS-n$i"; done | sort)
check "exactly the faulty nodes cordoned" [ "$cordoned_list" = "$expected" ]
untainted=0
for i in $(seq 1 $FAULTS); do
  "$K" get node "$NS-n$i" -o jsonpath='{.spec.taints[*].key}' | grep -q gpuheal.io/unhealthy ||
    untainted=$((untainted + 1))
done
check "all $FAULTS tainted gpuheal.io/unhealthy ($untainted not)" [ "$untainted" = 0 ]

# the audit store: one isolate_node per node, succeeded
per_node=$(sql "SELECT target, count(*), sum(result='succeeded') FROM actions WHERE action='isolate_node' GROUP BY target")
nodes_once=$(echo "$per_node" | awk -F'|' '$2==1 && $3==1' | grep -c .)
check "one succeeded isolate_node per node in the audit store ($nodes_once of $FAULTS)" \
  [ "$nodes_once" = "$FAULTS" -a "$(echo "$per_node" | grep -c .)" = "$FAULTS" ]
check "one isolate_node intent per node" \
  [ "$(sql "SELECT count(DISTINCT target) || ' ' || count(*) FROM intents WHERE action='isolate_node'")" = "$FAULTS $FAULTS" ]
# within each incident, isolation first: nothing started before it finished
early=$(sql "SELECT count(*) FROM actions x JOIN actions i ON i.incident_id = x.incident_id
             AND i.action = 'isolate_node' WHERE x.action <> 'isolate_node' AND x.started_ns < i.finished_ns")
check "within each incident, isolate_node before every other action ($early out of order)" [ "$early" = 0 ]
check "every incident's other actions done (reboot_node requested $FAULTS times)" \
  [ "$(sql "SELECT count(*) FROM actions WHERE action='reboot_node' AND result='requested'")" = "$FAULTS" ]

# the watch: no node cordoned twice, and when the last cordon was seen
kill "$WATCH_PID" 2>/dev/null
wait "$WATCH_PID" 2>/dev/null
WATCH_PID=""
sleep 0.5 # the stamping loop's last lines
twice=$(awk '{ if ($3 == "true" && last[$2] != "true") n[$2]++; last[$2] = $3 }
             END { for (k in n) if (n[k] > 1) print k }' "$TMP/watch.txt" | grep -c .)
check "no node cordoned twice (watch)" [ "$twice" = 0 ]
seen=$(awk '$3 == "true" && !s[$2]++ { print $1 }' "$TMP/watch.txt" | grep -c .)
check "watch saw $FAULTS cordons ($seen)" [ "$seen" = "$FAULTS" ]
last=$(awk -v t0="$T0" '$3 == "true" && !s[$2]++ { if ($1 > m) m = $1 } END { printf "%.2f", m - t0 }' "$TMP/watch.txt")
echo "burst: $FAULTS XID 79 on $NODES nodes, 8 executor workers, --qps 200: last cordon seen $last s after the injection"

check "controller stops cleanly on SIGTERM" stop_controller
[ "$fail" -gt 0 ] && { echo "--- controller log (tail)"; tail -30 "$CTL_LOG"; }
echo "controller_burst: $pass passed, $fail failed"
[ "$fail" = 0 ]
