/* lock_impl.h - private to lock/ and its tests: the backend ops table and shared helpers.
 *
 * A backend fills one static const struct lock_ops and wraps its state in a
 * lock_client with lock__client_new(). lock_api.c validates every argument once
 * before dispatching, so an op may assume: c, key, keys, out, h and hs are
 * non-NULL, every key is 1..LOCK_KEY_MAX bytes, the keys of a multi call are
 * distinct and number 1..LOCK_MULTI_MAX, a handle's token is LOCK_TOKEN_LEN
 * bytes and its owner a NUL-terminated string, an owner passed in is
 * 1..LOCK_OWNER_MAX bytes, and ttl_ms > 0. A NULL optional slot makes lock_api.c
 * answer LOCK_ERR_UNSUPPORTED (extend, acquire_multi, acquire_owned) or fall
 * back to one release per handle (release_multi); name, acquire, release and
 * destroy are mandatory, and release_owned is with acquire_owned. Handles of
 * reentrant leases (h->owner non-empty) go to release_owned, never to release
 * or release_multi; extend gets both kinds and must honour h->owner.
 *
 * The layers below the two Redis backends are here too, each with its prefix:
 *   lock__script_* (lock_script.c)  the Lua scripts and their SHA-1s, pure;
 *   lock__node_*, lock__conn_* (lock_node.c)  one Redis server: its nodes (a
 *                              cluster's masters too) and pooled connections;
 *   lock__node_calls (lock_call.c)  script calls on several nodes in parallel;
 *   lock__sub_*    (lock_sub.c)    pub/sub waits for a release;
 *   lock__queue_*  (lock_queue.c)  the in-process queue per key;
 *   lock__dist_*   (lock_dist.c)   the engine over N nodes that lock_redis.c
 *                              (N = 1) and lock_redlock.c (N odd) wrap;
 *   lock__redlock_* (lock_dist.c)  the quorum arithmetic, pure functions;
 *   lock__watchdog_* (lock_watchdog.c) the hooks lock.c calls.
 * Below them all is rconn/ (rconn/rconn.h): addresses, connection setup, a Sentinel group's
 * master, a cluster's slot map, the clock.
 */
#ifndef GM_LOCK_LOCK_IMPL_H
#define GM_LOCK_LOCK_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "lock/lock.h"
#include "rconn/rconn.h"

/* ---- constants ---- */

#define LOCK__CLUSTER_NODES_MAX 64 /* masters of a cluster a node keeps a node for */

#define LOCK_BACKOFF_BASE_MS 1u      /* first retry delay before jitter */
#define LOCK_BACKOFF_CAP_MS 50u      /* no retry delay is longer than this */
#define LOCK_WAIT_POLL_FIRST_MS 2u   /* a busy waiter's first poll, doubling from there */
#define LOCK_WAIT_POLL_CAP_MS 50u    /* ... up to this: a silent release is seen this late */
#define LOCK_FENCE_KEY "lock:fences" /* counts acquisitions of every untagged key, per server */
/* the counter of the keys tagged "{t}": "lock:fences:{t}" (lock__fence_key()) */
#define LOCK_FENCE_KEY_MAX (sizeof LOCK_FENCE_KEY + 3 + LOCK_KEY_MAX)
#define LOCK_OWNER_SUFFIX ":owner"       /* "<key>:owner": a reentrant lease's owner and holds */
#define LOCK__CLIENT_ID_LEN (LOCK_TOKEN_LEN / 2) /* a Redis client's id: its tokens' first half */
#define LOCK__WHY_MAX 256 /* the text of one failure's reason (lock_last_error()) */

/* ---- types ---- */

struct lock_ops {
    const char *name; /* short backend name, e.g. "redis" (mandatory) */
    /* Try to take key until wait_ms have passed (0: one try); fill *out on success. */
    int (*acquire)(void *impl, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                   lock_handle *out);
    /* Free h's lease if h's token still holds it. */
    int (*release)(void *impl, const lock_handle *h);
    /* Reset h's lease to ttl_ms from now if h's token still holds it (optional). */
    int (*extend)(void *impl, lock_handle *h, uint32_t ttl_ms);
    /* Free impl and everything it owns (mandatory). */
    void (*destroy)(void *impl);
    /* Take all n keys or none, until wait_ms have passed; fill out[0..n) (optional). */
    int (*acquire_multi)(void *impl, const char *const *keys, size_t n, uint32_t ttl_ms,
                         uint32_t wait_ms, lock_handle *out);
    /* Free every lease of hs[0..n); return the first error (optional). */
    int (*release_multi)(void *impl, const lock_handle *hs, size_t n);
    /* Take key for owner, reentrantly: a hold on the lease owner already has, else a new
     * lease, waiting until wait_ms have passed; fill *out with owner and holds (optional). */
    int (*acquire_owned)(void *impl, const char *key, const char *owner, uint32_t ttl_ms,
                         uint32_t wait_ms, lock_handle *out);
    /* Drop one hold of the reentrant lease h describes if h's token and owner hold it, freeing
     * the lease at zero; *left gets the holds left (0: freed) on success (with acquire_owned). */
    int (*release_owned)(void *impl, const lock_handle *h, uint32_t *left);
};

