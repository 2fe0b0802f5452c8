#!/usr/bin/env bash
# agent_request_outcomes.sh - what the record says about the requests the
# controller hands to node agents (reboot_node after an XID 79), on the real
# control plane (test/kube) with real agents (fault-injection NVML), read as
# a person reads it: the Incident object, `kubectl get incident`,
# `kubectl describe node`, `gpuheal explain`.
#  n1: the XID 79 comes from the kernel log (`NVRM: Xid (PCI:0000:48:00)`,
#      no GPU index): the agent ships it with the index NVML gives that
#      address (GPU 3), and the Incident, its GPU column and explain name
#      GPU 3. The reboot is "requested" (action Running, phase Acting), not
#      Succeeded, while the agent waits for the reboot; after the agent comes
#      back on a new boot id it is Succeeded, and so is the incident.
#  n2: the agent has no --reboot-cmd: its NotConfigured is recorded with its
#      message, the action and the incident are NotConfigured (issue 26: they
#      read Failed though nothing was tried), and the node's Warning Event
#      says so in `kubectl describe node`.
#  n3: no agent answers: after --request-timeout the request is recorded
#      timed_out and the incident Failed.
set -uo pipefail
agent="$GH_BIN/gpuheal-agent"
ctl="$GH_BIN/gpuheal-controller"
fake="$GH_BIN/../lib/libnvidia-ml-fake.so"
[ -x "$agent" ] && [ -x "$ctl" ] && [ -x "$GH_BIN/gpuheal" ] || { echo "skip: binaries missing"; exit 0; }
[ -f "$fake" ] || { echo "skip: no fake NVML library at $fake"; exit 0; }
[ -n "${GH_KUBE_ENV:-}" ] && [ -r "$GH_KUBE_ENV" ] || { echo "skip: no GH_KUBE_ENV"; exit 0; }
command -v jq >/dev/null || { echo "skip: no jq"; exit 0; }
. "$GH_KUBE_ENV"
export KUBECONFIG
OK_MARK="ok   -" FAIL_MARK="FAIL -" WAIT_BY=clock
. "$(dirname "$0")/lib.sh"

