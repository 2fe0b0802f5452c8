#!/usr/bin/env bash
# Quoted command outputs in README.md, docs/ and python/README.md are what
# the commands print: every indented command line of the form
#     gpuheal ARGS...    # "OUTPUT"
# is run (after the gpuheal lines before it in the same block, e.g. the
# `gpuheal policy default > my-policy.yaml` it reads), in a scratch folder
# that sees the repository's files, and OUTPUT must be one whole line of what
# it prints. Also: the three binaries' --version is the one version of
# src/common/version.h, the Helm chart's appVersion and python/pyproject.toml.
# Prints ok/FAIL lines and "doc_outputs: N passed, N failed".
set -uo pipefail
cd "$GH_SOURCE_DIR"
bin=${GH_BIN:?GH_BIN: the built binaries}
pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
work=$(mktemp -d "${TMPDIR:-/tmp}/gh-docout.XXXXXX")
trap 'rm -rf "$work"' EXIT
for d in deploy data test docs python; do ln -s "$GH_SOURCE_DIR/$d" "$work/$d"; done
mkdir -p "$work/bin"
ln -s "$bin/gpuheal" "$work/bin/gpuheal"

# FILE:LINE, PRELUDE (gpuheal lines before it, \x1f-separated), CMD, OUTPUT;
# \x1e between fields (not a tab: read would merge empty fields)
cases=$(python3 - README.md docs/*.md python/README.md <<'PY'
import re, sys
quote = re.compile(r'^ {4}(gpuheal\s.*?)\s+#\s*"(.*?)"')
for path in sys.argv[1:]:
    block = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if not line.startswith("    "):
            block = []
            continue
        m = quote.match(line)
        cmd = re.sub(r"\s+#.*$", "", line).strip()
        if m:
            print("%s:%d\x1e%s\x1e%s\x1e%s" % (path, n, "\x1f".join(block), m.group(1), m.group(2)))
        if cmd.startswith("gpuheal "):
            block.append(cmd)
PY
)
[ -n "$cases" ] || bad "no quoted gpuheal outputs found in the docs (the pattern changed?)"
while IFS=$'\x1e' read -r where prelude cmd want; do
  [ -n "$where" ] || continue
  out=$(cd "$work" && PATH="$work/bin:$PATH" bash -c "
    IFS=\$'\\x1f'; for c in \$1; do [ -n \"\$c\" ] && eval \"\$c\" >/dev/null 2>&1; done
    eval \"\$2\"" _ "$prelude" "$cmd" 2>&1)
  if grep -qxF -- "$want" <<<"$out"; then
    ok "$where: $cmd -> \"$want\""
  else
    bad "$where: $cmd: the doc quotes \"$want\"; it prints:"
    sed 's/^/     | /' <<<"$out" | head -n 8
  fi
done <<<"$cases"

# One version everywhere
v=$(sed -nE 's/^#define GH_VERSION "([^"]+)"$/\1/p' src/common/version.h)
chart=$(sed -nE 's/^appVersion: "?([^"]+)"?$/\1/p' deploy/helm/gpuheal/Chart.yaml)
py=$(sed -nE 's/^version = "([^"]+)"$/\1/p' python/pyproject.toml)
pyv=$(sed -nE 's/^__version__ = "([^"]+)"$/\1/p' python/gpuheal_reporter/__init__.py)
[ -n "$v" ] && [ "$v" = "$chart" ] && [ "$v" = "$py" ] && [ "$v" = "$pyv" ] &&
  ok "version $v: src/common/version.h = Chart appVersion = pyproject = __version__" ||
  bad "versions differ: version.h '$v', Chart appVersion '$chart', pyproject '$py', __version__ '$pyv'"
for b in gpuheal gpuheal-agent gpuheal-controller; do
  out=$("$bin/$b" --version 2>&1); rc=$?
  [ $rc = 0 ] && [ "$out" = "$b $v" ] && ok "$b --version: \"$out\"" ||
    bad "$b --version: exit $rc, \"$out\" (want \"$b $v\")"
done

# gpuheal explain job/NS (no name): a usage error, not "0 incidents"
out=$("$bin/gpuheal" explain job/ml --db "sqlite:$work/none.db" 2>&1); rc=$?
[ $rc = 2 ] && [ "$out" = 'gpuheal explain: "job/ml": job/NS/NAME needs a namespace and a name' ] &&
  ok "explain job/ml: exit 2, \"$out\"" || bad "explain job/ml: exit $rc, \"$out\""

echo "doc_outputs: $pass passed, $fail failed"
[ $fail = 0 ]
