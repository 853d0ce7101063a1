/* lock_dist.c - the lock engine over N Redis nodes, shared by lock_redis.c and lock_redlock.c.
 *
 * lock_redis.c runs it over one server with single-instance semantics;
 * lock_redlock.c over N independent masters (N odd) with Redlock's. The file
 * also holds the Redlock arithmetic as pure functions (time is passed in), so
 * tests/unit/test_lock_redlock_math.c checks it without a clock.
 *
 * DESIGN
 * One round: the acquire script goes to every node in parallel
 * (lock__node_calls), each bounded by the per-node timeout: the client's
 * timeout for one server; min(timeout, max(5 ms, ttl/10)) for Redlock, so a
 * hung master costs a fraction of the lease. The round succeeds when a
 * quorum (n/2+1; 1 of 1) granted every key and the lease is still worth
 * something: validity = ttl - elapsed - drift > 0, with elapsed measured on
 * the monotonic clock from before the first connection and drift = ttl/100 +
 * 2 ms for Redlock (0 for one server, whose clock is the only one). The
 * handle's valid_until_ms is start + ttl - drift. A failed round undoes
 * itself on every node that may have granted (answered yes, or an error
 * mid-script); nodes that answered "busy" hold nothing of ours and nodes that
 * never got the script cannot; a node that did not answer in time gets the
 * undo behind the acquire on the same connection (lock_call.c).
 *
 * Outcomes: all nodes failing at once is LOCK_ERR_BACKEND at once (nothing to
 * wait for). Otherwise a failed round is retried until the wait budget ends,
 * then answers LOCK_ERR_BACKEND if the last round could not reach a quorum
 * because too many nodes failed (a majority unreachable), or LOCK_ERR_BUSY
 * (held elsewhere). A round that a quorum granted but that outlasted the
 * lease's validity is undone and counts as busy: the store is healthy. Release
 * and extend go to every node too: they succeed on a quorum, answer NOT_OWNER /
 * LEASE_LOST when the refusals alone rule a quorum out, LOCK_ERR_BACKEND when
 * failures leave it undecided, and an extend that a quorum answered but whose
 * round outlasted the new lease (validity <= 0) is LEASE_LOST, not a store
 * failure: the lease lapsed, nothing is wrong with Redis.
 *
 * Fences: every node advances its one counter, "lock:fences" (LOCK_FENCE_KEY),
 * once per acquisition in the acquire script, so a fence grows for every key
 * at once and no counter is left behind per key; keys with a Redis Cluster
 * hash tag "{t}" have one counter per tag instead, "lock:fences:{t}", in
 * their own slot (lock__fence_key()). The handle gets the maximum
 * over the granting nodes. Two majorities always share a
 * node, so the next lease's fence exceeds this one's as long as that shared
 * node's counter is at least this fence: when the granting nodes disagree
 * (one was down, or restarted empty), the lagging counters are raised to the
 * maximum in one more round before acquire returns.
 *
 * Redis Cluster: one node, which lock_call.c routes per call to the master of
 * the call's slot. Every key must carry a hash tag, so that its fence counter
 * and companions share its slot, and the keys of one call one slot
 * (keys_routable: LOCK_ERR_INVALID otherwise; a release of handles in several
 * slots goes one slot at a time). A round refused with -TRYAGAIN or
 * -CLUSTERDOWN (a slot migrating, a failover under way) is store trouble that
 * passes: acquire retries it on the backoff until its budget ends, whereas a
 * master that cannot be reached fails at once, as one server does.
 *
 * Waiting: the client's threads queue per key in-process (lock_queue.c), so
 * one thread per key contends here. After its first busy round it subscribes
 * to "<key>:released" on every node (lock__sub_begin), tries once more (a
 * release between the two is not missed), then sleeps until a release is
 * published, the busy key's PTTL runs out (the script answers it), or the
 * next poll is due, whichever is first. The notice is an optimisation: only
 * holders that use this library publish (node-redlock, a plain SET NX PX
 * client, a DEL by hand do not), so the waiter also polls, on a schedule that
 * starts at LOCK_WAIT_POLL_FIRST_MS and doubles up to LOCK_WAIT_POLL_CAP_MS
 * (lock__wait_poll_ms): a silent release is seen within one step, never as
 * late as the holder's TTL, and a long wait costs about one attempt per cap
 * interval. Without a subscription (say, an ACL user without channel rights)
 * the same schedule is all there is. Rounds that fail for store trouble
 * (BACKEND with some node answering) back off on the capped, jittered
 * backoff instead.
 *
 * Our own leases given up: every token this client makes begins with its id, 64 random bits
 * drawn once (d->id), and ends with 64 random bits of its own. A thread that reaches Redis
 * for a key holds the key's in-process queue entry, so no thread of this client holds a lease
 * on it: a lease on it under our id is one we gave up (released, or lapsed by our clock) that
 * a node still has. That happens when the release never reached the master that has the key
 * now: sent to the old master during a failover (refused -READONLY, unanswered, or answered
 * and then lost with the old master's writes), or lost in a restart from an AOF. The acquire
 * script takes such a lease over at once (compare-and-overwrite inside the script: no extra
 * round trip) instead of waiting out its TTL; a lease under any other id is waited for as
 * always. Fencing is untouched: the holder of the old token had given it up (or was past its
 * own deadline, when the server key would still live for a round trip or so), the new lease
 * gets a new fence, and a commit guarded by the old token finds the key changed.
 *
 * Reentrant leases (an owner): one key, the owned scripts. Each node answers
 * a hold on the owner's lease there, a new lease with this attempt's token
 * where the key is free, or busy; the lease most nodes answered must have a
 * quorum, and every other hold taken is given back (acquire_round_owned). The
 * fence is the lease's, stored in its hash, so a re-acquisition answers the
 * fence the lease started with (raised with the counters when the nodes
 * disagreed). The owner's threads join its queue entry instead of queueing.
 */
