/* market_rules.c - the rules of a purchase and of the arguments every write
 * takes: pure functions (see market_rules.h). */
#include "market/market_rules.h"

#include <stdio.h>
#include <string.h>

/* Returns 1 when id matches [A-Za-z0-9_-]{1,64}, else 0. Can't fail. */
int market_id_valid(const char *id) {
    if (!id) return 0;
    size_t n = 0;
    for (const char *p = id; *p; p++, n++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ch == '-';
        if (!ok || n >= MARKET_ID_MAX) return 0;
    }
    return n > 0;
}

/* Whether buf (n bytes) holds a valid id, NUL-terminated within it. */
static int id_in(const char *buf, size_t n) {
    return memchr(buf, '\0', n) && market_id_valid(buf);
}

/* Returns 1 when g is a valid side of a direct trade: at most MARKET_DIRECT_GOODS_MAX unique
 * items and as many kinds of units, each a valid id named once (an item is unique or
 * stackable, not both), 1..MARKET_QUANTITY_MAX units of each kind, funds
 * 0..MARKET_PRICE_MAX; else 0. g may be empty. Can't fail. */
int market_goods_valid(const market_goods *g) {
    if (!g || g->n_items > MARKET_DIRECT_GOODS_MAX || g->n_units > MARKET_DIRECT_GOODS_MAX ||
        g->funds < 0 || g->funds > MARKET_PRICE_MAX)
        return 0;
    const size_t sz = MARKET_ID_MAX + 1;
    for (size_t i = 0; i < g->n_items; i++) {
        if (!id_in(g->items[i], sz)) return 0;
        for (size_t j = 0; j < i; j++)
            if (strcmp(g->items[i], g->items[j]) == 0) return 0;
    }
    for (size_t i = 0; i < g->n_units; i++) {
        if (!id_in(g->unit_item[i], sz) || g->units[i] < 1 || g->units[i] > MARKET_QUANTITY_MAX)
            return 0;
        for (size_t j = 0; j < i; j++)
            if (strcmp(g->unit_item[i], g->unit_item[j]) == 0) return 0;
        for (size_t j = 0; j < g->n_items; j++)
            if (strcmp(g->unit_item[i], g->items[j]) == 0) return 0;
    }
    return 1;
}

/* Returns 1 when key matches [A-Za-z0-9_.:-]{1,128}, else 0. Can't fail. */
int market_idem_key_valid(const char *key) {
    if (!key) return 0;
    size_t n = 0;
    for (const char *q = key; *q; q++, n++) {
        char ch = *q;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ch == '-' || ch == '.' || ch == ':';
        if (!ok || n >= MARKET_IDEM_KEY_MAX) return 0;
    }
    return n > 0;
}

/* Whether idem (NULL is fine) has a valid key and fingerprint. */
int market__idem_valid(const market_idem *idem) {
    if (!idem) return 1;
    if (!market_idem_key_valid(idem->key) || !idem->fingerprint) return 0;
    size_t n = strlen(idem->fingerprint);
    return n > 0 && n <= MARKET_IDEM_FP_MAX && !strchr(idem->fingerprint, ' ');
}

/* Decides a purchase of a listing at price (MARKET__NOT_LISTED,
 * MARKET__PRICE_UNREADABLE, or the price) by buyer from seller. expect_price
 * > 0 makes it conditional on that price. The checks, in this order, and the
 * first that fails is the verdict:
 *   listed?                 MARKET_ERR_NOT_LISTED (unreadable: MARKET_ERR_STORE)
 *   at the expected price?  MARKET_ERR_PRICE_CHANGED
 *   does the buyer exist?   MARKET_ERR_NO_PLAYER (unreadable: MARKET_ERR_STORE)
 *   can the buyer pay?      MARKET_ERR_INSUFFICIENT_FUNDS
 *   can the seller be paid? MARKET_ERR_OVERFLOW (unreadable: MARKET_ERR_STORE; a seller
 *                           without funds is paid from 0)
 * Returns MARKET_OK when the purchase may happen, a refusal above, or
 * MARKET__NEED_FUNDS when deciding needs funds that are MARKET__UNREAD.
 * This function can't fail otherwise. */
int market__purchase_rule(int64_t price, int64_t expect_price, const market__party *buyer,
                          const market__party *seller) {
    return market__units_rule(price, 1, 1, expect_price, buyer, seller, NULL);
}

