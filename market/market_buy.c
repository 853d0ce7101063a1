/* market_buy.c - a purchase without a seller: quantity units of an item from
 * the cheapest listings at or under a price, across sellers, all or nothing
 * (the commodity market of a game: market_buy_units()).
 *
 * DESIGN
 * The item's listings, cheapest first, are a range of the item's index
 * (idx:{r}:item:<item>, sellers scored by price: market_index.c). An attempt
 * reads under WATCH, decides with market__fill() and market__units_rule()
 * (market_rules.c), and commits every part in one MULTI/EXEC: the buyer's
 * funds and goods, each seller's funds, each listing's rest or its removal
 * (and its index entries), one trade record a seller (market_trade.c), the
 * fences of the leases held. What it takes to make the read safe depends on
 * the strategy:
 *   market      the realm's lock, held for the attempt, and WATCH of the
 *               market and its units (whoever else speaks the lock protocol);
 *   optimistic  no lock: WATCH of the market and its units, read again on an
 *               abort;
 *   item        the lock of every listing bought from and of the buyer, as a
 *               batch of that strategy takes them. The listings are chosen
 *               before the locks are taken (a read without them), then read
 *               again under the locks; when they no longer make up the
 *               quantity (bought meanwhile), the choice is made again, a few
 *               times, within the wait budget.
 * A purchase reads at most MARKET_FILL_MAX listings (the cheapest), so it
 * buys from at most that many sellers; a refusal for want of units counts
 * the units of those listings.
 * It runs on the caller's thread under every strategy (it is not batched).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_index.h"
#include "market/market_trade.h"
#include "market/market_txn.h"

#define CHOOSE_TRIES 64 /* item strategy: choices of listings made again when bought meanwhile
                          * (within the wait budget) */
#define SCAN (MARKET_FILL_MAX + 1) /* index entries read: one more tells there are more */
#define MARKET__REFILL 2 /* an attempt's locked listings no longer make the quantity */

/* One listing the purchase may buy from. */
struct offer {
    char seller[MARKET_ID_MAX + 1];
    char member[MARKET__MEMBER_MAX];      /* "<item>.<seller>" */
    char k_seller[MARKET__KEY_MAX];       /* users:{r}:<seller> */
    char lock[MARKET__LOCK_KEY_MAX];      /* item strategy: lock:item:{r}:<member> */
    int stack;                            /* a count in units: (else a unique item) */
    market__idx_entry ix;                 /* its index entries, when it sells out */
};

struct buy {
    const char *buyer, *item;
    int64_t quantity, max_price;
    market_buy_result *res;
    market__realm realm;
    char k_index[MARKET__IDX_KEY_MAX]; /* the item's index */
    char k_buyer[MARKET__KEY_MAX], k_inv[MARKET__KEY_MAX], k_stacks[MARKET__KEY_MAX];
    char hi[24], scan[8]; /* the listings at or under max_price, SCAN of them at most */
    struct market__single s;
    int fixed; /* item strategy: the offers are chosen and locked; read only those */
    int enough; /* item strategy: when they were chosen, they made the quantity */
    const lock_handle *lease; /* item strategy: the leases held (as many as held->n) */
    size_t n;
    struct offer o[SCAN];
    market__offer off[SCAN]; /* what the rules see of o[] */
    market__party buyer_party, party[SCAN];
    int64_t available;       /* units of the offers read, at or under the price */
};

/* ---- reading ---- */

/* Reads the index range reply z (ZRANGE ... BYSCORE ... WITHSCORES: seller, price, ...)
 * into b's offers, leaving out the buyer's own listings. Returns MARKET_OK or ERR_STORE. */
