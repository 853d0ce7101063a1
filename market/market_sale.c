/* market_sale.c - flash sales: the game sells a limited stock of a stackable
 * item; thousands of buyers arrive in the same second.
 *
 * DESIGN
 * A sale is one hash, sale:{r}:<id> {item, price, initial, stock, sold,
 * limit, start_ms, end_ms, house}, with the units each player bought in
 * sale:{r}:<id>:bought. Every buy of a sale changes the same keys, so a
 * lock per buyer would be a queue in Redis, one lock round trip per buyer,
 * all on one key: the hot spot. Instead the buys of a process queue in
 * process: the sale kind's orders, on the market's sale combiner
 * (market_combine.c), one of cfg.workers lanes chosen by (realm, sale), and
 * the lane's worker serves them in batches (flat combining):
 *   1. the worker takes the sale's lock lock:sale:{r}:<id> through the lock
 *      layer (fenced), and keeps it from one batch to the next while buys
 *      keep coming (at most MARKET__HOLD_MAX_MS, never past half the lease;
 *      released at once when its queue is empty);
 *   2. one pipeline claims the buys' idempotency keys (SET NX PX, before the
 *      WATCH), WATCHes the sale, its bought hash, the lock key and its
 *      fencing record, the idempotency records and every user involved, and
 *      reads the fencing record and the idempotency records (the frame every
 *      kind shares: market_frame.c), the store's clock (TIME), the sale,
 *      what each buyer bought and every user's funds. The
 *      sale's house is remembered per lane; its first batch reads the
 *      house's funds in a second round trip under the same WATCH;
 *   3. market__sale_apply() (market_rules.c, pure) decides every buy in queue
 *      order against an in-memory copy, by the store's clock, so that
 *      servers with skewed clocks agree on the sale's start and end;
 *   4. one MULTI/EXEC: our fence, HINCRBY stock -k and sold +k (one guarded
 *      decrement for the whole batch), each buyer's bought, funds and stack,
 *      the house's funds, the trade records (market_trade.c's script, which
 *      also writes the successes' idempotency records) and the refusals'
 *      records. Redis aborts it if anything watched changed (another
 *      process serving the same sale, a lapsed or taken-over lease), and
 *      market__attempts() reads again or answers lease_lost.
 * A buy is decided at the store's time of its batch's read; its commit
 * follows within the batch's round trip, and the trade's time is the
 * commit's. Other processes serving the same sale are serialised by the
 * lock and guarded by WATCH and the fence, as the market strategy's
 * purchases are. Budgets, stop, answers and Redis Cluster's resting sales
 * are the combiner's (market_combine.c). Outcomes and invariants are those of
 * serial execution in queue order.
 */
#include "market/market_frame.h"
#include "market/market_kinds.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "market/market_trade.h"

/* The kind's state on a lane: a batch of buys of one sale, and what its
 * attempt read and decides. */
struct sale_batch {
    market__kstate k; /* its read and commit buffers (market_combine.h) */
    market__frame f;  /* its open buys, their keys and the read's frame */
    const char *realm, *sale;
    char k_sale[MARKET__KEY_MAX], k_bought[MARKET__KEY_MAX + 8];
    /* the house of the sale last served on this lane: its funds are read with the first
     * pipeline */
    char cache_key[MARKET__KEY_MAX];
    char cache_house[MARKET_ID_MAX + 1];

    market__parties u; /* every buyer, and the house */
    size_t buyer[MARKET__BATCH_MAX]; /* index in u of each buy's buyer */
    size_t house_u;                  /* the house's, SIZE_MAX: not read yet */
    int64_t bought[MARKET__PARTIES_MAX], read_bought[MARKET__PARTIES_MAX];
    char house[MARKET_ID_MAX + 1], item[MARKET_ID_MAX + 1];
    market__sale_state st;
    int64_t read_left;

    /* pipeline scratch */
    const char *args_trades[MARKET__TRADES_ARGC(MARKET__BATCH_MAX)];
    size_t i_sale, i_bought;

