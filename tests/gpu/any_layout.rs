//! GPU tests of layouts of any rank and any extent: permuted copies of ranks 1 to 40 (most of
//! them more than eight axes after merging), sliced, reversed and broadcast sources, strided
//! destinations, narrow axes moved to or from the innermost position (CHW <-> HWC,
//! split <-> interleaved complex, NCHW <-> NHWC), fills of views that stay above eight axes
//! after merging, host <-> device transfers, DLPack and `to_shape` at high rank, a u8 copy of
//! more than 2^31 elements, tiles beside an axis 2^31 bytes across, state vectors of 4 GiB
//! permuted by qubit (tiles spanning more than 2^31 bytes), copies repeated on the plans kept
//! from their first call (new arrays each call, and arrays kept across calls), and the planner's
//! steerings (`Steer::Default`, `NoTiled`, `PreferTiled`, `PreferGather`) on narrow and
//! high-rank cases.
//!
//! Every case draws its layout and data from its own seed and compares with ndarray; a
//! destination is poisoned with random values first, so that unwritten elements are caught, and
//! when it is a view into a larger array the elements outside the view must keep their poison.
//! A failure prints the seed and the case (operation, element types, shapes, slicings,
//! permutations, strides). Each test prints the paths its copies took. Marked `#[ignore]`: run
//! with `--include-ignored` on a GPU machine.

use std::collections::BTreeMap;
use std::sync::Arc;

use cudarc::driver::CudaStream;
use devspan::dlpack::DlpackTensor;
use devspan::internals::{
    GridOptions, Steer, assign_cast_steered, copy_path, fill_path, plans_found, transfer_path,
};
use devspan::testing::{cast_reference, gpu_stream};
use devspan::{DeviceArray, DeviceElement, DeviceView, DeviceViewMut, Layout};
use half::{bf16, f16};
use ndarray::{IxDyn, Order, SliceInfo, SliceInfoElem};
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::common::{assert_same, gpu_shared, random, scaled, unless_sanitized};

/// Counts of the paths taken, printed at the end of each test.
type Paths = BTreeMap<String, usize>;

fn slice_info(elems: &[SliceInfoElem]) -> SliceInfo<Vec<SliceInfoElem>, IxDyn, IxDyn> {
    SliceInfo::<_, IxDyn, IxDyn>::try_from(elems.to_vec()).unwrap()
}

fn step(start: isize, end: Option<isize>, step: isize) -> SliceInfoElem {
    SliceInfoElem::Slice { start, end, step }
}

fn full(rank: usize) -> Vec<SliceInfoElem> {
    vec![step(0, None, 1); rank]
}

/// The seed of case `index` of the test seeded `test`.
fn case_seed(test: u64, index: usize) -> u64 {
    (test << 32) | index as u64
}

/// The extent of an axis of `n` elements sliced by `e` (a `Slice` with non-negative start and
/// end, as every slicing of this file is).
fn slice_len(n: usize, e: &SliceInfoElem) -> usize {
    match *e {
        SliceInfoElem::Slice { start, end, step } => {
            let end = end.map_or(n, |e| e as usize).min(n);
            end.saturating_sub(start as usize)
                .div_ceil(step.unsigned_abs())
        }
        _ => panic!("only ranges are used here: {e:?}"),
    }
}

fn sliced_shape(base: &[usize], slice: &[SliceInfoElem]) -> Vec<usize> {
    base.iter()
        .zip(slice)
        .map(|(&n, e)| slice_len(n, e))
        .collect()
}

/// A slicing in `s![]` notation, for failure messages.
fn show_slice(slice: &[SliceInfoElem]) -> String {
    let one = |e: &SliceInfoElem| match *e {
        SliceInfoElem::Slice { start, end, step } => {
            let mut s = String::new();
            if start != 0 {
                s += &start.to_string();
            }
            s += "..";
            if let Some(e) = end {
                s += &e.to_string();
            }
            if step != 1 {
                s += &format!(";{step}");
            }
            s
        }
        other => format!("{other:?}"),
    };
    format!(
        "s![{}]",
        slice.iter().map(one).collect::<Vec<_>>().join(", ")
    )
}

/// The number of axes a layout of `shape` keeps after merging, given the strides (in elements)
/// of one or two operands: axes of extent 1 dropped, the others ordered by the first operand's
/// stride magnitude, neighbours merged where they are contiguous, in magnitude, in every operand.
/// The planner, which also needs the signs to agree, keeps at least as many.
fn merged_axes(shape: &[usize], strides: &[&[isize]]) -> usize {
    let mut axes: Vec<usize> = (0..shape.len()).filter(|&a| shape[a] > 1).collect();
    axes.sort_by_key(|&a| std::cmp::Reverse(strides[0][a].unsigned_abs()));
    let merges = axes
        .windows(2)
        .filter(|w| {
            strides
                .iter()
                .all(|s| s[w[0]].unsigned_abs() == s[w[1]].unsigned_abs() * shape[w[1]])
        })
        .count();
    axes.len() - merges
}

/// A shape of `rank` axes of extents 1 to 5 and up to two long axes (17 to 300), shrunk until
/// it holds at most `budget` elements: long axes halved first, then random axes above 2
/// decremented, then random 2s made 1s.
fn random_shape(rng: &mut StdRng, rank: usize, budget: usize) -> Vec<usize> {
    let mut shape: Vec<usize> = (0..rank).map(|_| rng.random_range(1..=5)).collect();
    for _ in 0..rng.random_range(0..=2) {
        let a = rng.random_range(0..rank);
        shape[a] = rng.random_range(17..=300);
    }
    let count = |s: &[usize]| s.iter().fold(1u128, |p, &n| p * n as u128);
    while count(&shape) > budget as u128 {
        let (big, &max) = shape.iter().enumerate().max_by_key(|&(_, n)| n).unwrap();
        if max > 5 {
            shape[big] = max.div_ceil(2);
            continue;
        }
        let pick = |shape: &[usize], rng: &mut StdRng, above: usize| {
            let axes: Vec<usize> = (0..shape.len()).filter(|&a| shape[a] > above).collect();
            axes[rng.random_range(0..axes.len())]
        };
        if max > 2 {
            let a = pick(&shape, rng, 2);
            shape[a] -= 1;
        } else {
            let a = pick(&shape, rng, 1);
            shape[a] = 1;
        }
    }
    shape
}

/// A slicing of `base` that keeps every axis non-empty: whole, reversed, from the second
/// element, or every other element forwards or backwards.
fn random_slicing(rng: &mut StdRng, base: &[usize]) -> Vec<SliceInfoElem> {
    base.iter()
        .map(|&n| match rng.random_range(0..6) {
            0 | 1 => step(0, None, 1),
            2 => step(0, None, -1),
            3 if n >= 2 => step(1, None, 1),
            4 => step(0, None, 2),
            5 => step(0, None, -2),
            _ => step(0, None, -1),
        })
        .collect()
}

/// A random permutation of `0..rank`.
fn random_perm(rng: &mut StdRng, rank: usize) -> Vec<usize> {
    let mut p: Vec<usize> = (0..rank).collect();
    for i in (1..rank).rev() {
        p.swap(i, rng.random_range(0..=i));
    }
    p
}

fn reversed(rank: usize) -> Vec<usize> {
    (0..rank).rev().collect()
}

/// Every axis one place outwards, the outermost innermost.
fn cyclic(rank: usize) -> Vec<usize> {
    (0..rank).map(|i| (i + 1) % rank).collect()
}

/// The broadcast shape of a sliced source of shape `sliced`: up to three of its extent-1 axes
/// stretched to 2 or 3 (None when it has none).
fn random_broadcast(rng: &mut StdRng, sliced: &[usize]) -> Option<Vec<usize>> {
    let ones: Vec<usize> = (0..sliced.len()).filter(|&a| sliced[a] == 1).collect();
    if ones.is_empty() {
        return None;
    }
    let mut shape = sliced.to_vec();
    for _ in 0..3 {
        shape[ones[rng.random_range(0..ones.len())]] = rng.random_range(2..=3);
    }
    Some(shape)
}

/// A copy's source: a random array of `base`, sliced, broadcast to `broadcast` (when set) and
/// permuted.
#[derive(Clone, Debug)]
struct Src {
    base: Vec<usize>,
    slice: Vec<SliceInfoElem>,
    broadcast: Option<Vec<usize>>,
    perm: Vec<usize>,
}

impl Src {
    /// The whole array of `base`, permuted.
    fn permuted(base: &[usize], perm: Vec<usize>) -> Self {
        Src {
            base: base.to_vec(),
            slice: full(base.len()),
            broadcast: None,
            perm,
        }
    }

    /// The shape of the copy.
    fn shape(&self) -> Vec<usize> {
        let b = self
            .broadcast
            .clone()
            .unwrap_or_else(|| sliced_shape(&self.base, &self.slice));
        self.perm.iter().map(|&a| b[a]).collect()
    }

    fn show(&self) -> String {
        format!(
            "{:?} sliced {}{} permuted {:?}",
            self.base,
            show_slice(&self.slice),
            self.broadcast
                .as_ref()
                .map_or(String::new(), |b| format!(" broadcast to {b:?}")),
            self.perm
        )
    }
}

/// A copy's destination: a poisoned array of `base`, sliced and permuted into the copy's shape.
#[derive(Clone, Debug)]
struct Dst {
    base: Vec<usize>,
    slice: Vec<SliceInfoElem>,
    perm: Vec<usize>,
}

impl Dst {
    /// A standard-layout array of `shape`.
    fn contiguous(shape: &[usize]) -> Self {
        Dst {
            base: shape.to_vec(),
            slice: full(shape.len()),
            perm: (0..shape.len()).collect(),
        }
    }

    /// A standard-layout view of `shape` into a larger array, one element of its outermost
    /// axis in (so that it starts off a vector's alignment, and stays contiguous).
    fn window(shape: &[usize]) -> Self {
        let mut d = Dst::contiguous(shape);
        d.base[0] += 2;
        d.slice[0] = step(1, Some(shape[0] as isize + 1), 1);
        d
    }

    /// A view of `shape` into a larger array: its innermost axis padded by one element (an
    /// image with a spare channel, say).
    fn padded(shape: &[usize]) -> Self {
        let mut d = Dst::contiguous(shape);
        let last = shape.len() - 1;
        d.base[last] += 1;
        d.slice[last] = step(0, Some(shape[last] as isize), 1);
        d
    }

    /// A randomly permuted view of `shape` into a larger array: every axis whole or reversed,
    /// up to three of them from the second element or every other element (forwards or
    /// backwards).
    fn random(rng: &mut StdRng, shape: &[usize]) -> Self {
        let r = shape.len();
        let perm = random_perm(rng, r);
        // Axis `perm[j]` of the sliced base is axis `j` of the view.
        let mut extent = vec![0; r];
        for (j, &a) in perm.iter().enumerate() {
            extent[a] = shape[j];
        }
        let mut grown = 0;
        let (mut base, mut slice) = (Vec::new(), Vec::new());
        for &e in &extent {
            let kind = rng.random_range(0..5);
            let (b, s) = match kind {
                2 if grown < 3 => (e + 1, step(1, None, 1)),
                3 if grown < 3 => (2 * e, step(0, None, 2)),
                4 if grown < 3 => (2 * e, step(0, None, -2)),
                1 | 2 => (e, step(0, None, -1)),
                _ => (e, step(0, None, 1)),
            };
            if b != e {
                grown += 1;
            }
            base.push(b);
            slice.push(s);
        }
        Dst { base, slice, perm }
    }

    fn show(&self) -> String {
        format!(
            "{:?} sliced {} permuted {:?}",
            self.base,
            show_slice(&self.slice),
            self.perm
        )
    }
}

/// One case: its seed (which draws its data), what it does, and its operands' layouts.
struct Case<'c> {
    seed: u64,
    op: &'c str,
    src: &'c Src,
    dst: &'c Dst,
}

type IntoFn<'r, F, T> = &'r dyn Fn(
    &mut DeviceViewMut<'_, T, IxDyn>,
    &DeviceView<'_, F, IxDyn>,
) -> devspan::Result<String>;
type NewFn<'r, F, T> =
    &'r dyn Fn(&DeviceView<'_, F, IxDyn>) -> devspan::Result<DeviceArray<T, IxDyn>>;

/// How a case writes its result.
enum Op<'r, F: DeviceElement, T: DeviceElement> {
    /// Into the destination view; returns the path taken.
    Into(IntoFn<'r, F, T>),
    /// Into a new standard-layout array.
    New(NewFn<'r, F, T>),
}

/// `assign` into `o`, returning the path.
fn assign<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    o: &mut DeviceViewMut<'_, T, IxDyn>,
    s: &DeviceView<'_, T, IxDyn>,
) -> devspan::Result<String> {
    let path = copy_path(o, s);
    o.assign_on(stream, s)?;
    Ok(path)
}

/// `assign_cast` into `o`, returning the path.
fn assign_cast<F: DeviceElement, T: DeviceElement>(
    stream: &Arc<CudaStream>,
    o: &mut DeviceViewMut<'_, T, IxDyn>,
    s: &DeviceView<'_, F, IxDyn>,
) -> devspan::Result<String> {
    let path = copy_path(o, s);
    o.assign_cast_on(stream, s)?;
    Ok(path)
}

/// Runs `case` with `op` and compares with ndarray; returns the path taken (counted in `paths`).
fn run_case<F: DeviceElement, T: DeviceElement>(
    stream: &Arc<CudaStream>,
    case: &Case<'_>,
    op: Op<'_, F, T>,
    paths: &mut Paths,
) -> String {
    let mut rng = StdRng::seed_from_u64(case.seed);
    let src = case.src;
    let host = random::<F>(&mut rng, &src.base);
    let dev = DeviceArray::from_host(stream, &host.view()).unwrap();
    let hs = host.view().slice_move(slice_info(&src.slice));
    let ds = dev.view().slice_move(slice_info(&src.slice));
    let (hb, db) = match &src.broadcast {
        Some(b) => (
            hs.broadcast(IxDyn(b)).unwrap(),
            ds.broadcast(IxDyn(b)).unwrap(),
        ),
        None => (hs.view(), ds.view()),
    };
    let hp = hb.permuted_axes(src.perm.clone());
    let dp = db.permuted_axes(IxDyn(&src.perm));
    let reference = hp.mapv(|x| cast_reference::<F, T>(x));
    let what = |dst: &str, strides: &[isize]| {
        format!(
            "seed {}: {} {} -> {}, shape {:?}; source {} (strides {:?}); destination {dst} (strides {strides:?})",
            case.seed,
            case.op,
            F::DTYPE,
            T::DTYPE,
            hp.shape(),
            src.show(),
            dp.strides(),
        )
    };
    let path = match op {
        Op::Into(f) => {
            let dst = case.dst;
            let poison = random::<T>(&mut rng, &dst.base);
            let mut out = DeviceArray::from_host(stream, &poison.view()).unwrap();
            let mut expect = poison.clone();
            expect
                .view_mut()
                .slice_move(slice_info(&dst.slice))
                .permuted_axes(dst.perm.clone())
                .assign(&reference);
            let (path, what) = {
                let mut ov = out
                    .view_mut()
                    .slice_move(slice_info(&dst.slice))
                    .permuted_axes(IxDyn(&dst.perm));
                let what = what(&dst.show(), ov.strides());
                assert_eq!(ov.shape(), hp.shape(), "{what}: test construction");
                let path = f(&mut ov, &dp).unwrap_or_else(|e| panic!("{what}: {e}"));
                (path, what)
            };
            assert!(!path.starts_with("error"), "{what}: {path}");
            let got = out.to_host_on(stream).unwrap();
            assert_same(&got.view(), &expect.view(), &format!("{what}, path {path}"));
            path
        }
        Op::New(f) => {
            // The path of the same copy into a poisoned array, which is freed just before the
            // operation allocates: the stream-ordered pool is likely to hand its block on.
            let what = what("a new array", &[]);
            let path = {
                let poison = random::<T>(&mut rng, hp.shape());
                let mut o = DeviceArray::from_host(stream, &poison.view()).unwrap();
                copy_path(&mut o.view_mut(), &dp)
            };
            assert!(!path.starts_with("error"), "{what}: {path}");
            let got = f(&dp).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(got.is_standard_layout(), "{what}: not standard layout");
            let got = got.to_host_on(stream).unwrap();
            let expect = reference.as_standard_layout();
            assert_same(&got.view(), &expect.view(), &format!("{what}, path {path}"));
            path
        }
    };
    *paths.entry(path.clone()).or_default() += 1;
    path
}

