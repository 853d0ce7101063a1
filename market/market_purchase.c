/* market_purchase.c - the purchase kind: buying a listing (a unique item, or
 * units of a stackable good from one seller), served in batches by the
 * combiner (market_combine.c), one realm a batch.
 *
 * DESIGN
 * A batch's locks are the realm's market lock (market strategy: kept from
 * one batch to the next, MARKET__POLICY_HOLD), or every listing's and every
 * buyer's lock of the batch (item strategy: MARKET__POLICY_EACH, its read
 * sent before the locks are taken). An attempt is
 *   1. one pipeline, in the frame every kind shares (market_frame.c):
 *      claim the idempotency keys (SET NX PX, before the WATCH), WATCH the
 *      realm's market, every user involved, the lock key, its fencing
 *      record and any idempotency records; MGET the fencing record; MGET
 *      the idempotency records; then ZMSCORE the market for every listing,
 *      HMGET the listings' units and HGET funds of every user. When
 *      buyers race for the same items (a quarter of the last batch found its
 *      listing gone), the funds are read in later round trips, and only for
 *      listings that are there; under the item strategy the purchases whose
 *      listing is gone are then refused before any lock is taken
 *      (prefilter_unlisted);
 *   2. decide each purchase in queue order against an in-memory copy of what
 *      was read, exactly as if they ran one at a time (an item sold earlier in
 *      the batch is not listed any more; a buyer's funds fall as it buys; a
 *      repeated idempotency key replays the first outcome);
 *   3. one MULTI/EXEC: our fence into the fencing record, HINCRBY each user's
 *      net change, SADD each buyer's new items (HINCRBY its stack for units),
 *      one ZREM of every sold listing from the market and one from each of
 *      its search indexes, the trade records and the idempotency records -
 *      aborted by Redis if anything watched changed or the lock key expired;
 *      under the item strategy with the lock keys in the store, a guard
 *      script checks the leases right before it (guard_build).
 * Outcomes and invariants are those of serial execution in queue order.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "market/market_frame.h"
#include "market/market_kinds.h"
#include "market/market_trade.h"

#define USERS_MAX MARKET__PARTIES_MAX

/* The kind's state on a lane: a batch of purchases of one realm, and what
 * its attempt reads and decides. */
struct market__batch {
    market__kstate k; /* its read and commit buffers (market_combine.h) */
    market__frame f;  /* its open purchases, their keys and the read's frame */
    market__realm realm;
    char k_names[MARKET__IDX_KEY_MAX]; /* the realm's names index */
    char member[MARKET__BATCH_MAX][MARKET__MEMBER_MAX];
    uint32_t member_hash[MARKET__BATCH_MAX];
    size_t first[MARKET__BATCH_MAX];  /* index of the first purchase of the same listing */
    int64_t price[MARKET__BATCH_MAX]; /* listing price, 0 when not listed, -1 unreadable */
    /* on the first purchase of a listing: */
    int64_t units[MARKET__BATCH_MAX]; /* units listed as read (1: a unique item) */
    int stack[MARKET__BATCH_MAX];     /* a listing of stackable goods (a count in units:) */
    int64_t left[MARKET__BATCH_MAX];  /* units left as the batch decides */
    size_t buyer[MARKET__BATCH_MAX], seller[MARKET__BATCH_MAX]; /* indexes in u */
    market__parties u; /* the buyers and sellers */
    market__cut cut;   /* the realm's cut of the batch's sales */

    /* pipeline scratch */
    size_t read_list[USERS_MAX]; /* the users whose funds are read */
    int read_split;              /* read funds in later round trips (see batch_read) */
    int filtered;                /* prefilter_unlisted() refused some of this batch */
    market__party sim[USERS_MAX];     /* split reads: parties while walking the batch */
    int sim_state[MARKET__BATCH_MAX]; /* split reads: on a listing's first purchase */
    int64_t sim_left[MARKET__BATCH_MAX]; /* split reads: its units left */
    size_t read_i_prices;             /* read_build(): the listings' ZMSCORE */
    size_t read_i_units;              /* read_build(): the HMGET of the listings' units */
    size_t read_i_users;              /* read_build(): where the funds replies start */
    int read_splitting;               /* read_build(): funds left to later round trips */
    size_t prefetched;                /* the read's commands already sent, replies in rep */
    size_t sending;                   /* read_send(): the read's commands sent early */
    market__idx_entry idx[MARKET__BATCH_MAX]; /* a sold-out listing's search index entries */
    const char *args_trades[MARKET__TRADES_ARGC(MARKET__BATCH_MAX)];

