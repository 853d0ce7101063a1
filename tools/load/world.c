/* world.c - what market-load reads from the store, all through market/.
 *
 * The listings (market_listings, in chunks) and the players with their
 * funds (market_players_scan) of every realm of the run before it, INFO
 * commandstats around it (market_store_info), and the audit of every realm
 * (summed) after it, until the store settles.
 */
#include "tools/load/load.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Whether the run may use player id (--players). */
static int player_chosen(const char *players, const char *id) {
    return !players || fnmatch(players, id, 0) == 0;
}

/* Every listing of realm (in chunks) into p; with players, only the
 * listings of the players chosen. */
static int read_items(load_plan *p, market_conn *mc, const char *realm, const char *players,
                      char *why, size_t whylen) {
    size_t offset = 0;
    for (;;) {
        market_listing *l = NULL;
        size_t n = 0, total = 0;
        int rc = market_listings(mc, realm, offset, LOAD_LISTING_CHUNK, &l, &n, &total);
        if (rc < 0) {
            snprintf(why, whylen, "cannot read the market of realm %s: %s", realm,
                     market_strerror(rc));
            return -1;
        }
        for (size_t i = 0; i < n; i++) /* units of goods: the book mix's, not items to buy */
            if (player_chosen(players, l[i].seller) &&
                (l[i].stack ? load_plan_add_good(p, l[i].item, l[i].seller, l[i].price)
                            : load_plan_add_item(p, l[i].item, l[i].seller, l[i].price)) < 0) {
                free(l);
                snprintf(why, whylen, "out of memory");
                return -1;
            }
        free(l);
        offset += LOAD_LISTING_CHUNK;
        if (offset >= total) return 0;
    }
}

static int read_players(load_plan *p, market_conn *mc, const char *redis, const char *realm,
                        const char *players, char *why, size_t whylen) {
    market_player_funds *f = NULL;
    size_t n = 0;
    int rc = market_players_scan(mc, realm, players, &f, &n);
    if (rc < 0) {
        snprintf(why, whylen, "cannot read the players of realm %s in %s: %s", realm, redis,
                 market_strerror(rc));
        return -1;
    }
    for (size_t i = 0; i < n && rc == MARKET_OK; i++) /* what its buy orders hold is its too */
        rc = load_plan_add_player(p, f[i].id, f[i].funds + f[i].escrow);
    free(f);
    if (rc < 0) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    return 0;
}

void load_realms_name(const load_opts *o, char (*realms)[MARKET_REALM_MAX + 1]) {
    if (o->realms <= 1) {
        snprintf(realms[0], sizeof realms[0], "%s", MARKET_REALM_DEFAULT);
        return;
    }
    for (unsigned i = 0; i < o->realms; i++)
        (void)market_realm_nth(i, realms[i], sizeof realms[i]); /* i < MARKET_REALMS_MAX */
}

int load_world_read(load_plan *p, market_conn *mc, const char *redis,
                    char (*realms)[MARKET_REALM_MAX + 1], size_t n, const char *players,
                    char *why, size_t whylen) {
    for (size_t r = 0; r < n; r++) {
        if (load_plan_add_realm(p, realms[r]) < 0) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
        if (read_items(p, mc, realms[r], players, why, whylen) < 0 ||
            read_players(p, mc, redis, realms[r], players, why, whylen) < 0)
            return -1;
    }
    return 0;
}

