/* api_fixture.c - fixture files (players, inventories, listings, buy orders, auctions) into
 * a market_world.
 *
 * The format, strict like request bodies (duplicate keys and unknown fields
 * are refused):
 *
 *   {"players":  [{"id": "A", "name": "Alice", "funds": 100, "inventory": ["sword-1"],
 *                  "stacks": {"potion": 20}}, ...],
 *    "listings": [{"item": "axe", "seller": "A", "price": 500},
 *                 {"item": "potion", "seller": "A", "price": 25, "quantity": 10,
 *                  "duration_s": 600}, ...],
 *    "orders":   [{"buyer": "B", "item": "potion", "quantity": 5, "max_price": 20}, ...],
 *    "auctions": [{"seller": "A", "item": "sword-1", "start_bid": 100, "duration_s": 300,
 *                  "buyout": 900, "min_increment": 10}, ...]}
 *
 * "name" defaults to the id, "inventory", "stacks", "listings" and "orders" to empty;
 * funds are integers in 0..INT64_MAX, prices in 1..MARKET_PRICE_MAX, units
 * (a stack's, a listing's "quantity") in 1..MARKET_QUANTITY_MAX, ids match
 * [A-Za-z0-9_-]{1,64}. An item in an inventory, or listed without a
 * quantity, is unique; one in stacks, or listed with a quantity, is a
 * stackable good: many players hold and list units of it. A buy order
 * rests in its good's book, its quantity times its max_price escrowed out
 * of the buyer's funds (market_world_add_order()). A listing with a
 * "duration_s" (1..MARKET_DURATION_MAX_S) ends that long after the world is
 * stored (market_world_end_listing()). An auction, of what its seller holds in the file
 * (a "quantity" of units of a good, or a unique item), is opened once the world is stored,
 * as POST /auctions opens one, with the same fields (market_world_add_auction()).
 *
 * DESIGN
 * Three passes, so that every message names the place in the file:
 *   1. shape: every value present, typed and in range ("players[2].funds: ...");
 *   2. the whole: no player twice, no item twice (inventories and listings
 *      together), every seller a player ("listings[0].seller: unknown player 'Z'");
 *   3. building the world, then market_world_check() as the last word.
 * Ids stay borrowed from the parsed tree until the world holds its copies.
 */
#include "api/api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/api_impl.h"

#define FIXTURE_ID_RULE "[A-Za-z0-9_-]{1,64}"
#define FIXTURE_PLACE_MAX 64 /* "players[<n>].inventory[<n>]" */

enum place_kind {
    PLACE_PLAYER,    /* players[i].id */
    PLACE_INVENTORY, /* players[i].inventory[j] */
    PLACE_LISTING,   /* listings[i].item */
};

/* Where an id appears in the file. */
typedef struct place {
    const char *id; /* borrowed from the parsed tree */
    enum place_kind kind;
    size_t i, j;
} place;

/* One parse: the tree, what pass 1 collected, and where messages go. */
typedef struct fixture {
    json_t *players;  /* borrowed from the tree; an array */
    json_t *listings; /* borrowed from the tree; an array or NULL */
    json_t *orders;   /* borrowed from the tree; an array or NULL */
    json_t *auctions; /* borrowed from the tree; an array or NULL */
    place *pids;      /* one per player */
    size_t n_pids;
    place *items; /* one per inventory entry and listing */
    size_t n_items;
    char *why;
    size_t whylen;
} fixture;

/* ---- private ---- */

static void place_name(char *out, size_t outlen, const place *p) {
    switch (p->kind) {
    case PLACE_PLAYER: snprintf(out, outlen, "players[%zu].id", p->i); break;
    case PLACE_INVENTORY: snprintf(out, outlen, "players[%zu].inventory[%zu]", p->i, p->j); break;
    case PLACE_LISTING: snprintf(out, outlen, "listings[%zu].item", p->i); break;
    }
}

/* Orders places by id, then by where they appear (so messages are stable). */
static int place_cmp(const void *a, const void *b) {
    const place *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    if (c) return c;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if (x->i != y->i) return x->i < y->i ? -1 : 1;
    return x->j < y->j ? -1 : x->j > y->j;
}

static int place_id_cmp(const void *key, const void *elem) {
    return strcmp(key, ((const place *)elem)->id);
}

/* Checks that obj is an object whose keys are all in known[0..n). at names
 * obj ("players[2]"). Returns 0, or -1 with a message. */
