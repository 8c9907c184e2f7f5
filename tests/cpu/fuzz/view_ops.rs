//! Targets `layout_ops` and `view_ops`: chains of layout operations with random (often bad)
//! arguments on `Layout`s and on read-only and writable views over fake device memory, each
//! step compared with the model.

use devspan::ErrorKind::{self, *};
use devspan::{DeviceBase, DeviceElement, DeviceView, DeviceViewMut, Layout, SpanData};
use ndarray::{Axis, Dimension, Ix2, IxDyn, Order, Slice, SliceInfoElem};

use super::model::{self, IMAX, MResult, Model, Reshape};
use super::raw_parts::Owners;
use super::{FAKE_PTR, Outcome, Rng, Verdict, expect_kinds};

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Slice(Vec<SliceInfoElem>),
    SliceAxis(usize, Slice),
    IndexAxis(usize, usize),
    Reversed,
    Permute(Vec<usize>),
    Swap(usize, usize),
    Invert(usize),
    Insert(usize),
    Remove(usize),
    Broadcast(Vec<usize>),
    Reshape(Vec<usize>, Order),
    /// `(axis, index, take the second half)`
    SplitAt(usize, usize, bool),
}

fn axis(r: &mut Rng, ndim: usize) -> usize {
    if ndim > 0 && r.chance(88) {
        r.below(ndim)
    } else if r.chance(70) {
        ndim + r.below(3)
    } else {
        r.extreme_usize()
    }
}

fn position(r: &mut Rng, len: usize) -> isize {
    let n = len.min(1 << 40) as isize;
    match r.below(10) {
        0 => r.extreme_isize(),
        1 => n + 1,
        2 => -n - 1,
        _ => r.range(-(n as i64) - 1, n as i64 + 1) as isize,
    }
}

fn slice_of(r: &mut Rng, len: usize) -> Slice {
    let step = match r.below(20) {
        0 => 0,
        1 => r.extreme_isize(),
        2..=5 => -1,
        6..=8 => r.pick(&[2, 3, -2, -3]),
        _ => 1,
    };
    let start = if r.chance(30) { 0 } else { position(r, len) };
    let end = if r.chance(30) {
        None
    } else {
        Some(position(r, len))
    };
    Slice { start, end, step }
}

fn slice_elems(r: &mut Rng, shape: &[usize]) -> Vec<SliceInfoElem> {
    let mut v: Vec<SliceInfoElem> = Vec::new();
    for &n in shape {
        if r.chance(5) {
            v.push(SliceInfoElem::NewAxis);
        }
        if r.chance(15) {
            let i = if n > 0 && r.chance(80) {
                let i = r.below(n) as isize;
                if r.chance(50) { i } else { i - n as isize }
            } else {
                position(r, n)
            };
            v.push(SliceInfoElem::Index(i));
        } else {
            v.push(slice_of(r, n).into());
        }
    }
    if r.chance(5) {
        // The wrong number of axes.
        if v.is_empty() || r.chance(50) {
            v.push(SliceInfoElem::Index(0));
        } else {
            v.pop();
        }
    }
    v
}

/// A new shape for the elements of `shape`: merged or split axes, unit axes added or removed,
/// or (sometimes) an unrelated shape.
fn reshape_target(r: &mut Rng, shape: &[usize]) -> Vec<usize> {
    if r.chance(20) {
        let rank = r.below(5);
        return (0..rank).map(|_| r.len()).collect();
    }
    let mut v = shape.to_vec();
    for _ in 0..1 + r.below(4) {
        match r.below(5) {
            0 if v.len() >= 2 => {
                let i = r.below(v.len() - 1);
                if let Some(p) = v[i].checked_mul(v[i + 1]) {
                    v[i] = p;
                    v.remove(i + 1);
                }
            }
            1 if !v.is_empty() => {
                let i = r.below(v.len());
                let d = r.pick(&[2usize, 3, 4]);
                if v[i] > 0 && v[i] % d == 0 {
                    v[i] /= d;
                    v.insert(i + usize::from(r.chance(50)), d);
                }
            }
            2 => {
                let i = r.below(v.len() + 1);
                v.insert(i, 1);
            }
            3 => {
                if let Some(i) = v.iter().position(|&n| n == 1) {
                    v.remove(i);
                }
            }
            _ => {
                if r.chance(30) {
                    let p = v.iter().try_fold(1usize, |a, &n| a.checked_mul(n));
                    if let Some(p) = p {
                        v = vec![p];
                    }
                }
            }
        }
    }
    v
}

