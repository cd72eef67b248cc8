## Operand views for the tiled GEMM (gemm.mako): how each algorithm's A (M x K), B (K x N) and C
## (M x N) matrices map onto convolution tensors.  Each def emits the element type of its buffer
## (clc_a_t, clc_b_t, clc_c_t: clc_data for the call's tensors, clc_real for workspaces) and one
## inline function:
##   clc_real clc_load_a(buf, g, m, k, chunk)   0 <= m < M, 0 <= k < K guaranteed by the caller
##   clc_real clc_load_b(buf, g, k, n, chunk)   0 <= k < K, 0 <= n < N guaranteed by the caller
##   void     clc_store_c(buf, bias, residual, g, split, m, n, value, chunk)
## and, C views given p["vector"] (VW: gemm.py's vector_stores), the aligned store of VW columns
##   void     clc_store_c_vec(buf, bias, residual, g, split, m, n, realVW value, chunk)   n % VW == 0
## `chunk` is the first batch image of this launch when a column buffer is filled in batch chunks.
## Padding and the data gradient's stride holes are handled here: they read as zero.
<%namespace name="prelude" file="prelude.mako"/>

## ---------------------------------------------------------------- A operands
<%def name="a_weight(p)">
/* A = weight of group g as (CO x CI*KV); rows are contiguous. */
typedef clc_data clc_a_t;
inline clc_idx clc_at_a(clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    return (g * CLC_CO + m) * ((clc_idx)CLC_CI * CLC_KV) + k;
}
inline clc_real clc_load_a(__global const clc_a_t* restrict w, clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    return clc_ld(w, clc_at_a(g, m, k, chunk));
}
</%def>

<%def name="a_weight_bwd_data(p)">
/* A(ci, (co, tap)) = w[g*CO + co][ci][tap]: the weight read "transposed" per tap for the data gradient. */
typedef clc_data clc_a_t;
inline clc_real clc_load_a(__global const clc_a_t* restrict w, clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    const clc_idx co = k / CLC_KV, tap = k % CLC_KV;
    return clc_ld(w, ((g * CLC_CO + co) * CLC_CI + m) * CLC_KV + tap);
}
</%def>

<%def name="a_weight_t(p)">
/* A((ci, tap), co) = w[g*CO + co][ci][tap]: the transposed weight, for the GEMM before col2im. */
typedef clc_data clc_a_t;
inline clc_idx clc_at_a(clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    return (g * CLC_CO + k) * ((clc_idx)CLC_CI * CLC_KV) + m;
}
inline clc_real clc_load_a(__global const clc_a_t* restrict w, clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    return clc_ld(w, clc_at_a(g, m, k, chunk));
}
</%def>

<%def name="a_grad_output_rows(p)">
/* A(co, (b, po)) = dy[b][g*CO + co][po], b counted from `chunk`: the weight gradient's left operand. */
typedef clc_data clc_a_t;
inline clc_idx clc_at_a(clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    const clc_idx b = chunk + k / CLC_OP, po = k % CLC_OP;
    return CLC_Y_AT(b, g * CLC_CO + m, po);
}
inline clc_real clc_load_a(__global const clc_a_t* restrict dy, clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    return clc_ld(dy, clc_at_a(g, m, k, chunk));
}
</%def>

<%def name="a_matrix(p)">
/* A(m, k) = a[g][m][k]: a workspace matrix with contiguous rows (Winograd's transformed weight,
   or its transformed output gradient with the tiles along k). */
typedef clc_real clc_a_t;
inline clc_idx clc_at_a(clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    return (g * ${p["M"]} + m) * ${p["K"]} + k;
}
inline clc_real clc_load_a(__global const clc_a_t* restrict a, clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    return a[clc_at_a(g, m, k, chunk)];
}
</%def>

<%def name="a_matrix_t(p)">
/* A(m, k) = a[g][k][m]: a workspace matrix read transposed, its columns contiguous.  No plan uses
   it: docs/perf/winograd_wgrad_layout.py times Winograd's weight-gradient GEMMs through it (Y with
   the channels fastest), which ran as fast as a_matrix's k-fast reads (docs/performance.md). */