/* market__purchase_rule(), and when it allows the purchase, moves price
 * from buyer's funds to seller's (a seller without funds starts at 0).
 * Returns the verdict. This function can't fail otherwise. */
int market__purchase_apply(int64_t price, int64_t expect_price, market__party *buyer,
                           market__party *seller) {
    return market__units_apply(price, 1, 1, expect_price, buyer, seller, NULL, NULL);
}

/* Returns the cut of a sale of total (>= 0) at fee_bps basis points
 * (0..MARKET_FEE_BPS_MAX): total * fee_bps / 10000 rounded down, computed
 * so that it cannot overflow. This function can't fail. */
int64_t market_fee(int64_t total, int64_t fee_bps) {
    if (total <= 0 || fee_bps <= 0) return 0;
    if (fee_bps > MARKET_FEE_BPS_MAX) fee_bps = MARKET_FEE_BPS_MAX;
    return total / 10000 * fee_bps + total % 10000 * fee_bps / 10000;
}

/* Decides a purchase of quantity units of a listing of units units (a
 * unique item is a listing of one) at price each (MARKET__NOT_LISTED,
 * MARKET__PRICE_UNREADABLE, or the price), as market__purchase_rule()
 * does one unit, with one more check after the price: are there enough
 * units? (MARKET_ERR_NOT_ENOUGH). A total past 2^63-1 is more than any
 * buyer can pay (MARKET_ERR_INSUFFICIENT_FUNDS). With cut (NULL: none) the
 * seller is paid the total less the realm's cut, and a house the batch
 * holds must be able to take it (MARKET_ERR_OVERFLOW). quantity and units
 * are at least 1. This function can't fail otherwise. */
