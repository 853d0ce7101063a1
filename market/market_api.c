/* market_api.c - the public operations of market/ (market.h), thin over its
 * layers.
 *
 * The layers, each calling only those below it (their headers say more):
 *   market_api.c    the public API: lifecycle, purchase, list, unlist, reads;
 *   market_sweep.c  the sweeper: endings of listings and auctions, queued
 *                   under a realm's sweep lease;
 *   market_order.c  every order: its type's check, kind and lanes, its answer;
 *   market_purchase.c, market_buy.c, market_listing.c, market_sale.c,
 *   market_cancel.c, market_sell.c, market_auction.c  the order kinds
 *                   (market_kinds.h): purchases of listings; of units across
 *                   sellers and buy orders; list, unlist and endings; flash
 *                   sales (their creation, reads, and buys); cancels; sales
 *                   into the book; auctions, bids and their endings (and
 *                   their reads); over market_frame.c, what every kind's
 *                   attempt shares;
 *   market_combine.c the combiner: lanes, workers, batches under one lock
 *                   hold, for every kind of order (an ops table each);
 *   market_idem.c   a batch's idempotency keys;
 *   market_txn.c    leases, the guarded commit, one-at-a-time operations;
 *   market_store.c  the Redis connections, pipelines, replies;
 *   market_model.c  the data model's commands: every read and write a
 *                   batch makes, built into one command buffer (market_buf.c;
 *                   pure);
 * beside them the pure parts, which do no I/O: market_rules.c (the rules of
 * a purchase), market_keys.c (key names and kinds, idempotency records) and
 * market_index.c (the search indexes, cursors, search plans); and
 * market_search.c (searches) and market_trade.c (trade records: what a
 * commit writes, and their reads) over the store; and for tools, over
 * market_bulk.c (whole-realm pipelines and SCANs): market_world.c
 * (building and seeding worlds), market_audit.c (the audit),
 * market_reindex.c (rebuilding the indexes) and market_info.c (players
 * and INFO).
 */
#include "market/market.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_order.h"
#include "market/market_trade.h"

/* ---- orders ---- */

static void order_wake(market_order *o) { market__combine_wake(o->ud); }

/* Hands o (inputs filled; its done and ud are set here) to c's market as
 * market_order_submit() does (a list with a duration noted first:
 * market_ending_note()), and waits for its outcome
 * (market__combine_wait): every one-request function's way. Returns o->rc,
 * or MARKET_ERR_INVALID (c NULL, or the arguments fail o's type's check),
 * MARKET_ERR_BUSY, MARKET_ERR_NOMEM; a failure with a reason
 * (MARKET_ERR_HAS_REASON) leaves it in c's errstr too. Like every call on
 * c, from one thread at a time. */
int market_order_run(market_conn *c, market_order *o) {
    market__combiner *lanes = c ? market__order_lanes(c->m, o) : NULL;
    if (!lanes) return MARKET_ERR_INVALID;
    if ((o->type == MARKET_ORDER_LIST && o->duration_s) || o->type == MARKET_ORDER_AUCTION) {
        /* ends the sweepers must find: see market_ending_note() */
        int rc = market_ending_note(c, o->realm);
        if (rc != MARKET_OK) return rc;
    }
    market__waiter w;
    o->done = order_wake;
    o->ud = &w;
    int rc = market__waiter_init(&w, lanes);
    if (rc == MARKET_OK) rc = market__order_submit(c->m, o);
    rc = market__combine_wait(&w, rc == MARKET_OK ? &o->q : NULL, rc);
    if (MARKET_ERR_HAS_REASON(rc)) snprintf(c->errstr, sizeof c->errstr, "%s", o->why);
    return rc;
}

/* Runs o on c (market_order_run()) and copies its result, the first size
 * bytes of o->res, into res: every one-request function's end. */
static int run_into(market_conn *c, market_order *o, void *res, size_t size) {
    int rc = market_order_run(c, o);
    memcpy(res, &o->res, size);
    return rc;
}

/* ---- lifecycle ---- */

