#!/usr/bin/env bash
# controller_inputs.sh - the controller's inputs besides agents, on the local
# control plane (test/kube):
#   1. a Kubernetes Event (NodeNotReady on a node running a job) becomes a
#      kube signal: the node-not-ready incident, its evidence in `gpuheal
#      explain` / `gpuheal timeline`; the same Event reported by gpuheal
#      itself is ignored;
#   2. RecoveryPolicy rules: an accepted object's rules replace the engine's
#      (status Accepted=True, ruleCount); a changed rule's action applies to
#      the next fault; an invalid version is rejected (Accepted=False, the
#      message naming the field, a log line) and the previous rules stay;
#   3. drain_node in checkpoint mode (namespace annotations): the drain
#      waits for the job's checkpoint signal, and a second one times out;
#      both recorded in the audit store (explain's "why").
# RecoveryPolicy objects are cluster-scoped and read by every controller:
# CMakeLists.txt runs this test alone (RUN_SERIAL).
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them). This script
# plays the kubelet (bound pods Running, deleted pods gone), as
# controller_e2e.sh does.
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-in-$$-$RANDOM"
RP="ctl-inputs-$NS"
TMP=$(mktemp -d /tmp/gh-ctl-in.XXXXXX)
CTL_PID=""
KUBELET_PID=""
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --identity "in-$$")
CTL_READY=event=policy_rules
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  kill "$KUBELET_PID" 2>/dev/null
  "$K" delete recoverypolicy "$RP" --wait=false >/dev/null 2>&1
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" -n default delete events.events.k8s.io -l "gpuheal.io/test=$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in g1 g2 g3 g4; do "$K" -n kube-node-lease delete lease "$NS-$n" --wait=false >/dev/null 2>&1; done
  delete_gnh g1 g2 g3 g4
  delete_incidents '{.spec.node}{.spec.job}' "$NS"
  rm_tmp
}
trap cleanup EXIT

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"

for n in g1 g2 g3 g4; do mknode $n || { echo "FAIL: node $n"; exit 1; }; done

# the kubelet's part (lib.sh), and the node heartbeats (Leases in
# kube-node-lease), or the node lifecycle controller marks the nodes
# NotReady after 40 s and taints them
start_kubelet_heartbeat g1 g2 g3 g4

