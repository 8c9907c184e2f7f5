//! Property tests for `devspan::Layout`: every metadata operation against the same operation on
//! an ndarray view over a host buffer whose element `i` holds `i` (so reading the view yields the
//! element offset), contiguity queries against brute force, and "never panics" properties for
//! raw parts and bad arguments.
//!
//! Every property runs `CASES` (2,000) random cases, or `LAYOUT_PROPS_CASES` of them (CI runs
//! 10^4); `MIRI_CASES` under Miri. The cases come from `cases::for_each_case`
//! (tests/common/cases.rs): a failure names the case, the seed and the whole input,
//! `DEVSPAN_PROP_SEED` sets the seed (decimal or `0x` hex; a fixed one by default), and failing
//! inputs are not shrunk.
//!
//! Comparison rules (see `check_same`):
//! - shapes must be equal;
//! - strides must be equal on every axis of length > 1 of a non-empty layout (ndarray and
//!   devspan both leave the strides of length-0/1 axes, and of every axis of an empty layout,
//!   unspecified);
//! - for every logical index of ndarray's `indexed_iter()`, the element read (= its offset in
//!   the buffer) equals `layout.offset_of(index)`.
//!
//! Where devspan's semantics intentionally differ from ndarray's they are encoded explicitly:
//! `Layout::remove_axis` only removes axes of length 1 (ndarray's `remove_axis` is
//! `index_axis_move(axis, 0)` for any nonzero length), and `Layout::reshape` is compared with
//! ndarray's `to_shape` (`Ok` exactly when `to_shape` returns a view).

use std::cell::Cell;
use std::fmt::Debug;
use std::ops::RangeInclusive;
use std::panic::{AssertUnwindSafe, catch_unwind};

use devspan::{ErrorKind, Layout};
use ndarray::{ArrayView, Axis, IxDyn, ShapeBuilder, Slice, SliceInfoElem};
use rand::Rng as _;
use rand::rngs::StdRng;

use crate::cases::{for_each_case, vec_of, weighted};

const CASES: usize = 2_000;
/// Cases per property under Miri, which interprets every step.
const MIRI_CASES: usize = 6;
/// Upper bound on the number of elements (product of the nonzero axis lengths) of the layouts
/// compared element by element (smaller under Miri).
const MAX_ELEMS: usize = if cfg!(miri) { 64 } else { 4096 };

/// Cases per property.
fn cases() -> usize {
    // LAYOUT_PROPS_CASES sets the count: CI's 10^4, or fewer for local debugging; a handful
    // under Miri (`.ci/miri`).
    if cfg!(miri) {
        MIRI_CASES
    } else {
        std::env::var("LAYOUT_PROPS_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CASES)
    }
}

// ---------------------------------------------------------------------------------------------
// Panic plumbing: ndarray panics on bad arguments (expected, silenced); a devspan panic is a test
// failure carrying the panic message.
// ---------------------------------------------------------------------------------------------

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

fn install_quiet_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                prev(info)
            }
        }));
    });
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_string()
    }
}

/// Runs `f` with the panic hook silenced; `Err(message)` if it panicked.
fn quiet<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    install_quiet_hook();
    let was = QUIET.with(|q| q.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    r.map_err(panic_message)
}

/// Runs a devspan call; a panic becomes a test failure naming `what`.
fn dev<R>(what: impl FnOnce() -> String, f: impl FnOnce() -> R) -> Result<R, String> {
    quiet(f).map_err(|m| format!("devspan panicked: {m}\n  in: {}", what()))
}

