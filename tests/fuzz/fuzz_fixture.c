/* fuzz_fixture.c - libFuzzer harness over api_fixture_parse().
 *
 * The whole input is the fixture text, passed with its length (so it may hold
 * NUL bytes and need not end in one).
 *
 * DESIGN
 * The invariants checked for every input (abort() on a violation):
 *   - either a world or a message, never both and never neither: MARKET_OK
 *     comes with a world and an empty message; a refusal comes with *out NULL,
 *     a non-empty NUL-terminated message and one of the documented codes
 *     (INVALID, DUPLICATE, NO_PLAYER, INSUFFICIENT_FUNDS; NOMEM cannot happen here);
 *   - a world that parses passes market_world_check();
 *   - the message is cut to fit: parsed again into a small buffer (1..8 bytes,
 *     from the input's length, in an exact-size heap block so ASan sees a
 *     write past it) the answer is the same and the message is a prefix of
 *     the full one; and with no buffer at all (why NULL) the same code;
 *   - nothing leaks (LeakSanitizer), the world is freed with market_world_free().
 */
#include "api/api.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market.h"

#define FUZZ_WHY_MAX 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_fixture: invariant failed at line %d: %s\n", __LINE__, #cond);   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Parses text into a why buffer of whylen bytes (NULL when whylen is 0) and
 * checks the either-or rule. Returns the code; the message stays in *why_out
 * (malloc'd, caller frees) when whylen > 0. */
static int parse_once(const char *text, size_t len, size_t whylen, char **why_out) {
    char *why = whylen ? malloc(whylen) : NULL;
    if (whylen) {
        CHECK(why != NULL);
        memset(why, 'X', whylen); /* a message must overwrite it */
    }
    market_world *w = (market_world *)&w; /* must be overwritten */
    int rc = api_fixture_parse(text, len, &w, why, whylen);
    if (rc == MARKET_OK) {
        CHECK(w != NULL);
        if (why) CHECK(why[0] == '\0');
        char check[FUZZ_WHY_MAX];
        int crc = market_world_check(w, check, sizeof check);
        if (crc != MARKET_OK) fprintf(stderr, "fuzz_fixture: world check: %s\n", check);
        CHECK(crc == MARKET_OK);
        market_world_free(w);
    } else {
        CHECK(w == NULL);
        CHECK(rc == MARKET_ERR_INVALID || rc == MARKET_ERR_DUPLICATE ||
              rc == MARKET_ERR_NO_PLAYER ||
              rc == MARKET_ERR_INSUFFICIENT_FUNDS || /* a buyer who cannot escrow its orders */
              rc == MARKET_ERR_NOT_HELD); /* an auction of goods its seller does not hold */
        if (why) {
            CHECK(memchr(why, '\0', whylen) != NULL);
            CHECK(whylen == 1 || why[0] != '\0');
        }
    }
    if (why_out)
        *why_out = why;
    else
        free(why);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* An exact-size copy: data may be read right up to its end, never past it. */
    char *text = malloc(size ? size : 1);
    CHECK(text != NULL);
    if (size) memcpy(text, data, size);

    char *full = NULL, *small = NULL;
    int rc = parse_once(text, size, FUZZ_WHY_MAX, &full);
    size_t smallen = 1 + size % 8;
    CHECK(parse_once(text, size, smallen, &small) == rc);
    CHECK(strncmp(small, full, smallen - 1) == 0);
    CHECK(strlen(small) == (strlen(full) < smallen - 1 ? strlen(full) : smallen - 1));
    CHECK(parse_once(text, size, 0, NULL) == rc);

    free(small);
    free(full);
    free(text);
    return 0;
}
