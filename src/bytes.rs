//! Untyped device memory: pointer, byte length, device ordinal and keep-alive.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DeviceSlice};

use crate::error::{Error, Result};
use crate::owner::{DeviceOwner, KeepAlive};

/// The parts every device memory handle shares.
#[derive(Clone, Debug)]
pub struct RawBytes<'a> {
    /// The device address of the first byte ([`ptr`](Self::ptr)); for cudarc memory (a
    /// [`KeepAlive::Cuda`](crate::owner::KeepAlive) keep-alive), its offset from the address of
    /// the slice or view the handle was made from, which devspan learns on the first access
    /// (so that making a view of cudarc memory enqueues nothing).
    at: u64,
    pub(crate) len: usize,
    pub(crate) device: usize,
    pub(crate) keep: KeepAlive<'a>,
    /// The range also holds elements that another writable handle may write (the halves of a
    /// writable view split along an inner axis interleave): it is never handed out whole.
    pub(crate) shared: bool,
}

// The device address of cudarc memory. Taking it enqueues no access: the read event that
// cudarc would record when its guard drops is skipped (no read happened).
pub(crate) use crate::capture::address_of;

pub(crate) fn resolve_range(range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s
            .checked_add(1)
            .ok_or_else(|| Error::out_of_bounds("range start overflows usize"))?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e
            .checked_add(1)
            .ok_or_else(|| Error::out_of_bounds("range end overflows usize"))?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::out_of_bounds(format!(
            "range {start}..{end} is out of bounds for length {len}"
        )));
    }
    Ok((start, end))
}

impl<'a> RawBytes<'a> {
    /// The handle of all of the cudarc memory that `keep` tracks, `len` bytes of device
    /// `device`.
    pub(crate) fn cuda(len: usize, device: usize, keep: KeepAlive<'a>) -> Self {
        debug_assert!(keep.is_cuda());
        RawBytes {
            at: 0,
            len,
            device,
            keep,
            shared: false,
        }
    }

    /// The device address of the first byte.
    pub(crate) fn ptr(&self) -> u64 {
        match self.keep.cuda_address() {
            Some(base) => base + self.at,
            None => self.at,
        }
    }

    /// The handle of foreign or raw memory at `ptr`.
    pub(crate) fn new(ptr: u64, len: usize, device: usize, keep: KeepAlive<'a>) -> Result<Self> {
        debug_assert!(!keep.is_cuda());
        if ptr == 0 && len != 0 {
            return Err(Error::invalid(format!(
                "null device pointer with length {len} bytes"
            )));
        }
        if len > isize::MAX as usize || ptr.checked_add(len as u64).is_none() {
            return Err(Error::overflow(format!(
                "device range 0x{ptr:x} + {len} bytes overflows the address space"
            )));
        }
        Ok(RawBytes {
            at: ptr,
            len,
            device,
            keep,
            shared: false,
        })
    }

    /// Sub-range in bytes; `start..end` already checked.
    pub(crate) fn sub(&self, start: usize, end: usize) -> Self {
        debug_assert!(start <= end && end <= self.len);
        RawBytes {
            at: self.at + start as u64,
            len: end - start,
            device: self.device,
            keep: self.keep.clone(),
            shared: self.shared,
        }
    }
}

/// A read-only range of device memory, untyped.
///
/// Holds a device pointer, a length in bytes, the device ordinal and a keep-alive (a borrow of
/// lifetime `'a`, or a shared [`DeviceOwner`] for `'static` handles). Typed access goes through
/// [`DeviceBytes::typed`].
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let slice = stream.alloc_zeros::<f32>(16)?;
/// let bytes = devspan::DeviceBytes::from_cuda(&slice);
/// assert_eq!(bytes.len(), 64);
/// let span = bytes.slice(16..)?.typed::<f32>()?;
/// assert_eq!(span.len(), 12);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct DeviceBytes<'a> {
    pub(crate) raw: RawBytes<'a>,
}

/// A writable range of device memory, untyped. Unlike [`DeviceBytes`] it is not `Clone`: two
/// writable handles never cover the same byte.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let mut slice = stream.alloc_zeros::<u8>(100)?;
/// let bytes = devspan::DeviceBytesMut::from_cuda_mut(&mut slice);
/// let (head, tail) = bytes.split_at_mut(40)?;
/// assert_eq!((head.len(), tail.len()), (40, 60));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DeviceBytesMut<'a> {
    pub(crate) raw: RawBytes<'a>,
}

