/* test_market_combine.c - the combiner (market_combine.c) without Redis:
 * two made-up order kinds whose read, decision and commit only take notes,
 * over the in-process lock. What batches the workers make of a queue that
 * mixes kinds, realms and groups; an order refused alone inside a batch
 * while the others commit; budgets that end while queued; stop while
 * queued; the hold kept from one batch to the next and dropped when idle;
 * the policy that takes every order's locks; a kind that caps its batches
 * and chooses its locks again. A gate stops the worker inside
 * a commit, so that what queues behind it is known exactly. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/cmocka_all.h"

#include "market/market_combine.h"

#define ORDERS_MAX 64

/* An order of the made-up kinds: a value, refused when negative. */
struct tally {
    market_queued q;
    const char *realm, *group;
    int value;
    int rc, replayed;
    char why[MARKET_WHY_MAX];
    int answers; /* times answered */
};

/* What the workers did, in order (under mu). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int batch_of[ORDERS_MAX]; /* per order (by value): which batch decided it, -1 none */
    int batches;
    const struct market__kind *batch_kind[ORDERS_MAX];
    size_t batch_n[ORDERS_MAX];
    size_t committed[ORDERS_MAX]; /* per batch: orders its commit wrote */
    uint64_t batch_fence[ORDERS_MAX];
    int64_t batch_ms[ORDERS_MAX]; /* rconn_now_ms() at its read */
    int gate_closed;              /* a commit waits while set */
    int at_gate;                  /* a commit is waiting at the gate */
    int answered;
} note = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static int kind_policy_hold(const market *m) {
    (void)m;
    return MARKET__POLICY_HOLD;
}

static int kind_policy_each(const market *m) {
    (void)m;
    return MARKET__POLICY_EACH;
}

/* HOLD: the group's lock; EACH: a lock per order. */
static int kind_prepare(market_conn *c, market__cbatch *cb) {
    (void)c;
    if (cb->policy == MARKET__POLICY_HOLD) {
        market__cbatch_lock(cb, "tally", cb->group[0] ? cb->group : "-");
        return MARKET_OK;
    }
    for (size_t i = 0; i < cb->n_open; i++) {
        char id[16];
        snprintf(id, sizeof id, "v%d", ((struct tally *)cb->req[i]->order)->value);
        market__cbatch_lock(cb, "tally", id);
    }
    return MARKET_OK;
}

static int kind_read(market_conn *c, const market__held *held, market__cbatch *cb) {
    (void)c;
    pthread_mutex_lock(&note.mu);
    int b = note.batches;
    note.batch_fence[b] = held->n ? held->fence_v[0] : 0;
    note.batch_ms[b] = rconn_now_ms();
    note.batch_kind[b] = cb->kind;
    note.batch_n[b] = cb->n_open;
    pthread_mutex_unlock(&note.mu);
    return MARKET_OK;
}

/* Every order in queue order: refused when its value is negative, busy past
 * its budget, else done. */
static size_t kind_decide(market__cbatch *cb) {
    size_t writes = 0;
    for (size_t i = 0; i < cb->n_open; i++) {
        struct tally *t = cb->req[i]->order;
        if (cb->now_ms >= t->q.deadline_ms)
            t->rc = MARKET_ERR_BUSY;
        else if (t->value < 0)
            t->rc = MARKET_ERR_INVALID;
        else
            t->rc = MARKET_OK, writes++;
    }
    return writes;
}

static int kind_commit(market_conn *c, const market__held *held, market__cbatch *cb) {
    (void)c;
    (void)held;
    pthread_mutex_lock(&note.mu);
    int b = note.batches++;
    for (size_t i = 0; i < cb->n_open; i++) {
        struct tally *t = cb->req[i]->order;
        note.batch_of[t->value < 0 ? -t->value : t->value] = b;
        note.committed[b] += t->rc == MARKET_OK;
    }
    note.at_gate = note.gate_closed;
    pthread_cond_broadcast(&note.cv);
    while (note.gate_closed) pthread_cond_wait(&note.cv, &note.mu);
    note.at_gate = 0;
    pthread_mutex_unlock(&note.mu);
    return MARKET_OK;
}

static void kind_reset(market_queued *q) { (void)q; }

static void kind_answer(market *m, market_queued *q);

static const market__order_ops tally_ops = {kind_reset, kind_answer};

