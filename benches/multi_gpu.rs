//! Two-GPU bench: copies between devices and NCCL send/recv of strided views.
//!
//! `cargo bench --bench multi_gpu` (needs two CUDA GPUs; with fewer it says so and exits 0,
//! printing no rows).
//!
//! Rows, all on 1 GiB of f32 moved from one device to the other (both directions):
//! - `cross`: `dst.assign(&src)` with the destination standard-layout on the other device and
//!   the source contiguous, transposed (`.t()`) and every second column (`[:, ::2]` of a
//!   (16384, 32768) array), on the path devspan picks and on the staged path forced. Each is
//!   timed with CUDA events on the destination's stream and divided into `cuMemcpyPeerAsync` of
//!   the same bytes on the same stream, timed right after (`ratio`; higher is better, 1.0 is
//!   the driver's own peer copy).
//! - `nccl`: one send from rank 0 (device 0) and the matching receive on rank 1 (device 1), in
//!   one group, of a contiguous view and of a transposed one (packed on device 0 first) into a
//!   contiguous destination, and of a contiguous source into a transposed destination
//!   (unpacked on device 1). Timed by the host around the group and both devices'
//!   synchronisation (the two devices' events cannot be compared), median of the runs; the
//!   ratio divides the contiguous send/recv's time by the row's.
//!
//! First it prints what `CU_POINTER_ATTRIBUTE_ACCESS_FLAGS` reports, in device 0's context,
//! for device-1 memory from `cuMemAlloc` and from the stream-ordered pool, before and after the
//! first copy between the devices (which enables peer access and grants the pool's access).

mod common;

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaStream;
use cudarc::driver::sys;
use devspan::internals::{CrossPath, force_cross_device};
use devspan::{DeviceArray, DeviceView};
use ndarray::{Ix2, s};

use common::{median, time_events};

const N: usize = 16384; // 16384 x 16384 f32 = 1 GiB
const REPS: usize = 15;
const WARMUP: usize = 3;

/// The value the bench's sources hold at `(i, j)`: distinct along both axes over a 2048 x 4096
/// period, never zero, exact in f32.
fn value(i: usize, j: usize) -> f32 {
    ((i % 2048) * 4096 + j % 4096 + 1) as f32
}

/// A device array of `shape` on `stream`'s device holding [`value`].
fn filled(stream: &Arc<CudaStream>, shape: (usize, usize)) -> DeviceArray<f32, Ix2> {
    let host = ndarray::Array2::from_shape_fn(shape, |(i, j)| value(i, j));
    DeviceArray::from_host(stream, &host).unwrap()
}

/// Checks `got` (a standard-layout destination) against `want` at a grid of points.
fn check(got: &ndarray::Array2<f32>, want: impl Fn(usize, usize) -> f32, what: &str) {
    let (r, c) = got.dim();
    for i in (0..r).step_by(r / 61 + 1).chain([r - 1]) {
        for j in (0..c).step_by(c / 67 + 1).chain([c - 1]) {
            assert_eq!(got[(i, j)], want(i, j), "{what} at ({i}, {j})");
        }
    }
}

/// `CU_POINTER_ATTRIBUTE_ACCESS_FLAGS` of `ptr` as the current context sees it.
fn access_flags(ptr: u64) -> String {
    let mut flags: u32 = 0;
    // SAFETY: the attribute is a 32-bit value written to `flags`; `ptr` is live device memory.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&raw mut flags).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_ACCESS_FLAGS,
            ptr,
        )
    };
    if r == sys::CUresult::CUDA_SUCCESS {
        format!(
            "{flags} ({})",
            match flags {
                0 => "none",
                1 => "read",
                3 => "read-write",
                _ => "?",
            }
        )
    } else {
        format!("error {r:?}")
    }
}

