#!/usr/bin/env bash
# chaos.sh - fault-injection proof for gpuheal: runs the chaos scenarios
# against a private control plane (test/kube/up in a temp GH_KUBE_DIR, so
# that restarting etcd or the apiserver disturbs no other test), checks the
# shared invariants (invariants.sh) after each, prints a table.
#
#   test/chaos/chaos.sh [--short] [--soak SECONDS] [--only "NAME..."]
#
# Scenarios: apiserver (kube-apiserver and etcd restarted while actions are
# issued), agent (agent cut off from the controller, spool catching up),
# kill9 (controller kill -9 in a loop during a fault storm), leader (two
# replicas, the leader killed while faults arrive), skew (source clocks
# minutes off), soak (random faults for --soak SECONDS, default 600).
# --short: the CTest version (kube/chaos_short): fewer kills, a 45 s soak,
# no leader scenario (controller_e2e covers a takeover). Needs GH_BIN (the
# binaries), GH_SOURCE_DIR (the repo; default: this script's).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${GH_SOURCE_DIR:=$(cd "$here/../.." && pwd)}"
: "${GH_BIN:=$GH_SOURCE_DIR/build/bin}"
export GH_SOURCE_DIR GH_BIN
SHORT=0 SOAK=${CHAOS_SOAK_SECONDS:-600} ONLY=""
while [ $# -gt 0 ]; do
  case $1 in
    --short) SHORT=1 ;;
    --soak) SOAK=$2; shift ;;
    --only) ONLY=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "usage: chaos.sh [--short] [--soak SECONDS] [--only \"NAME...\"]"; exit 2 ;;
  esac
  shift
done
if [ -z "$ONLY" ]; then
  if [ $SHORT = 1 ]; then ONLY="apiserver agent kill9 skew soak"; else ONLY="apiserver agent kill9 leader skew soak"; fi
fi
for b in gpuheal gpuheal-controller gpuheal-agent; do
  [ -x "$GH_BIN/$b" ] || { echo "chaos: no $GH_BIN/$b (build first)"; exit 1; }
done
python3 -c 'import sqlite3' 2>/dev/null || { echo "chaos: needs python3 with its sqlite3 module"; exit 1; }

