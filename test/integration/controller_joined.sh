#!/usr/bin/env bash
# controller_joined.sh - evidence that joins an incident after it was
# decided reaches the audit store (joined_evidence), on the local control
# plane (test/kube) with 12 kwok GPU nodes, read as a person reads it:
#   1. an XID 79 storm on 12 nodes of one rack, one node every 0.2 s (the
#      kill9 chaos storm, without the kills): the first three nodes are their
#      own incidents, the fourth
#      trips the rule's breaker into one shared-cause incident; the XIDs of
#      the eight nodes after it join that incident. Every XID id is then in
#      the store: in a decision's evidence or in joined_evidence, the joined
#      rows under the shared incident's id with their node (before: 8 of 12
#      ids in no table);
#   2. a second XID 79 on the first node, a minute later: it joins that
#      node's open incident (a joined row under the node incident's id);
#   3. `gpuheal explain incident/ID` lists the joined signals as "Joined
#      later", `gpuheal explain node/N` of a node that only joined finds the
#      shared incident, `gpuheal timeline` shows `joined` rows; /metrics
#      counts gpuheal_joined_evidence_total{result="stored"};
#   4. the controller killed (-9) and started again on the same store: its
#      journal replay reports the same signals again and no row is added.
# Waits poll with deadlines (the machine may be loaded).
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-joined-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-joined.XXXXXX)
CTL_PID=""
NODES=12
CTL_FLAGS=(--no-leader-election --max-unavailable 12 --storm-nodes 0 --max-actions-per-hour 0
  --identity "joined-$$")
CTL_READY=event=nodes_listed
WAIT_BY=clock
. "$(dirname "$0")/lib.sh"

names() { for i in $(seq -w 1 "$NODES"); do echo "$NS-g$i"; done; }

cleanup() {
  [ -n "$CTL_PID" ] && kill -9 "$CTL_PID" 2>/dev/null
  CTL_PID=""
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  "$K" delete gpunodehealths -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in $(names); do "$K" delete gpunodehealth "$n" --wait=false >/dev/null 2>&1; done
  delete_incidents
  delete_incidents '{.spec.affectedNodes}' "\"$NS-"
  rm_tmp
}
trap cleanup EXIT

die_here() { bad "$*"; echo "--- controller log (tail)"; tail -30 "$CTL_LOG"; exit 1; }
DB="$TMP/audit.db"
q() {
  python3 -c '
import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=5)
for r in c.execute(sys.argv[2]):
    print("|".join("" if v is None else str(v) for v in r))' "$DB" "$1"
}

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"

kwok_node() { # NAME
  cat <<EOF
- apiVersion: v1
  kind: Node
  metadata:
    name: $1
    labels: {gpuheal.io/pool: "$NS", gpuheal.io/fake: "true", kubernetes.io/hostname: $1, example.com/rack: "r-$NS"}
    annotations: {kwok.x-k8s.io/node: fake}
  spec:
    taints: [{key: gpuheal.io/test-only, effect: NoSchedule}]
  status:
    capacity: {nvidia.com/gpu: "8"}
EOF
}
{
  echo "apiVersion: v1"; echo "kind: List"; echo "items:"
  for n in $(names); do kwok_node "$n"; done
} > "$TMP/nodes.yaml"
"$K" create -f "$TMP/nodes.yaml" >/dev/null || { echo "FAIL: nodes"; exit 1; }
ready_count() {
  "$K" get nodes -l "gpuheal.io/pool=$NS" \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c True
}
check "$NODES kwok nodes Ready" wait_for 120 is $NODES ready_count

start_controller "sqlite:$DB" || die_here "controller start"
# the rack label puts the nodes in the engine's topology: the breaker counts
# the nodes it knows (a job's nodes, or labelled ones), as in the chaos run
check "the controller read the rack labels" \
  grep -q "event=nodes_listed nodes=$NODES with_component_labels=$NODES" "$CTL_LOG"

# ---- 1. the storm: one XID 79 per node, 0.2 s apart (signal time) ----------
T0=$(($(date -u +%s) - 5))
{
  i=0
  for n in $(names); do
    us=$((i * 200000))
    ts=$(date -u -d "@$((T0 + us / 1000000))" +%FT%T).$(printf '%06d' $((us % 1000000)))Z
    echo '{"ts":"'"$ts"'","node":"'"$n"'","gpu":'$((i % 8))',"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.","id":"xid-'"$n"'-storm"}'
    i=$((i + 1))
  done
} > "$TMP/storm.jsonl"
inject < "$TMP/storm.jsonl" || bad "inject the storm"
sed -n 's/.*"id":"\([^"]*\)".*/\1/p' "$TMP/storm.jsonl" | sort > "$TMP/ids"

