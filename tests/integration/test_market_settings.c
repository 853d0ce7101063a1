/* test_market_settings.c - a realm's settings and the cut of every sale,
 * against a real redis-server, under each strategy: reading and setting
 * them and what is refused; a listing's purchase, units, and a buy across
 * sellers paying the house its cut, on the receipt, in the trade record and
 * in a replay; the house buying and selling itself; a change of the
 * settings between a batch's decision and its commit (the batch is decided
 * again under the new ones); and 32 buyers at once, every player's funds
 * then what the trade records say.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/market_fx.h"

#define REALM MARKET_REALM_DEFAULT
#define FUNDS_B 100000
#define FUNDS_D 1000000

/* ---- helpers ---- */

static void set_cut(market_conn *c, int64_t bps, const char *house) {
    market_settings st = {.fee_bps = bps};
    snprintf(st.house, sizeof st.house, "%s", house ? house : "");
    assert_int_equal(market_settings_set(c, REALM, &st), MARKET_OK);
}

/* Armed writes: the cut becomes 10%; C's funds go to B. */
static void cut_to_1000(void) {
    (void)th_fx_num("HSET market:{main}:settings fee_bps 1000");
}
static void c_pays_b(void) {
    long long f = th_fx_num("HGET users:{main}:C funds");
    (void)th_fx_num("HINCRBY users:{main}:C funds %lld", -f);
    (void)th_fx_num("HINCRBY users:{main}:B funds %lld", f);
}

/* A sells an axe at 500; C 20 of its 50 potions at 25, G 10 potions at 30;
 * the house "game" 5 of its 10 gems at 100. B and D have funds. */
static void seed(market_conn *c) {
    (void)th_fx_num("FLUSHALL");
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", "Bob", FUNDS_B), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "C", "Carol", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "D", "Dave", FUNDS_D), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "G", "Gus", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "game", "The house", 1000), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 500), MARKET_OK);
    assert_int_equal(market_world_add_stack(w, "C", "potion", 30), MARKET_OK);
    assert_int_equal(market_world_add_units_listing(w, "C", "potion", 25, 20), MARKET_OK);
    assert_int_equal(market_world_add_units_listing(w, "G", "potion", 30, 10), MARKET_OK);
    assert_int_equal(market_world_add_stack(w, "game", "gem", 5), MARKET_OK);
    assert_int_equal(market_world_add_units_listing(w, "game", "gem", 100, 5), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

#define FUNDS_ALL (FUNDS_B + FUNDS_D + 1000)

static int fx_setup(void **state) {
    th_market *f = th_market_new((market_config){.redis_timeout_ms = 1000,
                                                 .lock_ttl_ms = 5000,
                                                 .acquire_timeout_ms = 5000,
                                                 .test_decided = th_fx_on_decided});
    if (!f) return -1;
    th_fx_arm(NULL);
    seed(f->c);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    th_market_free(*state);
    return 0;
}

/* Total funds, every player's, as the audit reads them: conserved. */
static void assert_conserved(market_conn *c) {
    market_audit_report a;
    assert_int_equal(market_audit(c, REALM, &a), MARKET_OK);
    assert_int_equal(a.total_funds, FUNDS_ALL);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.players, 6);
}

/* ---- tests ---- */

/* No settings: no cut, the default house. Set, read back; a house that is
 * no player, or a cut out of range, is refused and changes nothing. */
static void test_settings_read_set_and_refused(void **state) {
    th_market *f = *state;
    market_settings st;
    assert_int_equal(market_settings_get(f->c, REALM, &st), MARKET_OK);
    assert_int_equal(st.fee_bps, 0);
    assert_string_equal(st.house, MARKET_SALE_HOUSE);
    set_cut(f->c, 500, NULL);
    assert_int_equal(market_settings_get(f->c, REALM, &st), MARKET_OK);
    assert_int_equal(st.fee_bps, 500);
    assert_string_equal(st.house, "game");
    market_settings bad = {.fee_bps = 100};
    snprintf(bad.house, sizeof bad.house, "nobody");
    assert_int_equal(market_settings_set(f->c, REALM, &bad), MARKET_ERR_NO_PLAYER);
    bad = (market_settings){.fee_bps = MARKET_FEE_BPS_MAX + 1};
    assert_int_equal(market_settings_set(f->c, REALM, &bad), MARKET_ERR_INVALID);
    bad = (market_settings){.fee_bps = -1};
    assert_int_equal(market_settings_set(f->c, REALM, &bad), MARKET_ERR_INVALID);
    snprintf(bad.house, sizeof bad.house, "no spaces");
    bad.fee_bps = 1;
    assert_int_equal(market_settings_set(f->c, REALM, &bad), MARKET_ERR_INVALID);
    assert_int_equal(market_settings_get(f->c, REALM, &st), MARKET_OK);
    assert_int_equal(st.fee_bps, 500);
    assert_string_equal(st.house, "game");
    /* settings the store holds that are no settings: unreadable, not guessed */
    (void)th_fx_num("HSET market:{main}:settings fee_bps 10001");
    assert_int_equal(market_settings_get(f->c, REALM, &st), MARKET_ERR_STORE);
    market_purchase_result r;
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r), MARKET_ERR_STORE);
    assert_int_equal(th_fx_funds(f->c, "B"), FUNDS_B); /* nothing moved */
    set_cut(f->c, 0, "G");
    assert_int_equal(market_settings_get(f->c, REALM, &st), MARKET_OK);
    assert_string_equal(st.house, "G");
}

