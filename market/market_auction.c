/* market_auction.c - the auction kind: new auctions, bids and endings of a
 * realm's auctions (MARKET_ORDER_AUCTION, _BID, _END), served in batches by
 * the combiner (market_combine.c) on the purchases' lanes, and the reads of
 * auctions.
 *
 * DESIGN
 * An auction is a hash, auction:{r}:<id> (market_model_deals.c names its fields),
 * its end an entry "@<id>" of the realm's ends (market:{r}:ends, which the
 * sweeper reads: market_sweep.c), and while it is open an entry in the
 * realm's, the item's and the seller's indexes of open auctions, scored by
 * its end; the auction its highest bidder leads is in that bidder's index.
 * Every price is the price of one unit, as in the rest of the market: a bid
 * on a lot of q units escrows q times it.
 *
 * A batch's lock is the realm's market lock under the market strategy (kept
 * from one batch to the next), and none under the others: its WATCH alone
 * guards it, as every kind that debits a player's funds watches them. An
 * attempt
 *   1. reads, under WATCH of every auction its orders name, the new
 *      auctions' sellers' inventories and stacks, the realm's auction
 *      counter and the players whose funds an order debits, the store's
 *      clock (and the sweep lease of endings: market_frame.c), the realm's
 *      settings (the cut), the auctions, whether each seller holds what it
 *      auctions, the counter and the funds;
 *   2. decides in queue order against an in-memory copy (market_rules.c's
 *      bid rule): a new auction takes the item or the units from its seller
 *      and its id from the counter; a bid escrows its bidder's amount and
 *      gives the bid it tops back to its bidder, and one at or over the
 *      buyout sells at once; an ending at its end sells to the highest
 *      bidder (its escrow to the seller, less the realm's cut to the house)
 *      or gives the item back to the seller. A refund and a seller's
 *      proceeds are credits, written unread (a realm's funds fit an int64);
 *   3. commits in one MULTI/EXEC: our fences, the records, the funds, every
 *      auction decided (its hash, its indexes, its end), the escrows, the
 *      goods, one trade record for each sale, and an entry of the realm's
 *      auctions' feed (GET /events) for each order: opened, bid, sold, unsold.
 * A sold or unsold auction's hash is kept MARKET_AUCTION_KEPT_S after, for
 * GET /auctions/{id}. An ending carries its sweeper's lease token and is
 * refused once another holds the lease, as a listing's ending is.
 */
#include "market/market_kinds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_frame.h"

#define AUCTIONS_MAX MARKET__BATCH_MAX /* auctions one batch names */

/* The kind's state on a lane: a batch of one realm's auction orders. */
struct auction_batch {
    market__kstate k; /* its read and commit buffers (market_combine.h) */
    market__frame f;
    market__realm realm;
    /* the auctions the batch names, each once: as read, then as decided */
    market__deals d;
    market_auction a[AUCTIONS_MAX];
    int changed[AUCTIONS_MAX];                 /* decided: its hash and indexes are written */
    char led[AUCTIONS_MAX][MARKET_ID_MAX + 1]; /* its highest bidder as read ("" none) */
    size_t of[MARKET__BATCH_MAX];              /* order i's auction (a bid's, an ending's) */
    /* new auctions: what their sellers hold */
    char k_inv[MARKET__BATCH_MAX][MARKET__KEY_MAX], k_stacks[MARKET__BATCH_MAX][MARKET__KEY_MAX];
    int unique[MARKET__BATCH_MAX];    /* holds the unique item (-1 unreadable) */
    int64_t units[MARKET__BATCH_MAX]; /* its units (-1 unreadable) */
    int64_t last_read, last;          /* the realm's last auction id, as read and as decided */
    /* players whose funds orders debit (bidders) or must exist (sellers) */
    market__parties u;
    size_t party[MARKET__BATCH_MAX];
    market__cut cut;
    /* per order decided: what the commit moves */
    int64_t refund[MARKET__BATCH_MAX]; /* a bid: given back to the bidder it topped */
    char refund_to[MARKET__BATCH_MAX][MARKET_ID_MAX + 1];
    int refund_read[MARKET__BATCH_MAX];     /* that bidder's funds were read: in its net funds */
    int64_t escrow[MARKET__BATCH_MAX];      /* a bid: escrowed (0 when it sold at once) */
    int sold[MARKET__BATCH_MAX];            /* the order sold its auction (a buyout, an ending) */
    int64_t paid_escrow[MARKET__BATCH_MAX]; /* then from the winner's escrow (an ending) */
    size_t i_own, i_last;
    market__trade_rec trade[MARKET__BATCH_MAX];
    size_t trade_req[MARKET__BATCH_MAX], n_trades;
    market__trades tw;
    const char *args_trades[MARKET__TRADES_ARGC(MARKET__BATCH_MAX)];
};

