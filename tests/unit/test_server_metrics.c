/* test_server_metrics.c - server/metrics.c, process.c and request_id.c without a server or a
 * Redis: requests counted by route, method and code, the purchase latency histogram by
 * outcome (cumulative buckets, sum and count), the gauges and process metrics, and the
 * market's counters, in the Prometheus text format; /proc parsing on fixture strings;
 * request id validation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "server/server_impl.h"

static const server__gauges no_gauges = {-1, -1, -1, -1, -1};
static const server__process no_process = {-1, -1, -1, -1, -1, -1};

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
    server__metrics *mt = malloc(sizeof *mt);
    assert_non_null(mt);
    server__metrics_init(mt);

    server__metrics_count(mt, "/purchase", "POST", "main", 200, 300);     /* 0.3 ms */
    server__metrics_count(mt, "/purchase", "POST", "eu-1", 200, 3000);    /* 3 ms */
    server__metrics_count(mt, "/purchase", "POST", "eu-1", 503, 9000000); /* past the last bound */
    server__metrics_count(mt, "/purchase", "POST", "eu-1", 409, 700);
    server__metrics_count(mt, "/players/{id}", "GET", "main", 404, 10);
    server__metrics_count(mt, NULL, "BREW", "", 404, 10);          /* no route, odd method */
    server__metrics_count(mt, "/purchase", NULL, "main", 1000, -5); /* odd status and time */

    size_t len = 0;
    char *text = server__metrics_render(mt, m, &no_gauges, &no_process, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    assert_int_equal(
        sample(text, "market_http_requests_total{route=\"/purchase\",method=\"POST\",code=\"200\"}"),
        2);
    assert_int_equal(
        sample(text, "market_http_requests_total{route=\"/purchase\",method=\"POST\",code=\"503\"}"),
        1);
    assert_int_equal(sample(text, "market_http_requests_total{route=\"/players/{id}\",method="
                                  "\"GET\",code=\"404\"}"),
                     1);
    assert_int_equal(
        sample(text, "market_http_requests_total{route=\"none\",method=\"other\",code=\"404\"}"),
        1);
    assert_int_equal(
        sample(text, "market_http_requests_total{route=\"/purchase\",method=\"other\",code=\"0\"}"),
        1);
    assert_int_equal(
        sample(text, "market_http_requests_total{route=\"/market\",method=\"GET\",code=\"200\"}"),
        -1); /* nothing counted, nothing shown */
    /* by outcome, cumulative buckets: ok: 0.3 ms under 0.5 ms, 3 ms under 5 ms */
    assert_int_equal(
        sample(text, "market_purchase_duration_seconds_bucket{outcome=\"ok\",le=\"0.0005\"}"), 1);
    assert_int_equal(
        sample(text, "market_purchase_duration_seconds_bucket{outcome=\"ok\",le=\"0.005\"}"), 2);
    assert_int_equal(
        sample(text, "market_purchase_duration_seconds_bucket{outcome=\"ok\",le=\"+Inf\"}"), 2);
    assert_int_equal(sample(text, "market_purchase_duration_seconds_count{outcome=\"ok\"}"), 2);
    assert_non_null(strstr(text, "market_purchase_duration_seconds_sum{outcome=\"ok\"} 0.003300\n"));
    /* the 503 is told apart from the refusal and from the odd status */
    assert_int_equal(sample(text, "market_purchase_duration_seconds_bucket{outcome=\"unavailable\","
                                  "le=\"5\"}"),
                     0);
    assert_int_equal(sample(text, "market_purchase_duration_seconds_bucket{outcome=\"unavailable\","
                                  "le=\"+Inf\"}"),
                     1);
    assert_int_equal(sample(text, "market_purchase_duration_seconds_count{outcome=\"refused\"}"),
                     1);
    assert_int_equal(sample(text, "market_purchase_duration_seconds_count{outcome=\"error\"}"), 1);
    assert_int_equal(
        sample(text, "market_purchase_duration_seconds_bucket{outcome=\"error\",le=\"0.0005\"}"), 1);
    const char *first = strstr(text, "# TYPE market_purchase_duration_seconds histogram\n");
    assert_non_null(first); /* one TYPE line for the four series */
    assert_null(strstr(first + 1, "# TYPE market_purchase_duration_seconds histogram\n"));
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
    /* unknown gauges and process metrics: TYPE lines, no samples */
    assert_non_null(strstr(text, "# TYPE market_redis_up gauge\n"));
    assert_int_equal(sample(text, "market_redis_up"), -1);
    assert_int_equal(sample(text, "process_open_fds"), -1);
    assert_non_null(strstr(text, "market_build_info{version=\"" SERVER__VERSION "\",microhttpd=\""));
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
    server__metrics *mt = malloc(sizeof *mt);
    assert_non_null(mt);
    server__metrics_init(mt);
    char realm[16];
    for (int i = 0; i < SERVER__REALMS + 10; i++) {
        snprintf(realm, sizeof realm, "r%d", i);
        server__metrics_count(mt, "/purchase", "POST", realm, 200, 10);
        server__metrics_count(mt, "/purchase", "POST", realm, i % 2 ? 404 : 418, 10);
    }
    server__metrics_count(mt, "/purchase", "POST", "r0", 200, 10);
    server__metrics_count(mt, "/purchase", "POST", "bad realm", 200, 10); /* not an id: no label */
    server__metrics_count(mt, "/market", "GET", "r1", 200, 10);          /* not a purchase */
    size_t len = 0;
    char *text = server__metrics_render(mt, m, &no_gauges, &no_process, &len);
    assert_non_null(text);
    assert_int_equal(sample(text, "market_realm_purchases_total{realm=\"r0\",code=\"200\"}"),
                     2);
    assert_int_equal(
        sample(text, "market_realm_purchases_total{realm=\"r0\",code=\"other\"}"), 1);
    assert_int_equal(sample(text, "market_realm_purchases_total{realm=\"r1\",code=\"404\"}"),
                     1);
    snprintf(realm, sizeof realm, "r%d", SERVER__REALMS - 1);
    char want[128];
    snprintf(want, sizeof want, "market_realm_purchases_total{realm=\"%s\",code=\"200\"}",
             realm);
    assert_int_equal(sample(text, want), 1);
    snprintf(want, sizeof want, "market_realm_purchases_total{realm=\"r%d\",code=\"200\"}",
             SERVER__REALMS);
    assert_int_equal(sample(text, want), -1); /* past the table */
    assert_int_equal(sample(text, "market_other_realms_purchases_total{code=\"200\"}"), 10);
    assert_int_equal(sample(text, "market_other_realms_purchases_total{code=\"404\"}"), 5);
    assert_int_equal(sample(text, "market_other_realms_purchases_total{code=\"other\"}"), 5);
    assert_non_null(strstr(text, "# TYPE market_realm_purchases_total counter\n"));
    assert_non_null(strstr(text, "# TYPE market_other_realms_purchases_total counter\n"));
    free(text);
    free(mt);
    market_free(m);
    lock_free(l);
}

