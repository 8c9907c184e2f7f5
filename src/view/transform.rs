//! Layout operations on views: metadata only, the keep-alive is moved or cloned.

use ndarray::{Axis, Dimension, IntoDimension, RemoveAxis, Slice, SliceArg};

use super::{DeviceBase, DeviceViewMut, SpanData, SpanDataMut, ViewData};
use crate::error::Result;
use crate::layout::Layout;

#[track_caller]
fn ok<T>(r: Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

/// Operations shared by read-only and writable views. They consume the view (clone a
/// [`DeviceView`](super::DeviceView) first to keep it); none can make a writable view alias itself.
impl<S: SpanData, D: Dimension> DeviceBase<S, D> {
    /// Slices with `s![]`, consuming the view; `Err` for out-of-range slices.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 4))?;
    /// let v = a.view_mut().try_slice_move(s![1.., ..;2])?;
    /// assert_eq!(v.shape(), &[3, 2]);
    /// # Ok(()) }
    /// ```
    pub fn try_slice_move<I: SliceArg<D>>(self, info: I) -> Result<DeviceBase<S, I::OutDim>> {
        let l = self.layout.slice(info)?;
        Ok(self.with_layout(l))
    }

    /// Slices with `s![]`, consuming the view. Panics where [`try_slice_move`](Self::try_slice_move)
    /// returns `Err`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 4))?;
    /// let v = a.view_mut().slice_move(s![2, ..]);
    /// assert_eq!(v.shape(), &[4]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn slice_move<I: SliceArg<D>>(self, info: I) -> DeviceBase<S, I::OutDim> {
        ok(self.try_slice_move(info))
    }

    /// Slices one axis, consuming the view.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{Axis, Slice};
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 4))?;
    /// let v = a.view().try_slice_axis_move(Axis(0), Slice::from(1..3))?;
    /// assert_eq!(v.shape(), &[2, 4]);
    /// # Ok(()) }
    /// ```
    pub fn try_slice_axis_move(self, axis: Axis, slice: Slice) -> Result<Self> {
        let l = self.layout.slice_axis(axis, slice)?;
        Ok(self.with_layout(l))
    }

    /// Slices one axis, consuming the view; panics on bad input.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{Axis, Slice};
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 4))?;
    /// assert_eq!(a.view().slice_axis_move(Axis(1), Slice::new(0, None, 2)).shape(), &[4, 2]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn slice_axis_move(self, axis: Axis, slice: Slice) -> Self {
        ok(self.try_slice_axis_move(axis, slice))
    }

    /// The sub-view at `index` along `axis`, which is removed; consumes the view.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 5))?;
    /// assert_eq!(a.view().try_index_axis_move(Axis(1), 2)?.shape(), &[4]);
    /// # Ok(()) }
    /// ```
    pub fn try_index_axis_move(self, axis: Axis, index: usize) -> Result<DeviceBase<S, D::Smaller>>
    where
        D: RemoveAxis,
    {
        let l = self.layout.index_axis(axis, index)?;
        Ok(self.with_layout(l))
    }

    /// The sub-view at `index` along `axis`; panics on bad input.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 5))?;
    /// assert_eq!(a.view().index_axis_move(Axis(0), 3).shape(), &[5]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn index_axis_move(self, axis: Axis, index: usize) -> DeviceBase<S, D::Smaller>
    where
        D: RemoveAxis,
    {
        ok(self.try_index_axis_move(axis, index))
    }

    /// The view with its axes reversed (the transpose, for 2-d).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3, 4))?;
    /// assert_eq!(a.view().reversed_axes().shape(), &[4, 3, 2]);
    /// # Ok(()) }
    /// ```
    pub fn reversed_axes(self) -> Self {
        let l = self.layout.clone().reversed_axes();
        self.with_layout(l)
    }

    /// The view with axis `i` taken from axis `axes[i]`; `Err` unless `axes` is a permutation.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3, 4))?;
    /// assert_eq!(a.view().try_permuted_axes([2, 0, 1])?.shape(), &[4, 2, 3]);
    /// assert!(a.view().try_permuted_axes([0, 0, 1]).is_err());
    /// # Ok(()) }
    /// ```
    pub fn try_permuted_axes<T: IntoDimension<Dim = D>>(self, axes: T) -> Result<Self> {
        let l = self.layout.permuted_axes(axes)?;
        Ok(self.with_layout(l))
    }

    /// [`try_permuted_axes`](Self::try_permuted_axes) that panics on a bad permutation.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3, 4))?;
    /// assert_eq!(a.view().permuted_axes([1, 2, 0]).shape(), &[3, 4, 2]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn permuted_axes<T: IntoDimension<Dim = D>>(self, axes: T) -> Self {
        ok(self.try_permuted_axes(axes))
    }

    /// Exchanges axes `a` and `b` in place; `Err` for an axis out of range.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let mut v = a.view();
    /// v.try_swap_axes(0, 1)?;
    /// assert_eq!(v.shape(), &[3, 2]);
    /// # Ok(()) }
    /// ```
    pub fn try_swap_axes(&mut self, a: usize, b: usize) -> Result<()> {
        self.layout = self.layout.swap_axes(a, b)?;
        Ok(())
    }

    /// Exchanges axes `a` and `b` in place; panics for an axis out of range.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let mut v = a.view();
    /// v.swap_axes(0, 1);
    /// assert_eq!(v.strides(), &[1, 3]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn swap_axes(&mut self, a: usize, b: usize) {
        ok(self.try_swap_axes(a, b))
    }

    /// Reverses the order of `axis` in place; `Err` for an axis out of range.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let mut v = a.view();
    /// v.try_invert_axis(Axis(1))?;
    /// assert_eq!(v.strides(), &[3, -1]);
    /// # Ok(()) }
    /// ```
    pub fn try_invert_axis(&mut self, axis: Axis) -> Result<()> {
        self.layout = self.layout.invert_axis(axis)?;
        Ok(())
    }

    /// Reverses the order of `axis` in place; panics for an axis out of range.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, 5)?;
    /// let mut v = a.view();
    /// v.invert_axis(Axis(0));
    /// assert_eq!(v.strides(), &[-1]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn invert_axis(&mut self, axis: Axis) {
        ok(self.try_invert_axis(axis))
    }

    /// Inserts an axis of length 1 at `axis`; `Err` if `axis > ndim`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert_eq!(a.view().try_insert_axis(Axis(2))?.shape(), &[2, 3, 1]);
    /// # Ok(()) }
    /// ```
    pub fn try_insert_axis(self, axis: Axis) -> Result<DeviceBase<S, D::Larger>> {
        let l = self.layout.insert_axis(axis)?;
        Ok(self.with_layout(l))
    }

    /// Inserts an axis of length 1 at `axis`; panics if `axis > ndim`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert_eq!(a.view().insert_axis(Axis(0)).shape(), &[1, 2, 3]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn insert_axis(self, axis: Axis) -> DeviceBase<S, D::Larger> {
        ok(self.try_insert_axis(axis))
    }

    /// Removes `axis`, which must have length 1.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 1, 3))?;
    /// assert_eq!(a.view().try_remove_axis(Axis(1))?.shape(), &[2, 3]);
    /// assert!(a.view().try_remove_axis(Axis(0)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn try_remove_axis(self, axis: Axis) -> Result<DeviceBase<S, D::Smaller>>
    where
        D: RemoveAxis,
    {
        let l = self.layout.remove_axis(axis)?;
        Ok(self.with_layout(l))
    }

    /// Removes `axis` (of length 1); panics otherwise.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (1, 3))?;
    /// assert_eq!(a.view().remove_axis(Axis(0)).shape(), &[3]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn remove_axis(self, axis: Axis) -> DeviceBase<S, D::Smaller>
    where
        D: RemoveAxis,
    {
        ok(self.try_remove_axis(axis))
    }
}

