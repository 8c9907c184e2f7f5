//! `Layout<D>`: shape, strides (in elements, signed) and offset of an n-d view over a span.
//!
//! # Invariants
//!
//! A `Layout` that exists satisfies, against the span length it was validated for:
//!
//! 1. **Sizes fit.** The product of the axis lengths, in elements and in bytes of the element
//!    type it was validated for, is at most `isize::MAX`.
//! 2. **Strides fit.** For every axis of length `n > 1`, `stride * (n - 1)` and the sum of those
//!    terms over all axes fit in `isize`.
//! 3. **In bounds.** If the layout has at least one element, every reachable element offset
//!    `offset + sum(i_k * stride_k)` lies in `0..span_len` and fits in `isize`. An empty layout
//!    reaches nothing and only needs `offset <= span_len`.
//! 4. **No self-overlap when writable.** A layout used by a mutable view reaches each element
//!    through exactly one index: every axis of length > 1 has a nonzero stride, and sorted by
//!    `|stride|`, each stride exceeds the span covered by the axes before it. (This test is
//!    sufficient, not necessary: some interleaved layouts that do not overlap are refused.)
//!
//! Constructors from raw parts check 1-4 ([`Layout::new_strided`]), [`Layout::try_contiguous`]
//! checks 1 (the others follow, against a span of its length); every operation below keeps them by construction and says which it
//! relies on.

mod reshape;
#[cfg(test)]
mod tests;
mod transform;

use ndarray::{Dimension, Ix1};

use crate::error::{Error, Result};

/// Shape, strides and offset of an n-d view, as metadata only.
///
/// Strides and the offset are counted in **elements**; strides are signed (stored as in
/// ndarray: `isize` bits in a `D`).
///
/// ```
/// use devspan::Layout;
/// use ndarray::{s, Ix2};
/// let l = Layout::contiguous(Ix2(4, 6));
/// assert_eq!(l.strides(), &[6, 1]);
/// let t = l.slice(s![1..3, ..;-2]).unwrap();
/// assert_eq!(t.shape(), &[2, 3]);
/// assert_eq!(t.strides(), &[6, -2]);
/// assert_eq!(t.offset(), 6 + 5);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Layout<D: Dimension> {
    pub(crate) shape: D,
    /// Strides in elements, `isize` stored as `usize` bits (ndarray's convention).
    pub(crate) strides: D,
    /// Offset of the element at index `[0, 0, ...]` from the start of the span, in elements.
    pub(crate) offset: usize,
}

impl<D: Dimension> std::fmt::Debug for Layout<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Layout {{ shape: {:?}, strides: {:?}, offset: {} }}",
            self.shape(),
            self.strides(),
            self.offset
        )
    }
}

/// `(lowest, highest)` element offsets, relative to the element at index zero, reachable
/// through `shape` and `strides` (in elements); `None` when the shape has no element.
/// `Err(Overflow)` when an offset overflows `isize`.
///
/// ```
/// use devspan::foreign::reach;
/// assert_eq!(reach(&[2, 3], &[3, 1])?, Some((0, 5)));
/// assert_eq!(reach(&[2, 3], &[-3, 1])?, Some((-3, 2)));
/// assert_eq!(reach(&[0, 3], &[3, 1])?, None);
/// assert!(reach(&[3], &[isize::MAX]).is_err());
/// # Ok::<(), devspan::Error>(())
/// ```
pub fn reach(shape: &[usize], strides: &[isize]) -> Result<Option<(isize, isize)>> {
    if shape.contains(&0) {
        return Ok(None);
    }
    let (mut lo, mut hi) = (0isize, 0isize);
    for (&n, &s) in shape.iter().zip(strides) {
        if n <= 1 {
            continue;
        }
        let span = isize::try_from(n - 1)
            .ok()
            .and_then(|m| m.checked_mul(s))
            .ok_or_else(|| {
                Error::overflow(format!("stride {s} times axis length {n} overflows isize (shape {shape:?}, strides {strides:?})"))
            })?;
        let overflow = || {
            Error::overflow(format!(
                "reach of shape {shape:?} with strides {strides:?} overflows isize"
            ))
        };
        if span < 0 {
            lo = lo.checked_add(span).ok_or_else(overflow)?;
        } else {
            hi = hi.checked_add(span).ok_or_else(overflow)?;
        }
    }
    Ok(Some((lo, hi)))
}