fn broadcast_target(r: &mut Rng, shape: &[usize]) -> Vec<usize> {
    if r.chance(8) {
        let rank = r.below(6);
        return (0..rank).map(|_| r.len()).collect();
    }
    let mut v: Vec<usize> = (0..r.below(3))
        .map(|_| {
            if r.chance(80) {
                1 + r.below(4)
            } else {
                r.len()
            }
        })
        .collect();
    for &n in shape {
        v.push(match (n, r.below(10)) {
            (1, 0..=5) => r.len(),
            (_, 0) => r.len(),
            _ => n,
        });
    }
    if r.chance(5) && !v.is_empty() {
        v.remove(0);
    }
    v
}

pub(crate) fn gen_op(r: &mut Rng, shape: &[usize]) -> Op {
    let nd = shape.len();
    match r.below(12) {
        0 => Op::Slice(slice_elems(r, shape)),
        1 => {
            let a = axis(r, nd);
            Op::SliceAxis(a, slice_of(r, shape.get(a).copied().unwrap_or(3)))
        }
        2 => {
            let a = axis(r, nd);
            let n = shape.get(a).copied().unwrap_or(3);
            let i = if n > 0 && r.chance(80) {
                r.below(n)
            } else if r.chance(50) {
                n
            } else {
                r.extreme_usize()
            };
            Op::IndexAxis(a, i)
        }
        3 => Op::Reversed,
        4 => {
            let mut p: Vec<usize> = (0..nd).collect();
            for i in (1..nd).rev() {
                p.swap(i, r.below(i + 1));
            }
            if r.chance(15) {
                match r.below(3) {
                    0 => p.push(nd),
                    1 if !p.is_empty() => {
                        let i = r.below(p.len());
                        p[i] = p[(i + 1) % p.len()];
                    }
                    _ if !p.is_empty() => {
                        let i = r.below(p.len());
                        p[i] = axis(r, nd);
                    }
                    _ => p.push(0),
                }
            }
            Op::Permute(p)
        }
        5 => Op::Swap(axis(r, nd), axis(r, nd)),
        6 => Op::Invert(axis(r, nd)),
        7 => Op::Insert(if r.chance(90) {
            r.below(nd + 1)
        } else {
            axis(r, nd + 1)
        }),
        8 => {
            let ones: Vec<usize> = (0..nd).filter(|&k| shape[k] == 1).collect();
            Op::Remove(if !ones.is_empty() && r.chance(70) {
                r.pick(&ones)
            } else {
                axis(r, nd)
            })
        }
        9 => Op::Broadcast(broadcast_target(r, shape)),
        10 => Op::Reshape(
            reshape_target(r, shape),
            if r.chance(30) {
                Order::ColumnMajor
            } else {
                Order::RowMajor
            },
        ),
        _ => {
            let a = axis(r, nd);
            let n = shape.get(a).copied().unwrap_or(3);
            let i = if r.chance(85) {
                r.below(n.saturating_add(1))
            } else if r.chance(50) {
                n.saturating_add(1)
            } else {
                r.extreme_usize()
            };
            Op::SplitAt(a, i, r.chance(50))
        }
    }
}

/// What the model says an operation gives.
enum Want {
    Ok(Model),
    Err(Vec<ErrorKind>),
    /// See [`Reshape::Unknown`].
    Unknown(Model),
}

impl From<MResult<Model>> for Want {
    fn from(r: MResult<Model>) -> Self {
        match r {
            Ok(m) => Want::Ok(m),
            Err(k) => Want::Err(k),
        }
    }
}

