/* cli.h - the command-line values the programs share: whole numbers in a range,
 * durations in seconds, HOST[:PORT].
 *
 * market-server (server/config.c), market-seed and market-load read their
 * flags with these, so a number means the same thing to all three: decimal
 * digits only (no sign, no spaces, no 0x), within the bounds the flag names.
 * Every function is pure: it reads its arguments and writes its outputs, and
 * leaves the outputs alone when it fails. Depends on nothing.
 */
#ifndef GM_CLI_CLI_H
#define GM_CLI_CLI_H

#include <stddef.h>
#include <stdint.h>

/* ---- error codes: 0 is success, every error is negative ---- */

#define CLI_ERRNO_MAP(X)                                                                           \
    X(OK, 0, "success")                                                                            \
    X(ERR_SYNTAX, -1, "not a number of the form wanted")                                           \
    X(ERR_RANGE, -2, "out of range")                                                               \
    X(ERR_TOO_LONG, -3, "too long")

enum cli_err {
#define CLI_ERR_ENUM(name, val, msg) CLI_##name = (val),
    CLI_ERRNO_MAP(CLI_ERR_ENUM)
#undef CLI_ERR_ENUM
};

/* Parses s, decimal digits only, into *out when lo <= value <= hi. Returns
 * CLI_OK, CLI_ERR_SYNTAX (empty, NULL, a sign, a space, any other character)
 * or CLI_ERR_RANGE (outside lo..hi, or past UINT64_MAX). */
int cli_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* Parses a positive number of seconds with an optional fraction ("10",
 * "0.5", ".25", "2.") into *out when 0 < value <= max_s. Returns CLI_OK,
 * CLI_ERR_SYNTAX (no digits, a sign, an exponent, a unit, inf or nan) or
 * CLI_ERR_RANGE (zero, or above max_s). */
int cli_parse_seconds(const char *s, double max_s, double *out);

/* Parses a whole duration "N" or "N" followed by one unit, s, m, h or d ("90s",
 * "15m", "1h", "7d"; no unit: seconds), into *out seconds when 1 <= value <= max_s.
 * Returns CLI_OK, CLI_ERR_SYNTAX (no digits, a sign, a fraction, another unit or
 * more than one) or CLI_ERR_RANGE (zero, above max_s, or past UINT64_MAX). */
int cli_parse_duration(const char *s, uint64_t max_s, uint64_t *out);

/* Splits "HOST", "HOST:PORT", "[V6]" or "[V6]:PORT" into host (brackets
 * removed) and port (default_port when none is given; otherwise 1..65535).
 * Returns CLI_OK, CLI_ERR_SYNTAX (empty host, a bracket left open, junk after
 * ']', a port that is not a number), CLI_ERR_RANGE (port 0 or above 65535)
 * or CLI_ERR_TOO_LONG (host does not fit hostlen). */
int cli_split_hostport(const char *s, uint16_t default_port, char *host, size_t hostlen,
                       uint16_t *port);

/* Returns a static description of a cli code. Can't fail. */
const char *cli_strerror(int err);

#endif /* GM_CLI_CLI_H */
