#!/usr/bin/env bash
# Mechanical style rules (shared/STYLE.md): no banned C functions, no
# unchecked realloc (p = realloc(p, ...) loses p on failure), and every .c
# under src/ and tools/ opens with a comment that states its one job.
set -uo pipefail
cd "$GH_SOURCE_DIR"
fail=0
files=$(git ls-files 'src/*.c' 'src/*.h' 'tools/*.c' 'test/*.c' 'bench/*.c' 2>/dev/null)
[ -n "$files" ] || files=$(find src tools test bench -name '*.[ch]')
banned='\b(strcpy|strcat|sprintf|vsprintf|gets|strtok|atoi|atol)[[:space:]]*\('
if hits=$(grep -nE "$banned" $files | grep -vE '^\S+:[0-9]+:\s*(/\*|\*|//)'); then
  echo "banned functions (use snprintf, strtol, memcpy with bounds, strtok_r):"
  echo "$hits"
  fail=1
fi
if hits=$(grep -nE '\b([a-zA-Z_>.-]+)[[:space:]]*=[[:space:]]*realloc[[:space:]]*\([[:space:]]*\1[[:space:]]*,' $files); then
  echo "unchecked realloc (assigning the result to the pointer it reallocates):"
  echo "$hits"
  fail=1
fi
for f in $(printf '%s\n' $files | grep -E '^(src|tools)/.*\.[ch]$'); do
  if ! head -n 1 "$f" | grep -qE '^/\*'; then
    echo "$f: must open with a comment stating its one job"
    fail=1
  fi
done
[ $fail -eq 0 ] && echo "style: ok ($(printf '%s\n' $files | wc -l) files)"
exit $fail
