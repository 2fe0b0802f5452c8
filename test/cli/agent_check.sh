#!/usr/bin/env bash
# `gpuheal-agent --check` (issue 26 item 2, "A node's own view"): the table
# and the JSON a person reads on a node. The GPU path through the fake NVML
# library (GPU count, a volatile DBE, a pending row remap, a lost GPU); a
# fake /proc and /sys tree (--check-root) for the driver, the PCI bus's GPUs
# and NVSwitches, Fabric Manager and nvidia-peermem, and a fake InfiniBand
# sysfs; a node without any GPU says what it lacks and passes; the spool's
# pending records, the kernel-log position and the telemetry socket beside a
# running agent; an NVML call that hangs and a controller URL that never
# answers cost at most their 2 s deadlines (the figures are printed); a
# dcgm-exporter and a controller that answer or not; --json parses (python3)
# and says the same; exit status 0 / 1 / 2.
set -uo pipefail
agent="$GH_BIN/gpuheal-agent"
fake="$GH_BIN/../lib/libnvidia-ml-fake.so"
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
wait_for() { local until=$((SECONDS + $1)); shift; until "$@" 2>/dev/null; do [ $SECONDS -ge $until ] && return 1; sleep 0.1; done; }
[ -x "$agent" ] || { echo "skip: no gpuheal-agent"; exit 0; }
[ -f "$fake" ] || { echo "skip: no fake NVML library at $fake"; exit 0; }
unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT GPUHEAL_CONFIG GPUHEAL_KUBECONFIG GPUHEAL_PROBE

# A row of the table: "NAME  STATUS  DETAIL" -> status and detail checks.
row() { awk -v n="$2" '$1 == n' <<<"$1"; }
expect() { # OUTPUT NAME STATUS DETAIL-SUBSTRING WHAT
  local r; r=$(row "$1" "$2")
  if [ "$(awk '{print $2}' <<<"$r")" = "$3" ] && grep -qF -- "$4" <<<"$r"; then ok "$5: $r"
  else bad "$5: want $2 $3 \"$4\", got: ${r:-no row $2}"; fi
}

# ---- a fake node: 2 GPUs and 1 NVSwitch on the PCI bus, the driver, Fabric
# Manager running, nvidia-peermem loaded, one InfiniBand port up
root="$tmp/root"
pcidev() { # BDF CLASS
  mkdir -p "$root/sys/bus/pci/devices/$1"
  echo 0x10de > "$root/sys/bus/pci/devices/$1/vendor"; echo "$2" > "$root/sys/bus/pci/devices/$1/class"
}
pcidev 0000:18:00.0 0x030200; pcidev 0000:28:00.0 0x030200; pcidev 0000:c0:00.0 0x068000
mkdir -p "$root/sys/bus/pci/devices/0000:00:1f.0"; echo 0x8086 > "$root/sys/bus/pci/devices/0000:00:1f.0/vendor"
echo 0x060100 > "$root/sys/bus/pci/devices/0000:00:1f.0/class"
mkdir -p "$root/proc/driver/nvidia" "$root/proc/1" "$root/proc/4242" "$root/sys/module/nvidia_peermem"
printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  555.42.06  Thu Jun 20 00:00:00 UTC 2024\nGCC version: gcc 12\n' \
  > "$root/proc/driver/nvidia/version"
echo systemd > "$root/proc/1/comm"; echo nv-fabricmanage > "$root/proc/4242/comm"
ib="$tmp/ib"; mkdir -p "$ib/mlx5_0/ports/1/counters"
echo "4: ACTIVE" > "$ib/mlx5_0/ports/1/state"; echo 0 > "$ib/mlx5_0/ports/1/counters/symbol_error"
printf 'gpus 2\n' > "$tmp/healthy.conf"
export GH_NVML_FAKE_CONFIG="$tmp/healthy.conf"
base=(--node n1 --nvml-lib "$fake" --dcgm off --kmsg off --telemetry-socket off
      --ib-sysfs-root "$ib" --spool-dir "$tmp/spool" --check-root "$root")

