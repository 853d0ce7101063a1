/* market_world.c - seeding worlds (fixtures or generated) and auditing the store.
 *
 * A market_world is a plain in-memory description of players, held items and
 * listings. It is checked as a whole (no player or item twice, every owner a
 * player) before anything is written, and written in one MULTI/EXEC, so a bad
 * world writes nothing; its listings go into the search indexes in the same
 * transaction (market_index.c). market_audit() reads the whole store back to check
 * the invariants: funds conserved, none negative, every item in one place, the
 * indexes holding exactly the market's listings, and the units of stackable
 * goods and flash sales (stacks, listed units, stock, sold). market_reindex()
 * rebuilds a realm's indexes from its market, also while the service runs (stores
 * seeded before the indexes existed or in their former layout, or found off by the audit).
 * market_players_scan() and market_store_info() read the players and the
 * store's counters for tools (market-load) without their knowing the keys.
 */
#include "market/market.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_store.h"

/* The key patterns of a realm's keys that seeding with reset deletes (and its market and
 * its trades): players, inventories, stacks, idempotency records, search indexes, trade
 * indexes, and sales (with their bought hashes). */
static const char *const realm_kinds[] = {"users", "inventory", "stacks", "idem",
                                          "idx",   "trades",    "sale"};

#define ZADD_CHUNK 256     /* score/member pairs per ZADD while seeding */
#define REINDEX_CHUNK 1000 /* listings read and indexed per round trip by market_reindex() */
#define KEYS_CHUNK 1000    /* index keys read per round trip by the audit and market_reindex() */
#define SCAN_COUNT "1000"  /* SCAN's COUNT hint */

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
market_world *market_world_new(void) { return calloc(1, sizeof(market_world)); }

/* Frees w; NULL is a no-op. This function can't fail. */
void market_world_free(market_world *w) {
    if (!w) return;
    free(w->players);
    free(w->items);
    free(w);
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*arr, ncap * elem);
    if (!p) return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Adds a player. name may be NULL (the id is used). Returns MARKET_OK, or
 * ERR_INVALID (bad id, name over MARKET_NAME_MAX bytes, negative funds),
 * ERR_NOMEM. Duplicates are found by market_world_check(). */
