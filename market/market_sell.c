/* market_sell.c - the sell kind: units of a stackable good sold into the
 * item's book (MARKET_ORDER_SELL), to the best buy orders at or over a
 * price, at each order's price, all or nothing or as many as they want,
 * served in batches by the combiner (market_combine.c) on the purchases'
 * lanes. The mirror of the buy kind (market_buy.c), over the bids
 * (market_bids.h) instead of the listings.
 *
 * DESIGN
 * An attempt
 *   1. reads, under WATCH of each order's book and each seller's funds and
 *      stacks: each order's range of its book (the best
 *      MARKET__BIDS_SCAN at or over its price), the units of the item each
 *      seller holds, and each seller's funds; then, in a second round trip,
 *      under WATCH of every buy order of the table, their fields;
 *   2. decides in queue order against that table (market__bids_fill()), as
 *      if the orders ran one at a time;
 *   3. commits in one MULTI/EXEC: our fences, the sellers' funds and the
 *      house's cut, the sellers' units, every buy order's units left (or
 *      its removal from the book when it is filled), each buyer's units
 *      and escrow, a trade record a fill (market_trade.c), and the
 *      idempotency records.
 * Its lock is the realm's market lock under the market strategy, and none
 * under the others: the WATCH guards it, as every kind that changes a buy
 * order, a book, or a player's funds or stacks watches what it changes
 * (market_bids.c says why the buyers' need not be). A sale fills at most
 * MARKET_FILL_MAX buy orders; a seller's own orders are left out.
 */
#include "market/market_kinds.h"

#include <string.h>

#include "market/market_bids.h"

#define SELL_BATCH_MAX 8 /* orders a batch takes (each reads up to MARKET__BIDS_SCAN bids) */
_Static_assert(SELL_BATCH_MAX <= MARKET__BIDS_ORDERS, "a sell batch outgrows its bids table");
#if SELL_BATCH_MAX * (MARKET__BIDS_SCAN + 1) > MARKET__PARTIES_MAX
#error "a sell batch names more players than market__parties holds"
#endif

/* The kind's state on a lane: a batch of one realm's sells. */
struct sell_batch {
    market__kstate k; /* its read and commit buffers (market_combine.h) */
    market__frame f;  /* its open orders, their keys and the read's frame */
    market__realm realm;
    char k_book[SELL_BATCH_MAX][MARKET__KEY_MAX];
    char lo[SELL_BATCH_MAX][24];     /* minus its price: the lowest score it sells to */
    size_t seller[SELL_BATCH_MAX];   /* its party */
    size_t first[SELL_BATCH_MAX];    /* the first order of its seller and item */
    int64_t stacked[SELL_BATCH_MAX]; /* on a first: units held, as read and decided */
    int64_t stacked_read[SELL_BATCH_MAX];
    market__parties u; /* the sellers, then the buyers */
    market__cut cut;
    size_t i_own;
    market__bids t; /* the buy orders the batch may fill */
};

/* ---- reading ---- */

/* The first round trip (see DESIGN, step 1). */
static int read_books(market_conn *c, const market__held *held, struct sell_batch *b) {
    market__buf *r = &b->k.rb;
    market__frame_read(&b->f, r);
    for (size_t i = 0; i < b->f.n; i++)
        market__buf_arg(r, b->k_book[i]);
    for (size_t s = 0; s < b->u.n; s++) { /* the sellers, so far the table's only players */
        market__buf_arg(r, b->u.k_user[s]);
        market__buf_arg(r, b->u.k_stacks[s]);
    }
    market__frame_watched(&b->f, held, 0, r);
    b->i_own = r->n;
    for (size_t i = 0; i < b->f.n; i++) {
        market__rd_book_from(r, b->k_book[i], b->lo[i], MARKET__BIDS_SCAN);
        market__rd_units(r, b->u.k_stacks[b->seller[i]], b->f.req[i]->item);
    }
    size_t n_sellers = b->u.n;
    market__parties_read(&b->u, NULL, n_sellers, r);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    redisReply **rep = r->rep;
    rc = market__frame_judge(&b->f, c, held, rep);
    market__bids_begin(&b->t);
    for (size_t i = 0; rc == MARKET_OK && i < b->f.n; i++) {
        rc = market__bids_offers(c, &b->t, i, rep[b->i_own + 2 * i], b->k_book[i]);
        b->stacked[i] = b->stacked_read[i] = market__reply_units(rep[b->i_own + 2 * i + 1]);
    }
    if (rc == MARKET_OK) market__parties_parse(&b->u, rep + b->i_own + 2 * b->f.n, NULL, n_sellers);
    market__replies_free(rep, r->n);
    return rc;
}

