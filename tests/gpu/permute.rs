//! GPU tests of permuted copies (the permute and transpose paths): every permutation of ranks
//! 2-6 on awkward shapes, every element size, fused casts, strided / sliced / negative-stride
//! operands on either side, against ndarray on fresh random data with the destination
//! poisoned first. Marked `#[ignore]`: run with `--include-ignored` on a GPU machine.

use std::collections::BTreeMap;
use std::sync::Arc;

use cudarc::driver::CudaStream;
use devspan::internals::{GridOptions, Steer, Tuning};
use devspan::testing::{cast_reference, gpu_stream};
use devspan::{DeviceArray, DeviceElement};
use half::{bf16, f16};
use ndarray::{IxDyn, SliceInfoElem};
use rand::{SeedableRng, rngs::StdRng};

use crate::common::{assert_same, gpu_shared, permutations, random};

fn slice_info(elems: &[SliceInfoElem]) -> ndarray::SliceInfo<Vec<SliceInfoElem>, IxDyn, IxDyn> {
    ndarray::SliceInfo::<_, IxDyn, IxDyn>::try_from(elems.to_vec()).unwrap()
}

fn step(start: isize, end: Option<isize>, step: isize) -> SliceInfoElem {
    SliceInfoElem::Slice { start, end, step }
}

/// Counts of the paths taken, printed at the end of each test.
type Paths = BTreeMap<String, usize>;

/// Copies (and converts) `src.permuted_axes(p)` of a random source of `shape`, sliced by
/// `src_slice`, into a contiguous poisoned destination for every permutation `p` in `perms`,
/// and compares with ndarray.
fn permuted_cases<From: DeviceElement, To: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    shape: &[usize],
    src_slice: &[SliceInfoElem],
    perms: &[Vec<usize>],
    paths: &mut Paths,
) {
    // The tiled kernels only where nothing else applies: these cases exercise the permute,
    // transpose, row and strided kernels (tests/gpu/any_layout.rs covers the planner's own
    // choice, the tiled kernels included).
    let older = Tuning::from(Steer::NoTiled);
    permuted_cases_tuned::<From, To>(stream, rng, shape, src_slice, perms, paths, older);
}

/// [`permuted_cases`] with the copies run as `tuning` says (`assign_cast` for the default).
fn permuted_cases_tuned<From: DeviceElement, To: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    shape: &[usize],
    src_slice: &[SliceInfoElem],
    perms: &[Vec<usize>],
    paths: &mut Paths,
    tuning: Tuning,
) {
    let host = random::<From>(rng, shape);
    let dev = DeviceArray::from_host(stream, &host.view()).unwrap();
    let hv = host.view().slice_move(slice_info(src_slice));
    let dv = dev.view().try_slice(slice_info(src_slice)).unwrap();
    for p in perms {
        let hp = hv.clone().permuted_axes(p.clone());
        let dp = dv.clone().permuted_axes(IxDyn(p));
        let poison = random::<To>(rng, hp.shape());
        let mut out = DeviceArray::from_host(stream, &poison.view()).unwrap();
        {
            let mut ov = out.view_mut();
            let path = if tuning == Tuning::default() {
                let path = devspan::internals::copy_path(&mut ov, &dp);
                ov.assign_cast_on(stream, &dp).unwrap();
                path
            } else {
                devspan::internals::assign_cast_steered(&mut ov, stream, &dp, tuning).unwrap()
            };
            *paths.entry(path).or_default() += 1;
        }
        let got = out.to_host_on(stream).unwrap();
        let expect = hp
            .mapv(|x| cast_reference::<From, To>(x))
            .as_standard_layout()
            .into_owned();
        assert_same(
            &got.view(),
            &expect.view(),
            &format!(
                "{} -> {}, source {shape:?} sliced {src_slice:?}, perm {p:?}",
                From::DTYPE,
                To::DTYPE,
            ),
        );
    }
}

