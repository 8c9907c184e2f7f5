//! GPU tests of faults: device out-of-memory (real and injected), page-locked out-of-memory
//! and a failed chunk copy in the middle of a staged transfer (injected with
//! `devspan::internals::inject`), and an owner whose drop panics.
//!
//! The contract they check: a failed operation returns `Err`, leaks no device memory and never
//! hangs; a fault that strikes before any copy into the destination is enqueued (an
//! allocation) leaves the destination untouched; a chunk copy that fails in the middle of a
//! transfer leaves each destination element holding either its old value or the value the
//! transfer would have written (which elements is unspecified), except that an upload through a
//! device temporary leaves the destination untouched. Afterwards the same transfer succeeds.
//!
//! Every test takes the GPU lock exclusively (`common::gpu_exclusive`): the injected faults are
//! process-wide and the free-memory readings need the device to themselves.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaSlice, CudaStream, DriverError};
use devspan::internals::{Fault, inject, transfer_path};
use devspan::testing::gpu_stream;
use devspan::{DeviceArray, DeviceOwner, DeviceViewMut, ErrorKind, Result, TransferOptions};
use ndarray::{Array2, Ix1, Ix2};
use rand::{SeedableRng, rngs::StdRng};

use crate::common::{gpu_exclusive, random, unless_sanitized, watchdog};

/// Rows and columns of the device arrays of the transfer tests (32 MiB of `u32`).
const R: usize = 2048;
const C: usize = 4096;

/// What the destinations hold before a transfer that fails.
const POISON: u32 = 0xdead_beef;

/// Device memory a failed transfer may leave in use: half of one transfer's device temporary.
const SLACK: usize = 16 << 20;

/// Device memory in use (total minus free), after synchronising `stream`.
fn device_memory_used(stream: &Arc<CudaStream>) -> usize {
    stream.synchronize().unwrap();
    let (free, total) = cudarc::driver::result::mem_get_info().unwrap();
    total - free
}

fn random_2d(rng: &mut StdRng, rows: usize, cols: usize) -> Array2<u32> {
    random::<u32>(rng, &[rows, cols])
        .into_dimensionality::<Ix2>()
        .unwrap()
}

/// Staging chunks larger than any earlier test of the process asked for, so that the staging
/// pool has none to hand out and the transfer allocates page-locked memory.
fn fresh_chunk_bytes() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(8 << 20);
    NEXT.fetch_add(1 << 16, Ordering::SeqCst) + (1 << 16)
}

/// Asserts that `r` is the injected error of `fault`.
#[track_caller]
fn assert_injected(r: Result<()>, fault: Fault, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.kind(), &ErrorKind::Driver(fault.error()), "{what}: {e:?}");
}

/// Asserts that every element of `got` is either the old value (`POISON`) or the value of
/// `want` at the same place.
#[track_caller]
fn assert_old_or_new(got: &Array2<u32>, want: &Array2<u32>, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    let stray = got
        .iter()
        .zip(want.iter())
        .filter(|&(&g, &w)| g != POISON && g != w)
        .count();
    assert_eq!(stray, 0, "{what}: elements that are neither old nor new");
}

/// An upload from a column-major host array into a row-major device array (device path
/// `staged`) in which `fault` strikes after `after` checks: `Err`, the device array keeps its
/// poison, no device memory is left in use, and the same upload then succeeds.
fn failed_staged_upload(
    stream: &Arc<CudaStream>,
    fault: Fault,
    after: usize,
    opt: TransferOptions,
) {
    let mut rng = StdRng::seed_from_u64(after as u64 + 17);
    let host = random_2d(&mut rng, C, R);
    let mut dev = DeviceArray::<u32, _>::zeros(stream, (R, C)).unwrap();
    let path = transfer_path(&[R, C], host.t().strides(), &[C as isize, 1], 4, true);
    assert!(path.ends_with("/staged"), "{path}");
    // Loads the kernels of the path and warms the pool at the default chunk size.
    dev.view_mut().copy_from_host_on(stream, &host.t()).unwrap();
    dev.fill_on(stream, POISON).unwrap();
    let before = device_memory_used(stream);
    let guard = inject(fault, after);
    let r = dev.view_mut().copy_from_host_with(stream, &host.t(), &opt);
    assert!(
        guard.fired(),
        "{fault:?} after {after}: the fault did not strike"
    );
    drop(guard);
    assert_injected(r, fault, &format!("upload, {fault:?} after {after}"));
    let used = device_memory_used(stream);
    assert!(
        !unless_sanitized("free device memory check") || used <= before + SLACK,
        "{fault:?} after {after}: device memory in use grew from {before} to {used} bytes"
    );
    assert!(
        dev.to_host_on(stream).unwrap().iter().all(|&x| x == POISON),
        "{fault:?} after {after}: the failed upload wrote the destination"
    );
    dev.view_mut()
        .copy_from_host_with(stream, &host.t(), &opt)
        .unwrap();
    assert!(
        dev.to_host_on(stream).unwrap() == host.t(),
        "{fault:?}: upload after the fault"
    );
}

