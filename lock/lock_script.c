/* lock_script.c - the Lua scripts of the Redis backends, and their SHA-1 digests.
 *
 * Every write the Redis backends make to a server is one of these scripts
 * (enum lock__script in lock_impl.h says what each takes and answers);
 * lock_call.c sends them. A script's SHA-1 is computed here once
 * (lock_sha1.c), so calls use EVALSHA with no SCRIPT LOAD and fall back to
 * EVAL with the text on NOSCRIPT. Pure data: no I/O, no hiredis.
 */
#include "lock/lock.h"

#include <pthread.h>
#include <string.h>

#include "lock/lock_impl.h"

#define SHA_LEN 40

static const char *const script_text[LOCK__SCRIPT_COUNT] = {
    /* SET NX PX on every lock key, in order; when one is taken, the keys set so far are
     * deleted again (nobody can have seen them: it is one script), "<key>:wanted" is set
     * for the lease's length (someone waits: the release must announce itself), and the
     * taken key's PTTL is the answer (-1: a key without expiry), so a waiter knows when
     * the lease runs out. When all are set, each distinct fence counter is advanced
     * once (the callers pass one counter for every key) and its value is every key's
     * fence: one more than it was, or the server's clock in microseconds when that is
     * larger. The clock is what keeps fences growing across a failover: a promoted
     * replica that missed the last advance still starts above every fence the old
     * master handed out, as long as the servers' clocks agree within the time a
     * failover takes (docs/LOCKING.md). So it is SET NX on all keys or on none, and a
     * free single key costs SET NX PX, TIME, GET and SET.
     * ARGV[3] (optional) is the client's id, the first half of each of its tokens: a key
     * held by a token of the same length that begins with it is a lease this client gave
     * up (its caller holds the key's in-process queue entry, so no thread of the client
     * holds that lease), come back with a failover or a restart that lost its release: it
     * is taken over like a free key instead of waited out (docs/LOCKING.md). Not when
     * "<key>:owner" names that token: a reentrant lease, whose holds other clients naming
     * the same owner may share. */
    [LOCK__SCRIPT_ACQUIRE] =
        "local n = #KEYS / 2 "
        "for i = 1, n do "
        "if not redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then "
        "local cur = ARGV[3] and redis.pcall('GET', KEYS[i]) "
        "local ours = type(cur) == 'string' and #cur == #ARGV[1] and "
        "string.sub(cur, 1, #ARGV[3]) == ARGV[3] "
        "if ours then "
        "local o = redis.pcall('HGET', KEYS[i] .. '" LOCK_OWNER_SUFFIX "', 'token') "
        "ours = type(o) ~= 'table' and o ~= cur "
        "end "
        "if ours then "
        "redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) "
        "else "
        "for j = 1, i - 1 do redis.call('DEL', KEYS[j]) end "
        "redis.pcall('SET', KEYS[i] .. '" LOCK_WANTED_SUFFIX "', '1', 'PX', ARGV[2]) "
        "return redis.call('PTTL', KEYS[i]) "
        "end "
        "end "
        "end "
        "local f, seen = {}, {} "
        "for i = 1, n do "
        "local k = KEYS[n + i] "
        "local v = seen[k] "
        "if not v then "
        "v = (tonumber(redis.call('GET', k)) or 0) + 1 "
        "local t = redis.call('TIME') "
        "local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) "
        "if v < now then v = now end "
        "redis.call('SET', k, string.format('%.0f', v)) "
        "seen[k] = v "
        "end "
        "f[i] = v "
        "end "
        "return f",
    /* Compare-and-delete per key (ARGV[i], or ARGV[1] for all), in three commands whatever
     * the number of keys: MGET the keys, MGET their "<key>:wanted" marks, DEL the keys
     * still ours with the marks that exist (only those: on a cluster slot half-way through a
     * migration, a DEL that names a missing key next to others is refused). A deleted key
     * that someone waits for is announced on "<key>:released". pcall: a user without
     * channel rights still releases; and so does a release on a slot half-way through a
     * migration, where reading a mark that is not on this node fails (the marks are not
     * among KEYS): the lease is deleted unannounced, and a waiter sees it free at its next
     * poll (the mark, and the busy answer's pcall SET of it, likewise). */
    [LOCK__SCRIPT_RELEASE] = "local cur = redis.call('MGET', unpack(KEYS)) "
                             "local r, mine, marks = {}, {}, {} "
                             "for i = 1, #KEYS do "
                             "if cur[i] == (ARGV[i] or ARGV[1]) then "
                             "r[i] = 1 "
                             "mine[#mine + 1] = KEYS[i] "
                             "marks[#marks + 1] = KEYS[i] .. '" LOCK_WANTED_SUFFIX "' "
                             "else r[i] = 0 end "
                             "end "
                             "if #mine == 0 then return r end "
                             "local wanted = redis.pcall('MGET', unpack(marks)) "
                             "if wanted.err then wanted = {} end "
                             "for j = 1, #marks do "
                             "if wanted[j] then mine[#mine + 1] = marks[j] end "
                             "end "
                             "redis.call('DEL', unpack(mine)) "
                             "for j = 1, #marks do "
                             "if wanted[j] then "
                             "redis.pcall('PUBLISH', mine[j] .. '" LOCK_RELEASED_SUFFIX "', '1') "
                             "end "
                             "end "
                             "return r",
    [LOCK__SCRIPT_EXTEND] = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                            "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
    /* Raises each fence counter to at least ARGV[i]; never lowers one. */
    [LOCK__SCRIPT_RAISE] = "for i = 1, #KEYS do "
                           "local c = tonumber(redis.call('GET', KEYS[i]) or '0') "
                           "if c == nil or c < tonumber(ARGV[i]) then "
                           "redis.call('SET', KEYS[i], ARGV[i]) end "
                           "end "
                           "return 1",
    /* A reentrant lease: the lock key holds the token, exactly as a plain lease (so every
     * SET NX client sees it taken and a store can compare the token), and KEYS[2]
     * ("<key>:owner") the hash {owner, token, holds, fence} with the same expiry. When the key
     * is held and the hash names the same owner and the key's token, this is one more hold:
     * holds + 1, the expiry of both moved to ttl when that is later, and the answer is the
     * lease's {fence, holds, token}. A key held otherwise is busy, answered like the plain
     * acquire (the ":wanted" mark, the PTTL). A free key gets a new lease: SET, the next fence
     * (as the plain acquire counts it), a fresh hash; the answer {fence, 1, token}.
     * ARGV[4] (optional) is the client's id, as ARGV[3] of the plain acquire: a key held
     * otherwise by a token of this client, with no hash naming that token, is a plain lease it
     * gave up, taken over like a free key. */
    [LOCK__SCRIPT_ACQUIRE_OWNED] =
        "local cur = redis.call('GET', KEYS[1]) "
        "if cur then "
        "local o = redis.call('HMGET', KEYS[2], 'owner', 'token', 'fence') "
        "if o[1] == ARGV[1] and o[2] == cur and o[3] then "
        "local n = redis.call('HINCRBY', KEYS[2], 'holds', 1) "
        "local t = redis.call('PTTL', KEYS[1]) "
        "if t >= 0 and t < tonumber(ARGV[3]) then "
        "redis.call('PEXPIRE', KEYS[1], ARGV[3]) "
        "redis.call('PEXPIRE', KEYS[2], ARGV[3]) "
        "end "
        "return {tonumber(o[3]), n, cur} "
        "end "
        "if not (ARGV[4] and o[2] ~= cur and #cur == #ARGV[2] and "
        "string.sub(cur, 1, #ARGV[4]) == ARGV[4]) then "
        "redis.pcall('SET', KEYS[1] .. '" LOCK_WANTED_SUFFIX "', '1', 'PX', ARGV[3]) "
        "return redis.call('PTTL', KEYS[1]) "
        "end "
        "end "
        "redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) "
        "local v = (tonumber(redis.call('GET', KEYS[3])) or 0) + 1 "
        "local t = redis.call('TIME') "
        "local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) "
        "if v < now then v = now end "
        "redis.call('SET', KEYS[3], string.format('%.0f', v)) "
        "redis.call('DEL', KEYS[2]) "
        "redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'token', ARGV[2], 'holds', '1', "
        "'fence', string.format('%.0f', v)) "
        "redis.call('PEXPIRE', KEYS[2], ARGV[3]) "
        "return {v, 1, ARGV[2]}",
    /* One hold less, if the key holds the token ARGV[2] and the hash names owner ARGV[1] (a
     * key holding the token without a hash is a lease whose hash is gone: freed at once).
     * Without ARGV[2] it takes back the hold the owned acquire just sent on this connection
     * added, whatever the token: the undo of an answer that never came. The last hold frees
     * the lease as the plain release does (the key, the hash, the ":wanted" mark, and the
     * "<key>:released" notice when marked). Answers the holds left, or -1: not ours. */
    [LOCK__SCRIPT_RELEASE_OWNED] =
        "local cur = redis.call('GET', KEYS[1]) "
        "if not cur then return -1 end "
        "local o = redis.call('HMGET', KEYS[2], 'owner', 'token') "
        "if ARGV[2] then "
        "if cur ~= ARGV[2] then return -1 end "
        "if o[1] and (o[1] ~= ARGV[1] or o[2] ~= cur) then return -1 end "
        "elseif o[1] ~= ARGV[1] or o[2] ~= cur then "
        "return -1 "
        "end "
        "if o[1] then "
        "local n = redis.call('HINCRBY', KEYS[2], 'holds', -1) "
        "if n > 0 then return n end "
        "end "
        "local w = redis.pcall('GET', KEYS[1] .. '" LOCK_WANTED_SUFFIX "') "
        "if type(w) == 'table' then w = false end "
        "redis.call('DEL', KEYS[1], KEYS[2]) "
        "if w then "
        "redis.call('DEL', KEYS[1] .. '" LOCK_WANTED_SUFFIX "') "
        "redis.pcall('PUBLISH', KEYS[1] .. '" LOCK_RELEASED_SUFFIX "', '1') "
        "end "
        "return 0",
    /* Compare-and-pexpire for a reentrant lease: the token in the key, the owner in the hash;
     * the expiry of both only ever moves later (other holds rely on theirs). */
    [LOCK__SCRIPT_EXTEND_OWNED] =
        "if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end "
        "local o = redis.call('HMGET', KEYS[2], 'owner', 'token') "
        "if o[1] and (o[1] ~= ARGV[1] or o[2] ~= ARGV[2]) then return 0 end "
        "local t = redis.call('PTTL', KEYS[1]) "
        "if t >= 0 and t < tonumber(ARGV[3]) then "
        "redis.call('PEXPIRE', KEYS[1], ARGV[3]) "
        "if o[1] then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end "
        "end "
        "return 1",
    /* Raises the fence counter to at least ARGV[1], and the fence a reentrant lease of token
     * ARGV[2] keeps in its hash (what its re-acquisitions answer) likewise. */
    [LOCK__SCRIPT_RAISE_OWNED] =
        "local f = tonumber(ARGV[1]) "
        "local c = tonumber(redis.call('GET', KEYS[1]) or '0') "
        "if c == nil or c < f then redis.call('SET', KEYS[1], ARGV[1]) end "
        "local o = redis.call('HMGET', KEYS[2], 'token', 'fence') "
        "if o[1] == ARGV[2] and (tonumber(o[2] or '0') or 0) < f then "
        "redis.call('HSET', KEYS[2], 'fence', ARGV[1]) end "
        "return 1",
};

static char script_sha[LOCK__SCRIPT_COUNT][SHA_LEN + 1];
static pthread_once_t sha_once = PTHREAD_ONCE_INIT;

static void sha_init(void) {
    for (int i = 0; i < LOCK__SCRIPT_COUNT; i++)
        lock__sha1_hex(script_text[i], strlen(script_text[i]), script_sha[i]);
}

/* Returns script s's Lua text (static storage). This function can't fail. */
const char *lock__script_text(enum lock__script s) {
    return script_text[s];
}

/* Returns script s's SHA-1 as 40 lowercase hex digits (static storage; computed on the first
 * call, thread-safely). This function can't fail. */
const char *lock__script_sha(enum lock__script s) {
    pthread_once(&sha_once, sha_init);
    return script_sha[s];
}
