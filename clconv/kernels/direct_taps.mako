## The weight gradient on CPUs without a column buffer: dw(o, ci, kd, kh, kw) = sum over the batch and
## the output pixels of dy(b, o, p) x(b, ci, the input pixel tap (kd, kh, kw) of p reads).
## Entry points:
##   clc_dy_rows  dyt[g][b][p][COP] = dy(chunk + b, g * CO + o, p): a chunk of dy with each output
##                pixel's channels of a group side by side, zeros past CO (COP: CO rounded up to
##                whole blocks of NB x VN), in clc_real
##   clc_direct_backward_weight_taps  one work-item per (tile of taps, CB input channels, block of
##                output channels, slice of the chunk's output pixels): TH x TW taps (TH kernel rows,
##                TW columns) x CB input channels x NB vectors of VN output channels, TH x TW x CB x NB
##                vector sums in registers
## Parameters: geom, real, data, index, entries, epilogue, bias (the prelude's; neither kernel writes
## the pass's result through the epilogue: dw has none), VN (lanes per vector), NB (vectors per
## block), TH and TW (a tile's kernel rows and columns), CB (input channels a work-item: more than
## one for 1x1 kernels, whose tile is one tap), chunk_batch (images per launch pair), slices
## (pieces of the chunk's output pixels), partial (sums into the clc_real workspace `partial`,
## [slice][weight element], rather than into dw), accumulate (later chunks add onto what the earlier
## ones stored).
##
## Why this shape (a GEMM's register tile without its column buffer): for one input channel, the TH x
## TW taps of a tile read TH x TW input values per output pixel at constant offsets from one address
## (broadcasts), and dyt gives the block's NB x VN output channels of that pixel as NB vector loads,
## so each output pixel costs TH x TW + NB loads for TH x TW x NB vector FMAs.  im2col writes and
## reads back C_in x taps values per output pixel instead (on PoCL a third of its time on 5x5 weight
## gradients; docs/performance.md).
<%namespace name="prelude" file="prelude.mako"/>
${prelude.header(geom, real, index, data, epilogue, bias)}
<%!
    def blocks(geom, NB, VN, TH, TW, chunk_batch, slices):
        """The work's split: output channels in blocks of NB x VN (OB of them a group, a dyt row COP
        long), the kernel's rows and columns in KHCH x KWCH tiles of TH x TW taps, the chunk's PIXELS
        output pixels (batch x depth x rows x columns, flat) in slices of SPAN."""
        block = NB * VN
        ob = -(-geom.cout_per_group // block)
        pixels = chunk_batch * geom.out_pixels
        return dict(BLOCK=block, OB=ob, COP=ob * block, KHCH=-(-geom.kernel[1] // TH),
                    KWCH=-(-geom.kernel[2] // TW), PIXELS=pixels,
                    SPAN=-(-pixels // slices))
%>\
<% S = blocks(geom, NB, VN, TH, TW, chunk_batch, slices) %>\
#define CLC_COP ((clc_idx)${S["COP"]})  /* a dyt row */
#define CLC_NB_CHUNK ${chunk_batch}
#define CLC_TAP_ROW ((clc_idx)CLC_DH * CLC_IW * CLC_XP)  /* from a tile's input row to the next's */
${prelude.entry_points(self, entries)}\
##
<%def name="clc_dy_rows()"><%
    COP = blocks(geom, NB, VN, TH, TW, chunk_batch, slices)["COP"]
    vec = f"{real}{VN}"
%>
/* global: (ceil(OP / VN), G * COP / VN, chunk_batch).  One tile of VN output pixels x VN channels of
   group g per work-item: channels-first, VN vectors along the pixels (one from each channel's
   plane) turned over in registers into VN vectors along the channels, one per pixel's row of dyt
   (a work-item per pixel reading its channels a plane apart took 9.2 of a 12.8 ms weight gradient
   at 224x224, a cache line and a page per value); channels-last, the rows' runs copied as vectors.
   Channels past CO are zeros, so that the taps kernel reads whole blocks without tests; a tile
   past the last pixel or channel goes value by value. */
__kernel void clc_dy_rows(__global const clc_data* restrict dy_base, const long dy_off,
                          __global clc_real* restrict dyt, const int chunk)
{
    const clc_idx p0 = (clc_idx)get_global_id(0) * ${VN};
    const int g = (int)get_global_id(1) / ${COP // VN}, c0 = (int)get_global_id(1) % ${COP // VN} * ${VN};
    const int b = (int)get_global_id(2);
    __global const clc_data* restrict dy = dy_base + dy_off + CLC_Y_AT(chunk + b, g * CLC_CO + c0, p0);
    __global clc_real* restrict row = dyt + (((clc_idx)g * CLC_NB_CHUNK + b) * CLC_OP + p0) * CLC_COP + c0;
    if (p0 + ${VN} <= CLC_OP && c0 + ${VN} <= CLC_CO) {
% if layout == "channels_last":
% for p in range(VN):
        vstore${VN}(${prelude.vload(VN, f"dy + {p} * CLC_YP")}, 0, row + ${p} * CLC_COP);
% endfor
% else:
% for c in range(VN):
        const ${vec} v${c} = ${prelude.vload(VN, f"dy + {c} * CLC_YC")};
% endfor
${prelude.transpose(VN, vec, "v", "t")}
% for p in range(VN):
        vstore${VN}(t${p}, 0, row + ${p} * CLC_COP);
% endfor
% endif
    } else {
        for (int p = 0; p < ${VN} && p0 + p < CLC_OP; ++p)
            for (int c = 0; c < ${VN}; ++c)
                row[p * CLC_COP + c] = c0 + c < CLC_CO ? clc_ld(dy, c * CLC_YC + p * CLC_YP) : (clc_real)0;
    }
}
</%def>\
##
## sums (u, t, j) += the tile's input values at output column ow x the block's NB vectors there.
## `inside`: every tap inside the input, read at constant offsets from xi (the tile's first tap at
## column 0); else from offset `at` (row kh0's start, which may lie in the padding), each tap's column
## tested, and its row too where `rows_checked` (some of the tile's rows lie in the padding)
<%def name="products(inside, rows_checked=False)"><% vec = f"{real}{VN}" %>
% for j in range(NB):
            const ${vec} d${j} = vload${VN}(0, dr + (clc_idx)ow * CLC_COP + ${j * VN});
% endfor
% for u in range(TH):
% for t in range(TW):
% for c in range(CB):
            {
% if inside:
                const clc_real v = clc_ld(xi, ${f"{c} * CLC_XC + " if c else ""}${u} * CLC_TAP_ROW + (ow * CLC_SW + ${t} * CLC_DW) * CLC_XP);
% else:
                const int iw = ow * CLC_SW + (kw0 + ${t}) * CLC_DW - CLC_PW;
                const bool in = (uint)iw < (uint)CLC_IW${f" && row_in{u}" if rows_checked else ""};
                const clc_real v = in ? clc_ld(x, at + ${f"{c} * CLC_XC + " if c else ""}${u} * CLC_TAP_ROW + iw * CLC_XP) : (clc_real)0;
% endif
% for j in range(NB):
                s${u}_${t}_${c}_${j} = fma((${vec})v, d${j}, s${u}_${t}_${c}_${j});
% endfor
            }
% endfor
% endfor
% endfor
</%def>\
##
<%def name="clc_direct_backward_weight_taps()"><%
    S = blocks(geom, NB, VN, TH, TW, chunk_batch, slices)
    BLOCK, OB, KHCH, KWCH, PIXELS, SPAN = S["BLOCK"], S["OB"], S["KHCH"], S["KWCH"], S["PIXELS"], S["SPAN"]
    G = geom.groups
    vec = f"{real}{VN}"
%>
/* global: (KD * ${KHCH} * ${KWCH}, CI / ${CB}, slices * G * ${OB}): work-item (r, cb, (slice, g, ob)) sums
   the ${TH} x ${TW} taps (kd, kh0 + u, kw0 + t) of tile r = (kd, row tile, column tile) for input
   channels ci = cb * ${CB} .. + ${CB - 1} of group g and output channels ob * ${BLOCK} .. + ${BLOCK - 1}, over its slice of the chunk's
   ${PIXELS} output pixels (${SPAN} a slice, in the order batch, depth, rows, columns).  The slice and
   block vary slowest, so the work-items one core runs in a row walk the same slice of the block's
   columns of dyt, which the slices keep within the core's cache.  Along a row of output pixels
   whose tile rows all lie inside the input, the columns whose taps all lie inside too run without
   tests (ow in [lo, hi)); the edges test each tap's column, and rows that reach into the padding
   test every tap.  Each sum runs over its slice in one fixed order: deterministic. */
__kernel void clc_direct_backward_weight_taps(__global const clc_data* restrict x_base, const long x_off,
                                              __global const clc_real* restrict dyt,
% if partial:
                                              __global clc_real* restrict dw,
% else:
                                              __global clc_data* restrict dw_base, const long dw_off,
% endif
                                              const int chunk)
{
    const int r = (int)get_global_id(0);
    const int kwc = r % ${KWCH}, khc = (r / ${KWCH}) % ${KHCH}, kd = r / ${KHCH * KWCH};
    const int ci = (int)get_global_id(1) * ${CB};  /* the first of the work-item's input channels */
    const int ob = (int)(get_global_id(2) % ${OB});
    const int g = (int)(get_global_id(2) / ${OB}) % CLC_G;
    const int slice = (int)(get_global_id(2) / ${G * OB});
    /* the last tile of a kernel row (column) wider than its tiles ends at KH (KW): its first rows
       (columns) repeat the tile before's, and are not stored */
    const int kh0 = min(khc * ${TH}, CLC_KH - ${TH}), own_h = khc * ${TH};
    const int kw0 = min(kwc * ${TW}, CLC_KW - ${TW}), own_w = kwc * ${TW};
    /* the output columns whose TW taps all lie inside the input row */
    const int before = CLC_PW - kw0 * CLC_DW, after = CLC_IW - 1 + CLC_PW - (kw0 + ${TW - 1}) * CLC_DW;
    const int lo = min(before <= 0 ? 0 : (before + CLC_SW - 1) / CLC_SW, CLC_OW);
    const int hi = max(lo, after < 0 ? 0 : min(after / CLC_SW + 1, CLC_OW));
    __global const clc_data* restrict x = x_base + x_off;

% for u in range(TH):
% for t in range(TW):
% for c in range(CB):
% for j in range(NB):
    ${vec} s${u}_${t}_${c}_${j} = (${vec})0;
% endfor
% endfor
% endfor
% endfor
    const clc_idx first = (clc_idx)slice * ${SPAN}, end = min(first + ${SPAN}, (clc_idx)${PIXELS});
    for (int row = (int)(first / CLC_OW); (clc_idx)row * CLC_OW < end; ++row) {
        /* the slice's columns of this row of output pixels */
        const int ow_from = (int)max(first - (clc_idx)row * CLC_OW, (clc_idx)0);
        const int ow_to = (int)min(end - (clc_idx)row * CLC_OW, (clc_idx)CLC_OW);
        const int b = row / (CLC_OD * CLC_OH), od = (row / CLC_OH) % CLC_OD, oh = row % CLC_OH;
        const int id = od * CLC_SD + kd * CLC_DD - CLC_PD, ih = oh * CLC_SH + kh0 * CLC_DH - CLC_PH;
        const int ih_last = ih + ${TH - 1} * CLC_DH;
        if ((uint)id >= (uint)CLC_ID || ih_last < 0 || ih >= CLC_IH) continue;  /* the tile's rows all read padding */
        /* at: input row (id, ih) of channel ci, as an offset (it may lie in the padding); dr: the
           block's columns of dyt at output row (od, oh) */
        const clc_idx at = CLC_X_AT(chunk + b, g * CLC_CI + ci, 0) + ((clc_idx)id * CLC_IH + ih) * CLC_IW * CLC_XP;
        __global const clc_real* dr = dyt + (((clc_idx)g * CLC_NB_CHUNK + b) * CLC_OP + CLC_OUT_OFFSET(od, oh, 0)) * CLC_COP
                                      + ob * ${BLOCK};
        int ow = ow_from;
        if (ih < 0 || ih_last >= CLC_IH) {  /* some of the tile's rows read padding: every tap tested */
% for u in range(TH):
            const bool row_in${u} = (uint)(ih + ${u} * CLC_DH) < (uint)CLC_IH;
% endfor
            for (; ow < ow_to; ++ow) {
${products(False, True)}
            }
            continue;
        }
        for (; ow < min(lo, ow_to); ++ow) {
${products(False)}
        }
        {
            /* inside: the tile's input values at constant offsets from one address */
            __global const clc_data* xi = x + at + (kw0 * CLC_DW - CLC_PW) * CLC_XP;
            for (; ow < min(hi, ow_to); ++ow) {
${products(True)}
            }
        }
        for (; ow < ow_to; ++ow) {
${products(False)}
        }
    }

    /* dw(o, ci + c, kd, kh0 + u, kw0 + t) for the block's output channels o < CO, through a private
       copy of the sums (a loop over it, not ${TH * TW * CB * BLOCK} unrolled stores) */
    clc_real sums[${TH}][${TW}][${CB}][${BLOCK}];
% for u in range(TH):
% for t in range(TW):
% for c in range(CB):
% for j in range(NB):
    vstore${VN}(s${u}_${t}_${c}_${j}, 0, &sums[${u}][${t}][${c}][${j * VN}]);
% endfor
% endfor
% endfor
% endfor
    const clc_idx tap0 = (clc_idx)(kd * CLC_KH + kh0) * CLC_KW + kw0;
% if partial:
    __global clc_real* out = dw + (clc_idx)slice * ${geom.weight_elements};
% else:
    __global clc_data* out = dw_base + dw_off;
% endif
    for (int l = 0; l < ${BLOCK}; ++l) {
        const int o = ob * ${BLOCK} + l;
        if (o >= CLC_CO) break;
        for (int c = 0; c < ${CB}; ++c)
        for (int u = own_h - kh0; u < ${TH}; ++u)
            for (int t = own_w - kw0; t < ${TW}; ++t) {
                const clc_idx e = ((clc_idx)(g * CLC_CO + o) * CLC_CI + ci + c) * CLC_KV + tap0 + u * CLC_KW + t;
% if partial and accumulate:
                out[e] = (chunk == 0 ? (clc_real)0 : out[e]) + sums[u][t][c][l];
% elif partial:
                out[e] = sums[u][t][c][l];
% elif accumulate:
                clc_st(out, e, (chunk == 0 ? (clc_real)0 : clc_ld(out, e)) + sums[u][t][c][l]);
% else:
                clc_st(out, e, sums[u][t][c][l]);
% endif
            }
    }
}
</%def>\
