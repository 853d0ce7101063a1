/* test_load_opts.c - market-load's command line without running anything:
 * make run's defaults, every flag, the usage errors and their sentences, --url. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "tools/load/load.h"

static const load_env no_env = {NULL, NULL, NULL, NULL};

/* Parses the NULL-terminated args (without the program name). */
static int parse(load_opts *o, const load_env *env, const char *const *args, char *why,
                 size_t whylen) {
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"market-load";
    while (*args && argc < 31)
        argv[argc++] = (char *)*args++;
    argv[argc] = NULL;
    why[0] = '\0';
    return load_opts_parse(o, env, argc, argv, why, whylen);
}

/* ---- defaults ---- */

static void test_defaults_are_make_runs(void **state) {
    (void)state;
    static load_opts o;
    char why[256];
    const char *args[] = {"--buyers", "4", "--requests", "10", NULL};
    assert_int_equal(parse(&o, &no_env, args, why, sizeof why), 0);
    assert_string_equal(o.url, "http://127.0.0.1:8080");
    assert_string_equal(o.redis, "redis://127.0.0.1:6380/0");
    assert_null(o.auth_secret);
    assert_null(o.players);
    assert_null(o.json);
    assert_int_equal(o.mix, LOAD_MIX_DISTINCT);
    assert_true(o.seed == 1);
    assert_int_equal(o.timeout_ms, 10000);
    assert_int_equal(o.buyers, 4);
    assert_true(o.requests == 10);
    assert_true(o.duration_s == 0);
    assert_int_equal(o.quiet, 0);
    assert_int_equal(o.hold, 0);
}

static void test_defaults_from_environment(void **state) {
    (void)state;
    static load_opts o;
    char why[256];
    const char *args[] = {"--buyers", "1", "--duration", "2", NULL};
    load_env env = {"127.0.0.1:8081", NULL, "6390", "s3cret"};
    assert_int_equal(parse(&o, &env, args, why, sizeof why), 0);
    assert_string_equal(o.url, "http://127.0.0.1:8081");
    assert_string_equal(o.redis, "redis://127.0.0.1:6390/0");
    assert_string_equal(o.auth_secret, "s3cret");
    /* MARKET_REDIS wins over MARKET_REDIS_PORT; an empty secret is none. */
    load_env env2 = {NULL, "redis://10.0.0.1:7000/2", "6390", ""};
    assert_int_equal(parse(&o, &env2, args, why, sizeof why), 0);
    assert_string_equal(o.redis, "redis://10.0.0.1:7000/2");
    assert_null(o.auth_secret);
}

/* A listen address too long for the URL buffer is left for --url's parser
 * to refuse (as the bare value), not cut short into another address. */
static void test_default_url_too_long_is_left_to_refuse(void **state) {
    (void)state;
    static load_opts o;
    char why[256], listen[LOAD_HOST_MAX + 20];
    memset(listen, 'h', sizeof listen - 1);
    listen[sizeof listen - 1] = '\0';
    load_env env = {listen, NULL, NULL, NULL};
    const char *args[] = {"--buyers", "1", "--duration", "2", NULL};
    assert_int_equal(parse(&o, &env, args, why, sizeof why), 0);
    assert_string_equal(o.url, listen);
    load_url u;
    assert_int_equal(load_url_parse(o.url, &u, why, sizeof why), -1);
}

/* ---- flags ---- */

static void test_every_flag(void **state) {
    (void)state;
    static load_opts o;
    char why[256];
    const char *args[] = {"--url",         "http://h:1",
                          "--redis",       "redis://r:2/0",
                          "--buyers",      "100000",
                          "--duration",    "0.5",
                          "--mix",         "contended",
                          "--players",     "p[0-9]*",
                          "--seed",        "18446744073709551615",
                          "--auth-secret", "k",
                          "--timeout-ms",  "3600000",
                          "--json",        "out.json",
                          "--quiet",       NULL};
    assert_int_equal(parse(&o, &no_env, args, why, sizeof why), 0);
    assert_string_equal(o.url, "http://h:1");
    assert_string_equal(o.redis, "redis://r:2/0");
    assert_int_equal(o.buyers, LOAD_BUYERS_MAX);
    assert_true(o.duration_s == 0.5);
    assert_int_equal(o.mix, LOAD_MIX_CONTENDED);
    assert_string_equal(o.players, "p[0-9]*");
    assert_true(o.seed == UINT64_MAX);
    assert_string_equal(o.auth_secret, "k");
    assert_int_equal(o.timeout_ms, 3600000);
    assert_string_equal(o.json, "out.json");
    assert_int_equal(o.quiet, 1);
    const char *mixed[] = {"--buyers", "2", "--requests", "1000000000", "--mix", "mixed", NULL};
    assert_int_equal(parse(&o, &no_env, mixed, why, sizeof why), 0);
    assert_int_equal(o.mix, LOAD_MIX_MIXED);
    assert_true(o.requests == LOAD_REQUESTS_MAX);
}

