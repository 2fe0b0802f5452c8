#!/usr/bin/env bash
# controller_port_hangs.sh - the controller's HTTP port under attack while
# its dependencies hang (issue 24 items 4 and 5), with the real
# gpuheal-controller, a control plane of its own (test/kube/up in a temp
# folder: its kube-apiserver is stopped here, which would break the other
# tests on the shared one) and a private PostgreSQL (lib.sh pg_start):
#   1. a token flood, the API server up: made-up tokens at ~100/s from 8
#      threads, every other one chosen so that its SHA-256 falls in the
#      accepted agent's slot of a 4096-slot verdict table (the old cache
#      let such refusals overwrite it: the agent then got 503 "more than 50
#      token reviews a second"); the agent posts every 0.5 s: every POST
#      200; every refusal and 503 counted in /metrics by reason;
#   2. the API server hung (SIGSTOP) 30 s, made-up tokens at 4/s: /healthz
#      sampled every 0.1 s (a new connection each) answers within 100 ms
#      (p99; every sample within 1 s: see healthz_ok), /readyz and /metrics
#      too; the already-accepted agent's POSTs 200; a token never seen is
#      answered 503 within 4 s (not held for the 5 s review);
#   3. PostgreSQL hung (SIGSTOP) 30 s, made-up tokens at 4/s, the agent
#      posting every 0.5 s: /healthz as in 2; every POST answered (200 or
#      503) within 4 s, not the 30 s statement deadline; thawed, the agent
#      resends what it did not get 200 for: every id in the journal, none
#      accepted twice.
# The /healthz figures (samples, over 100 ms, p50, p99, max) are printed
# for each phase. Needs GH_BIN, GH_SOURCE_DIR (CTest sets them); skipped
# (77) without PostgreSQL's server binaries.
set -uo pipefail
: "${GH_BIN:?}" "${GH_SOURCE_DIR:?}"
TMP=$(mktemp -d /tmp/gh-ctl-hang.XXXXXX)
NS="hang-$$"
CTL_PID=""
CTL_READY=event=policy_rules
CTL_FLAGS=(--no-leader-election --max-unavailable 10 --storm-nodes 0 --max-actions-per-hour 0
  --identity "hang-$$")
LOAD="$GH_SOURCE_DIR/test/integration/port_load.py"
BG=()
. "$(dirname "$0")/lib.sh"

api_pid() { cat "$TMP/kube/pids/kube-apiserver.pid" 2>/dev/null; }
pg_freeze() { # STOP|CONT: the postmaster and its children
  [ -n "${PG_DIR:-}" ] && [ -f "$PG_DIR/data/postmaster.pid" ] || return 0
  local pm; pm=$(head -n 1 "$PG_DIR/data/postmaster.pid")
  kill -"$1" "$pm" $(ps -o pid= --ppid "$pm") 2>/dev/null
}
cleanup() {
  local p
  [ -n "$(api_pid)" ] && kill -CONT "$(api_pid)" 2>/dev/null
  pg_freeze CONT
  for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "$CTL_PID" ] && kill -9 "$CTL_PID" 2>/dev/null
  pg_stop
  [ -d "$TMP/kube" ] && "$GH_SOURCE_DIR/test/kube/down" "$TMP/kube" >/dev/null 2>&1
  rm_tmp
}
trap cleanup EXIT

pg_start; PG_RC=$?
[ $PG_RC = 2 ] && { echo "SKIP: no PostgreSQL server binaries"; exit 77; }
[ $PG_RC = 0 ] || { echo "FAIL: PostgreSQL start"; exit 1; }
GH_KUBE_NO_KWOK=1 GH_KUBE_DIR="$TMP/kube" GH_KUBE_OWNER_PID=$$ "$GH_SOURCE_DIR/test/kube/up" \
  > "$TMP/kube.env" 2> "$TMP/kube-up.log" || { echo "FAIL: control plane"; tail -20 "$TMP/kube-up.log"; exit 1; }
