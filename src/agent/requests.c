/* requests.c - the agent's side of the controller's requests: watches the
 * node's GPUNodeHealth, runs the configured command per new request,
 * validates, persists what was handled and reports it (see requests.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/requests.h"
#include "agent/worker.h"
#include "common/json.h"
#include "common/log.h"
#include "kube/api.h"
#include "kube/informer.h"

extern char **environ;

#define ANN_PREFIX "gpuheal.io/request-" /* GH_ANN_REQUEST_PREFIX of control/actuator.h */
#define ID_MAX 256
#define MSG_MAX 1400
#define RETRY_NS (5 * GH_NS_PER_S)
/* the controller sets lastAction just after the annotation: wait that long for it */
#define LAST_ACTION_WAIT_NS (120 * GH_NS_PER_S)
#define N_CONDS (GH_REQ__COUNT + 1) /* Request-<action>..., Validated */
#define ENV_EXTRA 6
#define PCI_MAX 32 /* "0000:3b:00.0" and longer domains */

static const char *const act_names[GH_REQ__COUNT] = {"reset_gpu", "reboot_node",
                                                     "run_diagnostics"};

const char *gh_request_action_name(enum gh_request_action a)
{
    return (unsigned)a < GH_REQ__COUNT ? act_names[a] : "?";
}

/* One request as read from its annotation. */
struct req {
    bool set;
    char id[ID_MAX];
    int gpu;                 /* -1: node-level or unknown */
    char pci[PCI_MAX];       /* the GPU's bus id when the controller knew only that ("") */
    char incident[ID_MAX];
};

/* A bus id as NVML and the kernel write it ("0000:3b:00.0",
 * "00000000:3B:00.0"): only what a command line may safely carry. */
static bool valid_pci(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= PCI_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) && s[i] != ':' && s[i] != '.')
            return false;
    return true;
}

/* The last handled request of an action (persisted). */
struct done {
    char id[ID_MAX];
    char result[16];
    int64_t at;
};

/* A request in progress (persisted). */
struct inprog {
    bool set;
    int act;
    struct req r;
    char boot_id[80];        /* the boot it started in */
    int64_t started;
};

/* A condition this module owns. */
struct cond {
    bool set;
    char type[40];
    char status[8];
    char reason[32];
    char message[MSG_MAX];
    int64_t ltt;
};

struct gh_requests {
    struct gh_kube_client *c; /* owned; the worker's from start on */
    const struct gh_clock *clock;
    char node[254];
    char *state_path;
    char boot_id[80];
    char fm[128];
    char **argv[GH_REQ__COUNT]; /* NULL: not configured */
    char **validate_argv;
    int64_t timeout_ns;
    size_t output_max;
    gh_probe_emit_fn emit;
    void *emit_ctx;
    void (*restart)(void *ctx, const char *pod_uid, const char *id, const char *incident,
                    int exit_code);
    void *restart_ctx;

    struct gh_worker *worker; /* runs worker_run once: the watch loop */

    /* worker thread only (before start: gh_requests_new) */
    struct gh_kube_informer *inf;
    struct req want[GH_REQ__COUNT];
    char bad[GH_REQ__COUNT][128];  /* start of the last invalid annotation logged */
    int64_t watch_err_log_at;
    struct done last[GH_REQ__COUNT];
    struct inprog pend;       /* a command running */
    struct inprog reboot;     /* a reboot command done, the reboot awaited */
    struct inprog val;        /* a request done, its validation not yet */
    struct cond conds[N_CONDS];
    bool dirty;               /* conditions to write */
    int64_t retry_at;
    struct {
        bool set;
        int act;
        char incident[ID_MAX];
        char result[16];
        int64_t until;        /* give up waiting for lastAction to be this request's */
    } last_action;            /* lastAction.result to write */

    pthread_mutex_t mu;
    struct gh_requests_stats st;
};

/* ---- commands */