static int batch_read(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct sell_batch *b = cb->ks;
    int rc = read_books(c, held, b);
    return rc == MARKET_OK ? market__bids_read(c, &b->t, b->realm.id, &b->u, &b->k.rb) : rc;
}

/* ---- deciding ---- */

/* Decides order i against the table; on a success moves the seller's
 * funds and units and the buy orders' units left in the table. */
static int decide_order(struct sell_batch *b, size_t i) {
    market_order *o = b->f.req[i];
    market_sell_result *res = &o->res.sell;
    size_t f = b->first[i];
    market__party seller = b->u.party[b->seller[i]];
    if (seller.known == MARKET__UNREADABLE || b->stacked[f] < 0) return MARKET_ERR_STORE;
    if (seller.known == MARKET__ABSENT) return MARKET_ERR_NO_PLAYER;
    if (b->stacked[f] < o->quantity) {
        res->held = b->stacked[f];
        return MARKET_ERR_NOT_HELD;
    }
    market__cut_copy cc; /* the sale works on copies, kept only when it succeeds */
    market__cut_begin(&cc, &b->cut, &b->u, b->seller[i], &seller);
    market__sold sold;
    int rc = market__bids_fill(&b->t, i, o->player, o->quantity, o->price,
                               o->partial ? 0 : MARKET__FILL_ALL, &seller, &cc.cut, &sold);
    if (rc == MARKET_OK && sold.units == 0) rc = MARKET_ERR_NOT_ENOUGH; /* partial: none wanted */
    if (rc == MARKET_ERR_NOT_ENOUGH) res->available = sold.available;
    if (rc != MARKET_OK) return rc;
    market__bids_take(&b->t, i);
    b->u.party[b->seller[i]] = seller;
    market__cut_keep(&cc, &b->cut, &b->u);
    b->stacked[f] -= sold.units;
    res->quantity = sold.units;
    res->total = sold.total;
    res->fee = sold.fee;
    res->seller_funds = seller.funds;
    return MARKET_OK;
}

/* Fills order o's result from v, a replay: the units sold, the seller's
 * funds and the total, not the fee. */
static void replay(market_order *o, const market__outcome *v) {
    market_sell_result *res = &o->res.sell;
    if (v->rc == MARKET_ERR_NOT_ENOUGH) res->available = v->a;
    if (v->rc == MARKET_ERR_NOT_HELD) res->held = v->a;
    if (v->rc != MARKET_OK) return;
    res->quantity = v->a;
    res->seller_funds = v->b;
    res->total = v->c;
}

/* Decides order i (decide_order); its record keeps a refusal's units
 * (available, or held) or a success's units sold, the seller's funds and
 * the total. */
static int decide_one(void *ks, size_t i, int64_t *a, int64_t *funds, int64_t *total) {
    struct sell_batch *b = ks;
    market_sell_result *res = &b->f.req[i]->res.sell;
    *res = (market_sell_result){0};
    int rc = decide_order(b, i);
    *a = rc == MARKET_ERR_NOT_ENOUGH ? res->available
         : rc == MARKET_ERR_NOT_HELD ? res->held
                                     : res->quantity;
    *funds = res->seller_funds;
    *total = res->total;
    return rc;
}

static size_t batch_decide(market__cbatch *cb) {
    struct sell_batch *b = cb->ks;
    for (size_t i = 0; i < b->f.n; i++)
        if (b->first[i] == i) b->stacked[i] = b->stacked_read[i];
    market__bids_restart(&b->t, b->f.n);
    market__frame_cut(&b->f, &b->u, b->f.settings.fee_bps, &b->cut);
    return market__frame_decide(&b->f, decide_one, replay, b);
}

