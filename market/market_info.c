/* market_info.c - reads for tools: the players with their funds, the store's counters.
 *
 * market_players_scan() and market_store_info() read the players and the store's
 * counters (INFO, from every master) for tools (market-load) without their knowing the
 * keys.
 */
#include "market/market.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_bulk.h"

/* The keys of the players one SCAN page chose: "users:{<realm>}:<id>". */
struct userkeys {
    char (*keys)[MARKET__KEY_MAX];
    size_t n, cap;
};

/* Reads a SCAN reply: the next cursor into cursor, and into next the keys of
 * the players whose id is valid and matches match (NULL: every one). */
static int userkeys_from_scan(const redisReply *r, char *cursor, size_t cursorlen,
                              size_t prefix_len, const char *match, struct userkeys *next) {
    const redisReply *ks;
    if (market__reply_scan(r, cursor, cursorlen, &ks) < 0) return MARKET_ERR_STORE;
    next->n = 0;
    size_t n = market__reply_len(ks);
    if (market__grow((void **)&next->keys, &next->cap, n, sizeof *next->keys) < 0)
        return MARKET_ERR_NOMEM;
    for (size_t i = 0, len; i < n; i++) {
        const char *k = market__reply_key(ks, i, &len);
        if (!k || len <= prefix_len || len - prefix_len > MARKET_ID_MAX) continue;
        char *key = next->keys[next->n];
        memcpy(key, k, len);
        key[len] = '\0';
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
    if (market__grow((void **)out, cap, *n + keys->n, sizeof **out) < 0) return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < keys->n; i++) {
        int64_t escrow;
        market__party party = market__reply_funds_escrow(rep[i], &escrow);
        if (party.known == MARKET__ABSENT) continue;
        if (party.known != MARKET__PRESENT) return MARKET_ERR_STORE;
        market_player_funds *p = &(*out)[*n];
        p->funds = party.funds;
        p->escrow = escrow;
        snprintf(p->id, sizeof p->id, "%s", keys->keys[i] + prefix_len);
        (*n)++;
    }
    return MARKET_OK;
}

/* Reads every player of realm (SCAN users:{<realm>}:*, no lock) whose id
 * matches the fnmatch(3) pattern match (NULL: every player) with its funds
 * and escrow into *out (new; caller frees with free(); NULL when there are none), in
 * SCAN order. Each round trip
 * is one pipeline: the funds and escrow (HMGET) of the players the previous SCAN page
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
    market__key_user(pattern, realm, "*");
    size_t prefix_len = strlen(pattern) - 1;
    struct userkeys cur = {0}, next = {0};
    market__buf p = {0};
    market_player_funds *got = NULL;
    size_t n_got = 0, cap_got = 0;
    char cursor[32] = "0";
    int scanning = 1, rc = market__route(c, realm);
    while (rc == MARKET_OK && (scanning || cur.n)) {
        size_t ncmd = cur.n + (scanning ? 1 : 0);
        market__buf_reset(&p);
        for (size_t i = 0; i < cur.n; i++)
            market__rd_funds_escrow(&p, cur.keys[i]);
        if (scanning) market__rd_scan(&p, cursor, pattern);
        if ((rc = market__pipeline_buf(c, &p)) < 0) break;
        rc = funds_from_replies(&cur, prefix_len, p.rep, &got, &n_got, &cap_got);
        next.n = 0;
        if (rc == MARKET_OK && scanning) {
            rc = userkeys_from_scan(p.rep[cur.n], cursor, sizeof cursor, prefix_len, match, &next);
            scanning = strcmp(cursor, "0") != 0;
        }
        market__replies_free(p.rep, ncmd);
        struct userkeys t = cur;
        cur = next;
        next = t;
    }
    free(cur.keys);
    free(next.keys);
    market__buf_free(&p);
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
    market__buf b = {0};
    market__rd_info(&b, section);
    int rc = market__pipeline_buf(c, &b);
    redisReply **rep = b.rep;
    if (rc < 0) {
        market__buf_free(&b);
        return rc;
    }
    int got = market__reply_dup(rep[0], out);
    if (got < 0) rc = got == MARKET_ERR_NOMEM ? got : MARKET_ERR_STORE;
    market__replies_free(rep, 1);
    market__buf_free(&b);
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
        want =
            rconn_cluster_master_slots(c->m->cluster, slots, MARKET__MASTERS_MAX, why, sizeof why);
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
