## Direct convolution kernels: no workspace, no GEMM, every sum taken in a fixed order.
## Entry points:
##   clc_direct_forward          one work-item per output element
##   clc_direct_forward_rows     one work-item per strip of `rows` output rows at one column
##   clc_direct_forward_block    one work-item per block of `cob` output channels x strip of `rows` rows
##   clc_direct_backward_data    one work-item per input-gradient element, gathering (no atomics)
##   clc_direct_backward_weight  one work-group per weight element, a tree reduction in local memory
##   clc_direct_backward_weight_blocks  one work-group per (slice of batch x output pixels, group,
##                               block of cob output x cib input channels): each work-item sums the
##                               block's cob x cib x taps products in registers over its pixels
## Parameters: geom, real, data, index, entries, epilogue, bias (the prelude's); wg, the
## work-group size (clc_direct_backward_weight, _blocks); rows (clc_direct_forward_rows, _block); cob
## (clc_direct_forward_block: output channels per work-item; clc_direct_backward_weight_blocks),
## cib, slices, chunk, lanes (clc_direct_backward_weight_blocks).
## clc_direct_forward, _backward_data and _backward_weight use no number of the geometry at render
## time: rendered with clconv.interim.GeometryArgs as `geom`, they take the numbers as arguments
## (prelude.geometry_params), one program for every geometry (the interim kernels).
## Unlike the other families, these kernels take no `restrict` arguments: with them, Intel's CPU
## compiler (OpenCL runtime 2026.22) crashed the process at the first launch of the float64 forward
## of a grouped layer (docs/portability.md).  The other families keep them: clang-based compilers
## honour `restrict` on kernel arguments only, and PoCL's im2col GEMMs ran 7-23% slower without.
<%namespace name="prelude" file="prelude.mako"/>
${prelude.header(geom, real, index, data, epilogue, bias)}
${prelude.entry_points(self, entries)}\
##
## This work-item's result element: b, channel and pixel p, from one flat range over the result
## (no work-items idle on a small image's pixels rounded up to a work-group).  Neighbouring
## work-items take neighbouring elements of the result's layout (pixels channels-first, channels
## channels-last), so that their loads and stores coalesce on GPUs.
<%def name="element(pixels, channels)">\
    const clc_idx e = get_global_id(0);
    if (e >= (clc_idx)CLC_N * ${pixels} * ${channels}) return;
% if layout == "channels_last":
    const int channel = (int)(e % ${channels});
    const clc_idx b = e / ((clc_idx)${pixels} * ${channels});
    const clc_idx p = (e / ${channels}) % ${pixels};
% else:
    const clc_idx p = e % ${pixels};
    const clc_idx nc = e / ${pixels};          /* b * channels + channel */
    const clc_idx b = nc / ${channels};
    const int channel = (int)(nc % ${channels});
