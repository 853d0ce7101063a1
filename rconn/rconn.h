/* rconn.h - where a Redis is and how to reach it: URLs, connection setup, Sentinel, Cluster.
 *
 * The module below lock/ and market/ that knows Redis topology and nothing of locks or
 * markets: the URL forms (redis://, redis-sentinel://, redis-cluster://) and their parsed
 * address; connecting with a timeout and setting a connection up (AUTH, SELECT, ROLE); a
 * Sentinel group's master, asked of the Sentinels and followed through failovers; a Redis
 * Cluster's slot map with its redirects (-MOVED, -ASK); the RESP encoder of a pipeline; and
 * the monotonic clock everyone above times with.
 *
 * Errors are values: each function returns an RCONN_* code (0 success, negative failure)
 * and, where the cause is worth telling, writes it as a sentence into a caller's why buffer
 * (what hiredis or the server said, naming the server: "127.0.0.1:6379: Connection
 * refused"). Nothing here prints or logs.
 *
 * liblock carries this module's objects and `make install` puts this header next to lock.h
 * (<prefix>/include/gamemarket/rconn/rconn.h), since lock.h's constructors take an
 * rconn_addr. Every function is safe to call from any thread.
 */
#ifndef GM_RCONN_RCONN_H
#define GM_RCONN_RCONN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Marks the public API: liblock.so is built with -fvisibility=hidden and exports only these
 * (rconn_*) and lock.h's (lock_*) names. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define RCONN_API __attribute__((visibility("default")))
#else
#define RCONN_API
#endif

/* ---- error codes: 0 is success, every error is negative ---- */

#define RCONN_ERRNO_MAP(X)                                                                         \
    X(OK, 0, "success")                                                                            \
    X(ERR_INVALID, -1, "invalid argument")                                                         \
    X(ERR_UNAVAILABLE, -2, "redis unavailable")                                                    \
    X(ERR_NOMEM, -3, "out of memory")

enum rconn_err {
#define RCONN_ERR_ENUM(name, val, msg) RCONN_##name = (val),
    RCONN_ERRNO_MAP(RCONN_ERR_ENUM)
#undef RCONN_ERR_ENUM
};

/* Returns a static message for an rconn_err code, or "unknown rconn error". This function
 * can't fail. */
RCONN_API const char *rconn_strerror(int err);

/* ---- addresses: the URL forms ----
 *
 * Where a Redis server is, parsed by rconn_addr_parse() from
 *   redis://[user:pass@]host[:port][/db]                                   one server, or
 *   redis-sentinel://[user:pass@]host[:port][,host[:port]...]/name[/db]    a Sentinel group:
 * the master that the Redis Sentinels at those addresses (port 26379 when not given) name
 * "name" (rconn_sentinel below), or
 *   redis-cluster://[user:pass@]host[:port][,host[:port]...][/0]           a Redis Cluster:
 * the cluster those nodes (port 6379 when not given; any of its nodes will do) belong to
 * (rconn_cluster below); its db can only be 0. In the last two forms host and port stay
 * empty (an rconn_sentinel or an rconn_cluster resolves them) and the addresses are in
 * seeds; user and pass are the data servers' credentials (also sent to a Sentinel that asks
 * for a password). rediss:// (TLS) is refused: hiredis 0.14 has no TLS. */
#define RCONN_HOST_MAX 255
#define RCONN_CRED_MAX 255
#define RCONN_SEEDS_MAX 8        /* most Sentinels of a group, or seed nodes of a cluster */
#define RCONN_MASTER_NAME_MAX 63 /* longest master name: [A-Za-z0-9._-] */
#define RCONN_AT_MAX (RCONN_HOST_MAX + 8) /* "host:port" with its NUL */

typedef struct rconn_addr {
    char host[RCONN_HOST_MAX + 1];
    int port;
    char user[RCONN_CRED_MAX + 1]; /* empty: no ACL user */
    char pass[RCONN_CRED_MAX + 1]; /* empty: no AUTH */
    int db;
    char master_name[RCONN_MASTER_NAME_MAX + 1]; /* "": one server or a cluster; else a group */
    int cluster;                                 /* 1: a Redis Cluster (db 0, no master_name) */
    int nseeds; /* 1..RCONN_SEEDS_MAX in a Sentinel group or a cluster, else 0 */
    struct rconn_at {
        char host[RCONN_HOST_MAX + 1];
        int port;
    } seeds[RCONN_SEEDS_MAX]; /* a group's Sentinels, or some nodes of a cluster */
} rconn_addr;

