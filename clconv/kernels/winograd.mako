## Winograd F(2x2, 3x3), not fused: 3x3 stride-1 convolutions in 16 elementwise products per 2x2
## output tile instead of 36 multiply-adds (2.25x fewer), as four kernels over three workspaces.
## Entry points (the convolution run here: input `src` (N, G*CIN, IH, IW) -> output `dst`
## (N, G*COUT, OH, OW), or (N, IH, IW, G*CIN) -> (N, OH, OW, G*COUT) channels_last; the forward pass
## runs x -> y, the data gradient dy -> dx with the weight flipped and its channel axes swapped, `FLIP`):
##   clc_wino_weight  U[g][t][o][i] = (G w G^T)[t], t the 16 positions of a 4x4 tile
##   clc_wino_input   V[g][t][i][p] = (B^T d B)[t], d the 4x4 input patch of tile p (zeros outside)
##   clc_wino_gemm    M[g][t][o][p] = sum_i U[g][t][o][i] V[g][t][i][p]: G*16 GEMMs, local-memory tiles
##   clc_wino_output  dst = A^T M A per tile through the epilogue, the edge tiles' outside outputs dropped
## w, src and dst are the call's tensors (clc_data); U, V and M are workspaces (clc_real), so the
## transforms and the GEMMs run in the arithmetic type whatever the storage.
## Parameters: geom, real, data, layout, index, entries, epilogue, bias (the prelude's: clc_wino_output
## writes the result); N, GROUPS, CIN, COUT (per group), IH, IW, OH, OW, PT, PL (the padding before rows and
## columns), TH, TW (tiles down and across), FLIP; LS (the GEMM's work-group side; each work-item
## computes 4 x 4 of an LS*4 square tile).
<%namespace name="prelude" file="prelude.mako"/>
${prelude.header(geom, real, index, data, epilogue, bias)}
#define CLC_W_P ((clc_idx)${N} * ${TH} * ${TW})
/* Steps between neighbouring channels (_C) and pixels (_P) of src and dst (${layout}), from the
   convolution run here rather than the prelude's CLC_XC..CLC_YP: for the data gradient src is dy
   and dst is dx, the canonical output and input.  U, V and M keep their layout whatever these. */
% if layout == "channels_last":
#define CLC_W_SRC_C ((clc_idx)1)
#define CLC_W_SRC_P ((clc_idx)${GROUPS * CIN})
#define CLC_W_DST_C ((clc_idx)1)
#define CLC_W_DST_P ((clc_idx)${GROUPS * COUT})
% else:
#define CLC_W_SRC_C ((clc_idx)${IH * IW})
#define CLC_W_SRC_P ((clc_idx)1)
#define CLC_W_DST_C ((clc_idx)${OH * OW})
#define CLC_W_DST_P ((clc_idx)1)
% endif
${prelude.entry_points(self, entries)}\
##
<%def name="clc_wino_weight()">
/* global: (COUT * CIN, GROUPS); one work-item per 3x3 filter. */
__kernel void clc_wino_weight(__global const clc_data* restrict w_base, const long w_off,
                              __global clc_real* restrict u)
{
    const clc_idx oi = get_global_id(0);
    if (oi >= (clc_idx)${COUT} * ${CIN}) return;
    const int o = (int)(oi / ${CIN}), i = (int)(oi % ${CIN}), g = get_global_id(1);
% if FLIP:
    /* the data gradient: tap (r, c) of filter (o, i) is the forward weight w[g*CIN + i][o][2-r][2-c] */
    __global const clc_data* restrict w = w_base + w_off + ((clc_idx)(g * ${CIN} + i) * ${COUT} + o) * 9;
    clc_real f[9];
    for (int k = 0; k < 9; ++k) f[k] = clc_ld(w, 8 - k);
% else:
    __global const clc_data* restrict w = w_base + w_off + ((clc_idx)(g * ${COUT} + o) * ${CIN} + i) * 9;
    clc_real f[9];
    for (int k = 0; k < 9; ++k) f[k] = clc_ld(w, k);
% endif
    /* G f G^T with G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1] */
    clc_real gf[4][3];
    for (int c = 0; c < 3; ++c) {
        gf[0][c] = f[c];
        gf[1][c] = (clc_real)0.5 * (f[c] + f[3 + c] + f[6 + c]);
        gf[2][c] = (clc_real)0.5 * (f[c] - f[3 + c] + f[6 + c]);
        gf[3][c] = f[6 + c];
    }
    __global clc_real* restrict out = u + (clc_idx)g * 16 * ${COUT} * ${CIN} + oi;
    for (int r = 0; r < 4; ++r) {
        const clc_real row[4] = {gf[r][0], (clc_real)0.5 * (gf[r][0] + gf[r][1] + gf[r][2]),
                                 (clc_real)0.5 * (gf[r][0] - gf[r][1] + gf[r][2]), gf[r][2]};
        for (int c = 0; c < 4; ++c)
            out[(clc_idx)(r * 4 + c) * ${COUT} * ${CIN}] = row[c];
    }
}
</%def>\
##
<%def name="clc_wino_input()">
/* global: (P = N * TH * TW tiles rounded up, GROUPS * CIN); consecutive work-items take
   consecutive tiles, so the writes of V rows coalesce. */
