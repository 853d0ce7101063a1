/* market_listing.c - the listing kind: list and unlist orders of a realm,
 * and the sweeper's endings of listings (an unlist when the listing's end
 * has come), served in batches by the combiner (market_combine.c) on the
 * purchases' lanes, so that a realm's lists, unlists and purchases are
 * served in the order they came.
 *
 * DESIGN
 * A batch's locks are the realm's market lock (market strategy, kept from
 * one batch to the next, as the purchases' batches keep it), every
 * listing's lock (item strategy), or none (optimistic). An attempt
 *   1. reads in one pipeline, after the list orders' idempotency claims:
 *      WATCH of the market (not under the item strategy, whose listing
 *      locks guard their listings), the locks and their fencing records,
 *      the records and each seller's inventory and stacks; then for every
 *      order whether the seller holds the item, its units, and the seller's
 *      listing of it (price and units); the fencing records; the records;
 *      and the realm's settings (market_settings.c). When the realm
 *      charges a listing fee, a second round trip WATCHes the sellers and
 *      reads their funds;
 *   2. decides in queue order against an in-memory copy of what was read,
 *      per seller and item (market__list_rule for a list, then its fee: a
 *      seller who cannot pay it is refused; an unlist takes the listing
 *      back, and gives no fee back), exactly as if they ran one at a time;
 *   3. commits in one MULTI/EXEC: our fences, each order's moves (the
 *      seller's item or units, the listing, its index entries, an entry in
 *      the realm's feed of changes), the sellers' fees and the house's, and
 *      the list orders' records.
 * A list of units at or under the price of a buy order sells into the book
 * first (market_bids.h), the rest is listed: the read also watches each
 * such order's book and reads its bids at or over the price, and when
 * there are any, the second round trip watches and reads them with the
 * sellers' funds (their proceeds). The list is checked as if all of it
 * were listed (held, its price against the seller's listing), then sells
 * what the book wants, the realm's cut paid as in any sale, then lists the
 * rest, paying the listing fee on what it lists; the commit writes the
 * fills with the rest (trade records, the buy orders, the buyers' units
 * and escrow). A batch takes at most MARKET__BIDS_ORDERS orders.
 *
 * ENDS
 * A list with a duration (its own, or the realm's list_duration_s) gives a
 * new listing an end in market:{r}:ends, by the store's clock (TIME, read
 * with the rest); units added to a listing with an end move it to the
 * later of the two, and a listing without one keeps none. An unlist drops
 * the end. An ending (MARKET_ORDER_EXPIRE) is an unlist decided against the
 * end as read: before it, nothing is done (the listing was listed again
 * later); a listing bought meanwhile has only its end dropped. The end is
 * read under the batch's guard, so each ending commits at most once. An
 * ending carries its sweeper's lease token: the read WATCHes the realm's
 * sweep lease and reads it, and an ending whose sweeper no longer holds it
 * is refused MARKET_ERR_LEASE_LOST (a sweeper paused past its lease cannot
 * commit after another took over).
 */
#include "market/market_kinds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_bids.h"

/* The kind's state on a lane: a batch of one realm's list and unlist
 * orders, and what its attempt reads and decides. */
struct listing_batch {
    market__kstate k; /* its read and commit buffers (market_combine.h) */
    market__frame f;  /* its open orders, their keys and the read's frame */
    market__realm realm;
    char member[MARKET__BATCH_MAX][MARKET__MEMBER_MAX];
    char k_inv[MARKET__BATCH_MAX][MARKET__KEY_MAX];
    char k_stacks[MARKET__BATCH_MAX][MARKET__KEY_MAX];
    size_t first[MARKET__BATCH_MAX]; /* the first order of the same seller and item */
    /* on a seller and item's first order: as read, then as the batch decides */
    int unique[MARKET__BATCH_MAX];        /* holds the unique item (-1: unreadable) */
    int64_t stacked[MARKET__BATCH_MAX];   /* units held (-1: unreadable) */
    int64_t listed[MARKET__BATCH_MAX];    /* its listing's price (MARKET__NOT_LISTED) */
    int64_t listed_units[MARKET__BATCH_MAX]; /* its listing's units (0: a unique item) */
    int64_t end[MARKET__BATCH_MAX];          /* its listing's end (MARKET__NO_END, ...) */
    /* per order decided, what its commit moves */
    int stack[MARKET__BATCH_MAX];            /* list: units (1) or the unique item */
    int64_t stacked_before[MARKET__BATCH_MAX], listed_before[MARKET__BATCH_MAX];
    int64_t rest[MARKET__BATCH_MAX]; /* list: the units listed, after those sold into a book */
    int64_t end_set[MARKET__BATCH_MAX]; /* the listing's new end (0: none written) */
    int end_drop[MARKET__BATCH_MAX];    /* its end goes */
    market__idx_entry ix[MARKET__BATCH_MAX];
    size_t i_own;
    /* with a listing fee: the sellers of list orders, their funds, and the fees' way */
    market__parties u;
    size_t seller[MARKET__BATCH_MAX];
    market__cut cut;
    /* a list of units at or under a buy order's price sells into its book first */
    char k_book[MARKET__BIDS_ORDERS][MARKET__KEY_MAX];
    char lo[MARKET__BIDS_ORDERS][24]; /* minus its price: the lowest score it sells to */
    size_t i_books;
    market__bids t;
    market__cut sale_cut; /* the realm's cut of what sells into the book */
};