void gh_requests_argv_free(char **argv)
{
    for (size_t i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}

int gh_requests_parse_cmd(const char *cmd, char ***out, struct gh_err *err)
{
    *out = NULL;
    char **v = calloc(GH_PROBE_MAX_ARGS + 1, sizeof *v);
    if (!v)
        return gh_err_set(err, GH_ENOMEM, "command: out of memory");
    size_t n = 0;
    const char *p = cmd ? cmd : "";
    for (;;) {
        p += strspn(p, " \t");
        if (!*p)
            break;
        size_t len = strcspn(p, " \t");
        if (n == GH_PROBE_MAX_ARGS) {
            gh_requests_argv_free(v);
            return gh_err_set(err, GH_EINVAL, "more than %d words", GH_PROBE_MAX_ARGS);
        }
        if (!(v[n++] = strndup(p, len))) {
            gh_requests_argv_free(v);
            return gh_err_set(err, GH_ENOMEM, "command: out of memory");
        }
        p += len;
    }
    if (n == 0 || v[0][0] != '/') {
        int rc = n ? gh_err_set(err, GH_EINVAL, "\"%.100s\" is not an absolute path", v[0])
                   : gh_err_set(err, GH_EINVAL, "empty command");
        gh_requests_argv_free(v);
        return rc;
    }
    *out = v;
    return GH_OK;
}

/* ---- state file */

static int save_state(struct gh_requests *r, struct gh_err *err)
{
    json_t *last = json_object(), *o = json_object();
    int bad = !last || !o;
    for (int a = 0; a < GH_REQ__COUNT && !bad; a++) {
        if (!r->last[a].id[0])
            continue;
        bad |= json_object_set_new(last, act_names[a],
                                   json_pack("{s:s, s:s, s:I}", "id", r->last[a].id, "result",
                                             r->last[a].result, "at", (json_int_t)r->last[a].at));
    }
    if (!bad)
        bad |= json_object_set(o, "last", last);
    const struct inprog *ip[3] = {&r->pend, &r->reboot, &r->val};
    static const char *const ip_key[3] = {"pending", "reboot", "validate"};
    for (int i = 0; i < 3 && !bad; i++) {
        const struct inprog *p = ip[i];
        if (p->set)
            bad |= json_object_set_new(
                o, ip_key[i],
                json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:I}", "action", act_names[p->act],
                          "id", p->r.id, "gpu", p->r.gpu, "pci", p->r.pci, "incident",
                          p->r.incident, "boot_id", p->boot_id, "started",
                          (json_int_t)p->started));
    }
    char *text = bad ? NULL : json_dumps(o, JSON_COMPACT);
    json_decref(last);
    json_decref(o);
    if (!text)
        return gh_err_set(err, GH_ENOMEM, "request state: out of memory");
    char tmp[4200];
    int w = snprintf(tmp, sizeof tmp, "%s.tmp", r->state_path);
    int rc = GH_OK;
    if (w < 0 || (size_t)w >= sizeof tmp) {
        free(text);
        return gh_err_set(err, GH_ELIMIT, "request state path too long");
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t len = strlen(text);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 ||
        fsync(fd) != 0)
        rc = gh_err_set(err, GH_EIO, "writing %s: %s", tmp, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(text);
    if (!rc && rename(tmp, r->state_path) != 0)
        rc = gh_err_set(err, GH_EIO, "renaming to %s: %s", r->state_path, strerror(errno));
    if (!rc) { /* the rename itself survives a crash */
        char dir[4200];
        snprintf(dir, sizeof dir, "%s", r->state_path);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir)
            *slash = '\0';
        else
            snprintf(dir, sizeof dir, "%s", slash ? "/" : ".");
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    return rc;
}

static int action_of(const char *name)
{
    for (int a = 0; name && a < GH_REQ__COUNT; a++)
        if (strcmp(name, act_names[a]) == 0)
            return a;
    return -1;
}

static int load_state(struct gh_requests *r, struct gh_err *err)
{
    json_error_t je;
    json_t *o = json_load_file(r->state_path, 0, &je);
    if (!o) {
        if (access(r->state_path, F_OK) != 0 && errno == ENOENT)
            return GH_OK; /* nothing handled yet */
        return gh_err_set(err, GH_EINVAL, "%s: %s", r->state_path, je.text);
    }
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(o, "last"), k, v) {
        int a = action_of(k);
        const char *id = gh_json_str(v, "id");
        const char *res = gh_json_str(v, "result");
        if (a < 0 || !id)
            continue;
        snprintf(r->last[a].id, sizeof r->last[a].id, "%s", id);
        snprintf(r->last[a].result, sizeof r->last[a].result, "%s", res ? res : "");
        r->last[a].at = json_integer_value(json_object_get(v, "at"));
    }
    struct inprog *ip[3] = {&r->pend, &r->reboot, &r->val};
    static const char *const ip_key[3] = {"pending", "reboot", "validate"};
    for (int i = 0; i < 3; i++) {
        json_t *p = json_object_get(o, ip_key[i]);
        int a = action_of(gh_json_str(p, "action"));
        const char *id = gh_json_str(p, "id");
        if (a < 0 || !id)
            continue;
        struct inprog *t = ip[i];
        t->set = true;
        t->act = a;
        t->r.set = true;
        snprintf(t->r.id, sizeof t->r.id, "%s", id);
        json_t *g = json_object_get(p, "gpu");
        t->r.gpu = json_is_integer(g) ? (int)json_integer_value(g) : -1;
        const char *pci = gh_json_str(p, "pci");
        snprintf(t->r.pci, sizeof t->r.pci, "%s", pci && valid_pci(pci) ? pci : "");
        const char *inc = gh_json_str(p, "incident");
        snprintf(t->r.incident, sizeof t->r.incident, "%s", inc ? inc : "");
        const char *b = gh_json_str(p, "boot_id");
        snprintf(t->boot_id, sizeof t->boot_id, "%s", b ? b : "");
        t->started = json_integer_value(json_object_get(p, "started"));
    }
    json_decref(o);
    return GH_OK;
}

/* ---- reporting */

static void stat_err(struct gh_requests *r, const char *what, const struct gh_err *e)
{
    pthread_mutex_lock(&r->mu);
    r->st.write_failures++;
    snprintf(r->st.last_err, sizeof r->st.last_err, "%s: %.400s", what, e->msg);
    pthread_mutex_unlock(&r->mu);
}

static struct cond *cond_of(struct gh_requests *r, int i)
{
    struct cond *c = &r->conds[i];
    if (!c->type[0]) {
        if (i < GH_REQ__COUNT)
            snprintf(c->type, sizeof c->type, "Request-%s", act_names[i]);
        else
            snprintf(c->type, sizeof c->type, "%s", GH_REQUESTS_VALIDATED);
    }
    return c;
}

