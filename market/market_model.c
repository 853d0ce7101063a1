/* market_model.c - the data model's commands: the effects a commit appends
 * to a command buffer (market_buf.c), and the reads. Every Redis command the
 * market sends is spelled once, in market_cmds.h (the C_ names), and every field a
 * write names (auctions' and direct trades': market_model_deals.c);
 * market_model_reply.c decodes what comes back.
 *
 * DESIGN
 * Effects are single commands: a commit is
 * market__fx_multi(), effects, market__fx_exec(). A read appends the
 * commands whose replies the matching market__reply_*() decodes. A script
 * run (market__fx_script) carries text that the feature owning the script
 * keeps (market_trade.c, market_search.c, market_sale.c).
 */
#include "market/market_model.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "market/market_cmds.h"

/* ---- what the store layer asks of a command ---- */

/* Whether argv (a command's arguments) is an EXEC: the end of a commit.
 * This function can't fail. */
int market__cmd_is_exec(const char *const *argv) {
    return strcmp(argv[0], C_EXEC) == 0;
}

/* Whether argv (a command's arguments) is a WATCH. This function can't fail. */
int market__cmd_is_watch(const char *const *argv) {
    return strcmp(argv[0], C_WATCH) == 0;
}

/* Fills argv (room for 1) with an UNWATCH, and returns its count of
 * arguments. This function can't fail. */
int market__cmd_unwatch(const char **argv) {
    argv[0] = C_UNWATCH;
    return 1;
}

/* Fills argv (room for 3) with a SCRIPT EXISTS of the script named sha (40 hex
 * digits: market__script_sha()), and returns its count of arguments. This
 * function can't fail. */
int market__cmd_script_exists(const char **argv, const char *sha) {
    argv[0] = C_SCRIPT;
    argv[1] = C_EXISTS;
    argv[2] = sha;
    return 3;
}

/* Fills argv (room for 3) with a WAIT for need replicas for at most
 * timeout_ms, its numbers written into need_s and timeout_s (24 bytes
 * each), and returns its count of arguments. This function can't fail. */
int market__cmd_wait(const char **argv, char *need_s, char *timeout_s, unsigned need,
                     int timeout_ms) {
    market__i64_str(need_s, need);
    market__i64_str(timeout_s, timeout_ms);
    argv[0] = C_WAIT;
    argv[1] = need_s;
    argv[2] = timeout_s;
    return 3;
}

/* ---- effects ---- */

void market__fx_multi(market__buf *b) { market__buf_cmd(b, 1, C_MULTI); }

void market__fx_exec(market__buf *b) { market__buf_cmd(b, 1, C_EXEC); }

/* Our fence into a lease's fencing record. */
void market__fx_fence(market__buf *b, const char *fenced, const char *fence) {
    market__buf_cmd(b, 3, C_SET, fenced, fence);
}

/* A fencing record goes: what its lease guarded is gone (market__held_drop). */
void market__fx_fence_drop(market__buf *b, const char *fenced) {
    market__buf_cmd(b, 2, C_DEL, fenced);
}

/* A player's funds change by delta (none when 0). */
void market__fx_funds(market__buf *b, const char *user_key, int64_t delta) {
    if (delta) market__buf_cmd(b, 4, C_HINCRBY, user_key, MARKET__FIELD_FUNDS, market__buf_i64(b, delta));
}

/* A player's escrow (the funds its buy orders hold) changes by delta (none
 * when 0). */
void market__fx_escrow(market__buf *b, const char *user_key, int64_t delta) {
    if (delta)
        market__buf_cmd(b, 4, C_HINCRBY, user_key, MARKET__FIELD_ESCROW, market__buf_i64(b, delta));
}

/* The fields of a buy order's hash, in the order market__rd_order() reads them. */
#define ORDER_FIELDS 5
static const char *const order_fields[ORDER_FIELDS] = {"buyer", "item", "price", "quantity",
                                                       "left"};

/* Writes the keys of buy order bid of realm - its hash, its item's book,
 * its buyer's orders - into b's text, and its book member into member. */
static void bid_keys(market__buf *b, const char *realm, const market_bid *bid, const char **k,
                     char member[MARKET__BID_MEMBER_MAX]) {
    char key[MARKET__KEY_MAX];
    market__key_order(key, realm, bid->id);
    k[0] = market__buf_join(b, key, (const char *)NULL);
    market__key_book(key, realm, bid->item);
    k[1] = market__buf_join(b, key, (const char *)NULL);
    market__key_bids(key, realm, bid->buyer);
    k[2] = market__buf_join(b, key, (const char *)NULL);
    market__bid_member(member, bid->id);
}

