/* redis_proc.h - throwaway redis-server processes for integration tests.
 *
 * Each server runs on a free loopback port with its data in its own mktemp -d
 * folder, dies with the test process (PR_SET_PDEATHSIG), and is removed by
 * th_redis_stop(). The binary is $REDIS_SERVER, or redis-server on PATH.
 */
#ifndef GM_TESTS_REDIS_PROC_H
#define GM_TESTS_REDIS_PROC_H

#include <sys/types.h>

typedef struct th_redis {
    int port;
    pid_t pid;      /* 0 when not running */
    char dir[256];  /* its working folder */
    char url[64];   /* redis://127.0.0.1:<port>/0 */
    char extra[256]; /* extra arguments, space separated (e.g. "--appendonly yes") */
} th_redis;

int th_free_port(void);
int th_redis_start(th_redis *r);
int th_redis_restart(th_redis *r);
void th_redis_signal(th_redis *r, int sig);
void th_redis_stop(th_redis *r);
int th_redis_wait_ready(int port, int timeout_ms);

#endif /* GM_TESTS_REDIS_PROC_H */
