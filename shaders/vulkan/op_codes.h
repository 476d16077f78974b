// op_codes.h: the codes the shaders' OP and EPILOGUE specialization
// constants take, defined once for the shaders and the plugin. Plain
// #defines, valid GLSL and C++: binary.comp, unary.comp, rows.comp and
// mul_mat_nt.comp include it (glslang's #include), and so does
// plugins/vulkan/plan.hpp, which computes each code from the bp_op it
// stands for and pins every one to that op with a static_assert, so
// renumbering either side fails the build.
#ifndef BP_SHADERS_VULKAN_OP_CODES_H_
#define BP_SHADERS_VULKAN_OP_CODES_H_

// binary.comp's OP (constant_id 0): bp_op - BP_OP_ADD.
#define BP_VK_BINARY_ADD 0
#define BP_VK_BINARY_SUB 1
#define BP_VK_BINARY_MUL 2
#define BP_VK_BINARY_DIV 3

// unary.comp's OP (constant_id 0): bp_op - BP_OP_SCALE.
#define BP_VK_UNARY_SCALE 0
#define BP_VK_UNARY_CLAMP 1
#define BP_VK_UNARY_NEG 2
#define BP_VK_UNARY_ABS 3
#define BP_VK_UNARY_SQR 4
#define BP_VK_UNARY_SQRT 5
#define BP_VK_UNARY_EXP 6
#define BP_VK_UNARY_RELU 7
#define BP_VK_UNARY_GELU 8
#define BP_VK_UNARY_SILU 9
#define BP_VK_UNARY_TANH 10
#define BP_VK_UNARY_SIGMOID 11

// rows.comp's OP (constant_id 2 of the general variant: SUM_ROWS to
// RMS_NORM; constant_id 0 of VEC4: NORM, RMS_NORM, SOFT_MAX):
// bp_op - BP_OP_SUM_ROWS.
#define BP_VK_ROWS_SUM_ROWS 0
#define BP_VK_ROWS_MEAN 1
#define BP_VK_ROWS_ARGMAX 2
#define BP_VK_ROWS_NORM 3
#define BP_VK_ROWS_RMS_NORM 4
#define BP_VK_ROWS_SOFT_MAX 5

// The product shaders' EPILOGUE (epilogue.glsl): the node after the
// product that runs in its dispatch (fusion.cpp), or none.
#define BP_VK_EPILOGUE_NONE 0
#define BP_VK_EPILOGUE_ADD 1
#define BP_VK_EPILOGUE_MUL 2
#define BP_VK_EPILOGUE_SILU 3

// The backend's status buffer (binding 3 of the shaders that report a bad
// row id; backend.cpp reads it at synchronize): words 0..2 are GET_ROWS's
// report (flag, id, rows), words BP_VK_STATUS_SET_ROWS.. set_rows.comp's
// (flag, id, its index in ids, rows, the plugin's label of the node).
#define BP_VK_STATUS_SET_ROWS 4

#endif  // BP_SHADERS_VULKAN_OP_CODES_H_
