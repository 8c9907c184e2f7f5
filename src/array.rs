//! `DeviceArray`: the one owning type, an allocation plus a standard layout.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use ndarray::{Dimension, IntoDimension};

use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::layout::{Layout, checked_size};
use crate::span::{DeviceSpan, DeviceSpanMut};
use crate::view::{DeviceView, DeviceViewMut};

/// An owned n-d array in device memory, in standard (row-major) layout.
///
/// The allocation is a cudarc `CudaSlice`, which holds its stream and, through it, its context by
/// `Arc`: dropping every other handle to the context or stream first is harmless, the memory is
/// freed (stream-ordered) when the array is dropped.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use ndarray::{array, s};
/// let stream = devspan::default_stream(0)?;
/// let host = array![[1u32, 2, 3], [4, 5, 6]];
/// let dev = devspan::DeviceArray::from_host(&stream, &host.view())?;
/// assert_eq!(dev.shape(), &[2, 3]);
/// let back = dev.to_host(&stream)?;
/// assert_eq!(back, host);
/// let col = dev.view().slice(s![.., 1]);
/// assert_eq!(col.strides(), &[3]);
/// # Ok(()) }
/// ```
pub struct DeviceArray<T, D: Dimension> {
    /// Dropped in `DeviceArray`'s drop, with its context current; moved out by
    /// `into_cuda_slice`.
    data: ManuallyDrop<CudaSlice<T>>,
    layout: Layout<D>,
}

impl<T, D: Dimension> Drop for DeviceArray<T, D> {
    fn drop(&mut self) {
        // SAFETY: `data` is taken once, here; `into_cuda_slice` never lets this drop run.
        let data = unsafe { ManuallyDrop::take(&mut self.data) };
        // cudarc frees through the slice's stream, which needs its context current on this
        // thread (a thread may have another context current, or none); the thread's own is
        // restored afterwards.
        let _current = crate::device::CurrentContext::save();
        let _ = crate::device::bind(data.context());
        drop(data);
    }
}

/// An array can own the memory of `'static` views ([`DeviceViewMut::from_raw_parts_mut`]):
/// it frees its memory stream-ordered on its stream when the driver supports that.
impl<T: DeviceElement, D: Dimension + 'static> crate::DeviceOwner for DeviceArray<T, D> {
    fn describe(&self) -> String {
        format!("DeviceArray<{}>({:?})", T::DTYPE, self.layout.shape())
    }
    fn release_stream(&self) -> Option<Arc<CudaStream>> {
        self.data.release_stream()
    }
}

impl<T: DeviceElement, D: Dimension> std::fmt::Debug for DeviceArray<T, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray")
            .field("dtype", &T::DTYPE)
            .field("shape", &self.layout.shape())
            .field("device", &self.data.context().ordinal())
            .finish()
    }
}

impl<T: DeviceElement, D: Dimension> DeviceArray<T, D> {
    fn layout_for<Sh: IntoDimension<Dim = D>>(shape: Sh) -> Result<(Layout<D>, usize)> {
        let dim = shape.into_dimension();
        let n = checked_size(dim.slice(), std::mem::size_of::<T>())?;
        Ok((Layout::contiguous(dim), n))
    }

    /// A zero-filled array of `shape` allocated on `stream` (stream-ordered).
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
        let data = stream.alloc_zeros::<T>(n)?;
        Ok(DeviceArray {
            data: ManuallyDrop::new(data),
            layout,
        })
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
    /// a.view_mut().fill(&stream, 1.0)?;
    /// # Ok(()) }
    /// ```
    pub unsafe fn uninit<Sh: IntoDimension<Dim = D>>(
        stream: &Arc<CudaStream>,
        shape: Sh,
    ) -> Result<Self> {
        let (layout, n) = Self::layout_for(shape)?;
        // SAFETY: the caller promises to write every element before reading it.
        let data = unsafe { stream.alloc::<T>(n)? };
        Ok(DeviceArray {
            data: ManuallyDrop::new(data),
            layout,
        })
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
        Ok(DeviceArray {
            data: ManuallyDrop::new(data),
            layout,
        })
    }

    /// The underlying cudarc slice.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<u8, _>::zeros(&stream, 6)?;
    /// assert_eq!(a.as_cuda_slice().len(), 6);
    /// # Ok(()) }
    /// ```
    pub fn as_cuda_slice(&self) -> &CudaSlice<T> {
        &self.data
    }

    pub(crate) fn cuda_slice_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.data
    }

    /// Gives the allocation back as a cudarc slice.
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
        let mut me = ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped or used again: the slice is moved out once and the
        // layout dropped in place once.
        unsafe {
            std::ptr::drop_in_place(&mut me.layout);
            ManuallyDrop::take(&mut me.data)
        }
    }

    /// The stream the allocation was made on (and is freed on).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<u8, _>::zeros(&stream, 1)?;
    /// assert_eq!(**a.stream(), *stream);
    /// # Ok(()) }
    /// ```
    pub fn stream(&self) -> &Arc<CudaStream> {
        self.data.stream()
    }

    /// Axis lengths.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// assert_eq!(devspan::DeviceArray::<u8, _>::zeros(&stream, (2, 3))?.shape(), &[2, 3]);
    /// # Ok(()) }
    /// ```
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }

    /// The shape as an ndarray dimension.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// assert_eq!(devspan::DeviceArray::<u8, _>::zeros(&stream, (2, 3))?.dim(), ndarray::Ix2(2, 3));
    /// # Ok(()) }
    /// ```
    pub fn dim(&self) -> D {
        self.layout.dim()
    }

    /// Number of elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// assert_eq!(devspan::DeviceArray::<u8, _>::zeros(&stream, (2, 3))?.len(), 6);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.layout.len()
    }

    /// Whether the array has no element.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// assert!(devspan::DeviceArray::<u8, _>::zeros(&stream, (0, 3))?.is_empty());
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
    /// assert_eq!(devspan::DeviceArray::<u8, _>::zeros(&stream, 1)?.device(), 0);
    /// # Ok(()) }
    /// ```
    pub fn device(&self) -> usize {
        self.data.context().ordinal()
    }

    /// A read-only view borrowing the array.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<u8, _>::zeros(&stream, (2, 3))?;
    /// assert_eq!(a.view().t().shape(), &[3, 2]);
    /// # Ok(()) }
    /// ```
    pub fn view(&self) -> DeviceView<'_, T, D> {
        DeviceView::from_parts(DeviceSpan::from_cuda(&self.data), self.layout.clone())
    }

    /// A writable view borrowing the array exclusively.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<u8, _>::zeros(&stream, (2, 3))?;
    /// a.view_mut().fill(&stream, 7)?;
    /// # Ok(()) }
    /// ```
    pub fn view_mut(&mut self) -> DeviceViewMut<'_, T, D> {
        let layout = self.layout.clone();
        DeviceViewMut::from_parts(DeviceSpanMut::from_cuda_mut(&mut self.data), layout)
    }
}
