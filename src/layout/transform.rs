//! Metadata operations on layouts. Each keeps invariants 1-3 because the set of reachable
//! elements of the result is a subset of the input's (slicing, indexing, splitting), the same
//! set (axis permutations and flips, unit axes), or a repetition of it (broadcast, read-only).
//! Invariant 4 holds for every result except [`Layout::broadcast`]'s, which views refuse to
//! write through.

use ndarray::{Axis, Dimension, IntoDimension, RemoveAxis, Slice, SliceArg, SliceInfoElem};

use super::{Layout, dim_from_slice};
use crate::error::{Error, Result};

fn abs_index(len: usize, index: isize) -> Option<usize> {
    if index < 0 {
        len.checked_sub(index.unsigned_abs())
    } else {
        Some(index as usize)
    }
}

/// Applies `slice` to one axis of length `len` and stride `stride`: the new length and stride
/// and the offset (in elements) of the new first element. Same semantics as ndarray's slicing:
/// negative `start`/`end` count from the end; a negative step walks from `end - 1` down.
pub(crate) fn slice_one(len: usize, stride: isize, slice: Slice) -> Result<(usize, isize, isize)> {
    let Slice { start, end, step } = slice;
    if step == 0 {
        return Err(Error::invalid("slice step must be nonzero"));
    }
    let bad = |what: &str, v: isize| {
        Error::out_of_bounds(format!(
            "slice {what} {v} is out of bounds for an axis of length {len}"
        ))
    };
    let s = abs_index(len, start).ok_or_else(|| bad("start", start))?;
    let e_raw = end.unwrap_or(len as isize);
    let mut e = abs_index(len, e_raw).ok_or_else(|| bad("end", e_raw))?;
    if s > len {
        return Err(bad("start", start));
    }
    if e > len {
        return Err(bad("end", e_raw));
    }
    if e < s {
        e = s;
    }
    let m = e - s;
    // Wrapping: for an empty layout the strides are unconstrained and the offset is discarded;
    // for a non-empty one the result is a reachable offset, which fits (invariant 2).
    let off = if m == 0 {
        0
    } else if step < 0 {
        ((e - 1) as isize).wrapping_mul(stride)
    } else {
        (s as isize).wrapping_mul(stride)
    };
    let abs_step = step.unsigned_abs();
    let new_len = m.div_ceil(abs_step);
    let new_stride = if new_len <= 1 {
        0
    } else {
        stride.wrapping_mul(step)
    };
    Ok((new_len, new_stride, off))
}

impl<D: Dimension> Layout<D> {
    fn axis_check(&self, axis: usize) -> Result<()> {
        if axis >= self.ndim() {
            return Err(Error::axis(format!(
                "axis {axis} is out of range for a {}-d layout with shape {:?}",
                self.ndim(),
                self.shape()
            )));
        }
        Ok(())
    }

    pub(crate) fn with_offset_delta(mut self, delta: isize) -> Self {
        self.offset = (self.offset as isize + delta) as usize;
        self
    }

