## Winograd F(MxM, RxR), not fused: the transforms around the GEMM core's ALPHA^2 GEMMs per group
## (ALPHA = M + R - 1; F(2x2, 3x3), F(4x4, 3x3), F(6x6, 3x3), F(2x2, 5x5), F(3x3, 5x5), F(4x4, 5x5),
## F(2x2, 7x7): algorithms/winograd.py has the matrices and why each identity holds).
## The convolution whose tiles are transformed: input `src` (N, G*CIN, IH, IW) -> output `dst`
## (N, G*COUT, OH, OW), or (N, IH, IW, G*CIN) -> (N, OH, OW, G*COUT) channels_last; the forward pass
## runs x -> y, the data gradient dy -> dx with the weight flipped and its channel axes swapped
## (`FLIP`), and the weight gradient reads x as src and dy as dst.  t is one of the ALPHA^2
## positions of a transformed tile, p an MxM output tile (P = N * DH * DW * TH * TW of them: TH x TW
## tiles over each of the DH x DW phases of a dilated output, whose outputs and inputs lie DH (DW)
## rows (columns) apart; clc_wino_tile decodes p).  Entry points:
##   clc_wino_transforms   forward and data gradient: V[g][t][i][p] = (B^T d B)[t], d the ALPHA x ALPHA
##                         input patch of tile p (zeros outside), and U[g][t][o][i] = (G w G^T)[t];
##                         weight gradient: V, and Y[g][t][o][p] = (A e A^T)[t], e the MxM tile p of
##                         dy (zeros outside).  One launch: its rows past V's do the other transform
##   clc_wino_output       dst = A^T M A per tile through the epilogue, M[g][t][o][p] = sum_i U V
##                         (the GEMMs'), the edge tiles' outside outputs dropped
##   clc_wino_weight_grad  dw[g*COUT + o][i] = G^T (sum over the pieces s of M[s][g][t][o][i]) G,
##                         M[s] = sum over piece s's tiles of Y V (the GEMMs')
## w, src, dst and dw are the call's tensors (clc_data); U, V, Y and M are workspaces (clc_real), so
## the transforms run in the arithmetic type whatever the storage.  The matrix products are unrolled
## here with their constants baked in (zero terms left out).
## Parameters: geom, real, data, layout, index, entries, epilogue, bias (the prelude's: clc_wino_output
## writes the result); N (images: the batch x DEPTH), DEPTH (a 3D layer's depth slices, its kernel one deep:
## each slice is an image of its own), GROUPS, CIN, COUT (per group), IH, IW, OH, OW, PT, PL (the padding before rows and
## columns), R (the kernel's side), DH, DW (its dilation), TH, TW (tiles down and across a phase), FLIP;
## M, BT, G, AT (the transform matrices, as lists of
## rows of floats); WEIGHT_GRAD (which pair clc_wino_transforms runs), ROW_WIDTH (its launch's
## extent along tiles), SPLITS (the weight gradient's pieces), RV (M where clc_wino_output stores a
## tile's rows as aligned vectors, else 0), PACK_WM (where non-zero, U is written in the CPU GEMM's
## packed layout of blocks of PACK_WM rows, which its GEMMs read as their packed A: gemm_cpu.mako).
<%namespace name="prelude" file="prelude.mako"/>
<%!
def combination(coefficients, terms, suffix):
    """sum of c * term as C, the zero terms left out and +-1 without a product."""
    out = ""
    for c, term in zip(coefficients, terms):
        if c == 0:
            continue
        sign = "-" if c < 0 else "+"
        body = term if abs(c) == 1 else f"{float(abs(c))!r}{suffix} * {term}"
        out += f" {sign} {body}" if out else (f"-{body}" if c < 0 else body)
    return out or "0"


def suffix(real):
    """The float literals' suffix: float constants for float arithmetic, doubles for double."""
    return "f" if real == "float" else ""


def derived(M, BT, G, AT):
    """ALPHA, and A (ALPHA x M), G^T (R x ALPHA), B (ALPHA x ALPHA)."""
    def transposed(rows):
        return [list(col) for col in zip(*rows)]
    return len(BT), transposed(AT), transposed(G), transposed(BT)
%>
<% ALPHA, A, GT, B = derived(M, BT, G, AT) %>
<% TAPS = R * R %>
<%def name="left(out, L, src, cols)">\
## out[i][c] = sum_j L[i][j] src[j][c], for c < cols
% for i, row in enumerate(L):
% for c in range(cols):
    ${out}[${i}][${c}] = ${combination(row, [f"{src}[{j}][{c}]" for j in range(len(row))], suffix(real))};
