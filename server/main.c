/* main.c - market-server: parse the configuration, serve, stop on SIGINT/SIGTERM,
 * reopen the --log-file on SIGHUP. */
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

    /* Block the stop signals and SIGHUP in every thread; main waits for them below. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (cfg.log_file[0] && server_log_reopen(cfg.log_file, why, sizeof why) < 0) {
        fprintf(stderr, "market-server: %s\n", why);
        return 1;
    }

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
    server_log(SERVER_LOG_INFO,
               "msg=listening listen=%s port=%d redis=%s lock=%s strategy=%s lock_ttl_ms=%u "
               "acquire_timeout_ms=%u threads=%u",
               cfg.listen, server_port(s), shown, cfg.lock, cfg.strategy, cfg.lock_ttl_ms,
               cfg.acquire_timeout_ms, cfg.threads);
    int sig = 0;
    while (sigwait(&stop, &sig) == 0 && sig == SIGHUP) { /* logrotate moved the file */
        if (!cfg.log_file[0])
            server_log(SERVER_LOG_INFO, "msg=\"SIGHUP ignored: no --log-file to reopen\"");
        else if (server_log_reopen(cfg.log_file, why, sizeof why) < 0)
            server_log(SERVER_LOG_ERROR, "msg=\"log file not reopened\" reason=\"%s\"", why);
        else
            server_log(SERVER_LOG_INFO, "msg=\"log file reopened\" signal=%d", sig);
    }
    server_log(SERVER_LOG_INFO, "msg=stopping signal=%d", sig);
    server_stop(s);
    server_log(SERVER_LOG_INFO, "msg=stopped");
    return 0;
}
