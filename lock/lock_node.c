/* lock_node.c - one Redis server, Sentinel group or cluster: its nodes and pooled connections.
 *
 * A node is where calls go; lock_call.c runs the lock scripts on nodes and
 * lock_sub.c waits on them for pub/sub notices, both through the
 * connections lent here. This file and those two are the only ones of lock/
 * that speak hiredis to data servers (it asks rconn/'s rconn_sentinel where
 * a Sentinel group's master is, and its rconn_cluster which master serves a
 * slot; rconn_connect() and rconn_setup() make and set up its
 * connections). Every failure here says why in a sentence that names the
 * server ("127.0.0.1:6379: Connection refused"), for lock_last_error().
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
 * costs no failed call when a fresh connection can reach it. A new
 * connection carries its AUTH/SELECT unsent: the caller sends them first and
 * waits for their answers before its script goes out (a failed SELECT must
 * not let a script run in db 0); connecting itself is blocking, bounded by
 * the timeout.
 *
 * Sentinel groups: a node whose address is a Sentinel group connects to the
 * master its rconn_sentinel names, sets the connection up in plain round trips
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
 * Clusters: a cluster's node never connects; it routes each key to the node
 * of the master serving its slot (lock__node_route), made on first use and
 * owned by the cluster's node. A master's broken connection makes the slot
 * map stale, so a failover inside the cluster is found at the next fetch.
 */
#include "lock/lock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "lock/lock_impl.h"

#define NODE_IDLE_MAX 32 /* idle connections kept per kind; extras are closed */

/* ---- connections ---- */

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

/* Appends argv[0..argc) (argc <= LOCK__ARGV_MAX) to cn's output buffer. Returns 0, or -1 when
 * out of memory. */
int lock__conn_append(struct lock__conn *cn, int argc, const char **argv) {
    size_t lens[LOCK__ARGV_MAX];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return redisAppendCommandArgv(cn->ctx, argc, argv, lens) == REDIS_OK ? 0 : -1;
}

/* Writes cn's whole output buffer (blocking, bounded by the socket send timeout). Returns 0 or
 * -1 (the connection is then dead). */
int lock__conn_flush(struct lock__conn *cn) {
    int done = 0;
    do {
        if (redisBufferWrite(cn->ctx, &done) != REDIS_OK) return -1;
    } while (!done);
    return 0;
}

/* Appends (does not send) AUTH with nd's credentials and, for commands, SELECT of its db to
 * the new connection cn; cn->owed counts their answers. Returns 0, or -1 when out of memory. */
static int conn_append_setup(struct lock__node *nd, struct lock__conn *cn,
                             enum lock__conn_kind kind) {
    const char *auth[3];
    int argc = rconn_auth_argv(&nd->addr, auth);
    if (argc > 0) {
        if (lock__conn_append(cn, argc, auth) != 0) return -1;
        cn->owed++;
    }
    if (kind == LOCK__CONN_CMD && nd->addr.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", nd->addr.db);
        const char *argv[] = {"SELECT", db};
        if (lock__conn_append(cn, 2, argv) != 0) return -1;
        cn->owed++;
    }
    return 0;
}

/* Connects to nd within connect_ms and appends (does not send) AUTH and, for commands, SELECT;
 * cn->owed counts their answers. For a Sentinel group, connects to the master the Sentinels
 * name and sets it up at once (rconn_setup(); nothing owed). Returns LOCK_OK with a new
 * connection in *out, or LOCK_ERR_NOMEM or LOCK_ERR_BACKEND with a sentence in
 * why[0..whylen) (e.g. "127.0.0.1:6379: Connection refused"). */