    /// Slices with ndarray's `s![]` syntax: ranges with steps (negative too), single indices
    /// (which remove the axis) and `NewAxis`.
    ///
    /// ```
    /// use ndarray::{s, Ix3};
    /// let l = devspan::Layout::contiguous(Ix3(4, 5, 6));
    /// let t = l.slice(s![1, ..;-2, ndarray::NewAxis, 2..4]).unwrap();
    /// assert_eq!(t.shape(), &[3, 1, 2]);
    /// assert!(l.slice(s![.., .., 7..]).is_err());
    /// ```
    pub fn slice<I: SliceArg<D>>(&self, info: I) -> Result<Layout<I::OutDim>> {
        let elems: &[SliceInfoElem] = info.as_ref();
        if info.in_ndim() != self.ndim() {
            return Err(Error::shape(format!(
                "a slice for {} axes was applied to a {}-d layout",
                info.in_ndim(),
                self.ndim()
            )));
        }
        let mut shape = Vec::with_capacity(info.out_ndim());
        let mut strides = Vec::with_capacity(info.out_ndim());
        let mut delta: isize = 0;
        let mut axis = 0;
        for elem in elems {
            match *elem {
                SliceInfoElem::Slice { start, end, step } => {
                    let (n, s, off) = slice_one(
                        self.shape()[axis],
                        self.strides()[axis],
                        Slice { start, end, step },
                    )
                    .map_err(|e| {
                        Error::new(e.kind().clone(), format!("axis {axis}: {}", e.message()))
                    })?;
                    shape.push(n);
                    strides.push(s);
                    delta = delta.wrapping_add(off);
                    axis += 1;
                }
                SliceInfoElem::Index(i) => {
                    let len = self.shape()[axis];
                    let idx = abs_index(len, i).filter(|&x| x < len).ok_or_else(|| {
                        Error::out_of_bounds(format!(
                            "index {i} is out of bounds for axis {axis} of length {len}"
                        ))
                    })?;
                    delta = delta.wrapping_add((idx as isize).wrapping_mul(self.strides()[axis]));
                    axis += 1;
                }
                SliceInfoElem::NewAxis => {
                    shape.push(1);
                    strides.push(0);
                }
            }
        }
        let out_shape: I::OutDim = dim_from_slice(&shape);
        let mut out_strides = I::OutDim::zeros(shape.len());
        for (d, s) in out_strides.slice_mut().iter_mut().zip(&strides) {
            *d = *s as usize;
        }
        // A slice of an empty layout keeps the offset: nothing is reachable either way.
        let delta = if self.is_empty() { 0 } else { delta };
        Ok(Layout {
            shape: out_shape,
            strides: out_strides,
            offset: (self.offset as isize + delta) as usize,
        })
    }

    /// Slices one axis in place.
    ///
    /// ```
    /// use ndarray::{Axis, Slice, Ix2};
    /// let l = devspan::Layout::contiguous(Ix2(4, 6)).slice_axis(Axis(1), Slice::new(1, None, 2)).unwrap();
    /// assert_eq!((l.shape(), l.strides()), (&[4usize, 3][..], &[6isize, 2][..]));
    /// ```
    pub fn slice_axis(&self, axis: Axis, slice: Slice) -> Result<Layout<D>> {
        self.axis_check(axis.0)?;
        let (n, s, off) = slice_one(self.shape()[axis.0], self.strides()[axis.0], slice)?;
        let mut out = self.clone();
        out.shape.slice_mut()[axis.0] = n;
        out.strides.slice_mut()[axis.0] = s as usize;
        let off = if self.is_empty() { 0 } else { off };
        Ok(out.with_offset_delta(off))
    }

    /// The sub-layout at `index` along `axis`, which is removed.
    ///
    /// ```
    /// use ndarray::{Axis, Ix2};
    /// let l = devspan::Layout::contiguous(Ix2(4, 6)).index_axis(Axis(0), 2).unwrap();
    /// assert_eq!((l.shape(), l.offset()), (&[6usize][..], 12));
    /// ```
    pub fn index_axis(&self, axis: Axis, index: usize) -> Result<Layout<D::Smaller>>
    where
        D: RemoveAxis,
    {
        self.axis_check(axis.0)?;
        let len = self.shape()[axis.0];
        if index >= len {
            return Err(Error::out_of_bounds(format!(
                "index {index} is out of bounds for axis {} of length {len}",
                axis.0
            )));
        }
        let delta = if self.is_empty() {
            0
        } else {
            index as isize * self.strides()[axis.0]
        };
        Ok(Layout {
            shape: self.shape.remove_axis(axis),
            strides: self.strides.remove_axis(axis),
            offset: (self.offset as isize + delta) as usize,
        })
    }

    /// The layout with its axes in reverse order (a transpose, for 2-d).
    ///
    /// ```
    /// let l = devspan::Layout::contiguous(ndarray::Ix2(2, 3)).reversed_axes();
    /// assert_eq!((l.shape(), l.strides()), (&[3usize, 2][..], &[1isize, 3][..]));
    /// ```
    pub fn reversed_axes(mut self) -> Layout<D> {
        self.shape.slice_mut().reverse();
        self.strides.slice_mut().reverse();
        self
    }

