#!/usr/bin/env bash
# xidgen_rejects.sh - the XID table generator fails the build on every kind of
# malformed catalog row, naming file:line and the column, and leaves no output.
# Env: GH_BIN (build/bin; the generator is $GH_BIN/../tools/gh-xidgen),
# GH_SOURCE_DIR (repository root).
set -u

gen="${GH_BIN:?GH_BIN not set}/../tools/gh-xidgen"
src="${GH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
[[ -x "$gen" ]] || { echo "FAIL: generator not found at $gen"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
T=$'\t'

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A valid two-row catalog; each case edits one thing.
good_rows() {
    printf '# comment line\n\n'
    printf '13\tROBUST_CHANNEL_GR_EXCEPTION\tGraphics engine exception\tapplication\tmedium\tapplication\tretry_in_place\tnote\n'
    printf '79\tROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS\tGPU has fallen off the bus\tgpu_hardware\tcritical\t-\tisolate_node,restart_from_checkpoint,drain_node,reboot_node\tnote\n'
}

# expect_reject NAME LINE COLUMN_TEXT: runs the generator on $work/NAME.tsv and
# checks a non-zero exit, "NAME.tsv:LINE:" and COLUMN_TEXT in the message, and
# that no output (nor temporary) file was left.
expect_reject() {
    local name=$1 line=$2 col=$3 out="$work/$1.c" err rc
    err=$("$gen" "$work/$name.tsv" "$out" 2>&1 >/dev/null)
    rc=$?
    if [[ $rc -eq 0 ]]; then
        fail "$name: accepted (exit 0)"
        return
    fi
    [[ "$err" == *"$name.tsv:$line:"* ]] || fail "$name: message lacks '$name.tsv:$line:': $err"
    [[ "$err" == *"$col"* ]] || fail "$name: message lacks '$col': $err"
    [[ ! -e "$out" && ! -e "$out.tmp" ]] || fail "$name: output left behind"
    echo "ok   $name: $err"
}

case_file() { cat >"$work/$1.tsv"; }

# The good file passes and compiles.
good_rows | case_file good
if "$gen" "$work/good.tsv" "$work/good.c"; then
    grep -q '\.code = 79' "$work/good.c" || fail "good: row 79 missing from output"
    echo "ok   good: accepted"
else
    fail "good: rejected"
fi

# Strings that need escaping in C come out as valid literals.
{
    printf '7\tNAME_7\tquote " backslash \\ trigraph ??) end\tunknown\tlow\t-\trun_diagnostics\tn\n'
    printf '8\tNAME_8\tutf-8 \xc3\xa9 done\tunknown\tlow\t-\trun_diagnostics\tn\n'
} | case_file escape
if "$gen" "$work/escape.tsv" "$work/escape.c"; then
    if command -v cc >/dev/null; then
        cc -std=c17 -Wall -Wextra -Werror -Wno-trigraphs -fsyntax-only -I"$src/src" "$work/escape.c" \
            || fail "escape: generated C does not compile"
    fi
    grep -qF 'quote \" backslash \\ trigraph \?\?) end' "$work/escape.c" \
        || fail "escape: summary not escaped as expected"
    echo "ok   escape: literals escaped"
else
    fail "escape: rejected"
fi

# Rejections. Line numbers count the two header lines of good_rows.
good_rows | sed "s/${T}application${T}medium/${T}app${T}medium/" | case_file bad_class
expect_reject bad_class 3 "column 4 (class)"

good_rows | sed "s/${T}critical${T}/${T}fatal${T}/" | case_file bad_severity
expect_reject bad_severity 4 "column 5 (severity)"

good_rows | sed "s/,reboot_node${T}/,reboot${T}/" | case_file bad_action
expect_reject bad_action 4 "column 7 (actions)"

good_rows | sed "s/drain_node,reboot_node/drain_node,reboot_node,run_diagnostics/" | case_file too_many_actions
expect_reject too_many_actions 4 "column 7 (actions)"

good_rows | sed "s/retry_in_place${T}/none,retry_in_place${T}/" | case_file none_combined
expect_reject none_combined 3 "column 7 (actions)"

good_rows | sed "s/${T}-${T}isolate/${T}blamed${T}isolate/" | case_file bad_flag
expect_reject bad_flag 4 "column 6 (flags)"

good_rows | sed "s/^79${T}/13${T}/" | case_file duplicate
expect_reject duplicate 4 "duplicate code 13"

good_rows | sed "s/^79${T}/12${T}/" | case_file unsorted
expect_reject unsorted 4 "out of order"

good_rows | sed "s/^79${T}/7x9${T}/" | case_file bad_code
expect_reject bad_code 4 "column 1 (code)"

good_rows | sed "s/^79${T}/0${T}/" | case_file zero_code
expect_reject zero_code 4 "column 1 (code)"

good_rows | sed "s/${T}note\$//" | sed -n '1,3p' | case_file short_row
expect_reject short_row 3 "expected 8"

good_rows | sed "s/${T}note\$/${T}note${T}extra/" | case_file long_row
expect_reject long_row 3 "more than 8"

good_rows | sed "s/${T}Graphics engine exception${T}/${T}${T}/" | case_file empty_field
expect_reject empty_field 3 "column 3 (summary)"

good_rows | sed 's/$/\r/' | case_file crlf
expect_reject crlf 1 "CRLF"

good_rows | sed "s/ROBUST_CHANNEL_GR_EXCEPTION/ROBUST CHANNEL/" | case_file bad_name
expect_reject bad_name 3 "column 2 (name)"

printf '# only comments\n' | case_file empty
if "$gen" "$work/empty.tsv" "$work/empty.c" 2>/dev/null; then
    fail "empty: accepted a catalog with no rows"
else
    echo "ok   empty: rejected"
fi

# The repository's own catalog is accepted.
if "$gen" "$src/data/xid-catalog.tsv" "$work/real.c"; then
    echo "ok   data/xid-catalog.tsv: accepted"
else
    fail "data/xid-catalog.tsv rejected"
fi

if [[ $failures -ne 0 ]]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "all xidgen rejection checks passed"