static void cond_set(struct gh_requests *r, int i, const char *status, const char *reason,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void cond_set(struct gh_requests *r, int i, const char *status, const char *reason,
                     const char *fmt, ...)
{
    struct cond *c = cond_of(r, i);
    c->set = true;
    snprintf(c->status, sizeof c->status, "%s", status);
    snprintf(c->reason, sizeof c->reason, "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->message, sizeof c->message, fmt, ap);
    va_end(ap);
    c->ltt = gh_clock_now(r->clock);
    r->dirty = true;
    r->retry_at = 0;
}

/* Our conditions as found on the object (so that an apply keeps them). */
static void learn_conditions(struct gh_requests *r, const json_t *obj)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(obj, "status"), "conditions"), i, c) {
        const char *type = gh_json_str(c, "type");
        for (int k = 0; type && k < N_CONDS; k++) {
            struct cond *m = cond_of(r, k);
            if (m->set || strcmp(type, m->type) != 0)
                continue;
            const char *st = gh_json_str(c, "status");
            const char *re = gh_json_str(c, "reason");
            const char *ms = gh_json_str(c, "message");
            const char *lt = gh_json_str(c, "lastTransitionTime");
            int64_t t = 0;
            if (!st || !lt || !gh_time_parse_rfc3339(lt, strlen(lt), &t))
                continue;
            m->set = true;
            snprintf(m->status, sizeof m->status, "%s", st);
            snprintf(m->reason, sizeof m->reason, "%s", re ? re : "");
            snprintf(m->message, sizeof m->message, "%s", ms ? ms : "");
            m->ltt = t;
        }
    }
}

static int req_path(struct gh_requests *r, struct gh_kube_req *q, bool apply, struct gh_err *err)
{
    struct gh_kube_ref ref = {&gh_kube_res_gpunodehealths, NULL, r->node};
    int rc = gh_kube_path(q->path, sizeof q->path, &ref, "status", err);
    if (!rc)
        rc = gh_kube_query_add(q->path, sizeof q->path, "fieldManager", r->fm, err);
    if (!rc && apply)
        rc = gh_kube_query_add(q->path, sizeof q->path, "force", "true", err);
    return rc;
}

/* Server-side apply of every condition we own. */
static int apply_conditions(struct gh_requests *r, struct gh_err *err)
{
    json_t *conds = json_array();
    for (int i = 0; conds && i < N_CONDS; i++) {
        const struct cond *c = &r->conds[i];
        if (!c->set)
            continue;
        char t[GH_RFC3339_MAX];
        gh_time_format_rfc3339(c->ltt, t, sizeof t);
        if (json_array_append_new(conds, json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", c->type,
                                                   "status", c->status, "reason", c->reason,
                                                   "message", c->message,
                                                   "lastTransitionTime", t))) {
            json_decref(conds);
            conds = NULL;
        }
    }
    json_t *body = conds ? json_pack("{s:s, s:s, s:{s:s}, s:{s:o}}", "apiVersion",
                                     "gpuheal.io/v1alpha1", "kind", "GPUNodeHealth", "metadata",
                                     "name", r->node, "status", "conditions", conds)
                         : NULL;
    if (!body)
        return gh_err_set(err, GH_ENOMEM, "conditions: out of memory");
    struct gh_kube_req q;
    memset(&q, 0, sizeof q);
    q.method = GH_KUBE_PATCH;
    q.content_type = "application/apply-patch+yaml";
    int rc = req_path(r, &q, true, err);
    if (!rc && !(q.body = json_dumps(body, JSON_COMPACT)))
        rc = gh_err_set(err, GH_ENOMEM, "conditions: out of memory");
    json_decref(body);
    if (rc) {
        gh_kube_req_clear(&q);
        return rc;
    }
    q.body_len = strlen(q.body);
    struct gh_kube_resp resp;
    memset(&resp, 0, sizeof resp);
    rc = gh_kube_call(r->c, &q, &resp, err);
    gh_kube_req_clear(&q);
    gh_kube_resp_clear(&resp);
    return rc;
}

/* lastAction.result, when lastAction is this request's. GH_EAGAIN when
 * lastAction is not (yet: the controller writes it after the annotation). */
static int patch_last_action(struct gh_requests *r, struct gh_err *err)
{
    struct gh_kube_ref ref = {&gh_kube_res_gpunodehealths, NULL, r->node};
    int rc = GH_OK;
    for (int attempt = 0; attempt < 3; attempt++) {
        struct gh_kube_status st;
        gh_kube_status_reset(&st);
        json_t *obj = NULL;
        rc = gh_kube_get(r->c, &ref, &obj, &st, err);
        if (rc)
            return rc;
        json_t *la = json_object_get(json_object_get(obj, "status"), "lastAction");
        const char *act = gh_json_str(la, "action");
        const char *inc = gh_json_str(la, "incident");
        const char *res = gh_json_str(la, "result");
        const char *rv = gh_kube_meta_rv(obj);
        bool ours = act && inc && rv && strcmp(act, act_names[r->last_action.act]) == 0 &&
                    strcmp(inc, r->last_action.incident) == 0;
        if (!ours || (res && strcmp(res, r->last_action.result) == 0)) {
            json_decref(obj);
            return ours ? GH_OK : GH_EAGAIN;
        }
        json_t *p = json_pack("{s:{s:s}, s:{s:{s:s}}}", "metadata", "resourceVersion", rv,
                              "status", "lastAction", "result", r->last_action.result);
        json_decref(obj);
        if (!p)
            return gh_err_set(err, GH_ENOMEM, "lastAction: out of memory");
        gh_kube_status_reset(&st);
        rc = gh_kube_patch(r->c, &ref, "status", GH_KUBE_PATCH_MERGE, p, NULL, &st, err);
        json_decref(p);
        if (rc == GH_OK || st.kind != GH_KUBE_R_CONFLICT)
            return rc;
    }
    return rc;
}

