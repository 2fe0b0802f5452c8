/* commands.h - the subcommands of the gpuheal CLI. Each lives in its own file
 * as `int gh_cmd_<name>(int argc, char **argv)` where argv[0] is the
 * subcommand's name; it returns the process exit status (0 ok, 1 failure,
 * 2 usage error). Add a row to the table in main.c for each new one. */
#ifndef GH_CMD_GPUHEAL_COMMANDS_H
#define GH_CMD_GPUHEAL_COMMANDS_H

int gh_cmd_kmsg_parse(int argc, char **argv);
int gh_cmd_xid(int argc, char **argv);

#endif
