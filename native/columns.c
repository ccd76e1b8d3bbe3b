/* Growable column buffers; see columns.h. */
#include "columns.h"

#include <stdlib.h>

void tb_dense_refs(tb_dense *d, tb_colref out[TB_NDENSE])
{
    tb_colref refs[TB_NDENSE] = {
        {"ph", 'B', 1, (void **)&d->ph},
        {"cat", 'i', 4, (void **)&d->cat},
        {"name", 'i', 4, (void **)&d->name},
        {"pid", 'q', 8, (void **)&d->pid},
        {"pid_str", 'i', 4, (void **)&d->pid_str},
        {"tid", 'q', 8, (void **)&d->tid},
        {"tid_str", 'i', 4, (void **)&d->tid_str},
        {"ts", 'q', 8, (void **)&d->ts},
        {"dur", 'q', 8, (void **)&d->dur},
        {"args_off", 'q', 8, (void **)&d->args_off},
        {"args_len", 'i', 4, (void **)&d->args_len},
    };
    memcpy(out, refs, sizeof refs);
}

/* Capacity for `need` values: doubling while small, then +50% (less slack at 1 GB). */
static size_t next_cap(tb_scanner *s, size_t cap, size_t need)
{
    size_t ncap = cap ? cap : 1024;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 16)
            tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
        ncap = ncap < (1u << 20) ? ncap * 2 : ncap + ncap / 2;
    }
    return ncap;
}

void tb_dense_reserve(tb_dense *d, tb_scanner *s, size_t need)
{
    if (need <= d->cap)
        return;
    size_t ncap = next_cap(s, d->cap, need);
    tb_colref refs[TB_NDENSE];
    tb_dense_refs(d, refs);
    for (int i = 0; i < TB_NDENSE; i++) {
        void *p = realloc(*refs[i].data, ncap * refs[i].itemsize);
        if (!p)
            tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
        *refs[i].data = p;
    }
    d->cap = ncap;
}

size_t tb_dense_expect(tb_dense *d, tb_scanner *s, size_t text_bytes)
{
    size_t guess = text_bytes / TB_BYTES_PER_EVENT_GUESS;
    if (guess > d->cap)
        tb_dense_reserve(d, s, guess);
    return guess;
}

void tb_dense_free(tb_dense *d)
{
    tb_colref refs[TB_NDENSE];
    tb_dense_refs(d, refs);
    for (int i = 0; i < TB_NDENSE; i++) {
        free(*refs[i].data);
        *refs[i].data = NULL;
    }
    d->n = d->cap = 0;
}

void tb_sparse_reserve(tb_sparse *c, tb_scanner *s, size_t need)
{
    if (need <= c->cap)
        return;
    size_t ncap = next_cap(s, c->cap, need);
    if (c->cap && c->expect > ncap) /* a column most events fill: its expected size at once */
        ncap = c->expect;
    int32_t *rows = realloc(c->rows, ncap * sizeof *rows);
    if (!rows)
        tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
    c->rows = rows;
    uint8_t *vals = realloc(c->vals, ncap * c->itemsize);
    if (!vals)
        tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
    c->vals = vals;
    c->cap = ncap;
}

void tb_sparse_free(tb_sparse *c)
{
    free(c->rows);
    free(c->vals);
    c->rows = NULL;
    c->vals = NULL;
    c->n = c->cap = 0;
}