static void kind_answer(market *m, market_queued *q) {
    (void)m;
    struct tally *t = q->order;
    pthread_mutex_lock(&note.mu);
    t->answers++;
    note.answered++;
    pthread_cond_broadcast(&note.cv);
    pthread_mutex_unlock(&note.mu);
}

static const struct market__kind held_kind = {
    .name = "tally (held)", .slot = 0, .policy = kind_policy_hold,
    .state_size = sizeof(market__kstate), .prepare = kind_prepare,
    .read = kind_read, .decide = kind_decide, .commit = kind_commit};

static const struct market__kind each_kind = {
    .name = "tally (each)", .slot = 1, .policy = kind_policy_each,
    .state_size = sizeof(market__kstate), .prepare = kind_prepare,
    .read = kind_read, .decide = kind_decide, .commit = kind_commit};

/* A kind whose locks follow from a read (as buying across sellers): a
 * batch of one order, whose read under the locks finds, the first
 * choosy_misses times, that they no longer fit. */
static int choosy_misses, choosy_prepared, choosy_read;

static size_t choosy_most(const market *m, int policy) {
    (void)m;
    (void)policy;
    return 1;
}

static int choosy_prepare(market_conn *c, market__cbatch *cb) {
    pthread_mutex_lock(&note.mu);
    choosy_prepared++;
    pthread_mutex_unlock(&note.mu);
    return kind_prepare(c, cb);
}

static int choosy_read_fn(market_conn *c, const market__held *held, market__cbatch *cb) {
    pthread_mutex_lock(&note.mu);
    int again = choosy_read++ < choosy_misses;
    pthread_mutex_unlock(&note.mu);
    return again ? MARKET__CHOOSE_AGAIN : kind_read(c, held, cb);
}

static const struct market__kind choosy_kind = {
    .name = "tally (choosy)", .slot = 2, .policy = kind_policy_each, .most = choosy_most,
    .state_size = sizeof(market__kstate), .prepare = choosy_prepare,
    .read = choosy_read_fn, .decide = kind_decide, .commit = kind_commit};

struct fx {
    lock_client *lock;
    market *m;
    market__combiner *q;
    struct tally t[ORDERS_MAX];
};

static int setup_with(void **state, uint32_t budget_ms) {
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    int err;
    f->lock = lock_local_new(&err);
    assert_non_null(f->lock);
    /* a store nobody listens on: the made-up kinds never reach it */
    market_config cfg = {.redis_timeout_ms = 200, .lock_ttl_ms = 10000,
                         .acquire_timeout_ms = budget_ms, .workers = 1};
    assert_int_equal(rconn_addr_parse("redis://127.0.0.1:1", &cfg.redis), RCONN_OK);
    f->m = market_new(&cfg, f->lock, &err);
    assert_non_null(f->m);
    f->q = market__combine_new(f->m, &tally_ops);
    assert_non_null(f->q);
    pthread_mutex_lock(&note.mu);
    memset(note.batch_of, -1, sizeof note.batch_of);
    note.batches = note.answered = note.gate_closed = note.at_gate = 0;
    memset(note.committed, 0, sizeof note.committed);
    pthread_mutex_unlock(&note.mu);
    *state = f;
    return 0;
}

static int setup(void **state) { return setup_with(state, 30000); }

static int setup_short_budget(void **state) { return setup_with(state, 300); }

static int teardown(void **state) {
    struct fx *f = *state;
    pthread_mutex_lock(&note.mu);
    note.gate_closed = 0;
    pthread_cond_broadcast(&note.cv);
    pthread_mutex_unlock(&note.mu);
    market__combine_free(f->q);
    market_free(f->m);
    lock_free(f->lock);
    free(f);
    return 0;
}

/* Queues order number v (its value, negated when refuse) of kind k. */
static void submit(struct fx *f, const struct market__kind *k, int v, const char *realm,
                   const char *group, int refuse) {
    struct tally *t = &f->t[v];
    *t = (struct tally){.realm = realm, .group = group, .value = refuse ? -v : v};
    t->q = (market_queued){.kind = k, .order = t, .realm = realm, .group = group, .rc = &t->rc,
                           .why = t->why, .replayed = &t->replayed};
    assert_int_equal(market__combine_submit(f->q, &t->q), MARKET_OK);
}

static void gate_close(void) {
    pthread_mutex_lock(&note.mu);
    note.gate_closed = 1;
    pthread_mutex_unlock(&note.mu);
}

/* Waits until a commit waits at the closed gate. */
static void gate_wait(void) {
    pthread_mutex_lock(&note.mu);
    while (!note.at_gate) pthread_cond_wait(&note.cv, &note.mu);
    pthread_mutex_unlock(&note.mu);
}