/* Whether order i is a list of units (only goods have books). */
static int sells_into_book(const struct listing_batch *b, size_t i) {
    return b->f.req[i]->type == MARKET_ORDER_LIST && b->f.req[i]->quantity > 0;
}

/* ---- one attempt ---- */

/* Names what the batch reads and locks: the realm's market lock, or each
 * listing's lock (item strategy), or none. */
static int prepare(market_conn *c, market__cbatch *cb) {
    struct listing_batch *b = cb->ks;
    market__realm_init(&b->realm, cb->realm);
    int rc = market__frame_begin(&b->f, cb, 0); /* an unlist has no key: it never replays */
    b->f.fees = 1;
    b->f.clock = 1; /* ends are by the store's clock */
    for (size_t i = 0; rc == MARKET_OK && i < b->f.n; i++) {
        market_order *o = b->f.req[i];
        market__join(b->member[i], sizeof b->member[i], o->item, ".", o->player,
                     (const char *)NULL);
        market__key_inventory(b->k_inv[i], b->realm.id, o->player);
        market__key_stacks(b->k_stacks[i], b->realm.id, o->player);
        b->first[i] = i;
        for (size_t j = 0; j < i; j++)
            if (strcmp(b->member[j], b->member[i]) == 0) {
                b->first[i] = j;
                break;
            }
        if (cb->policy == MARKET__POLICY_EACH) market__cbatch_lock(cb, "item", b->member[i]);
        if (o->type == MARKET_ORDER_EXPIRE && o->token) b->f.lease_key = b->realm.sweep;
        if (sells_into_book(b, i)) {
            market__key_book(b->k_book[i], b->realm.id, o->item);
            market__i64_str(b->lo[i], -o->price);
        }
    }
    (void)c;
    return rc;
}

/* Builds the read (see DESIGN, step 1) into b->k.rb. */
static void read_build(const market *m, const market__held *held, struct listing_batch *b) {
    market__buf *r = &b->k.rb;
    market__frame_read(&b->f, r);
    if (m->cfg.strategy != MARKET_STRATEGY_ITEM) { /* a listing's units and end, as its price */
        market__buf_arg(r, b->realm.market);
        market__buf_arg(r, b->realm.units);
        market__buf_arg(r, b->realm.ends);
    }
    for (size_t i = 0; i < b->f.n; i++) {
        market__buf_arg(r, b->k_inv[i]);
        market__buf_arg(r, b->k_stacks[i]);
        if (sells_into_book(b, i)) market__buf_arg(r, b->k_book[i]);
    }
    market__frame_watched(&b->f, held, 1, r);
    b->i_own = r->n;
    for (size_t i = 0; i < b->f.n; i++) {
        market__rd_holds(r, b->k_inv[i], b->f.req[i]->item);
        market__rd_units(r, b->k_stacks[i], b->f.req[i]->item);
        market__rd_listing(r, &b->realm, b->member[i]);
        market__rd_end(r, &b->realm, b->member[i]);
    }
    b->i_books = r->n;
    for (size_t i = 0; i < b->f.n; i++)
        if (sells_into_book(b, i))
            market__rd_book_from(r, b->k_book[i], b->lo[i], MARKET__BIDS_SCAN);
}