#include "lock/lock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock/lock_impl.h"

struct lock__dist {
    char id[LOCK__CLIENT_ID_LEN + 1];                /* random; every token's first half */
    size_t n;                                        /* nodes */
    int redlock;                                     /* 0: one server's semantics */
    int cluster;                                     /* 1: one node, a Redis Cluster */
    int timeout_ms;                                  /* connect and answer timeout */
    struct lock__node *node[LOCK_REDLOCK_NODES_MAX]; /* owned */
    struct lock__queue *q;                           /* owned */
};

/* Per-operation scratch (too big for a small thread stack). */
struct work {
    struct lock__call calls[LOCK_REDLOCK_NODES_MAX];
    struct lock__call more[LOCK_REDLOCK_NODES_MAX]; /* follow-up round: undo or raise */
    const char *fence[LOCK_MULTI_MAX]; /* every key's fence counter (in fence_buf) */
    char fence_buf[LOCK_MULTI_MAX][LOCK_FENCE_KEY_MAX];
    char chan[LOCK_MULTI_MAX][LOCK_KEY_MAX + sizeof LOCK_RELEASED_SUFFIX];
    const char *chp[LOCK_MULTI_MAX];
    char num[LOCK_MULTI_MAX][24];
    uint64_t fmax[LOCK_MULTI_MAX];
    char ttl[16];
    struct lock__sub sub;
    char okey[LOCK_KEY_MAX + sizeof LOCK_OWNER_SUFFIX]; /* a reentrant lease's "<key>:owner" */
};

/* ---- Redlock arithmetic (pure) ---- */

/* Returns the number of nodes that make a majority of n: n/2 + 1. This function can't fail. */
size_t lock__redlock_quorum(size_t n) {
    return n / 2 + 1;
}

/* Returns the clock-drift allowance for a lease of ttl_ms: 1% of it plus 2 ms for the
 * granularity of the servers' timers. This function can't fail. */
int64_t lock__redlock_drift_ms(uint32_t ttl_ms) {
    return (int64_t)(ttl_ms / 100u) + 2;
}

/* Returns how many ms of a lease of ttl_ms requested at started_ms are still trustworthy at
 * now_ms: ttl - elapsed - drift_ms (zero or less: none). A now_ms before started_ms counts as
 * no time elapsed. This function can't fail. */
int64_t lock__redlock_validity_ms(uint32_t ttl_ms, int64_t started_ms, int64_t now_ms,
                                  int64_t drift_ms) {
    int64_t elapsed = now_ms > started_ms ? now_ms - started_ms : 0;
    return (int64_t)ttl_ms - elapsed - drift_ms;
}

/* Returns how long to wait for one node's answer when acquiring or extending a lease of
 * ttl_ms: min(timeout_ms, max(5, ttl_ms / 10)), at least 1. This function can't fail. */
int lock__redlock_node_timeout_ms(uint32_t ttl_ms, int timeout_ms) {
    uint32_t t = ttl_ms / 10u;
    if (t < 5u) t = 5u;
    if (timeout_ms > 0 && (uint32_t)timeout_ms < t) t = (uint32_t)timeout_ms;
    return t < 1u ? 1 : (int)t;
}

/* Returns the verdict on an acquire round over n nodes, of which granted said yes and failed
 * did not answer (or answered an error), with validity_ms left: LOCK_OK (a quorum granted and
 * validity is positive), LOCK_ERR_BACKEND (so many failed that no quorum was possible) or
 * LOCK_ERR_BUSY (held elsewhere, or the round took too long). This function can't fail. */
int lock__redlock_verdict(size_t n, size_t granted, size_t failed, int64_t validity_ms) {
    size_t q = lock__redlock_quorum(n);
    if (granted >= q && validity_ms > 0) return LOCK_OK;
    if (failed > n - q) return LOCK_ERR_BACKEND;
    return LOCK_ERR_BUSY;
}

/* Returns the verdict on a release or extend round over n nodes, of which yes said yes and
 * failed did not answer (or answered an error), with validity_ms left (a release passes 1):
 * LOCK_OK (a quorum said yes, with validity left); LOCK_ERR_NOT_OWNER (the nodes that said
 * no rule a quorum out); LOCK_ERR_BACKEND (so many failed that no quorum could answer, or
 * the failures leave it undecided while validity is left); LOCK_ERR_LEASE_LOST (a quorum
 * answered but the lease's validity ran out during the round: whatever the silent nodes did,
 * the lease cannot be trusted any more, and the store is not to blame). This function can't
 * fail. */
int lock__redlock_owner_verdict(size_t n, size_t yes, size_t failed, int64_t validity_ms) {
    size_t q = lock__redlock_quorum(n);
    if (yes >= q && validity_ms > 0) return LOCK_OK;
    if (yes + failed < q) return LOCK_ERR_NOT_OWNER;
    if (failed > n - q) return LOCK_ERR_BACKEND;
    if (validity_ms <= 0) return LOCK_ERR_LEASE_LOST;
    return LOCK_ERR_BACKEND;
}

/* ---- Redis Cluster ---- */