/// A download from a transposed device view into a row-major host array (device path
/// `staged`) in which `fault` strikes after `after` checks: `Err`, the host array keeps its
/// poison, no device memory is left in use, and the same download then succeeds.
fn failed_staged_download(
    stream: &Arc<CudaStream>,
    fault: Fault,
    after: usize,
    opt: TransferOptions,
) {
    let mut rng = StdRng::seed_from_u64(after as u64 + 29);
    let data = random_2d(&mut rng, R, C);
    let dev = DeviceArray::from_host(stream, &data.view()).unwrap();
    let mut out = Array2::<u32>::from_elem((C, R), POISON);
    let dv = dev.view();
    let vt = dv.t();
    let path = transfer_path(vt.shape(), out.strides(), vt.strides(), 4, false);
    assert!(path.ends_with("/staged"), "{path}");
    vt.copy_to_host_on(stream, &mut out.view_mut()).unwrap();
    out.fill(POISON);
    let before = device_memory_used(stream);
    let guard = inject(fault, after);
    let r = vt.copy_to_host_with(stream, &mut out.view_mut(), &opt);
    assert!(
        guard.fired(),
        "{fault:?} after {after}: the fault did not strike"
    );
    drop(guard);
    assert_injected(r, fault, &format!("download, {fault:?} after {after}"));
    let used = device_memory_used(stream);
    assert!(
        !unless_sanitized("free device memory check") || used <= before + SLACK,
        "{fault:?} after {after}: device memory in use grew from {before} to {used} bytes"
    );
    assert!(
        out.iter().all(|&x| x == POISON),
        "{fault:?} after {after}: the failed download wrote the destination"
    );
    vt.copy_to_host_with(stream, &mut out.view_mut(), &opt)
        .unwrap();
    assert!(out == data.t(), "{fault:?}: download after the fault");
}

/// More bytes than the device has: `Err(Driver(CUDA_ERROR_OUT_OF_MEMORY))`, and device memory
/// in use stays where it was.
#[test]
#[ignore = "needs a CUDA GPU"]
fn allocating_more_than_the_device_has_is_an_error_and_leaks_nothing() {
    if !crate::common::unless_tool("memcheck", "device out-of-memory provoked on purpose") {
        return;
    }
    let _gpu = gpu_exclusive();
    let stream = gpu_stream();
    let (_, total) = cudarc::driver::result::mem_get_info().unwrap();
    let before = device_memory_used(&stream);
    let e = DeviceArray::<u8, _>::zeros(&stream, total + (1 << 30)).unwrap_err();
    assert_eq!(
        e.kind(),
        &ErrorKind::Driver(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)),
        "{e:?}"
    );
    let e = DeviceArray::<f64, _>::zeros(&stream, (total / 8 / 1024 + 1024, 1024)).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Driver(_)), "{e:?}");
    let used = device_memory_used(&stream);
    assert!(
        !unless_sanitized("free device memory check") || used <= before + SLACK,
        "device memory in use grew from {before} to {used} bytes"
    );
    // The device still allocates and computes.
    let mut a = DeviceArray::<u32, _>::zeros(&stream, (64, 64)).unwrap();
    a.fill_on(&stream, 7).unwrap();
    assert!(a.to_host_on(&stream).unwrap().iter().all(|&x| x == 7));
}

