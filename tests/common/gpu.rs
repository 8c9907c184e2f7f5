//! Helpers shared by the GPU tests (and the bandwidth bench): random host data, bitwise
//! comparisons that treat NaNs of one type as equal, axis permutations, a kernel that keeps a
//! stream busy, a deadlock watchdog, and the lock that keeps the lifetime tests alone on the GPU.
//! Each user takes a subset.
#![allow(dead_code)]

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use devspan::DeviceElement;
use ndarray::{Array, ArrayD, ArrayViewD, Dimension, IxDyn};
use rand::{Rng, rngs::StdRng};

/// An array of `shape` holding random bits (every bit pattern, NaNs included; never zeros).
pub fn random<T: DeviceElement>(rng: &mut StdRng, shape: &[usize]) -> ArrayD<T> {
    let n: usize = shape.iter().product();
    let mut words = vec![0u64; (n * std::mem::size_of::<T>()).div_ceil(8)];
    rng.fill(words.as_mut_slice());
    let bytes: &[u8] = &bytemuck::cast_slice::<u64, u8>(&words)[..n * std::mem::size_of::<T>()];
    Array::from_shape_vec(IxDyn(shape), bytemuck::cast_slice::<u8, T>(bytes).to_vec()).unwrap()
}

/// The bit patterns of `a`'s elements, in logical order.
pub fn bits<T: DeviceElement, D: Dimension>(a: &Array<T, D>) -> Vec<u64> {
    a.iter().map(|x| x.to_bits_u64()).collect()
}

/// Bitwise equality, except that any two NaNs of a float type compare equal.
pub fn same_bits<T: DeviceElement>(a: &T, b: &T) -> bool {
    if bytemuck::bytes_of(a) == bytemuck::bytes_of(b) {
        return true;
    }
    let nan = |x: &T| {
        let bits = x.to_bits_u64();
        match T::DTYPE {
            devspan::DType::F16 => (bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0,
            devspan::DType::BF16 => (bits & 0x7f80) == 0x7f80 && (bits & 0x007f) != 0,
            devspan::DType::F32 => f32::from_bits(bits as u32).is_nan(),
            devspan::DType::F64 => f64::from_bits(bits).is_nan(),
            _ => false,
        }
    };
    nan(a) && nan(b)
}

/// Asserts that `got` and `expect` have the same shape and the same elements ([`same_bits`]),
/// naming up to five differing indices.
#[track_caller]
pub fn assert_same<T: DeviceElement>(
    got: &ArrayViewD<'_, T>,
    expect: &ArrayViewD<'_, T>,
    what: &str,
) {
    assert_eq!(got.shape(), expect.shape(), "{what}: shape");
    // Fast path: both in standard layout and equal.
    if let (Some(g), Some(e)) = (got.as_slice(), expect.as_slice())
        && g.iter().zip(e).all(|(a, b)| same_bits(a, b))
    {
        return;
    }
    let mut bad = Vec::new();
    let mut count = 0;
    for ((i, g), e) in got.indexed_iter().zip(expect.iter()) {
        if !same_bits(g, e) {
            count += 1;
            if bad.len() < 5 {
                bad.push(format!("{:?}: got {g} expected {e}", i.slice()));
            }
        }
    }
    assert!(
        count == 0,
        "{what}: {count} of {} elements differ, first: {bad:?}",
        got.len()
    );
}

/// Every permutation of `0..rank`; under a sanitizer, every fifth of those of rank 4 and more
/// (the identity and the reversal among them).
pub fn permutations(rank: usize) -> Vec<Vec<usize>> {
    let all = all_permutations(rank);
    if rank < 4 || sanitizer().is_none() {
        return all;
    }
    let last = all.len() - 1;
    all.into_iter()
        .enumerate()
        .filter(|&(i, _)| i % 5 == 0 || i == last)
        .map(|(_, p)| p)
        .collect()
}

/// Every permutation of `0..rank`, in lexicographic order.
fn all_permutations(rank: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for _ in 0..rank {
        out = out
            .into_iter()
            .flat_map(|p: Vec<usize>| {
                (0..rank)
                    .filter(|a| !p.contains(a))
                    .map(|a| [p.clone(), vec![a]].concat())
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    out
}

/// Every GPU test of this binary holds this lock while it runs: the lifetime tests exclusively,
/// every other test shared. The lifetime tests read the device's free memory and rely on the
/// stream-ordered pool handing a freed block to the next allocation, so no other GPU work of the
/// process may run beside them, with or without `--test-threads=1`.
static GPU: RwLock<()> = RwLock::new(());

/// Shares the GPU with the other tests that take this guard (not with a lifetime test). A test
/// that panicked while holding the lock poisons nothing that matters.
pub fn gpu_shared() -> RwLockReadGuard<'static, ()> {
    GPU.read().unwrap_or_else(|p| p.into_inner())
}

/// Holds the GPU alone: waits until no other test holds the lock, then keeps them all out.
pub fn gpu_exclusive() -> RwLockWriteGuard<'static, ()> {
    GPU.write().unwrap_or_else(|p| p.into_inner())
}

/// A one-thread kernel that spins until `%globaltimer` (nanoseconds) has advanced by its
/// parameter, touching no memory.
const SPIN_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry devspan_test_spin(
    .param .u64 devspan_test_spin_ns
)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [devspan_test_spin_ns];
    mov.u64 %rd2, %globaltimer;
    add.u64 %rd3, %rd2, %rd1;
$L_spin:
    mov.u64 %rd4, %globaltimer;
    setp.lt.u64 %p1, %rd4, %rd3;
    @%p1 bra $L_spin;
    ret;
}
"#;

/// The spin kernel of each CUDA context (keyed by the driver's context handle). Loaded once
/// and never unloaded, so that no module goes away while its kernel is still queued.
fn spin_kernel(ctx: &Arc<CudaContext>) -> CudaFunction {
    static KERNELS: Mutex<Vec<(usize, CudaFunction)>> = Mutex::new(Vec::new());
    let key = ctx.cu_ctx() as usize;
    let mut kernels = KERNELS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, f)) = kernels.iter().find(|(k, _)| *k == key) {
        return f.clone();
    }
    let module = ctx
        .load_module(cudarc::nvrtc::Ptx::from_src(SPIN_PTX))
        .expect("load the spin kernel's PTX");
    let f = module
        .load_function("devspan_test_spin")
        .expect("find the spin kernel");
    kernels.push((key, f.clone()));
    f
}

