// Times variants of the tiled kernels' PTX on the launches that `tiled-variants cases` writes,
// side by side in one process, each as a ratio to cuMemcpyDtoDAsync of the same bytes. Build and
// run on a GPU machine (no Rust needed there):
//
//   nvcc -O2 -arch=sm_90 -o harness tools/tiled-variants/harness.cu -lcuda
//   ./harness ROUNDS LABEL:CASES:PTXDIR[:GRID] [LABEL:CASES:PTXDIR[:GRID] ...]
//
// Each configuration names a cases file (from `tiled-variants cases`), a folder of PTX modules
// named `<kernel>.ptx` (from `tiled-variants ptx`, edited or not), and optionally a grid rule:
// 0 or none, the library's (one wave of resident blocks, tiled_grid); N > 0, one wave of at most
// N blocks per multiprocessor; -W, W waves; bB[mT], one wave of at most max(B / tile bytes,
// T / threads, 1) blocks per multiprocessor (tile bytes: elements per tile times the larger
// element size); dN, the library's grid with N bytes of dynamic shared memory per block (for
// PTX edited to declare its tile `.extern .shared`; the function's limit is raised to N, so N may
// exceed 48 KiB); da, the library's grid with the dynamic shared memory that the library gives
// the pipelined kernels (`copy_tiled_a_*`: 4 buffers of the tile rounded up to 128 bytes; their
// limit raised to 64 KiB), none to the others; dm, as da with the largest tile's buffers (16 KiB
// tiles). Without dN, kernels whose PTX declares `.extern .shared` get da's memory. Cases are matched by name across
// configurations.
// A case runs its tiled launch and then those of its rests that the cases file lists (the parts
// of the copy that no whole tile covers, on the tiled kernels too), so that a plan is timed
// whole; the `rst` column counts the rests left to other kernels, which no configuration runs.
// For every case: each configuration's output is checked against the first's (a hash of the
// destination, poisoned before each launch; `MISMATCH` marks a difference; a case with a
// rest left to other kernels leaves that part of the destination as poisoned, so such cases
// compare only where the two configurations launch with the same arguments (the kernels may
// differ); where their arguments and outputs both differ, the case is marked `other plan with
// rests: not compared`), then ROUNDS rounds time every configuration and the memcpy once each, in
// turn, each round starting at the next one (CUDA events, after 2 warm-up rounds); a cell is
// memcpy median / kernel median, with the blocks per multiprocessor that the occupancy
// calculator gives. Sources hold random bits.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>
#include <map>
#include <fstream>
#include <sstream>
#include <algorithm>
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s; cuGetErrorString(r_, &s); fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s); exit(1);} } while (0)

// One launch of a case: the tiled launch, or one of its rests.
struct Launch { std::string kernel; unsigned threads, tiles; std::vector<uint8_t> params; };
struct Case { std::string name, kernel; unsigned threads, tiles; size_t n; int ss, ds, rest; std::vector<uint8_t> params; std::vector<Launch> rests; };
struct Config { int cap = 0; long budget = 0, minthr = 0, dyn = 0; std::string label, dir; std::map<std::string, Case> cases; std::vector<std::string> order; };

__global__ void hashk(const uint32_t* p, size_t words, unsigned long long* out) {
  unsigned long long acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    acc += (unsigned long long)p[i] * (2 * i + 1) ^ (i << 7);
  atomicAdd(out, acc);
}
__global__ void fillk(uint32_t* p, size_t words, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = seed + i * 0x9E3779B97F4A7C15ull; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull; z = (z ^ (z >> 27)) * 0x94D049BB133111EBull; z ^= z >> 31;
    uint32_t w = (uint32_t)z;
    // Random bits with bits 30 and 14 clear, so that no f16 or f32 is a NaN (casts compare
    // bit for bit).
    p[i] = w & 0xBFFFBFFFu;
  }
}

static std::vector<uint8_t> unhex(const std::string& h) { std::vector<uint8_t> v(h.size() / 2); for (size_t i = 0; i < v.size(); i++) v[i] = (uint8_t)strtoul(h.substr(2 * i, 2).c_str(), nullptr, 16); return v; }

