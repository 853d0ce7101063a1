/* market_batch.c - the lock strategies: purchases that arrive together share one lock hold.
 *
 * DESIGN
 * A single market lock serialises every purchase of a realm, so what matters
 * is the work per lock hold and how waiters wait. Purchases do not each take
 * the Redis lock: they join an in-process queue (market__queue_submit(), or
 * market_purchase_idem() which submits and waits), one of cfg.workers lanes
 * chosen by their realm, and each lane's worker thread serves its queue in
 * batches of one realm (flat combining), so that a batch touches one hash
 * slot and realms on different lanes proceed in parallel:
 *   1. one pipeline: WATCH the lock key, the realm's market, every user involved, the
 *      lock's fencing record and any idempotency records; ZMSCORE the market for
 *      every listing; GET the fencing record; HGET funds of every user; MGET
 *      the idempotency records. When buyers race for the same items (a
 *      quarter of the last batch found its listing gone), the funds are read
 *      in a second round trip, and only for listings that are there;
 *   2. decide each purchase in queue order against an in-memory copy of what
 *      was read, exactly as if they ran one at a time (an item sold earlier in
 *      the batch is not listed any more; a buyer's funds fall as it buys; a
 *      repeated idempotency key replays the first outcome);
 *   3. one MULTI/EXEC: our fence into the fencing record, HINCRBY each user's
 *      net change, SADD each buyer's new items, one ZREM of every sold
 *      listing from the market and one from each of its search indexes, the
 *      trade records and the idempotency records - aborted by Redis if anything
 *      watched changed or the lock key expired;
 *   4. take the next batch, and hand every purchase its outcome (its done
 *      callback) once that batch's read is sent, while Redis works on it: the
 *      next batch loses nothing by it, since none of these buyers can ask
 *      again before it is answered (answered at once when no batch follows,
 *      or before a lock is taken). While purchases of the realm keep coming
 *      the worker keeps its lock from one batch to the next (up to
 *      MARKET__HOLD_MAX_MS, and never past half the lease), so a busy market
 *      pays for one acquire and one release per hold, not per batch; an idle
 *      one releases at once.
 * The item strategy takes, instead of the market lock, every listing's and
 * buyer's lock of a batch in one all-or-nothing round trip, with the read of
 * step 1 already sent (answered while the locks are taken; it watches the
 * fencing records and data but not the lock keys, and the leases are checked
 * against the clock before the commit), and hands the locks to a releaser
 * thread after the commit, so that the next batch does not wait for the
 * release's round trip.
 * A purchase still queued when its wait budget ends is answered
 * MARKET_ERR_BUSY (by the worker when it reaches it, or by a waiting caller
 * at once); one already taken into a batch waits for it. Outcomes and
 * invariants are those of serial execution in queue order.
 * On a Redis Cluster, a batch whose realm's slot is split by a migration, or
 * whose lock store keeps failing, is not waited for in place: it goes back
 * to the head of the queue and its realm rests while the lane serves the
 * others (market_lane.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "market/market_batch.h"
#include "market/market_lane.h"
#include "market/market_trade.h"

#define USERS_MAX (2 * MARKET__BATCH_MAX)
/* commands in one of a batch's pipelines: room for the commit's index ZREMs and trade
 * script too */
#define CMDS_MAX (9 + MARKET__HELD_MAX + 2 * USERS_MAX + (4 + MARKET__IDX_KINDS) * MARKET__BATCH_MAX)

/* One lane: a queue of purchases and the worker thread that serves it.
 * Every purchase of a realm goes to the same lane (lane_of), so a realm's
 * purchases are served in the order they came. */
struct market__lane {
    market *m;
    pthread_cond_t cv;             /* signalled when a purchase is queued here, or at stop */
    market_pending *qhead, *qtail; /* purchases waiting, oldest first */
    pthread_t worker;
    int started;
    /* The market lock of the realm last served, kept from one batch to the
     * next while purchases keep coming (the market strategy; this lane's
     * worker's alone). */
    lock_handle hold;
    int holding;
    int64_t hold_since_ms;
    /* The last batch's purchases, decided, handed their outcomes once the
     * next batch's read is on its way to Redis (answer_now). */
    market_pending *answer[MARKET__BATCH_MAX];
    size_t n_answer;
    market__rest rest; /* realms set aside (the worker's alone) */
};

/* The lanes of the lock strategies, the threads that serve them, and the
 * releaser: this layer's own state. */
struct market__queue {
    pthread_mutex_t qmu; /* guards every lane's queue and the threads' state */
    int worker_stop;
    size_t nlanes; /* 1..MARKET_WORKERS_MAX */
    struct market__lane lane[MARKET_WORKERS_MAX];
    /* Item strategy: a batch's locks are released by a releaser thread, so
     * the worker goes on to its next batch at once. */
    pthread_cond_t rcv; /* signalled when a release is queued or at stop */
    struct market__release *rhead, *rtail;
    pthread_t releaser;
    int releaser_started, releaser_stop;
};

enum {
    REQ_WAITING, /* queued */
    REQ_TAKEN,   /* taken by the worker: it will call done, whatever the budget */
};

struct market__batch {
    market_pending *req[MARKET__BATCH_MAX]; /* all of one realm */
    size_t n;
    market__realm realm;
    char member[MARKET__BATCH_MAX][MARKET__MEMBER_MAX];
    uint32_t member_hash[MARKET__BATCH_MAX];
    size_t first[MARKET__BATCH_MAX];  /* index of the first purchase of the same listing */
    int64_t price[MARKET__BATCH_MAX]; /* listing price, 0 when not listed, -1 unreadable */
    /* on the first purchase of a listing: */
    int64_t units[MARKET__BATCH_MAX]; /* units listed as read (1: a unique item) */
    int stack[MARKET__BATCH_MAX];     /* a listing of stackable goods (a count in units:) */
    int64_t left[MARKET__BATCH_MAX];  /* units left as the batch decides */
    char k_idem[MARKET__BATCH_MAX][MARKET__IDEM_REDIS_MAX]; /* "" without a key */
    char record[MARKET__BATCH_MAX][MARKET__IDEM_RECORD_MAX];
    char claim[MARKET__BATCH_MAX][MARKET__IDEM_RECORD_MAX]; /* "<fp> ?<token>" */
    char claim_ttl[MARKET__BATCH_MAX][24];
    char token[MARKET__TOKEN_LEN + 1]; /* this batch's claims */
    int token_set;                     /* token holds one: drawn, or kept by a rest */
    int idem_state[MARKET__BATCH_MAX]; /* market__idem_judge() of the stored record */
    int idem_rc[MARKET__BATCH_MAX];    /* a stored outcome's code */
    int64_t idem_a[MARKET__BATCH_MAX], idem_b[MARKET__BATCH_MAX];
    char idem_trade[MARKET__BATCH_MAX][MARKET_TRADE_ID_MAX + 1]; /* a stored success's */
    size_t same_as[MARKET__BATCH_MAX]; /* a replay of an earlier purchase of the batch: its
                                          index (its trade id is known after the commit),
                                          else SIZE_MAX */
    size_t n_idem;
    size_t buyer[MARKET__BATCH_MAX], seller[MARKET__BATCH_MAX]; /* user indexes */

    size_t n_users;
    const char *user[USERS_MAX];
    uint32_t user_hash[USERS_MAX]; /* id_hash() of user[]: most comparisons stop there */
    char k_user[USERS_MAX][MARKET__KEY_MAX];
    char k_inv[USERS_MAX][MARKET__KEY_MAX];
    char k_stacks[USERS_MAX][MARKET__KEY_MAX];
    market__party party[USERS_MAX]; /* what was read, then as the batch decides */
    int64_t read_funds[USERS_MAX];  /* party[].funds as read: the commit writes the change */
    char delta[USERS_MAX][24];