/// Splitting: views only (an array's storage cannot be shared by two owners).
impl<S: ViewData, D: Dimension> DeviceBase<S, D> {
    /// Splits along `axis` at `index` into two views, `[..index]` and `[index..]` (disjoint, so
    /// writable views split too).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 3))?;
    /// let (top, bottom) = a.view_mut().try_split_at(Axis(0), 1)?;
    /// assert_eq!((top.shape(), bottom.shape()), (&[1usize, 3][..], &[3usize, 3][..]));
    /// # Ok(()) }
    /// ```
    pub fn try_split_at(self, axis: Axis, index: usize) -> Result<(Self, Self)> {
        let (la, lb) = self.layout.split_at(axis, index)?;
        let DeviceBase { span, .. } = self;
        // The two layouts reach disjoint elements: one takes the indices below `index` on
        // `axis`, the other those at or above it, and invariant 4 of the input maps distinct
        // indices to distinct elements.
        let (a, b) = span.split_pair();
        // Each half's span shrinks to the elements between its lowest and highest one; where the
        // two ranges still interleave, neither span may be handed out whole.
        let (ra, rb) = (la.reach(), lb.reach());
        let shared = S::WRITABLE
            && matches!((ra, rb), (Some((a0, a1)), Some((b0, b1))) if a0 <= b1 && b0 <= a1);
        let size = std::mem::size_of::<S::Elem>();
        let narrow = |span: S, layout: Layout<D>, reach: Option<(usize, usize)>| match reach {
            // The reach lies inside the span (layout invariants 1-3), so the byte range is in
            // bounds and the new offset is the old one less `lo`.
            Some((lo, hi)) => (
                span.narrowed(lo * size, (hi + 1) * size, shared),
                layout.with_offset_delta(-(lo as isize)),
            ),
            // Nothing reachable: an empty span at the start, offset zero.
            None => {
                let offset = layout.offset() as isize;
                (
                    span.narrowed(0, 0, shared),
                    layout.with_offset_delta(-offset),
                )
            }
        };
        let (a, la) = narrow(a, la, ra);
        let (b, lb) = narrow(b, lb, rb);
        Ok((
            DeviceBase {
                span: a,
                layout: la,
            },
            DeviceBase {
                span: b,
                layout: lb,
            },
        ))
    }

