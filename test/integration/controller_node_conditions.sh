#!/usr/bin/env bash
# controller_node_conditions.sh - Node conditions set by another agent
# (node-problem-detector) feed gpuheal (issue 16 item 14), on the local
# control plane (test/kube), read as a person reads them:
#   1. KernelDeadlock=True (reason DockerHung) patched into a Node's status
#      as NPD writes it: an Incident (kubectl get incidents: class unknown,
#      rule node-cannot-run-work, the node), `gpuheal explain node/X` naming
#      the condition, the node cordoned and tainted, a Warning Event on the
#      Node (kubectl describe node) that names the condition;
#   2. the controller restarted: the same True condition seen again on its
#      first list is no new incident (the signal's id and the incident's id
#      are stable);
#   3. FrequentKubeletRestart=True on another node: a flag, recorded; the
#      node is not cordoned;
#   4. a condition not in --node-conditions and the kubelet's own
#      MemoryPressure raise nothing; KernelDeadlock going False raises
#      nothing; another condition on a node with one is its own incident.
# Negative checks wait on a later change that must be decided (the Node
# watch delivers in order), never on a sleep.
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-npd-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-npd.XXXXXX)
CTL_PID=""
KUBELET_PID=""
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --identity "npd-$$")
CTL_READY=event=policy_rules
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  kill "$KUBELET_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in g1 g2 g3; do "$K" -n kube-node-lease delete lease "$NS-$n" --wait=false >/dev/null 2>&1; done
  delete_gnh g1 g2 g3
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
for n in g1 g2 g3; do mknode $n || { echo "FAIL: node $n"; exit 1; }; done
start_kubelet_heartbeat g1 g2 g3
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"

# npd_condition NODE TYPE STATUS REASON MESSAGE: what NPD writes, a
# strategic merge of one condition (conditions merge by type)
npd_condition() {
  local ts; ts=$(date -u +%FT%TZ)
  "$K" patch node "$1" --subresource=status --type=strategic -p \
    '{"status":{"conditions":[{"type":"'"$2"'","status":"'"$3"'","reason":"'"$4"'","message":"'"$5"'","lastHeartbeatTime":"'"$ts"'","lastTransitionTime":"'"$ts"'"}]}}' >/dev/null
}
incidents_of() { "$K" get incidents -l "gpuheal.io/node=$1" -o name 2>/dev/null | grep -c .; }
incident_field() { "$K" get incidents -l "gpuheal.io/node=$1" -o "jsonpath={.items[0].$2}" 2>/dev/null; }
explain() { "$GH_BIN/gpuheal" explain "$@" 2>/dev/null; }

A="$NS-g1" B="$NS-g2" C="$NS-g3"
DB="sqlite:$TMP/audit.db"
start_controller "$DB" || exit 1

# ---- 1. KernelDeadlock -------------------------------------------------------
npd_condition "$A" KernelDeadlock True DockerHung "kernel: INFO: task docker:1234 blocked for more than 120 seconds." ||
  bad "patch $A status"
check "kubectl get incidents: one for $A" wait_for 30 is 1 incidents_of "$A"
check "Incident class unknown" is unknown incident_field "$A" spec.class
check "Incident rule node-cannot-run-work" is node-cannot-run-work incident_field "$A" spec.rule
check "Incident actions [isolate_node]" sh -c "'$K' get incidents -l gpuheal.io/node=$A -o jsonpath='{.items[0].spec.actions}' | grep -q '\"isolate_node\"'"
"$K" get incidents -l "gpuheal.io/node=$A" > "$TMP/get-incidents.txt" 2>&1
sed 's/^/  /' "$TMP/get-incidents.txt"
check "kubectl get incidents prints the node and class" grep -qE " unknown +$A " "$TMP/get-incidents.txt"
explain "node/$A" --db "$DB" > "$TMP/explain-a.txt"
check "gpuheal explain node/$A: the condition and its reason" \
  grep -q "KernelDeadlock=True on $A (DockerHung)" "$TMP/explain-a.txt"
