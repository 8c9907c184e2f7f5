//! GPU tests of fill, copy and cast against ndarray references on fresh random data, with the
//! destination poisoned first. Marked `#[ignore]`: run with `--include-ignored` on a GPU machine.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use devspan::internals::{FillSteer, fill_path, fill_steered};
use devspan::testing::{cast_reference, gpu_stream};
use devspan::{DeviceArray, DeviceElement, ErrorKind};
use half::{bf16, f16};
use ndarray::{Array, ArrayD, ArrayViewD, IxDyn, SliceInfoElem, s};
use rand::{SeedableRng, rngs::StdRng};

use crate::common::{assert_same, gpu_shared, permutations, random};

/// The slicings the tests apply to a source array of rank 3, as ndarray slice elements.
fn slicings() -> Vec<(&'static str, Vec<SliceInfoElem>)> {
    use SliceInfoElem::*;
    let full = Slice {
        start: 0,
        end: None,
        step: 1,
    };
    vec![
        ("full", vec![full, full, full]),
        (
            "inner offset 1",
            vec![
                full,
                full,
                Slice {
                    start: 1,
                    end: None,
                    step: 1,
                },
            ],
        ),
        (
            "inner offset 3, odd length",
            vec![
                full,
                full,
                Slice {
                    start: 3,
                    end: Some(-2),
                    step: 1,
                },
            ],
        ),
        (
            "inner step 2",
            vec![
                full,
                full,
                Slice {
                    start: 0,
                    end: None,
                    step: 2,
                },
            ],
        ),
        (
            "negative inner",
            vec![
                full,
                full,
                Slice {
                    start: 0,
                    end: None,
                    step: -1,
                },
            ],
        ),
        (
            "negative outer, step 3 middle",
            vec![
                Slice {
                    start: 0,
                    end: None,
                    step: -1,
                },
                Slice {
                    start: 1,
                    end: None,
                    step: 3,
                },
                full,
            ],
        ),
        ("index middle", vec![full, Index(2), full]),
        (
            "new axis",
            vec![
                full,
                NewAxis,
                full,
                Slice {
                    start: 2,
                    end: Some(9),
                    step: 1,
                },
            ],
        ),
    ]
}

fn sliced<'a, T>(a: ArrayViewD<'a, T>, elems: &[SliceInfoElem]) -> ArrayViewD<'a, T> {
    let info = ndarray::SliceInfo::<_, IxDyn, IxDyn>::try_from(elems.to_vec()).unwrap();
    a.slice_move(info)
}

/// Copies every slicing x permutation of a random source into a poisoned destination and
/// compares with ndarray, for `From` -> `To`.
fn copy_cast_cases<From: DeviceElement, To: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    shape: &[usize],
    paths: bool,
) {
    copy_cast_cases_with::<From, To>(stream, rng, shape, paths, false);
}

/// [`copy_cast_cases`]; with `transpose`, the transpose kernels take every case they apply to
/// (by default the permute kernels take most of them). Returns the number of cases that took
/// the transpose kernel.
fn copy_cast_cases_with<From: DeviceElement, To: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    shape: &[usize],
    paths: bool,
    transpose: bool,
) -> usize {
    let mut transposed = 0;
    let host = random::<From>(rng, shape);
    let dev = DeviceArray::from_host(stream, &host.view()).unwrap();
    for (name, sl) in slicings() {
        let hv = sliced(host.view(), &sl);
        let dv = dev
            .view()
            .try_slice(ndarray::SliceInfo::<_, IxDyn, IxDyn>::try_from(sl.clone()).unwrap())
            .unwrap();
        let perms = if paths {
            permutations(hv.ndim())
        } else {
            vec![(0..hv.ndim()).collect()]
        };
        for p in perms {
            let hp = hv.clone().permuted_axes(p.clone());
            let dp = dv.clone().permuted_axes(IxDyn(&p));
            let poison = random::<To>(rng, hp.shape());
            let mut out = DeviceArray::from_host(stream, &poison.view()).unwrap();
            if transpose {
                let path = devspan::internals::assign_cast_steered(
                    &mut out.view_mut(),
                    stream,
                    &dp,
                    devspan::internals::Steer::PreferTranspose,
                )
                .unwrap();
                transposed += usize::from(path == "transpose");
            } else {
                out.view_mut().assign_cast_on(stream, &dp).unwrap();
            }
            let got = out.to_host_on(stream).unwrap();
            let expect = hp.mapv(|x| cast_reference::<From, To>(x));
            assert_same(
                &got.view(),
                &expect.view(),
                &format!(
                    "{} -> {}, {name}, perm {p:?}, shape {:?}",
                    From::DTYPE,
                    To::DTYPE,
                    hp.shape()
                ),
            );
        }
    }
    transposed
}

