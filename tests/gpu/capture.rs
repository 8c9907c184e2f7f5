//! GPU tests of CUDA graph capture: every capturable operation, captured on a stream of its own
//! in each capture mode, gives the eager result on every launch of the graph (the destination
//! poisoned with fresh random data before each launch, the source rewritten between launches, so
//! that a launch must read and write the memory when it runs); work still running on the memory
//! is refused with `Err(StreamCapture)` and leaves the capture usable; host transfers,
//! allocations and DLPack exports are refused the same way; driver errors print once.
//!
//! Marked `#[ignore]`: run with `--include-ignored` on a GPU machine. Each test holds the
//! binary's GPU lock exclusively: a capture begun in the global mode forbids host waits on every
//! other thread of the process, which the other tests make.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLockWriteGuard};

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode, CUstreamCaptureStatus};
use cudarc::driver::{CudaGraph, CudaSlice, CudaStream, DriverError};
use devspan::internals::{Steer, assign_cast_steered, copy_path, fill_path};
use devspan::testing::{cast_reference, gpu_stream};
use devspan::{
    DeviceArray, DeviceElement, DeviceSpan, DeviceSpanMut, DeviceView, DeviceViewMut, ErrorKind,
    PinnedBuffer,
};
use half::{bf16, f16};
use ndarray::{Array1, ArrayD, ArrayViewD, ArrayViewMutD, Ix1, IxDyn, SliceInfo, SliceInfoElem};
use rand::{SeedableRng, rngs::StdRng};

use crate::common::{assert_same, busy, gpu_exclusive, random};

/// How long the other stream is kept busy in the tests of work still running.
const BUSY_MS: u64 = 300;

/// Every capture mode, with its name.
const MODES: [(CUstreamCaptureMode, &str); 3] = [
    (CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL, "global"),
    (
        CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        "thread-local",
    ),
    (
        CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        "relaxed",
    ),
];

fn alone() -> RwLockWriteGuard<'static, ()> {
    gpu_exclusive()
}

fn status(stream: &CudaStream) -> CUstreamCaptureStatus {
    stream.capture_status().expect("cuStreamIsCapturing")
}

/// Ends a capture still under way on its stream when dropped (a failed assertion inside a
/// capture then leaves no capture behind to fail every later test of the process).
struct EndOnDrop<'a>(&'a Arc<CudaStream>);

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        if self
            .0
            .capture_status()
            .is_ok_and(|s| s != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
        {
            let _ = self.0.end_capture(CUgraphInstantiate_flags(0));
        }
    }
}

/// Begins a capture on `stream`, to be ended by the test or, failing that, by the guard.
#[track_caller]
fn begin(stream: &Arc<CudaStream>, mode: CUstreamCaptureMode) -> EndOnDrop<'_> {
    stream
        .begin_capture(mode)
        .unwrap_or_else(|e| panic!("begin_capture: {e}"));
    EndOnDrop(stream)
}

#[track_caller]
fn assert_capturing(stream: &CudaStream, what: &str) {
    assert_eq!(
        status(stream),
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE,
        "{what}: the capture must still be active"
    );
}

/// Ends the capture on `stream` and instantiates its graph, failing the test (with the capture
/// status before the end) when that fails.
#[track_caller]
fn end(stream: &Arc<CudaStream>, what: &str) -> CudaGraph {
    let before = status(stream);
    match stream.end_capture(CUgraphInstantiate_flags(0)) {
        Ok(Some(g)) => g,
        Ok(None) => panic!("{what}: the capture made no graph"),
        Err(e) => panic!("{what}: end_capture failed: {e} (capture status before: {before:?})"),
    }
}

/// Captures what `f` enqueues on `stream` in `mode` and returns the graph; a failure of `f`
/// ends the capture and fails the test with the error.
#[track_caller]
fn capture(
    stream: &Arc<CudaStream>,
    mode: CUstreamCaptureMode,
    what: &str,
    f: impl FnOnce() -> devspan::Result<()>,
) -> CudaGraph {
    let _end = begin(stream, mode);
    if let Err(e) = f() {
        let st = status(stream);
        let ended = stream.end_capture(CUgraphInstantiate_flags(0)).err();
        panic!(
            "{what}: the operation failed inside the capture: {e:#} (capture status {st:?}, end_capture error {ended:?})"
        );
    }
    end(stream, what)
}

fn info(elems: &[SliceInfoElem]) -> SliceInfo<Vec<SliceInfoElem>, IxDyn, IxDyn> {
    SliceInfo::try_from(elems.to_vec()).expect("a valid slicing")
}

fn sliced<'a, T>(a: ArrayViewD<'a, T>, elems: &[SliceInfoElem]) -> ArrayViewD<'a, T> {
    a.slice_move(info(elems))
}

fn sliced_mut<'a, T>(a: ArrayViewMutD<'a, T>, elems: &[SliceInfoElem]) -> ArrayViewMutD<'a, T> {
    a.slice_move(info(elems))
}

fn full() -> SliceInfoElem {
    SliceInfoElem::Slice {
        start: 0,
        end: None,
        step: 1,
    }
}

fn step(start: isize, step: isize) -> SliceInfoElem {
    SliceInfoElem::Slice {
        start,
        end: None,
        step,
    }
}

/// `src[sl]` with its axes permuted by `perm`.
fn sliced_view<'a, T: DeviceElement>(
    src: &'a DeviceArray<T, IxDyn>,
    sl: &[SliceInfoElem],
    perm: &[usize],
) -> DeviceView<'a, T, IxDyn> {
    src.try_slice(info(sl)).unwrap().permuted_axes(IxDyn(perm))
}

