//! The driver's asynchronous copies between host and device, on raw addresses.

use cudarc::driver::{CudaStream, sys};

use crate::error::Result;

/// Enqueues a copy of `len` elements from host `src` to device address `dst` on `stream`.
///
/// # Safety
/// `src` must be readable for `len` elements until the copy completes (pageable memory: until
/// this returns) and `dst` writable device memory of `len` elements in `stream`'s context.
pub(crate) unsafe fn htod<T>(
    stream: &CudaStream,
    dst: u64,
    src: *const T,
    len: usize,
) -> Result<()> {
    stream.context().bind_to_thread()?;
    // SAFETY: the caller's contract.
    unsafe {
        sys::cuMemcpyHtoDAsync_v2(
            dst,
            src.cast(),
            len * std::mem::size_of::<T>(),
            stream.cu_stream(),
        )
        .result()?
    };
    Ok(())
}

/// Enqueues a copy of `len` elements from device address `src` to host `dst` on `stream`.
///
/// # Safety
/// `dst` must be writable for `len` elements, and accessed by nothing else, until the copy
/// completes; `src` readable device memory of `len` elements in `stream`'s context.
pub(crate) unsafe fn dtoh<T>(stream: &CudaStream, dst: *mut T, src: u64, len: usize) -> Result<()> {
    stream.context().bind_to_thread()?;
    // SAFETY: the caller's contract.
    unsafe {
        sys::cuMemcpyDtoHAsync_v2(
            dst.cast(),
            src,
            len * std::mem::size_of::<T>(),
            stream.cu_stream(),
        )
        .result()?
    };
    Ok(())
}
