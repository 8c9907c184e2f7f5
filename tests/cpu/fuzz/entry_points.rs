//! Targets `kernel_args` and `transfer_args`: the host-side argument checks of the kernel and
//! transfer entry points. Without a GPU no stream exists, so the `_on` / `_with` forms cannot
//! be called; what runs before the driver is fuzzed instead: the planners that every copy, fill,
//! cast and transfer goes through (reached through `devspan::internals`), `kernel_view`,
//! `TransferOptions::check`, and the plain methods of views over raw memory, which have no
//! stream of their own and must answer `Err(InvalidArgument)`.

use devspan::ErrorKind::{self, *};
use devspan::internals::{copy_path, fill_path, transfer_path};
use devspan::{
    DeviceBase, DeviceElement, DeviceView, DeviceViewMut, HostPath, SpanData, TransferOptions,
};
use half::{bf16, f16};
use ndarray::{Array, ArrayD, Axis, Dimension, IxDyn, Slice};

use super::model::{self, Model};
use super::raw_parts::Owners;
use super::{FAKE_PTR, Outcome, Rng, Verdict, expect_kinds};

/// No kinds when `ok`, else `kind`.
fn unless(ok: bool, kind: ErrorKind) -> Vec<ErrorKind> {
    if ok { vec![] } else { vec![kind] }
}

fn kv_parts<const N: usize, S: SpanData, D: Dimension>(
    v: &DeviceBase<S, D>,
) -> devspan::Result<(u64, Vec<u64>, Vec<i64>)> {
    v.kernel_view::<N>()
        .map(|k| (k.ptr, k.shape.to_vec(), k.strides.to_vec()))
}

/// A layout over exactly its reachable elements: a permuted, stepped, flipped contiguous block
/// (writable when `step` and `broadcast` leave it unaliased); `(strides, offset, span_len)`.
fn device_layout(r: &mut Rng, shape: &[usize], broadcast: bool) -> (Vec<isize>, usize, usize) {
    let rank = shape.len();
    let mut order: Vec<usize> = (0..rank).collect();
    if r.chance(60) {
        for i in (1..rank).rev() {
            order.swap(i, r.below(i + 1));
        }
    }
    let mut strides = vec![0isize; rank];
    let mut acc: isize = 1;
    for &k in order.iter().rev() {
        let step = if r.chance(20) { 2 } else { 1 };
        strides[k] = acc.saturating_mul(step) * if r.chance(20) { -1 } else { 1 };
        acc = acc
            .saturating_mul(step)
            .saturating_mul(shape[k].clamp(1, isize::MAX as usize) as isize);
        if broadcast && r.chance(25) {
            strides[k] = 0;
        }
    }
    let m = Model::from_parts(shape, &strides, 0);
    let (lo, hi) = model::reach(shape, &m.strides)
        .ok()
        .flatten()
        .unwrap_or((0, 0));
    let extra = r.below(3) as i128;
    let span = (hi - lo + 1 + 2 * extra).min(usize::MAX as i128);
    (
        strides,
        (extra - lo).min(usize::MAX as i128) as usize,
        span as usize,
    )
}

fn small_shape(r: &mut Rng, max_rank: usize) -> Vec<usize> {
    let rank = r.below(max_rank + 1);
    (0..rank)
        .map(|_| {
            let max = if r.chance(10) { 40 } else { 5 };
            if r.chance(5) { 0 } else { 1 + r.below(max) }
        })
        .collect()
}

/// A shape of up to 40 axes, mostly of 1 to 5 elements beside longer ones (up to millions),
/// of up to 2^20 to 2^54 elements: layouts whose axes lie 2^31 or more elements apart, which
/// the tiled plans take apart.
fn large_shape(r: &mut Rng) -> Vec<usize> {
    let rank = match r.below(3) {
        0 => 1 + r.below(8),
        1 => 9 + r.below(16),
        _ => 25 + r.below(16),
    };
    let mut shape: Vec<usize> = (0..rank)
        .map(|_| match r.below(10) {
            0..=5 => 1 + r.below(5),
            6 | 7 => 6 + r.below(35),
            8 => 41 + r.below(5000),
            _ => 100_000 + r.below(3_000_000),
        })
        .collect();
    let most = 1u128 << (20 + r.below(35));
    while shape
        .iter()
        .try_fold(1u128, |p, &n| p.checked_mul(n as u128))
        .is_none_or(|p| p > most)
    {
        let k = r.below(rank);
        shape[k] = (shape[k] / 2).max(1);
    }
    shape
}

