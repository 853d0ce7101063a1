/* test_sentinel_topo.c - the Sentinel test harness itself (tests/helpers/sentinel_proc.h).
 *
 * A topology starts with the Sentinels naming nodes[0] and writes reaching
 * the replicas; a master killed with SIGKILL is replaced by its replica
 * within seconds; restarted from its AOF, the old master first answers as a
 * master with the data it had, then the Sentinels turn it into a replica of
 * the new one. The same with a password (requirepass, masterauth,
 * auth-pass) that the URL has to percent-encode.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

#include "tests/helpers/sentinel_proc.h"

#define FAILOVER_MS 15000 /* promotion bound: down-after 2 s, a failed election retries at 6 s */
#define DEMOTE_MS 30000   /* a returning old master turned into a replica */

static th_sentinel_topo g_topo; /* stopped by the teardown, whatever the test did */

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* SET key value on port; fails the test unless it answers OK. */
static void set_key(int port, const char *pw, const char *key, const char *value) {
    redisContext *c = th_topo_connect(port, pw, 2000);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "SET %s %s", key, value);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(c);
}

/* GET key on port, retried while the node is loading or unreachable, for up to
 * timeout_ms. Returns 1 when it holds value, 0 when it answers anything else (nil
 * included), -1 when it never answered. */
static int key_is(int port, const char *pw, const char *key, const char *value, int timeout_ms) {
    long long deadline = now_ms() + timeout_ms;
    do {
        redisContext *c = th_topo_connect(port, pw, 1000);
        redisReply *r = c ? redisCommand(c, "GET %s", key) : NULL;
        int verdict = -1;
        if (r && r->type == REDIS_REPLY_STRING) verdict = strcmp(r->str, value) == 0;
        if (r && r->type == REDIS_REPLY_NIL) verdict = 0;
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (verdict >= 0) return verdict;
        sleep_ms(50);
    } while (now_ms() < deadline);
    return -1;
}

static int teardown(void **state) {
    (void)state;
    th_topo_stop(&g_topo);
    return 0;
}

/* ---- tests ---- */

static void test_topo_starts_sentinels_name_first_node_writes_replicate(void **state) {
    (void)state;
    th_sentinel_topo *t = &g_topo;
    long long t0 = now_ms();
    assert_int_equal(th_topo_start(t, 2, NULL), 0);
    long long started = now_ms() - t0;

    assert_int_equal(t->nreplicas, 2);
    assert_string_equal(t->master_name, "mymaster");
    assert_string_equal(t->password, "");
    char want[512];
    snprintf(want, sizeof want,
             "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/mymaster/0",
             t->sentinels[0].port, t->sentinels[1].port, t->sentinels[2].port);
    assert_string_equal(t->url, want);

    int master = t->nodes[0].port;
    assert_int_equal(th_topo_master_port(t), master);
    assert_int_equal(th_topo_wait_master(t, -1, 1000), master);
    assert_int_equal(th_topo_wait_master(t, master, 200), -1); /* nobody else is master */
    assert_int_equal(th_topo_node_index(t, master), 0);
    assert_int_equal(th_topo_node_index(t, t->nodes[2].port), 2);
    assert_int_equal(th_topo_node_index(t, t->sentinels[0].port), -1);
    assert_int_equal(th_topo_wait_role(master, NULL, "master", 1000), 0);
    for (int i = 1; i <= 2; i++)
        assert_int_equal(th_topo_wait_role(t->nodes[i].port, NULL, "slave", 1000), 0);

    set_key(master, NULL, "topo:a", "written-on-master");
    assert_int_equal(th_topo_wait_replicas_synced(t, master, 2, 5000), 0);
    for (int i = 1; i <= 2; i++)
        assert_int_equal(key_is(t->nodes[i].port, NULL, "topo:a", "written-on-master", 1000), 1);
    /* a replica refuses writes: they must go through the master Sentinel names */
    redisContext *c = th_topo_connect(t->nodes[1].port, NULL, 1000);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "SET topo:b x");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(r->str, "READONLY"));
    freeReplyObject(r);
    redisFree(c);

    th_topo_stop(t);
    th_topo_stop(t); /* twice is harmless */
    fprintf(stderr, "# topology of 1 master, 2 replicas, 3 sentinels ready in %lld ms\n", started);
}

/* The password of a topology started with pw: in the URL percent-encoded, and asked
 * for by the data nodes. */
