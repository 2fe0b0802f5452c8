# lib.sh - shared helpers of the fault-injection scenarios (sourced by
# test/chaos/chaos.sh): a private control plane, GPU nodes of one pool per
# scenario, the kubelet's part, controllers on a fixed port, agents, signal
# lines, injection with retry (as an agent retries), and the budget sampler.
# wait_for, now and node_yaml come from test/integration/lib.sh (whose
# controller helpers this file's own definitions below replace).
# shellcheck shell=bash

# shellcheck source=../integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"

K() { "$GH_KUBE_BIN/kubectl" "$@"; }
at() { date -u -d "$1" +%FT%T.%6NZ; } # at '+5 minutes'
log() { echo "[$(date -u +%T)] $*"; }

# ---- the private control plane ------------------------------------------
# Nodes of these tests have no kubelet: the node lifecycle controller is told
# not to mark them NotReady (else every node would look down after 40 s).
chaos_up() {
  export GH_KUBE_DIR="$CH_TMP/kube"
  GH_KUBE_NO_KWOK=1 GH_KUBE_KCM_ARGS="--node-monitor-grace-period=24h" \
    "$GH_SOURCE_DIR/test/kube/up" > "$CH_TMP/kube-env" 2> "$CH_TMP/kube-up.log" ||
    { tail -20 "$CH_TMP/kube-up.log"; return 1; }
  # shellcheck disable=SC1091
  . "$GH_KUBE_DIR/env"
  export GH_KUBE_BIN KUBECONFIG GH_KUBE_API GH_KUBE_ETCD
  K="$GH_KUBE_BIN/kubectl" # for the helpers of test/integration/lib.sh (mkjob)
}
# only ever the plane chaos_up made (never a $GH_KUBE_DIR from outside)
chaos_down() { [ -d "$CH_TMP/kube" ] && "$GH_SOURCE_DIR/test/kube/down" "$CH_TMP/kube" 2>/dev/null; }

# ---- one scenario's pool --------------------------------------------------
# scenario_begin NAME NODES: namespace NAME, nodes NAME-n01..NN (8 GPUs,
# tainted so that nothing else lands there), files under $S/.
scenario_begin() {
  NS=$1
  S="$CH_TMP/$NS"
  mkdir -p "$S"
  : > "$S/faulted"   # nodes that received a node-blaming fault
  : > "$S/hw_ids"    # ids of hardware-fault signals (each must reach the store)
  : > "$S/samples"   # budget samples: nodes isolated by gpuheal
  : > "$S/inject.sum" # per successful inject: accepted duplicates
  : > "$S/hw_map" ; : > "$S/ctl_logs" ; : > "$S/killed_logs" ; : > "$S/acks"
  CTL_PIDS=""
  KILLS=0
  K create ns "$NS" >/dev/null || return 1
  local i y="$S/nodes.yaml" ts
  ts=$(date -u +%FT%TZ)
  : > "$y"
  for i in $(seq -f %02g 1 "$2"); do
    echo --- >> "$y"
    node_yaml "n$i" "$ts" >> "$y"
  done
  K create -f "$y" >/dev/null || return 1
  echo "secret-token-$RANDOM$RANDOM" > "$S/token"
  "$GH_BIN/gpuheal" policy default | sed 's/^\(  hold:\) *30s/\1 2s/' > "$S/policy.yaml"
  ( while kill -0 $$ 2>/dev/null; do kubelet; sleep 1; done ) &
  KUBELET_PID=$!
  ( while kill -0 $$ 2>/dev/null; do sample_budget; sleep 1; done ) &
  SAMPLER_PID=$!
}

scenario_end() {
  stop_all_controllers
  kill "$KUBELET_PID" "$SAMPLER_PID" 2>/dev/null
  wait "$KUBELET_PID" "$SAMPLER_PID" 2>/dev/null
  K delete ns "$NS" --wait=false >/dev/null 2>&1
}

nodes() { K get nodes -l "gpuheal.io/pool=$NS" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }

# the kubelet's part: bound pods become Running, deleted pods go away
kubelet() {
  K -n "$NS" get pods -o jsonpath='{range .items[?(@.spec.nodeName)]}{.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null |
    while read -r p ph del; do
      if [ -n "$del" ]; then
        K -n "$NS" delete pod "$p" --grace-period=0 --force >/dev/null 2>&1
      elif [ "$ph" = Pending ]; then
        K -n "$NS" patch pod "$p" --subresource=status --type=merge \
          -p '{"status":{"phase":"Running","startTime":"'"$(date -u +%FT%TZ)"'"}}' >/dev/null 2>&1
      fi
    done
  return 0
}