    market__trades tw;
    market__trade_rec trade[MARKET__BATCH_MAX];
    size_t trade_req[MARKET__BATCH_MAX];
    size_t n_trades;
};

/* ---- creating and reading sales ---- */

/* KEYS[1] the sale, KEYS[2] the house's hash; ARGV item, price, initial,
 * limit, start_ms, end_ms, house. Returns 1 created, 0 the sale exists, -1
 * no such house. */
static const char create_script[] =
    "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end "
    "if redis.call('HEXISTS', KEYS[2], 'funds') == 0 then return -1 end "
    "redis.call('HSET', KEYS[1], 'item', ARGV[1], 'price', ARGV[2], 'initial', ARGV[3], "
    "'stock', ARGV[3], 'sold', '0', 'limit', ARGV[4], 'start_ms', ARGV[5], 'end_ms', ARGV[6], "
    "'house', ARGV[7]) "
    "return 1";

/* Creates sale s (s->id, item, price, initial, limit, start_ms, end_ms,
 * house: "" for MARKET_SALE_HOUSE) in realm, with all its units in stock,
 * in one script (atomic). Returns MARKET_OK, or ERR_INVALID (see
 * market__sale_new_ok), ERR_DUPLICATE (a sale with that id exists),
 * ERR_NO_PLAYER (the house is not a player of the realm), ERR_NOT_REPLICATED
 * (created on the master, not confirmed by enough replicas), ERR_STORE. */
int market_sale_create(market_conn *c, const char *realm, const market_sale *s) {
    if (!c || !market__sale_new_ok(realm, s)) return MARKET_ERR_INVALID;
    const char *house = s->house[0] ? s->house : MARKET_SALE_HOUSE;
    char k_sale[MARKET__KEY_MAX], k_house[MARKET__KEY_MAX];
    char price[24], initial[24], limit[24], start[24], end[24];
    market__key_sale(k_sale, realm, s->id);
    market__key_user(k_house, realm, house);
    snprintf(price, sizeof price, "%lld", (long long)s->price);
    snprintf(initial, sizeof initial, "%lld", (long long)s->initial);
    snprintf(limit, sizeof limit, "%lld", (long long)s->limit);
    snprintf(start, sizeof start, "%lld", (long long)s->start_ms);
    snprintf(end, sizeof end, "%lld", (long long)s->end_ms);
    const char *keys[2] = {k_sale, k_house};
    const char *args[7] = {s->item, price, initial, limit, start, end, house};
    int64_t made = 0;
    int rc =
        market__write_script(c, realm, create_script, 2, keys, 7, args, "creating a sale", &made);
    if (rc < 0) return rc;
    return made == 1 ? MARKET_OK : made == 0 ? MARKET_ERR_DUPLICATE : MARKET_ERR_NO_PLAYER;
}

/* Reads sale id of realm into *out, with out->now_ms the store's clock at
 * the read (one pipeline; no lock). Returns MARKET_OK, or ERR_INVALID,
 * ERR_NO_SALE, ERR_STORE (unreachable, or the sale is unreadable). */
int market_sale_get(market_conn *c, const char *realm, const char *id, market_sale *out) {
    if (!c || !out || !market_id_valid(realm) || !market_id_valid(id)) return MARKET_ERR_INVALID;
    memset(out, 0, sizeof *out);
    char k_sale[MARKET__KEY_MAX];
    market__key_sale(k_sale, realm, id);
    market__buf rd = {0};
    market__rd_time(&rd);
    market__rd_sale(&rd, k_sale);
    int rc = market__read_buf(c, realm, &rd);
    if (rc < 0) return rc;
    redisReply **rep = rd.rep;
    market__sale_state st;
    int known = market__reply_sale(rep[1], &st, &out->initial, out->item, out->house);
    if (market__reply_time(rep[0], &out->now_ms) < 0 || known == MARKET__UNREADABLE)
        rc = market__fail(c, "sale %s of realm %s is unreadable", id, realm);
    else if (known == MARKET__ABSENT)
        rc = MARKET_ERR_NO_SALE;
    market__replies_free(rep, 2);
    market__buf_free(&rd);
    if (rc < 0) return rc;
    snprintf(out->id, sizeof out->id, "%s", id);
    out->price = st.price;
    out->left = st.left;
    out->sold = st.sold;
    out->limit = st.limit;
    out->start_ms = st.start_ms;
    out->end_ms = st.end_ms;
    return MARKET_OK;
}

