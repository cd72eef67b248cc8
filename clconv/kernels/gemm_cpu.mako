## GEMM C = A x B per group (and per split-K piece) for CPU devices (PoCL): no local memory, no
## barriers.  Each work-item computes a WM x VN block of C: WM rows of M for a run of VN consecutive
## columns of N, held as WM vectors of VN lanes.  The contraction loop is innermost: per k it loads
## one VN-wide row of B and broadcasts WM scalars of A into WM vector FMAs, which LLVM maps onto
## AVX/AVX-512 FMAs with the A broadcast folded into the instruction.  (PoCL's own vectorisation
## across work-items does not reach into a kernel's inner loops, so the vectors are explicit.)
##
## NB > 1: a work-item computes NB such blocks side by side (NB x VN columns), with the contraction
## cut into steps of KC; per step it runs every block over the same WM x KC slice of A (kept in the
## first-level cache), so A is swept once per NB x VN columns instead of once per VN.  The blocks'
## sums wait in a private array between steps.  (For weights larger than a core's cache: small
## images give few columns, and each sweep of A came from the shared cache or memory.)
##
## B is read with vload where the view is contiguous along N (B_ROW below: the address of
## B(k, n) and the step per k); a run that crosses an image boundary or the matrix edge, and
## views without a row form (the implicit im2col), assemble the vector lane by lane from the
## operand view.  C is stored the same way: one vstore when the run lies inside one row of C.
##
## Entry points:
##   clc_gemm    the GEMM (reading A packed when A_PACKED)
##   clc_pack_a  A's packed copy, asked for (and launched first) only when A_PACKED
##   clc_pack_b  B's packed copy, asked for (and launched before each chunk's GEMM) only when B_PACKED
## Parameters (all baked in): geom, real, data, index, entries, epilogue, bias (the prelude's: C is
## the pass's result under c_nchw), GEMMS (as gemm.mako's), M, N, K, a_view/b_view/c_view and their dicts a/b/c
## (operands.mako), WM (rows per work-item); for clc_gemm also KSPLIT (contraction
## length of one split piece; K when unsplit), VN (columns per block: 4, 8 or 16), NB (blocks per
## work-item) and KC (the contraction's step where NB > 1), LM
## (work-items per work-group, along M), b_row (Python's decision that this view/geometry has a row
## form), RUN (columns of N that are contiguous in B: N, or one image's pixels), A_PACKED, B_PACKED.
##
## Types: A, B and C are clc_a_t/clc_b_t/clc_c_t (the views': clc_data for the call's tensors, read
## with clc_ld and the prelude's vload, clc_real for workspaces, read in place).  The packed copy of
## A is a workspace: clc_real, whatever the weight's storage.
##
## A_PACKED (weights, or the weight gradient's dy rows, as A): clc_pack_a first copies A (a weight
## once per call, dy rows per batch chunk: its `chunk` argument) into Ap[g][m block][k][WM], so that the WM
## values one k step broadcasts are one cache line and consecutive k steps are consecutive lines.
## Read in place, a k step touches WM rows of A (a weight's rows are CI*KV apart, the transposed
## views' k steps CO or CI*KV apart: often a new 4 KiB page per step, or a power-of-two stride
## that maps every row to one cache set; dy's rows are a channel's pixels apart); packed, the
## transposed convolution's GEMM ran 2.3x faster on PoCL, and weight gradients in 0.83-0.95 of
## the time (docs/performance.md).
##
## B_PACKED (B's rows a page or more apart: gemm.packs_b): clc_pack_b first copies the chunk's B into
## Bp[g][n block][k][VN], zeros past N, so that a work-item's walk down the contraction reads
## consecutive lines of one panel instead of a line from a new page per k step: past about a thousand
## pages a walk outruns the TLB (on PoCL, a 2-core AVX2 EPYC, im2col's forward GEMM over 32x32 images
## fell from 143 to 72 GFLOP/s as K grew from 576 to 3456 in place, and ran at 133-146 in panels).
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
#define CLC_MB ${-(-M // WM)}  /* blocks of WM rows */
#define CLC_NBLK ${-(-N // VN)}  /* panels of VN columns (B_PACKED) */
${prelude.entry_points(self, entries)}\
##
<%!
def _b_row_form(b_view, b, N, b_row):
    """The address of B(k, n) (format with k= and n=) and the step per k, for views contiguous
    along N (b_row, Python's decision); None for the others.  A column buffer's rows may be padded
    (LD: gemm.spread_rows)."""
    if not b_row:
        return None
    ldb = f"((clc_idx){b.get('LD', N)})" if b_view == "b_columns" else "CLC_NN"
    return {
        "b_columns": (f"b + (g * CLC_K + {{k}}) * {ldb} + {{n}}", f"{ldb}"),
        "b_input_pointwise": ("b + ((chunk + {n} / CLC_OP) * CLC_CIN + g * CLC_CI + {k}) * CLC_IP + {n} % CLC_OP",
                              "CLC_IP"),
        "b_grad_output_cols": ("b + ((chunk + {n} / CLC_OP) * CLC_COUT + g * CLC_CO + {k}) * CLC_OP + {n} % CLC_OP",
                               "CLC_OP"),
        "b_grad_output_gather": ("b + ((chunk + {n} / CLC_IP) * CLC_COUT + g * CLC_CO + {k}) * CLC_OP + {n} % CLC_IP",
                                 "CLC_OP"),
    }.get(b_view)
