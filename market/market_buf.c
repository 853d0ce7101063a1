/* market_buf.c - the command buffer of one pipeline (market_buf.h): the
 * arguments of its commands, and the text they name.
 *
 * DESIGN
 * A buffer keeps its commands' arguments back to back in one array, and the
 * text it makes (numbers, keys) in chunks that never move, so that an
 * argument is a stable pointer while the buffer grows. Arrays grow by
 * doubling and are kept from one use to the next (market__buf_reset), so a
 * worker's buffer stops allocating after its first large batches. A failed
 * allocation marks the buffer; later appends do nothing, and
 * market__buf_seal() reports it.
 */
#include "market/market_buf.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_CHUNK 16384 /* bytes of one chunk of a buffer's text */

struct market__text {
    struct market__text *next;
    size_t used;
    char bytes[TEXT_CHUNK];
};

/* ---- the buffer ---- */

/* Empties b, keeping its memory. Can't fail. */
void market__buf_reset(market__buf *b) {
    b->n = b->n_args = 0;
    b->open = 0;
    b->nomem = 0;
    for (struct market__text *t = b->text; t; t = t->next)
        t->used = 0;
    b->text_at = b->text;
}

/* Frees what b holds and leaves it empty. Can't fail. */
void market__buf_free(market__buf *b) {
    free(b->argc);
    free(b->at);
    free(b->argv);
    free(b->rep);
    free(b->args);
    for (struct market__text *t = b->text, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    *b = (market__buf){0};
}

/* Makes room for `more` more arguments; 0, or -1 (b marked failed). */
static int args_room(market__buf *b, size_t more) {
    if (b->nomem) return -1;
    if (b->n_args + more <= b->cap_args) return 0;
    size_t cap = b->cap_args ? 2 * b->cap_args : 256;
    while (cap < b->n_args + more)
        cap *= 2;
    const char **args = realloc(b->args, cap * sizeof *args);
    if (!args) {
        b->nomem = 1;
        return -1;
    }
    b->args = args;
    b->cap_args = cap;
    return 0;
}

/* Makes room for one more command of `more` arguments; 0, or -1 (b marked
 * failed). */
static int room(market__buf *b, size_t more) {
    if (b->nomem) return -1;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        int *argc = realloc(b->argc, cap * sizeof *argc);
        if (argc) b->argc = argc;
        size_t *at = argc ? realloc(b->at, cap * sizeof *at) : NULL;
        if (at) b->at = at;
        const char ***argv = at ? realloc(b->argv, cap * sizeof *argv) : NULL;
        if (argv) b->argv = argv;
        redisReply **rep = argv ? realloc(b->rep, cap * sizeof *rep) : NULL;
        if (rep) b->rep = rep;
        if (!rep) {
            b->nomem = 1;
            return -1;
        }
        b->cap = cap;
    }
    return args_room(b, more);
}

/* Appends the command of argc arguments argv (kept as pointers: each must
 * outlive the buffer's use). */
void market__buf_cmdv(market__buf *b, int argc, const char *const *argv) {
    if (room(b, (size_t)argc) < 0) return;
    b->at[b->n] = b->n_args;
    b->argc[b->n++] = argc;
    memcpy(b->args + b->n_args, argv, (size_t)argc * sizeof *argv);
    b->n_args += (size_t)argc;
}

/* Appends the command of the argc (1..8) strings that follow (see
 * market__buf_cmdv); more than 8 marks b failed rather than cut the command. */
void market__buf_cmd(market__buf *b, int argc, ...) {
    const char *argv[8];
    if (argc < 1 || argc > 8) {
        b->nomem = 1;
        return;
    }
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++)
        argv[i] = va_arg(ap, const char *);
    va_end(ap);
    market__buf_cmdv(b, argc, argv);
}

/* Opens the command "<cmd> <key>" ("<cmd>" with key NULL), to which
 * market__buf_arg() appends and which market__buf_end() closes. */
void market__buf_begin(market__buf *b, const char *cmd, const char *key) {
    if (room(b, 2) < 0) return;
    b->open = b->n;
    b->at[b->n] = b->n_args;
    b->argc[b->n++] = 1;
    b->args[b->n_args++] = cmd;
    if (key) b->argc[b->open]++, b->args[b->n_args++] = key;
    b->open_base = b->argc[b->open];
}

/* Appends arg to the open command. */
void market__buf_arg(market__buf *b, const char *arg) {
    if (b->open >= b->n || args_room(b, 1) < 0) return;
    b->args[b->n_args++] = arg;
    b->argc[b->open]++;
}

/* Closes the open command: kept when it has at least `least` arguments
 * after its key (after its name, when opened without a key), else taken
 * back. Returns how many it has. */
size_t market__buf_end(market__buf *b, size_t least) {
    if (b->nomem || b->open >= b->n) return 0;
    size_t has = (size_t)(b->argc[b->open] - b->open_base);
    if (has < least) {
        b->n_args = b->at[b->open];
        b->n = b->open;
    }
    b->open = b->n;
    return has;
}

/* Returns room for len bytes of text that stay where they are, or NULL (b
 * marked failed). */
static char *text(market__buf *b, size_t len) {
    if (b->nomem || len > TEXT_CHUNK) {
        b->nomem = 1;
        return NULL;
    }
    while (b->text_at && b->text_at->used + len > TEXT_CHUNK)
        b->text_at = b->text_at->next;
    if (!b->text_at) {
        struct market__text *t = malloc(sizeof *t);
        if (!t) {
            b->nomem = 1;
            return NULL;
        }
        t->used = 0;
        t->next = b->text; /* a new chunk goes first: the others are full */
        b->text = b->text_at = t;
    }
    char *p = b->text_at->bytes + b->text_at->used;
    b->text_at->used += len;
    return p;
}

/* Returns v in decimal, kept by b ("" when b failed). */
const char *market__buf_i64(market__buf *b, int64_t v) {
    char *p = text(b, 24);
    if (!p) return "";
    market__i64_str(p, v);
    return p;
}

/* Returns the strings that follow, up to a NULL, joined, kept by b ("" when
 * b failed). */
const char *market__buf_join(market__buf *b, ...) {
    va_list ap;
    size_t len = 1;
    va_start(ap, b);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        len += strlen(s);
    va_end(ap);
    char *p = text(b, len);
    if (!p) return "";
    size_t at = 0;
    va_start(ap, b);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
        size_t l = strlen(s);
        memcpy(p + at, s, l);
        at += l;
    }
    va_end(ap);
    p[at] = '\0';
    return p;
}

/* Makes b->argv[0..n) point at the commands' arguments, for
 * market__pipeline_argv(). Returns MARKET_OK, or MARKET_ERR_NOMEM when an
 * append failed. */
int market__buf_seal(market__buf *b) {
    if (b->nomem) return MARKET_ERR_NOMEM;
    for (size_t k = 0; k < b->n; k++)
        b->argv[k] = b->args + b->at[k];
    return MARKET_OK;
}
