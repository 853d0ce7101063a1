/* test_load_stats.c - market-load's numbers without a run: latency percentiles,
 * answers by status, INFO commandstats read from text, and the verdict (exit status). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "tools/load/load.h"

static load_hist *hist_new(void) {
    load_hist *h = calloc(1, sizeof *h);
    assert_non_null(h);
    return h;
}

/* ---- percentiles ---- */

static void test_hist_empty_is_zero(void **state) {
    (void)state;
    load_hist *h = hist_new();
    assert_true(load_hist_pct(h, 50) == 0);
    assert_true(load_hist_pct(h, 100) == 0);
    free(h);
}

/* Below 256 ns every value has its own bucket: percentiles are exact. */
static void test_hist_small_values_exact(void **state) {
    (void)state;
    load_hist *h = hist_new();
    for (uint64_t v = 1; v <= 100; v++)
        load_hist_add(h, v);
    assert_true(h->count == 100);
    assert_true(load_hist_pct(h, 50) == 50);
    assert_true(load_hist_pct(h, 90) == 90);
    assert_true(load_hist_pct(h, 99) == 99);
    assert_true(load_hist_pct(h, 100) == 100);
    assert_true(load_hist_pct(h, 0.001) == 1); /* at least the first answer */
    assert_true(h->max == 100);
    assert_true(h->sum == 5050.0);
    free(h);
}

/* Above, every percentile is within 0.4% of the value it stands for. */
static void test_hist_large_values_within_a_bucket(void **state) {
    (void)state;
    static const uint64_t values[] = {
        257,     1000,     123456,     999999,       1000000,
        2500000, 87654321, 1000000000, 123456789012, UINT64_C(1) << 45};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        load_hist *h = hist_new();
        load_hist_add(h, values[i]);
        load_hist_add(h, 1); /* so that the percentile is not just the max */
        h->max = UINT64_MAX; /* nor capped by it */
        double got = (double)load_hist_pct(h, 100), want = (double)values[i];
        if (got < want * 0.996 || got > want * 1.004)
            fail_msg("%llu reads back as %.0f", (unsigned long long)values[i], got);
        free(h);
    }
}

/* A percentile is never above the largest value seen. */
static void test_hist_capped_by_max(void **state) {
    (void)state;
    load_hist *h = hist_new();
    load_hist_add(h, 1000001); /* its bucket's middle is above it */
    assert_true(load_hist_pct(h, 50) <= 1000001);
    assert_true(load_hist_pct(h, 100) == 1000001);
    free(h);
}

/* p50, p90, p99 of 1..10000 microseconds, as the report computes them. */
static void test_hist_percentiles_of_a_run(void **state) {
    (void)state;
    load_hist *h = hist_new();
    for (uint64_t us = 10000; us >= 1; us--)
        load_hist_add(h, us * 1000);
    static const struct {
        double p;
        double ms;
    } want[] = {{50, 5.0}, {90, 9.0}, {99, 9.9}, {99.9, 9.99}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        double got = load_ms(load_hist_pct(h, want[i].p));
        if (got < want[i].ms * 0.996 || got > want[i].ms * 1.004)
            fail_msg("p%g is %.4f ms, not ~%.4f", want[i].p, got, want[i].ms);
    }
    assert_true(load_ms(h->max) == 10.0);
    free(h);
}

/* ---- answers by status ---- */

static void test_counts_other(void **state) {
    (void)state;
    static load_counts k;
    memset(&k, 0, sizeof k);
    k.by_code[200] = 5;
    k.by_code[401] = 1;
    k.by_code[402] = 1;
    k.by_code[403] = 1;
    k.by_code[404] = 1;
    k.by_code[409] = 1;
    k.by_code[503] = 1;
    assert_true(load_counts_other(&k) == 0);
    k.by_code[500] = 2;
    k.by_code[429] = 3;
    k.other = 4; /* outside 100..599 */
    assert_true(load_counts_other(&k) == 9);
}

/* ---- commandstats ---- */

static const char info[] =
    "# Commandstats\r\n"
    "cmdstat_evalsha:calls=120,usec=900,usec_per_call=7.50,rejected_calls=0,failed_calls=0\r\n"
    "cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n"
    "cmdstat_client|setname:calls=3,usec=3,usec_per_call=1.00\r\n"
    "cmdstat_exec:calls=40,usec=400,usec_per_call=10.00\r\n"
    "cmdstat_broken\r\n"
    "cmdstat_nocalls:usec=5\r\n"
    "other_line:calls=99\r\n";