macro_rules! for_each_type {
    ($mac:ident $(, $arg:tt)*) => {
        $mac!(u8 $(, $arg)*); $mac!(i8 $(, $arg)*); $mac!(u16 $(, $arg)*); $mac!(i16 $(, $arg)*);
        $mac!(u32 $(, $arg)*); $mac!(i32 $(, $arg)*); $mac!(u64 $(, $arg)*); $mac!(i64 $(, $arg)*);
        $mac!(f16 $(, $arg)*); $mac!(bf16 $(, $arg)*); $mac!(f32 $(, $arg)*); $mac!(f64 $(, $arg)*);
    };
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn copy_every_type_every_path() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(1);
    macro_rules! run {
        ($t:ty) => {
            // Large enough for the transpose tiles (>= 8 on both tile axes), odd sizes.
            copy_cast_cases::<$t, $t>(&stream, &mut rng, &[9, 37, 70], true);
            copy_cast_cases::<$t, $t>(&stream, &mut rng, &[3, 130, 41], false);
            // Transposes through the transpose kernels (axes of at least their tile, 128 for
            // 1-byte copies).
            let n = copy_cast_cases_with::<$t, $t>(&stream, &mut rng, &[2, 129, 130], true, true);
            assert!(n > 0, "no {} case took the transpose kernel", <$t>::DTYPE);
        };
    }
    for_each_type!(run);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cast_all_144_pairs() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(2);
    macro_rules! inner {
        ($to:ty, $from:ty) => {
            copy_cast_cases::<$from, $to>(&stream, &mut rng, &[5, 33, 67], false);
        };
    }
    macro_rules! outer {
        ($from:ty) => {
            for_each_type!(inner, $from);
        };
    }
    // for_each_type!(inner, $from) expands to inner!(T, $from) for every destination T.
    for_each_type!(outer);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cast_transposed_and_broadcast_sources() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(3);
    copy_cast_cases::<f32, f16>(&stream, &mut rng, &[6, 64, 48], true);
    copy_cast_cases::<u8, f32>(&stream, &mut rng, &[6, 64, 48], true);
    copy_cast_cases::<f64, bf16>(&stream, &mut rng, &[6, 40, 33], true);
    copy_cast_cases::<i32, i8>(&stream, &mut rng, &[6, 40, 33], true);
    // The transpose kernels with conversions.
    for n in [
        copy_cast_cases_with::<f32, f16>(&stream, &mut rng, &[6, 64, 48], true, true),
        copy_cast_cases_with::<u8, f32>(&stream, &mut rng, &[6, 64, 48], true, true),
        copy_cast_cases_with::<f64, bf16>(&stream, &mut rng, &[6, 40, 33], true, true),
        copy_cast_cases_with::<i32, i8>(&stream, &mut rng, &[6, 40, 33], true, true),
    ] {
        assert!(n > 0, "no cast took the transpose kernel");
    }
    // Broadcast: a row and a column into a matrix.
    let row = random::<f32>(&mut rng, &[1, 50]);
    let col = random::<i16>(&mut rng, &[40, 1]);
    let drow = DeviceArray::from_host(&stream, &row.view()).unwrap();
    let dcol = DeviceArray::from_host(&stream, &col.view()).unwrap();
    let mut out =
        DeviceArray::from_host(&stream, &random::<f64>(&mut rng, &[40, 50]).view()).unwrap();
    out.view_mut()
        .assign_cast_on(&stream, &drow.view())
        .unwrap();
    let expect = row.broadcast(IxDyn(&[40, 50])).unwrap().mapv(|x| x as f64);
    assert_same(
        &out.to_host_on(&stream).unwrap().view(),
        &expect.view(),
        "broadcast row",
    );
    out.view_mut()
        .assign_cast_on(&stream, &dcol.view())
        .unwrap();
    let expect = col.broadcast(IxDyn(&[40, 50])).unwrap().mapv(|x| x as f64);
    assert_same(
        &out.to_host_on(&stream).unwrap().view(),
        &expect.view(),
        "broadcast column",
    );
}

