/* market_buy.c - the buy kind: a purchase without a seller, quantity units
 * of an item from the cheapest listings at or under a price, across
 * sellers, all or nothing (the commodity market of a game:
 * market_buy_units()), served in batches by the combiner (market_combine.c)
 * on the purchases' lanes.
 *
 * DESIGN
 * An item's listings, cheapest first, are a range of its index
 * (idx:{r}:item:<item>, sellers scored by price: market_index.c). A batch
 * keeps a table of the listings its orders may buy from (each once, however
 * many orders see it) and of the players whose funds move. An attempt
 *   1. chooses: reads each order's range of the index (at most SCAN
 *      entries, the buyer's own left out), then every listing's price and
 *      units and every player's funds, watched;
 *   2. decides in queue order against that table (market__fill() and
 *      market__units_apply(), market_rules.c), as if the orders ran one at
 *      a time: what one order takes, the next no longer finds;
 *   3. commits in one MULTI/EXEC: the fences of the leases held, every
 *      order's funds and goods, each listing's rest or its removal with its
 *      index entries, a trade record a seller (market_trade.c), and the
 *      idempotency records.
 * What makes the read safe depends on the strategy's lock policy:
 *   market      the realm's lock, kept as the purchases' batches keep it,
 *               and WATCH of the market and its units (read in step 1's
 *               first round trip, the listings' details in the second);
 *   optimistic  no lock: the same WATCH, read again on an abort;
 *   item        one order a batch: its listings are chosen without a lock
 *               (prepare), then the chosen listings' locks and the buyer's
 *               are taken all or none, and they are read again under them
 *               (one round trip). When they no longer make the quantity
 *               (bought meanwhile), the batch chooses again
 *               (MARKET__CHOOSE_AGAIN), within the wait budget.
 * A purchase reads at most MARKET_FILL_MAX listings (the cheapest), so it
 * buys from at most that many sellers; a refusal for want of units counts
 * the units of those listings.
 *
 * A buy order (MARKET_ORDER_BID) is such a purchase that takes what there
 * is instead of all or nothing, and rests the rest in the item's book
 * (book:{r}:<item>) at its price, the rest's cost moved from the buyer's
 * funds to its escrow, under the realm's next order id: a batch with buy
 * orders also watches and reads the realm's last order id
 * (market:{r}:orders), and writes it with the orders it rests. Under the
 * item strategy, when the chosen listings no longer fill what they filled
 * when chosen, the batch chooses again, so that an order never rests at a
 * price some listing it did not lock would have filled.
 */
#include "market/market_kinds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_frame.h"
#include "market/market_index.h"
#include "market/market_trade.h"

#define SCAN (MARKET_FILL_MAX + 1) /* index entries read: one more tells there are more */
#define BUY_BATCH_MAX 8            /* orders a batch takes (each reads up to SCAN listings) */
#define LISTINGS_MAX (BUY_BATCH_MAX * MARKET_FILL_MAX)
#if LISTINGS_MAX + BUY_BATCH_MAX > MARKET__PARTIES_MAX
#error "a buy batch names more players than market__parties holds"
#endif

/* A listing some order of the batch may buy from. */
struct listing {
    char member[MARKET__MEMBER_MAX]; /* "<item>.<seller>" */
    const char *seller;              /* in member, after the item's dot */
    size_t party;                    /* its seller's */
    int stack;                       /* a count in units (else a unique item) */
    int64_t price;                   /* as read; MARKET__NOT_LISTED when gone */
    int64_t units;                   /* as read (a unique item: 1), */
    int64_t left;                    /* and as the batch decides */
    market__idx_entry ix;            /* its index entries, when it sells out */
};

/* What one order takes from one listing. */
struct take {
    size_t listing;
    int64_t units, before; /* units taken, and the listing's units before */
    int64_t fee;           /* the realm's cut of this part */
};