/* With a listing fee, or buy orders to sell into: WATCHes the sellers of
 * the list orders and reads their funds, and WATCHes and reads the buy
 * orders, in a second round trip (see DESIGN, step 1). Returns MARKET_OK,
 * or the error of the whole batch. */
static int read_sellers(market_conn *c, struct listing_batch *b) {
    b->u.n = 0;
    for (size_t i = 0; i < b->f.n; i++)
        if (b->f.req[i]->type == MARKET_ORDER_LIST)
            b->seller[i] = market__parties_of(&b->u, b->realm.id, b->f.req[i]->player);
    size_t n_sellers = b->u.n;
    if ((b->f.settings.list_fee_bps == 0 || n_sellers == 0) && b->t.n == 0) return MARKET_OK;
    market__buf *r = &b->k.rb;
    market__buf_reset(r);
    market__rd_watch_begin(r);
    market__parties_watch(&b->u, r);
    market__buf_end(r, 0);
    market__parties_read(&b->u, NULL, n_sellers, r);
    size_t i_bids = b->t.n ? market__bids_read_build(&b->t, b->realm.id, r) : 0;
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    if (!market__reply_ok(r->rep[0]))
        rc = market__fail_reply(c, "read refused", r->rep[0]);
    else
        market__parties_parse(&b->u, r->rep + 1, NULL, n_sellers);
    if (rc == MARKET_OK && b->t.n)
        rc = market__bids_read_parse(c, &b->t, b->realm.id, &b->u, r->rep + i_bids);
    market__replies_free(r->rep, r->n);
    return rc;
}

/* Reads what the batch decides on. Returns MARKET_OK, or the error of the
 * whole batch (see market__frame_judge). */
static int batch_read(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct listing_batch *b = cb->ks;
    read_build(c->m, held, b);
    int rc = market__pipeline_buf(c, &b->k.rb);
    if (rc < 0) return rc;
    redisReply **rep = b->k.rb.rep;
    rc = market__frame_judge(&b->f, c, held, rep);
    for (size_t i = 0; rc == MARKET_OK && i < b->f.n; i++) {
        if (b->first[i] != i) continue;
        redisReply **o = rep + b->i_own + 5 * i;
        b->unique[i] = market__reply_holds(o[0]);
        b->stacked[i] = market__reply_units(o[1]);
        b->listed[i] = market__reply_price(o[2]);
        b->listed_units[i] = market__reply_units(o[3]);
        b->end[i] = market__reply_end(o[4]);
    }
    market__bids_begin(&b->t);
    for (size_t i = 0, k = b->i_books; rc == MARKET_OK && i < b->f.n; i++)
        if (sells_into_book(b, i)) rc = market__bids_offers(c, &b->t, i, rep[k++], b->k_book[i]);
    market__replies_free(rep, b->k.rb.n);
    return rc == MARKET_OK ? read_sellers(c, b) : rc;
}

/* The listing fee of q units at price (cut: the listing fee's): the
 * seller s pays it out of its funds, the house gets it. Returns MARKET_OK
 * with *fee set (0 when the realm charges none, or q is 0), or the
 * refusal. */
