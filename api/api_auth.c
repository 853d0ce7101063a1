/* api_auth.c - player tokens (JWTs), the admin token, the Authorization check, and
 * request fingerprints.
 *
 * A player token is a JWT (RFC 7519) in compact form, header.payload.signature, each
 * part base64url without padding, signed with HS256, RS256 or ES256 (RFC 7518):
 *   header  {"alg":"HS256","typ":"JWT"[,"kid":"<key id>"]}
 *   payload {"sub":"<player>" or "<realm>/<player>","iat":N,"exp":N[,"aud":..][,"jti":..]}
 * The server keeps no token table: the signature proves a configured key made it,
 * exp ends it. Ids never hold '/', so a token of one realm is no good in another.
 * A request whose token is missing, malformed, forged or out of date gets 401 with the
 * check that failed as its detail; a valid token of another player or realm gets 403.
 *
 * DESIGN
 * The key decides the algorithm, never the token: the header's kid picks a configured
 * key (no kid: the --auth-secret, an HS256 key), and the header's alg must name that
 * key's algorithm, or the token is refused before any signature is computed. So an RS256
 * public key is never used as an HMAC secret (alg confusion), and "none" matches no key
 * (it is refused by name first, whatever its case). Signatures are checked with
 * libcrypto (HMAC compared in constant time; RSA PKCS#1 v1.5; ECDSA P-256 with the raw
 * r||s of JWS turned into DER). libjwt 1.10 (Debian 12) was not used: its jwt_decode()
 * takes the algorithm from the header and cannot choose a key by kid, so the header had
 * to be parsed here anyway, and its EINVAL does not say which check failed. Claims are
 * read only after the signature verified. The parser is strict: exactly three parts,
 * canonical base64url, JSON objects without duplicate keys.
 */
#include "api/api.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "api/api_impl.h"

#define MAC_LEN 32
#define ES256_SIG_LEN 64
#define RSA_BITS_MIN 2048

enum jwt_alg { ALG_HS256, ALG_RS256, ALG_ES256 };
static const char *const alg_names[] = {"HS256", "RS256", "ES256"};

/* One verification key. */
struct auth_key {
    char kid[API_KID_MAX + 1]; /* "" for the kid-less --auth-secret */
    enum jwt_alg alg;
    unsigned char secret[API_AUTH_SECRET_MAX]; /* HS256 */
    size_t secret_len;
    EVP_PKEY *pkey; /* RS256, ES256: a public key (owned) */
};

struct api_auth {
    struct auth_key keys[API_AUTH_KEYS_MAX]; /* chosen by kid */
    size_t n;
    struct auth_key plain; /* the --auth-secret: for tokens without a kid */
    int has_plain;
    char audience[256]; /* "": aud is not checked */
    int64_t leeway_s;
};

/* ---- base64url ---- */

/* Writes the unpadded base64url of in[0..n) into out, NUL-terminated. Returns its
 * length, or 0 when out (outlen bytes) is too small. This function can't fail otherwise. */
size_t api__b64url_encode(const unsigned char *in, size_t n, char *out, size_t outlen) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t need = n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0), o = 0;
    if (need + 1 > outlen) return 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n) v |= in[i + 2];
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        if (i + 1 < n) out[o++] = abc[v >> 6 & 63];
        if (i + 2 < n) out[o++] = abc[v & 63];
    }
    out[o] = '\0';
    return o;
}

static int b64url_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

/* Decodes the base64url src[0..n) into out (n * 3 / 4 bytes are enough). Returns the
 * decoded length, or -1 when src is not canonical unpadded base64url (a character
 * outside the alphabet, padding, a length of 4k + 1, leftover bits set). */
long api__b64url_decode(const char *src, size_t n, unsigned char *out) {
    if (n % 4 == 1) return -1;
    uint32_t acc = 0;
    int bits = 0;
    long o = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64url_value((unsigned char)src[i]);
        if (v < 0) return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return bits && acc ? -1 : o;
}

/* ---- making tokens ---- */

static int hmac_sha256(const unsigned char *key, size_t keylen, const char *msg, size_t len,
                       unsigned char mac[MAC_LEN]) {
    unsigned int maclen = 0;
    return HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, len, mac, &maclen) &&
                   maclen == MAC_LEN
               ? 0
               : -1;
}

static int kid_valid(const char *kid) {
    size_t n = kid ? strlen(kid) : 0;
    if (n == 0 || n > API_KID_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)kid[i]) && !strchr("_.-", kid[i])) return 0;
    return 1;
}

