//! `DeviceArray`: the owned form of [`DeviceBase`], an allocation plus a layout.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use ndarray::{Dimension, IntoDimension};

use crate::bytes::RawBytes;
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::layout::{Layout, checked_size};
use crate::owner::KeepAlive;
use crate::span::DeviceSpan;
use crate::view::DeviceBase;

/// The storage of a [`DeviceArray`]: an owned cudarc allocation (ndarray's `OwnedRepr`).
///
/// The allocation is a cudarc `CudaSlice`, which holds its stream and, through it, its context
/// by `Arc`: dropping every other handle to the context or stream first is harmless, the memory
/// is freed (stream-ordered) when the array is dropped.
pub struct OwnedSpan<T> {
    /// The keep-alive of views borrowed from the array: cudarc event tracking through `slice`.
    raw: RawBytes<'static>,
    /// From `Box::into_raw`, freed in `OwnedSpan`'s drop (or moved out by `into_cuda_slice`).
    slice: NonNull<CudaSlice<T>>,
}

// SAFETY: `OwnedSpan<T>` owns a `CudaSlice<T>` (through a pointer) and a keep-alive that is
// `Send + Sync`; it is as `Send`/`Sync` as `CudaSlice<T>`.
unsafe impl<T: Send> Send for OwnedSpan<T> {}
// SAFETY: as above; shared access goes through `&CudaSlice<T>` or the tracker's lock.
unsafe impl<T: Sync> Sync for OwnedSpan<T> {}

impl<T: DeviceElement> OwnedSpan<T> {
    fn new(slice: CudaSlice<T>) -> Self {
        let len = slice.num_bytes();
        let device = slice.context().ordinal();
        let slice = NonNull::from(Box::leak(Box::new(slice)));
        // SAFETY: the slice lives until `OwnedSpan`'s drop or `into_cuda_slice`, which consume
        // the array after every view borrowed from it has ended; the tracker is used only through
        // such views, or `&self`/`&mut self` of the array.
        let keep = unsafe { KeepAlive::cuda_owned(slice) };
        OwnedSpan {
            raw: RawBytes::cuda(len, device, keep),
            slice,
        }
    }
}

impl<T> OwnedSpan<T> {
    pub(crate) fn raw(&self) -> &RawBytes<'static> {
        &self.raw
    }

    pub(crate) fn slice(&self) -> &CudaSlice<T> {
        // SAFETY: the slice is live while `self` is (see `new`).
        unsafe { self.slice.as_ref() }
    }

    fn into_slice(self) -> CudaSlice<T> {
        let me = ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped or used again: the keep-alive is dropped in place once
        // (no view borrows the array any more) and the box is taken back once.
        unsafe {
            std::ptr::drop_in_place(&raw const me.raw as *mut RawBytes<'static>);
            *Box::from_raw(me.slice.as_ptr())
        }
    }
}

impl<T> Drop for OwnedSpan<T> {
    fn drop(&mut self) {
        // cudarc frees through the slice's stream, which needs its context current on this
        // thread (a thread may have another context current, or none); the thread's own is
        // restored afterwards.
        let _current = crate::device::ContextGuard::save();
        // SAFETY: the box is given back once, here; `into_slice` never lets this drop run.
        // (While the slice's stream captures a graph, it is freed after the capture.)
        unsafe { crate::capture::drop_slice(self.slice.as_ptr()) };
    }
}

/// An owned n-d array in device memory: [`DeviceBase`] over an [`OwnedSpan`], as ndarray's
/// `Array` is `ArrayBase<OwnedRepr<T>, D>`. Every read-only method of the views works on an
/// array, every writable one on a mutable array; constructors make it in standard (row-major)
/// layout, and layout operations that consume it (`t`, `slice_move`, `permuted_axes`, ...) keep
/// the allocation and change only the layout.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use ndarray::{array, s};
/// let stream = devspan::default_stream(0)?;
/// let host = array![[1u32, 2, 3], [4, 5, 6]];
/// let dev = devspan::DeviceArray::from_host(&stream, &host)?;
/// assert_eq!(dev.shape(), &[2, 3]);
/// assert_eq!(dev.to_host()?, host);
/// let col = dev.slice(s![.., 1]);
/// assert_eq!(col.strides(), &[3]);
/// assert_eq!(dev.t().to_host()?, host.t());
/// # Ok(()) }
/// ```
pub type DeviceArray<T, D> = DeviceBase<OwnedSpan<T>, D>;

/// An array can own the memory of `'static` views ([`DeviceViewMut::from_raw_parts_mut`](crate::DeviceViewMut::from_raw_parts_mut)):
/// it frees its memory stream-ordered on its stream when the driver supports that.
impl<T: DeviceElement, D: Dimension + 'static> crate::DeviceOwner for DeviceArray<T, D> {
    fn describe(&self) -> String {
        format!("DeviceArray<{}>({:?})", T::DTYPE, self.layout.shape())
    }
    fn release_stream(&self) -> Option<Arc<CudaStream>> {
        self.span.slice().release_stream()
    }
}