/* Buy order bid rests in its item's book: its hash, its entry in the book
 * (scored by minus its price: the best bid first, and within a price the
 * oldest, market__bid_member()), and its place among its buyer's orders. */
void market__fx_bid_rest(market__buf *b, const char *realm, const market_bid *bid) {
    const char *k[3];
    char member[MARKET__BID_MEMBER_MAX];
    bid_keys(b, realm, bid, k, member);
    const char *id = market__buf_i64(b, bid->id);
    const char *v[ORDER_FIELDS] = {
        market__buf_join(b, bid->buyer, (const char *)NULL),
        market__buf_join(b, bid->item, (const char *)NULL), market__buf_i64(b, bid->price),
        market__buf_i64(b, bid->quantity), market__buf_i64(b, bid->left)};
    market__buf_begin(b, C_HSET, k[0]);
    for (size_t i = 0; i < ORDER_FIELDS; i++) {
        market__buf_arg(b, order_fields[i]);
        market__buf_arg(b, v[i]);
    }
    market__buf_end(b, 0);
    market__buf_cmd(b, 4, C_ZADD, k[1], market__buf_i64(b, -bid->price),
                    market__buf_join(b, member, (const char *)NULL));
    market__buf_cmd(b, 4, C_ZADD, k[2], id, id);
}

/* Buy order id of realm has left units left (after a fill). */
void market__fx_bid_left(market__buf *b, const char *realm, int64_t id, int64_t left) {
    char key[MARKET__KEY_MAX];
    market__key_order(key, realm, id);
    market__buf_cmd(b, 4, C_HSET, market__buf_join(b, key, (const char *)NULL), order_fields[4],
                    market__buf_i64(b, left));
}

/* Buy order bid leaves the book (filled, or cancelled): its hash, its book
 * entry and its place among its buyer's orders go. */
void market__fx_bid_gone(market__buf *b, const char *realm, const market_bid *bid) {
    const char *k[3];
    char member[MARKET__BID_MEMBER_MAX];
    bid_keys(b, realm, bid, k, member);
    market__buf_cmd(b, 2, C_DEL, k[0]);
    market__buf_cmd(b, 3, C_ZREM, k[1], market__buf_join(b, member, (const char *)NULL));
    market__buf_cmd(b, 3, C_ZREM, k[2], market__buf_i64(b, bid->id));
}

/* The realm's last buy order id becomes id. */
void market__fx_orders_last(market__buf *b, const market__realm *r, int64_t id) {
    market__buf_cmd(b, 3, C_SET, r->orders, market__buf_i64(b, id));
}

/* A player's units of a stackable item change by n (none when 0). */
void market__fx_units(market__buf *b, const char *stacks_key, const char *item, int64_t n) {
    if (n) market__buf_cmd(b, 4, C_HINCRBY, stacks_key, item, market__buf_i64(b, n));
}

/* A stack listing's units change by delta. */
void market__fx_listing_units(market__buf *b, const market__realm *r, const char *member,
                              int64_t delta) {
    market__buf_cmd(b, 4, C_HINCRBY, r->units, member, market__buf_i64(b, delta));
}

/* An idempotency key's final outcome, kept for MARKET_IDEM_TTL_S. */
void market__fx_idem_record(market__buf *b, const char *key, const char *record) {
    market__buf_cmd(b, 5, C_SET, key, record, "EX", MARKET__IDEM_TTL);
}

/* Opens: unique items into a player's inventory (market__buf_arg each item,
 * then market__buf_end(b, 1)). */
void market__fx_items_begin(market__buf *b, const char *inventory_key) {
    market__buf_begin(b, C_SADD, inventory_key);
}

/* Opens: listings leave the realm's market (their members, then end). */
void market__fx_delist_begin(market__buf *b, const market__realm *r) {
    market__buf_begin(b, C_ZREM, r->market);
}

/* Opens: stack listings' unit counts go (their members, then end). */
void market__fx_delist_units_begin(market__buf *b, const market__realm *r) {
    market__buf_begin(b, C_HDEL, r->units);
}

/* A delisted listing's entries leave its search indexes, and with names the
 * names index too (without: the caller removes a batch's names at once,
 * market__fx_names_remove_begin). */
