## Shared prelude: scalar, storage and index types, loads and stores of the call's tensors, the
## epilogue of the kernels that write the result, and the canonical convolution's geometry as
## constants.  Every kernel family includes it with <%namespace name="prelude" file="prelude.mako"/>,
## emits ${prelude.header(geom, real, index, data, epilogue, bias)} first, then
## ${prelude.entry_points(self, entries)}: the family's kernels the caller asked for.  All generated
## identifiers carry the clc_/CLC_ prefix.
##
## Two element types: clc_real, the arithmetic type (float, or double for float64 tensors), which
## every sum, register and workspace uses; and clc_data, how the call's tensors are stored (float,
## double, half, or a bfloat16 as a ushort).  Tensors are read and written only through
##   clc_ld(p, i)               element i of a clc_data pointer, as clc_real
##   clc_st(p, i, v)            v rounded to nearest-even into element i
##   ${prelude.vload(n, ptr)}   n consecutive elements from ptr as a clc_real vector (no alignment needed)
##   ${prelude.vstore(n, v, ptr)}
## and the result only through clc_store_result (and ${prelude.store_result_vec(...)}), which applies
## the epilogue act(alpha * v + bias[channel] + beta * residual[at]) and rounds once.
## The body's text after that call is output too, so a family's defs there each end with
## `</%def>\` and are set apart by `##` lines rather than blank ones (no blank lines trail the source).
## Facts several families use are stated here once: module-level functions of the parameters
## (prelude.attr.<name>, numbers and tuples only) and defs that write C text.
<%!
    def kernel_rows(geom):
        """The kernel's rows as (r, kd, kh), r = kd * KH + kh numbering them: code unrolled over
        (kd, kh) decides each row's validity and input line once, then runs along the width."""
        KD, KH = geom.kernel[0], geom.kernel[1]
        return tuple((kd * KH + kh, kd, kh) for kd in range(KD) for kh in range(KH))

    def baked(geom):
        """Whether the geometry's numbers are in the source (every rendering but an interim plan's,
        whose `geom` is clconv.interim.GeometryArgs: the numbers arrive as kernel arguments)."""
        return not getattr(geom, "as_arguments", False)

    from clconv.epilogue import ACTIVATIONS, c_literal
    from clconv.dtypes import STORAGE
%>
<%def name="header(geom, real, index, data, epilogue, bias)">
% if real == "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
typedef ${real} clc_real;
/* ${index}: 64-bit only when some flat index of this geometry passes 2^31 - 1. */
typedef ${index} clc_idx;
${storage(data)}
${result(epilogue, bias)}
${absent_epilogue_params(epilogue, bias)}

/* canonical convolution x(N, G*CI, ID, IH, IW) * w(G*CO, CI, KD, KH, KW) -> y(N, G*CO, OD, OH, OW) */
#define CLC_N  ${geom.batch}
#define CLC_G  ${geom.groups}
#define CLC_CI ${geom.cin_per_group}
#define CLC_CO ${geom.cout_per_group}
#define CLC_ID ${geom.in_size[0]}
#define CLC_IH ${geom.in_size[1]}
#define CLC_IW ${geom.in_size[2]}
#define CLC_KD ${geom.kernel[0]}
#define CLC_KH ${geom.kernel[1]}
#define CLC_KW ${geom.kernel[2]}
#define CLC_SD ${geom.stride[0]}
#define CLC_SH ${geom.stride[1]}
#define CLC_SW ${geom.stride[2]}
#define CLC_PD ${geom.pad_begin[0]}
#define CLC_PH ${geom.pad_begin[1]}
#define CLC_PW ${geom.pad_begin[2]}
#define CLC_DD ${geom.dilation[0]}
#define CLC_DH ${geom.dilation[1]}
#define CLC_DW ${geom.dilation[2]}
#define CLC_OD ${geom.out_size[0]}
#define CLC_OH ${geom.out_size[1]}
#define CLC_OW ${geom.out_size[2]}
#define CLC_IP ((clc_idx)CLC_ID * CLC_IH * CLC_IW)   /* input pixels */
#define CLC_OP ((clc_idx)CLC_OD * CLC_OH * CLC_OW)   /* output pixels */
#define CLC_KV (CLC_KD * CLC_KH * CLC_KW)            /* kernel volume */
#define CLC_CIN  (CLC_G * CLC_CI)                    /* input channels, all groups */
#define CLC_COUT (CLC_G * CLC_CO)                    /* output channels, all groups */

