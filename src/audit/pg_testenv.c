/* pg_testenv.c - starts and stops a private PostgreSQL cluster in a
 * temporary directory for tests (initdb + pg_ctl as child processes). */
#include "audit/pg_testenv.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG_PORT 5432

static int find_bin(char *out, size_t cap)
{
    const char *env = getenv("GH_PG_BIN");
    char path[512];
    if (env && *env) {
        snprintf(path, sizeof path, "%s/initdb", env);
        if (access(path, X_OK) == 0) {
            snprintf(out, cap, "%s", env);
            return GH_OK;
        }
    }
    /* the newest /usr/lib/postgresql/<N>/bin */
    DIR *d = opendir("/usr/lib/postgresql");
    long best = -1;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            char *end;
            long v = strtol(e->d_name, &end, 10);
            if (end == e->d_name || *end)
                continue;
            snprintf(path, sizeof path, "/usr/lib/postgresql/%ld/bin/initdb", v);
            if (v > best && access(path, X_OK) == 0)
                best = v;
        }
        closedir(d);
    }
    if (best < 0)
        return GH_ENOTFOUND;
    snprintf(out, cap, "/usr/lib/postgresql/%ld/bin", best);
    return GH_OK;
}

/* Runs argv with stdout/stderr appended to log, as "postgres" when we are
 * root. Returns the exit status (-1 when it could not run). */
static int run(char *const argv[], const char *log)
{
    uid_t uid = 0;
    gid_t gid = 0;
    bool drop = geteuid() == 0;
    if (drop) {
        struct passwd *pw = getpwnam("postgres");
        if (!pw)
            return -1;
        uid = pw->pw_uid;
        gid = pw->pw_gid;
    }
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        int nul = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (nul >= 0)
            dup2(nul, 0);
        if (drop && (setgroups(0, NULL) || setgid(gid) || setuid(uid)))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void log_tail(const char *log, struct gh_err *err, const char *what)
{
    char buf[400] = "";
    FILE *f = fopen(log, "r");
    if (f) {
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, sz > (long)sizeof buf - 1 ? sz - (long)sizeof buf + 1 : 0, SEEK_SET);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    gh_err_set(err, GH_EIO, "%s failed: %s", what, buf);
}

/* pg_ctl start on the cluster's data directory, waiting until it accepts. */
static int server_start(struct gh_pg_testenv *pg, struct gh_err *err)
{
    char pg_ctl[300], data[300], log[300], opts[400], srvlog[300];
    snprintf(pg_ctl, sizeof pg_ctl, "%s/pg_ctl", pg->bin);
    snprintf(data, sizeof data, "%s/data", pg->dir);
    snprintf(log, sizeof log, "%s/setup.log", pg->dir);
    snprintf(opts, sizeof opts, "-k %s -c listen_addresses= -p %d -F", pg->dir, PG_PORT);
    snprintf(srvlog, sizeof srvlog, "%s/server.log", pg->dir);
    char *start_argv[] = {pg_ctl, "-D", data, "-o", opts, "-l", srvlog, "-w", "-t", "60",
                          "start", NULL};
    pg->running = 1;
    if (run(start_argv, log) != 0) {
        log_tail(srvlog, err, "pg_ctl start");
        return GH_EIO;
    }
    return GH_OK;
}

/* pg_ctl stop in mode ("fast", "immediate"), waiting until it is down. */
/* The server's processes: the postmaster (data/postmaster.pid's first
 * line) and its children (from /proc). Returns how many were put in pids. */
static size_t server_pids(const struct gh_pg_testenv *pg, pid_t *pids, size_t cap)
{
    char path[300];
    snprintf(path, sizeof path, "%s/data/postmaster.pid", pg->dir);
    FILE *f = fopen(path, "r");
    long pm = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%ld", &pm) != 1 || pm <= 0) {
        fclose(f);
        return 0;
    }
    fclose(f);
    size_t n = 0;
    pids[n++] = (pid_t)pm;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) && n < cap) {
        char stat[300], buf[512];
        long pid = strtol(e->d_name, NULL, 10), ppid = 0;
        if (pid <= 0)
            continue;
        snprintf(stat, sizeof stat, "/proc/%ld/stat", pid);
        FILE *sf = fopen(stat, "r");
        if (!sf)
            continue;
        size_t got = fread(buf, 1, sizeof buf - 1, sf);
        fclose(sf);
        buf[got] = 0;
        const char *rp = strrchr(buf, ')'); /* "pid (comm) state ppid ..." */
        if (rp && sscanf(rp + 1, " %*c %ld", &ppid) == 1 && ppid == pm)
            pids[n++] = (pid_t)pid;
    }
    if (d)
        closedir(d);
    return n;
}

