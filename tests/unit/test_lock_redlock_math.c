/* test_lock_redlock_math.c - the Redlock arithmetic of lock_dist.c, with a fake clock.
 *
 * lock__redlock_* are pure: time comes in as arguments, so every case below
 * is a fixed table, with no clock and no sleep. A small simulation replays
 * rounds whose answers arrive at chosen instants.
 */
#include <stdint.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "lock/lock_impl.h"

static void test_lock_redlock_quorum_majority(void **state) {
    (void)state;
    static const size_t n[] = {1, 2, 3, 4, 5, 7, 9, 15};
    static const size_t q[] = {1, 2, 2, 3, 3, 4, 5, 8};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        assert_int_equal(lock__redlock_quorum(n[i]), q[i]);
        /* a quorum is more than half, and two quorums always share a node */
        assert_true(2 * lock__redlock_quorum(n[i]) > n[i]);
    }
}

static void test_lock_redlock_drift_one_percent_plus_2ms(void **state) {
    (void)state;
    assert_int_equal(lock__redlock_drift_ms(0), 2);
    assert_int_equal(lock__redlock_drift_ms(99), 2);
    assert_int_equal(lock__redlock_drift_ms(100), 3);
    assert_int_equal(lock__redlock_drift_ms(10000), 102);
    assert_int_equal(lock__redlock_drift_ms(UINT32_MAX), 42949672 + 2);
}

static void test_lock_redlock_validity_fake_clock(void **state) {
    (void)state;
    const int64_t t0 = 1000000; /* any instant: only differences matter */
    /* no time spent: ttl - drift */
    assert_int_equal(lock__redlock_validity_ms(10000, t0, t0, 102), 9898);
    /* 900 ms spent */
    assert_int_equal(lock__redlock_validity_ms(10000, t0, t0 + 900, 102), 8998);
    /* exactly used up, then overdrawn */
    assert_int_equal(lock__redlock_validity_ms(10000, t0, t0 + 9898, 102), 0);
    assert_int_equal(lock__redlock_validity_ms(10000, t0, t0 + 20000, 102), -10102);
    /* a clock that went backwards counts as no time */
    assert_int_equal(lock__redlock_validity_ms(10000, t0, t0 - 50, 102), 9898);
    /* single-instance semantics: no drift */
    assert_int_equal(lock__redlock_validity_ms(50, t0, t0 + 49, 0), 1);
    assert_int_equal(lock__redlock_validity_ms(50, t0, t0 + 50, 0), 0);
    /* the largest ttl does not overflow */
    assert_true(lock__redlock_validity_ms(UINT32_MAX, 0, INT64_MAX / 2, 0) < 0);
    assert_int_equal(lock__redlock_validity_ms(UINT32_MAX, 0, 0, 0), (int64_t)UINT32_MAX);
}

static void test_lock_redlock_node_timeout_tenth_of_ttl_bounded(void **state) {
    (void)state;
    assert_int_equal(lock__redlock_node_timeout_ms(10000, 2000), 1000); /* ttl/10 */
    assert_int_equal(lock__redlock_node_timeout_ms(10000, 200), 200);   /* the client's timeout */
    assert_int_equal(lock__redlock_node_timeout_ms(30, 2000), 5);       /* at least 5 ms */
    assert_int_equal(lock__redlock_node_timeout_ms(0, 2000), 5);
    assert_int_equal(lock__redlock_node_timeout_ms(30, 3), 3); /* ... unless the client says less */
    assert_int_equal(lock__redlock_node_timeout_ms(UINT32_MAX, 1000), 1000);
}

struct verdict_case {
    size_t n, granted, failed;
    int64_t validity;
    int want;
};