/* 5% of 500: the seller gets 475, the house 25; the receipt, the trade
 * record and a replay (after the cut changed) say 25. */
static void test_purchase_pays_the_cut(void **state) {
    th_market *f = *state;
    set_cut(f->c, 500, NULL);
    market_idem k = {"axe-1", "fp-axe"};
    market_purchase_result r, again;
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &r), MARKET_OK);
    assert_int_equal(r.price, 500);
    assert_int_equal(r.fee, 25);
    assert_int_equal(r.buyer_funds, FUNDS_B - 500);
    assert_int_equal(th_fx_funds(f->c, "A"), 475);
    assert_int_equal(th_fx_funds(f->c, "game"), 1000 + 25);
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, r.trade_id, &t), MARKET_OK);
    assert_int_equal(t.total, 500);
    assert_int_equal(t.fee, 25);
    assert_string_equal(t.house, "game");
    set_cut(f->c, 0, NULL);
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &again), MARKET_OK);
    assert_int_equal(again.replayed, 1);
    assert_int_equal(again.fee, 25);
    assert_string_equal(again.trade_id, r.trade_id);
    assert_int_equal(th_fx_funds(f->c, "A"), 475);
    assert_conserved(f->c);
}

/* Units of one listing, then a buy across two sellers: each part's cut
 * rounds down on its own total. */
static void test_units_and_buys_across_sellers_pay_the_cut(void **state) {
    th_market *f = *state;
    set_cut(f->c, 500, NULL);
    market_purchase_result r;
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "C", "potion", 5, -1, NULL, &r),
                     MARKET_OK);
    assert_int_equal(r.fee, 6); /* 5% of 125 is 6.25 */
    assert_int_equal(th_fx_funds(f->c, "C"), 119);
    market_buy_result b;
    assert_int_equal(market_buy_units(f->c, REALM, "D", "potion", 20, 30, NULL, &b), MARKET_OK);
    assert_int_equal(b.n_fills, 2);
    assert_string_equal(b.fill[0].seller, "C");
    assert_int_equal(b.fill[0].quantity, 15);
    assert_int_equal(b.fill[0].fee, 18); /* of 375 */
    assert_string_equal(b.fill[1].seller, "G");
    assert_int_equal(b.fill[1].fee, 7); /* of 150 */
    assert_int_equal(b.total, 525);
    assert_int_equal(b.fee, 25);
    assert_int_equal(th_fx_funds(f->c, "C"), 119 + 375 - 18);
    assert_int_equal(th_fx_funds(f->c, "G"), 150 - 7);
    assert_int_equal(th_fx_funds(f->c, "game"), 1000 + 6 + 25);
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, b.fill[1].trade_id, &t), MARKET_OK);
    assert_int_equal(t.fee, 7);
    assert_conserved(f->c);
}

/* The house buys (pays the total, gets its cut back) and sells (keeps the
 * whole total), in one market like anyone else. */
