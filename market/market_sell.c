/* market_sell.c - the sell kind: units of a stackable good sold into the
 * item's book (MARKET_ORDER_SELL), to the best buy orders at or over a
 * price, at each order's price, all or nothing or as many as they want,
 * served in batches by the combiner (market_combine.c) on the purchases'
 * lanes. The mirror of the buy kind (market_buy.c) over the bids instead of
 * the listings.
 *
 * DESIGN
 * A book (book:{r}:<item>) holds its orders' ids scored by minus their
 * price, so that its first entries are the best bids, and within a price
 * the oldest (price-time priority: market__bid_member()). A batch keeps a
 * table of the buy orders its sells may fill (each once) and of the
 * players whose funds and goods move. An attempt
 *   1. reads, under WATCH of each order's book and each seller's funds and
 *      stacks: each order's range of its book (the best SCAN at or over its
 *      price), the units of the item each seller holds, and each seller's
 *      funds; then, in a second round trip, under WATCH of every buy order
 *      of the table, their fields;
 *   2. decides in queue order against that table (market__fill() over the
 *      bids, then market__units_apply() per fill, paid out of the buy order's
 *      escrow, with the realm's cut), as if the orders ran one at a time;
 *   3. commits in one MULTI/EXEC: our fences, the sellers' funds and the
 *      house's cut, the sellers' units, every buy order's units left (or
 *      its removal from the book when it is filled), each buyer's units
 *      and escrow, a trade record a fill (market_trade.c), and the
 *      idempotency records.
 * Its lock is the realm's market lock under the market strategy, and none
 * under the others: the WATCH guards it, as every kind that changes a buy
 * order, a book, or a player's funds or stacks watches what it changes
 * (buyers' units and escrow are only ever added to or taken from, and
 * their orders are watched). A sale fills at most MARKET_FILL_MAX buy
 * orders; a seller's own orders are left out.
 */
#include "market/market_kinds.h"

#include <stdio.h>
#include <string.h>

#include "market/market_frame.h"
#include "market/market_trade.h"

#define SCAN (MARKET_FILL_MAX + 1) /* book entries read: one more tells there are more */
#define SELL_BATCH_MAX 8           /* orders a batch takes (each reads up to SCAN bids) */
#define BIDS_MAX (SELL_BATCH_MAX * SCAN)
#if BIDS_MAX + SELL_BATCH_MAX > MARKET__PARTIES_MAX
#error "a sell batch names more players than market__parties holds"
#endif

/* A buy order some sell of the batch may fill. */
struct bid {
    market_bid b; /* as read (b.left), */
    int64_t left; /* and as the batch decides */
    int read_rc;  /* MARKET_OK, or ERR_NO_ORDER (gone since the book was read), ERR_STORE */
    size_t party; /* its buyer's */
    char price_s[24];
};

/* What one sell takes from one buy order. */
struct take {
    size_t bid;
    int64_t units, fee;
};

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
    size_t offer[SELL_BATCH_MAX][SCAN], n_offers[SELL_BATCH_MAX]; /* bids, best first */
    struct take took[SELL_BATCH_MAX][MARKET_FILL_MAX];
    size_t n_took[SELL_BATCH_MAX];
    struct bid bid[BIDS_MAX];
    size_t n_bids;
    market__parties u; /* the sellers, then the buyers */
    market__cut cut;
    size_t i_own;
    market__trade_rec trade[SELL_BATCH_MAX * MARKET_FILL_MAX];
    size_t trade_req[SELL_BATCH_MAX * MARKET_FILL_MAX], n_trades;
    const char *args_trades[MARKET__TRADES_ARGC(SELL_BATCH_MAX * MARKET_FILL_MAX)];
    market__trades tw;
};

/* ---- reading ---- */

/* Returns buy order id's place in b's table, added when new. */
static size_t bid_of(struct sell_batch *b, int64_t id) {
    for (size_t k = 0; k < b->n_bids; k++)
        if (b->bid[k].b.id == id) return k;
    b->bid[b->n_bids] = (struct bid){.b = {.id = id}, .read_rc = MARKET_ERR_NO_ORDER};
    return b->n_bids++;
}

/* Reads order i's range of its book (member, score, ...) into its offers.
 * Returns MARKET_OK or ERR_STORE. */
