## Depthwise convolution (C_in/groups = 1) by rows, vectorised along the width.
## Entry points:
##   clc_dw_rows_forward          one work-item per output row (b, co, od, oh)
##   clc_dw_rows_backward_data    one work-item per input-gradient row (b, c, id, ih): sums over the
##                                CO output channels of its group, gathering (no atomics)
##   clc_dw_rows_backward_weight  one work-item per (slice of rows, co): KV vector sums in registers,
##                                reduced lane by lane in a fixed order at the end
## Which columns are interior, and so run as whole vectors without bounds checks, is decided in
## clconv/algorithms/depthwise_rows.py (`columns`, a ColumnPlan); this file only emits that plan.
## Parameters: geom, real, index, entries, columns; bias (clc_dw_rows_forward,
## clc_dw_rows_backward_data); slices (clc_dw_rows_backward_weight).
<%namespace name="prelude" file="prelude.mako"/>
<%!
    # vector starts: `full` of them from lo (a loop), then the overlapping tail vector
    def has_blocks(columns):
        return columns.vn > 0 and columns.full > 0

    def has_tail(columns):
        return columns.vn > 0 and columns.tail_overlap >= 0
%>\
${prelude.header(geom, real, index, data, epilogue, bias)}
${prelude.entry_points(self, entries)}\
##
## the vector type: columns.vn lanes of clc_real
<%def name="vec()">${real}${columns.vn}</%def>\
##
## columns.vn values at ptr, ptr + stride, ...: one vload when they are consecutive
<%def name="load(ptr, stride)">\
% if stride == 1:
vload${columns.vn}(0, ${ptr})\
% else:
(${vec()})(${", ".join(f"({ptr})[{i * stride}]" for i in range(columns.vn))})\
% endif
</%def>\
##
<%def name="vector_columns(body)">
<% VN = columns.vn %>\
% if has_blocks(columns):
    for (int o = ${columns.lo}; o < ${columns.lo + columns.full * VN}; o += ${VN}) {
${body("o", False)}
    }
% endif
% if has_tail(columns):
    {   /* the interior's last ${VN} columns; its first ${columns.tail_overlap} lanes were done above */
        const int o = ${columns.tail_start};
${body("o", True)}
    }
% endif
</%def>\
##
<%def name="clc_dw_rows_forward()">
<%
    KW, SW, DW = geom.kernel[2], geom.stride[2], geom.dilation[2]
    VN = columns.vn
    krows = prelude.attr.kernel_rows(geom)
%>
/* global: rows = N * COUT * OD * OH rounded up; y row = w-weighted sum of KD*KH input rows */
__kernel void clc_dw_rows_forward(__global const clc_real* restrict x_base, const long x_off,
                                  __global const clc_real* restrict w_base, const long w_off,
                                  __global const clc_real* restrict bias_base, const long bias_off,
                                  __global clc_real* restrict y_base, const long y_off)
{
    const clc_idx row = get_global_id(0);
    if (row >= (clc_idx)CLC_N * CLC_COUT * CLC_OD * CLC_OH) return;
    const int oh = (int)(row % CLC_OH);
    const int od = (int)((row / CLC_OH) % CLC_OD);
    const clc_idx bc = row / ((clc_idx)CLC_OD * CLC_OH);   /* b * COUT + co */
    const int co = (int)(bc % CLC_COUT);
    const clc_idx b = bc / CLC_COUT;
    __global const clc_real* restrict xp = x_base + x_off + (b * CLC_CIN + co / CLC_CO) * CLC_IP;
    __global const clc_real* restrict wc = w_base + w_off + (clc_idx)co * CLC_KV;
    __global clc_real* restrict yr = y_base + y_off + row * CLC_OW;
% if bias:
    const clc_real b0 = bias_base[bias_off + co];
% else:
    const clc_real b0 = (clc_real)0;
% endif
% for r, kd, kh in krows:
    const int id${r} = od * CLC_SD - CLC_PD + ${kd} * CLC_DD, ih${r} = oh * CLC_SH - CLC_PH + ${kh} * CLC_DH;
    const bool ok${r} = (uint)id${r} < (uint)CLC_ID && (uint)ih${r} < (uint)CLC_IH;
    __global const clc_real* restrict xr${r} = xp + (ok${r} ? ((clc_idx)id${r} * CLC_IH + ih${r}) * CLC_IW : 0);
% for kw in range(KW):
    const clc_real w${r}_${kw} = wc[${r * KW + kw}];
% endfor
% endfor
<%def name="forward_vector(o, is_tail)">
        ${vec()} acc = (${vec()})(b0);
% for r, kd, kh in krows:
        if (ok${r}) {
            __global const clc_real* p = xr${r} + ${o} * CLC_SW - CLC_PW;
% for kw in range(KW):
            acc = fma(${load(f"p + {kw * DW}", SW)}, (${vec()})(w${r}_${kw}), acc);
% endfor
        }
% endfor
        vstore${VN}(acc, 0, yr + ${o});
</%def>
${vector_columns(forward_vector)}
% for a, e in columns.edge_ranges:
    for (int o = ${a}; o < ${e}; ++o) {
        clc_real acc = b0;
% for r, kd, kh in krows:
        if (ok${r}) {
% for kw in range(KW):
            { const int iw = o * CLC_SW - CLC_PW + ${kw * DW};
              if ((uint)iw < (uint)CLC_IW) acc = fma(xr${r}[iw], w${r}_${kw}, acc); }
% endfor
        }
% endfor
        yr[o] = acc;
    }
% endfor
}
</%def>\
##
<%def name="clc_dw_rows_backward_data()">
<%
    KW, DW = geom.kernel[2], geom.dilation[2]
    VN = columns.vn
    krows = prelude.attr.kernel_rows(geom)
