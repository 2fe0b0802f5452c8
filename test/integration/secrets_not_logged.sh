#!/usr/bin/env bash
# secrets_not_logged.sh - no secret reaches a log, a reply, the audit store
# or the Kubernetes objects gpuheal writes. gpuheal-controller (real control
# plane, SQLite audit store, HTTPS ingest, --log-level debug, --dry-run) and
# gpuheal-agent (--log-level debug, https with --ca-file) run with known
# secrets:
#   the controller's ingest token, a second (wrong) token the agent starts
#   with, the TLS private key, the client key of the kubeconfig, and a
#   PostgreSQL password in a --db URL;
# the test exercises auth failures (the agent's wrong token, curl and
# `gpuheal inject` with a wrong token, no token) and successes (the agent
# after its token file is fixed, inject with the right token), then greps
# every log, every reply, /metrics, the audit database (gpuheal explain and
# timeline of the node, an SQL dump when sqlite3 is installed, its raw files), the agent's spool and the Events/Incidents for each secret.
# Canaries (the node name, the XID line) must be found in the same places,
# so the search is known to look where the data is.
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="sec-$$-$RANDOM"
NODE="$NS-gpu"
TMP=$(mktemp -d /tmp/gh-secrets.XXXXXX)
CTL_PID="" AGENT_PID=""
pass=0 fail=0
ok() { echo "ok   - $*"; pass=$((pass + 1)); }
bad() { echo "FAIL - $*"; fail=$((fail + 1)); }
wait_for() { local until=$((SECONDS + $1)); shift; until "$@" 2>/dev/null; do [ $SECONDS -ge $until ] && return 1; sleep 0.2; done; }
cleanup() {
  [ -n "$AGENT_PID" ] && kill -9 "$AGENT_PID" 2>/dev/null
  [ -n "$CTL_PID" ] && kill -9 "$CTL_PID" 2>/dev/null
  wait 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" get incidents -o name 2>/dev/null | while read -r i; do
    "$K" get "$i" -o jsonpath='{.spec.node}' 2>/dev/null | grep -q "^$NODE" && "$K" delete "$i" --wait=false >/dev/null 2>&1
  done
  [ -n "${GH_KEEP_TMP:-}" ] && echo "kept $TMP" || rm -rf "$TMP"
}
trap cleanup EXIT
"$K" create ns "$NS" >/dev/null || { echo "FAIL - namespace"; exit 1; }

# ---- the secrets
TOKEN="sec-good-$RANDOM$RANDOM-9f1d7c"
WRONG="sec-wrong-$RANDOM$RANDOM-44ab0e"
PGPASS="pgpass-$RANDOM$RANDOM-e71c"
printf '# ingest tokens\n%s\n' "$TOKEN" > "$TMP/token"
echo "$WRONG" > "$TMP/agent-token"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=gpuheal test CA" \
  -keyout "$TMP/ca.key" -out "$TMP/ca.pem" 2>/dev/null &&
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=gpuheal-controller" \
  -keyout "$TMP/server.key" -out "$TMP/server.csr" 2>/dev/null &&
printf 'subjectAltName=IP:127.0.0.1\n' > "$TMP/ext" &&
openssl x509 -req -in "$TMP/server.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" -CAcreateserial \
  -days 1 -extfile "$TMP/ext" -out "$TMP/server.pem" 2>/dev/null || { bad "openssl certificates"; exit 1; }
# the key's base64 body, minus the PEM armour (any 40-character run of it must not appear)
KEYB64=$(grep -v -- '-----' "$TMP/server.key" | tr -d '\n')
KUBEKEY=$("$K" config view --raw --minify -o jsonpath='{.users[0].user.client-key-data}')
KUBETOK=$("$K" config view --raw --minify -o jsonpath='{.users[0].user.token}')
secrets=("$TOKEN" "$WRONG" "$PGPASS" "${KEYB64:0:40}" "${KEYB64: -40}")
[ -n "$KUBEKEY" ] && secrets+=("${KUBEKEY:0:40}" "${KUBEKEY: -40}")
[ -n "$KUBETOK" ] && secrets+=("$KUBETOK")
echo "# ${#secrets[@]} secret strings (ingest tokens, PG password, TLS key, kubeconfig credentials)"

# ---- a PostgreSQL URL with a password, nothing listening: the error must not carry it
"$GH_BIN/gpuheal-controller" --kubeconfig "$GH_KUBECONFIG" --listen 127.0.0.1:0 --token-file "$TMP/token" \
  --db "postgres://gpuheal:$PGPASS@127.0.0.1:9/gpuheal?connect_timeout=2" --log-level debug \
  --no-leader-election --dry-run --watch-namespace "$NS" > "$TMP/ctl-pg.out" 2> "$TMP/ctl-pg.log" &
