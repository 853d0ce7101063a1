/* rconn_cluster.c - a Redis Cluster's slot map: key slots, redirects, and which master serves
 * each slot, fetched from the cluster and kept up to date.
 *
 * The public rconn_cluster_* API, rconn_key_slot() and rconn_key_tagged() (rconn.h): lock/'s
 * Redis backend (lock_node.c) routes each call of a cluster client with it, and the market's
 * store routes its commands with its own. The pure half (the CRC16 of a key's tag, reading
 * -MOVED and -ASK, building a slot map from a CLUSTER SLOTS or CLUSTER SHARDS reply) does no
 * I/O and is declared in rconn_impl.h for the unit tests; the other half speaks hiredis to
 * the cluster's nodes only to fetch the map.
 *
 * DESIGN
 * Building: a map is built whole from one reply into a scratch map on the heap and copied
 * out only when the whole reply was valid, so a bad reply never leaves a half-updated map
 * behind. A MOVED patches one slot (rconn__slotmap_set).
 *
 * Keeping: one mutex guards the map (uint8_t per slot, an index into at most
 * RCONN__CLUSTER_NODES_MAX masters; about 35 KiB on the heap). rconn_cluster_master() answers
 * from the map under the mutex, without I/O, while the map is fresh. It fetches first when
 * there is no map yet, or when the map is stale and the last fetch is at least
 * RCONN_CLUSTER_REFRESH_MS old: a MOVED (rconn_cluster_redirected: the slot is patched at once,
 * the rest of the map may be behind a reshard too), a failed connection or a -CLUSTERDOWN
 * (rconn_cluster_stale: perhaps a failover) make it stale, and a burst of them costs one
 * fetch. The fetch runs under the mutex, so the threads that need the map wait for it
 * instead of all asking at once; it asks the masters of the current map, then the seeds, one
 * after the other, each bounded by the timeout, until one answers CLUSTER SHARDS (Redis 7)
 * or, failing that, CLUSTER SLOTS (older servers) with a valid map. A fetch that fails
 * leaves the previous map in use (its slots may still be right; a wrong one answers MOVED).
 * A master listed with an empty endpoint is reached at the host the answer came from.
 */
#include "rconn/rconn.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "rconn/rconn_impl.h"

/* Returns 1 when key has a hash tag: a '{' followed later by a '}' with at least one byte
 * between them (the first '{' and the first '}' after it). This function can't fail. */
int rconn_key_tagged(const char *key) {
    const char *open = strchr(key, '{');
    const char *close = open != NULL ? strchr(open + 1, '}') : NULL;
    return close != NULL && close > open + 1;
}

/* ---- slots ---- */

/* Returns the CRC16 of buf[0..len) (XMODEM: polynomial 0x1021, initial value 0, no
 * reflection), the checksum Redis Cluster hashes keys with; "123456789" gives 0x31C3. This
 * function can't fail. */
uint16_t rconn__crc16(const char *buf, size_t len) {
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

/* Returns the hash slot (0..16383) of key[0..len): the CRC16 of its {tag} (the bytes between
 * its first '{' and the first '}' after it) when that is not empty, else of all of it. This
 * function can't fail. */
unsigned rconn_key_slot(const char *key, size_t len) {
    const char *open = len ? memchr(key, '{', len) : NULL;
    if (open) {
        size_t after = (size_t)(open - key) + 1; /* bytes up to and with the '{' */
        const char *close = memchr(open + 1, '}', len - after);
        if (close && close > open + 1)
            return rconn__crc16(open + 1, (size_t)(close - open - 1)) & (RCONN_CLUSTER_SLOTS - 1);
    }
    return rconn__crc16(key, len) & (RCONN_CLUSTER_SLOTS - 1);
}

/* ---- redirects ---- */

/* Whether the len bytes at s can be a host: shorter than (RCONN_HOST_MAX + 1), no space,
 * no control character (NUL included). */
static int host_ok(const char *s, size_t len) {
    if (len >= (RCONN_HOST_MAX + 1)) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] == 0x7f) return 0;
    return 1;
}