impl DeviceBytes<'static> {
    /// A read-only handle over foreign memory, kept alive by `owner`.
    ///
    /// Returns `Err` for a null pointer with a nonzero length or a range that overflows the
    /// address space.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be device memory of device `device`, readable for as long as `owner`
    /// is alive, and not written by anyone while any view of it is used by a device operation
    /// (other than through devspan's own writable handles). If `owner.release_stream()` names a
    /// stream, dropping `owner` must release the memory no earlier than the work enqueued on that
    /// stream before the drop (see [`DeviceOwner`]). Work on the memory enqueued outside devspan
    /// must be complete, or ordered before the streams devspan's operations use.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use std::sync::Arc;
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u32>(8)?;
    /// let ptr = devspan::interop::cuda_slice_address(&slice);
    /// // SAFETY: the CudaSlice owns the 32 bytes at `ptr` and is moved into the owner handle.
    /// let bytes = unsafe { devspan::DeviceBytes::from_raw_parts(ptr, 32, 0, Arc::new(slice))? };
    /// assert_eq!(bytes.len(), 32);
    /// # Ok(()) }
    /// ```
    pub unsafe fn from_raw_parts(
        ptr: u64,
        len: usize,
        device: usize,
        owner: Arc<dyn DeviceOwner>,
    ) -> Result<Self> {
        Ok(DeviceBytes {
            raw: RawBytes::new(ptr, len, device, KeepAlive::owner(owner))?,
        })
    }
}

impl<'a> DeviceBytes<'a> {
    /// A read-only handle over memory borrowed for `'a`, with no owner.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be device memory of device `device`, readable for all of `'a` and
    /// not freed or written by anyone else while a device operation uses it. Nothing tracks the
    /// work devspan enqueues on such memory: the caller frees it only after that work has
    /// completed (synchronise the streams used, or free stream-ordered behind them).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u8>(8)?;
    /// let ptr = devspan::interop::cuda_slice_address(&slice);
    /// // SAFETY: `slice` outlives `bytes` and is not written meanwhile.
    /// let bytes = unsafe { devspan::DeviceBytes::from_raw_parts_borrowed(ptr, 8, 0)? };
    /// # drop(bytes); drop(slice); Ok(()) }
    /// ```
    pub unsafe fn from_raw_parts_borrowed(ptr: u64, len: usize, device: usize) -> Result<Self> {
        Ok(DeviceBytes {
            raw: RawBytes::new(ptr, len, device, KeepAlive::borrow())?,
        })
    }

    /// A handle over a whole cudarc slice; devspan's launches take part in cudarc's event
    /// tracking for it.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f64>(4)?;
    /// assert_eq!(devspan::DeviceBytes::from_cuda(&slice).len(), 32);
    /// # Ok(()) }
    /// ```
    pub fn from_cuda<T: Send + Sync + 'static>(slice: &'a CudaSlice<T>) -> Self {
        let (len, device) = (slice.num_bytes(), slice.context().ordinal());
        DeviceBytes {
            raw: RawBytes::cuda(len, device, KeepAlive::cuda_slice(slice)),
        }
    }

    /// A handle over a cudarc view.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f32>(10)?;
    /// let bytes = devspan::DeviceBytes::from_cuda_view(slice.slice(2..6));
    /// assert_eq!(bytes.len(), 16);
    /// # Ok(()) }
    /// ```
    pub fn from_cuda_view<T: Send + Sync + 'static>(view: CudaView<'a, T>) -> Self {
        let len = view.num_bytes();
        let device = view.stream().context().ordinal();
        DeviceBytes {
            raw: RawBytes::cuda(len, device, KeepAlive::cuda_view(view)),
        }
    }

    /// Length in bytes.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u16>(3)?;
    /// assert_eq!(devspan::DeviceBytes::from_cuda(&slice).len(), 6);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.raw.len
    }

    /// Whether the range is empty.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u16>(3)?;
    /// assert!(devspan::DeviceBytes::from_cuda(&slice).slice(6..)?.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    /// The device address of the first byte.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u8>(8)?;
    /// let b = devspan::DeviceBytes::from_cuda(&slice);
    /// assert_eq!(b.slice(3..)?.device_ptr(), b.device_ptr() + 3);
    /// # Ok(()) }
    /// ```
    pub fn device_ptr(&self) -> u64 {
        self.raw.ptr()
    }

    /// The ordinal of the device the memory lives on.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u8>(8)?;
    /// assert_eq!(devspan::DeviceBytes::from_cuda(&slice).device(), 0);
    /// # Ok(()) }
    /// ```
    pub fn device(&self) -> usize {
        self.raw.device
    }

    /// A sub-range, or `Err(OutOfBounds)`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u8>(8)?;
    /// let b = devspan::DeviceBytes::from_cuda(&slice);
    /// assert_eq!(b.slice(2..5)?.len(), 3);
    /// assert!(b.slice(4..9).is_err());
    /// # Ok(()) }
    /// ```
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceBytes<'a>> {
        let (s, e) = resolve_range(range, self.raw.len)?;
        Ok(DeviceBytes {
            raw: self.raw.sub(s, e),
        })
    }

    /// Two handles, `[0, mid)` and `[mid, len)`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u8>(8)?;
    /// let (a, b) = devspan::DeviceBytes::from_cuda(&slice).split_at(3)?;
    /// assert_eq!((a.len(), b.len()), (3, 5));
    /// # Ok(()) }
    /// ```
    pub fn split_at(&self, mid: usize) -> Result<(DeviceBytes<'a>, DeviceBytes<'a>)> {
        if mid > self.raw.len {
            return Err(Error::out_of_bounds(format!(
                "split point {mid} is past the end of {} bytes",
                self.raw.len
            )));
        }
        Ok((
            DeviceBytes {
                raw: self.raw.sub(0, mid),
            },
            DeviceBytes {
                raw: self.raw.sub(mid, self.raw.len),
            },
        ))
    }

    /// The same bytes viewed as elements of `T`: checks the pointer's alignment and that the
    /// length is a multiple of `size_of::<T>()`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u8>(10)?;
    /// let b = devspan::DeviceBytes::from_cuda(&slice);
    /// assert_eq!(b.slice(..8)?.typed::<u32>()?.len(), 2);
    /// assert!(b.slice(1..5)?.typed::<u32>().is_err()); // misaligned
    /// assert!(b.slice(..6)?.typed::<u32>().is_err()); // 6 bytes is not a whole number of u32
    /// # Ok(()) }
    /// ```
    pub fn typed<T: crate::DeviceElement>(self) -> Result<crate::DeviceSpan<'a, T>> {
        crate::span::check_typed::<T>(&self.raw)?;
        Ok(crate::DeviceSpan::from_raw(self.raw))
    }
}

