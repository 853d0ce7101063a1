/* test_market_rules.c - the rules of a purchase and of a buy from a flash
 * sale (market_rules.c), without Redis: every verdict, the boundaries of
 * prices, funds, stock, limits and time, overflow, and sequences in which
 * earlier decisions change what later ones may do, as a batch decides them. */
#include <stdio.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "market/market_rules.h"

#define P(f)                                                                                       \
    { MARKET__PRESENT, (f) }
#define ABSENT                                                                                     \
    { MARKET__ABSENT, 0 }
#define BAD                                                                                        \
    { MARKET__UNREADABLE, 0 }
#define UNREAD                                                                                     \
    { MARKET__UNREAD, 0 }

struct rule_case {
    const char *what;
    int64_t price, expect;
    market__party buyer, seller;
    int want;
    int64_t buyer_after, seller_after; /* when allowed */
};

static void test_rule_table(void **state) {
    (void)state;
    static const struct rule_case cases[] = {
        {"classic", 500, -1, P(800), P(100), MARKET_OK, 300, 600},
        {"exactly the funds", 500, -1, P(500), P(0), MARKET_OK, 0, 500},
        {"one short", 500, -1, P(499), P(0), MARKET_ERR_INSUFFICIENT_FUNDS, 0, 0},
        {"negative funds never pay", 1, -1, P(-5), P(0), MARKET_ERR_INSUFFICIENT_FUNDS, 0, 0},
        {"not listed", MARKET__NOT_LISTED, -1, P(800), P(0), MARKET_ERR_NOT_LISTED, 0, 0},
        {"score unreadable", MARKET__PRICE_UNREADABLE, -1, P(800), P(0), MARKET_ERR_STORE, 0, 0},
        {"price as expected", 500, 500, P(800), P(0), MARKET_OK, 300, 500},
        {"price changed", 500, 400, P(800), P(0), MARKET_ERR_PRICE_CHANGED, 0, 0},
        {"expect 0 means any", 500, 0, P(800), P(0), MARKET_OK, 300, 500},
        {"not listed before price", MARKET__NOT_LISTED, 400, P(800), P(0), MARKET_ERR_NOT_LISTED, 0,
         0},
        {"price before the buyer", 500, 400, ABSENT, P(0), MARKET_ERR_PRICE_CHANGED, 0, 0},
        {"no buyer", 500, -1, ABSENT, P(0), MARKET_ERR_NO_PLAYER, 0, 0},
        {"buyer unreadable", 500, -1, BAD, P(0), MARKET_ERR_STORE, 0, 0},
        {"funds before the seller", 500, -1, P(10), BAD, MARKET_ERR_INSUFFICIENT_FUNDS, 0, 0},
        {"seller unreadable", 500, -1, P(800), BAD, MARKET_ERR_STORE, 0, 0},
        {"seller without funds starts at 0", 500, -1, P(800), ABSENT, MARKET_OK, 300, 500},
        {"seller at the top", 1, -1, P(1), P(INT64_MAX - 1), MARKET_OK, 0, INT64_MAX},
        {"seller would overflow", 2, -1, P(2), P(INT64_MAX - 1), MARKET_ERR_OVERFLOW, 0, 0},
        {"largest price", MARKET_PRICE_MAX, -1, P(MARKET_PRICE_MAX), P(0), MARKET_OK, 0,
         MARKET_PRICE_MAX},
        {"buyer funds unread", 500, -1, UNREAD, P(0), MARKET__NEED_FUNDS, 0, 0},
        {"seller funds unread", 500, -1, P(800), UNREAD, MARKET__NEED_FUNDS, 0, 0},
        {"no funds needed when not listed", MARKET__NOT_LISTED, -1, UNREAD, UNREAD,
         MARKET_ERR_NOT_LISTED, 0, 0},
        {"no funds needed when the price changed", 500, 7, UNREAD, UNREAD, MARKET_ERR_PRICE_CHANGED,
         0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct rule_case *c = &cases[i];
        market__party b = c->buyer, s = c->seller;
        int got = market__purchase_rule(c->price, c->expect, &b, &s);
        if (got != c->want) fprintf(stderr, "case '%s': %d, want %d\n", c->what, got, c->want);
        assert_int_equal(got, c->want);
        assert_memory_equal(&b, &c->buyer, sizeof b); /* the rule only judges */
        got = market__purchase_apply(c->price, c->expect, &b, &s);
        assert_int_equal(got, c->want);
        if (got == MARKET_OK) {
            assert_int_equal(b.funds, c->buyer_after);
            assert_int_equal(s.known, MARKET__PRESENT);
            assert_int_equal(s.funds, c->seller_after);
        } else {
            assert_memory_equal(&b, &c->buyer, sizeof b); /* a refusal moves nothing */
            assert_memory_equal(&s, &c->seller, sizeof s);
        }
    }
}

/* A batch decides in queue order, exactly as if the purchases ran one at a
 * time: a buyer's funds fall as it buys, a seller's rise, and a listing sold
 * by an earlier purchase is gone for a later one. */
struct order {
    int listing, buyer, seller;
    int64_t expect;
    int want;
};

static void decide_in_order(int64_t *price, market__party *party, const struct order *o, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int64_t p = price[o[i].listing];
        int rc = market__purchase_apply(p, o[i].expect, &party[o[i].buyer], &party[o[i].seller]);
        if (rc != o[i].want) fprintf(stderr, "order %zu: %d, want %d\n", i, rc, o[i].want);
        assert_int_equal(rc, o[i].want);
        if (rc == MARKET_OK) price[o[i].listing] = MARKET__NOT_LISTED; /* sold */
    }
}

