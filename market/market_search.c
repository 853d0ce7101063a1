/* market_search.c - searching a realm's market through its indexes (market_search()).
 *
 * One script per page, over the store layer: in the zset the search reads (market:{r},
 * or the item's or the seller's index: market_index.c decides), it counts every listing
 * in the price range (ZCOUNT), finds where the page starts (after the cursor, or at the
 * end of the range the order starts from) and reads one more listing than asked, which
 * tells whether a next page exists, with each listing's units (market:{r}:units). With a
 * seller it also asks whether the player exists, in the same pipeline. A search naming
 * both item and seller reads that one listing's score and units instead; a search by item
 * prefix reads a page of the names index by name (prefix_script). The indexes are
 * kept in the same MULTI/EXEC as every listing's change, so what a page shows is what
 * market:{r} held at that instant. No lock is taken.
 */
#include "market/market.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_store.h"

/* A page of zset KEYS[1], ordered by (score, member) with members compared byte by byte
 * (Redis's order of a zset): ARGV[1], ARGV[2] the price range; ARGV[3] how many; ARGV[4]
 * "1" for highest price first; ARGV[5], ARGV[6] the cursor's price and member ("" when
 * none): the page starts strictly after it in the search's order; ARGV[7], ARGV[8] what
 * goes before and after a member to make its listing's member of market:{r}. Returns {the
 * range's count, {member, score, ...} in the search's order, each listing's field of the
 * units hash KEYS[2] (nil: a unique item), each listing's end in the zset KEYS[3] (nil:
 * none)}. The start is the cursor member's
 * rank when it is still there at the cursor's price, else found by a binary search over
 * the ranks of that price (Lua's own string comparison follows the locale, so the bytes
 * are compared one by one). Reads only. */
static const char page_script[] =
    "#!lua flags=no-writes\n"
    "local k, n, desc = KEYS[1], tonumber(ARGV[3]), ARGV[4] == '1' "
    "local lo, hi = tonumber(ARGV[1]), tonumber(ARGV[2]) "
    "local function less(x, y) "
    "for i = 1, math.min(#x, #y) do "
    "local a, b = string.byte(x, i), string.byte(y, i) "
    "if a ~= b then return a < b end end "
    "return #x < #y end "
    /* how many members come before (p, m), counting m itself when it is there and `incl` */
    "local function rank(p, m, incl) "
    "local r = redis.call('ZRANK', k, m) "
    "if r and tonumber(redis.call('ZSCORE', k, m)) == tonumber(p) then return r + incl end "
    "local a = redis.call('ZCOUNT', k, '-inf', '(' .. p) "
    "local b = redis.call('ZCOUNT', k, '-inf', p) "
    "while a < b do "
    "local mid = math.floor((a + b) / 2) "
    "if less(m, redis.call('ZRANGE', k, mid, mid)[1]) then b = mid else a = mid + 1 end end "
    "return a end "
    "local first, last "
    "if not desc then "
    "if ARGV[5] ~= '' then first = rank(ARGV[5], ARGV[6], 1) "
    "else first = redis.call('ZCOUNT', k, '-inf', '(' .. ARGV[1]) end "
    "last = first + n - 1 "
    "else "
    "if ARGV[5] ~= '' then last = rank(ARGV[5], ARGV[6], 0) - 1 "
    "else last = redis.call('ZCOUNT', k, '-inf', ARGV[2]) - 1 end "
    "first = math.max(last - n + 1, 0) end "
    "local out = {} "
    "if last >= first then "
    "local r = redis.call('ZRANGE', k, first, last, 'WITHSCORES') "
    "local from, to, step = 1, #r - 1, 2 "
    "if desc then from, to, step = #r - 1, 1, -2 end "
    "for i = from, to, step do "
    "local p = tonumber(r[i + 1]) "
    "if p < lo or p > hi then break end "
    "out[#out + 1] = r[i] out[#out + 1] = r[i + 1] end end "
    "local ms = {} "
    "for i = 1, #out, 2 do ms[#ms + 1] = ARGV[7] .. out[i] .. ARGV[8] end "
    "local units = #ms > 0 and redis.call('HMGET', KEYS[2], unpack(ms)) or {} "
    "local ends = #ms > 0 and redis.call('ZMSCORE', KEYS[3], unpack(ms)) or {} "
    "return {redis.call('ZCOUNT', k, ARGV[1], ARGV[2]), out, units, ends}";

/* A page of a search by item prefix: KEYS[1] the names index, KEYS[2] market:{r}, KEYS[3]
 * its units hash, KEYS[4] its ends; ARGV[1], ARGV[3] the prefix's range of the names index,
 * ARGV[2] where the page starts in it, ARGV[4] how many. Returns what page_script does, in
 * the order of the names index: {the prefix's count, {member, price, ...}, the units, the
 * ends}; a member that market:{r} lacks has no price (nil). Reads only: a ZRANGE BYLEX with
 * a LIMIT, a ZLEXCOUNT, and two ZMSCOREs and an HMGET of the page's members. */