/// Captures a fill of `dst[sl]` with `value`, checks that nothing ran during the capture, then
/// launches the graph twice, over fresh random contents each time, against ndarray's fill.
/// Returns the path the fill takes.
fn fill_case<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    mode: (CUstreamCaptureMode, &str),
    shape: &[usize],
    sl: &[SliceInfoElem],
    value: T,
) -> String {
    let poison = random::<T>(rng, shape);
    let mut dst = DeviceArray::from_host(stream, &poison.view()).unwrap();
    let path = fill_path(&dst.slice_mut(info(sl)));
    let what = format!(
        "fill {} {shape:?} {sl:?} ({path}, {} mode)",
        T::DTYPE,
        mode.1
    );
    stream.synchronize().unwrap();
    let graph = capture(stream, mode.0, &what, || {
        dst.slice_mut(info(sl)).fill(value)
    });
    let during = dst.to_host().unwrap();
    assert_same(
        &during.view(),
        &poison.view(),
        &format!("{what}: nothing runs while capturing"),
    );
    for launch in 0..2 {
        let before = random::<T>(rng, shape);
        dst.copy_from_host(&before).unwrap();
        graph.launch().unwrap();
        let mut expect = before.clone();
        sliced_mut(expect.view_mut(), sl).fill(value);
        assert_same(
            &dst.to_host().unwrap().view(),
            &expect.view(),
            &format!("{what}: launch {launch}"),
        );
    }
    path
}

/// Captures `dst[sl].assign(src)` from a contiguous `src` of the slice's shape, checks that
/// nothing ran during the capture, then launches the graph twice, over fresh random contents
/// of both each time, against ndarray (the elements outside the slice keep theirs). Returns
/// the path the copy takes.
fn write_case<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    mode: (CUstreamCaptureMode, &str),
    shape: &[usize],
    sl: &[SliceInfoElem],
) -> String {
    let poison = random::<T>(rng, shape);
    let mut dst = DeviceArray::from_host(stream, &poison.view()).unwrap();
    let in_shape = sliced(poison.view(), sl).shape().to_vec();
    let mut src = DeviceArray::from_host(stream, &random::<T>(rng, &in_shape).view()).unwrap();
    let planned = copy_path(&mut dst.slice_mut(info(sl)), &src.view());
    let what = format!(
        "{} into {shape:?} {sl:?} ({planned}, {} mode)",
        T::DTYPE,
        mode.1
    );
    let op = |dst: &mut DeviceArray<T, IxDyn>, src: &DeviceArray<T, IxDyn>| {
        assign_cast_steered(
            &mut dst.slice_mut(info(sl)),
            stream,
            &src.view(),
            Steer::Default,
        )
    };
    let refresh = |dst: &mut DeviceArray<T, IxDyn>, src: &mut DeviceArray<T, IxDyn>| {
        let data = random::<T>(rng, &in_shape);
        src.copy_from_host(&data).unwrap();
        let before = random::<T>(rng, shape);
        dst.copy_from_host(&before).unwrap();
        let mut expect = before;
        sliced_mut(expect.view_mut(), sl).assign(&data);
        expect
    };
    captured_twice(
        stream, mode.0, &what, &mut dst, &mut src, &poison, op, refresh,
    )
}

/// Captures `op` on `dst` and `src` (it returns the path it takes), checks that `dst` still
/// holds `before` (nothing ran during the capture), then twice: `refresh` gives both fresh
/// contents and returns what `dst` must hold after the graph's launch, the graph launches,
/// and `dst` must hold it. Returns the path.
#[allow(clippy::too_many_arguments)]
fn captured_twice<S: DeviceElement, D: DeviceElement>(
    stream: &Arc<CudaStream>,
    mode: CUstreamCaptureMode,
    what: &str,
    dst: &mut DeviceArray<D, IxDyn>,
    src: &mut DeviceArray<S, IxDyn>,
    before: &ArrayD<D>,
    op: impl FnOnce(&mut DeviceArray<D, IxDyn>, &DeviceArray<S, IxDyn>) -> devspan::Result<String>,
    mut refresh: impl FnMut(&mut DeviceArray<D, IxDyn>, &mut DeviceArray<S, IxDyn>) -> ArrayD<D>,
) -> String {
    stream.synchronize().unwrap();
    let mut path = String::new();
    let graph = capture(stream, mode, what, || {
        path = op(dst, src)?;
        Ok(())
    });
    assert_same(
        &dst.to_host().unwrap().view(),
        &before.view(),
        &format!("{what}: nothing runs while capturing"),
    );
    for launch in 0..2 {
        let expect = refresh(dst, src);
        graph.launch().unwrap();
        assert_same(
            &dst.to_host().unwrap().view(),
            &expect.view(),
            &format!("{what}: launch {launch}"),
        );
    }
    path
}

