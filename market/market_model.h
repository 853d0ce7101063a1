/* market_model.h - the data model: one command buffer that a commit's
 * effects and a read's commands are appended to (market_buf.c), the
 * effects themselves - move funds, hand over a unique item, move units,
 * delist, set a fence, record an idempotency outcome, take units from a
 * sale - and the reads; and the replies turned into plain C values
 * (market_model_reply.c). The commands and fields of the store are spelled
 * there alone. Pure: it builds argv and reads replies, and does no I/O
 * (market__pipeline_buf sends a buffer). */
#ifndef GM_MARKET_MARKET_MODEL_H
#define GM_MARKET_MARKET_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "market/market_buf.h"
#include "market/market_index.h"
#include "market/market_keys.h"
#include "market/market_rules.h"

#define MARKET_CHANGES_KEPT_S "1000" /* MAXLEN ~ of market:{r}:changes (market_changes.c) */
#define MARKET__SCAN_COUNT "1000" /* SCAN's COUNT hint */
#define MARKET__REPLY_BAD 4 /* market__reply_buyers(): a reply that holds an unreadable value */

/* what the store layer asks of a command */
int market__cmd_is_exec(const char *const *argv);
int market__cmd_is_watch(const char *const *argv);
int market__cmd_unwatch(const char **argv);
int market__cmd_script_exists(const char **argv, const char *sha);
int market__cmd_wait(const char **argv, char *need_s, char *timeout_s, unsigned need,
                     int timeout_ms);

/* effects */
void market__fx_multi(market__buf *b);
void market__fx_exec(market__buf *b);
void market__fx_fence_drop(market__buf *b, const char *fenced);
void market__fx_fence(market__buf *b, const char *fenced, const char *fence);
void market__fx_guard(market__buf *b, const char *const *lock_keys, size_t n,
                      const char *guard_key, const char *token);
void market__fx_funds(market__buf *b, const char *user_key, int64_t delta);
void market__fx_units(market__buf *b, const char *stacks_key, const char *item, int64_t n);
void market__fx_listing_units(market__buf *b, const market__realm *r, const char *member,
                              int64_t delta);
void market__fx_idem_record(market__buf *b, const char *key, const char *record);
void market__fx_items_begin(market__buf *b, const char *inventory_key);
void market__fx_delist_begin(market__buf *b, const market__realm *r);
void market__fx_delist_units_begin(market__buf *b, const market__realm *r);
void market__fx_idx_remove(market__buf *b, const market__idx_entry *e, int names);
void market__fx_names_remove_begin(market__buf *b, const char *key);
void market__fx_sale_take(market__buf *b, const char *sale_key, int64_t units);
void market__fx_sale_bought(market__buf *b, const char *bought_key, const char *player,
                            int64_t units);

void market__fx_item_out(market__buf *b, const char *inventory_key, const char *item);
void market__fx_item_in(market__buf *b, const char *inventory_key, const char *item);
void market__fx_units_gone(market__buf *b, const char *stacks_key, const char *item);
void market__fx_list(market__buf *b, const market__realm *r, const char *member, int64_t price);
void market__fx_delist(market__buf *b, const market__realm *r, const char *member, int stack);
void market__fx_end_set(market__buf *b, const market__realm *r, const char *member, int64_t end_ms);
void market__fx_end_drop(market__buf *b, const market__realm *r, const char *member);
void market__fx_ending_add(market__buf *b, const char *realm);
void market__fx_idx_add(market__buf *b, const market__idx_entry *e);
void market__fx_idem_keep(market__buf *b, const char *key);
void market__fx_idx_put(market__buf *b, const char *key, const char *score, const char *member);
void market__fx_idx_drop(market__buf *b, const char *key, const char *member);
void market__fx_unlink(market__buf *b, const char *const *keys, size_t n);
void market__fx_script(market__buf *b, const char *script, size_t nkeys, const char *const *keys,
                       size_t nargs, const char *const *args);
size_t market__script_head(const char **argv, const char *script, const char *sha,
                           const char *nkeys);
#define MARKET__SHA_MAX 40 /* a script's name in Redis's cache: SHA-1, hex */
void market__script_sha(const char *script, char *sha);
void market__fx_player_new(market__buf *b, const char *user_key, const char *inventory_key,
                           const char *stacks_key, const char *name, int64_t funds);
