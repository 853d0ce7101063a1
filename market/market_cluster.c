/* market_cluster.c - key slots, redirects and slot maps of Redis Cluster, for the
 * store layer's cluster mode (market_cluster.h). Pure: no Redis I/O, it only reads
 * replies handed to it.
 *
 * DESIGN
 * The slot map is rebuilt whole from CLUSTER SLOTS (or CLUSTER SHARDS) and patched
 * one slot at a time by MOVED (market__slotmap_set). Parsing builds into a scratch
 * map on the heap and copies it out only when the whole reply was valid, so a bad
 * reply never leaves a half-updated map behind.
 */
#include "market/market_cluster.h"

#include <stdlib.h>
#include <string.h>

/* ---- slots ---- */

uint16_t market__crc16(const char *buf, size_t len) {
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

uint16_t market__key_slot(const char *key, size_t len) {
    const char *open = len ? memchr(key, '{', len) : NULL;
    if (open) {
        size_t after = (size_t)(open - key) + 1; /* bytes up to and with the '{' */
        const char *close = memchr(open + 1, '}', len - after);
        if (close && close > open + 1)
            return market__crc16(open + 1, (size_t)(close - open - 1)) & (MARKET__SLOTS - 1);
    }
    return market__crc16(key, len) & (MARKET__SLOTS - 1);
}

/* ---- redirects ---- */

/* Whether the len bytes at s can be a host: shorter than MARKET__HOST_MAX, no space,
 * no control character (NUL included). */
static int host_ok(const char *s, size_t len) {
    if (len >= MARKET__HOST_MAX) return 0;
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

int market__redirect_parse(const char *err, size_t len, market__redirect *out) {
    market__redirect r = {0};
    size_t i;
    if (!err) return -1;
    if (len >= 6 && memcmp(err, "MOVED ", 6) == 0) {
        r.kind = MARKET__MOVED;
        i = 6;
    } else if (len >= 4 && memcmp(err, "ASK ", 4) == 0) {
        r.kind = MARKET__ASK;
        i = 4;
    } else {
        return -1;
    }
    long slot = read_number(err, len, &i, MARKET__SLOTS - 1);
    if (slot < 0 || i >= len || err[i] != ' ') return -1;
    r.slot = (uint16_t)slot;
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

void market__slotmap_clear(market__slotmap *m) {
    m->nnodes = 0;
    memset(m->nodes, 0, sizeof m->nodes);
    memset(m->slot_node, MARKET__SLOT_NONE, sizeof m->slot_node);
}

const market__cluster_node *market__slotmap_node(const market__slotmap *m, uint16_t slot) {
    if (slot >= MARKET__SLOTS || m->slot_node[slot] == MARKET__SLOT_NONE) return NULL;
    return &m->nodes[m->slot_node[slot]];
}

int market__slotmap_find(const market__slotmap *m, const char *host, int port) {
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0) return i;
    return -1;
}

/* Returns the index of the node host (hlen bytes) : port in m, adding it (with id, or
 * "" when id is NULL) when it is new. Returns -1 when the host or port is invalid or
 * the table is full. */
static int node_index(market__slotmap *m, const char *host, size_t hlen, int port, const char *id,
                      size_t idlen) {
    if (!host_ok(host, hlen) || port < 1 || port > 65535) return -1;
    if (id && (idlen > MARKET__NODE_ID_LEN || memchr(id, '\0', idlen))) return -1;
    for (int i = 0; i < m->nnodes; i++) {
        const market__cluster_node *n = &m->nodes[i];
        if (n->port == port && strlen(n->host) == hlen && memcmp(n->host, host, hlen) == 0)
            return i;
    }
    if (m->nnodes >= MARKET__CLUSTER_NODES_MAX) return -1;
    market__cluster_node *n = &m->nodes[m->nnodes];
    memset(n, 0, sizeof *n);
    memcpy(n->host, host, hlen);
    n->port = port;
    if (id) memcpy(n->id, id, idlen);
    return m->nnodes++;
}

int market__slotmap_set(market__slotmap *m, uint16_t slot, const char *host, int port) {
    if (slot >= MARKET__SLOTS || !host) return -1;
    int idx = node_index(m, host, strlen(host), port, NULL, 0);
    if (idx < 0) return -1;
    m->slot_node[slot] = (uint8_t)idx;
    return idx;
}

/* Gives slots start..end (integer replies) to node idx of m. Returns 0, or -1 when they
 * are not integers, not a range within 0..16383, or a slot of it is assigned already. */
static int assign(market__slotmap *m, const redisReply *start, const redisReply *end, int idx) {
    if (!start || !end || start->type != REDIS_REPLY_INTEGER || end->type != REDIS_REPLY_INTEGER)
        return -1;
    long long a = start->integer, b = end->integer;
    if (a < 0 || b < a || b >= MARKET__SLOTS) return -1;
    for (long long s = a; s <= b; s++) {
        if (m->slot_node[s] != MARKET__SLOT_NONE) return -1;
        m->slot_node[s] = (uint8_t)idx;
    }
    return 0;
}

/* Copies scratch (built by a parser, or NULL when it could not allocate it) into out
 * when rc is 0, and frees it. Returns rc, or -1 for a NULL scratch. */
static int finish(market__slotmap *scratch, int rc, market__slotmap *out) {
    if (!scratch) return -1;
    if (rc == 0) memcpy(out, scratch, sizeof *out);
    free(scratch);
    return rc;
}

/* CLUSTER SLOTS: one node [host or nil, port, id?, ...]. Returns its index in m (added
 * when new), -1 when malformed. keep 0 only checks it (a replica), returning 0. */
static int slots_node(market__slotmap *m, const redisReply *n, int keep) {
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
        if (!host_ok(h, hlen) || (id && id->len > MARKET__NODE_ID_LEN)) return -1;
        return 0;
    }
    return node_index(m, h, hlen, (int)port->integer, id ? id->str : NULL, id ? id->len : 0);
}

int market__slotmap_from_slots(const redisReply *r, market__slotmap *out) {
    if (!r || r->type != REDIS_REPLY_ARRAY) return -1;
    market__slotmap *m = malloc(sizeof *m);
    if (!m) return -1;
    market__slotmap_clear(m);
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
static int shard(market__slotmap *m, const redisReply *s) {
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
            (id && (id->type != REDIS_REPLY_STRING || id->len > MARKET__NODE_ID_LEN)))
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

int market__slotmap_from_shards(const redisReply *r, market__slotmap *out) {
    if (!r || r->type != REDIS_REPLY_ARRAY) return -1;
    market__slotmap *m = malloc(sizeof *m);
    if (!m) return -1;
    market__slotmap_clear(m);
    int rc = 0;
    for (size_t i = 0; i < r->elements && rc == 0; i++)
        rc = shard(m, r->element[i]);
    return finish(m, rc, out);
}
