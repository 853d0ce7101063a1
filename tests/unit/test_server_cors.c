/* test_server_cors.c - server/cors.c without a server: which strings are
 * origins, which request origins are allowed, and --cors-origin /
 * MARKET_CORS_ORIGIN parsing (repeated flags and comma lists add up; a bad or
 * a seventeenth origin is refused). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "server/server.h"
#include "server/server_impl.h"

static void test_origin_ok(void **state) {
    (void)state;
    static const char *const good[] = {"*", "https://game.example", "http://localhost:3000",
                                       "http://127.0.0.1:8080", "https://[::1]:8443",
                                       "HTTPS://Game.Example", "http://a", "http://x:65535"};
    static const char *const bad[] = {"", "game.example", "https://", "https://game.example/",
                                      "https://game.example/x", "ftp://game.example", "null",
                                      "https://game.example:", "https://game.example:0",
                                      "https://game.example:65536", "https://game.example:123456",
                                      "https://ga me.example", "https://[]", "https://[::1",
                                      "https://user@game.example", "**", "https://game.example?x"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (!server__cors_origin_ok(good[i])) fail_msg("refused %s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (server__cors_origin_ok(bad[i])) fail_msg("took %s", bad[i]);
    assert_false(server__cors_origin_ok(NULL));
}

static void test_allow(void **state) {
    (void)state;
    server_config cfg;
    server_config_defaults(&cfg);
    assert_null(server__cors_allow(&cfg, "https://game.example")); /* none configured */
    snprintf(cfg.cors_origins[0], sizeof cfg.cors_origins[0], "https://game.example");
    snprintf(cfg.cors_origins[1], sizeof cfg.cors_origins[1], "http://localhost:3000");
    cfg.n_cors = 2;
    const char *o = "https://game.example";
    assert_ptr_equal(server__cors_allow(&cfg, o), o); /* the request's own string */
    assert_string_equal(server__cors_allow(&cfg, "HTTPS://GAME.example"), "HTTPS://GAME.example");
    assert_string_equal(server__cors_allow(&cfg, "http://localhost:3000"), "http://localhost:3000");
    assert_null(server__cors_allow(&cfg, "http://localhost:3001"));
    assert_null(server__cors_allow(&cfg, "https://game.example.evil"));
    assert_null(server__cors_allow(&cfg, "http://game.example"));
    assert_null(server__cors_allow(&cfg, ""));
    assert_null(server__cors_allow(&cfg, NULL));
    snprintf(cfg.cors_origins[2], sizeof cfg.cors_origins[2], "*");
    cfg.n_cors = 3;
    assert_string_equal(server__cors_allow(&cfg, "https://anyone.example"), "*");
    assert_null(server__cors_allow(&cfg, NULL)); /* no Origin: not a CORS request */
}

static int parse(server_config *cfg, const char *a1, const char *a2) {
    char prog[] = "market-server", f1[600] = "", f2[600] = "";
    char *argv[] = {prog, f1, f2, NULL};
    int argc = 1;
    if (a1) snprintf(argv[argc++], sizeof f1, "%s", a1);
    if (a2) snprintf(argv[argc++], sizeof f2, "%s", a2);
    argv[argc] = NULL;
    char why[256];
    return server_config_parse(cfg, argc, argv, why, sizeof why);
}

static void test_config(void **state) {
    (void)state;
    server_config cfg;
    server_config_defaults(&cfg);
    assert_int_equal(cfg.n_cors, 0);
    assert_int_equal(setenv("MARKET_CORS_ORIGIN", "https://a.example,http://localhost:3000", 1), 0);
    assert_int_equal(parse(&cfg, "--cors-origin=https://b.example", "--cors-origin=*"), SERVER_OK);
    assert_int_equal(cfg.n_cors, 4);
    assert_string_equal(cfg.cors_origins[0], "https://a.example");
    assert_string_equal(cfg.cors_origins[1], "http://localhost:3000");
    assert_string_equal(cfg.cors_origins[2], "https://b.example");
    assert_string_equal(cfg.cors_origins[3], "*");
    assert_int_equal(unsetenv("MARKET_CORS_ORIGIN"), 0);

    server_config_defaults(&cfg);
    assert_int_equal(parse(&cfg, "--cors-origin=https://a.example/", NULL), SERVER_ERR_INVALID);
    server_config_defaults(&cfg);
    assert_int_equal(parse(&cfg, "--cors-origin=https://a.example,,https://b.example", NULL),
                     SERVER_ERR_INVALID);
    server_config_defaults(&cfg);
    assert_int_equal(parse(&cfg, "--cors-origin=", NULL), SERVER_ERR_INVALID);

    /* SERVER_CORS_MAX origins fit; one more is refused */
    char list[600] = "--cors-origin=";
    for (int i = 0; i < SERVER_CORS_MAX; i++) {
        char one[32];
        snprintf(one, sizeof one, "%shttp://h%d", i ? "," : "", i);
        strcat(list, one);
    }
    server_config_defaults(&cfg);
    assert_int_equal(parse(&cfg, list, NULL), SERVER_OK);
    assert_int_equal(cfg.n_cors, SERVER_CORS_MAX);
    server_config_defaults(&cfg);
    assert_int_equal(parse(&cfg, list, "--cors-origin=http://one-more"), SERVER_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_origin_ok),
        cmocka_unit_test(test_allow),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
