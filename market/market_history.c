/* market_history.c - an item's price history: the candles the trade
 * script writes in the commit of every trade of a stackable good
 * (market_trade.h says how they are kept), read back by interval.
 *
 * A read is one HMGET of the ring slots a range covers: at most a ring's
 * size of fields, whatever the item's trades. A slot holding another
 * interval's candle (an older turn of the ring) is no candle of the range.
 */
#include "market/market_trade.h"

#include <stdlib.h>
#include <string.h>

static const int64_t interval_ms[MARKET_INTERVALS] = {MARKET__HIST_1M_MS, MARKET__HIST_1H_MS,
                                                      MARKET__HIST_1D_MS};
static const size_t interval_kept[MARKET_INTERVALS] = {MARKET__HIST_1M_KEPT, MARKET__HIST_1H_KEPT,
                                                       MARKET__HIST_1D_KEPT};

/* Returns the length of interval (enum market_interval) in ms, 0 for none. */
int64_t market_interval_ms(int interval) {
    return interval >= 0 && interval < MARKET_INTERVALS ? interval_ms[interval] : 0;
}

/* Returns how many candles of interval the history keeps, 0 for none. */
size_t market_interval_kept(int interval) {
    return interval >= 0 && interval < MARKET_INTERVALS ? interval_kept[interval] : 0;
}

/* Reads item's candles of interval whose start is in [from_ms, to_ms]
 * (both Unix ms, from_ms <= to_ms, at most market_interval_kept(interval)
 * intervals apart), oldest first: an interval without a trade has none.
 * Returns MARKET_OK with *out a new array of *n candles (caller frees; NULL
 * when none), or ERR_INVALID (a bad id, interval or range), ERR_STORE,
 * ERR_NOMEM. */
int market_history(market_conn *c, const char *realm, const char *item, int interval,
                   int64_t from_ms, int64_t to_ms, market_candle **out, size_t *n) {
    if (!out || !n) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = 0;
    int64_t iv = market_interval_ms(interval);
    if (!c || !market_id_valid(realm) || !market_id_valid(item) || !iv || from_ms < 0 ||
        to_ms < from_ms)
        return MARKET_ERR_INVALID;
    int64_t first = from_ms - from_ms % iv, last = to_ms - to_ms % iv;
    size_t count = (size_t)((last - first) / iv) + 1;
    if (count > interval_kept[interval]) return MARKET_ERR_INVALID;
    char key[MARKET__KEY_MAX], (*field)[24] = malloc(count * sizeof *field);
    market_candle *v = calloc(count, sizeof *v);
    market__buf b = {0};
    redisReply *r = NULL;
    int rc = MARKET_ERR_NOMEM;
    if (!field || !v) goto out;
    market__key_history(key, realm, item);
    market__rd_history_begin(&b, key);
    for (size_t i = 0; i < count; i++) {
        int64_t slot = (first / iv + (int64_t)i) % (int64_t)interval_kept[interval];
        field[i][0] = MARKET__HIST_PREFIXES[interval];
        market__i64_str(field[i] + 1, slot);
        market__buf_arg(&b, field[i]);
    }
    market__buf_end(&b, 0);
    if ((rc = market__read_one(c, realm, &b, &r)) < 0) goto out;
    if (!market__reply_array(r, count, 0)) {
        rc = market__fail_reply(c, "reading a price history", r);
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        int got = market__reply_candle(market__reply_at(r, i), first + (int64_t)i * iv, &v[*n]);
        if (got < 0) {
            rc = market__fail(c, "the price history of %s is unreadable", item);
            goto out;
        }
        *n += (size_t)got;
    }
    rc = MARKET_OK;
out:
    if (r) freeReplyObject(r);
    market__buf_free(&b);
    free(field);
    if (rc == MARKET_OK && *n) {
        *out = v;
    } else {
        free(v);
        *n = 0;
    }
    return rc;
}
