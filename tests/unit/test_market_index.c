/* test_market_index.c - market_index.c without Redis: index names and members, cursors,
 * the checks of a search and its plan, and pages walked over a simulated index (sorted
 * members, ZRANGE BYLEX bounds applied as Redis applies them) to show that cursor paging
 * visits every matching listing once, in price order, in every index and both orders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "market/market_index.h"

/* ---- names and members ---- */

static void test_idx_keys_carry_the_realm_tag(void **state) {
    (void)state;
    market__idx x;
    market__idx_init(&x, "eu-1");
    assert_string_equal(x.key[MARKET__IDX_ALL], "idx:{eu-1}:all");
    assert_string_equal(x.key[MARKET__IDX_ITEM], "idx:{eu-1}:item");
    assert_string_equal(x.key[MARKET__IDX_SELLER], "idx:{eu-1}:seller");
    char realm[MARKET_REALM_MAX + 1];
    memset(realm, 'r', MARKET_REALM_MAX);
    realm[MARKET_REALM_MAX] = '\0';
    market__idx_init(&x, realm);
    assert_int_equal(strlen(x.key[MARKET__IDX_SELLER]), strlen("idx:{}:seller") + MARKET_REALM_MAX);
    assert_true(strlen(x.key[MARKET__IDX_SELLER]) + strlen(":new") < MARKET__IDX_KEY_MAX);
}

