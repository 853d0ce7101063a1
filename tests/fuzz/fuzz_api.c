/* fuzz_api.c - libFuzzer harness over api_handle(), api_handle_begin() (every deferred
 * write: purchases, lists, unlists, sale buys) and api_error().
 *
 * Every input is one HTTP request, laid out as
 *
 *   byte 0      flags: bits 0-2 pick the method from fuzz_methods[];
 *               bits 3-4 pick the store (0 market, 1 item, 2 optimistic
 *               strategy, 3 no connection at all);
 *               bit 5 pads the body with spaces to API_BODY_MAX - 1 + (len % 3)
 *               bytes (the 413 boundary, without 64 KiB inputs in the corpus);
 *               bit 6 turns authentication on, with FUZZ_AUTH_SECRET;
 *               bit 7 drops the lookup hook;
 *   then        the path, up to the first '\n' or NUL: "?" starts a list of
 *               "name=value" pairs joined by '&', which serve both as query
 *               arguments and (names compared without case) as headers, so
 *               "?Authorization=Bearer <JWT>" carries a token;
 *   the rest    the body, verbatim, after the '\n' or NUL. With no separator at
 *               all the body is NULL; with nothing after it, empty but not NULL.
 *
 * The store is a closed loopback port (redis://127.0.0.1:1/0) and the lock is
 * lock_local, so validation runs fully and anything valid is answered 503
 * store_unavailable at once (connect() is refused); one exec costs microseconds.
 *
 * DESIGN
 * The invariants checked for every input (abort() on a violation, so that
 * libFuzzer saves the input):
 *   - the status is one the API can give with a closed store: 400, 404, 405,
 *     413, 503; 401 and 403 only with authentication on; 500 only when there
 *     is no connection (the fuzzer never fails an allocation, so a 500 with a
 *     connection is a mislabelled error); 422 is accepted for a future route;
 *   - the body is non-NULL, NUL-terminated at body_len, strict JSON (valid
 *     UTF-8, one object) with a string "error" that belongs to the status,
 *     and a "detail" that, when present, is a string;
 *   - Allow is set exactly on a 405, Retry-After exactly on a 503,
 *     WWW-Authenticate exactly on a 401; nothing is marked replayed; the route
 *     is a static name from api_route_name() unless no route matched (404
 *     not_found); the player for logs is "" or a valid id;
 *   - the same request answered again gives the same bytes, and HEAD gives
 *     what GET gives (the connection's state must not leak into answers);
 *   - api_error() with the path as code and the body as detail gives a valid
 *     body whose "error" keeps the code's length (bad UTF-8 becomes '?');
 *   - api_response_cleanup() frees everything (LeakSanitizer checks).
 */
#include "api/api.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"

#define FUZZ_CLOSED_STORE "redis://127.0.0.1:1/0"
#define FUZZ_QUERY_MAX 8               /* query pairs looked at; later ones are ignored */
#define FUZZ_AUTH_SECRET "fuzz-secret" /* make_corpus.py signs its seed tokens with it */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fuzz_methods[8] = {"GET",    "POST", "HEAD",    "PUT",
                                            "DELETE", "post", "OPTIONS", ""};

/* One market per strategy, all over the closed store; built once. */
static lock_client *fuzz_lock;
static market *fuzz_markets[3];
static market_conn *fuzz_conns[3];
static api_auth *fuzz_auth; /* FUZZ_AUTH_SECRET, for tokens without a kid */

/* The query string of one input, split in place. */
typedef struct fuzz_query {
    size_t n;
    const char *name[FUZZ_QUERY_MAX];
    const char *value[FUZZ_QUERY_MAX];
} fuzz_query;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_api: invariant failed at line %d: %s\n", __LINE__, #cond);       \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* ---- setup ---- */

static void fuzz_setup(void) {
    market_config cfg = {0};
    int err = 0;
    CHECK(rconn_addr_parse(FUZZ_CLOSED_STORE, &cfg.redis) == 0);
    cfg.redis_timeout_ms = 50;
    cfg.lock_ttl_ms = 2000;
    cfg.acquire_timeout_ms = 1000; /* the closed store answers long before */
    fuzz_lock = lock_local_new(&err);
    CHECK(fuzz_lock != NULL);
    for (int i = 0; i < 3; i++) {
        cfg.strategy = (enum market_strategy)i;
        fuzz_markets[i] = market_new(&cfg, fuzz_lock, &err);
        CHECK(fuzz_markets[i] != NULL);
        fuzz_conns[i] = market_conn_new(fuzz_markets[i], &err);
        CHECK(fuzz_conns[i] != NULL);
    }
    fuzz_auth = api_auth_new();
    CHECK(fuzz_auth != NULL);
    CHECK(api_auth_set_secret(fuzz_auth, FUZZ_AUTH_SECRET, NULL, 0) == API_AUTH_OK);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_setup();
    return 0;
}