/// A same-type case run by the operation `which % 4` picks: `assign`, `assign_cast`,
/// `to_contiguous` or `cast`.
fn same_type_case<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    seed: u64,
    which: usize,
    src: &Src,
    dst: &Dst,
    paths: &mut Paths,
) -> String {
    let ops = ["assign", "assign_cast", "to_contiguous", "cast"];
    let case = Case {
        seed,
        op: ops[which % 4],
        src,
        dst,
    };
    match which % 4 {
        0 => run_case::<T, T>(stream, &case, Op::Into(&|o, s| assign(stream, o, s)), paths),
        1 => run_case::<T, T>(
            stream,
            &case,
            Op::Into(&|o, s| assign_cast(stream, o, s)),
            paths,
        ),
        2 => run_case::<T, T>(
            stream,
            &case,
            Op::New(&|s| s.to_contiguous_on(stream)),
            paths,
        ),
        _ => run_case::<T, T>(stream, &case, Op::New(&|s| s.cast_on::<T>(stream)), paths),
    }
}

/// A converting case run by `assign_cast` (even `which`) or `cast` (odd).
fn cast_case<F: DeviceElement, T: DeviceElement>(
    stream: &Arc<CudaStream>,
    seed: u64,
    which: usize,
    src: &Src,
    dst: &Dst,
    paths: &mut Paths,
) -> String {
    if which % 2 == 0 {
        let case = Case {
            seed,
            op: "assign_cast",
            src,
            dst,
        };
        run_case::<F, T>(
            stream,
            &case,
            Op::Into(&|o, s| assign_cast(stream, o, s)),
            paths,
        )
    } else {
        let case = Case {
            seed,
            op: "cast",
            src,
            dst,
        };
        run_case::<F, T>(stream, &case, Op::New(&|s| s.cast_on::<T>(stream)), paths)
    }
}

/// [`same_type_case`] of u8, f16, f32 or f64 by `size` (1, 2, 4, else 8 bytes).
fn sized_case(
    size: usize,
    stream: &Arc<CudaStream>,
    seed: u64,
    which: usize,
    src: &Src,
    dst: &Dst,
    paths: &mut Paths,
) -> String {
    match size {
        1 => same_type_case::<u8>(stream, seed, which, src, dst, paths),
        2 => same_type_case::<f16>(stream, seed, which, src, dst, paths),
        4 => same_type_case::<f32>(stream, seed, which, src, dst, paths),
        _ => same_type_case::<f64>(stream, seed, which, src, dst, paths),
    }
}

/// Whether a path is one of the kernels for any rank: the tiled kernels (`tiled`, `tiled_e`,
/// with or without a remainder launch) or the rank-generic strided kernel.
fn any_rank_path(path: &str) -> bool {
    path.starts_with("tiled") || path.starts_with("stridedn")
}

#[track_caller]
fn check_any_rank_taken(paths: &Paths, what: &str) {
    println!("{what}: paths {paths:?}");
    assert!(
        paths.keys().any(|p| any_rank_path(p)),
        "{what}: no case took the tiled or rank-generic kernels: {paths:?}"
    );
}

/// Element-wise copies of 1-, 2- and 4-byte elements in tiles of more than 4096 elements
/// (`copy_tiled_ew_bN`, blocks of more than 512 threads): `[2, 3^9]` reversed (runs of 3^k
/// elements, never whole vectors), also read backwards along its first axis, and under a
/// random permutation, f16, f32 and u8, through `assign`, `assign_cast`, `to_contiguous` and
/// `cast` in turn, against ndarray; the reversed layout's launch runs that kernel.
#[test]
#[ignore = "needs a CUDA GPU"]
fn wide_element_wise_tiles_of_axes_of_3() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut shape = vec![2usize];
    shape.extend([3usize; 9]);
    let n = shape.len();
    let mut rng = StdRng::seed_from_u64(0x3e3e);
    let reversed: Vec<usize> = (0..n).rev().collect();
    let perms = [reversed.clone(), random_perm(&mut rng, n)];
    let mut index = 0;
    for (size, dtype) in [
        (2usize, devspan::DType::F16),
        (4, devspan::DType::F32),
        (1, devspan::DType::U8),
    ] {
        for (k, perm) in perms.iter().enumerate() {
            for flip in [false, true] {
                let mut src = Src::permuted(&shape, perm.clone());
                if flip {
                    src.slice[0] = step(0, None, -1);
                }
                let dst = Dst::contiguous(&src.shape());
                for which in 0..4 {
                    index += 1;
                    let seed = case_seed(0x3e3e, index);
                    let path = sized_case(size, &stream, seed, which, &src, &dst, &mut paths);
                    if k == 0 {
                        assert_eq!(path, "tiled_e", "{} {size} bytes", src.show());
                    }
                }
            }
        }
        // The kernel of the reversed layout (raw operands: strides in elements).
        let standard = |shape: &[usize]| {
            let mut s = vec![0isize; shape.len()];
            let mut acc = 1isize;
            for i in (0..shape.len()).rev() {
                s[i] = acc;
                acc *= shape[i] as isize;
            }
            s
        };
        let cs = standard(&shape);
        let out: Vec<usize> = reversed.iter().map(|&a| shape[a]).collect();
        let ss: Vec<isize> = reversed.iter().map(|&a| cs[a]).collect();
        let launch = devspan::internals::tiled_launch(
            1 << 40,
            &standard(&out),
            dtype,
            1 << 41,
            &ss,
            dtype,
            &out,
            0,
        )
        .unwrap()
        .expect("a tiled plan");
        assert_eq!(launch.kernel, format!("copy_tiled_ew_b{size}"));
        assert!(launch.threads > 512, "{} threads", launch.threads);
    }
    println!("wide element-wise tiles: paths {paths:?}");
}

/// Permuted copies of every rank from 1 to 40, of random shapes of small extents with a few long
/// axes, each under the reversed, the cyclic and two random permutations; u8, f16, f32 and f64
/// through `assign`, `assign_cast`, `to_contiguous` and `cast` in turn, and the casts f32 -> f16
/// and u8 -> f32; contiguous sources and destinations.
#[test]
#[ignore = "needs a CUDA GPU"]
fn permuted_copies_of_ranks_1_to_40() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut high = 0;
    let mut index = 0;
    for rank in 1..=40 {
        let mut rng = StdRng::seed_from_u64(case_seed(0xa11, rank));
        let budget = scaled(rng.random_range(1 << 15..=1 << 18), 1 << 10);
        let shape = random_shape(&mut rng, rank, budget);
        let perms = [
            reversed(rank),
            cyclic(rank),
            random_perm(&mut rng, rank),
            random_perm(&mut rng, rank),
        ];
        for (k, perm) in perms.into_iter().enumerate() {
            let src = Src::permuted(&shape, perm);
            let dst = Dst::contiguous(&src.shape());
            let contiguous = Layout::contiguous(IxDyn(&shape)).strides().to_vec();
            let src_strides: Vec<isize> = src.perm.iter().map(|&a| contiguous[a]).collect();
            let dst_strides = Layout::contiguous(IxDyn(&dst.base)).strides().to_vec();
            if merged_axes(&src.shape(), &[&dst_strides, &src_strides]) > 8 {
                high += 1;
            }
            // Each type meets every operation over the four permutations.
            let w = rank + k;
            let mut next = || {
                index += 1;
                case_seed(0xa11, 1000 + index)
            };
            same_type_case::<u8>(&stream, next(), w, &src, &dst, &mut paths);
            same_type_case::<f16>(&stream, next(), w + 1, &src, &dst, &mut paths);
            same_type_case::<f32>(&stream, next(), w + 2, &src, &dst, &mut paths);
            same_type_case::<f64>(&stream, next(), w + 3, &src, &dst, &mut paths);
            cast_case::<f32, f16>(&stream, next(), w, &src, &dst, &mut paths);
            cast_case::<u8, f32>(&stream, next(), w + 1, &src, &dst, &mut paths);
        }
    }
    println!("ranks 1 to 40: {high} layouts of more than 8 axes after merging");
    assert!(high >= 40, "too few high-rank layouts: {high}");
    check_any_rank_taken(&paths, "ranks 1 to 40");
}

/// Copies of 1- and 2-byte elements in large tiles, which the launcher runs with the `cp.async`
/// kernels (`copy_tiled_a_b1` and `copy_tiled_a_b2`, on sm_80 and later): bit reversals of
/// [2]^k, [4]^k and mixed extents under reversed, cyclic and random permutations, sources with
/// negative steps, copies of one or two tiles per block (the pipeline's prologue with tiles
/// missing) and of many; each through `assign`, `assign_cast`, `to_contiguous` and `cast`,
/// compared with ndarray.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_element_copies_in_large_tiles_take_the_async_kernels() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let shapes: [&[usize]; 7] = [
        &[2; 14],
        &[2; 18],
        &[4; 9],
        &[2, 3, 4, 2, 3, 4, 2, 3, 4, 16],
        &[16, 3, 4, 2, 4, 3, 4, 2, 64],
        &[3, 5, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 7],
        &[8, 2, 4, 2, 2, 4, 2, 2, 2, 4, 2, 3],
    ];
    // Most cyclic permutations move one axis of 2 to 16 elements and take the narrow kernels.
    // Both take tiles of up to 16 KiB in blocks of up to 1024 threads.
    async_copies::<u8>(&stream, 0xa13, &shapes, "copy_tiled_a_b1", (11, 6));
    async_copies::<f16>(&stream, 0xa14, &shapes, "copy_tiled_a_b2", (8, 5));
}

/// u8 copies whose innermost axis (2 elements, contiguous on both sides) stays innermost while
/// the outer axes are reversed or permuted at random: the planner moves the pairs as 2-byte
/// units on `copy_tiled_a_b2`, whose launch sizes its shared memory for those units (rank 16:
/// fewer tiles than blocks; rank 24: 1024 tiles, several per block, so that blocks cycle
/// through their buffers); compared with ndarray.
#[test]
#[ignore = "needs a CUDA GPU"]
fn u8_pairs_take_the_2_byte_async_kernel() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    for (i, rank) in [16usize, 24].into_iter().enumerate() {
        let shape = vec![2usize; rank];
        let mut rng = StdRng::seed_from_u64(case_seed(0xa15, i));
        let outer = rank - 1;
        let mut perms = vec![reversed(outer), random_perm(&mut rng, outer)];
        for perm in &mut perms {
            perm.push(outer);
        }
        for perm in perms {
            let src = Src::permuted(&shape, perm.clone());
            let dst = Dst::contiguous(&src.shape());
            let launch = planned_tiled::<u8>(&shape, &perm).expect("a tiled plan");
            assert_eq!(
                launch.kernel, "copy_tiled_a_b2",
                "u8 pairs of rank {rank}, permutation {perm:?}"
            );
            for which in 0..4 {
                index += 1;
                let seed = case_seed(0xa15, 100 + index);
                same_type_case::<u8>(&stream, seed, which, &src, &dst, &mut paths);
            }
        }
    }
    println!("u8 pairs on copy_tiled_a_b2: paths {paths:?}");
}

/// Casts between element types of one size (u8 -> i8, i8 -> u8, f16 -> bf16, bf16 -> f16,
/// u16 -> i16) on the layouts whose copies take the cp.async kernels, against ndarray: the
/// vector tiles of f16 <-> bf16 run on the register-pipelined cast kernels (there are no
/// cp.async casts), the integer casts, which keep every bit, on the copy kernels.
#[test]
#[ignore = "needs a CUDA GPU"]
fn same_size_casts_in_large_tiles() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let shapes: [&[usize]; 3] = [&[2; 14], &[4; 9], &[16, 3, 4, 2, 4, 3, 4, 2, 64]];
    let mut index = 0;
    for (i, shape) in shapes.iter().enumerate() {
        let rank = shape.len();
        let mut rng = StdRng::seed_from_u64(case_seed(0xa1c, i));
        for perm in [reversed(rank), random_perm(&mut rng, rank)] {
            let src = Src::permuted(shape, perm);
            let dst = Dst::contiguous(&src.shape());
            for which in 0..2 {
                index += 1;
                let seed = case_seed(0xa1c, 100 + index);
                let p = &mut paths;
                cast_case::<u8, i8>(&stream, seed, which, &src, &dst, p);
                cast_case::<i8, u8>(&stream, seed + 1, which, &src, &dst, p);
                cast_case::<f16, bf16>(&stream, seed + 2, which, &src, &dst, p);
                cast_case::<bf16, f16>(&stream, seed + 3, which, &src, &dst, p);
                cast_case::<u16, i16>(&stream, seed + 4, which, &src, &dst, p);
            }
        }
    }
    println!("same-size casts in large tiles: paths {paths:?}");
    assert!(
        paths.keys().any(|p| p.starts_with("tiled")),
        "no same-size cast took the tiled kernels: {paths:?}"
    );
}

/// The tiled launch that the planner gives a copy of `T` from the contiguous array of shape
/// `base` read with its axes permuted (`perm`) into a contiguous destination, if tiled.
fn planned_tiled<T: DeviceElement>(
    base: &[usize],
    perm: &[usize],
) -> Option<devspan::internals::TiledLaunch> {
    let contiguous = Layout::contiguous(IxDyn(base)).strides().to_vec();
    let shape: Vec<usize> = perm.iter().map(|&a| base[a]).collect();
    let src_strides: Vec<isize> = perm.iter().map(|&a| contiguous[a]).collect();
    let dst_strides = Layout::contiguous(IxDyn(&shape)).strides().to_vec();
    devspan::internals::tiled_launch(
        0,
        &dst_strides,
        T::DTYPE,
        0,
        &src_strides,
        T::DTYPE,
        &shape,
        0,
    )
    .unwrap()
}