/* Writes what is pending; on failure retried from the loop. */
static void flush_status(struct gh_requests *r)
{
    int64_t now = gh_clock_now(r->clock);
    if ((!r->dirty && !r->last_action.set) || now < r->retry_at)
        return;
    struct gh_err e;
    if (r->dirty) {
        if (apply_conditions(r, &e) != GH_OK) {
            stat_err(r, "apply GPUNodeHealth conditions", &e);
            GH_LOG(GH_LOG_WARN, "msg=\"request result not written to GPUNodeHealth; retrying\" "
                   "node=%s error=\"%s\"", r->node, e.msg);
            r->retry_at = now + RETRY_NS;
            return;
        }
        r->dirty = false;
        pthread_mutex_lock(&r->mu);
        r->st.status_writes++;
        pthread_mutex_unlock(&r->mu);
    }
    if (r->last_action.set) {
        int rc = patch_last_action(r, &e);
        if (rc == GH_EAGAIN && now < r->last_action.until) {
            r->retry_at = now + GH_NS_PER_S; /* and at the object's next change */
            return;
        }
        if (rc != GH_OK && rc != GH_EAGAIN) {
            stat_err(r, "patch GPUNodeHealth lastAction", &e);
            r->retry_at = now + RETRY_NS;
            return;
        }
        r->last_action.set = false;
    }
}

static void emit(struct gh_requests *r, const char *check, int gpu, bool passed,
                 const char *detail)
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.ts_ns = gh_clock_now(r->clock);
    s.source = GH_SRC_PROBE;
    s.kind = GH_KIND_PROBE_RESULT;
    s.gpu = gpu >= 0 ? gpu : -1;
    s.passed = passed;
    if (gh_signal_set_str(&s.node, r->node, strlen(r->node)) == GH_OK &&
        gh_signal_set_str(&s.check, check, strlen(check)) == GH_OK &&
        gh_signal_set_str(&s.detail, detail, strlen(detail)) == GH_OK)
        r->emit(r->emit_ctx, &s);
    gh_signal_clear(&s);
}

/* ---- running */

/* The child's environment: ours without the GPUHEAL_ variables set here,
 * plus them. Strings in vars[] (caller's), the array malloc'd. */
static char **child_env(char vars[ENV_EXTRA][ID_MAX + 32])
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **e = calloc(n + ENV_EXTRA + 1, sizeof *e);
    if (!e)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool ours = false;
        for (int j = 0; j < ENV_EXTRA && !ours; j++) {
            size_t eq = (size_t)(strchr(vars[j], '=') - vars[j]);
            ours = strncmp(environ[i], vars[j], eq + 1) == 0;
        }
        if (!ours)
            e[k++] = environ[i];
    }
    for (int j = 0; j < ENV_EXTRA; j++)
        e[k++] = vars[j];
    return e;
}

/* Runs argv for request q of action a. GH_OK (out filled), GH_EAGAIN when
 * stopped, else an error with out filled (passed false). */
static int run(struct gh_requests *r, char **argv, int a, const struct req *q, const char *name,
               struct gh_probe_outcome *out, struct gh_err *err)
{
    char vars[ENV_EXTRA][ID_MAX + 32];
    snprintf(vars[0], sizeof vars[0], "GPUHEAL_ACTION=%s", act_names[a]);
    snprintf(vars[1], sizeof vars[1], "GPUHEAL_REQUEST_ID=%s", q->id);
    snprintf(vars[2], sizeof vars[2], "GPUHEAL_INCIDENT=%s", q->incident);
    if (q->gpu >= 0)
        snprintf(vars[3], sizeof vars[3], "GPUHEAL_GPU=%d", q->gpu);
    else
        snprintf(vars[3], sizeof vars[3], "GPUHEAL_GPU=");
    snprintf(vars[4], sizeof vars[4], "GPUHEAL_NODE=%s", r->node);
    snprintf(vars[5], sizeof vars[5], "GPUHEAL_PCI=%s", q->pci);
    char **envp = child_env(vars);
    if (!envp)
        return gh_err_set(err, GH_ENOMEM, "environment: out of memory");
    struct gh_probe_check c = {.name = name, .argv = (const char *const *)argv,
                               .timeout_ns = r->timeout_ns, .gpu = q->gpu,
                               .envp = (const char *const *)envp};
    int rc = gh_probe_run_check(&c, r->output_max, gh_worker_stop_fd(r->worker), out, err);
    free(envp);
    return rc;
}

static const char *reason_of(const struct gh_probe_outcome *o)
{
    return o->passed ? "Succeeded" : o->timed_out ? "TimedOut" : "Failed";
}

/* After action a of q ended (ok or not): validation, conditions, signal.
 * false when stopped before it was done. */