static const char prefix_script[] =
    "#!lua flags=no-writes\n"
    "local ms = redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3], 'BYLEX', 'LIMIT', 0, "
    "tonumber(ARGV[4])) "
    "local out, units, ends = {}, {}, {} "
    "if #ms > 0 then "
    "local ps = redis.call('ZMSCORE', KEYS[2], unpack(ms)) "
    "for i = 1, #ms do out[2 * i - 1] = ms[i] out[2 * i] = ps[i] end "
    "units = redis.call('HMGET', KEYS[3], unpack(ms)) "
    "ends = redis.call('ZMSCORE', KEYS[4], unpack(ms)) end "
    "return {redis.call('ZLEXCOUNT', KEYS[1], ARGV[1], ARGV[3]), out, units, ends}";

/* Reads the script's page r ({member, score, ...}, at most limit + 1 listings) of the zset
 * key that plan p reads for query q, their units u and their ends e, into out: the first
 * limit as listings, and the next page's cursor when there is one more. Returns MARKET_OK,
 * MARKET_ERR_NOMEM, or MARKET_ERR_STORE when an entry is not a listing of that zset or its
 * units or end are unreadable (its reason in c's errstr). */
static int page_read(market_conn *c, const char *key, const market__search_plan *p,
                     const market_search_query *q, const redisReply *r, const redisReply *u,
                     const redisReply *e_, market_search_result *out) {
    size_t got = market__reply_len(r) / 2, n = got < q->limit ? got : q->limit;
    if (!market__reply_array(r, SIZE_MAX, 1) || !market__reply_array(u, got, 0) ||
        !market__reply_array(e_, got, 0))
        return market__fail_reply(c, "search refused", r);
    if (n && !(out->listings = calloc(n, sizeof *out->listings))) return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *e = market__reply_str(market__reply_at(r, 2 * i), &len);
        market_listing *l = &out->listings[i];
        if (!e || market__search_member(p, q, e, len, l) < 0 ||
            (l->price = market__reply_price(market__reply_at(r, 2 * i + 1))) <= 0)
            return market__fail(c,
                                "%s holds an entry that is not a listing (rebuild the "
                                "indexes: market-seed --reindex)",
                                key);
        if (market__listing_units(l, market__reply_at(u, i)) < 0)
            return market__fail(c, "the units of %s.%s are unreadable", l->item, l->seller);
        if (market__listing_end(l, market__reply_at(e_, i)) < 0)
            return market__fail(c, "the end of %s.%s is unreadable", l->item, l->seller);
        out->n++;
    }
    if (got > q->limit) market_cursor_make(&out->listings[n - 1], out->next_cursor);
    return MARKET_OK;
}

/* Appends to rd the reads of a search of q (plan p) in realm rl: the listing
 * q names (p->point: member gets its name) or a page of the index key
 * (page_script); then, when q names a seller, whether it is a player
 * (k_user gets its key). Returns the place of that last read. */
static size_t search_reads(market__buf *rd, const market__search_plan *p,
                           const market_search_query *q, const market__realm *rl, const char *key,
                           char *member, char *k_user) {
    if (p->point) {
        snprintf(member, MARKET__MEMBER_MAX, "%s.%s", q->item, q->seller);
        market__rd_listing(rd, rl, member);
        market__rd_end(rd, rl, member);
    } else if (p->source == MARKET__SEARCH_NAMES) {
        const char *keys[4] = {key, rl->market, rl->units, rl->ends};
        const char *args[4] = {p->lex_all, p->lex_lo, p->lex_hi, p->count};
        market__fx_script(rd, prefix_script, 4, keys, 4, args);
    } else { /* the text around a member in the index: "<item>." or ".<seller>" */
        const char *before = p->source == MARKET__SEARCH_ITEM
                                 ? market__buf_join(rd, q->item, ".", (const char *)NULL)
                                 : "";
        const char *after = p->source == MARKET__SEARCH_SELLER
                                ? market__buf_join(rd, ".", q->seller, (const char *)NULL)
                                : "";
        const char *keys[3] = {key, rl->units, rl->ends};
        const char *args[8] = {p->lo_s,        p->hi_s,         p->count, p->desc ? "1" : "0",
                               p->after_price, p->after_member, before,   after};
        market__fx_script(rd, page_script, 3, keys, 8, args);
    }
    size_t i_user = rd->n;
    if (q->seller) {
        const char *k = k_user;
        market__key_user(k_user, rl->id, q->seller);
        market__rd_exists(rd, &k, 1);
    }
    return i_user;
}