/// Operations that allocate their result (`to_contiguous`, `cast`) while nearly all device
/// memory is held: `Err`, the source intact, no device memory left in use; once the memory is
/// freed they succeed.
#[test]
#[ignore = "needs a CUDA GPU"]
fn allocating_operations_fail_cleanly_when_device_memory_runs_out() {
    if !crate::common::unless_tool("memcheck", "device out-of-memory provoked on purpose") {
        return;
    }
    let _gpu = gpu_exclusive();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(3);
    // 256 MiB of source; the results need 256 MiB (to_contiguous) and 512 MiB (cast to f64).
    let n = 8192;
    let data = random_2d(&mut rng, n, n);
    let src = DeviceArray::from_host(&stream, &data.view()).unwrap();
    // Loads the kernels first, so that what fails below is the result's allocation.
    {
        let small = DeviceArray::<u32, _>::zeros(&stream, (64, 32)).unwrap();
        small.view().t().to_contiguous().unwrap();
        small.cast::<f64>().unwrap();
    }
    let before = device_memory_used(&stream);
    // Holds all but a little of the free memory.
    let (free, _) = cudarc::driver::result::mem_get_info().unwrap();
    let hog = [96usize, 128, 160, 192]
        .into_iter()
        .find_map(|mib| DeviceArray::<u8, _>::zeros(&stream, free - (mib << 20)).ok())
        .expect("allocate all but 96 to 192 MiB of the free device memory");
    stream.synchronize().unwrap();
    let (left, _) = cudarc::driver::result::mem_get_info().unwrap();
    assert!(left < 256 << 20, "{left} bytes left free");
    let e = src.view().t().to_contiguous().unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Driver(_)),
        "to_contiguous: {e:?}"
    );
    let e = src.cast::<f64>().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Driver(_)), "cast: {e:?}");
    drop(hog);
    let used = device_memory_used(&stream);
    assert!(
        !unless_sanitized("free device memory check") || used <= before + SLACK,
        "device memory in use grew from {before} to {used} bytes"
    );
    assert!(
        src.to_host_on(&stream).unwrap() == data,
        "the source changed"
    );
    let t = src.view().t().to_contiguous().unwrap();
    assert!(t.to_host_on(&stream).unwrap() == data.t());
    let f = src.cast::<f64>().unwrap();
    let fh = f.to_host_on(&stream).unwrap();
    assert!(fh.iter().zip(data.iter()).all(|(&a, &b)| a == f64::from(b)));
}

/// Injected out-of-memory for the device temporary of staged uploads and downloads.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_temporary_out_of_memory_leaves_the_destination_untouched() {
    let _gpu = gpu_exclusive();
    let stream = gpu_stream();
    let opt = TransferOptions::default();
    failed_staged_upload(&stream, Fault::DeviceAlloc, 0, opt);
    failed_staged_download(&stream, Fault::DeviceAlloc, 0, opt);
}

/// Injected out-of-memory for the first and for a later page-locked staging chunk, uploads and
/// downloads (the device temporary is allocated by then and must be freed).
#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_out_of_memory_leaves_the_destination_untouched() {
    let _gpu = gpu_exclusive();
    let stream = gpu_stream();
    // Two workers of two chunks each: four chunks, all new (`fresh_chunk_bytes`).
    for after in [0, 3] {
        let opt = |chunk_bytes| TransferOptions {
            chunk_bytes,
            threads: 2,
            ..TransferOptions::default()
        };
        failed_staged_upload(&stream, Fault::PinnedAlloc, after, opt(fresh_chunk_bytes()));
        failed_staged_download(&stream, Fault::PinnedAlloc, after, opt(fresh_chunk_bytes()));
    }
}

