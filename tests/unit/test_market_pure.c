/* test_market_pure.c - the parts of market/ that need no Redis, which were
 * reachable only through a real redis-server before: building and checking
 * a world to seed, reading replies into the values the rules take, and the
 * checks market_new() makes of its configuration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "market/market_store.h"

/* ---- a world to seed ---- */

static void test_world_check_finds_duplicates_and_strangers(void **state) {
    (void)state;
    char why[128];
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 100), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_item(w, "A", "axe"), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "B", "bow", 5), MARKET_OK);
    assert_int_equal(market_world_check(w, why, sizeof why), MARKET_OK);
    assert_string_equal(why, "");

    assert_int_equal(market_world_add_listing(w, "B", "axe", 7), MARKET_OK); /* axe twice */
    assert_int_equal(market_world_check(w, why, sizeof why), MARKET_ERR_DUPLICATE);
    assert_non_null(strstr(why, "'axe' appears twice"));
    market_world_free(w);

    w = market_world_new();
    assert_int_equal(market_world_add_player(w, "A", NULL, 1), MARKET_OK);
    assert_int_equal(market_world_add_item(w, "Z", "ring"), MARKET_OK);
    assert_int_equal(market_world_check(w, why, sizeof why), MARKET_ERR_NO_PLAYER);
    assert_non_null(strstr(why, "unknown player 'Z'"));
    assert_int_equal(market_world_add_player(w, "A", NULL, 2), MARKET_OK);
    assert_int_equal(market_world_check(w, NULL, 0), MARKET_ERR_DUPLICATE); /* why optional */
    market_world_free(w);
}

static void test_world_add_refuses_bad_values(void **state) {
    (void)state;
    market_world *w = market_world_new();
    assert_int_equal(market_world_add_player(w, "bad id", NULL, 1), MARKET_ERR_INVALID);
    assert_int_equal(market_world_add_player(w, "A", NULL, -1), MARKET_ERR_INVALID);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 0), MARKET_ERR_INVALID);
    assert_int_equal(market_world_add_listing(w, "A", "axe", MARKET_PRICE_MAX + 1),
                     MARKET_ERR_INVALID);
    assert_int_equal(market_world_add_listing(w, "A", "axe", MARKET_PRICE_MAX), MARKET_OK);
    assert_int_equal(market_world_generate(w, 0, 5, 1, 1, 2, 1), MARKET_ERR_INVALID);
    assert_int_equal(market_world_generate(w, 2, 5, 1, 3, 2, 1), MARKET_ERR_INVALID);
    market_world_free(w);
    market_world_free(NULL);
}

/* A generated world checks out; generating it twice into one world names
 * every player and item twice, which the check catches. */
static void test_world_generate_checks_out(void **state) {
    (void)state;
    char why[128];
    market_world *w = market_world_new();
    assert_int_equal(market_world_generate(w, 7, 100, 1000, 10, 20, 42), MARKET_OK);
    assert_int_equal(market_world_check(w, why, sizeof why), MARKET_OK);
    assert_int_equal(market_world_generate(w, 7, 100, 1000, 10, 20, 43), MARKET_OK);
    assert_int_equal(market_world_check(w, why, sizeof why), MARKET_ERR_DUPLICATE);
    assert_non_null(strstr(why, "player 'p"));
    market_world_free(w);
}

/* ---- replies into values ---- */

static redisReply reply(int type, const char *s) {
    redisReply r = {0};
    r.type = type;
    r.str = (char *)s;
    r.len = s ? strlen(s) : 0;
    return r;
}