static int offers_from_index(market_conn *c, struct buy *b, const redisReply *z) {
    b->n = 0;
    if (z->type != REDIS_REPLY_ARRAY || z->elements % 2)
        return market__fail_reply(c, "reading the item index", z);
    for (size_t i = 0; i < z->elements && b->n < MARKET_FILL_MAX; i += 2) {
        const redisReply *e = z->element[i], *sc = z->element[i + 1];
        struct offer *o = &b->o[b->n];
        int64_t price;
        if (e->type != REDIS_REPLY_STRING || e->len > MARKET_ID_MAX ||
            sc->type != REDIS_REPLY_STRING || market__parse_price(sc->str, sc->len, &price) < 0)
            return market__fail(c, "the item index %s holds a bad entry", b->k_index);
        char seller[MARKET_ID_MAX + 1];
        memcpy(seller, e->str, e->len);
        seller[e->len] = '\0';
        if (strlen(seller) != e->len || !market_id_valid(seller))
            return market__fail(c, "the item index %s holds a bad entry", b->k_index);
        if (strcmp(seller, b->buyer) == 0) continue;
        memcpy(o->seller, seller, sizeof seller);
        snprintf(o->member, sizeof o->member, "%s.%s", b->item, seller);
        market__key_user(o->k_seller, b->realm.id, seller);
        market__lock_key(o->lock, "item", b->realm.id, o->member);
        b->off[b->n] = (market__offer){o->seller, price, 0, 0};
        b->n++;
    }
    return MARKET_OK;
}

/* Reads, under WATCH of their sellers, the offers' prices and units, and
 * the sellers' funds, in one pipeline; with leases (the item strategy's:
 * fixed offers), also their fencing records and, when the lock keys live in
 * the store, the keys, watched too. Returns MARKET_OK, or ERR_STORE,
 * ERR_LEASE_LOST, ERR_NOMEM. */
static int offers_read(market_conn *c, const market__held *held, struct buy *b) {
    size_t n = b->n;
    b->available = 0;
    if (n == 0 && held->n == 0) return MARKET_OK; /* nothing listed at that price, no lease */
    market__buf rd = {0};
    market__rd_watch_begin(&rd);
    for (size_t i = 0; i < held->n; i++) {
        market__buf_arg(&rd, held->fenced[i]);
        if (held->tokens) market__buf_arg(&rd, held->key[i]);
    }
    for (size_t i = 0; i < n; i++) market__buf_arg(&rd, b->o[i].k_seller);
    market__buf_end(&rd, 0);
    size_t i_fence = rd.n, i_z = 0, i_u = 0, i_funds;
    if (held->n) market__held_read_buf(held, &rd);
    if (n) { /* ZMSCORE and HMGET of no member are errors */
        i_z = rd.n;
        market__rd_prices_begin(&rd, &b->realm);
        for (size_t i = 0; i < n; i++) market__buf_arg(&rd, b->o[i].member);
        market__buf_end(&rd, 0);
        i_u = rd.n;
        market__rd_listing_units_begin(&rd, &b->realm);
        for (size_t i = 0; i < n; i++) market__buf_arg(&rd, b->o[i].member);
        market__buf_end(&rd, 0);
    }
    i_funds = rd.n;
    for (size_t i = 0; i < n; i++) market__rd_funds(&rd, b->o[i].k_seller);
    int rc = market__pipeline_buf(c, &rd);
    if (rc < 0) {
        market__buf_free(&rd);
        return rc;
    }
    redisReply **rep = rd.rep;
    const redisReply *z = n ? rep[i_z] : NULL, *u = n ? rep[i_u] : NULL;
    if (rep[0]->type != REDIS_REPLY_STATUS ||
        (n && (z->type != REDIS_REPLY_ARRAY || z->elements != n || u->type != REDIS_REPLY_ARRAY ||
               u->elements != n))) {
        const redisReply *e = market__reply_error(rep, rd.n);
        rc = market__fail_reply(c, "read refused", e ? e : rep[0]);
    } else if (held->n && market__held_lost(held, rep[i_fence])) {
        rc = MARKET_ERR_LEASE_LOST; /* taken over, lapsed, or a newer holder committed */
    }
    for (size_t i = 0; rc == MARKET_OK && i < n; i++) {
        int64_t price = market__reply_price(z->element[i]);
        struct offer *o = &b->o[i];
        o->stack = u->element[i]->type != REDIS_REPLY_NIL;
        int64_t units = o->stack ? market__reply_units(u->element[i]) : price > 0;
        if (price == MARKET__PRICE_UNREADABLE || units < 0) {
            rc = market__fail(c, "listing %s is unreadable", o->member);
            break;
        }
        b->off[i].price = price > 0 ? price : INT64_MAX; /* gone: never at or under the price */
        b->off[i].units = price > 0 ? units : 0;
        b->party[i] = market__reply_party(rep[i_funds + i]);
    }
    market__replies_free(rep, rd.n);
    market__buf_free(&rd);
    return rc;
}

