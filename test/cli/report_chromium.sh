#!/usr/bin/env bash
# report_chromium.sh - `gpuheal report --html` opened in headless Chromium
# (Debian's chromium package): the page parses and renders, the key elements
# are in the DOM the browser built (timeline SVG, step chart with the
# straggler's series highlighted, the incidents table naming the blamed
# node, evidence with its raw line), a <script> in a kernel line stays text,
# and a screenshot comes out as a 1400x1000 PNG.
# Without chromium this fails, unless GH_ALLOW_SKIP=1 (then it prints SKIP).
# GH_REPORT_KEEP=DIR keeps the pages and screenshots there.
set -euo pipefail
bin=${GH_BIN:?GH_BIN is the directory of the built binaries}/gpuheal
src=${GH_SOURCE_DIR:?GH_SOURCE_DIR is the source tree}
scn=$src/test/scenarios
fail() { echo "FAIL: $*" >&2; exit 1; }

chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
  if [ "${GH_ALLOW_SKIP:-0}" = 1 ]; then
    echo "SKIP: chromium is not installed (apt-get install --no-install-recommends chromium)"
    exit 0
  fi
  fail "chromium is not installed (apt-get install --no-install-recommends chromium; or GH_ALLOW_SKIP=1)"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${GH_REPORT_KEEP:-$tmp}
mkdir -p "$out"

# chromium ARGS...: one headless run with a profile of its own, bounded.
chrome_run() {
  local profile
  profile=$(mktemp -d "$tmp/profile.XXXXXX")
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" "$@" 2> "$tmp/chrome.err" ||
    { tail -n 20 "$tmp/chrome.err" >&2; return 1; }
}

# dom NAME: the DOM Chromium built from $out/NAME.html, into $tmp/NAME.dom.
dom() {
  chrome_run --dump-dom "file://$out/$1.html" > "$tmp/$1.dom" || fail "$1: chromium --dump-dom failed"
  [ -s "$tmp/$1.dom" ] || fail "$1: empty DOM"
}

# has NAME TEXT...: each TEXT (fixed string) is in NAME's DOM.
has() {
  local name=$1
  shift
  for t in "$@"; do
    grep -qF -- "$t" "$tmp/$name.dom" || fail "$name: DOM lacks: $t"
  done
}

# png NAME: a 1400x1000 screenshot of $out/NAME.html, checked.
png() {
  local f=$out/$1.png
  rm -f "$f"
  chrome_run --hide-scrollbars --window-size=1400,1000 --screenshot="$f" "file://$out/$1.html" > /dev/null ||
    fail "$1: chromium --screenshot failed"
  [ -s "$f" ] || fail "$1: no screenshot"
  [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$1: not a PNG"
  # IHDR: width and height, big-endian, at bytes 16..23
  local wh
  wh=$(od -An -tu1 -j16 -N8 "$f" | awk '{print ($1*16777216+$2*65536+$3*256+$4) "x" ($5*16777216+$6*65536+$7*256+$8)}')
  [ "$wh" = 1400x1000 ] || fail "$1: screenshot is $wh, not 1400x1000"
  # a blank page compresses to almost nothing
  [ "$(wc -c < "$f")" -gt 30000 ] || fail "$1: screenshot looks empty ($(wc -c < "$f") bytes)"
}

# 1. A straggler: the step chart shows it, the incidents table blames gpu-02.
"$bin" report --html "$out/straggler.html" --scenario "$scn/straggler-one-node.jsonl" > /dev/null
dom straggler
has straggler '<svg id="timeline" class="timeline"' '<svg id="steps-0" class="step-chart" data-job="ml/llm"' \
  '<table id="incidents-table">' '<td class="node blamed">gpu-02</td>' \
  '<polyline class="series blamed" data-node="gpu-02"' 'straggler-evict' \
  '<table class="evidence">' 'id="decisions-table"'
[ "$(grep -o '<polyline class="series' "$tmp/straggler.dom" | wc -l)" -eq 16 ] ||
  fail "straggler: expected 16 rank series"
png straggler

# 2. XID 79: the kernel-log lane of GPU 5 on gpu-03, its raw line as evidence.
"$bin" report --html "$out/xid79.html" --scenario "$scn/xid79-fell-off-bus.jsonl" > /dev/null
dom xid79
has xid79 '<svg id="timeline" class="timeline"' '<td class="node blamed">gpu-03</td>' \
  'data-source="kmsg" data-node="gpu-03" data-gpu="5"' 'gpu-fell-off-bus' \
  'NVRM: Xid (PCI:0000:bd:00): 79, pid=1234, GPU has fallen off the bus.' 'id="no-steps"'
png xid79

# 3. A job subject: the straggler's job alone.
"$bin" report --html "$out/job.html" --scenario "$scn/straggler-one-node.jsonl" job/ml/llm > /dev/null
dom job
has job 'job ml/llm' '<td class="node blamed">gpu-02</td>' 'class="step-chart"'

# 4. Hostile input: markup in a kernel line, a node and a job name is text;
#    the browser builds no script element and no <b> from it.
cat > "$tmp/hostile.jsonl" <<'JSONL'
{"scenario":"hostile","nodes":["gpu-01","gpu-<b>x"],"gpus_per_node":8,"jobs":[{"name":"ml/<i>job","nodes":["gpu-01","gpu-<b>x"],"ranks_per_node":1}]}
{"ts":"2026-11-29T07:00:10Z","node":"gpu-<b>x","gpu":2,"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid 79 <script>document.title='pwned'</script><img src=x onerror=alert(1)>"}
{"ts":"2026-11-29T07:00:11Z","node":"gpu-01","source":"kube","kind":"pod_failed","namespace":"ml","pod":"w-0","job":"ml/<i>job","reason":"Error","exit_code":1,"msg":"</title></svg><script>alert(2)</script>"}
JSONL
"$bin" report --html "$out/hostile.html" --scenario "$tmp/hostile.jsonl" > /dev/null
dom hostile
grep -qi '<script' "$tmp/hostile.dom" && fail "hostile: the browser built a <script> element"
grep -qi '<img' "$tmp/hostile.dom" && fail "hostile: the browser built an <img> element"
grep -q '<b>x' "$tmp/hostile.dom" && fail "hostile: a node name became markup"
grep -q 'pwned' "$tmp/hostile.dom" || fail "hostile: the kernel line is missing"
has hostile '&lt;script&gt;document.title' '<td class="node blamed">gpu-&lt;b&gt;x</td>' \
  '&lt;/title&gt;&lt;/svg&gt;&lt;script&gt;alert(2)'
grep -q '<title>gpuheal report</title>' "$tmp/hostile.dom" || fail "hostile: the page title changed"

echo "report_chromium: ok ($("$chrome" --version 2>/dev/null | head -n 1))"