void market__fx_units_set(market__buf *b, const char *stacks_key, const char *item, int64_t n);
void market__fx_listing_units_set(market__buf *b, const market__realm *r, const char *member,
                                  int64_t units);
void market__fx_scores_begin(market__buf *b, const char *key);
void market__fx_probe(market__buf *b, const market__realm *r, const char *member);
void market__fx_change(market__buf *b, const market__realm *r, int listed, const char *seller,
                       const char *item, int64_t price, int64_t quantity);
void market__fx_building(market__buf *b, const market__realm *r, const char *why);
void market__fx_building_done(market__buf *b, const market__realm *r);
void market__fx_lease_keep(market__buf *b, const char *key, const char *ttl_ms);
void market__fx_lease_drop(market__buf *b, const char *key);
void market__fx_escrow(market__buf *b, const char *user_key, int64_t delta);
void market__fx_bid_rest(market__buf *b, const char *realm, const market_bid *bid);
void market__fx_bid_left(market__buf *b, const char *realm, int64_t id, int64_t left);
void market__fx_bid_gone(market__buf *b, const char *realm, const market_bid *bid);
void market__fx_orders_last(market__buf *b, const market__realm *r, int64_t id);

/* reads */
void market__rd_claim(market__buf *b, const char *k_idem, const char *claim, const char *ttl_ms);
void market__rd_watch_begin(market__buf *b);
void market__rd_pttl(market__buf *b, const char *key);
void market__rd_records_begin(market__buf *b);
void market__rd_values_begin(market__buf *b);
void market__rd_prices_begin(market__buf *b, const market__realm *r);
void market__rd_listing_units_begin(market__buf *b, const market__realm *r);
void market__rd_ends_of_begin(market__buf *b, const market__realm *r);
void market__rd_funds(market__buf *b, const char *user_key);
#define MARKET__SALE_FIELDS 9 /* item price initial stock sold limit start_ms end_ms house */
extern const char *const market__sale_fields[MARKET__SALE_FIELDS];
void market__rd_time(market__buf *b);
void market__rd_sale(market__buf *b, const char *sale_key);
void market__rd_bought_begin(market__buf *b, const char *bought_key);
void market__rd_holds(market__buf *b, const char *inventory_key, const char *item);
void market__rd_units(market__buf *b, const char *stacks_key, const char *item);
void market__rd_listing(market__buf *b, const market__realm *r, const char *member);
void market__rd_end(market__buf *b, const market__realm *r, const char *member);
void market__rd_ends_first(market__buf *b, const market__realm *r, size_t n);
void market__rd_ending(market__buf *b);
void market__rd_lease(market__buf *b, const char *lock_key);
/* auctions (market_auction.c) */
#define MARKET__AUCTION_FIELDS 12                   /* an auction's hash, read whole */
extern const char *const market__auction_states[3]; /* by enum market_auction_state */
void market__rd_auction(market__buf *b, const char *realm, int64_t id);
void market__rd_auction_at(market__buf *b, const char *key);
void market__rd_auctions_last(market__buf *b, const market__realm *r);
void market__rd_auctions_page(market__buf *b, const char *key, const char *hi, size_t offset,
                              size_t limit);
void market__fx_auction_put(market__buf *b, const char *realm, const market_auction *a);
void market__fx_auction_index(market__buf *b, const char *realm, const market_auction *a, int add);
void market__fx_auction_led(market__buf *b, const char *realm, const char *player,
                            const market_auction *a, int add);
void market__fx_auction_keep(market__buf *b, const char *realm, int64_t id);
void market__fx_auction_end(market__buf *b, const market__realm *r, int64_t id, int64_t ends_ms,
                            int add);
void market__fx_auctions_last(market__buf *b, const market__realm *r, int64_t id);
#define MARKET__BID_FIELDS 10 /* an auction's feed entry: its fields after its action */
extern const char *const market__bid_fields[MARKET__BID_FIELDS];
void market__fx_auction_event(market__buf *b, const market__realm *r, const char *action,
                              const market_auction *a);
