/* listen.c - opens a listening TCP socket from a "HOST:PORT" string. */
#include "common/listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int gh_listen_tcp(const char *hostport, int *fd, int *port, struct gh_err *err)
{
    char host[256], serv[16];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon[1] == '\0' || strlen(colon + 1) >= sizeof serv)
        return gh_err_set(err, GH_EINVAL, "listen address \"%s\": expected HOST:PORT", hostport);
    const char *h = hostport;
    size_t hlen = (size_t)(colon - hostport);
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    if (hlen >= sizeof host)
        return gh_err_set(err, GH_EINVAL, "listen address \"%s\": host too long", hostport);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    snprintf(serv, sizeof serv, "%s", colon + 1);
    char *end;
    long p = strtol(serv, &end, 10);
    if (*end || p < 0 || p > 65535)
        return gh_err_set(err, GH_EINVAL, "listen address \"%s\": bad port", hostport);

    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    bool any = hlen == 0 || strcmp(host, "*") == 0;
    int grc = getaddrinfo(any ? NULL : host, serv, &hints, &res);
    if (grc)
        return gh_err_set(err, GH_EINVAL, "listen address \"%s\": %s", hostport, gai_strerror(grc));
    int rc = GH_EIO, s = -1, saved = 0;
    /* With no host, prefer IPv6 dual-stack, else take the first that binds. */
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (s < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, ai->ai_addr, ai->ai_addrlen) == 0 && listen(s, 128) == 0) {
            rc = GH_OK;
            break;
        }
        saved = errno;
        close(s);
        s = -1;
    }
    freeaddrinfo(res);
    if (rc)
        return gh_err_set(err, GH_EIO, "listen on \"%s\": %s", hostport, strerror(saved));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(s, (struct sockaddr *)&ss, &sl) != 0) {
        saved = errno;
        close(s);
        return gh_err_set(err, GH_EIO, "getsockname: %s", strerror(saved));
    }
    *port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                     : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd = s;
    return GH_OK;
}
