## Depthwise convolution (C_in/groups = 1) by rows, vectorised along the width.
## Entry points:
##   clc_dw_rows_forward          one work-item per output row (b, co, od, oh)
##   clc_dw_rows_backward_data    one work-item per input-gradient row (b, c, id, ih): sums over the
##                                CO output channels of its group, gathering (no atomics)
##   clc_dw_rows_backward_weight  one work-item per (slice of rows, co): KV vector sums in registers,
##                                reduced lane by lane in a fixed order at the end
## Which columns are interior, and so run as whole vectors without bounds checks, is decided in
## clconv/algorithms/depthwise_rows.py (`columns`, a ColumnPlan); this file only emits that plan.
## A row's columns are consecutive elements channels-first, so its vectors are single vloads and
## vstores; channels-last they are a pixel step (C_in for x and dx, C_out for y, dy and the
## residual) apart, so the same walk gathers each vector lane by lane and stores the results lane by
## lane.  Rows start where CLC_X_AT / CLC_Y_AT put them.
## Parameters: geom, real, data, layout, index, entries, epilogue, bias (the prelude's:
## clc_dw_rows_forward and clc_dw_rows_backward_data write the result), columns; slices
## (clc_dw_rows_backward_weight).
<%namespace name="prelude" file="prelude.mako"/>
<%!
    # vector starts: `full` of them from lo (a loop), then the overlapping tail vector
    def has_blocks(columns):
        return columns.vn > 0 and columns.full > 0

    def has_tail(columns):
        return columns.vn > 0 and columns.tail_overlap >= 0

    def pixel_steps(geom, layout):
        """Elements between neighbouring columns of a row of x (and dx), and of y (dy, residual):
        the values of CLC_XP and CLC_YP, as numbers, for the strides of gathered vectors."""
        if layout == "channels_last":
            return geom.in_channels, geom.out_channels
        return 1, 1

    def along(layout, columns, step):
        """`columns` along a row as an element offset: channels-last scales it by the pixel step
        (`step`, CLC_XP or CLC_YP); channels-first leaves the text as it is (the step is 1)."""
        if layout != "channels_last":
            return columns
        return f"{columns} * {step}" if columns.isidentifier() else f"({columns}) * {step}"
%>\
${prelude.header(geom, real, index, data, epilogue, bias)}
${prelude.entry_points(self, entries)}\
##
## the vector type: vn lanes of clc_real (vn: that of `plan`, the entry's column plan by default)
<%def name="vec(plan=None)">${real}${(plan or columns).vn}</%def>\
##
## plan.vn tensor values at ptr, ptr + stride, ... as a clc_real vector: one vload when they
## are consecutive, else a lane-by-lane gather
<%def name="load(ptr, stride, plan=None)">\
<% vn = (plan or columns).vn %>\
% if stride == 1:
${prelude.vload(vn, ptr)}\
% else:
(${vec(plan)})(${", ".join(f"clc_ld({ptr}, {i * stride})" for i in range(vn))})\
% endif
</%def>\
##
## the result vector `value` into columns o .. o + vn - 1 of the row at `out` (of channel `channel`;
## the residual's row at `residual`), `which` ("X" or "Y") naming the tensor's shape: one vector
## store when those columns are consecutive, else clc_store_result lane by lane, a pixel step apart.
## Lane by lane, the tail vector's first `skip` lanes (columns the vectors before it stored) are left out.
<%def name="store_columns(out, o, value, channel, residual, which, skip, plan=None)">\
<% step = pixel_steps(geom, layout)[which == "Y"]; vn = (plan or columns).vn %>\
% if step == 1:
${prelude.store_result_vec(vn, f"{out} + {o}", value, "bias", channel, f"{residual} + {o}")}\
% else:
{   const ${vec(plan)} clc_v = ${value};
% for i in range(skip, vn):
            clc_store_result(${out}, ${along(layout, f"{o} + {i}" if i else o, f"CLC_{which}P")}, clc_v.s${"0123456789abcdef"[i]}, bias, ${channel}, ${residual});
% endfor
        }\
% endif
</%def>\
##
## `body(o, skip)` for each vector of `plan` (the entry's by default): o its first column, skip its
## lanes that repeat columns done before (the overlapping tail vector's)
<%def name="vector_columns(body, plan=None)">
<% plan = plan or columns; VN = plan.vn %>\
% if has_blocks(plan):
    for (int o = ${plan.lo}; o < ${plan.lo + plan.full * VN}; o += ${VN}) {
${body("o", 0)}
    }