/* The watchdogs of one client and the thread that renews them (lock_watchdog.c). */
struct lock__wdset {
    pthread_mutex_t mu;         /* guards everything below and every watchdog's fields */
    pthread_cond_t cv;          /* CLOCK_MONOTONIC; new work, stop, a renewal finished */
    pthread_t thread;           /* valid while running */
    int running;                /* the thread was started */
    int quit;                   /* asks the thread to end */
    struct lock_watchdog *list; /* active watchdogs */
};

struct lock_client {
    const struct lock_ops *ops; /* borrowed; static storage */
    void *impl;                 /* owned; freed by ops->destroy */
    struct lock__wdset wd;      /* watchdogs; the thread starts with the first one */
    int has_store;              /* 1: every lease is a key on the one server in store */
    rconn_addr store;           /* see lock_store_addr() */
};

/* ---- module-internal helpers (lock_api.c, lock_check.c) ---- */

lock_client *lock__client_new(const struct lock_ops *ops, void *impl, int *err);
int lock__token_new(char out[LOCK_TOKEN_LEN + 1]);
uint32_t lock__backoff_ms(unsigned attempt, uint64_t *rng_state);
uint32_t lock__wait_poll_ms(unsigned step, uint64_t *rng_state);
void lock__sleep_ms(uint32_t ms);
void lock__fence_key(const char *key, char out[LOCK_FENCE_KEY_MAX]);
uint32_t lock__key_hash(const char *key);
int lock__key_ok(const char *key);
int lock__handle_ok(const lock_handle *h);
int lock__from_rconn(int rc);

/* ---- why a call failed: the calling thread's reason (lock_check.c, lock_last_error()) ---- */

void lock__why_begin(void);
void lock__why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *lock__why_now(void);
int lock__why_end(int rc);

/* ---- watchdog hooks (lock_watchdog.c) ---- */

int lock__watchdog_init(struct lock__wdset *set);
void lock__watchdog_forget(lock_client *c, const lock_handle *h);
void lock__watchdog_shutdown(lock_client *c);

/* ---- Redlock arithmetic: pure functions, time passed in (lock_dist.c) ---- */

size_t lock__redlock_quorum(size_t n);
int64_t lock__redlock_drift_ms(uint32_t ttl_ms);
int64_t lock__redlock_validity_ms(uint32_t ttl_ms, int64_t started_ms, int64_t now_ms,
                                  int64_t drift_ms);
int lock__redlock_node_timeout_ms(uint32_t ttl_ms, int timeout_ms);
int lock__redlock_verdict(size_t n, size_t granted, size_t failed, int64_t validity_ms);
int lock__redlock_owner_verdict(size_t n, size_t yes, size_t failed, int64_t validity_ms);

struct redisReply;

/* ---- the Lua scripts (lock_script.c) ---- */

enum lock__script {
    LOCK__SCRIPT_ACQUIRE, /* KEYS: n locks, n fences; ARGV: token, ttl[, client id: take
                             over the client's own given-up leases] -> fences | pttl */
    LOCK__SCRIPT_RELEASE, /* KEYS: n locks; ARGV: n tokens (or one) -> n of 0/1 */
    LOCK__SCRIPT_EXTEND,  /* KEYS: lock; ARGV: token, ttl -> 0/1 */
    LOCK__SCRIPT_RAISE,   /* KEYS: n fences; ARGV: n values -> 1 (raise to at least) */
    /* reentrant leases: the lock key holds the token, "<key>:owner" a hash
     * {owner, token, holds, fence} with the same expiry */
    LOCK__SCRIPT_ACQUIRE_OWNED, /* KEYS: lock, owner rec, fences; ARGV: owner, token, ttl[,
                                   client id] -> {fence, holds, token} | pttl */
    LOCK__SCRIPT_RELEASE_OWNED, /* KEYS: lock, owner rec; ARGV: owner[, token] -> holds left
                                   | -1 (without token: the hold just added by owner) */
    LOCK__SCRIPT_EXTEND_OWNED,  /* KEYS: lock, owner rec; ARGV: owner, token, ttl -> 0/1 */
    LOCK__SCRIPT_RAISE_OWNED,   /* KEYS: fences, owner rec; ARGV: fence, token -> 1 */
    LOCK__SCRIPT_COUNT
};

const char *lock__script_text(enum lock__script s);
const char *lock__script_sha(enum lock__script s);
void lock__sha1_hex(const char *data, size_t len, char out[41]); /* lock_sha1.c */

