//! The independent model: layouts in i128 arithmetic (nothing can overflow), every operation
//! from its ndarray definition, and the documented layout invariants as checks. It says, for
//! any input, whether devspan must answer `Ok` (and with what) or `Err` (and of which kinds).

use devspan::ErrorKind::{self, *};
use ndarray::{Order, Slice, SliceInfoElem};

use super::Rng;

pub(crate) const IMAX: i128 = isize::MAX as i128;
pub(crate) const IMIN: i128 = isize::MIN as i128;

/// Most elements whose offsets are enumerated by brute force (fewer under Miri).
pub(crate) const BRUTE_LIMIT: i128 = if cfg!(miri) { 64 } else { 4096 };

/// A layout: shape, strides (elements) and the offset of index zero (elements, from the span's
/// start), in i128.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Model {
    pub shape: Vec<usize>,
    pub strides: Vec<i128>,
    pub offset: i128,
}

/// `Err(kinds)`: devspan must refuse with one of `kinds`.
pub(crate) type MResult<T> = Result<T, Vec<ErrorKind>>;

/// Product of the nonzero lengths (saturating far above `isize::MAX`).
pub(crate) fn nonzero_product(shape: &[usize]) -> i128 {
    shape
        .iter()
        .filter(|&&n| n != 0)
        .fold(1i128, |a, &n| a.saturating_mul(n as i128).min(1 << 100))
}

/// Number of elements (saturating).
pub(crate) fn count(shape: &[usize]) -> i128 {
    if shape.contains(&0) {
        0
    } else {
        nonzero_product(shape)
    }
}

/// Invariant 1: the nonzero lengths multiply to at most `isize::MAX` bytes of `elem`.
pub(crate) fn size_fits(shape: &[usize], elem: usize) -> bool {
    nonzero_product(shape) * elem.max(1) as i128 <= IMAX
}

/// `(lo, hi)` offsets relative to index zero; `Ok(None)` when empty, `Err(())` when invariant 2
/// fails (a term `(n - 1) * stride`, or the sum of the negative or of the positive terms, leaves
/// `isize`).
pub(crate) fn reach(shape: &[usize], strides: &[i128]) -> Result<Option<(i128, i128)>, ()> {
    if shape.contains(&0) {
        return Ok(None);
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&n, &s) in shape.iter().zip(strides) {
        if n <= 1 {
            continue;
        }
        let term = (n as i128 - 1).saturating_mul(s);
        if !(IMIN..=IMAX).contains(&term) {
            return Err(());
        }
        if term < 0 {
            lo += term;
        } else {
            hi += term;
        }
    }
    if lo < IMIN || hi > IMAX {
        return Err(());
    }
    Ok(Some((lo, hi)))
}

/// The kinds a raw-parts layout constructor may answer for these parts against a span of
/// `span_len` elements of `elem` bytes (invariants 1-3, every reachable offset in the span and
/// in `isize`); empty when they are valid.
pub(crate) fn layout_errors(
    shape: &[usize],
    strides: &[i128],
    offset: i128,
    span_len: i128,
    elem: usize,
) -> Vec<ErrorKind> {
    if strides.len() != shape.len() {
        return vec![ShapeMismatch];
    }
    let mut e = Vec::new();
    if !size_fits(shape, elem) {
        e.push(Overflow);
    }
    if offset > IMAX {
        e.push(Overflow);
    }
    match reach(shape, strides) {
        Err(()) => e.push(Overflow),
        Ok(None) => {
            if offset > span_len {
                e.push(OutOfBounds);
            }
        }
        Ok(Some((lo, hi))) => {
            if offset + lo < 0 || offset + hi >= span_len {
                e.push(OutOfBounds);
            }
            if offset + hi > IMAX {
                e.push(Overflow);
            }
        }
    }
    e
}

/// Whether two stride lists of one shape agree on every axis longer than one (the strides of
/// axes of length 0 or 1 are free).
pub(crate) fn same_strides(shape: &[usize], a: &[isize], b: &[isize]) -> bool {
    shape
        .iter()
        .zip(a.iter().zip(b))
        .all(|(&n, (a, b))| n <= 1 || a == b)
}