/* Reads the decimal number of 1 to 5 digits at s[*i..len) up to max; advances *i.
 * Returns it, or -1 when there are no digits, more than 5, or it exceeds max. */
static long read_number(const char *s, size_t len, size_t *i, long max) {
    long v = 0;
    size_t start = *i;
    while (*i < len && s[*i] >= '0' && s[*i] <= '9' && *i - start < 5)
        v = v * 10 + (s[(*i)++] - '0');
    if (*i == start || v > max || (*i < len && s[*i] >= '0' && s[*i] <= '9')) return -1;
    return v;
}

/* Reads an error reply's text (hiredis r->str/r->len: no leading '-') as MOVED/ASK
 * "<slot> <host>:<port>" (an IPv6 host unbracketed, or in brackets) into *out. Returns 0, or
 * -1 with *out untouched for anything else (TRYAGAIN, CLUSTERDOWN, other errors, a slot
 * beyond 16383, a port outside 1..65535, a host too long or with spaces or control
 * characters, trailing text). */
int rconn_cluster_redirect_parse(const char *err, size_t len, rconn_cluster_redirect *out) {
    rconn_cluster_redirect r;
    memset(&r, 0, sizeof r);
    size_t i;
    if (!err) return -1;
    if (len >= 6 && memcmp(err, "MOVED ", 6) == 0) {
        r.ask = 0;
        i = 6;
    } else if (len >= 4 && memcmp(err, "ASK ", 4) == 0) {
        r.ask = 1;
        i = 4;
    } else {
        return -1;
    }
    long slot = read_number(err, len, &i, RCONN_CLUSTER_SLOTS - 1);
    if (slot < 0 || i >= len || err[i] != ' ') return -1;
    r.slot = (unsigned)slot;
    const char *addr = err + i + 1;
    size_t alen = len - i - 1;
    const char *colon = NULL; /* the last ':' */
    for (size_t k = 0; k < alen; k++)
        if (addr[k] == ':') colon = addr + k;
    if (!colon) return -1;
    size_t p = (size_t)(colon - addr) + 1;
    long port = read_number(addr, alen, &p, 65535);
    if (port < 1 || p != alen) return -1;
    r.port = (int)port;
    const char *host = addr;
    size_t hlen = (size_t)(colon - addr);
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
        host++;
        hlen -= 2;
    }
    if (!host_ok(host, hlen) || memchr(host, '[', hlen) || memchr(host, ']', hlen)) return -1;
    memcpy(r.host, host, hlen);
    r.host[hlen] = '\0';
    *out = r;
    return 0;
}

/* ---- the slot map ---- */

/* Empties *m: no node, every slot unassigned. This function can't fail. */
void rconn__slotmap_clear(rconn__slotmap *m) {
    m->nnodes = 0;
    memset(m->nodes, 0, sizeof m->nodes);
    memset(m->slot_node, RCONN__SLOT_NONE, sizeof m->slot_node);
}

/* Returns the master serving slot (borrowed from m), or NULL when the slot is unassigned or
 * beyond 16383. This function can't fail. */
const rconn__cluster_node *rconn__slotmap_node(const rconn__slotmap *m, unsigned slot) {
    if (slot >= RCONN_CLUSTER_SLOTS || m->slot_node[slot] == RCONN__SLOT_NONE) return NULL;
    return &m->nodes[m->slot_node[slot]];
}

/* Returns the index in m->nodes of host:port (compared exactly), or -1. */
int rconn__slotmap_find(const rconn__slotmap *m, const char *host, int port) {
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0) return i;
    return -1;
}

/* Returns the index of the node host (hlen bytes) : port in m, adding it (with id, or
 * "" when id is NULL) when it is new. Returns -1 when the host or port is invalid or
 * the table is full. */