    /* the commit's trade records: one per purchase won, in queue order */
    market__trades tw;
    market__trade_rec trade[MARKET__BATCH_MAX];
    size_t trade_req[MARKET__BATCH_MAX]; /* the purchase of trade[k] */
    size_t n_trades;

    /* item strategy with the lock keys in the store: the commit's guard (see
     * batch_commit) */
    int guard;
};

/* ---- building the batch ---- */

/* Names what the batch reads and writes: its frame (drawing the batch's
 * token when it has claims to make or need_token), every listing and
 * every buyer and seller. Returns MARKET_OK, or MARKET_ERR_STORE when no
 * token can be drawn. */
static int batch_index(struct market__batch *b, market__cbatch *cb, int need_token) {
    int rc = market__frame_begin(&b->f, cb, need_token);
    if (rc != MARKET_OK) return rc;
    b->f.fees = 1;
    b->u.n = 0;
    for (size_t i = 0; i < b->f.n; i++) {
        const market_order *r = b->f.req[i];
        market__join(b->member[i], sizeof b->member[i], r->item, ".", r->seller,
                     (const char *)NULL);
        b->member_hash[i] = market__id_hash(b->member[i]);
        b->first[i] = i;
        for (size_t j = 0; j < i; j++)
            if (b->member_hash[j] == b->member_hash[i] && strcmp(b->member[j], b->member[i]) == 0) {
                b->first[i] = j;
                break;
            }
        b->buyer[i] = market__parties_of(&b->u, b->realm.id, r->player);
        b->seller[i] = market__parties_of(&b->u, b->realm.id, r->seller);
    }
    return MARKET_OK;
}

/* ---- one attempt: read, decide, commit ---- */

/* Lists user u in b->read_list[0..*n) unless it is read or listed. */
static void need_user(struct market__batch *b, size_t u, size_t *n) {
    if (b->u.party[u].known != MARKET__UNREAD) return;
    for (size_t j = 0; j < *n; j++)
        if (b->read_list[j] == u) return;
    b->read_list[(*n)++] = u;
}