/// Captures `dst.assign_cast(src[sl].permuted_axes(perm))` (planned as `steer` says), checks
/// that nothing ran during the capture, then launches the graph twice, with new random source
/// data and a new poisoned destination each time, against ndarray and `cast_reference`.
/// Returns the path the copy takes.
fn copy_case<From: DeviceElement, To: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    mode: (CUstreamCaptureMode, &str),
    shape: &[usize],
    sl: &[SliceInfoElem],
    perm: &[usize],
    steer: Steer,
) -> String {
    let host = random::<From>(rng, shape);
    let mut src = DeviceArray::from_host(stream, &host.view()).unwrap();
    let out_shape = sliced(host.view(), sl)
        .permuted_axes(perm.to_vec())
        .shape()
        .to_vec();
    let poison = random::<To>(rng, &out_shape);
    let mut dst = DeviceArray::from_host(stream, &poison.view()).unwrap();
    let source = |src| sliced_view(src, sl, perm);
    let planned = copy_path(&mut dst.view_mut(), &source(&src));
    let what = format!(
        "{} -> {} {shape:?} {sl:?} perm {perm:?} ({planned} by default, steered {steer:?}, {} mode)",
        From::DTYPE,
        To::DTYPE,
        mode.1
    );
    let op = |dst: &mut DeviceArray<To, IxDyn>, src: &DeviceArray<From, IxDyn>| {
        assign_cast_steered(
            &mut dst.view_mut(),
            stream,
            &sliced_view(src, sl, perm),
            steer,
        )
    };
    let refresh = |dst: &mut DeviceArray<To, IxDyn>, src: &mut DeviceArray<From, IxDyn>| {
        let data = random::<From>(rng, shape);
        src.copy_from_host(&data).unwrap();
        let poison = random::<To>(rng, &out_shape);
        dst.copy_from_host(&poison).unwrap();
        sliced(data.view(), sl)
            .permuted_axes(perm.to_vec())
            .mapv(cast_reference::<From, To>)
    };
    captured_twice(
        stream, mode.0, &what, &mut dst, &mut src, &poison, op, refresh,
    )
}

/// The tiled kernels (vector and element-wise, with a rest launch after them), the gathered
/// rows of a cast into channels last and the rank-generic fill in every capture mode: their
/// arguments travel by value, so the graph replays them on new data.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tiled_and_rank_generic_paths_in_every_mode() {
    let _gpu = alone();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(191);
    let mut paths = BTreeSet::new();
    let rev = |r: usize| (0..r).rev().collect::<Vec<usize>>();
    for mode in MODES {
        // CHW -> HWC, C = 3: the vector kernel; an odd pixel count's rest after the
        // element-wise tiles of a cast from u8; the gathered rows of a cast from f32.
        let sl = [full(), full(), full()];
        paths.insert(copy_case::<u8, u8>(
            &stream,
            &mut rng,
            mode,
            &[3, 64, 64],
            &sl,
            &[1, 2, 0],
            Steer::Default,
        ));
        paths.insert(copy_case::<u8, f32>(
            &stream,
            &mut rng,
            mode,
            &[3, 37, 61],
            &sl,
            &[1, 2, 0],
            Steer::Default,
        ));
        paths.insert(copy_case::<f32, f16>(
            &stream,
            &mut rng,
            mode,
            &[3, 37, 61],
            &sl,
            &[1, 2, 0],
            Steer::Default,
        ));
        // Twelve axes of extent 2 reversed; nine of extent 3 (element-wise).
        let sl2 = vec![full(); 12];
        paths.insert(copy_case::<f32, f32>(
            &stream,
            &mut rng,
            mode,
            &[2; 12],
            &sl2,
            &rev(12),
            Steer::Default,
        ));
        let sl3 = vec![full(); 9];
        paths.insert(copy_case::<u16, u16>(
            &stream,
            &mut rng,
            mode,
            &[3; 9],
            &sl3,
            &rev(9),
            Steer::Default,
        ));
        // Every other element along ten axes: ten axes after merging.
        let every_other = vec![step(0, 2); 10];
        paths.insert(fill_case(
            &stream,
            &mut rng,
            mode,
            &[3; 10],
            &every_other,
            7.5f32,
        ));
    }
    for want in ["tiled", "tiled_e", "fill_stridedn", "rows_gather"] {
        assert!(paths.contains(want), "no case took {want}: {paths:?}");
    }
    assert!(
        paths.iter().any(|p| p.ends_with("+rest")),
        "no case left a rest: {paths:?}"
    );
}

/// A fill, on a fresh non-blocking stream in relaxed mode, of memory made on another stream:
/// captured, and the stream captures again afterwards.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fill_on_a_fresh_stream_in_relaxed_mode() {
    let _gpu = alone();
    let made_on = gpu_stream();
    let mut a = DeviceArray::<f32, _>::zeros(&made_on, (64, 100)).unwrap();
    made_on.synchronize().unwrap();
    let fresh = gpu_stream();
    let relaxed = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    let graph = capture(&fresh, relaxed, "fill on a fresh stream", || {
        a.fill_on(&fresh, 1.5)
    });
    graph.launch().unwrap();
    assert!(
        a.to_host_on(&fresh).unwrap().iter().all(|&x| x == 1.5),
        "the graph's fill wrote every element"
    );
    // The stream is left usable: it captures again.
    let again = capture(&fresh, relaxed, "a second capture", || {
        a.fill_on(&fresh, -2.0)
    });
    again.launch().unwrap();
    assert!(a.to_host_on(&fresh).unwrap().iter().all(|&x| x == -2.0));
}