# nodes gpuheal holds out of service now (its cordon annotation), one line each
isolated_now() {
  K get nodes -l "gpuheal.io/pool=$NS" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.spec.unschedulable} {.metadata.annotations.gpuheal\.io/cordoned-by}{"\n"}{end}' |
    awk '$2 == "true" && $3 != "" {print $1}'
}
sample_budget() {
  local n
  local l
  l=$(isolated_now 2>/dev/null) || return 0
  n=$(echo "$l" | grep -c .)
  echo "$(date +%s) $n" >> "$S/samples"
}

# ---- jobs -----------------------------------------------------------------
# mkjob: test/integration/lib.sh
bound() { # job count
  local n
  n=$(K -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1" \
        -o jsonpath='{range .items[?(@.spec.nodeName)]}{.metadata.name}{"\n"}{end}' | grep -c .)
  [ "$n" -ge "$2" ]
}
node_of() { # job index
  K -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1,batch.kubernetes.io/job-completion-index=$2" \
    -o jsonpath='{.items[0].spec.nodeName}'
}
pod_of() { # job index
  K -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1,batch.kubernetes.io/job-completion-index=$2" \
    -o jsonpath='{.items[0].metadata.name}'
}
restart_count() { # job -> gpuheal.io/restart-count (0 when none)
  local c
  c=$(K -n "$NS" get job "$1" -o jsonpath='{.metadata.annotations.gpuheal\.io/restart-count}' 2>/dev/null)
  echo "${c:-0}"
}
# job name count: created and its pods Running
job_ready() { mkjob "$1" "$2" && wait_for 60 bound "$1" "$2" && kubelet; }

# ---- controllers ----------------------------------------------------------
# start_controller NAME [flags...]: a replica named NAME on $PORT (0 the
# first time: the port it gets is kept, so that agents and injectors find
# the next start at the same address). DB, MAXU from the caller.
PORT=0
start_controller() {
  local name=$1; shift
  local n=$((${CTL_N:-0} + 1)); CTL_N=$n
  local out="$S/$name.$n.out" lg="$S/$name.$n.log" listen_port=${LISTEN_PORT:-$PORT}
  "$GH_BIN/gpuheal-controller" --kubeconfig "$KUBECONFIG" --listen "127.0.0.1:$listen_port" \
    --token-file "$S/token" --db "$DB" --watch-namespace "$NS" \
    --node-selector "gpuheal.io/pool=$NS" --lease-namespace "$NS" \
    --lease-duration 4s --renew-deadline 3s --retry-period 1s \
    --reorder-window 200ms --policy "$S/policy.yaml" --node-cooldown 0s \
    --max-unavailable "$MAXU" --storm-nodes 0 --max-actions-per-hour 0 \
    --identity "$name" "$@" > "$out" 2> "$lg" &
  LAST_PID=$!
  CTL_PIDS="$CTL_PIDS $LAST_PID"
  echo "$LAST_PID $lg $(date +%s%N)" >> "$S/ctl_logs"
  LAST_LOG=$lg
  wait_for 30 grep -qE "^listening on port [0-9]+$" "$out" || { echo "controller $name did not start"; tail -5 "$lg"; return 1; }
  LAST_PORT=$(sed -nE 's/^listening on port ([0-9]+)$/\1/p' "$out" | tail -n 1)
  [ "$PORT" = 0 ] && [ -z "${LISTEN_PORT:-}" ] && PORT=$LAST_PORT
  return 0
}
leading() { grep -q "event=leading" "$1"; }
stop_all_controllers() {
  local p
  for p in $CTL_PIDS; do kill "$p" 2>/dev/null; done
  for p in $CTL_PIDS; do wait "$p" 2>/dev/null; done
  CTL_PIDS=""
}
kill9() { # pid: kill -9; "log started_ns killed_ns" to $S/killed_logs (for reading a run)
  kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null; KILLS=$((KILLS + 1))
  awk -v p="$1" -v t="$(date +%s%N)" '$1 == p {print $2, $3, t}' "$S/ctl_logs" >> "$S/killed_logs"
}

# ---- signals --------------------------------------------------------------
# signal ids: unique per scenario although lines are made in subshells
# (pipelines, background storms), whose counter increments are their own
SEQ=0
sid() { SEQ=$((SEQ + 1)); SID="$NS/$1/$BASHPID.$SEQ.$RANDOM"; }
# xid NODE GPU CODE [TS]: a kernel-log XID line; a hardware fault
xid() {
  local id msg
  sid xid; id=$SID
  case $3 in
    79) msg="GPU has fallen off the bus." ;;
    48) msg="An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0." ;;
    94) msg="Contained: SM (0x1). RST: No, D-RST: No" ;;
    *) msg="Xid $3" ;;
  esac
  echo "$id" >> "$S/hw_ids"
  echo "$id $1 $(date +%s%N)" >> "$S/hw_map"
  grep -qx "$1" "$S/faulted" || echo "$1" >> "$S/faulted"
  echo '{"ts":"'"${4:-$(now)}"'","node":"'"$1"'","gpu":'"$2"',"source":"kmsg","kind":"xid","code":'"$3"',"msg":"NVRM: Xid (PCI:0000:3b:00): '"$3"', pid=4242, '"$msg"'","id":"'"$id"'"}'
}
ckpt() { # job step
  sid ckpt
  echo '{"ts":"'"$(now)"'","source":"telemetry","kind":"checkpoint","job":"'"$NS/$1"'","step":'"$2"',"path":"/ckpt/'"$1"'/'"$2"'","state":"saved","id":"'"$SID"'"}'
}
app_error() { # node pod job [TS]: through the pod's status (pod_error of
  # test/integration/lib.sh; the ingest refuses kube-kind signals), so it
  # prints no line; node and job are the pod's own
  pod_error "$2" "Traceback (most recent call last): ValueError: bad config" \
    "$(date -u -d "${4:-now}" +%FT%TZ)"
}
step() { # node gpu job rank step ms [TS]
  sid step
  echo '{"ts":"'"${7:-$(now)}"'","node":"'"$1"'","gpu":'"$2"',"source":"telemetry","kind":"step","job":"'"$NS/$3"'","rank":'"$4"',"step":'"$5"',"step_ms":'"$6"',"id":"'"$SID"'"}'
}

