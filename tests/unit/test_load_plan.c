/* test_load_plan.c - market-load's planning without a store: who buys what, in
 * which order, within which budget, for the distinct, contended and mixed mixes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "tools/load/load.h"

/* n_players players p0.. with funds(i), n_items items i0.. listed by
 * p<k % n_players> at price(k). */
static void world(load_plan *p, size_t n_players, int64_t (*funds)(size_t), size_t n_items,
                  int64_t (*price)(size_t)) {
    char id[32], seller[32];
    for (size_t i = 0; i < n_players; i++) {
        snprintf(id, sizeof id, "p%zu", i);
        assert_int_equal(load_plan_add_player(p, id, funds(i)), MARKET_OK);
    }
    for (size_t k = 0; k < n_items; k++) {
        snprintf(id, sizeof id, "i%zu", k);
        snprintf(seller, sizeof seller, "p%zu", k % n_players);
        assert_int_equal(load_plan_add_item(p, id, seller, price(k)), MARKET_OK);
    }
}

static int64_t funds_1000(size_t i) {
    (void)i;
    return 1000;
}
static int64_t funds_10(size_t i) {
    (void)i;
    return 10;
}
static int64_t funds_by_index(size_t i) {
    return 10 * (int64_t)i + 5; /* p0 poorest, all different */
}
static int64_t price_1_to_100(size_t k) {
    return (int64_t)(k % 100) + 1;
}
static int64_t price_50(size_t k) {
    (void)k;
    return 50;
}
static int64_t price_falling(size_t k) {
    return 1000 - (int64_t)k; /* the last item is the cheapest */
}
static int64_t price_falling_low(size_t k) {
    return 201 - (int64_t)k; /* 201 .. 2 for 200 items */
}

/* Every pick until the plan runs out: checks each against the snapshot and
 * returns how many there were; picked[k] counts item k. */
static size_t drain_distinct(load_plan *p, unsigned *picked, int64_t *spent) {
    load_pick pk;
    size_t n = 0;
    while (load_plan_next(p, &pk)) {
        assert_int_equal(pk.kind, LOAD_KIND_DISTINCT);
        assert_true(pk.item < p->n_items && pk.buyer < p->n_players);
        assert_true(pk.slot == LOAD_NONE);
        assert_string_not_equal(load_plan_player(p, pk.buyer), load_plan_seller(p, pk.item));
        picked[pk.item]++;
        spent[pk.buyer] += p->items[pk.item].price;
        n++;
    }
    assert_int_equal(pk.kind, LOAD_KIND_DISTINCT);
    return n;
}

/* ---- distinct ---- */

static void test_distinct_each_item_once_within_budgets(void **state) {
    (void)state;
    load_plan p = {0};
    world(&p, 20, funds_1000, 500, price_1_to_100);
    assert_int_equal(load_plan_build(&p, LOAD_MIX_DISTINCT, 4, 1), MARKET_OK);
    unsigned picked[500] = {0};
    int64_t spent[20] = {0};
    size_t n = drain_distinct(&p, picked, spent);
    for (size_t k = 0; k < 500; k++)
        assert_true(picked[k] <= 1);
    for (size_t i = 0; i < 20; i++) {
        assert_true(spent[i] <= 1000);
        assert_true(p.players[i].budget == 1000 - spent[i]);
    }
    /* 20 players x 1000 = 20000 of funds for 25250 of prices: some go unbought. */
    assert_true(n > 0 && p.unaffordable > 0);
    assert_int_equal(n + p.unaffordable, 500);
    load_plan_free(&p);
}

static void test_distinct_nobody_can_pay(void **state) {
    (void)state;
    load_plan p = {0};
    world(&p, 5, funds_10, 30, price_50);
    assert_int_equal(load_plan_build(&p, LOAD_MIX_DISTINCT, 2, 1), MARKET_OK);
    load_pick pk;
    assert_int_equal(load_plan_next(&p, &pk), 0);
    assert_int_equal(p.unaffordable, 30);
    load_plan_free(&p);
}