/* ---- one Redis server: nodes and pooled connections (lock_node.c) ---- */

#define LOCK__CALL_KEYS_MAX (2 * LOCK_MULTI_MAX)
#define LOCK__CALL_ARGS_MAX LOCK_MULTI_MAX
/* the longest command: EVALSHA sha nkeys keys... args... */
#define LOCK__ARGV_MAX (3 + LOCK__CALL_KEYS_MAX + LOCK__CALL_ARGS_MAX)
#define LOCK__AT_MAX (RCONN_HOST_MAX + 16) /* "host:port" */

enum lock__conn_kind { LOCK__CONN_CMD, LOCK__CONN_SUB, LOCK__CONN_KINDS };

/* What lock__conn_return() does with a connection given back. */
enum lock__conn_fate {
    LOCK__CONN_HEALTHY, /* back to the free list */
    LOCK__CONN_DROP,    /* close it alone (an error reply) */
    LOCK__CONN_BROKEN   /* close it, bump the generation, empty the free lists */
};

struct redisContext;

/* A connection to a node's server, lent to one call or one subscription at a time. */
struct lock__conn {
    struct redisContext *ctx; /* owned; connected */
    unsigned long gen;        /* node generation when it was made */
    uint64_t sgen;            /* Sentinel group: the group's generation when it was made */
    int stale;                /* answered -READONLY, -LOADING or -MASTERDOWN: not a master */
    int owed;                 /* AUTH/SELECT answers still to come */
    int draining;             /* subscriber: an UNSUBSCRIBE went out, its answers may follow */
    char at[LOCK__AT_MAX];    /* "host:port" of its server, for failure reasons */
    struct lock__conn *next;  /* free list */
};

/* One Redis server, Sentinel group or cluster, with its idle connections. */
struct lock__node {
    rconn_addr addr;          /* copy of the caller's */
    rconn_sentinel *sentinel; /* owned; NULL unless addr is a Sentinel group */
    rconn_cluster *cluster;   /* owned; NULL unless addr is a cluster (routes, never connects) */
    struct lock__node *masters[LOCK__CLUSTER_NODES_MAX]; /* a cluster's node per master: owned,
                                                           made on first use, guarded by mu */
    size_t nmasters;
    rconn_cluster *cluster_of; /* a master's node: its cluster (borrowed), told of failures */
    int timeout_ms;            /* socket send timeout; the default for calls */
    pthread_mutex_t mu;        /* guards idle, n_idle, gen, masters, nmasters */
    struct lock__conn *idle[LOCK__CONN_KINDS];
    size_t n_idle[LOCK__CONN_KINDS];
    unsigned long gen; /* bumped on every socket failure */
};

int lock__node_new(const rconn_addr *addr, int timeout_ms, struct lock__node **out);
void lock__node_free(struct lock__node *nd);
rconn_cluster *lock__node_cluster(const struct lock__node *nd);
struct lock__node *lock__node_at(struct lock__node *nd, const char *host, int port);
struct lock__node *lock__node_route(struct lock__node *nd, const char *key, char *why,
                                    size_t whylen);
int lock__conn_borrow(struct lock__node *nd, enum lock__conn_kind kind, int connect_ms,
                      struct lock__conn **out, char *why, size_t whylen);
void lock__conn_return(struct lock__node *nd, struct lock__conn *cn, enum lock__conn_kind kind,
                       enum lock__conn_fate fate);
int lock__conn_usable(struct lock__conn *cn, enum lock__conn_kind kind);
int lock__conn_append(struct lock__conn *cn, int argc, const char **argv);
int lock__conn_flush(struct lock__conn *cn);
int lock__conn_read(struct lock__conn *cn);
int lock__conn_next(struct lock__conn *cn, struct redisReply **r);
const char *lock__conn_errstr(const struct lock__conn *cn);
int lock__reply_is_ok(const struct redisReply *r);
int lock__reply_not_master(const struct redisReply *r);

struct pollfd;
/* lock__poll_until()'s two hooks: list the sockets to wait on, handle one that is ready. */
typedef size_t (*lock__poll_fill_fn)(void *ud, struct pollfd *pfd, size_t *idx);
typedef int (*lock__poll_ready_fn)(void *ud, size_t i);
int lock__poll_until(int64_t deadline_ms, lock__poll_fill_fn fill, lock__poll_ready_fn ready,
                     void *ud);

/* ---- script calls on several nodes in parallel (lock_call.c) ---- */

enum lock__call_state {
    LOCK__CALL_UNSENT, /* never reached the server: it cannot have run */
    LOCK__CALL_LOST,   /* sent, no answer in time: it may have run */
    LOCK__CALL_ERROR,  /* an error reply (or a malformed one): it may have run partly */
    LOCK__CALL_INT,    /* answered an integer: ival */
    LOCK__CALL_ARRAY   /* answered an array of integers: vals[0..nvals) */
};

