/* test_market_sweep.c - listings that end, and the sweeper that settles
 * them, against a real redis-server under each strategy: a listing's end as
 * lists, unlists and a realm's default set it; listings taken back by the
 * sweeper when their end comes; an ending queued twice, and one of a
 * listing bought meanwhile; a sweeper whose lease another took over between
 * its decision and its commit (it commits nothing); and two sweepers on one
 * store settling 400 endings, each exactly once.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/market_fx.h"

#define REALM MARKET_REALM_DEFAULT
#define ENDS "market:{main}:ends"
#define FUNDS_B 100000

/* ---- helpers ---- */

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A sells an axe; C holds 50 potions; B has funds; the house "game". */
static void seed(market_conn *c) {
    (void)th_fx_num("FLUSHALL");
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", "Bob", FUNDS_B), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "C", "Carol", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "game", "The house", 0), MARKET_OK);
    assert_int_equal(market_world_add_item(w, "A", "axe"), MARKET_OK);
    assert_int_equal(market_world_add_stack(w, "C", "potion", 50), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

static market_config config(uint32_t sweep_ms) {
    return (market_config){.redis_timeout_ms = 1000,
                           .lock_ttl_ms = 5000,
                           .acquire_timeout_ms = 5000,
                           .sweep_interval_ms = sweep_ms,
                           .sweep_lease_ms = 1000,
                           .test_decided = th_fx_on_decided};
}

static int fx_setup(void **state) {
    th_market *f = th_market_new(config(20));
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

/* Lists quantity units (0: the unique item) of item for seller at price, ending after
 * duration_s (0: the realm's default). Returns its outcome, with *res filled. */
static int list(market_conn *c, const char *seller, const char *item, int64_t price,
                int64_t quantity, int64_t duration_s, market_list_result *res) {
    market_order o = {.type = MARKET_ORDER_LIST,
                      .realm = REALM,
                      .player = seller,
                      .item = item,
                      .price = price,
                      .quantity = quantity,
                      .duration_s = duration_s};
    int rc = market_order_run(c, &o);
    *res = o.res.list;
    return rc;
}

/* An ending of seller's listing of item, under token (NULL: none checked). */
static int expire(market_conn *c, const char *seller, const char *item, const char *token,
                  market_unlist_result *res) {
    market_order o = {.type = MARKET_ORDER_EXPIRE,
                      .realm = REALM,
                      .player = seller,
                      .item = item,
                      .token = token};
    int rc = market_order_run(c, &o);
    if (res) *res = o.res.unlist;
    return rc;
}

static long long end_of(const char *member) {
    return th_fx_num("ZSCORE " ENDS " %s", member);
}

static long long store_ms(void) {
    redisReply *r = th_fx_cmd("TIME");
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    long long ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* Whether player id holds item (a unique item) in realm. */
static int holds(market_conn *c, const char *id, const char *item) {
    market_player *p = NULL;
    assert_int_equal(market_player_get(c, REALM, id, &p), MARKET_OK);
    int found = 0;
    for (size_t i = 0; i < p->n_inventory; i++)
        found |= strcmp(p->inventory[i], item) == 0;
    market_player_free(p);
    return found;
}

/* The audit: every unit and item in one place, funds conserved. */
static void assert_whole(market_conn *c, int64_t funds) {
    market_audit_report a;
    assert_int_equal(market_audit(c, REALM, &a), MARKET_OK);
    assert_int_equal(a.total_funds, funds);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(a.index_mismatch, 0);
}

/* ---- tests ---- */

/* A listing's end: set by a list with a duration (the store's clock), moved to the later
 * end by units added, kept by units added with an earlier one, dropped by an unlist; a
 * list without a duration has none, and drops one its bought forerunner left; the
 * realm's default applies to a list that names none. */
static void test_ends_as_lists_set_them(void **state) {
    th_market *f = *state;
    market_list_result r;
    long long t0 = store_ms();
    assert_int_equal(list(f->c, "C", "potion", 10, 5, 100, &r), MARKET_OK);
    assert_true(r.ends_ms >= t0 + 100000 && r.ends_ms <= store_ms() + 100000);
    assert_int_equal(end_of("potion.C"), r.ends_ms);
    int64_t first = r.ends_ms;
    assert_int_equal(list(f->c, "C", "potion", 10, 5, 1000, &r), MARKET_OK);
    assert_true(r.ends_ms > first + 800000);
    assert_int_equal(end_of("potion.C"), r.ends_ms);
    int64_t later = r.ends_ms;
    assert_int_equal(list(f->c, "C", "potion", 10, 5, 10, &r), MARKET_OK);
    assert_int_equal(r.ends_ms, later); /* the later end stays */
    assert_int_equal(r.quantity, 15);
    int64_t price, units;
    assert_int_equal(market_unlist_units(f->c, REALM, "C", "potion", &price, &units), MARKET_OK);
    assert_int_equal(units, 15);
    assert_int_equal(th_fx_num("EXISTS " ENDS), 0);
    /* no duration, no default: no end */
    assert_int_equal(list(f->c, "A", "axe", 500, 0, 0, &r), MARKET_OK);
    assert_int_equal(r.ends_ms, 0);
    assert_int_equal(th_fx_num("ZCARD " ENDS), 0);
    /* a stale end (its listing was bought) goes with the next listing without one */
    (void)th_fx_num("ZADD " ENDS " 1 potion.C");
    assert_int_equal(list(f->c, "C", "potion", 10, 1, 0, &r), MARKET_OK);
    assert_int_equal(th_fx_num("ZCARD " ENDS), 0);
    assert_int_equal(market_unlist_units(f->c, REALM, "C", "potion", &price, &units), MARKET_OK);
    /* the realm's default */
    market_settings st = {.list_duration_s = 60};
    assert_int_equal(market_settings_set(f->c, REALM, &st), MARKET_OK);
    assert_int_equal(th_fx_num("SISMEMBER market:{.ending}:realms main"), 1);
    t0 = store_ms();
    assert_int_equal(list(f->c, "C", "potion", 10, 2, 0, &r), MARKET_OK);
    assert_true(r.ends_ms >= t0 + 60000 && r.ends_ms <= store_ms() + 60000);
    market_settings got;
    assert_int_equal(market_settings_get(f->c, REALM, &got), MARKET_OK);
    assert_int_equal(got.list_duration_s, 60);
    st.list_duration_s = MARKET_DURATION_MAX_S + 1;
    assert_int_equal(market_settings_set(f->c, REALM, &st), MARKET_ERR_INVALID);
    /* a duration out of range is refused, nothing listed */
    assert_int_equal(list(f->c, "C", "potion", 10, 1, MARKET_DURATION_MAX_S + 1, &r),
                     MARKET_ERR_INVALID);
    assert_int_equal(list(f->c, "C", "potion", 10, 1, -1, &r), MARKET_ERR_INVALID);
    assert_int_equal(th_fx_num("HGET market:{main}:units potion.C"), 2);
}

/* What the market shows of a listing's end: every search (by item, by seller, by both, by
 * the start of the item's name, the whole market by price) and the market's pages give a
 * listing that ends its end, as the ends hold it, and one that never ends none. */
static void test_views_show_ends(void **state) {
    th_market *f = *state;
    market_list_result r;
    assert_int_equal(list(f->c, "C", "potion", 10, 5, 600, &r), MARKET_OK);
    int64_t potion_end = r.ends_ms;
    assert_true(potion_end > 0 && potion_end == end_of("potion.C"));
    assert_int_equal(list(f->c, "A", "axe", 500, 0, 0, &r), MARKET_OK);
    const market_search_query qs[] = {
        {.item = "potion", .limit = 10},
        {.seller = "C", .limit = 10},
        {.item = "potion", .seller = "C", .limit = 10},
        {.item_prefix = "pot", .limit = 10},
        {.limit = 10},
    };
    for (size_t k = 0; k < sizeof qs / sizeof *qs; k++) {
        market_search_result res;
        assert_int_equal(market_search(f->c, REALM, &qs[k], &res), MARKET_OK);
        int found = 0;
        for (size_t i = 0; i < res.n; i++) {
            const market_listing *l = &res.listings[i];
            assert_int_equal(l->ends_ms, strcmp(l->item, "potion") == 0 ? potion_end : 0);
            found += strcmp(l->item, "potion") == 0;
        }
        assert_int_equal(found, 1);
        market_search_result_cleanup(&res);
    }
    market_listing *page = NULL;
    size_t n = 0, total = 0;
    assert_int_equal(market_listings(f->c, REALM, 0, 10, &page, &n, &total), MARKET_OK);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(page[i].ends_ms, strcmp(page[i].item, "potion") == 0 ? potion_end : 0);
    free(page);
}

/* The sweeper takes listings back when their end comes: the axe to A, the potions to C,
 * the ends gone, the counters counted, the realm whole. */
static void test_sweeper_takes_back_what_ended(void **state) {
    th_market *f = *state;
    market_list_result r;
    assert_int_equal(list(f->c, "A", "axe", 500, 0, 1, &r), MARKET_OK);
    assert_int_equal(list(f->c, "C", "potion", 10, 20, 1, &r), MARKET_OK);
    assert_int_equal(list(f->c, "C", "potion", 10, 5, 0, &r), MARKET_OK); /* keeps its end */
    assert_int_equal(th_fx_num("ZCARD " ENDS), 2);
    assert_false(holds(f->c, "A", "axe"));
    assert_int_equal(market_sweeper_start(f->m), MARKET_OK);
    market_stats s;
    for (int i = 0; i < 3000; i++) { /* an ending is counted after its commit's answer */
        market_stats_get(f->m, &s);
        if (s.expired >= 2) break;
        sleep_ms(10);
    }
    assert_int_equal(th_fx_num("ZCARD " ENDS), 0);
    assert_true(holds(f->c, "A", "axe"));
    assert_int_equal(th_fx_num("HGET stacks:{main}:C potion"), 50);
    assert_int_equal(th_fx_num("ZCARD market:{main}"), 0);
    assert_int_equal(s.expired, 2);
    assert_true(s.sweeps >= 1);
    assert_int_equal(s.settled, 2);
    uint64_t in_buckets = 0;
    for (int i = 0; i < MARKET_LATE_BUCKETS; i++)
        in_buckets += s.late_bucket[i];
    assert_int_equal(in_buckets, 2);
    assert_whole(f->c, FUNDS_B);
    /* the lease is given up between sweeps: nobody holds it for long */
    for (int i = 0; i < 3000 && th_fx_num("EXISTS lock:sweep:{main}"); i++)
        sleep_ms(1);
    assert_int_equal(th_fx_num("EXISTS lock:sweep:{main}"), 0);
}

/* An ending before its end does nothing; one queued twice settles once; one of a
 * listing bought meanwhile drops the end and moves nothing. */
static void test_ending_settles_once(void **state) {
    th_market *f = *state;
    market_list_result r;
    assert_int_equal(list(f->c, "A", "axe", 500, 0, 3600, &r), MARKET_OK);
    market_unlist_result u;
    assert_int_equal(expire(f->c, "A", "axe", NULL, &u), MARKET_ERR_NOT_LISTED); /* not due */
    assert_false(holds(f->c, "A", "axe"));
    (void)th_fx_num("ZADD " ENDS " XX 1000 axe.A"); /* its end has come */
    assert_int_equal(expire(f->c, "A", "axe", NULL, &u), MARKET_OK);
    assert_int_equal(u.units, 1);
    assert_int_equal(u.price, 500);
    assert_true(u.late_ms > 0);
    assert_int_equal(expire(f->c, "A", "axe", NULL, &u), MARKET_ERR_NOT_LISTED);
    assert_true(holds(f->c, "A", "axe"));
    assert_int_equal(th_fx_num("EXISTS " ENDS), 0);
    /* bought before its end was settled */
    assert_int_equal(list(f->c, "A", "axe", 500, 0, 3600, &r), MARKET_OK);
    market_purchase_result pr;
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &pr), MARKET_OK);
    assert_int_equal(end_of("axe.A"), r.ends_ms); /* left for the sweeper */
    (void)th_fx_num("ZADD " ENDS " XX 1000 axe.A");
    assert_int_equal(expire(f->c, "A", "axe", NULL, &u), MARKET_OK);
    assert_int_equal(u.units, 0);
    assert_true(holds(f->c, "B", "axe"));
    assert_false(holds(f->c, "A", "axe"));
    assert_int_equal(th_fx_num("EXISTS " ENDS), 0);
    assert_whole(f->c, FUNDS_B);
}

/* Armed: another server's sweeper takes the lease over, as after ours lapsed. */
static void take_lease_over(void) {
    (void)th_fx_num("SET lock:sweep:{main} another-sweepers-token PX 10000");
}

/* A sweeper decided an ending under its lease; before its commit the lease lapsed and
 * another sweeper took it: the commit is refused (lease lost) and nothing moves. */
static void test_sweeper_paused_past_its_lease_commits_nothing(void **state) {
    th_market *f = *state;
    market_list_result r;
    assert_int_equal(list(f->c, "A", "axe", 500, 0, 3600, &r), MARKET_OK);
    (void)th_fx_num("ZADD " ENDS " XX 1000 axe.A");
    lock_handle h;
    assert_int_equal(lock_acquire(f->lock, "lock:sweep:{main}", 10000, 0, &h), LOCK_OK);
    th_fx_arm(take_lease_over);
    market_unlist_result u;
    assert_int_equal(expire(f->c, "A", "axe", h.token, &u), MARKET_ERR_LEASE_LOST);
    assert_false(th_fx_armed());
    assert_false(holds(f->c, "A", "axe"));
    assert_int_equal(th_fx_num("ZCARD market:{main}"), 1); /* still listed */
    assert_int_equal(end_of("axe.A"), 1000);               /* still due, for the new holder */
    assert_int_equal(expire(f->c, "A", "axe", "another-sweepers-token", &u), MARKET_OK);
    assert_true(holds(f->c, "A", "axe"));
    (void)lock_release(f->lock, &h);
}

/* A world seeded with listings that end (market_world_end_listing(), a fixture's
 * "duration_s"): their ends written with them, the realm noted for the sweepers, and the
 * sweeper takes them back. */
static void test_seeded_listings_end(void **state) {
    th_market *f = *state;
    (void)th_fx_num("FLUSHALL");
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 0), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 500), MARKET_OK);
    assert_int_equal(market_world_end_listing(w, "A", "axe", 1), MARKET_OK);
    assert_int_equal(market_world_add_units_listing(w, "A", "ore", 5, 7), MARKET_OK);
    assert_int_equal(market_world_end_listing(w, "A", "ore", 3600), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "bow", 50), MARKET_OK); /* no end */
    long long t0 = store_ms();
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    assert_int_equal(th_fx_num("ZCARD " ENDS), 2);
    assert_true(end_of("axe.A") >= t0 + 1000 && end_of("axe.A") <= store_ms() + 1000);
    assert_true(end_of("ore.A") >= t0 + 3600000);
    assert_int_equal(th_fx_num("SISMEMBER market:{.ending}:realms main"), 1);
    assert_int_equal(market_sweeper_start(f->m), MARKET_OK);
    for (int i = 0; i < 3000 && !holds(f->c, "A", "axe"); i++)
        sleep_ms(10);
    assert_true(holds(f->c, "A", "axe"));
    assert_int_equal(th_fx_num("ZCARD market:{main}"), 2); /* the bow and the ore stay */
    assert_int_equal(th_fx_num("ZCARD " ENDS), 1);
}

