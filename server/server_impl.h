/* server_impl.h - what the files of server/ share: request metrics, process metrics, request
 * ids, CORS, the page's files, the event streams, and the server and request state that
 * server_start.c, daemon.c, request.c, respond.c and conn.c work on. Included only by server/ and
 * its tests. */
#ifndef GM_SERVER_SERVER_IMPL_H
#define GM_SERVER_SERVER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "api/api.h"
#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "server/server.h"

#define SERVER__STATUS_MAX 600 /* statuses 0..599 are counted */
#define SERVER__LAT_BUCKETS 14 /* purchase latency buckets, the last unbounded */
#define SERVER__METHODS 8      /* GET HEAD POST PUT DELETE PATCH OPTIONS, then any other */
#define SERVER__OUTCOMES 4     /* purchase outcomes: ok, refused, unavailable, error */

#define SERVER__REALMS 32     /* realms that get their own label; the rest count as "other" */
#define SERVER__REALM_STATUSES 11 /* the statuses a purchase is counted by per realm */

#define SERVER__VERSION "0.9.0" /* market_build_info's version label */

#define SERVER__REQUEST_ID_MAX 64 /* longest X-Request-Id taken from a client */
#define SERVER__REDIS_STALE_MS 10000 /* a scrape probes the store when its last outcome is older */

/* A realm's purchase counters: the first SERVER__REALMS realms seen get a
 * row each (name written, then ready set with release; read after ready). */
typedef struct server__realm_row {
    _Atomic int ready;
    char name[MARKET_REALM_MAX + 1];
    _Atomic uint64_t by_status[SERVER__REALM_STATUSES]; /* see realm_statuses in metrics.c */
} server__realm_row;

/* Counters for GET /metrics; every field is updated with relaxed atomics. */
typedef struct server__metrics {
    /* [route or none][method][status] */
    _Atomic uint64_t requests[API_ROUTES + 1][SERVER__METHODS][SERVER__STATUS_MAX];
    _Atomic uint64_t purchase_bucket[SERVER__OUTCOMES][SERVER__LAT_BUCKETS]; /* not cumulative */
    _Atomic uint64_t purchase_us[SERVER__OUTCOMES], purchase_count[SERVER__OUTCOMES];
    server__realm_row realm[SERVER__REALMS];
    _Atomic int realm_claimed;                                  /* rows handed out so far */
    _Atomic uint64_t realm_other[SERVER__REALM_STATUSES];       /* realms past the table */
    _Atomic int redis_up;        /* the last store outcome: 1 up, 0 down, -1 none yet */
    _Atomic int64_t redis_seen_ms; /* when it was seen (rconn_now_ms()), 0: never */
} server__metrics;

/* What a scrape shows beside the counters; respond.c fills it. -1: unknown. */
typedef struct server__gauges {
    long connections;         /* open HTTP connections */
    long requests_in_flight;  /* requests begun and not completed */
    long purchases_in_flight; /* deferrable writes (purchases, lists, unlists, sale buys)
                                 begun and not completed */
    long queue_depth;         /* orders handed to the market's workers, not yet decided */
    int redis_up;             /* server__metrics.redis_up */
} server__gauges;

/* The process metrics every exporter has, read from /proc/self. -1 (or < 0): unknown. */
typedef struct server__process {
    double cpu_seconds;        /* user + system time */
    double start_time_seconds; /* since the epoch */
    double resident_bytes;
    double virtual_bytes;
    double open_fds;
    double max_fds;
} server__process;

/* metrics.c */
void server__metrics_init(server__metrics *mt);
void server__metrics_count(server__metrics *mt, const char *route, const char *method,
                           const char *realm, int status, int64_t us);
void server__metrics_store_outcome(server__metrics *mt, int up, int64_t now_ms);
int server__metrics_redis_stale(server__metrics *mt, int64_t now_ms);
int server__method_index(const char *method);
const char *server__outcome_name(int status);
char *server__metrics_render(const server__metrics *mt, market *m, const server__gauges *g,
                             const server__process *p, size_t *len);

/* process.c */
int server__proc_stat_parse(const char *stat, long clk_tck, double btime, server__process *out);
int server__proc_statm_parse(const char *statm, long page_size, server__process *out);
int server__proc_btime_parse(const char *stat, double *btime);
void server__process_read(server__process *out);

/* request_id.c */
int server__request_id_valid(const char *id);
void server__request_id_make(char *out, size_t outlen);

/* The market page's static files (web.c). */
#define SERVER__WEB_FILES 3
typedef struct server__web_file {
    const char *path; /* the URL path it is served at ("/" for index.html) */
    const char *type; /* its Content-Type */
    char *body;
    size_t len;
} server__web_file;
typedef struct server__web {
    server__web_file files[SERVER__WEB_FILES];
    int loaded; /* 1: every file read */
} server__web;