/// Number of elements of `shape`, or `Err(Overflow)` when the non-empty axes alone hold more
/// than `isize::MAX` elements or bytes of `elem_size`-byte elements.
///
/// ```
/// use devspan::foreign::checked_size;
/// assert_eq!(checked_size(&[2, 3], 4)?, 6);
/// assert_eq!(checked_size(&[0, 1 << 40], 4)?, 0);
/// assert!(checked_size(&[1 << 62, 4], 1).is_err());
/// assert!(checked_size(&[1 << 61, 1], 8).is_err());
/// # Ok::<(), devspan::Error>(())
/// ```
pub fn checked_size(shape: &[usize], elem_size: usize) -> Result<usize> {
    let mut n: usize = 1;
    let mut nonzero: usize = 1;
    for &d in shape {
        n = n.saturating_mul(d);
        if d != 0 {
            nonzero = nonzero.checked_mul(d).ok_or_else(|| {
                Error::overflow(format!("shape {shape:?} has more than usize::MAX elements"))
            })?;
        }
    }
    let bytes = nonzero.checked_mul(elem_size.max(1));
    match bytes {
        Some(b) if b <= isize::MAX as usize => Ok(n),
        _ if elem_size <= 1 => Err(Error::overflow(format!(
            "shape {shape:?} has more than isize::MAX elements"
        ))),
        _ => Err(Error::overflow(format!(
            "shape {shape:?} of {elem_size}-byte elements exceeds isize::MAX bytes"
        ))),
    }
}

/// Whether two indices of the layout can reach the same element (invariant 4 fails).
pub(crate) fn may_self_overlap(shape: &[usize], strides: &[isize]) -> bool {
    if shape.contains(&0) {
        return false;
    }
    let mut axes: Vec<(usize, usize)> = shape
        .iter()
        .zip(strides)
        .filter(|(n, _)| **n > 1)
        .map(|(&n, &s)| (s.unsigned_abs(), n))
        .collect();
    axes.sort_unstable();
    let mut covered: usize = 0;
    for (s, n) in axes {
        if s == 0 || s <= covered {
            return true;
        }
        covered = match s.checked_mul(n - 1).and_then(|x| x.checked_add(covered)) {
            Some(c) => c,
            None => return true,
        };
    }
    false
}

fn as_isize(s: &[usize]) -> &[isize] {
    bytemuck::cast_slice(s)
}

impl Layout<Ix1> {
    /// The layout of a whole span of `len` elements: no check is needed, a span's length in
    /// bytes being at most `isize::MAX` (invariant 1 for any element size).
    pub(crate) fn of_span(len: usize) -> Self {
        debug_assert!(len <= isize::MAX as usize);
        Layout {
            shape: Ix1(len),
            strides: Ix1(1),
            offset: 0,
        }
    }
}

impl<D: Dimension> Layout<D> {
    /// The standard (row-major, C order) layout of `shape` at offset 0.
    ///
    /// ```
    /// let l = devspan::Layout::contiguous(ndarray::Ix3(2, 3, 4));
    /// assert_eq!(l.strides(), &[12, 4, 1]);
    /// assert!(l.is_standard_layout());
    /// ```
    ///
    /// # Panics
    ///
    /// If the product of the nonzero axis lengths exceeds `isize::MAX` (invariant 1);
    /// [`Layout::try_contiguous`] returns `Err(Overflow)` instead.
    pub fn contiguous(shape: D) -> Self {
        match Self::try_contiguous(shape) {
            Ok(l) => l,
            Err(e) => panic!("Layout::contiguous: {e}"),
        }
    }

