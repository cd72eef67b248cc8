## Depthwise weight gradient (C_in/groups = 1): a bandwidth-bound kernel.
##
## Entry point:
##   clc_depthwise_wgrad: work-group (slice s, output channel co) sums, over its slice of the
##   batch x output pixels, dy[b][co][p] times the input under each of the KV taps, into KV
##   registers per work-item (dy read once, the input read through the cache); one tree reduction
##   of all KV sums at once in local memory; partial[s][co][tap].  reduce.mako's clc_splitk_sum
##   then adds the slices in a fixed order (deterministic: no atomics).
##
## Parameters: geom, real, index, entries, wg (work-group size, a power of two), slices.
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
    __global const clc_data* restrict x = x_base + x_off;
    __global const clc_data* restrict dy = dy_base + dy_off;
    const int lid = get_local_id(0);
    const clc_idx co = get_group_id(1);
    const clc_idx slice = get_group_id(0);
    const clc_idx g = co / CLC_CO;   /* the one input channel of this output channel's group */
    const clc_idx begin = slice * ${chunk};
    const clc_idx end = min(begin + ${chunk}, (clc_idx)${total});

    clc_real acc[${KV}];
    #pragma unroll
    for (int t = 0; t < ${KV}; ++t) acc[t] = (clc_real)0;

    for (clc_idx p = begin + lid; p < end; p += ${wg}) {
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

    /* all KV sums reduced at once: one barrier per halving, not one set per tap */
    __local clc_real red[${KV}][${wg}];
    #pragma unroll
    for (int t = 0; t < ${KV}; ++t) red[t][lid] = acc[t];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = ${wg} / 2; span > 0; span >>= 1) {
        if (lid < span) {
            #pragma unroll
            for (int t = 0; t < ${KV}; ++t) red[t][lid] += red[t][lid + span];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid < ${KV})
        partial[(slice * CLC_COUT + co) * ${KV} + lid] = red[lid][0];
}
</%def>\
