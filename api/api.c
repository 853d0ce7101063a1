/* api.c - the HTTP JSON API: routing, strict request validation, the status table.
 *
 * api_handle() takes one request as plain C (method, path, body, a lookup
 * hook for query arguments) and fills one response (status, malloc'd JSON
 * body, optional Retry-After and Allow). server/ owns the sockets; this file
 * owns every byte of JSON that crosses the wire.
 *
 * DESIGN
 * Routing is a table: path (exact, or a prefix followed by one id segment),
 * the one method it serves, and the Allow value for a 405. A path that matches
 * no row is 404 not_found; a matching path with another method is 405. HEAD is
 * served like GET on GET routes (libmicrohttpd drops the body of a HEAD reply),
 * so Allow says "GET, HEAD" there. A trailing slash is a different path (404),
 * and so is "/players/" with an empty id or an id followed by more segments.
 * A purchase-like write (POST /purchase, POST /sales/{id}/buy) also has a
 * begin step in its row: those routes, and only those, are deferred by the
 * event-loop server (api_route_deferrable(), api_handle_begin(),
 * api_purchase_submit()), which thus matches no path itself.
 *
 * Request bodies are strict: one JSON object (duplicate keys, trailing bytes,
 * NUL bytes refused), every field known, typed and in range, before anything
 * touches the store. Each route lists its fields in a small spec table; the
 * first problem found is reported as 400 bad_request with a detail sentence
 * that names the field. Unknown fields are refused (a typo such as "prize"
 * must not silently turn a conditional purchase into an unconditional one).
 *
 * Every market result maps to a status and an error code in api_status_table,
 * and nowhere else. Bodies are dumped with json_dumpb() into a buffer from
 * malloc() (see dump_body()), so the server releases them with free() whatever
 * allocator jansson was given. When memory runs out the response is
 * status 500 with a NULL body; the server then sends its static fallback.
 * One blur is jansson's: while parsing, 2.14 reports some failed allocations
 * as syntax errors ("invalid token"), so under memory pressure a good body
 * may be answered 400 instead of 500. Nothing leaks either way.
 */
#include "api/api.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/rand.h>

#include "api/api_impl.h"

#define API_ID_RULE "[A-Za-z0-9_-]{1,64}"
#define API_LIMIT_DEFAULT 50
#define API_LIMIT_MAX 1000
#define API_OFFSET_MAX 1000000000
#define API_FIELDS_MAX 8
#define API_PLAYER_LISTINGS 100 /* GET /players/{id} shows this many of the player's listings */

_Static_assert(API_LIMIT_MAX == MARKET_SEARCH_LIMIT_MAX, "a page's limit is the market's");
#define API_TIME_MAX INT64_C(253402300799999) /* Unix ms of 9999-12-31T23:59:59.999Z */

/* ---- the status table ---- */

/* How one market result is answered. */
typedef struct api_status {
    int rc;            /* a market code */
    int status;        /* HTTP status */
    const char *code;  /* the "error" member of the body */
    int retry_after_s; /* > 0: the client may retry after this many seconds */
} api_status;

static const api_status api_status_table[] = {
    {MARKET_ERR_NOT_LISTED, 404, "item_not_listed", 0},
    {MARKET_ERR_INSUFFICIENT_FUNDS, 402, "insufficient_funds", 0},
    {MARKET_ERR_PRICE_CHANGED, 409, "price_changed", 0},
    {MARKET_ERR_NO_PLAYER, 404, "player_not_found", 0},
    {MARKET_ERR_NOT_HELD, 404, "item_not_held", 0},
    {MARKET_ERR_OVERFLOW, 409, "funds_overflow", 0},
    {MARKET_ERR_BUSY, 503, "market_busy", 1},
    {MARKET_ERR_STORE, 503, "store_unavailable", 1},
    {MARKET_ERR_LEASE_LOST, 503, "lease_lost", 1},
    {MARKET_ERR_CONFLICT, 503, "conflict", 1},
    {MARKET_ERR_INVALID, 400, "bad_request", 0},
    {MARKET_ERR_DUPLICATE, 409, "duplicate", 0},
    {MARKET_ERR_NOMEM, 500, "internal_error", 0},
    {MARKET_ERR_IDEM_MISMATCH, 422, "idempotency_key_reused", 0},
    {MARKET_ERR_IN_PROGRESS, 409, "request_in_progress", 1},
    {MARKET_ERR_NOT_REPLICATED, 503, "not_replicated", 1},
    {MARKET_ERR_NO_TRADE, 404, "trade_not_found", 0},
    {MARKET_ERR_NOT_ENOUGH, 409, "not_enough_units", 0},
    {MARKET_ERR_NO_SALE, 404, "sale_not_found", 0},
    {MARKET_ERR_SALE_NOT_ACTIVE, 409, "sale_not_active", 0},
    {MARKET_ERR_SOLD_OUT, 409, "sold_out", 0},
    {MARKET_ERR_LIMIT_EXCEEDED, 409, "limit_exceeded", 0},
};

/* Every code the table does not list, and a success passed by mistake. */
static const api_status api_status_default = {0, 500, "internal_error", 0};

/* ---- private: strings ---- */