/* The kind's state on a lane: a batch of one realm's buy orders, and what
 * its attempt reads and decides. */
struct buy_batch {
    market__kstate k; /* its read and commit buffers (market_combine.h) */
    market__frame f;  /* its open orders, their keys and the read's frame */
    market__realm realm;
    char k_index[BUY_BATCH_MAX][MARKET__IDX_KEY_MAX];
    char hi[BUY_BATCH_MAX][24];
    size_t buyer[BUY_BATCH_MAX];                        /* its party */
    size_t offer[BUY_BATCH_MAX][MARKET_FILL_MAX], n_offers[BUY_BATCH_MAX]; /* listings */
    struct take took[BUY_BATCH_MAX][MARKET_FILL_MAX];   /* a success: its parts */
    size_t n_took[BUY_BATCH_MAX];
    struct listing list[LISTINGS_MAX];
    size_t n_list;
    market__parties u; /* the buyers and sellers */
    market__cut cut;   /* the realm's cut of the batch's sales */
    int chosen;        /* item strategy: the listings are chosen and locked; read only those */
    int64_t want;      /* item strategy: the units the chosen listings filled (0: the order is
                          refused for want of units, decided under their locks) */
    int bids;          /* the batch holds buy orders: it reads and writes the last order id */
    int64_t orders_read, orders_last; /* the realm's last order id, as read and as decided */
    market__trade_rec trade[LISTINGS_MAX];
    size_t trade_req[LISTINGS_MAX], n_trades;
    const char *args_trades[MARKET__TRADES_ARGC(LISTINGS_MAX)];
    market__trades tw;
};

static int64_t fill(const struct buy_batch *b, size_t i, market__offer *off);

/* ---- the batch's table ---- */

/* Returns item's listing by seller in b, added when new. */
static size_t listing_of(struct buy_batch *b, const char *item, const char *seller) {
    char member[MARKET__MEMBER_MAX];
    market__join(member, sizeof member, item, ".", seller, (const char *)NULL);
    for (size_t l = 0; l < b->n_list; l++)
        if (strcmp(b->list[l].member, member) == 0) return l;
    struct listing *L = &b->list[b->n_list];
    memcpy(L->member, member, sizeof member);
    L->seller = L->member + strlen(item) + 1;
    L->party = market__parties_of(&b->u, b->realm.id, seller);
    return b->n_list++;
}

/* Reads order i's range of its item's index (ZRANGE ... BYSCORE ...
 * WITHSCORES: seller, price, ...) into its offers, leaving out the buyer's
 * own listing. Returns MARKET_OK or ERR_STORE. */
static int offers_from_index(market_conn *c, struct buy_batch *b, size_t i, const redisReply *z) {
    const market_order *o = b->f.req[i];
    b->n_offers[i] = 0;
    if (!market__reply_array(z, SIZE_MAX, 1))
        return market__fail_reply(c, "reading the item index", z);
    for (size_t k = 0; k < market__reply_len(z) / 2 && b->n_offers[i] < MARKET_FILL_MAX; k++) {
        int64_t price;
        char seller[MARKET_ID_MAX + 1];
        if (market__reply_seller_at(z, k, seller, &price) < 0)
            return market__fail(c, "the item index %s holds a bad entry", b->k_index[i]);
        if (strcmp(seller, o->player) == 0) continue;
        b->offer[i][b->n_offers[i]++] = listing_of(b, o->item, seller);
    }
    return MARKET_OK;
}

/* ---- reading ---- */

/* Appends each order's range of the index (the cheapest at or under its price). */
static void choice_build(struct buy_batch *b, market__buf *r) {
    char scan[8];
    snprintf(scan, sizeof scan, "%d", SCAN);
    for (size_t i = 0; i < b->f.n; i++) market__rd_cheapest(r, b->k_index[i], b->hi[i], scan);
}

