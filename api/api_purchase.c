/* api_purchase.c - the writes of api/: POST /purchase, /list, /unlist, buy
 * orders (POST /orders, DELETE /orders/{id}), and flash sales (POST /sales,
 * GET /sales/{id}, POST /sales/{id}/buy).
 *
 * Every write the market serves as an order (a purchase, a list, an
 * unlist, a sale buy) is validated by its route's begin step
 * (api__begin_*(): into an api_deferred, one market_order and the strings
 * it points to) and answered by its end step (api__end_*(): from the
 * order's outcome), whether it is deferred (api_handle_begin(), then
 * api_deferred_submit() and api_deferred_end() in api_route.c) or run on the
 * calling thread (api_handle(): begin, market_order_run(), end). Above api_common.c and api_auth.c;
 * called by api_route.c.
 */
#include "api/api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/rand.h>

#include "api/api_impl.h"

/* ---- what every deferrable write shares ---- */

/* ---- POST /purchase ---- */

/* The answer to a purchase of one seller's listing. */
static void purchase_reply(const api_deferred *d, api_response *resp) {
    int rc = d->order.rc;
    const market_purchase_result *res = &d->order.res.purchase;
    int64_t quantity = d->order.quantity;
    if (rc != MARKET_OK) {
        api__reply_market(rc, rc == MARKET_ERR_NOT_ENOUGH ? res->available : res->price, resp);
        resp->replayed = res->replayed; /* a refusal stored under the Idempotency-Key */
        return;
    }
    api__flat body = {0}; /* the hot answer: no tree (api_common.c) */
    api__flat_str(&body, "status", "purchased");
    api__flat_str(&body, "buyer", d->player);
    api__flat_str(&body, "seller", d->seller);
    api__flat_str(&body, "item", d->item);
    api__flat_int(&body, "quantity", quantity);
    api__flat_int(&body, "price", res->price);
    api__flat_int(&body, "total", res->price * quantity);
    api__flat_int(&body, "fee", res->fee);
    api__flat_int(&body, "buyer_funds", res->buyer_funds);
    /* "" only when replaying a purchase recorded before trade ids */
    if (res->trade_id[0]) api__flat_str(&body, "trade_id", res->trade_id);
    api__reply_flat(resp, 200, &body);
    resp->replayed = res->replayed;
}

/* Returns a new {"status","buyer","item","quantity","total","fee","buyer_funds",
 * "trade_id","fills":[{"seller","quantity","price","fee","trade_id"}...]}, or
 * NULL on out-of-memory. A replay has no fills (the store keeps the first
 * trade). */
static json_t *bought_body(const api_deferred *d, const market_buy_result *r) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "status", "purchased", "buyer",
                          d->player, "item", d->item, "quantity", (json_int_t)r->quantity, "total",
                          (json_int_t)r->total, "fee", (json_int_t)r->fee, "buyer_funds",
                          (json_int_t)r->buyer_funds);
    json_t *fills = json_array();
    if (!o || !fills) goto fail;
    for (size_t i = 0; i < r->n_fills; i++) {
        const market_fill *f = &r->fill[i];
        if (json_array_append_new(fills, json_pack("{s:s, s:I, s:I, s:I, s:s}", "seller", f->seller,
                                                   "quantity", (json_int_t)f->quantity, "price",
                                                   (json_int_t)f->price, "fee", (json_int_t)f->fee,
                                                   "trade_id", f->trade_id)) < 0)
            goto fail;
    }
    if ((r->trade_id[0] && json_object_set_new(o, "trade_id", json_string(r->trade_id)) < 0))
        goto fail;
    if (api__object_steal(o, "fills", &fills) < 0) goto fail;
    return o;
fail:
    json_decref(fills);
    json_decref(o);
    return NULL;
}

/* The answer to a purchase without a seller (MARKET_ORDER_BUY). */
static void bought_reply(const api_deferred *d, api_response *resp) {
    const market_buy_result *r = &d->order.res.buy;
    if (!api__end_refused(d, r->replayed, r->available, resp))
        api__reply(resp, 200, bought_body(d, r));
}

/* Validates POST /purchase {"buyer","seller","item"[,"price"][,"quantity"]}
 * (a MARKET_ORDER_PURCHASE) or, without a seller,
 * {"buyer","item","max_price"[,"quantity"]} (a MARKET_ORDER_BUY) on realm,
 * its token and its Idempotency-Key into d. Returns 1, or 0 when resp holds
 * the answer (an error). */