int main(int argc, char** argv) {
  if (argc < 3) { fprintf(stderr, "usage: %s ROUNDS LABEL:CASES:PTXDIR[:GRID] ...\n", argv[0]); return 2; }
  int rounds = atoi(argv[1]);
  std::vector<Config> cfgs;
  for (int a = 2; a < argc; a++) {
    std::string s = argv[a]; size_t p1 = s.find(':'), p2 = s.find(':', p1 + 1);
    Config c; c.label = s.substr(0, p1); std::string file = s.substr(p1 + 1, p2 - p1 - 1); c.dir = s.substr(p2 + 1);
    size_t p3 = c.dir.find(':'); if (p3 != std::string::npos) { std::string g = c.dir.substr(p3 + 1);
      if (g == "da") c.dyn = -1;
      else if (g == "dm") c.dyn = -2;
      else if (g[0] == 'd') c.dyn = atol(g.substr(1).c_str());
      else if (g[0] == 'b') { size_t m = g.find('m'); c.budget = atol(g.substr(1, m == std::string::npos ? m : m - 1).c_str()); if (m != std::string::npos) c.minthr = atol(g.substr(m + 1).c_str()); }
      else c.cap = atoi(g.c_str());
      c.dir = c.dir.substr(0, p3); }
    std::ifstream f(file); std::string line;
    while (std::getline(f, line)) {
      std::vector<std::string> t; std::stringstream ss(line); std::string x; while (std::getline(ss, x, '|')) t.push_back(x);
      if (t.size() < 9) continue;
      Case k{t[0], t[1], (unsigned)std::stoul(t[2]), (unsigned)std::stoul(t[3]), std::stoull(t[4]), std::stoi(t[5]), std::stoi(t[6]), std::stoi(t[7]), unhex(t[8]), {}};
      for (size_t i = 9; i + 4 <= t.size(); i += 4)
        k.rests.push_back(Launch{t[i], (unsigned)std::stoul(t[i + 1]), (unsigned)std::stoul(t[i + 2]), unhex(t[i + 3])});
      c.order.push_back(k.name); c.cases[k.name] = k;
    }
    cfgs.push_back(c);
  }
  CK(cuInit(0)); CUdevice dev; CK(cuDeviceGet(&dev, 0)); CUcontext ctx; CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  int sms; CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  size_t maxb = 0; for (auto& c : cfgs) for (auto& kv : c.cases) maxb = std::max(maxb, kv.second.n * (size_t)std::max(kv.second.ss, kv.second.ds));
  maxb = (maxb + 255) / 256 * 256;
  CUdeviceptr src, dst; CK(cuMemAlloc(&src, maxb)); CK(cuMemAlloc(&dst, maxb));
  fillk<<<1024, 256>>>((uint32_t*)src, maxb / 4, 12345);
  unsigned long long* hbuf; cudaMalloc(&hbuf, 8);
  CUstream st; CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  CUevent e0, e1; CK(cuEventCreate(&e0, 0)); CK(cuEventCreate(&e1, 0));
  std::map<std::string, CUfunction> fns;
  std::map<CUfunction, bool> ext;
  auto fn = [&](Config& c, const std::string& k) {
    std::string key = c.dir + "/" + k; auto it = fns.find(key); if (it != fns.end()) return it->second;
    std::ifstream f(key + ".ptx"); std::stringstream b; b << f.rdbuf(); std::string text = b.str();
    if (text.empty()) { fprintf(stderr, "missing %s\n", key.c_str()); exit(1); }
    CUmodule m; CK(cuModuleLoadData(&m, text.c_str())); CUfunction fu; CK(cuModuleGetFunction(&fu, m, k.c_str()));
    if (c.dyn > 0) CK(cuFuncSetAttribute(fu, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)c.dyn));
    ext[fu] = text.find(".extern .shared") != std::string::npos;
    if (c.dyn <= 0 && (ext[fu] || (c.dyn < 0 && k.rfind("copy_tiled_a_", 0) == 0))) CK(cuFuncSetAttribute(fu, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
    int regs, local; cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fu); cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fu);
    printf("# module %s: %d regs, %d local bytes\n", key.c_str(), regs, local);
    fns[key] = fu; return fu;
  };
  auto launch_one = [&](Config& c, const Launch& k, int ss, int ds) {
    CUfunction f = fn(c, k.kernel);
    size_t dyn = c.dyn > 0 ? (size_t)c.dyn : 0;
    if ((c.dyn < 0 && k.kernel.rfind("copy_tiled_a_", 0) == 0) || (c.dyn == 0 && ext[f])) {
      uint32_t vol; memcpy(&vol, &k.params[20], 4);
      // The kernel's unit (`_bN`: N bytes), which is the element size but where the planner
      // moves pairs of 1-byte elements as 2-byte units.
      size_t unit = (size_t)atoi(k.kernel.c_str() + k.kernel.rfind("_b") + 2);
      if (c.dyn == -2) vol = 16384 / unit;
      dyn = 4 * (((size_t)vol * unit + 127) / 128 * 128);
    }
    int per; CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per, f, k.threads, dyn));
    unsigned grid = 0;
    if (c.cap == 0) grid = (unsigned)std::min<uint64_t>(k.tiles, (uint64_t)std::max(per, 1) * sms);
    if (c.cap > 0) { per = std::min(per, c.cap); grid = (unsigned)std::min<uint64_t>(k.tiles, (uint64_t)per * sms); }
    if (c.budget > 0) {
      uint32_t vol; memcpy(&vol, &k.params[20], 4);
      long tb = (long)vol * std::max(ss, ds);
      long cap = std::max<long>(std::max<long>(c.budget / tb, (c.minthr + k.threads - 1) / k.threads), 1);
      per = (int)std::min<long>(std::max(per, 1), cap); grid = (unsigned)std::min<uint64_t>(k.tiles, (uint64_t)per * sms);
    }
    if (c.cap < 0) grid = (unsigned)std::min<uint64_t>(k.tiles, (uint64_t)std::max(per, 1) * sms * (uint64_t)(-c.cap));
    std::vector<uint8_t> p = k.params; uint64_t d, s; memcpy(&d, &p[0], 8); memcpy(&s, &p[8], 8); d += dst; s += src; memcpy(&p[0], &d, 8); memcpy(&p[8], &s, 8);
    void* args[] = {p.data()};
    CK(cuLaunchKernel(f, grid, 1, 1, k.threads, 1, 1, (unsigned)dyn, st, args, nullptr));
    return per;
  };
  // A case's tiled launch, then its listed rests; the blocks per multiprocessor of the first.
  auto launch = [&](Config& c, Case& k) {
    int per = launch_one(c, Launch{k.kernel, k.threads, k.tiles, k.params}, k.ss, k.ds);
    for (auto& r : k.rests) launch_one(c, r, k.ss, k.ds);
    return per;
  };
  auto hash = [&](size_t bytes) { cudaMemsetAsync(hbuf, 0, 8, st); hashk<<<1024, 256, 0, st>>>((const uint32_t*)dst, bytes / 4, hbuf); unsigned long long h; cudaMemcpyAsync(&h, hbuf, 8, cudaMemcpyDeviceToHost, st); cuStreamSynchronize(st); return h; };
  printf("%-34s %-18s %4s %4s", "case", "kernel", "thr", "rst");
  for (auto& c : cfgs) printf(" %10s", c.label.c_str()); printf("  (ratio to memcpy; blocks/SM)\n");
  for (auto& name : cfgs[0].order) {
    Case& k0 = cfgs[0].cases[name];
    size_t db = k0.n * k0.ds; size_t mb = (k0.n * (k0.ss + k0.ds)) / 2;
    // validate
    unsigned long long h0 = 0; bool bad = false, other = false; std::vector<int> per(cfgs.size(), 0);
    for (size_t ci = 0; ci < cfgs.size(); ci++) {
      auto it = cfgs[ci].cases.find(name); if (it == cfgs[ci].cases.end()) continue;
      CK(cuMemsetD8Async(dst, 0xAB, maxb, st)); per[ci] = launch(cfgs[ci], it->second); unsigned long long h = hash(db);
      // Plans that leave rests to other kernels compare only where both cover the same
      // elements: launches of the same arguments (the kernels may differ).
      const Case& k = it->second;
      bool same_plan = k.params == k0.params && k.rests.size() == k0.rests.size();
      for (size_t i = 0; same_plan && i < k.rests.size(); i++) same_plan = k.rests[i].params == k0.rests[i].params;
      bool comparable = (k.rest == 0 && k0.rest == 0) || same_plan;
      if (ci == 0) h0 = h; else if (h != h0) (comparable ? bad : other) = true;
    }
    std::vector<std::vector<float>> t(cfgs.size() + 1);
    for (int r = 0; r < rounds + 2; r++) {
      // Each round starts at another configuration, so that no configuration always runs
      // first or right after the memcpy.
      for (size_t j = 0; j <= cfgs.size(); j++) {
        size_t ci = (j + r) % (cfgs.size() + 1);
        if (ci < cfgs.size() && cfgs[ci].cases.find(name) == cfgs[ci].cases.end()) continue;
        CK(cuEventRecord(e0, st));
        if (ci == cfgs.size()) CK(cuMemcpyDtoDAsync(dst, src, mb, st)); else launch(cfgs[ci], cfgs[ci].cases[name]);
        CK(cuEventRecord(e1, st)); CK(cuEventSynchronize(e1)); float ms; CK(cuEventElapsedTime(&ms, e0, e1));
        if (r >= 2) t[ci].push_back(ms);
      }
    }
    auto med = [](std::vector<float> v) { if (v.empty()) return 0.f; std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    float mm = med(t[cfgs.size()]);
    printf("%-34s %-18s %4u %4d", name.c_str(), k0.kernel.c_str(), k0.threads, k0.rest);
    for (size_t ci = 0; ci < cfgs.size(); ci++) { float m = med(t[ci]); if (m > 0) printf(" %6.3f/%d", mm / m, per[ci]); else printf(" %8s", "-"); }
    printf("%s%s  memcpy %.3f ms\n", bad ? "  MISMATCH" : "", other ? "  (other plan with rests: not compared)" : "", mm);
    fflush(stdout);
  }
  return 0;
}
