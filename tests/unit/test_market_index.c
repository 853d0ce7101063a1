/* test_market_index.c - market_index.c without Redis: index keys and entries, cursors,
 * the checks of a search, its plan, and the reading of the members of the zset it reads.
 * The paging itself (market_search.c's script) is tested against Redis in
 * tests/integration/test_market_search.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "market/market_index.h"

/* ---- names and entries ---- */

static void test_idx_keys_carry_the_realm_tag(void **state) {
    (void)state;
    char k[MARKET__IDX_KEY_MAX];
    market__idx_key(k, MARKET__IDX_ITEM, "eu-1", "axe");
    assert_string_equal(k, "idx:{eu-1}:item:axe");
    market__idx_key(k, MARKET__IDX_SELLER, "eu-1", "A");
    assert_string_equal(k, "idx:{eu-1}:seller:A");
    char realm[MARKET_REALM_MAX + 1], id[MARKET_ID_MAX + 1];
    memset(realm, 'r', MARKET_REALM_MAX);
    realm[MARKET_REALM_MAX] = '\0';
    memset(id, 'z', MARKET_ID_MAX);
    id[MARKET_ID_MAX] = '\0';
    market__idx_key(k, MARKET__IDX_SELLER, realm, id); /* the longest fits whole */
    assert_int_equal(strlen(k), strlen("idx:{}:seller:") + MARKET_REALM_MAX + MARKET_ID_MAX);
}

