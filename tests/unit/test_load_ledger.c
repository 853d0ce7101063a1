/* test_load_ledger.c - unit tests for tools/load/ledger.c: the trade audit
 * of a market-load run, and its verdict (load_judge_trades). No Redis. */
#include "tools/load/load.h"

#include "tests/helpers/cmocka_all.h"

#include <stdio.h>
#include <string.h>

/* A plan of two realms: A, B, C in realm 0 (100 each), A, D in realm 1 (50 each). */
static void plan_two_realms(load_plan *p) {
    memset(p, 0, sizeof *p);
    assert_int_equal(load_plan_add_realm(p, "r0"), 0);
    assert_int_equal(load_plan_add_player(p, "C", 100), 0);
    assert_int_equal(load_plan_add_player(p, "A", 100), 0);
    assert_int_equal(load_plan_add_player(p, "B", 100), 0);
    assert_int_equal(load_plan_add_realm(p, "r1"), 0);
    assert_int_equal(load_plan_add_player(p, "D", 50), 0);
    assert_int_equal(load_plan_add_player(p, "A", 50), 0);
}

/* Records a trade of total (fee of it to house) in realm. */
static void trade(load_ledger *l, unsigned realm, const char *buyer, const char *seller,
                  int64_t total, int64_t fee, const char *house) {
    market_trade t = {.total = total, .fee = fee};
    snprintf(t.buyer, sizeof t.buyer, "%s", buyer);
    snprintf(t.seller, sizeof t.seller, "%s", seller);
    snprintf(t.house, sizeof t.house, "%s", house);
    load_ledger_trade(l, realm, &t);
}

/* Funds that moved exactly as the trades say balance, per realm: A of r0
 * and A of r1 are two players. */
static void test_trades_account_for_funds(void **state) {
    (void)state;
    load_plan p;
    plan_two_realms(&p);
    load_ledger l;
    assert_int_equal(load_ledger_init(&l, &p), 0);
    trade(&l, 0, "A", "B", 30, 0, ""); /* A pays B 30 in r0 */
    trade(&l, 0, "C", "A", 5, 1, "B"); /* A is paid 4, the house B the cut of 1 */
    trade(&l, 1, "A", "D", 7, 0, "");  /* in r1 */
    load_ledger_after(&l, 0, "A", 74);
    load_ledger_after(&l, 0, "B", 131);
    load_ledger_after(&l, 0, "C", 95);
    load_ledger_after(&l, 1, "A", 43);
    load_ledger_after(&l, 1, "D", 57);
    load_ledger_close(&l);
    assert_int_equal(l.recorded, 3);
    assert_int_equal(l.mismatched, 0);
    assert_int_equal(l.unknown, 0);
    assert_null(l.first_bad);
    load_verdict v = {.ok = 1, .left = 3};
    load_judge_trades(&v, &l);
    assert_true(v.trades);
    assert_true(v.ok);
    load_ledger_free(&l);
    load_plan_free(&p);
}

/* Funds moved without a trade record, a trade without an item that left
 * the market, a player not read after the run, or an unknown party: each
 * breaks the verdict. */
static void test_unaccounted_moves_break_it(void **state) {
    (void)state;
    load_plan p;
    plan_two_realms(&p);
    load_ledger l;
    assert_int_equal(load_ledger_init(&l, &p), 0);
    trade(&l, 0, "A", "B", 30, 0, "");
    load_ledger_after(&l, 0, "A", 60); /* 40 left A: 10 without a record */
    load_ledger_after(&l, 0, "B", 130);
    load_ledger_after(&l, 0, "C", 100);
    load_ledger_after(&l, 1, "A", 50);
    /* D of r1 is not read after the run */
    load_ledger_close(&l);
    assert_int_equal(l.mismatched, 2);
    assert_string_equal(l.first_bad, "A");
    load_verdict v = {.ok = 1, .left = 1};
    load_judge_trades(&v, &l);
    assert_false(v.trades);
    assert_false(v.ok);

    load_ledger_free(&l);
    assert_int_equal(load_ledger_init(&l, &p), 0);
    trade(&l, 1, "A", "ghost", 1, 0, ""); /* a party the run did not know */
    load_ledger_after(&l, 0, "nobody", 1);
    load_ledger_close(&l);
    assert_int_equal(l.unknown, 2);
    v = (load_verdict){.ok = 1, .left = 1};
    load_judge_trades(&v, &l);
    assert_false(v.trades);

    /* balanced, but one trade more than the items that left the market */
    load_ledger_free(&l);
    assert_int_equal(load_ledger_init(&l, &p), 0);
    load_ledger_close(&l);
    for (size_t i = 0; i < l.n; i++) l.rows[i].seen = 1, l.rows[i].after = l.rows[i].before;
    load_ledger_close(&l);
    assert_int_equal(l.mismatched, 0);
    v = (load_verdict){.ok = 1, .left = 1};
    load_judge_trades(&v, &l); /* recorded 0, left 1 */
    assert_false(v.trades);
    load_ledger_free(&l);
    load_plan_free(&p);
}