__kernel void clc_wino_input(__global const clc_data* restrict src_base, const long src_off,
                             __global clc_real* restrict v)
{
    const clc_idx p = get_global_id(0);
    if (p >= CLC_W_P) return;
    const int gi = get_global_id(1);                  /* g * CIN + i */
    const int tx = (int)(p % ${TW}), ty = (int)((p / ${TW}) % ${TH});
    const clc_idx n = p / ((clc_idx)${TH} * ${TW});
    /* channel gi of image n; its pixels lie CLC_W_SRC_P apart */
    __global const clc_data* restrict plane = src_base + src_off + n * ${GROUPS * CIN} * ${IH * IW} + gi * CLC_W_SRC_C;
    const int row0 = ty * 2 - ${PT}, col0 = tx * 2 - ${PL};
    clc_real d[4][4];
    for (int r = 0; r < 4; ++r) {
        const int row = row0 + r;
        for (int c = 0; c < 4; ++c) {
            const int col = col0 + c;
            d[r][c] = ((uint)row < (uint)${IH} && (uint)col < (uint)${IW}) ? clc_ld(plane, (row * ${IW} + col) * CLC_W_SRC_P) : (clc_real)0;
        }
    }
    /* B^T d B with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] */
    clc_real bd[4][4];
    for (int c = 0; c < 4; ++c) {
        bd[0][c] = d[0][c] - d[2][c];
        bd[1][c] = d[1][c] + d[2][c];
        bd[2][c] = d[2][c] - d[1][c];
        bd[3][c] = d[1][c] - d[3][c];
    }
    const int g = gi / ${CIN}, i = gi % ${CIN};
    __global clc_real* restrict out = v + ((clc_idx)g * 16 * ${CIN} + i) * CLC_W_P + p;
    const clc_idx step = (clc_idx)${CIN} * CLC_W_P;  /* from one tile position t to the next */
    for (int r = 0; r < 4; ++r) {
        out[(r * 4 + 0) * step] = bd[r][0] - bd[r][2];
        out[(r * 4 + 1) * step] = bd[r][1] + bd[r][2];
        out[(r * 4 + 2) * step] = bd[r][2] - bd[r][1];
        out[(r * 4 + 3) * step] = bd[r][1] - bd[r][3];
    }
}
</%def>\
##
<%def name="clc_wino_gemm()">
<% T = LS * 4 %>\
/* global: (P rounded up to ${T} / 4, COUT rounded up to ${T} / 4, GROUPS * 16); local (${LS}, ${LS}).
   Each work-group computes a ${T} x ${T} tile of one of the G*16 products M = U V, stepping through
   the CIN contraction ${LS} at a time through local memory; work-item (lx, ly) computes outputs
   (ly + ${LS}*a, lx + ${LS}*b), a, b < 4, so that a row of work-items reads consecutive B elements. */
