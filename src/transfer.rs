//! Host <-> device copies between any host layout and any device layout.
//!
//! The device side may be strided: data crosses the bus contiguously (a host-side pack of the
//! ndarray view into standard order, one `cuMemcpy` each way) and the device-side scatter or
//! gather runs the planner's copy kernels. Both calls wait for their transfer before returning,
//! so the host buffers are free to reuse afterwards.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::{ArrayView, ArrayViewMut, Dimension};

use crate::array::DeviceArray;
use crate::device::check_stream;
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::view::{DeviceView, DeviceViewMut};

fn check_same_shape(host: &[usize], dev: &[usize]) -> Result<()> {
    if host != dev {
        return Err(Error::shape(format!(
            "host shape {host:?} does not match device shape {dev:?}"
        )));
    }
    Ok(())
}

impl<T: DeviceElement, D: Dimension> DeviceViewMut<'_, T, D> {
    /// Copies a host view of any layout into this device view of any layout (same shape), on
    /// `stream`, and waits for it. Nothing is written when the shapes differ.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{Array2, s};
    /// let stream = devspan::default_stream(0)?;
    /// let host = Array2::from_shape_fn((8, 6), |(i, j)| (i * 6 + j) as i32);
    /// let mut dev = devspan::DeviceArray::<i32, _>::zeros(&stream, (6, 8))?;
    /// dev.view_mut().slice_mut(s![.., ..;-1]).copy_from_host(&stream, &host.t())?;
    /// assert_eq!(dev.to_host(&stream)?, host.t().slice(s![.., ..;-1]));
    /// # Ok(()) }
    /// ```
    pub fn copy_from_host(
        &mut self,
        stream: &Arc<CudaStream>,
        host: &ArrayView<'_, T, D>,
    ) -> Result<()> {
        check_same_shape(host.shape(), self.shape())?;
        check_stream(stream, self.device(), "the destination view")?;
        if self.is_empty() {
            return Ok(());
        }
        let staged = DeviceArray::from_host(stream, host)?;
        self.assign(stream, &staged.view())?;
        stream.synchronize()?;
        Ok(())
    }
}

impl<T: DeviceElement, D: Dimension> DeviceView<'_, T, D> {
    /// Copies this device view of any layout into a host view of any layout (same shape), on
    /// `stream`, and waits for it. Nothing is written when the shapes differ.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{Array2, s};
    /// let stream = devspan::default_stream(0)?;
    /// let dev = devspan::DeviceArray::from_host(&stream, &Array2::from_shape_fn((4, 5), |(i, j)| (i * 5 + j) as u8).view())?;
    /// let mut host = Array2::<u8>::zeros((5, 4));
    /// dev.view().copy_to_host(&stream, &mut host.view_mut().reversed_axes())?;
    /// assert_eq!(host.t(), dev.to_host(&stream)?);
    /// # Ok(()) }
    /// ```
    pub fn copy_to_host(
        &self,
        stream: &Arc<CudaStream>,
        host: &mut ArrayViewMut<'_, T, D>,
    ) -> Result<()> {
        check_same_shape(host.shape(), self.shape())?;
        check_stream(stream, self.device(), "the source view")?;
        if self.is_empty() {
            return Ok(());
        }
        let packed = self.to_contiguous(stream)?.to_host(stream)?;
        host.assign(&packed);
        Ok(())
    }
}