/// Fills by every path (driver memset of 1-, 2- and 4-byte elements, 1-D and 2-D, the
/// contiguous fill kernel, the row fill kernel, the strided fill kernel), in every capture
/// mode.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fill_every_path_in_every_mode() {
    let _gpu = alone();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(181);
    let mut paths = BTreeSet::new();
    let contiguous = [full(), full()];
    let strided = [step(1, 2), step(0, -3)];
    let pitched = [step(0, -1), step(1, 1)];
    for mode in MODES {
        paths.insert(fill_case(
            &stream,
            &mut rng,
            mode,
            &[33, 70],
            &contiguous,
            7u8,
        ));
        paths.insert(fill_case(
            &stream,
            &mut rng,
            mode,
            &[33, 70],
            &contiguous,
            f16::from_f32(-3.5),
        ));
        paths.insert(fill_case(
            &stream,
            &mut rng,
            mode,
            &[33, 70],
            &contiguous,
            2.25f32,
        ));
        paths.insert(fill_case(
            &stream,
            &mut rng,
            mode,
            &[33, 70],
            &contiguous,
            -9i64,
        ));
        paths.insert(fill_case(
            &stream,
            &mut rng,
            mode,
            &[33, 70],
            &strided,
            1.0f64,
        ));
        paths.insert(fill_case(
            &stream,
            &mut rng,
            mode,
            &[40, 50],
            &strided,
            3u16,
        ));
        paths.insert(fill_case(
            &stream,
            &mut rng,
            mode,
            &[9, 8300],
            &pitched,
            9u8,
        ));
        // Rows of 1-byte elements shorter than the 2-D memset takes, at a pitch, reversed.
        paths.insert(fill_case(
            &stream,
            &mut rng,
            mode,
            &[17, 301],
            &pitched,
            0xa7u8,
        ));
    }
    println!("fill paths captured: {paths:?}");
    for p in [
        "memset",
        "memset2d",
        "fill_contig",
        "fill_strided32",
        "fill_rows",
    ] {
        assert!(
            paths.contains(p),
            "no captured fill took the {p} path: {paths:?}"
        );
    }
}

/// Copies and casts by every path (driver memcpy, the contiguous kernel, the row kernels, the
/// gathered and scattered rows, the transpose and permute kernels, the strided kernel, broadcasting), in
/// every capture mode.
/// The global mode comes first: a kernel's first use in the process may be inside its capture.
#[test]
#[ignore = "needs a CUDA GPU"]
fn assign_every_path_in_every_mode() {
    let _gpu = alone();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(182);
    let mut paths = BTreeSet::new();
    let all = [full(), full(), full()];
    let inner_offset = [full(), full(), step(1, 1)];
    let stepped = [step(0, -1), step(1, 3), step(0, 2)];
    let new_axis = [full(), SliceInfoElem::NewAxis, full(), step(2, 1)];
    let s = Steer::Default;
    // The planner's documented choices (src/plan/tests.rs): one element in, same type: memcpy;
    // every other column: strided32; rows of 300 bytes out of 316: rows; out of 301 (off each
    // other's alignment): rows_shifted; rows of 16 bytes out of 17 (short and off the 16-byte
    // grid): rows_gather; f32 rows of 33 written into a column slice of 34: rows_scatter.
    let shifted = [step(1, 1)];
    let every_other = [full(), step(0, 2)];
    let columns = |end| {
        [
            full(),
            SliceInfoElem::Slice {
                start: 0,
                end: Some(end),
                step: 1,
            },
        ]
    };
    let (long_rows, short_rows) = (columns(300), columns(16));
    for mode in MODES {
        let (id1, id2) = (&[0][..], &[0, 1][..]);
        paths.insert(copy_case::<f32, f32>(
            &stream,
            &mut rng,
            mode,
            &[1000],
            &shifted,
            id1,
            s,
        ));
        paths.insert(copy_case::<f32, f32>(
            &stream,
            &mut rng,
            mode,
            &[64, 128],
            &every_other,
            id2,
            s,
        ));
        for pitch in [316, 301] {
            paths.insert(copy_case::<u8, u8>(
                &stream,
                &mut rng,
                mode,
                &[64, pitch],
                &long_rows,
                id2,
                s,
            ));
        }
        paths.insert(copy_case::<u8, u8>(
            &stream,
            &mut rng,
            mode,
            &[64, 17],
            &short_rows,
            id2,
            s,
        ));
        paths.insert(write_case::<f32>(
            &stream,
            &mut rng,
            mode,
            &[64, 34],
            &columns(33),
        ));
        let sh = &[6, 40, 66];
        paths.insert(copy_case::<f32, f32>(
            &stream,
            &mut rng,
            mode,
            sh,
            &all,
            &[0, 1, 2],
            s,
        ));
        paths.insert(copy_case::<u8, f32>(
            &stream,
            &mut rng,
            mode,
            sh,
            &all,
            &[0, 1, 2],
            s,
        ));
        paths.insert(copy_case::<i16, i16>(
            &stream,
            &mut rng,
            mode,
            sh,
            &inner_offset,
            &[0, 1, 2],
            s,
        ));
        paths.insert(copy_case::<f32, bf16>(
            &stream,
            &mut rng,
            mode,
            sh,
            &all,
            &[0, 2, 1],
            s,
        ));
        paths.insert(copy_case::<f64, f64>(
            &stream,
            &mut rng,
            mode,
            sh,
            &all,
            &[2, 0, 1],
            s,
        ));
        paths.insert(copy_case::<u16, u16>(
            &stream,
            &mut rng,
            mode,
            &[2, 129, 130],
            &all,
            &[0, 2, 1],
            Steer::PreferTranspose,
        ));
        paths.insert(copy_case::<i32, f16>(
            &stream,
            &mut rng,
            mode,
            sh,
            &stepped,
            &[1, 2, 0],
            s,
        ));
        paths.insert(copy_case::<u64, i8>(
            &stream,
            &mut rng,
            mode,
            sh,
            &new_axis,
            &[3, 0, 1, 2],
            s,
        ));
        // Bytes of [2; 14] reversed: one tile of 16 KiB, 1024 threads, and on sm_80 and later
        // the cp.async kernel, whose tile buffers are dynamic shared memory.
        let reversed: Vec<usize> = (0..14).rev().collect();
        paths.insert(copy_case::<u8, u8>(
            &stream,
            &mut rng,
            mode,
            &[2; 14],
            &[full(); 14],
            &reversed,
            s,
        ));
        // The gathered rows: an image of 3 u8 channels flipped left-right, cast to f32; one
        // of 5 u8 channels with its channels reversed, copied.
        paths.insert(copy_case::<u8, f32>(
            &stream,
            &mut rng,
            mode,
            &[16, 40, 3],
            &[full(), step(0, -1), full()],
            &[0, 1, 2],
            s,
        ));
        paths.insert(copy_case::<u8, u8>(
            &stream,
            &mut rng,
            mode,
            &[16, 40, 5],
            &[full(), full(), step(0, -1)],
            &[0, 1, 2],
            s,
        ));
    }
    println!("copy paths captured: {paths:?}");
    for p in [
        "memcpy",
        "contig",
        "rows",
        "rows_shifted",
        "transpose",
        "strided32",
        "tiled",
        "rows_gather",
        "rows_scatter",
    ] {
        assert!(
            paths.contains(p),
            "no captured copy took the {p} path: {paths:?}"
        );
    }
    assert!(
        paths.iter().any(|p| p.starts_with("permute")),
        "no captured copy took a permute kernel: {paths:?}"
    );

    // Broadcasting a row into a matrix, through `assign` and `assign_cast`.
    for mode in MODES {
        let row = random::<f32>(&mut rng, &[1, 50]);
        let src = DeviceArray::from_host(&stream, &row.view()).unwrap();
        let mut same =
            DeviceArray::from_host(&stream, &random::<f32>(&mut rng, &[40, 50])).unwrap();
        let mut wide =
            DeviceArray::from_host(&stream, &random::<f64>(&mut rng, &[40, 50])).unwrap();
        stream.synchronize().unwrap();
        let what = format!("broadcast assign ({} mode)", mode.1);
        let graph = capture(&stream, mode.0, &what, || {
            same.assign(&src)?;
            wide.assign_cast(&src)
        });
        graph.launch().unwrap();
        let expect = row.broadcast(IxDyn(&[40, 50])).unwrap();
        assert_same(&same.to_host().unwrap().view(), &expect, &what);
        let expect_wide = expect.mapv(f64::from);
        assert_same(&wide.to_host().unwrap().view(), &expect_wide.view(), &what);
    }
}

