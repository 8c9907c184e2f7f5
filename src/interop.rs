//! Conversions between devspan's types and cudarc's.

use cudarc::driver::CudaSlice;
use ndarray::Ix1;

use crate::element::DeviceElement;
use crate::span::{DeviceSpan, DeviceSpanMut};
use crate::view::{DeviceView, DeviceViewMut};

/// The device address of a cudarc slice, for building views from raw parts.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let slice = stream.alloc_zeros::<u8>(4)?;
/// assert_ne!(devspan::interop::cuda_slice_address(&slice), 0);
/// # Ok(()) }
/// ```
pub fn cuda_slice_address<T>(slice: &CudaSlice<T>) -> u64 {
    crate::bytes::address_of(slice)
}

impl<'a, T: DeviceElement> From<&'a CudaSlice<T>> for DeviceView<'a, T, Ix1> {
    /// A 1-D view over a whole cudarc slice.
    fn from(slice: &'a CudaSlice<T>) -> Self {
        DeviceSpan::from_cuda(slice).into_view()
    }
}

impl<'a, T: DeviceElement> From<&'a mut CudaSlice<T>> for DeviceViewMut<'a, T, Ix1> {
    /// A writable 1-D view over a whole cudarc slice.
    fn from(slice: &'a mut CudaSlice<T>) -> Self {
        DeviceSpanMut::from_cuda_mut(slice).into_view_mut()
    }
}

impl<'a, T: DeviceElement> From<&'a CudaSlice<T>> for DeviceSpan<'a, T> {
    fn from(slice: &'a CudaSlice<T>) -> Self {
        DeviceSpan::from_cuda(slice)
    }
}

impl<'a, T: DeviceElement> From<&'a mut CudaSlice<T>> for DeviceSpanMut<'a, T> {
    fn from(slice: &'a mut CudaSlice<T>) -> Self {
        DeviceSpanMut::from_cuda_mut(slice)
    }
}

/// An n-d view of a cudarc slice with the given shape in standard layout; `Err` if the shape's
/// element count differs from the slice's length.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let slice = stream.alloc_zeros::<f32>(12)?;
/// let v = devspan::interop::view_of(&slice, (3, 4))?;
/// assert_eq!(v.shape(), &[3, 4]);
/// # Ok(()) }
/// ```
pub fn view_of<T: DeviceElement, Sh: ndarray::IntoDimension>(
    slice: &CudaSlice<T>,
    shape: Sh,
) -> crate::Result<DeviceView<'_, T, Sh::Dim>> {
    DeviceSpan::from_cuda(slice).into_view().into_shape(shape)
}

/// A writable n-d view of a cudarc slice in standard layout.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let mut slice = stream.alloc_zeros::<f32>(12)?;
/// let v = devspan::interop::view_mut_of(&mut slice, (2, 6))?;
/// assert_eq!(v.strides(), &[6, 1]);
/// # Ok(()) }
/// ```
pub fn view_mut_of<T: DeviceElement, Sh: ndarray::IntoDimension>(
    slice: &mut CudaSlice<T>,
    shape: Sh,
) -> crate::Result<DeviceViewMut<'_, T, Sh::Dim>> {
    DeviceSpanMut::from_cuda_mut(slice)
        .into_view_mut()
        .into_shape(shape)
}