pg_pid=$!
wait_for 30 eval "! kill -0 $pg_pid" || kill -TERM $pg_pid
wait $pg_pid; rc=$?
[ $rc -ne 0 ] && grep -qi 'postgres' "$TMP/ctl-pg.log" && ok "controller with an unreachable postgres URL exits $rc and says why: $(grep -i -m1 postgres "$TMP/ctl-pg.log" | head -c 160)" \
  || bad "postgres URL (exit $rc): $(tail -n 3 "$TMP/ctl-pg.log")"

# ---- the controller: HTTPS, debug, dry run, SQLite
"$GH_BIN/gpuheal-controller" --kubeconfig "$GH_KUBECONFIG" --listen 127.0.0.1:0 \
  --token-file "$TMP/token" --tls-cert "$TMP/server.pem" --tls-key "$TMP/server.key" \
  --db "sqlite:$TMP/audit.db" --log-level debug --dry-run --no-leader-election \
  --watch-namespace "$NS" --node-selector "gpuheal.io/pool=$NS" --reorder-window 200ms \
  > "$TMP/ctl.out" 2> "$TMP/ctl.log" &
CTL_PID=$!
wait_for 30 grep -qE '^listening on port [0-9]+$' "$TMP/ctl.out" || { bad "controller start"; tail -n 20 "$TMP/ctl.log"; exit 1; }
PORT=$(sed -nE 's/^listening on port ([0-9]+)$/\1/p' "$TMP/ctl.out" | tail -n 1)
URL="https://127.0.0.1:$PORT"
wait_for 10 grep -q 'level=debug' "$TMP/ctl.log" && ok "controller up on $URL, logging at debug" || bad "controller log has no debug lines"
CURL=(curl -s --max-time 10 --cacert "$TMP/ca.pem")

now() { date -u +%FT%T.%6NZ; }
xid() { echo '{"ts":"'"$(now)"'","node":"'"$NODE"'","gpu":'"$1"',"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.","id":"sec-'"$NS-$1-$2"'"}'; }

# ---- auth failures
xid 0 a > "$TMP/a.jsonl"
"${CURL[@]}" -o "$TMP/r-none" -w '%{http_code}\n' -X POST --data-binary @"$TMP/a.jsonl" "$URL/v1/signals" > "$TMP/code-none"
"${CURL[@]}" -o "$TMP/r-wrong" -w '%{http_code}\n' -X POST --data-binary @"$TMP/a.jsonl" -H "Authorization: Bearer $WRONG" "$URL/v1/signals" > "$TMP/code-wrong"
[ "$(cat "$TMP/code-none") $(cat "$TMP/code-wrong")" = "401 401" ] && ok "curl: no token 401, wrong token 401" || bad "curl codes: $(cat "$TMP/code-none" "$TMP/code-wrong")"
"$GH_BIN/gpuheal" inject --controller "$URL" --cacert "$TMP/ca.pem" --token-file "$TMP/agent-token" --retries 0 "$TMP/a.jsonl" > "$TMP/inject-wrong.out" 2> "$TMP/inject-wrong.err"
[ $? -ne 0 ] && grep -q 401 "$TMP/inject-wrong.err" && ok "inject with the wrong token: HTTP 401" || bad "inject wrong token: $(cat "$TMP/inject-wrong.err")"

# ---- the agent, first with the wrong token
{ xid 1 b; xid 2 b; } > "$TMP/agent-in.jsonl"
"$GH_BIN/gpuheal-agent" --node "$NODE" --kmsg off --nvml-lib off --dcgm off --nic-root off --telemetry-socket off \
  --kubeconfig off --controller "$URL" --ca-file "$TMP/ca.pem" --token-file "$TMP/agent-token" \
  --inject "$TMP/agent-in.jsonl" --spool-dir "$TMP/spool" --batch-linger 20ms --listen 127.0.0.1:0 \
  --log-level debug 2> "$TMP/agent.log" &
AGENT_PID=$!
wait_for 30 grep -q 'shipping to the controller failing' "$TMP/agent.log" &&
  grep -q '401' "$TMP/agent.log" && ok "agent with the wrong token: 401, says shipping fails" ||
  { bad "agent wrong token not reported"; tail -n 5 "$TMP/agent.log"; }
accepted() { "${CURL[@]}" "$URL/metrics" | awk '$1 == "gpuheal_ingest_signals_total{result=\"accepted\"}" {print $2}'; }
[ "$(accepted)" = 0 ] && ok "nothing accepted while the token is wrong" || bad "accepted with a wrong token: $(accepted)"