/* Two servers' sweepers on one store, 400 endings due at once (200 items, 200 lots of
 * units): every one settled, each by exactly one of them. */
static void test_two_sweepers_settle_each_once(void **state) {
    th_market *f = *state;
    enum { N = 200 };
    (void)th_fx_num("FLUSHALL");
    market_world *w = market_world_new();
    assert_non_null(w);
    char id[32], item[32];
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof id, "s%d", i);
        assert_int_equal(market_world_add_player(w, id, "seller", 0), MARKET_OK);
    }
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof id, "s%d", i % 20);
        snprintf(item, sizeof item, "sword%d", i);
        assert_int_equal(market_world_add_listing(w, id, item, 100 + i), MARKET_OK);
        snprintf(item, sizeof item, "ore%d", i);
        assert_int_equal(market_world_add_stack(w, id, item, 10), MARKET_OK);
        assert_int_equal(market_world_add_units_listing(w, id, item, 7, 10), MARKET_OK);
    }
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    for (int i = 0; i < N; i++) { /* all due now */
        snprintf(id, sizeof id, "s%d", i % 20);
        (void)th_fx_num("ZADD " ENDS " %d sword%d.%s", 1000 + i, i, id);
        (void)th_fx_num("ZADD " ENDS " %d ore%d.%s", 1000 + i, i, id);
    }
    (void)th_fx_num("SADD market:{.ending}:realms main");
    th_market *g = th_market_new(config(5));
    assert_non_null(g);
    assert_int_equal(market_sweeper_start(f->m), MARKET_OK);
    assert_int_equal(market_sweeper_start(g->m), MARKET_OK);
    market_stats a, b;
    for (int i = 0; i < 6000; i++) { /* an ending is counted after its commit's answer */
        market_stats_get(f->m, &a);
        market_stats_get(g->m, &b);
        if (a.expired + b.expired >= 2 * N && th_fx_num("ZCARD " ENDS) == 0) break;
        sleep_ms(10);
    }
    assert_int_equal(th_fx_num("ZCARD " ENDS), 0);
    th_market_free(g); /* its sweeper stops */
    fprintf(stderr, "# two sweepers: %llu and %llu endings settled, %llu and %llu sweeps\n",
            (unsigned long long)a.expired, (unsigned long long)b.expired,
            (unsigned long long)a.sweeps, (unsigned long long)b.sweeps);
    assert_int_equal(a.expired + b.expired, 2 * N); /* each once */
    assert_int_equal(th_fx_num("ZCARD market:{main}"), 0);
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof id, "s%d", i % 20);
        snprintf(item, sizeof item, "sword%d", i);
        assert_true(holds(f->c, id, item));
        assert_int_equal(th_fx_num("HGET stacks:{main}:%s ore%d", id, i), 20);
    }
    assert_whole(f->c, 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_ends_as_lists_set_them),
        T(test_views_show_ends),
        T(test_sweeper_takes_back_what_ended),
        T(test_ending_settles_once),
        T(test_sweeper_paused_past_its_lease_commits_nothing),
        T(test_seeded_listings_end),
        T(test_two_sweepers_settle_each_once),
    };
    return th_run_strategies("market sweep", tests, sizeof tests / sizeof *tests);
}
