#!/usr/bin/env bash
# controller_e2e.sh - gpuheal-controller end to end on the local control
# plane (test/kube): an XID 79 on one node of a running Indexed Job ->
# cordon + taint, the Job restarted away from that node with the right
# checkpoint ConfigMap, Incident + Events + audit rows, and `gpuheal explain`
# naming the XID line and the rule; an application error -> no node action;
# the node budget exhausted -> "not acted: budget"; the validation gate
# returning the node to service, and a new fault there a new incident; dry
# run; approval with `gpuheal approve`;
# kill -9 in the middle of an incident (no action lost, none done twice);
# the same on PostgreSQL; two replicas: only the leader acts, the standby
# takes over when the leader is killed.
#
# Needs GH_BIN, GH_KUBECONFIG, GH_KUBE_ENV (CTest sets them). Nodes here are
# not kwok's (kwok completes Job pods at once): this script plays the
# kubelet, marking bound pods Running.
set -uo pipefail
: "${GH_BIN:?}" "${GH_KUBECONFIG:?}" "${GH_KUBE_ENV:?}"
. "$GH_KUBE_ENV"
export KUBECONFIG="$GH_KUBECONFIG"
K="$GH_KUBE_BIN/kubectl"
NS="ctl-e2e-$$-$RANDOM"
TMP=$(mktemp -d /tmp/gh-ctl-e2e.XXXXXX)
CTL_PID=""
KUBELET_PID=""
PG_DIR=""
CTL_FLAGS=(--lease-namespace "$NS" --lease-duration 4s --renew-deadline 3s --retry-period 1s
  --identity "e2e-$$")
. "$(dirname "$0")/lib.sh"

cleanup() {
  stop_controller
  [ -n "${PID_A:-}" ] && kill -9 "$PID_A" 2>/dev/null
  [ -n "${PID_B:-}" ] && kill "$PID_B" 2>/dev/null
  kill "$KUBELET_PID" 2>/dev/null
  "$K" delete ns "$NS" --wait=false >/dev/null 2>&1
  "$K" delete nodes -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  "$K" delete gpunodehealths -l "gpuheal.io/pool=$NS" --wait=false >/dev/null 2>&1
  delete_gnh g1 g2 g3 g4
  delete_incidents
  pg_stop
  rm_tmp
}
trap cleanup EXIT

"$K" create ns "$NS" >/dev/null || { echo "FAIL: namespace"; exit 1; }
echo "secret-token-$RANDOM" > "$TMP/token"

# four GPU nodes of our own (tainted so that other tests' pods stay away)
for n in g1 g2 g3 g4; do mknode $n || { echo "FAIL: node $n"; exit 1; }; done

# the kubelet's part, every second in the background: bound pods become
# Running, deleted pods go away
start_kubelet

# what the scheduler saw, when a job's pods did not bind
show_scheduling() {
  echo "--- nodes"; "$K" get nodes -l "gpuheal.io/pool=$NS" -o wide 2>&1 | sed 's/^/  /'
  "$K" get nodes -l "gpuheal.io/pool=$NS" -o jsonpath='{range .items[*]}{.metadata.name} {.spec.taints}{"\n"}{end}' 2>&1 | sed 's/^/  /'
  echo "--- pods"; "$K" -n "$NS" get pods -o wide 2>&1 | sed 's/^/  /'
  echo "--- events"; "$K" -n "$NS" get events --sort-by=.lastTimestamp 2>&1 | tail -15 | sed 's/^/  /'
}

