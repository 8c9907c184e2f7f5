//! `DeviceView` / `DeviceViewMut`: one generic strided view type over a typed span.

mod ops;

use std::fmt;

use ndarray::{Dimension, IntoDimension};

use crate::bytes::RawBytes;
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::span::{DeviceSpan, DeviceSpanMut};

pub(crate) mod sealed {
    use crate::bytes::RawBytes;

    /// Crate-private access to a view's storage; not nameable outside the crate.
    pub trait Sealed {
        fn raw(&self) -> &RawBytes<'_>;
        /// Two handles on the same span, for two layouts that reach disjoint elements.
        fn split_pair(self) -> (Self, Self)
        where
            Self: Sized;
        /// The bytes `start..end` of the span (in range), marked `shared` when `shared`.
        fn narrowed(self, start: usize, end: usize, shared: bool) -> Self
        where
            Self: Sized;
    }
}

/// The storage a view sits on: a read-only [`DeviceSpan`] or a writable [`DeviceSpanMut`].
/// Sealed; it plays the role of ndarray's `Data` traits.
///
/// ```
/// use devspan::{DeviceSpan, DeviceSpanMut, SpanData};
/// assert!(!<DeviceSpan<'static, f32> as SpanData>::WRITABLE);
/// assert!(<DeviceSpanMut<'static, f32> as SpanData>::WRITABLE);
/// ```
pub trait SpanData: sealed::Sealed {
    /// The element type.
    type Elem: DeviceElement;
    /// Whether views over this storage may be written through.
    const WRITABLE: bool;
}

impl<T: DeviceElement> sealed::Sealed for DeviceSpan<'_, T> {
    fn raw(&self) -> &RawBytes<'_> {
        &self.raw
    }
    fn split_pair(self) -> (Self, Self) {
        (self.clone(), self)
    }
    fn narrowed(self, start: usize, end: usize, shared: bool) -> Self {
        let mut raw = self.raw.sub(start, end);
        raw.shared |= shared;
        DeviceSpan::from_raw(raw)
    }
}

impl<T: DeviceElement> sealed::Sealed for DeviceSpanMut<'_, T> {
    fn raw(&self) -> &RawBytes<'_> {
        &self.raw
    }
    fn split_pair(self) -> (Self, Self) {
        (DeviceSpanMut::from_raw(self.raw.clone()), self)
    }
    fn narrowed(self, start: usize, end: usize, shared: bool) -> Self {
        let mut raw = self.raw.sub(start, end);
        raw.shared |= shared;
        DeviceSpanMut::from_raw(raw)
    }
}

impl<T: DeviceElement> SpanData for DeviceSpan<'_, T> {
    type Elem = T;
    const WRITABLE: bool = false;
}

impl<T: DeviceElement> SpanData for DeviceSpanMut<'_, T> {
    type Elem = T;
    const WRITABLE: bool = true;
}

/// An n-d strided view over device memory: a span plus a [`Layout`].
///
/// Use it through the aliases [`DeviceView`] (read-only, `Clone`) and [`DeviceViewMut`]
/// (writable, never aliasing itself).
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use ndarray::{array, s};
/// let stream = devspan::default_stream(0)?;
/// let a = devspan::DeviceArray::from_host(&stream, &array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]].view())?;
/// let v = a.view().slice(s![.., ..;-1]);
/// assert_eq!(v.shape(), &[2, 3]);
/// assert_eq!(v.strides(), &[3, -1]);
/// let t = v.t();
/// assert_eq!(t.shape(), &[3, 2]);
/// # Ok(()) }
/// ```
pub struct ViewBase<S, D: Dimension> {
    pub(crate) span: S,
    pub(crate) layout: Layout<D>,
}

/// A read-only n-d view of device elements of type `T`.
pub type DeviceView<'a, T, D> = ViewBase<DeviceSpan<'a, T>, D>;
/// A writable n-d view of device elements of type `T`; no two of its indices reach the same
/// element.
pub type DeviceViewMut<'a, T, D> = ViewBase<DeviceSpanMut<'a, T>, D>;

