/* market_model.c - the data model's writes: a command buffer for one
 * pipeline, and the effects a commit appends to it. Every command and field
 * a write names is spelled here.
 *
 * DESIGN
 * A buffer keeps its commands' arguments back to back in one array, and the
 * text it makes (numbers, keys) in chunks that never move, so that an
 * argument is a stable pointer while the buffer grows. Arrays grow by
 * doubling and are kept from one use to the next (market__buf_reset), so a
 * worker's buffer stops allocating after its first large batches. A failed
 * allocation marks the buffer; later appends do nothing, and
 * market__buf_seal() reports it. Effects are single commands: a commit is
 * market__fx_multi(), effects, market__fx_exec().
 */
#include "market/market_model.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_CHUNK 16384 /* bytes of one chunk of a buffer's text */

struct market__text {
    struct market__text *next;
    size_t used;
    char bytes[TEXT_CHUNK];
};

/* ---- the buffer ---- */

/* Empties b, keeping its memory. Can't fail. */
void market__buf_reset(market__buf *b) {
    b->n = b->n_args = 0;
    b->open = 0;
    b->nomem = 0;
    for (struct market__text *t = b->text; t; t = t->next) t->used = 0;
    b->text_at = b->text;
}

/* Frees what b holds and leaves it empty. Can't fail. */
void market__buf_free(market__buf *b) {
    free(b->argc);
    free(b->at);
    free(b->argv);
    free(b->rep);
    free(b->args);
    for (struct market__text *t = b->text, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    *b = (market__buf){0};
}

/* Makes room for `more` more arguments; 0, or -1 (b marked failed). */
static int args_room(market__buf *b, size_t more) {
    if (b->nomem) return -1;
    if (b->n_args + more <= b->cap_args) return 0;
    size_t cap = b->cap_args ? 2 * b->cap_args : 256;
    while (cap < b->n_args + more) cap *= 2;
    const char **args = realloc(b->args, cap * sizeof *args);
    if (!args) {
        b->nomem = 1;
        return -1;
    }
    b->args = args;
    b->cap_args = cap;
    return 0;
}

/* Makes room for one more command of `more` arguments; 0, or -1 (b marked
 * failed). */
static int room(market__buf *b, size_t more) {
    if (b->nomem) return -1;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        int *argc = realloc(b->argc, cap * sizeof *argc);
        if (argc) b->argc = argc;
        size_t *at = argc ? realloc(b->at, cap * sizeof *at) : NULL;
        if (at) b->at = at;
        const char ***argv = at ? realloc(b->argv, cap * sizeof *argv) : NULL;
        if (argv) b->argv = argv;
        redisReply **rep = argv ? realloc(b->rep, cap * sizeof *rep) : NULL;
        if (rep) b->rep = rep;
        if (!rep) {
            b->nomem = 1;
            return -1;
        }
        b->cap = cap;
    }
    return args_room(b, more);
}

/* Appends the command of argc arguments argv (kept as pointers: each must
 * outlive the buffer's use). */
void market__buf_cmdv(market__buf *b, int argc, const char *const *argv) {
    if (room(b, (size_t)argc) < 0) return;
    b->at[b->n] = b->n_args;
    b->argc[b->n++] = argc;
    memcpy(b->args + b->n_args, argv, (size_t)argc * sizeof *argv);
    b->n_args += (size_t)argc;
}

/* Appends the command of the argc (1..8) strings that follow (see
 * market__buf_cmdv); more than 8 marks b failed rather than cut the command. */
void market__buf_cmd(market__buf *b, int argc, ...) {
    const char *argv[8];
    if (argc < 1 || argc > 8) {
        b->nomem = 1;
        return;
    }
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++) argv[i] = va_arg(ap, const char *);
    va_end(ap);
    market__buf_cmdv(b, argc, argv);
}

/* Opens the command "<cmd> <key>" ("<cmd>" with key NULL), to which
 * market__buf_arg() appends and which market__buf_end() closes. */
void market__buf_begin(market__buf *b, const char *cmd, const char *key) {
    if (room(b, 2) < 0) return;
    b->open = b->n;
    b->at[b->n] = b->n_args;
    b->argc[b->n++] = 1;
    b->args[b->n_args++] = cmd;
    if (key) b->argc[b->open]++, b->args[b->n_args++] = key;
    b->open_base = b->argc[b->open];
}

