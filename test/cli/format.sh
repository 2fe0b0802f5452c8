#!/usr/bin/env bash
# format.sh - scripts/check-format: the C lines this checkout changes
# (against the merge base with main, or HEAD~ on main itself) are formatted
# as .clang-format says; and, in a scratch repository, the check fails on a
# badly formatted change, passes a well formatted one, ignores badly
# formatted lines the change does not touch, counts uncommitted and
# untracked files, and skips (77) a clone without history.
# Env: GH_SOURCE_DIR (repository root).
set -uo pipefail
src=${GH_SOURCE_DIR:?GH_SOURCE_DIR is the source tree}
check=$src/scripts/check-format
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. This checkout (exit 77 outside git, e.g. a source tarball).
rc=0
GH_SOURCE_DIR=$src "$check" || rc=$?
[ $rc -eq 0 ] || [ $rc -eq 77 ] || fail "this checkout's changed lines are not formatted (scripts/check-format)"

# 2. The check itself, in a scratch repository with main and a branch.
r=$tmp/repo
mkdir -p "$r/src" "$r/scripts"
cp "$src/.clang-format" "$r/"
cp "$check" "$r/scripts/"
cd "$r"
git init -q -b main . && git config user.email t@example.invalid && git config user.name t
printf '/* a.c - a file. */\nint add(int a, int b)\n{\n    return a + b;\n}\n\nint   untouched_bad ( int x ){return x;}\n' > src/a.c
git add -A && git commit -qm base
run() { GH_SOURCE_DIR=$r scripts/check-format "$@" > "$tmp/out" 2>&1; echo $?; }

# on main with one commit: no HEAD~ -> skipped
[ "$(run)" -eq 77 ] || fail "no history: not skipped: $(cat "$tmp/out")"
git checkout -q -b work
# a well formatted change passes, though an untouched line of the file is bad
printf 'int sub(int a, int b)\n{\n    int d = a - b;\n    return d;\n}\n' >> src/a.c
git commit -qam good
[ "$(run)" -eq 0 ] || fail "a formatted change was refused: $(cat "$tmp/out")"
# a badly formatted change fails, naming the file and showing the fix
printf 'int mul(int a,int b){ return a*b; }\n' >> src/a.c
git commit -qam bad
[ "$(run)" -eq 1 ] || fail "a badly formatted change passed"
grep -q '^+++ src/a.c (clang-format)' "$tmp/out" || fail "the diff does not name the file: $(cat "$tmp/out")"
grep -q 'int mul(int a, int b) { return a \* b; }' "$tmp/out" || fail "the fix is not shown: $(cat "$tmp/out")"
grep -q 'untouched_bad' "$tmp/out" && fail "an untouched line was checked"
# against an explicit base that has the bad line already: passes
[ "$(run HEAD)" -eq 0 ] || fail "BASE=HEAD: $(cat "$tmp/out")"
git reset -q --hard HEAD~
# uncommitted and untracked files count
printf 'int x ( void );\n' >> src/a.c
[ "$(run)" -eq 1 ] || fail "an uncommitted bad line passed"
git checkout -q src/a.c
printf 'int y ( void );\n' > src/new.c
[ "$(run)" -eq 1 ] || fail "an untracked bad file passed"
rm src/new.c
# main itself (as in CI's clean clone): HEAD~ is the change
git checkout -q main && git merge -q --no-ff -m merge work
[ "$(run)" -eq 0 ] || fail "main after a formatted merge: $(cat "$tmp/out")"
printf 'int div_(int a,int b){return a/b;}\n' >> src/a.c
git commit -qam "bad on main"
[ "$(run)" -eq 1 ] || fail "a bad commit on main passed"
echo "format: ok"
