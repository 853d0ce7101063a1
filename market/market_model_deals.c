/* market_model_deals.c - the data model of the deals between players: auctions (their
 * hash, indexes, ends, counter and feed entries: market_auction.c) and direct trades
 * (their hash, each side's index of open ones, counter: market_direct.c). Pure, as
 * market_model.c: it appends commands to a buffer and does no I/O. */
#include "market/market_model.h"

#include <stdio.h>
#include <string.h>

#include "market/market_cmds.h"

/* ---- auctions (market_auction.c) ---- */

/* The fields of an auction's hash, in the order market__rd_auction() reads them. */
#define AUCTION_FIELDS MARKET__AUCTION_FIELDS
static const char *const auction_fields[AUCTION_FIELDS] = {"seller", "item", "quantity", "start",
                                                           "buyout", "step", "ends",     "bidder",
                                                           "bid",    "bids", "state",    "fee"};
const char *const market__auction_states[3] = {"open", "sold", "unsold"}; /* by state */

/* The auction whose hash is key (market__key_auction()): its fields (market__reply_auction()). */
void market__rd_auction_at(market__buf *b, const char *key) {
    market__buf_begin(b, C_HMGET, key);
    for (size_t i = 0; i < AUCTION_FIELDS; i++)
        market__buf_arg(b, auction_fields[i]);
    market__buf_end(b, 0);
}

/* Auction id's fields (market__reply_auction()). */
void market__rd_auction(market__buf *b, const char *realm, int64_t id) {
    char key[MARKET__KEY_MAX];
    market__key_auction(key, realm, id);
    market__rd_auction_at(b, market__buf_join(b, key, (const char *)NULL));
}

/* Auction a is as it says: its hash written whole. */
void market__fx_auction_put(market__buf *b, const char *realm, const market_auction *a) {
    char key[MARKET__KEY_MAX];
    market__key_auction(key, realm, a->id);
    const char *v[AUCTION_FIELDS] = {market__buf_join(b, a->seller, (const char *)NULL),
                                     market__buf_join(b, a->item, (const char *)NULL),
                                     market__buf_i64(b, a->quantity),
                                     market__buf_i64(b, a->start_bid),
                                     market__buf_i64(b, a->buyout),
                                     market__buf_i64(b, a->step),
                                     market__buf_i64(b, a->ends_ms),
                                     market__buf_join(b, a->bidder, (const char *)NULL),
                                     market__buf_i64(b, a->bid),
                                     market__buf_i64(b, a->bids),
                                     market__auction_states[a->state],
                                     market__buf_i64(b, a->fee)};
    market__buf_begin(b, C_HSET, market__buf_join(b, key, (const char *)NULL));
    for (size_t i = 0; i < AUCTION_FIELDS; i++) {
        market__buf_arg(b, auction_fields[i]);
        market__buf_arg(b, v[i]);
    }
    market__buf_end(b, 0);
}

/* Open auction a enters (add) or leaves the realm's, its item's and its seller's indexes
 * of open auctions (scored by its end). */
void market__fx_auction_index(market__buf *b, const char *realm, const market_auction *a, int add) {
    char key[MARKET__KEY_MAX];
    const char *by[3] = {"open", "i", "s"}, *id[3] = {NULL, a->item, a->seller};
    const char *member = market__buf_i64(b, a->id);
    for (size_t i = 0; i < 3; i++) {
        market__key_auctions(key, realm, by[i], id[i]);
        const char *k = market__buf_join(b, key, (const char *)NULL);
        if (add)
            market__buf_cmd(b, 4, C_ZADD, k, market__buf_i64(b, a->ends_ms), member);
        else
            market__buf_cmd(b, 3, C_ZREM, k, member);
    }
}

