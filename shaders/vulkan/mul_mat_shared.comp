// mul_mat_shared.comp: MUL_MAT for GPUs, K % 4 == 0, the operands read in
// place (a's and b's rows are K-contiguous) through texel views. A workgroup
// computes a BM x BN block of the output: each step stages a BK-deep slice
// of a (BM rows) and of b (BN rows) in shared memory, k-major, and each of
// its LOCAL invocations accumulates TM x TN outputs from it, so every value
// fetched from memory feeds BN (or BM) products instead of one. The next
// slice is fetched into registers while the current one is multiplied, so
// the memory latency overlaps the arithmetic.
//
// On CPU-type drivers (lavapipe) barriers and shared memory are what is
// slow (docs/plugins/vulkan.md), so the plugin uses mul_mat_nt there; this shader
// runs on GPU-type devices (plan_matmul.cpp, shared_tile_for).
//
// Invocation (tx, ty) owns rows m = (j * TX + tx) * 4 + i and columns
// n = (j * TY + ty) * 4 + i (j < TM / 4 or TN / 4, i < 4): consecutive
// invocations read consecutive vec4s of shared memory and store consecutive
// floats of the output.
//
// Push constants as mul_mat_nt's: a_nb / b_nb in texels, a_ne.z/w a's batch
// counts, d_nb in floats, d_ne = (M, N, B2, B3), p.x = K / 4.
//
// With BP_QTYPE (the _q8_0, ... variants) a is quantized, read as words
// through an R32UI view (a_off, a_nb in bytes): its blocks are decoded
// (quant.glsl) as the slice is fetched, so shared memory holds f32 values
// as for f32 weights. Each load slot keeps the row it started on and moves
// BK values along it per step, so it keeps the scale and min of the group
// it decoded last (bp_q_fetch4_keep): a group of 32 values (16 for Q6_K)
// serves 32 / BK steps with one decoding of its scale.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = LOCAL) in;

#ifdef BP_QTYPE
#define BP_Q_TEXEL 1
layout(binding = 0) uniform usamplerBuffer qa4;
#include "quant.glsl"
// Texel kq (values 4 kq..4 kq + 3) of the row at |row|.
#define FETCH_A(l, row, kq) bp_q_fetch4_keep(row, (kq) * 4u, a_group[l], a_scale[l], a_min[l])
#else
layout(binding = 0) uniform samplerBuffer a;
#define FETCH_A(l, row, kq) texelFetch(a, int((row) + (kq)))
#endif
layout(binding = 1) uniform samplerBuffer b;
#define FETCH_B(row, kq) texelFetch(b, int((row) + (kq)))
layout(std430, binding = 3) writeonly buffer D { float d[]; };

#if (BM / TM) * (BN / TN) != LOCAL || (BM * BK / 4) % LOCAL != 0 || (BN * BK / 4) % LOCAL != 0 || TM % 4 != 0 || \
    TN % 4 != 0
#error "mul_mat_shared: the invocations must tile the block and share its loads evenly"
#endif
const uint TX = BM / TM, TY = BN / TN;  // invocations along m and n
const uint KQ = BK / 4;                 // texels per staged row
const uint A_LOADS = BM * KQ / LOCAL, B_LOADS = BN * KQ / LOCAL;

// k-major: slice row k holds BM (BN) consecutive values of m (n).
shared vec4 as4[BK * BM / 4];
shared vec4 bs4[BK * BN / 4];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint tx = lid % TX, ty = lid / TX;
  const uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN;
  const uint i2 = gl_WorkGroupID.z % pc.d_ne.z, i3 = gl_WorkGroupID.z / pc.d_ne.z;
  const uint m_len = pc.d_ne.x, n_len = pc.d_ne.y, kt_len = pc.p.x;
  const uint a2 = i2 / (pc.d_ne.z / pc.a_ne.z), a3 = i3 / (pc.d_ne.w / pc.a_ne.w);
  const uint abase = pc.a_off + a2 * pc.a_nb.z + a3 * pc.a_nb.w;
  const uint bbase = pc.b_off + i2 * pc.b_nb.z + i3 * pc.b_nb.w;

  // Load t of a slice: row t % BM (consecutive invocations, consecutive
  // rows: the shared stores below hit distinct banks), texel t / BM of it.
  // Rows past the edge read a clamped one (not stored); texels past K read
  // as zero.
  uint arow[A_LOADS], brow[B_LOADS];
  [[unroll]] for (uint l = 0; l < A_LOADS; ++l) {
    const uint t = lid + l * LOCAL;
    arow[l] = abase + min(m0 + t % BM, m_len - 1) * pc.a_nb.y;
  }
  [[unroll]] for (uint l = 0; l < B_LOADS; ++l) {
    const uint t = lid + l * LOCAL;
    brow[l] = bbase + min(n0 + t % BN, n_len - 1) * pc.b_nb.y;
  }
  vec4 anext[A_LOADS], bnext[B_LOADS];
