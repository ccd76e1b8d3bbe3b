/* Interval nesting: the innermost enclosing interval of each interval, per group.
 *
 * Host-side events of one thread nest like a call stack (a ProfilerStep holds an op
 * that holds its children), but finding each one's parent is a stack walk that no
 * numpy primitive expresses, so it lives here (O(n), one pass).
 */
#ifndef TB_NESTING_H
#define TB_NESTING_H

#include <stdint.h>

/* Events must be sorted by (group, start, end descending). parent[i] receives the index
 * of the innermost earlier event of the same group whose [start, end] contains event i's,
 * or -1. An event that only partly overlaps the open one is not its child (the open one
 * is closed). stack: scratch space of n int64. */
void tb_nest_parents(const int64_t *group, const int64_t *start, const int64_t *end, int64_t n,
                     int64_t *parent, int64_t *stack);

/* For k in order (every index in [0, n), a child before its parent): total[parent[k]] +=
 * total[k] where parent[k] >= 0, in that order: each node's value plus its descendants'.
 * Returns the first position of order whose index (or parent) is out of range, or -1
 * when all are in range (then the sums are done; else nothing past that position is). */
int64_t tb_subtree_add(const int64_t *order, int64_t m, const int64_t *parent, int64_t *total, int64_t n);

#endif
