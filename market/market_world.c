/* market_world.c - building a world (fixtures or generated) and storing it.
 *
 * A market_world is a plain in-memory description of players, held items and
 * listings. It is checked as a whole (no player or item twice, every owner a
 * player) before anything is written, so a bad world writes nothing; its listings go
 * into the search indexes with them (market_index.c). The audit that reads a store back
 * is market_audit.c's; rebuilding the indexes, market_reindex.c's.
 *
 * DESIGN
 * No command of seeding runs long, at any world size: one MULTI/EXEC of a world would hold
 * every other client of Redis for as long as it runs (seconds for a million listings),
 * long enough for Sentinels to fail the master over. So a world is written in steps: a
 * MULTI/EXEC of a couple of thousand keys and fields each (SEED_STEP_ELEMS; a ZADD holds
 * ZADD_CHUNK members at most, an UNLINK UNLINK_CHUNK keys: about 20 ms of Redis at the
 * most, measured), each step's replies read before the next is sent. A reset is steps too: the realm's keys found by SCAN and UNLINKed
 * (a large one is freed apart from Redis's main thread).
 * A realm written in steps is half-written in between, so its first step sets its mark,
 * market:{r}:building, and its last deletes it: while it is set, every operation of the
 * realm is refused (MARKET_ERR_REALM_UNAVAILABLE, 503 realm_unavailable). The service
 * reads the mark in the pipeline of every read, and before every commit under a WATCH,
 * so a commit whose seed began meanwhile aborts and is refused when tried again. A seed
 * that stops half-way (a crash, a lost connection) leaves the mark: the realm stays
 * refused, never half-visible, until a run for it finishes.
 * One run seeds a realm at a time: a run takes the realm's lease, market:{r}:seeding (SET
 * NX PX SEED_LEASE_MS), before anything else, and a second run is refused while it is held.
 * Each step is a MULTI/EXEC under a WATCH of the lease, read as the run's before the MULTI,
 * and keeps it SEED_LEASE_MS more: a run paused past its lease, whose realm another run has
 * taken meanwhile, writes nothing more. The last step deletes it with the mark; a run that
 * fails deletes it too, and one that dies leaves it to lapse.
 */
#include "market/market.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_bulk.h"

/* The key patterns of a realm's keys that seeding with reset deletes (and its market and
 * its trades): players, inventories, stacks, idempotency records, search indexes, trade
 * indexes, and sales (with their bought hashes). */

#define ZADD_CHUNK 256       /* score/member pairs per ZADD while seeding */
#define UNLINK_CHUNK 256     /* keys per UNLINK of a reset */
#define SEED_STEP_ELEMS 2048 /* keys and fields a step of seeding writes, about (see DESIGN) */
#define SEED_LEASE_MS "30000" /* a seeding run's lease on its realm, from its last step */

struct wplayer {
    char id[MARKET_ID_MAX + 1];
    char name[MARKET_NAME_MAX + 1];
    int64_t funds;
};

struct witem {
    char item[MARKET_ID_MAX + 1];
    char owner[MARKET_ID_MAX + 1];
    int64_t price; /* 0: held in the owner's inventory; > 0: listed by the owner */
    int64_t units; /* 0: a unique item; > 0: that many units of a stackable good */
    int64_t duration_s; /* a listing's: it ends this long after it is stored (0: never) */
};

/* A buy order resting in its good's book (market_world_add_order()). */
struct worder {
    char buyer[MARKET_ID_MAX + 1];
    char item[MARKET_ID_MAX + 1];
    int64_t quantity, price;
};

/* An auction opened once the world is stored (market_world_add_auction()). */
struct wauction {
    char seller[MARKET_ID_MAX + 1];
    char item[MARKET_ID_MAX + 1];
    int64_t quantity, start, buyout, step, duration_s;
};

struct market_world {
    struct wauction *auctions;
    size_t n_auctions, cap_auctions;
    struct wplayer *players;
    size_t n_players, cap_players;
    struct witem *items;
    size_t n_items, cap_items;
    struct worder *orders;
    size_t n_orders, cap_orders;
    int64_t funds; /* every player's together: at most INT64_MAX, so that no balance can
                      overflow however funds move (a sale's cut is paid to the house unread) */
};

/* ---- building a world ---- */

/* Returns a new, empty world (caller frees with market_world_free), or NULL
 * on out-of-memory. */
market_world *market_world_new(void) {
    return calloc(1, sizeof(market_world));
}

/* Frees w; NULL is a no-op. This function can't fail. */
void market_world_free(market_world *w) {
    if (!w) return;
    free(w->players);
    free(w->items);
    free(w->orders);
    free(w->auctions);
    free(w);
}

/* Adds a player. name may be NULL (the id is used). Returns MARKET_OK, or
 * ERR_INVALID (bad id, name over MARKET_NAME_MAX bytes, negative funds, or
 * the world's funds together past INT64_MAX), ERR_NOMEM. Duplicates are
 * found by market_world_check(). */
int market_world_add_player(market_world *w, const char *id, const char *name, int64_t funds) {
    if (!w || !market_id_valid(id) || funds < 0 || funds > INT64_MAX - w->funds)
        return MARKET_ERR_INVALID;
    if (!name) name = id;
    if (strlen(name) > MARKET_NAME_MAX) return MARKET_ERR_INVALID;
    if (market__grow((void **)&w->players, &w->cap_players, w->n_players + 1, sizeof *w->players) <
        0)
        return MARKET_ERR_NOMEM;
    struct wplayer *p = &w->players[w->n_players++];
    snprintf(p->id, sizeof p->id, "%s", id);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->funds = funds;
    w->funds += funds;
    return MARKET_OK;
}

static int add_item(market_world *w, const char *owner, const char *item, int64_t price,
                    int64_t units) {
    if (!w || !market_id_valid(owner) || !market_id_valid(item) || units < 0 ||
        units > MARKET_QUANTITY_MAX)
        return MARKET_ERR_INVALID;
    if (market__grow((void **)&w->items, &w->cap_items, w->n_items + 1, sizeof *w->items) < 0)
        return MARKET_ERR_NOMEM;
    struct witem *it = &w->items[w->n_items++];
    *it = (struct witem){.price = price, .units = units}; /* no end until one is given */
    snprintf(it->item, sizeof it->item, "%s", item);
    snprintf(it->owner, sizeof it->owner, "%s", owner);
    return MARKET_OK;
}