#[derive(Debug)]
pub(crate) struct KernelCase {
    shape: Vec<usize>,
    dst: (Vec<isize>, usize, usize),
    src: (Vec<isize>, usize, usize),
    /// The source's own shape, broadcast to `shape`.
    src_shape: Vec<usize>,
    dst_type: usize,
    src_type: usize,
    kv_rank: usize,
    ptr_skew: u64,
}

fn generate_kernel(r: &mut Rng) -> KernelCase {
    let max_rank = if r.chance(5) { 10 } else { 5 };
    // Not under Miri, where planning a layout of dozens of axes takes seconds.
    let large = r.chance(10) && !cfg!(miri);
    let shape = if large {
        large_shape(r)
    } else {
        small_shape(r, max_rank)
    };
    let src_shape: Vec<usize> = shape
        .iter()
        .skip(if r.chance(10) && !shape.is_empty() {
            1
        } else {
            0
        })
        .map(|&n| if r.chance(15) { 1 } else { n })
        .collect();
    let (dst, src) = (
        device_layout(r, &shape, false),
        device_layout(r, &src_shape, true),
    );
    // Large layouts whose steps took them past 2^56 elements (past what `isize` bytes of 8-byte
    // elements reach, once shifted) are drawn again.
    let fits = |shape: &[usize], strides: &[isize]| {
        let m = Model::from_parts(shape, strides, 0);
        model::reach(shape, &m.strides).is_ok_and(|r| r.is_none_or(|(lo, hi)| hi - lo < 1 << 56))
    };
    if large && !(fits(&shape, &dst.0) && fits(&src_shape, &src.0)) {
        return generate_kernel(r);
    }
    KernelCase {
        dst,
        src,
        shape,
        src_shape,
        dst_type: r.below(4),
        src_type: r.below(4),
        kv_rank: r.pick(&[0usize, 1, 2, 4, 8]),
        ptr_skew: if r.chance(20) {
            r.pick(&[2u64, 4, 8, 16, 64])
        } else {
            0
        },
    }
}

/// The source's strides against the destination's shape (after broadcasting).
fn broadcast_strides(c: &KernelCase) -> Vec<isize> {
    let lead = c.shape.len() - c.src_shape.len();
    (0..c.shape.len())
        .map(|i| {
            if i < lead || c.src_shape[i - lead] != c.shape[i] {
                0
            } else {
                c.src.0[i - lead]
            }
        })
        .collect()
}

