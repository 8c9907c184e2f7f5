//! Finding a CUDA device without panicking when there is none.

use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, CudaStream};

use crate::error::{Error, ErrorKind, Result};

fn driver_status() -> &'static std::result::Result<usize, String> {
    static STATUS: OnceLock<std::result::Result<usize, String>> = OnceLock::new();
    STATUS.get_or_init(|| {
        // SAFETY: `is_culib_present` only tries to dlopen the driver library by its known names
        // and drops the handle; it has no preconditions.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err("the CUDA driver library (libcuda) could not be loaded: no NVIDIA driver on this machine".into());
        }
        if let Err(e) = cudarc::driver::result::init() {
            return Err(format!("the CUDA driver failed to initialise: {e}"));
        }
        match CudaContext::device_count() {
            Ok(0) => Err("the CUDA driver reports no device".into()),
            Ok(n) => Ok(n as usize),
            Err(e) => Err(format!("the CUDA driver could not count devices: {e}")),
        }
    })
}

/// Number of CUDA devices, or `Err(NoDevice)` when no driver or no device exists. Never panics.
///
/// ```
/// match devspan::device_count() {
///     Ok(n) => println!("{n} CUDA device(s)"),
///     Err(e) => println!("no GPU: {e}"),
/// }
/// ```
pub fn device_count() -> Result<usize> {
    driver_status()
        .clone()
        .map_err(|m| Error::new(ErrorKind::NoDevice, m))
}

/// Whether a CUDA driver and at least one device are present.
///
/// ```
/// if !devspan::gpu_available() {
///     println!("running on the CPU only");
/// }
/// ```
pub fn gpu_available() -> bool {
    device_count().is_ok()
}

/// The primary context of device `ordinal`, or `Err(NoDevice)` / `Err(Driver)` instead of the
/// panic cudarc raises when libcuda is missing.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let ctx = devspan::context(0)?;
/// println!("{}", ctx.name()?);
/// # Ok(()) }
/// ```
pub fn context(ordinal: usize) -> Result<Arc<CudaContext>> {
    let n = device_count()?;
    if ordinal >= n {
        return Err(Error::new(
            ErrorKind::NoDevice,
            format!("device {ordinal} requested but only {n} CUDA device(s) exist"),
        ));
    }
    Ok(CudaContext::new(ordinal)?)
}

/// A new stream on device `ordinal`'s primary context.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::new_stream(0)?;
/// stream.synchronize()?;
/// # Ok(()) }
/// ```
pub fn new_stream(ordinal: usize) -> Result<Arc<CudaStream>> {
    Ok(context(ordinal)?.new_stream()?)
}

/// The default (legacy null) stream of device `ordinal`'s primary context.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, 16)?;
/// # Ok(()) }
/// ```
pub fn default_stream(ordinal: usize) -> Result<Arc<CudaStream>> {
    Ok(context(ordinal)?.default_stream())
}

/// `Err(DeviceMismatch)` unless `stream` belongs to device `device`.
pub(crate) fn check_stream(stream: &CudaStream, device: usize, what: &str) -> Result<()> {
    let s = stream.context().ordinal();
    if s != device {
        return Err(Error::device_mismatch(format!(
            "{what} lives on device {device} but the stream belongs to device {s}"
        )));
    }
    Ok(())
}

/// Runs `f` with `ctx` current on this thread, then makes the thread's previous context (or
/// none) current again, also when `f` panics. If `ctx` cannot be made current, `f` runs anyway.
pub(crate) fn with_context<R>(ctx: &CudaContext, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Option<cudarc::driver::sys::CUcontext>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(prev) = self.0 {
                // SAFETY: `prev` was this thread's current context before the call (null
                // unbinds).
                let _ = unsafe {
                    cudarc::driver::result::ctx::set_current(prev.unwrap_or(std::ptr::null_mut()))
                };
            }
        }
    }
    let prev = cudarc::driver::result::ctx::get_current().ok();
    let mut restore = Restore(None);
    if let Some(prev) = prev
        && prev != Some(ctx.cu_ctx())
        // SAFETY: `ctx` is alive (borrowed) for the call.
        && unsafe { cudarc::driver::result::ctx::set_current(ctx.cu_ctx()) }.is_ok()
    {
        restore.0 = Some(prev);
    }
    f()
}
