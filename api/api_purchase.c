/* api_purchase.c - the writes of api/: POST /purchase, /list, /unlist, and
 * flash sales (POST /sales, GET /sales/{id}, POST /sales/{id}/buy).
 *
 * A purchase and a sale buy are answered in one of two ways: run on the
 * calling thread (api__handle_purchase(), api__handle_sale_buy()), or begun
 * (api__begin_purchase(), api__begin_sale_buy(): validated into an
 * api_purchase), handed to the market's worker of its kind
 * (api_purchase_submit()) and answered once it has decided
 * (api_purchase_end()). Above api_common.c and api_auth.c; called by api.c.
 */
#include "api/api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/rand.h>

#include "api/api_impl.h"

/* The answer to a purchase whose market outcome is rc and res. */
static void purchase_reply(const char *buyer, const char *seller, const char *item,
                           int64_t quantity, int rc, const market_purchase_result *res,
                           api_response *resp) {
    if (rc != MARKET_OK) {
        api__reply_market(rc, rc == MARKET_ERR_NOT_ENOUGH ? res->available : res->price, resp);
        resp->replayed = res->replayed; /* a refusal stored under the Idempotency-Key */
        return;
    }
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "status", "purchased",
                             "buyer", buyer, "seller", seller, "item", item, "quantity",
                             (json_int_t)quantity, "price", (json_int_t)res->price, "total",
                             (json_int_t)(res->price * quantity), "buyer_funds",
                             (json_int_t)res->buyer_funds);
    /* "" only when replaying a purchase recorded before trade ids */
    if (body && res->trade_id[0] &&
        json_object_set_new(body, "trade_id", json_string(res->trade_id)) < 0) {
        json_decref(body);
        body = NULL;
    }
    api__reply(resp, 200, body);
    resp->replayed = res->replayed;
}

/* Validates POST /purchase {"buyer","seller","item"[,"price"][,"quantity"]}
 * or, without a seller, {"buyer","item","max_price"[,"quantity"]} on realm,
 * its token and its Idempotency-Key into p (strings copied; p->max_price > 0
 * without a seller). Returns 1 when p is ready for the market, 0 when resp
 * holds the answer (an error). */
static int purchase_prepare(const api_request *req, const char *realm, api_response *resp,
                            api_purchase *p) {
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
    snprintf(resp->player, sizeof resp->player, "%s", v[0].id);
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
    } else if (api__authorized(req, realm, v[0].id, resp)) {
        int has_key = api__idempotency(req, &p->idem, p->fp, resp); /* < 0: resp holds the error */
        if (has_key >= 0) {
            /* ids are valid, so they fit; the key was checked by api__idempotency() */
            snprintf(p->realm, sizeof p->realm, "%s", realm);
            snprintf(p->buyer, sizeof p->buyer, "%s", v[0].id);
            snprintf(p->seller, sizeof p->seller, "%s", v[1].present ? v[1].id : "");
            p->max_price = v[5].present ? v[5].price : 0;
            snprintf(p->item, sizeof p->item, "%s", v[2].id);
            if (has_key) {
                snprintf(p->idem_key, sizeof p->idem_key, "%s", p->idem.key);
                p->idem.key = p->idem_key;
                p->idem.fingerprint = p->fp;
            }
            p->op = (market_pending){.realm = p->realm, .buyer = p->buyer, .seller = p->seller,
                                     .item = p->item,
                                     .quantity = v[4].present ? v[4].price : 1,
                                     .expect_price = v[3].present ? v[3].price : -1,
                                     .idem = has_key ? &p->idem : NULL};
            ready = 1;
        }
    }
    json_decref(root);
    return ready;
}

/* Returns a new {"status","buyer","item","quantity","total","buyer_funds",
 * "trade_id","fills":[{"seller","quantity","price","trade_id"}...]}, or NULL
 * on out-of-memory. A replay has no fills (the store keeps the first trade). */
