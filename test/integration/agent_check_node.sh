#!/usr/bin/env bash
# `gpuheal-agent --check` against the real control plane (test/kube): the
# GPU count NVML sees (fault-injection NVML) against what the Node
# advertises (status.capacity["nvidia.com/gpu"] of a kwok fake node), read
# with the agent's --kubeconfig: equal (ok), fewer than advertised (fail,
# exit 1), none advertised (warn: the device plugin), the Node missing
# (warn), an explicit --kubeconfig that cannot be used (fail). What the
# table says is checked, as a person reads it, and --json's node_advertised.
set -uo pipefail
agent="$GH_BIN/gpuheal-agent"
fake="$GH_BIN/../lib/libnvidia-ml-fake.so"
[ -x "$agent" ] || { echo "skip: no gpuheal-agent"; exit 0; }
[ -f "$fake" ] || { echo "skip: no fake NVML library at $fake"; exit 0; }
[ -n "${GH_KUBE_ENV:-}" ] && [ -r "$GH_KUBE_ENV" ] || { echo "skip: no GH_KUBE_ENV"; exit 0; }
. "$GH_KUBE_ENV"
export KUBECONFIG
OK_MARK="ok   -" FAIL_MARK="FAIL -" WAIT_BY=clock
. "$(dirname "$0")/lib.sh"

tmp=$(mktemp -d)
node="gh-agent-check-$$-$RANDOM"
cleanup() {
  delete_fake_node
  rm_agent_tmp
}
trap cleanup EXIT
unset KUBERNETES_SERVICE_HOST GPUHEAL_CONFIG

fake_node 8 || die "cannot create node $node"
wait_for 60 test "$(k get node "$node" -o 'jsonpath={.status.capacity.nvidia\.com/gpu}')" = 8 \
  || die "node $node does not advertise 8 GPUs"
ok "kwok fake node $node advertises nvidia.com/gpu 8"

run_check() { # GPUS [extra flags]: the table on stdout, rc in $rc
  local g=$1; shift
  printf 'gpus %d\n' "$g" > "$tmp/nvml.conf"
  out=$(GH_NVML_FAKE_CONFIG="$tmp/nvml.conf" "$agent" --check --node "$node" --kubeconfig "$KUBECONFIG" \
        --nvml-lib "$fake" --kmsg off --dcgm off --telemetry-socket off --ib-sysfs-root off \
        --spool-dir "$tmp/spool" --check-root "$tmp" "$@" 2>"$tmp/err")
  rc=$?
  echo "$out" | grep -E '^(kubernetes|gpu-count|nvml) '
}
has() { # STATUS DETAIL WHAT
  local r; r=$(awk '$1 == "gpu-count"' <<<"$out")
  [ "$(awk '{print $2}' <<<"$r")" = "$1" ] && grep -qF -- "$2" <<<"$r" && ok "$3: $r" \
    || bad "$3: want gpu-count $1 \"$2\", got: $r (stderr: $(cat "$tmp/err"))"
}

run_check 8
has ok "NVML sees 8 GPU(s), the Node advertises 8" "NVML and the Node agree"
grep -q '^kubernetes  *ok  *Node '"$node"' read from ' <<<"$out" && ok "the Node was read through --kubeconfig" \
  || bad "kubernetes row: $(grep '^kubernetes' <<<"$out")"
[ $rc = 0 ] && ok "exit 0" || bad "rc=$rc"

run_check 7
has fail "NVML sees 7 GPU(s), the Node advertises 8 (status.capacity[\"nvidia.com/gpu\"])" \
  "a GPU the Node advertises that NVML does not see"
[ $rc = 1 ] && ok "exit 1" || bad "rc=$rc"
printf 'gpus 7\n' > "$tmp/nvml.conf"
GH_NVML_FAKE_CONFIG="$tmp/nvml.conf" "$agent" --check --json --node "$node" --kubeconfig "$KUBECONFIG" \
  --nvml-lib "$fake" --kmsg off --dcgm off --telemetry-socket off --ib-sysfs-root off \
  --spool-dir "$tmp/spool" --check-root "$tmp" > "$tmp/out.json" 2>"$tmp/err"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["gpu_counts"]; assert c["nvml"]==7 and c["node_advertised"]==8, c; print(c)' \
  "$tmp/out.json" && ok "--json: gpu_counts nvml 7, node_advertised 8" || bad "--json: $(cat "$tmp/out.json")"

k patch node "$node" --subresource=status --type=json \
  -p '[{"op":"remove","path":"/status/capacity/nvidia.com~1gpu"}]' >/dev/null || bad "cannot patch the node"
run_check 8
has warn "the Node advertises no nvidia.com/gpu (is the NVIDIA device plugin running?)" \
  "no nvidia.com/gpu on the Node"

run_check 8 --node "gh-no-such-node-$$"
grep -q '^kubernetes  *warn  *cannot read Node gh-no-such-node.*HTTP 404 NotFound' <<<"$out" && ok "a missing Node: $(grep '^kubernetes' <<<"$out")" \
  || bad "missing Node: $out"
has absent "not compared: the Node could not be read" "a missing Node: the count is not compared"

run_check 8 --kubeconfig "$tmp/absent.kubeconfig"
grep -q '^kubernetes  *fail  *cannot use --kubeconfig' <<<"$out" && [ $rc = 1 ] \
  && ok "an unusable --kubeconfig fails (rc=$rc)" || bad "unusable kubeconfig: rc=$rc $out"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
