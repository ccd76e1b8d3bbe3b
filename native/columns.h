/* Growable column buffers: the dense columns (one value per event, grown together) and
 * sparse columns (rows + values, only for events that carry the field).
 *
 * Growth goes through realloc, which for the large blocks glibc serves with mmap is a
 * mremap (no copy); the final sizes are trimmed once at the end. */
#ifndef TB_COLUMNS_H
#define TB_COLUMNS_H

#include <stdint.h>
#include <string.h>

#include "json_scan.h"

/* One event's dense values while its object is being read. */
typedef struct {
    int64_t pid, tid, ts, dur, args_off;
    int32_t cat, name, pid_str, tid_str, args_len;
    uint8_t ph;
} tb_row;

#define TB_NDENSE 11

typedef struct {
    size_t n, cap;
    uint8_t *ph;
    int32_t *cat, *name, *pid_str, *tid_str, *args_len;
    int64_t *pid, *tid, *ts, *dur, *args_off;
} tb_dense;

/* Name, buffer format and address of each dense column, in schema.DENSE order. */
typedef struct {
    const char *name;
    char format;
    size_t itemsize;
    void **data;
} tb_colref;

void tb_dense_refs(tb_dense *d, tb_colref out[TB_NDENSE]);
void tb_dense_reserve(tb_dense *d, tb_scanner *s, size_t need);
/* Capacity up front for the events of text_bytes of JSON (at most one per
 * TB_BYTES_PER_EVENT_GUESS bytes: Kineto's events take 100-900), so the columns are not
 * grown (copied, remapped) a dozen times while the walk runs; what is left over is given
 * back when each column is handed to Python (trimmed to its size). */
#define TB_BYTES_PER_EVENT_GUESS 256
size_t tb_dense_expect(tb_dense *d, tb_scanner *s, size_t text_bytes);
void tb_dense_free(tb_dense *d);

static inline void tb_dense_push(tb_dense *d, tb_scanner *s, const tb_row *r)
{
    if (d->n == d->cap)
        tb_dense_reserve(d, s, d->n + 1);
    size_t i = d->n++;
    d->ph[i] = r->ph;
    d->cat[i] = r->cat;
    d->name[i] = r->name;
    d->pid[i] = r->pid;
    d->pid_str[i] = r->pid_str;
    d->tid[i] = r->tid;
    d->tid_str[i] = r->tid_str;
    d->ts[i] = r->ts;
    d->dur[i] = r->dur;
    d->args_off[i] = r->args_off;
    d->args_len[i] = r->args_len;
}

typedef struct {
    int32_t *rows;
    uint8_t *vals;
    size_t n, cap;
    size_t itemsize;
    size_t expect; /* events expected (tb_dense_expect): a column outgrowing its first block takes that at once */
} tb_sparse;

void tb_sparse_reserve(tb_sparse *c, tb_scanner *s, size_t need);
void tb_sparse_free(tb_sparse *c);

/* Last one wins: a key seen again in the same event first drops the earlier value. */
static inline void tb_sparse_drop(tb_sparse *c, int32_t row)
{
    if (c->n && c->rows[c->n - 1] == row)
        c->n--;
}

static inline void tb_sparse_push(tb_sparse *c, tb_scanner *s, int32_t row, const void *val)
{
    if (c->n == c->cap)
        tb_sparse_reserve(c, s, c->n + 1);
    c->rows[c->n] = row;
    memcpy(c->vals + c->n * c->itemsize, val, c->itemsize);
    c->n++;
}

#endif
