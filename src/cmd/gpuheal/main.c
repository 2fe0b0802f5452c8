/* main.c - the gpuheal CLI: dispatches to one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "cmd/gpuheal/commands.h"
#include "common/log.h"
#include "common/version.h"


struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    {"kmsg-parse", gh_cmd_kmsg_parse, "parse NVIDIA kernel-log lines into signals (JSON lines)"},
    {"xid", gh_cmd_xid, "show the XID catalog, or one code's class and default actions"},
    {"diagnose", gh_cmd_diagnose, "replay a scenario file through the engine; incidents as JSON lines"},
    {"policy", gh_cmd_policy, "lint a recovery policy file, or print the built-in default"},
    {"scenario", gh_cmd_scenario, "score a directory of labelled scenarios, or generate a big one"},
    {"explain", gh_cmd_explain, "why gpuheal acted on a job, pod or node: evidence, rule, guards, actions"},
    {"timeline", gh_cmd_timeline, "the audit trail of a node or job as an aligned text timeline"},
    {"approve", gh_cmd_approve, "approve an incident that waits for approval (--require-approval)"},
    {"release", gh_cmd_release, "take gpuheal's cordon, taint, annotations and condition off nodes (uninstall)"},
    {"inject", gh_cmd_inject, "post signal lines (marked injected) to a controller's ingest endpoint"},
    {"ingest-serve", gh_cmd_ingest_serve, "(dev) run the ingest endpoint alone, appending signals to a file"},
    {"simulate", gh_cmd_simulate, "simulate a cluster's failures under a policy: ETTR, goodput, waste"},
    {"advise", gh_cmd_advise, "advise checkpoint: Young/Daly optimal checkpoint interval"},
    {"report", gh_cmd_report, "one self-contained HTML report: timeline, step times, incidents"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuheal [--log-level LEVEL] COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'gpuheal COMMAND --help' describes one command.\n");
}

int main(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--log-level") == 0 && i + 1 < argc) {
            int level = gh_log_parse_level(argv[++i]);
            if (level < 0) {
                fprintf(stderr, "gpuheal: --log-level: unknown level \"%s\"\n", argv[i]);
                return 2;
            }
            gh_log_set_level((enum gh_log_level)level);
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("gpuheal %s\n", GH_VERSION);
            return 0;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "gpuheal: unknown option \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++)
        if (strcmp(argv[i], commands[c].name) == 0)
            return commands[c].run(argc - i, argv + i);
    fprintf(stderr, "gpuheal: unknown command \"%s\"\n", argv[i]);
    usage(stderr);
    return 2;
}
