/* market_order.h - what every order does, whatever its kind
 * (market_order.c): its type's check, the kind and lanes that serve it,
 * its place in their queue, its outcome cleared when it is queued again,
 * and its answer. market_api.c calls it; it calls the kinds and the
 * combiner, nothing above. */
#ifndef GM_MARKET_MARKET_ORDER_H
#define GM_MARKET_MARKET_ORDER_H

#include "market/market_combine.h"

int market__orders_new(market *m);
void market__orders_stop(market *m);
void market__orders_free(market *m);
market__combiner *market__order_lanes(const market *m, const market_order *o);
int market__order_submit(market *m, market_order *o);

#endif /* GM_MARKET_MARKET_ORDER_H */