typedef clc_real clc_a_t;
inline clc_real clc_load_a(__global const clc_a_t* restrict a, clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    return a[(g * ${p["K"]} + k) * ${p["M"]} + m];
}
</%def>

## The channels-last GEMMs run transposed (gemm.py's `swapped` shapes): C^T = B^T A^T, rows the
## pixels and columns the channels, so that a work-item row's stores are consecutive channels.
<%def name="a_input_unfold(p)">
/* A((b, po), (tap, ci)) = padded input under tap of output pixel po (channels-last, tap-major). */
typedef clc_data clc_a_t;
inline clc_real clc_load_a(__global const clc_a_t* restrict x, clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    const clc_idx tap = k / CLC_CI, ci = k % CLC_CI;
    const clc_idx b = chunk + m / CLC_OP, po = m % CLC_OP;
    CLC_SPLIT_TAP(tap, kd, kh, kw);
    CLC_SPLIT_OUT(po, od, oh, ow);
    const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
    const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
    const int iw = ow * CLC_SW - CLC_PW + kw * CLC_DW;
    if (!CLC_INSIDE(id, ih, iw)) return (clc_real)0;
    return clc_ld(x, CLC_X_AT(b, g * CLC_CI + ci, CLC_IN_OFFSET(id, ih, iw)));
}
</%def>

<%def name="a_input_pointwise(p)">
/* A((b, po), ci) for a 1x1 unpadded convolution, channels-last: a pixel's row of input channels. */
typedef clc_data clc_a_t;
inline clc_real clc_load_a(__global const clc_a_t* restrict x, clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    const clc_idx b = chunk + m / CLC_OP, po = m % CLC_OP;
    CLC_SPLIT_OUT(po, od, oh, ow);
    return clc_ld(x, CLC_X_AT(b, g * CLC_CI + k, CLC_IN_OFFSET(od * CLC_SD, oh * CLC_SH, ow * CLC_SW)));
}
</%def>

<%def name="a_grad_output_gather(p)">
/* A((b, pi), (tap, co)) = dy at the output pixel whose tap lands on input pixel pi, else 0
   (channels-last, tap-major): the transposed data gradient's left operand. */
typedef clc_data clc_a_t;
inline clc_real clc_load_a(__global const clc_a_t* restrict dy, clc_idx g, clc_idx m, clc_idx k, int chunk)
{
    const clc_idx tap = k / CLC_CO, co = k % CLC_CO;
    const clc_idx b = chunk + m / CLC_IP, pi = m % CLC_IP;
    CLC_SPLIT_TAP(tap, kd, kh, kw);
    CLC_SPLIT_IN(pi, id, ih, iw);
    const int od = clc_source_index(id, CLC_PD, kd, CLC_DD, CLC_SD, CLC_OD);
    const int oh = clc_source_index(ih, CLC_PH, kh, CLC_DH, CLC_SH, CLC_OH);
    const int ow = clc_source_index(iw, CLC_PW, kw, CLC_DW, CLC_SW, CLC_OW);
    if ((od | oh | ow) < 0) return (clc_real)0;
    return clc_ld(dy, CLC_Y_AT(b, g * CLC_CO + co, CLC_OUT_OFFSET(od, oh, ow)));
}
</%def>

## ---------------------------------------------------------------- B operands
<%def name="b_input_unfold(p)">
/* B((ci, tap), (b, po)) = padded input under tap of output pixel po: im2col without the buffer. */
typedef clc_data clc_b_t;
inline clc_real clc_load_b(__global const clc_b_t* restrict x, clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    const clc_idx ci = k / CLC_KV, tap = k % CLC_KV;
    const clc_idx b = chunk + n / CLC_OP, po = n % CLC_OP;
    CLC_SPLIT_TAP(tap, kd, kh, kw);
    CLC_SPLIT_OUT(po, od, oh, ow);
    const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
    const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
    const int iw = ow * CLC_SW - CLC_PW + kw * CLC_DW;
    if (!CLC_INSIDE(id, ih, iw)) return (clc_real)0;
    return clc_ld(x, CLC_X_AT(b, g * CLC_CI + ci, CLC_IN_OFFSET(id, ih, iw)));
}
</%def>

