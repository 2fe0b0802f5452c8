/* report.c - `gpuheal report --html OUT [--db URL | --scenario FILE] [SUBJECT]`:
 * writes one self-contained HTML page (timeline, step-time charts,
 * incidents with evidence, decisions and actions) from the audit store, or
 * from a scenario replayed through the engine as `gpuheal diagnose` does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "cmd/gpuheal/commands.h"
#include "common/timeutil.h"
#include "engine/policy.h"
#include "report/from_audit.h"
#include "report/from_engine.h"
#include "report/html.h"
#include "report/report.h"
#include "signal/signal_json.h"

#define DEFAULT_DB "sqlite:/var/lib/gpuheal/audit.db"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuheal report --html OUT [--db URL | --scenario FILE [--policy FILE]]\n"
            "                      [--since WHEN] [--limit N] [--title TEXT]\n"
            "                      [job/NS/NAME | node/NAME | pod/NS/NAME | incident/ID]\n");
}

static void help(void)
{
    usage(stdout);
    printf("Writes one self-contained HTML file (no external assets): a timeline that\n"
           "aligns kernel-log, NVML/DCGM, Kubernetes and training signals per node and\n"
           "GPU with gpuheal's decisions and actions; step time per rank or node with\n"
           "the blamed node highlighted; the incidents with their evidence (raw lines),\n"
           "guard verdicts and actions. OUT \"-\" is standard output.\n"
           "--db URL: the audit store (sqlite:PATH or postgres://...; default $GPUHEAL_DB,\n"
           "  else %s). Its timeline shows the recorded evidence; its step chart the\n"
           "  step-time telemetry the controller kept (per rank, 5 s means).\n"
           "--scenario FILE: replay a scenario (spec sections 1-2) through the engine, as\n"
           "  `gpuheal diagnose` does, and draw all its signals and incidents; subjects\n"
           "  job/... and node/... only. --policy FILE: the policy to replay with.\n"
           "--since: audit store only, decisions and telemetry from then on (\"24h\" or\n"
           "  RFC 3339).\n"
           "--limit N: at most N incidents from the audit store (newest kept).\n",
           DEFAULT_DB);
}

static bool parse_since(const char *s, int64_t *out)
{
    int64_t d;
    if (gh_time_parse_rfc3339(s, strlen(s), out))
        return true;
    if (gh_policy_parse_duration(s, &d) && d >= 0) {
        *out = gh_clock_now(gh_clock_real()) - d;
        return true;
    }
    return false;
}

struct replay_ctx {
    struct gh_report *r;
    int rc;
    struct gh_err err;
};

static void on_incident(void *ud, const struct gh_incident *inc)
{
    struct replay_ctx *c = ud;
    if (!c->rc)
        c->rc = gh_report_add_engine_incident(c->r, inc, &c->err);
}

/* Pass 1: every signal of the file onto the report (header first). */
static int read_signals(struct gh_report *r, const char *path, long *bad, struct gh_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gh_err_set(err, GH_EIO, "%s: %s", path, strerror(errno));
    struct gh_signal_reader *rd = gh_signal_reader_new(f);
    int rc = rd ? GH_OK : gh_err_set(err, GH_ENOMEM, "out of memory");
    bool first = true;
    while (!rc) {
        struct gh_signal s;
        json_t *h = NULL;
        struct gh_err lerr;
        int lrc = gh_signal_reader_next(rd, &s, &h, &lerr);
        if (lrc == GH_ENOTFOUND)
            break;
        if (lrc == GH_EIO || lrc == GH_ENOMEM) {
            rc = gh_err_set(err, lrc, "%s: %s", path, lerr.msg);
            break;
        }
        if (lrc != GH_OK) {
            /* Said with its line number, like diagnose (the first 100). */
            if (++*bad <= 100)
                fprintf(stderr, "gpuheal report: %s: %s\n", path, lerr.msg);
            else if (*bad == 101)
                fprintf(stderr, "gpuheal report: %s: more bad lines; not reporting them\n", path);
            continue;
        }
        if (h) {
            if (first)
                rc = gh_report_add_header(r, h, err);
            json_decref(h);
        } else {
            rc = gh_report_add_signal(r, &s, err);
            gh_signal_clear(&s);
        }
        first = false;
    }
    gh_signal_reader_free(rd);
    fclose(f);
    return rc;
}

static int from_scenario(struct gh_report *r, const char *path, const char *policy_path,
                         long *bad, struct gh_err *err)
{
    int rc = read_signals(r, path, bad, err);
    if (rc)
        return rc;
    struct gh_policy *policy = NULL;
    if (policy_path && !(policy = gh_cmd_load_policy(policy_path)))
        return gh_err_set(err, GH_EINVAL, "%s: not a usable policy", policy_path);
    struct replay_ctx c = {.r = r};
    struct gh_replay rp = {.path = path, .policy = policy, .cb = on_incident, .cb_ctx = &c};
    rc = gh_replay_file(&rp, err);
    gh_policy_free(policy);
    if (!rc && c.rc) {
        *err = c.err;
        rc = c.rc;
    }
    return rc;
}

