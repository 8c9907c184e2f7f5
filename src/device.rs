//! Finding a CUDA device without panicking when there is none.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use cudarc::driver::{CudaContext, CudaStream};

use crate::error::{Error, ErrorKind, Result};

fn driver_status() -> &'static std::result::Result<usize, String> {
    static STATUS: OnceLock<std::result::Result<usize, String>> = OnceLock::new();
    STATUS.get_or_init(|| {
        // Miri cannot load a shared library: under it devspan behaves as on a machine without
        // a driver (every device entry point answers `Err(NoDevice)`).
        if cfg!(miri) {
            return Err("the CUDA driver cannot be loaded under Miri".into());
        }
        if !crate::driver::library_present() {
            return Err("the CUDA driver library (libcuda) could not be loaded: no NVIDIA driver on this machine".into());
        }
        if let Err(e) = crate::driver::init() {
            let why = std::error::Error::source(&e).map_or_else(|| e.to_string(), |d| d.to_string());
            return Err(format!("the CUDA driver failed to initialise: {why}"));
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
/// While anything (a stream, an array, a returned handle) holds the context, every call returns
/// that same handle: cudarc synchronises the device when a handle makes its first stream, which
/// would stall, and invalidate stream captures of, work already running on the device.
/// Settings of the handle (cudarc's event tracking) apply to all its users.
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
    static CONTEXTS: Mutex<Vec<Weak<CudaContext>>> = Mutex::new(Vec::new());
    let mut held = CONTEXTS.lock().unwrap_or_else(|p| p.into_inner());
    if held.len() <= ordinal {
        held.resize_with(ordinal + 1, Weak::new);
    }
    if let Some(ctx) = held[ordinal].upgrade() {
        return Ok(ctx);
    }
    let ctx = CudaContext::new(ordinal)?;
    held[ordinal] = Arc::downgrade(&ctx);
    Ok(ctx)
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
pub(crate) fn check_stream(
    stream: &CudaStream,
    device: usize,
    what: impl std::fmt::Display,
) -> Result<()> {
    let s = stream.context().ordinal();
    if s != device {
        return Err(Error::device_mismatch(format!(
            "{what} lives on device {device} but the stream belongs to device {s}"
        )));
    }
    Ok(())
}

/// Restores the calling thread's current CUDA context when dropped, so that code which makes a
/// device's primary context current (devspan's calls do) leaves the caller's notion of the
/// current device as it found it.
///
/// Every release of memory (whose drop may run on any thread) saves the current context
/// before anything that can make another one current; a binding's entry points do the same.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let _guard = devspan::foreign::ContextGuard::save();
/// let ctx = devspan::context(0)?;
/// devspan::foreign::bind_context(&ctx)?; // device 0 current until `_guard` drops
/// # Ok(()) }
/// ```
#[must_use = "the context is restored when the guard drops"]
pub struct ContextGuard(Option<crate::driver::CUcontext>);

impl std::fmt::Debug for ContextGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ContextGuard")
            .field(&self.0.map(|c| c as usize))
            .finish()
    }
}

impl ContextGuard {
    /// Saves the calling thread's current context (possibly none). With no usable CUDA driver
    /// nothing is saved, and nothing is restored: no context can have been made current.
    pub fn save() -> Self {
        if !crate::device::gpu_available() {
            return ContextGuard(None);
        }
        ContextGuard(current())
    }
}

/// The calling thread's current context (null for none), or `None` when the driver cannot say.
/// Only called once the driver is known to be loaded and initialised.
pub(crate) fn current() -> Option<crate::driver::CUcontext> {
    crate::driver::current_context().ok()
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        if let Some(ctx) = self.0
            && current() != Some(ctx)
        {
            // SAFETY: `ctx` was the thread's current context (or null) when saved; primary
            // contexts stay alive while devspan's `CudaContext` retains them. Setting null is
            // allowed and unbinds.
            let _ = unsafe { crate::driver::set_current_context(ctx) };
        }
    }
}

/// Makes `ctx` current on this thread. cudarc first reports (and clears) an error that an
/// earlier asynchronous call stored in the context; such a bind is tried once more.
///
/// Pair it with a [`ContextGuard`] to restore the caller's context afterwards.
pub fn bind_context(ctx: &CudaContext) -> Result<()> {
    if ctx.bind_to_thread().is_ok() {
        return Ok(());
    }
    Ok(ctx.bind_to_thread()?)
}
