#!/usr/bin/env bash
# advise.sh - `gpuheal advise checkpoint --job NS/NAME --db URL` end to end on
# a SQLite audit store: a job the store does not know, too few interruptions
# (exit 1, saying what to do), the MTBF estimated over the first-to-last
# evidence window and over a --since window (text and --json), and the
# usage errors. The store's schema is made by gpuheal itself; the incident
# rows are written with Python's sqlite3 (no gpuheal command writes
# incidents; test/unit/test_audit_history.c fills a store through the API).
set -euo pipefail
gh=${GH_BIN:?GH_BIN is the directory of the built binaries}/gpuheal
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_rc N CMD...: CMD exits with N (stdout in $tmp/out, stderr in $tmp/err).
expect_rc() {
  local want=$1 rc=0
  shift
  "$@" > "$tmp/out" 2> "$tmp/err" || rc=$?
  [ "$rc" -eq "$want" ] || { cat "$tmp/out" "$tmp/err" >&2; fail "exit $rc, not $want: $*"; }
}

db=$tmp/audit.db
url=sqlite:$db
T0=1795935600000000000 # 2026-11-29T07:00:00Z
H=3600000000000

# An empty file: gpuheal makes the schema; the store knows no job.
python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA user_version=0')" "$db"
expect_rc 1 "$gh" advise checkpoint --job ml/llm --db "$url" --stall 60
grep -q 'no record of job ml/llm' "$tmp/err" || fail "unknown job: $(cat "$tmp/err")"

# add ID CLASS T ACTIONS JOB: an incident row.
add() {
  python3 - "$db" "$@" <<'PY'
import sqlite3, sys
db, iid, cls, t, actions, job = sys.argv[1:7]
c = sqlite3.connect(db)
c.execute("INSERT INTO incidents (id, class, node, job, first_ns, decided_ns, recorded_ns,"
          " actions, mode, phase, json) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
          (iid, cls, "gpu-01", job, int(t), int(t) + 250000000, int(t), actions, "act", "Done", "{}"))
c.commit()
PY
}

# One interruption: too few, exit 1, says what to do.
add inc-1 gpu_hardware $T0 isolate_node,restart_from_checkpoint ml/llm
expect_rc 1 "$gh" advise checkpoint --job ml/llm --db "$url" --stall 60
grep -q '1 interruption in' "$tmp/err" || fail "one interruption: $(cat "$tmp/err")"
grep -q 'too few to estimate an MTBF (at least 2 are needed)' "$tmp/err" || fail "too few: $(cat "$tmp/err")"
grep -q -- '--mtbf' "$tmp/err" || fail "too few: no advice"

# Three interruptions of ml/llm over 10 h (to the last decision, 0.25 s
# later); an incident that does not restart the job and one of another job
# do not count.
add inc-2 nccl_timeout $((T0 + 4 * H)) retry_in_place ml/llm
add inc-3 straggler $((T0 + 6 * H)) isolate_node ml/llm
add inc-4 gpu_hardware $((T0 + 10 * H)) isolate_node,restart_from_checkpoint,reboot_node ml/llm
add inc-5 gpu_hardware $((T0 + 30 * H)) restart_from_checkpoint ml/other
expect_rc 0 "$gh" advise checkpoint --job ml/llm --db "$url" --stall 60 --restart 10m
out=$(cat "$tmp/out")
grep -q 'job ml/llm: 3 interruptions in 10.00 h of evidence, 2026-11-29T07:00:00' <<< "$out" ||
  fail "history line: $out"
grep -q 'first evidence to last' <<< "$out" || fail "window not said: $out"
grep -q 'inc-2' <<< "$out" || fail "interruptions not listed: $out"
grep -q 'inc-3' <<< "$out" && fail "a non-restarting incident was counted: $out"
grep -q 'MTBF estimate = window / interruptions = 12000 s (3.33 h)' <<< "$out" || fail "MTBF: $out"
grep -q 'given with --stall' <<< "$out" || fail "stall origin not said: $out"
# Young: sqrt(2 * 60 * 12000) = 1200 s
grep -q '= 1200 s (20.0 min)' <<< "$out" || fail "Young: $out"
grep -q "at Daly's tau 0\.[0-9]" <<< "$out" || fail "ETTR: $out"

expect_rc 0 "$gh" advise checkpoint --job ml/llm --db "$url" --stall 60 --json
python3 - "$tmp/out" <<'PY' || fail "--json: $(cat "$tmp/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert abs(d["mtbf_s"] - 12000) < 1, d
assert abs(d["young_s"] - 1200) < 1, d
assert d["mtbf_from"] == "audit_store" and d["stall_from"] == "given", d
h = d["history"]
assert h["job"] == "ml/llm" and h["interruptions"] == 3, h
assert h["window_from"] == "first_evidence" and abs(h["window_s"] - 36000) < 1, h
assert [x["id"] for x in h["listed"]] == ["inc-1", "inc-2", "inc-4"], h
assert h["listed"][1]["class"] == "nccl_timeout", h
PY

# --since: from 08:00 to the last evidence (17:00): 9 h, 2 interruptions.
expect_rc 0 "$gh" advise checkpoint --job ml/llm --db "$url" --stall 60 --since 2026-11-29T08:00:00Z --json
python3 - "$tmp/out" <<'PY' || fail "--since: $(cat "$tmp/out")"
import json, sys
d = json.load(open(sys.argv[1]))
h = d["history"]
assert h["window_from"] == "since" and h["interruptions"] == 2, h
assert abs(d["mtbf_s"] - 16200) < 1, d
PY
# a window with nothing in it
expect_rc 1 "$gh" advise checkpoint --job ml/llm --db "$url" --stall 60 --since 2026-12-01T00:00:00Z
grep -q 'no record of job ml/llm in the --since window' "$tmp/err" || fail "empty window: $(cat "$tmp/err")"

# Usage errors and a missing store.
expect_rc 2 "$gh" advise checkpoint --job ml/llm --db "$url"
grep -q -- '--stall is required with --job' "$tmp/err" || fail "no --stall: $(cat "$tmp/err")"
expect_rc 2 "$gh" advise checkpoint --job ml/llm --stall 60
expect_rc 2 "$gh" advise checkpoint --db "$url" --stall 60
expect_rc 2 "$gh" advise checkpoint --job llm --db "$url" --stall 60
expect_rc 2 "$gh" advise checkpoint --job ml/llm --db "$url" --stall 60 --mtbf 3h
expect_rc 2 "$gh" advise checkpoint --job ml/llm --db "$url" --stall 60 --since yesterday
expect_rc 1 "$gh" advise checkpoint --job ml/llm --db "sqlite:$tmp/none.db" --stall 60
[ ! -e "$tmp/none.db" ] || fail "a missing store was created"
echo "advise: ok"
