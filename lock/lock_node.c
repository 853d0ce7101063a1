/* lock_node.c - one Redis server: pooled connections, the lock scripts, parallel calls, pub/sub.
 *
 * This is the only file of lock/ that speaks hiredis to data servers (it asks
 * lock_sentinel.c where a Sentinel group's master is); lock_dist.c drives one
 * or more nodes through lock__node_calls() and lock__sub_*() and sees plain
 * integers, never a redisReply.
 *
 * DESIGN
 * Connections: hiredis contexts are not thread-safe, so each node keeps two
 * mutex-protected free lists of connected contexts, one for commands and one
 * for subscribers (a context in pub/sub mode cannot run scripts). A call
 * borrows one (connecting a new one when the list is empty) and gives it
 * back. A context that failed at the socket level (a write or read error, no
 * answer in time) is dead: it is freed, and a generation counter is bumped
 * and the free lists emptied, because the other idle connections almost
 * certainly point at the same dead server; connections borrowed before the
 * bump are freed when given back. The next call reconnects, so a node
 * recovers by itself when its server comes back. A context that got an error
 * reply (NOPERM, OOM, ...) is freed alone. An idle context is checked with a
 * zero-timeout poll() before reuse and dropped if the server closed it, so
 * nothing is written twice to a dead socket (SIGPIPE) and a restarted server
 * costs no failed call when a fresh connection can reach it.
 *
 * Parallel calls: lock__node_calls() appends each call's command to its own
 * context, flushes them all, then reads the answers with one poll() over all
 * sockets until a shared deadline, so N round trips overlap into one. A new
 * connection first sends AUTH/SELECT and waits for their answers before the
 * script goes out (a failed SELECT must not let a script run in db 0);
 * connecting itself is blocking, one node after the other, each bounded by
 * the timeout. After the deadline, one last non-blocking poll picks up
 * answers that already arrived (a slow client, e.g. under valgrind, must not
 * count a prompt server as lost).
 *
 * Sentinel groups: a node whose address is a Sentinel group connects to the
 * master its lock_sentinel names, sets the connection up in plain round trips
 * (AUTH, SELECT, then ROLE, which must say "master") and stamps it with the
 * group's generation. A connection of an older generation is closed instead
 * of reused; a socket failure, or an -READONLY, -LOADING or -MASTERDOWN
 * answer, makes the node suspect the master it was made for, so the next
 * connection asks the Sentinels again. A lease on a master that a failover
 * dropped is gone with it (the new master may grant the key again): that is
 * what the fences and the lease check at commit are for (docs/LOCKING.md).
 * A lease the failover kept although we had given it up (its release went to
 * the old master) is taken over by the acquire script on our next acquire of
 * the key: our tokens carry our client's id (lock_dist.c).
 *
 * Scripts: the SHA-1 of each script is computed here (lock_sha1.c), so calls
 * use EVALSHA with no SCRIPT LOAD; a NOSCRIPT answer (after SCRIPT FLUSH or a
 * restart) is retried on the spot with EVAL and the full text, which also
 * puts the script back in the server's cache.
 *
 * Lost answers: a call sent but not answered in time may still run when the
 * server wakes up (a paused server keeps the bytes in its socket). When the
 * caller asks for it (undo_nkeys), its undo script (the release script; for a
 * reentrant acquire, the release of the hold its owner just added) is written
 * behind it on the same connection before that connection is closed: the
 * server executes a connection's commands in order, so a late SET is undone
 * right after it runs instead of holding the key until its TTL.
 *
 * Pub/sub: lock__sub_begin() subscribes borrowed subscriber connections to
 * the channels and waits for the acknowledgements; lock__sub_wait() polls
 * them for a message on one of those channels; lock__sub_end() sends
 * UNSUBSCRIBE without waiting and gives the connection back marked
 * "draining": the next user skips whatever arrives before its own
 * acknowledgements.
 */
#include "lock/lock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis.h>

#include "lock/lock_impl.h"

#define NODE_IDLE_MAX 32 /* idle connections kept per kind; extras are closed */
#define SHA_LEN 40
#define ARGV_MAX (3 + LOCK__CALL_KEYS_MAX + LOCK__CALL_ARGS_MAX)

enum conn_kind { KIND_CMD, KIND_SUB, KIND_COUNT };

enum conn_fate {
    CONN_HEALTHY, /* back to the free list */
    CONN_DROP,    /* close it alone (an error reply) */
    CONN_BROKEN   /* close it, bump the generation, empty the free lists */
};

/* Phases of a call (lock__call.phase). */
enum {
    PH_NONE,  /* no connection: the call never went out */
    PH_SETUP, /* waiting for AUTH/SELECT answers; the script is not sent yet */
    PH_OP,    /* EVALSHA sent */
    PH_EVAL,  /* NOSCRIPT answered; EVAL sent */
    PH_DONE,  /* answered; the connection is healthy */
    PH_DROP,  /* answered with an error; close the connection */
    PH_BROKEN /* socket failure or no answer; close the connection */
};

