/* plan.c - market-load's snapshot of the market, and who buys what in which order.
 *
 * Pure: the snapshot is filled by the caller (world.c reads it from the
 * store), and every pick comes from a seeded generator, so a plan is the
 * same for the same snapshot and seed. See load.h for the mixes.
 */
#include "tools/load/load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* A uniform draw in [0, n), n > 0. */
static size_t rng_below(uint64_t *s, size_t n) {
    return (size_t)(splitmix64(s) % (uint64_t)n);
}

/* ---- the snapshot ---- */

static int str_add(load_plan *p, const char *s, size_t *off) {
    size_t len = strlen(s);
    if (p->str_len + len + 1 > p->str_cap) {
        size_t ncap = p->str_cap ? p->str_cap * 2 : 65536;
        while (ncap < p->str_len + len + 1)
            ncap *= 2;
        char *b = realloc(p->str, ncap);
        if (!b) return MARKET_ERR_NOMEM;
        p->str = b;
        p->str_cap = ncap;
    }
    memcpy(p->str + p->str_len, s, len + 1);
    *off = p->str_len;
    p->str_len += len + 1;
    return MARKET_OK;
}

/* Makes room for one more element in *arr (of *cap, n used). */
static int reserve(void **arr, size_t *cap, size_t n, size_t elem, size_t first) {
    if (n < *cap) return MARKET_OK;
    size_t ncap = *cap ? *cap * 2 : first;
    void *a = realloc(*arr, ncap * elem);
    if (!a) return MARKET_ERR_NOMEM;
    *arr = a;
    *cap = ncap;
    return MARKET_OK;
}

int load_plan_add_realm(load_plan *p, const char *realm) {
    size_t cap = p->cap_realms;
    if (reserve((void **)&p->realm_name, &cap, p->n_realms, sizeof *p->realm_name, 16) < 0)
        return MARKET_ERR_NOMEM;
    if (reserve((void **)&p->realm_first, &p->cap_realms, p->n_realms, sizeof *p->realm_first,
                16) < 0)
        return MARKET_ERR_NOMEM;
    if (str_add(p, realm, &p->realm_name[p->n_realms]) < 0) return MARKET_ERR_NOMEM;
    p->realm_first[p->n_realms++] = p->n_players;
    return MARKET_OK;
}

/* The realm later additions belong to: the last one added, made the default
 * one when there is none yet. */
static int realm_now(load_plan *p, unsigned *out) {
    if (p->n_realms == 0 && load_plan_add_realm(p, MARKET_REALM_DEFAULT) < 0)
        return MARKET_ERR_NOMEM;
    *out = (unsigned)(p->n_realms - 1);
    return MARKET_OK;
}

/* Adds a listing (item by seller at price) to *arr (n used of *cap): the
 * items, or the goods. */
static int listing_add(load_plan *p, load_item **arr, size_t *n, size_t *cap, const char *item,
                       const char *seller, int64_t price) {
    unsigned realm;
    if (realm_now(p, &realm) < 0 || reserve((void **)arr, cap, *n, sizeof **arr, 4096) < 0)
        return MARKET_ERR_NOMEM;
    load_item *t = &(*arr)[*n];
    t->price = price;
    t->realm = realm;
    t->claimed = 0;
    if (str_add(p, item, &t->name) < 0 || str_add(p, seller, &t->seller) < 0)
        return MARKET_ERR_NOMEM;
    (*n)++;
    return MARKET_OK;
}

int load_plan_add_item(load_plan *p, const char *item, const char *seller, int64_t price) {
    return listing_add(p, &p->items, &p->n_items, &p->cap_items, item, seller, price);
}

/* Adds a listing of units of a good (the book mix's: who sells what, at which price). */
int load_plan_add_good(load_plan *p, const char *item, const char *seller, int64_t price) {
    return listing_add(p, &p->goods, &p->n_goods, &p->cap_goods, item, seller, price);
}

int load_plan_add_player(load_plan *p, const char *id, int64_t funds) {
    unsigned realm;
    if (realm_now(p, &realm) < 0 ||
        reserve((void **)&p->players, &p->cap_players, p->n_players, sizeof *p->players, 1024) < 0)
        return MARKET_ERR_NOMEM;
    load_player *t = &p->players[p->n_players];
    memset(t, 0, sizeof *t);
    t->realm = realm;
    t->funds = t->budget = funds;
    if (str_add(p, id, &t->id) < 0) return MARKET_ERR_NOMEM;
    p->n_players++;
    return MARKET_OK;
}

