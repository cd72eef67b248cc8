## Tiled GEMM C = A x B per group (and per split-K piece), with pluggable operand views.
##
## One work-group computes a TM x TN tile of C; each work-item a WM x WN block of it, its rows and
## columns strided by the work-group's extent so that neighbouring work-items read neighbouring
## local-memory words (no bank conflicts) and write neighbouring global addresses (coalesced).
## The contraction is staged through local memory TK at a time.  The operand views decide what
## A, B and C are (implicit im2col, explicit column buffer, gather for the data gradient, ...).
##
## Parameters (all baked in): geom, real, index, M, N, K, TM, TN, TK, WM, WN, KSPLIT (contraction
## length of one split piece; K when unsplit), a_view/b_view/c_view and their dicts a/b/c,
## a_kfast/b_nfast (which index of the operand is contiguous in memory, for coalesced tile loads).
<%namespace name="prelude" file="prelude.mako"/>
<%namespace name="views" file="operands.mako"/>
${prelude.header(geom, real, index)}
<%
    RTM = TM // WM   # work-items along m
    RTN = TN // WN   # work-items along n
    THREADS = RTM * RTN
    SPLITS = (K + KSPLIT - 1) // KSPLIT
%>
${getattr(views, a_view)(a)}
${getattr(views, b_view)(b)}
${getattr(views, c_view)(c)}

#define CLC_M ((clc_idx)${M})
#define CLC_NN ((clc_idx)${N})
#define CLC_K ((clc_idx)${K})

__kernel __attribute__((reqd_work_group_size(${RTN}, ${RTM}, 1)))
void clc_gemm(__global const clc_real* restrict a_base, const long a_off,
              __global const clc_real* restrict b_base, const long b_off,
              __global clc_real* restrict c_base, const long c_off,
              __global const clc_real* restrict bias_base, const long bias_off,
              const int chunk)
{
    __global const clc_real* restrict a = a_base + a_off;
    __global const clc_real* restrict b = b_base + b_off;
    __global clc_real* restrict c = c_base + c_off;
    __global const clc_real* restrict bias = bias_base + bias_off;

    const int tx = get_local_id(0), ty = get_local_id(1);
    const int lid = ty * ${RTN} + tx;
    const clc_idx n0 = (clc_idx)get_group_id(0) * ${TN};
    const clc_idx m0 = (clc_idx)get_group_id(1) * ${TM};
    const clc_idx g = get_group_id(2) % CLC_G;
    const clc_idx split = get_group_id(2) / CLC_G;
    const clc_idx k_begin = split * ${KSPLIT};
    const clc_idx k_end = min(k_begin + ${KSPLIT}, CLC_K);

    /* +1 column: the A tile is written k-fast, which would otherwise hit one bank per row. */
    __local clc_real a_tile[${TK}][${TM} + 1];
    __local clc_real b_tile[${TK}][${TN} + 1];

    clc_real acc[${WM}][${WN}];
    for (int i = 0; i < ${WM}; ++i)
        for (int j = 0; j < ${WN}; ++j)
            acc[i][j] = (clc_real)0;

    for (clc_idx k0 = k_begin; k0 < k_end; k0 += ${TK}) {
        for (int t = lid; t < ${TM * TK}; t += ${THREADS}) {
% if a_kfast:
            const int kk = t % ${TK}, mm = t / ${TK};
% else:
            const int mm = t % ${TM}, kk = t / ${TM};
% endif
            const clc_idx m = m0 + mm, k = k0 + kk;
            a_tile[kk][mm] = (m < CLC_M && k < k_end) ? clc_load_a(a, g, m, k, chunk) : (clc_real)0;
        }
        for (int t = lid; t < ${TN * TK}; t += ${THREADS}) {
% if b_nfast:
            const int nn = t % ${TN}, kk = t / ${TN};
% else:
            const int kk = t % ${TK}, nn = t / ${TK};
% endif
            const clc_idx n = n0 + nn, k = k0 + kk;
            b_tile[kk][nn] = (n < CLC_NN && k < k_end) ? clc_load_b(b, g, k, n, chunk) : (clc_real)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        #pragma unroll
        for (int kk = 0; kk < ${TK}; ++kk) {
            clc_real a_reg[${WM}], b_reg[${WN}];
            for (int i = 0; i < ${WM}; ++i) a_reg[i] = a_tile[kk][ty + i * ${RTM}];
            for (int j = 0; j < ${WN}; ++j) b_reg[j] = b_tile[kk][tx + j * ${RTN}];
            for (int i = 0; i < ${WM}; ++i)
                for (int j = 0; j < ${WN}; ++j)
                    acc[i][j] = fma(a_reg[i], b_reg[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    for (int i = 0; i < ${WM}; ++i) {
        const clc_idx m = m0 + ty + i * ${RTM};
        if (m >= CLC_M) continue;
        for (int j = 0; j < ${WN}; ++j) {
            const clc_idx n = n0 + tx + j * ${RTN};
            if (n < CLC_NN) clc_store_c(c, bias, g, split, m, n, acc[i][j], chunk);
        }
    }
}
