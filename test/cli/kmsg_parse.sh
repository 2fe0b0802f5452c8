#!/usr/bin/env bash
# gpuheal kmsg-parse end to end: the labelled samples and our two extra
# corpora (one built from the formats, one of real lines) come back with
# exactly their labels and one xid signal per MATCH xid line; signals are
# spec JSON lines with the line's own time; lines with invalid UTF-8, NULs,
# CRLF or 20 000 bytes still give valid signals; zone-less stamps follow
# --utc-offset/--year; a line that looks like an Xid but does not parse is
# reported with its reason; bad usage exits 2 with a message. Then the
# command as an outside harness runs it (no trailing newline, CRLF, BOM,
# tabs, 1 MiB lines, binary garbage, empty file, directory, two files, a
# pipe into head, an unwritable output) and every signal of the four corpora
# against spec section 1.
set -uo pipefail
gh="$GH_BIN/gpuheal"
src="$GH_SOURCE_DIR"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }

for corpus in "$src/test/data/shared/data/kmsg-samples.txt" "$src/test/data/kmsg-extra.txt" \
              "$src/test/data/kmsg-corpus-extra.txt" "$src/test/data/kmsg-corpus-extra2.txt"; do
  [ -f "$corpus" ] || { bad "corpus $corpus missing"; continue; }
  grep -v '^#' "$corpus" > "$tmp/corpus"; corpus_name=$(basename "$corpus"); corpus="$tmp/corpus"
  cut -f2- "$corpus" > "$tmp/raw"
  "$gh" kmsg-parse --node n1 --labels "$tmp/raw" > "$tmp/labelled" 2> "$tmp/err"
  if diff <(cut -f1 "$corpus") <(cut -f1 "$tmp/labelled") > "$tmp/diff"; then
    ok "labels of $corpus_name: $(wc -l < "$corpus") lines, 100% match"
  else
    bad "labels of $corpus_name differ:"; head -20 "$tmp/diff"
  fi
  # Every MATCH that emits a signal must encode to a valid spec line (the
  # encoder validates what it writes): signal mode has to succeed.
  if "$gh" kmsg-parse --node n1 "$tmp/raw" > "$tmp/signals" 2> "$tmp/err"; then
    ok "signals of $corpus_name: $(wc -l < "$tmp/signals") lines, all encodable"
  else
    bad "signal mode failed on $corpus_name: $(cat "$tmp/err")"
  fi
  if diff <(cut -f2- "$corpus") <(cut -f2- "$tmp/labelled") > /dev/null; then
    ok "--labels echoes every line of $corpus_name unchanged"
  else
    bad "--labels changed or lost lines of $corpus_name"
  fi
  # One xid signal per MATCH xid line, each with its code (Xid lines never
  # fold); the per-line, per-field scoring is the unit test test_kmsg_corpus.
  want=$(grep -o '^MATCH xid=[0-9]*' "$corpus" | sed 's/.*=//' | sort -n | tr '\n' ' ')
  got=$(grep -o '"kind":"xid","code":[0-9]*' "$tmp/signals" | sed 's/.*://' | sort -n | tr '\n' ' ')
  if [ -n "$want" ] && [ "$want" = "$got" ]; then
    ok "xid signals of $corpus_name: one per MATCH xid line, same codes"
  elif [ -z "$want" ]; then
    :
  else
    bad "xid signals of $corpus_name: want codes [$want] got [$got]"
  fi
done

# The real corpus: every wall-clock stamp of a decode/ISO wrapper is the
# signal's ts (dmesg --decode --time-format iso: "kern  :warn  : 2025-...").
grep -v '^#' "$src/test/data/kmsg-corpus-extra.txt" | cut -f2- > "$tmp/real"
"$gh" kmsg-parse --node n1 "$tmp/real" > "$tmp/real.jsonl" 2> "$tmp/err"
if grep -q '"ts":"2025-01-21T04:41:44.283302Z".*"code":13' "$tmp/real.jsonl" &&
   grep -q '"ts":"2025-01-25T10:34:54.859532Z".*"code":12028' "$tmp/real.jsonl"; then
  ok "decode/ISO wrappers: ts is the line's own stamp"
