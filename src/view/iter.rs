//! Everyday ndarray accessors on arrays and views, metadata only: the length of an axis, the
//! shape as a `D`, rows and columns of 2-D ones, and iterators over the sub-views along an
//! axis.

use std::iter::FusedIterator;

use ndarray::{Axis, Dimension, Ix1, Ix2, RemoveAxis, Slice};

use super::{DeviceBase, DeviceView, DeviceViewMut, SpanData, SpanDataMut};
use crate::element::DeviceElement;

impl<S: SpanData, D: Dimension> DeviceBase<S, D> {
    /// The length of `axis` (ndarray's `len_of`). Panics when `axis` is not below
    /// [`ndim`](Self::ndim), as ndarray's does.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!(a.len_of(Axis(1)), 6);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn len_of(&self, axis: Axis) -> usize {
        self.shape()[axis.index()]
    }

    /// The shape as a `D` (ndarray's `raw_dim`; the same as [`dim`](Self::dim) here).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!(a.raw_dim(), ndarray::Ix2(4, 6));
    /// # Ok(()) }
    /// ```
    pub fn raw_dim(&self) -> D {
        self.dim()
    }

    /// The sub-views along axis 0, in order (ndarray's `outer_iter`). Panics for a view of no
    /// axes.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!(a.outer_iter().map(|row| row.len()).sum::<usize>(), 24);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn outer_iter(&self) -> AxisIter<'_, S::Elem, D>
    where
        D: RemoveAxis,
    {
        self.axis_iter(Axis(0))
    }

    /// The sub-views along `axis`, in order (ndarray's `axis_iter`): the `i`-th is
    /// [`index_axis`](Self::index_axis)`(axis, i)`. Panics when `axis` is not below
    /// [`ndim`](Self::ndim).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// let columns: Vec<_> = a.axis_iter(Axis(1)).collect();
    /// assert_eq!((columns.len(), columns[0].shape()), (6, &[4usize][..]));
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn axis_iter(&self, axis: Axis) -> AxisIter<'_, S::Elem, D>
    where
        D: RemoveAxis,
    {
        let end = self.len_of(axis);
        AxisIter {
            view: self.view(),
            axis,
            next: 0,
            end,
        }
    }

    /// The sub-views of `size` indices along `axis`, in order, the last one shorter where
    /// `size` does not divide the axis (ndarray's `axis_chunks_iter`). Panics when `axis` is not
    /// below [`ndim`](Self::ndim) or `size` is 0.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (5, 6))?;
    /// let lens: Vec<_> = a.axis_chunks_iter(Axis(0), 2).map(|c| c.shape()[0]).collect();
    /// assert_eq!(lens, [2, 2, 1]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn axis_chunks_iter(&self, axis: Axis, size: usize) -> AxisChunksIter<'_, S::Elem, D> {
        assert!(size > 0, "axis_chunks_iter: the chunk size must not be 0");
        let end = self.len_of(axis);
        AxisChunksIter {
            view: self.view(),
            axis,
            size,
            next: 0,
            end,
        }
    }
}

impl<S: SpanDataMut, D: Dimension> DeviceBase<S, D> {
    /// Writable sub-views along `axis`, in order (ndarray's `axis_iter_mut`); they do not
    /// overlap. Panics when `axis` is not below [`ndim`](Self::ndim).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// for (i, mut row) in a.axis_iter_mut(Axis(0)).enumerate() {
    ///     row.fill_on(&stream, i as f32)?;
    /// }
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn axis_iter_mut(&mut self, axis: Axis) -> AxisIterMut<'_, S::Elem, D>
    where
        D: RemoveAxis,
    {
        let _ = self.len_of(axis);
        AxisIterMut {
            rest: Some(self.view_mut()),
            axis,
        }
    }
}

impl<S: SpanData> DeviceBase<S, Ix2> {
    /// Row `index` (ndarray's `row`); panics when it is out of range.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!(a.row(3).shape(), &[6]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn row(&self, index: usize) -> DeviceBase<S::Ref<'_>, Ix1> {
        self.index_axis(Axis(0), index)
    }

    /// Column `index` (ndarray's `column`); panics when it is out of range.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!((a.column(5).shape(), a.column(5).strides()), (&[4usize][..], &[6isize][..]));
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn column(&self, index: usize) -> DeviceBase<S::Ref<'_>, Ix1> {
        self.index_axis(Axis(1), index)
    }
}