void market__fx_idx_remove(market__buf *b, const market__idx_entry *e, int names) {
    for (int x = 0; x < MARKET__IDX_KINDS; x++) market__fx_idx_drop(b, e->key[x], e->member[x]);
    if (names) market__fx_idx_drop(b, e->names_key, e->name);
}

/* Opens: delisted listings leave the names index key (their members
 * "<item>.<seller>", then end). */
void market__fx_names_remove_begin(market__buf *b, const char *key) {
    market__buf_begin(b, C_ZREM, key);
}

/* units of a sale are sold: one guarded decrement of its stock. */
void market__fx_sale_take(market__buf *b, const char *sale_key, int64_t units) {
    if (units <= 0) return;
    market__buf_cmd(b, 4, C_HINCRBY, sale_key, "stock", market__buf_i64(b, -units));
    market__buf_cmd(b, 4, C_HINCRBY, sale_key, "sold", market__buf_i64(b, units));
}

/* A player bought units more of a sale. */
void market__fx_sale_bought(market__buf *b, const char *bought_key, const char *player,
                            int64_t units) {
    if (units > 0) market__buf_cmd(b, 4, C_HINCRBY, bought_key, player, market__buf_i64(b, units));
}

/* The item strategy's guard, run right before its MULTI when the lock keys
 * live in the store (KEYS: the lock keys, then the guard key; ARGV: our
 * token). Its read went out before the locks were taken, so it could not
 * watch them; this WATCHes them and checks they hold our token. If one does
 * not (lapsed, or taken over by anyone speaking the lock protocol), it
 * writes the guard key, which is watched too: our own EXEC then aborts. */
static const char guard_script[] =
    "for i = 1, #KEYS - 1 do "
    "if redis.call('GET', KEYS[i]) ~= ARGV[1] then "
    "redis.call('SET', KEYS[#KEYS], '1', 'PX', 1000) return 0 end end "
    "return 1";

/* Appends WATCH <lock keys> <guard key> and the guard script over the n
 * lock keys, which must hold token (two commands, before the MULTI). */
void market__fx_guard(market__buf *b, const char *const *lock_keys, size_t n,
                      const char *guard_key, const char *token) {
    market__buf_begin(b, C_WATCH, guard_key);
    for (size_t i = 0; i < n; i++) market__buf_arg(b, lock_keys[i]);
    market__buf_end(b, 0);
    market__buf_begin(b, C_EVAL, guard_script);
    market__buf_arg(b, market__buf_i64(b, (int64_t)n + 1));
    for (size_t i = 0; i < n; i++) market__buf_arg(b, lock_keys[i]);
    market__buf_arg(b, guard_key);
    market__buf_arg(b, token);
    market__buf_end(b, 0);
}

/* A unique item leaves a player's inventory. */
void market__fx_item_out(market__buf *b, const char *inventory_key, const char *item) {
    market__buf_cmd(b, 3, C_SREM, inventory_key, item);
}

/* A unique item enters a player's inventory. */
void market__fx_item_in(market__buf *b, const char *inventory_key, const char *item) {
    market__buf_cmd(b, 3, C_SADD, inventory_key, item);
}

/* A player's last units of a stackable item leave (the field goes). */
void market__fx_units_gone(market__buf *b, const char *stacks_key, const char *item) {
    market__buf_cmd(b, 3, C_HDEL, stacks_key, item);
}

/* A new listing of member at price enters the realm's market. */
void market__fx_list(market__buf *b, const market__realm *r, const char *member, int64_t price) {
    market__buf_cmd(b, 4, C_ZADD, r->market, market__buf_i64(b, price), member);
}

/* A listing ends at end_ms (Unix ms, the store's clock). */
void market__fx_end_set(market__buf *b, const market__realm *r, const char *member,
                        int64_t end_ms) {
    market__buf_cmd(b, 4, C_ZADD, r->ends, market__buf_i64(b, end_ms), member);
}

/* A listing's end goes: taken back, ended, or listed again without one. */
void market__fx_end_drop(market__buf *b, const market__realm *r, const char *member) {
    market__buf_cmd(b, 3, C_ZREM, r->ends, member);
}

/* realm's listings may end: the sweepers look at it (MARKET__ENDING_KEY). */
void market__fx_ending_add(market__buf *b, const char *realm) {
    market__buf_cmd(b, 3, C_SADD, MARKET__ENDING_KEY, realm);
}