/* Returns 1 when keys[0..n) may go to d as one call: anywhere but on a cluster, where each key
 * needs a hash tag (its fence counter and companions live in its slot) and all one slot. */
static int keys_routable(const struct lock__dist *d, const char *const *keys, size_t n) {
    if (!d->cluster) return 1;
    unsigned slot = rconn_key_slot(keys[0], strlen(keys[0]));
    for (size_t k = 0; k < n; k++)
        if (!rconn_key_tagged(keys[k]) || rconn_key_slot(keys[k], strlen(keys[k])) != slot)
            return 0;
    return 1;
}

/* Returns 1 when every call of the round that just ended failed for a reason a cluster said is
 * passing (-TRYAGAIN, -CLUSTERDOWN, a slot moving): worth another round within the budget. */
static int round_retryable(const struct lock__dist *d, const struct work *w) {
    for (size_t i = 0; i < d->n; i++)
        if (!w->calls[i].retry) return 0;
    return 1;
}

/* Runs w's calls (lock__node_calls) and, on a cluster, runs them again while every one was
 * refused for a passing reason (a slot on the move: -TRYAGAIN, a second redirect;
 * -CLUSTERDOWN), after a short pause (1, 2, 4 ... 25 ms), until timeout_ms from the first.
 * A release or extend during a reshard must not give up on a lease that is still there: it
 * would outlive its holder until its TTL, and keep the next one waiting. */
static void calls_run_settled(const struct lock__dist *d, struct work *w, int timeout_ms) {
    int64_t until = rconn_now_ms() + timeout_ms;
    for (uint32_t pause = 1;; pause = pause < 16 ? pause * 2 : 25) {
        lock__node_calls(w->calls, d->n, timeout_ms);
        if (!d->cluster || !round_retryable(d, w) || rconn_now_ms() + pause >= until) return;
        lock__sleep_ms(pause);
    }
}

/* ---- rounds ---- */

/* Makes what the calls[0..n) of a round that failed said (lock_call.c: "host:port: text"), "; "
 * between them, the calling thread's reason under way (lock_last_error() once the call fails);
 * empties it when none failed, so a busy round after a failed one is not blamed on the store.
 * This function can't fail (a long text is cut). */
static void round_why(const struct lock__call *calls, size_t n) {
    char buf[LOCK__WHY_MAX];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < sizeof buf - 1; i++) {
        const struct lock__call *c = &calls[i];
        if (c->state == LOCK__CALL_INT || c->state == LOCK__CALL_ARRAY || c->why[0] == '\0')
            continue;
        int k = snprintf(buf + len, sizeof buf - len, "%s%s", len > 0 ? "; " : "", c->why);
        if (k < 0) break;
        len += (size_t)k < sizeof buf - len ? (size_t)k : sizeof buf - 1 - len;
    }
    lock__why("%s", buf);
}

static void call_init(struct lock__call *c, struct lock__node *nd, enum lock__script s) {
    c->node = nd;
    c->script = s;
    c->nkeys = 0;
    c->nargs = 0;
    c->undo_nkeys = 0;
    c->undo_nargs = 1;
    c->undo_script = LOCK__SCRIPT_RELEASE;
}

static int node_timeout(const struct lock__dist *d, uint32_t ttl_ms) {
    return d->redlock ? lock__redlock_node_timeout_ms(ttl_ms, d->timeout_ms) : d->timeout_ms;
}

static int64_t drift_of(const struct lock__dist *d, uint32_t ttl_ms) {
    return d->redlock ? lock__redlock_drift_ms(ttl_ms) : 0;
}

/* Returns 1 when call c granted all nk keys (an array of nk positive fences). */
static int granted_all(const struct lock__call *c, size_t nk) {
    if (c->state != LOCK__CALL_ARRAY || c->nvals != nk) return 0;
    for (size_t k = 0; k < nk; k++)
        if (c->vals[k] <= 0) return 0;
    return 1;
}

/* Releases keys[0..nk) held by token on the nodes of calls that may have granted them. */
static void undo_round(struct lock__dist *d, struct work *w, const char *const *keys, size_t nk,
                       const char *token, int timeout_ms) {
    size_t m = 0;
    for (size_t i = 0; i < d->n; i++) {
        const struct lock__call *c = &w->calls[i];
        if (c->state != LOCK__CALL_ARRAY && c->state != LOCK__CALL_ERROR) continue;
        struct lock__call *u = &w->more[m++];
        call_init(u, c->node, LOCK__SCRIPT_RELEASE);
        for (size_t k = 0; k < nk; k++)
            u->keys[u->nkeys++] = keys[k];
        u->args[u->nargs++] = token;
    }
    if (m > 0) lock__node_calls(w->more, m, timeout_ms);
}

/* Raises the fence counters of the granting nodes to w->fmax when they disagree. */
static void raise_round(struct lock__dist *d, struct work *w, size_t nk, int timeout_ms) {
    int diverged = 0;
    for (size_t i = 0; i < d->n && !diverged; i++)
        if (granted_all(&w->calls[i], nk))
            for (size_t k = 0; k < nk; k++)
                if ((uint64_t)w->calls[i].vals[k] != w->fmax[k]) diverged = 1;
    if (!diverged) return;
    for (size_t k = 0; k < nk; k++)
        snprintf(w->num[k], sizeof w->num[k], "%llu", (unsigned long long)w->fmax[k]);
    size_t m = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (!granted_all(&w->calls[i], nk)) continue;
        struct lock__call *u = &w->more[m++];
        call_init(u, w->calls[i].node, LOCK__SCRIPT_RAISE);
        for (size_t k = 0; k < nk; k++) {
            u->keys[u->nkeys++] = w->fence[k];
            u->args[u->nargs++] = w->num[k];
        }
    }
    lock__node_calls(w->more, m, timeout_ms); /* best effort: see DESIGN */
}

