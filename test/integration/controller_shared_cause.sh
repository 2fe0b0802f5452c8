#!/usr/bin/env bash
# controller_shared_cause.sh - a cause several nodes share (issue 23), on the
# local control plane (test/kube) with 40 kwok GPU nodes, read as a person
# reads it:
#   1. the 40 nodes, labelled with the InfiniBand leaf switch they all hang
#      off (and with four racks), report their NIC port down within two
#      seconds (the agents' ingest path): exactly one Incident, scope
#      switch, component that leaf label, affectedNodes the 40 (count 40),
#      no node blamed (kubectl get incidents: SCOPE switch); no node
#      cordoned or tainted for it; one Warning Event SharedCause on the
#      Incident (kubectl describe) naming the scope, the component and 40;
#      gpuheal_shared_cause_incidents_total{scope="switch"} 1; `gpuheal
#      explain` lists the 40 nodes from the audit store;
#   2. meanwhile an XID 79 on one of them: that node cordoned and tainted
#      with its own Incident (the GPU's own fault, no scope);
#   3. nothing else: a later XID 79 on a 41st node (outside the group) is
#      the barrier - once it is decided, after the engine's hold for shared
#      signatures has passed, every finding of the burst has been decided,
#      and the controller counted 3 incidents in all (/metrics);
#   4. node-problem-detector's KernelDeadlock (which alone isolates its
#      node) True with the same reason on the 40 Nodes while the controller
#      is down: its next start reads them in its first Node list and decides
#      one more shared-cause Incident (kube node_condition evidence, one
#      SharedCause Event); of the 40, at most the first one read is
#      isolated as its own (the engine decides a signature's first node at
#      once); a 42nd node's XID 79 is the barrier again.
# Waits poll with deadlines (the machine may be loaded); the barrier
# replaces any sleep.
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-shared-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-shared.XXXXXX)
CTL_PID=""
NODES=40
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --identity "shared-$$")
CTL_READY=event=nodes_listed # the Node informer's first list: the labels are in the engine
WAIT_BY=clock
. "$(dirname "$0")/lib.sh"

LEAF_KEY=example.com/ib-leaf
LEAF="leaf-$NS"
names() { for i in $(seq -w 1 "$NODES"); do echo "$NS-g$i"; done; }
X="$NS-x" # the 41st node: no leaf, no rack

cleanup() {
  stop_controller
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  "$K" delete gpunodehealths -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in $(names) "$X" "$NS-y"; do "$K" delete gpunodehealth "$n" --wait=false >/dev/null 2>&1; done
  delete_incidents
  delete_incidents '{.spec.affectedNodes}' "\"$NS-"
  rm_tmp
}
trap cleanup EXIT

die_here() { bad "$*"; echo "--- controller log (tail)"; tail -30 "$CTL_LOG"; exit 1; }

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
# the engine's hold for a finding whose signature may be shared (policy
# settings.fleet.hold): the barrier waits past it
HOLD_S=$(awk '/^  fleet:/ { f = 1; next } f && /^  [a-z]/ { f = 0 }
  f && $1 == "hold:" { sub(/s$/, "", $2); print $2; exit }' "$TMP/policy.yaml")
case ${HOLD_S:-} in '' | *[!0-9]*) HOLD_S=15 ;; esac

# ---- 40 kwok GPU nodes on one leaf switch (four racks), and the 41st -------
kwok_node() { # NAME EXTRA-LABELS
  cat <<EOF
- apiVersion: v1
  kind: Node
  metadata:
    name: $1
    labels: {gpuheal.io/pool: "$NS", gpuheal.io/fake: "true", kubernetes.io/hostname: $1$2}
    annotations: {kwok.x-k8s.io/node: fake}
  spec:
    taints: [{key: gpuheal.io/test-only, effect: NoSchedule}]
  status:
    capacity: {nvidia.com/gpu: "8"}
EOF
}
{
  echo "apiVersion: v1"; echo "kind: List"; echo "items:"
  i=0
  for n in $(names); do
    kwok_node "$n" ", $LEAF_KEY: $LEAF, example.com/rack: r$((i / 10 + 1))"
    i=$((i + 1))
  done
  kwok_node "$X" ""
} > "$TMP/nodes.yaml"
"$K" create -f "$TMP/nodes.yaml" >/dev/null || { echo "FAIL: nodes"; exit 1; }
ready_count() {
  "$K" get nodes -l "gpuheal.io/pool=$NS" \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c True
}
check "$((NODES + 1)) kwok nodes Ready" wait_for 120 is $((NODES + 1)) ready_count