static const char *const script_text[LOCK__SCRIPT_COUNT] = {
    /* SET NX PX on every lock key, in order; when one is taken, the keys set so far are
     * deleted again (nobody can have seen them: it is one script), "<key>:wanted" is set
     * for the lease's length (someone waits: the release must announce itself), and the
     * taken key's PTTL is the answer (-1: a key without expiry), so a waiter knows when
     * the lease runs out. When all are set, each distinct fence counter is advanced
     * once (the callers pass one counter for every key) and its value is every key's
     * fence: one more than it was, or the server's clock in microseconds when that is
     * larger. The clock is what keeps fences growing across a failover: a promoted
     * replica that missed the last advance still starts above every fence the old
     * master handed out, as long as the servers' clocks agree within the time a
     * failover takes (docs/LOCKING.md). So it is SET NX on all keys or on none, and a
     * free single key costs SET NX PX, TIME, GET and SET.
     * ARGV[3] (optional) is the client's id, the first half of each of its tokens: a key
     * held by a token of the same length that begins with it is a lease this client gave
     * up (its caller holds the key's in-process queue entry, so no thread of the client
     * holds that lease), come back with a failover or a restart that lost its release: it
     * is taken over like a free key instead of waited out (docs/LOCKING.md). Not when
     * "<key>:owner" names that token: a reentrant lease, whose holds other clients naming
     * the same owner may share. */
    [LOCK__SCRIPT_ACQUIRE] =
        "local n = #KEYS / 2 "
        "for i = 1, n do "
        "if not redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then "
        "local cur = ARGV[3] and redis.pcall('GET', KEYS[i]) "
        "local ours = type(cur) == 'string' and #cur == #ARGV[1] and "
        "string.sub(cur, 1, #ARGV[3]) == ARGV[3] "
        "if ours then "
        "local o = redis.pcall('HGET', KEYS[i] .. '" LOCK_OWNER_SUFFIX "', 'token') "
        "ours = type(o) ~= 'table' and o ~= cur "
        "end "
        "if ours then "
        "redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) "
        "else "
        "for j = 1, i - 1 do redis.call('DEL', KEYS[j]) end "
        "redis.pcall('SET', KEYS[i] .. '" LOCK_WANTED_SUFFIX "', '1', 'PX', ARGV[2]) "
        "return redis.call('PTTL', KEYS[i]) "
        "end "
        "end "
        "end "
        "local f, seen = {}, {} "
        "for i = 1, n do "
        "local k = KEYS[n + i] "
        "local v = seen[k] "
        "if not v then "
        "v = (tonumber(redis.call('GET', k)) or 0) + 1 "
        "local t = redis.call('TIME') "
        "local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) "
        "if v < now then v = now end "
        "redis.call('SET', k, string.format('%.0f', v)) "
        "seen[k] = v "
        "end "
        "f[i] = v "
        "end "
        "return f",
    /* Compare-and-delete per key (ARGV[i], or ARGV[1] for all), in three commands whatever
     * the number of keys: MGET the keys, MGET their "<key>:wanted" marks, DEL the keys
     * still ours with the marks that exist (only those: on a cluster slot half-way through a
     * migration, a DEL that names a missing key next to others is refused). A deleted key
     * that someone waits for is announced on "<key>:released". pcall: a user without
     * channel rights still releases; and so does a release on a slot half-way through a
     * migration, where reading a mark that is not on this node fails (the marks are not
     * among KEYS): the lease is deleted unannounced, and a waiter sees it free at its next
     * poll (the mark, and the busy answer's pcall SET of it, likewise). */
    [LOCK__SCRIPT_RELEASE] = "local cur = redis.call('MGET', unpack(KEYS)) "
                             "local r, mine, marks = {}, {}, {} "
                             "for i = 1, #KEYS do "
                             "if cur[i] == (ARGV[i] or ARGV[1]) then "
                             "r[i] = 1 "
                             "mine[#mine + 1] = KEYS[i] "
                             "marks[#marks + 1] = KEYS[i] .. '" LOCK_WANTED_SUFFIX "' "
                             "else r[i] = 0 end "
                             "end "
                             "if #mine == 0 then return r end "
                             "local wanted = redis.pcall('MGET', unpack(marks)) "
                             "if wanted.err then wanted = {} end "
                             "for j = 1, #marks do "
                             "if wanted[j] then mine[#mine + 1] = marks[j] end "
                             "end "
                             "redis.call('DEL', unpack(mine)) "
                             "for j = 1, #marks do "
                             "if wanted[j] then "
                             "redis.pcall('PUBLISH', mine[j] .. '" LOCK_RELEASED_SUFFIX "', '1') "
                             "end "
                             "end "
                             "return r",
    [LOCK__SCRIPT_EXTEND] = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                            "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
    /* Raises each fence counter to at least ARGV[i]; never lowers one. */
    [LOCK__SCRIPT_RAISE] = "for i = 1, #KEYS do "
                           "local c = tonumber(redis.call('GET', KEYS[i]) or '0') "
                           "if c == nil or c < tonumber(ARGV[i]) then "
                           "redis.call('SET', KEYS[i], ARGV[i]) end "
                           "end "
                           "return 1",
    /* A reentrant lease: the lock key holds the token, exactly as a plain lease (so every
     * SET NX client sees it taken and a store can compare the token), and KEYS[2]
     * ("<key>:owner") the hash {owner, token, holds, fence} with the same expiry. When the key
     * is held and the hash names the same owner and the key's token, this is one more hold:
     * holds + 1, the expiry of both moved to ttl when that is later, and the answer is the
     * lease's {fence, holds, token}. A key held otherwise is busy, answered like the plain
     * acquire (the ":wanted" mark, the PTTL). A free key gets a new lease: SET, the next fence
     * (as the plain acquire counts it), a fresh hash; the answer {fence, 1, token}.
     * ARGV[4] (optional) is the client's id, as ARGV[3] of the plain acquire: a key held
     * otherwise by a token of this client, with no hash naming that token, is a plain lease it
     * gave up, taken over like a free key. */
    [LOCK__SCRIPT_ACQUIRE_OWNED] =
        "local cur = redis.call('GET', KEYS[1]) "
        "if cur then "
        "local o = redis.call('HMGET', KEYS[2], 'owner', 'token', 'fence') "
        "if o[1] == ARGV[1] and o[2] == cur and o[3] then "
        "local n = redis.call('HINCRBY', KEYS[2], 'holds', 1) "
        "local t = redis.call('PTTL', KEYS[1]) "
        "if t >= 0 and t < tonumber(ARGV[3]) then "
        "redis.call('PEXPIRE', KEYS[1], ARGV[3]) "
        "redis.call('PEXPIRE', KEYS[2], ARGV[3]) "
        "end "
        "return {tonumber(o[3]), n, cur} "
        "end "
        "if not (ARGV[4] and o[2] ~= cur and #cur == #ARGV[2] and "
        "string.sub(cur, 1, #ARGV[4]) == ARGV[4]) then "
        "redis.pcall('SET', KEYS[1] .. '" LOCK_WANTED_SUFFIX "', '1', 'PX', ARGV[3]) "
        "return redis.call('PTTL', KEYS[1]) "
        "end "
        "end "
        "redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) "
        "local v = (tonumber(redis.call('GET', KEYS[3])) or 0) + 1 "
        "local t = redis.call('TIME') "
        "local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) "
        "if v < now then v = now end "
        "redis.call('SET', KEYS[3], string.format('%.0f', v)) "
        "redis.call('DEL', KEYS[2]) "
        "redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'token', ARGV[2], 'holds', '1', "
        "'fence', string.format('%.0f', v)) "
        "redis.call('PEXPIRE', KEYS[2], ARGV[3]) "
        "return {v, 1, ARGV[2]}",
    /* One hold less, if the key holds the token ARGV[2] and the hash names owner ARGV[1] (a
     * key holding the token without a hash is a lease whose hash is gone: freed at once).
     * Without ARGV[2] it takes back the hold the owned acquire just sent on this connection
     * added, whatever the token: the undo of an answer that never came. The last hold frees
     * the lease as the plain release does (the key, the hash, the ":wanted" mark, and the
     * "<key>:released" notice when marked). Answers the holds left, or -1: not ours. */
    [LOCK__SCRIPT_RELEASE_OWNED] =
        "local cur = redis.call('GET', KEYS[1]) "
        "if not cur then return -1 end "
        "local o = redis.call('HMGET', KEYS[2], 'owner', 'token') "
        "if ARGV[2] then "
        "if cur ~= ARGV[2] then return -1 end "
        "if o[1] and (o[1] ~= ARGV[1] or o[2] ~= cur) then return -1 end "
        "elseif o[1] ~= ARGV[1] or o[2] ~= cur then "
        "return -1 "
        "end "
        "if o[1] then "
        "local n = redis.call('HINCRBY', KEYS[2], 'holds', -1) "
        "if n > 0 then return n end "
        "end "
        "local w = redis.pcall('GET', KEYS[1] .. '" LOCK_WANTED_SUFFIX "') "
        "if type(w) == 'table' then w = false end "
        "redis.call('DEL', KEYS[1], KEYS[2]) "
        "if w then "
        "redis.call('DEL', KEYS[1] .. '" LOCK_WANTED_SUFFIX "') "
        "redis.pcall('PUBLISH', KEYS[1] .. '" LOCK_RELEASED_SUFFIX "', '1') "
        "end "
        "return 0",
    /* Compare-and-pexpire for a reentrant lease: the token in the key, the owner in the hash;
     * the expiry of both only ever moves later (other holds rely on theirs). */
    [LOCK__SCRIPT_EXTEND_OWNED] =
        "if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end "
        "local o = redis.call('HMGET', KEYS[2], 'owner', 'token') "
        "if o[1] and (o[1] ~= ARGV[1] or o[2] ~= ARGV[2]) then return 0 end "
        "local t = redis.call('PTTL', KEYS[1]) "
        "if t >= 0 and t < tonumber(ARGV[3]) then "
        "redis.call('PEXPIRE', KEYS[1], ARGV[3]) "
        "if o[1] then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end "
        "end "
        "return 1",
    /* Raises the fence counter to at least ARGV[1], and the fence a reentrant lease of token
     * ARGV[2] keeps in its hash (what its re-acquisitions answer) likewise. */
    [LOCK__SCRIPT_RAISE_OWNED] =
        "local f = tonumber(ARGV[1]) "
        "local c = tonumber(redis.call('GET', KEYS[1]) or '0') "
        "if c == nil or c < f then redis.call('SET', KEYS[1], ARGV[1]) end "
        "local o = redis.call('HMGET', KEYS[2], 'token', 'fence') "
        "if o[1] == ARGV[2] and (tonumber(o[2] or '0') or 0) < f then "
        "redis.call('HSET', KEYS[2], 'fence', ARGV[1]) end "
        "return 1",
};

