/* market_trade.c - trade records: the script a purchase's commit runs to
 * record its trades, and the reads of them (GET /trades, a player's and an
 * item's trades).
 *
 * DESIGN
 * A trade is recorded in the same MULTI/EXEC as the transfer it records, so
 * that a purchase is committed with its record or not at all. Its id is the
 * id Redis gives its entry of the realm's stream trades:{r} (XADD *), which
 * orders the trades of a realm as they committed. That id is known only
 * inside the EXEC, yet an idempotent purchase's record must keep it (a
 * replay answers the same trade_id), so one script queued in the MULTI does
 * every trade of a commit: XADD to trades:{r}, LPUSH the trade id to the
 * buyer's and the seller's lists (the indexes a player's history reads,
 * newest first), and SET the purchase's idempotency record with the id
 * appended. A list, once it passes cfg.trade_index by an eighth, is
 * trimmed back to it (LTRIM), so trimming is paid once in many trades.
 * An item's trades are a chain through the stream: each entry names the
 * item's trade before it (field prev, "" for its first), and one hash of
 * the realm, trades:{r}:items, holds each item's latest trade id. The script
 * reads the batch's items from it with one HMGET and writes them back with
 * one HSET; an item's price chart walks the chain from there, newest first,
 * until it has enough or reaches a trade trimmed from the stream. An index
 * key per item would cost a new key a trade for unique items (every
 * purchase of one makes its first): measured, the script then cost 11-12 us
 * of Redis CPU a trade against 10-11 now, and the store about 140 bytes a
 * trade more. The walk costs the reader an XRANGE a trade, in one script.
 * The script trims the stream itself (TRIM_SCRIPT), exactly and in chunks
 * of about a node, to cfg.trade_history trades, and an item whose latest
 * trade it trims leaves the hash: the hash has at most a field per trade
 * kept. MAXLEN ~ was free but could not tell which trades it dropped; to
 * know their items without reading them (reading the trimmed trades with
 * XRANGE made the trim cost 4 us of Redis CPU a trade, the list 0.7 us,
 * measured on Redis 7.0 with commits of 28 trades), a list trades:{r}:order
 * holds the items of the stream's trades, oldest first (about 10 bytes a
 * trade).
 * The indexes are lists of ids, not streams with copies of the record: a
 * small stream costs over a kilobyte and a lookup structure (measured on
 * Redis 7.0: 18 us of Redis CPU and 5.8 KB a trade with three more streams,
 * 7 us and 0.2 KB with lists). A page of a history is its ids (LRANGE after
 * the cursor's position, LPOS: the list is bounded, so is the search), then
 * their records, in one pipeline.
 * Every key of the scripts carries the realm's hash tag, so they run in the
 * realm's slot on a Redis Cluster.
 *
 * The recording script runs inside the commit's MULTI/EXEC, so a NOSCRIPT
 * there would fail the script alone while the transfer committed. Sent
 * whole (EVAL), its 4 KB were hashed by Redis twice a commit, when queued
 * and when run: 14% of Redis's CPU at one buyer (perf). So the commit names
 * it (EVALSHA) when its connection knows the server has it cached, else
 * sends it whole, which caches it. A connection knows from the first
 * commit that ran it, or from the SCRIPT EXISTS that a batch's read asks
 * until then (market__ask_script(): one command a batch, while it is not
 * known). A new master, a restart or a reconnection is a new connection,
 * which knows nothing. Only a SCRIPT FLUSH (the market's ACL user may not
 * run it) can then make the script fail alone; then the rest of the
 * commit is in, the connection forgets the script, and record_again()
 * records its trades at once, under the lock the batch still holds.
 */