/* ---- committing ---- */

/* Appends the units each seller has left of each item it sold, once; an
 * HDEL when none is left, so it must come before any units the seller gets
 * as a buyer in the same commit. */
static void commit_sellers(struct sell_batch *b, market__buf *w) {
    for (size_t i = 0; i < b->f.n; i++) {
        if (b->first[i] != i || b->stacked[i] == b->stacked_read[i]) continue;
        const char *k = b->u.k_stacks[b->seller[i]], *item = b->f.req[i]->item;
        if (b->stacked[i] == 0)
            market__fx_units_gone(w, k, item);
        else
            market__fx_units(w, k, item, b->stacked[i] - b->stacked_read[i]);
    }
}

/* Hands each success its parts and trade ids, and each repeat inside the
 * batch its first's trade id. */
static void hand_trades(struct sell_batch *b) {
    size_t at = 0;
    for (size_t i = 0; i < b->f.n; i++) {
        if (!market__frame_won(&b->f, i)) continue;
        market_sell_result *res = &b->f.req[i]->res.sell;
        res->n_fills =
            market__bids_hand(&b->t, i, at, b->f.req[i]->player, res->fill, res->trade_id);
        at += res->n_fills;
    }
    for (size_t i = 0; i < b->f.n; i++)
        if (b->f.idem.same_as[i] != SIZE_MAX)
            memcpy(b->f.req[i]->res.sell.trade_id,
                   b->f.req[b->f.idem.same_as[i]]->res.sell.trade_id, MARKET_TRADE_ID_MAX + 1);
}

/* The commit (see DESIGN, step 3). */
static int batch_commit(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct sell_batch *b = cb->ks;
    market__buf *w = &b->k.wb;
    market__frame_commit(&b->f, held, &b->u, &b->cut, w);
    commit_sellers(b, w); /* before the buyers': a seller may buy in the batch too */
    b->t.n_trades = 0;
    for (size_t i = 0; i < b->f.n; i++)
        if (market__frame_won(&b->f, i))
            market__bids_commit(&b->t, &b->f, &b->u, i, b->f.req[i]->item, b->f.settings.house,
                                held->n ? held->fence[0] : "0", w);
    market__bids_commit_left(&b->t, b->realm.id, w);
    int rc = market__bids_trades(&b->t, c, w, b->realm.id);
    if (rc == MARKET_OK) hand_trades(b);
    return rc;
}

/* ---- the kind's ops (market_combine.h) ---- */

/* Names the batch's orders, books, sellers and lock. */
static int prepare(market_conn *c, market__cbatch *cb) {
    struct sell_batch *b = cb->ks;
    (void)c;
    market__realm_init(&b->realm, cb->realm);
    int rc = market__frame_begin(&b->f, cb, 0);
    b->f.fees = 1;
    b->u.n = 0;
    for (size_t i = 0; rc == MARKET_OK && i < b->f.n; i++) {
        const market_order *o = b->f.req[i];
        market__key_book(b->k_book[i], b->realm.id, o->item);
        market__i64_str(b->lo[i], -o->price);
        b->seller[i] = market__parties_of(&b->u, b->realm.id, o->player);
        b->first[i] = i;
        for (size_t j = 0; j < i; j++)
            if (b->seller[j] == b->seller[i] && strcmp(b->f.req[j]->item, o->item) == 0) {
                b->first[i] = j;
                break;
            }
    }
    return rc;
}

static size_t most(const market *m, int policy) {
    (void)policy;
    return m->cfg.batch_max < SELL_BATCH_MAX ? m->cfg.batch_max : SELL_BATCH_MAX;
}

/* Selling units into the book. */
const struct market__kind market__sell_kind = {
    .name = "sell",
    .slot = 5,
    .policy = market__policy_realm_or_none, /* see DESIGN */
    .most = most,
    .state_size = sizeof(struct sell_batch),
    .prepare = prepare,
    .read = batch_read,
    .decide = batch_decide,
    .commit = batch_commit,
};