RCONN_API int rconn_addr_parse(const char *url, rconn_addr *out);
RCONN_API int rconn_addr_parse_list(const char *list, rconn_addr *out, size_t max, size_t *n);
RCONN_API int rconn_addr_same(const rconn_addr *a, const rconn_addr *b);
RCONN_API int rconn_addr_valid(const rconn_addr *addr);

/* ---- the monotonic clock ---- */

RCONN_API int64_t rconn_now_ms(void);
RCONN_API int rconn_cond_init_monotonic(pthread_cond_t *cv);
RCONN_API void rconn_timespec_at(int64_t ms, struct timespec *ts);

/* ---- one connection: connect, set up, judge replies ----
 *
 * hiredis types appear only as incomplete structs: this header includes no hiredis. */
struct redisContext;
struct redisReply;

/* What rconn_setup() sends on a new connection, in this order. */
#define RCONN_SETUP_AUTH 1u   /* AUTH [user] pass, when addr has a password */
#define RCONN_SETUP_SELECT 2u /* SELECT db, when addr's db is not 0 */
#define RCONN_SETUP_ROLE 4u   /* ROLE, which must say "master" */

RCONN_API int rconn_connect(const char *host, int port, int connect_ms, int io_ms,
                            struct redisContext **out, char *why, size_t whylen);
RCONN_API int rconn_setup(struct redisContext *ctx, const rconn_addr *addr, unsigned what,
                          char *why, size_t whylen);
RCONN_API int rconn_auth_argv(const rconn_addr *addr, const char *argv[3]);
RCONN_API int rconn_reply_ok(const struct redisReply *r);
RCONN_API int rconn_reply_not_master(const struct redisReply *r);
RCONN_API int rconn_role_master(const struct redisReply *r, char *why, size_t whylen);
RCONN_API size_t rconn_replicas_in_sync(const char *info, long max_lag_s, size_t *connected);
RCONN_API const char *rconn_errstr(const struct redisContext *ctx);

/* ---- the RESP encoder ---- */

RCONN_API int rconn_resp_append(char **buf, size_t *cap, size_t *len, int argc,
                                const char *const *argv);

/* ---- Redis Sentinel: find the master, follow a failover ----
 *
 * An rconn_sentinel serves one Sentinel group (an rconn_addr with a master_name). lock/'s
 * Redis backends make one for each Sentinel group they are given; a program that talks to
 * the same data (the market's store) makes its own. rconn_sentinel_master() answers the
 * master the Sentinels name now: it asks them in turn until a majority of them answered
 * (SENTINEL MASTER <name>) and takes the answer of the highest config epoch, so one
 * Sentinel that has not heard of a failover yet cannot send writes to the old master. The
 * answer is kept for later calls until something says it may be stale:
 *   - a connection made to it failed, found it is not a master (ROLE), or was refused
 *     with -READONLY, -LOADING or -MASTERDOWN: its user calls rconn_sentinel_suspect();
 *   - a Sentinel announced +switch-master (a background thread stays subscribed to every
 *     Sentinel, and asks all of them each second, so a switch it missed shows up as a new
 *     address).
 * Each of these bumps the group's generation (rconn_sentinel_generation()); a connection
 * remembers the generation it was made under and is closed, not reused, once it changed.
 * So nothing is sent to an address after the Sentinels stop naming it, except what was
 * already in flight. The check that the address really is a master (ROLE) is the
 * connection's: rconn_sentinel_master() only says where the Sentinels point. */
typedef struct rconn_sentinel rconn_sentinel;

/* What the Sentinels say a write on the group's master must reach to survive a failover
 * (rconn_sentinel_view_get()). */
