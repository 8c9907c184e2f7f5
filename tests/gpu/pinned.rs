//! GPU tests of the conversions between `PinnedBuffer` and cudarc's `PinnedHostSlice`: round
//! trips, waiting for device copies still pending on the source, empty buffers, drop orders.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, PinnedHostSlice, sys};
use devspan::testing::gpu_stream;
use devspan::{DeviceArray, DeviceElement, ErrorKind, PinnedBuffer};
use half::{bf16, f16};
use rand::{SeedableRng, rngs::StdRng};

use crate::common::{busy, gpu_shared, random};

/// How long a stream is kept busy before the copy under test is queued behind it.
const BUSY_MS: u64 = 300;

/// `n` random elements (random bits, so almost never zero).
fn random_vec<T: DeviceElement>(rng: &mut StdRng, n: usize) -> Vec<T> {
    random::<T>(rng, &[n]).into_iter().collect()
}

/// Bitwise equality of two slices (NaNs compare by their bits, which a copy keeps).
#[track_caller]
fn assert_bits<T: DeviceElement>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let differ = got
        .iter()
        .zip(want)
        .filter(|(a, b)| bytemuck::bytes_of(*a) != bytemuck::bytes_of(*b))
        .count();
    assert_eq!(
        differ,
        0,
        "{what}: {differ} of {} elements differ",
        got.len()
    );
}

/// A cudarc page-locked slice holding `data`, written through a device copy on `stream` that
/// is complete when this returns.
fn host_slice_from<T: DeviceElement>(stream: &Arc<CudaStream>, data: &[T]) -> PinnedHostSlice<T> {
    let dev = stream.clone_htod(data).unwrap();
    // SAFETY: every element is written by the copy below before it is read.
    let mut out = unsafe { stream.context().alloc_pinned::<T>(data.len()) }.unwrap();
    stream.memcpy_dtoh(&dev, &mut out).unwrap();
    stream.synchronize().unwrap();
    out
}

fn round_trip<T: DeviceElement>(stream: &Arc<CudaStream>, rng: &mut StdRng) {
    let ctx = stream.context();
    for n in [1, 7, 4099, (1 << 20) + 3] {
        let what = format!("{:?}, {n} elements", T::DTYPE);
        // PinnedBuffer -> PinnedHostSlice -> PinnedBuffer.
        let data = random_vec::<T>(rng, n);
        let buf = PinnedBuffer::from_slice(ctx, &data).unwrap();
        let phs = buf.to_pinned_host_slice(buf.context()).unwrap();
        assert_eq!(phs.len(), n);
        assert!(phs.context() == ctx, "{what}: the slice's context");
        assert_bits(phs.as_slice().unwrap(), &data, &format!("{what}: to"));
        // The slice works with cudarc's own copies.
        let dev = stream.clone_htod(&phs).unwrap();
        assert_bits(
            &stream.clone_dtoh(&dev).unwrap(),
            &data,
            &format!("{what}: upload"),
        );
        let back = PinnedBuffer::from_pinned_host_slice(&phs).unwrap();
        assert!(back.context() == ctx, "{what}: the buffer's context");
        assert_bits(back.as_slice().unwrap(), &data, &format!("{what}: back"));
        // PinnedHostSlice (write-combined, from cudarc's allocator) -> PinnedBuffer ->
        // PinnedHostSlice.
        let data = random_vec::<T>(rng, n);
        let phs = host_slice_from(stream, &data);
        let buf = PinnedBuffer::from_pinned_host_slice(&phs).unwrap();
        assert_bits(buf.as_slice().unwrap(), &data, &format!("{what}: from"));
        let mut dev = DeviceArray::<T, _>::zeros(stream, n).unwrap();
        buf.copy_to_device(stream, &mut dev.view_mut()).unwrap();
        assert_bits(
            dev.to_host_on(stream).unwrap().as_slice().unwrap(),
            &data,
            &format!("{what}: copy_to_device"),
        );
        let again = buf.to_pinned_host_slice(ctx).unwrap();
        assert_bits(again.as_slice().unwrap(), &data, &format!("{what}: again"));
    }
}