/* Puts item in owner's inventory. Returns MARKET_OK, ERR_INVALID, ERR_NOMEM. */
int market_world_add_item(market_world *w, const char *owner, const char *item) {
    return add_item(w, owner, item, 0, 0);
}

/* Puts units (1..MARKET_QUANTITY_MAX) of the stackable good item in owner's
 * stacks. Returns MARKET_OK, ERR_INVALID, ERR_NOMEM. */
int market_world_add_stack(market_world *w, const char *owner, const char *item, int64_t units) {
    if (units < 1) return MARKET_ERR_INVALID;
    return add_item(w, owner, item, 0, units);
}

/* Lists units (1..MARKET_QUANTITY_MAX) of the stackable good item by seller
 * at price each. Returns MARKET_OK, ERR_INVALID, ERR_NOMEM. */
int market_world_add_units_listing(market_world *w, const char *seller, const char *item,
                                   int64_t price, int64_t units) {
    if (units < 1 || price < 1 || price > MARKET_PRICE_MAX) return MARKET_ERR_INVALID;
    return add_item(w, seller, item, price, units);
}

/* Lists item by seller at price (1..MARKET_PRICE_MAX). Returns MARKET_OK,
 * ERR_INVALID, ERR_NOMEM. */
int market_world_add_listing(market_world *w, const char *seller, const char *item, int64_t price) {
    if (price < 1 || price > MARKET_PRICE_MAX) return MARKET_ERR_INVALID;
    return add_item(w, seller, item, price, 0);
}

/* Makes seller's listing of item (the latest added) end duration_s (1..MARKET_DURATION_MAX_S)
 * after the world is stored, by the store's clock, as a list with that duration would.
 * Returns MARKET_OK, or ERR_INVALID (no such listing, a bad duration). */
int market_world_end_listing(market_world *w, const char *seller, const char *item,
                             int64_t duration_s) {
    if (!w || !seller || !item || duration_s < 1 || duration_s > MARKET_DURATION_MAX_S)
        return MARKET_ERR_INVALID;
    for (size_t i = w->n_items; i-- > 0;) {
        struct witem *it = &w->items[i];
        if (it->price > 0 && strcmp(it->item, item) == 0 && strcmp(it->owner, seller) == 0) {
            it->duration_s = duration_s;
            return MARKET_OK;
        }
    }
    return MARKET_ERR_INVALID;
}

/* Makes every listing of w end duration_s (1..MARKET_DURATION_MAX_S) after the world is
 * stored (market_world_end_listing() of each). Returns MARKET_OK or ERR_INVALID. */
int market_world_generate_ends(market_world *w, int64_t duration_s) {
    if (!w || duration_s < 1 || duration_s > MARKET_DURATION_MAX_S) return MARKET_ERR_INVALID;
    for (size_t i = 0; i < w->n_items; i++)
        if (w->items[i].price > 0) w->items[i].duration_s = duration_s;
    return MARKET_OK;
}

/* Rests a buy order of buyer for quantity (1..MARKET_QUANTITY_MAX) units of
 * the stackable good item at price (1..MARKET_PRICE_MAX) in item's book,
 * quantity * price escrowed out of the buyer's funds as it is stored. The
 * world's check refuses a buyer who cannot pay for its orders, an order of
 * a unique item, and one at or over the price of a listing of its good (it
 * would have filled). Returns MARKET_OK, ERR_INVALID, ERR_NOMEM. */
int market_world_add_order(market_world *w, const char *buyer, const char *item, int64_t quantity,
                           int64_t price) {
    if (!w || !market_id_valid(buyer) || !market_id_valid(item) || quantity < 1 ||
        quantity > MARKET_QUANTITY_MAX || price < 1 || price > MARKET_PRICE_MAX)
        return MARKET_ERR_INVALID;
    if (market__grow((void **)&w->orders, &w->cap_orders, w->n_orders + 1, sizeof *w->orders) < 0)
        return MARKET_ERR_NOMEM;
    struct worder *o = &w->orders[w->n_orders++];
    snprintf(o->buyer, sizeof o->buyer, "%s", buyer);
    snprintf(o->item, sizeof o->item, "%s", item);
    o->quantity = quantity;
    o->price = price;
    return MARKET_OK;
}

/* Opens an auction of seller's unique item (quantity 0) or of quantity units of the good
 * item once the world is stored, as POST /auctions does: from start, buyout (0: none),
 * steps of step (0: 1), ending duration_s after (1..MARKET_DURATION_MAX_S). The world's
 * check refuses goods its seller does not hold there. Returns MARKET_OK, ERR_INVALID,
 * ERR_NOMEM. */
