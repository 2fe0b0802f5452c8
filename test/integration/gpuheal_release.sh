#!/usr/bin/env bash
# gpuheal_release.sh - `gpuheal release` on the real control plane (test/kube),
# as after an uninstall: the controller isolated n1 (cordon, taint,
# annotations) and the agent's GPUHealthy=False is on it; an operator
# cordoned n2 (which also has the agent's condition) and tainted n3 with
# gpuheal's own taint key by hand. `gpuheal release` takes back only what
# gpuheal set: n1 schedulable again, untainted, its annotations and
# condition gone, the release recorded in the audit store (explain shows
# it); n2 stays cordoned (only its condition goes); n3 keeps the operator's
# taint. Read with kubectl get/describe and gpuheal explain. --all is run
# with --dry-run only: the control plane is shared with other tests' nodes.
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBE_ENV:?}"
[ -x "$GH_BIN/gpuheal" ] && [ -x "$GH_BIN/gpuheal-controller" ] || { echo "skip: binaries missing"; exit 0; }
command -v jq >/dev/null || { echo "skip: no jq"; exit 0; }
. "$GH_KUBE_ENV"
export KUBECONFIG
OK_MARK="ok   -" FAIL_MARK="FAIL -" WAIT_BY=clock
. "$(dirname "$0")/lib.sh"
gh="$GH_BIN/gpuheal"

tmp=$(mktemp -d)
ns="release-$$-$RANDOM"
n1="$ns-n1" n2="$ns-n2" n3="$ns-n3"
cpid=""
cleanup() {
  [ -n "$cpid" ] && kill "$cpid" 2>/dev/null
  wait 2>/dev/null
  for node in "$n1" "$n2" "$n3"; do
    delete_fake_node
    k get incidents -l "gpuheal.io/node=$node" -o name 2>/dev/null | xargs -r k delete --wait=false >/dev/null 2>&1
  done
  k delete ns "$ns" --wait=false >/dev/null 2>&1
  rm_agent_tmp
}
trap cleanup EXIT
DIE_CTL_LOG="$tmp/ctl.log"

k create ns "$ns" >/dev/null || die "namespace"
for node in "$n1" "$n2" "$n3"; do
  fake_node 4 "$ns" || die "cannot create node $node"
done
for node in "$n1" "$n2" "$n3"; do
  k wait --for=condition=Ready "node/$node" --timeout=60s >/dev/null || die "node $node not Ready"
done
gpu_condition() { # NODE: the agent's condition, as health_publish writes it
  k patch node "$1" --subresource=status --type=strategic -p "$(printf '{"status":{"conditions":[{"type":"GPUHealthy","status":"False","reason":"XidCritical","message":"GPU 3 (0000:48:00.0): XID 79","lastTransitionTime":"%s","lastHeartbeatTime":"%s"}]}}' "$(date -u +%FT%TZ)" "$(date -u +%FT%TZ)")" >/dev/null
}

# ---- n1 isolated by the controller
echo "release-token" > "$tmp/token"
DB="sqlite:$tmp/audit.db"
"$GH_BIN/gpuheal-controller" --kubeconfig "$KUBECONFIG" --listen 127.0.0.1:0 --token-file "$tmp/token" \
  --db "$DB" --watch-namespace "$ns" --node-selector "gpuheal.io/pool=$ns" \
  --lease-namespace "$ns" --lease-duration 4s --renew-deadline 3s --retry-period 1s \
  --reorder-window 200ms --node-cooldown 0s --max-unavailable 3 \
  --identity "release-$$" > "$tmp/ctl.out" 2> "$tmp/ctl.log" &
cpid=$!
wait_for 20 grep -qE "^listening on port [0-9]+$" "$tmp/ctl.out" || die "controller did not start"
PORT=$(sed -nE 's/^listening on port ([0-9]+)$/\1/p' "$tmp/ctl.out" | tail -n 1)
wait_for 20 grep -q "event=leading" "$tmp/ctl.log" || die "controller not leading"
printf '{"ts":"%s","node":"%s","gpu":3,"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:48:00): 79, pid=1, GPU has fallen off the bus.","id":"xid-%s"}\n' \
  "$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)" "$n1" "$n1" |
  "$gh" inject --controller "http://127.0.0.1:$PORT" --token-file "$tmp/token" - >/dev/null || die "inject"
cordoned() { [ "$(k get node "$1" -o jsonpath='{.spec.unschedulable}')" = true ]; }
taints() { k get node "$1" -o jsonpath='{range .spec.taints[*]}{.key}={.value}:{.effect} {end}'; }
has_taint() { taints "$1" | grep -q "gpuheal.io/unhealthy"; }
wait_for 30 cordoned "$n1" || die "the controller did not cordon $n1"
wait_for 10 has_taint "$n1" || die "the controller did not taint $n1"
ok "the controller isolated $n1"
gpu_condition "$n1" || bad "GPUHealthy on $n1"
# "uninstall": the controller goes
kill "$cpid"; wait "$cpid"; cpid=""

