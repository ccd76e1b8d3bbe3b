/* The trace walk: one pass over a Kineto/Chrome trace's JSON text into the columns of
 * tb_profiler/decode/schema.py. Plain C, no Python: module.c runs it without the GIL and
 * turns the result into Python objects. */
#ifndef TB_DECODER_H
#define TB_DECODER_H

#include <stdbool.h>
#include <stdint.h>

#include "columns.h"
#include "intern.h"
#include "json_scan.h"

#define TB_MISSING_INT INT64_MIN
#define TB_PROGRESS_SLOTS 16 /* progress counters: one per decoder part (TB_MAX_PARTS at most) */

/* Sparse columns, in schema.sparse_dtypes() order. */
typedef struct {
    const char *name;
    char format; /* struct-module letter: q int64, i int32, B uint8, d float64 */
    size_t itemsize;
    bool string_id; /* values are ids into the string table */
} tb_colspec;

#define TB_NSPARSE 57
extern const tb_colspec tb_sparse_specs[TB_NSPARSE];

/* A top-level member other than traceEvents: decoded key, raw value text (copies). */
typedef struct {
    uint8_t *key, *val;
    size_t klen, vlen;
} tb_topentry;

/* One member of a counter event's args, for the dict-order rule (see counter_event). */
typedef struct {
    size_t koff, klen; /* key bytes in ckeys */
    size_t idx;        /* position in the object */
    size_t voff, vlen; /* number token relative to the args text; vlen 0: not a number */
} tb_cmember;

struct tb_par;

typedef struct {
    tb_scanner sc;
    uint8_t *buf; /* the document (written only for args compaction, never with keep_input) */
    size_t w;     /* args blob write pointer: buf[:w] is the blob, w <= read position */
    /* Set by the caller. keep_input: the document is never written (it may be a read-only
     * map of the file); each event's args_off addresses its args text where it lies in
     * the document, which is then the args blob. progress (or NULL): progress[k] holds the
     * bytes of events text decoder part k (0: the main thread) has walked, published every
     * few events with relaxed atomic stores, for another thread to show while this runs. */
    bool keep_input;
    int64_t *progress;
    int64_t walked;     /* this decoder's count behind progress[slot] */
    int slot;
    /* Parallel decoding of the events array (see "parallel events" in decoder_parallel.c). Set by
     * the caller: threads (<= 1: one pass), min_part (bytes of JSON per thread at least). */
    int threads;
    size_t min_part;
    struct tb_par *par; /* the parts being decoded by other threads, or NULL */
    int next_cut;       /* the first cut this decoder has not passed yet */
    bool is_part;       /* a helper: args stay in place (args_off into buf); stops at the next cut */
    int landed;         /* helper: the cut it stopped at, or -1 (it reached the array's end) */
    tb_intern strings;
    tb_dense dense;
    tb_sparse sparse[TB_NSPARSE];
    tb_topentry *top;
    size_t ntop, top_cap;
    bool found_events;
    /* scratch for counter events */
    tb_cmember *cmembers;
    size_t cmembers_cap;
    uint8_t *ckeys;
    size_t ckeys_cap;
} tb_decoder;

/* Must be called once before tb_decode (builds the args key table). */
bool tb_decoder_global_init(void);

/* Zero d first. Returns 0, or -1 with d->sc.err_* describing the problem. buf is modified
 * (args compaction); everything allocated stays in d until tb_decoder_free. */
int tb_decode(tb_decoder *d, uint8_t *buf, size_t len);

void tb_decoder_free(tb_decoder *d);

#endif