% endfor
% endfor
</%def>\
<%def name="right(out, src, R, rows)">\
## out[i][k] = sum_c src[i][c] R[c][k] (src times R), for i < rows
% for i in range(rows):
% for k in range(len(R[0])):
    ${out}[${i}][${k}] = ${combination([R[c][k] for c in range(len(R))], [f"{src}[{i}][{c}]" for c in range(len(R))], suffix(real))};
% endfor
% endfor
</%def>\
<%def name="store_positions(out, step, src)">\
## VT > 1: the ALPHA^2 vectors src[a][b] to out + (a * ALPHA + b) * step, lanes < VT of them at the end
<% ALPHA = derived(M, BT, G, AT)[0] %>\
    {
        __global clc_real* restrict out = ${out};
        const clc_idx step = ${step};  /* from one position t to the next */
        if (lanes == ${VT}) {
% for k in range(ALPHA * ALPHA):
            vstore${VT}(${src}[${k // ALPHA}][${k % ALPHA}], 0, out + ${k} * step);
% endfor
        } else {
            clc_real lane[${VT}];
% for k in range(ALPHA * ALPHA):
            vstore${VT}(${src}[${k // ALPHA}][${k % ALPHA}], 0, lane);
            for (int l = 0; l < lanes; ++l) out[${k} * step + l] = lane[l];
% endfor
        }
    }
</%def>\
${prelude.header(geom, real, index, data, epilogue, bias)}
#define CLC_W_P ((clc_idx)${N * DH * DW} * ${TH} * ${TW})
/* Steps between neighbouring channels (_C) and pixels (_P) of src and dst (${layout}), from the
   convolution run here rather than the prelude's CLC_XC..CLC_YP: for the data gradient src is dy
   and dst is dx, the canonical output and input.  U, V, Y and M keep their layout whatever these. */
% if layout == "channels_last":
#define CLC_W_SRC_C ((clc_idx)1)
#define CLC_W_SRC_P ((clc_idx)${GROUPS * CIN})
#define CLC_W_DST_C ((clc_idx)1)
#define CLC_W_DST_P ((clc_idx)${GROUPS * COUT})
% else:
#define CLC_W_SRC_C ((clc_idx)${DEPTH * IH * IW})
#define CLC_W_SRC_P ((clc_idx)1)
#define CLC_W_DST_C ((clc_idx)${DEPTH * OH * OW})
#define CLC_W_DST_P ((clc_idx)1)
% endif
/* The first element of image n (a depth slice of a 3D layer's sample: channels-first a channel's
   slices lie together, so slice d of sample n / DEPTH; channels-last the slices follow each other) */
% if DEPTH == 1 or layout == "channels_last":
#define CLC_W_SRC_IMAGE(n) ((clc_idx)(n) * ${GROUPS * CIN * IH * IW})
#define CLC_W_DST_IMAGE(n) ((clc_idx)(n) * ${GROUPS * COUT * OH * OW})
% else:
#define CLC_W_SRC_IMAGE(n) ((clc_idx)(n) / ${DEPTH} * ${GROUPS * CIN * DEPTH * IH * IW} + (clc_idx)(n) % ${DEPTH} * ${IH * IW})
#define CLC_W_DST_IMAGE(n) ((clc_idx)(n) / ${DEPTH} * ${GROUPS * COUT * DEPTH * OH * OW} + (clc_idx)(n) % ${DEPTH} * ${OH * OW})
% endif

/* Tile p: its image, and the row and column of its first output; its outputs lie DH rows and DW
   columns apart (one phase of a dilated output), its input patch the same from row - PT, col - PL */
inline clc_idx clc_wino_tile(clc_idx p, int* row, int* col)
{
    const int tx = (int)(p % ${TW}), ty = (int)((p / ${TW}) % ${TH});
    const clc_idx q = p / ((clc_idx)${TH} * ${TW});
% if DH * DW > 1:
    const int phase = (int)(q % ${DH * DW});
    *row = phase / ${DW} + ty * ${M * DH};
    *col = phase % ${DW} + tx * ${M * DW};
    return q / ${DH * DW};
% else:
    *row = ty * ${M};
    *col = tx * ${M};
    return q;
% endif
}

/* V for tile p of channel gi = g * CIN + i: B^T d B */
inline void clc_wino_input(__global const clc_data* restrict src, __global clc_real* restrict v, clc_idx p, int gi)
{
    int row0, col0;
    const clc_idx n = clc_wino_tile(p, &row0, &col0);
    /* channel gi of image n; its pixels lie CLC_W_SRC_P apart */
    __global const clc_data* restrict plane = src + CLC_W_SRC_IMAGE(n) + gi * CLC_W_SRC_C;
    row0 -= ${PT};
    col0 -= ${PL};
    clc_real d[${ALPHA}][${ALPHA}], bd[${ALPHA}][${ALPHA}], t[${ALPHA}][${ALPHA}];
    for (int r = 0; r < ${ALPHA}; ++r) {
        const int row = row0 + r * ${DH};
        for (int c = 0; c < ${ALPHA}; ++c) {
            const int col = col0 + c * ${DW};
            d[r][c] = ((uint)row < (uint)${IH} && (uint)col < (uint)${IW}) ? clc_ld(plane, (row * ${IW} + col) * CLC_W_SRC_P) : (clc_real)0;
        }
    }
${left("bd", BT, "d", ALPHA)}\
${right("t", "bd", B, ALPHA)}\
    const int g = gi / ${CIN}, i = gi % ${CIN};
    __global clc_real* restrict out = v + ((clc_idx)g * ${ALPHA * ALPHA} * ${CIN} + i) * CLC_W_P + p;
    const clc_idx step = (clc_idx)${CIN} * CLC_W_P;  /* from one position t to the next */
    for (int k = 0; k < ${ALPHA * ALPHA}; ++k) out[k * step] = t[k / ${ALPHA}][k % ${ALPHA}];
}
% if not WEIGHT_GRAD:

/* U for filter oi = o * CIN + i of group g: G f G^T */
inline void clc_wino_weight(__global const clc_data* restrict w_base, __global clc_real* restrict u, clc_idx oi, int g)
{
    const int o = (int)(oi / ${CIN}), i = (int)(oi % ${CIN});
    clc_real f[${R}][${R}], gf[${ALPHA}][${R}], t[${ALPHA}][${ALPHA}];
% if FLIP:
    /* the data gradient: tap (r, c) of filter (o, i) is the forward weight w[g*CIN + i][o][R-1-r][R-1-c] */
    __global const clc_data* restrict w = w_base + ((clc_idx)(g * ${CIN} + i) * ${COUT} + o) * ${TAPS};
    for (int k = 0; k < ${TAPS}; ++k) f[k / ${R}][k % ${R}] = clc_ld(w, ${TAPS - 1} - k);
% else:
    __global const clc_data* restrict w = w_base + ((clc_idx)(g * ${COUT} + o) * ${CIN} + i) * ${TAPS};
    for (int k = 0; k < ${TAPS}; ++k) f[k / ${R}][k % ${R}] = clc_ld(w, k);
% endif
${left("gf", G, "f", R)}\
${right("t", "gf", GT, ALPHA)}\
    __global clc_real* restrict out = u + (clc_idx)g * ${ALPHA * ALPHA} * ${COUT} * ${CIN} + oi;
    for (int k = 0; k < ${ALPHA * ALPHA}; ++k) out[(clc_idx)k * ${COUT} * ${CIN}] = t[k / ${ALPHA}][k % ${ALPHA}];
}
% else:

/* Y for tile p of output channel go = g * COUT + o: A e A^T */
inline void clc_wino_grad_output(__global const clc_data* restrict dy, __global clc_real* restrict ydy, clc_idx p, int go)
{
    int row0, col0;
    const clc_idx n = clc_wino_tile(p, &row0, &col0);
    __global const clc_data* restrict plane = dy + CLC_W_DST_IMAGE(n) + go * CLC_W_DST_C;
    clc_real e[${M}][${M}], ae[${ALPHA}][${M}], t[${ALPHA}][${ALPHA}];
    for (int r = 0; r < ${M}; ++r) {
        const int row = row0 + r * ${DH};
        for (int c = 0; c < ${M}; ++c) {
            const int col = col0 + c * ${DW};
            e[r][c] = (row < ${OH} && col < ${OW}) ? clc_ld(plane, (row * ${OW} + col) * CLC_W_DST_P) : (clc_real)0;
        }
    }
${left("ae", A, "e", M)}\
${right("t", "ae", AT, ALPHA)}\
    const int g = go / ${COUT}, o = go % ${COUT};
    __global clc_real* restrict out = ydy + ((clc_idx)g * ${ALPHA * ALPHA} * ${COUT} + o) * CLC_W_P + p;
    const clc_idx step = (clc_idx)${COUT} * CLC_W_P;
    for (int k = 0; k < ${ALPHA * ALPHA}; ++k) out[k * step] = t[k / ${ALPHA}][k % ${ALPHA}];
}
% endif
% if VT > 1:

/* CPUs (VT > 1): each work-item transforms VT consecutive tiles (filters) of one channel at once,
   lane l of a clc_wvec being tile (filter) l of the run; the arithmetic is the scalar path's on
   vectors, and each position's VT results are one vector store.  One tile per work-item wrote its
   ALPHA^2 values a position apart, a workspace matrix apart (often a power of two of bytes: one
   cache set), one element at a time: on PoCL, which runs work-items one after another, those
   scalar stores took half the time of the transforms (perf), and the transforms 50-80% of
   Winograd's. */
typedef ${real}${VT} clc_wvec;

/* V for tiles p0 .. p0 + lanes - 1 of channel gi (lanes past them repeat the last tile, not stored) */
inline void clc_wino_input_vec(__global const clc_data* restrict src, __global clc_real* restrict v, clc_idx p0,
                               int lanes, int gi)
{
    clc_idx base[${VT}];
    int row0[${VT}], col0[${VT}];
    for (int l = 0; l < ${VT}; ++l) {
        const clc_idx n = clc_wino_tile(p0 + min(l, lanes - 1), &row0[l], &col0[l]);
        base[l] = CLC_W_SRC_IMAGE(n) + gi * CLC_W_SRC_C;
        row0[l] -= ${PT};
        col0[l] -= ${PL};
    }
    clc_wvec d[${ALPHA}][${ALPHA}], bd[${ALPHA}][${ALPHA}], t[${ALPHA}][${ALPHA}];
    clc_real lane[${VT}];
% for r in range(ALPHA):
% for c in range(ALPHA):
    for (int l = 0; l < ${VT}; ++l) {
        const int row = row0[l] + ${r * DH}, col = col0[l] + ${c * DW};
        lane[l] = ((uint)row < (uint)${IH} && (uint)col < (uint)${IW}) ? clc_ld(src, base[l] + (row * ${IW} + col) * CLC_W_SRC_P) : (clc_real)0;
    }
    d[${r}][${c}] = vload${VT}(0, lane);
% endfor
% endfor
${left("bd", BT, "d", ALPHA)}\
${right("t", "bd", B, ALPHA)}\
    const int g = gi / ${CIN}, i = gi % ${CIN};
${store_positions(f"v + ((clc_idx)g * {ALPHA * ALPHA} * {CIN} + i) * CLC_W_P + p0", f"(clc_idx){CIN} * CLC_W_P", "t")}\
}
% if not WEIGHT_GRAD:

/* U for filters oi0 .. oi0 + lanes - 1 (oi = o * CIN + i) of group g */
inline void clc_wino_weight_vec(__global const clc_data* restrict w, __global clc_real* restrict u, clc_idx oi0,
                                int lanes, int g)
{
    clc_idx base[${VT}];
    for (int l = 0; l < ${VT}; ++l) {
        const clc_idx oi = oi0 + min(l, lanes - 1);
% if FLIP:
        /* the data gradient: tap (r, c) of filter (o, i) is the forward weight w[g*CIN + i][o][R-1-r][R-1-c] */
        base[l] = ((clc_idx)(g * ${CIN} + oi % ${CIN}) * ${COUT} + oi / ${CIN}) * ${TAPS};
% else:
        base[l] = ((clc_idx)g * ${COUT * CIN} + oi) * ${TAPS};
% endif
    }
    clc_wvec f[${R}][${R}], gf[${ALPHA}][${R}], t[${ALPHA}][${ALPHA}];
    clc_real lane[${VT}];
% for k in range(TAPS):
    for (int l = 0; l < ${VT}; ++l) lane[l] = clc_ld(w, base[l] + ${TAPS - 1 - k if FLIP else k});
    f[${k // R}][${k % R}] = vload${VT}(0, lane);
% endfor
${left("gf", G, "f", R)}\
${right("t", "gf", GT, ALPHA)}\
${store_positions(f"u + (clc_idx)g * {ALPHA * ALPHA} * {COUT} * {CIN} + oi0", f"(clc_idx){COUT} * {CIN}", "t")}\
}
% if PACK_WM:
<%
    # U in the CPU GEMM's packed layout: GEMM (g, t)'s A as blocks of PACK_WM rows (output channels),
    # each block k-major: Ap[g * ALPHA^2 + t][o / PACK_WM][i][o % PACK_WM], rows past COUT repeating
    # row COUT - 1 (the GEMM reads whole blocks and never stores those rows' sums).  A run's VT
    # lanes are VT consecutive output channels from a multiple of VT, so each sub-run of S lanes
    # (S the greatest power of two dividing both) lies inside one block: one vstoreS each.
    import math
    MP = -(-COUT // PACK_WM) * PACK_WM
    S = math.gcd(VT, PACK_WM)
    comps = "0123456789abcdef"
%>

/* U for output channels o0 .. o0 + ${VT - 1} (those below ${MP}) of input channel i of group g, stored
   packed: Ap[g * ${ALPHA * ALPHA} + t][o / ${PACK_WM}][i][o % ${PACK_WM}] */
inline void clc_wino_weight_packed(__global const clc_data* restrict w, __global clc_real* restrict u, int o0, int i,
                                   int g)
{
    clc_idx base[${VT}];
    for (int l = 0; l < ${VT}; ++l) {
        const int o = min(o0 + l, ${COUT - 1});  /* rows past COUT repeat the last one */
% if FLIP:
        /* the data gradient: tap (r, c) of filter (o, i) is the forward weight w[g*CIN + i][o][R-1-r][R-1-c] */
        base[l] = ((clc_idx)(g * ${CIN} + i) * ${COUT} + o) * ${TAPS};
% else:
        base[l] = ((clc_idx)(g * ${COUT} + o) * ${CIN} + i) * ${TAPS};
% endif
    }
    clc_wvec f[${R}][${R}], gf[${ALPHA}][${R}], t[${ALPHA}][${ALPHA}];
    clc_real lane[${VT}];
% for k in range(TAPS):
    for (int l = 0; l < ${VT}; ++l) lane[l] = clc_ld(w, base[l] + ${TAPS - 1 - k if FLIP else k});
    f[${k // R}][${k % R}] = vload${VT}(0, lane);
% endfor
${left("gf", G, "f", R)}\
${right("t", "gf", GT, ALPHA)}\
    /* element (t, o, i) of group g: ((g * ALPHA^2 + t) * ${MP // PACK_WM} + o / ${PACK_WM}) * ${CIN} * ${PACK_WM} + i * ${PACK_WM} + o % ${PACK_WM} */
    __global clc_real* restrict out = u + (clc_idx)g * ${ALPHA * ALPHA * MP * CIN} + (clc_idx)i * ${PACK_WM};
% for sub in range(VT // S):
    if (o0 + ${sub * S} < ${MP}) {
        __global clc_real* restrict run = out + (clc_idx)((o0 + ${sub * S}) / ${PACK_WM}) * ${CIN * PACK_WM} + (o0 + ${sub * S}) % ${PACK_WM};
% for k in range(ALPHA * ALPHA):
<% part = "" if S == VT else ".s" + comps[sub * S:(sub + 1) * S] %>\
% if S == 1:
        run[${k * MP * CIN}] = t[${k // ALPHA}][${k % ALPHA}]${part};
% else:
        vstore${S}(t[${k // ALPHA}][${k % ALPHA}]${part}, 0, run + ${k * MP * CIN});
% endif
% endfor
    }
% endfor
}
% endif
% else:

/* Y for tiles p0 .. p0 + lanes - 1 of output channel go (lanes past them repeat the last tile) */
inline void clc_wino_grad_output_vec(__global const clc_data* restrict dy, __global clc_real* restrict ydy, clc_idx p0,
                                     int lanes, int go)
{
    clc_idx base[${VT}];
    int row0[${VT}], col0[${VT}];
    for (int l = 0; l < ${VT}; ++l) {
        const clc_idx n = clc_wino_tile(p0 + min(l, lanes - 1), &row0[l], &col0[l]);
        base[l] = CLC_W_DST_IMAGE(n) + go * CLC_W_DST_C;
    }
    clc_wvec e[${M}][${M}], ae[${ALPHA}][${M}], t[${ALPHA}][${ALPHA}];
    clc_real lane[${VT}];
% for r in range(M):
% for c in range(M):
    for (int l = 0; l < ${VT}; ++l) {
        const int row = row0[l] + ${r * DH}, col = col0[l] + ${c * DW};
        lane[l] = (row < ${OH} && col < ${OW}) ? clc_ld(dy, base[l] + (row * ${OW} + col) * CLC_W_DST_P) : (clc_real)0;
    }
    e[${r}][${c}] = vload${VT}(0, lane);
% endfor
% endfor
${left("ae", A, "e", M)}\
${right("t", "ae", AT, ALPHA)}\
    const int g = go / ${COUT}, o = go % ${COUT};
${store_positions(f"ydy + ((clc_idx)g * {ALPHA * ALPHA} * {COUT} + o) * CLC_W_P + p0", f"(clc_idx){COUT} * CLC_W_P", "t")}\
}
% endif
% endif
${prelude.entry_points(self, entries)}\
##
<%def name="clc_wino_transforms()">
<% ALPHA, A, GT, B = derived(M, BT, G, AT) %>\
/* global: (ROW_WIDTH = P rounded up, GROUPS * CIN + extra rows).  Rows below GROUPS * CIN: one
   work-item per (tile, input channel), consecutive work-items consecutive tiles, so the writes of
   V rows coalesce.  The rows past them: the weight's filters, ROW_WIDTH to a row (forward, data
   gradient), or one work-item per (tile, output channel) of dy (weight gradient). */
__kernel void clc_wino_transforms(__global const clc_data* restrict src_base, const long src_off,
                                  __global const clc_data* restrict other_base, const long other_off,
                                  __global clc_real* restrict v, __global clc_real* restrict other_out)
{
    /* other: the weight -> U (forward, data gradient), or dy -> Y (weight gradient) */
    const clc_idx x = get_global_id(0);
    const int row = get_global_id(1);
% if VT > 1:
    /* VT tiles (filters) per work-item: runs of VT tiles along x; the weight's filters in runs of VT
       within a group, ROW_WIDTH runs to a row */
    if (row < ${GROUPS * CIN}) {
        if (x * ${VT} < CLC_W_P)
            clc_wino_input_vec(src_base + src_off, v, x * ${VT}, (int)min((clc_idx)${VT}, CLC_W_P - x * ${VT}), row);
        return;
    }
% if WEIGHT_GRAD:
    if (x * ${VT} < CLC_W_P)
        clc_wino_grad_output_vec(other_base + other_off, other_out, x * ${VT}, (int)min((clc_idx)${VT}, CLC_W_P - x * ${VT}),
                                 row - ${GROUPS * CIN});
% elif PACK_WM:
<% ORUNS = -(-(-(-COUT // PACK_WM) * PACK_WM) // VT) %>\
    /* runs of VT output channels of one input channel, ${ORUNS} to an input channel, over U's packed rows */
    const clc_idx run = (clc_idx)(row - ${GROUPS * CIN}) * ${ROW_WIDTH} + x;  /* (g * CIN + i) * ${ORUNS} + run of o */
    if (run < ${GROUPS * CIN * ORUNS}) {
        const int gi = (int)(run / ${ORUNS});
        clc_wino_weight_packed(other_base + other_off, other_out, (int)(run % ${ORUNS}) * ${VT}, gi % ${CIN}, gi / ${CIN});
    }
% else:
<% runs = -(-(COUT * CIN) // VT) %>\
    const clc_idx run = (clc_idx)(row - ${GROUPS * CIN}) * ${ROW_WIDTH} + x;  /* g * ${runs} + run within the group */
    if (run < ${GROUPS * runs}) {
        const clc_idx oi0 = run % ${runs} * ${VT};
        clc_wino_weight_vec(other_base + other_off, other_out, oi0, (int)min((clc_idx)${VT}, (clc_idx)${COUT * CIN} - oi0),
                            (int)(run / ${runs}));
    }
% endif
% else:
    if (row < ${GROUPS * CIN}) {
        if (x < CLC_W_P) clc_wino_input(src_base + src_off, v, x, row);
        return;
    }
% if WEIGHT_GRAD:
    if (x < CLC_W_P) clc_wino_grad_output(other_base + other_off, other_out, x, row - ${GROUPS * CIN});
% else:
    const clc_idx filter = (clc_idx)(row - ${GROUPS * CIN}) * ${ROW_WIDTH} + x;  /* g * COUT * CIN + oi */
    if (filter < (clc_idx)${GROUPS * COUT * CIN})
        clc_wino_weight(other_base + other_off, other_out, filter % ${COUT * CIN}, (int)(filter / ${COUT * CIN}));
% endif
% endif
}
</%def>\
##
<%def name="clc_wino_output()">
<% ALPHA, A, GT, B = derived(M, BT, G, AT) %>\
/* global: (P rounded up, GROUPS * COUT); one work-item per (tile, output channel): A^T t A. */
__kernel void clc_wino_output(__global const clc_real* restrict m,
                              ${prelude.epilogue_params(bias, epilogue)}
                              __global clc_data* restrict dst_base, const long dst_off)
{
% if VT > 1:
    /* VT tiles per work-item: a vector load per position, the transform on vectors, then each tile's
       outputs stored through the epilogue */
    const clc_idx p0 = get_global_id(0) * ${VT};
    if (p0 >= CLC_W_P) return;
    const int lanes = (int)min((clc_idx)${VT}, CLC_W_P - p0);
    const int go = get_global_id(1);                  /* g * COUT + o */
    const int g = go / ${COUT}, o = go % ${COUT};
    __global const clc_real* restrict in = m + ((clc_idx)g * ${ALPHA * ALPHA} * ${COUT} + o) * CLC_W_P + p0;
    const clc_idx step = (clc_idx)${COUT} * CLC_W_P;
    clc_wvec t[${ALPHA}][${ALPHA}], at[${M}][${ALPHA}], y[${M}][${M}];
    clc_real lane[${VT}];
% for k in range(ALPHA * ALPHA):
    if (lanes == ${VT}) {
        t[${k // ALPHA}][${k % ALPHA}] = vload${VT}(0, in + ${k} * step);
    } else {
        for (int l = 0; l < ${VT}; ++l) lane[l] = in[${k} * step + min(l, lanes - 1)];
        t[${k // ALPHA}][${k % ALPHA}] = vload${VT}(0, lane);
    }
% endfor
${left("at", AT, "t", ALPHA)}\
${right("y", "at", A, M)}\
    clc_real ys[${M * M}][${VT}];
% for k in range(M * M):
    vstore${VT}(y[${k // M}][${k % M}], 0, ys[${k}]);
% endfor
    __global clc_data* restrict dst = dst_base + dst_off;
    __global const clc_data* restrict bias = bias_base + bias_off;
    __global const clc_data* restrict residual = residual_base + residual_off;
    for (int l = 0; l < lanes; ++l) {
        int row0, col0;
        const clc_idx n = clc_wino_tile(p0 + l, &row0, &col0);
        const clc_idx plane = CLC_W_DST_IMAGE(n) + go * CLC_W_DST_C;  /* channel go of image n */
        for (int r = 0; r < ${M}; ++r) {
            const int row = row0 + r * ${DH};
            if (row >= ${OH}) break;
            for (int c = 0; c < ${M}; ++c) {
                const int col = col0 + c * ${DW};
                if (col < ${OW}) clc_store_result(dst, plane + (row * ${OW} + col) * CLC_W_DST_P, ys[r * ${M} + c][l], bias, go, residual);
            }
        }
    }
% else:
    const clc_idx p = get_global_id(0);
    if (p >= CLC_W_P) return;
    const int go = get_global_id(1);                  /* g * COUT + o */
    const int g = go / ${COUT}, o = go % ${COUT};
    __global const clc_real* restrict in = m + ((clc_idx)g * ${ALPHA * ALPHA} * ${COUT} + o) * CLC_W_P + p;
    const clc_idx step = (clc_idx)${COUT} * CLC_W_P;
    clc_real t[${ALPHA}][${ALPHA}], at[${M}][${ALPHA}], y[${M}][${M}];
    for (int k = 0; k < ${ALPHA * ALPHA}; ++k) t[k / ${ALPHA}][k % ${ALPHA}] = in[k * step];
${left("at", AT, "t", ALPHA)}\
${right("y", "at", A, M)}\
    int row0, col0;
    const clc_idx n = clc_wino_tile(p, &row0, &col0);
    /* dst and the residual share one layout (the result's): `pos` indexes both from their first elements */
    __global clc_data* restrict dst = dst_base + dst_off;
    __global const clc_data* restrict bias = bias_base + bias_off;
    __global const clc_data* restrict residual = residual_base + residual_off;
    const clc_idx plane = CLC_W_DST_IMAGE(n) + go * CLC_W_DST_C;  /* channel go of image n */
    for (int r = 0; r < ${M}; ++r) {
        const int row = row0 + r * ${DH};
        if (row >= ${OH}) break;
% if RV:
        /* the row's ${M} pixels, contiguous and ${M}-aligned (winograd.py's row_vector), as one store: a
           warp's store then covers whole 32-byte sectors, where ${M} scalar stores ${M} pixels apart
           write part of each */
        const clc_idx at = plane + row * ${OW} + col0;
        ${prelude.store_result_aligned("dst", "at", [f"y[r][{c}]" for c in range(M)], "bias", "go", "residual")}
% else:
        for (int c = 0; c < ${M}; ++c) {
            const int col = col0 + c * ${DW};
            if (col < ${OW}) clc_store_result(dst, plane + (row * ${OW} + col) * CLC_W_DST_P, y[r][c], bias, go, residual);
        }
% endif
    }
% endif
}
</%def>\
##
<%def name="clc_wino_weight_grad()">
<% ALPHA, A, GT, B = derived(M, BT, G, AT) %>\
<% TAPS = R * R %>\
/* VT > 1: global (ceil(COUT * CIN / VT), GROUPS), VT filters per work-item.  VT == 1: global
   (COUT * CIN rounded up to SUM_FILTERS, SUM_PARTS * GROUPS), work-groups of SUM_FILTERS filters x
   SUM_PARTS parts.  Each RxR filter's ALPHA^2 products summed over the pieces in order, then
   G^T t G. */
% if VT == 1:
__kernel __attribute__((reqd_work_group_size(${SUM_FILTERS}, ${SUM_PARTS}, 1)))
% else:
__kernel
% endif
void clc_wino_weight_grad(__global const clc_real* restrict m,
                          __global clc_data* restrict dw_base, const long dw_off)
{
% if VT > 1:
    /* VT consecutive filters per work-item: each position's sums a vector load per piece */
    const clc_idx oi0 = get_global_id(0) * ${VT};
    if (oi0 >= (clc_idx)${COUT} * ${CIN}) return;
    const int lanes = (int)min((clc_idx)${VT}, (clc_idx)${COUT} * ${CIN} - oi0);
    const int g = get_global_id(1);
    const clc_idx position = (clc_idx)${COUT} * ${CIN};  /* from one t to the next */
    const clc_idx piece = (clc_idx)${GROUPS * ALPHA * ALPHA} * position;  /* from one piece to the next */
    __global const clc_real* restrict in = m + (clc_idx)g * ${ALPHA * ALPHA} * position + oi0;
    clc_wvec t[${ALPHA}][${ALPHA}], gt[${R}][${ALPHA}], f[${R}][${R}];
    clc_real lane[${VT}];
% for k in range(ALPHA * ALPHA):
    if (lanes == ${VT}) {
        clc_wvec acc = vload${VT}(0, in + ${k} * position);
        for (int s = 1; s < ${SPLITS}; ++s) acc += vload${VT}(0, in + s * piece + ${k} * position);
        t[${k // ALPHA}][${k % ALPHA}] = acc;
    } else {
        for (int l = 0; l < ${VT}; ++l) {
            const clc_idx at = ${k} * position + min(l, lanes - 1);
            clc_real acc = in[at];
            for (int s = 1; s < ${SPLITS}; ++s) acc += in[s * piece + at];
            lane[l] = acc;
        }
        t[${k // ALPHA}][${k % ALPHA}] = vload${VT}(0, lane);
    }
% endfor
${left("gt", GT, "t", ALPHA)}\
${right("f", "gt", G, R)}\
    clc_real fs[${TAPS}][${VT}];
% for k in range(TAPS):
    vstore${VT}(f[${k // R}][${k % R}], 0, fs[${k}]);
% endfor
    /* dw[g*COUT + o][i][r][c], the canonical layout whatever the activations' */
    __global clc_data* restrict dw = dw_base + dw_off + ((clc_idx)g * ${COUT} * ${CIN} + oi0) * ${TAPS};
    for (int l = 0; l < lanes; ++l)
        for (int k = 0; k < ${TAPS}; ++k) clc_st(dw, l * ${TAPS} + k, fs[k][l]);
% else:
    /* part q of a work-group sums positions q, q + SUM_PARTS, ... of its filters over the pieces,
       each in order, into local memory; then part 0 transforms them */
    const clc_idx oi = get_global_id(0);
    const int lf = get_local_id(0), part = get_local_id(1);
    const int g = get_group_id(1);
    const bool filter = oi < (clc_idx)${COUT} * ${CIN};
    const clc_idx position = (clc_idx)${COUT} * ${CIN};  /* from one t to the next */
    const clc_idx piece = (clc_idx)${GROUPS * ALPHA * ALPHA} * position;  /* from one piece to the next */
    __local clc_real sums[${ALPHA * ALPHA}][${SUM_FILTERS}];
    if (filter) {
        __global const clc_real* restrict in = m + (clc_idx)g * ${ALPHA * ALPHA} * position + oi;
% for j in range(-(-(ALPHA * ALPHA) // SUM_PARTS)):
        {
            const int k = part + ${j * SUM_PARTS};
% if (j + 1) * SUM_PARTS > ALPHA * ALPHA:
            if (k < ${ALPHA * ALPHA}) {
% else:
            {
% endif
                clc_real acc = in[k * position];
                for (int s = 1; s < ${SPLITS}; ++s) acc += in[s * piece + k * position];
                sums[k][lf] = acc;
            }
        }
% endfor
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (part != 0 || !filter) return;
    clc_real t[${ALPHA}][${ALPHA}], gt[${R}][${ALPHA}], f[${R}][${R}];
% for k in range(ALPHA * ALPHA):
    t[${k // ALPHA}][${k % ALPHA}] = sums[${k}][lf];
% endfor
${left("gt", GT, "t", ALPHA)}\
${right("f", "gt", G, R)}\
    /* dw[g*COUT + o][i][r][c], the canonical layout whatever the activations' */
    __global clc_data* restrict dw = dw_base + dw_off + ((clc_idx)g * ${COUT} * ${CIN} + oi) * ${TAPS};
    for (int k = 0; k < ${TAPS}; ++k) clc_st(dw, k, f[k / ${R}][k % ${R}]);
% endif
}
</%def>\
