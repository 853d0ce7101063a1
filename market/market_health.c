/* market_health.c - whether the store can serve purchases: it answers, is a master, takes writes.
 *
 * DESIGN
 * PING only proves that Redis answers. A purchase also needs a master that
 * accepts writes, so market_health() sends one pipeline of three commands:
 *
 *   ROLE                               must say "master". A replica ("slave")
 *                                      cannot take the purchase, and one made
 *                                      writable (replica-read-only no) would
 *                                      lose it at its next sync.
 *   INFO replication                   with --min-replicas-ack: the replicas,
 *                                      and whether each is in sync (below).
 *   ZADD market:{main} XX 0 healthz:probe
 *                                      a write that writes nothing (below), on
 *                                      the default realm's market.
 *
 * (so: a pipeline of two commands without --min-replicas-ack, of three with it).
 * With --min-replicas-ack N, the master must also have at least as many
 * replicas in sync as a commit's WAIT asks for: N, or on a Sentinel group
 * every replica the Sentinels could promote if there are more
 * (market__ack_plan); a master without them answers every purchase
 * not_replicated. Connected is not enough: a replica still loading the copy
 * it was sent, or stopped, stays connected but acknowledges nothing, so it
 * counts only when online and acknowledged within HEALTH_LAG_MAX_S
 * (a replica acknowledges every second). On a
 * Sentinel group the check also fails while a failover is under way.
 *
 * On a Redis Cluster every master that serves slots is probed the same way,
 * on the market of a realm whose slot it serves ("hz<n>", found by
 * market__slot_tag), so that a purchase of any realm would be served.
 *
 * Redis judges a write command before it runs it: a read-only replica
 * answers -READONLY, min-replicas-to-write not met -NOREPLICAS, a failing
 * RDB save or AOF write -MISCONF, maxmemory reached under noeviction -OOM,
 * a user without write access -NOPERM. ZADD is a write that may use memory,
 * so every one of these checks applies to it, as it does to a purchase's
 * commands. With XX, ZADD only updates members that already exist, and
 * "healthz:probe" is never a member of a market (members are
 * "<item>.<seller>", and ids have neither ':' nor '.'), so the probe changes
 * nothing: it creates no key, is not propagated to replicas or the AOF, and
 * does not disturb a WATCH on the market.
 */
#include <stdio.h>
#include <string.h>

#include <hiredis.h>

#include "market/market.h"
#include "market/market_store.h"

#define PROBE_MEMBER "healthz:probe" /* never "<item>.<seller>": see DESIGN */
#define HEALTH_LAG_MAX_S 2            /* a replica in sync acknowledged this recently */

/* What a refusal's error code (the first word of an error reply) means for purchases. */
static const struct {
    const char *code;
    const char *why;
} refusals[] = {
    {"READONLY", "redis is a read-only replica"},
    {"NOREPLICAS", "redis refuses writes: fewer good replicas than min-replicas-to-write"},
    {"MISCONF", "redis refuses writes: it cannot persist (MISCONF)"},
    {"OOM", "redis refuses writes: maxmemory reached (OOM)"},
    {"NOPERM", "redis refuses writes: the service's user lacks permission (NOPERM)"},
    {"LOADING", "redis is loading its data"},
    {"MASTERDOWN", "redis is a replica whose master link is down"},
    {"WRONGTYPE", "the default realm's market key is not a sorted set"},
};

/* Writes "<what> (<code>)" into why, code being the first word of error
 * reply r cut to 31 bytes of [A-Z]; or, when known is set and the code is
 * in refusals[], that sentence. */
static void explain_error(const redisReply *r, int known, const char *what, char *why,
                          size_t whylen) {
    char code[32];
    size_t n = 0, len = 0;
    const char *s = market__reply_why(r, &len);
    while (s && n < len && n + 1 < sizeof code && s[n] >= 'A' && s[n] <= 'Z') {
        code[n] = s[n];
        n++;
    }
    code[n] = '\0';
    for (size_t i = 0; known && i < sizeof refusals / sizeof refusals[0]; i++)
        if (strcmp(code, refusals[i].code) == 0) {
            snprintf(why, whylen, "%s", refusals[i].why);
            return;
        }
    snprintf(why, whylen, "%s (%s)", what, n ? code : "an error");
}

/* Judges ROLE's reply and INFO replication's (info): 0 for a master with
 * at least want replicas in sync, else -1 with a sentence in why. */
