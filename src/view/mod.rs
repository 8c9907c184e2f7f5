//! `DeviceView` / `DeviceViewMut`: one generic strided view type over a typed span.

mod data;
mod iter;
mod shape;
mod transform;
pub use data::{SpanData, SpanDataMut, ViewData};
pub use iter::{AxisChunksIter, AxisIter, AxisIterMut};

use std::fmt;
use std::sync::Arc;

use cudarc::driver::CudaStream;

use ndarray::Dimension;

use crate::bytes::RawBytes;
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::span::{DeviceSpan, DeviceSpanMut};

/// An n-d strided array or view of device memory: storage plus a [`Layout`], as ndarray's
/// `ArrayBase<S, D>`.
///
/// Use it through the aliases [`DeviceArray`](crate::DeviceArray) (owned), [`DeviceView`] (read-only, `Clone`) and
/// [`DeviceViewMut`] (writable, never aliasing itself). Methods taking `&self` work on all
/// three; those taking `&mut self` and writing need writable storage (arrays and mutable views).
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use ndarray::{array, s};
/// let stream = devspan::default_stream(0)?;
/// let a = devspan::DeviceArray::from_host(&stream, &array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]])?;
/// let v = a.slice(s![.., ..;-1]);
/// assert_eq!(v.shape(), &[2, 3]);
/// assert_eq!(v.strides(), &[3, -1]);
/// let t = v.t();
/// assert_eq!(t.shape(), &[3, 2]);
/// # Ok(()) }
/// ```
pub struct DeviceBase<S, D: Dimension> {
    pub(crate) span: S,
    pub(crate) layout: Layout<D>,
}

/// A read-only n-d view of device elements of type `T`.
pub type DeviceView<'a, T, D> = DeviceBase<DeviceSpan<'a, T>, D>;
/// A writable n-d view of device elements of type `T`; no two of its indices reach the same
/// element.
pub type DeviceViewMut<'a, T, D> = DeviceBase<DeviceSpanMut<'a, T>, D>;

impl<S: SpanData, D: Dimension> fmt::Debug for DeviceBase<S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = self.span.raw();
        f.debug_struct(S::NAME)
            .field("dtype", &S::Elem::DTYPE)
            .field("shape", &self.layout.shape())
            .field("strides", &self.layout.strides())
            .field("offset", &self.layout.offset())
            .field("span", &format_args!("0x{:x}+{}B", raw.ptr(), raw.len))
            .field("device", &raw.device)
            .field("keep_alive", &raw.keep)
            .finish()
    }
}

impl<T: DeviceElement, D: Dimension> Clone for DeviceView<'_, T, D> {
    fn clone(&self) -> Self {
        DeviceBase {
            span: self.span.clone(),
            layout: self.layout.clone(),
        }
    }
}

impl<S: SpanData, D: Dimension> DeviceBase<S, D> {
    pub(crate) fn with_layout<E: Dimension>(self, layout: Layout<E>) -> DeviceBase<S, E> {
        DeviceBase {
            span: self.span,
            layout,
        }
    }

    pub(crate) fn raw(&self) -> &RawBytes<'_> {
        self.span.raw()
    }

    /// A read-only view of the same elements with the storage sub-views return.
    pub(crate) fn sub_view(&self) -> DeviceBase<S::Ref<'_>, D> {
        DeviceBase {
            span: self.span.ref_span(),
            layout: self.layout.clone(),
        }
    }

    /// The view's layout (shape, strides and offset in elements).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert!(a.layout().is_standard_layout());
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
    /// assert_eq!(a.shape(), &[2, 3]);
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
    /// assert_eq!(a.strides(), &[3, 1]);
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
    /// assert_eq!(a.dim(), ndarray::Ix2(2, 3));
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
    /// assert_eq!(a.ndim(), 2);
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
    /// assert_eq!(a.len(), 6);
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
    /// assert!(a.is_empty());
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
    /// assert_eq!(a.device(), 0);
    /// # Ok(()) }
    /// ```
    pub fn device(&self) -> usize {
        self.raw().device
    }

    /// Device address of the element at index zero (what a kernel indexes from with
    /// [`strides`](Self::strides)). For an empty view it is an address inside or at the end of
    /// the span that must not be dereferenced.
    ///
    /// Views of cudarc memory learn its address on their first operation (making them enqueues
    /// nothing); asked for before one, it comes from cudarc's `device_ptr`, which makes the
    /// memory's stream wait for its latest write.
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
        self.raw().ptr() + (self.layout.offset() * std::mem::size_of::<S::Elem>()) as u64
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
    /// assert_eq!(a.span()?.len(), 8);
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
    /// assert!(a.is_standard_layout());
    /// assert!(!a.t().is_standard_layout());
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
    /// assert!(a.t().is_fortran_layout());
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

    /// A read-only view of the same elements, borrowing `self` (ndarray's `view`).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let v = a.view();
    /// assert_eq!(v.t().shape(), &[3, 2]);
    /// # Ok(()) }
    /// ```
    pub fn view(&self) -> DeviceView<'_, S::Elem, D> {
        DeviceBase {
            span: DeviceSpan::from_raw(self.span.raw().clone()),
            layout: self.layout.clone(),
        }
    }

    /// The stream the memory was allocated on, which the methods without an explicit stream
    /// use: an array's own stream, or that of the cudarc slice or view a view borrows. `None`
    /// for views over foreign or raw memory ([`from_raw_parts`](DeviceView::from_raw_parts),
    /// DLPack imports), whose operations take the stream explicitly (the `_on` forms).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::new_stream(0)?;
    /// let a = devspan::DeviceArray::<u8, _>::zeros(&stream, 4)?;
    /// assert_eq!(a.stream().map(|s| s.cu_stream()), Some(stream.cu_stream()));
    /// assert_eq!(a.t().stream().map(|s| s.cu_stream()), Some(stream.cu_stream()));
    /// # Ok(()) }
    /// ```
    pub fn stream(&self) -> Option<Arc<CudaStream>> {
        self.span.raw().keep.stream()
    }

    /// [`stream`](Self::stream), or an error naming the `_on` form to use instead.
    pub(crate) fn own_stream(&self, op: &str) -> Result<Arc<CudaStream>> {
        self.stream().ok_or_else(|| no_stream("view", op))
    }
}