static void test_lock_redlock_verdict_table(void **state) {
    (void)state;
    static const struct verdict_case cases[] = {
        /* one server */
        {1, 1, 0, 10, LOCK_OK},
        {1, 0, 0, 10, LOCK_ERR_BUSY},
        {1, 0, 1, 10, LOCK_ERR_BACKEND},
        {1, 1, 0, 0, LOCK_ERR_BUSY}, /* granted, but the round outlasted the lease */
        /* three masters */
        {3, 3, 0, 10, LOCK_OK},
        {3, 2, 1, 10, LOCK_OK}, /* one down: still a majority */
        {3, 2, 0, 10, LOCK_OK}, /* one busy (a stale grant elsewhere) */
        {3, 2, 1, -1, LOCK_ERR_BUSY},
        {3, 1, 0, 10, LOCK_ERR_BUSY},    /* two busy: held elsewhere */
        {3, 1, 1, 10, LOCK_ERR_BUSY},    /* one busy, one down: a majority was reachable */
        {3, 1, 2, 10, LOCK_ERR_BACKEND}, /* two down: no majority can answer */
        {3, 0, 2, 10, LOCK_ERR_BACKEND},
        {3, 0, 3, 10, LOCK_ERR_BACKEND},
        {3, 0, 0, 10, LOCK_ERR_BUSY},
        /* five masters */
        {5, 3, 2, 10, LOCK_OK},
        {5, 2, 2, 10, LOCK_ERR_BUSY},
        {5, 2, 3, 10, LOCK_ERR_BACKEND},
        {5, 0, 3, 10, LOCK_ERR_BACKEND},
        {5, 3, 0, 0, LOCK_ERR_BUSY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct verdict_case *c = &cases[i];
        int got = lock__redlock_verdict(c->n, c->granted, c->failed, c->validity);
        if (got != c->want)
            print_error("case %zu: n=%zu granted=%zu failed=%zu validity=%lld\n", i, c->n,
                        c->granted, c->failed, (long long)c->validity);
        assert_int_equal(got, c->want);
    }
}

/* Release and extend: a quorum that answered yes but whose round outlasted the lease is a lapsed
 * lease (LEASE_LOST), not a store failure; BACKEND only when too many nodes failed to answer. */
static void test_lock_redlock_owner_verdict_table(void **state) {
    (void)state;
    static const struct verdict_case cases[] = {
        /* one server */
        {1, 1, 0, 10, LOCK_OK},
        {1, 0, 0, 10, LOCK_ERR_NOT_OWNER},
        {1, 0, 1, 10, LOCK_ERR_BACKEND},
        {1, 1, 0, 0, LOCK_ERR_LEASE_LOST}, /* applied, but the round outlasted the new lease */
        {1, 1, 0, -50, LOCK_ERR_LEASE_LOST},
        {1, 0, 0, -50, LOCK_ERR_NOT_OWNER},
        {1, 0, 1, -50, LOCK_ERR_BACKEND}, /* no answer: the store failed, whatever the time */
        /* three masters */
        {3, 3, 0, 10, LOCK_OK},
        {3, 2, 1, 10, LOCK_OK},
        {3, 3, 0, 0, LOCK_ERR_LEASE_LOST},  /* all applied it, no validity left */
        {3, 2, 1, -1, LOCK_ERR_LEASE_LOST}, /* a majority answered yes, too late */
        {3, 2, 0, -1, LOCK_ERR_LEASE_LOST},
        {3, 1, 1, -1, LOCK_ERR_LEASE_LOST}, /* a majority answered; the time is gone anyway */
        {3, 1, 1, 10, LOCK_ERR_BACKEND},    /* undecided: the silent one may say yes */
        {3, 1, 2, -1, LOCK_ERR_BACKEND},    /* two silent: no majority could answer */
        {3, 0, 2, 10, LOCK_ERR_BACKEND},
        {3, 0, 3, -1, LOCK_ERR_BACKEND},
        {3, 1, 0, 10, LOCK_ERR_NOT_OWNER}, /* two refusals rule a quorum out */
        {3, 0, 1, -1, LOCK_ERR_NOT_OWNER},
        /* five masters */
        {5, 3, 2, 10, LOCK_OK},
        {5, 3, 2, 0, LOCK_ERR_LEASE_LOST},
        {5, 2, 3, 0, LOCK_ERR_BACKEND},
        {5, 2, 2, 10, LOCK_ERR_BACKEND},
        {5, 2, 0, 10, LOCK_ERR_NOT_OWNER},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct verdict_case *c = &cases[i];
        int got = lock__redlock_owner_verdict(c->n, c->granted, c->failed, c->validity);
        if (got != c->want)
            print_error("case %zu: n=%zu yes=%zu failed=%zu validity=%lld: %s\n", i, c->n,
                        c->granted, c->failed, (long long)c->validity, lock_strerror(got));
        assert_int_equal(got, c->want);
    }
}

/* ---- a round replayed on a fake clock ---- */

#define SIM_NODES 5

struct sim_node {
    int answers;       /* 0: down (no answer within the node timeout) */
    int grants;        /* 1: yes; 0: busy */
    int64_t answer_at; /* when its answer arrives, ms after the round starts */
};

/* Returns the verdict of a round that starts at t0 over n nodes, as lock_dist.c computes it:
 * the round ends when the last answer arrives, or at the node timeout for a silent node. */
static int sim_round(const struct sim_node *nodes, size_t n, uint32_t ttl, int timeout_ms,
                     int64_t t0, int64_t *validity_out) {
    int to = lock__redlock_node_timeout_ms(ttl, timeout_ms);
    int64_t end = t0;
    size_t granted = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        int late = !nodes[i].answers || nodes[i].answer_at > to;
        int64_t at = t0 + (late ? to : nodes[i].answer_at);
        if (at > end) end = at;
        if (late)
            failed++;
        else if (nodes[i].grants)
            granted++;
    }
    int64_t v = lock__redlock_validity_ms(ttl, t0, end, lock__redlock_drift_ms(ttl));
    if (validity_out != NULL) *validity_out = v;
    return lock__redlock_verdict(n, granted, failed, v);
}