/* Where element (b, c, pixel) of an activation lies: X for input-shaped tensors (x, dx), Y for
   output-shaped ones (y, dy, residual); _C and _P are the steps between neighbouring channels and
   neighbouring pixels (${layout}). */
% if layout == "channels_last":
#define CLC_XC ((clc_idx)1)
#define CLC_XP ((clc_idx)CLC_CIN)
#define CLC_YC ((clc_idx)1)
#define CLC_YP ((clc_idx)CLC_COUT)
% else:
#define CLC_XC CLC_IP
#define CLC_XP ((clc_idx)1)
#define CLC_YC CLC_OP
#define CLC_YP ((clc_idx)1)
% endif
#define CLC_X_AT(b, c, p) ((clc_idx)(b) * CLC_CIN * CLC_IP + (clc_idx)(c) * CLC_XC + (clc_idx)(p) * CLC_XP)
#define CLC_Y_AT(b, c, p) ((clc_idx)(b) * CLC_COUT * CLC_OP + (clc_idx)(c) * CLC_YC + (clc_idx)(p) * CLC_YP)

/* Split a flat kernel-tap index into (kd, kh, kw). */
#define CLC_SPLIT_TAP(r, kd, kh, kw) \
    const int kd = (int)((r) / (CLC_KH * CLC_KW)); \
    const int kh = (int)(((r) / CLC_KW) % CLC_KH); \
    const int kw = (int)((r) % CLC_KW)
/* Split a flat output-pixel index into (od, oh, ow). */
#define CLC_SPLIT_OUT(p, od, oh, ow) \
    const int od = (int)((p) / ((clc_idx)CLC_OH * CLC_OW)); \
    const int oh = (int)(((p) / CLC_OW) % CLC_OH); \
    const int ow = (int)((p) % CLC_OW)
/* Split a flat input-pixel index into (id, ih, iw). */
#define CLC_SPLIT_IN(p, id, ih, iw) \
    const int id = (int)((p) / ((clc_idx)CLC_IH * CLC_IW)); \
    const int ih = (int)(((p) / CLC_IW) % CLC_IH); \
    const int iw = (int)((p) % CLC_IW)

/* Unsigned compare: one test catches both the negative side and the far side of the padding. */
#define CLC_INSIDE(id, ih, iw) \
    ((uint)(id) < (uint)CLC_ID && (uint)(ih) < (uint)CLC_IH && (uint)(iw) < (uint)CLC_IW)
#define CLC_IN_OFFSET(id, ih, iw) (((clc_idx)(id) * CLC_IH + (ih)) * CLC_IW + (iw))
#define CLC_OUT_OFFSET(od, oh, ow) (((clc_idx)(od) * CLC_OH + (oh)) * CLC_OW + (ow))

/* Data-gradient gather along one dim: output index o that tap k of input position i came from,
   or -1 when no output position maps there (off the stride grid or outside the output). */
inline int clc_source_index(int i, int pad, int k, int dil, int stride, int out_size)
{
    const int t = i + pad - k * dil;
    if (t < 0 || t % stride != 0) return -1;
    const int o = t / stride;
    return o < out_size ? o : -1;
}
</%def>

## The parameters a kernel appends to its own where the geometry is not baked in (an interim plan:
## clconv/interim.py, one program for every geometry, CLC_N and the rest naming them); nothing
## otherwise.  Only kernels that use no number of the geometry at render time take them.
<%def name="geometry_params(geom)">\
% if not baked(geom):
,
        ${geom.parameters}\