/* direct trades (market_direct.c) */
#define MARKET__DIRECT_FIELDS 9                    /* a direct trade's hash, read whole */
#define MARKET__GOODS_TEXT_MAX 1280                /* a side of a direct trade as text, NUL too */
extern const char *const market__direct_states[3]; /* by enum market_direct_state, but EXPIRED */
void market__goods_text(const market_goods *g, char *out);
void market__rd_direct(market__buf *b, const char *realm, int64_t id);
void market__rd_directs_last(market__buf *b, const market__realm *r);
void market__rd_directs_of(market__buf *b, const char *realm, const char *player);
void market__fx_direct_put(market__buf *b, const char *realm, const market_direct *t);
void market__fx_direct_index(market__buf *b, const char *realm, const market_direct *t, int add,
                             int64_t now_ms);
void market__fx_directs_last(market__buf *b, const market__realm *r, int64_t id);
void market__fx_item_has(market__buf *b, const char *inventory_key, const char *item, int in);

/* A kind of deal a realm keeps by number, one hash each, read whole: buy orders, auctions,
 * direct trades (market_model_deals.c). Its C value holds its number at id_off. */
typedef struct market__deal_type {
    const char *what; /* "auction": for a failure's text */
    int missing;      /* the code of a number that names none */
    size_t size, id_off;
    void (*key)(char *out, const char *realm, int64_t id);
    void (*rd)(market__buf *b, const char *realm, int64_t id);
    int (*reply)(const redisReply *r, int64_t id, void *out); /* OK, missing, ERR_STORE */
} market__deal_type;
extern const market__deal_type market__deal_order, market__deal_auction, market__deal_direct;
void market__rd_cheapest(market__buf *b, const char *index_key, const char *hi,
                         const char *scan);
void market__rd_ping(market__buf *b);
void market__rd_info(market__buf *b, const char *section);
void market__rd_role(market__buf *b);
void market__rd_config(market__buf *b, const char *name);
void market__rd_realm_settings(market__buf *b, const char *settings_key);
void market__rd_history_begin(market__buf *b, const char *history_key);
void market__rd_player(market__buf *b, const char *user_key, const char *inventory_key,
                       const char *stacks_key);
void market__rd_stacks_all(market__buf *b, const char *stacks_key);
void market__rd_items(market__buf *b, const char *inventory_key);
void market__rd_listing_units_all(market__buf *b, const market__realm *r);
void market__rd_bought_all(market__buf *b, const char *bought_key);
void market__rd_sale_counts(market__buf *b, const char *sale_key);
void market__rd_count(market__buf *b, const market__realm *r);
void market__rd_market_range(market__buf *b, const market__realm *r, const char *start,
                             const char *stop);
void market__rd_market_from(market__buf *b, const market__realm *r, const char *lo,
                            const char *count);
void market__rd_market_at(market__buf *b, const market__realm *r, const char *price);
void market__rd_zset_all(market__buf *b, const char *key);
void market__rd_names_from(market__buf *b, const char *key, const char *lo, const char *count);
void market__rd_price(market__buf *b, const market__realm *r, const char *member);
void market__rd_scan(market__buf *b, const char *cursor, const char *pattern);
void market__rd_exists(market__buf *b, const char *const *keys, size_t n);
void market__rd_building(market__buf *b, const char *building);
void market__rd_stream(market__buf *b, const char *key, const char *start, const char *count);
void market__rd_stream_entry(market__buf *b, const char *key, const char *id);
void market__rd_stream_last(market__buf *b, const char *key);
void market__rd_orders_last(market__buf *b, const market__realm *r);
void market__rd_order(market__buf *b, const char *realm, int64_t id);
void market__rd_order_at(market__buf *b, const char *order_key);
void market__rd_zcard(market__buf *b, const char *key);
void market__rd_best(market__buf *b, const char *key, size_t count);
void market__rd_book_from(market__buf *b, const char *book_key, const char *lo, size_t count);
void market__rd_bids_of(market__buf *b, const char *bids_key, size_t count);
void market__rd_escrow(market__buf *b, const char *user_key);
void market__rd_funds_escrow(market__buf *b, const char *user_key);