<%def name="b_input_unfold_t(p)">
/* B((b, po), (ci, tap)): the unfolded input transposed, for the weight gradient; tap-major
   (channels-last), n = (tap, ci) (c_matrix then stores each column at its (ci, tap) place). */
typedef clc_data clc_b_t;
inline clc_real clc_load_b(__global const clc_b_t* restrict x, clc_idx g, clc_idx k, clc_idx n, int chunk)
{
% if p.get("tap_major"):
    const clc_idx tap = n / CLC_CI, ci = n % CLC_CI;
% else:
    const clc_idx ci = n / CLC_KV, tap = n % CLC_KV;
% endif
    const clc_idx b = chunk + k / CLC_OP, po = k % CLC_OP;
    CLC_SPLIT_TAP(tap, kd, kh, kw);
    CLC_SPLIT_OUT(po, od, oh, ow);
    const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
    const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
    const int iw = ow * CLC_SW - CLC_PW + kw * CLC_DW;
    if (!CLC_INSIDE(id, ih, iw)) return (clc_real)0;
    return clc_ld(x, CLC_X_AT(b, g * CLC_CI + ci, CLC_IN_OFFSET(id, ih, iw)));
}
</%def>

<%def name="b_input_pointwise(p)">
/* B(ci, (b, po)) for a 1x1 unpadded convolution: the input read at the stride grid, no unfolding. */
typedef clc_data clc_b_t;
inline clc_idx clc_at_b(clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    const clc_idx b = chunk + n / CLC_OP, po = n % CLC_OP;
    CLC_SPLIT_OUT(po, od, oh, ow);
    return CLC_X_AT(b, g * CLC_CI + k, CLC_IN_OFFSET(od * CLC_SD, oh * CLC_SH, ow * CLC_SW));
}
inline clc_real clc_load_b(__global const clc_b_t* restrict x, clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    return clc_ld(x, clc_at_b(g, k, n, chunk));
}
</%def>

<%def name="b_input_pointwise_t(p)">
/* B((b, po), ci) for the 1x1 weight gradient. */
typedef clc_data clc_b_t;
inline clc_idx clc_at_b(clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    const clc_idx b = chunk + k / CLC_OP, po = k % CLC_OP;
    CLC_SPLIT_OUT(po, od, oh, ow);
    return CLC_X_AT(b, g * CLC_CI + n, CLC_IN_OFFSET(od * CLC_SD, oh * CLC_SH, ow * CLC_SW));
}
inline clc_real clc_load_b(__global const clc_b_t* restrict x, clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    return clc_ld(x, clc_at_b(g, k, n, chunk));
}
</%def>

<%def name="b_columns(p)">
/* B(k, n) = col[g][k][n]: an explicit column buffer (im2col), rows of N = chunk images x pixels
   (or, transposed for the CPU's weight gradient, of input channels x taps), each LD apart. */
typedef clc_real clc_b_t;
inline clc_idx clc_at_b(clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    return (g * ${p["K"]} + k) * ${p.get("LD", p["N"])} + n;
}
inline clc_real clc_load_b(__global const clc_b_t* restrict col, clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    return col[clc_at_b(g, k, n, chunk)];
}
</%def>

<%def name="b_columns_t(p)">
/* B(k, n) = col[g][n][k]: the column buffer read transposed (weight gradient, contraction over pixels). */
typedef clc_real clc_b_t;
inline clc_idx clc_at_b(clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    return (g * ${p["N"]} + n) * ${p["K"]} + k;
}
inline clc_real clc_load_b(__global const clc_b_t* restrict col, clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    return col[clc_at_b(g, k, n, chunk)];
}
</%def>

<%def name="b_grad_output_gather(p)">
/* B((co, tap), (b, pi)) = dy at the output pixel whose tap lands on input pixel pi, else 0:
   the data gradient as a gather (no atomics); stride holes read as zero. */
