/* market_direct.c - the direct trade kind: a trade one player proposes to
 * another (MARKET_ORDER_DIRECT), its accept by the other, which swaps both
 * sides at once or nothing (_ACCEPT), and its cancel by either (_CANCEL),
 * served in batches by the combiner (market_combine.c) on the purchases'
 * lanes; and the reads of direct trades.
 *
 * DESIGN
 * A trade is a hash, direct:{r}:<id> (market_model_deals.c names its fields): its
 * two sides, each some unique items, units of goods and funds, and its state;
 * while it is open, an entry in each side's index of open trades, scored by
 * when it expires.
 *
 * Nothing is escrowed at proposal: the proposer's side is checked when it
 * proposes (a proposal of goods one lacks is refused), and both sides are
 * checked again, and moved, when the trade is accepted. So an open trade
 * holds nothing: a player may propose the same sword to three players, and
 * list or sell it meanwhile; an accept that finds a side short is refused,
 * nothing moved, and the trade stays open. An abandoned proposal then costs
 * nothing and needs no sweeper to give anything back: it expires at its
 * time (and its hash goes from the store a week after). This is the MMO
 * trade window's contract: what counts is what both hold when both agree.
 *
 * Locks. The market strategy takes the realm's market lock (kept from one
 * batch to the next). The item strategy takes the locks of every player
 * whose goods its orders move, "lock:player:{r}:<id>", in one all-or-nothing
 * acquisition (lock_acquire_multi(): nothing is held while waiting, so two
 * trades A->B and B->A accepted at the same moment never deadlock), their
 * keys named in byte order of the players' ids; a trade's sides are read
 * before, without a lock (they never change), and an accept whose trade
 * appeared only between that read and the locked one is chosen again. The
 * optimistic strategy takes none. Under every strategy the read's WATCH of
 * the trades, the players' hashes, inventories and stacks guards the commit.
 *
 * An attempt
 *   1. reads, under WATCH, the trades its orders name, the holdings of each
 *      item on either side of each trade (and of each new proposal's side),
 *      the players' funds, the store's clock and the realm's last trade id;
 *   2. decides in queue order against an in-memory copy: a proposal checks
 *      its proposer's side and takes an id; an accept by the trade's `to`
 *      (another player's is answered as no such trade; the proposer's as
 *      own_trade) of a trade still open checks both sides as the batch left
 *      them and swaps them; a cancel by either side closes it;
 *   3. commits in one MULTI/EXEC: our fences, the records, the funds, each
 *      holding that changed (its final count: an item in or out, units by
 *      their difference, a last unit with an HDEL), the trades and their
 *      index entries.
 * A direct trade pays no cut and makes no trade record: its hash, kept a
 * week after it closes, is its record.
 */
#include "market/market_kinds.h"

#include <stdlib.h>
#include <string.h>

#include "market/market_frame.h"

#define DIRECT_BATCH_MAX (MARKET__HELD_MAX / 2) /* orders one batch takes: two locks each */
#define HOLDINGS_MAX (DIRECT_BATCH_MAX * 8 * MARKET_DIRECT_GOODS_MAX) /* 4 per item of a trade */

/* A player's holding of one item: read, then as the batch decides. */
struct holding {
    size_t party;      /* whose: the batch's parties */
    const char *item;  /* into an order's goods or a trade's */
    int unique;        /* 1: a unique item, held (1) or not (0); 0: units */
    int64_t read, now; /* -1: unreadable */
};

/* The kind's state on a lane: a batch of one realm's direct trade orders. */
struct direct_batch {
    market__kstate k; /* its read and commit buffers (market_combine.h) */
    market__frame f;
    market__realm realm;
    /* the trades its accepts and cancels name, each once */
    market__deals d;               /* and their codes as read under WATCH */
    int seen_rc[DIRECT_BATCH_MAX]; /* as read before the locks (prepare) */
    market_direct seen[DIRECT_BATCH_MAX];
    market_direct t[DIRECT_BATCH_MAX]; /* as read under WATCH, then as decided */
    int changed[DIRECT_BATCH_MAX];
    size_t of[DIRECT_BATCH_MAX]; /* order i's trade (an accept's, a cancel's) */
    market__parties u;
    unsigned char goods[MARKET__PARTIES_MAX]; /* the party's goods are read (WATCHed) */
    struct holding h[HOLDINGS_MAX];
    size_t n_h;
    int any_new;             /* proposals: the realm's last id is read */
    int64_t last_read, last; /* the realm's last direct trade id, as read and as decided */
    size_t i_h, i_last;
};

