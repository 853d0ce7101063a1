/* test_market_frame.c - what every order kind's attempt shares
 * (market_frame.c), without Redis: the frame of a batch's read and its
 * judgement from hand-made replies, the decision loop in queue order over
 * a made-up kind (orders settled by their records, by an earlier order of
 * the batch, answered busy past their budget, decided by the kind), the
 * fences and records its commit writes, and the table of players with
 * their net change of funds. */
#include <stdio.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"
#include "tests/helpers/reply.h"

#include "market/market_frame.h"

#define TOKEN "0123456789abcdef0123456789abcdef"

static market__cbatch cb;
static market_order order[4];
static market__frame frame;

/* A batch of n purchases by P in realm r, with the keys given (NULL: none),
 * each with a wait budget ending at deadline[i]. */
static void batch(const market_idem *const *idem, const int64_t *deadline, size_t n) {
    memset(&cb, 0, sizeof cb);
    memset(order, 0, sizeof order);
    cb.realm = "r";
    cb.n = cb.n_open = n;
    memcpy(cb.token, TOKEN, sizeof TOKEN);
    cb.token_set = 1;
    for (size_t i = 0; i < n; i++) {
        market_order *o = &order[i];
        o->type = MARKET_ORDER_PURCHASE;
        o->realm = "r";
        o->player = "P";
        o->idem = idem[i];
        o->q = (market_queued){.order = o,
                               .rc = &o->rc,
                               .replayed = &o->res.purchase.replayed,
                               .trade_id = o->res.purchase.trade_id,
                               .deadline_ms = deadline[i]};
        cb.req[i] = &o->q;
    }
    assert_int_equal(market__frame_begin(&frame, &cb, 0), MARKET_OK);
}

/* The made-up kind: order i succeeds when its price is even, and its
 * record keeps the price, i and i + 100. */
static int decided;
static int decide_one(void *ks, size_t i, int64_t *a, int64_t *b, int64_t *c) {
    (void)ks;
    decided++;
    *a = frame.req[i]->price;
    *b = (int64_t)i;
    *c = (int64_t)i + 100;
    return frame.req[i]->price % 2 ? MARKET_ERR_PRICE_CHANGED : MARKET_OK;
}

static void replay(market_order *o, const market__outcome *v) {
    o->res.purchase.price = v->a;
    o->res.purchase.fee = v->c;
}

/* The read is claims | WATCH <kind's keys> <fencing records> <records> <the
 * realm's seeding mark> | MGET fencing records and the mark | MGET records |
 * the kind's, and an unlist (whose kind never replays) names no key. */
static void test_read_frame(void **state) {
    (void)state;
    market_idem k = {"k1", "fp"};
    const market_idem *idem[2] = {&k, &k};
    int64_t dl[2] = {1000, 1000};
    batch(idem, dl, 2);
    order[1].q.replayed = NULL; /* as an unlist's */
    assert_int_equal(market__frame_begin(&frame, &cb, 0), MARKET_OK);
    assert_int_equal(frame.idem.n_keyed, 1);
    assert_string_equal(cb.req[1]->k_idem, "");
    market__held held = {.n = 1};
    held.key[0] = "lock:market:{r}";
    snprintf(held.fenced[0], sizeof held.fenced[0], "lock:market:{r}:fenced");
    market__buf r = {0};
    market__frame_read(&frame, &r);
    market__buf_arg(&r, "mine");
    market__frame_watched(&frame, &held, 1, &r);
    market__rd_time(&r);
    assert_int_equal(market__buf_seal(&r), MARKET_OK);
    assert_int_equal(r.n, 5); /* SET, WATCH, MGET, MGET, TIME */
    assert_int_equal(frame.i_watch, 1);
    assert_int_equal(frame.i_fence, 2);
    assert_int_equal(frame.i_idem, 3);
    assert_string_equal(r.argv[1][0], "WATCH");
    assert_int_equal(r.argc[1], 6); /* mine, the lock key, its record, k1's record, the mark */
    assert_string_equal(r.argv[1][1], "mine");
    assert_string_equal(r.argv[1][3], "lock:market:{r}:fenced");
    assert_string_equal(r.argv[1][5], "market:{r}:building");
    assert_string_equal(r.argv[2][0], "MGET");
    assert_int_equal(r.argc[2], 3); /* the lock key's record, the mark */
    assert_string_equal(r.argv[2][1], "lock:market:{r}:fenced");
    assert_string_equal(r.argv[2][2], "market:{r}:building");
    market__buf_free(&r);
}