static int offers_from_book(market_conn *c, struct sell_batch *b, size_t i, const redisReply *z) {
    b->n_offers[i] = 0;
    if (z->type != REDIS_REPLY_ARRAY || z->elements % 2)
        return market__fail_reply(c, "reading a book", z);
    for (size_t k = 0; k < z->elements && b->n_offers[i] < SCAN; k += 2) {
        int64_t id;
        if (market__reply_book_id(z->element[k], &id) < 0)
            return market__fail(c, "the book %s holds a bad entry", b->k_book[i]);
        b->offer[i][b->n_offers[i]++] = bid_of(b, id);
    }
    return MARKET_OK;
}

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
        market__rd_book_from(r, b->k_book[i], b->lo[i], SCAN);
        market__rd_units(r, b->u.k_stacks[b->seller[i]], b->f.req[i]->item);
    }
    size_t n_sellers = b->u.n;
    market__parties_read(&b->u, NULL, n_sellers, r);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    redisReply **rep = r->rep;
    rc = market__frame_judge(&b->f, c, held, rep);
    b->n_bids = 0;
    for (size_t i = 0; rc == MARKET_OK && i < b->f.n; i++) {
        rc = offers_from_book(c, b, i, rep[b->i_own + 2 * i]);
        b->stacked[i] = b->stacked_read[i] = market__reply_units(rep[b->i_own + 2 * i + 1]);
    }
    if (rc == MARKET_OK) market__parties_parse(&b->u, rep + b->i_own + 2 * b->f.n, NULL, n_sellers);
    market__replies_free(rep, r->n);
    return rc;
}

/* The second round trip: every buy order of the table, watched. */
static int read_bids(market_conn *c, struct sell_batch *b) {
    if (!b->n_bids) return MARKET_OK;
    market__buf *r = &b->k.rb;
    market__buf_reset(r);
    market__rd_watch_begin(r);
    for (size_t k = 0; k < b->n_bids; k++) {
        char key[MARKET__KEY_MAX];
        market__key_order(key, b->realm.id, b->bid[k].b.id);
        market__buf_arg(r, market__buf_join(r, key, (const char *)NULL));
    }
    market__buf_end(r, 0);
    for (size_t k = 0; k < b->n_bids; k++)
        market__rd_order(r, b->realm.id, b->bid[k].b.id);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    if (r->rep[0]->type != REDIS_REPLY_STATUS)
        rc = market__fail_reply(c, "read refused", r->rep[0]);
    for (size_t k = 0; rc == MARKET_OK && k < b->n_bids; k++) {
        struct bid *B = &b->bid[k];
        B->read_rc = market__reply_order(r->rep[1 + k], B->b.id, &B->b);
        B->left = B->read_rc == MARKET_OK ? B->b.left : 0;
        if (B->read_rc == MARKET_OK) {
            B->party = market__parties_of(&b->u, b->realm.id, B->b.buyer);
            market__i64_str(B->price_s, B->b.price);
        }
    }
    market__replies_free(r->rep, r->n);
    return rc;
}

static int batch_read(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct sell_batch *b = cb->ks;
    int rc = read_books(c, held, b);
    return rc == MARKET_OK ? read_bids(c, b) : rc;
}

/* ---- deciding ---- */

/* Decides order i against the table; on a success moves the seller's
 * funds and units and the buy orders' units left in the table, and lists
 * its parts in b->took[i]. */
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
    market__offer off[SCAN];
    size_t n = 0;
    for (size_t k = 0; k < b->n_offers[i]; k++) {
        const struct bid *B = &b->bid[b->offer[i][k]];
        if (B->read_rc == MARKET_ERR_STORE) return MARKET_ERR_STORE;
        /* a bid gone since the book was read is no offer */
        off[n++] = (market__offer){B->read_rc == MARKET_OK ? B->b.buyer : o->player, B->b.price,
                                   B->left, 0};
    }
    int64_t available, total;
    int rc = market__fill(off, n < MARKET_FILL_MAX ? n : MARKET_FILL_MAX, o->player, o->quantity,
                          o->price, MARKET__FILL_SELL | (o->partial ? 0 : MARKET__FILL_ALL),
                          &available, &total);
    int64_t sold = 0;
    for (size_t k = 0; k < n && k < MARKET_FILL_MAX; k++)
        sold += off[k].take;
    if (rc == MARKET_OK && sold == 0) rc = MARKET_ERR_NOT_ENOUGH; /* partial, and none wanted */
    if (rc == MARKET_ERR_NOT_ENOUGH) res->available = available;
    if (rc != MARKET_OK) return rc;
    /* the sale works on copies, kept only when it succeeds; the house, when the batch
     * holds it (as a seller), is the seller or a copy of its own */
    market__cut cut = b->cut;
    size_t h = cut.house ? (size_t)(cut.house - b->u.party) : SIZE_MAX;
    market__party house = cut.house ? *cut.house : (market__party){0};
    cut.unread = 0;
    cut.house = h == b->seller[i] ? &seller : cut.house ? &house : NULL;
    res->total = res->fee = 0;
    b->n_took[i] = 0;
    for (size_t k = 0; k < n && k < MARKET_FILL_MAX; k++) {
        if (!off[k].take) continue;
        struct bid *B = &b->bid[b->offer[i][k]];
        int64_t fee, paid = off[k].take * B->b.price; /* escrowed whole when it rested */
        market__party escrow = {MARKET__PRESENT, paid};
        rc = market__units_apply(B->b.price, off[k].take, off[k].take, -1, &escrow, &seller, &cut,
                                 &fee);
        if (rc != MARKET_OK) return rc;
        b->took[i][b->n_took[i]++] = (struct take){b->offer[i][k], off[k].take, fee};
        res->total += paid;
        res->fee += fee;
    }
    for (size_t k = 0; k < b->n_took[i]; k++)
        b->bid[b->took[i][k].bid].left -= b->took[i][k].units;
    b->u.party[b->seller[i]] = seller;
    if (cut.house == &house) b->u.party[h] = house;
    b->cut.unread += cut.unread;
    b->stacked[f] -= sold;
    res->quantity = sold;
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
    b->n_took[i] = 0;
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
    for (size_t i = 0; i < b->f.n; i++) {
        b->n_took[i] = 0;
        if (b->first[i] == i) b->stacked[i] = b->stacked_read[i];
    }
    for (size_t k = 0; k < b->n_bids; k++)
        b->bid[k].left = b->bid[k].b.left;
    market__frame_cut(&b->f, &b->u, b->f.settings.fee_bps, &b->cut);
    return market__frame_decide(&b->f, decide_one, replay, b);
}

