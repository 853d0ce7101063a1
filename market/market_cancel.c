/* market_cancel.c - the cancel kind: a buy order taken back by its buyer
 * (MARKET_ORDER_CANCEL), served in batches by the combiner
 * (market_combine.c) on the purchases' lanes.
 *
 * DESIGN
 * A batch's lock is the realm's market lock under the market strategy
 * (kept from one batch to the next, as the purchases' batches keep it),
 * and none under the others: its WATCH alone guards it, as every kind that
 * changes an order or a player's funds watches what it changes. An attempt
 *   1. reads, under WATCH of each order's hash and each buyer's hash, each
 *      order's fields and each buyer's funds;
 *   2. decides in queue order: the order exists, its buyer is the player
 *      who asks (another player's order is answered as no such order, so
 *      that ids tell a stranger nothing), and it was not taken back earlier
 *      in the batch; its units left times its price go from the buyer's
 *      escrow back to its funds;
 *   3. commits in one MULTI/EXEC: our fences, the funds and the escrow, and
 *      each order's hash, book entry and place among its buyer's orders
 *      removed.
 * A cancel has no idempotency key: a second one finds no order.
 */
#include "market/market_kinds.h"

#include <string.h>

#include "market/market_frame.h"
#include "market/market_trade.h"

/* The kind's state on a lane: a batch of one realm's cancels, and what its
 * attempt reads and decides. */
struct cancel_batch {
    market__kstate k; /* its read and commit buffers (market_combine.h) */
    market__frame f;  /* its open orders and the read's frame */
    market__realm realm;
    market__deals d;                   /* the buy orders, each once, */
    market_bid bid[MARKET__BATCH_MAX]; /* as read */
    size_t of[MARKET__BATCH_MAX];      /* order i's buy order */
    size_t buyer[MARKET__BATCH_MAX];   /* the asking player's party */
    market__parties u;
};

/* Names the batch's orders and its lock (the market strategy's). */
static int prepare(market_conn *c, market__cbatch *cb) {
    struct cancel_batch *b = cb->ks;
    (void)c;
    market__realm_init(&b->realm, cb->realm);
    int rc = market__frame_begin(&b->f, cb, 0);
    b->d.t = &market__deal_order;
    b->d.n = b->u.n = 0;
    b->f.deals = &b->d;
    b->f.deals_out = b->bid;
    b->f.parties = &b->u;
    for (size_t i = 0; rc == MARKET_OK && i < b->f.n; i++) {
        b->of[i] = market__deals_of(&b->d, b->f.req[i]->id);
        b->buyer[i] = market__parties_of(&b->u, b->realm.id, b->f.req[i]->player);
    }
    return rc;
}

/* The read (see DESIGN, step 1). Returns MARKET_OK, or the error of the
 * whole batch. */
static int batch_read(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct cancel_batch *b = cb->ks;
    market__buf *r = &b->k.rb;
    market__frame_read(&b->f, r);
    market__frame_watched(&b->f, held, 0, r);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    rc = market__frame_judge(&b->f, c, held, r->rep);
    market__replies_free(r->rep, r->n);
    return rc;
}

/* Decides order i: takes its buy order back, as the batch left it. */
static int decide_one(void *ks, size_t i, int64_t *a, int64_t *b_, int64_t *c) {
    struct cancel_batch *b = ks;
    market_order *o = b->f.req[i];
    market_cancel_result *res = &o->res.cancel;
    (void)a, (void)b_, (void)c; /* a cancel keeps no record */
    *res = (market_cancel_result){0};
    const market_bid *bid = &b->bid[b->of[i]];
    if (b->d.rc[b->of[i]] != MARKET_OK) return b->d.rc[b->of[i]];
    if (strcmp(bid->buyer, o->player) != 0) return MARKET_ERR_NO_ORDER;
    for (size_t j = 0; j < i; j++) /* taken back earlier in the batch */
        if (market__frame_won(&b->f, j) && b->f.req[j]->id == o->id) return MARKET_ERR_NO_ORDER;
    market__party *p = &b->u.party[b->buyer[i]];
    if (p->known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    if (p->known != MARKET__PRESENT) return MARKET_ERR_NO_PLAYER;
    res->bid = *bid;
    res->refund = bid->left * bid->price; /* escrowed whole when it rested */
    p->funds += res->refund; /* no overflow: a realm's funds and escrow fit an int64 */
    res->buyer_funds = p->funds;
    return MARKET_OK;
}

/* A cancel is never a replay. */
static void replay(market_order *o, const market__outcome *v) {
    (void)o, (void)v;
}

static size_t batch_decide(market__cbatch *cb) {
    struct cancel_batch *b = cb->ks;
    return market__frame_decide(&b->f, decide_one, replay, b);
}

/* The commit (see DESIGN, step 3). */
static int batch_commit(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct cancel_batch *b = cb->ks;
    market__buf *w = &b->k.wb;
    market__frame_commit(&b->f, held, &b->u, NULL, w); /* a cancel keeps no record */
    for (size_t i = 0; i < b->f.n; i++) {
        if (!market__frame_won(&b->f, i)) continue;
        const market_cancel_result *res = &b->f.req[i]->res.cancel;
        market__fx_escrow(w, b->u.k_user[b->buyer[i]], -res->refund);
        market__fx_bid_gone(w, b->realm.id, &res->bid);
    }
    return market__trades_commit(c, w, 0, b->realm.id, NULL, NULL, 0, NULL);
}

/* ---- the kind's ops (market_combine.h) ---- */

/* Taking a buy order back. */
const struct market__kind market__cancel_kind = {
    .name = "cancel",
    .slot = 4,
    .policy = market__policy_realm_or_none, /* see DESIGN */
    .state_size = sizeof(struct cancel_batch),
    .prepare = prepare,
    .read = batch_read,
    .decide = batch_decide,
    .commit = batch_commit,
};
