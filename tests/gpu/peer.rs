//! GPU tests of copies between devices (`assign`, `assign_cast` with the source on another
//! GPU).
//!
//! On one GPU the cross-device machinery runs with a forced path
//! (`devspan::internals::force_cross_device`): the source's accesses ordered on its own stream,
//! the work on the destination's, the peer path's kernels reading the source directly, the
//! staged path's pack, `cuMemcpyPeerAsync` and unpack. The tests of the module `two_gpus` need
//! two devices; they fail on a machine with one (a single-GPU run passes
//! `--skip peer::two_gpus::`).

use std::sync::Arc;

use cudarc::driver::CudaStream;
use devspan::internals::{CrossPath, force_cross_device};
use devspan::testing::{cast_reference, gpu_stream};
use devspan::{DeviceArray, DeviceElement, ErrorKind};
use half::f16;
use ndarray::{ArrayD, IxDyn, SliceInfoElem};
use rand::{SeedableRng, rngs::StdRng};

use crate::common::{assert_same, busy, random};

const PATHS: [CrossPath; 2] = [CrossPath::Peer, CrossPath::Staged];

/// A source layout: a slice of a random array of `base` elements, then optionally a transpose
/// and a broadcast to a leading axis.
struct Layout {
    base: &'static [usize],
    slice: &'static [SliceInfoElem],
    transpose: bool,
    broadcast: Option<usize>,
}

const fn full() -> SliceInfoElem {
    SliceInfoElem::Slice {
        start: 0,
        end: None,
        step: 1,
    }
}

const fn step(step: isize) -> SliceInfoElem {
    SliceInfoElem::Slice {
        start: 0,
        end: None,
        step,
    }
}

const LAYOUTS: &[Layout] = &[
    // contiguous
    Layout {
        base: &[67, 129],
        slice: &[full(), full()],
        transpose: false,
        broadcast: None,
    },
    // transposed
    Layout {
        base: &[130, 67],
        slice: &[full(), full()],
        transpose: true,
        broadcast: None,
    },
    // every second column (`a[:, ::2]`)
    Layout {
        base: &[64, 257],
        slice: &[full(), step(2)],
        transpose: false,
        broadcast: None,
    },
    // reversed rows, size-1 axis
    Layout {
        base: &[1, 301],
        slice: &[full(), step(-1)],
        transpose: false,
        broadcast: None,
    },
    // a row broadcast along a new leading axis
    Layout {
        base: &[1, 99],
        slice: &[full(), full()],
        transpose: false,
        broadcast: Some(5),
    },
    // empty
    Layout {
        base: &[0, 7],
        slice: &[full(), full()],
        transpose: false,
        broadcast: None,
    },
];

/// `src` (random, on `src_stream`) viewed through `l`, assigned with a cast into a poisoned
/// array on `dst_stream`; compared with ndarray's view of the same host data.
fn check<U: DeviceElement, T: DeviceElement>(
    rng: &mut StdRng,
    l: &Layout,
    src_stream: &Arc<CudaStream>,
    dst_stream: &Arc<CudaStream>,
    what: &str,
) {
    let host: ArrayD<U> = random(rng, l.base);
    let src = DeviceArray::from_host(src_stream, &host).expect("upload");
    let hv = host.slice(l.slice);
    let dv = src.slice(l.slice);
    let (hv, dv) = if l.transpose {
        (hv.reversed_axes(), dv.reversed_axes())
    } else {
        (hv, dv)
    };
    let mut shape: Vec<usize> = hv.shape().to_vec();
    if let Some(n) = l.broadcast {
        shape.insert(0, n);
    }
    let expect = hv
        .broadcast(IxDyn(&shape))
        .expect("host broadcast")
        .mapv(cast_reference::<U, T>);
    let mut dst = DeviceArray::<T, _>::zeros(dst_stream, IxDyn(&shape)).expect("alloc");
    let poison: T = bytemuck::cast_slice::<u8, T>(&[0x5a; 8])[0];
    dst.fill(poison).expect("poison");
    dst.assign_cast(&dv)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = dst.to_host().expect("download");
    assert_same(&got.view(), &expect.view(), what);
}

/// The source, on `from`, is written behind a busy stream, its transpose assigned to an array on
/// `to`, then dropped at once while its memory is reallocated and overwritten on `from`: the
/// destination must hold what was written.
fn check_order_and_keep_alive(from: &Arc<CudaStream>, to: &Arc<CudaStream>, what: &str) {
    const N: usize = 8 << 20;
    let mut src = DeviceArray::<f32, _>::zeros(from, (N / 1024, 1024)).expect("alloc");
    busy(from, 300);
    src.fill(7.0).expect("fill");
    let mut dst = DeviceArray::<f32, _>::zeros(to, (1024, N / 1024)).expect("alloc");
    dst.assign(&src.t()).expect("assign");
    drop(src);
    let mut reused = DeviceArray::<f32, _>::zeros(from, (N / 1024, 1024)).expect("alloc");
    reused.fill(-1.5).expect("fill");
    let got = dst.to_host().expect("download");
    let bad = got.iter().filter(|&&x| x != 7.0).count();
    assert_eq!(bad, 0, "{what}: {bad} of {N} elements are not the source's");
}

