## Depthwise weight gradient (C_in/groups = 1): a bandwidth-bound kernel.
##
## Entry point:
##   clc_depthwise_wgrad: work-group (slice s, `lanes` output channels from co0) sums, over its
##   slice of the batch x output pixels, dy[b][co][p] times the input under each of the KV taps,
##   into KV registers per work-item (dy read once, the input read through the cache); one tree
##   reduction of all KV sums at once in local memory; partial[s][co][tap].  reduce.mako's
##   clc_splitk_sum then adds the slices in a fixed order (deterministic: no atomics).
##   Channels-first, lanes = 1: the work-items of a group take neighbouring pixels of one channel.
##   Channels-last, lanes > 1: work-item lid takes channel co0 + lid % lanes and every
##   (wg / lanes)-th pixel from lid / lanes, so neighbouring work-items read neighbouring channels.
##
## Parameters: geom, real, index, entries, wg (work-group size, a power of two), lanes (a power
## of two dividing wg), slices.
<%namespace name="prelude" file="prelude.mako"/>
${prelude.header(geom, real, index, data, epilogue, bias)}
${prelude.entry_points(self, entries)}\
##
<%def name="clc_depthwise_wgrad()">
<%
    KV = geom.kernel_volume
    total = geom.batch * geom.out_pixels
    chunk = -(-total // slices)
%>
__kernel __attribute__((reqd_work_group_size(${wg}, 1, 1)))
void clc_depthwise_wgrad(__global const clc_data* restrict x_base, const long x_off,
                         __global const clc_data* restrict dy_base, const long dy_off,
                         __global clc_real* restrict partial)
{
<% PL = wg // lanes %>\
    __global const clc_data* restrict x = x_base + x_off;
    __global const clc_data* restrict dy = dy_base + dy_off;
    const int lid = get_local_id(0);
    const int lane = lid % ${lanes}, pl = lid / ${lanes};   /* channel lane, pixel lane */
    const clc_idx co = (clc_idx)get_group_id(1) * ${lanes} + lane;
    const bool live = co < CLC_COUT;   /* the last group of channels may reach past them */
    const clc_idx slice = get_group_id(0);
    const clc_idx g = co / CLC_CO;   /* the one input channel of this output channel's group */
    const clc_idx begin = slice * ${chunk};
    const clc_idx end = live ? min(begin + ${chunk}, (clc_idx)${total}) : begin;

    clc_real acc[${KV}];
    #pragma unroll
    for (int t = 0; t < ${KV}; ++t) acc[t] = (clc_real)0;

    for (clc_idx p = begin + pl; p < end; p += ${PL}) {
        const clc_idx b = p / CLC_OP, po = p % CLC_OP;
        CLC_SPLIT_OUT(po, od, oh, ow);
        const clc_real d = clc_ld(dy, CLC_Y_AT(b, co, po));
        __global const clc_data* restrict xc = x + CLC_X_AT(b, g, 0);
        #pragma unroll
        for (int t = 0; t < ${KV}; ++t) {
            CLC_SPLIT_TAP(t, kd, kh, kw);
            const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
            const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
            const int iw = ow * CLC_SW - CLC_PW + kw * CLC_DW;
            if (CLC_INSIDE(id, ih, iw)) acc[t] = fma(d, clc_ld(xc, CLC_IN_OFFSET(id, ih, iw) * CLC_XP), acc[t]);
        }
    }

    /* all KV sums reduced at once over the pixel lanes: one barrier per halving, not one set per tap */
    __local clc_real red[${KV}][${wg}];
    #pragma unroll
    for (int t = 0; t < ${KV}; ++t) red[t][lid] = acc[t];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = ${wg} / 2; span >= ${lanes}; span >>= 1) {
        if (lid < span) {
            #pragma unroll
            for (int t = 0; t < ${KV}; ++t) red[t][lid] += red[t][lid + span];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* channel lane l's sums are in red[t][l]: the work-items write those lanes x KV sums */
    for (int i = lid; i < ${lanes} * ${KV}; i += ${wg}) {
        const int t = i / ${lanes}, l = i % ${lanes};
        const clc_idx c = (clc_idx)get_group_id(1) * ${lanes} + l;
        if (c < CLC_COUT) partial[(slice * CLC_COUT + c) * ${KV} + t] = red[t][l];
    }
}
</%def>\