/* Appends arg to the open command. */
void market__buf_arg(market__buf *b, const char *arg) {
    if (b->open >= b->n || args_room(b, 1) < 0) return;
    b->args[b->n_args++] = arg;
    b->argc[b->open]++;
}

/* Closes the open command: kept when it has at least `least` arguments
 * after its key (after its name, when opened without a key), else taken
 * back. Returns how many it has. */
size_t market__buf_end(market__buf *b, size_t least) {
    if (b->nomem || b->open >= b->n) return 0;
    size_t has = (size_t)(b->argc[b->open] - b->open_base);
    if (has < least) {
        b->n_args = b->at[b->open];
        b->n = b->open;
    }
    b->open = b->n;
    return has;
}

/* Returns room for len bytes of text that stay where they are, or NULL (b
 * marked failed). */
static char *text(market__buf *b, size_t len) {
    if (b->nomem || len > TEXT_CHUNK) {
        b->nomem = 1;
        return NULL;
    }
    while (b->text_at && b->text_at->used + len > TEXT_CHUNK) b->text_at = b->text_at->next;
    if (!b->text_at) {
        struct market__text *t = malloc(sizeof *t);
        if (!t) {
            b->nomem = 1;
            return NULL;
        }
        t->used = 0;
        t->next = b->text; /* a new chunk goes first: the others are full */
        b->text = b->text_at = t;
    }
    char *p = b->text_at->bytes + b->text_at->used;
    b->text_at->used += len;
    return p;
}

/* Returns v in decimal, kept by b ("" when b failed). */
const char *market__buf_i64(market__buf *b, int64_t v) {
    char *p = text(b, 24);
    if (!p) return "";
    market__i64_str(p, v);
    return p;
}

/* Returns the strings that follow, up to a NULL, joined, kept by b ("" when
 * b failed). */
const char *market__buf_join(market__buf *b, ...) {
    va_list ap;
    size_t len = 1;
    va_start(ap, b);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) len += strlen(s);
    va_end(ap);
    char *p = text(b, len);
    if (!p) return "";
    size_t at = 0;
    va_start(ap, b);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
        size_t l = strlen(s);
        memcpy(p + at, s, l);
        at += l;
    }
    va_end(ap);
    p[at] = '\0';
    return p;
}

/* Makes b->argv[0..n) point at the commands' arguments, for
 * market__pipeline_argv(). Returns MARKET_OK, or MARKET_ERR_NOMEM when an
 * append failed. */
int market__buf_seal(market__buf *b) {
    if (b->nomem) return MARKET_ERR_NOMEM;
    for (size_t k = 0; k < b->n; k++) b->argv[k] = b->args + b->at[k];
    return MARKET_OK;
}

/* ---- effects ---- */

void market__fx_multi(market__buf *b) { market__buf_cmd(b, 1, "MULTI"); }

void market__fx_exec(market__buf *b) { market__buf_cmd(b, 1, "EXEC"); }

/* Our fence into a lease's fencing record. */
void market__fx_fence(market__buf *b, const char *fenced, const char *fence) {
    market__buf_cmd(b, 3, "SET", fenced, fence);
}

/* A player's funds change by delta (none when 0). */
void market__fx_funds(market__buf *b, const char *user_key, int64_t delta) {
    if (delta) market__buf_cmd(b, 4, "HINCRBY", user_key, MARKET__FIELD_FUNDS, market__buf_i64(b, delta));
}

/* A player's units of a stackable item change by n (none when 0). */
void market__fx_units(market__buf *b, const char *stacks_key, const char *item, int64_t n) {
    if (n) market__buf_cmd(b, 4, "HINCRBY", stacks_key, item, market__buf_i64(b, n));
}

/* A stack listing's units change by delta. */
void market__fx_listing_units(market__buf *b, const market__realm *r, const char *member,
                              int64_t delta) {
    market__buf_cmd(b, 4, "HINCRBY", r->units, member, market__buf_i64(b, delta));
}

/* An idempotency key's final outcome, kept for MARKET_IDEM_TTL_S. */
void market__fx_idem_record(market__buf *b, const char *key, const char *record) {
    market__buf_cmd(b, 5, "SET", key, record, "EX", MARKET__IDEM_TTL);
}

/* Opens: unique items into a player's inventory (market__buf_arg each item,
 * then market__buf_end(b, 1)). */
