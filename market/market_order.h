/* market_order.h - what every order kind does with its market_order
 * (market_order.c): its place in a combiner's queue, its outcome cleared
 * when it is queued again, and its answer. The kinds (market_purchase.c,
 * market_buy.c, market_listing.c, market_sale.c) call it; it calls the
 * combiner, nothing above. */
#ifndef GM_MARKET_MARKET_ORDER_H
#define GM_MARKET_MARKET_ORDER_H

#include "market/market_combine.h"

int market__order_submit(market *m, market__combiner *q, const struct market__kind *k,
                         market_order *o, const char *group);
void market__order_reset(market_queued *q);
void market__order_answer(market *m, market_queued *q);

#endif /* GM_MARKET_MARKET_ORDER_H */
