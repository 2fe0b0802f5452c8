#!/usr/bin/env bash
# gpuheal inject against `gpuheal ingest-serve`: signals arrive marked
# injected; the controller's summary is printed with input line numbers
# (across batches, blank and header lines counted); exit status 0 / 1 / 2;
# duplicates on a second run; a wrong token, a receiver that is down.
set -uo pipefail
gh="$GH_BIN/gpuheal"
tmp=$(mktemp -d)
recv_pid=""
trap '[ -n "$recv_pid" ] && kill -9 $recv_pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }

echo "inject-token" > "$tmp/token"
echo "not-the-token-qz7" > "$tmp/wrong"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$tmp/out.jsonl" \
  --port-file "$tmp/port" 2> "$tmp/recv.log" &
recv_pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$tmp/port")"

sig() { echo "{\"ts\":\"2026-11-29T07:00:0$1Z\",\"node\":\"gpu-1\",\"gpu\":$1,\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79,\"id\":\"inj/$1\"}"; }
{ echo '{"scenario":"demo","nodes":["gpu-1"]}'; sig 1; echo; sig 2; sig 3; echo '{"ts":"bad"}'; sig 4; } > "$tmp/in.jsonl"

"$gh" inject > /dev/null 2>&1; [ $? -eq 2 ] && ok "no arguments: exit 2" || bad "no arguments"
"$gh" inject --help | grep -q -- '--token-file' && ok "--help documents the options" || bad "--help"
"$gh" inject --controller ftp://x --token-file "$tmp/token" "$tmp/in.jsonl" > /dev/null 2>&1
[ $? -eq 2 ] && ok "bad URL: exit 2" || bad "bad URL"

"$gh" inject --controller "$url" --token-file "$tmp/token" --batch 2 "$tmp/in.jsonl" > "$tmp/sum" 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && ok "a refused line: exit 1" || bad "exit $rc with a refused line"
grep -q '"accepted":4,"duplicates":0,"rejected":1' "$tmp/sum" && ok "summary: 4 accepted, 1 rejected" \
  || bad "summary: $(cat "$tmp/sum")"
grep -q '"errors":\[{"line":6,"error":"field \\"ts\\": not RFC 3339"}\]' "$tmp/sum" \
  && ok "the refused line is named by its input line (6), across batches of 2" || bad "error line: $(cat "$tmp/sum")"
[ "$(grep -c '"injected":true' "$tmp/out.jsonl")" = 4 ] && ok "signals arrive marked injected" \
  || bad "injected marks: $(cat "$tmp/out.jsonl")"

grep -v bad "$tmp/in.jsonl" | "$gh" inject --controller "$url" --token-file "$tmp/token" - > "$tmp/sum"
rc=$?
[ $rc -eq 0 ] && grep -q '"accepted":0,"duplicates":4,"rejected":0' "$tmp/sum" \
  && ok "stdin, second run: 4 duplicates, exit 0" || bad "second run (exit $rc): $(cat "$tmp/sum")"

"$gh" inject --controller "$url" --token-file "$tmp/wrong" "$tmp/in.jsonl" > /dev/null 2> "$tmp/err"
[ $? -eq 1 ] && grep -q 'HTTP 401' "$tmp/err" && ok "wrong token: HTTP 401, exit 1" || bad "wrong token: $(cat "$tmp/err")"
grep -q 'inject-token\|not-the-token-qz7' "$tmp/err" && bad "a token appears in the error output" || ok "no token in error output"

GPUHEAL_CONTROLLER="$url" GPUHEAL_TOKEN_FILE="$tmp/token" "$gh" inject "$tmp/in.jsonl" > /dev/null 2>&1
[ $? -eq 1 ] && ok "controller and token from the environment" || bad "environment"

kill -TERM $recv_pid; wait $recv_pid 2>/dev/null; recv_pid=""
"$gh" inject --controller "$url" --token-file "$tmp/token" --retries 0 "$tmp/in.jsonl" > /dev/null 2> "$tmp/err"
[ $? -eq 1 ] && grep -q 'not delivered' "$tmp/err" && ok "receiver down: says what was not delivered, exit 1" \
  || bad "receiver down: $(cat "$tmp/err")"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