int market_world_add_auction(market_world *w, const char *seller, const char *item,
                             int64_t quantity, int64_t start, int64_t buyout, int64_t step,
                             int64_t duration_s) {
    int64_t q = quantity ? quantity : 1;
    if (!w || !market_id_valid(seller) || !market_id_valid(item) || quantity < 0 ||
        quantity > MARKET_QUANTITY_MAX || start < 1 || start > MARKET_PRICE_MAX || buyout < 0 ||
        buyout > MARKET_PRICE_MAX || (buyout && buyout < start) || step < 0 ||
        step > MARKET_PRICE_MAX || (buyout ? buyout : MARKET_PRICE_MAX) > INT64_MAX / q ||
        duration_s < 1 || duration_s > MARKET_DURATION_MAX_S)
        return MARKET_ERR_INVALID;
    if (market__grow((void **)&w->auctions, &w->cap_auctions, w->n_auctions + 1,
                     sizeof *w->auctions) < 0)
        return MARKET_ERR_NOMEM;
    struct wauction *a = &w->auctions[w->n_auctions++];
    snprintf(a->seller, sizeof a->seller, "%s", seller);
    snprintf(a->item, sizeof a->item, "%s", item);
    a->quantity = quantity;
    a->start = start;
    a->buyout = buyout;
    a->step = step ? step : 1;
    a->duration_s = duration_s;
    return MARKET_OK;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Adds players p0..p<players-1> with funds each, and items i0..i<items-1>,
 * item k listed by player k % players at a price uniform in
 * price_lo..price_hi (deterministic for a seed). Returns MARKET_OK, or
 * ERR_INVALID (no players, bad funds or price range), ERR_NOMEM. */
int market_world_generate(market_world *w, size_t players, size_t items, int64_t funds,
                          int64_t price_lo, int64_t price_hi, uint64_t seed) {
    if (!w || players == 0 || funds < 0 || price_lo < 1 || price_hi < price_lo ||
        price_hi > MARKET_PRICE_MAX)
        return MARKET_ERR_INVALID;
    char id[MARKET_ID_MAX + 1], item[MARKET_ID_MAX + 1], name[MARKET_NAME_MAX + 1];
    for (size_t i = 0; i < players; i++) {
        snprintf(id, sizeof id, "p%zu", i);
        snprintf(name, sizeof name, "Player %zu", i);
        int rc = market_world_add_player(w, id, name, funds);
        if (rc < 0) return rc;
    }
    uint64_t span = (uint64_t)(price_hi - price_lo) + 1, s = seed;
    for (size_t k = 0; k < items; k++) {
        snprintf(id, sizeof id, "p%zu", k % players);
        snprintf(item, sizeof item, "i%zu", k);
        int rc = market_world_add_listing(w, id, item, price_lo + (int64_t)(splitmix64(&s) % span));
        if (rc < 0) return rc;
    }
    return MARKET_OK;
}

/* Adds stackable goods g0..g<goods-1> to a world of players p0..p<players-1>
 * (market_world_generate()'s): player k holds 100 units of good k % goods
 * and lists 50 more of it at a price uniform in price_lo..price_hi
 * (deterministic for a seed). Returns MARKET_OK, or ERR_INVALID, ERR_NOMEM. */
int market_world_generate_goods(market_world *w, size_t players, size_t goods, int64_t price_lo,
                                int64_t price_hi, uint64_t seed) {
    if (!w || players == 0 || price_lo < 1 || price_hi < price_lo || price_hi > MARKET_PRICE_MAX)
        return MARKET_ERR_INVALID;
    char id[MARKET_ID_MAX + 1], good[MARKET_ID_MAX + 1];
    uint64_t span = (uint64_t)(price_hi - price_lo) + 1, s = seed ^ UINT64_C(0x600d5);
    for (size_t k = 0; goods && k < players; k++) {
        snprintf(id, sizeof id, "p%zu", k);
        snprintf(good, sizeof good, "g%zu", k % goods);
        int rc = market_world_add_stack(w, id, good, 100);
        if (rc == MARKET_OK)
            rc = market_world_add_units_listing(w, id, good,
                                                price_lo + (int64_t)(splitmix64(&s) % span), 50);
        if (rc < 0) return rc;
    }
    return MARKET_OK;
}

/* Returns the index of player id in w, or SIZE_MAX: looked for at k first,
 * and p<n> at n (market_world_generate() adds them in order). */
static size_t player_at(const market_world *w, const char *id, size_t k) {
    if (k < w->n_players && strcmp(w->players[k].id, id) == 0) return k;
    char *end;
    unsigned long long n = id[0] == 'p' ? strtoull(id + 1, &end, 10) : w->n_players;
    if (n < w->n_players && *end == '\0' && strcmp(w->players[n].id, id) == 0) return (size_t)n;
    for (size_t i = 0; i < w->n_players; i++)
        if (strcmp(w->players[i].id, id) == 0) return i;
    return SIZE_MAX;
}

/* Adds orders buy orders to a world of goods g0..g<goods-1> (those of
 * market_world_generate_goods()): order k by player p<k*7 % players> for
 * 1..10 units of good k % goods, at 50..99% of the good's cheapest listing,
 * so that each rests in the book; a good listed at 1, and a player whose
 * funds would not cover its orders, get none (deterministic for a seed).
 * Returns MARKET_OK, or ERR_INVALID, ERR_NOMEM. */
int market_world_generate_orders(market_world *w, size_t players, size_t goods, size_t orders,
                                 uint64_t seed) {
    if (!w || (orders && (players == 0 || goods == 0))) return MARKET_ERR_INVALID;
    int64_t *cheapest = calloc(goods ? goods : 1, sizeof *cheapest);
    int64_t *escrow = calloc(w->n_players ? w->n_players : 1, sizeof *escrow);
    int rc = cheapest && escrow ? MARKET_OK : MARKET_ERR_NOMEM;
    for (size_t i = 0; rc == MARKET_OK && i < w->n_items; i++) { /* "g<k>": good k */
        const struct witem *it = &w->items[i];
        char *end;
        unsigned long long g = it->item[0] == 'g' ? strtoull(it->item + 1, &end, 10) : goods;
        if (!it->units || !it->price || g >= goods || *end) continue;
        if (!cheapest[g] || it->price < cheapest[g]) cheapest[g] = it->price;
    }
    uint64_t s = seed ^ UINT64_C(0x0bde75);
    char id[MARKET_ID_MAX + 1], good[MARKET_ID_MAX + 1];
    for (size_t k = 0; rc == MARKET_OK && k < orders; k++) {
        size_t pk = k * 7 % players, g = k % goods;
        snprintf(id, sizeof id, "p%zu", pk);
        snprintf(good, sizeof good, "g%zu", g);
        int64_t q = 1 + (int64_t)(splitmix64(&s) % 10);
        int64_t price = cheapest[g] * (50 + (int64_t)(splitmix64(&s) % 50)) / 100;
        size_t i = player_at(w, id, pk);
        if (price < 1 || price >= cheapest[g] || i == SIZE_MAX ||
            q * price > w->players[i].funds - escrow[i])
            continue;
        escrow[i] += q * price;
        rc = market_world_add_order(w, id, good, q, price);
    }
    free(cheapest);
    free(escrow);
    return rc;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Orders goods (items with units) by listed or held, item, owner. */
static int cmp_good(const void *a, const void *b) {
    const struct witem *x = *(const struct witem *const *)a, *y = *(const struct witem *const *)b;
    if ((x->price != 0) != (y->price != 0)) return x->price != 0 ? 1 : -1;
    int c = strcmp(x->item, y->item);
    return c ? c : strcmp(x->owner, y->owner);
}

/* Checks w's auctions: each seller holds (not lists) what it auctions, its units of a good
 * enough for all of its auctions of it, a unique item auctioned once. Returns MARKET_OK, or
 * ERR_NOT_HELD with a sentence in why, ERR_NOMEM. */
static int auctions_check(const market_world *w, char *why, size_t whylen) {
    if (!w->n_auctions) return MARKET_OK;
    const struct witem **held = malloc((w->n_items ? w->n_items : 1) * sizeof *held);
    int64_t *left = malloc((w->n_items ? w->n_items : 1) * sizeof *left);
    int rc = held && left ? MARKET_OK : MARKET_ERR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; rc == MARKET_OK && i < w->n_items; i++)
        if (!w->items[i].price) held[n++] = &w->items[i];
    if (rc == MARKET_OK) qsort(held, n, sizeof *held, cmp_good);
    for (size_t i = 0; rc == MARKET_OK && i < n; i++)
        left[i] = held[i]->units ? held[i]->units : 1;
    for (size_t k = 0; rc == MARKET_OK && k < w->n_auctions; k++) {
        const struct wauction *a = &w->auctions[k];
        struct witem key = {0};
        memcpy(key.item, a->item, sizeof key.item);
        memcpy(key.owner, a->seller, sizeof key.owner);
        const struct witem *kp = &key, **at = bsearch(&kp, held, n, sizeof *held, cmp_good);
        size_t i = at ? (size_t)(at - held) : SIZE_MAX;
        int64_t q = a->quantity ? a->quantity : 1;
        if (i == SIZE_MAX || (held[i]->units != 0) != (a->quantity != 0) || left[i] < q) {
            snprintf(why, whylen, "auction of %s by '%s': it does not hold that much of it",
                     a->item, a->seller);
            rc = MARKET_ERR_NOT_HELD;
        } else {
            left[i] -= q;
        }
    }
    free(held);
    free(left);
    return rc;
}

/* Checks w's buy orders: each buyer a player who can escrow all of its
 * orders, each item a good (no unique item of w has its id), and none at or
 * over the price of a listing of its good (it would have filled). Returns
 * MARKET_OK, or ERR_NO_PLAYER / ERR_INSUFFICIENT_FUNDS / ERR_INVALID with
 * a sentence in why. */
static int orders_check(const market_world *w, char *why, size_t whylen) {
    int64_t *escrow = calloc(w->n_players ? w->n_players : 1, sizeof *escrow);
    if (!escrow) return MARKET_ERR_NOMEM;
    int rc = MARKET_OK;
    for (size_t k = 0; k < w->n_orders && rc == MARKET_OK; k++) {
        const struct worder *o = &w->orders[k];
        size_t i = player_at(w, o->buyer, 0);
        if (i == SIZE_MAX) {
            snprintf(why, whylen, "buy order of '%s': unknown player '%s'", o->item, o->buyer);
            rc = MARKET_ERR_NO_PLAYER;
            break;
        }
        if (o->quantity > (w->players[i].funds - escrow[i]) / o->price) {
            snprintf(why, whylen, "player '%s' cannot escrow its buy orders (%lld funds)", o->buyer,
                     (long long)w->players[i].funds);
            rc = MARKET_ERR_INSUFFICIENT_FUNDS;
            break;
        }
        escrow[i] += o->quantity * o->price;
        for (size_t j = 0; j < w->n_items && rc == MARKET_OK; j++) {
            const struct witem *it = &w->items[j];
            if (strcmp(it->item, o->item) != 0) continue;
            if (!it->units) {
                snprintf(why, whylen, "buy order of '%s': a unique item, not a good", o->item);
                rc = MARKET_ERR_INVALID;
            } else if (it->price && it->price <= o->price) {
                snprintf(why, whylen,
                         "buy order of '%s' at %lld: '%s' lists it at %lld, which would fill it",
                         o->item, (long long)o->price, it->owner, (long long)it->price);
                rc = MARKET_ERR_INVALID;
            }
        }
    }
    free(escrow);
    return rc;
}

/* Checks w as a whole: no player twice, no item twice (in inventories and
 * listings together), every owner a player of w, its buy orders
 * (orders_check()) and its auctions (auctions_check()). Returns MARKET_OK, or
 * ERR_DUPLICATE / ERR_NO_PLAYER / ERR_INSUFFICIENT_FUNDS / ERR_INVALID /
 * ERR_NOT_HELD with a sentence in why, or ERR_NOMEM. */
int market_world_check(const market_world *w, char *why, size_t whylen) {
    char scratch[1];
    if (!why || whylen == 0) {
        why = scratch;
        whylen = sizeof scratch;
    }
    why[0] = '\0';
    if (!w) return MARKET_ERR_INVALID;
    int rc = MARKET_OK;
    size_t n = w->n_players > w->n_items ? w->n_players : w->n_items;
    const char **ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return MARKET_ERR_NOMEM;

    for (size_t i = 0; i < w->n_players; i++)
        ids[i] = w->players[i].id;
    qsort(ids, w->n_players, sizeof *ids, cmp_str_ptr);
    for (size_t i = 1; i < w->n_players && rc == MARKET_OK; i++)
        if (strcmp(ids[i - 1], ids[i]) == 0) {
            snprintf(why, whylen, "player '%s' appears twice", ids[i]);
            rc = MARKET_ERR_DUPLICATE;
        }
    for (size_t i = 0; i < w->n_items && rc == MARKET_OK; i++) {
        const char *owner = w->items[i].owner;
        if (!bsearch(&owner, ids, w->n_players, sizeof *ids, cmp_str_ptr)) {
            snprintf(why, whylen, "item '%s': unknown player '%s'", w->items[i].item, owner);
            rc = MARKET_ERR_NO_PLAYER;
        }
    }
    size_t nu = 0; /* the unique items first, sorted; then the goods' ids, sorted */
    for (size_t i = 0; i < w->n_items && rc == MARKET_OK; i++)
        if (!w->items[i].units) ids[nu++] = w->items[i].item;
    size_t ng = nu;
    for (size_t i = 0; i < w->n_items && rc == MARKET_OK; i++)
        if (w->items[i].units) ids[ng++] = w->items[i].item;
    qsort(ids, nu, sizeof *ids, cmp_str_ptr);
    qsort(ids + nu, ng - nu, sizeof *ids, cmp_str_ptr);
    for (size_t i = 1; i < nu && rc == MARKET_OK; i++)
        if (strcmp(ids[i - 1], ids[i]) == 0) {
            snprintf(why, whylen, "item '%s' appears twice", ids[i]);
            rc = MARKET_ERR_DUPLICATE;
        }
    for (size_t i = 0; i < nu && rc == MARKET_OK; i++)
        if (bsearch(&ids[i], ids + nu, ng - nu, sizeof *ids, cmp_str_ptr)) {
            snprintf(why, whylen, "item '%s' is both a unique item and a stackable good", ids[i]);
            rc = MARKET_ERR_DUPLICATE;
        }
    /* one stack of a good per owner, one listing of it per seller */
    const struct witem **g = malloc((ng - nu ? ng - nu : 1) * sizeof *g);
    if (!g) rc = rc == MARKET_OK ? MARKET_ERR_NOMEM : rc;
    size_t k = 0;
    for (size_t i = 0; g && i < w->n_items; i++)
        if (w->items[i].units) g[k++] = &w->items[i];
    if (g) qsort(g, k, sizeof *g, cmp_good);
    for (size_t i = 1; g && i < k && rc == MARKET_OK; i++)
        if (cmp_good(&g[i - 1], &g[i]) == 0) {
            snprintf(why, whylen, "%s of '%s' by '%s' appears twice",
                     g[i]->price ? "a listing" : "a stack", g[i]->item, g[i]->owner);
            rc = MARKET_ERR_DUPLICATE;
        }
    free(g);
    free(ids);
    if (rc == MARKET_OK) rc = orders_check(w, why, whylen);
    return rc == MARKET_OK ? auctions_check(w, why, whylen) : rc;
}

/* ---- writing a world, in steps ---- */

/* Seeding's pipeline, sent a step at a time (see DESIGN). */
struct seed_steps {
    struct market__bulk b;             /* the step being built */
    size_t elems;                      /* the keys and fields it writes */
    unsigned done;                     /* steps whose replies were all read and good */
    int open;                          /* its MULTI is sent: its commands queue behind it */
    char lease[MARKET__KEY_MAX];       /* the run's lease on its realm (market__key_seeding) */
    char token[MARKET__TOKEN_LEN + 1]; /* the run's, in the lease */
    market__buf g;                     /* the lease's commands */
};

/* Takes the lease of the run that seeds realm (SET NX PX). Returns MARKET_OK, or
 * ERR_REALM_UNAVAILABLE when another run holds it, ERR_STORE; c's errstr says why. */
static int lease_take(struct seed_steps *st, const char *realm) {
    market_conn *c = st->b.c;
    market__key_seeding(st->lease, realm);
    if (market__token_new(st->token) < 0) return market__fail(c, "cannot draw a seeding token");
    market__rd_claim(&st->g, st->lease, st->token, SEED_LEASE_MS);
    market__rd_pttl(&st->g, st->lease);
    int rc = market__pipeline_buf(c, &st->g);
    if (rc < 0) return rc;
    const redisReply *set = st->g.rep[0], *ttl = st->g.rep[1];
    if (market__reply_nil(set)) {
        market__fail(c, "another run is seeding realm %s (its lease %s lapses in %lld ms)", realm,
                     st->lease, (long long)market__reply_count(ttl));
        rc = MARKET_ERR_REALM_UNAVAILABLE;
    } else if (!market__reply_ok(set)) {
        rc = market__fail_reply(c, "taking the seeding lease", set);
    }
    market__replies_free(st->g.rep, 2);
    return rc;
}

/* Opens st's step unless it is open: under a WATCH of the run's lease, reads it, and when it
 * is still the run's, sends MULTI, so that the step's EXEC (step_end) writes it only while
 * the lease stays the run's. Returns MARKET_OK, or ERR_STORE (the lease is another run's or
 * lapsed, or Redis failed; c's errstr says which). */
static int step_open(struct seed_steps *st) {
    if (st->open) return MARKET_OK;
    market_conn *c = st->b.c;
    market__buf_reset(&st->g);
    market__rd_watch_begin(&st->g);
    market__buf_arg(&st->g, st->lease);
    market__buf_end(&st->g, 1);
    market__rd_values_begin(&st->g);
    market__buf_arg(&st->g, st->lease);
    market__buf_end(&st->g, 1);
    int rc = market__pipeline_buf(c, &st->g);
    if (rc < 0) return rc;
    const redisReply *v = st->g.rep[1];
    int ours = market__reply_array(v, 1, 0) && market__reply_is(market__reply_at(v, 0), st->token);
    market__replies_free(st->g.rep, 2);
    c->unwatch = 1; /* the EXEC ends the WATCH; on a failure the next pipeline does */
    if (!ours)
        return market__fail(c, "the seeding lease %s is no longer this run's (another run took "
                               "it, or it lapsed): seeding stopped", st->lease);
    market__fx_multi(&st->g);
    market__bulk_add_buf(&st->b, &st->g);
    st->open = 1;
    return MARKET_OK;
}

/* Ends st's step: keeps the lease SEED_LEASE_MS more and commits the step (EXEC, unless the
 * lease changed since step_open()), and reads the replies. Returns MARKET_OK, or ERR_STORE
 * (a reply was an error, the lease was lost, or the connection failed; c's errstr says
 * which, or, past cfg.test_seed_steps steps, that the test hook stopped it). */
static int step_end(struct seed_steps *st) {
    if (!st->open && st->b.sent == 0 && !st->b.failed) return MARKET_OK;
    if (st->open) {
        market__fx_lease_keep(&st->g, st->lease, SEED_LEASE_MS);
        market__fx_exec(&st->g);
        market__bulk_add_buf(&st->b, &st->g);
        st->open = 0;
    }
    int rc = market__bulk_finish(&st->b);
    st->b.sent = 0;
    st->b.failed = 0;
    st->elems = 0;
    if (rc < 0) return rc;
    if (st->b.last_nil)
        return market__fail(st->b.c, "the seeding lease %s changed during a step (another run "
                                     "took it): that step wrote nothing, seeding stopped",
                            st->lease);
    uint32_t stop = st->b.c->m->cfg.test_seed_steps;
    if (++st->done == stop && stop)
        return market__fail(st->b.c, "seeding stopped after %u steps (test hook)", stop);
    return MARKET_OK;
}

/* Adds the commands of w, which write elems keys or fields, to st's step; ends the step when
 * it holds SEED_STEP_ELEMS or more. Returns MARKET_OK or ERR_STORE (see step_end()). */
static int step_add(struct seed_steps *st, market__buf *w, size_t elems) {
    int rc = step_open(st);
    if (rc < 0) {
        market__buf_reset(w);
        return rc;
    }
    market__bulk_add_buf(&st->b, w);
    st->elems += elems;
    return st->elems >= SEED_STEP_ELEMS ? step_end(st) : MARKET_OK;
}

/* Deletes realm's keys (a reset): those matching its kinds' patterns, found by SCAN, then its
 * market, units, trades, settings, order and auction counters and ends, UNLINK_CHUNK keys an UNLINK
 * (a large key is freed apart from Redis's main thread). Returns MARKET_OK, ERR_STORE or ERR_NOMEM.
 */
static int realm_reset(struct seed_steps *st, market__buf *w, const market__realm *rl) {
    struct market__keylist keys = {0};
    int rc = MARKET_OK;
    for (size_t i = 0; i < MARKET__REALM_KINDS && rc == MARKET_OK; i++) {
        char pattern[MARKET__KEY_MAX];
        market__key(pattern, sizeof pattern, market__realm_kinds[i], rl->id, "*");
        rc = market__scan_keys(st->b.c, pattern, &keys);
    }
    for (size_t at = 0; rc == MARKET_OK && at < keys.n; at += UNLINK_CHUNK) {
        size_t n = keys.n - at < UNLINK_CHUNK ? keys.n - at : UNLINK_CHUNK;
        market__fx_unlink(w, (const char *const *)keys.keys + at, n);
        rc = step_add(st, w, n);
    }
    const char *realm_keys[8] = {rl->market, rl->units, rl->trades,   rl->settings,
                                 rl->orders, rl->ends,  rl->auctions, rl->directs};
    market__fx_unlink(w, realm_keys, 8);
    if (rc == MARKET_OK) rc = step_add(st, w, 8);
    market__buf_reset(w);
    market__keylist_free(&keys);
    return rc;
}

static int cmp_item_owner(const void *a, const void *b) {
    const struct witem *x = a, *y = b;
    return strcmp(x->owner, y->owner);
}

/* Scratch for writing a world's listings a ZADD at a time. */
struct listing_chunk {
    market__buf w;                               /* the ZADD */
    market__idx_entry e[ZADD_CHUNK]; /* each listing's index entries and score (its name: its
                                        member of market:{r} and of the names index) */
};

/* Orders listings as market:{r} does: by price, item, seller. */
static int cmp_by_price(const void *a, const void *b) {
    const struct witem *x = *(const struct witem *const *)a, *y = *(const struct witem *const *)b;
    if (x->price != y->price) return x->price < y->price ? -1 : 1;
    int c = strcmp(x->item, y->item);
    return c ? c : strcmp(x->owner, y->owner);
}

/* Orders listings by seller, item: each seller's index's together. */
static int cmp_by_seller(const void *a, const void *b) {
    const struct witem *x = *(const struct witem *const *)a, *y = *(const struct witem *const *)b;
    int c = strcmp(x->owner, y->owner);
    return c ? c : strcmp(x->item, y->item);
}

#define ZSET_MARKET MARKET__IDX_KINDS      /* listings_add(): market:{r} */
#define ZSET_NAMES (MARKET__IDX_KINDS + 1) /* ... and the names index */

/* Returns 1 when listings x and y go into the same zset of kind: the same item's index,
 * the same seller's, or (ZSET_MARKET, ZSET_NAMES) market:{r} or the names index. */
static int same_zset(int kind, const struct witem *x, const struct witem *y) {
    if (kind == MARKET__IDX_ITEM) return strcmp(x->item, y->item) == 0;
    if (kind == MARKET__IDX_SELLER) return strcmp(x->owner, y->owner) == 0;
    return 1;
}

/* Writes, in st's steps, the ZADDs of the world's listings (items[0..n) with a price): into
 * market:{r} (member "<item>.<seller>"), into each item's index and into each seller's
 * (market_index.c), every one scored by its price, and into the names index (member
 * "<item>.<seller>", scored 0); one ZADD per zset and ZADD_CHUNK listings at most.
 * market:{r}'s members go in its order (Redis inserts a run of neighbours faster than
 * members scattered over a large zset). Returns MARKET_OK, or
 * ERR_STORE (see step_end()), ERR_NOMEM. */
static int listings_add(struct seed_steps *st, const market__realm *rl, const struct witem *items,
                        size_t n, struct listing_chunk *ch) {
    /* listings ordered so that each zset's come together: cmp_good orders them by item */
    static int (*const order[ZSET_NAMES + 1])(const void *, const void *) = {
        [MARKET__IDX_ITEM] = cmp_good,
        [MARKET__IDX_SELLER] = cmp_by_seller,
        [ZSET_MARKET] = cmp_by_price,
        [ZSET_NAMES] = cmp_good,
    };
    size_t listed = 0;
    for (size_t i = 0; i < n; i++)
        listed += items[i].price != 0;
    if (!listed) return MARKET_OK;
    const struct witem **l = malloc(listed * sizeof *l);
    if (!l) return MARKET_ERR_NOMEM;
    listed = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].price) l[listed++] = &items[i];
    int rc = MARKET_OK;
    for (int k = 0; k <= ZSET_NAMES && rc == MARKET_OK; k++) { /* indexes, market, names */
        qsort(l, listed, sizeof *l, order[k]);
        for (size_t i = 0, c; i < listed && rc == MARKET_OK; i += c) {
            for (c = 0; c < ZADD_CHUNK && i + c < listed && same_zset(k, l[i], l[i + c]); c++) {
                const struct witem *it = l[i + c];
                market__idx_entry_init(&ch->e[c], rl->id, it->item, it->owner, it->price);
            }
            market__fx_scores_begin(&ch->w, k < MARKET__IDX_KINDS ? ch->e[0].key[k]
                                            : k == ZSET_MARKET  ? rl->market
                                                                : ch->e[0].names_key);
            for (size_t j = 0; j < c; j++) {
                market__buf_arg(&ch->w, k == ZSET_NAMES ? MARKET__IDX_NAMES_SCORE : ch->e[j].score);
                market__buf_arg(&ch->w, k < MARKET__IDX_KINDS ? ch->e[j].member[k] : ch->e[j].name);
            }
            market__buf_end(&ch->w, 2);
            rc = step_add(st, &ch->w, c);
        }
    }
    free(l);
    return rc;
}