fn report_access(s0: &Arc<CudaStream>, s1: &Arc<CudaStream>, when: &str) {
    static PLAIN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let plain = *PLAIN.get_or_init(|| {
        s1.context().bind_to_thread().unwrap();
        // SAFETY: a plain allocation of 4 KiB on device 1, never freed (the process ends).
        unsafe { cudarc::driver::result::malloc_sync(4096) }.unwrap()
    });
    let pooled = DeviceArray::<f32, _>::zeros(s1, 1024).unwrap();
    s1.synchronize().unwrap();
    s0.context().bind_to_thread().unwrap();
    println!(
        "access flags in device 0's context, {when}: cuMemAlloc memory of device 1: {}; pool memory of device 1: {}",
        access_flags(plain),
        access_flags(devspan::interop::cuda_slice_address(pooled.as_cuda_slice())),
    );
}

struct Rows {
    lines: Vec<(String, f64)>,
}

impl Rows {
    fn push(&mut self, group: &str, name: &str, ms: f64, reference_ms: f64, against: &str) {
        let gbs = (1usize << 30) as f64 / ms / 1e6;
        let ratio = reference_ms / ms;
        println!(
            "{group:<6} {name:<46} {ms:>8.3} ms {gbs:>7.1} GB/s  ratio {ratio:.3} (against {against} {reference_ms:.3} ms)"
        );
        self.lines.push((format!("{group} {name}"), ratio));
    }
}

/// Median ms of `cuMemcpyPeerAsync` of 1 GiB from `src` (on `from`'s device) to `dst` (on
/// `to`'s), on `to`.
fn peer_memcpy_ms(to: &Arc<CudaStream>, dst: u64, from: &Arc<CudaStream>, src: u64) -> f64 {
    to.context().bind_to_thread().unwrap();
    time_events(to, WARMUP, REPS, || {
        // SAFETY: both ranges hold 1 GiB of live device memory; the copy is stream-ordered on
        // `to` and nothing else uses the memory meanwhile.
        let r = unsafe {
            sys::cuMemcpyPeerAsync(
                dst,
                to.context().cu_ctx(),
                src,
                from.context().cu_ctx(),
                1 << 30,
                to.cu_stream(),
            )
        };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    })
}