// ---------------------------------------------------------------------------------------------
// Small deterministic generator used to turn one random seed into concrete op arguments that
// fit the current layout (so op chains stay mostly valid while shapes change along the chain).
// ---------------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    fn next(&mut self) -> u64 {
        // SplitMix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`0` when `n == 0`).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
    /// A usize that is out of range for something of length `n`.
    fn bad_usize(&mut self, n: usize) -> usize {
        match self.below(7) {
            0 => n,
            1 => n.saturating_add(1),
            2 => n.saturating_add(7),
            3 => usize::MAX,
            4 => usize::MAX / 2,
            5 => isize::MAX as usize + 1,
            _ => 1 << 40,
        }
    }
    /// An isize position that is out of range (as a start/end/index) for an axis of length `n`.
    fn bad_isize(&mut self, n: usize) -> isize {
        let n = n.min(isize::MAX as usize - 8) as isize;
        match self.below(7) {
            0 => n + 1,
            1 => -(n + 1),
            2 => isize::MIN,
            3 => isize::MAX,
            4 => -isize::MAX,
            5 => 1 << 40,
            _ => -(1 << 40),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Concrete operations.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
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
    Reshape(Vec<usize>),
    /// `(axis, index, take_right_half)`
    SplitAt(usize, usize, bool),
}

const N_OP_KINDS: u8 = 12;

fn prod_nz(s: &[usize]) -> usize {
    s.iter().fold(1usize, |a, &d| a.saturating_mul(d.max(1)))
}

/// A valid (or, with `wild`, possibly invalid) slice element for an axis of length `n`.
fn slice_elem(r: &mut Rng, n: usize, wild: bool) -> SliceInfoElem {
    let ni = n as isize;
    if n > 0 && r.below(100) < 15 && !wild {
        let i = if r.chance(50) {
            r.below(n) as isize
        } else {
            -(1 + r.below(n) as isize)
        };
        return SliceInfoElem::Index(i);
    }
    if wild && r.chance(30) {
        return SliceInfoElem::Index(if r.chance(50) && n > 0 {
            r.below(n) as isize
        } else {
            r.bad_isize(n)
        });
    }
    // `p` in 0..=n as a start/end, written from the front or (if p < n) from the back
    let form = |r: &mut Rng, p: usize| -> isize {
        if p < n && r.chance(40) {
            p as isize - ni
        } else {
            p as isize
        }
    };
    let full = r.chance(40); // `..;step`, so that slices of several axes are not all tiny
    let (a, b) = if n > 0 && r.chance(85) {
        // a non-empty range a..b
        let a = r.below(n);
        (a, a + 1 + r.below(n - a))
    } else {
        // anything, including empty and start > end (which clamps to empty)
        (r.below(n + 1), r.below(n + 1))
    };
    let mut start = if full { 0 } else { form(r, a) };
    let mut end = if full || (b == n && r.chance(50)) {
        None
    } else {
        Some(form(r, b))
    };
    let mag = [1, 1, 1, 1, 2, 2, 3, 4][r.below(8)];
    let mut step = mag * if r.chance(50) { 1 } else { -1 };
    if wild {
        match r.below(3) {
            0 => start = r.bad_isize(n),
            1 => end = Some(r.bad_isize(n)),
            _ => {
                step = match r.below(3) {
                    0 => 0,
                    1 => isize::MIN,
                    _ => isize::MAX,
                }
            }
        }
    }
    SliceInfoElem::Slice { start, end, step }
}

fn factor_shape(r: &mut Rng, n: usize) -> Vec<usize> {
    if n == 0 {
        let rank = 1 + r.below(4);
        let mut s: Vec<usize> = (0..rank).map(|_| r.below(5)).collect();
        let z = r.below(rank);
        s[z] = 0;
        return s;
    }
    let mut primes = Vec::new();
    let mut m = n;
    let mut p = 2;
    while p * p <= m && p < 1000 {
        while m % p == 0 {
            primes.push(p);
            m /= p;
        }
        p += 1;
    }
    if m > 1 {
        primes.push(m);
    }
    let rank = if primes.is_empty() {
        r.below(3)
    } else {
        1 + r.below(primes.len().min(6))
    };
    let mut s = vec![1usize; rank];
    for p in primes {
        let k = r.below(rank);
        s[k] *= p;
    }
    while s.len() < 8 && r.chance(25) {
        let at = r.below(s.len() + 1);
        s.insert(at, 1);
    }
    s
}

/// Turns `(kind, seed)` into a concrete op for the layout of shape `sh`. With probability
/// `wild_pct` percent the arguments are deliberately bad (out-of-range axes, indices, slice
/// bounds, zero steps, non-permutations, incompatible broadcast/reshape targets). With `big`,
/// valid broadcasts may also go to huge shapes (only for tests that never enumerate elements).
fn make_op(kind: u8, seed: u64, sh: &[usize], wild_pct: u64, big: bool) -> Op {
    let mut r = Rng::new(seed);
    let nd = sh.len();
    let wild = r.chance(wild_pct);
    let axis = |r: &mut Rng, wild: bool| {
        if wild || nd == 0 {
            r.bad_usize(nd)
        } else {
            r.below(nd)
        }
    };
    match kind % N_OP_KINDS {
        0 => {
            let mut elems = Vec::new();
            for &n in sh {
                while r.chance(10) {
                    elems.push(SliceInfoElem::NewAxis);
                }
                elems.push(slice_elem(&mut r, n, false));
            }
            while r.chance(10) {
                elems.push(SliceInfoElem::NewAxis);
            }
            if wild {
                match r.below(3) {
                    0 if !elems.is_empty() => {
                        let k = r.below(elems.len());
                        let n = if nd > 0 { sh[r.below(nd)] } else { 0 };
                        elems[k] = slice_elem(&mut r, n, true);
                    }
                    1 if !elems.is_empty() => {
                        // one element too few (unless it removes a NewAxis)
                        let k = r.below(elems.len());
                        elems.remove(k);
                    }
                    _ => {
                        let k = r.below(elems.len() + 1);
                        elems.insert(
                            k,
                            SliceInfoElem::Slice {
                                start: 0,
                                end: None,
                                step: 1,
                            },
                        );
                    }
                }
            }
            Op::Slice(elems)
        }
        1 => {
            let w = wild && r.chance(30);
            let a = axis(&mut r, w);
            let n = sh.get(a).copied().unwrap_or(0);
            let e = slice_elem(&mut r, n, wild);
            match e {
                SliceInfoElem::Slice { start, end, step } => {
                    Op::SliceAxis(a, Slice { start, end, step })
                }
                _ => Op::SliceAxis(a, Slice::new(0, None, 1)),
            }
        }
        2 => {
            let w = wild && r.chance(50);
            let a = axis(&mut r, w);
            let n = sh.get(a).copied().unwrap_or(0);
            let i = if wild || n == 0 {
                r.bad_usize(n)
            } else {
                r.below(n)
            };
            Op::IndexAxis(a, i)
        }
        3 => Op::Reversed,
        4 => {
            let mut p: Vec<usize> = (0..nd).collect();
            r.shuffle(&mut p);
            if wild {
                match r.below(3) {
                    0 if nd >= 2 => {
                        let (i, j) = (r.below(nd), r.below(nd));
                        p[i] = p[j];
                        if i == j {
                            p[i] = r.bad_usize(nd);
                        }
                    }
                    1 if nd >= 1 => {
                        let k = r.below(nd);
                        p.remove(k);
                    }
                    2 => p.push(if r.chance(50) {
                        r.below(nd + 1)
                    } else {
                        r.bad_usize(nd)
                    }),
                    _ => p.push(nd),
                }
            }
            Op::Permute(p)
        }
        5 => {
            let w = wild && r.chance(50);
            let a = axis(&mut r, w);
            let b = axis(&mut r, wild);
            Op::Swap(a, b)
        }
        6 => Op::Invert(axis(&mut r, wild)),
        7 => Op::Insert(if wild {
            r.bad_usize(nd + 1)
        } else {
            r.below(nd + 1)
        }),
        8 => {
            let ones: Vec<usize> = (0..nd).filter(|&k| sh[k] == 1).collect();
            let a = if wild {
                r.bad_usize(nd)
            } else if !ones.is_empty() && r.chance(75) {
                ones[r.below(ones.len())]
            } else {
                axis(&mut r, false)
            };
            Op::Remove(a)
        }
        9 => {
            let lead = r.below(3);
            let mut t: Vec<usize> = (0..lead)
                .map(|_| if r.chance(10) { 0 } else { 1 + r.below(3) })
                .collect();
            for &n in sh {
                t.push(if n == 1 && r.chance(70) {
                    if r.chance(10) { 0 } else { 1 + r.below(4) }
                } else {
                    n
                });
            }
            if prod_nz(&t) > MAX_ELEMS {
                t = std::iter::repeat_n(1, lead)
                    .chain(sh.iter().copied())
                    .collect();
            }
            if wild {
                match r.below(3) {
                    0 if nd > 0 => {
                        // drop a leading axis: fewer axes than the source
                        t.remove(0);
                        if t.len() >= nd {
                            let k = t.len() - nd;
                            t.remove(k);
                        }
                    }
                    1 if nd > 0 && (big || sh.iter().any(|&n| n != 1)) => {
                        // a source axis of length n != 1 to a different length; with `big`, an
                        // axis of length 1 may also go to a huge (valid) length
                        let cands: Vec<usize> = (0..nd).filter(|&k| big || sh[k] != 1).collect();
                        let k = cands[r.below(cands.len())];
                        let tk = t.len() - nd + k;
                        t[tk] = if sh[k] == 1 {
                            r.bad_usize(usize::MAX)
                        } else {
                            sh[k] + 1 + r.below(3)
                        };
                    }
                    _ => {
                        t.insert(0, usize::MAX / 2 + r.below(3));
                        t.insert(0, 3);
                    }
                }
            }
            Op::Broadcast(t)
        }
        10 => {
            let n: usize = sh.iter().product();
            let mut t = factor_shape(&mut r, n);
            if wild {
                match r.below(3) {
                    0 => {
                        let rank = r.below(5);
                        t = (0..rank).map(|_| r.below(7)).collect();
                    }
                    1 => t.push(2 + r.below(3)),
                    _ => {
                        t.push(usize::MAX / 2);
                        t.push(4);
                    }
                }
            }
            Op::Reshape(t)
        }
        _ => {
            let w = wild && r.chance(50);
            let a = axis(&mut r, w);
            let n = sh.get(a).copied().unwrap_or(0);
            let i = if wild {
                r.bad_usize(n + 1)
            } else {
                r.below(n + 1)
            };
            Op::SplitAt(a, i, r.chance(50))
        }
    }
}

fn apply_dev(l: &Layout<IxDyn>, op: &Op) -> devspan::Result<Layout<IxDyn>> {
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
        Op::Reshape(t) => l.reshape(IxDyn(t)),
        Op::SplitAt(a, i, right) => l
            .split_at(Axis(*a), *i)
            .map(|(x, y)| if *right { y } else { x }),
    }
}