impl DeviceBytesMut<'static> {
    /// A writable handle over foreign memory, kept alive by `owner`.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be device memory of device `device`, readable and writable for as
    /// long as `owner` is alive, and accessed by no one else while any handle derived from this
    /// one is used by a device operation. If `owner.release_stream()` names a stream, dropping
    /// `owner` must release the memory no earlier than the work enqueued on that stream before
    /// the drop (see [`DeviceOwner`]).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use std::sync::Arc;
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<u8>(64)?;
    /// let ptr = devspan::interop::cuda_slice_address(&slice);
    /// // SAFETY: the CudaSlice owns the 64 bytes and moves into the owner handle.
    /// let b = unsafe { devspan::DeviceBytesMut::from_raw_parts(ptr, 64, 0, Arc::new(slice))? };
    /// # drop(b); Ok(()) }
    /// ```
    pub unsafe fn from_raw_parts(
        ptr: u64,
        len: usize,
        device: usize,
        owner: Arc<dyn DeviceOwner>,
    ) -> Result<Self> {
        Ok(DeviceBytesMut {
            raw: RawBytes::new(ptr, len, device, KeepAlive::owner(owner))?,
        })
    }
}

impl<'a> DeviceBytesMut<'a> {
    /// A writable handle over memory borrowed exclusively for `'a`, with no owner.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be device memory of device `device`, readable and writable for all
    /// of `'a`, and neither freed nor accessed by anyone else during `'a`. Nothing tracks the
    /// work devspan enqueues on such memory: the caller frees it only after that work has
    /// completed.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(8)?;
    /// let ptr = devspan::interop::cuda_slice_address(&slice);
    /// // SAFETY: `slice` outlives the handle and is not used meanwhile.
    /// let b = unsafe { devspan::DeviceBytesMut::from_raw_parts_borrowed(ptr, 8, 0)? };
    /// # drop(b); drop(slice); Ok(()) }
    /// ```
    pub unsafe fn from_raw_parts_borrowed(ptr: u64, len: usize, device: usize) -> Result<Self> {
        Ok(DeviceBytesMut {
            raw: RawBytes::new(ptr, len, device, KeepAlive::borrow())?,
        })
    }