static void test_rule_batch_earlier_purchases_change_later_ones(void **state) {
    (void)state;
    enum { SHOP, THRIFTY, SPENDER, RICH_SELLER };
    market__party party[] = {P(0), P(250), P(1000), P(INT64_MAX - 150)};
    int64_t price[] = {100, 100, 100, 100, 200};
    static const struct order orders[] = {
        {0, THRIFTY, SHOP, -1, MARKET_OK},                     /* 250 -> 150 */
        {0, SPENDER, SHOP, -1, MARKET_ERR_NOT_LISTED},         /* sold just before */
        {1, THRIFTY, SHOP, -1, MARKET_OK},                     /* 150 -> 50 */
        {2, THRIFTY, SHOP, -1, MARKET_ERR_INSUFFICIENT_FUNDS}, /* 50 < 100 */
        {2, SPENDER, SHOP, 150, MARKET_ERR_PRICE_CHANGED},     /* still listed at 100 */
        {2, SPENDER, SHOP, 100, MARKET_OK},                    /* 1000 -> 900 */
        {3, SPENDER, RICH_SELLER, -1, MARKET_OK},              /* seller at MAX - 50 */
        {4, SPENDER, RICH_SELLER, -1, MARKET_ERR_OVERFLOW},    /* + 200 would pass MAX */
        {4, SHOP, SPENDER, -1, MARKET_OK},                     /* the shop, paid 300, buys */
    };
    decide_in_order(price, party, orders, sizeof orders / sizeof orders[0]);
    assert_int_equal(party[THRIFTY].funds, 50);
    assert_int_equal(party[SPENDER].funds, 1000 - 100 - 100 + 200);
    assert_int_equal(party[SHOP].funds, 300 - 200);
    assert_int_equal(party[RICH_SELLER].funds, INT64_MAX - 50);
    /* funds are conserved within the batch: the changes add up to 0 */
    const int64_t before[] = {0, 250, 1000, INT64_MAX - 150};
    int64_t change = 0;
    for (size_t i = 0; i < 4; i++)
        change += party[i].funds - before[i];
    assert_int_equal(change, 0);
}

/* A buyer with funds for one of several items buys exactly one, whatever
 * the listings: the first it reaches. */
static void test_rule_batch_funds_for_one(void **state) {
    (void)state;
    market__party party[] = {P(0), P(600)};
    int64_t price[8];
    struct order o[8];
    for (int i = 0; i < 8; i++) {
        price[i] = 500;
        o[i] = (struct order){i, 1, 0, -1, i == 0 ? MARKET_OK : MARKET_ERR_INSUFFICIENT_FUNDS};
    }
    decide_in_order(price, party, o, 8);
    assert_int_equal(party[1].funds, 100);
    assert_int_equal(party[0].funds, 500);
}

static void test_args_checks(void **state) {
    (void)state;
    char long_id[MARKET_ID_MAX + 2];
    memset(long_id, 'a', sizeof long_id - 1);
    long_id[MARKET_ID_MAX + 1] = '\0';
    const market_idem ok = {"k", "fp"}, bad_key = {"has space", "fp"}, bad_fp = {"k", "f p"};
    assert_true(market__purchase_args_ok("main", "B", "A", "axe", -1, NULL));
    assert_true(market__purchase_args_ok("main", "B", "A", "axe", MARKET_PRICE_MAX, &ok));
    assert_false(market__purchase_args_ok("main", "B", "A", "axe", MARKET_PRICE_MAX + 1, NULL));
    assert_false(market__purchase_args_ok("main", "B", "B", "axe", -1, NULL));
    assert_false(market__purchase_args_ok("main", "B", "A", "ax e", -1, NULL));
    assert_false(market__purchase_args_ok("main", "B", "A", NULL, -1, NULL));
    assert_false(market__purchase_args_ok("main", long_id, "A", "axe", -1, NULL));
    long_id[MARKET_ID_MAX] = '\0';
    assert_true(market__purchase_args_ok("main", long_id, "A", "axe", -1, NULL));
    assert_false(market__purchase_args_ok("main", "B", "A", "axe", -1, &bad_key));
    assert_false(market__purchase_args_ok("main", "B", "A", "axe", -1, &bad_fp));
    assert_true(market__listing_args_ok("main", "A", "axe", 1, NULL));
    assert_true(market__listing_args_ok("main", "A", "axe", MARKET_PRICE_MAX, &ok));
    assert_false(market__listing_args_ok("main", "A", "axe", 0, NULL));
    assert_false(market__listing_args_ok("main", "A", "axe", MARKET_PRICE_MAX + 1, NULL));
    assert_false(market__listing_args_ok("main", "A", "", 5, NULL));
    /* realms are ids too */
    assert_true(market__purchase_args_ok("eu-1", "B", "A", "axe", -1, NULL));
    assert_false(market__purchase_args_ok("eu 1", "B", "A", "axe", -1, NULL));
    assert_false(market__purchase_args_ok("{eu}", "B", "A", "axe", -1, NULL));
    assert_false(market__purchase_args_ok(NULL, "B", "A", "axe", -1, NULL));
    assert_false(market__purchase_args_ok(long_id, "B", "A", "axe", -1, NULL) &&
                 strlen(long_id) > MARKET_REALM_MAX);
    assert_false(market__listing_args_ok("", "A", "axe", 5, NULL));
    assert_false(market__listing_args_ok("eu:1", "A", "axe", 5, NULL));
}