typedef struct rconn_sentinel_view {
    uint64_t generation; /* the group's generation now (rconn_sentinel_generation()) */
    int known;           /* 1: what follows describes the master of that generation */
    unsigned replicas;   /* its replicas that a Sentinel could promote now: no Sentinel that
                          * answered flags them s_down or disconnected, they answered a ping
                          * in the last 5 s, the Sentinel has their INFO, their priority is
                          * not 0 and their link to the master has not been down for ten
                          * down-after periods; a former master that still reports itself
                          * master is not counted */
    int failover;        /* 1: a failover is under way: a Sentinel flags the master
                          * failover_in_progress or o_down, or announced a step of one that
                          * no refresh has answered since */
    uint64_t alarms;     /* failover steps announced by any Sentinel since the start */
} rconn_sentinel_view;

RCONN_API rconn_sentinel *rconn_sentinel_new(const rconn_addr *group, int timeout_ms, int *err);
RCONN_API int rconn_sentinel_master(rconn_sentinel *s, rconn_addr *master, uint64_t *generation,
                                    char *why, size_t whylen);
RCONN_API uint64_t rconn_sentinel_generation(rconn_sentinel *s);
RCONN_API void rconn_sentinel_suspect(rconn_sentinel *s, uint64_t generation);
RCONN_API uint64_t rconn_sentinel_failovers(rconn_sentinel *s);
RCONN_API void rconn_sentinel_view_get(rconn_sentinel *s, rconn_sentinel_view *v);
RCONN_API void rconn_sentinel_free(rconn_sentinel *s);

/* ---- Redis Cluster: key slots, redirects, the slot map ----
 *
 * An rconn_cluster is the slot map of one cluster, shared by every thread of a program: it
 * says which master serves a slot (rconn_cluster_master), learns from the cluster's
 * redirects (rconn_cluster_redirected: a -MOVED patches the map at once; an -ASK, a slot
 * half-way through a migration, is only counted) and fetches the map again, rate-limited,
 * once something says it may be behind (a MOVED, a failed connection, -CLUSTERDOWN). What
 * a caller does with -ASK, -TRYAGAIN and -CLUSTERDOWN (follow once, wait, give up) is its
 * own: lock/ and market/ each say. */
#define RCONN_CLUSTER_SLOTS 16384    /* hash slots of a Redis Cluster */
#define RCONN_CLUSTER_REFRESH_MS 100 /* a stale slot map is fetched again at most this often */

RCONN_API unsigned rconn_key_slot(const char *key, size_t len);
RCONN_API int rconn_key_tagged(const char *key);

/* A -MOVED or -ASK error reply, as rconn_cluster_redirect_parse() reads it. */
typedef struct rconn_cluster_redirect {
    int ask;                       /* 0: -MOVED (the slot lives there now), 1: -ASK (migrating:
                                      ASKING, once) */
    unsigned slot;                 /* 0..16383 */
    char host[RCONN_HOST_MAX + 1]; /* "" = the host the command was sent to */
    int port;                      /* 1..65535 */
} rconn_cluster_redirect;

RCONN_API int rconn_cluster_redirect_parse(const char *err, size_t len,
                                           rconn_cluster_redirect *out);

typedef struct rconn_cluster rconn_cluster;
typedef struct rconn_cluster_stats {
    uint64_t moved;     /* -MOVED redirects reported */
    uint64_t ask;       /* -ASK redirects reported */
    uint64_t refreshes; /* slot maps fetched from the cluster */
} rconn_cluster_stats;

RCONN_API rconn_cluster *rconn_cluster_new(const rconn_addr *cluster, int timeout_ms, int *err);
RCONN_API int rconn_cluster_master(rconn_cluster *c, unsigned slot, rconn_addr *master, char *why,
                                   size_t whylen);
RCONN_API int rconn_cluster_master_slots(rconn_cluster *c, unsigned *slots, size_t max, char *why,
                                         size_t whylen);
RCONN_API void rconn_cluster_redirected(rconn_cluster *c, const rconn_cluster_redirect *r);
RCONN_API void rconn_cluster_stale(rconn_cluster *c);
RCONN_API void rconn_cluster_stats_get(rconn_cluster *c, rconn_cluster_stats *out);
RCONN_API void rconn_cluster_free(rconn_cluster *c);

#endif /* GM_RCONN_RCONN_H */
