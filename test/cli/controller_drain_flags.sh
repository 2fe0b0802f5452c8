#!/usr/bin/env bash
# controller_drain_flags.sh - gpuheal-controller's drain bounds
# (--drain-concurrency, --drain-evictions-in-flight): --help lists both; a
# bad --drain-evictions-in-flight (0, over 4096, not a count), given as a
# flag, as GPUHEAL_DRAIN_EVICTIONS_IN_FLIGHT or in a --config file, is
# refused (exit 2) with a message naming the flag, before any Kubernetes
# configuration is read; a good value passes on to the next step (a missing
# kubeconfig). That the bound holds is test/integration/test_drain_bound.c.
set -uo pipefail
ctl="$GH_BIN/gpuheal-controller"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }

help=$("$ctl" --help)
for f in drain-concurrency drain-evictions-in-flight; do
  grep -q -- "--$f " <<<"$help" && ok "--help documents --$f" || bad "--help lacks --$f"
done

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

m="--drain-evictions-in-flight"
run 2 "$m: 0 is not 1 to 4096" -- --drain-evictions-in-flight 0
run 2 "$m: 4097 is not 1 to 4096" -- --drain-evictions-in-flight 4097
run 2 "$m: \"x\" is not a count" -- --drain-evictions-in-flight x
run 2 "$m: 0 is not 1 to 4096" GPUHEAL_DRAIN_EVICTIONS_IN_FLIGHT=0 --
printf 'drain-evictions-in-flight = 5000\n' > "$tmp/cfg"
run 2 "$m: 5000 is not 1 to 4096" -- --config "$tmp/cfg"
# good values reach the next step: the kubeconfig that is not there
run 1 "kubernetes configuration" -- --drain-evictions-in-flight 4096 --drain-concurrency 16
run 1 "kubernetes configuration" GPUHEAL_DRAIN_EVICTIONS_IN_FLIGHT=1 --

echo "controller_drain_flags: $pass passed, $fail failed"
[ "$fail" = 0 ]