restarted_for() { [ -n "$("$K" -n "$NS" get job "$1" -o jsonpath='{.metadata.annotations.gpuheal\.io/restarted-for}' 2>/dev/null)" ]; }
incident_phase() { "$K" get incident "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
# the newest incident about node $2 in store $1
id_in_db() { "$GH_BIN/gpuheal" explain "node/$2" --db "$1" 2>/dev/null | sed -n 's/^\[[0-9]*\] \(inc-[0-9a-f]*\):.*/\1/p' | tail -1; }
has_id() { [ -n "$(id_in_db "$1" "$2")" ]; }
id_phase_is() { [ "$(incident_phase "$1")" = "$2" ]; }

"$GH_BIN/gpuheal" policy default | sed 's/^\(  hold:\) *30s/\1 2s/' > "$TMP/policy.yaml"
grep -q "hold: 2s" "$TMP/policy.yaml" || { echo "FAIL: policy"; exit 1; }

# ---- 1. XID 79 on a node of a running Indexed Job (SQLite) -----------------
mkjob llm 2
# where its checkpoints are: the resume names only a path under it
"$K" -n "$NS" annotate job llm gpuheal.io/checkpoint-prefix=s3://ckpt/llm/ >/dev/null || bad "annotate llm"
wait_for 30 bound llm 2 || bad "job pods bound"
kubelet
B=$(node_of llm 0); OTHER=$(node_of llm 1)
[ -n "$B" ] || { bad "job llm not scheduled"; show_scheduling; exit 1; }
echo "job llm on $B and $OTHER"
DB="sqlite:$TMP/audit.db"
start_controller "$DB" --max-unavailable 1 || exit 1
sleep 1
{
  echo '{"ts":"'"$(now)"'","source":"telemetry","kind":"checkpoint","job":"'"$NS"'/llm","step":1200,"path":"s3://ckpt/llm/step-1200","state":"saved"}'
  xid79 "$B" 3
} | inject || bad "inject"
check "cordoned $B" wait_for 20 cordoned "$B"
check "tainted $B gpuheal.io/unhealthy:NoSchedule" wait_for 10 tainted "$B"
check "job restarted" wait_for 20 restarted_for llm
cm_step=$("$K" -n "$NS" get configmap llm-gpuheal-resume -o jsonpath='{.data.step}' 2>/dev/null)
cm_path=$("$K" -n "$NS" get configmap llm-gpuheal-resume -o jsonpath='{.data.path}' 2>/dev/null)
check "resume ConfigMap step 1200 ($cm_step)" [ "$cm_step" = 1200 ]
check "resume ConfigMap path ($cm_path)" [ "$cm_path" = s3://ckpt/llm/step-1200 ]
check "new pods bound" wait_for 30 bound llm 2
kubelet
newnodes=$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=llm -o jsonpath='{range .items[*]}{.spec.nodeName} {.metadata.deletionTimestamp}{"\n"}{end}' | awk 'NF==1{print $1}')
check "restarted pods away from $B ($(echo $newnodes))" sh -c "! echo '$newnodes' | grep -qx '$B'"
INC=$(id_in_db "$DB" "$B")
check "Incident object $INC" wait_for 10 "$K" get incident "$INC"
# no agent runs on $B: the reboot stays requested, the incident Acting
# (agent_request_outcomes.sh follows the agent's answers)
check "Incident phase Acting (the reboot requested, not answered)" wait_for 10 id_phase_is "$INC" Acting
check "Incident status: reboot_node Running" sh -c "'$K' get incident '$INC' -o jsonpath='{range .status.actions[*]}{.action}={.result}{\"\\n\"}{end}' | grep -qx reboot_node=Running"
check "Incident spec rule" [ "$("$K" get incident "$INC" -o jsonpath='{.spec.rule}')" = gpu-fell-off-bus ]
check "Events on node $B" wait_for 10 sh -c "'$K' get events.events.k8s.io -A --field-selector regarding.name=$B -o name | grep -q ."
check "Events on job llm" wait_for 10 sh -c "'$K' -n $NS get events.events.k8s.io --field-selector regarding.name=llm -o name | grep -q ."
# what on-call people read (operations.md): kubectl describe lists an Event
# only when its regarding.uid is the object's
check "kubectl describe node/$B lists GPUFault and GPUHealAction" wait_for 10 sh -c "'$K' describe node/$B | sed -n '/^Events:/,\$p' > '$TMP/describe-node.txt' && grep -q 'Warning  *GPUFault ' '$TMP/describe-node.txt' && grep -q 'Normal  *GPUHealAction ' '$TMP/describe-node.txt'"
check "kubectl describe job/llm lists GPUHealAction" wait_for 10 sh -c "'$K' -n $NS describe job/llm | sed -n '/^Events:/,\$p' | grep -q 'GPUHealAction '"
check "kubectl describe incident/$INC lists IncidentDecided" wait_for 10 sh -c "'$K' describe incident/$INC | sed -n '/^Events:/,\$p' | grep -q 'Warning  *IncidentDecided '"
check "Event reportingController gpuheal.io/controller, instance e2e-$$" sh -c "'$K' get events.events.k8s.io -A --field-selector regarding.name=$B -o jsonpath='{range .items[*]}{.reportingController} {.reportingInstance} {.regarding.uid}{\"\\n\"}{end}' | grep -q '^gpuheal.io/controller e2e-$$ [0-9a-f-]\\{36\\}\$'"
"$GH_BIN/gpuheal" explain "job/$NS/llm" --db "$DB" > "$TMP/explain.txt"
check "explain names the XID line" grep -q "GPU has fallen off the bus" "$TMP/explain.txt"
check "explain names the rule" grep -q "rule gpu-fell-off-bus chose" "$TMP/explain.txt"
check "explain: isolate_node succeeded" grep -q "isolate_node node/$B: succeeded" "$TMP/explain.txt"
check "explain: restart succeeded" grep -q "restart_from_checkpoint job/$NS/llm: succeeded" "$TMP/explain.txt"
check "explain: reboot requested" grep -q "reboot_node node/$B: requested" "$TMP/explain.txt"
check "explain: the reboot not said to have succeeded" sh -c "! grep -q 'reboot_node node/$B: succeeded' '$TMP/explain.txt'"
"$GH_BIN/gpuheal" timeline "node/$B" --db "$DB" > "$TMP/timeline.txt"
check "timeline has seen/decided/action rows" sh -c "grep -q ' seen ' '$TMP/timeline.txt' && grep -q ' decided ' '$TMP/timeline.txt' && grep -q ' action ' '$TMP/timeline.txt'"
check "GPUNodeHealth reboot request" sh -c "'$K' get gpunodehealth '$B' -o jsonpath='{.metadata.annotations}' | grep -q request-reboot_node"

# ---- 2. an application error: no node action -------------------------------
mkjob app 1
wait_for 30 bound app 1
kubelet
APPNODE=$(node_of app 0)
[ -n "$APPNODE" ] || { bad "job app not scheduled"; show_scheduling; exit 1; }
APPPOD=$("$K" -n "$NS" get pods -l batch.kubernetes.io/job-name=app -o jsonpath='{.items[0].metadata.name}')
# through the pod's status (the ingest refuses kube-kind signals)
pod_error "$APPPOD" "Traceback (most recent call last): ValueError: bad config" || bad "pod error"
app_decided() { "$GH_BIN/gpuheal" explain "job/$NS/app" --db "$DB" | grep -q "application"; }
check "application incident recorded" wait_for 20 app_decided
"$GH_BIN/gpuheal" explain "job/$NS/app" --db "$DB" > "$TMP/app.txt"
check "application: retry_in_place chosen" grep -q "chose: retry_in_place" "$TMP/app.txt"
check "application: no node blamed" grep -q "no node blamed" "$TMP/app.txt"
check "application: $APPNODE not cordoned" uncordoned "$APPNODE"
app_events() { "$K" -n "$NS" get events --field-selector "involvedObject.name=app,reason=$1" -o name; }
check "application: the Job's Warning Event says ApplicationFault" wait_for 20 sh -c \
  "'$K' -n '$NS' get events --field-selector 'involvedObject.name=app,reason=ApplicationFault' -o name | grep -q ."
check "application: no GPUFault Event on the Job" is "" app_events GPUFault

# ---- 3. the budget: one node out of service at most -------------------------
C=$(for n in g1 g2 g3 g4; do echo "$NS-$n"; done | grep -vx "$B" | grep -vx "$APPNODE" | head -1)
xid79 "$C" 0 | inject
budget_denied() { "$GH_BIN/gpuheal" explain "node/$C" --db "$DB" | grep -q "not acted: budget"; }
check "budget: second isolation denied" wait_for 20 budget_denied
check "budget: $C not cordoned" uncordoned "$C"
check "budget: guard trip in /metrics" sh -c "curl -s http://127.0.0.1:$PORT/metrics | grep -q 'gpuheal_guard_trips_total{guard=\"budget\"} [1-9]'"
check "metrics: incidents by class" sh -c "curl -s http://127.0.0.1:$PORT/metrics | grep -q 'gpuheal_incidents_total{class=\"gpu_hardware\"} [1-9]'"
check "metrics: latency histogram" sh -c "curl -s http://127.0.0.1:$PORT/metrics | grep -q 'gpuheal_decision_latency_seconds_count [1-9]'"
check "healthz" sh -c "curl -s http://127.0.0.1:$PORT/healthz | grep -q ok"

# ---- 4. the validation gate returns the node to service --------------------
VALIDATED_AT=$(date -u -d '+2 seconds' +%s)
"$K" patch gpunodehealth "$B" --subresource=status --type=merge \
  -p '{"status":{"conditions":[{"type":"Validated","status":"True","reason":"ProbePassed","message":"gemm_checksum passed","lastTransitionTime":"'"$(date -u -d "@$VALIDATED_AT" +%FT%TZ)"'"}]}}' >/dev/null
check "validated node uncordoned" wait_for 20 uncordoned "$B"
check "validated node untainted" wait_for 10 untainted "$B"
# the controller says when its engine took the node as returned (the
# release's own report, not the informer's later sight of the Node)
check "node_returned logged (by the validation gate)" wait_for 20 \
  grep -q "event=node_returned node=$B by=validation" "$CTL_LOG"
# returned to service, the node faults again within the old incident's
# episode (30 min): a new incident, the node out of service again. After
# the validation's own time has passed: a validation stamped after the new
# isolation would (rightly) pass the gate for it too.
check "the validation's time has passed" wait_for 10 sh -c "[ \$(date +%s) -gt $VALIDATED_AT ]"
xid79 "$B" 6 | inject
check "returned node faults again: cordoned again" wait_for 20 cordoned "$B"
check "returned node faults again: two incidents" sh -c "[ \$('$GH_BIN/gpuheal' explain node/$B --db '$DB' | grep -c '^\[[0-9]*\] inc-') -ge 2 ]"
"$K" patch gpunodehealth "$B" --subresource=status --type=merge \
  -p '{"status":{"conditions":[{"type":"Validated","status":"True","reason":"ProbePassed","message":"gemm_checksum passed","lastTransitionTime":"'"$(date -u -d '+2 seconds' +%FT%TZ)"'"}]}}' >/dev/null
check "validated again: uncordoned" wait_for 20 uncordoned "$B"
check "controller stops cleanly on SIGTERM" stop_controller

# ---- 5. dry run: decide and record, never act -------------------------------
DRY="sqlite:$TMP/dry.db"
start_controller "$DRY" --dry-run --max-unavailable 1 || exit 1
xid79 "$C" 1 | inject
check "dry run: incident recorded" wait_for 20 has_id "$DRY" "$C"
DID=$(id_in_db "$DRY" "$C")
check "dry run: Incident $DID phase Skipped" wait_for 10 id_phase_is "$DID" Skipped
check "dry run: spec.dryRun" [ "$("$K" get incident "$DID" -o jsonpath='{.spec.dryRun}')" = true ]
check "dry run: $C not cordoned" uncordoned "$C"
check "dry run: explain says so" sh -c "'$GH_BIN/gpuheal' explain node/$C --db '$DRY' | grep -q 'dry run: would act'"
# what a person reads: the Dry-Run column, and the Node's Warning Event
dry_column() { # kubectl get incident ID: the DRY-RUN column reads true
  # by position: kubectl aligns the columns, and an empty one leaves a gap
  "$K" get incident "$DID" | awk 'NR == 1 { c = index($0, "DRY-RUN") }
    NR == 2 { split(substr($0, c), w, " "); exit !(c && w[1] == "true") }'
}
check "dry run: kubectl get incident shows DRY-RUN true" dry_column
dry_event() { # the Node's GPUFault Event for DID says dry run first
  "$K" get events -A --field-selector "involvedObject.name=$C,reason=GPUFault" \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -q "^$DID: dry run, no action taken: "
}
check "dry run: the Node's GPUFault Event says dry run" wait_for 20 dry_event
# Issue 26: a second node's XID 79 within the dry run: its verdict counts the
# first one's would-be isolation against the budget of 1 (it used to say
# "would act" for both, under-reporting what the budget would hold).
C2=$(for n in g1 g2 g3 g4; do echo "$NS-$n"; done | grep -vx "$B" | grep -vx "$APPNODE" | grep -vx "$C" | tail -1)
xid79 "$C2" 3 | inject
check "dry run: second node's incident recorded" wait_for 20 has_id "$DRY" "$C2"
check "dry run: $C2's verdict: would not act, the budget held by the dry run's own first verdict" \
  wait_for 20 sh -c "'$GH_BIN/gpuheal' explain node/$C2 --db '$DRY' | grep -q \"dry run: would not act (not acted: budget (1 of 1 nodes already out of service, 1 of them by this dry run's own verdicts\""
check "dry run: $C2 not cordoned" uncordoned "$C2"
stop_controller

# ---- 6. approval ------------------------------------------------------------
APR="sqlite:$TMP/approval.db"
start_controller "$APR" --require-approval --max-unavailable 10 || exit 1
D=$(for n in g1 g2 g3 g4; do echo "$NS-$n"; done | grep -vx "$B" | grep -vx "$APPNODE" | grep -vx "$C" | head -1)
xid79 "$D" 2 | inject
check "approval: incident recorded" wait_for 20 has_id "$APR" "$D"
AID=$(id_in_db "$APR" "$D")
check "approval: $AID waits" wait_for 20 id_phase_is "$AID" AwaitingApproval
sleep 1
check "approval: $D not cordoned yet" uncordoned "$D"
"$GH_BIN/gpuheal" approve "$AID" --kubeconfig "$GH_KUBECONFIG" --by e2e >/dev/null
check "approval: cordoned after gpuheal approve" wait_for 20 cordoned "$D"
check "approval: phase Acting (its reboot requested)" wait_for 20 id_phase_is "$AID" Acting
check "approval: explain shows the approver" sh -c "'$GH_BIN/gpuheal' explain node/$D --db '$APR' | grep -q 'approved by e2e'"
check "approval: controller stops cleanly" stop_controller

# ---- 7. kill -9 in the middle of an incident --------------------------------
CRASH="sqlite:$TMP/crash.db"
"$K" -n "$NS" delete job llm --wait=true >/dev/null 2>&1
mkjob ckpt 1
wait_for 60 bound ckpt 1
kubelet
E=$(node_of ckpt 0)
[ -n "$E" ] || { bad "crash: job ckpt not scheduled"; show_scheduling; exit 1; }
OLDUID=$("$K" -n "$NS" get job ckpt -o jsonpath='{.metadata.uid}')
GPUHEAL_TEST_CRASH_AFTER=isolate_node start_controller "$CRASH" --max-unavailable 10 || exit 1
{
  echo '{"ts":"'"$(now)"'","source":"telemetry","kind":"checkpoint","job":"'"$NS"'/ckpt","step":77,"path":"/ckpt/77","state":"saved"}'
  xid79 "$E" 4
} > "$TMP/crash.jsonl"
inject < "$TMP/crash.jsonl"
check "crash: controller killed itself after cordoning" wait_for 20 died
stop_controller
check "crash: $E cordoned before the crash" cordoned "$E"
check "crash: job not restarted yet" [ "$("$K" -n "$NS" get job ckpt -o jsonpath='{.metadata.uid}')" = "$OLDUID" ]
start_controller "$CRASH" --max-unavailable 10 || exit 1
check "crash: restart completed after the new start" wait_for 20 restarted_for ckpt
# the agent sends the same signals again: the same incident, never decided twice
inject < "$TMP/crash.jsonl"
sleep 2
check "crash: job restarted once" [ "$("$K" -n "$NS" get job ckpt -o jsonpath='{.metadata.annotations.gpuheal\.io/restart-count}')" = 1 ]
check "crash: one gpuheal taint" [ "$(taints_of "$E" | tr ' ' '\n' | grep -c gpuheal.io/unhealthy)" = 1 ]
check "crash: resume step 77" [ "$("$K" -n "$NS" get configmap ckpt-gpuheal-resume -o jsonpath='{.data.step}')" = 77 ]
"$GH_BIN/gpuheal" explain "node/$E" --db "$CRASH" > "$TMP/crash.txt"
check "crash: isolate replayed as noop" grep -q "isolate_node node/$E: noop" "$TMP/crash.txt"
check "crash: one restart recorded" [ "$(grep -c "restart_from_checkpoint job/$NS/ckpt: succeeded" "$TMP/crash.txt")" = 1 ]
check "crash: incident decided once" [ "$(grep -c '^\[' "$TMP/crash.txt")" = 1 ]
stop_controller

# ---- 8. PostgreSQL ----------------------------------------------------------
pg_start; pg_rc=$?
if [ $pg_rc = 0 ]; then
  start_controller "$PGURL" --max-unavailable 10 || exit 1
  F=$(for n in g1 g2 g3 g4; do uncordoned "$NS-$n" && echo "$NS-$n"; done | head -1)
  xid79 "$F" 5 | inject
  check "postgres: $F cordoned" wait_for 20 cordoned "$F"
  pg_explained() { "$GH_BIN/gpuheal" explain "node/$F" --db "$PGURL" | grep -q "isolate_node node/$F: succeeded"; }
  check "postgres: explain from the PostgreSQL store" wait_for 10 pg_explained
  check "postgres: controller stops cleanly" stop_controller
elif [ $pg_rc = 1 ]; then
  bad "postgres: could not start a private cluster"
else
  echo "skip: postgres (no server binaries)"
fi

# ---- 9. two replicas: only the leader acts; the standby takes over ---------
HA_DB="${PGURL:-sqlite:$TMP/ha.db}"
start_replica "$HA_DB" ha ha-a; PID_A=$!
wait_for 20 grep -q "event=leading" "$TMP/ha-a.log" || bad "ha: first replica leads"
start_replica "$HA_DB" ha ha-b; PID_B=$!
wait_for 20 grep -q "holder=ha-a" "$TMP/ha-b.log" || bad "ha: standby sees the leader"
G=$(for n in g1 g2 g3 g4; do uncordoned "$NS-$n" && echo "$NS-$n"; done | head -1)
PORT=$(port_of ha-b)
# only the leader takes signals: a standby refuses them (503) so that the
# agent's retry reaches the leader instead of waiting for a failover there
code=$(xid79 "$G" 6 | curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$TMP/token")" \
         --data-binary @- "http://127.0.0.1:$PORT/v1/signals")
check "ha: the standby refuses signals ($code)" [ "$code" = 503 ]
check "ha: /readyz 503 on the standby" [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")" = 503 ]
check "ha: /readyz 200 on the leader" [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(port_of ha-a)/readyz")" = 200 ]
check "ha: $G not cordoned by the standby" uncordoned "$G"
kill -9 "$PID_A"; wait "$PID_A" 2>/dev/null
check "ha: the standby takes over (lease 4 s)" wait_for 20 grep -q "event=leading" "$TMP/ha-b.log"
# what the agent does: it retries the refused batch, now on the leader
xid79 "$G" 7 | inject
check "ha: the new leader acts: $G cordoned" wait_for 20 cordoned "$G"
kill "$PID_B" 2>/dev/null; wait "$PID_B" 2>/dev/null

echo "controller_e2e: $pass passed, $fail failed"
if [ $fail -ne 0 ]; then echo "--- controller log (tail)"; tail -40 "$CTL_LOG"; fi
[ $fail -eq 0 ]