impl<S: SpanData, D: Dimension> fmt::Debug for ViewBase<S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = self.span.raw();
        f.debug_struct(if S::WRITABLE {
            "DeviceViewMut"
        } else {
            "DeviceView"
        })
        .field("dtype", &S::Elem::DTYPE)
        .field("shape", &self.layout.shape())
        .field("strides", &self.layout.strides())
        .field("offset", &self.layout.offset())
        .field("span", &format_args!("0x{:x}+{}B", raw.ptr, raw.len))
        .field("device", &raw.device)
        .field("keep_alive", &raw.keep)
        .finish()
    }
}

impl<T: DeviceElement, D: Dimension> Clone for DeviceView<'_, T, D> {
    fn clone(&self) -> Self {
        ViewBase {
            span: self.span.clone(),
            layout: self.layout.clone(),
        }
    }
}

impl<S: SpanData, D: Dimension> ViewBase<S, D> {
    pub(crate) fn with_layout<E: Dimension>(self, layout: Layout<E>) -> ViewBase<S, E> {
        ViewBase {
            span: self.span,
            layout,
        }
    }

    pub(crate) fn raw(&self) -> &RawBytes<'_> {
        self.span.raw()
    }

    /// The view's layout (shape, strides and offset in elements).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert!(a.view().layout().is_standard_layout());
    /// # Ok(()) }
    /// ```
    pub fn layout(&self) -> &Layout<D> {
        &self.layout
    }

    /// Axis lengths.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert_eq!(a.view().shape(), &[2, 3]);
    /// # Ok(()) }
    /// ```
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }

    /// Strides in elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert_eq!(a.view().strides(), &[3, 1]);
    /// # Ok(()) }
    /// ```
    pub fn strides(&self) -> &[isize] {
        self.layout.strides()
    }

    /// The shape as an ndarray dimension.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert_eq!(a.view().dim(), ndarray::Ix2(2, 3));
    /// # Ok(()) }
    /// ```
    pub fn dim(&self) -> D {
        self.layout.dim()
    }

    /// Number of axes.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert_eq!(a.view().ndim(), 2);
    /// # Ok(()) }
    /// ```
    pub fn ndim(&self) -> usize {
        self.layout.ndim()
    }

    /// Number of elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert_eq!(a.view().len(), 6);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.layout.len()
    }

    /// Whether the view has no element.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 0))?;
    /// assert!(a.view().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.layout.is_empty()
    }

    /// Device ordinal.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, 4)?;
    /// assert_eq!(a.view().device(), 0);
    /// # Ok(()) }
    /// ```
    pub fn device(&self) -> usize {
        self.raw().device
    }

    /// Device address of the element at index zero (what a kernel indexes from with
    /// [`strides`](Self::strides)). For an empty view it is an address inside or at the end of
    /// the span that must not be dereferenced.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, 8)?;
    /// let v = a.view();
    /// assert_eq!(v.slice(s![2..]).device_ptr(), v.device_ptr() + 8);
    /// # Ok(()) }
    /// ```
    pub fn device_ptr(&self) -> u64 {
        self.raw().ptr + (self.layout.offset() * std::mem::size_of::<S::Elem>()) as u64
    }

    /// The span the view indexes into (its reachable elements lie inside it).
    ///
    /// `Err(Aliasing)` for a half of a writable view split along an inner axis
    /// ([`try_split_at`](Self::try_split_at)), and for views made from one: its span also holds
    /// elements of the other half, which may be written meanwhile. Halves split along the outer
    /// axis have spans of their own elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::Axis;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 2))?;
    /// assert_eq!(a.view().span()?.len(), 8);
    /// let (top, _) = a.view_mut().split_at(Axis(0), 1);
    /// assert_eq!(top.span()?.len(), 2);
    /// let (left, _) = a.view_mut().split_at(Axis(1), 1);
    /// assert!(left.span().is_err());
    /// # Ok(()) }
    /// ```
    pub fn span(&self) -> Result<DeviceSpan<'_, S::Elem>> {
        let raw = self.raw();
        if raw.shared {
            return Err(Error::aliasing(format!(
                "the span of this view (shape {:?}, strides {:?}) also holds elements of the \
                 other half of a split writable view",
                self.shape(),
                self.strides()
            )));
        }
        Ok(DeviceSpan::from_raw(raw.clone()))
    }

    /// Whether the view is row-major contiguous.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert!(a.view().is_standard_layout());
    /// assert!(!a.view().t().is_standard_layout());
    /// # Ok(()) }
    /// ```
    pub fn is_standard_layout(&self) -> bool {
        self.layout.is_standard_layout()
    }

    /// Whether the view is column-major contiguous.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert!(a.view().t().is_fortran_layout());
    /// # Ok(()) }
    /// ```
    pub fn is_fortran_layout(&self) -> bool {
        self.layout.is_fortran_layout()
    }

    /// Whether the view covers a gap-free block, in some axis order.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3, 4))?;
    /// assert!(a.view().permuted_axes([1, 2, 0]).is_dense());
    /// # Ok(()) }
    /// ```
    pub fn is_dense(&self) -> bool {
        self.layout.is_dense()
    }
}