%>
/* global: rows = N * CIN * ID * IH rounded up.  dx row (b, c, id, ih) gathers, for each output
   channel c*CO + j of its group and each kernel row whose output row exists, dy along the row. */
__kernel void clc_dw_rows_backward_data(__global const clc_real* restrict dy_base, const long dy_off,
                                        __global const clc_real* restrict w_base, const long w_off,
                                        __global const clc_real* restrict bias_base, const long bias_off,
                                        __global clc_real* restrict dx_base, const long dx_off)
{
    const clc_idx row = get_global_id(0);
    if (row >= (clc_idx)CLC_N * CLC_CIN * CLC_ID * CLC_IH) return;
    const int ih = (int)(row % CLC_IH);
    const int id = (int)((row / CLC_IH) % CLC_ID);
    const clc_idx bc = row / ((clc_idx)CLC_ID * CLC_IH);   /* b * CIN + c */
    const int c = (int)(bc % CLC_CIN);
    const clc_idx b = bc / CLC_CIN;
    __global const clc_real* restrict dyg = dy_base + dy_off + (b * CLC_COUT + (clc_idx)c * CLC_CO) * CLC_OP;
    __global const clc_real* restrict wg = w_base + w_off + (clc_idx)c * CLC_CO * CLC_KV;
    __global clc_real* restrict dxr = dx_base + dx_off + row * CLC_IW;
% if bias:
    const clc_real b0 = bias_base[bias_off + c];
% else:
    const clc_real b0 = (clc_real)0;
% endif
% for r, kd, kh in krows:
    const int od${r} = clc_source_index(id, CLC_PD, ${kd}, CLC_DD, CLC_SD, CLC_OD);
    const int oh${r} = clc_source_index(ih, CLC_PH, ${kh}, CLC_DH, CLC_SH, CLC_OH);
    const bool ok${r} = od${r} >= 0 && oh${r} >= 0;
    const clc_idx dyo${r} = ok${r} ? ((clc_idx)od${r} * CLC_OH + oh${r}) * CLC_OW : 0;
% endfor
<%def name="data_vector(o, is_tail)">
        ${vec()} acc = (${vec()})(b0);
        for (int j = 0; j < CLC_CO; ++j) {
            __global const clc_real* restrict dyj = dyg + (clc_idx)j * CLC_OP;
            __global const clc_real* restrict wj = wg + j * CLC_KV;
% for r, kd, kh in krows:
            if (ok${r}) {
                __global const clc_real* p = dyj + dyo${r} + ${o} + CLC_PW;
% for kw in range(KW):
                acc = fma(${load(f"p - {kw * DW}", 1)}, (${vec()})(wj[${r * KW + kw}]), acc);
% endfor
            }
% endfor
        }
        vstore${VN}(acc, 0, dxr + ${o});
</%def>
${vector_columns(data_vector)}
% for a, e in columns.edge_ranges:
    for (int i = ${a}; i < ${e}; ++i) {
        clc_real acc = b0;
        for (int j = 0; j < CLC_CO; ++j) {
            __global const clc_real* restrict dyj = dyg + (clc_idx)j * CLC_OP;
            __global const clc_real* restrict wj = wg + j * CLC_KV;
% for r, kd, kh in krows:
            if (ok${r}) {
% for kw in range(KW):
                { const int ow = clc_source_index(i, CLC_PW, ${kw}, CLC_DW, CLC_SW, CLC_OW);
                  if (ow >= 0) acc = fma(dyj[dyo${r} + ow], wj[${r * KW + kw}], acc); }
% endfor
            }
% endfor
        }
        dxr[i] = acc;
    }
% endfor
}
</%def>\
##
<%def name="clc_dw_rows_backward_weight()">
<%
    KW, SW, DW = geom.kernel[2], geom.stride[2], geom.dilation[2]
    VN = columns.vn
    krows = prelude.attr.kernel_rows(geom)
    KV = geom.kernel_volume
    taps = [(r * KW + kw, r, kw) for r, kd, kh in krows for kw in range(KW)]
    rows_total = geom.batch * geom.out_size[0] * geom.out_size[1]
    chunk = -(-rows_total // slices)
%>
/* global: COUT * slices rounded up.  Work-item (slice, co) sums dy[b][co] times the input under each
   tap over its slice of the (b, od, oh) rows; with one slice it writes dw, else partial[slice][co]
   (summed by reduce.mako's clc_splitk_sum). */
__kernel void clc_dw_rows_backward_weight(__global const clc_real* restrict x_base, const long x_off,
                                          __global const clc_real* restrict dy_base, const long dy_off,
                                          __global clc_real* restrict dst_base, const long dst_off)
{
    const clc_idx e = get_global_id(0);
    if (e >= (clc_idx)CLC_COUT * ${slices}) return;
    const int co = (int)(e % CLC_COUT);
    const clc_idx slice = e / CLC_COUT;
    const clc_idx begin = slice * ${chunk};
    const clc_idx end = min(begin + ${chunk}, (clc_idx)${rows_total});
% if VN:
% for t, r, kw in taps:
    ${vec()} acc${t} = (${vec()})(0);
% endfor
% endif
% for t, r, kw in taps:
    clc_real sum${t} = (clc_real)0;
% endfor
% if has_tail(columns):
    /* the tail vector's lanes that repeat columns of the vectors before it add nothing */
    const ${prelude.mask_type(real, VN)} repeated = (${prelude.mask_type(real, VN)})(${", ".join("-1" if i < columns.tail_overlap else "0" for i in range(VN))});
% endif

    for (clc_idx rr = begin; rr < end; ++rr) {
        const int oh = (int)(rr % CLC_OH);
        const int od = (int)((rr / CLC_OH) % CLC_OD);
        const clc_idx b = rr / ((clc_idx)CLC_OD * CLC_OH);
        __global const clc_real* restrict dyr =
            dy_base + dy_off + (b * CLC_COUT + co) * CLC_OP + ((clc_idx)od * CLC_OH + oh) * CLC_OW;
        __global const clc_real* restrict xp = x_base + x_off + (b * CLC_CIN + co / CLC_CO) * CLC_IP;
% for r, kd, kh in krows:
        const int id${r} = od * CLC_SD - CLC_PD + ${kd} * CLC_DD, ih${r} = oh * CLC_SH - CLC_PH + ${kh} * CLC_DH;
        const bool ok${r} = (uint)id${r} < (uint)CLC_ID && (uint)ih${r} < (uint)CLC_IH;
        __global const clc_real* restrict xr${r} = xp + (ok${r} ? ((clc_idx)id${r} * CLC_IH + ih${r}) * CLC_IW : 0);
% endfor
<%def name="weight_vector(o, is_tail)">
% if is_tail:
        const ${vec()} d = select(vload${VN}(0, dyr + ${o}), (${vec()})(0), repeated);
% else:
        const ${vec()} d = vload${VN}(0, dyr + ${o});
% endif
% for r, kd, kh in krows:
        if (ok${r}) {
            __global const clc_real* p = xr${r} + ${o} * CLC_SW - CLC_PW;
% for kw in range(KW):
            acc${r * KW + kw} = fma(d, ${load(f"p + {kw * DW}", SW)}, acc${r * KW + kw});
% endfor
        }
% endfor
</%def>
${vector_columns(weight_vector)}
% for a, e in columns.edge_ranges:
        for (int o = ${a}; o < ${e}; ++o) {
            const clc_real d = dyr[o];
% for r, kd, kh in krows:
            if (ok${r}) {
% for kw in range(KW):
                { const int iw = o * CLC_SW - CLC_PW + ${kw * DW};
                  if ((uint)iw < (uint)CLC_IW) sum${r * KW + kw} = fma(d, xr${r}[iw], sum${r * KW + kw}); }
% endfor
            }
% endfor
        }
% endfor
    }

    __global clc_real* restrict dst = dst_base + dst_off + e * ${KV};
% for t, r, kw in taps:
% if VN:
    {   /* lanes summed pairwise, halves first: a fixed order */
% for width in [VN // (2 ** i) for i in range(1, VN.bit_length()) if VN // (2 ** i) >= 1]:
<% src = f"acc{t}" if width == VN // 2 else f"h{width * 2}" %>\
% if width > 1:
        const ${real}${width} h${width} = ${src}.lo + ${src}.hi;
% else:
        const clc_real h1 = ${src}.lo + ${src}.hi;
% endif
% endfor
        dst[${t}] = sum${t} + h1;
    }
% else:
    dst[${t}] = sum${t};
% endif
% endfor
}
</%def>\