static int purchase_prepare(const api_request *req, const char *realm, api_response *resp,
                            api_deferred *d) {
    static const api__field_spec spec[] = {
        {"buyer", API__FIELD_ID, 1},
        {"seller", API__FIELD_ID, 0},
        {"item", API__FIELD_ID, 1},
        {"price", API__FIELD_PRICE, 0},
        {"quantity", API__FIELD_QUANTITY, 0},
        {"max_price", API__FIELD_PRICE, 0},
    };
    api__field_value v[6];
    json_t *root = api__body_parse(req, spec, 6, v, resp);
    if (!root) return 0;
    api__copy(resp->player, sizeof resp->player, v[0].id);
    int ready = 0;
    if (!v[1].present && !v[5].present) {
        api__bad_request(resp, "missing field 'seller' (or 'max_price', to buy the cheapest units "
                         "of any seller)");
    } else if (v[1].present && v[5].present) {
        api__bad_request(resp, "field 'max_price' is for a purchase without 'seller'");
    } else if (!v[1].present && v[3].present) {
        api__bad_request(resp, "field 'price' needs a 'seller'; without one, give 'max_price'");
    } else if (v[1].present && strcmp(v[0].id, v[1].id) == 0) {
        api__bad_request(resp, "fields 'buyer' and 'seller' must differ");
    } else if (api__authorized(req, realm, v[0].id, resp) &&
               api__deferred_init(d, v[1].present ? MARKET_ORDER_PURCHASE : MARKET_ORDER_BUY, req,
                                  realm, v[0].id, 1, resp)) {
        api__copy(d->seller, sizeof d->seller, v[1].present ? v[1].id : "");
        api__copy(d->item, sizeof d->item, v[2].id);
        d->order.seller = d->seller;
        d->order.item = d->item;
        d->order.quantity = v[4].present ? v[4].price : 1;
        /* a seller's listing: the price expected (-1: any); else the most one unit may cost */
        d->order.price = v[1].present ? (v[3].present ? v[3].price : -1) : v[5].price;
        ready = 1;
    }
    json_decref(root);
    return ready;
}

/* POST /purchase, begun (api_handle_begin()): validated into d; 1 for the
 * market, 0 when resp holds the answer. */
int api__begin_purchase(market_conn *conn, const api_request *req, const char *realm,
                        const char *arg, api_response *resp, api_deferred *d) {
    (void)arg;
    (void)conn;
    return purchase_prepare(req, realm, resp, d);
}

/* POST /purchase's answer, from d's outcome. */
void api__end_purchase(const api_deferred *d, api_response *resp) {
    if (d->order.type == MARKET_ORDER_BUY)
        bought_reply(d, resp);
    else
        purchase_reply(d, resp);
}

/* ---- POST /orders, DELETE /orders/{id} ---- */

/* POST /orders {"buyer","item","quantity","max_price"}, begun: validated
 * with its token and Idempotency-Key into d (a MARKET_ORDER_BID). Returns
 * 1, or 0 when resp holds the answer. */
int api__begin_bid(market_conn *conn, const api_request *req, const char *realm, const char *arg,
                   api_response *resp, api_deferred *d) {
    static const api__field_spec spec[] = {
        {"buyer", API__FIELD_ID, 1},
        {"item", API__FIELD_ID, 1},
        {"quantity", API__FIELD_QUANTITY, 1},
        {"max_price", API__FIELD_PRICE, 1},
    };
    api__field_value v[4];
    (void)conn;
    (void)arg;
    json_t *root = api__order_begin(req, realm, spec, 4, v, MARKET_ORDER_BID, 1, resp, d);
    if (!root) return 0;
    api__copy(d->item, sizeof d->item, v[1].id);
    d->order.item = d->item;
    d->order.quantity = v[2].price;
    d->order.price = v[3].price;
    json_decref(root);
    return 1;
}

/* POST /orders' answer: a purchase's (bought_body()) with the order's own
 * members; 201 when some of it rests in the book, 200 when it filled whole.
 * A replay knows the units filled and the order, not what they cost. */