    /// The standard (row-major, C order) layout of `shape` at offset 0, or `Err(Overflow)` if
    /// the product of the nonzero axis lengths exceeds `isize::MAX` (invariant 1).
    ///
    /// ```
    /// use devspan::{ErrorKind, Layout};
    /// use ndarray::Ix2;
    /// assert_eq!(Layout::try_contiguous(Ix2(2, 3)).unwrap().strides(), &[3, 1]);
    /// let e = Layout::try_contiguous(Ix2(usize::MAX / 2, 3)).unwrap_err();
    /// assert_eq!(e.kind(), &ErrorKind::Overflow);
    /// ```
    pub fn try_contiguous(shape: D) -> Result<Self> {
        checked_size(shape.slice(), 1)?;
        let mut strides = D::zeros(shape.ndim());
        let mut acc: usize = 1;
        // Each partial product divides the product of the nonzero lengths, checked above.
        for (s, &d) in strides.slice_mut().iter_mut().zip(shape.slice()).rev() {
            *s = acc;
            acc *= d.max(1);
        }
        Ok(Layout {
            shape,
            strides,
            offset: 0,
        })
    }

    /// A layout from raw parts, validated against a span of `span_len` elements (invariants
    /// 1-3, with 1-byte elements for the byte bound; views re-check with their element size).
    ///
    /// ```
    /// use devspan::{ErrorKind, Layout};
    /// use ndarray::Ix2;
    /// // A transposed 3x2 view of a 6-element buffer.
    /// let l = Layout::new_strided(Ix2(2, 3), &[1, 2], 0, 6).unwrap();
    /// assert!(l.is_fortran_layout());
    /// // A negative stride needs an offset that keeps every element in bounds.
    /// assert!(Layout::new_strided(Ix2(2, 3), &[3, -1], 0, 6).is_err());
    /// assert!(Layout::new_strided(Ix2(2, 3), &[3, -1], 2, 6).is_ok());
    /// let e = Layout::new_strided(Ix2(2, 3), &[3, 1], 1, 6).unwrap_err();
    /// assert_eq!(e.kind(), &ErrorKind::OutOfBounds);
    /// ```
    pub fn new_strided(
        shape: D,
        strides: &[isize],
        offset: usize,
        span_len: usize,
    ) -> Result<Self> {
        Self::new_checked(shape, strides, offset, span_len, 1)
    }

    pub(crate) fn new_checked(
        shape: D,
        strides: &[isize],
        offset: usize,
        span_len: usize,
        elem_size: usize,
    ) -> Result<Self> {
        if strides.len() != shape.ndim() {
            return Err(Error::shape(format!(
                "{} strides {strides:?} given for the {}-d shape {:?}",
                strides.len(),
                shape.ndim(),
                shape.slice()
            )));
        }
        let mut st = D::zeros(shape.ndim());
        for (d, &s) in st.slice_mut().iter_mut().zip(strides) {
            *d = s as usize;
        }
        let layout = Layout {
            shape,
            strides: st,
            offset,
        };
        layout.check_bounds(span_len, elem_size)?;
        Ok(layout)
    }

    /// Checks invariants 1-3 against a span of `span_len` elements of `elem_size` bytes.
    pub(crate) fn check_bounds(&self, span_len: usize, elem_size: usize) -> Result<()> {
        checked_size(self.shape(), elem_size)?;
        let r = reach(self.shape(), self.strides())?;
        let off = isize::try_from(self.offset)
            .map_err(|_| Error::overflow(format!("offset {} exceeds isize::MAX", self.offset)))?;
        match r {
            None => {
                if self.offset > span_len {
                    return Err(Error::out_of_bounds(format!(
                        "offset {} is past the end of a span of {span_len} elements",
                        self.offset
                    )));
                }
            }
            Some((lo, hi)) => {
                // `off >= 0` and `lo <= 0`, so only the highest offset can leave `isize`.
                let first = off + lo;
                let last = off.checked_add(hi).ok_or_else(|| {
                    Error::overflow(format!(
                        "shape {:?} with strides {:?} at offset {} reaches element {}, past isize::MAX",
                        self.shape(),
                        self.strides(),
                        self.offset,
                        off as i128 + hi as i128
                    ))
                })?;
                if first < 0 || last as usize >= span_len {
                    return Err(Error::out_of_bounds(format!(
                        "shape {:?} with strides {:?} at offset {} reaches elements {first}..={last} of a span of {span_len} elements",
                        self.shape(),
                        self.strides(),
                        self.offset,
                    )));
                }
            }
        }
        Ok(())
    }