static int node_index(rconn__slotmap *m, const char *host, size_t hlen, int port, const char *id,
                      size_t idlen) {
    if (!host_ok(host, hlen) || port < 1 || port > 65535) return -1;
    if (id && (idlen > RCONN__NODE_ID_LEN || memchr(id, '\0', idlen))) return -1;
    for (int i = 0; i < m->nnodes; i++) {
        const rconn__cluster_node *n = &m->nodes[i];
        if (n->port == port && strlen(n->host) == hlen && memcmp(n->host, host, hlen) == 0)
            return i;
    }
    if (m->nnodes >= RCONN__CLUSTER_NODES_MAX) return -1;
    rconn__cluster_node *n = &m->nodes[m->nnodes];
    memset(n, 0, sizeof *n);
    memcpy(n->host, host, hlen);
    n->port = port;
    if (id) memcpy(n->id, id, idlen);
    return m->nnodes++;
}

/* Records that host:port serves slot now (a MOVED), adding the node when it is new; nodes
 * left without a slot stay. Returns the node's index, or -1 with *m untouched when slot is
 * beyond 16383, port outside 1..65535, host too long, or the table full. */
int rconn__slotmap_set(rconn__slotmap *m, unsigned slot, const char *host, int port) {
    if (slot >= RCONN_CLUSTER_SLOTS || !host) return -1;
    int idx = node_index(m, host, strlen(host), port, NULL, 0);
    if (idx < 0) return -1;
    m->slot_node[slot] = (uint8_t)idx;
    return idx;
}

/* Gives slots start..end (integer replies) to node idx of m. Returns 0, or -1 when they
 * are not integers, not a range within 0..16383, or a slot of it is assigned already. */
static int assign(rconn__slotmap *m, const redisReply *start, const redisReply *end, int idx) {
    if (!start || !end || start->type != REDIS_REPLY_INTEGER || end->type != REDIS_REPLY_INTEGER)
        return -1;
    long long a = start->integer, b = end->integer;
    if (a < 0 || b < a || b >= RCONN_CLUSTER_SLOTS) return -1;
    for (long long s = a; s <= b; s++) {
        if (m->slot_node[s] != RCONN__SLOT_NONE) return -1;
        m->slot_node[s] = (uint8_t)idx;
    }
    return 0;
}

/* Copies scratch (built by a parser, or NULL when it could not allocate it) into out
 * when rc is 0, and frees it. Returns rc, or -1 for a NULL scratch. */
static int finish(rconn__slotmap *scratch, int rc, rconn__slotmap *out) {
    if (!scratch) return -1;
    if (rc == 0) memcpy(out, scratch, sizeof *out);
    free(scratch);
    return rc;
}

/* CLUSTER SLOTS: one node [host or nil, port, id?, ...]. Returns its index in m (added
 * when new), -1 when malformed. keep 0 only checks it (a replica), returning 0. */
static int slots_node(rconn__slotmap *m, const redisReply *n, int keep) {
    if (!n || n->type != REDIS_REPLY_ARRAY || n->elements < 2) return -1;
    const redisReply *host = n->element[0], *port = n->element[1];
    const redisReply *id = n->elements > 2 ? n->element[2] : NULL;
    if (!host || !port || port->type != REDIS_REPLY_INTEGER) return -1;
    if (host->type != REDIS_REPLY_STRING && host->type != REDIS_REPLY_NIL) return -1;
    if (id && id->type != REDIS_REPLY_STRING) return -1;
    const char *h = host->type == REDIS_REPLY_STRING ? host->str : "";
    size_t hlen = host->type == REDIS_REPLY_STRING ? host->len : 0;
    if (port->integer < 1 || port->integer > 65535) return -1;
    if (!keep) {
        if (!host_ok(h, hlen) || (id && id->len > RCONN__NODE_ID_LEN)) return -1;
        return 0;
    }
    return node_index(m, h, hlen, (int)port->integer, id ? id->str : NULL, id ? id->len : 0);
}

/* Builds *out from a CLUSTER SLOTS reply: an array of [start, end, master, replicas...],
 * each node [host or nil, port, id?, metadata?...] (Redis 3 to 7); only masters are kept, a
 * master serving several ranges is one node. Returns 0, or -1 with *out untouched when r is
 * not such a reply (wrong types, start > end, a slot beyond 16383 or listed twice, a bad
 * port, host or id, more than RCONN__CLUSTER_NODES_MAX masters) or memory runs out. */
