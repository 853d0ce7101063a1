/* server.h - the HTTP front of the market: configuration, start, graceful stop.
 *
 * server/ owns HTTP. It runs a libmicrohttpd daemon (a pool of event loops, or
 * a thread per connection), accumulates request bodies (capped at
 * API_BODY_MAX), hands each request to api/ (a purchase to the market's
 * worker, its connection suspended meanwhile), and gives every thread its
 * own Redis connection (market_conn), reconnected after errors. It owns the
 * lock client and the market built from the configuration, and is the only
 * module that logs.
 */
#ifndef GM_SERVER_SERVER_H
#define GM_SERVER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#define SERVER_ERRNO_MAP(X)                                                     \
    X(OK, 0, "success")                                                         \
    X(ERR_INVALID, -1, "invalid configuration")                                 \
    X(ERR_LISTEN, -2, "cannot listen on the address")                           \
    X(ERR_BACKEND, -3, "cannot set up the lock or the store")                   \
    X(ERR_NOMEM, -4, "out of memory")

enum server_err {
#define SERVER_ERR_ENUM(name, val, msg) SERVER_##name = (val),
    SERVER_ERRNO_MAP(SERVER_ERR_ENUM)
#undef SERVER_ERR_ENUM
};

#define SERVER_CORS_MAX 16 /* --cors-origin: origins at most */
#define SERVER_CORS_ORIGIN_MAX 256 /* bytes of one origin, with its NUL */

enum server_log_level { SERVER_LOG_ERROR, SERVER_LOG_WARN, SERVER_LOG_INFO, SERVER_LOG_DEBUG };

typedef struct server_config {
    char listen[300];            /* host:port or [v6]:port; port 0 picks a free one */
    char redis[2600];            /* redis://[user:pass@]host[:port][/db] or redis-sentinel://... */
    char lock[16];               /* lock backend: "redis", "redlock" or "local" */
    char lock_redis[8192];       /* redlock: the masters' URLs, comma-separated; redis: one
                                    URL when the lock lives elsewhere than the store */
    unsigned min_replicas_ack;   /* > 0: answer a commit only when that many replicas have it */
    int replica_ack_timeout_ms;  /* WAIT's timeout (0: half of redis_timeout_ms) */
    char strategy[16];           /* "market", "item" or "optimistic" */
    unsigned batch_max;          /* market strategy: most purchases per lock hold */
    unsigned workers;            /* lock strategies: threads serving purchases (realms) */
    uint32_t lock_ttl_ms;        /* lease of the market lock */
    uint32_t acquire_timeout_ms; /* wait budget for the market lock */
    uint64_t trade_history;      /* trades kept per realm, about */
    uint64_t trade_index;        /* trades kept in each player's index, about */
    int redis_timeout_ms;        /* connect and command timeout */
    unsigned threads;            /* HTTP event-loop threads; 0: a thread per connection */
    unsigned max_connections;    /* open connections at once */
    unsigned connection_timeout_s; /* idle connections are closed after this */
    int log_level;               /* enum server_log_level */
    char log_file[4096];         /* "": log on stderr; else append there, reopened on SIGHUP */
    uint32_t test_stall_ms;      /* test hook: sleep between read and commit */
    void (*test_events_read)(void *arg); /* test hook: GET /events' follower calls it,
                                    with test_events_arg, after each poll's read */
    void *test_events_arg;
    char auth_secret[256];       /* HS256 key of player tokens without a kid; empty and no
                                    auth_keys need no_auth */
    char auth_keys[8192];        /* --auth-key specs, one a line: KID:hs256:SECRET,
                                    KID:rs256:PEM-FILE or KID:es256:PEM-FILE */
    char auth_audience[256];     /* "": tokens' aud is not checked */
    unsigned auth_leeway_s;      /* clock skew allowed on a token's exp, iat and nbf */
    int no_auth;                 /* serve without authentication (tests, demos) */
    char admin_secret[256];      /* HMAC key of the admin token (POST /sales); empty: the
                                    admin routes answer 403 admin_disabled. Checked even
                                    with no_auth */
    int no_price_history;        /* trades write no price history (GET
                                    /items/{item}/history) */
    uint32_t sweep_interval_ms;  /* the sweeper looks for endings this often (0: none runs) */
    uint32_t sweep_lease_ms;     /* its lease on a realm's sweep */
    int trade_parties_public;    /* every reader sees trades' buyers and sellers (GET
                                    /trades, /items/{item}/trades, /events); 0: only the
                                    parties and the admin */
    unsigned per_ip_connections; /* open connections per client IP (0: no limit) */
    size_t connection_memory;    /* bytes of buffer per connection */
    int reuse_port;              /* share the listen address with other processes (SO_REUSEPORT) */
    char cors_origins[SERVER_CORS_MAX][SERVER_CORS_ORIGIN_MAX]; /* browser origins allowed
                                    (CORS), or "*": any; none: no CORS headers */
    unsigned n_cors;
    char web_dir[4096];          /* the market page's files (GET /); "" or missing: no page */
    int help;                    /* --help was given: print server_usage() instead of serving */
} server_config;

typedef struct server server;

void server_config_defaults(server_config *cfg);
int server_config_parse(server_config *cfg, int argc, char **argv, char *why, size_t whylen);
void server_usage(const char *prog);
server *server_start(const server_config *cfg, int *err, char *why, size_t whylen);
int server_port(const server *s);
void server_stop(server *s);
void server_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void server_log_set_level(int level);
int server_log_on(int level);
int server_log_reopen(const char *path, char *why, size_t whylen);

#endif /* GM_SERVER_SERVER_H */