fn full(rank: usize) -> Vec<SliceInfoElem> {
    vec![step(0, None, 1); rank]
}

/// Awkward shapes of ranks 2-6: primes, 1s, lengths just over a tile (32, 64).
fn awkward_shapes() -> Vec<Vec<usize>> {
    vec![
        vec![67, 129],
        vec![33, 65],
        vec![1, 97],
        vec![5, 33, 65],
        vec![17, 1, 70],
        vec![64, 3, 31],
        vec![3, 17, 33, 9],
        vec![2, 65, 1, 13],
        vec![2, 7, 17, 33, 3],
        vec![5, 1, 8, 9, 16],
        vec![2, 3, 5, 7, 11, 13],
        vec![1, 9, 2, 65, 3, 5],
    ]
}

/// Asserts that some case took the element-wise permute kernels (64 x 64 tiles: `permute`,
/// 32 x 32 tiles: `permute32`).
#[track_caller]
fn check_permute_taken(paths: &Paths, what: &str) {
    println!("{what}: paths {paths:?}");
    let n = |k: &str| paths.get(k).copied().unwrap_or(0);
    assert!(
        n("permute") + n("permute32") > 0,
        "{what}: no case took the permute path: {paths:?}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_permutation_of_ranks_2_to_6_every_element_size() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(41);
    let mut paths = Paths::new();
    for shape in awkward_shapes() {
        let perms = permutations(shape.len());
        let sl = full(shape.len());
        permuted_cases::<u8, u8>(&stream, &mut rng, &shape, &sl, &perms, &mut paths);
        permuted_cases::<f16, f16>(&stream, &mut rng, &shape, &sl, &perms, &mut paths);
        permuted_cases::<f32, f32>(&stream, &mut rng, &shape, &sl, &perms, &mut paths);
        permuted_cases::<f64, f64>(&stream, &mut rng, &shape, &sl, &perms, &mut paths);
    }
    check_permute_taken(&paths, "every permutation");
    for kernel in ["permute", "permute32", "permute_packed"] {
        assert!(
            paths.get(kernel).copied().unwrap_or(0) > 0,
            "no case took {kernel}: {paths:?}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn permutations_fused_with_all_144_casts() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(42);
    let mut paths = Paths::new();
    let perms = vec![vec![2, 0, 1], vec![1, 2, 0], vec![2, 1, 0]];
    let sl = full(3);
    macro_rules! inner {
        ($to:ty, $from:ty) => {
            permuted_cases::<$from, $to>(&stream, &mut rng, &[9, 70, 33], &sl, &perms, &mut paths);
        };
    }
    macro_rules! outer {
        ($from:ty) => {
            inner!(u8, $from);
            inner!(i8, $from);
            inner!(u16, $from);
            inner!(i16, $from);
            inner!(u32, $from);
            inner!(i32, $from);
            inner!(u64, $from);
            inner!(i64, $from);
            inner!(f16, $from);
            inner!(bf16, $from);
            inner!(f32, $from);
            inner!(f64, $from);
        };
    }
    outer!(u8);
    outer!(i8);
    outer!(u16);
    outer!(i16);
    outer!(u32);
    outer!(i32);
    outer!(u64);
    outer!(i64);
    outer!(f16);
    outer!(bf16);
    outer!(f32);
    outer!(f64);
    // Every permutation of rank 5 for the bench's fused cast.
    permuted_cases::<f32, f16>(
        &stream,
        &mut rng,
        &[3, 17, 2, 33, 9],
        &full(5),
        &permutations(5),
        &mut paths,
    );
    check_permute_taken(&paths, "casts");
}

/// Sliced sources: offsets, steps of 2 and 3, negative steps, on the fast axes too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn sliced_and_negative_stride_sources() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(43);
    let mut paths = Paths::new();
    let slicings: Vec<Vec<SliceInfoElem>> = vec![
        vec![step(1, None, 1), step(0, Some(-3), 1), step(2, None, 1)],
        vec![step(0, None, 1), step(0, None, 2), step(0, None, -1)],
        vec![step(0, None, -1), step(1, None, 3), step(0, None, 1)],
        vec![step(0, None, 2), step(0, None, -1), step(0, None, -2)],
    ];
    for sl in &slicings {
        let perms = permutations(3);
        permuted_cases::<f32, f32>(&stream, &mut rng, &[20, 70, 67], sl, &perms, &mut paths);
        permuted_cases::<u8, u8>(&stream, &mut rng, &[20, 70, 67], sl, &perms, &mut paths);
        permuted_cases::<u16, f32>(&stream, &mut rng, &[20, 70, 67], sl, &perms, &mut paths);
        permuted_cases::<f64, bf16>(&stream, &mut rng, &[20, 70, 67], sl, &perms, &mut paths);
    }
    let sl5 = vec![
        step(0, None, 1),
        step(1, None, 1),
        step(0, None, -1),
        step(0, None, 2),
        step(3, None, 1),
    ];
    permuted_cases::<f16, f16>(
        &stream,
        &mut rng,
        &[3, 9, 5, 40, 36],
        &sl5,
        &permutations(5),
        &mut paths,
    );
    check_permute_taken(&paths, "sliced sources");
}

/// Destinations that are themselves sliced (negative strides, steps, offsets) inside a larger
/// poisoned array: the elements outside the slice must keep their poison.
#[test]
#[ignore = "needs a CUDA GPU"]
fn sliced_and_negative_stride_destinations() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(44);
    let mut paths = Paths::new();
    fn one<From: DeviceElement, To: DeviceElement>(
        stream: &Arc<CudaStream>,
        rng: &mut StdRng,
        paths: &mut Paths,
        dst_slice: &[SliceInfoElem],
        perm: &[usize],
    ) {
        let src_shape = [33usize, 40, 70];
        let host = random::<From>(rng, &src_shape);
        let dev = DeviceArray::from_host(stream, &host.view()).unwrap();
        let hp = host.view().permuted_axes(perm.to_vec());
        let dp = dev.view().permuted_axes(IxDyn(perm));
        // A destination base large enough for every slicing below.
        let base_shape: Vec<usize> = hp.shape().iter().map(|&n| 2 * n + 3).collect();
        let poison = random::<To>(rng, &base_shape);
        let mut out = DeviceArray::from_host(stream, &poison.view()).unwrap();
        let mut expect = poison.clone();
        {
            let mut ov = out.view_mut().slice_move(slice_info(dst_slice));
            assert_eq!(ov.shape(), hp.shape(), "test slicing");
            *paths
                .entry(devspan::internals::copy_path(&mut ov, &dp))
                .or_default() += 1;
            ov.assign_cast_on(stream, &dp).unwrap();
        }
        expect
            .slice_mut(slice_info(dst_slice))
            .assign(&hp.mapv(|x| cast_reference::<From, To>(x)));
        let got = out.to_host_on(stream).unwrap();
        assert_same(
            &got.view(),
            &expect.view(),
            &format!(
                "{} -> {}, perm {perm:?}, destination {dst_slice:?}",
                From::DTYPE,
                To::DTYPE
            ),
        );
    }
    for perm in permutations(3) {
        let n: Vec<isize> = perm.iter().map(|&a| [33isize, 40, 70][a]).collect();
        let slicings = [
            // Every other element of the fastest axis, reversed middle axis.
            vec![
                step(1, Some(1 + n[0]), 1),
                step(0, Some(n[1]), -1),
                step(0, Some(2 * n[2]), 2),
            ],
            // Reversed fastest axis, offsets.
            vec![
                step(2, Some(2 + n[0]), 1),
                step(3, Some(3 + n[1]), 1),
                step(1, Some(1 + n[2]), -1),
            ],
            // Steps of 2 everywhere, negative outer.
            vec![
                step(0, Some(2 * n[0]), -2),
                step(1, Some(1 + 2 * n[1]), 2),
                step(0, Some(2 * n[2]), 2),
            ],
        ];
        for sl in &slicings {
            one::<f32, f32>(&stream, &mut rng, &mut paths, sl, &perm);
            one::<u8, u8>(&stream, &mut rng, &mut paths, sl, &perm);
            one::<i32, f16>(&stream, &mut rng, &mut paths, sl, &perm);
            one::<bf16, f64>(&stream, &mut rng, &mut paths, sl, &perm);
        }
    }
    check_permute_taken(&paths, "sliced destinations");
}

/// Shapes like the bench's (long axes next to short ones) at a reduced size, element sizes
/// 1, 2, 4, and the fused cast.
#[test]
#[ignore = "needs a CUDA GPU"]
fn bench_like_shapes() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(45);
    let mut paths = Paths::new();
    for shape in [
        vec![64usize, 48, 40],
        vec![16, 16, 8, 8, 8],
        vec![8, 8, 4, 4, 4, 8],
    ] {
        let sl = full(shape.len());
        let perms = permutations(shape.len());
        let perms: Vec<Vec<usize>> = perms.into_iter().step_by(7).collect();
        permuted_cases::<f32, f32>(&stream, &mut rng, &shape, &sl, &perms, &mut paths);
        permuted_cases::<f16, f16>(&stream, &mut rng, &shape, &sl, &perms, &mut paths);
        permuted_cases::<u8, u8>(&stream, &mut rng, &shape, &sl, &perms, &mut paths);
        permuted_cases::<f32, f16>(&stream, &mut rng, &shape, &sl, &perms, &mut paths);
    }
    check_permute_taken(&paths, "bench-like shapes");
    // 2-byte destinations in 4-byte word stores: whole and partial tiles, cast and copy
    // (unpacked 2-byte copies come here when their source words do not line up).
    let mut words = Paths::new();
    for shape in [vec![130usize, 3, 70], vec![66, 5, 129], vec![2, 66, 3, 130]] {
        let sl = full(shape.len());
        let perms = permutations(shape.len());
        permuted_cases::<f32, f16>(&stream, &mut rng, &shape, &sl, &perms, &mut words);
        permuted_cases::<u8, bf16>(&stream, &mut rng, &shape, &sl, &perms, &mut words);
        permuted_cases::<f64, i16>(&stream, &mut rng, &shape, &sl, &perms, &mut words);
    }
    println!("word stores: paths {words:?}");
    assert!(
        words.get("permute_words").copied().unwrap_or(0) > 0,
        "no case stored words: {words:?}"
    );
}