/* A listing leaves the realm's market, and its units record when it is a stack's. */
void market__fx_delist(market__buf *b, const market__realm *r, const char *member, int stack) {
    market__buf_cmd(b, 3, C_ZREM, r->market, member);
    if (stack) market__buf_cmd(b, 3, C_HDEL, r->units, member);
}

/* A new listing's entries enter its search indexes and the names index. */
void market__fx_idx_add(market__buf *b, const market__idx_entry *e) {
    for (int x = 0; x < MARKET__IDX_KINDS; x++) market__fx_idx_put(b, e->key[x], e->score, e->member[x]);
    market__fx_idx_put(b, e->names_key, MARKET__IDX_NAMES_SCORE, e->name);
}

/* An idempotency record keeps its full MARKET_IDEM_TTL_S from now (written
 * again: market__replicated()). */
void market__fx_idem_keep(market__buf *b, const char *key) {
    market__buf_cmd(b, 3, C_EXPIRE, key, MARKET__IDEM_TTL);
}

/* An entry of a search index, member at score (its listing's price as
 * text): added, or given that score. */
void market__fx_idx_put(market__buf *b, const char *key, const char *score, const char *member) {
    market__buf_cmd(b, 4, C_ZADD, key, score, member);
}

/* An entry leaves a search index. */
void market__fx_idx_drop(market__buf *b, const char *key, const char *member) {
    market__buf_cmd(b, 3, C_ZREM, key, member);
}

/* The keys keys[0..n) go (n >= 1). */
void market__fx_unlink(market__buf *b, const char *const *keys, size_t n) {
    market__buf_begin(b, C_UNLINK, NULL);
    for (size_t i = 0; i < n; i++) market__buf_arg(b, keys[i]);
    market__buf_end(b, 1);
}

/* Runs script (a write or a read) over the nkeys keys keys[0..nkeys) with
 * the nargs arguments args[0..nargs). Each string must outlive the
 * buffer's use. */
void market__fx_script(market__buf *b, const char *script, size_t nkeys, const char *const *keys,
                       size_t nargs, const char *const *args) {
    market__buf_begin(b, C_EVAL, script);
    market__buf_arg(b, market__buf_i64(b, (int64_t)nkeys));
    for (size_t i = 0; i < nkeys; i++) market__buf_arg(b, keys[i]);
    for (size_t i = 0; i < nargs; i++) market__buf_arg(b, args[i]);
    market__buf_end(b, 0);
}

/* Fills argv[0..3) with the head of a run of script over nkeys (its count of
 * keys, as text) keys, for a caller that appends the keys and arguments
 * itself: EVALSHA sha when sha is not NULL (the server has the script
 * cached), else EVAL with the text. Returns 3. This function can't fail. */
size_t market__script_head(const char **argv, const char *script, const char *sha,
                           const char *nkeys) {
    argv[0] = sha ? C_EVALSHA : C_EVAL;
    argv[1] = sha ? sha : script;
    argv[2] = nkeys;
    return 3;
}

/* Writes the name Redis caches script under, the SHA-1 of its text in 40 hex
 * digits, into sha (MARKET__SHA_MAX + 1 bytes); "" when OpenSSL cannot
 * digest (then the script is always sent whole). */
void market__script_sha(const char *script, char *sha) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    sha[0] = '\0';
    if (EVP_Digest(script, strlen(script), md, &n, EVP_sha1(), NULL) != 1 ||
        n * 2 != MARKET__SHA_MAX)
        return;
    for (unsigned int i = 0; i < n; i++) {
        sha[2 * i] = "0123456789abcdef"[md[i] >> 4];
        sha[2 * i + 1] = "0123456789abcdef"[md[i] & 15];
    }
    sha[MARKET__SHA_MAX] = '\0';
}

/* A new player replaces whatever its keys held: its name and funds, and no
 * unique items and no stacks (written by seeding); the escrow of buy orders
 * it has in the realm stays, as they do. */
void market__fx_player_new(market__buf *b, const char *user_key, const char *inventory_key,
                           const char *stacks_key, const char *name, int64_t funds) {
    /* the hash is not deleted: the escrow of the player's buy orders stays with them */
    market__buf_cmd(b, 3, C_DEL, inventory_key, stacks_key);
    market__buf_cmd(b, 6, C_HSET, user_key, MARKET__FIELD_NAME, name, MARKET__FIELD_FUNDS,
                    market__buf_i64(b, funds));
}

