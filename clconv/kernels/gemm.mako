## Tiled GEMM C = A x B per group (and per split-K piece), with pluggable operand views.
##
## One work-group computes a TM x TN tile of C; each work-item a WM x WN block of it, made of
## (WM/VW) x (WN/VW) sub-blocks of VW x VW, the sub-blocks strided by the work-group's extent so
## that neighbouring work-items read neighbouring local-memory vectors (no bank conflicts, 16-byte
## local loads when VW = 4) and write neighbouring global addresses.  The contraction is staged
## through local memory TK at a time; the next step's global loads are issued into registers before
## the current step's arithmetic (software pipelining: their latency hides behind the FMAs).  Every
## load loop has a constant trip count, so the compiler unrolls it and hoists the loop-invariant
## part of each operand view's index decoding (the output-pixel split of an implicit im2col) out
## of the K loop.  Bounds checks on M, N and K are only emitted where the tile does not divide the
## matrix.  The operand views decide what A, B and C are (operands.mako).
##
## Entry point: clc_gemm.
## Parameters (all baked in): geom, real, data, index, entries, epilogue, bias, GEMMS (the GEMMs of
## one launch, the group index g's range: the groups, or Winograd's groups x tile positions), M, N, K, TM, TN, TK, WM, WN, VW (vector
## width of the register blocks: 1, 2 or 4, dividing WM and WN), PIPE (1: the next step's global
## loads are issued before the current step's arithmetic, as GPUs want; 0: load, then compute, which
## suits PoCL, where registers live across a barrier are spilled per work-item), KSPLIT (contraction
## length of one split piece; K when unsplit), a_view/b_view/c_view and their dicts a/b/c,
## a_kfast/b_nfast (which index of the operand is contiguous in memory, for coalesced tile loads),
## LPAD (elements of padding per local-memory tile row: it must keep rows VW-aligned for the
## vector loads, a multiple of VW where VW > 1, and spreads the k-fast stores over banks; the caller
## sizes local memory with it, so it chooses it), itemsize (bytes of one `real`: the local tiles are
## aligned to itemsize * VW bytes), GVA/GVB (A's / B's tile loads as aligned 4-element vectors along
## the operand's contiguous index, through the view's clc_at_a/clc_at_b; gemm.py's global_vectors
## says where: on an H200 they cut the 1x1 1024 layer's registers from 254 to 125 a work-item and
## its time by up to 22%), GV (the config key they come from; unused here).
##
## Split-K in one launch (c["finish"], the piece count): the kernel also takes `tickets` (one
## counter per output tile of one piece, zero between launches) and the result; after its piece's
## partials, each work-group counts itself in, and the last of a tile's pieces to arrive sums them
## in order into the result (clc_finish_c) and sets the counter back to zero.  Nothing waits on
## another work-group, so any order of running them is safe.
##
## Operand views with a vector form also define  clc_idx clc_at_a(g, m, k, chunk)  (clc_at_b(g, k,
## n, chunk)): the element's index in its buffer, contiguous along the fast index.
<%namespace name="prelude" file="prelude.mako"/>
<%namespace name="views" file="operands.mako"/>
${prelude.header(geom, real, index, data, epilogue, bias)}
#define CLC_GEMMS ${GEMMS}
${getattr(views, a_view)(a)}
${getattr(views, b_view)(b)}
${getattr(views, c_view)(c)}

