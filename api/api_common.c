/* api_common.c - what every handler of api/ uses: the status table, strict
 * JSON bodies, query arguments, replies.
 *
 * DESIGN
 * Request bodies are strict: one JSON object (duplicate keys, trailing bytes,
 * NUL bytes refused), every field known, typed and in range, before anything
 * touches the store. Each route lists its fields in a small spec table; the
 * first problem found is reported as 400 bad_request with a detail sentence
 * that names the field. Unknown fields are refused (a typo such as "prize"
 * must not silently turn a conditional purchase into an unconditional one).
 *
 * Every market result maps to a status and an error code in api_status_table,
 * and nowhere else. Bodies are dumped with json_dumpb() into a buffer from
 * malloc() (see api__dump_body()), so the server releases them with free()
 * whatever allocator jansson was given. When memory runs out the response is
 * status 500 with a NULL body; the server then sends its static fallback.
 * One blur is jansson's: while parsing, 2.14 reports some failed allocations
 * as syntax errors ("invalid token"), so under memory pressure a good body
 * may be answered 400 instead of 500. Nothing leaks either way.
 *
 * This is the bottom layer of api/: it calls no other file of it.
 */
#include "api/api.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/api_impl.h"

#define API_FIELDS_MAX 8

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
    {MARKET_ERR_REALM_UNAVAILABLE, 503, "realm_unavailable", 1},
    {MARKET_ERR_NO_ORDER, 404, "order_not_found", 0},
    {MARKET_ERR_NO_AUCTION, 404, "auction_not_found", 0},
    {MARKET_ERR_AUCTION_CLOSED, 409, "auction_closed", 0},
    {MARKET_ERR_BID_TOO_LOW, 409, "bid_too_low", 0},
    {MARKET_ERR_OWN_AUCTION, 409, "own_auction", 0},
    {MARKET_ERR_NO_DIRECT, 404, "direct_trade_not_found", 0},
    {MARKET_ERR_TRADE_CLOSED, 409, "trade_closed", 0},
    {MARKET_ERR_OWN_TRADE, 409, "own_trade", 0},
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

/* Copies the C string src into out (cap > 0 bytes), cut to cap - 1 bytes and
 * NUL-terminated: snprintf(out, cap, "%s", src) without the formatting, which
 * was 4% of the server's CPU at 64 buyers (perf: the ids a purchase copies).
 * This function can't fail. */
