/* market_bids.c - the buy orders a batch may fill, for the kinds that sell
 * into a book (market_bids.h says how a kind uses it).
 *
 * DESIGN
 * A fill is paid out of the buy order's escrow: it was escrowed whole,
 * units left times price, when the order rested (market_buy.c), so a fill
 * never reads its buyer's funds. Its buyer's escrow and units are only
 * ever added to or taken from (HINCRBY); what guards a fill is the WATCH
 * of the book (an order taken back leaves it) and of the order itself (a
 * part filled by another sale changes only the order). A fill pays the
 * realm's cut like any sale (market__units_apply()), and is one trade.
 */
#include "market/market_bids.h"

#include <stdio.h>
#include <string.h>

/* Empties t for a new batch. */
void market__bids_begin(market__bids *t) {
    t->n = 0;
    memset(t->n_offers, 0, sizeof t->n_offers);
}

/* Returns buy order id's place in t, added when new. */
static size_t bid_of(market__bids *t, int64_t id) {
    for (size_t k = 0; k < t->n; k++)
        if (t->bid[k].b.id == id) return k;
    t->bid[t->n] = (market__bid){.b = {.id = id}, .read_rc = MARKET_ERR_NO_ORDER};
    return t->n++;
}

/* Reads order i's range of its book (z: member, score, ...; book_key names
 * it in a failure) into its offers, best first. Returns MARKET_OK or
 * ERR_STORE. */
int market__bids_offers(market_conn *c, market__bids *t, size_t i, const redisReply *z,
                        const char *book_key) {
    int64_t id[MARKET__BIDS_SCAN];
    size_t n = 0;
    t->n_offers[i] = 0;
    if (!market__reply_array(z, SIZE_MAX, 1)) return market__fail_reply(c, "reading a book", z);
    if (market__reply_ids(z, 1, id, MARKET__BIDS_SCAN, &n) < 0)
        return market__fail(c, "the book %s holds a bad entry", book_key);
    for (size_t k = 0; k < n; k++)
        t->offer[i][k] = bid_of(t, id[k]);
    t->n_offers[i] = n;
    return MARKET_OK;
}

/* Appends to r the WATCH of every buy order of t and the reads of their
 * fields. Returns the index of the WATCH's reply. */
size_t market__bids_read_build(const market__bids *t, const char *realm, market__buf *r) {
    size_t first = r->n;
    market__rd_watch_begin(r);
    for (size_t k = 0; k < t->n; k++) {
        char key[MARKET__KEY_MAX];
        market__key_order(key, realm, t->bid[k].b.id);
        market__buf_arg(r, market__buf_join(r, key, (const char *)NULL));
    }
    market__buf_end(r, 0);
    for (size_t k = 0; k < t->n; k++)
        market__rd_order(r, realm, t->bid[k].b.id);
    return first;
}

/* Takes in the replies of market__bids_read_build() (rep: from its WATCH's),
 * naming each order's buyer in u. Returns MARKET_OK or ERR_STORE. */
int market__bids_read_parse(market_conn *c, market__bids *t, const char *realm, market__parties *u,
                            redisReply **rep) {
    if (!market__reply_ok(rep[0])) return market__fail_reply(c, "read refused", rep[0]);
    for (size_t k = 0; k < t->n; k++) {
        market__bid *B = &t->bid[k];
        B->read_rc = market__reply_order(rep[1 + k], B->b.id, &B->b);
        B->left = B->read_rc == MARKET_OK ? B->b.left : 0;
        if (B->read_rc == MARKET_OK) B->party = market__parties_of(u, realm, B->b.buyer);
    }
    return MARKET_OK;
}

/* Watches and reads every buy order of t in one round trip of its own
 * (r: the kind's read buffer). Returns MARKET_OK, ERR_STORE, ERR_NOMEM. */
int market__bids_read(market_conn *c, market__bids *t, const char *realm, market__parties *u,
                      market__buf *r) {
    if (!t->n) return MARKET_OK;
    market__buf_reset(r);
    (void)market__bids_read_build(t, realm, r);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    rc = market__bids_read_parse(c, t, realm, u, r->rep);
    market__replies_free(r->rep, r->n);
    return rc;
}

/* Sets every buy order back as read, and no order's fills, before a
 * decision (an attempt decides again after an aborted commit). */
void market__bids_restart(market__bids *t, size_t n_orders) {
    for (size_t k = 0; k < t->n; k++)
        t->bid[k].left = t->bid[k].b.left;
    for (size_t i = 0; i < n_orders && i < MARKET__BIDS_ORDERS; i++)
        t->n_took[i] = 0;
}

/* Decides what order i (seller's, quantity units at min_price or more)
 * sells into its offers as the table stands: all or nothing
 * (MARKET__FILL_ALL in flags) or as many as they want (none is no
 * refusal here). Pays seller_party and cut (the caller's copies) each
 * fill's price less its cut, and lists the fills in t->took[i] without
 * taking them from the table (market__bids_take()). Returns MARKET_OK with
 * *out set, or ERR_NOT_ENOUGH (out->available set), ERR_STORE (an order
 * unreadable), ERR_OVERFLOW (the seller's funds). */