/* Reads realm's last buy order id into *last (0 for none), between steps.
 * Returns MARKET_OK, or ERR_STORE (c's errstr says why), ERR_NOMEM. */
static int orders_last(market_conn *c, const market__realm *rl, int64_t *last) {
    market__buf r = {0};
    *last = 0;
    market__rd_orders_last(&r, rl);
    int rc = market__pipeline_buf(c, &r);
    if (rc == MARKET_OK) {
        if (market__reply_orders_last(r.rep[0], last) < 0)
            rc = market__fail(c, "the last order id of realm %s is unreadable", rl->id);
        market__replies_free(r.rep, r.n);
    }
    market__buf_free(&r);
    return rc;
}

/* Writes w's buy orders into their books, with ids after last (the realm's
 * last order, read once the realm was marked: the service makes none
 * meanwhile), and the realm's last order id. Returns MARKET_OK, or
 * ERR_STORE (see step_end()), ERR_NOMEM. */
static int orders_write(struct seed_steps *st, const market__realm *rl, const market_world *w,
                        int64_t last, market__buf *wb) {
    int rc = MARKET_OK;
    for (size_t k = 0; k < w->n_orders && rc == MARKET_OK; k++) {
        const struct worder *o = &w->orders[k];
        market_bid bid = {.id = last + 1 + (int64_t)k,
                          .price = o->price,
                          .quantity = o->quantity,
                          .left = o->quantity};
        memcpy(bid.buyer, o->buyer, sizeof bid.buyer);
        memcpy(bid.item, o->item, sizeof bid.item);
        market__fx_bid_rest(wb, rl->id, &bid);
        rc = step_add(st, wb, 7);
    }
    if (rc == MARKET_OK) {
        market__fx_orders_last(wb, rl, last + (int64_t)w->n_orders);
        rc = step_add(st, wb, 1);
    }
    return rc;
}