/* The units purchase r asks for (a unique item: one). */
static int64_t quantity_of(const market_order *r) {
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
    int64_t now = b->f.cb->now_ms;
    memcpy(b->sim, b->u.party, b->u.n * sizeof *b->u.party);
    for (size_t i = 0; i < b->f.n; i++) {
        b->sim_state[i] = 0; /* on first: 2 undecided */
        b->sim_left[i] = b->units[i];
    }
    for (size_t i = 0; i < b->f.n; i++) {
        size_t f = b->first[i], bu = b->buyer[i], se = b->seller[i];
        int64_t price = b->price[f];
        if (price <= 0 || b->sim_state[f] != 0 || b->sim_left[f] <= 0 ||
            now >= b->f.req[i]->q.deadline_ms)
            continue;
        if (b->f.idem.idem[i] && b->f.idem.state[i] != MARKET__IDEM_FREE) continue; /* settled */
        int64_t q = quantity_of(b->f.req[i]);
        int rc = market__units_apply(price, b->sim_left[f], q, b->f.req[i]->price, &b->sim[bu],
                                     &b->sim[se], NULL, NULL); /* no cut: a
                        seller's funds are read whatever it is paid */
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
    market__buf *r = &b->k.rb;
    market__frame_read(&b->f, r);
    /* The market lock guards market: as a whole, so it is watched, and with
     * no lock the WATCH alone guards it; listing locks guard their own
     * listings, and every purchase changes market:. */
    if (m->cfg.strategy != MARKET_STRATEGY_ITEM) {
        market__buf_arg(r, b->realm.market);
        market__buf_arg(r, b->realm.units);
    }
    market__parties_watch(&b->u, r);
    /* The lock keys when they are read (held->tokens), or under the market
     * strategy; not the item strategy's when the lock lives elsewhere: its
     * read goes out before they are set (see market_combine.c's run_each,
     * lease_lapsed). */
    market__frame_watched(&b->f, held, m->cfg.strategy == MARKET_STRATEGY_MARKET, r);
    b->read_i_prices = r->n;
    market__rd_prices_begin(r, &b->realm);
    for (size_t i = 0; i < b->f.n; i++)
        market__buf_arg(r, b->member[i]);
    market__buf_end(r, 0);
    b->read_i_units = r->n;
    market__rd_listing_units_begin(r, &b->realm);
    for (size_t i = 0; i < b->f.n; i++)
        market__buf_arg(r, b->member[i]);
    market__buf_end(r, 0);
    b->read_i_users = r->n;
    b->read_splitting = b->read_split;
    if (!b->read_splitting) market__parties_read(&b->u, NULL, b->u.n, r);
    return r->n;
}

/* Takes in the nc replies (b->k.rb.rep) of read_build()'s pipeline, then reads
 * more funds if the read is split. Frees the replies. What cannot be read
 * for one purchase (its listing's score, its idempotency record, its
 * users' funds) fails that purchase alone (ERR_STORE when decided); what
 * concerns the batch (the frame, the listings' replies) fails it. */
static int read_parse(market_conn *c, const market__held *held, struct market__batch *b,
                      size_t nc) {
    redisReply **rep = b->k.rb.rep;
    const redisReply *z = rep[b->read_i_prices], *ur = rep[b->read_i_units];
    int rc = market__frame_judge(&b->f, c, held, rep);
    if (rc == MARKET_OK && !market__reply_array(z, b->f.n, 0))
        rc = market__fail_reply(c, "reading the listings", z);
    if (rc == MARKET_OK && !market__reply_array(ur, b->f.n, 0))
        rc = market__fail_reply(c, "reading the listings", ur);
    if (rc != MARKET_OK) {
        market__replies_free(rep, nc);
        return rc;
    }
    size_t unlisted = 0;
    for (size_t i = 0; i < b->f.n; i++) {
        market__reply_listing_at(z, ur, i, &b->price[i], &b->stack[i], &b->units[i]);
        unlisted += b->price[i] == MARKET__NOT_LISTED;
        /* a count that is not a positive number: unreadable */
        if (b->price[i] > 0 && b->units[i] <= 0) b->price[i] = MARKET__PRICE_UNREADABLE;
    }
    /* Next batch: split the read when a quarter of this one was not listed
     * (a lone purchase tells too little to change the mode). */
    int split = b->read_splitting;
    if (b->f.n > 1 && !b->filtered) b->read_split = unlisted * 4 >= b->f.n;
    if (!split) market__parties_parse(&b->u, rep + b->read_i_users, NULL, b->u.n);
    market__replies_free(rep, nc);
    if (!split) return MARKET_OK;

    /* Later round trips: the funds of the users that deciding in order will
     * reach, usually one round trip. */
    for (size_t u = 0; u < b->u.n; u++)
        b->u.party[u] = (market__party){MARKET__UNREAD, 0};
    size_t n_read;
    while ((n_read = users_needed(b)) > 0) { /* every user is watched already */
        market__buf_reset(&b->k.rb);
        market__parties_read(&b->u, b->read_list, n_read, &b->k.rb);
        rc = market__pipeline_buf(c, &b->k.rb);
        if (rc < 0) return rc;
        market__parties_parse(&b->u, b->k.rb.rep, b->read_list, n_read);
        market__replies_free(b->k.rb.rep, b->k.rb.n);
    }
    return MARKET_OK;
}

/* Reads what the batch decides on (see read_build): one pipeline, or the
 * replies of the one already sent (b->prefetched commands). */
static int batch_read(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct market__batch *b = cb->ks;
    size_t nc = b->prefetched;
    b->prefetched = 0;
    if (!nc) {
        nc = read_build(c->m, held, b);
        int rc = market__pipeline_buf(c, &b->k.rb);
        if (rc < 0) return rc;
    }
    return read_parse(c, held, b, nc);
}

/* Fills purchase r's result from v, a replay. */
static void replay(market_order *r, const market__outcome *v) {
    if (v->rc == MARKET_ERR_NOT_ENOUGH)
        r->res.purchase.available = v->a;
    else
        r->res.purchase.price = v->a;
    r->res.purchase.buyer_funds = v->b;
    r->res.purchase.fee = v->c;
}

/* Decides purchase i against the listing and funds as the batch left them
 * (market__units_apply); its record keeps the price, or a not_enough's
 * units available, the buyer's funds, and the realm's cut. */
static int decide_one(void *ks, size_t i, int64_t *a, int64_t *funds, int64_t *fee) {
    struct market__batch *b = ks;
    market_order *r = b->f.req[i];
    market_purchase_result *res = &r->res.purchase;
    size_t f = b->first[i];
    int64_t price = b->price[f], q = quantity_of(r);
    market__party *buyer = &b->u.party[b->buyer[i]], *seller = &b->u.party[b->seller[i]];
    *res = (market_purchase_result){0};
    int rc = market__units_apply(price, b->left[f], q, r->price, buyer, seller, &b->cut, &res->fee);
    if (rc > 0) rc = MARKET_ERR_STORE; /* funds left unread: users_needed() reads them */
    if (rc == MARKET_ERR_PRICE_CHANGED || rc == MARKET_OK) res->price = price;
    if (rc == MARKET_ERR_NOT_ENOUGH) res->available = b->left[f];
    if (rc == MARKET_OK) {
        b->left[f] -= q;
        res->buyer_funds = buyer->funds;
    }
    *a = rc == MARKET_ERR_NOT_ENOUGH ? res->available : res->price;
    *funds = res->buyer_funds;
    *fee = res->fee;
    return rc;
}

/* Decides every purchase in order, as if they ran one at a time. */
static size_t batch_decide(market__cbatch *cb) {
    struct market__batch *b = cb->ks;
    for (size_t i = 0; i < b->f.n; i++)
        b->left[i] = b->units[i];
    market__frame_cut(&b->f, &b->u, b->f.settings.fee_bps, &b->cut);
    return market__frame_decide(&b->f, decide_one, replay, b);
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

/* Whether the listing of purchase f, the first of its listing, sold out in
 * this batch. */
static int sold_out(const struct market__batch *b, size_t f) {
    return b->first[f] == f && b->price[f] > 0 && b->left[f] == 0 && b->units[f] != 0;
}

/* Appends to the commit what the purchases won move: unique items into
 * their buyers' inventories (one SADD a buyer), units into their buyers'
 * stacks (one HINCRBY a buyer and item), and the listings: one sold out
 * leaves the market, its units record and the search indexes (one ZREM
 * for the market's and the names index's members); one sold in part keeps
 * its remaining units. */
static void commit_goods(struct market__batch *b, market__buf *w) {
    for (size_t u = 0; u < b->u.n; u++) {
        market__fx_items_begin(w, b->u.k_inv[u]);
        for (size_t i = 0; i < b->f.n; i++)
            if (market__frame_won(&b->f, i) && !b->stack[b->first[i]] && b->buyer[i] == u)
                market__buf_arg(w, b->f.req[i]->item);
        market__buf_end(w, 1);
    }
    for (size_t i = 0; i < b->f.n; i++) { /* units: the first purchase of a buyer and item sums */
        if (!market__frame_won(&b->f, i) || !b->stack[b->first[i]]) continue;
        int64_t units = 0;
        size_t j = 0;
        for (; j < b->f.n; j++) {
            if (!market__frame_won(&b->f, j) || !b->stack[b->first[j]] ||
                b->buyer[j] != b->buyer[i] ||
                strcmp(b->f.req[j]->item, b->f.req[i]->item) != 0)
                continue;
            if (j < i) break; /* an earlier one sums them */
            units += quantity_of(b->f.req[j]);
        }
        if (j >= i) market__fx_units(w, b->u.k_stacks[b->buyer[i]], b->f.req[i]->item, units);
    }
    /* a listing sold in part keeps its units; sold out, its units record goes */
    for (size_t f = 0; f < b->f.n; f++)
        if (b->first[f] == f && b->price[f] > 0 && b->left[f] != b->units[f] && b->left[f] != 0)
            market__fx_listing_units(w, &b->realm, b->member[f], b->left[f] - b->units[f]);
    market__fx_delist_units_begin(w, &b->realm);
    for (size_t f = 0; f < b->f.n; f++)
        if (sold_out(b, f) && b->stack[f]) market__buf_arg(w, b->member[f]);
    market__buf_end(w, 1);
    market__fx_delist_begin(w, &b->realm);
    for (size_t f = 0; f < b->f.n; f++)
        if (sold_out(b, f)) market__buf_arg(w, b->member[f]);
    if (market__buf_end(w, 1) == 0) return; /* nothing sold out (refusals recorded alone) */
    market__fx_names_remove_begin(w, b->k_names);
    for (size_t f = 0; f < b->f.n; f++)
        if (sold_out(b, f)) market__buf_arg(w, b->member[f]);
    market__buf_end(w, 1);
    for (size_t f = 0; f < b->f.n; f++) { /* the same listings' index entries */
        if (!sold_out(b, f)) continue;
        market__idx_entry *e = &b->idx[f];
        market__idx_entry_init(e, b->realm.id, b->f.req[f]->item, b->f.req[f]->seller, b->price[f]);
        market__fx_idx_remove(w, e, 0);
    }
}

/* Lists the trades of the purchases won (b->trade). */
static void list_trades(const market *m, const market__held *held, struct market__batch *b) {
    b->n_trades = 0;
    for (size_t i = 0; i < b->f.n; i++) {
        if (!market__frame_won(&b->f, i)) continue;
        const market_order *r = b->f.req[i];
        market__frame_trade(&b->f, i, 1,
                            (market__trade_rec){.buyer = r->player,
                                                .seller = r->seller,
                                                .item = r->item,
                                                .quantity = quantity_of(r),
                                                .price = r->res.purchase.price,
                                                .fee = r->res.purchase.fee,
                                                .house = b->f.settings.house,
                                                .goods = b->stack[b->first[i]],
                                                .fence = trade_fence(m, held, b, i)},
                            b->trade, b->trade_req, &b->n_trades);
    }
}

/* The commit (see DESIGN, step 3). Returns MARKET_OK, MARKET__TXN_ABORTED,
 * MARKET__REDIRECTED or a market error. */
static int batch_commit(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct market__batch *b = cb->ks;
    market__buf *w = &b->k.wb;
    market__buf_reset(w);
    if (b->guard) { /* in the realm's slot, as every key of a MULTI on a cluster must be */
        const char *guard_key = market__buf_join(w, "guard:{", b->realm.id, "}:", cb->token,
                                                 (const char *)NULL);
        market__fx_guard(w, held->key, held->n, guard_key, held->token[0]);
    }
    size_t pre = w->n; /* replies before MULTI's */
    market__fx_multi(w);
    market__frame_fences(&b->f, held, w);
    market__parties_funds(&b->u, w);
    market__frame_cut_pay(&b->f, &b->cut, w);
    commit_goods(b, w);
    for (size_t f = 0; cb->policy == MARKET__POLICY_EACH && f < b->f.n; f++)
        if (sold_out(b, f))
            market__held_drop(held, "item", b->realm.id, b->member[f], w); /* sold out */
    market__frame_records(&b->f, w);
    list_trades(c->m, held, b);
    /* the trades, and the records of the purchases that made them */
    int rc = market__trades_commit(c, w, pre, b->realm.id, &b->tw, b->trade, b->n_trades,
                                   b->args_trades);
    if (rc == MARKET_OK)
        market__trades_hand(cb->req, b->f.n, b->trade, b->trade_req, b->n_trades,
                            b->f.idem.same_as);
    return rc;
}

/* ---- the kind's ops (market_combine.h) ---- */

/* Item strategy, while buyers race for the same items: refuses before
 * taking any lock the purchases whose listing is gone (one ZMSCORE, no
 * lock needed: the listing was absent at that instant, a valid moment for
 * the refusal), and moves them behind the others, so that b->f.n and
 * cb->n_open become the number still to serve. Purchases with an idempotency key are kept: their
 * answer may be a stored success. Returns how many it refused. */
static size_t prefilter_unlisted(market_conn *c, struct market__batch *b, market__cbatch *cb) {
    market__buf_reset(&b->k.rb);
    market__rd_prices_begin(&b->k.rb, &b->realm);
    for (size_t i = 0; i < cb->n_open; i++) {
        const market_order *r = cb->req[i]->order;
        market__join(b->member[i], sizeof b->member[i], r->item, ".", r->seller,
                     (const char *)NULL);
        market__buf_arg(&b->k.rb, b->member[i]);
    }
    market__buf_end(&b->k.rb, 0);
    if (market__pipeline_buf(c, &b->k.rb) < 0)
        return 0; /* the locked path will meet the same trouble and answer it */
    const redisReply *z = b->k.rb.rep[0];
    size_t kept = 0, refused = 0;
    market_queued *gone[MARKET__BATCH_MAX];
    if (market__reply_array(z, cb->n_open, 0)) {
        for (size_t i = 0; i < cb->n_open; i++) {
            market_order *r = cb->req[i]->order;
            if (market__reply_nil(market__reply_at(z, i)) && !r->idem) {
                r->rc = MARKET_ERR_NOT_LISTED;
                gone[refused++] = &r->q;
            } else {
                cb->req[kept++] = &r->q;
            }
        }
        memcpy(cb->req + kept, gone, refused * sizeof *gone);
        cb->n_open = kept;
    }
    market__replies_free(b->k.rb.rep, 1);
    return refused;
}

/* Names the batch's purchases, users and records, and its locks: the
 * realm's market lock, or (item strategy) every listing's and every buyer's
 * lock, after refusing, while buyers race, the purchases whose listing is
 * gone (prefilter_unlisted). */
static int prepare(market_conn *c, market__cbatch *cb) {
    market *m = c->m;
    struct market__batch *b = cb->ks;
    market__realm_init(&b->realm, cb->realm);
    market__idx_names_key(b->k_names, b->realm.id);
    MARKET__COUNT(m, batches);
    b->filtered = 0;
    b->guard = 0;
    if (cb->policy != MARKET__POLICY_EACH) return batch_index(b, cb, 0);
    /* While buyers race: the refused keep their answer, and the market keeps
     * reading as contended (it looks uncontended only because it was filtered). */
    b->filtered = b->read_split && prefilter_unlisted(c, b, cb) > 0;
    b->f.n = 0;
    b->f.cb = cb;
    if (cb->n_open == 0) return MARKET_OK;
    b->guard = m->lock_in_store;
    int rc = batch_index(b, cb, m->lock_in_store); /* the commit's guard key carries the token */
    for (size_t i = 0; rc == MARKET_OK && i < b->f.n; i++) {
        market__cbatch_lock(cb, "item", b->member[i]);
        market__cbatch_lock(cb, "player", b->f.req[i]->player);
    }
    return rc;
}

/* MARKET__POLICY_EACH: the read, sent before the locks are taken (see
 * market_combine.c); read_recv() takes its replies in once they are ours,
 * or drops them. */
static void read_send(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct market__batch *b = cb->ks;
    size_t nc = read_build(c->m, held, b);
    b->sending = market__buf_seal(&b->k.rb) == MARKET_OK &&
                         market__pipeline_send(c, nc, b->k.rb.argc, b->k.rb.argv) == MARKET_OK
                     ? nc
                     : 0;
}

static void read_recv(market_conn *c, market__cbatch *cb, int locked) {
    struct market__batch *b = cb->ks;
    size_t sent = b->sending;
    b->sending = 0;
    if (sent && market__pipeline_recv(c, sent, b->k.rb.rep) != MARKET_OK) sent = 0; /* read again */
    if (locked) {
        b->prefetched = sent;
    } else if (sent) {
        market__replies_free(b->k.rb.rep, sent);
        (void)market__unwatch_later(c, MARKET_OK); /* UNWATCH before the next pipeline */
    }
}

/* Buying a listing: a unique item, or units of a stackable good from one seller. */
const struct market__kind market__purchase_kind = {
    .name = "purchase",
    .slot = 0,
    .state_size = sizeof(struct market__batch),
    .prepare = prepare,
    .read_send = read_send,
    .read_recv = read_recv,
    .read = batch_read,
    .decide = batch_decide,
    .commit = batch_commit,
};