/* Reads the replies of choice_build (from rep[0]) into the orders' offers. */
static int choice_parse(market_conn *c, struct buy_batch *b, redisReply **rep) {
    b->n_list = 0;
    b->u.n = 0;
    for (size_t i = 0; i < b->f.n; i++)
        b->buyer[i] = market__parties_of(&b->u, b->realm.id, b->f.req[i]->player);
    int rc = MARKET_OK;
    for (size_t i = 0; rc == MARKET_OK && i < b->f.n; i++)
        rc = offers_from_index(c, b, i, rep[i]);
    return rc;
}

/* Appends the read of the table: WATCH of every player, every listing's
 * price and units, every player's funds. Returns the index of its first
 * reply. */
static size_t detail_build(struct buy_batch *b, market__buf *r) {
    size_t first = r->n;
    market__rd_watch_begin(r);
    market__parties_watch(&b->u, r);
    if (b->bids) market__buf_arg(r, b->realm.orders);
    market__buf_end(r, 0);
    if (b->n_list) { /* ZMSCORE and HMGET of no member are errors */
        market__rd_prices_begin(r, &b->realm);
        for (size_t l = 0; l < b->n_list; l++) market__buf_arg(r, b->list[l].member);
        market__buf_end(r, 0);
        market__rd_listing_units_begin(r, &b->realm);
        for (size_t l = 0; l < b->n_list; l++) market__buf_arg(r, b->list[l].member);
        market__buf_end(r, 0);
    }
    market__parties_read(&b->u, NULL, b->u.n, r);
    if (b->bids) market__rd_orders_last(r, &b->realm);
    return first;
}

/* Reads detail_build's replies (from rep[0]) into the table. */
static int detail_parse(market_conn *c, struct buy_batch *b, redisReply **rep) {
    const redisReply *z = b->n_list ? rep[1] : NULL, *u = b->n_list ? rep[2] : NULL;
    if (!market__reply_ok(rep[0])) return market__fail_reply(c, "read refused", rep[0]);
    if (z && !market__reply_array(z, b->n_list, 0))
        return market__fail_reply(c, "reading the listings", z);
    if (u && !market__reply_array(u, b->n_list, 0))
        return market__fail_reply(c, "reading the listings", u);
    for (size_t l = 0; l < b->n_list; l++) {
        struct listing *L = &b->list[l];
        int64_t price, units;
        market__reply_listing_at(z, u, l, &price, &L->stack, &units);
        if (price == MARKET__PRICE_UNREADABLE || units < 0)
            return market__fail(c, "listing %s is unreadable", L->member);
        L->price = price > 0 ? price : MARKET__NOT_LISTED;
        L->units = L->left = price > 0 ? units : 0;
    }
    redisReply **f = rep + (b->n_list ? 3 : 1);
    market__parties_parse(&b->u, f, NULL, b->u.n);
    if (b->bids && market__reply_orders_last(f[b->u.n], &b->orders_read) < 0)
        return market__fail(c, "the last order id of realm %s is unreadable", b->realm.id);
    return MARKET_OK;
}

/* The read (see DESIGN, step 1): the claims, WATCH, the fencing records
 * and the records; the orders' ranges (not when chosen already); then the
 * table, in the same round trip when chosen, else in a second one. Returns
 * MARKET_OK, MARKET__CHOOSE_AGAIN, or the error of the whole batch. */