/* replies (market_model_reply.c) */
int market__reply_ok(const redisReply *r);
int market__reply_nil(const redisReply *r);
int market__reply_array(const redisReply *r, size_t n, int pairs);
size_t market__reply_len(const redisReply *r);
const redisReply *market__reply_at(const redisReply *r, size_t i);
int market__reply_text(const redisReply *r, char *buf, size_t size);
int market__reply_dup(const redisReply *r, char **out);
int market__reply_is(const redisReply *r, const char *s);
int market__reply_noscript(const redisReply *r);
int market__reply_script_here(const redisReply *r);
const char *market__reply_str(const redisReply *r, size_t *len);
const char *market__reply_why(const redisReply *r, size_t *len);
int market__reply_err(const redisReply *r);
const redisReply *market__reply_error(redisReply *const *replies, size_t n);
const redisReply *market__reply_error_in(const redisReply *r);
int market__reply_ending(const redisReply *z, size_t k, int64_t *end, int64_t *auction, char *item,
                         char *seller);
int market__parse_i64(const char *s, size_t len, int64_t *out);
int market__parse_price(const char *s, size_t len, int64_t *out);
int market__reply_i64(const redisReply *r, int64_t *out);
int64_t market__reply_price(const redisReply *r);
int64_t market__reply_units(const redisReply *r);
market__party market__reply_party(const redisReply *r);
market__party market__reply_funds_escrow(const redisReply *r, int64_t *escrow);
#define MARKET__NO_END (-1)         /* market__reply_end(): the listing has no end */
#define MARKET__END_UNREADABLE (-2) /* market__reply_end(): not a time */
int64_t market__reply_end(const redisReply *r);
int market__listing_end(market_listing *l, const redisReply *r);
int market__reply_time(const redisReply *r, int64_t *ms);
int market__reply_config(const redisReply *r, char *out, size_t outlen);
int market__reply_realm_settings(const redisReply *r, market_settings *out);
int market__reply_candle(const redisReply *r, int64_t start_ms, market_candle *out);
int market__reply_id(const redisReply *e, char *out);
int market__reply_stream_last(const redisReply *r, char id[MARKET_TRADE_ID_MAX + 1]);
int market__listing_units(market_listing *l, const redisReply *r);
int market__listing_read(const redisReply *e, const redisReply *sc, market_listing *l);
int market__reply_market_page(const redisReply *r, market_listing **out, size_t *n);
int market__reply_stacks(const redisReply *r, market_stack **out, size_t *n);
int market__reply_player(const redisReply *h, const redisReply *inv, const redisReply *st,
                         market_player *p);
int market__reply_sale(const redisReply *r, market__sale_state *st, int64_t *initial, char *item,
                       char *house);
int64_t market__reply_bought(const redisReply *r);
int market__reply_sale_counts(const redisReply *r, char *item, int64_t v[3]);
int market__reply_buyers(const redisReply *r, market_sale_buyer **out, size_t *n);
int market__reply_scan(const redisReply *r, char *cursor, size_t cursorlen,
                       const redisReply **keys);
const char *market__reply_key(const redisReply *keys, size_t i, size_t *len);
int market__reply_trade(const redisReply *e, market_trade *t, char *entry_id);
int market__reply_change(const redisReply *e, market_change *ch);
/* A realm's streams: what market__reply_entries() reads an entry of as. */
enum market__stream { MARKET__STREAM_TRADES, MARKET__STREAM_CHANGES, MARKET__STREAM_BIDS };
int market__reply_entries(const redisReply *r, size_t max, enum market__stream kind, void **out,
                          size_t *n);
int market__reply_orders_last(const redisReply *r, int64_t *id);
int market__reply_order(const redisReply *r, int64_t id, market_bid *out);
int market__reply_auction(const redisReply *r, int64_t id, market_auction *out);
int market__reply_book_id(const redisReply *member, int64_t *id);
int market__reply_ids(const redisReply *r, int pairs, int64_t *ids, size_t max, size_t *n);
void market__reply_listing_at(const redisReply *z, const redisReply *u, size_t i, int64_t *price,
                              int *stack, int64_t *units);
int market__reply_seller_at(const redisReply *r, size_t k, char *seller, int64_t *price);
int market__reply_holds(const redisReply *r);
int64_t market__reply_count(const redisReply *r);
int market__parse_goods(const char *s, size_t len, market_goods *out);
int market__reply_direct(const redisReply *r, int64_t id, market_direct *out);

#endif /* GM_MARKET_MARKET_MODEL_H */