/* ---- deciding and committing ---- */

/* The verdict on the offers read: which units come from where, whether the
 * buyer can pay and each seller be paid. Returns MARKET_OK (b->off[].take,
 * the parties moved), a refusal, or MARKET__REFILL (fixed offers that no
 * longer make the quantity). */
static int decide(struct buy *b) {
    int64_t total;
    int rc = market__fill(b->off, b->n, b->buyer, b->quantity, b->max_price, &b->available,
                          &total);
    if (rc == MARKET_ERR_NOT_ENOUGH) return b->fixed && b->enough ? MARKET__REFILL : rc;
    market__party buyer = b->buyer_party;
    if (buyer.known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    if (buyer.known == MARKET__ABSENT) return MARKET_ERR_NO_PLAYER;
    if (total > buyer.funds) return MARKET_ERR_INSUFFICIENT_FUNDS; /* total saturates */
    for (size_t i = 0; i < b->n; i++) {
        if (!b->off[i].take) continue;
        rc = market__units_apply(b->off[i].price, b->off[i].units, b->off[i].take, -1, &buyer,
                                 &b->party[i]);
        if (rc != MARKET_OK) return rc;
    }
    b->buyer_party = buyer;
    b->res->total = total;
    b->res->buyer_funds = buyer.funds;
    return MARKET_OK;
}

/* Builds the commit of b's decision (see the top) and runs it. Returns
 * MARKET_OK, MARKET__TXN_ABORTED, or ERR_STORE, ERR_NOMEM. */
static int commit(market_conn *c, const market__held *held, struct buy *b) {
    size_t n = b->n, nt = 0;
    market__trade_rec *t = calloc(n ? n : 1, sizeof *t);
    const char **trades = malloc(MARKET__TRADES_ARGC(n ? n : 1) * sizeof *trades);
    size_t *trade_of = calloc(n ? n : 1, sizeof *trade_of);
    market__buf w = {0};
    redisReply *exec = NULL;
    market__trades tw;
    int rc = MARKET_ERR_NOMEM;
    if (!t || !trades || !trade_of) {
        rc = market__unwatch_later(c, rc);
        goto out;
    }
    market__fx_multi(&w);
    market__fx_funds(&w, b->k_buyer, -b->res->total);
    int64_t stacked = 0;
    for (size_t i = 0; i < n; i++) {
        const market__offer *f = &b->off[i];
        struct offer *o = &b->o[i];
        if (!f->take) continue;
        market__fx_funds(&w, o->k_seller, f->take * f->price);
        if (o->stack)
            stacked += f->take;
        else
            market__fx_item_in(&w, b->k_inv, b->item);
        if (f->take < f->units) { /* the rest stays listed */
            market__fx_listing_units(&w, &b->realm, o->member, -f->take);
        } else {
            market__fx_delist(&w, &b->realm, o->member, o->stack);
            market__idx_entry_init(&o->ix, b->realm.id, b->item, o->seller, f->price);
            market__fx_idx_remove(&w, &o->ix);
        }
        trade_of[nt] = i;
        t[nt++] = (market__trade_rec){.buyer = b->buyer, .seller = o->seller, .item = b->item,
                                      .quantity = f->take, .price = f->price,
                                      /* the listing's own lock, or the market's */
                                      .fence = b->fixed && i < held->n ? held->fence[i]
                                               : held->n               ? held->fence[0]
                                                                       : "0"};
    }
    market__fx_units(&w, b->k_stacks, b->item, stacked);
    market__held_fences(held, &w);
    if (b->s.idem) { /* recorded as done, then completed with the first trade's id: were
                      * the script to fail, the purchase is still done once */
        market__single_record(&b->s, MARKET_OK, b->res->total, b->res->buyer_funds, &w);
        t[0].idem_key = b->s.k_idem;
        t[0].idem_record = b->s.record;
    }
    size_t i_trades = w.n - 1; /* EXEC's replies follow MULTI's */
    market__buf_cmdv(&w, (int)market__trades_argv(c->m, b->realm.id, &tw, t, nt, trades), trades);
    market__fx_exec(&w);
    rc = market__commit_buf(c, &w, &exec);
    if (rc != MARKET_OK) goto out;
    if (market__trades_ids(exec->element[i_trades], t, nt) < 0) {
        const redisReply *e = exec->element[i_trades];
        rc = e->type == REDIS_REPLY_ERROR ? market__fail_reply(c, "trade record refused", e)
                                          : market__fail(c, "the trade records' ids are unreadable");
        goto out;
    }
    b->res->n_fills = nt;
    for (size_t k = 0; k < nt; k++) {
        market_fill *fl = &b->res->fill[k];
        const market__offer *f = &b->off[trade_of[k]];
        memcpy(fl->seller, b->o[trade_of[k]].seller, sizeof fl->seller);
        fl->quantity = f->take;
        fl->price = f->price;
        memcpy(fl->trade_id, t[k].id, sizeof fl->trade_id);
    }
    memcpy(b->res->trade_id, t[0].id, sizeof t[0].id);
out:
    if (exec) freeReplyObject(exec);
    market__buf_free(&w);
    free(t);
    free(trades);
    free(trade_of);
    return rc;
}

/* Item strategy: whether a lease has run out by our clock (valid_until_ms
 * errs early): checked right before the commit, as a batch of that strategy
 * does, for the lock keys it could not watch (a lock elsewhere). */
static int lapsed(const lock_handle *h, size_t n) {
    int64_t now = rconn_now_ms();
    for (size_t k = 0; k < n; k++)
        if (now >= h[k].valid_until_ms) return 1;
    return 0;
}

/* One attempt: read (the item's cheapest listings, or the ones chosen and
 * locked), decide, commit. The leases (item strategy) are checked by
 * offers_read(), not by market__single_read(), which sees none. */
static int buy_attempt(market_conn *c, const market__held *held, void *ud) {
    struct buy *b = ud;
    static const market__held none;
    const market__held *seen = b->fixed ? &none : held;
    market__buf rd = {0};
    market__single_read_begin(&b->s, seen, b->k_buyer, b->k_stacks, &rd);
    size_t io = rd.n;
    if (!b->fixed) market__rd_cheapest(&rd, b->k_index, b->hi, b->scan);
    size_t i_funds = rd.n;
    market__rd_funds(&rd, b->k_buyer);
    int rc = market__single_read(c, seen, &b->s, &rd);
    if (rc != MARKET_OK || b->s.replayed) {
        market__buf_free(&rd);
        if (b->s.replayed) {
            b->res->replayed = 1;
            if (rc == MARKET_OK) {
                b->res->total = b->s.stored_a;
                b->res->buyer_funds = b->s.stored_b;
                b->res->quantity = b->quantity;
                memcpy(b->res->trade_id, b->s.stored_trade, sizeof b->s.stored_trade);
            } else if (rc == MARKET_ERR_NOT_ENOUGH) {
                b->res->available = b->s.stored_a;
            }
        }
        return rc;
    }
    if (!b->fixed) rc = offers_from_index(c, b, rd.rep[io]);
    b->buyer_party = market__reply_party(rd.rep[i_funds]);
    market__replies_free(rd.rep, rd.n);
    market__buf_free(&rd);
    if (rc == MARKET_OK) rc = offers_read(c, b->fixed ? held : &none, b);
    if (rc < 0) return market__unwatch_later(c, rc);
    rc = decide(b);
    if (rc == MARKET__REFILL) return market__unwatch_later(c, rc);
    if (rc == MARKET_ERR_NOT_ENOUGH) b->res->available = b->available;
    if (rc < 0)
        return market__single_refuse(c, held, &b->s, rc,
                                     rc == MARKET_ERR_NOT_ENOUGH ? b->available : 0);
    if (c->m->cfg.test_stall_ms) market__stall(c->m->cfg.test_stall_ms);
    if (b->fixed && b->lease && lapsed(b->lease, held->n))
        return market__unwatch_later(c, MARKET_ERR_LEASE_LOST);
    b->res->quantity = b->quantity;
    return commit(c, held, b);
}

/* ---- the item strategy: choose, lock, buy ---- */

/* Chooses the listings to lock: reads the item's cheapest without a lock
 * and keeps those that make the quantity (or, when they do not, every one
 * at or under the price, so that the refusal is decided under their locks).
 * Returns MARKET_OK or ERR_STORE, ERR_NOMEM. */
static int choose(market_conn *c, struct buy *b) {
    static const market__held none;
    market__buf rd = {0};
    market__rd_cheapest(&rd, b->k_index, b->hi, b->scan);
    int rc = market__pipeline_buf(c, &rd);
    if (rc < 0) {
        market__buf_free(&rd);
        return rc;
    }
    b->fixed = 0;
    rc = offers_from_index(c, b, rd.rep[0]);
    market__replies_free(rd.rep, rd.n);
    market__buf_free(&rd);
    if (rc == MARKET_OK) rc = offers_read(c, &none, b);
    market__unwatch_later(c, rc); /* offers_read watched: nothing is committed here */
    if (rc < 0) return rc;
    int64_t total;
    b->enough = market__fill(b->off, b->n, b->buyer, b->quantity, b->max_price, &b->available,
                             &total) == MARKET_OK;
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++) {
        int keep = b->enough ? b->off[i].take > 0
                             : b->off[i].price <= b->max_price && b->off[i].units > 0;
        if (!keep) continue;
        if (k != i) {
            b->o[k] = b->o[i];
            b->off[k] = b->off[i];
            b->off[k].seller = b->o[k].seller;
        }
        k++;
    }
    b->n = k;
    return MARKET_OK;
}