/* One acquire round for keys[0..nk) with token, taking over the leases of this client that the
 * nodes still have on them (the caller holds the keys' queue entries; see DESIGN). Returns LOCK_OK
 * (out[] filled), LOCK_ERR_BUSY or LOCK_ERR_BACKEND; *failed is the number of nodes that failed,
 * *pttl_ms the smallest remaining lease among busy nodes (-1: unknown). */
static int acquire_round(struct lock__dist *d, struct work *w, const char *const *keys, size_t nk,
                         const char *token, uint32_t ttl_ms, lock_handle *out, size_t *failed,
                         int64_t *pttl_ms) {
    int to = node_timeout(d, ttl_ms);
    int64_t started = rconn_now_ms();
    for (size_t i = 0; i < d->n; i++) {
        struct lock__call *c = &w->calls[i];
        call_init(c, d->node[i], LOCK__SCRIPT_ACQUIRE);
        for (size_t k = 0; k < nk; k++)
            c->keys[c->nkeys++] = keys[k];
        for (size_t k = 0; k < nk; k++)
            c->keys[c->nkeys++] = w->fence[k];
        c->args[c->nargs++] = token;
        c->args[c->nargs++] = w->ttl;
        c->args[c->nargs++] = d->id; /* our caller holds the keys' queue entries */
        c->undo_nkeys = nk;
    }
    lock__node_calls(w->calls, d->n, to);
    int64_t now = rconn_now_ms();
    round_why(w->calls, d->n);

    size_t granted = 0, nfailed = 0;
    int64_t pttl = -1;
    memset(w->fmax, 0, sizeof w->fmax);
    for (size_t i = 0; i < d->n; i++) {
        const struct lock__call *c = &w->calls[i];
        if (granted_all(c, nk)) {
            granted++;
            for (size_t k = 0; k < nk; k++)
                if ((uint64_t)c->vals[k] > w->fmax[k]) w->fmax[k] = (uint64_t)c->vals[k];
        } else if (c->state == LOCK__CALL_INT) {
            if (c->ival >= 0 && (pttl < 0 || c->ival < pttl)) pttl = c->ival;
        } else {
            nfailed++;
        }
    }
    int64_t drift = drift_of(d, ttl_ms);
    int rc = lock__redlock_verdict(d->n, granted, nfailed,
                                   lock__redlock_validity_ms(ttl_ms, started, now, drift));
    *failed = nfailed;
    *pttl_ms = pttl;
    if (rc != LOCK_OK) {
        undo_round(d, w, keys, nk, token, to);
        return rc;
    }
    raise_round(d, w, nk, to);
    for (size_t k = 0; k < nk; k++) {
        strcpy(out[k].key, keys[k]);
        memcpy(out[k].token, token, LOCK_TOKEN_LEN + 1);
        out[k].fence = w->fmax[k];
        out[k].valid_until_ms = started + (int64_t)ttl_ms - drift;
    }
    return LOCK_OK;
}

/* ---- reentrant rounds ---- */

/* Returns 1 when call c answered an owned acquire with a hold: {fence > 0, holds > 0, token}. */
static int granted_owned(const struct lock__call *c) {
    return c->state == LOCK__CALL_ARRAY && c->nvals == 3 && c->vals[0] > 0 && c->vals[1] > 0 &&
           c->text[0] != '\0';
}

/* Appends to w->more[*m] the release of one hold of key (w->okey) for owner and token on node
 * nd. */
static void add_release_owned(struct work *w, size_t *m, struct lock__node *nd, const char *key,
                              const char *owner, const char *token) {
    struct lock__call *u = &w->more[(*m)++];
    call_init(u, nd, LOCK__SCRIPT_RELEASE_OWNED);
    u->keys[u->nkeys++] = key;
    u->keys[u->nkeys++] = w->okey;
    u->args[u->nargs++] = owner;
    u->args[u->nargs++] = token;
}

/* Reads an owned acquire round's answers in w->calls: returns the call whose lease most nodes
 * answered (d->n when none granted) with their number in *votes, and counts the nodes that
 * failed in *nfailed and the smallest remaining lease among busy nodes in *pttl (-1: none). */
static size_t owned_winner(const struct lock__dist *d, const struct work *w, size_t *votes,
                           size_t *nfailed, int64_t *pttl) {
    size_t best = d->n;
    for (size_t i = 0; i < d->n; i++) {
        const struct lock__call *c = &w->calls[i];
        if (granted_owned(c)) {
            size_t v = 0;
            for (size_t j = 0; j < d->n; j++)
                if (granted_owned(&w->calls[j]) && strcmp(w->calls[j].text, c->text) == 0) v++;
            if (v > *votes) {
                best = i;
                *votes = v;
            }
        } else if (c->state == LOCK__CALL_INT) {
            if (c->ival >= 0 && (*pttl < 0 || c->ival < *pttl)) *pttl = c->ival;
        } else {
            (*nfailed)++;
        }
    }
    return best;
}