/// A device copy in standard layout, on the array's stream. Panics if the copy fails (out of
/// device memory, a driver error); [`try_clone`](DeviceBase::try_clone) returns the error.
impl<T: DeviceElement, D: Dimension> Clone for DeviceArray<T, D> {
    #[track_caller]
    fn clone(&self) -> Self {
        match self.try_clone() {
            Ok(a) => a,
            Err(e) => panic!("cloning a DeviceArray failed: {e}"),
        }
    }
}

/// `Err(StreamCapture)` when `stream` is capturing a graph: an allocation made there would be
/// the graph's, its memory existing only while the graph runs.
fn refuse_in_capture(stream: &CudaStream) -> Result<()> {
    crate::capture::free_deferred();
    crate::capture::refuse(
        stream,
        "allocating a device array (zeros, uninit, from_host, cast, to_contiguous, try_clone, a \
         copying to_shape)",
        crate::capture::ALLOCATION,
    )
}

impl<T: DeviceElement, D: Dimension> DeviceArray<T, D> {
    fn from_parts_owned(data: CudaSlice<T>, layout: Layout<D>) -> Self {
        DeviceBase {
            span: OwnedSpan::new(data),
            layout,
        }
    }

    fn layout_for<Sh: IntoDimension<Dim = D>>(shape: Sh) -> Result<(Layout<D>, usize)> {
        let dim = shape.into_dimension();
        let n = checked_size(dim.slice(), std::mem::size_of::<T>())?;
        Ok((Layout::contiguous(dim), n))
    }

    /// A zero-filled array of `shape` allocated on `stream` (stream-ordered);
    /// `Err(StreamCapture)` while `stream` is capturing a graph (see the crate docs, "Graph
    /// capture").
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<half::bf16, _>::zeros(&stream, (3, 4, 5))?;
    /// assert_eq!(a.len(), 60);
    /// # Ok(()) }
    /// ```
    pub fn zeros<Sh: IntoDimension<Dim = D>>(stream: &Arc<CudaStream>, shape: Sh) -> Result<Self> {
        let (layout, n) = Self::layout_for(shape)?;
        refuse_in_capture(stream)?;
        let data = crate::driver::alloc_zeros::<T>(stream, n)?;
        Ok(Self::from_parts_owned(data, layout))
    }

    /// An array of `shape` with every element `value`, allocated and filled on `stream`
    /// (ndarray's `from_elem`); `Err(StreamCapture)` while `stream` is capturing a graph.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::from_elem(&stream, (2, 3), 7u16)?;
    /// assert_eq!(a.to_host()?, ndarray::Array2::from_elem((2, 3), 7u16));
    /// # Ok(()) }
    /// ```
    pub fn from_elem<Sh: IntoDimension<Dim = D>>(
        stream: &Arc<CudaStream>,
        shape: Sh,
        value: T,
    ) -> Result<Self> {
        // SAFETY: the fill below writes every element before the array is returned; on error
        // the array is dropped unread.
        let mut a = unsafe { Self::uninit(stream, shape)? };
        a.fill_on(stream, value)?;
        Ok(a)
    }

    /// An array of `shape` with every element 1, on `stream` (ndarray's `ones`); see
    /// [`from_elem`](Self::from_elem).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<half::f16, _>::ones(&stream, 5)?;
    /// assert!(a.to_host()?.iter().all(|x| x.to_f32() == 1.0));
    /// # Ok(()) }
    /// ```
    pub fn ones<Sh: IntoDimension<Dim = D>>(stream: &Arc<CudaStream>, shape: Sh) -> Result<Self>
    where
        T: num_traits::One,
    {
        Self::from_elem(stream, shape, T::one())
    }

    /// An array of `shape` whose contents are whatever the allocation held.
    ///
    /// # Safety
    /// The elements are uninitialised device memory: every element must be written (by a fill,
    /// a copy or a kernel) before it is read. All element types are plain bit patterns, so reading
    /// unwritten elements yields garbage values rather than undefined behaviour on the host, but
    /// the contents are unspecified.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// // SAFETY: every element is overwritten by the fill below before any read.
    /// let mut a = unsafe { devspan::DeviceArray::<f32, _>::uninit(&stream, 1024)? };
    /// a.fill_on(&stream, 1.0)?;
    /// # Ok(()) }
    /// ```
    pub unsafe fn uninit<Sh: IntoDimension<Dim = D>>(
        stream: &Arc<CudaStream>,
        shape: Sh,
    ) -> Result<Self> {
        let (layout, n) = Self::layout_for(shape)?;
        refuse_in_capture(stream)?;
        // SAFETY: the caller promises to write every element before reading it.
        let data = unsafe { crate::driver::alloc::<T>(stream, n)? };
        Ok(Self::from_parts_owned(data, layout))
    }