/// Spans over borrowed cudarc slices (`fill`, `copy_from`) and the user's own work inside
/// `with_kernel_view_mut`, captured together.
#[test]
#[ignore = "needs a CUDA GPU"]
fn spans_and_kernel_views_in_every_mode() {
    let _gpu = alone();
    let stream = gpu_stream();
    let n = 4099;
    for mode in MODES {
        let mut a = stream.alloc_zeros::<i32>(n).unwrap();
        let mut b = stream.alloc_zeros::<f64>(n).unwrap();
        let mut c = stream.alloc_zeros::<u8>(n).unwrap();
        stream.synchronize().unwrap();
        let what = format!("spans and kernel views ({} mode)", mode.1);
        let graph = capture(&stream, mode.0, &what, || {
            DeviceSpanMut::from_cuda_mut(&mut a).fill(-4)?;
            DeviceSpanMut::from_cuda_mut(&mut b).copy_from(&DeviceSpan::from_cuda(&a))?;
            let mut cv = DeviceSpanMut::from_cuda_mut(&mut c).into_view_mut();
            cv.with_kernel_view_mut::<1, _>(&stream, |kv| {
                // SAFETY: `kv` describes the `n` contiguous bytes of `c`, written here on
                // `stream`, inside the view's stream synchronisation.
                let r = unsafe {
                    cudarc::driver::sys::cuMemsetD8Async(kv.ptr, 0x5a, n, stream.cu_stream())
                };
                Ok(r.result()?)
            })
        });
        assert!(stream.clone_dtoh(&a).unwrap().iter().all(|&x| x == 0));
        for launch in 0..2 {
            stream.memset_zeros(&mut b).unwrap();
            graph.launch().unwrap();
            let (ha, hb, hc) = (
                stream.clone_dtoh(&a).unwrap(),
                stream.clone_dtoh(&b).unwrap(),
                stream.clone_dtoh(&c).unwrap(),
            );
            assert!(ha.iter().all(|&x| x == -4), "{what}: launch {launch}: fill");
            assert!(
                hb.iter().all(|&x| x == -4.0),
                "{what}: launch {launch}: copy_from"
            );
            assert!(
                hc.iter().all(|&x| x == 0x5a),
                "{what}: launch {launch}: kernel view"
            );
        }
    }
}

/// A writable view of the memory of `kind`.
fn pick<'a>(
    kind: &str,
    array: &'a mut DeviceArray<f32, Ix1>,
    slice: &'a mut CudaSlice<f32>,
    owned: &'a mut DeviceViewMut<'static, f32, Ix1>,
) -> DeviceViewMut<'a, f32, Ix1> {
    match kind {
        "device array" => array.view_mut(),
        "cudarc slice" => DeviceSpanMut::from_cuda_mut(slice).into_view_mut(),
        _ => owned.view_mut(),
    }
}