/* ---- one attempt ---- */

/* Names the batch's auctions, players and lock. */
static int prepare(market_conn *c, market__cbatch *cb) {
    struct auction_batch *b = cb->ks;
    (void)c;
    market__realm_init(&b->realm, cb->realm);
    int rc = market__frame_begin(&b->f, cb, 0);
    b->f.fees = 1;
    b->f.clock = 1;
    b->d.t = &market__deal_auction;
    b->d.n = 0;
    b->f.deals = &b->d;
    b->f.deals_out = b->a;
    b->f.parties = &b->u;
    b->u.n = 0;
    for (size_t i = 0; rc == MARKET_OK && i < b->f.n; i++) {
        market_order *o = b->f.req[i];
        b->of[i] = SIZE_MAX;
        b->party[i] = SIZE_MAX;
        if (o->type == MARKET_ORDER_AUCTION) {
            market__key_inventory(b->k_inv[i], b->realm.id, o->player);
            market__key_stacks(b->k_stacks[i], b->realm.id, o->player);
        } else {
            b->of[i] = market__deals_of(&b->d, o->id);
        }
        if (o->type != MARKET_ORDER_AUCTION_END)
            b->party[i] = market__parties_of(&b->u, b->realm.id, o->player);
        if (o->type == MARKET_ORDER_AUCTION_END && o->token) b->f.lease_key = b->realm.sweep;
    }
    return rc;
}

/* The read (see DESIGN, step 1). Returns MARKET_OK, or the error of the whole batch. */
static int batch_read(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct auction_batch *b = cb->ks;
    market__buf *r = &b->k.rb;
    market__frame_read(&b->f, r);
    for (size_t i = 0; i < b->f.n; i++)
        if (b->f.req[i]->type == MARKET_ORDER_AUCTION) {
            market__buf_arg(r, b->k_inv[i]);
            market__buf_arg(r, b->k_stacks[i]);
        }
    market__buf_arg(r, b->realm.auctions);
    market__frame_watched(&b->f, held, 0, r);
    b->i_own = r->n;
    for (size_t i = 0; i < b->f.n; i++)
        if (b->f.req[i]->type == MARKET_ORDER_AUCTION) {
            market__rd_holds(r, b->k_inv[i], b->f.req[i]->item);
            market__rd_units(r, b->k_stacks[i], b->f.req[i]->item);
        }
    b->i_last = r->n;
    market__rd_auctions_last(r, &b->realm);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    redisReply **rep = r->rep;
    rc = market__frame_judge(&b->f, c, held, rep);
    for (size_t j = 0; rc == MARKET_OK && j < b->d.n; j++)
        memcpy(b->led[j], b->a[j].bidder, sizeof b->led[j]);
    for (size_t i = 0, k = b->i_own; rc == MARKET_OK && i < b->f.n; i++)
        if (b->f.req[i]->type == MARKET_ORDER_AUCTION) {
            b->unique[i] = market__reply_holds(rep[k]);
            b->units[i] = market__reply_units(rep[k + 1]);
            k += 2;
        }
    if (rc == MARKET_OK && market__reply_orders_last(rep[b->i_last], &b->last_read) < 0)
        rc = market__fail(c, "the last auction id of realm %s is unreadable", b->realm.id);
    market__replies_free(rep, r->n);
    return rc;
}