% endif
% if has_tail(plan):
    {   /* the interior's last ${VN} columns; its first ${plan.tail_overlap} lanes were done above */
        const int o = ${plan.tail_start};
${body("o", plan.tail_overlap)}
    }
% endif
</%def>\
##
<%def name="clc_dw_rows_forward()">
<%
    KW, SW, DW = geom.kernel[2], geom.stride[2], geom.dilation[2]
    VN = columns.vn
    krows = prelude.attr.kernel_rows(geom)
    XS, YS = pixel_steps(geom, layout)
%>
/* global: rows = N * COUT * OD * OH rounded up; y row = w-weighted sum of KD*KH input rows */
__kernel void clc_dw_rows_forward(__global const clc_data* restrict x_base, const long x_off,
                                  __global const clc_data* restrict w_base, const long w_off,
                                  ${prelude.epilogue_params(bias, epilogue)}
                                  __global clc_data* restrict y_base, const long y_off)
{
    const clc_idx row = get_global_id(0);
    if (row >= (clc_idx)CLC_N * CLC_COUT * CLC_OD * CLC_OH) return;
    const int oh = (int)(row % CLC_OH);
    const int od = (int)((row / CLC_OH) % CLC_OD);
    const clc_idx bc = row / ((clc_idx)CLC_OD * CLC_OH);   /* b * COUT + co */
    const int co = (int)(bc % CLC_COUT);
    const clc_idx b = bc / CLC_COUT;
    const int ci = co / CLC_CO;   /* its input channel */
    __global const clc_data* restrict wc = w_base + w_off + (clc_idx)co * CLC_KV;
    __global clc_data* restrict yr = y_base + y_off + CLC_Y_AT(b, co, CLC_OUT_OFFSET(od, oh, 0));
    /* the residual has y's shape and layout: its row lines up with yr, column for column */
    __global const clc_data* restrict resr = residual_base + residual_off + CLC_Y_AT(b, co, CLC_OUT_OFFSET(od, oh, 0));
    __global const clc_data* restrict bias = bias_base + bias_off;
% for r, kd, kh in krows:
    const int id${r} = od * CLC_SD - CLC_PD + ${kd} * CLC_DD, ih${r} = oh * CLC_SH - CLC_PH + ${kh} * CLC_DH;
    const bool ok${r} = (uint)id${r} < (uint)CLC_ID && (uint)ih${r} < (uint)CLC_IH;
    __global const clc_data* restrict xr${r} = x_base + x_off + CLC_X_AT(b, ci, ok${r} ? CLC_IN_OFFSET(id${r}, ih${r}, 0) : 0);
% for kw in range(KW):
    const clc_real w${r}_${kw} = clc_ld(wc, ${r * KW + kw});
% endfor
% endfor
<%def name="forward_vector(o, skip)">
        ${vec()} acc = (${vec()})(0);
% for r, kd, kh in krows:
        if (ok${r}) {
            __global const clc_data* p = xr${r} + ${along(layout, f"{o} * CLC_SW - CLC_PW", "CLC_XP")};
% for kw in range(KW):
            acc = fma(${load(f"p + {kw * DW * XS}", SW * XS)}, (${vec()})(w${r}_${kw}), acc);
% endfor
        }
% endfor
        ${store_columns("yr", o, "acc", "co", "resr", "Y", skip)}
</%def>
${vector_columns(forward_vector)}
% for a, e in columns.edge_ranges:
    for (int o = ${a}; o < ${e}; ++o) {
        clc_real acc = (clc_real)0;
% for r, kd, kh in krows:
        if (ok${r}) {
% for kw in range(KW):
            { const int iw = o * CLC_SW - CLC_PW + ${kw * DW};
              if ((uint)iw < (uint)CLC_IW) acc = fma(clc_ld(xr${r}, ${along(layout, "iw", "CLC_XP")}), w${r}_${kw}, acc); }
% endfor
        }
% endfor
        clc_store_result(yr, ${along(layout, "o", "CLC_YP")}, acc, bias, co, resr);
    }
% endfor
}
</%def>\
##
<%def name="clc_dw_rows_backward_data()">
<%
    KW, SW, DW = geom.kernel[2], geom.stride[2], geom.dilation[2]
    krows = prelude.attr.kernel_rows(geom)
    XS, YS = pixel_steps(geom, layout)
%>
/* global: rows = N * CIN * ID * IH rounded up.  dx row (b, c, id, ih) gathers, for each output
   channel c*CO + j of its group and each kernel row whose output row exists, dy along the row.
   `bias` and `residual` here are the transposed convolution's (its output is this input gradient). */
