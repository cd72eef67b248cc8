## Small deterministic reductions (no float atomics: every sum has one fixed order).
## Entry points:
##   clc_splitk_sum  out[e] = sum over s of partial[s][e]      (the second kernel of split-K)
##   clc_splitk_result  out[e] = epilogue(sum over s of partial[s][e])  (split-K of the forward and
##                      data gradient: e indexes the result, channels and pixels say its channel)
##   clc_bias_grad   db[c] = sum over batch and space of dy[b][c][p]  (one work-group per channel)
## Parameters: geom, real, data, index, entries, epilogue, bias (the prelude's: clc_splitk_result
## writes the pass's result, the others not); splits, elements (the split sums), channels and
## pixels (clc_splitk_result: the result's channels and pixels per channel); wg, the work-group
## size (clc_bias_grad).
<%namespace name="prelude" file="prelude.mako"/>
${prelude.header(geom, real, index, data, epilogue, bias)}
${prelude.entry_points(self, entries)}\
##
<%def name="clc_splitk_sum()">
__kernel void clc_splitk_sum(__global const clc_real* restrict partial,
                             __global clc_data* restrict out_base, const long out_off)
{
    const clc_idx e = get_global_id(0);
    if (e >= ${elements}) return;
    clc_real acc = partial[e];
    for (int s = 1; s < ${splits}; ++s)
        acc += partial[(clc_idx)s * ${elements} + e];
    clc_st(out_base + out_off, e, acc);
}
</%def>\
##
<%def name="clc_splitk_result()">
__kernel void clc_splitk_result(__global const clc_real* restrict partial,
                                ${prelude.epilogue_params(bias, epilogue)}
                                __global clc_data* restrict out_base, const long out_off)
{
    const clc_idx e = get_global_id(0);
    if (e >= ${elements}) return;
    clc_real acc = partial[e];
    for (int s = 1; s < ${splits}; ++s)
        acc += partial[(clc_idx)s * ${elements} + e];
% if layout == "channels_last":
    const clc_idx channel = e % ${channels};
% else:
    const clc_idx channel = e / ${pixels} % ${channels};
% endif
    clc_store_result(out_base + out_off, e, acc, bias_base + bias_off, channel, residual_base + residual_off);
}
</%def>\
##
<%def name="clc_bias_grad()">
__kernel __attribute__((reqd_work_group_size(${wg}, 1, 1)))
void clc_bias_grad(__global const clc_data* restrict dy_base, const long dy_off,
                   __global clc_data* restrict db_base, const long db_off)
{
    const int lid = get_local_id(0);
    const clc_idx channel = get_group_id(1);
    __global const clc_data* restrict dy = dy_base + dy_off;
    clc_real acc = (clc_real)0;
    for (clc_idx t = lid; t < (clc_idx)CLC_N * CLC_OP; t += ${wg}) {
        const clc_idx b = t / CLC_OP, p = t % CLC_OP;
        acc += clc_ld(dy, CLC_Y_AT(b, channel, p));
    }
    __local clc_real partial[${wg}];
    partial[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = ${wg} / 2; span > 0; span >>= 1) {
        if (lid < span) partial[lid] += partial[lid + span];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) clc_st(db_base + db_off, channel, partial[0]);
}
</%def>\
