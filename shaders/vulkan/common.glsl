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

float param_f(uint k) { return uintBitsToFloat(pc.p[k]); }

// tanh without overflow for large |x| (e^2x would be inf/inf).
float stable_tanh(float x) {
  float t = exp(-2.0 * abs(x));
  float r = (1.0 - t) / (1.0 + t);
  return x < 0.0 ? -r : r;
}
