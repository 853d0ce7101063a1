/* market_keys.c - names and values of the market's keys: a realm's data and
 * lock keys, idempotency records and their claims. Pure: no Redis I/O (it only
 * reads replies handed to it), called by the data model and the files above it.
 *
 * DESIGN
 * An idempotency record idem:{<realm>}:<player>:<key> holds one of
 *   "<fp> <a> <b> <t>"  a purchase's success: price, buyer funds after it, trade id
 *                       (a buy from a sale: the price of one unit, buyer funds, trade id)
 *                       (market_trade.c's script appends " <t>" when it records the trade);
 *   "<fp> <a> <b>"      a list's success (price and 0), or a purchase recorded before
 *                       trade ids;
 *   "<fp> !<rc> <a>"    a final refusal: its market code (negative) and, for
 *                       a price_changed, the current price (a sale's sold_out: the
 *                       units left; limit_exceeded: how many more the buyer may buy);
 *   "<fp> ?<token>"     a claim: an attempt with this token is deciding it.
 * An attempt claims the key (SET NX PX, before its WATCH) and reads it back
 * under WATCH: the commit that writes the final record aborts if anyone else
 * touched the key, so a key has one final outcome whichever server, attempt
 * or retry gets there first. A claim expires by itself at the end of its
 * attempt's wait budget, so a crashed server blocks retries only that long.
 * Servers that predate refusals and claims read both as unreadable (503),
 * never as a success.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "market/market_keys.h"

/* The longest names the market makes fit the lock layer and their buffers. */
_Static_assert(MARKET__LOCK_KEY_MAX - 1 <= LOCK_KEY_MAX,
               "a realm's lock key may exceed the lock layer's limit");
_Static_assert(MARKET__LOCK_KEY_MAX - 1 + sizeof ":fenced" <= MARKET__FENCED_MAX,
               "a fencing record's name does not fit its buffer");

/* ---- a realm's keys ---- */

/* Writes "<kind>:{<realm>}:<id>" into out (MARKET__KEY_MAX bytes hold any
 * valid ids): the key of a player's hash ("users"), unique items
 * ("inventory") or stackable goods ("stacks": item -> units) in realm. */
void market__key(char *out, size_t outlen, const char *kind, const char *realm, const char *id) {
    market__join(out, outlen, kind, ":{", realm, "}:", id, (const char *)NULL);
}

/* The kinds of keys a realm has, one "<kind>:{<realm>}:..." pattern each
 * (market_world.c deletes them all to reset a realm). */
const char *const market__realm_kinds[MARKET__REALM_KINDS] = {
    "users", "inventory", "stacks", "idem",    "idx",      "trades", "sale",   "hist",
    "book",  "order",     "bids",   "auction", "auctions", "direct", "directs"};

/* Writes the key of player id's hash in realm (its name and funds; "*": the
 * pattern of every player's) into out (MARKET__KEY_MAX bytes). */
void market__key_user(char *out, const char *realm, const char *id) {
    market__key(out, MARKET__KEY_MAX, market__realm_kinds[0], realm, id);
}

/* Writes the key of player id's unique items in realm into out. */
void market__key_inventory(char *out, const char *realm, const char *id) {
    market__key(out, MARKET__KEY_MAX, market__realm_kinds[1], realm, id);
}

/* Writes the key of player id's stackable goods (item -> units) in realm into out. */
void market__key_stacks(char *out, const char *realm, const char *id) {
    market__key(out, MARKET__KEY_MAX, market__realm_kinds[2], realm, id);
}

/* Writes the key of sale id's hash in realm ("*": the pattern of every
 * sale's keys) into out. */
void market__key_sale(char *out, const char *realm, const char *id) {
    market__key(out, MARKET__KEY_MAX, market__realm_kinds[6], realm, id);
}

/* Writes the key of item's price history in realm ("*": the pattern of
 * every item's) into out (MARKET__KEY_MAX bytes). */
void market__key_history(char *out, const char *realm, const char *item) {
    market__key(out, MARKET__KEY_MAX, market__realm_kinds[7], realm, item);
}

/* Writes the key of item's bids in realm (its book: order ids scored by minus
 * their price, market__bid_member(); "*": the pattern of every item's) into
 * out (MARKET__KEY_MAX bytes). */
void market__key_book(char *out, const char *realm, const char *item) {
    market__key(out, MARKET__KEY_MAX, market__realm_kinds[8], realm, item);
}

/* Writes the key of kind's deal number id in realm into out (MARKET__KEY_MAX bytes); id < 0:
 * the pattern of every one's. */
static void key_deal(char *out, size_t kind, const char *realm, int64_t id) {
    char s[24] = "*";
    if (id >= 0) market__i64_str(s, id);
    market__key(out, MARKET__KEY_MAX, market__realm_kinds[kind], realm, s);
}

