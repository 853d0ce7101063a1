/* test_load_ledger.c - unit tests for tools/load/ledger.c: the trade audit
 * of a market-load run, and its verdict (load_judge_trades). No Redis. */
#include "tools/load/load.h"

#include "tests/helpers/cmocka_all.h"

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

/* Funds that moved exactly as the trades say balance, per realm: A of r0
 * and A of r1 are two players. */
static void test_trades_account_for_funds(void **state) {
    (void)state;
    load_plan p;
    plan_two_realms(&p);
    load_ledger l;
    assert_int_equal(load_ledger_init(&l, &p), 0);
    load_ledger_trade(&l, 0, "A", "B", 30); /* A pays B 30 in r0 */
    load_ledger_trade(&l, 0, "C", "A", 5);
    load_ledger_trade(&l, 1, "A", "D", 7);  /* in r1 */
    load_ledger_after(&l, 0, "A", 75);
    load_ledger_after(&l, 0, "B", 130);
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
    load_ledger_trade(&l, 0, "A", "B", 30);
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
    load_ledger_trade(&l, 1, "A", "ghost", 1); /* a party the run did not know */
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trades_account_for_funds),
        cmocka_unit_test(test_unaccounted_moves_break_it),
    };
    return cmocka_run_group_tests_name("load ledger (unit)", tests, NULL, NULL);
}
