/* test_rconn_sentinel.c - the pure part of rconn_sentinel.c: what the Sentinels' answers say a
 * write must reach to survive a failover, and which of their events are steps of one.
 *
 * Replies are made by hand (tests/helpers/reply.h) in the shapes Redis 7's Sentinel gives
 * (RESP2 flat field/value arrays); no Sentinel runs here. */
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "rconn/rconn.h"
#include "rconn/rconn_impl.h"
#include "tests/helpers/reply.h"

typedef struct rconn__sentinel_answer answer;

/* SENTINEL MASTER of a master at 10.0.0.1:port, with flags and epoch. */
static redisReply *master_rep(int port, const char *flags, const char *epoch) {
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    return th_rep_map(6, "name", "mymaster", "ip", "10.0.0.1", "port", p, "flags", flags,
                      "config-epoch", epoch, "down-after-milliseconds", "1000");
}

/* One SENTINEL REPLICAS entry. */
static redisReply *replica_rep(int port, const char *flags, const char *role, const char *prio,
                               const char *ping_ms, const char *link_down_ms,
                               const char *master_host) {
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    return th_rep_map(9, "ip", "10.0.0.2", "port", p, "flags", flags, "role-reported", role,
                      "slave-priority", prio, "last-ok-ping-reply", ping_ms,
                      "master-link-down-time", link_down_ms, "master-link-status", "ok",
                      "master-host", master_host);
}

static void test_parse_master_flags_and_epoch(void **state) {
    (void)state;
    static const struct {
        const char *flags;
        int down, failover;
    } cases[] = {
        {"master", 0, 0},
        {"s_down,master", 0, 0},        /* one Sentinel's opinion: no failover yet */
        {"s_down,o_down,master", 1, 0}, /* a quorum agrees */
        {"master,failover_in_progress", 0, 1},
        {"master,master_down", 0, 0}, /* "master_down" is not "o_down" */
        {"master,no_o_down", 0, 0},   /* whole flags only */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisReply *r = master_rep(6379, cases[i].flags, "7");
        answer a;
        memset(&a, 0, sizeof a);
        assert_int_equal(rconn__sentinel_parse_master(r, &a), 0);
        assert_string_equal(a.host, "10.0.0.1");
        assert_int_equal(a.port, 6379);
        assert_int_equal(a.epoch, 7);
        assert_int_equal(a.down_after_ms, 1000);
        assert_int_equal(a.down, cases[i].down);
        assert_int_equal(a.failover, cases[i].failover);
        freeReplyObject(r);
    }
    /* no address, a bad host, not an array */
    redisReply *r = th_rep_map(1, "port", "6379");
    answer a;
    assert_int_equal(rconn__sentinel_parse_master(r, &a), -1);
    freeReplyObject(r);
    r = th_rep_map(2, "ip", "10.0.0.1 x", "port", "6379");
    assert_int_equal(rconn__sentinel_parse_master(r, &a), -1);
    freeReplyObject(r);
    r = th_rep_nil();
    assert_int_equal(rconn__sentinel_parse_master(r, &a), -1);
    freeReplyObject(r);
}