/// Invariant 4 as documented: every axis of length > 1 has a nonzero stride and, sorted by
/// `|stride|`, each stride exceeds the span covered by the axes before it.
pub(crate) fn unaliased_rule(shape: &[usize], strides: &[i128]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut axes: Vec<(i128, i128)> = shape
        .iter()
        .zip(strides)
        .filter(|(n, _)| **n > 1)
        .map(|(&n, &s)| (s.abs(), n as i128))
        .collect();
    axes.sort();
    let mut covered = 0i128;
    for (s, n) in axes {
        if s == 0 || s <= covered {
            return false;
        }
        covered = covered.saturating_add(s.saturating_mul(n - 1));
    }
    true
}

/// Calls `f` with every multi-index of `shape` in row-major order.
pub(crate) fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
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

/// Every reachable offset, in row-major index order; `None` past [`BRUTE_LIMIT`] elements.
pub(crate) fn brute_offsets(m: &Model) -> Option<Vec<i128>> {
    if count(&m.shape) > BRUTE_LIMIT {
        return None;
    }
    let mut out = Vec::new();
    for_each_index(&m.shape, |idx| out.push(m.offset_of(idx)));
    Some(out)
}

/// The multi-index of flat position `f` of `shape` read in `order`.
pub(crate) fn unravel(mut f: i128, shape: &[usize], order: Order) -> Vec<usize> {
    let mut idx = vec![0usize; shape.len()];
    let axes: Vec<usize> = match order {
        Order::ColumnMajor => (0..shape.len()).collect(),
        _ => (0..shape.len()).rev().collect(),
    };
    for k in axes {
        let n = shape[k] as i128;
        idx[k] = (f % n) as usize;
        f /= n;
    }
    idx
}

fn axis_ok(ndim: usize, axis: usize) -> MResult<()> {
    if axis >= ndim {
        Err(vec![InvalidAxis])
    } else {
        Ok(())
    }
}

/// One axis sliced as ndarray slices it: `(len, stride, offset of the new first element)`.
pub(crate) fn slice_axis(len: usize, stride: i128, s: Slice) -> MResult<(usize, i128, i128)> {
    let mut e = Vec::new();
    if s.step == 0 {
        e.push(InvalidArgument);
    }
    let n = len as i128;
    let pos = |v: isize| if v < 0 { n + v as i128 } else { v as i128 };
    let start = pos(s.start);
    let end = pos(s.end.unwrap_or(len as isize));
    if !(0..=n).contains(&start) || !(0..=n).contains(&end) {
        e.push(OutOfBounds);
    }
    if !e.is_empty() {
        return Err(e);
    }
    let end = end.max(start);
    let m = end - start;
    let step = s.step as i128;
    let new_len = (m + step.abs() - 1) / step.abs();
    let first = if step > 0 { start } else { end - 1 };
    let off = if m == 0 { 0 } else { first * stride };
    Ok((new_len as usize, stride * step, off))
}

impl Model {
    pub(crate) fn from_parts(shape: &[usize], strides: &[isize], offset: usize) -> Model {
        Model {
            shape: shape.to_vec(),
            strides: strides.iter().map(|&s| s as i128).collect(),
            offset: offset as i128,
        }
    }

    pub(crate) fn ndim(&self) -> usize {
        self.shape.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.shape.contains(&0)
    }

    pub(crate) fn offset_of(&self, idx: &[usize]) -> i128 {
        self.offset
            + idx
                .iter()
                .zip(&self.strides)
                .map(|(&i, &s)| i as i128 * s)
                .sum::<i128>()
    }

    /// Absolute `(lo, hi)` element offsets, `None` when empty (the model's layouts are valid).
    pub(crate) fn abs_reach(&self) -> Option<(i128, i128)> {
        let (lo, hi) = reach(&self.shape, &self.strides).ok()??;
        Some((self.offset + lo, self.offset + hi))
    }

    /// `Err` unless devspan's `(shape, strides, offset)` is this layout: equal shapes and, when
    /// not empty, equal offsets and equal strides on every axis of length > 1.
    pub(crate) fn same_as(
        &self,
        shape: &[usize],
        strides: &[isize],
        offset: usize,
    ) -> Result<(), String> {
        ensure!(
            self.shape == shape,
            "shape {shape:?}, the model has {:?}",
            self.shape
        );
        ensure!(
            strides.len() == shape.len(),
            "{} strides for {} axes",
            strides.len(),
            shape.len()
        );
        if self.is_empty() {
            return Ok(());
        }
        ensure!(
            offset as i128 == self.offset,
            "offset {offset}, the model has {} (shape {shape:?}, strides {strides:?})",
            self.offset
        );
        for k in 0..shape.len() {
            ensure!(
                shape[k] <= 1 || strides[k] as i128 == self.strides[k],
                "stride {} of axis {k}, the model has {} (shape {shape:?}, strides {strides:?}, model {:?})",
                strides[k],
                self.strides[k],
                self.strides
            );
        }
        Ok(())
    }