static void check_password(const th_sentinel_topo *t, const char *pw) {
    assert_string_equal(t->password, pw);
    char enc[200], want[512];
    size_t o = 0;
    for (const char *p = pw; *p && o + 4 < sizeof enc; p++) {
        if (strchr("@:/%", *p))
            o += (size_t)snprintf(enc + o, sizeof enc - o, "%%%02X", (unsigned char)*p);
        else
            enc[o++] = *p;
    }
    enc[o] = '\0';
    snprintf(want, sizeof want,
             "redis-sentinel://:%s@127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/mymaster/0", enc,
             t->sentinels[0].port, t->sentinels[1].port, t->sentinels[2].port);
    assert_string_equal(t->url, want);

    redisContext *c = th_topo_connect(t->nodes[0].port, NULL, 1000);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "ROLE");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(r->str, "NOAUTH"));
    freeReplyObject(r);
    redisFree(c);
    assert_null(th_topo_connect(t->nodes[0].port, "wrong", 1000));
}

/* Kills the master of a 1-replica topology (password pw or none), checks the replica
 * is promoted with the data, then restarts the old master: a master with its own
 * data first, a replica of the new master later. */
static void failover_and_return(const char *pw) {
    th_sentinel_topo *t = &g_topo;
    long long t0 = now_ms();
    assert_int_equal(th_topo_start(t, 1, pw), 0);
    long long started = now_ms() - t0;
    int old = t->nodes[0].port, replica = t->nodes[1].port;
    if (pw) check_password(t, pw);

    set_key(old, pw, "topo:before", "v1");
    assert_int_equal(th_topo_wait_replicas_synced(t, old, 1, 5000), 0);

    th_redis_signal(&t->nodes[0], SIGKILL);
    t0 = now_ms();
    int promoted = th_topo_wait_master(t, old, FAILOVER_MS);
    long long failover = now_ms() - t0;
    if (promoted != replica) th_topo_dump_logs(t, 40, stderr);
    assert_int_equal(promoted, replica);
    assert_int_equal(th_topo_node_index(t, promoted), 1);
    assert_int_equal(th_topo_master_port(t), promoted);
    assert_int_equal(key_is(promoted, pw, "topo:before", "v1", 2000), 1);
    set_key(promoted, pw, "topo:after", "v2");

    /* Back from its AOF and its own command line: a master, with what it had. */
    assert_int_equal(th_redis_restart(&t->nodes[0]), 0);
    t0 = now_ms();
    assert_int_equal(th_topo_wait_role(old, pw, "master", 2000), 0);
    assert_int_equal(key_is(old, pw, "topo:before", "v1", 2000), 1);
    assert_int_equal(key_is(old, pw, "topo:after", "v2", 2000), 0);
    long long as_master = now_ms() - t0;

    /* Then the Sentinels demote it and it syncs from the new master. */
    int role = th_topo_wait_role(old, pw, "slave", DEMOTE_MS);
    long long demoted = now_ms() - t0;
    if (role != 0) th_topo_dump_logs(t, 40, stderr);
    assert_int_equal(role, 0);
    assert_int_equal(th_topo_wait_replicas_synced(t, promoted, 1, 10000), 0);
    assert_int_equal(key_is(old, pw, "topo:after", "v2", 2000), 1);
    assert_int_equal(th_topo_master_port(t), promoted);
    assert_int_equal(th_topo_wait_master(t, -1, 1000), promoted);

    th_topo_stop(t);
    fprintf(stderr,
            "# %s: ready in %lld ms, replica promoted %lld ms after the kill; old master "
            "back as master (checked within %lld ms), a replica %lld ms after its restart\n",
            pw ? "with a password" : "no password", started, failover, as_master, demoted);
}

static void test_topo_master_killed_replica_promoted_old_master_demoted(void **state) {
    (void)state;
    failover_and_return(NULL);
}

static void test_topo_password_failover_and_url_encoding(void **state) {
    (void)state;
    failover_and_return("s3cr@t:p/w%x");
}

static void test_topo_start_refuses_bad_arguments(void **state) {
    (void)state;
    assert_int_equal(th_topo_start(&g_topo, 0, NULL), -1);
    assert_int_equal(th_topo_start(&g_topo, 3, NULL), -1);
    assert_int_equal(th_topo_start(&g_topo, 1, "has space"), -1);
    assert_int_equal(th_topo_start(&g_topo, 1, "q\"uote"), -1);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_topo_start_refuses_bad_arguments, teardown),
        cmocka_unit_test_teardown(test_topo_starts_sentinels_name_first_node_writes_replicate,
                                  teardown),
        cmocka_unit_test_teardown(test_topo_master_killed_replica_promoted_old_master_demoted,
                                  teardown),
        cmocka_unit_test_teardown(test_topo_password_failover_and_url_encoding, teardown),
    };
    return cmocka_run_group_tests_name("sentinel topology harness (integration)", tests, NULL,
                                       NULL);
}
