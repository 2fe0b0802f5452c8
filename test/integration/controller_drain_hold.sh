#!/usr/bin/env bash
# controller_drain_hold.sh - drain_node held for a checkpoint (namespace
# annotation gpuheal.io/drain-mode=checkpoint) survives a controller killed
# with SIGKILL during the hold, on the local control plane (test/kube):
#   a. held, kill -9, restart on the same SQLite store: resumed, not drained
#      at the restart; the job's checkpoint then drains the node once;
#   b. held, kill -9, restart, no checkpoint: drained at the original
#      deadline, not a full timeout after the restart;
#   c. held, kill -9 past the deadline: the restart drains at once;
#   d. approval mode: an approved drain is held the same way (and resumed
#      after a kill -9), released by the job's checkpoint;
#   e. two replicas on a shared PostgreSQL store (skipped without the server
#      binaries): the leader holds, is killed, the standby takes over and
#      resumes the hold with its deadline; the checkpoint drains once.
# Each part asserts one drain_node action in the audit store and the audit
# rows of the hold (held_for_checkpoint, hold_resumed, released).
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them). The script plays
# the kubelet (bound pods Running, deleted pods gone), as controller_e2e.sh.
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-hold-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-hold.XXXXXX)
CTL_PID=""
KUBELET_PID=""
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --identity "hold-$$")
CTL_READY=event=policy_rules
. "$(dirname "$0")/lib.sh"