/* Open auction a enters (add) or leaves the index of those player leads. */
void market__fx_auction_led(market__buf *b, const char *realm, const char *player,
                            const market_auction *a, int add) {
    char key[MARKET__KEY_MAX];
    market__key_auctions(key, realm, "b", player);
    const char *k = market__buf_join(b, key, (const char *)NULL);
    if (add)
        market__buf_cmd(b, 4, C_ZADD, k, market__buf_i64(b, a->ends_ms), market__buf_i64(b, a->id));
    else
        market__buf_cmd(b, 3, C_ZREM, k, market__buf_i64(b, a->id));
}

/* An ended auction's hash is kept MARKET_AUCTION_KEPT_S more, then goes. */
void market__fx_auction_keep(market__buf *b, const char *realm, int64_t id) {
    char key[MARKET__KEY_MAX];
    market__key_auction(key, realm, id);
    market__buf_cmd(b, 3, C_EXPIRE, market__buf_join(b, key, (const char *)NULL),
                    market__buf_i64(b, MARKET_AUCTION_KEPT_S));
}

/* Auction id's end, "@<id>" among the realm's ends (the sweeper's), is ends_ms (add), or
 * goes. */
void market__fx_auction_end(market__buf *b, const market__realm *r, int64_t id, int64_t ends_ms,
                            int add) {
    char member[24 + 1] = MARKET__END_AUCTION;
    market__i64_str(member + 1, id);
    if (add)
        market__fx_end_set(b, r, market__buf_join(b, member, (const char *)NULL), ends_ms);
    else
        market__fx_end_drop(b, r, market__buf_join(b, member, (const char *)NULL));
}

/* The fields of an auction's feed entry after its action, in the order of market_auction's
 * (market__reply_entries() reads them). */
const char *const market__bid_fields[MARKET__BID_FIELDS] = {
    "id", "seller", "item", "quantity", "start", "step", "ends", "bidder", "bid", "bids"};

/* Auction a changed by action ("opened", "bid", "sold", "unsold"): an entry of the realm's
 * auctions' feed (GET /events), with a as it is after it, trimmed like the listing
 * changes'. */
void market__fx_auction_event(market__buf *b, const market__realm *r, const char *action,
                              const market_auction *a) {
    const char *v[MARKET__BID_FIELDS] = {market__buf_i64(b, a->id),
                                         market__buf_join(b, a->seller, (const char *)NULL),
                                         market__buf_join(b, a->item, (const char *)NULL),
                                         market__buf_i64(b, a->quantity),
                                         market__buf_i64(b, a->start_bid),
                                         market__buf_i64(b, a->step),
                                         market__buf_i64(b, a->ends_ms),
                                         market__buf_join(b, a->bidder, (const char *)NULL),
                                         market__buf_i64(b, a->bid),
                                         market__buf_i64(b, a->bids)};
    const char *head[] = {C_XADD, r->bids,  "MAXLEN", "~", MARKET_CHANGES_KEPT_S,
                          "*",    "action", action};
    const char *argv[8 + 2 * MARKET__BID_FIELDS];
    memcpy(argv, head, sizeof head);
    for (size_t i = 0; i < MARKET__BID_FIELDS; i++) {
        argv[8 + 2 * i] = market__bid_fields[i];
        argv[9 + 2 * i] = v[i];
    }
    market__buf_cmdv(b, (int)(sizeof argv / sizeof *argv), argv);
}

/* The realm's last auction id becomes id. */
void market__fx_auctions_last(market__buf *b, const market__realm *r, int64_t id) {
    market__buf_cmd(b, 3, C_SET, r->auctions, market__buf_i64(b, id));
}

/* A page of an index of open auctions: its count up to hi ("+inf", or "(<ms>") and the
 * ids from offset, at most limit (ZCOUNT, ZRANGE BYSCORE ... LIMIT). */