static void test_hold_connections(void **state) {
    (void)state;
    static load_opts o;
    char why[256];
    const char *hold[] = {"--hold-connections", "50", NULL};
    assert_int_equal(parse(&o, &no_env, hold, why, sizeof why), 0);
    assert_int_equal(o.hold, 50);
    const char *both[] = {"--hold-connections", "50", "--buyers", "2", NULL};
    assert_int_equal(parse(&o, &no_env, both, why, sizeof why), -1);
    assert_string_equal(why, "--hold-connections takes no --buyers or --requests");
}

static void test_help(void **state) {
    (void)state;
    static load_opts o;
    char why[256];
    const char *args[] = {"--buyers", "4", "--help", NULL};
    assert_int_equal(parse(&o, &no_env, args, why, sizeof why), LOAD_OPTS_HELP);
    const char *shortf[] = {"-h", NULL};
    assert_int_equal(parse(&o, &no_env, shortf, why, sizeof why), LOAD_OPTS_HELP);
}

/* Each bad value is refused with the flag's name and the value, as before. */
static void test_bad_values_name_flag_and_value(void **state) {
    (void)state;
    static const struct {
        const char *flag, *value;
    } bad[] = {
        {"--buyers", "0"},     {"--buyers", "100001"},      {"--buyers", "-4"},
        {"--buyers", "4x"},    {"--requests", "0"},         {"--requests", "1000000001"},
        {"--duration", "0"},   {"--duration", "86401"},     {"--duration", "1e2"},
        {"--duration", "10s"}, {"--mix", "most"},           {"--seed", "18446744073709551616"},
        {"--timeout-ms", "0"}, {"--timeout-ms", "3600001"}, {"--hold-connections", "0"},
    };
    static load_opts o;
    char why[256], want[256];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *args[] = {bad[i].flag, bad[i].value, NULL};
        if (parse(&o, &no_env, args, why, sizeof why) != -1)
            fail_msg("%s %s was taken", bad[i].flag, bad[i].value);
        snprintf(want, sizeof want, "bad value for %s: '%s'", bad[i].flag, bad[i].value);
        assert_string_equal(why, want);
    }
}

static void test_usage_errors(void **state) {
    (void)state;
    static load_opts o;
    char why[256];
    const char *no_stop[] = {"--buyers", "4", NULL};
    assert_int_equal(parse(&o, &no_env, no_stop, why, sizeof why), -1);
    assert_string_equal(why, "need --buyers N and one of --duration S, --requests K");
    const char *both_stops[] = {"--buyers", "4", "--duration", "1", "--requests", "1", NULL};
    assert_int_equal(parse(&o, &no_env, both_stops, why, sizeof why), -1);
    assert_string_equal(why, "need --buyers N and one of --duration S, --requests K");
    const char *no_buyers[] = {"--requests", "1", NULL};
    assert_int_equal(parse(&o, &no_env, no_buyers, why, sizeof why), -1);
    const char *unknown[] = {"--buyers", "4", "--fast", NULL};
    assert_int_equal(parse(&o, &no_env, unknown, why, sizeof why), -1);
    assert_string_equal(why, "unknown flag or missing value: '--fast'");
    const char *missing[] = {"--buyers", NULL};
    assert_int_equal(parse(&o, &no_env, missing, why, sizeof why), -1);
    assert_string_equal(why, "unknown flag or missing value: '--buyers'");
    const char *extra[] = {"--buyers", "4", "--requests", "1", "more", NULL};
    assert_int_equal(parse(&o, &no_env, extra, why, sizeof why), -1);
    assert_string_equal(why, "unexpected argument 'more'");
}

/* A second parse starts afresh (getopt's state and every field). */
static void test_parse_twice_starts_afresh(void **state) {
    (void)state;
    static load_opts o;
    char why[256];
    const char *first[] = {"--buyers", "4", "--requests", "1", "--quiet", "--mix", "mixed", NULL};
    assert_int_equal(parse(&o, &no_env, first, why, sizeof why), 0);
    const char *second[] = {"--buyers", "2", "--duration", "1", NULL};
    assert_int_equal(parse(&o, &no_env, second, why, sizeof why), 0);
    assert_int_equal(o.buyers, 2);
    assert_true(o.requests == 0);
    assert_int_equal(o.quiet, 0);
    assert_int_equal(o.mix, LOAD_MIX_DISTINCT);
}

/* ---- --url ---- */