impl<'a, T: DeviceElement, D: Dimension> DeviceView<'a, T, D> {
    pub(crate) fn from_parts(span: DeviceSpan<'a, T>, layout: Layout<D>) -> Self {
        ViewBase { span, layout }
    }

    /// A view of `span` with the given shape, strides (elements) and offset (elements),
    /// validated: every reachable element must lie in the span, and sizes must not overflow.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f32>(12)?;
    /// let span = devspan::DeviceSpan::from_cuda(&slice);
    /// // Column-major 3x4 over the 12 elements.
    /// let v = devspan::DeviceView::from_span(span.clone(), ndarray::Ix2(3, 4), &[1, 3], 0)?;
    /// assert!(v.is_fortran_layout());
    /// assert!(devspan::DeviceView::from_span(span, ndarray::Ix2(3, 4), &[4, 1], 1).is_err());
    /// # Ok(()) }
    /// ```
    pub fn from_span(
        span: DeviceSpan<'a, T>,
        shape: D,
        strides: &[isize],
        offset: usize,
    ) -> Result<Self> {
        let layout =
            Layout::new_checked(shape, strides, offset, span.len(), std::mem::size_of::<T>())?;
        Ok(ViewBase { span, layout })
    }

    /// A `'static` view over foreign memory kept alive by `owner`: a span of `span_len`
    /// elements at `ptr` on device `device`, viewed with `shape`, `strides` and `offset`
    /// (elements). Every argument is validated (null pointer, alignment, overflow, bounds).
    ///
    /// # Safety
    /// `ptr` must point to `span_len` elements of `T` of device memory on device `device`,
    /// readable for as long as `owner` is alive, and not written by anyone else while a device
    /// operation reads them.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use std::sync::Arc;
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f32>(6)?;
    /// let ptr = devspan::interop::cuda_slice_address(&slice);
    /// // SAFETY: the slice owns 6 f32 at `ptr` and is moved into the owner.
    /// let v = unsafe {
    ///     devspan::DeviceView::<f32, _>::from_raw_parts(ptr, 6, ndarray::Ix2(2, 3), &[3, 1], 0, 0, Arc::new(slice))?
    /// };
    /// assert_eq!(v.shape(), &[2, 3]);
    /// # Ok(()) }
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn from_raw_parts(
        ptr: u64,
        span_len: usize,
        shape: D,
        strides: &[isize],
        offset: usize,
        device: usize,
        owner: std::sync::Arc<dyn crate::DeviceOwner>,
    ) -> Result<DeviceView<'static, T, D>> {
        // SAFETY: the caller's contract.
        unsafe {
            Self::from_raw_parts_kept(
                ptr,
                span_len,
                shape,
                strides,
                offset,
                device,
                crate::owner::KeepAlive::owner(owner),
            )
        }
    }

    /// [`from_raw_parts`](Self::from_raw_parts) with a keep-alive that other views may share
    /// (one owner log for all of them).
    ///
    /// # Safety
    /// As `from_raw_parts`, with `keep` keeping the memory alive.
    pub(crate) unsafe fn from_raw_parts_kept(
        ptr: u64,
        span_len: usize,
        shape: D,
        strides: &[isize],
        offset: usize,
        device: usize,
        keep: crate::owner::KeepAlive<'static>,
    ) -> Result<DeviceView<'static, T, D>> {
        let bytes = span_bytes::<T>(span_len)?;
        let raw = crate::DeviceBytes {
            raw: RawBytes::new(ptr, bytes, device, keep)?,
        };
        DeviceView::from_span(raw.typed::<T>()?, shape, strides, offset)
    }

    /// The same view (a cheap clone of the keep-alive).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, 3)?;
    /// let v = a.view();
    /// assert_eq!(v.view().len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn view(&self) -> DeviceView<'a, T, D> {
        self.clone()
    }
}

