/* market_settings.c - a realm's settings: the cut of every sale and the fee
 * of every listing, which go to the house, and how long a listing lasts when
 * its list names no duration (GET and PUT /config).
 *
 * DESIGN
 * The settings are one hash, market:{r}:settings {fee_bps, house,
 * list_fee_bps, list_duration_s}, in the realm's slot, so every server applies the same. The
 * kinds that sell (a listing's purchase, a buy across sellers) and the
 * listing kind WATCH and read it in their batch's read (market_frame.c): a
 * batch decided under the old settings is aborted by the change and read
 * again. A setting names a house that is a
 * player of the realm, checked in the same script that writes it. A reset
 * of the realm deletes the hash: a new world starts without a cut.
 */
#include "market/market_store.h"

/* KEYS[1] the settings, KEYS[2] the house's hash; ARGV the fields and
 * their values. Returns 1, or -1 when the house is no player. */
static const char set_script[] = "if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end "
                                 "redis.call('HSET', KEYS[1], unpack(ARGV)) "
                                 "return 1";

/* Reads realm's settings into *out (unset: no cut, no listing fee,
 * MARKET_SALE_HOUSE).
 * Returns MARKET_OK, or ERR_INVALID, ERR_STORE. */
int market_settings_get(market_conn *c, const char *realm, market_settings *out) {
    if (!c || !out || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    market__realm rl;
    market__realm_init(&rl, realm);
    market__buf b = {0};
    market__rd_realm_settings(&b, rl.settings);
    redisReply *r = NULL;
    int rc = market__read_one(c, realm, &b, &r);
    market__buf_free(&b);
    if (rc < 0) return rc;
    if (market__reply_realm_settings(r, out) < 0)
        rc = market__fail(c, "the settings of realm %s are unreadable", realm);
    freeReplyObject(r);
    return rc;
}

/* Sets realm's settings to *cfg (a house "": MARKET_SALE_HOUSE), at once
 * for every batch decided after. Returns MARKET_OK, or ERR_INVALID (a cut
 * or a listing fee outside 0..MARKET_FEE_BPS_MAX, a bad house id), ERR_NO_PLAYER (the house
 * is no player of the realm), ERR_NOT_REPLICATED (set on the master, not confirmed by
 * enough replicas: see market.h), ERR_STORE. */
int market_settings_set(market_conn *c, const char *realm, const market_settings *cfg) {
    if (!c || !cfg || !market_id_valid(realm) || cfg->fee_bps < 0 ||
        cfg->fee_bps > MARKET_FEE_BPS_MAX || cfg->list_fee_bps < 0 ||
        cfg->list_fee_bps > MARKET_FEE_BPS_MAX || (cfg->house[0] && !market_id_valid(cfg->house)) ||
        cfg->list_duration_s < 0 || cfg->list_duration_s > MARKET_DURATION_MAX_S)
        return MARKET_ERR_INVALID;
    const char *house = cfg->house[0] ? cfg->house : MARKET_SALE_HOUSE;
    market__realm rl;
    market__realm_init(&rl, realm);
    char k_house[MARKET__KEY_MAX], bps[24], list_bps[24], duration[24];
    market__key_user(k_house, realm, house);
    market__i64_str(bps, cfg->fee_bps);
    market__i64_str(list_bps, cfg->list_fee_bps);
    market__i64_str(duration, cfg->list_duration_s);
    if (cfg->list_duration_s > 0) { /* its listings will end: the sweepers must look here */
        int rc = market__ending_add(c, realm);
        if (rc < 0) return rc;
    }
    const char *keys[2] = {rl.settings, k_house};
    const char *args[8] = {MARKET__FIELD_FEE_BPS,  bps,      MARKET__FIELD_HOUSE,         house,
                           MARKET__FIELD_LIST_FEE, list_bps, MARKET__FIELD_LIST_DURATION, duration};
    int64_t set = 0;
    int rc = market__write_script(c, realm, set_script, 2, keys, 8, args,
                                  "setting the realm's settings", &set);
    return rc == MARKET_OK && set != 1 ? MARKET_ERR_NO_PLAYER : rc;
}
