#!/usr/bin/env bash
# gpuheal-agent scraping a dcgm-exporter whose last XID stands (as it does
# until the node reboots): shipped once, not again with a new id after an
# agent restart; a new XID after the restart is shipped; a new boot id ships
# the standing one again (the exporter's values are new after a reboot).
# Read where a person would look: what the receiver got (`gpuheal
# ingest-serve --out`).
set -uo pipefail
gh="$GH_BIN/gpuheal"
agent="$GH_BIN/gpuheal-agent"
fake="$GH_BIN/../lib/libnvidia-ml-fake.so"
[ -x "$agent" ] || { echo "skip: no gpuheal-agent"; exit 0; }
[ -f "$fake" ] || { echo "skip: no fake NVML library at $fake"; exit 0; }
command -v python3 >/dev/null || { echo "skip: no python3 (the exporter's stand-in)"; exit 0; }
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
die() { bad "$*"; echo "--- agent logs"; tail -n 20 "$tmp"/agent*.log; exit 1; }
wait_for() {
  local until=$((SECONDS + $1)); shift
  until "$@" 2>/dev/null; do [ $SECONDS -ge $until ] && return 1; sleep 0.1; done
}

echo "dcgm-token-$$" > "$tmp/token"
printf 'gpus 4\n' > "$tmp/nvml.conf"
export GH_NVML_FAKE_CONFIG="$tmp/nvml.conf"
out="$tmp/received.jsonl"
"$gh" ingest-serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$out" \
  --port-file "$tmp/rport" 2> "$tmp/recv.log" &
pids+=($!)
wait_for 20 test -s "$tmp/rport" || die "receiver did not start"

# the exporter's stand-in: a static /metrics, its access log counts scrapes
mkdir -p "$tmp/www"
metrics_with() { # LAST_XID_OF_GPU_3
  printf '# TYPE DCGM_FI_DEV_XID_ERRORS gauge\nDCGM_FI_DEV_XID_ERRORS{gpu="3",UUID="GPU-3",pci_bus_id="00000000:48:00.0"} %s\nDCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-1",pci_bus_id="00000000:28:00.0"} 0\n' "$1" \
    > "$tmp/www/metrics.new" && mv "$tmp/www/metrics.new" "$tmp/www/metrics"
}
metrics_with 79
(cd "$tmp/www" && exec python3 -m http.server --bind 127.0.0.1 0) > "$tmp/http.out" 2> "$tmp/http.log" &
pids+=($!)
wait_for 20 grep -q 'Serving HTTP on' "$tmp/http.out" || die "exporter stand-in did not start"
hport=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$tmp/http.out" | head -n 1)
scrapes() { grep -c 'GET /metrics' "$tmp/http.log" 2>/dev/null || echo 0; }
scraped_since() { [ "$(scrapes)" -ge $(($1 + 3)) ]; } # three scrapes after mark $1

echo boot-one > "$tmp/boot1"
echo boot-two > "$tmp/boot2"
n=0
start_agent() { # BOOTFILE
  n=$((n + 1))
  "$agent" --node gpu-dcgm --kmsg off --nvml-lib "$fake" --poll-interval 1s --dcgm off \
    --dcgm-exporter "http://127.0.0.1:$hport/metrics" --dcgm-interval 200ms \
    --nic-root off --telemetry-socket off --boot-id-file "$1" \
    --controller "http://127.0.0.1:$(cat "$tmp/rport")" --token-file "$tmp/token" \
    --spool-dir "$tmp/spool" --batch-linger 20ms --listen 127.0.0.1:0 --log-level info \
    2> "$tmp/agent$n.log" &
  apid=$!
  pids+=("$apid")
  wait_for 30 grep -q 'msg="http listening"' "$tmp/agent$n.log" || die "agent $n did not start"
  aport=$(sed -n 's/.*msg="http listening".* port=\([0-9]*\).*/\1/p' "$tmp/agent$n.log" | tail -n 1)
}
pending_zero() { [ "$(curl -s "http://127.0.0.1:$aport/metrics" | awk '$1 == "gpuheal_agent_spool_pending" {print $2}')" = 0 ]; }
stop_agent() { kill -TERM "$apid"; wait "$apid" 2>/dev/null; }
dcgm_xids() { grep '"source":"dcgm"' "$out" 2>/dev/null | grep '"kind":"xid"' | grep -c "\"code\":$1" || true; }
xids_are() { [ "$(dcgm_xids "$1")" = "$2" ]; }

start_agent "$tmp/boot1"
wait_for 30 xids_are 79 1 && ok "the standing XID 79 of GPU 3 shipped once" || bad "XID 79 shipped $(dcgm_xids 79) times"
grep '"source":"dcgm"' "$out" | grep -q '"pci":"0000:48:00.0"' && ok "its pci in the one form 0000:48:00.0" \
  || bad "pci: $(grep -o '"pci":"[^"]*"' "$out" | sort -u)"
test -s "$tmp/spool/dcgm.state" && ok "SPOOL_DIR/dcgm.state written" || bad "no dcgm.state"
stop_agent

# a restart on the same boot: scraped again and again, nothing resent
mark=$(scrapes)
start_agent "$tmp/boot1"
wait_for 30 scraped_since "$mark" || die "the restarted agent did not scrape"
# everything those scrapes gave is shipped (spool empty after them)
wait_for 30 pending_zero || bad "the restarted agent's spool did not empty"
xids_are 79 1 && ok "restart, same boot: XID 79 not shipped again" || bad "restart: XID 79 shipped $(dcgm_xids 79) times"
# what changes after the restart is shipped
metrics_with 48
wait_for 30 xids_are 48 1 && ok "a new last XID (48) after the restart is shipped" || bad "XID 48 shipped $(dcgm_xids 48) times"
stop_agent

# a reboot: the exporter starts over, what it shows is new
start_agent "$tmp/boot2"
wait_for 30 xids_are 48 2 && ok "new boot id: the standing XID 48 shipped" || bad "after a reboot: XID 48 shipped $(dcgm_xids 48) times"
stop_agent

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