static char script_sha[LOCK__SCRIPT_COUNT][SHA_LEN + 1];
static pthread_once_t sha_once = PTHREAD_ONCE_INIT;

static void sha_init(void) {
    for (int i = 0; i < LOCK__SCRIPT_COUNT; i++)
        lock__sha1_hex(script_text[i], strlen(script_text[i]), script_sha[i]);
}

struct lock__conn {
    redisContext *ctx;       /* owned; connected */
    unsigned long gen;       /* node generation when it was made */
    uint64_t sgen;           /* Sentinel group: the group's generation when it was made */
    int stale;               /* answered -READONLY, -LOADING or -MASTERDOWN: not a master */
    int owed;                /* AUTH/SELECT answers still to come */
    int draining;            /* subscriber: an UNSUBSCRIBE went out, its answers may follow */
    struct lock__conn *next; /* free list */
};

struct lock__node {
    lock_redis_addr addr;   /* copy of the caller's */
    lock_sentinel *sentinel; /* owned; NULL unless addr is a Sentinel group */
    lock_cluster *cluster;   /* owned; NULL unless addr is a cluster (routes, never connects) */
    struct lock__node *masters[LOCK__CLUSTER_NODES_MAX]; /* a cluster's node per master: owned,
                                                           made on first use, guarded by mu */
    size_t nmasters;
    lock_cluster *cluster_of; /* a master's node: its cluster (borrowed), told of failures */
    int timeout_ms;       /* socket send timeout; the default for calls */
    pthread_mutex_t mu;   /* guards idle, n_idle, gen */
    struct lock__conn *idle[KIND_COUNT];
    size_t n_idle[KIND_COUNT];
    unsigned long gen; /* bumped on every socket failure */
};

/* ---- connections ---- */

static struct timeval tv_of(int ms) {
    struct timeval tv;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    return tv;
}

static void conn_free(struct lock__conn *cn) {
    if (cn == NULL) return;
    if (cn->ctx != NULL) redisFree(cn->ctx);
    free(cn);
}

static void conn_list_free(struct lock__conn *list) {
    while (list != NULL) {
        struct lock__conn *next = list->next;
        conn_free(list);
        list = next;
    }
}

/* Appends argv[0..argc) to cn's output buffer. Returns 0, or -1 when out of memory. */
static int conn_append(struct lock__conn *cn, int argc, const char **argv) {
    size_t lens[ARGV_MAX];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return redisAppendCommandArgv(cn->ctx, argc, argv, lens) == REDIS_OK ? 0 : -1;
}

/* Writes cn's whole output buffer (blocking, bounded by the socket send timeout). Returns 0 or
 * -1 (the connection is then dead). */
static int conn_flush(struct lock__conn *cn) {
    int done = 0;
    do {
        if (redisBufferWrite(cn->ctx, &done) != REDIS_OK) return -1;
    } while (!done);
    return 0;
}

static int reply_is_ok(const redisReply *r) {
    return r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
}

/* Returns 1 when reply r says its server is not (or not yet) a master that takes writes. */
static int reply_not_master(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR &&
           (strncmp(r->str, "READONLY", 8) == 0 || strncmp(r->str, "LOADING", 7) == 0 ||
            strncmp(r->str, "MASTERDOWN", 10) == 0);
}

/* Runs argv on cn in one round trip and judges the answer: OK, or for ROLE an array whose
 * first element is "master". Returns 0, or -1. */
