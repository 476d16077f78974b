// mul_mat_coopmat.comp: MUL_MAT on cooperative matrices (VK_NV_cooperative_
// matrix: a subgroup multiplies 16 x 16 f16 tiles into f32 on the tensor
// cores), for the products mul_mat_shared.comp serves (coopmat=true; the
// plugin checks the device has the extension, 16 x 16 x 16 f16 -> f32 tiles
// and subgroups of 32). The same operands, bindings and push constants as
// mul_mat_shared: a (f32 or f16 through a texel view, or with BP_QTYPE a
// block type decoded from an R32UI view) and b read in place, d an SSBO.
//
// A workgroup of 256 invocations (8 subgroups) computes a 64 x 64 block of
// the output. Each step stages a 32-deep slice of a (64 rows, row-major
// [m][k]) and of b (64 columns, [n][k]: the K x N tile column-major) in
// shared memory as f16, a's blocks decoded as they are fetched; subgroup s
// then multiplies rows 16 (s % 4) .. + 15 by columns 32 (s / 4) .. + 31,
// two 16 x 16 accumulators, two 16-deep products per slice. The block goes
// out through shared memory, column-major as d is, so edge blocks store only
// what lies inside M and N. b is rounded to f16 (a f16 weight, or a decoded
// block value, is exact there; an f32 weight is rounded too): the products
// carry f16's 11-bit significands, as llama.cpp's do on the same hardware.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"

layout(local_size_x = 256) in;

#ifdef BP_QTYPE
#define BP_Q_TEXEL 1
layout(binding = 0) uniform usamplerBuffer qa4;
#include "quant.glsl"
// Texel kq (values 4 kq..4 kq + 3) of the row at |row|.
#define FETCH_A(row, kq) bp_q_fetch4(row, (kq) * 4u)
#else
layout(binding = 0) uniform samplerBuffer a;
#define FETCH_A(row, kq) texelFetch(a, int((row) + (kq)))
#endif
layout(binding = 1) uniform samplerBuffer b;
#define FETCH_B(row, kq) texelFetch(b, int((row) + (kq)))
layout(std430, binding = 3) writeonly buffer D { float d[]; };

const uint LOCAL = 256, BM = 64, BN = 64, BK = 32, KQ = BK / 4;
const uint A_LOADS = BM * KQ / LOCAL, B_LOADS = BN * KQ / LOCAL;

shared float16_t a_tile[BM * BK];  // [m][k]
shared float16_t b_tile[BN * BK];  // [n][k]
shared float c_tile[BM * BN];      // [n][m]

void main() {
  const uint lid = gl_LocalInvocationID.x, sg = gl_SubgroupID;
  const uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN;
  const uint i2 = gl_WorkGroupID.z % pc.d_ne.z, i3 = gl_WorkGroupID.z / pc.d_ne.z;
  const uint m_len = pc.d_ne.x, n_len = pc.d_ne.y, kt_len = pc.p.x;
  const uint a2 = i2 / (pc.d_ne.z / pc.a_ne.z), a3 = i3 / (pc.d_ne.w / pc.a_ne.w);
  const uint abase = pc.a_off + a2 * pc.a_nb.z + a3 * pc.a_nb.w;
  const uint bbase = pc.b_off + i2 * pc.b_nb.z + i3 * pc.b_nb.w;

  // Load t of a slice: row t % BM, texel t / BM of it. Rows past the edge
  // read a clamped one (not stored); texels past K read as zero.
  uint arow[A_LOADS], brow[B_LOADS];
  [[unroll]] for (uint l = 0; l < A_LOADS; ++l)
    arow[l] = abase + min(m0 + (lid + l * LOCAL) % BM, m_len - 1) * pc.a_nb.y;
  [[unroll]] for (uint l = 0; l < B_LOADS; ++l)
    brow[l] = bbase + min(n0 + (lid + l * LOCAL) % BN, n_len - 1) * pc.b_nb.y;

  const uint tm = (sg % 4) * 16, tn = (sg / 4) * 32;  // this subgroup's rows and columns of the block
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc0 = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc1 = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  for (uint k0 = 0; k0 < kt_len; k0 += KQ) {
    [[unroll]] for (uint l = 0; l < A_LOADS; ++l) {
      const uint t = lid + l * LOCAL, row = t % BM, kq = t / BM;
      const vec4 v = k0 + kq < kt_len ? FETCH_A(arow[l], k0 + kq) : vec4(0.0);
      [[unroll]] for (uint c = 0; c < 4; ++c) a_tile[row * BK + kq * 4 + c] = float16_t(v[c]);
    }
    [[unroll]] for (uint l = 0; l < B_LOADS; ++l) {
      const uint t = lid + l * LOCAL, col = t % BN, kq = t / BN;
      const vec4 v = k0 + kq < kt_len ? FETCH_B(brow[l], k0 + kq) : vec4(0.0);
      [[unroll]] for (uint c = 0; c < 4; ++c) b_tile[col * BK + kq * 4 + c] = float16_t(v[c]);
    }
    barrier();
    [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ma, mb0, mb1;
      coopMatLoadNV(ma, a_tile, tm * BK + kk, BK, false);
      coopMatLoadNV(mb0, b_tile, tn * BK + kk, BK, true);
      coopMatLoadNV(mb1, b_tile, (tn + 16) * BK + kk, BK, true);
      acc0 = coopMatMulAddNV(ma, mb0, acc0);
      acc1 = coopMatMulAddNV(ma, mb1, acc1);
    }
    barrier();  // the slice is rewritten by the next step
  }
  coopMatStoreNV(acc0, c_tile, tn * BM + tm, BM, true);
  coopMatStoreNV(acc1, c_tile, (tn + 16) * BM + tm, BM, true);
  barrier();
  const uint dbase = pc.d_off + i2 * pc.d_nb.z + i3 * pc.d_nb.w;
  for (uint e = lid; e < BM * BN; e += LOCAL) {
    const uint m = m0 + e % BM, n = n0 + e / BM;
    if (m < m_len && n < n_len) d[dbase + n * pc.d_nb.y + m * pc.d_nb.x] = c_tile[e];
  }
}