/* Writes the HS256 JWT that spec describes into out (API_TOKEN_MAX + 1 bytes is
 * always enough): header {"alg":"HS256","typ":"JWT"[,"kid"]}, payload {"sub","iat",
 * "exp"[,"aud"]}, the default realm's sub being the bare player id. Returns MARKET_OK,
 * or MARKET_ERR_INVALID (no secret or a secret longer than API_AUTH_SECRET_MAX, a bad
 * player, realm or kid, an audience with '"' or '\\' or control bytes, ttl_s outside
 * 1..API_TOKEN_TTL_MAX, iat < 0, out too small) or MARKET_ERR_NOMEM (libcrypto failed). */
int api_token_make(const api_token_spec *spec, char *out, size_t outlen) {
    char header[128 + API_KID_MAX], payload[512], aud[300] = "";
    char text[API_TOKEN_MAX + 1];
    const char *realm = spec && spec->realm ? spec->realm : MARKET_REALM_DEFAULT;
    if (!spec || !spec->secret || !*spec->secret || strlen(spec->secret) > API_AUTH_SECRET_MAX ||
        !market_id_valid(spec->player) || !market_id_valid(realm) ||
        (spec->kid && !kid_valid(spec->kid)) || spec->ttl_s < 1 ||
        spec->ttl_s > API_TOKEN_TTL_MAX || spec->iat < 0 || spec->iat > INT64_MAX / 2 || !out)
        return MARKET_ERR_INVALID;
    if (spec->audience) {
        size_t n = strlen(spec->audience);
        if (n == 0 || n > 255) return MARKET_ERR_INVALID;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)spec->audience[i] < 0x20 || spec->audience[i] == '"' ||
                spec->audience[i] == '\\' || spec->audience[i] == 0x7f)
                return MARKET_ERR_INVALID;
        snprintf(aud, sizeof aud, ",\"aud\":\"%s\"", spec->audience);
    }
    if (spec->kid)
        snprintf(header, sizeof header, "{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"%s\"}",
                 spec->kid);
    else
        snprintf(header, sizeof header, "{\"alg\":\"HS256\",\"typ\":\"JWT\"}");
    int is_default = strcmp(realm, MARKET_REALM_DEFAULT) == 0;
    snprintf(payload, sizeof payload, "{\"sub\":\"%s%s%s\",\"iat\":%lld,\"exp\":%lld%s}",
             is_default ? "" : realm, is_default ? "" : "/", spec->player, (long long)spec->iat,
             (long long)(spec->iat + spec->ttl_s), aud);
    size_t h = api__b64url_encode((const unsigned char *)header, strlen(header), text, sizeof text);
    if (!h || h + 2 >= sizeof text) return MARKET_ERR_INVALID;
    text[h++] = '.';
    size_t p = api__b64url_encode((const unsigned char *)payload, strlen(payload), text + h,
                                  sizeof text - h);
    if (!p) return MARKET_ERR_INVALID;
    size_t signed_len = h + p;
    unsigned char mac[MAC_LEN];
    if (hmac_sha256((const unsigned char *)spec->secret, strlen(spec->secret), text, signed_len,
                    mac) < 0)
        return MARKET_ERR_NOMEM;
    if (signed_len + 2 >= sizeof text) return MARKET_ERR_INVALID;
    text[signed_len] = '.';
    if (!api__b64url_encode(mac, MAC_LEN, text + signed_len + 1, sizeof text - signed_len - 1))
        return MARKET_ERR_INVALID;
    int n = snprintf(out, outlen, "%s", text);
    return n > 0 && (size_t)n < outlen ? MARKET_OK : MARKET_ERR_INVALID;
}

/* ---- keys ---- */

/* Returns a new, empty set of verification keys (leeway API_AUTH_LEEWAY_S, no
 * audience); caller frees with api_auth_free(). Returns NULL on out-of-memory. */
api_auth *api_auth_new(void) {
    api_auth *a = calloc(1, sizeof *a);
    if (a) a->leeway_s = API_AUTH_LEEWAY_S;
    return a;
}

/* Frees a and its keys. NULL is a no-op. This function can't fail. */
void api_auth_free(api_auth *a) {
    if (!a) return;
    for (size_t i = 0; i < a->n; i++)
        EVP_PKEY_free(a->keys[i].pkey);
    OPENSSL_cleanse(a, sizeof *a);
    free(a);
}