/// A chunk copy that fails in the middle of a staged transfer of 512 chunks on four workers:
/// `Err` within the watchdog's limit; the destination holds old or new values (untouched for
/// an upload through a device temporary); the same transfer then succeeds. Also through the
/// asynchronous download, whose `wait` (or start) reports the failure.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_chunk_copy_failing_mid_transfer_stops_every_worker_and_returns_err() {
    let _gpu = gpu_exclusive();
    let stream = gpu_stream();
    let opt = TransferOptions {
        chunk_bytes: 64 << 10,
        threads: 4,
        ..TransferOptions::default()
    };
    let limit = Duration::from_secs(60);
    // Through a device temporary: untouched.
    {
        let stream = stream.clone();
        watchdog("staged upload, chunk copy fault", limit, move || {
            failed_staged_upload(&stream, Fault::HostDeviceCopy, 200, opt)
        });
    }
    // Straight into the destination (contiguous on both sides, pageable host memory: staged
    // through page-locked chunks, no device temporary): old or new values.
    let s = stream.clone();
    watchdog(
        "direct upload and download, chunk copy fault",
        limit,
        move || {
            let stream = s;
            let mut rng = StdRng::seed_from_u64(5);
            let host = random_2d(&mut rng, R, C);
            let path = transfer_path(&[R, C], host.strides(), &[C as isize, 1], 4, true);
            assert!(path.ends_with("/direct"), "{path}");
            let mut dev = DeviceArray::<u32, _>::zeros(&stream, (R, C)).unwrap();
            dev.fill_on(&stream, POISON).unwrap();
            let guard = inject(Fault::HostDeviceCopy, 300);
            let r = dev
                .view_mut()
                .copy_from_host_with(&stream, &host.view(), &opt);
            assert!(guard.fired());
            drop(guard);
            assert_injected(r, Fault::HostDeviceCopy, "direct upload");
            assert_old_or_new(&dev.to_host_on(&stream).unwrap(), &host, "direct upload");
            dev.view_mut()
                .copy_from_host_with(&stream, &host.view(), &opt)
                .unwrap();
            assert!(dev.to_host_on(&stream).unwrap() == host);

            let mut out = Array2::<u32>::from_elem((R, C), POISON);
            let guard = inject(Fault::HostDeviceCopy, 300);
            let r = dev
                .view()
                .copy_to_host_with(&stream, &mut out.view_mut(), &opt);
            assert!(guard.fired());
            drop(guard);
            assert_injected(r, Fault::HostDeviceCopy, "direct download");
            assert_old_or_new(&out, &host, "direct download");
            dev.view()
                .copy_to_host_with(&stream, &mut out.view_mut(), &opt)
                .unwrap();
            assert!(out == host);
        },
    );
    // A download through a device temporary: old or new values.
    let s = stream.clone();
    watchdog("staged download, chunk copy fault", limit, move || {
        let stream = s;
        let mut rng = StdRng::seed_from_u64(6);
        let data = random_2d(&mut rng, R, C);
        let dev = DeviceArray::from_host(&stream, &data.view()).unwrap();
        let (dv, mut out) = (dev.view(), Array2::<u32>::from_elem((C, R), POISON));
        let guard = inject(Fault::HostDeviceCopy, 200);
        let r = dv.t().copy_to_host_with(&stream, &mut out.view_mut(), &opt);
        assert!(guard.fired());
        drop(guard);
        assert_injected(r, Fault::HostDeviceCopy, "staged download");
        assert_old_or_new(&out, &data.t().to_owned(), "staged download");
        dv.t()
            .copy_to_host_with(&stream, &mut out.view_mut(), &opt)
            .unwrap();
        assert!(out == data.t());
    });
    // Asynchronous downloads (default options: 4 MiB chunks): straight from the device array
    // (the failure comes from `wait`) and through a device temporary (the chunk copies are
    // enqueued when the transfer starts, so the failure may come from the start).
    let s = stream.clone();
    watchdog(
        "asynchronous downloads, chunk copy fault",
        limit,
        move || {
            let stream = s;
            let mut rng = StdRng::seed_from_u64(7);
            let data = random_2d(&mut rng, R, C);
            let dev = DeviceArray::from_host(&stream, &data.view()).unwrap();
            let dv = dev.view();
            let mut out = Array2::<u32>::from_elem((R, C), POISON);
            let guard = inject(Fault::HostDeviceCopy, 3);
            let t = dv.copy_to_host_async_on(&stream, &mut out).unwrap();
            assert_injected(t.wait(), Fault::HostDeviceCopy, "asynchronous download");
            assert!(guard.fired());
            drop(guard);
            assert_old_or_new(&out, &data, "asynchronous download");
            dv.copy_to_host_async_on(&stream, &mut out)
                .unwrap()
                .wait()
                .unwrap();
            assert!(out == data);

            let mut out = Array2::<u32>::from_elem((C, R), POISON);
            let guard = inject(Fault::HostDeviceCopy, 3);
            let r = dv
                .t()
                .copy_to_host_async_on(&stream, &mut out)
                .and_then(|t| t.wait());
            assert!(guard.fired());
            drop(guard);
            assert_injected(r, Fault::HostDeviceCopy, "asynchronous gathered download");
            assert!(
                out.iter().all(|&x| x == POISON),
                "a download that failed to start wrote the host"
            );
            dv.t()
                .copy_to_host_async_on(&stream, &mut out)
                .unwrap()
                .wait()
                .unwrap();
            assert!(out == data.t());
        },
    );
}