static int conn_setup_step(struct lock__conn *cn, int argc, const char **argv) {
    redisReply *r = redisCommandArgv(cn->ctx, argc, argv, NULL);
    int ok = r != NULL && (strcmp(argv[0], "ROLE") == 0
                               ? r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                                     r->element[0]->type == REDIS_REPLY_STRING &&
                                     strcmp(r->element[0]->str, "master") == 0
                               : reply_is_ok(r));
    if (r != NULL) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Sets up a connection to a Sentinel group's master in plain round trips: AUTH, SELECT for
 * commands, then ROLE (see DESIGN). Returns 0, or -1. */
static int conn_setup_master(struct lock__node *nd, struct lock__conn *cn, enum conn_kind kind) {
    if (nd->addr.pass[0] != '\0') {
        const char *argv[] = {"AUTH", nd->addr.user, nd->addr.pass};
        int user = nd->addr.user[0] != '\0';
        if (!user) argv[1] = nd->addr.pass;
        if (conn_setup_step(cn, user ? 3 : 2, argv) != 0) return -1;
    }
    if (kind == KIND_CMD && nd->addr.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", nd->addr.db);
        const char *argv[] = {"SELECT", db};
        if (conn_setup_step(cn, 2, argv) != 0) return -1;
    }
    const char *role[] = {"ROLE"};
    return conn_setup_step(cn, 1, role);
}

/* Connects to nd within connect_ms and appends (does not send) AUTH and, for commands, SELECT;
 * cn->owed counts their answers. For a Sentinel group, connects to the master the Sentinels
 * name and sets it up at once (conn_setup_master; nothing owed). Returns LOCK_OK with a new
 * connection in *out, LOCK_ERR_NOMEM or LOCK_ERR_BACKEND. */
static int conn_open(struct lock__node *nd, enum conn_kind kind, unsigned long gen, int connect_ms,
                     struct lock__conn **out) {
    int err = LOCK_ERR_BACKEND;
    struct lock__conn *cn = calloc(1, sizeof *cn);
    if (cn == NULL) return LOCK_ERR_NOMEM;
    cn->gen = gen;
    const char *host = nd->addr.host;
    int port = nd->addr.port;
    lock_redis_addr master;
    if (nd->sentinel != NULL) {
        if (lock_sentinel_master(nd->sentinel, &master, &cn->sgen, NULL, 0) != LOCK_OK) goto fail;
        host = master.host;
        port = master.port;
    }
    cn->ctx = redisConnectWithTimeout(host, port, tv_of(connect_ms));
    if (cn->ctx == NULL) {
        err = LOCK_ERR_NOMEM;
        goto fail;
    }
    if (cn->ctx->err != 0) goto fail;
    if (redisSetTimeout(cn->ctx, tv_of(nd->timeout_ms)) != REDIS_OK) goto fail;
    if (redisEnableKeepAlive(cn->ctx) != REDIS_OK) goto fail;
    if (nd->sentinel != NULL) {
        if (conn_setup_master(nd, cn, kind) != 0) goto fail;
    } else if (nd->addr.user[0] != '\0') {
        const char *argv[] = {"AUTH", nd->addr.user, nd->addr.pass};
        if (conn_append(cn, 3, argv) != 0) goto nomem;
        cn->owed++;
    } else if (nd->addr.pass[0] != '\0') {
        const char *argv[] = {"AUTH", nd->addr.pass};
        if (conn_append(cn, 2, argv) != 0) goto nomem;
        cn->owed++;
    }
    if (kind == KIND_CMD && nd->addr.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", nd->addr.db);
        const char *argv[] = {"SELECT", db};
        if (conn_append(cn, 2, argv) != 0) goto nomem;
        cn->owed++;
    }
    *out = cn;
    return LOCK_OK;

nomem:
    err = LOCK_ERR_NOMEM;
fail:
    if (nd->sentinel != NULL && cn->sgen != 0) lock_sentinel_suspect(nd->sentinel, cn->sgen);
    conn_free(cn);
    return err;
}

/* Returns 1 when an idle connection still looks alive: nothing to read on a command
 * connection (an idle one owes no answer, so data there is the server's EOF or reset), no
 * error or hang-up on a subscriber (whose pending UNSUBSCRIBE answers are read in). Checked
 * before reuse so that nothing is ever written twice to a connection the server closed: the
 * second write would raise SIGPIPE in a program that does not ignore it. */
static int conn_usable(struct lock__conn *cn, enum conn_kind kind) {
    struct pollfd p = {cn->ctx->fd, POLLIN, 0};
    if (cn->ctx->err != 0 || poll(&p, 1, 0) < 0) return 0;
    if (p.revents == 0) return 1;
    if (kind == KIND_CMD || (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return 0;
    return redisBufferRead(cn->ctx) == REDIS_OK;
}

/* Lends a connection of kind from nd's free list (dropping dead ones), or a new one. Returns
 * LOCK_OK with *out set, LOCK_ERR_NOMEM or LOCK_ERR_BACKEND. */
static int conn_borrow(struct lock__node *nd, enum conn_kind kind, int connect_ms,
                       struct lock__conn **out) {
    for (;;) {
        if (pthread_mutex_lock(&nd->mu) != 0) return LOCK_ERR_BACKEND;
        struct lock__conn *cn = nd->idle[kind];
        if (cn != NULL) {
            nd->idle[kind] = cn->next;
            nd->n_idle[kind]--;
            cn->next = NULL;
        }
        unsigned long gen = nd->gen;
        pthread_mutex_unlock(&nd->mu);
        if (cn == NULL) return conn_open(nd, kind, gen, connect_ms, out);
        if ((nd->sentinel == NULL || cn->sgen == lock_sentinel_generation(nd->sentinel)) &&
            conn_usable(cn, kind)) {
            *out = cn;
            return LOCK_OK;
        }
        conn_free(cn); /* the others are checked one by one as they come */
    }
}

/* Gives cn back according to fate; see enum conn_fate. cn may be NULL (a connect that
 * failed: with CONN_BROKEN the idle connections are still dropped). */
static void conn_return(struct lock__node *nd, struct lock__conn *cn, enum conn_kind kind,
                        enum conn_fate fate) {
    struct lock__conn *drop[KIND_COUNT] = {NULL, NULL};
    if (cn == NULL && fate != CONN_BROKEN) return;
    if (cn != NULL && cn->stale) fate = CONN_BROKEN;
    if (fate == CONN_BROKEN && cn != NULL && nd->sentinel != NULL)
        lock_sentinel_suspect(nd->sentinel, cn->sgen);
    if (fate == CONN_BROKEN && nd->cluster_of != NULL) lock_cluster_stale(nd->cluster_of);
    if (pthread_mutex_lock(&nd->mu) != 0) {
        conn_free(cn);
        return;
    }
    if (fate == CONN_BROKEN) {
        nd->gen++;
        for (int k = 0; k < KIND_COUNT; k++) {
            drop[k] = nd->idle[k];
            nd->idle[k] = NULL;
            nd->n_idle[k] = 0;
        }
    } else if (fate == CONN_HEALTHY && cn != NULL && cn->gen == nd->gen &&
               nd->n_idle[kind] < NODE_IDLE_MAX) {
        cn->next = nd->idle[kind];
        nd->idle[kind] = cn;
        nd->n_idle[kind]++;
        cn = NULL;
    }
    pthread_mutex_unlock(&nd->mu);
    conn_free(cn);
    for (int k = 0; k < KIND_COUNT; k++)
        conn_list_free(drop[k]);
}

/* Reads what the socket has into the reader. Returns 0, or -1 on EOF or an error. */
static int conn_read(struct lock__conn *cn) {
    return redisBufferRead(cn->ctx) == REDIS_OK ? 0 : -1;
}

/* Takes the next complete reply out of the reader. Returns 1 with a new reply in *r (caller
 * frees), 0 when none is complete yet, -1 on a protocol error. */
static int conn_next(struct lock__conn *cn, redisReply **r) {
    void *reply = NULL;
    if (redisGetReplyFromReader(cn->ctx, &reply) != REDIS_OK) return -1;
    *r = reply;
    return reply != NULL;
}

/* ---- cluster routing ---- */

/* Returns the node of cluster node nd for the master host:port, made (not connected) on first
 * use; borrowed, valid until nd is freed. NULL when the table is full or memory runs out. */
static struct lock__node *cluster_node_at(struct lock__node *nd, const char *host, int port) {
    struct lock__node *found = NULL;
    if (pthread_mutex_lock(&nd->mu) != 0) return NULL;
    for (size_t i = 0; i < nd->nmasters && found == NULL; i++)
        if (nd->masters[i]->addr.port == port && strcmp(nd->masters[i]->addr.host, host) == 0)
            found = nd->masters[i];
    if (found == NULL && nd->nmasters < LOCK__CLUSTER_NODES_MAX) {
        lock_redis_addr a;
        memset(&a, 0, sizeof a);
        snprintf(a.host, sizeof a.host, "%s", host);
        a.port = port;
        memcpy(a.user, nd->addr.user, sizeof a.user);
        memcpy(a.pass, nd->addr.pass, sizeof a.pass);
        struct lock__node *m = NULL;
        if (lock__node_new(&a, nd->timeout_ms, &m) == LOCK_OK) {
            m->cluster_of = nd->cluster;
            nd->masters[nd->nmasters++] = m;
            found = m;
        }
    }
    pthread_mutex_unlock(&nd->mu);
    return found;
}

/* Returns the node of the master that serves key's slot in cluster node nd (borrowed), or
 * NULL when the cluster cannot say (no node answers, the slot has no master). */
static struct lock__node *cluster_route(struct lock__node *nd, const char *key) {
    lock_redis_addr m;
    if (lock_cluster_master(nd->cluster, lock_key_slot(key, strlen(key)), &m, NULL, 0) != LOCK_OK)
        return NULL;
    return cluster_node_at(nd, m.host, m.port);
}

/* Reads an error answer r to c's script from a cluster's master: a -MOVED/-ASK is kept in
 * c->redirect for lock__node_calls() to follow; -TRYAGAIN and -CLUSTERDOWN (which also makes
 * the map stale) mark c for a later retry. The script did not run: c ends UNSENT on a healthy
 * connection. Returns 1 when r was one of these, else 0. */
static int call_cluster_refusal(struct lock__call *c, const redisReply *r) {
    lock_cluster *cl = c->node->cluster_of;
    if (cl == NULL || r->type != REDIS_REPLY_ERROR) return 0;
    if (lock_cluster_redirect_parse(r->str, r->len, &c->redirect) == 0) {
        if (c->redirect.host[0] == '\0')
            memcpy(c->redirect.host, c->node->addr.host, sizeof c->redirect.host);
        c->redirected = 1;
    } else if (strncmp(r->str, "TRYAGAIN", 8) == 0) {
        c->retry = 1;
    } else if (strncmp(r->str, "CLUSTERDOWN", 11) == 0) {
        c->retry = 1;
        lock_cluster_stale(cl);
    } else {
        return 0;
    }
    c->state = LOCK__CALL_UNSENT;
    c->phase = PH_DONE;
    return 1;
}

/* ---- calls ---- */

/* Appends c's script as EVALSHA (eval == 0) or EVAL with the full text. Returns 0 or -1. */
static int call_append(struct lock__call *c, struct lock__conn *cn, enum lock__script s, int eval,
                       size_t nkeys, size_t nargs) {
    const char *argv[ARGV_MAX];
    char nk[24];
    snprintf(nk, sizeof nk, "%zu", nkeys);
    int argc = 0;
    argv[argc++] = eval ? "EVAL" : "EVALSHA";
    argv[argc++] = eval ? script_text[s] : script_sha[s];
    argv[argc++] = nk;
    for (size_t i = 0; i < nkeys; i++)
        argv[argc++] = c->keys[i];
    for (size_t i = 0; i < nargs; i++)
        argv[argc++] = c->args[i];
    return conn_append(cn, argc, argv);
}

/* Sends c's script on its connection. Returns 0, or -1 (the connection is dead). */
static int call_send_op(struct lock__call *c) {
    if (call_append(c, c->conn, c->script, 0, c->nkeys, c->nargs) != 0) return -1;
    if (conn_flush(c->conn) != 0) return -1;
    c->phase = PH_OP;
    return 0;
}

/* Records a script's answer r in c: an integer, or an array of integers with at most one
 * token-sized string among them (c->text; its place in c->vals holds 0). */
static void call_take_answer(struct lock__call *c, const redisReply *r) {
    c->phase = PH_DONE;
    if (r->type == REDIS_REPLY_INTEGER) {
        c->state = LOCK__CALL_INT;
        c->ival = r->integer;
        return;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements <= LOCK_MULTI_MAX) {
        c->text[0] = '\0';
        for (size_t i = 0; i < r->elements; i++) {
            const redisReply *e = r->element[i];
            if (e->type == REDIS_REPLY_INTEGER) {
                c->vals[i] = e->integer;
            } else if (e->type == REDIS_REPLY_STRING && e->len == LOCK_TOKEN_LEN &&
                       c->text[0] == '\0' && memchr(e->str, '\0', LOCK_TOKEN_LEN) == NULL) {
                memcpy(c->text, e->str, LOCK_TOKEN_LEN);
                c->text[LOCK_TOKEN_LEN] = '\0';
                c->vals[i] = 0;
            } else {
                goto bad;
            }
        }
        c->nvals = r->elements;
        c->state = LOCK__CALL_ARRAY;
        return;
    }
bad:
    c->state = LOCK__CALL_ERROR;
    c->phase = PH_DROP;
}

/* Handles one reply r on c's connection, advancing c's phase. */
static void call_on_reply(struct lock__call *c, const redisReply *r) {
    if (reply_not_master(r)) c->conn->stale = 1;
    if (c->phase == PH_EVAL && c->skip_ok > 0 && r->type == REDIS_REPLY_STATUS) {
        c->skip_ok--; /* ASKING's +OK before the EVAL's answer */
        return;
    }
    if (c->phase == PH_SETUP) {
        if (!reply_is_ok(r)) { /* a refused AUTH/SELECT: the script never went out */
            c->phase = PH_DROP;
            return;
        }
        if (--c->conn->owed == 0 && call_send_op(c) != 0) c->phase = PH_BROKEN;
        return;
    }
    if ((c->phase == PH_OP || c->phase == PH_EVAL) && call_cluster_refusal(c, r)) return;
    if (c->phase == PH_OP && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        const char *asking[] = {"ASKING"}; /* it covers one command: the EVAL needs its own */
        if (c->asking && conn_append(c->conn, 1, asking) != 0) {
            c->phase = PH_BROKEN;
            c->state = LOCK__CALL_LOST;
            return;
        }
        c->skip_ok = c->asking;
        if (call_append(c, c->conn, c->script, 1, c->nkeys, c->nargs) != 0 ||
            conn_flush(c->conn) != 0) {
            c->phase = PH_BROKEN;
            c->state = LOCK__CALL_LOST;
            return;
        }
        c->phase = PH_EVAL;
        return;
    }
    call_take_answer(c, r);
}

static int call_waiting(const struct lock__call *c) {
    return c->phase == PH_SETUP || c->phase == PH_OP || c->phase == PH_EVAL;
}

/* Reads c's socket and handles every complete reply in it. */
static void call_read(struct lock__call *c) {
    if (conn_read(c->conn) != 0) {
        c->phase = PH_BROKEN;
        return;
    }
    redisReply *r;
    int got;
    while (call_waiting(c) && (got = conn_next(c->conn, &r)) != 0) {
        if (got < 0) {
            c->phase = PH_BROKEN;
            return;
        }
        call_on_reply(c, r);
        freeReplyObject(r);
    }
}

/* Ends a call that got no answer: its state says whether the script may have run, and the
 * undo (when asked for) rides behind it on the same connection. */
static void call_give_up(struct lock__call *c) {
    int sent = c->phase == PH_OP || c->phase == PH_EVAL;
    c->state = sent ? LOCK__CALL_LOST : LOCK__CALL_UNSENT;
    const char *asking[] = {"ASKING"};
    if (sent && c->undo_nkeys > 0 && c->conn->ctx->err == 0 &&
        (!c->asking || conn_append(c->conn, 1, asking) == 0) &&
        call_append(c, c->conn, c->undo_script, 1, c->undo_nkeys, c->undo_nargs) == 0)
        (void)conn_flush(c->conn); /* best effort: the lease expires by itself anyway */
    c->phase = PH_BROKEN;
}

/* Runs *cs[0..n) in parallel on their nodes (a NULL node: the call cannot go out); see
 * lock__node_calls(). */
static void run_calls(struct lock__call *const *cs, size_t n, int timeout_ms) {
    struct pollfd pfd[LOCK_REDLOCK_NODES_MAX];
    size_t idx[LOCK_REDLOCK_NODES_MAX];
    pthread_once(&sha_once, sha_init);

    for (size_t i = 0; i < n; i++) {
        struct lock__call *c = cs[i];
        c->state = LOCK__CALL_UNSENT;
        c->phase = PH_NONE;
        c->nvals = 0;
        c->text[0] = '\0';
        c->conn = NULL;
        c->skip_ok = 0;
        if (c->node == NULL) continue; /* a cluster that could not say where */
        if (conn_borrow(c->node, KIND_CMD, timeout_ms, &c->conn) != LOCK_OK) {
            conn_return(c->node, NULL, KIND_CMD, CONN_BROKEN);
            continue;
        }
        const char *asking[] = {"ASKING"};
        if (c->asking) {
            if (conn_append(c->conn, 1, asking) != 0) {
                conn_return(c->node, c->conn, KIND_CMD, CONN_DROP);
                c->conn = NULL;
                continue;
            }
            c->conn->owed++; /* answered +OK like AUTH/SELECT, before the script goes out */
        }
        if (c->conn->owed > 0) {
            c->phase = conn_flush(c->conn) == 0 ? PH_SETUP : PH_BROKEN;
        } else if (call_send_op(c) != 0) {
            c->phase = PH_BROKEN;
            c->state = LOCK__CALL_LOST;
        }
    }

    int64_t deadline = lock_now_ms() + timeout_ms;
    for (int last = 0; !last;) {
        nfds_t nfd = 0;
        for (size_t i = 0; i < n && nfd < LOCK_REDLOCK_NODES_MAX; i++) {
            if (!call_waiting(cs[i])) continue;
            pfd[nfd].fd = cs[i]->conn->ctx->fd;
            pfd[nfd].events = POLLIN;
            pfd[nfd].revents = 0;
            idx[nfd++] = i;
        }
        if (nfd == 0) break;
        int64_t left = deadline - lock_now_ms();
        if (left <= 0) {
            left = 0;
            last = 1;
        }
        int pr = poll(pfd, nfd, (int)left);
        if (pr < 0 && errno != EINTR) break;
        for (nfds_t k = 0; pr > 0 && k < nfd; k++)
            if (pfd[k].revents != 0) call_read(cs[idx[k]]);
    }

    for (size_t i = 0; i < n; i++) {
        struct lock__call *c = cs[i];
        if (call_waiting(c)) call_give_up(c);
        if (c->phase == PH_BROKEN && c->state == LOCK__CALL_UNSENT && c->conn != NULL &&
            c->conn->owed == 0)
            c->state = LOCK__CALL_LOST; /* broke after the script went out */
        if (c->phase == PH_DROP && c->state == LOCK__CALL_UNSENT && c->conn != NULL &&
            c->conn->owed == 0)
            c->state = LOCK__CALL_ERROR;
        enum conn_fate fate = c->phase == PH_DONE   ? CONN_HEALTHY
                              : c->phase == PH_DROP ? CONN_DROP
                                                    : CONN_BROKEN;
        if (c->conn != NULL) conn_return(c->node, c->conn, KIND_CMD, fate);
        c->conn = NULL;
    }
}

/* Runs calls[0..n) in parallel: each borrows a connection to its node, all scripts go out, and
 * the answers are read until timeout_ms after the last one was sent. Fills each call's state
 * (and ival or vals): UNSENT when the script cannot have run, LOST when it was sent but not
 * answered, ERROR on an error reply, INT or ARRAY with the answer. Connections go back to their
 * nodes (or are closed). The calls' keys and args are borrowed for the duration.
 *
 * A call on a cluster's node goes to the master serving its first key's slot (the caller
 * keeps a call's keys in one slot). A -MOVED answer is reported to the cluster and the call
 * sent once more, at once, to the master it names; an -ASK answer sends ASKING and the call
 * to the node it names, once. A call refused again, or answered -TRYAGAIN or -CLUSTERDOWN,
 * ends UNSENT with retry set. Each call's node is the caller's again on return. This function
 * can't fail: failures are per call, in its state. */
void lock__node_calls(struct lock__call *calls, size_t n, int timeout_ms) {
    struct lock__call *cs[LOCK_REDLOCK_NODES_MAX] = {NULL};
    for (size_t i = 0; i < n; i++) {
        struct lock__call *c = &calls[i];
        c->retry = 0;
        c->asking = 0;
        c->redirected = 0;
        c->routed_from = NULL;
        if (c->node->cluster != NULL) {
            c->routed_from = c->node;
            c->node = cluster_route(c->routed_from, c->keys[0]);
        }
        cs[i] = c;
    }
    run_calls(cs, n, timeout_ms);

    size_t m = 0; /* follow the redirects, once */
    for (size_t i = 0; i < n; i++) {
        struct lock__call *c = &calls[i];
        if (!c->redirected || c->routed_from == NULL) continue;
        c->redirected = 0;
        lock_cluster_redirected(c->routed_from->cluster, &c->redirect);
        c->node = cluster_node_at(c->routed_from, c->redirect.host, c->redirect.port);
        c->asking = c->redirect.ask;
        cs[m++] = c;
    }
    if (m > 0) run_calls(cs, m, timeout_ms);

    for (size_t i = 0; i < n; i++) {
        struct lock__call *c = &calls[i];
        if (c->redirected) { /* moved again already: the next try has the newer map */
            if (c->routed_from != NULL && !c->redirect.ask)
                lock_cluster_redirected(c->routed_from->cluster, &c->redirect);
            c->redirected = 0;
            c->retry = 1;
        }
        if (c->routed_from != NULL) c->node = c->routed_from;
        c->routed_from = NULL;
        c->asking = 0;
    }
}

/* ---- pub/sub ---- */

/* Returns 1 when r is a 3-element pub/sub push whose first element is kind and second one of
 * s's channels. */
static int push_is(const struct lock__sub *s, const redisReply *r, const char *kind) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) return 0;
    const redisReply *k = r->element[0], *ch = r->element[1];
    if (k->type != REDIS_REPLY_STRING || strcmp(k->str, kind) != 0) return 0;
    if (ch->type != REDIS_REPLY_STRING) return 0;
    for (size_t i = 0; i < s->nch; i++)
        if (strcmp(ch->str, s->ch[i]) == 0) return 1;
    return 0;
}

/* Drops s's connection i: closed, and the node told whether the socket broke. */
static void sub_drop(struct lock__sub *s, size_t i, enum conn_fate fate) {
    conn_return(s->node[i], s->conn[i], KIND_SUB, fate);
    s->conn[i] = NULL;
}

/* Fills pfd/idx with the subscriber connections of s still open (and, with acks, not yet
 * acknowledged on all of s's channels). Returns how many. */
static nfds_t sub_pollset(const struct lock__sub *s, const size_t *acks, struct pollfd *pfd,
                          size_t *idx) {
    nfds_t nfd = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->conn[i] == NULL || (acks && acks[i] == s->nch)) continue;
        pfd[nfd].fd = s->conn[i]->ctx->fd;
        pfd[nfd].events = POLLIN;
        pfd[nfd].revents = 0;
        idx[nfd++] = i;
    }
    return nfd;
}