% endif
</%def>

## How the call's tensors are stored (`data`, a STORAGE dtype name), and their loads and stores.
<%def name="storage(data)">
/* tensors stored as ${data}, summed as clc_real */
typedef ${STORAGE[data].c_type} clc_data;
% if data == "float16":
/* vload_half/vstore_half are core OpenCL C: no cl_khr_fp16 needed (NVIDIA's OpenCL has none) */
#define clc_ld(p, i) vload_half((i), (p))
#define clc_st(p, i, v) vstore_half_rte((v), (i), (p))
% elif data == "bfloat16":
/* a bfloat16 is the upper half of a float32 */
inline float clc_from_bf16(ushort b) { return as_float((uint)b << 16); }
inline ushort clc_to_bf16(float f)
{
    const uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);  /* NaN stays a quiet NaN */
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                  /* nearest, ties to even */
}
#define clc_ld(p, i) clc_from_bf16((p)[i])
#define clc_st(p, i, v) ((p)[i] = clc_to_bf16(v))
% else:
#define clc_ld(p, i) ((p)[i])
#define clc_st(p, i, v) ((p)[i] = (v))
% endif
</%def>

## n consecutive tensor elements from ptr as a clc_real vector (an expression); n = 1: a scalar.
<%def name="vload(n, ptr)">\
% if n == 1:
clc_ld(${ptr}, 0)\
% elif data == "float16":
vload_half${n}(0, ${ptr})\
% elif data == "bfloat16":
as_float${n}(convert_uint${n}(vload${n}(0, ${ptr})) << 16)\
% else:
vload${n}(0, ${ptr})\
% endif
</%def>

## Store the clc_real vector `value` of n lanes at ptr (a statement).
<%def name="vstore(n, value, ptr)">\
% if n == 1:
clc_st(${ptr}, 0, ${value});\
% elif data == "float16":
vstore_half${n}_rte(${value}, 0, ${ptr});\
% elif data == "bfloat16":
{ const float${n} clc_t = ${value};${"".join(f" ({ptr})[{i}] = clc_to_bf16(clc_t.s{'0123456789abcdef'[i]});" for i in range(n))} }\
% else:
vstore${n}(${value}, 0, ${ptr});\
% endif
</%def>

## The bias and residual parameters of a kernel that stores the result, in its parameter list:
##   ${prelude.epilogue_params(bias, epilogue)}   (one line, each pair ending in a comma)
## each only where this program's epilogue reads it.  Every buffer argument costs a launch host time
## (NVIDIA's driver about 0.6 us a buffer, docs/perf/launch_paths.py), and most calls have neither;
## clconv.algorithms.base.call drops the matching arguments (Arg.epilogue).  An absent one is a null
## pointer of the same name (absent_epilogue_params, in the header), which the epilogue never reads,
## so the kernels' bodies need not say which are there.
<%def name="epilogue_params(bias, epilogue)">\
${"__global const clc_data* restrict bias_base, const long bias_off, " if bias else ""}\
${"__global const clc_data* restrict residual_base, const long residual_off," if epilogue.residual else ""}\
</%def>
<%def name="absent_epilogue_params(epilogue, bias)">\
% if not bias:
#define bias_base ((__global const clc_data*)0)  /* no bias: no kernel of this program takes one */
#define bias_off 0
% endif
% if not epilogue.residual:
#define residual_base ((__global const clc_data*)0)  /* no residual: no kernel of this program takes one */
#define residual_off 0
% endif
</%def>
## The epilogue: every kernel that writes the pass's result (y, or dx of a transposed convolution)
## stores it with clc_store_result(out, at, v, bias, channel, residual): out and residual point at
## the tensors' first elements (offsets applied), `at` indexes both (same shape and layout), and
## bias is read at `channel` when the problem has one.  Unused pointers are never read.
## clc_result_value(v, bias, channel, residual, at) is the value it stores, for kernels that gather
## a vector of them into one aligned store (gemm.mako's vector stores of C).
<%def name="result(epilogue, bias)">
% if epilogue.activation == "leaky_relu":
#define CLC_SLOPE ${c_literal(epilogue.negative_slope)}
% endif
inline clc_real clc_result_value(clc_real v, __global const clc_data* bias, clc_idx channel,
                                 __global const clc_data* residual, clc_idx at)
{
% if epilogue.alpha != 1.0:
    v *= ${c_literal(epilogue.alpha)};
% endif
% if bias:
    v += clc_ld(bias, channel);
% endif
% if epilogue.residual and epilogue.beta == 1.0:
    v += clc_ld(residual, at);
% elif epilogue.residual:
    v = fma(${c_literal(epilogue.beta)}, clc_ld(residual, at), v);
% endif
% if epilogue.activation is not None:
    v = ${ACTIVATIONS[epilogue.activation].c};
% endif
    return v;
}
inline void clc_store_result(__global clc_data* out, clc_idx at, clc_real v, __global const clc_data* bias,
                             clc_idx channel, __global const clc_data* residual)
{
    clc_st(out, at, clc_result_value(v, bias, channel, residual, at));
}
% if not epilogue.is_identity:
% for n in (2, 4, 8, 16):
${result_vector(epilogue, bias, n)}
% endfor
% endif
</%def>