static void test_idx_entries_table(void **state) {
    (void)state;
    static const struct {
        const char *item, *seller;
        int64_t price;
        const char *k_item, *k_seller, *score;
    } rows[] = {
        {"axe", "A", 500, "idx:{r}:item:axe", "idx:{r}:seller:A", "500"},
        {"p-1", "s_2", 1, "idx:{r}:item:p-1", "idx:{r}:seller:s_2", "1"},
        {"x", "y", MARKET_PRICE_MAX, "idx:{r}:item:x", "idx:{r}:seller:y", "1000000000000"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        market__idx_entry e;
        market__idx_entry_init(&e, "r", rows[i].item, rows[i].seller, rows[i].price);
        assert_string_equal(e.key[MARKET__IDX_ITEM], rows[i].k_item);
        assert_string_equal(e.member[MARKET__IDX_ITEM], rows[i].seller); /* who lists it */
        assert_string_equal(e.key[MARKET__IDX_SELLER], rows[i].k_seller);
        assert_string_equal(e.member[MARKET__IDX_SELLER], rows[i].item); /* what they list */
        assert_string_equal(e.score, rows[i].score);
    }
}

static void test_longest_cursor_fits(void **state) {
    (void)state;
    char id[MARKET_ID_MAX + 1], cur[MARKET_CURSOR_MAX + 1];
    memset(id, 'z', MARKET_ID_MAX);
    id[MARKET_ID_MAX] = '\0';
    market_listing l = {{0}, {0}, MARKET_PRICE_MAX}, got;
    memcpy(l.item, id, sizeof id);
    memcpy(l.seller, id, sizeof id);
    market_cursor_make(&l, cur);
    assert_int_equal(strlen(cur), MARKET_CURSOR_MAX);
    assert_int_equal(market__cursor_parse(cur, &got), 0);
    assert_string_equal(got.item, id);
    assert_int_equal(got.price, MARKET_PRICE_MAX);
}

/* ---- cursors and checks ---- */

static void test_cursor_round_trip_and_refusals(void **state) {
    (void)state;
    market_listing l = {"sword-2", "C", 1200}, got;
    char cur[MARKET_CURSOR_MAX + 1];
    market_cursor_make(&l, cur);
    assert_string_equal(cur, "0000000001200:sword-2.C");
    assert_int_equal(market__cursor_parse(cur, &got), 0);
    assert_string_equal(got.item, "sword-2");
    assert_string_equal(got.seller, "C");
    assert_int_equal(got.price, 1200);
    static const char *const bad[] = {
        "",
        "x",
        "1200:sword-2.C",
        "0000000001200:sword-2",
        "0000000001200:sword-2.C%20",
        "0000000001200:sword-2.C\n",
        "0000000001200:sword-2.C.",
        "0000000001200;sword-2.C",
        "AAAAAAAAAAAAA:sword-2.C",
        "0000000001200:sword 2.C",
        "0000000000500:axe.",   /* empty seller */
        "0000000000500:.A",     /* empty item */
        "0000000000000:axe.A",  /* price 0 */
        "1000000000001:axe.A",  /* above 10^12 */
        "000000000500:axe.A",   /* 12 digits */
        "-000000000500:axe.A",
        "00000000005 0:axe.A",
        "0000000000500:axe.A.B", /* a dot in the seller */
        "0000000000500:a:x.A",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (market__cursor_parse(bad[i], &got) == 0) fail_msg("cursor '%s' parsed", bad[i]);
    assert_int_equal(market__cursor_parse(NULL, &got), -1);
    char longer[MARKET_CURSOR_MAX + 8];
    memset(longer, '1', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_int_equal(market__cursor_parse(longer, &got), -1);
}

static void test_search_check_table(void **state) {
    (void)state;
    static const struct {
        market_search_query q;
        const char *field; /* NULL: good */
        const char *why;   /* a part of the reason */
    } rows[] = {
        {{NULL, NULL, 0, 0, 0, 50, NULL}, NULL, NULL},
        {{"axe", "A", 1, MARKET_PRICE_MAX, 1, 1000, ""}, NULL, NULL},
        {{NULL, NULL, 5, 5, 0, 1, NULL}, NULL, NULL},
        {{"a.x", NULL, 0, 0, 0, 50, NULL}, "item", "must match"},
        {{"", NULL, 0, 0, 0, 50, NULL}, "item", "must match"},
        {{NULL, "A B", 0, 0, 0, 50, NULL}, "seller", "must match"},
        {{NULL, NULL, -1, 0, 0, 50, NULL}, "min_price", "1..1000000000000"},
        {{NULL, NULL, 0, MARKET_PRICE_MAX + 1, 0, 50, NULL}, "max_price", "1..1000000000000"},
        {{NULL, NULL, 6, 5, 0, 50, NULL}, "min_price", "must not exceed max_price"},
        {{NULL, NULL, 0, 0, 0, 0, NULL}, "limit", "1..1000"},
        {{NULL, NULL, 0, 0, 0, MARKET_SEARCH_LIMIT_MAX + 1, NULL}, "limit", "1..1000"},
        {{NULL, NULL, 0, 0, 0, 50, "nope"}, "cursor", "is not a cursor"},
        {{NULL, NULL, 0, 0, 0, 50, "0000000000500:axe.A"}, NULL, NULL},
        {{"axe", NULL, 0, 0, 0, 50, "0000000000500:axe.A"}, NULL, NULL},
        {{"bow", NULL, 0, 0, 0, 50, "0000000000500:axe.A"}, "cursor", "another search"},
        {{NULL, "B", 0, 0, 0, 50, "0000000000500:axe.A"}, "cursor", "another search"},
        {{NULL, "A", 501, 0, 0, 50, "0000000000500:axe.A"}, "cursor", "another search"},
        {{NULL, NULL, 0, 499, 1, 50, "0000000000500:axe.A"}, "cursor", "another search"},
        {{NULL, NULL, 500, 500, 1, 50, "0000000000500:axe.A"}, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const char *field = "unset", *why = "unset";
        int rc = market_search_check(&rows[i].q, &field, &why);
        if (!rows[i].field) {
            if (rc != MARKET_OK) fail_msg("row %zu refused: %s %s", i, field, why);
            assert_null(field);
            continue;
        }
        assert_int_equal(rc, MARKET_ERR_INVALID);
        if (strcmp(field, rows[i].field) != 0) fail_msg("row %zu: field %s", i, field);
        assert_non_null(strstr(why, rows[i].why));
    }
    assert_int_equal(market_search_check(NULL, NULL, NULL), MARKET_ERR_INVALID);
}

/* ---- plans ---- */

static void test_search_plan_table(void **state) {
    (void)state;
    static const struct {
        market_search_query q;
        int point, source;
        const char *lo, *hi, *count, *after_price, *after_member;
    } rows[] = {
        {{NULL, NULL, 0, 0, 0, 50, NULL}, 0, MARKET__SEARCH_MARKET, "1", "1000000000000", "51",
         "", ""},
        {{NULL, NULL, 10, 20, 1, 5, NULL}, 0, MARKET__SEARCH_MARKET, "10", "20", "6", "", ""},
        {{"axe", NULL, 0, 300, 0, 1, NULL}, 0, MARKET__SEARCH_ITEM, "1", "300", "2", "", ""},
        {{NULL, "C", 0, 0, 0, 100, "0000000000025:potion-1.C"}, 0, MARKET__SEARCH_SELLER, "1",
         "1000000000000", "101", "25", "potion-1"},
        {{NULL, NULL, 0, 0, 1, 2, "0000000000500:axe.A"}, 0, MARKET__SEARCH_MARKET, "1",
         "1000000000000", "3", "500", "axe.A"},
        {{"axe", NULL, 0, 0, 1, 2, "0000000000500:axe.A"}, 0, MARKET__SEARCH_ITEM, "1",
         "1000000000000", "3", "500", "A"},
        {{"axe", "A", 0, 0, 0, 1, NULL}, 1, 0, "1", "1000000000000", "2", "", ""},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        market__search_plan p;
        assert_int_equal(market__search_plan_make(&rows[i].q, &p), MARKET_OK);
        assert_int_equal(p.point, rows[i].point);
        assert_string_equal(p.count, rows[i].count);
        assert_string_equal(p.lo_s, rows[i].lo);
        assert_string_equal(p.hi_s, rows[i].hi);
        if (p.point) continue;
        assert_int_equal(p.source, rows[i].source);
        assert_int_equal(p.desc, rows[i].q.desc);
        assert_string_equal(p.after_price, rows[i].after_price);
        assert_string_equal(p.after_member, rows[i].after_member);
    }
    market__search_plan p;
    market_search_query bad = {NULL, NULL, 0, 0, 0, 0, NULL};
    assert_int_equal(market__search_plan_make(&bad, &p), MARKET_ERR_INVALID);
}

/* A member of the zset a search reads becomes a listing with the query's item or seller;
 * anything else is refused. */
static void test_search_member_table(void **state) {
    (void)state;
    static const struct {
        market_search_query q;
        const char *member;
        int ok;
        const char *item, *seller;
    } rows[] = {
        {{NULL, NULL, 0, 0, 0, 5, NULL}, "axe.A", 1, "axe", "A"},
        {{NULL, NULL, 0, 0, 0, 5, NULL}, "axe", 0, "", ""},
        {{NULL, NULL, 0, 0, 0, 5, NULL}, "axe.", 0, "", ""},
        {{NULL, NULL, 0, 0, 0, 5, NULL}, ".A", 0, "", ""},
        {{NULL, NULL, 0, 0, 0, 5, NULL}, "axe.A.B", 0, "", ""},
        {{NULL, NULL, 0, 0, 0, 5, NULL}, "a x.A", 0, "", ""},
        {{"axe", NULL, 0, 0, 0, 5, NULL}, "A", 1, "axe", "A"},
        {{"axe", NULL, 0, 0, 0, 5, NULL}, "A.B", 0, "", ""},
        {{"axe", NULL, 0, 0, 0, 5, NULL}, "", 0, "", ""},
        {{NULL, "A", 0, 0, 0, 5, NULL}, "sword-2", 1, "sword-2", "A"},
        {{NULL, "A", 0, 0, 0, 5, NULL}, "sword:2", 0, "", ""},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        market__search_plan p;
        market_listing l = {{0}, {0}, 0};
        assert_int_equal(market__search_plan_make(&rows[i].q, &p), MARKET_OK);
        int rc = market__search_member(&p, &rows[i].q, rows[i].member, strlen(rows[i].member), &l);
        if ((rc == 0) != rows[i].ok) fail_msg("row %zu: %s", i, rows[i].member);
        if (!rows[i].ok) continue;
        assert_string_equal(l.item, rows[i].item);
        assert_string_equal(l.seller, rows[i].seller);
    }
    market__search_plan p;
    market_search_query q = {NULL, NULL, 0, 0, 0, 5, NULL};
    market_listing l;
    assert_int_equal(market__search_plan_make(&q, &p), MARKET_OK);
    assert_int_equal(market__search_member(&p, &q, NULL, 0, &l), -1);
    static const char nul[] = "ax\0e.A"; /* a NUL inside the reply's length */
    assert_int_equal(market__search_member(&p, &q, nul, sizeof nul - 1, &l), -1);
    char long_id[MARKET_ID_MAX + 4];
    memset(long_id, 'a', MARKET_ID_MAX + 1);
    memcpy(long_id + MARKET_ID_MAX + 1, ".A", 3); /* an id one too long */
    assert_int_equal(market__search_member(&p, &q, long_id, strlen(long_id), &l), -1);
}

static void test_search_point_table(void **state) {
    (void)state;
    static const struct {
        market_search_query q;
        int64_t price;
        int on_page;
        size_t total;
    } rows[] = {
        {{"axe", "A", 0, 0, 0, 1, NULL}, 500, 1, 1},
        {{"axe", "A", 0, 0, 0, 1, NULL}, 0, 0, 0}, /* not listed */
        {{"axe", "A", 600, 0, 0, 1, NULL}, 500, 0, 0},
        {{"axe", "A", 0, 499, 0, 1, NULL}, 500, 0, 0},
        {{"axe", "A", 500, 500, 0, 1, NULL}, 500, 1, 1},
        {{"axe", "A", 0, 0, 0, 1, "0000000000500:axe.A"}, 500, 0, 1}, /* the page after it */
        {{"axe", "A", 0, 0, 0, 1, "0000000000400:axe.A"}, 500, 1, 1}, /* repriced since */
        {{"axe", "A", 0, 0, 1, 1, "0000000000400:axe.A"}, 500, 0, 1},
        {{"axe", "A", 0, 0, 1, 1, "0000000000600:axe.A"}, 500, 1, 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        market__search_plan p;
        size_t total = 0;
        assert_int_equal(market__search_plan_make(&rows[i].q, &p), MARKET_OK);
        assert_int_equal(p.point, 1);
        if (market__search_point(&p, rows[i].price, &total) != rows[i].on_page)
            fail_msg("row %zu: on the page?", i);
        assert_int_equal(total, rows[i].total);
    }
}

/* A search by item prefix reads the names index: its entry is "<item>.<seller>" scored 0,
 * and its plan's ranges start at the prefix (or strictly after the cursor's member) and end
 * before "<prefix>\xff". */
static void test_prefix_plan_and_names_entry(void **state) {
    (void)state;
    market__idx_entry e;
    market__idx_entry_init(&e, "eu-1", "potion-2", "C", 25);
    assert_string_equal(e.names_key, "idx:{eu-1}:names");
    assert_string_equal(e.name, "potion-2.C");
    market__search_plan p;
    market_search_query q = {.item_prefix = "potion", .limit = 10};
    assert_int_equal(market__search_plan_make(&q, &p), MARKET_OK);
    assert_int_equal(p.source, MARKET__SEARCH_NAMES);
    assert_int_equal(p.point, 0);
    assert_string_equal(p.lex_all, "[potion");
    assert_string_equal(p.lex_lo, "[potion");
    assert_string_equal(p.lex_hi, "(potion\xff");
    assert_string_equal(p.count, "11");
    market_listing l;
    assert_int_equal(market__search_member(&p, &q, "potion-2.C", 10, &l), 0);
    assert_string_equal(l.item, "potion-2");
    assert_string_equal(l.seller, "C");
    q.cursor = "0000000000025:potion-2.C";
    assert_int_equal(market__search_plan_make(&q, &p), MARKET_OK);
    assert_string_equal(p.lex_lo, "(potion-2.C");
    assert_string_equal(p.lex_all, "[potion");
    q.cursor = "0000000000025:poison.C"; /* another search's */
    assert_int_equal(market__search_plan_make(&q, &p), MARKET_ERR_INVALID);
    char longest[MARKET_ID_MAX + 1];
    memset(longest, 'z', MARKET_ID_MAX);
    longest[MARKET_ID_MAX] = '\0';
    q = (market_search_query){.item_prefix = longest, .limit = 1};
    assert_int_equal(market__search_plan_make(&q, &p), MARKET_OK); /* its bounds fit whole */
    assert_int_equal(strlen(p.lex_hi), MARKET_ID_MAX + 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_keys_carry_the_realm_tag),
        cmocka_unit_test(test_prefix_plan_and_names_entry),
        cmocka_unit_test(test_idx_entries_table),
        cmocka_unit_test(test_longest_cursor_fits),
        cmocka_unit_test(test_cursor_round_trip_and_refusals),
        cmocka_unit_test(test_search_check_table),
        cmocka_unit_test(test_search_plan_table),
        cmocka_unit_test(test_search_member_table),
        cmocka_unit_test(test_search_point_table),
    };
    return cmocka_run_group_tests_name("market_index (pure)", tests, NULL, NULL);
}