/* Reads what subscriber connection i has received and hands each reply to on_reply, which
 * returns 1 when the connection must be dropped (an error answer). A broken connection is
 * dropped. */
static void sub_read(struct lock__sub *s, size_t i,
                     int (*on_reply)(struct lock__sub *s, size_t i, const redisReply *r, void *ud),
                     void *ud) {
    struct lock__conn *cn = s->conn[i];
    if (conn_read(cn) != 0) {
        sub_drop(s, i, CONN_BROKEN);
        return;
    }
    redisReply *r;
    int got;
    while (s->conn[i] != NULL && (got = conn_next(cn, &r)) != 0) {
        if (got < 0) {
            sub_drop(s, i, CONN_BROKEN);
            return;
        }
        int bad = on_reply(s, i, r, ud);
        freeReplyObject(r);
        if (bad) sub_drop(s, i, CONN_DROP); /* NOAUTH, NOPERM (no channel rights) */
    }
}

/* sub_read() while subscribing: counts the acknowledgements in acks[i] (ud). */
static int on_subscribe_reply(struct lock__sub *s, size_t i, const redisReply *r, void *ud) {
    size_t *acks = ud;
    struct lock__conn *cn = s->conn[i];
    if (cn->owed > 0 && r->type == REDIS_REPLY_STATUS) {
        cn->owed--;
        return !reply_is_ok(r);
    }
    if (acks[i] < s->nch && push_is(s, r, "subscribe"))
        acks[i]++; /* anything else: left over from before, or a message */
    return r->type == REDIS_REPLY_ERROR;
}

