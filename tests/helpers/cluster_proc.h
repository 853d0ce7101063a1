/* cluster_proc.h - a throwaway Redis Cluster for integration tests.
 *
 * th_cluster_start() starts six cluster-enabled th_redis processes
 * (tests/helpers/redis_proc.h: free loopback ports, mktemp -d folders, killed with
 * the test process) with their nodes.conf and AOF in their folders, and a cluster
 * bus port of their own (--cluster-port, also a free port: port + 10000 may not
 * exist), then joins them with `redis-cli --cluster create --cluster-replicas 1`
 * ($REDIS_CLI, or redis-cli on PATH): nodes[0..2] serve 0-5460, 5461-10922 and
 * 10923-16383, each of nodes[3..5] replicates one of them (redis-cli picks which).
 * A killed node restarted with th_redis_restart() rejoins from its nodes.conf.
 *
 * The harness reads the cluster from CLUSTER SLOTS and CLUSTER INFO with its own
 * few lines, not with lock/rconn_cluster.c, so that tests can check one against
 * the other. It remembers the last slot map every live node agreed on, so that
 * th_cluster_wait_failover() knows what a killed master served.
 */
#ifndef GM_TESTS_CLUSTER_PROC_H
#define GM_TESTS_CLUSTER_PROC_H

#include <stdint.h>
#include <stdio.h>

#include "tests/helpers/redis_proc.h"

struct redisContext;

#define TH_CLUSTER_NODES 6     /* 3 masters + 3 replicas at start */
#define TH_CLUSTER_SLOTS 16384 /* hash slots */

typedef struct th_cluster {
    th_redis nodes[TH_CLUSTER_NODES]; /* nodes[0..2] masters at start, nodes[3..5] replicas */
    int n;                            /* TH_CLUSTER_NODES */
    int bus_port[TH_CLUSTER_NODES];   /* each node's --cluster-port */
    char id[TH_CLUSTER_NODES][41];    /* each node's CLUSTER MYID */
    char url[512]; /* redis-cluster://127.0.0.1:p0,127.0.0.1:p1,127.0.0.1:p2 (the masters) */
    /* the harness's own state */
    uint16_t agreed[TH_CLUSTER_SLOTS]; /* port serving each slot when all last agreed */
    struct {
        int slot, from, to; /* a migration begun by th_cluster_move_slot_begin; slot -1: none */
    } moving;
} th_cluster;

/* Starts the cluster into *c (overwritten), nodes with --cluster-node-timeout
 * node_timeout_ms (100 to 60000). Returns once every node says cluster_state:ok, knows
 * the six, and agrees with the others on which master serves each of the 16384 slots,
 * and every replica's link to its master is up: 0, or -1 with everything it started
 * stopped again (and the logs on stderr). */
int th_cluster_start(th_cluster *c, int node_timeout_ms);

/* Kills every node and removes their folders. Safe to call twice, and on a cluster
 * whose start failed. */
void th_cluster_stop(th_cluster *c);

/* Returns the port of the master that serves slot now, according to CLUSTER SLOTS of the
 * first node in c->nodes that is running and answers; -1 when none answers, or that
 * node has the slot unassigned, or slot is outside 0..16383. */
int th_cluster_slot_owner(const th_cluster *c, int slot);

/* Returns the index in c->nodes of the node on port, or -1. */
int th_cluster_node_index(const th_cluster *c, int port);

/* Returns 1 when the node on port answers ROLE with "master", else 0 (a replica, a node
 * that does not answer). */
int th_cluster_is_master(int port);

/* Returns the port of a running master of c other than port (the first in c->nodes), or
 * -1. */
int th_cluster_other_master(const th_cluster *c, int port);

/* Moves slot, with its keys, to the master on to_port, as an operator would:
 * th_cluster_move_slot_begin(), th_cluster_move_slot_keys() of every key, then
 * th_cluster_move_slot_end(). Returns 0, or -1 (the slot may be left migrating). */
int th_cluster_move_slot(th_cluster *c, int slot, int to_port);

/* The migration's first step: CLUSTER SETSLOT slot IMPORTING <owner id> on to_port, then
 * SETSLOT slot MIGRATING <to_port's id> on the owner. From then on the owner answers
 * -ASK for the slot's keys it no longer has, and to_port answers them after ASKING.
 * Returns 0, or -1 when another migration is under way, slot is outside 0..16383,
 * to_port is not another master, or a node refuses (then nothing is left begun). */
int th_cluster_move_slot_begin(th_cluster *c, int slot, int to_port);

/* Migrates at most max_keys (-1: all) of the slot's keys from its owner to to_port, in
 * batches of CLUSTER GETKEYSINSLOT and MIGRATE ... KEYS; slot and to_port are those of
 * th_cluster_move_slot_begin(). Returns the number of keys it moved, or -1. */
int th_cluster_move_slot_keys(th_cluster *c, int slot, int to_port, int max_keys);

/* The migration's last step: checks that the old owner holds no key of the slot, then
 * CLUSTER SETSLOT slot NODE <to_port's id> on to_port, the old owner, then the other
 * masters, and waits (up to 10 s) until every running node agrees that to_port serves
 * the slot. Returns 0, or -1 (keys are left: nothing changed; a node refused, or no
 * agreement: the migration may be half-done). */
int th_cluster_move_slot_end(th_cluster *c, int slot, int to_port);

/* After the master on dead_port was killed: waits until the slots it served (the last
 * agreed map's, or what the running nodes still give it) are served by one other master,
 * and th_cluster_wait_ok()'s conditions hold. Returns the new master's port, or -1
 * after timeout_ms (or at once when dead_port served nothing). */
int th_cluster_wait_failover(th_cluster *c, int dead_port, int timeout_ms);

/* Waits until every running node answers cluster_state:ok and the same CLUSTER SLOTS
 * view, with all 16384 slots served by running nodes. Returns 0, or -1 after
 * timeout_ms. */
int th_cluster_wait_ok(th_cluster *c, int timeout_ms);

/* Prints to out the last lines (at most lines) of every node's log. Returns nothing. */
void th_cluster_dump_logs(const th_cluster *c, int lines, FILE *out);

/* Returns a hiredis connection to 127.0.0.1:port whose connect and commands time out
 * after timeout_ms; or NULL. The caller frees it with redisFree(). */
struct redisContext *th_cluster_connect(int port, int timeout_ms);

#endif /* GM_TESTS_CLUSTER_PROC_H */
