/* diagnose.c - `gpuheal diagnose [--policy FILE] [--stats] FILE|-`: replays a
 * scenario through the engine and writes its incidents as JSON lines. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/gpuheal/commands.h"
#include "common/file.h"
#include "common/timeutil.h"

static void print_incident(void *ctx, const struct gh_incident *inc)
{
    FILE *out = ctx;
    char *line = NULL;
    if (gh_incident_encode(inc, &line, NULL) == GH_OK) {
        fputs(line, out);
        fputc('\n', out);
    }
    free(line);
}

/* Loads a policy file for --policy; prints its problems. NULL on error. */
struct gh_policy *gh_cmd_load_policy(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "gpuheal: %s: cannot open\n", path);
        return NULL;
    }
    char *buf;
    size_t len;
    struct gh_err err = {{0}};
    int rc = gh_file_read_fd(fd, path, GH_POLICY_MAX_BYTES, &buf, &len, &err);
    close(fd);
    if (rc == GH_EIO) { /* a directory, an I/O error: not a short policy */
        fprintf(stderr, "gpuheal: %s\n", err.msg);
        return NULL;
    }
    if (rc) {
        fprintf(stderr, "gpuheal: %s: larger than %d bytes\n", path, GH_POLICY_MAX_BYTES);
        return NULL;
    }
    struct gh_policy *p = NULL;
    struct gh_policy_diags d;
    gh_policy_parse(buf, len, &p, &d);
    free(buf);
    for (int i = 0; i < d.n; i++)
        if (d.d[i].error || !p)
            fprintf(stderr, "%s:%d: %s: %s\n", path, d.d[i].line, d.d[i].error ? "error" : "warning",
                    d.d[i].msg);
    return p;
}

int gh_cmd_diagnose(int argc, char **argv)
{
    const char *policy_path = NULL, *path = NULL;
    bool stats = false, strict = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc) {
            policy_path = argv[++i];
        } else if (strcmp(argv[i], "--stats") == 0) {
            stats = true;
        } else if (strcmp(argv[i], "--strict") == 0) {
            strict = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: gpuheal diagnose [--policy FILE] [--stats] [--strict] FILE|-\n"
                   "Replays a scenario (signals as JSON lines, optional header first; spec\n"
                   "sections 1-2) through the detection engine on the scenario's own clock,\n"
                   "sorted by ts, and writes one incident per line (spec section 3).\n"
                   "Bad lines are reported on stderr with their line number and skipped;\n"
                   "--strict makes them fail the run (exit 1). --stats prints engine figures.\n");
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "gpuheal diagnose: unknown option \"%s\"\n", argv[i]);
            return 2;
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "gpuheal diagnose: one scenario file at a time\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: gpuheal diagnose [--policy FILE] [--stats] [--strict] FILE|-\n");
        return 2;
    }
    struct gh_policy *policy = NULL;
    if (policy_path && !(policy = gh_cmd_load_policy(policy_path)))
        return 1;
    struct gh_replay r = {.path = path, .policy = policy, .cb = print_incident, .cb_ctx = stdout,
                          .diag = stderr};
    struct gh_err err;
    int rc = gh_replay_file(&r, &err);
    fflush(stdout);
    if (rc != GH_OK)
        fprintf(stderr, "gpuheal diagnose: %s\n", err.msg);
    if (stats) {
        const struct gh_engine_stats *s = &r.stats;
        unsigned long long evicted = 0;
        for (int k = 0; k < GH_KIND__COUNT; k++)
            evicted += s->timeline.evicted[k];
        fprintf(stderr,
                "signals=%ld bad_lines=%ld duplicates=%llu late=%llu evicted=%llu incidents=%llu "
                "findings=%llu absorbed=%llu pending=%llu grace=%llu unmatched=%llu bytes=%zu\n",
                r.signals, r.bad_lines, (unsigned long long)s->timeline.duplicates,
                (unsigned long long)s->timeline.late, evicted, (unsigned long long)s->incidents,
                (unsigned long long)s->findings, (unsigned long long)s->absorbed,
                (unsigned long long)s->pending, (unsigned long long)s->grace,
                (unsigned long long)s->unmatched, s->bytes);
    }
    gh_policy_free(policy);
    if (rc != GH_OK)
        return 1;
    if (strict && r.bad_lines)
        return 1;
    return 0;
}