/* Writes the key of buy order id's hash in realm into out (MARKET__KEY_MAX
 * bytes); id < 0: the pattern of every order's. */
void market__key_order(char *out, const char *realm, int64_t id) {
    key_deal(out, 9, realm, id);
}

/* Writes the key of player's open buy orders in realm (order ids scored by
 * themselves; "*": the pattern of every player's) into out. */
void market__key_bids(char *out, const char *realm, const char *player) {
    market__key(out, MARKET__KEY_MAX, market__realm_kinds[10], realm, player);
}

/* Writes the key of auction id's hash in realm into out (MARKET__KEY_MAX bytes); id < 0:
 * the pattern of every auction's. */
void market__key_auction(char *out, const char *realm, int64_t id) {
    key_deal(out, 11, realm, id);
}

/* Writes the key of one of realm's indexes of open auctions (ids scored by their ends)
 * into out (MARKET__KEY_MAX bytes): by "open" (every one; id NULL), "i" (an item's), "s" (a
 * seller's) or "b" (those bidder id leads). */
void market__key_auctions(char *out, const char *realm, const char *by, const char *id) {
    char what[MARKET_ID_MAX + 8];
    market__join(what, sizeof what, by, id ? ":" : "", id ? id : "", (const char *)NULL);
    market__key(out, MARKET__KEY_MAX, market__realm_kinds[12], realm, what);
}

/* Writes the key of direct trade id's hash in realm into out (MARKET__KEY_MAX bytes); id < 0:
 * the pattern of every direct trade's. */
void market__key_direct(char *out, const char *realm, int64_t id) {
    key_deal(out, 13, realm, id);
}

/* Writes the key of the open direct trades player is a side of in realm (ids scored by
 * when they expire; "*": the pattern of every player's) into out (MARKET__KEY_MAX bytes). */
void market__key_directs(char *out, const char *realm, const char *player) {
    market__key(out, MARKET__KEY_MAX, market__realm_kinds[14], realm, player);
}

/* Writes order id as a member of its item's book: zero-padded, so that the
 * members of one price sort by id, oldest first (price-time priority). */
void market__bid_member(char out[MARKET__BID_MEMBER_MAX], int64_t id) {
    snprintf(out, MARKET__BID_MEMBER_MAX, "%020lld", (long long)id);
}

/* Writes the key of the units each player bought of a sale (player -> units)
 * into out (outlen bytes; MARKET__KEY_MAX + 8 hold any): "<sale_key>:bought". */
void market__key_bought(char *out, size_t outlen, const char *sale_key) {
    market__join(out, outlen, sale_key, ":bought", (const char *)NULL);
}

/* Names realm's market lock into out (MARKET__KEY_MAX bytes). */
void market__key_market_lock(char *out, const char *realm) {
    market__join(out, MARKET__KEY_MAX, "lock:market:{", realm, "}", (const char *)NULL);
}

/* Fills *r with realm's id (borrowed) and the names every operation of the
 * realm shares: its market and its market lock. */
void market__realm_init(market__realm *r, const char *realm) {
    r->id = realm;
    market__join(r->market, sizeof r->market, "market:{", realm, "}", (const char *)NULL);
    market__key_market_lock(r->lock, realm);
    market__join(r->trades, sizeof r->trades, "trades:{", realm, "}", (const char *)NULL);
    market__join(r->trade_items, sizeof r->trade_items, "trades:{", realm, "}:items",
                 (const char *)NULL);
    market__join(r->trade_order, sizeof r->trade_order, "trades:{", realm, "}:order",
                 (const char *)NULL);
    market__join(r->units, sizeof r->units, "market:{", realm, "}:units", (const char *)NULL);
    market__join(r->bids, sizeof r->bids, "market:{", realm, "}:bids", (const char *)NULL);
    market__join(r->changes, sizeof r->changes, "market:{", realm, "}:changes",
                 (const char *)NULL);
    market__key_building(r->building, realm);
    market__join(r->settings, sizeof r->settings, "market:{", realm, "}:settings",
                 (const char *)NULL);
    market__join(r->orders, sizeof r->orders, "market:{", realm, "}:orders", (const char *)NULL);
    market__join(r->ends, sizeof r->ends, "market:{", realm, "}:ends", (const char *)NULL);
    market__join(r->sweep, sizeof r->sweep, "lock:sweep:{", realm, "}", (const char *)NULL);
    market__join(r->auctions, sizeof r->auctions, "market:{", realm, "}:auctions",
                 (const char *)NULL);
    market__join(r->directs, sizeof r->directs, "market:{", realm, "}:directs", (const char *)NULL);
}