static void test_idx_members_table(void **state) {
    (void)state;
    static const struct {
        int kind;
        const char *item, *seller;
        int64_t price;
        const char *member;
    } rows[] = {
        {MARKET__IDX_ALL, "axe", "A", 500, "0000000000500:axe.A"},
        {MARKET__IDX_ITEM, "axe", "A", 500, "axe:0000000000500:A"},
        {MARKET__IDX_SELLER, "axe", "A", 500, "A:0000000000500:axe"},
        {MARKET__IDX_ALL, "p-1", "s_2", 1, "0000000000001:p-1.s_2"},
        {MARKET__IDX_ALL, "x", "y", MARKET_PRICE_MAX, "1000000000000:x.y"},
        {MARKET__IDX_ITEM, "x", "y", MARKET_PRICE_MAX, "x:1000000000000:y"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        char m[MARKET__IDX_MEMBER_MAX];
        market__idx_member(m, rows[i].kind, rows[i].item, rows[i].seller, rows[i].price);
        assert_string_equal(m, rows[i].member);
        market_listing l;
        assert_int_equal(market__idx_decode(rows[i].kind, m, strlen(m), &l), 0);
        assert_string_equal(l.item, rows[i].item);
        assert_string_equal(l.seller, rows[i].seller);
        assert_int_equal(l.price, rows[i].price);
    }
}

static void test_idx_longest_member_fits(void **state) {
    (void)state;
    char id[MARKET_ID_MAX + 1], m[MARKET__IDX_MEMBER_MAX], cur[MARKET_CURSOR_MAX + 1];
    memset(id, 'z', MARKET_ID_MAX);
    id[MARKET_ID_MAX] = '\0';
    for (int k = 0; k < MARKET__IDX_KINDS; k++) {
        market__idx_member(m, k, id, id, MARKET_PRICE_MAX);
        assert_int_equal(strlen(m), MARKET_CURSOR_MAX);
        market_listing l;
        assert_int_equal(market__idx_decode(k, m, strlen(m), &l), 0);
    }
    market_listing l = {{0}, {0}, 7};
    memcpy(l.item, id, sizeof id);
    memcpy(l.seller, id, sizeof id);
    market_cursor_make(&l, cur);
    assert_int_equal(strlen(cur), MARKET_CURSOR_MAX);
}

static void test_idx_decode_refuses_table(void **state) {
    (void)state;
    static const struct {
        int kind;
        const char *s;
    } rows[] = {
        {MARKET__IDX_ALL, ""},
        {MARKET__IDX_ALL, "0000000000500"},
        {MARKET__IDX_ALL, "0000000000500:axe"},   /* no seller */
        {MARKET__IDX_ALL, "0000000000500:axe."},  /* empty seller */
        {MARKET__IDX_ALL, "0000000000500:.A"},    /* empty item */
        {MARKET__IDX_ALL, "0000000000000:axe.A"}, /* price 0 */
        {MARKET__IDX_ALL, "1000000000001:axe.A"}, /* above 10^12 */
        {MARKET__IDX_ALL, "9999999999999:axe.A"},
        {MARKET__IDX_ALL, "000000000500:axe.A"}, /* 12 digits */
        {MARKET__IDX_ALL, "-000000000500:axe.A"},
        {MARKET__IDX_ALL, "00000000005 0:axe.A"},
        {MARKET__IDX_ALL, "0000000000500.axe.A"},   /* no ':' */
        {MARKET__IDX_ALL, "0000000000500:axe.A.B"}, /* a dot in the seller */
        {MARKET__IDX_ALL, "0000000000500:a:x.A"},
        {MARKET__IDX_ALL, "0000000000500:axe.A "},
        {MARKET__IDX_ITEM, "axe:0000000000500"},
        {MARKET__IDX_ITEM, "axe:0000000000500:"},
        {MARKET__IDX_ITEM, ":0000000000500:A"},
        {MARKET__IDX_ITEM, "axe:000000000050:A"},
        {MARKET__IDX_ITEM, "axe:0000000000500:A:B"},
        {MARKET__IDX_ITEM, "axe:0000000000500.A"},
        {MARKET__IDX_SELLER, "A:0000000000000:axe"},
        {MARKET__IDX_SELLER, "A.0000000000500:axe"},
        {MARKET__IDX_SELLER, "0000000000500:axe.A"}, /* an idx:all member */
        {7, "0000000000500:axe.A"},                  /* no such index */
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        market_listing l;
        if (market__idx_decode(rows[i].kind, rows[i].s, strlen(rows[i].s), &l) == 0)
            fail_msg("row %zu decoded: %s", i, rows[i].s);
    }
    char ids[2 * MARKET_ID_MAX + 40];
    char id65[MARKET_ID_MAX + 2];
    memset(id65, 'a', MARKET_ID_MAX + 1);
    id65[MARKET_ID_MAX + 1] = '\0';
    snprintf(ids, sizeof ids, "0000000000500:%s.A", id65); /* an id one too long */
    market_listing l;
    assert_int_equal(market__idx_decode(MARKET__IDX_ALL, ids, strlen(ids), &l), -1);
    assert_int_equal(market__idx_decode(MARKET__IDX_ALL, NULL, 0, &l), -1);
    /* a NUL inside the reply's length */
    static const char nul[] = "0000000000500:ax\0e.A";
    assert_int_equal(market__idx_decode(MARKET__IDX_ALL, nul, sizeof nul - 1, &l), -1);
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
        int point, kind;
        const char *min, *max, *start, *stop, *count;
    } rows[] = {
        {{NULL, NULL, 0, 0, 0, 50, NULL},
         0,
         MARKET__IDX_ALL,
         "[0000000000001",
         "(1000000000000;",
         "[0000000000001",
         "(1000000000000;",
         "51"},
        {{NULL, NULL, 10, 20, 1, 5, NULL},
         0,
         MARKET__IDX_ALL,
         "[0000000000010",
         "(0000000000020;",
         "(0000000000020;",
         "[0000000000010",
         "6"},
        {{"axe", NULL, 0, 300, 0, 1, NULL},
         0,
         MARKET__IDX_ITEM,
         "[axe:0000000000001",
         "(axe:0000000000300;",
         "[axe:0000000000001",
         "(axe:0000000000300;",
         "2"},
        {{NULL, "C", 0, 0, 0, 100, "0000000000025:potion-1.C"},
         0,
         MARKET__IDX_SELLER,
         "[C:0000000000001",
         "(C:1000000000000;",
         "(C:0000000000025:potion-1",
         "(C:1000000000000;",
         "101"},
        {{NULL, NULL, 0, 0, 1, 2, "0000000000500:axe.A"},
         0,
         MARKET__IDX_ALL,
         "[0000000000001",
         "(1000000000000;",
         "(0000000000500:axe.A",
         "[0000000000001",
         "3"},
        {{"axe", NULL, 0, 0, 1, 2, "0000000000500:axe.A"},
         0,
         MARKET__IDX_ITEM,
         "[axe:0000000000001",
         "(axe:1000000000000;",
         "(axe:0000000000500:A",
         "[axe:0000000000001",
         "3"},
        {{"axe", "A", 0, 0, 0, 1, NULL}, 1, 0, "", "", "", "", "2"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        market__search_plan p;
        assert_int_equal(market__search_plan_make(&rows[i].q, &p), MARKET_OK);
        assert_int_equal(p.point, rows[i].point);
        assert_string_equal(p.count, rows[i].count);
        if (p.point) continue;
        assert_int_equal(p.kind, rows[i].kind);
        assert_int_equal(p.desc, rows[i].q.desc);
        assert_string_equal(p.min, rows[i].min);
        assert_string_equal(p.max, rows[i].max);
        assert_string_equal(p.start, rows[i].start);
        assert_string_equal(p.stop, rows[i].stop);
    }
    market__search_plan p;
    market_search_query bad = {NULL, NULL, 0, 0, 0, 0, NULL};
    assert_int_equal(market__search_plan_make(&bad, &p), MARKET_ERR_INVALID);
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

/* ---- pages over a simulated index ---- */

#define N_LISTINGS 300

/* A listing of the simulated market. */
static market_listing world[N_LISTINGS];

/* The members of index kind for world, sorted as Redis sorts equal scores (bytewise). */
static char members[N_LISTINGS][MARKET__IDX_MEMBER_MAX];

static int cmp_member(const void *a, const void *b) {
    return strcmp(a, b);
}

static void world_make(void) {
    uint64_t s = 7;
    for (size_t i = 0; i < N_LISTINGS; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        snprintf(world[i].item, sizeof world[i].item, "i%zu%s", i, i % 3 ? "" : "-x");
        snprintf(world[i].seller, sizeof world[i].seller, "p%u", (unsigned)(s >> 33) % 7);
        world[i].price = 1 + (int64_t)((s >> 40) % 20); /* many equal prices */
    }
    world[0].price = MARKET_PRICE_MAX;
    snprintf(world[1].item, sizeof world[1].item, "shared"); /* an item id several sell */
    snprintf(world[2].item, sizeof world[2].item, "shared");
    snprintf(world[2].seller, sizeof world[2].seller, "p-2");
    snprintf(world[3].item, sizeof world[3].item, "shared-2"); /* "shared" is its prefix */
    snprintf(world[4].item, sizeof world[4].item, "sharedA");
}

/* Whether member m is inside the ZRANGE BYLEX bound b ("[x", "(x", "-" or "+") from below
 * (lower) or from above. */
static int within(const char *m, const char *b, int lower) {
    if (b[0] == '-') return lower;
    if (b[0] == '+') return !lower;
    int d = strcmp(m, b + 1);
    if (b[0] == '[') return lower ? d >= 0 : d <= 0;
    return lower ? d > 0 : d < 0;
}

/* ZRANGE key start stop BYLEX [REV] LIMIT 0 count over the n sorted members; the members
 * go into out (pointers). Returns how many. */
static size_t zrange(size_t n, const market__search_plan *p, const char **out) {
    size_t count = (size_t)strtoul(p->count, NULL, 10), got = 0;
    const char *lo = p->desc ? p->stop : p->start, *hi = p->desc ? p->start : p->stop;
    for (size_t k = 0; k < n && got < count; k++) {
        size_t i = p->desc ? n - 1 - k : k;
        if (within(members[i], lo, 1) && within(members[i], hi, 0)) out[got++] = members[i];
    }
    return got;
}

static size_t zlexcount(size_t n, const market__search_plan *p) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += within(members[i], p->min, 1) && within(members[i], p->max, 0);
    return c;
}

static int matches(const market_listing *l, const market_search_query *q) {
    return (!q->item || strcmp(l->item, q->item) == 0) &&
           (!q->seller || strcmp(l->seller, q->seller) == 0) &&
           (!q->min_price || l->price >= q->min_price) &&
           (!q->max_price || l->price <= q->max_price);
}

/* Pages through q over the simulated index with cursors, as market_search() would,
 * checking each page, then that every matching listing came exactly once. */
static void walk(market_search_query q) {
    market__search_plan p;
    char cursor[MARKET_CURSOR_MAX + 1] = "";
    int seen[N_LISTINGS] = {0};
    size_t pages = 0, got_total = 0, want = 0;
    int64_t last = q.desc ? MARKET_PRICE_MAX + 1 : 0;
    for (size_t i = 0; i < N_LISTINGS; i++)
        want += matches(&world[i], &q);
    assert_int_equal(market__search_plan_make(&q, &p), MARKET_OK);
    assert_false(p.point);
    for (size_t i = 0; i < N_LISTINGS; i++)
        market__idx_member(members[i], p.kind, world[i].item, world[i].seller, world[i].price);
    qsort(members, N_LISTINGS, sizeof *members, cmp_member);
    for (;;) {
        q.cursor = cursor;
        assert_int_equal(market__search_plan_make(&q, &p), MARKET_OK);
        assert_int_equal(zlexcount(N_LISTINGS, &p), want); /* the total, on every page */
        const char *page[MARKET_SEARCH_LIMIT_MAX + 1];
        size_t n = zrange(N_LISTINGS, &p, page), shown = n < q.limit ? n : q.limit;
        market_listing l = {{0}, {0}, 0};
        for (size_t k = 0; k < shown; k++) {
            assert_int_equal(market__idx_decode(p.kind, page[k], strlen(page[k]), &l), 0);
            assert_true(matches(&l, &q));
            assert_true(q.desc ? l.price <= last : l.price >= last); /* price order */
            last = l.price;
            size_t w = 0;
            while (strcmp(world[w].item, l.item) != 0 || strcmp(world[w].seller, l.seller) != 0)
                w++;
            assert_int_equal(world[w].price, l.price);
            assert_int_equal(seen[w]++, 0); /* never twice */
            got_total++;
        }
        pages++;
        assert_true(pages <= N_LISTINGS + 1);
        if (n <= q.limit) break; /* no next page */
        market_cursor_make(&l, cursor);
    }
    assert_int_equal(got_total, want);
}

static void test_pages_visit_every_match_once(void **state) {
    (void)state;
    world_make();
    static const market_search_query qs[] = {
        {NULL, NULL, 0, 0, 0, 7, NULL},      {NULL, NULL, 0, 0, 1, 7, NULL},
        {NULL, NULL, 0, 0, 0, 1, NULL},      {NULL, NULL, 0, 0, 0, 1000, NULL},
        {NULL, NULL, 3, 9, 0, 4, NULL},      {NULL, NULL, 3, 9, 1, 4, NULL},
        {NULL, NULL, 20, 20, 0, 2, NULL},    {NULL, NULL, MARKET_PRICE_MAX, 0, 1, 2, NULL},
        {"shared", NULL, 0, 0, 0, 1, NULL},  {"shared", NULL, 0, 0, 1, 1, NULL},
        {"sharedA", NULL, 0, 0, 0, 1, NULL}, {"i10", NULL, 0, 0, 0, 3, NULL}, /* not i100 .. i109 */
        {"nothing", NULL, 0, 0, 0, 3, NULL}, {NULL, "p3", 0, 0, 0, 5, NULL},
        {NULL, "p3", 0, 0, 1, 5, NULL},      {NULL, "p3", 5, 12, 0, 3, NULL},
        {NULL, "p3", 5, 12, 1, 3, NULL},     {NULL, "p-2", 0, 0, 0, 3, NULL},
    };
    for (size_t i = 0; i < sizeof qs / sizeof *qs; i++)
        walk(qs[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_keys_carry_the_realm_tag),
        cmocka_unit_test(test_idx_members_table),
        cmocka_unit_test(test_idx_longest_member_fits),
        cmocka_unit_test(test_idx_decode_refuses_table),
        cmocka_unit_test(test_cursor_round_trip_and_refusals),
        cmocka_unit_test(test_search_check_table),
        cmocka_unit_test(test_search_plan_table),
        cmocka_unit_test(test_search_point_table),
        cmocka_unit_test(test_pages_visit_every_match_once),
    };
    return cmocka_run_group_tests_name("market_index (pure)", tests, NULL, NULL);
}
