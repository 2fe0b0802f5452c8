#!/usr/bin/env bash
# The CRDs of deploy/crds as kubectl shows them on the real control plane
# (test/kube applies them at start): each is Established and has a status
# subresource; `kubectl get` prints the printer columns with the values of an
# Incident (one of a shared cause too) and a GPUNodeHealth (and -o wide the
# priority-1 ones); a write to the status subresource shows in its column
# while status in a main-resource write is ignored; the OpenAPI v3
# validation refuses bad objects naming the field; RecoveryPolicy
# (cluster-wide: the controllers of other tests would read a real one) is
# checked by server-side dry run and by the server's Table column
# definitions.
set -uo pipefail
[ -n "${GH_KUBE_ENV:-}" ] && [ -r "$GH_KUBE_ENV" ] || { echo "skip: no GH_KUBE_ENV"; exit 0; }
. "$GH_KUBE_ENV"
. "$GH_KUBE_DIR/env" # GH_KUBE_API
export KUBECONFIG
OK_MARK="ok   -" FAIL_MARK="FAIL -" WAIT_BY=clock
. "$(dirname "$0")/lib.sh"

sfx="crds-$$-$RANDOM"
inc="inc-$sfx" gnh_name="gnh-$sfx" rp="rp-$sfx"
tmp=$(mktemp -d)
cleanup() {
  k delete incident "$inc" "$inc-shared" --ignore-not-found --wait=false >/dev/null 2>&1
  k delete gpunodehealth "$gnh_name" --ignore-not-found --wait=false >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- Established, status subresource
for crd in incidents.gpuheal.io gpunodehealths.gpuheal.io recoverypolicies.gpuheal.io; do
  check "$crd is Established" is True \
    k get crd "$crd" -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}'
  check "$crd has a status subresource" is '{}' \
    k get crd "$crd" -o 'jsonpath={.spec.versions[0].subresources.status}'
done

# ---- Incident: printer columns with values
cat >"$tmp/inc.yaml" <<EOF
apiVersion: gpuheal.io/v1alpha1
kind: Incident
metadata: {name: $inc}
spec:
  id: $inc
  class: gpu_hardware
  node: node-$sfx
  gpu: 3
  job: team-a/llm-$sfx
  actions: [isolate_node, restart_from_checkpoint]
  actionsSummary: isolate_node,restart_from_checkpoint
  device: "3"
  decidedTime: "2026-11-29T10:00:00Z"
  reason: GPU 3 fell off the bus (XID 79)
  dryRun: true
EOF
check "a valid Incident is created" k create -f "$tmp/inc.yaml"
out=$(k get incident "$inc")
echo "$out" | sed 's/^/    /'
hdr=$(echo "$out" | head -n1 | tr -s ' ')
row=$(echo "$out" | sed -n 2p | tr -s ' ')
check "Incident columns: NAME CLASS NODE GPU SCOPE JOB ACTIONS PHASE DRY-RUN AGE" \
  test "$hdr" = "NAME CLASS NODE GPU SCOPE JOB ACTIONS PHASE DRY-RUN AGE"
case $row in
  "$inc gpu_hardware node-$sfx 3 team-a/llm-$sfx isolate_node,restart_from_checkpoint true "[0-9]*) ok "Incident row shows the spec's values (no phase yet, DRY-RUN true)" ;;
  *) bad "Incident row: '$row'" ;;
esac
wide=$(k get incident "$inc" -o wide | head -n1 | tr -s ' ')
check "-o wide adds the priority-1 COMPONENT, AFFECTED and REASON columns" \
  test "$wide" = "NAME CLASS NODE GPU SCOPE JOB ACTIONS PHASE DRY-RUN COMPONENT AFFECTED REASON AGE"

# status through the status subresource only
k patch incident "$inc" --type=merge -p '{"status":{"phase":"Failed"}}' >/dev/null 2>&1
check "status in a main-resource patch is ignored" is "" k get incident "$inc" -o 'jsonpath={.status.phase}'
check "status patch through --subresource=status" \
  k patch incident "$inc" --subresource=status --type=merge -p '{"status":{"phase":"Acting","message":"cordoning"}}'
check "PHASE column shows the status" is Acting \
  bash -c "'$GH_KUBE_BIN/kubectl' get incident '$inc' --no-headers | awk '{print \$7}'"