/* sub_read() while waiting: notes a published message in *ud. */
static int on_message_reply(struct lock__sub *s, size_t i, const redisReply *r, void *ud) {
    (void)i;
    if (push_is(s, r, "message")) *(int *)ud = 1;
    return r->type == REDIS_REPLY_ERROR;
}

/* Subscribes, on each of nodes[0..n), a subscriber connection to channels[0..nch) (borrowed
 * until lock__sub_end()), waiting up to timeout_ms for the acknowledgements. Fills the
 * caller's *s. Returns the number of nodes subscribed (0: none; waiting must then poll). Always
 * pair with lock__sub_end(s). This function can't fail otherwise. */
size_t lock__sub_begin(struct lock__sub *s, struct lock__node *const *nodes, size_t n,
                       const char *const *channels, size_t nch, int timeout_ms) {
    struct pollfd pfd[LOCK_REDLOCK_NODES_MAX];
    size_t idx[LOCK_REDLOCK_NODES_MAX], acks[LOCK_REDLOCK_NODES_MAX];
    memset(s, 0, sizeof *s);
    s->n = n;
    s->nch = nch;
    for (size_t k = 0; k < nch; k++)
        s->ch[k] = channels[k];
    for (size_t i = 0; i < n; i++) {
        /* a cluster: the master of the channels' slot (PUBLISH reaches every node anyway) */
        struct lock__node *nd = nodes[i]->cluster != NULL && nch > 0
                                    ? cluster_route(nodes[i], channels[0])
                                    : nodes[i];
        s->node[i] = nd;
        s->conn[i] = NULL;
        acks[i] = 0;
        if (nd == NULL) continue;
        if (conn_borrow(nd, KIND_SUB, timeout_ms, &s->conn[i]) != LOCK_OK) {
            s->conn[i] = NULL;
            conn_return(nd, NULL, KIND_SUB, CONN_BROKEN);
            continue;
        }
        const char *argv[1 + LOCK_MULTI_MAX];
        argv[0] = "SUBSCRIBE";
        for (size_t k = 0; k < nch; k++)
            argv[1 + k] = channels[k];
        if (conn_append(s->conn[i], (int)(1 + nch), argv) != 0 || conn_flush(s->conn[i]) != 0)
            sub_drop(s, i, CONN_BROKEN);
    }

    int64_t deadline = lock_now_ms() + timeout_ms;
    for (int last = 0; !last;) {
        nfds_t nfd = sub_pollset(s, acks, pfd, idx);
        if (nfd == 0) break;
        int64_t left = deadline - lock_now_ms();
        if (left <= 0) {
            left = 0;
            last = 1;
        }
        int pr = poll(pfd, nfd, (int)left);
        if (pr < 0 && errno != EINTR) break;
        for (nfds_t k = 0; pr > 0 && k < nfd; k++)
            if (pfd[k].revents != 0) sub_read(s, idx[k], on_subscribe_reply, acks);
    }

    size_t subscribed = 0;
    for (size_t i = 0; i < n; i++) {
        if (s->conn[i] == NULL) continue;
        if (acks[i] < nch) {
            sub_drop(s, i, CONN_BROKEN);
            continue;
        }
        s->conn[i]->draining = 0;
        subscribed++;
    }
    return subscribed;
}