/* Returns the length of the well-formed UTF-8 sequence (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF) at p, or 0 when there is none. */
static size_t utf8_seq(const unsigned char *p, size_t left) {
    unsigned c = p[0];
    size_t n;
    unsigned min, cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2, min = 0x80, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3, min = 0x800, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    if (left < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

/* Returns a new JSON string holding s (NULL reads as ""), with every byte that
 * is not part of well-formed UTF-8 replaced by '?': text from the store or
 * from a truncated message is not trusted to be UTF-8, and json_string()
 * would refuse it. Returns NULL only on out-of-memory. */
json_t *api__text_new(const char *s) {
    if (!s) s = "";
    size_t len = strlen(s), i = 0, k;
    const unsigned char *u = (const unsigned char *)s;
    while (i < len && (k = utf8_seq(u + i, len - i)) > 0)
        i += k;
    if (i == len) return json_stringn(s, len);
    char *clean = malloc(len + 1);
    if (!clean) return NULL;
    memcpy(clean, s, i);
    while (i < len) {
        k = utf8_seq(u + i, len - i);
        if (k == 0) {
            clean[i++] = '?';
        } else {
            memcpy(clean + i, s + i, k);
            i += k;
        }
    }
    clean[len] = '\0';
    json_t *j = json_stringn(clean, len);
    free(clean);
    return j;
}

/* Formats a message into why (which may be NULL or zero-sized: then nothing is
 * written). The text is cut to fit. This function can't fail. */
void api__why(char *why, size_t whylen, const char *fmt, ...) {
    if (!why || whylen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    if (n < 0) why[0] = '\0';
}

/* Copies s into out for quoting in a message: at most API__QUOTE_MAX bytes,
 * cut on a UTF-8 boundary and marked "..." when shortened. outlen must be at
 * least 4. This function can't fail. */
void api__quote(char *out, size_t outlen, const char *s) {
    size_t len = strlen(s), cap = outlen - 1;
    if (cap > API__QUOTE_MAX) cap = API__QUOTE_MAX;
    if (len <= cap) {
        memcpy(out, s, len + 1);
        return;
    }
    size_t n = cap - 3;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--; /* not inside a sequence */
    memcpy(out, s, n);
    memcpy(out + n, "...", 4);
}

/* Names a JSON value's type for a message. */
static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* ---- JSON input ---- */

/* Parses buf[0..len) strictly as one JSON object: no NUL byte, no duplicate
 * key, nothing after the value. what names the text in messages ("request
 * body"). Returns a new reference (caller json_decref()s it) with *rc =
 * MARKET_OK, or NULL with *rc = MARKET_ERR_INVALID and a sentence in why, or
 * NULL with *rc = MARKET_ERR_NOMEM on out-of-memory. */
json_t *api__load(const char *buf, size_t len, const char *what, int *rc, char *why,
                  size_t whylen) {
    *rc = MARKET_ERR_INVALID;
    if (len == 0 || !buf) {
        api__why(why, whylen, "%s is empty; expected a JSON object", what);
        return NULL;
    }
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        api__why(why, whylen, "%s contains a NUL byte at offset %zu", what, (size_t)(nul - buf));
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root) {
        /* jansson 2.14 reports some failed allocations as syntax errors; those
         * with no text at all are taken for what they are. */
        enum json_error_code code = json_error_code(&jerr);
        if (jerr.text[0] == '\0') code = json_error_out_of_memory;
        switch (code) {
        case json_error_out_of_memory:
            *rc = MARKET_ERR_NOMEM;
            api__why(why, whylen, "out of memory");
            break;
        case json_error_duplicate_key:
            api__why(why, whylen, "%s has a duplicate key (line %d, column %d): %s", what,
                     jerr.line, jerr.column, jerr.text);
            break;
        default:
            api__why(why, whylen, "%s is not valid JSON (line %d, column %d): %s", what, jerr.line,
                     jerr.column, jerr.text);
            break;
        }
        return NULL;
    }
    if (!json_is_object(root)) {
        api__why(why, whylen, "%s must be a JSON object, not %s", what, type_name(root));
        json_decref(root);
        return NULL;
    }
    *rc = MARKET_OK;
    return root;
}

/* Returns the first key of obj (in document order) that is not one of
 * known[0..n), borrowed from obj; or NULL when every key is known. This
 * function can't fail. */
const char *api__unknown_key(json_t *obj, const char *const *known, size_t n) {
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value) {
        size_t i = 0;
        while (i < n && strcmp(key, known[i]) != 0)
            i++;
        if (i == n) return key;
    }
    return NULL;
}

/* ---- JSON output ---- */

/* Returns the compact text of body in a new malloc'd, NUL-terminated buffer
 * (caller frees with free()) and its length in *len; NULL on out-of-memory.
 * Not json_dumps(): jansson 2.14 ignores a failed append while dumping an
 * object key, so under memory pressure json_dumps() can return a body with
 * a key missing. json_dumpb() into a buffer of the right size cannot fail
 * that way: writing to a buffer never allocates. */
static char *dump_body(const json_t *body, size_t *len) {
    size_t n = json_dumpb(body, NULL, 0, JSON_COMPACT);
    if (n == 0) return NULL;
    char *text = malloc(n + 1);
    if (!text) return NULL;
    if (json_dumpb(body, text, n, JSON_COMPACT) != n) {
        free(text);
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}

/* Fills resp with status and the compact text of body, and releases body
 * (stolen; NULL stands for a failed allocation). On out-of-memory resp
 * becomes status 500 with a NULL body and no Retry-After or Allow. */
void api__reply(api_response *resp, int status, json_t *body) {
    size_t len = 0;
    char *text = body ? dump_body(body, &len) : NULL;
    json_decref(body);
    resp->status = status;
    resp->body = text;
    resp->body_len = len;
    if (!text) {
        resp->status = 500;
        resp->retry_after_s = 0;
        resp->allow = NULL;
    }
}

/* Returns a new {"error": code[, "detail": detail]} object, or NULL on
 * out-of-memory. */
static json_t *error_body(const char *code, const char *detail) {
    json_t *o = json_object();
    if (!o) return NULL;
    if (json_object_set_new(o, "error", api__text_new(code ? code : "internal_error")) < 0 ||
        (detail && json_object_set_new(o, "detail", api__text_new(detail)) < 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Answers with an error body; retry and allow fill the headers (0 / NULL: none). */
static void error_reply(api_response *resp, int status, const char *code, const char *detail,
                        int retry_after_s, const char *allow) {
    resp->retry_after_s = retry_after_s;
    resp->allow = allow;
    snprintf(resp->error, sizeof resp->error, "%s", code ? code : "internal_error");
    api__reply(resp, status, error_body(code, detail));
}

/* Fills resp with status and {"error":code,"detail":detail}. */
void api__error_reply(api_response *resp, int status, const char *code, const char *detail) {
    error_reply(resp, status, code, detail, 0, NULL);
}

static void bad_request(api_response *resp, const char *detail) {
    error_reply(resp, 400, "bad_request", detail, 0, NULL);
}

static void reply_market_member(int rc, const char *member, int64_t v, api_response *resp);

/* Fills resp with the answer to market code rc (negative; anything that is
 * not in the table, success included, is a 500): the table's status, error
 * code, Retry-After, and the market's description as "detail". n goes into
 * the body of the refusals that say what they are about: a price_changed
 * ("price", the current price), a not_enough_units ("available", the units
 * there are), an item_not_held of units ("held", when n > 0). On
 * out-of-memory: status 500 with a NULL body. */
void api__reply_market(int rc, int64_t n, api_response *resp) {
    const char *what = rc == MARKET_ERR_PRICE_CHANGED        ? "price"
                       : rc == MARKET_ERR_NOT_ENOUGH         ? "available"
                       : rc == MARKET_ERR_NOT_HELD && n > 0 ? "held"
                                                              : NULL;
    reply_market_member(rc, what, n, resp);
}

/* api__reply_market(), with member (NULL: none) set to v in the body. */
static void reply_market_member(int rc, const char *member, int64_t v, api_response *resp) {
    const api_status *st = &api_status_default;
    for (size_t i = 0; i < sizeof api_status_table / sizeof api_status_table[0]; i++)
        if (api_status_table[i].rc == rc) st = &api_status_table[i];
    api_response keep = *resp; /* what logs need survives the reset */
    *resp = (api_response){.route = keep.route};
    memcpy(resp->player, keep.player, sizeof resp->player);
    memcpy(resp->realm, keep.realm, sizeof resp->realm);
    json_t *body = error_body(st->code, market_strerror(rc));
    if (body && member && json_object_set_new(body, member, json_integer((json_int_t)v)) < 0) {
        json_decref(body);
        body = NULL;
    }
    resp->retry_after_s = st->retry_after_s;
    resp->market_rc = rc;
    snprintf(resp->error, sizeof resp->error, "%s", st->code);
    api__reply(resp, st->status, body);
}

/* ---- request bodies ---- */

enum field_kind {
    FIELD_ID,       /* a string matching API_ID_RULE */
    FIELD_PRICE,    /* an integer in 1..MARKET_PRICE_MAX */
    FIELD_QUANTITY, /* an integer in 1..MARKET_QUANTITY_MAX */
    FIELD_UNITS,    /* an integer in 1..MARKET_SALE_STOCK_MAX */
    FIELD_TIME,     /* an integer in 0..API_TIME_MAX: Unix ms */
};

typedef struct field_spec {
    const char *name;
    enum field_kind kind;
    int required;
} field_spec;

typedef struct field_value {
    int present;
    const char *id; /* FIELD_ID: borrowed from the parsed body */
    int64_t price;  /* FIELD_PRICE, FIELD_QUANTITY, FIELD_UNITS, FIELD_TIME */
} field_value;

/* Loads req's body as a JSON object holding only the fields of spec[0..n),
 * each well-typed, with the required ones present, into vals[0..n). Returns
 * the parsed body (a new reference the caller json_decref()s; vals borrow
 * from it), or NULL with resp filled (400, 413 or 500). */
static json_t *body_parse(const api_request *req, const field_spec *spec, size_t n,
                          field_value *vals, api_response *resp) {
    char why[API__WHY_MAX], q[API__QUOTE_MAX + 4];
    int rc;
    if (req->body_len > API_BODY_MAX) {
        api__why(why, sizeof why, "request body exceeds %d bytes", API_BODY_MAX);
        error_reply(resp, 413, "payload_too_large", why, 0, NULL);
        return NULL;
    }
    json_t *root = api__load(req->body, req->body_len, "request body", &rc, why, sizeof why);
    if (!root) {
        if (rc == MARKET_ERR_NOMEM)
            error_reply(resp, 500, "internal_error", NULL, 0, NULL);
        else
            bad_request(resp, why);
        return NULL;
    }
    const char *names[API_FIELDS_MAX];
    for (size_t i = 0; i < n; i++)
        names[i] = spec[i].name;
    const char *unknown = api__unknown_key(root, names, n);
    if (unknown) {
        api__quote(q, sizeof q, unknown);
        api__why(why, sizeof why, "unknown field '%s'", q);
        goto bad;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_object_get(root, spec[i].name);
        vals[i] = (field_value){0};
        if (!v) {
            if (!spec[i].required) continue;
            api__why(why, sizeof why, "missing field '%s'", spec[i].name);
            goto bad;
        }
        vals[i].present = 1;
        if (spec[i].kind == FIELD_ID) {
            if (!json_is_string(v)) {
                api__why(why, sizeof why, "field '%s' must be a string, not %s", spec[i].name,
                         type_name(v));
                goto bad;
            }
            vals[i].id = json_string_value(v);
            if (!market_id_valid(vals[i].id)) {
                api__why(why, sizeof why, "field '%s' must match %s", spec[i].name, API_ID_RULE);
                goto bad;
            }
        } else {
            int64_t lo = spec[i].kind == FIELD_TIME ? 0 : 1;
            int64_t hi = spec[i].kind == FIELD_PRICE      ? MARKET_PRICE_MAX
                         : spec[i].kind == FIELD_QUANTITY ? MARKET_QUANTITY_MAX
                         : spec[i].kind == FIELD_UNITS    ? MARKET_SALE_STOCK_MAX
                                                          : API_TIME_MAX;
            json_int_t p = json_is_integer(v) ? json_integer_value(v) : lo - 1;
            if (p < lo || p > hi) {
                api__why(why, sizeof why, "field '%s' must be an integer in %" PRId64 "..%" PRId64
                         "%s", spec[i].name, lo, hi,
                         spec[i].kind == FIELD_TIME ? " (Unix time in ms)" : "");
                goto bad;
            }
            vals[i].price = (int64_t)p;
        }
    }
    return root;
bad:
    json_decref(root);
    bad_request(resp, why);
    return NULL;
}

/* A NULL connection is a server bug, not the client's: answered 500. */
static int conn_missing(const market_conn *conn, api_response *resp) {
    if (conn) return 0;
    error_reply(resp, 500, "internal_error", "no store connection", 0, NULL);
    return 1;
}

/* ---- handlers ---- */

/* A route's handler: realm is the request's (MARKET_REALM_DEFAULT without a
 * /realms/{realm} prefix), arg its id segment (prefix routes) or NULL. */
typedef void (*api_handler)(market_conn *conn, const api_request *req, const char *realm,
                            const char *arg, api_response *resp);

/* A deferred route's first half (api_handle_begin()): like its handler, but a
 * request that passes validation is written into p and its API_BEGIN_* kind
 * returned instead of being run; 0 when resp holds the whole answer. */
typedef int (*api_beginner)(market_conn *conn, const api_request *req, const char *realm,
                            const char *arg, api_response *resp, api_purchase *p);

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
    static const field_spec spec[] = {
        {"buyer", FIELD_ID, 1},
        {"seller", FIELD_ID, 0},
        {"item", FIELD_ID, 1},
        {"price", FIELD_PRICE, 0},
        {"quantity", FIELD_QUANTITY, 0},
        {"max_price", FIELD_PRICE, 0},
    };
    field_value v[6];
    json_t *root = body_parse(req, spec, 6, v, resp);
    if (!root) return 0;
    snprintf(resp->player, sizeof resp->player, "%s", v[0].id);
    int ready = 0;
    if (!v[1].present && !v[5].present) {
        bad_request(resp, "missing field 'seller' (or 'max_price', to buy the cheapest units "
                          "of any seller)");
    } else if (v[1].present && v[5].present) {
        bad_request(resp, "field 'max_price' is for a purchase without 'seller'");
    } else if (!v[1].present && v[3].present) {
        bad_request(resp, "field 'price' needs a 'seller'; without one, give 'max_price'");
    } else if (v[1].present && strcmp(v[0].id, v[1].id) == 0) {
        bad_request(resp, "fields 'buyer' and 'seller' must differ");
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
    int rc = json_object_set_new(o, "fills", fills); /* steals fills, even on failure */
    fills = NULL;
    if (rc < 0) goto fail;
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
static void handle_purchase(market_conn *conn, const api_request *req, const char *realm,
                            const char *arg, api_response *resp) {
    (void)arg;
    api_purchase p;
    if (!purchase_prepare(req, realm, resp, &p) || conn_missing(conn, resp)) return;
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
static int begin_purchase(market_conn *conn, const api_request *req, const char *realm,
                          const char *arg, api_response *resp, api_purchase *p) {
    (void)arg;
    if (!purchase_prepare(req, realm, resp, p)) return 0;
    if (p->max_price == 0) return API_BEGIN_PURCHASE;
    if (!conn_missing(conn, resp)) buy_cheapest(conn, p, resp); /* not queued: answered here */
    return 0;
}

/* POST /list {"seller","item","price"[,"quantity"]} */
static void handle_list(market_conn *conn, const api_request *req, const char *realm,
                        const char *arg, api_response *resp) {
    static const field_spec spec[] = {
        {"seller", FIELD_ID, 1},
        {"item", FIELD_ID, 1},
        {"price", FIELD_PRICE, 1},
        {"quantity", FIELD_QUANTITY, 0},
    };
    field_value v[4];
    (void)arg;
    json_t *root = body_parse(req, spec, 4, v, resp);
    if (!root) return;
    snprintf(resp->player, sizeof resp->player, "%s", v[0].id);
    if (api__authorized(req, realm, v[0].id, resp) && !conn_missing(conn, resp)) {
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
static void handle_unlist(market_conn *conn, const api_request *req, const char *realm,
                          const char *arg, api_response *resp) {
    static const field_spec spec[] = {
        {"seller", FIELD_ID, 1},
        {"item", FIELD_ID, 1},
    };
    field_value v[2];
    (void)arg;
    json_t *root = body_parse(req, spec, 2, v, resp);
    if (!root) return;
    snprintf(resp->player, sizeof resp->player, "%s", v[0].id);
    if (api__authorized(req, realm, v[0].id, resp) && !conn_missing(conn, resp)) {
        int64_t price = 0, units = 0;
        int rc = market_unlist_units(conn, realm, v[0].id, v[1].id, &price, &units);
        if (rc != MARKET_OK)
            api__reply_market(rc, 0, resp);
        else
            api__reply(resp, 200,
                       json_pack("{s:s, s:s, s:s, s:I, s:I}", "status", "unlisted", "seller",
                                 v[0].id, "item", v[1].id, "price", (json_int_t)price,
                                 "quantity", (json_int_t)units));
    }
    json_decref(root);
}

/* Returns a new {"id","name","funds","inventory":[...],"stacks":{item:count}}
 * object for p, or NULL on out-of-memory. */
static json_t *player_body(const market_player *p) {
    json_t *o = json_object(), *inv = json_array(), *stacks = json_object();
    if (!o || !inv || !stacks) goto fail;
    for (size_t i = 0; i < p->n_stacks; i++)
        if (json_object_set_new(stacks, p->stacks[i].item,
                                json_integer((json_int_t)p->stacks[i].count)) < 0)
            goto fail;
    for (size_t i = 0; i < p->n_inventory; i++)
        if (json_array_append_new(inv, api__text_new(p->inventory[i])) < 0) goto fail;
    if (json_object_set_new(o, "id", api__text_new(p->id)) < 0 ||
        json_object_set_new(o, "name", api__text_new(p->name)) < 0 ||
        json_object_set_new(o, "funds", json_integer((json_int_t)p->funds)) < 0)
        goto fail;
    int rc = json_object_set_new(o, "inventory", inv); /* steals inv, even on failure */
    inv = NULL;
    if (rc < 0) goto fail;
    rc = json_object_set_new(o, "stacks", stacks); /* steals stacks, even on failure */
    stacks = NULL;
    if (rc < 0) goto fail;
    return o;
fail:
    json_decref(stacks);
    json_decref(inv);
    json_decref(o);
    return NULL;
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
static void handle_sale_create(market_conn *conn, const api_request *req, const char *realm,
                               const char *arg, api_response *resp) {
    static const field_spec spec[] = {
        {"id", FIELD_ID, 0},       {"item", FIELD_ID, 1},    {"stock", FIELD_UNITS, 1},
        {"price", FIELD_PRICE, 1}, {"limit", FIELD_UNITS, 1}, {"start", FIELD_TIME, 1},
        {"end", FIELD_TIME, 1},    {"house", FIELD_ID, 0},
    };
    field_value v[8];
    (void)arg;
    json_t *root = body_parse(req, spec, 8, v, resp);
    if (!root) return;
    market_sale s = {.initial = v[2].price, .price = v[3].price, .limit = v[4].price,
                     .start_ms = v[5].price, .end_ms = v[6].price};
    snprintf(s.item, sizeof s.item, "%s", v[1].id);
    snprintf(s.house, sizeof s.house, "%s", v[7].present ? v[7].id : MARKET_SALE_HOUSE);
    if (v[0].present) snprintf(s.id, sizeof s.id, "%s", v[0].id);
    json_decref(root);
    if (s.limit > s.initial) {
        bad_request(resp, "field 'limit' must not exceed field 'stock'");
        return;
    }
    if (s.start_ms >= s.end_ms) {
        bad_request(resp, "field 'start' must be before field 'end'");
        return;
    }
    if (!api__admin(req, resp) || conn_missing(conn, resp)) return;
    if (!s.id[0] && sale_id_new(s.id) < 0) {
        error_reply(resp, 500, "internal_error", "cannot draw a sale id", 0, NULL);
        return;
    }
    int rc = market_sale_create(conn, realm, &s);
    if (rc == MARKET_ERR_DUPLICATE) {
        error_reply(resp, 409, "sale_exists", "a sale with this id exists", 0, NULL);
        resp->market_rc = rc;
        return;
    }
    if (rc == MARKET_ERR_NO_PLAYER) {
        error_reply(resp, 404, "player_not_found", "the house is not a player of the realm", 0,
                    NULL);
        resp->market_rc = rc;
        return;
    }
    if (rc != MARKET_OK) {
        api__reply_market(rc, 0, resp);
        return;
    }
    market_sale got; /* the store's view, with its clock for "active" */
    rc = market_sale_get(conn, realm, s.id, &got);
    if (rc != MARKET_OK)
        api__reply_market(rc, 0, resp);
    else
        api__reply(resp, 201, sale_body(&got));
}

/* GET /sales/{id}: public. */
static void handle_sale_get(market_conn *conn, const api_request *req, const char *realm,
                            const char *id, api_response *resp) {
    (void)req;
    if (!market_id_valid(id)) {
        bad_request(resp, "sale id must match " API_ID_RULE);
        return;
    }
    if (conn_missing(conn, resp)) return;
    market_sale s;
    int rc = market_sale_get(conn, realm, id, &s);
    if (rc != MARKET_OK)
        api__reply_market(rc, 0, resp);
    else
        api__reply(resp, 200, sale_body(&s));
}

/* The answer to a buy of sale whose market outcome is rc and res. */
static void sale_buy_reply(const char *sale, const char *buyer, int rc,
                           const market_sale_result *res, api_response *resp) {
    if (rc != MARKET_OK) {
        if (rc == MARKET_ERR_SOLD_OUT)
            reply_market_member(rc, "stock_left", res->left, resp);
        else if (rc == MARKET_ERR_LIMIT_EXCEEDED)
            reply_market_member(rc, "may_buy", res->may_buy, resp);
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
    static const field_spec spec[] = {
        {"buyer", FIELD_ID, 1},
        {"quantity", FIELD_UNITS, 1},
    };
    if (!market_id_valid(id)) {
        bad_request(resp, "sale id must match " API_ID_RULE);
        return 0;
    }
    field_value v[2];
    json_t *root = body_parse(req, spec, 2, v, resp);
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
static void handle_sale_buy(market_conn *conn, const api_request *req, const char *realm,
                            const char *id, api_response *resp) {
    api_purchase p;
    if (!sale_buy_prepare(req, realm, id, resp, &p) || conn_missing(conn, resp)) return;
    market_sale_result res = {0};
    int rc = market_sale_buy(conn, p.realm, p.sale, p.buyer, p.sale_op.quantity, p.sale_op.idem,
                             &res);
    sale_buy_reply(p.sale, p.buyer, rc, &res, resp);
}

/* POST /sales/{id}/buy, begun (api_handle_begin()): validated into p, and
 * API_BEGIN_SALE_BUY returned for the sale's worker; 0 when resp holds the
 * answer (an error). */
static int begin_sale_buy(market_conn *conn, const api_request *req, const char *realm,
                          const char *id, api_response *resp, api_purchase *p) {
    (void)conn;
    return sale_buy_prepare(req, realm, id, resp, p) ? API_BEGIN_SALE_BUY : 0;
}

/* Reads query argument name as a decimal integer in lo..hi (digits only, no
 * sign); def when it is absent. Returns 0, or -1 when it is malformed or out
 * of range. */
static int query_size(const api_request *req, const char *name, size_t def, size_t lo, size_t hi,
                      size_t *out) {
    const char *s = req->lookup ? req->lookup(req->lookup_ud, API_ARG_QUERY, name) : NULL;
    if (!s) {
        *out = def;
        return 0;
    }
    if (!*s) return -1;
    size_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (size_t)(*s - '0');
        if (v > hi) return -1; /* also keeps v far from overflowing */
    }
    if (v < lo) return -1;
    *out = v;
    return 0;
}

/* Returns a new array of {"item","seller","price"} objects for l[0..n), or NULL on
 * out-of-memory. */
static json_t *listings_array(const market_listing *l, size_t n) {
    json_t *arr = json_array();
    if (!arr) return NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_object();
        if (!e || json_object_set_new(e, "item", api__text_new(l[i].item)) < 0 ||
            json_object_set_new(e, "seller", api__text_new(l[i].seller)) < 0 ||
            json_object_set_new(e, "price", json_integer((json_int_t)l[i].price)) < 0 ||
            /* units of a stackable good: how many; a unique item has no quantity */
            (l[i].stack &&
             json_object_set_new(e, "quantity", json_integer((json_int_t)l[i].quantity)) < 0)) {
            json_decref(e);
            goto fail;
        }
        if (json_array_append_new(arr, e) < 0) goto fail; /* e is released even then */
    }
    return arr;
fail:
    json_decref(arr);
    return NULL;
}

/* Returns a new page of listings, {["id",]"total"[,"offset"],"limit","listings":[...],
 * "next_cursor"}: "id" only when id is not NULL, "offset" only when offset >= 0,
 * next_cursor null when cursor is "". NULL on out-of-memory. */
static json_t *page_body(const char *id, const market_listing *l, size_t n, size_t total,
                         long long offset, size_t limit, const char *cursor) {
    json_t *o = json_object(), *arr = listings_array(l, n);
    if (!o || !arr) goto fail;
    if (total > (size_t)INT64_MAX) total = (size_t)INT64_MAX;
    if ((id && json_object_set_new(o, "id", api__text_new(id)) < 0) ||
        json_object_set_new(o, "total", json_integer((json_int_t)total)) < 0 ||
        (offset >= 0 && json_object_set_new(o, "offset", json_integer((json_int_t)offset)) < 0) ||
        json_object_set_new(o, "limit", json_integer((json_int_t)limit)) < 0)
        goto fail;
    int rc = json_object_set_new(o, "listings", arr); /* steals arr, even on failure */
    arr = NULL;
    if (rc < 0 ||
        json_object_set_new(o, "next_cursor", cursor[0] ? api__text_new(cursor) : json_null()) < 0)
        goto fail;
    return o;
fail:
    json_decref(arr);
    json_decref(o);
    return NULL;
}

/* Returns query argument name, borrowed from req, or NULL when absent. */
static const char *query_arg(const api_request *req, const char *name) {
    return req->lookup ? req->lookup(req->lookup_ud, API_ARG_QUERY, name) : NULL;
}

/* Answers 400: query parameter name and what is wrong with it (see market_search_check). */
static void bad_query(api_response *resp, const char *name, const char *what) {
    char why[API__WHY_MAX];
    api__why(why, sizeof why, "query parameter '%s' %s", name, what);
    bad_request(resp, why);
}

/* Reads the query arguments of a search into q: limit (1..API_LIMIT_MAX, default
 * API_LIMIT_DEFAULT) and cursor, and with filters also item, seller, min_price,
 * max_price (1..MARKET_PRICE_MAX) and sort (price or -price); the strings are borrowed
 * from req. Returns 1, or 0 with resp holding the 400 that names the first bad one. */
static int search_query(const api_request *req, int filters, market_search_query *q,
                        api_response *resp) {
    static const char *const prices[2] = {"min_price", "max_price"};
    *q = (market_search_query){0};
    if (query_size(req, "limit", API_LIMIT_DEFAULT, 1, API_LIMIT_MAX, &q->limit) < 0) {
        bad_query(resp, "limit", "must be an integer in 1..1000");
        return 0;
    }
    for (int i = 0; filters && i < 2; i++) {
        const char *name = i ? "seller" : "item", *v = query_arg(req, name);
        if (v && !market_id_valid(v)) {
            bad_query(resp, name, "must match " API_ID_RULE);
            return 0;
        }
        *(i ? &q->seller : &q->item) = v;
    }
    for (int i = 0; filters && i < 2; i++) {
        size_t v = 0;
        if (query_size(req, prices[i], 0, 1, (size_t)MARKET_PRICE_MAX, &v) < 0) {
            bad_query(resp, prices[i], "must be an integer in 1..1000000000000");
            return 0;
        }
        *(i ? &q->max_price : &q->min_price) = (int64_t)v;
    }
    const char *sort = filters ? query_arg(req, "sort") : NULL;
    if (sort && strcmp(sort, "price") != 0 && strcmp(sort, "-price") != 0) {
        bad_query(resp, "sort", "must be 'price' or '-price'");
        return 0;
    }
    q->desc = sort && sort[0] == '-';
    q->cursor = query_arg(req, "cursor");
    const char *field, *what;
    if (q->cursor && !q->cursor[0]) {
        bad_query(resp, "cursor", "must not be empty (leave it out for the first page)");
        return 0;
    }
    if (market_search_check(q, &field, &what) < 0) {
        bad_query(resp, field, what);
        return 0;
    }
    return 1;
}

/* GET /market: a search (item, seller, min_price, max_price, sort, limit, cursor), or
 * without any of item, seller, prices, sort and cursor the whole market by rank (limit,
 * offset), as before searches. */
static void handle_market(market_conn *conn, const api_request *req, const char *realm,
                          const char *arg, api_response *resp) {
    static const char *const searching[] = {"item", "seller", "min_price", "max_price", "sort"};
    size_t offset = 0;
    char why[API__WHY_MAX], cursor[MARKET_CURSOR_MAX + 1] = "";
    (void)arg;
    market_search_query q;
    if (!search_query(req, 1, &q, resp)) return;
    const char *off = query_arg(req, "offset");
    if (query_size(req, "offset", 0, 0, API_OFFSET_MAX, &offset) < 0) {
        api__why(why, sizeof why, "query parameter 'offset' must be an integer in 0..%d",
                 API_OFFSET_MAX);
        bad_request(resp, why);
        return;
    }
    int search = q.cursor != NULL;
    for (size_t i = 0; i < sizeof searching / sizeof *searching; i++)
        search |= query_arg(req, searching[i]) != NULL;
    if (off && q.cursor) {
        bad_request(resp, "query parameters 'offset' and 'cursor' cannot be combined: page "
                          "with 'cursor' alone");
        return;
    }
    if (off && search) {
        bad_request(resp, "query parameter 'offset' cannot be combined with 'item', 'seller', "
                          "'min_price', 'max_price' or 'sort': page with 'cursor'");
        return;
    }
    if (conn_missing(conn, resp)) return;
    if (search) {
        market_search_result r;
        int rc = market_search(conn, realm, &q, &r);
        if (rc != MARKET_OK)
            api__reply_market(rc, 0, resp);
        else
            api__reply(resp, 200,
                       page_body(NULL, r.listings, r.n, r.total, -1, q.limit, r.next_cursor));
        market_search_result_cleanup(&r);
        return;
    }
    market_listing *l = NULL;
    size_t n = 0, total = 0;
    int rc = market_listings(conn, realm, offset, q.limit, &l, &n, &total);
    if (rc == MARKET_OK && n && offset + n < total) /* the same order: go on with a cursor */
        market_cursor_make(&l[n - 1], cursor);
    if (rc != MARKET_OK)
        api__reply_market(rc, 0, resp);
    else
        api__reply(resp, 200, page_body(NULL, l, n, total, (long long)offset, q.limit, cursor));
    free(l);
}

/* Adds "listings" (the first page of a search of the player's listings) and
 * "listings_total" to o (stolen: released on failure). Returns o, or NULL on
 * out-of-memory. */
static json_t *with_listings(json_t *o, const market_search_result *r) {
    if (!o) return NULL;
    json_t *arr = listings_array(r->listings, r->n);
    size_t total = r->total > (size_t)INT64_MAX ? (size_t)INT64_MAX : r->total;
    if (!arr || json_object_set_new(o, "listings", arr) < 0 || /* steals arr, even then */
        json_object_set_new(o, "listings_total", json_integer((json_int_t)total)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* GET /players/{id}: the player, and what it lists (its first API_PLAYER_LISTINGS
 * listings, cheapest first, and how many it lists). */
static void handle_player(market_conn *conn, const api_request *req, const char *realm,
                          const char *id, api_response *resp) {
    (void)req;
    if (!market_id_valid(id)) {
        bad_request(resp, "player id must match " API_ID_RULE);
        return;
    }
    snprintf(resp->player, sizeof resp->player, "%s", id);
    if (conn_missing(conn, resp)) return;
    market_player *p = NULL;
    market_search_result r = {0};
    market_search_query q = {.seller = id, .limit = API_PLAYER_LISTINGS};
    int rc = market_player_get(conn, realm, id, &p);
    if (rc == MARKET_OK) rc = market_search(conn, realm, &q, &r);
    if (rc != MARKET_OK)
        api__reply_market(rc, 0, resp);
    else
        api__reply(resp, 200, with_listings(player_body(p), &r));
    market_search_result_cleanup(&r);
    market_player_free(p);
}

/* GET /players/{id}/listings?limit=&cursor=: the player's listings, cheapest first, a page
 * at a time; 404 player_not_found for a player that does not exist. */
static void handle_player_listings(market_conn *conn, const api_request *req, const char *realm,
                                   const char *id, api_response *resp) {
    if (!market_id_valid(id)) {
        bad_request(resp, "player id must match " API_ID_RULE);
        return;
    }
    snprintf(resp->player, sizeof resp->player, "%s", id);
    market_search_query q;
    if (!search_query(req, 0, &q, resp)) return;
    q.seller = id;
    const char *field, *what;
    if (market_search_check(&q, &field, &what) < 0) { /* a cursor of another player's */
        bad_query(resp, field, what);
        return;
    }
    if (conn_missing(conn, resp)) return;
    market_search_result r;
    int rc = market_search(conn, realm, &q, &r);
    if (rc == MARKET_OK && !r.seller_exists) rc = MARKET_ERR_NO_PLAYER;
    if (rc != MARKET_OK)
        api__reply_market(rc, 0, resp);
    else
        api__reply(resp, 200,
                   page_body(id, r.listings, r.n, r.total, -1, q.limit, r.next_cursor));
    market_search_result_cleanup(&r);
}

/* ---- trades ---- */

/* Returns a new {"trade_id","buyer","seller","item","quantity","price",
 * "total","fence","time_ms"} object for t, or NULL on out-of-memory. */
static json_t *trade_body(const market_trade *t) {
    return json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "trade_id", t->id, "buyer",
                     t->buyer, "seller", t->seller, "item", t->item, "quantity",
                     (json_int_t)t->quantity, "price", (json_int_t)t->price, "total",
                     (json_int_t)t->total, "fence",
                     (json_int_t)(t->fence > INT64_MAX ? INT64_MAX : t->fence), "time_ms",
                     (json_int_t)t->time_ms);
}

/* Returns trade t as GET /trades/{id} answers it, compact JSON in a new
 * malloc'd buffer (caller frees) of *len bytes, or NULL on out-of-memory. */
char *api_trade_text(const market_trade *t, size_t *len) {
    json_t *o = trade_body(t);
    char *text = o ? dump_body(o, len) : NULL;
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
    char *text = o ? dump_body(o, len) : NULL;
    json_decref(o);
    return text;
}

/* Returns a new object {name: id, "trades": [...] [, "next_cursor": next]}
 * (next NULL: no such member; "": null), or NULL on out-of-memory. */
static json_t *trades_body(const char *name, const char *id, const market_trade *t, size_t n,
                           const char *next) {
    json_t *o = json_object(), *arr = json_array();
    if (!o || !arr) goto fail;
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(arr, trade_body(&t[i])) < 0) goto fail; /* NULL fails too */
    if (json_object_set_new(o, name, api__text_new(id)) < 0) goto fail;
    int rc = json_object_set_new(o, "trades", arr); /* steals arr, even on failure */
    arr = NULL;
    if (rc < 0) goto fail;
    if (next && json_object_set_new(o, "next_cursor", *next ? json_string(next) : json_null()) < 0)
        goto fail;
    return o;
fail:
    json_decref(arr);
    json_decref(o);
    return NULL;
}

/* Reads query argument "limit" (1..MARKET_TRADES_PAGE_MAX, default
 * API_LIMIT_DEFAULT) into *limit. Returns 0, or -1 with resp holding the 400. */
static int trades_limit(const api_request *req, size_t *limit, api_response *resp) {
    if (query_size(req, "limit", API_LIMIT_DEFAULT, 1, MARKET_TRADES_PAGE_MAX, limit) == 0)
        return 0;
    char why[API__WHY_MAX];
    api__why(why, sizeof why, "query parameter 'limit' must be an integer in 1..%d",
             MARKET_TRADES_PAGE_MAX);
    bad_request(resp, why);
    return -1;
}

/* GET /trades/{id} */
static void handle_trade(market_conn *conn, const api_request *req, const char *realm,
                         const char *id, api_response *resp) {
    (void)req;
    if (!market_trade_id_valid(id)) {
        bad_request(resp, "trade id must be '<ms>-<seq>', as a purchase's trade_id");
        return;
    }
    if (conn_missing(conn, resp)) return;
    market_trade t;
    int rc = market_trade_get(conn, realm, id, &t);
    if (rc != MARKET_OK)
        api__reply_market(rc, 0, resp);
    else
        api__reply(resp, 200, trade_body(&t));
}

/* GET /players/{id}/trades?limit=&cursor= : the player's own, with their token */
static void handle_player_trades(market_conn *conn, const api_request *req, const char *realm,
                                 const char *id, api_response *resp) {
    if (!market_id_valid(id)) {
        bad_request(resp, "player id must match " API_ID_RULE);
        return;
    }
    snprintf(resp->player, sizeof resp->player, "%s", id);
    size_t limit;
    if (trades_limit(req, &limit, resp) < 0) return;
    const char *cursor = req->lookup ? req->lookup(req->lookup_ud, API_ARG_QUERY, "cursor") : NULL;
    if (cursor && !market_trade_id_valid(cursor)) {
        bad_request(resp, "query parameter 'cursor' must be a next_cursor this route answered");
        return;
    }
    if (!api__authorized(req, realm, id, resp) || conn_missing(conn, resp)) return;
    market_trade *t = NULL;
    size_t n = 0;
    char next[MARKET_TRADE_ID_MAX + 1];
    int rc = market_trades_player(conn, realm, id, cursor, limit, &t, &n, next);
    if (rc != MARKET_OK)
        api__reply_market(rc, 0, resp);
    else
        api__reply(resp, 200, trades_body("player", id, t, n, next));
    free(t);
}

/* GET /items/{item}/trades?limit= : the latest, newest first (a price chart) */
static void handle_item_trades(market_conn *conn, const api_request *req, const char *realm,
                               const char *item, api_response *resp) {
    if (!market_id_valid(item)) {
        bad_request(resp, "item id must match " API_ID_RULE);
        return;
    }
    size_t limit;
    if (trades_limit(req, &limit, resp) < 0 || conn_missing(conn, resp)) return;
    market_trade *t = NULL;
    size_t n = 0;
    int rc = market_trades_item(conn, realm, item, limit, &t, &n);
    if (rc != MARKET_OK)
        api__reply_market(rc, 0, resp);
    else
        api__reply(resp, 200, trades_body("item", item, t, n, NULL));
    free(t);
}

/* GET /healthz: 200 {"status":"ok"} when the store can serve purchases
 * (market_health()); otherwise 503 store_unavailable whose detail says why,
 * with "status":"unavailable" as well, and Retry-After. */
static void handle_healthz(market_conn *conn, const api_request *req, const char *realm,
                           const char *arg, api_response *resp) {
    (void)req;
    (void)realm;
    (void)arg;
    if (conn_missing(conn, resp)) return;
    char why[API__WHY_MAX];
    int rc = market_health(conn, why, sizeof why);
    if (rc == MARKET_OK) {
        api__reply(resp, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    if (rc == MARKET_ERR_NOMEM) {
        api__reply_market(rc, 0, resp);
        return;
    }
    json_t *body = error_body("store_unavailable", why[0] ? why : market_strerror(rc));
    if (body && json_object_set_new(body, "status", json_string("unavailable")) < 0) {
        json_decref(body);
        body = NULL;
    }
    resp->retry_after_s = 1;
    snprintf(resp->error, sizeof resp->error, "store_unavailable");
    api__reply(resp, 503, body); /* any failure: the store cannot serve purchases */
}

/* ---- routing ---- */

typedef struct api_route {
    const char *path; /* the exact path, or with prefix: everything before the id */
    int prefix;       /* 1: path is followed by one non-empty segment, the handler's arg */
    const char *suffix; /* prefix routes: what follows the id segment ("/trades"), or NULL */
    int realm;        /* 1: also served under /realms/{realm} */
    const char *method;
    const char *allow; /* the Allow header of a 405 */
    api_handler handle;
    api_beginner begin; /* non-NULL: deferred (a purchase-like write): see api_handle_begin() */
} api_route;

static const api_route api_routes[API_ROUTES] = {
    {"/purchase", 0, NULL, 1, "POST", "POST", handle_purchase, begin_purchase},
    {"/list", 0, NULL, 1, "POST", "POST", handle_list},
    {"/unlist", 0, NULL, 1, "POST", "POST", handle_unlist},
    {"/players/", 1, NULL, 1, "GET", "GET, HEAD", handle_player},
    {"/market", 0, NULL, 1, "GET", "GET, HEAD", handle_market},
    {"/healthz", 0, NULL, 0, "GET", "GET, HEAD", handle_healthz},
    {"/players/", 1, "/listings", 1, "GET", "GET, HEAD", handle_player_listings},
    {"/trades/", 1, NULL, 1, "GET", "GET, HEAD", handle_trade},
    {"/players/", 1, "/trades", 1, "GET", "GET, HEAD", handle_player_trades},
    {"/items/", 1, "/trades", 1, "GET", "GET, HEAD", handle_item_trades},
    {"/sales", 0, NULL, 1, "POST", "POST", handle_sale_create},
    {"/sales/", 1, NULL, 1, "GET", "GET, HEAD", handle_sale_get},
    {"/sales/", 1, "/buy", 1, "POST", "POST", handle_sale_buy, begin_sale_buy},
};

/* Names of the routes as logs and metrics show them. */
static const char *const api_route_names[API_ROUTES] = {
    "/purchase",     "/list",         "/unlist",
    "/players/{id}", "/market",       "/healthz",
    "/players/{id}/listings", "/trades/{id}", "/players/{id}/trades",
    "/items/{item}/trades", "/sales", "/sales/{id}",
    "/sales/{id}/buy",
};

/* Returns route i's name (static), or NULL outside 0..API_ROUTES-1. */
const char *api_route_name(int i) { return i >= 0 && i < API_ROUTES ? api_route_names[i] : NULL; }

/* Returns the index of a name that api_route_name() gave, or -1. */
int api_route_index(const char *route) {
    for (int i = 0; route && i < API_ROUTES; i++)
        if (route == api_route_names[i] || strcmp(route, api_route_names[i]) == 0) return i;
    return -1;
}

/* The result of route_find(). */
enum route_found {
    ROUTE_NONE,      /* no route: 404 */
    ROUTE_OK,        /* *route serves the path */
    ROUTE_BAD_REALM, /* "/realms/<not an id>/...": 400 */
};

/* Finds the route serving path: its id segment is copied into argbuf
 * (arglen bytes; a longer one is copied as "", which no handler takes for an
 * id) and *arg points to it, its realm
 * into realm (MARKET_REALM_MAX + 1 bytes): the segment after "/realms/"
 * when path starts so (the route is the rest of the path, and must be one
 * served per realm), else MARKET_REALM_DEFAULT. A route under a realm
 * segment that is not a valid id is ROUTE_BAD_REALM, with *route set. */
static enum route_found route_find(const char *path, const api_route **route, const char **arg,
                                   char *argbuf, size_t arglen, char *realm) {
    int prefixed = strncmp(path, API_REALM_PREFIX, sizeof API_REALM_PREFIX - 1) == 0;
    int bad_realm = 0;
    *route = NULL;
    snprintf(realm, MARKET_REALM_MAX + 1, "%s", MARKET_REALM_DEFAULT);
    if (prefixed) {
        const char *id = path + sizeof API_REALM_PREFIX - 1, *slash = strchr(id, '/');
        if (!slash) return ROUTE_NONE;
        size_t len = (size_t)(slash - id);
        bad_realm = len == 0 || len > MARKET_REALM_MAX;
        if (!bad_realm) {
            memcpy(realm, id, len);
            realm[len] = '\0';
            bad_realm = !market_id_valid(realm);
        }
        if (bad_realm) snprintf(realm, MARKET_REALM_MAX + 1, "%s", MARKET_REALM_DEFAULT);
        path = slash;
    }
    for (size_t i = 0; i < sizeof api_routes / sizeof api_routes[0]; i++) {
        const api_route *r = &api_routes[i];
        size_t n = strlen(r->path);
        if (prefixed && !r->realm) continue;
        if (!r->prefix && strcmp(path, r->path) == 0) {
            *arg = NULL;
            *route = r;
            return bad_realm ? ROUTE_BAD_REALM : ROUTE_OK;
        }
        if (r->prefix && strncmp(path, r->path, n) == 0 && path[n] != '\0' &&
            path[n] != '/') {
            const char *end = strchr(path + n, '/');
            if (r->suffix ? !end || strcmp(end, r->suffix) != 0 : end != NULL) continue;
            size_t len = end ? (size_t)(end - (path + n)) : strlen(path + n);
            if (len >= arglen) len = 0; /* longer than any id: the handler refuses "" */
            memcpy(argbuf, path + n, len);
            argbuf[len] = '\0';
            *arg = argbuf;
            *route = r;
            return bad_realm ? ROUTE_BAD_REALM : ROUTE_OK;
        }
    }
    return ROUTE_NONE;
}

/* Finds the deferred route serving method and path (see route_find() for
 * argbuf, arglen and realm): the route, with *arg set, when path names a
 * route of the table (under a valid realm, if any) that has a begin step
 * and method is the one it serves; else NULL. This function can't fail. */
static const api_route *deferred_route(const char *method, const char *path, const char **arg,
                                       char *argbuf, size_t arglen, char *realm) {
    const api_route *r = NULL;
    if (!method || !path) return NULL;
    if (route_find(path, &r, arg, argbuf, arglen, realm) != ROUTE_OK) return NULL;
    return r->begin && strcmp(method, r->method) == 0 ? r : NULL;
}

/* ---- API ---- */

/* Answers one request: routes req by method and path, validates it, calls
 * market/ through conn (used by this thread only, for the call), and fills
 * resp, which is overwritten without being read. req and conn are borrowed.
 * resp->body is a new malloc'd string; release it with api_response_cleanup().
 * Every failure is an answer: 4xx for the client's mistakes, 5xx for ours or
 * the store's, status 500 with a NULL body on out-of-memory. A NULL resp is
 * ignored; a NULL req or conn (a caller bug) gets 500. */
void api_handle(market_conn *conn, const api_request *req, api_response *resp) {
    if (!resp) return;
    *resp = (api_response){0};
    if (!req || !req->method || !req->path) {
        error_reply(resp, 500, "internal_error", "incomplete request", 0, NULL);
        return;
    }
    const char *arg = NULL;
    const api_route *r;
    char realm[MARKET_REALM_MAX + 1];
    char argbuf[API__ARG_MAX];
    enum route_found found = route_find(req->path, &r, &arg, argbuf, sizeof argbuf, realm);
    if (found == ROUTE_NONE) {
        error_reply(resp, 404, "not_found", "no such resource", 0, NULL);
        return;
    }
    resp->route = api_route_names[r - api_routes];
    if (found == ROUTE_BAD_REALM) {
        bad_request(resp, "realm id must match " API_ID_RULE);
        return;
    }
    snprintf(resp->realm, sizeof resp->realm, "%s", realm);
    int get_like = strcmp(r->method, "GET") == 0 && strcmp(req->method, "HEAD") == 0;
    if (strcmp(req->method, r->method) != 0 && !get_like) {
        error_reply(resp, 405, "method_not_allowed", NULL, 0, r->allow);
        return;
    }
    r->handle(conn, req, realm, arg, resp);
    if (MARKET_ERR_HAS_REASON(resp->market_rc))
        snprintf(resp->why, sizeof resp->why, "%s", market_conn_errstr(conn));
}

/* Returns 1 when method and path (without the query string; both borrowed)
 * name a route of the table that api_handle_begin() may defer: a
 * purchase-like write, answered later from a market worker, such as POST
 * /purchase or POST /realms/{realm}/sales/{id}/buy; else 0 (an unknown path,
 * another method, a realm that is not an id, NULL). Whether a given request
 * is deferred still depends on its body: see api_handle_begin(). This
 * function can't fail. */
int api_route_deferrable(const char *method, const char *path) {
    const char *arg = NULL;
    char argbuf[API__ARG_MAX], realm[MARKET_REALM_MAX + 1];
    return deferred_route(method, path, &arg, argbuf, sizeof argbuf, realm) != NULL;
}

/* Like api_handle(), except for a request of a deferrable route (see
 * api_route_deferrable()) that passes validation: that one is not run; it
 * is written into p and its kind (API_BEGIN_PURCHASE or API_BEGIN_SALE_BUY)
 * is returned, with resp holding only what logs need (route, player). The
 * caller then hands p to the market with api_purchase_submit() and, once
 * its done callback has been called, turns the outcome into resp with
 * api_purchase_end(). Returns 0 when resp is the whole answer. */
int api_handle_begin(market_conn *conn, const api_request *req, api_response *resp,
                     api_purchase *p) {
    if (!resp || !p) return 0;
    const char *arg = NULL;
    char realm[MARKET_REALM_MAX + 1];
    char argbuf[API__ARG_MAX];
    const api_route *r =
        req ? deferred_route(req->method, req->path, &arg, argbuf, sizeof argbuf, realm) : NULL;
    if (!r) {
        api_handle(conn, req, resp);
        return 0;
    }
    *resp = (api_response){.route = api_route_names[r - api_routes]};
    snprintf(resp->realm, sizeof resp->realm, "%s", realm);
    p->is_sale = 0;
    return r->begin(conn, req, realm, arg, resp, p);
}

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

/* Fills resp (overwritten without being read) with status and the body
 * {"error": code[, "detail": detail]}; code NULL reads as "internal_error",
 * detail NULL leaves it out, and bytes that are not UTF-8 become '?'. A
 * status outside 100..599 becomes 500. resp->body is a new malloc'd string;
 * release it with api_response_cleanup(). On out-of-memory: status 500 and
 * a NULL body. A NULL resp is ignored. */
void api_error(int status, const char *code, const char *detail, api_response *resp) {
    if (!resp) return;
    *resp = (api_response){0};
    if (status < 100 || status > 599) status = 500;
    error_reply(resp, status, code, detail, 0, NULL);
}

/* Frees resp->body and sets it to NULL (and body_len to 0); the other fields
 * are kept. Safe to call twice, and with NULL. This function can't fail. */
void api_response_cleanup(api_response *resp) {
    if (!resp) return;
    free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
}
