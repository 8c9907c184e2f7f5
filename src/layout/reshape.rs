//! Reshape without copying: succeeds exactly when the elements, read in row-major order, can be
//! addressed with new strides.

use ndarray::{Dimension, IntoDimension};

use super::{Layout, checked_size};
use crate::error::{Error, Result};

/// New strides for `to` over `from`/`from_strides` read in row-major order, or `None` if the
/// memory layout does not allow it. Neither shape may contain a zero.
fn reshape_strides(from: &[usize], from_strides: &[isize], to: &[usize]) -> Option<Vec<isize>> {
    let mut out = vec![0isize; to.len()];
    let (mut fi, mut ti) = (0, 0);
    while fi < from.len() && ti < to.len() {
        let mut fd = from[fi];
        let mut fs = from_strides[fi];
        let mut td = to[ti];
        if fd == td {
            out[ti] = fs;
            fi += 1;
            ti += 1;
            continue;
        }
        if fd == 1 {
            fi += 1;
            continue;
        }
        if td == 1 {
            out[ti] = 1;
            ti += 1;
            continue;
        }
        // A run of `from` axes and a run of `to` axes with equal products must be one
        // contiguous block: distribute its stride over the `to` axes.
        let mut whole = fs as i128 * fd as i128;
        let (mut fprod, mut tprod) = (fd, td);
        while fprod != tprod {
            if fprod < tprod {
                fi += 1;
                if fi >= from.len() {
                    return None;
                }
                fd = from[fi];
                fprod *= fd;
                if fd > 1 {
                    let prev = fs;
                    fs = from_strides[fi];
                    if prev as i128 != fd as i128 * fs as i128 {
                        return None;
                    }
                }
            } else {
                whole /= td as i128;
                out[ti] = isize::try_from(whole).ok()?;
                ti += 1;
                if ti >= to.len() {
                    return None;
                }
                td = to[ti];
                tprod *= td;
            }
        }
        whole /= td as i128;
        out[ti] = isize::try_from(whole).ok()?;
        fi += 1;
        ti += 1;
    }
    while fi < from.len() && from[fi] == 1 {
        fi += 1;
    }
    while ti < to.len() && to[ti] == 1 {
        out[ti] = 1;
        ti += 1;
    }
    (fi == from.len() && ti == to.len()).then_some(out)
}

impl<D: Dimension> Layout<D> {
    /// The same elements, in row-major order, with a new shape: `Ok` exactly when no copy is
    /// needed (as ndarray's `to_shape` returning a view), `Err(ShapeMismatch)` when the element
    /// counts differ and `Err(IncompatibleLayout)` when the strides do not allow it.
    ///
    /// ```
    /// use ndarray::{s, Ix1, Ix2, Ix3};
    /// use devspan::{ErrorKind, Layout};
    /// let l = Layout::contiguous(Ix2(4, 6));
    /// assert_eq!(l.reshape(Ix3(2, 2, 6)).unwrap().strides(), &[12, 6, 1]);
    /// // Rows of a column slice are still contiguous runs: (4, 3) -> (4, 3, 1) works ...
    /// let cols = l.slice(s![.., ..3]).unwrap();
    /// assert!(cols.reshape(Ix3(4, 3, 1)).is_ok());
    /// // ... but flattening it would need a copy.
    /// assert_eq!(cols.reshape(Ix1(12)).unwrap_err().kind(), &ErrorKind::IncompatibleLayout);
    /// assert_eq!(l.reshape(Ix1(25)).unwrap_err().kind(), &ErrorKind::ShapeMismatch);
    /// ```
    pub fn reshape<E: IntoDimension>(&self, shape: E) -> Result<Layout<E::Dim>> {
        self.reshape_sized(shape, 1)
    }

    /// [`Layout::reshape`] for elements of `elem_size` bytes: `Err(Overflow)` if the nonzero
    /// lengths of `shape` multiply to more than `isize::MAX` bytes of them (invariant 1).
    pub(crate) fn reshape_sized<E: IntoDimension>(
        &self,
        shape: E,
        elem_size: usize,
    ) -> Result<Layout<E::Dim>> {
        let shape = shape.into_dimension();
        let n = checked_size(shape.slice(), elem_size)?;
        if n != self.len() {
            return Err(Error::shape(format!(
                "cannot reshape {:?} ({} elements) into {:?} ({n} elements)",
                self.shape(),
                self.len(),
                shape.slice()
            )));
        }
        if n == 0 {
            let mut out = Layout::try_contiguous(shape)?;
            out.offset = self.offset;
            return Ok(out);
        }
        let strides =
            reshape_strides(self.shape(), self.strides(), shape.slice()).ok_or_else(|| {
                Error::new(
                    crate::ErrorKind::IncompatibleLayout,
                    format!(
                        "shape {:?} with strides {:?} cannot be reshaped to {:?} without a copy",
                        self.shape(),
                        self.strides(),
                        shape.slice()
                    ),
                )
            })?;
        let mut st = <E::Dim as Dimension>::zeros(strides.len());
        for (d, s) in st.slice_mut().iter_mut().zip(&strides) {
            *d = *s as usize;
        }
        Ok(Layout {
            shape,
            strides: st,
            offset: self.offset,
        })
    }
}