%>\
<%def name="b_row_load(ptr)">\
## a row of B in place as a vector: the column buffer is a clc_real workspace, the other views the call's tensors
${f"vload{VN}(0, {ptr})" if b_view == "b_columns" else capture(prelude.vload, VN, ptr)}</%def>\
<%def name="clc_pack_a()">
/* global: (K, MB, G).  Ap[g][mb][k][i] = A(mb * WM + i, k); rows past M repeat row M-1 (their
   sums are never stored), so the GEMM reads whole blocks without tests. */
__kernel void clc_pack_a(__global const clc_a_t* restrict a_base, const long a_off,
                         __global clc_real* restrict packed_base, const long packed_off, const int chunk)
{
    const clc_idx k = get_global_id(0), mb = get_global_id(1), g = get_global_id(2);
    __global const clc_a_t* restrict a = a_base + a_off;
    __global clc_real* restrict dst = packed_base + packed_off + ((g * CLC_MB + mb) * CLC_K + k) * ${WM};
% for i in range(WM):
    dst[${i}] = clc_load_a(a, g, min(mb * ${WM} + ${i}, CLC_M - 1), k, chunk);
% endfor
}
</%def>\
##
<%def name="clc_pack_b()">
/* global: (K, NBLK, G).  Bp[g][nb][k][v] = B(k, nb * VN + v); zeros past N, so that the GEMM reads
   whole panels without tests (their columns are never stored). */
__kernel void clc_pack_b(__global const clc_b_t* restrict b_base, const long b_off,
                         __global clc_real* restrict packed_base, const long packed_off, const int chunk)
{
    const clc_idx k = get_global_id(0), nb = get_global_id(1), g = get_global_id(2);
    __global const clc_b_t* restrict b = b_base + b_off;
    __global clc_real* restrict dst = packed_base + packed_off + ((g * CLC_NBLK + nb) * CLC_K + k) * ${VN};
<% row = _b_row_form(b_view, b, N, b_row) %>\
% if row:
    const clc_idx n0 = nb * ${VN};
    if (n0 % ${RUN} + ${VN} <= ${RUN} && n0 + ${VN} <= CLC_NN) {  /* inside one run of B's row: one vector */
        vstore${VN}(${b_row_load(row[0].format(k="k", n="n0"))}, 0, dst);
        return;
    }
% endif
% for v in range(VN):
    dst[${v}] = nb * ${VN} + ${v} < CLC_NN ? clc_load_b(b, g, k, nb * ${VN} + ${v}, chunk) : (clc_real)0;
% endfor
}
</%def>\
##
<%def name="clc_gemm()">
<%
    vec = f"{real}{VN}"
    ivec = capture(prelude.mask_type, real, VN)
    comps = "0123456789abcdef"
    CHECK_M = M % WM != 0
    # A read in place by a last block of rows that M does not fill: the block shifts back to end at
    # M (SHIFT_M, as block_columns does for N) where M holds a whole block, so that its WM rows stay
    # at constant distances from one address; otherwise each row is clamped to M - 1 (CLAMP_M)
    SHIFT_M = CHECK_M and not A_PACKED and M >= WM
    CLAMP_M = CHECK_M and not A_PACKED and not SHIFT_M
    B_ROW = _b_row_form(b_view, b, N, b_row)
    if B_PACKED:  # the packed panels (clc_pack_b): VN columns a k step, each panel whole
        B_ROW = (f"b + (g * CLC_NBLK + {{n}} / {VN}) * CLC_K * {VN} + {{k}} * {VN}", f"{VN}")
    def b_load(ptr):
        return f"vload{VN}(0, {ptr})" if B_PACKED else capture(b_row_load, ptr)
    b_t = "clc_real" if B_PACKED else "clc_b_t"  # the packed copy is read in B's place
    a_t = "clc_real" if A_PACKED else "clc_a_t"  # the packed copy is read in A's place
    # a row of C (c_matrix): the call's dw through the prelude, a workspace in place
    stored = c_view == "c_matrix" and c["stored"]
    def c_load(ptr):
        return capture(prelude.vload, VN, ptr) if stored else f"vload{VN}(0, {ptr})"
    def c_store(value, ptr):
        return capture(prelude.vstore, VN, value, ptr) if stored else f"vstore{VN}({value}, 0, {ptr});"