    /* pipeline scratch */
    const char *args_watch[4 + 2 * MARKET__HELD_MAX + USERS_MAX + MARKET__BATCH_MAX];
    size_t read_list[USERS_MAX]; /* the users whose funds are read */
    int read_split;              /* read funds in later round trips (see batch_read) */
    int64_t now_ms; /* when this attempt began: purchases past their deadline then are not
                       decided (users_needed and batch_decide must agree) */
    market__party sim[USERS_MAX];     /* split reads: parties while walking the batch */
    int sim_state[MARKET__BATCH_MAX]; /* split reads: on a listing's first purchase */
    int64_t sim_left[MARKET__BATCH_MAX]; /* split reads: its units left */
    int fence_same[MARKET__HELD_MAX]; /* the fencing record already holds our fence */
    size_t read_off;                  /* read_build(): the claims in front of the WATCH */
    size_t read_i_users;              /* read_build(): where the funds replies start */
    size_t read_i_units;              /* read_build(): the HMGET of the listings' units */
    int read_splitting;               /* read_build(): funds left to later round trips */
    size_t prefetched;                /* the read's commands already sent, replies in rep */
    const char *args_mget[1 + MARKET__BATCH_MAX];
    const char *args_setidem[MARKET__BATCH_MAX][5];
    const char *args_fence[1 + 2 * MARKET__HELD_MAX];
    const char *args_claim[MARKET__BATCH_MAX][6];
    const char *args_setfence[MARKET__HELD_MAX][3];
    const char *args_zmscore[2 + MARKET__BATCH_MAX];
    const char *args_units[2 + MARKET__BATCH_MAX]; /* HMGET units: <members> */
    const char *args_unitsw[MARKET__BATCH_MAX][4]; /* HINCRBY units: <member> -<sold> */
    const char *args_hdel[2 + MARKET__BATCH_MAX];  /* HDEL units: <members sold out> */
    const char *args_stack[MARKET__BATCH_MAX][4];  /* HINCRBY stacks:{r}:<buyer> <item> <n> */
    char units_delta[MARKET__BATCH_MAX][24], stack_delta[MARKET__BATCH_MAX][24];
    const char *args_hget[USERS_MAX][3];
    const char *args_sadd[2 * USERS_MAX + MARKET__BATCH_MAX]; /* every SADD, back to back */
    const char *args_zrem[2 + MARKET__BATCH_MAX];
    market__idx_entry idx[MARKET__BATCH_MAX]; /* a sold-out listing's search index entries */
    const char *args_zrem_idx[MARKET__BATCH_MAX][MARKET__IDX_KINDS][3];
    const char *args_hincr[USERS_MAX][4];
    const char *args_trades[MARKET__TRADES_ARGC(MARKET__BATCH_MAX)];
    const char **argv[CMDS_MAX];
    int argc[CMDS_MAX];
    redisReply *rep[CMDS_MAX];

    /* the commit's trade records: one per purchase won, in queue order */
    market__trades tw;
    market__trade_rec trade[MARKET__BATCH_MAX];
    size_t trade_req[MARKET__BATCH_MAX]; /* the purchase of trade[k] */
    size_t n_trades;

    /* item strategy with the lock keys in the store: the commit's guard (see
     * batch_commit) */
    int guard;
    char guard_key[16 + MARKET__TAG_MAX + MARKET__TOKEN_LEN]; /* "guard:{<realm>}:<token>" */
    char guard_nkeys[8];
    const char *args_guard_watch[2 + MARKET__HELD_MAX];
    const char *args_guard[5 + MARKET__HELD_MAX];

    /* item strategy: the batch's locks, each listing and each buyer once */
    char lock_key[MARKET__HELD_MAX][MARKET__LOCK_KEY_MAX];
    const char *lock_keys[MARKET__HELD_MAX];
    lock_handle lock_h[MARKET__HELD_MAX];
    size_t n_locks;
};

/* ---- building the batch ---- */

/* FNV-1a of s: ids are compared by it first, so that naming a batch's
 * users and listings costs about one comparison each, not one per earlier
 * one. */
static uint32_t id_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static size_t user_index(struct market__batch *b, const char *id) {
    uint32_t h = id_hash(id);
    for (size_t i = 0; i < b->n_users; i++)
        if (b->user_hash[i] == h && strcmp(b->user[i], id) == 0) return i;
    size_t i = b->n_users++;
    b->user[i] = id;
    b->user_hash[i] = h;
    market__key(b->k_user[i], sizeof b->k_user[i], "users", b->realm.id, id);
    market__key(b->k_inv[i], sizeof b->k_inv[i], "inventory", b->realm.id, id);
    market__key(b->k_stacks[i], sizeof b->k_stacks[i], "stacks", b->realm.id, id);
    return i;
}

/* Names what the batch reads and writes, and draws the batch's token when
 * it has claims to make or need_token (a getrandom() call: only then).
 * Returns MARKET_OK, or MARKET_ERR_STORE when no token can be drawn. */
static int batch_index(struct market__batch *b, int need_token) {
    b->n_users = b->n_idem = 0;
    for (size_t i = 0; i < b->n && !need_token; i++) need_token = b->req[i]->idem != NULL;
    if (need_token && !b->token_set) {
        if (market__token_new(b->token) < 0) return MARKET_ERR_STORE;
        b->token_set = 1;
    }
    for (size_t i = 0; i < b->n; i++) {
        const market_pending *r = b->req[i];
        market__join(b->member[i], sizeof b->member[i], r->item, ".", r->seller,
                     (const char *)NULL);
        b->member_hash[i] = id_hash(b->member[i]);
        b->k_idem[i][0] = '\0';
        if (r->idem) {
            market__idem_key(b->k_idem[i], sizeof b->k_idem[i], b->realm.id, r->buyer, r->idem);
            market__idem_claim(b->claim[i], sizeof b->claim[i], r->idem, b->token);
            b->n_idem++;
        }
        b->first[i] = i;
        for (size_t j = 0; j < i; j++)
            if (b->member_hash[j] == b->member_hash[i] && strcmp(b->member[j], b->member[i]) == 0) {
                b->first[i] = j;
                break;
            }
        b->buyer[i] = user_index(b, r->buyer);
        b->seller[i] = user_index(b, r->seller);
    }
    return MARKET_OK;
}

/* ---- one attempt: read, decide, commit ---- */

/* Appends HGET funds for users[0..n) to the pipeline at *nc. */
static void read_users(struct market__batch *b, size_t *nc, const size_t *users, size_t n) {
    for (size_t j = 0; j < n; j++) {
        const char **a = b->args_hget[j];
        a[0] = "HGET";
        a[1] = b->k_user[users[j]];
        a[2] = "funds";
        b->argv[*nc] = a;
        b->argc[(*nc)++] = 3;
    }
}

/* Reads the funds replies rep[0..n) of users[0..n). Funds that cannot be
 * read fail only the purchases of that user (MARKET__UNREADABLE), not the
 * batch. */
static void parse_users(struct market__batch *b, redisReply **rep, const size_t *users, size_t n) {
    for (size_t j = 0; j < n; j++)
        b->party[users[j]] = market__reply_party(rep[j]);
}

/* Lists user u in b->read_list[0..*n) unless it is read or listed. */
static void need_user(struct market__batch *b, size_t u, size_t *n) {
    if (b->party[u].known != MARKET__UNREAD) return;
    for (size_t j = 0; j < *n; j++)
        if (b->read_list[j] == u) return;
    b->read_list[(*n)++] = u;
}

/* The units purchase r asks for (a unique item: one). */
static int64_t quantity_of(const market_pending *r) {
    return r->quantity > 0 ? r->quantity : 1;
}

/* Split reads: walks the batch in order as batch_decide() will, with the
 * funds read so far, and lists in b->read_list the users whose funds it
 * needs and does not have (the buyer and seller of a purchase whose listing
 * is still unsold when its turn comes). A purchase waiting for funds leaves
 * its listing undecided, so the purchases behind it on that listing wait
 * too. Returns how many users it listed: 0 when the decision can be made. */
static size_t users_needed(struct market__batch *b) {
    size_t n = 0;
    int64_t now = b->now_ms;
    memcpy(b->sim, b->party, b->n_users * sizeof *b->party);
    for (size_t i = 0; i < b->n; i++) {
        b->sim_state[i] = 0; /* on first: 2 undecided */
        b->sim_left[i] = b->units[i];
    }
    for (size_t i = 0; i < b->n; i++) {
        size_t f = b->first[i], bu = b->buyer[i], se = b->seller[i];
        int64_t price = b->price[f];
        if (price <= 0 || b->sim_state[f] != 0 || b->sim_left[f] <= 0 ||
            now >= b->req[i]->deadline_ms)
            continue;
        if (b->k_idem[i][0] && b->idem_state[i] != MARKET__IDEM_FREE) continue; /* settled */
        int64_t q = quantity_of(b->req[i]);
        int rc = market__units_apply(price, b->sim_left[f], q, b->req[i]->expect_price,
                                     &b->sim[bu], &b->sim[se]);
        if (rc == MARKET__NEED_FUNDS) {
            need_user(b, bu, &n);
            need_user(b, se, &n);
            b->sim_state[f] = 2;
        } else if (rc == MARKET_OK) {
            b->sim_left[f] -= q;
        } /* refused: the next purchase of this listing is reached */
    }
    return n;
}