/* Sentinel would promote a replica only when none of these holds (sentinelSelectSlave). */
static void test_parse_replicas_promotable_by_sentinels_rules(void **state) {
    (void)state;
    static const struct {
        const char *flags, *role, *prio, *ping, *link_down, *master_host;
        int promotable, role_master;
    } cases[] = {
        {"slave", "slave", "100", "300", "0", "10.0.0.1", 1, 0},
        {"s_down,slave", "slave", "100", "300", "0", "10.0.0.1", 0, 0},
        {"slave,disconnected", "slave", "100", "300", "0", "10.0.0.1", 0, 0},
        {"slave", "slave", "0", "300", "0", "10.0.0.1", 0, 0},    /* priority 0: never promoted */
        {"slave", "slave", "100", "5001", "0", "10.0.0.1", 0, 0}, /* no ping answer for 5 s */
        {"slave", "slave", "100", "5000", "0", "10.0.0.1", 1, 0},
        {"slave", "slave", "100", "300", "10001", "10.0.0.1", 0, 0}, /* link down > 10 periods */
        {"slave", "slave", "100", "300", "10000", "10.0.0.1", 1, 0},
        {"slave", "slave", "100", "300", "0", "?", 0, 0},  /* no INFO from it yet: not promoted */
        {"slave", "master", "100", "300", "0", "?", 1, 1}, /* being promoted, or demoted */
        {"slave,promoted", "master", "100", "300", "0", "?", 1, 1},
    };
    size_t n = sizeof cases / sizeof cases[0];
    redisReply *list = th_rep_arr(0);
    list->element = calloc(n, sizeof *list->element);
    assert_non_null(list->element);
    list->elements = n;
    for (size_t i = 0; i < n; i++)
        list->element[i] = replica_rep(7000 + (int)i, cases[i].flags, cases[i].role, cases[i].prio,
                                       cases[i].ping, cases[i].link_down, cases[i].master_host);
    answer a;
    memset(&a, 0, sizeof a);
    a.down_after_ms = 1000;
    assert_int_equal(rconn__sentinel_parse_replicas(list, &a), 0);
    assert_int_equal(a.have_replicas, 1);
    assert_int_equal(a.nreplicas, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(a.replicas[i].port, 7000 + (int)i);
        assert_string_equal(a.replicas[i].host, "10.0.0.2");
        assert_int_equal(a.replicas[i].promotable, cases[i].promotable);
        assert_int_equal(a.replicas[i].role_master, cases[i].role_master);
    }
    freeReplyObject(list);
    /* an error reply: no list */
    redisReply *e = th_rep_new(REDIS_REPLY_ERROR);
    assert_int_equal(rconn__sentinel_parse_replicas(e, &a), -1);
    assert_int_equal(a.have_replicas, 0);
    freeReplyObject(e);
}

static void add_replica(answer *a, int port, int promotable, int role_master) {
    struct rconn__sentinel_replica *r = &a->replicas[a->nreplicas++];
    snprintf(r->host, sizeof r->host, "10.0.0.2");
    r->port = port;
    r->promotable = promotable;
    r->role_master = role_master;
    a->have_replicas = 1;
}

static void set_master(answer *a, int port) {
    memset(a, 0, sizeof *a);
    snprintf(a->host, sizeof a->host, "10.0.0.1");
    a->port = port;
}

static void test_promotable_union_over_sentinels(void **state) {
    (void)state;
    static answer as[3];
    unsigned k = 99;
    /* A lists 7001 up and 7002 down; B lists 7002 up: B could promote it, so it counts */
    set_master(&as[0], 6379);
    add_replica(&as[0], 7001, 1, 0);
    add_replica(&as[0], 7002, 0, 0);
    set_master(&as[1], 6379);
    add_replica(&as[1], 7001, 1, 0);
    add_replica(&as[1], 7002, 1, 0);
    /* C names another master (it missed or ran ahead of a switch): its list is not this
     * master's */
    set_master(&as[2], 6380);
    add_replica(&as[2], 7003, 1, 0);
    assert_int_equal(rconn__sentinel_promotable(as, 3, 0, NULL, 0, &k), 0);
    assert_int_equal(k, 2);
    assert_int_equal(rconn__sentinel_promotable(as, 3, 2, NULL, 0, &k), 0);
    assert_int_equal(k, 1);
    /* every Sentinel sees 7002 down: not counted */
    as[1].replicas[1].promotable = 0;
    assert_int_equal(rconn__sentinel_promotable(as, 2, 0, NULL, 0, &k), 0);
    assert_int_equal(k, 1);
    /* no answer for the master listed its replicas */
    as[0].have_replicas = as[1].have_replicas = 0;
    assert_int_equal(rconn__sentinel_promotable(as, 3, 0, NULL, 0, &k), -1);
    assert_int_equal(k, 0);
}