else
  bad "decode/ISO wrapper stamps not used:"; grep -m3 '"code":13' "$tmp/real.jsonl"
fi

# Lines that are not clean text: invalid UTF-8 and a NUL inside a process
# name, CRLF, a 20 000-byte line. Every signal comes out (valid JSON, bad
# bytes as U+FFFD), the run succeeds, --labels echoes the bytes unchanged.
printf 'NVRM: Xid (PCI:0000:01:00): 13, pid=7, name=a\xff\xfeb, Graphics Exception\r\n' > "$tmp/dirty"
printf 'NVRM: Xid (PCI:0000:02:00): 43, pid=8, name=x\000y, Ch 00000008\n' >> "$tmp/dirty"
{ printf '[ 1.5] NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=a, '; head -c 20000 /dev/zero | tr '\0' A; printf '\n'; } >> "$tmp/dirty"
printf 'NVRM: Xid (PCI:0000:04:00): 79, GPU has fallen off the bus.\n' >> "$tmp/dirty"
if "$gh" kmsg-parse --node n "$tmp/dirty" > "$tmp/dirty.jsonl" 2> "$tmp/err" &&
   [ "$(grep -c '"kind":"xid"' "$tmp/dirty.jsonl")" -eq 4 ] &&
   grep -qF "$(printf '"process":"a\xef\xbf\xbd\xef\xbf\xbdb"')" "$tmp/dirty.jsonl" &&
   grep -q "$(printf '"code":43.*"process":"x\xef\xbf\xbdy".*Ch 00000008')" "$tmp/dirty.jsonl"; then
  ok "invalid UTF-8, NUL, CRLF and a 20 000-byte line: 4 signals, valid JSON"
else
  bad "unclean lines: rc or output wrong:"; cat "$tmp/err"; cut -c1-160 "$tmp/dirty.jsonl"
fi
"$gh" kmsg-parse --node n --labels "$tmp/dirty" > "$tmp/dirty.lab"
if cmp -s <(head -n2 "$tmp/dirty" | tr -d '\r') <(head -n2 "$tmp/dirty.lab" | cut -f2-); then
  ok "--labels echoes lines with NUL and invalid UTF-8 byte for byte"
else
  bad "--labels altered lines with NUL / invalid UTF-8"
fi

# Zone-less stamps: --utc-offset and --year.
printf '%s\n' 'Nov 29 11:28:11 zeus kernel: NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.' \
  '[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.' \
  '2025-02-23T16:24:18.5+0100 host kernel: NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.' > "$tmp/tz"