    /// Takes ownership of a cudarc slice as an array of `shape` (standard layout);
    /// `Err(ShapeMismatch)` if the element counts differ.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u8>(6)?;
    /// let a = devspan::DeviceArray::from_cuda_slice(slice, (2, 3))?;
    /// assert_eq!(a.shape(), &[2, 3]);
    /// # Ok(()) }
    /// ```
    pub fn from_cuda_slice<Sh: IntoDimension<Dim = D>>(
        data: CudaSlice<T>,
        shape: Sh,
    ) -> Result<Self> {
        let (layout, n) = Self::layout_for(shape)?;
        if n != data.len() {
            return Err(Error::shape(format!(
                "a slice of {} elements cannot hold shape {:?} ({n} elements)",
                data.len(),
                layout.shape()
            )));
        }
        Ok(Self::from_parts_owned(data, layout))
    }

    /// The underlying cudarc slice (the whole allocation, in memory order).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<u8, _>::zeros(&stream, 6)?;
    /// assert_eq!(a.as_cuda_slice().len(), 6);
    /// # Ok(()) }
    /// ```
    pub fn as_cuda_slice(&self) -> &CudaSlice<T> {
        self.span.slice()
    }

    /// The whole allocation as a writable span, borrowing the array exclusively.
    pub(crate) fn whole_span_mut(&mut self) -> crate::DeviceSpanMut<'_, T> {
        crate::DeviceSpanMut::from_raw(self.span.raw().clone())
    }

    /// Gives the allocation back as a cudarc slice (in memory order: a transposed or sliced
    /// array gives back the whole allocation it was made with).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<u8, _>::zeros(&stream, (2, 3))?;
    /// let slice = a.into_cuda_slice();
    /// assert_eq!(slice.len(), 6);
    /// # Ok(()) }
    /// ```
    pub fn into_cuda_slice(self) -> CudaSlice<T> {
        self.span.into_slice()
    }
}

/// The storage of a [`DeviceCowArray`]: a borrowed span or an owned allocation (ndarray's
/// `CowRepr`). Read-only.
pub enum CowSpan<'a, T> {
    /// Borrowed elements.
    View(DeviceSpan<'a, T>),
    /// An owned copy.
    Owned(OwnedSpan<T>),
}

/// A read-only array that is either a view or an owned copy: what
/// [`to_shape`](DeviceBase::to_shape) returns, as ndarray's `CowArray`. Every read-only method
/// works on it.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use ndarray::array;
/// let stream = devspan::default_stream(0)?;
/// let a = devspan::DeviceArray::from_host(&stream, &array![[1u8, 2], [3, 4]])?;
/// let flat = a.to_shape(4)?;
/// assert!(flat.is_view());
/// let t = a.t();
/// let flat_t = t.to_shape(4)?;
/// assert!(flat_t.is_owned());
/// assert_eq!(flat_t.to_host()?, array![1u8, 3, 2, 4]);
/// # Ok(()) }
/// ```
pub type DeviceCowArray<'a, T, D> = DeviceBase<CowSpan<'a, T>, D>;

impl<'a, T: DeviceElement, D: Dimension> DeviceCowArray<'a, T, D> {
    pub(crate) fn borrowed(v: crate::DeviceView<'a, T, D>) -> Self {
        DeviceBase {
            span: CowSpan::View(v.span),
            layout: v.layout,
        }
    }

    pub(crate) fn owned(a: DeviceArray<T, D>) -> Self {
        DeviceBase {
            span: CowSpan::Owned(a.span),
            layout: a.layout,
        }
    }

    /// Whether it borrows its elements.
    pub fn is_view(&self) -> bool {
        matches!(self.span, CowSpan::View(_))
    }

    /// Whether it owns a copy.
    pub fn is_owned(&self) -> bool {
        matches!(self.span, CowSpan::Owned(_))
    }

    /// The owned array: the copy itself, or a standard-layout copy of the view made on its
    /// stream ([`to_contiguous`](DeviceBase::to_contiguous)).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let owned = a.to_shape(6)?.into_owned()?;
    /// assert_eq!(owned.shape(), &[6]);
    /// # Ok(()) }
    /// ```
    pub fn into_owned(self) -> Result<DeviceArray<T, D>> {
        match self.span {
            CowSpan::Owned(span) => Ok(DeviceBase {
                span,
                layout: self.layout,
            }),
            CowSpan::View(_) => self.to_contiguous(),
        }
    }
}