void market__rd_auctions_page(market__buf *b, const char *key, const char *hi, size_t offset,
                              size_t limit) {
    const char *h = market__buf_join(b, hi, (const char *)NULL);
    market__buf_cmd(b, 4, C_ZCOUNT, key, "-inf", h);
    const char *argv[] = {C_ZRANGE,
                          key,
                          "-inf",
                          h,
                          "BYSCORE",
                          "LIMIT",
                          market__buf_i64(b, (int64_t)offset),
                          market__buf_i64(b, (int64_t)limit)};
    market__buf_cmdv(b, (int)(sizeof argv / sizeof *argv), argv);
}

/* The realm's last auction id (market__reply_orders_last() reads it). */
void market__rd_auctions_last(market__buf *b, const market__realm *r) {
    market__buf_cmd(b, 2, C_GET, r->auctions);
}

/* ---- direct trades (market_direct.c) ---- */

/* The fields of a direct trade's hash, in the order market__rd_direct() reads them. */
#define DIRECT_FIELDS MARKET__DIRECT_FIELDS
static const char *const direct_fields[DIRECT_FIELDS] = {
    "from", "to", "give", "get", "made", "expires", "state", "closed", "by"};
const char *const market__direct_states[3] = {"open", "done", "cancelled"}; /* by state */

/* Writes side g of a trade as the store keeps it into out (MARKET__GOODS_TEXT_MAX bytes):
 * comma-separated "$<funds>" (when any), "#<item>" for each unique item, "<item>*<units>"
 * for each kind of units ("" when it is empty; no id holds "$", "#", "*" or ","). */
void market__goods_text(const market_goods *g, char *out) {
    size_t n = 0;
    out[0] = '\0';
    if (g->funds)
        n += (size_t)snprintf(out + n, MARKET__GOODS_TEXT_MAX - n, "$%lld", (long long)g->funds);
    for (size_t i = 0; i < g->n_items; i++)
        n += (size_t)snprintf(out + n, MARKET__GOODS_TEXT_MAX - n, "%s#%s", n ? "," : "",
                              g->items[i]);
    for (size_t i = 0; i < g->n_units; i++)
        n += (size_t)snprintf(out + n, MARKET__GOODS_TEXT_MAX - n, "%s%s*%lld", n ? "," : "",
                              g->unit_item[i], (long long)g->units[i]);
}

/* Direct trade id's fields (market__reply_direct()). */
void market__rd_direct(market__buf *b, const char *realm, int64_t id) {
    char key[MARKET__KEY_MAX];
    market__key_direct(key, realm, id);
    market__buf_begin(b, C_HMGET, market__buf_join(b, key, (const char *)NULL));
    for (size_t i = 0; i < DIRECT_FIELDS; i++)
        market__buf_arg(b, direct_fields[i]);
    market__buf_end(b, 0);
}

/* Direct trade t is as it says: its hash written whole (an open one goes from the store
 * MARKET_DIRECT_KEPT_S after it expires; a closed one MARKET_DIRECT_KEPT_S after now). */
void market__fx_direct_put(market__buf *b, const char *realm, const market_direct *t) {
    char key[MARKET__KEY_MAX], give[MARKET__GOODS_TEXT_MAX], get[MARKET__GOODS_TEXT_MAX];
    market__key_direct(key, realm, t->id);
    market__goods_text(&t->give, give);
    market__goods_text(&t->get, get);
    const char *k = market__buf_join(b, key, (const char *)NULL);
    const char *v[DIRECT_FIELDS] = {market__buf_join(b, t->from, (const char *)NULL),
                                    market__buf_join(b, t->to, (const char *)NULL),
                                    market__buf_join(b, give, (const char *)NULL),
                                    market__buf_join(b, get, (const char *)NULL),
                                    market__buf_i64(b, t->made_ms),
                                    market__buf_i64(b, t->expires_ms),
                                    market__direct_states[t->state],
                                    market__buf_i64(b, t->closed_ms),
                                    market__buf_join(b, t->closed_by, (const char *)NULL)};
    market__buf_begin(b, C_HSET, k);
    for (size_t i = 0; i < DIRECT_FIELDS; i++) {
        market__buf_arg(b, direct_fields[i]);
        market__buf_arg(b, v[i]);
    }
    market__buf_end(b, 0);
    if (t->state == MARKET_DIRECT_OPEN)
        market__buf_cmd(b, 3, C_PEXPIREAT, k,
                        market__buf_i64(b, t->expires_ms + MARKET_DIRECT_KEPT_S * INT64_C(1000)));
    else
        market__buf_cmd(b, 3, C_EXPIRE, k, market__buf_i64(b, MARKET_DIRECT_KEPT_S));
}

