// The PTX matmul variants (ptx/matmul.cu): one list read by the kernel source, to instantiate them, and by vk/,
// to launch them. X(name, BM, BN, BK, WM, WN, STAGES, G, TA, TB, F32OUT): a BM x BN block tile of (BM/WM) x (BN/WN)
// warps, each owning a WM x WN tile; K in BK steps through STAGES shared-memory buffers; G > 0: block tiles run in
// groups of G block rows, column by column within a group (operands reread from L2), else row by row; TA: A stored
// (K, M), TB: B stored (N, K); F32OUT: f32 C, else f16. Threads = warps * 32, shared bytes = STAGES*(BM+BN)*BK*2.
// By shape (vk/nvx.cpp) the first variant that fits a product runs it: the order is the preference.
#pragma once
#define ALPHA_PTX_MATMUL_VARIANTS(X)                          \
  X(ptx_128x256k32s3_nn, 128, 256, 32, 64, 64, 3, 0, 0, 0, 0)   \
  X(ptx_128x256k32s4_nn, 128, 256, 32, 64, 64, 4, 0, 0, 0, 0)   \
  X(ptx_128x256k64s3_nn, 128, 256, 64, 64, 64, 3, 0, 0, 0, 0)   \
  X(ptx_256x128k32s3_nn, 256, 128, 32, 64, 64, 3, 0, 0, 0, 0)   \
  X(ptx_256x128k64s3_nn, 256, 128, 64, 64, 64, 3, 0, 0, 0, 0)   \
  X(ptx_128x128k32s4_nn, 128, 128, 32, 64, 64, 4, 0, 0, 0, 0)   \
  X(ptx_128x128k64s3_nn, 128, 128, 64, 64, 64, 3, 0, 0, 0, 0)   \
  X(ptx_128x128k32s3_nn, 128, 128, 32, 64, 64, 3, 0, 0, 0, 0)   \
  X(ptx_128x128k32s3w8_nn, 128, 128, 32, 64, 32, 3, 0, 0, 0, 0) \
  X(ptx_128x256k32s3g8_nn, 128, 256, 32, 64, 64, 3, 8, 0, 0, 0) \
  X(ptx_128x128k32s4g8_nn, 128, 128, 32, 64, 64, 4, 8, 0, 0, 0) \
  X(ptx_128x256k32s3_nt, 128, 256, 32, 64, 64, 3, 0, 0, 1, 0)   \
  X(ptx_128x256k32s3_tn, 128, 256, 32, 64, 64, 3, 0, 1, 0, 0)   \
  X(ptx_128x256k32s3_tn_f32out, 128, 256, 32, 64, 64, 3, 0, 1, 0, 1)

// Hopper's wgmma tiles (ptx/matmul_sm90.cu, sm_90a): the same columns; WM = 64 rows per warpgroup of 128 threads,
// WN = BN (256 or 128: one m64nBNk16 per k16 step); STAGES 2 (each wgmma group waited for) or more (one in flight).
// The 64 x 128 tiles of 2 stages take 48 KiB, the most a kernel may have without the CUDA opt-in the Vulkan launch
// cannot make, should the driver hold launches to it. The TN f32-out tiles (weight gradients, K split over the grid's
// layers by vk/nvx.cpp) are taken by shape only under ALPHA_VK_PTX_TN=1 until the GPU suite has run them.
#define ALPHA_PTX_MATMUL_SM90_VARIANTS(X)                            \
  X(ptx90_128x256k64s4g8_nn, 128, 256, 64, 64, 256, 4, 8, 0, 0, 0)  \
  X(ptx90_128x256k64s4_nn, 128, 256, 64, 64, 256, 4, 0, 0, 0, 0)    \
  X(ptx90_128x256k64s3_nn, 128, 256, 64, 64, 256, 3, 0, 0, 0, 0)    \
  X(ptx90_128x256k64s4_nt, 128, 256, 64, 64, 256, 4, 0, 0, 1, 0)    \
  X(ptx90_128x128k64s6_nn, 128, 128, 64, 64, 128, 6, 0, 0, 0, 0)    \
  X(ptx90_128x128k64s6_nt, 128, 128, 64, 64, 128, 6, 0, 0, 1, 0)    \
  X(ptx90_128x128k64s4_nt, 128, 128, 64, 64, 128, 4, 0, 0, 1, 0)    \
  X(ptx90_128x128k64s3_nn, 128, 128, 64, 64, 128, 3, 0, 0, 0, 0)    \
  X(ptx90_128x128k64s3_nt, 128, 128, 64, 64, 128, 3, 0, 0, 1, 0)    \
  X(ptx90_128x128k64s2_nn, 128, 128, 64, 64, 128, 2, 0, 0, 0, 0)    \
  X(ptx90_128x128k64s2_nt, 128, 128, 64, 64, 128, 2, 0, 0, 1, 0)    \
  X(ptx90_64x128k64s2_nn, 64, 128, 64, 64, 128, 2, 0, 0, 0, 0)      \
  X(ptx90_64x128k64s2_nt, 64, 128, 64, 64, 128, 2, 0, 0, 1, 0)      \
  X(ptx90_128x256k64s4_nn_f32out, 128, 256, 64, 64, 256, 4, 0, 0, 0, 1)  \
  X(ptx90_128x256k64s4_tn_f32out, 128, 256, 64, 64, 256, 4, 0, 1, 0, 1)  \
  X(ptx90_128x128k64s6_tn_f32out, 128, 128, 64, 64, 128, 6, 0, 1, 0, 1)  \
  X(ptx90_64x128k64s2_tn_f32out, 64, 128, 64, 64, 128, 2, 0, 1, 0, 1)
