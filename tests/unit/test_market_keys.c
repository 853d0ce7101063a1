/* test_market_keys.c - market_keys.c without Redis: a realm's key names, and
 * idempotency records and claims judged from hand-made replies. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "market/market_keys.h"

static redisReply reply_str(const char *s) {
    redisReply r = {0};
    r.type = REDIS_REPLY_STRING;
    r.str = (char *)s;
    r.len = strlen(s);
    return r;
}

static const market_idem req = {"k", "fp1"};
static const char mine[] = "0123456789abcdef0123456789abcdef";

/* ---- a realm's keys ---- */

/* The hash tag Redis Cluster would hash key by: from its first '{' to the
 * first '}' after it, when not empty; "" when it has none. */
static void tag_of(const char *key, char *out, size_t outlen) {
    const char *open = strchr(key, '{'), *close = open ? strchr(open + 1, '}') : NULL;
    out[0] = '\0';
    if (close && close > open + 1) snprintf(out, outlen, "%.*s", (int)(close - open - 1), open + 1);
}

static void test_realm_keys_carry_the_realm_tag(void **state) {
    (void)state;
    char k[MARKET__KEY_MAX], l[MARKET__LOCK_KEY_MAX], i[MARKET__IDEM_REDIS_MAX];
    market__realm r;
    market__realm_init(&r, "eu-1");
    assert_string_equal(r.id, "eu-1");
    assert_string_equal(r.market, "market:{eu-1}");
    assert_string_equal(r.lock, "lock:market:{eu-1}");
    market__key(k, sizeof k, "users", "eu-1", "B");
    assert_string_equal(k, "users:{eu-1}:B");
    market__key(k, sizeof k, "inventory", "eu-1", "B");
    assert_string_equal(k, "inventory:{eu-1}:B");
    market__lock_key(l, "item", "eu-1", "axe.A");
    assert_string_equal(l, "lock:item:{eu-1}:axe.A");
    market__lock_key(l, "player", "eu-1", "B");
    assert_string_equal(l, "lock:player:{eu-1}:B");
    market__idem_key(i, sizeof i, "eu-1", "B", &req);
    assert_string_equal(i, "idem:{eu-1}:B:k");
}

static void test_longest_names_fit_and_keep_one_tag(void **state) {
    (void)state;
    char realm[MARKET_REALM_MAX + 1], id[MARKET_ID_MAX + 1], member[MARKET__MEMBER_MAX];
    char key[MARKET_IDEM_KEY_MAX + 1];
    memset(realm, 'r', MARKET_REALM_MAX);
    realm[MARKET_REALM_MAX] = '\0';
    memset(id, 'p', MARKET_ID_MAX);
    id[MARKET_ID_MAX] = '\0';
    snprintf(member, sizeof member, "%s.%s", id, id);
    memset(key, 'k', MARKET_IDEM_KEY_MAX);
    key[MARKET_IDEM_KEY_MAX] = '\0';
    const market_idem idem = {key, "fp"};
    char k[MARKET__KEY_MAX], l[MARKET__LOCK_KEY_MAX], i[MARKET__IDEM_REDIS_MAX], t[80];
    market__realm r;
    market__realm_init(&r, realm);
    market__key(k, sizeof k, "inventory", realm, id);
    market__lock_key(l, "item", realm, member);
    market__idem_key(i, sizeof i, realm, id, &idem);
    /* nothing was cut: each ends with what it names */
    assert_int_equal(strlen(k), strlen("inventory:{}:") + 2 * MARKET_ID_MAX);
    assert_int_equal(strlen(l), strlen("lock:item:{}:") + MARKET_REALM_MAX + strlen(member));
    assert_true(strlen(l) <= LOCK_KEY_MAX);
    assert_int_equal(strlen(i), strlen("idem:{}::") + 2 * MARKET_ID_MAX + MARKET_IDEM_KEY_MAX);
    const char *names[] = {k, l, i, r.market, r.lock};
    for (size_t n = 0; n < sizeof names / sizeof *names; n++) {
        tag_of(names[n], t, sizeof t);
        assert_string_equal(t, realm); /* one slot for the realm, whatever the ids */
    }
}

/* ---- idempotency records ---- */

struct judge_case {
    const char *value; /* NULL: nil reply */
    int want, rc;
    long long a, b;
    const char *trade; /* the trade id read back ("" none) */
    long long c;       /* a success's third number (a sale's cut) */
};

