/* market_order.c - what every order does with its market_order, written
 * once: its type's check and the kind and lanes that serve it, where its
 * outcome goes (the result of its type), its place in a combiner's queue,
 * its outcome cleared when it is queued again, the counters of purchases,
 * and its answer (the caller's done callback).
 */
#include "market/market_order.h"

#include <string.h>

#include "market/market_kinds.h"

/* Whether a purchase can be served (market_purchase_units()'s check; an
 * order may also ask for quantity 0, one unit). */
static int purchase_ok(const market_order *o) {
    return market__purchase_args_ok(o->realm, o->player, o->seller, o->item, o->price, o->idem) &&
           o->quantity >= 0 && o->quantity <= MARKET_QUANTITY_MAX;
}

/* Whether a purchase without a seller can be served (market_buy_units()'s
 * check), or a buy order, or a sale into the book. */
static int buy_ok(const market_order *o) {
    return market_id_valid(o->realm) && market_id_valid(o->player) && market_id_valid(o->item) &&
           o->quantity >= 1 && o->quantity <= MARKET_QUANTITY_MAX && o->price >= 1 &&
           o->price <= MARKET_PRICE_MAX && market__idem_valid(o->idem);
}

/* Whether a cancel of a buy order can be served (market_order_submit()'s check). */
static int cancel_ok(const market_order *o) {
    return market_id_valid(o->realm) && market_id_valid(o->player) && o->id >= 1;
}

/* Whether a list can be served (market_list_units()'s check). */
static int list_ok(const market_order *o) {
    return market__listing_args_ok(o->realm, o->player, o->item, o->price, o->idem) &&
           o->quantity >= 0 && o->quantity <= MARKET_QUANTITY_MAX && o->duration_s >= 0 &&
           o->duration_s <= MARKET_DURATION_MAX_S;
}

/* Whether an unlist can be served (market_unlist_units()'s check). */
static int unlist_ok(const market_order *o) {
    return market_id_valid(o->realm) && market_id_valid(o->player) && market_id_valid(o->item);
}

/* Whether a new auction can be served: its goods, prices (a lot's total fits an int64 at
 * the buyout, or at MARKET_PRICE_MAX without one, the most a bid may be) and duration. */
static int auction_ok(const market_order *o) {
    int64_t q = o->quantity ? o->quantity : 1;
    int64_t top = o->buyout ? o->buyout : MARKET_PRICE_MAX;
    return market_id_valid(o->realm) && market_id_valid(o->player) && market_id_valid(o->item) &&
           o->quantity >= 0 && o->quantity <= MARKET_QUANTITY_MAX && o->price >= 1 &&
           o->price <= MARKET_PRICE_MAX && o->buyout >= 0 && o->buyout <= MARKET_PRICE_MAX &&
           (o->buyout == 0 || o->buyout >= o->price) && o->step >= 0 &&
           o->step <= MARKET_PRICE_MAX && top <= INT64_MAX / q && o->duration_s >= 1 &&
           o->duration_s <= MARKET_DURATION_MAX_S && market__idem_valid(o->idem);
}

/* Whether a bid can be served. */
static int auction_bid_ok(const market_order *o) {
    return market_id_valid(o->realm) && market_id_valid(o->player) && o->id >= 1 && o->price >= 1 &&
           o->price <= MARKET_PRICE_MAX && market__idem_valid(o->idem);
}

/* Whether an auction's ending can be served. */
static int auction_end_ok(const market_order *o) {
    return market_id_valid(o->realm) && o->id >= 1;
}

/* Whether a direct trade's proposal can be served: two players, valid sides, not both
 * empty, and a duration. */
static int direct_ok(const market_order *o) {
    return market_id_valid(o->realm) && market_id_valid(o->player) && market_id_valid(o->to) &&
           strcmp(o->player, o->to) != 0 && market_goods_valid(o->give) &&
           market_goods_valid(o->get) &&
           (o->give->n_items || o->give->n_units || o->give->funds || o->get->n_items ||
            o->get->n_units || o->get->funds) &&
           o->duration_s >= 0 && o->duration_s <= MARKET_DURATION_MAX_S &&
           market__idem_valid(o->idem);
}