/* Writes w's players, and the items each holds or lists (items[0..w->n_items), w's items
 * sorted by owner), in st's steps: each player's hash and inventory replaced, each listing
 * added with its units (and put in its search indexes at its price, which replaces the
 * price of an entry that was there). Returns MARKET_OK, or ERR_STORE (see step_end()),
 * ERR_NOMEM. */
static int world_write(struct seed_steps *st, const market__realm *rl, const market_world *w,
                       const struct witem *items, int64_t last, int64_t now_ms,
                       struct listing_chunk *ch) {
    char k_user[MARKET__KEY_MAX], k_inv[MARKET__KEY_MAX], k_stacks[MARKET__KEY_MAX];
    char member[MARKET__MEMBER_MAX];
    market__buf *wb = &ch->w;
    int64_t *escrow = calloc(w->n_players ? w->n_players : 1, sizeof *escrow);
    if (!escrow) return MARKET_ERR_NOMEM;
    for (size_t k = 0; k < w->n_orders; k++) /* checked: every buyer a player */
        escrow[player_at(w, w->orders[k].buyer, 0)] += w->orders[k].quantity * w->orders[k].price;
    int rc = MARKET_OK;
    for (size_t i = 0; i < w->n_players && rc == MARKET_OK; i++) {
        const struct wplayer *p = &w->players[i];
        market__key_user(k_user, rl->id, p->id);
        market__key_inventory(k_inv, rl->id, p->id);
        market__key_stacks(k_stacks, rl->id, p->id);
        market__fx_player_new(wb, k_user, k_inv, k_stacks, p->name, p->funds - escrow[i]);
        market__fx_escrow(wb, k_user, escrow[i]); /* added to its orders' already there */
        rc = step_add(st, wb, 6);
    }
    free(escrow);
    for (size_t i = 0; i < w->n_items && rc == MARKET_OK; i++) {
        const struct witem *it = &items[i];
        if (it->price == 0 && it->units) { /* a stack */
            market__key_stacks(k_stacks, rl->id, it->owner);
            market__fx_units_set(wb, k_stacks, it->item, it->units);
        } else if (it->price == 0) { /* a unique item */
            market__key_inventory(k_inv, rl->id, it->owner);
            market__fx_item_in(wb, k_inv, it->item);
        } else { /* a listing: its units, or none (a unique item's), and its end */
            snprintf(member, sizeof member, "%s.%s", it->item, it->owner);
            market__fx_listing_units_set(wb, rl, member, it->units);
            if (it->duration_s) market__fx_end_set(wb, rl, member, now_ms + it->duration_s * 1000);
        }
        rc = step_add(st, wb, 1 + (it->duration_s != 0));
    }
    if (rc == MARKET_OK) rc = listings_add(st, rl, items, w->n_items, ch);
    if (rc == MARKET_OK && w->n_orders) rc = orders_write(st, rl, w, last, wb);
    return rc;
}