int market_world_add_player(market_world *w, const char *id, const char *name, int64_t funds) {
    if (!w || !market_id_valid(id) || funds < 0) return MARKET_ERR_INVALID;
    if (!name) name = id;
    if (strlen(name) > MARKET_NAME_MAX) return MARKET_ERR_INVALID;
    if (grow((void **)&w->players, &w->cap_players, w->n_players + 1, sizeof *w->players) < 0)
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
    if (grow((void **)&w->items, &w->cap_items, w->n_items + 1, sizeof *w->items) < 0)
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
int market_world_add_listing(market_world *w, const char *seller, const char *item,
                             int64_t price) {
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

    for (size_t i = 0; i < w->n_players; i++) ids[i] = w->players[i].id;
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

/* A bulk write: a growing pipeline of commands, its replies checked at the
 * end (not the purchase batches of market_batch.c). */
struct bulk {
    market_conn *c;
    size_t sent;
    int failed;
};

static void bulk_add(struct bulk *b, int argc, const char **argv, const size_t *len) {
    if (b->failed) return;
    if (redisAppendCommandArgv(b->c->ctx, argc, argv, len) != REDIS_OK)
        b->failed = 1;
    else
        b->sent++;
}

/* Reads every pending reply. Returns MARKET_OK, or MARKET_ERR_STORE when a
 * reply was an error or the connection failed (then dropped). */
static int bulk_finish(struct bulk *b) {
    int rc = b->failed ? MARKET_ERR_STORE : MARKET_OK;
    for (size_t i = 0; i < b->sent && b->c->ctx; i++) {
        void *r = NULL;
        if (redisGetReply(b->c->ctx, &r) != REDIS_OK) {
            market__drop(b->c);
            return MARKET_ERR_STORE;
        }
        redisReply *rep = r;
        if (rep->type == REDIS_REPLY_ERROR) rc = market__fail_reply(b->c, "write refused", rep);
        freeReplyObject(rep);
    }
    if (b->failed) market__drop(b->c); /* the output buffer is in an unknown state */
    return rc;
}

/* Collects the keys matching pattern with SCAN into keys (grown as needed).
 * Returns MARKET_OK, ERR_STORE or ERR_NOMEM. */
struct keylist {
    char **keys;
    size_t n, cap;
};

static void keylist_free(struct keylist *k) {
    for (size_t i = 0; i < k->n; i++) free(k->keys[i]);
    free(k->keys);
    k->keys = NULL;
    k->n = k->cap = 0;
}

static int scan_keys(market_conn *c, const char *pattern, struct keylist *out) {
    char cursor[32] = "0";
    do {
        const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT};
        int rc = market__connect(c);
        if (rc < 0) return rc;
        redisReply *r = market__command(c, 6, argv, NULL);
        if (!r) return MARKET_ERR_STORE;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY ||
            r->element[0]->len >= sizeof cursor) {
            freeReplyObject(r);
            return MARKET_ERR_STORE;
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        redisReply *ks = r->element[1];
        if (grow((void **)&out->keys, &out->cap, out->n + ks->elements, sizeof *out->keys) < 0) {
            freeReplyObject(r);
            return MARKET_ERR_NOMEM;
        }
        for (size_t i = 0; i < ks->elements; i++) {
            if (ks->element[i]->type != REDIS_REPLY_STRING) continue;
            char *k = strdup(ks->element[i]->str);
            if (!k) {
                freeReplyObject(r);
                return MARKET_ERR_NOMEM;
            }
            out->keys[out->n++] = k;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return MARKET_OK;
}

static int collect_realm_keys(market_conn *c, const char *realm, struct keylist *keys) {
    for (size_t i = 0; i < sizeof realm_kinds / sizeof *realm_kinds; i++) {
        char pattern[MARKET__KEY_MAX];
        market__key(pattern, sizeof pattern, realm_kinds[i], realm, "*");
        int rc = scan_keys(c, pattern, keys);
        if (rc < 0) return rc;
    }
    return MARKET_OK;
}

static void bulk_del_keys(struct bulk *b, const market__realm *r, const struct keylist *keys) {
    for (size_t i = 0; i < keys->n; i++) {
        const char *argv[2] = {"UNLINK", keys->keys[i]};
        bulk_add(b, 2, argv, NULL);
    }
    const char *argv[4] = {"UNLINK", r->market, r->units, r->trades};
    bulk_add(b, 4, argv, NULL);
}

static int cmp_item_owner(const void *a, const void *b) {
    const struct witem *x = a, *y = b;
    return strcmp(x->owner, y->owner);
}

/* Scratch for writing a world's listings a ZADD at a time. */
struct listing_chunk {
    const char *argv[2 + 2 * ZADD_CHUNK];
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
static int listings_add(struct bulk *b, const market__realm *rl, const struct witem *items,
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
    const char **argv = ch->argv;
    for (int k = 0; k <= MARKET__IDX_KINDS; k++) { /* the indexes, then market:{r} */
        qsort(l, listed, sizeof *l, order[k]);
        for (size_t i = 0, c; i < listed; i += c) {
            for (c = 0; c < ZADD_CHUNK && i + c < listed && same_zset(k, l[i], l[i + c]); c++) {
                const struct witem *it = l[i + c];
                market__idx_entry *e = &ch->e[c];
                market__idx_entry_init(e, rl->id, it->item, it->owner, it->price);
                argv[2 + 2 * c] = e->score;
                if (k < MARKET__IDX_KINDS) {
                    argv[3 + 2 * c] = e->member[k];
                } else {
                    snprintf(ch->member[c], sizeof ch->member[c], "%s.%s", it->item, it->owner);
                    argv[3 + 2 * c] = ch->member[c];
                }
            }
            argv[0] = "ZADD";
            argv[1] = k < MARKET__IDX_KINDS ? ch->e[0].key[k] : rl->market;
            bulk_add(b, (int)(2 + 2 * c), argv, NULL);
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
    struct keylist keys = {0};
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
    if (!(ch = malloc(sizeof *ch))) {
        rc = MARKET_ERR_NOMEM;
        goto out;
    }
    size_t n_listed = 0;
    for (size_t i = 0; i < w->n_items; i++)
        n_listed += items[i].price != 0;

    struct bulk b = {c, 0, 0};
    const char *multi[1] = {"MULTI"}, *exec[1] = {"EXEC"};
    bulk_add(&b, 1, multi, NULL);
    if (reset) bulk_del_keys(&b, &rl, &keys);
    char k_user[MARKET__KEY_MAX], k_inv[MARKET__KEY_MAX], k_stacks[MARKET__KEY_MAX], funds[24];
    char units[24], member[MARKET__MEMBER_MAX];
    for (size_t i = 0; i < w->n_players; i++) {
        const struct wplayer *p = &w->players[i];
        market__key(k_user, sizeof k_user, "users", realm, p->id);
        market__key(k_inv, sizeof k_inv, "inventory", realm, p->id);
        snprintf(funds, sizeof funds, "%lld", (long long)p->funds);
        market__key(k_stacks, sizeof k_stacks, "stacks", realm, p->id);
        const char *del[4] = {"DEL", k_user, k_inv, k_stacks};
        const char *hset[6] = {"HSET", k_user, "name", p->name, "funds", funds};
        bulk_add(&b, 4, del, NULL);
        bulk_add(&b, 6, hset, NULL);
    }
    for (size_t i = 0; i < w->n_items; i++) {
        const struct witem *it = &items[i];
        snprintf(units, sizeof units, "%lld", (long long)it->units);
        if (it->price == 0 && it->units) { /* a stack */
            market__key(k_stacks, sizeof k_stacks, "stacks", realm, it->owner);
            const char *hset[4] = {"HSET", k_stacks, it->item, units};
            bulk_add(&b, 4, hset, NULL);
        } else if (it->price == 0) { /* a unique item */
            market__key(k_inv, sizeof k_inv, "inventory", realm, it->owner);
            const char *sadd[3] = {"SADD", k_inv, it->item};
            bulk_add(&b, 3, sadd, NULL);
        } else { /* a listing: its units, or none (a unique item's) */
            snprintf(member, sizeof member, "%s.%s", it->item, it->owner);
            const char *hset[4] = {"HSET", rl.units, member, units};
            const char *hdel[3] = {"HDEL", rl.units, member};
            if (it->units)
                bulk_add(&b, 4, hset, NULL);
            else
                bulk_add(&b, 3, hdel, NULL);
        }
    }
    if ((rc = listings_add(&b, &rl, items, w->n_items, ch)) < 0) {
        market__drop(c); /* the transaction is cut short: never EXEC it */
        goto out;
    }
    bulk_add(&b, 1, exec, NULL);
    /* EXEC runs the whole world at once: a large one takes Redis a while (about 4 us a
     * listing: one insert into market:{r} and each index), so its answer is given time. */
    struct timeval tv = exec_timeout(c, n_listed);
    if (c->ctx) (void)redisSetTimeout(c->ctx, tv); /* failing, it waits as long as ever */
    rc = bulk_finish(&b);
    tv = exec_timeout(c, 0);
    if (c->ctx && redisSetTimeout(c->ctx, tv) != REDIS_OK) market__drop(c);
out:
    free(ch);
    free(items);
    keylist_free(&keys);
    return rc;
}

/* ---- auditing ---- */

struct itemlist {
    char (*ids)[MARKET_ID_MAX + 1];
    size_t n, cap;
};

static int itemlist_add(struct itemlist *l, const char *s, size_t len) {
    if (len > MARKET_ID_MAX) len = MARKET_ID_MAX;
    if (grow((void **)&l->ids, &l->cap, l->n + 1, sizeof *l->ids) < 0) return MARKET_ERR_NOMEM;
    memcpy(l->ids[l->n], s, len);
    l->ids[l->n++][len] = '\0';
    return MARKET_OK;
}

/* Runs one command per key (argv[0] cmd, argv[1] key, optional argv[2]) in
 * one pipeline and hands each reply to fn. */
static int per_key(market_conn *c, const struct keylist *keys, const char *cmd, const char *arg,
                   int (*fn)(redisReply *r, void *ud), void *ud) {
    int rc = market__connect(c);
    if (rc < 0) return rc;
    struct bulk b = {c, 0, 0};
    for (size_t i = 0; i < keys->n; i++) {
        const char *argv[3] = {cmd, keys->keys[i], arg};
        bulk_add(&b, arg ? 3 : 2, argv, NULL);
    }
    if (b.failed) return bulk_finish(&b);
    for (size_t i = 0; i < b.sent; i++) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK) {
            market__drop(c);
            return MARKET_ERR_STORE;
        }
        int frc = rc == MARKET_OK ? fn(r, ud) : rc;
        freeReplyObject(r);
        if (frc < 0) rc = frc; /* keep reading: the replies must be drained */
    }
    return rc;
}

static int cmp_reply_str(const void *a, const void *b) {
    const redisReply *x = *(const redisReply *const *)a, *y = *(const redisReply *const *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->str, y->str, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static int audit_funds(redisReply *r, void *ud) {
    market_audit_report *a = ud;
    int64_t f;
    if (r->type == REDIS_REPLY_NIL) return MARKET_OK; /* a users: hash without funds */
    if (r->type != REDIS_REPLY_STRING || market__parse_i64(r->str, r->len, &f) < 0)
        return MARKET_ERR_STORE;
    a->players++;
    if (f < 0) a->negative_funds++;
    if (__builtin_add_overflow(a->total_funds, f, &a->total_funds)) return MARKET_ERR_OVERFLOW;
    return MARKET_OK;
}

static int audit_inventory(redisReply *r, void *ud) {
    struct itemlist *l = ud;
    if (r->type != REDIS_REPLY_ARRAY) return MARKET_ERR_STORE;
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_STRING) return MARKET_ERR_STORE;
        int rc = itemlist_add(l, r->element[i]->str, r->element[i]->len);
        if (rc < 0) return rc;
    }
    return MARKET_OK;
}

static int cmp_id(const void *a, const void *b) { return strcmp(a, b); }

static int cmp_str_p(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads a market:{r} entry (member e "<item>.<seller>", score sc) into *l. Returns 0, or
 * -1 when it is not a listing (no dot, a bad id, a price that is not whole or out of
 * range). */
static int listing_read(const redisReply *e, const redisReply *sc, market_listing *l) {
    if (e->type != REDIS_REPLY_STRING || sc->type != REDIS_REPLY_STRING) return -1;
    const char *dot = memchr(e->str, '.', e->len);
    size_t ilen = dot ? (size_t)(dot - e->str) : 0, slen = dot ? e->len - ilen - 1 : 0;
    if (ilen == 0 || ilen > MARKET_ID_MAX || slen == 0 || slen > MARKET_ID_MAX) return -1;
    memcpy(l->item, e->str, ilen);
    l->item[ilen] = '\0';
    memcpy(l->seller, dot + 1, slen);
    l->seller[slen] = '\0';
    if (strlen(l->item) != ilen || strlen(l->seller) != slen || !market_id_valid(l->item) ||
        !market_id_valid(l->seller))
        return -1;
    return market__parse_price(sc->str, sc->len, &l->price);
}

/* Strings kept end to end in one buffer: the index entries the audit compares, the market
 * members market_reindex() looks up. */
struct strs {
    char *buf;
    size_t len, cap;
    size_t *at; /* where each string starts in buf */
    size_t n, cap_at;
    char **p; /* strs_index()'s pointers */
    size_t cap_p;
};

static int strs_add(struct strs *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds the string fmt makes to s. Returns MARKET_OK or MARKET_ERR_NOMEM. */
static int strs_add(struct strs *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0 || grow((void **)&s->buf, &s->cap, s->len + (size_t)len + 1, 1) < 0 ||
        grow((void **)&s->at, &s->cap_at, s->n + 1, sizeof *s->at) < 0)
        return MARKET_ERR_NOMEM;
    va_start(ap, fmt);
    vsnprintf(s->buf + s->len, (size_t)len + 1, fmt, ap);
    va_end(ap);
    s->at[s->n++] = s->len;
    s->len += (size_t)len + 1;
    return MARKET_OK;
}

/* Points s->p[0..s->n) at s's strings, valid until the next strs_add(). Returns
 * MARKET_OK or MARKET_ERR_NOMEM. */
static int strs_index(struct strs *s) {
    if (grow((void **)&s->p, &s->cap_p, s->n ? s->n : 1, sizeof *s->p) < 0)
        return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < s->n; i++)
        s->p[i] = s->buf + s->at[i];
    return MARKET_OK;
}

static void strs_free(struct strs *s) {
    free(s->buf);
    free(s->at);
    free(s->p);
    memset(s, 0, sizeof *s);
}

/* Writes the keys of realm's search indexes in their former layout (one big zset each,
 * every score 0) into out: idx:{r}:all, idx:{r}:item and idx:{r}:seller. */
static void legacy_keys(const char *realm, char out[3][MARKET__KEY_MAX]) {
    static const char *const names[3] = {"all", "item", "seller"};
    for (size_t i = 0; i < 3; i++)
        market__key(out[i], MARKET__KEY_MAX, "idx", realm, names[i]);
}

/* Returns the id in key when it is a key of realm's indexes, "idx:{<realm>}:item:<id>" or
 * "idx:{<realm>}:seller:<id>" (borrowed from key), with its kind in *kind; else NULL. */
static const char *idx_key_id(const char *realm, const char *key, int *kind) {
    for (*kind = 0; *kind < MARKET__IDX_KINDS; (*kind)++) {
        char prefix[MARKET__IDX_KEY_MAX];
        market__idx_key(prefix, *kind, realm, "");
        size_t len = strlen(prefix);
        if (strncmp(key, prefix, len) == 0) return key + len;
    }
    return NULL;
}

/* Collects the keys of realm's search indexes (idx:{r}:item:* and idx:{r}:seller:*, in one
 * SCAN of idx:{r}:*) into keys. Returns MARKET_OK, ERR_STORE or ERR_NOMEM. */
static int idx_keys_scan(market_conn *c, const char *realm, struct keylist *keys) {
    char pattern[MARKET__KEY_MAX];
    int kind;
    market__key(pattern, sizeof pattern, "idx", realm, "*");
    int rc = scan_keys(c, pattern, keys);
    size_t kept = 0; /* not the former layout's keys (legacy_keys()), nor others */
    for (size_t i = 0; rc == MARKET_OK && i < keys->n; i++) {
        if (idx_key_id(realm, keys->keys[i], &kind))
            keys->keys[kept++] = keys->keys[i];
        else
            free(keys->keys[i]);
    }
    if (rc == MARKET_OK) keys->n = kept;
    return rc;
}

/* A pipeline that reads index keys whole: [WATCH market:{r} <keys>,] ZRANGE <key> 0 -1
 * WITHSCORES for each key. */
struct idx_read {
    const char *watch[2 + KEYS_CHUNK];
    const char *zrange[KEYS_CHUNK][5];
    const char **argv[1 + KEYS_CHUNK];
    int argc[1 + KEYS_CHUNK];
    redisReply *rep[1 + KEYS_CHUNK];
    size_t n; /* the replies rep holds */
};

/* Reads keys[0..n) (n <= KEYS_CHUNK) into r->rep, in one pipeline: with watch (the name of
 * market:{r}; NULL: none) after a WATCH of it and of the keys, whose reply is rep[0].
 * Returns MARKET_OK, or ERR_STORE, ERR_NOMEM, MARKET__REDIRECTED (market__pipeline_argv())
 * with nothing in rep. */
static int idx_read(market_conn *c, struct idx_read *r, const char *watch, char *const *keys,
                    size_t n) {
    size_t nc = 0;
    if (watch) {
        r->watch[0] = "WATCH";
        r->watch[1] = watch;
        for (size_t i = 0; i < n; i++)
            r->watch[2 + i] = keys[i];
        r->argv[nc] = r->watch;
        r->argc[nc++] = (int)(2 + n);
    }
    for (size_t i = 0; i < n; i++) {
        const char **z = r->zrange[i];
        z[0] = "ZRANGE", z[1] = keys[i], z[2] = "0", z[3] = "-1", z[4] = "WITHSCORES";
        r->argv[nc] = z;
        r->argc[nc++] = 5;
    }
    int rc = market__pipeline_argv(c, nc, r->argc, (const char **const *)r->argv, r->rep);
    r->n = rc == MARKET_OK ? nc : 0;
    return rc;
}

/* Adds to *mismatch how far realm's search indexes are from its market, z (ZRANGE
 * market:{r} 0 -1 WITHSCORES): the entries of listings that they lack or hold at another
 * price (a listing that cannot be read lacks both of its), entries no listing has (also
 * members and scores that are not a listing's, keys that are no zset), and each key of
 * the former layout still there (legacy_keys()). Both sides, written
 * "<kind>|<id>|<member>|<price>", are sorted and walked once; the index keys are read
 * KEYS_CHUNK a round trip. Returns MARKET_OK, ERR_STORE or ERR_NOMEM. */
static int audit_index(market_conn *c, const char *realm, const redisReply *z, size_t *mismatch) {
    struct strs exp = {0}, act = {0};
    struct keylist keys = {0};
    struct idx_read *r = malloc(sizeof *r);
    char legacy[3][MARKET__KEY_MAX];
    legacy_keys(realm, legacy);
    market__cmd exists;
    market__cmd_set(&exists, 4, "EXISTS", legacy[0], legacy[1], legacy[2]);
    int rc = r ? market__pipeline(c, &exists, 1, r->rep) : MARKET_ERR_NOMEM;
    if (rc < 0) goto out;
    if (r->rep[0]->type == REDIS_REPLY_INTEGER)
        *mismatch += (size_t)r->rep[0]->integer;
    else
        rc = market__fail_reply(c, "looking for the former search indexes", r->rep[0]);
    market__replies_free(r->rep, 1);
    for (size_t i = 0; rc == MARKET_OK && i < z->elements / 2; i++) {
        market_listing l;
        market__idx_entry e;
        if (listing_read(z->element[2 * i], z->element[2 * i + 1], &l) < 0) {
            *mismatch += MARKET__IDX_KINDS;
            continue;
        }
        const char *id[MARKET__IDX_KINDS] = {[MARKET__IDX_ITEM] = l.item,
                                             [MARKET__IDX_SELLER] = l.seller};
        market__idx_entry_init(&e, realm, l.item, l.seller, l.price);
        for (int k = 0; k < MARKET__IDX_KINDS && rc == MARKET_OK; k++)
            rc = strs_add(&exp, "%d|%s|%s|%s", k, id[k], e.member[k], e.score);
    }
    if (rc == MARKET_OK) rc = idx_keys_scan(c, realm, &keys);
    for (size_t at = 0; rc == MARKET_OK && at < keys.n; at += KEYS_CHUNK) {
        size_t n = keys.n - at < KEYS_CHUNK ? keys.n - at : KEYS_CHUNK;
        if ((rc = idx_read(c, r, NULL, keys.keys + at, n)) < 0) break;
        for (size_t i = 0; i < n && rc == MARKET_OK; i++) {
            const redisReply *x = r->rep[i];
            int kind;
            const char *id = idx_key_id(realm, keys.keys[at + i], &kind);
            if (x->type != REDIS_REPLY_ARRAY || x->elements % 2) { /* not a zset: no index */
                (*mismatch)++;
                continue;
            }
            for (size_t j = 0; j < x->elements && rc == MARKET_OK; j += 2) {
                const redisReply *m = x->element[j], *sc = x->element[j + 1];
                int64_t price;
                if (m->type != REDIS_REPLY_STRING || strlen(m->str) != m->len ||
                    sc->type != REDIS_REPLY_STRING ||
                    market__parse_price(sc->str, sc->len, &price) < 0)
                    (*mismatch)++;
                else
                    rc = strs_add(&act, "%d|%s|%s|%lld", kind, id, m->str, (long long)price);
            }
        }
        market__replies_free(r->rep, r->n);
    }
    if (rc == MARKET_OK && (rc = strs_index(&exp)) == MARKET_OK) rc = strs_index(&act);
    if (rc < 0) goto out;
    qsort(exp.p, exp.n, sizeof *exp.p, cmp_str_p);
    qsort(act.p, act.n, sizeof *act.p, cmp_str_p);
    size_t i = 0, j = 0;
    while (i < exp.n || j < act.n) {
        int d = i == exp.n ? 1 : j == act.n ? -1 : strcmp(exp.p[i], act.p[j]);
        if (d <= 0) i++;
        if (d >= 0) j++;
        if (d != 0) (*mismatch)++;
    }
out:
    strs_free(&exp);
    strs_free(&act);
    keylist_free(&keys);
    free(r);
    return rc;
}

/* What audit_units() gathers: the items sales sell (sorted, for bsearch). */
struct units {
    market_audit_report *a;
    struct itemlist sale_items;
};

static int audit_sale(redisReply *r, void *ud) {
    struct units *u = ud;
    market_audit_report *a = u->a;
    int64_t v[3];
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4) return MARKET_ERR_STORE;
    const redisReply *item = r->element[0];
    if (item->type == REDIS_REPLY_NIL) return MARKET_OK; /* went away meanwhile */
    for (size_t i = 0; i < 3; i++) {
        const redisReply *e = r->element[1 + i];
        if (item->type != REDIS_REPLY_STRING || e->type != REDIS_REPLY_STRING ||
            market__parse_i64(e->str, e->len, &v[i]) < 0)
            return MARKET_ERR_STORE;
    }
    int64_t initial = v[0], stock = v[1], sold = v[2];
    a->sales++;
    if (sold > initial || stock < 0) a->sales_oversold++;
    if (stock + sold != initial) a->sales_unbalanced++;
    if (__builtin_add_overflow(a->units_in_sales, stock, &a->units_in_sales) ||
        __builtin_add_overflow(a->units_sold_by_sales, sold, &a->units_sold_by_sales))
        return MARKET_ERR_OVERFLOW;
    return itemlist_add(&u->sale_items, item->str, item->len);
}

static int audit_stacks(redisReply *r, void *ud) {
    struct units *u = ud;
    market_audit_report *a = u->a;
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) return MARKET_ERR_STORE;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *e = r->element[i + 1];
        int64_t n;
        if (k->type != REDIS_REPLY_STRING || k->len > MARKET_ID_MAX ||
            e->type != REDIS_REPLY_STRING || market__parse_i64(e->str, e->len, &n) < 0)
            return MARKET_ERR_STORE;
        if (__builtin_add_overflow(a->units_in_stacks, n, &a->units_in_stacks))
            return MARKET_ERR_OVERFLOW;
        char item[MARKET_ID_MAX + 1];
        memcpy(item, k->str, k->len);
        item[k->len] = '\0';
        if (u->sale_items.n &&
            bsearch(item, u->sale_items.ids, u->sale_items.n, sizeof *u->sale_items.ids, cmp_id) &&
            __builtin_add_overflow(a->sale_units_in_stacks, n, &a->sale_units_in_stacks))
            return MARKET_ERR_OVERFLOW;
    }
    return MARKET_OK;
}

/* Adds the units of realm's sales and stacks to *a (see market_audit_report).
 * Returns MARKET_OK, ERR_STORE, ERR_OVERFLOW or ERR_NOMEM. */
static int audit_units(market_conn *c, const char *realm, market_audit_report *a) {
    struct keylist sales = {0}, stacks = {0};
    struct units u = {a, {0}};
    char pattern[MARKET__KEY_MAX];
    market__key(pattern, sizeof pattern, "sale", realm, "*");
    int rc = scan_keys(c, pattern, &sales);
    size_t kept = 0; /* the sales, not their bought hashes (ids hold no ':') */
    for (size_t i = 0; rc == MARKET_OK && i < sales.n; i++) {
        size_t len = strlen(sales.keys[i]);
        if (len > 7 && strcmp(sales.keys[i] + len - 7, ":bought") == 0)
            free(sales.keys[i]);
        else
            sales.keys[kept++] = sales.keys[i];
    }
    if (rc == MARKET_OK) sales.n = kept;
    if (rc == MARKET_OK && (rc = market__connect(c)) == MARKET_OK) {
        struct bulk b = {c, 0, 0};
        for (size_t i = 0; i < sales.n; i++) {
            const char *argv[6] = {"HMGET", sales.keys[i], "item", "initial", "stock", "sold"};
            bulk_add(&b, 6, argv, NULL);
        }
        if (b.failed) {
            rc = bulk_finish(&b);
        } else {
            for (size_t i = 0; i < b.sent; i++) {
                void *r = NULL;
                if (redisGetReply(c->ctx, &r) != REDIS_OK) {
                    market__drop(c);
                    rc = MARKET_ERR_STORE;
                    break;
                }
                int frc = rc == MARKET_OK ? audit_sale(r, &u) : rc;
                freeReplyObject(r);
                if (frc < 0) rc = frc; /* keep reading: the replies must be drained */
            }
        }
    }
    if (u.sale_items.n) qsort(u.sale_items.ids, u.sale_items.n, sizeof *u.sale_items.ids, cmp_id);
    market__key(pattern, sizeof pattern, "stacks", realm, "*");
    if (rc == MARKET_OK) rc = scan_keys(c, pattern, &stacks);
    if (rc == MARKET_OK) rc = per_key(c, &stacks, "HGETALL", NULL, audit_stacks, &u);
    keylist_free(&sales);
    keylist_free(&stacks);
    free(u.sale_items.ids);
    return rc;
}

/* Reads the whole of realm (SCAN, no lock) and fills *out: players, total
 * and negative funds, items held, items listed, items found in more
 * than one place, search index entries that disagree with the market
 * (index_mismatch), and the units of stackable goods and flash sales (stacks,
 * listed units, stock left, sold, and sales that sold more than they had).
 * Meant for tests, load tests and operators on a quiet
 * market. Returns MARKET_OK, ERR_INVALID, ERR_STORE, ERR_OVERFLOW (funds
 * sum) or ERR_NOMEM. */
int market_audit(market_conn *c, const char *realm, market_audit_report *out) {
    if (!c || !out || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    memset(out, 0, sizeof *out);
    struct keylist users = {0}, invs = {0};
    struct itemlist items = {0};
    redisReply *z = NULL, *u = NULL;
    redisReply **goods = NULL; /* the listings of units (members of units:), sorted */
    char pattern[MARKET__KEY_MAX];
    market__realm rl;
    market__realm_init(&rl, realm);
    int rc = market__route(c, realm);
    if (rc < 0) goto out;
    market__key(pattern, sizeof pattern, "users", realm, "*");
    if ((rc = scan_keys(c, pattern, &users)) < 0) goto out;
    market__key(pattern, sizeof pattern, "inventory", realm, "*");
    if ((rc = scan_keys(c, pattern, &invs)) < 0) goto out;
    if ((rc = per_key(c, &users, "HGET", "funds", audit_funds, out)) < 0) goto out;
    if ((rc = per_key(c, &invs, "SMEMBERS", NULL, audit_inventory, &items)) < 0) goto out;
    out->items_held = items.n;
    const char *hgetall[2] = {"HGETALL", rl.units};
    if (!(u = market__command(c, 2, hgetall, NULL)) || u->type != REDIS_REPLY_ARRAY ||
        u->elements % 2 || !(goods = malloc((u->elements / 2 + 1) * sizeof *goods))) {
        rc = u && u->type == REDIS_REPLY_ARRAY ? MARKET_ERR_NOMEM : MARKET_ERR_STORE;
        goto out;
    }
    size_t n_goods = 0;
    for (size_t i = 0; i + 1 < u->elements; i += 2) {
        int64_t v = market__reply_units(u->element[i + 1]);
        if (u->element[i]->type != REDIS_REPLY_STRING || v <= 0 ||
            out->units_listed > INT64_MAX - v) {
            rc = MARKET_ERR_STORE;
            goto out;
        }
        out->units_listed += v;
        goods[n_goods++] = u->element[i];
    }
    qsort(goods, n_goods, sizeof *goods, cmp_reply_str);
    const char *argv[5] = {"ZRANGE", rl.market, "0", "-1", "WITHSCORES"};
    if (!(z = market__command(c, 5, argv, NULL))) {
        rc = MARKET_ERR_STORE;
        goto out;
    }
    if (z->type != REDIS_REPLY_ARRAY || z->elements % 2) {
        rc = MARKET_ERR_STORE;
        goto out;
    }
    for (size_t i = 0; i < z->elements; i += 2) {
        const redisReply *e = z->element[i];
        const char *dot = e->type == REDIS_REPLY_STRING ? memchr(e->str, '.', e->len) : NULL;
        if (!dot) {
            rc = MARKET_ERR_STORE;
            goto out;
        }
        if (bsearch(&e, goods, n_goods, sizeof *goods, cmp_reply_str)) continue; /* units */
        if ((rc = itemlist_add(&items, e->str, (size_t)(dot - e->str))) < 0) goto out;
    }
    out->items_listed = z->elements / 2;
    if (items.n) qsort(items.ids, items.n, sizeof *items.ids, cmp_id);
    for (size_t i = 1; i < items.n; i++)
        if (strcmp(items.ids[i - 1], items.ids[i]) == 0 &&
            (i < 2 || strcmp(items.ids[i - 2], items.ids[i]) != 0))
            out->items_misplaced++;
    if ((rc = audit_index(c, realm, z, &out->index_mismatch)) == MARKET_OK)
        rc = audit_units(c, realm, out);
out:
    if (z) freeReplyObject(z);
    if (u) freeReplyObject(u);
    free(goods);
    keylist_free(&users);
    keylist_free(&invs);
    free(items.ids);
    return rc;
}

/* ---- rebuilding the search indexes ---- */

#define REINDEX_TRIES 10 /* the most times a round of market_reindex() is run */

/* One command's argv in a pipeline that market_players_scan() or market_reindex() builds. */
struct argv6 {
    const char *v[6];
};

/* The arrays market__pipeline_argv() takes, for up to cap commands. */
struct pipe {
    int *argc;
    const char ***argv;
    struct argv6 *cmd;
    redisReply **rep;
    size_t cap;
};

static void pipe_free(struct pipe *p) {
    free(p->argc);
    free(p->argv);
    free(p->cmd);
    free(p->rep);
}

static int pipe_reserve(struct pipe *p, size_t n) {
    if (n <= p->cap) return MARKET_OK;
    size_t ncap = p->cap ? p->cap * 2 : 64;
    while (ncap < n)
        ncap *= 2;
    int *argc = realloc(p->argc, ncap * sizeof *argc);
    if (argc) p->argc = argc;
    const char ***argv = realloc(p->argv, ncap * sizeof *argv);
    if (argv) p->argv = argv;
    struct argv6 *cmd = realloc(p->cmd, ncap * sizeof *cmd);
    if (cmd) p->cmd = cmd;
    redisReply **rep = realloc(p->rep, ncap * sizeof *rep);
    if (rep) p->rep = rep;
    if (!argc || !argv || !cmd || !rep) return MARKET_ERR_NOMEM;
    p->cap = ncap;
    return MARKET_OK;
}

/* Puts the command cmd (argc arguments) at place *nc of p, which has room, and counts it. */
static void pipe_put(struct pipe *p, size_t *nc, int argc, struct argv6 cmd) {
    p->cmd[*nc] = cmd;
    p->argv[*nc] = p->cmd[*nc].v;
    p->argc[(*nc)++] = argc;
}

/* The scratch of market_reindex(). */
struct reindex {
    char lo[32];          /* step 2: the lowest price left ("-inf", "<p>", "(<p>"); "": none */
    market__idx_entry *e; /* step 2: the entries of the listings a round read */
    size_t cap_e;
    struct pipe look;   /* step 3: a round's ZSCOREs of market:{r} */
    struct pipe write;  /* a round's MULTI ... EXEC */
    struct idx_read rd; /* step 3: a round's WATCH and reads of index keys */
    struct strs mm;     /* step 3: the market member of each index member read */
};

/* Judges round tries (1, 2, ...) of market_reindex(), which returned *rc: 1 when it is to
 * run again (its EXEC was aborted, or its slot moved, and it ran fewer than REINDEX_TRIES
 * times), else 0 with *rc the round's result: ERR_CONFLICT after the last abort, ERR_STORE
 * after the last move. */
static int reindex_again(market_conn *c, int *rc, int tries) {
    if (*rc != MARKET__TXN_ABORTED && *rc != MARKET__REDIRECTED) return 0;
    if (tries < REINDEX_TRIES) {
        if (*rc == MARKET__REDIRECTED) market__redirect_pause(c, tries);
        return 1;
    }
    *rc = *rc == MARKET__TXN_ABORTED ? MARKET_ERR_CONFLICT : MARKET_ERR_STORE;
    return 0;
}

/* Sends x->write's n commands (MULTI ... EXEC) and judges the EXEC. Returns MARKET_OK,
 * MARKET__TXN_ABORTED (a watched key changed: nothing written), MARKET__REDIRECTED, or
 * ERR_STORE (Redis failed or refused a write; c's errstr says which), ERR_NOMEM. */
static int reindex_commit(market_conn *c, struct reindex *x, size_t n) {
    redisReply **rep = x->write.rep;
    int rc = market__pipeline_argv(c, n, x->write.argc, x->write.argv, rep);
    if (rc < 0) return rc;
    const redisReply *exec = rep[n - 1], *err = market__reply_error(rep, n);
    if (!err && exec->type == REDIS_REPLY_ARRAY)
        err = market__reply_error(exec->element, exec->elements);
    if (exec->type == REDIS_REPLY_NIL)
        rc = MARKET__TXN_ABORTED;
    else if (err || exec->type != REDIS_REPLY_ARRAY)
        rc = market__fail_reply(c, "rebuilding the search indexes", err ? err : exec);
    market__replies_free(rep, n);
    return rc;
}

/* Reads the listings of z, a ZRANGE WITHSCORES of market:{r}, into x->e[0..*n): their
 * entries in the indexes. Returns MARKET_OK, or ERR_STORE (z is no such reply, or holds an
 * entry that is not a listing; c's errstr says which), ERR_NOMEM. */
static int fill_read(market_conn *c, const market__realm *rl, struct reindex *x,
                     const redisReply *z, size_t *n) {
    if (z->type != REDIS_REPLY_ARRAY || z->elements % 2)
        return market__fail_reply(c, "rebuilding the search indexes", z);
    *n = z->elements / 2;
    if (grow((void **)&x->e, &x->cap_e, *n ? *n : 1, sizeof *x->e) < 0) return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < *n; i++) {
        const redisReply *m = z->element[2 * i];
        market_listing l;
        if (listing_read(m, z->element[2 * i + 1], &l) < 0)
            return market__fail(c, "%s holds an entry that is not a listing: %.*s", rl->market,
                                (int)(m->len < 80 ? m->len : 80), m->str ? m->str : "");
        market__idx_entry_init(&x->e[i], rl->id, l.item, l.seller, l.price);
    }
    return MARKET_OK;
}

/* A round of step 2 of market_reindex(): under a WATCH of market:{r}, reads its listings
 * priced x->lo and up, REINDEX_CHUNK of them but whole prices (all of the last price read,
 * or none of it), and writes their entries in both indexes in one MULTI/EXEC; then moves
 * x->lo past them ("" when none are left). Stores how many it indexed in *n. Returns
 * MARKET_OK, MARKET__TXN_ABORTED (x->lo unchanged), MARKET__REDIRECTED, or ERR_STORE (as
 * fill_read()), ERR_NOMEM. */
static int fill_round(market_conn *c, const market__realm *rl, struct reindex *x, size_t *n) {
    char count[24], next[sizeof x->lo] = "", price[24];
    market__cmd rd[2];
    redisReply *rep[2] = {NULL, NULL};
    snprintf(count, sizeof count, "%d", REINDEX_CHUNK);
    market__cmd_set(&rd[0], 2, "WATCH", rl->market);
    market__cmd_set(&rd[1], 9, "ZRANGE", rl->market, x->lo, "+inf", "BYSCORE", "LIMIT", "0",
                    count, "WITHSCORES");
    int rc = market__pipeline(c, rd, 2, rep);
    if (rc < 0) return rc;
    const redisReply *err = market__reply_error(rep, 2);
    rc = err ? market__fail_reply(c, "rebuilding the search indexes", err)
             : fill_read(c, rl, x, rep[1], n);
    market__replies_free(rep, 2);
    if (rc < 0) return rc;
    if (*n == 0) { /* nothing left */
        c->unwatch = 1;
        x->lo[0] = '\0';
        return MARKET_OK;
    }
    if (*n == REINDEX_CHUNK) { /* more may follow: end at a whole price */
        snprintf(price, sizeof price, "%s", x->e[*n - 1].score);
        size_t keep = *n - 1;
        while (keep > 0 && strcmp(x->e[keep - 1].score, price) == 0)
            keep--;
        if (keep) { /* the next round starts at the last price read */
            snprintf(next, sizeof next, "%s", price);
            *n = keep;
        } else { /* all were of one price: all of that price, and the next after it */
            snprintf(next, sizeof next, "(%s", price);
            market__cmd_set(&rd[1], 6, "ZRANGE", rl->market, price, price, "BYSCORE",
                            "WITHSCORES");
            if ((rc = market__pipeline(c, &rd[1], 1, rep)) < 0) return rc;
            rc = rep[0]->type == REDIS_REPLY_ERROR
                     ? market__fail_reply(c, "rebuilding the search indexes", rep[0])
                     : fill_read(c, rl, x, rep[0], n);
            market__replies_free(rep, 1);
            if (rc < 0) return rc;
        }
    }
    size_t nc = 0;
    if ((rc = pipe_reserve(&x->write, 2 * *n + 2)) < 0) return rc;
    pipe_put(&x->write, &nc, 1, (struct argv6){{"MULTI"}});
    for (size_t i = 0; i < *n; i++) {
        const market__idx_entry *e = &x->e[i];
        for (int k = 0; k < MARKET__IDX_KINDS; k++)
            pipe_put(&x->write, &nc, 4,
                     (struct argv6){{"ZADD", e->key[k], e->score, e->member[k]}});
    }
    pipe_put(&x->write, &nc, 1, (struct argv6){{"EXEC"}});
    if ((rc = reindex_commit(c, x, nc)) == MARKET_OK) snprintf(x->lo, sizeof x->lo, "%s", next);
    return rc;
}

/* A round of step 3 of market_reindex() over the index keys keys[0..n) (n <= KEYS_CHUNK):
 * under a WATCH of market:{r} and of the keys, reads their members and scores, then the
 * price in market:{r} of each member's listing, and in one MULTI/EXEC removes the members
 * whose listing is gone (or is no listing) and gives the others their listing's price
 * where they have another. Returns MARKET_OK, MARKET__TXN_ABORTED, MARKET__REDIRECTED, or
 * ERR_STORE (Redis failed, or a key is no zset; c's errstr says which), ERR_NOMEM. */
static int sweep_round(market_conn *c, const market__realm *rl, struct reindex *x,
                       char *const *keys, size_t n) {
    size_t nl = 0, nw = 0;
    int rc = idx_read(c, &x->rd, rl->market, keys, n);
    if (rc < 0) return rc;
    redisReply **z = x->rd.rep + 1; /* z[i]: the members and scores of keys[i] */
    const redisReply *bad = market__reply_error(x->rd.rep, x->rd.n);
    x->mm.len = x->mm.n = 0;
    for (size_t i = 0; i < n && !bad && rc == MARKET_OK; i++) {
        int kind;
        const char *id = idx_key_id(rl->id, keys[i], &kind);
        if (z[i]->type != REDIS_REPLY_ARRAY || z[i]->elements % 2) bad = z[i];
        for (size_t j = 0; !bad && j < z[i]->elements && rc == MARKET_OK; j += 2) {
            const redisReply *m = z[i]->element[j];
            if (m->type != REDIS_REPLY_STRING)
                bad = m;
            else if (kind == MARKET__IDX_ITEM)
                rc = strs_add(&x->mm, "%s.%s", id, m->str);
            else
                rc = strs_add(&x->mm, "%s.%s", m->str, id);
        }
    }
    if (bad) rc = market__fail_reply(c, "reading a search index", bad);
    if (rc == MARKET_OK) rc = strs_index(&x->mm);
    if (rc == MARKET_OK) rc = pipe_reserve(&x->look, x->mm.n);
    if (rc == MARKET_OK && x->mm.n) {
        for (size_t g = 0; g < x->mm.n; g++)
            pipe_put(&x->look, &nl, 3, (struct argv6){{"ZSCORE", rl->market, x->mm.p[g]}});
        if ((rc = market__pipeline_argv(c, nl, x->look.argc, x->look.argv, x->look.rep)) < 0)
            nl = 0;
        else if ((bad = market__reply_error(x->look.rep, nl)))
            rc = market__fail_reply(c, "reading the market", bad);
    }
    if (rc == MARKET_OK) rc = pipe_reserve(&x->write, x->mm.n + 2);
    if (rc == MARKET_OK) {
        pipe_put(&x->write, &nw, 1, (struct argv6){{"MULTI"}});
        for (size_t i = 0, g = 0; i < n; i++)
            for (size_t j = 0; j < z[i]->elements; j += 2, g++) {
                const redisReply *m = z[i]->element[j], *sc = z[i]->element[j + 1];
                const redisReply *now = x->look.rep[g];
                int64_t want = market__reply_price(now), have;
                if (want <= 0) /* no listing */
                    pipe_put(&x->write, &nw, 3, (struct argv6){{"ZREM", keys[i], m->str}});
                else if (market__parse_price(sc->str, sc->len, &have) < 0 || have != want)
                    pipe_put(&x->write, &nw, 4,
                             (struct argv6){{"ZADD", keys[i], now->str, m->str}});
            }
        pipe_put(&x->write, &nw, 1, (struct argv6){{"EXEC"}});
        if (nw > 2)
            rc = reindex_commit(c, x, nw);
        else
            c->unwatch = 1; /* all were right */
    }
    market__replies_free(x->look.rep, nl);
    market__replies_free(x->rd.rep, x->rd.n);
    return rc;
}

/* Rebuilds realm's search indexes from its market, correctly while the service runs:
 *   1. deletes the indexes of the former layout (idx:{r}:all, idx:{r}:item and
 *      idx:{r}:seller, one big zset each);
 *   2. puts every listing of market:{r} in both of its indexes (idx:{r}:item:<item> and
 *      idx:{r}:seller:<seller>, scored by its price), a round at a time: under a WATCH of
 *      market:{r}, the next REINDEX_CHUNK or so listings in price order (by price, not by
 *      rank: a listing that goes meanwhile would move the ranks of those after it, and one
 *      could be skipped), and their entries written in one MULTI/EXEC;
 *   3. sweeps the index keys (idx:{r}:item:* and idx:{r}:seller:*, by SCAN), KEYS_CHUNK a round:
 *      under a WATCH of market:{r} and the keys, their members and each one's listing read,
 *      and in one MULTI/EXEC the members whose listing is gone removed, the ones at another
 *      price given their listing's.
 * A round whose EXEC is aborted (the market changed meanwhile) runs again, REINDEX_TRIES
 * times at most; a listing added or changed meanwhile gets its entries from the write that
 * changes it, so at the end the indexes hold exactly the market's listings. Meant for a store
 * seeded before the indexes existed or in the former layout, or one whose audit finds
 * index_mismatch. Stores how many listings step 2 indexed in *listings (may be NULL; 0
 * on failure). Returns MARKET_OK, or ERR_INVALID (a bad realm), ERR_CONFLICT (a round was
 * aborted every time: the realm is too busy; what was written is right, but the rebuild is
 * not finished: run it again), ERR_STORE (Redis failed, or the market holds an entry that is
 * not a listing, or a key of the indexes is no zset; c's errstr says which; what was written
 * before stays), ERR_NOMEM. */
int market_reindex(market_conn *c, const char *realm, size_t *listings) {
    if (listings) *listings = 0;
    if (!c || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    market__realm rl;
    market__realm_init(&rl, realm);
    struct reindex *x = calloc(1, sizeof *x);
    if (!x) return MARKET_ERR_NOMEM;
    struct keylist keys = {0};
    size_t count = 0, n = 0;
    char legacy[3][MARKET__KEY_MAX];
    legacy_keys(realm, legacy);
    market__cmd del;
    redisReply *rep[1] = {NULL};
    market__cmd_set(&del, 4, "UNLINK", legacy[0], legacy[1], legacy[2]); /* step 1 */
    int rc = market__route(c, realm);
    if (rc == MARKET_OK) rc = market__pipeline(c, &del, 1, rep);
    if (rc < 0) goto out;
    if (rep[0]->type == REDIS_REPLY_ERROR)
        rc = market__fail_reply(c, "deleting the former search indexes", rep[0]);
    market__replies_free(rep, 1);
    snprintf(x->lo, sizeof x->lo, "-inf");
    while (rc == MARKET_OK && x->lo[0]) { /* step 2 */
        int tries = 0;
        do
            rc = fill_round(c, &rl, x, &n);
        while (reindex_again(c, &rc, ++tries));
        count += rc == MARKET_OK ? n : 0;
    }
    if (rc == MARKET_OK) rc = idx_keys_scan(c, realm, &keys); /* step 3 */
    for (size_t at = 0; rc == MARKET_OK && at < keys.n; at += KEYS_CHUNK) {
        int tries = 0;
        do
            rc = sweep_round(c, &rl, x, keys.keys + at,
                             keys.n - at < KEYS_CHUNK ? keys.n - at : KEYS_CHUNK);
        while (reindex_again(c, &rc, ++tries));
    }
out:
    if (c->watching) c->unwatch = 1; /* a round failed after its WATCH */
    if (rc == MARKET_OK && listings) *listings = count;
    keylist_free(&keys);
    pipe_free(&x->look);
    pipe_free(&x->write);
    strs_free(&x->mm);
    free(x->e);
    free(x);
    return rc;
}

/* ---- reading players and the store's counters ---- */

/* The keys of the players one SCAN page chose: "users:{<realm>}:<id>". */
struct userkeys {
    char (*keys)[MARKET__KEY_MAX];
    size_t n, cap;
};

/* Reads a SCAN reply: the next cursor into cursor, and into next the keys of
 * the players whose id is valid and matches match (NULL: every one). */
static int userkeys_from_scan(const redisReply *r, char *cursor, size_t cursorlen,
                              size_t prefix_len, const char *match, struct userkeys *next) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY ||
        r->element[0]->len >= cursorlen)
        return MARKET_ERR_STORE;
    memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
    const redisReply *ks = r->element[1];
    next->n = 0;
    if (grow((void **)&next->keys, &next->cap, ks->elements, sizeof *next->keys) < 0)
        return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < ks->elements; i++) {
        const redisReply *k = ks->element[i];
        if (k->type != REDIS_REPLY_STRING || k->len <= prefix_len ||
            k->len - prefix_len > MARKET_ID_MAX)
            continue;
        char *key = next->keys[next->n];
        memcpy(key, k->str, k->len);
        key[k->len] = '\0';
        const char *id = key + prefix_len;
        if (!market_id_valid(id) || (match && fnmatch(match, id, 0) != 0)) continue;
        next->n++;
    }
    return MARKET_OK;
}

