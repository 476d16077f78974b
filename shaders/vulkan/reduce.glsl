// reduce.glsl: workgroup-wide sums and maxima for the row shaders.
//
// A workgroup is sized (local_size_x_id = 0) by the plugin: one subgroup on
// devices that run a workgroup as one subgroup (lavapipe), where MULTI is
// false and the shared-memory step, with its barrier(), is dead code removed
// at specialization (a barrier turns a lavapipe shader into coroutines).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool MULTI = true;

shared float red_f[64];
shared uint red_u[64];

float wg_sum(float v) {
  v = subgroupAdd(v);
  if (MULTI) {
    barrier();
    if (subgroupElect()) red_f[gl_SubgroupID] = v;
    barrier();
    v = 0.0;
    for (uint s = 0; s < gl_NumSubgroups; ++s) v += red_f[s];
  }
  return v;
}

float wg_max(float v) {
  v = subgroupMax(v);
  if (MULTI) {
    barrier();
    if (subgroupElect()) red_f[gl_SubgroupID] = v;
    barrier();
    v = red_f[0];
    for (uint s = 1; s < gl_NumSubgroups; ++s) v = max(v, red_f[s]);
  }
  return v;
}

uint wg_min_u(uint v) {
  v = subgroupMin(v);
  if (MULTI) {
    barrier();
    if (subgroupElect()) red_u[gl_SubgroupID] = v;
    barrier();
    v = red_u[0];
    for (uint s = 1; s < gl_NumSubgroups; ++s) v = min(v, red_u[s]);
  }
  return v;
}
