#!/usr/bin/env bash
# ingest_tls.sh - the ingest endpoint over HTTPS, end to end with real
# certificates made here by openssl (a CA, a server certificate for
# 127.0.0.1/localhost signed by it, and an unrelated second CA):
# `gpuheal ingest-serve --tls-cert/--tls-key` takes signals from `gpuheal
# inject --cacert CA` and from gpuheal-agent --ca-file CA; plain HTTP to the
# TLS port gets no HTTP answer; TLS 1.0 and 1.1 are refused, 1.2 and 1.3
# taken; a client trusting the wrong CA (or only the system CAs), or a
# certificate of the right CA for another name, is refused by its own
# verification and delivers nothing; a bad key refuses to start. Prints
# ok/FAIL lines and a count.
set -uo pipefail
gh="$GH_BIN/gpuheal"
agent="$GH_BIN/gpuheal-agent"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
wait_for() { local until=$((SECONDS + $1)); shift; until "$@" 2>/dev/null; do [ $SECONDS -ge $until ] && return 1; sleep 0.2; done; }
command -v openssl >/dev/null || { echo "skip: no openssl"; exit 0; }

# ---- certificates (EC P-256; 1 day)
mkca() { # NAME
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj "/CN=gpuheal test $1" -keyout "$tmp/$1.key" -out "$tmp/$1.pem" 2>/dev/null
}
mkca ca && mkca otherca || { bad "openssl: make the CAs"; exit 1; }
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=gpuheal-controller" \
  -keyout "$tmp/server.key" -out "$tmp/server.csr" 2>/dev/null &&
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$tmp/ext" &&
openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial \
  -days 1 -extfile "$tmp/ext" -out "$tmp/server.pem" 2>/dev/null || { bad "openssl: server certificate"; exit 1; }
ok "openssl: CA, server certificate (SAN 127.0.0.1, localhost), second CA"

echo "tls-token-7f3a" > "$tmp/token"
out="$tmp/out.jsonl"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$out" \
  --tls-cert "$tmp/server.pem" --tls-key "$tmp/server.key" --port-file "$tmp/port" 2> "$tmp/recv.log" &
pids+=($!)
wait_for 20 test -s "$tmp/port" || { bad "ingest-serve with TLS did not start: $(cat "$tmp/recv.log")"; exit 1; }
port=$(cat "$tmp/port")
https="https://127.0.0.1:$port"
ok "ingest-serve --tls-cert --tls-key listening on $port"

sig() { echo "{\"ts\":\"2026-11-29T07:00:0$1Z\",\"node\":\"gpu-1\",\"gpu\":$1,\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79,\"id\":\"tls/$2/$1\"}"; }
count() { local c; c=$(grep -c "$1" "$out" 2>/dev/null); echo "${c:-0}"; }

# 1. inject over https, trusting the CA
{ sig 1 a; sig 2 a; } > "$tmp/a.jsonl"
"$gh" inject --controller "$https" --token-file "$tmp/token" --cacert "$tmp/ca.pem" "$tmp/a.jsonl" > "$tmp/sum" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q '"accepted":2' "$tmp/sum" && [ "$(count tls/a/)" = 2 ] \
  && ok "inject --cacert CA over https: 2 accepted, 2 in the receiver's file" || bad "inject over https (exit $rc): $(cat "$tmp/sum" "$tmp/err")"
# localhost is in the SAN too
{ sig 3 a; } | "$gh" inject --controller "https://localhost:$port" --token-file "$tmp/token" --cacert "$tmp/ca.pem" - > /dev/null 2>&1 \
  && ok "https://localhost:PORT verifies (SAN DNS:localhost)" || bad "https://localhost:PORT"

# 2. the wrong CA, and no CA (system trust store): refused, nothing delivered
{ sig 1 b; } > "$tmp/b.jsonl"
"$gh" inject --controller "$https" --token-file "$tmp/token" --cacert "$tmp/otherca.pem" --retries 0 "$tmp/b.jsonl" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -ne 0 ] && [ "$(count tls/b/)" = 0 ] && ok "inject --cacert OTHER-CA: refused (exit $rc), nothing delivered" \
  || bad "wrong CA (exit $rc): $(cat "$tmp/err")"