/// Values at the edges of every conversion: NaN, infinities, extremes, subnormals, ties,
/// negatives into unsigned types.
fn edge_values() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        0.49999999999999994,
        1.0,
        -1.0,
        127.0,
        127.5,
        128.0,
        -128.0,
        -128.5,
        -129.0,
        255.0,
        255.5,
        256.0,
        32767.0,
        32768.0,
        -32768.0,
        -32769.0,
        65504.0,
        65519.99,
        65520.0,
        65535.0,
        65536.0,
        2147483647.0,
        2147483648.0,
        -2147483648.0,
        -2147483649.0,
        4294967295.0,
        4294967296.0,
        9.223372036854775e18,
        -9.223372036854775e18,
        1.8446744073709552e19,
        3.4e38,
        3.5e38,
        1e300,
        -1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::MIN_POSITIVE,
        5e-324,
        1e-40,
        1.4e-45,
        6e-8,
        5.960464477539063e-8,
        2.98e-8,
        1.0000001,
        1.00048828125,
        1.001953125,
        16777217.0,
        9007199254740993.0,
        0.1,
        -3.7,
        1e-5,
    ];
    let more: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(more);
    v
}

fn edge_array<T: DeviceElement>(rng: &mut StdRng) -> ArrayD<T>
where
    f64: CastTo<T>,
{
    let mut vals: Vec<T> = edge_values().into_iter().map(|x| x.cast_to()).collect();
    // Integer extremes as themselves.
    vals.extend(random::<T>(rng, &[200]).iter().copied());
    let n = vals.len();
    Array::from_shape_vec(IxDyn(&[n]), vals).unwrap()
}

trait CastTo<T> {
    fn cast_to(self) -> T;
}
macro_rules! cast_to {
    ($($t:ty),*) => {$( impl CastTo<$t> for f64 { fn cast_to(self) -> $t { cast_reference::<f64, $t>(self) } } )*};
}
cast_to!(u8, i8, u16, i16, u32, i32, u64, i64, f16, bf16, f32, f64);

