/* market_rules.h - the rules of a purchase, as pure functions (market_rules.c).
 *
 * No Redis, no I/O, no clock: what the store said goes in, the verdict comes
 * out. Every path that decides a purchase asks these - the one-at-a-time
 * path, the batch's decision in queue order, and the batch's look-ahead that
 * chooses which funds to read - so the rules are written once, here, and
 * unit-tested without a Redis (tests/unit/test_market_rules.c). The rules
 * of a buy from a flash sale live here too (market__sale_rule), for the
 * same reasons.
 */
#ifndef GM_MARKET_MARKET_RULES_H
#define GM_MARKET_MARKET_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "market/market.h"

/* What the store said of a player's funds. */
enum market__known {
    MARKET__UNREAD = -2,     /* not read (yet): a verdict that needs them says so */
    MARKET__UNREADABLE = -1, /* there, but not a number: the purchase fails (ERR_STORE) */
    MARKET__ABSENT = 0,      /* no such player */
    MARKET__PRESENT = 1,     /* funds hold the value */
};

typedef struct market__party {
    int known;     /* enum market__known */
    int64_t funds; /* when PRESENT */
} market__party;

/* A listing's price as the rules take it: > 0 listed at that price. */
#define MARKET__NOT_LISTED 0        /* not listed, or sold earlier in the same batch */
#define MARKET__PRICE_UNREADABLE -1 /* listed, but its score is not a whole price */

#define MARKET__NEED_FUNDS 1 /* market__purchase_rule(): a party's funds are MARKET__UNREAD */

/* The realm's cut of a batch's sales (market_settings): bps of each sale's
 * total goes to the house, into house when the batch holds the house's
 * funds (it buys or sells in the batch), else into unread, paid to the
 * house without reading its funds (a realm's funds together fit in an
 * int64, so no balance can overflow: market_world_add_player). */
typedef struct market__cut {
    int64_t bps;          /* 0: no cut */
    market__party *house; /* NULL: the batch does not hold the house */
    int64_t unread;       /* out: cuts for a house the batch does not hold */
} market__cut;

int market__purchase_rule(int64_t price, int64_t expect_price, const market__party *buyer,
                          const market__party *seller);
int market__units_rule(int64_t price, int64_t units, int64_t quantity, int64_t expect_price,
                       const market__party *buyer, const market__party *seller,
                       const market__cut *cut);
int market__units_apply(int64_t price, int64_t units, int64_t quantity, int64_t expect_price,
                        market__party *buyer, market__party *seller, market__cut *cut,
                        int64_t *fee);

/* One listing a purchase without a seller may buy from, or one buy order a
 * sale into the book may fill (market__fill()). */
typedef struct market__offer {
    const char *seller; /* whose offer: a listing's seller, a buy order's buyer */
    int64_t price; /* of one unit */
    int64_t units; /* listed */
    int64_t take;  /* out: units bought from it */
} market__offer;

#define MARKET__FILL_ALL 1  /* market__fill(): all or nothing */
#define MARKET__FILL_SELL 2 /* market__fill(): the offers are buy orders, dearest first */
int market__fill(market__offer *offers, size_t n, const char *self, int64_t quantity, int64_t limit,
                 int flags, int64_t *available, int64_t *total);
int64_t market__auction_min_bid(const market_auction *a);
int market__bid_rule(const market_auction *a, const char *bidder, int64_t amount, int64_t now_ms,
                     int64_t *min_bid);
int market__list_rule(int unique_held, int64_t stacked, int64_t quantity, int64_t listed_price,
                      int64_t listed_units, int64_t price, int *stack);
int market__purchase_apply(int64_t price, int64_t expect_price, market__party *buyer,
                           market__party *seller);
/* What a sale's batch knows of the sale as it decides its buys in queue order. */
typedef struct market__sale_state {
    int known;                 /* MARKET__PRESENT, MARKET__ABSENT (no such sale), or
                                  MARKET__UNREADABLE */
    int64_t price, left, sold; /* of one unit; units left; units sold */
    int64_t limit;             /* most units one player may buy */
    int64_t start_ms, end_ms;  /* active while start_ms <= now < end_ms */
} market__sale_state;

int market__sale_rule(const market__sale_state *s, int64_t now_ms, int64_t quantity,
                      int64_t bought, int buyer_is_house, const market__party *buyer,
                      const market__party *house, int64_t *info);
int market__sale_apply(market__sale_state *s, int64_t now_ms, int64_t quantity, int64_t *bought,
                       int buyer_is_house, market__party *buyer, market__party *house,
                       int64_t *info);
int market__sale_args_ok(const char *realm, const char *sale, const char *buyer,
                         int64_t quantity, const market_idem *idem);
int market__sale_new_ok(const char *realm, const market_sale *s);
int market__idem_valid(const market_idem *idem);
int market__purchase_args_ok(const char *realm, const char *buyer, const char *seller,
                             const char *item, int64_t expect_price, const market_idem *idem);
int market__listing_args_ok(const char *realm, const char *seller, const char *item,
                            int64_t price, const market_idem *idem);

#endif /* GM_MARKET_MARKET_RULES_H */
