/* market_bids.h - the buy orders a batch may fill (market_bids.c), for the
 * kinds that sell into a book: a sale (market_sell.c) and a listing at or
 * under the best bid (market_listing.c). A book (book:{r}:<item>) holds
 * its orders' ids scored by minus their price, so that its first entries
 * are the best bids, and within a price the oldest (price-time priority:
 * market__bid_member()).
 *
 * A batch's table holds every buy order its orders may fill, each once, as
 * read and as the batch decides. The kind reads each order's range of its
 * book (market__rd_book_from(), MARKET__BIDS_SCAN entries, watching the
 * book) and hands the reply to market__bids_offers(); market__bids_read()
 * then watches and reads the orders in one more round trip;
 * market__bids_fill() decides an order's fills in queue order;
 * market__bids_commit() and market__bids_commit_left() write them. It
 * calls the frame, the trade records and the store, nothing above. */
#ifndef GM_MARKET_MARKET_BIDS_H
#define GM_MARKET_MARKET_BIDS_H

#include "market/market_frame.h"

#define MARKET__BIDS_SCAN                                                                          \
    (MARKET_FILL_MAX + 1)      /* a book's entries an order reads: one more                        \
                                   tells there are more */
#define MARKET__BIDS_ORDERS 12 /* most orders of a batch that sell into books */
#define MARKET__BIDS_MAX (MARKET__BIDS_ORDERS * MARKET__BIDS_SCAN)
#define MARKET__BIDS_TRADES (MARKET__BIDS_ORDERS * MARKET_FILL_MAX)

/* A buy order some order of the batch may fill. */
typedef struct market__bid {
    market_bid b; /* as read (b.left), */
    int64_t left; /* and as the batch decides */
    int read_rc;  /* MARKET_OK, or ERR_NO_ORDER (gone since the book was read), ERR_STORE */
    size_t party; /* its buyer's, in the batch's players */
} market__bid;

/* What one order takes from one buy order. */
typedef struct market__bid_take {
    size_t bid;
    int64_t units, fee;
} market__bid_take;

typedef struct market__bids {
    market__bid bid[MARKET__BIDS_MAX];
    size_t n;
    size_t offer[MARKET__BIDS_ORDERS][MARKET__BIDS_SCAN], n_offers[MARKET__BIDS_ORDERS];
    market__bid_take took[MARKET__BIDS_ORDERS][MARKET_FILL_MAX];
    size_t n_took[MARKET__BIDS_ORDERS];
    market__trade_rec trade[MARKET__BIDS_TRADES];
    size_t trade_req[MARKET__BIDS_TRADES], n_trades;
    const char *args_trades[MARKET__TRADES_ARGC(MARKET__BIDS_TRADES)];
    market__trades tw;
} market__bids;

/* What market__bids_fill() decided for one order. */
typedef struct market__sold {
    int64_t units, total, fee; /* sold, what they fetched, the realm's cut of it */
    int64_t available;         /* the units the book wants at or over the price */
} market__sold;

void market__bids_begin(market__bids *t);
int market__bids_offers(market_conn *c, market__bids *t, size_t i, const redisReply *z,
                        const char *book_key);
size_t market__bids_read_build(const market__bids *t, const char *realm, market__buf *r);
int market__bids_read_parse(market_conn *c, market__bids *t, const char *realm, market__parties *u,
                            redisReply **rep);
int market__bids_read(market_conn *c, market__bids *t, const char *realm, market__parties *u,
                      market__buf *r);
void market__bids_restart(market__bids *t, size_t n_orders);
int market__bids_fill(market__bids *t, size_t i, const char *seller, int64_t quantity,
                      int64_t min_price, int flags, market__party *seller_party, market__cut *cut,
                      market__sold *out);
void market__bids_take(market__bids *t, size_t i);
void market__bids_commit(market__bids *t, const market__frame *f, const market__parties *u,
                         size_t i, const char *item, const char *house, const char *fence,
                         market__buf *w);
void market__bids_commit_left(const market__bids *t, const char *realm, market__buf *w);
int market__bids_trades(market__bids *t, market_conn *c, market__buf *w, const char *realm);
size_t market__bids_hand(const market__bids *t, size_t i, size_t at, const char *seller,
                         market_fill *fill, char *trade_id);

#endif /* GM_MARKET_MARKET_BIDS_H */