const char *load_plan_realm(const load_plan *p, size_t item) {
    return p->str + p->realm_name[p->items[item].realm];
}

const char *load_plan_item(const load_plan *p, size_t i) {
    return p->str + p->items[i].name;
}

const char *load_plan_seller(const load_plan *p, size_t i) {
    return p->str + p->items[i].seller;
}

const char *load_plan_good(const load_plan *p, size_t i) {
    return p->str + p->goods[i].name;
}

/* Who sends book pick k, and in which realm: its buyer, or its good's seller. */
const char *load_plan_pick_player(const load_plan *p, const load_pick *k) {
    return k->buyer != LOAD_NONE ? load_plan_player(p, k->buyer)
                                 : p->str + p->goods[k->item].seller;
}

const char *load_plan_pick_realm(const load_plan *p, const load_pick *k) {
    return p->str + p->realm_name[p->goods[k->item].realm];
}

const char *load_plan_player(const load_plan *p, size_t i) {
    return p->str + p->players[i].id;
}

const char *load_plan_player_realm(const load_plan *p, size_t i) {
    return p->str + p->realm_name[p->players[i].realm];
}

void load_plan_free(load_plan *p) {
    free(p->str);
    free(p->realm_name);
    free(p->realm_first);
    free(p->items);
    free(p->players);
    free(p->perm);
    free(p->sorted);
    free(p->window);
    free(p->pool);
    free(p->flash);
    free(p->flash_bought);
    free(p->flash_inflight);
    free(p->goods);
    free(p->open);
    free(p->auc);
    memset(p, 0, sizeof *p);
}

/* ---- the order ---- */

static const load_plan *sort_ctx; /* qsort has no user pointer */

static int cmp_by_price(const void *a, const void *b) {
    const load_item *x = &sort_ctx->items[*(const size_t *)a];
    const load_item *y = &sort_ctx->items[*(const size_t *)b];
    if (x->price != y->price) return x->price < y->price ? -1 : 1;
    return strcmp(sort_ctx->str + x->name, sort_ctx->str + y->name);
}

struct poorest {
    int64_t funds;
    uint64_t tie;
    size_t idx;
};

static int cmp_poorest(const void *a, const void *b) {
    const struct poorest *x = a, *y = b;
    if (x->funds != y->funds) return x->funds < y->funds ? -1 : 1;
    return x->tie < y->tie ? -1 : x->tie > y->tie;
}

int load_plan_build(load_plan *p, enum load_mix mix, size_t buyers, uint64_t seed) {
    size_t n = p->n_items;
    p->mix = mix;
    p->rng = seed ^ UINT64_C(0x6d61726b65746c64);
    if (!(p->perm = malloc((n ? n : 1) * sizeof *p->perm)) ||
        !(p->sorted = malloc((n ? n : 1) * sizeof *p->sorted)))
        return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        p->perm[i] = p->sorted[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_below(&p->rng, i), t = p->perm[i - 1];
        p->perm[i - 1] = p->perm[j];
        p->perm[j] = t;
    }
    sort_ctx = p;
    qsort(p->sorted, n, sizeof *p->sorted, cmp_by_price);
    sort_ctx = NULL;

    if (mix == LOAD_MIX_DISTINCT) return MARKET_OK;
    if (mix == LOAD_MIX_BOOK || mix == LOAD_MIX_DIRECT)
        return (p->open = malloc(LOAD_OPEN_MAX * sizeof *p->open)) ? MARKET_OK : MARKET_ERR_NOMEM;
    size_t np = p->n_players;
    p->n_pool = buyers < 2 ? 2 : buyers;
    if (p->n_pool > np) p->n_pool = np;
    struct poorest *pp = malloc((np ? np : 1) * sizeof *pp);
    if (!pp || !(p->pool = malloc((p->n_pool ? p->n_pool : 1) * sizeof *p->pool))) {
        free(pp);
        return MARKET_ERR_NOMEM;
    }
    uint64_t s = seed;
    for (size_t i = 0; i < np; i++)
        pp[i] = (struct poorest){p->players[i].funds, splitmix64(&s), i};
    qsort(pp, np, sizeof *pp, cmp_poorest);
    for (size_t i = 0; i < p->n_pool; i++) {
        p->pool[i] = pp[i].idx;
        p->players[pp[i].idx].pool = 1;
    }
    free(pp);
    p->n_window = buyers / 4 ? buyers / 4 : 1;
    if (!(p->window = malloc(p->n_window * sizeof *p->window))) return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < p->n_window; i++)
        p->window[i] = LOAD_NONE;
    return MARKET_OK;
}

