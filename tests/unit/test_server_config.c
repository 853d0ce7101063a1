/* test_server_config.c - server/config.c without a server: flags, the
 * MARKET_* environment under them, --help, and refusals that say why
 * (without echoing a secret). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "server/server.h"

static int parse(server_config *cfg, char *why, size_t whylen, int argc, const char **argv) {
    server_config_defaults(cfg);
    return server_config_parse(cfg, argc, (char **)argv, why, whylen);
}

static void clear_env(void) {
    static const char *const vars[] = {"MARKET_LISTEN",      "MARKET_STRATEGY",
                                       "MARKET_LOCK_TTL_MS", "MARKET_AUTH_SECRET",
                                       "MARKET_THREADS",     "MARKET_REUSE_PORT",
                                       "MARKET_AUTH_KEYS",   "MARKET_AUTH_AUDIENCE",
                                       "MARKET_AUTH_LEEWAY_S"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
}

static void test_config_flags_set_fields(void **state) {
    (void)state;
    clear_env();
    server_config cfg;
    char why[256] = "";
    const char *argv[] = {"market-server", "--listen",     "127.0.0.1:9", "--strategy",
                          "item",          "--threads",    "3",           "--lock-ttl-ms",
                          "250",           "--reuse-port", "--no-auth",   "--public-trade-parties"};
    assert_int_equal(parse(&cfg, why, sizeof why, 12, argv), SERVER_OK);
    assert_string_equal(cfg.listen, "127.0.0.1:9");
    assert_string_equal(cfg.strategy, "item");
    assert_int_equal(cfg.threads, 3);
    assert_int_equal(cfg.lock_ttl_ms, 250);
    assert_int_equal(cfg.reuse_port, 1);
    assert_int_equal(cfg.no_auth, 1);
    assert_int_equal(cfg.trade_parties_public, 1);
    assert_int_equal(cfg.help, 0);
}

/* Trades are private to their parties unless the operator says otherwise. */
static void test_config_trade_parties_private_by_default(void **state) {
    (void)state;
    clear_env();
    server_config cfg;
    char why[256] = "";
    const char *argv[] = {"market-server", "--no-auth"};
    assert_int_equal(parse(&cfg, why, sizeof why, 2, argv), SERVER_OK);
    assert_int_equal(cfg.trade_parties_public, 0);
    setenv("MARKET_PUBLIC_TRADE_PARTIES", "1", 1);
    assert_int_equal(parse(&cfg, why, sizeof why, 2, argv), SERVER_OK);
    assert_int_equal(cfg.trade_parties_public, 1);
    unsetenv("MARKET_PUBLIC_TRADE_PARTIES");
    assert_int_equal(cfg.no_price_history, 0); /* a price history unless told */
    const char *off[] = {"market-server", "--no-auth", "--no-price-history"};
    assert_int_equal(parse(&cfg, why, sizeof why, 3, off), SERVER_OK);
    assert_int_equal(cfg.no_price_history, 1);
}

static void test_config_env_under_flags(void **state) {
    (void)state;
    clear_env();
    setenv("MARKET_LISTEN", "127.0.0.1:7", 1);
    setenv("MARKET_THREADS", "5", 1);
    server_config cfg;
    char why[256];
    const char *argv[] = {"market-server", "--threads", "1"};
    assert_int_equal(parse(&cfg, why, sizeof why, 3, argv), SERVER_OK);
    assert_string_equal(cfg.listen, "127.0.0.1:7"); /* from the environment */
    assert_int_equal(cfg.threads, 1);               /* the flag wins */
    clear_env();
}

static void test_config_help_is_not_an_error(void **state) {
    (void)state;
    clear_env();
    server_config cfg;
    char why[256];
    const char *argv[] = {"market-server", "--help"};
    assert_int_equal(parse(&cfg, why, sizeof why, 2, argv), SERVER_OK);
    assert_int_equal(cfg.help, 1);
    const char *shortv[] = {"market-server", "-h"};
    assert_int_equal(parse(&cfg, why, sizeof why, 2, shortv), SERVER_OK);
    assert_int_equal(cfg.help, 1);
}