/* Gauges and process metrics as given, with their types; the store's
 * state from the last outcome, and a probe claimed once while stale. */
static void test_metrics_gauges_process_and_redis_up(void **state) {
    (void)state;
    int err;
    lock_client *l = lock_local_new(&err);
    market_config cfg = {.redis_timeout_ms = 100, .lock_ttl_ms = 100, .acquire_timeout_ms = 100};
    snprintf(cfg.redis.host, sizeof cfg.redis.host, "127.0.0.1");
    cfg.redis.port = 1;
    market *m = market_new(&cfg, l, &err);
    assert_non_null(m);
    server__metrics *mt = malloc(sizeof *mt);
    assert_non_null(mt);
    server__metrics_init(mt);
    assert_int_equal(atomic_load(&mt->redis_up), -1);
    assert_int_equal(server__metrics_redis_stale(mt, 1000), 1); /* never seen: probe */
    assert_int_equal(server__metrics_redis_stale(mt, 1001), 0); /* claimed */
    server__metrics_store_outcome(mt, 0, 2000);
    assert_int_equal(server__metrics_redis_stale(mt, 2000 + SERVER__REDIS_STALE_MS - 1), 0);
    assert_int_equal(server__metrics_redis_stale(mt, 2000 + SERVER__REDIS_STALE_MS), 1);
    server__gauges g = {7, 3, 2, 1, atomic_load(&mt->redis_up)};
    server__process p = {12.5, 1700000000.25, 4096.0 * 1000, 8192.0 * 1000, 9, 1024};
    size_t len = 0;
    char *text = server__metrics_render(mt, m, &g, &p, &len);
    assert_non_null(text);
    static const char *const want[] = {
        "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.50\n",
        "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 4096000\n",
        "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes 8192000\n",
        "# TYPE process_open_fds gauge\nprocess_open_fds 9\n",
        "# TYPE process_max_fds gauge\nprocess_max_fds 1024\n",
        "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1700000000.25\n",
        "# TYPE market_http_connections gauge\nmarket_http_connections 7\n",
        "# TYPE market_http_requests_in_flight gauge\nmarket_http_requests_in_flight 3\n",
        "# TYPE market_purchases_in_flight gauge\nmarket_purchases_in_flight 2\n",
        "# TYPE market_purchase_queue_depth gauge\nmarket_purchase_queue_depth 1\n",
        "# TYPE market_redis_up gauge\nmarket_redis_up 0\n",
        "# TYPE market_build_info gauge\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        if (!strstr(text, want[i])) fprintf(stderr, "missing: %s\n%s", want[i], text);
        assert_non_null(strstr(text, want[i]));
    }
    free(text);
    free(mt);
    market_free(m);
    lock_free(l);
}

