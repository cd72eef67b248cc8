## The weight gradient's GEMM for CPU devices as dot products: dw[g][m][n] = sum over k of
## A(m, k) * B(n, k), where A's rows are dy's output channels and B's rows are the input's
## (ci, tap) rows: the forward's column buffer col[g][(ci, tap)][(b, po)], or, for a 1x1 stride-1
## layer without padding, the input itself.  Both operands are contiguous along the contraction
## (an image's pixels), so no operand is transposed or packed: gemm_cpu.mako's weight gradient
## needs its B transposed (a column buffer written pixel-major, clc_im2col_t) and its A packed,
## which cost as much as the GEMM itself on 1x1 layers (PoCL; docs/performance.md).
##
## Each work-item computes a WM x WN block of C as WM * WN vector accumulators of VK lanes: per
## step of VK pixels it loads WM rows of A and WN rows of B (one vector each) and runs WM * WN
## vector FMAs; at the end each accumulator's lanes are added up (in a fixed order).  The
## contraction runs image by image (dy's rows are contiguous within an image only); a run's last
## VK-wide step overlaps the one before and masks the lanes already counted, both operands' lanes
## zeroed, so every load stays inside the row and no lane adds an infinity times zero.
## Rows of a block past M or N read row M-1 or N-1 and are never stored: no tests in the loop.
##
## Entry point:
##   clc_gemm_dot   global (rounded(MB, LM), NB, GEMMS * splits), local (LM, 1, 1)
## Parameters (baked in): geom, real, data, index (the prelude's), GEMMS, M (output channels per
## group), N (input channels x taps per group), K (one launch's contraction: chunk images x output
## pixels), KSPLIT (one piece's contraction; K when uncut), WM, WN, VK (lanes), LM (work-items
## per work-group along M), b_rows ("columns": the column buffer, a clc_real workspace of K
## columns; "input": the call's x, a 1x1 stride-1 layer's input channels), c (operands.mako's
## c_matrix dict: dw itself, or a clc_real workspace of per-piece or per-chunk sums).
<%namespace name="prelude" file="prelude.mako"/>
<%namespace name="views" file="operands.mako"/>
${prelude.header(geom, real, index, data, epilogue, bias)}
#define CLC_GEMMS ${GEMMS}
${views.c_matrix(c)}
% if b_rows == "columns":
typedef clc_real clc_b_t;
% else:
typedef clc_data clc_b_t;
% endif
${prelude.entry_points(self, entries)}\
##
<%def name="clc_gemm_dot()">
<%
    vec = f"{real}{VK}"
    ivec = capture(prelude.mask_type, real, VK)
    lanes = ", ".join(str(v) for v in range(VK))
    OP = geom.out_pixels
    def a_load(ptr):
        return capture(prelude.vload, VK, ptr)
    def b_load(ptr):
        return f"vload{VK}(0, {ptr})" if b_rows == "columns" else capture(prelude.vload, VK, ptr)
    pairs = [(i, j) for i in range(WM) for j in range(WN)]
    # The accumulators' lanes added up, VK accumulators per vector of sums: at each level every
    # vector's neighbouring lanes are added (.even + .odd: sums stay within their accumulator's
    # lanes) and two such halves make one vector, so that a level halves the vectors and the lanes
    # per accumulator: about as many vector adds as accumulators, where adding each accumulator's
    # lanes one by one cost as much as a short contraction (a fixed order either way).
    levels = []
    names = [f"acc{i}_{j}" for i, j in pairs]
    width, level = VK, 0
    comps = "0123456789abcdef"
    while width > 1:
        level += 1
        halves = [(f"half{level}_{v}", f"{n}.even + {n}.odd") for v, n in enumerate(names)]
        padded = [h for h, _ in halves] + [None] * (len(halves) % 2)
        names = [f"sum{level}_{v}" for v in range(len(padded) // 2)]
        # two halves make one vector lane by lane (Oclgrind's uninitialised-value plugin crashes on
        # a vector built from two vectors)
        lanes_of = lambda h: [f"{h}.s{comps[v]}" if h else "0" for v in range(VK // 2)]
        joined = [(name, ", ".join(lanes_of(padded[2 * v]) + lanes_of(padded[2 * v + 1]))) for v, name in enumerate(names)]
        levels.append((halves, joined))
        width //= 2
    # accumulator a = i * WN + j ends in lane a % VK of the last level's vector a // VK
    final = names
%>
<%def name="step(at, masked)">
% for i in range(WM):
% if masked:
            const ${vec} a${i} = select((${vec})0, ${a_load(f"ar{i} + {at}")}, live);
% else:
            const ${vec} a${i} = ${a_load(f"ar{i} + {at}")};
% endif
% endfor
% for j in range(WN):
            {
% if masked:
                const ${vec} bv = select((${vec})0, ${b_load(f"br{j} + {at}")}, live);
% else:
                const ${vec} bv = ${b_load(f"br{j} + {at}")};
% endif
% for i in range(WM):
                acc${i}_${j} = fma(a${i}, bv, acc${i}_${j});
% endfor
            }
% endfor
</%def>
__kernel __attribute__((reqd_work_group_size(${LM}, 1, 1)))
void clc_gemm_dot(__global const clc_data* restrict dy_base, const long dy_off,
                  __global const clc_b_t* restrict b_base, const long b_off,
                  __global clc_c_t* restrict c_base, const long c_off, const int chunk)
{
    const clc_idx m0 = (clc_idx)get_global_id(0) * ${WM};
    if (m0 >= ${M}) return;  /* the launch rounds the row blocks up to whole work-groups */
    const clc_idx n0 = (clc_idx)get_global_id(1) * ${WN};
    const clc_idx g = get_group_id(2) % CLC_GEMMS;
    const clc_idx split = get_group_id(2) / CLC_GEMMS;
    const clc_idx k_begin = split * ${KSPLIT};
    const clc_idx k_end = min(k_begin + ${KSPLIT}, (clc_idx)${K});
    __global const clc_data* restrict dy = dy_base + dy_off;
    __global const clc_b_t* restrict b = b_base + b_off;
    __global clc_c_t* restrict c = c_base + c_off;

% for i, j in pairs:
    ${vec} acc${i}_${j} = (${vec})0;
% endfor
    /* image by image of the launch's chunk: a pixel run [p_begin, p_end) of each */
    for (clc_idx image = k_begin / ${OP}; image * ${OP} < k_end; ++image) {
        const int p_begin = (int)max(k_begin - image * ${OP}, (clc_idx)0);
        const int p_end = (int)min(k_end - image * ${OP}, (clc_idx)${OP});
% for i in range(WM):
        __global const clc_data* ar${i} = dy + CLC_Y_AT(chunk + image, g * CLC_CO + min(m0 + ${i}, (clc_idx)${M - 1}), 0);
% endfor
% for j in range(WN):
% if b_rows == "columns":
        __global const clc_b_t* br${j} = b + (g * ${N} + min(n0 + ${j}, (clc_idx)${N - 1})) * ${K} + image * ${OP};
% else:
        __global const clc_b_t* br${j} = b + CLC_X_AT(chunk + image, g * CLC_CI + min(n0 + ${j}, (clc_idx)${N - 1}), 0);
% endif
% endfor
        int p = p_begin;
        for (; p + ${VK} <= p_end; p += ${VK}) {
${step("p", False)}
        }
        if (p < p_end) {
% if OP >= VK:
            /* the run's last pixels: the VK-wide step ending at p_end (starting inside the row),
               its lanes before p masked */
            const int start = min(max(p_end - ${VK}, 0), ${OP - VK});
            const ${ivec} lane = (${ivec})start + (${ivec})(${lanes});
            const ${ivec} live = lane >= (${ivec})p && lane < (${ivec})p_end;
${step("start", True)}
% else:
            /* an image smaller than a vector: pixel by pixel into lane 0 */
            for (; p < p_end; ++p) {
% for i, j in pairs:
                acc${i}_${j}.s0 = fma(clc_ld(ar${i}, p), ${"br%d[p]" % j if b_rows == "columns" else "clc_ld(br%d, p)" % j}, acc${i}_${j}.s0);
% endfor
            }
% endif
        }
    }
% for halves, joined in levels:
% for name, value in halves:
    const ${real}${VK // 2} ${name} = ${value};
% endfor
% for name, value in joined:
    const ${vec} ${name} = (${vec})(${value});
% endfor
% endfor
% for a, (i, j) in enumerate(pairs):
    if (m0 + ${i} < ${M} && n0 + ${j} < ${N})
        clc_store_c(c, 0, 0, g, split, m0 + ${i}, n0 + ${j}, ${final[a // VK]}.s${"0123456789abcdef"[a % VK]}, chunk);
% endfor
}
</%def>\