static void server_stop(struct gh_pg_testenv *pg, const char *mode)
{
    char pg_ctl[300], data[300], log[300], m[16];
    snprintf(pg_ctl, sizeof pg_ctl, "%s/pg_ctl", pg->bin);
    snprintf(data, sizeof data, "%s/data", pg->dir);
    snprintf(log, sizeof log, "%s/setup.log", pg->dir);
    snprintf(m, sizeof m, "%s", mode);
    char *argv[] = {pg_ctl, "-D", data, "-m", m, "-w", "stop", NULL};
    /* a server a test froze (gh_pg_testenv_freeze) and could not thaw, as
     * when an assertion failed in between, cannot stop: let it run first */
    pid_t pids[64];
    size_t n = server_pids(pg, pids, 64);
    for (size_t i = 0; i < n; i++)
        kill(pids[i], SIGCONT);
    (void)run(argv, log);
    pg->running = 0;
}

void gh_pg_testenv_halt(struct gh_pg_testenv *pg)
{
    if (pg->dir[0] && pg->running)
        server_stop(pg, "fast");
}

int gh_pg_testenv_freeze(struct gh_pg_testenv *pg, bool frozen, struct gh_err *err)
{
    pid_t pids[64];
    size_t n = pg->running ? server_pids(pg, pids, 64) : 0;
    if (!n)
        return gh_err_set(err, GH_EIO, "no server processes found");
    for (size_t i = 0; i < n; i++)
        kill(pids[i], frozen ? SIGSTOP : SIGCONT);
    return GH_OK;
}

int gh_pg_testenv_resume(struct gh_pg_testenv *pg, struct gh_err *err)
{
    if (!pg->dir[0])
        return gh_err_set(err, GH_EINVAL, "no cluster");
    return pg->running ? GH_OK : server_start(pg, err);
}

int gh_pg_testenv_start(struct gh_pg_testenv *pg, struct gh_err *err)
{
    memset(pg, 0, sizeof *pg);
    if (find_bin(pg->bin, sizeof pg->bin))
        return gh_err_set(err, GH_ENOTFOUND, "no PostgreSQL server binaries "
                                             "(/usr/lib/postgresql/N/bin or $GH_PG_BIN)");
    snprintf(pg->dir, sizeof pg->dir, "/tmp/gh-pg-XXXXXX");
    if (!mkdtemp(pg->dir))
        return gh_err_set(err, GH_EIO, "mkdtemp: failed");
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (!pw || chown(pg->dir, pw->pw_uid, pw->pw_gid) != 0) {
            rmdir(pg->dir);
            return gh_err_set(err, GH_ENOTFOUND, "running as root and no usable postgres user");
        }
    }
    char initdb[300], data[300], log[300];
    snprintf(initdb, sizeof initdb, "%s/initdb", pg->bin);
    snprintf(data, sizeof data, "%s/data", pg->dir);
    snprintf(log, sizeof log, "%s/setup.log", pg->dir);
    char *init_argv[] = {initdb, "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
                         "--no-sync", "--no-instructions", NULL};
    if (run(init_argv, log) != 0) {
        log_tail(log, err, "initdb");
        gh_pg_testenv_stop(pg);
        return GH_EIO;
    }
    if (server_start(pg, err)) {
        gh_pg_testenv_stop(pg);
        return GH_EIO;
    }
    snprintf(pg->url, sizeof pg->url, "postgres:host=%s port=%d user=postgres dbname=postgres",
             pg->dir, PG_PORT);
    /* the socket directory as a percent-encoded host */
    char host[300];
    size_t u = 0;
    for (const char *p = pg->dir; *p && u + 4 < sizeof host; p++) {
        if (*p == '/') {
            memcpy(host + u, "%2F", 3);
            u += 3;
        } else {
            host[u++] = *p;
        }
    }
    host[u] = '\0';
    snprintf(pg->uri, sizeof pg->uri, "postgresql://postgres@%s:%d/postgres", host, PG_PORT);
    return GH_OK;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void gh_pg_testenv_stop(struct gh_pg_testenv *pg)
{
    if (!pg->dir[0])
        return;
    if (pg->running)
        server_stop(pg, "immediate");
    nftw(pg->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    pg->dir[0] = '\0';
}