# inject [PORT...] < lines: posts through `gpuheal inject`, retried until
# accepted (as an agent retries a batch), to the first port that answers.
# Adds "accepted duplicates lines" to $S/inject.sum.
inject() {
  local f="$S/inj.$RANDOM$RANDOM" ports=${*:-$PORT} t=0 p out t_try
  cat > "$f"
  while [ $t -lt 300 ]; do
    for p in $ports; do
      t_try=$(date +%s%N)
      # --retries 0: this loop retries, on the next port too (a standby
      # answers 503 at once; only the leader takes signals)
      if out=$("$GH_BIN/gpuheal" inject --controller "http://127.0.0.1:$p" --token-file "$S/token" --retries 0 "$f" 2>/dev/null); then
        echo "$out" | sed -nE 's/.*"accepted":([0-9]+),"duplicates":([0-9]+).*/\1 \2/p' |
          awk -v n="$(grep -c . "$f")" '{print $1, $2, n}' >> "$S/inject.sum"
        # when each hardware fault was acknowledged (invariants.sh)
        grep -o '"id":"[^"]*/xid/[^"]*"' "$f" | sed 's/"id":"//; s/"$//' |
          awk -v t0="$t_try" -v t="$(date +%s%N)" '{print $1, t0, t}' >> "$S/acks"
        rm -f "$f"
        return 0
      fi
    done
    sleep 0.2
    t=$((t + 1))
  done
  echo "inject: no controller took $f"
  return 1
}

# ---- the store ------------------------------------------------------------
DBF() { echo "${DB#sqlite:}"; }
# q SQL: rows as "a|b" lines (python3's sqlite3 module: no sqlite3 command needed)
q() {
  python3 -c '
import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=5)
for r in c.execute(sys.argv[2]):
    print("|".join("" if v is None else str(v) for v in r))
' "$(DBF)" "$1"
}
pending_intents() { q "SELECT COUNT(*) FROM intents WHERE state = 'pending';"; }
no_pending() { [ "$(pending_intents)" = 0 ]; }
# The signal ids the store holds: a decision's evidence and the evidence
# that joined an incident after it was decided (joined_evidence).
stored_ids() {
  { q "SELECT json FROM evidence;" | grep -o '"id":"[^"]*"' | sed 's/"id":"//; s/"$//'
    q "SELECT sig_key FROM joined_evidence;" 2>/dev/null; } | sort -u
}
# What the last controller's engine still holds for other nodes (findings
# and shared causes decided when their holds end, up to a minute after the
# last onset): gpuheal_engine_held_findings on its /metrics (unreachable: 0,
# the ids are checked all the same).
engine_held() {
  local v
  v=$(curl -s --max-time 2 "http://127.0.0.1:${LAST_PORT:-0}/metrics" 2>/dev/null |
      awk '$1 == "gpuheal_engine_held_findings" {print $2}')
  echo "${v:-0}"
}
settled() { # nothing held, every hardware id in the store, no intent pending
  [ "$(pending_intents)" = 0 ] || return 1
  [ "$(engine_held)" = 0 ] || return 1
  [ -z "$(sort -u "$S/hw_ids" | comm -23 - <(stored_ids))" ]
}
