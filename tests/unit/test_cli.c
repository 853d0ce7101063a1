/* test_cli.c - cli/: whole numbers, seconds and HOST[:PORT] as the three programs read them. */
#include <stdio.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "cli/cli.h"

/* ---- cli_parse_u64 ---- */

static void test_u64_in_range(void **state) {
    (void)state;
    uint64_t v = 0;
    assert_int_equal(cli_parse_u64("0", 0, 10, &v), CLI_OK);
    assert_int_equal(v, 0);
    assert_int_equal(cli_parse_u64("10", 0, 10, &v), CLI_OK);
    assert_int_equal(v, 10);
    assert_int_equal(cli_parse_u64("007", 1, 10, &v), CLI_OK);
    assert_int_equal(v, 7);
    assert_int_equal(cli_parse_u64("18446744073709551615", 0, UINT64_MAX, &v), CLI_OK);
    assert_true(v == UINT64_MAX);
}

static void test_u64_out_of_range_leaves_out(void **state) {
    (void)state;
    uint64_t v = 42;
    assert_int_equal(cli_parse_u64("11", 0, 10, &v), CLI_ERR_RANGE);
    assert_int_equal(cli_parse_u64("0", 1, 10, &v), CLI_ERR_RANGE);
    assert_int_equal(cli_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), CLI_ERR_RANGE);
    assert_int_equal(cli_parse_u64("99999999999999999999999", 0, UINT64_MAX, &v), CLI_ERR_RANGE);
    assert_int_equal(v, 42);
}

static void test_u64_refuses_what_strtoull_takes(void **state) {
    (void)state;
    static const char *const bad[] = {"",    "-1",  "+1", " 1", "1 ", "0x10",
                                      "1e3", "1.0", "a",  "1a", "--", "\t7"};
    uint64_t v = 42;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (cli_parse_u64(bad[i], 0, UINT64_MAX, &v) != CLI_ERR_SYNTAX)
            fail_msg("'%s' was not refused as a syntax error", bad[i]);
    }
    assert_int_equal(cli_parse_u64(NULL, 0, 10, &v), CLI_ERR_SYNTAX);
    /* Junk after an overflowing run of digits is still junk. */
    assert_int_equal(cli_parse_u64("99999999999999999999999x", 0, UINT64_MAX, &v), CLI_ERR_SYNTAX);
    assert_int_equal(v, 42);
}

/* ---- cli_parse_seconds ---- */

static void test_seconds_decimals(void **state) {
    (void)state;
    double d = 0;
    assert_int_equal(cli_parse_seconds("10", 86400, &d), CLI_OK);
    assert_true(d == 10.0);
    assert_int_equal(cli_parse_seconds("0.5", 86400, &d), CLI_OK);
    assert_true(d == 0.5);
    assert_int_equal(cli_parse_seconds(".25", 86400, &d), CLI_OK);
    assert_true(d == 0.25);
    assert_int_equal(cli_parse_seconds("2.", 86400, &d), CLI_OK);
    assert_true(d == 2.0);
    assert_int_equal(cli_parse_seconds("86400", 86400, &d), CLI_OK);
    assert_true(d == 86400.0);
}

