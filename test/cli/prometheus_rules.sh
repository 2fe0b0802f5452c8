#!/usr/bin/env bash
# The chart's alerts (deploy/helm/gpuheal/files/prometheus-rules.yaml) with
# promtool (Debian's prometheus package; scripts/install-deps): `promtool
# check rules` and the unit test test/prometheus/gpuheal-rules.test.yaml, in
# which each alert fires on its fault, with the labels and the text a person
# reads, and stays quiet on the look-alike (a source turned off on purpose, a
# single failed POST, counters that do not move). Skipped, said so, without
# promtool. Prints ok/FAIL lines and "prometheus_rules: N passed, N failed".
set -uo pipefail
cd "$GH_SOURCE_DIR"
if ! command -v promtool >/dev/null 2>&1; then
  echo "skip prometheus_rules: no promtool (apt-get install prometheus; scripts/install-deps)"
  exit 0
fi
pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
rules=deploy/helm/gpuheal/files/prometheus-rules.yaml
n=$(grep -c -- '- alert:' "$rules")
if out=$(promtool check rules "$rules" 2>&1) && grep -q "SUCCESS: $n rules found" <<<"$out"; then
  ok "promtool check rules: $n rules"
else
  bad "promtool check rules"; sed 's/^/     | /' <<<"$out"
fi
# every alert has a unit test
for a in $(sed -nE 's/^ *- alert: (\S+)$/\1/p' "$rules"); do
  grep -q "alertname: $a\$" test/prometheus/gpuheal-rules.test.yaml && ok "$a has a promtool test" ||
    bad "$a: no test in test/prometheus/gpuheal-rules.test.yaml"
done
if out=$(cd test/prometheus && promtool test rules gpuheal-rules.test.yaml 2>&1); then
  ok "promtool test rules: every alert fires on its fault and not on the look-alike"
else
  bad "promtool test rules"; sed 's/^/     | /' <<<"$out" | head -n 40
fi
echo "prometheus_rules: $pass passed, $fail failed"
[ "$fail" = 0 ]
