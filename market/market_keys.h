/* market_keys.h - names and values of the market's keys (market_keys.c): a
 * realm's data and lock keys, idempotency records and their claims. Pure: it reads the
 * replies handed to it and does no I/O. */
#ifndef GM_MARKET_MARKET_KEYS_H
#define GM_MARKET_MARKET_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "market/market_impl.h"

#define MARKET__IDEM_FREE 2 /* market__idem_judge(): no outcome yet; ours to decide */
#define MARKET__IDEM_DONE 3 /* market__idem_judge(): a final outcome is stored */

/* A realm: its id and the names every operation of it shares. */
typedef struct market__realm {
    const char *id;               /* borrowed */
    char market[MARKET__KEY_MAX]; /* "market:{<realm>}" */
    char lock[MARKET__KEY_MAX];   /* "lock:market:{<realm>}" */
    char trades[MARKET__KEY_MAX]; /* "trades:{<realm>}" */
    char trade_items[MARKET__KEY_MAX]; /* "trades:{<realm>}:items": each item's latest trade */
    char trade_order[MARKET__KEY_MAX]; /* "trades:{<realm>}:order": the stream's trades' items */
    char units[MARKET__KEY_MAX];  /* "market:{<realm>}:units": the units of stack listings */
    char changes[MARKET__KEY_MAX]; /* "market:{<realm>}:changes": the listing changes' feed */
    char bids[MARKET__KEY_MAX];    /* "market:{<realm>}:bids": the auctions' feed (GET /events) */
    char building[MARKET__KEY_MAX]; /* "market:{<realm>}:building": set while seeding writes */
    char settings[MARKET__KEY_MAX]; /* "market:{<realm>}:settings": its settings (fees) */
    char orders[MARKET__KEY_MAX];   /* "market:{<realm>}:orders": the last buy order's id */
    char ends[MARKET__KEY_MAX];     /* "market:{<realm>}:ends": listings' ends (zset) */
    char sweep[MARKET__KEY_MAX];    /* "lock:sweep:{<realm>}": its sweeper's lease */
    char auctions[MARKET__KEY_MAX]; /* "market:{<realm>}:auctions": the last auction's id */
    char directs[MARKET__KEY_MAX];  /* "market:{<realm>}:directs": the last direct trade's id */
} market__realm;

void market__realm_init(market__realm *r, const char *realm);
void market__key_building(char *out, const char *realm);
void market__key_seeding(char *out, const char *realm);
#define MARKET__REALM_KINDS 15
#define MARKET__FIELD_FUNDS "funds" /* a player's hash: its funds */
#define MARKET__FIELD_NAME "name"   /* a player's hash: its display name */
#define MARKET__FIELD_FEE_BPS "fee_bps" /* a realm's settings: its sale cut (market_settings) */
#define MARKET__FIELD_HOUSE "house"     /* a realm's settings: the player its cut pays */
#define MARKET__FIELD_LIST_FEE "list_fee_bps" /* a realm's settings: a listing's fee */
#define MARKET__FIELD_LIST_DURATION "list_duration_s" /* a realm's settings: listings' length */
/* The realms whose listings may end, "market:{.ending}:realms": the tag is no realm's (no
 * realm id holds a "."), and market__route(c, MARKET__ENDING_TAG) reaches its slot. */
#define MARKET__ENDING_TAG ".ending"
#define MARKET__ENDING_KEY "market:{" MARKET__ENDING_TAG "}:realms"
#define MARKET__END_AUCTION "@" /* a realm's ends: "@<id>" is auction id's, else a listing's */
#define MARKET__FIELD_ESCROW "escrow"         /* a player's hash: funds held by its buy orders */
#define MARKET__BID_MEMBER_MAX 24             /* a book's member: an order id, zero-padded (%020) */
extern const char *const market__realm_kinds[MARKET__REALM_KINDS];

void market__key(char *out, size_t outlen, const char *kind, const char *realm, const char *id);
void market__key_user(char *out, const char *realm, const char *id);
void market__key_inventory(char *out, const char *realm, const char *id);
void market__key_stacks(char *out, const char *realm, const char *id);
void market__key_sale(char *out, const char *realm, const char *id);
void market__key_history(char *out, const char *realm, const char *item);
void market__key_book(char *out, const char *realm, const char *item);
void market__key_order(char *out, const char *realm, int64_t id);
void market__key_bids(char *out, const char *realm, const char *player);
void market__key_auction(char *out, const char *realm, int64_t id);
void market__key_auctions(char *out, const char *realm, const char *by, const char *id);
void market__key_direct(char *out, const char *realm, int64_t id);
void market__key_directs(char *out, const char *realm, const char *player);
void market__bid_member(char out[MARKET__BID_MEMBER_MAX], int64_t id);
void market__key_bought(char *out, size_t outlen, const char *sale_key);
void market__lock_key(char *out, const char *kind, const char *realm, const char *id);
void market__key_market_lock(char *out, const char *realm);
void market__trade_key(char *out, size_t outlen, const char *realm, const char *kind,
                       const char *id);
void market__idem_key(char *out, size_t outlen, const char *realm, const char *player,
                      const market_idem *idem);
int market__idem_final(int rc);
void market__idem_record(char *out, size_t outlen, const market_idem *idem, int rc, int64_t a,
                         int64_t b, int64_t c);
void market__idem_claim(char *out, size_t outlen, const market_idem *idem, const char *token);
void market__idem_claim_ttl(char *out, size_t outlen, int64_t deadline_ms);
int market__idem_judge(const redisReply *r, const market_idem *idem, const char *token, int *rc,
                       int64_t *a, int64_t *b, int64_t *c, char *trade);
int market__token_new(char out[MARKET__TOKEN_LEN + 1]);
int market__slot_tag(unsigned slot, char *out, size_t outlen);
unsigned market__realm_slot(const char *realm);

#endif /* GM_MARKET_MARKET_KEYS_H */
