/* market_world.c - building a world (fixtures or generated) and storing it.
 *
 * A market_world is a plain in-memory description of players, held items and
 * listings. It is checked as a whole (no player or item twice, every owner a
 * player) before anything is written, and written in one MULTI/EXEC, so a bad
 * world writes nothing; its listings go into the search indexes in the same
 * transaction (market_index.c). The audit that reads a store back is
 * market_audit.c's; rebuilding the indexes, market_reindex.c's.
 */
#include "market/market.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_bulk.h"

/* The key patterns of a realm's keys that seeding with reset deletes (and its market and
 * its trades): players, inventories, stacks, idempotency records, search indexes, trade
 * indexes, and sales (with their bought hashes). */

#define ZADD_CHUNK 256 /* score/member pairs per ZADD while seeding */

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
};

struct market_world {
    struct wplayer *players;
    size_t n_players, cap_players;
    struct witem *items;
    size_t n_items, cap_items;
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
    free(w);
}

/* Adds a player. name may be NULL (the id is used). Returns MARKET_OK, or
 * ERR_INVALID (bad id, name over MARKET_NAME_MAX bytes, negative funds),
 * ERR_NOMEM. Duplicates are found by market_world_check(). */
int market_world_add_player(market_world *w, const char *id, const char *name, int64_t funds) {
    if (!w || !market_id_valid(id) || funds < 0) return MARKET_ERR_INVALID;
    if (!name) name = id;
    if (strlen(name) > MARKET_NAME_MAX) return MARKET_ERR_INVALID;
    if (market__grow((void **)&w->players, &w->cap_players, w->n_players + 1, sizeof *w->players) <
        0)
        return MARKET_ERR_NOMEM;
    struct wplayer *p = &w->players[w->n_players++];
    snprintf(p->id, sizeof p->id, "%s", id);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->funds = funds;
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
    snprintf(it->item, sizeof it->item, "%s", item);
    snprintf(it->owner, sizeof it->owner, "%s", owner);
    it->price = price;
    it->units = units;
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

/* Checks w as a whole: no player twice, no item twice (in inventories and
 * listings together), every owner a player of w. Returns MARKET_OK, or
 * ERR_DUPLICATE / ERR_NO_PLAYER with a sentence in why, or ERR_NOMEM. */
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
    return rc;
}

/* ---- writing a world ---- */

static int collect_realm_keys(market_conn *c, const char *realm, struct market__keylist *keys) {
    for (size_t i = 0; i < MARKET__REALM_KINDS; i++) {
        char pattern[MARKET__KEY_MAX];
        market__key(pattern, sizeof pattern, market__realm_kinds[i], realm, "*");
        int rc = market__scan_keys(c, pattern, keys);
        if (rc < 0) return rc;
    }
    return MARKET_OK;
}

static void bulk_del_keys(struct market__bulk *b, market__buf *w, const market__realm *r,
                          const struct market__keylist *keys) {
    for (size_t i = 0; i < keys->n; i++) {
        market__fx_unlink(w, (const char *const *)&keys->keys[i], 1);
        market__bulk_add_buf(b, w);
    }
    const char *realm_keys[3] = {r->market, r->units, r->trades};
    market__fx_unlink(w, realm_keys, 3);
    market__bulk_add_buf(b, w);
}

static int cmp_item_owner(const void *a, const void *b) {
    const struct witem *x = a, *y = b;
    return strcmp(x->owner, y->owner);
}