fn kernel_typed<T: DeviceElement, U: DeviceElement>(c: &KernelCase) -> Verdict {
    let owners = Owners::default();
    let (ts, us) = (std::mem::size_of::<T>(), std::mem::size_of::<U>());
    let dst_ptr = FAKE_PTR + c.ptr_skew * ts as u64;
    let src_ptr = FAKE_PTR + (1 << 30) + c.ptr_skew * us as u64;
    // SAFETY: the addresses are never dereferenced; only metadata is read.
    let mut d = unsafe {
        DeviceViewMut::<T, _>::from_raw_parts_mut(
            dst_ptr,
            c.dst.2,
            IxDyn(&c.shape),
            &c.dst.0,
            c.dst.1,
            0,
            owners.owner(),
        )
    }
    .map_err(|e| format!("destination: {e}"))?;
    // SAFETY: as above.
    let s = unsafe {
        DeviceView::<U, _>::from_raw_parts(
            src_ptr,
            c.src.2,
            IxDyn(&c.src_shape),
            &c.src.0,
            c.src.1,
            0,
            owners.owner(),
        )
    }
    .map_err(|e| format!("source: {e}"))?;
    let sb = s
        .broadcast(IxDyn(&c.shape))
        .map_err(|e| format!("broadcast: {e}"))?;
    let bs = broadcast_strides(c);
    ensure!(
        model::same_strides(&c.shape, sb.strides(), &bs),
        "broadcast strides {:?}, the model has {bs:?}",
        sb.strides()
    );

    // The planner behind assign / assign_cast / fill.
    let empty = c.shape.contains(&0);
    let axes = c.shape.iter().filter(|&&n| n > 1).count();
    let path = copy_path(&mut d, &sb);
    let fpath = fill_path(&d);
    let mut outcome = Outcome::Ok;
    for (what, p) in [("copy_path", &path), ("fill_path", &fpath)] {
        if empty {
            ensure!(p == "nothing", "{what} of an empty view: {p}");
        }
        // Every rank plans (the tiled and rank-generic kernels take any number of axes).
        ensure!(!p.starts_with("error"), "{what}: {p} for {axes} axes");
    }
    if !empty {
        // Contiguous paths exactly for operands that are one dense block in the same order.
        let dm = Model::from_parts(&c.shape, d.strides(), 0);
        let offs = model::brute_offsets(&dm);
        let dense = offs.map(|mut o| {
            o.sort_unstable();
            o.windows(2).all(|w| w[1] == w[0] + 1)
        });
        let same_order = model::same_strides(&c.shape, d.strides(), &bs);
        let contig = ["memcpy", "contig"].contains(&path.as_str());
        if contig {
            ensure!(
                dense != Some(false) && same_order,
                "copy_path {path} for a non-contiguous pair"
            );
        }
        if dense == Some(true) && same_order && T::DTYPE == U::DTYPE {
            ensure!(contig, "copy_path {path} for two identical dense layouts");
        }
        let fcontig = ["memset", "fill_contig"].contains(&fpath.as_str());
        if fcontig {
            ensure!(
                dense != Some(false),
                "fill_path {fpath} for a view with gaps"
            );
        }
        if dense == Some(true) && ts <= 4 {
            ensure!(
                fpath == "memset",
                "fill_path {fpath} for a dense view of {ts}-byte elements"
            );
        }
    }

    // kernel_view: the view padded with leading unit axes, or Err when it has too many axes.
    let kv = match c.kv_rank {
        0 => kv_parts::<0, _, _>(&d),
        1 => kv_parts::<1, _, _>(&d),
        2 => kv_parts::<2, _, _>(&d),
        4 => kv_parts::<4, _, _>(&d),
        _ => kv_parts::<8, _, _>(&d),
    };
    let n = c.kv_rank;
    if let Outcome::Err(k) =
        expect_kinds("kernel_view", &kv, &unless(c.shape.len() <= n, InvalidAxis))?
    {
        outcome = Outcome::Err(k);
    }
    if let Ok((ptr, shape, strides)) = kv {
        let pad = n - c.shape.len();
        ensure!(ptr == d.device_ptr(), "kernel_view ptr");
        ensure!(
            shape[..pad].iter().all(|&x| x == 1) && strides[..pad].iter().all(|&x| x == 0),
            "kernel_view padding"
        );
        ensure!(
            shape[pad..]
                .iter()
                .map(|&x| x as usize)
                .eq(c.shape.iter().copied())
                && strides[pad..]
                    .iter()
                    .map(|&x| x as isize)
                    .eq(d.strides().iter().copied()),
            "kernel_view axes"
        );
    }

    // Plain device methods: no stream of their own.
    let none = [InvalidArgument];
    let sv = s.clone();
    expect_kinds("fill", &d.fill(bytemuck::Zeroable::zeroed()), &none)?;
    expect_kinds("assign_cast", &d.assign_cast(&sv), &none)?;
    expect_kinds("to_contiguous", &s.to_contiguous(), &none)?;
    expect_kinds("try_clone", &d.try_clone(), &none)?;
    expect_kinds("cast", &s.cast::<T>(), &none)?;
    // Display downloads on the device's default stream where a GPU exists, which would read
    // the fake address; without one it must print the error.
    if !devspan::gpu_available() {
        let display = format!("{s}");
        ensure!(
            display.starts_with("<devspan error"),
            "Display of a view without a stream: {display}"
        );
    }
    drop((d, s, sv, sb));
    owners.all_dropped()?;
    Ok(outcome)
}