void api__end_bid(const api_deferred *d, api_response *resp) {
    const market_buy_result *r = &d->order.res.buy;
    if (api__end_refused(d, r->replayed, 0, resp)) return;
    json_t *o = bought_body(d, r);
    int64_t q = d->order.quantity, price = d->order.price;
    if (o &&
        (json_object_set_new(o, "status", json_string(r->order_id ? "resting" : "filled")) < 0 ||
         json_object_set_new(o, "quantity", json_integer((json_int_t)q)) < 0 ||
         json_object_set_new(o, "max_price", json_integer((json_int_t)price)) < 0 ||
         json_object_set_new(o, "filled", json_integer((json_int_t)r->quantity)) < 0 ||
         json_object_set_new(o, "rested", json_integer((json_int_t)r->rested)) < 0 ||
         json_object_set_new(o, "escrow", json_integer((json_int_t)(r->rested * price))) < 0 ||
         (r->order_id &&
          json_object_set_new(o, "order_id", json_integer((json_int_t)r->order_id)) < 0))) {
        json_decref(o);
        o = NULL;
    }
    if (o && r->replayed) { /* not kept by the record */
        json_object_del(o, "total");
        json_object_del(o, "fee");
    }
    api__reply(resp, r->order_id ? 201 : 200, o);
}

/* DELETE /orders/{id} {"buyer"}, begun: validated with the buyer's token into
 * d (a MARKET_ORDER_CANCEL). Returns 1, or 0 when resp holds the answer. */
int api__begin_cancel(market_conn *conn, const api_request *req, const char *realm, const char *arg,
                      api_response *resp, api_deferred *d) {
    static const api__field_spec spec[] = {
        {"buyer", API__FIELD_ID, 1},
    };
    api__field_value v[1];
    int64_t id;
    (void)conn;
    if (!api__serial_ok(arg, "order", "POST /orders", &id, resp)) return 0;
    json_t *root = api__order_begin(req, realm, spec, 1, v, MARKET_ORDER_CANCEL, 0, resp, d);
    if (!root) return 0;
    d->order.id = id;
    json_decref(root);
    return 1;
}

/* DELETE /orders/{id}'s answer, from d's outcome. */
void api__end_cancel(const api_deferred *d, api_response *resp) {
    int rc = d->order.rc;
    const market_cancel_result *r = &d->order.res.cancel;
    api__reply_outcome(
        resp, rc, 200,
        rc == MARKET_OK
            ? json_pack("{s:s, s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "status", "cancelled",
                        "order_id", (json_int_t)r->bid.id, "buyer", d->player, "item", r->bid.item,
                        "price", (json_int_t)r->bid.price, "quantity", (json_int_t)r->bid.quantity,
                        "left", (json_int_t)r->bid.left, "refund", (json_int_t)r->refund,
                        "buyer_funds", (json_int_t)r->buyer_funds)
            : NULL);
}

/* ---- POST /sell ---- */

/* Returns a new array of {"buyer","order_id","quantity","price","fee","trade_id"}
 * for fill[0..n) (a sale into the book), or NULL on out-of-memory. */
static json_t *book_fills(const market_fill *fill, size_t n) {
    json_t *fills = json_array();
    for (size_t i = 0; fills && i < n; i++) {
        const market_fill *f = &fill[i];
        if (json_array_append_new(fills, json_pack("{s:s, s:I, s:I, s:I, s:I, s:s}", "buyer",
                                                   f->buyer, "order_id", (json_int_t)f->order_id,
                                                   "quantity", (json_int_t)f->quantity, "price",
                                                   (json_int_t)f->price, "fee", (json_int_t)f->fee,
                                                   "trade_id", f->trade_id)) < 0) {
            json_decref(fills);
            return NULL;
        }
    }
    return fills;
}

/* POST /sell {"seller","item","quantity","min_price"[,"fill"]}, begun:
 * validated with its token and Idempotency-Key into d (a
 * MARKET_ORDER_SELL); "fill" is "all" (the default: all or nothing) or
 * "partial" (as many as the book wants). Returns 1, or 0 when resp holds
 * the answer. */
int api__begin_sell(market_conn *conn, const api_request *req, const char *realm, const char *arg,
                    api_response *resp, api_deferred *d) {
    static const api__field_spec spec[] = {
        {"seller", API__FIELD_ID, 1},         {"item", API__FIELD_ID, 1},
        {"quantity", API__FIELD_QUANTITY, 1}, {"min_price", API__FIELD_PRICE, 1},
        {"fill", API__FIELD_ID, 0},
    };
    api__field_value v[5];
    (void)conn;
    (void)arg;
    json_t *root = api__order_begin(req, realm, spec, 5, v, MARKET_ORDER_SELL, 1, resp, d);
    if (!root) return 0;
    int partial = v[4].present && strcmp(v[4].id, "partial") == 0;
    if (v[4].present && !partial && strcmp(v[4].id, "all") != 0) {
        json_decref(root);
        api__bad_request(resp, "field 'fill' must be \"all\" or \"partial\"");
        return 0;
    }
    api__copy(d->item, sizeof d->item, v[1].id);
    d->order.item = d->item;
    d->order.quantity = v[2].price;
    d->order.price = v[3].price;
    d->order.partial = partial;
    json_decref(root);
    return 1;
}