/* One owned acquire round for key: on each node, a hold on owner's lease there, a new lease
 * with token where the key is free, or busy. The nodes may answer different leases (a node
 * that lost the key grants a new one while the others count a hold on the old one): the lease
 * most nodes answered wins and must have a quorum within the validity, as in acquire_round();
 * every hold taken that is not part of the winning lease, or of a round that failed, is given
 * back (a node that answered an error gets the release of token, the new lease it may have
 * started unless that lease won; one that did not answer, the by-owner undo behind its call). The
 * handle gets the winning lease's token, the largest fence and holds its nodes answered; lagging
 * fences (the counter and the hash) are raised to it. Unless joined (the owner's lease holds the
 * key's queue entry, so a lease of ours there may be live), a lease of this client's that the
 * nodes still have is taken over (see DESIGN). Returns LOCK_OK (*out filled), LOCK_ERR_BUSY
 * or LOCK_ERR_BACKEND; *failed and *pttl_ms as for acquire_round(). */
static int acquire_round_owned(struct lock__dist *d, struct work *w, const char *key,
                               const char *owner, const char *token, uint32_t ttl_ms, int joined,
                               lock_handle *out, size_t *failed, int64_t *pttl_ms) {
    int to = node_timeout(d, ttl_ms);
    int64_t started = rconn_now_ms();
    for (size_t i = 0; i < d->n; i++) {
        struct lock__call *c = &w->calls[i];
        call_init(c, d->node[i], LOCK__SCRIPT_ACQUIRE_OWNED);
        c->keys[c->nkeys++] = key;
        c->keys[c->nkeys++] = w->okey;
        c->keys[c->nkeys++] = w->fence[0];
        c->args[c->nargs++] = owner;
        c->args[c->nargs++] = token;
        c->args[c->nargs++] = w->ttl;
        if (!joined) c->args[c->nargs++] = d->id;    /* else our owner's lease may be live */
        c->undo_script = LOCK__SCRIPT_RELEASE_OWNED; /* by owner: key, okey; owner */
        c->undo_nkeys = 2;
        c->undo_nargs = 1;
    }
    lock__node_calls(w->calls, d->n, to);
    int64_t now = rconn_now_ms();
    round_why(w->calls, d->n);

    size_t best_votes = 0, nfailed = 0;
    int64_t pttl = -1;
    size_t best = owned_winner(d, w, &best_votes, &nfailed, &pttl);
    int64_t drift = drift_of(d, ttl_ms);
    int rc = lock__redlock_verdict(d->n, best_votes, nfailed,
                                   lock__redlock_validity_ms(ttl_ms, started, now, drift));
    *failed = nfailed;
    *pttl_ms = pttl;

    /* give back what is not the winning lease; raise the winners' fences when they differ */
    const char *win = rc == LOCK_OK ? w->calls[best].text : NULL;
    uint64_t fmax = 0, holds = 0;
    for (size_t i = 0; win != NULL && i < d->n; i++) {
        const struct lock__call *c = &w->calls[i];
        if (!granted_owned(c) || strcmp(c->text, win) != 0) continue;
        if ((uint64_t)c->vals[0] > fmax) fmax = (uint64_t)c->vals[0];
        if ((uint64_t)c->vals[1] > holds) holds = (uint64_t)c->vals[1];
    }
    snprintf(w->num[0], sizeof w->num[0], "%llu", (unsigned long long)fmax);
    size_t m = 0;
    for (size_t i = 0; i < d->n; i++) {
        struct lock__call *c = &w->calls[i];
        if (granted_owned(c) && (win == NULL || strcmp(c->text, win) != 0)) {
            add_release_owned(w, &m, c->node, key, owner, c->text);
        } else if (c->state == LOCK__CALL_ERROR && (win == NULL || strcmp(win, token) != 0)) {
            add_release_owned(w, &m, c->node, key, owner, token); /* a new lease it may hold */
        } else if (win != NULL && granted_owned(c) && (uint64_t)c->vals[0] != fmax) {
            struct lock__call *u = &w->more[m++];
            call_init(u, c->node, LOCK__SCRIPT_RAISE_OWNED);
            u->keys[u->nkeys++] = w->fence[0];
            u->keys[u->nkeys++] = w->okey;
            u->args[u->nargs++] = w->num[0];
            u->args[u->nargs++] = win;
        }
    }
    if (m > 0) lock__node_calls(w->more, m, to); /* best effort: the leases expire anyway */
    if (rc != LOCK_OK) return rc;

    strcpy(out->key, key);
    memcpy(out->token, win, LOCK_TOKEN_LEN + 1);
    out->fence = fmax;
    out->valid_until_ms = started + (int64_t)ttl_ms - drift;
    strcpy(out->owner, owner); /* length checked by lock.c */
    out->holds = holds > UINT32_MAX ? UINT32_MAX : (uint32_t)holds;
    return LOCK_OK;
}

/* ---- API (module-internal) ---- */

/* Takes keys[0..nk) (distinct, checked by lock.c) for ttl_ms, all or none, retrying for up to
 * wait_ms, and fills out[0..nk). With an owner (then nk == 1) the lease is reentrant: a hold on
 * the lease owner already has on keys[0], or a new one (acquire_round_owned), and the
 * in-process queue lets the owner's threads join its lease instead of queueing behind it.
 * Returns LOCK_OK, LOCK_ERR_BUSY, LOCK_ERR_BACKEND (every node failed, at once; or no quorum
 * reachable by the end of the budget; a cluster's -TRYAGAIN/-CLUSTERDOWN is retried until
 * then), LOCK_ERR_INVALID (a cluster: an untagged key, keys in several slots) or
 * LOCK_ERR_NOMEM. */