/* Waits until a message arrives on one of s's channels or the monotonic clock reaches
 * until_ms. Returns 1 (a message), 0 (time is up) or -1 (no subscription is left: the caller
 * must poll). Broken connections are dropped on the way. This function can't fail otherwise. */
int lock__sub_wait(struct lock__sub *s, int64_t until_ms) {
    struct pollfd pfd[LOCK_REDLOCK_NODES_MAX];
    size_t idx[LOCK_REDLOCK_NODES_MAX];
    for (;;) {
        nfds_t nfd = sub_pollset(s, NULL, pfd, idx);
        if (nfd == 0) return -1;
        int64_t left = until_ms - lock_now_ms();
        if (left <= 0) return 0;
        int pr = poll(pfd, nfd, (int)left);
        if (pr < 0 && errno != EINTR) return -1;
        int message = 0;
        for (nfds_t k = 0; pr > 0 && k < nfd; k++)
            if (pfd[k].revents != 0) sub_read(s, idx[k], on_message_reply, &message);
        if (message) return 1;
    }
}

/* Unsubscribes s's connections without waiting for the answers and gives them back (the next
 * user skips the answers). This function can't fail. */
void lock__sub_end(struct lock__sub *s) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->conn[i] == NULL) continue;
        const char *argv[] = {"UNSUBSCRIBE"};
        if (!conn_usable(s->conn[i], KIND_SUB) || conn_append(s->conn[i], 1, argv) != 0 ||
            conn_flush(s->conn[i]) != 0) {
            sub_drop(s, i, CONN_BROKEN);
            continue;
        }
        s->conn[i]->draining = 1;
        sub_drop(s, i, CONN_HEALTHY);
    }
    s->n = 0;
}

