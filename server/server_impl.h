/* server_impl.h - what the files of server/ share: request metrics, CORS. Included only by server/. */
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

int server__cors_origin_ok(const char *origin);
const char *server__cors_allow(const server_config *cfg, const char *origin);
int server__cors_add(struct MHD_Response *r, const server_config *cfg, const char *origin,
                     const char *methods);

#endif /* GM_SERVER_SERVER_IMPL_H */