/* Reads what the batch decides on, under WATCH. One round trip claims the
 * idempotency keys (before the WATCH, see market_keys.c) and reads the
 * listings, the leases (fencing records, and the lock keys themselves when
 * they live in the store), the idempotency records and every user's funds.
 * When purchases keep finding their listing gone (buyers racing for the
 * same items), the funds are read in later round trips, and only of the
 * users that deciding in order reaches (users_needed()): a purchase refused
 * because its listing is gone, or was sold earlier in the batch, then costs
 * one ZMSCORE member, not two HGETs. */
static size_t read_build(const market *m, const market__held *held, struct market__batch *b) {
    int split = b->read_split;
    size_t nc = 0, k = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (!b->k_idem[i][0]) continue;
        market__idem_claim_ttl(b->claim_ttl[i], sizeof b->claim_ttl[i], b->req[i]->deadline_ms);
        const char **a = b->args_claim[i];
        a[0] = "SET";
        a[1] = b->k_idem[i];
        a[2] = b->claim[i];
        a[3] = "NX";
        a[4] = "PX";
        a[5] = b->claim_ttl[i];
        b->argv[nc] = a;
        b->argc[nc++] = 6;
    }
    b->read_off = nc;
    b->args_watch[k++] = "WATCH";
    /* The market lock guards market: as a whole, so it is watched; listing
     * locks guard their own listings, and every purchase changes market:. */
    if (m->cfg.strategy == MARKET_STRATEGY_MARKET) {
        b->args_watch[k++] = b->realm.market;
        b->args_watch[k++] = b->realm.units;
    }
    for (size_t i = 0; i < held->n; i++) {
        /* The lock keys when they are read (held->tokens), or under the
         * market strategy; not the item strategy's when the lock lives
         * elsewhere: its read goes out before they are set (see
         * batch_run_item_locked, lease_lapsed). */
        if (m->cfg.strategy == MARKET_STRATEGY_MARKET || held->tokens)
            b->args_watch[k++] = held->key[i];
        b->args_watch[k++] = held->fenced[i];
    }
    for (size_t i = 0; i < b->n; i++)
        if (b->k_idem[i][0]) b->args_watch[k++] = b->k_idem[i];
    for (size_t u = 0; u < b->n_users; u++)
        b->args_watch[k++] = b->k_user[u];
    b->argv[nc] = b->args_watch;
    b->argc[nc++] = (int)k;

    k = 0;
    b->args_zmscore[k++] = "ZMSCORE";
    b->args_zmscore[k++] = b->realm.market;
    for (size_t i = 0; i < b->n; i++)
        b->args_zmscore[k++] = b->member[i];
    b->argv[nc] = b->args_zmscore;
    b->argc[nc++] = (int)k;

    b->argv[nc] = b->args_fence;
    b->argc[nc++] = (int)market__held_read(held, b->args_fence);
    if (b->n_idem) { /* right after the leases, as read_parse() expects */
        k = 0;
        b->args_mget[k++] = "MGET";
        for (size_t i = 0; i < b->n; i++)
            if (b->k_idem[i][0]) b->args_mget[k++] = b->k_idem[i];
        b->argv[nc] = b->args_mget;
        b->argc[nc++] = (int)k;
    }
    k = 0;
    b->args_units[k++] = "HMGET";
    b->args_units[k++] = b->realm.units;
    for (size_t i = 0; i < b->n; i++)
        b->args_units[k++] = b->member[i];
    b->read_i_units = nc;
    b->argv[nc] = b->args_units;
    b->argc[nc++] = (int)k;
    b->read_i_users = nc;
    b->read_splitting = split;
    for (size_t u = 0; u < b->n_users; u++)
        b->read_list[u] = u;
    if (!split) read_users(b, &nc, b->read_list, b->n_users);
    return nc;
}

/* Takes in the nc replies (b->rep) of read_build()'s pipeline, then reads
 * more funds if the read is split. Frees the replies. What cannot be read
 * for one purchase (its listing's score, its idempotency record, its
 * users' funds) fails that purchase alone (ERR_STORE when decided); what
 * concerns the batch (the WATCH, a claim refused, the leases) fails it. */
static int read_parse(market_conn *c, const market__held *held, struct market__batch *b,
                      size_t nc) {
    int rc = MARKET_OK, split = b->read_splitting;
    size_t o = b->read_off, i_mget = o + 3, i_users = b->read_i_users;
    const redisReply *w = b->rep[o], *z = b->rep[o + 1], *f = b->rep[o + 2];
    const redisReply *err = market__reply_error(b->rep, o);
    if (err) { /* a claim refused: e.g. a read-only replica */
        rc = market__fail_reply(c, "claim refused", err);
        goto out;
    }
    if (b->n_idem) {
        const redisReply *mg = b->rep[i_mget];
        if (mg->type != REDIS_REPLY_ARRAY || mg->elements != b->n_idem) {
            rc = market__fail_reply(c, "reading idempotency records", mg);
            goto out;
        }
        for (size_t i = 0, j = 0; i < b->n; i++) {
            b->idem_state[i] = MARKET__IDEM_FREE;
            if (!b->k_idem[i][0]) continue;
            b->idem_state[i] = market__idem_judge(mg->element[j++], b->req[i]->idem, b->token,
                                                  &b->idem_rc[i], &b->idem_a[i], &b->idem_b[i],
                                                  b->idem_trade[i]);
        }
    }
    if (w->type != REDIS_REPLY_STATUS || z->type != REDIS_REPLY_ARRAY || z->elements != b->n) {
        rc = market__fail_reply(c, "read refused", w->type != REDIS_REPLY_STATUS ? w : z);
        goto out;
    }
    if (market__held_lost(held, f)) {
        rc = MARKET_ERR_LEASE_LOST; /* taken over, lapsed, or a newer holder committed */
        goto out;
    }
    for (size_t i = 0; i < held->n; i++) { /* our own earlier commit of this lease */
        const redisReply *e =
            f->type == REDIS_REPLY_ARRAY && i < f->elements ? f->element[i] : NULL;
        b->fence_same[i] = e && e->type == REDIS_REPLY_STRING && e->len == strlen(held->fence[i]) &&
                           memcmp(e->str, held->fence[i], e->len) == 0;
    }
    const redisReply *ur = b->rep[b->read_i_units];
    if (ur->type != REDIS_REPLY_ARRAY || ur->elements != b->n) {
        rc = market__fail_reply(c, "reading the listings' units", ur);
        goto out;
    }
    size_t unlisted = 0;
    for (size_t i = 0; i < b->n; i++) {
        b->price[i] = market__reply_price(z->element[i]);
        unlisted += b->price[i] == MARKET__NOT_LISTED;
        /* no count: a unique item; a count that is not a positive number: unreadable */
        b->stack[i] = ur->element[i]->type != REDIS_REPLY_NIL;
        b->units[i] = b->stack[i] ? market__reply_units(ur->element[i]) : 1;
        if (b->price[i] > 0 && b->units[i] <= 0) b->price[i] = MARKET__PRICE_UNREADABLE;
    }
    /* Next batch: split the read when a quarter of this one was not listed
     * (a lone purchase tells too little to change the mode). */
    if (b->n > 1) b->read_split = unlisted * 4 >= b->n;
    if (!split) {
        parse_users(b, b->rep + i_users, b->read_list, b->n_users);
        goto out;
    }
    market__replies_free(b->rep, nc);
    nc = 0;

    /* Later round trips: the funds of the users that deciding in order will
     * reach, usually one round trip. */
    for (size_t u = 0; u < b->n_users; u++)
        b->party[u] = (market__party){MARKET__UNREAD, 0};
    size_t n_read;
    while ((n_read = users_needed(b)) > 0) { /* every user is watched already */
        nc = 0;
        read_users(b, &nc, b->read_list, n_read);
        rc = market__pipeline_argv(c, nc, b->argc, b->argv, b->rep);
        if (rc < 0) return rc;
        parse_users(b, b->rep, b->read_list, n_read);
        market__replies_free(b->rep, nc);
    }
    return MARKET_OK;
out:
    market__replies_free(b->rep, nc);
    return rc;
}

/* Reads what the batch decides on (see read_build): one pipeline, or the
 * replies of the one already sent (b->prefetched commands). */
static int batch_read(market_conn *c, const market__held *held, struct market__batch *b) {
    size_t nc = b->prefetched;
    b->prefetched = 0;
    if (!nc) {
        nc = read_build(c->m, held, b);
        int rc = market__pipeline_argv(c, nc, b->argc, b->argv, b->rep);
        if (rc < 0) return rc;
    }
    return read_parse(c, held, b, nc);
}

/* Settles purchase i from its idempotency key: a stored outcome, an
 * earlier purchase of this batch under the same key that was decided for
 * good, another attempt in progress, or a record that cannot be read.
 * Returns 1 when settled. */
