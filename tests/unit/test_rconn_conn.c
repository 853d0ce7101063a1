/* test_rconn_conn.c - the pure parts of rconn_conn.c and rconn_clock.c: the RESP encoder, the
 * judges of replies (+OK, not a master, ROLE), the AUTH arguments, the codes' messages and
 * the clock. No Redis: replies are made by hand (tests/helpers/reply.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/cmocka_all.h"

#include "rconn/rconn.h"

#include <hiredis.h>

#include "tests/helpers/reply.h"

/* ---- RESP ---- */

/* A pipeline encoded by rconn_resp_append is byte for byte what
 * hiredis formats command by command, empty and long arguments too. */
static void test_resp_append_writes_what_hiredis_would(void **state) {
    (void)state;
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    const char *a[] = {"SET", "k", ""}, *b[] = {"EVAL", big, "0"}, *c[] = {"EXEC"};
    const char *const *cmds[] = {a, b, c};
    const int argc[] = {3, 3, 1};
    char *buf = NULL, *want = NULL;
    size_t cap = 0, len = 0, want_len = 0;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(rconn_resp_append(&buf, &cap, &len, argc[i], cmds[i]), RCONN_OK);
        char *one = NULL;
        int n = redisFormatCommandArgv(&one, argc[i], (const char **)cmds[i], NULL);
        assert_true(n > 0);
        char *grown = realloc(want, want_len + (size_t)n);
        assert_non_null(grown);
        want = grown;
        memcpy(want + want_len, one, (size_t)n);
        want_len += (size_t)n;
        redisFreeCommand(one);
    }
    assert_int_equal(len, want_len);
    assert_memory_equal(buf, want, len);
    assert_true(cap >= len);
    assert_memory_equal(buf, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n", 26);
    free(buf);
    free(want);
}

/* ---- replies ---- */