fn kernel_case(c: &KernelCase) -> Verdict {
    match (c.dst_type, c.src_type) {
        (0, 0) => kernel_typed::<u8, u8>(c),
        (0, 1) => kernel_typed::<u8, f16>(c),
        (0, _) => kernel_typed::<u8, f64>(c),
        (1, 0) => kernel_typed::<bf16, u8>(c),
        (1, 1) => kernel_typed::<bf16, bf16>(c),
        (1, _) => kernel_typed::<bf16, f32>(c),
        (2, 0) => kernel_typed::<f32, i16>(c),
        (2, 1) => kernel_typed::<f32, f32>(c),
        (2, _) => kernel_typed::<f32, f64>(c),
        (_, 0) => kernel_typed::<f64, u32>(c),
        (_, 1) => kernel_typed::<f64, f64>(c),
        _ => kernel_typed::<f64, i8>(c),
    }
}

#[test]
fn kernel_args() {
    super::run("kernel_args", 5000, generate_kernel, kernel_case);
}

// ---------------------------------------------------------------------------------------------
// transfer_args

#[derive(Debug)]
pub(crate) struct TransferCase {
    /// A host array of `base` elements, viewed through `ops` (slices, flips, axis
    /// permutations, broadcast).
    base: Vec<usize>,
    host_ops: Vec<(usize, Slice)>,
    permute: Vec<usize>,
    broadcast_lead: Vec<usize>,
    /// Host strides given by hand instead (extreme values), with this shape.
    raw_host: Option<(Vec<usize>, Vec<isize>)>,
    seed: u64,
    elem: usize,
    up: bool,
    wrong_rank: bool,
    opt: TransferOptions,
}

fn generate_transfer(r: &mut Rng) -> TransferCase {
    let base = small_shape(r, 4);
    let host_ops: Vec<(usize, Slice)> = (0..r.below(3))
        .filter(|_| !base.is_empty())
        .map(|_| {
            let a = r.below(base.len());
            let step = r.pick(&[1isize, 1, 2, -1, -2, 3]);
            (a, Slice::new(0, None, step))
        })
        .collect();
    let mut permute: Vec<usize> = (0..base.len()).collect();
    if r.chance(50) {
        for i in (1..permute.len()).rev() {
            permute.swap(i, r.below(i + 1));
        }
    }
    let broadcast_lead: Vec<usize> = if r.chance(20) {
        vec![1 + r.below(3)]
    } else {
        vec![]
    };
    let raw_host = r.chance(10).then(|| {
        let rank = 1 + r.below(3);
        let shape: Vec<usize> = (0..rank)
            .map(|_| {
                if r.chance(50) {
                    r.len()
                } else {
                    1 + r.below(4)
                }
            })
            .collect();
        let strides: Vec<isize> = (0..rank).map(|_| r.stride()).collect();
        (shape, strides)
    });
    let elem = r.pick(&[1usize, 2, 4, 8]);
    TransferCase {
        base,
        host_ops,
        permute,
        broadcast_lead,
        raw_host,
        seed: r.next(),
        elem,
        up: r.chance(50),
        wrong_rank: r.chance(4),
        opt: TransferOptions {
            chunk_bytes: if r.chance(10) {
                0
            } else {
                1 + r.below(1 << 20)
            },
            threads: if r.chance(10) {
                r.extreme_usize()
            } else {
                r.below(260)
            },
            host_path: r.pick(&[
                None,
                Some(HostPath::Pack),
                Some(HostPath::Block),
                Some(HostPath::Superset),
            ]),
            pinned_direct: r.chance(50),
        },
    }
}

