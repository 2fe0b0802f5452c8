#!/usr/bin/env bash
# controller_ingest_limits.sh - the ingest limits set on gpuheal-controller
# (local control plane of test/kube) take effect on its POST /v1/signals:
# with --ingest-max-body 20000 --ingest-max-line 1Ki --ingest-max-lines 8
# (the line limit also from the environment, GPUHEAL_INGEST_MAX_LINE, in a
# second start) a 20001-byte body is answered 413 naming 20000 bytes, 9
# lines 413 naming 8, a 1500-byte line among good ones is rejected (422,
# "line longer than 1024 bytes", its line number) while the good lines are
# accepted, and a body within every limit 200 (the same ~870-byte line
# taken under 1Ki is rejected with GPUHEAL_INGEST_MAX_LINE=600); with
# --ingest-idle-timeout 2s an idle connection is closed by the server after
# about 2 s. Flag validation is test/cli/controller_ingest_flags.sh.
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them).
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-lim-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-lim.XXXXXX)
CTL_PID=""
. "$(dirname "$0")/lib.sh"

cleanup() {
  [ -n "$CTL_PID" ] && kill "$CTL_PID" 2>/dev/null && wait "$CTL_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  rm_tmp
}
trap cleanup EXIT

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
TOKEN="lim-token-$RANDOM$RANDOM"
echo "$TOKEN" > "$TMP/token"

start() { # extra flags...
  local n=$((${CTL_N:-0} + 1))
  CTL_N=$n
  "$GH_BIN/gpuheal-controller" --kubeconfig "$GH_KUBECONFIG" --listen 127.0.0.1:0 \
    --token-file "$TMP/token" --db "sqlite:$TMP/audit.db" --watch-namespace "$NS" \
    --node-selector "gpuheal.io/pool=$NS" --no-leader-election --dry-run \
    --identity "lim-$$" "$@" > "$TMP/ctl.$n.out" 2> "$TMP/ctl.$n.log" &
  CTL_PID=$!
  wait_for 20 grep -qE "^listening on port [0-9]+$" "$TMP/ctl.$n.out" ||
    { bad "controller start"; tail -20 "$TMP/ctl.$n.log"; return 1; }
  PORT=$(sed -nE 's/^listening on port ([0-9]+)$/\1/p' "$TMP/ctl.$n.out" | tail -n 1)
  ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")" = 200 ]; }
  wait_for 20 ready || { bad "controller ready"; tail -20 "$TMP/ctl.$n.log"; return 1; }
}
stop() {
  kill "$CTL_PID" 2>/dev/null
  local st=0
  wait "$CTL_PID" 2>/dev/null || st=$?
  CTL_PID=""
  check "controller exits 0" test "$st" -eq 0
}

sig() { # tag n
  printf '{"ts":"%s","node":"%s-gpu-1","gpu":1,"source":"nvml","kind":"thermal","celsius":50,"throttled":false,"id":"lim/%s/%d"}\n' \
    "$(now)" "$NS" "$1" "$2"
}
# post FILE: status in $code, body in $TMP/body
post() {
  code=$(curl -s -o "$TMP/body" -w '%{http_code}' --max-time 20 -X POST \
    -H 'Content-Type: application/x-ndjson' -H "Authorization: Bearer $TOKEN" \
    --data-binary @"$1" "http://127.0.0.1:$PORT/v1/signals")
}
long_line() { # a thermal signal padded to about $1 bytes with a msg
  printf '{"ts":"%s","node":"%s-gpu-1","gpu":1,"source":"kmsg","kind":"xid","code":31,"id":"lim/long/%d","msg":"%s"}\n' \
    "$(now)" "$NS" "$RANDOM" "$(head -c "$1" /dev/zero | tr '\0' a)"
}

start --ingest-max-body 20000 --ingest-max-line 1Ki --ingest-max-lines 8 || exit 1

# body: 20001 bytes (a few signals, then padding)
{ sig big 1; sig big 2; } > "$TMP/big.jsonl"
pad=$((20001 - $(wc -c < "$TMP/big.jsonl") - 1))
{ cat "$TMP/big.jsonl"; head -c "$pad" /dev/zero | tr '\0' ' '; echo; } > "$TMP/big2.jsonl"
check "the body is 20001 bytes" test "$(wc -c < "$TMP/big2.jsonl")" -eq 20001
post "$TMP/big2.jsonl"
check "--ingest-max-body 20000: a 20001-byte body gets 413 ($(cat "$TMP/body"))" \
  eval '[ "$code" = 413 ] && grep -q "request body over 20000 bytes" "$TMP/body"'

# lines: 9 against 8
for i in $(seq 1 9); do sig n "$i"; done > "$TMP/n9.jsonl"
post "$TMP/n9.jsonl"
check "--ingest-max-lines 8: 9 lines get 413 ($(cat "$TMP/body"))" \
  eval '[ "$code" = 413 ] && grep -q "at most 8" "$TMP/body"'
head -n 8 "$TMP/n9.jsonl" > "$TMP/n8.jsonl"
post "$TMP/n8.jsonl"
check "8 lines: 200, 8 accepted ($(cat "$TMP/body"))" \
  eval '[ "$code" = 200 ] && grep -q "\"accepted\":8" "$TMP/body"'

# a line over 1 KiB among good ones: that line rejected with its reason
{ sig l 1; long_line 1500; sig l 2; } > "$TMP/mixed.jsonl"
post "$TMP/mixed.jsonl"
check "--ingest-max-line 1Ki: a 1500-byte line is rejected, the 2 others accepted ($(head -c 300 "$TMP/body"))" \
  eval '[ "$code" = 422 ] && grep -q "\"accepted\":2,\"duplicates\":0,\"rejected\":1" "$TMP/body"'
check "the rejected line is named with the limit" \
  grep -q '"line":2,"error":"line longer than 1024 bytes"' "$TMP/body"
# a line of about 870 bytes is within the limit
long_line 700 > "$TMP/ok.jsonl"
check "that line is 800-1024 bytes" test "$(wc -c < "$TMP/ok.jsonl")" -gt 800 -a "$(wc -c < "$TMP/ok.jsonl")" -le 1024
post "$TMP/ok.jsonl"
check "a line under 1 KiB: 200 ($(head -c 200 "$TMP/body"))" test "$code" = 200
stop

# the line limit from the environment, the idle timeout from a flag
GPUHEAL_INGEST_MAX_LINE=600 start --ingest-idle-timeout 2s || exit 1
post "$TMP/ok.jsonl"
check "GPUHEAL_INGEST_MAX_LINE=600: the same line is rejected ($(head -c 200 "$TMP/body"))" \
  eval '[ "$code" = 422 ] && grep -q "line longer than 600 bytes" "$TMP/body"'
# an idle connection (nothing sent) is closed by the server: the read ends
t0=$SECONDS
python3 - "$PORT" > "$TMP/idle" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(20)
t = time.monotonic()
try:
    d = s.recv(1)
except socket.timeout:
    d = b"timeout"
print("%.1f %r" % (time.monotonic() - t, d))
EOF
idle=$(cut -d' ' -f1 < "$TMP/idle")
check "--ingest-idle-timeout 2s: an idle connection closed after ${idle}s (1.5-8 s)" \
  python3 -c "import sys; v = float(sys.argv[1]); sys.exit(0 if 1.5 <= v <= 8 else 1)" "$idle"
stop

echo "controller_ingest_limits: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