__kernel __attribute__((reqd_work_group_size(${LS}, ${LS}, 1)))
void clc_wino_gemm(__global const clc_real* restrict u, __global const clc_real* restrict v,
                   __global clc_real* restrict m)
{
    const int lx = get_local_id(0), ly = get_local_id(1);
    const clc_idx p0 = (clc_idx)get_group_id(0) * ${T};
    const int o0 = get_group_id(1) * ${T};
    const int gt = get_group_id(2);                   /* g * 16 + t */
    __global const clc_real* restrict a = u + (clc_idx)gt * ${COUT} * ${CIN};
    __global const clc_real* restrict b = v + (clc_idx)gt * ${CIN} * CLC_W_P;
    __local clc_real a_tile[${LS}][${T} + 1];         /* [k][o], padded against bank conflicts */
    __local clc_real b_tile[${LS}][${T}];             /* [k][p] */
    clc_real acc[4][4];
    for (int x = 0; x < 4; ++x)
        for (int y = 0; y < 4; ++y) acc[x][y] = (clc_real)0;
    for (int k0 = 0; k0 < ${CIN}; k0 += ${LS}) {
        for (int s = 0; s < 4; ++s) {
            /* A: rows o0 + ly + LS*s, column k0 + lx; B: row k0 + ly, columns p0 + lx + LS*s */
            const int o = o0 + ly + ${LS} * s, ka = k0 + lx, kb = k0 + ly;
            const clc_idx p = p0 + lx + ${LS} * s;
            a_tile[lx][ly + ${LS} * s] = (o < ${COUT} && ka < ${CIN}) ? a[(clc_idx)o * ${CIN} + ka] : (clc_real)0;
            b_tile[ly][lx + ${LS} * s] = (kb < ${CIN} && p < CLC_W_P) ? b[(clc_idx)kb * CLC_W_P + p] : (clc_real)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < ${LS}; ++k) {
            clc_real ak[4], bk[4];
            for (int x = 0; x < 4; ++x) ak[x] = a_tile[k][ly + ${LS} * x];
            for (int y = 0; y < 4; ++y) bk[y] = b_tile[k][lx + ${LS} * y];
            for (int x = 0; x < 4; ++x)
                for (int y = 0; y < 4; ++y) acc[x][y] = fma(ak[x], bk[y], acc[x][y]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    __global clc_real* restrict out = m + (clc_idx)gt * ${COUT} * CLC_W_P;
    for (int x = 0; x < 4; ++x) {
        const int o = o0 + ly + ${LS} * x;
        if (o >= ${COUT}) continue;
        for (int y = 0; y < 4; ++y) {
            const clc_idx p = p0 + lx + ${LS} * y;
            if (p < CLC_W_P) out[(clc_idx)o * CLC_W_P + p] = acc[x][y];
        }
    }
}
</%def>\
##
<%def name="clc_wino_output()">
/* global: (P rounded up, GROUPS * COUT); one work-item per (tile, output channel). */
__kernel void clc_wino_output(__global const clc_real* restrict m,
                              __global const clc_data* restrict bias_base, const long bias_off,
                              __global const clc_data* restrict residual_base, const long residual_off,
                              __global clc_data* restrict dst_base, const long dst_off)
{
    const clc_idx p = get_global_id(0);
    if (p >= CLC_W_P) return;
    const int go = get_global_id(1);                  /* g * COUT + o */
    const int g = go / ${COUT}, o = go % ${COUT};
    __global const clc_real* restrict in = m + ((clc_idx)g * 16 * ${COUT} + o) * CLC_W_P + p;
    const clc_idx step = (clc_idx)${COUT} * CLC_W_P;
    clc_real t[4][4];
    for (int k = 0; k < 16; ++k) t[k / 4][k % 4] = in[k * step];
    /* A^T t A with A^T = [1 1 1 0; 0 1 -1 -1] */
    clc_real at[2][4];
    for (int c = 0; c < 4; ++c) {
        at[0][c] = t[0][c] + t[1][c] + t[2][c];
        at[1][c] = t[1][c] - t[2][c] - t[3][c];
    }
    const int tx = (int)(p % ${TW}), ty = (int)((p / ${TW}) % ${TH});
    const clc_idx n = p / ((clc_idx)${TH} * ${TW});
    /* dst and the residual share one layout (the result's): `pos` indexes both from their first elements */
    __global clc_data* restrict dst = dst_base + dst_off;
    __global const clc_data* restrict bias = bias_base + bias_off;
    __global const clc_data* restrict residual = residual_base + residual_off;
    const clc_idx plane = n * ${GROUPS * COUT} * ${OH * OW} + go * CLC_W_DST_C;  /* channel go of image n */
    for (int r = 0; r < 2; ++r) {
        const int row = ty * 2 + r;
        if (row >= ${OH}) break;
        const clc_idx pos = plane + (row * ${OW} + tx * 2) * CLC_W_DST_P;
        clc_store_result(dst, pos, at[r][0] + at[r][1] + at[r][2], bias, go, residual);
        if (tx * 2 + 1 < ${OW}) clc_store_result(dst, pos + CLC_W_DST_P, at[r][1] - at[r][2] - at[r][3], bias, go, residual);
    }
}
</%def>\
