/* test_load_report.c - market-load's reports from a hand-made run: the JSON
 * report's shape (keys, order, types, values) as scripts/bench.sh and
 * tests/integration/test_load.c read it, and the text report's lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/cmocka_all.h"

#include "tools/load/load.h"

/* A finished run: 100 requests in 2 s, 60 purchases. */
struct fx {
    load_opts o;
    load_plan plan;
    load_run run;
    market_audit_report before, after;
    load_verdict v;
    load_cmdstats cb, ca;
    load_ledger ledger;
    load_report r;
};

static const char info_before[] = "# Commandstats\r\n"
                                  "cmdstat_evalsha:calls=100,usec=1\r\n"
                                  "cmdstat_info:calls=1,usec=1\r\n"
                                  "cmdstat_ping:calls=5,usec=1\r\n";
static const char info_after[] = "# Commandstats\r\n"
                                 "cmdstat_evalsha:calls=220,usec=1\r\n"
                                 "cmdstat_info:calls=2,usec=1\r\n"
                                 "cmdstat_ping:calls=5,usec=1\r\n"
                                 "cmdstat_exec:calls=60,usec=1\r\n";

static int fx_setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->o.url = "http://127.0.0.1:8080";
    f->o.redis = "redis://127.0.0.1:6380/0";
    f->o.buyers = 4;
    f->o.requests = 100;
    f->o.mix = LOAD_MIX_CONTENDED;
    f->o.seed = 9;
    f->o.timeout_ms = 10000;
    f->o.auth_secret = "k";
    f->plan.n_players = 50;
    f->plan.n_items = 400;
    f->plan.n_window = 1;
    f->plan.n_pool = 4;
    f->plan.unaffordable = 3;
    f->run.t0 = 1000000000;
    f->run.t_end = 3000000000; /* 2 s */
    f->run.stop_reason = "request count reached";
    load_counts *k = &f->run.k;
    k->requests = 100;
    k->by_code[200] = 60;
    k->by_code[401] = 5;
    k->by_code[402] = 20;
    k->by_code[404] = 10;
    k->by_code[500] = 2;
    k->by_code[503] = 3;
    k->reconnects = 1;
    for (uint64_t i = 1; i <= 100; i++) {
        load_hist_add(&f->run.all, i * 100000); /* 0.1 .. 10 ms */
        if (i <= 60) load_hist_add(&f->run.ok, i * 100000);
    }
    f->before = (market_audit_report){.players = 50, .total_funds = 5000, .items_listed = 400};
    f->after = f->before;
    f->after.items_listed -= 60;
    f->after.items_held += 60;
    f->v = load_judge(k, &f->before, &f->after);
    load_cmdstats_parse(&f->cb, info_before, strlen(info_before));
    load_cmdstats_parse(&f->ca, info_after, strlen(info_after));
    f->cb.cpu_s = 10.5; /* INFO cpu: 0.12 s of Redis CPU over the run's 60 purchases */
    f->ca.cpu_s = 10.62;
    f->ledger = (load_ledger){.n = 50, .recorded = 60};
    load_judge_trades(&f->v, &f->ledger);
    f->r = (load_report){&f->o,  &f->plan, &f->run, &f->before, &f->after,
                         &f->v,  &f->cb,   &f->ca,  &f->ledger};
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    free(*state);
    return 0;
}

/* ---- helpers ---- */

static json_t *get(json_t *j, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save)) {
        j = json_object_get(j, k);
        if (!j) fail_msg("no %s in the report (at %s)", path, k);
    }
    return j;
}

static long long int_at(json_t *j, const char *path) {
    json_t *v = get(j, path);
    if (!json_is_integer(v)) fail_msg("%s is not an integer", path);
    return (long long)json_integer_value(v);
}

static double real_at(json_t *j, const char *path) {
    json_t *v = get(j, path);
    if (!json_is_real(v)) fail_msg("%s is not a real", path);
    return json_real_value(v);
}