/* Appends the players of keys whose funds reply (rep[i]) holds funds; nil
 * (the player went away, or has no funds field) is skipped. */
static int funds_from_replies(const struct userkeys *keys, size_t prefix_len, redisReply **rep,
                              market_player_funds **out, size_t *n, size_t *cap) {
    if (grow((void **)out, cap, *n + keys->n, sizeof **out) < 0) return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < keys->n; i++) {
        const redisReply *r = rep[i];
        if (r->type == REDIS_REPLY_NIL) continue;
        market_player_funds *p = &(*out)[*n];
        if (r->type != REDIS_REPLY_STRING || market__parse_i64(r->str, r->len, &p->funds) < 0)
            return MARKET_ERR_STORE;
        snprintf(p->id, sizeof p->id, "%s", keys->keys[i] + prefix_len);
        (*n)++;
    }
    return MARKET_OK;
}

/* Reads every player of realm (SCAN users:{<realm>}:*, no lock) whose id
 * matches the fnmatch(3) pattern match (NULL: every player) with its funds
 * into *out (new; caller frees with free(); NULL when there are none), in
 * SCAN order. Each round trip
 * is one pipeline: the funds (HGET) of the players the previous SCAN page
 * chose, and the next page. A player whose hash goes away meanwhile, or has
 * no funds field, is left out; keys whose id is not valid are ignored.
 * Meant for load tests and tools on a quiet market: a player added during
 * the scan may be missed. Returns MARKET_OK, or ERR_INVALID, ERR_STORE
 * (Redis failed, or funds that are not a whole number), ERR_NOMEM, with
 * *out NULL and *n 0. */