static void set_why(char *why, size_t whylen, const char *fmt, const char *arg) {
    if (why && whylen) snprintf(why, whylen, fmt, arg);
}

/* Sets the HS256 secret that verifies tokens without a kid (the --auth-secret).
 * Returns API_AUTH_OK, or API_AUTH_ERR_KEY with a sentence in why (empty, or longer
 * than API_AUTH_SECRET_MAX bytes). */
int api_auth_set_secret(api_auth *a, const char *secret, char *why, size_t whylen) {
    size_t n = secret ? strlen(secret) : 0;
    if (!a || n == 0 || n > API_AUTH_SECRET_MAX) {
        set_why(why, whylen, "the secret must be 1..255 bytes%s", "");
        return API_AUTH_ERR_KEY;
    }
    memcpy(a->plain.secret, secret, n);
    a->plain.secret_len = n;
    a->plain.alg = ALG_HS256;
    a->has_plain = 1;
    return API_AUTH_OK;
}

static int alg_parse(const char *s, enum jwt_alg *alg) {
    for (int i = 0; i < 3; i++)
        if (strcasecmp(s, alg_names[i]) == 0) {
            *alg = (enum jwt_alg)i;
            return 0;
        }
    return -1;
}

/* Checks that pkey fits alg: RSA of RSA_BITS_MIN bits or more, or EC on P-256. */
static int pkey_fits(EVP_PKEY *pkey, enum jwt_alg alg) {
    if (alg == ALG_RS256)
        return EVP_PKEY_is_a(pkey, "RSA") && EVP_PKEY_get_bits(pkey) >= RSA_BITS_MIN;
    char group[64];
    size_t glen = 0;
    return alg == ALG_ES256 && EVP_PKEY_is_a(pkey, "EC") &&
           EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                          &glen) == 1 &&
           strcmp(group, "prime256v1") == 0;
}

/* Adds key k (its kid already checked) unless its kid is taken. */
static int key_add(api_auth *a, const struct auth_key *k, char *why, size_t whylen) {
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->keys[i].kid, k->kid) == 0) {
            set_why(why, whylen, "key id '%s' given twice", k->kid);
            return API_AUTH_ERR_KEY;
        }
    if (a->n == API_AUTH_KEYS_MAX) {
        set_why(why, whylen, "more than %s keys", "16");
        return API_AUTH_ERR_KEY;
    }
    a->keys[a->n++] = *k;
    return API_AUTH_OK;
}

/* Adds the public key bio holds (PEM) under kid for alg. */
static int add_pem_bio(api_auth *a, const char *kid, enum jwt_alg alg, BIO *bio, const char *from,
                       char *why, size_t whylen) {
    struct auth_key k = {.alg = alg};
    api__copy(k.kid, sizeof k.kid, kid);
    k.pkey = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
    ERR_clear_error();
    if (!k.pkey) {
        set_why(why, whylen, "%s holds no PEM public key", from);
        return API_AUTH_ERR_KEY;
    }
    if (!pkey_fits(k.pkey, alg)) {
        EVP_PKEY_free(k.pkey);
        set_why(why, whylen,
                alg == ALG_RS256 ? "%s: rs256 wants an RSA public key of 2048 bits or more"
                                 : "%s: es256 wants an EC public key on P-256",
                from);
        return API_AUTH_ERR_KEY;
    }
    int rc = key_add(a, &k, why, whylen);
    if (rc < 0) EVP_PKEY_free(k.pkey);
    return rc;
}

/* Adds the PEM public key pem[0..len) as key kid of alg ("rs256" or "es256", any case).
 * Returns API_AUTH_OK, or API_AUTH_ERR_KEY with a sentence in why (a bad kid or alg, no
 * public key, an RSA key under 2048 bits, an EC key not on P-256, a kid given twice,
 * too many keys). */
int api_auth_add_pem(api_auth *a, const char *kid, const char *alg, const char *pem, size_t len,
                     char *why, size_t whylen) {
    enum jwt_alg al;
    if (!a || !kid_valid(kid) || !alg || alg_parse(alg, &al) < 0 || al == ALG_HS256 || !pem ||
        len > INT32_MAX) {
        set_why(why, whylen,
                "bad key id or algorithm (want [A-Za-z0-9_.-]{1,64}, rs256 or es256)%s", "");
        return API_AUTH_ERR_KEY;
    }
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    int rc = add_pem_bio(a, kid, al, bio, "the PEM text", why, whylen);
    BIO_free(bio);
    return rc;
}

