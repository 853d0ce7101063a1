/* metrics.c - GET /metrics: request counters, latency and lock histograms, Prometheus text.
 *
 * Counters are plain relaxed atomics bumped on the request path; rendering
 * reads them without a lock, so one scrape is not a single snapshot (each
 * number is exact, their sums may lag by requests in flight).
 */
#include "server/server_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t lat_bounds_us[SERVER__LAT_BUCKETS - 1] = {
    500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000};

/* Counts one answered request: route as api_route_name() gave it (NULL for
 * none), its status and, for purchases, its latency. Can't fail. */
void server__metrics_count(server__metrics *mt, const char *route, int status, int64_t us) {
    int r = api_route_index(route);
    size_t row = r < 0 ? API_ROUTES : (size_t)r;
    if (status < 0 || status >= SERVER__STATUS_MAX) status = 0;
    atomic_fetch_add_explicit(&mt->requests[row][status], 1, memory_order_relaxed);
    if (r != 0) return; /* route 0 is /purchase */
    size_t b = 0;
    while (b < SERVER__LAT_BUCKETS - 1 && us > lat_bounds_us[b]) b++;
    atomic_fetch_add_explicit(&mt->purchase_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->purchase_us, (uint64_t)(us < 0 ? 0 : us), memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->purchase_count, 1, memory_order_relaxed);
}

/* A growing text buffer; on out-of-memory it stops growing and fails. */
struct text {
    char *buf;
    size_t len, cap;
    int failed;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...) {
    if (t->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->failed = 1;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
}

static void histogram(struct text *t, const char *name, const char *help, const int64_t *bounds,
                      size_t nb, const uint64_t *counts, uint64_t sum_us, uint64_t count) {
    put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t i = 0; i < nb; i++) {
        cum += counts[i];
        put(t, "%s_bucket{le=\"%g\"} %llu\n", name, (double)bounds[i] / 1e6,
            (unsigned long long)cum);
    }
    cum += counts[nb];
    put(t, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    put(t, "%s_sum %.6f\n%s_count %llu\n", name, (double)sum_us / 1e6, name,
        (unsigned long long)count);
}

static void counter(struct text *t, const char *name, const char *help, uint64_t v) {
    put(t, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
        (unsigned long long)v);
}

/* Renders every metric in the Prometheus text format. Returns a new
 * malloc'd text (caller frees) with its length in *len, or NULL on
 * out-of-memory. */
char *server__metrics_render(const server__metrics *mt, market *m, size_t *len) {
    struct text t = {malloc(8192), 0, 8192, 0};
    if (!t.buf) return NULL;
    server__metrics *mm = (server__metrics *)mt; /* C11 atomic loads want non-const */

    put(&t, "# HELP market_http_requests_total HTTP requests answered, by route and status.\n"
            "# TYPE market_http_requests_total counter\n");
    for (size_t r = 0; r <= API_ROUTES; r++) {
        const char *name = r < API_ROUTES ? api_route_name((int)r) : "none";
        for (int st = 0; st < SERVER__STATUS_MAX; st++) {
            uint64_t v = atomic_load_explicit(&mm->requests[r][st], memory_order_relaxed);
            if (v)
                put(&t, "market_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n", name, st,
                    (unsigned long long)v);
        }
    }
    uint64_t lat[SERVER__LAT_BUCKETS];
    for (size_t i = 0; i < SERVER__LAT_BUCKETS; i++)
        lat[i] = atomic_load_explicit(&mm->purchase_bucket[i], memory_order_relaxed);
    histogram(&t, "market_purchase_duration_seconds",
              "Time to answer POST /purchase, from its first byte to its response.",
              lat_bounds_us, SERVER__LAT_BUCKETS - 1, lat, atomic_load(&mm->purchase_us),
              atomic_load(&mm->purchase_count));

    market_stats s;
    market_stats_get(m, &s);
    static const int64_t wait_bounds[MARKET_WAIT_BUCKETS - 1] = {MARKET_WAIT_BUCKETS_US};
    histogram(&t, "market_lock_wait_seconds", "Time spent acquiring a market lock, per attempt.",
              wait_bounds, MARKET_WAIT_BUCKETS - 1, s.lock_wait_bucket, s.lock_wait_us,
              s.lock_waits);
    counter(&t, "market_lock_acquisitions_total", "Locks acquired.", s.lock_acquired);
    counter(&t, "market_lock_busy_total", "Lock wait budgets spent (503 market_busy).",
            s.lock_busy);
    counter(&t, "market_lock_lease_lost_total", "Commits refused because the lease had lapsed.",
            s.lease_lost);
    counter(&t, "market_redis_errors_total", "Operations failed by Redis errors or outages.",
            s.store_errors);
    counter(&t, "market_purchases_total", "Purchases asked for.", s.purchases);
    counter(&t, "market_purchases_committed_total", "Purchases committed.", s.purchased);
    counter(&t, "market_batches_total", "Batches of purchases served (market and item strategies).",
            s.batches);
    counter(&t, "market_txn_aborts_total", "MULTI/EXEC aborted by a changed watched key.",
            s.txn_aborts);
    counter(&t, "market_not_replicated_total",
            "Commits fewer replicas confirmed than --min-replicas-ack (503 not_replicated).",
            s.not_replicated);
    counter(&t, "market_failovers_total",
            "Times the Sentinels named another master (redis-sentinel:// only).", s.failovers);
    char master[LOCK_HOST_MAX + 8];
    int known = market_master(m, master, sizeof master) == MARKET_OK;
    put(&t, "# HELP market_redis_master_info The store's master now (1), as an address label.\n"
            "# TYPE market_redis_master_info gauge\n"
            "market_redis_master_info{address=\"%s\"} %d\n",
        known ? master : "", known);
    if (t.failed) {
        free(t.buf);
        return NULL;
    }
    *len = t.len;
    return t.buf;
}