    /// [`try_split_at`](Self::try_split_at) that panics on bad input.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 3))?;
    /// let (l, r) = a.view().split_at(Axis(1), 2);
    /// assert_eq!((l.shape(), r.shape()), (&[4usize, 2][..], &[4usize, 1][..]));
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn split_at(self, axis: Axis, index: usize) -> (Self, Self) {
        ok(self.try_split_at(axis, index))
    }
}

/// Sub-views borrowing `self`, on arrays and views alike (ndarray's `slice`, `t`, ...).
impl<S: SpanData, D: Dimension> DeviceBase<S, D> {
    /// Slices with `s![]` (steps, negative steps, single indices, `NewAxis`); `Err` for
    /// out-of-range slices or a wrong number of axes.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// let v = a.try_slice(s![1..3, ..;-2])?;
    /// assert_eq!((v.shape(), v.strides()), (&[2usize, 3][..], &[6isize, -2][..]));
    /// assert!(a.try_slice(s![.., 7]).is_err());
    /// # Ok(()) }
    /// ```
    pub fn try_slice<I: SliceArg<D>>(&self, info: I) -> Result<DeviceBase<S::Ref<'_>, I::OutDim>> {
        self.sub_view().try_slice_move(info)
    }

    /// [`try_slice`](Self::try_slice) that panics on bad input.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!(a.slice(s![.., 3]).shape(), &[4]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn slice<I: SliceArg<D>>(&self, info: I) -> DeviceBase<S::Ref<'_>, I::OutDim> {
        ok(self.try_slice(info))
    }

    /// Slices one axis.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{Axis, Slice};
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!(a.try_slice_axis(Axis(1), Slice::new(0, None, 3))?.shape(), &[4, 2]);
    /// # Ok(()) }
    /// ```
    pub fn try_slice_axis(&self, axis: Axis, slice: Slice) -> Result<DeviceBase<S::Ref<'_>, D>> {
        self.sub_view().try_slice_axis_move(axis, slice)
    }

    /// Slices one axis; panics on bad input.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{Axis, Slice};
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!(a.slice_axis(Axis(0), Slice::from(2..)).shape(), &[2, 6]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn slice_axis(&self, axis: Axis, slice: Slice) -> DeviceBase<S::Ref<'_>, D> {
        ok(self.try_slice_axis(axis, slice))
    }

    /// The sub-view at `index` along `axis`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!(a.try_index_axis(Axis(0), 1)?.shape(), &[6]);
    /// # Ok(()) }
    /// ```
    pub fn try_index_axis(
        &self,
        axis: Axis,
        index: usize,
    ) -> Result<DeviceBase<S::Ref<'_>, D::Smaller>>
    where
        D: RemoveAxis,
    {
        self.sub_view().try_index_axis_move(axis, index)
    }

    /// The sub-view at `index` along `axis`; panics on bad input.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!(a.index_axis(Axis(1), 5).shape(), &[4]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn index_axis(&self, axis: Axis, index: usize) -> DeviceBase<S::Ref<'_>, D::Smaller>
    where
        D: RemoveAxis,
    {
        ok(self.try_index_axis(axis, index))
    }

    /// The transpose: axes reversed.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// assert_eq!(a.t().strides(), &[1, 6]);
    /// # Ok(()) }
    /// ```
    pub fn t(&self) -> DeviceBase<S::Ref<'_>, D> {
        self.sub_view().reversed_axes()
    }

    /// The view broadcast to `shape` (ndarray's rules: trailing axes aligned, axes of length 1
    /// repeated with stride 0). Read-only views only: the result reaches elements repeatedly.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let row = devspan::DeviceArray::<f32, _>::zeros(&stream, 6)?;
    /// let b = row.broadcast((4, 6))?;
    /// assert_eq!(b.strides(), &[0, 1]);
    /// assert!(row.broadcast((4, 5)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn broadcast<E: IntoDimension>(&self, shape: E) -> Result<DeviceBase<S::Ref<'_>, E::Dim>> {
        let l = self
            .layout
            .broadcast_sized(shape, std::mem::size_of::<S::Elem>())?;
        Ok(self.sub_view().with_layout(l))
    }
}

