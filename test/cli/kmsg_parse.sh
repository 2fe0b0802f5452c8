#!/usr/bin/env bash
# gpuheal kmsg-parse end to end: the labelled samples (and our extra corpus)
# come back with exactly their labels; signals are spec JSON lines; a line
# that looks like an Xid but does not parse is reported with its reason;
# bad usage exits 2 with a message.
set -uo pipefail
gh="$GH_BIN/gpuheal"
src="$GH_SOURCE_DIR"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }

for corpus in "$src/test/data/shared/data/kmsg-samples.txt" "$src/test/data/kmsg-extra.txt"; do
  [ -f "$corpus" ] || continue
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
done

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