% endif
</%def>\
##
<%def name="clc_direct_forward()">
/* global: N * COUT * OP rounded up (`element`); x, w, bias, residual, y each with an element offset. */
__kernel void clc_direct_forward(__global const clc_data* x_base, const long x_off,
                                 __global const clc_data* w_base, const long w_off,
                                 ${prelude.epilogue_params(bias, epilogue)}
                                 __global clc_data* y_base, const long y_off${prelude.geometry_params(geom)})
{
${element("CLC_OP", "CLC_COUT")}
    const int g = channel / CLC_CO;
    CLC_SPLIT_OUT(p, od, oh, ow);
    __global const clc_data* restrict x = x_base + x_off + CLC_X_AT(b, g * CLC_CI, 0);
    __global const clc_data* restrict w = w_base + w_off + (clc_idx)channel * CLC_CI * CLC_KV;

    clc_real acc = (clc_real)0;
    for (int ci = 0; ci < CLC_CI; ++ci) {
        for (int kd = 0; kd < CLC_KD; ++kd) {
            const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
            if ((uint)id >= (uint)CLC_ID) continue;
            for (int kh = 0; kh < CLC_KH; ++kh) {
                const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
                if ((uint)ih >= (uint)CLC_IH) continue;
                #pragma unroll
                for (int kw = 0; kw < CLC_KW; ++kw) {
                    const int iw = ow * CLC_SW - CLC_PW + kw * CLC_DW;
                    if ((uint)iw >= (uint)CLC_IW) continue;
                    acc = fma(clc_ld(x, ci * CLC_XC + CLC_IN_OFFSET(id, ih, iw) * CLC_XP),
                              clc_ld(w, (ci * CLC_KD + kd) * (CLC_KH * CLC_KW) + kh * CLC_KW + kw), acc);
                }
            }
        }
    }
    clc_store_result(y_base + y_off, CLC_Y_AT(b, channel, p), acc, bias_base + bias_off, channel, residual_base + residual_off);
}
</%def>\
##
<%def name="clc_direct_forward_rows()">
<%
    KD, KH, KW = geom.kernel
    SH, DH = geom.stride[1], geom.dilation[1]
    OD, OH, OW = geom.out_size
    R = rows
    STRIPS = -(-OH // R)
    # the input rows a strip of R output rows reads, relative to its first: row u feeds output row
    # r through kernel row kh wherever r * SH + kh * DH == u
    U = (R - 1) * SH + (KH - 1) * DH + 1
    feeds = [[(r, kh) for r in range(R) for kh in range(KH) if r * SH + kh * DH == u] for u in range(U)]
%>
/* A strip of ${R} output rows per work-item, at one column: each input row under the strip is read
   once (KW values) and feeds every (output row, kernel row) pair it meets, where one output per
   work-item reads it KH times.  global: N * COUT * OD * ${STRIPS} * OW rounded up (`element`). */
__kernel void clc_direct_forward_rows(__global const clc_data* x_base, const long x_off,
                                      __global const clc_data* w_base, const long w_off,
                                      ${prelude.epilogue_params(bias, epilogue)}
                                      __global clc_data* y_base, const long y_off)
{
${element(f"((clc_idx){OD * STRIPS * OW})", "CLC_COUT")}
    const int ow = (int)(p % CLC_OW);
    const int oh0 = (int)((p / CLC_OW) % ${STRIPS}) * ${R};
    const int od = (int)(p / (CLC_OW * ${STRIPS}));
    const int g = channel / CLC_CO;
    __global const clc_data* restrict x = x_base + x_off + CLC_X_AT(b, g * CLC_CI, 0);
    __global const clc_data* restrict w = w_base + w_off + (clc_idx)channel * CLC_CI * CLC_KV;
% for kw in range(KW):
    const int iw${kw} = ow * CLC_SW - CLC_PW + ${kw} * CLC_DW;
    const bool in${kw} = (uint)iw${kw} < (uint)CLC_IW;
% endfor

% for r in range(R):
    clc_real acc${r} = (clc_real)0;
% endfor
    for (int ci = 0; ci < CLC_CI; ++ci) {
        for (int kd = 0; kd < CLC_KD; ++kd) {
            const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
            if ((uint)id >= (uint)CLC_ID) continue;
            __global const clc_data* restrict wk = w + (ci * CLC_KD + kd) * (CLC_KH * CLC_KW);
% for kh in range(KH):
% for kw in range(KW):
            const clc_real w${kh}_${kw} = clc_ld(wk, ${kh * KW + kw});
% endfor
% endfor
            const int ih0 = oh0 * CLC_SH - CLC_PH;
            /* every load of the strip predicated, none behind a branch, so that all of them are in
               flight at once (a GPU's loads of the next row otherwise wait for this row's) */
% for u in range(U):
% if feeds[u]:
            const bool up${u} = (uint)(ih0 + ${u}) < (uint)CLC_IH;
            const clc_idx row${u} = ci * CLC_XC + CLC_IN_OFFSET(id, up${u} ? ih0 + ${u} : 0, 0) * CLC_XP;
% for kw in range(KW):
            const clc_real v${u}_${kw} = (up${u} && in${kw}) ? clc_ld(x, row${u} + iw${kw} * CLC_XP) : (clc_real)0;
% endfor
% endif
% endfor
% for u in range(U):
% for r, kh in feeds[u]:
            acc${r} = ${" ".join("fma(v%d_%d, w%d_%d," % (u, kw, kh, kw) for kw in range(KW))} acc${r}${")" * KW};
% endfor
% endfor
        }
    }
% for r in range(R):
% if OH % R and r >= OH % R:
    if (oh0 + ${r} < CLC_OH)
% endif
    clc_store_result(y_base + y_off, CLC_Y_AT(b, channel, CLC_OUT_OFFSET(od, oh0 + ${r}, ow)), acc${r},
                     bias_base + bias_off, channel, residual_base + residual_off);
% endfor
}
</%def>\
##
<%def name="clc_direct_forward_block()">
<%
    KD, KH, KW = geom.kernel
    OD, OH, OW = geom.out_size
    R, COB = rows, cob
    STRIPS = -(-OH // R)
    BLOCKS = geom.out_channels // COB
%>
/* A block of ${COB} output channels x a strip of ${R} output rows per work-item, at one column: each
   input value loaded feeds the block's ${COB} channels and each weight loaded the strip's ${R} rows
   (1/${R} + 1/${COB} loads per FMA, where clc_direct_forward_rows does one output channel).  For
   layers of few input channels (a network's first), whose GEMMs gather a short contraction.  Kernel
   rows are not unrolled: a large kernel's (11x11) weights of one row stay in registers, not all of
   them.  global: N * (COUT / ${COB}) * OD * ${STRIPS} * OW rounded up (`element`, over blocks). */
__kernel void clc_direct_forward_block(__global const clc_data* x_base, const long x_off,
                                       __global const clc_data* w_base, const long w_off,
                                       ${prelude.epilogue_params(bias, epilogue)}
                                       __global clc_data* y_base, const long y_off)
{
${element(f"((clc_idx){OD * STRIPS * OW})", f"{BLOCKS}")}
    const int c0 = channel * ${COB};  /* the block's first output channel (`channel` counts blocks) */
    const int ow = (int)(p % CLC_OW);
    const int oh0 = (int)((p / CLC_OW) % ${STRIPS}) * ${R};
    const int od = (int)(p / (CLC_OW * ${STRIPS}));
    const int g = c0 / CLC_CO;
    __global const clc_data* x = x_base + x_off + CLC_X_AT(b, g * CLC_CI, 0);
    __global const clc_data* w = w_base + w_off + (clc_idx)c0 * CLC_CI * CLC_KV;
% for kw in range(KW):
    const int iw${kw} = ow * CLC_SW - CLC_PW + ${kw} * CLC_DW;
    const bool in${kw} = (uint)iw${kw} < (uint)CLC_IW;
% endfor

% for r in range(R):
% for c in range(COB):
    clc_real acc${r}_${c} = (clc_real)0;
% endfor
% endfor
    for (int ci = 0; ci < CLC_CI; ++ci) {
        for (int kd = 0; kd < CLC_KD; ++kd) {
            const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
            if ((uint)id >= (uint)CLC_ID) continue;
            for (int kh = 0; kh < CLC_KH; ++kh) {
                /* this kernel row's weights of the block's channels (a work-group's neighbouring
                   work-items share the block: the same addresses) */
                __global const clc_data* wk = w + ((ci * CLC_KD + kd) * CLC_KH + kh) * CLC_KW;
% for c in range(COB):
                const clc_real ${", ".join("w%d_%d = clc_ld(wk, %d)" % (c, kw, c * geom.cin_per_group * geom.kernel_volume + kw) for kw in range(KW))};
% endfor
                const int ih0 = oh0 * CLC_SH - CLC_PH + kh * CLC_DH;
% for r in range(R):
                {
                    /* every load predicated, none behind a branch: all of the row's in flight at once */
                    const bool up = (uint)(ih0 + ${r} * CLC_SH) < (uint)CLC_IH;
                    const clc_idx row = ci * CLC_XC + CLC_IN_OFFSET(id, up ? ih0 + ${r} * CLC_SH : 0, 0) * CLC_XP;
% for kw in range(KW):
                    const clc_real v${kw} = (up && in${kw}) ? clc_ld(x, row + iw${kw} * CLC_XP) : (clc_real)0;
% endfor
% for c in range(COB):
                    acc${r}_${c} = ${" ".join("fma(v%d, w%d_%d," % (kw, c, kw) for kw in range(KW))} acc${r}_${c}${")" * KW};
% endfor
                }
% endfor
            }
        }
    }
% for r in range(R):
% if OH % R and r >= OH % R:
    if (oh0 + ${r} < CLC_OH) {
% else:
    {
% endif
        const clc_idx at = CLC_OUT_OFFSET(od, oh0 + ${r}, ow);
% for c in range(COB):
        clc_store_result(y_base + y_off, CLC_Y_AT(b, c0 + ${c}, at), acc${r}_${c}, bias_base + bias_off, c0 + ${c},
                         residual_base + residual_off);
% endfor
    }
% endfor
}
</%def>\
##
<%def name="clc_direct_backward_data()">
/* global: N * CIN * IP rounded up (`element`). dx(b, c, pi) = sum over (co, tap) whose output pixel reads pi.
   `bias` here is the transposed convolution's bias (its output is this input gradient). */
__kernel void clc_direct_backward_data(__global const clc_data* dy_base, const long dy_off,
                                       __global const clc_data* w_base, const long w_off,
                                       ${prelude.epilogue_params(bias, epilogue)}
                                       __global clc_data* dx_base, const long dx_off${prelude.geometry_params(geom)})
{
${element("CLC_IP", "CLC_CIN")}
    const int g = channel / CLC_CI, ci = channel % CLC_CI;
    CLC_SPLIT_IN(p, id, ih, iw);
    __global const clc_data* restrict dy = dy_base + dy_off + CLC_Y_AT(b, g * CLC_CO, 0);
    __global const clc_data* restrict w = w_base + w_off + ((clc_idx)g * CLC_CO * CLC_CI + ci) * CLC_KV;

    clc_real acc = (clc_real)0;
    ${prelude.source_taps(geom, 0, "kd", "od", "id", 8)}
        ${prelude.source_taps(geom, 1, "kh", "oh", "ih", 12)}
            ${prelude.source_taps(geom, 2, "kw", "ow", "iw", 16)}
                const clc_idx po = CLC_OUT_OFFSET(od, oh, ow);
                const int tap = (kd * CLC_KH + kh) * CLC_KW + kw;
                for (int co = 0; co < CLC_CO; ++co)
                    acc = fma(clc_ld(dy, co * CLC_YC + po * CLC_YP), clc_ld(w, (clc_idx)co * CLC_CI * CLC_KV + tap), acc);
            }
        }
    }
    clc_store_result(dx_base + dx_off, CLC_X_AT(b, channel, p), acc, bias_base + bias_off, channel, residual_base + residual_off);
}
</%def>\
##
<%def name="clc_direct_backward_weight()">
/* global: (wg, COUT * CI * KV); one work-group per weight element: its work-items stride over the
   (batch x output pixel) contraction, then a fixed-shape tree sums their partials: deterministic. */