static int batch_read(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct buy_batch *b = cb->ks;
    market__buf *r = &b->k.rb;
    market__frame_read(&b->f, r);
    if (!b->chosen) { /* the listings, as the market strategy's purchases read them */
        market__buf_arg(r, b->realm.market);
        market__buf_arg(r, b->realm.units);
    }
    market__frame_watched(&b->f, held, 0, r);
    size_t i_next = r->n;
    if (b->chosen)
        detail_build(b, r);
    else
        choice_build(b, r);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    redisReply **rep = r->rep;
    rc = market__frame_judge(&b->f, c, held, rep);
    if (rc == MARKET_OK)
        rc = b->chosen ? detail_parse(c, b, rep + i_next) : choice_parse(c, b, rep + i_next);
    market__replies_free(rep, r->n);
    if (rc == MARKET_OK && !b->chosen) { /* the table, in a second round trip */
        market__buf_reset(r);
        detail_build(b, r);
        if ((rc = market__pipeline_buf(c, r)) < 0) return rc;
        rc = detail_parse(c, b, r->rep);
        market__replies_free(r->rep, r->n);
    }
    if (rc == MARKET_OK && b->chosen && b->want > 0 && fill(b, 0, NULL) < b->want)
        rc = MARKET__CHOOSE_AGAIN; /* bought meanwhile: still as much under the locks? */
    return rc;
}

/* ---- deciding ---- */

/* What order i takes from its offers as the table stands (market__fill()):
 * fills off (MARKET_FILL_MAX; NULL: a scratch copy) and returns the units
 * taken, or -1 when an order that buys all or nothing cannot (*rc, when
 * given, MARKET_ERR_NOT_ENOUGH, with *available and *total as
 * market__fill() sets them). */
static int64_t fill_of(const struct buy_batch *b, size_t i, market__offer *off, int *rc,
                       int64_t *available, int64_t *total) {
    const market_order *o = b->f.req[i];
    market__offer scratch[MARKET_FILL_MAX];
    int64_t a, t, taken = 0;
    if (!off) off = scratch;
    if (!available) available = &a;
    if (!total) total = &t;
    size_t n = b->n_offers[i];
    for (size_t k = 0; k < n; k++) {
        const struct listing *L = &b->list[b->offer[i][k]];
        off[k] = (market__offer){L->seller, L->price > 0 ? L->price : INT64_MAX, L->left, 0};
    }
    int r = market__fill(off, n, o->player, o->quantity, o->price,
                         o->type == MARKET_ORDER_BID ? 0 : MARKET__FILL_ALL, available, total);
    if (rc) *rc = r;
    if (r != MARKET_OK) return -1;
    for (size_t k = 0; k < n; k++)
        taken += off[k].take;
    return taken;
}

/* The units order i takes from its offers as the table stands (-1: not
 * all it must); off as fill_of() fills it. */
static int64_t fill(const struct buy_batch *b, size_t i, market__offer *off) {
    return fill_of(b, i, off, NULL, NULL, NULL);
}

/* Decides order i against the table; on a success moves its funds and
 * units in the table and lists its parts in b->took[i]; a buy order's rest
 * is escrowed and given the realm's next order id. */