int rconn__slotmap_from_slots(const redisReply *r, rconn__slotmap *out) {
    if (!r || r->type != REDIS_REPLY_ARRAY) return -1;
    rconn__slotmap *m = malloc(sizeof *m);
    if (!m) return -1;
    rconn__slotmap_clear(m);
    int rc = 0;
    for (size_t i = 0; i < r->elements && rc == 0; i++) {
        const redisReply *e = r->element[i];
        if (!e || e->type != REDIS_REPLY_ARRAY || e->elements < 3) {
            rc = -1;
            break;
        }
        int idx = slots_node(m, e->element[2], 1);
        if (idx < 0 || assign(m, e->element[0], e->element[1], idx) != 0) rc = -1;
        for (size_t k = 3; k < e->elements && rc == 0; k++)
            if (slots_node(m, e->element[k], 0) != 0) rc = -1;
    }
    return finish(m, rc, out);
}

/* In a RESP2 flat field/value array, returns the value of field name; NULL when it is
 * absent. *bad is set when map is not an array of an even number of elements with
 * string fields. */
static const redisReply *field(const redisReply *map, const char *name, int *bad) {
    if (!map || map->type != REDIS_REPLY_ARRAY || map->elements % 2 != 0) {
        *bad = 1;
        return NULL;
    }
    const redisReply *found = NULL;
    for (size_t i = 0; i + 1 < map->elements; i += 2) {
        const redisReply *k = map->element[i], *v = map->element[i + 1];
        if (!k || !v || k->type != REDIS_REPLY_STRING) {
            *bad = 1;
            return NULL;
        }
        if (!found && k->len == strlen(name) && memcmp(k->str, name, k->len) == 0) found = v;
    }
    return found;
}

/* CLUSTER SHARDS: one shard. Adds its master to m and gives it the shard's slots.
 * Returns 0, or -1 when malformed. */
static int shard(rconn__slotmap *m, const redisReply *s) {
    int bad = 0;
    const redisReply *slots = field(s, "slots", &bad), *nodes = field(s, "nodes", &bad);
    if (bad || !slots || !nodes || slots->type != REDIS_REPLY_ARRAY ||
        nodes->type != REDIS_REPLY_ARRAY || slots->elements % 2 != 0)
        return -1;
    const redisReply *master = NULL;
    int masters = 0;
    for (size_t i = 0; i < nodes->elements; i++) {
        const redisReply *n = nodes->element[i];
        const redisReply *port = field(n, "port", &bad), *role = field(n, "role", &bad);
        const redisReply *id = field(n, "id", &bad);
        if (bad || !port || port->type != REDIS_REPLY_INTEGER || port->integer < 1 ||
            port->integer > 65535 || !role || role->type != REDIS_REPLY_STRING ||
            (id && (id->type != REDIS_REPLY_STRING || id->len > RCONN__NODE_ID_LEN)))
            return -1;
        if (strcmp(role->str, "master") == 0) {
            masters++;
            master = n;
        }
    }
    if (slots->elements == 0) return 0; /* a master without slots: nothing to route */
    if (masters != 1) return -1;
    const redisReply *endpoint = field(master, "endpoint", &bad);
    const redisReply *ip = field(master, "ip", &bad);
    const redisReply *port = field(master, "port", &bad), *id = field(master, "id", &bad);
    const char *h;
    size_t hlen;
    if (endpoint && endpoint->type == REDIS_REPLY_STRING) {
        h = endpoint->str;
        hlen = endpoint->len;
    } else if (endpoint && endpoint->type == REDIS_REPLY_NIL) {
        h = "";
        hlen = 0;
    } else if (!endpoint && ip && ip->type == REDIS_REPLY_STRING) {
        h = ip->str;
        hlen = ip->len;
    } else {
        return -1;
    }
    int idx = node_index(m, h, hlen, (int)port->integer, id ? id->str : NULL, id ? id->len : 0);
    if (idx < 0) return -1;
    for (size_t i = 0; i < slots->elements; i += 2)
        if (assign(m, slots->element[i], slots->element[i + 1], idx) != 0) return -1;
    return 0;
}

