/* api_trades.c - trades: GET /trades/{id}, /players/{id}/trades,
 * /items/{item}/trades, an item's price history (GET
 * /items/{item}/history), and the JSON of the event stream
 * (api_trade_text(), api_change_text()).
 *
 * Above api_common.c and api_auth.c; called by api_route.c's route table and by
 * server/'s GET /events.
 */
#include "api/api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "api/api_impl.h"

/* ---- trades ---- */

/* Returns a new {"trade_id","buyer","seller","item","quantity","price",
 * "total","fee","house","fence","time_ms"} object for t, without "buyer"
 * and "seller" unless parties, and without "house" when it paid no cut; or
 * NULL on out-of-memory. */
static json_t *trade_body(const market_trade *t, int parties) {
    json_t *o = json_object();
    int bad = !o || json_object_set_new(o, "trade_id", api__text_new(t->id)) < 0;
    if (!bad && parties)
        bad = json_object_set_new(o, "buyer", api__text_new(t->buyer)) < 0 ||
              json_object_set_new(o, "seller", api__text_new(t->seller)) < 0;
    bad = bad || json_object_set_new(o, "item", api__text_new(t->item)) < 0 ||
          json_object_set_new(o, "quantity", json_integer((json_int_t)t->quantity)) < 0 ||
          json_object_set_new(o, "price", json_integer((json_int_t)t->price)) < 0 ||
          json_object_set_new(o, "total", json_integer((json_int_t)t->total)) < 0 ||
          json_object_set_new(o, "fee", json_integer((json_int_t)t->fee)) < 0 ||
          (t->fee && json_object_set_new(o, "house", api__text_new(t->house)) < 0) ||
          json_object_set_new(
              o, "fence", json_integer((json_int_t)(t->fence > INT64_MAX ? INT64_MAX : t->fence))) <
              0 ||
          json_object_set_new(o, "time_ms", json_integer((json_int_t)t->time_ms)) < 0;
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Returns trade t as GET /trades/{id} answers it (with its buyer and seller
 * when parties), compact JSON in a new malloc'd buffer (caller frees) of
 * *len bytes, or NULL on out-of-memory. */
char *api_trade_text(const market_trade *t, int parties, size_t *len) {
    json_t *o = trade_body(t, parties);
    char *text = o ? api__dump_body(o, len) : NULL;
    json_decref(o);
    return text;
}

/* Returns listing change ch as {"action":"listed"|"unlisted","seller","item",
 * "price","quantity"}, compact JSON in a new malloc'd buffer (caller frees)
 * of *len bytes, or NULL on out-of-memory. */
char *api_change_text(const market_change *ch, size_t *len) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I}", "action", ch->listed ? "listed" : "unlisted",
                          "seller", ch->listing.seller, "item", ch->listing.item, "price",
                          (json_int_t)ch->listing.price, "quantity",
                          (json_int_t)ch->listing.quantity);
    char *text = o ? api__dump_body(o, len) : NULL;
    json_decref(o);
    return text;
}

/* Returns a new object {name: id, "trades": [...] [, "next_cursor": next]}
 * (next NULL: no such member; "": null), each trade with its parties when
 * reader rd of req sees them (rd NULL: every trade's), or NULL on
 * out-of-memory. */
static json_t *trades_body(const char *name, const char *id, const market_trade *t, size_t n,
                           const char *next, const api_request *req, const api__reader *rd) {
    json_t *o = json_object(), *arr = json_array();
    if (!o || !arr) goto fail;
    for (size_t i = 0; i < n; i++) {
        int parties = !rd || api__reader_sees_parties(req, rd, &t[i]);
        if (json_array_append_new(arr, trade_body(&t[i], parties)) < 0) goto fail; /* NULL too */
    }
    if (json_object_set_new(o, name, api__text_new(id)) < 0) goto fail;
    return api__page_end(o, "trades", &arr, next);
fail:
    json_decref(arr);
    json_decref(o);
    return NULL;
}

/* Reads query argument "limit" (1..MARKET_TRADES_PAGE_MAX, default
 * API__LIMIT_DEFAULT) into *limit. Returns 0, or -1 with resp holding the 400. */
static int trades_limit(const api_request *req, size_t *limit, api_response *resp) {
    if (api__query_size(req, "limit", API__LIMIT_DEFAULT, 1, MARKET_TRADES_PAGE_MAX, limit) == 0)
        return 0;
    char why[API__WHY_MAX];
    api__why(why, sizeof why, "query parameter 'limit' must be an integer in 1..%d",
             MARKET_TRADES_PAGE_MAX);
    api__bad_request(resp, why);
    return -1;
}

/* GET /trades/{id}: its buyer and seller for them and the admin (their
 * token), or when the server makes them public */
void api__handle_trade(market_conn *conn, const api_request *req, const char *realm, const char *id,
                       api_response *resp) {
    if (!market_trade_id_valid(id)) {
        api__bad_request(resp, "trade id must be '<ms>-<seq>', as a purchase's trade_id");
        return;
    }
    api__reader rd;
    if (!api__reader_get(req, realm, &rd, resp) || api__conn_missing(conn, resp)) return;
    market_trade t;
    int rc = market_trade_get(conn, realm, id, &t);
    api__reply_outcome(resp, rc, 200,
                       rc == MARKET_OK ? trade_body(&t, api__reader_sees_parties(req, &rd, &t))
                                       : NULL);
}

/* GET /players/{id}/trades?limit=&cursor= : the player's own, both sides of
 * each, with their token or the admin's */
