/* lock_sha1.c - SHA-1 of a byte string as 40 hex digits, for EVALSHA.
 *
 * Redis names a cached Lua script by the SHA-1 of its text. Computing it here
 * lets a new connection call EVALSHA at once, with no SCRIPT LOAD round trip;
 * a NOSCRIPT answer still falls back to EVAL (lock_call.c). SHA-1 is used
 * only as Redis's script name, never for security. FIPS 180-4, section 6.1.
 */
#include "lock/lock.h"

#include <string.h>

#include "lock/lock_impl.h"

static uint32_t rol(uint32_t x, unsigned n) {
    return (x << n) | (x >> (32 - n));
}

/* Processes one 64-byte block into h[5]. */
static void sha1_block(uint32_t h[5], const unsigned char *p) {
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5a827999u;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ed9eba1u;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8f1bbcdcu;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6u;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

/* Writes the SHA-1 of data[0..len) as 40 lowercase hex digits and a NUL into the caller's out.
 * This function can't fail. */
void lock__sha1_hex(const char *data, size_t len, char out[41]) {
    static const char hex[] = "0123456789abcdef";
    uint32_t h[5] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u};
    const unsigned char *p = (const unsigned char *)data;
    size_t left = len;
    for (; left >= 64; left -= 64, p += 64)
        sha1_block(h, p);

    unsigned char tail[128];
    memset(tail, 0, sizeof tail);
    memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t tlen = left + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8u;
    for (int i = 0; i < 8; i++)
        tail[tlen - 1 - (size_t)i] = (unsigned char)(bits >> (8 * i));
    for (size_t off = 0; off < tlen; off += 64)
        sha1_block(h, tail + off);

    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) {
            unsigned char byte = (unsigned char)(h[i] >> (24 - 8 * j));
            out[8 * i + 2 * j] = hex[byte >> 4];
            out[8 * i + 2 * j + 1] = hex[byte & 0x0f];
        }
    out[40] = '\0';
}