/* Adds a verification key from spec: "KID:hs256:SECRET", "KID:rs256:/path/pub.pem" or
 * "KID:es256:/path/pub.pem" (the algorithm in any case; SECRET may hold ':'). Reads the
 * PEM file now. Returns API_AUTH_OK, or API_AUTH_ERR_KEY with a sentence in why that
 * never holds the secret (a malformed spec, an unreadable file, the refusals of
 * api_auth_add_pem()). */
int api_auth_add_key(api_auth *a, const char *spec, char *why, size_t whylen) {
    const char *c1 = spec ? strchr(spec, ':') : NULL, *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    char kid[API_KID_MAX + 2], alg[8];
    enum jwt_alg al;
    size_t klen = c1 ? (size_t)(c1 - spec) : 0, alen = c2 ? (size_t)(c2 - c1 - 1) : 0;
    if (!a || !c2 || klen == 0 || klen > API_KID_MAX || alen == 0 || alen >= sizeof alg || !c2[1]) {
        set_why(why, whylen,
                "bad key spec (want KID:hs256:SECRET, KID:rs256:PEM-FILE or "
                "KID:es256:PEM-FILE)%s",
                "");
        return API_AUTH_ERR_KEY;
    }
    memcpy(kid, spec, klen);
    kid[klen] = '\0';
    memcpy(alg, c1 + 1, alen);
    alg[alen] = '\0';
    if (!kid_valid(kid) || alg_parse(alg, &al) < 0) {
        set_why(why, whylen,
                "bad key spec: the key id must match [A-Za-z0-9_.-]{1,64} and the "
                "algorithm be hs256, rs256 or es256%s",
                "");
        return API_AUTH_ERR_KEY;
    }
    const char *rest = c2 + 1;
    if (al == ALG_HS256) {
        struct auth_key k = {.alg = ALG_HS256};
        size_t n = strlen(rest);
        if (n > API_AUTH_SECRET_MAX) {
            set_why(why, whylen, "key %s: the secret must be 1..255 bytes", kid);
            return API_AUTH_ERR_KEY;
        }
        memcpy(k.kid, kid, klen + 1); /* klen <= API_KID_MAX */
        memcpy(k.secret, rest, n);
        k.secret_len = n;
        int rc = key_add(a, &k, why, whylen);
        OPENSSL_cleanse(&k, sizeof k);
        return rc;
    }
    BIO *bio = BIO_new_file(rest, "r");
    if (!bio) {
        ERR_clear_error();
        set_why(why, whylen, "cannot read the key file %s", rest);
        return API_AUTH_ERR_KEY;
    }
    int rc = add_pem_bio(a, kid, al, bio, rest, why, whylen);
    BIO_free(bio);
    return rc;
}

/* Makes tokens need aud equal to audience (a string, or an array holding it); NULL or
 * "" checks no aud. Returns API_AUTH_OK, or API_AUTH_ERR_KEY when it is longer than
 * 255 bytes. */
int api_auth_set_audience(api_auth *a, const char *audience) {
    if (!a || (audience && strlen(audience) >= sizeof a->audience)) return API_AUTH_ERR_KEY;
    api__copy(a->audience, sizeof a->audience, audience ? audience : "");
    return API_AUTH_OK;
}

/* Sets the clock skew allowed on exp, iat and nbf. This function can't fail. */
void api_auth_set_leeway(api_auth *a, unsigned leeway_s) {
    if (a) a->leeway_s = leeway_s;
}

/* ---- verifying tokens ---- */

/* Returns the detail sentence of an api_auth_err code. This function can't fail. */
const char *api_auth_strerror(int err) {
    switch (err) {
#define API_AUTH_ERR_STR(name, val, msg)                                                           \
    case API_AUTH_##name: return msg;
        API_AUTH_ERRNO_MAP(API_AUTH_ERR_STR)
#undef API_AUTH_ERR_STR
    }
    return "unknown error";
}

/* Reads base64url src[0..n) as a JSON object (no duplicate keys): a new reference, or
 * NULL. buf has room for n * 3 / 4 bytes. */