/* A player's units of a stackable item become n (written by seeding). */
void market__fx_units_set(market__buf *b, const char *stacks_key, const char *item, int64_t n) {
    market__buf_cmd(b, 4, C_HSET, stacks_key, item, market__buf_i64(b, n));
}

/* A listing's units become units, or it has none (0: a unique item's;
 * written by seeding). */
void market__fx_listing_units_set(market__buf *b, const market__realm *r, const char *member,
                                  int64_t units) {
    if (units)
        market__buf_cmd(b, 4, C_HSET, r->units, member, market__buf_i64(b, units));
    else
        market__buf_cmd(b, 3, C_HDEL, r->units, member);
}

/* Opens: entries of a zset (the market, or a search index) at their scores
 * (market__buf_arg score, then member, for each; then market__buf_end(b, 2)). */
void market__fx_scores_begin(market__buf *b, const char *key) {
    market__buf_begin(b, C_ZADD, key);
}

/* A write that changes nothing: member (never a listing's) gets score 0 in
 * the realm's market only if it is there (ZADD XX), to see that the server
 * takes writes. */
void market__fx_probe(market__buf *b, const market__realm *r, const char *member) {
    market__buf_cmd(b, 5, C_ZADD, r->market, "XX", "0", member);
}

/* A listing change into the realm's feed of changes: listed 1 (a listing
 * made or grown) or 0 (taken back). */
void market__fx_change(market__buf *b, const market__realm *r, int listed, const char *seller,
                       const char *item, int64_t price, int64_t quantity) {
    const char *argv[] = {C_XADD, r->changes, "MAXLEN", "~", MARKET_CHANGES_KEPT_S, "*",
                          "action", listed ? "listed" : "unlisted", "seller", seller,
                          "item", item, "price", market__buf_i64(b, price),
                          "quantity", market__buf_i64(b, quantity)};
    market__buf_cmdv(b, (int)(sizeof argv / sizeof *argv), argv);
}

/* The realm is being written by seeding: why (a sentence) marks it until
 * market__fx_building_done() (market_world.c). */
void market__fx_building(market__buf *b, const market__realm *r, const char *why) {
    market__buf_cmd(b, 3, C_SET, r->building, why);
}

/* The realm's seeding is done: it is served again. */
void market__fx_building_done(market__buf *b, const market__realm *r) {
    market__buf_cmd(b, 2, C_DEL, r->building);
}

/* A seeding run's lease on its realm (key: market__key_seeding) lasts ttl_ms
 * more: inside a step's MULTI, under a WATCH that saw it the run's. */
void market__fx_lease_keep(market__buf *b, const char *key, const char *ttl_ms) {
    market__buf_cmd(b, 3, C_PEXPIRE, key, ttl_ms);
}

/* A seeding run gives its lease up. */
void market__fx_lease_drop(market__buf *b, const char *key) { market__buf_cmd(b, 2, C_DEL, key); }

/* ---- reads ---- */

/* Claims an idempotency key for an attempt: SET <key> <claim> NX PX <ttl_ms>. */
void market__rd_claim(market__buf *b, const char *k_idem, const char *claim, const char *ttl_ms) {
    market__buf_cmd(b, 6, C_SET, k_idem, claim, "NX", "PX", ttl_ms);
}

/* How long key has left to live (ms; -2 gone, -1 no TTL). */
void market__rd_pttl(market__buf *b, const char *key) { market__buf_cmd(b, 2, C_PTTL, key); }

/* Opens the WATCH of what a read reads (its keys, then end). */
void market__rd_watch_begin(market__buf *b) { market__buf_begin(b, C_WATCH, NULL); }

/* Opens a read of string keys: idempotency records, fencing records (keys, then end). */
void market__rd_records_begin(market__buf *b) { market__buf_begin(b, C_MGET, NULL); }

/* Opens a read of string values, keys then end: the fencing records and
 * lock keys of the leases a transaction holds (market_txn.c). */
void market__rd_values_begin(market__buf *b) { market__buf_begin(b, C_MGET, NULL); }

/* A lease's holder: its lock key's token (nil: none holds it). */
void market__rd_lease(market__buf *b, const char *lock_key) {
    market__buf_cmd(b, 2, C_GET, lock_key);
}

/* Opens a read of listings' prices (members, then end). */
void market__rd_prices_begin(market__buf *b, const market__realm *r) {
    market__buf_begin(b, C_ZMSCORE, r->market);
}

/* Opens a read of stack listings' units (members, then end). */
void market__rd_listing_units_begin(market__buf *b, const market__realm *r) {
    market__buf_begin(b, C_HMGET, r->units);
}

