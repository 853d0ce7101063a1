/* redis_proc.c - start, signal and stop throwaway redis-server processes. */
#include "tests/helpers/redis_proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

/* Returns a loopback TCP port that was free a moment ago, or -1. */
int th_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Returns 1 when the server on port answers PING (PONG, or NOAUTH from a server
 * started with --requirepass), 0 otherwise. */
static int answers_ping(int port) {
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c) return 0;
    int ok = 0;
    if (!c->err && redisSetTimeout(c, tv) == REDIS_OK) {
        redisReply *r = redisCommand(c, "PING");
        ok = r && ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
                   (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0));
        if (r) freeReplyObject(r);
    }
    redisFree(c);
    return ok;
}

long long th_calls_in(const char *info, const char *cmd) {
    char pat[96];
    snprintf(pat, sizeof pat, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(info, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : 0;
}

long long th_redis_calls(redisContext *c, const char *cmd) {
    redisReply *r = redisCommand(c, "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r) freeReplyObject(r);
        return -1;
    }
    long long v = th_calls_in(r->str, cmd);
    freeReplyObject(r);
    return v;
}

static void sleep_20ms(void) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Polls PING until the server answers. Returns 0, or -1 after timeout_ms. */
int th_redis_wait_ready(int port, int timeout_ms) {
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        if (answers_ping(port)) return 0;
        sleep_20ms();
    }
    return -1;
}

/* Whether a program named name is an executable file in a folder of $PATH. */
static int on_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        char full[512];
        int w = snprintf(full, sizeof full, "%.*s/%s", (int)n, path, name);
        if (n > 0 && w > 0 && (size_t)w < sizeof full && access(full, X_OK) == 0) return 1;
        path += n;
        if (*path == ':') path++;
    }
    return 0;
}

static int spawn(th_redis *r) {
    char port[16];
    snprintf(port, sizeof port, "%d", r->port);
    char extra[sizeof r->extra];
    snprintf(extra, sizeof extra, "%s", r->extra);
    const char *bin = getenv("REDIS_SERVER");
    if (!bin || !*bin) bin = "redis-server";
    char conf[sizeof r->dir + 16];
    if (r->sentinel) {
        snprintf(conf, sizeof conf, "%s/sentinel.conf", r->dir);
        const char *sbin = getenv("REDIS_SENTINEL");
        if (sbin && *sbin)
            bin = sbin;
        else if (on_path("redis-sentinel"))
            bin = "redis-sentinel";
    }

    char *argv[48];
    int n = 0;
    argv[n++] = (char *)bin;
    if (r->sentinel) {
        argv[n++] = conf; /* the config file comes first */
        /* redis-sentinel ignores it; any other name of the binary needs it */
        argv[n++] = (char *)"--sentinel";
    }
    argv[n++] = (char *)"--port";
    argv[n++] = port;
    argv[n++] = (char *)"--bind";
    argv[n++] = (char *)"127.0.0.1";
    argv[n++] = (char *)"--dir";
    argv[n++] = r->dir;
    argv[n++] = (char *)"--save";
    argv[n++] = (char *)"";
    argv[n++] = (char *)"--daemonize";
    argv[n++] = (char *)"no";
    argv[n++] = (char *)"--logfile";
    argv[n++] = (char *)"redis.log";
    for (char *save = NULL, *tok = strtok_r(extra, " ", &save); tok && n < 46;
         tok = strtok_r(NULL, " ", &save))
        argv[n++] = tok;
    argv[n] = NULL;

    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execvp(bin, argv);
        _exit(127);
    }
    r->pid = pid;
    /* Like th_redis_wait_ready, but gives up as soon as the process exits (a
     * port taken meanwhile, a bad argument) instead of waiting out the timeout. */
    for (int waited = 0; waited < 10000; waited += 20) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            r->pid = 0;
            return -1;
        }
        if (answers_ping(r->port)) return 0;
        sleep_20ms();
    }
    th_redis_signal(r, SIGKILL);
    return -1;
}

/* Makes the server's folder and picks its port and url without starting it, for a
 * caller that writes files there first (a sentinel.conf); th_redis_restart() starts
 * it then. Returns 0, or -1 (nothing to undo but th_redis_stop()). */
int th_redis_prepare(th_redis *r) {
    r->pid = 0;
    snprintf(r->dir, sizeof r->dir, "/tmp/gm-redis-XXXXXX");
    if (!mkdtemp(r->dir)) {
        r->dir[0] = '\0';
        return -1;
    }
    r->port = th_free_port();
    if (r->port < 0) return -1;
    snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d/0", r->port);
    return 0;
}

/* Starts a new server in a new folder. Returns 0 or -1. */
int th_redis_start(th_redis *r) {
    if (th_redis_prepare(r) != 0) return -1;
    return spawn(r);
}

/* Starts the server again on the same port and folder, with the same arguments (after
 * a kill, or the first time after th_redis_prepare). Returns 0 or -1. */
int th_redis_restart(th_redis *r) {
    if (r->pid > 0) th_redis_signal(r, SIGKILL);
    for (int i = 0; i < 100; i++) { /* the port may linger a moment */
        if (spawn(r) == 0) return 0;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* Sends sig; for SIGKILL and SIGTERM also reaps the process. */
void th_redis_signal(th_redis *r, int sig) {
    if (r->pid <= 0) return;
    kill(r->pid, sig);
    if (sig == SIGKILL || sig == SIGTERM) {
        while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR) {
        }
        r->pid = 0;
    }
}

/* Kills the server and removes its folder. Safe to call twice. */
void th_redis_stop(th_redis *r) {
    if (r->pid > 0) {
        kill(r->pid, SIGCONT);
        th_redis_signal(r, SIGKILL);
    }
    if (r->dir[0]) {
        char cmd[320];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
        if (system(cmd) != 0) { /* nothing more to do */
        }
        r->dir[0] = '\0';
    }
}

/* Prints the tail of r's log under a heading; see redis_proc.h. */
void th_redis_dump_log(const th_redis *r, const char *what, int lines, FILE *out) {
    if (!r->dir[0]) return;
    char path[sizeof r->dir + 16];
    snprintf(path, sizeof path, "%s/redis.log", r->dir);
    fprintf(out, "---- %s 127.0.0.1:%d (%s)\n", what, r->port, path);
    static char buf[64 * 1024];
    FILE *f = fopen(path, "r");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0) {
        fprintf(out, "(cannot read it)\n");
        if (f) fclose(f);
        return;
    }
    long from = size > (long)sizeof buf ? size - (long)sizeof buf : 0;
    size_t n = 0;
    if (fseek(f, from, SEEK_SET) == 0) n = fread(buf, 1, (size_t)(size - from), f);
    fclose(f);
    size_t start = n; /* back over `lines` newlines, the last one (ending the text) aside */
    int seen = 0;
    while (start > 0) {
        if (buf[start - 1] == '\n' && start != n && ++seen == lines) break;
        start--;
    }
    fwrite(buf + start, 1, n - start, out);
}
