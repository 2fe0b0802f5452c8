# lib.sh - helpers shared by the integration scripts of test/integration
# (sourced, never run: CMakeLists.txt leaves it out of the kube/ tests).
#  Every script: ok / bad / check and the counters pass, fail (OK_MARK and
#  FAIL_MARK: the line prefixes, "ok:" and "FAIL:" unless set); wait_for
#  (WAIT_BY=clock: a deadline on $SECONDS, CMD's stderr discarded; else
#  SECONDS*5 tries, all CMD's output discarded); is (CMD's output equals).
#  Controller scripts - they set K (kubectl), NS (namespace and node pool),
#  TMP (work folder, token in $TMP/token, policy in $TMP/policy.yaml),
#  GH_BIN, GH_KUBECONFIG, CTL_PID, and before start_controller CTL_FLAGS
#  (their own flags, an array) and CTL_READY (the log text that says the
#  controller is ready; event=leading unless set): node_yaml / mknode (fake
#  GPU Nodes $NS-NAME), kubelet / start_kubelet (bound pods Running, deleted
#  pods removed; sets KUBELET_PID), heartbeat_leases / start_kubelet_heartbeat
#  (node Leases renewed), mkjob (Indexed Job), bound, node_of,
#  start_controller (per-start files, CTL_LOG, PORT) / stop_controller,
#  inject, now, xid79, pod_error / bare_pod (an application fault through
#  the Pod informer), runas / pg_start / pg_stop (a private PostgreSQL:
#  PGURL), start_replica / port_of, node predicates (cordoned, tainted...), died, and
#  cleanup parts (delete_incidents, delete_gnh, rm_tmp).
#  Agent scripts - they set node (the Node's name), tmp (work folder) and
#  aport (the agent's HTTP port) where used: k, fake_node / delete_fake_node,
#  die (DIE_TAIL lines of the agent logs, then DIE_CTL_LOG's when set), gnh,
#  gcond, metrics / metric, lines, rm_agent_tmp.
# shellcheck shell=bash

