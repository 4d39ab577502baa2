// Helpers shared by the compute shaders. Dispatch grids are 2-D when a 1-D grid would exceed the
// 65535-group limit, so linear ids fold in gl_WorkGroupID.y.
#ifndef ALPHA_COMMON_GLSL
#define ALPHA_COMMON_GLSL

// Linear invocation index over a (x, y) grid of 1-D workgroups.
uint linear_id() {
  return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}
// Linear workgroup index (row kernels: one workgroup per row).
uint linear_group() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

#endif