out=$("$agent" --check "${base[@]}" 2>"$tmp/err"); rc=$?
echo "$out"
[ $rc = 0 ] && ok "a healthy fake node: exit 0" || bad "healthy node: rc=$rc $(cat "$tmp/err")"
head -1 <<<"$out" | grep -q '^CHECK  *STATUS  *DETAIL' && ok "table header" || bad "no header: $(head -1 <<<"$out")"
expect "$out" pci ok "2 GPU(s), 1 NVSwitch(es)" "PCI bus counted (the Intel device ignored)"
expect "$out" driver ok "Kernel Module 555.42.06" "the driver's version line"
expect "$out" nvml ok "2 GPU(s)" "NVML sees the fake's GPUs"
expect "$out" nvml/gpu0 ok "ECC DBE 0 (volatile)" "a healthy GPU's counters"
expect "$out" fabricmanager ok "running (pid 4242) for 1 NVSwitch" "Fabric Manager found in /proc/*/comm"
expect "$out" peermem ok "nvidia_peermem loaded" "nvidia-peermem loaded"
expect "$out" nic/mlx5_0:1 ok "4: ACTIVE" "the InfiniBand port"
expect "$out" gpu-count absent "not compared: no API access" "no API access: said, not guessed"
expect "$out" kubernetes absent "KUBERNETES_SERVICE_HOST is not set" "why there is no API access"

# ---- faults: a volatile DBE, a pending remap, a lost GPU; 3 GPUs on the bus
printf 'gpus 3\n0 ecc.dbe.volatile 2\n1 remap.pending 1\n2 lost 1\n' > "$tmp/faulty.conf"
pcidev 0000:38:00.0 0x030200
out=$(GH_NVML_FAKE_CONFIG="$tmp/faulty.conf" "$agent" --check "${base[@]}" 2>"$tmp/err"); rc=$?
echo "$out"
[ $rc = 1 ] && ok "GPU faults: exit 1" || bad "GPU faults: rc=$rc"
expect "$out" nvml ok "3 GPU(s)" "NVML's GPU count"
expect "$out" nvml/gpu0 fail "ECC DBE 2 (volatile)" "a volatile double-bit ECC count fails the GPU"
expect "$out" nvml/gpu1 warn "PENDING (reset the GPU to apply)" "a pending row remap warns"
expect "$out" nvml/gpu2 fail "LOST" "a lost GPU fails"
expect "$out" gpu-count absent "NVML sees 3 GPU(s); PCI bus: 3" "counts agree with the bus"

# ---- a driver call that hangs: bounded by the NVML source's 2 s deadline
printf 'gpus 2\n1 hang.nvmlDeviceGetTotalEccErrors 30\n' > "$tmp/hang.conf"
t0=$(date +%s%N)
out=$(GH_NVML_FAKE_CONFIG="$tmp/hang.conf" "$agent" --check "${base[@]}" 2>"$tmp/err"); rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "$out"
echo "# --check with an NVML call hung for 30 s took $ms ms (NVML deadline 2 s per job)"
expect "$out" nvml fail "did not return within 2.0 s" "a hung NVML call fails the nvml check"
expect "$out" nvml/gpu1 fail "LOST" "the GPU whose call hung"
[ $rc = 1 ] && [ "$ms" -lt 15000 ] && ok "a hung NVML call: exit 1 in $ms ms (< 15 s bound)" || bad "hung NVML: rc=$rc $ms ms"

# ---- missing pieces: GPUs on the bus but no driver; NVSwitch without
# Fabric Manager; InfiniBand without nvidia-peermem; NVML sees fewer GPUs
rm -rf "$root/proc/4242" "$root/sys/module/nvidia_peermem"
out=$("$agent" --check "${base[@]}" 2>"$tmp/err"); rc=$?
echo "$out"
[ $rc = 1 ] && ok "missing pieces: exit 1" || bad "missing pieces: rc=$rc"
expect "$out" fabricmanager fail "not running: no nv-fabricmanager process" "Fabric Manager missing with an NVSwitch"
expect "$out" peermem warn "InfiniBand/RoCE port(s) are present" "nvidia-peermem missing with InfiniBand"
expect "$out" gpu-count fail "NVML sees 2 GPU(s) but 3 are on the PCI bus" "a GPU NVML does not see"
rm -rf "$root/proc/driver"
out=$("$agent" --check "${base[@]}" 2>"$tmp/err"); rc=$?
expect "$out" driver fail "not loaded" "no driver with NVIDIA GPUs on the bus"
rm -rf "$root/sys/bus/pci/devices/0000:c0:00.0"
out=$("$agent" --check "${base[@]}" 2>"$tmp/err"); rc=$?
expect "$out" fabricmanager ok "not needed: no NVSwitch" "no NVSwitch: Fabric Manager not needed"