/* Creates a market over cfg (copied) and lock (borrowed: it must outlive the
 * market). Returns a new market; caller frees with market_free(). Returns
 * NULL with *err = MARKET_ERR_INVALID on a bad config, MARKET_ERR_NOMEM on
 * out-of-memory. Does not touch Redis. */
market *market_new(const market_config *cfg, lock_client *lock, int *err) {
    int dummy;
    if (!err) err = &dummy;
    if (!cfg || !lock || cfg->lock_ttl_ms == 0 || cfg->redis_timeout_ms <= 0 ||
        cfg->strategy > MARKET_STRATEGY_OPTIMISTIC) {
        *err = MARKET_ERR_INVALID;
        return NULL;
    }
    market *m = calloc(1, sizeof *m);
    if (!m) {
        *err = MARKET_ERR_NOMEM;
        return NULL;
    }
    m->cfg = *cfg;
    int *ack_ms = &m->cfg.replica_ack_timeout_ms;
    if (*ack_ms <= 0) *ack_ms = cfg->redis_timeout_ms / 2;
    if (cfg->min_replicas_ack && (*ack_ms <= 0 || *ack_ms >= cfg->redis_timeout_ms)) {
        /* WAIT must end before the socket's timeout */
        free(m);
        *err = MARKET_ERR_INVALID;
        return NULL;
    }
    if (m->cfg.workers == 0) m->cfg.workers = 4;
    if (m->cfg.workers > MARKET_WORKERS_MAX) {
        free(m);
        *err = MARKET_ERR_INVALID;
        return NULL;
    }
    if (m->cfg.batch_max == 0) m->cfg.batch_max = 64;
    if (m->cfg.batch_max > MARKET__BATCH_MAX) m->cfg.batch_max = MARKET__BATCH_MAX;
    m->lock = lock;
    rconn_addr la;
    m->lock_in_store = lock_store_addr(lock, &la) == LOCK_OK && rconn_addr_same(&la, &cfg->redis);
    if (cfg->redis.master_name[0] || cfg->redis.cluster) {
        int rerr = RCONN_OK;
        if (cfg->redis.cluster)
            m->cluster = rconn_cluster_new(&cfg->redis, cfg->redis_timeout_ms, &rerr);
        else
            m->sentinel = rconn_sentinel_new(&cfg->redis, cfg->redis_timeout_ms, &rerr);
        if (!m->sentinel && !m->cluster) {
            free(m);
            *err = rerr == RCONN_ERR_NOMEM ? MARKET_ERR_NOMEM : MARKET_ERR_INVALID;
            return NULL;
        }
    }
    int mu = pthread_mutex_init(&m->noted_mu, NULL) == 0;
    if (!mu || market__orders_new(m) < 0) {
        if (mu) pthread_mutex_destroy(&m->noted_mu);
        rconn_cluster_free(m->cluster);
        rconn_sentinel_free(m->sentinel);
        free(m);
        *err = MARKET_ERR_NOMEM;
        return NULL;
    }
    *err = MARKET_OK;
    return m;
}

/* Frees m; market_free(NULL) is a no-op. Every market_conn of m must be freed
 * first. This function can't fail. */
void market_free(market *m) {
    if (!m) return;
    market__sweeper_stop(m); /* it queues endings */
    market__orders_free(m); /* serves what is queued, releases the locks */
    rconn_sentinel_free(m->sentinel);
    rconn_cluster_free(m->cluster);
    pthread_mutex_destroy(&m->noted_mu);
    free(m);
}

/* Returns why the store last failed c's caller (after an operation that
 * returned MARKET_ERR_STORE): "Redis refused AUTH: WRONGPASS ...", "commit
 * refused: READONLY ...", "cannot connect to host:port: Connection refused".
 * The text belongs to c and changes with its next failure; "" when none.
 * This function can't fail. */
const char *market_conn_errstr(const market_conn *c) {
    return c ? c->errstr : "";
}

/* ---- helpers ---- */

