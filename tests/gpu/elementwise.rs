//! GPU tests of `devspan::elementwise::ElementwiseKernel`: NVRTC-compiled bodies over views of
//! ranks 0 to 10 with permuted, reversed, sliced and broadcast operands, mixed element types
//! and two outputs, transposed operands of 1- and 2-byte types (tiles of pairs) at odd
//! offsets, in-place updates, refused overlaps and bad calls, a busy second stream with
//! inputs dropped right after the launch, graph capture and replay, more than 2^31 elements,
//! and shuffled operands of 25 to 30 axes that do not merge.
//!
//! Each case draws its layout and data from its own seed (printed on failure) and compares with
//! ndarray (`Zip`); outputs are views into larger arrays poisoned before the launch, whose
//! elements outside the view must keep their poison.

use std::sync::Arc;

use devspan::elementwise::{Arg, ElementwiseKernel};
use devspan::testing::gpu_stream;
use devspan::{DeviceArray, DeviceElement, DeviceView, DeviceViewMut, ErrorKind};
use half::f16;
use ndarray::{ArrayD, IxDyn, SliceInfo, SliceInfoElem, Zip};
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::common::{busy, gpu_shared};

/// A random layout of `shape` carved out of a larger base array: the base's shape, the axis
/// permutation applied to it, then the slicing (steps of 1 or 2, some reversed).
#[derive(Debug, Clone)]
struct Carve {
    base: Vec<usize>,
    perm: Vec<usize>,
    slices: Vec<SliceInfoElem>,
}

fn carve(rng: &mut StdRng, shape: &[usize]) -> Carve {
    carve_with(rng, shape, true)
}

/// [`carve`], or with `gaps` false a base of exactly `shape` (permuted) read in full, each axis
/// possibly backwards.
fn carve_with(rng: &mut StdRng, shape: &[usize], gaps: bool) -> Carve {
    let r = shape.len();
    let mut perm: Vec<usize> = (0..r).collect();
    for i in (1..r).rev() {
        perm.swap(i, rng.random_range(0..=i));
    }
    let mut base = vec![0; r];
    let mut slices = Vec::with_capacity(r);
    for k in 0..r {
        let step: isize = if gaps && rng.random_bool(0.3) { 2 } else { 1 };
        let len = shape[k] * step as usize + usize::from(gaps && rng.random_bool(0.3));
        base[perm[k]] = len;
        let reversed = rng.random_bool(0.3);
        slices.push(SliceInfoElem::Slice {
            start: 0,
            end: Some((shape[k] * step as usize) as isize),
            step: if reversed { -step } else { step },
        });
    }
    Carve { base, perm, slices }
}

fn info(c: &Carve) -> SliceInfo<Vec<SliceInfoElem>, IxDyn, IxDyn> {
    SliceInfo::<_, IxDyn, IxDyn>::try_from(c.slices.clone()).unwrap()
}

fn random_shape(rng: &mut StdRng, rank: usize) -> Vec<usize> {
    let big = rng.random_range(0..rank.max(1));
    (0..rank)
        .map(|k| {
            if k == big {
                rng.random_range(1..=64)
            } else {
                rng.random_range(1..=4)
            }
        })
        .collect()
}

/// The shape of an input that broadcasts to `shape`: some leading axes dropped, some axes 1.
fn broadcast_shape(rng: &mut StdRng, shape: &[usize]) -> Vec<usize> {
    let drop = rng.random_range(0..=shape.len());
    shape[drop..]
        .iter()
        .map(|&l| if rng.random_bool(0.3) { 1 } else { l })
        .collect()
}

fn uniform<T: Copy>(rng: &mut StdRng, shape: &[usize], f: impl Fn(f64) -> T) -> ArrayD<T> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| f(rng.random_range(-1.0..1.0)))
}

/// Equal within `tol` times the larger of 1 and the expected magnitude (the device may fuse a
/// multiply and an add that the host rounds twice).
fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * want.abs().max(1.0)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn saxpy_matches_ndarray_on_random_layouts_of_rank_0_to_10() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the body reads its inputs and assigns its output by name.
    let k =
        unsafe { ElementwiseKernel::new("f32 a, f32 x, f32 y", "f32 z", "z = a * x + y") }.unwrap();
    for case in 0..88u64 {
        let seed = 0xe1e0_0000 + case;
        let mut rng = StdRng::seed_from_u64(seed);
        let rank = (case % 11) as usize;
        let shape = random_shape(&mut rng, rank);
        let a: f32 = rng.random_range(-2.0..2.0);
        let (cx, cz) = (carve(&mut rng, &shape), carve(&mut rng, &shape));
        let yshape = broadcast_shape(&mut rng, &shape);
        let cy = carve(&mut rng, &yshape);
        let what =
            format!("seed {seed:#x}: shape {shape:?}, x {cx:?}, y {cy:?} of {yshape:?}, z {cz:?}");
        let hx = uniform(&mut rng, &cx.base, |v| v as f32);
        let hy = uniform(&mut rng, &cy.base, |v| v as f32);
        let poison = uniform(&mut rng, &cz.base, |v| (v * 1e6) as f32);
        let dx = DeviceArray::from_host(&stream, &hx).unwrap();
        let dy = DeviceArray::from_host(&stream, &hy).unwrap();
        let mut dz = DeviceArray::from_host(&stream, &poison).unwrap();
        let xv = dx.view().permuted_axes(cx.perm.clone());
        let xv = xv.slice(info(&cx));
        let yv = dy.view().permuted_axes(cy.perm.clone());
        let yv = yv.slice(info(&cy));
        {
            let zv = dz.view_mut().permuted_axes(cz.perm.clone());
            let mut zv = zv.slice_move(info(&cz));
            k.launch(
                &[Arg::scalar(a), (&xv).into(), (&yv).into()],
                &mut [(&mut zv).into()],
            )
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        }
        let got = dz.to_host().unwrap();
        let mut want = poison.clone();
        {
            let hxv = hx.view().permuted_axes(cx.perm.clone());
            let hxv = hxv.slice(info(&cx));
            let hyv = hy.view().permuted_axes(cy.perm.clone());
            let hyv = hyv.slice(info(&cy));
            let wv = want.view_mut().permuted_axes(cz.perm.clone());
            let wv = wv.slice_move(info(&cz));
            Zip::from(wv)
                .and(&hxv)
                .and_broadcast(&hyv)
                .for_each(|w, &x, &y| *w = a * x + y);
        }
        for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
            assert!(
                close(f64::from(*g), f64::from(*w), 1e-6),
                "{what}: element {i} of the base: got {g}, expected {w}"
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn four_inputs_of_mixed_types_and_two_outputs_match_ndarray() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the body reads its inputs and assigns its outputs by name.
    let k = unsafe {
        ElementwiseKernel::new(
            "f16 x, i32 n, float64 w, u8 m",
            "f32 s, f16 t",
            "s = x * n + m; t = (float)(w - x)",
        )
    }
    .unwrap();
    for case in 0..40u64 {
        let seed = 0xe2e0_0000 + case;
        let mut rng = StdRng::seed_from_u64(seed);
        let rank = (case % 7) as usize;
        let shape = random_shape(&mut rng, rank);
        let cs = carve(&mut rng, &shape);
        let ct = carve(&mut rng, &shape);
        let cx = carve(&mut rng, &shape);
        let wshape = broadcast_shape(&mut rng, &shape);
        let cw = carve(&mut rng, &wshape);
        let what = format!(
            "seed {seed:#x}: shape {shape:?}, s {cs:?}, t {ct:?}, x {cx:?}, w {cw:?} of {wshape:?}"
        );
        let n: i32 = rng.random_range(-5..5);
        let m: u8 = rng.random();
        let hx = uniform(&mut rng, &cx.base, |v| f16::from_f64(v * 4.0));
        let hw = uniform(&mut rng, &cw.base, |v| v * 100.0);
        let ps = uniform(&mut rng, &cs.base, |v| (v * 1e6) as f32);
        let pt = uniform(&mut rng, &ct.base, |v| f16::from_f64(v * 1e4));
        let dx = DeviceArray::from_host(&stream, &hx).unwrap();
        let dw = DeviceArray::from_host(&stream, &hw).unwrap();
        let mut ds = DeviceArray::from_host(&stream, &ps).unwrap();
        let mut dt = DeviceArray::from_host(&stream, &pt).unwrap();
        let xv = dx.view().permuted_axes(cx.perm.clone());
        let xv = xv.slice(info(&cx));
        let wv = dw.view().permuted_axes(cw.perm.clone());
        let wv = wv.slice(info(&cw));
        {
            let sv = ds.view_mut().permuted_axes(cs.perm.clone());
            let mut sv = sv.slice_move(info(&cs));
            let tv = dt.view_mut().permuted_axes(ct.perm.clone());
            let mut tv = tv.slice_move(info(&ct));
            k.launch(
                &[(&xv).into(), Arg::scalar(n), (&wv).into(), Arg::scalar(m)],
                &mut [(&mut sv).into(), (&mut tv).into()],
            )
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        }
        let (gs, gt) = (ds.to_host().unwrap(), dt.to_host().unwrap());
        let (mut ws, mut wt) = (ps.clone(), pt.clone());
        {
            let hxv = hx.view().permuted_axes(cx.perm.clone());
            let hxv = hxv.slice(info(&cx));
            let hwv = hw.view().permuted_axes(cw.perm.clone());
            let hwv = hwv.slice(info(&cw));
            let sv = ws.view_mut().permuted_axes(cs.perm.clone());
            let sv = sv.slice_move(info(&cs));
            let tv = wt.view_mut().permuted_axes(ct.perm.clone());
            let tv = tv.slice_move(info(&ct));
            Zip::from(sv)
                .and(tv)
                .and(&hxv)
                .and_broadcast(&hwv)
                .for_each(|s, t, &x, &w| {
                    *s = x.to_f32() * n as f32 + f32::from(m);
                    *t = f16::from_f32((w - f64::from(x.to_f32())) as f32);
                });
        }
        for (i, (g, w)) in gs.iter().zip(ws.iter()).enumerate() {
            assert!(
                close(f64::from(*g), f64::from(*w), 1e-6),
                "{what}: s[{i}]: got {g}, expected {w}"
            );
        }
        for (i, (g, w)) in gt.iter().zip(wt.iter()).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{what}: t[{i}]: got {g}, expected {w}"
            );
        }
    }
}

