#!/usr/bin/env bash
# real-node-ladder.sh - the recovery ladder on a real node, side by side in
# one run: NODE_ROUNDS (default 10) rounds of test/node/e2e helm's ladder
# phase (GH_NODE_LADDER), each one fault (XID 94 on the real node, the two
# trainers stuck as in a hung collective; the policy restarts the job and
# excludes no node; each trainer holds one of the node's 2 GPUs, an extended
# resource, so a recreated pod waits for its old pod's GPU) for a 2-pod
# Indexed Job without the RestartAllContainers
# rule (gpuheal recreates it whole: mode full_recreate) and one for a Job
# with it (mode in_place); prints p50 and p99 per mode of
#   fault -> first training step after resume   (the XID line's append to
#            the last rank's first step, the trainers' clocks: the host's)
#   restart -> first training step after resume (from the start of the
#            restart action, as the controller's audit store records it)
# and in place's speed-up. Run: make bench-node-ladder (or NODE_ROUNDS=20
# bench/real-node-ladder.sh). Not part of `make bench` (it builds and runs a
# node: minutes). Never fails on a time.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
n=${NODE_ROUNDS:-10}
figs=$(mktemp)
trap 'rm -f "$figs"' EXIT
GH_NODE_FAULTS=1 GH_NODE_LADDER=$n GH_NODE_LADDER_FIGURES=$figs "$repo/test/node/e2e" helm >&2 || {
  echo "real-node-ladder: test/node/e2e failed (its output above)"; exit 1; }
pct() { # mode column percentile (nearest rank), seconds
  awk -v m="$1" -v c="$2" '$1 == m {print $c}' "$figs" | sort -n | awk -v p="$3" '{a[NR]=$1} END {
    if (NR == 0) { print "-"; exit } r = int((p / 100) * NR + 0.999999); if (r < 1) r = 1; if (r > NR) r = NR
    printf "%.2f", a[r] / 1000 }'
}
cnt() { awk -v m="$1" '$1 == m' "$figs" | grep -c . || true; }
echo "recovery ladder on a real node: $(cnt recreate) + $(cnt inplace) faults (XID 94, 2-pod Indexed Job, trainers stuck; rule: restart_from_checkpoint only)"
printf '%-44s %10s %10s %10s %10s\n' "" "recreate" "recreate" "in place" "in place"
printf '%-44s %10s %10s %10s %10s\n' "" "p50 s" "p99 s" "p50 s" "p99 s"
printf '%-44s %10s %10s %10s %10s\n' "fault -> first training step after resume" \
  "$(pct recreate 3 50)" "$(pct recreate 3 99)" "$(pct inplace 3 50)" "$(pct inplace 3 99)"
printf '%-44s %10s %10s %10s %10s\n' "restart -> first training step after resume" \
  "$(pct recreate 4 50)" "$(pct recreate 4 99)" "$(pct inplace 4 50)" "$(pct inplace 4 99)"
awk -v a="$(pct recreate 3 50)" -v b="$(pct inplace 3 50)" -v c="$(pct recreate 4 50)" -v d="$(pct inplace 4 50)" \
  'BEGIN { if (b > 0 && d > 0) printf "in place is %.2fx faster from the fault, %.2fx from the restart action (p50)\n", a / b, c / d }'
echo "per fault (mode round fault_ms restart_ms):"
sort -k1,1 -k2,2n "$figs"
