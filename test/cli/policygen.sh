#!/usr/bin/env bash
# policygen.sh - the default-policy generator (tools/policygen.c) embeds a
# file byte for byte: quotes, backslashes, trigraph-looking "??=", tabs,
# control characters, UTF-8 and a missing final newline all come back equal
# when the generated C is compiled (strict C17, as the build) and printed;
# a NUL byte or a missing file fails with FILE:LINE and leaves no output.
# Env: GH_BIN (build/bin; the generator is $GH_BIN/../tools/gh-policygen),
# GH_SOURCE_DIR (repository root).
set -euo pipefail
gen="${GH_BIN:?GH_BIN not set}/../tools/gh-policygen"
src=${GH_SOURCE_DIR:?GH_SOURCE_DIR is the source tree}
[[ -x "$gen" ]] || { echo "FAIL: generator not found at $gen"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cc=${CC:-cc}

# roundtrip NAME: generate from $tmp/NAME.yaml, compile with a main that
# writes the string, and compare with the input.
roundtrip() {
  local n=$1
  "$gen" "$tmp/$n.yaml" "$tmp/$n.c" || fail "$n: generator failed"
  mkdir -p "$tmp/inc/engine"
  printf 'const char *gh_policy_default_yaml(void);\n' > "$tmp/inc/engine/policy.h"
  printf '#include <stdio.h>\n#include <string.h>\nconst char *gh_policy_default_yaml(void);\nint main(void) { const char *s = gh_policy_default_yaml(); fwrite(s, 1, strlen(s), stdout); return 0; }\n' > "$tmp/main.c"
  "$cc" -std=c17 -Wall -Wextra -Wshadow -Wformat=2 -Werror -I "$tmp/inc" -o "$tmp/$n" "$tmp/$n.c" "$tmp/main.c" ||
    fail "$n: the generated C does not compile"
  "$tmp/$n" > "$tmp/$n.out"
  cmp "$tmp/$n.yaml" "$tmp/$n.out" || fail "$n: the embedded text differs from the file"
}

# 1. The shipped policy.
cp "$src/data/policy-default.yaml" "$tmp/shipped.yaml"
roundtrip shipped

# 2. Every byte class the escaping handles, and no final newline.
printf 'a "quoted" \\back\\slash ??= ??/ ?? ?\n\ttab\r\x01\x1f\x7f caf\xc3\xa9 \xe2\x80\x94\n\x31\x32\n\\0\\x41 "\\"\nlast line, no newline' > "$tmp/tricky.yaml"
roundtrip tricky

# 3. An empty file is the empty string.
: > "$tmp/empty.yaml"
roundtrip empty

# 4. Rejected: a NUL byte (named with its line), a file that is not there.
printf 'line one\nline\0two\n' > "$tmp/nul.yaml"
if "$gen" "$tmp/nul.yaml" "$tmp/nul.c" 2> "$tmp/err"; then fail "a NUL byte was accepted"; fi
grep -q "nul.yaml:2: error: NUL byte" "$tmp/err" || fail "NUL message: $(cat "$tmp/err")"
[ ! -e "$tmp/nul.c" ] && [ ! -e "$tmp/nul.c.tmp" ] || fail "a rejected file left output"
if "$gen" "$tmp/none.yaml" "$tmp/none.c" 2> "$tmp/err"; then fail "a missing file was accepted"; fi
grep -q "none.yaml: error: cannot open" "$tmp/err" || fail "missing file message: $(cat "$tmp/err")"
[ ! -e "$tmp/none.c" ] || fail "a missing input left output"
echo "policygen: ok"