static json_t *part_load(const char *src, size_t n, unsigned char *buf) {
    long len = api__b64url_decode(src, n, buf);
    if (len <= 0) return NULL;
    json_error_t e;
    json_t *j = json_loadb((const char *)buf, (size_t)len, JSON_REJECT_DUPLICATES, &e);
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* Reads a NumericDate (a JSON number, seconds; a fraction is dropped) into *t. */
static int numeric_date(const json_t *j, int64_t *t) {
    if (json_is_integer(j)) {
        json_int_t v = json_integer_value(j);
        if (v < -INT64_C(1000000000000) || v > INT64_C(1000000000000)) return -1;
        *t = (int64_t)v;
        return 0;
    }
    if (json_is_real(j)) {
        double v = json_real_value(j);
        if (!(v >= -1e12 && v <= 1e12)) return -1;
        *t = (int64_t)v;
        return 0;
    }
    return -1;
}

/* Checks sig[0..siglen) over msg[0..len) with key k. Returns API_AUTH_OK,
 * API_AUTH_ERR_SIGNATURE or API_AUTH_ERR_NOMEM. */
static int signature_check(const struct auth_key *k, const char *msg, size_t len,
                           const unsigned char *sig, size_t siglen) {
    if (k->alg == ALG_HS256) {
        unsigned char mac[MAC_LEN];
        if (hmac_sha256(k->secret, k->secret_len, msg, len, mac) < 0) return API_AUTH_ERR_NOMEM;
        return siglen == MAC_LEN && CRYPTO_memcmp(mac, sig, MAC_LEN) == 0 ? API_AUTH_OK
                                                                          : API_AUTH_ERR_SIGNATURE;
    }
    unsigned char *der = NULL;
    int derlen = 0, rc = API_AUTH_ERR_NOMEM;
    if (k->alg == ALG_ES256) { /* JWS: r||s, 32 bytes each; libcrypto wants DER */
        if (siglen != ES256_SIG_LEN) return API_AUTH_ERR_SIGNATURE;
        ECDSA_SIG *es = ECDSA_SIG_new();
        BIGNUM *r = BN_bin2bn(sig, ES256_SIG_LEN / 2, NULL);
        BIGNUM *s = BN_bin2bn(sig + ES256_SIG_LEN / 2, ES256_SIG_LEN / 2, NULL);
        if (!es || !r || !s || ECDSA_SIG_set0(es, r, s) != 1) {
            BN_free(r);
            BN_free(s);
            ECDSA_SIG_free(es);
            return API_AUTH_ERR_NOMEM;
        }
        derlen = i2d_ECDSA_SIG(es, &der);
        ECDSA_SIG_free(es);
        if (derlen <= 0) return API_AUTH_ERR_NOMEM;
        sig = der;
        siglen = (size_t)derlen;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, k->pkey) == 1)
        rc = EVP_DigestVerify(ctx, sig, siglen, (const unsigned char *)msg, len) == 1
                 ? API_AUTH_OK
                 : API_AUTH_ERR_SIGNATURE;
    EVP_MD_CTX_free(ctx);
    OPENSSL_free(der);
    ERR_clear_error();
    return rc;
}

/* Checks the claims of a token whose signature verified, at now_s. */
static int claims_check(const api_auth *a, json_t *claims, int64_t now_s, char *realm,
                        char *player) {
    int64_t exp, t;
    json_t *v = json_object_get(claims, "exp");
    if (!v) return API_AUTH_ERR_NO_EXP;
    if (numeric_date(v, &exp) < 0) return API_AUTH_ERR_MALFORMED;
    if (now_s >= exp + a->leeway_s) return API_AUTH_ERR_EXPIRED;
    if ((v = json_object_get(claims, "iat"))) {
        if (numeric_date(v, &t) < 0) return API_AUTH_ERR_MALFORMED;
        if (t > now_s + a->leeway_s) return API_AUTH_ERR_IAT_FUTURE;
    }
    if ((v = json_object_get(claims, "nbf"))) {
        if (numeric_date(v, &t) < 0) return API_AUTH_ERR_MALFORMED;
        if (t > now_s + a->leeway_s) return API_AUTH_ERR_NOT_YET;
    }
    if ((v = json_object_get(claims, "jti")) && !json_is_string(v)) return API_AUTH_ERR_MALFORMED;
    if (a->audience[0]) {
        int ok = 0;
        v = json_object_get(claims, "aud");
        if (json_is_string(v)) {
            ok = strcmp(json_string_value(v), a->audience) == 0;
        } else if (json_is_array(v)) {
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e) {
                ok |= json_is_string(e) && strcmp(json_string_value(e), a->audience) == 0;
            }
        }
        if (!ok) return API_AUTH_ERR_AUDIENCE;
    }
    const char *sub = json_string_value(json_object_get(claims, "sub"));
    if (!sub) return API_AUTH_ERR_SUB;
    const char *slash = strchr(sub, '/');
    size_t rlen = slash ? (size_t)(slash - sub) : 0;
    const char *who = slash ? slash + 1 : sub;
    if (rlen > MARKET_REALM_MAX || strlen(who) > MARKET_ID_MAX) return API_AUTH_ERR_SUB;
    if (slash) {
        memcpy(realm, sub, rlen);
        realm[rlen] = '\0';
    } else {
        strcpy(realm, MARKET_REALM_DEFAULT);
    }
    strcpy(player, who);
    return market_id_valid(realm) && market_id_valid(player) ? API_AUTH_OK : API_AUTH_ERR_SUB;
}