fn want(m: &Model, op: &Op, elem: usize, r: &mut Rng) -> Want {
    match op {
        Op::Slice(e) => m.slice(e).into(),
        Op::SliceAxis(a, s) => m.slice_axis(*a, *s).into(),
        Op::IndexAxis(a, i) => m.index_axis(*a, *i).into(),
        Op::Reversed => Want::Ok(m.reversed()),
        Op::Permute(p) => m.permuted(p).into(),
        Op::Swap(a, b) => m.swapped(*a, *b).into(),
        Op::Invert(a) => m.inverted(*a).into(),
        Op::Insert(a) => m.inserted(*a).into(),
        Op::Remove(a) => m.removed(*a).into(),
        Op::Broadcast(t) => m.broadcast(t, elem).into(),
        Op::Reshape(t, o) => match model::reshape(m, t, *o, elem, r) {
            Reshape::Ok(x) => Want::Ok(x),
            Reshape::Err(k) => Want::Err(k),
            Reshape::Unknown(x) => Want::Unknown(x),
        },
        Op::SplitAt(a, i, second) => m
            .split_at(*a, *i)
            .map(|(x, y)| if *second { y } else { x })
            .into(),
    }
}

/// Compares a result with the model's answer; the model layout on agreement and `Ok`.
fn agree(
    what: &str,
    got: Result<(Vec<usize>, Vec<isize>, usize), devspan::Error>,
    want: Want,
) -> Result<Option<Model>, String> {
    let expected = match &want {
        Want::Ok(_) => vec![],
        Want::Err(k) => k.clone(),
        Want::Unknown(_) => vec![],
    };
    match (&got, want) {
        (Err(e), Want::Unknown(_)) => {
            ensure!(
                e.kind() == &IncompatibleLayout,
                "{what}: {e:?}, the model expects Ok or IncompatibleLayout"
            );
            Ok(None)
        }
        (Ok((s, st, o)), Want::Ok(m) | Want::Unknown(m)) => {
            m.same_as(s, st, *o).map_err(|e| format!("{what}: {e}"))?;
            Ok(Some(m))
        }
        _ => {
            expect_kinds(what, &got, &expected)?;
            Ok(None)
        }
    }
}

/// No kinds when `ok`, else `kind`.
fn unless(ok: bool, kind: ErrorKind) -> Vec<ErrorKind> {
    if ok { vec![] } else { vec![kind] }
}

fn parts_of<D: Dimension>(l: &Layout<D>) -> (Vec<usize>, Vec<isize>, usize) {
    (l.shape().to_vec(), l.strides().to_vec(), l.offset())
}

// ---------------------------------------------------------------------------------------------
// layout_ops

fn apply_layout(l: &Layout<IxDyn>, op: &Op) -> devspan::Result<Layout<IxDyn>> {
    match op {
        Op::Slice(e) => l.slice(&e[..]),
        Op::SliceAxis(a, s) => l.slice_axis(Axis(*a), *s),
        Op::IndexAxis(a, i) => l.index_axis(Axis(*a), *i),
        Op::Reversed => Ok(l.clone().reversed_axes()),
        Op::Permute(p) => l.permuted_axes(IxDyn(p)),
        Op::Swap(a, b) => l.swap_axes(*a, *b),
        Op::Invert(a) => l.invert_axis(Axis(*a)),
        Op::Insert(a) => l.insert_axis(Axis(*a)),
        Op::Remove(a) => l.remove_axis(Axis(*a)),
        Op::Broadcast(t) => l.broadcast(IxDyn(t)),
        Op::Reshape(t, Order::ColumnMajor) => {
            let mut rev = t.clone();
            rev.reverse();
            l.clone()
                .reversed_axes()
                .reshape(IxDyn(&rev))
                .map(|x| x.reversed_axes())
        }
        Op::Reshape(t, _) => l.reshape(IxDyn(t)),
        Op::SplitAt(a, i, second) => l
            .split_at(Axis(*a), *i)
            .map(|(x, y)| if *second { y } else { x }),
    }
}