static void test_config_refusals_say_why(void **state) {
    (void)state;
    clear_env();
    server_config cfg;
    char why[256];
    const char *unknown[] = {"market-server", "--nope"};
    assert_int_equal(parse(&cfg, why, sizeof why, 2, unknown), SERVER_ERR_INVALID);
    assert_non_null(strstr(why, "--nope"));
    const char *bad_number[] = {"market-server", "--threads", "lots"};
    assert_int_equal(parse(&cfg, why, sizeof why, 3, bad_number), SERVER_ERR_INVALID);
    assert_non_null(strstr(why, "threads"));
    const char *extra[] = {"market-server", "stray"};
    assert_int_equal(parse(&cfg, why, sizeof why, 2, extra), SERVER_ERR_INVALID);
    assert_non_null(strstr(why, "stray"));
    setenv("MARKET_REUSE_PORT", "maybe", 1);
    const char *none[] = {"market-server"};
    assert_int_equal(parse(&cfg, why, sizeof why, 1, none), SERVER_ERR_INVALID);
    assert_non_null(strstr(why, "MARKET_REUSE_PORT"));
    clear_env();
}

/* --auth-key adds to MARKET_AUTH_KEYS, one spec a line; the audience and leeway have
 * their twins; a bad spec is refused without echoing it (it may hold a secret). */
static void test_config_auth_keys(void **state) {
    (void)state;
    clear_env();
    server_config cfg;
    char why[256];
    const char *none[] = {"market-server"};
    assert_int_equal(parse(&cfg, why, sizeof why, 1, none), SERVER_OK);
    assert_string_equal(cfg.auth_keys, "");
    assert_int_equal(cfg.auth_leeway_s, 60);
    setenv("MARKET_AUTH_KEYS", "old:hs256:s1  new:RS256:/k/new.pem", 1);
    setenv("MARKET_AUTH_AUDIENCE", "gamemarket", 1);
    setenv("MARKET_AUTH_LEEWAY_S", "5", 1);
    const char *argv[] = {"market-server", "--auth-key", "es:es256:/k/es.pem", "--auth-leeway-s",
                          "0"};
    assert_int_equal(parse(&cfg, why, sizeof why, 5, argv), SERVER_OK);
    assert_string_equal(cfg.auth_keys, "old:hs256:s1\nnew:RS256:/k/new.pem\nes:es256:/k/es.pem\n");
    assert_string_equal(cfg.auth_audience, "gamemarket");
    assert_int_equal(cfg.auth_leeway_s, 0);
    clear_env();
    static const char *const bad[] = {"k1:hs512:t0p-secret", "k1:hs256:", ":hs256:t0p-secret",
                                      "t0p-secret", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *bv[] = {"market-server", "--auth-key", bad[i]};
        assert_int_equal(parse(&cfg, why, sizeof why, 3, bv), SERVER_ERR_INVALID);
        assert_non_null(strstr(why, "--auth-key"));
        assert_null(strstr(why, "t0p-secret"));
    }
    setenv("MARKET_AUTH_KEYS", "k1:hs257:t0p-secret", 1);
    assert_int_equal(parse(&cfg, why, sizeof why, 1, none), SERVER_ERR_INVALID);
    assert_non_null(strstr(why, "MARKET_AUTH_KEYS"));
    assert_null(strstr(why, "t0p-secret"));
    clear_env();
    const char *leeway[] = {"market-server", "--auth-leeway-s", "3601"};
    assert_int_equal(parse(&cfg, why, sizeof why, 3, leeway), SERVER_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_flags_set_fields),
        cmocka_unit_test(test_config_trade_parties_private_by_default),
        cmocka_unit_test(test_config_env_under_flags),
        cmocka_unit_test(test_config_help_is_not_an_error),
        cmocka_unit_test(test_config_refusals_say_why),
        cmocka_unit_test(test_config_auth_keys),
    };
    return cmocka_run_group_tests_name("server config (unit)", tests, NULL, NULL);
}