static int idem_decided(struct market__batch *b, size_t i) {
    market_pending *r = b->req[i];
    int st = b->idem_state[i], stored = b->idem_rc[i];
    int64_t a = b->idem_a[i], bb = b->idem_b[i];
    const char *trade = b->idem_trade[i];
    if (st == MARKET__IDEM_FREE) {
        for (size_t j = 0; j < i; j++) {
            const market_pending *q = b->req[j];
            if (!market__idem_final(q->rc) || strcmp(b->k_idem[j], b->k_idem[i]) != 0) continue;
            st = strcmp(q->idem->fingerprint, r->idem->fingerprint) == 0 ? MARKET__IDEM_DONE
                                                                         : MARKET_ERR_IDEM_MISMATCH;
            stored = q->rc;
            a = q->rc == MARKET_ERR_NOT_ENOUGH ? q->res.available : q->res.price;
            bb = q->res.buyer_funds;
            trade = q->res.trade_id; /* "" until the commit: then copied (batch_commit) */
            if (st == MARKET__IDEM_DONE && !q->res.replayed) b->same_as[i] = j;
            break;
        }
        if (st == MARKET__IDEM_FREE) return 0;
    }
    if (st != MARKET__IDEM_DONE) {
        r->rc = st; /* ERR_IN_PROGRESS, ERR_IDEM_MISMATCH, ERR_STORE */
        return 1;
    }
    r->rc = stored;
    r->res.replayed = 1;
    r->res.price = a;
    r->res.buyer_funds = bb;
    if (stored == MARKET_ERR_NOT_ENOUGH) r->res.available = a, r->res.price = 0;
    snprintf(r->res.trade_id, sizeof r->res.trade_id, "%s", trade);
    return 1;
}

/* Purchase i succeeded in this batch (not a replay): it has writes. */
static int won(const struct market__batch *b, size_t i) {
    return b->req[i]->rc == MARKET_OK && !b->req[i]->res.replayed;
}

/* Purchase i was decided for good in this batch under an idempotency key:
 * its outcome is recorded in the commit. */
static int recorded(const struct market__batch *b, size_t i) {
    const market_pending *r = b->req[i];
    return b->k_idem[i][0] && !r->res.replayed && market__idem_final(r->rc);
}

/* Decides every purchase in order, as if they ran one at a time; returns
 * how many have something to write (a success, or a recorded refusal).
 * Nothing is decided for a purchase whose wait budget had run out when the
 * attempt began. */
static size_t batch_decide(struct market__batch *b) {
    size_t writes = 0;
    int64_t now = b->now_ms;
    for (size_t u = 0; u < b->n_users; u++)
        b->read_funds[u] = b->party[u].funds;
    for (size_t i = 0; i < b->n; i++) {
        b->left[i] = b->units[i];
        b->same_as[i] = SIZE_MAX;
    }
    for (size_t i = 0; i < b->n; i++) {
        market_pending *r = b->req[i];
        size_t f = b->first[i];
        int64_t price = b->price[f];
        r->res = (market_purchase_result){0};
        if (b->k_idem[i][0] && idem_decided(b, i)) continue;
        if (now >= r->deadline_ms) {
            r->rc = MARKET_ERR_BUSY;
        } else {
            market__party *buyer = &b->party[b->buyer[i]], *seller = &b->party[b->seller[i]];
            int64_t q = quantity_of(r);
            int rc = market__units_apply(price, b->left[f], q, r->expect_price, buyer, seller);
            if (rc > 0) rc = MARKET_ERR_STORE; /* funds left unread: users_needed() reads them */
            r->rc = rc;
            if (rc == MARKET_ERR_PRICE_CHANGED) r->res.price = price;
            if (rc == MARKET_ERR_NOT_ENOUGH) r->res.available = b->left[f];
            if (rc == MARKET_OK) {
                b->left[f] -= q;
                r->res.price = price;
                r->res.buyer_funds = buyer->funds;
            }
        }
        writes += won(b, i) || recorded(b, i);
    }
    return writes;
}

/* The item strategy's guard, run right before its MULTI when the lock keys
 * live in the store (KEYS: the lock keys, then the guard key; ARGV: our
 * token). Its read went out before the locks were taken, so it could not
 * watch them; this WATCHes them and checks they hold our token. If one does
 * not (lapsed, or taken over by anyone speaking the lock protocol), it
 * writes the guard key, which is watched too: our own EXEC then aborts. */
static const char guard_script[] =
    "for i = 1, #KEYS - 1 do "
    "if redis.call('GET', KEYS[i]) ~= ARGV[1] then "
    "redis.call('SET', KEYS[#KEYS], '1', 'PX', 1000) return 0 end end "
    "return 1";

/* Appends WATCH <lock keys> <guard key> and the guard script to the
 * commit pipeline at *nc. */
static void guard_build(const market__held *held, struct market__batch *b, size_t *nc) {
    size_t k = 0;
    /* in the realm's slot, as every key of a MULTI on a cluster must be */
    snprintf(b->guard_key, sizeof b->guard_key, "guard:{%s}:%s", b->realm.id, b->token);
    b->args_guard_watch[k++] = "WATCH";
    for (size_t i = 0; i < held->n; i++)
        b->args_guard_watch[k++] = held->key[i];
    b->args_guard_watch[k++] = b->guard_key;
    b->argv[*nc] = b->args_guard_watch;
    b->argc[(*nc)++] = (int)k;
    snprintf(b->guard_nkeys, sizeof b->guard_nkeys, "%zu", held->n + 1);
    k = 0;
    b->args_guard[k++] = "EVAL";
    b->args_guard[k++] = guard_script;
    b->args_guard[k++] = b->guard_nkeys;
    for (size_t i = 0; i < held->n; i++)
        b->args_guard[k++] = held->key[i];
    b->args_guard[k++] = b->guard_key;
    b->args_guard[k++] = held->token[0]; /* the handles of one acquisition share it */
    b->argv[*nc] = b->args_guard;
    b->argc[(*nc)++] = (int)k;
}

/* The fence a trade of purchase i is recorded with: the market lock's, or
 * under the item strategy its listing's lock's ("0" when not found: cannot
 * happen, every listing of a batch is locked). */
static const char *trade_fence(const market *m, const market__held *held,
                               const struct market__batch *b, size_t i) {
    if (held->n == 0) return "0";
    if (m->cfg.strategy != MARKET_STRATEGY_ITEM) return held->fence[0]; /* the market lock */
    char key[MARKET__LOCK_KEY_MAX];
    market__lock_key(key, "item", b->realm.id, b->member[i]);
    for (size_t k = 0; k < held->n; k++)
        if (strcmp(held->key[k], key) == 0) return held->fence[k];
    return "0";
}

/* Appends to the commit at nc what the purchases won move: unique items
 * into their buyers' inventories (one SADD a buyer), units into their
 * buyers' stacks (one HINCRBY a buyer and item), and the listings: one sold
 * out leaves the market, its units record and the search indexes; one
 * sold in part keeps its remaining units (HINCRBY units: <member> -<sold>).
 * Returns the new nc. This function can't fail. */
