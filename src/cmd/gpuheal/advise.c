/* advise.c - `gpuheal advise checkpoint`: the optimal checkpoint interval by
 * Young's and Daly's formulas for a given MTBF and checkpoint stall, with the
 * expected ETTR from Daly's complete model. The MTBF is given (--mtbf) or
 * estimated from a job's interruptions in the audit store (--job --db). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "audit/history.h"
#include "cmd/gpuheal/commands.h"
#include "common/timeutil.h"
#include "sim/daly.h"

#define SHOWN_MAX 20 /* interruptions listed in the text output */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuheal advise checkpoint --mtbf DURATION --stall DURATION [--restart DURATION] [--json]\n"
            "       gpuheal advise checkpoint --job NS/NAME --db URL --stall DURATION [--since WHEN]\n"
            "                                 [--restart DURATION] [--json]\n"
            "\n"
            "The optimal checkpoint interval tau (compute between checkpoints) for a job whose\n"
            "mean time between failures is MTBF and whose checkpoint stalls training for STALL:\n"
            "  Young (1974): tau = sqrt(2 * stall * MTBF)\n"
            "  Daly (2006):  tau = sqrt(2 * stall * MTBF) * (1 + sqrt(stall / (2 MTBF)) / 3\n"
            "                      + (stall / (2 MTBF)) / 9) - stall    (stall < 2 MTBF; else MTBF)\n"
            "and the expected ETTR with restart time R from Daly's complete model:\n"
            "  ETTR = tau / (MTBF * e^(R/MTBF) * (e^((tau + stall)/MTBF) - 1))\n"
            "DURATION: seconds, or a number with s, m, h or d (e.g. 3.09h).\n"
            "\n"
            "With --job and --db the MTBF is estimated from the audit store: the observed window\n"
            "(from the job's first evidence, or from --since, to its last evidence) divided by\n"
            "the job's interruptions in it (incidents whose actions restart the job:\n"
            "restart_from_checkpoint, retry_in_place). At least 2 are needed. The store does not\n"
            "record how long a checkpoint stalls training, so --stall is required.\n"
            "--since WHEN: a duration back from now (\"7d\") or an RFC 3339 time.\n");
}

/* "90", "90s", "1.5m", "3.09h", "2d" -> seconds. */
static bool duration(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return false;
    double k = 1;
    if (*end == 's')
        end++;
    else if (*end == 'm')
        k = 60, end++;
    else if (*end == 'h')
        k = 3600, end++;
    else if (*end == 'd')
        k = 86400, end++;
    if (*end)
        return false;
    *out = v * k;
    return true;
}

/* "7d" back from now, or an RFC 3339 time -> ns. */
static bool since_time(const char *s, int64_t *out)
{
    if (gh_time_parse_rfc3339(s, strlen(s), out))
        return true;
    double d;
    if (!duration(s, &d))
        return false;
    *out = gh_clock_now(gh_clock_real()) - (int64_t)(d * 1e9);
    return true;
}

/* What the store says about the job (when --job). */
struct history {
    const char *job;
    bool since_given;
    int64_t from_ns, to_ns;  /* the observed window */
    size_t n;                /* interruptions in it */
    struct gh_audit_interruption v[SHOWN_MAX];
    size_t shown;            /* the newest, oldest first (a ring below) */
    size_t head;
};

static int take_interruption(void *ud, const struct gh_audit_interruption *it)
{
    struct history *h = ud;
    h->n++;
    size_t at = (h->head + h->shown) % SHOWN_MAX;
    if (h->shown == SHOWN_MAX)
        h->head = (h->head + 1) % SHOWN_MAX;
    else
        h->shown++;
    h->v[at] = *it;
    return GH_OK;
}

/* Loads the job's window and interruptions. Returns the exit status: 0, or
 * 1 with a message when the store cannot give an MTBF. */