# ---- n2, n3: an operator's cordon and taint
k cordon "$n2" >/dev/null || bad "kubectl cordon $n2"
gpu_condition "$n2" || bad "GPUHealthy on $n2"
k taint nodes "$n3" gpuheal.io/unhealthy=by-hand:NoSchedule >/dev/null || bad "kubectl taint $n3"

# ---- --all, dry run: names n1 and n2 (n3 has nothing of gpuheal's), changes nothing
"$gh" release --all --dry-run --kubeconfig "$KUBECONFIG" > "$tmp/dry.txt" 2>&1
check "dry run names $n1: uncordon, untaint, annotation, condition" \
  grep -qx "node/$n1: uncordoned, removed taint gpuheal.io/unhealthy, removed 3 annotations (gpuheal.io/cordoned-by, gpuheal.io/tainted-by, gpuheal.io/isolated-at), removed condition GPUHealthy (dry run)" "$tmp/dry.txt"
check "dry run names $n2: only the condition; its cordon is the operator's" \
  grep -qx "node/$n2: removed condition GPUHealthy (dry run); its cordon is someone else's: left" "$tmp/dry.txt"
check "dry run does not name $n3" sh -c "! grep -q 'node/$n3:' '$tmp/dry.txt'"
check "dry run changed nothing" cordoned "$n1"

# ---- the release
"$gh" release "node/$n1" "node/$n2" "node/$n3" --db "$DB" --by e2e --kubeconfig "$KUBECONFIG" > "$tmp/release.txt" 2>&1
rc=$?
cat "$tmp/release.txt" | sed 's/^/  | /'
check "gpuheal release exit 0" test "$rc" = 0
I1=$(k get incidents -l "gpuheal.io/node=$n1" -o jsonpath='{.items[0].metadata.name}')
check "it says what it did and where it recorded it" sh -c "grep -qx 'node/$n1: uncordoned, removed taint gpuheal.io/unhealthy, removed 3 annotations (gpuheal.io/cordoned-by, gpuheal.io/tainted-by, gpuheal.io/isolated-at), removed condition GPUHealthy' '$tmp/release.txt' && grep -qx '  recorded under incident $I1' '$tmp/release.txt'"
check "$n3: nothing of gpuheal's" grep -qx "node/$n3: nothing of gpuheal's" "$tmp/release.txt"
# what kubectl shows
k get nodes "$n1" "$n2" "$n3" --no-headers > "$tmp/nodes.txt"
check "kubectl get nodes: $n1 Ready, schedulable" grep -qE "^$n1 +Ready +" "$tmp/nodes.txt"
check "kubectl get nodes: $n2 still SchedulingDisabled (the operator's cordon)" grep -qE "^$n2 +Ready,SchedulingDisabled +" "$tmp/nodes.txt"
no_gh_taint() { ! taints "$1" | grep -q gpuheal.io/unhealthy; }
by_hand() { taints "$1" | grep -q 'gpuheal.io/unhealthy=by-hand:NoSchedule'; }
check "$n1: no gpuheal taint" no_gh_taint "$n1"
check "$n3: the operator's taint stays" by_hand "$n3"
ann_keys() { k get node "$1" -o json | jq -r '.metadata.annotations // {} | keys[]'; }
no_gh_ann() { ! ann_keys "$1" | grep -q '^gpuheal.io/'; }
check "$n1: no gpuheal.io annotations left ($(ann_keys "$n1" | tr '\n' ' '))" no_gh_ann "$n1"
k describe node "$n1" > "$tmp/describe1.txt"
check "kubectl describe node/$n1: no GPUHealthy condition" sh -c "! grep -q GPUHealthy '$tmp/describe1.txt'"
check "kubectl describe node/$n1: Unschedulable false" grep -qE "^Unschedulable: +false" "$tmp/describe1.txt"
check "$n2: GPUHealthy gone too" sh -c "! '$GH_KUBE_BIN/kubectl' describe node '$n2' | grep -q GPUHealthy"
# the record
"$gh" explain "node/$n1" --db "$DB" > "$tmp/explain.txt"
check "explain: release_node by gpuheal release" grep -q "release_node node/$n1: succeeded .*gpuheal release by e2e: uncordoned, removed taint gpuheal.io/unhealthy" "$tmp/explain.txt"
# twice = once
"$gh" release "node/$n1" --db "$DB" --kubeconfig "$KUBECONFIG" > "$tmp/again.txt" 2>&1
check "a second release: nothing of gpuheal's" grep -qx "node/$n1: nothing of gpuheal's" "$tmp/again.txt"
# usage errors
"$gh" release > /dev/null 2>&1; check "no node: usage error (2)" test $? = 2
"$gh" release "$n1" > /dev/null 2>&1; check "a bare name: usage error (2)" test $? = 2
"$gh" release --all "node/$n1" > /dev/null 2>&1; check "--all and a node: usage error (2)" test $? = 2

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
