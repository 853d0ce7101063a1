/* test_lock_queue.c - the in-process queue per key of the Redis backends (lock_queue.c).
 *
 * No Redis: the queue is pure in-process state. These tests pin down that one
 * thread at a time gets a key, that the others sleep until a release or the
 * holder's deadline, that several keys are taken all at once or not at all
 * (so opposite orders cannot deadlock), that a stale token changes nothing,
 * and, for reentrant leases, that the owner's threads join its entry instead
 * of queueing behind it while other owners wait for the last local hold.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "lock/lock_impl.h"

#define TOK_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TOK_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static int queue_setup(void **state) {
    int err = -100;
    *state = lock__queue_new(&err);
    return *state != NULL && err == LOCK_OK ? 0 : -1;
}

static int queue_teardown(void **state) {
    lock__queue_free(*state);
    *state = NULL;
    return 0;
}

static void test_lock_queue_enter_held_key_busy_until_release(void **state) {
    struct lock__queue *q = *state;
    const char *k[] = {"q:one"};
    int64_t now = rconn_now_ms();
    assert_int_equal(lock__queue_enter(q, k, 1, now), LOCK_OK);
    /* contending: nobody else enters, even with a budget */
    assert_int_equal(lock__queue_enter(q, k, 1, now), LOCK_ERR_BUSY);
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms() + 30), LOCK_ERR_BUSY);
    lock__queue_hold(q, k, 1, TOK_A, rconn_now_ms() + 60000);
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_ERR_BUSY);
    lock__queue_release(q, "q:one", TOK_B); /* a stale token: nothing */
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_ERR_BUSY);
    lock__queue_release(q, "q:one", TOK_A);
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_OK);
    lock__queue_leave(q, k, 1);
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_OK);
    lock__queue_leave(q, k, 1);
}

static void test_lock_queue_holder_deadline_passed_taken_over(void **state) {
    struct lock__queue *q = *state;
    const char *k[] = {"q:expiry"};
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_OK);
    int64_t until = rconn_now_ms() + 40;
    lock__queue_hold(q, k, 1, TOK_A, until);
    /* a waiter sleeps until the holder's deadline, then takes over */
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms() + 10000), LOCK_OK);
    assert_true(rconn_now_ms() >= until);
    /* the old holder's late release and extend change nothing */
    lock__queue_release(q, "q:expiry", TOK_A);
    lock__queue_extend(q, "q:expiry", TOK_A, rconn_now_ms() + 60000);
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_ERR_BUSY);
    lock__queue_hold(q, k, 1, TOK_B, rconn_now_ms() + 60000);
    lock__queue_extend(q, "q:expiry", TOK_B, rconn_now_ms() + 70000);
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_ERR_BUSY);
    lock__queue_release(q, "q:expiry", TOK_B);
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_OK);
    lock__queue_leave(q, k, 1);
}

static void test_lock_queue_multi_one_busy_none_taken(void **state) {
    struct lock__queue *q = *state;
    const char *b[] = {"q:m:b"};
    const char *abc[] = {"q:m:a", "q:m:b", "q:m:c"};
    const char *a[] = {"q:m:a"}, *c[] = {"q:m:c"};
    assert_int_equal(lock__queue_enter(q, b, 1, rconn_now_ms()), LOCK_OK);
    assert_int_equal(lock__queue_enter(q, abc, 3, rconn_now_ms() + 20), LOCK_ERR_BUSY);
    /* a and c were not kept */
    assert_int_equal(lock__queue_enter(q, a, 1, rconn_now_ms()), LOCK_OK);
    assert_int_equal(lock__queue_enter(q, c, 1, rconn_now_ms()), LOCK_OK);
    lock__queue_leave(q, a, 1);
    lock__queue_leave(q, c, 1);
    lock__queue_leave(q, b, 1);
    assert_int_equal(lock__queue_enter(q, abc, 3, rconn_now_ms()), LOCK_OK);
    assert_int_equal(lock__queue_enter(q, c, 1, rconn_now_ms()), LOCK_ERR_BUSY);
    lock__queue_leave(q, abc, 3);
}

