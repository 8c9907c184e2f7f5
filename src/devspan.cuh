// devspan.cuh: device-side helpers for CUDA kernels that take devspan views.
//
// `devspan_view<T, N>` has the layout of the Rust struct `devspan::interop::KernelView<N>`
// (what `kernel_view::<N>()` and `with_kernel_view(_mut)` hand out): the address of the element
// at index zero, N extents and N strides in elements (signed). Pass it by value as a kernel
// parameter and index it without offset arithmetic of your own:
//
//   #include "devspan.cuh"   // or prepend devspan::interop::DEVICE_HEADER to the source
//   extern "C" __global__ void scale(devspan_view<float, 2> v, float f) {
//     for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
//          i < v.size(); i += (unsigned long long)gridDim.x * blockDim.x)
//       v[i] *= f;   // element i in row-major (logical) order, at any strides
//   }
#pragma once

template <typename T, int N>
struct devspan_view {
  static_assert(N >= 1, "devspan_view needs at least one axis");
  unsigned long long ptr;
  unsigned long long shape[N];
  long long strides[N];

  // The element at index zero.
  __device__ __forceinline__ T* data() const { return reinterpret_cast<T*>(ptr); }

  // Number of elements (the product of the extents).
  __device__ __forceinline__ unsigned long long size() const {
    unsigned long long n = 1;
#pragma unroll
    for (int k = 0; k < N; ++k) n *= shape[k];
    return n;
  }

  // Offset in elements of the multi-index `index` (each below its extent).
  __device__ __forceinline__ long long offset(const unsigned long long (&index)[N]) const {
    long long o = 0;
#pragma unroll
    for (int k = 0; k < N; ++k) o += (long long)index[k] * strides[k];
    return o;
  }

  // Offset in elements of the `i`-th element in row-major (logical) order, `i < size()`.
  __device__ __forceinline__ long long offset_of_linear(unsigned long long i) const {
    long long o = 0;
#pragma unroll
    for (int k = N - 1; k > 0; --k) {
      const unsigned long long q = i / shape[k];
      o += (long long)(i - q * shape[k]) * strides[k];
      i = q;
    }
    return o + (long long)i * strides[0];
  }

  // The `i`-th element in row-major order.
  __device__ __forceinline__ T& operator[](unsigned long long i) const {
    return data()[offset_of_linear(i)];
  }

  // The element at the multi-index `index`.
  __device__ __forceinline__ T& at(const unsigned long long (&index)[N]) const {
    return data()[offset(index)];
  }
};