typedef clc_data clc_b_t;
inline clc_real clc_load_b(__global const clc_b_t* restrict dy, clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    const clc_idx co = k / CLC_KV, tap = k % CLC_KV;
    const clc_idx b = chunk + n / CLC_IP, pi = n % CLC_IP;
    CLC_SPLIT_TAP(tap, kd, kh, kw);
    CLC_SPLIT_IN(pi, id, ih, iw);
    const int od = clc_source_index(id, CLC_PD, kd, CLC_DD, CLC_SD, CLC_OD);
    const int oh = clc_source_index(ih, CLC_PH, kh, CLC_DH, CLC_SH, CLC_OH);
    const int ow = clc_source_index(iw, CLC_PW, kw, CLC_DW, CLC_SW, CLC_OW);
    if ((od | oh | ow) < 0) return (clc_real)0;
    return clc_ld(dy, CLC_Y_AT(b, g * CLC_CO + co, CLC_OUT_OFFSET(od, oh, ow)));
}
</%def>

<%def name="b_grad_output_cols(p)">
/* B(co, (b, po)) = dy[b][g*CO + co][po]: the right operand of the GEMM that feeds col2im, and of a
   1x1 stride-1 data gradient's GEMM (gemm1x1), read in place. */
typedef clc_data clc_b_t;
inline clc_idx clc_at_b(clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    const clc_idx b = chunk + n / CLC_OP, po = n % CLC_OP;
    return CLC_Y_AT(b, g * CLC_CO + k, po);
}
inline clc_real clc_load_b(__global const clc_b_t* restrict dy, clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    return clc_ld(dy, clc_at_b(g, k, n, chunk));
}
</%def>

<%def name="b_weight_t(p)">
/* B((tap, ci), co) = w[g*CO + co][ci][tap]: the weight transposed, tap-major (channels-last forward). */
typedef clc_data clc_b_t;
inline clc_real clc_load_b(__global const clc_b_t* restrict w, clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    const clc_idx tap = k / CLC_CI, ci = k % CLC_CI;
    return clc_ld(w, ((g * CLC_CO + n) * CLC_CI + ci) * CLC_KV + tap);
}
</%def>

<%def name="b_weight_bwd_data(p)">
/* B((tap, co), ci) = w[g*CO + co][ci][tap] (channels-last data gradient, tap-major). */
typedef clc_data clc_b_t;
inline clc_real clc_load_b(__global const clc_b_t* restrict w, clc_idx g, clc_idx k, clc_idx n, int chunk)
{
    const clc_idx tap = k / CLC_CO, co = k % CLC_CO;
    return clc_ld(w, ((g * CLC_CO + co) * CLC_CI + n) * CLC_KV + tap);
}
</%def>

## ---------------------------------------------------------------- C operands
<%def name="finish_c(p, elements, position, store)">
/* Split-K in one launch (p["finish"] pieces, each ${elements} elements apart): the sum of C(m, n)'s
   pieces in order, as clc_splitk_result / clc_splitk_sum sum them (the same rounding), stored into
   the result by the work-group that finished its tile last (gemm.mako's FINISH), after its fence:
   plain loads, which the compiler may issue together (through a volatile pointer each waited for
   the one before: 1.3-1.6x the two launches' kernel time on an H100's small layers). */
inline void clc_finish_c(__global const clc_real* partial, __global clc_data* restrict out,
                         __global const clc_data* restrict bias, __global const clc_data* restrict residual,
                         clc_idx g, clc_idx m, clc_idx n, int chunk)
{
${position}\
    __global const clc_real* pieces = partial + at;
    clc_real acc = pieces[0];
    for (int s = 1; s < ${p["finish"]}; ++s)
        acc += pieces[(clc_idx)s * (${elements})];
    ${store}
}
</%def>
<%def name="c_nchw(p)">
/* C(m, (b, pixel)) -> out(b, g*M + m, pixel): an activation (${layout}), the pass's result (the
   epilogue); or, with p["partial"] (the result's elements), one piece of a cut contraction of it:
   partial[split][the result's index], a clc_real workspace that clc_splitk_result sums. */
typedef ${"clc_real" if p.get("partial") else "clc_data"} clc_c_t;
<%def name="nchw_at()">\
    const clc_idx b = chunk + n / ${p["pixels"]}, pixel = n % ${p["pixels"]};
    const clc_idx channel = g * ${p["M"]} + m;
% if layout == "channels_last":
    const clc_idx at = (b * ${p["pixels"]} + pixel) * ${p["channels"]} + channel;