enum Nd<'a> {
    View(ArrayView<'a, u32, IxDyn>),
    /// ndarray panicked or returned an error / `None`.
    Refused(String),
    /// `to_shape` needed a copy.
    Copied,
}

/// Extends the lifetime of a view borrowed from a view of `'a` data to `'a` (ndarray's
/// `broadcast` and `to_shape` tie the result to `&self`, but it points into the same data).
fn extend<'a>(v: ArrayView<'_, u32, IxDyn>) -> ArrayView<'a, u32, IxDyn> {
    // SAFETY: only the lifetime changes; the data outlives 'a.
    unsafe { std::mem::transmute::<ArrayView<'_, u32, IxDyn>, ArrayView<'a, u32, IxDyn>>(v) }
}

fn apply_nd<'a>(v: &ArrayView<'a, u32, IxDyn>, op: &Op) -> Nd<'a> {
    let v = v.clone();
    let r = quiet(move || -> Nd<'a> {
        match op {
            Op::Slice(e) => Nd::View(v.slice_move(&e[..])),
            Op::SliceAxis(a, s) => {
                let mut w = v;
                w.slice_axis_inplace(Axis(*a), *s);
                Nd::View(w)
            }
            Op::IndexAxis(a, i) => Nd::View(v.index_axis_move(Axis(*a), *i)),
            Op::Reversed => Nd::View(v.reversed_axes()),
            Op::Permute(p) => Nd::View(v.permuted_axes(IxDyn(p))),
            Op::Swap(a, b) => {
                let mut w = v;
                w.swap_axes(*a, *b);
                Nd::View(w)
            }
            Op::Invert(a) => {
                let mut w = v;
                w.invert_axis(Axis(*a));
                Nd::View(w)
            }
            Op::Insert(a) => Nd::View(v.insert_axis(Axis(*a))),
            // devspan's remove_axis: only axes of length 1 (ndarray's removes any nonzero axis).
            Op::Remove(a) => {
                if *a < v.ndim() && v.shape()[*a] == 1 {
                    Nd::View(v.index_axis_move(Axis(*a), 0))
                } else {
                    Nd::Refused("not an axis of length 1".into())
                }
            }
            Op::Broadcast(t) => match v.broadcast(IxDyn(t)) {
                Some(b) => Nd::View(extend(b)),
                None => Nd::Refused("broadcast returned None".into()),
            },
            Op::Reshape(t) => match v.to_shape(IxDyn(t)) {
                Ok(c) if c.is_view() => Nd::View(extend(c.view())),
                Ok(_) => Nd::Copied,
                Err(e) => Nd::Refused(e.to_string()),
            },
            Op::SplitAt(a, i, right) => {
                let (x, y) = v.split_at(Axis(*a), *i);
                Nd::View(if *right { y } else { x })
            }
        }
    });
    match r {
        Ok(nd) => nd,
        Err(m) => Nd::Refused(format!("panic: {m}")),
    }
}

// ---------------------------------------------------------------------------------------------
// Building layouts and the matching ndarray views.
// ---------------------------------------------------------------------------------------------

/// Calls `f` with every multi-index of `shape` in row-major order.
fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        f(&idx);
        let mut k = shape.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// Every reachable offset of a small layout, by brute force in i128.
fn brute_offsets(shape: &[usize], strides: &[isize], offset: usize) -> Vec<i128> {
    let mut out = Vec::new();
    for_each_index(shape, |idx| {
        let o = offset as i128
            + idx
                .iter()
                .zip(strides)
                .map(|(&i, &s)| i as i128 * s as i128)
                .sum::<i128>();
        out.push(o);
    });
    out
}

/// An ndarray view with the same shape, strides and offset as the (non-empty) layout `l` over
/// `data` (element `i` of `data` holds `i`): a view with the absolute strides from the lowest
/// reachable element, then `invert_axis` on every negative-stride axis. An empty layout gets an
/// empty standard view (no element, strides unspecified).
fn nd_view<'a>(l: &Layout<IxDyn>, data: &'a [u32]) -> ArrayView<'a, u32, IxDyn> {
    match l.reach() {
        None => ArrayView::from_shape(IxDyn(l.shape()), &data[..0]).unwrap(),
        Some((lo, _)) => {
            let abs: Vec<usize> = l.strides().iter().map(|s| s.unsigned_abs()).collect();
            let mut v =
                ArrayView::from_shape(IxDyn(l.shape()).strides(IxDyn(&abs)), &data[lo..]).unwrap();
            for (k, &s) in l.strides().iter().enumerate() {
                if s < 0 {
                    v.invert_axis(Axis(k));
                }
            }
            v
        }
    }
}

/// The comparison rules of the module docs, plus the contiguity queries against ndarray and
/// brute force (property 2 along every step of every chain).
fn check_same(
    l: &Layout<IxDyn>,
    v: &ArrayView<u32, IxDyn>,
    ctx: &dyn Fn() -> String,
) -> Result<(), String> {
    case_assert_eq!(l.shape(), v.shape(), "shape differs\n{}", ctx());
    case_assert_eq!(l.ndim(), v.ndim());
    case_assert_eq!(l.len(), v.len(), "len differs\n{}", ctx());
    case_assert_eq!(l.is_empty(), v.is_empty());
    if l.is_empty() {
        return Ok(());
    }
    for k in 0..l.ndim() {
        if l.shape()[k] > 1 {
            case_assert_eq!(
                l.strides()[k],
                v.strides()[k],
                "stride of axis {} differs\n{}",
                k,
                ctx()
            );
        }
    }
    for (idx, &val) in v.indexed_iter() {
        let i = ndarray::Dimension::slice(&idx);
        case_assert_eq!(
            l.offset_of(i),
            Some(val as usize),
            "offset of index {:?} differs\n{}",
            i,
            ctx()
        );
    }
    // out-of-range indices are None
    if l.ndim() > 0 {
        let mut bad = vec![0usize; l.ndim()];
        bad[l.ndim() - 1] = l.shape()[l.ndim() - 1];
        case_assert_eq!(l.offset_of(&bad), None);
    }
    case_assert_eq!(l.offset_of(&vec![0; l.ndim() + 1]), None);
    check_queries(l, Some(v), ctx)
}