start_controller "sqlite:$TMP/audit.db" || die_here "controller start"
check "the controller read the leaf labels ($NODES nodes with a component label)" \
  grep -q "event=nodes_listed nodes=$((NODES + 1)) with_component_labels=$NODES" "$CTL_LOG"

# ---- 1 and 2: the leaf's ports go down on all 40; an XID 79 on one --------
# the agents' clocks: all within two seconds (the engine's link window is
# on the signals' time, not on when they arrive), none in the future
T0=$(($(date -u +%s) - 3))
{
  i=0
  for n in $(names); do
    us=$((i * 50000)) # 50 ms apart: 40 nodes in two seconds
    ts=$(date -u -d "@$((T0 + us / 1000000))" +%FT%T).$(printf '%06d' $((us % 1000000)))Z
    echo '{"ts":"'"$ts"'","node":"'"$n"'","source":"host","kind":"nic","device":"mlx5_0","port":1,"counter":"link_downed","count":1,"state":"down","msg":"mlx5_core 0000:0c:00.0: Port 1 link down","id":"nic-'"$n"'-'"$T0"'"}'
    i=$((i + 1))
  done
} > "$TMP/burst.jsonl"
inject < "$TMP/burst.jsonl" || bad "inject the NIC burst"
V="$NS-g07" # the node whose GPU also falls off the bus, meanwhile
xid79 "$V" 5 | inject || bad "inject the XID 79 on $V"

# Incidents whose affectedNodes name our nodes (other tests' controllers
# write theirs to the same cluster)
shared_ids() {
  "$K" get incidents -o jsonpath='{range .items[*]}{.metadata.name} {.spec.affectedNodes}{"\n"}{end}' |
    awk -v p="\"$NS-" 'index($0, p) { print $1 }'
}
shared_count() { shared_ids | grep -c .; }
check "a shared-cause Incident for the burst" wait_for 120 is 1 shared_count
ID=$(shared_ids | head -1)
[ -n "$ID" ] || die_here "no shared-cause Incident"
echo "  shared-cause incident: $ID"
field() { "$K" get incident "$ID" -o "jsonpath={$1}"; }
check "its scope is switch" is switch field .spec.scope
check "its component is the leaf label ($(field .spec.component))" is "$LEAF_KEY=$LEAF" field .spec.component
check "affectedNodesCount $NODES" is "$NODES" field .spec.affectedNodesCount
field '.spec.affectedNodes[*]' | tr ' ' '\n' | sort > "$TMP/affected.txt"
names | sort > "$TMP/names.txt"
check "affectedNodes are the $NODES nodes" cmp -s "$TMP/affected.txt" "$TMP/names.txt"
check "no node blamed (spec.node absent)" is "" field .spec.node
check "label gpuheal.io/scope=switch" is switch field '.metadata.labels.gpuheal\.io/scope'
check "no action takes a node out of service" sh -c "! '$K' get incident '$ID' -o jsonpath='{.spec.actions}' |
  grep -qE 'isolate_node|drain_node|reset_gpu|reboot_node|replace_node'"
"$K" get incident "$ID" > "$TMP/get.txt" 2>&1
sed 's/^/  /' "$TMP/get.txt"
scope_column() { # kubectl get incident ID: the SCOPE column reads switch
  awk 'NR == 1 { c = index($0, "SCOPE") }
    NR == 2 { split(substr($0, c), w, " "); exit !(c && w[1] == "switch") }' "$TMP/get.txt"
}
check "kubectl get incident shows SCOPE switch" scope_column