    /// `Err(Aliasing)` unless invariant 4 holds.
    pub(crate) fn check_unaliased(&self) -> Result<()> {
        if may_self_overlap(self.shape(), self.strides()) {
            return Err(Error::aliasing(format!(
                "a mutable view with shape {:?} and strides {:?} would reach some element twice",
                self.shape(),
                self.strides()
            )));
        }
        Ok(())
    }

    /// Whether the layout passes invariant 4: no two indices reach the same element, checked
    /// by the sufficient test mutable views use (some non-overlapping interleaved layouts
    /// answer `false`).
    ///
    /// ```
    /// use devspan::Layout;
    /// use ndarray::Ix2;
    /// assert!(Layout::contiguous(Ix2(3, 4)).is_unaliased());
    /// assert!(!Layout::new_strided(Ix2(3, 4), &[0, 1], 0, 4).unwrap().is_unaliased());
    /// assert!(!Layout::new_strided(Ix2(3, 4), &[2, 1], 0, 8).unwrap().is_unaliased());
    /// ```
    pub fn is_unaliased(&self) -> bool {
        !may_self_overlap(self.shape(), self.strides())
    }

    /// Axis lengths.
    ///
    /// ```
    /// assert_eq!(devspan::Layout::contiguous(ndarray::Ix2(2, 5)).shape(), &[2, 5]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        self.shape.slice()
    }

    /// Strides in elements.
    ///
    /// ```
    /// assert_eq!(devspan::Layout::contiguous(ndarray::Ix2(2, 5)).strides(), &[5, 1]);
    /// ```
    pub fn strides(&self) -> &[isize] {
        as_isize(self.strides.slice())
    }

    /// Offset of the element at index zero from the start of the span, in elements.
    ///
    /// ```
    /// use ndarray::s;
    /// let l = devspan::Layout::contiguous(ndarray::Ix1(10)).slice(s![3..]).unwrap();
    /// assert_eq!(l.offset(), 3);
    /// ```
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The shape as an ndarray dimension.
    ///
    /// ```
    /// assert_eq!(devspan::Layout::contiguous(ndarray::Ix2(2, 5)).dim(), ndarray::Ix2(2, 5));
    /// ```
    pub fn dim(&self) -> D {
        self.shape.clone()
    }

    /// Number of axes.
    ///
    /// ```
    /// assert_eq!(devspan::Layout::contiguous(ndarray::Ix3(1, 2, 3)).ndim(), 3);
    /// ```
    pub fn ndim(&self) -> usize {
        self.shape.ndim()
    }

    /// Number of elements.
    ///
    /// ```
    /// assert_eq!(devspan::Layout::contiguous(ndarray::Ix3(1, 2, 3)).len(), 6);
    /// ```
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    /// Whether the layout has no element.
    ///
    /// ```
    /// assert!(devspan::Layout::contiguous(ndarray::Ix2(3, 0)).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.shape().contains(&0)
    }

    /// Element offset (from the span start) of a multi-index, or `None` if out of range.
    ///
    /// ```
    /// let l = devspan::Layout::contiguous(ndarray::Ix2(2, 3));
    /// assert_eq!(l.offset_of(&[1, 2]), Some(5));
    /// assert_eq!(l.offset_of(&[2, 0]), None);
    /// ```
    pub fn offset_of(&self, index: &[usize]) -> Option<usize> {
        if index.len() != self.ndim() || index.iter().zip(self.shape()).any(|(i, n)| i >= n) {
            return None;
        }
        let rel: isize = index
            .iter()
            .zip(self.strides())
            .map(|(&i, &s)| i as isize * s)
            .sum();
        usize::try_from(self.offset as isize + rel).ok()
    }

    /// The lowest and highest element offsets reached, or `None` if empty.
    ///
    /// ```
    /// use ndarray::s;
    /// let l = devspan::Layout::contiguous(ndarray::Ix2(4, 4)).slice(s![1..3, 1..3]).unwrap();
    /// assert_eq!(l.reach(), Some((5, 10)));
    /// ```
    pub fn reach(&self) -> Option<(usize, usize)> {
        let (lo, hi) = reach(self.shape(), self.strides()).ok()??;
        Some((
            (self.offset as isize + lo) as usize,
            (self.offset as isize + hi) as usize,
        ))
    }

    /// Whether the layout is row-major contiguous (C order), ignoring strides of axes of length
    /// at most one. Empty layouts are standard.
    ///
    /// ```
    /// use ndarray::s;
    /// let l = devspan::Layout::contiguous(ndarray::Ix2(4, 4));
    /// assert!(l.is_standard_layout());
    /// assert!(!l.slice(s![.., 1..]).unwrap().is_standard_layout());
    /// assert!(l.slice(s![1..2, ..]).unwrap().is_standard_layout());
    /// ```
    pub fn is_standard_layout(&self) -> bool {
        if self.is_empty() {
            return true;
        }
        let mut expect: isize = 1;
        for (&n, &s) in self.shape().iter().zip(self.strides()).rev() {
            if n > 1 && s != expect {
                return false;
            }
            expect *= n as isize;
        }
        true
    }

    /// Whether the layout is column-major contiguous (Fortran order).
    ///
    /// ```
    /// let l = devspan::Layout::contiguous(ndarray::Ix2(4, 3));
    /// assert!(l.reversed_axes().is_fortran_layout());
    /// ```
    pub fn is_fortran_layout(&self) -> bool {
        if self.is_empty() {
            return true;
        }
        let mut expect: isize = 1;
        for (&n, &s) in self.shape().iter().zip(self.strides()) {
            if n > 1 && s != expect {
                return false;
            }
            expect *= n as isize;
        }
        true
    }

    /// Whether the reachable elements form one gap-free range reached once each, in some axis
    /// order and with any stride signs (a permuted or flipped contiguous block).
    ///
    /// ```
    /// use ndarray::s;
    /// let l = devspan::Layout::contiguous(ndarray::Ix3(2, 3, 4));
    /// assert!(l.permuted_axes([2, 0, 1]).unwrap().is_dense());
    /// assert!(l.slice(s![.., ..;-1, ..]).unwrap().is_dense());
    /// assert!(!l.slice(s![.., ..2, ..]).unwrap().is_dense());
    /// ```
    pub fn is_dense(&self) -> bool {
        if self.is_empty() {
            return true;
        }
        let mut axes: Vec<(usize, usize)> = self
            .shape()
            .iter()
            .zip(self.strides())
            .filter(|(n, _)| **n > 1)
            .map(|(&n, &s)| (s.unsigned_abs(), n))
            .collect();
        axes.sort_unstable();
        let mut expect = 1usize;
        for (s, n) in axes {
            if s != expect {
                return false;
            }
            expect *= n;
        }
        true
    }

    /// The same layout with a dynamic number of axes.
    ///
    /// ```
    /// let l = devspan::Layout::contiguous(ndarray::Ix2(2, 3)).into_dyn();
    /// assert_eq!(l.shape(), &[2, 3]);
    /// ```
    pub fn into_dyn(self) -> Layout<ndarray::IxDyn> {
        Layout {
            shape: self.shape.into_dyn(),
            strides: self.strides.into_dyn(),
            offset: self.offset,
        }
    }

    /// The same layout with a fixed number of axes `E`, or `Err(ShapeMismatch)`.
    ///
    /// ```
    /// let l = devspan::Layout::contiguous(ndarray::IxDyn(&[2, 3]));
    /// let l2 = l.into_dimensionality::<ndarray::Ix2>().unwrap();
    /// assert_eq!(l2.dim(), ndarray::Ix2(2, 3));
    /// ```
    pub fn into_dimensionality<E: Dimension>(self) -> Result<Layout<E>> {
        let shape = E::from_dimension(&self.shape);
        let strides = E::from_dimension(&self.strides);
        match (shape, strides) {
            (Some(shape), Some(strides)) => Ok(Layout {
                shape,
                strides,
                offset: self.offset,
            }),
            _ => Err(Error::shape(format!(
                "a {}-d layout cannot be viewed with {:?} axes",
                self.ndim(),
                E::NDIM
            ))),
        }
    }
}

/// Builds a dimension of type `E` from a slice of lengths.
pub(crate) fn dim_from_slice<E: Dimension>(v: &[usize]) -> E {
    let mut d = E::zeros(v.len());
    d.slice_mut().copy_from_slice(v);
    d
}
