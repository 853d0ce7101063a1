/* lock_queue.c - the in-process queue per key in front of the Redis backends.
 *
 * Within one lock_client, at most one thread at a time contends in Redis for
 * a key, and it keeps that right while it holds the lease: the other threads
 * of the client that want the key sleep here on the key's condition variable
 * and do not send a single command. A release (or the contender giving up)
 * broadcasts, and a woken thread goes to Redis at once: the hand-off between
 * threads of one process costs no retry timer.
 *
 * DESIGN
 * One mutex guards a small hash table of entries, one per key that someone
 * holds, contends for, or waits for. An entry is FREE, CONTENDING (a thread is
 * talking to Redis for it) or HELD (by a token, until valid_until_ms). A HELD
 * entry whose deadline passed counts as free, exactly as the Redis key would,
 * so a holder that never releases cannot block its own client's threads
 * beyond its lease; its late release then no longer matches the entry's
 * token and changes nothing. Waiters sleep until the earlier of their own
 * deadline and the holder's, on CLOCK_MONOTONIC.
 *
 * Several keys are entered all at once or not at all: a thread waits until
 * every one of its keys is available and then takes them in one step under
 * the mutex, never holding some while waiting for others, so the queue adds
 * no deadlock whatever order callers name their keys in (the Redis side is
 * all-or-nothing too, in one script).
 *
 * Entries are freed when FREE with no waiter; an expired HELD entry nobody
 * waits for is freed when its bucket is next searched.
 *
 * Reentrant leases: a HELD entry also names the lease's owner. A thread that
 * wants the key for that same owner does not queue behind it: it "joins"
 * (lock__queue_enter_owned) and goes to Redis, where its hold is counted; a
 * thread of that owner already waiting is woken when the entry becomes HELD
 * by its owner, so it can join too. The entry counts the holds taken through
 * this client and stays HELD until the last of them is released, or the
 * lease is freed: holds taken through other clients (another process naming
 * the same owner) are Redis's business, and this client's other threads wait
 * for them in Redis, as for any lease held elsewhere.
 *
 * The queue is an optimisation, never the authority: Redis decides who holds
 * a key. A handle released through another client object still frees the key
 * in Redis, but this client's waiters then sleep until the lease's deadline.
 */
#include "lock/lock.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lock/lock_impl.h"

#define QUEUE_BUCKETS 64

enum { ENT_FREE, ENT_CONTENDING, ENT_HELD };

struct qent {
    char key[LOCK_KEY_MAX + 1];
    int state;                      /* ENT_* */
    char token[LOCK_TOKEN_LEN + 1]; /* the holder's, when ENT_HELD */
    char owner[LOCK_OWNER_MAX + 1]; /* a reentrant holder's owner when ENT_HELD, else "" */
    uint32_t holds;                 /* ... and the holds taken through this client */
    int64_t valid_until_ms;         /* the holder's lease deadline, when ENT_HELD */
    unsigned waiters;               /* threads inside lock__queue_enter() naming this key */
    pthread_cond_t cv;              /* CLOCK_MONOTONIC; broadcast when the entry frees */
    struct qent *next;              /* bucket chain */
};

struct lock__queue {
    pthread_mutex_t mu;
    struct qent *buckets[QUEUE_BUCKETS];
};

/* ---- private ---- */

static size_t key_hash(const char *key) {
    return lock__key_hash(key) % QUEUE_BUCKETS;
}

static void ent_free(struct qent *e) {
    pthread_cond_destroy(&e->cv);
    free(e);
}

/* An entry no thread needs: FREE, or HELD past its deadline, and nobody waiting. */
static int ent_idle(const struct qent *e, int64_t now) {
    if (e->waiters > 0) return 0;
    return e->state == ENT_FREE || (e->state == ENT_HELD && now >= e->valid_until_ms);
}

/* An entry a thread may take now. */
static int ent_available(const struct qent *e, int64_t now) {
    return e->state == ENT_FREE || (e->state == ENT_HELD && now >= e->valid_until_ms);
}

/* An entry whose unexpired lease owner holds: a thread of that owner may join it. */
static int ent_joinable(const struct qent *e, const char *owner, int64_t now) {
    return e->state == ENT_HELD && now < e->valid_until_ms && e->owner[0] != '\0' &&
           strcmp(e->owner, owner) == 0;
}