static size_t commit_goods(struct market__batch *b, size_t nc) {
    size_t k;
    const char **sadd = b->args_sadd;
    for (size_t u = 0; u < b->n_users; u++) {
        k = 0;
        sadd[k++] = "SADD";
        sadd[k++] = b->k_inv[u];
        for (size_t i = 0; i < b->n; i++)
            if (won(b, i) && !b->stack[b->first[i]] && b->buyer[i] == u)
                sadd[k++] = b->req[i]->item;
        if (k == 2) continue;
        b->argv[nc] = sadd;
        b->argc[nc++] = (int)k;
        sadd += k;
    }
    for (size_t i = 0; i < b->n; i++) { /* units: the first purchase of a buyer and item sums */
        if (!won(b, i) || !b->stack[b->first[i]]) continue;
        int64_t units = 0;
        size_t j = 0;
        for (; j < b->n; j++) {
            if (!won(b, j) || !b->stack[b->first[j]] || b->buyer[j] != b->buyer[i] ||
                strcmp(b->req[j]->item, b->req[i]->item) != 0)
                continue;
            if (j < i) break; /* an earlier one sums them */
            units += quantity_of(b->req[j]);
        }
        if (j < i) continue;
        market__i64_str(b->stack_delta[i], units);
        const char **a = b->args_stack[i];
        a[0] = "HINCRBY";
        a[1] = b->k_stacks[b->buyer[i]];
        a[2] = b->req[i]->item;
        a[3] = b->stack_delta[i];
        b->argv[nc] = a;
        b->argc[nc++] = 4;
    }
    size_t kz = 0, kh = 0;
    b->args_zrem[kz++] = "ZREM";
    b->args_zrem[kz++] = b->realm.market;
    b->args_hdel[kh++] = "HDEL";
    b->args_hdel[kh++] = b->realm.units;
    for (size_t f = 0; f < b->n; f++) {
        if (b->first[f] != f || b->price[f] <= 0 || b->left[f] == b->units[f]) continue;
        if (b->left[f] == 0) {
            b->args_zrem[kz++] = b->member[f];
            if (b->stack[f]) b->args_hdel[kh++] = b->member[f];
            continue;
        }
        market__i64_str(b->units_delta[f], b->left[f] - b->units[f]);
        const char **a = b->args_unitsw[f];
        a[0] = "HINCRBY";
        a[1] = b->realm.units;
        a[2] = b->member[f];
        a[3] = b->units_delta[f];
        b->argv[nc] = a;
        b->argc[nc++] = 4;
    }
    if (kh > 2) {
        b->argv[nc] = b->args_hdel;
        b->argc[nc++] = (int)kh;
    }
    if (kz == 2) return nc; /* nothing sold out (a batch may record refusals alone) */
    b->argv[nc] = b->args_zrem;
    b->argc[nc++] = (int)kz;
    for (size_t f = 0; f < b->n; f++) { /* the same listings' index entries */
        if (b->first[f] != f || b->price[f] <= 0 || b->left[f] != 0) continue;
        const market_pending *r = b->req[f];
        market__idx_entry *e = &b->idx[f];
        market__idx_entry_init(e, b->realm.id, r->item, r->seller, b->price[f]);
        for (int x = 0; x < MARKET__IDX_KINDS; x++) {
            const char **a = b->args_zrem_idx[f][x];
            a[0] = "ZREM";
            a[1] = e->key[x];
            a[2] = e->member[x];
            b->argv[nc] = a;
            b->argc[nc++] = 3;
        }
    }
    return nc;
}

static int batch_commit(market_conn *c, const market__held *held, struct market__batch *b) {
    static const char *const multi[1] = {"MULTI"}, *const exec[1] = {"EXEC"};
    size_t nc = 0;
    if (b->guard) guard_build(held, b, &nc);
    size_t pre = nc; /* replies before MULTI's */
    b->argv[nc] = (const char **)multi;
    b->argc[nc++] = 1;
    for (size_t i = 0; i < held->n; i++) {
        if (b->fence_same[i]) continue; /* writing it again would change nothing */
        b->args_setfence[i][0] = "SET";
        b->args_setfence[i][1] = held->fenced[i];
        b->args_setfence[i][2] = held->fence[i];
        b->argv[nc] = b->args_setfence[i];
        b->argc[nc++] = 3;
    }
    for (size_t u = 0; u < b->n_users; u++) {
        const market__party *pu = &b->party[u];
        if (pu->known != MARKET__PRESENT || pu->funds == b->read_funds[u]) continue;
        market__i64_str(b->delta[u], pu->funds - b->read_funds[u]);
        const char **a = b->args_hincr[u];
        a[0] = "HINCRBY";
        a[1] = b->k_user[u];
        a[2] = "funds";
        a[3] = b->delta[u];
        b->argv[nc] = a;
        b->argc[nc++] = 4;
    }
    nc = commit_goods(b, nc);
    b->n_trades = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (recorded(b, i)) {
            const market_pending *r = b->req[i];
            market__idem_record(b->record[i], sizeof b->record[i], r->idem, r->rc,
                                r->rc == MARKET_ERR_NOT_ENOUGH ? r->res.available : r->res.price,
                                r->res.buyer_funds);
        }
        if (!won(b, i)) continue;
        const market_pending *r = b->req[i];
        int keyed = b->k_idem[i][0] != '\0';
        b->trade_req[b->n_trades] = i;
        b->trade[b->n_trades++] = (market__trade_rec){
            .buyer = r->buyer, .seller = r->seller, .item = r->item, .quantity = quantity_of(r),
            .price = r->res.price, .fence = trade_fence(c->m, held, b, i),
            .idem_key = keyed ? b->k_idem[i] : NULL, .idem_record = keyed ? b->record[i] : NULL};
    }
    /* Every final outcome's record, a success's too: the trade script below
     * completes a success's with its trade id, and were the script to fail
     * (its error does not undo the rest of the EXEC), the purchase would still
     * be recorded as done, never done twice. */
    for (size_t i = 0; i < b->n; i++) {
        if (!recorded(b, i)) continue;
        const char **a = b->args_setidem[i];
        a[0] = "SET";
        a[1] = b->k_idem[i];
        a[2] = b->record[i];
        a[3] = "EX";
        a[4] = MARKET__IDEM_TTL;
        b->argv[nc] = a;
        b->argc[nc++] = 5;
    }
    size_t i_trades = 0;
    if (b->n_trades) { /* the trades, and the records of the purchases that made them */
        i_trades = nc;
        b->argv[nc] = b->args_trades;
        b->argc[nc++] = (int)market__trades_argv(c->m, b->realm.id, &b->tw, b->trade,
                                                 b->n_trades, b->args_trades);
    }
    b->argv[nc] = (const char **)exec;
    b->argc[nc++] = 1;

    int rc = market__pipeline_argv(c, nc, b->argc, b->argv, b->rep);
    if (rc < 0) return rc;
    c->unwatch = 0; /* EXEC ends every WATCH */
    const redisReply *r = b->rep[nc - 1];
    const redisReply *err = market__reply_error(b->rep, nc);
    if (err) { /* the guard failed, or a queued command was refused (EXECABORT) */
        rc = market__fail_reply(c, "commit refused", err);
    } else if (r->type == REDIS_REPLY_NIL) {
        rc = MARKET__TXN_ABORTED;
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != nc - pre - 2) {
        rc = market__fail_reply(c, "commit refused", r);
    } else {
        for (size_t i = 0; i < r->elements; i++)
            if (r->element[i]->type == REDIS_REPLY_ERROR)
                rc = market__fail_reply(c, "commit refused", r->element[i]);
        /* EXEC's replies follow MULTI's: the script's is at i_trades - pre - 1 */
        if (rc == MARKET_OK && b->n_trades &&
            market__trades_ids(r->element[i_trades - pre - 1], b->trade, b->n_trades) < 0)
            rc = market__fail(c, "the trade records' ids are unreadable");
        for (size_t t = 0; rc == MARKET_OK && t < b->n_trades; t++)
            memcpy(b->req[b->trade_req[t]]->res.trade_id, b->trade[t].id, sizeof b->trade[t].id);
        for (size_t i = 0; rc == MARKET_OK && i < b->n; i++)
            if (b->same_as[i] != SIZE_MAX)
                memcpy(b->req[i]->res.trade_id, b->req[b->same_as[i]]->res.trade_id,
                       sizeof b->req[i]->res.trade_id);
    }
    market__replies_free(b->rep, nc);
    return rc;
}

/* Item strategy: whether a lease of the batch has run out by our clock
 * (valid_until_ms errs early). Its read did not watch the lock keys (it went
 * out before they were taken), so a lapse is caught here, right before the
 * commit; another holder's commit meanwhile is caught by the fencing records
 * and data keys the read did watch. */
static int lease_lapsed(const struct market__batch *b) {
    int64_t now = lock_now_ms();
    for (size_t k = 0; k < b->n_locks; k++)
        if (now >= b->lock_h[k].valid_until_ms) return 1;
    return 0;
}

static int batch_attempt(market_conn *c, const market__held *held, void *ud) {
    struct market__batch *b = ud;
    b->now_ms = lock_now_ms();
    int rc = batch_read(c, held, b);
    if (rc < 0) return market__unwatch_later(c, rc);
    if (batch_decide(b) == 0) return market__unwatch_later(c, MARKET_OK);
    if (c->m->cfg.test_stall_ms) market__stall(c->m->cfg.test_stall_ms);
    if (c->m->cfg.strategy == MARKET_STRATEGY_ITEM && lease_lapsed(b))
        return market__unwatch_later(c, MARKET_ERR_LEASE_LOST);
    return batch_commit(c, held, b);
}

/* ---- the queue ---- */

/* How long one thread keeps the market lock across batches while purchases
 * keep coming: amortises acquire and release, bounded so that other
 * processes sharing the lock get their turn. */
static int64_t hold_max_ms(const market *m) {
    int64_t quarter = m->cfg.lock_ttl_ms / 4;
    return quarter < MARKET__HOLD_MAX_MS ? quarter : MARKET__HOLD_MAX_MS;
}