/// Every query of `l` against the model `m` (valid against a span of `span_len` elements).
fn check_queries(l: &Layout<IxDyn>, m: &Model, span_len: usize, r: &mut Rng) -> Result<(), String> {
    let errs = model::layout_errors(
        &m.shape,
        &m.strides,
        l.offset() as i128,
        span_len as i128,
        1,
    );
    ensure!(
        errs.is_empty(),
        "{l:?} breaks the invariants against {span_len} elements: {errs:?}"
    );
    ensure!(l.len() as i128 == model::count(&m.shape), "len {}", l.len());
    ensure!(l.is_empty() == m.is_empty(), "is_empty");
    ensure!(l.ndim() == m.ndim(), "ndim");
    let reach = m.abs_reach().map(|(a, b)| (a as usize, b as usize));
    ensure!(
        l.reach() == reach,
        "reach {:?}, the model has {reach:?}",
        l.reach()
    );
    if !m.is_empty() {
        let idx: Vec<usize> = m
            .shape
            .iter()
            .map(|&n| if r.chance(30) { n - 1 } else { r.below(n) })
            .collect();
        ensure!(
            l.offset_of(&idx).map(|o| o as i128) == Some(m.offset_of(&idx)),
            "offset_of({idx:?})"
        );
        if m.ndim() > 0 {
            let mut bad = idx.clone();
            let k = r.below(m.ndim());
            bad[k] = m.shape[k] + r.below(2);
            ensure!(
                l.offset_of(&bad).is_none(),
                "offset_of({bad:?}) out of range"
            );
        }
    }
    ensure!(
        l.offset_of(&vec![0; m.ndim() + 1]).is_none(),
        "offset_of with too many axes"
    );
    ensure!(
        l.is_unaliased() == model::unaliased_rule(&m.shape, &m.strides),
        "is_unaliased {}",
        l.is_unaliased()
    );
    if let Some(offs) = model::brute_offsets(m) {
        let consecutive = |o: &[i128]| o.windows(2).all(|w| w[1] == w[0] + 1);
        ensure!(
            l.is_standard_layout() == consecutive(&offs),
            "is_standard_layout {}",
            l.is_standard_layout()
        );
        let t = m.reversed();
        let t_offs = model::brute_offsets(&t).unwrap_or_default();
        ensure!(
            l.is_fortran_layout() == consecutive(&t_offs),
            "is_fortran_layout {}",
            l.is_fortran_layout()
        );
        let mut sorted = offs.clone();
        sorted.sort_unstable();
        ensure!(
            l.is_dense() == consecutive(&sorted),
            "is_dense {}",
            l.is_dense()
        );
        if l.is_unaliased() {
            ensure!(
                sorted.windows(2).all(|w| w[0] != w[1]),
                "is_unaliased but an offset repeats"
            );
        }
    }
    Ok(())
}

#[derive(Debug)]
pub(crate) struct Chain {
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
    span_len: usize,
    elem: usize,
    writable: bool,
    seed: u64,
    steps: usize,
}

fn generate(r: &mut Rng) -> Chain {
    let (shape, strides, offset, span_len) = super::raw_parts::parts(r);
    Chain {
        shape,
        strides,
        offset,
        span_len,
        elem: r.below(4),
        writable: r.chance(50),
        seed: r.next(),
        steps: 1 + r.below(6),
    }
}