#define CLC_M ((clc_idx)${M})
#define CLC_NN ((clc_idx)${N})
#define CLC_K ((clc_idx)${K})
${prelude.entry_points(self, entries)}\
##
<%def name="clc_gemm()">
<%
    RTM = TM // WM   # work-items along m
    RTN = TN // WN   # work-items along n
    THREADS = RTM * RTN
    AV = 4 if GVA else 1   # elements of one global load of A: 4 consecutive along its fast index
    BV = 4 if GVB else 1
    A_COUNT = TM * TK // AV
    B_COUNT = TN * TK // BV
    A_LOADS = -(-A_COUNT // THREADS)
    B_LOADS = -(-B_COUNT // THREADS)
    A_EXACT = A_COUNT % THREADS == 0
    B_EXACT = B_COUNT % THREADS == 0
    A_ROW = (TK if a_kfast else TM) // AV   # loads along one row of A's fast index in the tile
    B_ROW = (TN if b_nfast else TK) // BV
    avec = real if AV == 1 else f"{real}4"
    bvec = real if BV == 1 else f"{real}4"
    CHECK_M = M % TM != 0
    CHECK_N = N % TN != 0
    CHECK_K = (K % TK != 0) or (KSPLIT % TK != 0)
    FINISH = c.get("finish", 0)
    # a fence of the whole device's scope (limits.handoff_fence_of): NVIDIA's compiler lowers
    # mem_fence(CLK_GLOBAL_MEM_FENCE) to a work-group's (membar.cta)
    device_fence = 'asm volatile("membar.gl;" ::: "memory");' if c.get("fence") == "membar.gl" else "mem_fence(CLK_GLOBAL_MEM_FENCE);"
    A_STRIDE = TM + LPAD
    B_STRIDE = TN + LPAD
    vec = real if VW == 1 else f"{real}{VW}"
    comps = "0123456789abcdef"
    UNROLL = "#pragma unroll" if PIPE else ""
    # the row and column of C that register block element (i, j) holds: sub-blocks of VW strided by
    # the work-group's extent (the stores and FINISH's sum read the same mapping)
    BLOCK_ROW = f"m0 + (i / {VW} * {RTM} + ty) * {VW} + i % {VW}"
    BLOCK_COLUMN = f"n0 + (j / {VW} * {RTN} + tx) * {VW} + j % {VW}"
%>
<%def name="global_vector(operand, at)">\
## 4 consecutive elements of an operand along its fast index, from element `at` of its buffer, as
## one aligned vector load: the host offers it only where the operand is stored as clc_real, `at`
## is a multiple of 4, and the buffer's offset is too (Runner.run checks, else runs scalar loads).
## (vload4 takes any alignment, and so NVIDIA's compiler split it into 4 scalar loads.)
*((__global const ${real}4*)(${operand} + ${at}))\
</%def>
<%def name="local_store(tile, value, kk, rr, stride, width, transposed)">\
## A loaded value (a vector of `width` along the fast index) into a local tile stored k-major:
## `transposed` where the fast index is k (each lane then goes to its own tile row).
% if width == 1:
                ${tile}[${kk} * ${stride} + ${rr}] = ${value};
% elif transposed:
% for j in range(width):
                ${tile}[(${kk} + ${j}) * ${stride} + ${rr}] = ${value}.s${j};
% endfor
% else:
                vstore4(${value}, 0, ${tile} + ${kk} * ${stride} + ${rr});
% endif
</%def>
<%def name="tile_coords(k_fast, row, width, other)">\
## Work-item t's load i of a tile as (kk, other): `row` loads of `width` elements along the
## operand's fast index (k where `k_fast`), the rows one after another.  The fetch and the local
## stores decode it alike.
% if k_fast:
            const int kk = t % ${row} * ${width}, ${other} = t / ${row};
% else:
            const int ${other} = t % ${row} * ${width}, kk = t / ${row};
% endif
</%def>
<%def name="fetch(kstart)">
        /* global -> registers: A ${TM}x${TK} and B ${TK}x${TN} tiles starting at k = ${kstart} */
        ${UNROLL}
        for (int i = 0; i < ${A_LOADS}; ++i) {
            const int t = lid + i * ${THREADS};
${tile_coords(a_kfast, A_ROW, AV, "mm")}\
            const clc_idx m = m0 + mm, k = ${kstart} + kk;
<%
    conds = []
    if not A_EXACT: conds.append("t < %d" % A_COUNT)
    if CHECK_M: conds.append("m < CLC_M")
    if CHECK_K: conds.append("k < k_end")
    load = "clc_load_a(a, g, m, k, chunk)" if AV == 1 else capture(global_vector, "a", "clc_at_a(g, m, k, chunk)")
%>
% if conds:
            a_next[i] = (${" && ".join(conds)}) ? ${load} : (${avec})0;
% else:
            a_next[i] = ${load};
% endif
        }
        ${UNROLL}
        for (int i = 0; i < ${B_LOADS}; ++i) {
            const int t = lid + i * ${THREADS};
${tile_coords(not b_nfast, B_ROW, BV, "nn")}\
            const clc_idx n = n0 + nn, k = ${kstart} + kk;
<%
    conds = []
    if not B_EXACT: conds.append("t < %d" % B_COUNT)
    if CHECK_N: conds.append("n < CLC_NN")
    if CHECK_K: conds.append("k < k_end")
    load = "clc_load_b(b, g, k, n, chunk)" if BV == 1 else capture(global_vector, "b", "clc_at_b(g, k, n, chunk)")
%>
% if conds:
            b_next[i] = (${" && ".join(conds)}) ? ${load} : (${bvec})0;
% else:
            b_next[i] = ${load};
% endif
        }
</%def>

__kernel __attribute__((reqd_work_group_size(${RTN}, ${RTM}, 1)))
void clc_gemm(__global const clc_a_t* restrict a_base, const long a_off,
              __global const clc_b_t* restrict b_base, const long b_off,
              __global clc_c_t* restrict c_base, const long c_off,
              ${prelude.epilogue_params(bias, epilogue)}
              const int chunk${"," if FINISH else ")"}
% if FINISH:
              __global volatile int* restrict tickets, __global clc_data* restrict result_base, const long result_off)
% endif
{
    __global const clc_a_t* restrict a = a_base + a_off;
    __global const clc_b_t* restrict b = b_base + b_off;
    __global clc_c_t* restrict c = c_base + c_off;
    __global const clc_data* restrict bias = bias_base + bias_off;
    __global const clc_data* restrict residual = residual_base + residual_off;

    const int tx = get_local_id(0), ty = get_local_id(1);
    const int lid = ty * ${RTN} + tx;
    const clc_idx n0 = (clc_idx)get_group_id(0) * ${TN};
    const clc_idx m0 = (clc_idx)get_group_id(1) * ${TM};
    const clc_idx g = get_group_id(2) % CLC_GEMMS;
    const clc_idx split = get_group_id(2) / CLC_GEMMS;
    const clc_idx k_begin = split * ${KSPLIT};
    const clc_idx k_end = min(k_begin + ${KSPLIT}, CLC_K);

    /* Rows padded by ${LPAD}: the k-fast tile stores would otherwise hit one bank per row, and
       vector loads need rows that keep ${VW}-element alignment. */
    __local clc_real a_tile[${TK} * ${A_STRIDE}] __attribute__((aligned(${itemsize * VW})));
    __local clc_real b_tile[${TK} * ${B_STRIDE}] __attribute__((aligned(${itemsize * VW})));
% if FINISH:
    __local int last_piece;  /* whether this work-group's piece is its tile's last (FINISH) */
% endif

    clc_real acc[${WM}][${WN}];
    #pragma unroll
    for (int i = 0; i < ${WM}; ++i)
        #pragma unroll
        for (int j = 0; j < ${WN}; ++j)
            acc[i][j] = (clc_real)0;

    ${avec} a_next[${A_LOADS}];
    ${bvec} b_next[${B_LOADS}];
% if PIPE:
${fetch("k_begin")}
% endif
    for (clc_idx k0 = k_begin; k0 < k_end; k0 += ${TK}) {
% if not PIPE:
${fetch("k0")}
% endif
        /* registers -> local memory */
        #pragma unroll
        for (int i = 0; i < ${A_LOADS}; ++i) {
            const int t = lid + i * ${THREADS};
${tile_coords(a_kfast, A_ROW, AV, "mm")}\
% if not A_EXACT:
            if (t < ${A_COUNT})
% endif
            {
${local_store("a_tile", "a_next[i]", "kk", "mm", A_STRIDE, AV, a_kfast)}
            }
        }
        #pragma unroll
        for (int i = 0; i < ${B_LOADS}; ++i) {
            const int t = lid + i * ${THREADS};
${tile_coords(not b_nfast, B_ROW, BV, "nn")}\
% if not B_EXACT:
            if (t < ${B_COUNT})
% endif
            {
${local_store("b_tile", "b_next[i]", "kk", "nn", B_STRIDE, BV, not b_nfast)}
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
% if PIPE:
        {
            /* The next step's tiles, issued before this step's arithmetic.  No branch around them
               (on the last step they read this step's tiles again, never stored): behind one,
               NVIDIA's compiler placed the loads after the arithmetic, and every step then waited
               out their latency at the next barrier. */
            const clc_idx k_next = k0 + ${TK} < k_end ? k0 + ${TK} : k0;
${fetch("k_next")}
        }
% endif
        #pragma unroll
        for (int kk = 0; kk < ${TK}; ++kk) {
            clc_real a_reg[${WM}], b_reg[${WN}];
% for i in range(WM // VW):
% if VW == 1:
            a_reg[${i}] = a_tile[kk * ${A_STRIDE} + ty + ${i * RTM}];
% else:
            {
                const ${vec} v = *((__local const ${vec}*)(a_tile + kk * ${A_STRIDE}) + ty + ${i * RTM});
% for v in range(VW):
                a_reg[${i * VW + v}] = v.s${comps[v]};
% endfor
            }
% endif
% endfor
% for j in range(WN // VW):
% if VW == 1:
            b_reg[${j}] = b_tile[kk * ${B_STRIDE} + tx + ${j * RTN}];
% else:
            {
                const ${vec} v = *((__local const ${vec}*)(b_tile + kk * ${B_STRIDE}) + tx + ${j * RTN});
% for v in range(VW):
                b_reg[${j * VW + v}] = v.s${comps[v]};
% endfor
            }
% endif
% endfor
            #pragma unroll
            for (int i = 0; i < ${WM}; ++i)
                #pragma unroll
                for (int j = 0; j < ${WN}; ++j)
                    acc[i][j] = fma(a_reg[i], b_reg[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    /* register block (i, j) holds row m0 + (i / VW * RTM + ty) * VW + i % VW, likewise for columns */
    #pragma unroll
    for (int i = 0; i < ${WM}; ++i) {
        const clc_idx m = ${BLOCK_ROW};
% if CHECK_M:
        if (m >= CLC_M) continue;
% endif
% if c.get("vector"):
        /* a work-item's ${VW} neighbouring columns as one aligned vector store: a warp's store then
           covers whole 32-byte sectors, where scalar stores ${VW} columns apart write part of each
           (gemm.py's vector_stores: 0.61-0.82x the time on an H200's 83-103 MB results) */
        #pragma unroll
        for (int j = 0; j < ${WN}; j += ${VW}) {
            const clc_idx n = n0 + (j / ${VW} * ${RTN} + tx) * ${VW};
% if CHECK_N:
            if (n < CLC_NN)
% endif
            clc_store_c_vec(c, bias, residual, g, split, m, n, (${vec})(${", ".join(f"acc[i][j + {v}]" for v in range(VW))}), chunk);
        }
% else:
        #pragma unroll
        for (int j = 0; j < ${WN}; ++j) {
            const clc_idx n = ${BLOCK_COLUMN};
% if CHECK_N:
            if (n < CLC_NN)
% endif
            clc_store_c(c, bias, residual, g, split, m, n, acc[i][j], chunk);
        }
% endif
    }
% if FINISH:

    /* Count this piece of the tile in: every work-item's partials made visible to the whole device
       first (the fence: ${c.get("fence")}), then one atomic per work-group.  The piece that brings the count to
       ${FINISH} is the tile's last: it sums them all, in order, and sets the counter back to zero
       for the next launch (the queue runs launches in order, and no other piece of this one
       touches the counter again). */
    ${device_fence}
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (lid == 0) {
        const int tile = ((int)g * get_num_groups(1) + get_group_id(1)) * get_num_groups(0) + get_group_id(0);
        last_piece = atomic_inc(tickets + tile) == ${FINISH} - 1;
        if (last_piece)
            atomic_xchg(tickets + tile, 0);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!last_piece)
        return;
    ${device_fence}  /* the other pieces' partials are read after their counts */
    __global clc_data* restrict result = result_base + result_off;
    #pragma unroll
    for (int i = 0; i < ${WM}; ++i) {
        const clc_idx m = ${BLOCK_ROW};
% if CHECK_M:
        if (m >= CLC_M) continue;
% endif
        #pragma unroll
        for (int j = 0; j < ${WN}; ++j) {
            const clc_idx n = ${BLOCK_COLUMN};
% if CHECK_N:
            if (n < CLC_NN)
% endif
            clc_finish_c(c, result, bias, residual, g, m, n, chunk);
        }
    }
% endif
}
</%def>\