stored_ids() {
  { q "SELECT json FROM evidence;" | grep -o '"id":"[^"]*"' | sed 's/"id":"//; s/"$//'
    q "SELECT sig_key FROM joined_evidence;" 2>/dev/null; } | sort -u
}
missing() { comm -23 "$TMP/ids" <(stored_ids) | grep -c .; }
check "every XID id of the storm in the store (evidence or joined_evidence)" wait_for 120 is 0 missing
echo "  missing: $(comm -23 "$TMP/ids" <(stored_ids) | tr '\n' ' ')"
SID=$(q "SELECT id FROM incidents WHERE rule = 'shared-cause' ORDER BY decided_ns LIMIT 1;")
[ -n "$SID" ] || die_here "no shared-cause incident in the store"
echo "  shared-cause incident: $SID"
n_ev_shared=$(q "SELECT COUNT(*) FROM evidence WHERE incident_id = '$SID';")
joined_rows() { q "SELECT COUNT(*) FROM joined_evidence WHERE incident_id = '$SID' AND kind = 'xid';"; }
n_join=$(joined_rows)
echo "  its evidence rows: $n_ev_shared; joined rows: $n_join"
check "nodes after the record joined it (joined rows under its id)" test "${n_join:-0}" -ge 1
joined_nodes=$(q "SELECT COUNT(DISTINCT node) FROM joined_evidence WHERE incident_id = '$SID';")
in_ev_nodes=$(q "SELECT COUNT(DISTINCT node) FROM evidence WHERE kind = 'xid';")
echo "  nodes in decisions' evidence: $in_ev_nodes; nodes that joined the shared incident: $joined_nodes"
check "every node of the storm is in a decision or joined ($in_ev_nodes + $joined_nodes >= $NODES)" \
  test $((in_ev_nodes + joined_nodes)) -ge $NODES
q "SELECT node, code, sig_key FROM joined_evidence WHERE incident_id = '$SID' ORDER BY ts_ns;" |
  sed 's/^/  joined: /'
LATE=$(q "SELECT node FROM joined_evidence WHERE incident_id = '$SID' ORDER BY ts_ns DESC LIMIT 1;")

# ---- 2. a second XID 79 on the first node: it joins that node's incident ---
FIRST=$(names | head -1)
FID=$(q "SELECT id FROM incidents WHERE node = '$FIRST' ORDER BY decided_ns LIMIT 1;")
[ -n "$FID" ] || die_here "no incident for $FIRST"
echo '{"ts":"'"$(now)"'","node":"'"$FIRST"'","gpu":0,"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:3b:00): 79, pid=4243, GPU has fallen off the bus.","id":"xid-'"$FIRST"'-again"}' |
  inject || bad "inject the second XID on $FIRST"
node_joined() { q "SELECT COUNT(*) FROM joined_evidence WHERE incident_id = '$FID' AND sig_key = 'xid-$FIRST-again';"; }
check "the second XID on $FIRST joined its incident $FID" wait_for 60 is 1 node_joined

# ---- 3. explain, timeline, metrics -----------------------------------------
"$GH_BIN/gpuheal" explain "incident/$SID" --db "sqlite:$DB" > "$TMP/explain.txt" 2>&1
sed -n '/Joined later/,/What was decided/p' "$TMP/explain.txt" | head -8 | sed 's/^/  /'
check "explain lists the joined signals (\"Joined later\")" grep -q "Joined later (after the decision, " "$TMP/explain.txt"
check "explain marks $LATE's XID as joined later" grep -q "kmsg on $LATE .*: xid 79 (joined later)" "$TMP/explain.txt"
"$GH_BIN/gpuheal" explain "node/$LATE" --db "sqlite:$DB" > "$TMP/explain-node.txt" 2>&1
check "explain node/$LATE (a node that only joined) finds $SID" grep -q "$SID" "$TMP/explain-node.txt"
"$GH_BIN/gpuheal" timeline "node/$LATE" --db "sqlite:$DB" > "$TMP/timeline.txt" 2>&1
grep "joined" "$TMP/timeline.txt" | head -3 | sed 's/^/  /'
check "timeline shows a joined row for $LATE" grep -qE "joined +$LATE .*\(joined $SID later\)" "$TMP/timeline.txt"
stored_metric() {
  curl -s "http://127.0.0.1:$PORT/metrics" |
    awk '$1 == "gpuheal_joined_evidence_total{result=\"stored\"}" { print $2 }'
}
check "gpuheal_joined_evidence_total{result=\"stored\"} counts the rows ($(stored_metric))" \
  test "$(stored_metric)" -ge 2

# ---- 4. kill -9 and start again: the replay adds no row ---------------------
rows_before=$(q "SELECT COUNT(*) FROM joined_evidence;")
kill -9 "$CTL_PID" 2>/dev/null; wait "$CTL_PID" 2>/dev/null; CTL_PID=""
start_controller "sqlite:$DB" || die_here "controller restart"
check "the restarted controller replayed its journal" wait_for 60 grep -q "event=journal_replayed" "$CTL_LOG"
held_zero() { [ "$(curl -s "http://127.0.0.1:$PORT/metrics" | awk '$1 == "gpuheal_engine_held_findings" { print $2 }')" = 0 ]; }
check "the engine holds nothing (gpuheal_engine_held_findings 0)" wait_for 120 held_zero
rows_after=$(q "SELECT COUNT(*) FROM joined_evidence;")
check "no joined row added by the replay ($rows_before before, $rows_after after)" test "$rows_after" = "$rows_before"
check "still every id of the storm in the store" is 0 missing

check "controller stops cleanly (sanitizers: no leak)" stop_controller
echo "controller_joined: $pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ "$fail" -eq 0 ]