static int buyer_fits(const load_plan *p, size_t b, size_t item, int skip_pool) {
    const load_player *pl = &p->players[b];
    return pl->budget >= p->items[item].price && !(skip_pool && pl->pool) &&
           strcmp(load_plan_player(p, b), load_plan_seller(p, item)) != 0;
}

/* A player of the item's realm other than the seller whose budget covers the
 * price, or LOAD_NONE. */
static size_t distinct_buyer(load_plan *p, size_t item) {
    unsigned r = p->items[item].realm;
    size_t first = p->realm_first[r];
    size_t np = (r + 1 < p->n_realms ? p->realm_first[r + 1] : p->n_players) - first;
    if (!np) return LOAD_NONE;
    /* the contended pool's players are left to the contended purchases, unless the realm
     * has no one else who can pay */
    for (int skip_pool = p->n_pool && p->n_players > p->n_pool + 1; skip_pool >= 0; skip_pool--) {
        size_t b = 0;
        for (int t = 0; t < LOAD_BUYER_TRIES; t++) {
            b = rng_below(&p->rng, np);
            if (buyer_fits(p, first + b, item, skip_pool)) return first + b;
        }
        for (size_t k = 0; k < np; k++)
            if (buyer_fits(p, first + (b + k) % np, item, skip_pool)) return first + (b + k) % np;
    }
    return LOAD_NONE;
}

static int next_distinct(load_plan *p, load_pick *out) {
    while (p->perm_at < p->n_items) {
        size_t i = p->perm[p->perm_at++];
        if (p->items[i].claimed) continue;
        p->items[i].claimed = 1;
        size_t b = distinct_buyer(p, i);
        if (b == LOAD_NONE) {
            p->unaffordable++;
            continue;
        }
        p->players[b].budget -= p->items[i].price;
        out->item = i;
        out->buyer = b;
        return 1;
    }
    return 0;
}

static void window_refill(load_plan *p, size_t s) {
    p->window[s] = LOAD_NONE;
    while (p->sorted_at < p->n_items) {
        size_t i = p->sorted[p->sorted_at++];
        if (p->items[i].claimed) continue;
        p->items[i].claimed = 1;
        p->window[s] = i;
        p->window_live++;
        return;
    }
}

static int next_contended(load_plan *p, load_pick *out) {
    if (p->n_pool == 0) return 0;
    size_t k = p->n_window, s = rng_below(&p->rng, k);
    for (size_t t = 0; t < k; t++) {
        size_t at = (s + t) % k;
        if (p->window[at] == LOAD_NONE) window_refill(p, at);
        if (p->window[at] == LOAD_NONE) continue;
        size_t i = p->window[at], b = rng_below(&p->rng, p->n_pool);
        for (size_t u = 0; u < p->n_pool; u++) {
            size_t pl = p->pool[(b + u) % p->n_pool];
            if (p->players[pl].realm != p->items[i].realm ||
                strcmp(load_plan_player(p, pl), load_plan_seller(p, i)) == 0)
                continue;
            out->item = i;
            out->buyer = pl;
            out->slot = at;
            return 1;
        }
    }
    return 0;
}

int load_plan_flash(load_plan *p, const char *sale, int64_t price, int64_t limit,
                    const char *house, size_t buyers, uint64_t seed) {
    size_t first = p->n_realms ? p->realm_first[0] : 0;
    size_t end = p->n_realms > 1 ? p->realm_first[1] : p->n_players;
    size_t n = end > first ? end - first : 0;
    snprintf(p->sale, sizeof p->sale, "%s", sale);
    p->sale_price = price;
    p->sale_limit = limit;
    p->n_flash = p->flash_at = 0;
    p->flash_over = 0;
    if (!(p->flash = malloc((n ? n : 1) * sizeof *p->flash)) ||
        !(p->flash_bought = calloc(n ? n : 1, sizeof *p->flash_bought)) ||
        !(p->flash_inflight = calloc(n ? n : 1, sizeof *p->flash_inflight)))
        return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const load_player *pl = &p->players[first + i];
        if (pl->funds >= price && strcmp(load_plan_player(p, first + i), house) != 0)
            p->flash[p->n_flash++] = first + i;
    }
    uint64_t s = seed ^ UINT64_C(0x666c617368);
    for (size_t i = p->n_flash; i > 1; i--) {
        size_t j = rng_below(&s, i), t = p->flash[i - 1];
        p->flash[i - 1] = p->flash[j];
        p->flash[j] = t;
    }
    if (p->n_flash > buyers) p->n_flash = buyers;
    return MARKET_OK;
}

