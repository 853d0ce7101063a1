/* rconn_impl.h - private to rconn/ and its tests: the pure halves of the Sentinel and
 * Cluster code (replies into values, no I/O), for the unit tests.
 *
 *   rconn__why_start (rconn_conn.c)                    a why argument made writable;
 *   rconn__slotmap_*, rconn__crc16 (rconn_cluster.c)   a Redis Cluster's slot map;
 *   rconn__sentinel_* (rconn_sentinel.c)               a Sentinel group's answers and view.
 */
#ifndef GM_RCONN_RCONN_IMPL_H
#define GM_RCONN_RCONN_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "rconn/rconn.h"

struct redisReply;

/* ---- why buffers (rconn_conn.c) ---- */

char *rconn__why_start(char *why, size_t *whylen);

/* ---- a Redis Cluster's slot map: pure, no I/O (rconn_cluster.c) ---- */

#define RCONN__CLUSTER_NODES_MAX 64 /* masters a slot map holds */
#define RCONN__SLOT_NONE 0xFF       /* rconn__slotmap.slot_node[] of an unassigned slot */
#define RCONN__NODE_ID_LEN 40       /* a node id: 40 hex characters */

/* A master of the slot map. */
typedef struct rconn__cluster_node {
    char host[RCONN_HOST_MAX + 1];   /* its preferred endpoint as the reply gave it: an address
                                      * or a name; "" (a nil endpoint) means the host the reply
                                      * came from; "?" is Redis's "unknown" */
    int port;                        /* 1..65535 */
    char id[RCONN__NODE_ID_LEN + 1]; /* its node id, "" when the reply had none */
} rconn__cluster_node;

/* Which master serves each slot. About 35 KiB: keep it on the heap. */
typedef struct rconn__slotmap {
    int nnodes;                                          /* 0..RCONN__CLUSTER_NODES_MAX */
    rconn__cluster_node nodes[RCONN__CLUSTER_NODES_MAX]; /* distinct host:port pairs */
    uint8_t slot_node[RCONN_CLUSTER_SLOTS];              /* index into nodes, or RCONN__SLOT_NONE */
} rconn__slotmap;

uint16_t rconn__crc16(const char *buf, size_t len);
void rconn__slotmap_clear(rconn__slotmap *m);
int rconn__slotmap_from_slots(const struct redisReply *r, rconn__slotmap *out);
int rconn__slotmap_from_shards(const struct redisReply *r, rconn__slotmap *out);
const rconn__cluster_node *rconn__slotmap_node(const rconn__slotmap *m, unsigned slot);
int rconn__slotmap_find(const rconn__slotmap *m, const char *host, int port);
int rconn__slotmap_set(rconn__slotmap *m, unsigned slot, const char *host, int port);

/* ---- a Sentinel group's view: pure, no I/O (rconn_sentinel.c) ---- */

#define RCONN__REPLICAS_MAX 16 /* replicas of one master a Sentinel's answer keeps */
/* A replica the Sentinels have not heard from for longer than this cannot be promoted
 * (Sentinel's own rule: five ping periods of 1 s). */
#define RCONN__SENTINEL_PING_STALE_MS 5000

/* One replica as one Sentinel lists it (SENTINEL REPLICAS). */
struct rconn__sentinel_replica {
    char host[RCONN_HOST_MAX + 1];
    int port;
    int promotable;  /* this Sentinel could promote it now (rconn__sentinel_parse_replicas) */
    int role_master; /* it reports itself a master ("role-reported") */
};

/* What one Sentinel says of the group's master (SENTINEL MASTER, SENTINEL REPLICAS). */
struct rconn__sentinel_answer {
    char host[RCONN_HOST_MAX + 1];
    int port;
    uint64_t epoch;        /* config-epoch */
    int down;              /* flagged o_down: a quorum cannot reach it */
    int failover;          /* flagged failover_in_progress */
    int64_t down_after_ms; /* down-after-milliseconds */
    int have_replicas;     /* the replicas below were read */
    size_t nreplicas;      /* listed (at most RCONN__REPLICAS_MAX kept; more: have_replicas 0) */
    struct rconn__sentinel_replica replicas[RCONN__REPLICAS_MAX];
};

/* An address this process named master before the Sentinels switched away from it. */
struct rconn__sentinel_addr {
    char host[RCONN_HOST_MAX + 1];
    int port;
};

int rconn__sentinel_parse_master(const struct redisReply *r, struct rconn__sentinel_answer *a);
int rconn__sentinel_parse_replicas(const struct redisReply *r, struct rconn__sentinel_answer *a);
int rconn__sentinel_promotable(const struct rconn__sentinel_answer *answers, size_t n, size_t best,
                               const struct rconn__sentinel_addr *demoted, size_t ndemoted,
                               unsigned *count);
int rconn__sentinel_event(const char *master_name, const char *channel, const char *msg,
                          size_t msglen);

#endif /* GM_RCONN_RCONN_IMPL_H */