/* Writes the key of the lease of the run seeding realm, "market:{<realm>}:seeding", into
 * out (MARKET__KEY_MAX bytes). */
void market__key_seeding(char *out, const char *realm) {
    market__join(out, MARKET__KEY_MAX, "market:{", realm, "}:seeding", (const char *)NULL);
}

/* Writes realm's seeding mark "market:{<realm>}:building" into out
 * (MARKET__KEY_MAX bytes): what a batch's read watches (market__frame_watched())
 * needs only this key of the realm's. This function can't fail. */
void market__key_building(char *out, const char *realm) {
    market__join(out, MARKET__KEY_MAX, "market:{", realm, "}:building", (const char *)NULL);
}

/* Writes "trades:{<realm>}:<kind>:<id>" into out (MARKET__KEY_MAX bytes
 * hold any valid ids): the trades of a player (kind "player") or of an
 * item ("item"). */
void market__trade_key(char *out, size_t outlen, const char *realm, const char *kind,
                       const char *id) {
    market__join(out, outlen, "trades:{", realm, "}:", kind, ":", id, (const char *)NULL);
}

/* Writes the lock key "lock:<kind>:{<realm>}:<id>" into out
 * (MARKET__LOCK_KEY_MAX bytes): the item strategy's lock of a listing
 * ("item", id "<item>.<seller>") or of a buyer ("player"). */
void market__lock_key(char *out, const char *kind, const char *realm, const char *id) {
    snprintf(out, MARKET__LOCK_KEY_MAX, "lock:%s:{%s}:%s", kind, realm, id);
}

/* ---- idempotency records ---- */

/* Writes "idem:{<realm>}:<player>:<key>" into out. */
void market__idem_key(char *out, size_t outlen, const char *realm, const char *player,
                      const market_idem *idem) {
    snprintf(out, outlen, "idem:{%s}:%s:%s", realm, player, idem->key);
}

/* Whether rc is an answer that an idempotency key keeps for good: a success
 * or a refusal that reading the store decided. Busy, store, lease and
 * conflict failures are not: the same request may succeed when retried. */
int market__idem_final(int rc) {
    switch (rc) {
    case MARKET_OK:
    case MARKET_ERR_NOT_LISTED:
    case MARKET_ERR_INSUFFICIENT_FUNDS:
    case MARKET_ERR_PRICE_CHANGED:
    case MARKET_ERR_NO_PLAYER:
    case MARKET_ERR_NOT_HELD:
    case MARKET_ERR_NOT_ENOUGH:
    case MARKET_ERR_OVERFLOW:
    case MARKET_ERR_NO_SALE:
    case MARKET_ERR_SALE_NOT_ACTIVE:
    case MARKET_ERR_SOLD_OUT:
    case MARKET_ERR_LIMIT_EXCEEDED: return 1;
    default: return 0;
    }
}

/* Writes the final record of outcome rc into out: "<fp> <a> <b>" for a
 * success, with " <c>" after it when c is not 0 (a sale's cut), "<fp> !<rc>
 * <a>" for a refusal (market__idem_final(rc)). */
void market__idem_record(char *out, size_t outlen, const market_idem *idem, int rc, int64_t a,
                         int64_t b, int64_t c) {
    if (rc == MARKET_OK && c != 0)
        snprintf(out, outlen, "%s %lld %lld %lld", idem->fingerprint, (long long)a, (long long)b,
                 (long long)c);
    else if (rc == MARKET_OK)
        snprintf(out, outlen, "%s %lld %lld", idem->fingerprint, (long long)a, (long long)b);
    else
        snprintf(out, outlen, "%s !%d %lld", idem->fingerprint, rc, (long long)a);
}

/* Writes the claim "<fp> ?<token>" into out. */
void market__idem_claim(char *out, size_t outlen, const market_idem *idem, const char *token) {
    snprintf(out, outlen, "%s ?%s", idem->fingerprint, token);
}

/* Returns how long a claim made now for an attempt that may decide until
 * the monotonic time deadline_ms should live, in ms, as text in out: to the
 * deadline and a little more (a claim that lapses early only lets a retry
 * in sooner; the commit is guarded by WATCH either way). */
void market__idem_claim_ttl(char *out, size_t outlen, int64_t deadline_ms) {
    int64_t left = deadline_ms - rconn_now_ms();
    if (left < 0) left = 0;
    snprintf(out, outlen, "%lld", (long long)(left + MARKET__IDEM_CLAIM_SLACK_MS));
}