/// 1- and 2-byte copies whose fastest axes hold whole 4-byte words (the packed kernels, 64-
/// and 128-slot tiles):
/// whole and partial tiles, sources offset by one element (words misaligned: the element-wise
/// kernel) or by a whole word, reversed axes; and two-axis permutations with one short axis
/// (the long one is split so that tiles are full).
#[test]
#[ignore = "needs a CUDA GPU"]
fn packed_and_split_permutations() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(47);
    let mut paths = Paths::new();
    for shape in [
        vec![16usize, 1024],
        vec![1024, 16],
        vec![12, 512],
        vec![68, 132],
        vec![64, 8, 68],
        vec![4, 68, 8, 2],
        vec![16, 4, 16, 8],
        vec![8, 4, 8, 4, 8],
    ] {
        let r = shape.len();
        let perms = permutations(r);
        let perms: Vec<Vec<usize>> = if r > 3 {
            perms.into_iter().step_by(5).collect()
        } else {
            perms
        };
        let mut slices = vec![full(r)];
        // Offset by one element on the last axis, then by four elements (one word) on the
        // first; reversed on the last axis.
        let mut one = full(r);
        one[r - 1] = step(1, Some(shape[r - 1] as isize - 3), 1);
        slices.push(one);
        let mut word = full(r);
        word[0] = step(4, None, 1);
        slices.push(word);
        let mut rev = full(r);
        rev[r - 1] = step(0, None, -1);
        slices.push(rev);
        for sl in &slices {
            permuted_cases::<u8, u8>(&stream, &mut rng, &shape, sl, &perms, &mut paths);
            permuted_cases::<f16, f16>(&stream, &mut rng, &shape, sl, &perms, &mut paths);
            permuted_cases::<u16, u16>(&stream, &mut rng, &shape, sl, &perms, &mut paths);
            permuted_cases::<f32, f32>(&stream, &mut rng, &shape, sl, &perms, &mut paths);
        }
    }
    // 128-slot packed tiles: 1-byte copies whose fastest axes (32 elements) are too short for
    // the transpose kernel; whole and partial tiles, a source that starts one row in.
    for shape in [vec![4usize, 32, 8, 36], vec![36, 5, 32, 8]] {
        let mut word = full(4);
        word[0] = step(1, None, 1);
        for sl in [full(4), word] {
            permuted_cases::<u8, u8>(&stream, &mut rng, &shape, &sl, &permutations(4), &mut paths);
        }
    }
    println!("packed and split: paths {paths:?}");
    assert!(
        paths.get("permute_packed").copied().unwrap_or(0) >= 50,
        "too few cases took the packed kernel: {paths:?}"
    );
    assert!(
        // Every fifth permutation of rank 4 under a sanitizer: 5 of the 128-slot cases.
        paths.get("permute_packed128").copied().unwrap_or(0) >= crate::common::scaled(8, 4),
        "too few cases took the 128-slot packed kernel: {paths:?}"
    );
    check_permute_taken(&paths, "packed and split");
}