/// The host view of the case.
fn host_view(c: &TransferCase, data: &ArrayD<u32>) -> ndarray::ArrayViewD<'static, u32> {
    let mut v = data.view();
    for (a, s) in &c.host_ops {
        v.slice_axis_inplace(Axis(*a), *s);
    }
    let v = v.permuted_axes(IxDyn(&c.permute));
    let mut shape = c.broadcast_lead.clone();
    shape.extend_from_slice(v.shape());
    let b = v
        .broadcast(IxDyn(&shape))
        .expect("a broadcast to new leading axes");
    // SAFETY: only the lifetime changes; `data` outlives every use in the case.
    unsafe {
        std::mem::transmute::<ndarray::ArrayViewD<'_, u32>, ndarray::ArrayViewD<'static, u32>>(b)
    }
}

/// The host and device paths the model expects, `None` where the model does not decide it.
fn transfer_model(
    shape: &[usize],
    host: &[isize],
    dev: &[isize],
    elem: usize,
    up: bool,
) -> Result<Option<(String, Option<bool>)>, ErrorKind> {
    let n = model::count(shape);
    if n * elem as i128 > model::IMAX {
        return Err(Overflow);
    }
    if n == 0 {
        // An empty view whose other lengths multiply past isize::MAX exists on neither side
        // (ndarray and devspan refuse such shapes), so the planner may answer either way.
        if !model::size_fits(shape, elem) {
            return Ok(None);
        }
        return Ok(Some(("block".into(), Some(true))));
    }
    let span: i128 = 1 + shape
        .iter()
        .zip(host)
        .map(|(&l, &s)| (l as i128 - 1) * (s as i128).abs())
        .sum::<i128>();
    if span * elem as i128 > model::IMAX {
        return Err(Overflow);
    }
    let hm = Model::from_parts(shape, host, 0);
    let Some(hoffs) = model::brute_offsets(&hm) else {
        return Ok(None);
    };
    let dense = |o: &[i128]| {
        let mut s = o.to_vec();
        s.sort_unstable();
        s.windows(2).all(|w| w[1] == w[0] + 1)
    };
    // The host view without its broadcast axes.
    let keep: Vec<usize> = (0..shape.len())
        .filter(|&k| !(shape[k] > 1 && host[k] == 0))
        .collect();
    let reduced = Model::from_parts(
        &keep.iter().map(|&k| shape[k]).collect::<Vec<_>>(),
        &keep.iter().map(|&k| host[k]).collect::<Vec<_>>(),
        0,
    );
    let reduced_dense = model::brute_offsets(&reduced).is_some_and(|o| dense(&o));
    let host_path = if dense(&hoffs) {
        "block"
    } else if up && reduced_dense {
        "superset"
    } else {
        "pack"
    };
    let lo = *hoffs.iter().min().unwrap_or(&0);
    let bus: Option<Vec<i128>> = match host_path {
        "block" => Some(hoffs.iter().map(|&o| o - lo).collect()),
        "pack" => {
            // The host view's memory order: axes by |host stride|, outermost first (ties: the
            // lower axis outer), negative strides walked backwards.
            let mut axes: Vec<usize> = (0..shape.len()).filter(|&k| shape[k] > 1).collect();
            axes.sort_by_key(|&k| (std::cmp::Reverse(host[k].unsigned_abs()), k));
            let mut pos = Vec::new();
            model::for_each_index(shape, |idx| {
                let mut p = 0i128;
                for &k in &axes {
                    let i = if host[k] < 0 {
                        shape[k] - 1 - idx[k]
                    } else {
                        idx[k]
                    };
                    p = p * shape[k] as i128 + i as i128;
                }
                pos.push(p);
            });
            Some(pos)
        }
        _ => Some(vec![]),
    };
    let direct = match bus {
        None => None,
        Some(b) if b.is_empty() => Some(false),
        Some(b) => {
            let dm = Model::from_parts(shape, dev, 0);
            let doffs = model::brute_offsets(&dm).unwrap_or_default();
            Some(
                doffs
                    .iter()
                    .zip(&b)
                    .all(|(&d, &p)| d - doffs[0] == p - b[0]),
            )
        }
    };
    Ok(Some((host_path.to_string(), direct)))
}

