/* api_auth.c - player tokens, the Authorization check, and request fingerprints.
 *
 * A token names the realm and player it speaks for and proves the server's
 * secret made it, so the server keeps no token table:
 *   "<player>.<hex HMAC-SHA256(secret, player)>"                 the default realm;
 *   "<realm>/<player>.<hex HMAC-SHA256(secret, realm "/" player)>"  any realm.
 * Ids never hold '/', so no token of one form can pass for the other, and a
 * token of one realm is no good in another. A request whose token is
 * missing, malformed or forged gets 401; a valid token of another player or
 * realm gets 403.
 */
#include "api/api.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "api/api_impl.h"

#define MAC_LEN 32

/* Writes the hex HMAC of subject (a token's "<player>" or "<realm>/<player>") into hex. */
static int mac_hex(const char *secret, const char *subject, char hex[2 * MAC_LEN + 1]) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)subject,
              strlen(subject), mac, &len) ||
        len != MAC_LEN)
        return -1;
    for (unsigned i = 0; i < len; i++) snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    return 0;
}

/* Writes the token of player of realm (NULL: the default realm) for secret
 * into out (API_TOKEN_MAX + 1 bytes is always enough); the default realm's
 * tokens have no realm part. Returns MARKET_OK, or MARKET_ERR_INVALID (bad
 * player or realm id, empty secret, out too small) or MARKET_ERR_NOMEM
 * (libcrypto failed). */
int api_token_make(const char *secret, const char *realm, const char *player, char *out,
                   size_t outlen) {
    char hex[2 * MAC_LEN + 1], subject[MARKET_REALM_MAX + 1 + MARKET_ID_MAX + 1];
    if (!realm) realm = MARKET_REALM_DEFAULT;
    if (!secret || !*secret || !market_id_valid(player) || !market_id_valid(realm) || !out)
        return MARKET_ERR_INVALID;
    if (strcmp(realm, MARKET_REALM_DEFAULT) == 0)
        snprintf(subject, sizeof subject, "%s", player);
    else
        snprintf(subject, sizeof subject, "%s/%s", realm, player);
    if (mac_hex(secret, subject, hex) < 0) return MARKET_ERR_NOMEM;
    int n = snprintf(out, outlen, "%s.%s", subject, hex);
    return n > 0 && (size_t)n < outlen ? MARKET_OK : MARKET_ERR_INVALID;
}

/* Reads token tok's subject into realm and who, and checks its MAC. Returns
 * 1 when it is one of ours. */
static int token_valid(const char *secret, const char *tok, char *realm, char *who) {
    char subject[MARKET_REALM_MAX + 1 + MARKET_ID_MAX + 1], hex[2 * MAC_LEN + 1];
    const char *dot = tok ? strchr(tok, '.') : NULL;
    size_t slen = dot ? (size_t)(dot - tok) : 0;
    if (!dot || slen == 0 || slen >= sizeof subject || strlen(dot + 1) != 2 * MAC_LEN) return 0;
    memcpy(subject, tok, slen);
    subject[slen] = '\0';
    const char *slash = strchr(subject, '/');
    if (slash) {
        size_t rlen = (size_t)(slash - subject);
        if (rlen > MARKET_REALM_MAX || strlen(slash + 1) > MARKET_ID_MAX) return 0;
        memcpy(realm, subject, rlen);
        realm[rlen] = '\0';
        strcpy(who, slash + 1);
    } else {
        if (slen > MARKET_ID_MAX) return 0;
        strcpy(realm, MARKET_REALM_DEFAULT);
        strcpy(who, subject);
    }
    return market_id_valid(realm) && market_id_valid(who) && mac_hex(secret, subject, hex) == 0 &&
           CRYPTO_memcmp(hex, dot + 1, 2 * MAC_LEN) == 0;
}

/* Writes the admin token for secret ("admin.<hex HMAC-SHA256(secret,
 * "admin")>") into out (API_ADMIN_TOKEN_MAX + 1 bytes is enough). Returns
 * MARKET_OK, or MARKET_ERR_INVALID (empty secret, out too small) or
 * MARKET_ERR_NOMEM (libcrypto failed). */
int api_admin_token_make(const char *secret, char *out, size_t outlen) {
    char hex[2 * MAC_LEN + 1];
    if (!secret || !*secret || !out) return MARKET_ERR_INVALID;
    if (mac_hex(secret, "admin", hex) < 0) return MARKET_ERR_NOMEM;
    int n = snprintf(out, outlen, "admin.%s", hex);
    return n > 0 && (size_t)n < outlen ? MARKET_OK : MARKET_ERR_INVALID;
}

