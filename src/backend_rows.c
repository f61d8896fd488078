/* The shape rules of fused row groups (backend.h): the partition forms
 * row groups by them (plan/partition.c), the row kernel indexes its
 * inputs by them (vulkan/codegen/codegen_rows.c). One copy for both sides
 * of the contract. */
#include "backend.h"

static int64_t numel_range(const int64_t *dim, int from, int to)
{
    int64_t n = 1;
    for (int d = from; d < to; d++) n *= dim[d];
    return n;
}

vf_row_class vf_row_classify(int rank, const int64_t *dim, int row_rank, const int64_t *row_dim)
{
    if (rank == row_rank) {
        bool same = true;
        for (int d = 0; d < rank; d++) same = same && dim[d] == row_dim[d];
        if (same) return VF_ROW_WIDE;
        for (int d = 0; d + 1 < rank; d++)
            if (dim[d] != row_dim[d]) return VF_ROW_NONE;
        return dim[rank - 1] == 1 ? VF_ROW_SCALAR : VF_ROW_NONE;
    }
    if (rank + 1 == row_rank) {
        for (int d = 0; d < rank; d++)
            if (dim[d] != row_dim[d]) return VF_ROW_NONE;
        return VF_ROW_DROPPED;
    }
    return VF_ROW_NONE;
}

bool vf_row_input_index(int rank, const int64_t *dim, int row_rank, const int64_t *row_dim, vf_row_class where,
                        uint32_t *row_stride, uint32_t *col_stride)
{
    int R = row_rank;
    int64_t rows = numel_range(row_dim, 0, R - 1), cols = row_dim[R - 1];
    int64_t n = numel_range(dim, 0, rank);
    *row_stride = *col_stride = 0;
    if (where == VF_ROW_DROPPED) {   /* aligned with [rows] */
        if (n == rows && rows != 1) *row_stride = 1;
        return n == 1 || n == rows;
    }
    if (rank > R) return false;
    bool colfull = rank >= 1 && dim[rank - 1] != 1;
    if (colfull && (cols == 1 || dim[rank - 1] != cols)) return false;
    int64_t outer = rank >= 1 ? numel_range(dim, 0, rank - 1) : 1;
    if (outer != 1 && outer != rows) return false;
    if (colfull && where == VF_ROW_SCALAR) return false;
    *col_stride = colfull ? 1u : 0u;
    if (outer == rows && rows != 1) *row_stride = colfull ? (uint32_t)cols : 1u;
    return true;
}
