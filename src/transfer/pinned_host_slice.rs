//! Copying conversions between [`PinnedBuffer`] and cudarc's [`PinnedHostSlice`].
//!
//! Neither type can take over the other's allocation: `PinnedHostSlice`'s fields are private to
//! cudarc and it has no constructor from raw parts and no way to give its memory up
//! (`into_raw`, `leak`) short of `std::mem::forget`, which would also leak its `CudaEvent` and,
//! through it, a handle on its context. Both directions therefore copy the elements, on the
//! host, after waiting for the device copies the source knows of.

use std::sync::Arc;

use cudarc::driver::{CudaContext, PinnedHostSlice};

use super::pinned::PinnedBuffer;
use crate::element::DeviceElement;
use crate::error::{Error, Result};

impl<T: DeviceElement> PinnedBuffer<T> {
    /// A new buffer, in `src`'s context, holding a copy of the elements of cudarc's
    /// page-locked slice `src`.
    ///
    /// First waits for the device copies `src` tracks: cudarc records an event on each copy it
    /// enqueues on a stream of `src`'s context while that context manages stream
    /// synchronisation ([`CudaContext::is_managing_stream_synchronization`]: it has a stream
    /// besides the default one, and event tracking on). When the context does not (only the
    /// default stream in use, or event tracking off), cudarc records nothing, and this waits
    /// for the whole context instead ([`CudaContext::synchronize`]). A copy into `src` enqueued
    /// on a stream of another context is recorded by neither and must be waited for by the
    /// caller. `Err` when a wait or the allocation fails.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::new_stream(0)?;
    /// let dev = stream.clone_htod(&[1.0f32, 2.0, 3.0])?;
    /// // SAFETY: the slice is written by the copy below before it is read.
    /// let mut cudarc_pinned = unsafe { stream.context().alloc_pinned::<f32>(3)? };
    /// stream.memcpy_dtoh(&dev, &mut cudarc_pinned)?; // enqueued, returns at once
    /// let b = devspan::PinnedBuffer::from_pinned_host_slice(&cudarc_pinned)?; // waits
    /// assert_eq!(b.as_slice()?, &[1.0, 2.0, 3.0]);
    /// # Ok(()) }
    /// ```
    pub fn from_pinned_host_slice(src: &PinnedHostSlice<T>) -> Result<Self> {
        let ctx = src.context();
        if src.is_empty() {
            return Self::from_slice(ctx, &[]);
        }
        if !ctx.is_managing_stream_synchronization() {
            ctx.synchronize()?;
        }
        // Waits for the slice's event, then reads.
        let data = src.as_slice()?;
        Self::from_slice(ctx, data)
    }

    /// A new cudarc page-locked slice in `ctx` holding a copy of the buffer's elements.
    ///
    /// First waits for the device copies enqueued on the buffer (as
    /// [`as_slice`](Self::as_slice) does). The slice is allocated with the flags of a
    /// `PinnedBuffer` (`CU_MEMHOSTALLOC_PORTABLE`), not the write-combined memory of
    /// [`CudaContext::alloc_pinned`], so the host reads it at normal speed; it is usable with
    /// the streams of every context, while its event, which cudarc's copies record, belongs to
    /// `ctx`. `ctx` is usually [`self.context()`](Self::context).
    ///
    /// `Err` for an empty buffer: cudarc's allocation asserts a non-null pointer, and the driver
    /// returns none for zero bytes, so an empty `PinnedHostSlice` cannot be made. `Err` too when
    /// the wait or the allocation fails.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::new_stream(0)?;
    /// let b = devspan::PinnedBuffer::from_slice(stream.context(), &[4u16, 5, 6])?;
    /// let cudarc_pinned = b.to_pinned_host_slice(b.context())?;
    /// let dev = stream.clone_htod(&cudarc_pinned)?;
    /// assert_eq!(stream.clone_dtoh(&dev)?, vec![4, 5, 6]);
    /// # Ok(()) }
    /// ```
    pub fn to_pinned_host_slice(&self, ctx: &Arc<CudaContext>) -> Result<PinnedHostSlice<T>> {
        let data = self.as_slice()?;
        if data.is_empty() {
            return Err(Error::invalid(
                "an empty pinned buffer has no cudarc PinnedHostSlice: cudarc cannot allocate \
                 one of zero elements",
            ));
        }
        // cudarc's allocation panics unless the byte size is below isize::MAX; a live buffer's
        // is at most that (checked at its allocation, so the product cannot overflow).
        if std::mem::size_of_val(data) >= isize::MAX as usize {
            return Err(Error::overflow(format!(
                "a cudarc PinnedHostSlice of {} elements is too large",
                data.len()
            )));
        }
        // SAFETY: the slice's memory is uninitialised; every element is written below before
        // anything reads it, and only through a raw pointer.
        let mut out = unsafe { crate::driver::alloc_pinned_slice::<T>(ctx, data.len())? };
        // Waits for the new slice's event, which no copy has recorded yet.
        let dst = out.as_mut_ptr()?;
        // SAFETY: `dst` is a fresh allocation of `data.len()` elements of `T` (cudarc checked
        // the pointer non-null and aligned), owned by `out`, which nothing else can reach yet;
        // it cannot overlap `data`, the buffer's own allocation.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(out)
    }
}