/* A kind that sells watches and reads the realm's settings behind the
 * records; the cut goes to the house's funds when the batch holds them
 * (read), else one HINCRBY pays it unread. */
static void test_a_selling_kind_reads_the_settings(void **state) {
    (void)state;
    const market_idem *idem[1] = {NULL};
    int64_t dl[1] = {1000};
    batch(idem, dl, 1);
    frame.fees = 1;
    market__held held = {.n = 0};
    market__buf r = {0};
    market__frame_read(&frame, &r);
    market__frame_watched(&frame, &held, 0, &r);
    assert_int_equal(market__buf_seal(&r), MARKET_OK);
    assert_int_equal(r.n, 3); /* WATCH, EXISTS, HMGET */
    assert_string_equal(r.argv[0][0], "WATCH");
    assert_string_equal(r.argv[0][1], "market:{r}:settings");
    assert_string_equal(r.argv[0][2], "market:{r}:building");
    assert_int_equal(frame.i_settings, 2);
    assert_string_equal(r.argv[2][0], "HMGET");
    assert_string_equal(r.argv[2][1], "market:{r}:settings");
    assert_string_equal(r.argv[2][2], "fee_bps");
    assert_string_equal(r.argv[2][3], "house");
    assert_string_equal(r.argv[2][4], "list_fee_bps");
    assert_string_equal(r.argv[2][5], "list_duration_s");
    market__buf_free(&r);
    redisReply *rep[3] = {
        th_rep_new(REDIS_REPLY_STATUS), th_rep_int(0),
        th_rep_arr(4, th_rep_str("250"), th_rep_str("bank"), th_rep_nil(), th_rep_str("600"))};
    assert_int_equal(market__frame_judge(&frame, NULL, &held, rep), MARKET_OK);
    assert_int_equal(frame.settings.fee_bps, 250);
    assert_string_equal(frame.settings.house, "bank");
    assert_int_equal(frame.settings.list_duration_s, 600);
    static market__parties p;
    p.n = 0;
    (void)market__parties_of(&p, "r", "P");
    market__cut cut;
    market__frame_cut(&frame, &p, frame.settings.fee_bps, &cut);
    assert_int_equal(cut.bps, 250);
    assert_null(cut.house); /* not held */
    size_t h = market__parties_of(&p, "r", "bank");
    market__frame_cut(&frame, &p, frame.settings.fee_bps, &cut);
    assert_null(cut.house); /* held, but its funds unread */
    p.party[h] = (market__party){MARKET__PRESENT, 5};
    market__frame_cut(&frame, &p, frame.settings.fee_bps, &cut);
    assert_ptr_equal(cut.house, &p.party[h]);
    cut.unread = 40;
    market__buf w = {0};
    market__frame_cut_pay(&frame, &cut, &w);
    assert_int_equal(market__buf_seal(&w), MARKET_OK);
    assert_int_equal(w.n, 1);
    assert_string_equal(w.argv[0][0], "HINCRBY");
    assert_string_equal(w.argv[0][1], "users:{r}:bank");
    assert_string_equal(w.argv[0][3], "40");
    market__buf_free(&w);
    for (size_t i = 0; i < 3; i++)
        freeReplyObject(rep[i]);
    frame.fees = 0;
}

/* A fence above ours in the record is a lease lost; ours already there is
 * not written again, an older one is. */