/* The holding of item by party p (unique or units), added when new. */
static struct holding *holding(struct direct_batch *b, size_t p, const char *item, int unique) {
    for (size_t k = 0; k < b->n_h; k++)
        if (b->h[k].party == p && b->h[k].unique == unique && strcmp(b->h[k].item, item) == 0)
            return &b->h[k];
    b->goods[p] = 1;
    b->h[b->n_h] = (struct holding){.party = p, .item = item, .unique = unique};
    return &b->h[b->n_h++];
}

/* Names the holdings side g moves: out of p's (from), into q's (SIZE_MAX: none). */
static void side_holdings(struct direct_batch *b, const market_goods *g, size_t p, size_t q) {
    for (size_t k = 0; k < g->n_items; k++) {
        holding(b, p, g->items[k], 1);
        if (q != SIZE_MAX) holding(b, q, g->items[k], 1);
    }
    for (size_t k = 0; k < g->n_units; k++) {
        holding(b, p, g->unit_item[k], 0);
        if (q != SIZE_MAX) holding(b, q, g->unit_item[k], 0);
    }
}

/* Reads the batch's trades before any lock (their sides never change) into seen[].
 * Returns MARKET_OK, or the error of the whole batch. */
static int seen_read(market_conn *c, struct direct_batch *b) {
    market__buf *r = &b->k.rb;
    market__buf_reset(r);
    market__deals_read(&b->d, b->realm.id, r);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    market__deals_parse(&b->d, r->rep, b->seen);
    memcpy(b->seen_rc, b->d.rc, b->d.n * sizeof *b->seen_rc);
    market__replies_free(r->rep, r->n);
    return MARKET_OK;
}

