/* advise.c - `gpuheal advise checkpoint`: the optimal checkpoint interval by
 * Young's and Daly's formulas for a given MTBF and checkpoint stall, with the
 * expected ETTR from Daly's complete model. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/gpuheal/commands.h"
#include "sim/daly.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuheal advise checkpoint --mtbf DURATION --stall DURATION [--restart DURATION] [--json]\n"
            "       gpuheal advise checkpoint --job NS/NAME --db PATH   (not available yet)\n"
            "\n"
            "The optimal checkpoint interval tau (compute between checkpoints) for a job whose\n"
            "mean time between failures is MTBF and whose checkpoint stalls training for STALL:\n"
            "  Young (1974): tau = sqrt(2 * stall * MTBF)\n"
            "  Daly (2006):  tau = sqrt(2 * stall * MTBF) * (1 + sqrt(stall / (2 MTBF)) / 3\n"
            "                      + (stall / (2 MTBF)) / 9) - stall    (stall < 2 MTBF; else MTBF)\n"
            "and the expected ETTR with restart time R from Daly's complete model:\n"
            "  ETTR = tau / (MTBF * e^(R/MTBF) * (e^((tau + stall)/MTBF) - 1))\n"
            "DURATION: seconds, or a number with s, m, h or d (e.g. 3.09h).\n");
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
    bool json = false, from_db = false;
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
        else if (strcmp(a, "--job") == 0 || strcmp(a, "--db") == 0)
            from_db = true;
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
    if (from_db) {
        fprintf(stderr, "gpuheal advise: --job/--db need the audit store, which does not exist yet; "
                        "give --mtbf and --stall\n");
        return 2;
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
        json_object_set_new(o, "stall_s", json_real(stall));
        json_object_set_new(o, "restart_s", json_real(restart));
        json_object_set_new(o, "young_s", json_real(young));
        json_object_set_new(o, "daly_s", json_real(daly));
        json_object_set_new(o, "young_ettr", isfinite(ey) ? json_real(ey) : json_null());
        json_object_set_new(o, "daly_ettr", isfinite(ed) ? json_real(ed) : json_null());
        char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
        if (s)
            puts(s);
        free(s);
        json_decref(o);
        return s ? 0 : 1;
    }
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