    /// A writable handle over a whole cudarc slice, borrowed exclusively.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// assert_eq!(devspan::DeviceBytesMut::from_cuda_mut(&mut slice).len(), 16);
    /// # Ok(()) }
    /// ```
    pub fn from_cuda_mut<T: Send + Sync + 'static>(slice: &'a mut CudaSlice<T>) -> Self {
        let len = slice.num_bytes();
        let device = slice.context().ordinal();
        DeviceBytesMut {
            raw: RawBytes::cuda(len, device, KeepAlive::cuda_slice_mut(slice)),
        }
    }

    /// A writable handle over a cudarc mutable view.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// let b = devspan::DeviceBytesMut::from_cuda_view_mut(slice.slice_mut(1..3));
    /// assert_eq!(b.len(), 8);
    /// # Ok(()) }
    /// ```
    pub fn from_cuda_view_mut<T: Send + Sync + 'static>(view: CudaViewMut<'a, T>) -> Self {
        let len = view.num_bytes();
        let device = view.stream().context().ordinal();
        DeviceBytesMut {
            raw: RawBytes::cuda(len, device, KeepAlive::cuda_view_mut(view)),
        }
    }

    /// Length in bytes.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// assert_eq!(devspan::DeviceBytesMut::from_cuda_mut(&mut slice).len(), 16);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.raw.len
    }

    /// Whether the range is empty.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// assert!(!devspan::DeviceBytesMut::from_cuda_mut(&mut slice).is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    /// The device address of the first byte.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// assert_ne!(devspan::DeviceBytesMut::from_cuda_mut(&mut slice).device_ptr(), 0);
    /// # Ok(()) }
    /// ```
    pub fn device_ptr(&self) -> u64 {
        self.raw.ptr()
    }

    /// The ordinal of the device the memory lives on.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// assert_eq!(devspan::DeviceBytesMut::from_cuda_mut(&mut slice).device(), 0);
    /// # Ok(()) }
    /// ```
    pub fn device(&self) -> usize {
        self.raw.device
    }

    /// A read-only handle to the same bytes, borrowing this one.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// let b = devspan::DeviceBytesMut::from_cuda_mut(&mut slice);
    /// assert_eq!(b.as_bytes().len(), 16);
    /// # Ok(()) }
    /// ```
    pub fn as_bytes(&self) -> DeviceBytes<'_> {
        DeviceBytes {
            raw: self.raw.clone(),
        }
    }

    /// Turns this handle into a read-only one of the same lifetime.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// let b = devspan::DeviceBytesMut::from_cuda_mut(&mut slice).into_bytes();
    /// let c = b.clone();
    /// assert_eq!(b.len(), c.len());
    /// # Ok(()) }
    /// ```
    pub fn into_bytes(self) -> DeviceBytes<'a> {
        DeviceBytes { raw: self.raw }
    }

    /// A shorter-lived writable handle to the same bytes.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// let mut b = devspan::DeviceBytesMut::from_cuda_mut(&mut slice);
    /// let r = b.reborrow();
    /// assert_eq!(r.len(), 16);
    /// # Ok(()) }
    /// ```
    pub fn reborrow(&mut self) -> DeviceBytesMut<'_> {
        DeviceBytesMut {
            raw: self.raw.clone(),
        }
    }

    /// A writable sub-range, consuming the handle.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(8)?;
    /// let b = devspan::DeviceBytesMut::from_cuda_mut(&mut slice).slice_mut(2..)?;
    /// assert_eq!(b.len(), 6);
    /// # Ok(()) }
    /// ```
    pub fn slice_mut(self, range: impl RangeBounds<usize>) -> Result<DeviceBytesMut<'a>> {
        let (s, e) = resolve_range(range, self.raw.len)?;
        Ok(DeviceBytesMut {
            raw: self.raw.sub(s, e),
        })
    }

    /// Two disjoint writable handles, `[0, mid)` and `[mid, len)`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(8)?;
    /// let (a, b) = devspan::DeviceBytesMut::from_cuda_mut(&mut slice).split_at_mut(8)?;
    /// assert_eq!((a.len(), b.len()), (8, 0));
    /// # Ok(()) }
    /// ```
    pub fn split_at_mut(self, mid: usize) -> Result<(DeviceBytesMut<'a>, DeviceBytesMut<'a>)> {
        if mid > self.raw.len {
            return Err(Error::out_of_bounds(format!(
                "split point {mid} is past the end of {} bytes",
                self.raw.len
            )));
        }
        let len = self.raw.len;
        Ok((
            DeviceBytesMut {
                raw: self.raw.sub(0, mid),
            },
            DeviceBytesMut {
                raw: self.raw.sub(mid, len),
            },
        ))
    }

    /// The same bytes as writable elements of `T` (alignment and length checked).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(8)?;
    /// let s = devspan::DeviceBytesMut::from_cuda_mut(&mut slice).typed_mut::<u16>()?;
    /// assert_eq!(s.len(), 4);
    /// # Ok(()) }
    /// ```
    pub fn typed_mut<T: crate::DeviceElement>(self) -> Result<crate::DeviceSpanMut<'a, T>> {
        crate::span::check_typed::<T>(&self.raw)?;
        Ok(crate::DeviceSpanMut::from_raw(self.raw))
    }
}