/* POST /sell's answer, from d's outcome: {"status","seller","item","quantity","total",
 * "fee","seller_funds","trade_id","fills":[{"buyer","order_id","quantity","price","fee",
 * "trade_id"}...]}. A replay has no fills and no fee. */
void api__end_sell(const api_deferred *d, api_response *resp) {
    const market_sell_result *r = &d->order.res.sell;
    int held = d->order.rc == MARKET_ERR_NOT_HELD;
    if (api__end_refused(d, r->replayed, held ? r->held : r->available, resp)) return;
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "status", "sold", "seller", d->player,
                          "item", d->item, "quantity", (json_int_t)r->quantity, "total",
                          (json_int_t)r->total, "seller_funds", (json_int_t)r->seller_funds);
    json_t *fills = book_fills(r->fill, r->n_fills);
    if (!o || !fills) goto fail;
    if ((!r->replayed && json_object_set_new(o, "fee", json_integer((json_int_t)r->fee)) < 0) ||
        (r->trade_id[0] && json_object_set_new(o, "trade_id", json_string(r->trade_id)) < 0) ||
        api__object_steal(o, "fills", &fills) < 0)
        goto fail;
    api__reply(resp, 200, o);
    return;
fail:
    json_decref(fills);
    json_decref(o);
    api__reply(resp, 200, NULL);
}

/* ---- POST /list, POST /unlist ---- */

/* POST /list {"seller","item","price"[,"quantity"][,"duration_s"]}, begun:
 * validated with its token and Idempotency-Key into d (a MARKET_ORDER_LIST).
 * A duration makes sure first that the sweepers look at the realm
 * (market_ending_note()). Returns 1, or 0 when resp holds the answer. */
int api__begin_list(market_conn *conn, const api_request *req, const char *realm,
                    const char *arg, api_response *resp, api_deferred *d) {
    static const api__field_spec spec[] = {
        {"seller", API__FIELD_ID, 1},           {"item", API__FIELD_ID, 1},
        {"price", API__FIELD_PRICE, 1},         {"quantity", API__FIELD_QUANTITY, 0},
        {"duration_s", API__FIELD_DURATION, 0},
    };
    api__field_value v[5];
    (void)arg;
    json_t *root = api__order_begin(req, realm, spec, 5, v, MARKET_ORDER_LIST, 1, resp, d);
    if (!root) return 0;
    api__copy(d->item, sizeof d->item, v[1].id);
    d->order.item = d->item;
    d->order.price = v[2].price;
    d->order.quantity = v[3].present ? v[3].price : 0;
    d->order.duration_s = v[4].present ? v[4].price : 0;
    json_decref(root);
    return !d->order.duration_s || api__ending_noted(conn, realm, resp);
}

/* POST /list's answer, from d's outcome: 201 "listed"; when units sold into
 * buy orders first, with "sold", "total", "trade_id" and "fills" (a replay:
 * "trade_id" alone), and 200 "sold" when nothing was left to list. */
void api__end_list(const api_deferred *d, api_response *resp) {
    int rc = d->order.rc;
    const market_list_result *res = &d->order.res.list;
    resp->replayed = res->replayed; /* a refusal stored under the Idempotency-Key, too */
    if (rc != MARKET_OK) {
        api__reply_market(rc, rc == MARKET_ERR_NOT_HELD ? res->held : res->price, resp);
        return;
    }
    /* quantity: the units the seller's listing holds now (an item of its own: 1); fee: the
     * listing fee this listing paid */
    int listed = d->order.quantity == 0 || res->quantity > 0;
    int64_t q = d->order.quantity ? res->quantity : 1;
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "status", listed ? "listed" : "sold",
                          "seller", d->player, "item", d->item, "price", (json_int_t)d->order.price,
                          "quantity", (json_int_t)q, "fee", (json_int_t)res->fee);
    if (o && res->ends_ms && json_object_set_new(o, "ends_ms", json_integer(res->ends_ms)) < 0) {
        json_decref(o);
        o = NULL;
    }
    json_t *fills = res->n_fills ? book_fills(res->fill, res->n_fills) : NULL;
    if (o && res->n_fills &&
        (json_object_set_new(o, "sold", json_integer((json_int_t)res->sold)) < 0 ||
         json_object_set_new(o, "total", json_integer((json_int_t)res->total)) < 0 ||
         api__object_steal(o, "fills", &fills) < 0)) {
        json_decref(o);
        o = NULL;
    }
    json_decref(fills);
    if (o && res->trade_id[0] &&
        json_object_set_new(o, "trade_id", json_string(res->trade_id)) < 0) {
        json_decref(o);
        o = NULL;
    }
    api__reply(resp, listed ? 201 : 200, o);
}

