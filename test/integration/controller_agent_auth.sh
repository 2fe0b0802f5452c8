#!/usr/bin/env bash
# controller_agent_auth.sh - agents authenticated by their pod's bound
# ServiceAccount token, on the local control plane (test/kube) with the
# real gpuheal-controller and the real kube-apiserver's TokenReview (issue
# 15 #1, #2): with --agent-service-account NS/gh-agent,
#   - a token bound to a pod on node n1 reports for n1 (XID 79: cordoned);
#     a line naming n2 is rejected (422, the message names both nodes) and
#     n2 stays in service; a kube-kind line (node_not_ready) is rejected
#     from it and from the operator's token;
#   - refused (401, with the reason): a token not bound to a pod (no node),
#     one for another audience, one of another ServiceAccount, a made-up one;
#   - a pre-sent id: 100 step lines with ids n3/boot/900..999 from n3's own
#     agent and an operator's injected XID 31 with id n3/boot/951 do not make
#     n3's kernel record n3/boot/950 (XID 79) a duplicate: n3 is cordoned;
#   - the operator's token (--token-file) still reports for any node;
#   - a line of n1's agent without "node" is n1's (issue 24 #6; was 422).
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
shopt -s lastpipe # post, at the end of a pipe, sets $code here
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-aa-$$-$RANDOM"
NODES="n1 n2 n3 n4"
TMP=$(mktemp -d /tmp/gh-ctl-aa.XXXXXX)
CTL_PID=""
HB_PID=""
CTL_READY=event=policy_rules
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --storm-nodes 0 --max-actions-per-hour 0
  --identity "aa-$$")
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  [ -n "$HB_PID" ] && kill "$HB_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  for n in $NODES; do "$K" -n kube-node-lease delete lease "$NS-$n" --wait=false >/dev/null 2>&1; done
  delete_gnh $NODES
  delete_incidents
  rm_tmp
}
trap cleanup EXIT

agent_pod() { # name node serviceaccount
  "$K" -n "$NS" create -f - >/dev/null <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeName: $2
  serviceAccountName: $3
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  containers: [{name: agent, image: gpuheal/gpuheal:0.1.0}]
EOF2
}
token() { "$K" -n "$NS" create token "$@" --duration 1h; }
# post TOKEN: stdin to POST /v1/signals; status in $code, body in $TMP/body
post() {
  code=$(curl -s -o "$TMP/body" -w '%{http_code}' --max-time 30 -X POST \
    -H "Authorization: Bearer $1" --data-binary @- "http://127.0.0.1:$PORT/v1/signals")
}
body_has() { grep -qF -- "$1" "$TMP/body"; }
xid() { # node code id
  echo '{"ts":"'"$(now)"'","node":"'"$1"'","gpu":0,"source":"kmsg","kind":"xid","code":'"$2"',"msg":"NVRM: Xid (PCI:0000:3b:00): '"$2"', pid=4242","id":"'"$3"'"}'
}

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "operator-token-$RANDOM$RANDOM" > "$TMP/token"
OP=$(cat "$TMP/token")
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
for n in $NODES; do mknode "$n" || { echo "FAIL: node $n"; exit 1; }; done
heartbeat_leases $NODES
( while kill -0 $$ 2>/dev/null; do sleep 10; heartbeat_leases $NODES; done ) &
HB_PID=$!
"$K" -n "$NS" create serviceaccount gh-agent >/dev/null && "$K" -n "$NS" create serviceaccount other >/dev/null ||
  { echo "FAIL: service accounts"; exit 1; }
agent_pod agent-n1 "$NS-n1" gh-agent && agent_pod agent-n3 "$NS-n3" gh-agent &&
  agent_pod other-n2 "$NS-n2" other || { echo "FAIL: agent pods"; exit 1; }
# a pod of job train on n3: n3's agent may report train's steps (issue 24)
bare_pod train-0 "$NS-n3" train || { echo "FAIL: train pod"; exit 1; }
T1=$(token gh-agent --audience gpuheal --bound-object-kind Pod --bound-object-name agent-n1) &&
  T3=$(token gh-agent --audience gpuheal --bound-object-kind Pod --bound-object-name agent-n3) &&
  TU=$(token gh-agent --audience gpuheal) &&
  TA=$(token gh-agent --audience elsewhere --bound-object-kind Pod --bound-object-name agent-n1) &&
  TO=$(token other --audience gpuheal --bound-object-kind Pod --bound-object-name other-n2) ||
  { echo "FAIL: tokens"; exit 1; }

DB="sqlite:$TMP/audit.db"
start_controller "$DB" --agent-service-account "$NS/gh-agent" --agent-token-audience gpuheal || exit 1

