/* test_api_auth.c - player tokens (JWTs) and the Authorization check of api/ (no Redis).
 *
 * api_auth_verify() runs over one table of tokens at a fixed clock (NOW): good ones of
 * every algorithm and realm, the leeway's edges, forged signatures, alg none, alg
 * confusion, unknown kids, audiences and malformed text. The RS256 and ES256 keys are
 * made at run time with libcrypto; the tokens are signed here, apart from the code
 * under test. Then api_handle() shows the 401 details and the 403s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "tests/helpers/cmocka_all.h"

#include "api/api.h"
#include "api/api_impl.h"
#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"

#define NOW 1700000000LL
#define SECRET "s3cret"
#define ROT_SECRET "rot4te"

/* ---- keys and signing, with libcrypto (test side) ---- */

static EVP_PKEY *rsa_key, *rsa_other, *ec_key, *ec_other;
static char rsa_pem[4096], ec_pem[1024];

static void pem_of(EVP_PKEY *k, char *out, size_t outlen) {
    BIO *b = BIO_new(BIO_s_mem());
    assert_non_null(b);
    assert_int_equal(PEM_write_bio_PUBKEY(b, k), 1);
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    assert_true(n > 0 && (size_t)n < outlen);
    memcpy(out, data, (size_t)n);
    out[n] = '\0';
    BIO_free(b);
}

static int keys_setup(void **state) {
    (void)state;
    rsa_key = EVP_RSA_gen(2048);
    rsa_other = EVP_RSA_gen(2048);
    ec_key = EVP_EC_gen("P-256");
    ec_other = EVP_EC_gen("P-256");
    if (!rsa_key || !rsa_other || !ec_key || !ec_other) return -1;
    pem_of(rsa_key, rsa_pem, sizeof rsa_pem);
    pem_of(ec_key, ec_pem, sizeof ec_pem);
    return 0;
}

static int keys_teardown(void **state) {
    (void)state;
    EVP_PKEY_free(rsa_key);
    EVP_PKEY_free(rsa_other);
    EVP_PKEY_free(ec_key);
    EVP_PKEY_free(ec_other);
    return 0;
}

enum signer {
    SIG_NONE,
    SIG_HS,
    SIG_HS_ROT,
    SIG_HS_WRONG,
    SIG_HS_PEM,
    SIG_RS,
    SIG_RS_OTHER,
    SIG_ES,
    SIG_ES_OTHER
};

/* Signs msg[0..len) as signer does; writes the raw signature into sig, returns its length. */
static size_t sign(enum signer how, const char *msg, size_t len, unsigned char *sig) {
    const char *secret = how == SIG_HS       ? SECRET
                         : how == SIG_HS_ROT ? ROT_SECRET
                         : how == SIG_HS_PEM
                             ? rsa_pem /* alg confusion: the public key as a secret */
                             : "not-the-secret";
    if (how == SIG_NONE) return 0;
    if (how <= SIG_HS_PEM) {
        unsigned int n = 0;
        assert_non_null(HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)msg,
                             len, sig, &n));
        return n;
    }
    EVP_PKEY *k = how == SIG_RS         ? rsa_key
                  : how == SIG_RS_OTHER ? rsa_other
                  : how == SIG_ES       ? ec_key
                                        : ec_other;
    unsigned char der[600];
    size_t dlen = sizeof der;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    assert_non_null(ctx);
    assert_int_equal(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k), 1);
    assert_int_equal(EVP_DigestSign(ctx, der, &dlen, (const unsigned char *)msg, len), 1);
    EVP_MD_CTX_free(ctx);
    if (how == SIG_RS || how == SIG_RS_OTHER) {
        memcpy(sig, der, dlen);
        return dlen;
    }
    const unsigned char *p = der; /* ES256: DER to JWS's r||s */
    ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)dlen);
    assert_non_null(es);
    assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(es), sig, 32), 32);
    assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(es), sig + 32, 32), 32);
    ECDSA_SIG_free(es);
    return 64;
}

/* Writes the compact JWT of header and payload (JSON text) signed by how into tok. */
static void mint(const char *header, const char *payload, enum signer how, char *tok,
                 size_t toklen) {
    size_t h = api__b64url_encode((const unsigned char *)header, strlen(header), tok, toklen);
    assert_true(h > 0);
    tok[h++] = '.';
    size_t p =
        api__b64url_encode((const unsigned char *)payload, strlen(payload), tok + h, toklen - h);
    assert_true(p > 0);
    unsigned char sig[600];
    size_t slen = sign(how, tok, h + p, sig);
    tok[h + p] = '.';
    tok[h + p + 1] = '\0';
    if (slen) assert_true(api__b64url_encode(sig, slen, tok + h + p + 1, toklen - h - p - 1) > 0);
}

