//! Host <-> device copies between any host layout and any device layout.
//!
//! [`plan`] decides how the elements cross the bus (a contiguous block, a block with gaps sent
//! whole, or gathered run by run; straight into the device view or through a device temporary
//! and a copy kernel). Pageable host memory goes through [`pipeline`]: pinned staging chunks,
//! two per worker thread, packing one chunk while the copy engine moves the other.
//! Page-locked memory ([`PinnedBuffer`], or any view the driver knows as page-locked) is copied
//! directly.

mod pack;
mod pinned;
mod pinned_host_slice;
mod pipeline;
pub(crate) mod plan;
#[cfg(test)]
mod tests;
mod to_device;
mod to_host;

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::Ix1;

use crate::array::DeviceArray;
use crate::element::DeviceElement;
use crate::error::{Error, Result};

pub use pinned::PinnedBuffer;
pub use pipeline::TransferOptions;
#[cfg(any(test, feature = "internals"))]
pub use plan::DevicePath;
pub use plan::HostPath;

fn check_same_shape(host: &[usize], dev: &[usize]) -> Result<()> {
    if host != dev {
        return Err(Error::shape(format!(
            "host shape {host:?} does not match device shape {dev:?}"
        )));
    }
    Ok(())
}

/// The paths a transfer would take, `"host/device"` (benchmarks and diagnostics).
#[cfg(any(test, feature = "internals"))]
pub fn transfer_path(
    shape: &[usize],
    host_strides: &[isize],
    dev_strides: &[isize],
    elem_size: usize,
    up: bool,
) -> String {
    use plan::{Direction, plan_transfer};
    let dir = if up { Direction::Up } else { Direction::Down };
    match plan_transfer(shape, host_strides, dev_strides, elem_size, dir, None) {
        Ok(p) => format!("{:?}/{:?}", p.host, p.device).to_lowercase(),
        Err(e) => format!("error: {e}"),
    }
}

/// An uninitialised device temporary of `m` elements on `stream`, for the bus buffer of a
/// transfer whose device path is [`DevicePath::Staged`](plan::DevicePath::Staged).
///
/// # Safety
/// As [`DeviceArray::uninit`]: every element is written before it is read.
unsafe fn device_temporary<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    m: usize,
) -> Result<DeviceArray<T, Ix1>> {
    // SAFETY: the caller's contract.
    unsafe { DeviceArray::<T, Ix1>::uninit(stream, m) }
}

/// A host <-> device copy in flight, holding the borrows of both sides until it completes.
///
/// [`wait`](Self::wait) finishes the copy and reports errors. Dropping the handle finishes it
/// too; a destructor cannot return an error, so a failure is then written to standard error
/// as one line starting with `devspan:` (wait for the transfer to handle errors).
///
/// Forgetting it (`std::mem::forget`) is safe and leaks no device memory. The host memory is
/// never touched after the handle is gone: downloads then leave the host view unwritten, and
/// uploads have read the host view already. What a forgotten handle leaks is host memory: a
/// download through a device temporary (a device view that must be gathered first) copied the
/// gathered elements into page-locked staging memory when it started, and released the
/// temporary then; that staging memory is never freed or reused once the handle is forgotten.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use ndarray::Array2;
/// let stream = devspan::default_stream(0)?;
/// let host = Array2::from_shape_fn((256, 256), |(i, j)| (i + j) as f32);
/// let mut dev = devspan::DeviceArray::<f32, _>::zeros(&stream, (256, 256))?;
/// {
///     let (mut dv, ht) = (dev.view_mut(), host.t());
///     let up = dv.copy_from_host_async_on(&stream, &ht)?;
///     // ... other host work ...
///     up.wait()?;
/// }
/// let mut back = Array2::<f32>::zeros((256, 256));
/// let view = dev.view();
/// let mut out = back.view_mut();
/// view.copy_to_host_async_on(&stream, &mut out)?.wait()?;
/// assert_eq!(back, host.t());
/// # Ok(()) }
/// ```
#[must_use = "a transfer finishes when it is waited for or dropped"]
pub struct Transfer<'a> {
    finish: Option<Box<dyn FnOnce() -> Result<()> + 'a>>,
}

impl std::fmt::Debug for Transfer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transfer")
            .field("finished", &self.finish.is_none())
            .finish()
    }
}

impl Transfer<'_> {
    /// Finishes the copy (waiting for the device) and reports its result.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let host = ndarray::arr1(&[1u8, 2, 3]);
    /// let mut dev = devspan::DeviceArray::<u8, _>::zeros(&stream, 3)?;
    /// dev.view_mut().copy_from_host_async_on(&stream, &host.view())?.wait()?;
    /// # Ok(()) }
    /// ```
    pub fn wait(mut self) -> Result<()> {
        self.finish.take().map_or(Ok(()), |f| f())
    }
}

impl Drop for Transfer<'_> {
    fn drop(&mut self) {
        if let Some(f) = self.finish.take()
            && let Err(e) = f()
        {
            report_dropped(&e, &mut std::io::stderr());
        }
    }
}

/// Writes the error of a transfer that was dropped without being waited for, as one line
/// starting with `devspan:`. A failed write is ignored: this never panics.
fn report_dropped(e: &Error, out: &mut dyn std::io::Write) {
    let msg = format!("{e:#}").replace(['\n', '\r'], " ");
    let _ = writeln!(
        out,
        "devspan: a transfer dropped without wait() failed: {msg}"
    );
}
