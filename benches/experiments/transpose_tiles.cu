// Transpose experiments: out[r*C + c] = in[c*R + r].
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cstring>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

template <typename T, int N> struct V;
template <> struct V<float,1> { typedef float t; };
template <> struct V<float,2> { typedef float2 t; };
template <> struct V<float,4> { typedef float4 t; };

// Tile TS x TS with TS = 32*VEC, block (32, BY); one tile per block. xr: grid.x over row tiles.
template <int VEC, int BY, bool XR>
__global__ void __launch_bounds__(32*BY) tvec(float* __restrict__ out, const float* __restrict__ in, int R, int C) {
  constexpr int TS = 32 * VEC;
  extern __shared__ float sm[];
  const int P = TS + 1;
  int tr = XR ? blockIdx.x : blockIdx.y, tc = XR ? blockIdx.y : blockIdx.x;
  int r0 = tr * TS, c0 = tc * TS;
  int tx = threadIdx.x, ty = threadIdx.y;
  typedef typename V<float,VEC>::t vt;
  vt v[TS / BY];
#pragma unroll
  for (int k = 0; k < TS / BY; k++) {
    int c = c0 + ty + k * BY;
    v[k] = *reinterpret_cast<const vt*>(in + (size_t)c * R + r0 + tx * VEC);
  }
#pragma unroll
  for (int k = 0; k < TS / BY; k++) {
    const float* e = reinterpret_cast<const float*>(&v[k]);
#pragma unroll
    for (int j = 0; j < VEC; j++) sm[(ty + k * BY) * P + tx * VEC + j] = e[j];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < TS / BY; k++) {
    int r = ty + k * BY;
    vt w; float* e = reinterpret_cast<float*>(&w);
#pragma unroll
    for (int j = 0; j < VEC; j++) e[j] = sm[(tx * VEC + j) * P + r];
    *reinterpret_cast<vt*>(out + (size_t)(r0 + r) * C + c0 + tx * VEC) = w;
  }
}

// Scalar tile TS x TS (TS = 32*M), block (32, BY): lanes along r, M loads per row.
template <int M, int BY>
__global__ void __launch_bounds__(32*BY) tscal(float* __restrict__ out, const float* __restrict__ in, int R, int C) {
  constexpr int TS = 32 * M;
  __shared__ float sm[TS][TS + 1];
  int r0 = blockIdx.y * TS, c0 = blockIdx.x * TS;
  int tx = threadIdx.x, ty = threadIdx.y;
  float v[TS / BY][M];
#pragma unroll
  for (int k = 0; k < TS / BY; k++)
#pragma unroll
    for (int m = 0; m < M; m++) v[k][m] = __ldg(in + (size_t)(c0 + ty + k * BY) * R + r0 + tx + 32 * m);
#pragma unroll
  for (int k = 0; k < TS / BY; k++)
#pragma unroll
    for (int m = 0; m < M; m++) sm[ty + k * BY][tx + 32 * m] = v[k][m];
  __syncthreads();
#pragma unroll
  for (int k = 0; k < TS / BY; k++)
#pragma unroll
    for (int m = 0; m < M; m++) out[(size_t)(r0 + ty + k * BY) * C + c0 + tx + 32 * m] = sm[tx + 32 * m][ty + k * BY];
}

// Persistent 32x32 with register prefetch of the next tile.
__global__ void __launch_bounds__(256) tpre(float* __restrict__ out, const float* __restrict__ in, int R, int C) {
  __shared__ float sm[32][33];
  int tx = threadIdx.x, ty = threadIdx.y;
  int nr = R / 32, nc = C / 32, nt = nr * nc;
  int t = blockIdx.x;
  if (t >= nt) return;
  float v[4];
  auto load = [&](int t) { int r0 = (t / nc) * 32, c0 = (t % nc) * 32;
#pragma unroll
    for (int k = 0; k < 4; k++) v[k] = __ldg(in + (size_t)(c0 + ty + 8 * k) * R + r0 + tx); };
  load(t);
  for (;;) {
    int r0 = (t / nc) * 32, c0 = (t % nc) * 32;
#pragma unroll
    for (int k = 0; k < 4; k++) sm[ty + 8 * k][tx] = v[k];
    __syncthreads();
    int tn = t + gridDim.x;
    if (tn < nt) load(tn);
#pragma unroll
    for (int k = 0; k < 4; k++) out[(size_t)(r0 + ty + 8 * k) * C + c0 + tx] = sm[tx][ty + 8 * k];
    __syncthreads();
    t = tn;
    if (t >= nt) break;
  }
}

__global__ void copy4(float4* __restrict__ o, const float4* __restrict__ i, size_t n) {
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) o[k] = i[k];
}

__global__ void fillrand(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)k * 2654435761u ^ seed; x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15;
    p[k] = x;
  }
}

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

template <typename F>
static float timeit(F f) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) f();
  std::vector<float> ms;
  for (int i = 0; i < 15; i++) { CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b)); float m; CK(cudaEventElapsedTime(&m, a, b)); ms.push_back(m); }
  CK(cudaGetLastError());
  return median(ms);
}

