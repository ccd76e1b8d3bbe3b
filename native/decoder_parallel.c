/* Parallel decoding of a big events array, for the trace walk (decoder.c): helper threads
 * decode parts of it from guessed cuts, and the main thread merges each part it lands on
 * exactly, so the result is that of one pass. See "parallel events" below. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "decoder_walk.h"

#ifdef TB_PARALLEL
#include <pthread.h>
#endif

/* ------------------------------------------------------------------ parallel events
 *
 * A big events array is split between threads without knowing where its events start:
 * each helper part starts at a guessed cut (a '{' after "}," in the second half, etc.)
 * and walks on like the main thread until it reaches the next cut or the array's end.
 * A guess is only trusted once the walk before it lands exactly on it at an event
 * boundary: then the events from there are the helper's, decoded in the same state a
 * single pass would have (same depth, the string table merged in first-seen order), so
 * the result is byte for byte that of one pass, and so is the first error. A wrong guess
 * (a cut inside a string or an args object) is never landed on and its part is dropped.
 *
 * Helpers only read the document; their events' args text stays in place until the main
 * thread merges them. The main thread writes the document (args compaction) only below every running
 * part's cut: before a write would reach one, that part is stopped (tb_par_guard). */

#define TB_MAX_PARTS 16
_Static_assert(TB_MAX_PARTS <= TB_PROGRESS_SLOTS, "a progress slot per part");
#define TB_CUT_SEARCH ((size_t)1 << 20) /* bytes searched from a target for a cut */

#ifdef TB_PARALLEL
typedef struct {
    tb_decoder d;         /* first: a helper finds its part from its decoder */
    const uint8_t *start; /* its cut */
    const uint8_t *stop;  /* where its walk ended: a later cut, or just after ']' */
    int depth;            /* the array's depth */
    bool joined, failed;  /* joined: no thread to wait for (never started, or done) */
    atomic_bool quit;     /* set by the main thread: its events are not needed */
    pthread_t th;
} tb_part;

typedef struct tb_par {
    const uint8_t *cuts[TB_MAX_PARTS]; /* cuts[k] = parts[k].start, increasing; cuts[0] unused */
    tb_part parts[TB_MAX_PARTS];
    int n;                             /* parts 1..n-1 are helpers */
    int32_t *map;                      /* scratch: a part's string ids -> the main table's */
} tb_par;