/// Memory the test itself holds (a `CudaSlice` kept alive until the test has synchronised).
struct Held;
impl devspan::DeviceOwner for Held {}

#[test]
#[ignore = "needs a CUDA GPU"]
fn in_place_updates_run_and_overlaps_are_refused() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the bodies read their inputs and assign their outputs by name.
    let double = unsafe { ElementwiseKernel::new("f64 x", "f64 y", "y = 2 * x") }.unwrap();
    let split =
        unsafe { ElementwiseKernel::new("f64 x", "f64 y, f64 z", "y = x; z = -x") }.unwrap();
    let host: Vec<f64> = (0..1000).map(|i| i as f64 + 0.5).collect();
    let slice = stream.clone_htod(&host).unwrap();
    let ptr = devspan::interop::cuda_slice_address(&slice);
    let held = || -> Arc<dyn devspan::DeviceOwner> { Arc::new(Held) };
    // SAFETY: `slice` holds 1000 f64 at `ptr` until the end of the test, after the stream has
    // synchronised; the two views of it are what the aliasing check is tested on (it runs
    // before anything is enqueued, and allows only the element-for-element case, where each
    // element is read and then written by one thread).
    let (input, mut output, shifted) = unsafe {
        (
            devspan::DeviceView::<f64, _>::from_raw_parts(
                ptr,
                1000,
                ndarray::Ix1(1000),
                &[1],
                0,
                0,
                held(),
            )
            .unwrap(),
            devspan::DeviceViewMut::<f64, _>::from_raw_parts_mut(
                ptr,
                1000,
                ndarray::Ix1(999),
                &[1],
                0,
                0,
                held(),
            )
            .unwrap(),
            devspan::DeviceView::<f64, _>::from_raw_parts(
                ptr,
                1000,
                ndarray::Ix1(999),
                &[1],
                1,
                0,
                held(),
            )
            .unwrap(),
        )
    };
    // Element for element: an in-place update.
    let same = input.slice(ndarray::s![..999]);
    double
        .launch_on(&stream, &[(&same).into()], &mut [(&mut output).into()])
        .unwrap();
    let got = input.to_host_on(&stream).unwrap();
    let want: Vec<f64> = host
        .iter()
        .enumerate()
        .map(|(i, &v)| if i < 999 { 2.0 * v } else { v })
        .collect();
    assert_eq!(got.as_slice().unwrap(), &want[..]);
    // Shifted by one element, or reversed: refused, nothing written.
    let reversed = input.slice(ndarray::s![..999;-1]);
    for (what, src) in [("shifted", &shifted), ("reversed", &reversed)] {
        let e = double
            .launch_on(&stream, &[src.into()], &mut [(&mut output).into()])
            .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Aliasing, "{what}: {e}");
    }
    assert_eq!(
        input.to_host_on(&stream).unwrap().as_slice().unwrap(),
        &want[..]
    );
    // Two outputs over the same memory: refused.
    let mut other = DeviceArray::<f64, _>::zeros(&stream, 999).unwrap();
    let mut again = unsafe {
        // SAFETY: as above; the launch is refused before anything is enqueued.
        devspan::DeviceViewMut::<f64, _>::from_raw_parts_mut(
            ptr,
            1000,
            ndarray::Ix1(999),
            &[1],
            1,
            0,
            held(),
        )
        .unwrap()
    };
    let e = split
        .launch_on(
            &stream,
            &[(&other.view()).into()],
            &mut [(&mut output).into(), (&mut again).into()],
        )
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Aliasing, "{e}");
    // Disjoint outputs: both written.
    let src = DeviceArray::from_host(&stream, &ndarray::Array1::from_shape_fn(999, |i| i as f64))
        .unwrap();
    split
        .launch(
            &[(&src.view()).into()],
            &mut [(&mut other).into(), (&mut output).into()],
        )
        .unwrap();
    let o = other.to_host().unwrap();
    let n = output.to_host_on(&stream).unwrap();
    for i in 0..999 {
        assert_eq!((o[i], n[i]), (i as f64, -(i as f64)), "element {i}");
    }
    stream.synchronize().unwrap();
    drop(slice);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_calls_are_refused_with_their_kinds() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the bodies read their inputs and assign their outputs by name.
    let k = unsafe { ElementwiseKernel::new("f32 x, f32 y", "f32 z", "z = x + y") }.unwrap();
    let x = DeviceArray::<f32, _>::ones(&stream, (4, 5)).unwrap();
    let y64 = DeviceArray::<f64, _>::ones(&stream, (4, 5)).unwrap();
    let wide = DeviceArray::<f32, _>::ones(&stream, (4, 6)).unwrap();
    let mut z = DeviceArray::<f32, _>::zeros(&stream, (4, 5)).unwrap();
    let kind = |r: devspan::Result<()>| r.unwrap_err().kind().clone();
    assert_eq!(
        kind(k.launch(
            &[(&x.view()).into(), (&y64.view()).into()],
            &mut [(&mut z).into()]
        )),
        ErrorKind::UnsupportedDtype
    );
    assert_eq!(
        kind(k.launch(&[(&x.view()).into()], &mut [(&mut z).into()])),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(k.launch(
            &[(&x.view()).into(), (&wide.view()).into()],
            &mut [(&mut z).into()]
        )),
        ErrorKind::ShapeMismatch
    );
    assert_eq!(
        kind(k.launch(
            &[(&x.view()).into(), Arg::scalar(1.0f64)],
            &mut [(&mut z).into()]
        )),
        ErrorKind::UnsupportedDtype
    );
    // A scalar for an array input compiles a variant of its own.
    k.launch(
        &[(&x.view()).into(), Arg::scalar(2.5f32)],
        &mut [(&mut z).into()],
    )
    .unwrap();
    assert!(z.to_host().unwrap().iter().all(|&v| v == 3.5));
    // NVRTC's log names the body's line.
    let broken =
        unsafe { ElementwiseKernel::new("f32 x", "f32 z", "z = x +;\nz = undefined_name") }
            .unwrap();
    let e = broken
        .launch(&[(&x.view()).into()], &mut [(&mut z).into()])
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Compile, "{e}");
    assert!(
        e.to_string().contains("body(1)") && e.to_string().contains("undefined_name"),
        "{e}"
    );
    // Nothing was written by the refused calls.
    assert!(z.to_host().unwrap().iter().all(|&v| v == 3.5));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn busy_streams_and_inputs_dropped_after_launch_keep_their_values() {
    let _gpu = gpu_shared();
    let a = gpu_stream();
    let b = devspan::new_stream(0).unwrap();
    // SAFETY: the body reads its inputs and assigns its output by name.
    let k = unsafe { ElementwiseKernel::new("u32 x, u32 y", "u32 z", "z = x * 3u + y") }.unwrap();
    let n = 1 << 22;
    let hx = ndarray::Array1::from_shape_fn(n, |i| i as u32);
    let hy = ndarray::Array1::from_shape_fn(n, |i| (i as u32).wrapping_mul(2_654_435_761));
    for round in 0..4 {
        let x = DeviceArray::from_host(&a, &hx).unwrap();
        let y = DeviceArray::from_host(&a, &hy).unwrap();
        let mut z = DeviceArray::<u32, _>::zeros(&a, n).unwrap();
        // `a` stays busy: the launch on `b` must wait for the uploads queued on `a`, and the
        // inputs are dropped right after it, while it has not run.
        busy(&a, 20);
        let xr = x.slice(ndarray::s![..;-1]);
        k.launch_on(
            &b,
            &[(&xr).into(), (&y.view()).into()],
            &mut [(&mut z).into()],
        )
        .unwrap();
        drop(xr);
        drop((x, y));
        // Reallocate and overwrite memory of the same size, on the stream that freed it.
        let mut junk = DeviceArray::<u32, _>::zeros(&a, n).unwrap();
        junk.fill(0xdead_beef).unwrap();
        let got = z.to_host_on(&b).unwrap();
        for i in (0..n).step_by(997).chain([0, n - 1]) {
            let want = ((n - 1 - i) as u32).wrapping_mul(3).wrapping_add(hy[i]);
            assert_eq!(got[i], want, "round {round}, element {i}");
        }
        drop(junk);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_captured_launch_replays_on_new_data() {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the body reads its inputs and assigns its output by name.
    let k = unsafe { ElementwiseKernel::new("f32 a, f32 x", "f32 z", "z = a * x") }.unwrap();
    let mut x = DeviceArray::<f32, _>::from_elem(&stream, (64, 48), 1.0).unwrap();
    let mut z = DeviceArray::<f32, _>::zeros(&stream, (48, 64)).unwrap();
    // Compile outside the capture, then capture the same variant.
    k.launch(
        &[Arg::scalar(3.0f32), (&x.t()).into()],
        &mut [(&mut z).into()],
    )
    .unwrap();
    stream.synchronize().unwrap();
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .unwrap();
    let r = k.launch(
        &[Arg::scalar(3.0f32), (&x.t()).into()],
        &mut [(&mut z).into()],
    );
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .unwrap()
        .expect("a graph");
    r.unwrap();
    x.fill(2.0).unwrap();
    z.fill(0.0).unwrap();
    graph.launch().unwrap();
    assert!(z.to_host().unwrap().iter().all(|&v| v == 6.0));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ranks_of_25_to_30_after_merging_match_ndarray() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the bodies read their inputs and assign their outputs by name.
    let mixed =
        unsafe { ElementwiseKernel::new("u8 x, f16 y, u8 c", "f32 z", "z = x * c + y") }.unwrap();
    let bytes = unsafe { ElementwiseKernel::new("u8 x", "u8 z", "z = (unsigned char)(x * 3 + 1)") }
        .unwrap();
    // Shapes of 25 to 30 axes of extent 2 or 3 (unit axes between them), every operand
    // shuffled on its own, so that next to nothing merges.
    let shapes: [Vec<usize>; 3] = [
        [vec![2; 26], vec![1; 4]].concat(),
        [vec![2; 22], vec![3; 3]].concat(),
        vec![2; 27],
    ];
    for (case, shape) in shapes.iter().enumerate() {
        let seed = 0xe9e0_0000 + case as u64;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut shape = shape.clone();
        for i in (1..shape.len()).rev() {
            shape.swap(i, rng.random_range(0..=i));
        }
        let (cx, cz) = (
            carve_with(&mut rng, &shape, false),
            carve_with(&mut rng, &shape, false),
        );
        let what = format!("seed {seed:#x}: shape {shape:?}, x {cx:?}, z {cz:?}");
        let hx = ArrayD::from_shape_fn(IxDyn(&cx.base), |_| rng.random::<u8>());
        let dx = DeviceArray::from_host(&stream, &hx).unwrap();
        let xv = dx.view().permuted_axes(cx.perm.clone());
        let xv = xv.slice(info(&cx));
        let hxv = hx.view().permuted_axes(cx.perm.clone());
        let hxv = hxv.slice(info(&cx));
        if case == 0 {
            // f32 out of u8 and a broadcast f16 input (leading axes dropped, some of extent 1).
            let yshape = broadcast_shape(&mut rng, &shape);
            let cy = carve_with(&mut rng, &yshape, false);
            let c: u8 = rng.random_range(1..8);
            let hy = uniform(&mut rng, &cy.base, |v| f16::from_f64(v * 8.0));
            let poison = uniform(&mut rng, &cz.base, |v| (v * 1e6) as f32);
            let dy = DeviceArray::from_host(&stream, &hy).unwrap();
            let mut dz = DeviceArray::from_host(&stream, &poison).unwrap();
            let yv = dy.view().permuted_axes(cy.perm.clone());
            let yv = yv.slice(info(&cy));
            {
                let zv = dz.view_mut().permuted_axes(cz.perm.clone());
                let mut zv = zv.slice_move(info(&cz));
                mixed
                    .launch(
                        &[(&xv).into(), (&yv).into(), Arg::scalar(c)],
                        &mut [(&mut zv).into()],
                    )
                    .unwrap_or_else(|e| panic!("{what}, y {cy:?}: {e:#}"));
            }
            let got = dz.to_host().unwrap();
            let mut want = poison.clone();
            {
                let hyv = hy.view().permuted_axes(cy.perm.clone());
                let hyv = hyv.slice(info(&cy));
                let wv = want.view_mut().permuted_axes(cz.perm.clone());
                let wv = wv.slice_move(info(&cz));
                Zip::from(wv)
                    .and(&hxv)
                    .and_broadcast(&hyv)
                    .for_each(|w, &x, &y| *w = f32::from(x) * f32::from(c) + y.to_f32());
            }
            let bad = got.iter().zip(want.iter()).position(|(g, w)| g != w);
            assert!(
                bad.is_none(),
                "{what}, y {cy:?}: element {bad:?} of the base differs"
            );
        } else {
            let poison = ArrayD::from_shape_fn(IxDyn(&cz.base), |_| rng.random::<u8>());
            let mut dz = DeviceArray::from_host(&stream, &poison).unwrap();
            {
                let zv = dz.view_mut().permuted_axes(cz.perm.clone());
                let mut zv = zv.slice_move(info(&cz));
                bytes
                    .launch(&[(&xv).into()], &mut [(&mut zv).into()])
                    .unwrap_or_else(|e| panic!("{what}: {e:#}"));
            }
            let got = dz.to_host().unwrap();
            let mut want = poison.clone();
            {
                let wv = want.view_mut().permuted_axes(cz.perm.clone());
                let wv = wv.slice_move(info(&cz));
                Zip::from(wv)
                    .and(&hxv)
                    .for_each(|w, &x| *w = x.wrapping_mul(3).wrapping_add(1));
            }
            let bad = got.iter().zip(want.iter()).position(|(g, w)| g != w);
            assert!(bad.is_none(), "{what}: element {bad:?} of the base differs");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn more_than_2_pow_31_elements_take_64_bit_indices() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the body reads its inputs and assigns its output by name.
    let k =
        unsafe { ElementwiseKernel::new("u8 x", "u8 y", "y = (unsigned char)(x + 1)") }.unwrap();
    let n = (1usize << 31) + 4099;
    let mut x = DeviceArray::<u8, _>::zeros(&stream, n).unwrap();
    x.slice_mut(ndarray::s![n - 4096..]).fill(41).unwrap();
    let mut y = DeviceArray::<u8, _>::zeros(&stream, n).unwrap();
    y.fill(7).unwrap();
    k.launch(&[(&x.view()).into()], &mut [(&mut y).into()])
        .unwrap();
    let tail = y.slice(ndarray::s![n - 8192..]).to_host().unwrap();
    for (i, &v) in tail.iter().enumerate() {
        assert_eq!(v, if i < 4096 { 1 } else { 42 }, "element {}", n - 8192 + i);
    }
    let head = y.slice(ndarray::s![..4096]).to_host().unwrap();
    assert!(head.iter().all(|&v| v == 1));
    // Strided too: every other element of the second half, reversed.
    let mut z = DeviceArray::<u8, _>::zeros(&stream, n / 4).unwrap();
    let xs = x.slice(ndarray::s![n / 2..;-2]);
    let xs = xs.slice(ndarray::s![..n / 4]);
    k.launch(&[(&xs).into()], &mut [(&mut z).into()]).unwrap();
    let zt = z.slice(ndarray::s![..4]).to_host().unwrap();
    assert_eq!(zt.to_vec(), vec![42, 42, 42, 42]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_device_header_indexes_kernel_views_like_ndarray() {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // Each element of the view gets its logical index (operator[]) plus 1000 times the element
    // that `at` reads at the reversed multi-index.
    let src = format!(
        "{}\n{}",
        devspan::interop::DEVICE_HEADER,
        r#"extern "C" __global__ void mark(devspan_view<double, 3> v, devspan_view<double, 3> r) {
  const unsigned long long n = v.size();
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned long long q = i;
    const unsigned long long c = q % v.shape[2]; q /= v.shape[2];
    const unsigned long long b = q % v.shape[1]; q /= v.shape[1];
    const unsigned long long idx[3] = {v.shape[0] - 1 - q, v.shape[1] - 1 - b, v.shape[2] - 1 - c};
    v[i] = (double)i + 1000.0 * r.at(idx);
  }
}"#
    );
    let ptx = cudarc::nvrtc::compile_ptx(src).expect("NVRTC compiles the header");
    let f = stream
        .context()
        .load_module(ptx)
        .unwrap()
        .load_function("mark")
        .unwrap();
    let mut rng = StdRng::seed_from_u64(0xcu64);
    let base = uniform(&mut rng, &[7, 6, 9], |v| v);
    let poison = uniform(&mut rng, &[7, 6, 9], |v| v * 1e9);
    let r = DeviceArray::from_host(&stream, &base).unwrap();
    let mut d = DeviceArray::from_host(&stream, &poison).unwrap();
    let rv = r.slice(ndarray::s![1..;2, ..;-1, 2..8]);
    {
        let mut v = d.slice_mut(ndarray::s![..;-2, 1..4, ..;3]);
        v.swap_axes(0, 2);
        assert_eq!(v.shape(), &[3, 3, 4]);
        let rsub = rv.slice(ndarray::s![..3, ..3, ..4]);
        let rk = rsub.kernel_view::<3>().unwrap();
        v.with_kernel_view_mut::<3, _>(&stream, |kv| {
            let mut b = stream.launch_builder(&f);
            b.arg(&kv).arg(&rk);
            // SAFETY: `mark` takes two devspan_view<double, 3>; it writes only the elements of
            // the first and reads elements of the second inside its extents; `r` outlives the
            // synchronising download below.
            unsafe { b.launch(LaunchConfig::for_num_elems(36)) }.unwrap();
            Ok(())
        })
        .unwrap();
    }
    let got = d.to_host().unwrap();
    let mut want = poison.clone();
    {
        let mut v = want.slice_mut(ndarray::s![..;-2, 1..4, ..;3]);
        v.swap_axes(0, 2);
        let hr = base.slice(ndarray::s![1..;2, ..;-1, 2..8]);
        let hr = hr.slice(ndarray::s![..3, ..3, ..4]);
        for (i, ((a, b, c), w)) in v.indexed_iter_mut().enumerate() {
            *w = i as f64 + 1000.0 * hr[[2 - a, 2 - b, 3 - c]];
        }
    }
    assert_eq!(got, want);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transposed_operands_walk_tiles_and_match_ndarray() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the body reads its inputs and assigns its output by name.
    let k = unsafe { ElementwiseKernel::new("f32 x, f64 c", "f32 z", "z = x - (float)c") }.unwrap();
    // Extents around and past whole tiles of 32, a batch axis, both orders of the operands.
    let shapes: [&[usize]; 6] = [
        &[70, 45],
        &[32, 32],
        &[16, 100],
        &[3, 33, 65],
        &[2, 5, 40, 17],
        &[129, 31],
    ];
    for (case, shape) in shapes.iter().enumerate() {
        let seed = 0xe7e0_0000 + case as u64;
        let mut rng = StdRng::seed_from_u64(seed);
        let r = shape.len();
        // x: stored with its last two axes swapped (a transposed view); c: a broadcast column.
        let mut stored = shape.to_vec();
        stored.swap(r - 1, r - 2);
        let hx = uniform(&mut rng, &stored, |v| v as f32);
        let mut cshape = shape.to_vec();
        cshape[r - 1] = 1;
        let hc = uniform(&mut rng, &cshape, |v| v * 10.0);
        let cz = carve(&mut rng, shape);
        let poison = uniform(&mut rng, &cz.base, |v| (v * 1e6) as f32);
        let what = format!("seed {seed:#x}: shape {shape:?}, z {cz:?}");
        let dx = DeviceArray::from_host(&stream, &hx).unwrap();
        let dc = DeviceArray::from_host(&stream, &hc).unwrap();
        let mut dz = DeviceArray::from_host(&stream, &poison).unwrap();
        let mut xv = dx.view();
        xv.swap_axes(r - 1, r - 2);
        {
            let zv = dz.view_mut().permuted_axes(cz.perm.clone());
            let mut zv = zv.slice_move(info(&cz));
            k.launch(
                &[(&xv).into(), (&dc.view()).into()],
                &mut [(&mut zv).into()],
            )
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        }
        let got = dz.to_host().unwrap();
        let mut want = poison.clone();
        {
            let mut hxv = hx.view();
            hxv.swap_axes(r - 1, r - 2);
            let wv = want.view_mut().permuted_axes(cz.perm.clone());
            let wv = wv.slice_move(info(&cz));
            Zip::from(wv)
                .and(&hxv)
                .and_broadcast(&hc)
                .for_each(|w, &x, &c| *w = x - c as f32);
        }
        assert_eq!(got, want, "{what}");
    }
}

/// An operand's layout over the last two axes of a tiled case: stored with those axes swapped
/// (a transposed view) or not, each stored axis sliced from a larger base at offset 0 or 1 and
/// maybe reversed (a broadcast input's view may have fewer axes or axes of 1).
#[derive(Debug, Clone)]
struct Tiled {
    base: Vec<usize>,
    slices: Vec<SliceInfoElem>,
    swapped: bool,
}

fn tiled_layout(rng: &mut StdRng, shape: &[usize], swapped: Option<bool>, bcast: bool) -> Tiled {
    let r = shape.len();
    let mut shape = shape.to_vec();
    if bcast && rng.random_bool(0.4) {
        if rng.random_bool(0.5) {
            // A row: the last axis alone.
            shape = vec![shape[r - 1]];
        } else {
            // A column.
            shape[r - 1] = 1;
        }
    }
    let n = shape.len();
    let swapped = n >= 2 && swapped.unwrap_or_else(|| rng.random_bool(0.5));
    let mut stored = shape.clone();
    if swapped {
        stored.swap(n - 1, n - 2);
    }
    let mut base = Vec::with_capacity(n);
    let mut slices = Vec::with_capacity(n);
    for &len in &stored {
        let off = rng.random_range(0..=1usize);
        base.push(len + off + rng.random_range(0..=1usize));
        slices.push(SliceInfoElem::Slice {
            start: off as isize,
            end: Some((off + len) as isize),
            step: if rng.random_bool(0.2) { -1 } else { 1 },
        });
    }
    Tiled {
        base,
        slices,
        swapped,
    }
}

fn tiled_info(l: &Tiled) -> SliceInfo<Vec<SliceInfoElem>, IxDyn, IxDyn> {
    SliceInfo::<_, IxDyn, IxDyn>::try_from(l.slices.clone()).unwrap()
}

/// The view `l` of a host array (its base).
fn tiled_host<'a, T>(a: &'a ArrayD<T>, l: &Tiled) -> ndarray::ArrayViewD<'a, T> {
    let mut v = a.view().slice_move(tiled_info(l));
    if l.swapped {
        let n = v.ndim();
        v.swap_axes(n - 1, n - 2);
    }
    v
}

/// The view `l` of a host array (its base), mutable.
fn tiled_host_mut<'a, T>(a: &'a mut ArrayD<T>, l: &Tiled) -> ndarray::ArrayViewMutD<'a, T> {
    let mut v = a.view_mut().slice_move(tiled_info(l));
    if l.swapped {
        let n = v.ndim();
        v.swap_axes(n - 1, n - 2);
    }
    v
}