static void test_promotable_former_master_left_out_only_while_it_reports_master(void **state) {
    (void)state;
    static answer as[1];
    struct rconn__sentinel_addr demoted = {"10.0.0.2", 7000};
    unsigned k = 0;
    set_master(&as[0], 6379);
    add_replica(&as[0], 7000, 1, 1); /* the former master, not yet turned into a replica */
    add_replica(&as[0], 7001, 1, 0);
    add_replica(&as[0], 7002, 1, 1); /* reports master and was never ours: being promoted */
    assert_int_equal(rconn__sentinel_promotable(as, 1, 0, &demoted, 1, &k), 0);
    assert_int_equal(k, 2);
    assert_int_equal(rconn__sentinel_promotable(as, 1, 0, NULL, 0, &k), 0);
    assert_int_equal(k, 3);
    as[0].replicas[0].role_master = 0; /* now a replica: WAIT can reach it, it counts */
    assert_int_equal(rconn__sentinel_promotable(as, 1, 0, &demoted, 1, &k), 0);
    assert_int_equal(k, 3);
}

static void test_event_judged(void **state) {
    (void)state;
    static const struct {
        const char *channel, *msg;
        int want;
    } cases[] = {
        {"+switch-master", "mymaster 10.0.0.1 6379 10.0.0.2 7001", 3},
        {"+switch-master", "other 10.0.0.1 6379 10.0.0.2 7001", 0},
        {"+switch-master", "mymaster2 10.0.0.1 6379 10.0.0.2 7001", 0},
        {"+try-failover", "master mymaster 10.0.0.1 6379", 2},
        {"+odown", "master mymaster 10.0.0.1 6379 #quorum 2/2", 2},
        {"+elected-leader", "master mymaster 10.0.0.1 6379", 2},
        {"+failover-state-select-slave", "master mymaster 10.0.0.1 6379", 2},
        {"+selected-slave", "slave 10.0.0.2:7001 10.0.0.2 7001 @ mymaster 10.0.0.1 6379", 2},
        {"+promoted-slave", "slave 10.0.0.2:7001 10.0.0.2 7001 @ mymaster 10.0.0.1 6379", 2},
        {"+vote-for-leader", "6f1e4b 12", 2}, /* names no master: taken as ours */
        {"+new-epoch", "12", 2},
        {"+try-failover", "master other 10.0.0.1 6379", 0},
        {"+try-failover", "master mymaster2 10.0.0.1 6379", 0},
        {"+sdown", "slave 10.0.0.2:7001 10.0.0.2 7001 @ mymaster 10.0.0.1 6379", 1},
        {"-sdown", "slave 10.0.0.2:7001 10.0.0.2 7001 @ mymaster 10.0.0.1 6379", 1},
        {"+slave", "slave 10.0.0.2:7002 10.0.0.2 7002 @ mymaster 10.0.0.1 6379", 1},
        {"+convert-to-slave", "slave 10.0.0.1:6379 10.0.0.1 6379 @ mymaster 10.0.0.2 7001", 1},
        {"+failover-end", "master mymaster 10.0.0.1 6379", 1},
        {"+sdown", "slave 10.0.0.2:7001 10.0.0.2 7001 @ other 10.0.0.1 6379", 0},
        {"+sdown", "sentinel 10.0.0.9:26379 10.0.0.9 26379 @ mymaster 10.0.0.1 6379", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got =
            rconn__sentinel_event("mymaster", cases[i].channel, cases[i].msg, strlen(cases[i].msg));
        if (got != cases[i].want)
            fail_msg("%s \"%s\": %d, want %d", cases[i].channel, cases[i].msg, got, cases[i].want);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_master_flags_and_epoch),
        cmocka_unit_test(test_parse_replicas_promotable_by_sentinels_rules),
        cmocka_unit_test(test_promotable_union_over_sentinels),
        cmocka_unit_test(test_promotable_former_master_left_out_only_while_it_reports_master),
        cmocka_unit_test(test_event_judged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