/// Property 2: contiguity queries against ndarray (`v`, when given) and brute force.
fn check_queries(
    l: &Layout<IxDyn>,
    v: Option<&ArrayView<u32, IxDyn>>,
    ctx: &dyn Fn() -> String,
) -> Result<(), String> {
    if let Some(v) = v
        && !v.is_empty()
    {
        case_assert_eq!(
            l.is_standard_layout(),
            v.is_standard_layout(),
            "is_standard_layout\n{}",
            ctx()
        );
        case_assert_eq!(
            l.is_fortran_layout(),
            v.t().is_standard_layout(),
            "is_fortran_layout\n{}",
            ctx()
        );
    }
    let mut offs = brute_offsets(l.shape(), l.strides(), l.offset());
    offs.sort_unstable();
    let repeats = offs.windows(2).any(|w| w[0] == w[1]);
    let gap_free = offs.windows(2).all(|w| w[1] == w[0] + 1);
    case_assert_eq!(
        l.is_dense(),
        !repeats && gap_free,
        "is_dense vs brute force (offsets {:?})\n{}",
        offs,
        ctx()
    );
    if l.is_unaliased() {
        case_assert!(
            !repeats,
            "is_unaliased() but some offset repeats\n{}",
            ctx()
        );
    }
    if let (Some(&lo), Some(&hi)) = (offs.first(), offs.last()) {
        case_assert_eq!(
            l.reach(),
            Some((lo as usize, hi as usize)),
            "reach\n{}",
            ctx()
        );
    } else {
        case_assert_eq!(l.reach(), None);
    }
    if l.is_standard_layout() && !l.is_empty() {
        // row-major order of indices walks consecutive offsets
        let mut prev: Option<usize> = None;
        let mut ok = true;
        for_each_index(l.shape(), |i| {
            let o = l.offset_of(i).unwrap();
            if let Some(p) = prev {
                ok &= o == p + 1;
            }
            prev = Some(o);
        });
        case_assert!(
            ok,
            "is_standard_layout but row-major offsets are not consecutive\n{}",
            ctx()
        );
    }
    Ok(())
}