/* The keys every case is checked with: the --auth-secret and three kids. */
static api_auth *auth_new(int with_secret) {
    char why[256] = "";
    api_auth *a = api_auth_new();
    assert_non_null(a);
    if (with_secret) assert_int_equal(api_auth_set_secret(a, SECRET, why, sizeof why), API_AUTH_OK);
    assert_int_equal(api_auth_add_key(a, "k-hs:hs256:" ROT_SECRET, why, sizeof why), API_AUTH_OK);
    assert_int_equal(
        api_auth_add_pem(a, "k-rs", "rs256", rsa_pem, strlen(rsa_pem), why, sizeof why),
        API_AUTH_OK);
    assert_int_equal(api_auth_add_pem(a, "k-es", "ES256", ec_pem, strlen(ec_pem), why, sizeof why),
                     API_AUTH_OK);
    return a;
}

/* ---- api_auth_verify over a table ---- */

#define HS "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"
#define GOOD "{\"sub\":\"B\",\"iat\":1700000000,\"exp\":1700003600}"

static const struct vcase {
    const char *name;
    const char *header, *payload; /* JSON text; or raw, the whole token */
    enum signer how;
    const char *raw;
    int no_secret;        /* verify without the --auth-secret (kid-less tokens) */
    const char *audience; /* the server's --auth-audience, or NULL */
    int want;
    const char *realm, *player; /* on API_AUTH_OK */
} vcases[] = {
    {"good hs256, no kid", HS, GOOD, SIG_HS, NULL, 0, NULL, API_AUTH_OK, "main", "B"},
    {"good, another realm", HS, "{\"sub\":\"eu-1/B\",\"iat\":1700000000,\"exp\":1700003600}",
     SIG_HS, NULL, 0, NULL, API_AUTH_OK, "eu-1", "B"},
    {"good hs256 by kid", "{\"alg\":\"HS256\",\"kid\":\"k-hs\"}", GOOD, SIG_HS_ROT, NULL, 0, NULL,
     API_AUTH_OK, "main", "B"},
    {"good rs256", "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"k-rs\"}", GOOD, SIG_RS, NULL, 0,
     NULL, API_AUTH_OK, "main", "B"},
    {"good es256", "{\"alg\":\"ES256\",\"kid\":\"k-es\"}", GOOD, SIG_ES, NULL, 0, NULL, API_AUTH_OK,
     "main", "B"},
    {"good, jti and fractional dates", HS,
     "{\"sub\":\"B\",\"iat\":1700000000.5,\"exp\":1700003600.9,\"jti\":\"abc\"}", SIG_HS, NULL, 0,
     NULL, API_AUTH_OK, "main", "B"},
    /* exp and the leeway (60 s): expired from exp + 60 on */
    {"expired", HS, "{\"sub\":\"B\",\"exp\":1699990000}", SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_EXPIRED},
    {"exp + leeway == now: expired", HS, "{\"sub\":\"B\",\"exp\":1699999940}", SIG_HS, NULL, 0,
     NULL, API_AUTH_ERR_EXPIRED},
    {"exp + leeway == now + 1: good", HS, "{\"sub\":\"B\",\"exp\":1699999941}", SIG_HS, NULL, 0,
     NULL, API_AUTH_OK, "main", "B"},
    {"no exp", HS, "{\"sub\":\"B\",\"iat\":1700000000}", SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_NO_EXP},
    {"exp not a number", HS, "{\"sub\":\"B\",\"exp\":\"tomorrow\"}", SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_MALFORMED},
    /* iat and nbf ahead of now: refused beyond the leeway */
    {"iat in the future", HS, "{\"sub\":\"B\",\"iat\":1700000061,\"exp\":1700003600}", SIG_HS, NULL,
     0, NULL, API_AUTH_ERR_IAT_FUTURE},
    {"iat at now + leeway: good", HS, "{\"sub\":\"B\",\"iat\":1700000060,\"exp\":1700003600}",
     SIG_HS, NULL, 0, NULL, API_AUTH_OK, "main", "B"},
    {"nbf ahead", HS, "{\"sub\":\"B\",\"nbf\":1700000061,\"exp\":1700003600}", SIG_HS, NULL, 0,
     NULL, API_AUTH_ERR_NOT_YET},
    {"nbf at now + leeway: good", HS, "{\"sub\":\"B\",\"nbf\":1700000060,\"exp\":1700003600}",
     SIG_HS, NULL, 0, NULL, API_AUTH_OK, "main", "B"},
    /* signatures */
    {"forged hs256", HS, GOOD, SIG_HS_WRONG, NULL, 0, NULL, API_AUTH_ERR_SIGNATURE},
    {"rs256 of another key", "{\"alg\":\"RS256\",\"kid\":\"k-rs\"}", GOOD, SIG_RS_OTHER, NULL, 0,
     NULL, API_AUTH_ERR_SIGNATURE},
    {"es256 of another key", "{\"alg\":\"ES256\",\"kid\":\"k-es\"}", GOOD, SIG_ES_OTHER, NULL, 0,
     NULL, API_AUTH_ERR_SIGNATURE},
    {"kid of another key's secret", "{\"alg\":\"HS256\",\"kid\":\"k-hs\"}", GOOD, SIG_HS, NULL, 0,
     NULL, API_AUTH_ERR_SIGNATURE},
    {"no signature", HS, GOOD, SIG_NONE, NULL, 0, NULL, API_AUTH_ERR_SIGNATURE},
    /* alg none, in any case, signed or not */
    {"alg none", "{\"alg\":\"none\",\"typ\":\"JWT\"}", GOOD, SIG_NONE, NULL, 0, NULL,
     API_AUTH_ERR_ALG_NONE},
    {"alg None with a kid", "{\"alg\":\"None\",\"kid\":\"k-hs\"}", GOOD, SIG_NONE, NULL, 0, NULL,
     API_AUTH_ERR_ALG_NONE},
    {"alg NONE signed", "{\"alg\":\"NONE\"}", GOOD, SIG_HS, NULL, 0, NULL, API_AUTH_ERR_ALG_NONE},
    /* the key decides the algorithm */
    {"hs256 against the rs256 kid, the PEM as secret", "{\"alg\":\"HS256\",\"kid\":\"k-rs\"}", GOOD,
     SIG_HS_PEM, NULL, 0, NULL, API_AUTH_ERR_WRONG_ALG},
    {"es256 against the rs256 kid", "{\"alg\":\"ES256\",\"kid\":\"k-rs\"}", GOOD, SIG_ES, NULL, 0,
     NULL, API_AUTH_ERR_WRONG_ALG},
    {"rs256 without a kid (the secret is hs256)", "{\"alg\":\"RS256\"}", GOOD, SIG_RS, NULL, 0,
     NULL, API_AUTH_ERR_WRONG_ALG},
    {"hs512", "{\"alg\":\"HS512\"}", GOOD, SIG_HS, NULL, 0, NULL, API_AUTH_ERR_WRONG_ALG},
    {"alg in lower case", "{\"alg\":\"hs256\"}", GOOD, SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_WRONG_ALG},
    /* kids */
    {"unknown kid", "{\"alg\":\"HS256\",\"kid\":\"k-zz\"}", GOOD, SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_UNKNOWN_KID},
    {"no kid, no secret", HS, GOOD, SIG_HS, NULL, 1, NULL, API_AUTH_ERR_NO_KID},
    {"kid still works without a secret", "{\"alg\":\"ES256\",\"kid\":\"k-es\"}", GOOD, SIG_ES, NULL,
     1, NULL, API_AUTH_OK, "main", "B"},
    {"kid not a string", "{\"alg\":\"HS256\",\"kid\":7}", GOOD, SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_MALFORMED},
    /* audience */
    {"audience: none given", HS, GOOD, SIG_HS, NULL, 0, "gm", API_AUTH_ERR_AUDIENCE},
    {"audience: another", HS, "{\"sub\":\"B\",\"exp\":1700003600,\"aud\":\"other\"}", SIG_HS, NULL,
     0, "gm", API_AUTH_ERR_AUDIENCE},
    {"audience: ours", HS, "{\"sub\":\"B\",\"exp\":1700003600,\"aud\":\"gm\"}", SIG_HS, NULL, 0,
     "gm", API_AUTH_OK, "main", "B"},
    {"audience: ours in a list", HS, "{\"sub\":\"B\",\"exp\":1700003600,\"aud\":[\"x\",\"gm\"]}",
     SIG_HS, NULL, 0, "gm", API_AUTH_OK, "main", "B"},
    {"audience: not checked when unset", HS, "{\"sub\":\"B\",\"exp\":1700003600,\"aud\":\"other\"}",
     SIG_HS, NULL, 0, NULL, API_AUTH_OK, "main", "B"},
    /* sub */
    {"no sub", HS, "{\"exp\":1700003600}", SIG_HS, NULL, 0, NULL, API_AUTH_ERR_SUB},
    {"sub not a string", HS, "{\"sub\":5,\"exp\":1700003600}", SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_SUB},
    {"sub with two slashes", HS, "{\"sub\":\"a/b/c\",\"exp\":1700003600}", SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_SUB},
    {"sub not an id", HS, "{\"sub\":\"B B\",\"exp\":1700003600}", SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_SUB},
    {"sub with an empty realm", HS, "{\"sub\":\"/B\",\"exp\":1700003600}", SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_SUB},
    /* malformed text: refused before any key is looked at */
    {"empty", NULL, NULL, SIG_NONE, "", 0, NULL, API_AUTH_ERR_MALFORMED},
    {"legacy token", NULL, NULL, SIG_NONE,
     "B.0000000000000000000000000000000000000000000000000000000000000000", 0, NULL,
     API_AUTH_ERR_MALFORMED},
    {"four parts", NULL, NULL, SIG_NONE, "a.b.c.d", 0, NULL, API_AUTH_ERR_MALFORMED},
    {"not base64url", NULL, NULL, SIG_NONE, "e30!.e30.AAAA", 0, NULL, API_AUTH_ERR_MALFORMED},
    {"padded base64", NULL, NULL, SIG_NONE, "e30=.e30.AAAA", 0, NULL, API_AUTH_ERR_MALFORMED},
    {"base64 of 4k+1 characters", NULL, NULL, SIG_NONE, "e30.e30.AAAAA", 0, NULL,
     API_AUTH_ERR_MALFORMED},
    {"header not JSON", "{alg:HS256}", GOOD, SIG_HS, NULL, 0, NULL, API_AUTH_ERR_MALFORMED},
    {"header a JSON array", "[\"HS256\"]", GOOD, SIG_HS, NULL, 0, NULL, API_AUTH_ERR_MALFORMED},
    {"header without alg", "{\"typ\":\"JWT\"}", GOOD, SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_MALFORMED},
    {"alg twice", "{\"alg\":\"HS256\",\"alg\":\"none\"}", GOOD, SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_MALFORMED},
    {"crit header", "{\"alg\":\"HS256\",\"crit\":[\"exp\"]}", GOOD, SIG_HS, NULL, 0, NULL,
     API_AUTH_ERR_MALFORMED},
    {"payload a JSON string", HS, "\"B\"", SIG_HS, NULL, 0, NULL, API_AUTH_ERR_MALFORMED},
    {"payload not JSON", HS, "sub=B", SIG_HS, NULL, 0, NULL, API_AUTH_ERR_MALFORMED},
};