static int judge_role(const redisReply *r, const redisReply *info, unsigned want, char *why,
                      size_t whylen) {
    size_t len = 0;
    const char *text = market__reply_why(r, &len);
    if (text) {
        /* LOADING is the one refusal of ROLE that is not about ROLE itself */
        explain_error(r, len >= 7 && strncmp(text, "LOADING", 7) == 0,
                      "redis refuses ROLE, which the health check needs", why, whylen);
        return -1;
    }
    if (rconn_role_master(r, why, whylen) < 0) return -1;
    if (want == 0) return 0;
    const char *text_info = market__reply_str(info, &len);
    if (!text_info) {
        explain_error(info, 0, "redis refuses INFO replication, which the health check needs",
                      why, whylen);
        return -1;
    }
    size_t connected, have = rconn_replicas_in_sync(text_info, HEALTH_LAG_MAX_S, &connected);
    if (have < want) {
        snprintf(why, whylen,
                 "redis master has %zu replicas in sync (%zu connected); a purchase's "
                 "acknowledgement needs %u",
                 have, connected, want);
        return -1;
    }
    return 0;
}

/* Probes the server c's next pipeline goes to (see DESIGN), writing into the
 * market of realm. Returns MARKET_OK, MARKET_ERR_STORE with a sentence in
 * why, or MARKET_ERR_NOMEM. */
static int probe(market_conn *c, const char *realm, char *why, size_t whylen) {
    int acks = c->m->cfg.min_replicas_ack != 0; /* then which replicas are in sync, too */
    market__buf b = {0};
    market__rd_role(&b);
    if (acks) market__rd_info(&b, "replication");
    market__realm rl;
    market__realm_init(&rl, realm);
    market__fx_probe(&b, &rl, PROBE_MEMBER);
    int rc = market__pipeline_buf(c, &b);
    redisReply **rep = b.rep;
    if (rc < 0) market__buf_free(&b);
    if (rc == MARKET_ERR_NOMEM) {
        snprintf(why, whylen, "out of memory");
        return rc;
    }
    if (rc < 0) {
        snprintf(why, whylen, "redis does not answer: %s", c->errstr);
        return MARKET_ERR_STORE;
    }
    rc = MARKET_ERR_STORE;
    unsigned want = 0;
    rconn_sentinel_view v;
    if (acks && market__ack_plan(c, &want, &v) < 0) {
        snprintf(why, whylen, "purchases are not acknowledged now: %s", c->errstr);
        goto done;
    }
    const redisReply *probed = rep[b.n - 1];
    if (judge_role(rep[0], acks ? rep[1] : NULL, want, why, whylen) < 0) goto done;
    if (market__reply_err(probed)) {
        explain_error(probed, 1, "redis refuses writes", why, whylen);
        goto done;
    }
    if (market__reply_count(probed) < 0) {
        snprintf(why, whylen, "redis answered the write probe with something unexpected");
        goto done;
    }
    rc = MARKET_OK;
done:
    market__replies_free(rep, b.n);
    market__buf_free(&b);
    return rc;
}

/* Probes every master of a cluster, each on a market of a realm in a
 * slot it serves (market__slot_tag); see market_health(). */
static int probe_cluster(market_conn *c, char *why, size_t whylen) {
    unsigned slots[MARKET__MASTERS_MAX];
    char reason[160];
    int n = rconn_cluster_master_slots(c->m->cluster, slots, MARKET__MASTERS_MAX, reason,
                                      sizeof reason);
    if (n <= 0) {
        snprintf(why, whylen, "redis cluster: %s", n < 0 ? reason : "no master serves a slot");
        return MARKET_ERR_STORE;
    }
    for (int i = 0; i < n; i++) {
        char tag[16];
        int rc = market__slot_tag(slots[i], tag, sizeof tag);
        if (rc == 0) rc = market__route_slot(c, slots[i]);
        if (rc == 0) rc = probe(c, tag, reason, sizeof reason);
        else snprintf(reason, sizeof reason, "%s", c->errstr);
        if (rc < 0) {
            snprintf(why, whylen, "redis cluster master %s:%d (slot %u): %s", c->at_host,
                     c->at_port, slots[i], reason);
            return rc == MARKET_ERR_NOMEM ? rc : MARKET_ERR_STORE;
        }
    }
    return MARKET_OK;
}

/* Says whether c's store can serve purchases now: Redis answers, is a
 * master (ROLE) and accepts a write (see DESIGN; the probe changes
 * nothing); on a Redis Cluster, every master that serves slots does.
 * Returns MARKET_OK, or MARKET_ERR_STORE with a sentence in why (which may
 * be NULL or zero-sized) naming the first problem found, MARKET_ERR_NOMEM
 * on out-of-memory, MARKET_ERR_INVALID for a NULL c. On MARKET_OK why
 * holds "". Like every call on c, from one thread at a time. */
