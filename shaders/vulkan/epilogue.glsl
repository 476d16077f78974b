// epilogue.glsl: the graph's next node applied to a product in the product's
// own dispatch (fusion.cpp, plan_fused), for mul_mat_nt, mul_mv_wg and
// mul_mv_q. EPILOGUE (the constant EPILOGUE_ID the shader defines;
// op_codes.h): ADD or MUL with a tensor of the product's shape and strides
// at float offset p.z, or SILU; the result goes to float offset p.y. Both
// live in the product's binding `d` (binding 3, which the plugin widens to
// cover them). The product itself is still stored, so a later reader of it
// is served.
#include "op_codes.h"

layout(constant_id = EPILOGUE_ID) const uint EPILOGUE = BP_VK_EPILOGUE_NONE;

// Stores product |v| at element |at| of the product (d_off not included)
// and, with an epilogue, the next node's value at the same element. Index
// by index in one invocation: the result may take the product's or the
// operand's memory (the allocator's in-place reuse).
void store_product(uint at, float v) {
  d[pc.d_off + at] = v;
  if (EPILOGUE == BP_VK_EPILOGUE_ADD) d[pc.p.y + at] = v + d[pc.p.z + at];
  if (EPILOGUE == BP_VK_EPILOGUE_MUL) d[pc.p.y + at] = v * d[pc.p.z + at];
  if (EPILOGUE == BP_VK_EPILOGUE_SILU) d[pc.p.y + at] = silu(v);
}