/* Reads who bought how many units of sale id of realm (its bought hash)
 * into *out, a new array of *n entries (caller frees with free(); NULL when
 * none), in no order. Returns MARKET_OK, or ERR_INVALID, ERR_STORE (also a
 * count that is not a whole number), ERR_NOMEM. No sale reads as none. */
int market_sale_buyers(market_conn *c, const char *realm, const char *id,
                       market_sale_buyer **out, size_t *n) {
    if (!out || !n) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = 0;
    if (!c || !market_id_valid(realm) || !market_id_valid(id)) return MARKET_ERR_INVALID;
    char k_sale[MARKET__KEY_MAX], k_bought[MARKET__KEY_MAX + 8];
    market__key_sale(k_sale, realm, id);
    market__key_bought(k_bought, sizeof k_bought, k_sale);
    market__buf b = {0};
    market__rd_bought_all(&b, k_bought);
    int rc = market__read_buf(c, realm, &b);
    if (rc < 0) return rc;
    redisReply *r = b.rep[0];
    market__buf_free(&b);
    rc = market__reply_buyers(r, out, n);
    if (rc == MARKET_ERR_STORE)
        rc = market__fail_reply(c, "reading a sale's buyers", r);
    else if (rc == MARKET__REPLY_BAD)
        rc = market__fail(c, "the buyers of sale %s of realm %s are unreadable", id, realm);
    freeReplyObject(r);
    return rc;
}

/* ---- one batch: read, decide, commit ---- */

/* Names what the batch reads and writes: its frame (drawing a claim
 * token when a buy has an idempotency key), every buyer, and the house
 * when the lane remembers it. Returns MARKET_OK, or MARKET_ERR_STORE when
 * no token can be drawn. */
static int batch_index(struct sale_batch *b, market__cbatch *cb) {
    int rc = market__frame_begin(&b->f, cb, 0);
    if (rc != MARKET_OK) return rc;
    b->f.clock = 1;
    b->f.parties = &b->u;
    b->u.n = 0;
    b->house_u = SIZE_MAX;
    for (size_t i = 0; i < b->f.n; i++)
        b->buyer[i] = market__parties_of(&b->u, b->realm, b->f.req[i]->player);
    b->house[0] = '\0';
    if (strcmp(b->cache_key, b->k_sale) == 0) {
        memcpy(b->house, b->cache_house, sizeof b->house);
        b->house_u = market__parties_of(&b->u, b->realm, b->house);
    }
    return MARKET_OK;
}

/* Builds the read pipeline (see DESIGN, step 2) into b->k.rb; returns its length. */
static size_t read_build(const market__held *held, struct sale_batch *b) {
    market__buf *r = &b->k.rb;
    market__frame_read(&b->f, r);
    market__buf_arg(r, b->k_sale);
    market__buf_arg(r, b->k_bought);
    market__frame_watched(&b->f, held, 1, r);
    b->i_sale = r->n;
    market__rd_sale(r, b->k_sale);
    b->i_bought = r->n;
    market__rd_bought_begin(r, b->k_bought);
    for (size_t u = 0; u < b->u.n; u++)
        market__buf_arg(r, b->u.id[u]);
    market__buf_end(r, 0);
    return r->n;
}

/* The house's funds, on the sale's first batch in this lane: WATCH its
 * hash (the WATCH of the first read still holds) and read them. */