err=$(k patch incident "$inc" --subresource=status --type=merge -p '{"status":{"phase":"Sleeping"}}' 2>&1)
case $err in
  *status.phase*Unsupported\ value*) ok "an invalid status phase is refused, naming status.phase" ;;
  *) bad "invalid status phase: $err" ;;
esac

# ---- validation names what is wrong
sed 's/class: gpu_hardware/class: cosmic_rays/' "$tmp/inc.yaml" | sed "s/name: $inc/name: $inc-bad/" >"$tmp/bad1.yaml"
err=$(k create -f "$tmp/bad1.yaml" 2>&1)
case $err in
  *spec.class*Unsupported\ value*cosmic_rays*) ok "an unknown class is refused, naming spec.class" ;;
  *) bad "unknown class: $err" ;;
esac
grep -v '^  actions:' "$tmp/inc.yaml" | sed "s/name: $inc/name: $inc-bad2/" >"$tmp/bad2.yaml"
err=$(k create -f "$tmp/bad2.yaml" 2>&1)
case $err in
  *spec.actions*Required\ value*) ok "a missing spec.actions is refused, naming it" ;;
  *) bad "missing actions: $err" ;;
esac
sed 's/gpu: 3/gpu: -1/' "$tmp/inc.yaml" | sed "s/name: $inc/name: $inc-bad3/" >"$tmp/bad3.yaml"
err=$(k create -f "$tmp/bad3.yaml" 2>&1)
case $err in
  *spec.gpu*greater\ than\ or\ equal\ to\ 0*) ok "a negative GPU index is refused, naming spec.gpu" ;;
  *) bad "negative gpu: $err" ;;
esac

# a cause several nodes share: no node, its scope, component and the
# affected nodes (at most 256 on the object, their count beside)
cat >"$tmp/shared.yaml" <<EOF
apiVersion: gpuheal.io/v1alpha1
kind: Incident
metadata: {name: $inc-shared}
spec:
  id: $inc-shared
  class: network
  scope: switch
  component: example.com/ib-leaf=leaf-$sfx
  affectedNodes: [a-$sfx, b-$sfx]
  affectedNodesCount: 40
  actions: [none]
  actionsSummary: none
  decidedTime: "2026-11-29T10:00:00Z"
  dryRun: false
EOF
check "a shared-cause Incident is created" k create -f "$tmp/shared.yaml"
row=$(k get incident "$inc-shared" -o wide --no-headers | tr -s ' ')
case $row in
  "$inc-shared network switch none false example.com/ib-leaf=leaf-$sfx 40 "*) ok "its row shows SCOPE, and -o wide COMPONENT and AFFECTED" ;;
  *) bad "shared-cause row: '$row'" ;;
esac
k delete incident "$inc-shared" --wait=false >/dev/null 2>&1
sed 's/scope: switch/scope: galaxy/' "$tmp/shared.yaml" | sed "s/$inc-shared/$inc-bad4/g" >"$tmp/bad4.yaml"
err=$(k create -f "$tmp/bad4.yaml" 2>&1)
case $err in
  *spec.scope*Unsupported\ value*galaxy*) ok "an unknown scope is refused, naming spec.scope" ;;
  *) bad "unknown scope: $err" ;;
esac
many=$(seq -s, -f 'n%g' 1 257)
sed "s/^  affectedNodes: .*/  affectedNodes: [$many]/" "$tmp/shared.yaml" | sed "s/$inc-shared/$inc-bad5/g" >"$tmp/bad5.yaml"
err=$(k create -f "$tmp/bad5.yaml" 2>&1)
case $err in
  *spec.affectedNodes*must\ have\ at\ most\ 256\ items*) ok "more than 256 affected nodes are refused, naming spec.affectedNodes" ;;
  *) bad "257 affected nodes: $(echo "$err" | head -c 300)" ;;
esac

# ---- GPUNodeHealth
cat <<EOF | k create -f - >/dev/null
apiVersion: gpuheal.io/v1alpha1
kind: GPUNodeHealth
metadata: {name: $gnh_name}
spec: {nodeName: node-$sfx}
EOF
k patch gpunodehealth "$gnh_name" --subresource=status --type=merge \
  -p '{"status":{"state":"Degraded","gpuCount":8,"healthyGPUs":7,"lastAction":{"action":"reset_gpu","result":"Succeeded"}}}' >/dev/null 2>&1
