/* market_keys.h - names and values of the market's bookkeeping keys (market_keys.c):
 * lock key names, idempotency records and their claims. Pure: it reads the
 * replies handed to it and does no I/O. */
#ifndef GM_MARKET_MARKET_KEYS_H
#define GM_MARKET_MARKET_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "market/market_impl.h"

#define MARKET__IDEM_FREE 2 /* market__idem_judge(): no outcome yet; ours to decide */
#define MARKET__IDEM_DONE 3 /* market__idem_judge(): a final outcome is stored */

int market__lock_key(char *out, const char *prefix, const char *id);
void market__idem_key(char *out, size_t outlen, const char *player, const market_idem *idem);
int market__idem_final(int rc);
void market__idem_record(char *out, size_t outlen, const market_idem *idem, int rc, int64_t a,
                         int64_t b);
void market__idem_claim(char *out, size_t outlen, const market_idem *idem, const char *token);
void market__idem_claim_ttl(char *out, size_t outlen, int64_t deadline_ms);
int market__idem_judge(const redisReply *r, const market_idem *idem, const char *token, int *rc,
                       int64_t *a, int64_t *b);
int market__token_new(char out[MARKET__TOKEN_LEN + 1]);

#endif /* GM_MARKET_MARKET_KEYS_H */
