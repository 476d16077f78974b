// common.glsl: what every Backplane compute shader shares: the push-constant
// block (one layout for all shaders so the C++ side fills one struct), index
// helpers and the op-independent math.
//
// Strides and offsets are in elements of the binding they index (the plugin
// binds each tensor's byte range and converts). Element offsets let the
// plugin bind whole buffers or aligned windows and never create a descriptor
// per tensor.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : enable

layout(push_constant) uniform Params {
  uvec4 d_ne;  // destination (or the op's output) shape
  uvec4 d_nb;  // destination strides
  uvec4 a_ne;  // src0
  uvec4 a_nb;
  uvec4 b_ne;  // src1
  uvec4 b_nb;
  uint d_off;
  uint a_off;
  uint b_off;
  uint n;      // work items (elements, rows or pairs: the shader says)
  uvec4 p;     // op parameters, floats bit-cast
} pc;

// A flat invocation index over a 2-D dispatch (x is capped at 65535 groups).
uint flat_invocation() {
  return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}
uint flat_workgroup() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

// Row-major coordinates (dim 0 fastest) of flat element |i| of shape |ne|.
uvec4 coords_of(uint i, uvec4 ne) {
  uvec4 c;
  c.x = i % ne.x;
  i /= ne.x;
  c.y = i % ne.y;
  i /= ne.y;
  c.z = i % ne.z;
  c.w = i / ne.z;
  return c;
}
uint offset_of(uvec4 c, uvec4 nb) { return c.x * nb.x + c.y * nb.y + c.z * nb.z + c.w * nb.w; }

// Elementwise shaders on any layout give each invocation a run of up to RUN
// elements along dim 0: coords_of's integer divisions (emulated lane by
// lane on CPU drivers) are paid once per run, not once per element. The
// plugin dispatches ceil(ne.x / RUN) * rows invocations (dispatch.cpp, runs_of).
const uint RUN = 8;

// The first element of invocation |i|'s run of shape |ne|, and its length;
// false past the end.
bool run_of(uint i, uvec4 ne, out uvec4 c, out uint len) {
  const uint runs = (ne.x + RUN - 1) / RUN;
  c = coords_of(i, uvec4(runs, ne.y, ne.z, ne.w));
  c.x *= RUN;
  len = min(RUN, ne.x - c.x);
  return c.w < ne.w;
}

float param_f(uint k) { return uintBitsToFloat(pc.p[k]); }

// tanh without overflow for large |x| (e^2x would be inf/inf).
// Division over the whole float range. Vulkan bounds the error of x / y only
// for |y| in [2^-126, 2^126], and a GPU that computes x * (1 / y) flushes 1 / y
// to zero past that: inf / 2^127 became nan and -88 / e^88 became -0 on an
// NVIDIA H200. Scaling both operands by 1/4 is exact and brings y back in range.
const float DIV_SAFE_MAX = 8.50705917e37;  // 2^126
float full_range_div(float x, float y) { return abs(y) > DIV_SAFE_MAX ? (x * 0.25) / (y * 0.25) : x / y; }
vec4 full_range_div(vec4 x, vec4 y) {
  return mix(x / y, (x * 0.25) / (y * 0.25), greaterThan(abs(y), vec4(DIV_SAFE_MAX)));
}

// SILU's one formula, for unary.comp and the epilogue of mul_mat_nt.comp.
float silu(float x) { return full_range_div(x, 1.0 + exp(-x)); }

float stable_tanh(float x) {
  float t = exp(-2.0 * abs(x));
  float r = (1.0 - t) / (1.0 + t);
  return x < 0.0 ? -r : r;
}