. "$TMP/kube.env"
export KUBECONFIG
GH_KUBECONFIG=$KUBECONFIG
K="$GH_KUBE_BIN/kubectl"

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "operator-token-$RANDOM$RANDOM" > "$TMP/token"
"$GH_BIN/gpuheal" policy default > "$TMP/policy.yaml"
mknode n1 || { echo "FAIL: node"; exit 1; }
"$K" -n "$NS" create serviceaccount gh-agent >/dev/null || { echo "FAIL: service account"; exit 1; }
"$K" -n "$NS" create -f - >/dev/null <<EOF2 || { echo "FAIL: agent pods"; exit 1; }
apiVersion: v1
kind: Pod
metadata: {name: agent-n1}
spec:
  nodeName: $NS-n1
  serviceAccountName: gh-agent
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  containers: [{name: agent, image: gpuheal/gpuheal:0.1.0}]
---
apiVersion: v1
kind: Pod
metadata: {name: agent-n2}
spec:
  nodeName: $NS-n1
  serviceAccountName: gh-agent
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  containers: [{name: agent, image: gpuheal/gpuheal:0.1.0}]
EOF2
token() { "$K" -n "$NS" create token gh-agent --audience gpuheal --bound-object-kind Pod \
  --bound-object-name "$1" --duration 1h; }