/* Returns key's entry, or NULL; frees idle entries met on the way. Called with mu held. */
static struct qent *ent_find(struct lock__queue *q, const char *key, int64_t now) {
    struct qent **pp = &q->buckets[key_hash(key)];
    struct qent *found = NULL;
    while (*pp != NULL) {
        struct qent *e = *pp;
        if (strcmp(e->key, key) == 0) {
            found = e;
            pp = &e->next;
        } else if (ent_idle(e, now)) {
            *pp = e->next;
            ent_free(e);
        } else {
            pp = &e->next;
        }
    }
    return found;
}

/* Returns key's entry, creating a FREE one, or NULL when out of resources. Called with mu. */
static struct qent *ent_get(struct lock__queue *q, const char *key, int64_t now) {
    struct qent *e = ent_find(q, key, now);
    if (e != NULL) return e;
    e = calloc(1, sizeof *e);
    if (e == NULL) return NULL;
    if (rconn_cond_init_monotonic(&e->cv) != RCONN_OK) {
        free(e);
        return NULL;
    }
    strcpy(e->key, key); /* length checked by lock.c */
    size_t b = key_hash(key);
    e->next = q->buckets[b];
    q->buckets[b] = e;
    return e;
}

/* Unlinks and frees e if nobody needs it. Called with mu held. */
static void ent_maybe_free(struct lock__queue *q, struct qent *e) {
    if (e->waiters > 0 || e->state != ENT_FREE) return;
    for (struct qent **pp = &q->buckets[key_hash(e->key)]; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            ent_free(e);
            return;
        }
    }
}

/* Frees the entry: FREE, waiters woken. Called with mu held. */
static void ent_set_free(struct lock__queue *q, struct qent *e) {
    e->state = ENT_FREE;
    e->token[0] = '\0';
    e->owner[0] = '\0';
    e->holds = 0;
    e->valid_until_ms = 0;
    pthread_cond_broadcast(&e->cv);
    ent_maybe_free(q, e);
}

/* ---- API (module-internal) ---- */

/* Returns a new, empty queue; caller frees with lock__queue_free(). Returns NULL with *err set
 * to LOCK_ERR_NOMEM or LOCK_ERR_BACKEND (the mutex cannot be created). */
struct lock__queue *lock__queue_new(int *err) {
    struct lock__queue *q = calloc(1, sizeof *q);
    if (q == NULL) {
        *err = LOCK_ERR_NOMEM;
        return NULL;
    }
    if (pthread_mutex_init(&q->mu, NULL) != 0) {
        free(q);
        *err = LOCK_ERR_BACKEND;
        return NULL;
    }
    *err = LOCK_OK;
    return q;
}

/* Frees q and every entry; no thread may be using it. lock__queue_free(NULL) is a no-op. This
 * function can't fail. */