static void test_api_auth_verify_table(void **state) {
    (void)state;
    api_auth *with = auth_new(1), *without = auth_new(0);
    for (size_t i = 0; i < sizeof vcases / sizeof *vcases; i++) {
        const struct vcase *c = &vcases[i];
        char tok[API_TOKEN_MAX + 1], realm[MARKET_REALM_MAX + 1] = "", who[MARKET_ID_MAX + 1] = "";
        if (c->raw)
            snprintf(tok, sizeof tok, "%s", c->raw);
        else
            mint(c->header, c->payload, c->how, tok, sizeof tok);
        api_auth *a = c->no_secret ? without : with;
        assert_int_equal(api_auth_set_audience(a, c->audience), API_AUTH_OK);
        int rc = api_auth_verify(a, tok, NOW, realm, who);
        if (rc != c->want)
            fail_msg("case '%s': got %d (%s), want %d (%s)", c->name, rc, api_auth_strerror(rc),
                     c->want, api_auth_strerror(c->want));
        if (c->want == API_AUTH_OK) {
            assert_string_equal(realm, c->realm);
            assert_string_equal(who, c->player);
        }
        assert_int_equal(api_auth_set_audience(a, NULL), API_AUTH_OK);
    }
    api_auth_free(with);
    api_auth_free(without);
}

