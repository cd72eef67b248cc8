## Column buffer for the im2col algorithm on CPU devices: the same buffer as im2col.mako's
## clc_im2col (col[g][(ci, tap)][(b, po)], b counted from `chunk`), but one work-item copies one
## output row (OW consecutive columns): the row's input line and its padding test are decided once,
## and the copy along ow has no divisions, so LLVM vectorises it.  (im2col.mako's one work-item per
## element spends its time decoding indices: 2.5 GB/s on PoCL.)
## clc_im2col_t writes the same buffer transposed (the weight gradient's, see there).
## Parameters: geom, real, index, chunk_batch (images per launch).
<%namespace name="prelude" file="prelude.mako"/>
${prelude.header(geom, real, index)}
#define CLC_NB ${chunk_batch}
#define CLC_COLS ((clc_idx)CLC_NB * CLC_OP)     /* columns of one group's buffer */

/* global: (OD*OH, NB, G*CI*KV) */
__kernel void clc_im2col_rows(__global const clc_real* restrict x_base, const long x_off,
                              __global clc_real* restrict col, const int chunk)
{
    const int line = get_global_id(0);            /* od * OH + oh */
    const clc_idx image = get_global_id(1);       /* image of this launch: b = chunk + image */
    const clc_idx row = get_global_id(2);         /* g * CI*KV + ci * KV + tap */
    const clc_idx gci = row / CLC_KV;             /* g * CI + ci */
    const int tap = (int)(row % CLC_KV);
    CLC_SPLIT_TAP(tap, kd, kh, kw);
    const int od = line / CLC_OH, oh = line % CLC_OH;
    const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
    const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
    __global clc_real* restrict dst = col + row * CLC_COLS + image * CLC_OP + (clc_idx)line * CLC_OW;
    if (!((uint)id < (uint)CLC_ID && (uint)ih < (uint)CLC_IH)) {
        for (int ow = 0; ow < CLC_OW; ++ow)
            dst[ow] = (clc_real)0;
        return;
    }
    /* g * CI + ci of the canonical layout is the input channel */
    __global const clc_real* restrict src =
        x_base + x_off + ((chunk + image) * CLC_CIN + gci) * CLC_IP + ((clc_idx)id * CLC_IH + ih) * CLC_IW;
    for (int ow = 0; ow < CLC_OW; ++ow) {
        const int iw = ow * CLC_SW - CLC_PW + kw * CLC_DW;
        dst[ow] = (uint)iw < (uint)CLC_IW ? src[iw] : (clc_real)0;
    }
}

/* The column buffer transposed, for the weight gradient: colT[g][(b, po)][(ci, tap)], so that the
   CPU GEMM reads B = colT with row loads along (ci, tap).  One work-item per output pixel writes
   its CI * KV values contiguously.  global: (OP, NB, G) */
__kernel void clc_im2col_t(__global const clc_real* restrict x_base, const long x_off,
                           __global clc_real* restrict col, const int chunk)
{
    const clc_idx po = get_global_id(0);
    const clc_idx image = get_global_id(1);
    const clc_idx g = get_global_id(2);
    CLC_SPLIT_OUT(po, od, oh, ow);
    __global clc_real* restrict dst = col + ((g * CLC_COLS) + image * CLC_OP + po) * ((clc_idx)CLC_CI * CLC_KV);
    __global const clc_real* restrict src = x_base + x_off + ((chunk + image) * CLC_CIN + g * CLC_CI) * CLC_IP;
    for (int ci = 0; ci < CLC_CI; ++ci, src += CLC_IP) {
        for (int kd = 0; kd < CLC_KD; ++kd) {
            const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
            for (int kh = 0; kh < CLC_KH; ++kh) {
                const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
                for (int kw = 0; kw < CLC_KW; ++kw, ++dst) {
                    const int iw = ow * CLC_SW - CLC_PW + kw * CLC_DW;
                    *dst = CLC_INSIDE(id, ih, iw) ? src[CLC_IN_OFFSET(id, ih, iw)] : (clc_real)0;
                }
            }
        }
    }
}
