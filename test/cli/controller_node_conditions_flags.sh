#!/usr/bin/env bash
# controller_node_conditions_flags.sh - gpuheal-controller's
# --node-conditions (the Node conditions other agents set that become
# node_condition signals): --help lists it with its default; the kubelet's
# own conditions, gpuheal's GPUHealthy and a malformed name, given as a
# flag, as GPUHEAL_NODE_CONDITIONS or in a --config file, are refused
# (exit 2) with a message naming the flag and the name, before any
# Kubernetes configuration is read; good values (a custom condition,
# "none") pass on to the next step (a missing kubeconfig). What the
# controller does with them: test/integration/controller_node_conditions.sh.
set -uo pipefail
ctl="$GH_BIN/gpuheal-controller"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }

help=$("$ctl" --help)
grep -q -- "--node-conditions .*KernelDeadlock,ReadonlyFilesystem" <<<"$help" &&
  ok "--help documents --node-conditions and its default" || bad "--help lacks --node-conditions"

# run EXPECTED-EXIT MESSAGE [VAR=VALUE...] -- ARGS...
run() {
  local want_st=$1 want=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local st=0
  env -u KUBECONFIG "${envs[@]}" "$ctl" --kubeconfig "$tmp/none" "$@" > "$tmp/out" 2> "$tmp/err" || st=$?
  if [ "$st" = "$want_st" ] && grep -qF -- "$want" "$tmp/err"; then
    ok "${envs[*]} $* -> exit $st: $(head -n 1 "$tmp/err")"
  else
    bad "${envs[*]} $* -> exit $st (want $want_st, '$want'): $(head -n 3 "$tmp/err")"
  fi
}

m="--node-conditions"
run 2 "$m: \"Ready\" is the kubelet's own condition" -- --node-conditions KernelDeadlock,Ready
run 2 "$m: \"MemoryPressure\" is the kubelet's own condition" -- --node-conditions MemoryPressure
run 2 "$m: \"GPUHealthy\" is gpuheal's own condition" -- --node-conditions GPUHealthy
run 2 "$m: \"a b\" is not a Node condition type" -- --node-conditions "a b"
run 2 "$m: \"\" is not a Node condition type" -- --node-conditions "KernelDeadlock,"
run 2 "$m: \"DiskPressure\" is the kubelet's own condition" GPUHEAL_NODE_CONDITIONS=DiskPressure --
printf 'node-conditions = KernelDeadlock,PIDPressure\n' > "$tmp/cfg"
run 2 "$m: \"PIDPressure\" is the kubelet's own condition" -- --config "$tmp/cfg"
# good values reach the next step: the kubeconfig that is not there
run 1 "kubernetes configuration" -- --node-conditions KernelDeadlock,example.com/GpuCheck,FabricManagerDown
run 1 "kubernetes configuration" -- --node-conditions none
run 1 "kubernetes configuration" GPUHEAL_NODE_CONDITIONS=FrequentKubeletRestart --

echo "controller_node_conditions_flags: $pass passed, $fail failed"
[ "$fail" = 0 ]