NODES="g1 g2 g3 g4 g5"
cleanup() {
  [ -n "$CTL_PID" ] && kill -9 "$CTL_PID" 2>/dev/null
  [ -n "${PID_B:-}" ] && kill -9 "$PID_B" 2>/dev/null
  pg_stop
  kill "$KUBELET_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in $NODES; do "$K" -n kube-node-lease delete lease "$NS-$n" --wait=false >/dev/null 2>&1; done
  delete_gnh $NODES
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
for n in $NODES; do mknode $n || { echo "FAIL: node $n"; exit 1; }; done
start_kubelet_heartbeat $NODES

"$GH_BIN/gpuheal" policy default | sed -e 's/^\(  hold:\) *30s/\1 2s/' > "$TMP/policy.yaml"

for j in j1 j2 j3 j4 j5; do mkjob $j 1; done
for j in j1 j2 j3 j4 j5; do wait_for 30 bound $j 1 || { bad "job $j bound"; exit 1; }; done
kubelet
pod_of() { "$K" -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1" -o jsonpath='{.items[0].metadata.name}'; }
declare -A NODE POD
for j in j1 j2 j3 j4 j5; do NODE[$j]=$(node_of $j 0); POD[$j]=$(pod_of $j); echo "job $j on ${NODE[$j]} (${POD[$j]})"; done

DB="sqlite:$TMP/audit.db"
explain() { "$GH_BIN/gpuheal" explain "node/$1" --db "${2:-$DB}" 2>/dev/null; }
sxid() { echo '{"ts":"'"$(now)"'","node":"'"$1"'","source":"kmsg","kind":"sxid","code":12028,"msg":"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Fatal, Link 32 egress non-posted PRIV error","id":"sxid-'"$1"'-'"$RANDOM"'"}' | inject; }
ckpt() { echo '{"ts":"'"$(now)"'","source":"telemetry","kind":"checkpoint","job":"'"$NS"'/'"$1"'","step":'"$2"',"path":"s3://ckpt/'"$1"'/step-'"$2"'","state":"saved"}' | inject; }
evicted() { # pod: terminating or gone
  local d
  d=$("$K" -n "$NS" get pod "$1" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null) || return 0
  [ -n "$d" ]
}
not_evicted() { ! evicted "$1"; }
timeout_s() { "$K" annotate ns "$NS" --overwrite gpuheal.io/drain-mode=checkpoint "gpuheal.io/drain-checkpoint-timeout=$1" >/dev/null; }
held_in_store() { explain "$1" "${2:-$DB}" | grep -q "drain_node node/$1: held_for_checkpoint \[checkpoint\]"; }
kill9() { kill -9 "$CTL_PID" 2>/dev/null; wait "$CTL_PID" 2>/dev/null; CTL_PID=""; }
drains() { explain "$1" "${2:-$DB}" | grep -c "drain_node node/$1: succeeded"; }
released_logs() { cat "$TMP"/ctl.*.log | grep -c "event=drain_released id=$1 "; }
fsec() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
between() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }

# ---- a. kill -9 during the hold; the checkpoint after the restart drains once
X=${NODE[j1]}
timeout_s 120s
start_controller "$DB" || exit 1
sleep 1
sxid "$X"
check "a: drain of $X held" wait_for 20 grep -q "event=drain_waiting .*node=$X" "$CTL_LOG"
check "a: the hold is in the store" wait_for 10 held_in_store "$X"
IA=$(explain "$X" | sed -n 's/^\[[0-9]*\] \(inc-[0-9a-f]*\):.*/\1/p' | tail -1)
kill9
check "a: ${POD[j1]} not evicted at the kill" not_evicted "${POD[j1]}"
start_controller "$DB" || exit 1
check "a: the restart resumed the hold of $IA" wait_for 10 grep -q "event=drain_hold_resumed id=$IA .*left_s=1[01][0-9]" "$CTL_LOG"
sleep 3
check "a: ${POD[j1]} not evicted after the restart" not_evicted "${POD[j1]}"
ckpt j1 1300
check "a: after the checkpoint ${POD[j1]} evicted" wait_for 15 evicted "${POD[j1]}"
check "a: released on the checkpoint" wait_for 5 grep -q "event=drain_released id=$IA outcome=checkpoint" "$CTL_LOG"
ck_done() { explain "$X" | grep -q "drain_node node/$X: succeeded"; }
wait_for 15 ck_done
explain "$X" > "$TMP/a.txt"
check "a: one drain_node action in the audit store" [ "$(drains "$X")" = 1 ]
check "a: one release in both controllers' logs" [ "$(released_logs "$IA")" = 1 ]
check "a: one incident for $X" [ "$(grep -c '^\[' "$TMP/a.txt")" = 1 ]
check "a: audit row held_for_checkpoint" grep -q "drain_node node/$X: held_for_checkpoint \[checkpoint\] - held until the next checkpoint of $NS/j1" "$TMP/a.txt"
check "a: audit row hold_resumed" grep -q "drain_node node/$X: hold_resumed \[checkpoint\] - resumed by hold-$$ on becoming leader: [0-9.]* s left" "$TMP/a.txt"
check "a: audit row released (checkpoint step 1300)" grep -q "drain_node node/$X: released \[checkpoint\] - released: job $NS/j1 saved checkpoint step 1300" "$TMP/a.txt"
check "a: why tells the wait" grep -q "why: .*drain_node waited [0-9.]* s for the next checkpoint ($NS/j1 checkpoint step 1300)" "$TMP/a.txt"
check "a: hold intent released" [ "$(sqlite3 "$TMP/audit.db" "SELECT state FROM intents WHERE id = '$IA/hold'")" = released ]
# the agent sends the same signals again: nothing more
sxid "$X"; ckpt j1 1300
sleep 3
check "a: still one drain_node action" [ "$(drains "$X")" = 1 ]

# ---- b. no checkpoint: the drain comes at the original deadline
Y=${NODE[j2]}
timeout_s 15s
sleep 1
sxid "$Y"
check "b: drain of $Y held" wait_for 20 grep -q "event=drain_waiting .*node=$Y" "$CTL_LOG"
T0=$(fsec)
check "b: the hold is in the store" wait_for 10 held_in_store "$Y"
IB=$(explain "$Y" | sed -n 's/^\[[0-9]*\] \(inc-[0-9a-f]*\):.*/\1/p' | tail -1)
kill9
sleep 5
start_controller "$DB" || exit 1
check "b: the restart resumed the hold of $IB" wait_for 10 grep -q "event=drain_hold_resumed id=$IB " "$CTL_LOG"
check "b: ${POD[j2]} evicted at the deadline" wait_for 30 evicted "${POD[j2]}"
TB=$(elapsed "$T0" "$(fsec)")
# the hold started at most 0.2 s before T0 (the poll); a hold begun again
# at the restart would drain 15 s after it, 20 s or more after T0
check "b: evicted ${TB} s after the hold began (deadline 15 s; >= 20 s if restarted)" between "$TB" 14.0 17.5
check "b: released at the timeout" wait_for 5 grep -q "event=drain_released id=$IB outcome=timeout" "$CTL_LOG"
to_done() { explain "$Y" | grep -q "drain_node node/$Y: succeeded"; }
wait_for 15 to_done
explain "$Y" > "$TMP/b.txt"
check "b: one drain_node action" [ "$(drains "$Y")" = 1 ]
check "b: one release in the logs" [ "$(released_logs "$IB")" = 1 ]
check "b: audit row hold_resumed" grep -q "drain_node node/$Y: hold_resumed \[checkpoint\] - resumed by hold-$$ on becoming leader: [0-9.]* s left" "$TMP/b.txt"
check "b: audit row released (timeout)" grep -q "drain_node node/$Y: released \[checkpoint\] - released: timeout; job $NS/j2 saved no checkpoint" "$TMP/b.txt"
check "b: why tells the timeout" grep -q "why: .*drain_node waited for the next checkpoint and timed out after 1[4-7].[0-9] s ($NS/j2 no checkpoint)" "$TMP/b.txt"

# ---- c. the deadline passes while no controller runs: drained at the restart
Z=${NODE[j3]}
timeout_s 5s
sleep 1
sxid "$Z"
check "c: drain of $Z held" wait_for 20 grep -q "event=drain_waiting .*node=$Z" "$CTL_LOG"
check "c: the hold is in the store" wait_for 4 held_in_store "$Z"
IC=$(explain "$Z" | sed -n 's/^\[[0-9]*\] \(inc-[0-9a-f]*\):.*/\1/p' | tail -1)
kill9
check "c: ${POD[j3]} not evicted at the kill" not_evicted "${POD[j3]}"
sleep 7
check "c: ${POD[j3]} still there past the deadline (no controller)" not_evicted "${POD[j3]}"
start_controller "$DB" || exit 1
check "c: evicted at once after the restart" wait_for 8 evicted "${POD[j3]}"
cz_done() { explain "$Z" | grep -q "drain_node node/$Z: succeeded"; }
wait_for 15 cz_done
explain "$Z" > "$TMP/c.txt"
check "c: one drain_node action" [ "$(drains "$Z")" = 1 ]
check "c: audit row: the deadline passed" grep -q "drain_node node/$Z: hold_resumed \[checkpoint\] - resumed by hold-$$ on becoming leader: the deadline .* passed [0-9.]* s ago, drains now" "$TMP/c.txt"
check "c: audit row released (timeout)" grep -q "drain_node node/$Z: released \[checkpoint\] - released: timeout; job $NS/j3 saved no checkpoint" "$TMP/c.txt"
check "c: controller stops cleanly on SIGTERM" stop_controller

# ---- d. approval mode: the approved drain is held, and resumed after kill -9
W=${NODE[j4]}
APR="sqlite:$TMP/approval.db"
timeout_s 120s
start_controller "$APR" --require-approval || exit 1
sleep 1
sxid "$W"
has_inc() { [ -n "$(explain "$W" "$APR" | sed -n 's/^\[[0-9]*\] \(inc-[0-9a-f]*\):.*/\1/p')" ]; }
check "d: incident recorded" wait_for 20 has_inc
ID=$(explain "$W" "$APR" | sed -n 's/^\[[0-9]*\] \(inc-[0-9a-f]*\):.*/\1/p' | tail -1)
awaits() { [ "$("$K" get incident "$ID" -o jsonpath='{.status.phase}' 2>/dev/null)" = AwaitingApproval ]; }
check "d: $ID waits for approval" wait_for 20 awaits
"$GH_BIN/gpuheal" approve "$ID" --kubeconfig "$GH_KUBECONFIG" --by holdtest >/dev/null
check "d: the approved drain is held" wait_for 20 grep -q "event=drain_waiting id=$ID node=$W" "$CTL_LOG"
check "d: the hold is in the store" wait_for 10 held_in_store "$W" "$APR"
sleep 2
check "d: ${POD[j4]} not evicted after the approval" not_evicted "${POD[j4]}"
kill9
start_controller "$APR" --require-approval || exit 1
check "d: the restart resumed the hold of $ID" wait_for 10 grep -q "event=drain_hold_resumed id=$ID " "$CTL_LOG"
sleep 2
check "d: ${POD[j4]} not evicted after the restart" not_evicted "${POD[j4]}"
ckpt j4 5
check "d: after the checkpoint ${POD[j4]} evicted" wait_for 15 evicted "${POD[j4]}"
d_done() { explain "$W" "$APR" | grep -q "drain_node node/$W: succeeded"; }
wait_for 15 d_done
explain "$W" "$APR" > "$TMP/d.txt"
check "d: one drain_node action" [ "$(drains "$W" "$APR")" = 1 ]
check "d: one release in the logs" [ "$(released_logs "$ID")" = 1 ]
check "d: audit row held_for_checkpoint, approver named" grep -q "drain_node node/$W: held_for_checkpoint \[checkpoint\] - approved by holdtest; held until the next checkpoint of $NS/j4" "$TMP/d.txt"
check "d: audit row hold_resumed" grep -q "drain_node node/$W: hold_resumed" "$TMP/d.txt"
check "d: audit row released (checkpoint step 5)" grep -q "drain_node node/$W: released \[checkpoint\] - released: job $NS/j4 saved checkpoint step 5" "$TMP/d.txt"
check "d: the approval recorded" grep -q "approved by holdtest" "$TMP/d.txt"
check "d: controller stops cleanly on SIGTERM" stop_controller

# ---- e. two replicas, shared PostgreSQL: the standby resumes the hold
pg_start; pg_rc=$?
if [ $pg_rc = 0 ]; then
  V=${NODE[j5]}
  timeout_s 30s
  start_replica "$PGURL" hold ha-a; CTL_PID=$!
  wait_for 20 grep -q "event=leading" "$TMP/ha-a.log" || bad "e: first replica leads"
  start_replica "$PGURL" hold ha-b; PID_B=$!
  wait_for 20 grep -q "holder=ha-a" "$TMP/ha-b.log" || bad "e: standby sees the leader"
  PORT=$(port_of ha-a)
  sxid "$V"
  check "e: the leader holds the drain of $V" wait_for 20 grep -q "event=drain_waiting .*node=$V" "$TMP/ha-a.log"
  T0=$(fsec)
  check "e: the hold is in the PostgreSQL store" wait_for 10 held_in_store "$V" "$PGURL"
  IE=$(explain "$V" "$PGURL" | sed -n 's/^\[[0-9]*\] \(inc-[0-9a-f]*\):.*/\1/p' | tail -1)
  check "e: the standby holds nothing" sh -c "! grep -q 'event=drain_' '$TMP/ha-b.log'"
  kill9
  check "e: the standby takes over" wait_for 20 grep -q "event=leading" "$TMP/ha-b.log"
  check "e: and resumes the hold of $IE" wait_for 10 grep -q "event=drain_hold_resumed id=$IE .*left_s=" "$TMP/ha-b.log"
  left=$(sed -nE "s/.*event=drain_hold_resumed id=$IE .*left_s=([0-9.]+).*/\1/p" "$TMP/ha-b.log" | tail -1)
  since=$(elapsed "$T0" "$(fsec)")
  # the same deadline: what is left plus what passed is the 30 s timeout
  check "e: the deadline kept (${left} s left, ${since} s after the hold)" \
    awk -v l="$left" -v s="$since" 'BEGIN { exit !(l + s >= 28 && l + s <= 32) }'
  check "e: ${POD[j5]} not evicted at the takeover" not_evicted "${POD[j5]}"
  PORT=$(port_of ha-b)
  ckpt j5 42
  check "e: after the checkpoint ${POD[j5]} evicted" wait_for 15 evicted "${POD[j5]}"
  e_done() { explain "$V" "$PGURL" | grep -q "drain_node node/$V: succeeded"; }
  wait_for 15 e_done
  explain "$V" "$PGURL" > "$TMP/e.txt"
  check "e: one drain_node action" [ "$(grep -c "drain_node node/$V: succeeded" "$TMP/e.txt")" = 1 ]
  check "e: audit row hold_resumed by ha-b" grep -q "drain_node node/$V: hold_resumed \[checkpoint\] - resumed by ha-b on becoming leader: [0-9.]* s left" "$TMP/e.txt"
  check "e: audit row released (checkpoint step 42)" grep -q "drain_node node/$V: released \[checkpoint\] - released: job $NS/j5 saved checkpoint step 42" "$TMP/e.txt"
  kill "$PID_B" 2>/dev/null; wait "$PID_B" 2>/dev/null; PID_B=""
elif [ $pg_rc = 1 ]; then
  bad "e: could not start a private PostgreSQL cluster"
else
  echo "skip: e (no PostgreSQL server binaries)"
fi

echo "controller_drain_hold: $pass passed, $fail failed"
if [ $fail -ne 0 ]; then
  echo "--- controller log (last)"; tail -40 "$CTL_LOG"
fi
[ $fail -eq 0 ]