static bool is_ws(uint8_t c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* The first '{' at or after from (and before limit) that follows "}" "," (blanks allowed
 * between): where an event would start if that text is between two events. */
static const uint8_t *find_cut(const uint8_t *from, const uint8_t *limit, const uint8_t *lo)
{
    for (const uint8_t *p = from; p < limit; p++) {
        p = memchr(p, ',', (size_t)(limit - p));
        if (!p)
            return NULL;
        const uint8_t *b = p - 1, *f = p + 1;
        while (b > lo && is_ws(*b))
            b--;
        while (f < limit && is_ws(*f))
            f++;
        if (b > lo && *b == '}' && f < limit && *f == '{')
            return f;
    }
    return NULL;
}

/* Cut targets splitting [p, end) into `want` parts of about equal decoding work. Work is
 * estimated from samples: per window, its bytes plus, for each '{' in a sample of it, the
 * cost of an event or args object (measured on Kineto traces: an event costs about as
 * much as 1,200 bytes of text; timed on the V100 ResNet50 traces, the helper's part of a
 * two-way split ended 7 ms after the main walk reached its cut at 500, 2.5 ms at 1,200,
 * the same at 1,800), so a stretch of many small events (kernels, flows) gets a shorter
 * part than one of few long ones (call stacks, shapes). */
#define TB_SAMPLES 64
#define TB_SAMPLE_BYTES 4096
#define TB_BRACE_COST 600 /* bytes' worth of work per '{' (two per event with args) */

static void work_targets(const uint8_t *p, const uint8_t *end, int want, const uint8_t **targets)
{
    size_t len = (size_t)(end - p), win = len / TB_SAMPLES;
    double work[TB_SAMPLES + 1], total = 0;
    work[0] = 0;
    for (int i = 0; i < TB_SAMPLES; i++) {
        const uint8_t *w0 = p + win * (size_t)i;
        size_t n = win < TB_SAMPLE_BYTES ? win : TB_SAMPLE_BYTES, braces = 0;
        for (size_t j = 0; j < n; j++)
            braces += w0[j] == '{';
        total += (double)win + (double)braces * TB_BRACE_COST * ((double)win / (double)(n ? n : 1));
        work[i + 1] = total;
    }
    for (int k = 1, i = 0; k < want; k++) {
        double goal = total * k / want;
        while (i < TB_SAMPLES && work[i + 1] < goal)
            i++;
        double span = work[i + 1] - work[i], into = span > 0 ? (goal - work[i]) / span : 0;
        targets[k] = p + win * (size_t)i + (size_t)(into * (double)win);
    }
}

static void *part_main(void *arg)
{
    tb_part *pt = arg;
    tb_decoder *d = &pt->d;
    if (setjmp(d->sc.jb)) {
        pt->failed = true;
        return NULL;
    }
    tb_par *par = d->par;
    int k = d->slot; /* parts[k]: its text runs to the next cut, or the end */
    tb_expect_events(d, (size_t)((k + 1 < par->n ? par->cuts[k + 1] : d->sc.end) - pt->start));
    pt->stop = tb_read_events_from(d, pt->start, pt->depth);
    return NULL;
}

/* The first helper's cut: where the main walk's own part ends. */
const uint8_t *tb_par_first_cut(tb_decoder *d)
{
    return d->par->cuts[1];
}

bool tb_par_start(tb_decoder *d, const uint8_t *p, int depth)
{
    tb_scanner *s = &d->sc;
    size_t left = (size_t)(s->end - p);
    size_t min_part = d->min_part ? d->min_part : 1;
    if (d->is_part || d->par || d->threads <= 1 || left / 2 < min_part)
        return false;
    int want = d->threads < TB_MAX_PARTS ? d->threads : TB_MAX_PARTS;
    if ((size_t)want > left / min_part)
        want = (int)(left / min_part);
    tb_par *par = calloc(1, sizeof *par);
    if (!par)
        return false; /* one pass works without it */
    par->n = 1;
    const uint8_t *targets[TB_MAX_PARTS];
    work_targets(p, s->end, want, targets);
    const uint8_t *last = p;
    for (int k = 1; k < want; k++) {
        const uint8_t *target = targets[k];
        if (target <= last)
            target = last + 1;
        const uint8_t *limit = (size_t)(s->end - target) > TB_CUT_SEARCH ? target + TB_CUT_SEARCH : s->end;
        const uint8_t *cut = target < s->end ? find_cut(target, limit, p) : NULL;
        if (cut && cut > last)
            par->cuts[par->n++] = last = cut;
    }
    if (par->n < 2) {
        free(par);
        return false;
    }
    d->par = par;
    d->next_cut = 1;
    for (int k = 1; k < par->n; k++) {
        tb_part *pt = &par->parts[k];
        tb_decoder *h = &pt->d;
        h->buf = d->buf;
        h->sc.base = s->base;
        h->sc.end = s->end;
        for (int c = 0; c < TB_NSPARSE; c++)
            h->sparse[c].itemsize = tb_sparse_specs[c].itemsize;
        h->is_part = true;
        h->keep_input = d->keep_input;
        h->progress = d->progress;
        h->slot = k;
        h->par = par;
        h->next_cut = k + 1;
        h->landed = -1;
        pt->start = par->cuts[k];
        pt->depth = depth;
        atomic_init(&pt->quit, false);
        pt->joined = true;
    }
    for (int k = 1; k < par->n; k++) {
        tb_part *pt = &par->parts[k];
        if (pthread_create(&pt->th, NULL, part_main, pt) != 0) {
            tb_par_finish(d); /* no thread to spare: one pass */
            return false;
        }
        pt->joined = false;
    }
    return true;
}

static void part_join(tb_part *pt)
{
    if (!pt->joined) {
        pthread_join(pt->th, NULL);
        pt->joined = true;
    }
}

/* Stops and joins every running part whose cut is below write_end: the main thread is
 * about to write there, and their events are not needed (the main walk passed them). */
void tb_par_guard(tb_decoder *d, const uint8_t *write_end)
{
    tb_par *par = d->par;
    for (int k = 1; k < par->n && par->cuts[k] < write_end; k++) {
        atomic_store(&par->parts[k].quit, true);
        part_join(&par->parts[k]);
    }
}

/* Joins and frees every part (after the array, and on any error). */
void tb_par_finish(tb_decoder *d)
{
    tb_par *par = d->par;
    if (!par)
        return;
    for (int k = 1; k < par->n; k++)
        atomic_store(&par->parts[k].quit, true);
    for (int k = 1; k < par->n; k++) {
        part_join(&par->parts[k]);
        tb_decoder_free(&par->parts[k].d);
    }
    free(par->map);
    free(par);
    d->par = NULL;
}

static void move_args(tb_decoder *d, const tb_dense *H, size_t n0);

static inline int32_t remap(const int32_t *map, int32_t id)
{
    return id >= 0 ? map[id] : id;
}

/* Appends part pt's events to the main decoder d: string ids through the merged table,
 * rows after d's, args texts moved to d's blob. */
static void merge_part(tb_decoder *d, tb_part *pt)
{
    tb_scanner *s = &d->sc;
    tb_decoder *h = &pt->d;
    tb_par *par = d->par;
    size_t n0 = d->dense.n, nh = h->dense.n;
    if (n0 + nh > INT32_MAX)
        tb_fail_kind(s, TB_ERR_LIMIT, pt->start, "more than 2^31-1 events");
    free(par->map);
    par->map = malloc((h->strings.n ? h->strings.n : 1) * sizeof *par->map);
    if (!par->map)
        tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
    for (size_t i = 0; i < h->strings.n; i++) {
        size_t len;
        int ascii;
        const uint8_t *b = tb_intern_bytes(&h->strings, i, &len, &ascii);
        par->map[i] = tb_intern_get(&d->strings, s, b, len);
    }
    const int32_t *map = par->map;
    tb_dense_reserve(&d->dense, s, n0 + nh);
    tb_dense *D = &d->dense, *H = &h->dense;
    for (size_t i = 0; i < nh; i++) {
        D->ph[n0 + i] = H->ph[i];
        D->cat[n0 + i] = remap(map, H->cat[i]);
        D->name[n0 + i] = remap(map, H->name[i]);
        D->pid_str[n0 + i] = remap(map, H->pid_str[i]);
        D->tid_str[n0 + i] = remap(map, H->tid_str[i]);
        D->pid[n0 + i] = H->pid[i];
        D->tid[n0 + i] = H->tid[i];
        D->ts[n0 + i] = H->ts[i];
        D->dur[n0 + i] = H->dur[i];
        D->args_len[n0 + i] = H->args_len[i];
    }
    D->n = n0 + nh;
    for (int c = 0; c < TB_NSPARSE; c++) {
        tb_sparse *dc = &d->sparse[c], *hc = &h->sparse[c];
        if (!hc->n)
            continue;
        tb_sparse_reserve(dc, s, dc->n + hc->n);
        for (size_t i = 0; i < hc->n; i++)
            dc->rows[dc->n + i] = hc->rows[i] + (int32_t)n0;
        if (tb_sparse_specs[c].string_id) {
            int32_t *out = (int32_t *)(void *)dc->vals + dc->n;
            const int32_t *in = (const int32_t *)(void *)hc->vals;
            for (size_t i = 0; i < hc->n; i++)
                out[i] = remap(map, in[i]);
        } else {
            memcpy(dc->vals + dc->n * dc->itemsize, hc->vals, hc->n * hc->itemsize);
        }
        dc->n += hc->n;
    }
    move_args(d, H, n0);
}

/* The compaction a single pass would have done for a helper's events (merged at rows
 * n0...): each args text, still where the helper read it, moves down to the blob's end.
 * The texts come in document order and the blob's end stays at or below each one, so
 * every move is to a lower address and overwrites only text already moved or skipped. */
static void move_args(tb_decoder *d, const tb_dense *H, size_t n0)
{
    if (d->keep_input) { /* the texts stay where they are: so do their offsets */
        memcpy(d->dense.args_off + n0, H->args_off, H->n * sizeof *H->args_off);
        return;
    }
    size_t last = 0; /* the end of the helper's last args text: no write reaches past it */
    for (size_t i = H->n; i-- > 0;)
        if (H->args_len[i]) {
            last = (size_t)H->args_off[i] + (size_t)H->args_len[i];
            break;
        }
    if (last)
        tb_par_guard(d, d->buf + last);
    for (size_t i = 0; i < H->n; i++) {
        size_t len = (size_t)H->args_len[i];
        d->dense.args_off[n0 + i] = (int64_t)d->w;
        if (len) {
            memmove(d->buf + d->w, d->buf + H->args_off[i], len);
            d->w += len;
        }
    }
}

/* Called by a walk at each event start p after the first: when p is the next cut, a
 * helper stops (returns p) and the main thread merges that part, and the ones it led to
 * (returns where the last of them stopped: after the array's ']'). NULL: walk on. */
const uint8_t *tb_par_landed(tb_decoder *d, const uint8_t *p)
{
    tb_par *par = d->par;
    while (d->next_cut < par->n && par->cuts[d->next_cut] < p)
        d->next_cut++; /* passed: that guess was inside an event */
    if (d->is_part && atomic_load_explicit(&((tb_part *)(void *)d)->quit, memory_order_relaxed))
        tb_fail_kind(&d->sc, TB_ERR_LIMIT, p, "parallel part no longer needed");
    if (d->next_cut >= par->n || par->cuts[d->next_cut] != p)
        return NULL;
    if (d->is_part) {
        d->landed = d->next_cut;
        return p;
    }
    for (int k = d->next_cut;;) {
        tb_part *pt = &par->parts[k];
        part_join(pt);
        if (pt->failed) {
            if (atomic_load(&pt->quit)) /* cannot happen: a part in the chain is never stopped */
                tb_fail_kind(&d->sc, TB_ERR_LIMIT, pt->start, "internal error in parallel decoding");
            d->sc.err_kind = pt->d.sc.err_kind; /* the error a single pass would have met first */
            d->sc.err_msg = pt->d.sc.err_msg;
            d->sc.err_off = pt->d.sc.err_off;
            longjmp(d->sc.jb, 1);
        }
        merge_part(d, pt);
        tb_decoder_free(&pt->d); /* its columns now live in d: give them back now */
        if (pt->d.landed < 0)
            return pt->stop;
        k = pt->d.landed;
    }
}
#else
const uint8_t *tb_par_first_cut(tb_decoder *d)
{
    return d->sc.end;
}
bool tb_par_start(tb_decoder *d, const uint8_t *p, int depth)
{
    (void)d, (void)p, (void)depth;
    return false;
}
void tb_par_guard(tb_decoder *d, const uint8_t *write_end)
{
    (void)d, (void)write_end;
}
void tb_par_finish(tb_decoder *d)
{
    (void)d;
}
const uint8_t *tb_par_landed(tb_decoder *d, const uint8_t *p)
{
    (void)d, (void)p;
    return NULL;
}
#endif
