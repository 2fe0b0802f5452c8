#!/usr/bin/env bash
# ingest_limits.sh - the ingest endpoint's refusals, seen with curl against
# `gpuheal ingest-serve --body-max 200000 --max-lines 20`:
#   401 for a missing, wrong, differently sized or non-Bearer token, the same
#       body every time, naming no token; a rotated token file takes effect;
#   413 for a body over --body-max (declared or chunked) and for more lines
#       than --max-lines, with a message naming the limit; nothing of such a
#       request is taken, so the same lines sent again in smaller requests are
#       all accepted (none is taken for a duplicate);
#   422 for a line over 64 KiB or one that is not a signal, naming its line,
#       while the good lines of the same body are accepted and stored;
#   /metrics counts the refusals.
set -uo pipefail
gh="$GH_BIN/gpuheal"
tmp=$(mktemp -d)
recv_pid=""
trap '[ -n "$recv_pid" ] && kill -9 $recv_pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }

TOKEN=lim-token-9c2e51
echo "$TOKEN" > "$tmp/token"
out="$tmp/out.jsonl"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$out" \
  --body-max 200000 --max-lines 20 --port-file "$tmp/port" 2> "$tmp/recv.log" &
recv_pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$tmp/port")"

sig() { printf '{"ts":"2026-11-29T07:00:00.%06dZ","node":"gpu-1","gpu":%d,"source":"kmsg","kind":"xid","code":79,"id":"lim/%s/%d"}\n' "$2" $(($2 % 8)) "$1" "$2"; }
sigs() { for i in $(seq "$2" "$3"); do sig "$1" "$i"; done; }
count() { local c; c=$(grep -c "$1" "$out" 2>/dev/null); echo "${c:-0}"; }
# post FILE [curl args...]: status in $code, body in $tmp/body, headers in $tmp/hdr
post() {
  local f=$1; shift
  code=$(curl -s -o "$tmp/body" -D "$tmp/hdr" -w '%{http_code}' --max-time 20 -X POST \
    -H 'Content-Type: application/x-ndjson' --data-binary @"$f" "$@" "$url/v1/signals")
}
auth=(-H "Authorization: Bearer $TOKEN")

# ---- 401
sigs t 1 2 > "$tmp/t.jsonl"
post "$tmp/t.jsonl"; b_missing=$(cat "$tmp/body")
[ "$code" = 401 ] && grep -qi '^WWW-Authenticate: Bearer' "$tmp/hdr" && ok "no token: 401 with WWW-Authenticate: Bearer" || bad "no token: $code"
post "$tmp/t.jsonl" -H "Authorization: Bearer lim-token-9c2e50"; b_wrong=$(cat "$tmp/body")
[ "$code" = 401 ] && ok "wrong token (same length, last byte differs): 401" || bad "wrong token: $code"
post "$tmp/t.jsonl" -H "Authorization: Bearer ${TOKEN}x"; b_long=$(cat "$tmp/body")
[ "$code" = 401 ] && ok "the token plus one byte: 401" || bad "longer token: $code"
post "$tmp/t.jsonl" -H "Authorization: Bearer lim"; b_prefix=$(cat "$tmp/body")
[ "$code" = 401 ] && ok "a prefix of the token: 401" || bad "prefix: $code"
post "$tmp/t.jsonl" -H "Authorization: Basic $(printf 'x:%s' "$TOKEN" | base64)"
[ "$code" = 401 ] && ok "the token as Basic credentials: 401" || bad "Basic: $code"
[ "$b_missing" = "$b_wrong" ] && [ "$b_wrong" = "$b_long" ] && [ "$b_long" = "$b_prefix" ] \
  && ok "every 401 has the same body: $b_missing" || bad "401 bodies differ: $b_missing / $b_wrong / $b_long / $b_prefix"
grep -q 'lim' "$tmp/body" "$tmp/hdr" && bad "a 401 reply echoes token bytes" || ok "no 401 reply echoes token bytes"
[ "$(count lim/t/)" = 0 ] && ok "nothing taken from unauthorised requests" || bad "unauthorised signals stored"
post "$tmp/t.jsonl" "${auth[@]}"
[ "$code" = 200 ] && grep -q '"accepted":2' "$tmp/body" && [ "$(count lim/t/)" = 2 ] && ok "right token: 200, 2 accepted" || bad "right token: $code $(cat "$tmp/body")"

# rotation: add a second token, then drop the first (re-read at most once a second)
printf '%s\nlim-rotated-token-2\n' "$TOKEN" > "$tmp/token.new" && mv "$tmp/token.new" "$tmp/token"
sleep 1.2
sig r 1 > "$tmp/r1.jsonl"
post "$tmp/r1.jsonl" -H "Authorization: Bearer lim-rotated-token-2"
[ "$code" = 200 ] && ok "rotation: a token added to the file is accepted" || bad "rotation add: $code"
echo lim-rotated-token-2 > "$tmp/token.new" && mv "$tmp/token.new" "$tmp/token"
sleep 1.2
sig r 2 > "$tmp/r2.jsonl"
post "$tmp/r2.jsonl" "${auth[@]}"
[ "$code" = 401 ] && ok "rotation: the token removed from the file is refused" || bad "rotation remove: $code"
auth=(-H "Authorization: Bearer lim-rotated-token-2")