    /// The layout with axis `i` of the result taken from axis `axes[i]` of `self`;
    /// `Err(InvalidAxis)` unless `axes` is a permutation.
    ///
    /// ```
    /// let l = devspan::Layout::contiguous(ndarray::Ix3(2, 3, 4)).permuted_axes([2, 0, 1]).unwrap();
    /// assert_eq!((l.shape(), l.strides()), (&[4usize, 2, 3][..], &[1isize, 12, 4][..]));
    /// ```
    pub fn permuted_axes<T: IntoDimension<Dim = D>>(&self, axes: T) -> Result<Layout<D>> {
        let axes = axes.into_dimension();
        let n = self.ndim();
        let mut seen = vec![false; n];
        if axes.ndim() != n {
            return Err(Error::axis(format!(
                "{:?} is not a permutation of {n} axes",
                axes.slice()
            )));
        }
        for &a in axes.slice() {
            if a >= n || seen[a] {
                return Err(Error::axis(format!(
                    "{:?} is not a permutation of {n} axes",
                    axes.slice()
                )));
            }
            seen[a] = true;
        }
        let mut out = self.clone();
        for (i, &a) in axes.slice().iter().enumerate() {
            out.shape.slice_mut()[i] = self.shape()[a];
            out.strides.slice_mut()[i] = self.strides()[a] as usize;
        }
        Ok(out)
    }

    /// The layout with axes `a` and `b` exchanged.
    ///
    /// ```
    /// let l = devspan::Layout::contiguous(ndarray::Ix3(2, 3, 4)).swap_axes(0, 2).unwrap();
    /// assert_eq!(l.shape(), &[4, 3, 2]);
    /// ```
    pub fn swap_axes(&self, a: usize, b: usize) -> Result<Layout<D>> {
        self.axis_check(a)?;
        self.axis_check(b)?;
        let mut out = self.clone();
        out.shape.slice_mut().swap(a, b);
        out.strides.slice_mut().swap(a, b);
        Ok(out)
    }

    /// The layout with the order of `axis` reversed (its stride negated).
    ///
    /// ```
    /// use ndarray::Axis;
    /// let l = devspan::Layout::contiguous(ndarray::Ix1(5)).invert_axis(Axis(0)).unwrap();
    /// assert_eq!((l.strides(), l.offset()), (&[-1isize][..], 4));
    /// ```
    pub fn invert_axis(&self, axis: Axis) -> Result<Layout<D>> {
        self.axis_check(axis.0)?;
        let len = self.shape()[axis.0];
        let s = self.strides()[axis.0];
        let mut out = self.clone();
        out.strides.slice_mut()[axis.0] = s.wrapping_neg() as usize;
        if self.is_empty() {
            return Ok(out);
        }
        Ok(out.with_offset_delta((len as isize - 1) * s))
    }

    /// The layout with a new axis of length 1 at `axis` (`0..=ndim`).
    ///
    /// ```
    /// use ndarray::Axis;
    /// let l = devspan::Layout::contiguous(ndarray::Ix2(2, 3)).insert_axis(Axis(1)).unwrap();
    /// assert_eq!(l.shape(), &[2, 1, 3]);
    /// ```
    pub fn insert_axis(&self, axis: Axis) -> Result<Layout<D::Larger>> {
        if axis.0 > self.ndim() {
            return Err(Error::axis(format!(
                "cannot insert axis {} into a {}-d layout",
                axis.0,
                self.ndim()
            )));
        }
        let mut shape = self.shape().to_vec();
        let mut strides = self.strides().to_vec();
        shape.insert(axis.0, 1);
        strides.insert(axis.0, 0);
        let mut st = <D::Larger as Dimension>::zeros(strides.len());
        for (d, s) in st.slice_mut().iter_mut().zip(&strides) {
            *d = *s as usize;
        }
        Ok(Layout {
            shape: dim_from_slice(&shape),
            strides: st,
            offset: self.offset,
        })
    }

