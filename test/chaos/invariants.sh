# invariants.sh - the one checker run after every chaos scenario (sourced by
# test/chaos/chaos.sh, after lib.sh). It reads the scenario's SQLite audit
# store ($DB), the cluster (kubectl) and the scenario's files under $S, and
# checks:
#   signals  every hardware-fault id injected is in the store: a decision's
#            evidence, or joined_evidence (it joined an incident already
#            decided);
#            every injection was answered accepted or duplicate
#   once     one succeeded action per incident, action and target at most;
#            one succeeded isolate_node per node (none is released here);
#            each job's gpuheal.io/restart-count = its succeeded restarts
#   audit    every intent finished with an action row, none pending; every
#            node gpuheal cordoned has the succeeded isolate_node row of the
#            incident its annotation names
#   budget   nodes gpuheal held, sampled every second while the scenario
#            ran and at the end, never above --max-unavailable ($MAXU)
#   healthy  only nodes that received a node-blaming fault are isolated
# Prints one "inv:" line per failure and sets INV_FIG (figures) and
# INV_FAIL (number of failed invariants). Usage: check_invariants JOB...
# shellcheck shell=bash

check_invariants() {
  INV_FAIL=0
  local f="$S/inv"
  mkdir -p "$f"
  inv_bad() { echo "  inv FAIL: $*"; INV_FAIL=$((INV_FAIL + 1)); }

  # signals
  stored_ids > "$f/stored"
  sort -u "$S/hw_ids" > "$f/hw"
  local n_hw n_lost
  n_hw=$(grep -c . "$f/hw")
  comm -23 "$f/hw" "$f/stored" > "$f/lost"
  n_lost=$(grep -c . "$f/lost")
  # Every lost id fails, whenever it was sent: an acknowledged signal is
  # journalled before the 200 and replayed by the next controller
  # (docs/controller.md, "Durability"), so a kill -9 loses none; one that
  # joined an incident already decided is a joined_evidence row (no
  # exemption: before, ids that joined a node's open incident were excused,
  # and those that joined a shared cause failed kill9 in CI).
  local id node n_joined others=""
  n_joined=$(q "SELECT COUNT(*) FROM joined_evidence;" 2>/dev/null || echo 0)
  while read -r id; do
    node=$(awk -v i="$id" '$1 == i {print $2; exit}' "$S/hw_map")
    others="$others $id@$node"
  done < "$f/lost"
  [ "$n_lost" = 0 ] || inv_bad "signals: $n_lost of $n_hw hardware-fault ids not in the store:$others"
  local sent acc dup
  read -r acc dup sent < <(awk '{a += $1; d += $2; n += $3} END {print a + 0, d + 0, n + 0}' "$S/inject.sum")
  [ $((acc + dup)) -ge "$sent" ] || inv_bad "signals: $sent lines injected, controllers answered $acc accepted + $dup duplicates"

  # once
  local twice
  twice=$(q "SELECT incident_id || ' ' || action || ' ' || target || ' x' || COUNT(*) FROM actions
             WHERE result = 'succeeded' GROUP BY incident_id, action, target HAVING COUNT(*) > 1;")
  [ -z "$twice" ] || inv_bad "once: actions done twice in one incident: $twice"
  twice=$(q "SELECT target || ' x' || COUNT(*) FROM actions WHERE result = 'succeeded'
             AND action = 'isolate_node' GROUP BY target HAVING COUNT(*) > 1;")
  [ -z "$twice" ] || inv_bad "once: nodes isolated twice: $twice"
  local j restarts=0 rc done
  for j in "$@"; do
    rc=$(restart_count "$j")
    # one record per incident, succeeded or (replayed after a kill -9
    # between the restart and its record) noop; a second restart for one
    # incident would show as a restart-count above this
    done=$(q "SELECT COUNT(DISTINCT incident_id) FROM actions WHERE result IN ('succeeded', 'noop') AND action = 'restart_from_checkpoint' AND target = 'job/$NS/$j';")
    restarts=$((restarts + done))
    [ "$rc" = "$done" ] || inv_bad "once: job $j restart-count $rc, succeeded restarts in the store $done"
  done

  # audit
  local orphans pend failed
  orphans=$(q "SELECT COUNT(*) FROM intents i WHERE NOT EXISTS (SELECT 1 FROM actions a WHERE a.intent_id = i.id);")
  pend=$(pending_intents)
  [ "$orphans" = 0 ] || inv_bad "audit: $orphans intents without an action record"
  [ "$pend" = 0 ] || inv_bad "audit: $pend intents still pending"
  failed=$(q "SELECT COUNT(*) FROM actions WHERE result = 'failed';")
  [ "$failed" = 0 ] || inv_bad "audit: $failed actions failed: $(q "SELECT action || ' ' || target || ': ' || COALESCE(detail, '') FROM actions WHERE result = 'failed' LIMIT 3;" | tr '\n' ';')"
  local node inc
  K get nodes -l "gpuheal.io/pool=$NS" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.spec.unschedulable} {.metadata.annotations.gpuheal\.io/cordoned-by}{"\n"}{end}' |
    awk '$2 == "true" && $3 != "" {print $1, $3}' > "$f/isolated"
  # succeeded, or noop: a controller killed between the cordon and its
  # record replays the intent after the restart and finds the node already
  # isolated (by this incident: the annotation says so). The controller is
  # still running: a cordon read above may be one whose record is being
  # written right now, so a missing record is looked for again for 10 s.
  iso_recorded() {
    [ "$(q "SELECT COUNT(*) FROM actions WHERE incident_id = '$2' AND action = 'isolate_node' AND target = 'node/$1' AND result IN ('succeeded', 'noop');")" = 1 ]
  }
  while read -r node inc; do
    iso_recorded "$node" "$inc" || wait_for 10 iso_recorded "$node" "$inc" ||
      inv_bad "audit: $node cordoned for $inc without its isolate_node record (waited 10 s)"
  done < "$f/isolated"

  # budget
  local n_iso max_seen samples
  n_iso=$(grep -c . "$f/isolated")
  echo "$(date +%s) $n_iso" >> "$S/samples"
  max_seen=$(awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}' "$S/samples")
  samples=$(grep -c . "$S/samples")
  [ "$max_seen" -le "$MAXU" ] || inv_bad "budget: $max_seen nodes isolated at once, budget $MAXU"

  # healthy
  local healthy
  healthy=$(awk '{print $1}' "$f/isolated" | sort | comm -23 - <(sort -u "$S/faulted") | tr '\n' ' ')
  [ -z "$healthy" ] || inv_bad "healthy: isolated without a fault: $healthy"

  local incs acts noop guards
  incs=$(q "SELECT COUNT(*) FROM incidents;")
  acts=$(q "SELECT COUNT(*) FROM actions WHERE result = 'succeeded';")
  noop=$(q "SELECT COUNT(*) FROM actions WHERE result = 'noop';")
  guards=$(q "SELECT COUNT(*) FROM guard_decisions WHERE verdict <> 'allowed';")
  INV_FIG="signals $sent sent ($acc acc, $dup dup), hw $((n_hw - n_lost))/$n_hw stored, $n_joined joined rows; incidents $incs; actions $acts ok, $noop noop, $failed failed; guard denials $guards; isolated $n_iso, max $max_seen/$MAXU over $samples samples; restarts $restarts; kills $KILLS"
  [ "$INV_FAIL" = 0 ]
}