%>
<%def name="packed_walk(k_from)">\
% if A_PACKED:
__global const clc_real* apk = ap + ${k_from} * ${WM};  /* a pointer walk: measured faster than ap[k * WM + i] */
        \
% endif
</%def>
<%def name="packed_step()">${f", apk += {WM}" if A_PACKED else ""}</%def>
<%def name="fmas(a_rows=False)">
% for i in range(WM):
% if A_PACKED:
            acc${i} = fma((${vec})(apk[${i}]), bv, acc${i});
% elif a_rows:
            acc${i} = fma((${vec})(clc_ld(ap, ${i} * CLC_OP)), bv, acc${i});
% else:
            acc${i} = fma((${vec})(clc_load_a(a, g, row${i}, k, chunk)), bv, acc${i});
% endif
% endfor
</%def>

<%def name="block_columns()">
% if B_ROW and N >= VN and not B_PACKED:
    /* The last block, when N is not a multiple of VN, computes the VN columns that end at N
       instead: its first lanes repeat columns of the block before and are not stored, and the
       rest keep the vector loads (lane-by-lane loads over the whole contraction cost this block
       several times what a full one does). */
    const clc_idx nv = n0 + ${VN} > CLC_NN ? CLC_NN - ${VN} : n0;
% else:
    const clc_idx nv = n0;
% endif
</%def>
## acc0.. += A(rows, k) x B(k, nv..nv+VN) for k in [k_from, k_to)
<%def name="contract(k_from, k_to)">
% if B_PACKED:
    {
        __global const clc_real* bp = ${B_ROW[0].format(k=k_from, n="nv")};
        ${packed_walk(k_from)}for (clc_idx k = ${k_from}; k < ${k_to}; ++k, bp += ${B_ROW[1]}${packed_step()}) {
            const ${vec} bv = ${b_load("bp")};
${fmas()}
        }
    }