/// Memory that an operation must follow is still being written on another stream (queued behind
/// a spinning kernel): inside a capture the operation is refused with `Err(StreamCapture)`
/// before anything is enqueued, the capture stays active, other operations are captured, the
/// graph is made and runs, and once the work has completed the same operation is captured. For
/// a device array, a cudarc slice and an owner-backed view.
#[test]
#[ignore = "needs a CUDA GPU"]
fn work_still_running_is_refused_and_the_capture_survives() {
    // compute-sanitizer serialises kernel launches: the spinning kernel has ended before the
    // checks that need it running.
    if !crate::common::unless_sanitized("work still running") {
        return;
    }
    let _gpu = alone();
    let n = 1 << 20;
    for mode in MODES {
        for kind in ["device array", "cudarc slice", "owner-backed view"] {
            let what = format!("{kind} ({} mode)", mode.1);
            let other = gpu_stream();
            let cap = gpu_stream();
            let mut array = DeviceArray::<f32, _>::zeros(&other, n).unwrap();
            let mut slice = other.alloc_zeros::<f32>(n).unwrap();
            let owned = DeviceArray::<f32, _>::zeros(&other, n).unwrap();
            let owned_ptr = owned.device_ptr();
            // SAFETY: the array owns `n` f32 at `owned_ptr` on device 0 and moves into the view's
            // owner; this view is the only handle on it.
            let mut owner_view = unsafe {
                DeviceViewMut::<f32, _>::from_raw_parts_mut(
                    owned_ptr,
                    n,
                    Ix1(n),
                    &[1],
                    0,
                    0,
                    Arc::new(owned),
                )
            }
            .unwrap();
            let mut idle = DeviceArray::<f32, _>::zeros(&cap, n).unwrap();
            let mut reader = DeviceArray::<f32, _>::zeros(&cap, n).unwrap();
            other.synchronize().unwrap();
            cap.synchronize().unwrap();

            macro_rules! view {
                () => {
                    pick(kind, &mut array, &mut slice, &mut owner_view)
                };
            }
            busy(&other, BUSY_MS);
            view!().fill_on(&other, 1.0).unwrap();

            let _end = begin(&cap, mode.0);
            let e = view!().fill_on(&cap, 2.0).unwrap_err();
            assert_eq!(e.kind(), &ErrorKind::StreamCapture, "{what}: {e:#}");
            assert!(e.to_string().contains("has not completed"), "{what}: {e}");
            assert_capturing(&cap, &format!("{what}, after the refused write"));
            let e = reader.assign_on(&cap, &view!().into_view()).unwrap_err();
            assert_eq!(e.kind(), &ErrorKind::StreamCapture, "{what}: read: {e:#}");
            assert_capturing(&cap, &format!("{what}, after the refused read"));
            idle.fill_on(&cap, 5.0).unwrap();
            let graph = end(&cap, &what);
            assert_eq!(
                status(&cap),
                CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
            );

            other.synchronize().unwrap();
            graph.launch().unwrap();
            cap.synchronize().unwrap();
            assert!(
                idle.to_host().unwrap().iter().all(|&x| x == 5.0),
                "{what}: idle"
            );
            assert!(
                view!()
                    .into_view()
                    .to_host_on(&cap)
                    .unwrap()
                    .iter()
                    .all(|&x| x == 1.0),
                "{what}: the other stream's write, and no captured write, landed"
            );

            // Completed now: the same operations are captured, and the stream captures again.
            let again = capture(&cap, mode.0, &what, || {
                view!().fill_on(&cap, 9.0)?;
                reader.assign_on(&cap, &view!().into_view())
            });
            again.launch().unwrap();
            assert!(
                view!()
                    .into_view()
                    .to_host_on(&cap)
                    .unwrap()
                    .iter()
                    .all(|&x| x == 9.0)
            );
            assert!(
                reader.to_host().unwrap().iter().all(|&x| x == 9.0),
                "{what}: reader"
            );
        }
    }
}

/// A captured read of cudarc memory does not need an earlier read to have completed (reads do
/// not conflict); a captured write does.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_running_read_refuses_writes_only() {
    let _gpu = alone();
    let n = 1 << 20;
    for mode in MODES {
        let what = format!("read behind a read ({} mode)", mode.1);
        let other = gpu_stream();
        let cap = gpu_stream();
        let mut a = DeviceArray::<f32, _>::zeros(&other, n).unwrap();
        let mut b = DeviceArray::<f32, _>::zeros(&other, n).unwrap();
        let mut c = DeviceArray::<f32, _>::zeros(&cap, n).unwrap();
        a.fill_on(&other, 4.0).unwrap();
        // The same operations once outside the capture, so that no module load delays it.
        c.assign_on(&cap, &a).unwrap();
        c.fill_on(&cap, 0.0).unwrap();
        other.synchronize().unwrap();
        cap.synchronize().unwrap();
        busy(&other, BUSY_MS);
        b.assign_on(&other, &a).unwrap();

        let _end = begin(&cap, mode.0);
        c.assign_on(&cap, &a)
            .unwrap_or_else(|e| panic!("{what}: a read is captured: {e:#}"));
        let filled = a.fill_on(&cap, 1.0);
        let graph = end(&cap, &what);
        // Queried once the capture has ended (a global-mode capture refuses stream queries):
        // still running then, the read was running when the write was refused.
        // SAFETY: `other` is a live stream of the current context.
        let other_busy = unsafe { cudarc::driver::sys::cuStreamQuery(other.cu_stream()) }
            == cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_READY;
        assert!(
            other_busy,
            "{what}: the read on the other stream ended too soon"
        );
        let e = filled.expect_err("a write captured while a read of the memory still runs");
        assert_eq!(e.kind(), &ErrorKind::StreamCapture, "{what}: {e:#}");
        graph.launch().unwrap();
        assert!(c.to_host().unwrap().iter().all(|&x| x == 4.0), "{what}");
        other.synchronize().unwrap();
        assert!(
            b.to_host_on(&other).unwrap().iter().all(|&x| x == 4.0),
            "{what}"
        );
    }
}