/* The keys of object j, in order, joined by ','. */
static void keys_of(json_t *j, char *out, size_t outlen) {
    out[0] = '\0';
    size_t len = 0;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        (void)v;
        int n = snprintf(out + len, outlen - len, "%s%s", len ? "," : "", key);
        assert_true(n > 0 && (size_t)n < outlen - len);
        len += (size_t)n;
    }
}

static void assert_keys(json_t *j, const char *path, const char *want) {
    char got[1024];
    keys_of(path ? get(j, path) : j, got, sizeof got);
    if (strcmp(got, want) != 0) fail_msg("%s: keys %s, not %s", path ? path : "top", got, want);
}

/* The text report of f, as a string (caller frees). */
static char *text_of(const load_report *r) {
    char *text = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&text, &len);
    assert_non_null(mf);
    load_report_print(mf, r);
    assert_int_equal(fclose(mf), 0);
    return text;
}

/* ---- JSON ---- */

static void test_json_shape(void **state) {
    struct fx *f = *state;
    json_t *j = load_report_json(&f->r);
    assert_non_null(j);
    assert_keys(j, NULL,
                "tool,config,setup,run,status,latency_ms,redis_commands,"
                "redis_commands_per_purchase,redis,invariants,result");
    assert_keys(j, "config",
                "url,redis,buyers,duration_s,requests,mix,seed,timeout_ms,tokens,players");
    assert_keys(j, "setup", "players,listed,contended_window,contended_pool");
    assert_keys(j, "run",
                "elapsed_s,stop_reason,stopped_early,requests,requests_per_s,purchases_per_s,"
                "reconnects,connect_errors,unaffordable_skipped,settle_ms,last_error");
    assert_keys(j, "status",
                "200,401,402,403,404,409,503,other,transport_errors,unknown_outcome,errors,by_code");
    assert_keys(j, "status.by_code", "200,401,402,404,500,503");
    assert_keys(j, "latency_ms", "all,ok");
    assert_keys(j, "latency_ms.all", "count,p50,p90,p99,p999,max,mean");
    assert_keys(j, "redis",
                "commands,commands_per_purchase,cpu_seconds,cpu_us_per_purchase,commands_delta,"
                "calls_before,calls_after,commandstats_before,commandstats_after,masters");
    assert_keys(
        j, "invariants",
        "ok,funds_conserved,escrow_consistent,no_negative_funds,items_in_one_place,"
        "items_total_unchanged,"
        "purchases_match,indexes_match,items_left_market,trades_match,trades_trimmed,trades,"
        "before,after");
    assert_keys(j, "invariants.trades",
                "recorded,players_checked,players_mismatched,unknown,first_mismatch");
    assert_keys(j, "invariants.before",
                "players,total_funds,negative_funds,items_held,items_listed,items_misplaced,"
                "index_mismatch,units_in_stacks,units_listed,units_in_sales,total_escrow,orders,"
                "orders_escrow");
    assert_keys(j, "result", "exit,failed");
    json_decref(j);
}

