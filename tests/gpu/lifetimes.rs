//! GPU tests of lifetimes across streams and threads: a view keeps whatever owns its memory
//! alive until the GPU work devspan queued on it has completed, whoever the owner is and
//! whatever is dropped first; releases from threads with no current CUDA context work; no safe
//! call deadlocks, however views are nested or shared between threads.
//!
//! The races are made visible with a stream kept busy by a spinning kernel: work queued on the
//! busy stream runs hundreds of milliseconds later, after the memory was freed and, since the
//! stream-ordered pool hands a freed block to the next allocation of that size on that stream,
//! reallocated and overwritten. A write that lands late shows up in the fresh allocation; a read
//! that happens late copies the fresh allocation's values.
//!
//! Marked `#[ignore]`: the GPU runner passes `--include-ignored --test-threads=1` with
//! `DEVSPAN_REQUIRE_GPU=1`. The tests also take the binary's GPU lock exclusively
//! (`common::gpu_exclusive`), so that no other GPU test of the binary runs beside them even
//! without `--test-threads=1` (device free-memory readings and the pool's block reuse depend
//! on it). Sizes and durations are constants below; lower them under
//! compute-sanitizer.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLockWriteGuard};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use devspan::dlpack::{DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor, DlpackTensor};
use devspan::{
    DType, DeviceArray, DeviceOwner, DeviceSpanMut, DeviceView, DeviceViewMut, PinnedBuffer,
    SharedOwner, interop,
};
use ndarray::{Array2, ArrayView1, Axis, Ix1, Ix2, s};

use crate::common::{busy, watchdog};

/// Elements (f32) of the memory freed under queued work in the two-stream tests: large, so that
/// the stream-ordered pool hands the freed block to the next allocation of that size.
const ELEMS: usize = 64 << 20;
/// Elements of the memory of each case of the drop-order matrix.
const MATRIX_ELEMS: usize = 16 << 20;
/// Elements of the memory in the cross-stream ordering tests.
const ORDER_ELEMS: usize = 4 << 20;
/// How long a stream is kept busy before the work under test is queued behind it.
const BUSY_MS: u64 = 300;
/// Bytes allocated (and released from a foreign thread) by the foreign-thread tests.
const FOREIGN_BYTES: usize = 1 << 30;
/// Iterations of each thread of the opposite-direction test (a tenth under a sanitizer).
const ITERS: usize = 2000;
/// Row length of the arrays of the opposite-direction test.
const ROW: usize = 4096;
/// How long a test run under the watchdog may take before it counts as deadlocked.
const WATCHDOG: Duration = Duration::from_secs(30);

/// What memory holds before the work under test (never zero).
const INIT: f32 = 3.0;
/// What the work under test writes.
const WRITTEN: f32 = 7.0;
/// What a fresh allocation of the released memory is overwritten with.
const REUSED: f32 = -1.5;

/// Keeps every other GPU test of this binary out while a test of this file runs.
fn serial() -> RwLockWriteGuard<'static, ()> {
    crate::common::gpu_exclusive()
}

/// `n` distinctive nonzero values, exactly representable, varying with the index.
fn pattern(n: usize, salt: u32) -> Vec<f32> {
    (0..n)
        .map(|i| 1.0 + ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(salt) >> 20) as f32)
        .collect()
}

/// Number of elements of `got` that differ from `want`.
fn count_ne(got: &[f32], want: f32) -> usize {
    got.iter()
        .filter(|&&x| x.to_bits() != want.to_bits())
        .count()
}

/// Number of positions where `got` and `want` differ.
fn count_diff(got: &[f32], want: &[f32]) -> usize {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count()
}

// ---------------------------------------------------------------------------------------------
// Owners of the memory under test.

/// A custom owner: device memory allocated on some stream, whose drop frees it (stream-ordered on
/// that stream) and is counted.
struct SliceOwner {
    slice: CudaSlice<f32>,
    drops: Arc<AtomicUsize>,
    /// Whether the owner names its slice's stream as the stream its release is ordered on.
    release: bool,
}

impl DeviceOwner for SliceOwner {
    fn describe(&self) -> String {
        format!(
            "test slice owner ({} elements, release stream named: {})",
            self.slice.len(),
            self.release
        )
    }

    fn release_stream(&self) -> Option<Arc<CudaStream>> {
        self.release.then(|| self.slice.stream().clone())
    }
}