/* Returns a static description of a market code. Can't fail. */
const char *market_strerror(int err) {
    switch (err) {
#define MARKET_ERR_STR(name, val, msg)                                                             \
    case MARKET_##name: return msg;
        MARKET_ERRNO_MAP(MARKET_ERR_STR)
#undef MARKET_ERR_STR
    }
    return "unknown market error";
}

/* Buys item, listed by seller on realm's market, for buyer. expect_price > 0 makes the purchase
 * conditional on that price. Fills *res on success (and res->price on
 * MARKET_ERR_PRICE_CHANGED). Returns MARKET_OK or: ERR_INVALID (bad ids,
 * buyer == seller), ERR_NOT_LISTED, ERR_PRICE_CHANGED, ERR_NO_PLAYER (no such
 * buyer), ERR_INSUFFICIENT_FUNDS, ERR_OVERFLOW (the seller's funds would
 * overflow), ERR_BUSY (the wait budget was spent: nothing is decided after
 * it), ERR_STORE (Redis down or failing), ERR_LEASE_LOST (the lease lapsed
 * or was taken over before the commit: nothing was written), ERR_CONFLICT,
 * ERR_NOMEM. Nothing is written unless it returns MARKET_OK - with one
 * exception: ERR_STORE after the connection failed while EXEC's answer was
 * on its way leaves the outcome unknown (a client retries with the same
 * idempotency key to learn it; see market_purchase_idem). */
int market_purchase(market_conn *c, const char *realm, const char *buyer, const char *seller,
                    const char *item, int64_t expect_price, market_purchase_result *res) {
    return market_purchase_idem(c, realm, buyer, seller, item, expect_price, NULL, res);
}

/* market_purchase(), made idempotent by idem (may be NULL; see market_idem).
 * A replay returns the stored outcome with res->replayed set: MARKET_OK with
 * the stored price and buyer_funds, or the stored refusal (res->price holds
 * the price of a price_changed). Also returns MARKET_ERR_IDEM_MISMATCH,
 * MARKET_ERR_IN_PROGRESS (another attempt of the same key is deciding), and
 * ERR_INVALID for a bad key or fingerprint. */
int market_purchase_idem(market_conn *c, const char *realm, const char *buyer, const char *seller,
                         const char *item, int64_t expect_price, const market_idem *idem,
                         market_purchase_result *res) {
    return market_purchase_units(c, realm, buyer, seller, item, 1, expect_price, idem, res);
}

/* market_purchase_idem() of quantity units (1..MARKET_QUANTITY_MAX) of a
 * listing of stackable goods (a unique item's listing is one unit): the
 * units go to the buyer's stacks, the total (quantity x the unit price)
 * moves, and the rest of the listing stays listed. Also returns
 * MARKET_ERR_NOT_ENOUGH when fewer units are listed (res->available says
 * how many). */
int market_purchase_units(market_conn *c, const char *realm, const char *buyer,
                          const char *seller, const char *item, int64_t quantity,
                          int64_t expect_price, const market_idem *idem,
                          market_purchase_result *res) {
    if (!res || quantity < 1) return MARKET_ERR_INVALID; /* 0 (one) is for orders only */
    market_order o = {.type = MARKET_ORDER_PURCHASE, .realm = realm, .player = buyer,
                      .seller = seller, .item = item, .quantity = quantity,
                      .price = expect_price, .idem = idem};
    return run_into(c, &o, res, sizeof *res);
}

/* Buys quantity (1..MARKET_QUANTITY_MAX) units of item on realm's market
 * for buyer, from the cheapest listings at or under max_price
 * (1..MARKET_PRICE_MAX) of other sellers, all or nothing; idem (may be
 * NULL) makes it idempotent (a replay answers the total, the buyer's funds
 * and the first trade's id). Fills *res: the total, the buyer's funds after
 * it, and each part (seller, units, price, trade id). Returns MARKET_OK, or
 * ERR_INVALID, ERR_NOT_ENOUGH (fewer units at that price: res->available,
 * counted over the MARKET_FILL_MAX cheapest listings), ERR_NO_PLAYER,
 * ERR_INSUFFICIENT_FUNDS, ERR_OVERFLOW, ERR_BUSY, ERR_STORE,
 * ERR_LEASE_LOST, ERR_CONFLICT, ERR_IDEM_MISMATCH, ERR_IN_PROGRESS,
 * ERR_NOMEM. Nothing is written unless it returns MARKET_OK (with the
 * exception market_purchase() describes). */
