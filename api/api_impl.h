/* api_impl.h - what the files of api/ share: strict JSON loading, safe strings, replies,
 * and the handlers the route table names.
 * Included only by api/ and its tests. */
#ifndef GM_API_API_IMPL_H
#define GM_API_API_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "api/api.h"

#define API__WHY_MAX 256  /* room for one validation message */
#define API__ARG_MAX 256  /* a route's id segment, copied (longer ones read as "") */
#define API__QUOTE_MAX 48 /* longest user-supplied name quoted in a message, in bytes */
#define API__ID_RULE "[A-Za-z0-9_-]{1,64}" /* what market_id_valid() takes, for messages */
#define API__TIME_MAX INT64_C(253402300799999) /* Unix ms of 9999-12-31T23:59:59.999Z */
#define API__LIMIT_DEFAULT 50 /* a page's size when ?limit is not given */

/* ---- request bodies: what a route's spec table says of a field ---- */

enum api__field_kind {
    API__FIELD_ID,       /* a string matching API__ID_RULE */
    API__FIELD_PRICE,    /* an integer in 1..MARKET_PRICE_MAX */
    API__FIELD_QUANTITY, /* an integer in 1..MARKET_QUANTITY_MAX */
    API__FIELD_UNITS,    /* an integer in 1..MARKET_SALE_STOCK_MAX */
    API__FIELD_TIME,     /* an integer in 0..9999-12-31T23:59:59.999Z in Unix ms */
    API__FIELD_BPS,      /* an integer in 0..MARKET_FEE_BPS_MAX (basis points) */
    API__FIELD_DURATION, /* an integer in 1..MARKET_DURATION_MAX_S (seconds) */
    API__FIELD_SECONDS,  /* an integer in 0..MARKET_DURATION_MAX_S (0: none) */
    API__FIELD_OBJECT,   /* a JSON object, read by the route */
};

typedef struct api__field_spec {
    const char *name;
    enum api__field_kind kind;
    int required;
} api__field_spec;

typedef struct api__field_value {
    int present;
    const char *id; /* API__FIELD_ID: borrowed from the parsed body */
    int64_t price;  /* API__FIELD_PRICE, API__FIELD_QUANTITY, API__FIELD_UNITS, API__FIELD_TIME */
    json_t *obj;    /* API__FIELD_OBJECT: borrowed from the parsed body */
} api__field_value;

/* ---- JSON input ---- */

