## Direct convolution kernels: no workspace, no GEMM, every sum taken in a fixed order.
## Entry points:
##   clc_direct_forward          one work-item per output element
##   clc_direct_forward_rows     one work-item per strip of `rows` output rows at one column
##   clc_direct_backward_data    one work-item per input-gradient element, gathering (no atomics)
##   clc_direct_backward_weight  one work-group per weight element, a tree reduction in local memory
## Parameters: geom, real, data, index, entries, epilogue, bias (the prelude's); wg, the
## work-group size (clc_direct_backward_weight); rows (clc_direct_forward_rows).
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
                                 __global const clc_data* bias_base, const long bias_off,
                                 __global const clc_data* residual_base, const long residual_off,
                                 __global clc_data* y_base, const long y_off)
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
                                      __global const clc_data* bias_base, const long bias_off,
                                      __global const clc_data* residual_base, const long residual_off,
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
<%def name="clc_direct_backward_data()">
/* global: N * CIN * IP rounded up (`element`). dx(b, c, pi) = sum over (co, tap) whose output pixel reads pi.
   `bias` here is the transposed convolution's bias (its output is this input gradient). */
__kernel void clc_direct_backward_data(__global const clc_data* dy_base, const long dy_off,
                                       __global const clc_data* w_base, const long w_off,
                                       __global const clc_data* bias_base, const long bias_off,
                                       __global const clc_data* residual_base, const long residual_off,
                                       __global clc_data* dx_base, const long dx_off)
{
${element("CLC_IP", "CLC_CIN")}
    const int g = channel / CLC_CI, ci = channel % CLC_CI;
    CLC_SPLIT_IN(p, id, ih, iw);
    __global const clc_data* restrict dy = dy_base + dy_off + CLC_Y_AT(b, g * CLC_CO, 0);
    __global const clc_data* restrict w = w_base + w_off + ((clc_idx)g * CLC_CO * CLC_CI + ci) * CLC_KV;

    clc_real acc = (clc_real)0;
    for (int kd = 0; kd < CLC_KD; ++kd) {
        const int od = clc_source_index(id, CLC_PD, kd, CLC_DD, CLC_SD, CLC_OD);
        if (od < 0) continue;
        for (int kh = 0; kh < CLC_KH; ++kh) {
            const int oh = clc_source_index(ih, CLC_PH, kh, CLC_DH, CLC_SH, CLC_OH);
            if (oh < 0) continue;
            for (int kw = 0; kw < CLC_KW; ++kw) {
                const int ow = clc_source_index(iw, CLC_PW, kw, CLC_DW, CLC_SW, CLC_OW);
                if (ow < 0) continue;
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
                                __global clc_data* dw_base, const long dw_off)
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