static void test_json_values(void **state) {
    struct fx *f = *state;
    json_t *j = load_report_json(&f->r);
    assert_non_null(j);
    assert_string_equal(json_string_value(get(j, "tool")), "market-load");
    assert_string_equal(json_string_value(get(j, "config.url")), "http://127.0.0.1:8080");
    assert_string_equal(json_string_value(get(j, "config.mix")), "contended");
    assert_int_equal(int_at(j, "config.seed"), 9);
    assert_int_equal(int_at(j, "config.requests"), 100);
    assert_true(json_is_true(get(j, "config.tokens")));
    assert_true(json_is_null(get(j, "config.players")));
    assert_true(real_at(j, "config.duration_s") == 0.0);
    assert_int_equal(int_at(j, "setup.listed"), 400);
    assert_int_equal(int_at(j, "setup.contended_pool"), 4);
    assert_true(real_at(j, "run.elapsed_s") == 2.0);
    assert_true(real_at(j, "run.requests_per_s") == 50.0);
    assert_true(real_at(j, "run.purchases_per_s") == 30.0);
    assert_true(json_is_false(get(j, "run.stopped_early")));
    assert_string_equal(json_string_value(get(j, "run.stop_reason")), "request count reached");
    assert_int_equal(int_at(j, "run.unaffordable_skipped"), 3);
    assert_int_equal(int_at(j, "run.reconnects"), 1);
    assert_string_equal(json_string_value(get(j, "run.last_error")), "");
    assert_int_equal(int_at(j, "status.200"), 60);
    assert_int_equal(int_at(j, "status.401"), 5);
    assert_int_equal(int_at(j, "status.other"), 2);
    assert_int_equal(int_at(j, "status.errors"), 10);
    assert_int_equal(int_at(j, "status.by_code.500"), 2);
    assert_int_equal(int_at(j, "latency_ms.all.count"), 100);
    assert_int_equal(int_at(j, "latency_ms.ok.count"), 60);
    double p50 = real_at(j, "latency_ms.all.p50");
    assert_true(p50 > 4.98 && p50 < 5.02);
    assert_true(real_at(j, "latency_ms.all.max") == 10.0);
    assert_true(real_at(j, "latency_ms.all.mean") == 5.05);
    /* 120 evalsha + 60 exec; INFO is not the service's */
    assert_int_equal(int_at(j, "redis_commands"), 180);
    assert_true(real_at(j, "redis_commands_per_purchase") == 3.0);
    assert_int_equal(int_at(j, "redis.commands"), 180);
    assert_true(real_at(j, "redis.cpu_seconds") == 0.12); /* INFO cpu after - before */
    assert_true(real_at(j, "redis.cpu_us_per_purchase") == 2000.0);
    assert_int_equal(int_at(j, "redis.calls_before"), 105);
    assert_int_equal(int_at(j, "redis.calls_after"), 285);
    assert_keys(j, "redis.commands_delta", "evalsha,exec");
    assert_int_equal(int_at(j, "redis.commands_delta.evalsha"), 120);
    assert_int_equal(int_at(j, "redis.commandstats_after.info"), 2);
    assert_true(json_is_true(get(j, "invariants.ok")));
    assert_int_equal(int_at(j, "invariants.items_left_market"), 60);
    assert_int_equal(int_at(j, "invariants.after.items_held"), 60);
    assert_int_equal(int_at(j, "result.exit"), 0);
    assert_true(json_is_null(get(j, "result.failed")));
    json_decref(j);
}

/* A run without a purchase: no per-purchase figure, a reason, exit 4. */
static void test_json_failed_run(void **state) {
    struct fx *f = *state;
    f->run.k.by_code[401] += f->run.k.by_code[200];
    f->run.k.by_code[200] = 0;
    f->after = f->before;
    f->v = load_judge(&f->run.k, &f->before, &f->after);
    f->o.auth_secret = NULL;
    json_t *j = load_report_json(&f->r);
    assert_non_null(j);
    assert_true(json_is_null(get(j, "redis_commands_per_purchase")));
    assert_true(json_is_null(get(j, "redis.commands_per_purchase")));
    assert_true(json_is_null(get(j, "redis.cpu_us_per_purchase")));
    assert_int_equal(int_at(j, "result.exit"), 4);
    assert_string_equal(json_string_value(get(j, "result.failed")), "no purchase succeeded");
    assert_true(json_is_false(get(j, "config.tokens")));
    json_decref(j);
}

/* Values JSON cannot take as they are: a seed past INT64_MAX (a string), and
 * a --players glob that is not UTF-8 ('?' for each odd byte). */
static void test_json_awkward_values(void **state) {
    struct fx *f = *state;
    f->o.seed = UINT64_MAX;
    f->o.players = "p\xff*";
    json_t *j = load_report_json(&f->r);
    assert_non_null(j);
    assert_string_equal(json_string_value(get(j, "config.seed")), "18446744073709551615");
    assert_string_equal(json_string_value(get(j, "config.players")), "p?*");
    json_decref(j);
    f->o.seed = (uint64_t)INT64_MAX;
    j = load_report_json(&f->r);
    assert_int_equal(int_at(j, "config.seed"), INT64_MAX);
    json_decref(j);
}