static int pay_fee(market__party *s, market__cut *cut, int64_t price, int64_t q, int64_t *fee) {
    *fee = 0;
    if (cut->bps == 0 || q == 0) return MARKET_OK;
    *fee = market_fee(price > INT64_MAX / q ? INT64_MAX : price * q, cut->bps);
    if (s->known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    if (s->known != MARKET__PRESENT) return MARKET_ERR_NO_PLAYER;
    if (s->funds < *fee) return MARKET_ERR_INSUFFICIENT_FUNDS;
    s->funds -= *fee;
    if (cut->house)
        cut->house->funds += *fee; /* no overflow: a realm's funds fit an int64 */
    else
        cut->unread += *fee;
    return MARKET_OK;
}

/* List order i's sale into its book and its listing fee, after its rule
 * passed for all of its q units: sells what the book wants at its price or
 * more, and pays the fee on the rest. Works on copies of the seller, the
 * house and the cuts, kept only when both succeed. Returns MARKET_OK with
 * *rest the units left to list and *fee the listing fee, or the refusal. */
static int sell_then_pay(struct listing_batch *b, size_t i, int64_t q, int64_t *rest,
                         int64_t *fee) {
    market_order *o = b->f.req[i];
    size_t si = b->seller[i];
    int into = sells_into_book(b, i) && b->t.n_offers[i] > 0;
    market__party seller = b->u.party[si];
    market__cut_copy sc, lc; /* the sale's cut and the listing fee's: one house */
    market__cut_begin(&sc, &b->sale_cut, &b->u, si, &seller);
    market__cut_begin(&lc, &b->cut, &b->u, si, &seller);
    if (sc.cut.house && lc.cut.house) lc.cut.house = sc.cut.house; /* sc keeps it */
    market__sold sold = {0};
    int rc = MARKET_OK;
    if (into) { /* proceeds go to the seller: it must be there, and be read */
        rc = seller.known == MARKET__UNREADABLE ? MARKET_ERR_STORE
             : seller.known != MARKET__PRESENT
                 ? MARKET_ERR_NO_PLAYER
                 : market__bids_fill(&b->t, i, o->player, q, o->price, 0, &seller, &sc.cut, &sold);
    }
    if (rc == MARKET_OK) rc = pay_fee(&seller, &lc.cut, o->price, q - sold.units, fee);
    if (rc != MARKET_OK) {
        if (into) b->t.n_took[i] = 0;
        return rc;
    }
    if (into) market__bids_take(&b->t, i);
    if (seller.known == MARKET__PRESENT) b->u.party[si] = seller;
    market__cut_keep(&sc, &b->sale_cut, &b->u);
    market__cut_keep(&lc, &b->cut, &b->u);
    o->res.list.sold = sold.units;
    o->res.list.total = sold.total;
    *rest = q - sold.units;
    return MARKET_OK;
}

/* The end of what list order i lists, against its seller and item's state f (see ENDS):
 * a new listing ends after its duration (or has its stale end dropped), one that grows
 * keeps the later of its end and the new one. */
static void list_end(struct listing_batch *b, size_t i, size_t f) {
    const market_order *o = b->f.req[i];
    int64_t dur = o->duration_s ? o->duration_s : b->f.settings.list_duration_s;
    int64_t end = dur > 0 ? b->f.now_ms + dur * 1000 : 0;
    b->end_set[i] = 0;
    b->end_drop[i] = 0;
    if (b->listed_before[i] <= 0 && end == 0) {       /* a new listing without an end */
        b->end_drop[i] = b->end[f] != MARKET__NO_END; /* one its bought forerunner left */
        b->end[f] = MARKET__NO_END;
    } else if (end > 0 && (b->listed_before[i] <= 0 || (b->end[f] >= 0 && end > b->end[f]))) {
        b->end_set[i] = b->end[f] = end;
    }
}

/* Decides list order i against its seller and item's state f; its record
 * keeps a not_held's units held, a price_changed's price or a success's
 * asking price (*a), a success's units listed now (*q_listed: 0 when all
 * of it sold and the seller had no listing of it) and its fee. */
static int decide_list(struct listing_batch *b, size_t i, size_t f, int64_t *a, int64_t *q_listed,
                       int64_t *fee) {
    market_order *o = b->f.req[i];
    market_list_result *res = &o->res.list;
    int64_t q = o->quantity > 0 ? o->quantity : 1;
    int stack = 0;
    int rc = b->unique[f] < 0 ? MARKET_ERR_STORE
                              : market__list_rule(b->unique[f], b->stacked[f], o->quantity,
                                                  b->listed[f], b->listed_units[f], o->price,
                                                  &stack);
    if (rc == MARKET_ERR_NOT_HELD) *a = res->held = b->stacked[f];
    if (rc == MARKET_ERR_PRICE_CHANGED) *a = res->price = b->listed[f];
    int64_t rest = q;
    if (rc == MARKET_OK && b->end[f] == MARKET__END_UNREADABLE) rc = MARKET_ERR_STORE;
    if (rc == MARKET_OK) rc = sell_then_pay(b, i, q, &rest, fee);
    if (rc != MARKET_OK) return rc;
    res->fee = *fee;
    b->stack[i] = stack;
    b->stacked_before[i] = b->stacked[f];
    b->listed_before[i] = b->listed[f];
    b->rest[i] = rest;
    *q_listed = res->quantity = stack ? b->listed_units[f] + rest : 1;
    if (stack) {
        b->stacked[f] -= q;
        b->listed_units[f] += rest;
    } else {
        b->unique[f] = 0;
    }
    *a = o->price;
    if (rest > 0) {
        list_end(b, i, f);
        b->listed[f] = o->price;
    } /* else all of it sold: listed as it was */
    res->ends_ms = b->listed[f] > 0 && b->end[f] >= 0 ? b->end[f] : 0;
    return MARKET_OK;
}

/* Decides unlist order i against its seller and item's state f. */
static int decide_unlist(struct listing_batch *b, size_t i, size_t f) {
    market_unlist_result *res = &b->f.req[i]->res.unlist;
    if (b->listed[f] == MARKET__NOT_LISTED) return MARKET_ERR_NOT_LISTED;
    if (b->listed[f] < 0 || b->listed_units[f] < 0 || b->end[f] == MARKET__END_UNREADABLE)
        return MARKET_ERR_STORE;
    b->end_drop[i] = b->end[f] != MARKET__NO_END;
    b->end[f] = MARKET__NO_END;
    res->price = b->listed[f];
    res->units = b->listed_units[f] ? b->listed_units[f] : 1;
    b->stack[i] = b->listed_units[f] != 0;
    if (b->stack[i])
        b->stacked[f] = (b->stacked[f] > 0 ? b->stacked[f] : 0) + b->listed_units[f];
    else
        b->unique[f] = 1;
    b->listed[f] = MARKET__NOT_LISTED;
    b->listed_units[f] = 0;
    return MARKET_OK;
}

/* Decides ending i against its seller and item's state f (see ENDS): MARKET_OK when
 * its end has come (the listing taken back, or its end alone dropped when it was
 * bought), MARKET_ERR_NOT_LISTED when nothing is due, MARKET_ERR_LEASE_LOST when its
 * sweeper's lease is another's. */
static int decide_expire(struct listing_batch *b, size_t i, size_t f) {
    const market_order *o = b->f.req[i];
    market_unlist_result *res = &b->f.req[i]->res.unlist;
    if (!market__frame_lease_held(&b->f, o->token)) return MARKET_ERR_LEASE_LOST;
    if (b->end[f] == MARKET__END_UNREADABLE) return MARKET_ERR_STORE;
    if (b->end[f] == MARKET__NO_END || b->end[f] > b->f.now_ms) return MARKET_ERR_NOT_LISTED;
    int64_t late = b->f.now_ms - b->end[f];
    int rc = MARKET_OK;
    if (b->listed[f] == MARKET__NOT_LISTED) { /* bought meanwhile: its end alone goes */
        b->end_drop[i] = 1;
        b->end[f] = MARKET__NO_END;
    } else {
        rc = decide_unlist(b, i, f);
    }
    res->late_ms = late;
    return rc;
}

/* Fills list order o's result from v, a replay. */
static void replay(market_order *o, const market__outcome *v) {
    if (v->rc == MARKET_OK) o->res.list.quantity = v->b;
    if (v->rc == MARKET_OK) o->res.list.fee = v->c;
    if (v->rc == MARKET_ERR_NOT_HELD) o->res.list.held = v->a;
    if (v->rc == MARKET_ERR_PRICE_CHANGED) o->res.list.price = v->a;
}

/* Decides order i against its seller and item's state as the batch left it. */
static int decide_one(void *ks, size_t i, int64_t *a, int64_t *b_, int64_t *c) {
    struct listing_batch *b = ks;
    market_order *o = b->f.req[i];
    b->end_set[i] = 0;
    b->end_drop[i] = 0;
    if (o->type != MARKET_ORDER_LIST) {
        o->res.unlist = (market_unlist_result){0};
        return o->type == MARKET_ORDER_EXPIRE ? decide_expire(b, i, b->first[i])
                                              : decide_unlist(b, i, b->first[i]);
    }
    o->res.list = (market_list_result){0};
    return decide_list(b, i, b->first[i], a, b_, c);
}

/* Decides every order in queue order, as if they ran one at a time. */
static size_t batch_decide(market__cbatch *cb) {
    struct listing_batch *b = cb->ks;
    market__bids_restart(&b->t, b->f.n);
    market__frame_cut(&b->f, &b->u, b->u.n ? b->f.settings.fee_bps : 0, &b->sale_cut);
    market__frame_cut(&b->f, &b->u, b->u.n ? b->f.settings.list_fee_bps : 0, &b->cut);
    return market__frame_decide(&b->f, decide_one, replay, b);
}

/* Appends what order i, decided MARKET_OK, moves. */
static void commit_order(struct listing_batch *b, const market__held *held, size_t i,
                         market__buf *w) {
    market_order *o = b->f.req[i];
    if (b->end_drop[i]) market__fx_end_drop(w, &b->realm, b->member[i]);
    if (b->end_set[i]) market__fx_end_set(w, &b->realm, b->member[i], b->end_set[i]);
    if (o->type != MARKET_ORDER_LIST) {
        const market_unlist_result *u = &o->res.unlist;
        if (u->units == 0) return; /* an ending of a listing bought meanwhile */
        market__idx_entry_init(&b->ix[i], b->realm.id, o->item, o->player, u->price);
        market__fx_delist(w, &b->realm, b->member[i], b->stack[i]);
        if (b->listed[b->first[i]] == MARKET__NOT_LISTED) /* not listed again in the batch */
            market__held_drop(held, "item", b->realm.id, b->member[i], w);
        if (b->stack[i])
            market__fx_units(w, b->k_stacks[i], o->item, u->units);
        else
            market__fx_item_in(w, b->k_inv[i], o->item);
        market__fx_idx_remove(w, &b->ix[i], 1);
        market__fx_change(w, &b->realm, 0, o->player, o->item, u->price, u->units);
        return;
    }
    market__idx_entry_init(&b->ix[i], b->realm.id, o->item, o->player, o->price);
    int64_t q = o->quantity > 0 ? o->quantity : 1;
    if (!b->stack[i])
        market__fx_item_out(w, b->k_inv[i], o->item);
    else if (b->stacked_before[i] == q)
        market__fx_units_gone(w, b->k_stacks[i], o->item);
    else
        market__fx_units(w, b->k_stacks[i], o->item, -q);
    if (b->rest[i] == 0) return; /* all of it sold into the book */
    if (b->stack[i]) market__fx_listing_units(w, &b->realm, b->member[i], b->rest[i]);
    if (b->listed_before[i] <= 0) { /* a new listing: the market and the indexes */
        market__fx_list(w, &b->realm, b->member[i], o->price);
        market__fx_idx_add(w, &b->ix[i]);
    }
    market__fx_change(w, &b->realm, 1, o->player, o->item, o->price, o->res.list.quantity);
}

/* Hands each list order that sold into a book its fills and first trade
 * id. */
static void hand_fills(struct listing_batch *b) {
    size_t at = 0;
    for (size_t i = 0; i < b->f.n; i++) {
        if (!market__frame_won(&b->f, i) || !sells_into_book(b, i)) continue;
        market_list_result *res = &b->f.req[i]->res.list;
        res->n_fills =
            market__bids_hand(&b->t, i, at, b->f.req[i]->player, res->fill, res->trade_id);
        at += res->n_fills;
    }
}

/* The commit (see DESIGN, step 3). */
static int batch_commit(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct listing_batch *b = cb->ks;
    market__buf *w = &b->k.wb;
    /* the listing fees and proceeds: no funds without them */
    market__frame_commit(&b->f, held, &b->u, &b->cut, w);
    market__frame_cut_pay(&b->f, &b->sale_cut, w);
    for (size_t i = 0; i < b->f.n; i++)
        if (market__frame_won(&b->f, i)) commit_order(b, held, i, w);
    /* the fills after every seller's units: a seller's last units go with an HDEL, and it
     * may get units as a buyer in the same commit */
    b->t.n_trades = 0;
    for (size_t i = 0; i < b->f.n; i++)
        if (market__frame_won(&b->f, i) && sells_into_book(b, i))
            market__bids_commit(&b->t, &b->f, &b->u, i, b->f.req[i]->item, b->f.settings.house,
                                held->n ? held->fence[0] : "0", w);
    market__bids_commit_left(&b->t, b->realm.id, w);
    int rc = market__bids_trades(&b->t, c, w, b->realm.id);
    if (rc == MARKET_OK) hand_fills(b);
    return rc;
}

/* ---- the kind's ops (market_combine.h) ---- */

static size_t most(const market *m, int policy) {
    (void)policy;
    return m->cfg.batch_max < MARKET__BIDS_ORDERS ? m->cfg.batch_max : MARKET__BIDS_ORDERS;
}

/* Listing and taking back: a unique item, or units of a stackable good. */
const struct market__kind market__listing_kind = {
    .name = "listing",
    .slot = 2,
    .most = most,
    .state_size = sizeof(struct listing_batch),
    .prepare = prepare,
    .read = batch_read,
    .decide = batch_decide,
    .commit = batch_commit,
};