CH_TMP=$(mktemp -d /tmp/gh-chaos.XXXXXX)
# shellcheck source=lib.sh
. "$here/lib.sh"
# shellcheck source=invariants.sh
. "$here/invariants.sh"
AGENT_PIDS=""
cleanup() {
  local p
  for p in $AGENT_PIDS; do kill -9 "$p" 2>/dev/null; done
  [ -n "${NS:-}" ] && scenario_end >/dev/null 2>&1
  [ -n "${BG_PID:-}" ] && kill "$BG_PID" 2>/dev/null
  chaos_down
  if [ "${GH_CHAOS_KEEP:-}" = 1 ]; then echo "kept $CH_TMP"; else rm -rf "$CH_TMP"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

RESULTS=()
CLASSES=()
FAILED=0
CHECKS=0
expect() { # what CMD...: a scenario-specific check
  local what=$1; shift
  CHECKS=$((CHECKS + 1))
  if "$@"; then echo "  ok: $what"; return 0; fi
  echo "  FAIL: $what"; SC_FAIL=$((SC_FAIL + 1)); return 1
}
cordoned() { [ "$(K get node "$1" -o jsonpath='{.spec.unschedulable}')" = true ]; }
uncordoned() { ! cordoned "$1"; }

finish() { # NAME JOBS...: invariants, a table row
  local name=$1; shift
  wait_for 30 no_pending || echo "  ($(pending_intents) intents still pending after 30 s)"
  # the engine's holds end within a minute of the last onset: what they
  # hold is decided (and stored) by then; ids lost are counted by the invariants
  wait_for 90 settled || echo "  (not settled after 90 s: $(engine_held) held by the engine)"
  check_invariants "$@"
  local res=pass
  [ "$INV_FAIL" = 0 ] && [ "$SC_FAIL" = 0 ] || { res=FAIL; FAILED=$((FAILED + 1)); }
  echo "  $name: $res (scenario checks failed: $SC_FAIL, invariants failed: $INV_FAIL)"
  echo "  $INV_FIG"
  RESULTS+=("$(printf '%-10s %-5s %4ss  %s' "$name" "$res" "$((SECONDS - SC_T0))" "$INV_FIG")")
  CLASSES+=("$(printf '%-10s incidents by class: %s' "$name" "$(q "SELECT class || '=' || COUNT(*) FROM incidents GROUP BY class;" | tr '\n' ' ')")")
  [ "$res" = pass ] || { echo "  --- last controller log lines"; tail -15 "$LAST_LOG" | sed 's/^/  /'; }
  scenario_end
}

# ---- 1. kube-apiserver and etcd restarted while actions are issued -------
sc_apiserver() {
  scenario_begin c1 10 || return 1
  DB="sqlite:$S/audit.db" MAXU=4
  job_ready j1 4 && job_ready j2 2 || { echo "  jobs not scheduled"; SC_FAIL=1; }
  start_controller c1-a && wait_for 20 leading "$LAST_LOG"
  local a b c d free
  a=$(node_of j1 1); b=$(node_of j2 0)
  free=$(nodes | grep -vx "$(K -n "$NS" get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | paste -sd'|' | sed 's/|/\\|/g')" | head -4)
  c=$(echo "$free" | sed -n 1p); d=$(echo "$free" | sed -n 2p)
  { ckpt j1 500; ckpt j2 900; xid "$a" 2 79; xid "$b" 5 79; } | inject
  sleep 0.25
  log "kube-apiserver kill -9, down 3 s, while isolating $a, $b and restarting j1, j2"
  "$GH_SOURCE_DIR/test/kube/restart" --kill --down 3 "$GH_KUBE_DIR" kube-apiserver &
  local rpid=$!
  sleep 0.5
  xid "$c" 0 48 | inject   # arrives while the apiserver is down
  wait "$rpid" || echo "  apiserver restart failed"
  expect "$a isolated after the apiserver restart" wait_for 60 cordoned "$a"
  expect "$b isolated after the apiserver restart" wait_for 30 cordoned "$b"
  expect "$c isolated (fault sent while the apiserver was down)" wait_for 30 cordoned "$c"
  expect "j1 restarted" wait_for 30 restarts_match j1
  log "etcd kill -9, down 2 s, with a fault on $d arriving"
  xid "$d" 3 79 | inject
  sleep 0.25
  "$GH_SOURCE_DIR/test/kube/restart" --kill --down 2 "$GH_KUBE_DIR" etcd || echo "  etcd restart failed"
  expect "$d isolated after the etcd restart" wait_for 60 cordoned "$d"
  # a restarted job may land on a node hit later: one restart per incident
  expect "j1 restarted once per incident ($(restart_count j1))" wait_for 30 restarts_match j1
  expect "j2 restarted once per incident ($(restart_count j2))" wait_for 30 restarts_match j2
  finish apiserver j1 j2
}

# job: restarted, and its restart-count is the number of incidents that
# restarted it (a restarted job may land on a node hit later); "noop" is a
# restart done by a controller killed before its record, replayed after
# the restart ("already restarted for this incident")
restarts_match() {
  local n
  n=$(q "SELECT COUNT(DISTINCT incident_id) FROM actions WHERE action = 'restart_from_checkpoint' AND target = 'job/$NS/$1' AND result IN ('succeeded', 'noop');")
  [ "$n" -ge 1 ] && [ "$(restart_count "$1")" = "$n" ]
}

# ---- 2. the agent cut off from the controller; the spool catches up ------
metric_of() { # port name
  curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'
}
metric_is() { [ "$(metric_of "$1" "$2")" = "$3" ]; }
metric_ge() { local v; v=$(metric_of "$1" "$2"); [ -n "$v" ] && [ "${v%.*}" -ge "$3" ]; }
sc_agent() {
  scenario_begin c2 4 || return 1
  DB="sqlite:$S/audit.db" MAXU=2
  job_ready jx 1 || { echo "  job not scheduled"; SC_FAIL=1; }
  start_controller c2-a && wait_for 20 leading "$LAST_LOG"
  local n1="$NS-n01" feed="$S/feed.jsonl" aport i
  : > "$feed"
  "$GH_BIN/gpuheal-agent" --node "$n1" --kmsg off --nvml-lib off --dcgm off --ib-sysfs-root off \
    --telemetry-socket off --kubeconfig off --inject "$feed" --inject-follow on \
    --controller "http://127.0.0.1:$PORT" --token-file "$S/token" --spool-dir "$S/spool" \
    --batch-records 100 --batch-linger 50ms --listen 127.0.0.1:0 --log-level info 2> "$S/agent.log" &
  local apid=$!
  AGENT_PIDS="$AGENT_PIDS $apid"
  wait_for 30 grep -q 'msg="http listening"' "$S/agent.log" || { echo "  agent did not start"; SC_FAIL=1; }
  aport=$(sed -n 's/.*msg="http listening".* port=\([0-9]*\).*/\1/p' "$S/agent.log" | tail -n 1)
  local na=200 nb=${AGENT_NB:-1500}
  for i in $(seq 1 $na); do step "$n1" $((i % 8)) jx $((i % 8)) $((i / 8)) 1000; done >> "$feed"
  expect "phase A: controller accepted $na" wait_for 30 metric_is "$PORT" 'gpuheal_ingest_signals_total{result="accepted"}' $na
  log "controller stopped; $nb signals (one XID 79) keep coming at the agent"
  stop_all_controllers
  for i in $(seq 1 $nb); do
    if [ "$i" = $((nb / 2)) ]; then xid "$n1" 6 79; else step "$n1" $((i % 8)) jx $((i % 8)) $((100 + i / 8)) 1000; fi
  done >> "$feed"
  expect "agent spooled $nb while cut off" wait_for 60 metric_ge "$aport" gpuheal_agent_spool_pending $nb
  sleep 2
  LISTEN_PORT=$PORT start_controller c2-b && wait_for 20 leading "$LAST_LOG"
  local bport=$PORT
  expect "spool drained after reconnect" wait_for 90 metric_is "$aport" gpuheal_agent_spool_pending 0
  sleep 1
  local acc dup
  acc=$(metric_of "$bport" 'gpuheal_ingest_signals_total{result="accepted"}')
  dup=$(metric_of "$bport" 'gpuheal_ingest_signals_total{result="duplicate"}')
  echo "  after reconnect: accepted $acc, duplicates $dup (expected $nb once)"
  expect "every spooled signal arrived once ($acc accepted, $dup duplicates of $nb)" test "$acc" = $nb
  echo "$((na + acc)) ${dup:-0} $((na + nb))" >> "$S/inject.sum"
  expect "$n1 isolated for the XID sent while cut off" wait_for 30 cordoned "$n1"
  kill "$apid" 2>/dev/null; wait "$apid" 2>/dev/null
  finish agent jx
}

# ---- 3. controller kill -9 in a loop during a fault storm ----------------
sc_kill9() {
  local kills=${KILL_LOOPS:-8} nn=24
  [ $SHORT = 1 ] && kills=4 nn=12
  scenario_begin c3 $nn || return 1
  DB="sqlite:$S/audit.db" MAXU=10
  job_ready j3 4 || { echo "  job not scheduled"; SC_FAIL=1; }
  start_controller c3 && wait_for 20 leading "$LAST_LOG"
  echo "$(ckpt j3 100)" | inject
  # the storm: one XID every 0.3 s on the nodes in random order, j3's first
  local order
  order=$( { node_of j3 0; echo; nodes | shuf; } | awk 'NF && !seen[$0]++')
  ( for n in $order; do xid "$n" $((RANDOM % 8)) 79 | inject; sleep 0.2; done ) &
  BG_PID=$!
  local k
  for k in $(seq 1 "$kills"); do
    if [ $SHORT = 1 ]; then sleep "1.$((RANDOM % 10))"; else sleep "$(awk -v r=$RANDOM 'BEGIN {printf "%.1f", 2 + r % 30 / 10}')"; fi
    kill9 "$LAST_PID"
    log "kill -9 #$k"
    sleep 0.$((RANDOM % 10))
    LISTEN_PORT=$PORT start_controller c3 || break
  done
  wait "$BG_PID"; BG_PID=""
  log "storm sent"
  wait_for 20 leading "$LAST_LOG"
  expect "j3 restarted once per incident ($(restart_count j3))" wait_for 60 restarts_match j3
  finish kill9 j3
}

# ---- 4. leader failover with two replicas while faults arrive ------------
sc_leader() {
  scenario_begin c4 12 || return 1
  DB="sqlite:$S/audit.db" MAXU=12
  job_ready j4 2 || { echo "  job not scheduled"; SC_FAIL=1; }
  start_controller c4-a && wait_for 20 leading "$LAST_LOG"
  local pa=$LAST_PID porta=$LAST_PORT
  LISTEN_PORT=0 start_controller c4-b
  local portb=$LAST_PORT logb=$LAST_LOG
  echo "$(ckpt j4 10)" | inject "$porta"
  local order n i=0
  order=$( { node_of j4 0; echo; nodes | shuf; } | awk 'NF && !seen[$0]++' | head -10)
  for n in $order; do
    i=$((i + 1))
    # agents post to either replica
    if [ $((i % 2)) = 0 ]; then xid "$n" 1 79 | inject "$portb" "$porta"; else xid "$n" 1 79 | inject "$porta" "$portb"; fi
    if [ $i = 4 ]; then kill9 "$pa"; log "leader c4-a killed -9"; fi
    sleep 0.5
  done
  expect "c4-b took over" wait_for 20 leading "$logb"
  expect "j4 restarted once per incident ($(restart_count j4))" wait_for 30 restarts_match j4
  LAST_LOG=$logb
  finish leader j4
}

# ---- 5. clock skew between nodes ------------------------------------------
has_app_incident() { [ "$(q "SELECT COUNT(*) FROM incidents WHERE class = 'application';")" -ge 1 ]; }
sc_skew() {
  scenario_begin c5 6 || return 1
  DB="sqlite:$S/audit.db" MAXU=3
  job_ready j5 2 || { echo "  job not scheduled"; SC_FAIL=1; }
  start_controller c5 && wait_for 20 leading "$LAST_LOG"
  local behind ahead appn apppod t_inject
  behind=$(node_of j5 0)
  appn=$(node_of j5 1); apppod=$(pod_of j5 1)
  ahead=$(nodes | grep -vx "$behind" | grep -vx "$appn" | head -1)
  t_inject=$(date +%s%N)
  {
    ckpt j5 40
    xid "$behind" 1 79 "$(at '-7 minutes')"   # a node clock 7 min behind
    xid "$ahead" 2 48 "$(at '+6 minutes')"    # a node clock 6 min ahead
  } | inject
  expect "$behind (clock 7 min behind) isolated" wait_for 30 cordoned "$behind"
  expect "$ahead (clock 6 min ahead) isolated" wait_for 30 cordoned "$ahead"
  expect "j5 restarted once per incident" wait_for 30 restarts_match j5
  # an application error stamped 4 min in the future, in another job (a
  # pod failure of j5 would be explained by its nodes' XIDs)
  job_ready j5b 1 || { echo "  job j5b not scheduled"; SC_FAIL=1; }
  appn=$(node_of j5b 0); apppod=$(pod_of j5b 0)
  app_error "$appn" "$apppod" j5b "$(at '+4 minutes')"
  expect "application error decided" wait_for 30 has_app_incident
  expect "$appn (application error) not isolated" uncordoned "$appn"
  # arrival-time bounding: the future stamp is placed at its arrival
  local fa fb now_ns
  now_ns=$(date +%s%N)
  fa=$(q "SELECT first_ns FROM incidents WHERE node = '$ahead' ORDER BY decided_ns LIMIT 1;")
  fb=$(q "SELECT first_ns FROM incidents WHERE node = '$behind' ORDER BY decided_ns LIMIT 1;")
  echo "  first evidence: ahead node $(( (${fa:-0} - t_inject) / 1000000 )) ms after injection; behind node $(( (t_inject - ${fb:-0}) / 1000000000 )) s before"
  expect "ahead: incident time bounded by arrival (not 6 min ahead)" test "${fa:-0}" -ge "$t_inject" -a "${fa:-0}" -le "$((now_ns + 3000000000))"
  expect "behind: incident keeps the source time (~7 min back)" test "$(( (t_inject - ${fb:-0}) / 1000000000 ))" -ge 400
  finish skew j5 j5b
}

# ---- 6. soak: random faults for SOAK seconds -------------------------------
sc_soak() {
  local dur=$SOAK nn=16
  [ $SHORT = 1 ] && dur=${CHAOS_SHORT_SOAK:-30}
  scenario_begin c6 $nn || return 1
  DB="sqlite:$S/audit.db" MAXU=6
  job_ready j6 4 || { echo "  job not scheduled"; SC_FAIL=1; }
  start_controller c6 && wait_for 20 leading "$LAST_LOG"
  echo "$(ckpt j6 1)" | inject
  local t_end=$((SECONDS + dur)) stp=0 slow="" r n g counts=""
  local -A cnt=()
  local flapping
  flapping=$(nodes | shuf | head -2)
  local ranks=() ri all
  all=$(nodes)
  while [ $SECONDS -lt $t_end ]; do
    stp=$((stp + 1))
    # j6's 4 ranks (one per node), looked up again every 5 steps (restarts move them)
    if [ $((stp % 5)) = 1 ]; then for ri in 0 1 2 3; do ranks[ri]=$(node_of j6 $ri); done; fi
    # a straggler: one rank's node 40% slow from step 8 on, until isolated
    [ $stp = 8 ] && slow=${ranks[$((RANDOM % 4))]} &&
      { grep -qx "$slow" "$S/faulted" || echo "$slow" >> "$S/faulted"; cnt[straggler]=1; }
    {
      for ri in 0 1 2 3; do
        [ -n "${ranks[ri]}" ] || continue
        ms=$((1000 + RANDOM % 30))
        [ -n "$slow" ] && [ "${ranks[ri]}" = "$slow" ] && ms=$((ms + 400))
        step "${ranks[ri]}" 0 j6 "$ri" "$stp" "$ms"
      done
      r=$((RANDOM % 100))
      n=$(echo "$all" | shuf -n 1); g=$((RANDOM % 8))
      if [ $r -lt 8 ]; then xid "$n" $g 79; cnt[xid79]=$((${cnt[xid79]:-0} + 1))
      elif [ $r -lt 14 ]; then xid "$n" $g 48; cnt[xid48]=$((${cnt[xid48]:-0} + 1))
      elif [ $r -lt 22 ]; then xid "$n" $g 94; cnt[xid94]=$((${cnt[xid94]:-0} + 1))
      elif [ $r -lt 32 ]; then
        local ai=$((RANDOM % 4)) ap
        ap=$(pod_of j6 $ai)
        [ -n "${ranks[ai]}" ] && [ -n "$ap" ] && app_error "${ranks[ai]}" "$ap" j6 && cnt[app]=$((${cnt[app]:-0} + 1))
      fi
    } > "$S/tick.jsonl"
    inject < "$S/tick.jsonl"
    # flapping: a node's Ready condition blips False and back (kube signals)
    if [ $((RANDOM % 10)) = 0 ]; then
      local fn ts
      fn=$(echo "$flapping" | shuf -n 1); ts=$(date -u +%FT%TZ)
      # a node that keeps flapping is a node fault (rule flapping-node isolates it)
      grep -qx "$fn" "$S/faulted" || echo "$fn" >> "$S/faulted"
      K patch node "$fn" --subresource=status --type=strategic -p '{"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"chaos blip","lastHeartbeatTime":"'"$ts"'","lastTransitionTime":"'"$ts"'"}]}}' >/dev/null 2>&1
      sleep 0.5; ts=$(date -u +%FT%TZ)
      K patch node "$fn" --subresource=status --type=strategic -p '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"ok","lastHeartbeatTime":"'"$ts"'","lastTransitionTime":"'"$ts"'"}]}}' >/dev/null 2>&1
      cnt[flap]=$((${cnt[flap]:-0} + 1))
    fi
    # the straggler's node leaves once it is isolated
    [ -n "$slow" ] && cordoned "$slow" && slow=""
    sleep 0.3
  done
  for r in "${!cnt[@]}"; do counts="$counts $r=${cnt[$r]}"; done
  echo "  soak ${dur}s: $stp ticks; faults:$counts"
  SOAK_FIG="${dur}s, $stp ticks, faults:$counts"
  finish soak j6
}

log "chaos: private control plane in $CH_TMP/kube"
chaos_up || { echo "chaos: control plane did not start"; exit 1; }
T0=$SECONDS
for sc in $ONLY; do
  log "=== scenario $sc"
  SC_FAIL=0 SC_T0=$SECONDS
  "sc_$sc"
  NS=""
done
echo
echo "chaos summary ($((SECONDS - T0)) s; scenario checks run: $CHECKS)"
printf '%-10s %-5s %5s  %s\n' scenario result time "invariant figures"
for r in "${RESULTS[@]}"; do echo "$r"; done
for r in "${CLASSES[@]}"; do echo "$r"; done
[ -n "${SOAK_FIG:-}" ] && echo "soak: $SOAK_FIG"
echo "chaos: $((${#RESULTS[@]} - FAILED)) passed, $FAILED failed"
[ "$FAILED" = 0 ] && [ ${#RESULTS[@]} -gt 0 ]
