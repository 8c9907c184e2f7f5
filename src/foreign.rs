//! Building blocks for bindings that hand devspan memory owned by other libraries or languages:
//! the Python package (the repository's `python/` crate) is built on these and devspan's other
//! public items alone.
//!
//! - Keep-alive and ordering: [`SharedOwner`], one log of devspan's work on a foreign
//!   allocation, shared by every view a binding builds over it
//!   ([`DeviceView::from_raw_parts_shared`](crate::DeviceView::from_raw_parts_shared)).
//! - The thread's current context: [`ContextGuard`] restores it, [`bind_context`] changes it.
//! - Streams named by other libraries: [`borrow_stream`] wraps a `CUstream` handle after
//!   checking its context; [`create_stream`] / [`destroy_stream`] make a stream without
//!   synchronising the context.
//! - Addresses: [`pointer_device`] and [`current_device`].
//! - Layouts given as plain shapes and strides: [`reach`] and [`checked_size`].
//! - Scalars of dynamically typed callers: [`f64_to_f16`], [`f64_to_bf16`] and
//!   [`i128_to_f64_round_odd`] round once, as devspan's casts do.
//!
//! ```no_run
//! # fn main() -> devspan::Result<()> {
//! use devspan::foreign::{ContextGuard, bind_context, create_stream, destroy_stream};
//!
//! let _guard = ContextGuard::save();
//! let ctx = devspan::context(0)?;
//! let stream = create_stream(&ctx)?;
//! stream.synchronize()?;
//! // SAFETY: made by `create_stream`, destroyed once, and not used afterwards.
//! unsafe { destroy_stream(&stream)? };
//! # Ok(()) }
//! ```

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, sys::CUstream};

use crate::error::{Error, ErrorKind, Result};

pub use crate::convert::{f64_to_bf16, f64_to_f16, i128_to_f64_round_odd};
pub use crate::device::{ContextGuard, bind_context};
pub use crate::layout::{checked_size, reach};
pub use crate::owner::SharedOwner;

/// The device ordinal of the calling thread's current context: `Err(Driver)` when there is
/// none, or `Err(NoDevice)` without a usable driver.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let ctx = devspan::context(0)?;
/// devspan::foreign::bind_context(&ctx)?;
/// assert_eq!(devspan::foreign::current_device()?, 0);
/// # Ok(()) }
/// ```
pub fn current_device() -> Result<usize> {
    crate::device::device_count()?;
    let d = crate::driver::current_device()?;
    usize::try_from(d)
        .map_err(|_| Error::invalid(format!("the CUDA driver reports current device {d}")))
}

/// The ordinal of the device whose memory holds address `ptr` (managed memory: the device it
/// was allocated for): `Err(Driver)` for an address the driver does not know, `Err(NoDevice)`
/// without a usable driver.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, 4)?;
/// assert_eq!(devspan::foreign::pointer_device(a.device_ptr())?, 0);
/// assert!(devspan::foreign::pointer_device(0x1000).is_err());
/// # Ok(()) }
/// ```
pub fn pointer_device(ptr: u64) -> Result<usize> {
    crate::device::device_count()?;
    let d = crate::driver::pointer_device(ptr)?;
    usize::try_from(d).map_err(|_| {
        Error::device_mismatch(format!(
            "the CUDA driver reports device {d} for address 0x{ptr:x}"
        ))
    })
}

/// A handle on the stream `handle` of context `ctx`, which another library created and owns:
/// devspan's operations can be queued on it, and it is not destroyed when the handle drops.
///
/// `Err(Driver)` when the driver does not know the stream, `Err(DeviceMismatch)` when it
/// belongs to another context than `ctx`. The special handles (null for the legacy default
/// stream, `CU_STREAM_PER_THREAD`) are `ctx.default_stream()` and `ctx.per_thread_stream()`
/// instead.
///
/// # Safety
/// `handle` must be a live stream (the driver dereferences it) that stays alive for every use
/// of the result, as for cudarc's `CudaContext::wrap_borrowed_stream`.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let ctx = devspan::context(0)?;
/// let theirs = ctx.new_stream()?;
/// // SAFETY: `theirs` outlives `ours`.
/// let ours = unsafe { devspan::foreign::borrow_stream(&ctx, theirs.cu_stream())? };
/// ours.synchronize()?;
/// # Ok(()) }
/// ```
pub unsafe fn borrow_stream(ctx: &Arc<CudaContext>, handle: CUstream) -> Result<Arc<CudaStream>> {
    // SAFETY: the caller's contract (a live stream).
    let owner = unsafe { crate::driver::stream_context(handle) }?;
    if owner != ctx.cu_ctx() {
        return Err(Error::new(
            ErrorKind::DeviceMismatch,
            format!(
                "stream 0x{:x} belongs to another CUDA context than the primary context of device {}",
                handle as usize,
                ctx.ordinal()
            ),
        ));
    }
    // SAFETY: a live stream of `ctx` (checked above) that outlives the wrapper (the caller's
    // contract); its owner orders its own work on it.
    Ok(unsafe { ctx.wrap_borrowed_stream(handle) })
}

/// A new non-blocking stream of `ctx`, made without synchronising the context: cudarc's
/// `CudaContext::new_stream` synchronises a context when it makes its first stream, which
/// stalls on work already queued there and is invalid while one of its streams captures a
/// graph. The handle does not own the stream: [`destroy_stream`] destroys it (until then it
/// stays alive, also after the handle drops). The thread's current context becomes `ctx`.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let ctx = devspan::context(0)?;
/// let s = devspan::foreign::create_stream(&ctx)?;
/// // SAFETY: made by `create_stream`, destroyed once, and not used afterwards.
/// unsafe { devspan::foreign::destroy_stream(&s)? };
/// # Ok(()) }
/// ```
pub fn create_stream(ctx: &Arc<CudaContext>) -> Result<Arc<CudaStream>> {
    bind_context(ctx)?;
    let raw = crate::driver::create_stream()?;
    // SAFETY: `raw` is a live stream of `ctx` (current when it was created); it stays alive
    // until `destroy_stream`, whose caller promises that the wrapper is not used afterwards.
    Ok(unsafe { ctx.wrap_borrowed_stream(raw) })
}

/// Destroys a stream made by [`create_stream`]; the driver releases it once the work queued on
/// it completes. The thread's current context becomes the stream's.
///
/// # Safety
/// `stream` must come from [`create_stream`], be destroyed once, and no handle on it (no clone
/// of the `Arc`) may be used to queue or wait for work afterwards.
pub unsafe fn destroy_stream(stream: &CudaStream) -> Result<()> {
    bind_context(stream.context())?;
    // SAFETY: the caller's contract; the stream's context is current.
    unsafe { crate::driver::destroy_stream(stream.cu_stream()) }
}
