// epilogue.h: the graph's next node applied to a MUL_MAT's product in the
// product's own launch (ops_fusion.cpp), shared by every product kernel
// (matmul.cl's mul_mat_dot, quant.cl's mul_mv_q and mul_mat_tiled) so each
// stores its results through STORE_PRODUCT and nothing else.
//
// -DEPILOGUE: EPI_NONE (no extra arguments), or EPI_ADD / EPI_MUL with a
// dense f32 operand of the product's layout, or EPI_SILU; the kernel then
// takes EPILOGUE_ARGS after its own: the operand (ignored by EPI_SILU) and
// the result, each a buffer and a byte offset, indexed like the product.
// The product itself is still stored, so a later reader of it is served.

#define EPI_NONE 0
#define EPI_ADD 1
#define EPI_MUL 2
#define EPI_SILU 3

#ifndef EPILOGUE
#define EPILOGUE EPI_NONE
#endif

#if EPILOGUE == EPI_NONE
#define EPILOGUE_ARGS
#define EPILOGUE_PARAMS
#define EPILOGUE_PASS
#else
#define EPILOGUE_ARGS , __global const char *epi_p, ulong epi_off, __global char *res_p, ulong res_off
#define EPILOGUE_PARAMS , __global const char *epi, __global char *res
#define EPILOGUE_PASS , epi_p + epi_off, res_p + res_off
#endif

// Stores product |v| at byte |at| of the product (d) and, with an
// epilogue, the next node's value at the same byte of the result. One
// work-item does both, operand read after the product is written: the
// result may take the product's or the operand's memory (in place), and an
// operand that is a view of the product reads the product, as the unfused
// node would. The expressions are elementwise.cl's, so the results are
// bit-equal to the unfused launches.
inline void store_product(__global char *d, long at, float v EPILOGUE_PARAMS) {
  *(__global float *)(d + at) = v;
#if EPILOGUE == EPI_ADD
  *(__global float *)(res + at) = v + *(__global const float *)(epi + at);
#elif EPILOGUE == EPI_MUL
  *(__global float *)(res + at) = v * *(__global const float *)(epi + at);
#elif EPILOGUE == EPI_SILU
  *(__global float *)(res + at) = v / (1.0f + exp(-v));
#endif
}

// Element (i0, i1, i2, i3) of the product, the kernel's TENSOR(d).
#define STORE_PRODUCT(i0, i1, i2, i3, v) \
  store_product(d_p + d_off, (i0) * d_nb.x + (i1) * d_nb.y + (i2) * d_nb.z + (i3) * d_nb.w, (v) EPILOGUE_PASS)
