/* api_direct.c - the direct trades' routes: POST /trades/direct (a proposal),
 * POST /trades/direct/{id}/accept and /cancel (writes the market serves as
 * orders, begun and ended here), GET /trades/direct/{id} and
 * GET /players/{id}/direct (reads, for the trade's two players), and a
 * direct trade and its sides as JSON.
 */
#include "api/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/api_impl.h"

static const char *const state_names[] = {"open", "done", "cancelled", "expired"}; /* by state */

/* Returns a new object for side g: {"items":[...],"units":{item:n},"funds":n}, or NULL on
 * out-of-memory. */
static json_t *goods_json(const market_goods *g) {
    json_t *items = json_array(), *units = json_object();
    for (size_t k = 0; items && k < g->n_items; k++)
        if (json_array_append_new(items, json_string(g->items[k])) < 0) break;
    for (size_t k = 0; units && k < g->n_units; k++)
        if (json_object_set_new(units, g->unit_item[k], json_integer(g->units[k])) < 0) break;
    if (!items || !units || json_array_size(items) != g->n_items ||
        json_object_size(units) != g->n_units) {
        json_decref(items);
        json_decref(units);
        return NULL;
    }
    return json_pack("{s:o, s:o, s:I}", "items", items, "units", units, "funds",
                     (json_int_t)g->funds);
}

/* Returns a new object for direct trade t: {"id","from","to","give","get","made_ms",
 * "expires_ms","state"[,"closed_ms"][,"cancelled_by"]}, or NULL on out-of-memory. */