/* A token longer than API_TOKEN_MAX is malformed whatever it holds; NULL too. */
static void test_api_auth_verify_too_long(void **state) {
    (void)state;
    api_auth *a = auth_new(1);
    char *big = malloc(API_TOKEN_MAX + 2), realm[MARKET_REALM_MAX + 1], who[MARKET_ID_MAX + 1];
    assert_non_null(big);
    memset(big, 'A', API_TOKEN_MAX + 1);
    big[10] = big[20] = '.';
    big[API_TOKEN_MAX + 1] = '\0';
    assert_int_equal(api_auth_verify(a, big, NOW, realm, who), API_AUTH_ERR_MALFORMED);
    assert_int_equal(api_auth_verify(a, NULL, NOW, realm, who), API_AUTH_ERR_MALFORMED);
    free(big);
    api_auth_free(a);
}

/* A leeway of 0 refuses from exp on; a larger one moves every edge. */
static void test_api_auth_leeway_setting(void **state) {
    (void)state;
    api_auth *a = auth_new(1);
    char tok[API_TOKEN_MAX + 1], realm[MARKET_REALM_MAX + 1], who[MARKET_ID_MAX + 1];
    mint(HS, "{\"sub\":\"B\",\"exp\":1700000000}", SIG_HS, tok, sizeof tok);
    api_auth_set_leeway(a, 0);
    assert_int_equal(api_auth_verify(a, tok, NOW - 1, realm, who), API_AUTH_OK);
    assert_int_equal(api_auth_verify(a, tok, NOW, realm, who), API_AUTH_ERR_EXPIRED);
    api_auth_set_leeway(a, 300);
    assert_int_equal(api_auth_verify(a, tok, NOW + 299, realm, who), API_AUTH_OK);
    assert_int_equal(api_auth_verify(a, tok, NOW + 300, realm, who), API_AUTH_ERR_EXPIRED);
    api_auth_free(a);
}