/* Judges the value of an idempotency record read under WATCH for the
 * request idem, whose attempt claims with token. Returns
 *   MARKET__IDEM_FREE       no record, or our own claim: decide and record;
 *   MARKET__IDEM_DONE       a final outcome: *rc (MARKET_OK or a refusal), *a, *b, *c, and
 *                           trade (MARKET_TRADE_ID_MAX + 1 bytes): a success's trade id,
 *                           or "";
 *   MARKET_ERR_IN_PROGRESS  another attempt of the same request claims it;
 *   MARKET_ERR_IDEM_MISMATCH the key was used for another request;
 *   MARKET_ERR_STORE        the value cannot be read.
 * This function can't fail otherwise. */
int market__idem_judge(const redisReply *r, const market_idem *idem, const char *token, int *rc,
                       int64_t *a, int64_t *b, int64_t *c, char *trade) {
    trade[0] = '\0';
    if (r->type == REDIS_REPLY_NIL) return MARKET__IDEM_FREE;
    if (r->type != REDIS_REPLY_STRING || r->len >= MARKET__IDEM_RECORD_MAX) return MARKET_ERR_STORE;
    char buf[MARKET__IDEM_RECORD_MAX];
    memcpy(buf, r->str, r->len);
    buf[r->len] = '\0';
    char *sp = strchr(buf, ' ');
    if (!sp) return MARKET_ERR_STORE;
    *sp = '\0';
    const char *rest = sp + 1;
    if (strcmp(buf, idem->fingerprint) != 0) return MARKET_ERR_IDEM_MISMATCH;
    if (rest[0] == '?')
        return strcmp(rest + 1, token) == 0 ? MARKET__IDEM_FREE : MARKET_ERR_IN_PROGRESS;
    long long x, y, z;
    int code;
    char tail;
    if (rest[0] == '!') {
        if (sscanf(rest + 1, "%d %lld%c", &code, &x, &tail) != 2 || !market__idem_final(code) ||
            code == MARKET_OK)
            return MARKET_ERR_STORE;
        *rc = code;
        *a = x;
        *b = *c = 0;
        return MARKET__IDEM_DONE;
    }
    /* "<a> <b>", then "<c>" when not 0, then the trade id when the script completed it */
    char t[2][MARKET_TRADE_ID_MAX + 2];
    int got = sscanf(rest, "%lld %lld %42s %42s%c", &x, &y, t[0], t[1], &tail), n = got - 2;
    size_t spaces = 0;
    for (const char *p = rest; *p; p++)
        spaces += *p == ' ';
    if (got < 2 || got > 4 || spaces != (size_t)got - 1) return MARKET_ERR_STORE;
    int has_trade = n > 0 && market_trade_id_valid(t[n - 1]);
    z = 0;
    if (n == 2 || (n == 1 && !has_trade)) { /* a cut: a number, never 0 */
        if (sscanf(t[0], "%lld%c", &z, &tail) != 1 || z == 0) return MARKET_ERR_STORE;
    }
    if (n == 2 && !has_trade) return MARKET_ERR_STORE;
    if (has_trade) memcpy(trade, t[n - 1], strlen(t[n - 1]) + 1);
    *rc = MARKET_OK;
    *a = x;
    *b = y;
    *c = z;
    return MARKET__IDEM_DONE;
}

/* Writes a fresh random claim token (MARKET__TOKEN_LEN hex digits) into out.
 * Returns 0, or -1 when the kernel gives no randomness. */
int market__token_new(char out[MARKET__TOKEN_LEN + 1]) {
    unsigned char raw[MARKET__TOKEN_LEN / 2];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[MARKET__TOKEN_LEN] = '\0';
    return 0;
}

/* Returns the Redis Cluster hash slot of every key of realm: the slot of "{<realm>}". realm
 * is a valid id (at most MARKET_REALM_MAX bytes). This function can't fail. */
unsigned market__realm_slot(const char *realm) {
    char tag[MARKET__TAG_MAX + 1];
    int n = snprintf(tag, sizeof tag, "{%s}", realm);
    return rconn_key_slot(tag, n > 0 && (size_t)n < sizeof tag ? (size_t)n : 0);
}

/* Writes into out a realm id whose keys live in hash slot slot ("hz<n>", the first such n), so
 * that a key of a chosen slot can be named (the health probe of each cluster master). Returns
 * 0, or -1 when slot is beyond 16383 or out is too small. */
int market__slot_tag(unsigned slot, char *out, size_t outlen) {
    if (slot >= RCONN_CLUSTER_SLOTS) return -1;
    for (unsigned n = 0; n < (1u << 22); n++) {
        int len = snprintf(out, outlen, "hz%u", n);
        if (len < 0 || (size_t)len >= outlen) return -1;
        if (rconn_key_slot(out, (size_t)len) == slot) return 0;
    }
    return -1; /* not reached: 2^22 tries all miss a slot with odds of e^-256 */
}