fn layout_case(c: &Chain) -> Verdict {
    let mut r = Rng::new(c.seed);
    let strides: Vec<i128> = c.strides.iter().map(|&s| s as i128).collect();
    let errs = model::layout_errors(&c.shape, &strides, c.offset as i128, c.span_len as i128, 1);
    let l = Layout::new_strided(IxDyn(&c.shape), &c.strides, c.offset, c.span_len);
    let first = expect_kinds("Layout::new_strided", &l, &errs)?;
    let Ok(mut l) = l else { return Ok(first) };
    let mut m = Model::from_parts(&c.shape, &c.strides, c.offset);
    m.same_as(l.shape(), l.strides(), l.offset())?;
    check_queries(&l, &m, c.span_len, &mut r)?;
    // try_contiguous of the same shape.
    let tc = Layout::try_contiguous(IxDyn(&c.shape));
    let tce = unless(model::size_fits(&c.shape, 1), Overflow);
    expect_kinds("Layout::try_contiguous", &tc, &tce)?;
    if let Ok(tc) = &tc {
        ensure!(
            tc.is_standard_layout() && tc.offset() == 0,
            "try_contiguous is not standard: {tc:?}"
        );
    }
    let mut outcome = Outcome::Ok;
    let mut trace = Vec::new();
    for _ in 0..c.steps {
        let op = gen_op(&mut r, &m.shape);
        trace.push(format!("{op:?}"));
        let got = apply_layout(&l, &op);
        let w = want(&m, &op, 1, &mut r);
        let what = format!("after {trace:?}");
        if let Some(next) = agree(&what, got.as_ref().map(parts_of).map_err(Clone::clone), w)? {
            l = got.map_err(|e| e.to_string())?;
            m = Model {
                offset: l.offset() as i128,
                strides: l.strides().iter().map(|&s| s as i128).collect(),
                ..next
            };
            check_queries(&l, &m, c.span_len, &mut r).map_err(|e| format!("{what}: {e}"))?;
            let d2 = l.clone().into_dimensionality::<Ix2>();
            expect_kinds(
                "into_dimensionality::<Ix2>",
                &d2,
                &unless(m.ndim() == 2, ShapeMismatch),
            )?;
        } else if let Err(e) = &got {
            outcome = e.into();
        }
    }
    Ok(outcome)
}

#[test]
fn layout_ops() {
    super::run("layout_ops", 5000, generate, layout_case);
}

// ---------------------------------------------------------------------------------------------
// view_ops

/// What a view result looks like from outside.
struct Got {
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
    ptr: u64,
    span: Result<(u64, usize), ErrorKind>,
    unaliased: bool,
}

fn got<S: SpanData, D: Dimension>(v: &DeviceBase<S, D>) -> Got {
    Got {
        shape: v.shape().to_vec(),
        strides: v.strides().to_vec(),
        offset: v.layout().offset(),
        ptr: v.device_ptr(),
        span: v
            .span()
            .map(|s| (s.device_ptr(), s.len()))
            .map_err(|e| e.kind().clone()),
        unaliased: v.layout().is_unaliased(),
    }
}

/// Checks a view result against the model `m` (offsets relative to `FAKE_PTR`), within the
/// original span of `span_len` elements of `size` bytes.
fn check_view(
    g: &Got,
    m: &Model,
    size: usize,
    span_len: usize,
    writable: bool,
) -> Result<(), String> {
    let s = size as i128;
    let at = |off: i128| FAKE_PTR as i128 + off * s;
    if !m.is_empty() {
        ensure!(
            g.ptr as i128 == at(m.offset),
            "device_ptr {:#x}, the model has {:#x}",
            g.ptr,
            at(m.offset)
        );
    }
    match g.span {
        Ok((p, len)) => {
            let (p, len) = (p as i128, len as i128);
            ensure!(
                p >= FAKE_PTR as i128 && p + len * s <= at(span_len as i128),
                "span {p:#x}+{len} leaves the original span"
            );
            let offset = (g.ptr as i128 - p) / s;
            ensure!(offset == g.offset as i128, "device_ptr and offset disagree");
            let errs = model::layout_errors(&g.shape, &m.strides, offset, len, size);
            ensure!(
                errs.is_empty(),
                "the view breaks the invariants against its span: {errs:?}"
            );
        }
        Err(Aliasing) if writable => {}
        Err(ref k) => return Err(format!("span(): {k:?}")),
    }
    if writable {
        ensure!(g.unaliased, "a writable view fails invariant 4");
        if let Some(mut offs) = model::brute_offsets(m) {
            offs.sort_unstable();
            ensure!(
                offs.windows(2).all(|w| w[0] != w[1]),
                "a writable view reaches an element twice"
            );
        }
    }
    Ok(())
}