int lock__dist_acquire(struct lock__dist *d, const char *const *keys, size_t nk, const char *owner,
                       uint32_t ttl_ms, uint32_t wait_ms, lock_handle *out) {
    int64_t deadline = rconn_now_ms() + wait_ms; /* the budget runs from the call's start */
    if (!keys_routable(d, keys, nk)) return LOCK_ERR_INVALID;
    char token[LOCK_TOKEN_LEN + 1];
    int rc = lock__token_new(token);
    if (rc != LOCK_OK) return rc;
    memcpy(token, d->id, LOCK__CLIENT_ID_LEN); /* our id, then 64 random bits */
    struct work *w = malloc(sizeof *w);
    if (w == NULL) return LOCK_ERR_NOMEM;
    for (size_t k = 0; k < nk; k++) {
        lock__fence_key(keys[k], w->fence_buf[k]);
        w->fence[k] = w->fence_buf[k];
        snprintf(w->chan[k], sizeof w->chan[k], "%s%s", keys[k], LOCK_RELEASED_SUFFIX);
        w->chp[k] = w->chan[k];
    }
    snprintf(w->ttl, sizeof w->ttl, "%u", (unsigned)ttl_ms);
    snprintf(w->okey, sizeof w->okey, "%s%s", keys[0], LOCK_OWNER_SUFFIX);
    uint64_t rng = strtoull(token + LOCK_TOKEN_LEN / 2, NULL, 16);

    int joined = 0; /* the owner's lease held the queue entry: we did not enter it */
    if (owner != NULL)
        rc = lock__queue_enter_owned(d->q, keys[0], owner, deadline, &joined);
    else
        rc = lock__queue_enter(d->q, keys, nk, deadline);
    if (rc != LOCK_OK) {
        free(w);
        return rc;
    }
    int subscribed = -1; /* -1: not tried; 0: failed or lost; 1: listening */
    unsigned poll = 0;   /* busy naps so far: the poll schedule's step */
    for (unsigned attempt = 0;; attempt++) {
        size_t failed = 0;
        int64_t pttl = -1;
        if (owner != NULL)
            rc = acquire_round_owned(d, w, keys[0], owner, token, ttl_ms, joined, out, &failed,
                                     &pttl);
        else
            rc = acquire_round(d, w, keys, nk, token, ttl_ms, out, &failed, &pttl);
        if (rc == LOCK_OK) break;
        if (rc == LOCK_ERR_BACKEND && failed == d->n && !round_retryable(d, w))
            break; /* nobody answered: say so now */
        int64_t now = rconn_now_ms();
        if (now >= deadline) break;
        if (rc == LOCK_ERR_BUSY && subscribed < 0) {
            subscribed =
                lock__sub_begin(&w->sub, d->node, d->n, w->chp, nk, node_timeout(d, ttl_ms)) > 0;
            continue; /* once more now: a release before the subscription is not missed */
        }
        /* Busy: poll on a short, doubling, capped interval (a holder that releases without
         * publishing is seen within one step), cut at the lease's end; a release notice
         * ends the nap early. Store trouble: the capped, jittered backoff. */
        int64_t nap = rc == LOCK_ERR_BUSY ? lock__wait_poll_ms(poll++, &rng)
                                          : lock__backoff_ms(attempt, &rng);
        if (rc == LOCK_ERR_BUSY && pttl >= 0 && nap > pttl + 1) nap = pttl + 1;
        if (nap > deadline - now) nap = deadline - now;
        if (rc == LOCK_ERR_BUSY && subscribed > 0) {
            if (lock__sub_wait(&w->sub, now + nap) < 0) subscribed = 0;
            continue;
        }
        lock__sleep_ms((uint32_t)nap);
    }
    if (subscribed >= 0) lock__sub_end(&w->sub);
    if (rc == LOCK_OK && owner != NULL)
        lock__queue_hold_owned(d->q, keys[0], out->token, owner, out->valid_until_ms, joined);
    else if (rc == LOCK_OK)
        lock__queue_hold(d->q, keys, nk, token, out[0].valid_until_ms);
    else if (!joined)
        lock__queue_leave(d->q, keys, nk);
    free(w);
    return rc;
}

/* Frees the leases of hs[0..n) (validated by lock.c) on every node, and their in-process queue
 * entries. Returns LOCK_OK, or the first failure in the order of hs: LOCK_ERR_NOT_OWNER (the
 * nodes that refused rule out that the token held a quorum), LOCK_ERR_BACKEND (too many nodes
 * failed to tell) or LOCK_ERR_NOMEM (nothing released). */
int lock__dist_release(struct lock__dist *d, const lock_handle *hs, size_t n) {
    const char *keys[LOCK_MULTI_MAX];
    for (size_t k = 0; k < n; k++)
        keys[k] = hs[k].key;
    if (d->cluster && n > 1 && !keys_routable(d, keys, n)) { /* several slots: one by one */
        int first = LOCK_OK;
        for (size_t k = 0; k < n; k++) {
            int rc = lock__dist_release(d, &hs[k], 1);
            if (rc != LOCK_OK && first == LOCK_OK) first = rc;
        }
        return first;
    }
    if (!keys_routable(d, keys, n)) return LOCK_ERR_INVALID;
    struct work *w = malloc(sizeof *w);
    if (w == NULL) return LOCK_ERR_NOMEM;
    for (size_t i = 0; i < d->n; i++) {
        struct lock__call *c = &w->calls[i];
        call_init(c, d->node[i], LOCK__SCRIPT_RELEASE);
        for (size_t k = 0; k < n; k++) {
            c->keys[c->nkeys++] = hs[k].key;
            c->args[c->nargs++] = hs[k].token;
        }
    }
    calls_run_settled(d, w, d->timeout_ms);
    round_why(w->calls, d->n);
    int first = LOCK_OK;
    for (size_t k = 0; k < n; k++) {
        size_t yes = 0, failed = 0;
        for (size_t i = 0; i < d->n; i++) {
            const struct lock__call *c = &w->calls[i];
            if (c->state != LOCK__CALL_ARRAY || c->nvals != n)
                failed++;
            else if (c->vals[k] == 1)
                yes++;
        }
        int rc = lock__redlock_owner_verdict(d->n, yes, failed, 1);
        if (rc != LOCK_OK && first == LOCK_OK) first = rc;
        lock__queue_release(d->q, hs[k].key, hs[k].token);
    }
    free(w);
    return first;
}