out=$(k get gnh "$gnh_name")
echo "$out" | sed 's/^/    /'
hdr=$(echo "$out" | head -n1 | tr -s ' ')
row=$(echo "$out" | sed -n 2p | tr -s ' ')
check "GPUNodeHealth columns: NAME NODE STATE GPUS HEALTHY LAST-ACTION AGE" \
  test "$hdr" = "NAME NODE STATE GPUS HEALTHY LAST-ACTION AGE"
case $row in
  "$gnh_name node-$sfx Degraded 8 7 reset_gpu "*) ok "GPUNodeHealth row shows spec and status" ;;
  *) bad "GPUNodeHealth row: '$row'" ;;
esac
check "the gpuheal category lists both" \
  bash -c "'$GH_KUBE_BIN/kubectl' get gpuheal -o name | grep -c -e 'incident.gpuheal.io/$inc' -e 'gpunodehealth.gpuheal.io/$gnh_name' | grep -qx 2"

# ---- RecoveryPolicy: server-side dry run (defaults, validation) and columns
cat >"$tmp/rp.yaml" <<EOF
apiVersion: gpuheal.io/v1alpha1
kind: RecoveryPolicy
metadata: {name: $rp}
spec:
  nodeSelector: {gpuheal.io/pool: none-$sfx}
  rules:
  - name: xid79
    match: {class: gpu_hardware, codes: [79]}
    actions: [{action: isolate_node}]
EOF
out=$(k create --dry-run=server -f "$tmp/rp.yaml" -o 'jsonpath={.spec.priority}/{.spec.dryRun}/{.spec.rules[0].match.repetitions}' 2>&1)
check "RecoveryPolicy dry run applies the schema defaults (priority 0, dryRun false, repetitions 1)" \
  test "$out" = "0/false/1"
sed 's/name: xid79/name: XID_79/' "$tmp/rp.yaml" >"$tmp/rp-bad.yaml"
err=$(k create --dry-run=server -f "$tmp/rp-bad.yaml" 2>&1)
case $err in
  *spec.rules\[0\].name*should\ match*) ok "a bad rule name is refused, naming spec.rules[0].name" ;;
  *) bad "bad rule name: $err" ;;
esac
check "the dry runs stored nothing" is "" k get recoverypolicy "$rp" --ignore-not-found -o name
pki=$GH_KUBE_DIR/pki
cols=$(curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
  -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' \
  "$GH_KUBE_API/apis/gpuheal.io/v1alpha1/recoverypolicies?limit=1" |
  python3 -c 'import json,sys; print(" ".join(c["name"] for c in json.load(sys.stdin)["columnDefinitions"]))')
check "RecoveryPolicy columns: Name Priority Dry-Run Rules Max-Unavailable Actions/h Ready Age ($cols)" \
  test "$cols" = "Name Priority Dry-Run Rules Max-Unavailable Actions/h Ready Age"

# ---- kubectl explain: every field described (test/cli/crd_descriptions.sh
# walks the schemas; here what a person reads)
explains() { # WHAT TEXT: `kubectl explain WHAT` shows TEXT
  k explain "$1" 2>&1 | tr -s ' \n' ' ' | grep -qF -- "$2"
}
check "kubectl explain incident: the kind's description" explains incident \
  "An Incident: one decision of gpuheal's controller"
check "kubectl explain incident.spec.gpu" explains incident.spec.gpu \
  "The blamed GPU's index on the node"
check "kubectl explain recoverypolicy.spec.budgets.nodeCooldown" explains \
  recoverypolicy.spec.budgets.nodeCooldown "No new action on a node this soon after the last one"
check "kubectl explain gpunodehealth.status.gpus.lastXid" explains gpunodehealth.status.gpus.lastXid \
  "The latest XID code seen on this GPU."
for f in incident incident.status.actions.result recoverypolicy.status.ruleCount gpunodehealth.spec.nodeName; do
  check "kubectl explain $f: not <empty>" sh -c "! '$GH_KUBE_BIN/kubectl' explain $f 2>&1 | grep -q '<empty>'"
done

echo "kube_crds: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