static void gate_open(void) {
    pthread_mutex_lock(&note.mu);
    note.gate_closed = 0;
    pthread_cond_broadcast(&note.cv);
    pthread_mutex_unlock(&note.mu);
}

static void answered_wait(int n) {
    pthread_mutex_lock(&note.mu);
    while (note.answered < n) pthread_cond_wait(&note.cv, &note.mu);
    pthread_mutex_unlock(&note.mu);
}

/* Behind a batch stopped at the gate, a queue mixing two kinds, two realms
 * and two groups: each batch is of one kind, realm and group, takes every
 * queued order of it in the order they came, and starts with the oldest
 * order left. */
static void test_batches_of_one_kind_realm_group(void **state) {
    struct fx *f = *state;
    gate_close();
    submit(f, &held_kind, 1, "r", "", 0);
    gate_wait();
    submit(f, &held_kind, 2, "r", "", 0);
    submit(f, &each_kind, 3, "r", "", 0);
    submit(f, &held_kind, 4, "r", "", 0);
    submit(f, &held_kind, 5, "r", "g", 0);
    submit(f, &held_kind, 6, "s", "", 0);
    submit(f, &each_kind, 7, "r", "", 0);
    gate_open();
    answered_wait(7);
    static const int want[] = {-1, 0, 1, 2, 1, 3, 4, 2}; /* the batch of each order */
    for (int v = 1; v <= 7; v++) {
        assert_int_equal(note.batch_of[v], want[v]);
        assert_int_equal(f->t[v].rc, MARKET_OK);
        assert_int_equal(f->t[v].answers, 1);
    }
    assert_int_equal(note.batches, 5);
    assert_ptr_equal(note.batch_kind[2], &each_kind);
    assert_int_equal(note.batch_n[1], 2);
    assert_int_equal(note.batch_n[2], 2);
}

/* An order refused inside a batch is refused alone: the others commit. */
static void test_one_refused_others_commit(void **state) {
    struct fx *f = *state;
    gate_close();
    submit(f, &held_kind, 1, "r", "", 0);
    gate_wait();
    submit(f, &held_kind, 2, "r", "", 0);
    submit(f, &held_kind, 3, "r", "", 1);
    submit(f, &held_kind, 4, "r", "", 0);
    gate_open();
    answered_wait(4);
    assert_int_equal(note.batches, 2);
    assert_int_equal(note.committed[1], 2);
    assert_int_equal(f->t[2].rc, MARKET_OK);
    assert_int_equal(f->t[3].rc, MARKET_ERR_INVALID);
    assert_int_equal(f->t[4].rc, MARKET_OK);
}

/* An order whose budget ends while it is queued is answered busy and never
 * decided. */
static void test_budget_spent_in_queue_is_busy(void **state) {
    struct fx *f = *state;
    gate_close();
    submit(f, &held_kind, 1, "r", "", 0);
    gate_wait();
    submit(f, &held_kind, 2, "r", "", 0);
    while (rconn_now_ms() <= f->t[2].q.deadline_ms) { /* its budget ends in the queue */
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    gate_open();
    answered_wait(2);
    assert_int_equal(f->t[1].rc, MARKET_OK);
    assert_int_equal(f->t[2].rc, MARKET_ERR_BUSY);
    assert_int_equal(note.batch_of[2], -1);
    assert_int_equal(note.batches, 1);
}

static void *stop_main(void *arg) {
    market__combine_stop(arg);
    return NULL;
}

/* Stop while orders are queued: every one is served first, then later
 * submissions are refused busy. */
static void test_stop_serves_queued_then_refuses(void **state) {
    struct fx *f = *state;
    gate_close();
    submit(f, &held_kind, 1, "r", "", 0);
    gate_wait();
    submit(f, &held_kind, 2, "r", "", 0);
    submit(f, &each_kind, 3, "s", "", 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stop_main, f->q), 0);
    gate_open();
    assert_int_equal(pthread_join(th, NULL), 0);
    for (int v = 1; v <= 3; v++) {
        assert_int_equal(f->t[v].rc, MARKET_OK);
        assert_int_equal(f->t[v].answers, 1);
    }
    struct tally late = {.value = 9};
    late.q = (market_queued){.kind = &held_kind, .order = &late, .realm = "r", .group = "",
                             .rc = &late.rc, .why = late.why, .replayed = &late.replayed};
    assert_int_equal(market__combine_submit(f->q, &late.q), MARKET_ERR_BUSY);
    assert_int_equal(late.answers, 0);
}