## The epilogue on n consecutive results of one channel at out[0..n) (residual[0..n) beside them):
## the same formula as clc_store_result on a vector, so that a vector store inlines one copy of the
## activation rather than n (16-lane CPU GEMMs would otherwise inline hundreds).
<%def name="result_vector(epilogue, bias, n)">
inline void clc_store_result${n}(__global clc_data* out, ${real}${n} v, __global const clc_data* bias,
                                 clc_idx channel, __global const clc_data* residual)
{
% if epilogue.alpha != 1.0:
    v *= ${c_literal(epilogue.alpha)};
% endif
% if bias:
    v += clc_ld(bias, channel);
% endif
% if epilogue.residual and epilogue.beta == 1.0:
    v += ${vload(n, "residual")};
% elif epilogue.residual:
    v = fma((${real}${n})(${c_literal(epilogue.beta)}), ${vload(n, "residual")}, v);
% endif
% if epilogue.activation is not None:
    v = ${ACTIVATIONS[epilogue.activation].c};
% endif
    ${vstore(n, "v", "out")}
}
</%def>

## The clc_real values `lanes` (C expressions) through the epilogue as one aligned vector store at
## element `at` of `out` (a statement; the caller guarantees the alignment): lane i is element at + i,
## of channel `channel`, plus i where `channel_per_lane` (channels-last).  Each lane goes through
## clc_result_value, the scalar store's own formula.
<%def name="store_result_aligned(out, at, lanes, bias, channel, residual, channel_per_lane=False)"><% n = len(lanes) %>*(__global ${real}${n}*)(${out} + ${at}) = (${real}${n})(${", ".join(f"clc_result_value({v}, {bias}, {channel}{f' + {i}' if channel_per_lane else ''}, {residual}, {at} + {i})" for i, v in enumerate(lanes))});\
</%def>

## n results of one channel at out[0..n), from the clc_real vector `value` (a statement); n is 1,
## 2, 4, 8 or 16.
<%def name="store_result_vec(n, out, value, bias_ptr, channel, residual_ptr)">\
% if n == 1:
clc_store_result(${out}, 0, ${value}, ${bias_ptr}, ${channel}, ${residual_ptr});\
% elif epilogue.is_identity and not bias:
${vstore(n, value, out)}\
% elif epilogue.is_identity:
${vstore(n, f"({value}) + ({real}{n})(clc_ld({bias_ptr}, {channel}))", out)}\
% else:
clc_store_result${n}(${out}, ${value}, ${bias_ptr}, ${channel}, ${residual_ptr});\
% endif
</%def>

