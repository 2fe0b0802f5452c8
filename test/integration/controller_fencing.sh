#!/usr/bin/env bash
# controller_fencing.sh - a paused leader acknowledges nothing once its
# lease may have passed (issue 15 item 6), on the local control plane
# (test/kube): two replicas on one SQLite store (Lease 4 s, renew deadline
# 3 s). Twice, the leader is stopped (SIGSTOP) until the other replica
# leads; a POST of an XID 79 waiting on the paused replica's socket is
# answered when it is continued (SIGCONT): 503 (fenced by its renew
# deadline on the monotonic clock, before its loop has noticed), and the
# sender sends it to the new leader. Every XID answered 200 by any replica
# gets its node cordoned, once. Then (skipped without the PostgreSQL server
# binaries) a leader whose PostgreSQL store is stopped steps down within
# 5 s plus a probe (not leading, not ready) and leads again once the store
# is back, acting on the next XID (issue 15 item 5).
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-fence-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-fence.XXXXXX)
CTL_PID=""
KUBELET_PID=""
. "$(dirname "$0")/lib.sh"

NODES="f1 f2 f3 f4 f5"
PID_A="" PID_B="" PID_C=""
cleanup() {
  for p in $PID_A $PID_B $PID_C; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  pg_stop
  kill "$KUBELET_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in $NODES; do "$K" -n kube-node-lease delete lease "$NS-$n" --wait=false >/dev/null 2>&1; done
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
for n in $NODES; do mknode $n || { echo "FAIL: node $n"; exit 1; }; done
start_kubelet_heartbeat $NODES
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
DB="sqlite:$TMP/audit.db"

post() { # port: JSON lines on stdin -> the HTTP status
  curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$TMP/token")" \
    -H "Content-Type: application/x-ndjson" --data-binary @- "http://127.0.0.1:$1/v1/signals"
}
leaderships() { grep -c "event=leading" "$TMP/$1.log"; }
more_than() { [ "$(leaderships "$1")" -gt "$2" ]; }

start_replica "$DB" fence A; PID_A=$!
wait_for 30 grep -q "event=leading" "$TMP/A.log" || { bad "A leads"; tail -20 "$TMP/A.log"; exit 1; }
start_replica "$DB" fence B; PID_B=$!
wait_for 30 grep -q "event=started" "$TMP/B.log" || { bad "B starts"; tail -20 "$TMP/B.log"; exit 1; }
declare -A PORT PID
PORT[A]=$(port_of A) PORT[B]=$(port_of B) PID[A]=$PID_A PID[B]=$PID_B
echo "A on ${PORT[A]} (leading), B on ${PORT[B]}"

declare -A LINE ANSWER
# round LEADER OTHER NODE_AT_PAUSED NODE_AT_NEW
round() {
  local l=$1 o=$2 np=$3 nn=$4 before
  before=$(leaderships "$o")
  kill -STOP "${PID[$l]}"
  check "$o leads while $l is stopped" wait_for 40 more_than "$o" "$before"
  LINE[$np]=$(xid79 "$NS-$np" 0)
  # sent while the old leader is stopped: its socket holds the request
  post "${PORT[$l]}" <<< "${LINE[$np]}" > "$TMP/answer.$np" &
  local cpid=$!
  sleep 1 # lets curl send; the answer does not depend on it
  kill -CONT "${PID[$l]}"
  wait "$cpid"
  ANSWER[$np]=$(cat "$TMP/answer.$np")
  echo "$l, continued, answered $np: ${ANSWER[$np]}"
  check "the paused ex-leader $l refuses (503) after its lease could pass" [ "${ANSWER[$np]}" = 503 ]
  LINE[$nn]=$(xid79 "$NS-$nn" 0)
  ANSWER[$nn]=$(post "${PORT[$o]}" <<< "${LINE[$nn]}")
  check "the new leader $o accepts (200)" [ "${ANSWER[$nn]}" = 200 ]
}
round A B f1 f2
round B A f3 f4

# every 200 acted on, before anything is sent again
for n in f1 f2 f3 f4; do
  [ "${ANSWER[$n]}" = 200 ] && check "$n (answered 200) cordoned" wait_for 30 cordoned "$NS-$n"
done
# what was refused is sent again to the leader, as an agent does
for n in f1 f2 f3 f4; do
  if [ "${ANSWER[$n]}" != 200 ]; then
    check "$n sent again to the leader (A): 200" is 200 post "${PORT[A]}" <<< "${LINE[$n]}"
    check "$n cordoned" wait_for 30 cordoned "$NS-$n"
  fi
done
isolations() { "$GH_BIN/gpuheal" explain "node/$NS-$1" --db "$DB" 2>/dev/null | grep -c "isolate_node node/$NS-$1: succeeded"; }
for n in f1 f2 f3 f4; do check "$n isolated once" is 1 isolations "$n"; done
grep -h "event=batch_not_acknowledged\|event=decision_deferred" "$TMP"/A.log "$TMP"/B.log | head -5
kill "$PID_A" "$PID_B" 2>/dev/null; wait "$PID_A" "$PID_B" 2>/dev/null; PID_A="" PID_B=""

pg_start; PG_RC=$?
if [ $PG_RC = 0 ]; then
  echo "--- a leader whose store cannot record steps down"
  start_replica "$PGURL" fence-pg C; PID_C=$!
  wait_for 30 grep -q "event=leading" "$TMP/C.log" || { bad "C leads"; tail -20 "$TMP/C.log"; exit 1; }
  PC=$(port_of C)
  ready() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PC/readyz"; }
  leader_gauge() { curl -s "http://127.0.0.1:$PC/metrics" | awk '$1 == "gpuheal_controller_leader" {print $2}'; }
  check "C ready" wait_for 20 is 200 ready
  runas "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1
  check "not ready once the store cannot record" wait_for 20 is 503 ready
  check "C steps down (event=store_step_down at level error)" wait_for 30 \
    grep -q "level=error .*event=store_step_down" "$TMP/C.log"
  check "C no longer leads (gauge 0)" wait_for 10 is 0 leader_gauge
  runas "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -o "-k $PG_DIR -c listen_addresses= -F" \
    -l "$PG_DIR/log" -w start >/dev/null 2>&1
  check "C leads again once the store records" wait_for 40 more_than C 1
  check "C ready again" wait_for 20 is 200 ready
  check "an XID 79 accepted" is 200 post "$PC" <<< "$(xid79 "$NS-f5" 0)"
  check "f5 cordoned" wait_for 30 cordoned "$NS-f5"
elif [ $PG_RC = 1 ]; then
  bad "PostgreSQL start"
else
  echo "skip: step-down (no PostgreSQL server binaries)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