/* The ends of listings (their members follow, then market__buf_end(); ZMSCORE: nil for one
 * that never ends; market__listing_end() reads each). */
void market__rd_ends_of_begin(market__buf *b, const market__realm *r) {
    market__buf_begin(b, C_ZMSCORE, r->ends);
}

/* A player's funds. */
void market__rd_funds(market__buf *b, const char *user_key) {
    market__buf_cmd(b, 3, C_HGET, user_key, MARKET__FIELD_FUNDS);
}

static void zrange(market__buf *b, const char *key, const char *start, const char *stop);

/* The realm's last buy order id (market__reply_orders_last()). */
void market__rd_orders_last(market__buf *b, const market__realm *r) {
    market__buf_cmd(b, 2, C_GET, r->orders);
}

/* Buy order id of realm: its fields (market__reply_order()). */
void market__rd_order(market__buf *b, const char *realm, int64_t id) {
    char key[MARKET__KEY_MAX];
    market__key_order(key, realm, id);
    market__rd_order_at(b, market__buf_join(b, key, (const char *)NULL));
}

/* The buy order whose hash is order_key (market__key_order()): its fields. */
void market__rd_order_at(market__buf *b, const char *order_key) {
    market__buf_begin(b, C_HMGET, order_key);
    for (size_t i = 0; i < ORDER_FIELDS; i++)
        market__buf_arg(b, order_fields[i]);
    market__buf_end(b, 0);
}

/* How many members a zset (a book, a player's orders) has. */
void market__rd_zcard(market__buf *b, const char *key) {
    market__buf_cmd(b, 2, C_ZCARD, key);
}

/* The first count members of a zset, with their scores: of a book
 * (market__key_book(): the best bids first, scored by minus the price), or
 * of an item's index (the cheapest listings first). */
void market__rd_best(market__buf *b, const char *key, size_t count) {
    zrange(b, key, "0", market__buf_i64(b, (int64_t)count - 1));
}

/* The first count entries of a book (book_key: market__key_book()), best
 * first, of score lo (minus the lowest price wanted) or less, with their
 * scores. */
void market__rd_book_from(market__buf *b, const char *book_key, const char *lo, size_t count) {
    const char *argv[] = {C_ZRANGE,    book_key, "-inf", lo,
                          "BYSCORE",   "LIMIT",  "0",    market__buf_i64(b, (int64_t)count),
                          "WITHSCORES"};
    market__buf_cmdv(b, (int)(sizeof argv / sizeof *argv), argv);
}

/* The first count ids of a player's open buy orders (bids_key:
 * market__key_bids()), oldest first. */
void market__rd_bids_of(market__buf *b, const char *bids_key, size_t count) {
    market__buf_cmd(b, 4, C_ZRANGE, bids_key, "0", market__buf_i64(b, (int64_t)count - 1));
}

/* A player's funds and escrow (market__reply_funds_escrow()). */
void market__rd_funds_escrow(market__buf *b, const char *user_key) {
    market__buf_cmd(b, 4, C_HMGET, user_key, MARKET__FIELD_FUNDS, MARKET__FIELD_ESCROW);
}

/* A player's escrow (market__reply_units(): nil reads 0). */
void market__rd_escrow(market__buf *b, const char *user_key) {
    market__buf_cmd(b, 3, C_HGET, user_key, MARKET__FIELD_ESCROW);
}

/* The store's clock. */
void market__rd_time(market__buf *b) { market__buf_cmd(b, 1, C_TIME); }

/* The fields of a sale's hash, in the order market__rd_sale() reads them. */
const char *const market__sale_fields[MARKET__SALE_FIELDS] = {
    "item", "price", "initial", "stock", "sold", "limit", "start_ms", "end_ms", "house"};

/* A sale: its market__sale_fields. */
void market__rd_sale(market__buf *b, const char *sale_key) {
    market__buf_begin(b, C_HMGET, sale_key);
    for (size_t i = 0; i < MARKET__SALE_FIELDS; i++) market__buf_arg(b, market__sale_fields[i]);
    market__buf_end(b, 0);
}

/* Opens a read of the units players bought of a sale (players, then end). */
void market__rd_bought_begin(market__buf *b, const char *bought_key) {
    market__buf_begin(b, C_HMGET, bought_key);
}