/* The next flash buyer, in turn, whose 200s and requests in flight are
 * below the limit and whose funds (as the tool counts them) pay a unit. */
static int next_flash(load_plan *p, load_pick *out) {
    if (p->flash_over) return 0;
    for (size_t t = 0; t < p->n_flash; t++) {
        size_t k = (p->flash_at + t) % p->n_flash, pl = p->flash[k];
        if (p->flash_bought[k] + p->flash_inflight[k] >= p->sale_limit ||
            p->players[pl].budget < p->sale_price * (p->flash_inflight[k] + 1))
            continue;
        p->flash_at = k + 1;
        p->flash_inflight[k]++;
        out->buyer = pl;
        out->slot = k;
        return 1;
    }
    return 0;
}

/* A price near ref: pct_lo..pct_hi percent of it, at least 1. */
static int64_t near(load_plan *p, int64_t ref, unsigned pct_lo, unsigned pct_hi) {
    int64_t v = ref * (int64_t)(pct_lo + rng_below(&p->rng, pct_hi - pct_lo + 1)) / 100;
    return v < 1 ? 1 : v; /* no overflow: a price is at most 10^12 */
}

/* A player of realm r, drawn at random, or LOAD_NONE when it has none. */
static size_t realm_player(load_plan *p, unsigned r) {
    size_t first = p->realm_first[r];
    size_t np = (r + 1 < p->n_realms ? p->realm_first[r + 1] : p->n_players) - first;
    return np ? first + rng_below(&p->rng, np) : LOAD_NONE;
}

/* The book mix's next pick, on a listing of a good drawn at random: 15% a
 * cancel of one of the run's resting orders (when there is one), 40% a buy
 * order of 1..5 units at 80..110% of the listing's price by a player of its
 * realm, 35% its seller selling 1..3 units into the book at 70..100% of
 * it, 10% its seller listing 1..2 more units at its price (which sells into
 * any bid at or over it first). */
static int next_book(load_plan *p, load_pick *out) {
    if (!p->n_goods) return 0;
    size_t g = rng_below(&p->rng, p->n_goods), r = rng_below(&p->rng, 100);
    const load_item *it = &p->goods[g];
    *out = (load_pick){LOAD_KIND_ORDER, g, LOAD_NONE, LOAD_NONE, 0, 0, 0};
    if (r < 15 && p->n_open) {
        size_t k = rng_below(&p->rng, p->n_open);
        out->kind = LOAD_KIND_CANCEL;
        out->order = p->open[k].id;
        out->buyer = p->open[k].buyer;
        p->open[k] = p->open[--p->n_open];
        /* its good names the realm: the buyer's */
        for (size_t j = 0; j < p->n_goods; j++)
            if (p->goods[j].realm == p->players[out->buyer].realm) {
                out->item = j;
                break;
            }
        return 1;
    }
    if (r < 55) {
        out->buyer = realm_player(p, it->realm);
        out->quantity = 1 + (int64_t)rng_below(&p->rng, 5);
        out->price = near(p, it->price, 80, 110);
        return out->buyer != LOAD_NONE;
    }
    out->kind = r < 90 ? LOAD_KIND_SELL : LOAD_KIND_LIST;
    out->quantity = 1 + (int64_t)rng_below(&p->rng, out->kind == LOAD_KIND_SELL ? 3 : 2);
    out->price = out->kind == LOAD_KIND_SELL ? near(p, it->price, 70, 100) : it->price;
    return 1;
}

/* The direct mix's next pick: 55% an accept, by the player offered it, of one of the run's
 * open proposals (when there is one), 10% a decline of one, else a proposal from a player
 * drawn at random to another of its realm: 1..5 funds for 1..5, so that funds go either way
 * round and a pair's trades cross. */
static int next_direct(load_plan *p, load_pick *out) {
    size_t r = rng_below(&p->rng, 100);
    *out = (load_pick){LOAD_KIND_PROPOSE, LOAD_NONE, LOAD_NONE, LOAD_NONE, 0, 0, 0, LOAD_NONE};
    if (r < 65 && p->n_open) {
        size_t k = rng_below(&p->rng, p->n_open);
        out->kind = r < 55 ? LOAD_KIND_ACCEPT : LOAD_KIND_DECLINE;
        out->order = p->open[k].id;
        out->buyer = p->open[k].other;
        out->other = p->open[k].buyer;
        p->open[k] = p->open[--p->n_open];
        return 1;
    }
    if (p->n_players < 2) return 0;
    for (int tries = 0; tries < LOAD_BUYER_TRIES; tries++) {
        size_t a = rng_below(&p->rng, p->n_players);
        size_t b = realm_player(p, p->players[a].realm);
        if (b == LOAD_NONE || b == a) continue;
        out->buyer = a;
        out->other = b;
        out->quantity = 1 + (int64_t)rng_below(&p->rng, 5);
        out->price = 1 + (int64_t)rng_below(&p->rng, 5);
        return 1;
    }
    return 0; /* no realm has two players */
}