"$gh" kmsg-parse --node n --utc-offset +01:00 --year 2024 "$tmp/tz" > "$tmp/tz.jsonl"
if [ "$(grep -o '"ts":"[^"]*"' "$tmp/tz.jsonl" | tr '\n' ' ')" = \
     '"ts":"2024-11-29T10:28:11.000000Z" "ts":"2025-02-23T15:24:18.000000Z" "ts":"2025-02-23T15:24:18.500000Z" ' ]; then
  ok "--utc-offset applies to zone-less stamps only, --year to syslog stamps"
else
  bad "zone handling:"; cat "$tmp/tz.jsonl"
fi
"$gh" kmsg-parse --utc-offset 5 x 2> "$tmp/u.err"; rc=$?
if [ $rc -eq 2 ] && grep -q 'not +HH:MM' "$tmp/u.err"; then ok "bad --utc-offset: exit 2 with reason"; else bad "bad --utc-offset: rc=$rc"; fi

# Signals: one JSON object per line, spec fields, node from --node.
printf '%s\n' \
  '[Sun Feb 23 16:24:18 2025] NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d' \
  '[Sun Feb 23 16:24:19 2025] NVRM: Xid (PCI:0000:9b:00): 79, pid=12, name=python3, GPU has fallen off the bus.' \
  'Nov 29 11:28:11 zeus kernel: just noise about Xid values in a filesystem' \
  > "$tmp/one.log"
"$gh" kmsg-parse --node gpu-7 "$tmp/one.log" > "$tmp/one.jsonl" 2> "$tmp/one.err"
want='{"ts":"2025-02-23T16:24:19.000000Z","node":"gpu-7","pci":"0000:9b:00.0","uuid":"GPU-509665ad-b600-ac93-3616-d754b23d636d","source":"kmsg","kind":"xid","code":79,"pid":12,"process":"python3",'
if [ "$(wc -l < "$tmp/one.jsonl")" -eq 1 ] && grep -qF "$want" "$tmp/one.jsonl"; then
  ok "one xid signal with ts, node, pci, uuid (from the PCI map), code, pid, process"
else
  bad "unexpected signals:"; cat "$tmp/one.jsonl"
fi

# A line that claims to be an Xid but does not parse: reported with a reason.
printf 'NVRM: Xid (PCI:0000:01:00): notanumber, pid=1, broken\n' > "$tmp/bad.log"
"$gh" kmsg-parse --node n "$tmp/bad.log" > "$tmp/bad.out" 2> "$tmp/bad.err"
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$tmp/bad.out" ] && grep -q 'did not parse' "$tmp/bad.err" && grep -q 'line 1' "$tmp/bad.err"; then
  ok "malformed Xid line reported on stderr with its line number"
else
  bad "malformed Xid line: rc=$rc"; cat "$tmp/bad.err"
fi

# stdin, and the per-GPU summary.
if "$gh" kmsg-parse --node n --summary - < "$tmp/one.log" | grep -q 'GPU-509665ad'; then
  ok "--summary from stdin names the GPU's UUID"
else
  bad "--summary from stdin"
fi

# Usage errors exit 2 and say what was wrong.
"$gh" kmsg-parse --year abc x 2> "$tmp/u.err"; rc=$?
if [ $rc -eq 2 ] && grep -q 'not a year' "$tmp/u.err"; then ok "bad --year: exit 2 with reason"; else bad "bad --year: rc=$rc"; fi
"$gh" kmsg-parse /nonexistent/file 2> "$tmp/u.err"; rc=$?
if [ $rc -eq 1 ] && grep -q '/nonexistent/file' "$tmp/u.err"; then ok "missing file: exit 1 naming it"; else bad "missing file: rc=$rc"; fi

# ---- the command as an outside harness runs it ---------------------------
X='[ 1108.858286] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.'
XTS='"ts":"2026-11-01T00:18:28.858286Z"'   # --boot-time 2026-11-01T00:00:00Z + 1108.858286 s
printf '%s' "$X" > "$tmp/h.nonl"
printf '%s\r\n' "$X" > "$tmp/h.crlf"
printf '\xef\xbb\xbf%s\n' "$X" > "$tmp/h.bom"
printf '\t%s\n' "$X" > "$tmp/h.tab"
for f in nonl crlf bom tab; do
  "$gh" kmsg-parse --node N --boot-time 2026-11-01T00:00:00Z "$tmp/h.$f" > "$tmp/h.out" 2> "$tmp/h.err"; rc=$?
  if [ $rc -eq 0 ] && [ "$(wc -l < "$tmp/h.out")" -eq 1 ] && grep -qF "$XTS" "$tmp/h.out" &&
     grep -q '"pci":"0000:3b:00.0".*"code":79,"pid":1234,"process":"python3"' "$tmp/h.out" && [ ! -s "$tmp/h.err" ]; then
    ok "file with $f: one signal, ts from its dmesg stamp"
  else
    bad "file with $f: rc=$rc"; cat "$tmp/h.out" "$tmp/h.err"
  fi
done
"$gh" kmsg-parse --node N --boot-time 2026-11-01T00:00:00Z - < "$tmp/h.bom" > "$tmp/h.out"
if grep -qF "$XTS" "$tmp/h.out"; then ok "'-' reads stdin (with a BOM)"; else bad "stdin: $(cat "$tmp/h.out")"; fi
# A 1 MiB line before and one 1 MiB Xid line: both read, the long one cut, run OK.
{ head -c 1048576 /dev/zero | tr '\0' A; printf '\n%s\n' "$X"; printf '%s' "$X"; head -c 1048576 /dev/zero | tr '\0' B; printf '\n'; } > "$tmp/h.long"
"$gh" kmsg-parse --node N "$tmp/h.long" > "$tmp/h.out" 2> "$tmp/h.err"; rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '"code":79' "$tmp/h.out")" -eq 2 ] && [ "$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$tmp/h.out")" -lt 5000 ]; then
  ok "1 MiB lines: both Xids found, msg bounded"