/* ---- api_token_make ---- */

static void test_api_token_make_verifies(void **state) {
    (void)state;
    api_auth *a = auth_new(1);
    char tok[API_TOKEN_MAX + 1], realm[MARKET_REALM_MAX + 1], who[MARKET_ID_MAX + 1];
    api_token_spec spec = {SECRET, NULL, NULL, NULL, "B", NOW, 3600};
    assert_int_equal(api_token_make(&spec, tok, sizeof tok), MARKET_OK);
    assert_memory_equal(tok, "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.", 37); /* {"alg":"HS256",... */
    assert_int_equal(api_auth_verify(a, tok, NOW, realm, who), API_AUTH_OK);
    assert_string_equal(realm, MARKET_REALM_DEFAULT);
    assert_string_equal(who, "B");
    assert_int_equal(api_auth_verify(a, tok, NOW + 3600 + 60, realm, who), API_AUTH_ERR_EXPIRED);
    /* a realm, a kid, an audience */
    api_token_spec rot = {ROT_SECRET, "k-hs", "gm", "eu-1", "C", NOW, 60};
    assert_int_equal(api_token_make(&rot, tok, sizeof tok), MARKET_OK);
    assert_int_equal(api_auth_set_audience(a, "gm"), API_AUTH_OK);
    assert_int_equal(api_auth_verify(a, tok, NOW, realm, who), API_AUTH_OK);
    assert_string_equal(realm, "eu-1");
    assert_string_equal(who, "C");
    api_auth_free(a);
}