/* Builds *out from a RESP2 CLUSTER SHARDS reply (Redis 7): shards as flat field/value arrays
 * with "slots" (start, end pairs) and "nodes" ("port", "endpoint" or else "ip", "id",
 * "role"). A shard with slots needs exactly one master; one without is checked and skipped.
 * Returns 0, or -1 with *out untouched, as rconn__slotmap_from_slots(). */
int rconn__slotmap_from_shards(const redisReply *r, rconn__slotmap *out) {
    if (!r || r->type != REDIS_REPLY_ARRAY) return -1;
    rconn__slotmap *m = malloc(sizeof *m);
    if (!m) return -1;
    rconn__slotmap_clear(m);
    int rc = 0;
    for (size_t i = 0; i < r->elements && rc == 0; i++)
        rc = shard(m, r->element[i]);
    return finish(m, rc, out);
}

/* ---- the shared map ---- */

struct rconn_cluster {
    rconn_addr addr;     /* copy of the caller's */
    int timeout_ms;      /* connect and answer timeout of each node asked */
    pthread_mutex_t mu;  /* guards what follows; held during a fetch */
    rconn__slotmap *map; /* owned; NULL until a fetch succeeded */
    int stale;           /* something said the map may be behind */
    int64_t tried_ms;    /* when the last fetch was tried (rconn_now_ms); 0: never */
    rconn_cluster_stats stats;
};

/* Asks the node host:port for the slot map into *out (CLUSTER SHARDS, else CLUSTER SLOTS),
 * after AUTH with c's credentials. Returns 0, or -1 with a sentence in why. */
static int fetch_from(const rconn_cluster *c, const char *host, int port, rconn__slotmap *out,
                      char *why, size_t whylen) {
    redisContext *ctx = NULL;
    char cwhy[200]; /* the reason, truncated to fit the callers' */
    int rc = -1;
    redisReply *r = NULL;
    if (rconn_connect(host, port, c->timeout_ms, c->timeout_ms, &ctx, cwhy, sizeof cwhy) !=
        RCONN_OK) {
        snprintf(why, whylen, "cluster node %s", cwhy);
        return -1;
    }
    if (rconn_setup(ctx, &c->addr, RCONN_SETUP_AUTH, cwhy, sizeof cwhy) != RCONN_OK) {
        snprintf(why, whylen, "cluster node %s:%d: %s", host, port, cwhy);
        goto done;
    }
    static const struct {
        const char *sub; /* CLUSTER <sub>: SHARDS (Redis 7), else SLOTS */
        int (*parse)(const redisReply *r, rconn__slotmap *out);
    } ways[] = {{"SHARDS", rconn__slotmap_from_shards}, {"SLOTS", rconn__slotmap_from_slots}};
    for (size_t k = 0; k < sizeof ways / sizeof ways[0]; k++) {
        if (r != NULL) freeReplyObject(r);
        const char *argv[] = {"CLUSTER", ways[k].sub};
        r = redisCommandArgv(ctx, 2, argv, NULL);
        if (r == NULL) goto io;
        if (r->type == REDIS_REPLY_ARRAY && ways[k].parse(r, out) == 0) {
            rc = 0;
            goto done;
        }
    }
    snprintf(why, whylen, "cluster node %s:%d: no slot map in its answer%s%s", host, port,
             r->type == REDIS_REPLY_ERROR ? ": " : "", r->type == REDIS_REPLY_ERROR ? r->str : "");
    goto done;
io:
    snprintf(why, whylen, "cluster node %s:%d: %s", host, port, ctx->errstr);
done:
    if (r != NULL) freeReplyObject(r);
    redisFree(ctx);
    if (rc == 0)
        for (int i = 0; i < out->nnodes; i++)
            if (out->nodes[i].host[0] == '\0')
                snprintf(out->nodes[i].host, sizeof out->nodes[i].host, "%s", host);
    return rc;
}

/* Fetches a new map for c (c->mu held): the masters of the current map first, then the
 * seeds. Returns 0 (c->map replaced, fresh), or -1 with the last node's failure in why (the
 * old map kept). */