/* Whether a player holds a unique item. */
void market__rd_holds(market__buf *b, const char *inventory_key, const char *item) {
    market__buf_cmd(b, 3, C_SISMEMBER, inventory_key, item);
}

/* A player's units of a stackable item. */
void market__rd_units(market__buf *b, const char *stacks_key, const char *item) {
    market__buf_cmd(b, 3, C_HGET, stacks_key, item);
}

/* A listing's price (nil: not listed). */
void market__rd_price(market__buf *b, const market__realm *r, const char *member) {
    market__buf_cmd(b, 3, C_ZSCORE, r->market, member);
}

/* A listing's price, and its units (a stack's; nil for a unique item). */
void market__rd_listing(market__buf *b, const market__realm *r, const char *member) {
    market__rd_price(b, r, member);
    market__buf_cmd(b, 3, C_HGET, r->units, member);
}

/* A listing's end (nil: none; market__reply_price() reads it). */
void market__rd_end(market__buf *b, const market__realm *r, const char *member) {
    market__buf_cmd(b, 3, C_ZSCORE, r->ends, member);
}

/* The first n listings to end, with their ends (ZRANGE WITHSCORES). */
void market__rd_ends_first(market__buf *b, const market__realm *r, size_t n) {
    const char *argv[] = {C_ZRANGE, r->ends, "0", market__buf_i64(b, (int64_t)n - 1), "WITHSCORES"};
    market__buf_cmdv(b, (int)(sizeof argv / sizeof *argv), argv);
}

/* The realms whose listings may end (MARKET__ENDING_KEY). */
void market__rd_ending(market__buf *b) {
    market__buf_cmd(b, 2, C_SMEMBERS, MARKET__ENDING_KEY);
}

/* An item's cheapest listings at or under hi (an index's range by score,
 * with scores), at most scan of them. */
void market__rd_cheapest(market__buf *b, const char *index_key, const char *hi,
                         const char *scan) {
    const char *argv[] = {C_ZRANGE, index_key, "1", hi, "BYSCORE", "LIMIT", "0", scan, "WITHSCORES"};
    market__buf_cmdv(b, (int)(sizeof argv / sizeof *argv), argv);
}

/* A zset's range start..stop by rank, with scores. */
static void zrange(market__buf *b, const char *key, const char *start, const char *stop) {
    market__buf_cmd(b, 5, C_ZRANGE, key, start, stop, "WITHSCORES");
}

/* A whole zset (a search index), with scores. */
void market__rd_zset_all(market__buf *b, const char *key) { zrange(b, key, "0", "-1"); }

/* The listings of the realm's market ranked start..stop (cheapest first), with their
 * prices. */
void market__rd_market_range(market__buf *b, const market__realm *r, const char *start,
                             const char *stop) {
    zrange(b, r->market, start, stop);
}

/* The first count members of the names index key (every score 0) from lo on (lo as
 * ZRANGE BYLEX takes it: "-", "[<m>" or "(<m>"), in byte order, without scores. */
void market__rd_names_from(market__buf *b, const char *key, const char *lo, const char *count) {
    const char *argv[] = {C_ZRANGE, key, lo, "+", "BYLEX", "LIMIT", "0", count};
    market__buf_cmdv(b, (int)(sizeof argv / sizeof *argv), argv);
}

/* How many listings the realm's market holds. */
void market__rd_count(market__buf *b, const market__realm *r) {
    market__buf_cmd(b, 2, C_ZCARD, r->market);
}

/* The first count listings of the realm's market priced lo and up (lo as
 * ZRANGE BYSCORE takes it: "-inf", "<p>" or "(<p>"), with their prices. */
void market__rd_market_from(market__buf *b, const market__realm *r, const char *lo,
                            const char *count) {
    const char *argv[] = {C_ZRANGE, r->market, lo, "+inf", "BYSCORE", "LIMIT", "0", count,
                          "WITHSCORES"};
    market__buf_cmdv(b, (int)(sizeof argv / sizeof *argv), argv);
}

/* Every listing of the realm's market at price, with their prices. */
void market__rd_market_at(market__buf *b, const market__realm *r, const char *price) {
    market__buf_cmd(b, 6, C_ZRANGE, r->market, price, price, "BYSCORE", "WITHSCORES");
}

/* A page of the keys that match pattern, from cursor ("0": the first). */
void market__rd_scan(market__buf *b, const char *cursor, const char *pattern) {
    market__buf_cmd(b, 6, C_SCAN, cursor, "MATCH", pattern, "COUNT", MARKET__SCAN_COUNT);
}