static void test_cmdstats_parse(void **state) {
    (void)state;
    load_cmdstats *s = calloc(1, sizeof *s);
    assert_non_null(s);
    load_cmdstats_parse(s, info, strlen(info));
    assert_int_equal(s->n, 4);
    assert_int_equal(load_cmdstats_get(s, "evalsha"), 120);
    assert_int_equal(load_cmdstats_get(s, "info"), 7);
    assert_int_equal(load_cmdstats_get(s, "client|setname"), 3);
    assert_int_equal(load_cmdstats_get(s, "exec"), 40);
    assert_int_equal(load_cmdstats_get(s, "get"), 0);
    assert_int_equal(s->total, 120 + 3 + 40); /* INFO left out */
    /* A text cut anywhere is read without reading past it. */
    for (size_t cut = 0; cut < sizeof info; cut++) {
        char *part = malloc(cut ? cut : 1);
        assert_non_null(part);
        memcpy(part, info, cut);
        load_cmdstats_parse(s, part, cut);
        assert_true(s->n <= 4);
        free(part);
    }
    free(s);
}

/* INFO cpu: used_cpu_user + used_cpu_sys; the children's and threads' lines are not the
 * server's own, and a line that is not a number counts nothing. */
static void test_cpu_parse(void **state) {
    (void)state;
    static const char cpu[] = "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:3.500000\r\n"
                               "used_cpu_sys_children:9.000000\r\nused_cpu_user_children:9.0\r\n"
                               "used_cpu_sys_main_thread:1.0\r\n";
    assert_true(load_cpu_parse(cpu, strlen(cpu)) == 4.75);
    static const char bad[] = "used_cpu_sys:x\r\nused_cpu_user:-2\r\nused_cpu_user:";
    assert_true(load_cpu_parse(bad, strlen(bad)) == 0);
    assert_true(load_cpu_parse("", 0) == 0);
}

static void test_cmdstats_bounded(void **state) {
    (void)state;
    size_t cap = (LOAD_CMDS_MAX + 10) * 48 + 1;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = 0;
    for (int i = 0; i < LOAD_CMDS_MAX + 10; i++)
        len += (size_t)snprintf(text + len, cap - len, "cmdstat_c%d:calls=1,usec=1\r\n", i);
    load_cmdstats *s = calloc(1, sizeof *s);
    assert_non_null(s);
    load_cmdstats_parse(s, text, len);
    assert_int_equal(s->n, LOAD_CMDS_MAX);
    assert_int_equal(s->total, LOAD_CMDS_MAX);
    free(s);
    free(text);
}

/* ---- the verdict ---- */

static const market_audit_report before = {.players = 10, .total_funds = 1000, .items_listed = 100};

static market_audit_report after_selling(size_t sold) {
    market_audit_report a = before;
    a.items_listed -= sold;
    a.items_held += sold;
    return a;
}

static void test_verdict_ok(void **state) {
    (void)state;
    static load_counts k;
    memset(&k, 0, sizeof k);
    k.requests = 30;
    k.by_code[200] = 20;
    k.by_code[402] = 5;
    k.by_code[404] = 5;
    market_audit_report a = after_selling(20);
    load_verdict v = load_judge(&k, &before, &a);
    assert_true(v.ok && v.funds && v.negative && v.one_place && v.total && v.purchases &&
                v.indexed);
    assert_int_equal(v.left, 20);
    assert_int_equal(v.errors, 0);
    assert_null(v.failed);
    assert_int_equal(load_verdict_exit(&v), 0);
}

/* A 503 of unknown outcome (not_replicated, store_unavailable) may have bought, like a request
 * without an answer; a 200 missing from the store is broken whatever else happened. */
static void test_verdict_unknown_outcomes_widen_the_window(void **state) {
    (void)state;
    static load_counts k;
    memset(&k, 0, sizeof k);
    k.requests = 30;
    k.by_code[200] = 20;
    k.by_code[503] = 10;
    k.unknown = 3;
    market_audit_report a = after_selling(23);
    load_verdict v = load_judge(&k, &before, &a);
    assert_true(v.purchases && v.ok);
    a = after_selling(24); /* one more than the 503s can explain */
    v = load_judge(&k, &before, &a);
    assert_false(v.purchases);
    assert_int_equal(load_verdict_exit(&v), 3);
    a = after_selling(19); /* a 200 is missing */
    v = load_judge(&k, &before, &a);
    assert_false(v.purchases);
}

