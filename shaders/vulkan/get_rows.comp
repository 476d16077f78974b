// get_rows.comp: GET_ROWS, out[:, n, i2, i3] = a[:, ids[n, i2, i3], i2, i3],
// one invocation per output element. S_T: a's type (float, float16_t, int;
// with S_BF16, bfloat16 values read as 32-bit words);
// D_T: float, or int for int rows. An id outside [0, R) is never read: the
// first one is recorded in the status buffer (binding 3: flag, id, R) and
// the plugin fails the compute with it.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

#ifdef S_BF16
layout(std430, binding = 0) readonly buffer A { uint a_words[]; };
// A bfloat16 is the top half of an f32: element i is half i & 1 of word i / 2.
float load_a(uint i) { return uintBitsToFloat((a_words[i >> 1] >> ((i & 1u) * 16u)) << 16); }
#define LOAD_A(i) D_T(load_a(i))
#else
layout(std430, binding = 0) readonly buffer A { S_T a[]; };
// Converted as loaded: 16-bit storage allows no f16 local.
#define LOAD_A(i) D_T(a[i])
#endif
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer D { D_T d[]; };
layout(std430, binding = 3) buffer S { uint status[]; };

void main() {
  uvec4 c;
  uint len;
  if (!run_of(flat_invocation(), pc.d_ne, c, len)) return;
  const int id = ids[pc.b_off + offset_of(uvec4(c.y, c.z, c.w, 0), pc.b_nb)];
  const uint rows = pc.a_ne.y;
  if (id < 0 || uint(id) >= rows) {
    if (atomicCompSwap(status[0], 0u, 1u) == 0u) {
      status[1] = uint(id);
      status[2] = rows;
    }
    return;
  }
  const uint ao = pc.a_off + offset_of(uvec4(c.x, uint(id), c.z, c.w), pc.a_nb);
  const uint dof = pc.d_off + offset_of(c, pc.d_nb);
  for (uint k = 0; k < len; ++k) d[dof + k * pc.d_nb.x] = LOAD_A(ao + k * pc.a_nb.x);
}