int market_health(market_conn *c, char *why, size_t whylen) {
    char dummy[1];
    if (!why || whylen == 0) {
        why = dummy;
        whylen = sizeof dummy;
    }
    why[0] = '\0';
    if (!c) {
        snprintf(why, whylen, "no store connection");
        return MARKET_ERR_INVALID;
    }
    int rc = c->m->cluster ? probe_cluster(c, why, whylen)
                           : probe(c, MARKET_REALM_DEFAULT, why, whylen);
    if (rc == MARKET_OK) why[0] = '\0';
    return rc;
}

/* Writes what a Redis crash can take back from c's store into fsync
 * (MARKET_FSYNC_MAX + 1 bytes): its master's appendfsync ("always",
 * "everysec", "no"), or "off" when it keeps no append-only file; on a Redis
 * Cluster, the master of the default realm's. Returns MARKET_OK, or
 * MARKET_ERR_STORE with a sentence in why (Redis down, CONFIG refused by a
 * managed Redis, or not asked: a named ACL user, such as the service's own
 * of deploy/redis/market.acl, is not given CONFIG, whose GET shows
 * passwords, and a refusal would fill ACL LOG), MARKET_ERR_NOMEM,
 * MARKET_ERR_INVALID for NULL arguments. */
int market_durability(market_conn *c, char *fsync, size_t fsynclen, char *why, size_t whylen) {
    if (!c || !fsync || fsynclen == 0 || !why || whylen == 0) return MARKET_ERR_INVALID;
    fsync[0] = why[0] = '\0';
    if (c->m->cfg.redis.user[0]) {
        snprintf(why, whylen, "not asked: Redis user %s is not meant to run CONFIG",
                 c->m->cfg.redis.user);
        return MARKET_ERR_STORE;
    }
    market__buf b = {0};
    market__rd_config(&b, "appendonly");
    market__rd_config(&b, "appendfsync");
    int rc = c->m->cluster ? market__route_slot(c, market__realm_slot(MARKET_REALM_DEFAULT)) : 0;
    if (rc == 0) rc = market__pipeline_buf(c, &b);
    if (rc < 0) {
        snprintf(why, whylen, "%s", rc == MARKET_ERR_NOMEM ? "out of memory" : c->errstr);
        market__buf_free(&b);
        return rc == MARKET_ERR_NOMEM ? rc : MARKET_ERR_STORE;
    }
    char aof[8];
    const redisReply *err = market__reply_error(b.rep, b.n);
    size_t len = 0;
    const char *text = err ? market__reply_why(err, &len) : NULL;
    if (text)
        snprintf(why, whylen, "CONFIG GET refused: %.*s", (int)len, text);
    else if (market__reply_config(b.rep[0], aof, sizeof aof) < 0 ||
             market__reply_config(b.rep[1], fsync, fsynclen) < 0)
        snprintf(why, whylen, "CONFIG GET answered something unexpected");
    else if (strcmp(aof, "no") == 0)
        snprintf(fsync, fsynclen, "off");
    rc = why[0] ? MARKET_ERR_STORE : MARKET_OK;
    if (rc < 0) fsync[0] = '\0';
    market__replies_free(b.rep, b.n);
    market__buf_free(&b);
    return rc;
}

/* Writes where m's store is now into out: "host:port" of the master the
 * Sentinels name (asking them when the answer kept is stale), of the
 * cluster master that serves the default realm, or of the one configured
 * server. Returns MARKET_OK, or MARKET_ERR_STORE (no master
 * known: out holds ""), MARKET_ERR_INVALID for NULL arguments. */
int market_master(market *m, char *out, size_t outlen) {
    if (!m || !out || outlen == 0) return MARKET_ERR_INVALID;
    rconn_addr a = m->cfg.redis;
    out[0] = '\0';
    if (m->sentinel && rconn_sentinel_master(m->sentinel, &a, NULL, NULL, 0) != RCONN_OK)
        return MARKET_ERR_STORE;
    if (m->cluster &&
        rconn_cluster_master(m->cluster, market__realm_slot(MARKET_REALM_DEFAULT), &a, NULL, 0) !=
            RCONN_OK)
        return MARKET_ERR_STORE;
    snprintf(out, outlen, "%s:%d", a.host, a.port);
    return MARKET_OK;
}
