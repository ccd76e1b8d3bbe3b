/* Exact conversions of JSON number text (already validated by tb_match_number) into the
 * schema's value kinds. None of these fail loudly: a value that does not convert is simply
 * absent (the function returns false). */
#ifndef TB_NUMBERS_H
#define TB_NUMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* value * 10^scale as an int64. With round_half_even, digits below the unit round half to
 * even (ts/dur: scale 3, microseconds -> nanoseconds); without it any nonzero digit below
 * the unit makes the value absent (Integer rule). False when out of int64 range. */
bool tb_num_to_i64(const uint8_t *p, size_t n, int scale, bool round_half_even, int64_t *out);

/* Correctly rounded double, as Python's float(text). */
bool tb_num_to_double(const uint8_t *p, size_t n, double *out);

/* Whether [p, p+n) is exactly one JSON number (a "numeric string"). */
bool tb_is_number_text(const uint8_t *p, size_t n);

/* "0x1f"-style hex text (flow ids) within int64. */
bool tb_hex_to_i64(const uint8_t *p, size_t n, int64_t *out);

/* One-time setup (a "C" locale for strtod); false on failure. */
bool tb_numbers_init(void);

#endif