/// The cases of [`small_element_copies_in_large_tiles_take_the_async_kernels`] for `T`: each
/// shape reversed, cycled and permuted at random; asserts that at least `least.0` of the
/// layouts plan to `kernel`, and at least `least.1` of those in blocks of more than 512
/// threads.
fn async_copies<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    tag: u64,
    shapes: &[&[usize]],
    kernel: &str,
    least: (usize, usize),
) {
    let mut paths = Paths::new();
    let mut kernels = Paths::new();
    let mut wide = 0;
    let mut index = 0;
    for (i, shape) in shapes.iter().enumerate() {
        let rank = shape.len();
        let mut rng = StdRng::seed_from_u64(case_seed(tag, i));
        let perms = [reversed(rank), cyclic(rank), random_perm(&mut rng, rank)];
        for (k, perm) in perms.into_iter().enumerate() {
            let mut src = Src::permuted(shape, perm);
            // The second permutation of each shape reads its outermost axes backwards.
            if k == 1 {
                src.slice[0] = step(0, None, -1);
                src.slice[1] = step(0, None, -1);
            }
            let dst = Dst::contiguous(&src.shape());
            // The plan of the unsliced permutation: the reversed axes only flip signs.
            let launch = planned_tiled::<T>(shape, &src.perm);
            if launch
                .as_ref()
                .is_some_and(|l| l.kernel == kernel && l.threads > 512)
            {
                wide += 1;
            }
            let planned = launch.map_or("none".to_string(), |l| l.kernel);
            *kernels.entry(planned).or_default() += 1;
            for which in 0..4 {
                index += 1;
                let seed = case_seed(tag, 100 + index);
                same_type_case::<T>(stream, seed, which, &src, &dst, &mut paths);
            }
            // The same plan on the register-pipelined kernels, which devices before sm_80 run.
            index += 1;
            let case = Case {
                seed: case_seed(tag, 100 + index),
                op: "assign_cast_steered(no_async: true)",
                src: &src,
                dst: &dst,
            };
            let grid = GridOptions {
                no_async: true,
                ..GridOptions::default()
            };
            steered_case::<T>(stream, &case, grid, &mut paths);
        }
    }
    println!(
        "large tiles of {}: paths {paths:?}; tiled kernels {kernels:?}; {wide} in blocks of more \
         than 512 threads",
        T::DTYPE
    );
    let taken = kernels.get(kernel).copied().unwrap_or(0);
    assert!(
        taken >= least.0,
        "too few cases plan to {kernel}: {kernels:?}"
    );
    assert!(
        wide >= least.1,
        "{wide} cases plan to {kernel} in blocks of more than 512 threads"
    );
}

/// Ranks 9 to 40: sources sliced at random (offsets, steps of 2, negative steps), every third
/// one broadcast along some of its extent-1 axes; every other destination a randomly permuted,
/// sliced view into a larger poisoned array (whose other elements must keep their poison).
#[test]
#[ignore = "needs a CUDA GPU"]
fn sliced_broadcast_sources_and_strided_destinations() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    for rank in 9..=40 {
        for variant in 0..4 {
            index += 1;
            let seed = case_seed(0xa12, index);
            let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
            let budget = scaled(rng.random_range(1 << 14..=1 << 17), 1 << 10);
            let base = random_shape(&mut rng, rank, budget);
            let slice = random_slicing(&mut rng, &base);
            let sliced = sliced_shape(&base, &slice);
            let broadcast = if index % 3 == 0 {
                random_broadcast(&mut rng, &sliced)
            } else {
                None
            };
            let perm = if variant == 0 {
                reversed(rank)
            } else {
                random_perm(&mut rng, rank)
            };
            let src = Src {
                base,
                slice,
                broadcast,
                perm,
            };
            let dst = if index % 2 == 0 {
                Dst::random(&mut rng, &src.shape())
            } else {
                Dst::contiguous(&src.shape())
            };
            // Each type meets every operation over the ranks.
            match variant {
                0 => same_type_case::<u8>(&stream, seed, rank, &src, &dst, &mut paths),
                1 => same_type_case::<f16>(&stream, seed, rank, &src, &dst, &mut paths),
                2 if rank % 3 == 1 => {
                    cast_case::<f32, f16>(&stream, seed, rank, &src, &dst, &mut paths)
                }
                2 => same_type_case::<f32>(&stream, seed, rank, &src, &dst, &mut paths),
                _ if rank % 5 == 0 => {
                    cast_case::<u8, f32>(&stream, seed, rank, &src, &dst, &mut paths)
                }
                _ => same_type_case::<f64>(&stream, seed, rank, &src, &dst, &mut paths),
            };
        }
    }
    check_any_rank_taken(&paths, "sliced, broadcast and strided");
}

/// The narrow layouts of images and complex numbers: (layout name, source shape, permutation).
fn narrow_layouts() -> Vec<(String, Vec<usize>, Vec<usize>)> {
    let mut out = Vec::new();
    for (h, w) in [(37, 61), (256, 256)] {
        for c in [1, 2, 3, 4, 5, 8, 31] {
            out.push((format!("CHW -> HWC, C={c}"), vec![c, h, w], vec![1, 2, 0]));
            out.push((format!("HWC -> CHW, C={c}"), vec![h, w, c], vec![2, 0, 1]));
        }
    }
    for n in [1, 2, 7, 1000, 65_537, 1 << 20] {
        out.push((
            format!("split -> interleaved, n={n}"),
            vec![2, n],
            vec![1, 0],
        ));
        out.push((
            format!("interleaved -> split, n={n}"),
            vec![n, 2],
            vec![1, 0],
        ));
    }
    for (h, w) in [(37, 61), (64, 64)] {
        for n in [2, 5] {
            for c in [3, 4] {
                out.push((
                    format!("NCHW -> NHWC, N={n} C={c}"),
                    vec![n, c, h, w],
                    vec![0, 2, 3, 1],
                ));
                out.push((
                    format!("NHWC -> NCHW, N={n} C={c}"),
                    vec![n, h, w, c],
                    vec![0, 3, 1, 2],
                ));
            }
        }
    }
    out
}

/// Narrow axes moved to and from the innermost position, both directions: CHW <-> HWC for C in
/// {1, 2, 3, 4, 5, 8, 31} at 37 x 61 and 256 x 256, split <-> interleaved complex of 1 to 2^20
/// elements, NCHW <-> NHWC; u8, f16, f32 (and f64 below 2^20 elements) into contiguous
/// destinations, u8 and f32 into padded and randomly strided ones, f16 from reversed and offset
/// sources, and on the C = 3 and 4 and n = 1000 layouts the casts f32 -> f16, u8 -> f32 and
/// f16 -> f32.
#[test]
#[ignore = "needs a CUDA GPU"]
fn narrow_axes_both_directions() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    let mut next = || {
        index += 1;
        (case_seed(0xa13, index), index)
    };
    for (name, base, perm) in narrow_layouts() {
        let elems: usize = base.iter().product();
        if elems > scaled(usize::MAX, 1 << 14) {
            continue;
        }
        println!("narrow: {name}, {base:?}");
        let src = Src::permuted(&base, perm.clone());
        let shape = src.shape();
        let dst = Dst::contiguous(&shape);
        let (s, i) = next();
        same_type_case::<u8>(&stream, s, i, &src, &dst, &mut paths);
        let (s, i) = next();
        same_type_case::<f16>(&stream, s, i, &src, &dst, &mut paths);
        let (s, i) = next();
        same_type_case::<f32>(&stream, s, i, &src, &dst, &mut paths);
        if elems < 1 << 20 {
            let (s, i) = next();
            same_type_case::<f64>(&stream, s, i, &src, &dst, &mut paths);
        }
        // Padded and randomly strided destinations.
        let padded = Dst::padded(&shape);
        let (s, _) = next();
        same_type_case::<u8>(&stream, s, 0, &src, &padded, &mut paths);
        let (s, _) = next();
        let mut rng = StdRng::seed_from_u64(s);
        let strided = Dst::random(&mut rng, &shape);
        same_type_case::<f32>(&stream, s, 0, &src, &strided, &mut paths);
        // A source reversed along its narrowest axis and from the second element of its
        // longest.
        let mut sliced = src.clone();
        let axes = 0..base.len();
        let narrowest = axes
            .clone()
            .filter(|&a| base[a] > 1)
            .min_by_key(|&a| base[a]);
        let longest = axes.max_by_key(|&a| base[a]).unwrap();
        if let Some(a) = narrowest {
            sliced.slice[a] = step(0, None, -1);
        }
        if base[longest] > 2 && narrowest != Some(longest) {
            sliced.slice[longest] = step(1, None, 1);
        }
        let (s, _) = next();
        let dst = Dst::contiguous(&sliced.shape());
        same_type_case::<f16>(&stream, s, 1, &sliced, &dst, &mut paths);
        // Casts (assigned into an existing array, or into a new one where the case's index
        // is odd).
        if name.contains("C=3") || name.contains("C=4") || name.contains("n=1000") {
            let dst = Dst::contiguous(&shape);
            let (s, i) = next();
            cast_case::<f32, f16>(&stream, s, i, &src, &dst, &mut paths);
            let (s, i) = next();
            cast_case::<u8, f32>(&stream, s, i, &src, &dst, &mut paths);
            let (s, i) = next();
            cast_case::<f16, f32>(&stream, s, i, &src, &dst, &mut paths);
        }
    }
    println!("narrow axes: paths {paths:?}");
    assert!(
        paths.keys().any(|p| p.starts_with("tiled")),
        "no narrow case took the tiled kernels: {paths:?}"
    );
    assert!(
        paths.keys().any(|p| p.starts_with("narrow")),
        "no narrow case took the narrow kernels: {paths:?}"
    );
}

/// A same-type copy by `assign_cast_steered` with `grid`.
fn steered_case<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    case: &Case<'_>,
    grid: GridOptions,
    paths: &mut Paths,
) -> String {
    let f = |o: &mut DeviceViewMut<'_, T, IxDyn>, s: &DeviceView<'_, T, IxDyn>| {
        assign_cast_steered(o, stream, s, grid)
    };
    run_case::<T, T>(stream, case, Op::Into(&f), paths)
}

/// The narrow kernels (`copy_split_cC_bN`, `copy_join_cC_bN`) for every channel count they
/// take (2 to 16) and every element size they take (1, 4, 8 bytes; 2-byte copies of aligned
/// planes stay on the tiled kernels), both directions, on images whose tiles end in a
/// part of a chunk, with and without a batch axis, from sources read with their channels
/// reversed and into destinations whose planes are padded; each case also with the narrow
/// kernels turned off (the tiled kernels), both against ndarray.
#[test]
#[ignore = "needs a CUDA GPU"]
fn narrow_kernels_of_2_to_16_channels() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    let tunings = [
        GridOptions::default(),
        GridOptions {
            no_narrow: true,
            ..GridOptions::default()
        },
    ];
    for c in 2..=16usize {
        for (n, h, w) in [(1, 24, 40), (3, 8, 200)] {
            for (base, perm) in [
                (vec![n, c, h, w], vec![0, 2, 3, 1]),
                (vec![n, h, w, c], vec![0, 3, 1, 2]),
            ] {
                let mut src = Src::permuted(&base, perm.clone());
                let channel = if perm[3] == 1 { 1 } else { 3 };
                if (c + h) % 3 == 0 {
                    src.slice[channel] = step(0, None, -1);
                }
                let shape = src.shape();
                let padded = (c + w) % 4 == 0;
                let dst = if padded {
                    Dst::padded(&shape)
                } else {
                    Dst::contiguous(&shape)
                };
                for (k, grid) in tunings.into_iter().enumerate() {
                    index += 1;
                    let seed = case_seed(0xa17, index);
                    let op = format!("assign_cast_steered(no_narrow: {})", grid.no_narrow);
                    let case = Case {
                        seed,
                        op: &op,
                        src: &src,
                        dst: &dst,
                    };
                    let p = &mut paths;
                    let path = match (c + index) % 4 {
                        0 => steered_case::<u8>(&stream, &case, grid, p),
                        1 => steered_case::<f16>(&stream, &case, grid, p),
                        2 => steered_case::<f32>(&stream, &case, grid, p),
                        _ => steered_case::<f64>(&stream, &case, grid, p),
                    };
                    // 2-byte elements stay on the tiled kernels, except for planes off
                    // their alignment (rows of a padded destination): the shifted kernels.
                    let f16 = (c + index) % 4 == 1;
                    if k == 1 {
                        assert!(!path.starts_with("narrow"), "{op}: {path}");
                    } else if f16 {
                        let shifted = padded && path.starts_with("narrow_shifted");
                        assert!(!path.starts_with("narrow") || shifted, "{op}: {path}");
                    } else if !padded {
                        assert_eq!(path, "narrow", "{c} channels, {base:?} {perm:?}");
                    }
                }
            }
        }
    }
    println!("narrow kernels: paths {paths:?}");
}

/// Copies between planes that start off their 16-byte alignment (an odd number of pixels per
/// plane, a source that starts one plane or one element into its array) and an aligned
/// interleaved side, both directions: copies of 1- and 2-byte elements take the shifted narrow
/// kernels, and 8-byte ones of 5 channels or more whose runs of pixels reach 1 KiB (a join's
/// tiles stop a vector short of each plane's end, and its source view ends where its
/// allocation does), the others other paths, mostly element-wise tiles; each case also with
/// the narrow kernels turned off, which runs the same tiles on the element-wise tiled
/// kernels; both against ndarray. (4-byte copies take the shifted kernels on none of these
/// layouts; the PTX interpreter runs them, `tests/ptx/tiled_sim.rs`.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn shifted_narrow_kernels_of_planes_off_their_alignment() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    // Cases on the shifted kernels by direction (split, join) and element size.
    let mut shifted = std::collections::BTreeMap::<(&str, usize), usize>::new();
    let mut index = 0;
    let tunings = [
        GridOptions::default(),
        GridOptions {
            no_narrow: true,
            ..GridOptions::default()
        },
    ];
    for (ci, c) in [2usize, 3, 4, 5, 8, 13, 16].into_iter().enumerate() {
        // (images, height, width, the source's first plane or pixel, the first pixel)
        for (gi, (n, h, w, skip, first)) in [
            (1, 97, 101, 0, 0),
            (1, 93, 181, 1, 0),
            (1, 24, 40, 0, 1),
            (3, 36, 37, 0, 0),
        ]
        .into_iter()
        .enumerate()
        {
            for join in [true, false] {
                // Join: planes (NCHW) into interleaved pixels; split: the reverse. The source
                // starts `skip` channels (join) or pixels (split) into its array.
                let (base, perm, channel, pixel) = if join {
                    (vec![n, c + skip, h, w + first], vec![0, 2, 3, 1], 1, 3)
                } else {
                    (vec![n, h, w + first, c], vec![0, 3, 1, 2], 3, 2)
                };
                let mut base = base;
                if !join {
                    base[1] += skip;
                }
                let mut src = Src::permuted(&base, perm);
                src.slice[pixel] = step(first as isize, None, 1);
                if !join {
                    src.slice[1] = step(skip as isize, None, 1);
                }
                let channels = if join { skip as isize } else { 0 };
                let reverse = (c + h) % 3 == 0;
                src.slice[channel] = step(channels, None, if reverse { -1 } else { 1 });
                let dst = Dst::contiguous(&src.shape());
                for (k, grid) in tunings.into_iter().enumerate() {
                    index += 1;
                    let seed = case_seed(0xa5f, index);
                    let op = format!("assign_cast_steered(no_narrow: {})", grid.no_narrow);
                    let case = Case {
                        seed,
                        op: &op,
                        src: &src,
                        dst: &dst,
                    };
                    let p = &mut paths;
                    // Every element size under both tunings in each direction and geometry,
                    // over the channel counts.
                    let (path, size) = match (ci + gi + k) % 4 {
                        0 => (steered_case::<u8>(&stream, &case, grid, p), 1),
                        1 => (steered_case::<f16>(&stream, &case, grid, p), 2),
                        2 => (steered_case::<f32>(&stream, &case, grid, p), 4),
                        _ => (steered_case::<f64>(&stream, &case, grid, p), 8),
                    };
                    // Planes off their alignment in images that start aligned on the
                    // interleaved side: for 1-byte elements vector tiles (the shifted kernels,
                    // or the tiled kernels where a tile spans whole images that line up),
                    // never the element-wise ones.
                    let planes = h * w * size % 16 != 0;
                    let images = n == 1 || c * h * w * size % 16 == 0;
                    if path.starts_with("narrow_shifted") {
                        let dir = if join { "join" } else { "split" };
                        *shifted.entry((dir, size)).or_default() += 1;
                    }
                    if k == 1 {
                        assert!(!path.starts_with("narrow"), "{op}: {path}");
                    } else if first == 0 && planes && images && (join || skip == 0) {
                        let what = format!("{c} channels, {base:?}, {size} bytes, join {join}");
                        assert!(!path.starts_with("tiled_e") || size > 1, "{what}: {path}");
                    }
                }
            }
        }
    }
    println!("shifted narrow kernels: paths {paths:?}; by direction and size {shifted:?}");
    // Both directions took the shifted kernels with 1-, 2- and 8-byte elements.
    for dir in ["join", "split"] {
        for size in [1, 2, 8] {
            assert!(shifted.contains_key(&(dir, size)), "{shifted:?} {paths:?}");
        }
    }
}

