/* api_impl.h - what the files of api/ share: strict JSON loading, safe strings, replies.
 * Included only by api/ and its tests. */
#ifndef GM_API_API_IMPL_H
#define GM_API_API_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "api/api.h"

#define API__WHY_MAX 256  /* room for one validation message */
#define API__ARG_MAX 256  /* a route's id segment, copied (longer ones read as "") */
#define API__QUOTE_MAX 48 /* longest user-supplied name quoted in a message, in bytes */

/* ---- JSON input ---- */

json_t *api__load(const char *buf, size_t len, const char *what, int *rc, char *why, size_t whylen);
const char *api__unknown_key(json_t *obj, const char *const *known, size_t n);
void api__quote(char *out, size_t outlen, const char *s);
void api__why(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- JSON output ---- */

json_t *api__text_new(const char *s);
void api__reply(api_response *resp, int status, json_t *body);
void api__reply_market(int rc, int64_t price, api_response *resp);
void api__error_reply(api_response *resp, int status, const char *code, const char *detail);
int api__authorized(const api_request *req, const char *realm, const char *player,
                    api_response *resp);
int api__admin(const api_request *req, api_response *resp);
size_t api__b64url_encode(const unsigned char *in, size_t n, char *out, size_t outlen);
long api__b64url_decode(const char *src, size_t n, unsigned char *out);
int api__idempotency(const api_request *req, market_idem *idem, char *fp, api_response *resp);

#endif /* GM_API_API_IMPL_H */