/* The group's lock is kept from one batch to the next while its orders keep
 * coming (one fence for both), dropped for another group's batch, and
 * released once the queue has stayed empty a moment. */
static void test_hold_kept_then_dropped(void **state) {
    struct fx *f = *state;
    gate_close();
    submit(f, &held_kind, 1, "r", "", 0);
    gate_wait();
    submit(f, &held_kind, 2, "r", "", 0);
    submit(f, &held_kind, 3, "r", "g", 0);
    gate_open();
    answered_wait(3);
    assert_int_equal(note.batches, 3);
    /* kept: unless the second batch came later than a hold may last (a very busy machine) */
    if (note.batch_ms[1] - note.batch_ms[0] < MARKET__HOLD_MAX_MS)
        assert_true(note.batch_fence[1] == note.batch_fence[0]);
    assert_true(note.batch_fence[2] > note.batch_fence[1]); /* another group: another lock */
    /* idle now: the lock is released for other processes (wait for the worker to drop it) */
    int err;
    lock_handle h;
    char key[MARKET__LOCK_KEY_MAX];
    market__lock_key(key, "tally", "r", "g");
    assert_int_equal(lock_acquire(f->lock, key, 1000, 30000, &h), LOCK_OK);
    assert_int_equal(lock_release(f->lock, &h), LOCK_OK);
    (void)err;
}

/* MARKET__POLICY_EACH takes every order's lock for its batch and gives them
 * back after it: held while the batch commits, free once it is answered. */
static void test_each_policy_takes_every_lock(void **state) {
    struct fx *f = *state;
    gate_close();
    submit(f, &each_kind, 1, "r", "", 0);
    gate_wait();
    submit(f, &each_kind, 2, "r", "", 0);
    submit(f, &each_kind, 3, "r", "", 0);
    lock_handle h;
    char key[MARKET__LOCK_KEY_MAX];
    market__lock_key(key, "tally", "r", "v1");
    assert_int_equal(lock_acquire(f->lock, key, 1000, 0, &h), LOCK_ERR_BUSY); /* held now */
    gate_open();
    answered_wait(3);
    assert_int_equal(note.batches, 2);
    assert_int_equal(note.batch_n[1], 2);
    static const char *const ids[] = {"v1", "v2", "v3"};
    for (size_t i = 0; i < 3; i++) { /* released (by the releaser thread: waited for) */
        market__lock_key(key, "tally", "r", ids[i]);
        assert_int_equal(lock_acquire(f->lock, key, 1000, 30000, &h), LOCK_OK);
        assert_int_equal(lock_release(f->lock, &h), LOCK_OK);
    }
}

/* A kind that caps its batches at one order gets batches of one; one whose
 * read says its locks no longer fit is prepared (chooses) again, under the
 * same batch, until they do; when they never do, its orders are answered
 * MARKET_ERR_CONFLICT once the budget is spent, never left waiting. */
static void test_choose_again(void **state) {
    struct fx *f = *state;
    choosy_misses = 2;
    choosy_prepared = choosy_read = 0;
    gate_close();
    submit(f, &choosy_kind, 1, "r", "", 0);
    gate_wait();
    submit(f, &choosy_kind, 2, "r", "", 0);
    submit(f, &choosy_kind, 3, "r", "", 0);
    gate_open();
    answered_wait(3);
    assert_int_equal(note.batches, 3); /* one order each */
    assert_int_equal(choosy_prepared, 2 + 3);
    for (int v = 1; v <= 3; v++) {
        assert_int_equal(f->t[v].rc, MARKET_OK);
        assert_int_equal(f->t[v].answers, 1);
    }
}

static void test_choose_again_ends_with_budget(void **state) {
    struct fx *f = *state;
    choosy_misses = 1 << 30;
    choosy_prepared = choosy_read = 0;
    submit(f, &choosy_kind, 1, "r", "", 0);
    answered_wait(1);
    assert_int_equal(f->t[1].rc, MARKET_ERR_CONFLICT);
    assert_int_equal(note.batches, 0); /* nothing committed */
    assert_true(choosy_prepared > 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_batches_of_one_kind_realm_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_refused_others_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_spent_in_queue_is_busy, setup_short_budget,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stop_serves_queued_then_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hold_kept_then_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_policy_takes_every_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_choose_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_choose_again_ends_with_budget, setup_short_budget,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