/* The seller is never the buyer, even when only the seller could pay. */
static void test_distinct_seller_never_buys_own(void **state) {
    (void)state;
    load_plan p = {0};
    assert_int_equal(load_plan_add_player(&p, "rich", 1000), MARKET_OK);
    assert_int_equal(load_plan_add_player(&p, "poor", 0), MARKET_OK);
    assert_int_equal(load_plan_add_item(&p, "axe", "rich", 5), MARKET_OK);
    assert_int_equal(load_plan_add_item(&p, "bow", "poor", 5), MARKET_OK);
    assert_int_equal(load_plan_build(&p, LOAD_MIX_DISTINCT, 1, 3), MARKET_OK);
    load_pick pk;
    assert_int_equal(load_plan_next(&p, &pk), 1);
    assert_string_equal(load_plan_item(&p, pk.item), "bow");
    assert_string_equal(load_plan_player(&p, pk.buyer), "rich");
    assert_int_equal(load_plan_next(&p, &pk), 0);
    assert_int_equal(p.unaffordable, 1);
    load_plan_free(&p);
}

/* The same snapshot and seed give the same picks; another seed others. */
static void test_distinct_seeded(void **state) {
    (void)state;
    load_pick a[50], b[50], c[50];
    load_pick *runs[3] = {a, b, c};
    const uint64_t seeds[3] = {7, 7, 8};
    for (int r = 0; r < 3; r++) {
        load_plan p = {0};
        world(&p, 30, funds_1000, 200, price_1_to_100);
        assert_int_equal(load_plan_build(&p, LOAD_MIX_DISTINCT, 4, seeds[r]), MARKET_OK);
        for (int i = 0; i < 50; i++)
            assert_int_equal(load_plan_next(&p, &runs[r][i]), 1);
        load_plan_free(&p);
    }
    int differs = 0;
    for (int i = 0; i < 50; i++) {
        assert_true(a[i].item == b[i].item && a[i].buyer == b[i].buyer);
        differs |= a[i].item != c[i].item || a[i].buyer != c[i].buyer;
    }
    assert_true(differs);
}

static void test_empty_plan(void **state) {
    (void)state;
    load_plan p = {0};
    assert_int_equal(load_plan_build(&p, LOAD_MIX_MIXED, 8, 1), MARKET_OK);
    load_pick pk;
    assert_int_equal(load_plan_next(&p, &pk), 0);
    assert_int_equal(pk.kind, LOAD_KIND_DISTINCT);
    assert_int_equal(load_plan_next(&p, &pk), 0);
    assert_int_equal(pk.kind, LOAD_KIND_CONTENDED);
    load_plan_free(&p);
}

/* ---- contended ---- */

/* 8 buyers: a window of 2 slots over the cheapest items, a pool of the 8
 * poorest players; an item stays in the window until it answers 200 or 404. */
static void test_contended_window_and_pool(void **state) {
    (void)state;
    load_plan p = {0};
    world(&p, 40, funds_by_index, 100, price_falling);
    assert_int_equal(load_plan_build(&p, LOAD_MIX_CONTENDED, 8, 1), MARKET_OK);
    assert_int_equal(p.n_window, 2);
    assert_int_equal(p.n_pool, 8);
    for (size_t i = 0; i < 40; i++)
        assert_int_equal(p.players[i].pool, i < 8); /* p0..p7 are the poorest */
    load_pick pk;
    unsigned seen_99 = 0, seen_98 = 0;
    for (int i = 0; i < 100; i++) {
        assert_int_equal(load_plan_next(&p, &pk), 1);
        assert_int_equal(pk.kind, LOAD_KIND_CONTENDED);
        assert_true(pk.item == 99 || pk.item == 98); /* the two cheapest */
        assert_true(pk.slot < 2);
        assert_true(p.players[pk.buyer].pool);
        assert_string_not_equal(load_plan_player(&p, pk.buyer), load_plan_seller(&p, pk.item));
        seen_99 += pk.item == 99;
        seen_98 += pk.item == 98;
        load_plan_answered(&p, &pk, 402, 0); /* refused for want of funds: still listed */
    }
    assert_true(seen_99 > 0 && seen_98 > 0);
    /* It sold: the next cheapest (97) takes its slot, and it is not sent again. */
    do
        assert_int_equal(load_plan_next(&p, &pk), 1);
    while (pk.item != 99);
    load_plan_answered(&p, &pk, 200, 0);
    unsigned seen_97 = 0;
    for (int i = 0; i < 100; i++) {
        assert_int_equal(load_plan_next(&p, &pk), 1);
        assert_true(pk.item == 98 || pk.item == 97);
        seen_97 += pk.item == 97;
    }
    assert_true(seen_97 > 0);
    load_plan_free(&p);
}