/* The item strategy's purchase: choose, take every chosen listing's lock
 * and the buyer's all or none, buy under them; choose again when the
 * listings were bought meanwhile. Releases every lock it took. */
static int buy_item_locked(market_conn *c, struct buy *b, int64_t deadline) {
    market *m = c->m;
    int rc = MARKET_ERR_NOT_ENOUGH;
    for (int tries = 0; tries < CHOOSE_TRIES; tries++) {
        if ((rc = choose(c, b)) < 0) return rc;
        const char *keys[MARKET__HELD_MAX];
        char buyer_lock[MARKET__LOCK_KEY_MAX];
        lock_handle h[MARKET__HELD_MAX];
        market__held hd = {0};
        size_t nk = 0;
        for (size_t i = 0; i < b->n; i++) keys[nk++] = b->o[i].lock;
        market__lock_key(buyer_lock, "player", b->realm.id, b->buyer);
        keys[nk++] = buyer_lock;
        hd.tokens = m->lock_in_store;
        if ((rc = market__lock_multi(c, keys, nk, deadline, h)) < 0) return rc;
        for (size_t k = 0; k < nk; k++) market__held_set(&hd, k, keys[k], &h[k]);
        b->fixed = 1;
        b->lease = h;
        rc = market__attempts(c, h, &hd, buy_attempt, b);
        (void)lock_release_multi(m->lock, h, nk); /* a lease not released expires */
        b->lease = NULL;
        if (rc != MARKET__REFILL) break;
        rc = MARKET_ERR_CONFLICT; /* if the listings keep going */
        if (rconn_now_ms() >= deadline) break;
    }
    return rc;
}