static void test_seconds_refused(void **state) {
    (void)state;
    double d = 7;
    static const char *const syntax[] = {"",    ".",   "-1",    "+1", "1e3", "10s",
                                         "inf", "nan", "1.2.3", " 1", "0x10"};
    for (size_t i = 0; i < sizeof syntax / sizeof *syntax; i++) {
        if (cli_parse_seconds(syntax[i], 86400, &d) != CLI_ERR_SYNTAX)
            fail_msg("'%s' was not refused as a syntax error", syntax[i]);
    }
    assert_int_equal(cli_parse_seconds(NULL, 86400, &d), CLI_ERR_SYNTAX);
    assert_int_equal(cli_parse_seconds("0", 86400, &d), CLI_ERR_RANGE);
    assert_int_equal(cli_parse_seconds("0.000", 86400, &d), CLI_ERR_RANGE);
    assert_int_equal(cli_parse_seconds("86400.5", 86400, &d), CLI_ERR_RANGE);
    char huge[400];
    memset(huge, '9', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    assert_int_equal(cli_parse_seconds(huge, 86400, &d), CLI_ERR_RANGE);
    assert_true(d == 7);
}

/* ---- cli_split_hostport ---- */

/* ---- cli_parse_duration ---- */

static void test_duration_units(void **state) {
    (void)state;
    static const struct {
        const char *s;
        uint64_t want;
    } ok[] = {{"1", 1}, {"90s", 90}, {"15m", 900}, {"1h", 3600}, {"7d", 604800}, {"366d", 31622400}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        uint64_t v = 0;
        assert_int_equal(cli_parse_duration(ok[i].s, 366 * 86400, &v), CLI_OK);
        assert_int_equal(v, ok[i].want);
    }
}

static void test_duration_refused(void **state) {
    (void)state;
    static const struct {
        const char *s;
        int rc;
    } bad[] = {{"", CLI_ERR_SYNTAX},   {"h", CLI_ERR_SYNTAX},    {"1w", CLI_ERR_SYNTAX},
               {"1hh", CLI_ERR_SYNTAX}, {"-1h", CLI_ERR_SYNTAX}, {"1.5h", CLI_ERR_SYNTAX},
               {" 1h", CLI_ERR_SYNTAX}, {"0h", CLI_ERR_RANGE},   {"367d", CLI_ERR_RANGE},
               {"99999999999999999999s", CLI_ERR_RANGE}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t v = 42;
        if (cli_parse_duration(bad[i].s, 366 * 86400, &v) != bad[i].rc)
            fail_msg("'%s' should give %d", bad[i].s, bad[i].rc);
        assert_int_equal(v, 42);
    }
    uint64_t v = 42;
    assert_int_equal(cli_parse_duration(NULL, 10, &v), CLI_ERR_SYNTAX);
}

static void test_hostport_forms(void **state) {
    (void)state;
    char host[64];
    uint16_t port = 0;
    assert_int_equal(cli_split_hostport("127.0.0.1:8080", 80, host, sizeof host, &port), CLI_OK);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 8080);
    assert_int_equal(cli_split_hostport("localhost", 80, host, sizeof host, &port), CLI_OK);
    assert_string_equal(host, "localhost");
    assert_int_equal(port, 80);
    assert_int_equal(cli_split_hostport("[::1]:9", 80, host, sizeof host, &port), CLI_OK);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 9);
    assert_int_equal(cli_split_hostport("[::1]", 80, host, sizeof host, &port), CLI_OK);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 80);
}

static void test_hostport_refused(void **state) {
    (void)state;
    char host[8] = "keep";
    uint16_t port = 1;
    assert_int_equal(cli_split_hostport("", 80, host, sizeof host, &port), CLI_ERR_SYNTAX);
    assert_int_equal(cli_split_hostport(":80", 80, host, sizeof host, &port), CLI_ERR_SYNTAX);
    assert_int_equal(cli_split_hostport("h:", 80, host, sizeof host, &port), CLI_ERR_SYNTAX);
    assert_int_equal(cli_split_hostport("h:http", 80, host, sizeof host, &port), CLI_ERR_SYNTAX);
    assert_int_equal(cli_split_hostport("[::1", 80, host, sizeof host, &port), CLI_ERR_SYNTAX);
    assert_int_equal(cli_split_hostport("[::1]x", 80, host, sizeof host, &port), CLI_ERR_SYNTAX);
    assert_int_equal(cli_split_hostport("[]:80", 80, host, sizeof host, &port), CLI_ERR_SYNTAX);
    assert_int_equal(cli_split_hostport("h:0", 80, host, sizeof host, &port), CLI_ERR_RANGE);
    assert_int_equal(cli_split_hostport("h:65536", 80, host, sizeof host, &port), CLI_ERR_RANGE);
    assert_int_equal(cli_split_hostport("longhostname:1", 80, host, sizeof host, &port),
                     CLI_ERR_TOO_LONG);
    assert_string_equal(host, "keep");
    assert_int_equal(port, 1);
}

static void test_strerror_names_every_code(void **state) {
    (void)state;
    static const int codes[] = {CLI_OK, CLI_ERR_SYNTAX, CLI_ERR_RANGE, CLI_ERR_TOO_LONG};
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
        assert_string_not_equal(cli_strerror(codes[i]), "unknown cli error");
    assert_string_equal(cli_strerror(-99), "unknown cli error");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64_in_range),
        cmocka_unit_test(test_u64_out_of_range_leaves_out),
        cmocka_unit_test(test_u64_refuses_what_strtoull_takes),
        cmocka_unit_test(test_seconds_decimals),
        cmocka_unit_test(test_seconds_refused),
        cmocka_unit_test(test_duration_units),
        cmocka_unit_test(test_duration_refused),
        cmocka_unit_test(test_hostport_forms),
        cmocka_unit_test(test_hostport_refused),
        cmocka_unit_test(test_strerror_names_every_code),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