/* The realm's cut of total: to the house (read, or paid unread). */
static int64_t take_cut(struct auction_batch *b, int64_t total) {
    int64_t fee = b->cut.bps ? market_fee(total, b->cut.bps) : 0;
    if (b->cut.house)
        b->cut.house->funds += fee; /* no overflow: a realm's funds fit an int64 */
    else
        b->cut.unread += fee;
    return fee;
}

/* Sells auction x to its highest bidder at its bid, for order i. */
static void sell(struct auction_batch *b, size_t i, market_auction *x) {
    x->state = MARKET_AUCTION_SOLD;
    x->fee = take_cut(b, (x->quantity ? x->quantity : 1) * x->bid);
    b->sold[i] = 1;
}

/* Decides a new auction (order i). */
static int decide_new(struct auction_batch *b, size_t i) {
    market_order *o = b->f.req[i];
    market_auction_result *res = &o->res.auction;
    market__party *s = &b->u.party[b->party[i]];
    if (s->known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    if (s->known != MARKET__PRESENT) return MARKET_ERR_NO_PLAYER;
    int64_t q = o->quantity;
    for (size_t j = 0; j < i; j++) /* what earlier orders of the batch took */
        if (market__frame_won(&b->f, j) && b->f.req[j]->type == MARKET_ORDER_AUCTION &&
            strcmp(b->f.req[j]->player, o->player) == 0 &&
            strcmp(b->f.req[j]->item, o->item) == 0) {
            if (q == 0) return MARKET_ERR_NOT_HELD;
            b->units[i] -= b->f.req[j]->quantity;
        }
    if (b->unique[i] < 0 || b->units[i] < 0) return MARKET_ERR_STORE;
    if (q == 0 ? !b->unique[i] : b->units[i] < q) return MARKET_ERR_NOT_HELD;
    market_auction *x = &res->a;
    *x = (market_auction){.id = ++b->last,
                          .quantity = q,
                          .start_bid = o->price,
                          .buyout = o->buyout,
                          .step = o->step ? o->step : 1,
                          .ends_ms = b->f.now_ms + o->duration_s * 1000,
                          .state = MARKET_AUCTION_OPEN};
    memcpy(x->seller, o->player, strlen(o->player) + 1);
    memcpy(x->item, o->item, strlen(o->item) + 1);
    res->funds = s->funds;
    return MARKET_OK;
}

/* Decides a bid (order i) on its auction as the batch left it. */
static int decide_bid(struct auction_batch *b, size_t i, int64_t *a) {
    market_order *o = b->f.req[i];
    market_auction_result *res = &o->res.auction;
    size_t j = b->of[i];
    if (b->d.rc[j] != MARKET_OK) return b->d.rc[j];
    market_auction *x = &b->a[j];
    int rc = market__bid_rule(x, o->player, o->price, b->f.now_ms, &res->min_bid);
    int64_t q = x->quantity ? x->quantity : 1;
    if (rc == MARKET_ERR_BID_TOO_LOW) *a = res->min_bid;
    if (rc != MARKET_OK) return rc;
    if (o->price > INT64_MAX / q) return MARKET_ERR_INVALID; /* a lot's total must fit */
    market__party *p = &b->u.party[b->party[i]];
    if (p->known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    if (p->known != MARKET__PRESENT) return MARKET_ERR_NO_PLAYER;
    int64_t total = o->price * q, back = x->bid * q;
    int own = x->bidder[0] && strcmp(x->bidder, o->player) == 0; /* raising its own bid */
    if (p->funds + (own ? back : 0) < total) return MARKET_ERR_INSUFFICIENT_FUNDS;
    if (x->bidder[0]) { /* the topped bid goes back, out of its bidder's escrow */
        size_t t = market__parties_find(&b->u, x->bidder);
        b->refund[i] = back;
        memcpy(b->refund_to[i], x->bidder, sizeof b->refund_to[i]);
        b->refund_read[i] = t != SIZE_MAX && b->u.party[t].known == MARKET__PRESENT;
        if (b->refund_read[i]) b->u.party[t].funds += back; /* p itself when own */
        memcpy(res->outbid, x->bidder, sizeof res->outbid);
        res->refund = back;
    }
    p->funds -= total;
    memcpy(x->bidder, o->player, strlen(o->player) + 1);
    x->bid = o->price;
    x->bids++;
    b->escrow[i] = total;
    if (x->buyout && o->price >= x->buyout) { /* it sells now: the escrow is paid at once */
        sell(b, i, x);
        b->escrow[i] = 0;
    }
    b->changed[j] = 1;
    res->a = *x;
    res->funds = p->funds;
    *a = x->id;
    return MARKET_OK;
}

/* Decides an ending (order i) of its auction as the batch left it: MARKET_OK when it
 * settled it, MARKET_ERR_AUCTION_CLOSED when it had been, ERR_NOT_LISTED when its end
 * has not come, ERR_LEASE_LOST when its sweeper's lease is another's. */
static int decide_end(struct auction_batch *b, size_t i) {
    market_order *o = b->f.req[i];
    market_auction_result *res = &o->res.auction;
    size_t j = b->of[i];
    if (!market__frame_lease_held(&b->f, o->token)) return MARKET_ERR_LEASE_LOST;
    if (b->d.rc[j] != MARKET_OK) return b->d.rc[j];
    market_auction *x = &b->a[j];
    if (x->state != MARKET_AUCTION_OPEN) return MARKET_ERR_AUCTION_CLOSED;
    if (x->ends_ms > b->f.now_ms) return MARKET_ERR_NOT_LISTED;
    res->late_ms = b->f.now_ms - x->ends_ms;
    if (x->bidder[0]) {
        sell(b, i, x);
        b->paid_escrow[i] = (x->quantity ? x->quantity : 1) * x->bid;
    } else {
        x->state = MARKET_AUCTION_UNSOLD;
    }
    b->changed[j] = 1;
    res->a = *x;
    return MARKET_OK;
}

/* Fills order o's result from v, a replay: a new auction's id, or a bid's auction. */
static void replay(market_order *o, const market__outcome *v) {
    if (v->rc == MARKET_OK) o->res.auction.a.id = v->a;
    if (v->rc == MARKET_ERR_BID_TOO_LOW) o->res.auction.min_bid = v->a;
}

/* Decides order i against the batch's state. */
static int decide_one(void *ks, size_t i, int64_t *a, int64_t *b_, int64_t *c) {
    struct auction_batch *b = ks;
    market_order *o = b->f.req[i];
    (void)b_, (void)c;
    o->res.auction = (market_auction_result){0};
    b->refund[i] = b->escrow[i] = b->paid_escrow[i] = 0;
    b->refund_to[i][0] = '\0';
    b->refund_read[i] = 0;
    b->sold[i] = 0;
    if (o->type == MARKET_ORDER_AUCTION_END) return decide_end(b, i);
    if (o->type == MARKET_ORDER_AUCTION_BID) return decide_bid(b, i, a);
    int rc = decide_new(b, i);
    if (rc == MARKET_OK) *a = o->res.auction.a.id;
    return rc;
}

static size_t batch_decide(market__cbatch *cb) {
    struct auction_batch *b = cb->ks;
    b->last = b->last_read;
    for (size_t j = 0; j < b->d.n; j++)
        b->changed[j] = 0;
    market__frame_cut(&b->f, &b->u, b->f.settings.fee_bps, &b->cut);
    /* the decisions change what was read (the auctions, the goods, the funds): an attempt
     * after an aborted commit reads them again */
    return market__frame_decide(&b->f, decide_one, replay, b);
}

/* The goods of auction x go to player (a sale, or back to its seller). */
static void goods_to(struct auction_batch *b, const market_auction *x, const char *player,
                     market__buf *w) {
    char key[MARKET__KEY_MAX];
    if (x->quantity) {
        market__key_stacks(key, b->realm.id, player);
        market__fx_units(w, market__buf_join(w, key, (const char *)NULL), x->item, x->quantity);
    } else {
        market__key_inventory(key, b->realm.id, player);
        market__fx_item_in(w, market__buf_join(w, key, (const char *)NULL), x->item);
    }
}

/* Appends what new auction i, decided MARKET_OK, moves: the goods leave its seller (a
 * seller's last units with an HDEL, before any goods the batch gives: see batch_commit). */
static void commit_new(struct auction_batch *b, size_t i, market__buf *w) {
    const market_auction *x = &b->f.req[i]->res.auction.a;
    if (x->quantity == 0)
        market__fx_item_out(w, b->k_inv[i], x->item);
    else if (b->units[i] == x->quantity)
        market__fx_units_gone(w, b->k_stacks[i], x->item);
    else
        market__fx_units(w, b->k_stacks[i], x->item, -x->quantity);
    market__fx_auction_put(w, b->realm.id, x);
    market__fx_auction_index(w, b->realm.id, x, 1);
    market__fx_auction_end(w, &b->realm, x->id, x->ends_ms, 1);
    market__fx_auction_event(w, &b->realm, "opened", x);
}

/* Appends what bid or ending i, decided MARKET_OK, moves (but its auction's hash and
 * indexes: commit_auctions()). */
static void commit_order(struct auction_batch *b, const market__held *held, size_t i,
                         market__buf *w) {
    market_order *o = b->f.req[i];
    const market_auction *x = &o->res.auction.a;
    char key[MARKET__KEY_MAX];
    market__fx_auction_event(w, &b->realm,
                             b->sold[i]                            ? "sold"
                             : o->type == MARKET_ORDER_AUCTION_BID ? "bid"
                                                                   : "unsold",
                             x);
    if (o->type == MARKET_ORDER_AUCTION_BID) {
        market__key_user(key, b->realm.id, o->player);
        market__fx_escrow(w, market__buf_join(w, key, (const char *)NULL), b->escrow[i]);
        if (b->refund[i]) { /* the topped bid leaves its bidder's escrow, back to its funds */
            market__key_user(key, b->realm.id, b->refund_to[i]);
            const char *k = market__buf_join(w, key, (const char *)NULL);
            market__fx_escrow(w, k, -b->refund[i]);
            if (!b->refund_read[i]) market__fx_funds(w, k, b->refund[i]);
        }
    }
    if (b->sold[i]) { /* to the highest bidder, its total to the seller less the cut */
        int64_t total = (x->quantity ? x->quantity : 1) * x->bid;
        market__key_user(key, b->realm.id, x->seller);
        market__fx_funds(w, market__buf_join(w, key, (const char *)NULL), total - x->fee);
        if (b->paid_escrow[i]) {
            market__key_user(key, b->realm.id, x->bidder);
            market__fx_escrow(w, market__buf_join(w, key, (const char *)NULL), -b->paid_escrow[i]);
        }
        goods_to(b, x, x->bidder, w);
        market__frame_trade(&b->f, i, 1,
                            (market__trade_rec){.buyer = x->bidder,
                                                .seller = x->seller,
                                                .item = x->item,
                                                .quantity = x->quantity ? x->quantity : 1,
                                                .price = x->bid,
                                                .fee = x->fee,
                                                .house = b->f.settings.house,
                                                .goods = x->quantity != 0,
                                                .fence = held->n ? held->fence[0] : "0"},
                            b->trade, b->trade_req, &b->n_trades);
    } else if (o->type == MARKET_ORDER_AUCTION_END) { /* unsold: back to the seller */
        goods_to(b, x, x->seller, w);
    }
}

/* Appends the hash, indexes and end of every auction the batch changed. */
static void commit_auctions(struct auction_batch *b, market__buf *w) {
    for (size_t j = 0; j < b->d.n; j++) {
        const market_auction *x = &b->a[j];
        if (!b->changed[j]) continue;
        market__fx_auction_put(w, b->realm.id, x);
        if (b->led[j][0] && strcmp(b->led[j], x->bidder) != 0)
            market__fx_auction_led(w, b->realm.id, b->led[j], x, 0);
        if (x->state == MARKET_AUCTION_OPEN) {
            market__fx_auction_led(w, b->realm.id, x->bidder, x, 1);
            continue;
        }
        if (x->bidder[0]) market__fx_auction_led(w, b->realm.id, x->bidder, x, 0);
        market__fx_auction_index(w, b->realm.id, x, 0);
        market__fx_auction_end(w, &b->realm, x->id, 0, 0);
        market__fx_auction_keep(w, b->realm.id, x->id);
    }
}

/* The commit (see DESIGN, step 3). */
static int batch_commit(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct auction_batch *b = cb->ks;
    market__buf *w = &b->k.wb;
    market__frame_commit(&b->f, held, &b->u, &b->cut, w);
    b->n_trades = 0;
    for (size_t i = 0; i < b->f.n; i++) /* goods out first: see commit_new() */
        if (market__frame_won(&b->f, i) && b->f.req[i]->type == MARKET_ORDER_AUCTION)
            commit_new(b, i, w);
    for (size_t i = 0; i < b->f.n; i++)
        if (market__frame_won(&b->f, i) && b->f.req[i]->type != MARKET_ORDER_AUCTION)
            commit_order(b, held, i, w);
    commit_auctions(b, w);
    if (b->last != b->last_read) market__fx_auctions_last(w, &b->realm, b->last);
    int rc =
        market__trades_commit(c, w, 0, b->realm.id, &b->tw, b->trade, b->n_trades, b->args_trades);
    if (rc == MARKET_OK)
        market__trades_hand(cb->req, b->f.n, b->trade, b->trade_req, b->n_trades,
                            b->f.idem.same_as);
    return rc;
}

/* ---- the kind's ops (market_combine.h) ---- */

/* Auctions: new ones, bids, and their endings. */
const struct market__kind market__auction_kind = {
    .name = "auction",
    .slot = 6,
    .policy = market__policy_realm_or_none, /* see DESIGN */
    .state_size = sizeof(struct auction_batch),
    .prepare = prepare,
    .read = batch_read,
    .decide = batch_decide,
    .commit = batch_commit,
};

/* ---- reading ---- */

/* Reads auction id of realm into *out. Returns MARKET_OK, or ERR_INVALID, ERR_NO_AUCTION,
 * ERR_STORE. */
int market_auction_get(market_conn *c, const char *realm, int64_t id, market_auction *out) {
    if (!c || !out || !market_id_valid(realm) || id < 1) return MARKET_ERR_INVALID;
    int rc = market__deals_get(c, &market__deal_auction, realm, &id, 1, out, NULL);
    return rc == MARKET_OK && out->id == 0 ? MARKET_ERR_NO_AUCTION : rc;
}

/* Reads the ids of one of realm's indexes of open auctions (market__key_auctions()) whose
 * ends are before before_ms (0: any), from offset, at most limit of them, soonest first,
 * into a new array *ids (caller frees; NULL when none) of *n, with *total the index's
 * count there. Returns MARKET_OK, or ERR_STORE, ERR_NOMEM. */
static int index_read(market_conn *c, const char *realm, const char *by, const char *id,
                      int64_t before_ms, size_t offset, size_t limit, int64_t **ids, size_t *n,
                      size_t *total) {
    char key[MARKET__KEY_MAX], hi[24] = "+inf";
    market__key_auctions(key, realm, by, id);
    if (before_ms > 0) snprintf(hi, sizeof hi, "(%lld", (long long)before_ms);
    if (!(*ids = malloc(limit * sizeof **ids))) return MARKET_ERR_NOMEM;
    market__buf b = {0};
    market__rd_auctions_page(&b, key, hi, offset, limit);
    int rc = market__ids_get(c, realm, &b, 1, *ids, limit, n);
    if (rc == MARKET_OK) {
        int64_t count = market__reply_count(b.rep[0]);
        if (count < 0) rc = market__fail(c, "reading the auctions of %s", key);
        *total = count < 0 ? 0 : (size_t)count;
        market__replies_free(b.rep, b.n);
        market__buf_free(&b);
    }
    if (rc < 0 || *n == 0) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}

/* Reads a page of realm's open auctions, soonest to end first (see market_auction_query):
 * those of q->seller, of q->item, of both, or every one, ending before q->ending_before_ms
 * (0: any). Fills *out: a new array of auctions (free with market_auction_page_free()).
 * Returns MARKET_OK, or ERR_INVALID, ERR_STORE, ERR_NOMEM. */
int market_auctions_find(market_conn *c, const char *realm, const market_auction_query *q,
                         market_auction_page *out) {
    if (!out) return MARKET_ERR_INVALID;
    *out = (market_auction_page){0};
    if (!c || !q || !market_id_valid(realm) || q->limit < 1 ||
        q->limit > MARKET_AUCTIONS_PAGE_MAX || q->ending_before_ms < 0 ||
        (q->item && !market_id_valid(q->item)) || (q->seller && !market_id_valid(q->seller)))
        return MARKET_ERR_INVALID;
    /* a seller's index when it names one (both: its auctions of the item, filtered) */
    const char *by = q->seller ? "s" : q->item ? "i" : "open";
    const char *id = q->seller ? q->seller : q->item;
    int both = q->seller && q->item;
    size_t scan = both ? MARKET_AUCTIONS_SCAN : q->limit + 1;
    int64_t *ids = NULL;
    size_t n = 0, total = 0, kept = 0, i = 0;
    int rc = index_read(c, realm, by, id, q->ending_before_ms, q->offset, scan, &ids, &n, &total);
    if (rc == MARKET_OK && n && !(out->auctions = calloc(n, sizeof *out->auctions)))
        rc = MARKET_ERR_NOMEM;
    if (rc == MARKET_OK && n)
        rc = market__deals_get(c, &market__deal_auction, realm, ids, n, out->auctions, NULL);
    for (; rc == MARKET_OK && i < n && kept < q->limit; i++) /* i: the ids scanned */
        if (out->auctions[i].id && (!both || strcmp(out->auctions[i].item, q->item) == 0))
            out->auctions[kept++] = out->auctions[i];
    if (rc == MARKET_OK) {
        out->n = kept;
        out->total = both ? 0 : total; /* unknown without reading every one */
        if (q->offset + i < total) out->next_offset = q->offset + i; /* more after */
    } else {
        market_auction_page_free(out);
    }
    free(ids);
    return rc;
}

/* Frees the auctions of page p (not p); NULL is a no-op. */
void market_auction_page_free(market_auction_page *p) {
    if (!p) return;
    free(p->auctions);
    *p = (market_auction_page){0};
}

/* Reads the ids of the open auctions player sells and of those it leads (its bids), soonest
 * to end first, at most MARKET_AUCTIONS_PAGE_MAX of each, into *out. Returns MARKET_OK, or
 * ERR_INVALID, ERR_STORE, ERR_NOMEM. */
int market_player_auctions(market_conn *c, const char *realm, const char *player,
                           market_player_auctions_result *out) {
    if (!out) return MARKET_ERR_INVALID;
    *out = (market_player_auctions_result){0};
    if (!c || !market_id_valid(realm) || !market_id_valid(player)) return MARKET_ERR_INVALID;
    int64_t *ids = NULL;
    size_t n = 0, total = 0;
    int rc = index_read(c, realm, "s", player, 0, 0, MARKET_AUCTIONS_PAGE_MAX, &ids, &n, &total);
    if (rc == MARKET_OK) {
        if (n) memcpy(out->selling, ids, n * sizeof *ids); /* ids NULL when none */
        out->n_selling = n;
        free(ids);
        rc = index_read(c, realm, "b", player, 0, 0, MARKET_AUCTIONS_PAGE_MAX, &ids, &n, &total);
    }
    if (rc == MARKET_OK) {
        if (n) memcpy(out->leading, ids, n * sizeof *ids);
        out->n_leading = n;
    }
    free(ids);
    return rc;
}