json_t *api__direct_json(const market_direct *t) {
    json_t *give = goods_json(&t->give), *get = goods_json(&t->get);
    if (!give || !get) {
        json_decref(give);
        json_decref(get);
        return NULL;
    }
    json_t *o =
        json_pack("{s:I, s:s, s:s, s:o, s:o, s:I, s:I, s:s}", "id", (json_int_t)t->id, "from",
                  t->from, "to", t->to, "give", give, "get", get, "made_ms", (json_int_t)t->made_ms,
                  "expires_ms", (json_int_t)t->expires_ms, "state", state_names[t->state]);
    if (o &&
        ((t->closed_ms && json_object_set_new(o, "closed_ms", json_integer(t->closed_ms)) < 0) ||
         (t->closed_by[0] &&
          json_object_set_new(o, "cancelled_by", json_string(t->closed_by)) < 0))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Reads side `name` of a proposal from o (NULL: absent, empty) into *g: {"items":[id...],
 * "units":{id:n},"funds":n}, every member optional. Returns 1, or 0 with a 400 in resp. */
static int goods_parse(const json_t *o, const char *name, market_goods *g, api_response *resp) {
    char why[API__WHY_MAX];
    static const char *const known[] = {"items", "units", "funds"};
    *g = (market_goods){0};
    if (!o) return 1;
    const char *unknown = api__unknown_key((json_t *)o, known, 3);
    const json_t *items = json_object_get(o, "items"), *units = json_object_get(o, "units"),
                 *funds = json_object_get(o, "funds");
    if (unknown) {
        char q[API__QUOTE_MAX + 4];
        api__quote(q, sizeof q, unknown);
        api__why(why, sizeof why, "field '%s' has an unknown field '%s'", name, q);
        api__bad_request(resp, why);
        return 0;
    }
    int ok =
        (!items || (json_is_array(items) && json_array_size(items) <= MARKET_DIRECT_GOODS_MAX)) &&
        (!units || (json_is_object(units) && json_object_size(units) <= MARKET_DIRECT_GOODS_MAX)) &&
        (!funds || (json_is_integer(funds) && json_integer_value(funds) >= 0 &&
                    json_integer_value(funds) <= MARKET_PRICE_MAX));
    size_t k;
    const json_t *v;
    const char *item;
    json_array_foreach(ok ? items : NULL, k, v) {
        ok = json_is_string(v) && market_id_valid(json_string_value(v));
        if (!ok) break;
        api__copy(g->items[g->n_items++], MARKET_ID_MAX + 1, json_string_value(v));
    }
    json_object_foreach((json_t *)(ok ? units : NULL), item, v) {
        ok = market_id_valid(item) && json_is_integer(v) && json_integer_value(v) >= 1 &&
             json_integer_value(v) <= MARKET_QUANTITY_MAX;
        if (!ok) break;
        api__copy(g->unit_item[g->n_units], MARKET_ID_MAX + 1, item);
        g->units[g->n_units++] = json_integer_value(v);
    }
    if (ok && funds) g->funds = json_integer_value(funds);
    if (ok && market_goods_valid(g)) return 1;
    api__why(why, sizeof why,
             "field '%s' must be {\"items\":[ids],\"units\":{id:1..10^9},\"funds\":0..10^12}: at "
             "most %d items and %d kinds of units, ids matching %s, each named once",
             name, MARKET_DIRECT_GOODS_MAX, MARKET_DIRECT_GOODS_MAX, API__ID_RULE);
    api__bad_request(resp, why);
    return 0;
}

/* ---- POST /trades/direct ---- */

/* POST /trades/direct {"from","to"[,"give"][,"get"][,"duration_s"]}, begun: validated with
 * from's token and Idempotency-Key into d (a MARKET_ORDER_DIRECT). Returns 1, or 0 when resp
 * holds the answer. */
int api__begin_direct(market_conn *conn, const api_request *req, const char *realm, const char *arg,
                      api_response *resp, api_deferred *d) {
    static const api__field_spec spec[] = {
        {"from", API__FIELD_ID, 1},
        {"to", API__FIELD_ID, 1},
        {"give", API__FIELD_OBJECT, 0},
        {"get", API__FIELD_OBJECT, 0},
        {"duration_s", API__FIELD_DURATION, 0},
    };
    api__field_value v[5];
    (void)conn, (void)arg;
    json_t *root = api__order_begin(req, realm, spec, 5, v, MARKET_ORDER_DIRECT, 1, resp, d);
    if (!root) return 0;
    int ok = goods_parse(v[2].obj, "give", &d->give, resp) &&
             goods_parse(v[3].obj, "get", &d->get, resp);
    api__copy(d->to, sizeof d->to, v[1].id);
    d->order.to = d->to;
    d->order.give = &d->give;
    d->order.get = &d->get;
    d->order.duration_s = v[4].present ? v[4].price : 0;
    json_decref(root);
    if (!ok) return 0;
    if (strcmp(d->player, d->to) == 0) {
        api__bad_request(resp, "a player cannot trade with itself: 'to' must be another");
        return 0;
    }
    const market_goods *g = &d->give, *h = &d->get;
    if (!g->n_items && !g->n_units && !g->funds && !h->n_items && !h->n_units && !h->funds) {
        api__bad_request(resp, "a trade must give or get something");
        return 0;
    }
    return 1;
}

/* A refusal of a direct trade order: rc's answer, naming the player that lacks something
 * ("player") and the item ("item"), when the market said. */
static void refuse(int rc, const market_direct_result *r, api_response *resp) {
    json_t *extra = json_object();
    if (extra &&
        ((r->lacks[0] && json_object_set_new(extra, "player", json_string(r->lacks)) < 0) ||
         (r->missing[0] && json_object_set_new(extra, "item", json_string(r->missing)) < 0) ||
         (rc == MARKET_ERR_TRADE_CLOSED && r->t.id &&
          json_object_set_new(extra, "state", json_string(state_names[r->t.state])) < 0))) {
        json_decref(extra);
        extra = NULL;
    }
    if (!extra) {
        api__reply(resp, 500, NULL); /* out of memory */
        return;
    }
    api__reply_market_with(rc, extra, resp);
}

/* Answers d, a direct trade order: status with {"status","trade":{...},"funds"} (the trade
 * as it is after it, and the acting player's funds); a replay knows the trade's id alone. */
static void answer(const api_deferred *d, int status, const char *what, api_response *resp) {
    const market_direct_result *r = &d->order.res.direct;
    int rc = d->order.rc;
    resp->replayed = r->replayed;
    if (rc != MARKET_OK) {
        refuse(rc, r, resp);
        return;
    }
    json_t *t =
        r->replayed ? json_pack("{s:I}", "id", (json_int_t)r->t.id) : api__direct_json(&r->t);
    json_t *o = t ? json_pack("{s:s, s:o}", "status", what, "trade", t) : NULL;
    if (o && !r->replayed && json_object_set_new(o, "funds", json_integer(r->funds)) < 0) {
        json_decref(o);
        o = NULL;
    }
    api__reply(resp, status, o);
}

/* POST /trades/direct's answer: 201 {"status":"open","trade":{...},"funds"}. */
void api__end_direct(const api_deferred *d, api_response *resp) {
    answer(d, 201, "open", resp);
}

/* ---- POST /trades/direct/{id}/accept, /cancel ---- */

/* Either, begun: {"player"} validated with its token and Idempotency-Key into d. */
static int begin_close(const api_request *req, const char *realm, const char *arg,
                       enum market_order_type type, api_response *resp, api_deferred *d) {
    static const api__field_spec spec[] = {{"player", API__FIELD_ID, 1}};
    api__field_value v[1];
    int64_t id;
    if (!api__serial_ok(arg, "direct trade", "POST /trades/direct", &id, resp)) return 0;
    json_t *root = api__order_begin(req, realm, spec, 1, v, type, 1, resp, d);
    if (!root) return 0;
    d->order.id = id;
    json_decref(root);
    return 1;
}

/* POST /trades/direct/{id}/accept {"player"}: by the player it is offered to. */
int api__begin_direct_accept(market_conn *conn, const api_request *req, const char *realm,
                             const char *arg, api_response *resp, api_deferred *d) {
    (void)conn;
    return begin_close(req, realm, arg, MARKET_ORDER_DIRECT_ACCEPT, resp, d);
}

/* POST /trades/direct/{id}/cancel {"player"}: by either of its players. */
int api__begin_direct_cancel(market_conn *conn, const api_request *req, const char *realm,
                             const char *arg, api_response *resp, api_deferred *d) {
    (void)conn;
    return begin_close(req, realm, arg, MARKET_ORDER_DIRECT_CANCEL, resp, d);
}

/* Their answer: 200 {"status":"done"|"cancelled","trade":{...},"funds"}; a refusal names
 * the player that lacks something and the item, or the state of a closed trade. */
void api__end_direct_close(const api_deferred *d, api_response *resp) {
    answer(d, 200, d->order.type == MARKET_ORDER_DIRECT_ACCEPT ? "done" : "cancelled", resp);
}

/* ---- reads ---- */

/* Whether the reader of req may see trade t: the server asks no tokens, or the reader is
 * the admin or one of its two players. This function can't fail. */
static int reader_sees(const api_request *req, const api__reader *rd, const market_direct *t) {
    return !req->auth || rd->admin ||
           (rd->player[0] && (strcmp(rd->player, t->from) == 0 || strcmp(rd->player, t->to) == 0));
}

/* GET /trades/direct/{id}: the trade, open or closed (a closed one is kept a week), for its
 * players (and the admin) when the server asks tokens; 404 for anyone else. */
void api__handle_direct(market_conn *conn, const api_request *req, const char *realm,
                        const char *arg, api_response *resp) {
    int64_t id;
    api__reader rd;
    if (!api__serial_ok(arg, "direct trade", "POST /trades/direct", &id, resp) ||
        !api__reader_get(req, realm, &rd, resp) || api__conn_missing(conn, resp))
        return;
    market_direct t;
    int rc = market_direct_get(conn, realm, id, &t);
    if (rc == MARKET_OK && !reader_sees(req, &rd, &t)) rc = MARKET_ERR_NO_DIRECT;
    api__reply_outcome(resp, rc, 200, rc == MARKET_OK ? api__direct_json(&t) : NULL);
}

/* GET /players/{id}/direct: the open direct trades the player proposed or was offered,
 * soonest to expire first: {"trades":[...]} (its token, when the server asks tokens). */
void api__handle_player_direct(market_conn *conn, const api_request *req, const char *realm,
                               const char *id, api_response *resp) {
    if (!api__id_ok(id, "player", resp)) return;
    api__copy(resp->player, sizeof resp->player, id);
    if (!api__authorized(req, realm, id, resp) || api__conn_missing(conn, resp)) return;
    market_direct *t = NULL;
    size_t n = 0;
    int rc = market_player_directs(conn, realm, id, &t, &n);
    json_t *arr = rc == MARKET_OK ? json_array() : NULL;
    for (size_t i = 0; arr && i < n; i++)
        if (json_array_append_new(arr, api__direct_json(&t[i])) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    free(t);
    json_t *o = arr ? json_pack("{s:o}", "trades", arr) : NULL;
    if (rc == MARKET_OK && !o) {
        api__reply(resp, 200, NULL); /* out of memory */
        return;
    }
    api__reply_outcome(resp, rc, 200, o);
}