/* The bid rule: the start first, then the highest and its step; one's own, after the
 * end, a settled auction refused; the least bid capped at the highest price. */
static void test_bid_rule(void **state) {
    (void)state;
    market_auction a = {.id = 1,
                        .seller = "A",
                        .item = "axe",
                        .start_bid = 100,
                        .step = 5,
                        .ends_ms = 1000,
                        .state = MARKET_AUCTION_OPEN};
    int64_t min;
    assert_int_equal(market__bid_rule(&a, "B", 99, 10, &min), MARKET_ERR_BID_TOO_LOW);
    assert_int_equal(min, 100);
    assert_int_equal(market__bid_rule(&a, "B", 100, 10, &min), MARKET_OK);
    snprintf(a.bidder, sizeof a.bidder, "B");
    a.bid = 100;
    assert_int_equal(market__bid_rule(&a, "C", 104, 10, &min), MARKET_ERR_BID_TOO_LOW);
    assert_int_equal(min, 105);
    assert_int_equal(market__bid_rule(&a, "B", 105, 10, &min), MARKET_OK); /* its own raise */
    assert_int_equal(market__bid_rule(&a, "A", 500, 10, &min), MARKET_ERR_OWN_AUCTION);
    assert_int_equal(market__bid_rule(&a, "C", 500, 1000, &min), MARKET_ERR_AUCTION_CLOSED);
    a.state = MARKET_AUCTION_SOLD;
    assert_int_equal(market__bid_rule(&a, "C", 500, 10, &min), MARKET_ERR_AUCTION_CLOSED);
    a.state = MARKET_AUCTION_OPEN;
    a.bid = MARKET_PRICE_MAX - 1;
    assert_int_equal(market__auction_min_bid(&a), MARKET_PRICE_MAX);
}

static void test_realm_nth_names(void **state) {
    (void)state;
    char out[MARKET_REALM_MAX + 1], small[3];
    assert_int_equal(market_realm_nth(0, out, sizeof out), 0);
    assert_string_equal(out, "r0");
    assert_int_equal(market_realm_nth(11, out, sizeof out), 0);
    assert_string_equal(out, "r11");
    assert_true(market_id_valid(out));
    assert_int_equal(market_realm_nth(MARKET_REALMS_MAX - 1, out, sizeof out), 0);
    assert_int_equal(market_realm_nth(MARKET_REALMS_MAX, out, sizeof out), -1);
    assert_int_equal(market_realm_nth(100, small, sizeof small), -1);
}

struct units_case {
    const char *what;
    int64_t price, units, quantity;
    market__party buyer, seller;
    int want;
    int64_t buyer_after, seller_after;
};

/* Units of a stackable listing: enough of them, their total, and totals
 * past 2^63-1. */