## The kernel entry points named in `entries`, in that order: each a def of namespace `ns` (the
## family's `self`) named as the __kernel function it writes, its text set off by one blank line
## whatever blank lines the def's own layout leaves around it.  Called through the namespace, a def
## sees the render arguments but not the locals of the template's body.
<%def name="entry_points(ns, entries)">\
% for entry in entries:

${capture(getattr(ns, entry)).strip("\n")}
% endfor
</%def>

## A data-gradient gather's loop over the taps of one dim (0, 1, 2: D, H, W) that can reach input
## index `i`, opening a block where `o` is the output index tap `k` came from (the caller closes
## it).  Strided without dilation, only every stride-th tap lands on the output grid, the first at
## (i + pad) % stride: the loop visits ceil(kernel / stride) of them (a fixed count, which the
## compiler can unroll as it does the whole loop), one tap a dim for a kernel as wide as its
## stride (a ViT or VideoMAE patch embedding, 16 taps a side, where the whole loop tests 16);
## otherwise every tap, each tested (clc_source_index).
<%def name="source_taps(geom, dim, k, o, i, body)"><%
    D = "DHW"[dim]
    stride, dilation = geom.stride[dim], geom.dilation[dim]
    pad = " " * body  # the block's indentation
%>\
% if baked(geom) and stride > 1 and dilation == 1:
for (int ${k}_step = 0; ${k}_step < ${-(-geom.kernel[dim] // stride)}; ++${k}_step) {
${pad}const int ${k} = (${i} + CLC_P${D}) % CLC_S${D} + ${k}_step * CLC_S${D};
${pad}const int ${o} = (${i} + CLC_P${D} - ${k}) / CLC_S${D};
${pad}if (${k} >= CLC_K${D} || ${o} < 0 || ${o} >= CLC_O${D}) continue;\
% else:
for (int ${k} = 0; ${k} < CLC_K${D}; ++${k}) {
${pad}const int ${o} = clc_source_index(${i}, CLC_P${D}, ${k}, CLC_D${D}, CLC_S${D}, CLC_O${D});
${pad}if (${o} < 0) continue;\
% endif
</%def>

## The integer type as wide as clc_real, with `lanes` lanes: the mask type of select() on clc_real vectors.
<%def name="mask_type(real, lanes)">${'long' if real == 'double' else 'int'}${lanes}</%def>
##
## A square tile of n vectors `src`0..`src`{n-1} of n lanes (type `vec`; n a power of two) turned over
## into `dst`0..: lane l of dst r is lane r of src l (statements, indented for a kernel's inner
## block).  In log2(n) stages, each swapping the off-diagonal h x h blocks of the row pairs
## (r, r + h), every new vector drawn from two (a two-source shuffle: n log2 n in all).  Written as
## one vector of n lanes gathered from n vectors, LLVM (PoCL, AVX-512) made about 650 shuffles of a
## 16 x 16 tile, and a dy copy ran 4-5x slower.
<%def name="transpose(n, vec, src, dst)"><%
    comps = "0123456789abcdef"
    stages, h = [], n // 2
    while h:
        stages.append(h)
        h //= 2
    def name(r, stage):
        return f"{src}{r}" if stage == 0 else f"{dst}{r}" if stage == len(stages) else f"{dst}{r}_{stage}"
%>\
% for stage, h in enumerate(stages):
% for r in range(n):
% if not r & h:
        const ${vec} ${name(r, stage + 1)} = (${vec})(${", ".join(f"{name(r, stage)}.s{comps[l]}" if not l & h else f"{name(r + h, stage)}.s{comps[l - h]}" for l in range(n))});
        const ${vec} ${name(r + h, stage + 1)} = (${vec})(${", ".join(f"{name(r, stage)}.s{comps[l + h]}" if not l & h else f"{name(r + h, stage)}.s{comps[l]}" for l in range(n))});
% endif
% endfor
% endfor
</%def>\