/* Scratch for writing a world's listings a ZADD at a time. */
struct listing_chunk {
    market__buf w;                               /* the ZADD */
    market__idx_entry e[ZADD_CHUNK];             /* each listing's index entries and score */
    char member[ZADD_CHUNK][MARKET__MEMBER_MAX]; /* ... and its member of market:{r} */
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

/* Returns 1 when listings x and y go into the same zset of kind: the same item's index,
 * the same seller's, or (MARKET__IDX_KINDS) market:{r}. */
static int same_zset(int kind, const struct witem *x, const struct witem *y) {
    if (kind == MARKET__IDX_ITEM) return strcmp(x->item, y->item) == 0;
    if (kind == MARKET__IDX_SELLER) return strcmp(x->owner, y->owner) == 0;
    return 1;
}

/* Appends to b the ZADDs of the world's listings (items[0..n) with a price): into
 * market:{r} (member "<item>.<seller>"), into each item's index and into each seller's
 * (market_index.c), every one scored by its price; one ZADD per zset and ZADD_CHUNK
 * listings at most. market:{r}'s members go in its order (Redis inserts a run of
 * neighbours faster than members scattered over a large zset). Returns MARKET_OK or
 * MARKET_ERR_NOMEM (b then holds part of them: the caller must not commit it). */
static int listings_add(struct market__bulk *b, const market__realm *rl, const struct witem *items,
                        size_t n, struct listing_chunk *ch) {
    /* listings ordered so that each zset's come together: cmp_good orders them by item */
    static int (*const order[MARKET__IDX_KINDS + 1])(const void *, const void *) = {
        [MARKET__IDX_ITEM] = cmp_good,
        [MARKET__IDX_SELLER] = cmp_by_seller,
        [MARKET__IDX_KINDS] = cmp_by_price,
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
    for (int k = 0; k <= MARKET__IDX_KINDS; k++) { /* the indexes, then market:{r} */
        qsort(l, listed, sizeof *l, order[k]);
        for (size_t i = 0, c; i < listed; i += c) {
            for (c = 0; c < ZADD_CHUNK && i + c < listed && same_zset(k, l[i], l[i + c]); c++) {
                const struct witem *it = l[i + c];
                market__idx_entry_init(&ch->e[c], rl->id, it->item, it->owner, it->price);
                if (k == MARKET__IDX_KINDS)
                    snprintf(ch->member[c], sizeof ch->member[c], "%s.%s", it->item, it->owner);
            }
            market__fx_scores_begin(&ch->w, k < MARKET__IDX_KINDS ? ch->e[0].key[k] : rl->market);
            for (size_t j = 0; j < c; j++) {
                market__buf_arg(&ch->w, ch->e[j].score);
                market__buf_arg(&ch->w, k < MARKET__IDX_KINDS ? ch->e[j].member[k] : ch->member[j]);
            }
            market__buf_end(&ch->w, 2);
            market__bulk_add_buf(b, &ch->w);
        }
    }
    free(l);
    return MARKET_OK;
}

/* The time to wait for an EXEC that writes listings listings: the store's timeout, and
 * 20 us more for each listing. */
static struct timeval exec_timeout(const market_conn *c, size_t listings) {
    int64_t ms = c->m->cfg.redis_timeout_ms + (int64_t)(listings / 50);
    return (struct timeval){(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
}

/* Writes w into realm in one MULTI/EXEC: each player's hash and inventory
 * are replaced, each listing added (and put in its search indexes at its price, which
 * replaces the price of an entry that was there). With reset, the
 * realm's players, inventories, idempotency records, indexes and market are deleted
 * first (inside the same transaction; other realms are left alone). w is checked first and
 * nothing is written when it fails. Returns MARKET_OK, or ERR_DUPLICATE /
 * ERR_NO_PLAYER (see market_world_check), ERR_INVALID (a bad realm id),
 * ERR_STORE, ERR_NOMEM. */
int market_world_store(market_conn *c, const char *realm, const market_world *w, int reset) {
    if (!c || !w || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    int rc = market_world_check(w, NULL, 0);
    if (rc < 0) return rc;
    struct market__keylist keys = {0};
    struct witem *items = NULL;
    struct listing_chunk *ch = NULL;
    market__realm rl;
    market__realm_init(&rl, realm);
    if ((rc = market__route(c, realm)) < 0) goto out;
    if (reset && (rc = collect_realm_keys(c, realm, &keys)) < 0) goto out;
    if ((rc = market__connect(c)) < 0) goto out;
    items = malloc((w->n_items ? w->n_items : 1) * sizeof *items);
    if (!items) {
        rc = MARKET_ERR_NOMEM;
        goto out;
    }
    if (w->n_items) memcpy(items, w->items, w->n_items * sizeof *items);
    qsort(items, w->n_items, sizeof *items, cmp_item_owner);
    if (!(ch = calloc(1, sizeof *ch))) {
        rc = MARKET_ERR_NOMEM;
        goto out;
    }
    size_t n_listed = 0;
    for (size_t i = 0; i < w->n_items; i++)
        n_listed += items[i].price != 0;

    struct market__bulk b = {c, 0, 0};
    market__buf *wb = &ch->w;
    market__fx_multi(wb);
    market__bulk_add_buf(&b, wb);
    if (reset) bulk_del_keys(&b, wb, &rl, &keys);
    char k_user[MARKET__KEY_MAX], k_inv[MARKET__KEY_MAX], k_stacks[MARKET__KEY_MAX];
    char member[MARKET__MEMBER_MAX];
    for (size_t i = 0; i < w->n_players; i++) {
        const struct wplayer *p = &w->players[i];
        market__key_user(k_user, realm, p->id);
        market__key_inventory(k_inv, realm, p->id);
        market__key_stacks(k_stacks, realm, p->id);
        market__fx_player_new(wb, k_user, k_inv, k_stacks, p->name, p->funds);
        market__bulk_add_buf(&b, wb);
    }
    for (size_t i = 0; i < w->n_items; i++) {
        const struct witem *it = &items[i];
        if (it->price == 0 && it->units) { /* a stack */
            market__key_stacks(k_stacks, realm, it->owner);
            market__fx_units_set(wb, k_stacks, it->item, it->units);
        } else if (it->price == 0) { /* a unique item */
            market__key_inventory(k_inv, realm, it->owner);
            market__fx_item_in(wb, k_inv, it->item);
        } else { /* a listing: its units, or none (a unique item's) */
            snprintf(member, sizeof member, "%s.%s", it->item, it->owner);
            market__fx_listing_units_set(wb, &rl, member, it->units);
        }
        market__bulk_add_buf(&b, wb);
    }
    if ((rc = listings_add(&b, &rl, items, w->n_items, ch)) < 0) {
        market__drop(c); /* the transaction is cut short: never EXEC it */
        goto out;
    }
    market__fx_exec(wb);
    market__bulk_add_buf(&b, wb);
    /* EXEC runs the whole world at once: a large one takes Redis a while (about 4 us a
     * listing: one insert into market:{r} and each index), so its answer is given time. */
    struct timeval tv = exec_timeout(c, n_listed);
    if (c->ctx) (void)redisSetTimeout(c->ctx, tv); /* failing, it waits as long as ever */
    rc = market__bulk_finish(&b);
    tv = exec_timeout(c, 0);
    if (c->ctx && redisSetTimeout(c->ctx, tv) != REDIS_OK) market__drop(c);
out:
    if (ch) market__buf_free(&ch->w);
    free(ch);
    free(items);
    market__keylist_free(&keys);
    return rc;
}