int market_buy_units(market_conn *c, const char *realm, const char *buyer, const char *item,
                     int64_t quantity, int64_t max_price, const market_idem *idem,
                     market_buy_result *res) {
    if (!res) return MARKET_ERR_INVALID;
    market_order o = {.type = MARKET_ORDER_BUY, .realm = realm, .player = buyer, .item = item,
                      .quantity = quantity, .price = max_price, .idem = idem};
    return run_into(c, &o, res, sizeof *res);
}

/* Returns 1 when m takes orders with market_order_submit(): every
 * strategy's market does (they all go through the combiner); 0 for NULL.
 * This function can't fail. */
int market_can_submit(const market *m) { return m != NULL; }

/* Queues order o (see market_order) and returns at once; a list with a
 * duration must have had its realm noted (market_ending_note()) for the
 * sweepers to end it. Returns MARKET_OK
 * when o is queued: o->done(o) will be called exactly once, from a market
 * worker's thread, with o->rc and o->res set, within about o's wait budget
 * (acquire_timeout_ms) plus the Redis timeout. Otherwise returns
 * MARKET_ERR_INVALID (bad arguments, checked as its type's one-request
 * function checks them; no done callback), MARKET_ERR_BUSY (after
 * market_shutdown()) or MARKET_ERR_NOMEM (the worker cannot start), and
 * done is not called. */
int market_order_submit(market *m, market_order *o) { return market__order_submit(m, o); }

/* Stops taking orders: every queued one is served first, then the workers
 * end and their locks are released. Later purchases, lists, unlists and
 * sale buys are refused with MARKET_ERR_BUSY; reads still work.
 * Idempotent; this function can't fail. */
void market_shutdown(market *m) {
    if (!m) return;
    market__sweeper_stop(m); /* it queues endings */
    market__orders_stop(m);
}

/* Copies the counters into *out (each read atomically; together they are
 * not one snapshot). This function can't fail. */
void market_stats_get(const market *m, market_stats *out) {
    market *mm = (market *)m; /* atomic loads take non-const pointers in C11 */
    out->purchases = atomic_load(&mm->stats.purchases);
    out->purchased = atomic_load(&mm->stats.purchased);
    out->batches = atomic_load(&mm->stats.batches);
    out->sale_buys = atomic_load(&mm->stats.sale_buys);
    out->sale_bought = atomic_load(&mm->stats.sale_bought);
    out->sale_units = atomic_load(&mm->stats.sale_units);
    out->sale_batches = atomic_load(&mm->stats.sale_batches);
    out->txn_aborts = atomic_load(&mm->stats.txn_aborts);
    out->lock_busy = atomic_load(&mm->stats.lock_busy);
    out->lease_lost = atomic_load(&mm->stats.lease_lost);
    out->store_errors = atomic_load(&mm->stats.store_errors);
    out->not_replicated = atomic_load(&mm->stats.not_replicated);
    out->failovers = rconn_sentinel_failovers(mm->sentinel);
    out->expired = atomic_load(&mm->stats.expired);
    out->sweeps = atomic_load(&mm->stats.sweeps);
    out->settled = atomic_load(&mm->stats.settled);
    out->auctions_ended = atomic_load(&mm->stats.auctions_ended);
    out->late_ms = atomic_load(&mm->stats.late_ms);
    for (int i = 0; i < MARKET_LATE_BUCKETS; i++)
        out->late_bucket[i] = atomic_load(&mm->stats.late_bucket[i]);
    rconn_cluster_stats cs;
    rconn_cluster_stats_get(mm->cluster, &cs);
    out->cluster_moved = cs.moved;
    out->cluster_ask = cs.ask;
    out->cluster_refreshes = cs.refreshes;
    out->cluster_tryagain = atomic_load(&mm->stats.cluster_tryagain);
    out->cluster_down = atomic_load(&mm->stats.cluster_down);
    out->lock_acquired = atomic_load(&mm->stats.lock_acquired);
    out->lock_waits = atomic_load(&mm->stats.lock_waits);
    out->lock_wait_us = atomic_load(&mm->stats.lock_wait_us);
    for (size_t i = 0; i < MARKET_WAIT_BUCKETS; i++)
        out->lock_wait_bucket[i] = atomic_load(&mm->stats.lock_wait_bucket[i]);
}