fn cross(rows: &mut Rows, from: &Arc<CudaStream>, to: &Arc<CudaStream>) {
    let (a, b) = (from.context().ordinal(), to.context().ordinal());
    let square = filled(from, (N, N));
    let wide = filled(from, (N, 2 * N));
    let mut dst = DeviceArray::<f32, _>::zeros(to, (N, N)).unwrap();
    from.synchronize().unwrap();
    let dptr = devspan::interop::cuda_slice_address(dst.as_cuda_slice());
    let sptr = devspan::interop::cuda_slice_address(square.as_cuda_slice());
    let sources: [(&str, DeviceView<'_, f32, Ix2>); 3] = [
        ("contiguous", square.view()),
        ("transposed", square.t()),
        ("[:, ::2]", wide.slice(s![.., ..;2])),
    ];
    for (name, src) in &sources {
        for forced in [None, Some(CrossPath::Staged)] {
            let _f = forced.map(force_cross_device);
            // Cleared first, so that the check below sees this path's writes.
            dst.fill_on(to, 0.0).unwrap();
            let mut view = dst.view_mut();
            let ms = time_events(to, WARMUP, REPS, || view.assign_on(to, src).unwrap());
            let want = |i: usize, j: usize| -> f32 {
                match *name {
                    "transposed" => value(j, i),
                    "[:, ::2]" => value(i, 2 * j),
                    _ => value(i, j),
                }
            };
            check(&dst.to_host().unwrap(), want, name);
            let reference = peer_memcpy_ms(to, dptr, from, sptr);
            let label = format!(
                "{a}->{b} {name}{}",
                if forced.is_some() { " staged" } else { "" }
            );
            rows.push("cross", &label, ms, reference, "cuMemcpyPeerAsync");
        }
    }
}

fn nccl_rows(rows: &mut Rows, s0: &Arc<CudaStream>, s1: &Arc<CudaStream>) {
    use devspan::nccl::{Communicator, Group};
    if !devspan::nccl::available() {
        println!("nccl: skipped: libnccl not found (DEVSPAN_NCCL_LIB, libnccl.so.2, libnccl.so)");
        return;
    }
    println!("nccl: version {}", devspan::nccl::version().unwrap());
    let comms = Communicator::for_devices(&[0, 1]).unwrap();
    let src = filled(s0, (N, N));
    let mut dst = DeviceArray::<f32, _>::zeros(s1, (N, N)).unwrap();
    s0.synchronize().unwrap();
    let time = |f: &mut dyn FnMut()| -> f64 {
        for _ in 0..WARMUP {
            f();
        }
        s0.synchronize().unwrap();
        s1.synchronize().unwrap();
        let mut t = Vec::new();
        for _ in 0..REPS {
            let start = Instant::now();
            f();
            s0.synchronize().unwrap();
            s1.synchronize().unwrap();
            t.push(start.elapsed().as_secs_f64() * 1e3);
        }
        median(t)
    };
    let contiguous = time(&mut || {
        let mut g = Group::new();
        g.send(&comms[0], &src, 1, s0).unwrap();
        g.recv(&comms[1], &mut dst, 0, s1).unwrap();
        g.run().unwrap();
    });
    check(&dst.to_host().unwrap(), value, "contiguous send/recv");
    // Cleared before each row, so that each check sees that row's writes.
    dst.fill_on(s1, 0.0).unwrap();
    let transposed = time(&mut || {
        let t = src.t();
        let mut g = Group::new();
        g.send(&comms[0], &t, 1, s0).unwrap();
        g.recv(&comms[1], &mut dst, 0, s1).unwrap();
        g.run().unwrap();
    });
    check(
        &dst.to_host().unwrap(),
        |i, j| value(j, i),
        "transposed send",
    );
    dst.fill_on(s1, 0.0).unwrap();
    let into_transposed = time(&mut || {
        let mut d = dst.view_mut().reversed_axes();
        let mut g = Group::new();
        g.send(&comms[0], &src, 1, s0).unwrap();
        g.recv(&comms[1], &mut d, 0, s1).unwrap();
        g.run().unwrap();
    });
    check(
        &dst.to_host().unwrap(),
        |i, j| value(j, i),
        "received into a transposed view",
    );
    rows.push(
        "nccl",
        "0->1 send/recv contiguous",
        contiguous,
        contiguous,
        "itself",
    );
    rows.push(
        "nccl",
        "0->1 send transposed",
        transposed,
        contiguous,
        "contiguous",
    );
    rows.push(
        "nccl",
        "0->1 recv into transposed",
        into_transposed,
        contiguous,
        "contiguous",
    );
}

fn main() {
    let n = devspan::device_count().unwrap_or(0);
    if n < 2 {
        println!("multi_gpu: skipped: {n} CUDA device(s); this bench needs two");
        return;
    }
    let s0 = devspan::new_stream(0).unwrap();
    let s1 = devspan::new_stream(1).unwrap();
    report_access(&s0, &s1, "before any copy between the devices");
    let mut rows = Rows { lines: Vec::new() };
    cross(&mut rows, &s1, &s0);
    report_access(&s0, &s1, "after copies from device 1 to device 0");
    cross(&mut rows, &s0, &s1);
    nccl_rows(&mut rows, &s0, &s1);
    let worst = rows
        .lines
        .iter()
        .filter(|(n, _)| n.starts_with("cross") && !n.ends_with("staged"))
        .map(|(_, r)| *r)
        .fold(f64::INFINITY, f64::min);
    println!("multi_gpu: cross-device copies on the chosen path: min ratio {worst:.3} (goal 0.97)");
}