% else:
% if B_ROW:
    if (nv % ${RUN} + ${VN} <= ${RUN} && nv + ${VN} <= CLC_NN) {
        __global const clc_b_t* bp = ${B_ROW[0].format(k=k_from, n="nv")};
% if a_view == "a_grad_output_rows" and not CLAMP_M and not A_PACKED:
        /* A = dy rows: contiguous within one image, so walk it with a pointer, image by image
           (decoding k = (b, po) per step would cost a division and WM address computations) */
        for (clc_idx k = ${k_from}; k < ${k_to};) {
            const clc_idx k_stop = min(${k_to}, (k / CLC_OP + 1) * CLC_OP);
            __global const clc_a_t* ap = a + ((chunk + k / CLC_OP) * CLC_COUT + g * CLC_CO + m0) * CLC_OP + k % CLC_OP;
            for (; k < k_stop; ++k, ++ap, bp += ${B_ROW[1]}) {
                const ${vec} bv = ${b_load("bp")};
${fmas(True)}
            }
        }
% else:
        ${packed_walk(k_from)}for (clc_idx k = ${k_from}; k < ${k_to}; ++k, bp += ${B_ROW[1]}${packed_step()}) {
            const ${vec} bv = ${b_load("bp")};
${fmas()}
        }
% endif
% if RUN < N:
    } else if (nv + ${VN} <= CLC_NN) {
        /* the run crosses into the next image: two row reads merged lane by lane.  Both stay
           inside the tensor: the first runs on into this image's next row, the second starts
           in the previous one. */
        const int split = ${RUN} - (int)(nv % ${RUN});
        const ${ivec} first = (${ivec})(${", ".join(str(v) for v in range(VN))}) < (${ivec})split;
        __global const clc_b_t* bp = ${B_ROW[0].format(k=k_from, n="nv")};
        __global const clc_b_t* bq = ${B_ROW[0].format(k=k_from, n="(nv + split)")} - split;
        ${packed_walk(k_from)}for (clc_idx k = ${k_from}; k < ${k_to}; ++k, bp += ${B_ROW[1]}, bq += ${B_ROW[1]}${packed_step()}) {
            const ${vec} bv = select(${b_load("bq")}, ${b_load("bp")}, first);
${fmas()}
        }
% endif
    } else
% endif
    {
        ${packed_walk(k_from)}for (clc_idx k = ${k_from}; k < ${k_to}; ++k${packed_step()}) {
            ${vec} bv;
% for v in range(VN):
            bv.s${comps[v]} = nv + ${v} < CLC_NN ? clc_load_b(b, g, k, nv + ${v}, chunk) : (clc_real)0;
% endfor
${fmas()}
        }
    }
% endif

