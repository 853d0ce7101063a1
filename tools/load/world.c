/* world.c - what market-load reads from the store, all through market/.
 *
 * The listings (market_listings, in chunks) and the players with their
 * funds (market_players_scan) before the run, INFO commandstats around it
 * (market_store_info), and the audit after it, until the store settles.
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

/* Every listing (in chunks) into p; with players, only the listings of the
 * players chosen. */
static int read_items(load_plan *p, market_conn *mc, const char *players, char *why,
                      size_t whylen) {
    size_t offset = 0;
    for (;;) {
        market_listing *l = NULL;
        size_t n = 0, total = 0;
        int rc = market_listings(mc, offset, LOAD_LISTING_CHUNK, &l, &n, &total);
        if (rc < 0) {
            snprintf(why, whylen, "cannot read the market: %s", market_strerror(rc));
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            if (player_chosen(players, l[i].seller) &&
                load_plan_add_item(p, l[i].item, l[i].seller, l[i].price) < 0) {
                free(l);
                snprintf(why, whylen, "out of memory");
                return -1;
            }
        free(l);
        offset += LOAD_LISTING_CHUNK;
        if (offset >= total) return 0;
    }
}

static int read_players(load_plan *p, market_conn *mc, const char *redis, const char *players,
                        char *why, size_t whylen) {
    market_player_funds *f = NULL;
    size_t n = 0;
    int rc = market_players_scan(mc, players, &f, &n);
    if (rc < 0) {
        snprintf(why, whylen, "cannot read the players in %s: %s", redis, market_strerror(rc));
        return -1;
    }
    for (size_t i = 0; i < n && rc == MARKET_OK; i++)
        rc = load_plan_add_player(p, f[i].id, f[i].funds);
    free(f);
    if (rc < 0) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    return 0;
}

int load_world_read(load_plan *p, market_conn *mc, const char *redis, const char *players,
                    char *why, size_t whylen) {
    if (read_items(p, mc, players, why, whylen) < 0) return -1;
    return read_players(p, mc, redis, players, why, whylen);
}

int load_cmdstats_read(market_conn *mc, load_cmdstats *s, char *why, size_t whylen) {
    char *text = NULL;
    int rc = market_store_info(mc, "commandstats", &text);
    if (rc < 0) {
        snprintf(why, whylen, "INFO commandstats failed: %s", market_strerror(rc));
        return -1;
    }
    load_cmdstats_parse(s, text, strlen(text));
    free(text);
    return 0;
}

int load_audit_settled(market_conn *mc, int unanswered, market_audit_report *out,
                       int64_t *settle_ms) {
    *settle_ms = 0;
    int rc = market_audit(mc, out);
    if (rc < 0 || !unanswered) return rc;
    int64_t t0 = load_now_ns();
    for (int64_t waited = 0; waited < (int64_t)LOAD_DRAIN_MS * 1000000;
         waited = load_now_ns() - t0) {
        struct timespec ts = {0, LOAD_SETTLE_MS * 1000000L};
        nanosleep(&ts, NULL);
        market_audit_report again;
        if ((rc = market_audit(mc, &again)) < 0) return rc;
        int same = load_audit_same(out, &again);
        *out = again;
        if (same) break;
    }
    *settle_ms = (load_now_ns() - t0) / 1000000;
    return MARKET_OK;
}