static int read_house(market_conn *c, struct sale_batch *b) {
    size_t n = b->u.n;
    b->house_u = market__parties_of(&b->u, b->realm, b->house);
    memcpy(b->cache_key, b->k_sale, sizeof b->cache_key);
    memcpy(b->cache_house, b->house, sizeof b->cache_house);
    if (b->u.n == n) return MARKET_OK; /* a buyer: read already */
    size_t u = b->house_u;
    market__buf *r = &b->k.rb;
    market__buf_reset(r);
    market__rd_watch_begin(r);
    market__buf_arg(r, b->u.k_user[u]);
    market__buf_end(r, 0);
    market__parties_read(&b->u, &u, 1, r);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    if (!market__reply_ok(r->rep[0]))
        rc = market__fail_reply(c, "read refused", r->rep[0]);
    else
        market__parties_parse(&b->u, r->rep + 1, &u, 1);
    b->bought[u] = b->read_bought[u] = 0; /* the house cannot buy (market__sale_rule) */
    market__replies_free(r->rep, r->n);
    return rc;
}

/* Reads what the batch decides on (one pipeline, two on a sale's first
 * batch in the lane). What concerns one buy (its idempotency record, its
 * buyer's funds or count) fails that buy alone when decided; what concerns
 * the batch (the frame, the clock) fails it. */
static int batch_read(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct sale_batch *b = cb->ks;
    size_t nc = read_build(held, b);
    int rc = market__pipeline_buf(c, &b->k.rb);
    if (rc < 0) return rc;
    redisReply **rep = b->k.rb.rep;
    const redisReply *bo = rep[b->i_bought];
    int64_t initial = 0;
    char house[MARKET_ID_MAX + 1] = "";
    rc = market__frame_judge(&b->f, c, held, rep);
    if (rc == MARKET_OK && !market__reply_array(bo, b->u.n, 0))
        rc = market__fail_reply(c, "reading the buyers' counts", bo);
    if (rc == MARKET_OK) {
        market__reply_sale(rep[b->i_sale], &b->st, &initial, b->item, house);
        b->read_left = b->st.left;
        for (size_t u = 0; u < b->u.n; u++)
            b->bought[u] = b->read_bought[u] = market__reply_bought(market__reply_at(bo, u));
    }
    market__replies_free(rep, nc);
    if (rc == MARKET_OK && b->st.known == MARKET__PRESENT && strcmp(house, b->house) != 0) {
        /* not remembered, or (never) another sale under the same key */
        memcpy(b->house, house, sizeof b->house);
        rc = read_house(c, b);
    }
    return rc;
}

/* Fills buy r's result from v, a replay: a success's price, a sold_out's
 * units left, a limit_exceeded's units the buyer may buy. */
static void replay(market_order *r, const market__outcome *v) {
    market_sale_result *res = &r->res.sale_buy;
    if (v->rc == MARKET_OK) {
        res->quantity = r->quantity; /* the same fingerprint: the same request */
        res->price = v->a;
        res->total = v->a * r->quantity;
        res->buyer_funds = v->b;
    } else if (v->rc == MARKET_ERR_SOLD_OUT) {
        res->left = v->a;
    } else if (v->rc == MARKET_ERR_LIMIT_EXCEEDED) {
        res->may_buy = v->a;
    }
}

/* Decides buy i against the sale as the batch left it (market__sale_apply),
 * by the store's clock; its record keeps what replay() reads back. */
static int decide_one(void *ks, size_t i, int64_t *a, int64_t *funds, int64_t *c) {
    (void)c; /* a sale takes no cut: its seller is the house */
    static const market__party nobody = {MARKET__ABSENT, 0};
    struct sale_batch *b = ks;
    market_order *r = b->f.req[i];
    market_sale_result *res = &r->res.sale_buy;
    size_t u = b->buyer[i];
    market__party house_missing = nobody;
    market__party *house = b->house_u != SIZE_MAX ? &b->u.party[b->house_u] : &house_missing;
    int64_t info = 0;
    *res = (market_sale_result){0};
    int rc = market__sale_apply(&b->st, b->f.now_ms, r->quantity, &b->bought[u], u == b->house_u,
                                &b->u.party[u], house, &info);
    if (rc > 0) rc = MARKET_ERR_STORE; /* cannot happen: every party is read */
    if (rc == MARKET_ERR_SOLD_OUT) *a = res->left = info;
    if (rc == MARKET_ERR_LIMIT_EXCEEDED) *a = res->may_buy = info;
    if (rc == MARKET_OK) {
        res->quantity = r->quantity;
        *a = res->price = b->st.price;
        res->total = r->quantity * b->st.price;
        *funds = res->buyer_funds = b->u.party[u].funds;
        res->left = b->st.left;
    }
    return rc;
}

