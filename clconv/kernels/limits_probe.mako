/* The device-limits probe (clconv/limits.py): a kernel of the kind clconv writes (local memory, a
   barrier, a loop), so that the compiler's CL_KERNEL_WORK_GROUP_SIZE for it is what a plain clconv
   kernel gets.  Plain OpenCL C, read as it is (no Mako parameters); never launched. */
__kernel void clc_probe(__global float* data)
{
    __local float tile[64];
    const int i = get_local_id(0) & 63;
    tile[i] = data[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    float acc = 0.0f;
    for (int k = 0; k < 64; ++k) acc += tile[(i + k) & 63];
    data[get_global_id(0)] = acc;
}