static int fetch(rconn_cluster *c, char *why, size_t whylen) {
    c->tried_ms = rconn_now_ms();
    rconn__slotmap *m = malloc(sizeof *m);
    if (m == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    snprintf(why, whylen, "no cluster node to ask");
    int known = c->map != NULL ? c->map->nnodes : 0;
    for (int i = 0; i < known + c->addr.nseeds; i++) {
        const char *host;
        int port;
        if (i < known) {
            host = c->map->nodes[i].host;
            port = c->map->nodes[i].port;
            if (strcmp(host, "?") == 0) continue;
        } else {
            host = c->addr.seeds[i - known].host;
            port = c->addr.seeds[i - known].port;
            if (c->map != NULL && rconn__slotmap_find(c->map, host, port) >= 0) continue;
        }
        if (fetch_from(c, host, port, m, why, whylen) == 0) {
            free(c->map);
            c->map = m;
            c->stale = 0;
            c->stats.refreshes++;
            return 0;
        }
    }
    free(m);
    return -1;
}

/* ---- API ---- */

/* Returns a new slot map of the cluster at *cluster (borrowed; copied), to be shared by every
 * thread of a program; contacts nothing yet. Caller frees with rconn_cluster_free(). Returns
 * NULL with *err (when err is non-NULL) RCONN_ERR_INVALID (addr not a cluster,
 * timeout_ms <= 0), RCONN_ERR_NOMEM or RCONN_ERR_UNAVAILABLE (no mutex). */
rconn_cluster *rconn_cluster_new(const rconn_addr *cluster, int timeout_ms, int *err) {
    int dummy;
    if (err == NULL) err = &dummy;
    if (!rconn_addr_valid(cluster) || !cluster->cluster || timeout_ms <= 0) {
        *err = RCONN_ERR_INVALID;
        return NULL;
    }
    rconn_cluster *c = calloc(1, sizeof *c);
    if (c == NULL) {
        *err = RCONN_ERR_NOMEM;
        return NULL;
    }
    c->addr = *cluster;
    c->timeout_ms = timeout_ms;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        *err = RCONN_ERR_UNAVAILABLE;
        return NULL;
    }
    *err = RCONN_OK;
    return c;
}

/* Fills *master with the address of the master serving slot now (host, port, plus the
 * cluster's user/pass, db 0, not a cluster). Fetches the map first when it has none or it is
 * stale (DESIGN), each node bounded by the timeout; a fetch that fails leaves the previous map
 * in use. Returns RCONN_OK, RCONN_ERR_UNAVAILABLE with a sentence in why (may be NULL) when no
 * node answers or the slot has no master, RCONN_ERR_INVALID for NULL arguments or a slot
 * beyond 16383. */