/// The view `l` of a device array (its base).
fn tiled_device<'a, T: DeviceElement>(
    a: &'a DeviceArray<T, IxDyn>,
    l: &Tiled,
) -> DeviceView<'a, T, IxDyn> {
    let mut v = a.view().slice_move(tiled_info(l));
    if l.swapped {
        let n = v.ndim();
        v.swap_axes(n - 1, n - 2);
    }
    v
}

/// The view `l` of a device array (its base), mutable.
fn tiled_device_mut<'a, T: DeviceElement>(
    a: &'a mut DeviceArray<T, IxDyn>,
    l: &Tiled,
) -> DeviceViewMut<'a, T, IxDyn> {
    let mut v = a.view_mut().slice_move(tiled_info(l));
    if l.swapped {
        let n = v.ndim();
        v.swap_axes(n - 1, n - 2);
    }
    v
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn narrow_types_move_in_pairs_through_tiles_and_match_ndarray() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the bodies read their inputs and assign their outputs by name.
    let (halves, ints, mixed) = unsafe {
        (
            ElementwiseKernel::new("f32 a, f16 x, f16 y", "f16 z", "z = a * x + y").unwrap(),
            ElementwiseKernel::new("u8 x, i16 y", "i16 z, u8 w", "z = x * 3 + y; w = x ^ 0x5a")
                .unwrap(),
            // A 4-byte operand beside a 2-byte one: pairs of it move as 8-byte accesses.
            ElementwiseKernel::new("f16 x, f32 y", "f32 z", "z = 0.5f * x + y").unwrap(),
        )
    };
    // Extents around and past whole tiles of 64 x 64. z (the first output, whose fastest axis
    // is the last) is never transposed and x always is, so every case walks tiles with x
    // staged; y and w take either order.
    let extents = [16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129];
    for case in 0..64u64 {
        let seed = 0xe9a0_0000 + case;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut shape: Vec<usize> = match rng.random_range(0..3) {
            0 => vec![],
            1 => vec![1],
            _ => vec![3],
        };
        for _ in 0..2 {
            shape.push(extents[rng.random_range(0..extents.len())]);
        }
        let lx = tiled_layout(&mut rng, &shape, Some(true), false);
        let ly = tiled_layout(&mut rng, &shape, None, true);
        let lz = tiled_layout(&mut rng, &shape, Some(false), false);
        let lw = tiled_layout(&mut rng, &shape, None, false);
        let what = format!("seed {seed:#x}: shape {shape:?}, x {lx:?}, y {ly:?}, z {lz:?}");
        // Multiples of 1/64 below 8 in magnitude: the bodies' arithmetic is exact in f32, and
        // the device's only rounding is the one to the output's type, as on the host.
        let q = |v: f64| (v * 512.0).round() / 64.0;
        if case % 3 == 2 {
            let hx = uniform(&mut rng, &lx.base, |v| f16::from_f64(q(v)));
            let hy = uniform(&mut rng, &ly.base, |v| q(v) as f32);
            let poison = uniform(&mut rng, &lz.base, |v| (v * 1e6) as f32);
            let dx = DeviceArray::from_host(&stream, &hx).unwrap();
            let dy = DeviceArray::from_host(&stream, &hy).unwrap();
            let mut dz = DeviceArray::from_host(&stream, &poison).unwrap();
            let (xv, yv) = (tiled_device(&dx, &lx), tiled_device(&dy, &ly));
            {
                let mut zv = tiled_device_mut(&mut dz, &lz);
                mixed
                    .launch(&[(&xv).into(), (&yv).into()], &mut [(&mut zv).into()])
                    .unwrap_or_else(|e| panic!("{what}: {e:#}"));
            }
            let got = dz.to_host().unwrap();
            let mut want = poison.clone();
            Zip::from(tiled_host_mut(&mut want, &lz))
                .and(&tiled_host(&hx, &lx))
                .and_broadcast(&tiled_host(&hy, &ly))
                .for_each(|z, &x, &y| *z = 0.5 * x.to_f32() + y);
            assert_eq!(got, want, "{what}");
        } else if case % 3 == 0 {
            let hx = uniform(&mut rng, &lx.base, |v| f16::from_f64(q(v)));
            let hy = uniform(&mut rng, &ly.base, |v| f16::from_f64(q(v)));
            let poison = uniform(&mut rng, &lz.base, |v| f16::from_f64(v * 1e4));
            let dx = DeviceArray::from_host(&stream, &hx).unwrap();
            let dy = DeviceArray::from_host(&stream, &hy).unwrap();
            let mut dz = DeviceArray::from_host(&stream, &poison).unwrap();
            let (xv, yv) = (tiled_device(&dx, &lx), tiled_device(&dy, &ly));
            {
                let mut zv = tiled_device_mut(&mut dz, &lz);
                halves
                    .launch(
                        &[Arg::scalar(2.0f32), (&xv).into(), (&yv).into()],
                        &mut [(&mut zv).into()],
                    )
                    .unwrap_or_else(|e| panic!("{what}: {e:#}"));
            }
            let got = dz.to_host().unwrap();
            let mut want = poison.clone();
            Zip::from(tiled_host_mut(&mut want, &lz))
                .and(&tiled_host(&hx, &lx))
                .and_broadcast(&tiled_host(&hy, &ly))
                .for_each(|z, &x, &y| *z = f16::from_f32(2.0 * x.to_f32() + y.to_f32()));
            for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{what}: z[{i}] of the base: got {g}, expected {w}"
                );
            }
        } else {
            let hx = ArrayD::from_shape_fn(IxDyn(&lx.base), |_| rng.random::<u8>());
            let hy = ArrayD::from_shape_fn(IxDyn(&ly.base), |_| rng.random::<i16>());
            let pz = ArrayD::from_shape_fn(IxDyn(&lz.base), |_| rng.random::<i16>());
            let pw = ArrayD::from_shape_fn(IxDyn(&lw.base), |_| rng.random::<u8>());
            let dx = DeviceArray::from_host(&stream, &hx).unwrap();
            let dy = DeviceArray::from_host(&stream, &hy).unwrap();
            let mut dz = DeviceArray::from_host(&stream, &pz).unwrap();
            let mut dw = DeviceArray::from_host(&stream, &pw).unwrap();
            let (xv, yv) = (tiled_device(&dx, &lx), tiled_device(&dy, &ly));
            {
                let mut zv = tiled_device_mut(&mut dz, &lz);
                let mut wv = tiled_device_mut(&mut dw, &lw);
                ints.launch(
                    &[(&xv).into(), (&yv).into()],
                    &mut [(&mut zv).into(), (&mut wv).into()],
                )
                .unwrap_or_else(|e| panic!("{what}, w {lw:?}: {e:#}"));
            }
            let (gz, gw) = (dz.to_host().unwrap(), dw.to_host().unwrap());
            let (mut wz, mut ww) = (pz.clone(), pw.clone());
            Zip::from(tiled_host_mut(&mut wz, &lz))
                .and(tiled_host_mut(&mut ww, &lw))
                .and(&tiled_host(&hx, &lx))
                .and_broadcast(&tiled_host(&hy, &ly))
                .for_each(|z, w, &x, &y| {
                    *z = (i32::from(x) * 3 + i32::from(y)) as i16;
                    *w = x ^ 0x5a;
                });
            assert_eq!(gz, wz, "{what}, w {lw:?}: z");
            assert_eq!(gw, ww, "{what}, w {lw:?}: w");
        }
    }
}

