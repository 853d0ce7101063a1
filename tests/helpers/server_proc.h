/* server_proc.h - a market-server process, for the tests that kill, pause or
 * run several servers: the binary ($MARKET_SERVER_BIN, else
 * bin/market-server) on a loopback port against a store, and the wait for
 * its /healthz (server_proc.c). */
#ifndef GM_TESTS_SERVER_PROC_H
#define GM_TESTS_SERVER_PROC_H

#include <sys/types.h>

pid_t th_server_spawn(int port, const char *redis_url, const char *const *extra);
int th_server_healthy(int port, int timeout_ms);

#endif /* GM_TESTS_SERVER_PROC_H */