    pub(crate) fn slice(&self, elems: &[SliceInfoElem]) -> MResult<Model> {
        let in_ndim = elems
            .iter()
            .filter(|e| !matches!(e, SliceInfoElem::NewAxis))
            .count();
        if in_ndim != self.ndim() {
            return Err(vec![ShapeMismatch]);
        }
        let mut out = Model {
            shape: Vec::new(),
            strides: Vec::new(),
            offset: self.offset,
        };
        let mut axis = 0;
        let mut errs = Vec::new();
        for e in elems {
            match *e {
                SliceInfoElem::Slice { start, end, step } => {
                    match slice_axis(
                        self.shape[axis],
                        self.strides[axis],
                        Slice { start, end, step },
                    ) {
                        Ok((n, s, off)) => {
                            out.shape.push(n);
                            out.strides.push(s);
                            out.offset += off;
                        }
                        Err(k) => errs.extend(k),
                    }
                    axis += 1;
                }
                SliceInfoElem::Index(i) => {
                    let n = self.shape[axis] as i128;
                    let i = if i < 0 { n + i as i128 } else { i as i128 };
                    if !(0..n).contains(&i) {
                        errs.push(OutOfBounds);
                    } else {
                        out.offset += i * self.strides[axis];
                    }
                    axis += 1;
                }
                SliceInfoElem::NewAxis => {
                    out.shape.push(1);
                    out.strides.push(0);
                }
            }
        }
        if errs.is_empty() { Ok(out) } else { Err(errs) }
    }

    pub(crate) fn slice_axis(&self, axis: usize, s: Slice) -> MResult<Model> {
        axis_ok(self.ndim(), axis)?;
        let (n, st, off) = slice_axis(self.shape[axis], self.strides[axis], s)?;
        let mut out = self.clone();
        out.shape[axis] = n;
        out.strides[axis] = st;
        out.offset += off;
        Ok(out)
    }

    pub(crate) fn index_axis(&self, axis: usize, index: usize) -> MResult<Model> {
        axis_ok(self.ndim(), axis)?;
        if index >= self.shape[axis] {
            return Err(vec![OutOfBounds]);
        }
        let mut out = self.clone();
        out.offset += index as i128 * self.strides[axis];
        out.shape.remove(axis);
        out.strides.remove(axis);
        Ok(out)
    }

    pub(crate) fn reversed(&self) -> Model {
        let mut out = self.clone();
        out.shape.reverse();
        out.strides.reverse();
        out
    }

    pub(crate) fn permuted(&self, axes: &[usize]) -> MResult<Model> {
        let mut sorted = axes.to_vec();
        sorted.sort_unstable();
        if sorted != (0..self.ndim()).collect::<Vec<_>>() {
            return Err(vec![InvalidAxis]);
        }
        Ok(Model {
            shape: axes.iter().map(|&a| self.shape[a]).collect(),
            strides: axes.iter().map(|&a| self.strides[a]).collect(),
            offset: self.offset,
        })
    }

    pub(crate) fn swapped(&self, a: usize, b: usize) -> MResult<Model> {
        axis_ok(self.ndim(), a)?;
        axis_ok(self.ndim(), b)?;
        let mut out = self.clone();
        out.shape.swap(a, b);
        out.strides.swap(a, b);
        Ok(out)
    }

    pub(crate) fn inverted(&self, axis: usize) -> MResult<Model> {
        axis_ok(self.ndim(), axis)?;
        let mut out = self.clone();
        let n = self.shape[axis] as i128;
        if n > 0 {
            out.offset += (n - 1) * self.strides[axis];
        }
        out.strides[axis] = -self.strides[axis];
        Ok(out)
    }

    pub(crate) fn inserted(&self, axis: usize) -> MResult<Model> {
        if axis > self.ndim() {
            return Err(vec![InvalidAxis]);
        }
        let mut out = self.clone();
        out.shape.insert(axis, 1);
        out.strides.insert(axis, 0);
        Ok(out)
    }