/* ---- the request ---- */

static const char *fuzz_lookup(void *ud, enum api_arg_kind kind, const char *name) {
    const fuzz_query *q = ud;
    for (size_t i = 0; i < q->n; i++) {
        int diff = kind == API_ARG_QUERY ? strcmp(q->name[i], name) : strcasecmp(q->name[i], name);
        if (diff == 0) return q->value[i];
    }
    return NULL;
}

/* Splits "a=1&b&c=" (modified in place) into q. A name without '=' has a
 * NULL value, as libmicrohttpd gives it, so it reads as absent. */
static void fuzz_query_split(char *s, fuzz_query *q) {
    q->n = 0;
    while (s && *s && q->n < FUZZ_QUERY_MAX) {
        char *amp = strchr(s, '&');
        if (amp) *amp = '\0';
        char *eq = strchr(s, '=');
        if (eq) *eq = '\0';
        q->name[q->n] = s;
        q->value[q->n] = eq ? eq + 1 : NULL;
        q->n++;
        s = amp ? amp + 1 : NULL;
    }
}

/* ---- the answer ---- */

/* Does code belong to status? Every pair api/ can produce; 422 (not
 * produced today) may carry any code. */
static int code_fits(int status, const char *code) {
    static const struct {
        int status;
        const char *code;
    } fits[] = {
        {400, "bad_request"},       {404, "not_found"},      {404, "item_not_listed"},
        {404, "player_not_found"},  {404, "item_not_held"},  {405, "method_not_allowed"},
        {413, "payload_too_large"}, {500, "internal_error"}, {503, "store_unavailable"},
        {503, "market_busy"},       {503, "lease_lost"},     {503, "conflict"},
        {401, "unauthorized"},      {403, "forbidden"},      {403, "admin_disabled"},
    };
    if (status == 422) return 1;
    for (size_t i = 0; i < sizeof fits / sizeof fits[0]; i++)
        if (fits[i].status == status && strcmp(fits[i].code, code) == 0) return 1;
    return 0;
}

/* Parses resp's body strictly and checks its shape: one object whose "error"
 * is a string (copied into code, cut to codecap - 1 bytes; its length is
 * returned) and whose "detail", when present, is a string. Every body the
 * closed store and api_error() give is an error body. */
static size_t check_body(const api_response *resp, char *code, size_t codecap) {
    CHECK(resp->body != NULL);
    CHECK(resp->body_len > 0);
    CHECK(resp->body[resp->body_len] == '\0');
    CHECK(strlen(resp->body) == resp->body_len);
    json_error_t jerr;
    json_t *root = json_loadb(resp->body, resp->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) fprintf(stderr, "fuzz_api: body is not JSON (%s): %s\n", jerr.text, resp->body);
    CHECK(root != NULL);
    CHECK(json_is_object(root));
    json_t *e = json_object_get(root, "error"), *d = json_object_get(root, "detail");
    CHECK(json_is_string(e));
    CHECK(d == NULL || json_is_string(d));
    size_t elen = json_string_length(e);
    snprintf(code, codecap, "%s", json_string_value(e));
    json_decref(root);
    return elen;
}

/* The invariants of one api_handle() answer; conn_present: a store was
 * given; auth: authentication was on. */
static void check_handle(const api_response *resp, int conn_present, int auth) {
    char code[64];
    int s = resp->status;
    /* 403 admin_disabled: POST /sales, with or without player auth, on a server that has
     * no admin secret (the harness never gives one) */
    int known = s == 400 || s == 404 || s == 405 || s == 413 || s == 503 || s == 422 ||
                s == 403 || ((s == 401) && auth) || (s == 500 && !conn_present);
    if (s == 403 && !auth) known = resp->body && strstr(resp->body, "\"admin_disabled\"");
    if (!known) fprintf(stderr, "fuzz_api: status %d: %s\n", s, resp->body ? resp->body : "-");
    CHECK(known);
    check_body(resp, code, sizeof code);
    if (!code_fits(s, code)) fprintf(stderr, "fuzz_api: status %d with %s\n", s, resp->body);
    CHECK(code_fits(s, code));
    CHECK((resp->allow != NULL) == (s == 405));
    CHECK((resp->retry_after_s > 0) == (s == 503));
    CHECK(resp->retry_after_s >= 0);
    CHECK((resp->auth_challenge != NULL) == (s == 401));
    CHECK(resp->replayed == 0); /* nothing is stored, so nothing is replayed */
    /* for logs and metrics: a static route name unless no route matched */
    CHECK((resp->route == NULL) == (strcmp(code, "not_found") == 0));
    if (resp->route) CHECK(api_route_name(api_route_index(resp->route)) == resp->route);
    CHECK(memchr(resp->player, '\0', sizeof resp->player) != NULL);
    CHECK(resp->player[0] == '\0' || market_id_valid(resp->player));
    CHECK(resp->realm[0] == '\0' || market_id_valid(resp->realm));
}

