// The dot layout's partial sums, pasted into generated dot kernels (Emitter::dot_tree_sum) and
// compiled into the stand-in interpreter (codegen/device/standin.cu): both add in this one
// order, so their results are the same bits. Needs common.cuh and, for k_dsum, dsum.cuh before.
KD float k_shfl_down(float a, int s) { return __shfl_down_sync(0xffffffffu, a, s); }
KD double k_shfl_down(double a, int s) { return __shfl_down_sync(0xffffffffu, a, s); }
// A column's partial sums in a warp (its 32 / bx rows), by shuffles, ty + half the rows first;
// the warp's sum goes to slot warp * bx + tx.
template <class A> KD void k_warp_sum(A* sums, int bx, int tx, A acc) {
  for (int o = 16; o >= bx; o >>= 1) acc += k_shfl_down(acc, o);
  if ((threadIdx.x & 31) < (unsigned)bx) sums[(threadIdx.x >> 5) * bx + tx] = acc;
}
// The block's sum of column tx from its warps' slots (w + 4, w + 2, w + 1 for 8 warps), into
// slot tx; after a barrier that follows every warp's k_warp_sum.
template <int kWarps, class A> KD void k_warps_sum(A* sums, int bx, int tx) {
  A w[kWarps];
  for (int i = 0; i < kWarps; ++i) w[i] = sums[i * bx + tx];
  for (int s = kWarps / 2; s > 0; s /= 2)
    for (int i = 0; i < s; ++i) w[i] += w[i + s];
  sums[tx] = w[0];
}
