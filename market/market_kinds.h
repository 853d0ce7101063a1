/* market_kinds.h - the order kinds, each an ops table of the combiner
 * (market_combine.h) in a file of its own: buying a listing
 * (market_purchase.c), buying units across sellers (market_buy.c), listing
 * and taking back (market_listing.c), buying from a flash sale
 * (market_sale.c), placing a buy order (market_buy.c, which fills it as
 * far as it can first), taking one back (market_cancel.c), selling into the book
 * (market_sell.c), auctions, their bids and endings (market_auction.c), direct
 * trades between two players (market_direct.c), each
 * over what every kind's attempt shares
 * (market_frame.h). market_order.c queues each order type as its kind. The
 * kinds call the frame, the combiner, the idempotency, trade, transaction
 * and store layers, nothing above. */
#ifndef GM_MARKET_MARKET_KINDS_H
#define GM_MARKET_MARKET_KINDS_H

#include "market/market_combine.h"

extern const struct market__kind market__purchase_kind;
extern const struct market__kind market__buy_kind;
extern const struct market__kind market__listing_kind;
extern const struct market__kind market__sale_kind;
extern const struct market__kind market__cancel_kind;
extern const struct market__kind market__sell_kind;
extern const struct market__kind market__auction_kind;
extern const struct market__kind market__direct_kind;

#endif /* GM_MARKET_MARKET_KINDS_H */
