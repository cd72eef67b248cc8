## Column buffer for the im2col algorithm on CPU devices: the same buffer as im2col.mako's
## clc_im2col (col[g][(ci, tap)][(b, po)], b counted from `chunk`), but one work-item copies one
## output row (OW consecutive columns): the row's input line and its padding test are decided once,
## and the copy along ow has no divisions, so LLVM vectorises it.  (im2col.mako's one work-item per
## element spends its time decoding indices: 2.5 GB/s on PoCL.)
## Entry points:
##   clc_im2col_rows    the column buffer, one output row per work-item
##   clc_im2col_t       the same buffer transposed (the weight gradient's, see there), one output
##                      pixel per work-item
##   clc_im2col_t_rows  the transposed buffer, one (input channel, output row, image) per work-item
##   clc_im2col_t_tiles the transposed buffer of a 1x1 stride-1 layer (the input itself, transposed),
##                      one tile of T pixels x T channels per work-item
##   clc_col2im_rows    the data gradient's way back from the buffer, one dx row per work-item
## Parameters: geom, real, data, index, entries, epilogue, bias (the prelude's: clc_col2im_rows
## writes the transposed convolution's result), chunk_batch (images per launch), T (clc_im2col_t_tiles'
## tile side: the vector lanes), COL_T (the transposed buffer's row stride, at least CI * KV: its writers
## need it, the others take none), COL_LD (clc_im2col_rows' row stride, at least NB * OP: padded where
## rows would share the L1's sets, gemm.spread_rows; NB * OP where not given), PANEL_VN (where given:
## clc_im2col_rows (OW a multiple of it) and clc_im2col_t_rows write the buffer as the CPU GEMM's
## packed panels of B, Bp[g][n / VN][k][n % VN], which it reads in B's place: no clc_pack_b launch;
## the transposed buffer's last panel's lanes past N zeros, as clc_pack_b writes them).
## x and dx are the call's tensors (clc_data, read with clc_ld); the column buffer is a clc_real
## workspace.
<%!
    from clconv.dtypes import STORAGE
    # clc_im2col_rows' vectors along a stride-2 output row's run (the lanes of AVX2's float
    # registers), for rows of at least ROW_VN_MIN_RUN outputs
    ROW_VN = 8
    ROW_VN_MIN_RUN = 4 * ROW_VN
%>
<%namespace name="prelude" file="prelude.mako"/>
${prelude.header(geom, real, index, data, epilogue, bias)}
#define CLC_NB ${chunk_batch}
#define CLC_COLS ((clc_idx)CLC_NB * CLC_OP)     /* columns of one group's buffer */
#define CLC_COL_LD ((clc_idx)${context.get("COL_LD") or "CLC_COLS"})   /* clc_im2col_rows' row stride */
% if context.get("PANEL_VN"):
<%
    # the GEMM's B (k, n): the forward's (input channel x tap, this chunk's pixels), the weight
    # gradient's transposed buffer's (this chunk's pixels, input channel x tap)
    panel_vn = context.get("PANEL_VN")
    panel_k, panel_n = ((geom.cin_per_group * geom.kernel_volume, chunk_batch * geom.out_pixels)
                        if not context.get("COL_T") else (chunk_batch * geom.out_pixels, geom.cin_per_group * geom.kernel_volume))