tmp=$(mktemp -d)
ns="req-out-$$-$RANDOM"
n1="$ns-n1" n2="$ns-n2" n3="$ns-n3"
pid1="" pid2="" cpid=""
cleanup() {
  for p in $pid1 $pid2; do kill -9 "$p" 2>/dev/null; done
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

# ---- the controller: three nodes may be out at once, requests time out after 20 s
echo "req-token-$RANDOM" > "$tmp/token"
"$ctl" --kubeconfig "$KUBECONFIG" --listen 127.0.0.1:0 --token-file "$tmp/token" \
  --db "sqlite:$tmp/audit.db" --watch-namespace "$ns" --node-selector "gpuheal.io/pool=$ns" \
  --lease-namespace "$ns" --lease-duration 4s --renew-deadline 3s --retry-period 1s \
  --reorder-window 200ms --node-cooldown 0s --max-unavailable 3 --request-timeout 20s \
  --identity "req-out-$$" > "$tmp/ctl.out" 2> "$tmp/ctl.log" &
cpid=$!
wait_for 20 grep -qE "^listening on port [0-9]+$" "$tmp/ctl.out" || die "controller did not start"
PORT=$(sed -nE 's/^listening on port ([0-9]+)$/\1/p' "$tmp/ctl.out" | tail -n 1)
wait_for 20 grep -q "event=leading" "$tmp/ctl.log" || die "controller not leading"
ok "controller leading on port $PORT"

# ---- the agents
cat > "$tmp/reboot.sh" <<EOF
#!/bin/sh
echo "rebooting \$GPUHEAL_NODE"
EOF
cat > "$tmp/validate.sh" <<EOF
#!/bin/sh
echo "4 GPUs pass"
EOF
chmod +x "$tmp"/*.sh
echo "boot-before" > "$tmp/boot1"
echo "boot-after" > "$tmp/boot2"
printf 'gpus 4\n' > "$tmp/nvml.conf"
export GH_NVML_FAKE_CONFIG="$tmp/nvml.conf"
: > "$tmp/kern.log"
n=0
start_agent() { # NODE BOOTFILE extra... ; sets apid, alog
  local nd=$1 boot=$2; shift 2
  n=$((n + 1))
  alog="$tmp/agent$n.log"
  "$agent" --node "$nd" --kubeconfig "$KUBECONFIG" --nvml-lib "$fake" \
    --poll-interval 500ms --dcgm off --ib-sysfs-root off --telemetry-socket off \
    --controller "http://127.0.0.1:$PORT" --token-file "$tmp/token" --batch-linger 20ms \
    --spool-dir "$tmp/spool-$nd" --listen 127.0.0.1:0 --health-interval 1s \
    --boot-id-file "$boot" --validate-cmd "$tmp/validate.sh" "$@" 2> "$alog" &
  apid=$!
  wait_for 30 grep -q 'msg="watching GPUNodeHealth for requests"' "$alog" || die "agent $n did not start"
}
incident_of() { k get incidents -l "gpuheal.io/node=$1" -o jsonpath='{.items[0].metadata.name}' 2>/dev/null; }
has_incident() { [ -n "$(incident_of "$1")" ]; }
inc_get() { k get incident "$1" -o "jsonpath=$2" 2>/dev/null; }
action_of() { # INCIDENT ACTION FIELD
  k get incident "$1" -o json 2>/dev/null | jq -r --arg a "$2" --arg f "$3" '[.status.actions[]? | select(.action == $a)] | last | .[$f] // ""'
}
message_has() { action_of "$1" "$2" message | grep -q "$3"; } # INCIDENT ACTION REGEX

# n1: the kernel log names the GPU by PCI address only
node=$n1
start_agent "$n1" "$tmp/boot1" --kmsg "$tmp/kern.log" --kmsg-mode file --reboot-cmd "$tmp/reboot.sh"
pid1=$apid
wait_for 30 is 4 gnh '{.status.gpuCount}' || die "GPUNodeHealth of $n1 without 4 GPUs"
# the fake NVML puts GPU 3 at 00000000:48:00.0
check "GPU 3 is at 0000:48:00.0 on GPUNodeHealth" is 0000:48:00.0 gnh '{.status.gpus[?(@.index==3)].pciBusId}'
printf '%s %s kernel: NVRM: Xid (PCI:0000:48:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n' \
  "$(date '+%b %e %H:%M:%S')" "$n1" >> "$tmp/kern.log"

# n2: no --reboot-cmd
node=$n2
printf '{"ts":"%s","node":"%s","gpu":1,"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:28:00): 79, pid=4242, GPU has fallen off the bus."}\n' \
  "$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)" "$n2" > "$tmp/xid2.jsonl"
start_agent "$n2" "$tmp/boot1" --kmsg off --inject "$tmp/xid2.jsonl"
pid2=$apid

# n3: no agent at all
printf '{"ts":"%s","node":"%s","gpu":0,"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:18:00): 79, pid=4242, GPU has fallen off the bus.","id":"xid-%s"}\n' \
  "$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)" "$n3" "$n3" |
  "$GH_BIN/gpuheal" inject --controller "http://127.0.0.1:$PORT" --token-file "$tmp/token" - >/dev/null \
  || bad "inject the XID 79 of $n3"

# ---- n1: GPU 3 carried through; the reboot requested, not succeeded
wait_for 30 has_incident "$n1" || die "no Incident about $n1"
I1=$(incident_of "$n1")
check "n1: Incident $I1 spec.gpu 3" is 3 inc_get "$I1" '{.spec.gpu}'
gpu_column() { k get incident "$1" | awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "GPU") c = i } NR == 2 { print $c }'; }
check "n1: kubectl get incident shows GPU 3" is 3 gpu_column "$I1"
node=$n1
wait_for 30 is RebootPending gcond Request-reboot_node reason || die "n1: the agent did not take the reboot request"
check "n1: reboot_node Running (requested, the agent waits for the reboot)" wait_for 10 is Running action_of "$I1" reboot_node result
check "n1: phase Acting while the agent has not answered" is Acting inc_get "$I1" '{.status.phase}'
"$GH_BIN/gpuheal" explain "node/$n1" --db "sqlite:$tmp/audit.db" > "$tmp/explain1.txt"
check "n1: explain names GPU 3" grep -q " - node $n1 GPU 3" "$tmp/explain1.txt"
check "n1: explain says the reboot was requested" grep -q "reboot_node node/$n1: requested .*waiting for its outcome" "$tmp/explain1.txt"
check "n1: explain does not say the reboot succeeded" sh -c "! grep -q 'reboot_node node/$n1: succeeded' '$tmp/explain1.txt'"
kill -TERM "$pid1"; wait "$pid1"; pid1=""
start_agent "$n1" "$tmp/boot2" --kmsg off --reboot-cmd "$tmp/reboot.sh"
pid1=$apid
check "n1: after the reboot, reboot_node Succeeded" wait_for 30 is Succeeded action_of "$I1" reboot_node result
check "n1: its message is the agent's" message_has "$I1" reboot_node "^agent: Succeeded: request $I1/reboot_node: "
check "n1: phase Succeeded" wait_for 10 is Succeeded inc_get "$I1" '{.status.phase}'
"$GH_BIN/gpuheal" explain "node/$n1" --db "sqlite:$tmp/audit.db" > "$tmp/explain1b.txt"
check "n1: explain: requested, then the agent's Succeeded" sh -c "grep -q 'reboot_node node/$n1: requested' '$tmp/explain1b.txt' && grep -q 'reboot_node node/$n1: succeeded .*agent: Succeeded' '$tmp/explain1b.txt' && grep -q 'Outcome: Succeeded' '$tmp/explain1b.txt'"

# ---- n2: NotConfigured
wait_for 30 has_incident "$n2" || die "no Incident about $n2"
I2=$(incident_of "$n2")
node=$n2
wait_for 30 is NotConfigured gcond Request-reboot_node reason || bad "n2: agent said $(gcond Request-reboot_node reason)"
check "n2: reboot_node NotConfigured (nothing tried: not Failed)" wait_for 20 is NotConfigured action_of "$I2" reboot_node result
check "n2: its message carries the agent's NotConfigured" message_has "$I2" reboot_node "^agent: NotConfigured: request $I2/reboot_node: "
check "n2: phase NotConfigured (the isolation done, the reboot nobody configured)" wait_for 10 is NotConfigured inc_get "$I2" '{.status.phase}'
"$GH_BIN/gpuheal" explain "node/$n2" --db "sqlite:$tmp/audit.db" > "$tmp/explain2.txt"
check "n2: explain: reboot_node not_configured, outcome NotConfigured" sh -c "grep -q 'reboot_node node/$n2: not_configured .*NotConfigured' '$tmp/explain2.txt' && grep -q 'Outcome: NotConfigured' '$tmp/explain2.txt'"
check "n2: kubectl describe node lists GPUHealActionFailed" wait_for 10 sh -c "'$GH_KUBE_BIN/kubectl' describe node '$n2' | sed -n '/^Events:/,\$p' | grep -q 'Warning  *GPUHealActionFailed .*not_configured'"

# ---- n3: nobody answers
wait_for 30 has_incident "$n3" || die "no Incident about $n3"
I3=$(incident_of "$n3")
check "n3: reboot_node Running at first" wait_for 10 is Running action_of "$I3" reboot_node result
check "n3: after --request-timeout 20s, reboot_node Failed" wait_for 60 is Failed action_of "$I3" reboot_node result
check "n3: the message says the agent did not answer" message_has "$I3" reboot_node "did not answer request $I3/reboot_node"
check "n3: phase Failed" wait_for 10 is Failed inc_get "$I3" '{.status.phase}'
"$GH_BIN/gpuheal" explain "node/$n3" --db "sqlite:$tmp/audit.db" > "$tmp/explain3.txt"
check "n3: explain: reboot_node timed_out" grep -q "reboot_node node/$n3: timed_out" "$tmp/explain3.txt"

# ---- the outcome is recorded once, also after a controller restart
count_rows() { grep -c "reboot_node node/$1: $2" "$3"; }
kill "$cpid"; wait "$cpid"; cpid=""
"$ctl" --kubeconfig "$KUBECONFIG" --listen 127.0.0.1:0 --token-file "$tmp/token" \
  --db "sqlite:$tmp/audit.db" --watch-namespace "$ns" --node-selector "gpuheal.io/pool=$ns" \
  --lease-namespace "$ns" --lease-duration 4s --renew-deadline 3s --retry-period 1s \
  --request-timeout 20s --identity "req-out-$$-b" > "$tmp/ctl2.out" 2> "$tmp/ctl2.log" &
cpid=$!
wait_for 30 grep -q "event=leading" "$tmp/ctl2.log" || die "restarted controller not leading"
# the restarted controller sees the three answers again (the informer lists
# the GPUNodeHealths; n3's by its timeout scan) and finds each recorded
dups() { [ "$(grep -c 'event=task_done kind=5 .*phase=Duplicate' "$tmp/ctl2.log")" -ge 3 ]; }
check "restart: the three answers seen again, each already recorded" wait_for 30 dups
for x in "$n1:succeeded" "$n2:not_configured" "$n3:timed_out"; do
  nd=${x%%:*} r=${x#*:}
  "$GH_BIN/gpuheal" explain "node/$nd" --db "sqlite:$tmp/audit.db" > "$tmp/explain-r.txt"
  check "$nd: $r recorded once after a restart" is 1 count_rows "$nd" "$r" "$tmp/explain-r.txt"
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