/* Drops one hold of the reentrant lease h (validated by lock.c, with an owner) on every node,
 * freeing it where it was the last. Returns LOCK_OK with *left = the holds left (the largest a
 * node that said yes answered; 0: freed), LOCK_ERR_NOT_OWNER (the refusals rule a quorum
 * out), LOCK_ERR_BACKEND or LOCK_ERR_NOMEM. The in-process queue entry is freed with the lease,
 * when it is not ours any more, or when no hold taken through this client is left. */
int lock__dist_release_owned(struct lock__dist *d, const lock_handle *h, uint32_t *left) {
    const char *key = h->key;
    if (!keys_routable(d, &key, 1)) return LOCK_ERR_INVALID;
    struct work *w = malloc(sizeof *w);
    if (w == NULL) return LOCK_ERR_NOMEM;
    snprintf(w->okey, sizeof w->okey, "%s%s", h->key, LOCK_OWNER_SUFFIX);
    for (size_t i = 0; i < d->n; i++) {
        struct lock__call *c = &w->calls[i];
        call_init(c, d->node[i], LOCK__SCRIPT_RELEASE_OWNED);
        c->keys[c->nkeys++] = h->key;
        c->keys[c->nkeys++] = w->okey;
        c->args[c->nargs++] = h->owner;
        c->args[c->nargs++] = h->token;
    }
    calls_run_settled(d, w, d->timeout_ms);
    round_why(w->calls, d->n);
    size_t yes = 0, failed = 0;
    long long most = 0;
    for (size_t i = 0; i < d->n; i++) {
        const struct lock__call *c = &w->calls[i];
        if (c->state != LOCK__CALL_INT) {
            failed++;
        } else if (c->ival >= 0) {
            yes++;
            if (c->ival > most) most = c->ival;
        }
    }
    free(w);
    int rc = lock__redlock_owner_verdict(d->n, yes, failed, 1);
    if (rc == LOCK_OK) *left = most > UINT32_MAX ? UINT32_MAX : (uint32_t)most;
    if ((rc == LOCK_OK && most == 0) || rc == LOCK_ERR_NOT_OWNER)
        lock__queue_release(d->q, h->key, h->token);
    else if (rc == LOCK_OK)
        lock__queue_drop_hold(d->q, h->key, h->token);
    return rc;
}

/* Resets h's lease to ttl_ms on every node where h's token still holds it, and moves
 * h->valid_until_ms to start + ttl - drift when a quorum did so in time. Returns LOCK_OK,
 * LOCK_ERR_LEASE_LOST (the refusals rule a quorum out, or a quorum answered but the round
 * outlasted the new lease: its validity is gone, though the stores are healthy),
 * LOCK_ERR_BACKEND (too many nodes failed to answer for a quorum to tell) or LOCK_ERR_NOMEM;
 * h is unchanged on failure. A lost lease also frees its in-process queue entry. */
int lock__dist_extend(struct lock__dist *d, lock_handle *h, uint32_t ttl_ms) {
    const char *key = h->key;
    if (!keys_routable(d, &key, 1)) return LOCK_ERR_INVALID;
    struct work *w = malloc(sizeof *w);
    if (w == NULL) return LOCK_ERR_NOMEM;
    snprintf(w->ttl, sizeof w->ttl, "%u", (unsigned)ttl_ms);
    snprintf(w->okey, sizeof w->okey, "%s%s", h->key, LOCK_OWNER_SUFFIX);
    int64_t started = rconn_now_ms();
    for (size_t i = 0; i < d->n; i++) {
        struct lock__call *c = &w->calls[i];
        if (h->owner[0] != '\0') { /* a reentrant lease: never shortened */
            call_init(c, d->node[i], LOCK__SCRIPT_EXTEND_OWNED);
            c->keys[c->nkeys++] = h->key;
            c->keys[c->nkeys++] = w->okey;
            c->args[c->nargs++] = h->owner;
        } else {
            call_init(c, d->node[i], LOCK__SCRIPT_EXTEND);
            c->keys[c->nkeys++] = h->key;
        }
        c->args[c->nargs++] = h->token;
        c->args[c->nargs++] = w->ttl;
    }
    calls_run_settled(d, w, node_timeout(d, ttl_ms));
    round_why(w->calls, d->n);
    int64_t now = rconn_now_ms();
    size_t yes = 0, failed = 0;
    for (size_t i = 0; i < d->n; i++) {
        const struct lock__call *c = &w->calls[i];
        if (c->state != LOCK__CALL_INT)
            failed++;
        else if (c->ival == 1)
            yes++;
    }
    free(w);
    int64_t drift = drift_of(d, ttl_ms);
    int rc = lock__redlock_owner_verdict(d->n, yes, failed,
                                         lock__redlock_validity_ms(ttl_ms, started, now, drift));
    if (rc == LOCK_ERR_NOT_OWNER) rc = LOCK_ERR_LEASE_LOST;
    if (rc == LOCK_ERR_LEASE_LOST) /* the client's other threads need not wait for its deadline */
        lock__queue_release(d->q, h->key, h->token);
    if (rc != LOCK_OK) return rc;
    h->valid_until_ms = started + (int64_t)ttl_ms - drift;
    lock__queue_extend(d->q, h->key, h->token, h->valid_until_ms);
    return LOCK_OK;
}