/// `fill` of one view of a random array of `base`, sliced and (optionally) permuted, which must
/// keep more than 8 axes after merging; the elements outside the view must keep their values.
fn fill_case<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    seed: u64,
    base: &[usize],
    slice: &[SliceInfoElem],
    perm: Option<&[usize]>,
    paths: &mut Paths,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let host = random::<T>(&mut rng, base);
    let value = *random::<T>(&mut rng, &[1]).first().unwrap();
    let mut dev = DeviceArray::from_host(stream, &host.view()).unwrap();
    let mut expect = host.clone();
    expect.slice_mut(slice_info(slice)).fill(value);
    let what = format!(
        "seed {seed}: fill {} of {base:?} sliced {} permuted {perm:?}",
        T::DTYPE,
        show_slice(slice)
    );
    {
        let mut v = dev.view_mut().slice_move(slice_info(slice));
        if let Some(p) = perm {
            v = v.permuted_axes(IxDyn(p));
        }
        let what = format!("{what} (shape {:?}, strides {:?})", v.shape(), v.strides());
        let merged = merged_axes(v.shape(), &[v.strides()]);
        assert!(merged > 8, "{what}: test construction, {merged} axes");
        let path = fill_path(&v);
        assert!(!path.starts_with("error"), "{what}: {path}");
        *paths.entry(path).or_default() += 1;
        v.fill_on(stream, value)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    let got = dev.to_host_on(stream).unwrap();
    assert_same(&got.view(), &expect.view(), &what);
}

/// Fills of views of ranks 10 to 40 that keep more than 8 axes after merging: the first two of
/// three elements of every axis, every other element of axes of 4, every other element
/// backwards, the first and last of four, extent-1 axes between them, permuted views.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fill_of_views_of_more_than_8_merged_axes() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let seed = |i| case_seed(0xa14, i);
    // [3]^12, `..2` of every axis.
    let b = vec![3; 12];
    let first_two = vec![step(0, Some(2), 1); 12];
    fill_case::<u8>(&stream, seed(1), &b, &first_two, None, &mut paths);
    fill_case::<f64>(&stream, seed(2), &b, &first_two, None, &mut paths);
    // Rank 20: 13 axes of 3 (`..2`) with 7 extent-1 axes among them.
    let b: Vec<usize> = (0..20).map(|i| if i % 3 == 1 { 1 } else { 3 }).collect();
    let sl: Vec<SliceInfoElem> = b
        .iter()
        .map(|&n| step(0, (n == 3).then_some(2), 1))
        .collect();
    fill_case::<f32>(&stream, seed(3), &b, &sl, None, &mut paths);
    // Rank 40: 14 axes of 3, every other element backwards, among 26 extent-1 axes.
    let b: Vec<usize> = (0..40).map(|i| if i % 3 == 0 { 3 } else { 1 }).collect();
    let sl: Vec<SliceInfoElem> = b
        .iter()
        .map(|&n| {
            if n == 3 {
                step(0, None, -2)
            } else {
                step(0, None, 1)
            }
        })
        .collect();
    fill_case::<f16>(&stream, seed(4), &b, &sl, None, &mut paths);
    // [4]^10, every other element, permuted (reversed, then at random).
    let b = vec![4; 10];
    let sl = vec![step(0, None, 2); 10];
    fill_case::<f64>(&stream, seed(5), &b, &sl, Some(&reversed(10)), &mut paths);
    let mut rng = StdRng::seed_from_u64(seed(6));
    let p = random_perm(&mut rng, 10);
    fill_case::<u8>(&stream, seed(6), &b, &sl, Some(&p), &mut paths);
    // Axes of 3 and 4 in turn, `..2` and `..;3`; a reversed one of 5.
    let mut b: Vec<usize> = (0..12).map(|i| if i % 2 == 0 { 3 } else { 4 }).collect();
    let mut sl: Vec<SliceInfoElem> = b
        .iter()
        .map(|&n| {
            if n == 3 {
                step(0, Some(2), 1)
            } else {
                step(0, None, 3)
            }
        })
        .collect();
    b.push(5);
    sl.push(step(0, Some(4), -1));
    fill_case::<f16>(&stream, seed(7), &b, &sl, None, &mut paths);
    fill_case::<f32>(&stream, seed(8), &b, &sl, Some(&cyclic(13)), &mut paths);
    println!("fills: paths {paths:?}");
}

/// A random slicing of `base` that keeps every extent of 2 (whole or reversed; longer axes as
/// [`random_slicing`] slices them), and a random permutation.
fn host_layout(rng: &mut StdRng, base: &[usize]) -> (Vec<SliceInfoElem>, Vec<usize>) {
    let slice = random_slicing(rng, base)
        .into_iter()
        .zip(base)
        .map(|(e, &n)| match e {
            SliceInfoElem::Slice { step: s, .. } if n <= 2 => step(0, None, s.signum()),
            e => e,
        })
        .collect();
    (slice, random_perm(rng, base.len()))
}

/// Shapes of ranks 12 to 24 for the transfers: small extents, at most 2^17 elements.
fn transfer_shapes() -> Vec<Vec<usize>> {
    vec![
        vec![2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3],
        vec![2; 16],
        vec![3, 2, 1, 2, 4, 2, 2, 3, 2, 2, 1, 2, 5, 2],
        vec![
            2, 2, 1, 2, 2, 2, 1, 2, 2, 2, 2, 1, 2, 2, 2, 1, 2, 2, 2, 1, 2, 2, 1, 2,
        ],
    ]
}

/// `from_host`, `to_host`, `copy_from_host` and `copy_to_host` between permuted, sliced host
/// views and permuted, sliced device views of ranks 12 to 24 that keep more than 8 axes after
/// merging; the elements outside a destination view must keep their poison.
fn transfer_cases<T: DeviceElement>(stream: &Arc<CudaStream>, test: u64, paths: &mut Paths) {
    let size = std::mem::size_of::<T>();
    for (k, base) in transfer_shapes().into_iter().enumerate() {
        let seed = case_seed(test, k);
        let mut rng = StdRng::seed_from_u64(seed);
        let host = random::<T>(&mut rng, &base);
        // A host view and a device destination whose layouts do not merge: drawn again until
        // they do not.
        let mut tries = 0;
        let (hsl, hperm, dst) = loop {
            let (hsl, hperm) = host_layout(&mut rng, &base);
            let hv = host
                .view()
                .slice_move(slice_info(&hsl))
                .permuted_axes(hperm.clone());
            let dst = Dst::random(&mut rng, hv.shape());
            let dstrides = Layout::contiguous(IxDyn(&dst.base)).strides().to_vec();
            let ds = dst.perm.iter().map(|&a| dstrides[a]).collect::<Vec<_>>();
            let contiguous = Layout::contiguous(IxDyn(hv.shape())).strides().to_vec();
            let m1 = merged_axes(hv.shape(), &[&contiguous, hv.strides()]);
            let m2 = merged_axes(hv.shape(), &[&ds, hv.strides()]);
            if m1 > 8 && m2 > 8 {
                break (hsl, hperm, dst);
            }
            tries += 1;
            assert!(
                tries < 50,
                "seed {seed}: no layout of {base:?} stays above 8 axes"
            );
        };
        let hv = host
            .view()
            .slice_move(slice_info(&hsl))
            .permuted_axes(hperm.clone());
        let shape = hv.shape().to_vec();
        let contiguous = Layout::contiguous(IxDyn(&shape)).strides().to_vec();
        let what = |op: &str, dev_strides: &[isize]| {
            format!(
                "seed {seed}: {op} {}, host {base:?} sliced {} permuted {hperm:?} (shape {shape:?}, strides {:?}); device strides {dev_strides:?}",
                T::DTYPE,
                show_slice(&hsl),
                hv.strides()
            )
        };
        let mut count = |path: String, what: &str| {
            assert!(!path.starts_with("error"), "{what}: {path}");
            *paths.entry(path).or_default() += 1;
        };

        // from_host of the host view, then to_host.
        let w = what("from_host", &contiguous);
        count(
            transfer_path(&shape, hv.strides(), &contiguous, size, true),
            &w,
        );
        let dev = DeviceArray::from_host(stream, &hv).unwrap_or_else(|e| panic!("{w}: {e}"));
        let got = dev.to_host_on(stream).unwrap();
        assert_same(&got.view(), &hv.view(), &w);

        // to_host of a device view laid out as the host view.
        let whole = DeviceArray::from_host(stream, &host.view()).unwrap();
        let dv = whole
            .view()
            .slice_move(slice_info(&hsl))
            .permuted_axes(IxDyn(&hperm));
        let w = what("to_host", dv.strides());
        count(
            transfer_path(&shape, &contiguous, dv.strides(), size, false),
            &w,
        );
        let got = dv.to_host_on(stream).unwrap_or_else(|e| panic!("{w}: {e}"));
        assert_same(&got.view(), &hv.view(), &w);

        // copy_from_host into a strided view of a poisoned device array.
        let poison = random::<T>(&mut rng, &dst.base);
        let mut out = DeviceArray::from_host(stream, &poison.view()).unwrap();
        let mut expect = poison.clone();
        expect
            .view_mut()
            .slice_move(slice_info(&dst.slice))
            .permuted_axes(dst.perm.clone())
            .assign(&hv);
        {
            let mut ov = out
                .view_mut()
                .slice_move(slice_info(&dst.slice))
                .permuted_axes(IxDyn(&dst.perm));
            let w = format!(
                "{}, destination {}",
                what("copy_from_host", ov.strides()),
                dst.show()
            );
            count(
                transfer_path(&shape, hv.strides(), ov.strides(), size, true),
                &w,
            );
            ov.copy_from_host_on(stream, &hv)
                .unwrap_or_else(|e| panic!("{w}: {e}"));
        }
        let got = out.to_host_on(stream).unwrap();
        assert_same(&got.view(), &expect.view(), &what("copy_from_host", &[]));

        // copy_to_host from the strided device view into the host layout of a poisoned array.
        let hbase = random::<T>(&mut rng, &base);
        let mut hout = hbase.clone();
        let mut expect = hbase.clone();
        let ov = out
            .view()
            .slice_move(slice_info(&dst.slice))
            .permuted_axes(IxDyn(&dst.perm));
        expect
            .view_mut()
            .slice_move(slice_info(&hsl))
            .permuted_axes(hperm.clone())
            .assign(&hv);
        {
            let mut hview = hout
                .view_mut()
                .slice_move(slice_info(&hsl))
                .permuted_axes(hperm.clone());
            let w = what("copy_to_host", ov.strides());
            count(
                transfer_path(&shape, hview.strides(), ov.strides(), size, false),
                &w,
            );
            ov.copy_to_host_on(stream, &mut hview)
                .unwrap_or_else(|e| panic!("{w}: {e}"));
        }
        assert_same(
            &hout.view(),
            &expect.view(),
            &what("copy_to_host", ov.strides()),
        );
    }
}

/// Host <-> device transfers of ranks 12 to 24 whose layouts keep more than 8 axes after
/// merging on both sides, every element size.
#[test]
#[ignore = "needs a CUDA GPU"]
fn transfers_of_high_rank_layouts() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    transfer_cases::<u8>(&stream, 0xa15, &mut paths);
    transfer_cases::<f16>(&stream, 0xa16, &mut paths);
    transfer_cases::<f32>(&stream, 0xa17, &mut paths);
    transfer_cases::<f64>(&stream, 0xa18, &mut paths);
    println!("transfers: paths {paths:?}");
}