/// Device memory whose owner panics when dropped.
struct PanickingOwner {
    _slice: CudaSlice<u32>,
}

impl DeviceOwner for PanickingOwner {}

impl Drop for PanickingOwner {
    fn drop(&mut self) {
        panic!("owner drop panics");
    }
}

/// A view over `n` elements owned by a [`PanickingOwner`], filled with 5 (so that the owner's
/// log has work to wait for when it is dropped).
fn panicking_view(stream: &Arc<CudaStream>, n: usize) -> DeviceViewMut<'static, u32, Ix1> {
    let slice = stream.alloc_zeros::<u32>(n).unwrap();
    let ptr = devspan::interop::cuda_slice_address(&slice);
    // SAFETY: the slice owns the `n` elements at `ptr` on the stream's device and is moved
    // into the owner, which the view keeps alive.
    let mut v = unsafe {
        DeviceViewMut::from_raw_parts_mut(
            ptr,
            n,
            Ix1(n),
            &[1],
            0,
            stream.context().ordinal(),
            Arc::new(PanickingOwner { _slice: slice }) as Arc<dyn DeviceOwner>,
        )
    }
    .unwrap();
    v.fill_on(stream, 5).unwrap();
    v
}

/// Fills, copies and transfers (through the staging pool and a device temporary) on new
/// memory, checked.
fn everything_still_works(stream: &Arc<CudaStream>) {
    let mut rng = StdRng::seed_from_u64(13);
    let host = random_2d(&mut rng, 300, 500);
    let mut a = DeviceArray::<u32, _>::zeros(stream, (500, 300)).unwrap();
    a.view_mut().copy_from_host_on(stream, &host.t()).unwrap();
    let b = a.view().t().to_contiguous().unwrap();
    assert!(b.to_host_on(stream).unwrap() == host);
    let mut out = Array2::<u32>::from_elem((300, 500), POISON);
    a.view()
        .t()
        .copy_to_host_on(stream, &mut out.view_mut())
        .unwrap();
    assert!(out == host);
    a.fill_on(stream, 9).unwrap();
    assert!(a.to_host_on(stream).unwrap().iter().all(|&x| x == 9));
}

/// The drop of the last view of a custom owner drops the owner on that thread; a panic in the
/// owner's drop propagates from there (as from any value's drop). devspan's state is not
/// poisoned: kernels, staging pool and later views work, on this thread and on others.
#[test]
#[ignore = "needs a CUDA GPU"]
fn an_owner_that_panics_on_drop_poisons_nothing() {
    let _gpu = gpu_exclusive();
    let stream = gpu_stream();
    everything_still_works(&stream);
    let before = device_memory_used(&stream);
    // On this thread.
    let v = panicking_view(&stream, 1 << 20).into_view();
    let w = v.clone().slice_move(ndarray::s![..1000]);
    drop(v);
    let panic = std::panic::catch_unwind(AssertUnwindSafe(move || drop(w)))
        .expect_err("the owner's panic propagates from the last view's drop");
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"owner drop panics"));
    everything_still_works(&stream);
    // On another thread, dropping the last clone while a transfer runs on this one.
    let v = panicking_view(&stream, 1 << 20).into_view();
    let r = v.clone();
    drop(v);
    let dropper = std::thread::spawn(move || drop(r));
    everything_still_works(&stream);
    assert!(
        dropper.join().is_err(),
        "the owner's panic ends the thread that dropped it"
    );
    everything_still_works(&stream);
    // The owners' memory was freed (the fields of a value whose drop panics are dropped).
    let used = device_memory_used(&stream);
    assert!(
        !unless_sanitized("free device memory check") || used <= before + SLACK,
        "device memory in use grew from {before} to {used} bytes"
    );
}
