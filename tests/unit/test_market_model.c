/* test_market_model.c - the data model (market_model.c, market_model_reply.c)
 * without Redis: commands that outgrow the first arrays and text chunks keep
 * their arguments where they were, an opened command short of arguments is
 * taken back, a misuse fails the buffer rather than cutting a command, and a
 * reset buffer is empty but keeps its memory; a script's run is one EVAL;
 * and replies made by hand decode into values, or are refused, as the
 * stored encodings say. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "market/market_model.h"

/* Thousands of commands and numbers: every argument is still where it was
 * written once the arrays and the text have grown many times. */
static void test_growth_keeps_every_argument(void **state) {
    (void)state;
    market__buf b = {0};
    enum { N = 5000 };
    const char *num[N];
    for (int i = 0; i < N; i++) {
        num[i] = market__buf_i64(&b, (int64_t)i * 1000003 - 7);
        market__buf_cmd(&b, 4, "HINCRBY", "users:{r}:p", "funds", num[i]);
    }
    assert_int_equal(market__buf_seal(&b), MARKET_OK);
    assert_int_equal(b.n, N);
    for (int i = 0; i < N; i++) {
        char want[24];
        snprintf(want, sizeof want, "%lld", (long long)i * 1000003 - 7);
        assert_int_equal(b.argc[i], 4);
        assert_string_equal(b.argv[i][3], want);
        assert_ptr_equal(b.argv[i][3], num[i]);
    }
    market__buf_free(&b);
    assert_int_equal(b.n, 0);
}

/* An opened command keeps what was appended, or is taken back when it has
 * fewer arguments than asked; a command without a key counts from its name. */
static void test_open_commands_kept_or_taken_back(void **state) {
    (void)state;
    market__buf b = {0};
    market__fx_multi(&b);
    market__fx_items_begin(&b, "inventory:{r}:p");
    assert_int_equal(market__buf_end(&b, 1), 0); /* no item: taken back */
    market__rd_watch_begin(&b);
    for (int i = 0; i < 300; i++)
        market__buf_arg(&b, "k");
    assert_int_equal(market__buf_end(&b, 0), 300);
    market__fx_items_begin(&b, "inventory:{r}:p");
    market__buf_arg(&b, "axe");
    assert_int_equal(market__buf_end(&b, 1), 1);
    market__fx_exec(&b);
    assert_int_equal(market__buf_seal(&b), MARKET_OK);
    assert_int_equal(b.n, 4);
    assert_string_equal(b.argv[1][0], "WATCH");
    assert_int_equal(b.argc[1], 301);
    assert_string_equal(b.argv[2][0], "SADD");
    assert_string_equal(b.argv[2][2], "axe");
    assert_string_equal(b.argv[3][0], "EXEC");
    market__buf_reset(&b);
    assert_int_equal(b.n, 0);
    market__fx_funds(&b, "users:{r}:p", 0); /* no change: no command */
    market__fx_funds(&b, "users:{r}:p", -5);
    assert_int_equal(market__buf_seal(&b), MARKET_OK);
    assert_int_equal(b.n, 1);
    assert_string_equal(b.argv[0][3], "-5");
    market__buf_free(&b);
}

/* A command of more arguments than market__buf_cmd takes fails the
 * buffer (sealing says so) instead of sending a cut command. */
static void test_misuse_fails_the_buffer(void **state) {
    (void)state;
    market__buf b = {0};
    market__buf_cmd(&b, 9, "a", "b", "c", "d", "e", "f", "g", "h", "i");
    assert_int_equal(market__buf_seal(&b), MARKET_ERR_NOMEM);
    market__buf_reset(&b); /* a reset clears the failure */
    market__buf_cmd(&b, 1, "PING");
    assert_int_equal(market__buf_seal(&b), MARKET_OK);
    market__buf_free(&b);
}

/* A script's run is one EVAL: script, its count of keys, keys, arguments;
 * the store layer can tell an EXEC and a WATCH from other commands. */