impl<'a, T: DeviceElement, D: Dimension> DeviceViewMut<'a, T, D> {
    pub(crate) fn from_parts(span: DeviceSpanMut<'a, T>, layout: Layout<D>) -> Self {
        debug_assert!(layout.check_unaliased().is_ok());
        ViewBase { span, layout }
    }

    /// A writable view of `span`, validated like [`DeviceView::from_span`] and, in addition,
    /// refused with `Err(Aliasing)` if two indices could reach the same element.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<f32>(12)?;
    /// let span = devspan::DeviceSpanMut::from_cuda_mut(&mut slice);
    /// let e = devspan::DeviceViewMut::from_span_mut(span, ndarray::Ix2(3, 4), &[0, 1], 0).unwrap_err();
    /// assert_eq!(e.kind(), &devspan::ErrorKind::Aliasing);
    /// # Ok(()) }
    /// ```
    pub fn from_span_mut(
        span: DeviceSpanMut<'a, T>,
        shape: D,
        strides: &[isize],
        offset: usize,
    ) -> Result<Self> {
        let layout =
            Layout::new_checked(shape, strides, offset, span.len(), std::mem::size_of::<T>())?;
        layout.check_unaliased()?;
        Ok(ViewBase { span, layout })
    }

    /// A `'static` writable view over foreign memory kept alive by `owner` (see
    /// [`DeviceView::from_raw_parts`]); also refuses self-overlapping layouts.
    ///
    /// # Safety
    /// `ptr` must point to `span_len` elements of `T` of device memory on device `device`,
    /// readable and writable for as long as `owner` is alive and used by no one else while a
    /// device operation uses this view.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use std::sync::Arc;
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u8>(6)?;
    /// let ptr = devspan::interop::cuda_slice_address(&slice);
    /// // SAFETY: the slice owns the 6 bytes at `ptr` and is moved into the owner.
    /// let v = unsafe {
    ///     devspan::DeviceViewMut::<u8, _>::from_raw_parts_mut(ptr, 6, ndarray::Ix1(6), &[1], 0, 0, Arc::new(slice))?
    /// };
    /// assert_eq!(v.len(), 6);
    /// # Ok(()) }
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn from_raw_parts_mut(
        ptr: u64,
        span_len: usize,
        shape: D,
        strides: &[isize],
        offset: usize,
        device: usize,
        owner: std::sync::Arc<dyn crate::DeviceOwner>,
    ) -> Result<DeviceViewMut<'static, T, D>> {
        // SAFETY: the caller's contract.
        unsafe {
            Self::from_raw_parts_mut_kept(
                ptr,
                span_len,
                shape,
                strides,
                offset,
                device,
                crate::owner::KeepAlive::owner(owner),
            )
        }
    }

    /// [`from_raw_parts_mut`](Self::from_raw_parts_mut) with a keep-alive that other views may
    /// share.
    ///
    /// # Safety
    /// As `from_raw_parts_mut`, with `keep` keeping the memory alive.
    pub(crate) unsafe fn from_raw_parts_mut_kept(
        ptr: u64,
        span_len: usize,
        shape: D,
        strides: &[isize],
        offset: usize,
        device: usize,
        keep: crate::owner::KeepAlive<'static>,
    ) -> Result<DeviceViewMut<'static, T, D>> {
        let bytes = span_bytes::<T>(span_len)?;
        let raw = crate::DeviceBytesMut {
            raw: RawBytes::new(ptr, bytes, device, keep)?,
        };
        DeviceViewMut::from_span_mut(raw.typed_mut::<T>()?, shape, strides, offset)
    }

    /// A read-only view borrowing this one.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, 3)?;
    /// let m = a.view_mut();
    /// assert_eq!(m.view().len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn view(&self) -> DeviceView<'_, T, D> {
        ViewBase {
            span: self.span.as_span(),
            layout: self.layout.clone(),
        }
    }

    /// A shorter-lived writable view of the same elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, 3)?;
    /// let mut m = a.view_mut();
    /// let r = m.view_mut();
    /// assert_eq!(r.len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn view_mut(&mut self) -> DeviceViewMut<'_, T, D> {
        ViewBase {
            span: self.span.reborrow(),
            layout: self.layout.clone(),
        }
    }

    /// Turns this view into a read-only one of the same lifetime.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, 3)?;
    /// let v = a.view_mut().into_view();
    /// let w = v.clone();
    /// assert_eq!(w.len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn into_view(self) -> DeviceView<'a, T, D> {
        ViewBase {
            span: self.span.into_span(),
            layout: self.layout,
        }
    }
}