/* Decides every buy in queue order, as if they ran one at a time. */
static size_t batch_decide(market__cbatch *cb) {
    struct sale_batch *b = cb->ks;
    return market__frame_decide(&b->f, decide_one, replay, b);
}

/* Lists the trades of the buys won (b->trade). */
static void list_trades(const market__held *held, struct sale_batch *b) {
    b->n_trades = 0;
    for (size_t i = 0; i < b->f.n; i++) {
        const market_order *r = b->f.req[i];
        if (!market__frame_won(&b->f, i)) continue;
        market__frame_trade(&b->f, i, 1,
                            (market__trade_rec){.buyer = r->player,
                                                .seller = b->house,
                                                .item = b->item,
                                                .quantity = r->quantity,
                                                .price = r->res.sale_buy.price,
                                                .goods = 1, /* a sale sells units */
                                                .fence = held->fence[0]},
                            b->trade, b->trade_req, &b->n_trades);
    }
}

/* The commit (see DESIGN, step 4). Returns MARKET_OK, MARKET__TXN_ABORTED,
 * MARKET__REDIRECTED or a market error. */
static int batch_commit(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct sale_batch *b = cb->ks;
    market__buf *w = &b->k.wb;
    market__buf_reset(w);
    market__fx_multi(w);
    market__frame_fences(&b->f, held, w);
    int64_t units = b->read_left - b->st.left;
    market__fx_sale_take(w, b->k_sale, units);
    for (size_t u = 0; u < b->u.n; u++) {
        int64_t q = b->bought[u] - b->read_bought[u];
        market__fx_sale_bought(w, b->k_bought, b->u.id[u], q);
        if (q > 0) market__fx_units(w, b->u.k_stacks[u], b->item, q);
    }
    market__parties_funds(&b->u, w);
    market__frame_records(&b->f, w);
    list_trades(held, b);
    int rc = market__trades_commit(c, w, 0, b->realm, &b->tw, b->trade, b->n_trades,
                                   b->args_trades);
    if (rc == MARKET_OK)
        market__trades_hand(cb->req, b->f.n, b->trade, b->trade_req, b->n_trades,
                            b->f.idem.same_as);
    if (rc == MARKET_OK && units > 0) {
        atomic_fetch_add_explicit(&c->m->stats.sale_units, (uint64_t)units, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->m->stats.sale_bought, b->n_trades, memory_order_relaxed);
    }
    return rc;
}

/* ---- the kind's ops (market_combine.h) ---- */

static int policy(const market *m) {
    (void)m;
    return MARKET__POLICY_HOLD;
}

/* Names what the batch reads and writes, and the sale's lock. */
static int prepare(market_conn *c, market__cbatch *cb) {
    struct sale_batch *b = cb->ks;
    MARKET__COUNT(c->m, sale_batches);
    b->realm = cb->realm;
    b->sale = cb->group;
    market__key_sale(b->k_sale, b->realm, b->sale);
    market__key_bought(b->k_bought, sizeof b->k_bought, b->k_sale);
    market__cbatch_lock(cb, "sale", b->sale);
    return batch_index(b, cb);
}

/* Buying units of a flash sale. */
const struct market__kind market__sale_kind = {
    .name = "sale buy",
    .slot = 1,
    .policy = policy,
    .state_size = sizeof(struct sale_batch),
    .prepare = prepare,
    .read = batch_read,
    .decide = batch_decide,
    .commit = batch_commit,
};