/// 1-byte copies whose fastest axes hold whole 16-byte vectors (the vector kernel, 128 x 128
/// tiles): whole and partial tiles on both sides, short fastest axes merged with their
/// neighbours, sources offset by 16 bytes (aligned) or by 4 (not: the word-packed kernels), a
/// reversed outer axis, a broadcast source axis, and a strided destination.
#[test]
#[ignore = "needs a CUDA GPU"]
fn vector_kernel_permutations() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(48);
    let mut paths = Paths::new();
    for shape in [
        vec![256usize, 384],
        vec![48, 272, 144],
        vec![16, 40, 16, 48],
        vec![3, 32, 16, 5, 32],
    ] {
        let r = shape.len();
        let perms = permutations(r);
        let perms: Vec<Vec<usize>> = if r > 3 {
            perms.into_iter().step_by(3).collect()
        } else {
            perms
        };
        let mut slices = vec![full(r)];
        let mut vec16 = full(r);
        vec16[r - 1] = step(16, None, 1);
        slices.push(vec16);
        let mut word = full(r);
        word[r - 1] = step(4, Some(shape[r - 1] as isize - 12), 1);
        slices.push(word);
        let mut rev = full(r);
        rev[0] = step(0, None, -1);
        slices.push(rev);
        for sl in &slices {
            permuted_cases::<u8, u8>(&stream, &mut rng, &shape, sl, &perms, &mut paths);
            let last = &perms[perms.len() - 1..];
            permuted_cases::<i8, i8>(&stream, &mut rng, &shape, sl, last, &mut paths);
        }
    }
    // A source broadcast along a middle axis (stride 0) into a permuted destination.
    let host = random::<u8>(&mut rng, &[64, 1, 128]);
    let dev = DeviceArray::from_host(&stream, &host.view()).unwrap();
    let hb = host.broadcast(IxDyn(&[64, 20, 128])).unwrap();
    let db = dev.view().broadcast(IxDyn(&[64, 20, 128])).unwrap();
    for p in [vec![2usize, 1, 0], vec![1, 2, 0]] {
        let hp = hb.clone().permuted_axes(p.clone());
        let dp = db.clone().permuted_axes(IxDyn(&p));
        let poison = random::<u8>(&mut rng, hp.shape());
        let mut out = DeviceArray::from_host(&stream, &poison.view()).unwrap();
        {
            let mut ov = out.view_mut();
            let path = devspan::internals::copy_path(&mut ov, &dp);
            assert_eq!(path, "permute_vec", "broadcast, perm {p:?}");
            *paths.entry(path).or_default() += 1;
            ov.assign_cast_on(&stream, &dp).unwrap();
        }
        let expect = hp.as_standard_layout().into_owned();
        let got = out.to_host_on(&stream).unwrap();
        assert_same(
            &got.view(),
            &expect.view(),
            &format!("broadcast, perm {p:?}"),
        );
    }
    // A strided destination: a window of 160 columns, 16 bytes into rows of 320.
    let host = random::<u8>(&mut rng, &[160, 128]);
    let dev = DeviceArray::from_host(&stream, &host.view()).unwrap();
    let poison = random::<u8>(&mut rng, &[128, 320]);
    let mut out = DeviceArray::from_host(&stream, &poison.view()).unwrap();
    let mut expect = poison.clone();
    expect.slice_mut(ndarray::s![.., 16..176]).assign(&host.t());
    {
        let mut ov = out.view_mut();
        let mut ov = ov
            .try_slice_mut(ndarray::s![.., 16..176])
            .unwrap()
            .into_dyn();
        let dt = dev.view().reversed_axes();
        let path = devspan::internals::copy_path(&mut ov, &dt);
        assert_eq!(path, "permute_vec", "strided destination");
        *paths.entry(path).or_default() += 1;
        ov.assign_cast_on(&stream, &dt).unwrap();
    }
    let got = out.to_host_on(&stream).unwrap();
    assert_same(&got.view(), &expect.view(), "strided destination");
    println!("vector kernel: paths {paths:?}");
    assert!(
        paths.get("permute_vec").copied().unwrap_or(0) >= 20,
        "too few cases took the vector kernel: {paths:?}"
    );
    assert!(
        paths.get("permute_packed").copied().unwrap_or(0)
            + paths.get("permute_packed128").copied().unwrap_or(0)
            > 0,
        "no misaligned case took a word-packed kernel: {paths:?}"
    );
}