static const char *const strategy_names[] = {"market", "item", "optimistic"};

/* Parses "market", "item" or "optimistic". Returns MARKET_OK or
 * MARKET_ERR_INVALID. */
int market_strategy_parse(const char *name, enum market_strategy *out) {
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, strategy_names[i]) == 0) {
            *out = (enum market_strategy)i;
            return MARKET_OK;
        }
    return MARKET_ERR_INVALID;
}

/* Returns the strategy's name (static). Can't fail. */
const char *market_strategy_name(enum market_strategy s) {
    return (unsigned)s < 3 ? strategy_names[s] : "unknown";
}

/* ---- list and unlist ---- */

/* Moves item from seller's inventory to realm's market at price. Returns
 * MARKET_OK or ERR_INVALID, ERR_NOT_HELD (the seller does not hold it),
 * ERR_BUSY, ERR_STORE, ERR_LEASE_LOST, ERR_CONFLICT, ERR_NOMEM. */
int market_list(market_conn *c, const char *realm, const char *seller, const char *item,
                int64_t price) {
    return market_list_idem(c, realm, seller, item, price, NULL, NULL);
}

/* market_list(), made idempotent by idem (may be NULL; see market_idem):
 * *replayed (may be NULL) tells a replay of a stored outcome (MARKET_OK, or
 * the stored refusal ERR_NOT_HELD). Also returns MARKET_ERR_IDEM_MISMATCH
 * and MARKET_ERR_IN_PROGRESS. */
int market_list_idem(market_conn *c, const char *realm, const char *seller, const char *item,
                     int64_t price, const market_idem *idem, int *replayed) {
    market_list_result res;
    int rc = market_list_units(c, realm, seller, item, 0, price, idem, &res);
    if (replayed) *replayed = rc == MARKET_ERR_INVALID ? 0 : res.replayed;
    return rc;
}

/* market_list_idem() of stackable goods as well: with quantity 0 it lists
 * the seller's unique item, or else one unit; with quantity
 * 1..MARKET_QUANTITY_MAX that many units of the seller's stack, at price
 * each, added to the seller's listing of the same item when it has the
 * same price. Fills *res: the units listed now (1: a unique item), and on a
 * refusal what the seller holds (ERR_NOT_HELD) or the price of the listing
 * there is (ERR_PRICE_CHANGED). */
int market_list_units(market_conn *c, const char *realm, const char *seller, const char *item,
                      int64_t quantity, int64_t price, const market_idem *idem,
                      market_list_result *res) {
    if (!res) return MARKET_ERR_INVALID;
    market_order o = {.type = MARKET_ORDER_LIST, .realm = realm, .player = seller, .item = item,
                      .quantity = quantity, .price = price, .idem = idem};
    return run_into(c, &o, res, sizeof *res);
}

/* Moves item, listed by seller on realm's market, back to the seller's inventory and stores the
 * price it had in *price (may be NULL). Returns MARKET_OK or ERR_INVALID,
 * ERR_NOT_LISTED, ERR_BUSY, ERR_STORE, ERR_LEASE_LOST, ERR_CONFLICT. */
int market_unlist(market_conn *c, const char *realm, const char *seller, const char *item,
                  int64_t *price) {
    return market_unlist_units(c, realm, seller, item, price, NULL);
}

/* market_unlist() of a listing of units as well: they go back to the
 * seller's stack, and *units (may be NULL) says how many (1: a unique
 * item). */