/// Every layout and three type pairs through each forced path, the source on one stream and
/// the destination on another, against ndarray.
#[test]
#[ignore = "needs a CUDA GPU"]
fn forced_paths_match_ndarray() {
    let _gpu = crate::common::gpu_shared();
    let a = gpu_stream();
    let b = a.context().new_stream().expect("stream");
    let mut rng = StdRng::seed_from_u64(20);
    for path in PATHS {
        let _forced = force_cross_device(path);
        for (i, l) in LAYOUTS.iter().enumerate() {
            check::<f32, f32>(&mut rng, l, &a, &b, &format!("{path:?} layout {i} f32"));
            check::<f32, f16>(
                &mut rng,
                l,
                &a,
                &b,
                &format!("{path:?} layout {i} f32->f16"),
            );
            check::<u8, f64>(&mut rng, l, &a, &b, &format!("{path:?} layout {i} u8->f64"));
            check::<i16, i16>(
                &mut rng,
                l,
                &b,
                &b,
                &format!("{path:?} layout {i} one stream"),
            );
        }
    }
}

/// The source is written on a busy stream, read across on another stream, dropped at once and
/// its memory reallocated and overwritten on its stream: the destination must hold what was
/// written, for each forced path.
#[test]
#[ignore = "needs a CUDA GPU"]
fn forced_paths_order_after_the_sources_stream_and_keep_it_alive() {
    let _gpu = crate::common::gpu_exclusive();
    let a = gpu_stream();
    let b = a.context().new_stream().expect("stream");
    for path in PATHS {
        let _forced = force_cross_device(path);
        check_order_and_keep_alive(&a, &b, &format!("{path:?}"));
    }
}

/// A copy between devices refuses a capturing stream with `Err(StreamCapture)` and leaves the
/// capture usable.
#[test]
#[ignore = "needs a CUDA GPU"]
fn forced_paths_refuse_capture() {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let _gpu = crate::common::gpu_shared();
    let a = gpu_stream();
    let b = a.context().new_stream().expect("stream");
    let src = DeviceArray::<f32, _>::zeros(&a, (64, 64)).expect("alloc");
    let mut dst = DeviceArray::<f32, _>::zeros(&b, (64, 64)).expect("alloc");
    b.synchronize().expect("sync");
    a.synchronize().expect("sync");
    for path in PATHS {
        let _forced = force_cross_device(path);
        b.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .expect("begin capture");
        let r = dst.assign_on(&b, &src.t());
        let end = b.end_capture(CUgraphInstantiate_flags(0));
        let e = r.expect_err("a copy between devices in a capture");
        assert_eq!(e.kind(), &ErrorKind::StreamCapture, "{path:?}: {e}");
        end.unwrap_or_else(|e| panic!("{path:?}: the capture must still end: {e}"));
    }
}

/// Tests on two devices: the source on device 1, the destination on device 0, and the other
/// way round.
mod two_gpus {
    use super::*;

    /// Streams on devices 0 and 1; fails on a machine with fewer devices.
    fn two_streams() -> (Arc<CudaStream>, Arc<CudaStream>) {
        let n = devspan::device_count().unwrap_or(0);
        assert!(
            n >= 2,
            "needs two CUDA GPUs, found {n}; skip with --skip peer::two_gpus::"
        );
        (
            devspan::new_stream(0).expect("stream on device 0"),
            devspan::new_stream(1).expect("stream on device 1"),
        )
    }

    /// Every layout and type pair, in both directions, on the path the driver allows and on
    /// the staged path, against ndarray.
    #[test]
    #[ignore = "needs two CUDA GPUs"]
    fn assign_across_devices_matches_ndarray() {
        let _gpu = crate::common::gpu_shared();
        let (d0, d1) = two_streams();
        let mut rng = StdRng::seed_from_u64(21);
        for forced in [None, Some(CrossPath::Staged)] {
            let _forced = forced.map(force_cross_device);
            for (i, l) in LAYOUTS.iter().enumerate() {
                for (from, to, dir) in [(&d1, &d0, "1->0"), (&d0, &d1, "0->1")] {
                    let w = format!("{forced:?} {dir} layout {i}");
                    check::<f32, f32>(&mut rng, l, from, to, &format!("{w} f32"));
                    check::<f32, f16>(&mut rng, l, from, to, &format!("{w} f32->f16"));
                    check::<u8, f64>(&mut rng, l, from, to, &format!("{w} u8->f64"));
                }
            }
        }
    }

    /// The source written behind a busy stream on its device, copied across, dropped and its
    /// memory reused: the destination holds what was written.
    #[test]
    #[ignore = "needs two CUDA GPUs"]
    fn assign_across_devices_orders_and_keeps_the_source_alive() {
        let _gpu = crate::common::gpu_exclusive();
        let (d0, d1) = two_streams();
        for forced in [None, Some(CrossPath::Staged)] {
            let _forced = forced.map(force_cross_device);
            check_order_and_keep_alive(&d1, &d0, &format!("{forced:?}"));
        }
    }

    /// Operations that are not copies refuse a stream of another device; copies made on one
    /// copy to its device.
    #[test]
    #[ignore = "needs two CUDA GPUs"]
    fn writes_refuse_a_stream_of_another_device_copies_move() {
        let _gpu = crate::common::gpu_shared();
        let (d0, d1) = two_streams();
        let mut a = DeviceArray::<f32, _>::zeros(&d0, 16).expect("alloc");
        let e = a
            .fill_on(&d1, 1.0)
            .expect_err("fill on another device's stream");
        assert_eq!(e.kind(), &ErrorKind::DeviceMismatch, "{e}");
        a.fill(2.5).expect("fill");
        // A copy made on another device's stream is a copy to that device.
        let moved = a.to_contiguous_on(&d1).expect("copy to device 1");
        assert_eq!(moved.device(), 1);
        assert!(moved.to_host().expect("download").iter().all(|&x| x == 2.5));
    }
}