% else:
    const clc_idx at = (b * ${p["channels"]} + channel) * ${p["pixels"]} + pixel;
% endif
</%def>\
inline void clc_store_c(__global clc_c_t* restrict out, __global const clc_data* restrict bias,
                        __global const clc_data* restrict residual,
                        clc_idx g, clc_idx split, clc_idx m, clc_idx n, clc_real value, int chunk)
{
${nchw_at()}\
% if p.get("partial"):
    out[split * (clc_idx)${p["partial"]} + at] = value;
% else:
    clc_store_result(out, at, value, bias, channel, residual);
% endif
}
% if p.get("finish"):
${finish_c(p, p["partial"], capture(nchw_at), "clc_store_result(out, at, acc, bias, channel, residual);")}
% endif
% if p.get("vector"):
<% n = p["vector"] %>/* C(m, (b, pixel .. pixel + ${n} - 1)), n a multiple of ${n}: neighbouring pixels of one image
   (gemm.py's vector_stores: an image's pixel count is a multiple of ${n}, channels-first, stored
   as clc_real, and the tensor starts at a multiple of ${n} elements), one aligned vector store. */
inline void clc_store_c_vec(__global clc_c_t* restrict out, __global const clc_data* restrict bias,
                            __global const clc_data* restrict residual,
                            clc_idx g, clc_idx split, clc_idx m, clc_idx n, ${real}${n} value, int chunk)
{
    const clc_idx b = chunk + n / ${p["pixels"]}, pixel = n % ${p["pixels"]};
    const clc_idx channel = g * ${p["M"]} + m;
    const clc_idx at = (b * ${p["channels"]} + channel) * ${p["pixels"]} + pixel;
% if p.get("partial"):
    *(__global ${real}${n}*)(out + split * (clc_idx)${p["partial"]} + at) = value;
% else:
    ${prelude.store_result_aligned("out", "at", [f"value.s{i}" for i in range(n)], "bias", "channel", "residual")}
% endif
}
% endif
</%def>

<%def name="c_nchw_scatter(p)">
/* C(m, (b, po)) -> dx(b, g*M + m, the input pixel under output pixel po): a strided 1x1 data
   gradient without padding, whose GEMM runs over the output pixels alone.  The other pixels of
   po's stride block (which no output reads) get zero, through the epilogue as every pixel does
   (a transposed convolution's bias lands there too); the blocks tile the input, so every input
   pixel is written exactly once. */
typedef clc_data clc_c_t;
inline void clc_store_c(__global clc_c_t* restrict out, __global const clc_data* restrict bias,
                        __global const clc_data* restrict residual,
                        clc_idx g, clc_idx split, clc_idx m, clc_idx n, clc_real value, int chunk)
{
    const clc_idx b = chunk + n / CLC_OP, po = n % CLC_OP;
    const clc_idx channel = g * ${p["M"]} + m;
    CLC_SPLIT_OUT(po, od, oh, ow);
    for (int ad = 0; ad < CLC_SD; ++ad) {
        const int id = od * CLC_SD + ad;
        if (id >= CLC_ID) break;
        for (int ah = 0; ah < CLC_SH; ++ah) {
            const int ih = oh * CLC_SH + ah;
            if (ih >= CLC_IH) break;
            for (int aw = 0; aw < CLC_SW; ++aw) {
                const int iw = ow * CLC_SW + aw;
                if (iw >= CLC_IW) break;
                clc_store_result(out, CLC_X_AT(b, channel, CLC_IN_OFFSET(id, ih, iw)),
                                 (ad | ah | aw) ? (clc_real)0 : value, bias, channel, residual);
            }
        }
    }
}
</%def>

<%def name="c_matrix(p)">
/* C(m, n) -> out[split][g][m][n]: a weight gradient (stored: the call's tensor), or a split-K
   partial or a column buffer (workspaces). */
typedef ${"clc_data" if p["stored"] else "clc_real"} clc_c_t;
<%def name="matrix_at(split)">\
% if p.get("tap_major"):
    /* n = (tap, ci): stored at its (ci, tap) place, so dw and the partials keep the weight's layout */
    const clc_idx at = ((${split} * CLC_GEMMS + g) * ${p["M"]} + m) * ${p["N"]} + (n % CLC_CI) * CLC_KV + n / CLC_CI;