static int id_cmp(const void *x, const void *y) {
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Item strategy: the locks of the players whose goods the batch moves, in byte order of
 * their ids (see DESIGN). */
static void name_locks(struct direct_batch *b, market__cbatch *cb) {
    const char *ids[MARKET__HELD_MAX];
    size_t n = 0;
    for (size_t p = 0; p < b->u.n && n < MARKET__HELD_MAX; p++)
        if (b->goods[p]) ids[n++] = b->u.id[p];
    qsort(ids, n, sizeof *ids, id_cmp);
    for (size_t k = 0; k < n; k++)
        market__cbatch_lock(cb, "player", ids[k]);
}

/* Names the batch's trades, players, holdings and locks. */
static int prepare(market_conn *c, market__cbatch *cb) {
    struct direct_batch *b = cb->ks;
    market__realm_init(&b->realm, cb->realm);
    int rc = market__frame_begin(&b->f, cb, 0);
    b->f.clock = 1;
    b->d.t = &market__deal_direct;
    b->d.n = b->u.n = b->n_h = 0;
    b->f.deals = &b->d;
    b->f.deals_out = b->t;
    b->f.parties = &b->u;
    b->any_new = 0;
    memset(b->goods, 0, sizeof b->goods);
    for (size_t i = 0; rc == MARKET_OK && i < b->f.n; i++) {
        market_order *o = b->f.req[i];
        b->of[i] = SIZE_MAX;
        if (o->type != MARKET_ORDER_DIRECT) {
            b->of[i] = market__deals_of(&b->d, o->id);
            continue;
        }
        b->any_new = 1;
        size_t p = market__parties_of(&b->u, b->realm.id, o->player);
        market__parties_of(&b->u, b->realm.id, o->to);
        b->goods[p] = 1; /* its side is checked under its lock, if only its funds */
        side_holdings(b, o->give, p, SIZE_MAX);
    }
    if (rc == MARKET_OK && b->d.n) rc = seen_read(c, b);
    for (size_t j = 0; rc == MARKET_OK && j < b->d.n; j++) {
        const market_direct *t = &b->seen[j];
        if (b->seen_rc[j] != MARKET_OK) continue;
        size_t p = market__parties_of(&b->u, b->realm.id, t->from);
        size_t q = market__parties_of(&b->u, b->realm.id, t->to);
        b->goods[p] = b->goods[q] = 1; /* a cancel moves none, but takes both locks */
        side_holdings(b, &t->give, p, q);
        side_holdings(b, &t->get, q, p);
    }
    if (cb->policy == MARKET__POLICY_EACH) name_locks(b, cb);
    return rc;
}

/* The read (see DESIGN, step 1). Returns MARKET_OK, MARKET__CHOOSE_AGAIN (a trade appeared
 * since prepare read it), or the error of the whole batch. */
static int batch_read(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct direct_batch *b = cb->ks;
    market__buf *r = &b->k.rb;
    market__frame_read(&b->f, r);
    for (size_t p = 0; p < b->u.n; p++)
        if (b->goods[p]) {
            market__buf_arg(r, b->u.k_inv[p]);
            market__buf_arg(r, b->u.k_stacks[p]);
        }
    if (b->any_new) market__buf_arg(r, b->realm.directs);
    market__frame_watched(&b->f, held, 0, r);
    b->i_h = r->n;
    for (size_t k = 0; k < b->n_h; k++) {
        const struct holding *h = &b->h[k];
        if (h->unique)
            market__rd_holds(r, b->u.k_inv[h->party], h->item);
        else
            market__rd_units(r, b->u.k_stacks[h->party], h->item);
    }
    b->i_last = r->n;
    if (b->any_new) market__rd_directs_last(r, &b->realm);
    int rc = market__pipeline_buf(c, r);
    if (rc < 0) return rc;
    redisReply **rep = r->rep;
    rc = market__frame_judge(&b->f, c, held, rep);
    for (size_t j = 0; rc == MARKET_OK && j < b->d.n; j++) {
        const market_direct *s = &b->seen[j], *t = &b->t[j];
        if (b->d.rc[j] == MARKET_OK &&
            (b->seen_rc[j] != MARKET_OK || strcmp(s->from, t->from) || strcmp(s->to, t->to)))
            rc = MARKET__CHOOSE_AGAIN; /* its sides are not named, nor locked */
    }
    for (size_t k = 0; rc == MARKET_OK && k < b->n_h; k++) {
        struct holding *h = &b->h[k];
        h->read =
            h->unique ? market__reply_holds(rep[b->i_h + k]) : market__reply_units(rep[b->i_h + k]);
    }
    b->last_read = 0;
    if (rc == MARKET_OK && b->any_new &&
        market__reply_orders_last(rep[b->i_last], &b->last_read) < 0)
        rc = market__fail(c, "the last direct trade id of realm %s is unreadable", b->realm.id);
    market__replies_free(rep, r->n);
    return rc;
}

/* Whether party p holds side g as the batch left it: MARKET_OK, or why not (res names
 * what it lacks). */
static int side_held(struct direct_batch *b, size_t p, const market_goods *g,
                     market_direct_result *res) {
    const market__party *pp = &b->u.party[p];
    int rc = MARKET_OK;
    const char *missing = NULL;
    if (pp->known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    if (pp->known != MARKET__PRESENT) return MARKET_ERR_NO_PLAYER;
    for (size_t k = 0; rc == MARKET_OK && k < g->n_items; k++) {
        const struct holding *h = holding(b, p, g->items[k], 1);
        if (h->now < 0) return MARKET_ERR_STORE;
        if (!h->now) rc = MARKET_ERR_NOT_HELD, missing = g->items[k];
    }
    for (size_t k = 0; rc == MARKET_OK && k < g->n_units; k++) {
        const struct holding *h = holding(b, p, g->unit_item[k], 0);
        if (h->now < 0) return MARKET_ERR_STORE;
        if (h->now < g->units[k]) rc = MARKET_ERR_NOT_HELD, missing = g->unit_item[k];
    }
    if (rc == MARKET_OK && pp->funds < g->funds) rc = MARKET_ERR_INSUFFICIENT_FUNDS;
    if (rc != MARKET_OK) {
        memcpy(res->lacks, b->u.id[p], sizeof res->lacks);
        if (missing) memcpy(res->missing, missing, strlen(missing) + 1);
    }
    return rc;
}

/* Moves side g from party p to party q (held: side_held()). */
static void side_move(struct direct_batch *b, size_t p, size_t q, const market_goods *g) {
    for (size_t k = 0; k < g->n_items; k++) {
        holding(b, p, g->items[k], 1)->now = 0;
        holding(b, q, g->items[k], 1)->now = 1;
    }
    for (size_t k = 0; k < g->n_units; k++) {
        holding(b, p, g->unit_item[k], 0)->now -= g->units[k];
        holding(b, q, g->unit_item[k], 0)->now += g->units[k]; /* a realm's units fit */
    }
    b->u.party[p].funds -= g->funds;
    b->u.party[q].funds += g->funds; /* no overflow: a realm's funds fit an int64 */
}

/* Decides a proposal (order i). */
static int decide_new(struct direct_batch *b, size_t i) {
    market_order *o = b->f.req[i];
    market_direct_result *res = &o->res.direct;
    size_t p = market__parties_find(&b->u, o->player), q = market__parties_find(&b->u, o->to);
    const market__party *to = &b->u.party[q];
    if (to->known == MARKET__UNREADABLE) return MARKET_ERR_STORE;
    if (to->known != MARKET__PRESENT) {
        memcpy(res->lacks, o->to, strlen(o->to) + 1); /* the player that is not */
        return MARKET_ERR_NO_PLAYER;
    }
    int rc = side_held(b, p, o->give, res);
    if (rc != MARKET_OK) return rc;
    market_direct *t = &res->t;
    *t = (market_direct){.id = ++b->last,
                         .give = *o->give,
                         .get = *o->get,
                         .made_ms = b->f.now_ms,
                         .expires_ms =
                             b->f.now_ms +
                             (o->duration_s ? o->duration_s : MARKET_DIRECT_DURATION_S) * 1000,
                         .state = MARKET_DIRECT_OPEN};
    memcpy(t->from, o->player, strlen(o->player) + 1);
    memcpy(t->to, o->to, strlen(o->to) + 1);
    res->funds = b->u.party[p].funds;
    return MARKET_OK;
}

/* Decides an accept or a cancel (order i) of its trade as the batch left it. */
static int decide_close(struct direct_batch *b, size_t i) {
    market_order *o = b->f.req[i];
    market_direct_result *res = &o->res.direct;
    size_t j = b->of[i];
    if (b->d.rc[j] != MARKET_OK) return b->d.rc[j];
    market_direct *t = &b->t[j];
    int accept = o->type == MARKET_ORDER_DIRECT_ACCEPT;
    int is_from = strcmp(o->player, t->from) == 0, is_to = strcmp(o->player, t->to) == 0;
    if (!is_from && !is_to) return MARKET_ERR_NO_DIRECT; /* ids tell a stranger nothing */
    if (accept && is_from) return MARKET_ERR_OWN_TRADE;
    if (t->state != MARKET_DIRECT_OPEN || t->expires_ms <= b->f.now_ms) {
        res->t = *t;
        if (t->state == MARKET_DIRECT_OPEN) res->t.state = MARKET_DIRECT_EXPIRED;
        return MARKET_ERR_TRADE_CLOSED;
    }
    size_t p = market__parties_find(&b->u, t->from), q = market__parties_find(&b->u, t->to);
    if (accept) {
        int rc = side_held(b, p, &t->give, res);
        if (rc == MARKET_OK) rc = side_held(b, q, &t->get, res);
        if (rc != MARKET_OK) return rc;
        side_move(b, p, q, &t->give);
        side_move(b, q, p, &t->get);
        t->state = MARKET_DIRECT_DONE;
    } else {
        t->state = MARKET_DIRECT_CANCELLED;
        memcpy(t->closed_by, o->player, strlen(o->player) + 1);
    }
    t->closed_ms = b->f.now_ms;
    b->changed[j] = 1;
    res->t = *t;
    const market__party *me = &b->u.party[is_from ? p : q];
    res->funds = me->known == MARKET__PRESENT ? me->funds : 0;
    return MARKET_OK;
}

/* Decides order i against the batch's state. */
static int decide_one(void *ks, size_t i, int64_t *a, int64_t *b_, int64_t *c) {
    struct direct_batch *b = ks;
    market_order *o = b->f.req[i];
    (void)b_, (void)c;
    o->res.direct = (market_direct_result){0};
    int rc = o->type == MARKET_ORDER_DIRECT ? decide_new(b, i) : decide_close(b, i);
    if (rc == MARKET_OK) *a = o->res.direct.t.id;
    return rc;
}

/* Fills order o's result from v, a replay: the trade's id. */
static void replay(market_order *o, const market__outcome *v) {
    if (v->rc == MARKET_OK) o->res.direct.t.id = v->a;
}

static size_t batch_decide(market__cbatch *cb) {
    struct direct_batch *b = cb->ks;
    b->last = b->last_read;
    for (size_t j = 0; j < b->d.n; j++)
        b->changed[j] = 0;
    for (size_t k = 0; k < b->n_h; k++)
        b->h[k].now = b->h[k].read;
    return market__frame_decide(&b->f, decide_one, replay, b);
}

/* The commit (see DESIGN, step 3). */
static int batch_commit(market_conn *c, const market__held *held, market__cbatch *cb) {
    struct direct_batch *b = cb->ks;
    market__buf *w = &b->k.wb;
    market__frame_commit(&b->f, held, &b->u, NULL, w);
    for (size_t k = 0; k < b->n_h; k++) {
        const struct holding *h = &b->h[k];
        if (h->read < 0 || h->now == h->read) continue;
        if (h->unique)
            market__fx_item_has(w, b->u.k_inv[h->party], h->item, h->now != 0);
        else if (h->now == 0)
            market__fx_units_gone(w, b->u.k_stacks[h->party], h->item);
        else
            market__fx_units(w, b->u.k_stacks[h->party], h->item, h->now - h->read);
    }
    for (size_t j = 0; j < b->d.n; j++)
        if (b->changed[j]) {
            market__fx_direct_put(w, b->realm.id, &b->t[j]);
            market__fx_direct_index(w, b->realm.id, &b->t[j], 0, 0);
        }
    for (size_t i = 0; i < b->f.n; i++)
        if (market__frame_won(&b->f, i) && b->f.req[i]->type == MARKET_ORDER_DIRECT) {
            market__fx_direct_put(w, b->realm.id, &b->f.req[i]->res.direct.t);
            market__fx_direct_index(w, b->realm.id, &b->f.req[i]->res.direct.t, 1, b->f.now_ms);
        }
    if (b->last != b->last_read) market__fx_directs_last(w, &b->realm, b->last);
    return market__trades_commit(c, w, 0, b->realm.id, NULL, NULL, 0, NULL);
}

/* ---- the kind's ops (market_combine.h) ---- */

static size_t most(const market *m, int policy) {
    (void)policy;
    return m->cfg.batch_max < DIRECT_BATCH_MAX ? m->cfg.batch_max : DIRECT_BATCH_MAX;
}

/* Direct trades: proposals, accepts and cancels, under the lock strategy's policy. */
const struct market__kind market__direct_kind = {
    .name = "direct",
    .slot = 7,
    .most = most,
    .state_size = sizeof(struct direct_batch),
    .prepare = prepare,
    .read = batch_read,
    .decide = batch_decide,
    .commit = batch_commit,
};

/* ---- reading ---- */

/* Reads trades ids[0..n) of realm into out[0..n) (an open one past its time as EXPIRED; one
 * whose hash went as id 0). Returns MARKET_OK, or ERR_STORE. */
static int directs_read(market_conn *c, const char *realm, const int64_t *ids, size_t n,
                        market_direct *out) {
    int64_t now = 0;
    int rc = market__deals_get(c, &market__deal_direct, realm, ids, n, out, &now);
    for (size_t i = 0; rc == MARKET_OK && i < n; i++)
        if (out[i].id && out[i].state == MARKET_DIRECT_OPEN && out[i].expires_ms <= now)
            out[i].state = MARKET_DIRECT_EXPIRED;
    return rc;
}

/* Reads direct trade id of realm into *out (an open one past its time reads EXPIRED).
 * Returns MARKET_OK, or ERR_INVALID, ERR_NO_DIRECT, ERR_STORE. */
int market_direct_get(market_conn *c, const char *realm, int64_t id, market_direct *out) {
    if (!c || !out || !market_id_valid(realm) || id < 1) return MARKET_ERR_INVALID;
    int rc = directs_read(c, realm, &id, 1, out);
    return rc == MARKET_OK && out->id == 0 ? MARKET_ERR_NO_DIRECT : rc;
}

/* Reads the open direct trades player is a side of (proposed by it or to it), soonest to
 * expire first, at most MARKET_DIRECTS_PAGE_MAX, into a new array *out (free(); NULL when
 * none) of *n. Returns MARKET_OK, or ERR_INVALID, ERR_STORE, ERR_NOMEM. */
int market_player_directs(market_conn *c, const char *realm, const char *player,
                          market_direct **out, size_t *n) {
    if (!out || !n) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = 0;
    if (!c || !market_id_valid(realm) || !market_id_valid(player)) return MARKET_ERR_INVALID;
    market__buf b = {0};
    market__rd_directs_of(&b, realm, player);
    int64_t ids[MARKET_DIRECTS_PAGE_MAX];
    size_t k = 0, kept = 0;
    int rc = market__ids_get(c, realm, &b, 0, ids, MARKET_DIRECTS_PAGE_MAX, &k);
    if (rc < 0) return rc;
    market__replies_free(b.rep, b.n);
    market__buf_free(&b);
    market_direct *t = k ? calloc(k, sizeof *t) : NULL;
    if (k && !t) return MARKET_ERR_NOMEM;
    rc = k ? directs_read(c, realm, ids, k, t) : MARKET_OK;
    for (size_t i = 0; rc == MARKET_OK && i < k; i++)
        if (t[i].id && t[i].state == MARKET_DIRECT_OPEN) t[kept++] = t[i];
    if (rc != MARKET_OK || kept == 0) {
        free(t);
        t = NULL;
        kept = 0;
    }
    *out = t;
    *n = kept;
    return rc;
}