check "gpuheal explain node/$A: the evidence is the node_condition signal, as the Node said it" \
  grep -q "KernelDeadlock=True (DockerHung): kernel: INFO: task docker:1234 blocked" "$TMP/explain-a.txt"
check "$A cordoned" wait_for 20 cordoned "$A"
check "$A tainted" wait_for 20 tainted "$A"
check "kubectl describe node/$A: a Warning Event naming KernelDeadlock" wait_for 20 sh -c \
  "'$K' describe node/$A | sed -n '/^Events:/,\$p' > '$TMP/describe-a.txt' && grep -q 'Warning .*KernelDeadlock=True' '$TMP/describe-a.txt'"
check "its reason is NodeFault, not GPUFault (a host's check, not the GPU)" \
  sh -c "grep -q 'Warning  *NodeFault ' '$TMP/describe-a.txt' && ! grep -q 'GPUFault' '$TMP/describe-a.txt'"
sed 's/^/  /' "$TMP/describe-a.txt" | head -8

# ---- 2. a restart: the same condition, seen again, is not a new incident ----
stop_controller || bad "controller exit status"
start_controller "$DB" || exit 1
# a later change on another node is decided only after the Node list (with
# $A's True condition) was read: the barrier for "nothing new on $A"
npd_condition "$C" ReadonlyFilesystem True FilesystemIsReadOnly "Remounting filesystem read-only" ||
  bad "patch $C status"
check "ReadonlyFilesystem on $C -> an incident (the controller reads Node changes)" wait_for 30 is 1 incidents_of "$C"
check "still one incident for $A" is 1 incidents_of "$A"
decisions_of() { explain "node/$1" --db "$DB" | grep -c "rule $2 chose:"; }
check "explain node/$A: one incident" is 1 decisions_of "$A" node-cannot-run-work

# ---- 3. a flag ---------------------------------------------------------------
npd_condition "$B" FrequentKubeletRestart True FrequentKubeletRestart "kubelet is restarting frequently" ||
  bad "patch $B status"
check "FrequentKubeletRestart on $B -> an incident" wait_for 30 is 1 incidents_of "$B"
check "its rule node-runtime-restarting" is node-runtime-restarting incident_field "$B" spec.rule
explain "node/$B" --db "$DB" > "$TMP/explain-b.txt"
check "explain node/$B: the drain only recorded (nothing harmed)" \
  grep -q "nothing harmed and the hardware can wait, so drain_node is only recorded" "$TMP/explain-b.txt"
phase_of() { incident_field "$1" status.phase; }
done_phase() { case "$(phase_of "$1")" in Succeeded|Failed|Skipped) return 0 ;; esac; return 1; }
check "its Incident settled (phase $(phase_of "$B"))" wait_for 30 done_phase "$B"
check "$B not cordoned (a flag is not harm)" uncordoned "$B"
check "$B not tainted" untainted "$B"

# ---- 4. what is not watched, and clearing ------------------------------------
npd_condition "$B" Site/Unwatched True X "not in --node-conditions" || bad "patch $B (unwatched)"
npd_condition "$B" MemoryPressure True KubeletHasInsufficientMemory "the kubelet's own" || bad "patch $B (MemoryPressure)"
npd_condition "$A" KernelDeadlock False KernelHasNoDeadlock "kernel has no deadlock" || bad "patch $A (False)"
# a barrier: the Node watch delivers changes in order, so once this later
# one is decided, the three above were seen
npd_condition "$C" FrequentDockerRestart True FrequentDockerRestart "docker is restarting frequently" ||
  bad "patch $C (barrier)"
check "FrequentDockerRestart on $C: its own incident (one per node and condition)" wait_for 30 is 2 incidents_of "$C"
check "no new incident for $B (unwatched, the kubelet's own)" is 1 incidents_of "$B"
check "no new incident for $A (KernelDeadlock False)" is 1 incidents_of "$A"

stop_controller || bad "controller exit status (sanitizers: no leak)"
echo "controller_node_conditions: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