/// Exports a view of rank 22 that keeps more than 8 axes after merging through DLPack (a
/// versioned and a legacy tensor), imports it again and copies from it into a strided
/// destination.
fn dlpack_case<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    seed: u64,
    legacy: bool,
    paths: &mut Paths,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let base: Vec<usize> = (0..22).map(|i| [2, 2, 3, 1][i % 4]).collect();
    let host = random::<T>(&mut rng, &base);
    let slice: Vec<SliceInfoElem> = base
        .iter()
        .enumerate()
        .map(|(i, &n)| match (n, i % 3) {
            (3, _) => step(0, None, -2),
            (_, 0) => step(0, None, -1),
            _ => step(0, None, 1),
        })
        .collect();
    let perm = random_perm(&mut rng, base.len());
    let hv = host
        .view()
        .slice_move(slice_info(&slice))
        .permuted_axes(perm.clone());
    let what = format!(
        "seed {seed}: DLPack ({}) {} of {base:?} sliced {} permuted {perm:?}",
        if legacy { "legacy" } else { "versioned" },
        T::DTYPE,
        show_slice(&slice)
    );
    let a = DeviceArray::from_host(stream, &host.view()).unwrap();
    // SAFETY: a fresh managed tensor from `into_dlpack`, handed over once.
    let t = unsafe { DlpackTensor::from_versioned(a.into_dlpack().unwrap()) }.unwrap();
    let whole = t.into_view::<T, IxDyn>().unwrap();
    let v = whole
        .slice_move(slice_info(&slice))
        .permuted_axes(IxDyn(&perm));
    let (shape, strides) = (v.shape().to_vec(), v.strides().to_vec());
    let merged = merged_axes(&shape, &[&strides]);
    assert!(merged > 8, "{what}: test construction, {merged} axes");
    // SAFETY: fresh managed tensors from `into_dlpack*`, each handed over once.
    let t = unsafe {
        if legacy {
            DlpackTensor::from_legacy(v.into_dlpack_legacy())
        } else {
            DlpackTensor::from_versioned(v.into_dlpack())
        }
    }
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(t.shape(), &shape[..], "{what}: shape");
    for (a, (&got, &want)) in t.strides().iter().zip(&strides).enumerate() {
        if shape[a] > 1 {
            assert_eq!(got, want, "{what}: stride of axis {a}");
        }
    }
    let imported = t.into_view::<T, IxDyn>().unwrap();
    let dst = Dst::random(&mut rng, &shape);
    let poison = random::<T>(&mut rng, &dst.base);
    let mut out = DeviceArray::from_host(stream, &poison.view()).unwrap();
    let mut expect = poison.clone();
    expect
        .view_mut()
        .slice_move(slice_info(&dst.slice))
        .permuted_axes(dst.perm.clone())
        .assign(&hv);
    {
        let mut ov = out
            .view_mut()
            .slice_move(slice_info(&dst.slice))
            .permuted_axes(IxDyn(&dst.perm));
        let what = format!("{what}, destination {}", dst.show());
        let path = assign(stream, &mut ov, &imported).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(!path.starts_with("error"), "{what}: {path}");
        *paths.entry(path).or_default() += 1;
    }
    let got = out.to_host_on(stream).unwrap();
    assert_same(&got.view(), &expect.view(), &what);
    // Read back through the import as well.
    let back = imported.to_host_on(stream).unwrap();
    assert_same(&back.view(), &hv.view(), &format!("{what}, read back"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dlpack_round_trip_of_a_rank_22_view() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    dlpack_case::<f32>(&stream, case_seed(0xa19, 1), false, &mut paths);
    dlpack_case::<u8>(&stream, case_seed(0xa19, 2), false, &mut paths);
    dlpack_case::<f16>(&stream, case_seed(0xa19, 3), true, &mut paths);
    println!("DLPack: paths {paths:?}");
}

/// `to_shape` of permuted views of ranks 16 to 30 into fewer axes, in row- and column-major
/// order (copies, but for the reversed view read in column-major order), against ndarray's
/// `to_shape`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn to_shape_of_high_rank_permuted_views() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let cases: Vec<Vec<usize>> = vec![
        vec![2; 16],
        vec![2, 3, 2, 2, 3, 2, 2, 3, 2, 2, 3, 2, 1, 2, 2, 3, 2, 2],
        (0..30).map(|i| [2, 1, 2, 3, 1][i % 5]).collect(),
    ];
    for (k, base) in cases.into_iter().enumerate() {
        let seed = case_seed(0xa1a, k);
        let mut rng = StdRng::seed_from_u64(seed);
        let host = random::<f32>(&mut rng, &base);
        let dev = DeviceArray::from_host(&stream, &host.view()).unwrap();
        let perm = if k == 0 {
            reversed(base.len())
        } else {
            random_perm(&mut rng, base.len())
        };
        let hp = host.view().permuted_axes(perm.clone());
        let dp = dev.view().permuted_axes(IxDyn(&perm));
        let n = hp.len();
        let inner: usize = hp.shape()[hp.ndim() / 2..].iter().product();
        for (new, order) in [
            (vec![n], Order::RowMajor),
            (vec![n / inner, inner], Order::RowMajor),
            (vec![n / inner, inner], Order::ColumnMajor),
        ] {
            let what = format!(
                "seed {seed}: to_shape({new:?}, {order:?}) of f32 {base:?} permuted {perm:?} (strides {:?})",
                dp.strides()
            );
            {
                let mut o = DeviceArray::<f32, _>::zeros(&stream, IxDyn(hp.shape())).unwrap();
                let path = copy_path(&mut o.view_mut(), &dp);
                assert!(!path.starts_with("error"), "{what}: {path}");
                *paths.entry(path).or_default() += 1;
            }
            let got = dp
                .to_shape_on(&stream, (IxDyn(&new), order))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            if new.len() == 1 && order == Order::RowMajor {
                assert!(got.is_owned(), "{what}: expected a copy");
            }
            let got = got.to_host_on(&stream).unwrap();
            let expect = hp.to_shape((IxDyn(&new), order)).unwrap();
            assert_same(&got.view(), &expect.view(), &what);
        }
    }
    println!("to_shape: paths {paths:?}");
}

/// A u8 view of 3 rows 2^30 + 64 bytes apart (the first bytes of the rows of a 3 GiB array,
/// 2^31 + 128 bytes from the first row's first byte to the last row's), each row's 1024 bytes
/// split into ten axes of 2 and reversed, the rows kept outermost: 11 axes after merging, so a
/// tiled plan, whose tiles hold each row's 1024 bytes but leave the rows out (a tile across
/// them would reach 2^31 bytes). Copied with `assign` into a poisoned array and with
/// `to_contiguous`, compared with ndarray.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tiles_leave_out_axes_2_pow_31_bytes_across() {
    if !unless_sanitized("a 3 GiB array") {
        return;
    }
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let seed = case_seed(0xa1c, 0);
    let mut rng = StdRng::seed_from_u64(seed);
    let m = (1usize << 30) + 64;
    let mut big = DeviceArray::<u8, _>::zeros(&stream, IxDyn(&[3, m])).unwrap();
    let rows = random::<u8>(&mut rng, &[3, 1024]);
    let used = |n: usize| slice_info(&[step(0, None, 1), step(0, Some(n as isize), 1)]);
    big.view_mut()
        .slice_move(used(1024))
        .copy_from_host_on(&stream, &rows.view())
        .unwrap();
    let mut shape = vec![3];
    shape.extend([2; 10]);
    let mut perm = vec![0];
    perm.extend((1..=10).rev());
    let src = big
        .view()
        .slice_move(used(1024))
        .into_shape_with_order(IxDyn(&shape))
        .unwrap()
        .permuted_axes(IxDyn(&perm));
    assert_eq!(src.strides()[0], m as isize);
    let expect = rows
        .view()
        .into_shape_with_order(IxDyn(&shape))
        .unwrap()
        .permuted_axes(IxDyn(&perm))
        .as_standard_layout()
        .into_owned();
    let what = format!("seed {seed}: u8 rows {m} bytes apart, [3, 2^10] permuted {perm:?}");
    let poison = random::<u8>(&mut rng, expect.shape());
    let mut out = DeviceArray::from_host(&stream, &poison.view()).unwrap();
    let path = {
        let mut o = out.view_mut();
        assign(&stream, &mut o, &src).unwrap_or_else(|e| panic!("{what}: {e}"))
    };
    assert!(path.starts_with("tiled"), "{what}: path {path}");
    let got = out.to_host_on(&stream).unwrap();
    assert_same(&got.view(), &expect.view(), &format!("{what}, path {path}"));
    let got = src
        .to_contiguous_on(&stream)
        .unwrap_or_else(|e| panic!("{what}: to_contiguous: {e}"))
        .to_host_on(&stream)
        .unwrap();
    assert_same(
        &got.view(),
        &expect.view(),
        &format!("{what}: to_contiguous"),
    );
    println!("rows 2^30 + 64 bytes apart: {path}");
}

/// Two u8 arrays of [2, 2^31 + 64] bytes, a view of each in [c, x, m] order: the source's
/// strides [1, 2^31 + 64, 2] (pairs of channels, two rows 2^31 + 64 bytes apart), the
/// destination's [2^31 + 64, 1, 2] (the same pairs with the roles of c and x swapped). Each
/// operand's fastest axis lies more than 2^31 elements apart in the other, so no tile can
/// take either whole: the tiled plan takes one apart (a launch per index). Every element
/// checked, the bytes around them keep their poison.
#[test]
#[ignore = "needs a CUDA GPU"]
fn axes_2_pow_31_elements_apart_on_both_sides() {
    if !unless_sanitized("two 4 GiB arrays") {
        return;
    }
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let seed = case_seed(0xa1e, 0);
    let mut rng = StdRng::seed_from_u64(seed);
    let far = (1usize << 31) + 64;
    let m = 1usize << 20;
    let used = |n: usize| slice_info(&[step(0, None, 1), step(0, Some(n as isize), 1)]);
    let rows = random::<u8>(&mut rng, &[2, 2 * m + 64]);
    let mut a = DeviceArray::<u8, _>::zeros(&stream, IxDyn(&[2, far])).unwrap();
    a.view_mut()
        .slice_move(used(2 * m + 64))
        .copy_from_host_on(&stream, &rows.view())
        .unwrap();
    let poison = random::<u8>(&mut rng, &[2, 2 * m + 64]);
    let mut b = DeviceArray::<u8, _>::zeros(&stream, IxDyn(&[2, far])).unwrap();
    b.view_mut()
        .slice_move(used(2 * m + 64))
        .copy_from_host_on(&stream, &poison.view())
        .unwrap();
    // [x, m, c] -> [c, x, m]: strides [1, far, 2].
    let src = a
        .view()
        .slice_move(used(2 * m))
        .into_shape_with_order(IxDyn(&[2, m, 2]))
        .unwrap()
        .permuted_axes(IxDyn(&[2, 0, 1]));
    assert_eq!(src.strides(), &[1, far as isize, 2]);
    let what = format!("seed {seed}: u8 [2, 2, {m}], strides [1, {far}, 2] -> [{far}, 1, 2]");
    let path = {
        // [c, m, x] -> [c, x, m]: strides [far, 1, 2].
        let mut dst = b
            .view_mut()
            .slice_move(used(2 * m))
            .into_shape_with_order(IxDyn(&[2, m, 2]))
            .unwrap()
            .permuted_axes(IxDyn(&[0, 2, 1]));
        assert_eq!(dst.strides(), &[far as isize, 1, 2]);
        assign(&stream, &mut dst, &src).unwrap_or_else(|e| panic!("{what}: {e}"))
    };
    assert!(
        path.starts_with("tiled") && path.ends_with("+rest"),
        "{what}: path {path}"
    );
    let got = b
        .view()
        .slice_move(used(2 * m + 64))
        .to_host_on(&stream)
        .unwrap();
    for c in 0..2 {
        for x in 0..2 {
            for i in 0..m {
                // Source element (c, x, i) is byte c + 2 i of row x; destination (c, x, i)
                // is byte x + 2 i of row c.
                let (want, at) = (rows[[x, c + 2 * i]], [c, x + 2 * i]);
                assert_eq!(
                    got[at], want,
                    "{what}, path {path}: element ({c}, {x}, {i})"
                );
            }
        }
        for j in 2 * m..2 * m + 64 {
            assert_eq!(got[[c, j]], poison[[c, j]], "{what}: byte {j} of row {c}");
        }
    }
    println!("axes 2^31 elements apart on both sides: {path}");
}

/// A u8 copy of 2^31 + 6 elements (64-bit indexing): a split pair of 2^30 + 3 bytes each
/// interleaved ([2, n] -> [n, 2]) and split again, each destination poisoned with other random
/// bytes first; every element checked.
#[test]
#[ignore = "needs a CUDA GPU"]
fn u8_copy_of_more_than_2_pow_31_elements() {
    if !unless_sanitized("more than 2^31 elements") {
        return;
    }
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let seed = case_seed(0xa1b, 0);
    let mut rng = StdRng::seed_from_u64(seed);
    let n = (1usize << 30) + 3;
    let host = random::<u8>(&mut rng, &[2, n]);
    let src = DeviceArray::from_host(&stream, &host.view()).unwrap();
    let what = format!("seed {seed}: u8 [2, {n}] permuted [1, 0]");
    // The destination poisoned with the source's bytes in their own order, which differ from
    // the interleaved ones almost everywhere.
    let mut inter = DeviceArray::<u8, _>::zeros(&stream, IxDyn(&[n, 2])).unwrap();
    inter
        .view_mut()
        .assign_on(
            &stream,
            &src.view().into_shape_with_order(IxDyn(&[n, 2])).unwrap(),
        )
        .unwrap();
    let path = {
        let mut o = inter.view_mut();
        let s = src.view().permuted_axes(IxDyn(&[1, 0]));
        assign(&stream, &mut o, &s).unwrap_or_else(|e| panic!("{what}: {e}"))
    };
    assert!(!path.starts_with("error"), "{what}: {path}");
    println!("more than 2^31 elements: interleave took {path}");
    {
        let got = inter.to_host_on(&stream).unwrap();
        let g = got.as_slice().unwrap();
        let s = host.as_slice().unwrap();
        let (s0, s1) = s.split_at(n);
        let bad: Vec<usize> = g
            .chunks_exact(2)
            .zip(s0.iter().zip(s1))
            .enumerate()
            .filter(|(_, (pair, (a, b)))| pair[0] != **a || pair[1] != **b)
            .map(|(i, _)| i)
            .take(5)
            .collect();
        assert!(bad.is_empty(), "{what}: rows differ, first: {bad:?}");
    }
    // And back: [n, 2] -> [2, n], poisoned with the interleaved bytes in their own order.
    let mut split = DeviceArray::<u8, _>::zeros(&stream, IxDyn(&[2, n])).unwrap();
    split
        .view_mut()
        .assign_on(
            &stream,
            &inter.view().into_shape_with_order(IxDyn(&[2, n])).unwrap(),
        )
        .unwrap();
    let what = format!("seed {seed}: u8 [{n}, 2] permuted [1, 0]");
    let path = {
        let mut o = split.view_mut();
        let s = inter.view().permuted_axes(IxDyn(&[1, 0]));
        assign(&stream, &mut o, &s).unwrap_or_else(|e| panic!("{what}: {e}"))
    };
    assert!(!path.starts_with("error"), "{what}: {path}");
    println!("more than 2^31 elements: split took {path}");
    let got = split.to_host_on(&stream).unwrap();
    if got.as_slice() != host.as_slice() {
        let first: Vec<usize> = got
            .iter()
            .zip(host.iter())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, _)| i)
            .take(5)
            .collect();
        panic!("{what}: elements differ, first (flat): {first:?}");
    }
}

/// splitmix64 of `x`: the value of source element `x` in [`state_vector_case`].
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A [2]^n state vector of `T` (element `i` holds `value(mix(i ^ seed))`) permuted by each of
/// `perms` into a contiguous array poisoned with the source in its own order; every element
/// checked (on all cores) against the source element that its bits name. Returns the paths.
fn state_vector_cases<T: DeviceElement + PartialEq + std::fmt::Debug + Sync>(
    stream: &Arc<CudaStream>,
    n: usize,
    perms: &[Vec<usize>],
    seed: u64,
    value: fn(u64) -> T,
) -> Vec<String> {
    let len = 1usize << n;
    let host: Vec<T> = (0..len as u64).map(|i| value(mix(i ^ seed))).collect();
    let shape = vec![2usize; n];
    let host = ndarray::Array::from_shape_vec(IxDyn(&shape), host).unwrap();
    let src = DeviceArray::from_host(stream, &host.view()).unwrap();
    let h = host.as_slice().unwrap();
    let mut out = DeviceArray::<T, _>::zeros(stream, IxDyn(&shape)).unwrap();
    let mut paths = Vec::new();
    for perm in perms {
        out.view_mut().assign_on(stream, &src.view()).unwrap();
        let what = format!("seed {seed}: {} [2]^{n} permuted {perm:?}", T::DTYPE);
        let path = {
            let mut o = out.view_mut();
            let s = src.view().permuted_axes(IxDyn(perm));
            assign(stream, &mut o, &s).unwrap_or_else(|e| panic!("{what}: {e}"))
        };
        let got = out.to_host_on(stream).unwrap();
        // Destination element j: bit n-1-k of j is its index along destination axis k,
        // source axis perm[k], whose stride is 2^(n-1-perm[k]). One table per byte of j.
        let tables: Vec<Vec<usize>> = (0..n.div_ceil(8))
            .map(|b| {
                (0..256usize)
                    .map(|v| {
                        (0..8)
                            .filter(|t| v >> t & 1 == 1 && 8 * b + t < n)
                            .map(|t| 1usize << (n - 1 - perm[n - 1 - (8 * b + t)]))
                            .sum()
                    })
                    .collect()
            })
            .collect();
        let g = got.as_slice().unwrap();
        let workers = std::thread::available_parallelism().map_or(4, |c| c.get());
        let chunk = len.div_ceil(workers);
        let first_bad = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let tables = &tables;
                    sc.spawn(move || {
                        let lo = (w * chunk).min(len);
                        let hi = ((w + 1) * chunk).min(len);
                        (lo..hi).find(|&j| {
                            let i: usize = tables
                                .iter()
                                .enumerate()
                                .map(|(b, t)| t[(j >> (8 * b)) & 255])
                                .sum();
                            g[j] != h[i]
                        })
                    })
                })
                .collect();
            handles.into_iter().filter_map(|t| t.join().unwrap()).min()
        });
        assert!(
            first_bad.is_none(),
            "{what}, path {path}: element {first_bad:?} differs"
        );
        paths.push(path);
    }
    paths
}

