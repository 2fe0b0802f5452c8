/* commands.h - the subcommands of the gpuheal CLI. Each lives in its own file
 * as `int gh_cmd_<name>(int argc, char **argv)` where argv[0] is the
 * subcommand's name; it returns the process exit status (0 ok, 1 failure,
 * 2 usage error). Add a row to the table in main.c for each new one. */
#ifndef GH_CMD_GPUHEAL_COMMANDS_H
#define GH_CMD_GPUHEAL_COMMANDS_H

int gh_cmd_kmsg_parse(int argc, char **argv);
int gh_cmd_xid(int argc, char **argv);
int gh_cmd_diagnose(int argc, char **argv);
int gh_cmd_policy(int argc, char **argv);
int gh_cmd_scenario(int argc, char **argv);
int gh_cmd_explain(int argc, char **argv);
int gh_cmd_timeline(int argc, char **argv);
int gh_cmd_approve(int argc, char **argv);
int gh_cmd_release(int argc, char **argv);
/* explain.c: the audit-store reader behind explain (timeline false) and
 * timeline (true). */
#include <stdbool.h>
int gh_cmd_audit_read(int argc, char **argv, bool timeline);
int gh_cmd_inject(int argc, char **argv);
int gh_cmd_ingest_serve(int argc, char **argv);
int gh_cmd_simulate(int argc, char **argv);
int gh_cmd_advise(int argc, char **argv);
int gh_cmd_report(int argc, char **argv);

/* kube_cli.c: a client of the cluster kubeconfig names (NULL: the default
 * kubeconfig; context NULL: its current one). NULL after printing
 * "gpuheal CMD: why" on stderr. Caller frees with gh_kube_client_free(). */
struct gh_kube_client;
struct gh_kube_client *gh_cmd_kube_client(const char *cmd, const char *kubeconfig,
                                          const char *context);

/* Shared by diagnose and scenario (scenario_io.c): replays one scenario file
 * through a new engine on the file's clock. GH_ENOMEM also when the engine
 * refused a signal or counted a failed allocation (stats.nomem): the
 * incidents already handed to cb may then be incomplete. */
#include <stdio.h>
#include "engine/engine.h"

struct gh_replay {
    const char *path;               /* file, or "-" for standard input */
    const struct gh_policy *policy; /* borrowed; NULL = built-in default */
    gh_incident_fn cb;              /* each incident, in decision order */
    void *cb_ctx;
    FILE *diag;                     /* bad-line messages (NULL = silent) */
    /* results */
    long bad_lines, signals;
    char scenario[128];             /* the header's "scenario", or "" */
    struct gh_engine_stats stats;
};
int gh_replay_file(struct gh_replay *r, struct gh_err *err);

/* Reads and parses a policy file for --policy, printing its problems with
 * line numbers on stderr (diagnose.c). NULL when it has errors. */
struct gh_policy *gh_cmd_load_policy(const char *path);

#endif