/* Returns the slot map of an engine over a Redis Cluster (borrowed; valid until d is freed),
 * or NULL. For tests and statistics. This function can't fail. */
rconn_cluster *lock__dist_cluster(const struct lock__dist *d) {
    return d->cluster ? lock__node_cluster(d->node[0]) : NULL;
}

/* Frees d: its queue and its nodes with their idle connections. No operation may be running.
 * lock__dist_free(NULL) is a no-op. This function can't fail. */
void lock__dist_free(struct lock__dist *d) {
    if (d == NULL) return;
    for (size_t i = 0; i < d->n; i++)
        lock__node_free(d->node[i]);
    lock__queue_free(d->q);
    free(d);
}

/* Returns a new engine over the n servers of addrs[0..n) (borrowed; copied; checked by the
 * caller), answering within timeout_ms per node, with Redlock semantics when redlock is
 * non-zero; caller frees with lock__dist_free(). Does not connect. Returns NULL with *err set
 * to LOCK_ERR_NOMEM or LOCK_ERR_BACKEND (a mutex cannot be created, or no random bytes for the
 * client's id). */
struct lock__dist *lock__dist_new(const rconn_addr *addrs, size_t n, int timeout_ms, int redlock,
                                  int *err) {
    struct lock__dist *d = calloc(1, sizeof *d);
    if (d == NULL) {
        *err = LOCK_ERR_NOMEM;
        return NULL;
    }
    char fresh[LOCK_TOKEN_LEN + 1];
    *err = lock__token_new(fresh);
    if (*err != LOCK_OK) {
        free(d);
        return NULL;
    }
    memcpy(d->id, fresh, LOCK__CLIENT_ID_LEN);
    d->id[LOCK__CLIENT_ID_LEN] = '\0';
    d->redlock = redlock;
    d->cluster = n == 1 && addrs[0].cluster;
    d->timeout_ms = timeout_ms;
    d->q = lock__queue_new(err);
    if (d->q == NULL) goto fail;
    for (; d->n < n; d->n++) {
        *err = lock__node_new(&addrs[d->n], timeout_ms, &d->node[d->n]);
        if (*err != LOCK_OK) goto fail;
    }
    *err = LOCK_OK;
    return d;

fail:
    lock__dist_free(d);
    return NULL;
}

/* ---- the ops table of lock_redis.c and lock_redlock.c ---- */

static int dist_acquire(void *impl, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                        lock_handle *out) {
    return lock__dist_acquire(impl, &key, 1, NULL, ttl_ms, wait_ms, out);
}

static int dist_acquire_multi(void *impl, const char *const *keys, size_t n, uint32_t ttl_ms,
                              uint32_t wait_ms, lock_handle *out) {
    return lock__dist_acquire(impl, keys, n, NULL, ttl_ms, wait_ms, out);
}

static int dist_acquire_owned(void *impl, const char *key, const char *owner, uint32_t ttl_ms,
                              uint32_t wait_ms, lock_handle *out) {
    return lock__dist_acquire(impl, &key, 1, owner, ttl_ms, wait_ms, out);
}

static int dist_release(void *impl, const lock_handle *h) {
    return lock__dist_release(impl, h, 1);
}

static int dist_release_multi(void *impl, const lock_handle *hs, size_t n) {
    return lock__dist_release(impl, hs, n);
}

static int dist_release_owned(void *impl, const lock_handle *h, uint32_t *left) {
    return lock__dist_release_owned(impl, h, left);
}

static int dist_extend(void *impl, lock_handle *h, uint32_t ttl_ms) {
    return lock__dist_extend(impl, h, ttl_ms);
}

static void dist_destroy(void *impl) {
    lock__dist_free(impl);
}

/* The one table of both backends; only the name differs. */
#define DIST_OPS(backend)                                                                          \
    {                                                                                              \
        .name = (backend), .acquire = dist_acquire, .release = dist_release,                       \
        .extend = dist_extend, .destroy = dist_destroy, .acquire_multi = dist_acquire_multi,       \
        .release_multi = dist_release_multi, .acquire_owned = dist_acquire_owned,                  \
        .release_owned = dist_release_owned,                                                       \
    }
static const struct lock_ops redis_ops = DIST_OPS("redis");
static const struct lock_ops redlock_ops = DIST_OPS("redlock");

/* Returns a new lock_client over a new engine (lock__dist_new(addrs, n, timeout_ms, redlock)),
 * named "redlock" when redlock is non-zero, else "redis"; caller frees with lock_free(). The
 * addresses are borrowed (copied) and checked by the caller. Returns NULL with *err set as
 * lock__dist_new() and lock__client_new() fail. */
lock_client *lock__dist_client_new(const rconn_addr *addrs, size_t n, int timeout_ms, int redlock,
                                   int *err) {
    struct lock__dist *d = lock__dist_new(addrs, n, timeout_ms, redlock, err);
    if (d == NULL) return NULL;
    lock_client *c = lock__client_new(redlock ? &redlock_ops : &redis_ops, d, err);
    if (c == NULL) lock__dist_free(d);
    return c;
}