static int conn_open(struct lock__node *nd, enum lock__conn_kind kind, unsigned long gen,
                     int connect_ms, struct lock__conn **out, char *why, size_t whylen) {
    int err = LOCK_ERR_BACKEND;
    struct lock__conn *cn = calloc(1, sizeof *cn);
    if (cn == NULL) return LOCK_ERR_NOMEM;
    cn->gen = gen;
    const char *host = nd->addr.host;
    int port = nd->addr.port;
    rconn_addr master;
    if (nd->sentinel != NULL) {
        char swhy[LOCK__WHY_MAX - 64];
        if (rconn_sentinel_master(nd->sentinel, &master, &cn->sgen, swhy, sizeof swhy) !=
            RCONN_OK) {
            snprintf(why, whylen, "Sentinel group %s: %s", nd->addr.master_name, swhy);
            goto fail;
        }
        host = master.host;
        port = master.port;
    }
    snprintf(cn->at, sizeof cn->at, "%s:%d", host, port);
    int rc = rconn_connect(host, port, connect_ms, nd->timeout_ms, &cn->ctx, why, whylen);
    if (rc != RCONN_OK) {
        if (rc == RCONN_ERR_NOMEM) err = LOCK_ERR_NOMEM;
        goto fail;
    }
    if (nd->sentinel != NULL) {
        /* plain round trips, then ROLE: it must be the master (see DESIGN) */
        unsigned what = RCONN_SETUP_AUTH | RCONN_SETUP_ROLE;
        if (kind == LOCK__CONN_CMD) what |= RCONN_SETUP_SELECT;
        char swhy[LOCK__WHY_MAX];
        if (rconn_setup(cn->ctx, &nd->addr, what, swhy, sizeof swhy) != RCONN_OK) {
            snprintf(why, whylen, "%s: %s", cn->at, swhy);
            goto fail;
        }
    } else if (conn_append_setup(nd, cn, kind) != 0) {
        err = LOCK_ERR_NOMEM;
        goto fail;
    }
    *out = cn;
    return LOCK_OK;

fail:
    if (nd->sentinel != NULL && cn->sgen != 0) rconn_sentinel_suspect(nd->sentinel, cn->sgen);
    conn_free(cn);
    return err;
}

/* Returns 1 when an idle connection still looks alive: nothing to read on a command
 * connection (an idle one owes no answer, so data there is the server's EOF or reset), no
 * error or hang-up on a subscriber (whose pending UNSUBSCRIBE answers are read in). Checked
 * before reuse so that nothing is ever written twice to a connection the server closed: the
 * second write would raise SIGPIPE in a program that does not ignore it. */
