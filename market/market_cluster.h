/* market_cluster.h - the pure part of the market's Redis Cluster client
 * (market_cluster.c): the hash slot of a key (CRC16 with {hash tags}), the
 * MOVED/ASK redirects of error replies, and the slot map (which master serves
 * each of the 16384 slots) built from a CLUSTER SLOTS or CLUSTER SHARDS reply.
 * No I/O: it reads replies handed to it. market_store.c will use it to send
 * each command to the master serving its key's slot (one connection per master);
 * until then only its tests include it. <hiredis.h> is here for redisReply only. */
#ifndef GM_MARKET_MARKET_CLUSTER_H
#define GM_MARKET_MARKET_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#define MARKET__SLOTS 16384          /* hash slots of a Redis Cluster */
#define MARKET__CLUSTER_NODES_MAX 64 /* masters a slot map holds */
#define MARKET__SLOT_NONE 0xFF       /* market__slotmap.slot_node[] of an unassigned slot */
#define MARKET__HOST_MAX 256         /* a host: an IPv4/IPv6 address or a DNS name, + NUL */
#define MARKET__NODE_ID_LEN 40       /* a node id: 40 hex characters */

_Static_assert(MARKET__CLUSTER_NODES_MAX < MARKET__SLOT_NONE, "node indexes must fit uint8_t");

typedef enum market__redirect_kind {
    MARKET__MOVED = 1, /* the slot lives elsewhere now: update the map, resend there */
    MARKET__ASK = 2    /* the slot is migrating: send ASKING then the command there, once */
} market__redirect_kind;

/* A redirect error reply, "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>". */
typedef struct market__redirect {
    market__redirect_kind kind;
    uint16_t slot;
    char host[MARKET__HOST_MAX]; /* "" means the host the command was sent to */
    int port;                    /* 1..65535 */
} market__redirect;

/* A master of the slot map. */
typedef struct market__cluster_node {
    char host[MARKET__HOST_MAX];      /* its preferred endpoint as the reply gave it: an address or
                                       * a name; "" (a nil endpoint) means the host the reply came
                                       * from; "?" is Redis's "unknown", that cannot be reached */
    int port;                         /* 1..65535 */
    char id[MARKET__NODE_ID_LEN + 1]; /* its node id, "" when the reply had none */
} market__cluster_node;

/* Which master serves each slot. About 35 KiB: keep it on the heap or in an object. */
typedef struct market__slotmap {
    int nnodes;                                            /* 0..MARKET__CLUSTER_NODES_MAX */
    market__cluster_node nodes[MARKET__CLUSTER_NODES_MAX]; /* distinct host:port pairs */
    uint8_t slot_node[MARKET__SLOTS]; /* index into nodes, or MARKET__SLOT_NONE */
} market__slotmap;

/* Returns the CRC16 of buf (XMODEM: polynomial 0x1021, initial value 0, no reflection),
 * the checksum Redis Cluster hashes keys with; "123456789" gives 0x31C3. */
uint16_t market__crc16(const char *buf, size_t len);

/* Returns the hash slot (0..16383) of the key of len bytes: the CRC16 of the part
 * between its first '{' and the first '}' after it when that part is not empty,
 * else of the whole key; mod 16384. Keys sharing a {tag} share a slot. */
uint16_t market__key_slot(const char *key, size_t len);

/* Reads an error reply's text (hiredis's r->str, r->len: no leading '-') as a redirect
 * into *out. The host is what precedes the last ':' (an IPv6 address comes unbracketed
 * from Redis; "[...]" is accepted too and unbracketed), and may be empty. Returns 0, or
 * -1 with *out untouched for anything else: TRYAGAIN, CLUSTERDOWN, other errors, a
 * slot beyond 16383, a port outside 1..65535, a host too long or with spaces or
 * control characters, trailing text. */
int market__redirect_parse(const char *err, size_t len, market__redirect *out);

/* Empties *m: no node, every slot unassigned. */
void market__slotmap_clear(market__slotmap *m);

/* Builds *out from a CLUSTER SLOTS reply: an array of [start, end, master, replicas...],
 * each node [host or nil, port, id?, metadata?...] (Redis 3 to 7). Only masters are
 * kept; a master serving several ranges is one node. Returns 0, or -1 with *out
 * untouched when r is not such a reply (wrong types, start > end, a slot beyond 16383,
 * a slot listed twice, a port outside 1..65535, a host too long or with a space or a
 * control character, an id longer than 40, more than MARKET__CLUSTER_NODES_MAX
 * masters) or memory runs out. */
int market__slotmap_from_slots(const redisReply *r, market__slotmap *out);

/* Builds *out from a RESP2 CLUSTER SHARDS reply (Redis 7): an array of shards, each a
 * flat field/value array with "slots" (start, end pairs) and "nodes" (flat field/value
 * arrays with "port", "endpoint" or else "ip", "id", "role"). A shard with slots needs
 * exactly one node whose role is "master"; a shard without slots is checked and
 * skipped. Returns 0, or -1 with *out untouched, as market__slotmap_from_slots(). */
int market__slotmap_from_shards(const redisReply *r, market__slotmap *out);

/* Returns the master serving slot, or NULL when the slot is unassigned or beyond 16383. */
const market__cluster_node *market__slotmap_node(const market__slotmap *m, uint16_t slot);

/* Returns the index in m->nodes of host:port (compared exactly), or -1. */
int market__slotmap_find(const market__slotmap *m, const char *host, int port);

/* Records that host:port serves slot now (a MOVED): adds the node when it is new.
 * Nodes left with no slot stay in the table. Returns the node's index, or -1 with *m
 * untouched when slot is beyond 16383, port is outside 1..65535, host is too long, or
 * the table is full. */
int market__slotmap_set(market__slotmap *m, uint16_t slot, const char *host, int port);

#endif /* GM_MARKET_MARKET_CLUSTER_H */