impl<S: SpanData, D: Dimension> ViewBase<S, D> {
    /// The view with a dynamic number of axes.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert_eq!(a.view().into_dyn().ndim(), 2);
    /// # Ok(()) }
    /// ```
    pub fn into_dyn(self) -> ViewBase<S, ndarray::IxDyn> {
        let l = self.layout.clone().into_dyn();
        self.with_layout(l)
    }

    /// The view with a fixed number of axes, or `Err(ShapeMismatch)`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let v = a.view().into_dyn().into_dimensionality::<ndarray::Ix2>()?;
    /// assert_eq!(v.dim(), ndarray::Ix2(2, 3));
    /// # Ok(()) }
    /// ```
    pub fn into_dimensionality<E: Dimension>(self) -> Result<ViewBase<S, E>> {
        let l = self.layout.clone().into_dimensionality::<E>()?;
        Ok(self.with_layout(l))
    }

    /// The same elements with a new shape, read in row-major order; `Err` when a copy would be
    /// needed (see [`Layout::reshape`]).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, 12)?;
    /// let v = a.view().into_shape((3, 4))?;
    /// assert_eq!(v.strides(), &[4, 1]);
    /// assert!(v.t().into_shape(12).is_err());
    /// # Ok(()) }
    /// ```
    pub fn into_shape<E: IntoDimension>(self, shape: E) -> Result<ViewBase<S, E::Dim>> {
        let l = self.layout.reshape(shape)?;
        Ok(self.with_layout(l))
    }
}

/// Byte length of `span_len` elements of `T`, or `Err(Overflow)`.
fn span_bytes<T: DeviceElement>(span_len: usize) -> Result<usize> {
    span_len
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| {
            Error::overflow(format!(
                "{span_len} elements of {} overflow usize bytes",
                T::DTYPE
            ))
        })
}