static bool validate(struct gh_requests *r, int a, const struct req *q, bool action_ok)
{
    const int V = GH_REQ__COUNT;
    if (!action_ok) {
        cond_set(r, V, "False", "ActionFailed", "%s (request %s) did not succeed; validation "
                 "not run", act_names[a], q->id);
        return true;
    }
    if (!r->validate_argv) {
        cond_set(r, V, "False", "NoValidateCommand", "no --validate-cmd configured: %s "
                 "(request %s) cannot be validated", act_names[a], q->id);
        emit(r, "validate", q->gpu, false, "no --validate-cmd configured");
        pthread_mutex_lock(&r->mu);
        r->st.validations_failed++;
        pthread_mutex_unlock(&r->mu);
        return true;
    }
    struct gh_probe_outcome o;
    struct gh_err e;
    memset(&o, 0, sizeof o);
    int rc = run(r, r->validate_argv, a, q, "validate", &o, &e);
    if (rc == GH_EAGAIN) {
        gh_probe_outcome_clear(&o);
        return false; /* stopping */
    }
    const char *detail = o.detail ? o.detail : e.msg;
    cond_set(r, V, o.passed ? "True" : "False", o.passed ? "ValidationPassed" : "ValidationFailed",
             "validation probe %s %s after %s (request %s): %s", r->validate_argv[0],
             o.passed ? "passed" : "failed", act_names[a], q->id, detail);
    emit(r, "validate", q->gpu, o.passed, detail);
    pthread_mutex_lock(&r->mu);
    if (o.passed)
        r->st.validations_passed++;
    else
        r->st.validations_failed++;
    pthread_mutex_unlock(&r->mu);
    GH_LOG(o.passed ? GH_LOG_INFO : GH_LOG_WARN, "msg=\"validation %s\" action=%s request=%s "
           "detail=\"%.200s\"", o.passed ? "passed" : "failed", act_names[a], q->id, detail);
    gh_probe_outcome_clear(&o);
    return true;
}

/* Records request q of action a as done (state file first), reports it and
 * validates. */
static void finish(struct gh_requests *r, int a, const struct req *q, bool ok,
                   const char *reason, const char *detail)
{
    struct gh_err e;
    snprintf(r->last[a].id, sizeof r->last[a].id, "%s", q->id);
    snprintf(r->last[a].result, sizeof r->last[a].result, "%s", ok ? "Succeeded" : "Failed");
    r->last[a].at = gh_clock_now(r->clock);
    if (r->pend.set && r->pend.act == a && strcmp(r->pend.r.id, q->id) == 0)
        r->pend.set = false;
    if (r->reboot.set && a == GH_REQ_REBOOT_NODE && strcmp(r->reboot.r.id, q->id) == 0)
        r->reboot.set = false;
    if (ok) { /* the validation is owed from here on, also across a restart */
        r->val = (struct inprog){.set = true, .act = a, .r = *q,
                                 .started = gh_clock_now(r->clock)};
        snprintf(r->val.boot_id, sizeof r->val.boot_id, "%s", r->boot_id);
    }
    if (save_state(r, &e) != GH_OK)
        GH_LOG(GH_LOG_ERROR, "msg=\"request state not saved\" error=\"%s\"", e.msg);
    pthread_mutex_lock(&r->mu);
    if (ok)
        r->st.succeeded[a]++;
    else
        r->st.failed[a]++;
    pthread_mutex_unlock(&r->mu);
    char check[40];
    snprintf(check, sizeof check, "request_%s", act_names[a]);
    char sig[MSG_MAX];
    snprintf(sig, sizeof sig, "request %s: %s", q->id, detail);
    emit(r, check, q->gpu, ok, sig);
    cond_set(r, a, ok ? "True" : "False", reason, "request %s: %s", q->id, detail);
    GH_LOG(ok ? GH_LOG_INFO : GH_LOG_WARN, "msg=\"request done\" action=%s request=%s "
           "result=%s detail=\"%.200s\"", act_names[a], q->id, reason, detail);
    r->last_action.set = true;
    r->last_action.act = a;
    snprintf(r->last_action.incident, sizeof r->last_action.incident, "%s", q->incident);
    snprintf(r->last_action.result, sizeof r->last_action.result, "%s",
             ok ? "Succeeded" : "Failed");
    r->last_action.until = gh_clock_now(r->clock) + LAST_ACTION_WAIT_NS;
    flush_status(r); /* the request's result before the validation's run */
    if (validate(r, a, q, ok) && r->val.set) {
        r->val.set = false;
        if (save_state(r, &e) != GH_OK)
            GH_LOG(GH_LOG_ERROR, "msg=\"request state not saved\" error=\"%s\"", e.msg);
    }
    flush_status(r);
}