#include "market/market_trade.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most trades one commit trims beyond its own: a node of a stream
 * (stream-node-max-entries' default), read and deleted in well under a
 * millisecond. */
#define TRIM_CHUNK "100"

/* The end of trades_script (n: the commit's trades, items[1..n] their
 * items): the history's trim. KEYS[3] lists the items of the stream's
 * trades, oldest first (one RPUSH a commit), so that the trim need not read
 * the trades it deletes. Once the stream passes ARGV[1] trades by more than
 * its slack (an eighth of them, at most TRIM_CHUNK), its oldest go, up to
 * TRIM_CHUNK + n of them (so that trimming keeps up): XTRIM MAXLEN = deletes
 * exactly them, LPOP their items, and those whose latest trade is older than
 * the oldest kept leave trades:{r}:items (HMGET, HDEL). Each field of the
 * hash names a trade of its own, so a hash with more fields than the stream
 * has trades holds heads trimmed before the trim was exact (MAXLEN ~ dropped
 * whole nodes, and no list told their items): then a sample of TRIM_CHUNK
 * fields is checked as well. */
#define TRIM_SCRIPT                                                                              \
    "local function older(a, b) "                                                                \
    "local am, as = string.match(a, '^(%d+)-(%d+)$') "                                           \
    "local bm, bs = string.match(b, '^(%d+)-(%d+)$') "                                           \
    "if not am then return true end "                                                            \
    "am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs) "                   \
    "return am < bm or (am == bm and as < bs) end "                                              \
    "redis.call('RPUSH', KEYS[3], unpack(items)) "                                               \
    "local hist, len = tonumber(ARGV[1]), redis.call('XLEN', KEYS[1]) "                          \
    "if len - hist > math.min(math.floor(hist / 8), " TRIM_CHUNK ") then "                       \
    "local k = math.min(len - hist, " TRIM_CHUNK " + n) "                                        \
    "len = len - k "                                                                             \
    "redis.call('XTRIM', KEYS[1], 'MAXLEN', len) "                                               \
    "local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1][1] "                   \
    "local pop = math.min(redis.call('LLEN', KEYS[3]) - len, k + " TRIM_CHUNK ") "               \
    "local its, drop, gone = {}, {}, {} "                                                        \
    "if pop > 0 then for _, x in ipairs(redis.call('LPOP', KEYS[3], pop)) do "                   \
    "if not gone[x] then gone[x] = true; its[#its + 1] = x end end "                             \
    "local h = redis.call('HMGET', KEYS[2], unpack(its)) "                                       \
    "for i = 1, #its do if h[i] and older(h[i], first) then drop[#drop + 1] = its[i] "           \
    "else gone[its[i]] = nil end end end "                                                       \
    "if redis.call('HLEN', KEYS[2]) - #drop > len then "                                         \
    "local s = redis.call('HRANDFIELD', KEYS[2], " TRIM_CHUNK ", 'WITHVALUES') "                 \
    "for i = 1, #s - 1, 2 do "                                                                   \
    "if not gone[s[i]] and older(s[i + 1], first) then drop[#drop + 1] = s[i] end end end "      \
    "if #drop > 0 then redis.call('HDEL', KEYS[2], unpack(drop)) end end "

#define STR_(x) #x
#define STR(x) STR_(x)

/* The part of trades_script that writes the price history of the goods its
 * trades moved (market_trade.h): per item and minute (a commit may span a
 * minute's end), the first, highest, lowest and last price and the units of
 * its trades (hist[], gathered in commit order as they are recorded) go into
 * the candle of each interval that minute falls in: one HMGET and one HSET
 * an item (a minute). */
// clang-format off
#define HISTORY_SCRIPT                                                                           \
    "if #hitems > 0 then "                                                                       \
    "local iv = {{'m', " STR(MARKET__HIST_1M_MS) ", " STR(MARKET__HIST_1M_KEPT) "}, "            \
    "{'h', " STR(MARKET__HIST_1H_MS) ", " STR(MARKET__HIST_1H_KEPT) "}, "                        \
    "{'d', " STR(MARKET__HIST_1D_MS) ", " STR(MARKET__HIST_1D_KEPT) "}} "                        \
    "for _, it in ipairs(hitems) do "                                                            \
    "local h, f, b, set = hist[it], {}, {}, {} "                                                 \
    "local ms = h[7] "                                                                           \
    "for i = 1, 3 do b[i] = ms - ms % iv[i][2] "                                                 \
    "f[i] = iv[i][1] .. string.format('%d', (b[i] / iv[i][2]) % iv[i][3]) end "                  \
    "local old = redis.call('HMGET', h[1], f[1], f[2], f[3]) "                                   \
    "for i = 1, 3 do "                                                                           \
    "local o, hi, lo, c, v = h[2], h[3], h[4], h[5], h[6] "                                      \
    "local x = old[i] and {string.match(old[i], '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')} "      \
    "if x and tonumber(x[1]) == b[i] then o = tonumber(x[2]) "                                   \
    "hi = math.max(hi, tonumber(x[3])); lo = math.min(lo, tonumber(x[4])) "                      \
    "v = v + tonumber(x[6]) end "                                                                \
    "set[2 * i - 1] = f[i] "                                                                     \
    "set[2 * i] = string.format('%.0f %.0f %.0f %.0f %.0f %.0f', b[i], o, hi, lo, c, v) end "   \
    "redis.call('HSET', h[1], unpack(set)) end end "
// clang-format on

/* KEYS[1] the realm's stream, KEYS[2] its items' latest trades (a hash),
 * KEYS[3] the items of its trades (a list, oldest first); per trade t (from
 * 0) KEYS[4+4t..7+4t]: the buyer's and seller's lists, its idempotency
 * record (KEYS[1] when it has none), and its item's price history (KEYS[1]
 * when it moved no stackable good, or history is off). ARGV[1] the trades
 * the stream keeps, ARGV[2] the lists' length, ARGV[3] the record's TTL (s); per
 * trade ARGV[4+10t..13+10t]: buyer, seller, item, quantity, price, total, fee
 * (the realm's cut), the house it paid ("" when none), fence, and the
 * record's text ("" when none). Returns the trade ids in
 * order. The stream is trimmed to ARGV[1] trades at the end (TRIM_SCRIPT). */
static const char trades_script[] =
    "local ids, keep = {}, tonumber(ARGV[2]) "
    "local most = keep + math.floor(keep / 8) "
    "local n, items, head, hist, hitems = (#KEYS - 3) / 4, {}, {}, {}, {} "
    "if n == 0 then return ids end "
    "for t = 1, n do items[t] = ARGV[10 * t - 4] end "
    "local last = redis.call('HMGET', KEYS[2], unpack(items)) "
    "for t = 1, n do head[items[t]] = last[t] or '' end "
    "for t = 0, n - 1 do "
    "local a, k = 3 + 10 * t, 3 + 4 * t "
    "local item = ARGV[a + 3] "
    "local id = redis.call('XADD', KEYS[1], '*', 'buyer', ARGV[a + 1], "
    "'seller', ARGV[a + 2], 'item', item, 'quantity', ARGV[a + 4], 'price', ARGV[a + 5], "
    "'total', ARGV[a + 6], 'fee', ARGV[a + 7], 'house', ARGV[a + 8], 'fence', ARGV[a + 9], "
    "'prev', head[item]) "
    "head[item] = id "
    "for j = 1, 2 do "
    "if redis.call('LPUSH', KEYS[k + j], id) > most then "
    "redis.call('LTRIM', KEYS[k + j], 0, keep - 1) end end "
    "if ARGV[a + 10] ~= '' then "
    "redis.call('SET', KEYS[k + 3], ARGV[a + 10] .. ' ' .. id, 'EX', ARGV[3]) end "
    "ids[t + 1] = id "
    "if KEYS[k + 4] ~= KEYS[1] then "
    "local p, q = tonumber(ARGV[a + 5]), tonumber(ARGV[a + 4]) "
    "local ms = tonumber(string.match(id, '^(%d+)')) "
    "local g = item .. ' ' .. (ms - ms % " STR(
        MARKET__HIST_1M_MS) ") "
                            "local h = hist[g] "
                            "if not h then h = {KEYS[k + 4], p, p, p, p, 0, ms}; hist[g] = h; "
                            "hitems[#hitems + 1] = g end "
                            "h[3] = math.max(h[3], p); h[4] = math.min(h[4], p); h[5] = p; h[6] = "
                            "h[6] + q end "
                            "end " HISTORY_SCRIPT "local set, seen = {}, {} "
                            "for t = 1, n do local i = items[t] "
                            "if not seen[i] then seen[i] = true; set[#set + 1] = i; set[#set + 1] "
                            "= head[i] end end "
                            "redis.call('HSET', KEYS[2], unpack(set)) " TRIM_SCRIPT "return ids";

/* An item's latest trades, newest first: KEYS[1] the realm's stream,
 * KEYS[2] its items' latest trades, KEYS[3] the item's list of trade ids as
 * versions before the chain kept it; ARGV[1] the item, ARGV[2] how many.
 * Walks the chain from the item's latest trade; a trade trimmed from the
 * stream ends it. Where the chain begins, the list (if any) goes on with the
 * trades recorded before it. Returns stream entries. */
static const char item_script[] =
    "#!lua flags=no-writes\n"
    "local out, limit = {}, tonumber(ARGV[2]) "
    "local id = redis.call('HGET', KEYS[2], ARGV[1]) "
    "while id and id ~= '' and #out < limit do "
    "local e = redis.call('XRANGE', KEYS[1], id, id) "
    "if #e == 0 then return out end "
    "out[#out + 1] = e[1] "
    "local f = e[1][2] "
    "id = false "
    "for i = 1, #f - 1, 2 do if f[i] == 'prev' then id = f[i + 1] end end end "
    "if #out < limit then "
    "for _, x in ipairs(redis.call('LRANGE', KEYS[3], 0, limit - #out - 1)) do "
    "local e = redis.call('XRANGE', KEYS[1], x, x) "
    "if #e == 1 then out[#out + 1] = e[1] end end end "
    "return out";

/* A page of a list of trade ids, newest first: KEYS[1] the list, ARGV[1]
 * the cursor (the last id of the previous page, "" for the first page),
 * ARGV[2] how many. A cursor no longer in the list (trimmed) ends the
 * history: an empty page. */
static const char page_script[] =
    "local s = 0 "
    "if ARGV[1] ~= '' then "
    "local p = redis.call('LPOS', KEYS[1], ARGV[1]) "
    "if not p then return {} end "
    "s = p + 1 end "
    "return redis.call('LRANGE', KEYS[1], s, s + tonumber(ARGV[2]) - 1)";

static char trades_sha[MARKET__SHA_MAX + 1];
static pthread_once_t trades_sha_once = PTHREAD_ONCE_INIT;

static void trades_sha_init(void) {
    market__script_sha(trades_script, trades_sha);
}

/* The name of the recording script in Redis's cache (static storage; "" when
 * it could not be computed: then it is always sent whole). Can't fail. */
const char *market__trades_sha(void) {
    (void)pthread_once(&trades_sha_once, trades_sha_init);
    return trades_sha;
}

/* Fills argv (room for MARKET__TRADES_ARGC(n)) with the script that records
 * the n trades t[0..n) of realm, named by sha (EVALSHA) or, when sha is NULL,
 * sent whole (EVAL), its strings kept in tw and t (which must outlive the
 * command). Returns the count. This function can't fail. */
size_t market__trades_argv(const market *m, const char *realm, market__trades *tw,
                           market__trade_rec *t, size_t n, const char *sha, const char **argv) {
    size_t k = 0;
    market__realm rl;
    market__realm_init(&rl, realm);
    memcpy(tw->k_trades, rl.trades, sizeof tw->k_trades);
    snprintf(tw->history, sizeof tw->history, "%llu",
             (unsigned long long)(m->cfg.trade_history ? m->cfg.trade_history
                                                       : MARKET_TRADE_HISTORY));
    snprintf(tw->index, sizeof tw->index, "%llu",
             (unsigned long long)(m->cfg.trade_index ? m->cfg.trade_index : MARKET_TRADE_INDEX));
    memcpy(tw->k_items, rl.trade_items, sizeof tw->k_items);
    memcpy(tw->k_order, rl.trade_order, sizeof tw->k_order);
    snprintf(tw->nkeys, sizeof tw->nkeys, "%zu", 3 + MARKET__TRADE_KEYS * n);
    k += market__script_head(argv, trades_script, sha, tw->nkeys);
    argv[k++] = tw->k_trades;
    argv[k++] = tw->k_items;
    argv[k++] = tw->k_order;
    for (size_t i = 0; i < n; i++) {
        market__trade_rec *r = &t[i];
        market__trade_key(r->k_buyer, sizeof r->k_buyer, realm, "player", r->buyer);
        market__trade_key(r->k_seller, sizeof r->k_seller, realm, "player", r->seller);
        argv[k++] = r->k_buyer;
        argv[k++] = r->k_seller;
        argv[k++] = r->idem_key ? r->idem_key : tw->k_trades;
        if (r->goods && !m->cfg.no_price_history) {
            market__key_history(r->k_history, realm, r->item);
            argv[k++] = r->k_history;
        } else {
            argv[k++] = tw->k_trades;
        }
        r->id[0] = '\0';
    }
    argv[k++] = tw->history;
    argv[k++] = tw->index;
    argv[k++] = MARKET__IDEM_TTL;
    for (size_t i = 0; i < n; i++) {
        market__trade_rec *r = &t[i];
        market__i64_str(r->quantity_s, r->quantity);
        market__i64_str(r->price_s, r->price);
        market__i64_str(r->total_s, r->quantity * r->price);
        market__i64_str(r->fee_s, r->fee);
        argv[k++] = r->buyer;
        argv[k++] = r->seller;
        argv[k++] = r->item;
        argv[k++] = r->quantity_s;
        argv[k++] = r->price_s;
        argv[k++] = r->total_s;
        argv[k++] = r->fee_s;
        argv[k++] = r->fee && r->house ? r->house : "";
        argv[k++] = r->fence;
        argv[k++] = r->idem_key ? r->idem_record : "";
    }
    return k;
}

/* Reads the script's reply r (its element of EXEC's reply) into t[0..n).id.
 * Returns MARKET_OK, or MARKET_ERR_STORE when r is not n trade ids. */
int market__trades_ids(const redisReply *r, market__trade_rec *t, size_t n) {
    if (!r || !market__reply_array(r, n, 0)) return MARKET_ERR_STORE;
    for (size_t i = 0; i < n; i++)
        if (market__reply_text(market__reply_at(r, i), t[i].id, sizeof t[i].id) < 0 ||
            !market_trade_id_valid(t[i].id))
            return MARKET_ERR_STORE;
    return MARKET_OK;
}

/* Reads the replies rep[0..nc) of a commit pipeline whose MULTI follows
 * pre commands and whose trade script (n trades: t[0..n)) is command
 * i_trades: fills t[].id. Returns MARKET_OK, MARKET__TXN_ABORTED (EXEC
 * answered nil: a watched key changed), MARKET__UNRECORDED (the rest committed, the
 * script, named by its SHA-1, was not in the server's cache), or
 * MARKET_ERR_STORE with c->errstr saying why (a command refused, before or
 * inside EXEC, or ids that cannot be read). Frees nothing. */
static int commit_reply(market_conn *c, redisReply **rep, size_t nc, size_t pre,
                        size_t i_trades, market__trade_rec *t, size_t n) {
    int rc = MARKET_OK;
    const redisReply *r = rep[nc - 1];
    const redisReply *err = market__reply_error(rep, nc);
    if (err) /* a guard failed, or a queued command was refused (EXECABORT) */
        return market__fail_reply(c, "commit refused", err);
    if (market__reply_nil(r)) return MARKET__TXN_ABORTED;
    if (!market__reply_array(r, nc - pre - 2, 0)) return market__fail_reply(c, "commit refused", r);
    const redisReply *script = n ? market__reply_at(r, i_trades - pre - 1) : NULL;
    if (script && market__reply_noscript(script) && market__reply_error_in(r) == script)
        return MARKET__UNRECORDED; /* the last command, so the only one that failed */
    if (market__reply_error_in(r))
        rc = market__fail_reply(c, "commit refused", market__reply_error_in(r));
    /* EXEC's replies follow MULTI's: the script's is at i_trades - pre - 1 */
    if (rc == MARKET_OK && n &&
        market__trades_ids(market__reply_at(r, i_trades - pre - 1), t, n) < 0)
        rc = market__fail(c, "the trade records' ids are unreadable");
    return rc;
}

/* Records trades t[0..n) again, after a commit whose EXEC found the server
 * without the recording script (MARKET__UNRECORDED): the rest of the commit is in,
 * so its trades, their lists and idempotency records must follow. argv[0..argc)
 * is the commit's run of the script; its head is rewritten to send the text
 * (EVAL). In a MULTI/EXEC of its own, so that the WAIT every commit gets
 * confirms these writes too, judged here (not deferred). Returns MARKET_OK
 * with t[].id filled, or a failure with c->errstr saying why: then the
 * purchase's outcome is unknown, as when a commit's answer is lost. */
static int record_again(market_conn *c, market__trades *tw, const char **argv, size_t argc,
                        market__trade_rec *t, size_t n) {
    market__buf b = {0};
    (void)market__script_head(argv, trades_script, NULL, tw->nkeys);
    market__fx_multi(&b);
    market__buf_cmdv(&b, (int)argc, argv);
    market__fx_exec(&b);
    int defer = c->defer_wait;
    c->defer_wait = 0;
    int rc = market__pipeline_buf(c, &b);
    c->defer_wait = defer;
    if (rc == MARKET_OK) {
        rc = commit_reply(c, b.rep, b.n, 0, 1, t, n);
        market__replies_free(b.rep, b.n);
        if (rc > 0) /* aborted, or the script gone again */
            rc = market__fail(c, "the trades of a commit could not be recorded after it");
    }
    market__buf_free(&b);
    return rc;
}

/* Ends commit w, whose MULTI follows pre commands of it: appends the
 * script that records realm's trades t[0..n) (none when n is 0; args has
 * room for MARKET__TRADES_ARGC(n) pointers) and EXEC, sends it, and reads
 * its replies, filling t[].id. Returns MARKET_OK, MARKET__TXN_ABORTED (a
 * watched key changed), MARKET__REDIRECTED, or a failure with c->errstr
 * saying why. Every kind's commit ends here. A commit whose script the
 * server no longer had is recorded again at once (record_again()). */
int market__trades_commit(market_conn *c, market__buf *w, size_t pre, const char *realm,
                          market__trades *tw, market__trade_rec *t, size_t n, const char **args) {
    size_t i_trades = w->n, argc = 0;
    const char *mine = market__trades_sha(); /* "" when it could not be computed */
    const char *sha = *mine && c->script_known == mine ? mine : NULL;
    if (n) {
        argc = market__trades_argv(c->m, realm, tw, t, n, sha, args);
        market__buf_cmdv(w, (int)argc, args);
    }
    market__fx_exec(w);
    int rc = market__pipeline_buf(c, w);
    if (rc < 0) return rc;
    c->unwatch = 0; /* EXEC ends every WATCH */
    rc = commit_reply(c, w->rep, w->n, pre, i_trades, t, n);
    market__replies_free(w->rep, w->n);
    if (rc == MARKET__UNRECORDED) {
        c->script_known = NULL;
        rc = record_again(c, tw, args, argc, t, n);
    }
    if (rc == MARKET_OK && n && *mine) c->script_known = mine; /* it ran: so it is cached */
    return rc;
}

/* Hands each order of req[0..n) that made trade t[k] (req[t_req[k]]) its
 * id, and each order that replays an earlier one of the batch (same_as[i]
 * != SIZE_MAX) that one's. Can't fail. */
void market__trades_hand(market_queued *const *req, size_t n, const market__trade_rec *t,
                         const size_t *t_req, size_t n_t, const size_t *same_as) {
    for (size_t k = 0; k < n_t; k++)
        memcpy(req[t_req[k]]->trade_id, t[k].id, sizeof t[k].id);
    for (size_t i = 0; i < n; i++)
        if (same_as[i] != SIZE_MAX)
            memcpy(req[i]->trade_id, req[same_as[i]]->trade_id, MARKET_TRADE_ID_MAX + 1);
}

/* ---- reading ---- */

/* Reads r, an XRANGE of one trade's entry, into *out. Returns 1, 0 when the entry is not
 * there (trimmed), or -1 when r is not one. */
static int entry_read(const redisReply *r, market_trade *out) {
    if (market__reply_array(r, 0, 0)) return 0;
    return market__reply_array(r, 1, 0) &&
                   market__reply_trade(market__reply_at(r, 0), out, NULL) == 0
               ? 1
               : -1;
}

/* Reads trade id of realm into *out. Returns MARKET_OK, or ERR_INVALID
 * (bad realm or id), ERR_NO_TRADE (none, or trimmed from the history:
 * cfg.trade_history), ERR_STORE. */
int market_trade_get(market_conn *c, const char *realm, const char *id, market_trade *out) {
    if (!c || !out || !market_id_valid(realm) || !market_trade_id_valid(id))
        return MARKET_ERR_INVALID;
    market__realm rl;
    market__realm_init(&rl, realm);
    market__buf b = {0};
    market__rd_stream_entry(&b, rl.trades, id);
    redisReply *r = NULL;
    int rc = market__read_one(c, realm, &b, &r);
    market__buf_free(&b);
    if (rc < 0) return rc;
    int got = entry_read(r, out);
    if (got == 0)
        rc = MARKET_ERR_NO_TRADE;
    else if (got < 0 || strcmp(out->id, id) != 0)
        rc = market__fail(c, "trade %s of realm %s is unreadable", id, realm);
    freeReplyObject(r);
    return rc;
}

/* Reads a page of the index list key of realm: up to want ids after cursor
 * (page_script), then, in one pipeline, the records of the first keep of
 * them from the realm's stream. Records trimmed from the stream are left
 * out. Returns MARKET_OK with *out a new array of *n trades (caller frees;
 * NULL when none), *nids the ids the page held and last (MARKET_TRADE_ID_MAX
 * + 1 bytes) the keep-th id, or "" when the page held fewer; or ERR_STORE,
 * ERR_NOMEM. */
static int read_page(market_conn *c, const char *realm, const char *key, const char *cursor,
                     size_t want, size_t keep, market_trade **out, size_t *n, size_t *nids,
                     char *last) {
    *out = NULL;
    *n = *nids = 0;
    last[0] = '\0';
    char count[24];
    snprintf(count, sizeof count, "%zu", want);
    const char *args[2] = {cursor ? cursor : "", count};
    market__buf q = {0}; /* the page, then the pipeline of record lookups */
    market__fx_script(&q, page_script, 1, &key, 2, args);
    redisReply *ids = NULL;
    int rc = market__read_one(c, realm, &q, &ids);
    if (rc < 0) {
        market__buf_free(&q);
        return rc;
    }
    market__buf_reset(&q);
    market_trade *v = NULL;
    market__realm rl;
    market__realm_init(&rl, realm);
    size_t got = market__reply_len(ids), len;
    if (!market__reply_array(ids, SIZE_MAX, 0) || got > want || keep > MARKET_TRADES_PAGE_MAX) {
        rc = market__fail(c, "the trade index %s is unreadable", key);
        goto out;
    }
    size_t k = got < keep ? got : keep;
    const char *id[MARKET_TRADES_PAGE_MAX + 1];
    for (size_t i = 0; i < got; i++) {
        const char *s = market__reply_str(market__reply_at(ids, i), &len);
        if (!s || !market_trade_id_valid(s)) {
            rc = market__fail(c, "the trade index %s holds a bad id", key);
            goto out;
        }
        if (i < k) id[i] = s;
        if (i + 1 == keep) snprintf(last, MARKET_TRADE_ID_MAX + 1, "%s", s);
    }
    *nids = got;
    if (k == 0) goto out;
    if (!(v = calloc(k, sizeof *v))) {
        rc = MARKET_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < k; i++)
        market__rd_stream_entry(&q, rl.trades, id[i]);
    if ((rc = market__pipeline_buf(c, &q)) < 0) goto out;
    for (size_t i = 0; i < k && rc == MARKET_OK; i++) {
        int read = entry_read(q.rep[i], &v[*n]); /* 0: trimmed */
        if (read < 0)
            rc = market__fail(c, "trade %s of realm %s is unreadable", id[i], realm);
        else
            *n += (size_t)read;
    }
    market__replies_free(q.rep, k);
    if (rc == MARKET_OK && *n) {
        *out = v;
        v = NULL;
    }
    *n = *out ? *n : 0;
out:
    market__buf_free(&q);
    free(v);
    freeReplyObject(ids);
    return rc;
}

/* Reads up to limit (1..MARKET_TRADES_PAGE_MAX) trades of player of realm,
 * as buyer or seller, newest first, starting after cursor (NULL or "": the
 * newest; a cursor no longer in the player's index, trimmed or not one of
 * the player's trades, gives an empty last page). Returns MARKET_OK with
 * *out a new array of *n trades (caller frees with free(); NULL when none)
 * and next the cursor of the next page ("" when this one is the last;
 * MARKET_TRADE_ID_MAX + 1 bytes); or ERR_INVALID (bad ids, limit or
 * cursor), ERR_STORE, ERR_NOMEM. A player's index keeps about the last
 * cfg.trade_index trades; a page can hold fewer than limit trades when the
 * realm's history no longer has some of them. */
int market_trades_player(market_conn *c, const char *realm, const char *player,
                         const char *cursor, size_t limit, market_trade **out, size_t *n,
                         char next[MARKET_TRADE_ID_MAX + 1]) {
    if (!out || !n || !next) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = 0;
    next[0] = '\0';
    if (!c || !market_id_valid(realm) || !market_id_valid(player) || limit == 0 ||
        limit > MARKET_TRADES_PAGE_MAX || (cursor && *cursor && !market_trade_id_valid(cursor)))
        return MARKET_ERR_INVALID;
    char key[MARKET__KEY_MAX], last[MARKET_TRADE_ID_MAX + 1];
    market__trade_key(key, sizeof key, realm, "player", player);
    size_t nids;
    /* one id more than the page tells whether another page follows */
    int rc = read_page(c, realm, key, cursor, limit + 1, limit, out, n, &nids, last);
    if (rc == MARKET_OK && nids > limit) memcpy(next, last, sizeof last);
    return rc;
}

/* Reads up to limit (1..MARKET_TRADES_PAGE_MAX) of the latest trades of
 * item on realm's market, newest first (fewer when the realm's history no
 * longer has older ones): one script walks the item's chain (see DESIGN).
 * Returns MARKET_OK with *out a new array of *n trades (caller frees; NULL
 * when none), or ERR_INVALID, ERR_STORE, ERR_NOMEM. */
int market_trades_item(market_conn *c, const char *realm, const char *item, size_t limit,
                       market_trade **out, size_t *n) {
    if (!out || !n) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = 0;
    if (!c || !market_id_valid(realm) || !market_id_valid(item) || limit == 0 ||
        limit > MARKET_TRADES_PAGE_MAX)
        return MARKET_ERR_INVALID;
    market__realm rl;
    market__realm_init(&rl, realm);
    char k_list[MARKET__KEY_MAX], count[24];
    market__trade_key(k_list, sizeof k_list, realm, "item", item);
    snprintf(count, sizeof count, "%zu", limit);
    const char *keys[3] = {rl.trades, rl.trade_items, k_list}, *args[2] = {item, count};
    market__buf b = {0};
    market__fx_script(&b, item_script, 3, keys, 2, args);
    redisReply *r = NULL;
    int rc = market__read_one(c, realm, &b, &r);
    market__buf_free(&b);
    if (rc < 0) return rc;
    void *v = NULL;
    rc = market__reply_entries(r, limit, MARKET__STREAM_TRADES, &v, n);
    *out = v;
    if (rc == MARKET_ERR_STORE)
        rc = market__fail(c, "the trades of item %s of realm %s are unreadable", item, realm);
    freeReplyObject(r);
    return rc;
}

/* Reads the id of the latest trade of realm into id ("" when it has none).
 * Returns MARKET_OK, ERR_INVALID or ERR_STORE. */
int market_trade_last(market_conn *c, const char *realm, char id[MARKET_TRADE_ID_MAX + 1]) {
    const enum market__stream s[1] = {MARKET__STREAM_TRADES};
    return market__streams_last(c, realm, 1, s, (char(*)[MARKET_TRADE_ID_MAX + 1]) id);
}

/* Where the stream KEYS[1] begins: {the id of its oldest entry ("" when
 * none), how many entries were ever removed from it (entries-added less
 * its length: its trims)}; {"", 0} when there is no stream. */
static const char start_script[] =
    "#!lua flags=no-writes\n"
    "if redis.call('EXISTS', KEYS[1]) == 0 then return {'', 0} end "
    "local f, added, len = redis.call('XINFO', 'STREAM', KEYS[1]), 0, 0 "
    "for i = 1, #f - 1, 2 do "
    "if f[i] == 'entries-added' then added = f[i + 1] elseif f[i] == 'length' then "
    "len = f[i + 1] end end "
    "local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1) "
    "return {#first > 0 and first[1][1] or '', added - len}";

/* Reads where realm's trade history begins now: the id of the oldest trade
 * it keeps into oldest ("" when none), and into *trimmed how many trades it
 * has trimmed since it began. Returns MARKET_OK, ERR_INVALID or ERR_STORE. */
int market_trade_history_start(market_conn *c, const char *realm,
                               char oldest[MARKET_TRADE_ID_MAX + 1], uint64_t *trimmed) {
    if (!c || !oldest || !trimmed || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    market__realm rl;
    market__realm_init(&rl, realm);
    market__buf b = {0};
    const char *keys[1] = {rl.trades};
    market__fx_script(&b, start_script, 1, keys, 0, NULL);
    redisReply *r = NULL;
    int rc = market__read_one(c, realm, &b, &r);
    market__buf_free(&b);
    if (rc < 0) return rc;
    int64_t n = market__reply_array(r, 2, 0) ? market__reply_count(market__reply_at(r, 1)) : -1;
    if (n < 0 || market__reply_text(market__reply_at(r, 0), oldest, MARKET_TRADE_ID_MAX + 1) < 0 ||
        (oldest[0] && !market_trade_id_valid(oldest))) {
        rc = market__fail_reply(c, "reading where the trade history begins", r);
    } else {
        *trimmed = (uint64_t)n;
    }
    freeReplyObject(r);
    return rc;
}

/* Reads up to limit (1..MARKET_TRADES_PAGE_MAX) trades of realm committed
 * after trade id after (NULL or "": from the oldest kept), oldest first
 * (the next page starts after the last one read). Returns MARKET_OK with
 * *out a new array of *n trades (caller frees; NULL when none), or
 * ERR_INVALID, ERR_STORE, ERR_NOMEM. */
int market_trades_after(market_conn *c, const char *realm, const char *after, size_t limit,
                        market_trade **out, size_t *n) {
    if (!out) return MARKET_ERR_INVALID; /* else the page would be read and lost */
    const enum market__stream s[1] = {MARKET__STREAM_TRADES};
    void *v = NULL;
    int rc = market__streams_after(c, realm, 1, s, &after, limit, &v, n);
    *out = v;
    return rc;
}