void market__fx_items_begin(market__buf *b, const char *inventory_key) {
    market__buf_begin(b, "SADD", inventory_key);
}

/* Opens: listings leave the realm's market (their members, then end). */
void market__fx_delist_begin(market__buf *b, const market__realm *r) {
    market__buf_begin(b, "ZREM", r->market);
}

/* Opens: stack listings' unit counts go (their members, then end). */
void market__fx_delist_units_begin(market__buf *b, const market__realm *r) {
    market__buf_begin(b, "HDEL", r->units);
}

/* A delisted listing's entries leave its search indexes. */
void market__fx_idx_remove(market__buf *b, const market__idx_entry *e) {
    for (int x = 0; x < MARKET__IDX_KINDS; x++) market__buf_cmd(b, 3, "ZREM", e->key[x], e->member[x]);
}

/* units of a sale are sold: one guarded decrement of its stock. */
void market__fx_sale_take(market__buf *b, const char *sale_key, int64_t units) {
    if (units <= 0) return;
    market__buf_cmd(b, 4, "HINCRBY", sale_key, "stock", market__buf_i64(b, -units));
    market__buf_cmd(b, 4, "HINCRBY", sale_key, "sold", market__buf_i64(b, units));
}

/* A player bought units more of a sale. */
void market__fx_sale_bought(market__buf *b, const char *bought_key, const char *player,
                            int64_t units) {
    if (units > 0) market__buf_cmd(b, 4, "HINCRBY", bought_key, player, market__buf_i64(b, units));
}

/* The item strategy's guard, run right before its MULTI when the lock keys
 * live in the store (KEYS: the lock keys, then the guard key; ARGV: our
 * token). Its read went out before the locks were taken, so it could not
 * watch them; this WATCHes them and checks they hold our token. If one does
 * not (lapsed, or taken over by anyone speaking the lock protocol), it
 * writes the guard key, which is watched too: our own EXEC then aborts. */
static const char guard_script[] =
    "for i = 1, #KEYS - 1 do "
    "if redis.call('GET', KEYS[i]) ~= ARGV[1] then "
    "redis.call('SET', KEYS[#KEYS], '1', 'PX', 1000) return 0 end end "
    "return 1";

/* Appends WATCH <lock keys> <guard key> and the guard script over the n
 * lock keys, which must hold token (two commands, before the MULTI). */
void market__fx_guard(market__buf *b, const char *const *lock_keys, size_t n,
                      const char *guard_key, const char *token) {
    market__buf_begin(b, "WATCH", guard_key);
    for (size_t i = 0; i < n; i++) market__buf_arg(b, lock_keys[i]);
    market__buf_end(b, 0);
    market__buf_begin(b, "EVAL", guard_script);
    market__buf_arg(b, market__buf_i64(b, (int64_t)n + 1));
    for (size_t i = 0; i < n; i++) market__buf_arg(b, lock_keys[i]);
    market__buf_arg(b, guard_key);
    market__buf_arg(b, token);
    market__buf_end(b, 0);
}

/* A unique item leaves a player's inventory. */
void market__fx_item_out(market__buf *b, const char *inventory_key, const char *item) {
    market__buf_cmd(b, 3, "SREM", inventory_key, item);
}

/* A unique item enters a player's inventory. */
void market__fx_item_in(market__buf *b, const char *inventory_key, const char *item) {
    market__buf_cmd(b, 3, "SADD", inventory_key, item);
}

/* A player's last units of a stackable item leave (the field goes). */
void market__fx_units_gone(market__buf *b, const char *stacks_key, const char *item) {
    market__buf_cmd(b, 3, "HDEL", stacks_key, item);
}

/* A new listing of member at price enters the realm's market. */
void market__fx_list(market__buf *b, const market__realm *r, const char *member, int64_t price) {
    market__buf_cmd(b, 4, "ZADD", r->market, market__buf_i64(b, price), member);
}

/* A listing leaves the realm's market, and its units record when it is a stack's. */
void market__fx_delist(market__buf *b, const market__realm *r, const char *member, int stack) {
    market__buf_cmd(b, 3, "ZREM", r->market, member);
    if (stack) market__buf_cmd(b, 3, "HDEL", r->units, member);
}

