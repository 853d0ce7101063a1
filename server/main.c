/* main.c - market-server: parse the configuration, serve, stop on SIGINT/SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

int main(int argc, char **argv) {
    server_config cfg;
    char why[512];
    server_config_defaults(&cfg);
    int rc = server_config_parse(&cfg, argc, argv, why, sizeof why);
    if (rc < 0) {
        fprintf(stderr, "market-server: %s\n", why);
        return 2;
    }
    if (cfg.help) {
        server_usage(argv[0]);
        return 0;
    }

    /* Block the stop signals in every thread; main waits for them below. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    int err;
    server *s = server_start(&cfg, &err, why, sizeof why);
    if (!s) {
        fprintf(stderr, "market-server: %s\n", why);
        return 1;
    }
    /* Never log a password: show the URL up to its scheme and from its host on. */
    char shown[sizeof cfg.redis];
    const char *at = strrchr(cfg.redis, '@'), *scheme = strstr(cfg.redis, "://");
    if (at && scheme && scheme < at)
        snprintf(shown, sizeof shown, "%.*s://***@%s", (int)(scheme - cfg.redis), cfg.redis,
                 at + 1);
    else if (at)
        snprintf(shown, sizeof shown, "***@%s", at + 1);
    else
        snprintf(shown, sizeof shown, "%s", cfg.redis);
    server_log(SERVER_LOG_WARN,
               "msg=listening listen=%s port=%d redis=%s lock=%s strategy=%s lock_ttl_ms=%u "
               "acquire_timeout_ms=%u threads=%u",
               cfg.listen, server_port(s), shown, cfg.lock, cfg.strategy, cfg.lock_ttl_ms,
               cfg.acquire_timeout_ms, cfg.threads);
    int sig = 0;
    sigwait(&stop, &sig);
    server_log(SERVER_LOG_WARN, "msg=stopping signal=%d", sig);
    server_stop(s);
    server_log(SERVER_LOG_WARN, "msg=stopped");
    return 0;
}
