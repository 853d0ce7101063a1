/* metrics.c - GET /metrics: request counters, latency and lock histograms, gauges, Prometheus text.
 *
 * Counters are plain relaxed atomics bumped on the request path; rendering
 * reads them without a lock, so one scrape is not a single snapshot (each
 * number is exact, their sums may lag by requests in flight). The gauges
 * and the process metrics are read by the caller (respond.c, process.c) and
 * handed in, so rendering is a pure function of its arguments.
 */
#include "server/server_impl.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

static const int64_t lat_bounds_us[SERVER__LAT_BUCKETS - 1] = {
    500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000};

/* The statuses a purchase is counted by per realm; the last column is any other. */
static const int realm_statuses[SERVER__REALM_STATUSES - 1] = {200, 400, 401, 402, 403,
                                                               404, 409, 500, 503, 504};

static size_t realm_status_col(int status) {
    size_t k = 0;
    while (k < SERVER__REALM_STATUSES - 1 && realm_statuses[k] != status) k++;
    return k;
}

/* The row of realm's counters: its own among the first SERVER__REALMS
 * realms seen, else NULL ("other"). Rows are claimed once and never given
 * back, so the label set stays bounded however many realms clients name. */
static server__realm_row *realm_row(server__metrics *mt, const char *realm) {
    int n = atomic_load_explicit(&mt->realm_claimed, memory_order_acquire);
    for (int i = 0; i < n && i < SERVER__REALMS; i++) {
        server__realm_row *row = &mt->realm[i];
        if (!atomic_load_explicit(&row->ready, memory_order_acquire)) continue; /* being named */
        if (strcmp(row->name, realm) == 0) return row;
    }
    if (n >= SERVER__REALMS) return NULL;
    int i = atomic_fetch_add_explicit(&mt->realm_claimed, 1, memory_order_acq_rel);
    if (i >= SERVER__REALMS) return NULL;
    /* Two threads meeting a new realm at once may both claim a row for it:
     * the rows are summed by name when rendered. */
    server__realm_row *row = &mt->realm[i];
    snprintf(row->name, sizeof row->name, "%s", realm);
    atomic_store_explicit(&row->ready, 1, memory_order_release);
    return row;
}

static const char *const method_names[SERVER__METHODS] = {"GET",    "HEAD",  "POST",    "PUT",
                                                          "DELETE", "PATCH", "OPTIONS", "other"};

/* Returns the column of method in the request counters: its index in
 * method_names, or the last ("other") for any other or NULL. Can't fail. */
int server__method_index(const char *method) {
    int i = 0;
    while (i < SERVER__METHODS - 1 && (!method || strcmp(method, method_names[i]) != 0)) i++;
    return i;
}

static const char *const outcome_names[SERVER__OUTCOMES] = {"ok", "refused", "unavailable",
                                                            "error"};

static int outcome_index(int status) {
    if (status >= 200 && status < 400) return 0;
    if (status >= 400 && status < 500) return 1;
    if (status == 503 || status == 504) return 2;
    return 3;
}

/* Returns the outcome label of a purchase answered with status: "ok"
 * (2xx, 3xx), "refused" (4xx: the client's fault or the market's rules),
 * "unavailable" (503, 504: the store, the lock or a replica failed; retry)
 * or "error" (any other). The string is static. Can't fail. */
const char *server__outcome_name(int status) { return outcome_names[outcome_index(status)]; }

/* Zeroes mt and marks the store's state unknown. Can't fail. */
void server__metrics_init(server__metrics *mt) {
    memset(mt, 0, sizeof *mt);
    atomic_store(&mt->redis_up, -1);
}

/* Records the outcome of an operation that reached the store (or failed
 * to): up 1 or 0, seen at now_ms. Can't fail. */
void server__metrics_store_outcome(server__metrics *mt, int up, int64_t now_ms) {
    atomic_store_explicit(&mt->redis_up, up ? 1 : 0, memory_order_relaxed);
    atomic_store_explicit(&mt->redis_seen_ms, now_ms, memory_order_relaxed);
}