void api__handle_player_trades(market_conn *conn, const api_request *req, const char *realm,
                               const char *id, api_response *resp) {
    if (!api__id_ok(id, "player", resp)) return;
    api__copy(resp->player, sizeof resp->player, id);
    size_t limit;
    if (trades_limit(req, &limit, resp) < 0) return;
    const char *cursor = req->lookup ? req->lookup(req->lookup_ud, API_ARG_QUERY, "cursor") : NULL;
    if (cursor && !market_trade_id_valid(cursor)) {
        api__bad_request(resp,
                         "query parameter 'cursor' must be a next_cursor this route answered");
        return;
    }
    api__reader rd;
    if (!api__reader_get(req, realm, &rd, resp) ||
        (!rd.admin && !api__authorized(req, realm, id, resp)) || api__conn_missing(conn, resp))
        return;
    market_trade *t = NULL;
    size_t n = 0;
    char next[MARKET_TRADE_ID_MAX + 1];
    int rc = market_trades_player(conn, realm, id, cursor, limit, &t, &n, next);
    api__reply_outcome(resp, rc, 200,
                       rc == MARKET_OK ? trades_body("player", id, t, n, next, req, NULL) : NULL);
    free(t);
}

/* GET /items/{item}/trades?limit= : the latest, newest first (a price
 * chart); each trade's buyer and seller as GET /trades/{id} shows them */
void api__handle_item_trades(market_conn *conn, const api_request *req, const char *realm,
                             const char *item, api_response *resp) {
    if (!api__id_ok(item, "item", resp)) return;
    size_t limit;
    api__reader rd;
    if (trades_limit(req, &limit, resp) < 0 || !api__reader_get(req, realm, &rd, resp) ||
        api__conn_missing(conn, resp))
        return;
    market_trade *t = NULL;
    size_t n = 0;
    int rc = market_trades_item(conn, realm, item, limit, &t, &n);
    api__reply_outcome(resp, rc, 200,
                       rc == MARKET_OK ? trades_body("item", item, t, n, NULL, req, &rd) : NULL);
    free(t);
}

/* ---- price history ---- */

static const char *const interval_names[MARKET_INTERVALS] = {"1m", "1h", "1d"};

/* Returns a new {"t","open","high","low","close","volume"} for k, or NULL
 * on out-of-memory. */
static json_t *candle_body(const market_candle *k) {
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "t", (json_int_t)k->t_ms, "open",
                     (json_int_t)k->open, "high", (json_int_t)k->high, "low", (json_int_t)k->low,
                     "close", (json_int_t)k->close, "volume", (json_int_t)k->volume);
}

/* Returns a new {"item","interval","from","to","candles":[...]}, or NULL on
 * out-of-memory. */
static json_t *history_body(const char *item, int iv, size_t from, size_t to,
                            const market_candle *k, size_t n) {
    json_t *body = json_pack("{s:s, s:s, s:I, s:I}", "item", item, "interval", interval_names[iv],
                             "from", (json_int_t)from, "to", (json_int_t)to);
    json_t *arr = json_array();
    int bad = !body || !arr;
    for (size_t i = 0; !bad && i < n; i++)
        bad = json_array_append_new(arr, candle_body(&k[i])) < 0;
    if (bad || api__object_steal(body, "candles", &arr) < 0) {
        json_decref(arr);
        json_decref(body);
        return NULL;
    }
    return body;
}

/* GET /items/{item}/history?interval=1m|1h|1d&from=&to=: public. The
 * candles of the intervals that start in [from, to] (Unix ms; to defaults
 * to now by this server's clock, from to 59 intervals before to) in which
 * units of item traded, oldest first. */
void api__handle_item_history(market_conn *conn, const api_request *req, const char *realm,
                              const char *item, api_response *resp) {
    if (!api__id_ok(item, "item", resp)) return;
    const char *name = api__query_arg(req, "interval");
    int iv = name ? -1 : MARKET_INTERVAL_1M;
    for (int i = 0; name && i < MARKET_INTERVALS; i++)
        if (strcmp(name, interval_names[i]) == 0) iv = i;
    if (iv < 0) {
        api__bad_query(resp, "interval", "must be 1m, 1h or 1d");
        return;
    }
    size_t len = (size_t)market_interval_ms(iv), kept = market_interval_kept(iv);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    size_t now = (size_t)ts.tv_sec * 1000 + (size_t)ts.tv_nsec / 1000000, to, from;
    if (api__query_size(req, "to", now, 0, (size_t)API__TIME_MAX, &to) < 0) {
        api__bad_query(resp, "to", "must be Unix time in ms, 0..253402300799999");
        return;
    }
    if (api__query_size(req, "from", to > 59 * len ? to - 59 * len : 0, 0, (size_t)API__TIME_MAX,
                        &from) < 0) {
        api__bad_query(resp, "from", "must be Unix time in ms, 0..253402300799999");
        return;
    }
    if (from > to) {
        api__bad_query(resp, "from", "must not be after 'to'");
        return;
    }
    if (to / len - from / len >= kept) {
        char what[96];
        snprintf(what, sizeof what, "must be less than %zu intervals of %s before 'to'", kept,
                 interval_names[iv]);
        api__bad_query(resp, "from", what);
        return;
    }
    if (api__conn_missing(conn, resp)) return;
    market_candle *k = NULL;
    size_t n = 0;
    int rc = market_history(conn, realm, item, iv, (int64_t)from, (int64_t)to, &k, &n);
    api__reply_outcome(resp, rc, 200,
                       rc == MARKET_OK ? history_body(item, iv, from, to, k, n) : NULL);
    free(k);
}