    /// The layout without `axis`, which must have length 1.
    ///
    /// ```
    /// use ndarray::Axis;
    /// let l = devspan::Layout::contiguous(ndarray::Ix3(2, 1, 3));
    /// assert_eq!(l.remove_axis(Axis(1)).unwrap().shape(), &[2, 3]);
    /// assert!(l.remove_axis(Axis(0)).is_err());
    /// ```
    pub fn remove_axis(&self, axis: Axis) -> Result<Layout<D::Smaller>>
    where
        D: RemoveAxis,
    {
        self.axis_check(axis.0)?;
        if self.shape()[axis.0] != 1 {
            return Err(Error::shape(format!(
                "axis {} has length {}, only an axis of length 1 can be removed (shape {:?})",
                axis.0,
                self.shape()[axis.0],
                self.shape()
            )));
        }
        Ok(Layout {
            shape: self.shape.remove_axis(axis),
            strides: self.strides.remove_axis(axis),
            offset: self.offset,
        })
    }

    /// The layout broadcast to `shape` by ndarray's rules (trailing axes aligned; axes of
    /// length 1 and new leading axes get stride 0). The result reaches elements more than once,
    /// so only read-only views use it. `Err(Overflow)` if `shape` has more than `isize::MAX`
    /// elements (invariant 1, with 1-byte elements as in [`Layout::new_strided`]).
    ///
    /// ```
    /// use ndarray::{Ix1, Ix2};
    /// let l = devspan::Layout::contiguous(Ix1(3)).broadcast(Ix2(4, 3)).unwrap();
    /// assert_eq!(l.strides(), &[0, 1]);
    /// assert!(devspan::Layout::contiguous(Ix1(3)).broadcast(Ix2(4, 2)).is_err());
    /// ```
    pub fn broadcast<E: IntoDimension>(&self, shape: E) -> Result<Layout<E::Dim>> {
        self.broadcast_sized(shape, 1)
    }

    /// [`Layout::broadcast`] for elements of `elem_size` bytes: `Err(Overflow)` if `shape`
    /// holds more than `isize::MAX` bytes of them (invariant 1).
    pub(crate) fn broadcast_sized<E: IntoDimension>(
        &self,
        shape: E,
        elem_size: usize,
    ) -> Result<Layout<E::Dim>> {
        let shape = shape.into_dimension();
        let to = shape.slice();
        let from = self.shape();
        let bad = || Error::shape(format!("shape {from:?} cannot be broadcast to {to:?}"));
        if to.len() < from.len() {
            return Err(bad());
        }
        super::checked_size(to, elem_size)?;
        let lead = to.len() - from.len();
        let mut strides = <E::Dim as Dimension>::zeros(to.len());
        for (i, &n) in to.iter().enumerate() {
            if i < lead {
                continue;
            }
            let j = i - lead;
            if from[j] == n {
                strides.slice_mut()[i] = self.strides()[j] as usize;
            } else if from[j] != 1 {
                return Err(bad());
            }
        }
        Ok(Layout {
            shape,
            strides,
            offset: self.offset,
        })
    }

    /// Splits along `axis` at `index` into `[..index]` and `[index..]`.
    ///
    /// ```
    /// use ndarray::Axis;
    /// let (a, b) = devspan::Layout::contiguous(ndarray::Ix2(4, 3)).split_at(Axis(0), 1).unwrap();
    /// assert_eq!((a.shape(), b.shape(), b.offset()), (&[1usize, 3][..], &[3usize, 3][..], 3));
    /// ```
    pub fn split_at(&self, axis: Axis, index: usize) -> Result<(Layout<D>, Layout<D>)> {
        self.axis_check(axis.0)?;
        let len = self.shape()[axis.0];
        if index > len {
            return Err(Error::out_of_bounds(format!(
                "split index {index} is past the end of axis {} of length {len}",
                axis.0
            )));
        }
        let mut a = self.clone();
        let mut b = self.clone();
        a.shape.slice_mut()[axis.0] = index;
        b.shape.slice_mut()[axis.0] = len - index;
        let delta = if index == len || self.is_empty() {
            0
        } else {
            index as isize * self.strides()[axis.0]
        };
        Ok((a, b.with_offset_delta(delta)))
    }
}