static void test_script_and_command_kinds(void **state) {
    (void)state;
    market__buf b = {0};
    const char *keys[2] = {"k1", "k2"}, *args[3] = {"a", "b", "c"};
    market__fx_script(&b, "return 1", 2, keys, 3, args);
    market__fx_multi(&b);
    market__fx_exec(&b);
    market__rd_watch_begin(&b);
    market__buf_arg(&b, "k1");
    market__buf_end(&b, 0);
    assert_int_equal(market__buf_seal(&b), MARKET_OK);
    assert_int_equal(b.argc[0], 8);
    assert_string_equal(b.argv[0][0], "EVAL");
    assert_string_equal(b.argv[0][1], "return 1");
    assert_string_equal(b.argv[0][2], "2");
    assert_string_equal(b.argv[0][4], "k2");
    assert_string_equal(b.argv[0][7], "c");
    assert_false(market__cmd_is_exec(b.argv[1]));
    assert_true(market__cmd_is_exec(b.argv[2]));
    assert_true(market__cmd_is_watch(b.argv[3]));
    assert_false(market__cmd_is_watch(b.argv[0]));
    const char *head[3];
    assert_int_equal(market__script_head(head, "s", NULL, "5"), 3);
    assert_string_equal(head[0], "EVAL");
    assert_string_equal(head[1], "s");
    /* named by its SHA-1 when the server has it: the digest Redis names it by */
    char sha[MARKET__SHA_MAX + 1];
    market__script_sha("return 1", sha);
    assert_string_equal(sha, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    assert_int_equal(market__script_head(head, "return 1", sha, "0"), 3);
    assert_string_equal(head[0], "EVALSHA");
    assert_string_equal(head[1], sha);
    assert_string_equal(head[2], "0");
    assert_int_equal(market__cmd_script_exists(head, sha), 3);
    assert_string_equal(head[0], "SCRIPT");
    assert_string_equal(head[1], "EXISTS");
    assert_string_equal(head[2], sha);
    market__buf_free(&b);
}

/* ---- replies made by hand ---- */

/* A string (NULL: nil) or an integer reply. */
static redisReply str(const char *s) {
    redisReply r = {0};
    r.type = s ? REDIS_REPLY_STRING : REDIS_REPLY_NIL;
    r.str = (char *)s;
    r.len = s ? strlen(s) : 0;
    return r;
}

/* An array reply of the n replies e[0..n). */
static redisReply arr(redisReply **e, size_t n) {
    redisReply r = {0};
    r.type = REDIS_REPLY_ARRAY;
    r.element = e;
    r.elements = n;
    return r;
}

/* An HGETALL of stacks: items and counts in the reply's order; a count that
 * is no whole number, or an item too long, is unreadable. */
static void test_reply_stacks(void **state) {
    (void)state;
    redisReply v[4] = {str("ore"), str("12"), str("wood"), str("-3")};
    redisReply *e[4] = {&v[0], &v[1], &v[2], &v[3]};
    redisReply r = arr(e, 4);
    market_stack *s;
    size_t n;
    assert_int_equal(market__reply_stacks(&r, &s, &n), MARKET_OK);
    assert_int_equal(n, 2);
    assert_string_equal(s[0].item, "ore");
    assert_int_equal(s[0].count, 12);
    assert_int_equal(s[1].count, -3);
    free(s);
    v[3] = str("3.5");
    assert_int_equal(market__reply_stacks(&r, &s, &n), MARKET_ERR_STORE);
    free(s);
    r = arr(e, 3); /* odd: no hash */
    assert_int_equal(market__reply_stacks(&r, &s, &n), MARKET_ERR_STORE);
    assert_null(s);
    r = arr(e, 0);
    assert_int_equal(market__reply_stacks(&r, &s, &n), MARKET_OK);
    assert_null(s);
    assert_int_equal(n, 0);
}

/* An auction: its twelve fields, or none at all (no such auction); anything else is
 * unreadable: half of them, an unknown state, a bid without a bidder, a bid whose escrow
 * passes int64, a seller that is no id. */
static void test_reply_auction(void **state) {
    (void)state;
    redisReply v[MARKET__AUCTION_FIELDS] = {str("A"), str("ore"), str("10"),   str("5"),
                                            str("0"), str("1"),   str("1000"), str("B"),
                                            str("6"), str("2"),   str("open"), str("0")};
    redisReply *e[MARKET__AUCTION_FIELDS];
    for (size_t i = 0; i < MARKET__AUCTION_FIELDS; i++)
        e[i] = &v[i];
    redisReply r = arr(e, MARKET__AUCTION_FIELDS);
    market_auction a;
    assert_int_equal(market__reply_auction(&r, 3, &a), MARKET_OK);
    assert_int_equal(a.id, 3);
    assert_string_equal(a.seller, "A");
    assert_string_equal(a.bidder, "B");
    assert_int_equal(a.quantity, 10);
    assert_int_equal(a.bid, 6);
    assert_int_equal(a.ends_ms, 1000);
    assert_int_equal(a.state, MARKET_AUCTION_OPEN);
    v[10] = str("sold");
    assert_int_equal(market__reply_auction(&r, 3, &a), MARKET_OK);
    assert_int_equal(a.state, MARKET_AUCTION_SOLD);
    v[10] = str("gone");
    assert_int_equal(market__reply_auction(&r, 3, &a), MARKET_ERR_STORE);
    v[10] = str("open");
    v[7] = str("");
    assert_int_equal(market__reply_auction(&r, 3, &a), MARKET_ERR_STORE); /* a bid, no bidder */
    v[7] = str("B");
    v[8] = str("1000000000000");
    v[2] = str("1000000000");
    assert_int_equal(market__reply_auction(&r, 3, &a), MARKET_ERR_STORE); /* escrow > int64 */
    v[2] = str("10");
    v[8] = str("6");
    v[0] = str("no one");
    assert_int_equal(market__reply_auction(&r, 3, &a), MARKET_ERR_STORE);
    v[0] = str(NULL);
    assert_int_equal(market__reply_auction(&r, 3, &a), MARKET_ERR_STORE); /* half there */
    for (size_t i = 0; i < MARKET__AUCTION_FIELDS; i++)
        v[i] = str(NULL);
    assert_int_equal(market__reply_auction(&r, 3, &a), MARKET_ERR_NO_AUCTION);
    r = arr(e, 4);
    assert_int_equal(market__reply_auction(&r, 3, &a), MARKET_ERR_STORE);
}

/* A side of a direct trade written as text reads back as it was; text that is no side is
 * refused: an unknown token, a repeated item, 0 units, funds twice, more than 8 items. */
static void test_goods_text(void **state) {
    (void)state;
    market_goods g = {.n_items = 2, .n_units = 2, .funds = 75};
    snprintf(g.items[0], sizeof g.items[0], "sword-1");
    snprintf(g.items[1], sizeof g.items[1], "helm_4");
    snprintf(g.unit_item[0], sizeof g.unit_item[0], "ore");
    snprintf(g.unit_item[1], sizeof g.unit_item[1], "wood");
    g.units[0] = 3;
    g.units[1] = 1000000000;
    char text[MARKET__GOODS_TEXT_MAX];
    market__goods_text(&g, text);
    assert_string_equal(text, "$75,#sword-1,#helm_4,ore*3,wood*1000000000");
    market_goods back;
    assert_int_equal(market__parse_goods(text, strlen(text), &back), 0);
    assert_memory_equal(&back, &g, sizeof g);
    market_goods empty = {0};
    market__goods_text(&empty, text);
    assert_string_equal(text, "");
    assert_int_equal(market__parse_goods("", 0, &back), 0);
    assert_int_equal(back.n_items + back.n_units, 0);
    const char *bad[] = {"gold", "#a,#a",  "ore*0", "$1,$2",  "ore*",
                         "*3",   "#",      "$-1",   "#a,a*2", "#a,#b,#c,#d,#e,#f,#g,#h,#i",
                         "#a b", "ore*3,", ",ore*3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(market__parse_goods(bad[i], strlen(bad[i]), &back), -1);
    /* the longest side fits the text */
    market_goods big = {.n_items = MARKET_DIRECT_GOODS_MAX,
                        .n_units = MARKET_DIRECT_GOODS_MAX,
                        .funds = MARKET_PRICE_MAX};
    for (int i = 0; i < MARKET_DIRECT_GOODS_MAX; i++) {
        memset(big.items[i], 'a' + i, MARKET_ID_MAX);
        memset(big.unit_item[i], 'A' + i, MARKET_ID_MAX);
        big.units[i] = MARKET_QUANTITY_MAX;
    }
    assert_true(market_goods_valid(&big));
    market__goods_text(&big, text);
    assert_int_equal(market__parse_goods(text, strlen(text), &back), 0);
    assert_memory_equal(&back, &big, sizeof big);
}

/* A direct trade: its nine fields, or none at all (no such trade); anything else is
 * unreadable: an unknown state, a side that is no side, from = to, a time that is no
 * number, half of them. */
static void test_reply_direct(void **state) {
    (void)state;
    redisReply v[MARKET__DIRECT_FIELDS] = {str("A"),    str("B"),   str("#sword"),
                                           str("$20"),  str("100"), str("3700"),
                                           str("open"), str("0"),   str("")};
    redisReply *e[MARKET__DIRECT_FIELDS];
    for (size_t i = 0; i < MARKET__DIRECT_FIELDS; i++)
        e[i] = &v[i];
    redisReply r = arr(e, MARKET__DIRECT_FIELDS);
    market_direct t;
    assert_int_equal(market__reply_direct(&r, 4, &t), MARKET_OK);
    assert_int_equal(t.id, 4);
    assert_string_equal(t.from, "A");
    assert_string_equal(t.give.items[0], "sword");
    assert_int_equal(t.get.funds, 20);
    assert_int_equal(t.made_ms, 100);
    assert_int_equal(t.expires_ms, 3700);
    assert_int_equal(t.state, MARKET_DIRECT_OPEN);
    v[6] = str("cancelled");
    v[7] = str("200");
    v[8] = str("B");
    assert_int_equal(market__reply_direct(&r, 4, &t), MARKET_OK);
    assert_int_equal(t.state, MARKET_DIRECT_CANCELLED);
    assert_int_equal(t.closed_ms, 200);
    assert_string_equal(t.closed_by, "B");
    v[6] = str("expired"); /* never stored: read from an open one's time */
    assert_int_equal(market__reply_direct(&r, 4, &t), MARKET_ERR_STORE);
    v[6] = str("done");
    v[2] = str("sword");
    assert_int_equal(market__reply_direct(&r, 4, &t), MARKET_ERR_STORE);
    v[2] = str("#sword");
    v[1] = str("A");
    assert_int_equal(market__reply_direct(&r, 4, &t), MARKET_ERR_STORE);
    v[1] = str("B");
    v[5] = str("soon");
    assert_int_equal(market__reply_direct(&r, 4, &t), MARKET_ERR_STORE);
    v[5] = str(NULL);
    assert_int_equal(market__reply_direct(&r, 4, &t), MARKET_ERR_STORE);
    for (size_t i = 0; i < MARKET__DIRECT_FIELDS; i++)
        v[i] = str(NULL);
    assert_int_equal(market__reply_direct(&r, 4, &t), MARKET_ERR_NO_DIRECT);
}

/* A buy order: its five fields, or none at all (no such order); anything
 * else is unreadable: a buyer that is no id, a price out of range, more
 * left than asked for, none left. A book's member reads back as its id. */
static void test_reply_order(void **state) {
    (void)state;
    redisReply v[5] = {str("B"), str("ore"), str("25"), str("15"), str("5")};
    redisReply *e[5] = {&v[0], &v[1], &v[2], &v[3], &v[4]};
    redisReply r = arr(e, 5);
    market_bid b;
    assert_int_equal(market__reply_order(&r, 7, &b), MARKET_OK);
    assert_int_equal(b.id, 7);
    assert_string_equal(b.buyer, "B");
    assert_string_equal(b.item, "ore");
    assert_int_equal(b.price, 25);
    assert_int_equal(b.quantity, 15);
    assert_int_equal(b.left, 5);
    v[4] = str("16");
    assert_int_equal(market__reply_order(&r, 7, &b), MARKET_ERR_STORE);
    v[4] = str("0");
    assert_int_equal(market__reply_order(&r, 7, &b), MARKET_ERR_STORE);
    /* an escrow past int64 is no order anyone placed */
    v[2] = str("1000000000000");
    v[3] = str("9223372036");
    v[4] = str("9223372036");
    assert_int_equal(market__reply_order(&r, 7, &b), MARKET_ERR_STORE);
    v[3] = str("15");
    v[4] = str("5");
    v[2] = str("0");
    assert_int_equal(market__reply_order(&r, 7, &b), MARKET_ERR_STORE);
    v[2] = str("25");
    v[0] = str("no spaces");
    assert_int_equal(market__reply_order(&r, 7, &b), MARKET_ERR_STORE);
    v[0] = str(NULL);
    assert_int_equal(market__reply_order(&r, 7, &b), MARKET_ERR_STORE); /* half there */
    for (size_t i = 0; i < 5; i++)
        v[i] = str(NULL);
    assert_int_equal(market__reply_order(&r, 7, &b), MARKET_ERR_NO_ORDER);
    r = arr(e, 4);
    assert_int_equal(market__reply_order(&r, 7, &b), MARKET_ERR_STORE);
    char m1[MARKET__BID_MEMBER_MAX], m2[MARKET__BID_MEMBER_MAX];
    market__bid_member(m1, 9);
    market__bid_member(m2, 10);
    assert_true(strcmp(m1, m2) < 0); /* an older order sorts first within a price */
    redisReply m = str(m2);
    int64_t id;
    assert_int_equal(market__reply_book_id(&m, &id), 0);
    assert_int_equal(id, 10);
    m = str("x1");
    assert_int_equal(market__reply_book_id(&m, &id), -1);
}

/* A page of ids reads as numbers up to max, and a page with an entry that is no id, or that
 * is no array, is refused; a count is a non-negative integer; a holding is 0 or 1. */
static void test_reply_ids_count_holds(void **state) {
    (void)state;
    redisReply v[4] = {str("3"), str("-50"), str("12"), str("-40")}; /* a book's: id, score */
    redisReply *e[4] = {&v[0], &v[1], &v[2], &v[3]};
    redisReply r = arr(e, 4);
    int64_t ids[4];
    size_t n = 9;
    assert_int_equal(market__reply_ids(&r, 1, ids, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 12);
    assert_int_equal(market__reply_ids(&r, 1, ids, 1, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(market__reply_ids(&r, 0, ids, 4, &n), -1); /* "-50" is no id */
    assert_int_equal(market__reply_ids(&r, 0, ids, 1, &n), 0);  /* a page of ids alone */
    r = arr(e, 3);
    assert_int_equal(market__reply_ids(&r, 1, ids, 4, &n), -1); /* an odd count is no pairs */
    v[0] = str("0");
    assert_int_equal(market__reply_ids(&r, 0, ids, 4, &n), -1);
    v[0] = str("x");
    assert_int_equal(market__reply_ids(&r, 0, ids, 4, &n), -1);
    assert_int_equal(market__reply_ids(&v[0], 0, ids, 4, &n), -1);
    redisReply i = {.type = REDIS_REPLY_INTEGER, .integer = 7};
    assert_int_equal(market__reply_count(&i), 7);
    assert_int_equal(market__reply_holds(&i), -1);
    i.integer = 1;
    assert_int_equal(market__reply_holds(&i), 1);
    i.integer = 0;
    assert_int_equal(market__reply_holds(&i), 0);
    i.integer = -1;
    assert_int_equal(market__reply_count(&i), -1);
    assert_int_equal(market__reply_count(&v[0]), -1);
    assert_int_equal(market__reply_holds(&v[0]), -1);
}

/* The shapes a file above the model asks of a reply: status, nil, error, an array of n (or
 * of pairs), its elements, its text (copied, duplicated, compared), out of range as NULL. */
static void test_reply_shapes(void **state) {
    (void)state;
    redisReply ok = {.type = REDIS_REPLY_STATUS, .str = (char *)"OK", .len = 2};
    redisReply err = {.type = REDIS_REPLY_ERROR, .str = (char *)"LOADING x", .len = 9};
    redisReply v[3] = {str("ab"), str(NULL), str("12")};
    redisReply *e[3] = {&v[0], &v[1], &v[2]};
    redisReply a = arr(e, 3);
    assert_true(market__reply_ok(&ok));
    assert_false(market__reply_ok(&v[0]));
    assert_true(market__reply_nil(&v[1]));
    assert_true(market__reply_err(&err));
    assert_false(market__reply_err(&ok));
    assert_true(market__reply_array(&a, 3, 0));
    assert_true(market__reply_array(&a, SIZE_MAX, 0));
    assert_false(market__reply_array(&a, SIZE_MAX, 1)); /* an odd count is no pairs */
    assert_false(market__reply_array(&a, 2, 0));
    assert_false(market__reply_array(&ok, SIZE_MAX, 0));
    assert_int_equal(market__reply_len(&a), 3);
    assert_int_equal(market__reply_len(&ok), 0);
    assert_ptr_equal(market__reply_at(&a, 2), &v[2]);
    assert_null(market__reply_at(&a, 3));
    assert_null(market__reply_at(&ok, 0));
    char buf[3];
    assert_int_equal(market__reply_text(&v[0], buf, sizeof buf), 0);
    assert_string_equal(buf, "ab");
    assert_int_equal(market__reply_text(&v[0], buf, 2), -1); /* no room for its NUL */
    assert_int_equal(market__reply_text(&v[1], buf, sizeof buf), -1);
    redisReply nul = {.type = REDIS_REPLY_STRING, .str = (char *)"a\0b", .len = 3};
    assert_int_equal(market__reply_text(&nul, buf, sizeof buf), -1);
    char *d = NULL;
    assert_int_equal(market__reply_dup(&v[2], &d), 0);
    assert_string_equal(d, "12");
    free(d);
    assert_int_equal(market__reply_dup(&ok, &d), -1);
    assert_null(d);
    assert_true(market__reply_is(&v[0], "ab"));
    assert_false(market__reply_is(&v[0], "abc"));
    assert_false(market__reply_is(&v[1], ""));
    assert_false(market__reply_is(NULL, "ab"));
    size_t len = 0;
    assert_string_equal(market__reply_str(&v[0], &len), "ab");
    assert_int_equal(len, 2);
    assert_null(market__reply_str(&err, &len)); /* an error's text is its why */
    assert_string_equal(market__reply_why(&err, &len), "LOADING x");
    assert_int_equal(len, 9);
    assert_null(market__reply_why(&v[0], &len));
    assert_null(market__reply_str(&a, &len));
    assert_null(market__reply_error_in(&a));
    redisReply *ex[2] = {&ok, &err};
    redisReply exec = arr(ex, 2);
    assert_ptr_equal(market__reply_error_in(&exec), &err);
    assert_null(market__reply_error_in(&ok));
}

/* Entries of an item's index (seller, price), of a realm's ends (member, end) and of
 * listings' prices and units: read, or refused when they are not one. */
static void test_reply_entries_of_pages(void **state) {
    (void)state;
    redisReply ix_v[4] = {str("bob"), str("120"), str("a b"), str("5")};
    redisReply *ix_e[4] = {&ix_v[0], &ix_v[1], &ix_v[2], &ix_v[3]};
    redisReply ix = arr(ix_e, 4);
    char seller[MARKET_ID_MAX + 1];
    int64_t price = 0;
    assert_int_equal(market__reply_seller_at(&ix, 0, seller, &price), 0);
    assert_string_equal(seller, "bob");
    assert_int_equal(price, 120);
    assert_int_equal(market__reply_seller_at(&ix, 1, seller, &price), -1); /* no id */
    assert_int_equal(market__reply_seller_at(&ix, 2, seller, &price), -1); /* past the end */
    redisReply z_v[6] = {str("@17"),  str("1000"),  str("sword.bob"),
                         str("1001"), str("nodot"), str("1002")};
    redisReply *z_e[6] = {&z_v[0], &z_v[1], &z_v[2], &z_v[3], &z_v[4], &z_v[5]};
    redisReply z = arr(z_e, 6);
    int64_t end, auction;
    char item[MARKET_ID_MAX + 1], who[MARKET_ID_MAX + 1];
    assert_int_equal(market__reply_ending(&z, 0, &end, &auction, item, who), 0);
    assert_int_equal(end, 1000);
    assert_int_equal(auction, 17);
    assert_int_equal(market__reply_ending(&z, 1, &end, &auction, item, who), 0);
    assert_int_equal(auction, 0);
    assert_string_equal(item, "sword");
    assert_string_equal(who, "bob");
    assert_int_equal(market__reply_ending(&z, 2, &end, &auction, item, who), -1);
    assert_int_equal(end, 1002); /* read all the same: the sweep stops at a later end */
    redisReply pr_v[2] = {str("30"), str(NULL)}, un_v[2] = {str("4"), str(NULL)};
    redisReply *pr_e[2] = {&pr_v[0], &pr_v[1]}, *un_e[2] = {&un_v[0], &un_v[1]};
    redisReply pr = arr(pr_e, 2), un = arr(un_e, 2);
    int stack;
    int64_t units;
    market__reply_listing_at(&pr, &un, 0, &price, &stack, &units);
    assert_int_equal(price, 30);
    assert_true(stack);
    assert_int_equal(units, 4);
    market__reply_listing_at(&pr, &un, 1, &price, &stack, &units);
    assert_int_equal(price, MARKET__NOT_LISTED);
    assert_false(stack);
    assert_int_equal(units, 1); /* a unique item */
}

/* The deal types: each reads its hash at its key, and its reply into its value, with its own
 * code for a number that names none. */
static void test_deal_types(void **state) {
    (void)state;
    const market__deal_type *t[3] = {&market__deal_order, &market__deal_auction,
                                     &market__deal_direct};
    const char *key[3] = {"order:{r}:5", "auction:{r}:5", "direct:{r}:5"};
    int missing[3] = {MARKET_ERR_NO_ORDER, MARKET_ERR_NO_AUCTION, MARKET_ERR_NO_DIRECT};
    for (size_t k = 0; k < 3; k++) {
        char out[MARKET__KEY_MAX];
        t[k]->key(out, "r", 5);
        assert_string_equal(out, key[k]);
        market__buf b = {0};
        t[k]->rd(&b, "r", 5);
        assert_int_equal(market__buf_seal(&b), MARKET_OK);
        assert_int_equal(b.n, 1);
        assert_string_equal(b.argv[0][0], "HMGET");
        assert_string_equal(b.argv[0][1], key[k]);
        redisReply nil[16], *e[16];
        size_t fields = (size_t)b.argc[0] - 2;
        for (size_t i = 0; i < fields; i++) {
            nil[i] = str(NULL);
            e[i] = &nil[i];
        }
        redisReply r = arr(e, fields);
        char *v = calloc(1, t[k]->size);
        assert_int_equal(t[k]->reply(&r, 5, v), missing[k]);
        assert_int_equal(t[k]->missing, missing[k]);
        int64_t id;
        memcpy(&id, v + t[k]->id_off, sizeof id);
        assert_int_equal(id, 5);
        free(v);
        market__buf_free(&b);
    }
}

/* A player: name, funds and escrow (none: 0), its inventory and stacks
 * sorted; no funds is no player; a stack whose item is no id, or escrow
 * that is no number, is unreadable. */
static void test_reply_player(void **state) {
    (void)state;
    redisReply h_v[3] = {str("Ann"), str("250"), str(NULL)};
    redisReply *h_e[3] = {&h_v[0], &h_v[1], &h_v[2]};
    redisReply i_v[3] = {str("sword"), str("axe"), {.type = REDIS_REPLY_INTEGER}};
    redisReply *i_e[3] = {&i_v[0], &i_v[1], &i_v[2]};
    redisReply s_v[4] = {str("wood"), str("2"), str("ore"), str("7")};
    redisReply *s_e[4] = {&s_v[0], &s_v[1], &s_v[2], &s_v[3]};
    redisReply h = arr(h_e, 3), inv = arr(i_e, 3), st = arr(s_e, 4);
    market_player *p = calloc(1, sizeof *p);
    assert_int_equal(market__reply_player(&h, &inv, &st, p), MARKET_OK);
    assert_string_equal(p->name, "Ann");
    assert_int_equal(p->funds, 250);
    assert_int_equal(p->escrow, 0);
    market_player_free(p);
    h_v[2] = str("40");
    p = calloc(1, sizeof *p);
    assert_int_equal(market__reply_player(&h, &inv, &st, p), MARKET_OK);
    assert_int_equal(p->escrow, 40);
    market_player_free(p);
    h_v[2] = str("x");
    p = calloc(1, sizeof *p);
    assert_int_equal(market__reply_player(&h, &inv, &st, p), MARKET_ERR_STORE);
    market_player_free(p);
    h_v[2] = str(NULL);
    p = calloc(1, sizeof *p);
    assert_int_equal(market__reply_player(&h, &inv, &st, p), MARKET_OK);
    assert_int_equal(p->n_inventory, 2); /* the integer is left out */
    assert_string_equal(p->inventory[0], "axe");
    assert_int_equal(p->n_stacks, 2);
    assert_string_equal(p->stacks[0].item, "ore");
    assert_int_equal(p->stacks[1].count, 2);
    market_player_free(p);
    h_v[1] = str(NULL);
    p = calloc(1, sizeof *p);
    assert_int_equal(market__reply_player(&h, &inv, &st, p), MARKET_ERR_NO_PLAYER);
    market_player_free(p);
    h_v[1] = str("250");
    s_v[2] = str("bad item");
    p = calloc(1, sizeof *p);
    assert_int_equal(market__reply_player(&h, &inv, &st, p), MARKET_ERR_STORE);
    market_player_free(p);
}

/* A page of the market: listings with whole prices; entries that are no
 * listing's are left out. */
static void test_reply_market_page(void **state) {
    (void)state;
    redisReply v[8] = {str("sword.ann"), str("100"), str("nodot"),  str("5"),
                       str("axe.bob"),   str("1.5"), str("bow.cy"), str("7")};
    redisReply *e[8];
    for (int i = 0; i < 8; i++)
        e[i] = &v[i];
    redisReply r = arr(e, 8);
    market_listing *l;
    size_t n;
    assert_int_equal(market__reply_market_page(&r, &l, &n), MARKET_OK);
    assert_int_equal(n, 2);
    assert_string_equal(l[0].item, "sword");
    assert_string_equal(l[0].seller, "ann");
    assert_int_equal(l[0].price, 100);
    assert_string_equal(l[1].item, "bow");
    free(l);
    r = arr(e, 7);
    assert_int_equal(market__reply_market_page(&r, &l, &n), MARKET_ERR_STORE);
    assert_null(l);
    market_listing one;
    assert_int_equal(market__listing_read(&v[0], &v[1], &one), 0); /* strictly: ids checked */
    assert_string_equal(one.seller, "ann");
    v[0] = str("bad id.ann");
    assert_int_equal(market__listing_read(&v[0], &v[1], &one), -1);
    r = arr(e, 8); /* a page is read leniently: ids unchecked */
    assert_int_equal(market__reply_market_page(&r, &l, &n), MARKET_OK);
    assert_int_equal(n, 2);
    assert_string_equal(l[0].item, "bad id");
    free(l);
}

/* An entry of the auctions' feed: its action and the auction after it, read back; a state
 * follows from the action; an unknown action, a field out of its place or a bidder that is
 * no id is no entry. */
static void test_reply_auction_event(void **state) {
    (void)state;
    redisReply f[2 + 2 * MARKET__BID_FIELDS];
    const char *v[MARKET__BID_FIELDS] = {"7",  "C",    "sword", "0",   "100",
                                         "10", "5000", "B",     "120", "2"};
    f[0] = str("action");
    f[1] = str("bid");
    for (size_t i = 0; i < MARKET__BID_FIELDS; i++) {
        f[2 + 2 * i] = str(market__bid_fields[i]);
        f[3 + 2 * i] = str(v[i]);
    }
    redisReply *fe[2 + 2 * MARKET__BID_FIELDS];
    for (size_t i = 0; i < 2 + 2 * MARKET__BID_FIELDS; i++)
        fe[i] = &f[i];
    redisReply id = str("1795620239200-0"), fields = arr(fe, 2 + 2 * MARKET__BID_FIELDS);
    redisReply *ee[2] = {&id, &fields};
    redisReply entry = arr(ee, 2), *all[1] = {&entry}, r = arr(all, 1);
    void *out = NULL;
    size_t n = 0;
    assert_int_equal(market__reply_entries(&r, 10, MARKET__STREAM_BIDS, &out, &n), MARKET_OK);
    assert_int_equal(n, 1);
    const market_auction_event *ev = out;
    assert_string_equal(ev->id, "1795620239200-0");
    assert_string_equal(ev->action, "bid");
    assert_int_equal(ev->a.id, 7);
    assert_string_equal(ev->a.bidder, "B");
    assert_int_equal(ev->a.bid, 120);
    assert_int_equal(ev->a.ends_ms, 5000);
    assert_int_equal(ev->a.state, MARKET_AUCTION_OPEN);
    free(out);
    f[1] = str("sold");
    assert_int_equal(market__reply_entries(&r, 10, MARKET__STREAM_BIDS, &out, &n), MARKET_OK);
    assert_int_equal(((market_auction_event *)out)->a.state, MARKET_AUCTION_SOLD);
    free(out);
    f[1] = str("gone");
    assert_int_equal(market__reply_entries(&r, 10, MARKET__STREAM_BIDS, &out, &n),
                     MARKET_ERR_STORE);
    f[1] = str("bid");
    f[2] = str("seller"); /* "id" expected first */
    assert_int_equal(market__reply_entries(&r, 10, MARKET__STREAM_BIDS, &out, &n),
                     MARKET_ERR_STORE);
    f[2] = str("id");
    f[17] = str("B B");
    assert_int_equal(market__reply_entries(&r, 10, MARKET__STREAM_BIDS, &out, &n),
                     MARKET_ERR_STORE);
    assert_null(out);
}

/* A sale's buyers: ids and units; a player that is no id is unreadable,
 * an odd reply is no hash. */
static void test_reply_buyers(void **state) {
    (void)state;
    redisReply v[4] = {str("ann"), str("3"), str("bob"), str("1")};
    redisReply *e[4] = {&v[0], &v[1], &v[2], &v[3]};
    redisReply r = arr(e, 4);
    market_sale_buyer *b;
    size_t n;
    assert_int_equal(market__reply_buyers(&r, &b, &n), MARKET_OK);
    assert_int_equal(n, 2);
    assert_string_equal(b[1].player, "bob");
    assert_int_equal(b[0].units, 3);
    free(b);
    v[2] = str("b o b");
    assert_int_equal(market__reply_buyers(&r, &b, &n), MARKET__REPLY_BAD);
    assert_null(b);
    r = arr(e, 3);
    assert_int_equal(market__reply_buyers(&r, &b, &n), MARKET_ERR_STORE);
}

/* A SCAN page: the next cursor and the keys; one that is no string is
 * skipped; a cursor that does not fit is refused. */
static void test_reply_scan(void **state) {
    (void)state;
    redisReply k_v[2] = {str("users:{r}:a"), {.type = REDIS_REPLY_INTEGER}};
    redisReply *k_e[2] = {&k_v[0], &k_v[1]};
    redisReply cur = str("17"), keys = arr(k_e, 2), *e[2] = {&cur, &keys};
    redisReply r = arr(e, 2);
    char cursor[4];
    const redisReply *ks;
    size_t len;
    assert_int_equal(market__reply_scan(&r, cursor, sizeof cursor, &ks), 0);
    assert_string_equal(cursor, "17");
    assert_string_equal(market__reply_key(ks, 0, &len), "users:{r}:a");
    assert_int_equal(len, 11);
    assert_null(market__reply_key(ks, 1, &len));
    assert_null(market__reply_key(ks, 2, &len));
    cur = str("12345");
    assert_int_equal(market__reply_scan(&r, cursor, sizeof cursor, &ks), -1);
}

/* A sale's fields: present, absent (all nil), or unreadable (some nil, or
 * a bad number); TIME into ms. */
static void test_reply_sale_and_time(void **state) {
    (void)state;
    redisReply v[MARKET__SALE_FIELDS] = {str("gem"), str("10"), str("100"), str("90"),   str("10"),
                                         str("5"),   str("0"),  str("999"), str("house")};
    redisReply *e[MARKET__SALE_FIELDS];
    for (int i = 0; i < MARKET__SALE_FIELDS; i++)
        e[i] = &v[i];
    redisReply r = arr(e, MARKET__SALE_FIELDS);
    market__sale_state st;
    int64_t initial;
    char item[MARKET_ID_MAX + 1], house[MARKET_ID_MAX + 1];
    assert_int_equal(market__reply_sale(&r, &st, &initial, item, house), MARKET__PRESENT);
    assert_int_equal(initial, 100);
    assert_int_equal(st.left, 90);
    assert_int_equal(st.end_ms, 999);
    assert_string_equal(house, "house");
    v[3] = str("x");
    assert_int_equal(market__reply_sale(&r, &st, &initial, NULL, NULL), MARKET__UNREADABLE);
    for (int i = 0; i < MARKET__SALE_FIELDS; i++)
        v[i] = str(NULL);
    assert_int_equal(market__reply_sale(&r, &st, &initial, NULL, NULL), MARKET__ABSENT);
    redisReply t_v[2] = {str("1700000000"), str("123456")}, *t_e[2] = {&t_v[0], &t_v[1]};
    redisReply t = arr(t_e, 2);
    int64_t ms;
    assert_int_equal(market__reply_time(&t, &ms), 0);
    assert_int_equal(ms, 1700000000123LL);
    t = arr(t_e, 1);
    assert_int_equal(market__reply_time(&t, &ms), -1);
    /* CONFIG GET of one parameter: its name, then its value */
    redisReply c_v[2] = {str("appendfsync"), str("everysec")}, *c_e[2] = {&c_v[0], &c_v[1]};
    redisReply cg = arr(c_e, 2);
    char fsync[9];
    assert_int_equal(market__reply_config(&cg, fsync, sizeof fsync), 0);
    assert_string_equal(fsync, "everysec");
    assert_int_equal(market__reply_config(&cg, fsync, 8), -1); /* does not fit */
    cg = arr(c_e, 0);                                          /* an unknown parameter: nothing */
    assert_int_equal(market__reply_config(&cg, fsync, sizeof fsync), -1);
}

/* A stream entry of a trade, and of a listing change: every field read,
 * or the entry refused when one is missing or unreadable. */
static void test_reply_trade_and_change(void **state) {
    (void)state;
    redisReply f_v[14] = {str("buyer"), str("ann"),      str("seller"), str("bob"),   str("item"),
                          str("gem"),   str("quantity"), str("2"),      str("price"), str("50"),
                          str("total"), str("100"),      str("fence"),  str("7")};
    redisReply *f_e[14];
    for (int i = 0; i < 14; i++)
        f_e[i] = &f_v[i];
    redisReply id = str("1700000000000-0"), f = arr(f_e, 14), *e_e[2] = {&id, &f};
    redisReply e = arr(e_e, 2);
    market_trade t;
    char entry[MARKET_TRADE_ID_MAX + 1];
    assert_int_equal(market__reply_trade(&e, &t, entry), MARKET_OK);
    assert_string_equal(t.buyer, "ann");
    assert_int_equal(t.total, 100);
    assert_int_equal(t.fence, 7);
    assert_int_equal(t.time_ms, 1700000000000LL);
    assert_string_equal(entry, "1700000000000-0");
    redisReply *list_e[1] = {&e}, list = arr(list_e, 1);
    void *v;
    size_t n;
    assert_int_equal(market__reply_entries(&list, 5, 0, &v, &n), MARKET_OK);
    assert_int_equal(n, 1);
    assert_string_equal(((market_trade *)v)[0].buyer, "ann");
    free(v);
    f = arr(f_e, 12); /* no fence */
    assert_int_equal(market__reply_trade(&e, &t, NULL), MARKET_ERR_STORE);
    /* a cut and its house; a field a later version writes is skipped */
    redisReply x_v[20] = {str("buyer"), str("ann"), str("seller"),   str("bob"),
                          str("item"),  str("gem"), str("quantity"), str("2"),
                          str("price"), str("50"),  str("total"),    str("100"),
                          str("fee"),   str("5"),   str("house"),    str("game"),
                          str("fence"), str("7"),   str("zone"),     str("eu-west")};
    redisReply *x_e[20];
    for (int i = 0; i < 20; i++)
        x_e[i] = &x_v[i];
    f = arr(x_e, 20);
    assert_int_equal(market__reply_trade(&e, &t, NULL), MARKET_OK);
    assert_int_equal(t.fee, 5);
    assert_string_equal(t.house, "game");
    x_v[13] = str("five"); /* a known field that is not a number is still refused */
    assert_int_equal(market__reply_trade(&e, &t, NULL), MARKET_ERR_STORE);
    x_v[13] = str("5");
    x_v[15] = str("not an id");
    assert_int_equal(market__reply_trade(&e, &t, NULL), MARKET_ERR_STORE);
    x_v[15] = str(""); /* no cut: no house */
    assert_int_equal(market__reply_trade(&e, &t, NULL), MARKET_OK);
    assert_string_equal(t.house, "");
    f = arr(f_e, 14);
    redisReply c_v[10] = {str("action"), str("listed"), str("seller"), str("bob"),      str("item"),
                          str("gem"),    str("price"),  str("50"),     str("quantity"), str("3")};
    redisReply *c_e[10];
    for (int i = 0; i < 10; i++)
        c_e[i] = &c_v[i];
    f = arr(c_e, 10);
    market_change ch;
    assert_int_equal(market__reply_change(&e, &ch), 0);
    assert_true(ch.listed);
    assert_int_equal(ch.listing.quantity, 3);
    assert_int_equal(market__reply_entries(&list, 5, 1, &v, &n), MARKET_OK);
    assert_int_equal(((market_change *)v)[0].listing.quantity, 3);
    free(v);
    c_v[1] = str("sold");
    assert_int_equal(market__reply_change(&e, &ch), -1);
    assert_int_equal(market__reply_entries(&list, 5, 1, &v, &n), MARKET_ERR_STORE);
    assert_null(v);
}

/* A bought count (nil: none) and a sale's counts for the audit. */
static void test_reply_bought_and_sale_counts(void **state) {
    (void)state;
    redisReply r = str(NULL);
    assert_int_equal(market__reply_bought(&r), 0);
    r = str("4");
    assert_int_equal(market__reply_bought(&r), 4);
    r = str("-1");
    assert_int_equal(market__reply_bought(&r), -1);
    redisReply v[4] = {str("gem"), str("100"), str("90"), str("10")};
    redisReply *e[4] = {&v[0], &v[1], &v[2], &v[3]};
    redisReply h = arr(e, 4);
    char item[MARKET_ID_MAX + 1];
    int64_t c[3];
    assert_int_equal(market__reply_sale_counts(&h, item, c), MARKET__PRESENT);
    assert_string_equal(item, "gem");
    assert_int_equal(c[1], 90);
    v[2] = str("x");
    assert_int_equal(market__reply_sale_counts(&h, item, c), MARKET__UNREADABLE);
    v[0] = str(NULL);
    assert_int_equal(market__reply_sale_counts(&h, item, c), MARKET__ABSENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_growth_keeps_every_argument),
        cmocka_unit_test(test_open_commands_kept_or_taken_back),
        cmocka_unit_test(test_misuse_fails_the_buffer),
        cmocka_unit_test(test_script_and_command_kinds),
        cmocka_unit_test(test_reply_stacks),
        cmocka_unit_test(test_reply_player),
        cmocka_unit_test(test_reply_order),
        cmocka_unit_test(test_reply_auction),
        cmocka_unit_test(test_goods_text),
        cmocka_unit_test(test_reply_direct),
        cmocka_unit_test(test_reply_auction_event),
        cmocka_unit_test(test_reply_market_page),
        cmocka_unit_test(test_reply_buyers),
        cmocka_unit_test(test_reply_ids_count_holds),
        cmocka_unit_test(test_deal_types),
        cmocka_unit_test(test_reply_shapes),
        cmocka_unit_test(test_reply_entries_of_pages),
        cmocka_unit_test(test_reply_scan),
        cmocka_unit_test(test_reply_sale_and_time),
        cmocka_unit_test(test_reply_trade_and_change),
        cmocka_unit_test(test_reply_bought_and_sale_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
