#!/usr/bin/env bash
# controller_ingest_flags.sh - gpuheal-controller's ingest limit settings
# (--ingest-max-body, --ingest-max-line, --ingest-max-lines,
# --ingest-max-connections, --ingest-idle-timeout, --ingest-dedup-capacity):
# --help lists each; a bad value, given as a flag, as a GPUHEAL_* variable
# or in a --config file, is refused (exit 2) with a message naming the flag
# and the value, before any Kubernetes configuration is read; good values
# (suffixes included) pass on to the next step (a missing kubeconfig).
# That a set limit takes effect is test/integration/controller_ingest_limits.sh.
set -uo pipefail
ctl="$GH_BIN/gpuheal-controller"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }

help=$("$ctl" --help)
for f in ingest-max-body ingest-max-line ingest-max-lines ingest-max-connections \
         ingest-idle-timeout ingest-dedup-capacity; do
  grep -q -- "--$f " <<<"$help" && ok "--help documents --$f" || bad "--help lacks --$f"
done

# refused VALUE-MESSAGE ARGS...: exit 2 and stderr has MESSAGE (fixed string)
refused() {
  local want=$1; shift
  local st=0
  env -u KUBECONFIG "$ctl" --kubeconfig "$tmp/none" "$@" > "$tmp/out" 2> "$tmp/err" || st=$?
  if [ "$st" = 2 ] && grep -qF -- "$want" "$tmp/err" && ! grep -q "kubernetes configuration" "$tmp/err"; then
    ok "$* -> exit 2: $(head -n 1 "$tmp/err")"
  else
    bad "$* -> exit $st: $(head -c 300 "$tmp/err") (want: $want)"
  fi
}
refused '--ingest-max-line: 0 is not a positive size' --ingest-max-line 0
refused '--ingest-max-line: 100000 is more than 65536' --ingest-max-line 100000
refused '--ingest-max-line: 65Ki is more than 65536' --ingest-max-line 65Ki
refused '--ingest-max-body: "abc" is not a size' --ingest-max-body abc
# the node budget: out of range refused with a message (0 is a budget of zero)
refused '--max-unavailable: "150%": a percentage is 0% to 100%' --max-unavailable 150%
refused '--max-unavailable: "-1": a budget is a count (N) or a percentage (P%)' --max-unavailable -1
refused '--max-unavailable: "1.5": a budget is a count (N) or a percentage (P%)' --max-unavailable 1.5
refused '--ingest-max-body: "10Q" is not a size' --ingest-max-body 10Q
refused '--ingest-max-body: "-5" is not a size' --ingest-max-body -5
refused '--ingest-max-body: 2Gi is more than 1073741824' --ingest-max-body 2Gi
refused '--ingest-max-body: 0Mi is not a positive size' --ingest-max-body=0Mi
refused '--ingest-max-lines: "1K" is not a count' --ingest-max-lines 1K
refused '--ingest-max-lines: 0 is not a positive count' --ingest-max-lines 0
refused '--ingest-max-lines: 1000001 is more than 1000000' --ingest-max-lines 1000001
refused '--ingest-max-connections: "-1" is not a count' --ingest-max-connections -1
refused '--ingest-max-connections: 70000 is more than 65536' --ingest-max-connections 70000
refused '--ingest-dedup-capacity: 0 is not a positive count' --ingest-dedup-capacity 0
refused '--ingest-dedup-capacity: "" is not a count' --ingest-dedup-capacity ''
refused '--ingest-idle-timeout: 500ms is not within 1s to 1h' --ingest-idle-timeout 500ms
refused '--ingest-idle-timeout: 2h is not within 1s to 1h' --ingest-idle-timeout 2h
refused '--ingest-idle-timeout: "soon" is not a duration' --ingest-idle-timeout soon
# from the environment and from a config file: the same names
GPUHEAL_INGEST_MAX_BODY=0 refused '--ingest-max-body: 0 is not a positive size'
printf 'ingest-max-lines = 0\n' > "$tmp/conf"
refused '--ingest-max-lines: 0 is not a positive count' --config "$tmp/conf"
# a flag wins over the environment: the good flag value, so no error about the variable
GPUHEAL_INGEST_MAX_LINE=0 refused '--ingest-max-body: 0 is not a positive size' \
  --ingest-max-line 1Ki --ingest-max-body 0

# good values: no flag error; the controller goes on to the kubeconfig
st=0
env -u KUBECONFIG "$ctl" --kubeconfig "$tmp/none" --ingest-max-body 1Mi --ingest-max-line 64Ki \
  --ingest-max-lines 500 --ingest-max-connections 64 --ingest-idle-timeout 1h \
  --ingest-dedup-capacity 4096 > "$tmp/out" 2> "$tmp/err" || st=$?
[ "$st" = 1 ] && grep -q "kubernetes configuration" "$tmp/err" && ! grep -q -- "--ingest" "$tmp/err" \
  && ok "good values accepted (stopped later at the missing kubeconfig)" \
  || bad "good values: exit $st: $(head -c 300 "$tmp/err")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
