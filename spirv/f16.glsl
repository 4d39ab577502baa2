// Storage element type for the f16 variants (-DF16): buffers hold float16_t, all math stays f32.
// Kernels declare float buffers as ST, read with float(v) and write with ST(v); without F16 both are no-ops.
// IN_F16 alone (sum.comp) makes only the input f16; U16 (copy.comp) moves 16-bit words. Include right after
// #version. Only 16-bit *storage* is needed (no Float16/Int16 arithmetic capability): values convert on load/store.
#ifndef ALPHA_F16_GLSL
#define ALPHA_F16_GLSL
#if defined(F16) || defined(IN_F16) || defined(U16)
#extension GL_EXT_shader_16bit_storage : require
#endif
#ifdef F16
#define ST float16_t
#else
#define ST float
#endif
#endif