int load_cmdstats_read(market_conn *mc, load_cmdstats *s, char *why, size_t whylen) {
    market_master_info *info = NULL;
    size_t n = 0;
    int rc = market_store_info_masters(mc, "commandstats", &info, &n);
    if (rc < 0) {
        snprintf(why, whylen, "INFO commandstats failed: %s (%s)", market_strerror(rc),
                 market_conn_errstr(mc));
        return -1;
    }
    load_cmdstats *one = malloc(sizeof *one);
    if (!one) {
        market_master_info_free(info, n);
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < n; i++) {
        load_cmdstats_parse(one, info[i].text, strlen(info[i].text));
        load_cmdstats_add(s, one, info[i].where);
    }
    free(one);
    market_master_info_free(info, n);
    if ((rc = market_store_info_masters(mc, "cpu", &info, &n)) < 0) {
        snprintf(why, whylen, "INFO cpu failed: %s (%s)", market_strerror(rc),
                 market_conn_errstr(mc));
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        s->cpu_s += load_cpu_parse(info[i].text, strlen(info[i].text));
    market_master_info_free(info, n);
    return 0;
}

int load_audit(market_conn *mc, char (*realms)[MARKET_REALM_MAX + 1], size_t n,
               market_audit_report *out) {
    memset(out, 0, sizeof *out);
    for (size_t r = 0; r < n; r++) {
        market_audit_report a;
        int rc = market_audit(mc, realms[r], &a);
        if (rc < 0) return rc;
        out->players += a.players;
        if (__builtin_add_overflow(out->total_funds, a.total_funds, &out->total_funds))
            return MARKET_ERR_OVERFLOW;
        out->negative_funds += a.negative_funds;
        out->items_held += a.items_held;
        out->items_listed += a.items_listed;
        out->items_misplaced += a.items_misplaced;
        out->index_mismatch += a.index_mismatch;
        if (__builtin_add_overflow(out->units_in_stacks, a.units_in_stacks,
                                   &out->units_in_stacks) ||
            __builtin_add_overflow(out->units_listed, a.units_listed, &out->units_listed) ||
            __builtin_add_overflow(out->units_in_sales, a.units_in_sales, &out->units_in_sales) ||
            __builtin_add_overflow(out->units_sold_by_sales, a.units_sold_by_sales,
                                   &out->units_sold_by_sales))
            return MARKET_ERR_OVERFLOW;
        if (__builtin_add_overflow(out->total_escrow, a.total_escrow, &out->total_escrow) ||
            __builtin_add_overflow(out->orders_escrow, a.orders_escrow, &out->orders_escrow) ||
            __builtin_add_overflow(out->auctions_escrow, a.auctions_escrow,
                                   &out->auctions_escrow) ||
            __builtin_add_overflow(out->units_in_auctions, a.units_in_auctions,
                                   &out->units_in_auctions))
            return MARKET_ERR_OVERFLOW;
        out->auctions += a.auctions;
        out->items_in_auctions += a.items_in_auctions;
        out->auctions_unreadable += a.auctions_unreadable;
        out->negative_escrow += a.negative_escrow;
        out->orders += a.orders;
        out->orders_misbooked += a.orders_misbooked;
        out->goods_listed += a.goods_listed;
        out->sale_units_in_stacks += a.sale_units_in_stacks;
        out->sales += a.sales;
        out->sales_oversold += a.sales_oversold;
        out->sales_unbalanced += a.sales_unbalanced;
    }
    return MARKET_OK;
}

int load_audit_settled(market_conn *mc, char (*realms)[MARKET_REALM_MAX + 1], size_t n,
                       int unanswered, market_audit_report *out, int64_t *settle_ms) {
    *settle_ms = 0;
    int rc = load_audit(mc, realms, n, out);
    if (rc < 0 || !unanswered) return rc;
    int64_t t0 = load_now_ns();
    for (int64_t waited = 0; waited < (int64_t)LOAD_DRAIN_MS * 1000000;
         waited = load_now_ns() - t0) {
        struct timespec ts = {0, LOAD_SETTLE_MS * 1000000L};
        nanosleep(&ts, NULL);
        market_audit_report again;
        if ((rc = load_audit(mc, realms, n, &again)) < 0) return rc;
        int same = load_audit_same(out, &again);
        *out = again;
        if (same) break;
    }
    *settle_ms = (load_now_ns() - t0) / 1000000;
    return MARKET_OK;
}

int load_trades_mark(market_conn *mc, char (*realms)[MARKET_REALM_MAX + 1], size_t n,
                     char (*marks)[MARKET_TRADE_ID_MAX + 1], char *why, size_t whylen) {
    for (size_t r = 0; r < n; r++) {
        int rc = market_trade_last(mc, realms[r], marks[r]);
        if (rc < 0) {
            snprintf(why, whylen, "cannot read the trades of realm %s: %s (%s)", realms[r],
                     market_strerror(rc), market_conn_errstr(mc));
            return -1;
        }
    }
    return 0;
}

/* Reads where realm's trade history begins, after the run's trades were read: whether it
 * trimmed a trade of the run (load_ledger_mark). Returns a market code. */
static int mark_kept(load_ledger *l, market_conn *mc, const char *realm, const char *mark) {
    char oldest[MARKET_TRADE_ID_MAX + 1];
    uint64_t trimmed;
    int rc = market_trade_history_start(mc, realm, oldest, &trimmed);
    if (rc == MARKET_OK) load_ledger_mark(l, mark, oldest, trimmed);
    return rc;
}

int load_trades_read(load_ledger *l, market_conn *mc, char (*realms)[MARKET_REALM_MAX + 1],
                     size_t n, char (*marks)[MARKET_TRADE_ID_MAX + 1], const char *players,
                     char *why, size_t whylen) {
    for (size_t r = 0; r < n; r++) {
        market_player_funds *f = NULL;
        size_t nf = 0;
        int rc = market_players_scan(mc, realms[r], players, &f, &nf);
        for (size_t i = 0; rc == MARKET_OK && i < nf; i++)
            load_ledger_after(l, (unsigned)r, f[i].id, f[i].funds + f[i].escrow);
        free(f);
        char after[MARKET_TRADE_ID_MAX + 1];
        memcpy(after, marks[r], sizeof after);
        while (rc == MARKET_OK) {
            market_trade *t = NULL;
            size_t nt = 0;
            rc = market_trades_after(mc, realms[r], after, MARKET_TRADES_PAGE_MAX, &t, &nt);
            for (size_t i = 0; rc == MARKET_OK && i < nt; i++)
                load_ledger_trade(l, (unsigned)r, &t[i]);
            if (nt) memcpy(after, t[nt - 1].id, sizeof after);
            free(t);
            if (nt < MARKET_TRADES_PAGE_MAX) break;
        }
        if (rc == MARKET_OK) rc = mark_kept(l, mc, realms[r], marks[r]);
        if (rc < 0) {
            snprintf(why, whylen, "cannot read the trades and players of realm %s: %s (%s)",
                     realms[r], market_strerror(rc), market_conn_errstr(mc));
            return -1;
        }
    }
    load_ledger_close(l);
    return 0;
}

int load_flash_create(market_conn *mc, const load_opts *o, const char *realm, const char *id,
                      char *why, size_t whylen) {
    market_player *h = NULL;
    int rc = market_player_get(mc, realm, o->sale_house, &h);
    market_player_free(h);
    if (rc == MARKET_ERR_NO_PLAYER) { /* a house with no funds: the totals do not move */
        market_world *w = market_world_new();
        rc = !w ? MARKET_ERR_NOMEM
                : market_world_add_player(w, o->sale_house, "The game (the house)", 0);
        if (rc == MARKET_OK) rc = market_world_store(mc, realm, w, 0);
        market_world_free(w);
    }
    if (rc < 0) {
        snprintf(why, whylen, "cannot make the house %s of realm %s: %s (%s)", o->sale_house,
                 realm, market_strerror(rc), market_conn_errstr(mc));
        return -1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    market_sale s = {.price = o->sale_price, .initial = o->sale_stock, .limit = o->sale_limit,
                     .start_ms = 0, .end_ms = (int64_t)ts.tv_sec * 1000 + 86400000};
    snprintf(s.id, sizeof s.id, "%s", id);
    snprintf(s.item, sizeof s.item, "%s", id);
    snprintf(s.house, sizeof s.house, "%s", o->sale_house);
    rc = market_sale_create(mc, realm, &s);
    if (rc < 0) {
        snprintf(why, whylen, "cannot create the sale %s in realm %s: %s (%s)", id, realm,
                 market_strerror(rc), market_conn_errstr(mc));
        return -1;
    }
    return 0;
}

int load_flash_read(market_conn *mc, const char *realm, load_flash *f, char *why, size_t whylen) {
    market_sale s;
    market_sale_buyer *b = NULL;
    size_t n = 0;
    int rc = market_sale_get(mc, realm, f->sale, &s);
    if (rc == MARKET_OK) rc = market_sale_buyers(mc, realm, f->sale, &b, &n);
    if (rc < 0) {
        snprintf(why, whylen, "cannot read the sale %s of realm %s: %s (%s)", f->sale, realm,
                 market_strerror(rc), market_conn_errstr(mc));
        return -1;
    }
    f->sold = s.sold;
    f->left = s.left;
    f->oversold = s.sold > f->stock ? s.sold - f->stock : s.left < 0 ? -s.left : 0;
    f->violations = f->bought_sum = 0;
    f->buyers_seen = (int64_t)n;
    for (size_t i = 0; i < n; i++) {
        f->bought_sum += b[i].units;
        if (b[i].units > f->limit) f->violations++;
    }
    free(b);
    return 0;
}

/* ---- auctions ---- */

int load_auctions_open(market_conn *mc, const load_opts *o, const char *realm, load_auctions *a,
                       char *why, size_t whylen) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    snprintf(a->seller, sizeof a->seller, "auctioneer-%lld", ms);
    snprintf(a->item, sizeof a->item, "lot-%lld", ms);
    a->n = o->auctions;
    if (!(a->ids = calloc(a->n, sizeof *a->ids))) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    /* the sweepers settle the realms noted as having ends: noted before the first one */
    int rc = market_ending_note(mc, realm);
    market_world *w = rc == MARKET_OK ? market_world_new() : NULL;
    if (rc == MARKET_OK && !w) rc = MARKET_ERR_NOMEM;
    if (rc == MARKET_OK) rc = market_world_add_player(w, a->seller, "market-load's auctioneer", 0);
    if (rc == MARKET_OK) rc = market_world_add_stack(w, a->seller, a->item, (int64_t)a->n);
    if (rc == MARKET_OK) rc = market_world_store(mc, realm, w, 0); /* adds, replaces nothing */
    market_world_free(w);
    int64_t secs = (int64_t)o->auction_s + (o->auction_s > (double)(int64_t)o->auction_s);
    for (size_t k = 0; rc == MARKET_OK && k < a->n; k++) {
        market_order ord = {.type = MARKET_ORDER_AUCTION,
                            .realm = realm,
                            .player = a->seller,
                            .item = a->item,
                            .quantity = 1,
                            .price = 1,
                            .buyout = o->buyout,
                            .step = 1,
                            .duration_s = secs};
        rc = market_order_run(mc, &ord);
        if (rc == MARKET_OK) {
            a->ids[k] = ord.res.auction.a.id;
            if (ord.res.auction.a.ends_ms > a->ends_ms) a->ends_ms = ord.res.auction.a.ends_ms;
        }
    }
    if (rc < 0) {
        snprintf(why, whylen, "cannot open the run's auctions in realm %s: %s (%s)", realm,
                 market_strerror(rc), market_conn_errstr(mc));
        return -1;
    }
    return 0;
}

int load_auctions_read(market_conn *mc, const char *realm, load_auctions *a, char *why,
                       size_t whylen) {
    int64_t t0 = load_now_ns();
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        a->sold = a->unsold = a->open = a->late = 0;
        for (size_t k = 0; k < a->n; k++) {
            market_auction x;
            int rc = market_auction_get(mc, realm, a->ids[k], &x);
            if (rc < 0) {
                snprintf(why, whylen, "cannot read auction %lld of realm %s: %s (%s)",
                         (long long)a->ids[k], realm, market_strerror(rc), market_conn_errstr(mc));
                return -1;
            }
            a->sold += x.state == MARKET_AUCTION_SOLD;
            a->unsold += x.state == MARKET_AUCTION_UNSOLD;
            a->open += x.state == MARKET_AUCTION_OPEN;
            /* its end has come (the store's clock may be a little ahead of ours) */
            a->late += x.state == MARKET_AUCTION_OPEN && x.ends_ms + 1000 <= now_ms;
        }
        a->settle_ms = (load_now_ns() - t0) / 1000000;
        if (!a->late || a->settle_ms >= LOAD_SETTLE_WAIT_MS) return 0;
        struct timespec pause = {0, 100 * 1000000L};
        nanosleep(&pause, NULL);
    }
}
