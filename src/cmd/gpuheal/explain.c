/* explain.c - `gpuheal explain SUBJECT [--db URL] [--since WHEN]`: reads the
 * audit store and tells, in plain words, why gpuheal did what it did about
 * a job, pod, node or incident (and the shared reader that `gpuheal
 * timeline` uses). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "audit/explain.h"
#include "cmd/gpuheal/commands.h"
#include "common/timeutil.h"
#include "engine/policy.h"

#define DEFAULT_DB "sqlite:/var/lib/gpuheal/audit.db"

/* "--since": a duration back from now ("1h", "7d") or an RFC 3339 time. */
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

int gh_cmd_audit_read(int argc, char **argv, bool timeline)
{
    const char *name = timeline ? "timeline" : "explain";
    const char *db = getenv("GPUHEAL_DB"), *subject = NULL;
    int64_t since = 0;
    long limit = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--db") == 0 && i + 1 < argc) {
            db = argv[++i];
        } else if (strcmp(argv[i], "--since") == 0 && i + 1 < argc) {
            if (!parse_since(argv[++i], &since)) {
                fprintf(stderr, "gpuheal %s: --since: \"%s\" is neither a duration (30m, 7d) "
                                "nor an RFC 3339 time\n", name, argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            char *end;
            limit = strtol(argv[++i], &end, 10);
            if (*end || limit <= 0 || limit > GH_AUDIT_QUERY_MAX) {
                fprintf(stderr, "gpuheal %s: --limit: 1..%d\n", name, GH_AUDIT_QUERY_MAX);
                return 2;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: gpuheal %s job/NS/NAME | pod/NS/NAME | node/NAME | incident/ID\n"
                   "           [--db URL] [--since DURATION|TIME] [--limit N]\n", name);
            if (timeline)
                printf("The recorded signals, decisions, guard verdicts and actions about the\n"
                       "subject, one line each, in time order.\n");
            else
                printf("For each incident about the subject: what was seen (source, time, raw\n"
                       "line), which rule decided what and why, what the guards said, what was\n"
                       "done and with what result.\n");
            printf("--db: sqlite:PATH or postgres://... (default $GPUHEAL_DB, else %s).\n"
                   "--since: only decisions from then on (\"24h\", \"7d\" or an RFC 3339 time).\n",
                   DEFAULT_DB);
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "gpuheal %s: unknown option \"%s\"\n", name, argv[i]);
            return 2;
        } else if (!subject) {
            subject = argv[i];
        } else {
            fprintf(stderr, "gpuheal %s: one subject at a time\n", name);
            return 2;
        }
    }
    if (!subject) {
        fprintf(stderr, "usage: gpuheal %s job/NS/NAME | pod/NS/NAME | node/NAME [--db URL] "
                        "[--since WHEN]\n", name);
        return 2;
    }
    struct gh_err err = {{0}};
    struct gh_audit_subject subj;
    if (gh_audit_subject_parse(subject, &subj, &err)) {
        fprintf(stderr, "gpuheal %s: %s\n", name, err.msg);
        return 2;
    }
    struct gh_audit *a = NULL;
    bool given = db && *db;
    int orc = gh_audit_open_existing(given ? db : DEFAULT_DB, &a, &err);
    if (orc) {
        fprintf(stderr, "gpuheal %s: %s\n", name, err.msg);
        if (!given && orc == GH_ENOTFOUND)
            fprintf(stderr,
                    "gpuheal %s: that is the default; name the controller's audit store with "
                    "--db sqlite:PATH or --db postgres://... (or set GPUHEAL_DB)\n",
                    name);
        return 1;
    }
    struct gh_audit_incident_rec *recs = NULL;
    size_t n = 0;
    int rc = gh_audit_query(a, &subj, since, (size_t)limit, &recs, &n, &err);
    if (rc) {
        fprintf(stderr, "gpuheal %s: %s\n", name, err.msg);
    } else {
        if (timeline)
            gh_timeline_write(stdout, &subj, recs, n);
        else
            gh_explain_write(stdout, &subj, since, recs, n);
    }
    gh_audit_recs_free(recs, n);
    gh_audit_close(a);
    return rc ? 1 : 0;
}

int gh_cmd_explain(int argc, char **argv) { return gh_cmd_audit_read(argc, argv, false); }