int load_plan_auctions(load_plan *p, const int64_t *ids, size_t n, int64_t buyout) {
    if (n && !(p->auc = calloc(n, sizeof *p->auc))) return MARKET_ERR_NOMEM;
    for (size_t k = 0; k < n; k++)
        p->auc[k] = (struct load_auction){ids[k], 1, 0};
    p->n_auc = p->auc_open = n;
    p->buyout = buyout;
    return MARKET_OK;
}

/* The auctions mix's next pick: a bid on one of the run's open auctions drawn at random, by
 * a player of the first realm drawn at random: the least it takes, or, one in twenty, its
 * buyout (or that least, when it is more). */
static int next_auction(load_plan *p, load_pick *out) {
    *out = (load_pick){LOAD_KIND_BID, LOAD_NONE, LOAD_NONE, LOAD_NONE, 0, 0, 0, LOAD_NONE};
    if (!p->auc_open || !p->n_realms) return 0;
    size_t k = rng_below(&p->rng, p->n_auc);
    while (p->auc[k].closed) /* one is open */
        k = (k + 1) % p->n_auc;
    const struct load_auction *a = &p->auc[k];
    out->slot = k;
    out->order = a->id;
    out->price = a->next;
    if (p->buyout && rng_below(&p->rng, 20) == 0 && p->buyout > a->next) out->price = p->buyout;
    out->buyer = realm_player(p, 0);
    return out->buyer != LOAD_NONE;
}

int load_plan_next(load_plan *p, load_pick *out) {
    if (p->mix == LOAD_MIX_BOOK) return next_book(p, out);
    if (p->mix == LOAD_MIX_AUCTIONS) return next_auction(p, out);
    if (p->mix == LOAD_MIX_DIRECT) return next_direct(p, out);
    if (p->mix == LOAD_MIX_FLASH) {
        *out = (load_pick){LOAD_KIND_FLASH, LOAD_NONE, LOAD_NONE, LOAD_NONE};
        return next_flash(p, out);
    }
    enum load_kind kind = p->mix == LOAD_MIX_CONTENDED ? LOAD_KIND_CONTENDED : LOAD_KIND_DISTINCT;
    if (p->mix == LOAD_MIX_MIXED) kind = (p->seq & 1) ? LOAD_KIND_CONTENDED : LOAD_KIND_DISTINCT;
    p->seq++;
    *out = (load_pick){kind, LOAD_NONE, LOAD_NONE, LOAD_NONE};
    return kind == LOAD_KIND_DISTINCT ? next_distinct(p, out) : next_contended(p, out);
}

void load_plan_answered(load_plan *p, const load_pick *pick, int status, int64_t order) {
    if (pick->kind == LOAD_KIND_BID && pick->slot < p->n_auc) {
        struct load_auction *a = &p->auc[pick->slot];
        if (order < 0 && !a->closed) { /* sold, or ended */
            a->closed = 1;
            p->auc_open--;
        } else if (order > a->next) {
            a->next = order;
        }
        return;
    }
    if (pick->kind == LOAD_KIND_ORDER || pick->kind == LOAD_KIND_PROPOSE) {
        if (status == 201 && order > 0 && p->n_open < LOAD_OPEN_MAX)
            p->open[p->n_open++] = (struct load_open){order, pick->buyer, pick->other};
        return;
    }
    if (pick->kind == LOAD_KIND_FLASH && pick->slot < p->n_flash) {
        size_t k = pick->slot;
        p->flash_inflight[k]--;
        if (status == 200) {
            p->flash_bought[k]++;
            p->players[pick->buyer].budget -= p->sale_price;
        } else if (status == 402) {
            p->players[pick->buyer].budget = 0; /* cannot pay: not picked again */
        } else if (status == 409) {
            p->flash_over = 1; /* sold out, or the sale is over: the tool never exceeds a limit */
        }
        return;
    }
    if (pick->kind != LOAD_KIND_CONTENDED || (status != 200 && status != 404)) return;
    if (pick->slot < p->n_window && p->window[pick->slot] == pick->item) {
        p->window_live--;
        window_refill(p, pick->slot);
    }
}