fn edge_pair<From: DeviceElement, To: DeviceElement>(stream: &Arc<CudaStream>, rng: &mut StdRng)
where
    f64: CastTo<From>,
{
    let mut host = edge_array::<From>(rng).into_raw_vec_and_offset().0;
    // Integer types also get their own extremes.
    let extremes: [u64; 6] = [0, 1, u64::MAX, u64::MAX >> 1, 1u64 << 63, (1u64 << 63) + 1];
    for e in extremes {
        let bytes = e.to_le_bytes();
        host.push(bytemuck::pod_read_unaligned(
            &bytes[..std::mem::size_of::<From>()],
        ));
    }
    let n = host.len();
    let host = Array::from_shape_vec(IxDyn(&[n]), host).unwrap();
    let dev = DeviceArray::from_host(stream, &host.view()).unwrap();
    let mut out = DeviceArray::from_host(stream, &random::<To>(rng, &[n]).view()).unwrap();
    out.view_mut().assign_cast_on(stream, &dev.view()).unwrap();
    let expect = host.mapv(|x| cast_reference::<From, To>(x));
    assert_same(
        &out.to_host_on(stream).unwrap().view(),
        &expect.view(),
        &format!("edges {} -> {}", From::DTYPE, To::DTYPE),
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cast_edge_values_all_pairs() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(4);
    macro_rules! inner {
        ($to:ty, $from:ty) => {
            edge_pair::<$from, $to>(&stream, &mut rng);
        };
    }
    macro_rules! outer {
        ($from:ty) => {
            for_each_type!(inner, $from);
        };
    }
    for_each_type!(outer);
}

/// Fills of every layout of the cases with elements `T`; adds the paths taken to `paths`.
fn fill_cases<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    paths: &mut std::collections::BTreeSet<String>,
) {
    for (shape, name) in [
        (vec![1000003], "odd 1-d"),
        (vec![7, 9, 130], "3-d"),
        (vec![3, 3, 8200], "3-d, rows of 8200"),
        (vec![0, 5], "empty"),
        (vec![1, 1, 1], "one"),
    ] {
        let host = random::<T>(rng, &shape);
        let value = random::<T>(rng, &[1])[[0]];
        let views: Vec<(&str, Vec<SliceInfoElem>)> = if name.starts_with("3-d") {
            slicings()
        } else {
            use SliceInfoElem::*;
            let r = shape.len();
            vec![
                (
                    "full",
                    vec![
                        Slice {
                            start: 0,
                            end: None,
                            step: 1
                        };
                        r
                    ],
                ),
                (
                    "offset 1",
                    [
                        vec![
                            Slice {
                                start: 0,
                                end: None,
                                step: 1
                            };
                            r - 1
                        ],
                        vec![Slice {
                            start: 1,
                            end: None,
                            step: 1,
                        }],
                    ]
                    .concat(),
                ),
                (
                    "offset 5, reversed",
                    [
                        vec![
                            Slice {
                                start: 0,
                                end: None,
                                step: 1
                            };
                            r - 1
                        ],
                        vec![Slice {
                            start: 5.min(shape[r - 1] as isize),
                            end: None,
                            step: -1,
                        }],
                    ]
                    .concat(),
                ),
                (
                    "step 3",
                    [
                        vec![
                            Slice {
                                start: 0,
                                end: None,
                                step: 1
                            };
                            r - 1
                        ],
                        vec![Slice {
                            start: 0,
                            end: None,
                            step: 3,
                        }],
                    ]
                    .concat(),
                ),
            ]
        };
        for (vname, sl) in views {
            let info = ndarray::SliceInfo::<_, IxDyn, IxDyn>::try_from(sl.clone()).unwrap();
            let mut dev = DeviceArray::from_host(stream, &host.view()).unwrap();
            let mut expect = host.clone();
            {
                let mut ev = expect.view_mut();
                let mut hv = ev.slice_mut(info);
                hv.fill(value);
            }
            let path = {
                let mut dv = dev.view_mut();
                let info = ndarray::SliceInfo::<_, IxDyn, IxDyn>::try_from(sl).unwrap();
                let mut dv = dv.slice_mut(info);
                let path = fill_path(&dv);
                dv.fill_on(stream, value).unwrap();
                path
            };
            paths.insert(path.clone());
            assert_same(
                &dev.to_host_on(stream).unwrap().view(),
                &expect.view(),
                &format!("fill {} {name} {vname} ({path})", T::DTYPE),
            );
        }
    }
}

