/* test_market_model.c - the data model's command buffer (market_model.c)
 * without Redis: commands that outgrow the first arrays and text chunks keep
 * their arguments where they were, an opened command short of arguments is
 * taken back, a misuse fails the buffer rather than cutting a command, and a
 * reset buffer is empty but keeps its memory. */
#include <stdio.h>
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
    for (int i = 0; i < 300; i++) market__buf_arg(&b, "k");
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_growth_keeps_every_argument),
        cmocka_unit_test(test_open_commands_kept_or_taken_back),
        cmocka_unit_test(test_misuse_fails_the_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