# ---- 413: body size (declared length, then chunked), line count
{ sigs big 1 20; head -c 200000 /dev/zero | tr '\0' ' '; echo; } > "$tmp/big.jsonl"
post "$tmp/big.jsonl" "${auth[@]}"
[ "$code" = 413 ] && grep -q 'request body over 200000 bytes' "$tmp/body" && ok "body over --body-max: 413 $(cat "$tmp/body")" \
  || bad "big body: $code $(cat "$tmp/body")"
post "$tmp/big.jsonl" "${auth[@]}" -H 'Transfer-Encoding: chunked'
[ "$code" = 413 ] && grep -q 'request body over 200000 bytes' "$tmp/body" && ok "chunked body over --body-max: 413" \
  || bad "chunked big body: $code $(cat "$tmp/body")"
[ "$(count lim/big/)" = 0 ] && ok "nothing of an oversized body is taken" || bad "oversized body: $(count lim/big/) taken"
sigs n 1 21 > "$tmp/n21.jsonl"
post "$tmp/n21.jsonl" "${auth[@]}"
[ "$code" = 413 ] && grep -q '20' "$tmp/body" && ok "21 lines with --max-lines 20: 413 $(cat "$tmp/body")" || bad "21 lines: $code $(cat "$tmp/body")"
[ "$(count lim/n/)" = 0 ] && ok "nothing of the 21-line body is taken" || bad "21 lines: $(count lim/n/) taken"
sigs n 1 20 > "$tmp/n20.jsonl"
post "$tmp/n20.jsonl" "${auth[@]}"
[ "$code" = 200 ] && grep -q '"accepted":20,"duplicates":0' "$tmp/body" && ok "the same lines resent, 20: all accepted, none a duplicate" \
  || bad "resend 20: $code $(cat "$tmp/body")"
sig n 21 > "$tmp/n1.jsonl"
post "$tmp/n1.jsonl" "${auth[@]}"
[ "$code" = 200 ] && grep -q '"accepted":1,"duplicates":0' "$tmp/body" && [ "$(count lim/n/)" = 21 ] \
  && ok "and the 21st: all 21 stored once" || bad "resend 21st: $code $(cat "$tmp/body")"

# ---- 422: a line over 64 KiB and a line that is not a signal, among good ones
{ sig l 1; printf '{"ts":"2026-11-29T07:00:00Z","node":"gpu-1","source":"kmsg","kind":"xid","code":79,"msg":"%s"}\n' "$(head -c 70000 /dev/zero | tr '\0' a)";
  sig l 2; echo '{"ts":"2026-11-29T07:00:00Z","kind":'; sig l 3; } > "$tmp/mixed.jsonl"
post "$tmp/mixed.jsonl" "${auth[@]}"
[ "$code" = 422 ] && grep -q '"accepted":3,"duplicates":0,"rejected":2' "$tmp/body" && ok "a 70000-byte line and a broken line: 422, 3 accepted, 2 rejected" \
  || bad "mixed: $code $(head -c 400 "$tmp/body")"
grep -q '"line":2,"error":"[^"]*65536' "$tmp/body" && ok "the long line is named (line 2) with the limit: $(grep -o '"line":2,"error":"[^"]*"' "$tmp/body")" \
  || bad "long line error: $(head -c 400 "$tmp/body")"
grep -q '"line":4,' "$tmp/body" && ok "the broken line is named (line 4)" || bad "broken line error: $(head -c 400 "$tmp/body")"
[ "$(count lim/l/)" = 3 ] && ok "the 3 good lines of that body are stored" || bad "mixed: $(count lim/l/) stored"

# ---- metrics count the refusals
m=$(curl -s "$url/metrics")
un=$(awk '$1 == "gpuheal_ingest_requests_total{outcome=\"unauthorized\"}" {print $2}' <<<"$m")
tl=$(awk '$1 == "gpuheal_ingest_requests_total{outcome=\"too_large\"}" {print $2}' <<<"$m")
[ "$un" = 6 ] && ok "/metrics: 6 unauthorized requests" || bad "/metrics unauthorized = $un (want 6)"
[ "$tl" = 3 ] && ok "/metrics: 3 too_large requests" || bad "/metrics too_large = $tl (want 3)"
grep -q "$TOKEN\|lim-rotated" "$tmp/recv.log" && bad "a token in the server log" || ok "no token in the server log"

kill -TERM $recv_pid; wait $recv_pid 2>/dev/null; recv_pid=""
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