</%def>
## C(rows, n0..) = acc0.. (through the epilogue where C is the result)
<%def name="store()">
% for i in range(WM):
    {
        const clc_idx m = m0 + ${i};
% if SHIFT_M:
        if (m >= m_own) {  /* rows before it are the block before's */
% elif CHECK_M:
        if (m < CLC_M) {
% else:
        {
% endif
% if c_view == "c_nchw" and not c.get("partial"):
            const clc_idx pixel = n0 % ${c["pixels"]};
            if (nv == n0 && pixel + ${VN} <= ${c["pixels"]}) {
                const clc_idx bi = chunk + n0 / ${c["pixels"]}, channel = g * ${c["M"]} + m;
                const clc_idx at = (bi * ${c["channels"]} + channel) * ${c["pixels"]} + pixel;
                ${prelude.store_result_vec(VN, "c + at", f"acc{i}", "bias", "channel", "residual + at")}
            } else
% elif c_view == "c_matrix":
            if (nv == n0 && n0 + ${VN} <= CLC_NN) {
                __global clc_c_t* row = c + ((split * CLC_GEMMS + g) * ${c["M"]} + m) * ${c["N"]} + n0;
% if c["accumulate"]:
                /* later batch chunks add onto the earlier ones, in launch order: deterministic (in a
                   clc_real workspace where the storage is narrower: rounded once, at the end) */
                ${c_store(f"(chunk == 0 ? ({vec})0 : {c_load('row')}) + acc{i}", "row")}
% else:
                ${c_store(f"acc{i}", "row")}
% endif
            } else
% endif
            {
% for v in range(VN):
                if (nv + ${v} >= n0 && nv + ${v} < CLC_NN)
                    clc_store_c(c, bias, residual, g, split, m, nv + ${v}, acc${i}.s${comps[v]}, chunk);
% endfor
            }
        }
    }
% endfor
</%def>

__kernel __attribute__((reqd_work_group_size(${LM}, 1, 1)))
void clc_gemm(__global const ${a_t}* restrict a_base, const long a_off,
              __global const ${b_t}* restrict b_base, const long b_off,
              __global clc_c_t* restrict c_base, const long c_off,
              ${prelude.epilogue_params(bias, epilogue)}
              const int chunk)
{
    __global const ${a_t}* restrict a = a_base + a_off;
    __global const ${b_t}* restrict b = b_base + b_off;
    __global clc_c_t* restrict c = c_base + c_off;
    __global const clc_data* restrict bias = bias_base + bias_off;
    __global const clc_data* restrict residual = residual_base + residual_off;

    /* M varies fastest: the work-items of a work-group, and the work-groups that follow, share one
       K x VN panel of B (kept in cache) and sweep the rows of A (small: weights or a gradient). */
% if SHIFT_M:
    const clc_idx m_own = (clc_idx)get_global_id(0) * ${WM};  /* this work-item's first row */
    if (m_own >= CLC_M) return;  /* the launch rounds M up to whole work-groups */
    /* The last block, when M is not a multiple of WM, computes the WM rows that end at M: its first
       rows repeat the block before's and are not stored.  Its rows are then m0 + i, whose addresses
       in A the compiler folds into one base and constant offsets; clamped one by one (min(m0 + i,
       M - 1)) they are WM indices that LLVM kept in vector registers, spilling the accumulators of
       the 6 x 16 tile on AVX2 (PoCL: the 1x1 2048 -> 512 forward at 7x7, batch 1, ran 2.0 ms
       against 1.05 in 4-row blocks, which M fills). */
    const clc_idx m0 = min(m_own, CLC_M - ${WM});
% else:
    const clc_idx m0 = (clc_idx)get_global_id(0) * ${WM};
    if (m0 >= CLC_M) return;  /* the launch rounds M up to whole work-groups */
% endif
    const clc_idx n_first = (clc_idx)get_global_id(1) * ${VN * NB};  /* this work-item's ${NB} block(s) of ${VN} columns */
    const clc_idx g = get_group_id(2) % CLC_GEMMS;
    const clc_idx split = get_group_id(2) / CLC_GEMMS;
    const clc_idx k_begin = split * ${KSPLIT};
    const clc_idx k_end = min(k_begin + ${KSPLIT}, CLC_K);

% for i in range(WM):
% if A_PACKED:
## the packed copy already repeats row M-1 past M: no row indices
% elif CLAMP_M:
    const clc_idx row${i} = min(m0 + ${i}, CLC_M - 1);  /* rows past M read row M-1, never stored */
% else:
    const clc_idx row${i} = m0 + ${i};
% endif
% endfor
% if A_PACKED:
    __global const clc_real* restrict ap = a + (g * CLC_MB + m0 / ${WM}) * CLC_K * ${WM};  /* a = Ap */
% endif

% if NB == 1:
    const clc_idx n0 = n_first;
${block_columns()}
% for i in range(WM):
    ${vec} acc${i} = (${vec})0;
% endfor
${contract("k_begin", "k_end")}
${store()}
% else:
    /* ${NB} blocks of columns per work-item, the contraction cut into steps of ${KC}: each step's
       ${WM} x ${KC} slice of A is read once from beyond the first-level cache and reused by every
       block, so A is swept once per ${NB * VN} columns of C rather than per ${VN}.  A weight larger
       than the core's cache would otherwise stream from the shared cache or memory per block of
       columns (small images: a 7x7 layer's 98 columns are 7 such sweeps of a 2.4 MB weight).  The
       blocks' sums wait in private memory (${NB * WM} vectors) between steps. */
    ${vec} sums[${NB * WM}];
    for (int s = 0; s < ${NB * WM}; ++s)
        sums[s] = (${vec})0;
    for (clc_idx kc = k_begin; kc < k_end; kc += ${KC}) {
        const clc_idx kc_end = min(kc + ${KC}, k_end);
        for (int nb = 0; nb < ${NB}; ++nb) {
            const clc_idx n0 = n_first + nb * ${VN};
            if (n0 >= CLC_NN) break;
${block_columns()}
% for i in range(WM):
            ${vec} acc${i} = sums[nb * ${WM} + ${i}];
% endfor
${contract("kc", "kc_end")}
% for i in range(WM):
            sums[nb * ${WM} + ${i}] = acc${i};
% endfor
        }
    }
    for (int nb = 0; nb < ${NB}; ++nb) {
        const clc_idx n0 = n_first + nb * ${VN};
        if (n0 >= CLC_NN) break;
${block_columns()}
% for i in range(WM):
        const ${vec} acc${i} = sums[nb * ${WM} + ${i}];
% endfor
${store()}
    }
% endif
}
</%def>\