/* When a listing of w has a duration: adds realm to the realms whose listings may end (the
 * sweepers look there) and reads the store's clock into *now_ms. Returns MARKET_OK, or
 * ERR_NOT_REPLICATED, ERR_STORE, ERR_NOMEM. */
static int world_ends(market_conn *c, const char *realm, const market_world *w, int64_t *now_ms) {
    size_t i = 0;
    while (i < w->n_items && w->items[i].duration_s == 0)
        i++;
    if (i == w->n_items) return MARKET_OK;
    int rc = market__ending_add(c, realm);
    if (rc < 0) return rc;
    market__buf b = {0}; /* the realm's master's clock, whether the realm is marked or not */
    market__rd_time(&b);
    if ((rc = market__route(c, realm)) == MARKET_OK) rc = market__pipeline_buf(c, &b);
    if (rc == MARKET_OK) {
        if (market__reply_time(b.rep[0], now_ms) < 0)
            rc = market__fail_reply(c, "reading the store's clock", b.rep[0]);
        market__replies_free(b.rep, b.n);
    }
    market__buf_free(&b);
    return rc;
}

/* Writes w into realm, in steps of a few thousand keys and fields each (see DESIGN): first
 * the realm's mark, market:{r}:building, which has every operation of the realm refused
 * (MARKET_ERR_REALM_UNAVAILABLE) until the last step deletes it; with reset, then the
 * realm's players, inventories, stacks, idempotency records, indexes, trades, sales and
 * market deleted (other realms are left alone); then each player's hash and inventory
 * replaced, each listing added (and put in its search indexes at its price, which replaces
 * the price of an entry that was there). w is checked first and nothing is written when it
 * fails. A failure after the mark leaves the realm refused, whatever the steps before it
 * wrote, until a call for it succeeds. Returns MARKET_OK, or ERR_DUPLICATE / ERR_NO_PLAYER
 * (see market_world_check), ERR_INVALID (a bad realm id), ERR_STORE (c's errstr says why),
 * ERR_NOMEM. */
