/* market_world.c - seeding worlds (fixtures or generated) and auditing the store.
 *
 * A market_world is a plain in-memory description of players, held items and
 * listings. It is checked as a whole (no player or item twice, every owner a
 * player) before anything is written, and written in one MULTI/EXEC, so a bad
 * world writes nothing. market_audit() reads the whole store back to check
 * the invariants: funds conserved, none negative, every item in one place,
 * and the units of stackable goods and flash sales (stacks, stock, sold).
 * market_players_scan() and market_store_info() read the players and the
 * store's counters for tools (market-load) without their knowing the keys.
 */
#include "market/market.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_store.h"

/* The key patterns of a realm's keys that seeding with reset deletes (and its market and
 * its trades): players, inventories, idempotency records, trade indexes, sales (with their
 * bought hashes) and stacks. */
static const char *const realm_kinds[] = {"users", "inventory", "idem", "trades", "sale",
                                          "stacks"};

#define ZADD_CHUNK 256     /* score/member pairs per ZADD while seeding */
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

static int add_item(market_world *w, const char *owner, const char *item, int64_t price) {
    if (!w || !market_id_valid(owner) || !market_id_valid(item)) return MARKET_ERR_INVALID;
    if (grow((void **)&w->items, &w->cap_items, w->n_items + 1, sizeof *w->items) < 0)
        return MARKET_ERR_NOMEM;
    struct witem *it = &w->items[w->n_items++];
    snprintf(it->item, sizeof it->item, "%s", item);
    snprintf(it->owner, sizeof it->owner, "%s", owner);
    it->price = price;
    return MARKET_OK;
}

/* Puts item in owner's inventory. Returns MARKET_OK, ERR_INVALID, ERR_NOMEM. */
int market_world_add_item(market_world *w, const char *owner, const char *item) {
    return add_item(w, owner, item, 0);
}

/* Lists item by seller at price (1..MARKET_PRICE_MAX). Returns MARKET_OK,
 * ERR_INVALID, ERR_NOMEM. */
int market_world_add_listing(market_world *w, const char *seller, const char *item,
                             int64_t price) {
    if (price < 1 || price > MARKET_PRICE_MAX) return MARKET_ERR_INVALID;
    return add_item(w, seller, item, price);
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

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
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
    if (rc == MARKET_OK) {
        for (size_t i = 0; i < w->n_items; i++) ids[i] = w->items[i].item;
        qsort(ids, w->n_items, sizeof *ids, cmp_str_ptr);
        for (size_t i = 1; i < w->n_items && rc == MARKET_OK; i++)
            if (strcmp(ids[i - 1], ids[i]) == 0) {
                snprintf(why, whylen, "item '%s' appears twice", ids[i]);
                rc = MARKET_ERR_DUPLICATE;
            }
    }
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
        if (rep->type == REDIS_REPLY_ERROR ||
            (rep->type == REDIS_REPLY_NIL && i + 1 == b->sent)) /* EXEC aborted */
            rc = MARKET_ERR_STORE;
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
    const char *argv[3] = {"UNLINK", r->market, r->trades};
    bulk_add(b, 3, argv, NULL);
}

static int cmp_item_owner(const void *a, const void *b) {
    const struct witem *x = a, *y = b;
    return strcmp(x->owner, y->owner);
}

/* Writes w into realm in one MULTI/EXEC: each player's hash and inventory
 * are replaced, each listing added. With reset, the realm's players,
 * inventories, idempotency records and market are deleted first (inside the
 * same transaction; other realms are left alone). w is checked first and
 * nothing is written when it fails. Returns MARKET_OK, or ERR_DUPLICATE /
 * ERR_NO_PLAYER (see market_world_check), ERR_INVALID (a bad realm id),
 * ERR_STORE, ERR_NOMEM. */