__kernel void clc_dw_rows_backward_data(__global const clc_data* restrict dy_base, const long dy_off,
                                        __global const clc_data* restrict w_base, const long w_off,
                                        ${prelude.epilogue_params(bias, epilogue)}
                                        __global clc_data* restrict dx_base, const long dx_off)
{
    const clc_idx row = get_global_id(0);
    if (row >= (clc_idx)CLC_N * CLC_CIN * CLC_ID * CLC_IH) return;
    const int ih = (int)(row % CLC_IH);
    const int id = (int)((row / CLC_IH) % CLC_ID);
    const clc_idx bc = row / ((clc_idx)CLC_ID * CLC_IH);   /* b * CIN + c */
    const int c = (int)(bc % CLC_CIN);
    const clc_idx b = bc / CLC_CIN;
    __global const clc_data* restrict dyg = dy_base + dy_off + CLC_Y_AT(b, c * CLC_CO, 0);   /* the group's first channel */
    __global const clc_data* restrict wg = w_base + w_off + (clc_idx)c * CLC_CO * CLC_KV;
    __global clc_data* restrict dxr = dx_base + dx_off + CLC_X_AT(b, c, CLC_IN_OFFSET(id, ih, 0));
    /* the residual has dx's shape and layout: its row lines up with dxr, column for column */
    __global const clc_data* restrict resr = residual_base + residual_off + CLC_X_AT(b, c, CLC_IN_OFFSET(id, ih, 0));
    __global const clc_data* restrict bias = bias_base + bias_off;
% for r, kd, kh in krows:
    const int od${r} = clc_source_index(id, CLC_PD, ${kd}, CLC_DD, CLC_SD, CLC_OD);
    const int oh${r} = clc_source_index(ih, CLC_PH, ${kh}, CLC_DH, CLC_SH, CLC_OH);
    const bool ok${r} = od${r} >= 0 && oh${r} >= 0;
    const clc_idx dyo${r} = ok${r} ? ${along(layout, f"CLC_OUT_OFFSET(od{r}, oh{r}, 0)", "CLC_YP")} : 0;
% endfor
<%def name="data_vector(phase, o, skip)">
<% plan = phase.columns %>\
        /* dx columns (${o} + lane) * ${SW} + ${phase.residue}: dy columns ${o} + lane + offset, consecutive */
        ${vec(plan)} acc = (${vec(plan)})(0);
        for (int j = 0; j < CLC_CO; ++j) {
            __global const clc_data* restrict dyj = dyg + (clc_idx)j * CLC_YC;
            __global const clc_data* restrict wj = wg + j * CLC_KV;
% for r, kd, kh in krows:
            if (ok${r}) {
                __global const clc_data* p = dyj + dyo${r} + ${along(layout, o, "CLC_YP")};
% for kw, offset in phase.taps:
                acc = fma(${load(f"p + {offset * YS}" if offset >= 0 else f"p - {-offset * YS}", YS, plan)}, (${vec(plan)})(clc_ld(wj, ${r * KW + kw})), acc);
% endfor
            }
% endfor
        }
% if SW == 1:
        ${store_columns("dxr", o, "acc", "c", "resr", "X", skip, plan)}
% else:
% for lane in range(skip, plan.vn):
        clc_store_result(dxr, ${along(layout, f"({o} + {lane}) * {SW} + {phase.residue}", "CLC_XP")}, acc.s${"0123456789abcdef"[lane]}, bias, c, resr);
% endfor
% endif
</%def>
## the row residue by residue of the stride along the width (depthwise_rows.Phase; one residue at
## unit stride): each residue's vectors, then its edge columns one by one
% for phase in phases:
${vector_columns(lambda o, skip: data_vector(phase, o, skip), phase.columns)}
% for a, e in phase.columns.edge_ranges:
    for (int q = ${a}; q < ${e}; ++q) {
        const int i = ${"q" if SW == 1 else f"q * {SW} + {phase.residue}"};
${scalar_column()}
    }
% endfor
% endfor
}
</%def>\
##
## one column i of dx with bounds checks (the padded edges, and columns no vector covers)
<%def name="scalar_column()">
<%
    KW = geom.kernel[2]
    krows = prelude.attr.kernel_rows(geom)
