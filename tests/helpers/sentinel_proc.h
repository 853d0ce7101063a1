/* sentinel_proc.h - a throwaway Redis Sentinel topology for integration tests.
 *
 * th_topo_start() starts a master, one or two replicas of it and three
 * Sentinels that monitor it as "mymaster" (quorum 2), all th_redis processes
 * (tests/helpers/redis_proc.h): free loopback ports, mktemp -d folders, killed
 * with the test process and by th_topo_stop(). Data nodes keep an AOF
 * (--appendonly yes), so th_redis_restart() of a killed node brings it back with
 * its data, from its own command line: the original master comes back as a
 * master (no --replicaof) until the Sentinels turn it into a replica.
 *
 * The Sentinels are tuned for tests: down-after-milliseconds 2000,
 * failover-timeout 3000, and (SENTINEL DEBUG) INFO every second, PING and
 * hello messages every half second, so that a failover takes about 3.5 s and
 * a restarted old master is demoted a few seconds after it answers.
 */
#ifndef GM_TESTS_SENTINEL_PROC_H
#define GM_TESTS_SENTINEL_PROC_H

#include <stdio.h>

#include "tests/helpers/redis_proc.h"

struct redisContext;

typedef struct th_sentinel_topo {
    th_redis nodes[3];     /* nodes[0] starts as master, nodes[1..nreplicas] replicas of it */
    int nreplicas;         /* 1 or 2 */
    th_redis sentinels[3]; /* three Sentinels, each with its sentinel.conf in its folder */
    char master_name[32];  /* "mymaster" */
    char password[64];     /* "" or requirepass + masterauth of the data nodes, auth-pass of
                            * the Sentinels (the Sentinels themselves ask none) */
    char url[512];         /* redis-sentinel://[:password@]127.0.0.1:p1,127.0.0.1:p2,
                            * 127.0.0.1:p3/mymaster/0, the password percent-encoded */
} th_sentinel_topo;

/* Starts the topology into *t (overwritten): nreplicas 1 or 2, password NULL or "" for
 * none, else 1 to 63 printable ASCII characters but space, quotes and backslash (the
 * URL percent-encodes the rest as needed). Returns once every
 * Sentinel answers, sees the master and every replica up and knows the two other
 * Sentinels. Returns 0, or -1 with everything it started stopped again. */
int th_topo_start(th_sentinel_topo *t, int nreplicas, const char *password);

/* Kills every process of the topology (Sentinels first) and removes their folders.
 * Safe to call twice, and on a topology whose start failed. */
void th_topo_stop(th_sentinel_topo *t);

/* Returns the master port that a majority (2 of 3) of the Sentinels names now
 * (SENTINEL get-master-addr-by-name), or -1 when no majority names the same one. */
int th_topo_master_port(const th_sentinel_topo *t);

/* Waits until every Sentinel that answers (at least one) names the same master, with a
 * port other than not_port (-1: any), and that node's ROLE says master. Returns its
 * port, or -1 after timeout_ms. */
int th_topo_wait_master(th_sentinel_topo *t, int not_port, int timeout_ms);

/* Starts a planned failover: SENTINEL FAILOVER <master> to the Sentinels in turn until one
 * accepts it (+OK), asking again every 200 ms while they answer -INPROG (one is under way)
 * or -NOGOODSLAVE (the replicas are still syncing), then waits until every Sentinel names
 * a master other than the one named before and that node's ROLE says master; a failover
 * the Sentinels aborted (its promotion outlasted their failover-timeout on a busy machine)
 * is asked for again. Returns the new master's port, or -1 after timeout_ms (or when no
 * Sentinel names a master at the start). */
int th_topo_failover(th_sentinel_topo *t, int timeout_ms);

/* Waits until ROLE on 127.0.0.1:port (authenticated with password unless NULL or "")
 * names role ("master" or "slave"). Returns 0, or -1 after timeout_ms. */
int th_topo_wait_role(int port, const char *password, const char *role, int timeout_ms);

/* Sets every Sentinel's down-after-milliseconds for the master to ms (0: back to the
 * topology's own, 2000), e.g. to let a long write through on a busy machine without a
 * failover. Returns 0, or -1 when a Sentinel did not take it. */
int th_topo_set_down_after(th_sentinel_topo *t, int ms);

/* Returns the index in t->nodes of the data node on port, or -1. */
int th_topo_node_index(const th_sentinel_topo *t, int port);

/* Waits until at least nreplicas replicas of the master on master_port are online and
 * have acknowledged its replication offset as it was when the wait began, that is
 * every write the master had applied then (INFO replication). Returns 0, or -1 after
 * timeout_ms. */
int th_topo_wait_replicas_synced(th_sentinel_topo *t, int master_port, int nreplicas,
                                 int timeout_ms);

/* Prints to out the last lines (at most lines) of every process's log: a failed wait's
 * explanation. Returns nothing; a log that cannot be read is named and skipped. */
void th_topo_dump_logs(const th_sentinel_topo *t, int lines, FILE *out);

/* Returns a hiredis connection to 127.0.0.1:port, authenticated with password unless
 * NULL or "", whose connect and commands time out after timeout_ms; or NULL. The
 * caller frees it with redisFree(). */
struct redisContext *th_topo_connect(int port, const char *password, int timeout_ms);

#endif /* GM_TESTS_SENTINEL_PROC_H */