json_t *api__load(const char *buf, size_t len, const char *what, int *rc, char *why, size_t whylen);
const char *api__unknown_key(json_t *obj, const char *const *known, size_t n);
void api__quote(char *out, size_t outlen, const char *s);
void api__copy(char *out, size_t cap, const char *src);
void api__why(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

json_t *api__body_parse(const api_request *req, const api__field_spec *spec, size_t n,
                        api__field_value *vals, api_response *resp);
int api__conn_missing(const market_conn *conn, api_response *resp);

/* ---- query arguments ---- */

int api__query_size(const api_request *req, const char *name, size_t def, size_t lo, size_t hi,
                    size_t *out);
const char *api__query_arg(const api_request *req, const char *name);
void api__bad_query(api_response *resp, const char *name, const char *what);

/* ---- JSON output ---- */

json_t *api__text_new(const char *s);
int api__object_steal(json_t *o, const char *key, json_t **value);
json_t *api__page_end(json_t *o, const char *name, json_t **arr, const char *cursor);
char *api__dump_body(const json_t *body, size_t *len);
json_t *api__error_body(const char *code, const char *detail);
void api__reply(api_response *resp, int status, json_t *body);
typedef struct api__flat { /* a flat object being written: api__flat f = {0}; */
    char *text;
    size_t len, cap;
    int oom;
} api__flat;
void api__flat_str(api__flat *f, const char *key, const char *value);
void api__flat_int(api__flat *f, const char *key, int64_t value);
void api__reply_flat(api_response *resp, int status, api__flat *f);
void api__reply_market(int rc, int64_t price, api_response *resp);
int api__end_refused(const api_deferred *d, int replayed, int64_t n, api_response *resp);
void api__reply_market_member(int rc, const char *member, int64_t v, api_response *resp);
void api__reply_market_with(int rc, json_t *extra, api_response *resp);
void api__reply_outcome(api_response *resp, int rc, int status, json_t *body);
void api__error_reply(api_response *resp, int status, const char *code, const char *detail);
void api__error_reply_full(api_response *resp, int status, const char *code, const char *detail,
                           int retry_after_s, const char *allow);
void api__bad_request(api_response *resp, const char *detail);
int api__id_ok(const char *id, const char *what, api_response *resp);
int api__serial_ok(const char *arg, const char *what, const char *from, int64_t *id,
                   api_response *resp);
int api__authorized(const api_request *req, const char *realm, const char *player,
                    api_response *resp);
int api__admin(const api_request *req, api_response *resp);
/* Who reads a trade (api__reader_get()): the admin, a player (their verified
 * token), or anyone (neither: admin 0, player ""). */
typedef struct api__reader {
    int admin;
    char player[MARKET_ID_MAX + 1];
} api__reader;
int api__reader_get(const api_request *req, const char *realm, api__reader *rd, api_response *resp);
int api__reader_sees_parties(const api_request *req, const api__reader *rd, const market_trade *t);
size_t api__b64url_encode(const unsigned char *in, size_t n, char *out, size_t outlen);
long api__b64url_decode(const char *src, size_t n, unsigned char *out);
int api__idempotency(const api_request *req, market_idem *idem, char *fp, api_response *resp);
int api__ending_noted(market_conn *conn, const char *realm, api_response *resp);
int api__deferred_init(api_deferred *d, enum market_order_type type, const api_request *req,
                       const char *realm, const char *player, int keyed, api_response *resp);
json_t *api__order_begin(const api_request *req, const char *realm, const api__field_spec *spec,
                         size_t n, api__field_value *v, enum market_order_type type, int keyed,
                         api_response *resp, api_deferred *d);

/* ---- the handlers of api_route.c's route table (api_purchase.c, api_market.c, api_trades.c,
 * api_auction.c) ---- */

/* A route's handler: realm is the request's (MARKET_REALM_DEFAULT without a
 * /realms/{realm} prefix), arg its id segment (prefix routes) or NULL. */
typedef void api__handler(market_conn *conn, const api_request *req, const char *realm,
                          const char *arg, api_response *resp);

/* A deferred route's first half (api_handle_begin()): like its handler, but a
 * request that passes validation is written into d (its order and the
 * strings it points to) and 1 returned instead of being run; 0 when resp
 * holds the whole answer. */
typedef int api__beginner(market_conn *conn, const api_request *req, const char *realm,
                          const char *arg, api_response *resp, api_deferred *d);

/* A deferred route's second half (api_deferred_end()): writes the answer to
 * d, whose order's outcome is in, into resp (which keeps its route, realm
 * and player). The route's handler answers with it too. */
typedef void api__ender(const api_deferred *d, api_response *resp);

api__beginner api__begin_purchase, api__begin_list, api__begin_unlist;
api__ender api__end_purchase, api__end_list, api__end_unlist;
api__handler api__handle_sale_create, api__handle_sale_get, api__handle_settings;
api__handler api__handle_item_history;
api__beginner api__begin_sale_buy, api__begin_bid, api__begin_cancel, api__begin_sell;
api__ender api__end_sale_buy, api__end_bid, api__end_cancel, api__end_sell;
api__handler api__handle_item_book, api__handle_player_orders;
api__handler api__handle_market, api__handle_player, api__handle_player_listings;
api__handler api__handle_healthz;
api__handler api__handle_trade, api__handle_player_trades, api__handle_item_trades;
/* auctions (api_auction.c) */
api__beginner api__begin_auction, api__begin_auction_bid;
api__ender api__end_auction, api__end_auction_bid;
api__handler api__handle_auction, api__handle_auctions;
json_t *api__auction_json(const market_auction *a);
/* direct trades (api_direct.c) */
api__beginner api__begin_direct, api__begin_direct_accept, api__begin_direct_cancel;
api__ender api__end_direct, api__end_direct_close;
api__handler api__handle_direct, api__handle_player_direct;
json_t *api__direct_json(const market_direct *t);

#endif /* GM_API_API_IMPL_H */