static void test_the_house_buys_and_sells(void **state) {
    th_market *f = *state;
    set_cut(f->c, 1000, NULL);
    market_purchase_result r;
    assert_int_equal(market_purchase(f->c, REALM, "game", "A", "axe", -1, &r), MARKET_OK);
    assert_int_equal(r.fee, 50);
    assert_int_equal(th_fx_funds(f->c, "game"), 1000 - 500 + 50);
    assert_int_equal(th_fx_funds(f->c, "A"), 450);
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "game", "gem", 5, -1, NULL, &r),
                     MARKET_OK);
    assert_int_equal(r.fee, 50);
    assert_int_equal(th_fx_funds(f->c, "game"), 550 + 500);
    market_buy_result b;
    assert_int_equal(market_buy_units(f->c, REALM, "game", "potion", 25, 30, NULL, &b), MARKET_OK);
    assert_int_equal(b.fee, 50 + 15); /* of 500 and of 150 */
    assert_int_equal(th_fx_funds(f->c, "game"), 1050 - 650 + 65);
    /* the house as one of the sellers of a buy across sellers */
    (void)th_fx_num("HSET stacks:{main}:G gem 5");
    market_list_result lr;
    assert_int_equal(market_list_units(f->c, REALM, "G", "gem", 5, 90, NULL, &lr), MARKET_OK);
    assert_int_equal(market_list_units(f->c, REALM, "game", "gem", 5, 100, NULL, &lr), MARKET_OK);
    assert_int_equal(market_buy_units(f->c, REALM, "D", "gem", 8, 100, NULL, &b), MARKET_OK);
    assert_int_equal(b.fee, 45 + 30); /* of 450 from G, of 300 from the house */
    assert_int_equal(th_fx_funds(f->c, "G"), 150 - 15 + 450 - 45);
    assert_int_equal(th_fx_funds(f->c, "game"), 465 + 300 + 45);
    assert_conserved(f->c);
}

/* The cut changes after a batch was decided and before it commits: the
 * commit is refused (the settings are watched) and the batch is decided
 * again under the new cut. */
static void test_cut_changed_before_the_commit(void **state) {
    th_market *f = *state;
    set_cut(f->c, 500, NULL);
    th_fx_arm(cut_to_1000);
    market_purchase_result r;
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r), MARKET_OK);
    assert_false(th_fx_armed());       /* the hook ran */
    assert_true(th_fx_decided() >= 2); /* and the batch was decided again */
    assert_int_equal(r.fee, 50);  /* under the new cut */
    assert_int_equal(th_fx_funds(f->c, "A"), 450);
    assert_int_equal(th_fx_funds(f->c, "game"), 1050);
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, r.trade_id, &t), MARKET_OK);
    assert_int_equal(t.fee, 50);
    assert_conserved(f->c);
}

/* A listing fee of 1%: a seller who cannot pay it is refused, nothing
 * moved; one who can pays it to the house, on the receipt and in a replay;
 * taking the listing back gives nothing back; the house listing pays
 * itself. */
static void test_listing_fee(void **state) {
    th_market *f = *state;
    market_settings st = {.list_fee_bps = 100};
    assert_int_equal(market_settings_set(f->c, REALM, &st), MARKET_OK);
    assert_int_equal(market_settings_get(f->c, REALM, &st), MARKET_OK);
    assert_int_equal(st.list_fee_bps, 100);
    assert_int_equal(st.fee_bps, 0);
    market_list_result lr;
    assert_int_equal(market_list_units(f->c, REALM, "C", "potion", 10, 25, NULL, &lr),
                     MARKET_ERR_INSUFFICIENT_FUNDS); /* a fee of 2, and no funds */
    assert_int_equal(th_fx_num("HGET stacks:{main}:C potion"), 30);
    assert_int_equal(th_fx_num("HGET market:{main}:units potion.C"), 20);
    market_purchase_result r;
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "C", "potion", 5, -1, NULL, &r),
                     MARKET_OK);
    assert_int_equal(r.fee, 0); /* no cut: the fee is the listing's alone */
    assert_int_equal(th_fx_funds(f->c, "C"), 125);
    market_idem k = {"list-1", "fp-list"};
    assert_int_equal(market_list_units(f->c, REALM, "C", "potion", 10, 25, &k, &lr), MARKET_OK);
    assert_int_equal(lr.fee, 2); /* 1% of 250, rounded down */
    assert_int_equal(lr.quantity, 25);
    assert_int_equal(th_fx_funds(f->c, "C"), 123);
    assert_int_equal(th_fx_funds(f->c, "game"), 1002);
    assert_int_equal(market_list_units(f->c, REALM, "C", "potion", 10, 25, &k, &lr), MARKET_OK);
    assert_int_equal(lr.replayed, 1);
    assert_int_equal(lr.fee, 2);
    assert_int_equal(th_fx_funds(f->c, "C"), 123); /* once */
    /* C's funds go elsewhere after its next listing was decided and before it commits: the
     * commit is refused (the sellers are watched), and decided again: C cannot pay */
    th_fx_arm(c_pays_b);
    assert_int_equal(market_list_units(f->c, REALM, "C", "potion", 10, 25, NULL, &lr),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_false(th_fx_armed());
    assert_true(th_fx_decided() >= 1);
    assert_int_equal(th_fx_funds(f->c, "C"), 0);
    assert_int_equal(th_fx_num("HGET market:{main}:units potion.C"), 25); /* nothing listed */
    int64_t price, units;
    assert_int_equal(market_unlist_units(f->c, REALM, "C", "potion", &price, &units), MARKET_OK);
    assert_int_equal(units, 25);
    assert_int_equal(th_fx_funds(f->c, "C"), 0); /* no fee comes back */
    assert_int_equal(market_list_units(f->c, REALM, "game", "gem", 5, 100, NULL, &lr), MARKET_OK);
    assert_int_equal(lr.fee, 5);
    assert_int_equal(th_fx_funds(f->c, "game"), 1002); /* to itself */
    st = (market_settings){.list_fee_bps = MARKET_FEE_BPS_MAX + 1};
    assert_int_equal(market_settings_set(f->c, REALM, &st), MARKET_ERR_INVALID);
    assert_conserved(f->c);
}