impl<S: SpanDataMut, D: Dimension> DeviceBase<S, D> {
    /// A writable view of the same elements, borrowing `self` exclusively (ndarray's
    /// `view_mut`).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, 3)?;
    /// let mut m = a.view_mut();
    /// m.fill(2.0)?;
    /// assert_eq!(a.to_host()?, ndarray::arr1(&[2.0f32; 3]));
    /// # Ok(()) }
    /// ```
    pub fn view_mut(&mut self) -> DeviceViewMut<'_, S::Elem, D> {
        DeviceBase {
            span: DeviceSpanMut::from_raw(self.span.raw().clone()),
            layout: self.layout.clone(),
        }
    }
}

impl<'a, T: DeviceElement, D: Dimension> DeviceView<'a, T, D> {
    pub(crate) fn from_parts(span: DeviceSpan<'a, T>, layout: Layout<D>) -> Self {
        DeviceBase { span, layout }
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
        Ok(DeviceBase { span, layout })
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

    /// [`from_raw_parts`](Self::from_raw_parts) with an owner log that other views share: every
    /// view made with the same [`SharedOwner`](crate::SharedOwner) (and every view derived from
    /// them) orders its operations after the conflicting work of the others, and the owner is
    /// released once, after the last of them and that work. Validated like `from_raw_parts`.
    ///
    /// # Safety
    /// As `from_raw_parts`, with `owner` keeping the memory alive.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use std::sync::Arc;
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f32>(6)?;
    /// let ptr = devspan::interop::cuda_slice_address(&slice);
    /// let owner = devspan::SharedOwner::new(Arc::new(slice));
    /// // SAFETY: the slice owns 6 f32 at `ptr` and lives in `owner`.
    /// let v = unsafe {
    ///     devspan::DeviceView::<f32, _>::from_raw_parts_shared(ptr, 6, ndarray::Ix1(6), &[1], 0, 0, &owner)?
    /// };
    /// assert_eq!(v.len(), 6);
    /// # Ok(()) }
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn from_raw_parts_shared(
        ptr: u64,
        span_len: usize,
        shape: D,
        strides: &[isize],
        offset: usize,
        device: usize,
        owner: &std::sync::Arc<crate::SharedOwner>,
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
                crate::owner::KeepAlive::Owner(owner.clone()),
            )
        }
    }

    /// The view of `from_raw_parts` and `from_raw_parts_shared` over a keep-alive.
    ///
    /// # Safety
    /// As `from_raw_parts`, with `keep` keeping the memory alive.
    unsafe fn from_raw_parts_kept(
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
}

impl<'a, T: DeviceElement, D: Dimension> DeviceViewMut<'a, T, D> {
    pub(crate) fn from_parts(span: DeviceSpanMut<'a, T>, layout: Layout<D>) -> Self {
        debug_assert!(layout.check_unaliased().is_ok());
        DeviceBase { span, layout }
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
        Ok(DeviceBase { span, layout })
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

    /// [`from_raw_parts_mut`](Self::from_raw_parts_mut) with an owner log that other views
    /// share (see [`DeviceView::from_raw_parts_shared`]); also refuses self-overlapping layouts.
    ///
    /// # Safety
    /// As `from_raw_parts_mut`, with `owner` keeping the memory alive.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn from_raw_parts_mut_shared(
        ptr: u64,
        span_len: usize,
        shape: D,
        strides: &[isize],
        offset: usize,
        device: usize,
        owner: &std::sync::Arc<crate::SharedOwner>,
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
                crate::owner::KeepAlive::Owner(owner.clone()),
            )
        }
    }

    /// The view of `from_raw_parts_mut` and `from_raw_parts_mut_shared` over a keep-alive.
    ///
    /// # Safety
    /// As `from_raw_parts_mut`, with `keep` keeping the memory alive.
    unsafe fn from_raw_parts_mut_kept(
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
        DeviceBase {
            span: self.span.into_span(),
            layout: self.layout,
        }
    }
}

/// The error of a plain method `op` on memory with no stream of its own (`what`: view, span).
pub(crate) fn no_stream(what: &str, op: &str) -> Error {
    Error::invalid(format!(
        "this {what} (over foreign or raw memory) has no stream of its own; call `{op}_on` with \
         the stream to use"
    ))
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