/* Writes the page to out, through a temporary file renamed into place. */
static int write_page(const struct gh_report *r, const char *out, struct gh_err *err)
{
    if (strcmp(out, "-") == 0)
        return gh_report_write_html(r, stdout, err);
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", out) >= sizeof tmp)
        return gh_err_set(err, GH_ELIMIT, "--html: path too long");
    int fd = mkstemp(tmp);
    if (fd < 0)
        return gh_err_set(err, GH_EIO, "%s: %s", tmp, strerror(errno));
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        return gh_err_set(err, GH_EIO, "%s: %s", tmp, strerror(errno));
    }
    int rc = gh_report_write_html(r, f, err);
    if (!rc && fchmod(fd, 0644) != 0)
        rc = gh_err_set(err, GH_EIO, "%s: %s", tmp, strerror(errno));
    if (fclose(f) != 0 && !rc)
        rc = gh_err_set(err, GH_EIO, "%s: %s", out, strerror(errno));
    if (!rc && rename(tmp, out) != 0)
        rc = gh_err_set(err, GH_EIO, "%s: %s", out, strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}

int gh_cmd_report(int argc, char **argv)
{
    const char *out = NULL, *db = getenv("GPUHEAL_DB"), *scenario = NULL, *policy = NULL;
    const char *subject = NULL, *title = NULL;
    bool db_given = false;
    int64_t since = 0;
    long limit = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--html") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--db") == 0 && i + 1 < argc) {
            db = argv[++i];
            db_given = true;
        } else if (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc) {
            scenario = argv[++i];
        } else if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc) {
            policy = argv[++i];
        } else if (strcmp(argv[i], "--title") == 0 && i + 1 < argc) {
            title = argv[++i];
        } else if (strcmp(argv[i], "--since") == 0 && i + 1 < argc) {
            if (!parse_since(argv[++i], &since)) {
                fprintf(stderr, "gpuheal report: --since: \"%s\" is neither a duration (30m, 7d) "
                                "nor an RFC 3339 time\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            char *end;
            limit = strtol(argv[++i], &end, 10);
            if (*end || limit <= 0 || limit > GH_AUDIT_QUERY_MAX) {
                fprintf(stderr, "gpuheal report: --limit: 1..%d\n", GH_AUDIT_QUERY_MAX);
                return 2;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            help();
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "gpuheal report: unknown option \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!subject) {
            subject = argv[i];
        } else {
            fprintf(stderr, "gpuheal report: one subject at a time\n");
            return 2;
        }
    }
    if (!out) {
        usage(stderr);
        return 2;
    }
    if (scenario && db_given) {
        fprintf(stderr, "gpuheal report: --db or --scenario, not both\n");
        return 2;
    }
    if (scenario && strcmp(scenario, "-") == 0) {
        fprintf(stderr, "gpuheal report: --scenario needs a file (it is read twice)\n");
        return 2;
    }
    struct gh_err err = {{0}};
    struct gh_audit_subject subj;
    if (subject && gh_audit_subject_parse(subject, &subj, &err)) {
        fprintf(stderr, "gpuheal report: %s\n", err.msg);
        return 2;
    }
    if (subject && scenario && subj.kind != GH_AUDIT_JOB && subj.kind != GH_AUDIT_NODE) {
        fprintf(stderr, "gpuheal report: with --scenario, the subject is job/NS/NAME or "
                        "node/NAME\n");
        return 2;
    }
    struct gh_report *r = gh_report_new(NULL, &err);
    if (!r) {
        fprintf(stderr, "gpuheal report: %s\n", err.msg);
        return 1;
    }
    int rc = GH_OK;
    char origin[4200];
    if (subject && subj.kind == GH_AUDIT_JOB)
        rc = gh_report_set_subject(r, GH_REPORT_JOB, subj.name, &err);
    else if (subject && subj.kind == GH_AUDIT_NODE)
        rc = gh_report_set_subject(r, GH_REPORT_NODE, subj.name, &err);
    if (!rc && title)
        rc = gh_report_set_title(r, title, &err);
    else if (!rc && subject && subj.kind != GH_AUDIT_JOB && subj.kind != GH_AUDIT_NODE) {
        char t[GH_AUDIT_ID_MAX + 32], s[GH_AUDIT_ID_MAX + 16];
        snprintf(t, sizeof t, "gpuheal report: %s", gh_audit_subject_str(&subj, s, sizeof s));
        rc = gh_report_set_title(r, t, &err);
    }
    long bad = 0;
    if (!rc && scenario) {
        snprintf(origin, sizeof origin, "scenario %s (replayed through the engine)", scenario);
        rc = gh_report_set_origin(r, origin, &err);
        if (!rc)
            rc = from_scenario(r, scenario, policy, &bad, &err);
    } else if (!rc) {
        const char *url = db && *db ? db : DEFAULT_DB;
        snprintf(origin, sizeof origin, "audit store %s", url);
        rc = gh_report_set_origin(r, origin, &err);
        struct gh_audit *a = NULL;
        if (!rc)
            rc = gh_audit_open_existing(url, &a, &err);
        if (!rc)
            rc = gh_report_load_audit(r, a, subject ? &subj : NULL, since, (size_t)limit, &err);
        gh_audit_close(a);
    }
    if (!rc)
        rc = write_page(r, out, &err);
    if (rc) {
        fprintf(stderr, "gpuheal report: %s\n", err.msg);
    } else if (strcmp(out, "-") != 0) {
        struct gh_report_stats st;
        gh_report_stats(r, &st);
        printf("gpuheal report: wrote %s (%zu incidents, %llu signals", out, st.incidents,
               (unsigned long long)st.signals);
        if (bad)
            printf(", %ld bad lines skipped", bad);
        printf(")\n");
    }
    gh_report_free(r);
    return rc ? 1 : 0;
}