static json_t *bought_body(const api_purchase *p, const market_buy_result *r) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "status", "purchased", "buyer",
                          p->buyer, "item", p->item, "quantity", (json_int_t)r->quantity,
                          "total", (json_int_t)r->total, "buyer_funds",
                          (json_int_t)r->buyer_funds);
    json_t *fills = json_array();
    if (!o || !fills) goto fail;
    for (size_t i = 0; i < r->n_fills; i++) {
        const market_fill *f = &r->fill[i];
        if (json_array_append_new(fills, json_pack("{s:s, s:I, s:I, s:s}", "seller", f->seller,
                                                   "quantity", (json_int_t)f->quantity, "price",
                                                   (json_int_t)f->price, "trade_id",
                                                   f->trade_id)) < 0)
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

/* A purchase without a seller (validated into p), run on this thread. */
static void buy_cheapest(market_conn *conn, const api_purchase *p, api_response *resp) {
    market_buy_result r;
    int rc = market_buy_units(conn, p->realm, p->buyer, p->item, p->op.quantity, p->max_price,
                              p->op.idem, &r);
    if (rc != MARKET_OK)
        api__reply_market(rc, r.available, resp);
    else
        api__reply(resp, 200, bought_body(p, &r));
    resp->replayed = r.replayed;
    if (MARKET_ERR_HAS_REASON(rc)) snprintf(resp->why, sizeof resp->why, "%s",
                                            market_conn_errstr(conn));
}

/* POST /purchase, run on this thread. */
void api__handle_purchase(market_conn *conn, const api_request *req, const char *realm,
                          const char *arg, api_response *resp) {
    (void)arg;
    api_purchase p;
    if (!purchase_prepare(req, realm, resp, &p) || api__conn_missing(conn, resp)) return;
    if (p.max_price > 0) {
        buy_cheapest(conn, &p, resp);
        return;
    }
    market_purchase_result res = {0};
    int rc = market_purchase_units(conn, p.realm, p.buyer, p.seller, p.item, p.op.quantity,
                                   p.op.expect_price, p.op.idem, &res);
    purchase_reply(p.buyer, p.seller, p.item, p.op.quantity, rc, &res, resp);
}

/* POST /purchase, begun (api_handle_begin()): validated into p, and
 * API_BEGIN_PURCHASE returned for the market's queue; a purchase without a
 * seller is not queued but answered here, on this thread (0). */
int api__begin_purchase(market_conn *conn, const api_request *req, const char *realm,
                        const char *arg, api_response *resp, api_purchase *p) {
    (void)arg;
    if (!purchase_prepare(req, realm, resp, p)) return 0;
    if (p->max_price == 0) return API_BEGIN_PURCHASE;
    if (!api__conn_missing(conn, resp)) buy_cheapest(conn, p, resp); /* not queued: answered here */
    return 0;
}

/* POST /list {"seller","item","price"[,"quantity"]} */
void api__handle_list(market_conn *conn, const api_request *req, const char *realm,
                      const char *arg, api_response *resp) {
    static const api__field_spec spec[] = {
        {"seller", API__FIELD_ID, 1},
        {"item", API__FIELD_ID, 1},
        {"price", API__FIELD_PRICE, 1},
        {"quantity", API__FIELD_QUANTITY, 0},
    };
    api__field_value v[4];
    (void)arg;
    json_t *root = api__body_parse(req, spec, 4, v, resp);
    if (!root) return;
    snprintf(resp->player, sizeof resp->player, "%s", v[0].id);
    if (api__authorized(req, realm, v[0].id, resp) && !api__conn_missing(conn, resp)) {
        market_idem idem;
        char fp[MARKET_IDEM_FP_MAX + 1];
        market_list_result res = {0};
        int has_key = api__idempotency(req, &idem, fp, resp); /* < 0: resp holds the error */
        int rc = has_key < 0 ? MARKET_OK
                             : market_list_units(conn, realm, v[0].id, v[1].id,
                                                 v[3].present ? v[3].price : 0, v[2].price,
                                                 has_key ? &idem : NULL, &res);
        if (has_key >= 0 && rc != MARKET_OK) {
            api__reply_market(rc, rc == MARKET_ERR_NOT_HELD ? res.held : res.price, resp);
            resp->replayed = res.replayed; /* a refusal stored under the Idempotency-Key */
        } else if (has_key >= 0) {
            /* quantity: the units the seller's listing holds now (an item of its own: 1) */
            api__reply(resp, 201,
                       json_pack("{s:s, s:s, s:s, s:I, s:I}", "status", "listed", "seller",
                                 v[0].id, "item", v[1].id, "price", (json_int_t)v[2].price,
                                 "quantity", (json_int_t)(res.quantity ? res.quantity : 1)));
            resp->replayed = res.replayed;
        }
    }
    json_decref(root);
}

/* POST /unlist {"seller","item"} */
void api__handle_unlist(market_conn *conn, const api_request *req, const char *realm,
                        const char *arg, api_response *resp) {
    static const api__field_spec spec[] = {
        {"seller", API__FIELD_ID, 1},
        {"item", API__FIELD_ID, 1},
    };
    api__field_value v[2];
    (void)arg;
    json_t *root = api__body_parse(req, spec, 2, v, resp);
    if (!root) return;
    snprintf(resp->player, sizeof resp->player, "%s", v[0].id);
    if (api__authorized(req, realm, v[0].id, resp) && !api__conn_missing(conn, resp)) {
        int64_t price = 0, units = 0;
        int rc = market_unlist_units(conn, realm, v[0].id, v[1].id, &price, &units);
        api__reply_outcome(resp, rc, 200,
                           rc == MARKET_OK
                               ? json_pack("{s:s, s:s, s:s, s:I, s:I}", "status", "unlisted",
                                           "seller", v[0].id, "item", v[1].id, "price",
                                           (json_int_t)price, "quantity", (json_int_t)units)
                               : NULL);
    }
    json_decref(root);
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
    snprintf(s.item, sizeof s.item, "%s", v[1].id);
    snprintf(s.house, sizeof s.house, "%s", v[7].present ? v[7].id : MARKET_SALE_HOUSE);
    if (v[0].present) snprintf(s.id, sizeof s.id, "%s", v[0].id);
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

/* The answer to a buy of sale whose market outcome is rc and res. */
static void sale_buy_reply(const char *sale, const char *buyer, int rc,
                           const market_sale_result *res, api_response *resp) {
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
    json_t *body = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "status", "bought",
                             "sale", sale, "buyer", buyer, "quantity", (json_int_t)res->quantity,
                             "price", (json_int_t)res->price, "total", (json_int_t)res->total,
                             "buyer_funds", (json_int_t)res->buyer_funds, "trade_id",
                             res->trade_id);
    /* what is left is known at the time of the buy, not of a replay */
    if (body && !res->replayed &&
        json_object_set_new(body, "stock_left", json_integer((json_int_t)res->left)) < 0) {
        json_decref(body);
        body = NULL;
    }
    api__reply(resp, 200, body);
    resp->replayed = res->replayed;
}

/* Validates POST /sales/{id}/buy {"buyer","quantity"} on realm, its token
 * and its Idempotency-Key into p (strings copied; p->is_sale set). Returns
 * 1 when p->sale_op is ready for the market, 0 when resp holds the answer. */
static int sale_buy_prepare(const api_request *req, const char *realm, const char *id,
                            api_response *resp, api_purchase *p) {
    static const api__field_spec spec[] = {
        {"buyer", API__FIELD_ID, 1},
        {"quantity", API__FIELD_UNITS, 1},
    };
    if (!api__id_ok(id, "sale", resp)) return 0;
    api__field_value v[2];
    json_t *root = api__body_parse(req, spec, 2, v, resp);
    if (!root) return 0;
    snprintf(resp->player, sizeof resp->player, "%s", v[0].id);
    int ready = 0;
    if (api__authorized(req, realm, v[0].id, resp)) {
        int has_key = api__idempotency(req, &p->idem, p->fp, resp); /* < 0: resp holds it */
        if (has_key >= 0) {
            p->is_sale = 1;
            snprintf(p->realm, sizeof p->realm, "%s", realm);
            snprintf(p->buyer, sizeof p->buyer, "%s", v[0].id);
            snprintf(p->sale, sizeof p->sale, "%s", id);
            if (has_key) {
                snprintf(p->idem_key, sizeof p->idem_key, "%s", p->idem.key);
                p->idem.key = p->idem_key;
                p->idem.fingerprint = p->fp;
            }
            p->sale_op = (market_sale_pending){.realm = p->realm, .sale = p->sale,
                                               .buyer = p->buyer, .quantity = v[1].price,
                                               .idem = has_key ? &p->idem : NULL};
            ready = 1;
        }
    }
    json_decref(root);
    return ready;
}

/* POST /sales/{id}/buy, run on this thread (it waits for the sale's worker). */
void api__handle_sale_buy(market_conn *conn, const api_request *req, const char *realm,
                          const char *id, api_response *resp) {
    api_purchase p;
    if (!sale_buy_prepare(req, realm, id, resp, &p) || api__conn_missing(conn, resp)) return;
    market_sale_result res = {0};
    int rc = market_sale_buy(conn, p.realm, p.sale, p.buyer, p.sale_op.quantity, p.sale_op.idem,
                             &res);
    sale_buy_reply(p.sale, p.buyer, rc, &res, resp);
}

/* POST /sales/{id}/buy, begun (api_handle_begin()): validated into p, and
 * API_BEGIN_SALE_BUY returned for the sale's worker; 0 when resp holds the
 * answer (an error). */
int api__begin_sale_buy(market_conn *conn, const api_request *req, const char *realm,
                        const char *id, api_response *resp, api_purchase *p) {
    (void)conn;
    return sale_buy_prepare(req, realm, id, resp, p) ? API_BEGIN_SALE_BUY : 0;
}

/* ---- handing a begun request to the market ---- */

/* The market's worker has decided a purchase: tell api_purchase_submit()'s caller. */
static void purchase_decided(market_pending *op) {
    api_purchase *p = op->ud;
    p->done(p->ud); /* may free p: not touched after */
}

/* A sale's worker has decided a buy: tell api_purchase_submit()'s caller. */
static void sale_buy_decided(market_sale_pending *op) {
    api_purchase *p = op->ud;
    p->done(p->ud);
}

/* Hands p, which api_handle_begin() filled (and returned non-zero for), to
 * the worker of m that decides its kind: the market's purchase queue, or its
 * sale's worker. done(ud) is then called exactly once, from that worker's
 * thread, or from this call when m refuses to queue p (stopping, out of
 * memory: the refusal is p's outcome); after it, api_purchase_end() answers
 * p. p is borrowed until done is called, and may be freed from done. This
 * function can't fail otherwise. */
void api_purchase_submit(market *m, api_purchase *p, void (*done)(void *ud), void *ud) {
    p->done = done;
    p->ud = ud;
    if (p->is_sale) { /* a buy from a flash sale, to its sale's worker */
        p->sale_op.done = sale_buy_decided;
        p->sale_op.ud = p;
        int rc = market_sale_buy_submit(m, &p->sale_op);
        if (rc != MARKET_OK) { /* not queued: answer it as the worker would have */
            p->sale_op.rc = rc;
            sale_buy_decided(&p->sale_op);
        }
        return;
    }
    p->op.done = purchase_decided;
    p->op.ud = p;
    int rc = market_purchase_submit(m, &p->op);
    if (rc != MARKET_OK) {
        p->op.rc = rc;
        purchase_decided(&p->op);
    }
}

/* Fills resp with the answer to p, whose market outcome (p->op.rc and
 * p->op.res) is in; resp keeps its route and player. */
void api_purchase_end(const api_purchase *p, api_response *resp) {
    if (p->is_sale) {
        sale_buy_reply(p->sale, p->buyer, p->sale_op.rc, &p->sale_op.res, resp);
        if (MARKET_ERR_HAS_REASON(p->sale_op.rc))
            snprintf(resp->why, sizeof resp->why, "%s", p->sale_op.why);
        return;
    }
    purchase_reply(p->buyer, p->seller, p->item, p->op.quantity, p->op.rc, &p->op.res, resp);
    if (MARKET_ERR_HAS_REASON(p->op.rc)) snprintf(resp->why, sizeof resp->why, "%s", p->op.why);
}
