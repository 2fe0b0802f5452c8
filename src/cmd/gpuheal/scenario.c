/* scenario.c - `gpuheal scenario score DIR` and `gpuheal scenario gen`: the
 * dispatcher (the work is in scenario_score.c and scenario_gen.c). */
#include <stdio.h>
#include <string.h>

#include "cmd/gpuheal/commands.h"

int gh_scenario_score(int argc, char **argv);
int gh_scenario_gen(int argc, char **argv);

int gh_cmd_scenario(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "score") == 0)
        return gh_scenario_score(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "gen") == 0)
        return gh_scenario_gen(argc - 1, argv + 1);
    FILE *out = argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) ? stdout
                                                                                           : stderr;
    fprintf(out,
            "usage: gpuheal scenario score [--verbose] [--policy FILE] DIR\n"
            "         replays every DIR/NAME.jsonl with a DIR/NAME.expect.json and prints class\n"
            "         accuracy, blamed-node accuracy, false isolations and time to decide\n"
            "       gpuheal scenario gen [--ranks N] [--steps N] [--fault KIND] [--seed N] ...\n"
            "         writes a synthetic scenario (JSON lines) to stdout; see --help there\n");
    return out == stdout ? 0 : 2;
}