/// Host transfers, pinned-buffer copies, allocations (constructors and the operations returning
/// new arrays), DLPack exports and printing are refused inside a capture with
/// `Err(StreamCapture)`, each leaving the capture active; an array dropped during the capture
/// does not end it either. The capture then makes a graph that runs, and the stream works
/// eagerly afterwards.
#[test]
#[ignore = "needs a CUDA GPU"]
fn what_cannot_be_captured_is_refused() {
    let _gpu = alone();
    for mode in MODES {
        let cap = gpu_stream();
        let host = ndarray::Array2::from_shape_fn((30, 40), |(i, j)| (i * 40 + j) as f32);
        let mut a = DeviceArray::from_host(&cap, &host).unwrap();
        let exported = DeviceArray::<f32, _>::zeros(&cap, 16).unwrap();
        let dropped = DeviceArray::<f32, _>::zeros(&cap, 1 << 20).unwrap();
        let pinned = PinnedBuffer::from_slice(cap.context(), &vec![1.0f32; 1200]).unwrap();
        let mut pinned_out = PinnedBuffer::<f32>::zeros(cap.context(), 1200).unwrap();
        cap.synchronize().unwrap();

        let _end = begin(&cap, mode.0);
        let mut back = ndarray::Array2::<f32>::zeros((30, 40));
        let mut refused: Vec<(&str, devspan::Result<()>)> = vec![
            ("to_host", a.to_host().map(drop)),
            ("copy_to_host", a.copy_to_host(&mut back)),
            ("copy_from_host", a.copy_from_host(&host)),
            ("from_host", DeviceArray::from_host(&cap, &host).map(drop)),
            ("zeros", DeviceArray::<f32, _>::zeros(&cap, 8).map(drop)),
            ("cast", a.cast::<f16>().map(drop)),
            ("to_contiguous", a.t().to_contiguous().map(drop)),
            ("try_clone", a.try_clone().map(drop)),
            ("to_shape (copying)", a.t().to_shape(1200).map(drop)),
            (
                "PinnedBuffer::copy_to_device",
                pinned.copy_to_device(&cap, &mut a.view_mut().into_shape_with_order(1200).unwrap()),
            ),
            (
                "PinnedBuffer::copy_from_device",
                pinned_out.copy_from_device(&cap, &a.view().into_shape_with_order(1200).unwrap()),
            ),
            ("into_dlpack", exported.into_dlpack().map(drop)),
        ];
        {
            let mut h = ndarray::Array2::<f32>::zeros((30, 40));
            refused.push((
                "copy_from_host_async",
                a.copy_from_host_async(&h).and_then(|t| t.wait()),
            ));
            refused.push((
                "copy_to_host_async",
                a.copy_to_host_async(&mut h).and_then(|t| t.wait()),
            ));
        }
        for (what, r) in refused {
            let e = r.expect_err(what);
            assert_eq!(e.kind(), &ErrorKind::StreamCapture, "{what}: {e:#}");
            assert!(e.to_string().contains("cannot be captured"), "{what}: {e}");
            println!("{} mode, {what}: {e}", mode.1);
        }
        assert_capturing(&cap, &format!("{} mode, after the refusals", mode.1));
        let printed = format!("{a}");
        assert!(printed.contains("cannot be captured"), "Display: {printed}");
        assert!(
            a.to_shape(1200).unwrap().is_view(),
            "a reshaping view needs no device work"
        );
        drop(dropped);
        assert_capturing(&cap, &format!("{} mode, after a drop", mode.1));
        a.fill(8.0).unwrap();
        let graph = end(&cap, mode.1);

        graph.launch().unwrap();
        assert!(
            a.to_host().unwrap().iter().all(|&x| x == 8.0),
            "{} mode",
            mode.1
        );
        // Eager work on the stream, and the allocation freed after the capture.
        let b = DeviceArray::from_host(&cap, &host).unwrap();
        assert_eq!(b.to_host().unwrap(), host);
    }
}

/// With cudarc's event tracking off (a context of its own), cudarc's operations and devspan's
/// mix in one capture, each ordered by the stream.
#[test]
#[ignore = "needs a CUDA GPU"]
fn untracked_memory_mixes_with_cudarc_operations() {
    let _gpu = alone();
    let _ = gpu_stream();
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    // SAFETY: every access below is on the one stream `s`, so nothing needs cudarc's events.
    unsafe { ctx.disable_event_tracking() };
    let s = ctx.new_stream().unwrap();
    let n = 5000;
    for mode in MODES {
        let mut x = s.alloc_zeros::<f32>(n).unwrap();
        let mut y = s.alloc_zeros::<f32>(n).unwrap();
        let mut z = s.alloc_zeros::<bf16>(n).unwrap();
        s.synchronize().unwrap();
        let what = format!("cudarc and devspan ({} mode)", mode.1);
        let graph = capture(&s, mode.0, &what, || {
            DeviceSpanMut::from_cuda_mut(&mut x).fill(3.0)?;
            s.memcpy_dtod(&x, &mut y)?;
            DeviceSpanMut::from_cuda_mut(&mut z).copy_from(&DeviceSpan::from_cuda(&y))
        });
        for _ in 0..2 {
            s.memset_zeros(&mut z).unwrap();
            graph.launch().unwrap();
            let hz = s.clone_dtoh(&z).unwrap();
            assert!(hz.iter().all(|&v| v == bf16::from_f32(3.0)), "{what}");
        }
    }
}