%>\
        clc_real acc = (clc_real)0;
        for (int j = 0; j < CLC_CO; ++j) {
            __global const clc_data* restrict dyj = dyg + (clc_idx)j * CLC_YC;
            __global const clc_data* restrict wj = wg + j * CLC_KV;
% for r, kd, kh in krows:
            if (ok${r}) {
% for kw in range(KW):
                { const int ow = clc_source_index(i, CLC_PW, ${kw}, CLC_DW, CLC_SW, CLC_OW);
                  if (ow >= 0) acc = fma(clc_ld(dyj, dyo${r} + ${along(layout, "ow", "CLC_YP")}), clc_ld(wj, ${r * KW + kw}), acc); }
% endfor
            }
% endfor
        }
        clc_store_result(dxr, ${along(layout, "i", "CLC_XP")}, acc, bias, c, resr);
</%def>\
##
<%def name="clc_dw_rows_backward_weight()">
<%
    KW, SW, DW = geom.kernel[2], geom.stride[2], geom.dilation[2]
    VN = columns.vn
    krows = prelude.attr.kernel_rows(geom)
    KV = geom.kernel_volume
    XS, YS = pixel_steps(geom, layout)
    taps = [(r * KW + kw, r, kw) for r, kd, kh in krows for kw in range(KW)]
    rows_total = geom.batch * geom.out_size[0] * geom.out_size[1]
    chunk = -(-rows_total // slices)
    # dw is the call's tensor (stored through clc_st); the partial workspace holds clc_real sums
    dst_type = "clc_data" if slices == 1 else "clc_real"
    store = (lambda t, v: f"clc_st(dst, {t}, {v});") if slices == 1 else (lambda t, v: f"dst[{t}] = {v};")
%>
/* global: COUT * slices rounded up.  Work-item (slice, co) sums dy[b][co] times the input under each
   tap over its slice of the (b, od, oh) rows; with one slice it writes dw (in the storage type),
   else partial[slice][co] (clc_real, summed by reduce.mako's clc_splitk_sum and rounded once there). */
__kernel void clc_dw_rows_backward_weight(__global const clc_data* restrict x_base, const long x_off,
                                          __global const clc_data* restrict dy_base, const long dy_off,
                                          __global ${dst_type}* restrict dst_base, const long dst_off)
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
        __global const clc_data* restrict dyr = dy_base + dy_off + CLC_Y_AT(b, co, CLC_OUT_OFFSET(od, oh, 0));
% for r, kd, kh in krows:
        const int id${r} = od * CLC_SD - CLC_PD + ${kd} * CLC_DD, ih${r} = oh * CLC_SH - CLC_PH + ${kh} * CLC_DH;
        const bool ok${r} = (uint)id${r} < (uint)CLC_ID && (uint)ih${r} < (uint)CLC_IH;
        __global const clc_data* restrict xr${r} = x_base + x_off + CLC_X_AT(b, co / CLC_CO, ok${r} ? CLC_IN_OFFSET(id${r}, ih${r}, 0) : 0);
% endfor
<%def name="weight_vector(o, skip)">
% if skip:
        const ${vec()} d = select(${load(f"dyr + {along(layout, o, 'CLC_YP')}", YS)}, (${vec()})(0), repeated);
% else:
        const ${vec()} d = ${load(f"dyr + {along(layout, o, 'CLC_YP')}", YS)};
% endif
% for r, kd, kh in krows:
        if (ok${r}) {
            __global const clc_data* p = xr${r} + ${along(layout, f"{o} * CLC_SW - CLC_PW", "CLC_XP")};
% for kw in range(KW):
            acc${r * KW + kw} = fma(d, ${load(f"p + {kw * DW * XS}", SW * XS)}, acc${r * KW + kw});
% endfor
        }
% endfor
</%def>
${vector_columns(weight_vector)}
% for a, e in columns.edge_ranges:
        for (int o = ${a}; o < ${e}; ++o) {
            const clc_real d = clc_ld(dyr, ${along(layout, "o", "CLC_YP")});
% for r, kd, kh in krows:
            if (ok${r}) {
% for kw in range(KW):
                { const int iw = o * CLC_SW - CLC_PW + ${kw * DW};
                  if ((uint)iw < (uint)CLC_IW) sum${r * KW + kw} = fma(d, clc_ld(xr${r}, ${along(layout, "iw", "CLC_XP")}), sum${r * KW + kw}); }
% endfor
            }
% endfor
        }
% endfor
    }

    __global ${dst_type}* restrict dst = dst_base + dst_off + e * ${KV};
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
        ${store(t, f"sum{t} + h1")}
    }
% else:
    ${store(t, f"sum{t}")}
% endif
% endfor
}
</%def>\