/// Tiles of pairs beyond the shapes above: two outer axes that do not merge, an in-place update
/// (the output read as an input element for element, through a second view of its memory), and
/// transposed inputs of which the third does not fit the shared-memory budget (three 64 x 64 f32
/// tiles would take 48 KiB of the 40 allowed), so it is read directly along its stride, while
/// the f16 one after it still fits.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pairs_walk_outer_axes_update_in_place_and_read_unstaged_inputs() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the bodies read their inputs and assign their outputs by name.
    let (update, four) = unsafe {
        (
            ElementwiseKernel::new("f16 x, f16 y", "f16 z", "z = x + 2 * y").unwrap(),
            ElementwiseKernel::new(
                "f32 b, f32 c, f32 d, f16 e",
                "f16 z",
                "z = b - c + 2 * d + e",
            )
            .unwrap(),
        )
    };
    let extents = [17, 63, 64, 65, 129];
    // Multiples of 1/64 below 8 in magnitude: every sum below is exact in f16.
    let q = |v: f64| (v * 512.0).round() / 64.0;
    for case in 0..24u64 {
        let seed = 0xe9b0_0000 + case;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut shape = vec![2, 3];
        for _ in 0..2 {
            shape.push(extents[rng.random_range(0..extents.len())]);
        }
        let lz = tiled_layout(&mut rng, &shape, Some(false), false);
        let lx: Vec<Tiled> = (0..4)
            .map(|_| tiled_layout(&mut rng, &shape, Some(true), false))
            .collect();
        let what = format!("seed {seed:#x}: shape {shape:?}, z {lz:?}, inputs {lx:?}");
        let poison = uniform(&mut rng, &lz.base, |v| f16::from_f64(q(v)));
        let mut dz = DeviceArray::from_host(&stream, &poison).unwrap();
        let mut want = poison.clone();
        if case % 2 == 0 {
            let hx = uniform(&mut rng, &lx[0].base, |v| f16::from_f64(q(v)));
            let dx = DeviceArray::from_host(&stream, &hx).unwrap();
            let (base, len) = (dz.device_ptr(), dz.len());
            {
                let mut zv = tiled_device_mut(&mut dz, &lz);
                let offset = (zv.device_ptr() - base) as usize / std::mem::size_of::<f16>();
                // SAFETY: `dz` holds `len` f16 at `base` until after the synchronising
                // `to_host` below; this view reads exactly the elements `zv` writes, each
                // before its own write (an in-place update).
                let yv = unsafe {
                    DeviceView::<f16, _>::from_raw_parts(
                        base,
                        len,
                        IxDyn(zv.shape()),
                        zv.strides(),
                        offset,
                        0,
                        Arc::new(Held),
                    )
                }
                .unwrap();
                let xv = tiled_device(&dx, &lx[0]);
                update
                    .launch(&[(&xv).into(), (&yv).into()], &mut [(&mut zv).into()])
                    .unwrap_or_else(|e| panic!("{what}: {e:#}"));
            }
            Zip::from(tiled_host_mut(&mut want, &lz))
                .and(&tiled_host(&hx, &lx[0]))
                .for_each(|z, &x| *z = f16::from_f32(x.to_f32() + 2.0 * z.to_f32()));
        } else {
            let h: Vec<ArrayD<f32>> = (0..3)
                .map(|i| uniform(&mut rng, &lx[i].base, |v| q(v) as f32))
                .collect();
            let he = uniform(&mut rng, &lx[3].base, |v| f16::from_f64(q(v)));
            let d: Vec<DeviceArray<f32, IxDyn>> = h
                .iter()
                .map(|a| DeviceArray::from_host(&stream, a).unwrap())
                .collect();
            let de = DeviceArray::from_host(&stream, &he).unwrap();
            {
                let v: Vec<DeviceView<'_, f32, IxDyn>> =
                    (0..3).map(|i| tiled_device(&d[i], &lx[i])).collect();
                let ev = tiled_device(&de, &lx[3]);
                let mut zv = tiled_device_mut(&mut dz, &lz);
                four.launch(
                    &[(&v[0]).into(), (&v[1]).into(), (&v[2]).into(), (&ev).into()],
                    &mut [(&mut zv).into()],
                )
                .unwrap_or_else(|e| panic!("{what}: {e:#}"));
            }
            Zip::from(tiled_host_mut(&mut want, &lz))
                .and(&tiled_host(&h[0], &lx[0]))
                .and(&tiled_host(&h[1], &lx[1]))
                .and(&tiled_host(&h[2], &lx[2]))
                .and(&tiled_host(&he, &lx[3]))
                .for_each(|z, &b, &c, &d, &e| *z = f16::from_f32(b - c + 2.0 * d + e.to_f32()));
        }
        let got = dz.to_host().unwrap();
        for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{what}: z[{i}] of the base: got {g}, expected {w}"
            );
        }
    }
}

