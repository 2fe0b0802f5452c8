#!/usr/bin/env bash
# controller_store_faults.sh - the controller when its audit store fails
# under it, on the local control plane (test/kube) and a private PostgreSQL
# (parts a-c and e skipped without the server binaries):
#   a. PostgreSQL stopped: /readyz and POST /v1/signals answer 503 while it
#      is down (logged event=store_unavailable at level error); started
#      again: ready within 40 s without a controller restart, an XID 79 is
#      accepted and its node cordoned (issue 15 item 5);
#   b. the decision's record fails to commit (a trigger refuses incident
#      rows, as a full disk refuses every write) after the XID was answered
#      200: logged at level error with the store's error, counted in
#      gpuheal_controller_decision_commit_failures_total, the node not
#      cordoned before the record; the trigger dropped: retried, committed,
#      cordoned (item 7);
#   c. the same failure, then the controller kill -9'd: the next start
#      decides it from the signal journal and cordons the node (item 7);
#   d. the SQLite file deleted under a running controller: not ready, POST
#      503, the log names the deleted file (item 11);
#   e. two controllers started at once on an empty PostgreSQL database: both
#      create the schema and run (item 11);
#   f. PostgreSQL frozen (its processes stopped: connections stay open,
#      nothing answers): not ready and POST 503 within seconds (the store
#      watch's stall bound, not the 30 s answer deadline), logged; thawed:
#      ready again, an XID 79 accepted and its node cordoned.
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-store-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-store.XXXXXX)
CTL_PID=""
KUBELET_PID=""
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --identity "store-$$")
CTL_READY=event=policy_rules
. "$(dirname "$0")/lib.sh"