/* The file reads back as the same report, numbers as rounded, one line at the end. */
static void test_json_written_to_file(void **state) {
    struct fx *f = *state;
    char path[] = "/tmp/gm-load-report-XXXXXX", why[256] = "";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(load_report_write(&f->r, path, why, sizeof why), 0);
    json_error_t e;
    json_t *back = json_load_file(path, 0, &e);
    if (!back) fail_msg("%s: %s", path, e.text);
    json_t *j = load_report_json(&f->r);
    assert_true(json_equal(back, j));
    FILE *rf = fopen(path, "r");
    assert_non_null(rf);
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, rf);
    fclose(rf);
    buf[n] = '\0';
    assert_true(n > 0 && buf[n - 1] == '\n');
    assert_non_null(strstr(buf, "\"mean\": 5.05\n")); /* not 5.0499999999999998 */
    assert_non_null(strstr(buf, "\"elapsed_s\": 2.0,"));
    json_decref(j);
    json_decref(back);
    unlink(path);
    assert_int_equal(load_report_write(&f->r, "/nonexistent-dir/r.json", why, sizeof why), -1);
    assert_non_null(strstr(why, "/nonexistent-dir/r.json"));
}

/* ---- text ---- */

static void test_text_report(void **state) {
    struct fx *f = *state;
    char *t = text_of(&f->r);
    static const char *const lines[] = {
        "market-load: contended mix, 4 buyers against http://127.0.0.1:8080, seed 9\n",
        "  run           2.00 s, stopped: request count reached\n",
        "  requests      100 (50.0/s), 1 reconnects, 0 connect errors\n",
        "  outcomes      200: 60  401: 5  402: 20  403: 0  404: 10  409: 0  503: 3  other: 2  "
        "transport errors: 0\n",
        "  401           5 unauthorized: the server's secret is not the one given",
        "  skipped       3 items nobody could pay for\n",
        "  purchases/s   30.0\n",
        "  redis         180 commands, 3.00 per purchase; 2000.0 us of CPU per purchase\n",
        "  invariants    OK\n",
        "    ok  funds 5000 before, 5000 after\n",
        "    ok  60 purchases answered 200, 60 items left the market\n",
        "  result        OK, 10 of 100 requests were errors\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        if (!strstr(t, lines[i])) fail_msg("no line '%s' in:\n%s", lines[i], t);
    assert_null(strstr(t, "403           ")); /* no 403s: no line about them */
    assert_null(strstr(t, "settle"));
    free(t);
}

static void test_text_report_failures(void **state) {
    struct fx *f = *state;
    f->o.auth_secret = NULL;
    f->run.k.by_code[401] += f->run.k.by_code[200];
    f->run.k.by_code[200] = 0;
    f->after = f->before;
    f->v = load_judge(&f->run.k, &f->before, &f->after);
    char *t = text_of(&f->r);
    assert_non_null(strstr(t, "the server wants each buyer's token: give --auth-secret S"));
    assert_non_null(strstr(t, "  402           more refusals for want of funds than purchases"));
    assert_non_null(strstr(t, "  result        FAILED: no purchase succeeded, 70 of 100 requests "
                              "were errors (exit 4)\n"));
    free(t);
    f->after.total_funds = 4999;
    f->v = load_judge(&f->run.k, &f->before, &f->after);
    t = text_of(&f->r);
    assert_non_null(strstr(t, "  invariants    BROKEN\n"));
    assert_non_null(strstr(t, "    BAD funds 5000 before, 4999 after\n"));
    assert_non_null(strstr(t, "  result        FAILED: an invariant broke (exit 3)\n"));
    free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_json_shape, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_json_values, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_json_failed_run, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_json_awkward_values, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_json_written_to_file, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_text_report, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_text_report_failures, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