static void test_metrics_method_and_outcome_names(void **state) {
    (void)state;
    assert_int_equal(server__method_index("GET"), 0);
    assert_int_equal(server__method_index("POST"), 2);
    assert_int_equal(server__method_index("OPTIONS"), 6);
    assert_int_equal(server__method_index("get"), SERVER__METHODS - 1); /* methods are exact */
    assert_int_equal(server__method_index(NULL), SERVER__METHODS - 1);
    assert_string_equal(server__outcome_name(200), "ok");
    assert_string_equal(server__outcome_name(201), "ok");
    assert_string_equal(server__outcome_name(402), "refused");
    assert_string_equal(server__outcome_name(409), "refused");
    assert_string_equal(server__outcome_name(503), "unavailable");
    assert_string_equal(server__outcome_name(504), "unavailable");
    assert_string_equal(server__outcome_name(500), "error");
    assert_string_equal(server__outcome_name(0), "error");
}

/* /proc/self/stat as Linux writes it, with a command name that holds a
 * space and parentheses: fields are counted from the last ')'. */
static void test_process_stat_parse_fixture(void **state) {
    (void)state;
    static const char stat[] =
        "4242 (market (x) srv) S 1 4242 4242 0 -1 4194560 1052 0 0 0 250 150 0 0 20 0 5 0 "
        "123400 734003200 2154 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";
    server__process p = {-1, -1, -1, -1, -1, -1};
    assert_int_equal(server__proc_stat_parse(stat, 100, 1700000000.0, &p), 0);
    assert_true(p.cpu_seconds > 3.999 && p.cpu_seconds < 4.001); /* (250 + 150) / 100 */
    assert_true(p.start_time_seconds > 1700001233.999 && p.start_time_seconds < 1700001234.001);
    server__process q = {-1, -1, -1, -1, -1, -1};
    assert_int_equal(server__proc_stat_parse(stat, 100, -1, &q), 0); /* no boot time */
    assert_true(q.start_time_seconds < 0);
    assert_int_equal(server__proc_stat_parse("4242 (srv) S 1 2 3", 100, 0, &q), -1); /* short */
    assert_int_equal(server__proc_stat_parse("no name here", 100, 0, &q), -1);
    assert_int_equal(server__proc_stat_parse(NULL, 100, 0, &q), -1);
    assert_int_equal(server__proc_stat_parse(stat, 0, 0, &q), -1);

    assert_int_equal(server__proc_statm_parse("179200 2154 1500 300 0 25000 0\n", 4096, &p), 0);
    assert_true(p.virtual_bytes == 179200.0 * 4096 && p.resident_bytes == 2154.0 * 4096);
    assert_int_equal(server__proc_statm_parse("x y", 4096, &p), -1);

    double btime = -1;
    assert_int_equal(server__proc_btime_parse("cpu  1 2 3\nintr 5 6\nctxt 9\nbtime 1700000000\n"
                                              "processes 77\n",
                                              &btime),
                     0);
    assert_true(btime == 1700000000.0);
    assert_int_equal(server__proc_btime_parse("cpu 1\nbtimex 5\n", &btime), -1);

    server__process live; /* this process, from the real /proc */
    server__process_read(&live);
    assert_true(live.cpu_seconds >= 0);
    assert_true(live.resident_bytes > 0);
    assert_true(live.open_fds >= 3);
    assert_true(live.start_time_seconds > 1e9);
}

static void test_request_id_valid_and_made(void **state) {
    (void)state;
    assert_true(server__request_id_valid("abc-123_x.y:z/+="));
    assert_true(server__request_id_valid(
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")); /* 64 */
    assert_false(server__request_id_valid(
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0")); /* 65 */
    assert_false(server__request_id_valid(NULL));
    assert_false(server__request_id_valid(""));
    assert_false(server__request_id_valid("a b"));
    assert_false(server__request_id_valid("a\"b"));
    assert_false(server__request_id_valid("a\\b"));
    assert_false(server__request_id_valid("a\nb"));
    assert_false(server__request_id_valid("caf\xc3\xa9"));
    char a[17], b[17], small[5];
    server__request_id_make(a, sizeof a);
    server__request_id_make(b, sizeof b);
    assert_int_equal(strlen(a), 16);
    assert_int_equal(strspn(a, "0123456789abcdef"), 16);
    assert_string_not_equal(a, b);
    assert_true(server__request_id_valid(a));
    server__request_id_make(small, sizeof small);
    assert_int_equal(strlen(small), 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_count_and_render),
        cmocka_unit_test(test_metrics_realms_bounded),
        cmocka_unit_test(test_metrics_gauges_process_and_redis_up),
        cmocka_unit_test(test_metrics_method_and_outcome_names),
        cmocka_unit_test(test_process_stat_parse_fixture),
        cmocka_unit_test(test_request_id_valid_and_made),
    };
    return cmocka_run_group_tests_name("server metrics (unit)", tests, NULL, NULL);
}