static int load_history(const char *url, struct history *h)
{
    struct gh_err err = {0};
    struct gh_audit *a = NULL;
    int rc = gh_audit_open_existing(url, &a, &err);
    int64_t first = 0, last = 0;
    if (!rc)
        rc = gh_audit_job_span(a, h->job, h->from_ns, &first, &last, &err);
    if (!rc && last > 0) {
        if (!h->since_given)
            h->from_ns = first;
        h->to_ns = last;
        rc = gh_audit_interruptions(a, h->job, h->from_ns, h->to_ns, take_interruption, h, &err);
    }
    gh_audit_close(a);
    if (rc) {
        fprintf(stderr, "gpuheal advise: %s\n", err.msg);
        return 1;
    }
    if (last == 0) {
        fprintf(stderr,
                "gpuheal advise: the audit store has no record of job %s%s: no MTBF to estimate; "
                "check NS/NAME, or give --mtbf\n",
                h->job, h->since_given ? " in the --since window" : "");
        return 1;
    }
    double w = (double)(h->to_ns - h->from_ns) / 1e9;
    if (h->n < 2 || w <= 0) {
        fprintf(stderr,
                "gpuheal advise: job %s: %zu interruption%s in %.1f h of evidence (%s): too few to "
                "estimate an MTBF (at least 2 are needed). Give --mtbf from fleet figures, widen "
                "the window (--since), or ask again when the job has more history.\n",
                h->job, h->n, h->n == 1 ? "" : "s", w / 3600,
                h->since_given ? "--since to the last evidence" : "first evidence to last");
        return 1;
    }
    return 0;
}

static json_t *history_json(const struct history *h, double mtbf)
{
    char a[40], b[40];
    json_t *o = json_object();
    json_object_set_new(o, "job", json_string(h->job));
    json_object_set_new(o, "window_start",
                        json_string(gh_time_format_rfc3339(h->from_ns, a, sizeof a)));
    json_object_set_new(o, "window_end",
                        json_string(gh_time_format_rfc3339(h->to_ns, b, sizeof b)));
    json_object_set_new(o, "window_from", json_string(h->since_given ? "since" : "first_evidence"));
    json_object_set_new(o, "window_s", json_real((double)(h->to_ns - h->from_ns) / 1e9));
    json_object_set_new(o, "interruptions", json_integer((json_int_t)h->n));
    json_object_set_new(o, "mtbf_s", json_real(mtbf));
    json_t *list = json_array();
    for (size_t i = 0; i < h->shown; i++) {
        const struct gh_audit_interruption *it = &h->v[(h->head + i) % SHOWN_MAX];
        json_t *x = json_object();
        json_object_set_new(x, "id", json_string(it->id));
        json_object_set_new(x, "class", json_string(it->cls));
        json_object_set_new(x, "mode", json_string(it->mode));
        json_object_set_new(x, "ts",
                            json_string(gh_time_format_rfc3339(it->first_ns, a, sizeof a)));
        json_array_append_new(list, x);
    }
    json_object_set_new(o, "listed", list);
    return o;
}

static void history_text(const struct history *h, double mtbf)
{
    char a[40], b[40];
    printf("job %s: %zu interruptions in %.2f h of evidence, %s .. %s (%s)\n", h->job, h->n,
           (double)(h->to_ns - h->from_ns) / 3.6e12,
           gh_time_format_rfc3339(h->from_ns, a, sizeof a),
           gh_time_format_rfc3339(h->to_ns, b, sizeof b),
           h->since_given ? "--since to the last evidence" : "first evidence to last");
    if (h->shown < h->n)
        printf("  (the newest %zu listed)\n", h->shown);
    for (size_t i = 0; i < h->shown; i++) {
        const struct gh_audit_interruption *it = &h->v[(h->head + i) % SHOWN_MAX];
        printf("  %s  %-22s %s (%s)\n", gh_time_format_rfc3339(it->first_ns, a, sizeof a),
               it->cls, it->id, it->mode);
    }
    printf("MTBF estimate = window / interruptions = %.0f s (%.2f h)\n", mtbf, mtbf / 3600);
    printf("checkpoint stall: given with --stall (the audit store does not record checkpoint "
           "durations)\n\n");
}