/// Every permutation of the outer axes of `rank` axes, the last axis staying last.
fn outer_permutations(rank: usize) -> Vec<Vec<usize>> {
    permutations(rank - 1)
        .into_iter()
        .map(|mut p| {
            p.push(rank - 1);
            p
        })
        .collect()
}

/// Runs of 16, 32 and 64 bytes, contiguous on both sides, whose outer axes are permuted: the
/// wide kernels, with partial tiles, reversed and offset outer axes. Runs sliced one element
/// in take the row kernels: shortened to other lengths, or of 16 bytes but misaligned.
#[test]
#[ignore = "needs a CUDA GPU"]
fn wide_runs() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(48);
    let mut paths = Paths::new();
    let slices = |r: usize| {
        let mut rev = full(r);
        rev[0] = step(0, None, -1);
        let mut off = full(r);
        off[0] = step(1, None, 1);
        off[1] = step(0, None, -2);
        let mut run = full(r);
        run[r - 1] = step(1, None, 1);
        [full(r), rev, off, run]
    };
    for shape in [vec![37usize, 70, 16], vec![37, 70, 32], vec![9, 40, 17, 64]] {
        let r = shape.len();
        for sl in slices(r) {
            let perms = outer_permutations(r);
            permuted_cases::<u8, u8>(&stream, &mut rng, &shape, &sl, &perms, &mut paths);
        }
    }
    for shape in [vec![70usize, 37, 8], vec![5, 33, 40, 16]] {
        let r = shape.len();
        for sl in slices(r) {
            let perms = outer_permutations(r);
            permuted_cases::<f16, f16>(&stream, &mut rng, &shape, &sl, &perms, &mut paths);
        }
    }
    for sl in slices(3) {
        let perms = outer_permutations(3);
        permuted_cases::<f32, f32>(&stream, &mut rng, &[33, 65, 4], &sl, &perms, &mut paths);
        permuted_cases::<f64, f64>(&stream, &mut rng, &[66, 35, 4], &sl, &perms, &mut paths);
        permuted_cases::<u16, u16>(&stream, &mut rng, &[40, 9, 32], &sl, &perms, &mut paths);
    }
    // 16-byte runs that start one element past a 16-byte boundary.
    let mut misaligned = full(3);
    misaligned[2] = step(1, Some(17), 1);
    let perms = outer_permutations(3);
    permuted_cases::<u8, u8>(
        &stream,
        &mut rng,
        &[37, 70, 32],
        &misaligned,
        &perms,
        &mut paths,
    );
    misaligned[2] = step(1, Some(9), 1);
    permuted_cases::<f16, f16>(
        &stream,
        &mut rng,
        &[37, 70, 16],
        &misaligned,
        &perms,
        &mut paths,
    );
    println!("wide runs: paths {paths:?}");
    // At least two shapes per kernel, three aligned slices each (tiles filled at least half).
    for (kind, least) in [("permute_w16", 6), ("permute_w32", 6), ("permute_w64", 6)] {
        let n = paths.get(kind).copied().unwrap_or(0);
        assert!(n >= least, "{n} cases took {kind}: {paths:?}");
    }
    assert!(
        paths.contains_key("rows"),
        "no misaligned run took the rows: {paths:?}"
    );
}