/* Whether two answers to the same request agree. Two 503s agree whatever
 * their reason: whether the closed store (store_unavailable) or a spent
 * wait budget (market_busy, when the machine is slow enough) answers first
 * is timing, not validation; a purchase is never tried after its budget. */
static int same_answer(const api_response *a, const api_response *b) {
    int both_503 = a->status == 503 && b->status == 503;
    return a->status == b->status &&
           (both_503 || (a->body_len == b->body_len &&
                         memcmp(a->body, b->body, a->body_len) == 0)) &&
           a->retry_after_s == b->retry_after_s &&
           (a->allow == NULL) == (b->allow == NULL) &&
           (a->allow == NULL || strcmp(a->allow, b->allow) == 0) &&
           (a->auth_challenge == NULL) == (b->auth_challenge == NULL) && a->route == b->route &&
           strcmp(a->player, b->player) == 0;
}

/* api_error() with arbitrary code and detail: always a valid body. */
static void check_error(int status, const char *code, const char *detail) {
    api_response r;
    api_error(status, code, detail, &r);
    int want = status < 100 || status > 599 ? 500 : status;
    CHECK(r.status == want);
    CHECK(r.allow == NULL && r.retry_after_s == 0 && r.auth_challenge == NULL);
    char got[16];
    size_t elen = check_body(&r, got, sizeof got);
    CHECK(elen == strlen(code ? code : "internal_error"));
    api_response_cleanup(&r);
    CHECK(r.body == NULL && r.body_len == 0);
    api_response_cleanup(&r); /* twice is fine */
}