static void hold_drop(struct market__lane *ln) {
    if (!ln->holding) return;
    /* a lease we cannot release (the store failing over) expires, or our next acquire of the
     * key takes it over: the lock knows its own tokens (lock.h) */
    (void)lock_release(ln->m->lock, &ln->hold);
    ln->holding = 0;
}

/* Adds the lock "lock:<kind>:{<realm>}:<id>" to the batch's locks unless it
 * is there. This function can't fail. */
static void lock_key_add(struct market__batch *b, const char *kind, const char *id) {
    char key[MARKET__LOCK_KEY_MAX];
    market__lock_key(key, kind, b->realm.id, id);
    for (size_t i = 0; i < b->n_locks; i++)
        if (strcmp(b->lock_key[i], key) == 0) return;
    memcpy(b->lock_key[b->n_locks], key, sizeof key);
    b->lock_keys[b->n_locks] = b->lock_key[b->n_locks];
    b->n_locks++;
}

/* A batch's locks, waiting for the releaser thread. */
struct market__release {
    lock_handle h[MARKET__HELD_MAX];
    size_t n;
    struct market__release *next;
};

/* Releases h[0..n) soon: hands them to the releaser thread, or releases them
 * here when it cannot (no memory, no thread). A lease that is not released
 * expires. This function can't fail. */
static void release_later(market *m, const lock_handle *h, size_t n) {
    struct market__release *r = malloc(sizeof *r);
    if (r) {
        memcpy(r->h, h, n * sizeof *h);
        r->n = n;
        r->next = NULL;
        pthread_mutex_lock(&m->queue->qmu);
        int queued = m->queue->releaser_started && !m->queue->releaser_stop;
        if (queued) {
            if (m->queue->rtail)
                m->queue->rtail->next = r;
            else
                m->queue->rhead = r;
            m->queue->rtail = r;
            pthread_cond_signal(&m->queue->rcv);
        }
        pthread_mutex_unlock(&m->queue->qmu);
        if (queued) return;
        free(r);
    }
    (void)lock_release_multi(m->lock, h, n);
}

/* The releaser: releases queued batches' locks, oldest first; at stop it
 * releases what is queued first. */
static void *releaser_main(void *arg) {
    market *m = arg;
    pthread_mutex_lock(&m->queue->qmu);
    for (;;) {
        struct market__release *r = m->queue->rhead;
        if (!r) {
            if (m->queue->releaser_stop) break;
            pthread_cond_wait(&m->queue->rcv, &m->queue->qmu);
            continue;
        }
        m->queue->rhead = r->next;
        if (!m->queue->rhead) m->queue->rtail = NULL;
        pthread_mutex_unlock(&m->queue->qmu);
        (void)lock_release_multi(m->lock, r->h, r->n);
        free(r);
        pthread_mutex_lock(&m->queue->qmu);
    }
    pthread_mutex_unlock(&m->queue->qmu);
    return NULL;
}

/* The lock wait of a batch ends with the latest budget among its purchases:
 * the others are answered MARKET_ERR_BUSY when their turn to be decided
 * comes after their own (batch_decide). */
static int64_t batch_deadline(const struct market__batch *b) {
    int64_t by = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->req[i]->deadline_ms > by) by = b->req[i]->deadline_ms;
    return by;
}

/* Gives every purchase of b the batch's failure rc, counted per purchase
 * like the 503s it causes. */
static void batch_fail(market *m, struct market__batch *b, int rc) {
    for (size_t i = 0; i < b->n; i++) {
        b->req[i]->rc = rc;
        market__count_result(m, rc);
    }
}

/* Item strategy, while buyers race for the same items: refuses before
 * taking any lock the purchases whose listing is gone (one ZMSCORE, no
 * lock needed: the listing was absent at that instant, a valid moment for
 * the refusal), and moves them behind the others, so that b->n becomes the
 * number still to serve. Purchases with an idempotency key are kept: their
 * answer may be a stored success. Returns how many it refused. */
static size_t prefilter_unlisted(market_conn *c, struct market__batch *b) {
    size_t k = 0;
    b->args_zmscore[k++] = "ZMSCORE";
    b->args_zmscore[k++] = b->realm.market;
    for (size_t i = 0; i < b->n; i++) {
        const market_pending *r = b->req[i];
        market__join(b->member[i], sizeof b->member[i], r->item, ".", r->seller,
                     (const char *)NULL);
        b->args_zmscore[k++] = b->member[i];
    }
    b->argv[0] = b->args_zmscore;
    b->argc[0] = (int)k;
    if (market__pipeline_argv(c, 1, b->argc, b->argv, b->rep) < 0)
        return 0; /* the locked path will meet the same trouble and answer it */
    const redisReply *z = b->rep[0];
    size_t kept = 0, refused = 0;
    market_pending *gone[MARKET__BATCH_MAX];
    if (z->type == REDIS_REPLY_ARRAY && z->elements == b->n) {
        for (size_t i = 0; i < b->n; i++) {
            market_pending *r = b->req[i];
            if (z->element[i]->type == REDIS_REPLY_NIL && !r->idem) {
                r->rc = MARKET_ERR_NOT_LISTED;
                gone[refused++] = r;
            } else {
                b->req[kept++] = r;
            }
        }
        memcpy(b->req + kept, gone, refused * sizeof *gone);
        b->n = kept;
    }
    market__replies_free(b->rep, 1);
    return refused;
}

/* The item strategy's batch: every listing's lock and every buyer's lock,
 * taken all or none in one round trip (no deadlock, no partial hold), one
 * read, one commit, released all at once. Another process's purchase waits
 * only if it shares a listing or a buyer with this batch. Returns MARKET_OK,
 * MARKET__REDIRECTED (set it aside: nothing applied, nobody answered), or the
 * error every purchase was given. */
static int batch_run_item_locked(market_conn *c, struct market__batch *b) {
    market *m = c->m;
    int rc = batch_index(b, m->lock_in_store); /* the commit's guard key carries it */
    b->n_locks = 0;
    for (size_t i = 0; rc == MARKET_OK && i < b->n; i++) {
        lock_key_add(b, "item", b->member[i]);
        lock_key_add(b, "player", b->req[i]->buyer);
    }
    if (rc < 0) {
        batch_fail(m, b, rc);
        return rc;
    }
    /* The read goes out before the locks are asked for, and is answered
     * while they are taken: its WATCH covers everything it reads, so a
     * change made before the locks were ours aborts the commit, and it is
     * read again. It cannot watch the lock keys it is about to set: when
     * they live in the store, the commit's guard checks them (b->guard).
     * (Not with the stall hook, which sleeps before the read.) */
    market__held hd;
    hd.n = 0;
    hd.tokens = 0;
    b->guard = m->lock_in_store;
    for (size_t k = 0; k < b->n_locks; k++)
        market__held_name(&hd, k, b->lock_keys[k]);
    size_t sent = 0;
    if (!m->cfg.test_stall_read_ms) {
        size_t nc = read_build(m, &hd, b);
        if (market__pipeline_send(c, nc, b->argc, b->argv) == MARKET_OK) sent = nc;
    }
    rc = market__lane_lock(c, b->lock_keys, b->n_locks, batch_deadline(b), b->lock_h);
    if (sent && market__pipeline_recv(c, sent, b->rep) != MARKET_OK) sent = 0; /* read it again */
    if (rc == MARKET_OK) {
        if (m->cfg.test_stall_read_ms) market__stall(m->cfg.test_stall_read_ms);
        for (size_t k = 0; k < b->n_locks; k++)
            market__held_set(&hd, k, b->lock_keys[k], &b->lock_h[k]);
        b->prefetched = sent;
        rc = market__attempts(c, b->lock_h, &hd, batch_attempt, b);
        release_later(m, b->lock_h, b->n_locks);
    } else if (sent) {
        market__replies_free(b->rep, sent);
        market__unwatch_later(c, rc); /* UNWATCH before the next pipeline */
    }
    if (rc < 0 && rc != MARKET__REDIRECTED) batch_fail(m, b, rc);
    return rc;
}

/* The item strategy's batch, filtered first while buyers race (see
 * prefilter_unlisted); the refused purchases keep their answer, unless the
 * batch is set aside. Returns as batch_run_item_locked() does. */
static int batch_run_item(market_conn *c, struct market__batch *b) {
    MARKET__COUNT(c->m, batches);
    size_t all = b->n, refused = 0;
    if (b->read_split) {
        refused = prefilter_unlisted(c, b);
        if (b->n == 0) {
            b->n = all;
            return MARKET_OK; /* every one refused; the market still reads as contended */
        }
    }
    int rc = batch_run_item_locked(c, b);
    if (refused) {
        b->read_split = 1; /* it looked uncontended only because it was filtered */
        b->n = all;
    }
    return rc;
}