%>\
#define CLC_PANEL_VN ${panel_vn}
/* element (k, n) of group g's B in the CPU GEMM's panels of PANEL_VN columns (gemm_cpu.mako's B_PACKED) */
#define CLC_PANEL(g, k, n) ((((clc_idx)(g) * ${-(-panel_n // panel_vn)} + (n) / CLC_PANEL_VN) * ${panel_k} + (k)) * CLC_PANEL_VN + (n) % CLC_PANEL_VN)
% endif
% if context.get("COL_T"):
#define CLC_COL_T ((clc_idx)${context.get("COL_T")})   /* the transposed buffer's row stride: CI * KV, or padded (gemm.spread_rows) */
% endif
${prelude.entry_points(self, entries)}\
##
<%def name="clc_im2col_rows()">
/* global: (OD*OH, NB, G*CI*KV) */
__kernel void clc_im2col_rows(__global const clc_data* restrict x_base, const long x_off,
                              __global clc_real* restrict col, const int chunk)
{
    const int line = get_global_id(0);            /* od * OH + oh */
    const clc_idx image = get_global_id(1);       /* image of this launch: b = chunk + image */
    const clc_idx row = get_global_id(2);         /* g * CI*KV + ci * KV + tap */
    const clc_idx gci = row / CLC_KV;             /* g * CI + ci */
    const int tap = (int)(row % CLC_KV);
    CLC_SPLIT_TAP(tap, kd, kh, kw);
    const int od = line / CLC_OH, oh = line % CLC_OH;
    const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
    const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
% if context.get("PANEL_VN"):
    /* in panels (a row's run of OW columns a whole number of panel rows, VN-aligned): the run's
       values by the same tests, VN at a time into each panel's row k */
    const clc_idx first = image * CLC_OP + (clc_idx)line * CLC_OW;
    const clc_idx group = row / (CLC_CI * CLC_KV), k = row % (CLC_CI * CLC_KV);
    const bool inside = (uint)id < (uint)CLC_ID && (uint)ih < (uint)CLC_IH;
    __global const clc_data* restrict src =
        x_base + x_off + ((chunk + image) * CLC_CIN + gci) * CLC_IP + (inside ? ((clc_idx)id * CLC_IH + ih) * CLC_IW : 0);
    const int shift = kw * CLC_DW - CLC_PW;
    for (int p = 0; p < CLC_OW / CLC_PANEL_VN; ++p) {
        __global clc_real* restrict dst = col + CLC_PANEL(group, k, first + p * CLC_PANEL_VN);
        for (int v = 0; v < CLC_PANEL_VN; ++v) {
            const int iw = (p * CLC_PANEL_VN + v) * CLC_SW + shift;
            dst[v] = inside && (uint)iw < (uint)CLC_IW ? clc_ld(src, iw) : (clc_real)0;
        }
    }
% else:
    __global clc_real* restrict dst = col + row * CLC_COL_LD + image * CLC_OP + (clc_idx)line * CLC_OW;
    if (!((uint)id < (uint)CLC_ID && (uint)ih < (uint)CLC_IH)) {
        for (int ow = 0; ow < CLC_OW; ++ow)
            dst[ow] = (clc_real)0;
        return;
    }
    /* g * CI + ci of the canonical layout is the input channel */
    __global const clc_data* restrict src =
        x_base + x_off + ((chunk + image) * CLC_CIN + gci) * CLC_IP + ((clc_idx)id * CLC_IH + ih) * CLC_IW;
    /* output columns [ow_begin, ow_end) read inside the row: that run copies without a test per
       column, the padding's columns before and after it are zeros (as clc_col2im_rows' runs) */
    const int shift = kw * CLC_DW - CLC_PW;
    const int ow_begin = min(CLC_OW, shift >= 0 ? 0 : (-shift + CLC_SW - 1) / CLC_SW);
    const int ow_end = max(ow_begin, shift > CLC_IW - 1 ? 0 : min(CLC_OW, (CLC_IW - 1 - shift) / CLC_SW + 1));
    for (int ow = 0; ow < ow_begin; ++ow)
        dst[ow] = (clc_real)0;
    int ow = ow_begin;
% if geom.stride[2] == 2 and geom.out_size[2] >= ROW_VN_MIN_RUN:
    /* stride 2 over a long row: a vector of twice ROW_VN inputs, its even lanes; its last lane
       (one past the run's last input) stays inside the row, for the loop stops a column early */
    for (; ow + ${ROW_VN} < ow_end; ow += ${ROW_VN}) {
        const ${real}${2 * ROW_VN} pair = ${prelude.vload(2 * ROW_VN, "src + 2 * ow + shift")};
        vstore${ROW_VN}(pair.even, 0, dst + ow);
    }
% endif
    for (; ow < ow_end; ++ow)
        dst[ow] = clc_ld(src, ow * CLC_SW + shift);
    for (ow = ow_end; ow < CLC_OW; ++ow)
        dst[ow] = (clc_real)0;
% endif
}
</%def>\
##
<%def name="clc_im2col_t()">
/* The column buffer transposed, for the weight gradient: colT[g][(b, po)][(ci, tap)], so that the
   CPU GEMM reads B = colT with row loads along (ci, tap).  One work-item per output pixel writes
   its CI * KV values contiguously.  global: (OP, NB, G) */