/* ---- the entry point ---- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (!fuzz_lock) fuzz_setup(); /* a driver that skips LLVMFuzzerInitialize */
    unsigned flags = data[0];
    const char *method = fuzz_methods[flags & 7];
    unsigned store = (flags >> 3) & 3;
    market_conn *conn = store < 3 ? fuzz_conns[store] : NULL;
    int auth = (flags & 0x40) != 0;
    data++, size--;

    size_t plen = 0;
    while (plen < size && data[plen] != '\n' && data[plen] != '\0')
        plen++;
    int has_body = plen < size;
    const uint8_t *bdata = has_body ? data + plen + 1 : data + size;
    size_t blen = has_body ? size - plen - 1 : 0;

    /* Exact-size heap copies, so that ASan sees any read past either end. */
    char *path = malloc(plen + 1);
    CHECK(path != NULL);
    memcpy(path, data, plen);
    path[plen] = '\0';
    char *query_text = strchr(path, '?');
    if (query_text) *query_text++ = '\0';
    char *raw_query = query_text ? strdup(query_text) : NULL; /* kept whole for api_error */
    fuzz_query q;
    fuzz_query_split(query_text, &q);

    size_t body_len = blen;
    if (flags & 0x20) {
        size_t target = API_BODY_MAX - 1 + (blen % 3);
        if (body_len < target) body_len = target;
    }
    char *body = malloc(body_len ? body_len : 1);
    CHECK(body != NULL);
    if (blen) memcpy(body, bdata, blen);
    if (body_len > blen) memset(body + blen, ' ', body_len - blen);

    api_request req = {.method = method,
                       .path = path,
                       .body = has_body || body_len ? body : NULL,
                       .body_len = body_len,
                       .lookup = flags & 0x80 ? NULL : fuzz_lookup,
                       .lookup_ud = flags & 0x80 ? NULL : &q,
                       .auth = auth ? fuzz_auth : NULL};

    api_response r1, r2;
    api_handle(conn, &req, &r1);
    check_handle(&r1, conn != NULL, auth);

    /* Again, on the same connection (HEAD as GET): the same answer. */
    if (strcmp(method, "HEAD") == 0) req.method = "GET";
    api_handle(conn, &req, &r2);
    check_handle(&r2, conn != NULL, auth);
    if (!same_answer(&r1, &r2))
        fprintf(stderr, "fuzz_api: answers differ:\n  %d %s\n  %d %s\n", r1.status, r1.body,
                r2.status, r2.body);
    CHECK(same_answer(&r1, &r2));
    api_response_cleanup(&r1);
    api_response_cleanup(&r2);
    CHECK(r1.body == NULL && r2.body == NULL);

    /* The event-loop server's split: an order it returns is valid and
     * answers like the market would; anything else is api_handle()'s answer. */
    api_deferred d;
    api_response r3;
    int begun = api_handle_begin(conn, &req, &r3, &d);
    CHECK(!begun || api_route_deferrable(req.method, req.path)); /* what server/ counts */
    if (begun) {
        market_order *o = &d.order;
        CHECK(begun == 1 && r3.route && r3.body == NULL);
        /* a write: POST, or DELETE of a buy order */
        CHECK(strcmp(req.method, "POST") == 0 ||
              (strcmp(req.method, "DELETE") == 0 && o->type == MARKET_ORDER_CANCEL));
        CHECK(market_id_valid(d.realm) && o->realm == d.realm);
        CHECK(market_id_valid(d.player) && o->player == d.player);
        CHECK(!o->idem || market_idem_key_valid(o->idem->key));
        if (o->type == MARKET_ORDER_SALE_BUY) /* a buy from a flash sale */
            CHECK(market_id_valid(d.sale) && o->sale == d.sale && o->quantity >= 1 &&
                  o->quantity <= MARKET_SALE_STOCK_MAX);
        else if (o->type == MARKET_ORDER_AUCTION_BID) /* a bid names an auction, no item */
            CHECK(o->id >= 1 && o->price >= 1 && o->price <= MARKET_PRICE_MAX);
        else if (o->type == MARKET_ORDER_DIRECT) /* two players, two valid sides, not empty */
            CHECK(market_id_valid(d.to) && o->to == d.to && strcmp(d.player, d.to) != 0 &&
                  o->give == &d.give && o->get == &d.get && market_goods_valid(&d.give) &&
                  market_goods_valid(&d.get) &&
                  (d.give.n_items || d.give.n_units || d.give.funds || d.get.n_items ||
                   d.get.n_units || d.get.funds));
        else if (o->type == MARKET_ORDER_DIRECT_ACCEPT || o->type == MARKET_ORDER_DIRECT_CANCEL)
            CHECK(o->id >= 1);
        else
            CHECK(market_id_valid(d.item) && o->item == d.item);
        if (o->type == MARKET_ORDER_PURCHASE)
            CHECK(market_id_valid(d.seller) && o->seller == d.seller &&
                  strcmp(d.player, d.seller) != 0);
        if (o->type == MARKET_ORDER_BUY) /* without a seller: the most one unit may cost */
            CHECK(o->price >= 1 && o->price <= MARKET_PRICE_MAX && o->quantity >= 1);
        if (o->type == MARKET_ORDER_AUCTION) /* its terms, as the market checks them */
            CHECK(o->price >= 1 && o->duration_s >= 1 && o->duration_s <= MARKET_DURATION_MAX_S &&
                  (o->buyout == 0 || o->buyout >= o->price) && o->step >= 1);
        memset(&o->res, 0, sizeof o->res);
        o->rc = (flags & 1) ? MARKET_OK : MARKET_ERR_NOT_LISTED;
        o->res.purchase.price = 5;
        api_deferred_end(&d, &r3);
        /* a list is 201, but a list of units that all sold into buy orders (no listing
         * holds any: quantity 0) is 200; a buy order is 201 only when some of it rests; a new
         * auction is 201 */
        int ok = (o->type == MARKET_ORDER_LIST && (o->quantity == 0 || o->res.list.quantity > 0)) ||
                         o->type == MARKET_ORDER_AUCTION || o->type == MARKET_ORDER_DIRECT
                     ? 201
                     : 200;
        CHECK(r3.body != NULL && r3.status == ((flags & 1) ? ok : 404));
    } else {
        check_handle(&r3, conn != NULL, auth);
    }
    api_response_cleanup(&r3);

    /* api_error() over the same bytes: the path as code, the body as detail. */
    char *detail = malloc(blen + 1);
    CHECK(detail != NULL);
    if (blen) memcpy(detail, bdata, blen);
    detail[blen] = '\0';
    int status = (int)(flags * 3) - 100 + (int)(plen % 7); /* -100..671 */
    check_error(status, plen ? path : NULL, has_body ? detail : NULL);
    if (raw_query) check_error(status, raw_query, path);

    free(detail);
    free(raw_query);
    free(body);
    free(path);
    return 0;
}
