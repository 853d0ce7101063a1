/* server_impl.h - what the files of server/ share: request metrics. Included only by server/. */
#ifndef GM_SERVER_SERVER_IMPL_H
#define GM_SERVER_SERVER_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "market/market.h"

#define SERVER__STATUS_MAX 600 /* statuses 0..599 are counted */
#define SERVER__LAT_BUCKETS 14 /* purchase latency buckets, the last unbounded */

/* Counters for GET /metrics; every field is updated with relaxed atomics. */
typedef struct server__metrics {
    _Atomic uint64_t requests[API_ROUTES + 1][SERVER__STATUS_MAX]; /* [route or none][status] */
    _Atomic uint64_t purchase_bucket[SERVER__LAT_BUCKETS];         /* not cumulative */
    _Atomic uint64_t purchase_us, purchase_count;
} server__metrics;

void server__metrics_count(server__metrics *mt, const char *route, int status, int64_t us);
char *server__metrics_render(const server__metrics *mt, market *m, size_t *len);

#endif /* GM_SERVER_SERVER_IMPL_H */
