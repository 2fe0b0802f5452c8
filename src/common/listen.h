/* listen.h - a listening TCP socket from "HOST:PORT", for the HTTP servers
 * on libmicrohttpd (the ingest endpoint, the agent's /healthz and
 * /metrics), which are handed the socket rather than an address so that
 * port 0 (any free port, for tests) can be read back. */
#ifndef GH_COMMON_LISTEN_H
#define GH_COMMON_LISTEN_H

#include "common/err.h"

/* hostport: "HOST:PORT", "[V6ADDR]:PORT" or ":PORT" (all interfaces);
 * HOST may be a name. PORT 0 = any free port. On success *fd is a
 * non-blocking, close-on-exec socket listening with SO_REUSEADDR (caller
 * owns: close, or hand it to MHD which then does), and *port the bound
 * port. GH_EINVAL (bad syntax, unknown host), GH_EIO (bind/listen). */
int gh_listen_tcp(const char *hostport, int *fd, int *port, struct gh_err *err);

#endif