__kernel void clc_im2col_t(__global const clc_data* restrict x_base, const long x_off,
                           __global clc_real* restrict col, const int chunk)
{
    const clc_idx po = get_global_id(0);
    const clc_idx image = get_global_id(1);
    const clc_idx g = get_global_id(2);
    CLC_SPLIT_OUT(po, od, oh, ow);
    __global clc_real* restrict dst = col + ((g * CLC_COLS) + image * CLC_OP + po) * CLC_COL_T;
    __global const clc_data* restrict src = x_base + x_off + ((chunk + image) * CLC_CIN + g * CLC_CI) * CLC_IP;
    for (int ci = 0; ci < CLC_CI; ++ci, src += CLC_IP) {
        for (int kd = 0; kd < CLC_KD; ++kd) {
            const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
            for (int kh = 0; kh < CLC_KH; ++kh) {
                const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
                for (int kw = 0; kw < CLC_KW; ++kw, ++dst) {
                    const int iw = ow * CLC_SW - CLC_PW + kw * CLC_DW;
                    *dst = CLC_INSIDE(id, ih, iw) ? clc_ld(src, CLC_IN_OFFSET(id, ih, iw)) : (clc_real)0;
                }
            }
        }
    }
}
</%def>\
##
<%def name="clc_im2col_t_tiles()">
<%
    vec = f"{real}{T}"
%>
/* The transposed buffer of a 1x1 stride-1 layer without padding, colT[g][(b, p)][ci] = x[b][g*CI + ci][p]:
   one work-item per tile of T pixels x T channels reads T pixel runs (a vector from each channel's
   plane) and writes T channel runs (a vector into each pixel's row of colT), the tile turned over in
   registers.  clc_im2col_t (a work-item per pixel, a value from each of C_in planes) wrote a value per
   cache line and, where a row of colT is a power-of-two size apart, mapped a pixel block's rows onto
   one cache set.  Tiles past the image's last pixel or the group's last channel go value by value.
   global: (ceil(OP / T), G * ceil(CI / T), NB) */