/// Random elements through `PinnedBuffer -> PinnedHostSlice -> PinnedBuffer` and the other
/// way round, for elements of 1, 2, 4 and 8 bytes, every bit kept.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_host_slice_round_trips_keep_every_bit() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(41);
    round_trip::<u8>(&stream, &mut rng);
    round_trip::<f16>(&stream, &mut rng);
    round_trip::<bf16>(&stream, &mut rng);
    round_trip::<f32>(&stream, &mut rng);
    round_trip::<i64>(&stream, &mut rng);
    round_trip::<f64>(&stream, &mut rng);
}

/// A conversion of a source whose device download is still queued behind a busy stream sees
/// the downloaded values, not the earlier ones: for a `PinnedBuffer`, for a `PinnedHostSlice`
/// whose context tracks its copies with events, and for one whose context does not (only its
/// default stream in use), where the conversion waits for the context.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_host_slice_conversions_wait_for_a_pending_download() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let ctx = stream.context();
    let mut rng = StdRng::seed_from_u64(42);
    let n = 4 << 20;
    let early = random_vec::<f32>(&mut rng, n);
    let last = random_vec::<f32>(&mut rng, n);
    let dev = DeviceArray::from_host(&stream, &ndarray::ArrayView1::from(&last)).unwrap();

    // PinnedBuffer with a pending copy_from_device -> PinnedHostSlice.
    let mut buf = PinnedBuffer::from_slice(ctx, &early).unwrap();
    busy(&stream, BUSY_MS);
    buf.copy_from_device(&stream, &dev.view()).unwrap();
    let phs = buf.to_pinned_host_slice(ctx).unwrap();
    assert_bits(
        phs.as_slice().unwrap(),
        &last,
        "PinnedBuffer -> PinnedHostSlice",
    );

    // PinnedHostSlice with a pending memcpy_dtoh, in a context that tracks it with events.
    assert!(ctx.is_managing_stream_synchronization());
    let src = stream.clone_htod(&last).unwrap();
    let mut phs = host_slice_from(&stream, &early);
    busy(&stream, BUSY_MS);
    stream.memcpy_dtoh(&src, &mut phs).unwrap();
    let buf = PinnedBuffer::from_pinned_host_slice(&phs).unwrap();
    assert_bits(
        buf.as_slice().unwrap(),
        &last,
        "PinnedHostSlice (events) -> PinnedBuffer",
    );

    // The same in a context handle with only its default stream, where cudarc records no
    // event for the copy.
    let solo = CudaContext::new(stream.context().ordinal()).unwrap();
    let solo_stream = solo.default_stream();
    assert!(!solo.is_managing_stream_synchronization());
    let src = solo_stream.clone_htod(&last).unwrap();
    let mut phs = host_slice_from(&solo_stream, &early);
    busy(&solo_stream, BUSY_MS);
    solo_stream.memcpy_dtoh(&src, &mut phs).unwrap();
    let buf = PinnedBuffer::from_pinned_host_slice(&phs).unwrap();
    assert_bits(
        buf.as_slice().unwrap(),
        &last,
        "PinnedHostSlice (default stream only) -> PinnedBuffer",
    );
    drop(phs);
    solo_stream.synchronize().unwrap();
}