# the GPU's own fault on one of them: isolated, with its own Incident
own_ids() { "$K" get incidents -l "gpuheal.io/node=$1" -o name 2>/dev/null; }
check "$V cordoned (XID 79)" wait_for 60 cordoned "$V"
check "$V tainted" wait_for 30 tainted "$V"
check "$V has its own Incident" wait_for 30 is 1 sh -c "'$K' get incidents -l gpuheal.io/node=$V -o name | grep -c ."
VID=$(own_ids "$V" | head -1)
check "its class gpu_hardware, no scope" is "gpu_hardware/" \
  "$K" get "$VID" -o 'jsonpath={.spec.class}/{.spec.scope}'

# ---- 3. the barrier: a later XID 79 outside the group, past the hold -------
until_s=$((T0 + 2 * HOLD_S + 5))
check "the engine's hold (${HOLD_S}s) has passed" wait_for $((2 * HOLD_S + 120)) \
  sh -c "[ \$(date -u +%s) -gt $until_s ]"
xid79 "$X" 2 | inject || bad "inject the barrier XID 79 on $X"
check "$X cordoned (the barrier decided)" wait_for 60 cordoned "$X"
ctl_metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
incidents_total() {
  curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^gpuheal_incidents_total\{/ { s += $2 } END { print s + 0 }'
}
check "3 incidents decided in all: the shared cause, $V's, $X's ($(incidents_total))" is 3 incidents_total
check "gpuheal_shared_cause_incidents_total{scope=\"switch\"} 1" is 1 \
  ctl_metric 'gpuheal_shared_cause_incidents_total{scope="switch"}'
check "still one shared-cause Incident" is 1 shared_count
cordoned_count() { for n in $(names); do cordoned "$n" && echo "$n"; done | grep -c .; }
sum_shared() {
  curl -s "http://127.0.0.1:$PORT/metrics" |
    awk '/^gpuheal_shared_cause_incidents_total\{/ { s += $2 } END { print s + 0 }'
}
tainted_count() { for n in $(names); do tainted "$n" && echo "$n"; done | grep -c .; }
check "of the $NODES, only $V cordoned" is 1 cordoned_count
check "of the $NODES, only $V tainted" is 1 tainted_count
others_with_incidents() {
  for n in $(names); do [ "$n" = "$V" ] || own_ids "$n"; done | grep -c .
}
check "no other node of the $NODES has an Incident of its own" is 0 others_with_incidents

# ---- what a person reads: the Event, the audit trail ------------------------
shared_events() {
  "$K" get events --field-selector "involvedObject.name=$ID,reason=SharedCause" \
    -o jsonpath='{range .items[*]}{.type} {.message}{"\n"}{end}'
}
check "one Warning Event SharedCause on the Incident" wait_for 60 is 1 sh -c \
  "'$K' get events --field-selector 'involvedObject.name=$ID,reason=SharedCause' -o name | grep -c ."
shared_events > "$TMP/event.txt"
sed 's/^/  /' "$TMP/event.txt"
check "it names the scope, the component and $NODES nodes" \
  grep -q "^Warning $ID: shared cause: scope switch, component $LEAF_KEY=$LEAF, $NODES nodes affected" "$TMP/event.txt"
check "kubectl describe incident/$ID lists it" sh -c \
  "'$K' describe incident/$ID | sed -n '/^Events:/,\$p' | grep -q 'Warning  *SharedCause '"
# gpuheal's Events about the nodes (the node controller posts its own)
node_events() {
  "$K" get events.events.k8s.io -A \
    -o jsonpath='{range .items[*]}{.regarding.kind} {.regarding.name} {.reportingController}{"\n"}{end}' |
    awk '$1 == "Node" && $3 == "gpuheal.io/controller" { print $2 }' | sort -u
}
node_events > "$TMP/node-events.txt"
check "gpuheal posted Events about $V" grep -qx "$V" "$TMP/node-events.txt"
check "and about no other node of the $NODES" is 0 sh -c \
  "grep '^$NS-g' '$TMP/node-events.txt' | grep -vx '$V' | grep -c ."
"$GH_BIN/gpuheal" explain "incident/$ID" --db "sqlite:$TMP/audit.db" > "$TMP/explain.txt" 2>&1
check "gpuheal explain: the shared cause, its component" \
  grep -q "Shared cause: scope switch, component $LEAF_KEY=$LEAF" "$TMP/explain.txt"
check "gpuheal explain: the $NODES affected nodes" grep -q "Affected nodes ($NODES): $NS-g01, $NS-g02, " "$TMP/explain.txt"
check "gpuheal explain: no node blamed" grep -q "no node blamed" "$TMP/explain.txt"

check "controller stops cleanly (sanitizers: no leak)" stop_controller

# ---- 4. another agent's check misfiring on all 40 (Node conditions) --------
# node-problem-detector's KernelDeadlock, True with the same reason on the
# 40 Nodes while the controller is down: its first list turns them into 40
# node_condition signals at once (each alone would isolate its node)
T1=$(date -u +%FT%TZ)
for n in $(names); do
  "$K" patch node "$n" --subresource=status --type=strategic -p \
    '{"status":{"conditions":[{"type":"KernelDeadlock","status":"True","reason":"DockerHung","message":"kernel: INFO: task dockerd:1234 blocked for more than 120 seconds.","lastHeartbeatTime":"'"$T1"'","lastTransitionTime":"'"$T1"'"}]}}' \
    >/dev/null || bad "KernelDeadlock on $n"
done
T1S=$(date -u -d "$T1" +%s)
FIRST=$ID
start_controller "sqlite:$TMP/audit2.db" || die_here "controller restart"
check "a second shared-cause Incident, for the conditions" wait_for 120 is 2 shared_count
ID=$(shared_ids | grep -vx "$FIRST" | head -1)
[ -n "$ID" ] || die_here "no second shared-cause Incident"
echo "  shared-cause incident: $ID ($(field .spec.scope), $(field .spec.component))"
check "its scope is set ($(field .spec.scope))" sh -c "[ -n \"\$('$K' get incident '$ID' -o jsonpath='{.spec.scope}')\" ]"
# the engine decides a shared cause's record once it settled: every node
# that showed it (their signals carry the conditions' own transition time)
check "affectedNodesCount $NODES" is "$NODES" field .spec.affectedNodesCount
check "its evidence is the Nodes' KernelDeadlock" sh -c \
  "'$K' get incident '$ID' -o jsonpath='{.spec.evidence[*].msg}' | grep -q 'KernelDeadlock=True (DockerHung)'"
check "no node blamed" is "" field .spec.node
Y="$NS-y"
"$K" create -f - >/dev/null <<EOF || bad "node $Y"
apiVersion: v1
kind: List
items:
$(kwok_node "$Y" "")
EOF
until_s=$((T1S + 2 * HOLD_S + 5))
check "the engine's hold has passed again" wait_for $((2 * HOLD_S + 120)) \
  sh -c "[ \$(date -u +%s) -gt $until_s ]"
check "$Y Ready" wait_for 120 sh -c "'$K' get node '$Y' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
xid79 "$Y" 1 | inject || bad "inject the barrier XID 79 on $Y"
check "$Y cordoned (the barrier decided)" wait_for 60 cordoned "$Y"
check "one shared cause decided by this start" is 1 sum_shared
check "still two shared-cause Incidents in all" is 2 shared_count
# the first node of a signature that would be taken out waits 1 s for
# others (docs/engine.md, "Shared causes"): none of the 40 is taken out
check "of the $NODES, only $V cordoned" is 1 cordoned_count
check "no other node of the $NODES has an Incident of its own" is 0 others_with_incidents
check "one SharedCause Event on it" wait_for 60 is 1 sh -c \
  "'$K' get events --field-selector 'involvedObject.name=$ID,reason=SharedCause' -o name | grep -c ."

check "controller stops cleanly (sanitizers: no leak)" stop_controller
echo "controller_shared_cause: $pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ "$fail" -eq 0 ]