/* Gives p its outcome and hands it back; p is not touched afterwards. */
static void finish(market *m, market_pending *p, int rc) {
    p->rc = rc;
    if (rc == MARKET_OK && !p->res.replayed) MARKET__COUNT(m, purchased);
    p->done(p);
}

/* Hands the last batch's purchases their outcomes (see DESIGN, step 4). */
static void answer_now(struct market__lane *ln) {
    for (size_t i = 0; i < ln->n_answer; i++) finish(ln->m, ln->answer[i], ln->answer[i]->rc);
    ln->n_answer = 0;
}

/* market_conn's sent hook: the next batch's read is on its way. */
static void answer_sent(void *ud) { answer_now(ud); }

/* Serves batch b of lane ln (see DESIGN). Returns MARKET_OK (every purchase
 * decided), MARKET__REDIRECTED (to be set aside: nothing applied, nobody
 * answered), or the error every purchase was given. */
static int batch_run(market_conn *c, struct market__lane *ln, struct market__batch *b) {
    market *m = c->m;
    if (m->cfg.test_stall_lock_ms) market__stall(m->cfg.test_stall_lock_ms);
    if (m->cfg.strategy == MARKET_STRATEGY_ITEM) {
        answer_now(ln); /* its locks are taken first, which may wait */
        return batch_run_item(c, b);
    }
    MARKET__COUNT(m, batches);
    int rc = batch_index(b, 0);
    if (rc < 0) {
        batch_fail(m, b, rc);
        return rc;
    }
    int64_t now = lock_now_ms();
    int keep = ln->holding && strcmp(ln->hold.key, b->realm.lock) == 0 &&
               now - ln->hold_since_ms < hold_max_ms(m) &&
               ln->hold.valid_until_ms - now >= (int64_t)m->cfg.lock_ttl_ms / 2;
    if (!keep) answer_now(ln); /* releasing and taking the lock may wait */
    if (ln->holding && !keep) hold_drop(ln);
    if (!ln->holding) {
        const char *key = b->realm.lock;
        rc = market__lane_lock(c, &key, 1, batch_deadline(b), &ln->hold);
        if (rc == MARKET_OK) {
            ln->holding = 1;
            ln->hold_since_ms = now;
            if (m->cfg.test_stall_read_ms) market__stall(m->cfg.test_stall_read_ms);
        }
    }
    if (rc == MARKET_OK) {
        market__held hd = {0};
        hd.tokens = m->lock_in_store;
        market__held_set(&hd, 0, b->realm.lock, &ln->hold);
        rc = market__attempts(c, &ln->hold, &hd, batch_attempt, b);
        if (rc < 0) hold_drop(ln); /* whatever went wrong, start the next batch afresh */
    }
    if (rc < 0 && rc != MARKET__REDIRECTED) batch_fail(m, b, rc);
    return rc;
}

/* Makes sure the stored outcomes this batch replays are on enough replicas
 * (market__replicated: their commit may have been answered not_replicated);
 * when that fails, they are answered with its error instead. */
static void confirm_replays(market_conn *c, struct market__batch *b) {
    const char *keys[MARKET__BATCH_MAX];
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->req[i]->res.replayed) keys[n++] = b->k_idem[i];
    int rc = market__replicated(c, keys, n);
    if (rc == MARKET_OK) return;
    for (size_t i = 0; i < b->n; i++)
        if (b->req[i]->res.replayed) {
            b->req[i]->res.replayed = 0;
            b->req[i]->rc = rc;
            market__count_result(c->m, rc);
        }
}

/* ---- the lanes and their workers ---- */

/* Gives m its queue (m->queue) of cfg.workers lanes; each lane's worker
 * starts with its first purchase. Returns 0, or -1 on out-of-memory. */
int market__queue_new(market *m) {
    struct market__queue *q = calloc(1, sizeof *q);
    if (!q) return -1;
    q->nlanes = m->cfg.workers;
    if (pthread_mutex_init(&q->qmu, NULL) != 0) goto fail_q;
    if (pthread_cond_init(&q->rcv, NULL) != 0) goto fail_mu;
    size_t k = 0;
    for (; k < q->nlanes; k++) {
        q->lane[k].m = m;
        if (market__lane_cond_init(&q->lane[k].cv) != 0) break;
    }
    if (k == q->nlanes) {
        m->queue = q;
        return 0;
    }
    while (k-- > 0)
        pthread_cond_destroy(&q->lane[k].cv);
    pthread_cond_destroy(&q->rcv);
fail_mu:
    pthread_mutex_destroy(&q->qmu);
fail_q:
    free(q);
    return -1;
}

/* Returns the lane that serves realm: always the same one (FNV-1a of the id). */
static unsigned lane_of(const struct market__queue *q, const char *realm) {
    return (unsigned)(id_hash(realm) % q->nlanes);
}

/* Takes from ln's queue (under qmu) up to most purchases of one realm, the
 * realm of the oldest one still in its budget that is not resting
 * (market__rest_due), into b->req, keeping the order they came in;
 * purchases of other realms stay queued in theirs.
 * Purchases past their budget (or all of them, when nomem) are taken too
 * and put on *refused with their answer. Returns how many went into b. */