static void handle(struct gh_requests *r, int a, const struct req *q)
{
    struct gh_err e;
    GH_LOG(GH_LOG_INFO, "msg=\"request received\" action=%s request=%s gpu=%d incident=%s",
           act_names[a], q->id, q->gpu, q->incident);
    pthread_mutex_lock(&r->mu);
    r->st.received[a]++;
    pthread_mutex_unlock(&r->mu);
    /* in progress, on disk before anything runs */
    r->pend.set = true;
    r->pend.act = a;
    r->pend.r = *q;
    snprintf(r->pend.boot_id, sizeof r->pend.boot_id, "%s", r->boot_id);
    r->pend.started = gh_clock_now(r->clock);
    if (save_state(r, &e) != GH_OK) {
        /* not run: without the record a restart could run it twice */
        GH_LOG(GH_LOG_ERROR, "msg=\"request not run: state not saved\" error=\"%s\"", e.msg);
        r->pend.set = false;
        stat_err(r, "save request state", &e);
        return;
    }
    if (!r->argv[a]) {
        char d[120];
        snprintf(d, sizeof d, "no --%s configured",
                 a == GH_REQ_RESET_GPU ? "reset-gpu-cmd"
                 : a == GH_REQ_REBOOT_NODE ? "reboot-cmd" : "diagnostics-cmd");
        finish(r, a, q, false, "NotConfigured", d);
        return;
    }
    struct gh_probe_outcome o;
    memset(&o, 0, sizeof o);
    int rc = run(r, r->argv[a], a, q, act_names[a], &o, &e);
    if (rc == GH_EAGAIN) {
        gh_probe_outcome_clear(&o); /* stopping: stays in progress */
        return;
    }
    const char *detail = o.detail ? o.detail : e.msg;
    if (a == GH_REQ_REBOOT_NODE && o.passed) {
        r->reboot = r->pend; /* the reboot is awaited, other requests may run */
        r->pend.set = false;
        if (save_state(r, &e) != GH_OK)
            GH_LOG(GH_LOG_ERROR, "msg=\"request state not saved\" error=\"%s\"", e.msg);
        cond_set(r, a, "Unknown", "RebootPending", "request %s: reboot command exited 0; "
                 "waiting for the node to restart (boot id %s): %s", q->id, r->boot_id, detail);
        GH_LOG(GH_LOG_INFO, "msg=\"reboot command done; waiting for the reboot\" request=%s "
               "boot_id=%s", q->id, r->boot_id);
        flush_status(r);
    } else {
        finish(r, a, q, o.passed, reason_of(&o), detail);
    }
    gh_probe_outcome_clear(&o);
}

/* Requests in progress at start. */
static void resume(struct gh_requests *r)
{
    char d[400];
    struct gh_err e;
    if (r->val.set) { /* stopped while validating: validate now */
        struct req q = r->val.r;
        GH_LOG(GH_LOG_INFO, "msg=\"validation owed from before the restart\" action=%s "
               "request=%s", act_names[r->val.act], q.id);
        if (validate(r, r->val.act, &q, true)) {
            r->val.set = false;
            if (save_state(r, &e) != GH_OK)
                GH_LOG(GH_LOG_ERROR, "msg=\"request state not saved\" error=\"%s\"", e.msg);
        }
        flush_status(r);
    }
    if (r->pend.set && r->pend.act == GH_REQ_REBOOT_NODE) {
        /* a reboot command cut short, most likely by the reboot itself */
        r->reboot = r->pend;
        r->pend.set = false;
        if (save_state(r, &e) != GH_OK)
            GH_LOG(GH_LOG_ERROR, "msg=\"request state not saved\" error=\"%s\"", e.msg);
    }
    if (r->pend.set) {
        struct req q = r->pend.r;
        snprintf(d, sizeof d, "the agent stopped while the command ran; not run again");
        finish(r, r->pend.act, &q, false, "Interrupted", d);
    }
    if (!r->reboot.set)
        return;
    struct req q = r->reboot.r;
    if (strcmp(r->reboot.boot_id, r->boot_id) == 0) {
        GH_LOG(GH_LOG_WARN, "msg=\"reboot requested but the boot id is unchanged: waiting for "
               "the reboot, not running the command again\" request=%s boot_id=%s", q.id,
               r->boot_id);
        return;
    }
    snprintf(d, sizeof d, "node rebooted (boot id %.80s -> %.80s)", r->reboot.boot_id,
             r->boot_id);
    finish(r, GH_REQ_REBOOT_NODE, &q, true, "Succeeded", d);
}

/* ---- watching */

/* The restart requests on ann (the GPUNodeHealth's annotations), passed on. */
static void scan_restarts(struct gh_requests *r, const json_t *ann)
{
    const char *key;
    const json_t *val;
    size_t plen = strlen(GH_REQUESTS_RESTART_PREFIX);
    int64_t now = gh_clock_now(r->clock);
    json_object_foreach((json_t *)ann, key, val)
    {
        if (strncmp(key, GH_REQUESTS_RESTART_PREFIX, plen) != 0 || !json_is_string(val))
            continue;
        const char *uid = key + plen;
        json_t *v = json_loads(json_string_value(val), 0, NULL);
        const char *id = gh_json_str(v, "id"), *inc = gh_json_str(v, "incident");
        const char *ts = gh_json_str(v, "time");
        json_t *code = json_object_get(v, "exit_code");
        int64_t at = 0;
        bool valid = id && *id && strlen(uid) > 0 && strlen(uid) < 40 && json_is_integer(code) &&
                     json_integer_value(code) >= 1 && json_integer_value(code) <= 255 && ts &&
                     gh_time_parse_rfc3339(ts, strlen(ts), &at);
        if (!valid)
            GH_LOG(GH_LOG_WARN, "msg=\"restart request ignored: not a valid request\" key=%.80s",
                   key);
        else if (now - at <= GH_REQUESTS_RESTART_MAX_AGE_NS)
            r->restart(r->restart_ctx, uid, id, inc, (int)json_integer_value(code));
        json_decref(v);
    }
}

