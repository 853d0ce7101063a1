/* reply.h - hand-made hiredis replies for unit tests of code that reads them.
 *
 * Each builder returns a new redisReply that freeReplyObject() frees, and fails the test
 * (cmocka) when it cannot allocate. An array owns the replies it is given. */
#ifndef GM_TESTS_REPLY_H
#define GM_TESTS_REPLY_H

#include <stddef.h>

#include <hiredis.h>

redisReply *th_rep_new(int type);
redisReply *th_rep_str_len(const char *s, size_t len);
redisReply *th_rep_str(const char *s);
redisReply *th_rep_int(long long v);
redisReply *th_rep_nil(void);
/* An array of the n replies that follow (owned by it from now on). */
redisReply *th_rep_arr(size_t n, ...);
/* A RESP2 map as Sentinel and CLUSTER SHARDS answer it: a flat array of n field/value pairs of
 * strings, given as 2n const char * that follow. */
redisReply *th_rep_map(size_t n, ...);

#endif /* GM_TESTS_REPLY_H */