__kernel __attribute__((reqd_work_group_size(${wg}, 1, 1)))
void clc_direct_backward_weight(__global const clc_data* x_base, const long x_off,
                                __global const clc_data* dy_base, const long dy_off,
                                __global clc_data* dw_base, const long dw_off${prelude.geometry_params(geom)})
{
    const int lid = get_local_id(0);
    const clc_idx e = get_group_id(1);            /* flat weight index: (channel, ci, tap) */
    const int tap = (int)(e % CLC_KV);
    const int ci = (int)((e / CLC_KV) % CLC_CI);
    const int channel = (int)(e / ((clc_idx)CLC_CI * CLC_KV));
    const int g = channel / CLC_CO;
    CLC_SPLIT_TAP(tap, kd, kh, kw);
    __global const clc_data* restrict x = x_base + x_off;
    __global const clc_data* restrict dy = dy_base + dy_off;

    clc_real acc = (clc_real)0;
    for (clc_idx t = lid; t < (clc_idx)CLC_N * CLC_OP; t += ${wg}) {
        const clc_idx b = t / CLC_OP, po = t % CLC_OP;
        CLC_SPLIT_OUT(po, od, oh, ow);
        const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
        const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
        const int iw = ow * CLC_SW - CLC_PW + kw * CLC_DW;
        if (!CLC_INSIDE(id, ih, iw)) continue;
        acc = fma(clc_ld(x, CLC_X_AT(b, g * CLC_CI + ci, CLC_IN_OFFSET(id, ih, iw))),
                  clc_ld(dy, CLC_Y_AT(b, channel, po)), acc);
    }
    __local clc_real partial[${wg}];
    partial[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = ${wg} / 2; span > 0; span >>= 1) {
        if (lid < span) partial[lid] += partial[lid + span];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) clc_st(dw_base + dw_off, e, partial[0]);
}
</%def>\