/// Makes `stream` busy for `ms` milliseconds: enqueues a one-thread kernel that spins on the
/// GPU's global timer, so that work enqueued on `stream` afterwards starts that much later.
/// Returns as soon as the kernel is enqueued.
pub fn busy(stream: &Arc<CudaStream>, ms: u64) {
    let f = spin_kernel(stream.context());
    let ns: u64 = ms * 1_000_000;
    let mut launch = stream.launch_builder(&f);
    launch.arg(&ns);
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the kernel takes exactly one `.u64` parameter, passed above, and accesses no
    // memory; its module stays loaded for the rest of the process.
    unsafe { launch.launch(cfg) }.expect("launch the spin kernel");
}

/// Runs `f` on a new thread and fails the calling test if it has not finished within `limit`
/// (a deadlock: the thread is left blocked, the test fails). A panic in `f` fails the test
/// with `f`'s message.
#[track_caller]
pub fn watchdog(what: &str, limit: Duration, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("watchdog: {what}"))
        .spawn(move || {
            f();
            let _ = tx.send(());
        })
        .expect("spawn the watched thread");
    match rx.recv_timeout(limit) {
        Ok(()) | Err(RecvTimeoutError::Disconnected) => {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(RecvTimeoutError::Timeout) => {
            panic!("{what}: still running after {limit:?}; deadlocked (its thread is left blocked)")
        }
    }
}

/// The compute-sanitizer tool the tests run under: `DEVSPAN_SANITIZER`, which
/// `tools/sanitize` sets for each tool it runs the tests under.
pub fn sanitizer() -> Option<String> {
    std::env::var("DEVSPAN_SANITIZER")
        .ok()
        .filter(|t| !t.is_empty())
}

/// `full`, or `small` under a sanitizer (which slows every device access many times over);
/// both sizes take the same paths.
pub fn scaled(full: usize, small: usize) -> usize {
    if sanitizer().is_some() { small } else { full }
}

/// Whether a check runs; prints why it does not when a sanitizer for which `skips` holds is
/// running.
fn unless_under(what: &str, skips: impl FnOnce(&str) -> bool) -> bool {
    match sanitizer() {
        Some(tool) if skips(&tool) => {
            eprintln!("{what}: skipped under compute-sanitizer {tool}");
            false
        }
        _ => true,
    }
}

/// Whether a test runs under compute-sanitizer `tool`; prints why it does not. Tests that
/// provoke driver errors on purpose skip memcheck, which counts every failed API call as an
/// error.
pub fn unless_tool(tool: &str, what: &str) -> bool {
    unless_under(what, |t| t == tool)
}

/// Whether a check that a sanitizer invalidates runs; prints why it does not. Checks of free
/// device memory are such: the tools allocate device memory of their own while the test runs.
pub fn unless_sanitized(what: &str) -> bool {
    unless_under(what, |_| true)
}