/// State vectors of 4 GiB ([2]^29 of 8 bytes, [2]^30 of 4, [2]^31 of 2) permuted by qubit:
/// reversed, cyclic, a random permutation and two pairs of axes swapped. Their tiles span more
/// than 2^31 bytes of one operand; each takes the tiled or narrow kernels.
#[test]
#[ignore = "needs a CUDA GPU"]
fn state_vectors_of_4_gib_permuted_by_qubit() {
    if !unless_sanitized("4 GiB arrays") {
        return;
    }
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut rng = StdRng::seed_from_u64(case_seed(0xa1d, 0));
    for (index, n) in [29usize, 30, 31].into_iter().enumerate() {
        let mut random: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            random.swap(i, rng.random_range(0..=i));
        }
        let mut swapped: Vec<usize> = (0..n).collect();
        swapped.swap(0, n - 1);
        swapped.swap(3, n - 4);
        let perms = [
            (0..n).rev().collect::<Vec<_>>(),
            (0..n).map(|i| (i + 1) % n).collect(),
            random,
            swapped,
        ];
        let seed = case_seed(0xa1d, index);
        let taken = match n {
            29 => state_vector_cases::<u64>(&stream, n, &perms, seed, |x| x),
            30 => state_vector_cases::<u32>(&stream, n, &perms, seed, |x| x as u32),
            _ => state_vector_cases::<u16>(&stream, n, &perms, seed, |x| x as u16),
        };
        for (perm, path) in perms.iter().zip(taken) {
            assert!(
                path == "tiled" || path == "narrow",
                "seed {seed}: [2]^{n} permuted {perm:?}: path {path}"
            );
            *paths.entry(path).or_default() += 1;
        }
    }
    println!("state vectors of 4 GiB: paths {paths:?}");
}

/// Casts out of 2 to 4 channels last into planes (HWC -> CHW, NHWC -> NCHW) of 1024 pixels or
/// more take the gathered rows from 2- to 4-byte elements (f16, bf16, u16 -> f32), and from u8
/// to f32 where the tiled kernels would move them element by element; against ndarray, output
/// poisoned, into a standard-layout destination and a window of a larger one. Planes of 2^18
/// pixels run a row per plane over grid x (the planner's
/// `interleaved_gathered_rows_run_over_grid_x` pins that). Casts of 4 to 2 bytes keep the
/// tiled kernels.
#[test]
#[ignore = "needs a CUDA GPU"]
fn casts_out_of_channels_last_take_the_gathered_rows() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    let mut gathered = 0;
    let mut u8_gathered = 0;
    // (array, permutation out of channels last)
    let layouts: [(&[usize], &[usize]); 7] = [
        (&[64, 64, 3], &[2, 0, 1]),
        (&[33, 35, 3], &[2, 0, 1]),
        (&[41, 37, 2], &[2, 0, 1]),
        (&[2, 25, 45, 4], &[0, 3, 1, 2]),
        (&[512, 512, 3], &[2, 0, 1]),
        (&[31, 33, 3], &[2, 0, 1]),
        (&[40, 40, 5], &[2, 0, 1]),
    ];
    for (k, (base, perm)) in layouts.into_iter().enumerate() {
        let rank = base.len();
        let src = Src::permuted(base, perm.to_vec());
        let shape = src.shape();
        let channels = base[rank - 1];
        let pixels = base[rank - 3] * base[rank - 2];
        for (d, dst) in [Dst::contiguous(&shape), Dst::window(&shape)]
            .iter()
            .enumerate()
        {
            for which in 0..5 {
                index += 1;
                let seed = case_seed(0x5b1, index);
                let (p, s) = (&mut paths, &stream);
                let w = k + d + which;
                let (path, from, to) = match which {
                    0 => (cast_case::<f16, f32>(s, seed, w, &src, dst, p), 2, 4),
                    1 => (cast_case::<bf16, f32>(s, seed, w, &src, dst, p), 2, 4),
                    2 => (cast_case::<u16, f32>(s, seed, w, &src, dst, p), 2, 4),
                    3 => (cast_case::<u8, f32>(s, seed, w, &src, dst, p), 1, 4),
                    _ => (cast_case::<f32, f16>(s, seed, w, &src, dst, p), 4, 2),
                };
                let splits = (2..=4).contains(&channels) && pixels >= 1024;
                let what = format!("{} {from} -> {to} bytes: path {path}", src.show());
                match (from, to) {
                    (2, 4) => assert_eq!(path == "rows_gather", splits, "{what}"),
                    (1, 4) => {
                        assert!(splits || path != "rows_gather", "{what}");
                        u8_gathered += usize::from(path == "rows_gather");
                    }
                    _ => assert_ne!(path, "rows_gather", "{what}"),
                }
                gathered += usize::from(path == "rows_gather");
            }
        }
    }
    assert!(gathered >= 24, "{gathered} gathered cases");
    assert!(u8_gathered >= 1, "no u8 -> f32 case took the gathered rows");
    println!("casts out of channels last: paths {paths:?}");
}

/// Images of 16 to 48 channels of 1 MiB or more between planes and channels last, both
/// directions, aligned and odd-sized planes, copies and casts, whose layouts the permute
/// kernels' small tiles would take (the planner's
/// `images_of_many_channels_take_the_tiled_kernels_or_the_gathered_rows` pins the rules): none
/// takes them; into channels last the gathered rows take every one (4-byte copies, casts of 4
/// to 2 bytes of up to 32 channels and of 2 to 4 bytes of up to 16, and the odd-sized planes
/// that the tiled kernels would move element by element); out of channels last none. Against
/// ndarray, output poisoned, into a standard-layout destination and a window of a larger
/// one.
#[test]
#[ignore = "needs a CUDA GPU"]
fn images_of_many_channels_leave_the_small_tiles() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    // (planes: channels, height, width; element sizes)
    let images: [(&[usize], (usize, usize)); 8] = [
        (&[24, 211, 213], (1, 1)),
        (&[24, 151, 149], (2, 2)),
        (&[32, 91, 93], (4, 4)),
        (&[48, 64, 86], (4, 4)),
        (&[16, 129, 131], (1, 4)),
        (&[48, 73, 75], (2, 4)),
        (&[16, 131, 129], (2, 4)),
        (&[32, 79, 107], (4, 2)),
    ];
    for (k, (planes, (from, to))) in images.into_iter().enumerate() {
        let last = [planes[1], planes[2], planes[0]];
        for (join, src) in [
            (true, Src::permuted(planes, vec![1, 2, 0])),
            (false, Src::permuted(&last, vec![2, 0, 1])),
        ] {
            let shape = src.shape();
            for (d, dst) in [Dst::contiguous(&shape), Dst::window(&shape)]
                .iter()
                .enumerate()
            {
                index += 1;
                let seed = case_seed(0x16c, index);
                let (p, s, w) = (&mut paths, &stream, k + d);
                let path = match (from, to) {
                    (1, 1) | (2, 2) | (4, 4) => sized_case(from, s, seed, w, &src, dst, p),
                    (1, 4) => cast_case::<u8, f32>(s, seed, w, &src, dst, p),
                    (2, 4) => cast_case::<f16, f32>(s, seed, w, &src, dst, p),
                    _ => cast_case::<f32, f16>(s, seed, w, &src, dst, p),
                };
                let what = format!("{} {from} -> {to} bytes: path {path}", src.show());
                assert_ne!(path, "permute32", "{what}");
                assert_eq!(path == "rows_gather", join, "{what}");
            }
        }
    }
    println!("images of many channels: paths {paths:?}");
}

/// One case under every steering, each from the same seed (the same data and poison), each
/// against the reference; the paths are counted per steering.
fn every_steering<F: DeviceElement, T: DeviceElement>(
    stream: &Arc<CudaStream>,
    seed: u64,
    src: &Src,
    dst: &Dst,
    by_steer: &mut BTreeMap<String, Paths>,
) -> Vec<String> {
    [
        Steer::Default,
        Steer::NoTiled,
        Steer::PreferTiled,
        Steer::PreferGather,
        Steer::ShiftedRows,
    ]
    .into_iter()
    .map(|steer| {
        let op = format!("assign_cast_steered({steer:?})");
        let case = Case {
            seed,
            op: &op,
            src,
            dst,
        };
        let paths = by_steer.entry(format!("{steer:?}")).or_default();
        run_case::<F, T>(
            stream,
            &case,
            Op::Into(&|o, s| assign_cast_steered(o, stream, s, steer)),
            paths,
        )
    })
    .collect()
}

/// `Steer::Default`, `Steer::NoTiled`, `Steer::PreferTiled`, `Steer::PreferGather` and
/// `Steer::ShiftedRows` give the same, correct result on narrow layouts and on layouts of more
/// than 8 axes after merging.
/// `NoTiled` keeps the tiled kernels off the narrow ones (which other kernels take);
/// `PreferTiled` takes them to the tiled kernels, `PreferGather` those into interleaved channels
/// to the gathered rows.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_steering_gives_the_same_result() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut by_steer: BTreeMap<String, Paths> = BTreeMap::new();
    let mut index = 0;
    let mut next = || {
        index += 1;
        case_seed(0xa1c, index)
    };
    // Narrow layouts: for each, the paths under Default, NoTiled and PreferTiled.
    let mut narrow = Vec::new();
    {
        let c = |base: &[usize], perm: &[usize]| Src::permuted(base, perm.to_vec());
        let chw = c(&[3, 37, 61], &[1, 2, 0]);
        let hwc = c(&[256, 256, 4], &[2, 0, 1]);
        let split = c(&[2, 65_537], &[1, 0]);
        let inter = c(&[1000, 2], &[1, 0]);
        let nchw = c(&[2, 3, 37, 61], &[0, 2, 3, 1]);
        let nhwc = c(&[5, 64, 64, 4], &[0, 3, 1, 2]);
        let by = &mut by_steer;
        let s = &stream;
        let d = |src: &Src| Dst::contiguous(&src.shape());
        narrow.push(every_steering::<u8, u8>(s, next(), &chw, &d(&chw), by));
        narrow.push(every_steering::<f32, f32>(s, next(), &chw, &d(&chw), by));
        narrow.push(every_steering::<f16, f16>(s, next(), &hwc, &d(&hwc), by));
        narrow.push(every_steering::<f32, f16>(s, next(), &hwc, &d(&hwc), by));
        narrow.push(every_steering::<f32, f32>(
            s,
            next(),
            &split,
            &d(&split),
            by,
        ));
        narrow.push(every_steering::<f64, f64>(
            s,
            next(),
            &inter,
            &d(&inter),
            by,
        ));
        narrow.push(every_steering::<u8, u8>(s, next(), &nchw, &d(&nchw), by));
        narrow.push(every_steering::<u8, f32>(s, next(), &nhwc, &d(&nhwc), by));
        let padded = Dst::padded(&chw.shape());
        narrow.push(every_steering::<f16, f16>(s, next(), &chw, &padded, by));
        // Planes split out of channels last whose gathered rows interleave in the source and
        // run over grid x (`rows_first`, pinned by the planner's
        // `interleaved_gathered_rows_run_over_grid_x`): planes of 2^18 pixels, a row each, and
        // planes whose rows lie apart, a row per image row.
        let large = c(&[512, 512, 3], &[2, 0, 1]);
        narrow.push(every_steering::<u8, f32>(s, next(), &large, &d(&large), by));
        let apart = Dst::padded(&hwc.shape());
        narrow.push(every_steering::<f16, f32>(s, next(), &hwc, &apart, by));
        let nhwc_large = c(&[2, 512, 512, 3], &[0, 3, 1, 2]);
        narrow.push(every_steering::<f32, f32>(
            s,
            next(),
            &nhwc_large,
            &d(&nhwc_large),
            by,
        ));
        // Rows of 20 bytes written into a column slice: the strided kernel by default, the
        // shifted row kernel under ShiftedRows.
        let rows = c(&[300, 20], &[0, 1]);
        let slice = Dst::padded(&rows.shape());
        let paths = every_steering::<u8, u8>(s, next(), &rows, &slice, by);
        assert_eq!(
            paths[4], "rows_shifted",
            "rows of 20 bytes into a slice: {paths:?}"
        );
        narrow.push(paths);
    }
    // High ranks: random shapes and permutations, a sliced source, strided destinations.
    for (k, rank) in [12usize, 20, 33].into_iter().enumerate() {
        let seed = next();
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        let base = random_shape(&mut rng, rank, scaled(1 << 17, 1 << 10));
        let slice = if k == 1 {
            random_slicing(&mut rng, &base)
        } else {
            full(rank)
        };
        let src = Src {
            base,
            slice,
            broadcast: None,
            perm: if k == 0 {
                reversed(rank)
            } else {
                random_perm(&mut rng, rank)
            },
        };
        let contiguous = Dst::contiguous(&src.shape());
        let strided = Dst::random(&mut rng, &src.shape());
        let by = &mut by_steer;
        every_steering::<f32, f32>(&stream, seed, &src, &contiguous, by);
        every_steering::<u8, u8>(&stream, next(), &src, &strided, by);
        every_steering::<f16, f16>(&stream, next(), &src, &contiguous, by);
        every_steering::<f64, f64>(&stream, next(), &src, &strided, by);
        every_steering::<f32, f16>(&stream, next(), &src, &contiguous, by);
    }
    for (steer, paths) in &by_steer {
        println!("steering {steer}: paths {paths:?}");
    }
    for (i, paths) in narrow.iter().enumerate() {
        println!(
            "narrow case {i}: Default, NoTiled, PreferTiled, PreferGather, ShiftedRows took {paths:?}"
        );
        assert!(
            !paths[1].starts_with("tiled"),
            "narrow case {i}: NoTiled took {}",
            paths[1]
        );
    }
    assert!(
        narrow.iter().any(|p| p[2].starts_with("tiled")),
        "PreferTiled took no narrow case to the tiled kernels: {narrow:?}"
    );
    assert!(
        narrow.iter().any(|p| p[3] == "rows_gather"),
        "PreferGather took no narrow case to the gathered rows: {narrow:?}"
    );
}

