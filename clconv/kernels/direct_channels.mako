## The forward and the data gradient on CPUs in register tiles of result channels: one work-item
## holds PX result pixels of a row x NB vectors of VN result channels, and runs the contraction
## (taps x source channels) as PX x NB vector FMAs a step, the PX source values broadcast and the NB
## vectors loaded from a packed copy of the weight.  The source is the forward's input x, or the data
## gradient's dy: result pixel i (an input pixel) takes, at each tap k where i + padding - k x
## dilation is a multiple of the stride, dy's pixel (i + padding - k x dilation) / stride, so along
## a row its pixels go in phases (i modulo the stride), each a stride-1 walk over dy: a data
## gradient's tile is PX pixels of one phase, a stride apart.
## Entry points:
##   clc_pack_channels  wp[g][ob][tap][c][BLOCK] = the weight of result channel ob * BLOCK + l and
##                      source channel c at tap, zeros past the group's result channels (BLOCK = NB x VN)
##   clc_source_rows    sp[b][zd][zh][zw][c]: the source channels-last with its padding written as
##                      zeros around it (and beyond the last tile's columns), in clc_real
##   clc_direct_channels  one work-item per (tile of PX result pixels along a row, group x block of
##                      BLOCK result channels); it reads sp, or (`flat`: a 1x1 stride-1 unpadded
##                      channels-last source) the source itself as rows of pixels
## Parameters: geom, real, data, index, entries, epilogue, bias, layout (the prelude's); VN, NB,
## PX; F, the frame (direct.channels_frame, with OB): SC/RC (a group's source/result channels), SCH (all
## source channels), SD/SH/SW (the result's extents), RD/RH/RW, TSD/TSH/TSW (strides),
## TPD/TPH/TPW (the source's padding before), ZD/ZH/ZW (the padded copy's extents), WT (tiles a
## row), OB (blocks a group), flat, backward (the data gradient).
##
## Why (docs/performance.md, "CPU forwards in register tiles of channels"): the GEMM families' CPU
## kernels run vectors along the pixels, which channels-last activations do not give them (they
## ran its forwards in GPU tiles, 6-15x channels-first's time on PoCL) and which small images fill
## badly (a 7x7 image's 49 pixels in 16-lane vectors).  Here the vectors run along the result
## channels (a multiple of the lanes in most layers), and the padded copy takes every bounds test
## out of the contraction.
<%namespace name="prelude" file="prelude.mako"/>
${prelude.header(geom, real, index, data, epilogue, bias)}
#define CLC_BLOCK ${NB * VN}
#define CLC_SC ${F["SC"]}
#define CLC_SCH ((clc_idx)${F["SCH"]})
#define CLC_RC ${F["RC"]}
#define CLC_OB ${F["OB"]}
#define CLC_ZD ${F["ZD"]}
#define CLC_ZH ${F["ZH"]}
#define CLC_ZW ${F["ZW"]}
% if F["backward"]:
#define CLC_S_AT(b, c, p) CLC_Y_AT(b, c, p)
#define CLC_R_AT(b, c, p) CLC_X_AT(b, c, p)
% else:
#define CLC_S_AT(b, c, p) CLC_X_AT(b, c, p)
#define CLC_R_AT(b, c, p) CLC_Y_AT(b, c, p)
% endif
${prelude.entry_points(self, entries)}\
##
<%def name="clc_pack_channels()">
/* global: (SC, KV, G * OB).  The forward's weight w[g*CO + r][c][tap]; the data gradient's
   w[g*CO + c][r][tap] (result channel r an input channel, source channel c an output one). */
__kernel void clc_pack_channels(__global const clc_data* restrict w_base, const long w_off,
                                __global clc_real* restrict wp)
{
    const int c = (int)get_global_id(0), tap = (int)get_global_id(1);
    const int ob = (int)(get_global_id(2) % CLC_OB), g = (int)(get_global_id(2) / CLC_OB);
    __global const clc_data* restrict w = w_base + w_off;
    __global clc_real* restrict out = wp + (((clc_idx)get_global_id(2) * CLC_KV + tap) * CLC_SC + c) * CLC_BLOCK;
    for (int l = 0; l < CLC_BLOCK; ++l) {
        const int r = ob * CLC_BLOCK + l;
% if F["backward"]:
        const clc_idx at = ((clc_idx)(g * CLC_CO + c) * CLC_CI + r) * CLC_KV + tap;
% else:
        const clc_idx at = ((clc_idx)(g * CLC_CO + r) * CLC_CI + c) * CLC_KV + tap;
% endif
        out[l] = r < CLC_RC ? clc_ld(w, at) : (clc_real)0;
    }
}
</%def>\
##
<%def name="clc_source_rows()">
/* global: (ZW, ZD * ZH, N * ceil(SCH / ${VN})).  VN channels of one pixel of the padded copy per
   work-item: the source pixel (zd, zh, zw) - padding where it lies inside, zeros elsewhere. */