/// Writable sub-views borrowing `self` exclusively, on mutable arrays and views.
impl<S: SpanDataMut, D: Dimension> DeviceBase<S, D> {
    /// A writable sub-view by `s![]`, borrowing this view; `Err` for out-of-range slices.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// let mut v = a.view_mut();
    /// let col = v.try_slice_mut(s![.., 2])?;
    /// assert_eq!(col.shape(), &[4]);
    /// # Ok(()) }
    /// ```
    pub fn try_slice_mut<I: SliceArg<D>>(
        &mut self,
        info: I,
    ) -> Result<DeviceViewMut<'_, S::Elem, I::OutDim>> {
        self.view_mut().try_slice_move(info)
    }

    /// A writable sub-view by `s![]`; panics on bad input.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// let mut v = a.view_mut();
    /// assert_eq!(v.slice_mut(s![..;2, ..;-3]).shape(), &[2, 2]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn slice_mut<I: SliceArg<D>>(&mut self, info: I) -> DeviceViewMut<'_, S::Elem, I::OutDim> {
        ok(self.try_slice_mut(info))
    }

    /// The writable sub-view at `index` along `axis`, borrowing this view.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// let mut v = a.view_mut();
    /// assert_eq!(v.try_index_axis_mut(Axis(0), 3)?.shape(), &[6]);
    /// # Ok(()) }
    /// ```
    pub fn try_index_axis_mut(
        &mut self,
        axis: Axis,
        index: usize,
    ) -> Result<DeviceViewMut<'_, S::Elem, D::Smaller>>
    where
        D: RemoveAxis,
    {
        self.view_mut().try_index_axis_move(axis, index)
    }

    /// The writable sub-view at `index` along `axis`; panics on bad input.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// let mut v = a.view_mut();
    /// assert_eq!(v.index_axis_mut(Axis(1), 0).shape(), &[4]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn index_axis_mut(
        &mut self,
        axis: Axis,
        index: usize,
    ) -> DeviceViewMut<'_, S::Elem, D::Smaller>
    where
        D: RemoveAxis,
    {
        ok(self.try_index_axis_mut(axis, index))
    }
}