/// A transposed u8 input of more than 2^31 elements: tiles of pairs with 64-bit offsets,
/// checked against ndarray on windows at both ends and in the middle, across partial tiles.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pairs_with_64_bit_offsets_match_ndarray() {
    if !crate::common::unless_sanitized("more than 2^31 elements") {
        return;
    }
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the body reads its input and assigns its output by name.
    let k = unsafe { ElementwiseKernel::new("u8 x", "u8 z", "z = (unsigned char)(x * 3 + 1)") }
        .unwrap();
    // 32771 x 65541 > 2^31; neither is a multiple of 64.
    let (rows, cols) = (32771usize, 65541usize);
    let mut x = DeviceArray::<u8, _>::zeros(&stream, (rows, cols)).unwrap();
    x.fill(7).unwrap();
    x.slice_mut(ndarray::s![rows - 70.., ..]).fill(9).unwrap();
    x.slice_mut(ndarray::s![.., cols - 3..]).fill(11).unwrap();
    x.slice_mut(ndarray::s![1000..1100;3, 40000..40100;7])
        .fill(13)
        .unwrap();
    x.slice_mut(ndarray::s![..5, ..]).fill(17).unwrap();
    let mut z = DeviceArray::<u8, _>::zeros(&stream, (cols, rows)).unwrap();
    z.fill(0xee).unwrap();
    k.launch(&[(&x.t()).into()], &mut [(&mut z).into()])
        .unwrap();
    // Windows of z (rows of z are columns of x).
    let windows = [
        (0..100, 0..100),
        (cols - 100..cols, rows - 100..rows),
        (39990..40110, 990..1110),
        (cols - 64..cols, 0..70),
        (0..70, rows - 130..rows),
    ];
    for (zr, zc) in windows {
        let got = z
            .slice(ndarray::s![zr.clone(), zc.clone()])
            .to_host()
            .unwrap();
        let src = x
            .slice(ndarray::s![zc.clone(), zr.clone()])
            .to_host()
            .unwrap();
        let want = src.t().mapv(|v: u8| v.wrapping_mul(3).wrapping_add(1));
        assert_eq!(got, want, "z[{zr:?}, {zc:?}]");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn contiguous_operands_of_any_length_and_offset_match_ndarray() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the body reads its inputs and assigns its outputs by name.
    let k = unsafe {
        ElementwiseKernel::new(
            "f16 x, f64 y, i8 c",
            "f64 w, f16 z",
            "w = x * y + c; z = x + 1.0f",
        )
    }
    .unwrap();
    let mut rng = StdRng::seed_from_u64(0xe8e0_0000);
    // Lengths around the vector width (8 elements of f16) and offsets that break the 16-byte
    // alignment of some operands (the vector path needs all of them aligned).
    for &n in &[1usize, 7, 8, 9, 15, 16, 17, 63, 1000, 1_000_003] {
        for &(ox, oy, ow) in &[(0usize, 0usize, 0usize), (1, 0, 0), (0, 0, 3), (8, 2, 2)] {
            let what = format!("n {n}, offsets x {ox}, y {oy}, w {ow}");
            let hx = uniform(&mut rng, &[n + ox], |v| f16::from_f64(v * 8.0));
            let hy = uniform(&mut rng, &[n + oy], |v| v * 3.0);
            let hc = uniform(&mut rng, &[n], |v| (v * 100.0) as i8);
            let pw = uniform(&mut rng, &[n + ow], |v| v * 1e9);
            let pz = uniform(&mut rng, &[n], |v| f16::from_f64(v * 1e4));
            let dx = DeviceArray::from_host(&stream, &hx).unwrap();
            let dy = DeviceArray::from_host(&stream, &hy).unwrap();
            let dc = DeviceArray::from_host(&stream, &hc).unwrap();
            let mut dw = DeviceArray::from_host(&stream, &pw).unwrap();
            let mut dz = DeviceArray::from_host(&stream, &pz).unwrap();
            {
                let xv = dx.slice(ndarray::s![ox..]);
                let yv = dy.slice(ndarray::s![oy..]);
                let mut wv = dw.slice_mut(ndarray::s![ow..]);
                k.launch(
                    &[(&xv).into(), (&yv).into(), (&dc.view()).into()],
                    &mut [(&mut wv).into(), (&mut dz).into()],
                )
                .unwrap_or_else(|e| panic!("{what}: {e:#}"));
            }
            let (gw, gz) = (dw.to_host().unwrap(), dz.to_host().unwrap());
            for i in 0..n {
                let x = f64::from(hx[ox + i].to_f32());
                let want = x * hy[oy + i] + f64::from(hc[i]);
                assert!(
                    close(gw[ow + i], want, 1e-12),
                    "{what}: w[{i}] = {}, expected {want}",
                    gw[ow + i]
                );
                let wz = f16::from_f32(hx[ox + i].to_f32() + 1.0);
                assert_eq!(gz[i].to_bits(), wz.to_bits(), "{what}: z[{i}]");
            }
            for i in 0..ow {
                assert_eq!(gw[i], pw[i], "{what}: w[{i}] outside the view");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn apply_collects_into_a_new_array_of_the_broadcast_shape() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    // SAFETY: the bodies read their inputs and assign their outputs by name.
    let k =
        unsafe { ElementwiseKernel::new("f64 x, i16 n, f64 y", "f64 r", "r = x * n - y") }.unwrap();
    let mut rng = StdRng::seed_from_u64(0xe9e0_0000);
    let hx = uniform(&mut rng, &[5, 1, 7], |v| v);
    let hy = uniform(&mut rng, &[6, 1], |v| v * 10.0);
    let dx = DeviceArray::from_host(&stream, &hx).unwrap();
    let dy = DeviceArray::from_host(&stream, &hy).unwrap();
    let xr = dx.slice(ndarray::s![..;-1, .., ..]);
    let r = k
        .apply::<f64>(
            &stream,
            &[(&xr).into(), Arg::scalar(3i16), (&dy.view()).into()],
        )
        .unwrap();
    assert_eq!(r.shape(), &[5, 6, 7]);
    let got = r.to_host().unwrap();
    let hxr = hx.slice(ndarray::s![..;-1, .., ..]);
    for ((i, j, l), g) in got.indexed_iter().map(|(ix, g)| ((ix[0], ix[1], ix[2]), g)) {
        let want = hxr[[i, 0, l]] * 3.0 - hy[[j, 0]];
        assert!(
            close(*g, want, 1e-12),
            "[{i}, {j}, {l}]: got {g}, expected {want}"
        );
    }
    // Scalars only: a 0-d array.
    let s = k
        .apply::<f64>(
            &stream,
            &[Arg::scalar(2.0f64), Arg::scalar(4i16), Arg::scalar(1.0f64)],
        )
        .unwrap();
    assert_eq!(
        (
            s.shape(),
            s.to_host().unwrap().iter().copied().collect::<Vec<_>>()
        ),
        (&[][..], vec![7.0])
    );
    // Refusals: the output type, shapes that do not broadcast together, two outputs.
    let e = k
        .apply::<f32>(
            &stream,
            &[(&xr).into(), Arg::scalar(3i16), (&dy.view()).into()],
        )
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::UnsupportedDtype);
    // (5, 1, 7) and (3,): the last axes differ and neither is 1.
    let bad = DeviceArray::<f64, _>::zeros(&stream, 3).unwrap();
    let e = k
        .apply::<f64>(
            &stream,
            &[(&xr).into(), Arg::scalar(3i16), (&bad.view()).into()],
        )
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch, "{e}");
    let two = unsafe { ElementwiseKernel::new("f64 x", "f64 a, f64 b", "a = x; b = x") }.unwrap();
    let e = two.apply::<f64>(&stream, &[(&xr).into()]).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
}

/// The bytes of a cache file up to the end of its stored source: the magic line, the options
/// line, the source's length line and that many bytes.
fn through_source(file: &str) -> usize {
    let mut at = 0;
    for _ in 0..2 {
        at += file[at..].find('\n').unwrap() + 1;
    }
    let len_end = at + file[at..].find('\n').unwrap();
    let len: usize = file[at..len_end].parse().unwrap();
    len_end + 1 + len
}

fn ptx_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cache_dir_keeps_compiled_variants_for_later_kernels() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let root = std::env::temp_dir().join(format!("devspan-ew-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (plus1, plus2) = (root.join("plus1"), root.join("plus2"));
    let mut rng = StdRng::seed_from_u64(0xcace_0000);
    let hx = uniform(&mut rng, &[300], |v| v as f32);
    let x = DeviceArray::from_host(&stream, &hx).unwrap();
    let run = |k: &ElementwiseKernel| -> Vec<f32> {
        let mut z = DeviceArray::<f32, _>::zeros(&stream, IxDyn(&[300])).unwrap();
        z.fill(f32::NAN).unwrap();
        k.launch(&[(&x.view()).into()], &mut [(&mut z).into()])
            .unwrap();
        z.to_host().unwrap().iter().copied().collect()
    };
    // SAFETY: the bodies read `x` and assign `z`.
    let make = |body: &str, dir: &std::path::Path| {
        unsafe { ElementwiseKernel::new("f32 x", "f32 z", body) }
            .unwrap()
            .with_cache_dir(dir)
    };
    let a = make("z = x + 1.0f", &plus1);
    assert_eq!(a.cache_dir(), Some(plus1.as_path()));
    let want1: Vec<f32> = hx.iter().map(|v| v + 1.0).collect();
    assert_eq!(run(&a), want1);
    let files = ptx_files(&plus1);
    assert_eq!(files.len(), 1, "one variant compiled, one file: {files:?}");
    // A second kernel object with the same body reads the file: proven by a file whose PTX
    // was swapped for the PTX of `z = x + 2.0f` (source and options still those of `+ 1`).
    let c = make("z = x + 2.0f", &plus2);
    assert_eq!(run(&c), hx.iter().map(|v| v + 2.0).collect::<Vec<_>>());
    let one = std::fs::read_to_string(&files[0]).unwrap();
    let two = std::fs::read_to_string(&ptx_files(&plus2)[0]).unwrap();
    let swapped = format!(
        "{}{}",
        &one[..through_source(&one)],
        &two[through_source(&two)..]
    );
    std::fs::write(&files[0], swapped).unwrap();
    let b = make("z = x + 1.0f", &plus1);
    assert_eq!(
        run(&b),
        hx.iter().map(|v| v + 2.0).collect::<Vec<_>>(),
        "the kernel compiled instead of reading its cache file"
    );
    // A damaged file is compiled again and rewritten.
    std::fs::write(&files[0], "devspan elementwise ptx 1\ngarbage").unwrap();
    assert_eq!(run(&make("z = x + 1.0f", &plus1)), want1);
    assert_eq!(ptx_files(&plus1), files);
    assert!(std::fs::read_to_string(&files[0]).unwrap().len() > 100);
    // A directory that cannot be made (its parent is a file) costs a compile, not an error.
    let blocked = root.join("file");
    std::fs::write(&blocked, "not a directory").unwrap();
    assert_eq!(run(&make("z = x + 1.0f", &blocked.join("sub"))), want1);
    std::fs::remove_dir_all(&root).unwrap();
}