__kernel void clc_source_rows(__global const clc_data* restrict s_base, const long s_off,
                              __global clc_real* restrict sp)
{
    const int zw = (int)get_global_id(0);
    const int zh = (int)(get_global_id(1) % CLC_ZH), zd = (int)(get_global_id(1) / CLC_ZH);
    const int blocks = ${-(-F["SCH"] // VN)};
    const int b = (int)(get_global_id(2) / blocks), c0 = (int)(get_global_id(2) % blocks) * ${VN};
    const int sd = zd - ${F["TPD"]}, sh = zh - ${F["TPH"]}, sw = zw - ${F["TPW"]};
    __global clc_real* restrict out = sp + (((clc_idx)b * CLC_ZD + zd) * CLC_ZH + zh) * CLC_ZW * CLC_SCH
                                      + (clc_idx)zw * CLC_SCH + c0;
    const bool inside = (uint)sd < (uint)${F["SD"]} && (uint)sh < (uint)${F["SH"]} && (uint)sw < (uint)${F["SW"]};
    const clc_idx pixel = ((clc_idx)(inside ? sd : 0) * ${F["SH"]} + (inside ? sh : 0)) * ${F["SW"]} + (inside ? sw : 0);
    __global const clc_data* restrict s = s_base + s_off + CLC_S_AT(b, c0, pixel);
% if layout == "channels_last":
    if (inside && c0 + ${VN} <= CLC_SCH) {
        vstore${VN}(${prelude.vload(VN, "s")}, 0, out);
        return;
    }
% endif
    for (int l = 0; l < ${VN} && c0 + l < CLC_SCH; ++l)
        out[l] = inside ? clc_ld(s, CLC_S_AT(0, l, 0)) : (clc_real)0;
}
</%def>\
##
<%def name="clc_direct_channels()"><%
    vec = f"{real}{VN}"
    flat = F["flat"]
    if flat:
        tiles, pixels = "ceil(N x result pixels / PX), flat", "t * PX + p"
    elif F["backward"]:
        tiles, pixels = "N x RD x RH x TSW x WT", "(rd, rh, phase + TSW * (wt * PX + p))"
    else:
        tiles, pixels = "N x RD x RH x WT", "(rd, rh, wt * PX + p)"
%>\
/* global: (tiles, G * OB): tiles = ${tiles}.  Work-item (t, (g, ob)): result pixels ${pixels}
   (p < ${PX}) x result channels ob * BLOCK .. + BLOCK - 1 of group g.  Its sums run over the taps
   (kd, kh, kw), then the group's ${F["SC"]} source channels, in one fixed order: deterministic. */
__kernel void clc_direct_channels(
% if flat:
                                  __global const clc_data* restrict s_base, const long s_off,
% else:
                                  __global const clc_real* restrict sp,
% endif
                                  __global const clc_real* restrict wp,
                                  ${prelude.epilogue_params(bias, epilogue)}
                                  __global clc_data* restrict r_base, const long r_off)
{
    const clc_idx t = get_global_id(0);
    const int ob = (int)(get_global_id(1) % CLC_OB), g = (int)(get_global_id(1) / CLC_OB);
% if flat:
    /* the tile's source pixels, flat over the batch; past the last, the last again (read, not stored) */
    const clc_idx first = t * ${PX}, last = (clc_idx)CLC_N * ${F["RD"] * F["RH"] * F["RW"]} - 1;
    __global const clc_data* restrict src = s_base + s_off + g * CLC_SC;
% for p in range(PX):
    const clc_idx at${p} = min(first + ${p}, last) * CLC_SCH;
% endfor
#define CLC_SRC(i) clc_ld(src, i)
% elif F["backward"]:
    const int wt = (int)(t % ${F["WT"]}), phase = (int)((t / ${F["WT"]}) % ${F["TSW"]});
    const clc_idx rest = t / ${F["WT"] * F["TSW"]};
    const int rh = (int)(rest % ${F["RH"]}), rd = (int)((rest / ${F["RH"]}) % ${F["RD"]});
    const int b = (int)(rest / ${F["RH"] * F["RD"]});
    const int j0 = wt * ${PX};
    __global const clc_real* restrict src = sp + (clc_idx)b * CLC_ZD * CLC_ZH * CLC_ZW * CLC_SCH + g * CLC_SC;
% for p in range(PX):
    const clc_idx at${p} = (clc_idx)${p} * CLC_SCH;
% endfor
#define CLC_SRC(i) src[i]
% else:
    const int wt = (int)(t % ${F["WT"]});
    const clc_idx rest = t / ${F["WT"]};
    const int rh = (int)(rest % ${F["RH"]}), rd = (int)((rest / ${F["RH"]}) % ${F["RD"]});
    const int b = (int)(rest / ${F["RH"] * F["RD"]});
    const int rw0 = wt * ${PX};
    /* the padded copy's pixel under the tile's first result pixel and tap (0, 0, 0) */
    __global const clc_real* restrict src = sp + ((((clc_idx)b * CLC_ZD + rd * ${F["TSD"]}) * CLC_ZH + rh * ${F["TSH"]})
                                                  * CLC_ZW + (clc_idx)rw0 * ${F["TSW"]}) * CLC_SCH + g * CLC_SC;
% for p in range(PX):
    const clc_idx at${p} = (clc_idx)${p * F["TSW"]} * CLC_SCH;
% endfor
#define CLC_SRC(i) src[i]
% endif
    __global const clc_real* restrict wb = wp + (clc_idx)get_global_id(1) * CLC_KV * CLC_SC * CLC_BLOCK;

% for p in range(PX):
% for j in range(NB):
    ${vec} s${p}_${j} = (${vec})0;
% endfor
% endfor
    for (int kd = 0; kd < CLC_KD; ++kd)
        for (int kh = 0; kh < CLC_KH; ++kh)
            for (int kw = 0; kw < CLC_KW; ++kw) {
% if flat:
                const clc_idx tap = 0;
% elif F["backward"]:
                /* only the taps that meet this phase's pixels: result pixel (rd, rh, phase + TSW * (j0 + p))
                   reads the padded copy of dy at (zd, zh, zw + p) */
                const int ud = rd + CLC_PD - kd * CLC_DD, uh = rh + CLC_PH - kh * CLC_DH;
                const int uw = phase + CLC_PW - kw * CLC_DW;
                if (ud % CLC_SD || uh % CLC_SH || uw % CLC_SW) continue;
                const int zd = ud / CLC_SD + ${F["TPD"]}, zh = uh / CLC_SH + ${F["TPH"]};
                const int zw = uw / CLC_SW + ${F["TPW"]} + j0;
                const clc_idx tap = (((clc_idx)zd * CLC_ZH + zh) * CLC_ZW + zw) * CLC_SCH;
% else:
                const clc_idx tap = (((clc_idx)kd * CLC_DD * CLC_ZH + kh * CLC_DH) * CLC_ZW + kw * CLC_DW) * CLC_SCH;
% endif
                __global const clc_real* restrict wk = wb + ((kd * CLC_KH + kh) * CLC_KW + kw) * CLC_SC * CLC_BLOCK;
                for (int c = 0; c < CLC_SC; ++c) {
% for j in range(NB):
                    const ${vec} w${j} = vload${VN}(0, wk + c * CLC_BLOCK + ${j * VN});
% endfor
% for p in range(PX):
                    {
                        const ${vec} v = (${vec})CLC_SRC(at${p} + tap + c);
% for j in range(NB):
                        s${p}_${j} = fma(v, w${j}, s${p}_${j});
% endfor
                    }
% endfor
                }
            }

    /* the results through the epilogue, from a private copy of the sums (a loop over it, not
       ${PX * NB * VN} unrolled stores) */
    clc_real sums[${PX}][CLC_BLOCK];
% for p in range(PX):
% for j in range(NB):
    vstore${VN}(s${p}_${j}, 0, &sums[${p}][${j * VN}]);
% endfor
% endfor
    __global clc_data* out = r_base + r_off;
    __global const clc_data* bias = bias_base + bias_off;
    __global const clc_data* residual = residual_base + residual_off;
% if flat:
    const int count = (int)min((clc_idx)${PX}, last + 1 - first);
% elif F["backward"]:
    /* the phase's result pixels phase + TSW * (j0 + p) inside the row */
    const int count = min(${PX}, (${F["RW"]} - phase + ${F["TSW"] - 1}) / ${F["TSW"]} - j0);
% else:
    const int count = min(${PX}, ${F["RW"]} - rw0);
% endif
    for (int p = 0; p < count; ++p) {
% if flat:
        const clc_idx bp = first + p;
        const clc_idx b = bp / ${F["RD"] * F["RH"] * F["RW"]}, pixel = bp % ${F["RD"] * F["RH"] * F["RW"]};
% elif F["backward"]:
        const clc_idx pixel = ((clc_idx)rd * ${F["RH"]} + rh) * ${F["RW"]} + phase + ${F["TSW"]} * (j0 + p);
% else:
        const clc_idx pixel = ((clc_idx)rd * ${F["RH"]} + rh) * ${F["RW"]} + rw0 + p;
% endif
        for (int l = 0; l < CLC_BLOCK; ++l) {
            const int r = ob * CLC_BLOCK + l;
            if (r >= CLC_RC) break;
            const int channel = g * CLC_RC + r;
            clc_store_result(out, CLC_R_AT(b, channel, pixel), sums[p][l], bias, channel, residual);
        }
    }
#undef CLC_SRC
}
</%def>\