static void test_role_master_judged(void **state) {
    (void)state;
    static const struct {
        const char *role; /* NULL: an error reply */
        int rc;
        const char *why;
    } cases[] = {
        {"master", 0, ""},
        {"slave", -1, "redis is a replica"},
        {"sentinel", -1, "redis is a sentinel, not a data server"},
        {"witch", -1, "redis has an unknown role"},
        {NULL, -1, "redis refuses ROLE: NOPERM no ROLE for you"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[96] = "";
        redisReply *r;
        if (cases[i].role != NULL) {
            r = th_rep_arr(2, th_rep_str(cases[i].role), th_rep_int(0));
        } else {
            r = th_rep_str("NOPERM no ROLE for you");
            r->type = REDIS_REPLY_ERROR;
        }
        assert_int_equal(rconn_role_master(r, why, sizeof why), cases[i].rc);
        assert_string_equal(why, cases[i].why);
        freeReplyObject(r);
    }
    char why[96];
    redisReply *r = th_rep_int(1);
    assert_int_equal(rconn_role_master(r, why, sizeof why), -1);
    assert_string_equal(why, "redis answered ROLE with something unexpected");
    freeReplyObject(r);
    assert_int_equal(rconn_role_master(NULL, why, sizeof why), -1);
}

/* INFO replication's replicas: online and acknowledged lately count; one
 * waiting for its copy, or silent for longer, does not. */
static void test_replicas_in_sync_counted(void **state) {
    (void)state;
    const char *info = "# Replication\r\nrole:master\r\nconnected_slaves:4\r\n"
                       "slave0:ip=127.0.0.1,port=7001,state=online,offset=900,lag=0\r\n"
                       "slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n"
                       "slave2:ip=127.0.0.1,port=7003,state=online,offset=880,lag=7\r\n"
                       "slave3:ip=127.0.0.1,port=7004,state=online,offset=899,lag=2\r\n"
                       "slave_read_repl_offset:900\r\nmaster_repl_offset:900\r\n";
    size_t all = 0;
    assert_int_equal(rconn_replicas_in_sync(info, 2, &all), 2);
    assert_int_equal(all, 4);
    assert_int_equal(rconn_replicas_in_sync(info, 10, NULL), 3);
    assert_int_equal(rconn_replicas_in_sync("role:master\r\nconnected_slaves:0\r\n", 2, &all),
                     0);
    assert_int_equal(all, 0);
    assert_int_equal(rconn_replicas_in_sync(NULL, 2, &all), 0);
}

static void test_reply_ok_and_not_master(void **state) {
    (void)state;
    redisReply *ok = th_rep_str("OK"), *queued = th_rep_str("QUEUED");
    ok->type = queued->type = REDIS_REPLY_STATUS;
    assert_true(rconn_reply_ok(ok));
    assert_false(rconn_reply_ok(queued));
    assert_false(rconn_reply_ok(NULL));
    assert_false(rconn_reply_not_master(ok));
    assert_false(rconn_reply_not_master(NULL));
    const char *errors[] = {"READONLY You can't write against a read only replica.",
                            "LOADING Redis is loading the dataset in memory",
                            "MASTERDOWN Link with MASTER is down", "NOPERM no"};
    for (size_t i = 0; i < 4; i++) {
        redisReply *e = th_rep_str(errors[i]);
        e->type = REDIS_REPLY_ERROR;
        assert_int_equal(rconn_reply_not_master(e), i < 3);
        freeReplyObject(e);
    }
    freeReplyObject(ok);
    freeReplyObject(queued);
}

static void test_auth_argv_by_credentials(void **state) {
    (void)state;
    rconn_addr a;
    const char *argv[3];
    assert_int_equal(rconn_addr_parse("redis://h:1", &a), RCONN_OK);
    assert_int_equal(rconn_auth_argv(&a, argv), 0);
    assert_int_equal(rconn_addr_parse("redis://:pw@h:1", &a), RCONN_OK);
    assert_int_equal(rconn_auth_argv(&a, argv), 2);
    assert_string_equal(argv[0], "AUTH");
    assert_string_equal(argv[1], "pw");
    assert_int_equal(rconn_addr_parse("redis://market:pw@h:1", &a), RCONN_OK);
    assert_int_equal(rconn_auth_argv(&a, argv), 3);
    assert_string_equal(argv[1], "market");
    assert_string_equal(argv[2], "pw");
}

/* ---- codes and the clock ---- */

static void test_strerror_every_code_distinct(void **state) {
    (void)state;
#define RCONN_CHECK(name, val, msg)                                                                \
    assert_true((val) <= 0);                                                                       \
    assert_string_equal(rconn_strerror(RCONN_##name), msg);
    RCONN_ERRNO_MAP(RCONN_CHECK)
#undef RCONN_CHECK
    assert_string_equal(rconn_strerror(-99), "unknown rconn error");
}

static void test_clock_monotonic_and_timespec(void **state) {
    (void)state;
    int64_t t0 = rconn_now_ms();
    assert_true(t0 >= 0);
    struct timespec ts;
    rconn_timespec_at(12345, &ts);
    assert_int_equal(ts.tv_sec, 12);
    assert_int_equal(ts.tv_nsec, 345000000L);
    rconn_timespec_at(-5, &ts);
    assert_int_equal(ts.tv_sec, 0);
    assert_int_equal(ts.tv_nsec, 0);
    pthread_cond_t cv;
    assert_int_equal(rconn_cond_init_monotonic(&cv), RCONN_OK);
    pthread_cond_destroy(&cv);
    assert_true(rconn_now_ms() >= t0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_append_writes_what_hiredis_would),
        cmocka_unit_test(test_role_master_judged),
        cmocka_unit_test(test_replicas_in_sync_counted),
        cmocka_unit_test(test_reply_ok_and_not_master),
        cmocka_unit_test(test_auth_argv_by_credentials),
        cmocka_unit_test(test_strerror_every_code_distinct),
        cmocka_unit_test(test_clock_monotonic_and_timespec),
    };
    return cmocka_run_group_tests_name("rconn connections, replies, RESP, clock (unit)", tests,
                                       NULL, NULL);
}