static void test_units_rule_table(void **state) {
    (void)state;
    static const struct units_case cases[] = {
        {"five of twenty", 25, 20, 5, P(200), P(0), MARKET_OK, 75, 125},
        {"all of them", 25, 20, 20, P(500), P(0), MARKET_OK, 0, 500},
        {"one too many", 25, 20, 21, P(10000), P(0), MARKET_ERR_NOT_ENOUGH, 0, 0},
        {"none left", 25, 0, 1, P(10000), P(0), MARKET_ERR_NOT_LISTED, 0, 0},
        {"units before funds", 25, 2, 3, UNREAD, UNREAD, MARKET_ERR_NOT_ENOUGH, 0, 0},
        {"the total, not the price", 25, 20, 5, P(124), P(0), MARKET_ERR_INSUFFICIENT_FUNDS, 0, 0},
        {"a total past 2^63-1", MARKET_PRICE_MAX, MARKET_QUANTITY_MAX, MARKET_QUANTITY_MAX,
         P(INT64_MAX), P(0), MARKET_ERR_INSUFFICIENT_FUNDS, 0, 0},
        {"seller overflow on the total", 2, 10, 10, P(20), P(INT64_MAX - 19),
         MARKET_ERR_OVERFLOW, 0, 0},
        {"one unit is a unique item", 500, 1, 1, P(800), P(100), MARKET_OK, 300, 600},
        {"a unique item, two asked", 500, 1, 2, P(8000), P(100), MARKET_ERR_NOT_ENOUGH, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct units_case *c = &cases[i];
        market__party b = c->buyer, s = c->seller;
        int got = market__units_apply(c->price, c->units, c->quantity, -1, &b, &s, NULL, NULL);
        if (got != c->want) fprintf(stderr, "case '%s': %d, want %d\n", c->what, got, c->want);
        assert_int_equal(got, c->want);
        if (got == MARKET_OK) {
            assert_int_equal(b.funds, c->buyer_after);
            assert_int_equal(s.funds, c->seller_after);
        } else {
            assert_memory_equal(&b, &c->buyer, sizeof b);
        }
    }
}

/* A purchase without a seller fills from the cheapest listings at or under
 * its price, never the buyer's own, all or nothing. */
static void test_fill_cheapest_first_all_or_nothing(void **state) {
    (void)state;
    market__offer o[] = {{"C", 20, 5, 9}, {"B", 22, 100, 9}, {"D", 25, 10, 9}, {"E", 30, 50, 9},
                         {"F", 31, 500, 9}};
    int64_t avail = -1, total = -1;
    /* 30 at <= 30, B's own listing left out: 5 from C, 10 from D, 15 from E */
    assert_int_equal(market__fill(o, 5, "B", 30, 30, MARKET__FILL_ALL, &avail, &total), MARKET_OK);
    assert_int_equal(o[0].take, 5);
    assert_int_equal(o[1].take, 0);
    assert_int_equal(o[2].take, 10);
    assert_int_equal(o[3].take, 15);
    assert_int_equal(o[4].take, 0);
    assert_int_equal(total, 5 * 20 + 10 * 25 + 15 * 30);
    assert_int_equal(avail, 65);
    /* not enough at that price: how many there are, nothing taken */
    assert_int_equal(market__fill(o, 5, "B", 66, 30, MARKET__FILL_ALL, &avail, &total),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(avail, 65);
    assert_int_equal(total, 0);
    for (size_t i = 0; i < 5; i++) assert_int_equal(o[i].take, 0);
    /* another buyer may take B's */
    assert_int_equal(market__fill(o, 5, "Z", 6, 22, MARKET__FILL_ALL, &avail, &total), MARKET_OK);
    assert_int_equal(o[0].take, 5);
    assert_int_equal(o[1].take, 1);
    assert_int_equal(total, 5 * 20 + 22);
    /* nothing at that price */
    assert_int_equal(market__fill(o, 5, "Z", 1, 19, MARKET__FILL_ALL, &avail, &total),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(avail, 0);
    assert_int_equal(market__fill(o, 0, "Z", 1, 19, MARKET__FILL_ALL, &avail, &total),
                     MARKET_ERR_NOT_ENOUGH);
}

/* A buy order takes what there is at or under its price, cheapest first,
 * and leaves the rest to rest in the book. */
static void test_fill_some_takes_what_there_is(void **state) {
    (void)state;
    market__offer o[] = {{"C", 20, 5, 9}, {"B", 22, 100, 9}, {"D", 25, 10, 9}, {"E", 30, 50, 9}};
    int64_t avail = -1, total = -1;
    assert_int_equal(market__fill(o, 4, "B", 100, 25, 0, &avail, &total), MARKET_OK);
    assert_int_equal(o[0].take, 5);
    assert_int_equal(o[1].take, 0); /* B's own */
    assert_int_equal(o[2].take, 10);
    assert_int_equal(o[3].take, 0); /* over the price */
    assert_int_equal(avail, 15);
    assert_int_equal(total, 5 * 20 + 10 * 25);
    /* fewer than there are: as all-or-nothing would */
    assert_int_equal(market__fill(o, 4, "B", 7, 25, 0, &avail, &total), MARKET_OK);
    assert_int_equal(o[0].take, 5);
    assert_int_equal(o[2].take, 2);
    assert_int_equal(total, 5 * 20 + 2 * 25);
    /* nothing at that price: nothing taken, not a refusal */
    assert_int_equal(market__fill(o, 4, "Z", 3, 19, 0, &avail, &total), MARKET_OK);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(o[i].take, 0);
    assert_int_equal(total, 0);
}

/* A sale into the book fills the dearest buy orders at or over its price,
 * never the seller's own, all or nothing or as many as they want. */
static void test_fill_sell_dearest_first(void **state) {
    (void)state;
    market__offer o[] = {{"C", 30, 5, 9}, {"S", 28, 100, 9}, {"D", 25, 10, 9}, {"E", 20, 50, 9}};
    int64_t avail = -1, total = -1;
    int all = MARKET__FILL_SELL | MARKET__FILL_ALL;
    assert_int_equal(market__fill(o, 4, "S", 12, 25, all, &avail, &total), MARKET_OK);
    assert_int_equal(o[0].take, 5);
    assert_int_equal(o[1].take, 0); /* S's own */
    assert_int_equal(o[2].take, 7);
    assert_int_equal(o[3].take, 0);
    assert_int_equal(total, 5 * 30 + 7 * 25);
    assert_int_equal(avail, 15);
    assert_int_equal(market__fill(o, 4, "S", 16, 25, all, &avail, &total), MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(avail, 15);
    assert_int_equal(market__fill(o, 4, "S", 16, 25, MARKET__FILL_SELL, &avail, &total), MARKET_OK);
    assert_int_equal(o[0].take + o[2].take, 15);
    assert_int_equal(o[3].take, 0); /* under the price */
}

struct list_case {
    const char *what;
    int unique;
    int64_t stacked, quantity, listed_price, listed_units, price;
    int want, stack;
};

/* Listing a unique item or units: held or not, joining the seller's listing
 * of the good at its price only, what cannot be read. */
static void test_list_rule_table(void **state) {
    (void)state;
    static const struct list_case cases[] = {
        {"a unique item", 1, 0, 0, MARKET__NOT_LISTED, 0, 50, MARKET_OK, 0},
        {"a unique item, quantity 1", 1, 0, 1, MARKET__NOT_LISTED, 0, 50, MARKET_OK, 0},
        {"a unique item listed as units too", 1, 5, 0, 40, 5, 50, MARKET_ERR_DUPLICATE, 0},
        {"not held", 0, 0, 0, MARKET__NOT_LISTED, 0, 50, MARKET_ERR_NOT_HELD, 0},
        {"one unit of a stack", 0, 3, 0, MARKET__NOT_LISTED, 0, 50, MARKET_OK, 1},
        {"units held", 0, 20, 20, MARKET__NOT_LISTED, 0, 25, MARKET_OK, 1},
        {"more than held", 0, 20, 21, MARKET__NOT_LISTED, 0, 25, MARKET_ERR_NOT_HELD, 0},
        {"join the listing", 0, 20, 5, 25, 10, 25, MARKET_OK, 1},
        {"another price", 0, 20, 5, 25, 10, 30, MARKET_ERR_PRICE_CHANGED, 0},
        {"stack unreadable", 0, -1, 5, MARKET__NOT_LISTED, 0, 25, MARKET_ERR_STORE, 0},
        {"listing unreadable", 0, 20, 5, MARKET__PRICE_UNREADABLE, 0, 25, MARKET_ERR_STORE, 0},
        {"listed units unreadable", 0, 20, 5, 25, -1, 25, MARKET_ERR_STORE, 0},
        {"units beside a unique listing", 0, 20, 5, 25, 0, 25, MARKET_ERR_STORE, 0},
        {"units past 2^63-1", 0, 20, 5, 25, INT64_MAX - 1, 25, MARKET_ERR_OVERFLOW, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct list_case *c = &cases[i];
        int stack = 9;
        int got = market__list_rule(c->unique, c->stacked, c->quantity, c->listed_price,
                                    c->listed_units, c->price, &stack);
        if (got != c->want) fprintf(stderr, "case '%s': %d, want %d\n", c->what, got, c->want);
        assert_int_equal(got, c->want);
        if (got == MARKET_OK) assert_int_equal(stack, c->stack);
    }
    /* units that cannot be read are the store's failure, not a refusal */
    market__party b = P(100), s2 = P(0);
    assert_int_equal(market__units_rule(25, -1, 1, -1, &b, &s2, NULL), MARKET_ERR_STORE);
}

/* The realm's cut: total * bps / 10000 rounded down, without overflow at
 * any total, 0 for none. */
static void test_fee_rounds_down_without_overflow(void **state) {
    (void)state;
    static const struct {
        int64_t total, bps, want;
    } cases[] = {
        {1000, 500, 50},
        {999, 500, 49}, /* 49.95 */
        {19, 500, 0},
        {20, 500, 1},
        {1, 10000, 1},
        {12345, 10000, 12345},
        {12345, 0, 0},
        {0, 500, 0},
        {-5, 500, 0},
        {10001, 1, 1},
        {9999, 1, 0},
        {INT64_MAX, 10000, INT64_MAX},
        {INT64_MAX, 1, INT64_MAX / 10000},        /* 922337203685477.5807 */
        {INT64_MAX, 9999, 9222449699651090329LL}, /* floor((2^63-1) * 9999 / 10000) */
        {INT64_MAX, 20000, INT64_MAX},            /* past the most: the most */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t got = market_fee(cases[i].total, cases[i].bps);
        if (got != cases[i].want)
            fprintf(stderr, "fee(%lld, %lld) = %lld\n", (long long)cases[i].total,
                    (long long)cases[i].bps, (long long)got);
        assert_int_equal(got, cases[i].want);
    }
}

/* A sale's cut goes to the house: into its funds when the batch holds
 * them, else added up to be paid unread; the seller gets the rest; the
 * house may be the seller or the buyer; the house's funds can overflow,
 * the seller's are judged on what it is paid. */
static void test_units_apply_pays_the_cut(void **state) {
    (void)state;
    market__party b = P(1000), s = P(0), h = P(7);
    int64_t fee = -1;
    market__cut cut = {.bps = 500, .house = NULL};
    /* the house not held: paid unread */
    assert_int_equal(market__units_apply(25, 20, 8, -1, &b, &s, &cut, &fee), MARKET_OK);
    assert_int_equal(fee, 10); /* 5% of 200 */
    assert_int_equal(b.funds, 800);
    assert_int_equal(s.funds, 190);
    assert_int_equal(cut.unread, 10);
    /* held: into its funds */
    cut = (market__cut){.bps = 500, .house = &h};
    assert_int_equal(market__units_apply(25, 20, 8, -1, &b, &s, &cut, &fee), MARKET_OK);
    assert_int_equal(h.funds, 17);
    assert_int_equal(s.funds, 380);
    assert_int_equal(cut.unread, 0);
    /* the house sells: the whole total */
    cut.house = &s;
    assert_int_equal(market__units_apply(10, 5, 5, -1, &b, &s, &cut, &fee), MARKET_OK);
    assert_int_equal(fee, 2);
    assert_int_equal(s.funds, 430);
    assert_int_equal(b.funds, 550);
    /* the house buys: pays the total, gets the cut back */
    cut.house = &b;
    assert_int_equal(market__units_apply(100, 1, 1, -1, &b, &s, &cut, &fee), MARKET_OK);
    assert_int_equal(b.funds, 455);
    assert_int_equal(s.funds, 525);
    /* a cut of 0 at a small total: the seller gets all */
    cut = (market__cut){.bps = 500};
    assert_int_equal(market__units_apply(19, 1, 1, -1, &b, &s, &cut, &fee), MARKET_OK);
    assert_int_equal(fee, 0);
    assert_int_equal(s.funds, 544);
    /* the seller is judged on the total less the cut */
    market__party rich = P(INT64_MAX - 95), buyer = P(100), full = P(INT64_MAX - 4);
    cut = (market__cut){.bps = 500};
    assert_int_equal(market__units_rule(100, 1, 1, -1, &buyer, &rich, &cut), MARKET_OK);
    assert_int_equal(market__units_rule(100, 1, 1, -1, &buyer, &rich, NULL), MARKET_ERR_OVERFLOW);
    /* a house held that cannot take the cut, or cannot be read */
    cut.house = &full;
    assert_int_equal(market__units_rule(100, 1, 1, -1, &buyer, &s, &cut), MARKET_ERR_OVERFLOW);
    market__party gone = {MARKET__UNREADABLE, 0};
    cut.house = &gone;
    assert_int_equal(market__units_rule(100, 1, 1, -1, &buyer, &s, &cut), MARKET_ERR_STORE);
    /* a refusal moves nothing and owes nothing */
    cut = (market__cut){.bps = 500};
    market__party poor = P(5), s0 = s;
    assert_int_equal(market__units_apply(100, 1, 1, -1, &poor, &s, &cut, &fee),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(fee, 0);
    assert_int_equal(cut.unread, 0);
    assert_int_equal(s.known, s0.known);
    assert_int_equal(s.funds, s0.funds);
    assert_int_equal(poor.funds, 5);
}

/* ---- flash sales (market__sale_rule) ---- */

#define ON(left, sold, limit)                                                                      \
    { MARKET__PRESENT, 10, (left), (sold), (limit), 1000, 2000 }

struct sale_case {
    const char *what;
    market__sale_state sale;
    int64_t now, quantity, bought;
    int is_house;
    market__party buyer, house;
    int want;
    int64_t info; /* sold_out: units left; limit_exceeded: how many more */
};

static void test_sale_rule_table(void **state) {
    (void)state;
    static const struct sale_case cases[] = {
        {"a buy", ON(100, 0, 5), 1500, 2, 0, 0, P(100), P(0), MARKET_OK, 0},
        {"no such sale", {MARKET__ABSENT}, 1500, 1, 0, 0, P(100), P(0), MARKET_ERR_NO_SALE, 0},
        {"sale unreadable", {MARKET__UNREADABLE}, 1500, 1, 0, 0, P(100), P(0), MARKET_ERR_STORE,
         0},
        {"before the start", ON(100, 0, 5), 999, 1, 0, 0, P(100), P(0),
         MARKET_ERR_SALE_NOT_ACTIVE, 0},
        {"at the start", ON(100, 0, 5), 1000, 1, 0, 0, P(100), P(0), MARKET_OK, 0},
        {"at the end", ON(100, 0, 5), 2000, 1, 0, 0, P(100), P(0), MARKET_ERR_SALE_NOT_ACTIVE,
         0},
        {"the last ms", ON(100, 0, 5), 1999, 1, 0, 0, P(100), P(0), MARKET_OK, 0},
        {"ended before sold out", ON(0, 100, 5), 2500, 1, 0, 0, P(100), P(0),
         MARKET_ERR_SALE_NOT_ACTIVE, 0},
        {"the house buys", ON(100, 0, 5), 1500, 1, 0, 1, P(100), P(100), MARKET_ERR_INVALID, 0},
        {"no buyer", ON(100, 0, 5), 1500, 1, 0, 0, ABSENT, P(0), MARKET_ERR_NO_PLAYER, 0},
        {"buyer unreadable", ON(100, 0, 5), 1500, 1, 0, 0, BAD, P(0), MARKET_ERR_STORE, 0},
        {"sold out", ON(0, 100, 5), 1500, 1, 0, 0, P(100), P(0), MARKET_ERR_SOLD_OUT, 0},
        {"fewer left than asked", ON(3, 97, 5), 1500, 4, 0, 0, P(100), P(0), MARKET_ERR_SOLD_OUT,
         3},
        {"exactly what is left", ON(3, 97, 5), 1500, 3, 0, 0, P(100), P(0), MARKET_OK, 0},
        {"sold out before the limit", ON(1, 99, 5), 1500, 2, 5, 0, P(100), P(0),
         MARKET_ERR_SOLD_OUT, 1},
        {"at the limit", ON(100, 0, 5), 1500, 1, 5, 0, P(100), P(0), MARKET_ERR_LIMIT_EXCEEDED,
         0},
        {"over the limit", ON(100, 0, 5), 1500, 3, 3, 0, P(100), P(0),
         MARKET_ERR_LIMIT_EXCEEDED, 2},
        {"up to the limit", ON(100, 0, 5), 1500, 2, 3, 0, P(100), P(0), MARKET_OK, 0},
        {"bought unreadable", ON(100, 0, 5), 1500, 1, -1, 0, P(100), P(0), MARKET_ERR_STORE, 0},
        {"limit before funds", ON(100, 0, 5), 1500, 6, 0, 0, P(0), P(0),
         MARKET_ERR_LIMIT_EXCEEDED, 5},
        {"one short", ON(100, 0, 5), 1500, 2, 0, 0, P(19), P(0), MARKET_ERR_INSUFFICIENT_FUNDS,
         0},
        {"exactly the funds", ON(100, 0, 5), 1500, 2, 0, 0, P(20), P(0), MARKET_OK, 0},
        {"house without funds", ON(100, 0, 5), 1500, 1, 0, 0, P(20), ABSENT, MARKET_OK, 0},
        {"house unreadable", ON(100, 0, 5), 1500, 1, 0, 0, P(20), BAD, MARKET_ERR_STORE, 0},
        {"house would overflow", ON(100, 0, 5), 1500, 1, 0, 0, P(20), P(INT64_MAX - 9),
         MARKET_ERR_OVERFLOW, 0},
        {"house at the top", ON(100, 0, 5), 1500, 1, 0, 0, P(20), P(INT64_MAX - 10), MARKET_OK,
         0},
        {"funds unread", ON(100, 0, 5), 1500, 1, 0, 0, UNREAD, P(0), MARKET__NEED_FUNDS, 0},
        {"quantity zero", ON(100, 0, 5), 1500, 0, 0, 0, P(20), P(0), MARKET_ERR_INVALID, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct sale_case *c = &cases[i];
        int64_t info = -7;
        int got = market__sale_rule(&c->sale, c->now, c->quantity, c->bought, c->is_house,
                                    &c->buyer, &c->house, &info);
        if (got != c->want || (got == MARKET_ERR_SOLD_OUT && info != c->info) ||
            (got == MARKET_ERR_LIMIT_EXCEEDED && info != c->info))
            fail_msg("%s: got %d info %lld, want %d info %lld", c->what, got, (long long)info,
                     c->want, (long long)c->info);
    }
}

/* A total beyond any funds (quantity * price overflows) is insufficient funds. */
static void test_sale_rule_total_overflow_insufficient(void **state) {
    (void)state;
    market__sale_state s = {MARKET__PRESENT, MARKET_PRICE_MAX, MARKET_SALE_STOCK_MAX, 0,
                            MARKET_SALE_STOCK_MAX, 0, 10};
    market__party buyer = P(INT64_MAX), house = P(0);
    assert_int_equal(market__sale_rule(&s, 5, MARKET_SALE_STOCK_MAX, 0, 0, &buyer, &house, NULL),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(market__sale_rule(&s, 5, 9000000, 0, 0, &buyer, &house, NULL), MARKET_OK);
}

/* Buys applied in order, as a batch decides them: the stock falls, each
 * buyer's count rises to the limit, funds move to the house, and the last
 * units go to whoever comes first. */
static void test_sale_apply_batch_in_order(void **state) {
    (void)state;
    market__sale_state s = ON(5, 0, 2);
    market__party a = P(100), b = P(15), house = P(7);
    int64_t bought_a = 0, bought_b = 0, info = 0;
    assert_int_equal(market__sale_apply(&s, 1500, 1, &bought_a, 0, &a, &house, &info), MARKET_OK);
    assert_int_equal(market__sale_apply(&s, 1500, 2, &bought_a, 0, &a, &house, &info),
                     MARKET_ERR_LIMIT_EXCEEDED);
    assert_int_equal(info, 1);
    assert_int_equal(market__sale_apply(&s, 1500, 1, &bought_a, 0, &a, &house, &info), MARKET_OK);
    assert_int_equal(market__sale_apply(&s, 1500, 2, &bought_b, 0, &b, &house, &info),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(market__sale_apply(&s, 1500, 1, &bought_b, 0, &b, &house, &info), MARKET_OK);
    assert_int_equal(s.left, 2);
    assert_int_equal(s.sold, 3);
    assert_int_equal(bought_a, 2);
    assert_int_equal(bought_b, 1);
    assert_int_equal(a.funds, 80);
    assert_int_equal(b.funds, 5);
    assert_int_equal(house.funds, 37);
    market__party c = P(1000), none = ABSENT;
    int64_t bought_c = 0;
    s.limit = 10;
    assert_int_equal(market__sale_apply(&s, 1500, 3, &bought_c, 0, &c, &none, &info),
                     MARKET_ERR_SOLD_OUT);
    assert_int_equal(info, 2);
    assert_int_equal(market__sale_apply(&s, 1500, 2, &bought_c, 0, &c, &none, &info), MARKET_OK);
    assert_int_equal(none.known, MARKET__PRESENT); /* paid from 0 */
    assert_int_equal(none.funds, 20);
    assert_int_equal(market__sale_apply(&s, 1500, 1, &bought_c, 0, &c, &none, &info),
                     MARKET_ERR_SOLD_OUT);
    assert_int_equal(info, 0);
    assert_int_equal(s.left + s.sold, 5);
}

static void test_sale_args_checks(void **state) {
    (void)state;
    assert_true(market__sale_args_ok("main", "s1", "B", 1, NULL));
    assert_true(market__sale_args_ok("main", "s1", "B", MARKET_SALE_STOCK_MAX, NULL));
    assert_false(market__sale_args_ok("main", "s1", "B", 0, NULL));
    assert_false(market__sale_args_ok("main", "s1", "B", MARKET_SALE_STOCK_MAX + 1, NULL));
    assert_false(market__sale_args_ok("main", "s.1", "B", 1, NULL));
    assert_false(market__sale_args_ok("main", "s1", "", 1, NULL));
    market_sale s = {.id = "s1", .item = "potion", .price = 10, .initial = 100, .limit = 2,
                     .start_ms = 0, .end_ms = 1};
    assert_true(market__sale_new_ok("main", &s));
    s.limit = 101;
    assert_false(market__sale_new_ok("main", &s));
    s.limit = 100;
    s.end_ms = 0;
    assert_false(market__sale_new_ok("main", &s));
    s.end_ms = 5;
    s.initial = MARKET_SALE_STOCK_MAX + 1;
    assert_false(market__sale_new_ok("main", &s));
    s.initial = 100;
    s.price = MARKET_PRICE_MAX + 1;
    assert_false(market__sale_new_ok("main", &s));
    s.price = 10;
    snprintf(s.house, sizeof s.house, "a b");
    assert_false(market__sale_new_ok("main", &s));
    snprintf(s.house, sizeof s.house, "bank");
    assert_true(market__sale_new_ok("main", &s));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sale_rule_table),
        cmocka_unit_test(test_sale_rule_total_overflow_insufficient),
        cmocka_unit_test(test_sale_apply_batch_in_order),
        cmocka_unit_test(test_sale_args_checks),
        cmocka_unit_test(test_rule_table),
        cmocka_unit_test(test_units_rule_table),
        cmocka_unit_test(test_fee_rounds_down_without_overflow),
        cmocka_unit_test(test_units_apply_pays_the_cut),
        cmocka_unit_test(test_fill_cheapest_first_all_or_nothing),
        cmocka_unit_test(test_fill_some_takes_what_there_is),
        cmocka_unit_test(test_fill_sell_dearest_first),
        cmocka_unit_test(test_list_rule_table),
        cmocka_unit_test(test_rule_batch_earlier_purchases_change_later_ones),
        cmocka_unit_test(test_rule_batch_funds_for_one),
        cmocka_unit_test(test_args_checks),
        cmocka_unit_test(test_realm_nth_names),
        cmocka_unit_test(test_bid_rule),
    };
    return cmocka_run_group_tests_name("market rules (unit)", tests, NULL, NULL);
}
