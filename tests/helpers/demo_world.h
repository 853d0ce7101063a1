/* demo_world.h - the demo world (fixtures/demo.json) for integration tests: parsed, and
 * written into a test's redis-server. */
#ifndef GM_TESTS_DEMO_WORLD_H
#define GM_TESTS_DEMO_WORLD_H

#include "market/market.h"

market_world *th_demo_world(void);
void th_world_store(const char *redis_url, const char *realm, market_world *w);

#endif /* GM_TESTS_DEMO_WORLD_H */