/* Answering 200 or 404 to every pick fights over every item once, in price
 * order, then the plan runs out. */
static void test_contended_runs_out_in_price_order(void **state) {
    (void)state;
    load_plan p = {0};
    world(&p, 10, funds_1000, 30, price_falling);
    assert_int_equal(load_plan_build(&p, LOAD_MIX_CONTENDED, 4, 1), MARKET_OK);
    assert_int_equal(p.n_window, 1);
    load_pick pk;
    size_t want = 29;
    for (int i = 0; i < 30; i++) {
        assert_int_equal(load_plan_next(&p, &pk), 1);
        assert_int_equal(pk.item, want--);
        load_plan_answered(&p, &pk, i % 2 ? 200 : 404, 0);
    }
    assert_int_equal(load_plan_next(&p, &pk), 0);
    assert_int_equal(pk.kind, LOAD_KIND_CONTENDED);
    assert_int_equal(p.window_live, 0);
    load_plan_free(&p);
}

/* ---- mixed ---- */

/* Mixed alternates distinct and contended; distinct picks leave the pool's
 * players to the contended ones, and never take an item in the window. */
static void test_mixed_alternates_and_keeps_apart(void **state) {
    (void)state;
    load_plan p = {0};
    world(&p, 40, funds_by_index, 200, price_falling_low);
    assert_int_equal(load_plan_build(&p, LOAD_MIX_MIXED, 8, 2), MARKET_OK);
    unsigned window_items[200] = {0}, distinct_items[200] = {0}, n_distinct = 0;
    load_pick pk;
    for (int i = 0; i < 60; i++) {
        int got = load_plan_next(&p, &pk);
        assert_int_equal(pk.kind, i % 2 ? LOAD_KIND_CONTENDED : LOAD_KIND_DISTINCT);
        if (!got) continue; /* distinct: the buyers outside the pool can run out */
        if (pk.kind == LOAD_KIND_DISTINCT) {
            assert_false(p.players[pk.buyer].pool);
            distinct_items[pk.item]++;
            n_distinct++;
        } else {
            assert_true(p.players[pk.buyer].pool);
            window_items[pk.item]++;
        }
    }
    assert_true(n_distinct > 0);
    for (size_t k = 0; k < 200; k++) {
        assert_true(distinct_items[k] <= 1);
        assert_false(distinct_items[k] && window_items[k]);
    }
    load_plan_free(&p);
}

/* Flash: the house never buys, nobody is picked past the limit (200s and
 * requests in flight), a buyer who cannot pay is left alone, and a 409
 * (sold out) ends the plan. */
static void test_flash_limits_and_sold_out(void **state) {
    (void)state;
    load_plan p = {0};
    assert_int_equal(load_plan_add_player(&p, "A", 100), MARKET_OK);
    assert_int_equal(load_plan_add_player(&p, "game", 0), MARKET_OK);
    assert_int_equal(load_plan_add_player(&p, "B", 100), MARKET_OK);
    assert_int_equal(load_plan_add_player(&p, "poor", 5), MARKET_OK);
    assert_int_equal(load_plan_build(&p, LOAD_MIX_FLASH, 10, 1), MARKET_OK);
    assert_int_equal(load_plan_flash(&p, "flash-1", 10, 2, "game", 10, 1), MARKET_OK);
    assert_int_equal(p.n_flash, 2); /* A and B: the house and the poor one are out */
    load_pick pk[8];
    size_t n = 0;
    while (n < 8 && load_plan_next(&p, &pk[n])) {
        assert_int_equal(pk[n].kind, LOAD_KIND_FLASH);
        assert_string_not_equal(load_plan_player(&p, pk[n].buyer), "game");
        n++;
    }
    assert_int_equal(n, 4); /* two each in flight: the limit */
    load_plan_answered(&p, &pk[0], 200, 0);
    load_pick more;
    assert_int_equal(load_plan_next(&p, &more), 0); /* 1 bought + 1 in flight = 2 */
    load_plan_answered(&p, &pk[1], 503, 0);         /* that one did not buy */
    assert_int_equal(load_plan_next(&p, &more), 1);
    load_plan_answered(&p, &more, 409, 0); /* sold out */
    assert_int_equal(load_plan_next(&p, &more), 0);
    assert_true(p.flash_over);
    load_plan_free(&p);
}