struct waker {
    struct lock__queue *q;
    const char *key;
};

static void *release_soon(void *arg) {
    struct waker *w = arg;
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    lock__queue_release(w->q, w->key, TOK_A);
    return NULL;
}

static void test_lock_queue_waiter_woken_by_release(void **state) {
    struct lock__queue *q = *state;
    const char *k[] = {"q:wake"};
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_OK);
    lock__queue_hold(q, k, 1, TOK_A, rconn_now_ms() + 600000);
    struct waker w = {q, "q:wake"};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, release_soon, &w), 0);
    int rc = lock__queue_enter(q, k, 1, rconn_now_ms() + 60000);
    pthread_join(th, NULL);
    assert_int_equal(rc, LOCK_OK);
    lock__queue_leave(q, k, 1);
}

#define Q_ITERS 300

struct qracer {
    struct lock__queue *q;
    const char *keys[3];
    size_t n;
    int idx[3];
    atomic_int *holders;
    atomic_int *overlaps;
    atomic_int *failures;
};

static void *qracer_main(void *arg) {
    struct qracer *r = arg;
    for (int i = 0; i < Q_ITERS; i++) {
        if (lock__queue_enter(r->q, r->keys, r->n, rconn_now_ms() + 30000) != LOCK_OK) {
            atomic_fetch_add(r->failures, 1);
            continue;
        }
        for (size_t k = 0; k < r->n; k++)
            if (atomic_fetch_add(&r->holders[r->idx[k]], 1) != 0) atomic_fetch_add(r->overlaps, 1);
        for (size_t k = 0; k < r->n; k++)
            atomic_fetch_sub(&r->holders[r->idx[k]], 1);
        lock__queue_leave(r->q, r->keys, r->n);
    }
    return NULL;
}

/* Opposite orders, partial overlaps: everyone finishes, nobody shares a key. */
static void test_lock_queue_multi_opposite_orders_no_deadlock(void **state) {
    struct lock__queue *q = *state;
    atomic_int holders[3], overlaps, failures;
    for (int i = 0; i < 3; i++)
        atomic_init(&holders[i], 0);
    atomic_init(&overlaps, 0);
    atomic_init(&failures, 0);
    struct qracer rs[4] = {
        {q, {"q:r:x", "q:r:y", "q:r:z"}, 3, {0, 1, 2}, holders, &overlaps, &failures},
        {q, {"q:r:z", "q:r:y", "q:r:x"}, 3, {2, 1, 0}, holders, &overlaps, &failures},
        {q, {"q:r:y", "q:r:x"}, 2, {1, 0}, holders, &overlaps, &failures},
        {q, {"q:r:z"}, 1, {2}, holders, &overlaps, &failures},
    };
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, qracer_main, &rs[i]), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&failures), 0);
    assert_int_equal(atomic_load(&overlaps), 0);
}

/* Many distinct keys come and go: entries are freed (valgrind/ASan see no leak either way, so
 * this mostly checks that reaping expired entries does not break anything). */
static void test_lock_queue_many_keys_expired_entries_reaped(void **state) {
    struct lock__queue *q = *state;
    char names[200][24];
    for (int i = 0; i < 200; i++) {
        snprintf(names[i], sizeof names[i], "q:many:%d", i);
        const char *k[] = {names[i]};
        assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_OK);
        lock__queue_hold(q, k, 1, TOK_A, rconn_now_ms() - 1); /* already expired, never released */
    }
    for (int i = 0; i < 200; i++) {
        const char *k[] = {names[i]};
        assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_OK);
        lock__queue_leave(q, k, 1);
    }
}

/* ---- reentrant leases ---- */

/* The owner's second acquisition joins the HELD entry at once (nothing changes in the queue);
 * another owner waits. Each local hold is counted: the entry frees with the last one. */