int server__web_load(server__web *w, const char *dir, char *why, size_t whylen);
const server__web_file *server__web_find(const server__web *w, const char *url);
void server__web_free(server__web *w);

/* GET /events (events.c). */
#define SERVER__EVENTS_REALMS 16          /* realms followed at once */
#define SERVER__EVENTS_SUBSCRIBERS 1024   /* event streams open at once, at most (and at most a
                                             quarter of --max-connections) */
typedef struct server__events server__events;
typedef struct server__sub server__sub;

server__events *server__events_new(market *m, const server_config *cfg);
int server__events_subscribe(server__events *h, const server_config *cfg, const char *origin,
                             const char *realm, struct MHD_Connection *conn, int *status,
                             const char **why);
void server__events_stop(server__events *h);
void server__events_free(server__events *h);

int server__cors_origin_ok(const char *origin);
const char *server__cors_allow(const server_config *cfg, const char *origin);
int server__cors_add(struct MHD_Response *r, const server_config *cfg, const char *origin,
                     const char *methods);

/* ---- the server and one request ---- */

/* A running server (server_start.c builds it; the other files serve with it). */
struct server {
    server_config cfg;
    lock_client *lock;
    market *market;
    struct MHD_Daemon *daemon;
    pthread_key_t conn_key; /* this thread's own: its market_conn, its spare requests (conn.c) */
    int key_ok;
    int port;
    atomic_long in_flight; /* requests begun and not yet completed */
    int async;             /* deferrable writes suspend their connection instead of their
                              thread */
    atomic_long purchases_in_flight; /* deferrable requests begun, not completed */
    atomic_long queue_depth;         /* orders submitted to the market, not yet decided */
    server__metrics metrics;
    server__web web; /* the market page's files */
    server__events *events; /* GET /events */
    api_auth *auth;        /* player tokens' keys; NULL: --no-auth */
};

/* One request's state, from the raw target (server__on_uri()) to its
 * completion (server__on_completed()). A completed request's state is kept
 * for its thread's next request (conn.c): the head, every field before body,
 * is cleared then; body's buffer is kept, and deferred is filled by
 * api_handle_begin() before it is read. */
typedef struct server__request {
    int started;         /* the access handler has seen it (phase 1 is over) */
    int bad_path;        /* the raw target holds a control byte, or %00-%1F / %7F */
    const char *uri_nul; /* where the raw target's C string ends (compared, never read) */
    size_t len;          /* body bytes kept */
    size_t seen;         /* body bytes received, kept or not */
    int too_big;
    int64_t t0_us;
    /* A write handed to the market (api_deferred_submit()) while its connection is
     * suspended. */
    int pending;                 /* submitted; answered once done is set */
    atomic_int done;             /* set by the market's worker, then the connection resumes */
    struct MHD_Connection *conn;
    api_response head;           /* route and player, for the log line */
    server *srv;                 /* for the queue depth, once submitted */
    int deferrable;              /* a deferrable route (api_route_deferrable()): in
                                    purchases_in_flight */
    char id[SERVER__REQUEST_ID_MAX + 1]; /* X-Request-Id */
    struct server__request *next_spare;  /* on its thread's list of spares (conn.c) */
    /* not cleared when the state is used again: */
    char *body; /* NUL-terminated after len bytes; cap bytes */
    size_t cap;
    api_deferred deferred;
} server__request;

/* log.c */
int64_t server__now_us(void);
void server__log_safe(char *out, size_t outlen, const char *s);
void server__log_text(char *out, size_t outlen, const char *s);

/* conn.c */
int server__conn_key_create(server *s);
market_conn *server__thread_conn(server *s);
server__request *server__request_take(server *s);
void server__request_give(server *s, server__request *rq);
void server__conn_key_delete(server *s);

/* respond.c */
int server__is_preflight(const server *s, struct MHD_Connection *conn, const char *method);
void server__preflight_reply(api_response *resp);
enum MHD_Result server__respond_web(server *s, struct MHD_Connection *conn, const char *method,
                                    const server__request *rq, const server__web_file *f);
enum MHD_Result server__respond_metrics(server *s, struct MHD_Connection *conn,
                                        const char *method, const server__request *rq);
enum MHD_Result server__respond_events(server *s, struct MHD_Connection *conn,
                                       const char *method, const char *url,
                                       const server__request *rq, const char *realm);
enum MHD_Result server__answer(server *s, struct MHD_Connection *conn, const char *method,
                               const char *url, const server__request *rq, api_response *resp);

/* request.c: libmicrohttpd's callbacks */
void *server__on_uri(void *cls, const char *uri, struct MHD_Connection *conn);
enum MHD_Result server__on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                   const char *method, const char *version,
                                   const char *upload_data, size_t *upload_size,
                                   void **con_cls);
void server__on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                          enum MHD_RequestTerminationCode toe);

/* daemon.c */
int server__daemon_start(server *s, char *why, size_t whylen);

#endif /* GM_SERVER_SERVER_IMPL_H */