/* Whether seeding is writing the realm (1) or not (0): its mark, the key building
 * (market__key_building()), read (a batch's read also watches it: market__frame_watched()). */
void market__rd_building(market__buf *b, const char *building) {
    market__buf_cmd(b, 2, C_EXISTS, building);
}

/* How many of the keys keys[0..n) (n >= 1) exist. */
void market__rd_exists(market__buf *b, const char *const *keys, size_t n) {
    market__buf_begin(b, C_EXISTS, NULL);
    for (size_t i = 0; i < n; i++) market__buf_arg(b, keys[i]);
    market__buf_end(b, 1);
}

/* A player: its name, funds and escrow, its unique items, its stacks (item ->
 * units), three commands (market__reply_player() reads them). */
void market__rd_player(market__buf *b, const char *user_key, const char *inventory_key,
                       const char *stacks_key) {
    market__buf_cmd(b, 5, C_HMGET, user_key, MARKET__FIELD_NAME, MARKET__FIELD_FUNDS,
                    MARKET__FIELD_ESCROW);
    market__rd_items(b, inventory_key);
    market__rd_stacks_all(b, stacks_key);
}

/* A player's unique items. */
void market__rd_items(market__buf *b, const char *inventory_key) {
    market__buf_cmd(b, 2, C_SMEMBERS, inventory_key);
}

/* A player's stacks, every item with its units (market__reply_stacks()). */
void market__rd_stacks_all(market__buf *b, const char *stacks_key) {
    market__buf_cmd(b, 2, C_HGETALL, stacks_key);
}

/* The units of every stack listing of the realm (member -> units). */
void market__rd_listing_units_all(market__buf *b, const market__realm *r) {
    market__buf_cmd(b, 2, C_HGETALL, r->units);
}

/* Who bought how many units of a sale (market__reply_buyers()). */
void market__rd_bought_all(market__buf *b, const char *bought_key) {
    market__buf_cmd(b, 2, C_HGETALL, bought_key);
}

/* A sale's item and its initial, stock and sold counts, in that order. */
void market__rd_sale_counts(market__buf *b, const char *sale_key) {
    market__buf_cmd(b, 6, C_HMGET, sale_key, market__sale_fields[0], market__sale_fields[2],
                    market__sale_fields[3], market__sale_fields[4]);
}

/* Up to count entries of a stream from start (an entry id, "(<id>" after
 * it, or "-"), oldest first. */
void market__rd_stream(market__buf *b, const char *key, const char *start, const char *count) {
    market__buf_cmd(b, 6, C_XRANGE, key, start, "+", "COUNT", count);
}

/* A stream's entry id (none when it is gone). */
void market__rd_stream_entry(market__buf *b, const char *key, const char *id) {
    market__buf_cmd(b, 6, C_XRANGE, key, id, id, "COUNT", "1");
}

/* A stream's latest entry. */
void market__rd_stream_last(market__buf *b, const char *key) {
    market__buf_cmd(b, 6, C_XREVRANGE, key, "+", "-", "COUNT", "1");
}

/* The server's INFO text of section (NULL: the default sections). */
void market__rd_info(market__buf *b, const char *section) {
    if (section)
        market__buf_cmd(b, 2, C_INFO, section);
    else
        market__buf_cmd(b, 1, C_INFO);
}

/* Whether the store answers. */
void market__rd_ping(market__buf *b) { market__buf_cmd(b, 1, C_PING); }

/* The server's role (master or replica). */
void market__rd_role(market__buf *b) { market__buf_cmd(b, 1, C_ROLE); }

/* Fields of an item's price history (HMGET, opened: market__buf_arg() each field, then
 * market__buf_end()): market__reply_candle() reads each. */
void market__rd_history_begin(market__buf *b, const char *history_key) {
    market__buf_begin(b, C_HMGET, history_key);
}

/* A realm's settings (market__reply_realm_settings()). */
void market__rd_realm_settings(market__buf *b, const char *settings_key) {
    market__buf_cmd(b, 6, C_HMGET, settings_key, MARKET__FIELD_FEE_BPS, MARKET__FIELD_HOUSE,
                    MARKET__FIELD_LIST_FEE, MARKET__FIELD_LIST_DURATION);
}

/* CONFIG GET of one parameter: its value (market__reply_config()). */
void market__rd_config(market__buf *b, const char *name) {
    market__buf_cmd(b, 3, C_CONFIG, "GET", name);
}
