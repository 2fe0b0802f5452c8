/* timeline.c - `gpuheal timeline node/NAME | job/NS/NAME [--db URL]
 * [--since WHEN]`: the audit store's facts about one subject as an aligned
 * text timeline (the reader is shared with explain.c). */
#include <stdbool.h>

#include "cmd/gpuheal/commands.h"

int gh_cmd_timeline(int argc, char **argv) { return gh_cmd_audit_read(argc, argv, true); }