/// Copies of runs of 2, 4 or 8 bytes contiguous on both sides (complex numbers as pairs of f32
/// or f16, pixels of 2 or 4 u8 channels) transposed, permuted, sliced and read backwards along
/// the other axes move the runs as elements of their size (a transpose of complex numbers is a
/// transpose, not the strided gather), and pixels of 3 channels moved whole take the tiled
/// kernels, for each same-type operation, against ndarray.
#[test]
#[ignore = "needs a CUDA GPU"]
fn runs_of_two_to_eight_bytes_move_as_wider_elements() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    // (array, permutation, the run's element size, slices of the other axes)
    let layouts: [(&[usize], Vec<usize>, usize, bool); 9] = [
        (&[600, 500, 2], vec![1, 0, 2], 4, false),
        (&[600, 500, 2], vec![1, 0, 2], 2, true),
        (&[500, 300, 4], vec![1, 0, 2], 1, false),
        (&[9, 70, 60, 2], vec![2, 0, 1, 3], 4, false),
        (&[130, 70, 2], vec![1, 0, 2], 1, true),
        (&[1 << 10, 1 << 9, 4], vec![1, 0, 2], 2, false),
        // Pixels of 3 channels.
        (&[512, 384, 3], vec![1, 0, 2], 1, false),
        (&[4, 130, 70, 3], vec![0, 2, 1, 3], 2, false),
        (&[300, 200, 3], vec![1, 0, 2], 4, true),
    ];
    for (base, perm, size, sliced) in layouts {
        let rank = base.len();
        let mut src = Src::permuted(base, perm);
        if sliced {
            src.slice[0] = step(1, None, -2);
            src.slice[1] = step(0, None, 3);
        }
        let dst = Dst::contiguous(&src.shape());
        for which in 0..4 {
            index += 1;
            let seed = case_seed(0xa7f, index);
            let p = &mut paths;
            let path = match size {
                1 => same_type_case::<u8>(&stream, seed, which, &src, &dst, p),
                2 => same_type_case::<f16>(&stream, seed, which, &src, &dst, p),
                _ => same_type_case::<f32>(&stream, seed, which, &src, &dst, p),
            };
            assert_ne!(path, "strided32", "{base:?} {} of {size} bytes", rank);
            if base[rank - 1] == 3 {
                assert!(path.starts_with("tiled"), "{base:?}: {path}");
            }
        }
    }
    println!("runs as wider elements: paths {paths:?}");
}

/// Views read backwards along their fastest axis (reversed vectors, images flipped
/// left-right, channels first or, as runs of 2 to 8 bytes or of 3 or 6 channels, last; flipped
/// both ways; views that start one element into their array, so that vectors are shifted out
/// of aligned blocks), and views whose runs of 2 to 4 channels are each read backwards (pairs
/// swapped, RGB <-> BGR, also upside down) take the reversed row kernels, for every element
/// size and each same-type operation, against ndarray.
#[test]
#[ignore = "needs a CUDA GPU"]
fn reversed_rows_take_the_reversed_row_kernel() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    // (array, axes read backwards, slice the fastest axis from element 1)
    let layouts: [(&[usize], &[usize], bool); 17] = [
        (&[1 << 16], &[0], false),
        (&[4099], &[0], true),
        (&[3, 40, 256], &[2], false),
        (&[3, 40, 257], &[2], true),
        (&[2, 3, 24, 64], &[2, 3], false),
        (&[5, 64, 4], &[1], false),
        (&[5, 64, 2], &[1], false),
        (&[5, 67, 3], &[1], false),
        (&[2, 3, 1001, 3], &[2], false),
        (&[7, 45, 3], &[0, 1], false),
        (&[5, 64, 6], &[1], false),
        // Runs in order, each reversed: pairs swapped, channels reversed, also upside down.
        (&[1 << 14, 2], &[1], false),
        (&[5, 67, 3], &[2], false),
        (&[3, 40, 64, 4], &[3], false),
        (&[7, 45, 3], &[0, 2], false),
        // Rows of thousands of pixels of 3 channels (teams of whole warps, which move groups of
        // three vectors through shared memory), rows 8193 bytes apart (of u8), so that their
        // source bytes lie at every offset from a 16-byte boundary.
        (&[6, 2731, 3], &[1], false),
        (&[6, 2731, 3], &[2], false),
    ];
    for (k, (base, flip, sliced)) in layouts.into_iter().enumerate() {
        let rank = base.len();
        let mut src = Src::permuted(base, (0..rank).collect());
        for &a in flip {
            src.slice[a] = step(0, None, -1);
        }
        if sliced {
            src.slice[rank - 1] = step(1, None, -1);
        }
        let dst = Dst::contiguous(&src.shape());
        for which in 0..4 {
            index += 1;
            let seed = case_seed(0xa7e, index);
            let p = &mut paths;
            // Every element size and every operation, over the four cases of a layout.
            let (path, size) = match (k + which) % 4 {
                0 => (same_type_case::<u8>(&stream, seed, which, &src, &dst, p), 1),
                1 => (
                    same_type_case::<f16>(&stream, seed, which, &src, &dst, p),
                    2,
                ),
                2 => (
                    same_type_case::<f32>(&stream, seed, which, &src, &dst, p),
                    4,
                ),
                _ => (
                    same_type_case::<f64>(&stream, seed, which, &src, &dst, p),
                    8,
                ),
            };
            // Channels last move as one element up to 8 bytes, runs of 3 or 6 channels as
            // runs of 3 elements of up to 8 bytes.
            // Runs of 2 to 4 channels each reversed, of at most 16 bytes; runs of 3 (of 3 or 6
            // channels) of 1- and 2-byte units.
            let c = base[rank - 1];
            let runs = flip.contains(&(rank - 1)) && !flip.contains(&(rank - 2));
            let (fits, want) = match c {
                3 if runs => (size <= 2, "runs_rev"),
                2 | 4 if runs => (c * size <= 16, "runs_rev"),
                3 | 6 if flip.contains(&(rank - 2)) => (c / 3 * size <= 2, "rows_rev3"),
                _ if flip == [1] => (c * size <= 8, "rows_rev"),
                _ => (true, "rows_rev"),
            };
            // Rows sliced from element 1 lie off each other's alignment (a pitch of 257
            // elements): 4- and 8-byte elements take the gathered rows where the destination
            // joins the rows.
            let want = if sliced && rank >= 2 && size >= 4 && want == "rows_rev" {
                "rows_gather"
            } else {
                want
            };
            if fits {
                assert_eq!(path, want, "{base:?} flip {flip:?}, {size} bytes");
            }
        }
    }
    println!("reversed rows: paths {paths:?}");
}

/// Copies of short rows (runs of `c` elements shorter than 256 bytes) of every element size,
/// against ndarray: runs in reversed order, each run reversed, a column slice `x[.., ..c]`
/// read (a source padded by one element per row) and written (a padded destination, its
/// spare elements keeping their poison). Rows that are whole 16-byte vectors take the row
/// kernels, the others the gathered rows (contiguous destination), the scattered rows (a
/// padded destination, 4- and 8-byte elements in rows of 24 bytes or more) or the strided
/// kernel (the other padded destinations).
#[test]
#[ignore = "needs a CUDA GPU"]
fn short_copied_rows_leave_the_row_kernels() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    for (size, c) in [
        (1usize, 17usize),
        (1, 48),
        (1, 100),
        (2, 9),
        (2, 24),
        (4, 3),
        (4, 5),
        (4, 7),
        (4, 12),
        (4, 33),
        (8, 3),
        (8, 6),
        (8, 15),
    ] {
        let whole = (c * size) % 16 == 0;
        let rows = 1000 + c;
        // (source, destination, path)
        let mut layouts = Vec::new();
        for axis in [0, 1] {
            let mut src = Src::permuted(&[rows, c], vec![0, 1]);
            src.slice[axis] = step(0, None, -1);
            let want = match (whole, axis) {
                (true, 0) => "rows",
                (true, _) => "rows_rev",
                _ => "rows_gather",
            };
            layouts.push((src, Dst::contiguous(&[rows, c]), want));
        }
        let mut read = Src::permuted(&[rows, c + 1], vec![0, 1]);
        read.slice[1] = step(0, Some(c as isize), 1);
        layouts.push((read, Dst::contiguous(&[rows, c]), "rows_gather"));
        // Written into a column slice: the scattered rows for 4- and 8-byte elements in rows
        // of 24 bytes or more, else the strided kernel.
        let written = Src::permuted(&[rows, c], vec![0, 1]);
        let into = if size >= 4 && c * size >= 24 {
            "rows_scatter"
        } else {
            "strided32"
        };
        layouts.push((written, Dst::padded(&[rows, c]), into));
        for (src, dst, want) in layouts {
            for which in 0..4 {
                index += 1;
                let seed = case_seed(0x5407, index);
                let path = sized_case(size, &stream, seed, which, &src, &dst, &mut paths);
                // `to_contiguous` and `cast` make their own destination: contiguous.
                let want = if which >= 2 && want == into {
                    path.as_str()
                } else {
                    want
                };
                assert_eq!(
                    path,
                    want,
                    "{} into {}, {size} bytes",
                    src.show(),
                    dst.show()
                );
            }
        }
    }
    println!("short rows: paths {paths:?}");
}

/// Copies of rows of 256 bytes or more of every element size whose two sides are off each
/// other's 16-byte alignment take the shifted row kernel (4- and 8-byte elements into a
/// contiguous destination the gathered rows, from a contiguous source the scattered rows),
/// against ndarray: a column slice
/// `x[.., a..a + c]` read (a source padded by one element per row, from element 0 or 1) and
/// written (a padded destination, its spare elements keeping their poison), and rows of `c`
/// elements in reversed order where they do not line up (those that do keep the row
/// kernel). Casts of rows out of phase (a column slice read or written, rows of an odd
/// length in reverse order) leave the row kernel: the gathered rows into a contiguous
/// destination, the strided kernel into a padded one.
#[test]
#[ignore = "needs a CUDA GPU"]
fn long_rows_off_alignment_take_the_shifted_row_kernel() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    for (size, c) in [
        (1usize, 300usize),
        (1, 512),
        (1, 1000),
        (1, 4095),
        (2, 200),
        (2, 513),
        (4, 65),
        (4, 250),
        (4, 1023),
        (8, 33),
        (8, 100),
    ] {
        let rows = 200 + c % 7;
        // (source, destination, path)
        let mut layouts = Vec::new();
        let mut rev = Src::permuted(&[rows, c], vec![0, 1]);
        rev.slice[0] = step(0, None, -1);
        // Rows in reverse order (source row q at element (rows - 1 - q) * c) line up with the
        // destination's where 2c elements and the last row's offset are whole vectors.
        let bytes = c * size;
        let in_phase = (2 * bytes) % 16 == 0 && ((rows - 1) * bytes) % 16 == 0;
        // Into a contiguous destination, rows of 4- and 8-byte elements that the row kernels
        // would shift take the gathered rows.
        let shifted = if size >= 4 {
            "rows_gather"
        } else {
            "rows_shifted"
        };
        let rev_path = if in_phase { "rows" } else { shifted };
        layouts.push((rev, Dst::contiguous(&[rows, c]), rev_path));
        for start in [0, 1] {
            let mut read = Src::permuted(&[rows, c + 1], vec![0, 1]);
            read.slice[1] = step(start, Some(start + c as isize), 1);
            layouts.push((read, Dst::contiguous(&[rows, c]), shifted));
        }
        // Written into a column slice: the scattered rows for 4- and 8-byte elements.
        let written = Src::permuted(&[rows, c], vec![0, 1]);
        let into = if size >= 4 {
            "rows_scatter"
        } else {
            "rows_shifted"
        };
        layouts.push((written, Dst::padded(&[rows, c]), into));
        for (src, dst, want) in layouts {
            for which in 0..4 {
                index += 1;
                let seed = case_seed(0x5417, index);
                let path = sized_case(size, &stream, seed, which, &src, &dst, &mut paths);
                // `to_contiguous` and `cast` make their own destination: contiguous (a
                // contiguous source then copies whole).
                if which < 2 || dst.show() == Dst::contiguous(&[rows, c]).show() {
                    assert_eq!(
                        path,
                        want,
                        "{} into {}, {size} bytes",
                        src.show(),
                        dst.show()
                    );
                }
            }
        }
    }
    // Casts: u8 -> f32 and f16 -> f32 of rows out of phase.
    for c in [17usize, 100, 255, 1000] {
        let rows = 150;
        let mut rev = Src::permuted(&[rows, c], vec![0, 1]);
        rev.slice[0] = step(0, None, -1);
        let mut read = Src::permuted(&[rows, c + 1], vec![0, 1]);
        read.slice[1] = step(0, Some(c as isize), 1);
        let written = Src::permuted(&[rows, c], vec![0, 1]);
        let contiguous = Dst::contiguous(&[rows, c]);
        // Rows in reverse order are in phase where `c` is a multiple of 4 (a pitch of -c
        // elements in the source, c in the destination); those of 1000 are long enough to
        // stay on the row kernel.
        let rev_path = if c % 4 == 0 && c >= 256 {
            "rows"
        } else {
            "rows_gather"
        };
        let layouts = [
            (rev, contiguous.clone(), rev_path),
            (read, contiguous.clone(), "rows_gather"),
            (written, Dst::padded(&[rows, c]), "strided32"),
        ];
        for (src, dst, want) in layouts {
            for from in [1usize, 2] {
                index += 1;
                let seed = case_seed(0x5417, index);
                let p = &mut paths;
                let s = &stream;
                let path = if from == 1 {
                    cast_case::<u8, f32>(s, seed, 0, &src, &dst, p)
                } else {
                    cast_case::<f16, f32>(s, seed, 0, &src, &dst, p)
                };
                assert_eq!(
                    path,
                    want,
                    "{} into {}, {from} -> 4 bytes",
                    src.show(),
                    dst.show()
                );
            }
        }
    }
    println!("long rows: paths {paths:?}");
}

/// A copy of `T` steered to the scattered rows ([`Steer::PreferScatter`]), against the
/// reference; returns the path.
fn scatter_case<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    seed: u64,
    src: &Src,
    dst: &Dst,
    paths: &mut Paths,
) -> String {
    let case = Case {
        seed,
        op: "assign_cast_steered(PreferScatter)",
        src,
        dst,
    };
    let op = |o: &mut DeviceViewMut<'_, T, IxDyn>, s: &DeviceView<'_, T, IxDyn>| {
        assign_cast_steered(o, stream, s, Steer::PreferScatter)
    };
    run_case::<T, T>(stream, &case, Op::Into(&op), paths)
}

/// Steered to them, copies of every element size from a contiguous source into a column
/// slice `x[.., ..c]` of a wider array (rows of 3 to 4095 bytes, the destination's spare
/// elements keeping their poison) and into one upside down (rows of a vector or more) take the
/// scattered rows
/// (`copy_rows_scatter_bN`), against ndarray.
#[test]
#[ignore = "needs a CUDA GPU"]
fn scattered_rows_write_column_slices_when_steered() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    for (size, c) in [
        (1usize, 3usize),
        (1, 17),
        (1, 100),
        (1, 4095),
        (2, 9),
        (2, 66),
        (4, 5),
        (4, 33),
        (4, 1023),
        (8, 3),
        (8, 15),
        (8, 100),
    ] {
        let rows = 300 + c % 5;
        let src = Src::permuted(&[rows, c], vec![0, 1]);
        let padded = Dst::padded(&[rows, c]);
        let mut upside_down = Dst::padded(&[rows, c]);
        upside_down.slice[0] = step(0, None, -1);
        // Upside down, the source's rows do not join (each row its own, of at least a vector).
        let dsts = if c * size >= 16 {
            vec![padded, upside_down]
        } else {
            vec![padded]
        };
        for dst in dsts {
            index += 1;
            let seed = case_seed(0x5ca7, index);
            let p = &mut paths;
            let path = match size {
                1 => scatter_case::<u8>(&stream, seed, &src, &dst, p),
                2 => scatter_case::<f16>(&stream, seed, &src, &dst, p),
                4 => scatter_case::<f32>(&stream, seed, &src, &dst, p),
                _ => scatter_case::<f64>(&stream, seed, &src, &dst, p),
            };
            assert_eq!(
                path,
                "rows_scatter",
                "{} into {}, {size} bytes",
                src.show(),
                dst.show()
            );
        }
    }
    println!("scattered rows: paths {paths:?}");
}