static void test_url_forms(void **state) {
    (void)state;
    load_url u;
    char why[256];
    assert_int_equal(load_url_parse("http://127.0.0.1:8080", &u, why, sizeof why), 0);
    assert_string_equal(u.host, "127.0.0.1:8080");
    assert_string_equal(u.name, "127.0.0.1");
    assert_int_equal(u.port, 8080);
    assert_int_equal(load_url_parse("http://example.org/", &u, why, sizeof why), 0);
    assert_string_equal(u.host, "example.org");
    assert_int_equal(u.port, 80);
    assert_int_equal(load_url_parse("http://[::1]:9000", &u, why, sizeof why), 0);
    assert_string_equal(u.host, "[::1]:9000");
    assert_string_equal(u.name, "::1");
    assert_int_equal(u.port, 9000);
}

static void test_url_refused_with_reason(void **state) {
    (void)state;
    load_url u;
    char why[256];
    assert_int_equal(load_url_parse("https://h", &u, why, sizeof why), -1);
    assert_string_equal(why, "--url must start with http:// ('https://h')");
    assert_int_equal(load_url_parse("http://h/purchase", &u, why, sizeof why), -1);
    assert_string_equal(why, "--url takes no path ('http://h/purchase')");
    static const char *const bad[] = {"http://", "http://h:0", "http://h:x", "http://[::1",
                                      "http://h:65536"};
    char want[256];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(load_url_parse(bad[i], &u, why, sizeof why), -1);
        snprintf(want, sizeof want, "bad --url '%s' (want http://HOST[:PORT])", bad[i]);
        assert_string_equal(why, want);
    }
}

static void test_usage_names_every_flag(void **state) {
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    load_usage(f);
    assert_int_equal(fclose(f), 0);
    static const char *const flags[] = {"--url",
                                        "--redis",
                                        "--buyers",
                                        "--duration",
                                        "--requests",
                                        "--mix",
                                        "--players",
                                        "--seed",
                                        "--auth-secret",
                                        "--timeout-ms",
                                        "--json",
                                        "--quiet",
                                        "--hold-connections"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        if (!strstr(text, flags[i])) fail_msg("usage does not name %s", flags[i]);
    free(text);
}

/* --mix flash: no --duration or --requests needed; the limit defaults to
 * twice the fair share (rounded up), never above the stock; one realm. */
static void test_flash_defaults(void **state) {
    (void)state;
    static load_opts o;
    char why[256];
    const char *a1[] = {"--mix", "flash", "--buyers", "1000", NULL};
    assert_int_equal(parse(&o, &no_env, a1, why, sizeof why), 0);
    assert_int_equal(o.mix, LOAD_MIX_FLASH);
    assert_int_equal(o.sale_stock, 10000);
    assert_int_equal(o.sale_limit, 20);
    assert_int_equal(o.sale_price, 1);
    assert_string_equal(o.sale_house, "game");
    const char *a2[] = {"--mix", "flash", "--buyers", "3", "--sale-stock", "5", NULL};
    assert_int_equal(parse(&o, &no_env, a2, why, sizeof why), 0);
    assert_int_equal(o.sale_limit, 4);
    const char *a3[] = {"--mix", "flash", "--buyers", "1", "--sale-stock", "5", NULL};
    assert_int_equal(parse(&o, &no_env, a3, why, sizeof why), 0);
    assert_int_equal(o.sale_limit, 5);
    const char *a4[] = {"--mix",        "flash", "--buyers",     "8", "--sale-limit", "2",
                        "--sale-price", "30",    "--sale-house", "bank", NULL};
    assert_int_equal(parse(&o, &no_env, a4, why, sizeof why), 0);
    assert_int_equal(o.sale_limit, 2);
    assert_int_equal(o.sale_price, 30);
    assert_string_equal(o.sale_house, "bank");
    const char *bad[][8] = {{"--mix", "flash", "--buyers", "4", "--realms", "2", NULL},
                            {"--mix", "flash", "--buyers", "4", "--sale-stock", "0", NULL},
                            {"--mix", "flash", "--buyers", "4", "--sale-house", "a b", NULL},
                            {"--mix", "flash", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse(&o, &no_env, bad[i], why, sizeof why), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_make_runs),
        cmocka_unit_test(test_defaults_from_environment),
        cmocka_unit_test(test_default_url_too_long_is_left_to_refuse),
        cmocka_unit_test(test_every_flag),
        cmocka_unit_test(test_hold_connections),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_bad_values_name_flag_and_value),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_parse_twice_starts_afresh),
        cmocka_unit_test(test_url_forms),
        cmocka_unit_test(test_url_refused_with_reason),
        cmocka_unit_test(test_usage_names_every_flag),
        cmocka_unit_test(test_flash_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