/// Grids of a few blocks, so that every block loops over many tiles: whole tiles computing
/// the next tile's origin while their loads are in flight, whole tiles followed by partial
/// ones and back, for every kernel family (element-wise, word stores, packed in 64- and
/// 128-slot tiles, wide). Three blocks: each block's tiles are not neighbours.
#[test]
#[ignore = "needs a CUDA GPU"]
fn few_blocks_loop_over_whole_and_partial_tiles() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(49);
    let mut paths = Paths::new();
    let few = Tuning::from(GridOptions {
        max_grid: Some(3),
        ..GridOptions::default()
    });
    for shape in [vec![130usize, 3, 70], vec![2, 66, 3, 130]] {
        let sl = full(shape.len());
        let perms = permutations(shape.len());
        permuted_cases_tuned::<f32, f32>(&stream, &mut rng, &shape, &sl, &perms, &mut paths, few);
        permuted_cases_tuned::<f32, f16>(&stream, &mut rng, &shape, &sl, &perms, &mut paths, few);
        permuted_cases_tuned::<f64, i16>(&stream, &mut rng, &shape, &sl, &perms, &mut paths, few);
    }
    for shape in [vec![68usize, 132], vec![64, 8, 68], vec![16, 4, 16, 8]] {
        let sl = full(shape.len());
        let perms = permutations(shape.len());
        permuted_cases_tuned::<u8, u8>(&stream, &mut rng, &shape, &sl, &perms, &mut paths, few);
        permuted_cases_tuned::<f16, f16>(&stream, &mut rng, &shape, &sl, &perms, &mut paths, few);
    }
    // 128-slot packed tiles, whole and partial ones in every block.
    for shape in [
        vec![4usize, 32, 8, 36],
        vec![36, 5, 32, 8],
        vec![8, 264, 260],
    ] {
        let (sl, perms) = (full(shape.len()), permutations(shape.len()));
        permuted_cases_tuned::<u8, u8>(&stream, &mut rng, &shape, &sl, &perms, &mut paths, few);
    }
    // The vector kernel, whole and partial tiles in every block.
    for shape in [vec![48usize, 272, 144], vec![16, 40, 16, 48]] {
        let (sl, perms) = (full(shape.len()), permutations(shape.len()));
        permuted_cases_tuned::<u8, u8>(&stream, &mut rng, &shape, &sl, &perms, &mut paths, few);
    }
    // Wide kernels: 16-, 32- and 64-byte runs, whole and partial tiles in every block.
    for shape in [
        vec![100usize, 70, 16],
        vec![100, 70, 32],
        vec![37, 70, 16],
        vec![37, 70, 32],
        vec![9, 40, 17, 64],
    ] {
        let perms = outer_permutations(shape.len());
        let sl = full(shape.len());
        permuted_cases_tuned::<u8, u8>(&stream, &mut rng, &shape, &sl, &perms, &mut paths, few);
    }
    println!("few blocks: paths {paths:?}");
    for kind in [
        "permute",
        "permute_words",
        "permute_packed",
        "permute_packed128",
        "permute_vec",
        "permute_w16",
        "permute_w32",
        "permute_w64",
    ] {
        assert!(paths.contains_key(kind), "no case took {kind}: {paths:?}");
    }
}

