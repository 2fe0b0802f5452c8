#!/usr/bin/env bash
# gpuheal kmsg-parse end to end: the labelled samples and our two extra
# corpora (one built from the formats, one of real lines) come back with
# exactly their labels and one xid signal per MATCH xid line; signals are
# spec JSON lines with the line's own time; lines with invalid UTF-8, NULs,
# CRLF or 20 000 bytes still give valid signals; zone-less stamps follow
# --utc-offset/--year; a line that looks like an Xid but does not parse is
# reported with its reason; bad usage exits 2 with a message.
set -uo pipefail
gh="$GH_BIN/gpuheal"
src="$GH_SOURCE_DIR"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }

for corpus in "$src/test/data/shared/data/kmsg-samples.txt" "$src/test/data/kmsg-extra.txt" \
              "$src/test/data/kmsg-corpus-extra.txt"; do
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

echo "kmsg_parse: $pass passed, $fail failed"
[ $fail -eq 0 ]