/* Writes into key (room for an index's key or market:{r}) the zset that plan p reads for
 * query q in realm rl. This function can't fail. */
static void search_key(char *key, const market__search_plan *p, const market_search_query *q,
                       const market__realm *rl) {
    if (p->source == MARKET__SEARCH_ITEM)
        market__idx_key(key, MARKET__IDX_ITEM, rl->id, q->item);
    else if (p->source == MARKET__SEARCH_SELLER)
        market__idx_key(key, MARKET__IDX_SELLER, rl->id, q->seller);
    else if (p->source == MARKET__SEARCH_NAMES)
        market__idx_names_key(key, rl->id);
    else
        snprintf(key, MARKET__KEY_MAX, "%s", rl->market);
}

/* Searches realm's market for the listings that match q (see market_search_query), in
 * price order, one page: fills *out (see market_search_result; free its listings with
 * market_search_result_cleanup(); after a failure *out is empty). Listings of equal price come
 * in the order of their item, then their seller; with q->item_prefix, every listing comes in
 * that order, whatever its price. A page costs O(log N + q->limit) in Redis, however deep the
 * cursor. Returns MARKET_OK, or MARKET_ERR_INVALID (a bad realm or query:
 * market_search_check() says which part), MARKET_ERR_STORE (Redis failed, or an index
 * holds what no write of ours puts there; c's errstr says which), MARKET_ERR_NOMEM. */
int market_search(market_conn *c, const char *realm, const market_search_query *q,
                  market_search_result *out) {
    if (!out) return MARKET_ERR_INVALID;
    memset(out, 0, sizeof *out);
    market__search_plan p;
    if (!c || !market_id_valid(realm) || market__search_plan_make(q, &p) < 0)
        return MARKET_ERR_INVALID;
    market__realm rl;
    market__realm_init(&rl, realm);
    char key[MARKET__IDX_KEY_MAX > MARKET__KEY_MAX ? MARKET__IDX_KEY_MAX : MARKET__KEY_MAX];
    search_key(key, &p, q, &rl);
    char member[MARKET__MEMBER_MAX], k_user[MARKET__KEY_MAX];
    market__buf rd = {0};
    size_t i_user = search_reads(&rd, &p, q, &rl, key, member, k_user), nc = rd.n;
    int rc = market__read_buf(c, realm, &rd);
    if (rc < 0) return rc;
    redisReply **rep = rd.rep;
    const redisReply *err = market__reply_error(rep, nc);
    if (err) {
        rc = market__fail_reply(c, "search refused", err);
        goto out;
    }
    if (q->seller) {
        int64_t exists = market__reply_count(rep[i_user]);
        if (exists < 0) {
            rc = market__fail_reply(c, "search refused", rep[i_user]);
            goto out;
        }
        out->seller_exists = exists == 1;
    }
    if (p.point) {
        int64_t price = market__reply_price(rep[0]);
        if (price == MARKET__PRICE_UNREADABLE) {
            rc = market__fail(c, "the price of %s in %s is unreadable", member, rl.market);
            goto out;
        }
        if (!market__search_point(&p, price, &out->total)) goto out;
        if (!(out->listings = calloc(1, sizeof *out->listings))) {
            rc = MARKET_ERR_NOMEM;
            goto out;
        }
        snprintf(out->listings[0].item, sizeof out->listings[0].item, "%s", q->item);
        snprintf(out->listings[0].seller, sizeof out->listings[0].seller, "%s", q->seller);
        out->listings[0].price = price;
        out->n = 1;
        if (market__listing_units(&out->listings[0], rep[1]) < 0)
            rc = market__fail(c, "the units of %s are unreadable", member);
        else if (market__listing_end(&out->listings[0], rep[2]) < 0)
            rc = market__fail(c, "the end of %s is unreadable", member);
        goto out;
    }
    const redisReply *r = rep[0];
    int64_t total = market__reply_array(r, 4, 0) ? market__reply_count(market__reply_at(r, 0)) : -1;
    if (total < 0) {
        rc = market__fail_reply(c, "search refused", r);
        goto out;
    }
    out->total = (size_t)total;
    rc = page_read(c, key, &p, q, market__reply_at(r, 1), market__reply_at(r, 2),
                   market__reply_at(r, 3), out);
out:
    market__replies_free(rep, nc);
    market__buf_free(&rd);
    if (rc < 0) market_search_result_cleanup(out);
    return rc;
}

/* Frees r's listings and empties it; NULL is a no-op. This function can't fail. */
void market_search_result_cleanup(market_search_result *r) {
    if (!r) return;
    free(r->listings);
    memset(r, 0, sizeof *r);
}
