## Winograd F(2x2, 3x3), not fused: the transforms around the GEMM core's 16 GEMMs per group
## (algorithms/winograd.py says why each identity holds).  The convolution whose tiles are
## transformed: input `src` (N, G*CIN, IH, IW) -> output `dst` (N, G*COUT, OH, OW), or
## (N, IH, IW, G*CIN) -> (N, OH, OW, G*COUT) channels_last; the forward pass runs x -> y, the data
## gradient dy -> dx with the weight flipped and its channel axes swapped (`FLIP`), and the weight
## gradient reads x as src and dy as dst.  t is one of the 16 positions of a 4x4 tile, p a 2x2
## output tile (P = N * TH * TW of them).  Entry points:
##   clc_wino_weight       U[g][t][o][i] = (G w G^T)[t]
##   clc_wino_input        V[g][t][i][p] = (B^T d B)[t], d the 4x4 input patch of tile p (zeros outside)
##   clc_wino_output       dst = A^T M A per tile through the epilogue, M[g][t][o][p] = sum_i U V
##                         (the GEMMs'), the edge tiles' outside outputs dropped
##   clc_wino_grad_output  Y[g][t][o][p] = (A e A^T)[t], e the 2x2 tile p of dy (zeros outside)
##   clc_wino_weight_grad  dw[g*COUT + o][i] = G^T (sum over the pieces s of M[s][g][t][o][i]) G,
##                         M[s] = sum over piece s's tiles of Y V (the GEMMs')
## w, src, dst and dw are the call's tensors (clc_data); U, V, Y and M are workspaces (clc_real), so
## the transforms run in the arithmetic type whatever the storage.
## Parameters: geom, real, data, layout, index, entries, epilogue, bias (the prelude's: clc_wino_output
## writes the result); N, GROUPS, CIN, COUT (per group), IH, IW, OH, OW, PT, PL (the padding before rows and
## columns), TH, TW (tiles down and across), FLIP; SPLITS (the weight gradient's pieces).
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
##
<%def name="clc_wino_grad_output()">
/* global: (P rounded up, GROUPS * COUT); one work-item per (tile, output channel): the weight
   gradient's transformed dy, A e A^T with A^T = [1 1 1 0; 0 1 -1 -1]. */
__kernel void clc_wino_grad_output(__global const clc_data* restrict dy_base, const long dy_off,
                                   __global clc_real* restrict ydy)
{
    const clc_idx p = get_global_id(0);
    if (p >= CLC_W_P) return;
    const int go = get_global_id(1);                  /* g * COUT + o */
    const int tx = (int)(p % ${TW}), ty = (int)((p / ${TW}) % ${TH});
    const clc_idx n = p / ((clc_idx)${TH} * ${TW});
    __global const clc_data* restrict plane = dy_base + dy_off + n * ${GROUPS * COUT} * ${OH * OW} + go * CLC_W_DST_C;
    clc_real e[2][2];
    for (int r = 0; r < 2; ++r) {
        const int row = ty * 2 + r;
        for (int c = 0; c < 2; ++c) {
            const int col = tx * 2 + c;
            e[r][c] = (row < ${OH} && col < ${OW}) ? clc_ld(plane, (row * ${OW} + col) * CLC_W_DST_P) : (clc_real)0;
        }
    }
    /* A e: rows e0, e0 + e1, e0 - e1, -e1; then the same along the columns */
    clc_real ae[4][2];
    for (int c = 0; c < 2; ++c) {
        ae[0][c] = e[0][c];
        ae[1][c] = e[0][c] + e[1][c];
        ae[2][c] = e[0][c] - e[1][c];
        ae[3][c] = -e[1][c];
    }
    const int g = go / ${COUT}, o = go % ${COUT};
    __global clc_real* restrict out = ydy + ((clc_idx)g * 16 * ${COUT} + o) * CLC_W_P + p;
    const clc_idx step = (clc_idx)${COUT} * CLC_W_P;  /* from one tile position t to the next */
    for (int r = 0; r < 4; ++r) {
        out[(r * 4 + 0) * step] = ae[r][0];
        out[(r * 4 + 1) * step] = ae[r][0] + ae[r][1];
        out[(r * 4 + 2) * step] = ae[r][0] - ae[r][1];
        out[(r * 4 + 3) * step] = -ae[r][1];
    }
}
</%def>\
##
<%def name="clc_wino_weight_grad()">
/* global: (COUT * CIN rounded up, GROUPS); one work-item per 3x3 filter: its 16 products summed
   over the pieces in order, then G^T m G with G^T = [1 1/2 1/2 0; 0 1/2 -1/2 0; 0 1/2 1/2 1]. */
__kernel void clc_wino_weight_grad(__global const clc_real* restrict m,
                                   __global clc_data* restrict dw_base, const long dw_off)
{
    const clc_idx oi = get_global_id(0);
    if (oi >= (clc_idx)${COUT} * ${CIN}) return;
    const int g = get_global_id(1);
    const clc_idx position = (clc_idx)${COUT} * ${CIN};  /* from one t to the next */
    const clc_idx piece = (clc_idx)${GROUPS} * 16 * position;  /* from one piece to the next */
    __global const clc_real* restrict in = m + (clc_idx)g * 16 * position + oi;
    clc_real t[4][4];
    for (int k = 0; k < 16; ++k) {
        clc_real acc = in[k * position];
        for (int s = 1; s < ${SPLITS}; ++s) acc += in[s * piece + k * position];
        t[k / 4][k % 4] = acc;
    }
    clc_real gt[3][4];
    for (int c = 0; c < 4; ++c) {
        gt[0][c] = t[0][c] + (clc_real)0.5 * (t[1][c] + t[2][c]);
        gt[1][c] = (clc_real)0.5 * (t[1][c] - t[2][c]);
        gt[2][c] = (clc_real)0.5 * (t[1][c] + t[2][c]) + t[3][c];
    }
    /* dw[g*COUT + o][i][r][c], the canonical layout whatever the activations' */
    __global clc_data* restrict dw = dw_base + dw_off + ((clc_idx)g * ${COUT} * ${CIN} + oi) * 9;
    for (int r = 0; r < 3; ++r) {
        clc_st(dw, r * 3 + 0, gt[r][0] + (clc_real)0.5 * (gt[r][1] + gt[r][2]));
        clc_st(dw, r * 3 + 1, (clc_real)0.5 * (gt[r][1] - gt[r][2]));
        clc_st(dw, r * 3 + 2, (clc_real)0.5 * (gt[r][1] + gt[r][2]) + gt[r][3]);
    }
}
</%def>\