# ---- a node without any GPU (as this machine): says what it lacks, exit 0
mkdir -p "$tmp/empty"
out=$("$agent" --check --node n2 --nvml-lib libnvidia-ml-absent.so.1 --dcgm off --kmsg off \
      --telemetry-socket off --ib-sysfs-root "$tmp/noib" --spool-dir "$tmp/spool2" \
      --check-root "$tmp/empty" 2>"$tmp/err"); rc=$?
echo "$out"
[ $rc = 0 ] && ok "no GPU at all: exit 0" || bad "no GPU: rc=$rc"
expect "$out" nvml absent "libnvidia-ml-absent.so.1 not found (dlopen:" "NVML library missing, with dlopen's reason"
grep -F nvml <<<"$out" | grep -qF "GPU polling disabled" && ok "says GPU polling is disabled" || bad "no 'GPU polling disabled'"
expect "$out" driver absent "not loaded" "no driver"
expect "$out" nic absent "no InfiniBand/RoCE adapter" "no InfiniBand"
expect "$out" spool warn "does not exist" "no spool yet"

# ---- beside a running agent: spool pending records, the kernel-log
# position, the telemetry socket
spool="$tmp/spool3"; mkdir -p "$spool"
for i in 1 2 3; do
  printf '{"ts":"2026-12-07T07:00:0%d.000000Z","node":"n3","gpu":1,"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid 79 test %d"}\n' $i $i
done > "$tmp/inject.jsonl"
echo "11111111-2222-3333-4444-555555555555" > "$tmp/boot_id"
printf '6,1,1000,-;first\n6,2,2000,-;second\n' > "$tmp/kmsg"
printf 'gpuheal-kmsg-state v1\nboot_id 11111111-2222-3333-4444-555555555555\nseq 42\n' > "$spool/kmsg.state"
run3=(--node n3 --nvml-lib off --dcgm off --kmsg "$tmp/kmsg" --boot-id-file "$tmp/boot_id"
      --telemetry-socket "$tmp/tele.sock" --ib-sysfs-root off --spool-dir "$spool" --listen off)
"$agent" "${run3[@]}" --inject "$tmp/inject.jsonl" --log-level warn 2>"$tmp/agent.log" &
pids+=($!)
pending() { "$agent" --check "${run3[@]}" --check-root "$tmp/empty" | grep -q '^spool .* 3 pending record'; }
wait_for 60 pending && ok "spool: 3 pending records counted beside the running agent" \
  || bad "spool pending: $("$agent" --check "${run3[@]}" --check-root "$tmp/empty" | grep spool) log: $(cat "$tmp/agent.log")"
out=$("$agent" --check "${run3[@]}" --check-root "$tmp/empty" 2>"$tmp/err"); rc=$?
echo "$out"
expect "$out" telemetry ok "an agent is listening" "the running agent's telemetry socket"
expect "$out" kmsg ok "readable; position: record" "the kernel log readable, its persisted position"
expect "$out" nvml absent "--nvml-lib off" "NVML off said"
kill -TERM "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null
out=$("$agent" --check "${run3[@]}" --check-root "$tmp/empty" 2>"$tmp/err")
expect "$out" telemetry warn "no socket at" "no telemetry socket after the agent stopped (it removes it)"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$tmp/tele.sock"
out=$("$agent" --check "${run3[@]}" --check-root "$tmp/empty" 2>"$tmp/err")
expect "$out" telemetry warn "nothing listening" "a stale telemetry socket (nothing listening)"
echo "22222222-2222-3333-4444-555555555555" > "$tmp/boot_id"
printf 'gpuheal-kmsg-state v1\nboot_id 11111111-2222-3333-4444-555555555555\nseq 42\n' > "$spool/kmsg.state"
out=$("$agent" --check "${run3[@]}" --check-root "$tmp/empty" 2>"$tmp/err")
expect "$out" kmsg ok "record 42 of an earlier boot" "a position of an earlier boot"

# ---- a controller that accepts and never answers: bounded by its timeout
python3 - "$tmp/hang.port" <<'EOF' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
conns = []
while True:
    c, _ = s.accept(); conns.append(c)   # never answers
