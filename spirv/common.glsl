// Helpers shared by the 1-D compute shaders (all but matmul). Dispatch grids are 2-D when a 1-D grid would
// exceed the 65535-group limit, so linear ids fold in gl_WorkGroupID.y.
#ifndef ALPHA_COMMON_GLSL
#define ALPHA_COMMON_GLSL

// Workgroup size: specialization constant 0 (vk/ always sets it). Kernels use WG, never gl_WorkGroupSize:
// glslang folds gl_WorkGroupSize.x to the declared default even with local_size_x_id, which made folded
// grids index with a stride of NumWorkGroups.x * 1 (elements past 65535 * (WG + 1) were never written).
layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

// Linear invocation index over a (x, y) grid of 1-D workgroups.
uint linear_id() { return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG; }
// Linear workgroup index (row kernels: one workgroup per row).
uint linear_group() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

#endif