__kernel void clc_im2col_t_tiles(__global const clc_data* restrict x_base, const long x_off,
                                 __global clc_real* restrict col, const int chunk)
{
    const clc_idx p0 = (clc_idx)get_global_id(0) * ${T};
    const clc_idx g = get_global_id(1) / ${-(-geom.cin_per_group // T)};
    const clc_idx c0 = (get_global_id(1) % ${-(-geom.cin_per_group // T)}) * ${T};
    const clc_idx image = get_global_id(2);
    __global const clc_data* restrict plane = x_base + x_off + ((chunk + image) * CLC_CIN + g * CLC_CI + c0) * CLC_IP;
    __global clc_real* restrict dst = col + (g * CLC_COLS + image * CLC_OP + p0) * CLC_COL_T + c0;
    if (p0 + ${T} <= CLC_OP && c0 + ${T} <= CLC_CI) {
% for c in range(T):
        const ${vec} v${c} = ${prelude.vload(T, f"plane + {c} * CLC_IP + p0")};
% endfor
${prelude.transpose(T, vec, "v", "t")}
% for p in range(T):
        vstore${T}(t${p}, 0, dst + ${p} * CLC_COL_T);
% endfor
    } else {
        for (int p = 0; p < ${T} && p0 + p < CLC_OP; ++p)
            for (int c = 0; c < ${T} && c0 + c < CLC_CI; ++c)
                dst[p * CLC_COL_T + c] = clc_ld(plane, c * CLC_IP + p0 + p);
    }
}
</%def>\
##
<%def name="clc_im2col_t_rows()">
<%
    KW = geom.kernel[2]
    krows = prelude.attr.kernel_rows(geom)
%>
/* The same transposed buffer, one work-item per (input channel, output row, image): the kernel
   rows' validity and input lines are decided once, and per output pixel the KV values of this
   channel are written next to each other (clc_im2col_t's per-element index decoding and tests cost
   it 4.5 GB/s on PoCL).  global: (G*CI, OD*OH, NB) */
__kernel void clc_im2col_t_rows(__global const clc_data* restrict x_base, const long x_off,
                                __global clc_real* restrict col, const int chunk)
{
    const clc_idx gci = get_global_id(0);         /* g * CI + ci: the input channel */
    const int line = get_global_id(1);            /* od * OH + oh */
    const clc_idx image = get_global_id(2);
    const clc_idx g = gci / CLC_CI, ci = gci % CLC_CI;
    const int od = line / CLC_OH, oh = line % CLC_OH;
    __global const clc_data* restrict plane = x_base + x_off + ((chunk + image) * CLC_CIN + gci) * CLC_IP;
<%
    panels = context.get("PANEL_VN")
    # this channel's tap of output pixel ow: in the GEMM's panels, or next to each other in the pixel's row
    dst = (lambda tap: f"col[CLC_PANEL(g, first + ow, n0 + {tap})]") if panels else (lambda tap: f"dst[{tap}]")
%>\
% if panels:
    /* pixel k = image * OP + line * OW + ow of this chunk, columns n = ci * KV + tap: in panels */
    const clc_idx first = image * CLC_OP + (clc_idx)line * CLC_OW, n0 = ci * CLC_KV;
% else:
    __global clc_real* restrict dst = col + (g * CLC_COLS + image * CLC_OP + (clc_idx)line * CLC_OW)
                                            * CLC_COL_T + ci * CLC_KV;
% endif
% for r, kd, kh in krows:
    const int id${r} = od * CLC_SD - CLC_PD + ${kd} * CLC_DD, ih${r} = oh * CLC_SH - CLC_PH + ${kh} * CLC_DH;
    const bool ok${r} = (uint)id${r} < (uint)CLC_ID && (uint)ih${r} < (uint)CLC_IH;
    __global const clc_data* restrict src${r} = plane + (ok${r} ? ((clc_idx)id${r} * CLC_IH + ih${r}) * CLC_IW : 0);
% endfor
    for (int ow = 0; ow < CLC_OW; ++ow${"" if panels else ", dst += CLC_COL_T"}) {
% for r, kd, kh in krows:
% for kw in range(KW):
        { const int iw = ow * CLC_SW - CLC_PW + ${kw} * CLC_DW;
          ${dst(r * KW + kw)} = ok${r} && (uint)iw < (uint)CLC_IW ? clc_ld(src${r}, iw) : (clc_real)0; }
% endfor
% endfor
<% tail = -(-geom.cin_per_group * geom.kernel_volume // panels) * panels - geom.cin_per_group * geom.kernel_volume if panels else 0 %>\
% if tail:
        if (ci == CLC_CI - 1) {  /* the last panel's lanes past N: zeros, as clc_pack_b writes them */
% for lane in range(tail):
            col[CLC_PANEL(g, first + ow, CLC_CI * CLC_KV + ${lane})] = (clc_real)0;
% endfor
        }
% endif
    }
}
</%def>\
##
<%def name="clc_col2im_rows()">
<%
    # dx that stores clc_real holds the row's sums itself (a private row ran 1.4x slower on PoCL:
    # 0.50 vs 0.36 ms, 64 channels of 56x56, 3x3); float16/bfloat16 dx cannot, so they sum in one
    in_place = STORAGE[data].c_type == real
%>\
/* col2im for CPU devices: one work-item per dx row (image, channel, id, ih) adds up, tap by tap,
   the column-buffer rows that read it: for each kernel row (kd, kh) whose output row exists and
   each kw, one run of consecutive columns added onto the row's sums (a unit-stride loop without
   divisions or tests inside, which LLVM vectorises; im2col.mako's clc_col2im decodes indices per
   element).  Taps are added in the same order as clc_col2im's, then the epilogue.
   global: (ID*IH, NB, CIN) */
__kernel void clc_col2im_rows(__global const clc_real* restrict col,
                              ${prelude.epilogue_params(bias, epilogue)}
                              __global clc_data* restrict dx_base, const long dx_off, const int chunk)
{
    const int line = get_global_id(0);            /* id * IH + ih */
    const clc_idx image = get_global_id(1);
    const int channel = get_global_id(2);
    const int g = channel / CLC_CI, ci = channel % CLC_CI;
    const int id = line / CLC_IH, ih = line % CLC_IH;
    const clc_idx at = ((chunk + image) * CLC_CIN + channel) * CLC_IP + (clc_idx)line * CLC_IW;
    __global const clc_real* restrict rows = col + ((clc_idx)g * CLC_CI + ci) * CLC_KV * CLC_COLS + image * CLC_OP;
% if in_place:
    __global clc_real* restrict dxr = (__global clc_real*)(dx_base + dx_off) + at;  /* clc_data is clc_real */
% else:
    clc_real dxr[CLC_IW];
% endif
    for (int iw = 0; iw < CLC_IW; ++iw)
        dxr[iw] = (clc_real)0;
    for (int kd = 0; kd < CLC_KD; ++kd) {
        const int od = clc_source_index(id, CLC_PD, kd, CLC_DD, CLC_SD, CLC_OD);
        if (od < 0) continue;
        for (int kh = 0; kh < CLC_KH; ++kh) {
            const int oh = clc_source_index(ih, CLC_PH, kh, CLC_DH, CLC_SH, CLC_OH);
            if (oh < 0) continue;
            for (int kw = 0; kw < CLC_KW; ++kw) {
                const int tap = (kd * CLC_KH + kh) * CLC_KW + kw;
                __global const clc_real* restrict src = rows + tap * CLC_COLS + ((clc_idx)od * CLC_OH + oh) * CLC_OW;
                /* output column ow reads input column ow * SW - PW + kw * DW: those inside the row */
                const int shift = kw * CLC_DW - CLC_PW;
                const int ow_begin = shift >= 0 ? 0 : (-shift + CLC_SW - 1) / CLC_SW;
                const int ow_end = shift > CLC_IW - 1 ? 0 : min(CLC_OW, (CLC_IW - 1 - shift) / CLC_SW + 1);
% if geom.stride[2] == 1:
                for (int ow = ow_begin; ow < ow_end; ++ow)
                    dxr[ow + shift] += src[ow];
% else:
                for (int ow = ow_begin; ow < ow_end; ++ow)
                    dxr[ow * CLC_SW + shift] += src[ow];
% endif
            }
        }
    }
% if not in_place or bias or not epilogue.is_identity:
    __global const clc_data* restrict bias = bias_base + bias_off;
    __global const clc_data* restrict residual = residual_base + residual_off + at;
% if in_place:
    /* each sum is read before its own element is overwritten */
    for (int iw = 0; iw < CLC_IW; ++iw)
        clc_store_result(dxr, iw, dxr[iw], bias, channel, residual);
% else:
    __global clc_data* restrict out = dx_base + dx_off + at;
    for (int iw = 0; iw < CLC_IW; ++iw)
        clc_store_result(out, iw, dxr[iw], bias, channel, residual);
% endif
% endif
}
</%def>\