else
  bad "1 MiB lines: rc=$rc"; cut -c1-200 "$tmp/h.out" "$tmp/h.err"
fi
# Binary garbage around one Xid line: the Xid comes out, the run succeeds.
{ head -c 262144 /dev/urandom; printf '\n%s\n' "$X"; head -c 65536 /dev/urandom; } > "$tmp/h.bin"
"$gh" kmsg-parse --node N "$tmp/h.bin" > "$tmp/h.out" 2> "$tmp/h.err"; rc=$?
if [ $rc -eq 0 ] && grep -q '"code":79,"pid":1234' "$tmp/h.out"; then
  ok "binary garbage: run succeeds, the Xid between is found"
else
  bad "binary garbage: rc=$rc"; head -c 300 "$tmp/h.err"
fi
: > "$tmp/h.empty"
"$gh" kmsg-parse --node N "$tmp/h.empty" > "$tmp/h.out" 2> "$tmp/h.err"; rc=$?
if [ $rc -eq 0 ] && [ ! -s "$tmp/h.out" ] && [ ! -s "$tmp/h.err" ]; then ok "empty file: no output, exit 0"; else bad "empty file: rc=$rc"; fi
"$gh" kmsg-parse --node N "$tmp" > /dev/null 2> "$tmp/h.err"; rc=$?
if [ $rc -eq 1 ] && grep -q 'Is a directory' "$tmp/h.err"; then ok "directory: exit 1, 'Is a directory'"; else bad "directory: rc=$rc $(cat "$tmp/h.err")"; fi
"$gh" kmsg-parse --node N "$tmp/h.crlf" "$tmp/h.bom" > /dev/null 2> "$tmp/h.err"; rc=$?
if [ $rc -eq 2 ] && grep -q 'one FILE only' "$tmp/h.err"; then ok "two FILEs: exit 2"; else bad "two FILEs: rc=$rc"; fi
# Piped into head: killed by SIGPIPE, nothing on stderr.
for i in $(seq 1 3000); do printf '[ %d.5] NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=p, Graphics Exception\n' "$i" "$i"; done > "$tmp/h.many"
"$gh" kmsg-parse --node N "$tmp/h.many" 2> "$tmp/h.err" | head -n 1 > /dev/null
if [ ! -s "$tmp/h.err" ]; then ok "piped into head: no error output"; else bad "piped into head: $(head -c 300 "$tmp/h.err")"; fi
"$gh" kmsg-parse --node N "$tmp/h.many" > /dev/full 2> "$tmp/h.err"; rc=$?
if [ $rc -eq 1 ] && [ -s "$tmp/h.err" ]; then ok "output cannot be written: exit 1 with a message"; else bad "/dev/full: rc=$rc"; fi

# Spec section 1 on every signal of every corpus: ts RFC 3339 UTC with
# microseconds, pci as dddd:bb:dd.f, the kinds' fields; pcie/nic/nvlink
# signals carry counter and a count that grows per device and counter.
for c in "$src/test/data/shared/data/kmsg-samples.txt" "$src/test/data/kmsg-extra.txt" \
         "$src/test/data/kmsg-corpus-extra.txt" "$src/test/data/kmsg-corpus-extra2.txt"; do
  grep -v '^#' "$c" | cut -f2-