grep -qi 'certif\|SSL\|TLS' "$tmp/err" && ok "wrong CA: the error says it is the certificate: $(grep -oi '[^:]*certif[^\"]*' "$tmp/err" | head -n1)" \
  || bad "wrong CA error does not name the certificate: $(cat "$tmp/err")"
"$gh" inject --controller "$https" --token-file "$tmp/token" --retries 0 "$tmp/b.jsonl" > /dev/null 2>&1
rc=$?
[ $rc -ne 0 ] && [ "$(count tls/b/)" = 0 ] && ok "inject without --cacert (system CAs only): refused (exit $rc)" || bad "no CA (exit $rc)"
grep -q 'tls-token-7f3a' "$tmp/err" && bad "the token appears in the client's error output" || ok "no token in the client's error output"

# 3. curl: plain HTTP to the TLS port gets no HTTP status; https with the CA works
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/healthz")
[ "$code" = 000 ] && ok "plain http:// to the TLS port: no HTTP answer (curl status $code)" || bad "plain http to the TLS port answered $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST --data-binary "$(sig 4 c)" \
  -H "Authorization: Bearer tls-token-7f3a" "http://127.0.0.1:$port/v1/signals")
[ "$code" = 000 ] && [ "$(count tls/c/)" = 0 ] && ok "plain http POST with the right token to the TLS port: nothing taken" || bad "plain http POST: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$tmp/otherca.pem" "$https/healthz")
[ "$code" = 000 ] && ok "curl --cacert OTHER-CA: verification fails" || bad "curl with the other CA got $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$tmp/ca.pem" "$https/healthz")
[ "$code" = 200 ] && ok "curl --cacert CA https://.../healthz: 200" || bad "curl https healthz: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$tmp/ca.pem" -X POST --data-binary "$(sig 5 d)" "$https/v1/signals")
[ "$code" = 401 ] && ok "https without a token: 401 (TLS does not replace the token)" || bad "https without token: $code"
sc=$(openssl s_client -connect "127.0.0.1:$port" -CAfile "$tmp/ca.pem" -servername localhost </dev/null 2>/dev/null)
proto=$(sed -n 's/^New, \(TLSv[0-9.]*\), Cipher is \(.*\)/\1 \2/p' <<<"$sc" | head -n1)
[ -n "$proto" ] && grep -q 'Verify return code: 0' <<<"$sc" && ok "openssl s_client: negotiated $proto, certificate verified" \
  || bad "openssl s_client: $(tail -n 5 <<<"$sc")"
# Old protocol versions: the client's own floor is lifted (SECLEVEL=0), so a
# refusal is the server's (GnuTLS priorities in src/ingest/server.c).
for v in tls1 tls1_1; do
  sc=$(openssl s_client -connect "127.0.0.1:$port" -"$v" -cipher 'DEFAULT@SECLEVEL=0' </dev/null 2>&1)
  got=$(sed -n 's/^New, \(TLSv[0-9.]*\),.*/\1/p' <<<"$sc" | head -n1)
  [ -z "$got" ] && ok "openssl s_client -$v (client floor lifted): refused by the server" \
    || bad "the server negotiated $got for s_client -$v"
done
sc=$(openssl s_client -connect "127.0.0.1:$port" -tls1_2 -CAfile "$tmp/ca.pem" </dev/null 2>&1)
grep -q '^New, TLSv1.2' <<<"$sc" && ok "openssl s_client -tls1_2: accepted" || bad "TLS 1.2 refused: $(tail -n 3 <<<"$sc")"

