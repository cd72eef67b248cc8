## Shared prelude: scalar and index types, and the canonical convolution's geometry as constants.
## Every kernel family includes it with <%namespace name="prelude" file="prelude.mako"/>, emits
## ${prelude.header(geom, real, index)} first, then ${prelude.entry_points(self, entries)}: the
## family's kernels the caller asked for.  All generated identifiers carry the clc_/CLC_ prefix.
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
%>
<%def name="header(geom, real, index)">
% if real == "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
typedef ${real} clc_real;
/* ${index}: 64-bit only when some flat index of this geometry passes 2^31 - 1. */
typedef ${index} clc_idx;

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

## The kernel entry points named in `entries`, in that order: each a def of namespace `ns` (the
## family's `self`) named as the __kernel function it writes, its text set off by one blank line
## whatever blank lines the def's own layout leaves around it.  Called through the namespace, a def
## sees the render arguments but not the locals of the template's body.
<%def name="entry_points(ns, entries)">\
% for entry in entries:

${capture(getattr(ns, entry)).strip("\n")}
% endfor
</%def>

## The integer type as wide as clc_real, with `lanes` lanes: the mask type of select() on clc_real vectors.
<%def name="mask_type(real, lanes)">${'long' if real == 'double' else 'int'}${lanes}</%def>
