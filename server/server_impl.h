/* server_impl.h - what the files of server/ share: request metrics, CORS, the page's files,
 * the event streams. Included only by server/. */
#ifndef GM_SERVER_SERVER_IMPL_H
#define GM_SERVER_SERVER_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "market/market.h"
#include "server/server.h"

struct MHD_Response;

#define SERVER__STATUS_MAX 600 /* statuses 0..599 are counted */
#define SERVER__LAT_BUCKETS 14 /* purchase latency buckets, the last unbounded */

#define SERVER__REALMS 32     /* realms that get their own label; the rest count as "other" */
#define SERVER__REALM_STATUSES 11 /* the statuses a purchase is counted by per realm */

/* A realm's purchase counters: the first SERVER__REALMS realms seen get a
 * row each (name written, then ready set with release; read after ready). */
typedef struct server__realm_row {
    _Atomic int ready;
    char name[MARKET_REALM_MAX + 1];
    _Atomic uint64_t by_status[SERVER__REALM_STATUSES]; /* see realm_statuses in metrics.c */
} server__realm_row;

/* Counters for GET /metrics; every field is updated with relaxed atomics. */
typedef struct server__metrics {
    _Atomic uint64_t requests[API_ROUTES + 1][SERVER__STATUS_MAX]; /* [route or none][status] */
    _Atomic uint64_t purchase_bucket[SERVER__LAT_BUCKETS];         /* not cumulative */
    _Atomic uint64_t purchase_us, purchase_count;
    server__realm_row realm[SERVER__REALMS];
    _Atomic int realm_claimed;                                  /* rows handed out so far */
    _Atomic uint64_t realm_other[SERVER__REALM_STATUSES];       /* realms past the table */
} server__metrics;

void server__metrics_count(server__metrics *mt, const char *route, const char *realm, int status,
                           int64_t us);
char *server__metrics_render(const server__metrics *mt, market *m, size_t *len);

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
#define SERVER__EVENTS_SUBSCRIBERS 1024   /* event streams open at once */
struct MHD_Connection;
typedef struct server__events server__events;
typedef struct server__sub server__sub;

server__events *server__events_new(market *m, int suspend);
int server__events_subscribe(server__events *h, const server_config *cfg, const char *origin,
                             const char *realm, struct MHD_Connection *conn, int *status,
                             const char **why);
void server__events_stop(server__events *h);
void server__events_free(server__events *h);

int server__cors_origin_ok(const char *origin);
const char *server__cors_allow(const server_config *cfg, const char *origin);
int server__cors_add(struct MHD_Response *r, const server_config *cfg, const char *origin,
                     const char *methods);

#endif /* GM_SERVER_SERVER_IMPL_H */