static void test_api_token_make_refusals(void **state) {
    (void)state;
    char tok[API_TOKEN_MAX + 1];
    const api_token_spec bad[] = {
        {"", NULL, NULL, NULL, "B", NOW, 3600},
        {SECRET, NULL, NULL, NULL, "bad id", NOW, 3600},
        {SECRET, NULL, NULL, "eu 1", "B", NOW, 3600},
        {SECRET, "k y", NULL, NULL, "B", NOW, 3600},
        {SECRET, NULL, "a\"b", NULL, "B", NOW, 3600},
        {SECRET, NULL, NULL, NULL, "B", NOW, 0},
        {SECRET, NULL, NULL, NULL, "B", NOW, API_TOKEN_TTL_MAX + 1},
        {SECRET, NULL, NULL, NULL, "B", -1, 3600},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (api_token_make(&bad[i], tok, sizeof tok) != MARKET_ERR_INVALID) fail_msg("spec %zu", i);
    api_token_spec ok = {SECRET, NULL, NULL, NULL, "B", NOW, 3600};
    assert_int_equal(api_token_make(&ok, tok, 20), MARKET_ERR_INVALID); /* does not fit */
    assert_int_equal(api_token_make(NULL, tok, sizeof tok), MARKET_ERR_INVALID);
}

/* ---- keys ---- */

static void test_api_auth_key_specs(void **state) {
    (void)state;
    char why[300];
    api_auth *a = api_auth_new();
    assert_non_null(a);
    static const char *const bad[] = {
        "",
        "k1",
        "k1:hs256",
        "k1:hs256:",
        ":hs256:x",
        "k1:hs512:x",
        "k 1:hs256:x",
        "k1:rs256:/nonexistent/pub.pem",
        "k1:es256:/dev/null",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = '\0';
        if (api_auth_add_key(a, bad[i], why, sizeof why) != API_AUTH_ERR_KEY)
            fail_msg("spec '%s' was taken", bad[i]);
        assert_true(why[0] != '\0');
    }
    /* the secret may hold ':'; it never shows in why */
    assert_int_equal(api_auth_add_key(a, "k1:HS256:se:cr:et", why, sizeof why), API_AUTH_OK);
    assert_int_equal(api_auth_add_key(a, "k1:hs256:other", why, sizeof why), API_AUTH_ERR_KEY);
    assert_non_null(strstr(why, "twice"));
    /* a PEM file: the RSA key, then the wrong kinds of keys for each algorithm */
    char path[] = "/tmp/test_api_auth_XXXXXX", spec[128];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, rsa_pem, strlen(rsa_pem)), (ssize_t)strlen(rsa_pem));
    close(fd);
    snprintf(spec, sizeof spec, "f-rs:rs256:%s", path);
    assert_int_equal(api_auth_add_key(a, spec, why, sizeof why), API_AUTH_OK);
    snprintf(spec, sizeof spec, "f-es:es256:%s", path);
    assert_int_equal(api_auth_add_key(a, spec, why, sizeof why), API_AUTH_ERR_KEY);
    assert_non_null(strstr(why, "P-256"));
    unlink(path);
    assert_int_equal(api_auth_add_pem(a, "e-rs", "rs256", ec_pem, strlen(ec_pem), why, sizeof why),
                     API_AUTH_ERR_KEY);
    assert_int_equal(api_auth_add_pem(a, "h", "hs256", rsa_pem, strlen(rsa_pem), why, sizeof why),
                     API_AUTH_ERR_KEY);
    EVP_PKEY *small = EVP_RSA_gen(1024), *p384 = EVP_EC_gen("P-384");
    char pem[4096];
    assert_non_null(small);
    assert_non_null(p384);
    pem_of(small, pem, sizeof pem);
    assert_int_equal(api_auth_add_pem(a, "s-rs", "rs256", pem, strlen(pem), why, sizeof why),
                     API_AUTH_ERR_KEY);
    assert_non_null(strstr(why, "2048"));
    pem_of(p384, pem, sizeof pem);
    assert_int_equal(api_auth_add_pem(a, "p-es", "es256", pem, strlen(pem), why, sizeof why),
                     API_AUTH_ERR_KEY);
    EVP_PKEY_free(small);
    EVP_PKEY_free(p384);
    /* a token of the key read from the file verifies */
    char tok[API_TOKEN_MAX + 1], realm[MARKET_REALM_MAX + 1], who[MARKET_ID_MAX + 1];
    mint("{\"alg\":\"RS256\",\"kid\":\"f-rs\"}", GOOD, SIG_RS, tok, sizeof tok);
    assert_int_equal(api_auth_verify(a, tok, NOW, realm, who), API_AUTH_OK);
    assert_int_equal(api_auth_set_secret(a, "", why, sizeof why), API_AUTH_ERR_KEY);
    api_auth_free(a);
    api_auth_free(NULL);
}

static void test_api_auth_strerror_names_every_code(void **state) {
    (void)state;
    assert_string_equal(api_auth_strerror(API_AUTH_ERR_EXPIRED), "token expired");
    assert_string_equal(api_auth_strerror(API_AUTH_ERR_ALG_NONE), "algorithm none is refused");
    for (int e = API_AUTH_ERR_NOMEM; e < 0; e++)
        assert_string_not_equal(api_auth_strerror(e), "unknown error");
    assert_string_equal(api_auth_strerror(-999), "unknown error");
}

/* ---- the Authorization check of api_handle() ---- */

struct fx {
    lock_client *lock;
    market *m;
    market_conn *c;
    api_auth *auth;
};

static const char *header_value;

static const char *lookup(void *ud, enum api_arg_kind kind, const char *name) {
    (void)ud;
    if (kind == API_ARG_HEADER && strcmp(name, "Authorization") == 0) return header_value;
    return NULL;
}

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);
    market_config cfg = {.redis_timeout_ms = 100, .lock_ttl_ms = 1000, .acquire_timeout_ms = 100};
    if (!f || rconn_addr_parse("redis://127.0.0.1:1/0", &cfg.redis) < 0) return -1;
    f->lock = lock_local_new(NULL);
    f->m = market_new(&cfg, f->lock, NULL);
    f->c = market_conn_new(f->m, NULL);
    f->auth = api_auth_new();
    *state = f;
    return f->c && f->auth && api_auth_set_secret(f->auth, SECRET, NULL, 0) == API_AUTH_OK ? 0 : -1;
}