fn to_model(g: &Got, m: Model) -> Model {
    Model {
        strides: g.strides.iter().map(|&s| s as i128).collect(),
        ..m
    }
}

/// A read-only view operation, in its consuming or borrowing form.
fn apply_view<T: DeviceElement>(
    v: &DeviceView<'static, T, IxDyn>,
    op: &Op,
    borrow: bool,
) -> devspan::Result<DeviceView<'static, T, IxDyn>> {
    let c = v.clone();
    match op {
        Op::Slice(e) if borrow => v.try_slice(&e[..]),
        Op::Slice(e) => c.try_slice_move(&e[..]),
        Op::SliceAxis(a, s) if borrow => v.try_slice_axis(Axis(*a), *s),
        Op::SliceAxis(a, s) => c.try_slice_axis_move(Axis(*a), *s),
        Op::IndexAxis(a, i) if borrow => v.try_index_axis(Axis(*a), *i),
        Op::IndexAxis(a, i) => c.try_index_axis_move(Axis(*a), *i),
        Op::Reversed if borrow => Ok(v.t()),
        Op::Reversed => Ok(c.reversed_axes()),
        Op::Permute(p) => c.try_permuted_axes(IxDyn(p)),
        Op::Swap(a, b) => {
            let mut c = c;
            c.try_swap_axes(*a, *b).map(|()| c)
        }
        Op::Invert(a) => {
            let mut c = c;
            c.try_invert_axis(Axis(*a)).map(|()| c)
        }
        Op::Insert(a) => c.try_insert_axis(Axis(*a)),
        Op::Remove(a) => c.try_remove_axis(Axis(*a)),
        Op::Broadcast(t) => v.broadcast(IxDyn(t)),
        Op::Reshape(t, o) => c.into_shape_with_order((IxDyn(t), *o)),
        Op::SplitAt(a, i, second) => c
            .try_split_at(Axis(*a), *i)
            .map(|(x, y)| if *second { y } else { x }),
    }
}

/// A writable view operation on a fresh view of `m`'s layout over the original span; the
/// result as seen from outside, and for a split, whether the two halves' spans were refused.
fn apply_view_mut<T: DeviceElement>(
    m: &Model,
    span_len: usize,
    op: &Op,
    owners: &Owners,
) -> Result<devspan::Result<Got>, String> {
    let strides: Vec<isize> = m.strides.iter().map(|&s| s as isize).collect();
    // SAFETY: the address is never dereferenced; only metadata is read.
    let w = unsafe {
        DeviceViewMut::<T, _>::from_raw_parts_mut(
            FAKE_PTR,
            span_len,
            IxDyn(&m.shape),
            &strides,
            if m.is_empty() { 0 } else { m.offset as usize },
            0,
            owners.owner(),
        )
    }
    .map_err(|e| format!("rebuilding the writable view {m:?}: {e}"))?;
    let g = |r: devspan::Result<DeviceViewMut<'static, T, IxDyn>>| r.map(|v| got(&v));
    Ok(match op {
        Op::Slice(e) => g(w.try_slice_move(&e[..])),
        Op::SliceAxis(a, s) => g(w.try_slice_axis_move(Axis(*a), *s)),
        Op::IndexAxis(a, i) => g(w.try_index_axis_move(Axis(*a), *i)),
        Op::Reversed => g(Ok(w.reversed_axes())),
        Op::Permute(p) => g(w.try_permuted_axes(IxDyn(p))),
        Op::Swap(a, b) => {
            let mut w = w;
            g(w.try_swap_axes(*a, *b).map(|()| w))
        }
        Op::Invert(a) => {
            let mut w = w;
            g(w.try_invert_axis(Axis(*a)).map(|()| w))
        }
        Op::Insert(a) => g(w.try_insert_axis(Axis(*a))),
        Op::Remove(a) => g(w.try_remove_axis(Axis(*a))),
        // Broadcasting gives a read-only view.
        Op::Broadcast(t) => w.broadcast(IxDyn(t)).map(|v| got(&v)),
        Op::Reshape(t, o) => g(w.into_shape_with_order((IxDyn(t), *o))),
        Op::SplitAt(a, i, second) => match w.try_split_at(Axis(*a), *i) {
            Ok((x, y)) => {
                let (gx, gy) = (got(&x), got(&y));
                // The halves' spans are refused exactly when their reaches interleave.
                let reach = |g: &Got| {
                    let mm = Model::from_parts(&g.shape, &g.strides, 0);
                    mm.abs_reach().map(|(lo, hi)| {
                        (
                            g.ptr as i128 + lo * std::mem::size_of::<T>() as i128,
                            g.ptr as i128 + hi * std::mem::size_of::<T>() as i128,
                        )
                    })
                };
                let interleave = matches!((reach(&gx), reach(&gy)), (Some((a0, a1)), Some((b0, b1))) if a0 <= b1 && b0 <= a1);
                for h in [&gx, &gy] {
                    ensure!(
                        h.span.is_err() == interleave,
                        "split halves: span() is {:?}, reaches interleave: {interleave}",
                        h.span.as_ref().map(|_| ())
                    );
                }
                Ok(if *second { gy } else { gx })
            }
            Err(e) => Err(e),
        },
    })
}