/* ---- the public operation ---- */

/* Buys quantity (1..MARKET_QUANTITY_MAX) units of item on realm's market
 * for buyer, from the cheapest listings at or under max_price
 * (1..MARKET_PRICE_MAX) of other sellers, all or nothing; idem (may be
 * NULL) makes it idempotent (a replay answers the total, the buyer's funds
 * and the first trade's id). Fills *res: the total, the buyer's funds after
 * it, and each part (seller, units, price, trade id). Returns MARKET_OK, or
 * ERR_INVALID, ERR_NOT_ENOUGH (fewer units at that price: res->available,
 * counted over the MARKET_FILL_MAX cheapest listings), ERR_NO_PLAYER,
 * ERR_INSUFFICIENT_FUNDS, ERR_OVERFLOW, ERR_BUSY, ERR_STORE,
 * ERR_LEASE_LOST, ERR_CONFLICT, ERR_IDEM_MISMATCH, ERR_IN_PROGRESS,
 * ERR_NOMEM. Nothing is written unless it returns MARKET_OK (with the
 * exception market_purchase() describes). */
int market_buy_units(market_conn *c, const char *realm, const char *buyer, const char *item,
                     int64_t quantity, int64_t max_price, const market_idem *idem,
                     market_buy_result *res) {
    if (!res) return MARKET_ERR_INVALID;
    *res = (market_buy_result){0};
    if (!c || !market_id_valid(realm) || !market_id_valid(buyer) || !market_id_valid(item) ||
        quantity < 1 || quantity > MARKET_QUANTITY_MAX || max_price < 1 ||
        max_price > MARKET_PRICE_MAX || !market__idem_valid(idem))
        return MARKET_ERR_INVALID;
    market *m = c->m;
    struct buy *b = calloc(1, sizeof *b);
    if (!b) return MARKET_ERR_NOMEM;
    MARKET__COUNT(m, purchases);
    int64_t deadline = rconn_now_ms() + m->cfg.acquire_timeout_ms;
    b->buyer = buyer;
    b->item = item;
    b->quantity = quantity;
    b->max_price = max_price;
    b->res = res;
    market__realm_init(&b->realm, realm);
    market__idx_key(b->k_index, MARKET__IDX_ITEM, realm, item);
    market__key_user(b->k_buyer, realm, buyer);
    market__key_inventory(b->k_inv, realm, buyer);
    market__key_stacks(b->k_stacks, realm, buyer);
    snprintf(b->hi, sizeof b->hi, "%lld", (long long)max_price);
    snprintf(b->scan, sizeof b->scan, "%d", SCAN);
    int rc = market__single_init(&b->s, realm, buyer, idem, deadline);
    if (rc == MARKET_OK) rc = market__route(c, realm);
    if (rc == MARKET_OK && m->cfg.strategy == MARKET_STRATEGY_ITEM) {
        b->s.watch.n = 0;
        rc = buy_item_locked(c, b, deadline);
        market__count_result(m, rc);
    } else if (rc == MARKET_OK) {
        char keybuf[MARKET__LOCK_KEY_MAX];
        const char *lock_key;
        market__strategy_guard(m, &b->realm, "", keybuf, &b->s.watch, &lock_key);
        b->s.watch.keys[b->s.watch.n++] = b->realm.units; /* read, as the market */
        rc = market__guarded(c, lock_key, deadline, buy_attempt, b);
    }
    if (rc == MARKET_OK && !res->replayed) MARKET__COUNT(m, purchased);
    free(b);
    return rc;
}