# ---- counting checks ------------------------------------------------------
pass=0 fail=0
ok() { echo "${OK_MARK:-ok:} $*"; pass=$((pass + 1)); }
bad() { echo "${FAIL_MARK:-FAIL:} $*"; fail=$((fail + 1)); }
check() { local what="$1"; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

# wait_for SECONDS CMD...: polls every 0.2 s
wait_for() {
  if [ "${WAIT_BY:-tries}" = clock ]; then
    local until=$((SECONDS + $1)); shift
    until "$@" 2>/dev/null; do [ $SECONDS -ge $until ] && return 1; sleep 0.2; done
    return 0
  fi
  local t=$(($1 * 5)); shift
  while [ $t -gt 0 ]; do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
    t=$((t - 1))
  done
  return 1
}

now() { date -u +%FT%T.%6NZ; }
# is VALUE CMD...: CMD prints VALUE (under wait_for, CMD runs on every poll,
# where `test "$(CMD)" = VALUE` would compare one output taken before)
is() { local want=$1; shift; [ "$("$@")" = "$want" ]; }

# ---- controller scripts: nodes, the kubelet's part, jobs ------------------
# node_yaml NAME [TS]: GPU Node $NS-NAME of pool $NS (tainted so that other
# tests' pods stay away), heartbeat and transition time TS (now unless set)
node_yaml() {
  local ts=${2:-$(date -u +%FT%TZ)}
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NS-$1
  labels: {gpuheal.io/pool: "$NS", kubernetes.io/hostname: "$NS-$1"}
spec:
  taints: [{key: gpuheal.io/test-only, effect: NoSchedule}]
status:
  capacity: {nvidia.com/gpu: "8", cpu: "64", memory: 512Gi, pods: "110"}
  allocatable: {nvidia.com/gpu: "8", cpu: "64", memory: 512Gi, pods: "110"}
  conditions:
  - {type: Ready, status: "True", reason: KubeletReady, message: ok,
     lastHeartbeatTime: "$ts", lastTransitionTime: "$ts"}
EOF
}
mknode() { node_yaml "$1" | "$K" create -f - >/dev/null; }

# the kubelet's part: bound pods become Running, deleted pods go away
kubelet() {
  "$K" -n "$NS" get pods -o jsonpath='{range .items[?(@.spec.nodeName)]}{.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null |
    while read -r p ph del; do
      if [ -n "$del" ]; then
        "$K" -n "$NS" delete pod "$p" --grace-period=0 --force >/dev/null 2>&1
      elif [ "$ph" = Pending ]; then
        "$K" -n "$NS" patch pod "$p" --subresource=status --type=merge \
          -p '{"status":{"phase":"Running","startTime":"'"$(date -u +%FT%TZ)"'"}}' >/dev/null 2>&1
      fi
    done
  return 0
}
# stop_kubelet: the loop and what it runs now (a kubectl patch in flight
# would land after the caller's own patches: a pod it failed Running again)
stop_kubelet() {
  [ -n "${KUBELET_PID:-}" ] || return 0
  local pids=$KUBELET_PID all="" p
  while [ -n "$pids" ]; do # the loop's descendants, stopped before they act
    all="$all $pids"
    kill -STOP $pids 2>/dev/null
    pids=$(for p in $pids; do pgrep -P "$p"; done | tr '\n' ' ')
  done
  kill -KILL $all 2>/dev/null
  wait "$KUBELET_PID" 2>/dev/null
  KUBELET_PID=""
}
# every second in the background while the script runs
start_kubelet() {
  ( while kill -0 $$ 2>/dev/null; do kubelet; sleep 1; done ) &
  KUBELET_PID=$!
}
# heartbeat_leases SUFFIX...: the kubelets' node Leases ($NS-SUFFIX in
# kube-node-lease, labelled gpuheal.io/pool=$NS), renewed now: without them
# the node lifecycle controller marks fake nodes NotReady after its grace
# period (40-50 s), which the controller would see as node_not_ready
# signals and the scheduler as an unreachable taint
heartbeat_leases() {
  local n rt
  rt=$(date -u +%FT%T.%6NZ)
  {
    echo "apiVersion: v1"; echo "kind: List"; echo "items:"
    for n in "$@"; do
      echo "- {apiVersion: coordination.k8s.io/v1, kind: Lease, metadata: {name: $NS-$n, namespace: kube-node-lease, labels: {gpuheal.io/pool: \"$NS\"}}, spec: {holderIdentity: $NS-$n, leaseDurationSeconds: 40, renewTime: \"$rt\"}}"
    done
  } | "$K" apply -f - >/dev/null 2>&1
  return 0
}
# start_kubelet_heartbeat SUFFIX...: start_kubelet, plus the nodes' Leases
# every 10 s
start_kubelet_heartbeat() {
  ( i=0; while kill -0 $$ 2>/dev/null; do
      [ $((i % 10)) -eq 0 ] && heartbeat_leases "$@"
      kubelet; sleep 1; i=$((i + 1))
    done ) &
  KUBELET_PID=$!
}

mkjob() { # name completions
  cat <<EOF | "$K" -n "$NS" create -f - >/dev/null
apiVersion: batch/v1
kind: Job
metadata: {name: $1}
spec:
  completions: $2
  parallelism: $2
  completionMode: Indexed
  backoffLimit: 100
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {gpuheal.io/pool: "$NS"}
      tolerations: [{key: gpuheal.io/test-only, operator: Exists}]
      containers:
      - name: train
        image: trainer:latest
        resources: {limits: {nvidia.com/gpu: "8"}}
EOF
}

bound() { # job count: all its pods bound to a node
  local n
  n=$("$K" -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1" \
        -o jsonpath='{range .items[?(@.spec.nodeName)]}{.metadata.name}{"\n"}{end}' | grep -c .)
  [ "$n" -ge "$2" ]
}

node_of() { # job index -> node
  "$K" -n "$NS" get pods -l "batch.kubernetes.io/job-name=$1,batch.kubernetes.io/job-completion-index=$2" \
    -o jsonpath='{.items[0].spec.nodeName}'
}

# ---- controller scripts: the controller -----------------------------------
# Each start writes files of its own: `cmd > file &` truncates the file in
# the child, after the parent may already have read the previous start's
# "listening on port" line from it (seen in CI: an empty port).
CTL_N=0
CTL_LOG="${TMP:-}/ctl.0.log"
start_controller() { # db extra-flags...
  local db="$1"; shift
  CTL_N=$((CTL_N + 1))
  local out="$TMP/ctl.$CTL_N.out"
  CTL_LOG="$TMP/ctl.$CTL_N.log"
  "$GH_BIN/gpuheal-controller" --kubeconfig "$GH_KUBECONFIG" --listen 127.0.0.1:0 \
    --token-file "$TMP/token" --db "$db" --watch-namespace "$NS" \
    --node-selector "gpuheal.io/pool=$NS" "${CTL_FLAGS[@]}" \
    --reorder-window 200ms --policy "$TMP/policy.yaml" --node-cooldown 0s \
    "$@" > "$out" 2> "$CTL_LOG" &
  CTL_PID=$!
  # the whole line, number included: a half-written line must not pass
  wait_for 20 grep -qE "^listening on port [0-9]+$" "$out" ||
    { bad "controller start"; tail -20 "$CTL_LOG"; return 1; }
  PORT=$(sed -nE 's/^listening on port ([0-9]+)$/\1/p' "$out" | tail -n 1)
  [ -n "$PORT" ] || { bad "controller port"; return 1; }
  wait_for 20 grep -q "${CTL_READY:-event=leading}" "$CTL_LOG"
}

# SIGTERM; succeeds when the controller exits 0 (sanitizer builds: no leak)
stop_controller() {
  local st=0
  if [ -n "$CTL_PID" ]; then
    kill "$CTL_PID" 2>/dev/null
    wait "$CTL_PID" 2>/dev/null || st=$?
    CTL_PID=""
  fi
  return $st
}
died() { ! kill -0 "$CTL_PID" 2>/dev/null; }

inject() { # JSON lines on stdin
  "$GH_BIN/gpuheal" inject --controller "http://127.0.0.1:$PORT" --token-file "$TMP/token" - >/dev/null
}

# pod_error POD MSG [TS]: POD's first container restarted after exit code
# 1 with termination message MSG (finished at TS, now unless set), written
# to the pod's status as the kubelet would; the controller's Pod informer
# makes it a pod_failed signal (kube-kind signals come only from the
# informers: the ingest refuses source "kube")
pod_error() {
  local pod=$1 msg=$2 ts=${3:-$(date -u +%FT%TZ)} c rc
  c=$("$K" -n "$NS" get pod "$pod" -o jsonpath='{.spec.containers[0].name}') || return 1
  rc=$("$K" -n "$NS" get pod "$pod" -o jsonpath='{.status.containerStatuses[0].restartCount}')
  rc=$((${rc:-0} + 1))
  "$K" -n "$NS" patch pod "$pod" --subresource=status --type=merge -p '{"status":{"containerStatuses":[{"name":"'"$c"'","ready":true,"restartCount":'"$rc"',"image":"busybox","imageID":"","state":{"running":{"startedAt":"'"$ts"'"}},"lastState":{"terminated":{"exitCode":1,"reason":"Error","message":"'"$msg"'","startedAt":"'"$ts"'","finishedAt":"'"$ts"'"}}}]}}' >/dev/null
}
# bare_pod NAME NODE JOB: a pod bound to NODE, labelled as job JOB's
bare_pod() {
  "$K" -n "$NS" create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {job-name: $3}}
spec:
  nodeName: $2
  restartPolicy: OnFailure
  tolerations: [{operator: Exists}]
  containers: [{name: main, image: busybox}]
EOF
}

xid79() { # node gpu
  echo '{"ts":"'"$(now)"'","node":"'"$1"'","gpu":'"$2"',"source":"kmsg","kind":"xid","code":79,"msg":"NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.","id":"xid-'"$1"'-'"$RANDOM"'"}'
}

# ---- controller scripts: a private PostgreSQL, controller replicas ---------
# as root, PostgreSQL runs as "postgres"
runas() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# pg_start: a private PostgreSQL cluster on a Unix socket in a temp folder;
# sets PG_BIN, PG_DIR and PGURL. Returns 2 without the server binaries (a
# skip), 1 when the cluster does not start; pg_stop undoes it.
pg_start() {
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  { [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ]; } || return 2
  PG_DIR=$(mktemp -d /tmp/gh-pg.XXXXXX)
  [ "$(id -u)" = 0 ] && chown postgres "$PG_DIR"
  runas "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U postgres --no-sync >/dev/null 2>&1 &&
    runas "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -o "-k $PG_DIR -c listen_addresses= -F" \
      -l "$PG_DIR/log" -w start >/dev/null 2>&1 || return 1
  PGURL="postgresql://postgres@$(echo "$PG_DIR" | sed 's|/|%2F|g'):5432/postgres"
}
pg_stop() {
  [ -n "${PG_DIR:-}" ] || return 0
  runas "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate stop >/dev/null 2>&1
  rm -rf "$PG_DIR"
  PG_DIR=""
}
# start_replica DB LEASE NAME: a controller replica in the background ($! its
# pid): Lease LEASE in $NS, identity NAME, output $TMP/NAME.out, log
# $TMP/NAME.log; port_of NAME: its ingest port
start_replica() {
  "$GH_BIN/gpuheal-controller" --kubeconfig "$GH_KUBECONFIG" --listen 127.0.0.1:0 \
    --token-file "$TMP/token" --db "$1" --watch-namespace "$NS" \
    --node-selector "gpuheal.io/pool=$NS" --lease-namespace "$NS" --lease-name "$2" \
    --lease-duration 4s --renew-deadline 3s --retry-period 1s --reorder-window 200ms \
    --policy "$TMP/policy.yaml" --node-cooldown 0s --max-unavailable 10 \
    --identity "$3" > "$TMP/$3.out" 2> "$TMP/$3.log" &
}
port_of() { sed -nE 's/^listening on port ([0-9]+)$/\1/p' "$TMP/$1.out" | tail -n 1; }

# ---- controller scripts: node state ---------------------------------------
taints_of() { "$K" get node "$1" -o jsonpath='{range .spec.taints[*]}{.key}:{.effect}{" "}{end}'; }
cordoned() { [ "$("$K" get node "$1" -o jsonpath='{.spec.unschedulable}')" = true ]; }
uncordoned() { ! cordoned "$1"; }
tainted() { taints_of "$1" | grep -q "gpuheal.io/unhealthy:NoSchedule"; }
untainted() { ! tainted "$1"; }

# ---- controller scripts: cleanup parts ------------------------------------
delete_gnh() { # node suffixes: GPUNodeHealth $NS-SUFFIX each
  local n
  for n in "$@"; do "$K" delete gpunodehealth "$NS-$n" --wait=false >/dev/null 2>&1; done
}
# delete_incidents [JSONPATH PATTERN]: the Incidents whose JSONPATH
# ({.spec.node} unless set) matches PATTERN (^$NS- unless set)
delete_incidents() {
  local jp=${1:-'{.spec.node}'} pat=${2:-"^$NS-"}
  "$K" get incidents -o name 2>/dev/null | while read -r i; do
    "$K" get "$i" -o jsonpath="$jp" 2>/dev/null | grep -q "$pat" &&
      "$K" delete "$i" --wait=false >/dev/null 2>&1
  done
}
rm_tmp() { if [ "${GH_E2E_KEEP:-}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi; }

# ---- agent scripts --------------------------------------------------------
k() { "$GH_KUBE_BIN/kubectl" "$@"; }
die() {
  bad "$*"
  echo "--- agent log"; tail -n "${DIE_TAIL:-30}" "$tmp"/agent*.log
  if [ -n "${DIE_CTL_LOG:-}" ]; then echo "--- controller log"; tail -n 30 "$DIE_CTL_LOG"; fi
  exit 1
}
# fake_node GPUS [POOL]: kwok's fake Node $node (label gpuheal.io/pool=POOL
# when given), tainted gpuheal.io/test-only
fake_node() {
  local pool=""
  [ -n "${2:-}" ] && pool="gpuheal.io/pool: \"$2\", "
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
  labels: {${pool}gpuheal.io/fake: "true", kubernetes.io/hostname: $node}
  annotations: {kwok.x-k8s.io/node: fake}
spec:
  taints: [{key: gpuheal.io/test-only, effect: NoSchedule}]
status:
  capacity: {nvidia.com/gpu: "$1"}
EOF
}
# the Node $node and its GPUNodeHealth, without waiting
delete_fake_node() {
  k delete gpunodehealths.gpuheal.io "$node" --ignore-not-found --wait=false >/dev/null 2>&1
  k delete node "$node" --ignore-not-found --wait=false >/dev/null 2>&1
}
# $tmp, kept (and named) when GH_KEEP_TMP is set
rm_agent_tmp() { [ -n "${GH_KEEP_TMP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"; }
gnh() { k get gpunodehealths.gpuheal.io "$node" -o "jsonpath=$1"; }
gcond() { gnh "{.status.conditions[?(@.type==\"$1\")].$2}"; } # type field
metrics() { curl -s "http://127.0.0.1:$aport/metrics"; }
metric() { metrics | awk -v m="$1" '$1 == m {print $2}'; }
lines() { [ -f "$1" ] && wc -l < "$1" || echo 0; }
