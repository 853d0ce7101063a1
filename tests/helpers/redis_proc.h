/* redis_proc.h - throwaway redis-server processes for integration tests.
 *
 * Each server runs on a free loopback port with its data in its own mktemp -d
 * folder, dies with the test process (PR_SET_PDEATHSIG), and is removed by
 * th_redis_stop(). The binary is $REDIS_SERVER, or redis-server on PATH.
 *
 * A th_redis with .sentinel set runs Redis Sentinel on <dir>/sentinel.conf,
 * which the caller writes between th_redis_prepare() and the first
 * th_redis_restart(). The binary is $REDIS_SENTINEL, or redis-sentinel on
 * PATH, or else the redis-server one; it always gets --sentinel.
 */
#ifndef GM_TESTS_REDIS_PROC_H
#define GM_TESTS_REDIS_PROC_H

#include <stdio.h>
#include <sys/types.h>

typedef struct th_redis {
    int port;
    pid_t pid;      /* 0 when not running */
    char dir[256];  /* its working folder */
    char url[64];   /* redis://127.0.0.1:<port>/0 */
    char extra[256]; /* extra arguments, space separated (e.g. "--appendonly yes") */
    int sentinel;   /* 1: a Sentinel running <dir>/sentinel.conf (see above); 0: a data node */
} th_redis;

int th_free_port(void);
int th_redis_start(th_redis *r);
int th_redis_prepare(th_redis *r);
int th_redis_restart(th_redis *r);
void th_redis_signal(th_redis *r, int sig);
void th_redis_stop(th_redis *r);
int th_redis_wait_ready(int port, int timeout_ms);

/* The calls of Redis command cmd (as INFO commandstats names it: "evalsha",
 * "script|exists") that the server behind c has counted, 0 when none; -1 when its
 * INFO cannot be read. th_calls_in() reads them from the text of an INFO
 * commandstats already read (0 when absent). */
struct redisContext;
long long th_redis_calls(struct redisContext *c, const char *cmd);
long long th_calls_in(const char *info, const char *cmd);

/* Prints to out, under a heading naming what, r's folder and port, the last lines (at
 * most lines, within the last 64 KiB) of r's redis.log: a failed wait's explanation.
 * Returns nothing; prints "(cannot read it)" for a log it cannot read, nothing for a
 * server without a folder. */
void th_redis_dump_log(const th_redis *r, const char *what, int lines, FILE *out);

#endif /* GM_TESTS_REDIS_PROC_H */