/* Whether an accept or a cancel of a direct trade can be served. */
static int direct_close_ok(const market_order *o) {
    return market_id_valid(o->realm) && market_id_valid(o->player) && o->id >= 1 &&
           market__idem_valid(o->idem);
}

/* Whether a sale buy can be served (market_sale_buy()'s check). */
static int sale_buy_ok(const market_order *o) {
    return market__sale_args_ok(o->realm, o->sale, o->player, o->quantity, o->idem);
}

/* An order type: how its arguments are checked, the kind that serves it,
 * and whether it is a purchase (counted in purchases and purchased) or a
 * sale buy (served on the sales' lanes, a sale a group). */
static const struct order_type {
    int (*ok)(const market_order *o);
    const struct market__kind *kind;
    int purchase, sale;
} order_types[] = {
    [MARKET_ORDER_PURCHASE] = {purchase_ok, &market__purchase_kind, 1, 0},
    [MARKET_ORDER_BUY] = {buy_ok, &market__buy_kind, 1, 0},
    [MARKET_ORDER_LIST] = {list_ok, &market__listing_kind, 0, 0},
    [MARKET_ORDER_UNLIST] = {unlist_ok, &market__listing_kind, 0, 0},
    [MARKET_ORDER_SALE_BUY] = {sale_buy_ok, &market__sale_kind, 0, 1},
    [MARKET_ORDER_BID] = {buy_ok, &market__buy_kind, 0, 0},
    [MARKET_ORDER_CANCEL] = {cancel_ok, &market__cancel_kind, 0, 0},
    [MARKET_ORDER_SELL] = {buy_ok, &market__sell_kind, 0, 0}, /* the same checks */
    [MARKET_ORDER_EXPIRE] = {unlist_ok, &market__listing_kind, 0, 0},
    [MARKET_ORDER_AUCTION] = {auction_ok, &market__auction_kind, 0, 0},
    [MARKET_ORDER_AUCTION_BID] = {auction_bid_ok, &market__auction_kind, 0, 0},
    [MARKET_ORDER_AUCTION_END] = {auction_end_ok, &market__auction_kind, 0, 0},
    [MARKET_ORDER_DIRECT] = {direct_ok, &market__direct_kind, 0, 0},
    [MARKET_ORDER_DIRECT_ACCEPT] = {direct_close_ok, &market__direct_kind, 0, 0},
    [MARKET_ORDER_DIRECT_CANCEL] = {direct_close_ok, &market__direct_kind, 0, 0},
};

/* Returns o's type when m can serve o (its arguments pass its type's
 * check), else NULL. This function can't fail. */
static const struct order_type *type_of(const market *m, const market_order *o) {
    if (!m || !o || (unsigned)o->type >= sizeof order_types / sizeof order_types[0]) return NULL;
    const struct order_type *t = &order_types[o->type];
    return t->ok(o) ? t : NULL;
}

/* Clears the outcome of q's order: it is queued again. Can't fail. */
static void order_reset(market_queued *q) {
    market_order *o = q->order;
    memset(&o->res, 0, sizeof o->res);
}

/* Counts q's order's outcome and hands it back (its done callback); the
 * order is not touched afterwards. */
static void order_answer(market *m, market_queued *q) {
    market_order *o = q->order;
    if (o->rc == MARKET_OK && order_types[o->type].purchase && !*q->replayed)
        MARKET__COUNT(m, purchased);
    o->done(o);
}

static const market__order_ops order_ops = {order_reset, order_answer};

/* Gives m its combiners (m->queue, m->sales). Returns 0, or -1 on
 * out-of-memory (then m has none). */