static void test_judge_lease_and_fence(void **state) {
    (void)state;
    const market_idem *idem[1] = {NULL};
    int64_t dl[1] = {1000};
    batch(idem, dl, 1);
    market__held held = {.n = 2, .fence_v = {7, 9}};
    held.key[0] = "lock:item:{r}:a";
    held.key[1] = "lock:item:{r}:b";
    for (size_t i = 0; i < 2; i++) {
        snprintf(held.fenced[i], sizeof held.fenced[i], "%s:fenced", held.key[i]);
        snprintf(held.fence[i], sizeof held.fence[i], "%llu", (unsigned long long)held.fence_v[i]);
    }
    frame.i_watch = 0;
    frame.i_fence = 1;
    redisReply *rep[2] = {th_rep_new(REDIS_REPLY_STATUS),
                          th_rep_arr(3, th_rep_str("7"), th_rep_str("8"), th_rep_nil())};
    assert_int_equal(market__frame_judge(&frame, NULL, &held, rep), MARKET_OK);
    assert_int_equal(frame.fence_same[0], 1);
    assert_int_equal(frame.fence_same[1], 0);
    market__buf w = {0};
    market__frame_fences(&frame, &held, &w);
    assert_int_equal(market__buf_seal(&w), MARKET_OK);
    assert_int_equal(w.n, 1);
    assert_string_equal(w.argv[0][1], held.fenced[1]);
    assert_string_equal(w.argv[0][2], "9");
    freeReplyObject(rep[1]);
    rep[1] = th_rep_arr(3, th_rep_str("8"), th_rep_str("9"), th_rep_nil()); /* a newer a */
    assert_int_equal(market__frame_judge(&frame, NULL, &held, rep), MARKET_ERR_LEASE_LOST);
    static market_conn c;
    freeReplyObject(rep[1]);
    rep[1] = th_rep_arr(3, th_rep_str("7"), th_rep_str("8"), th_rep_str("seed")); /* the mark */
    assert_int_equal(market__frame_judge(&frame, &c, &held, rep), MARKET_ERR_REALM_UNAVAILABLE);
    for (size_t i = 0; i < 2; i++)
        freeReplyObject(rep[i]);
    market__buf_free(&w);
}

/* The realm's seeding mark, set (a seed or a reset is writing the realm), fails the
 * batch before its leases and records are judged; unreadable, it is the store's failure.
 * With no lease held, it is read by an EXISTS of its own. */
static void test_judge_realm_being_seeded(void **state) {
    (void)state;
    const market_idem *idem[1] = {NULL};
    int64_t dl[1] = {1000};
    batch(idem, dl, 1);
    market__held held = {.n = 0};
    market__buf r = {0};
    market__frame_read(&frame, &r);
    market__frame_watched(&frame, &held, 0, &r);
    assert_int_equal(market__buf_seal(&r), MARKET_OK);
    assert_int_equal(r.n, 2); /* WATCH <the mark>, EXISTS <the mark> */
    market__buf_free(&r);
    static market_conn c;
    redisReply *rep[2] = {th_rep_new(REDIS_REPLY_STATUS), th_rep_int(1)};
    assert_int_equal(market__frame_judge(&frame, &c, &held, rep), MARKET_ERR_REALM_UNAVAILABLE);
    assert_non_null(strstr(c.errstr, "market:{r}:building"));
    freeReplyObject(rep[1]);
    rep[1] = th_rep_str("ERR unreadable");
    rep[1]->type = REDIS_REPLY_ERROR;
    assert_int_equal(market__frame_judge(&frame, &c, &held, rep), MARKET_ERR_STORE);
    assert_non_null(strstr(c.errstr, "ERR unreadable"));
    freeReplyObject(rep[1]);
    rep[1] = th_rep_int(0);
    assert_int_equal(market__frame_judge(&frame, &c, &held, rep), MARKET_OK);
    for (size_t i = 0; i < 2; i++)
        freeReplyObject(rep[i]);
}

/* In queue order: a stored record replays (the kind not asked), a repeat
 * of an earlier order's key inside the batch is settled as that one, an
 * order past its budget is busy, the others are the kind's; successes and
 * final refusals under a key are what the commit writes, with a record
 * each. */