EOF
pids+=($!)
wait_for 20 test -s "$tmp/hang.port" || bad "hung server did not start"
echo tok > "$tmp/token"
t0=$(date +%s%N)
out=$("$agent" --check "${base[@]}" --controller "http://127.0.0.1:$(cat "$tmp/hang.port")" \
      --token-file "$tmp/token" 2>"$tmp/err"); rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "$out"
echo "# --check with a hung controller URL took $ms ms (controller timeout 2 s)"
expect "$out" controller warn "timed out" "a hung controller: warn with the error"
[ "$ms" -lt 15000 ] && ok "the whole check finished in $ms ms (< 15 s bound)" || bad "took $ms ms"

# ---- a dcgm-exporter that answers, and one that is not there
mkdir -p "$tmp/www"
printf '# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} 45\nDCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-b"} 47\n' > "$tmp/www/metrics"
(cd "$tmp/www" && exec python3 -m http.server --bind 127.0.0.1 0 > "$tmp/www.log" 2>&1) &
pids+=($!)
wait_for 20 grep -q 'port [0-9]' "$tmp/www.log" || bad "http.server did not start"
wport=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$tmp/www.log" | head -1)
out=$("$agent" --check "${base[@]}" --dcgm-exporter "http://127.0.0.1:$wport/metrics" 2>"$tmp/err")
expect "$out" dcgm-exporter ok "answers: 2 samples" "a dcgm-exporter that answers"
out=$("$agent" --check "${base[@]}" --dcgm-exporter "http://127.0.0.1:$wport/nothing" 2>"$tmp/err")
expect "$out" dcgm-exporter warn "404" "a dcgm-exporter URL that is not there"
echo ok > "$tmp/www/healthz"
out=$("$agent" --check "${base[@]}" --controller "http://127.0.0.1:$wport/" --token-file "$tmp/token" 2>"$tmp/err")
expect "$out" controller ok "healthz: HTTP 200 in" "a controller that answers /healthz"
out=$("$agent" --check "${base[@]}" --controller "http://127.0.0.1:$wport" --token-file "$tmp/no-token" 2>"$tmp/err")
expect "$out" controller warn "token file $tmp/no-token not readable" "an unreadable token file"

# ---- --json: one object with the same facts
out=$(GH_NVML_FAKE_CONFIG="$tmp/faulty.conf" "$agent" --check --json "${base[@]}" 2>"$tmp/err"); rc=$?
[ $rc = 1 ] && ok "--json: exit 1 as the table" || bad "--json rc=$rc"
if python3 - <<EOF
import json, sys
d = json.loads('''$out''')
want = {"ok", "warn", "fail", "absent"}
checks = {c["check"]: c for c in d["checks"]}
assert d["node"] == "n1" and d["status"] == "fail", d["status"]
assert all(c["status"] in want and c["detail"] for c in d["checks"])
assert checks["nvml/gpu0"]["status"] == "fail" and checks["nvml/gpu2"]["status"] == "fail"
g = {x["index"]: x for x in d["gpus"]}
assert len(g) == 3, g
assert g[0]["ecc"]["dbe_volatile"] == 2, g[0]
assert g[1]["remap"]["pending"] is True, g[1]
assert g[2]["lost"] is True, g[2]
assert d["gpu_counts"] == {"nvml": 3, "pci": 3, "nvswitch": 0, "node_advertised": None}, d["gpu_counts"]
assert d["counts"]["fail"] == sum(1 for c in d["checks"] if c["status"] == "fail")
assert isinstance(d["elapsed_ms"], int)
print("json ok:", len(d["checks"]), "checks,", d["counts"])
EOF
then ok "--json parses and holds the GPUs' counters, statuses and counts"
else bad "--json: $out"; fi

# ---- usage errors: exit 2 with a message
out=$("$agent" --check --check-root relative/path 2>&1); rc=$?
[ $rc = 2 ] && grep -q 'check-root needs an absolute PATH' <<<"$out" && ok "bad --check-root: exit 2 ($out)" || bad "bad --check-root: rc=$rc $out"
out=$("$agent" --check --no-such-option 1 2>&1); rc=$?
[ $rc = 2 ] && grep -q 'unknown option "--no-such-option"' <<<"$out" && ok "unknown option: exit 2 ($out)" || bad "unknown option: rc=$rc $out"
"$agent" --help | grep -q -- '--check \[--json\]' && ok "--help documents --check" || bad "--help lacks --check"

echo "passed $pass, failed $fail"
[ $fail = 0 ]
