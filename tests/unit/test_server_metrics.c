/* test_server_metrics.c - server/metrics.c without a server or a Redis:
 * requests counted by route and status, the purchase latency histogram
 * (cumulative buckets, sum and count), and the market's counters, in the
 * Prometheus text format. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "server/server_impl.h"

/* Returns the value of the sample line that starts with name (a metric
 * with its labels), or -1 when there is none. */
static long long sample(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == ' ') return atoll(p + n + 1);
    return -1;
}

static void test_metrics_count_and_render(void **state) {
    (void)state;
    int err;
    lock_client *l = lock_local_new(&err);
    market_config cfg = {.redis_timeout_ms = 100, .lock_ttl_ms = 100, .acquire_timeout_ms = 100};
    snprintf(cfg.redis.host, sizeof cfg.redis.host, "127.0.0.1");
    cfg.redis.port = 1;
    market *m = market_new(&cfg, l, &err); /* touches no Redis */
    assert_non_null(m);
    server__metrics *mt = calloc(1, sizeof *mt);
    assert_non_null(mt);

    server__metrics_count(mt, "/purchase", "main", 200, 300);     /* 0.3 ms */
    server__metrics_count(mt, "/purchase", "eu-1", 200, 3000);    /* 3 ms */
    server__metrics_count(mt, "/purchase", "eu-1", 503, 9000000); /* past the last bound */
    server__metrics_count(mt, "/players/{id}", "main", 404, 10);
    server__metrics_count(mt, NULL, "", 404, 10);         /* no route */
    server__metrics_count(mt, "/purchase", "main", 1000, -5); /* odd status and time: counted */

    size_t len = 0;
    char *text = server__metrics_render(mt, m, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    assert_int_equal(sample(text, "market_http_requests_total{route=\"/purchase\",status=\"200\"}"),
                     2);
    assert_int_equal(sample(text, "market_http_requests_total{route=\"/purchase\",status=\"503\"}"),
                     1);
    assert_int_equal(
        sample(text, "market_http_requests_total{route=\"/players/{id}\",status=\"404\"}"), 1);
    assert_int_equal(sample(text, "market_http_requests_total{route=\"none\",status=\"404\"}"), 1);
    assert_int_equal(sample(text, "market_http_requests_total{route=\"/purchase\",status=\"0\"}"),
                     1);
    assert_int_equal(sample(text, "market_http_requests_total{route=\"/market\",status=\"200\"}"),
                     -1); /* nothing counted, nothing shown */
    /* cumulative buckets: 0.3 ms and the odd one under 0.5 ms, 3 ms under 5 ms */
    assert_int_equal(sample(text, "market_purchase_duration_seconds_bucket{le=\"0.0005\"}"), 2);
    assert_int_equal(sample(text, "market_purchase_duration_seconds_bucket{le=\"0.005\"}"), 3);
    assert_int_equal(sample(text, "market_purchase_duration_seconds_bucket{le=\"5\"}"), 3);
    assert_int_equal(sample(text, "market_purchase_duration_seconds_bucket{le=\"+Inf\"}"), 4);
    assert_int_equal(sample(text, "market_purchase_duration_seconds_count"), 4);
    assert_non_null(strstr(text, "market_purchase_duration_seconds_sum 9.003300\n"));
    /* every family has its HELP and TYPE, and the market's counters are there */
    static const char *const families[] = {
        "market_http_requests_total counter",       "market_purchase_duration_seconds histogram",
        "market_lock_wait_seconds histogram",       "market_lock_acquisitions_total counter",
        "market_lock_busy_total counter",           "market_lock_lease_lost_total counter",
        "market_redis_errors_total counter",        "market_purchases_total counter",
        "market_purchases_committed_total counter", "market_batches_total counter",
        "market_txn_aborts_total counter"};
    for (size_t i = 0; i < sizeof families / sizeof *families; i++) {
        char type[96], help[96], name[64];
        snprintf(name, sizeof name, "%s", families[i]);
        *strchr(name, ' ') = '\0';
        snprintf(type, sizeof type, "# TYPE %s\n", families[i]);
        snprintf(help, sizeof help, "# HELP %s ", name);
        assert_non_null(strstr(text, type));
        assert_non_null(strstr(text, help));
    }
    assert_int_equal(sample(text, "market_purchases_total"), 0);
    assert_int_equal(text[len - 1], '\n');
    free(text);
    free(mt);
    market_free(m);
    lock_free(l);
}

/* Purchases are counted by realm: a row for each of the first SERVER__REALMS
 * realms, the rest together without a realm label, so that clients naming
 * ever new realms cannot grow the label set. */
static void test_metrics_realms_bounded(void **state) {
    (void)state;
    int err;
    lock_client *l = lock_local_new(&err);
    market_config cfg = {.redis_timeout_ms = 100, .lock_ttl_ms = 100, .acquire_timeout_ms = 100};
    snprintf(cfg.redis.host, sizeof cfg.redis.host, "127.0.0.1");
    cfg.redis.port = 1;
    market *m = market_new(&cfg, l, &err);
    assert_non_null(m);
    server__metrics *mt = calloc(1, sizeof *mt);
    assert_non_null(mt);
    char realm[16];
    for (int i = 0; i < SERVER__REALMS + 10; i++) {
        snprintf(realm, sizeof realm, "r%d", i);
        server__metrics_count(mt, "/purchase", realm, 200, 10);
        server__metrics_count(mt, "/purchase", realm, i % 2 ? 404 : 418, 10);
    }
    server__metrics_count(mt, "/purchase", "r0", 200, 10);
    server__metrics_count(mt, "/purchase", "bad realm", 200, 10); /* not an id: no label */
    server__metrics_count(mt, "/market", "r1", 200, 10);          /* not a purchase */
    size_t len = 0;
    char *text = server__metrics_render(mt, m, &len);
    assert_non_null(text);
    assert_int_equal(sample(text, "market_realm_purchases_total{realm=\"r0\",status=\"200\"}"),
                     2);
    assert_int_equal(
        sample(text, "market_realm_purchases_total{realm=\"r0\",status=\"other\"}"), 1);
    assert_int_equal(sample(text, "market_realm_purchases_total{realm=\"r1\",status=\"404\"}"),
                     1);
    snprintf(realm, sizeof realm, "r%d", SERVER__REALMS - 1);
    char want[128];
    snprintf(want, sizeof want, "market_realm_purchases_total{realm=\"%s\",status=\"200\"}",
             realm);
    assert_int_equal(sample(text, want), 1);
    snprintf(want, sizeof want, "market_realm_purchases_total{realm=\"r%d\",status=\"200\"}",
             SERVER__REALMS);
    assert_int_equal(sample(text, want), -1); /* past the table */
    assert_int_equal(sample(text, "market_other_realms_purchases_total{status=\"200\"}"), 10);
    assert_int_equal(sample(text, "market_other_realms_purchases_total{status=\"404\"}"), 5);
    assert_int_equal(sample(text, "market_other_realms_purchases_total{status=\"other\"}"), 5);
    assert_non_null(strstr(text, "# TYPE market_realm_purchases_total counter\n"));
    assert_non_null(strstr(text, "# TYPE market_other_realms_purchases_total counter\n"));
    free(text);
    free(mt);
    market_free(m);
    lock_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_count_and_render),
        cmocka_unit_test(test_metrics_realms_bounded),
    };
    return cmocka_run_group_tests_name("server metrics (unit)", tests, NULL, NULL);
}