/* Direct: proposals go between two players of one realm, never to oneself, with 1..5 funds
 * each way; a proposal answered 201 is accepted or declined later by the player offered it,
 * once; one refused is forgotten; a realm with one player proposes nothing. */
static void test_direct_pairs_and_answers(void **state) {
    (void)state;
    load_plan p = {0};
    assert_int_equal(load_plan_add_realm(&p, "r0"), MARKET_OK);
    assert_int_equal(load_plan_add_player(&p, "A", 100), MARKET_OK);
    assert_int_equal(load_plan_add_player(&p, "B", 100), MARKET_OK);
    assert_int_equal(load_plan_add_realm(&p, "r1"), MARKET_OK);
    assert_int_equal(load_plan_add_player(&p, "C", 100), MARKET_OK);
    assert_int_equal(load_plan_add_player(&p, "D", 100), MARKET_OK);
    assert_int_equal(load_plan_build(&p, LOAD_MIX_DIRECT, 4, 7), MARKET_OK);
    load_pick pk;
    int64_t next_id = 1;
    size_t accepts = 0, declines = 0;
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(load_plan_next(&p, &pk), 1);
        if (pk.kind == LOAD_KIND_PROPOSE) {
            assert_true(pk.buyer != pk.other && pk.other < p.n_players);
            assert_int_equal(p.players[pk.buyer].realm, p.players[pk.other].realm);
            assert_true(pk.quantity >= 1 && pk.quantity <= 5 && pk.price >= 1 && pk.price <= 5);
            /* every third is refused (a 402): not remembered */
            int status = i % 3 ? 201 : 402;
            load_plan_answered(&p, &pk, status, status == 201 ? next_id++ : 0);
            continue;
        }
        assert_true(pk.kind == LOAD_KIND_ACCEPT || pk.kind == LOAD_KIND_DECLINE);
        assert_true(pk.order >= 1 && pk.order < next_id);
        accepts += pk.kind == LOAD_KIND_ACCEPT;
        declines += pk.kind == LOAD_KIND_DECLINE;
        load_plan_answered(&p, &pk, 200, 0);
    }
    assert_true(accepts > declines && declines > 0);
    /* each proposal remembered is closed at most once: what is left plus what was closed */
    assert_int_equal(p.n_open + accepts + declines, (size_t)(next_id - 1));
    load_plan_free(&p);

    load_plan one = {0};
    assert_int_equal(load_plan_add_player(&one, "A", 100), MARKET_OK);
    assert_int_equal(load_plan_build(&one, LOAD_MIX_DIRECT, 4, 7), MARKET_OK);
    assert_int_equal(load_plan_next(&one, &pk), 0);
    load_plan_free(&one);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_pairs_and_answers),
        cmocka_unit_test(test_distinct_each_item_once_within_budgets),
        cmocka_unit_test(test_distinct_nobody_can_pay),
        cmocka_unit_test(test_distinct_seller_never_buys_own),
        cmocka_unit_test(test_distinct_seeded),
        cmocka_unit_test(test_empty_plan),
        cmocka_unit_test(test_contended_window_and_pool),
        cmocka_unit_test(test_contended_runs_out_in_price_order),
        cmocka_unit_test(test_mixed_alternates_and_keeps_apart),
        cmocka_unit_test(test_flash_limits_and_sold_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
