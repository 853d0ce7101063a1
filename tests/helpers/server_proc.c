/* server_proc.c - a market-server process for the tests (server_proc.h). */
#include "tests/helpers/server_proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/http_client.h"

#define EXTRA_MAX 16

/* Starts the binary serving 127.0.0.1:port on the store at redis_url, without
 * authentication, logging errors only, with the flags of extra (NULL, or
 * NULL-terminated) after those. Returns its pid (the caller waits for it),
 * or -1 when it cannot fork. */
pid_t th_server_spawn(int port, const char *redis_url, const char *const *extra) {
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *bin = getenv("MARKET_SERVER_BIN");
    if (!bin || !*bin) bin = "bin/market-server";
    const char *argv[10 + EXTRA_MAX] = {bin,       "--listen",  listen,        "--redis",
                                        redis_url, "--no-auth", "--log-level", "error"};
    size_t n = 8;
    for (size_t i = 0; extra && extra[i] && i < EXTRA_MAX; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Waits until 127.0.0.1:port answers GET /healthz with 200. Returns 0, or
 * -1 after timeout_ms. */
int th_server_healthy(int port, int timeout_ms) {
    for (int waited = 0; waited <= timeout_ms; waited += 25) {
        th_http r;
        int rc = th_http_do(port, "GET", "/healthz", NULL, 0, &r);
        long st = r.status;
        th_http_cleanup(&r);
        if (rc == 0 && st == 200) return 0;
        struct timespec ts = {0, 25 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}