int market__orders_new(market *m) {
    m->queue = market__combine_new(m, &order_ops);
    m->sales = market__combine_new(m, &order_ops);
    if (m->queue && m->sales) return 0;
    market__orders_free(m);
    return -1;
}

/* Stops m's combiners taking orders (see market_shutdown()). */
void market__orders_stop(market *m) {
    market__combine_stop(m->queue);
    market__combine_stop(m->sales);
}

/* Frees m's combiners: what is queued is served first, and the locks
 * released. */
void market__orders_free(market *m) {
    market__combine_free(m->queue);
    market__combine_free(m->sales);
    m->queue = m->sales = NULL;
}

/* Returns the combiner that serves o when m can serve o (its arguments
 * pass its type's check), else NULL. This function can't fail. */
market__combiner *market__order_lanes(const market *m, const market_order *o) {
    const struct order_type *t = type_of(m, o);
    return !t ? NULL : t->sale ? m->sales : m->queue;
}

/* Queues o (inputs and done set) on its lanes as an order of its type's
 * kind and returns at once. Returns MARKET_OK when o is queued (o->done(o)
 * will be called exactly once, from a worker), MARKET_ERR_INVALID (bad
 * arguments, checked as its type's one-request function checks them; done
 * is not called), MARKET_ERR_BUSY after the market stopped, or
 * MARKET_ERR_NOMEM (the worker cannot start). */
int market__order_submit(market *m, market_order *o) {
    const struct order_type *t = type_of(m, o);
    if (!t || !o->done) return MARKET_ERR_INVALID;
    int *replayed = NULL;  /* an unlist or a cancel never replays: it has no key */
    char *trade_id = NULL; /* an unlist or a cancel makes no trade */
    switch (o->type) {
    case MARKET_ORDER_PURCHASE:
        replayed = &o->res.purchase.replayed;
        trade_id = o->res.purchase.trade_id;
        break;
    case MARKET_ORDER_BUY:
    case MARKET_ORDER_BID:
        replayed = &o->res.buy.replayed;
        trade_id = o->res.buy.trade_id;
        break;
    case MARKET_ORDER_LIST:
        replayed = &o->res.list.replayed;
        trade_id = o->res.list.trade_id; /* when it sold into the book */
        break;
    case MARKET_ORDER_UNLIST:
    case MARKET_ORDER_EXPIRE:
    case MARKET_ORDER_CANCEL: break;
    case MARKET_ORDER_AUCTION_END: /* never replays; sells with a trade */
        trade_id = o->res.auction.trade_id;
        break;
    case MARKET_ORDER_AUCTION:
    case MARKET_ORDER_AUCTION_BID:
        replayed = &o->res.auction.replayed;
        trade_id = o->res.auction.trade_id; /* when it sold (a buyout) */
        break;
    case MARKET_ORDER_DIRECT:
    case MARKET_ORDER_DIRECT_ACCEPT:
    case MARKET_ORDER_DIRECT_CANCEL: /* no trade record: the trade's hash is its record */
        replayed = &o->res.direct.replayed;
        break;
    case MARKET_ORDER_SELL:
        replayed = &o->res.sell.replayed;
        trade_id = o->res.sell.trade_id;
        break;
    case MARKET_ORDER_SALE_BUY:
        replayed = &o->res.sale_buy.replayed;
        trade_id = o->res.sale_buy.trade_id;
        break;
    }
    o->q = (market_queued){.kind = t->kind,
                           .order = o,
                           .realm = o->realm,
                           .group = t->sale ? o->sale : "",
                           .rc = &o->rc,
                           .why = o->why,
                           .replayed = replayed,
                           .trade_id = trade_id};
    int rc = market__combine_submit(t->sale ? m->sales : m->queue, &o->q);
    /* o may be answered, and gone, from here on */
    if (rc == MARKET_OK && t->purchase) MARKET__COUNT(m, purchases);
    if (rc == MARKET_OK && t->sale) MARKET__COUNT(m, sale_buys);
    return rc;
}