impl Drop for SliceOwner {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Pinned host memory as the owner of a device view (the GPU reaches it through unified
/// addressing); its drop is counted.
struct PinnedOwner {
    _buf: PinnedBuffer<f32>,
    drops: Arc<AtomicUsize>,
}

impl DeviceOwner for PinnedOwner {}

impl Drop for PinnedOwner {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// The allocation behind a hand-built DLPack producer's tensor; its drop is counted.
struct ProducerAlloc {
    slice: CudaSlice<f32>,
    drops: Arc<AtomicUsize>,
}

impl Drop for ProducerAlloc {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// A managed tensor made by a producer that is not devspan: its deleter frees the producer's
/// handle on the allocation (a cudarc slice: stream-ordered on its stream) and counts the call.
#[repr(C)]
struct Producer {
    managed: DLManagedTensorVersioned,
    shape: Vec<i64>,
    alloc: Arc<ProducerAlloc>,
    calls: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_producer(p: *mut DLManagedTensorVersioned) {
    // SAFETY: `p` is the first field of the `Box<Producer>` that `produce` leaked, and the
    // consumer calls the deleter once.
    let b = unsafe { Box::from_raw(p.cast::<Producer>()) };
    b.calls.fetch_add(1, Ordering::SeqCst);
    drop(b);
}

/// A 1-d f32 managed tensor over `alloc`'s memory, holding a handle on `alloc`.
fn produce(alloc: Arc<ProducerAlloc>, calls: Arc<AtomicUsize>) -> *mut DLManagedTensorVersioned {
    let ptr = interop::cuda_slice_address(&alloc.slice);
    let n = alloc.slice.len();
    let mut b = Box::new(Producer {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion::CURRENT,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_producer),
            flags: 0,
            dl_tensor: DLTensor {
                data: std::ptr::without_provenance_mut(ptr as usize),
                device: DLDevice::cuda(0),
                ndim: 1,
                dtype: DType::F32.into(),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape: vec![n as i64],
        alloc,
        calls,
    });
    b.managed.dl_tensor.shape = b.shape.as_mut_ptr();
    Box::into_raw(b).cast()
}

/// A consumer that passes a managed tensor on unchanged, counting the calls of its own deleter,
/// which then calls the one it received.
#[repr(C)]
struct Relay {
    managed: DLManagedTensorVersioned,
    inner: *mut DLManagedTensorVersioned,
    calls: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_relay(p: *mut DLManagedTensorVersioned) {
    // SAFETY: `p` is the first field of the `Box<Relay>` that `relay` leaked, called once.
    let b = unsafe { Box::from_raw(p.cast::<Relay>()) };
    b.calls.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the relayed tensor is live until this, its only deleter call.
    unsafe { ((*b.inner).deleter.expect("exported tensors have a deleter"))(b.inner) };
}

fn relay(
    inner: *mut DLManagedTensorVersioned,
) -> (*mut DLManagedTensorVersioned, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    // SAFETY: `inner` is a live managed tensor; its plain fields are copied.
    let (version, flags, dl_tensor) =
        unsafe { ((*inner).version, (*inner).flags, (*inner).dl_tensor) };
    let b = Box::new(Relay {
        managed: DLManagedTensorVersioned {
            version,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_relay),
            flags,
            dl_tensor,
        },
        inner,
        calls: calls.clone(),
    });
    (Box::into_raw(b).cast(), calls)
}

/// A managed tensor pointer that may be handed to another thread (DLPack deleters may be called
/// from any thread).
struct SendTensor(*mut DLManagedTensorVersioned);
// SAFETY: the pointer is only used to call the tensor's deleter once, which DLPack allows from
// any thread.
unsafe impl Send for SendTensor {}

/// How the memory under test is owned and viewed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A `DeviceArray` borrowed with `view_mut`.
    ArrayBorrowed,
    /// A `DeviceArray` exported with `into_dlpack`, passed through a counting consumer and
    /// imported back with `DlpackTensor::from_versioned(..)?.into_view_mut()`.
    ArrayExported,
    /// A cudarc `CudaSlice` borrowed with `DeviceViewMut::from(&mut slice)`.
    SliceBorrowed,
    /// A cudarc `CudaSlice` borrowed with `DeviceSpanMut::from_cuda_mut`.
    SliceSpanBorrowed,
    /// An `Arc<CudaSlice>` as the owner of a `from_raw_parts_mut` view.
    SliceOwned,
    /// A custom `DeviceOwner` holding a `CudaSlice`, naming no release stream.
    Custom,
    /// A custom `DeviceOwner` holding a `CudaSlice`, naming the slice's stream as its release
    /// stream.
    CustomReleaseStream,
    /// A hand-built DLPack producer whose deleter frees a cudarc allocation.
    Producer,
    /// A `PinnedBuffer` (page-locked host memory) as the owner of a device view.
    Pinned,
}

impl Kind {
    /// Whether the user holds the owner by `Arc`, so that it can be dropped before the views.
    fn owner_held_by_arc(self) -> bool {
        matches!(
            self,
            Kind::SliceOwned
                | Kind::Custom
                | Kind::CustomReleaseStream
                | Kind::Producer
                | Kind::Pinned
        )
    }
}

/// Drop or deleter counters of the memory under test: each must read exactly 1 once every
/// handle is gone, and 0 while a view is alive.
type Counts = Vec<(&'static str, Box<dyn Fn() -> usize>)>;

/// The user's own handle on an owner held by `Arc` (dropped by the test in the order it tests).
type OwnerHandle = Option<Box<dyn Any + Send>>;

/// What `with_memory` hands to the code under test.
struct Subject<'a> {
    /// A writable 1-d view of the whole memory.
    view: DeviceViewMut<'a, f32, Ix1>,
    /// The user's handle on the owner, for kinds that have one.
    owner: OwnerHandle,
    /// The stream the memory was allocated on: the caller's only handle to it.
    s1: Arc<CudaStream>,
    /// The counters (to check that nothing was released while a view lives).
    counts: &'a Counts,
}

/// What is known about memory once every handle to it is gone.
struct Released {
    /// Device address of the memory.
    ptr: u64,
    counts: Counts,
    /// Whether it was host (pinned) memory.
    host_memory: bool,
}

/// Makes memory holding `host` on `s1`, owned and viewed as `kind` says, and hands a writable view
/// of it, the user's owner handle and `s1` to `use_view`, which drops them in the order it tests.
/// A borrowed owner (array or slice) is dropped right after `use_view` returns: the borrow
/// checker allows nothing earlier.
fn with_memory<R>(
    kind: Kind,
    s1: Arc<CudaStream>,
    host: &[f32],
    use_view: impl FnOnce(Subject<'_>) -> R,
) -> (Released, R) {
    let n = host.len();
    let mut counts: Counts = Vec::new();
    let host_memory = kind == Kind::Pinned;
    match kind {
        Kind::ArrayBorrowed => {
            let mut a = DeviceArray::from_host(&s1, &ArrayView1::from(host)).unwrap();
            let ptr = interop::cuda_slice_address(a.as_cuda_slice());
            let r = use_view(Subject {
                view: a.view_mut(),
                owner: None,
                s1,
                counts: &counts,
            });
            drop(a);
            let released = Released {
                ptr,
                counts,
                host_memory,
            };
            (released, r)
        }
        Kind::SliceBorrowed | Kind::SliceSpanBorrowed => {
            let mut slice = s1.clone_htod(host).unwrap();
            s1.synchronize().unwrap();
            let ptr = interop::cuda_slice_address(&slice);
            let view = if kind == Kind::SliceBorrowed {
                DeviceViewMut::from(&mut slice)
            } else {
                DeviceSpanMut::from_cuda_mut(&mut slice).into_view_mut()
            };
            let r = use_view(Subject {
                view,
                owner: None,
                s1,
                counts: &counts,
            });
            drop(slice);
            let released = Released {
                ptr,
                counts,
                host_memory,
            };
            (released, r)
        }
        Kind::ArrayExported => {
            let a = DeviceArray::from_host(&s1, &ArrayView1::from(host)).unwrap();
            let ptr = interop::cuda_slice_address(a.as_cuda_slice());
            let (m, calls) = relay(a.into_dlpack().unwrap());
            // SAFETY: `m` is a live managed tensor (an export, relayed), handed over once; the
            // export synchronised the array's stream.
            let t = unsafe { DlpackTensor::from_versioned(m) }.unwrap();
            let view = t.into_view_mut::<f32, Ix1>().unwrap();
            counts.push((
                "deleter calls",
                Box::new(move || calls.load(Ordering::SeqCst)),
            ));
            let r = use_view(Subject {
                view,
                owner: None,
                s1,
                counts: &counts,
            });
            let released = Released {
                ptr,
                counts,
                host_memory,
            };
            (released, r)
        }
        Kind::SliceOwned => {
            let slice = Arc::new(s1.clone_htod(host).unwrap());
            s1.synchronize().unwrap();
            let ptr = interop::cuda_slice_address(&slice);
            let weak = Arc::downgrade(&slice);
            // SAFETY: the slice holds `n` f32 at `ptr` on device 0, complete (synchronised
            // above), kept alive by the owner handle; this view is its only user.
            let view = unsafe {
                DeviceViewMut::from_raw_parts_mut(
                    ptr,
                    n,
                    Ix1(n),
                    &[1],
                    0,
                    0,
                    slice.clone() as Arc<dyn DeviceOwner>,
                )
            }
            .unwrap();
            counts.push((
                "CudaSlice drops",
                Box::new(move || usize::from(weak.strong_count() == 0)),
            ));
            let r = use_view(Subject {
                view,
                owner: Some(Box::new(slice)),
                s1,
                counts: &counts,
            });
            let released = Released {
                ptr,
                counts,
                host_memory,
            };
            (released, r)
        }
        Kind::Custom | Kind::CustomReleaseStream => {
            let drops = Arc::new(AtomicUsize::new(0));
            let slice = s1.clone_htod(host).unwrap();
            s1.synchronize().unwrap();
            let ptr = interop::cuda_slice_address(&slice);
            let owner = Arc::new(SliceOwner {
                slice,
                drops: drops.clone(),
                release: kind == Kind::CustomReleaseStream,
            });
            // SAFETY: as for `SliceOwned`.
            let view = unsafe {
                DeviceViewMut::from_raw_parts_mut(
                    ptr,
                    n,
                    Ix1(n),
                    &[1],
                    0,
                    0,
                    owner.clone() as Arc<dyn DeviceOwner>,
                )
            }
            .unwrap();
            counts.push((
                "owner drops",
                Box::new(move || drops.load(Ordering::SeqCst)),
            ));
            let r = use_view(Subject {
                view,
                owner: Some(Box::new(owner)),
                s1,
                counts: &counts,
            });
            let released = Released {
                ptr,
                counts,
                host_memory,
            };
            (released, r)
        }
        Kind::Producer => {
            let drops = Arc::new(AtomicUsize::new(0));
            let calls = Arc::new(AtomicUsize::new(0));
            let slice = s1.clone_htod(host).unwrap();
            s1.synchronize().unwrap();
            let ptr = interop::cuda_slice_address(&slice);
            let alloc = Arc::new(ProducerAlloc {
                slice,
                drops: drops.clone(),
            });
            let m = produce(alloc.clone(), calls.clone());
            // SAFETY: `m` is a live managed tensor whose arrays hold `ndim` values, whose data is
            // ready (synchronised above) and owned until the deleter runs, which may run on any
            // thread; it is handed over once.
            let t = unsafe { DlpackTensor::from_versioned(m) }.unwrap();
            let view = t.into_view_mut::<f32, Ix1>().unwrap();
            counts.push((
                "deleter calls",
                Box::new(move || calls.load(Ordering::SeqCst)),
            ));
            counts.push((
                "producer allocation drops",
                Box::new(move || drops.load(Ordering::SeqCst)),
            ));
            let r = use_view(Subject {
                view,
                owner: Some(Box::new(alloc)),
                s1,
                counts: &counts,
            });
            let released = Released {
                ptr,
                counts,
                host_memory,
            };
            (released, r)
        }
        Kind::Pinned => {
            let drops = Arc::new(AtomicUsize::new(0));
            let buf = PinnedBuffer::from_slice(s1.context(), host).unwrap();
            let ptr = buf.as_slice().unwrap().as_ptr().addr() as u64;
            let owner = Arc::new(PinnedOwner {
                _buf: buf,
                drops: drops.clone(),
            });
            // SAFETY: page-locked memory from `cuMemHostAlloc` is reachable from the device at
            // its host address (unified addressing); `n` f32 there are kept alive by the owner
            // and used by no one else.
            let view = unsafe {
                DeviceViewMut::from_raw_parts_mut(
                    ptr,
                    n,
                    Ix1(n),
                    &[1],
                    0,
                    0,
                    owner.clone() as Arc<dyn DeviceOwner>,
                )
            }
            .unwrap();
            counts.push((
                "owner drops",
                Box::new(move || drops.load(Ordering::SeqCst)),
            ));
            let r = use_view(Subject {
                view,
                owner: Some(Box::new(owner)),
                s1,
                counts: &counts,
            });
            let released = Released {
                ptr,
                counts,
                host_memory,
            };
            (released, r)
        }
    }
}

/// `Err` unless every counter of `released` reads exactly 1.
fn check_counts(released: &Released, what: &str) -> Result<(), String> {
    for (name, count) in &released.counts {
        let c = count();
        if c != 1 {
            return Err(format!("{what}: {name} = {c}, expected exactly 1"));
        }
    }
    Ok(())
}

/// Allocates memory of the released memory's size on `stream` (same size, same stream: the
/// stream-ordered pool tends to hand back the very block), overwrites it with `fill` if given,
/// waits for every stream of the device, and checks that the allocation still holds what it was
/// given (zeros, or `fill`): work still queued on the freed memory must not land in it.
fn check_fresh(
    released: &Released,
    stream: &Arc<CudaStream>,
    n: usize,
    fill: Option<f32>,
    what: &str,
) -> Result<(), String> {
    let want = fill.unwrap_or(0.0);
    let (reused, bad) = if released.host_memory {
        let mut fresh = PinnedBuffer::<f32>::zeros(stream.context(), n).unwrap();
        let reused = fresh.as_slice().unwrap().as_ptr().addr() as u64 == released.ptr;
        if let Some(x) = fill {
            fresh.as_mut_slice().unwrap().fill(x);
        }
        stream.context().synchronize().unwrap();
        (reused, count_ne(fresh.as_slice().unwrap(), want))
    } else {
        let mut fresh = DeviceArray::<f32, Ix1>::zeros(stream, n).unwrap();
        let reused = interop::cuda_slice_address(fresh.as_cuda_slice()) == released.ptr;
        if let Some(x) = fill {
            fresh.fill_on(stream, x).unwrap();
        }
        stream.context().synchronize().unwrap();
        let h = fresh.to_host_on(stream).unwrap();
        (reused, count_ne(h.as_slice().unwrap(), want))
    };
    println!("{what}: the next allocation reused the freed block: {reused}");
    if bad > 0 {
        return Err(format!(
            "{what}: {bad} of {n} elements of a fresh allocation were overwritten by work queued \
             on the freed memory (block reused: {reused})"
        ));
    }
    Ok(())
}

#[track_caller]
fn assert_all_ok(fails: &[String]) {
    assert!(
        fails.is_empty(),
        "{} failure(s):\n{}",
        fails.len(),
        fails.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The busy-stream helper itself: every race test below relies on it.

#[test]
#[ignore = "needs a CUDA GPU"]
fn busy_kernel_delays_later_work_on_its_stream_only() {
    let _g = serial();
    let stream = devspan::testing::gpu_stream();
    let other = devspan::new_stream(0).unwrap();
    busy(&stream, 10); // loads the module
    stream.synchronize().unwrap();
    let mut a = DeviceArray::<f32, Ix1>::zeros(&stream, 1024).unwrap();
    stream.synchronize().unwrap();
    let t0 = Instant::now();
    busy(&stream, BUSY_MS);
    a.fill_on(&stream, WRITTEN).unwrap();
    let enqueued = t0.elapsed();
    other.synchronize().unwrap();
    let other_done = t0.elapsed();
    stream.synchronize().unwrap();
    let done = t0.elapsed();
    println!(
        "enqueued after {enqueued:?}, other stream idle after {other_done:?}, busy stream done after {done:?}"
    );
    assert!(
        enqueued < Duration::from_millis(BUSY_MS / 2),
        "launching the spin kernel must not wait for it ({enqueued:?})"
    );
    assert!(
        other_done < Duration::from_millis(BUSY_MS / 2),
        "another stream must not wait for the spin kernel ({other_done:?})"
    );
    assert!(
        done >= Duration::from_millis(BUSY_MS * 9 / 10),
        "the stream finished after {done:?}, before the {BUSY_MS} ms spin"
    );
    let h = a.to_host_on(&stream).unwrap();
    assert_eq!(count_ne(h.as_slice().unwrap(), WRITTEN), 0);
}

// ---------------------------------------------------------------------------------------------
// Two streams: memory made on s1, written (or read) on a busy s2, released, reallocated on s1.

#[derive(Clone, Copy, Debug)]
enum Op {
    Fill,
    Assign,
}

/// Memory of `kind` allocated on s1; a busy s2 queues a write (`op`) of `WRITTEN` to all of it;
/// the view and owner are dropped; a new array of the same size allocated on s1 must read all
/// zeros once everything has finished.
fn freed_under_queued_write(kind: Kind, op: Op) -> Result<(), String> {
    let what = format!("{kind:?} written by {op:?} on a busy stream, then released");
    let s1 = devspan::new_stream(0).unwrap();
    let s2 = devspan::new_stream(0).unwrap();
    let mut src = DeviceArray::<f32, Ix1>::zeros(&s2, ELEMS).unwrap();
    src.fill_on(&s2, WRITTEN).unwrap();
    s2.synchronize().unwrap();
    let host = pattern(ELEMS, 1);
    let (released, s1) = with_memory(kind, s1, &host, |sub| {
        let mut view = sub.view;
        busy(&s2, BUSY_MS);
        match op {
            Op::Fill => view.fill_on(&s2, WRITTEN).unwrap(),
            Op::Assign => view.assign_on(&s2, &src.view()).unwrap(),
        }
        drop(view);
        drop(sub.owner);
        sub.s1
    });
    check_counts(&released, &what)?;
    check_fresh(&released, &s1, ELEMS, None, &what)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_stream_drop_of_an_exported_array() {
    let _g = serial();
    freed_under_queued_write(Kind::ArrayExported, Op::Fill).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_stream_drop_of_a_borrowed_cuda_slice() {
    let _g = serial();
    let fails: Vec<String> = [
        (Kind::SliceBorrowed, Op::Fill),
        (Kind::SliceSpanBorrowed, Op::Assign),
    ]
    .into_iter()
    .filter_map(|(k, op)| freed_under_queued_write(k, op).err())
    .collect();
    assert_all_ok(&fails);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_stream_drop_of_a_custom_owner() {
    let _g = serial();
    let fails: Vec<String> = [
        (Kind::Custom, Op::Fill),
        (Kind::Custom, Op::Assign),
        (Kind::CustomReleaseStream, Op::Fill),
    ]
    .into_iter()
    .filter_map(|(k, op)| freed_under_queued_write(k, op).err())
    .collect();
    assert_all_ok(&fails);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_stream_drop_of_a_dlpack_producer() {
    let _g = serial();
    freed_under_queued_write(Kind::Producer, Op::Fill).unwrap();
}

/// The read variant: the view is the source of a copy queued on a busy s2; its memory is
/// released, reallocated on s1 and overwritten there while the copy still waits; the copy's
/// destination must hold the original values.
#[test]
#[ignore = "needs a CUDA GPU"]
fn two_stream_drop_of_a_source_still_being_read() {
    let _g = serial();
    let mut fails = Vec::new();
    for kind in [
        Kind::ArrayExported,
        Kind::SliceBorrowed,
        Kind::Custom,
        Kind::CustomReleaseStream,
        Kind::Producer,
    ] {
        let what = format!("{kind:?} read by a copy on a busy stream, then released");
        let s1 = devspan::new_stream(0).unwrap();
        let s2 = devspan::new_stream(0).unwrap();
        let mut dst = DeviceArray::<f32, Ix1>::zeros(&s2, ELEMS).unwrap();
        s2.synchronize().unwrap();
        let host = pattern(ELEMS, 2);
        let (released, s1) = with_memory(kind, s1, &host, |sub| {
            busy(&s2, BUSY_MS);
            dst.view_mut().assign_on(&s2, &sub.view.view()).unwrap();
            drop(sub.view);
            drop(sub.owner);
            sub.s1
        });
        let r = check_counts(&released, &what)
            .and_then(|()| check_fresh(&released, &s1, ELEMS, Some(REUSED), &what))
            .and_then(|()| {
                let got = dst.to_host_on(&s2).unwrap();
                match count_diff(got.as_slice().unwrap(), &host) {
                    0 => Ok(()),
                    bad => Err(format!(
                        "{what}: {bad} of {ELEMS} copied elements are not the source's values"
                    )),
                }
            });
        fails.extend(r.err());
    }
    assert_all_ok(&fails);
}

// ---------------------------------------------------------------------------------------------
// Owner-backed views used on two streams: the second stream waits for devspan's earlier work.

/// A write on a busy stream A, then a read on stream B: B must see the write. Then two writes,
/// A (busy) then B: B's value must be the one left.
#[test]
#[ignore = "needs a CUDA GPU"]
fn views_order_a_write_before_later_work_on_another_stream() {
    let _g = serial();
    let mut fails = Vec::new();
    for kind in [
        Kind::ArrayBorrowed,
        Kind::SliceBorrowed,
        Kind::ArrayExported,
        Kind::SliceOwned,
        Kind::Custom,
        Kind::Producer,
    ] {
        let sa = devspan::new_stream(0).unwrap();
        let sb = devspan::new_stream(0).unwrap();
        let host = pattern(ORDER_ELEMS, 3);
        let s1 = sa.clone();
        let (_released, r) = with_memory(kind, s1, &host, |sub| {
            let mut v = sub.view;
            let mut fails = Vec::new();
            busy(&sa, BUSY_MS);
            v.fill_on(&sa, WRITTEN).unwrap();
            let read = v.view().to_host_on(&sb).unwrap();
            let bad = count_ne(read.as_slice().unwrap(), WRITTEN);
            if bad > 0 {
                fails.push(format!(
                    "{kind:?}: a read on stream B missed {bad} elements of a write on stream A"
                ));
            }
            busy(&sa, BUSY_MS);
            v.fill_on(&sa, INIT).unwrap();
            v.fill_on(&sb, REUSED).unwrap();
            sa.context().synchronize().unwrap();
            let last = v.view().to_host_on(&sb).unwrap();
            let bad = count_ne(last.as_slice().unwrap(), REUSED);
            if bad > 0 {
                fails.push(format!(
                    "{kind:?}: a write on stream B was overtaken in {bad} elements by an earlier \
                     write on stream A"
                ));
            }
            fails
        });
        fails.extend(r);
    }
    assert_all_ok(&fails);
}

/// A read on a busy stream A (a copy out of the view), then a write of the view on stream B:
/// the copy must still see the old values. (cudarc orders this for its slices; owner-backed
/// views need the same.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn views_order_a_read_before_a_later_write_on_another_stream() {
    let _g = serial();
    let mut fails = Vec::new();
    for kind in [
        Kind::ArrayBorrowed,
        Kind::SliceBorrowed,
        Kind::ArrayExported,
        Kind::SliceOwned,
        Kind::Custom,
        Kind::Producer,
    ] {
        let sa = devspan::new_stream(0).unwrap();
        let sb = devspan::new_stream(0).unwrap();
        let host = pattern(ORDER_ELEMS, 4);
        let mut dst = DeviceArray::<f32, Ix1>::zeros(&sa, ORDER_ELEMS).unwrap();
        sa.synchronize().unwrap();
        let s1 = sa.clone();
        let (_released, ()) = with_memory(kind, s1, &host, |sub| {
            let mut v = sub.view;
            busy(&sa, BUSY_MS);
            dst.view_mut().assign_on(&sa, &v.view()).unwrap();
            v.fill_on(&sb, WRITTEN).unwrap();
            sa.context().synchronize().unwrap();
        });
        let got = dst.to_host_on(&sa).unwrap();
        let bad = count_diff(got.as_slice().unwrap(), &host);
        if bad > 0 {
            fails.push(format!(
                "{kind:?}: a write on stream B reached {bad} elements before an earlier copy on \
                 stream A read them"
            ));
        }
    }
    assert_all_ok(&fails);
}

// ---------------------------------------------------------------------------------------------
// Release from a thread that has no current CUDA context.

/// How the context of the released memory tracks cross-stream use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tracking {
    /// A fresh context handle with one stream (the legacy default stream): cudarc's event
    /// tracking is on but inactive (it only works once a second stream exists).
    OneStream,
    /// A second stream exists: cudarc's tracking is active, and its release binds the context.
    MultiStream,
    /// A second stream exists but event tracking is turned off.
    Off,
}

/// Turns cudarc's event tracking off for one context handle while alive.
struct TrackingOff(Arc<CudaContext>);

impl TrackingOff {
    fn new(ctx: &Arc<CudaContext>) -> Self {
        // SAFETY: only this test uses this context handle (`devspan::context` makes a new one per
        // call), and every slice made through it while tracking is off is used on the legacy
        // default stream alone, synchronised before its release.
        unsafe { ctx.disable_event_tracking() };
        TrackingOff(ctx.clone())
    }
}

impl Drop for TrackingOff {
    fn drop(&mut self) {
        // SAFETY: the slices made while tracking was off are gone (the exported array was
        // released, the probe array dropped before this guard).
        unsafe { self.0.enable_event_tracking() };
    }
}

/// Device free memory in bytes, as the driver reports it.
fn free_memory(ctx: &Arc<CudaContext>) -> usize {
    ctx.bind_to_thread().unwrap();
    cudarc::driver::result::mem_get_info().unwrap().0
}

/// An exported array of `FOREIGN_BYTES` on the legacy default stream, released by calling its
/// DLPack deleter on a fresh thread that has no current context: the memory must come back, and
/// the next devspan call on this thread must succeed.
fn foreign_thread_release(tracking: Tracking) -> Result<(), String> {
    let what = format!("release from a foreign thread, {tracking:?}");
    let stream = devspan::default_stream(0).unwrap();
    let ctx = stream.context().clone();
    let _other = (tracking != Tracking::OneStream).then(|| ctx.new_stream().unwrap());
    let _off = (tracking == Tracking::Off).then(|| TrackingOff::new(&ctx));
    ctx.synchronize().unwrap();
    let before = free_memory(&ctx);
    let a = DeviceArray::<u8, Ix1>::zeros(&stream, FOREIGN_BYTES).unwrap();
    let allocated = free_memory(&ctx);
    assert!(
        before.saturating_sub(allocated) >= FOREIGN_BYTES / 2,
        "{what}: allocating {FOREIGN_BYTES} bytes took only {} bytes of free memory",
        before.saturating_sub(allocated)
    );
    let m = SendTensor(a.into_dlpack().unwrap());
    let no_context = std::thread::spawn(move || {
        let m = m;
        let current = cudarc::driver::result::ctx::get_current().unwrap();
        // SAFETY: `m` is a live exported tensor; its deleter is called once, here.
        unsafe { ((*m.0).deleter.unwrap())(m.0) };
        current.is_none()
    })
    .join()
    .unwrap();
    assert!(
        no_context,
        "{what}: the releasing thread had a current context"
    );
    // The next call on this thread, unrelated to the released memory.
    let probe = (|| {
        let mut p = DeviceArray::<f32, Ix1>::zeros(&stream, 1024)?;
        p.fill_on(&stream, WRITTEN)?;
        p.to_host_on(&stream)
    })();
    let probe = probe
        .map_err(|e| format!("{what}: the first devspan call after the release failed: {e}"))?;
    if count_ne(probe.as_slice().unwrap(), WRITTEN) != 0 {
        return Err(format!("{what}: the probe array read wrong values"));
    }
    drop(probe);
    ctx.synchronize().unwrap();
    let after = free_memory(&ctx);
    println!(
        "{what}: free memory before {before}, allocated {allocated}, after release {after} bytes"
    );
    if before.saturating_sub(after) >= FOREIGN_BYTES / 2 {
        return Err(format!(
            "{what}: {} of {FOREIGN_BYTES} bytes were not given back",
            before.saturating_sub(after)
        ));
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn release_from_a_thread_without_a_context() {
    let _g = serial();
    let fails: Vec<String> = [Tracking::OneStream, Tracking::MultiStream, Tracking::Off]
        .into_iter()
        .filter_map(|t| foreign_thread_release(t).err())
        .collect();
    assert_all_ok(&fails);
}

// ---------------------------------------------------------------------------------------------
// Deadlocks: nesting inside `with_kernel_view` / `with_kernel_view_mut`, and two threads
// crossing two arrays in opposite directions.

/// Whose memory the views of a deadlock test cover.
#[derive(Clone, Copy, Debug)]
enum Base {
    /// A `DeviceArray`, viewed with `view_mut`.
    Array,
    /// A cudarc slice, viewed with `interop::view_mut_of`.
    Slice,
    /// An `Arc<CudaSlice>` behind `from_raw_parts_mut`.
    Owner,
}

/// Calls `f` with a writable (rows, cols) view of memory holding `host` (standard layout), on
/// `stream`, owned as `base` says.
fn with_base<R>(
    base: Base,
    stream: &Arc<CudaStream>,
    host: &Array2<f32>,
    f: impl FnOnce(DeviceViewMut<'_, f32, Ix2>) -> R,
) -> R {
    let dim = host.raw_dim();
    match base {
        Base::Array => {
            let mut a = DeviceArray::from_host(stream, &host.view()).unwrap();
            f(a.view_mut())
        }
        Base::Slice => {
            let mut slice = stream.clone_htod(host.as_slice().unwrap()).unwrap();
            stream.synchronize().unwrap();
            f(interop::view_mut_of(&mut slice, dim).unwrap())
        }
        Base::Owner => {
            let slice = stream.clone_htod(host.as_slice().unwrap()).unwrap();
            stream.synchronize().unwrap();
            let ptr = interop::cuda_slice_address(&slice);
            let n = host.len();
            // SAFETY: the slice holds `n` f32 at `ptr` on device 0, complete, moved into the
            // owner; this view is its only user.
            let v = unsafe {
                DeviceViewMut::from_raw_parts_mut(ptr, n, Ix1(n), &[1], 0, 0, Arc::new(slice))
            }
            .unwrap();
            f(v.into_shape_with_order(dim).unwrap())
        }
    }
}

/// Reads of the same memory inside `with_kernel_view`: a clone's `to_contiguous`, `to_host` and
/// `cast`, a slice, a nested `with_kernel_view` on a clone, a fresh view. All are reads, so all
/// must succeed, with the right values.
fn nested_reads(stream: &Arc<CudaStream>, v: DeviceView<'_, f32, Ix2>, host: &Array2<f32>) {
    let outer = v.kernel_view::<2>().unwrap();
    let got = v
        .with_kernel_view::<2, _>(stream, |kv| {
            let contiguous = v.clone().to_contiguous_on(stream)?.to_host_on(stream)?;
            let direct = v.to_host_on(stream)?;
            let cast = v.cast_on::<f64>(stream)?.to_host_on(stream)?;
            let sliced = v.slice(s![1..;2, ..;-3]).to_host_on(stream)?;
            let (kv2, transposed) = v
                .clone()
                .with_kernel_view::<2, _>(stream, |kv2| Ok((kv2, v.t().to_host_on(stream)?)))?;
            Ok((kv, contiguous, direct, cast, sliced, kv2, transposed))
        })
        .expect("reads nested in with_kernel_view");
    let (kv, contiguous, direct, cast, sliced, kv2, transposed) = got;
    assert_eq!(kv, outer);
    assert_eq!(kv2, outer);
    assert_eq!(contiguous, host);
    assert_eq!(direct, host);
    assert_eq!(cast, host.mapv(f64::from));
    assert_eq!(sliced, host.slice(s![1..;2, ..;-3]));
    assert_eq!(transposed, host.t());
}

/// Writes of the other half of a split inside `with_kernel_view_mut` of one half (an outer-axis
/// and an inner-axis split): `fill`, `assign`, nested `with_kernel_view(_mut)` of the other
/// half. Each returns `Ok` (values checked) or `Err`; none may hang.
fn nested_writes(
    stream: &Arc<CudaStream>,
    v: DeviceViewMut<'_, f32, Ix2>,
    host: &Array2<f32>,
    axis: Axis,
) {
    let at = host.len_of(axis) / 2;
    let (mut first, mut second) = v.split_at(axis, at);
    let src_host = Array2::from_shape_vec(second.dim(), pattern(second.len(), 5)).unwrap();
    let src = DeviceArray::from_host(stream, &src_host.view()).unwrap();
    let first_ptr = first.device_ptr();
    let r = first.with_kernel_view_mut::<2, _>(stream, |kv| {
        second.fill_on(stream, WRITTEN)?;
        let filled = second.view().to_host_on(stream)?;
        second.assign_on(stream, &src.view())?;
        let nested_read = second
            .view()
            .with_kernel_view::<2, _>(stream, |_| second.view().to_host_on(stream))?;
        let nested_write = second.with_kernel_view_mut::<2, _>(stream, |kv2| Ok(kv2.ptr))?;
        Ok((kv.ptr, filled, nested_read, nested_write))
    });
    match r {
        Ok((ptr, filled, nested_read, nested_write)) => {
            assert_eq!(ptr, first_ptr);
            assert_eq!(count_ne(filled.as_slice().unwrap(), WRITTEN), 0);
            assert_eq!(nested_read, src_host);
            assert_eq!(nested_write, second.device_ptr());
        }
        Err(e) => {
            println!("writes nested in with_kernel_view_mut (split along {axis:?}): Err({e})")
        }
    }
    // Whatever the nested calls returned, the first half is untouched.
    let first_host = host.slice_axis(axis, ndarray::Slice::from(..at));
    assert_eq!(first.view().to_host_on(stream).unwrap(), first_host);
}

fn nesting(base: Base) {
    watchdog(&format!("nested use over {base:?}"), WATCHDOG, move || {
        let stream = devspan::new_stream(0).unwrap();
        let host = Array2::from_shape_vec((64, 48), pattern(64 * 48, 6)).unwrap();
        with_base(base, &stream, &host, |v| {
            nested_reads(&stream, v.view(), &host)
        });
        with_base(base, &stream, &host, |v| {
            nested_writes(&stream, v, &host, Axis(0));
        });
        with_base(base, &stream, &host, |v| {
            nested_writes(&stream, v, &host, Axis(1));
        });
        // A read-only view made from a writable one, nested in itself.
        with_base(base, &stream, &host, |v| {
            nested_reads(&stream, v.into_view(), &host);
        });
    });
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn nested_use_inside_kernel_view_closures_over_an_array() {
    let _g = serial();
    nesting(Base::Array);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn nested_use_inside_kernel_view_closures_over_a_cuda_slice() {
    let _g = serial();
    nesting(Base::Slice);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn nested_use_inside_kernel_view_closures_over_an_owner() {
    let _g = serial();
    nesting(Base::Owner);
}

/// Arrays P and Q, each split into halves; thread 1 copies q1 into p1 on one stream while
/// thread 2 copies p2 into q2 on another, `ITERS` times each.
fn opposite_directions(base: Base) {
    watchdog(
        &format!("opposite copies over {base:?}"),
        WATCHDOG,
        move || {
            let sa = devspan::new_stream(0).unwrap();
            let sb = devspan::new_stream(0).unwrap();
            let hp = Array2::from_shape_vec((2, ROW), pattern(2 * ROW, 7)).unwrap();
            let hq = Array2::from_shape_vec((2, ROW), pattern(2 * ROW, 8)).unwrap();
            with_base(base, &sa, &hp, |p| {
                with_base(base, &sb, &hq, |q| {
                    let (p1, p2) = p.split_at(Axis(0), 1);
                    let (q1, q2) = q.split_at(Axis(0), 1);
                    let ((p1, q1), (q2, p2)) = std::thread::scope(|sc| {
                        let t1 = sc.spawn(|| {
                            let mut p1 = p1;
                            for _ in 0..crate::common::scaled(ITERS, ITERS / 10) {
                                p1.assign_on(&sa, &q1.view()).unwrap();
                            }
                            (p1, q1)
                        });
                        let t2 = sc.spawn(|| {
                            let mut q2 = q2;
                            for _ in 0..crate::common::scaled(ITERS, ITERS / 10) {
                                q2.assign_on(&sb, &p2.view()).unwrap();
                            }
                            (q2, p2)
                        });
                        (t1.join().unwrap(), t2.join().unwrap())
                    });
                    sa.context().synchronize().unwrap();
                    let row = |r: usize, h: &Array2<f32>| h.slice(s![r..r + 1, ..]).to_owned();
                    assert_eq!(p1.view().to_host_on(&sa).unwrap(), row(0, &hq));
                    assert_eq!(p2.view().to_host_on(&sa).unwrap(), row(1, &hp));
                    assert_eq!(q1.view().to_host_on(&sb).unwrap(), row(0, &hq));
                    assert_eq!(q2.view().to_host_on(&sb).unwrap(), row(1, &hp));
                });
            });
        },
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn opposite_copies_on_two_threads_over_arrays() {
    let _g = serial();
    opposite_directions(Base::Array);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn opposite_copies_on_two_threads_over_cuda_slices() {
    let _g = serial();
    opposite_directions(Base::Slice);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn opposite_copies_on_two_threads_over_owners() {
    let _g = serial();
    opposite_directions(Base::Owner);
}

// ---------------------------------------------------------------------------------------------
// Drop-order matrix.
//
// Every kind of owner, every order of release its ownership allows, with the last work on the
// views queued on an idle or a busy second stream. What the borrow checker rules out:
// - dropping a `DeviceArray` or a `CudaSlice` before a view that borrows it (`view_mut`,
//   `DeviceViewMut::from(&mut slice)`, `DeviceSpanMut::from_cuda_mut`): the view holds a borrow
//   of it, so `drop(owner)` is a move out of a borrowed value (E0505). Their views can still be
//   dropped on another thread, through `std::thread::scope`, and the streams and context can
//   still be dropped first, since the borrowed owner holds its own stream;
// - an exported `DeviceArray` has no owner handle left to drop first: `into_dlpack` consumed it,
//   and the imported views are its only handles.
// Owners held by `Arc` (an `Arc<CudaSlice>`, a custom owner, a DLPack producer's allocation, a
// pinned buffer) allow every order.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// Views, then the user's owner handle.
    ViewsFirst,
    /// The user's owner handle while the views live, then the views.
    OwnerFirst,
    /// Views dropped on another thread, then the owner handle.
    ViewsOnAnotherThread,
    /// Every `Arc<CudaStream>` / `Arc<CudaContext>` the test holds, then the views, then the
    /// owner handle.
    HandlesFirst,
}

const ORDERS: [Order; 4] = [
    Order::ViewsFirst,
    Order::OwnerFirst,
    Order::ViewsOnAnotherThread,
    Order::HandlesFirst,
];

/// The test's own handles on the context and streams.
struct Handles {
    ctx: Arc<CudaContext>,
    s1: Arc<CudaStream>,
    s2: Arc<CudaStream>,
}

/// Drops `views`, `owner` and `handles` in `order`; returns `s1` unless it was dropped.
fn drop_in_order<V: Send>(
    order: Order,
    views: V,
    owner: OwnerHandle,
    handles: Handles,
    counts: &Counts,
) -> Option<Arc<CudaStream>> {
    match order {
        Order::ViewsFirst => {
            drop(views);
            drop(owner);
        }
        Order::OwnerFirst => {
            assert!(owner.is_some(), "OwnerFirst needs an owner held by Arc");
            drop(owner);
            for (name, count) in counts {
                assert_eq!(count(), 0, "{name}: released while views are alive");
            }
            drop(views);
        }
        Order::ViewsOnAnotherThread => {
            std::thread::scope(|sc| {
                sc.spawn(move || drop(views));
            });
            drop(owner);
        }
        Order::HandlesFirst => {
            let Handles { ctx, s1, s2 } = handles;
            drop(s1);
            drop(s2);
            drop(ctx);
            drop(views);
            drop(owner);
            return None;
        }
    }
    Some(handles.s1)
}

/// One case of the matrix: the memory (`MATRIX_ELEMS` of `INIT`) is viewed as two rows; on s2
/// (busy or not) row 0 is filled with `WRITTEN` and copied out, row 1 is copied out; everything
/// is dropped in `order`; the memory is reallocated and overwritten. The copies must hold
/// `WRITTEN` and `INIT`, the fresh allocation its own values, every counter 1.
fn matrix_case(kind: Kind, order: Order, busy_ms: Option<u64>) -> Result<(), String> {
    let what = format!(
        "{kind:?}, {order:?}, {} stream",
        if busy_ms.is_some() { "busy" } else { "idle" }
    );
    let ctx = devspan::context(0).unwrap();
    let s1 = ctx.new_stream().unwrap();
    let s2 = ctx.new_stream().unwrap();
    let half = MATRIX_ELEMS / 2;
    let mut dst = DeviceArray::<f32, Ix2>::zeros(&s2, (2, half)).unwrap();
    s2.synchronize().unwrap();
    let host = vec![INIT; MATRIX_ELEMS];
    let (released, s1) = with_memory(kind, s1, &host, |sub| {
        let Subject {
            view,
            owner,
            s1,
            counts,
        } = sub;
        let (mut h1, h2) = view
            .into_shape_with_order((2, half))
            .unwrap()
            .split_at(Axis(0), 1);
        if let Some(ms) = busy_ms {
            busy(&s2, ms);
        }
        h1.fill_on(&s2, WRITTEN).unwrap();
        dst.view_mut()
            .slice_mut(s![0..1, ..])
            .assign_on(&s2, &h1.view())
            .unwrap();
        let r = h2.into_view();
        dst.view_mut()
            .slice_mut(s![1..2, ..])
            .assign_on(&s2, &r)
            .unwrap();
        let strided = r.slice(s![.., ..;2]);
        drop_in_order(
            order,
            (h1, r, strided),
            owner,
            Handles { ctx, s1, s2 },
            counts,
        )
    });
    check_counts(&released, &what)?;
    let stream = s1.unwrap_or_else(|| devspan::new_stream(0).unwrap());
    check_fresh(&released, &stream, MATRIX_ELEMS, Some(REUSED), &what)?;
    let d = dst.to_host().unwrap();
    let bad0 = count_ne(d.row(0).as_slice().unwrap(), WRITTEN);
    let bad1 = count_ne(d.row(1).as_slice().unwrap(), INIT);
    if bad0 + bad1 > 0 {
        return Err(format!(
            "{what}: the copies out of the views differ in {bad0} (written row) and {bad1} \
             (read row) elements"
        ));
    }
    Ok(())
}

/// Every allowed order, idle and busy, for `kind`; all failures are reported together.
fn matrix(kind: Kind) {
    let mut fails = Vec::new();
    for order in ORDERS {
        if order == Order::OwnerFirst && !kind.owner_held_by_arc() {
            continue; // ruled out by the borrow checker, or no owner handle exists (see above)
        }
        for busy_ms in [None, Some(BUSY_MS)] {
            fails.extend(matrix_case(kind, order, busy_ms).err());
        }
    }
    assert_all_ok(&fails);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn drop_orders_of_a_borrowed_array() {
    let _g = serial();
    matrix(Kind::ArrayBorrowed);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn drop_orders_of_an_exported_array() {
    let _g = serial();
    matrix(Kind::ArrayExported);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn drop_orders_of_a_borrowed_cuda_slice() {
    let _g = serial();
    matrix(Kind::SliceBorrowed);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn drop_orders_of_a_cuda_slice_owner() {
    let _g = serial();
    matrix(Kind::SliceOwned);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn drop_orders_of_a_custom_owner() {
    let _g = serial();
    matrix(Kind::Custom);
    matrix(Kind::CustomReleaseStream);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn drop_orders_of_a_dlpack_producer() {
    let _g = serial();
    matrix(Kind::Producer);
}

/// Runs the test `name` of this binary again in a child process and checks that it passed
/// there; `body` is what runs in the child. A kernel touching freed pinned memory faults, and
/// the fault's sticky error would spoil every later test of the process.
fn in_child_process(name: &str, body: impl FnOnce()) {
    const VAR: &str = "DEVSPAN_LIFETIMES_CHILD";
    if std::env::var(VAR).as_deref() == Ok(name) {
        body();
        return;
    }
    // The test's name as the harness knows it: its module path inside this test crate.
    let test = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    };
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            test.as_str(),
            "--exact",
            "--include-ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(VAR, name)
        .output()
        .expect("start the child test process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!(
        "--- child process:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name} failed in its child process: {}",
        out.status
    );
    assert!(
        stdout.contains("1 passed"),
        "the child process did not run {name}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn drop_orders_of_a_pinned_buffer_owner() {
    let _g = serial();
    in_child_process("drop_orders_of_a_pinned_buffer_owner", || {
        matrix(Kind::Pinned)
    });
}

/// A `PinnedBuffer` as the host end of transfers queued on a (busy) stream, dropped in every
/// order: its own drop waits for the copies, so neither the upload's destination nor a new
/// buffer that reuses its memory sees wrong values.
#[test]
#[ignore = "needs a CUDA GPU"]
fn drop_orders_of_a_pinned_transfer_buffer() {
    let _g = serial();
    let n = MATRIX_ELEMS;
    let host = pattern(n, 9);
    let mut fails = Vec::new();
    for order in [
        Order::OwnerFirst,
        Order::ViewsOnAnotherThread,
        Order::HandlesFirst,
    ] {
        for busy_ms in [None, Some(BUSY_MS)] {
            for upload in [true, false] {
                let what = format!(
                    "pinned {}, {order:?}, {} stream",
                    if upload { "upload" } else { "download" },
                    if busy_ms.is_some() { "busy" } else { "idle" }
                );
                let ctx = devspan::context(0).unwrap();
                let s2 = ctx.new_stream().unwrap();
                let mut dev = DeviceArray::<f32, Ix1>::zeros(&s2, n).unwrap();
                if !upload {
                    dev.fill_on(&s2, WRITTEN).unwrap();
                }
                s2.synchronize().unwrap();
                let mut buf = PinnedBuffer::from_slice(&ctx, &host).unwrap();
                let ptr = buf.as_slice().unwrap().as_ptr().addr();
                if let Some(ms) = busy_ms {
                    busy(&s2, ms);
                }
                if upload {
                    buf.copy_to_device(&s2, &mut dev.view_mut()).unwrap();
                } else {
                    buf.copy_from_device(&s2, &dev.view()).unwrap();
                }
                match order {
                    Order::HandlesFirst => {
                        drop(s2);
                        drop(ctx);
                        drop(buf);
                    }
                    Order::ViewsOnAnotherThread => {
                        std::thread::spawn(move || drop(buf)).join().unwrap();
                    }
                    _ => drop(buf),
                }
                // A new buffer of the same size, likely at the same address, overwritten.
                let ctx = devspan::context(0).unwrap();
                let mut fresh = PinnedBuffer::<f32>::zeros(&ctx, n).unwrap();
                let reused = fresh.as_slice().unwrap().as_ptr().addr() == ptr;
                fresh.as_mut_slice().unwrap().fill(REUSED);
                ctx.synchronize().unwrap();
                println!("{what}: the next pinned buffer reused the memory: {reused}");
                let bad_fresh = count_ne(fresh.as_slice().unwrap(), REUSED);
                let got = dev.to_host().unwrap();
                let bad_dev = if upload {
                    count_diff(got.as_slice().unwrap(), &host)
                } else {
                    count_ne(got.as_slice().unwrap(), WRITTEN)
                };
                if bad_fresh + bad_dev > 0 {
                    fails.push(format!(
                        "{what}: {bad_fresh} elements of a new pinned buffer and {bad_dev} of the \
                         device array are wrong"
                    ));
                }
            }
        }
    }
    assert_all_ok(&fails);
}

// ---------------------------------------------------------------------------------------------
// Views built separately over one `SharedOwner`, as a binding rebuilds them for every call.

/// Views built one after another over one [`SharedOwner`] share its log: a read through a new
/// view on stream B sees a write through an earlier one on a busy stream A; a write through a
/// new view on B waits for a copy out of an earlier one still queued on busy A; and when the
/// last view and the handle go while a write is queued on busy A, the owner is released once,
/// after that write (a fresh allocation of the block on A reads zeros).
#[test]
#[ignore = "needs a CUDA GPU"]
fn views_built_separately_over_one_shared_owner_share_its_log() {
    let _g = serial();
    let what = "views over one SharedOwner";
    let sa = devspan::new_stream(0).unwrap();
    let sb = devspan::new_stream(0).unwrap();
    let host = pattern(ELEMS, 5);
    let n = host.len();
    let slice = sa.clone_htod(&host).unwrap();
    sa.synchronize().unwrap();
    let ptr = interop::cuda_slice_address(&slice);
    let drops = Arc::new(AtomicUsize::new(0));
    let shared = SharedOwner::new(Arc::new(SliceOwner {
        slice,
        drops: drops.clone(),
        release: false,
    }));
    // SAFETY: `shared` owns the slice of `n` f32 at `ptr` on device 0; nothing else uses it.
    let view = || unsafe {
        DeviceViewMut::<f32, Ix1>::from_raw_parts_mut_shared(ptr, n, Ix1(n), &[1], 0, 0, &shared)
            .unwrap()
    };
    let mut fails = Vec::new();

    busy(&sa, BUSY_MS);
    view().fill_on(&sa, WRITTEN).unwrap();
    if shared.is_settled() {
        fails.push(format!(
            "{what}: settled while a write was queued on a busy stream"
        ));
    }
    let read = view().view().to_host_on(&sb).unwrap();
    let bad = count_ne(read.as_slice().unwrap(), WRITTEN);
    if bad > 0 {
        fails.push(format!(
            "{what}: a read on stream B missed {bad} elements of a write on stream A"
        ));
    }

    let mut copy = DeviceArray::<f32, Ix1>::zeros(&sa, n).unwrap();
    busy(&sa, BUSY_MS);
    copy.assign_on(&sa, &view().view()).unwrap();
    view().fill_on(&sb, REUSED).unwrap();
    let copied = copy.to_host_on(&sa).unwrap();
    let bad = count_ne(copied.as_slice().unwrap(), WRITTEN);
    if bad > 0 {
        fails.push(format!(
            "{what}: a write on stream B overtook a copy queued on stream A in {bad} elements"
        ));
    }
    let last = view().view().to_host_on(&sa).unwrap();
    let bad = count_ne(last.as_slice().unwrap(), REUSED);
    if bad > 0 {
        fails.push(format!(
            "{what}: {bad} elements missed the write on stream B"
        ));
    }
    shared.wait_host();
    if !shared.is_settled() {
        fails.push(format!("{what}: not settled after wait_host"));
    }

    busy(&sa, BUSY_MS);
    let mut v = view();
    v.fill_on(&sa, WRITTEN).unwrap();
    drop(shared);
    if drops.load(Ordering::SeqCst) != 0 {
        fails.push(format!(
            "{what}: the owner was released while a view was alive"
        ));
    }
    drop(v);
    let released = Released {
        ptr,
        counts: vec![(
            "owner drops",
            Box::new(move || drops.load(Ordering::SeqCst)),
        )],
        host_memory: false,
    };
    if let Err(e) = check_counts(&released, what) {
        fails.push(e);
    }
    if let Err(e) = check_fresh(&released, &sa, n, None, what) {
        fails.push(e);
    }
    assert_all_ok(&fails);
}

// ---------------------------------------------------------------------------------------------
// Fences: an operation records one per stream and notes it in every owner log it touched.

/// A view over `slice`'s memory whose log is `owner`'s.
fn shared_view(
    slice: &CudaSlice<f32>,
    owner: &Arc<SharedOwner>,
) -> devspan::DeviceViewMut<'static, f32, Ix1> {
    let n = slice.len();
    // SAFETY: the slice owns `n` f32 at its address on device 0; the test keeps it alive (the
    // owner's handle on it is the `Arc` the caller made) until the streams are synchronised.
    unsafe {
        devspan::DeviceViewMut::from_raw_parts_mut_shared(
            devspan::interop::cuda_slice_address(slice),
            n,
            Ix1(n),
            &[1],
            0,
            0,
            owner,
        )
    }
    .unwrap()
}

/// A copy between views of two owners, queued behind a busy kernel, notes one fence in both
/// logs: before it completes neither log knows it has, and the one query allowed finds it
/// pending; once the stream is done, one query settles the first owner, and the second then
/// knows it too without asking the driver. The copied values arrive. Then a write on the busy
/// legacy default stream, read on a non-blocking stream, is seen there (the legacy stream is not
/// made to wait for itself; the other stream waits for it).
#[test]
#[ignore = "needs a CUDA GPU"]
fn one_operation_notes_one_fence_in_every_owner_it_touches() {
    let _g = serial();
    let legacy = devspan::default_stream(0).unwrap();
    let other = devspan::new_stream(0).unwrap();
    let n = ORDER_ELEMS;
    let host = pattern(n, 11);
    let a = Arc::new(legacy.clone_htod(&host).unwrap());
    let b = Arc::new(legacy.alloc_zeros::<f32>(n).unwrap());
    legacy.synchronize().unwrap();
    let oa = SharedOwner::new(a.clone());
    let ob = SharedOwner::new(b.clone());
    let mut va = shared_view(&a, &oa);
    let mut vb = shared_view(&b, &ob);
    // The kernels' first use loads their module, which may wait for the whole device: load it
    // before the busy kernel.
    vb.fill_on(&legacy, INIT).unwrap();
    vb.assign_on(&legacy, &va.view()).unwrap();
    legacy.synchronize().unwrap();

    busy(&legacy, BUSY_MS);
    vb.assign_on(&legacy, &va.view()).unwrap();
    assert!(!oa.is_known_settled() && !ob.is_known_settled());
    let mut queries = 1;
    assert!(
        !ob.is_settled_asking(&mut queries),
        "a copy behind a busy kernel was reported complete"
    );
    assert_eq!(queries, 0, "the query allowed was not used");
    assert!(
        !oa.is_settled_asking(&mut queries),
        "no query was allowed, and nothing is known yet"
    );
    legacy.synchronize().unwrap();
    let mut queries = 1;
    assert!(ob.is_settled_asking(&mut queries));
    assert_eq!(queries, 0);
    assert!(
        oa.is_settled_asking(&mut queries),
        "the source's log did not share the fence the destination's log saw complete"
    );
    assert!(oa.is_known_settled() && ob.is_known_settled());

    busy(&legacy, BUSY_MS);
    va.fill_on(&legacy, WRITTEN).unwrap();
    let got_a = va.view().to_host_on(&other).unwrap();
    let got_b = vb.view().to_host_on(&other).unwrap();
    assert_eq!(
        count_ne(got_a.as_slice().unwrap(), WRITTEN),
        0,
        "a write on the busy legacy stream, read on another stream"
    );
    assert_eq!(
        count_diff(got_b.as_slice().unwrap(), &host),
        0,
        "the copy's values"
    );
    other.synchronize().unwrap();
    drop((va, vb));
    drop((oa, ob));
    legacy.synchronize().unwrap();
}

/// A fence seen complete makes every fence recorded before it on the same stream known
/// complete, without asking the driver, and nothing on another stream: after two records on
/// one stream and a query of the later, the earlier owner is known settled, while a record on
/// a second, busy stream is neither known nor reported settled.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_fence_seen_complete_settles_the_earlier_fences_of_its_stream_only() {
    let _g = serial();
    let s1 = devspan::new_stream(0).unwrap();
    let s2 = devspan::new_stream(0).unwrap();
    let bufs: Vec<Arc<CudaSlice<f32>>> = (0..4)
        .map(|_| Arc::new(s1.alloc_zeros::<f32>(16).unwrap()))
        .collect();
    let owners: Vec<Arc<SharedOwner>> = bufs.iter().map(|b| SharedOwner::new(b.clone())).collect();
    let (oa, ob, oc, od) = (&owners[0], &owners[1], &owners[2], &owners[3]);
    busy(&s2, 10); // loads the module
    s1.synchronize().unwrap();
    s2.synchronize().unwrap();

    busy(&s2, BUSY_MS);
    oc.record(&s2, true).unwrap();
    oa.record(&s1, true).unwrap();
    ob.record(&s1, false).unwrap();
    od.record(&s1, false).unwrap();
    s1.synchronize().unwrap();
    assert!(
        !oa.is_known_settled() && !ob.is_known_settled(),
        "nothing was asked yet"
    );
    let mut queries = 1;
    assert!(ob.is_settled_asking(&mut queries));
    assert_eq!(
        queries, 0,
        "the second record of the stream was asked about"
    );
    assert!(
        oa.is_known_settled(),
        "the first record of the stream is not known complete after the second was seen so"
    );
    assert!(
        !od.is_known_settled(),
        "a later record of the stream was taken as complete from an earlier one"
    );
    assert!(
        !oc.is_known_settled(),
        "a record on another stream was taken as complete"
    );
    let mut queries = 1;
    assert!(
        !oc.is_settled_asking(&mut queries),
        "a record behind a busy kernel was reported complete"
    );
    s2.synchronize().unwrap();
    let mut queries = 2;
    assert!(oc.is_settled_asking(&mut queries) && od.is_settled_asking(&mut queries));
    drop(owners);
    drop(bufs);
}