/// cudarc work captured first on never-used memory (whose events were never recorded before the
/// capture), then a devspan operation reading that memory in the same capture: devspan orders
/// it after the cudarc work inside the graph and the capture ends cleanly. When cudarc's own
/// wait on the unrecorded events already ends the capture, the case cannot arise, and the test
/// says so.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cudarc_work_in_the_same_capture_is_ordered_in_the_graph() {
    let _gpu = alone();
    let mut rng = StdRng::seed_from_u64(183);
    let n = 1 << 20;
    for mode in MODES {
        let what = format!("cudarc memset then devspan copy ({} mode)", mode.1);
        let cap = gpu_stream();
        // SAFETY: every element is written by the captured memset before the copy reads it.
        let mut x = unsafe { cap.alloc::<u32>(n) }.unwrap();
        let poison: Array1<u32> = random::<u32>(&mut rng, &[n])
            .into_dimensionality::<Ix1>()
            .unwrap();
        let mut dst = DeviceArray::from_host(&cap, &poison).unwrap();
        // The address, taken while the slice's events have never been recorded.
        let xp = DeviceSpan::from_cuda(&x).device_ptr();
        cap.synchronize().unwrap();
        let _end = begin(&cap, mode.0);
        cap.memset_zeros(&mut x).unwrap();
        let after_cudarc = status(&cap);
        if after_cudarc != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE {
            let ended = cap.end_capture(CUgraphInstantiate_flags(0)).err();
            let stored = cap.context().check_err().err();
            println!(
                "{what}: cudarc's own memset ended the capture ({after_cudarc:?}, end_capture \
                 {ended:?}, stored {stored:?}): the case does not arise"
            );
            assert_eq!(
                status(&cap),
                CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
            );
            std::mem::forget(x);
            continue;
        }
        dst.assign_on(&cap, &DeviceSpan::from_cuda(&x).into_view())
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        let graph = end(&cap, &what);
        for launch in 0..2 {
            // Nonzero contents before each launch, written without cudarc's tracking.
            // SAFETY: `n` 4-byte elements at `xp`, on `cap`.
            let r = unsafe {
                cudarc::driver::sys::cuMemsetD32Async(xp, 0xdead_beef, n, cap.cu_stream())
            };
            r.result().unwrap();
            graph.launch().unwrap();
            let got = dst.to_host().unwrap();
            assert!(
                got.iter().all(|&v| v == 0),
                "{what}: launch {launch}: the copy ran after the memset"
            );
        }
        cap.synchronize().unwrap();
        // The slice's events were recorded inside the capture: it is not used or freed through
        // cudarc again.
        std::mem::forget(x);
        let _ = cap.context().check_err();
    }
}

/// A driver error prints its name and the driver's description once in every form, and a
/// capture refusal carries no driver text at all.
#[test]
#[ignore = "needs a CUDA GPU"]
fn errors_print_the_driver_error_once() {
    if !crate::common::unless_tool("memcheck", "a driver error provoked on purpose") {
        return;
    }
    let _gpu = alone();
    let other = gpu_stream();
    let cap = gpu_stream();
    let event = other.record_event(None).unwrap();
    // An explicit wait on work outside the capture, which the driver refuses
    // (CUDA_ERROR_STREAM_CAPTURE_ISOLATION), invalidating the capture.
    cap.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        .unwrap();
    let waited = cap.wait(&event);
    let ended = cap.end_capture(CUgraphInstantiate_flags(0)).err();
    let _ = cap.context().check_err();
    println!("a wait on work outside the capture: {waited:?}, end_capture error {ended:?}");
    let driver = waited.err().unwrap_or(DriverError(
        cudarc::driver::sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
    ));
    let e = devspan::Error::from(driver);
    let name = format!("{:?}", driver.0);
    let description = driver
        .error_string()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let (plain, alternate, debug) = (e.to_string(), format!("{e:#}"), format!("{e:?}"));
    println!("Display: {plain}\nalternate: {alternate}\nDebug: {debug}");
    assert_eq!(plain, "CUDA driver call failed");
    assert_eq!(alternate, format!("{plain}: {name} ({description})"));
    assert_eq!(debug, format!("Error(Driver: {alternate})"));
    for text in [&alternate, &debug] {
        assert_eq!(text.matches(&name).count(), 1, "{text}");
        assert_eq!(text.matches(&description).count(), 1, "{text}");
    }
    let source = std::error::Error::source(&e).expect("the driver error is the source");
    let chain = format!("{plain}: {source}");
    assert_eq!(chain.matches(&name).count(), 1, "{chain}");
    // The stream captures again.
    let mut a = DeviceArray::<u8, _>::zeros(&cap, 100).unwrap();
    cap.synchronize().unwrap();
    let relaxed = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    let graph = capture(&cap, relaxed, "after a failed capture", || a.fill(1));
    graph.launch().unwrap();

    // A refusal: devspan's own message, no source.
    let _end = begin(&cap, relaxed);
    let refusal = a.to_host().unwrap_err();
    let _ = end(&cap, "refusal");
    assert_eq!(refusal.kind(), &ErrorKind::StreamCapture);
    assert!(std::error::Error::source(&refusal).is_none());
    assert_eq!(format!("{refusal:#}"), refusal.to_string());
    assert!(!refusal.to_string().contains("CUDA_ERROR"), "{refusal}");
    println!("refusal: {refusal:?}");
}

/// Random source data through a capture of an element type whose every bit pattern matters
/// (NaN payloads included): a smoke test that a replay copies bits, not values.
#[test]
#[ignore = "needs a CUDA GPU"]
fn replays_copy_bits() {
    let _gpu = alone();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(184);
    let mode = MODES[2];
    let all = [full(), full()];
    let path = copy_case::<f16, f16>(
        &stream,
        &mut rng,
        mode,
        &[7, 301],
        &all,
        &[1, 0],
        Steer::Default,
    );
    println!("f16 transpose: {path}");
    let data: ArrayD<f64> = random::<f64>(&mut rng, &[5, 9]);
    let mut d = DeviceArray::from_host(&stream, &data.view()).unwrap();
    stream.synchronize().unwrap();
    let graph = capture(&stream, mode.0, "f64 fill", || d.fill(f64::NAN));
    graph.launch().unwrap();
    assert!(d.to_host().unwrap().iter().all(|x| x.is_nan()));
}