/* ---- nodes ---- */

/* Creates a node for the Redis server or Sentinel group at *addr (borrowed; copied; checked by
 * the caller; a group gets its lock_sentinel, whose watcher starts now), whose
 * sockets time out sends after timeout_ms. Does not connect. Returns LOCK_OK with a new node in
 * *out (caller frees with lock__node_free()), LOCK_ERR_NOMEM, or LOCK_ERR_BACKEND if the mutex
 * cannot be created. */
int lock__node_new(const lock_redis_addr *addr, int timeout_ms, struct lock__node **out) {
    struct lock__node *nd = calloc(1, sizeof *nd);
    if (nd == NULL) return LOCK_ERR_NOMEM;
    nd->addr = *addr;
    nd->timeout_ms = timeout_ms;
    if (addr->cluster) {
        int err = LOCK_OK;
        nd->cluster = lock_cluster_new(addr, timeout_ms, &err);
        if (nd->cluster == NULL) {
            free(nd);
            return err;
        }
    } else if (addr->master_name[0] != '\0') {
        int err = LOCK_OK;
        nd->sentinel = lock_sentinel_new(addr, timeout_ms, &err);
        if (nd->sentinel == NULL) {
            free(nd);
            return err;
        }
    }
    if (pthread_mutex_init(&nd->mu, NULL) != 0) {
        lock_sentinel_free(nd->sentinel);
        lock_cluster_free(nd->cluster);
        free(nd);
        return LOCK_ERR_BACKEND;
    }
    pthread_once(&sha_once, sha_init);
    *out = nd;
    return LOCK_OK;
}

/* Returns the slot map of a cluster's node (borrowed; valid until nd is freed), or NULL for
 * another node. This function can't fail. */
lock_cluster *lock__node_cluster(const struct lock__node *nd) {
    return nd->cluster;
}

/* Closes every idle connection of nd and frees it; no connection may be borrowed.
 * lock__node_free(NULL) is a no-op. This function can't fail. */
void lock__node_free(struct lock__node *nd) {
    if (nd == NULL) return;
    for (int k = 0; k < KIND_COUNT; k++) {
        conn_list_free(nd->idle[k]);
        nd->idle[k] = NULL;
    }
    for (size_t i = 0; i < nd->nmasters; i++)
        lock__node_free(nd->masters[i]);
    pthread_mutex_destroy(&nd->mu);
    lock_sentinel_free(nd->sentinel);
    lock_cluster_free(nd->cluster);
    free(nd);
}