/* ---- many buyers at once ---- */

struct buyer {
    market *m;
    char id[8];
    int ok;
};

static void *buy_run(void *arg) {
    struct buyer *b = arg;
    int err;
    market_conn *c = market_conn_new(b->m, &err);
    if (!c) return NULL;
    for (int i = 0; i < 8; i++) {
        market_purchase_result r;
        market_buy_result br;
        int rc = i % 2 ? market_purchase_units(c, REALM, b->id, i % 4 == 1 ? "C" : "game",
                                               i % 4 == 1 ? "potion" : "gem", 1, -1, NULL, &r)
                       : market_buy_units(c, REALM, b->id, "potion", 2, 30, NULL, &br);
        b->ok += rc == MARKET_OK;
    }
    market_conn_free(c);
    return NULL;
}

/* 32 buyers (the house among them) buy units of three listings at once, at
 * a cut of 12.34%: afterwards every player's funds are what the trade
 * records say (the buyer pays the total, the seller gets it less the cut,
 * the house the cut), and funds are conserved. */
static void test_32_buyers_every_coin_where_the_trades_say(void **state) {
    th_market *f = *state;
    enum { N = 32 };
    set_cut(f->c, 1234, NULL);
    (void)th_fx_num("HSET stacks:{main}:game gem 200");
    market_list_result lr;
    assert_int_equal(market_list_units(f->c, REALM, "game", "gem", 200, 100, NULL, &lr), MARKET_OK);
    (void)th_fx_num("HSET stacks:{main}:C potion 500");
    assert_int_equal(market_list_units(f->c, REALM, "C", "potion", 500, 25, NULL, &lr), MARKET_OK);
    struct buyer b[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        b[i] = (struct buyer){.m = f->m};
        snprintf(b[i].id, sizeof b[i].id, "%s", i == 0 ? "game" : i % 2 ? "B" : "D");
        assert_int_equal(pthread_create(&t[i], NULL, buy_run, &b[i]), 0);
    }
    int ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ok += b[i].ok;
    }
    assert_true(ok > 0);
    const char *who[] = {"A", "B", "C", "D", "G", "game"};
    int64_t want[6] = {0, FUNDS_B, 0, FUNDS_D, 0, 1000};
    market_trade *tr = NULL;
    size_t n = 0, seen = 0;
    char after[MARKET_TRADE_ID_MAX + 1] = "";
    int64_t fees = 0;
    do {
        assert_int_equal(market_trades_after(f->c, REALM, after, 100, &tr, &n), MARKET_OK);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(tr[i].fee, market_fee(tr[i].total, 1234));
            for (size_t p = 0; p < 6; p++) {
                if (strcmp(tr[i].buyer, who[p]) == 0) want[p] -= tr[i].total;
                if (strcmp(tr[i].seller, who[p]) == 0) want[p] += tr[i].total - tr[i].fee;
            }
            if (tr[i].fee) assert_string_equal(tr[i].house, "game");
            want[5] += tr[i].fee;
            fees += tr[i].fee;
        }
        if (n) memcpy(after, tr[n - 1].id, sizeof after);
        seen += n;
        free(tr);
    } while (n > 0);
    assert_true(seen >= (size_t)ok);
    assert_true(fees > 0);
    for (size_t p = 0; p < 6; p++) {
        if (th_fx_funds(f->c, who[p]) != want[p])
            fprintf(stderr, "%s: %lld, the trades say %lld\n", who[p],
                    (long long)th_fx_funds(f->c, who[p]), (long long)want[p]);
        assert_int_equal(th_fx_funds(f->c, who[p]), want[p]);
    }
    assert_conserved(f->c);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_settings_read_set_and_refused),
        T(test_purchase_pays_the_cut),
        T(test_units_and_buys_across_sellers_pay_the_cut),
        T(test_the_house_buys_and_sells),
        T(test_cut_changed_before_the_commit),
        T(test_listing_fee),
        T(test_32_buyers_every_coin_where_the_trades_say),
    };
    return th_run_strategies("market settings", tests, sizeof tests / sizeof *tests);
}