start_controller "$PGURL" --agent-service-account "$NS/gh-agent" --agent-token-audience gpuheal || exit 1
BASE="http://127.0.0.1:$PORT"
metric() { curl -s "$BASE/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
post() { # TOKEN ID: the status of one XID line of n1
  curl -s -o "$TMP/body" -w '%{http_code}' --max-time 60 -H "Authorization: Bearer $1" \
    --data-binary @- "$BASE/v1/signals" <<< "{\"ts\":\"$(now)\",\"node\":\"$NS-n1\",\"gpu\":0,\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":31,\"msg\":\"NVRM: Xid (PCI:0000:3b:00): 31, pid=1\",\"id\":\"$2\"}"
}
# post_ok TOKEN ID: as an agent does, again after a 503 (Retry-After: 1), up to 20 s
post_ok() { local i st; for i in $(seq 20); do st=$(post "$1" "$2"); [ "$st" = 503 ] || break; sleep 1; done; echo "$st"; }
# figures FILE: /healthz samples, over 100 ms, p50, p99, max (ms), and not 200
figures() {
  awk '$1 == "/healthz" { print $2, $3 }' "$1" | sort -n | awk '{ v[++n] = $1; if ($1 > 100) o++; if ($2 != 200) bad++ }
    END { p50 = int(n * 0.5); p99 = int(n * 0.99); if (p50 < 1) p50 = 1; if (p99 < 1) p99 = 1
      printf "samples=%d over_100ms=%d p50=%.1f p99=%.1f max=%.1f not_200=%d\n", n, o + 0, v[p50], v[p99], v[n], bad + 0 }'
}
max_of() { awk -v p="$2" '$1 == p && $2 > m { m = $2 } END { print m + 0 }' "$1"; }
field() { sed -nE "s/.* $2=([0-9.]+).*/\1/p" <<< "$1"; }
# healthz_ok FILE: every /healthz sample 200, 99% of them within 100 ms and
# all within 1 s. The defect froze the port for the whole hang (a 5 s
# review, the store's 30 s statement deadline): every sample in it took
# seconds. A sample over 100 ms alone is the scheduler of a loaded machine
# (the prober, the controller and the attackers share 2 cores), so the
# 100 ms target is held at the 99th percentile, and the count over it and
# the max are printed.
healthz_ok() {
  local f; f=$(figures "$1")
  [ "$(field "$f" not_200)" = 0 ] && awk -v p="$(field "$f" p99)" -v m="$(field "$f" max)" \
    'BEGIN { exit !(p <= 100 && m < 1000) }'
}
# all_answered FILE COLUMN MAXMS: every line answered (status != 0) within MAXMS
all_within() { awk -v c="$2" -v m="$3" '{ if ($c + 0 > m || $NF == 0) bad++ } END { exit bad > 0 }' "$1"; }

echo "--- 1. a token flood, the API server up"
T1=$(token agent-n1) && TN1=$(token agent-n2) || { echo "FAIL: tokens"; exit 1; }
check "the agent's first POST: 200" test "$(post_ok "$T1" f-00)" = 200
python3 "$LOAD" attack "$BASE" 8 100 "$TMP/flood.out" "$T1" & BG+=($!); ATT=$!
python3 "$LOAD" agent "$BASE" "$T1" "$NS-n1" 8 0.5 f "$TMP/flood-agent.out" & BG+=($!); AG=$!
sleep 2
t0=$(date +%s%N); st=$(post_ok "$TN1" f-new); t1=$(date +%s%N)
check "an agent never seen, during the flood: 200 after its retries ($st in $(( (t1 - t0) / 1000000 )) ms)" \
  test "$st" = 200
wait "$ATT" "$AG"
echo "flood: $(wc -l < "$TMP/flood.out") made-up tokens sent, answers: $(awk '{print $2}' "$TMP/flood.out" | sort | uniq -c | tr '\n' ' ')"
echo "agent during the flood: $(awk '{print $3}' "$TMP/flood-agent.out" | sort | uniq -c | tr '\n' ' ')"
check "every POST of the accepted agent during the flood: 200" awk '$3 != 200 { exit 1 }' "$TMP/flood-agent.out"
curl -s "$BASE/metrics" > "$TMP/flood.metrics"
m() { awk -v m="$1" '$1 == m {print $2}' "$TMP/flood.metrics"; }
n503=$(awk '$2 == 503' "$TMP/flood.out" | wc -l)
n401=$(awk '$2 == 401' "$TMP/flood.out" | wc -l)
echo "metrics: $(grep -E '^gpuheal_ingest_(refused_total|requests_total\{outcome="(unavailable|unauthorized)")' "$TMP/flood.metrics" | tr '\n' ' ')"
check "refusals counted: token_refused >= the 401s ($n401)" \
  awk -v v="$(m 'gpuheal_ingest_refused_total{reason="token_refused"}')" -v n="$n401" 'BEGIN { exit !(v != "" && v >= n && n > 0) }'
check "503s counted: outcome=unavailable >= the 503s seen ($n503)" \
  awk -v v="$(m 'gpuheal_ingest_requests_total{outcome="unavailable"}')" -v n="$n503" 'BEGIN { exit !(v != "" && v >= n) }'
check "over the review rate counted: reason=review_rate > 0" \
  awk -v v="$(m 'gpuheal_ingest_refused_total{reason="review_rate"}')" 'BEGIN { exit !(v > 0) }'

echo "--- 2. the API server hung 30 s"
T2=$(token agent-n1) && TNEW=$(token agent-n2) || { echo "FAIL: tokens"; exit 1; }
st=$(post_ok "$T2" h-00)
check "the agent's fresh token accepted before the hang ($st $(cat "$TMP/body"))" test "$st" = 200
python3 "$LOAD" probe "$BASE" 32 0.1 "$TMP/api.probe" & BG+=($!); PROBE=$!
python3 "$LOAD" attack "$BASE" 31 4 "$TMP/api.attack" & BG+=($!); ATT=$!
sleep 1
kill -STOP "$(api_pid)"
python3 "$LOAD" agent "$BASE" "$T2" "$NS-n1" 28 1 h "$TMP/api.agent" & BG+=($!); AG=$!
sleep 3
t0=$(date +%s%N); new=$(post "$TNEW" h-new); t1=$(date +%s%N)
new_ms=$(( (t1 - t0) / 1000000 ))
wait "$AG"
kill -CONT "$(api_pid)"
wait "$PROBE" "$ATT"
F=$(figures "$TMP/api.probe")
echo "API server hung: /healthz $F; /readyz max $(max_of "$TMP/api.probe" /readyz) ms; /metrics max $(max_of "$TMP/api.probe" /metrics) ms"
echo "API server hung: made-up tokens: $(awk '{print $2}' "$TMP/api.attack" | sort | uniq -c | tr '\n' ' ')max $(sort -n "$TMP/api.attack" | tail -1 | cut -d' ' -f1) ms; agent: $(awk '{print $3}' "$TMP/api.agent" | sort | uniq -c | tr '\n' ' ')max $(awk '$2 > m {m = $2} END {print m}' "$TMP/api.agent") ms; a new token: $new in $new_ms ms"
check "API server hung: /healthz 200, p99 within 100 ms, max under 1 s" healthz_ok "$TMP/api.probe"
check "API server hung: /readyz and /metrics 200 within 1 s" \
  awk '($1 == "/readyz" || $1 == "/metrics") && ($2 > 1000 || $3 != 200) { exit 1 }' "$TMP/api.probe"
check "API server hung: the accepted agent's POSTs 200 within 2 s" \
  awk '$3 != 200 || $2 > 2000 { exit 1 }' "$TMP/api.agent"
check "API server hung: a token never seen: 503 within 4 s, not held for the 5 s review ($new, $new_ms ms)" \
  test "$new" = 503 -a "$new_ms" -lt 4000
check "API server hung: every made-up token answered within 4 s" all_within "$TMP/api.attack" 1 4000

echo "--- 3. PostgreSQL hung 30 s"
T3=$(token agent-n1) || { echo "FAIL: token"; exit 1; }
check "ready before the hang" wait_for 30 sh -c "curl -s -o /dev/null -w '%{http_code}' $BASE/readyz | grep -q 200"
st=$(post_ok "$T3" s-00)
check "the agent's fresh token accepted before the hang ($st $(cat "$TMP/body"))" test "$st" = 200
acc0=$(metric 'gpuheal_ingest_signals_total{result="accepted"}')
python3 "$LOAD" probe "$BASE" 33 0.1 "$TMP/pg.probe" & BG+=($!); PROBE=$!
python3 "$LOAD" attack "$BASE" 32 4 "$TMP/pg.attack" & BG+=($!); ATT=$!
python3 "$LOAD" agent "$BASE" "$T3" "$NS-n1" 32 0.5 s "$TMP/pg.agent" & BG+=($!); AG=$!
sleep 1
pg_freeze STOP
sleep 30
pg_freeze CONT
wait "$PROBE" "$ATT" "$AG"
F=$(figures "$TMP/pg.probe")
echo "PostgreSQL hung: /healthz $F; /readyz max $(max_of "$TMP/pg.probe" /readyz) ms; /metrics max $(max_of "$TMP/pg.probe" /metrics) ms"
echo "PostgreSQL hung: agent: $(awk '{print $3}' "$TMP/pg.agent" | sort | uniq -c | tr '\n' ' ')max $(awk '$2 > m {m = $2} END {print m}' "$TMP/pg.agent") ms; made-up tokens: $(awk '{print $2}' "$TMP/pg.attack" | sort | uniq -c | tr '\n' ' ')"
check "PostgreSQL hung: /healthz 200, p99 within 100 ms, max under 1 s" healthz_ok "$TMP/pg.probe"
check "PostgreSQL hung: /readyz and /metrics answered within 1 s" \
  awk '($1 == "/readyz" || $1 == "/metrics") && ($2 > 1000 || $3 == 0) { exit 1 }' "$TMP/pg.probe"
check "PostgreSQL hung: every agent POST answered within 4 s, not held for the 30 s deadline" \
  all_within "$TMP/pg.agent" 2 4000
check "PostgreSQL hung: some agent POSTs refused 503 (the store could not take them)" \
  grep -q ' 503$' "$TMP/pg.agent"
check "ready again after the thaw" wait_for 40 sh -c "curl -s -o /dev/null -w '%{http_code}' $BASE/readyz | grep -q 200"
check "the agent's resends all answered 200" python3 "$LOAD" resend "$BASE" "$T3" "$NS-n1" s "$TMP/pg.agent" 60
ids=$(awk '{print $1}' "$TMP/pg.agent" | sort -un | wc -l)
psql() { "$PG_BIN/psql" -h "$PG_DIR" -U postgres -d postgres -qtA -v ON_ERROR_STOP=1 -c "$1"; }
missing=0
for i in $(awk '{print $1}' "$TMP/pg.agent" | sort -un); do
  [ "$(psql "SELECT COUNT(*) FROM signal_journal WHERE line LIKE '%\"id\":\"s-$i\"%'")" = 1 ] || missing=$((missing + 1))
done
acc1=$(metric 'gpuheal_ingest_signals_total{result="accepted"}')
echo "PostgreSQL hung: $ids ids sent, $missing not in the journal once; accepted $((acc1 - acc0)) (each id once: $ids)"
check "nothing lost: each of the $ids ids in the journal once" test "$missing" = 0
check "nothing accepted twice: accepted grew by $ids ($acc0 -> $acc1)" test "$((acc1 - acc0))" = "$ids"
echo "refusals: $(curl -s "$BASE/metrics" | grep -E '^gpuheal_ingest_(refused_total|late_total)' | tr '\n' ' ')"
check "controller stops cleanly" stop_controller

echo "controller_port_hangs: $pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then echo "--- controller log (tail)"; tail -30 "$CTL_LOG"; fi
[ "$fail" -eq 0 ]