/* Open direct trade t enters (add) or leaves its two sides' indexes of open trades (scored
 * by when it expires); adding also drops the entries that expired by now_ms, so that an
 * index holds no more than a player's open trades and those that expired since its last. */
void market__fx_direct_index(market__buf *b, const char *realm, const market_direct *t, int add,
                             int64_t now_ms) {
    char key[MARKET__KEY_MAX];
    const char *side[2] = {t->from, t->to};
    const char *member = market__buf_i64(b, t->id);
    for (size_t i = 0; i < 2; i++) {
        market__key_directs(key, realm, side[i]);
        const char *k = market__buf_join(b, key, (const char *)NULL);
        if (!add) {
            market__buf_cmd(b, 3, C_ZREM, k, member);
            continue;
        }
        market__buf_cmd(b, 4, C_ZREMRANGEBYSCORE, k, "-inf", market__buf_i64(b, now_ms));
        market__buf_cmd(b, 4, C_ZADD, k, market__buf_i64(b, t->expires_ms), member);
    }
}

/* The realm's last direct trade id becomes id. */
void market__fx_directs_last(market__buf *b, const market__realm *r, int64_t id) {
    market__buf_cmd(b, 3, C_SET, r->directs, market__buf_i64(b, id));
}

/* The realm's last direct trade id (market__reply_orders_last() reads it). */
void market__rd_directs_last(market__buf *b, const market__realm *r) {
    market__buf_cmd(b, 2, C_GET, r->directs);
}

/* The ids of player's open direct trades, soonest to expire first, at most
 * MARKET_DIRECTS_PAGE_MAX (ZRANGE). */
void market__rd_directs_of(market__buf *b, const char *realm, const char *player) {
    char key[MARKET__KEY_MAX];
    market__key_directs(key, realm, player);
    market__buf_cmd(b, 4, C_ZRANGE, market__buf_join(b, key, (const char *)NULL), "0",
                    market__buf_i64(b, MARKET_DIRECTS_PAGE_MAX - 1));
}

/* A player's unique item goes (out) or comes (in). */
void market__fx_item_has(market__buf *b, const char *inventory_key, const char *item, int in) {
    if (in)
        market__fx_item_in(b, inventory_key, item);
    else
        market__fx_item_out(b, inventory_key, item);
}

/* ---- the deals a realm keeps by number ---- */

static int reply_order(const redisReply *r, int64_t id, void *out) {
    return market__reply_order(r, id, out);
}
static int reply_auction(const redisReply *r, int64_t id, void *out) {
    return market__reply_auction(r, id, out);
}
static int reply_direct(const redisReply *r, int64_t id, void *out) {
    return market__reply_direct(r, id, out);
}

/* A deal type whose C value T holds its number as `id`. */
#define DEAL(what, missing, T, key, rd, reply)                                                     \
    { what, missing, sizeof(T), offsetof(T, id), key, rd, reply }
const market__deal_type market__deal_order = DEAL("buy order", MARKET_ERR_NO_ORDER, market_bid,
                                                  market__key_order, market__rd_order, reply_order);
const market__deal_type market__deal_auction =
    DEAL("auction", MARKET_ERR_NO_AUCTION, market_auction, market__key_auction, market__rd_auction,
         reply_auction);
const market__deal_type market__deal_direct =
    DEAL("direct trade", MARKET_ERR_NO_DIRECT, market_direct, market__key_direct, market__rd_direct,
         reply_direct);