int gh_cmd_advise(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "checkpoint") != 0) {
        if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
            usage(stdout);
            return 0;
        }
        usage(stderr);
        return 2;
    }
    double mtbf = NAN, stall = NAN, restart = 0;
    bool json = false;
    const char *job = NULL, *db = NULL, *since = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--json") == 0) {
            json = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "gpuheal advise: %s needs a value\n", a);
            return 2;
        }
        i++;
        bool ok = true;
        if (strcmp(a, "--mtbf") == 0)
            ok = duration(v, &mtbf) && mtbf > 0;
        else if (strcmp(a, "--stall") == 0)
            ok = duration(v, &stall);
        else if (strcmp(a, "--restart") == 0)
            ok = duration(v, &restart);
        else if (strcmp(a, "--job") == 0)
            job = v;
        else if (strcmp(a, "--db") == 0)
            db = v;
        else if (strcmp(a, "--since") == 0)
            since = v;
        else {
            fprintf(stderr, "gpuheal advise: unknown option \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "gpuheal advise: bad duration for %s: \"%s\"\n", a, v);
            return 2;
        }
    }
    struct history h = {.job = job};
    if (job || db || since) {
        if (!job || !db) {
            fprintf(stderr, "gpuheal advise: --job and --db go together (--since needs them)\n");
            return 2;
        }
        const char *slash = strchr(job, '/');
        if (!slash || slash == job || !slash[1] || strchr(slash + 1, '/')) {
            fprintf(stderr, "gpuheal advise: --job: \"%s\" is not NS/NAME\n", job);
            return 2;
        }
        if (isfinite(mtbf)) {
            fprintf(stderr, "gpuheal advise: --mtbf and --job exclude each other (--job estimates "
                            "the MTBF from the store)\n");
            return 2;
        }
        if (since && !since_time(since, &h.from_ns)) {
            fprintf(stderr, "gpuheal advise: --since: \"%s\" is neither a duration (7d) nor an "
                            "RFC 3339 time\n", since);
            return 2;
        }
        h.since_given = since != NULL;
        if (!isfinite(stall)) {
            fprintf(stderr, "gpuheal advise: --stall is required with --job: the audit store does "
                            "not record how long a checkpoint stalls training\n");
            return 2;
        }
        int rc = load_history(db, &h);
        if (rc)
            return rc;
        mtbf = (double)(h.to_ns - h.from_ns) / 1e9 / (double)h.n;
    }
    if (!isfinite(mtbf) || !isfinite(stall)) {
        fprintf(stderr, "gpuheal advise: --mtbf and --stall are required\n");
        usage(stderr);
        return 2;
    }
    double young = gh_daly_young(mtbf, stall), daly = gh_daly_optimum(mtbf, stall);
    double ey = young > 0 ? gh_daly_ettr(mtbf, young, stall, restart) : NAN;
    double ed = daly > 0 ? gh_daly_ettr(mtbf, daly, stall, restart) : NAN;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "mtbf_s", json_real(mtbf));
        json_object_set_new(o, "mtbf_from", json_string(job ? "audit_store" : "given"));
        json_object_set_new(o, "stall_s", json_real(stall));
        json_object_set_new(o, "stall_from", json_string("given"));
        json_object_set_new(o, "restart_s", json_real(restart));
        json_object_set_new(o, "young_s", json_real(young));
        json_object_set_new(o, "daly_s", json_real(daly));
        json_object_set_new(o, "young_ettr", isfinite(ey) ? json_real(ey) : json_null());
        json_object_set_new(o, "daly_ettr", isfinite(ed) ? json_real(ed) : json_null());
        if (job)
            json_object_set_new(o, "history", history_json(&h, mtbf));
        char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
        if (s)
            puts(s);
        free(s);
        json_decref(o);
        return s ? 0 : 1;
    }
    if (job)
        history_text(&h, mtbf);
    printf("MTBF M = %.0f s (%.2f h), checkpoint stall delta = %g s, restart R = %g s\n\n", mtbf,
           mtbf / 3600, stall, restart);
    printf("Young (1974): tau = sqrt(2 delta M)\n");
    printf("              = %.0f s (%.1f min)\n", young, young / 60);
    if (stall < 2 * mtbf)
        printf("Daly (2006):  tau = sqrt(2 delta M) [1 + sqrt(delta/2M)/3 + (delta/2M)/9] - delta\n");
    else
        printf("Daly (2006):  tau = M (the stall is at least twice the MTBF)\n");
    printf("              = %.0f s (%.1f min)\n\n", daly, daly / 60);
    printf("expected ETTR, Daly's complete model: tau / (M e^(R/M) (e^((tau+delta)/M) - 1))\n");
    printf("  at Young's tau %.4f, at Daly's tau %.4f\n", ey, ed);
    return 0;
}