/// Casts of views read backwards along their fastest axis, of images flipped left-right with
/// their channels last (pixels right to left) and of channels reversed or pairs swapped, each
/// converted in one pass, take the gathered rows (`rows_gather`), for casts from and to every
/// element size, through `assign_cast` and `cast`, against ndarray; a destination that is a
/// window of a larger array keeps its poison outside the window. So do copies of 1- and
/// 2-byte elements in runs of 5 or 7 channels flipped or reversed.
#[test]
#[ignore = "needs a CUDA GPU"]
fn flipped_casts_take_the_gathered_rows() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    // (array, axes read backwards, slice the fastest axis from element 1)
    let layouts: [(&[usize], &[usize], bool); 14] = [
        (&[1 << 16], &[0], false),
        (&[4099], &[0], true),
        (&[3, 40, 257], &[2], true),
        (&[2, 3, 24, 64], &[2, 3], false),
        (&[5, 64, 4], &[1], false),
        (&[5, 64, 2], &[1], false),
        (&[5, 67, 3], &[1], false),
        (&[7, 45, 3], &[0, 1], false),
        (&[1 << 14, 2], &[1], false),
        (&[5, 67, 3], &[2], false),
        (&[3, 40, 64, 4], &[3], false),
        (&[7, 45, 3], &[0, 2], false),
        (&[6, 2731, 3], &[1], false),
        (&[6, 2731, 3], &[2], false),
    ];
    for (k, (base, flip, sliced)) in layouts.into_iter().enumerate() {
        let rank = base.len();
        let mut src = Src::permuted(base, (0..rank).collect());
        for &a in flip {
            src.slice[a] = step(0, None, -1);
        }
        if sliced {
            src.slice[rank - 1] = step(1, None, -1);
        }
        let shape = src.shape();
        // A standard-layout destination, and a window of a larger one.
        for (d, dst) in [Dst::contiguous(&shape), Dst::window(&shape)]
            .iter()
            .enumerate()
        {
            for which in 0..2 {
                index += 1;
                let seed = case_seed(0x9a7, index);
                let p = &mut paths;
                let s = &stream;
                // Casts from and to every element size, over the cases of a layout.
                let (path, from, to) = match (k + 2 * d + which) % 8 {
                    0 => (cast_case::<u8, f32>(s, seed, which, &src, dst, p), 1, 4),
                    1 => (cast_case::<f16, f32>(s, seed, which, &src, dst, p), 2, 4),
                    2 => (cast_case::<f32, f16>(s, seed, which, &src, dst, p), 4, 2),
                    3 => (cast_case::<u8, f16>(s, seed, which, &src, dst, p), 1, 2),
                    4 => (cast_case::<i8, f64>(s, seed, which, &src, dst, p), 1, 8),
                    5 => (cast_case::<f64, u8>(s, seed, which, &src, dst, p), 8, 1),
                    6 => (cast_case::<f32, bf16>(s, seed, which, &src, dst, p), 4, 2),
                    _ => (cast_case::<u16, f32>(s, seed, which, &src, dst, p), 2, 4),
                };
                // Runs of channels shorter than a vector group of the cast, read in reverse
                // order, or any row read backwards.
                let c = base[rank - 1];
                let group = 16 / usize::min(from, to);
                let backwards = flip.contains(&(rank - 1));
                if backwards || c < group {
                    assert_eq!(
                        path, "rows_gather",
                        "{base:?} flip {flip:?}, {from} -> {to} bytes"
                    );
                }
            }
        }
    }
    // Copies of 1- and 2-byte elements in runs of channels that the reversed row kernels do
    // not take (5 or 7 channels flipped left-right or reversed), through every same-type
    // operation.
    let copied: [(&[usize], &[usize]); 4] = [
        (&[5, 64, 5], &[1]),
        (&[5, 64, 5], &[2]),
        (&[4, 33, 7], &[1]),
        (&[3, 2001, 7], &[0, 2]),
    ];
    for (k, (base, flip)) in copied.into_iter().enumerate() {
        let rank = base.len();
        let mut src = Src::permuted(base, (0..rank).collect());
        for &a in flip {
            src.slice[a] = step(0, None, -1);
        }
        let dst = Dst::contiguous(&src.shape());
        for which in 0..4 {
            index += 1;
            let seed = case_seed(0x9a7, index);
            let path = if (k + which) % 2 == 0 {
                same_type_case::<u8>(&stream, seed, which, &src, &dst, &mut paths)
            } else {
                same_type_case::<f16>(&stream, seed, which, &src, &dst, &mut paths)
            };
            assert_eq!(path, "rows_gather", "{base:?} flip {flip:?}");
        }
    }
    println!("flipped casts: paths {paths:?}");
}

/// Casts that interleave 2 to 16 planes into channels last (CHW -> HWC, NCHW -> NHWC) from 2-
/// to 4-byte, 4- to 2-byte and 8- to 4-byte elements, with runs of 1024 pixels or more
/// contiguous in the source, take the gathered rows (`rows_gather`): planes of an odd number
/// of pixels (off their 16-byte alignment), a source from a later plane, batches, images
/// cropped in width (rows of pixels apart), through `assign_cast` into a standard-layout
/// destination or a window of a larger one, and through `cast`, against ndarray. Casts into
/// f64 and u8 and from u8, runs of 1023 or 1000 pixels, 17 channels, and planes read backwards
/// along their rows take other paths, checked alike.
#[test]
#[ignore = "needs a CUDA GPU"]
fn casts_into_channels_last_take_the_gathered_rows() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut paths = Paths::new();
    let mut index = 0;
    let mut gathered = 0;
    // (array, permutation into channels last, source from plane 1, rows read backwards,
    // width cropped to)
    type Layout = (
        &'static [usize],
        &'static [usize],
        bool,
        bool,
        Option<usize>,
    );
    let layouts: [Layout; 12] = [
        (&[3, 64, 64], &[1, 2, 0], false, false, None),
        (&[2, 37, 41], &[1, 2, 0], false, false, None),
        (&[16, 33, 35], &[1, 2, 0], true, false, None),
        (&[4, 2, 25, 45], &[0, 2, 3, 1], false, false, None),
        (&[2, 8, 32, 32], &[0, 2, 3, 1], false, false, None),
        (&[3, 5, 27, 41], &[0, 2, 3, 1], false, false, None),
        (&[16, 32, 40], &[1, 2, 0], false, false, None),
        (&[3, 20, 1200], &[1, 2, 0], false, false, Some(1100)),
        (&[3, 31, 33], &[1, 2, 0], false, false, None),
        (&[17, 32, 32], &[1, 2, 0], false, false, None),
        (&[3, 64, 64], &[1, 2, 0], false, true, None),
        (&[3, 40, 1200], &[1, 2, 0], false, false, Some(1000)),
    ];
    for (k, (base, perm, later, backwards, crop)) in layouts.into_iter().enumerate() {
        let rank = base.len();
        let mut src = Src::permuted(base, perm.to_vec());
        // The channel axis of the source array (after the batch, if any).
        let c_axis = rank - 3;
        if later {
            src.slice[c_axis] = step(1, None, 1);
        }
        if backwards {
            src.slice[rank - 1] = step(0, None, -1);
        }
        if let Some(w) = crop {
            src.slice[rank - 1] = step(0, Some(w as isize), 1);
        }
        let shape = src.shape();
        let channels = shape[rank - 1];
        // The pixels contiguous in the source: a plane, or a row of a cropped one.
        let run = crop.unwrap_or(base[rank - 2] * base[rank - 1]);
        // A standard-layout destination, and a window of a larger one (`cast` makes its own).
        for (d, dst) in [Dst::contiguous(&shape), Dst::window(&shape)]
            .iter()
            .enumerate()
        {
            for which in 0..2 {
                index += 1;
                let seed = case_seed(0xc1a, index);
                let p = &mut paths;
                let s = &stream;
                let (path, from, to) = match (k + d + 2 * which) % 9 {
                    0 => (cast_case::<f32, f16>(s, seed, which, &src, dst, p), 4, 2),
                    1 => (cast_case::<f16, f32>(s, seed, which, &src, dst, p), 2, 4),
                    2 => (cast_case::<bf16, f32>(s, seed, which, &src, dst, p), 2, 4),
                    3 => (cast_case::<f32, bf16>(s, seed, which, &src, dst, p), 4, 2),
                    4 => (cast_case::<f32, f64>(s, seed, which, &src, dst, p), 4, 8),
                    5 => (cast_case::<f64, f32>(s, seed, which, &src, dst, p), 8, 4),
                    6 => (cast_case::<u16, f32>(s, seed, which, &src, dst, p), 2, 4),
                    7 => (cast_case::<u8, f32>(s, seed, which, &src, dst, p), 1, 4),
                    _ => (cast_case::<f32, u8>(s, seed, which, &src, dst, p), 4, 1),
                };
                let most = match (from, to) {
                    (2, 4) | (8, 4) => 16,
                    (4, 2) => 32,
                    _ => 0,
                };
                let expect = (2..=most).contains(&channels) && run >= 1024 && !backwards;
                assert_eq!(
                    path == "rows_gather",
                    expect,
                    "{} -> channels last, {from} -> {to} bytes: path {path}",
                    src.show()
                );
                gathered += usize::from(expect);
            }
        }
    }
    assert!(gathered >= 20, "{gathered} gathered cases");
    println!("casts into channels last: paths {paths:?}");
}

/// One copy of [`repeated_copies_on_kept_plans_match_ndarray`]: new random data (from `rng`)
/// written into `src`, `out` poisoned, `src` permuted by `perm` assigned into `out` (with a
/// cast where the types differ), compared with ndarray.
fn repeated_case<F: DeviceElement, T: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    src: &mut DeviceArray<F, IxDyn>,
    out: &mut DeviceArray<T, IxDyn>,
    perm: &[usize],
    what: &str,
) {
    let host = random::<F>(rng, src.shape());
    src.copy_from_host_on(stream, &host.view()).unwrap();
    let expect = host
        .view()
        .permuted_axes(perm.to_vec())
        .mapv(|x| cast_reference::<F, T>(x));
    let poison = random::<T>(rng, out.shape());
    out.copy_from_host_on(stream, &poison.view()).unwrap();
    out.view_mut()
        .assign_cast_on(stream, &src.view().permuted_axes(IxDyn(perm)))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = out.to_host_on(stream).unwrap();
    assert_same(&got.view(), &expect.view(), what);
}

/// [`repeated_case`] into arrays made for the call and freed after it; returns the
/// destination's address.
fn repeated_case_new<F: DeviceElement, T: DeviceElement>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    shape: &[usize],
    perm: &[usize],
    what: &str,
) -> u64 {
    let out_shape: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
    let mut src = DeviceArray::<F, _>::zeros(stream, IxDyn(shape)).unwrap();
    let mut out = DeviceArray::<T, _>::zeros(stream, IxDyn(&out_shape)).unwrap();
    repeated_case(stream, rng, &mut src, &mut out, perm, what);
    out.view().device_ptr()
}

/// Copies repeated on the same operands run on the plan kept from their first call (each
/// thread keeps the plans of its last 16 copies, keyed by addresses, layouts and element
/// types). Permutations of 10 to 14 axes (extents 1 to 5 beside up to two long ones) are
/// copied again and again, each time from new data into an array made for the call and freed
/// after it (the stream-ordered pool tends to hand the same addresses back, where a kept plan
/// is found), mostly among three layouts and every tenth call among twenty (more plans than
/// are kept: plans dropped and made again), as u8 copies, f32 copies and f32 -> f16 casts of
/// the same layouts (the element types are part of the key); every result matches ndarray,
/// the destination poisoned first.
#[test]
#[ignore = "needs a CUDA GPU"]
fn repeated_copies_on_kept_plans_match_ndarray() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let test = 0x6b65_7074;
    let mut rng = StdRng::seed_from_u64(case_seed(test, 0));
    let layouts: Vec<(Vec<usize>, Vec<usize>)> = (0..20)
        .map(|_| {
            let rank = rng.random_range(10..=14);
            // A permutation that moves the axes longer than 1 (not a contiguous copy, whose
            // plans are not kept).
            loop {
                let shape = random_shape(&mut rng, rank, 1 << 16);
                let perm = random_perm(&mut rng, rank);
                let long: Vec<usize> = perm.iter().copied().filter(|&a| shape[a] > 1).collect();
                if long.windows(2).any(|w| w[0] > w[1]) {
                    break (shape, perm);
                }
            }
        })
        .collect();
    let mut last: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    let mut again = 0;
    let rounds = scaled(300, 45);
    for round in 0..rounds {
        let k = if round % 10 == 9 {
            rng.random_range(0..layouts.len())
        } else {
            rng.random_range(0..3)
        };
        let (shape, perm) = &layouts[k];
        let seed = case_seed(test, round + 1);
        let what = format!("round {round}, seed {seed}: shape {shape:?}, permutation {perm:?}");
        let mut rng = StdRng::seed_from_u64(seed);
        let kind = round % 3;
        let addr = match kind {
            0 => repeated_case_new::<u8, u8>(&stream, &mut rng, shape, perm, &what),
            1 => repeated_case_new::<f32, f32>(&stream, &mut rng, shape, perm, &what),
            _ => repeated_case_new::<f32, f16>(&stream, &mut rng, shape, perm, &what),
        };
        if last.insert((k, kind), addr) == Some(addr) {
            again += 1;
        }
    }
    // The same copies into arrays kept across the calls, new data written into them each
    // time: from its second call on, each of the 9 copies (3 layouts, 3 pairs of types) runs
    // on its kept plan.
    struct Arrays {
        src8: DeviceArray<u8, IxDyn>,
        out8: DeviceArray<u8, IxDyn>,
        src32: DeviceArray<f32, IxDyn>,
        out32: DeviceArray<f32, IxDyn>,
        out16: DeviceArray<f16, IxDyn>,
    }
    let mut arrays: BTreeMap<usize, Arrays> = BTreeMap::new();
    let (calls, before) = (scaled(90, 27), plans_found());
    for call in 0..calls {
        let (k, kind) = (call % 3, (call / 3) % 3);
        let (shape, perm) = &layouts[k];
        let seed = case_seed(test, 1000 + call);
        let what = format!(
            "kept arrays, call {call}, seed {seed}: shape {shape:?}, permutation {perm:?}, copy {kind}"
        );
        let mut rng = StdRng::seed_from_u64(seed);
        let a = arrays.entry(k).or_insert_with(|| {
            let out: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
            Arrays {
                src8: DeviceArray::zeros(&stream, IxDyn(shape)).unwrap(),
                out8: DeviceArray::zeros(&stream, IxDyn(&out)).unwrap(),
                src32: DeviceArray::zeros(&stream, IxDyn(shape)).unwrap(),
                out32: DeviceArray::zeros(&stream, IxDyn(&out)).unwrap(),
                out16: DeviceArray::zeros(&stream, IxDyn(&out)).unwrap(),
            }
        });
        match kind {
            0 => repeated_case(&stream, &mut rng, &mut a.src8, &mut a.out8, perm, &what),
            1 => repeated_case(&stream, &mut rng, &mut a.src32, &mut a.out32, perm, &what),
            _ => repeated_case(&stream, &mut rng, &mut a.src32, &mut a.out16, perm, &what),
        }
    }
    let found = plans_found() - before;
    println!(
        "repeated copies: {rounds} calls into new arrays ({again} into the address of the last call of the same layout and types); {calls} into kept arrays, {found} on kept plans"
    );
    assert!(
        found >= (calls - 9) as u64,
        "{found} of {calls} copies found their plan kept"
    );
}
