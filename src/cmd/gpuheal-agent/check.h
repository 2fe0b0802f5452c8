/* check.h - `gpuheal-agent --check`: a one-shot look at this node through
 * the agent's own sources and configuration (GPUs, driver, Fabric Manager,
 * nvidia-peermem, ECC and remap counters, NIC ports, kernel-log position,
 * DCGM, telemetry socket, spool, controller, the Node's advertised GPU
 * count), printed as a table or as one JSON object (docs/agent.md,
 * "Checking a node"). Internal to the gpuheal-agent binary. */
#ifndef GH_CMD_AGENT_CHECK_H
#define GH_CMD_AGENT_CHECK_H

#include <stdbool.h>

/* True when argv (borrowed) asks for the check (a "--check" argument). */
bool agent_check_wanted(int argc, char **argv);

/* Runs the check: argv is the agent's own command line plus --check, and
 * optionally --json and --check-root PATH (a prefix for the /proc and /sys
 * paths the new checks read; tests point it at a fake tree). Every other
 * option is the agent's, parsed the agent's way (flags, $GPUHEAL_*, the
 * config file). Prints the result on stdout. Returns the process's exit
 * status: 0 nothing failed, 1 a check failed, 2 a usage error (said on
 * stderr). Bounded: every NVML call, HTTP request and API call has a
 * deadline of about 2 s. */
int agent_check_main(int argc, char **argv);

#endif
