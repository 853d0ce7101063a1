/* test_market_idem.c - a batch's idempotency keys (market_idem.c) without
 * Redis: claims and reads built through the data model, stored records
 * judged from hand-made replies, orders settled by the store or by an
 * earlier order of the same batch, and the records a commit writes. */
#include <stdio.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"
#include "tests/helpers/reply.h"

#include "market/market_idem.h"

#define TOKEN "0123456789abcdef0123456789abcdef"

static market__idem_set set;

/* Orders 0..n) of player P in realm r, with the keys given (NULL: none). */
static void begin(const market_idem *const *idem, size_t n) {
    market__idem_set_begin(&set, n);
    for (size_t i = 0; i < n; i++) market__idem_set_key(&set, i, "r", "P", idem[i], TOKEN);
}

/* A claim goes before the WATCH for each keyed order only, and the records
 * are read with one MGET of their keys. */
static void test_claims_watch_and_read_name_the_keyed_orders(void **state) {
    (void)state;
    market_idem k1 = {"k1", "fp"}, k2 = {"k2", "fp"};
    const market_idem *idem[3] = {&k1, NULL, &k2};
    begin(idem, 3);
    assert_int_equal(set.n_keyed, 2);
    assert_string_equal(set.key[1], "");
    market_queued q[3] = {{.deadline_ms = 1000}, {.deadline_ms = 1000}, {.deadline_ms = 1000}};
    market_queued *req[3] = {&q[0], &q[1], &q[2]};
    market__buf r = {0};
    market__idem_set_claims(&set, req, &r);
    market__rd_watch_begin(&r);
    market__idem_set_watch(&set, &r);
    market__buf_end(&r, 0);
    market__idem_set_read(&set, &r);
    assert_int_equal(market__buf_seal(&r), MARKET_OK);
    assert_int_equal(r.n, 4); /* SET, SET, WATCH, MGET */
    assert_string_equal(r.argv[0][0], "SET");
    assert_string_equal(r.argv[0][1], set.key[0]);
    assert_string_equal(r.argv[0][3], "NX");
    assert_string_equal(r.argv[1][1], set.key[2]);
    assert_int_equal(r.argc[2], 3); /* WATCH k1 k2 */
    assert_string_equal(r.argv[3][0], "MGET");
    assert_int_equal(r.argc[3], 3);
    assert_non_null(strstr(set.key[0], "{r}"));
    market__buf_free(&r);
}

/* The store settles: a success is replayed with its numbers and trade, a
 * refusal too, another attempt's claim is in progress, another fingerprint
 * a mismatch; our own claim or no record leaves the order to decide. */
static void test_store_settles_each_order(void **state) {
    (void)state;
    market_idem k[6] = {{"a", "fp"}, {"b", "fp"}, {"c", "fp"}, {"d", "fp"}, {"e", "fp"}, {"f", "fp"}};
    const market_idem *idem[6] = {&k[0], &k[1], &k[2], &k[3], &k[4], &k[5]};
    begin(idem, 6);
    redisReply *mget = th_rep_arr(6, th_rep_str("fp 500 300 25 1700000000000-0"),
                                  th_rep_str("fp !-3 0"), th_rep_str("fp ?someone-else"),
                                  th_rep_str("other 1 2"), th_rep_str("fp ?" TOKEN), th_rep_nil());
    assert_int_equal(market__idem_set_judge(&set, mget, TOKEN), 0);
    freeReplyObject(mget);
    market__outcome o;
    assert_int_equal(market__idem_set_settle(&set, 0, &o), 1);
    assert_int_equal(o.rc, MARKET_OK);
    assert_int_equal(o.replayed, 1);
    assert_int_equal(o.a, 500);
    assert_int_equal(o.c, 25);
    assert_int_equal(o.b, 300);
    assert_string_equal(o.trade, "1700000000000-0");
    assert_int_equal(market__idem_set_settle(&set, 1, &o), 1);
    assert_int_equal(o.rc, -3);
    assert_int_equal(o.replayed, 1);
    assert_int_equal(market__idem_set_settle(&set, 2, &o), 1);
    assert_int_equal(o.rc, MARKET_ERR_IN_PROGRESS);
    assert_int_equal(o.replayed, 0);
    assert_int_equal(market__idem_set_settle(&set, 3, &o), 1);
    assert_int_equal(o.rc, MARKET_ERR_IDEM_MISMATCH);
    assert_int_equal(market__idem_set_settle(&set, 4, &o), 0); /* our own claim */
    assert_int_equal(market__idem_set_settle(&set, 5, &o), 0); /* no record */
    for (size_t i = 0; i < 4; i++) assert_int_equal(market__idem_set_recorded(&set, i), 0);
}