static int check_object(fixture *f, json_t *obj, const char *at, const char *const *known,
                        size_t n) {
    char q[API__QUOTE_MAX + 4];
    if (!json_is_object(obj)) {
        api__why(f->why, f->whylen, "%s: must be an object", at);
        return -1;
    }
    const char *unknown = api__unknown_key(obj, known, n);
    if (unknown) {
        api__quote(q, sizeof q, unknown);
        api__why(f->why, f->whylen, "%s: unknown field '%s'", at, q);
        return -1;
    }
    return 0;
}

/* Reads member key of obj as an id into *out (borrowed). at names obj.
 * Returns 0, or -1 with a message. */
static int get_id(fixture *f, json_t *obj, const char *at, const char *key, const char **out) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        api__why(f->why, f->whylen, "%s: missing field '%s'", at, key);
        return -1;
    }
    if (!json_is_string(v) || !market_id_valid(json_string_value(v))) {
        api__why(f->why, f->whylen, "%s.%s: must be a string matching %s", at, key,
                 FIXTURE_ID_RULE);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

/* Reads member key of obj as an integer in lo..hi into *out. Returns 0, or
 * -1 with a message. */
static int get_int(fixture *f, json_t *obj, const char *at, const char *key, int64_t lo, int64_t hi,
                   int64_t *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        api__why(f->why, f->whylen, "%s: missing field '%s'", at, key);
        return -1;
    }
    json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;
    if (!json_is_integer(v) || x < lo || x > hi) {
        if (hi == INT64_MAX)
            api__why(f->why, f->whylen, "%s.%s: must be an integer >= %" PRId64, at, key, lo);
        else
            api__why(f->why, f->whylen, "%s.%s: must be an integer in %" PRId64 "..%" PRId64, at,
                     key, lo, hi);
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

/* Pass 1 for players[i]: its shape, its id and its items into f. */
static int shape_player(fixture *f, size_t i) {
    static const char *const known[] = {"id", "name", "funds", "inventory", "stacks"};
    char at[FIXTURE_PLACE_MAX];
    json_t *p = json_array_get(f->players, i);
    const char *id;
    int64_t funds;
    snprintf(at, sizeof at, "players[%zu]", i);
    if (check_object(f, p, at, known, 5) < 0 || get_id(f, p, at, "id", &id) < 0) return -1;
    json_t *name = json_object_get(p, "name");
    if (name && (!json_is_string(name) || json_string_length(name) == 0 ||
                 json_string_length(name) > MARKET_NAME_MAX)) {
        api__why(f->why, f->whylen, "%s.name: must be a string of 1..%d bytes", at,
                 MARKET_NAME_MAX);
        return -1;
    }
    if (get_int(f, p, at, "funds", 0, INT64_MAX, &funds) < 0) return -1;
    f->pids[f->n_pids++] = (place){id, PLACE_PLAYER, i, 0};
    json_t *stacks = json_object_get(p, "stacks"), *units;
    const char *good;
    if (stacks && !json_is_object(stacks)) {
        api__why(f->why, f->whylen, "%s.stacks: must be an object of item: units", at);
        return -1;
    }
    json_object_foreach(stacks, good, units) {
        json_int_t u = json_is_integer(units) ? json_integer_value(units) : 0;
        if (!market_id_valid(good) || u < 1 || u > MARKET_QUANTITY_MAX) {
            char q[API__QUOTE_MAX + 4];
            api__quote(q, sizeof q, good);
            api__why(f->why, f->whylen,
                     "%s.stacks: '%s' must be an id matching %s, its units an integer in "
                     "1..%d",
                     at, q, FIXTURE_ID_RULE, MARKET_QUANTITY_MAX);
            return -1;
        }
    }
    json_t *inv = json_object_get(p, "inventory");
    if (!inv) return 0;
    if (!json_is_array(inv)) {
        api__why(f->why, f->whylen, "%s.inventory: must be an array", at);
        return -1;
    }
    for (size_t j = 0; j < json_array_size(inv); j++) {
        const char *item = json_string_value(json_array_get(inv, j));
        if (!item || !market_id_valid(item)) {
            api__why(f->why, f->whylen, "%s.inventory[%zu]: must be a string matching %s", at, j,
                     FIXTURE_ID_RULE);
            return -1;
        }
        f->items[f->n_items++] = (place){item, PLACE_INVENTORY, i, j};
    }
    return 0;
}

/* Pass 1 for listings[i]. */
static int shape_listing(fixture *f, size_t i) {
    static const char *const known[] = {"item", "seller", "price", "quantity", "duration_s"};
    char at[FIXTURE_PLACE_MAX];
    json_t *l = json_array_get(f->listings, i);
    const char *item, *seller;
    int64_t price, units, duration;
    snprintf(at, sizeof at, "listings[%zu]", i);
    if (check_object(f, l, at, known, 5) < 0 || get_id(f, l, at, "item", &item) < 0 ||
        get_id(f, l, at, "seller", &seller) < 0 ||
        get_int(f, l, at, "price", 1, MARKET_PRICE_MAX, &price) < 0 ||
        (json_object_get(l, "duration_s") &&
         get_int(f, l, at, "duration_s", 1, MARKET_DURATION_MAX_S, &duration) < 0))
        return -1;
    if (json_object_get(l, "quantity")) { /* units of a good: not a unique item */
        return get_int(f, l, at, "quantity", 1, MARKET_QUANTITY_MAX, &units);
    }
    f->items[f->n_items++] = (place){item, PLACE_LISTING, i, 0};
    return 0;
}

/* Pass 1 for orders[i]. */
static int shape_order(fixture *f, size_t i) {
    static const char *const known[] = {"buyer", "item", "quantity", "max_price"};
    char at[FIXTURE_PLACE_MAX];
    json_t *o = json_array_get(f->orders, i);
    const char *buyer, *item;
    int64_t v;
    snprintf(at, sizeof at, "orders[%zu]", i);
    if (check_object(f, o, at, known, 4) < 0 || get_id(f, o, at, "buyer", &buyer) < 0 ||
        get_id(f, o, at, "item", &item) < 0 ||
        get_int(f, o, at, "quantity", 1, MARKET_QUANTITY_MAX, &v) < 0 ||
        get_int(f, o, at, "max_price", 1, MARKET_PRICE_MAX, &v) < 0)
        return -1;
    if (!bsearch(buyer, f->pids, f->n_pids, sizeof *f->pids, place_id_cmp)) {
        api__why(f->why, f->whylen, "%s.buyer: unknown player '%s'", at, buyer);
        return -1;
    }
    return 0;
}

/* Pass 1 for auctions[i] (its seller: after the players are sorted). */
static int shape_auction(fixture *f, size_t i) {
    static const char *const known[] = {"seller",   "item",   "start_bid",    "duration_s",
                                        "quantity", "buyout", "min_increment"};
    static const char *const opt[] = {"quantity", "buyout", "min_increment"};
    char at[FIXTURE_PLACE_MAX];
    json_t *a = json_array_get(f->auctions, i);
    const char *seller, *item;
    int64_t v;
    snprintf(at, sizeof at, "auctions[%zu]", i);
    if (check_object(f, a, at, known, 7) < 0 || get_id(f, a, at, "seller", &seller) < 0 ||
        get_id(f, a, at, "item", &item) < 0 ||
        get_int(f, a, at, "start_bid", 1, MARKET_PRICE_MAX, &v) < 0 ||
        get_int(f, a, at, "duration_s", 1, MARKET_DURATION_MAX_S, &v) < 0)
        return -1;
    for (size_t k = 0; k < 3; k++)
        if (json_object_get(a, opt[k]) &&
            get_int(f, a, at, opt[k], 1, k ? MARKET_PRICE_MAX : MARKET_QUANTITY_MAX, &v) < 0)
            return -1;
    if (!bsearch(seller, f->pids, f->n_pids, sizeof *f->pids, place_id_cmp)) {
        api__why(f->why, f->whylen, "%s.seller: unknown player '%s'", at, seller);
        return -1;
    }
    return 0;
}

/* Pass 2: finds the first id of sorted places[0..n) that appears twice.
 * Returns 0, or -1 with a message. */
static int check_unique(fixture *f, place *places, size_t n, const char *what) {
    char a[FIXTURE_PLACE_MAX], b[FIXTURE_PLACE_MAX];
    qsort(places, n, sizeof *places, place_cmp);
    for (size_t k = 1; k < n; k++) {
        if (strcmp(places[k - 1].id, places[k].id) != 0) continue;
        place_name(a, sizeof a, &places[k - 1]);
        place_name(b, sizeof b, &places[k]);
        api__why(f->why, f->whylen, "%s '%s' appears twice (%s and %s)", what, places[k].id, a, b);
        return -1;
    }
    return 0;
}

/* Pass 3: fills w. Returns MARKET_OK or the first failure, with a message. */
static int build(fixture *f, market_world *w) {
    int rc = MARKET_OK;
    size_t i, j = 0;
    for (i = 0; i < json_array_size(f->players) && rc == MARKET_OK; i++) {
        json_t *p = json_array_get(f->players, i), *inv = json_object_get(p, "inventory");
        const char *id = json_string_value(json_object_get(p, "id"));
        rc = market_world_add_player(w, id, json_string_value(json_object_get(p, "name")),
                                     (int64_t)json_integer_value(json_object_get(p, "funds")));
        for (j = 0; j < json_array_size(inv) && rc == MARKET_OK; j++)
            rc = market_world_add_item(w, id, json_string_value(json_array_get(inv, j)));
        const char *good;
        json_t *units;
        json_object_foreach(json_object_get(p, "stacks"), good, units) {
            if (rc == MARKET_OK)
                rc = market_world_add_stack(w, id, good, (int64_t)json_integer_value(units));
        }
    }
    if (rc != MARKET_OK) {
        api__why(f->why, f->whylen, "players[%zu]: %s", i - 1, market_strerror(rc));
        return rc;
    }
    for (i = 0; i < json_array_size(f->listings) && rc == MARKET_OK; i++) {
        json_t *l = json_array_get(f->listings, i), *q = json_object_get(l, "quantity");
        const char *seller = json_string_value(json_object_get(l, "seller"));
        const char *item = json_string_value(json_object_get(l, "item"));
        int64_t price = (int64_t)json_integer_value(json_object_get(l, "price"));
        json_t *d = json_object_get(l, "duration_s");
        rc = q ? market_world_add_units_listing(w, seller, item, price,
                                                (int64_t)json_integer_value(q))
               : market_world_add_listing(w, seller, item, price);
        if (rc == MARKET_OK && d)
            rc = market_world_end_listing(w, seller, item, (int64_t)json_integer_value(d));
    }
    if (rc != MARKET_OK) {
        api__why(f->why, f->whylen, "listings[%zu]: %s", i - 1, market_strerror(rc));
        return rc;
    }
    for (i = 0; i < json_array_size(f->orders) && rc == MARKET_OK; i++) {
        json_t *o = json_array_get(f->orders, i);
        rc = market_world_add_order(w, json_string_value(json_object_get(o, "buyer")),
                                    json_string_value(json_object_get(o, "item")),
                                    (int64_t)json_integer_value(json_object_get(o, "quantity")),
                                    (int64_t)json_integer_value(json_object_get(o, "max_price")));
    }
    if (rc != MARKET_OK) {
        api__why(f->why, f->whylen, "orders[%zu]: %s", i - 1, market_strerror(rc));
        return rc;
    }
    for (i = 0; i < json_array_size(f->auctions) && rc == MARKET_OK; i++) {
        json_t *a = json_array_get(f->auctions, i);
        rc = market_world_add_auction(
            w, json_string_value(json_object_get(a, "seller")),
            json_string_value(json_object_get(a, "item")),
            (int64_t)json_integer_value(json_object_get(a, "quantity")),
            (int64_t)json_integer_value(json_object_get(a, "start_bid")),
            (int64_t)json_integer_value(json_object_get(a, "buyout")),
            (int64_t)json_integer_value(json_object_get(a, "min_increment")),
            (int64_t)json_integer_value(json_object_get(a, "duration_s")));
    }
    if (rc != MARKET_OK) {
        api__why(f->why, f->whylen, "auctions[%zu]: %s", i - 1, market_strerror(rc));
        return rc;
    }
    return market_world_check(w, f->why, f->whylen);
}

/* Runs the three passes over root. Returns MARKET_OK, or a negative code
 * with a message. */
static int parse(fixture *f, json_t *root, market_world *w) {
    static const char *const known[] = {"players", "listings", "orders", "auctions"};
    if (check_object(f, root, "fixture", known, 4) < 0) return MARKET_ERR_INVALID;
    f->players = json_object_get(root, "players");
    f->listings = json_object_get(root, "listings");
    f->orders = json_object_get(root, "orders");
    f->auctions = json_object_get(root, "auctions");
    if (!f->players) {
        api__why(f->why, f->whylen, "fixture: missing field 'players'");
        return MARKET_ERR_INVALID;
    }
    if (!json_is_array(f->players)) {
        api__why(f->why, f->whylen, "players: must be an array");
        return MARKET_ERR_INVALID;
    }
    if (f->listings && !json_is_array(f->listings)) {
        api__why(f->why, f->whylen, "listings: must be an array");
        return MARKET_ERR_INVALID;
    }
    if (f->orders && !json_is_array(f->orders)) {
        api__why(f->why, f->whylen, "orders: must be an array");
        return MARKET_ERR_INVALID;
    }
    if (f->auctions && !json_is_array(f->auctions)) {
        api__why(f->why, f->whylen, "auctions: must be an array");
        return MARKET_ERR_INVALID;
    }

    size_t n_players = json_array_size(f->players), n_items = json_array_size(f->listings);
    for (size_t i = 0; i < n_players; i++)
        n_items += json_array_size(json_object_get(json_array_get(f->players, i), "inventory"));
    f->pids = calloc(n_players ? n_players : 1, sizeof *f->pids);
    f->items = calloc(n_items ? n_items : 1, sizeof *f->items);
    if (!f->pids || !f->items) {
        api__why(f->why, f->whylen, "out of memory");
        return MARKET_ERR_NOMEM;
    }

    for (size_t i = 0; i < n_players; i++)
        if (shape_player(f, i) < 0) return MARKET_ERR_INVALID;
    for (size_t i = 0; i < json_array_size(f->listings); i++)
        if (shape_listing(f, i) < 0) return MARKET_ERR_INVALID;

    if (check_unique(f, f->pids, f->n_pids, "player") < 0) return MARKET_ERR_DUPLICATE;
    for (size_t i = 0; i < json_array_size(f->listings); i++) {
        const char *seller =
            json_string_value(json_object_get(json_array_get(f->listings, i), "seller"));
        if (!bsearch(seller, f->pids, f->n_pids, sizeof *f->pids, place_id_cmp)) {
            api__why(f->why, f->whylen, "listings[%zu].seller: unknown player '%s'", i, seller);
            return MARKET_ERR_NO_PLAYER;
        }
    }
    if (check_unique(f, f->items, f->n_items, "item") < 0) return MARKET_ERR_DUPLICATE;
    for (size_t i = 0; i < json_array_size(f->orders); i++) /* pids are sorted by now */
        if (shape_order(f, i) < 0) return MARKET_ERR_INVALID;
    for (size_t i = 0; i < json_array_size(f->auctions); i++)
        if (shape_auction(f, i) < 0) return MARKET_ERR_INVALID;

    return build(f, w);
}

/* ---- API ---- */

/* Parses the fixture text json[0..len) (the format is at the top of this
 * file) into a world. Returns MARKET_OK with *out a new world (caller frees
 * with market_world_free()); or a negative market code with *out NULL and a
 * sentence naming the place in why (may be NULL; cut to whylen):
 * MARKET_ERR_INVALID (not JSON, wrong shape, a value out of range),
 * MARKET_ERR_DUPLICATE (a player or an item twice), MARKET_ERR_NO_PLAYER (a
 * listing by an unknown player), MARKET_ERR_INSUFFICIENT_FUNDS (a buyer who
 * cannot escrow its orders), MARKET_ERR_NOT_HELD (an auction of goods its seller does not
 * hold in the file), MARKET_ERR_NOMEM. */
int api_fixture_parse(const char *json, size_t len, market_world **out, char *why, size_t whylen) {
    if (why && whylen) why[0] = '\0';
    if (!out) {
        api__why(why, whylen, "no place for the world");
        return MARKET_ERR_INVALID;
    }
    *out = NULL;
    int rc;
    json_t *root = api__load(json, len, "fixture", &rc, why, whylen);
    if (!root) return rc;
    fixture f = {.why = why, .whylen = whylen};
    market_world *w = market_world_new();
    if (!w) {
        api__why(why, whylen, "out of memory");
        rc = MARKET_ERR_NOMEM;
    } else {
        rc = parse(&f, root, w);
    }
    free(f.pids);
    free(f.items);
    json_decref(root);
    if (rc != MARKET_OK) {
        market_world_free(w);
        return rc < 0 ? rc : MARKET_ERR_INVALID;
    }
    *out = w;
    return MARKET_OK;
}