/// The driver's 2-D memset steered onto many narrow rows (more rows than a grid's y extent
/// allows, rows read backwards), against ndarray's fill.
fn memset_2d_case<T: DeviceElement>(stream: &Arc<CudaStream>, rng: &mut StdRng) {
    let host = random::<T>(rng, &[100_003, 5]);
    let value = random::<T>(rng, &[1])[[0]];
    let mut dev = DeviceArray::from_host(stream, &host.view()).unwrap();
    let path = {
        let mut v = dev.view_mut();
        let mut v = v.slice_mut(s![..;-1, 1..4]);
        fill_steered(&mut v, stream, value, FillSteer::AnyMemset2D).unwrap()
    };
    assert_eq!(path, "memset2d", "{}", T::DTYPE);
    let mut expect = host.clone();
    expect.slice_mut(s![..;-1, 1..4]).fill(value);
    assert_same(
        &dev.to_host_on(stream).unwrap().view(),
        &expect.view(),
        &format!("2-D memset of 100003 rows of 3 {}", T::DTYPE),
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_2d_memset_fills_many_narrow_rows() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(17);
    memset_2d_case::<u8>(&stream, &mut rng);
    memset_2d_case::<f16>(&stream, &mut rng);
    memset_2d_case::<f32>(&stream, &mut rng);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fill_every_type_every_layout() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(5);
    let mut paths = std::collections::BTreeSet::new();
    macro_rules! run {
        ($t:ty) => {
            fill_cases::<$t>(&stream, &mut rng, &mut paths);
        };
    }
    for_each_type!(run);
    for p in [
        "memset",
        "memset2d",
        "fill_contig",
        "fill_rows",
        "fill_strided32",
    ] {
        assert!(paths.contains(p), "no fill took the {p} path: {paths:?}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn overlapping_operands_are_refused_or_correct() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut a = DeviceArray::<f32, _>::zeros(&stream, (64, 64)).unwrap();
    a.fill_on(&stream, 2.0).unwrap();
    let mut b = DeviceArray::<f32, _>::zeros(&stream, (64, 64)).unwrap();
    // A second, read-only view of `a` made from raw parts, to alias the writable one.
    let ptr = devspan::interop::cuda_slice_address(a.as_cuda_slice());
    // SAFETY: `a` outlives `whole`; the aliasing is what this test is about, and devspan must
    // refuse it (or do nothing, for identical elements).
    let bytes =
        unsafe { devspan::DeviceBytes::from_raw_parts_borrowed(ptr, 64 * 64 * 4, 0).unwrap() };
    let whole = bytes
        .typed::<f32>()
        .unwrap()
        .into_view()
        .into_shape_with_order((64, 64))
        .unwrap();
    let mut av = a.view_mut();
    let e = av
        .slice_mut(s![1.., ..])
        .assign_on(&stream, &whole.slice(s![..63, ..]))
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Aliasing, "{e}");
    // Identical elements: a no-op.
    av.assign_on(&stream, &whole).unwrap();
    // Disjoint arrays are fine.
    b.view_mut().assign_on(&stream, &whole).unwrap();
    assert!(b.to_host_on(&stream).unwrap().iter().all(|&x| x == 2.0));
    // Shape mismatch is an error, not a panic.
    let e = b
        .view_mut()
        .assign_on(&stream, &whole.slice(s![..3, ..5]))
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch, "{e}");
}

/// One tensor of more than 2^32 elements (4.5 GiB of u8): fills, a reversed copy, pixels of 3
/// channels reversed (also widened to u16 in the same pass) and with their channels reversed,
/// which need 64-bit indexing.
#[test]
#[ignore = "needs a CUDA GPU"]
fn more_than_2_pow_32_elements() {
    // The fill, copy, transpose and permute kernels it runs are checked under the sanitizers
    // by the other tests; 64-bit indexing needs the 4.5 GiB, too slow under the tools.
    if !crate::common::unless_sanitized("more_than_2_pow_32_elements") {
        return;
    }
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let n: usize = (1 << 32) + (1 << 29) + 77;
    let mut a = DeviceArray::<u8, _>::zeros(&stream, n).unwrap();
    a.fill_on(&stream, 3).unwrap();
    a.view_mut()
        .slice_mut(s![..;7])
        .fill_on(&stream, 9)
        .unwrap();
    a.view_mut()
        .slice_mut(s![n - 1000..;-3])
        .fill_on(&stream, 11)
        .unwrap();
    let rev = a.view().slice(s![..;-1]).to_contiguous_on(&stream).unwrap();
    let cube = a
        .view()
        .slice(s![..n - 77])
        .into_shape_with_order((1 << 11, 1 << 10, 9 << 8))
        .unwrap();
    let pv = cube.permuted_axes([2, 1, 0]).slice(s![..;-1, 3.., ..;2]);
    let t = pv.to_contiguous_on(&stream).unwrap();
    // The same permutation widened to u16 takes the element-wise permute kernel (with word
    // stores: a 2-byte destination whose fastest extent is even). Its tile origins lie up to
    // 4.7 * 2^30 elements from the source's first element, so the kernel splits them in
    // 64-bit arithmetic (`PermuteArgs::origin32` is 0).
    let mut wide = DeviceArray::<u16, _>::zeros(&stream, pv.dim()).unwrap();
    wide.view_mut().fill_on(&stream, 0xdead).unwrap();
    let path = devspan::internals::assign_cast_steered(
        &mut wide.view_mut(),
        &stream,
        &pv,
        devspan::internals::Steer::Default,
    )
    .unwrap();
    assert_eq!(path, "permute_words");
    // Pixels of 3 channels read right to left (runs of 3 in reverse order) and with their
    // channels reversed (runs each reversed): the reversed row kernels' other forms, at byte
    // offsets past 2^32.
    let m = n / 3;
    let px = a
        .view()
        .slice(s![..m * 3])
        .into_shape_with_order((m, 3))
        .unwrap();
    let mut forms = Vec::new();
    for (src, want) in [
        (px.slice(s![..;-1, ..]), "rows_rev3"),
        (px.slice(s![.., ..;-1]), "runs_rev"),
    ] {
        let mut out = DeviceArray::<u8, _>::zeros(&stream, (m, 3)).unwrap();
        let path = devspan::internals::assign_cast_steered(
            &mut out.view_mut(),
            &stream,
            &src,
            devspan::internals::Steer::Default,
        )
        .unwrap();
        assert_eq!(path, want);
        forms.push(out);
    }
    // The pixels read right to left, widened to u16 in the same pass: the gathered rows, one
    // row of more than 2^32 elements in periods of 3.
    let mut gathered = DeviceArray::<u16, _>::zeros(&stream, (m, 3)).unwrap();
    gathered.view_mut().fill_on(&stream, 0xdead).unwrap();
    let path = devspan::internals::assign_cast_steered(
        &mut gathered.view_mut(),
        &stream,
        &px.slice(s![..;-1, ..]),
        devspan::internals::Steer::Default,
    )
    .unwrap();
    assert_eq!(path, "rows_gather");
    let h = rev.to_host_on(&stream).unwrap();
    let expect = |i: usize| -> u8 {
        if i >= n - 1000 && (n - 1 - i) % 3 == 0 {
            11
        } else if i % 7 == 0 {
            9
        } else {
            3
        }
    };
    for (j, &x) in h
        .iter()
        .enumerate()
        .step_by(4099)
        .chain(h.iter().enumerate().rev().take(5000))
    {
        assert_eq!(x, expect(n - 1 - j), "reversed element {j}");
    }
    let (hf, hb, hg) = (
        forms[0].to_host_on(&stream).unwrap(),
        forms[1].to_host_on(&stream).unwrap(),
        gathered.to_host_on(&stream).unwrap(),
    );
    let samples = (0..m).step_by(1_000_003).chain(m - 3000..m).chain(0..3000);
    for i in samples {
        for c in 0..3 {
            let flipped = (m - 1 - i) * 3 + c;
            assert_eq!(hf[(i, c)], expect(flipped), "pixels reversed ({i}, {c})");
            assert_eq!(
                hg[(i, c)],
                u16::from(expect(flipped)),
                "pixels reversed, widened ({i}, {c})"
            );
            assert_eq!(
                hb[(i, c)],
                expect(3 * i + 2 - c),
                "channels reversed ({i}, {c})"
            );
        }
    }
    let ht = t.to_host_on(&stream).unwrap();
    let hw = wide.to_host_on(&stream).unwrap();
    let (d0, d1) = (9usize << 8, 1usize << 10);
    for (idx, &x) in ht.indexed_iter().step_by(999_983) {
        let (i, j, k) = idx;
        let (c2, c1, c0) = (d0 - 1 - i, 3 + j, 2 * k);
        let lin = c0 * d1 * d0 + c1 * d0 + c2;
        assert_eq!(x, expect(lin), "permuted element {idx:?}");
        assert_eq!(hw[idx], u16::from(expect(lin)), "widened element {idx:?}");
    }
    // The last tiles, whose origins are the farthest from element 0.
    let last = hw.shape().to_vec();
    for i in (last[0] - 70..last[0]).step_by(7) {
        for j in [0, last[1] - 1] {
            for k in (last[2] - 200..last[2]).step_by(13) {
                let (c2, c1, c0) = (d0 - 1 - i, 3 + j, 2 * k);
                let lin = c0 * d1 * d0 + c1 * d0 + c2;
                assert_eq!(
                    hw[(i, j, k)],
                    u16::from(expect(lin)),
                    "widened ({i}, {j}, {k})"
                );
            }
        }
    }
}

/// Widening casts of many elements (tens of thousands of blocks); source and destination both
/// start one element into their allocations, so that the kernel's unaligned head runs too. The
/// destination's first element must survive.
fn widening_large<From: DeviceElement, To: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    n: usize,
) {
    let from_one =
        || ndarray::SliceInfo::<_, IxDyn, IxDyn>::try_from(vec![SliceInfoElem::from(1..)]).unwrap();
    let host = random::<From>(rng, &[n + 1]);
    let dev = DeviceArray::from_host(stream, &host.view()).unwrap();
    let poison = random::<To>(rng, &[n + 1]);
    let mut out = DeviceArray::from_host(stream, &poison.view()).unwrap();
    {
        let src = dev.view().try_slice(from_one()).unwrap();
        let mut dst = out.view_mut();
        let mut dst = dst.try_slice_mut(from_one()).unwrap();
        dst.assign_cast_on(stream, &src).unwrap();
    }
    let got = out.to_host_on(stream).unwrap();
    let mut expect = poison.clone();
    expect
        .slice_mut(s![1..])
        .assign(&host.slice(s![1..]).mapv(|x| cast_reference::<From, To>(x)));
    assert_same(
        &got.view(),
        &expect.view(),
        &format!(
            "{} -> {}, {n} elements from offset 1",
            From::DTYPE,
            To::DTYPE
        ),
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn widening_casts_of_many_elements_from_an_unaligned_start() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(11);
    let n = crate::common::scaled(1 << 25, 1 << 21) + 12345;
    widening_large::<u8, f64>(&stream, &mut rng, n);
    widening_large::<i8, f32>(&stream, &mut rng, n);
    widening_large::<u8, f16>(&stream, &mut rng, n);
    widening_large::<i8, i64>(&stream, &mut rng, n);
    widening_large::<u16, u64>(&stream, &mut rng, n);
    widening_large::<f16, f64>(&stream, &mut rng, n);
    widening_large::<bf16, f32>(&stream, &mut rng, n);
    widening_large::<f32, f64>(&stream, &mut rng, n);
    widening_large::<i32, i64>(&stream, &mut rng, n);
}
