#!/usr/bin/env bash
# real-node.sh - recovery on a real node: NODE_FAULTS (default 10) XID 79
# faults, one after another, on the real test node (test/node/e2e helm with
# GH_NODE_FAULTS), each with a fresh 2-pod training Job on it; prints, from
# the line's append to the kernel-log file to each state seen through the API
# (polled every 0.1 s), p50 and p99 of
#   fault -> node cordoned (and tainted)
#   fault -> the Job's old pods terminated (gone from the API: the kubelet
#            stopped them and confirmed)
#   fault -> replacement pods created (bound to kwok nodes)
# Run: make bench-node  (or NODE_FAULTS=20 bench/real-node.sh). Not part of
# `make bench` (it builds and runs a node: minutes). Never fails on a time.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
n=${NODE_FAULTS:-10}
figs=$(mktemp)
trap 'rm -f "$figs"' EXIT
GH_NODE_FAULTS=$n GH_NODE_FIGURES=$figs "$repo/test/node/e2e" helm >&2 || {
  echo "real-node: test/node/e2e failed (its output above)"; exit 1; }
pct() { # column percentile (nearest rank)
  awk -v c="$1" '{print $c}' "$figs" | sort -n | awk -v p="$2" '{a[NR]=$1} END {
    if (NR == 0) { print "-"; exit } r = int((p / 100) * NR + 0.999999); if (r < 1) r = 1; if (r > NR) r = NR
    printf "%.2f", a[r] / 1000 }'
}
count=$(grep -c . "$figs" || true)
echo "recovery on a real node: $count faults (XID 79, 2-pod Job; chart with dryRun=false, controller --node-cooldown 0s --max-actions-per-hour 0, a rule without escalation)"
printf '%-36s %8s %8s\n' "" "p50 s" "p99 s"
printf '%-36s %8s %8s\n' "fault -> node cordoned" "$(pct 2 50)" "$(pct 2 99)"
printf '%-36s %8s %8s\n' "fault -> old pods terminated" "$(pct 3 50)" "$(pct 3 99)"
printf '%-36s %8s %8s\n' "fault -> replacement pods created" "$(pct 4 50)" "$(pct 4 99)"