/* POST /unlist {"seller","item"}, begun: validated with its token into d (a
 * MARKET_ORDER_UNLIST). Returns 1, or 0 when resp holds the answer. */
int api__begin_unlist(market_conn *conn, const api_request *req, const char *realm,
                      const char *arg, api_response *resp, api_deferred *d) {
    static const api__field_spec spec[] = {
        {"seller", API__FIELD_ID, 1},
        {"item", API__FIELD_ID, 1},
    };
    api__field_value v[2];
    (void)conn;
    (void)arg;
    json_t *root = api__order_begin(req, realm, spec, 2, v, MARKET_ORDER_UNLIST, 0, resp, d);
    if (!root) return 0;
    api__copy(d->item, sizeof d->item, v[1].id);
    d->order.item = d->item;
    json_decref(root);
    return 1;
}

/* POST /unlist's answer, from d's outcome. */
void api__end_unlist(const api_deferred *d, api_response *resp) {
    int rc = d->order.rc;
    const market_unlist_result *u = &d->order.res.unlist;
    api__reply_outcome(resp, rc, 200,
                       rc == MARKET_OK
                           ? json_pack("{s:s, s:s, s:s, s:I, s:I}", "status", "unlisted",
                                       "seller", d->player, "item", d->item, "price",
                                       (json_int_t)u->price, "quantity", (json_int_t)u->units)
                           : NULL);
}

/* ---- flash sales ---- */

/* Returns a new object describing sale s: {"id","item","price","stock",
 * "stock_left","sold","limit","start","end","house","active"}, active when
 * the store's clock is within [start, end) and units are left; NULL on
 * out-of-memory. */
static json_t *sale_body(const market_sale *s) {
    int active = s->now_ms >= s->start_ms && s->now_ms < s->end_ms && s->left > 0;
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:b}", "id", s->id,
                     "item", s->item, "price", (json_int_t)s->price, "stock",
                     (json_int_t)s->initial, "stock_left", (json_int_t)s->left, "sold",
                     (json_int_t)s->sold, "limit", (json_int_t)s->limit, "start",
                     (json_int_t)s->start_ms, "end", (json_int_t)s->end_ms, "house", s->house,
                     "active", active);
}

/* Writes a fresh sale id ("s" and 16 hex digits) into out (MARKET_ID_MAX + 1
 * bytes). Returns 0, or -1 when no randomness can be had. */