/* A realm whose history no longer keeps the trade the run started at was
 * trimmed past the mark (ids compared as numbers: 10-0 is after 9-5); one
 * whose run started before any trade lost one to any trim. */
static void test_mark_trimmed(void **state) {
    (void)state;
    static const struct {
        const char *mark, *oldest;
        uint64_t gone; /* trades the history trimmed */
        unsigned trimmed;
    } cases[] = {
        {"", "", 0, 0},       {"", "7-1", 0, 0},    {"", "7-1", 3, 1},    {"5-3", "5-3", 9, 0},
        {"5-3", "5-2", 0, 0}, {"5-3", "1-9", 0, 0}, {"5-3", "5-4", 1, 1}, {"5-3", "6-0", 1, 1},
        {"9-5", "10-0", 1, 1}, {"5-3", "", 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        load_ledger l = {0};
        load_ledger_mark(&l, cases[i].mark, cases[i].oldest, cases[i].gone);
        if (l.trimmed != cases[i].trimmed)
            fprintf(stderr, "mark %s oldest %s\n", cases[i].mark, cases[i].oldest);
        assert_int_equal(l.trimmed, cases[i].trimmed);
    }
}

/* Trades the history trimmed cannot account for the run: the verdict says
 * so (trades_trimmed) and leaves v.ok alone, however the rows disagree; the
 * same rows with the mark kept break it. */
static void test_trimmed_history_cannot_account(void **state) {
    (void)state;
    load_plan p;
    plan_two_realms(&p);
    load_ledger l;
    assert_int_equal(load_ledger_init(&l, &p), 0);
    trade(&l, 0, "A", "B", 30, 0, "");      /* the one trade the history still has */
    load_ledger_after(&l, 0, "A", 20);      /* 80 left A: 50 in trades trimmed away */
    load_ledger_after(&l, 0, "B", 180);
    load_ledger_after(&l, 0, "C", 100);
    load_ledger_after(&l, 1, "A", 50);
    load_ledger_after(&l, 1, "D", 50);
    load_ledger_mark(&l, "", "", 0);            /* r1: no trade before the run */
    load_ledger_mark(&l, "1700000000000-0", "1700000000123-4", 5); /* r0: trimmed */
    load_ledger_close(&l);
    assert_int_equal(l.trimmed, 1);
    assert_int_equal(l.mismatched, 2);
    load_verdict v = {.ok = 1, .trades = 1, .left = 3};
    load_judge_trades(&v, &l);
    assert_true(v.trades_trimmed);
    assert_false(v.trades);
    assert_true(v.ok);
    assert_int_equal(load_verdict_exit(&v), 0);
    l.trimmed = 0;
    v = (load_verdict){.ok = 1, .trades = 1, .left = 3};
    load_judge_trades(&v, &l);
    assert_false(v.trades_trimmed);
    assert_false(v.trades);
    assert_false(v.ok);
    load_ledger_free(&l);
    load_plan_free(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trades_account_for_funds),
        cmocka_unit_test(test_unaccounted_moves_break_it),
        cmocka_unit_test(test_mark_trimmed),
        cmocka_unit_test(test_trimmed_history_cannot_account),
    };
    return cmocka_run_group_tests_name("load ledger (unit)", tests, NULL, NULL);
}