/* Checks req's bearer token against the admin token of req->admin_secret.
 * Returns 1 when it is the admin's; otherwise fills resp (403
 * admin_disabled without an admin secret, 401 for a missing or wrong token,
 * player tokens included) and returns 0. */
int api__admin(const api_request *req, api_response *resp) {
    if (!req->admin_secret || !*req->admin_secret) {
        api__error_reply(resp, 403, "admin_disabled",
                         "admin routes are off: the server has no --admin-secret");
        return 0;
    }
    const char *h = req->lookup ? req->lookup(req->lookup_ud, API_ARG_HEADER, "Authorization")
                                : NULL;
    const char *tok = h && strncasecmp(h, "Bearer ", 7) == 0 ? h + 7 : NULL;
    char want[API_ADMIN_TOKEN_MAX + 1];
    if (api_admin_token_make(req->admin_secret, want, sizeof want) != MARKET_OK) {
        api__error_reply(resp, 500, "internal_error", "cannot make the admin token");
        return 0;
    }
    size_t n = strlen(want);
    if (!tok || strlen(tok) != n || CRYPTO_memcmp(tok, want, n) != 0) {
        api__error_reply(resp, 401, "unauthorized",
                         h ? "the bearer token is not the admin token"
                           : "missing 'Authorization: Bearer <admin token>'");
        resp->auth_challenge = "Bearer";
        return 0;
    }
    return 1;
}

/* Checks req's bearer token against player of realm. Returns 1 when the
 * request may act for them (or authentication is off); otherwise fills resp
 * with 401 or 403 and returns 0. */
int api__authorized(const api_request *req, const char *realm, const char *player,
                    api_response *resp) {
    if (!req->auth_secret) return 1;
    const char *h = req->lookup ? req->lookup(req->lookup_ud, API_ARG_HEADER, "Authorization")
                                : NULL;
    char who[MARKET_ID_MAX + 1], at[MARKET_REALM_MAX + 1];
    const char *tok = h && strncasecmp(h, "Bearer ", 7) == 0 ? h + 7 : NULL;
    if (!token_valid(req->auth_secret, tok, at, who)) {
        api__error_reply(resp, 401, "unauthorized",
                         h ? "the bearer token is malformed or not ours"
                           : "missing 'Authorization: Bearer <token>'");
        resp->auth_challenge = "Bearer";
        return 0;
    }
    if (strcmp(at, realm) != 0) {
        api__error_reply(resp, 403, "forbidden", "the token belongs to another realm");
        return 0;
    }
    if (strcmp(who, player) != 0) {
        api__error_reply(resp, 403, "forbidden", "the token belongs to another player");
        return 0;
    }
    return 1;
}

/* Reads req's Idempotency-Key into idem, with fp (MARKET_IDEM_FP_MAX + 1
 * bytes) holding the hex SHA-256 of method, path and body as its
 * fingerprint. Returns 1 when a key was given, 0 when none, or -1 with resp
 * filled (400 for a malformed key, 500 when hashing failed). */
int api__idempotency(const api_request *req, market_idem *idem, char *fp, api_response *resp) {
    const char *key =
        req->lookup ? req->lookup(req->lookup_ud, API_ARG_HEADER, "Idempotency-Key") : NULL;
    if (!key) return 0;
    if (!market_idem_key_valid(key)) {
        api__error_reply(resp, 400, "bad_request",
                         "header 'Idempotency-Key' must match [A-Za-z0-9_.:-]{1,128}");
        return -1;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
             EVP_DigestUpdate(ctx, req->method, strlen(req->method)) &&
             EVP_DigestUpdate(ctx, " ", 1) &&
             EVP_DigestUpdate(ctx, req->path, strlen(req->path)) &&
             EVP_DigestUpdate(ctx, "\n", 1) &&
             (req->body_len == 0 || EVP_DigestUpdate(ctx, req->body, req->body_len)) &&
             EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == MARKET_IDEM_FP_MAX / 2;
    EVP_MD_CTX_free(ctx);
    if (!ok) {
        api__error_reply(resp, 500, "internal_error", "cannot fingerprint the request");
        return -1;
    }
    for (unsigned i = 0; i < mdlen; i++) snprintf(fp + 2 * i, 3, "%02x", md[i]);
    idem->key = key;
    idem->fingerprint = fp;
    return 1;
}