pod_of() { "$K" -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1" -o jsonpath='{.items[0].metadata.name}'; }

# an events.k8s.io/v1 Event about a node, in "default" (where kubelets post them)
node_event() { # node reason reportingController
  cat <<EOF | "$K" create -f - >/dev/null
apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: $1.$RANDOM$RANDOM
  namespace: default
  labels: {gpuheal.io/test: "$NS"}
eventTime: "$(date -u +%FT%T.%6NZ)"
reportingController: $3
reportingInstance: test-$$
action: StatusChange
reason: $2
type: Normal
note: "Node $1 status is now: $2"
regarding: {apiVersion: v1, kind: Node, name: $1}
EOF
}

explain() { "$GH_BIN/gpuheal" explain "$@" 2>/dev/null; }
rp_cond() { # field of the Accepted condition
  "$K" get recoverypolicy "$RP" -o jsonpath="{.status.conditions[?(@.type==\"Accepted\")].$1}" 2>/dev/null
}
rp_cond_is() { [ "$(rp_cond status)" = "$1" ] && [ "$(rp_cond observedGeneration)" = "$2" ]; }

# the default policy, faster: node_down 2s, not_ready_toleration 3s, hold 2s
"$GH_BIN/gpuheal" policy default | sed -e 's/^\(  hold:\) *30s/\1 2s/' -e 's/^\(  node_down:\) *60s/\1 2s/' \
  -e 's/^\(  not_ready_toleration:\) *300s/\1 3s/' > "$TMP/policy.yaml"
grep -q "node_down: 2s" "$TMP/policy.yaml" || { echo "FAIL: policy"; exit 1; }
grep -q "not_ready_toleration: 3s" "$TMP/policy.yaml" || { echo "FAIL: policy"; exit 1; }

mkjob llm 2
wait_for 30 bound llm 2 || { bad "job llm pods bound"; exit 1; }
kubelet
A=$(node_of llm 0); B=$(node_of llm 1)
echo "job llm on $A and $B"

# ---- 1. an Event becomes a kube signal ---------------------------------------
DB="sqlite:$TMP/audit.db"
start_controller "$DB" --dry-run || exit 1
sleep 1
node_event "$A" NodeNotReady node-controller || bad "create Event on $A"
node_event "$B" NodeNotReady gpuheal.io/controller || bad "create gpuheal's Event on $B"
decided_on() { explain "node/$1" --db "$DB" | grep -q "rule node-not-ready chose"; }
check "Event NodeNotReady on $A -> node-not-ready incident" wait_for 60 decided_on "$A"
explain "node/$A" --db "$DB" > "$TMP/explain-a.txt"
check "explain: the Event is the evidence (node_not_ready from kube)" \
  grep -q "Node $A status is now: NodeNotReady" "$TMP/explain-a.txt"
"$GH_BIN/gpuheal" timeline "node/$A" --db "$DB" > "$TMP/timeline-a.txt"
check "timeline: seen row from the Event" grep -q " seen .*Event NodeNotReady" "$TMP/timeline-a.txt"
sleep 3
check "gpuheal's own Event on $B: no incident" sh -c "! '$GH_BIN/gpuheal' explain node/$B --db '$DB' 2>/dev/null | grep -q 'rule node-not-ready'"

# ---- 2. RecoveryPolicy rules -----------------------------------------------
rp() { # rule-name action [extra match json]
  cat <<EOF | "$K" apply -f - >/dev/null
apiVersion: gpuheal.io/v1alpha1
kind: RecoveryPolicy
metadata: {name: $RP}
spec:
  priority: 5
  rules:
  - name: $1
    match: {class: application${3:+, $3}}
    actions: [{action: $2}]
EOF
}
app_fault() { # job (each on a node of its own: no shared episode), through its pod's status
  bare_pod "$1-0" "$NS-$1" "$1" || bad "pod $1-0"
  pod_error "$1-0" "Traceback (most recent call last): KeyError: 'labels'" || bad "pod $1-0 error"
}
rule_chose() { explain "job/$NS/$1" --db "$DB" | grep -q "rule $2 chose: $3"; }
show() { explain "job/$NS/$1" --db "$DB" | grep -E "rule|why" | sed 's/^/  /'; }

rp app-retry retry_in_place || bad "create RecoveryPolicy"
check "RecoveryPolicy accepted (status Accepted=True, generation 1)" wait_for 20 rp_cond_is True 1
check "status ruleCount 1" [ "$("$K" get recoverypolicy "$RP" -o jsonpath='{.status.ruleCount}')" = 1 ]
check "log: policy_rules from RecoveryPolicy" wait_for 10 grep -q "event=policy_rules rules=1 from=RecoveryPolicy" "$CTL_LOG"
app_fault app1
check "fault 1: the object's rule app-retry chose retry_in_place" wait_for 20 rule_chose app1 app-retry retry_in_place

rp app-restart restart_from_checkpoint
check "changed policy accepted (generation 2)" wait_for 20 rp_cond_is True 2
app_fault app2
check "fault 2: the changed rule app-restart chose restart_from_checkpoint" wait_for 20 rule_chose app2 app-restart restart_from_checkpoint || show app2

rp app-bogus drain_node 'kinds: [bogus_kind]'
check "invalid policy rejected (Accepted=False, generation 3)" wait_for 20 rp_cond_is False 3
check "reason InvalidRule" [ "$(rp_cond reason)" = InvalidRule ]
msg=$(rp_cond message)
check "message names the field ($msg)" sh -c "echo '$msg' | grep -q 'spec.rules\[0\].match.kinds\[0\]: unknown signal kind \"bogus_kind\"'"
check "log: policy_rejected" grep -q "event=policy_rejected name=$RP reason=InvalidRule" "$CTL_LOG"
app_fault app3
check "fault 3: the previous rule app-restart still decides" wait_for 20 rule_chose app3 app-restart restart_from_checkpoint || show app3

"$K" delete recoverypolicy "$RP" >/dev/null
check "policy deleted: the --policy rules again" wait_for 20 grep -q "event=policy_rules rules=[0-9]* from=--policy" "$CTL_LOG"
check "controller stops cleanly on SIGTERM" stop_controller

# ---- 3. drain_node waits for the job's checkpoint ---------------------------
# job llm's nodes back (the store of part 1 is reused: what it decided is
# known and not decided again by this acting controller)
"$K" -n "$NS" delete job llm --wait=false >/dev/null
gone_llm() { ! "$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=llm -o name | grep -q .; }
wait_for 30 gone_llm || bad "job llm's pods gone"
# $A keeps part 1's node-not-ready episode: new evidence there would join
# that incident, so the jobs of this part run elsewhere
"$K" cordon "$A" >/dev/null
"$K" annotate ns "$NS" gpuheal.io/drain-mode=checkpoint gpuheal.io/drain-checkpoint-timeout=8s >/dev/null
mkjob ck 1
mkjob ck2 1
wait_for 30 bound ck 1 && wait_for 30 bound ck2 1 || bad "jobs ck, ck2 bound"
kubelet
X=$(node_of ck 0); Y=$(node_of ck2 0)
PX=$(pod_of ck); PY=$(pod_of ck2)
echo "job ck on $X ($PX), ck2 on $Y ($PY)"
DB2="$DB"
start_controller "$DB2" || exit 1
sleep 1
sxid() { echo '{"ts":"'"$(now)"'","node":"'"$1"'","source":"kmsg","kind":"sxid","code":12028,"msg":"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Fatal, Link 32 egress non-posted PRIV error","id":"sxid-'"$1"'-'"$RANDOM"'"}' | inject; }
evicted() { # pod: terminating or gone
  local d
  d=$("$K" -n "$NS" get pod "$1" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null) || return 0
  [ -n "$d" ]
}
sxid "$X"
check "drain of $X held for the checkpoint" wait_for 20 grep -q "event=drain_waiting .*node=$X" "$CTL_LOG"
sleep 2
check "pod $PX not evicted while waiting" sh -c "! '$K' -n '$NS' get pod '$PX' -o jsonpath='{.metadata.deletionTimestamp}' | grep -q ."
echo '{"ts":"'"$(now)"'","source":"telemetry","kind":"checkpoint","job":"'"$NS"'/ck","step":1300,"path":"s3://ckpt/ck/step-1300","state":"saved"}' | inject
check "after the checkpoint: $PX evicted" wait_for 10 evicted "$PX"
check "log: released on the checkpoint" grep -q "event=drain_released .*outcome=checkpoint" "$CTL_LOG"
ck_why() { explain "node/$X" --db "$DB2" | grep -q "why: .*drain_node waited [0-9.]* s for the next checkpoint ($NS/ck checkpoint step 1300)"; }
check "audit: waited for checkpoint step 1300" wait_for 10 ck_why
check "audit: drain_node succeeded" sh -c "'$GH_BIN/gpuheal' explain node/$X --db '$DB2' | grep -q 'drain_node node/$X: succeeded'"

T0=$(date +%s)
sxid "$Y"
check "drain of $Y held" wait_for 20 grep -q "event=drain_waiting .*node=$Y" "$CTL_LOG"
check "no checkpoint: $PY evicted at the timeout" wait_for 20 evicted "$PY"
waited=$(( $(date +%s) - T0 ))
check "not before the 8 s timeout (${waited} s)" [ "$waited" -ge 7 ]
to_why() { explain "node/$Y" --db "$DB2" | grep -q "why: .*drain_node waited for the next checkpoint and timed out after [0-9.]* s ($NS/ck2 no checkpoint)"; }
check "audit: timed out" wait_for 10 to_why
check "controller stops cleanly on SIGTERM" stop_controller

echo "controller_inputs: $pass passed, $fail failed"
if [ $fail -ne 0 ]; then
  echo "--- controller log (last)"; tail -40 "$CTL_LOG"
fi
[ $fail -eq 0 ]