done > "$tmp/all.raw"
"$gh" kmsg-parse --node gpu-9 --boot-time 2026-11-01T00:00:00Z "$tmp/all.raw" > "$tmp/all.jsonl"
badlines=$(grep -cvE '^\{"ts":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z","node":"gpu-9",("pci":"[0-9a-f]{4,5}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]",)?("uuid":"GPU-[^"]*",)?"source":"kmsg","kind":"(xid|sxid|gpu_lost|pcie|nic|nvlink)",' "$tmp/all.jsonl")
nkinds=$(grep -o '"kind":"[a-z_]*"' "$tmp/all.jsonl" | sort -u | wc -l)
if [ "$badlines" -eq 0 ] && [ "$nkinds" -eq 6 ]; then
  ok "$(wc -l < "$tmp/all.jsonl") signals of 6 kinds: ts with microseconds, pci dddd:bb:dd.f, spec field order"
else
  bad "$badlines signal lines off the spec form ($nkinds kinds):"; grep -vE '"ts":"[^"]*\.[0-9]{6}Z"' "$tmp/all.jsonl" | head -3
fi
missing=$(grep -E '"kind":"(xid|sxid)"' "$tmp/all.jsonl" | grep -cv '"code":[0-9]')
missing=$((missing + $(grep -E '"kind":"(pcie|nic|nvlink)"' "$tmp/all.jsonl" | grep -cvE '"counter":"[a-z_]+","count":[1-9][0-9]*')))
missing=$((missing + $(grep '"kind":"gpu_lost"' "$tmp/all.jsonl" | grep -c '"pci"' | awk '{ print ($1 == 0) }')))
missing=$((missing + $(grep '"kind":"sxid"' "$tmp/all.jsonl" | grep -cv '"switch":"nvidia-nvswitch[0-9]*"')))
if [ "$missing" -eq 0 ]; then
  ok "xid/sxid have code (sxid its switch), pcie/nic/nvlink counter and count, gpu_lost its pci"
else
  bad "$missing signals lack their kind's fields"
fi
printf '%s\n' 'pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)' \
  'pcieport 0000:00:03.1: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)' \
  'pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)' > "$tmp/aer"
if [ "$("$gh" kmsg-parse --node n "$tmp/aer" | sed -E 's/.*"pci":"([^"]*)".*"counter":"aer_fatal","count":([0-9]+).*/\1=\2/' | tr '\n' ' ')" = \
     '0000:00:03.0=1 0000:00:03.1=1 0000:00:03.0=2 ' ]; then
  ok "AER count is cumulative per device"
else
  bad "AER count: $("$gh" kmsg-parse --node n "$tmp/aer")"
fi

# Issue 26: dmesg's since-boot stamps without --boot-time cannot be placed:
# each line gets the read time, and stderr says so (it used to be silent).
printf '[5123.001122] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n[6123.001122] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, DBE\n' > "$tmp/dm"
"$gh" kmsg-parse --node n "$tmp/dm" > "$tmp/dm.out" 2> "$tmp/dm.err"
if [ "$(wc -l < "$tmp/dm.out")" = 2 ] && grep -q 'warning: 2 event(s) carry only a since-boot stamp' "$tmp/dm.err" \
   && grep -q -- '--boot-time' "$tmp/dm.err"; then
  ok "since-boot stamps without --boot-time: a warning naming the 2 events and --boot-time"
else
  bad "since-boot stamps without --boot-time: stderr [$(cat "$tmp/dm.err")]"
fi
"$gh" kmsg-parse --node n --boot-time 2026-11-01T00:00:00Z "$tmp/dm" > "$tmp/dm.out" 2> "$tmp/dm.err"
if [ ! -s "$tmp/dm.err" ] && grep -q '"ts":"2026-11-01T01:25:23.001122Z"' "$tmp/dm.out"; then
  ok "with --boot-time: placed (boot + 5123.001122 s), no warning"
else
  bad "with --boot-time: stderr [$(cat "$tmp/dm.err")], $(head -c 200 "$tmp/dm.out")"
fi

echo "kmsg_parse: $pass passed, $fail failed"
[ $fail -eq 0 ]