    /// devspan's `remove_axis`: only an axis of length 1.
    pub(crate) fn removed(&self, axis: usize) -> MResult<Model> {
        axis_ok(self.ndim(), axis)?;
        if self.shape[axis] != 1 {
            return Err(vec![ShapeMismatch]);
        }
        let mut out = self.clone();
        out.shape.remove(axis);
        out.strides.remove(axis);
        Ok(out)
    }

    /// ndarray's broadcasting rules, plus invariant 1 for `elem`-byte elements.
    pub(crate) fn broadcast(&self, to: &[usize], elem: usize) -> MResult<Model> {
        let mut errs = Vec::new();
        if !size_fits(to, elem) {
            errs.push(Overflow);
        }
        if to.len() < self.ndim() {
            errs.push(ShapeMismatch);
            return Err(errs);
        }
        let lead = to.len() - self.ndim();
        let mut strides = vec![0i128; to.len()];
        for (i, &n) in to.iter().enumerate().skip(lead) {
            let j = i - lead;
            if self.shape[j] == n {
                strides[i] = self.strides[j];
            } else if self.shape[j] != 1 {
                errs.push(ShapeMismatch);
            }
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        Ok(Model {
            shape: to.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    pub(crate) fn split_at(&self, axis: usize, index: usize) -> MResult<(Model, Model)> {
        axis_ok(self.ndim(), axis)?;
        let n = self.shape[axis];
        if index > n {
            return Err(vec![OutOfBounds]);
        }
        let mut a = self.clone();
        let mut b = self.clone();
        a.shape[axis] = index;
        b.shape[axis] = n - index;
        b.offset += index as i128 * self.strides[axis];
        Ok((a, b))
    }
}

/// What a reshape without a copy must answer.
pub(crate) enum Reshape {
    /// `Ok` with this layout.
    Ok(Model),
    /// `Err` with one of these kinds.
    Err(Vec<ErrorKind>),
    /// Too many elements to decide by enumeration, and no sampled element contradicts these
    /// strides: `Ok` with them, or `Err(IncompatibleLayout)`.
    Unknown(Model),
}

/// The elements of `m` read in `order`, with the new shape `to` read in the same order: a
/// layout exists exactly when one set of strides maps every position of `to` to the element at
/// the same position of `m`; each stride is then the offset step of a unit step along its axis.
pub(crate) fn reshape(
    m: &Model,
    to: &[usize],
    order: Order,
    elem: usize,
    rng: &mut Rng,
) -> Reshape {
    if !size_fits(to, elem) {
        return Reshape::Err(vec![Overflow]);
    }
    let n = count(&m.shape);
    if count(to) != n {
        return Reshape::Err(vec![ShapeMismatch]);
    }
    if n == 0 {
        return Reshape::Ok(Model {
            shape: to.to_vec(),
            strides: vec![0; to.len()],
            offset: m.offset,
        });
    }
    let src_at = |f: i128| m.offset_of(&unravel(f, &m.shape, order));
    // Flat position of a unit step along each axis of `to`.
    let unit = |k: usize| -> i128 {
        let axes: Vec<usize> = match order {
            Order::ColumnMajor => (0..k).collect(),
            _ => (k + 1..to.len()).collect(),
        };
        axes.iter().map(|&a| to[a] as i128).product()
    };
    let strides: Vec<i128> = (0..to.len())
        .map(|k| {
            if to[k] > 1 {
                src_at(unit(k)) - m.offset
            } else {
                0
            }
        })
        .collect();
    let out = Model {
        shape: to.to_vec(),
        strides,
        offset: m.offset,
    };
    let agrees = |f: i128| out.offset_of(&unravel(f, to, order)) == src_at(f);
    if n <= BRUTE_LIMIT {
        return if (0..n).all(agrees) {
            Reshape::Ok(out)
        } else {
            Reshape::Err(vec![IncompatibleLayout])
        };
    }
    let mut samples = vec![n - 1, n / 2, 1.min(n - 1)];
    for _ in 0..61 {
        samples.push((rng.next() as i128).rem_euclid(n));
    }
    if samples.into_iter().all(agrees) {
        Reshape::Unknown(out)
    } else {
        Reshape::Err(vec![IncompatibleLayout])
    }
}