int main() {
  int sm; CK(cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0));
  struct Shape { int R, C; };
  Shape shapes[] = {{16384, 16384}, {1048576, 256}, {256, 1048576}};
  for (auto s : shapes) {
    int R = s.R, C = s.C; size_t n = (size_t)R * C, bytes = n * 4;
    float *in, *out, *ref;
    CK(cudaMalloc(&in, bytes)); CK(cudaMalloc(&out, bytes)); CK(cudaMalloc(&ref, bytes));
    fillrand<<<1024, 256>>>((uint32_t*)in, n, 12345 + R);
    CK(cudaDeviceSynchronize());
    float mc = timeit([&] { CK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice)); });
    printf("shape R=%d C=%d: memcpy %.4f ms (%.0f GB/s)\n", R, C, mc, 2.0 * bytes / mc / 1e6);
    auto rep = [&](const char* name, float ms, bool check) {
      bool ok = true;
      if (check) {
        std::vector<float> a(n), b(n);
        CK(cudaMemcpy(a.data(), out, bytes, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), ref, bytes, cudaMemcpyDeviceToHost));
        ok = memcmp(a.data(), b.data(), bytes) == 0;
      }
      printf("  %-28s %.4f ms  ratio %.3f %s\n", name, ms, mc / ms, ok ? "" : "MISMATCH");
    };
    float t = timeit([&] { copy4<<<sm * 8, 256>>>((float4*)out, (const float4*)in, n / 4); });
    rep("copy float4", t, false);
    // reference
    tscal<1, 8><<<dim3(C / 32, R / 32), dim3(32, 8)>>>(ref, in, R, C);
    CK(cudaDeviceSynchronize());
#define RUN(name, launch) { CK(cudaMemset(out, 0xff, bytes)); float t = timeit([&] { launch; }); rep(name, t, true); }
    RUN("scal 32x32 by8", (tscal<1, 8><<<dim3(C / 32, R / 32), dim3(32, 8)>>>(out, in, R, C)));
    RUN("scal 32x32 by4", (tscal<1, 4><<<dim3(C / 32, R / 32), dim3(32, 4)>>>(out, in, R, C)));
    RUN("scal 64x64 by8", (tscal<2, 8><<<dim3(C / 64, R / 64), dim3(32, 8)>>>(out, in, R, C)));
    RUN("scal 64x64 by16", (tscal<2, 16><<<dim3(C / 64, R / 64), dim3(32, 16)>>>(out, in, R, C)));
    {
      auto k = tvec<1, 8, false>; size_t shm = 32 * 33 * 4;
      RUN("vec1 32x32 by8", (k<<<dim3(C / 32, R / 32), dim3(32, 8), shm>>>(out, in, R, C)));
      auto k2 = tvec<1, 8, true>;
      if (R / 32 < 65536 || true) if ((size_t)C / 32 < 65536) RUN("vec1 32x32 by8 xr", (k2<<<dim3(R / 32, C / 32), dim3(32, 8), shm>>>(out, in, R, C)));
    }
    {
      size_t shm = 64 * 65 * 4;
      auto k = tvec<2, 8, false>;
      RUN("vec2 64x64 by8", (k<<<dim3(C / 64, R / 64), dim3(32, 8), shm>>>(out, in, R, C)));
      auto k3 = tvec<2, 16, false>;
      RUN("vec2 64x64 by16", (k3<<<dim3(C / 64, R / 64), dim3(32, 16), shm>>>(out, in, R, C)));
      auto k4 = tvec<2, 4, false>;
      RUN("vec2 64x64 by4", (k4<<<dim3(C / 64, R / 64), dim3(32, 4), shm>>>(out, in, R, C)));
      auto k2 = tvec<2, 8, true>;
      if ((size_t)C / 64 < 65536) RUN("vec2 64x64 by8 xr", (k2<<<dim3(R / 64, C / 64), dim3(32, 8), shm>>>(out, in, R, C)));
    }
    {
      size_t shm = 128 * 129 * 4;
      auto k = tvec<4, 8, false>;
      CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm));
      RUN("vec4 128x128 by8", (k<<<dim3(C / 128, R / 128), dim3(32, 8), shm>>>(out, in, R, C)));
      auto k2 = tvec<4, 16, false>;
      CK(cudaFuncSetAttribute(k2, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm));
      RUN("vec4 128x128 by16", (k2<<<dim3(C / 128, R / 128), dim3(32, 16), shm>>>(out, in, R, C)));
    }
    RUN("prefetch 32x32 8/sm", (tpre<<<sm * 8, dim3(32, 8)>>>(out, in, R, C)));
    RUN("prefetch 32x32 4/sm", (tpre<<<sm * 4, dim3(32, 8)>>>(out, in, R, C)));
    CK(cudaFree(in)); CK(cudaFree(out)); CK(cudaFree(ref));
  }
  return 0;
}