/* Opens w's auctions in realm, stored, as POST /auctions does (its realm noted for the
 * sweepers first). Returns MARKET_OK, or the first failure (c's errstr says which). */
static int auctions_open(market_conn *c, const char *realm, const market_world *w) {
    int rc = w->n_auctions ? market_ending_note(c, realm) : MARKET_OK;
    for (size_t k = 0; rc == MARKET_OK && k < w->n_auctions; k++) {
        const struct wauction *a = &w->auctions[k];
        market_order o = {.type = MARKET_ORDER_AUCTION,
                          .realm = realm,
                          .player = a->seller,
                          .item = a->item,
                          .quantity = a->quantity,
                          .price = a->start,
                          .buyout = a->buyout,
                          .step = a->step,
                          .duration_s = a->duration_s};
        rc = market_order_run(c, &o);
        if (rc < 0 && !MARKET_ERR_HAS_REASON(rc))
            market__fail(c, "auction of %s by %s: %s", a->item, a->seller, market_strerror(rc));
    }
    return rc;
}

int market_world_store(market_conn *c, const char *realm, const market_world *w, int reset) {
    if (!c || !w || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    int rc = market_world_check(w, NULL, 0);
    if (rc < 0) return rc;
    struct witem *items = NULL;
    struct listing_chunk *ch = NULL;
    struct seed_steps st = {.b = {c, 0, 0, 0}};
    market__realm rl;
    market__realm_init(&rl, realm);
    int64_t now_ms = 0; /* the store's clock: listings' ends start from it */
    if ((rc = world_ends(c, realm, w, &now_ms)) < 0) return rc;
    if ((rc = market__route(c, realm)) < 0 || (rc = market__connect(c)) < 0) return rc;
    items = malloc((w->n_items ? w->n_items : 1) * sizeof *items);
    ch = calloc(1, sizeof *ch);
    if (!items || !ch) {
        rc = MARKET_ERR_NOMEM;
        goto out;
    }
    if (w->n_items) memcpy(items, w->items, w->n_items * sizeof *items);
    qsort(items, w->n_items, sizeof *items, cmp_item_owner);
    if ((rc = lease_take(&st, realm)) < 0) goto out;
    market__fx_building(&ch->w, &rl, reset ? "seeding, with a reset" : "seeding");
    rc = step_add(&st, &ch->w, 1);
    if (rc == MARKET_OK) rc = step_end(&st); /* the mark first, alone: nothing before it */
    int64_t last = 0; /* the realm's last order id: a reset deletes the orders and it */
    if (rc == MARKET_OK && w->n_orders && !reset) rc = orders_last(c, &rl, &last);
    if (rc == MARKET_OK && reset) rc = realm_reset(&st, &ch->w, &rl);
    if (rc == MARKET_OK) rc = world_write(&st, &rl, w, items, last, now_ms, ch);
    if (rc == MARKET_OK) rc = step_end(&st);
    if (rc == MARKET_OK) { /* every step was written and answered: the realm is served again */
        market__fx_building_done(&ch->w, &rl);
        market__fx_lease_drop(&ch->w, st.lease);
        if ((rc = step_add(&st, &ch->w, 2)) == MARKET_OK) rc = step_end(&st);
    } else {
        (void)step_end(&st); /* what was sent is answered: read it, the failure stands */
        char why[sizeof c->errstr];
        snprintf(why, sizeof why, "%s", c->errstr);
        market__fx_lease_drop(&ch->w, st.lease); /* when still the run's: another may start */
        if (step_add(&st, &ch->w, 1) == MARKET_OK) (void)step_end(&st);
        snprintf(c->errstr, sizeof c->errstr, "%s", why);
    }
out:
    market__buf_free(&st.g);
    if (ch) market__buf_free(&ch->w);
    free(ch);
    free(items);
    return rc == MARKET_OK ? auctions_open(c, realm, w) : rc;
}
