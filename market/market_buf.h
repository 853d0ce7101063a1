/* market_buf.h - the command buffer of one pipeline (market_buf.c): commands and their
 * arguments appended one by one, their text kept where it was written, sealed into the
 * argv a pipeline sends. The data model (market_model.h) appends effects and reads to it;
 * it knows no command of its own. */
#ifndef GM_MARKET_MARKET_BUF_H
#define GM_MARKET_MARKET_BUF_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "market/market_impl.h"

struct market__text; /* the buffer's text: chunks that never move */

/* Commands being built for one pipeline. Zeroed: empty. An append that
 * cannot get memory marks the buffer failed (market__buf_seal then says
 * so), so that a builder checks once, at the end. */
typedef struct market__buf {
    size_t n, cap;      /* commands */
    int *argc;          /* [cap] */
    size_t *at;         /* [cap]: where each command's arguments start in args */
    const char ***argv; /* [cap]: made by market__buf_seal */
    redisReply **rep;   /* [cap]: the replies, when the store layer sends it */
    const char **args;  /* every command's arguments, back to back */
    size_t n_args, cap_args;
    size_t open;                         /* the command market__buf_begin() opened, n when none */
    int open_base;                       /* its arguments when opened (name, and key if any) */
    struct market__text *text, *text_at; /* chunks, and the one being filled */
    int nomem;
} market__buf;

void market__buf_reset(market__buf *b);
void market__buf_free(market__buf *b);
void market__buf_cmd(market__buf *b, int argc, ...);
void market__buf_cmdv(market__buf *b, int argc, const char *const *argv);
void market__buf_begin(market__buf *b, const char *cmd, const char *key);
void market__buf_arg(market__buf *b, const char *arg);
size_t market__buf_end(market__buf *b, size_t least);
const char *market__buf_i64(market__buf *b, int64_t v);
const char *market__buf_join(market__buf *b, ...);
int market__buf_seal(market__buf *b);

#endif /* GM_MARKET_MARKET_BUF_H */