int market__units_rule(int64_t price, int64_t units, int64_t quantity, int64_t expect_price,
                       const market__party *buyer, const market__party *seller,
                       const market__cut *cut) {
    if (price < 0 || units < 0 || quantity <= 0) return MARKET_ERR_STORE; /* unreadable */
    if (price == MARKET__NOT_LISTED || units == 0) return MARKET_ERR_NOT_LISTED;
    if (expect_price > 0 && expect_price != price) return MARKET_ERR_PRICE_CHANGED;
    if (units < quantity) return MARKET_ERR_NOT_ENOUGH;
    if (buyer->known == MARKET__UNREAD || seller->known == MARKET__UNREAD)
        return MARKET__NEED_FUNDS;
    if (buyer->known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    if (buyer->known == MARKET__ABSENT) return MARKET_ERR_NO_PLAYER;
    if (price > INT64_MAX / quantity || buyer->funds < price * quantity)
        return MARKET_ERR_INSUFFICIENT_FUNDS;
    int64_t total = price * quantity, fee = cut ? market_fee(total, cut->bps) : 0;
    const market__party *house = fee ? cut->house : NULL;
    if (seller->known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    int64_t seller_funds = seller->known == MARKET__PRESENT ? seller->funds : 0;
    if (seller_funds > INT64_MAX - (house == seller ? total : total - fee))
        return MARKET_ERR_OVERFLOW;
    if (house && house != seller && house != buyer &&
        (house->known != MARKET__PRESENT || house->funds > INT64_MAX - fee))
        return house->known == MARKET__PRESENT ? MARKET_ERR_OVERFLOW : MARKET_ERR_STORE;
    return MARKET_OK;
}

/* market__units_rule(), and when it allows the purchase, moves the total
 * from buyer's funds to seller's (a seller without funds starts at 0), less
 * the cut: into cut->house when the batch holds it, else added to
 * cut->unread (paid to the house unread). *fee (NULL: not wanted) gets the
 * cut. Returns the verdict. This function can't fail otherwise. */
int market__units_apply(int64_t price, int64_t units, int64_t quantity, int64_t expect_price,
                        market__party *buyer, market__party *seller, market__cut *cut,
                        int64_t *fee) {
    int rc = market__units_rule(price, units, quantity, expect_price, buyer, seller, cut);
    if (fee) *fee = 0;
    if (rc != MARKET_OK) return rc;
    if (seller->known != MARKET__PRESENT) {
        seller->known = MARKET__PRESENT;
        seller->funds = 0;
    }
    int64_t total = price * quantity, cut_of = cut ? market_fee(total, cut->bps) : 0;
    buyer->funds -= total;
    seller->funds += total - cut_of;
    if (cut_of && cut->house)
        cut->house->funds += cut_of;
    else if (cut_of)
        cut->unread += cut_of;
    if (fee) *fee = cut_of;
    return MARKET_OK;
}

/* Chooses what a purchase without a seller buys: quantity units from
 * offers[0..n) (the listings of one item, cheapest first), taking from the
 * cheapest at or under limit that are not self's own, all or nothing
 * (MARKET__FILL_ALL), or as many as there are (a buy order, which rests
 * the rest). With MARKET__FILL_SELL the offers are buy orders instead
 * (dearest first: a sale into the book), taken at or over limit. Sets
 * offers[i].take and *total (what they cost together). Returns MARKET_OK,
 * or (all or nothing) MARKET_ERR_NOT_ENOUGH with *available the units
 * that could be had at that price (every take 0). The funds are judged
 * apart (by market__units_rule() per offer). This function can't fail
 * otherwise. */
int market__fill(market__offer *offers, size_t n, const char *self, int64_t quantity, int64_t limit,
                 int flags, int64_t *available, int64_t *total) {
    int64_t left = quantity, have = 0, cost = 0;
    int sell = (flags & MARKET__FILL_SELL) != 0, all = (flags & MARKET__FILL_ALL) != 0;
    for (size_t i = 0; i < n; i++) {
        market__offer *o = &offers[i];
        o->take = 0;
        if ((sell ? o->price < limit : o->price > limit) || o->units <= 0 ||
            strcmp(o->seller, self) == 0)
            continue;
        have = o->units > INT64_MAX - have ? INT64_MAX : have + o->units;
        if (left == 0) continue;
        o->take = o->units < left ? o->units : left;
        left -= o->take;
        cost = o->price > (INT64_MAX - cost) / o->take ? INT64_MAX : cost + o->price * o->take;
    }
    *available = have;
    *total = left == 0 || !all ? cost : 0;
    if (left == 0 || !all) return MARKET_OK;
    for (size_t i = 0; i < n; i++) offers[i].take = 0;
    return MARKET_ERR_NOT_ENOUGH;
}

/* Decides a buy of quantity units from sale s by buyer, who has bought
 * bought units of it already (-1: unreadable), at the store's time now_ms;
 * buyer_is_house says the buyer is the sale's house. The checks, in this
 * order, and the first that fails is the verdict:
 *   is there such a sale?       MARKET_ERR_NO_SALE (unreadable: MARKET_ERR_STORE)
 *   is it on now?               MARKET_ERR_SALE_NOT_ACTIVE (before start_ms, or from end_ms)
 *   is the buyer not the house? MARKET_ERR_INVALID
 *   does the buyer exist?       MARKET_ERR_NO_PLAYER (unreadable: MARKET_ERR_STORE)
 *   are there units enough?     MARKET_ERR_SOLD_OUT, *info = the units left
 *   within the player's limit?  MARKET_ERR_LIMIT_EXCEEDED, *info = how many more they may
 *                               buy (unreadable bought: MARKET_ERR_STORE)
 *   can the buyer pay?          MARKET_ERR_INSUFFICIENT_FUNDS (also when quantity * price
 *                               exceeds any funds a player can hold)
 *   can the house be paid?      MARKET_ERR_OVERFLOW (unreadable: MARKET_ERR_STORE; a house
 *                               without funds is paid from 0)
 * Returns MARKET_OK when the buy may happen, or MARKET__NEED_FUNDS when
 * deciding needs funds that are MARKET__UNREAD. info may be NULL. This
 * function can't fail otherwise. */
int market__sale_rule(const market__sale_state *s, int64_t now_ms, int64_t quantity,
                      int64_t bought, int buyer_is_house, const market__party *buyer,
                      const market__party *house, int64_t *info) {
    int64_t scratch;
    if (!info) info = &scratch;
    *info = 0;
    if (s->known == MARKET__ABSENT) return MARKET_ERR_NO_SALE;
    if (s->known != MARKET__PRESENT) return MARKET_ERR_STORE;
    if (now_ms < s->start_ms || now_ms >= s->end_ms) return MARKET_ERR_SALE_NOT_ACTIVE;
    if (buyer_is_house) return MARKET_ERR_INVALID;
    if (buyer->known == MARKET__UNREAD || house->known == MARKET__UNREAD)
        return MARKET__NEED_FUNDS;
    if (buyer->known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    if (buyer->known == MARKET__ABSENT) return MARKET_ERR_NO_PLAYER;
    if (quantity < 1) return MARKET_ERR_INVALID;
    if (s->left < quantity) {
        *info = s->left > 0 ? s->left : 0;
        return MARKET_ERR_SOLD_OUT;
    }
    if (bought < 0) return MARKET_ERR_STORE;
    if (bought > s->limit || quantity > s->limit - bought) {
        *info = bought < s->limit ? s->limit - bought : 0;
        return MARKET_ERR_LIMIT_EXCEEDED;
    }
    if (s->price < 1 || quantity > INT64_MAX / s->price) return MARKET_ERR_INSUFFICIENT_FUNDS;
    int64_t total = quantity * s->price;
    if (buyer->funds < total) return MARKET_ERR_INSUFFICIENT_FUNDS;
    if (house->known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    int64_t house_funds = house->known == MARKET__PRESENT ? house->funds : 0;
    if (house_funds > INT64_MAX - total) return MARKET_ERR_OVERFLOW;
    return MARKET_OK;
}

/* market__sale_rule(), and when it allows the buy, applies it to what the
 * batch knows: the units leave s->left for s->sold and *bought, the total
 * moves from buyer's funds to house's (a house without funds starts at 0).
 * Returns the verdict. This function can't fail otherwise. */
int market__sale_apply(market__sale_state *s, int64_t now_ms, int64_t quantity, int64_t *bought,
                       int buyer_is_house, market__party *buyer, market__party *house,
                       int64_t *info) {
    int rc = market__sale_rule(s, now_ms, quantity, *bought, buyer_is_house, buyer, house, info);
    if (rc != MARKET_OK) return rc;
    int64_t total = quantity * s->price;
    if (house->known != MARKET__PRESENT) {
        house->known = MARKET__PRESENT;
        house->funds = 0;
    }
    s->left -= quantity;
    s->sold += quantity;
    *bought += quantity;
    buyer->funds -= total;
    house->funds += total;
    return MARKET_OK;
}

/* Whether a buy's arguments can be served: valid realm, sale and buyer ids,
 * a quantity in 1..MARKET_SALE_STOCK_MAX, a valid idempotency key (idem may
 * be NULL). Can't fail. */
int market__sale_args_ok(const char *realm, const char *sale, const char *buyer,
                         int64_t quantity, const market_idem *idem) {
    return market_id_valid(realm) && market_id_valid(sale) && market_id_valid(buyer) &&
           quantity >= 1 && quantity <= MARKET_SALE_STOCK_MAX && market__idem_valid(idem);
}

/* Whether a new sale s of realm can be created: valid ids (the house may be
 * "": the default), stock in 1..MARKET_SALE_STOCK_MAX, price in
 * 1..MARKET_PRICE_MAX, limit in 1..stock, start_ms < end_ms, both at least
 * 0. Can't fail. */
int market__sale_new_ok(const char *realm, const market_sale *s) {
    return s && market_id_valid(realm) && market_id_valid(s->id) && market_id_valid(s->item) &&
           (s->house[0] == '\0' || market_id_valid(s->house)) && s->initial >= 1 &&
           s->initial <= MARKET_SALE_STOCK_MAX && s->price >= 1 && s->price <= MARKET_PRICE_MAX &&
           s->limit >= 1 && s->limit <= s->initial && s->start_ms >= 0 &&
           s->start_ms < s->end_ms;
}

/* Whether a purchase's arguments can be served: valid ids, a buyer who is
 * not the seller, an expected price not above MARKET_PRICE_MAX (<= 0: any),
 * a valid idempotency key and fingerprint (idem may be NULL). Can't fail. */
int market__purchase_args_ok(const char *realm, const char *buyer, const char *seller,
                             const char *item, int64_t expect_price, const market_idem *idem) {
    return market_id_valid(realm) && market_id_valid(buyer) && market_id_valid(seller) && market_id_valid(item) &&
           strcmp(buyer, seller) != 0 && expect_price <= MARKET_PRICE_MAX &&
           market__idem_valid(idem);
}

/* Whether a listing's arguments can be served: valid ids, a price in
 * 1..MARKET_PRICE_MAX, a valid idempotency key (idem may be NULL). */
int market__listing_args_ok(const char *realm, const char *seller, const char *item,
                            int64_t price, const market_idem *idem) {
    return market_id_valid(realm) && market_id_valid(seller) && market_id_valid(item) && price >= 1 &&
           price <= MARKET_PRICE_MAX && market__idem_valid(idem);
}

/* Writes the id of the i-th realm (0-based) of a world spread over several
 * realms, "r<i>", into out: the names market-seed --generate realms=R and
 * market-load --realms R agree on. Returns 0, or -1 when i is not below
 * MARKET_REALMS_MAX or out is too small. */
int market_realm_nth(unsigned i, char *out, size_t outlen) {
    if (i >= MARKET_REALMS_MAX) return -1;
    int n = snprintf(out, outlen, "r%u", i);
    return n > 0 && (size_t)n < outlen ? 0 : -1;
}

/* Reads the decimal digits at *p (at least one, no sign) into *v, advancing
 * *p past them. Returns 0, or -1 when there are none or they exceed 2^64-1. */
static int read_u64(const char **p, uint64_t *v) {
    const char *s = *p;
    uint64_t x = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (x > (UINT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
    }
    if (s == *p) return -1;
    *p = s;
    *v = x;
    return 0;
}

/* Returns 1 when id is a trade id, "<ms>-<seq>" (a Redis stream id: two
 * decimal numbers below 2^64, no sign), else 0. Can't fail. */
int market_trade_id_valid(const char *id) {
    uint64_t ms, seq;
    if (!id || strlen(id) > MARKET_TRADE_ID_MAX || read_u64(&id, &ms) < 0 || *id++ != '-' ||
        read_u64(&id, &seq) < 0)
        return 0;
    return *id == '\0';
}

/* Decides a listing of quantity units (0: not given) of item at price, by
 * a seller who holds it as a unique item (unique_held) or has stacked units
 * of it (-1: unreadable), where the seller's listing of that item, if any,
 * is at listed_price (MARKET__NOT_LISTED: none) with listed_units (0: a
 * unique item's listing). A unique item is listed when held and no quantity
 * above 1 is asked; otherwise units are: they must be held
 * (MARKET_ERR_NOT_HELD), and join the seller's listing of the same item
 * only at its price (MARKET_ERR_PRICE_CHANGED). A unique item whose id the
 * seller also lists as units is refused (MARKET_ERR_DUPLICATE: listing it
 * would lose one of the two). Returns MARKET_OK with *stack (1: units, 0:
 * the unique item), a refusal, or MARKET_ERR_STORE for what cannot be
 * read. This function can't fail otherwise. */
int market__list_rule(int unique_held, int64_t stacked, int64_t quantity, int64_t listed_price,
                      int64_t listed_units, int64_t price, int *stack) {
    *stack = 0;
    if (unique_held && quantity <= 1) /* no listing of the same id: one of units would be lost */
        return listed_price == MARKET__NOT_LISTED ? MARKET_OK : MARKET_ERR_DUPLICATE;
    if (stacked < 0 || listed_price == MARKET__PRICE_UNREADABLE || listed_units < 0)
        return MARKET_ERR_STORE;
    int64_t q = quantity > 0 ? quantity : 1;
    if (stacked < q) return MARKET_ERR_NOT_HELD;
    if (listed_price > 0 && listed_units == 0) return MARKET_ERR_STORE; /* units and a unique */
    if (listed_price > 0 && listed_price != price) return MARKET_ERR_PRICE_CHANGED;
    if (listed_units > INT64_MAX - q) return MARKET_ERR_OVERFLOW;
    *stack = 1;
    return MARKET_OK;
}

/* ---- auctions ---- */

/* The least bid auction a takes now: its start, or its highest bid and its step (capped at
 * MARKET_PRICE_MAX). This function can't fail. */
int64_t market__auction_min_bid(const market_auction *a) {
    if (!a->bidder[0]) return a->start_bid;
    return a->bid > MARKET_PRICE_MAX - a->step ? MARKET_PRICE_MAX : a->bid + a->step;
}

/* Whether bidder may bid amount on auction a at now_ms (the store's clock): MARKET_OK, or
 * ERR_AUCTION_CLOSED (settled, or its end has come), ERR_OWN_AUCTION (its seller),
 * ERR_BID_TOO_LOW (*min_bid: the least it takes; its highest bidder may raise its own bid
 * as anyone else would). This function can't fail. */
int market__bid_rule(const market_auction *a, const char *bidder, int64_t amount, int64_t now_ms,
                     int64_t *min_bid) {
    *min_bid = market__auction_min_bid(a);
    if (a->state != MARKET_AUCTION_OPEN || now_ms >= a->ends_ms) return MARKET_ERR_AUCTION_CLOSED;
    if (strcmp(a->seller, bidder) == 0) return MARKET_ERR_OWN_AUCTION;
    if (amount < *min_bid) return MARKET_ERR_BID_TOO_LOW;
    return MARKET_OK;
}