/* Returns 1 when the last store outcome is unknown or older than
 * SERVER__REDIS_STALE_MS at now_ms, and claims the probe (the time is moved
 * on, so concurrent scrapes probe once); else 0. Can't fail. */
int server__metrics_redis_stale(server__metrics *mt, int64_t now_ms) {
    int64_t seen = atomic_load_explicit(&mt->redis_seen_ms, memory_order_relaxed);
    if (seen && now_ms - seen < SERVER__REDIS_STALE_MS) return 0;
    return atomic_compare_exchange_strong(&mt->redis_seen_ms, &seen, now_ms);
}

/* Counts one answered request: route as api_route_name() gave it (NULL for
 * none), its method, the realm it named ("" or NULL: none), its status and,
 * for purchases, its latency by outcome and its realm's count. Can't fail. */
void server__metrics_count(server__metrics *mt, const char *route, const char *method,
                           const char *realm, int status, int64_t us) {
    int r = api_route_index(route);
    size_t row = r < 0 ? API_ROUTES : (size_t)r;
    if (status < 0 || status >= SERVER__STATUS_MAX) status = 0;
    atomic_fetch_add_explicit(&mt->requests[row][server__method_index(method)][status], 1,
                              memory_order_relaxed);
    if (r != 0) return; /* route 0 is /purchase */
    if (realm && market_id_valid(realm)) {
        server__realm_row *rr = realm_row(mt, realm);
        _Atomic uint64_t *c = rr ? rr->by_status : mt->realm_other;
        atomic_fetch_add_explicit(&c[realm_status_col(status)], 1, memory_order_relaxed);
    }
    size_t b = 0;
    int o = outcome_index(status);
    while (b < SERVER__LAT_BUCKETS - 1 && us > lat_bounds_us[b]) b++;
    atomic_fetch_add_explicit(&mt->purchase_bucket[o][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->purchase_us[o], (uint64_t)(us < 0 ? 0 : us),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->purchase_count[o], 1, memory_order_relaxed);
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

/* The samples of one histogram series; label is "" or `name="value",`
 * (with its trailing comma). */
static void histogram_series(struct text *t, const char *name, const char *label,
                             const int64_t *bounds, size_t nb, const uint64_t *counts,
                             uint64_t sum_us, uint64_t count) {
    uint64_t cum = 0;
    for (size_t i = 0; i < nb; i++) {
        cum += counts[i];
        put(t, "%s_bucket{%sle=\"%g\"} %llu\n", name, label, (double)bounds[i] / 1e6,
            (unsigned long long)cum);
    }
    cum += counts[nb];
    put(t, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, label, (unsigned long long)cum);
    size_t ll = strlen(label);
    if (ll) /* the label without its trailing comma */
        put(t, "%s_sum{%.*s} %.6f\n%s_count{%.*s} %llu\n", name, (int)(ll - 1), label,
            (double)sum_us / 1e6, name, (int)(ll - 1), label, (unsigned long long)count);
    else
        put(t, "%s_sum %.6f\n%s_count %llu\n", name, (double)sum_us / 1e6, name,
            (unsigned long long)count);
}

static void histogram(struct text *t, const char *name, const char *help, const int64_t *bounds,
                      size_t nb, const uint64_t *counts, uint64_t sum_us, uint64_t count) {
    put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    histogram_series(t, name, "", bounds, nb, counts, sum_us, count);
}

/* A gauge with one sample; v < 0 (unknown) leaves the sample out. */
static void gauge(struct text *t, const char *name, const char *help, double v) {
    put(t, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    if (v >= 0) put(t, "%s %.17g\n", name, v);
}

static void process_lines(struct text *t, const server__process *p) {
    put(t, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
           "# TYPE process_cpu_seconds_total counter\n");
    if (p->cpu_seconds >= 0) put(t, "process_cpu_seconds_total %.2f\n", p->cpu_seconds);
    gauge(t, "process_resident_memory_bytes", "Resident memory size in bytes.", p->resident_bytes);
    gauge(t, "process_virtual_memory_bytes", "Virtual memory size in bytes.", p->virtual_bytes);
    gauge(t, "process_open_fds", "Number of open file descriptors.", p->open_fds);
    gauge(t, "process_max_fds", "Maximum number of open file descriptors.", p->max_fds);
    put(t, "# HELP process_start_time_seconds Start time of the process since unix epoch in "
           "seconds.\n# TYPE process_start_time_seconds gauge\n");
    if (p->start_time_seconds >= 0)
        put(t, "process_start_time_seconds %.2f\n", p->start_time_seconds);
}

static void gauge_lines(struct text *t, const server__gauges *g) {
    put(t, "# HELP market_build_info The server's version (always 1).\n"
           "# TYPE market_build_info gauge\n"
           "market_build_info{version=\"%s\",microhttpd=\"%s\"} 1\n",
        SERVER__VERSION, MHD_get_version());
    gauge(t, "market_http_connections", "Open HTTP connections.", (double)g->connections);
    gauge(t, "market_http_requests_in_flight", "HTTP requests begun and not yet answered.",
          (double)g->requests_in_flight);
    gauge(t, "market_purchases_in_flight",
          "Writes served as market orders (POST /purchase, /list, /unlist, sale buys) begun "
          "and not yet answered.",
          (double)g->purchases_in_flight);
    gauge(t, "market_purchase_queue_depth",
          "Orders (purchases, lists, unlists, sale buys) handed to the market's workers and "
          "not yet decided.",
          (double)g->queue_depth);
    gauge(t, "market_redis_up",
          "1 when the store's last outcome (a request that reached it, or a scrape's probe) was "
          "good, 0 when it failed.",
          (double)g->redis_up);
}

static void counter(struct text *t, const char *name, const char *help, uint64_t v) {
    put(t, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
        (unsigned long long)v);
}

/* One sample of name{<realm label>code=...} (realm NULL: no realm label). */
static void realm_sample(struct text *t, const char *name, const char *realm, size_t col,
                         uint64_t v) {
    if (!v) return;
    char st[16];
    if (col < SERVER__REALM_STATUSES - 1)
        snprintf(st, sizeof st, "%d", realm_statuses[col]);
    else
        snprintf(st, sizeof st, "other");
    put(t, "%s{%s%s%scode=\"%s\"} %llu\n", name, realm ? "realm=\"" : "", realm ? realm : "",
        realm ? "\"," : "", st, (unsigned long long)v);
}

static void realm_lines(struct text *t, server__metrics *mt) {
    put(t, "# HELP market_realm_purchases_total POST /purchase answers by realm and code "
           "(the first %d realms seen).\n"
           "# TYPE market_realm_purchases_total counter\n",
        SERVER__REALMS);
    int n = atomic_load_explicit(&mt->realm_claimed, memory_order_acquire);
    if (n > SERVER__REALMS) n = SERVER__REALMS;
    for (int i = 0; i < n; i++) {
        const server__realm_row *row = &mt->realm[i];
        int dup = 0; /* a realm two threads named at once: summed into its first row */
        if (!atomic_load_explicit(&row->ready, memory_order_acquire)) continue;
        for (int j = 0; j < i && !dup; j++)
            dup = atomic_load_explicit(&mt->realm[j].ready, memory_order_acquire) &&
                  strcmp(mt->realm[j].name, row->name) == 0;
        if (dup) continue;
        for (size_t col = 0; col < SERVER__REALM_STATUSES; col++) {
            uint64_t v = 0;
            for (int j = i; j < n; j++)
                if (atomic_load_explicit(&mt->realm[j].ready, memory_order_acquire) &&
                    strcmp(mt->realm[j].name, row->name) == 0)
                    v += atomic_load_explicit(&mt->realm[j].by_status[col], memory_order_relaxed);
            realm_sample(t, "market_realm_purchases_total", row->name, col, v);
        }
    }
    put(t, "# HELP market_other_realms_purchases_total POST /purchase answers of the realms "
           "past the first %d, by code.\n"
           "# TYPE market_other_realms_purchases_total counter\n",
        SERVER__REALMS);
    for (size_t col = 0; col < SERVER__REALM_STATUSES; col++)
        realm_sample(t, "market_other_realms_purchases_total", NULL, col,
                     atomic_load_explicit(&mt->realm_other[col], memory_order_relaxed));
}

/* market_http_requests_total: every non-zero [route][method][status] counter. */
static void request_lines(struct text *t, server__metrics *mt) {
    put(t, "# HELP market_http_requests_total HTTP requests answered, by route, method and "
           "code.\n"
           "# TYPE market_http_requests_total counter\n");
    for (size_t r = 0; r <= API_ROUTES; r++) {
        const char *name = r < API_ROUTES ? api_route_name((int)r) : "none";
        for (int me = 0; me < SERVER__METHODS; me++)
            for (int st = 0; st < SERVER__STATUS_MAX; st++) {
                uint64_t v =
                    atomic_load_explicit(&mt->requests[r][me][st], memory_order_relaxed);
                if (v)
                    put(t,
                        "market_http_requests_total{route=\"%s\",method=\"%s\",code=\"%d\"} "
                        "%llu\n",
                        name, method_names[me], st, (unsigned long long)v);
            }
    }
}

/* market_purchase_duration_seconds: a histogram series per outcome. */
static void purchase_duration_lines(struct text *t, server__metrics *mt) {
    put(t, "# HELP market_purchase_duration_seconds Time to answer POST /purchase, from its "
           "first byte to its response, by outcome.\n"
           "# TYPE market_purchase_duration_seconds histogram\n");
    for (int o = 0; o < SERVER__OUTCOMES; o++) {
        uint64_t lat[SERVER__LAT_BUCKETS];
        for (size_t i = 0; i < SERVER__LAT_BUCKETS; i++)
            lat[i] = atomic_load_explicit(&mt->purchase_bucket[o][i], memory_order_relaxed);
        char label[32];
        snprintf(label, sizeof label, "outcome=\"%s\",", outcome_names[o]);
        histogram_series(t, "market_purchase_duration_seconds", label, lat_bounds_us,
                         SERVER__LAT_BUCKETS - 1, lat, atomic_load(&mt->purchase_us[o]),
                         atomic_load(&mt->purchase_count[o]));
    }
}

/* The market's counters (market_stats), in the order they are shown. */
static const struct {
    const char *name, *help;
    size_t off; /* of the uint64_t in market_stats */
} market_counters[] = {
    {"market_lock_acquisitions_total", "Locks acquired.", offsetof(market_stats, lock_acquired)},
    {"market_lock_busy_total", "Lock wait budgets spent (503 market_busy).",
     offsetof(market_stats, lock_busy)},
    {"market_lock_lease_lost_total", "Commits refused because the lease had lapsed.",
     offsetof(market_stats, lease_lost)},
    {"market_redis_errors_total", "Operations failed by Redis errors or outages.",
     offsetof(market_stats, store_errors)},
    {"market_purchases_total", "Purchases asked for.", offsetof(market_stats, purchases)},
    {"market_purchases_committed_total", "Purchases committed.", offsetof(market_stats, purchased)},
    {"market_batches_total", "Batches of purchases served.", offsetof(market_stats, batches)},
    {"market_sale_buys_total", "Buys from flash sales asked for.",
     offsetof(market_stats, sale_buys)},
    {"market_sale_buys_committed_total", "Buys from flash sales committed.",
     offsetof(market_stats, sale_bought)},
    {"market_sale_units_total", "Units flash sales sold.", offsetof(market_stats, sale_units)},
    {"market_sale_batches_total", "Batches of flash-sale buys served.",
     offsetof(market_stats, sale_batches)},
    {"market_txn_aborts_total", "MULTI/EXEC aborted by a changed watched key.",
     offsetof(market_stats, txn_aborts)},
    {"market_not_replicated_total",
     "Commits fewer replicas confirmed than --min-replicas-ack (503 not_replicated).",
     offsetof(market_stats, not_replicated)},
    {"market_failovers_total", "Times the Sentinels named another master (redis-sentinel:// only).",
     offsetof(market_stats, failovers)},
    {"market_cluster_moved_total", "-MOVED redirects the store followed (redis-cluster:// only).",
     offsetof(market_stats, cluster_moved)},
    {"market_cluster_ask_total",
     "-ASK answers the store met: a slot being migrated (redis-cluster:// only).",
     offsetof(market_stats, cluster_ask)},
    {"market_cluster_tryagain_total",
     "-TRYAGAIN answers: a slot's keys split by a migration (redis-cluster:// only).",
     offsetof(market_stats, cluster_tryagain)},
    {"market_cluster_down_total", "-CLUSTERDOWN answers (503; redis-cluster:// only).",
     offsetof(market_stats, cluster_down)},
    {"market_cluster_slot_map_refreshes_total",
     "Slot maps fetched from the cluster (redis-cluster:// only).",
     offsetof(market_stats, cluster_refreshes)},
    {"market_listings_expired_total", "Listings this server's sweeper took back at their end.",
     offsetof(market_stats, expired)},
    {"market_sweeps_total", "Realm sweeps this server's sweeper made under a realm's lease.",
     offsetof(market_stats, sweeps)},
};

/* The market's lock wait histogram, its counters and its master now. */
static void market_lines(struct text *t, market *m) {
    market_stats s;
    market_stats_get(m, &s);
    static const int64_t wait_bounds[MARKET_WAIT_BUCKETS - 1] = {MARKET_WAIT_BUCKETS_US};
    histogram(t, "market_lock_wait_seconds", "Time spent acquiring a market lock, per attempt.",
              wait_bounds, MARKET_WAIT_BUCKETS - 1, s.lock_wait_bucket, s.lock_wait_us,
              s.lock_waits);
    for (size_t i = 0; i < sizeof market_counters / sizeof market_counters[0]; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&s + market_counters[i].off, sizeof v);
        counter(t, market_counters[i].name, market_counters[i].help, v);
    }
    static const int64_t late_bounds[MARKET_LATE_BUCKETS - 1] = {MARKET_LATE_BUCKETS_MS};
    int64_t late_us[MARKET_LATE_BUCKETS - 1];
    for (size_t i = 0; i < MARKET_LATE_BUCKETS - 1; i++)
        late_us[i] = late_bounds[i] * 1000;
    histogram(t, "market_settlement_lag_seconds",
              "How late this server's sweeper settled each ending it settled, by the store's "
              "clock.",
              late_us, MARKET_LATE_BUCKETS - 1, s.late_bucket, s.late_ms * 1000, s.settled);
    char master[RCONN_HOST_MAX + 8];
    int known = market_master(m, master, sizeof master) == MARKET_OK;
    put(t, "# HELP market_redis_master_info The store's master now (1), as an address label.\n"
           "# TYPE market_redis_master_info gauge\n"
           "market_redis_master_info{address=\"%s\"} %d\n",
        known ? master : "", known);
}

/* Renders every metric in the Prometheus text format: mt's counters, the
 * market's, the gauges g and the process metrics p (both borrowed). Returns
 * a new malloc'd text (caller frees) with its length in *len, or NULL on
 * out-of-memory. */
char *server__metrics_render(const server__metrics *mt, market *m, const server__gauges *g,
                             const server__process *p, size_t *len) {
    struct text t = {malloc(16384), 0, 16384, 0};
    if (!t.buf) return NULL;
    server__metrics *mm = (server__metrics *)mt; /* C11 atomic loads want non-const */

    process_lines(&t, p);
    gauge_lines(&t, g);
    request_lines(&t, mm);
    realm_lines(&t, mm);
    purchase_duration_lines(&t, mm);
    market_lines(&t, m);
    if (t.failed) {
        free(t.buf);
        return NULL;
    }
    *len = t.len;
    return t.buf;
}