static int sale_id_new(char *out) {
    unsigned char raw[8];
    if (RAND_bytes(raw, sizeof raw) != 1) return -1;
    out[0] = 's';
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 1 + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

/* POST /sales {"id"?,"item","stock","price","limit","start","end","house"?}: the
 * admin's. Validated first (400), then the admin token (401, 403). */
void api__handle_sale_create(market_conn *conn, const api_request *req, const char *realm,
                             const char *arg, api_response *resp) {
    static const api__field_spec spec[] = {
        {"id", API__FIELD_ID, 0},       {"item", API__FIELD_ID, 1},
        {"stock", API__FIELD_UNITS, 1}, {"price", API__FIELD_PRICE, 1},
        {"limit", API__FIELD_UNITS, 1}, {"start", API__FIELD_TIME, 1},
        {"end", API__FIELD_TIME, 1},    {"house", API__FIELD_ID, 0},
    };
    api__field_value v[8];
    (void)arg;
    json_t *root = api__body_parse(req, spec, 8, v, resp);
    if (!root) return;
    market_sale s = {.initial = v[2].price, .price = v[3].price, .limit = v[4].price,
                     .start_ms = v[5].price, .end_ms = v[6].price};
    api__copy(s.item, sizeof s.item, v[1].id);
    api__copy(s.house, sizeof s.house, v[7].present ? v[7].id : MARKET_SALE_HOUSE);
    if (v[0].present) api__copy(s.id, sizeof s.id, v[0].id);
    json_decref(root);
    if (s.limit > s.initial) {
        api__bad_request(resp, "field 'limit' must not exceed field 'stock'");
        return;
    }
    if (s.start_ms >= s.end_ms) {
        api__bad_request(resp, "field 'start' must be before field 'end'");
        return;
    }
    if (!api__admin(req, resp) || api__conn_missing(conn, resp)) return;
    if (!s.id[0] && sale_id_new(s.id) < 0) {
        api__error_reply_full(resp, 500, "internal_error", "cannot draw a sale id", 0, NULL);
        return;
    }
    int rc = market_sale_create(conn, realm, &s);
    if (rc == MARKET_ERR_DUPLICATE) {
        api__error_reply_full(resp, 409, "sale_exists", "a sale with this id exists", 0, NULL);
        resp->market_rc = rc;
        return;
    }
    if (rc == MARKET_ERR_NO_PLAYER) {
        api__error_reply_full(resp, 404, "player_not_found",
                              "the house is not a player of the realm", 0, NULL);
        resp->market_rc = rc;
        return;
    }
    if (rc != MARKET_OK) {
        api__reply_market(rc, 0, resp);
        return;
    }
    market_sale got; /* the store's view, with its clock for "active" */
    rc = market_sale_get(conn, realm, s.id, &got);
    api__reply_outcome(resp, rc, 201, rc == MARKET_OK ? sale_body(&got) : NULL);
}

/* GET /sales/{id}: public. */
void api__handle_sale_get(market_conn *conn, const api_request *req, const char *realm,
                          const char *id, api_response *resp) {
    (void)req;
    if (!api__id_ok(id, "sale", resp)) return;
    if (api__conn_missing(conn, resp)) return;
    market_sale s;
    int rc = market_sale_get(conn, realm, id, &s);
    api__reply_outcome(resp, rc, 200, rc == MARKET_OK ? sale_body(&s) : NULL);
}

/* The answer to a buy of a sale, from d's outcome. */
void api__end_sale_buy(const api_deferred *d, api_response *resp) {
    int rc = d->order.rc;
    const market_sale_result *res = &d->order.res.sale_buy;
    if (rc != MARKET_OK) {
        if (rc == MARKET_ERR_SOLD_OUT)
            api__reply_market_member(rc, "stock_left", res->left, resp);
        else if (rc == MARKET_ERR_LIMIT_EXCEEDED)
            api__reply_market_member(rc, "may_buy", res->may_buy, resp);
        else
            api__reply_market(rc, 0, resp);
        resp->replayed = res->replayed;
        return;
    }
    /* a sale takes no cut: its seller is the house */
    json_t *body =
        json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:s}", "status", "bought", "sale",
                  d->sale, "buyer", d->player, "quantity", (json_int_t)res->quantity, "price",
                  (json_int_t)res->price, "total", (json_int_t)res->total, "fee", (json_int_t)0,
                  "buyer_funds", (json_int_t)res->buyer_funds, "trade_id", res->trade_id);
    /* what is left is known at the time of the buy, not of a replay */
    if (body && !res->replayed &&
        json_object_set_new(body, "stock_left", json_integer((json_int_t)res->left)) < 0) {
        json_decref(body);
        body = NULL;
    }
    api__reply(resp, 200, body);
    resp->replayed = res->replayed;
}

/* POST /sales/{id}/buy {"buyer","quantity"}, begun: validated on realm
 * with its token and Idempotency-Key into d (a MARKET_ORDER_SALE_BUY).
 * Returns 1, or 0 when resp holds the answer. */
int api__begin_sale_buy(market_conn *conn, const api_request *req, const char *realm,
                        const char *id, api_response *resp, api_deferred *d) {
    static const api__field_spec spec[] = {
        {"buyer", API__FIELD_ID, 1},
        {"quantity", API__FIELD_UNITS, 1},
    };
    (void)conn;
    if (!api__id_ok(id, "sale", resp)) return 0;
    api__field_value v[2];
    json_t *root = api__order_begin(req, realm, spec, 2, v, MARKET_ORDER_SALE_BUY, 1, resp, d);
    if (!root) return 0;
    api__copy(d->sale, sizeof d->sale, id);
    d->order.sale = d->sale;
    d->order.quantity = v[1].price;
    json_decref(root);
    return 1;
}