static void test_lock_redlock_round_simulated_on_fake_clock(void **state) {
    (void)state;
    int64_t v;
    /* five healthy masters answering within 3 ms: validity = 10000 - 3 - 102 */
    struct sim_node fast[SIM_NODES] = {{1, 1, 1}, {1, 1, 2}, {1, 1, 3}, {1, 1, 1}, {1, 1, 2}};
    assert_int_equal(sim_round(fast, SIM_NODES, 10000, 2000, 500, &v), LOCK_OK);
    assert_int_equal(v, 10000 - 3 - 102);

    /* two silent masters cost the node timeout (1000 ms), not the client's 2000 */
    struct sim_node two_down[SIM_NODES] = {{1, 1, 1}, {0, 0, 0}, {1, 1, 3}, {0, 0, 0}, {1, 1, 2}};
    assert_int_equal(sim_round(two_down, SIM_NODES, 10000, 2000, 0, &v), LOCK_OK);
    assert_int_equal(v, 10000 - 1000 - 102);

    /* three silent masters: no majority, whatever the others say */
    struct sim_node three_down[SIM_NODES] = {{1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {1, 1, 2}};
    assert_int_equal(sim_round(three_down, SIM_NODES, 10000, 2000, 0, NULL), LOCK_ERR_BACKEND);

    /* an answer slower than the node timeout counts as a failure */
    struct sim_node slow[SIM_NODES] = {{1, 1, 1}, {1, 1, 1500}, {1, 1, 1600}, {1, 0, 1}, {1, 0, 1}};
    assert_int_equal(sim_round(slow, SIM_NODES, 10000, 2000, 0, NULL), LOCK_ERR_BUSY);

    /* a short lease eaten by answers within the 5 ms node timeout: a majority granted, but
     * 6 - 5 - 2 leaves nothing */
    struct sim_node sluggish[3] = {{1, 1, 4}, {1, 1, 5}, {1, 1, 5}};
    assert_int_equal(sim_round(sluggish, 3, 6, 2000, 0, &v), LOCK_ERR_BUSY);
    assert_true(v <= 0);
    assert_int_equal(sim_round(sluggish, 3, 1000, 2000, 0, &v), LOCK_OK);
    assert_int_equal(v, 1000 - 5 - 12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_redlock_quorum_majority),
        cmocka_unit_test(test_lock_redlock_drift_one_percent_plus_2ms),
        cmocka_unit_test(test_lock_redlock_validity_fake_clock),
        cmocka_unit_test(test_lock_redlock_node_timeout_tenth_of_ttl_bounded),
        cmocka_unit_test(test_lock_redlock_verdict_table),
        cmocka_unit_test(test_lock_redlock_owner_verdict_table),
        cmocka_unit_test(test_lock_redlock_round_simulated_on_fake_clock),
    };
    return cmocka_run_group_tests_name("lock_redlock_math", tests, NULL, NULL);
}