# ---- successes: the agent's token file is fixed (re-read per request); inject with the right token
echo "$TOKEN" > "$TMP/agent-token.new" && mv "$TMP/agent-token.new" "$TMP/agent-token"
acc_ge() { local a; a=$(accepted); [ -n "$a" ] && [ "${a%.*}" -ge "$1" ]; }
wait_for 60 acc_ge 2 && ok "agent after the token fix: its 2 signals accepted" || bad "agent signals not accepted: $(accepted)"
"$GH_BIN/gpuheal" inject --controller "$URL" --cacert "$TMP/ca.pem" --token-file "$TMP/token" "$TMP/a.jsonl" > "$TMP/inject-ok.out" 2> "$TMP/inject-ok.err"
[ $? -eq 0 ] && grep -q '"accepted":1' "$TMP/inject-ok.out" && ok "inject with the right token: accepted" || bad "inject: $(cat "$TMP/inject-ok.out" "$TMP/inject-ok.err")"
has_row() { "$GH_BIN/gpuheal" timeline "node/$NODE" --db "sqlite:$TMP/audit.db" 2>/dev/null | grep -q "fallen off the bus"; }
wait_for 30 has_row && ok "the audit store holds rows about $NODE" || bad "no audit rows about $NODE"
"${CURL[@]}" "$URL/metrics" > "$TMP/ctl-metrics.txt"
aport=$(sed -n 's/.*msg="http listening".* port=\([0-9]*\).*/\1/p' "$TMP/agent.log" | tail -n 1)
curl -s --max-time 5 "http://127.0.0.1:$aport/metrics" > "$TMP/agent-metrics.txt"

kill -TERM "$AGENT_PID"; wait "$AGENT_PID"; AGENT_PID=""
kill -TERM "$CTL_PID"; wait "$CTL_PID"; rc=$?; CTL_PID=""
[ $rc -eq 0 ] && ok "controller stopped cleanly" || bad "controller exit $rc"

# ---- what to search
# the audit store as gpuheal reads it back, plus its raw files below (and an
# SQL dump when the sqlite3 shell is installed)
{ "$GH_BIN/gpuheal" explain "node/$NODE" --db "sqlite:$TMP/audit.db"
  "$GH_BIN/gpuheal" timeline "node/$NODE" --db "sqlite:$TMP/audit.db"
  command -v sqlite3 >/dev/null && sqlite3 "$TMP/audit.db" .dump; } > "$TMP/audit.txt" 2>&1
"$K" -n "$NS" get events -o yaml > "$TMP/events.yaml" 2>&1
"$K" get incidents -o yaml > "$TMP/incidents.yaml" 2>&1
haystack=("$TMP/ctl.out" "$TMP/ctl.log" "$TMP/ctl-pg.out" "$TMP/ctl-pg.log" "$TMP/agent.log"
  "$TMP/r-none" "$TMP/r-wrong" "$TMP/inject-wrong.out" "$TMP/inject-wrong.err" "$TMP/inject-ok.out"
  "$TMP/inject-ok.err" "$TMP/ctl-metrics.txt" "$TMP/agent-metrics.txt" "$TMP/audit.txt" "$TMP/events.yaml"
  "$TMP/incidents.yaml")
for f in "$TMP"/audit.db*; do haystack+=("$f"); done   # raw database, WAL included
while IFS= read -r f; do haystack+=("$f"); done < <(find "$TMP/spool" -type f)
n_lines=$(cat "${haystack[@]}" 2>/dev/null | wc -l)
n_debug=$(cat "$TMP/ctl.log" "$TMP/agent.log" | grep -c 'level=debug')
echo "# searched ${#haystack[@]} files ($n_lines lines, $n_debug debug log lines)"
# canaries: what must be there
grep -aq "$NODE" "$TMP/audit.txt" && grep -aq "fallen off the bus" "$TMP/audit.txt" && ok "canary: the node and the XID line are in the audit store's explain/timeline" || bad "canary: audit store"
grep -aq "$NODE" "$TMP/agent.log" "$TMP/ctl.log" && ok "canary: the node name is in the logs" || bad "canary: logs"
grep -aqF "$TOKEN" "$TMP/token" && ok "canary: the search finds the token where it is (its file)" || bad "canary: token file"
leaks=0
for s in "${secrets[@]}"; do
  if hits=$(grep -alF -- "$s" "${haystack[@]}" 2>/dev/null); then
    leaks=$((leaks + 1)); bad "a secret (${s:0:6}...) appears in: $(echo $hits)"
  fi
done
[ $leaks -eq 0 ] && ok "none of the ${#secrets[@]} secret strings appears in any log, reply, metric, audit row, spool file, Event or Incident"

echo "secrets_not_logged: $pass passed, $fail failed"
[ $fail -eq 0 ]
