## Column-buffer kernels for the explicit im2col / col2im algorithms.
## Entry points:
##   clc_im2col  col[g][(ci, tap)][(b, po)] = padded input under tap of output pixel po
##   clc_col2im  dx[b][g*CI + ci][pi] = sum over taps of col[g][(ci, tap)][(b, po)] where po reads pi
##               (a gather: each dx element is written by exactly one work-item, no atomics)
## Parameters: geom, real, data, index, entries, epilogue, bias (the prelude's: clc_col2im writes the
## transposed convolution's result), chunk_batch (images per launch).
<%namespace name="prelude" file="prelude.mako"/>
${prelude.header(geom, real, index, data, epilogue, bias)}
#define CLC_NB ${chunk_batch}
#define CLC_COLS ((clc_idx)CLC_NB * CLC_OP)     /* columns of one group's buffer */
#define CLC_ROWS ((clc_idx)CLC_CI * CLC_KV)     /* rows of one group's buffer */
${prelude.entry_points(self, entries)}\
##
<%def name="clc_im2col()">
/* global: (NB*OP rounded up, G*CI*KV); `chunk` is the first image of this launch. */
__kernel void clc_im2col(__global const clc_data* restrict x_base, const long x_off,
                         __global clc_real* restrict col, const int chunk)
{
    const clc_idx n = get_global_id(0);
    if (n >= CLC_COLS) return;
    const clc_idx row = get_global_id(1);         /* g * CI*KV + ci * KV + tap */
    const clc_idx g = row / CLC_ROWS;
    const clc_idx ci = (row / CLC_KV) % CLC_CI;
    const int tap = (int)(row % CLC_KV);
    const clc_idx b = chunk + n / CLC_OP, po = n % CLC_OP;
    CLC_SPLIT_TAP(tap, kd, kh, kw);
    CLC_SPLIT_OUT(po, od, oh, ow);
    const int id = od * CLC_SD - CLC_PD + kd * CLC_DD;
    const int ih = oh * CLC_SH - CLC_PH + kh * CLC_DH;
    const int iw = ow * CLC_SW - CLC_PW + kw * CLC_DW;
    clc_real value = (clc_real)0;
    if (CLC_INSIDE(id, ih, iw))
        value = clc_ld(x_base + x_off, CLC_X_AT(b, g * CLC_CI + ci, CLC_IN_OFFSET(id, ih, iw)));
    col[row * CLC_COLS + n] = value;
}
</%def>\
##
<%def name="clc_col2im()">
/* global: (IP rounded up, NB*CIN). */
__kernel void clc_col2im(__global const clc_real* restrict col,
                         ${prelude.epilogue_params(bias, epilogue)}
                         __global clc_data* restrict dx_base, const long dx_off, const int chunk)
{
    const clc_idx pi = get_global_id(0);
    if (pi >= CLC_IP) return;
    const clc_idx nc = get_global_id(1);          /* local image * CIN + channel */
    const clc_idx b_local = nc / CLC_CIN;
    const int channel = (int)(nc % CLC_CIN);
    const int g = channel / CLC_CI, ci = channel % CLC_CI;
    CLC_SPLIT_IN(pi, id, ih, iw);
    __global const clc_real* restrict rows = col + ((clc_idx)g * CLC_ROWS + (clc_idx)ci * CLC_KV) * CLC_COLS
                                             + b_local * CLC_OP;
    clc_real acc = (clc_real)0;
    ${prelude.source_taps(geom, 0, "kd", "od", "id", 8)}
        ${prelude.source_taps(geom, 1, "kh", "oh", "ih", 12)}
            ${prelude.source_taps(geom, 2, "kw", "ow", "iw", 16)}
                const int tap = (kd * CLC_KH + kh) * CLC_KW + kw;
                acc += rows[tap * CLC_COLS + CLC_OUT_OFFSET(od, oh, ow)];
            }
        }
    }
    clc_store_result(dx_base + dx_off, CLC_X_AT(chunk + b_local, channel, pi), acc,
                     bias_base + bias_off, channel, residual_base + residual_off);
}
</%def>\