void lock__queue_free(struct lock__queue *q) {
    if (q == NULL) return;
    for (size_t b = 0; b < QUEUE_BUCKETS; b++) {
        struct qent *e = q->buckets[b];
        while (e != NULL) {
            struct qent *next = e->next;
            ent_free(e);
            e = next;
        }
        q->buckets[b] = NULL;
    }
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* Waits until every key of keys[0..n) (distinct) is available to this client's threads, then
 * marks them all CONTENDING for the caller, in one step; on success the caller must end with
 * lock__queue_hold() or lock__queue_leave() on the same keys. Returns LOCK_OK, LOCK_ERR_BUSY
 * (the monotonic clock reached deadline_ms first; nothing is marked), LOCK_ERR_NOMEM or
 * LOCK_ERR_BACKEND. */
int lock__queue_enter(struct lock__queue *q, const char *const *keys, size_t n,
                      int64_t deadline_ms) {
    struct qent *ents[LOCK_MULTI_MAX];
    size_t got = 0;
    int rc = LOCK_OK;
    if (pthread_mutex_lock(&q->mu) != 0) return LOCK_ERR_BACKEND;
    int64_t now = rconn_now_ms();
    for (; got < n; got++) {
        ents[got] = ent_get(q, keys[got], now);
        if (ents[got] == NULL) {
            rc = LOCK_ERR_NOMEM;
            goto out;
        }
        ents[got]->waiters++;
    }
    for (;;) {
        now = rconn_now_ms();
        struct qent *blocker = NULL;
        for (size_t i = 0; i < n && blocker == NULL; i++)
            if (!ent_available(ents[i], now)) blocker = ents[i];
        if (blocker == NULL) {
            for (size_t i = 0; i < n; i++) {
                ents[i]->state = ENT_CONTENDING;
                ents[i]->token[0] = '\0';
            }
            goto out;
        }
        if (now >= deadline_ms) {
            rc = LOCK_ERR_BUSY;
            goto out;
        }
        int64_t until = deadline_ms;
        if (blocker->state == ENT_HELD && blocker->valid_until_ms < until)
            until = blocker->valid_until_ms;
        struct timespec ts;
        rconn_timespec_at(until, &ts);
        int e = pthread_cond_timedwait(&blocker->cv, &q->mu, &ts);
        if (e != 0 && e != ETIMEDOUT && e != EINTR) {
            rc = LOCK_ERR_BACKEND;
            goto out;
        }
    }
out:
    for (size_t i = 0; i < got; i++) {
        ents[i]->waiters--;
        if (rc != LOCK_OK) ent_maybe_free(q, ents[i]);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* Marks keys[0..n), entered by the caller, HELD by token until valid_until_ms (monotonic).
 * token is copied. This function can't fail (a lost mutex leaves the entries to the waiters'
 * deadlines). */
void lock__queue_hold(struct lock__queue *q, const char *const *keys, size_t n, const char *token,
                      int64_t valid_until_ms) {
    if (pthread_mutex_lock(&q->mu) != 0) return;
    int64_t now = rconn_now_ms();
    for (size_t i = 0; i < n; i++) {
        struct qent *e = ent_find(q, keys[i], now);
        if (e == NULL || e->state != ENT_CONTENDING) continue;
        e->state = ENT_HELD;
        memcpy(e->token, token, LOCK_TOKEN_LEN + 1);
        e->owner[0] = '\0';
        e->valid_until_ms = valid_until_ms;
    }
    pthread_mutex_unlock(&q->mu);
}

/* Ends the caller's contention for keys[0..n) without a lease: they become FREE and their
 * waiters are woken. This function can't fail. */
void lock__queue_leave(struct lock__queue *q, const char *const *keys, size_t n) {
    if (pthread_mutex_lock(&q->mu) != 0) return;
    int64_t now = rconn_now_ms();
    for (size_t i = 0; i < n; i++) {
        struct qent *e = ent_find(q, keys[i], now);
        if (e != NULL && e->state == ENT_CONTENDING) ent_set_free(q, e);
    }
    pthread_mutex_unlock(&q->mu);
}

/* Frees key's entry if token holds it (a stale or foreign token changes nothing) and wakes its
 * waiters. This function can't fail. */
void lock__queue_release(struct lock__queue *q, const char *key, const char *token) {
    if (pthread_mutex_lock(&q->mu) != 0) return;
    struct qent *e = ent_find(q, key, rconn_now_ms());
    if (e != NULL && e->state == ENT_HELD && strcmp(e->token, token) == 0) ent_set_free(q, e);
    pthread_mutex_unlock(&q->mu);
}

/* Counts one hold of the reentrant lease token holds on key's entry as released (the lease
 * itself keeps other holds): the entry is freed, and its waiters woken, when no hold taken
 * through this client is left. This function can't fail. */
void lock__queue_drop_hold(struct lock__queue *q, const char *key, const char *token) {
    if (pthread_mutex_lock(&q->mu) != 0) return;
    struct qent *e = ent_find(q, key, rconn_now_ms());
    if (e != NULL && e->state == ENT_HELD && strcmp(e->token, token) == 0) {
        if (e->holds > 0) e->holds--;
        if (e->holds == 0) ent_set_free(q, e);
    }
    pthread_mutex_unlock(&q->mu);
}

/* Moves the deadline of key's entry to valid_until_ms if token holds it (for a reentrant
 * lease, whose other holds keep theirs, only later). This function can't fail. */
void lock__queue_extend(struct lock__queue *q, const char *key, const char *token,
                        int64_t valid_until_ms) {
    if (pthread_mutex_lock(&q->mu) != 0) return;
    struct qent *e = ent_find(q, key, rconn_now_ms());
    if (e != NULL && e->state == ENT_HELD && strcmp(e->token, token) == 0 &&
        (e->owner[0] == '\0' || valid_until_ms > e->valid_until_ms))
        e->valid_until_ms = valid_until_ms;
    pthread_mutex_unlock(&q->mu);
}

/* lock__queue_enter() for one key on behalf of owner (a reentrant acquisition): when owner's
 * unexpired lease holds the entry, or comes to hold it while the caller waits, returns LOCK_OK
 * with *joined = 1 and changes nothing (the caller adds its hold in Redis and then calls
 * lock__queue_hold_owned(), or nothing on failure). Otherwise it is lock__queue_enter(), with
 * *joined = 0. Returns LOCK_OK, LOCK_ERR_BUSY, LOCK_ERR_NOMEM or LOCK_ERR_BACKEND. */
int lock__queue_enter_owned(struct lock__queue *q, const char *key, const char *owner,
                            int64_t deadline_ms, int *joined) {
    *joined = 0;
    if (pthread_mutex_lock(&q->mu) != 0) return LOCK_ERR_BACKEND;
    int rc = LOCK_OK;
    struct qent *e = ent_get(q, key, rconn_now_ms());
    if (e == NULL) {
        pthread_mutex_unlock(&q->mu);
        return LOCK_ERR_NOMEM;
    }
    e->waiters++;
    for (;;) {
        int64_t now = rconn_now_ms();
        if (ent_joinable(e, owner, now)) {
            *joined = 1;
            break;
        }
        if (ent_available(e, now)) {
            e->state = ENT_CONTENDING;
            e->token[0] = '\0';
            e->owner[0] = '\0';
            break;
        }
        if (now >= deadline_ms) {
            rc = LOCK_ERR_BUSY;
            break;
        }
        int64_t until = deadline_ms;
        if (e->state == ENT_HELD && e->valid_until_ms < until) until = e->valid_until_ms;
        struct timespec ts;
        rconn_timespec_at(until, &ts);
        int err = pthread_cond_timedwait(&e->cv, &q->mu, &ts);
        if (err != 0 && err != ETIMEDOUT && err != EINTR) {
            rc = LOCK_ERR_BACKEND;
            break;
        }
    }
    e->waiters--;
    if (rc != LOCK_OK) ent_maybe_free(q, e);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* Records owner's reentrant lease (token, until valid_until_ms) on key's entry after a
 * successful lock__queue_enter_owned(): the entry the caller contended for becomes HELD and
 * the threads of owner waiting for it are woken to join; after a join the entry's deadline
 * only moves later (or, if Redis answered with a new lease, the entry takes it). This
 * function can't fail (without memory or the mutex the entry is left to the deadlines). */
void lock__queue_hold_owned(struct lock__queue *q, const char *key, const char *token,
                            const char *owner, int64_t valid_until_ms, int joined) {
    if (pthread_mutex_lock(&q->mu) != 0) return;
    int64_t now = rconn_now_ms();
    struct qent *e = joined ? ent_get(q, key, now) : ent_find(q, key, now);
    if (e == NULL) goto out;
    if (!joined && e->state != ENT_CONTENDING) goto out;
    if (joined && e->state == ENT_CONTENDING) goto out; /* another thread's contention */
    if (joined && e->state == ENT_HELD && strcmp(e->token, token) == 0) {
        if (valid_until_ms > e->valid_until_ms) e->valid_until_ms = valid_until_ms;
        if (e->holds < UINT32_MAX) e->holds++;
        goto out;
    }
    e->state = ENT_HELD;
    memcpy(e->token, token, LOCK_TOKEN_LEN + 1);
    strcpy(e->owner, owner); /* length checked by lock.c */
    e->holds = 1;
    e->valid_until_ms = valid_until_ms;
    pthread_cond_broadcast(&e->cv); /* waiters of the same owner may join now */
out:
    pthread_mutex_unlock(&q->mu);
}