static int decide_order(struct buy_batch *b, size_t i) {
    market_order *o = b->f.req[i];
    market_buy_result *res = &o->res.buy;
    market__offer off[MARKET_FILL_MAX];
    size_t n = b->n_offers[i];
    int64_t total, available;
    int rc;
    int64_t taken = fill_of(b, i, off, &rc, &available, &total);
    if (rc == MARKET_ERR_NOT_ENOUGH) res->available = available;
    if (rc != MARKET_OK) return rc;
    int64_t rest = o->type == MARKET_ORDER_BID ? o->quantity - taken : 0; /* to escrow */
    int64_t escrow = rest > INT64_MAX / o->price ? INT64_MAX : rest * o->price;
    /* the order works on copies of its parties, kept only when it succeeds; the house,
     * when the batch holds it, is one of them or a copy of its own */
    market__party buyer = b->u.party[b->buyer[i]], seller[MARKET_FILL_MAX];
    if (buyer.known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    if (buyer.known == MARKET__ABSENT) return MARKET_ERR_NO_PLAYER;
    if (total > buyer.funds || escrow > buyer.funds - total) /* both saturate */
        return MARKET_ERR_INSUFFICIENT_FUNDS;
    market__cut_copy cc;
    market__cut_begin(&cc, &b->cut, &b->u, b->buyer[i], &buyer);
    for (size_t k = 0; k < n; k++) { /* one listing a seller: their parties are distinct */
        seller[k] = b->u.party[b->list[b->offer[i][k]].party];
        if (b->list[b->offer[i][k]].party == cc.h) cc.cut.house = &seller[k];
    }
    int64_t fee[MARKET_FILL_MAX] = {0};
    for (size_t k = 0; k < n; k++)
        if (off[k].take &&
            (rc = market__units_apply(off[k].price, off[k].units, off[k].take, -1, &buyer,
                                      &seller[k], &cc.cut, &fee[k])) != MARKET_OK)
            return rc;
    b->n_took[i] = 0;
    res->fee = 0;
    for (size_t k = 0; k < n; k++) {
        if (!off[k].take) continue;
        struct listing *L = &b->list[b->offer[i][k]];
        b->took[i][b->n_took[i]++] = (struct take){b->offer[i][k], off[k].take, L->left, fee[k]};
        L->left -= off[k].take;
        b->u.party[L->party] = seller[k];
        res->fee += fee[k];
    }
    buyer.funds -= escrow;
    b->u.party[b->buyer[i]] = buyer;
    market__cut_keep(&cc, &b->cut, &b->u);
    res->quantity = taken;
    res->total = total;
    res->buyer_funds = buyer.funds;
    res->rested = rest;
    res->order_id = rest > 0 ? ++b->orders_last : 0;
    return MARKET_OK;
}

/* Fills order o's result from v, a replay. */
static void replay(market_order *o, const market__outcome *v) {
    market_buy_result *res = &o->res.buy;
    if (v->rc == MARKET_ERR_NOT_ENOUGH) res->available = v->a;
    if (v->rc != MARKET_OK) return;
    res->buyer_funds = v->b;
    if (o->type == MARKET_ORDER_BID) { /* the units filled and the order id, not the total */
        res->quantity = v->a;
        res->order_id = v->c;
        res->rested = v->c ? o->quantity - v->a : 0;
        return;
    }
    res->quantity = o->quantity;
    res->total = v->a;
    res->fee = v->c;
}

/* Decides order i (decide_order); its record keeps a not_enough's units
 * available or a success's total, the buyer's funds and the fee; a buy
 * order's keeps the units it filled, the buyer's funds and its order id. */
static int decide_one(void *ks, size_t i, int64_t *a, int64_t *funds, int64_t *c) {
    struct buy_batch *b = ks;
    market_buy_result *res = &b->f.req[i]->res.buy;
    int bid = b->f.req[i]->type == MARKET_ORDER_BID;
    *res = (market_buy_result){0};
    b->n_took[i] = 0;
    int rc = decide_order(b, i);
    *a = rc == MARKET_ERR_NOT_ENOUGH ? res->available : bid ? res->quantity : res->total;
    *funds = res->buyer_funds;
    *c = bid ? res->order_id : res->fee;
    return rc;
}

/* Decides every order in queue order, as if they ran one at a time. */
static size_t batch_decide(market__cbatch *cb) {
    struct buy_batch *b = cb->ks;
    for (size_t i = 0; i < b->f.n; i++) b->n_took[i] = 0;
    b->orders_last = b->orders_read;
    market__frame_cut(&b->f, &b->u, b->f.settings.fee_bps, &b->cut);
    return market__frame_decide(&b->f, decide_one, replay, b);
}

/* ---- committing ---- */

/* The fence order i's part from listing l is recorded with: its lock's
 * (item strategy), else the market lock's; "0" without a lease. */
static const char *trade_fence(const market__held *held, const struct buy_batch *b, size_t l) {
    if (held->n == 0) return "0";
    if (!b->chosen) return held->fence[0];
    char key[MARKET__LOCK_KEY_MAX];
    market__lock_key(key, "item", b->realm.id, b->list[l].member);
    for (size_t k = 0; k < held->n; k++)
        if (strcmp(held->key[k], key) == 0) return held->fence[k];
    return "0";
}

/* Appends what order i, decided MARKET_OK, moves besides funds (written
 * as each player's net change), and lists its trades. */
static void commit_order(struct buy_batch *b, const market__held *held, size_t i,
                         market__buf *w) {
    market_order *o = b->f.req[i];
    int64_t stacked = 0;
    for (size_t k = 0; k < b->n_took[i]; k++) {
        const struct take *t = &b->took[i][k];
        struct listing *L = &b->list[t->listing];
        if (L->stack)
            stacked += t->units;
        else
            market__fx_item_in(w, b->u.k_inv[b->buyer[i]], o->item);
        if (t->units < t->before) { /* the rest stays listed */
            market__fx_listing_units(w, &b->realm, L->member, -t->units);
        } else {
            market__fx_delist(w, &b->realm, L->member, L->stack);
            if (b->chosen) market__held_drop(held, "item", b->realm.id, L->member, w);
            market__idx_entry_init(&L->ix, b->realm.id, o->item, L->seller, L->price);
            market__fx_idx_remove(w, &L->ix, 1);
        }
        market__frame_trade(&b->f, i, k == 0,
                            (market__trade_rec){.buyer = o->player,
                                                .seller = L->seller,
                                                .item = o->item,
                                                .quantity = t->units,
                                                .price = L->price,
                                                .fee = t->fee,
                                                .house = b->f.settings.house,
                                                .goods = L->stack,
                                                .fence = trade_fence(held, b, t->listing)},
                            b->trade, b->trade_req, &b->n_trades);
    }
    if (stacked) market__fx_units(w, b->u.k_stacks[b->buyer[i]], o->item, stacked);
    const market_buy_result *res = &o->res.buy;
    if (res->order_id) { /* the rest rests in the book, escrowed */
        market_bid bid = {
            .id = res->order_id, .price = o->price, .quantity = o->quantity, .left = res->rested};
        memcpy(bid.buyer, o->player, strlen(o->player) + 1);
        memcpy(bid.item, o->item, strlen(o->item) + 1);
        market__fx_escrow(w, b->u.k_user[b->buyer[i]], res->rested * o->price);
        market__fx_bid_rest(w, b->realm.id, &bid);
    }
}

/* Hands each success its parts and trade ids, and each repeat inside the
 * batch its first's trade id. */
static void hand_trades(struct buy_batch *b) {
    for (size_t t = 0; t < b->n_trades; t++) {
        market_order *o = b->f.req[b->trade_req[t]];
        market_buy_result *res = &o->res.buy;
        const market__trade_rec *r = &b->trade[t];
        market_fill *f = &res->fill[res->n_fills++];
        snprintf(f->seller, sizeof f->seller, "%s", r->seller);
        f->quantity = r->quantity;
        f->price = r->price;
        f->fee = r->fee;
        memcpy(f->trade_id, r->id, sizeof f->trade_id);
        if (res->n_fills == 1) memcpy(res->trade_id, r->id, sizeof res->trade_id);
    }
    for (size_t i = 0; i < b->f.n; i++)
        if (b->f.idem.same_as[i] != SIZE_MAX)
            memcpy(b->f.req[i]->res.buy.trade_id, b->f.req[b->f.idem.same_as[i]]->res.buy.trade_id,
                   sizeof b->f.req[i]->res.buy.trade_id);
}

/* The commit (see DESIGN, step 3). */
static int batch_commit(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct buy_batch *b = cb->ks;
    market__buf *w = &b->k.wb;
    market__frame_commit(&b->f, held, &b->u, &b->cut, w);
    b->n_trades = 0;
    for (size_t i = 0; i < b->f.n; i++)
        if (market__frame_won(&b->f, i)) commit_order(b, held, i, w);
    if (b->orders_last != b->orders_read) market__fx_orders_last(w, &b->realm, b->orders_last);
    int rc = market__trades_commit(c, w, 0, b->realm.id, &b->tw, b->trade, b->n_trades,
                                   b->args_trades);
    if (rc == MARKET_OK) hand_trades(b);
    return rc;
}

/* ---- naming the batch, and the item strategy's choice ---- */

/* Item strategy: keeps the listings that make the order's quantity (or,
 * when they do not, every one at or under its price, so that the refusal
 * is decided under their locks), and names their locks and the buyer's. */
static void choose(struct buy_batch *b) {
    const market_order *o = b->f.req[0];
    market__offer off[MARKET_FILL_MAX];
    size_t n = b->n_offers[0], k = 0;
    int64_t taken = fill(b, 0, off);
    b->want = taken > 0 ? taken : 0;
    for (size_t j = 0; j < n; j++) {
        int keep = taken >= 0 ? off[j].take > 0 : off[j].price <= o->price && off[j].units > 0;
        if (!keep) continue;
        if (k != b->offer[0][j]) b->list[k] = b->list[b->offer[0][j]];
        b->list[k].seller = b->list[k].member + strlen(o->item) + 1;
        b->offer[0][k] = k;
        market__cbatch_lock(b->f.cb, "item", b->list[k].member);
        k++;
    }
    b->n_list = b->n_offers[0] = k;
    market__cbatch_lock(b->f.cb, "player", o->player);
}

/* Item strategy: reads the order's cheapest listings without a lock, and
 * chooses those to lock. Returns MARKET_OK or ERR_STORE, ERR_NOMEM. */
static int choose_read(market_conn *c, struct buy_batch *b) {
    market__buf *r = &b->k.rb;
    market__buf_reset(r);
    choice_build(b, r);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    rc = choice_parse(c, b, r->rep);
    market__replies_free(r->rep, r->n);
    if (rc == MARKET_OK) {
        market__buf_reset(r);
        detail_build(b, r);
        if ((rc = market__pipeline_buf(c, r)) < 0) return market__unwatch_later(c, rc);
        rc = detail_parse(c, b, r->rep);
        market__replies_free(r->rep, r->n);
    }
    (void)market__unwatch_later(c, rc); /* the table's WATCH: nothing is committed here */
    if (rc == MARKET_OK) choose(b);
    return rc;
}

/* Names the batch's orders, keys and records, and its locks: the realm's
 * market lock, or (item strategy) the chosen listings' and the buyer's. */
static int prepare(market_conn *c, market__cbatch *cb) {
    struct buy_batch *b = cb->ks;
    market__realm_init(&b->realm, cb->realm);
    int rc = market__frame_begin(&b->f, cb, 0);
    if (rc != MARKET_OK) return rc;
    b->f.fees = 1;
    b->bids = 0;
    for (size_t i = 0; i < b->f.n; i++) {
        const market_order *o = b->f.req[i];
        b->bids |= o->type == MARKET_ORDER_BID;
        market__idx_key(b->k_index[i], MARKET__IDX_ITEM, b->realm.id, o->item);
        snprintf(b->hi[i], sizeof b->hi[i], "%lld", (long long)o->price);
    }
    b->chosen = cb->policy == MARKET__POLICY_EACH;
    return b->chosen ? choose_read(c, b) : MARKET_OK;
}

/* ---- the kind's ops (market_combine.h) ---- */

static size_t most(const market *m, int policy) {
    if (policy == MARKET__POLICY_EACH) return 1; /* its locks follow from its own choice */
    return m->cfg.batch_max < BUY_BATCH_MAX ? m->cfg.batch_max : BUY_BATCH_MAX;
}

/* Buying units across sellers: the cheapest listings at or under a price. */
const struct market__kind market__buy_kind = {
    .name = "buy",
    .slot = 3,
    .most = most,
    .state_size = sizeof(struct buy_batch),
    .prepare = prepare,
    .read = batch_read,
    .decide = batch_decide,
    .commit = batch_commit,
};