int market_unlist_units(market_conn *c, const char *realm, const char *seller, const char *item,
                        int64_t *price, int64_t *units) {
    market_order o = {.type = MARKET_ORDER_UNLIST, .realm = realm, .player = seller,
                      .item = item};
    int rc = market_order_run(c, &o);
    if (rc == MARKET_OK && price) *price = o.res.unlist.price;
    if (rc == MARKET_OK && units) *units = o.res.unlist.units;
    return rc;
}

/* ---- flash sales ---- */

/* Buys quantity units of sale of realm for buyer (see market.h's data
 * model), made idempotent by idem (may be NULL; see market_idem), and waits
 * for the outcome. Fills *res. Returns MARKET_OK, or ERR_INVALID (bad
 * arguments, or the buyer is the sale's house), ERR_NO_SALE,
 * ERR_SALE_NOT_ACTIVE, ERR_NO_PLAYER (no such buyer), ERR_SOLD_OUT
 * (res->left: the units left), ERR_LIMIT_EXCEEDED (res->may_buy),
 * ERR_INSUFFICIENT_FUNDS, ERR_OVERFLOW (the house's funds), ERR_BUSY (the
 * wait budget was spent), ERR_STORE, ERR_LEASE_LOST, ERR_CONFLICT,
 * ERR_NOT_REPLICATED, ERR_IDEM_MISMATCH, ERR_IN_PROGRESS, ERR_NOMEM. A
 * replay returns the stored outcome with res->replayed set. Nothing is
 * written unless it returns MARKET_OK (or a final refusal under an
 * idempotency key, which is recorded), but for a store that failed while
 * EXEC's answer was on its way. */
int market_sale_buy(market_conn *c, const char *realm, const char *sale, const char *buyer,
                    int64_t quantity, const market_idem *idem, market_sale_result *res) {
    if (!res) return MARKET_ERR_INVALID;
    market_order o = {.type = MARKET_ORDER_SALE_BUY, .realm = realm, .player = buyer,
                      .sale = sale, .quantity = quantity, .idem = idem};
    return run_into(c, &o, res, sizeof *res);
}

/* ---- reading ---- */

/* Reads player id of realm: name, funds, sorted inventory and stacks. Returns MARKET_OK with
 * *out a new player (caller frees with market_player_free), or ERR_INVALID,
 * ERR_NO_PLAYER, ERR_STORE, ERR_NOMEM with *out NULL. No lock is taken: the
 * three reads come from one pipeline, not one snapshot. */
int market_player_get(market_conn *c, const char *realm, const char *id, market_player **out) {
    if (!out) return MARKET_ERR_INVALID;
    *out = NULL;
    if (!c || !market_id_valid(realm) || !market_id_valid(id)) return MARKET_ERR_INVALID;
    char k_user[MARKET__KEY_MAX], k_inv[MARKET__KEY_MAX], k_stacks[MARKET__KEY_MAX];
    market__key_user(k_user, realm, id);
    market__key_inventory(k_inv, realm, id);
    market__key_stacks(k_stacks, realm, id);
    market__buf rd = {0};
    market__rd_player(&rd, k_user, k_inv, k_stacks);
    int rc = market__read_buf(c, realm, &rd);
    if (rc < 0) return rc;
    market_player *p = calloc(1, sizeof *p);
    if (!p) {
        rc = MARKET_ERR_NOMEM;
        goto out;
    }
    snprintf(p->id, sizeof p->id, "%s", id);
    if ((rc = market__reply_player(rd.rep[0], rd.rep[1], rd.rep[2], p)) < 0) goto out;
    *out = p;
    p = NULL;
out:
    market_player_free(p);
    market__replies_free(rd.rep, 3);
    market__buf_free(&rd);
    return rc;
}

/* Frees p; NULL is a no-op. This function can't fail. */
void market_player_free(market_player *p) {
    if (!p) return;
    free(p->inventory);
    free(p->stacks);
    free(p);
}

/* Reads, in one round trip, the units of the n listings l[0..n) of realm
 * rl into their quantity and stack (a listing without a count is a unique
 * item: 1), and their ends. Returns MARKET_OK, or ERR_STORE, ERR_NOMEM. */