/* A key repeated inside the batch is settled as its first order: the same
 * outcome (its trade id comes with the commit: same_as), or a mismatch for
 * another fingerprint; only the first is recorded. A first order that did
 * not end for good (busy) leaves the repeat to be decided. */
static void test_repeat_in_batch_settled_as_first(void **state) {
    (void)state;
    market_idem k = {"k", "fp"}, other = {"k", "fp2"}, j = {"j", "fp"};
    const market_idem *idem[5] = {&k, &k, &other, &j, &j};
    begin(idem, 5);
    redisReply *mget = th_rep_arr(5, th_rep_nil(), th_rep_nil(), th_rep_nil(), th_rep_nil(),
                                  th_rep_nil());
    assert_int_equal(market__idem_set_judge(&set, mget, TOKEN), 0);
    freeReplyObject(mget);
    market__outcome o;
    assert_int_equal(market__idem_set_settle(&set, 0, &o), 0);
    market__idem_set_decided(&set, 0, MARKET_OK, 500, 300, 25);
    assert_int_equal(market__idem_set_settle(&set, 1, &o), 1);
    assert_int_equal(o.rc, MARKET_OK);
    assert_int_equal(o.replayed, 1);
    assert_int_equal(o.a, 500);
    assert_int_equal(o.c, 25);
    assert_string_equal(o.trade, "");
    assert_int_equal(set.same_as[1], 0);
    assert_int_equal(market__idem_set_settle(&set, 2, &o), 1);
    assert_int_equal(o.rc, MARKET_ERR_IDEM_MISMATCH);
    assert_int_equal(market__idem_set_settle(&set, 3, &o), 0);
    market__idem_set_decided(&set, 3, MARKET_ERR_BUSY, 0, 0, 0);
    assert_int_equal(market__idem_set_settle(&set, 4, &o), 0); /* busy is not final */
    market__idem_set_decided(&set, 4, MARKET_ERR_INSUFFICIENT_FUNDS, 0, 0, 0);
    assert_int_equal(market__idem_set_recorded(&set, 0), 1);
    assert_int_equal(market__idem_set_recorded(&set, 1), 0);
    assert_int_equal(market__idem_set_recorded(&set, 2), 0);
    assert_int_equal(market__idem_set_recorded(&set, 3), 0);
    assert_int_equal(market__idem_set_recorded(&set, 4), 1);
    market__buf w = {0};
    market__idem_set_record(&set, 0, &w);
    market__idem_set_record(&set, 4, &w);
    assert_int_equal(market__buf_seal(&w), MARKET_OK);
    assert_int_equal(w.n, 2);
    assert_string_equal(w.argv[0][0], "SET");
    assert_string_equal(w.argv[0][1], set.key[0]);
    assert_string_equal(w.argv[0][2], "fp 500 300 25"); /* a cut: the third number */
    assert_string_equal(w.argv[1][2], set.record[4]);
    assert_non_null(strstr(set.record[4], "!"));
    market__buf_free(&w);
}

/* Records that are not one per keyed order are refused. */
static void test_unreadable_records_refused(void **state) {
    (void)state;
    market_idem k = {"k", "fp"};
    const market_idem *idem[2] = {&k, NULL};
    begin(idem, 2);
    redisReply *wrong = th_rep_arr(2, th_rep_nil(), th_rep_nil());
    assert_int_equal(market__idem_set_judge(&set, wrong, TOKEN), -1);
    freeReplyObject(wrong);
    assert_int_equal(market__idem_set_judge(&set, NULL, TOKEN), -1);
    const market_idem *none[1] = {NULL};
    begin(none, 1);
    assert_int_equal(market__idem_set_judge(&set, NULL, TOKEN), 0); /* nothing to read */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claims_watch_and_read_name_the_keyed_orders),
        cmocka_unit_test(test_store_settles_each_order),
        cmocka_unit_test(test_repeat_in_batch_settled_as_first),
        cmocka_unit_test(test_unreadable_records_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