# ---- its own node: taken; another node's: rejected --------------------------
xid "$NS-n1" 79 "$NS-n1/boot/1" | post "$T1"
check "n1's agent, XID 79 on n1: 200 ($code)" test "$code" = 200
check "n1's agent: accepted 1" body_has '"accepted":1'
check "n1 cordoned" wait_for 30 cordoned "$NS-n1"
# issue 24 #6: a line without "node" takes the sender's (it was 422)
echo '{"ts":"'"$(now)"'","gpu":0,"source":"kmsg","kind":"xid","code":31,"msg":"NVRM: Xid (PCI:0000:3b:00): 31, pid=4242","id":"'"$NS-n1/boot/nonode"'"}' | post "$T1"
check "n1's agent, an XID line without node: 200, accepted as n1's ($code)" \
  sh -c "[ $code = 200 ] && grep -q '\"accepted\":1' '$TMP/body'"
xid "$NS-n2" 79 "$NS-n2/boot/1" | post "$T1"
check "n1's agent, XID 79 on n2: 422 ($code)" test "$code" = 422
check "the error names both nodes" body_has "\\\"$NS-n2\\\" is another node; this sender may report only for node \\\"$NS-n1\\\""
for tok in "$T1" "$OP"; do
  echo '{"ts":"'"$(now)"'","node":"'"$NS-n2"'","source":"kube","kind":"node_not_ready"}' | post "$tok"
  check "a kube-kind line refused ($code)" sh -c "[ $code = 422 ] && grep -q 'only from the controller' '$TMP/body'"
done
check "metric: forged lines counted" sh -c "curl -s http://127.0.0.1:$PORT/metrics | grep -qE '^gpuheal_ingest_signals_forged_total [3-9]'"

# ---- refused tokens ----------------------------------------------------------
xid "$NS-n1" 31 "$NS-n1/boot/2" > "$TMP/one.jsonl"
post "$TU" < "$TMP/one.jsonl"
check "a token bound to no pod: 401 ($code)" sh -c "[ $code = 401 ] && grep -q 'not bound to a pod on a node' '$TMP/body'"
post "$TA" < "$TMP/one.jsonl"
check "a token for another audience: 401 ($code)" test "$code" = 401
post "$TO" < "$TMP/one.jsonl"
check "another ServiceAccount's token: 401 ($code)" sh -c "[ $code = 401 ] && grep -q 'system:serviceaccount:$NS:other, not of' '$TMP/body'"
post "made-up-token-$RANDOM" < "$TMP/one.jsonl"
check "a made-up token: 401 ($code)" test "$code" = 401

# ---- a pre-sent id does not silence a real fault -----------------------------
for i in $(seq 900 999); do
  echo '{"ts":"'"$(now)"'","node":"'"$NS-n3"'","gpu":0,"source":"telemetry","kind":"step","job":"'"$NS"'/train","rank":0,"step":'"$i"',"step_ms":100,"id":"'"$NS-n3/boot/$i"'"}'
done | post "$T3"
check "n3's agent: 100 step lines with kernel-record ids accepted ($code)" body_has '"accepted":100'
xid "$NS-n3" 31 "$NS-n3/boot/951" | "$GH_BIN/gpuheal" inject --controller "http://127.0.0.1:$PORT" --token-file "$TMP/token" - > "$TMP/inj.out"
check "operator's XID 31 with id n3/boot/951 accepted" grep -q '"accepted":1' "$TMP/inj.out"
xid "$NS-n3" 79 "$NS-n3/boot/950" | post "$T3"
check "n3's kernel record n3/boot/950: accepted, not a duplicate" sh -c "[ $code = 200 ] && grep -q '\"accepted\":1,\"duplicates\":0' '$TMP/body'"
check "n3 cordoned" wait_for 30 cordoned "$NS-n3"
xid "$NS-n3" 79 "$NS-n3/boot/950" | post "$T3"
check "the agent's own resend is a duplicate" body_has '"duplicates":1'

# ---- the operator's token: any node -----------------------------------------
xid "$NS-n4" 79 "op-$RANDOM" | "$GH_BIN/gpuheal" inject --controller "http://127.0.0.1:$PORT" --token-file "$TMP/token" - > "$TMP/inj.out"
check "operator's XID 79 on n4 accepted" grep -q '"accepted":1' "$TMP/inj.out"
check "n4 cordoned" wait_for 30 cordoned "$NS-n4"
check "n2 (the forged line's node) never cordoned" uncordoned "$NS-n2"
check "controller stops cleanly" stop_controller

echo "controller_agent_auth: $pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ "$fail" -eq 0 ]