##
<%def name="clc_direct_backward_weight_blocks()">
<%
    KD, KH, KW = geom.kernel
    KV = KD * KH * KW
    CO, CI = geom.cout_per_group, geom.cin_per_group
    NOB, NIB = CO // cob, CI // cib
    A = cob * cib * KV                       # sums per work-item: (o, i, tap), tap fastest
    total = geom.batch * geom.out_pixels
    span = -(-total // slices)               # batch x pixels per slice
    taps = [(kd, kh, kw) for kd in range(KD) for kh in range(KH) for kw in range(KW)]
    chunks = [range(c, min(c + chunk, A)) for c in range(0, A, chunk)]
    NB = geom.groups * NOB * NIB             # blocks
    PL = wg // lanes                         # pixel lanes
%>
/* global: (slices * wg, ${-(-NB // lanes) * lanes} / ${lanes}); work-group (slice, ${lanes} consecutive blocks of
   ${NB}), block = (group g, output channels co0.. co0 + ${cob} - 1, input channels ci0.. ci0 + ${cib} - 1
   of g).  Work-item lid takes block lid % ${lanes} of its work-group's (channels-last: neighbouring
   work-items read neighbouring channels) and strides over the slice's batch x output pixels from
   lid / ${lanes} in steps of ${PL}, ${A} sums in registers: a dy value feeds the ${cib * KV}
   (input channel, tap) sums of its channel, an input value the ${cob} output channels' sums of its
   (channel, tap).  Then per sum and block the ${PL} pixel lanes' values in local memory, added by
   one work-item in lane order: partial[slice][weight element] (or, one slice, dw itself).  Every
   sum has one fixed order: deterministic. */
__kernel __attribute__((reqd_work_group_size(${wg}, 1, 1)))
void clc_direct_backward_weight_blocks(__global const clc_data* x_base, const long x_off,
                                       __global const clc_data* dy_base, const long dy_off,
% if slices > 1:
                                       __global clc_real* partial)
% else:
                                       __global clc_data* dw_base, const long dw_off)