#ifdef BP_QTYPE
  uint a_group[A_LOADS];  // bp_q_fetch4_keep's group, scale and min per load slot
  float a_scale[A_LOADS], a_min[A_LOADS];
  [[unroll]] for (uint l = 0; l < A_LOADS; ++l) a_group[l] = ~0u;
#endif
  [[unroll]] for (uint l = 0; l < A_LOADS; ++l) {
    const uint kq = (lid + l * LOCAL) / BM;
    anext[l] = kq < kt_len ? FETCH_A(l, arow[l], kq) : vec4(0.0);
  }
  [[unroll]] for (uint l = 0; l < B_LOADS; ++l) {
    const uint kq = (lid + l * LOCAL) / BN;
    bnext[l] = kq < kt_len ? FETCH_B(brow[l], kq) : vec4(0.0);
  }

  float acc[TM][TN];
  [[unroll]] for (uint r = 0; r < TM; ++r)[[unroll]] for (uint c = 0; c < TN; ++c) acc[r][c] = 0.0;

  for (uint k0 = 0; k0 < kt_len; k0 += KQ) {
    // The fetched texel holds 4 values of k for one row: it goes to 4 slice
    // rows, one float each.
    [[unroll]] for (uint l = 0; l < A_LOADS; ++l) {
      const uint t = lid + l * LOCAL, row = t % BM, kq = t / BM;
      [[unroll]] for (uint c = 0; c < 4; ++c) as4[((kq * 4 + c) * BM + row) / 4][row % 4] = anext[l][c];
    }
    [[unroll]] for (uint l = 0; l < B_LOADS; ++l) {
      const uint t = lid + l * LOCAL, row = t % BN, kq = t / BN;
      [[unroll]] for (uint c = 0; c < 4; ++c) bs4[((kq * 4 + c) * BN + row) / 4][row % 4] = bnext[l][c];
    }
    barrier();
    // The next slice, fetched while this one is multiplied.
    const uint k1 = k0 + KQ;
    if (k1 < kt_len) {
      [[unroll]] for (uint l = 0; l < A_LOADS; ++l) {
        const uint kq = k1 + (lid + l * LOCAL) / BM;
        anext[l] = kq < kt_len ? FETCH_A(l, arow[l], kq) : vec4(0.0);
      }
      [[unroll]] for (uint l = 0; l < B_LOADS; ++l) {
        const uint kq = k1 + (lid + l * LOCAL) / BN;
        bnext[l] = kq < kt_len ? FETCH_B(brow[l], kq) : vec4(0.0);
      }
    }
    [[unroll]] for (uint k = 0; k < BK; ++k) {
      vec4 av[TM / 4], bv[TN / 4];
      [[unroll]] for (uint j = 0; j < TM / 4; ++j) av[j] = as4[k * (BM / 4) + j * TX + tx];
      [[unroll]] for (uint j = 0; j < TN / 4; ++j) bv[j] = bs4[k * (BN / 4) + j * TY + ty];
      [[unroll]] for (uint r = 0; r < TM; ++r)[[unroll]] for (uint c = 0; c < TN; ++c) acc[r][c] +=
          av[r / 4][r % 4] * bv[c / 4][c % 4];
    }
    barrier();
  }

  const uint dbase = pc.d_off + i2 * pc.d_nb.z + i3 * pc.d_nb.w;
  [[unroll]] for (uint c = 0; c < TN; ++c) {
    const uint n = n0 + ((c / 4) * TY + ty) * 4 + c % 4;
    if (n >= n_len) continue;
    [[unroll]] for (uint r = 0; r < TM; ++r) {
      const uint m = m0 + ((r / 4) * TX + tx) * 4 + r % 4;
      if (m < m_len) d[dbase + n * pc.d_nb.y + m * pc.d_nb.x] = acc[r][c];
    }
  }
}