static void test_verdict_broken_invariants_exit_3(void **state) {
    (void)state;
    static load_counts k;
    memset(&k, 0, sizeof k);
    k.requests = 10;
    k.by_code[200] = 10;
    market_audit_report a = after_selling(10);
    a.total_funds = 999; /* funds vanished */
    load_verdict v = load_judge(&k, &before, &a);
    assert_false(v.funds);
    assert_false(v.ok);
    assert_int_equal(load_verdict_exit(&v), 3);

    a = after_selling(10);
    a.negative_funds = 1;
    v = load_judge(&k, &before, &a);
    assert_false(v.negative);
    assert_int_equal(load_verdict_exit(&v), 3);

    a = after_selling(10);
    a.items_misplaced = 1;
    v = load_judge(&k, &before, &a);
    assert_false(v.one_place);
    assert_int_equal(load_verdict_exit(&v), 3);

    a = after_selling(10);
    a.index_mismatch = 2; /* a listing missing from an index, a stale entry in another */
    v = load_judge(&k, &before, &a);
    assert_false(v.indexed);
    assert_false(v.ok);
    assert_int_equal(load_verdict_exit(&v), 3);

    a = after_selling(10);
    a.items_held--; /* an item vanished */
    v = load_judge(&k, &before, &a);
    assert_false(v.total);
    assert_int_equal(load_verdict_exit(&v), 3);

    a = after_selling(9); /* ten 200s, nine items left the market */
    v = load_judge(&k, &before, &a);
    assert_false(v.purchases);
    assert_int_equal(load_verdict_exit(&v), 3);
}

/* A request without an answer may have bought: more items may leave the
 * market than answered 200, by at most the transport errors. */
static void test_verdict_transport_errors_widen_the_window(void **state) {
    (void)state;
    static load_counts k;
    memset(&k, 0, sizeof k);
    k.requests = 12;
    k.by_code[200] = 10;
    k.transport = 2;
    market_audit_report a = after_selling(12);
    load_verdict v = load_judge(&k, &before, &a);
    assert_true(v.purchases);
    assert_int_equal(v.errors, 2);
    a = after_selling(13);
    v = load_judge(&k, &before, &a);
    assert_false(v.purchases);
}

static void test_verdict_failed_runs_exit_4(void **state) {
    (void)state;
    static load_counts k;
    memset(&k, 0, sizeof k);
    k.requests = 200;
    k.by_code[401] = 200;
    market_audit_report a = after_selling(0);
    load_verdict v = load_judge(&k, &before, &a);
    assert_true(v.ok);
    assert_string_equal(v.failed, "no purchase succeeded");
    assert_int_equal(v.errors, 200);
    assert_int_equal(load_verdict_exit(&v), 4);

    memset(&k, 0, sizeof k);
    k.requests = 100;
    k.by_code[200] = 10;
    k.by_code[503] = 51;
    k.by_code[404] = 39;
    a = after_selling(10);
    v = load_judge(&k, &before, &a);
    assert_string_equal(v.failed, "most answers were errors");
    assert_int_equal(load_verdict_exit(&v), 4);
    k.by_code[503] = 50; /* half is not most */
    k.by_code[404] = 40;
    v = load_judge(&k, &before, &a);
    assert_null(v.failed);
    assert_int_equal(load_verdict_exit(&v), 0);
}

static void test_audit_same(void **state) {
    (void)state;
    market_audit_report a = before, b = before;
    assert_true(load_audit_same(&a, &b));
    b.items_held = 1;
    assert_false(load_audit_same(&a, &b));
    b = before;
    b.index_mismatch = 1; /* a write between the audit's reads: settle again */
    assert_false(load_audit_same(&a, &b));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hist_empty_is_zero),
        cmocka_unit_test(test_hist_small_values_exact),
        cmocka_unit_test(test_hist_large_values_within_a_bucket),
        cmocka_unit_test(test_hist_capped_by_max),
        cmocka_unit_test(test_hist_percentiles_of_a_run),
        cmocka_unit_test(test_counts_other),
        cmocka_unit_test(test_cmdstats_parse),
        cmocka_unit_test(test_cpu_parse),
        cmocka_unit_test(test_cmdstats_bounded),
        cmocka_unit_test(test_verdict_ok),
        cmocka_unit_test(test_verdict_unknown_outcomes_widen_the_window),
        cmocka_unit_test(test_verdict_broken_invariants_exit_3),
        cmocka_unit_test(test_verdict_transport_errors_widen_the_window),
        cmocka_unit_test(test_verdict_failed_runs_exit_4),
        cmocka_unit_test(test_audit_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