int market__bids_fill(market__bids *t, size_t i, const char *seller, int64_t quantity,
                      int64_t min_price, int flags, market__party *seller_party, market__cut *cut,
                      market__sold *out) {
    *out = (market__sold){0};
    t->n_took[i] = 0;
    market__offer off[MARKET_FILL_MAX];
    size_t n = t->n_offers[i] < MARKET_FILL_MAX ? t->n_offers[i] : MARKET_FILL_MAX;
    for (size_t k = 0; k < n; k++) {
        const market__bid *B = &t->bid[t->offer[i][k]];
        if (B->read_rc == MARKET_ERR_STORE) return MARKET_ERR_STORE;
        /* an order gone since the book was read offers nothing */
        off[k] =
            (market__offer){B->read_rc == MARKET_OK ? B->b.buyer : seller, B->b.price, B->left, 0};
    }
    int64_t total;
    int rc = market__fill(off, n, seller, quantity, min_price, MARKET__FILL_SELL | flags,
                          &out->available, &total);
    for (size_t k = 0; rc == MARKET_OK && k < n; k++) {
        if (!off[k].take) continue;
        const market__bid *B = &t->bid[t->offer[i][k]];
        int64_t fee, paid = off[k].take * B->b.price; /* escrowed whole when it rested */
        market__party escrow = {MARKET__PRESENT, paid};
        rc = market__units_apply(B->b.price, off[k].take, off[k].take, -1, &escrow, seller_party,
                                 cut, &fee);
        t->took[i][t->n_took[i]++] = (market__bid_take){t->offer[i][k], off[k].take, fee};
        out->units += off[k].take;
        out->total += paid;
        out->fee += fee;
    }
    if (rc != MARKET_OK) t->n_took[i] = 0;
    return rc;
}

/* Takes order i's fills (market__bids_fill()) from the buy orders. */
void market__bids_take(market__bids *t, size_t i) {
    for (size_t k = 0; k < t->n_took[i]; k++)
        t->bid[t->took[i][k].bid].left -= t->took[i][k].units;
}

/* Appends order i's fills to w - each buyer's units and escrow - and lists
 * their trades (seller: f->req[i]'s player; the house its cut pays; fence:
 * the lease's, "0" without one). */
void market__bids_commit(market__bids *t, const market__frame *f, const market__parties *u,
                         size_t i, const char *item, const char *house, const char *fence,
                         market__buf *w) {
    for (size_t k = 0; k < t->n_took[i]; k++) {
        const market__bid_take *tk = &t->took[i][k];
        const market__bid *B = &t->bid[tk->bid];
        market__fx_escrow(w, u->k_user[B->party], -tk->units * B->b.price);
        market__fx_units(w, u->k_stacks[B->party], item, tk->units);
        market__frame_trade(f, i, k == 0,
                            (market__trade_rec){.buyer = B->b.buyer,
                                                .seller = f->req[i]->player,
                                                .item = item,
                                                .quantity = tk->units,
                                                .price = B->b.price,
                                                .fee = tk->fee,
                                                .house = house,
                                                .goods = 1,
                                                .fence = fence},
                            t->trade, t->trade_req, &t->n_trades);
    }
}

/* Appends each buy order's units left as the batch decided (or its
 * removal from its book when it is filled), once. */
void market__bids_commit_left(const market__bids *t, const char *realm, market__buf *w) {
    for (size_t k = 0; k < t->n; k++) {
        const market__bid *B = &t->bid[k];
        if (B->read_rc != MARKET_OK || B->left == B->b.left) continue;
        if (B->left == 0)
            market__fx_bid_gone(w, realm, &B->b);
        else
            market__fx_bid_left(w, realm, B->b.id, B->left);
    }
}

/* Sends w with the trades listed (market__trades_commit()). */
int market__bids_trades(market__bids *t, market_conn *c, market__buf *w, const char *realm) {
    return market__trades_commit(c, w, 0, realm, &t->tw, t->trade, t->n_trades, t->args_trades);
}

/* Writes order i's fills, committed, into fill (MARKET_FILL_MAX) and its
 * first trade id into trade_id (MARKET_TRADE_ID_MAX + 1 bytes), its trades
 * being t->trade[at..]: the orders' fills were committed in order. Returns
 * how many. */
size_t market__bids_hand(const market__bids *t, size_t i, size_t at, const char *seller,
                         market_fill *fill, char *trade_id) {
    for (size_t k = 0; k < t->n_took[i]; k++) {
        const market__bid *B = &t->bid[t->took[i][k].bid];
        market_fill *fl = &fill[k];
        snprintf(fl->seller, sizeof fl->seller, "%s", seller);
        snprintf(fl->buyer, sizeof fl->buyer, "%s", B->b.buyer);
        fl->order_id = B->b.id;
        fl->quantity = t->took[i][k].units;
        fl->price = B->b.price;
        fl->fee = t->took[i][k].fee;
        memcpy(fl->trade_id, t->trade[at + k].id, sizeof fl->trade_id);
    }
    if (t->n_took[i]) memcpy(trade_id, fill[0].trade_id, MARKET_TRADE_ID_MAX + 1);
    return t->n_took[i];
}