fn view_chain<T: DeviceElement>(c: &Chain) -> Verdict {
    let size = std::mem::size_of::<T>();
    let mut r = Rng::new(c.seed);
    let owners = Owners::default();
    let strides: Vec<i128> = c.strides.iter().map(|&s| s as i128).collect();
    let mut errs = model::layout_errors(
        &c.shape,
        &strides,
        c.offset as i128,
        c.span_len as i128,
        size,
    );
    if c.span_len as i128 * size as i128 > IMAX {
        errs.push(Overflow);
    }
    let ro_errs: Vec<ErrorKind> = errs.clone();
    if errs.is_empty() && c.writable && !model::unaliased_rule(&c.shape, &strides) {
        errs.push(Aliasing);
    }
    // SAFETY: the address is never dereferenced; only metadata is read.
    let v = unsafe {
        DeviceView::<T, _>::from_raw_parts(
            FAKE_PTR,
            c.span_len,
            IxDyn(&c.shape),
            &c.strides,
            c.offset,
            0,
            owners.owner(),
        )
    };
    let first = expect_kinds("DeviceView::from_raw_parts", &v, &ro_errs)?;
    if c.writable {
        // SAFETY: as above.
        let w = unsafe {
            DeviceViewMut::<T, _>::from_raw_parts_mut(
                FAKE_PTR,
                c.span_len,
                IxDyn(&c.shape),
                &c.strides,
                c.offset,
                0,
                owners.owner(),
            )
        };
        let first = expect_kinds("DeviceViewMut::from_raw_parts_mut", &w, &errs)?;
        if w.is_err() {
            drop(v);
            owners.all_dropped()?;
            return Ok(first);
        }
    }
    let Ok(mut v) = v else {
        owners.all_dropped()?;
        return Ok(first);
    };
    let mut m = Model::from_parts(&c.shape, &c.strides, c.offset);
    let mut outcome = Outcome::Ok;
    let mut trace = Vec::new();
    for _ in 0..c.steps {
        let op = gen_op(&mut r, &m.shape);
        let borrow = r.chance(40);
        trace.push(format!("{op:?}"));
        let what = format!(
            "{} after {trace:?}",
            if c.writable {
                "DeviceViewMut"
            } else {
                "DeviceView"
            }
        );
        let w = want(&m, &op, size, &mut r);
        let w2 = match &w {
            Want::Ok(x) => Want::Ok(x.clone()),
            Want::Err(k) => Want::Err(k.clone()),
            Want::Unknown(x) => Want::Unknown(x.clone()),
        };
        if c.writable {
            let g = apply_view_mut::<T>(&m, c.span_len, &op, &owners)?;
            let as_parts = g
                .as_ref()
                .map(|g| (g.shape.clone(), g.strides.clone(), 0usize))
                .map_err(Clone::clone);
            // Offsets are compared through device_ptr (spans move when split).
            let w = match w {
                Want::Ok(x) => Want::Ok(Model { offset: 0, ..x }),
                Want::Unknown(x) => Want::Unknown(Model { offset: 0, ..x }),
                e => e,
            };
            match agree(&what, as_parts, w)? {
                Some(_) => {
                    let g = g.map_err(|e| e.to_string())?;
                    let (Want::Ok(next) | Want::Unknown(next)) = w2 else {
                        unreachable!()
                    };
                    let next = to_model(&g, next);
                    let writable_result = !matches!(op, Op::Broadcast(_));
                    check_view(&g, &next, size, c.span_len, writable_result)
                        .map_err(|e| format!("{what}: {e}"))?;
                    if writable_result {
                        m = next;
                    }
                }
                None => {
                    if let Err(e) = &g {
                        outcome = e.into();
                    }
                }
            }
        } else {
            let res = apply_view(&v, &op, borrow);
            let as_parts = res
                .as_ref()
                .map(|x| (x.shape().to_vec(), x.strides().to_vec(), 0usize))
                .map_err(Clone::clone);
            let w = match w {
                Want::Ok(x) => Want::Ok(Model { offset: 0, ..x }),
                Want::Unknown(x) => Want::Unknown(Model { offset: 0, ..x }),
                e => e,
            };
            if let Op::Reshape(t, o) = &op {
                // to_shape: a view where no copy is needed; a copy needs a stream, which a view
                // over raw memory does not have.
                let ts = v.to_shape((IxDyn(t), *o));
                let k: Vec<ErrorKind> = match &w2 {
                    Want::Ok(_) => vec![],
                    Want::Err(k) if k.contains(&IncompatibleLayout) => vec![InvalidArgument],
                    Want::Err(k) => k.clone(),
                    Want::Unknown(_) => vec![],
                };
                match (&ts, &w2) {
                    (Err(e), Want::Unknown(_)) => {
                        ensure!(e.kind() == &InvalidArgument, "to_shape: {e:?}")
                    }
                    _ => {
                        expect_kinds("to_shape", &ts, &k)?;
                    }
                }
                if let Ok(ts) = &ts {
                    ensure!(ts.is_view(), "to_shape copied");
                }
            }
            match agree(&what, as_parts, w)? {
                Some(_) => {
                    let x = res.map_err(|e| e.to_string())?;
                    let g = got(&x);
                    let (Want::Ok(next) | Want::Unknown(next)) = w2 else {
                        unreachable!()
                    };
                    let next = to_model(&g, next);
                    check_view(&g, &next, size, c.span_len, false)
                        .map_err(|e| format!("{what}: {e}"))?;
                    if let Op::SplitAt(..) = op {
                        // Read-only halves get spans of exactly their reach.
                        let (p, len) = g.span.map_err(|k| format!("span(): {k:?}"))?;
                        match next.abs_reach() {
                            Some((lo, hi)) => ensure!(
                                p as i128 == FAKE_PTR as i128 + lo * size as i128
                                    && len as i128 == hi - lo + 1,
                                "{what}: the half's span {p:#x}+{len} is not its reach {lo}..={hi}"
                            ),
                            None => ensure!(len == 0, "{what}: an empty half has a span of {len}"),
                        }
                    }
                    let d2 = x.clone().into_dimensionality::<Ix2>();
                    expect_kinds(
                        "into_dimensionality::<Ix2>",
                        &d2,
                        &unless(next.ndim() == 2, ShapeMismatch),
                    )?;
                    m = next;
                    v = x;
                }
                None => {
                    if let Err(e) = &res {
                        outcome = e.into();
                    }
                }
            }
        }
    }
    drop(v);
    owners.all_dropped()?;
    Ok(outcome)
}

fn view_case(c: &Chain) -> Verdict {
    match c.elem {
        0 => view_chain::<u8>(c),
        1 => view_chain::<u16>(c),
        2 => view_chain::<f32>(c),
        _ => view_chain::<f64>(c),
    }
}

#[test]
fn view_ops() {
    super::run("view_ops", 5000, generate, view_case);
}