/* One script call on one node; lock__node_calls() runs a batch of them in parallel. */
struct lock__call {
    /* in */
    struct lock__node *node;
    enum lock__script script;
    size_t nkeys, nargs;
    const char *keys[LOCK__CALL_KEYS_MAX]; /* borrowed for the call */
    const char *args[LOCK__CALL_ARGS_MAX]; /* borrowed for the call */
    size_t undo_nkeys; /* >0: if the answer never comes, send undo_script(keys[0..undo_nkeys),
                          args[0..undo_nargs)) behind it on the same connection */
    size_t undo_nargs;
    enum lock__script undo_script;
    /* out */
    enum lock__call_state state;
    long long ival;
    size_t nvals;
    long long vals[LOCK_MULTI_MAX]; /* a string element of the array (a token) counts 0 here */
    char text[LOCK_TOKEN_LEN + 1];  /* ... and is here ("" when none) */
    int retry; /* a cluster refused it for now (-TRYAGAIN, -CLUSTERDOWN, a second redirect):
                  it did not run (state UNSENT); worth another try in a moment */
    char why[LOCK__WHY_MAX]; /* state UNSENT, LOST or ERROR: what hiredis or the server said,
                                "host:port: text" */
    /* private to lock_call.c */
    struct lock__conn *conn;
    int phase;
    struct lock__node *routed_from; /* the cluster node node was routed from, or NULL */
    int asking;                     /* send ASKING before the script (an -ASK being followed) */
    int redirected;                 /* redirect holds a -MOVED/-ASK answer */
    int skip_ok;                    /* +OK answers of ASKING still to skip before the script's */
    rconn_cluster_redirect redirect;
};

void lock__node_calls(struct lock__call *calls, size_t n, int timeout_ms);

/* ---- pub/sub waits (lock_sub.c) ---- */

/* A pub/sub wait on some channels across some nodes. */
struct lock__sub {
    size_t n;                                        /* nodes */
    struct lock__conn *conn[LOCK_REDLOCK_NODES_MAX]; /* NULL where not subscribed */
    struct lock__node *node[LOCK_REDLOCK_NODES_MAX];
    size_t nch;
    const char *ch[LOCK_MULTI_MAX]; /* borrowed until lock__sub_end() */
};

size_t lock__sub_begin(struct lock__sub *s, struct lock__node *const *nodes, size_t n,
                       const char *const *channels, size_t nch, int timeout_ms);
int lock__sub_wait(struct lock__sub *s, int64_t until_ms);
void lock__sub_end(struct lock__sub *s);

/* ---- the in-process queue per key (lock_queue.c) ---- */

struct lock__queue;

struct lock__queue *lock__queue_new(int *err);
void lock__queue_free(struct lock__queue *q);
int lock__queue_enter(struct lock__queue *q, const char *const *keys, size_t n,
                      int64_t deadline_ms);
void lock__queue_hold(struct lock__queue *q, const char *const *keys, size_t n, const char *token,
                      int64_t valid_until_ms);
void lock__queue_leave(struct lock__queue *q, const char *const *keys, size_t n);
void lock__queue_release(struct lock__queue *q, const char *key, const char *token);
void lock__queue_extend(struct lock__queue *q, const char *key, const char *token,
                        int64_t valid_until_ms);
int lock__queue_enter_owned(struct lock__queue *q, const char *key, const char *owner,
                            int64_t deadline_ms, int *joined);
void lock__queue_hold_owned(struct lock__queue *q, const char *key, const char *token,
                            const char *owner, int64_t valid_until_ms, int joined);
void lock__queue_drop_hold(struct lock__queue *q, const char *key, const char *token);

/* ---- the engine over N Redis nodes (lock_dist.c) ---- */

struct lock__dist;

struct lock__dist *lock__dist_new(const rconn_addr *addrs, size_t n, int timeout_ms, int redlock,
                                  int *err);
void lock__dist_free(struct lock__dist *d);
int lock__dist_acquire(struct lock__dist *d, const char *const *keys, size_t n, const char *owner,
                       uint32_t ttl_ms, uint32_t wait_ms, lock_handle *out);
int lock__dist_release(struct lock__dist *d, const lock_handle *hs, size_t n);
int lock__dist_release_owned(struct lock__dist *d, const lock_handle *h, uint32_t *left);
int lock__dist_extend(struct lock__dist *d, lock_handle *h, uint32_t ttl_ms);
rconn_cluster *lock__dist_cluster(const struct lock__dist *d);
lock_client *lock__dist_client_new(const rconn_addr *addrs, size_t n, int timeout_ms, int redlock,
                                   int *err);

#endif /* GM_LOCK_LOCK_IMPL_H */