int rconn_cluster_master(rconn_cluster *c, unsigned slot, rconn_addr *master, char *why,
                         size_t whylen) {
    char reason[RCONN_HOST_MAX + 128] = "";
    if (why != NULL && whylen > 0) why[0] = '\0';
    if (c == NULL || master == NULL || slot >= RCONN_CLUSTER_SLOTS) return RCONN_ERR_INVALID;
    if (pthread_mutex_lock(&c->mu) != 0) {
        if (why != NULL) snprintf(why, whylen, "cannot lock the slot map");
        return RCONN_ERR_UNAVAILABLE;
    }
    int due = rconn_now_ms() - c->tried_ms >= RCONN_CLUSTER_REFRESH_MS;
    int fetched = 0;
    if (c->map == NULL || (c->stale && due)) {
        (void)fetch(c, reason, sizeof reason); /* a failure keeps the old map */
        fetched = 1;
    }
    const rconn__cluster_node *n = c->map != NULL ? rconn__slotmap_node(c->map, slot) : NULL;
    if (n == NULL && c->map != NULL && !fetched && due) { /* perhaps assigned since */
        if (fetch(c, reason, sizeof reason) == 0) n = rconn__slotmap_node(c->map, slot);
    }
    int rc = RCONN_ERR_UNAVAILABLE;
    if (n != NULL) {
        memset(master, 0, sizeof *master);
        snprintf(master->host, sizeof master->host, "%s", n->host);
        master->port = n->port;
        memcpy(master->user, c->addr.user, sizeof master->user);
        memcpy(master->pass, c->addr.pass, sizeof master->pass);
        rc = RCONN_OK;
    } else if (why != NULL) {
        if (c->map == NULL)
            snprintf(why, whylen, "no slot map: %s", reason);
        else
            snprintf(why, whylen, "slot %u has no master", slot);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Writes into slots[0..max) one slot of each master that serves any now (the lowest it
 * serves), fetching the map first as rconn_cluster_master() does, so that a caller can reach
 * every master (a health check) through rconn_cluster_master(). Returns how many (at most
 * max), or -1 with a sentence in why (may be NULL) when no map can be had or for NULL
 * arguments. */
int rconn_cluster_master_slots(rconn_cluster *c, unsigned *slots, size_t max, char *why,
                               size_t whylen) {
    char reason[RCONN_HOST_MAX + 128] = "no slot map";
    if (why != NULL && whylen > 0) why[0] = '\0';
    if (c == NULL || slots == NULL) return -1;
    if (pthread_mutex_lock(&c->mu) != 0) {
        if (why != NULL) snprintf(why, whylen, "cannot lock the slot map");
        return -1;
    }
    int due = rconn_now_ms() - c->tried_ms >= RCONN_CLUSTER_REFRESH_MS;
    if (c->map == NULL || (c->stale && due)) (void)fetch(c, reason, sizeof reason);
    int n = -1;
    if (c->map != NULL) {
        uint8_t seen[RCONN__CLUSTER_NODES_MAX] = {0};
        n = 0;
        for (unsigned s = 0; s < RCONN_CLUSTER_SLOTS && (size_t)n < max; s++) {
            uint8_t k = c->map->slot_node[s];
            if (k == RCONN__SLOT_NONE || seen[k]) continue;
            seen[k] = 1;
            slots[n++] = s;
        }
    } else if (why != NULL) {
        snprintf(why, whylen, "no slot map: %s", reason);
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* Reports that a reply was the redirect *r (its host already resolved by the caller when it
 * came ""): a MOVED updates slot's master at once and makes the map stale (fetched again by
 * a later rconn_cluster_master(), at most once per RCONN_CLUSTER_REFRESH_MS, so a burst of
 * redirects during a reshard costs one fetch); an ASK is only counted. This function can't
 * fail. */
void rconn_cluster_redirected(rconn_cluster *c, const rconn_cluster_redirect *r) {
    if (c == NULL || r == NULL || pthread_mutex_lock(&c->mu) != 0) return;
    if (r->ask) {
        c->stats.ask++;
    } else {
        c->stats.moved++;
        if (c->map != NULL) (void)rconn__slotmap_set(c->map, r->slot, r->host, r->port);
        c->stale = 1;
    }
    pthread_mutex_unlock(&c->mu);
}

/* Reports that a connection to a master failed, or a node answered -CLUSTERDOWN: the map may
 * be stale (a failover); it is fetched again on a later rconn_cluster_master(), rate-limited
 * as above. This function can't fail. */
void rconn_cluster_stale(rconn_cluster *c) {
    if (c == NULL || pthread_mutex_lock(&c->mu) != 0) return;
    c->stale = 1;
    pthread_mutex_unlock(&c->mu);
}

/* Copies c's counters into *out (zeroes for a NULL c). This function can't fail. */
void rconn_cluster_stats_get(rconn_cluster *c, rconn_cluster_stats *out) {
    if (out == NULL) return;
    memset(out, 0, sizeof *out);
    if (c == NULL || pthread_mutex_lock(&c->mu) != 0) return;
    *out = c->stats;
    pthread_mutex_unlock(&c->mu);
}

/* Frees c and its map. rconn_cluster_free(NULL) is a no-op. This function can't fail. */
void rconn_cluster_free(rconn_cluster *c) {
    if (c == NULL) return;
    pthread_mutex_destroy(&c->mu);
    free(c->map);
    free(c);
}