impl<S: SpanDataMut> DeviceBase<S, Ix2> {
    /// Row `index`, writable (ndarray's `row_mut`); panics when it is out of range.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// a.row_mut(0).fill_on(&stream, 1.0)?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn row_mut(&mut self, index: usize) -> DeviceViewMut<'_, S::Elem, Ix1> {
        self.index_axis_mut(Axis(0), index)
    }

    /// Column `index`, writable (ndarray's `column_mut`); panics when it is out of range.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// a.column_mut(2).fill_on(&stream, 1.0)?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn column_mut(&mut self, index: usize) -> DeviceViewMut<'_, S::Elem, Ix1> {
        self.index_axis_mut(Axis(1), index)
    }
}

/// Iterator over the sub-views along an axis ([`DeviceBase::axis_iter`],
/// [`DeviceBase::outer_iter`]).
#[derive(Clone, Debug)]
pub struct AxisIter<'a, T: DeviceElement, D: Dimension> {
    view: DeviceView<'a, T, D>,
    axis: Axis,
    next: usize,
    end: usize,
}

impl<'a, T: DeviceElement, D: RemoveAxis> Iterator for AxisIter<'a, T, D> {
    type Item = DeviceView<'a, T, D::Smaller>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next == self.end {
            return None;
        }
        let i = self.next;
        self.next += 1;
        Some(self.view.clone().index_axis_move(self.axis, i))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.next;
        (n, Some(n))
    }
}

impl<T: DeviceElement, D: RemoveAxis> DoubleEndedIterator for AxisIter<'_, T, D> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.next == self.end {
            return None;
        }
        self.end -= 1;
        Some(self.view.clone().index_axis_move(self.axis, self.end))
    }
}

impl<T: DeviceElement, D: RemoveAxis> ExactSizeIterator for AxisIter<'_, T, D> {}
impl<T: DeviceElement, D: RemoveAxis> FusedIterator for AxisIter<'_, T, D> {}

/// Iterator over chunks of an axis ([`DeviceBase::axis_chunks_iter`]).
#[derive(Clone, Debug)]
pub struct AxisChunksIter<'a, T: DeviceElement, D: Dimension> {
    view: DeviceView<'a, T, D>,
    axis: Axis,
    size: usize,
    next: usize,
    end: usize,
}

impl<'a, T: DeviceElement, D: Dimension> Iterator for AxisChunksIter<'a, T, D> {
    type Item = DeviceView<'a, T, D>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let start = self.next;
        let stop = start + self.size.min(self.end - start);
        self.next = stop;
        let slice = Slice::from(start..stop);
        Some(self.view.clone().slice_axis_move(self.axis, slice))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.end - self.next.min(self.end)).div_ceil(self.size);
        (n, Some(n))
    }
}

impl<T: DeviceElement, D: Dimension> ExactSizeIterator for AxisChunksIter<'_, T, D> {}
impl<T: DeviceElement, D: Dimension> FusedIterator for AxisChunksIter<'_, T, D> {}

/// Iterator over the writable sub-views along an axis ([`DeviceBase::axis_iter_mut`]): each
/// is split off the front of the rest, so no two overlap.
#[derive(Debug)]
pub struct AxisIterMut<'a, T: DeviceElement, D: Dimension> {
    rest: Option<DeviceViewMut<'a, T, D>>,
    axis: Axis,
}

impl<'a, T: DeviceElement, D: RemoveAxis> Iterator for AxisIterMut<'a, T, D> {
    type Item = DeviceViewMut<'a, T, D::Smaller>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest.take()?;
        if rest.len_of(self.axis) == 0 {
            return None;
        }
        let (head, tail) = rest.split_at(self.axis, 1);
        self.rest = Some(tail);
        Some(head.index_axis_move(self.axis, 0))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.rest.as_ref().map_or(0, |r| r.len_of(self.axis));
        (n, Some(n))
    }
}

impl<T: DeviceElement, D: RemoveAxis> ExactSizeIterator for AxisIterMut<'_, T, D> {}
impl<T: DeviceElement, D: RemoveAxis> FusedIterator for AxisIterMut<'_, T, D> {}