/* ---- committing ---- */

/* Appends what order i, decided MARKET_OK, moves besides the seller's
 * funds, and lists its trades. */
static void commit_order(struct sell_batch *b, const market__held *held, size_t i, market__buf *w) {
    market_order *o = b->f.req[i];
    for (size_t k = 0; k < b->n_took[i]; k++) {
        const struct take *t = &b->took[i][k];
        const struct bid *B = &b->bid[t->bid];
        market__fx_escrow(w, b->u.k_user[B->party], -t->units * B->b.price);
        market__fx_units(w, b->u.k_stacks[B->party], o->item, t->units);
        market__frame_trade(&b->f, i, k == 0,
                            (market__trade_rec){.buyer = B->b.buyer,
                                                .seller = o->player,
                                                .item = o->item,
                                                .quantity = t->units,
                                                .price = B->b.price,
                                                .fee = t->fee,
                                                .house = b->f.settings.house,
                                                .goods = 1,
                                                .fence = held->n ? held->fence[0] : "0"},
                            b->trade, b->trade_req, &b->n_trades);
    }
}

/* Appends the units each seller has left of each item it sold, once. */
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
        market_sell_result *res = &b->f.req[i]->res.sell;
        for (size_t k = 0; market__frame_won(&b->f, i) && k < b->n_took[i]; k++, at++) {
            const struct bid *B = &b->bid[b->took[i][k].bid];
            market_fill *f = &res->fill[res->n_fills++];
            snprintf(f->seller, sizeof f->seller, "%s", b->f.req[i]->player);
            snprintf(f->buyer, sizeof f->buyer, "%s", B->b.buyer);
            f->order_id = B->b.id;
            f->quantity = b->took[i][k].units;
            f->price = B->b.price;
            f->fee = b->took[i][k].fee;
            memcpy(f->trade_id, b->trade[at].id, sizeof f->trade_id);
            if (k == 0) memcpy(res->trade_id, f->trade_id, sizeof res->trade_id);
        }
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
    market__buf_reset(w);
    market__fx_multi(w);
    market__frame_fences(&b->f, held, w);
    market__parties_funds(&b->u, w);
    market__frame_cut_pay(&b->f, &b->cut, w);
    market__frame_records(&b->f, w);
    b->n_trades = 0;
    for (size_t i = 0; i < b->f.n; i++)
        if (market__frame_won(&b->f, i)) commit_order(b, held, i, w);
    commit_sellers(b, w);
    for (size_t k = 0; k < b->n_bids; k++) { /* each buy order's rest, once */
        const struct bid *B = &b->bid[k];
        if (B->read_rc != MARKET_OK || B->left == B->b.left) continue;
        if (B->left == 0)
            market__fx_bid_gone(w, b->realm.id, &B->b);
        else
            market__fx_bid_left(w, b->realm.id, B->b.id, B->left);
    }
    int rc =
        market__trades_commit(c, w, 0, b->realm.id, &b->tw, b->trade, b->n_trades, b->args_trades);
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
    if (cb->policy == MARKET__POLICY_HOLD) market__cbatch_lock_key(cb, b->realm.lock);
    return rc;
}

static int policy(const market *m) {
    return m->cfg.strategy == MARKET_STRATEGY_MARKET ? MARKET__POLICY_HOLD : MARKET__POLICY_NONE;
}

static size_t most(const market *m, int policy) {
    (void)policy;
    return m->cfg.batch_max < SELL_BATCH_MAX ? m->cfg.batch_max : SELL_BATCH_MAX;
}

/* Selling units into the book. */
const struct market__kind market__sell_kind = {
    .name = "sell",
    .slot = 5,
    .policy = policy,
    .most = most,
    .state_size = sizeof(struct sell_batch),
    .prepare = prepare,
    .read = batch_read,
    .decide = batch_decide,
    .commit = batch_commit,
};