/* Verifies token (a compact JWT) with a's keys at now_s (Unix seconds) and writes the
 * realm (MARKET_REALM_MAX + 1 bytes) and player (MARKET_ID_MAX + 1 bytes) of its sub.
 * Checks, in order: three canonical base64url parts (the last may be empty), a JSON
 * header with a string alg and a JSON object payload (else API_AUTH_ERR_MALFORMED);
 * alg "none" in any case
 * (_ALG_NONE); the key: kid's (_UNKNOWN_KID), or without a kid the --auth-secret
 * (_NO_KID when there is none); the header's alg is that key's (_WRONG_ALG); the
 * signature (_SIGNATURE); exp present (_NO_EXP) and not past, leeway allowed
 * (_EXPIRED); iat and nbf, when present, not ahead of now beyond the leeway
 * (_IAT_FUTURE, _NOT_YET); the audience when one is set (_AUDIENCE); sub is
 * "<player>" or "<realm>/<player>" of valid ids (_SUB). Returns API_AUTH_OK or the
 * first check that failed; API_AUTH_ERR_NOMEM when libcrypto or jansson failed. Reads
 * a, which other threads may read at the same time. */
int api_auth_verify(const api_auth *a, const char *token, int64_t now_s, char *realm,
                    char *player) {
    unsigned char hbuf[API_TOKEN_MAX], pbuf[API_TOKEN_MAX], sbuf[API_TOKEN_MAX];
    size_t n = token ? strnlen(token, API_TOKEN_MAX + 1) : 0;
    if (!a || n == 0 || n > API_TOKEN_MAX) return API_AUTH_ERR_MALFORMED;
    const char *d1 = strchr(token, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (!d1 || !d2 || strchr(d2 + 1, '.') || d1 == token || d2 == d1 + 1)
        return API_AUTH_ERR_MALFORMED; /* an empty signature is checked below, after "none" */
    long siglen = api__b64url_decode(d2 + 1, strlen(d2 + 1), sbuf);
    json_t *header = part_load(token, (size_t)(d1 - token), hbuf);
    json_t *claims = part_load(d1 + 1, (size_t)(d2 - d1 - 1), pbuf);
    int rc = API_AUTH_ERR_MALFORMED;
    const char *alg = json_string_value(json_object_get(header, "alg"));
    json_t *kidj = json_object_get(header, "kid");
    if (siglen < 0 || !header || !claims || !alg || (kidj && !json_is_string(kidj)) ||
        json_object_get(header, "crit"))
        goto out;
    rc = API_AUTH_ERR_ALG_NONE;
    if (strcasecmp(alg, "none") == 0) goto out;
    const struct auth_key *k = NULL;
    if (kidj) {
        for (size_t i = 0; i < a->n && !k; i++)
            if (strcmp(a->keys[i].kid, json_string_value(kidj)) == 0) k = &a->keys[i];
        rc = API_AUTH_ERR_UNKNOWN_KID;
    } else {
        k = a->has_plain ? &a->plain : NULL;
        rc = API_AUTH_ERR_NO_KID;
    }
    if (!k) goto out;
    rc = API_AUTH_ERR_WRONG_ALG; /* the key decides; the header may only agree */
    if (strcmp(alg, alg_names[k->alg]) != 0) goto out;
    rc = siglen == 0 ? API_AUTH_ERR_SIGNATURE
                     : signature_check(k, token, (size_t)(d2 - token), sbuf, (size_t)siglen);
    if (rc == API_AUTH_OK) rc = claims_check(a, claims, now_s, realm, player);
out:
    json_decref(header);
    json_decref(claims);
    return rc;
}

/* ---- the admin token ---- */

/* Writes the hex HMAC-SHA256 of subject under secret into hex. */
static int mac_hex(const char *secret, const char *subject, char hex[2 * MAC_LEN + 1]) {
    unsigned char mac[MAC_LEN];
    if (hmac_sha256((const unsigned char *)secret, strlen(secret), subject, strlen(subject), mac) <
        0)
        return -1;
    for (unsigned i = 0; i < MAC_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    return 0;
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

/* The bearer token of req's Authorization header, or NULL; *h gets the
 * header, or NULL when there is none. */
static const char *bearer(const api_request *req, const char **h) {
    *h = req->lookup ? req->lookup(req->lookup_ud, API_ARG_HEADER, "Authorization") : NULL;
    return *h && strncasecmp(*h, "Bearer ", 7) == 0 ? *h + 7 : NULL;
}

/* Whether tok is the admin token of req->admin_secret (compared in constant
 * time): 1 yes, 0 no (or no admin secret), -1 when the token cannot be made. */
static int admin_token_is(const api_request *req, const char *tok) {
    if (!req->admin_secret || !*req->admin_secret || !tok) return 0;
    char want[API_ADMIN_TOKEN_MAX + 1];
    if (api_admin_token_make(req->admin_secret, want, sizeof want) != MARKET_OK) return -1;
    size_t n = strlen(want);
    return strlen(tok) == n && CRYPTO_memcmp(tok, want, n) == 0;
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
    const char *h, *tok = bearer(req, &h);
    int is = admin_token_is(req, tok);
    if (is < 0) {
        api__error_reply(resp, 500, "internal_error", "cannot make the admin token");
        return 0;
    }
    if (!is) {
        api__error_reply(resp, 401, "unauthorized",
                         h ? "the bearer token is not the admin token"
                           : "missing 'Authorization: Bearer <admin token>'");
        resp->auth_challenge = "Bearer";
        return 0;
    }
    return 1;
}

/* ---- the Authorization check ---- */

/* Verifies tok (from header h; either may be NULL) as a player's token of
 * realm with req->auth, writing the player into who (MARKET_ID_MAX + 1
 * bytes). Returns 1, or 0 with resp filled: 401 naming the check that
 * failed, 403 for a token of another realm, 500 when verifying ran out of
 * memory. */
static int player_token(const api_request *req, const char *h, const char *tok, const char *realm,
                        char *who, api_response *resp) {
    char at[MARKET_REALM_MAX + 1];
    int rc = tok ? api_auth_verify(req->auth, tok, (int64_t)time(NULL), at, who)
                 : API_AUTH_ERR_MALFORMED;
    if (rc == API_AUTH_ERR_NOMEM) {
        api__error_reply(resp, 500, "internal_error", "out of memory");
        return 0;
    }
    if (rc < 0) {
        api__error_reply(resp, 401, "unauthorized",
                         !h     ? "missing 'Authorization: Bearer <token>'"
                         : !tok ? "the Authorization header is not 'Bearer <token>'"
                                : api_auth_strerror(rc));
        resp->auth_challenge = "Bearer";
        return 0;
    }
    if (strcmp(at, realm) != 0) {
        api__error_reply(resp, 403, "forbidden", "the token belongs to another realm");
        return 0;
    }
    return 1;
}

/* Checks req's bearer token (a JWT, verified with req->auth at the current time)
 * against player of realm. Returns 1 when the request may act for them (or
 * authentication is off); otherwise fills resp (401 naming the check that failed,
 * 403 for a valid token of another player or realm, 500 when verifying ran out of
 * memory) and returns 0. */
int api__authorized(const api_request *req, const char *realm, const char *player,
                    api_response *resp) {
    if (!req->auth) return 1;
    const char *h, *tok = bearer(req, &h);
    char who[MARKET_ID_MAX + 1];
    if (!player_token(req, h, tok, realm, who, resp)) return 0;
    if (strcmp(who, player) != 0) {
        api__error_reply(resp, 403, "forbidden", "the token belongs to another player");
        return 0;
    }
    return 1;
}

/* Tells who reads realm's trades from req's bearer token: the admin (the
 * admin token), a player (their verified token; only when authentication is
 * on), or anyone (no token; or, authentication off, a token that is not the
 * admin's). Returns 1 with *rd filled, or 0 with resp filled for a token
 * that is neither the admin's nor a valid player token of realm (401, 403,
 * 500 as api__authorized()). */
int api__reader_get(const api_request *req, const char *realm, api__reader *rd,
                    api_response *resp) {
    memset(rd, 0, sizeof *rd);
    const char *h, *tok = bearer(req, &h);
    if (!h) return 1;
    int is = admin_token_is(req, tok);
    if (is < 0) {
        api__error_reply(resp, 500, "internal_error", "cannot make the admin token");
        return 0;
    }
    rd->admin = is;
    if (is || !req->auth) return 1;
    return player_token(req, h, tok, realm, rd->player, resp);
}

/* Whether reader rd of req sees the buyer and seller of trade t: the
 * server makes them public, or rd is the admin or one of the two. */
int api__reader_sees_parties(const api_request *req, const api__reader *rd, const market_trade *t) {
    return req->trade_parties_public || rd->admin ||
           (rd->player[0] &&
            (strcmp(rd->player, t->buyer) == 0 || strcmp(rd->player, t->seller) == 0));
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
             EVP_DigestUpdate(ctx, " ", 1) && EVP_DigestUpdate(ctx, req->path, strlen(req->path)) &&
             EVP_DigestUpdate(ctx, "\n", 1) &&
             (req->body_len == 0 || EVP_DigestUpdate(ctx, req->body, req->body_len)) &&
             EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == MARKET_IDEM_FP_MAX / 2;
    EVP_MD_CTX_free(ctx);
    if (!ok) {
        api__error_reply(resp, 500, "internal_error", "cannot fingerprint the request");
        return -1;
    }
    for (unsigned i = 0; i < mdlen; i++)
        snprintf(fp + 2 * i, 3, "%02x", md[i]);
    idem->key = key;
    idem->fingerprint = fp;
    return 1;
}

/* ---- what every deferrable write shares ---- */

/* Notes realm for the sweepers before a write that makes an end is queued
 * (market_ending_note()). Returns 1, or 0 with the answer in resp (503: the store). */
int api__ending_noted(market_conn *conn, const char *realm, api_response *resp) {
    if (api__conn_missing(conn, resp)) return 0;
    int rc = market_ending_note(conn, realm);
    if (rc == MARKET_OK) return 1;
    api__reply_market(rc, 0, resp);
    return 0;
}

/* Starts d for a request of realm by player: d's order of type, its realm
 * and player copied into d (both valid ids: they fit) and, with keyed, its
 * Idempotency-Key, when given, copied with its fingerprint (without, the
 * header is not read: the route takes none). d->route is kept. Returns 1,
 * or 0 when resp holds the answer (a bad key). */
int api__deferred_init(api_deferred *d, enum market_order_type type, const api_request *req,
                       const char *realm, const char *player, int keyed, api_response *resp) {
    int has_key = keyed ? api__idempotency(req, &d->idem, d->fp, resp) : 0;
    if (has_key < 0) return 0; /* resp holds the error */
    api__copy(d->realm, sizeof d->realm, realm);
    api__copy(d->player, sizeof d->player, player);
    if (has_key) { /* checked by api__idempotency(): it fits */
        api__copy(d->idem_key, sizeof d->idem_key, d->idem.key);
        d->idem.key = d->idem_key;
        d->idem.fingerprint = d->fp;
    }
    d->order = (market_order){
        .type = type, .realm = d->realm, .player = d->player, .idem = has_key ? &d->idem : NULL};
    return 1;
}

/* Parses req's body by spec[0..n) into v (borrowing from the body
 * returned, which the caller json_decref()s) and starts d, an order of type
 * by the player its first field names, who must be authorized (keyed: with
 * its Idempotency-Key, as api__deferred_init()). Returns the body, or NULL when
 * resp holds the answer. */
json_t *api__order_begin(const api_request *req, const char *realm, const api__field_spec *spec,
                         size_t n, api__field_value *v, enum market_order_type type, int keyed,
                         api_response *resp, api_deferred *d) {
    json_t *root = api__body_parse(req, spec, n, v, resp);
    if (!root) return NULL;
    api__copy(resp->player, sizeof resp->player, v[0].id);
    if (api__authorized(req, realm, v[0].id, resp) &&
        api__deferred_init(d, type, req, realm, v[0].id, keyed, resp))
        return root;
    json_decref(root);
    return NULL;
}