void api__copy(char *out, size_t cap, const char *src) {
    size_t n = strnlen(src, cap - 1);
    memcpy(out, src, n);
    out[n] = '\0';
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
char *api__dump_body(const json_t *body, size_t *len) {
    enum { GUESS = 1024 }; /* most answers fit: they are written once, not sized first */
    char *text = malloc(GUESS + 1);
    if (!text) return NULL;
    size_t n = json_dumpb(body, text, GUESS, JSON_COMPACT);
    if (n > GUESS) { /* what fit is cut short: write it again, whole */
        char *bigger = realloc(text, n + 1);
        if (!bigger || json_dumpb(body, bigger, n, JSON_COMPACT) != n) n = 0;
        text = bigger ? bigger : text;
    }
    if (n == 0) {
        free(text);
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}

/* Sets member key of o to *value, which it steals even on failure, and sets
 * *value to NULL, so that a failure path may release *value whatever
 * happened. Returns 0, or -1 (out of memory, or o not an object). */
int api__object_steal(json_t *o, const char *key, json_t **value) {
    int rc = json_object_set_new(o, key, *value);
    *value = NULL;
    return rc < 0 ? -1 : 0;
}

/* Ends a page o: sets member name to *arr (stolen, even on failure) and,
 * unless cursor is NULL, "next_cursor" to cursor ("" : null). Returns o, or
 * NULL on out-of-memory, having released o and *arr. */
json_t *api__page_end(json_t *o, const char *name, json_t **arr, const char *cursor) {
    if (api__object_steal(o, name, arr) < 0 ||
        (cursor &&
         json_object_set_new(o, "next_cursor", *cursor ? api__text_new(cursor) : json_null()) < 0)) {
        json_decref(*arr);
        *arr = NULL;
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Fills resp with status and the compact text of body, and releases body
 * (stolen; NULL stands for a failed allocation). On out-of-memory resp
 * becomes status 500 with a NULL body and no Retry-After or Allow. */
void api__reply(api_response *resp, int status, json_t *body) {
    size_t len = 0;
    char *text = body ? api__dump_body(body, &len) : NULL;
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

/* ---- flat answers: an object of strings and integers, written without a tree ----
 *
 * The answers served at the rate of purchases (a purchase's 200) are flat
 * objects of a few members. Built as a jansson tree and dumped, one cost
 * about 5 us of server CPU, a sixth of a purchase's (perf, 64 buyers): an
 * allocation a member, a callback a piece, snprintf() an integer. These
 * functions write the same compact text straight into one buffer. A string
 * is escaped as json_dumpb() escapes it (", \, the control bytes); it must
 * be valid UTF-8, as every id is (market_id_valid()). Out of memory is
 * remembered and answered 500 by api__reply_flat(). */

/* Makes room for n more bytes in f. Returns 0, or -1 (f->oom set). */
static int flat_room(api__flat *f, size_t n) {
    if (f->oom) return -1;
    if (f->len + n + 2 <= f->cap) return 0; /* and room for the closing brace and NUL */
    size_t cap = f->cap ? f->cap : 256;
    while (cap < f->len + n + 2)
        cap *= 2;
    char *t = realloc(f->text, cap);
    if (!t) {
        f->oom = 1;
        return -1;
    }
    f->text = t;
    f->cap = cap;
    return 0;
}

/* Appends n bytes of s to f. */
static void flat_put(api__flat *f, const char *s, size_t n) {
    if (flat_room(f, n) < 0) return;
    memcpy(f->text + f->len, s, n);
    f->len += n;
}

/* Appends s as a JSON string, quoted and escaped as json_dumpb() does. */
static void flat_string(api__flat *f, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    flat_put(f, "\"", 1);
    for (const char *run = s;; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        flat_put(f, run, (size_t)(s - run));
        if (!ch) break;
        char esc[6] = {'\\', (char)ch, 0};
        size_t n = 2;
        switch (ch) {
        case '"':
        case '\\': break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            n = 6;
        }
        flat_put(f, esc, n);
        run = s + 1;
    }
    flat_put(f, "\"", 1);
}

/* Appends the separator and key of the next member. */
static void flat_key(api__flat *f, const char *key) {
    flat_put(f, f->len ? "," : "{", 1);
    flat_string(f, key);
    flat_put(f, ":", 1);
}

/* Appends member key with string value. */
void api__flat_str(api__flat *f, const char *key, const char *value) {
    flat_key(f, key);
    flat_string(f, value);
}

/* Appends member key with integer value. */
void api__flat_int(api__flat *f, const char *key, int64_t value) {
    char digits[24], *p = digits + sizeof digits;
    uint64_t u = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (value < 0) *--p = '-';
    flat_key(f, key);
    flat_put(f, p, (size_t)(digits + sizeof digits - p));
}

/* Fills resp with status and f's object, closed; f's text becomes resp's.
 * On out-of-memory resp becomes status 500 with a NULL body, as api__reply(). */
void api__reply_flat(api_response *resp, int status, api__flat *f) {
    if (!f->len) flat_put(f, "{", 1);
    if (!f->oom) { /* flat_room() kept room for these two */
        f->text[f->len++] = '}';
        f->text[f->len] = '\0';
    }
    resp->status = status;
    resp->body = f->oom ? NULL : f->text;
    resp->body_len = f->oom ? 0 : f->len;
    if (f->oom) {
        free(f->text);
        resp->status = 500;
        resp->retry_after_s = 0;
        resp->allow = NULL;
    }
    *f = (api__flat){0};
}

/* Returns a new {"error": code[, "detail": detail]} object, or NULL on
 * out-of-memory. */
json_t *api__error_body(const char *code, const char *detail) {
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
void api__error_reply_full(api_response *resp, int status, const char *code, const char *detail,
                           int retry_after_s, const char *allow) {
    resp->retry_after_s = retry_after_s;
    resp->allow = allow;
    api__copy(resp->error, sizeof resp->error, code ? code : "internal_error");
    api__reply(resp, status, api__error_body(code, detail));
}

/* Fills resp with status and {"error":code,"detail":detail}. */
void api__error_reply(api_response *resp, int status, const char *code, const char *detail) {
    api__error_reply_full(resp, status, code, detail, 0, NULL);
}

void api__bad_request(api_response *resp, const char *detail) {
    api__error_reply_full(resp, 400, "bad_request", detail, 0, NULL);
}


/* Fills resp with the answer to market code rc (negative; anything that is
 * not in the table, success included, is a 500): the table's status, error
 * code, Retry-After, and the market's description as "detail". n goes into
 * the body of the refusals that say what they are about: a price_changed
 * ("price", the current price), a not_enough_units ("available", the units
 * there are), an item_not_held of units ("held", when n > 0). On
 * out-of-memory: status 500 with a NULL body. */
/* The start of an order's answer: says whether its outcome is a replay, and answers its
 * refusal (api__reply_market(), with n). Returns 1 when it was refused (resp holds the
 * answer), 0 when it succeeded. */
int api__end_refused(const api_deferred *d, int replayed, int64_t n, api_response *resp) {
    resp->replayed = replayed;
    if (d->order.rc == MARKET_OK) return 0;
    api__reply_market(d->order.rc, n, resp);
    return 1;
}

void api__reply_market(int rc, int64_t n, api_response *resp) {
    const char *what = rc == MARKET_ERR_PRICE_CHANGED       ? "price"
                       : rc == MARKET_ERR_NOT_ENOUGH        ? "available"
                       : rc == MARKET_ERR_NOT_HELD && n > 0 ? "held"
                       : rc == MARKET_ERR_BID_TOO_LOW       ? "min_bid"
                                                            : NULL;
    api__reply_market_member(rc, what, n, resp);
}

/* Answers rc, a market outcome: status with body (stolen) on MARKET_OK,
 * else rc's row of the status table (api__reply_market()), body released
 * (callers pass NULL then: rc == MARKET_OK ? x_body(...) : NULL). */
void api__reply_outcome(api_response *resp, int rc, int status, json_t *body) {
    if (rc != MARKET_OK) {
        json_decref(body);
        api__reply_market(rc, 0, resp);
        return;
    }
    api__reply(resp, status, body);
}

/* Returns 1 when id, a route's id segment, is an id; else answers 400 "<what>
 * id must match [A-Za-z0-9_-]{1,64}" into resp and returns 0. */
int api__id_ok(const char *id, const char *what, api_response *resp) {
    if (market_id_valid(id)) return 1;
    char detail[64];
    snprintf(detail, sizeof detail, "%s id must match " API__ID_RULE, what);
    api__bad_request(resp, detail);
    return 0;
}

/* Reads arg, a route's id segment that names what (an order, an auction) by its number,
 * into *id. Returns 1, or 0 with a 400 in resp: "the <what> id must be a whole number from
 * 1, as <from> gave it". */
int api__serial_ok(const char *arg, const char *what, const char *from, int64_t *id,
                   api_response *resp) {
    size_t len = arg ? strlen(arg) : 0;
    *id = 0;
    for (size_t i = 0; i < len && len <= 18; i++) {
        if (arg[i] < '0' || arg[i] > '9') {
            *id = 0;
            break;
        }
        *id = *id * 10 + (arg[i] - '0');
    }
    if (*id >= 1) return 1;
    char detail[128];
    snprintf(detail, sizeof detail, "the %s id must be a whole number from 1, as %s gave it", what,
             from);
    api__bad_request(resp, detail);
    return 0;
}

/* api__reply_market(), with member (NULL: none) set to v in the body. */
void api__reply_market_member(int rc, const char *member, int64_t v, api_response *resp) {
    json_t *extra = member ? json_pack("{s:I}", member, (json_int_t)v) : NULL;
    if (member && !extra) {
        api__reply(resp, 500, NULL); /* out of memory */
        return;
    }
    api__reply_market_with(rc, extra, resp);
}

/* api__reply_market(), with the members of extra (stolen; NULL: none) in the body. */
void api__reply_market_with(int rc, json_t *extra, api_response *resp) {
    const api_status *st = &api_status_default;
    for (size_t i = 0; i < sizeof api_status_table / sizeof api_status_table[0]; i++)
        if (api_status_table[i].rc == rc) st = &api_status_table[i];
    api_response keep = *resp; /* what logs need survives the reset */
    *resp = (api_response){.route = keep.route};
    memcpy(resp->player, keep.player, sizeof resp->player);
    memcpy(resp->realm, keep.realm, sizeof resp->realm);
    json_t *body = api__error_body(st->code, market_strerror(rc));
    if (body && extra && json_object_update(body, extra) < 0) {
        json_decref(body);
        body = NULL;
    }
    json_decref(extra);
    resp->retry_after_s = st->retry_after_s;
    resp->market_rc = rc;
    api__copy(resp->error, sizeof resp->error, st->code);
    api__reply(resp, st->status, body);
}

/* ---- request bodies ---- */

/* Loads req's body as a JSON object holding only the fields of spec[0..n),
 * each well-typed, with the required ones present, into vals[0..n). Returns
 * the parsed body (a new reference the caller json_decref()s; vals borrow
 * from it), or NULL with resp filled (400, 413 or 500). n is at most
 * API_FIELDS_MAX (a spec table's size, not the client's). */
json_t *api__body_parse(const api_request *req, const api__field_spec *spec, size_t n,
                        api__field_value *vals, api_response *resp) {
    char why[API__WHY_MAX], q[API__QUOTE_MAX + 4];
    int rc;
    if (req->body_len > API_BODY_MAX) {
        api__why(why, sizeof why, "request body exceeds %d bytes", API_BODY_MAX);
        api__error_reply_full(resp, 413, "payload_too_large", why, 0, NULL);
        return NULL;
    }
    json_t *root = api__load(req->body, req->body_len, "request body", &rc, why, sizeof why);
    if (!root) {
        if (rc == MARKET_ERR_NOMEM)
            api__error_reply_full(resp, 500, "internal_error", NULL, 0, NULL);
        else
            api__bad_request(resp, why);
        return NULL;
    }
    const char *names[API_FIELDS_MAX] = {NULL}; /* n is at most API_FIELDS_MAX */
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
        vals[i] = (api__field_value){0};
        if (!v) {
            if (!spec[i].required) continue;
            api__why(why, sizeof why, "missing field '%s'", spec[i].name);
            goto bad;
        }
        vals[i].present = 1;
        if (spec[i].kind == API__FIELD_ID) {
            if (!json_is_string(v)) {
                api__why(why, sizeof why, "field '%s' must be a string, not %s", spec[i].name,
                         type_name(v));
                goto bad;
            }
            vals[i].id = json_string_value(v);
            if (!market_id_valid(vals[i].id)) {
                api__why(why, sizeof why, "field '%s' must match %s", spec[i].name, API__ID_RULE);
                goto bad;
            }
        } else if (spec[i].kind == API__FIELD_OBJECT) {
            if (!json_is_object(v)) {
                api__why(why, sizeof why, "field '%s' must be an object, not %s", spec[i].name,
                         type_name(v));
                goto bad;
            }
            vals[i].obj = v;
        } else {
            enum api__field_kind kind = spec[i].kind;
            int64_t lo =
                kind == API__FIELD_TIME || kind == API__FIELD_BPS || kind == API__FIELD_SECONDS ? 0
                                                                                                : 1;
            int64_t hi = kind == API__FIELD_PRICE      ? MARKET_PRICE_MAX
                         : kind == API__FIELD_QUANTITY ? MARKET_QUANTITY_MAX
                         : kind == API__FIELD_UNITS    ? MARKET_SALE_STOCK_MAX
                         : kind == API__FIELD_BPS      ? MARKET_FEE_BPS_MAX
                         : kind == API__FIELD_DURATION || kind == API__FIELD_SECONDS
                             ? MARKET_DURATION_MAX_S
                             : API__TIME_MAX;
            json_int_t p = json_is_integer(v) ? json_integer_value(v) : lo - 1;
            if (p < lo || p > hi) {
                api__why(why, sizeof why, "field '%s' must be an integer in %" PRId64 "..%" PRId64
                         "%s", spec[i].name, lo, hi,
                         spec[i].kind == API__FIELD_TIME ? " (Unix time in ms)" : "");
                goto bad;
            }
            vals[i].price = (int64_t)p;
        }
    }
    return root;
bad:
    json_decref(root);
    api__bad_request(resp, why);
    return NULL;
}

/* A NULL connection is a server bug, not the client's: answered 500. */
int api__conn_missing(const market_conn *conn, api_response *resp) {
    if (conn) return 0;
    api__error_reply_full(resp, 500, "internal_error", "no store connection", 0, NULL);
    return 1;
}

/* ---- query arguments ---- */

/* Reads query argument name as a decimal integer in lo..hi (digits only, no
 * sign); def when it is absent. Returns 0, or -1 when it is malformed or out
 * of range. */
int api__query_size(const api_request *req, const char *name, size_t def, size_t lo, size_t hi,
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

/* Returns query argument name, borrowed from req, or NULL when absent. */
const char *api__query_arg(const api_request *req, const char *name) {
    return req->lookup ? req->lookup(req->lookup_ud, API_ARG_QUERY, name) : NULL;
}

/* Answers 400: query parameter name and what is wrong with it (see market_search_check). */
void api__bad_query(api_response *resp, const char *name, const char *what) {
    char why[API__WHY_MAX];
    api__why(why, sizeof why, "query parameter '%s' %s", name, what);
    api__bad_request(resp, why);
}