/* The requests on obj (the node's GPUNodeHealth) that are new. */
static void scan(struct gh_requests *r, const json_t *obj)
{
    const json_t *ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
    if (r->restart && json_is_object(ann))
        scan_restarts(r, ann);
    for (int a = 0; a < GH_REQ__COUNT; a++) {
        char key[64];
        snprintf(key, sizeof key, "%s%s", ANN_PREFIX, act_names[a]);
        const char *text = gh_json_str(ann, key);
        if (!text)
            continue;
        json_t *v = json_loads(text, 0, NULL);
        const char *id = gh_json_str(v, "id");
        const char *act = gh_json_str(v, "action");
        const char *inc = gh_json_str(v, "incident");
        json_t *g = json_object_get(v, "gpu");
        const char *pci = gh_json_str(v, "pci");
        bool valid = id && id[0] && strlen(id) < ID_MAX && (!pci || valid_pci(pci)) &&
                     (!act || strcmp(act, act_names[a]) == 0) && (!inc || strlen(inc) < ID_MAX) &&
                     (!g || (json_is_integer(g) && json_integer_value(g) >= 0 &&
                             json_integer_value(g) < 1024));
        if (!valid) {
            char head[sizeof r->bad[a]];
            snprintf(head, sizeof head, "%s", text);
            if (strcmp(head, r->bad[a]) != 0) /* once per value, not per update */
                GH_LOG(GH_LOG_WARN, "msg=\"request annotation ignored: not a valid request\" "
                       "key=%s", key);
            memcpy(r->bad[a], head, sizeof head);
            json_decref(v);
            continue;
        }
        bool seen = strcmp(id, r->last[a].id) == 0 ||
                    (r->pend.set && r->pend.act == a && strcmp(id, r->pend.r.id) == 0) ||
                    (r->reboot.set && r->reboot.act == a && strcmp(id, r->reboot.r.id) == 0) ||
                    (r->want[a].set && strcmp(id, r->want[a].id) == 0);
        /* reported before (state file lost): the condition names it */
        const struct cond *c = cond_of(r, a);
        char prefix[ID_MAX + 16];
        snprintf(prefix, sizeof prefix, "request %s: ", id);
        if (!seen && c->set && strncmp(c->message, prefix, strlen(prefix)) == 0) {
            GH_LOG(GH_LOG_INFO, "msg=\"request already reported on GPUNodeHealth: not run "
                   "again\" action=%s request=%s", act_names[a], id);
            snprintf(r->last[a].id, sizeof r->last[a].id, "%s", id);
            snprintf(r->last[a].result, sizeof r->last[a].result, "%s",
                     strcmp(c->status, "True") == 0 ? "Succeeded" : "Failed");
            struct gh_err e;
            if (save_state(r, &e) != GH_OK)
                GH_LOG(GH_LOG_ERROR, "msg=\"request state not saved\" error=\"%s\"", e.msg);
            seen = true;
        }
        if (!seen) {
            struct req *q = &r->want[a];
            q->set = true;
            snprintf(q->id, sizeof q->id, "%s", id);
            snprintf(q->incident, sizeof q->incident, "%s", inc ? inc : "");
            q->gpu = g ? (int)json_integer_value(g) : -1;
            snprintf(q->pci, sizeof q->pci, "%s", pci ? pci : "");
        }
        json_decref(v);
    }
}

static void on_add(void *ud, const json_t *obj)
{
    scan(ud, obj);
}

static void on_update(void *ud, const json_t *old, const json_t *obj)
{
    (void)old;
    struct gh_requests *r = ud;
    if (r->last_action.set && !r->dirty)
        r->retry_at = 0; /* lastAction may be this request's now */
    scan(r, obj);
}

static void on_synced(void *ud)
{
    struct gh_requests *r = ud;
    GH_LOG(GH_LOG_INFO, "msg=\"requests: GPUNodeHealth listed, watching\" node=%s", r->node);
}

/* The informer retries by itself; said at most every 30 s. */
static void on_error(void *ud, int rc, const struct gh_kube_status *st, const char *msg)
{
    (void)st;
    struct gh_requests *r = ud;
    pthread_mutex_lock(&r->mu);
    snprintf(r->st.last_err, sizeof r->st.last_err, "watch: %s (%s)", msg ? msg : "",
             gh_rc_str(rc));
    pthread_mutex_unlock(&r->mu);
    int64_t now = gh_clock_now(r->clock);
    if (now - r->watch_err_log_at >= 30 * GH_NS_PER_S) {
        r->watch_err_log_at = now;
        GH_LOG(GH_LOG_WARN, "msg=\"requests: watching GPUNodeHealth failed; retrying\" "
               "error=\"%.300s\"", msg ? msg : gh_rc_str(rc));
    }
}