static void test_lock_queue_owned_same_owner_joins_other_waits_holds_counted(void **state) {
    struct lock__queue *q = *state;
    const char *key = "q:own";
    const char *k[] = {key};
    int joined = -1;
    assert_int_equal(lock__queue_enter_owned(q, key, "A", rconn_now_ms(), &joined), LOCK_OK);
    assert_int_equal(joined, 0); /* contending: it goes to Redis for a new lease */
    lock__queue_hold_owned(q, key, TOK_A, "A", rconn_now_ms() + 600000, joined);
    assert_int_equal(lock__queue_enter_owned(q, key, "A", rconn_now_ms(), &joined), LOCK_OK);
    assert_int_equal(joined, 1);
    lock__queue_hold_owned(q, key, TOK_A, "A", rconn_now_ms() + 600000, joined);
    assert_int_equal(lock__queue_enter_owned(q, key, "B", rconn_now_ms() + 20, &joined),
                     LOCK_ERR_BUSY);
    assert_int_equal(joined, 0);
    assert_int_equal(lock__queue_enter(q, k, 1, rconn_now_ms()), LOCK_ERR_BUSY); /* plain */
    lock__queue_drop_hold(q, key, TOK_B); /* a stale token: nothing */
    lock__queue_drop_hold(q, key, TOK_A);
    assert_int_equal(lock__queue_enter_owned(q, key, "B", rconn_now_ms(), &joined),
                     LOCK_ERR_BUSY); /* one local hold left */
    lock__queue_drop_hold(q, key, TOK_A);
    assert_int_equal(lock__queue_enter_owned(q, key, "B", rconn_now_ms(), &joined), LOCK_OK);
    assert_int_equal(joined, 0);
    lock__queue_leave(q, k, 1);
}

struct owned_enterer {
    struct lock__queue *q;
    const char *owner;
    int joined;
    int rc;
};

static void *enter_owned_main(void *arg) {
    struct owned_enterer *x = arg;
    x->rc =
        lock__queue_enter_owned(x->q, "q:own:wake", x->owner, rconn_now_ms() + 60000, &x->joined);
    return NULL;
}

/* A thread of owner A that waits while another thread of A contends is woken when the entry
 * becomes A's, and joins it; it does not wait for the lease to end. */
static void test_lock_queue_owned_waiter_of_same_owner_joins_when_held(void **state) {
    struct lock__queue *q = *state;
    const char *key = "q:own:wake";
    int joined = -1;
    assert_int_equal(lock__queue_enter_owned(q, key, "A", rconn_now_ms(), &joined), LOCK_OK);
    assert_int_equal(joined, 0);
    struct owned_enterer x = {q, "A", -1, -100};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, enter_owned_main, &x), 0);
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int64_t t0 = rconn_now_ms();
    lock__queue_hold_owned(q, key, TOK_A, "A", rconn_now_ms() + 600000, joined);
    pthread_join(th, NULL);
    assert_int_equal(x.rc, LOCK_OK);
    assert_int_equal(x.joined, 1);
    assert_true(rconn_now_ms() - t0 < 30000);
    lock__queue_release(q, key, TOK_A);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_queue_enter_held_key_busy_until_release),
        cmocka_unit_test(test_lock_queue_holder_deadline_passed_taken_over),
        cmocka_unit_test(test_lock_queue_multi_one_busy_none_taken),
        cmocka_unit_test(test_lock_queue_waiter_woken_by_release),
        cmocka_unit_test(test_lock_queue_multi_opposite_orders_no_deadlock),
        cmocka_unit_test(test_lock_queue_many_keys_expired_entries_reaped),
        cmocka_unit_test(test_lock_queue_owned_same_owner_joins_other_waits_holds_counted),
        cmocka_unit_test(test_lock_queue_owned_waiter_of_same_owner_joins_when_held),
    };
    return cmocka_run_group_tests_name("lock_queue", tests, queue_setup, queue_teardown);
}