static int listings_fill(market_conn *c, const market__realm *rl, market_listing *l, size_t n) {
    if (n == 0) return MARKET_OK;
    char(*member)[MARKET__MEMBER_MAX] = malloc(n * sizeof *member);
    market__buf b = {0};
    int rc = MARKET_ERR_NOMEM, read = 0;
    if (!member) goto out;
    for (size_t i = 0; i < n; i++)
        snprintf(member[i], sizeof member[i], "%s.%s", l[i].item, l[i].seller);
    market__rd_listing_units_begin(&b, rl);
    for (size_t i = 0; i < n; i++)
        market__buf_arg(&b, member[i]);
    market__buf_end(&b, 0);
    market__rd_ends_of_begin(&b, rl);
    for (size_t i = 0; i < n; i++)
        market__buf_arg(&b, member[i]);
    market__buf_end(&b, 0);
    if ((rc = market__pipeline_buf(c, &b)) < 0) goto out;
    read = 1;
    for (size_t k = 0; k < 2; k++) {
        const redisReply *r = b.rep[k];
        if (!market__reply_array(r, n, 0)) {
            rc = market__fail_reply(
                c, k ? "reading the listings' ends" : "reading the listings' units", r);
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            if ((k ? market__listing_end(&l[i], market__reply_at(r, i))
                   : market__listing_units(&l[i], market__reply_at(r, i))) < 0) {
                rc = market__fail(c, "the %s of %s are unreadable", k ? "end" : "units", member[i]);
                goto out;
            }
    }
    rc = MARKET_OK;
out:
    if (read) market__replies_free(b.rep, b.n);
    free(member);
    market__buf_free(&b);
    return rc;
}

/* Reads up to limit listings of realm's market, cheapest first, starting at offset. Returns
 * MARKET_OK with *out a new array of *n listings (caller frees with free();
 * NULL when *n is 0) and *total the number of listings; or ERR_INVALID,
 * ERR_STORE, ERR_NOMEM. */
int market_listings(market_conn *c, const char *realm, size_t offset, size_t limit,
                    market_listing **out, size_t *n, size_t *total) {
    if (!out || !n || !total) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = *total = 0;
    if (!c || !market_id_valid(realm) || limit == 0 || offset > INT32_MAX || limit > INT32_MAX)
        return MARKET_ERR_INVALID;
    market__realm rl;
    market__realm_init(&rl, realm);
    char start[24], stop[24];
    snprintf(start, sizeof start, "%zu", offset);
    snprintf(stop, sizeof stop, "%zu", offset + limit - 1);
    market__buf rd = {0};
    market__rd_count(&rd, &rl);
    market__rd_market_range(&rd, &rl, start, stop);
    int rc = market__read_buf(c, realm, &rd);
    if (rc < 0) return rc;
    redisReply **rep = rd.rep;
    market_listing *l = NULL;
    size_t count = 0;
    int64_t all = market__reply_count(rep[0]);
    if (all < 0) {
        rc = MARKET_ERR_STORE;
        goto out;
    }
    if ((rc = market__reply_market_page(rep[1], &l, &count)) < 0) goto out;
    rc = listings_fill(c, &rl, l, count);
    if (rc < 0) goto out;
    *out = l;
    l = NULL;
    *n = count;
    *total = (size_t)all;
out:
    free(l);
    market__replies_free(rep, 2);
    market__buf_free(&rd);
    return rc;
}

/* Asks Redis for a PONG. Returns MARKET_OK or MARKET_ERR_STORE. */
int market_ping(market_conn *c) {
    if (!c) return MARKET_ERR_INVALID;
    market__buf rd = {0};
    market__rd_ping(&rd);
    int rc = market__pipeline_buf(c, &rd);
    if (rc == MARKET_OK) {
        rc = market__reply_ok(rd.rep[0]) ? MARKET_OK : MARKET_ERR_STORE;
        market__replies_free(rd.rep, 1);
    }
    market__buf_free(&rd);
    return rc;
}