fn transfer_case(c: &TransferCase) -> Verdict {
    let mut r = Rng::new(c.seed);
    let n: usize = c.base.iter().product();
    let data = Array::from_shape_vec(IxDyn(&c.base), (0..n as u32).collect())
        .map_err(|e| e.to_string())?;
    let hv = host_view(c, &data);
    let (shape, host): (Vec<usize>, Vec<isize>) = match &c.raw_host {
        Some((s, st)) => (s.clone(), st.clone()),
        None => (hv.shape().to_vec(), hv.strides().to_vec()),
    };
    let dev = device_layout(&mut r, &shape, false);
    let mut dev_strides = dev.0.clone();
    if c.wrong_rank {
        dev_strides.push(1);
    }
    let p = transfer_path(&shape, &host, &dev_strides, c.elem, c.up);
    let mut outcome = Outcome::Ok;
    if c.wrong_rank {
        ensure!(
            p.starts_with("error"),
            "transfer_path with a stride list of the wrong length: {p}"
        );
        outcome = Outcome::Err(ShapeMismatch);
    } else {
        match transfer_model(&shape, &host, &dev.0, c.elem, c.up) {
            Err(k) => {
                ensure!(
                    p.starts_with("error"),
                    "transfer_path: {p}, the model expects Err({k:?})"
                );
                outcome = Outcome::Err(k);
            }
            Ok(None) if model::count(&shape) == 0 => {
                if p.starts_with("error") {
                    outcome = Outcome::Err(Overflow);
                }
            }
            Ok(m) => {
                ensure!(
                    !p.starts_with("error"),
                    "transfer_path: {p}, the model expects Ok"
                );
                if let Some((hp, direct)) = m {
                    let (h, d) = p.split_once('/').ok_or_else(|| format!("path {p}"))?;
                    ensure!(
                        h == hp,
                        "host path {h}, the model expects {hp} (shape {shape:?}, host strides {host:?})"
                    );
                    if let Some(direct) = direct {
                        ensure!(
                            (d == "direct") == direct,
                            "device path {d}, the model expects direct: {direct} (shape {shape:?}, host strides {host:?}, device strides {:?})",
                            dev.0
                        );
                    }
                }
            }
        }
    }
    let bad_opt = c.opt.chunk_bytes == 0 || c.opt.threads == 0 || c.opt.threads > 256;
    expect_kinds(
        "TransferOptions::check",
        &c.opt.check(),
        &unless(!bad_opt, InvalidArgument),
    )?;

    // The plain transfer methods of a view over raw memory: no stream.
    if c.raw_host.is_none() && !c.wrong_rank {
        let owners = Owners::default();
        // SAFETY: the address is never dereferenced; only metadata is read.
        let mut w = unsafe {
            DeviceViewMut::<u32, _>::from_raw_parts_mut(
                FAKE_PTR,
                dev.2,
                IxDyn(&shape),
                &dev.0,
                dev.1,
                0,
                owners.owner(),
            )
        }
        .map_err(|e| format!("device view: {e}"))?;
        let none = [InvalidArgument];
        expect_kinds("copy_from_host", &w.copy_from_host(&hv), &none)?;
        expect_kinds(
            "copy_from_host_async",
            &w.copy_from_host_async(&hv).map(drop),
            &none,
        )?;
        let mut out = ArrayD::<u32>::zeros(IxDyn(&shape));
        expect_kinds("copy_to_host", &w.copy_to_host(&mut out), &none)?;
        expect_kinds(
            "copy_to_host_async",
            &w.copy_to_host_async(&mut out).map(drop),
            &none,
        )?;
        expect_kinds("to_host", &w.to_host(), &none)?;
        expect_kinds("into_view().to_host", &w.view().to_host(), &none)?;
        drop(w);
        owners.all_dropped()?;
    }
    Ok(outcome)
}

#[test]
fn transfer_args() {
    super::run("transfer_args", 5000, generate_transfer, transfer_case);
}