int market_world_store(market_conn *c, const char *realm, const market_world *w, int reset) {
    if (!c || !w || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    int rc = market_world_check(w, NULL, 0);
    if (rc < 0) return rc;
    struct keylist keys = {0};
    struct witem *items = NULL;
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

    struct bulk b = {c, 0, 0};
    const char *multi[1] = {"MULTI"}, *exec[1] = {"EXEC"};
    bulk_add(&b, 1, multi, NULL);
    if (reset) bulk_del_keys(&b, &rl, &keys);
    char k_user[MARKET__KEY_MAX], k_inv[MARKET__KEY_MAX], funds[24];
    for (size_t i = 0; i < w->n_players; i++) {
        const struct wplayer *p = &w->players[i];
        market__key(k_user, sizeof k_user, "users", realm, p->id);
        market__key(k_inv, sizeof k_inv, "inventory", realm, p->id);
        snprintf(funds, sizeof funds, "%lld", (long long)p->funds);
        const char *del[3] = {"DEL", k_user, k_inv};
        const char *hset[6] = {"HSET", k_user, "name", p->name, "funds", funds};
        bulk_add(&b, 3, del, NULL);
        bulk_add(&b, 6, hset, NULL);
    }
    for (size_t i = 0; i < w->n_items; i++) {
        if (items[i].price != 0) continue;
        market__key(k_inv, sizeof k_inv, "inventory", realm, items[i].owner);
        const char *sadd[3] = {"SADD", k_inv, items[i].item};
        bulk_add(&b, 3, sadd, NULL);
    }
    /* Listings: ZADD market:{r} score member [score member ...] in chunks. */
    const char *argv[2 + 2 * ZADD_CHUNK];
    char score[ZADD_CHUNK][24], member[ZADD_CHUNK][MARKET__MEMBER_MAX];
    int argc = 2;
    argv[0] = "ZADD";
    argv[1] = rl.market;
    for (size_t i = 0; i < w->n_items; i++) {
        if (items[i].price == 0) continue;
        int k = (argc - 2) / 2;
        snprintf(score[k], sizeof score[k], "%lld", (long long)items[i].price);
        snprintf(member[k], sizeof member[k], "%s.%s", items[i].item, items[i].owner);
        argv[argc++] = score[k];
        argv[argc++] = member[k];
        if (argc == 2 + 2 * ZADD_CHUNK) {
            bulk_add(&b, argc, argv, NULL);
            argc = 2;
        }
    }
    if (argc > 2) bulk_add(&b, argc, argv, NULL);
    bulk_add(&b, 1, exec, NULL);
    rc = bulk_finish(&b);
out:
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
 * and negative funds, items held, items listed, items found in more than
 * one place, and the units of stackable goods and flash sales (stacks,
 * stock left, sold, and sales that sold more than they had). Meant for tests, load tests and operators on a quiet
 * market. Returns MARKET_OK, ERR_INVALID, ERR_STORE, ERR_OVERFLOW (funds
 * sum) or ERR_NOMEM. */
int market_audit(market_conn *c, const char *realm, market_audit_report *out) {
    if (!c || !out || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    memset(out, 0, sizeof *out);
    struct keylist users = {0}, invs = {0};
    struct itemlist items = {0};
    redisReply *z = NULL;
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
    const char *argv[4] = {"ZRANGE", rl.market, "0", "-1"};
    if (!(z = market__command(c, 4, argv, NULL))) {
        rc = MARKET_ERR_STORE;
        goto out;
    }
    if (z->type != REDIS_REPLY_ARRAY) {
        rc = MARKET_ERR_STORE;
        goto out;
    }
    for (size_t i = 0; i < z->elements; i++) {
        const redisReply *e = z->element[i];
        const char *dot = e->type == REDIS_REPLY_STRING ? memchr(e->str, '.', e->len) : NULL;
        if (!dot) {
            rc = MARKET_ERR_STORE;
            goto out;
        }
        if ((rc = itemlist_add(&items, e->str, (size_t)(dot - e->str))) < 0) goto out;
    }
    out->items_listed = z->elements;
    if (items.n) qsort(items.ids, items.n, sizeof *items.ids, cmp_id);
    for (size_t i = 1; i < items.n; i++)
        if (strcmp(items.ids[i - 1], items.ids[i]) == 0 &&
            (i < 2 || strcmp(items.ids[i - 2], items.ids[i]) != 0))
            out->items_misplaced++;
    rc = audit_units(c, realm, out);
out:
    if (z) freeReplyObject(z);
    keylist_free(&users);
    keylist_free(&invs);
    free(items.ids);
    return rc;
}

/* ---- reading players and the store's counters ---- */

/* The keys of the players one SCAN page chose: "users:{<realm>}:<id>". */
struct userkeys {
    char (*keys)[MARKET__KEY_MAX];
    size_t n, cap;
};

/* One command's argv in a pipeline that market_players_scan() builds. */
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