/// A small subset for compute-sanitizer (memcheck): partial tiles on every side, merged
/// axes, negative strides, a cast.
#[test]
#[ignore = "needs a CUDA GPU"]
fn sanitize_subset() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(46);
    let mut paths = Paths::new();
    let sl = vec![step(0, None, -1), step(1, None, 1), step(0, None, 2)];
    let perms = permutations(3);
    permuted_cases::<f32, f32>(&stream, &mut rng, &[9, 70, 67], &sl, &perms, &mut paths);
    permuted_cases::<u8, u8>(
        &stream,
        &mut rng,
        &[9, 70, 67],
        &full(3),
        &perms,
        &mut paths,
    );
    permuted_cases::<f64, f16>(
        &stream,
        &mut rng,
        &[9, 70, 67],
        &full(3),
        &perms,
        &mut paths,
    );
    permuted_cases::<u16, u16>(
        &stream,
        &mut rng,
        &[2, 3, 5, 7, 11, 13],
        &full(6),
        &[vec![5, 4, 3, 2, 1, 0], vec![1, 3, 5, 0, 2, 4]],
        &mut paths,
    );
    // The packed kernel, with partial tiles on both sides, and a split two-axis case.
    permuted_cases::<u8, u8>(
        &stream,
        &mut rng,
        &[68, 12, 132],
        &full(3),
        &perms,
        &mut paths,
    );
    permuted_cases::<f16, f16>(
        &stream,
        &mut rng,
        &[68, 12, 132],
        &full(3),
        &perms,
        &mut paths,
    );
    permuted_cases::<u8, u8>(
        &stream,
        &mut rng,
        &[16, 1024],
        &full(2),
        &[vec![1, 0]],
        &mut paths,
    );
    // The 128-slot packed kernel, partial tiles on both sides.
    permuted_cases::<u8, u8>(
        &stream,
        &mut rng,
        &[36, 5, 32, 8],
        &full(4),
        &[vec![2, 1, 3, 0], vec![3, 2, 0, 1]],
        &mut paths,
    );
    assert!(
        paths.get("permute_packed128").copied().unwrap_or(0) > 0,
        "no case took the 128-slot packed kernel: {paths:?}"
    );
    // The vector kernel, partial tiles on both sides, a reversed outer axis.
    permuted_cases::<u8, u8>(
        &stream,
        &mut rng,
        &[48, 20, 144],
        &[step(0, None, -1), step(0, None, 1), step(0, None, 1)],
        &perms,
        &mut paths,
    );
    assert!(
        paths.get("permute_vec").copied().unwrap_or(0) > 0,
        "no case took the vector kernel: {paths:?}"
    );
    // The wide kernels, partial tiles on both sides, a reversed outer axis.
    let rev = vec![step(0, None, -1), step(0, None, 1), step(0, None, 1)];
    let perms = outer_permutations(3);
    for run in [16, 32, 64] {
        permuted_cases::<u8, u8>(&stream, &mut rng, &[37, 20, run], &rev, &perms, &mut paths);
    }
    for kind in ["permute_w16", "permute_w32", "permute_w64"] {
        assert!(paths.contains_key(kind), "no case took {kind}: {paths:?}");
    }
    check_permute_taken(&paths, "sanitize subset");
}
