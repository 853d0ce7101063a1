/* reply.c - hand-made hiredis replies for unit tests (reply.h). */
#include "tests/helpers/reply.h"

#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

redisReply *th_rep_new(int type) {
    redisReply *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->type = type;
    return r;
}

redisReply *th_rep_str_len(const char *s, size_t len) {
    redisReply *r = th_rep_new(REDIS_REPLY_STRING);
    r->str = malloc(len + 1);
    assert_non_null(r->str);
    memcpy(r->str, s, len);
    r->str[len] = '\0';
    r->len = len;
    return r;
}

redisReply *th_rep_str(const char *s) {
    return th_rep_str_len(s, strlen(s));
}

redisReply *th_rep_int(long long v) {
    redisReply *r = th_rep_new(REDIS_REPLY_INTEGER);
    r->integer = v;
    return r;
}

redisReply *th_rep_nil(void) {
    return th_rep_new(REDIS_REPLY_NIL);
}

static redisReply *arr_of(size_t n) {
    redisReply *r = th_rep_new(REDIS_REPLY_ARRAY);
    r->elements = n;
    if (n) {
        r->element = calloc(n, sizeof *r->element);
        assert_non_null(r->element);
    }
    return r;
}

redisReply *th_rep_arr(size_t n, ...) {
    redisReply *r = arr_of(n);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        r->element[i] = va_arg(ap, redisReply *);
    va_end(ap);
    return r;
}

redisReply *th_rep_map(size_t n, ...) {
    redisReply *r = arr_of(2 * n);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < 2 * n; i++)
        r->element[i] = th_rep_str(va_arg(ap, const char *));
    va_end(ap);
    return r;
}