NODES="s1 s2 s3 s4"
cleanup() {
  [ -n "$CTL_PID" ] && kill -9 "$CTL_PID" 2>/dev/null
  [ -n "${PID_A:-}" ] && kill -9 "$PID_A" 2>/dev/null
  [ -n "${PID_B:-}" ] && kill -9 "$PID_B" 2>/dev/null
  pg_freeze CONT
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

code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
readyz() { code "http://127.0.0.1:$PORT/readyz"; }
post() { # JSON lines on stdin -> the HTTP status
  code -H "Authorization: Bearer $(cat "$TMP/token")" -H "Content-Type: application/x-ndjson" \
    --data-binary @- "http://127.0.0.1:$PORT/v1/signals"
}
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
logged() { grep -q "$1" "$CTL_LOG"; }
# pg_freeze STOP|CONT: the server's processes (the postmaster and its children)
pg_freeze() {
  [ -n "${PG_DIR:-}" ] && [ -f "$PG_DIR/data/postmaster.pid" ] || return 0
  local pm; pm=$(head -n 1 "$PG_DIR/data/postmaster.pid")
  kill -"$1" "$pm" $(ps -o pid= --ppid "$pm") 2>/dev/null
}
kill9() { kill -9 "$CTL_PID" 2>/dev/null; wait "$CTL_PID" 2>/dev/null; CTL_PID=""; }

pg_start; PG_RC=$?
[ $PG_RC = 1 ] && { bad "PostgreSQL start"; exit 1; }
psql() { "$PG_BIN/psql" -h "$PG_DIR" -U postgres -d "${PSQL_DB:-postgres}" -qtA -v ON_ERROR_STOP=1 -c "$1"; }
REFUSE="CREATE OR REPLACE FUNCTION gh_refuse() RETURNS trigger AS \$\$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device (test)'; END \$\$ LANGUAGE plpgsql; CREATE TRIGGER gh_refuse BEFORE INSERT ON incidents FOR EACH ROW EXECUTE FUNCTION gh_refuse()"
ALLOW="DROP TRIGGER gh_refuse ON incidents"

if [ $PG_RC = 0 ]; then
  echo "--- a. PostgreSQL restart"
  start_controller "$PGURL" || exit 1
  check "ready with the store up" is 200 readyz
  runas "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1
  check "not ready while PostgreSQL is down" wait_for 20 is 503 readyz
  check "a batch refused (503) while it is down" is 503 post <<< "$(xid79 "$NS-s4" 0)"
  check "logged at level error: store_unavailable" logged "level=error .*event=store_unavailable"
  check "gpuheal_controller_store_up 0" is 0 metric gpuheal_controller_store_up
  runas "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -o "-k $PG_DIR -c listen_addresses= -F" \
    -l "$PG_DIR/log" -w start >/dev/null 2>&1
  check "ready again after the restart, same process" wait_for 40 is 200 readyz
  check "store_recovered logged" logged "event=store_recovered"
  grep -o "event=store_recovered down_s=[0-9.]* failed_writes=[0-9]*" "$CTL_LOG"
  check "an XID 79 accepted after the restart" is 200 post <<< "$(xid79 "$NS-s1" 0)"
  check "its node cordoned" wait_for 30 cordoned "$NS-s1"

  echo "--- b. a decision that fails to commit is tried again"
  psql "$REFUSE" || bad "trigger"
  check "XID 79 on s2 accepted (journalled)" is 200 post <<< "$(xid79 "$NS-s2" 1)"
  check "commit failure logged at level error with the store's error" wait_for 30 \
    logged "level=error .*event=decision_commit_failed id=.* node=$NS-s2 attempt=1 error=\".*No space left on device (test)"
  check "counted in gpuheal_controller_decision_commit_failures_total" \
    awk -v v="$(metric gpuheal_controller_decision_commit_failures_total)" 'BEGIN { exit !(v >= 1) }'
  check "s2 not cordoned before its decision is recorded" uncordoned "$NS-s2"
  check "still failing, still tried (attempt 2 and more)" wait_for 30 \
    logged "event=decision_commit_failed id=.* node=$NS-s2 attempt=2 "
  psql "$ALLOW" || bad "drop trigger"
  check "retried until committed: s2 cordoned" wait_for 30 cordoned "$NS-s2"
  echo "s2: $(grep -c "event=decision_commit_failed id=.* node=$NS-s2 " "$CTL_LOG") failed attempts before the commit"
  check "s2's decision recorded once" is 1 psql "SELECT COUNT(*) FROM incidents WHERE node = '$NS-s2'"

  echo "--- c. failing, then kill -9: the journal keeps it"
  psql "$REFUSE" || bad "trigger"
  check "XID 79 on s3 accepted" is 200 post <<< "$(xid79 "$NS-s3" 2)"
  check "commit failure logged" wait_for 30 logged "event=decision_commit_failed id=.* node=$NS-s3"
  kill9
  psql "$ALLOW" || bad "drop trigger"
  check "s3 not cordoned by the killed controller" uncordoned "$NS-s3"
  start_controller "$PGURL" || exit 1
  check "the next start decides it from the journal: s3 cordoned" wait_for 40 cordoned "$NS-s3"
  stop_controller || bad "controller exit status"

  echo "--- e. two controllers at once on an empty database"
  psql "CREATE DATABASE race" || bad "create database"
  RACE_URL="${PGURL%/postgres}/race"
  for r in A B; do
    "$GH_BIN/gpuheal-controller" --kubeconfig "$GH_KUBECONFIG" --listen 127.0.0.1:0 \
      --token-file "$TMP/token" --db "$RACE_URL" --watch-namespace "$NS" \
      --node-selector "gpuheal.io/pool=$NS" --lease-namespace "$NS" --lease-name race \
      --policy "$TMP/policy.yaml" --identity "race-$r" --dry-run > "$TMP/race-$r.out" 2> "$TMP/race-$r.log" &
    eval "PID_$r=\$!"
  done
  for r in A B; do
    check "replica $r started on the empty database" wait_for 30 grep -q "event=started" "$TMP/race-$r.log"
    pid=$(eval "echo \$PID_$r")
    check "replica $r still running" kill -0 "$pid"
  done
  grep -h "duplicate key" "$TMP"/race-*.log | head -2
  check "no duplicate-key error" bash -c "! grep -q 'duplicate key' $TMP/race-A.log $TMP/race-B.log"
  kill "$PID_A" "$PID_B" 2>/dev/null; wait "$PID_A" "$PID_B" 2>/dev/null; PID_A="" PID_B=""

  echo "--- f. PostgreSQL frozen: connections open, nothing answers"
  start_controller "$PGURL" || exit 1
  check "ready with the store up" is 200 readyz
  pg_freeze STOP
  check "not ready while PostgreSQL answers nothing" wait_for 20 is 503 readyz
  check "a batch refused (503) while it answers nothing" is 503 post <<< "$(xid79 "$NS-s4" 4)"
  check "logged at level error: store_unavailable, no answer" \
    wait_for 20 logged "level=error .*event=store_unavailable error=\"no answer from the store for"
  check "gpuheal_controller_store_up 0" is 0 metric gpuheal_controller_store_up
  pg_freeze CONT
  check "ready again once it runs, same process" wait_for 60 is 200 readyz
  check "an XID 79 accepted after the thaw" is 200 post <<< "$(xid79 "$NS-s4" 5)"
  check "its node cordoned" wait_for 30 cordoned "$NS-s4"
  stop_controller || bad "controller exit status"
else
  echo "skip: a-c, e (no PostgreSQL server binaries)"
fi

echo "--- d. the SQLite file deleted under the controller"
start_controller "sqlite:$TMP/audit.db" || exit 1
check "ready with the file in place" is 200 readyz
rm -f "$TMP/audit.db"
check "not ready once the file is gone" wait_for 20 is 503 readyz
check "a batch refused (503)" is 503 post <<< "$(xid79 "$NS-s4" 3)"
check "the log names the deleted file" logged "level=error .*event=store_unavailable.*$TMP/audit.db was deleted while open"
stop_controller || bad "controller exit status"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
