#!/usr/bin/env bash
# controller_guard_restore.sh - the guards' memory across a controller
# restart, on the local control plane (test/kube) with the real
# gpuheal-controller: the hourly action rate counts what the previous
# process allowed (read back from the audit store when the lease is won),
# so a kill -9 and a restart do not hand out a fresh hour of actions.
#
#   1. XID 79 on node a: isolated; the allowed actions (A) read from the
#      audit store.
#   2. kill -9; start again on the same store with --max-actions-per-hour A.
#   3. XID 79 on node b: not acted, "not acted: rate (A actions in the last
#      hour, limit A)" in `gpuheal explain`; node b stays schedulable.
#   4. control: a fresh store with the same limit acts on node c, so the
#      denial in 3 came from the restored rate, not from the limit alone.
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-grd-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-grd.XXXXXX)
CTL_PID=""
CTL_FLAGS=(--max-unavailable 10 --lease-namespace "$NS" --lease-duration 4s --renew-deadline 3s --retry-period 1s
  --identity "grd-$$")
. "$(dirname "$0")/lib.sh"

cleanup() {
  if [ -n "$CTL_PID" ]; then kill -9 "$CTL_PID" 2>/dev/null; wait "$CTL_PID" 2>/dev/null; fi
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  delete_gnh a b c
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

explain() { "$GH_BIN/gpuheal" explain "$1" --db "$2" 2>/dev/null; }
explain_has() { local o; o=$(explain "$1" "$2") && grep -q -- "$3" <<< "$o"; } # subject db text
allowed() { # db: actions the guards allowed (what the rate counts)
  python3 - "$1" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("SELECT count(*) FROM guard_decisions WHERE verdict IN ('allowed','approved') "
                 "AND action IS NOT NULL AND action <> 'release_node'").fetchone()[0])
EOF
}

head -c 32 /dev/urandom | base64 > "$TMP/token"
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
"$K" create ns "$NS" >/dev/null
for n in a b c; do mknode "$n"; done
DB="$TMP/audit.db"

# 1. an isolation, recorded
start_controller "sqlite:$DB" --max-actions-per-hour 0 || exit 1
xid79 "$NS-a" 0 | inject
check "a: isolated" wait_for 20 cordoned "$NS-a"
check "a: explain names the XID" wait_for 10 explain_has "node/$NS-a" "$DB" "Xid"
# The executor records the verdicts after the cordon: polled for, then a
# moment for the rest of the same decision's verdicts.
allowed_some() { [ "$(allowed "$DB")" -ge 1 ] 2>/dev/null; }
wait_for 20 allowed_some
sleep 1
A=$(allowed "$DB")
echo "allowed actions recorded: $A"
check "a: allowed actions recorded (>= 1)" test "${A:-0}" -ge 1

# 2. kill -9, then a restart on the same store with a limit of A per hour
kill -9 "$CTL_PID"; wait "$CTL_PID" 2>/dev/null; CTL_PID=""
start_controller "sqlite:$DB" --max-actions-per-hour "$A" || exit 1
check "restart: log says the guards were restored" \
  wait_for 10 grep -q "event=guards_restored actions=$A " "$CTL_LOG"

# 3. the hour's actions are spent: node b is not acted on
xid79 "$NS-b" 0 | inject
check "b: explain says not acted: rate" wait_for 20 explain_has "node/$NS-b" "$DB" \
  "not acted: rate ($A actions in the last hour, limit $A)"
check "b: not cordoned" uncordoned "$NS-b"
stop_controller || bad "controller exit status"

# 4. control: the same limit on a fresh store acts
DB2="$TMP/audit2.db"
start_controller "sqlite:$DB2" --max-actions-per-hour "$A" || exit 1
xid79 "$NS-c" 0 | inject
check "c (fresh store, same limit): isolated" wait_for 20 cordoned "$NS-c"
stop_controller || bad "controller exit status"

echo "controller_guard_restore: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