% endif
{
    const int lid = get_local_id(0);
    const clc_idx slice = get_group_id(0);
    const int block = (int)get_group_id(1) * ${lanes} + lid % ${lanes};
    const bool live = block < ${NB};   /* the last work-group's lanes may reach past the blocks */
    const int g = block / ${NOB * NIB};
    const int co0 = g * CLC_CO + (block / ${NIB}) % ${NOB} * ${cob};   /* of all output channels */
    const int ci0 = (block % ${NIB}) * ${cib};                        /* within the group */
    __global const clc_data* x = x_base + x_off;
    __global const clc_data* dy = dy_base + dy_off;
    const clc_idx begin = slice * ${span};
    const clc_idx end = live ? min(begin + ${span}, (clc_idx)${total}) : begin;

% for a in range(A):
    clc_real s${a} = (clc_real)0;
% endfor
    for (clc_idx t = begin + lid / ${lanes}; t < end; t += ${PL}) {
        const clc_idx b = t / CLC_OP, po = t % CLC_OP;
        CLC_SPLIT_OUT(po, od, oh, ow);
        __global const clc_data* xb = x + CLC_X_AT(b, g * CLC_CI + ci0, 0);
        __global const clc_data* dyb = dy + CLC_Y_AT(b, co0, po);
% for o in range(cob):
        const clc_real d${o} = clc_ld(dyb, ${o} * CLC_YC);
% endfor
% for kd in range(KD):
        const int id${kd} = od * CLC_SD - CLC_PD + ${kd} * CLC_DD;
% endfor
% for kh in range(KH):
        const int ih${kh} = oh * CLC_SH - CLC_PH + ${kh} * CLC_DH;
% endfor
% for kw in range(KW):
        const int iw${kw} = ow * CLC_SW - CLC_PW + ${kw} * CLC_DW;
% endfor
        /* every load predicated, none behind a branch: all of a pixel's loads in flight at once */
% for t, (kd, kh, kw) in enumerate(taps):
        {
            const bool inside = CLC_INSIDE(id${kd}, ih${kh}, iw${kw});
            const clc_idx at = inside ? CLC_IN_OFFSET(id${kd}, ih${kh}, iw${kw}) * CLC_XP : 0;
% for i in range(cib):
            const clc_real v${i} = inside ? clc_ld(xb, at + ${i} * CLC_XC) : (clc_real)0;
% endfor
% for o in range(cob):
% for i in range(cib):
            s${(o * cib + i) * KV + t} = fma(d${o}, v${i}, s${(o * cib + i) * KV + t});
% endfor
% endfor
        }
% endfor
    }

    /* the work-items' sums, ${chunk} at a time (padded rows: no bank conflicts), each block's over
       its pixel lanes added in lane order by one work-item */
    __local clc_real red[${min(chunk, A)}][${wg + 1}];
% for c, part in enumerate(chunks):
% if c:
    barrier(CLK_LOCAL_MEM_FENCE);
% endif
% for a in part:
    red[${a - part.start}][lid] = s${a};
% endfor
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int q = lid; q < ${len(part) * lanes}; q += ${wg}) {
        const int j = q / ${lanes}, lane = q % ${lanes};
        const int bl = (int)get_group_id(1) * ${lanes} + lane;
        clc_real acc = red[j][lane];
        for (int k = 1; k < ${PL}; ++k) acc += red[j][k * ${lanes} + lane];
        if (bl < ${NB}) {
            const int a = ${part.start} + j;
            const int o = a / ${cib * KV}, i = (a / ${KV}) % ${cib}, tap = a % ${KV};
            const int bg = bl / ${NOB * NIB};
            const int bco = bg * CLC_CO + (bl / ${NIB}) % ${NOB} * ${cob} + o;
            const int bci = (bl % ${NIB}) * ${cib} + i;
            const clc_idx e = ((clc_idx)bco * CLC_CI + bci) * CLC_KV + tap;
% if slices > 1:
            partial[slice * ${geom.weight_elements} + e] = acc;
% else:
            clc_st(dw_base + dw_off, e, acc);
% endif
        }
    }
% endfor
}
</%def>\