static void test_decide_in_queue_order(void **state) {
    (void)state;
    market_idem stored = {"s", "fp"}, k = {"k", "fp"};
    const market_idem *idem[4] = {&stored, &k, &k, NULL};
    int64_t dl[4] = {1000, 1000, 1000, 10};
    batch(idem, dl, 4);
    order[1].price = 4;
    order[2].price = 4;
    order[3].price = 6;
    cb.now_ms = 100;
    char rec[MARKET__IDEM_RECORD_MAX];
    market__idem_record(rec, sizeof rec, &stored, MARKET_OK, 12, 88, 5);
    redisReply *mget = th_rep_arr(3, th_rep_str(rec), th_rep_nil(), th_rep_nil());
    frame.i_idem = 0;
    assert_int_equal(market__idem_set_judge(&frame.idem, mget, TOKEN), 0);
    decided = 0;
    size_t writes = market__frame_decide(&frame, decide_one, replay, NULL);
    assert_int_equal(decided, 1); /* order 1 only */
    assert_int_equal(order[0].rc, MARKET_OK);
    assert_int_equal(order[0].res.purchase.replayed, 1);
    assert_int_equal(order[0].res.purchase.price, 12);
    assert_int_equal(order[0].res.purchase.fee, 5); /* the record's third number */
    assert_int_equal(order[1].rc, MARKET_OK);
    assert_int_equal(order[1].res.purchase.replayed, 0);
    assert_int_equal(order[2].rc, MARKET_OK); /* the same key and fingerprint: order 1's */
    assert_int_equal(order[2].res.purchase.replayed, 1);
    assert_int_equal(order[2].res.purchase.fee, 101); /* order 1's outcome, all three */
    assert_int_equal(frame.idem.same_as[2], 1);
    assert_int_equal(order[3].rc, MARKET_ERR_BUSY);
    assert_int_equal(writes, 1);
    assert_true(market__frame_won(&frame, 1));
    assert_false(market__frame_won(&frame, 0));
    assert_false(market__frame_won(&frame, 2));
    market__buf w = {0};
    market__frame_records(&frame, &w);
    assert_int_equal(market__buf_seal(&w), MARKET_OK);
    assert_int_equal(w.n, 1);
    assert_string_equal(w.argv[0][1], frame.idem.key[1]);
    freeReplyObject(mget);
    market__buf_free(&w);
}

/* Each player once (by id), with the keys of the realm; the commit writes
 * each present player's net change, none for a change of 0 or a player
 * not read. */
static void test_parties_net_funds(void **state) {
    (void)state;
    static market__parties p;
    p.n = 0;
    size_t a = market__parties_of(&p, "r", "A"), b = market__parties_of(&p, "r", "B");
    size_t c = market__parties_of(&p, "r", "C");
    assert_int_equal(market__parties_of(&p, "r", "A"), a);
    assert_int_equal(p.n, 3);
    assert_non_null(strstr(p.k_user[b], "{r}"));
    redisReply *rep[2] = {th_rep_str("100"), th_rep_str("50")};
    size_t list[2] = {a, b};
    market__parties_parse(&p, rep, list, 2);
    assert_int_equal(p.party[c].known, MARKET__UNREAD);
    p.party[a].funds -= 30;
    p.party[b].funds += 30;
    market__buf w = {0};
    market__parties_funds(&p, &w);
    p.party[a].funds = 100;
    p.party[b].funds = 50;
    market__parties_funds(&p, &w); /* no change: nothing */
    assert_int_equal(market__buf_seal(&w), MARKET_OK);
    assert_int_equal(w.n, 2);
    assert_string_equal(w.argv[0][1], p.k_user[a]);
    assert_string_equal(w.argv[0][3], "-30");
    assert_string_equal(w.argv[1][3], "30");
    freeReplyObject(rep[0]);
    freeReplyObject(rep[1]);
    market__buf_free(&w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_frame),
        cmocka_unit_test(test_a_selling_kind_reads_the_settings),
        cmocka_unit_test(test_judge_lease_and_fence),
        cmocka_unit_test(test_judge_realm_being_seeded),
        cmocka_unit_test(test_decide_in_queue_order),
        cmocka_unit_test(test_parties_net_funds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
