#include "nesting.h"

static int contains(int64_t outer_start, int64_t outer_end, int64_t start, int64_t end)
{
    /* A zero-length event on the outer event's closing edge lies after it, not inside. */
    return outer_start <= start && end <= outer_end && (start < outer_end || outer_start == outer_end);
}

void tb_nest_parents(const int64_t *group, const int64_t *start, const int64_t *end, int64_t n,
                     int64_t *parent, int64_t *stack)
{
    int64_t top = 0; /* stack depth */
    for (int64_t i = 0; i < n; i++) {
        if (i > 0 && group[i] != group[i - 1])
            top = 0;
        while (top > 0) {
            int64_t j = stack[top - 1];
            if (contains(start[j], end[j], start[i], end[i]))
                break;
            top--;
        }
        parent[i] = top > 0 ? stack[top - 1] : -1;
        stack[top++] = i;
    }
}

int64_t tb_subtree_add(const int64_t *order, int64_t m, const int64_t *parent, int64_t *total, int64_t n)
{
    for (int64_t i = 0; i < m; i++) {
        int64_t k = order[i];
        if (k < 0 || k >= n)
            return i;
        int64_t p = parent[k];
        if (p >= n)
            return i;
        if (p >= 0)
            total[p] += total[k];
    }
    return -1;
}