static void worker_run(void *arg, struct gh_worker *w)
{
    struct gh_requests *r = arg;
    struct gh_err e;
    /* Our conditions as they are, so that the first apply keeps them. */
    struct gh_kube_ref ref = {&gh_kube_res_gpunodehealths, NULL, r->node};
    for (int tries = 0; !gh_worker_stopping(w); tries++) {
        struct gh_kube_status st;
        gh_kube_status_reset(&st);
        json_t *obj = NULL;
        int rc = gh_kube_get(r->c, &ref, &obj, &st, &e);
        if (rc == GH_OK)
            learn_conditions(r, obj);
        json_decref(obj);
        if (rc == GH_OK || rc == GH_ENOTFOUND)
            break;
        if (tries == 0)
            GH_LOG(GH_LOG_WARN, "msg=\"cannot read GPUNodeHealth; retrying\" node=%s "
                   "error=\"%s\"", r->node, e.msg);
        gh_kube_client_run(r->c, 2000, NULL);
    }
    if (!gh_worker_stopping(w))
        resume(r);
    char sel[300];
    snprintf(sel, sizeof sel, "metadata.name=%s", r->node);
    /* the resync replays the object now and then: a request is looked at
     * again even if its event was somehow missed */
    struct gh_kube_informer_opts io = {.res = &gh_kube_res_gpunodehealths,
                                       .field_selector = sel, .resync_ns = 60 * GH_NS_PER_S};
    struct gh_kube_handlers h = {.on_add = on_add, .on_update = on_update,
                                 .on_synced = on_synced, .on_error = on_error};
    if (gh_kube_informer_new(r->c, &io, &h, r, &r->inf, &e) != GH_OK ||
        gh_kube_informer_start(r->inf, &e) != GH_OK) {
        GH_LOG(GH_LOG_ERROR, "msg=\"requests from the controller not watched\" error=\"%s\"",
               e.msg);
        return;
    }
    while (!gh_worker_stopping(w)) {
        gh_kube_client_run(r->c, 500, NULL);
        for (int a = 0; a < GH_REQ__COUNT && !gh_worker_stopping(w); a++) {
            if (!r->want[a].set)
                continue;
            struct req q = r->want[a];
            memset(&r->want[a], 0, sizeof r->want[a]);
            handle(r, a, &q);
        }
        flush_status(r);
    }
    gh_kube_informer_free(r->inf);
    r->inf = NULL;
}

/* Stopping: the loop's gh_kube_client_run returns early. */
static void wake_client(void *arg)
{
    struct gh_requests *r = arg;
    gh_kube_client_wakeup(r->c);
}

/* ---- public */

int gh_requests_new(struct gh_kube_client *c, const struct gh_requests_opts *o,
                    struct gh_requests **out, struct gh_err *err)
{
    *out = NULL;
    if (!c || !o || !o->node || !o->node[0] || strlen(o->node) > 253 || !o->state_path ||
        !o->boot_id || !o->emit) {
        gh_kube_client_free(c);
        return gh_err_set(err, GH_EINVAL, "requests: client, node, state path, boot id and "
                          "emit required");
    }
    struct gh_requests *r = calloc(1, sizeof *r);
    if (!r) {
        gh_kube_client_free(c);
        return gh_err_set(err, GH_ENOMEM, "requests: out of memory");
    }
    r->c = c;
    pthread_mutex_init(&r->mu, NULL);
    r->clock = gh_kube_client_clock(c);
    snprintf(r->node, sizeof r->node, "%s", o->node);
    snprintf(r->boot_id, sizeof r->boot_id, "%s", o->boot_id);
    const char *fm = o->field_manager ? o->field_manager : GH_REQUESTS_FIELD_MANAGER;
    snprintf(r->fm, sizeof r->fm, "%s", fm);
    r->timeout_ns = o->timeout_ns > 0 ? o->timeout_ns : 600 * GH_NS_PER_S;
    r->output_max = o->output_max ? o->output_max : 512;
    r->emit = o->emit;
    r->emit_ctx = o->emit_ctx;
    r->restart = o->restart;
    r->restart_ctx = o->restart_ctx;
    int rc = GH_OK;
    if (!(r->state_path = strdup(o->state_path)))
        rc = gh_err_set(err, GH_ENOMEM, "requests: out of memory");
    for (int a = 0; !rc && a < GH_REQ__COUNT; a++)
        if (o->cmd[a] && (rc = gh_requests_parse_cmd(o->cmd[a], &r->argv[a], err)) != GH_OK)
            gh_err_prefix(err, rc, "%s command", act_names[a]);
    if (!rc && o->validate_cmd &&
        (rc = gh_requests_parse_cmd(o->validate_cmd, &r->validate_argv, err)) != GH_OK)
        gh_err_prefix(err, rc, "validate command");
    if (!rc)
        rc = load_state(r, err);
    struct gh_worker_opts wo = {
        .name = "requests", .run = worker_run, .wake = wake_client, .arg = r};
    if (!rc)
        rc = gh_worker_new(&wo, &r->worker, err);
    if (rc) {
        gh_requests_free(r);
        return rc;
    }
    *out = r;
    return GH_OK;
}

int gh_requests_start(struct gh_requests *r, struct gh_err *err)
{
    return gh_worker_start(r->worker, err);
}

void gh_requests_free(struct gh_requests *r)
{
    if (!r)
        return;
    gh_worker_free(r->worker); /* stops it: flag, stop fd, client wakeup, join */
    gh_kube_informer_free(r->inf);
    gh_kube_client_free(r->c);
    for (int a = 0; a < GH_REQ__COUNT; a++)
        gh_requests_argv_free(r->argv[a]);
    gh_requests_argv_free(r->validate_argv);
    free(r->state_path);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void gh_requests_stats(struct gh_requests *r, struct gh_requests_stats *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    pthread_mutex_unlock(&r->mu);
}