int market_players_scan(market_conn *c, const char *realm, const char *match,
                        market_player_funds **out, size_t *n) {
    if (!out || !n) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = 0;
    if (!c || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    char pattern[MARKET__KEY_MAX];
    market__key(pattern, sizeof pattern, "users", realm, "*");
    size_t prefix_len = strlen(pattern) - 1;
    struct userkeys cur = {0}, next = {0};
    struct pipe p = {0};
    market_player_funds *got = NULL;
    size_t n_got = 0, cap_got = 0;
    char cursor[32] = "0";
    int scanning = 1, rc = market__route(c, realm);
    while (rc == MARKET_OK && (scanning || cur.n)) {
        size_t ncmd = cur.n + (scanning ? 1 : 0);
        if ((rc = pipe_reserve(&p, ncmd)) < 0) break;
        for (size_t i = 0; i < cur.n; i++) {
            p.cmd[i] = (struct argv6){{"HGET", cur.keys[i], "funds"}};
            p.argc[i] = 3;
        }
        if (scanning) {
            p.cmd[cur.n] =
                (struct argv6){{"SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT}};
            p.argc[cur.n] = 6;
        }
        for (size_t i = 0; i < ncmd; i++)
            p.argv[i] = p.cmd[i].v;
        if ((rc = market__pipeline_argv(c, ncmd, p.argc, p.argv, p.rep)) < 0) break;
        rc = funds_from_replies(&cur, prefix_len, p.rep, &got, &n_got, &cap_got);
        next.n = 0;
        if (rc == MARKET_OK && scanning) {
            rc = userkeys_from_scan(p.rep[cur.n], cursor, sizeof cursor, prefix_len, match,
                                    &next);
            scanning = strcmp(cursor, "0") != 0;
        }
        market__replies_free(p.rep, ncmd);
        struct userkeys t = cur;
        cur = next;
        next = t;
    }
    free(cur.keys);
    free(next.keys);
    pipe_free(&p);
    if (rc < 0) {
        free(got);
        return rc;
    }
    if (n_got == 0) {
        free(got);
        got = NULL;
    }
    *out = got;
    *n = n_got;
    return MARKET_OK;
}

/* Reads the store's INFO text for section (e.g. "commandstats"; NULL: the
 * default sections) into *out (new, NUL-terminated; caller frees with
 * free()). Returns MARKET_OK, or ERR_INVALID, ERR_STORE, ERR_NOMEM with *out
 * NULL. */
int market_store_info(market_conn *c, const char *section, char **out) {
    if (!out) return MARKET_ERR_INVALID;
    *out = NULL;
    if (!c) return MARKET_ERR_INVALID;
    const char *argv[2] = {"INFO", section};
    const char **cmds[1] = {argv};
    int argc[1] = {section ? 2 : 1};
    redisReply *rep[1] = {NULL};
    int rc = market__pipeline_argv(c, 1, argc, cmds, rep);
    if (rc < 0) return rc;
    if (rep[0]->type != REDIS_REPLY_STRING)
        rc = MARKET_ERR_STORE;
    else if (!(*out = malloc(rep[0]->len + 1)))
        rc = MARKET_ERR_NOMEM;
    else {
        memcpy(*out, rep[0]->str, rep[0]->len);
        (*out)[rep[0]->len] = '\0';
    }
    market__replies_free(rep, 1);
    return rc;
}

/* Reads INFO section (see market_store_info) from every master of the
 * store: the one server or Sentinel group's master, or each master that
 * serves slots of a Redis Cluster. Returns MARKET_OK with *out a new array
 * of *n entries (caller frees with market_master_info_free()), or
 * ERR_INVALID, ERR_STORE (c's errstr says why), ERR_NOMEM with *out NULL. */
int market_store_info_masters(market_conn *c, const char *section, market_master_info **out,
                              size_t *n) {
    if (!out || !n) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = 0;
    if (!c) return MARKET_ERR_INVALID;
    unsigned slots[MARKET__MASTERS_MAX];
    int want = 1;
    if (c->m->cluster) {
        char why[128];
        want = lock_cluster_master_slots(c->m->cluster, slots, MARKET__MASTERS_MAX, why,
                                         sizeof why);
        if (want <= 0) return market__fail(c, "redis cluster: %s", want < 0 ? why : "no master");
    }
    market_master_info *v = calloc((size_t)want, sizeof *v);
    if (!v) return MARKET_ERR_NOMEM;
    int rc = MARKET_OK;
    for (int i = 0; i < want && rc == MARKET_OK; i++) {
        if (c->m->cluster) rc = market__route_slot(c, slots[i]);
        if (rc == MARKET_OK) rc = market_store_info(c, section, &v[i].text);
        if (rc == MARKET_OK) snprintf(v[i].where, sizeof v[i].where, "%s", c->where);
    }
    if (rc < 0) {
        market_master_info_free(v, (size_t)want);
        return rc;
    }
    *out = v;
    *n = (size_t)want;
    return MARKET_OK;
}

/* Frees v[0..n) and v; NULL is a no-op. This function can't fail. */
void market_master_info_free(market_master_info *v, size_t n) {
    if (!v) return;
    for (size_t i = 0; i < n; i++)
        free(v[i].text);
    free(v);
}