int lock__conn_usable(struct lock__conn *cn, enum lock__conn_kind kind) {
    struct pollfd p = {cn->ctx->fd, POLLIN, 0};
    if (cn->ctx->err != 0 || poll(&p, 1, 0) < 0) return 0;
    if (p.revents == 0) return 1;
    if (kind == LOCK__CONN_CMD || (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return 0;
    return redisBufferRead(cn->ctx) == REDIS_OK;
}

/* Lends a connection of kind from nd's free list (dropping dead ones), or a new one made
 * within connect_ms; the caller gives it back with lock__conn_return(). Returns LOCK_OK with
 * *out set, or LOCK_ERR_NOMEM or LOCK_ERR_BACKEND with a sentence in why[0..whylen) (why may
 * be NULL). */
int lock__conn_borrow(struct lock__node *nd, enum lock__conn_kind kind, int connect_ms,
                      struct lock__conn **out, char *why, size_t whylen) {
    char dummy[8];
    if (why == NULL || whylen == 0) {
        why = dummy;
        whylen = sizeof dummy;
    }
    why[0] = '\0';
    for (;;) {
        if (pthread_mutex_lock(&nd->mu) != 0) {
            snprintf(why, whylen, "cannot lock the connection pool");
            return LOCK_ERR_BACKEND;
        }
        struct lock__conn *cn = nd->idle[kind];
        if (cn != NULL) {
            nd->idle[kind] = cn->next;
            nd->n_idle[kind]--;
            cn->next = NULL;
        }
        unsigned long gen = nd->gen;
        pthread_mutex_unlock(&nd->mu);
        if (cn == NULL) return conn_open(nd, kind, gen, connect_ms, out, why, whylen);
        if ((nd->sentinel == NULL || cn->sgen == rconn_sentinel_generation(nd->sentinel)) &&
            lock__conn_usable(cn, kind)) {
            *out = cn;
            return LOCK_OK;
        }
        conn_free(cn); /* the others are checked one by one as they come */
    }
}

/* Gives cn back according to fate; see enum lock__conn_fate. cn may be NULL (a connect that
 * failed: with LOCK__CONN_BROKEN the idle connections are still dropped). This function can't
 * fail. */
void lock__conn_return(struct lock__node *nd, struct lock__conn *cn, enum lock__conn_kind kind,
                       enum lock__conn_fate fate) {
    struct lock__conn *drop[LOCK__CONN_KINDS] = {NULL, NULL};
    if (cn == NULL && fate != LOCK__CONN_BROKEN) return;
    if (cn != NULL && cn->stale) fate = LOCK__CONN_BROKEN;
    if (fate == LOCK__CONN_BROKEN && cn != NULL && nd->sentinel != NULL)
        rconn_sentinel_suspect(nd->sentinel, cn->sgen);
    if (fate == LOCK__CONN_BROKEN && nd->cluster_of != NULL) rconn_cluster_stale(nd->cluster_of);
    if (pthread_mutex_lock(&nd->mu) != 0) {
        conn_free(cn);
        return;
    }
    if (fate == LOCK__CONN_BROKEN) {
        nd->gen++;
        for (int k = 0; k < LOCK__CONN_KINDS; k++) {
            drop[k] = nd->idle[k];
            nd->idle[k] = NULL;
            nd->n_idle[k] = 0;
        }
    } else if (fate == LOCK__CONN_HEALTHY && cn != NULL && cn->gen == nd->gen &&
               nd->n_idle[kind] < NODE_IDLE_MAX) {
        cn->next = nd->idle[kind];
        nd->idle[kind] = cn;
        nd->n_idle[kind]++;
        cn = NULL;
    }
    pthread_mutex_unlock(&nd->mu);
    conn_free(cn);
    for (int k = 0; k < LOCK__CONN_KINDS; k++)
        conn_list_free(drop[k]);
}

/* Reads what the socket has into the reader. Returns 0, or -1 on EOF or an error (the
 * connection is then dead; lock__conn_errstr() says why). */
int lock__conn_read(struct lock__conn *cn) {
    return redisBufferRead(cn->ctx) == REDIS_OK ? 0 : -1;
}

/* Takes the next complete reply out of the reader. Returns 1 with a new reply in *r (caller
 * frees), 0 when none is complete yet, -1 on a protocol error. */
int lock__conn_next(struct lock__conn *cn, redisReply **r) {
    void *reply = NULL;
    if (redisGetReplyFromReader(cn->ctx, &reply) != REDIS_OK) return -1;
    *r = reply;
    return reply != NULL;
}

/* Returns what hiredis says went wrong on cn ("no error" when nothing did; borrowed, valid
 * until cn is given back). This function can't fail. */
const char *lock__conn_errstr(const struct lock__conn *cn) {
    return rconn_errstr(cn->ctx);
}

/* Polls, until the monotonic time deadline_ms, the sockets that fill(ud, pfd, idx) lists
 * (at most LOCK_REDLOCK_NODES_MAX, each with the index that idx[] keeps for it), handing
 * the index of each one that is ready to ready(ud, i). After the deadline, one last
 * non-blocking poll picks up what already arrived (a slow client, e.g. under valgrind, must
 * not count a prompt server as lost). Returns 1 as soon as ready() returns non-zero, 0 when
 * the time is up, or -1 when fill() lists nothing or poll() fails. This function can't fail
 * otherwise. */
int lock__poll_until(int64_t deadline_ms, lock__poll_fill_fn fill, lock__poll_ready_fn ready,
                     void *ud) {
    struct pollfd pfd[LOCK_REDLOCK_NODES_MAX];
    size_t idx[LOCK_REDLOCK_NODES_MAX];
    for (int last = 0; !last;) {
        size_t nfd = fill(ud, pfd, idx);
        if (nfd == 0) return -1;
        int64_t left = deadline_ms - rconn_now_ms();
        if (left <= 0) {
            left = 0;
            last = 1;
        }
        int pr = poll(pfd, (nfds_t)nfd, (int)left);
        if (pr < 0 && errno != EINTR) return -1;
        int stop = 0;
        for (size_t k = 0; pr > 0 && k < nfd; k++)
            if (pfd[k].revents != 0 && ready(ud, idx[k])) stop = 1;
        if (stop) return 1;
    }
    return 0;
}

/* ---- cluster routing ---- */

/* Returns the node of cluster node nd for the master host:port, made (not connected) on first
 * use; borrowed, valid until nd is freed. NULL when the table is full or memory runs out. This
 * function can't fail otherwise. */
struct lock__node *lock__node_at(struct lock__node *nd, const char *host, int port) {
    struct lock__node *found = NULL;
    if (pthread_mutex_lock(&nd->mu) != 0) return NULL;
    for (size_t i = 0; i < nd->nmasters && found == NULL; i++)
        if (nd->masters[i]->addr.port == port && strcmp(nd->masters[i]->addr.host, host) == 0)
            found = nd->masters[i];
    if (found == NULL && nd->nmasters < LOCK__CLUSTER_NODES_MAX) {
        rconn_addr a;
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
 * NULL with a sentence in why[0..whylen) when the cluster cannot say (no node answers, the
 * slot has no master, no room for another master). */
struct lock__node *lock__node_route(struct lock__node *nd, const char *key, char *why,
                                    size_t whylen) {
    rconn_addr m;
    char cwhy[LOCK__WHY_MAX - 16];
    if (rconn_cluster_master(nd->cluster, rconn_key_slot(key, strlen(key)), &m, cwhy,
                             sizeof cwhy) != RCONN_OK) {
        snprintf(why, whylen, "cluster: %s", cwhy);
        return NULL;
    }
    struct lock__node *at = lock__node_at(nd, m.host, m.port);
    if (at == NULL) snprintf(why, whylen, "cluster: no room for master %s:%d", m.host, m.port);
    return at;
}

/* ---- nodes ---- */

/* Creates a node for the Redis server or Sentinel group at *addr (borrowed; copied; checked by
 * the caller; a group gets its rconn_sentinel, whose watcher starts now), whose
 * sockets time out sends after timeout_ms. Does not connect. Returns LOCK_OK with a new node in
 * *out (caller frees with lock__node_free()), LOCK_ERR_NOMEM, or LOCK_ERR_BACKEND if the mutex
 * cannot be created. */
int lock__node_new(const rconn_addr *addr, int timeout_ms, struct lock__node **out) {
    struct lock__node *nd = calloc(1, sizeof *nd);
    if (nd == NULL) return LOCK_ERR_NOMEM;
    nd->addr = *addr;
    nd->timeout_ms = timeout_ms;
    if (addr->cluster) {
        int err = RCONN_OK;
        nd->cluster = rconn_cluster_new(addr, timeout_ms, &err);
        if (nd->cluster == NULL) {
            free(nd);
            return lock__from_rconn(err);
        }
    } else if (addr->master_name[0] != '\0') {
        int err = RCONN_OK;
        nd->sentinel = rconn_sentinel_new(addr, timeout_ms, &err);
        if (nd->sentinel == NULL) {
            free(nd);
            return lock__from_rconn(err);
        }
    }
    if (pthread_mutex_init(&nd->mu, NULL) != 0) {
        rconn_sentinel_free(nd->sentinel);
        rconn_cluster_free(nd->cluster);
        free(nd);
        return LOCK_ERR_BACKEND;
    }
    *out = nd;
    return LOCK_OK;
}

/* Returns the slot map of a cluster's node (borrowed; valid until nd is freed), or NULL for
 * another node. This function can't fail. */
rconn_cluster *lock__node_cluster(const struct lock__node *nd) {
    return nd->cluster;
}

/* Closes every idle connection of nd and frees it; no connection may be borrowed.
 * lock__node_free(NULL) is a no-op. This function can't fail. */
void lock__node_free(struct lock__node *nd) {
    if (nd == NULL) return;
    for (int k = 0; k < LOCK__CONN_KINDS; k++) {
        conn_list_free(nd->idle[k]);
        nd->idle[k] = NULL;
    }
    for (size_t i = 0; i < nd->nmasters; i++)
        lock__node_free(nd->masters[i]);
    pthread_mutex_destroy(&nd->mu);
    rconn_sentinel_free(nd->sentinel);
    rconn_cluster_free(nd->cluster);
    free(nd);
}