/// An empty `PinnedBuffer` has no `PinnedHostSlice` (cudarc cannot allocate one): `Err`, and
/// the buffer stays usable. One-element buffers convert both ways.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_host_slice_conversions_of_empty_and_single_buffers() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let ctx = stream.context();
    let empty = PinnedBuffer::<f32>::zeros(ctx, 0).unwrap();
    let e = empty.to_pinned_host_slice(ctx).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidArgument, "{e}");
    assert!(empty.as_slice().unwrap().is_empty());
    // The reason: cudarc panics on the null pointer the driver returns for zero bytes. When
    // this stops panicking, the conversion can return an empty slice instead.
    let zero = std::panic::catch_unwind(|| {
        // SAFETY: nothing is read from the (empty) allocation.
        unsafe { ctx.alloc_pinned_with_flags::<f32>(0, sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map(|s| s.len())
    });
    assert!(
        zero.is_err(),
        "cudarc allocated an empty PinnedHostSlice: {zero:?}"
    );
    let one = PinnedBuffer::from_slice(ctx, &[-3i32]).unwrap();
    let phs = one.to_pinned_host_slice(ctx).unwrap();
    assert_eq!(phs.as_slice().unwrap(), &[-3]);
    let back = PinnedBuffer::from_pinned_host_slice(&phs).unwrap();
    assert_eq!(back.as_slice().unwrap(), &[-3]);
}

/// The converted value outlives its source, its context and stream handles, and moves to
/// another thread; a source with a copy still pending is dropped right after the conversion.
/// Every device array and converted value holds the expected elements at the end.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_host_slice_conversions_in_every_drop_order() {
    let _gpu = gpu_shared();
    let mut rng = StdRng::seed_from_u64(43);
    let n = 1 << 20;
    for (case, busy_ms) in [None, Some(BUSY_MS)].into_iter().enumerate() {
        let data = random_vec::<u32>(&mut rng, n);
        let what = |s: &str| format!("{s}, {} stream", ["idle", "busy"][case]);
        let stream = gpu_stream();
        let ctx = stream.context().clone();
        let dev = DeviceArray::from_host(&stream, &ndarray::ArrayView1::from(&data)).unwrap();

        // A buffer with a download pending, converted, then dropped before the slice is read;
        // the stream and context handles go first.
        let mut buf = PinnedBuffer::<u32>::zeros(&ctx, n).unwrap();
        if let Some(ms) = busy_ms {
            busy(&stream, ms);
        }
        buf.copy_from_device(&stream, &dev.view()).unwrap();
        let phs = buf.to_pinned_host_slice(&ctx).unwrap();
        drop(buf);
        let stream2 = stream.clone();
        drop(stream);
        drop(ctx);
        // cudarc uploads from the slice, which is dropped with the upload pending.
        let mut up = stream2.alloc_zeros::<u32>(n).unwrap();
        if let Some(ms) = busy_ms {
            busy(&stream2, ms);
        }
        stream2.memcpy_htod(&phs, &mut up).unwrap();
        let phs_on_thread = std::thread::spawn(move || {
            let buf = PinnedBuffer::from_pinned_host_slice(&phs).unwrap();
            drop(phs);
            buf
        })
        .join()
        .unwrap();
        assert_bits(
            &stream2.clone_dtoh(&up).unwrap(),
            &data,
            &what("upload from a converted slice"),
        );

        // The buffer converted on the other thread outlives the slice; an upload from it is
        // pending when it is converted back and dropped.
        let mut dev2 = DeviceArray::<u32, _>::zeros(&stream2, n).unwrap();
        if let Some(ms) = busy_ms {
            busy(&stream2, ms);
        }
        phs_on_thread
            .copy_to_device(&stream2, &mut dev2.view_mut())
            .unwrap();
        let phs2 = phs_on_thread
            .to_pinned_host_slice(stream2.context())
            .unwrap();
        std::thread::spawn(move || drop(phs_on_thread))
            .join()
            .unwrap();
        assert_bits(
            dev2.to_host_on(&stream2).unwrap().as_slice().unwrap(),
            &data,
            &what("upload from a converted buffer"),
        );
        // The last value standing, after every handle but its own.
        drop(dev2);
        drop(dev);
        drop(up);
        drop(stream2);
        assert_bits(phs2.as_slice().unwrap(), &data, &what("the last slice"));
        drop(phs2);
    }
}