/* A new listing's entries enter its search indexes. */
void market__fx_idx_add(market__buf *b, const market__idx_entry *e) {
    for (int x = 0; x < MARKET__IDX_KINDS; x++)
        market__buf_cmd(b, 4, "ZADD", e->key[x], e->score, e->member[x]);
}

/* A listing change into the realm's feed of changes: listed 1 (a listing
 * made or grown) or 0 (taken back). */
void market__fx_change(market__buf *b, const market__realm *r, int listed, const char *seller,
                       const char *item, int64_t price, int64_t quantity) {
    const char *argv[] = {"XADD", r->changes, "MAXLEN", "~", MARKET_CHANGES_KEPT_S, "*",
                          "action", listed ? "listed" : "unlisted", "seller", seller,
                          "item", item, "price", market__buf_i64(b, price),
                          "quantity", market__buf_i64(b, quantity)};
    market__buf_cmdv(b, (int)(sizeof argv / sizeof *argv), argv);
}

/* ---- reads ---- */

/* Claims an idempotency key for an attempt: SET <key> <claim> NX PX <ttl_ms>. */
void market__rd_claim(market__buf *b, const char *k_idem, const char *claim, const char *ttl_ms) {
    market__buf_cmd(b, 6, "SET", k_idem, claim, "NX", "PX", ttl_ms);
}

/* Opens the WATCH of what a read reads (its keys, then end). */
void market__rd_watch_begin(market__buf *b) { market__buf_begin(b, "WATCH", NULL); }

/* Opens a read of string keys: idempotency records, fencing records (keys, then end). */
void market__rd_records_begin(market__buf *b) { market__buf_begin(b, "MGET", NULL); }

/* One idempotency record. */
void market__rd_record(market__buf *b, const char *k_idem) { market__buf_cmd(b, 2, "GET", k_idem); }

/* Opens a read of listings' prices (members, then end). */
void market__rd_prices_begin(market__buf *b, const market__realm *r) {
    market__buf_begin(b, "ZMSCORE", r->market);
}

/* Opens a read of stack listings' units (members, then end). */
void market__rd_listing_units_begin(market__buf *b, const market__realm *r) {
    market__buf_begin(b, "HMGET", r->units);
}

/* A player's funds. */
void market__rd_funds(market__buf *b, const char *user_key) {
    market__buf_cmd(b, 3, "HGET", user_key, MARKET__FIELD_FUNDS);
}

/* The store's clock. */
void market__rd_time(market__buf *b) { market__buf_cmd(b, 1, "TIME"); }

/* The fields of a sale's hash, in the order market__rd_sale() reads them. */
const char *const market__sale_fields[MARKET__SALE_FIELDS] = {
    "item", "price", "initial", "stock", "sold", "limit", "start_ms", "end_ms", "house"};

/* A sale: its market__sale_fields. */
void market__rd_sale(market__buf *b, const char *sale_key) {
    market__buf_begin(b, "HMGET", sale_key);
    for (size_t i = 0; i < MARKET__SALE_FIELDS; i++) market__buf_arg(b, market__sale_fields[i]);
    market__buf_end(b, 0);
}

/* Opens a read of the units players bought of a sale (players, then end). */
void market__rd_bought_begin(market__buf *b, const char *bought_key) {
    market__buf_begin(b, "HMGET", bought_key);
}

/* Whether a player holds a unique item. */
void market__rd_holds(market__buf *b, const char *inventory_key, const char *item) {
    market__buf_cmd(b, 3, "SISMEMBER", inventory_key, item);
}

/* A player's units of a stackable item. */
void market__rd_units(market__buf *b, const char *stacks_key, const char *item) {
    market__buf_cmd(b, 3, "HGET", stacks_key, item);
}

/* A listing's price, and its units (a stack's; nil for a unique item). */
void market__rd_listing(market__buf *b, const market__realm *r, const char *member) {
    market__buf_cmd(b, 3, "ZSCORE", r->market, member);
    market__buf_cmd(b, 3, "HGET", r->units, member);
}

/* An item's cheapest listings at or under hi (an index's range by score,
 * with scores), at most scan of them. */
void market__rd_cheapest(market__buf *b, const char *index_key, const char *hi,
                         const char *scan) {
    const char *argv[] = {"ZRANGE", index_key, "1", hi, "BYSCORE", "LIMIT", "0", scan, "WITHSCORES"};
    market__buf_cmdv(b, (int)(sizeof argv / sizeof *argv), argv);
}