static void test_reply_price(void **state) {
    (void)state;
    static const struct {
        int type;
        const char *s;
        int64_t want;
    } cases[] = {
        {REDIS_REPLY_NIL, NULL, MARKET__NOT_LISTED},
        {REDIS_REPLY_STRING, "500", 500},
        {REDIS_REPLY_STRING, "1", 1},
        {REDIS_REPLY_STRING, "1000000000000", MARKET_PRICE_MAX},
        {REDIS_REPLY_STRING, "1000000000001", MARKET__PRICE_UNREADABLE},
        {REDIS_REPLY_STRING, "0", MARKET__PRICE_UNREADABLE},
        {REDIS_REPLY_STRING, "1.5", MARKET__PRICE_UNREADABLE},
        {REDIS_REPLY_STRING, "-3", MARKET__PRICE_UNREADABLE},
        {REDIS_REPLY_STRING, "inf", MARKET__PRICE_UNREADABLE},
        {REDIS_REPLY_STRING, "", MARKET__PRICE_UNREADABLE},
        {REDIS_REPLY_ERROR, "ERR wrong", MARKET__PRICE_UNREADABLE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisReply r = reply(cases[i].type, cases[i].s);
        assert_int_equal(market__reply_price(&r), cases[i].want);
    }
}

static void test_reply_party(void **state) {
    (void)state;
    redisReply r = reply(REDIS_REPLY_NIL, NULL);
    market__party p = market__reply_party(&r);
    assert_int_equal(p.known, MARKET__ABSENT);
    r = reply(REDIS_REPLY_STRING, "-9223372036854775808");
    p = market__reply_party(&r);
    assert_int_equal(p.known, MARKET__PRESENT);
    assert_int_equal(p.funds, INT64_MIN);
    r = reply(REDIS_REPLY_STRING, "9223372036854775808"); /* one past the top */
    assert_int_equal(market__reply_party(&r).known, MARKET__UNREADABLE);
    r = reply(REDIS_REPLY_STRING, "lots");
    assert_int_equal(market__reply_party(&r).known, MARKET__UNREADABLE);
    r = reply(REDIS_REPLY_STRING, "12 ");
    assert_int_equal(market__reply_party(&r).known, MARKET__UNREADABLE);
    r = reply(REDIS_REPLY_INTEGER, NULL);
    assert_int_equal(market__reply_party(&r).known, MARKET__UNREADABLE);
}

/* ---- market_new's configuration ---- */

/* WAIT's timeout matters only with min_replicas_ack: then it must be above 0 and below the
 * socket timeout (its default, half of it); without it, any redis timeout will do. */
static void test_market_new_replica_ack_timeout(void **state) {
    (void)state;
    int err = 0;
    lock_client *l = lock_local_new(&err);
    assert_non_null(l);
    market_config cfg = {.redis_timeout_ms = 1, .lock_ttl_ms = 1000, .acquire_timeout_ms = 10};
    assert_int_equal(rconn_addr_parse("redis://127.0.0.1:1", &cfg.redis), RCONN_OK);
    market *m = market_new(&cfg, l, &err); /* half of 1 ms is 0: fine without replicas */
    assert_non_null(m);
    market_free(m);
    cfg.min_replicas_ack = 1;
    assert_null(market_new(&cfg, l, &err));
    assert_int_equal(err, MARKET_ERR_INVALID);
    cfg.redis_timeout_ms = 500;
    assert_non_null(m = market_new(&cfg, l, &err)); /* default: 250 ms */
    market_free(m);
    cfg.replica_ack_timeout_ms = 500;
    assert_null(market_new(&cfg, l, &err));
    cfg.replica_ack_timeout_ms = 499;
    assert_non_null(m = market_new(&cfg, l, &err));
    market_free(m);
    lock_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_world_check_finds_duplicates_and_strangers),
        cmocka_unit_test(test_world_add_refuses_bad_values),
        cmocka_unit_test(test_world_generate_checks_out),
        cmocka_unit_test(test_reply_price),
        cmocka_unit_test(test_reply_party),
        cmocka_unit_test(test_market_new_replica_ack_timeout),
    };
    return cmocka_run_group_tests_name("market pure parts (unit)", tests, NULL, NULL);
}