static void test_idem_judge_table(void **state) {
    (void)state;
    static const struct judge_case cases[] = {
        {NULL, MARKET__IDEM_FREE, 0, 0, 0},
        {"fp1 ?0123456789abcdef0123456789abcdef", MARKET__IDEM_FREE, 0, 0, 0}, /* our claim */
        {"fp1 ?ffffffffffffffffffffffffffffffff", MARKET_ERR_IN_PROGRESS, 0, 0, 0},
        {"fp2 ?0123456789abcdef0123456789abcdef", MARKET_ERR_IDEM_MISMATCH, 0, 0, 0},
        {"fp1 500 300", MARKET__IDEM_DONE, MARKET_OK, 500, 300, ""}, /* before trade ids */
        {"fp1 500 300 1764083045123-7", MARKET__IDEM_DONE, MARKET_OK, 500, 300, "1764083045123-7"},
        {"fp1 500 300 18446744073709551615-18446744073709551615", MARKET__IDEM_DONE, MARKET_OK, 500,
         300, "18446744073709551615-18446744073709551615"},
        {"fp1 500 300 18446744073709551616-0", MARKET_ERR_STORE, 0, 0, 0}, /* past 2^64-1 */
        {"fp1 500 300 1-2 x", MARKET_ERR_STORE, 0, 0, 0},
        {"fp1 500 300 ", MARKET_ERR_STORE, 0, 0, 0},
        {"fp1 500 300 -1-2", MARKET_ERR_STORE, 0, 0, 0},
        {"fp1 500 300 12", MARKET__IDEM_DONE, MARKET_OK, 500, 300, "", 12}, /* a cut */
        {"fp1 500 300 12 1764083045123-7", MARKET__IDEM_DONE, MARKET_OK, 500, 300,
         "1764083045123-7", 12},
        {"fp1 500 300 0", MARKET_ERR_STORE, 0, 0, 0}, /* a cut of 0 is not written */
        {"fp1 500 300 0 1764083045123-7", MARKET_ERR_STORE, 0, 0, 0},
        {"fp1 500 300 12 13", MARKET_ERR_STORE, 0, 0, 0},
        {"fp1 500 300 1-2 12", MARKET_ERR_STORE, 0, 0, 0}, /* the trade id comes last */
        {"fp1 500 300 12x 1-2", MARKET_ERR_STORE, 0, 0, 0},
        {"fp1 500 300 12 1-2 x", MARKET_ERR_STORE, 0, 0, 0},
        {"fp1 -5 -9223372036854775808", MARKET__IDEM_DONE, MARKET_OK, -5, INT64_MIN, ""},
        {"fp2 500 300", MARKET_ERR_IDEM_MISMATCH, 0, 0, 0},
        {"fp1 !-2 0", MARKET__IDEM_DONE, MARKET_ERR_INSUFFICIENT_FUNDS, 0, 0},
        {"fp1 !-3 500", MARKET__IDEM_DONE, MARKET_ERR_PRICE_CHANGED, 500, 0},
        {"fp1 !-8 0", MARKET_ERR_STORE, 0, 0, 0}, /* store failures are never final */
        {"fp1 !0 0", MARKET_ERR_STORE, 0, 0, 0},  /* a success is not written this way */
        {"fp1 500", MARKET_ERR_STORE, 0, 0, 0},
        {"fp1 abc def", MARKET_ERR_STORE, 0, 0, 0},
        {"fp1", MARKET_ERR_STORE, 0, 0, 0},
        {"", MARKET_ERR_STORE, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct judge_case *c = &cases[i];
        redisReply r = {0};
        if (c->value)
            r = reply_str(c->value);
        else
            r.type = REDIS_REPLY_NIL;
        int rc = 99;
        int64_t a = 0, b = 0, cut = -1;
        char trade[MARKET_TRADE_ID_MAX + 1] = "junk";
        int got = market__idem_judge(&r, &req, mine, &rc, &a, &b, &cut, trade);
        if (got != c->want) fprintf(stderr, "case %zu (%s): %d\n", i, c->value, got);
        assert_int_equal(got, c->want);
        if (got == MARKET__IDEM_DONE) {
            assert_int_equal(rc, c->rc);
            assert_int_equal(a, c->a);
            assert_int_equal(b, c->b);
            assert_int_equal(cut, c->c);
            assert_string_equal(trade, c->trade ? c->trade : "");
        }
    }
    redisReply wrong = {0};
    wrong.type = REDIS_REPLY_INTEGER;
    int rc;
    int64_t a, b, c;
    char trade[MARKET_TRADE_ID_MAX + 1];
    assert_int_equal(market__idem_judge(&wrong, &req, mine, &rc, &a, &b, &c, trade),
                     MARKET_ERR_STORE);
}

/* What is written is read back as written, for every final outcome. */
static void test_idem_record_round_trip(void **state) {
    (void)state;
    static const int finals[] = {MARKET_OK,
                                 MARKET_ERR_NOT_LISTED,
                                 MARKET_ERR_INSUFFICIENT_FUNDS,
                                 MARKET_ERR_PRICE_CHANGED,
                                 MARKET_ERR_NO_PLAYER,
                                 MARKET_ERR_NOT_HELD,
                                 MARKET_ERR_OVERFLOW};
    for (size_t i = 0; i < sizeof finals / sizeof finals[0]; i++) {
        assert_true(market__idem_final(finals[i]));
        char rec[MARKET__IDEM_RECORD_MAX];
        for (int64_t cut = 0; cut <= 1; cut++) {
            market__idem_record(rec, sizeof rec, &req, finals[i], MARKET_PRICE_MAX, INT64_MAX,
                                cut * INT64_MIN);
            redisReply r = reply_str(rec);
            int rc = 99;
            int64_t a = 0, b = 0, c = 7;
            char trade[MARKET_TRADE_ID_MAX + 1];
            assert_int_equal(market__idem_judge(&r, &req, mine, &rc, &a, &b, &c, trade),
                             MARKET__IDEM_DONE);
            assert_int_equal(rc, finals[i]);
            assert_int_equal(a, MARKET_PRICE_MAX);
            assert_int_equal(b, finals[i] == MARKET_OK ? INT64_MAX : 0);
            assert_int_equal(c, finals[i] == MARKET_OK ? cut * INT64_MIN : 0);
        }
    }
    static const int not_final[] = {
        MARKET_ERR_BUSY,    MARKET_ERR_STORE, MARKET_ERR_LEASE_LOST,    MARKET_ERR_CONFLICT,
        MARKET_ERR_INVALID, MARKET_ERR_NOMEM, MARKET_ERR_IDEM_MISMATCH, MARKET_ERR_IN_PROGRESS};
    for (size_t i = 0; i < sizeof not_final / sizeof not_final[0]; i++)
        assert_false(market__idem_final(not_final[i]));
    char claim[MARKET__IDEM_RECORD_MAX];
    market__idem_claim(claim, sizeof claim, &req, mine);
    redisReply r = reply_str(claim);
    int rc;
    int64_t a, b, c;
    char trade[MARKET_TRADE_ID_MAX + 1];
    assert_int_equal(market__idem_judge(&r, &req, mine, &rc, &a, &b, &c, trade), MARKET__IDEM_FREE);
    assert_int_equal(
        market__idem_judge(&r, &req, "ffffffffffffffffffffffffffffffff", &rc, &a, &b, &c, trade),
        MARKET_ERR_IN_PROGRESS);
    /* the longest purchase record, as the trade script completes it, fits its buffer */
    char fp[MARKET_IDEM_FP_MAX + 1];
    memset(fp, 'f', MARKET_IDEM_FP_MAX);
    fp[MARKET_IDEM_FP_MAX] = '\0';
    const market_idem longest = {"k", fp};
    char rec[MARKET__IDEM_RECORD_MAX + MARKET_TRADE_ID_MAX + 1];
    market__idem_record(rec, MARKET__IDEM_RECORD_MAX, &longest, MARKET_OK, INT64_MIN, INT64_MIN,
                        INT64_MIN);
    strcat(rec, " 18446744073709551615-18446744073709551615");
    assert_true(strlen(rec) < MARKET__IDEM_RECORD_MAX);
    r = reply_str(rec);
    assert_int_equal(market__idem_judge(&r, &longest, mine, &rc, &a, &b, &c, trade),
                     MARKET__IDEM_DONE);
    assert_string_equal(trade, "18446744073709551615-18446744073709551615");
    assert_int_equal(c, INT64_MIN);
}

static void test_token_new_random_hex(void **state) {
    (void)state;
    char a[MARKET__TOKEN_LEN + 1], b[MARKET__TOKEN_LEN + 1];
    assert_int_equal(market__token_new(a), 0);
    assert_int_equal(market__token_new(b), 0);
    assert_int_equal(strlen(a), MARKET__TOKEN_LEN);
    assert_int_equal(strspn(a, "0123456789abcdef"), MARKET__TOKEN_LEN);
    assert_string_not_equal(a, b);
}

/* market__i64_str and market__join write what snprintf would, at the ends
 * of the range and when cut. */
static void test_text_without_printf_matches_printf(void **state) {
    (void)state;
    const int64_t v[] = {0, 7, -7, 10, 999, -1000, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char got[24], want[24];
        size_t n = market__i64_str(got, v[i]);
        snprintf(want, sizeof want, "%lld", (long long)v[i]);
        assert_string_equal(got, want);
        assert_int_equal(n, strlen(want));
    }
    char out[8];
    market__join(out, sizeof out, "ab", "", "cd", (const char *)NULL);
    assert_string_equal(out, "abcd");
    market__join(out, sizeof out, "abcd", "efgh", (const char *)NULL); /* cut to 7 */
    assert_string_equal(out, "abcdefg");
    market__join(out, sizeof out, (const char *)NULL);
    assert_string_equal(out, "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_without_printf_matches_printf),
        cmocka_unit_test(test_realm_keys_carry_the_realm_tag),
        cmocka_unit_test(test_longest_names_fit_and_keep_one_tag),
        cmocka_unit_test(test_idem_judge_table),
        cmocka_unit_test(test_idem_record_round_trip),
        cmocka_unit_test(test_token_new_random_hex),
    };
    return cmocka_run_group_tests_name("market keys (unit)", tests, NULL, NULL);
}