static int teardown(void **state) {
    struct fx *f = *state;
    api_auth_free(f->auth);
    market_conn_free(f->c);
    market_free(f->m);
    lock_free(f->lock);
    free(f);
    return 0;
}

static int post(struct fx *f, const char *path, const char *body, const char *header,
                api_response *resp) {
    header_value = header;
    api_request req = {"POST", path, body, strlen(body), lookup, NULL, f->auth};
    api_handle(f->c, &req, resp);
    return resp->status;
}

/* Writes "Bearer <B's token of realm>", issued now for an hour, into h. */
static void bearer(const char *realm, const char *player, char *h, size_t len) {
    char tok[API_TOKEN_MAX + 1];
    api_token_spec spec = {SECRET, NULL, NULL, realm, player, (int64_t)time(NULL), 3600};
    assert_int_equal(api_token_make(&spec, tok, sizeof tok), MARKET_OK);
    snprintf(h, len, "Bearer %s", tok);
}

static const char purchase[] = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}";

/* Each refusal is a 401 whose detail names the check, with WWW-Authenticate. */
static void test_api_auth_401_details(void **state) {
    struct fx *f = *state;
    char expired[API_TOKEN_MAX + 16], none[API_TOKEN_MAX + 16], tok[API_TOKEN_MAX + 1];
    api_token_spec old = {SECRET, NULL, NULL, NULL, "B", (int64_t)time(NULL) - 7200, 3600};
    assert_int_equal(api_token_make(&old, tok, sizeof tok), MARKET_OK);
    snprintf(expired, sizeof expired, "Bearer %s", tok);
    mint("{\"alg\":\"none\"}", "{\"sub\":\"B\",\"exp\":99999999999}", SIG_NONE, tok, sizeof tok);
    snprintf(none, sizeof none, "Bearer %s", tok);
    const struct {
        const char *header, *detail;
    } cases[] = {
        {NULL, "missing 'Authorization: Bearer <token>'"},
        {"", "the Authorization header is not 'Bearer <token>'"},
        {"Basic QjpC", "the Authorization header is not 'Bearer <token>'"},
        {"Bearer", "the Authorization header is not 'Bearer <token>'"},
        {"Bearer ", "malformed token"},
        {"Bearer B.00", "malformed token"},
        {"bearer a.b", "malformed token"},
        {expired, "token expired"},
        {none, "algorithm none is refused"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        api_response resp = {0};
        assert_int_equal(post(f, "/purchase", purchase, cases[i].header, &resp), 401);
        char want[200];
        snprintf(want, sizeof want, "{\"error\":\"unauthorized\",\"detail\":\"%s\"}",
                 cases[i].detail);
        if (!strstr(resp.body, cases[i].detail)) fail_msg("%s, want %s", resp.body, want);
        assert_string_equal(resp.auth_challenge, "Bearer");
        api_response_cleanup(&resp);
    }
}

/* A valid token of another realm or player is 403; the right one reaches the store. */
static void test_api_auth_realm_and_player_binding(void **state) {
    struct fx *f = *state;
    char eu[API_TOKEN_MAX + 16], a[API_TOKEN_MAX + 16], b[API_TOKEN_MAX + 16];
    bearer("eu-1", "B", eu, sizeof eu);
    bearer(NULL, "A", a, sizeof a);
    bearer(NULL, "B", b, sizeof b);
    api_response resp = {0};
    assert_int_equal(post(f, "/purchase", purchase, eu, &resp), 403);
    assert_non_null(strstr(resp.body, "another realm"));
    assert_null(resp.auth_challenge);
    api_response_cleanup(&resp);
    assert_int_equal(post(f, "/realms/eu-2/purchase", purchase, eu, &resp), 403);
    api_response_cleanup(&resp);
    assert_int_equal(post(f, "/realms/eu-1/purchase", purchase, b, &resp), 403);
    api_response_cleanup(&resp);
    assert_int_equal(post(f, "/purchase", purchase, a, &resp), 403);
    assert_non_null(strstr(resp.body, "another player"));
    api_response_cleanup(&resp);
    assert_int_equal(post(f, "/list", "{\"seller\":\"B\",\"item\":\"x\",\"price\":5}", a, &resp),
                     403);
    api_response_cleanup(&resp);
    assert_int_equal(post(f, "/unlist", "{\"seller\":\"B\",\"item\":\"x\"}", a, &resp), 403);
    api_response_cleanup(&resp);
    /* The store is a closed port: getting past the check means 503. */
    assert_int_equal(post(f, "/realms/eu-1/purchase", purchase, eu, &resp), 503);
    assert_string_equal(resp.realm, "eu-1");
    api_response_cleanup(&resp);
    assert_int_equal(post(f, "/list", "{\"seller\":\"A\",\"item\":\"x\",\"price\":5}", a, &resp),
                     503);
    api_response_cleanup(&resp);
    /* Validation still comes first: a bad body is 400 even without a token. */
    assert_int_equal(post(f, "/purchase", "{\"buyer\":1}", NULL, &resp), 400);
    api_response_cleanup(&resp);
}

/* Who reads a trade: anyone without a token, the admin with the admin token,
 * a player with their token; a token that is neither is refused (401; 403
 * of another realm), never read as no token; with authentication off a
 * player's token cannot be checked and reads as anyone. Only the two
 * parties and the admin see who traded, unless the server makes it public. */
static void test_api_auth_trade_reader(void **state) {
    struct fx *f = *state;
    char a[API_TOKEN_MAX + 16], c[API_TOKEN_MAX + 16], eu[API_TOKEN_MAX + 16];
    char adm[API_ADMIN_TOKEN_MAX + 1], hadm[API_ADMIN_TOKEN_MAX + 16];
    bearer(NULL, "A", a, sizeof a);
    bearer(NULL, "C", c, sizeof c);
    bearer("eu-1", "A", eu, sizeof eu);
    assert_int_equal(api_admin_token_make("adm1n", adm, sizeof adm), MARKET_OK);
    snprintf(hadm, sizeof hadm, "Bearer %s", adm);
    market_trade t = {.buyer = "B", .seller = "A"};
    const struct {
        const char *header;
        int auth_on, ok, status, admin, sees, sees_public;
        const char *player;
    } cases[] = {
        {NULL, 1, 1, 0, 0, 0, 1, ""},
        {a, 1, 1, 0, 0, 1, 1, "A"},   /* the seller */
        {c, 1, 1, 0, 0, 0, 1, "C"},   /* a third player */
        {hadm, 1, 1, 0, 1, 1, 1, ""}, /* the admin */
        {hadm, 0, 1, 0, 1, 1, 1, ""}, /* the admin, authentication off */
        {a, 0, 1, 0, 0, 0, 1, ""},    /* authentication off: no player token checked */
        {"Bearer nope", 1, 0, 401, 0, 0, 0, ""},
        {"Basic QjpC", 1, 0, 401, 0, 0, 0, ""},
        {eu, 1, 0, 403, 0, 0, 0, ""}, /* a token of another realm */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        header_value = cases[i].header;
        api_request req = {
            "GET",  "/trades/1-0", NULL, 0, lookup, NULL, cases[i].auth_on ? f->auth : NULL,
            "adm1n"};
        api_response resp = {0};
        api__reader rd;
        assert_int_equal(api__reader_get(&req, MARKET_REALM_DEFAULT, &rd, &resp), cases[i].ok);
        assert_int_equal(resp.status, cases[i].status);
        api_response_cleanup(&resp);
        if (!cases[i].ok) continue;
        assert_int_equal(rd.admin, cases[i].admin);
        assert_string_equal(rd.player, cases[i].player);
        assert_int_equal(api__reader_sees_parties(&req, &rd, &t), cases[i].sees);
        req.trade_parties_public = 1;
        assert_int_equal(api__reader_sees_parties(&req, &rd, &t), cases[i].sees_public);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_auth_verify_table),
        cmocka_unit_test(test_api_auth_verify_too_long),
        cmocka_unit_test(test_api_auth_leeway_setting),
        cmocka_unit_test(test_api_token_make_verifies),
        cmocka_unit_test(test_api_token_make_refusals),
        cmocka_unit_test(test_api_auth_key_specs),
        cmocka_unit_test(test_api_auth_strerror_names_every_code),
        cmocka_unit_test_setup_teardown(test_api_auth_401_details, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_auth_realm_and_player_binding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_auth_trade_reader, setup, teardown),
    };
    return cmocka_run_group_tests_name("api auth", tests, keys_setup, keys_teardown);
}