static size_t batch_take(struct market__lane *ln, struct market__batch *b, size_t most, int nomem,
                         market_pending **refused) {
    int64_t now = lock_now_ms();
    const char *realm = NULL;
    size_t n = 0;
    market_pending **pp = &ln->qhead, *prev = NULL;
    while (*pp && (n < most || nomem)) {
        market_pending *p = *pp;
        int late = nomem || now >= p->deadline_ms;
        if (!late && (realm ? strcmp(p->realm, realm) != 0
                            : !market__rest_due(&ln->rest, p->realm, "", now))) {
            prev = p;
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        p->state = REQ_TAKEN;
        if (!late) {
            realm = p->realm;
            b->req[n++] = p;
            continue;
        }
        p->rc = nomem ? MARKET_ERR_NOMEM : MARKET_ERR_BUSY;
        p->next = *refused;
        *refused = p;
    }
    if (!*pp) ln->qtail = prev; /* walked to the end: the last purchase kept is the tail */
    return n;
}

/* Makes p a queued purchase not yet served: as it is submitted, or put back. */
static void pending_reset(market_pending *p) {
    p->res = (market_purchase_result){0};
    p->rc = MARKET_ERR_STORE;
    p->why[0] = '\0';
    p->state = REQ_WAITING;
    p->next = NULL;
}

/* Sets batch b aside (see market_lane.c): its realm rests, and its
 * purchases go back to the head of ln's queue in their order, as if never
 * taken. Returns 0, or -1 when too many of ln's realms rest already (then b
 * is left as it was). */
static int set_aside(struct market__lane *ln, struct market__batch *b) {
    if (market__rest_begin(&ln->rest, b->realm.id, "", b->token_set ? b->token : NULL,
                           lock_now_ms()) < 0)
        return -1;
    pthread_mutex_lock(&ln->m->queue->qmu);
    for (size_t i = b->n; i-- > 0;) {
        market_pending *p = b->req[i];
        pending_reset(p);
        p->next = ln->qhead;
        ln->qhead = p;
        if (!ln->qtail) ln->qtail = p;
    }
    pthread_mutex_unlock(&ln->m->queue->qmu);
    return 0;
}

/* A lane's worker: takes a batch of one realm at a time (batch_take),
 * answers those whose wait budget ran out while queued with
 * MARKET_ERR_BUSY, serves the rest under one lock hold (see DESIGN), hands
 * each its outcome, and (market strategy) releases the lock when its queue
 * is empty, or holds only purchases of resting realms. At stop it serves
 * what is queued first. */
static void *worker_main(void *arg) {
    struct market__lane *ln = arg;
    market *m = ln->m;
    struct market__queue *q = m->queue;
    struct market__batch *b = malloc(sizeof *b);
    market_conn *c = b ? market_conn_new(m, NULL) : NULL;
    int nomem = !b || !c; /* then every purchase it takes fails */
    if (b) b->read_split = 0, b->prefetched = 0, b->guard = 0;
    if (c) c->set_aside = m->cluster != NULL; /* see market_lane.c */
    size_t most = nomem ? 0 : m->cfg.batch_max;
    if (m->cfg.strategy == MARKET_STRATEGY_ITEM && most > MARKET__ITEM_BATCH_MAX)
        most = MARKET__ITEM_BATCH_MAX;
    pthread_mutex_lock(&q->qmu);
    for (;;) {
        if (!ln->qhead && ln->n_answer) { /* nothing to overlap them with */
            pthread_mutex_unlock(&q->qmu);
            answer_now(ln);
            pthread_mutex_lock(&q->qmu);
            continue;
        }
        if (!ln->qhead) {
            if (ln->holding) { /* idle: free the realm's market for other processes */
                pthread_mutex_unlock(&q->qmu);
                hold_drop(ln);
                pthread_mutex_lock(&q->qmu);
                continue;
            }
            if (q->worker_stop) break;
            pthread_cond_wait(&ln->cv, &q->qmu);
            continue;
        }
        market_pending *refused = NULL;
        int64_t now = lock_now_ms();
        size_t n = batch_take(ln, b, most, nomem, &refused);
        if (!n && !refused && !ln->n_answer && !ln->holding) {
            /* every purchase queued is of a resting realm: until the first rest ends */
            market__lane_wait(&ln->cv, &q->qmu, market__rest_next(&ln->rest, now));
            continue;
        }
        pthread_mutex_unlock(&q->qmu);

        while (refused) {
            market_pending *p = refused;
            refused = p->next;
            if (p->rc == MARKET_ERR_BUSY) MARKET__COUNT(m, lock_busy);
            finish(m, p, p->rc);
        }
        if (!n) { /* nothing to serve now: as when idle */
            answer_now(ln);
            hold_drop(ln);
        } else {
            b->n = n;
            market__realm_init(&b->realm, b->req[0]->realm);
            b->token_set = market__rest_token(&ln->rest, b->realm.id, "", b->token);
            c->sent = ln->n_answer ? answer_sent : NULL;
            c->sent_ud = ln;
            int rc = market__route(c, b->realm.id);
            if (rc == MARKET_OK)
                rc = batch_run(c, ln, b);
            else
                batch_fail(m, b, rc);
            c->sent = NULL;
            answer_now(ln); /* when this batch sent nothing */
            if (rc == MARKET__REDIRECTED && set_aside(ln, b) == 0) {
                pthread_mutex_lock(&q->qmu);
                continue;
            }
            if (rc == MARKET__REDIRECTED) batch_fail(m, b, MARKET_ERR_STORE); /* no room */
            market__rest_end(&ln->rest, b->realm.id, "");
            confirm_replays(c, b);
            for (size_t i = 0; i < n; i++) {
                market_pending *p = b->req[i];
                if (MARKET_ERR_HAS_REASON(p->rc))
                    snprintf(p->why, sizeof p->why, "%s", c->errstr);
                ln->answer[i] = p;
            }
            ln->n_answer = n;
        }
        pthread_mutex_lock(&q->qmu);
    }
    pthread_mutex_unlock(&q->qmu);
    answer_now(ln);
    market_conn_free(c);
    free(b);
    return NULL;
}

/* Queues purchase p (arguments already checked: see market_purchase_submit)
 * on its realm's lane and returns at once. Returns MARKET_OK when p is
 * queued (p->done(p) will be called exactly once, from the lane's worker),
 * MARKET_ERR_BUSY after market__queue_stop(), or MARKET_ERR_NOMEM (the
 * worker cannot start). */
int market__queue_submit(market *m, market_pending *p) {
    struct market__queue *q = m->queue;
    pending_reset(p);
    p->deadline_ms = lock_now_ms() + m->cfg.acquire_timeout_ms;
    p->lane = lane_of(q, p->realm);
    struct market__lane *ln = &q->lane[p->lane];
    pthread_mutex_lock(&q->qmu);
    if (q->worker_stop) {
        pthread_mutex_unlock(&q->qmu);
        return MARKET_ERR_BUSY;
    }
    if (!ln->started) {
        if (pthread_create(&ln->worker, NULL, worker_main, ln) != 0) {
            pthread_mutex_unlock(&q->qmu);
            return MARKET_ERR_NOMEM;
        }
        ln->started = 1;
    }
    /* Without a releaser, the workers release their locks themselves. */
    if (m->cfg.strategy == MARKET_STRATEGY_ITEM && !q->releaser_started &&
        pthread_create(&q->releaser, NULL, releaser_main, m) == 0)
        q->releaser_started = 1;
    MARKET__COUNT(m, purchases);
    if (ln->qtail)
        ln->qtail->next = p;
    else
        ln->qhead = p;
    ln->qtail = p;
    pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&q->qmu);
    return MARKET_OK;
}

/* Stops taking purchases: every queued one is served first, then the
 * workers end and the market locks are released; later submissions answer
 * MARKET_ERR_BUSY. Idempotent; this function can't fail. */
void market__queue_stop(market *m) {
    struct market__queue *q = m->queue;
    pthread_mutex_lock(&q->qmu);
    q->worker_stop = 1;
    for (size_t k = 0; k < q->nlanes; k++)
        pthread_cond_signal(&q->lane[k].cv);
    pthread_mutex_unlock(&q->qmu);
    for (size_t k = 0; k < q->nlanes; k++) {
        struct market__lane *ln = &q->lane[k];
        pthread_mutex_lock(&q->qmu);
        int was = ln->started;
        ln->started = 0;
        pthread_mutex_unlock(&q->qmu);
        if (was) pthread_join(ln->worker, NULL);
    }
    /* the workers are gone: release what they left */
    pthread_mutex_lock(&q->qmu);
    q->releaser_stop = 1;
    pthread_cond_signal(&q->rcv);
    int was = q->releaser_started;
    q->releaser_started = 0;
    pthread_mutex_unlock(&q->qmu);
    if (was) pthread_join(q->releaser, NULL);
    for (size_t k = 0; k < q->nlanes; k++)
        hold_drop(&q->lane[k]);
}

/* Stops m's queue and frees what market__queue_new() made. NULL queue: a
 * no-op. This function can't fail. */
void market__queue_free(market *m) {
    struct market__queue *q = m->queue;
    if (!q) return;
    market__queue_stop(m);
    for (size_t k = 0; k < q->nlanes; k++)
        pthread_cond_destroy(&q->lane[k].cv);
    pthread_cond_destroy(&q->rcv);
    pthread_mutex_destroy(&q->qmu);
    free(q);
    m->queue = NULL;
}

/* A caller waiting in market__queue_wait(). */
struct sync_wait {
    market_pending p;
    market *m;
    pthread_cond_t cv;
    int done;
};

static void sync_done(market_pending *p) {
    struct sync_wait *w = p->ud;
    pthread_mutex_lock(&w->m->queue->qmu);
    w->done = 1;
    pthread_cond_signal(&w->cv); /* under the mutex: the waiter cannot free w before this */
    pthread_mutex_unlock(&w->m->queue->qmu);
}

/* Submits one purchase and waits for its outcome. A purchase still queued
 * when its wait budget ends leaves the queue with MARKET_ERR_BUSY; one the
 * worker has taken is waited for. Arguments are already validated by
 * market_purchase_idem(). */
int market__queue_wait(market *m, const char *realm, const char *buyer, const char *seller,
                       const char *item, int64_t quantity, int64_t expect_price,
                       const market_idem *idem, market_purchase_result *res, char *why,
                       size_t whylen) {
    struct sync_wait w = {.p = {.realm = realm, .buyer = buyer, .seller = seller, .item = item,
                                .quantity = quantity, .expect_price = expect_price, .idem = idem,
                                .done = sync_done},
                          .m = m};
    w.p.ud = &w;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) return MARKET_ERR_NOMEM;
    int ok =
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&w.cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok) return MARKET_ERR_NOMEM;
    int rc = market__queue_submit(m, &w.p);
    if (rc != MARKET_OK) {
        pthread_cond_destroy(&w.cv);
        return rc;
    }
    struct timespec until = {(time_t)(w.p.deadline_ms / 1000),
                             (long)(w.p.deadline_ms % 1000) * 1000000L};
    pthread_mutex_lock(&m->queue->qmu);
    while (!w.done) {
        if (w.p.state == REQ_TAKEN) {
            pthread_cond_wait(&w.cv, &m->queue->qmu);
            continue;
        }
        if (pthread_cond_timedwait(&w.cv, &m->queue->qmu, &until) != ETIMEDOUT ||
            w.p.state != REQ_WAITING)
            continue;
        /* Still queued when its budget ran out: leave the queue, busy. */
        struct market__lane *ln = &m->queue->lane[w.p.lane];
        market_pending **pp = &ln->qhead, *prev = NULL;
        while (*pp != &w.p) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        *pp = w.p.next;
        if (ln->qtail == &w.p) ln->qtail = prev;
        w.p.rc = MARKET_ERR_BUSY;
        MARKET__COUNT(m, lock_busy);
        break;
    }
    pthread_mutex_unlock(&m->queue->qmu);
    pthread_cond_destroy(&w.cv);
    *res = w.p.res;
    if (MARKET_ERR_HAS_REASON(w.p.rc)) snprintf(why, whylen, "%s", w.p.why);
    return w.p.rc;
}
