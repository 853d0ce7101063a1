/* demo_world.c - the demo world (fixtures/demo.json) for integration tests: parsed, and
 * written into a test's redis-server through market/ (a local lock: nothing else runs). */
#include "tests/helpers/demo_world.h"

#include <stdio.h>

#include "tests/helpers/cmocka_all.h"

#include "api/api.h"
#include "lock/lock.h"
#include "rconn/rconn.h"

/* Returns fixtures/demo.json parsed (the caller frees it, or hands it to
 * th_world_store()); fails the test when it cannot. */
market_world *th_demo_world(void) {
    FILE *f = fopen("fixtures/demo.json", "rb");
    assert_non_null(f);
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    market_world *w = NULL;
    char why[256];
    assert_int_equal(api_fixture_parse(text, n, &w, why, sizeof why), MARKET_OK);
    return w;
}

/* Writes w into realm of the Redis at redis_url (replacing the realm's keys)
 * and frees w; fails the test when it cannot. */
void th_world_store(const char *redis_url, const char *realm, market_world *w) {
    market_config cfg = {.redis_timeout_ms = 1000, .lock_ttl_ms = 1000, .acquire_timeout_ms = 1000};
    assert_int_equal(rconn_addr_parse(redis_url, &cfg.redis), RCONN_OK);
    int err;
    lock_client *l = lock_local_new(&err);
    assert_non_null(l);
    market *m = market_new(&cfg, l, &err);
    assert_non_null(m);
    market_conn *c = market_conn_new(m, &err);
    assert_non_null(c);
    assert_int_equal(market_world_store(c, realm, w, 1), MARKET_OK);
    market_conn_free(c);
    market_free(m);
    lock_free(l);
    market_world_free(w);
}
