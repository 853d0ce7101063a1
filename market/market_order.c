/* market_order.c - what every order kind does with its market_order, written
 * once: where its outcome goes (the result of its type), its place in a
 * combiner's queue, its outcome cleared when it is queued again, the
 * counters of purchases, and its answer (the caller's done callback).
 */
#include "market/market_order.h"

#include <string.h>

/* Whether o is a purchase (of a listing, or across sellers): counted in
 * purchases and purchased. */
static int is_purchase(const market_order *o) {
    return o->type == MARKET_ORDER_PURCHASE || o->type == MARKET_ORDER_BUY;
}

/* Queues o (arguments already checked by market_order_submit()) on m's
 * combiner q as an order of kind k, in group ("" for a realm's market) of
 * its realm, and returns at once. Returns MARKET_OK when o is queued
 * (o->done(o) will be called exactly once, from a worker of q),
 * MARKET_ERR_BUSY after q stopped, or MARKET_ERR_NOMEM (the worker cannot
 * start). */
int market__order_submit(market *m, market__combiner *q, const struct market__kind *k,
                         market_order *o, const char *group) {
    int *replayed = NULL; /* an unlist never replays: it has no idempotency key */
    char *trade_id = NULL; /* a list or unlist makes no trade */
    switch (o->type) {
    case MARKET_ORDER_PURCHASE:
        replayed = &o->res.purchase.replayed;
        trade_id = o->res.purchase.trade_id;
        break;
    case MARKET_ORDER_BUY:
        replayed = &o->res.buy.replayed;
        trade_id = o->res.buy.trade_id;
        break;
    case MARKET_ORDER_LIST: replayed = &o->res.list.replayed; break;
    case MARKET_ORDER_UNLIST: break;
    case MARKET_ORDER_SALE_BUY:
        replayed = &o->res.sale_buy.replayed;
        trade_id = o->res.sale_buy.trade_id;
        break;
    }
    o->q = (market_queued){.kind = k, .order = o, .realm = o->realm, .group = group,
                           .rc = &o->rc, .why = o->why, .replayed = replayed,
                           .trade_id = trade_id};
    int purchase = is_purchase(o), sale_buy = o->type == MARKET_ORDER_SALE_BUY;
    int rc = market__combine_submit(q, &o->q); /* o may be answered, and gone, from here on */
    if (rc == MARKET_OK && purchase) MARKET__COUNT(m, purchases);
    if (rc == MARKET_OK && sale_buy) MARKET__COUNT(m, sale_buys);
    return rc;
}

/* Clears the outcome of q's order: it is queued again. Can't fail. */
void market__order_reset(market_queued *q) {
    market_order *o = q->order;
    memset(&o->res, 0, sizeof o->res);
}

/* Counts q's order's outcome and hands it back (its done callback); the
 * order is not touched afterwards. */
void market__order_answer(market *m, market_queued *q) {
    market_order *o = q->order;
    if (o->rc == MARKET_OK && is_purchase(o) && !*q->replayed) MARKET__COUNT(m, purchased);
    o->done(o);
}