# 4. the agent's publisher: --controller https://... --ca-file CA
if [ -x "$agent" ]; then
  { sig 1 e; sig 2 e; sig 3 e; } > "$tmp/e.jsonl"
  "$agent" --node gpu-1 --kmsg off --nvml-lib off --dcgm off --nic-root off --telemetry-socket off \
    --controller "$https" --token-file "$tmp/token" --ca-file "$tmp/ca.pem" --inject "$tmp/e.jsonl" \
    --spool-dir "$tmp/spool" --batch-linger 20ms --listen 127.0.0.1:0 --kubeconfig off \
    --log-level info 2> "$tmp/agent.log" &
  apid=$!; pids+=($apid)
  has() { [ "$(count "$1")" = "$2" ]; }
  wait_for 30 has tls/e/ 3 && ok "agent --ca-file CA over https: 3 signals delivered" \
    || { bad "agent over https: $(count tls/e/) of 3 delivered"; tail -n 5 "$tmp/agent.log"; }
  kill -TERM $apid; wait $apid 2>/dev/null
  # the same agent trusting the wrong CA: nothing delivered, it says shipping fails
  { sig 1 f; } > "$tmp/f.jsonl"
  "$agent" --node gpu-1 --kmsg off --nvml-lib off --dcgm off --nic-root off --telemetry-socket off \
    --controller "$https" --token-file "$tmp/token" --ca-file "$tmp/otherca.pem" --inject "$tmp/f.jsonl" \
    --spool-dir "$tmp/spool2" --batch-linger 20ms --listen 127.0.0.1:0 --kubeconfig off \
    --log-level info 2> "$tmp/agent2.log" &
  apid=$!; pids+=($apid)
  wait_for 20 grep -q 'shipping to the controller failing' "$tmp/agent2.log" && [ "$(count tls/f/)" = 0 ] \
    && ok "agent --ca-file OTHER-CA: shipping fails, nothing delivered, kept in its spool" \
    || { bad "agent with the wrong CA: $(count tls/f/) delivered"; tail -n 5 "$tmp/agent2.log"; }
  kill -TERM $apid; wait $apid 2>/dev/null
else
  echo "skip - agent over https (no gpuheal-agent)"
fi

# 5. a certificate from the right CA but for another name: the client checks the name
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=other.example" \
  -keyout "$tmp/other.key" -out "$tmp/other.csr" 2>/dev/null &&
printf 'subjectAltName=DNS:other.example\n' > "$tmp/ext2" &&
openssl x509 -req -in "$tmp/other.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial \
  -days 1 -extfile "$tmp/ext2" -out "$tmp/other.pem" 2>/dev/null || bad "openssl: certificate for other.example"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$tmp/out2.jsonl" \
  --tls-cert "$tmp/other.pem" --tls-key "$tmp/other.key" --port-file "$tmp/port2" 2> "$tmp/recv2.log" &
recv2=$!; pids+=($recv2)
wait_for 20 test -s "$tmp/port2" || bad "second ingest-serve did not start"
{ sig 1 g; } | "$gh" inject --controller "https://127.0.0.1:$(cat "$tmp/port2")" --token-file "$tmp/token" \
  --cacert "$tmp/ca.pem" --retries 0 - > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -ne 0 ] && [ ! -s "$tmp/out2.jsonl" ] && grep -qi 'subject name\|host name\|match' "$tmp/err" \
  && ok "a certificate of the trusted CA for another name: refused (hostname checked)" || bad "name mismatch (exit $rc): $(cat "$tmp/err")"
kill -TERM $recv2; wait $recv2 2>/dev/null

# 6. bad TLS files refuse to start
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$tmp/x" \
  --tls-cert "$tmp/server.pem" --tls-key "$tmp/token" > /dev/null 2> "$tmp/bad.log"
rc=$?
[ $rc -ne 0 ] && ok "a key file that is not a key: refuses to start (exit $rc): $(head -c 120 "$tmp/bad.log")" || bad "started with a bad key"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$tmp/x" \
  --tls-cert "$tmp/server.pem" > /dev/null 2>&1
[ $? -ne 0 ] && ok "--tls-cert without --tls-key: refuses to start" || bad "started with a certificate and no key"
grep -q 'tls-token-7f3a\|PRIVATE KEY' "$tmp/recv.log" "$tmp/bad.log" && bad "token or key material in the server's log" \
  || ok "no token or key material in the server's log"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