/// Applies `ops` to `l` and to `v` side by side, comparing after every step. An op is `Ok` on
/// devspan exactly when ndarray accepts it (for reshape: when `to_shape` gives a view).
fn run_chain<'a>(
    mut l: Layout<IxDyn>,
    mut v: ArrayView<'a, u32, IxDyn>,
    ops: &[(u8, u64)],
    wild_pct: u64,
) -> Result<(), String> {
    let mut trace = format!("start: {l:?}");
    check_same(&l, &v, &|| trace.clone())?;
    for &(kind, seed) in ops {
        let op = make_op(kind, seed, l.shape(), wild_pct, false);
        trace.push_str(&format!("\n  then {op:?}"));
        let d = dev(|| trace.clone(), || apply_dev(&l, &op))?;
        let n = apply_nd(&v, &op);
        match (d, n) {
            (Ok(l2), Nd::View(v2)) => {
                trace.push_str(&format!(" -> {l2:?}"));
                check_same(&l2, &v2, &|| trace.clone())?;
                l = l2;
                v = v2;
            }
            (Err(e), Nd::Refused(_)) => {
                case_assert!(
                    !e.message().is_empty() && !e.to_string().is_empty(),
                    "empty error message\n{}",
                    trace
                );
                if let Op::Reshape(_) = op {
                    case_assert!(
                        matches!(e.kind(), ErrorKind::ShapeMismatch | ErrorKind::Overflow),
                        "reshape refused by ndarray (count mismatch) gave {:?}\n{}",
                        e,
                        trace
                    );
                }
            }
            (Err(e), Nd::Copied) => {
                case_assert_eq!(
                    e.kind(),
                    &ErrorKind::IncompatibleLayout,
                    "reshape needing a copy\n{}",
                    trace
                );
                case_assert!(!e.message().is_empty());
            }
            (Ok(l2), Nd::Refused(m)) => {
                return Err(format!(
                    "devspan accepted what ndarray refuses ({m}): got {l2:?}\n{trace}"
                ));
            }
            (Ok(l2), Nd::Copied) => {
                return Err(format!(
                    "devspan reshaped without copy ({l2:?}) where ndarray's to_shape copies\n{trace}"
                ));
            }
            (Err(e), Nd::View(v2)) => {
                return Err(format!(
                    "devspan refused ({e}) what ndarray accepts (shape {:?}, strides {:?})\n{trace}",
                    v2.shape(),
                    v2.strides()
                ));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Random inputs.
// ---------------------------------------------------------------------------------------------

fn cap_elems(mut s: Vec<usize>) -> Vec<usize> {
    while prod_nz(&s) > MAX_ELEMS {
        let k = (0..s.len()).max_by_key(|&k| s[k]).unwrap();
        s[k] /= 2;
    }
    s
}

fn dim_len(rng: &mut StdRng) -> usize {
    match weighted(rng, &[1, 4, 20, 2]) {
        0 => 0,
        1 => 1,
        2 => rng.random_range(2..=6),
        _ => rng.random_range(7..=16),
    }
}

/// Shapes of rank 0..=6 with at most `MAX_ELEMS` elements, mixing in 0- and 1-length axes.
fn small_shape(rng: &mut StdRng) -> Vec<usize> {
    cap_elems(vec_of(rng, 0..=6, dim_len))
}

/// `len` random operations (kinds and seeds for `make_op`).
fn random_ops(rng: &mut StdRng, len: RangeInclusive<usize>) -> Vec<(u8, u64)> {
    vec_of(rng, len, |r| (r.random_range(0..N_OP_KINDS), r.random()))
}

/// 1 to `max` random operations.
fn ops(rng: &mut StdRng, max: usize) -> Vec<(u8, u64)> {
    random_ops(rng, 1..=max)
}

/// Raw ingredients of a small valid strided layout (see `build_small_strided`).
#[derive(Clone, Debug)]
struct StridedSeed {
    shape: Vec<usize>,
    mode: u8,
    raw: [i8; 6],
    seed: u64,
    pad_front: usize,
    pad_back: usize,
}

fn strided_seed(rng: &mut StdRng) -> StridedSeed {
    StridedSeed {
        shape: small_shape(rng),
        mode: rng.random_range(0..4),
        raw: rng.random(),
        seed: rng.random(),
        pad_front: rng.random_range(0..=3),
        pad_back: rng.random_range(0..=3),
    }
}

/// A valid layout from raw parts: random small strides (modes 0-1, including 0 and negative) or
/// a permuted, sign-flipped (mode 2) or scaled (mode 3) contiguous layout. Returns the layout
/// and the span length it was validated for; the offset is the least that keeps every element
/// in bounds plus `pad_front`.
fn build_small_strided(s: &StridedSeed) -> (Vec<isize>, usize, usize) {
    let nd = s.shape.len();
    let mut r = Rng::new(s.seed);
    let strides: Vec<isize> = match s.mode {
        0 | 1 => (0..nd)
            .map(|k| (s.raw[k] as isize) % if s.mode == 0 { 4 } else { 13 })
            .collect(),
        _ => {
            let mut perm: Vec<usize> = (0..nd).collect();
            r.shuffle(&mut perm);
            let scale = if s.mode == 3 {
                1 + r.below(3) as isize
            } else {
                1
            };
            let mut st = vec![0isize; nd];
            let mut acc = scale;
            for &k in perm.iter().rev() {
                st[k] = acc * if r.chance(30) { -1 } else { 1 };
                acc *= s.shape[k].max(1) as isize;
            }
            st
        }
    };
    let (mut lo, mut hi) = (0i128, 0i128);
    if !s.shape.contains(&0) {
        for (&n, &st) in s.shape.iter().zip(&strides) {
            if n > 1 {
                let span = (n as i128 - 1) * st as i128;
                if span < 0 { lo += span } else { hi += span }
            }
        }
    }
    let offset = (-lo) as usize + s.pad_front;
    let span_len = if s.shape.contains(&0) {
        offset + s.pad_back
    } else {
        offset + hi as usize + 1 + s.pad_back
    };
    (strides, offset, span_len)
}

// --- raw parts for properties 3 and 4 ---

fn raw_len(rng: &mut StdRng) -> usize {
    match weighted(rng, &[12, 1, 1, 1, 1, 1]) {
        0 => rng.random_range(0..=8),
        1 => usize::MAX / 3,
        2 => 1 << 40,
        3 => usize::MAX,
        4 => isize::MAX as usize,
        _ => rng.random::<u64>() as usize,
    }
}

fn raw_stride(rng: &mut StdRng) -> isize {
    match weighted(rng, &[10, 1, 1, 1, 1, 1, 1, 1]) {
        0 => rng.random_range(-10i64..=10) as isize,
        1 => isize::MAX / 2,
        2 => -(isize::MAX / 2),
        3 => isize::MAX,
        4 => isize::MIN,
        5 => 1 << 40,
        6 => -(1 << 40),
        _ => rng.random::<i64>() as isize,
    }
}

fn raw_pos(rng: &mut StdRng) -> usize {
    match weighted(rng, &[8, 1, 1, 1, 1, 1, 1]) {
        0 => rng.random_range(0..=100),
        1 => usize::MAX,
        2 => isize::MAX as usize,
        3 => isize::MAX as usize + 1,
        4 => 1 << 40,
        5 => usize::MAX / 3,
        _ => rng.random::<u64>() as usize,
    }
}

#[derive(Clone, Debug)]
struct Raw {
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
    span_len: usize,
}

fn raw_parts(rng: &mut StdRng) -> Raw {
    let nd = rng.random_range(0..=6);
    let shape = vec_of(rng, nd..=nd, raw_len);
    // usually the right number of strides, sometimes not
    let ns = match weighted(rng, &[10, 1]) {
        0 => nd,
        _ => rng.random_range(0..=7),
    };
    let strides = vec_of(rng, 7..=7, raw_stride);
    Raw {
        shape,
        strides: strides[..ns].to_vec(),
        offset: raw_pos(rng),
        span_len: raw_pos(rng),
    }
}

/// Independent oracle for `new_strided` (invariants 1-3 with 1-byte elements), in i128.
fn oracle_valid(r: &Raw) -> bool {
    if r.strides.len() != r.shape.len() {
        return false;
    }
    // 1. product of nonzero lengths <= isize::MAX
    let mut p: u128 = 1;
    for &d in &r.shape {
        if d != 0 {
            p = p.saturating_mul(d as u128);
        }
    }
    if p > isize::MAX as u128 {
        return false;
    }
    // devspan stores the offset as a pointer offset: it must fit isize (not among the
    // documented invariants, but required of every pointer offset)
    if r.offset > isize::MAX as usize {
        return false;
    }
    if r.shape.contains(&0) {
        return r.offset <= r.span_len;
    }
    // 2. per-axis spans and their sums fit isize
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&n, &s) in r.shape.iter().zip(&r.strides) {
        if n > 1 {
            let span = (n as i128 - 1) * s as i128;
            if span > isize::MAX as i128 || span < isize::MIN as i128 {
                return false;
            }
            if span < 0 { lo += span } else { hi += span }
        }
    }
    if lo < isize::MIN as i128 || hi > isize::MAX as i128 {
        return false;
    }
    // 3. in bounds; devspan also requires every reachable element offset to fit isize (it is a
    // pointer offset), which only matters for span lengths past isize::MAX
    r.offset as i128 + lo >= 0
        && r.offset as i128 + hi < r.span_len as i128
        && r.offset as i128 + hi <= isize::MAX as i128
}

/// A valid layout with possibly huge lengths and strides: raw parts whose strides are clamped
/// so invariant 2 holds, with the offset and span length computed to fit.
fn big_valid(rng: &mut StdRng) -> Raw {
    let mut r = raw_parts(rng);
    let pf = rng.random_range(0..=3);
    let pb = match weighted(rng, &[3, 1]) {
        0 => rng.random_range(0..=3),
        _ => usize::MAX,
    };
    let nd = r.shape.len();
    r.strides.resize(nd, 1);
    // invariant 1: shrink lengths until the nonzero product fits
    loop {
        let p = r
            .shape
            .iter()
            .filter(|&&d| d != 0)
            .fold(1u128, |a, &d| a.saturating_mul(d as u128));
        if p <= isize::MAX as u128 {
            break;
        }
        let k = (0..nd).max_by_key(|&k| r.shape[k]).unwrap();
        r.shape[k] /= 2;
    }
    if r.shape.contains(&0) {
        // any strides at all; offset <= span_len
        r.offset = r.offset.min(isize::MAX as usize);
        r.span_len = r.span_len.max(r.offset);
        return r;
    }
    // invariant 2: each |stride| * (n - 1) <= isize::MAX / rank
    // (rank + 1 so that offset + every span, the highest element offset, fits isize too)
    let lim = (isize::MAX as i128 - 8) / (nd as i128 + 1);
    let (mut lo, mut hi) = (0i128, 0i128);
    for k in 0..nd {
        let n = r.shape[k];
        if n > 1 {
            let m = n as i128 - 1;
            let mut s = r.strides[k] as i128;
            if s.abs() * m > lim {
                s = s.signum() * (lim / m);
            }
            r.strides[k] = s as isize;
            if s < 0 { lo += s * m } else { hi += s * m }
        }
    }
    let offset = (-lo) as usize + pf;
    r.offset = offset;
    r.span_len = (offset as u128 + hi as u128 + 1)
        .saturating_add(pb as u128)
        .min(usize::MAX as u128) as usize;
    r
}

fn dyn_strided(r: &Raw) -> devspan::Result<Layout<IxDyn>> {
    Layout::new_strided(IxDyn(&r.shape), &r.strides, r.offset, r.span_len)
}

// ---------------------------------------------------------------------------------------------
// Property 1: operations agree with ndarray.
// ---------------------------------------------------------------------------------------------

/// Chains of 1-6 random operations, starting from a standard layout over a buffer of the
/// same length; ~15% of the ops get deliberately bad arguments (must be `Err` exactly when
/// ndarray panics / refuses).
#[test]
fn p1_op_chains_match_ndarray_from_contiguous() {
    for_each_case(
        cases(),
        |r| (small_shape(r), ops(r, 6)),
        |(shape, ops)| {
            let n: usize = shape.iter().product();
            let data: Vec<u32> = (0..n as u32).collect();
            let l = Layout::<IxDyn>::contiguous(IxDyn(shape));
            let v = ArrayView::from_shape(IxDyn(shape), &data[..]).unwrap();
            run_chain(l, v, ops, 15)?;
            Ok(())
        },
    );
}

/// The same, starting from a layout built from raw parts (zero, negative and
/// non-contiguous strides, nonzero offsets); the ndarray view is built with the same
/// strides and offset.
#[test]
fn p1_op_chains_match_ndarray_from_strided() {
    for_each_case(
        cases(),
        |r| (strided_seed(r), ops(r, 5)),
        |(s, ops)| {
            let (strides, offset, span_len) = build_small_strided(s);
            let l = Layout::new_strided(IxDyn(&s.shape), &strides, offset, span_len);
            case_assert!(
                l.is_ok(),
                "valid raw parts refused: {:?} {:?} {} {}: {:?}",
                s.shape,
                strides,
                offset,
                span_len,
                l
            );
            let l = l.unwrap();
            let data: Vec<u32> = (0..span_len as u32).collect();
            let v = nd_view(&l, &data);
            run_chain(l, v, ops, 15)?;
            Ok(())
        },
    );
}

/// Random `s![..]`-style slices (steps +-1..4, negative starts/ends, indices, NewAxis,
/// and ~30% bad ones) on strided layouts.
#[test]
fn p1_slice_matches_ndarray() {
    for_each_case(
        cases(),
        |r| (strided_seed(r), vec_of(r, 1..=3, |g| g.random::<u64>())),
        |(s, seeds)| {
            let (strides, offset, span_len) = build_small_strided(s);
            let l = Layout::new_strided(IxDyn(&s.shape), &strides, offset, span_len).unwrap();
            let data: Vec<u32> = (0..span_len as u32).collect();
            let v = nd_view(&l, &data);
            let ops: Vec<(u8, u64)> = seeds
                .iter()
                .enumerate()
                .map(|(i, &sd)| (if i % 2 == 0 { 0 } else { 1 }, sd))
                .collect();
            run_chain(l, v, &ops, 30)?;
            Ok(())
        },
    );
}

/// Reshape after 0-3 random valid ops (so the source is often sliced / permuted /
/// broadcast): `Ok` exactly when ndarray's `to_shape` returns a view; then same offsets.
#[test]
fn p1_reshape_matches_to_shape() {
    for_each_case(
        cases(),
        |r| {
            (
                small_shape(r),
                random_ops(r, 0..=3),
                r.random::<u64>(),
                r.random::<bool>(),
            )
        },
        |(shape, pre, seed, wild)| {
            let n: usize = shape.iter().product();
            let data: Vec<u32> = (0..n as u32).collect();
            let l = Layout::<IxDyn>::contiguous(IxDyn(shape));
            let v = ArrayView::from_shape(IxDyn(shape), &data[..]).unwrap();
            let mut ops = pre.clone();
            ops.push((10, *seed));
            run_chain(l, v, &ops, if *wild { 50 } else { 0 })?;
            Ok(())
        },
    );
}

/// split_at at every kind of point (including 0 and len) on strided layouts, both halves.
#[test]
fn p1_split_at_matches_ndarray() {
    for_each_case(
        cases(),
        |r| {
            (
                strided_seed(r),
                r.random::<u64>() as usize,
                r.random::<u64>() as usize,
            )
        },
        |(s, axis_seed, at_seed)| {
            let (strides, offset, span_len) = build_small_strided(s);
            let l = Layout::new_strided(IxDyn(&s.shape), &strides, offset, span_len).unwrap();
            if l.ndim() == 0 {
                let e = dev(
                    || format!("{l:?}.split_at(0, 0)"),
                    || l.split_at(Axis(axis_seed % 3), *at_seed),
                )?;
                case_assert!(e.is_err());
                return Ok(());
            }
            let data: Vec<u32> = (0..span_len as u32).collect();
            let v = nd_view(&l, &data);
            let a = axis_seed % l.ndim();
            let n = l.shape()[a];
            let i = at_seed % (n + 2); // n + 1 is out of range
            let d = dev(
                || format!("{l:?}.split_at({a}, {i})"),
                || l.split_at(Axis(a), i),
            )?;
            let nd = quiet(|| v.clone().split_at(Axis(a), i));
            match (d, nd) {
                (Ok((x, y)), Ok((vx, vy))) => {
                    check_same(&x, &vx, &|| format!("left of {l:?}.split_at({a}, {i})"))?;
                    check_same(&y, &vy, &|| format!("right of {l:?}.split_at({a}, {i})"))?;
                    case_assert_eq!(x.len() + y.len(), l.len());
                }
                (Err(e), Err(_)) => case_assert!(!e.message().is_empty()),
                (d, nd) => {
                    return Err(format!(
                        "split_at({a}, {i}) on {l:?}: devspan ok={} ndarray ok={}",
                        d.is_ok(),
                        nd.is_ok()
                    ));
                }
            }
            Ok(())
        },
    );
}

/// Broadcast to random compatible (and ~30% incompatible) shapes.
#[test]
fn p1_broadcast_matches_ndarray() {
    for_each_case(
        cases(),
        |r| (strided_seed(r), vec_of(r, 1..=2, |g| g.random::<u64>())),
        |(s, seeds)| {
            let (strides, offset, span_len) = build_small_strided(s);
            let l = Layout::new_strided(IxDyn(&s.shape), &strides, offset, span_len).unwrap();
            let data: Vec<u32> = (0..span_len as u32).collect();
            let v = nd_view(&l, &data);
            let ops: Vec<(u8, u64)> = seeds.iter().map(|&sd| (9, sd)).collect();
            run_chain(l, v, &ops, 30)?;
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Property 2: contiguity queries against brute force.
// ---------------------------------------------------------------------------------------------

/// `is_standard_layout` / `is_fortran_layout` equal ndarray's on non-empty views;
/// `is_dense` equals "reachable offsets are a gap-free range without repeats";
/// `is_unaliased` implies no repeated offset; `reach` is the min/max offset.
#[test]
fn p2_contiguity_queries_match_brute_force() {
    for_each_case(cases(), strided_seed, |s| {
        let (strides, offset, span_len) = build_small_strided(s);
        let l = Layout::new_strided(IxDyn(&s.shape), &strides, offset, span_len).unwrap();
        let data: Vec<u32> = (0..span_len as u32).collect();
        let v = nd_view(&l, &data);
        check_same(&l, &v, &|| format!("{l:?}"))?;
        // brute-force definitions of standard / fortran order, independent of ndarray
        if !l.is_empty() {
            let std_bf = {
                let mut exp = 1isize;
                let mut ok = true;
                for (&n, &st) in l.shape().iter().zip(l.strides()).rev() {
                    ok &= n <= 1 || st == exp;
                    exp *= n as isize;
                }
                ok
            };
            case_assert_eq!(l.is_standard_layout(), std_bf);
            let t = l.clone().reversed_axes();
            case_assert_eq!(l.is_fortran_layout(), t.is_standard_layout());
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Property 3: raw parts never panic.
// ---------------------------------------------------------------------------------------------

/// `new_strided` on arbitrary raw parts is `Ok` exactly when the independent i128 oracle
/// says invariants 1-3 hold, never panics, and on `Ok` every reachable offset is in
/// `0..span_len` (enumerated for small layouts, via `reach()` otherwise).
#[test]
fn p3_new_strided_never_panics() {
    for_each_case(cases(), raw_parts, |r| {
        let res = dev(|| format!("new_strided({r:?})"), || dyn_strided(r))?;
        match &res {
            Ok(l) => {
                case_assert_eq!(l.shape(), &r.shape[..]);
                case_assert_eq!(l.strides(), &r.strides[..]);
                case_assert_eq!(l.offset(), r.offset);
                let len = dev(|| format!("len of {l:?}"), || l.len())?;
                if len == 0 {
                    case_assert!(l.offset() <= r.span_len);
                    case_assert_eq!(l.reach(), None);
                } else if len <= MAX_ELEMS {
                    let mut bad = None;
                    for_each_index(l.shape(), |i| match l.offset_of(i) {
                        Some(o) if o < r.span_len => {}
                        o => bad = Some((i.to_vec(), o)),
                    });
                    case_assert!(
                        bad.is_none(),
                        "{:?} reaches {:?} outside 0..{}",
                        l,
                        bad,
                        r.span_len
                    );
                    let offs = brute_offsets(l.shape(), l.strides(), l.offset());
                    let (lo, hi) = (offs.iter().min().unwrap(), offs.iter().max().unwrap());
                    case_assert_eq!(l.reach(), Some((*lo as usize, *hi as usize)));
                } else {
                    let reach = l.reach();
                    case_assert!(
                        matches!(reach, Some((lo, hi)) if lo <= hi && hi < r.span_len),
                        "{:?}: reach {:?}",
                        l,
                        reach
                    );
                }
            }
            Err(e) => {
                case_assert!(!e.message().is_empty(), "empty error message for {:?}", r);
                case_assert!(!e.to_string().is_empty());
                let dbg = format!("{:?}", e);
                case_assert!(!dbg.is_empty());
            }
        }
        case_assert_eq!(
            res.is_ok(),
            oracle_valid(r),
            "new_strided({:?}) = {:?}",
            r,
            res
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Property 4: operations on valid layouts never panic on bad arguments; property 5: results
// of operations keep invariants 1-3 (re-validate against the same span) and invariant 4.
// ---------------------------------------------------------------------------------------------

/// Applies the ops to `l` (no ndarray side), failing on any devspan panic; for `Ok` results
/// also checks queries don't panic. Returns the sequence of layouts.
fn chain_no_panic(
    mut l: Layout<IxDyn>,
    ops: &[(u8, u64)],
    wild_pct: u64,
    big: bool,
) -> Result<Vec<(Op, Layout<IxDyn>)>, String> {
    let mut out = Vec::new();
    let mut trace = format!("start: {l:?}");
    for &(kind, seed) in ops {
        let op = make_op(kind, seed, l.shape(), wild_pct, big);
        trace.push_str(&format!("\n  then {op:?}"));
        match dev(|| trace.clone(), || apply_dev(&l, &op))? {
            Ok(l2) => {
                trace.push_str(&format!(" -> {l2:?}"));
                dev(
                    || format!("queries on {trace}"),
                    || {
                        let _ = (
                            l2.len(),
                            l2.is_empty(),
                            l2.reach(),
                            l2.is_dense(),
                            l2.is_unaliased(),
                        );
                        let _ = (l2.is_standard_layout(), l2.is_fortran_layout());
                        let _ = l2.offset_of(&vec![0; l2.ndim()]);
                    },
                )?;
                out.push((op, l2.clone()));
                l = l2;
            }
            Err(e) => {
                case_assert!(!e.message().is_empty(), "empty error message\n{}", trace);
            }
        }
    }
    Ok(out)
}

/// Valid layouts with huge lengths / strides / offsets, and ops with (50%) bad arguments:
/// every op returns `Ok` or `Err`, never panics.
#[test]
fn p4_ops_never_panic_on_bad_arguments() {
    for_each_case(
        cases(),
        |g| (big_valid(g), ops(g, 4)),
        |(r, ops)| {
            let l = dev(|| format!("new_strided({r:?})"), || dyn_strided(r))?;
            case_assert!(
                l.is_ok(),
                "constructed-valid raw parts refused: {:?}: {:?}",
                r,
                l
            );
            chain_no_panic(l.unwrap(), ops, 50, true)?;
            Ok(())
        },
    );
}

/// Small valid layouts (empty ones included): every op either fails or yields a layout
/// that `new_strided` accepts against the same span (invariants 1-3), and, except
/// broadcast, keeps `is_unaliased` (invariant 4).
#[test]
fn p5_ops_keep_invariants() {
    for_each_case(
        cases(),
        |r| (strided_seed(r), ops(r, 5), r.random::<bool>()),
        |(s, ops, wild)| {
            let (strides, offset, span_len) = build_small_strided(s);
            let l = Layout::new_strided(IxDyn(&s.shape), &strides, offset, span_len).unwrap();
            let mut prev = l.clone();
            let mut trace = format!("start: {l:?} over {span_len} elements");
            for (op, l2) in chain_no_panic(l, ops, if *wild { 30 } else { 0 }, false)? {
                trace.push_str(&format!("\n  then {op:?} -> {l2:?}"));
                let re = Layout::new_strided(l2.dim(), l2.strides(), l2.offset(), span_len);
                case_assert!(
                    re.is_ok(),
                    "result no longer valid for the span: {:?}\n{}",
                    re,
                    trace
                );
                if prev.is_unaliased() && !matches!(op, Op::Broadcast(_)) {
                    case_assert!(l2.is_unaliased(), "is_unaliased lost\n{}", trace);
                }
                prev = l2;
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Fixed-dimension smoke tests of the same operations through `s![]` (not random).
// ---------------------------------------------------------------------------------------------

#[test]
fn fixed_dim_slice_matches_ndarray() {
    use ndarray::{Ix3, s};
    let data: Vec<u32> = (0..60).collect();
    let v = ArrayView::from_shape((3, 4, 5), &data[..]).unwrap();
    let l = Layout::contiguous(Ix3(3, 4, 5));
    let vs = v.slice(s![..;-2, 1, ndarray::NewAxis, -4..;3]);
    let ls = l.slice(s![..;-2, 1, ndarray::NewAxis, -4..;3]).unwrap();
    assert_eq!(ls.shape(), vs.shape());
    for ((i, j, k), &x) in vs.indexed_iter() {
        assert_eq!(ls.offset_of(&[i, j, k]), Some(x as usize));
    }
}

// ---------------------------------------------------------------------------------------------
// Minimal cases of the properties above, kept as fixed regression tests.
// ---------------------------------------------------------------------------------------------

/// A minimal case of `p5_ops_keep_invariants`: `invert_axis` of an empty layout keeps the offset
/// within the span (invariant 3: an empty layout needs `offset <= span_len`), for positive and
/// negative strides of its non-empty axes.
#[test]
fn pinned_p5_invert_axis_of_empty_layout_stays_in_span() {
    use ndarray::Ix2;
    let l = Layout::contiguous(Ix2(0, 2)); // valid for a span of 0 elements
    let t = l.invert_axis(Axis(1)).unwrap();
    assert!(
        Layout::new_strided(t.dim(), t.strides(), t.offset(), 0).is_ok(),
        "{l:?}.invert_axis(1) = {t:?}: offset past a span of 0 elements"
    );
    let l = Layout::new_strided(Ix2(0, 2), &[1, -3], 0, 0).unwrap();
    let t = l.invert_axis(Axis(1)).unwrap();
    assert!(
        t.offset() == 0,
        "{l:?}.invert_axis(1) = {t:?}: offset wrapped"
    );
}

/// A minimal case of `p5_ops_keep_invariants`: `index_axis` of an empty layout keeps the offset
/// within the span, for positive and negative strides.
#[test]
fn pinned_p5_index_axis_of_empty_layout_stays_in_span() {
    use ndarray::Ix2;
    let l = Layout::contiguous(Ix2(0, 4)); // valid for a span of 0 elements
    let t = l.index_axis(Axis(1), 2).unwrap();
    assert!(
        Layout::new_strided(t.dim(), t.strides(), t.offset(), 0).is_ok(),
        "{l:?}.index_axis(1, 2) = {t:?}: offset past a span of 0 elements"
    );
    let l = Layout::new_strided(Ix2(0, 4), &[1, -1], 0, 0).unwrap();
    let t = l.index_axis(Axis(1), 2).unwrap();
    assert!(
        t.offset() == 0,
        "{l:?}.index_axis(1, 2) = {t:?}: offset wrapped"
    );
}

/// A minimal case of `p4_ops_never_panic_on_bad_arguments`: an empty layout accepts any strides
/// (nothing is reachable), and slicing, indexing and inverting it with huge strides neither
/// overflow nor panic (debug builds check every multiplication).
#[test]
fn pinned_p4_ops_on_empty_layout_with_huge_stride_do_not_panic() {
    use ndarray::{Ix2, s};
    let l = Layout::new_strided(Ix2(0, 3), &[1, isize::MAX], 0, 0).unwrap();
    let mut panics = Vec::new();
    let mut t = |name: &str, f: &dyn Fn() -> bool| {
        if let Err(m) = quiet(f) {
            panics.push(format!("{name}: {m}"));
        }
    };
    t("slice(s![.., 2..])", &|| l.slice(s![.., 2..]).is_ok());
    t("slice(s![.., ..;2])", &|| l.slice(s![.., ..;2]).is_ok());
    t("slice(s![.., ..;-1])", &|| l.slice(s![.., ..;-1]).is_ok());
    t("slice(s![.., 2])", &|| l.slice(s![.., 2]).is_ok());
    t("slice_axis(1, 2..)", &|| {
        l.slice_axis(Axis(1), Slice::from(2..)).is_ok()
    });
    t("index_axis(1, 2)", &|| l.index_axis(Axis(1), 2).is_ok());
    t("invert_axis(1)", &|| l.invert_axis(Axis(1)).is_ok());
    assert!(panics.is_empty(), "{l:?}:\n  {}", panics.join("\n  "));
}

/// A minimal case of `p4_ops_never_panic_on_bad_arguments`: `reshape` of a valid layout whose
/// `stride * len` of a merged block's first axis overflows `isize` (only `stride * (len - 1)`
/// must fit) neither panics nor returns strides that reach negative offsets.
#[test]
fn pinned_p4_reshape_with_huge_strides() {
    use ndarray::{Ix1, Ix2};
    let s = isize::MAX / 3;
    // offsets 0, s, 2s, 3s (3s == isize::MAX - 1): as (2, 2) in row-major order, strides (2s, s)
    let l = Layout::new_strided(Ix1(4), &[s], 0, usize::MAX).unwrap();
    let r = quiet(|| l.reshape(Ix2(2, 2)));
    match r {
        Ok(Ok(t)) => assert_eq!(t.strides(), &[2 * s, s], "{l:?}.reshape((2, 2)) = {t:?}"),
        other => panic!("{l:?}.reshape((2, 2)) = {other:?}, expected Ok with strides [2s, s]"),
    }
    // not mergeable (stride of axis 0 != 3 * stride of axis 1): Err(IncompatibleLayout)
    let l = Layout::new_strided(Ix2(2, 3), &[1, isize::MAX / 2 - 1], 0, usize::MAX).unwrap();
    let r = quiet(|| l.reshape(Ix1(6)).map_err(|e| e.kind().clone()));
    assert!(
        matches!(r, Ok(Err(ErrorKind::IncompatibleLayout))),
        "{l:?}.reshape(6) = {r:?}, expected Err(IncompatibleLayout)"
    );
}

/// A minimal case of `p4_ops_never_panic_on_bad_arguments`: the stride of an axis of length 1 is
/// unconstrained, and `invert_axis` of a stride of `isize::MIN` (on such an axis, or on any axis
/// of an empty layout) does not overflow.
#[test]
fn pinned_p4_invert_axis_with_stride_isize_min_does_not_panic() {
    use ndarray::{Ix1, Ix2};
    let l = Layout::new_strided(Ix1(1), &[isize::MIN], 0, 1).unwrap();
    let r = quiet(|| l.invert_axis(Axis(0)).map(|t| t.offset()));
    assert!(matches!(r, Ok(Ok(0))), "{l:?}.invert_axis(0) = {r:?}");
    let l = Layout::new_strided(Ix2(0, 2), &[1, isize::MIN], 0, 0).unwrap();
    let r = quiet(|| l.invert_axis(Axis(1)).is_ok());
    assert!(r.is_ok(), "{l:?}.invert_axis(1) panicked: {r:?}");
}
