#!/usr/bin/env bash
# controller_dry_run_enforce.sh - dry run, then enforce, on the local
# control plane (test/kube) with the real gpuheal-controller (issue 26 item
# 4: a fault first seen in the dry run stayed unacted after dryRun: false
# until its episode expired, 30 min, and the real XID 79 after the switch
# was in neither explain nor timeline). A RecoveryPolicy with dryRun: true:
# an XID 79 on n1 is recorded and not acted on; the policy patched to
# dryRun: false; a second XID 79 on n1 is a new incident, acted on (n1
# cordoned), in explain and timeline; `kubectl get incidents` shows the
# actions as a list and a PCI-only GPU by its bus id. RecoveryPolicy objects are
# cluster-scoped and read by every controller: CMakeLists.txt runs this
# test alone (RUN_SERIAL).
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-dre-$$-$RANDOM"
RP="dryrun-$NS"
NODES="n1 n2"

TMP=$(mktemp -d /tmp/gh-ctl-dre.XXXXXX)
CTL_PID=""
HB_PID=""
CTL_FLAGS=(--no-leader-election --storm-nodes 0 --max-actions-per-hour 0 --identity "dre-$$")
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  [ -n "$HB_PID" ] && kill "$HB_PID" 2>/dev/null
  "$K" delete recoverypolicy "$RP" --wait=false >/dev/null 2>&1
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in $NODES; do "$K" -n kube-node-lease delete lease "$NS-$n" --wait=false >/dev/null 2>&1; done
  delete_gnh $NODES
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

rp_accepted() { [ "$("$K" get recoverypolicy "$RP" -o jsonpath='{.status.conditions[?(@.type=="Accepted")].status}' 2>/dev/null)" = True ]; }
rp() { # dryRun (true/false)
  cat <<EOF2 | "$K" apply -f - 2>&1 >/dev/null
apiVersion: gpuheal.io/v1alpha1
kind: RecoveryPolicy
metadata: {name: $RP}
spec:
  priority: 10
  dryRun: $1
  rules:
  - name: dre-xid79
    match: {class: gpu_hardware, kinds: [xid], codes: [79]}
    actions: [{action: isolate_node}]
EOF2
}
incidents() { "$GH_BIN/gpuheal" explain "node/$NS-n1" --db "$DB" 2>/dev/null | grep -c '^\[[0-9]*\] inc-'; }

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
for n in $NODES; do mknode "$n" || { echo "FAIL: node $n"; exit 1; }; done
heartbeat_leases $NODES
( while kill -0 $$ 2>/dev/null; do sleep 10; heartbeat_leases $NODES; done ) &
HB_PID=$!

out=$(rp true) || bad "create $RP: $out"
DB="sqlite:$TMP/audit.db"
CTL_READY="event=policy_accepted name=$RP"
start_controller "$DB" --max-unavailable 10 || exit 1
check "$RP accepted" wait_for 20 rp_accepted
check "log: dry_run=1 in force" wait_for 10 grep -q "event=guards dry_run=1 " "$CTL_LOG"

# 1. the dry run: recorded, not acted on
xid79 "$NS-n1" 0 | inject || bad "inject 1"
check "dry run: the XID 79 recorded" wait_for 30 is 1 incidents
check "dry run: its verdict says it would act" \
  sh -c "'$GH_BIN/gpuheal' explain node/$NS-n1 --db '$DB' | grep -q 'dry run: would act'"
check "dry run: n1 not cordoned" uncordoned "$NS-n1"

# 2. enforce: the next fault on n1 is a new incident, acted on
out=$(rp false) || bad "patch $RP: $out"
check "log: dry_run=0 in force" wait_for 20 grep -q "event=guards dry_run=0 " "$CTL_LOG"
check "log: the dry run's open incidents closed" grep -q "event=dry_run_ended" "$CTL_LOG"
sleep 1 # the second XID's time after the switch on the engine's clock
xid79 "$NS-n1" 1 | inject || bad "inject 2"
check "enforce: the second XID 79 is a new incident (2 in explain)" wait_for 30 is 2 incidents
check "enforce: n1 cordoned" wait_for 30 cordoned "$NS-n1"
check "enforce: explain shows an isolation done, not a dry run" \
  wait_for 20 sh -c "'$GH_BIN/gpuheal' explain node/$NS-n1 --db '$DB' | grep -q 'isolate_node node/$NS-n1: succeeded'"
check "enforce: timeline has both XID 79s" \
  sh -c "[ \$('$GH_BIN/gpuheal' timeline node/$NS-n1 --db '$DB' | grep -c 'xid 79\|Xid.*79\|code 79\|XID 79') -ge 2 ]"
# What `kubectl get incidents` shows (issue 26): the actions as a list, not
# a JSON array; the GPU column from the PCI bus id when the line names only
# that (it was empty).
echo '{"ts":"'"$(now)"'","node":"'"$NS-n2"'","pci":"0000:3b:00.0","source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.","id":"xid-pci-'"$RANDOM"'"}' | inject || bad "inject pci"
# col NAME: the column NAME of n2's row of `kubectl get incidents`, by its
# position under the header (kubectl aligns columns; an empty one is a gap)
col() {
  "$K" get incidents 2>/dev/null | awk -v h="$1" -v n="$NS-n2" '
    NR == 1 { c = index($0, h); nc = index($0, "NODE") }
    NR > 1 && c { split(substr($0, nc), x, " "); if (x[1] == n) { split(substr($0, c), w, " "); print w[1] } }'
}
check "kubectl get incidents: n2's GPU column reads 0000:3b:00.0" wait_for 30 is 0000:3b:00.0 col GPU
check "kubectl get incidents: the ACTIONS column is a list (isolate_node...), no JSON array ($(col ACTIONS))" \
  sh -c "echo '$(col ACTIONS)' | grep -Eq '^isolate_node(,[a-z_]+)*\$'"
check "controller stops cleanly" stop_controller

echo "controller_dry_run_enforce: $pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ "$fail" -eq 0 ]