% else:
    const clc_idx at = ((${split} * CLC_GEMMS + g) * ${p["M"]} + m) * ${p["N"]} + n;
% endif
</%def>\
inline void clc_store_c(__global clc_c_t* restrict out, __global const clc_data* restrict bias,
                        __global const clc_data* restrict residual,
                        clc_idx g, clc_idx split, clc_idx m, clc_idx n, clc_real value, int chunk)
{
${matrix_at("split")}\
% if p["accumulate"]:
    /* later batch chunks add onto the earlier ones, in launch order: deterministic (a workspace
       when the storage is narrower than clc_real: the sums are rounded once, at the end) */
    out[at] = (chunk == 0 ? (clc_real)0 : out[at]) + value;
% elif p["stored"]:
    clc_st(out, at, value);
% else:
    out[at] = value;
% endif
}
% if p.get("finish"):
${finish_c(p, f'CLC_GEMMS * {p["M"] * p["N"]}', capture(matrix_at, "0"), "clc_st(out, at, acc);")}
% endif
% if p.get("vector"):
<% n = p["vector"] %>/* C(m, n .. n + ${n} - 1) of a workspace (not accumulated, not tap-major, N a multiple of ${n}:
   gemm.py's vector_stores), one aligned vector store. */
inline void clc_store_c_vec(__global clc_c_t* restrict out, __global const clc_data* restrict bias,
                            __global const clc_data* restrict residual,
                            clc_idx g, clc_idx split, clc_idx m, clc_idx n, ${real}${n} value, int chunk)
{
    *(__global ${real}${n}*)(out + ((split * CLC_GEMMS + g) * ${p["M"]} + m) * ${p["N"]} + n) = value;
}
% endif
</%def>

<%def name="c_nhwc(p)">
/* C((b, pixel), n) -> out(b, pixel, g*N + n): a channels-last activation, the pass's result (the
   epilogue), from the transposed GEMM (rows the pixels, columns the group's channels); with
   p["partial"], one piece of a cut contraction of it, as c_nchw's. */
typedef ${"clc_real" if p.get("partial") else "clc_data"} clc_c_t;
<%def name="nhwc_at()">\
    const clc_idx channel = g * ${p["N"]} + n;
    const clc_idx at = (chunk * ${p["pixels"]} + m) * ${p["channels"]} + channel;
</%def>\
inline void clc_store_c(__global clc_c_t* restrict out, __global const clc_data* restrict bias,
                        __global const clc_data* restrict residual,
                        clc_idx g, clc_idx split, clc_idx m, clc_idx n, clc_real value, int chunk)
{
${nhwc_at()}\
% if p.get("partial"):
    out[split * (clc_idx)${p["partial"]} + at] = value;
% else:
    clc_store_result(out, at, value, bias, channel, residual);
% endif
}
% if p.get("finish"):
${finish_c(p, p["partial"], capture(nhwc_at), "clc_store_result(out, at, acc, bias, channel, residual);")}
% endif
% if p.get("vector"):
<% n = p["vector"] %>/* C((b, pixel), n .. n + ${n} - 1), n a multiple of ${n}: neighbouring channels of one pixel
   (gemm.py's vector_stores: the channels of a group and of a pixel multiples of ${n}, stored as
   clc_real, the tensor starting at a multiple of ${n} elements), one aligned vector store. */
inline void clc_store_c_vec(__global clc_c_t* restrict out, __global const clc_data* restrict bias,
                            __global const clc_data* restrict residual,
                            clc_idx g, clc_idx split, clc_idx m, clc_idx n, ${real}${n} value, int chunk)
{
    const clc_idx channel = g * ${p["N"]} + n;
    const clc_idx at = (chunk * ${p["pixels"]} + m) * ${p["channels"]} + channel;
% if p.get("partial"):
    *(__global ${real}${n}*)(out + split * (clc_idx)${p["partial"]} + at) = value;
% else:
    ${prelude.store_result_aligned("out", "at", [f"value.s{i}" for i in range(n)], "bias", "channel", "residual", channel_per_lane=True)}
% endif
}
% endif
</%def>
