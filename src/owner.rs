//! Keep-alives: what a view holds so that the memory it points at outlives it.
//!
//! A view keeps its memory alive in one of two ways:
//! - a Rust borrow (the lifetime `'a` of `DeviceView<'a, ..>`) over a `CudaSlice`, `CudaView`,
//!   `DeviceArray` or another view; for cudarc memory the borrow also carries cudarc's per-slice
//!   events, so that devspan's launches take part in cudarc's multi-stream synchronisation;
//! - a shared owner handle, [`Arc<dyn DeviceOwner>`](DeviceOwner), for memory whose owner Rust
//!   cannot see (an FFI allocation, a DLPack producer, another library's allocator). Such views
//!   are `'static`; the owner is dropped exactly once, after the last view derived from it.

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use crate::error::{Error, Result};

/// Something that owns device memory and releases it when dropped.
///
/// Implement it for whatever must stay alive while views of its memory exist: a handle from
/// another library, a DLPack managed tensor, a struct holding a `CudaSlice` and its stream.
/// devspan never calls anything on it; it only keeps it alive and drops it once, after the last
/// view that refers to it, on whichever thread drops that view.
///
/// ```
/// use std::sync::Arc;
/// use devspan::DeviceOwner;
///
/// struct ForeignBuffer { /* handle of another allocator */ }
/// impl DeviceOwner for ForeignBuffer {}
/// impl Drop for ForeignBuffer {
///     fn drop(&mut self) { /* release the memory here */ }
/// }
/// let owner: Arc<dyn DeviceOwner> = Arc::new(ForeignBuffer {});
/// # drop(owner);
/// ```
pub trait DeviceOwner: Send + Sync + 'static {
    /// A short description used in `Debug` output of views.
    ///
    /// ```
    /// use devspan::DeviceOwner;
    /// struct Pool;
    /// impl DeviceOwner for Pool {
    ///     fn describe(&self) -> String { "pool block".into() }
    /// }
    /// assert_eq!(Pool.describe(), "pool block");
    /// ```
    fn describe(&self) -> String {
        String::from("foreign owner")
    }
}

impl<T: Send + Sync + 'static> DeviceOwner for CudaSlice<T> {
    fn describe(&self) -> String {
        format!("CudaSlice({} elements)", self.len())
    }
}

impl<T: DeviceOwner + ?Sized> DeviceOwner for Box<T> {
    fn describe(&self) -> String {
        (**self).describe()
    }
}

/// Access to cudarc's event tracking of one allocation, behind type erasure.
pub(crate) trait CudaTrack: Send {
    /// Makes `stream` wait for earlier writes and runs `f`; records a read afterwards.
    fn read(&mut self, stream: &CudaStream, f: &mut dyn FnMut() -> Result<()>) -> Result<()>;
    /// Makes `stream` wait for earlier reads and writes and runs `f`; records a write
    /// afterwards. Read-only sources answer `None` without running `f`.
    fn write(
        &mut self,
        stream: &CudaStream,
        f: &mut dyn FnMut() -> Result<()>,
    ) -> Option<Result<()>>;
}

impl<T: Send + Sync> CudaTrack for &CudaSlice<T> {
    fn read(&mut self, stream: &CudaStream, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let (_ptr, _record) = self.device_ptr(stream);
        f()
    }
    fn write(&mut self, _: &CudaStream, _: &mut dyn FnMut() -> Result<()>) -> Option<Result<()>> {
        None
    }
}

impl<T: Send + Sync> CudaTrack for &mut CudaSlice<T> {
    fn read(&mut self, stream: &CudaStream, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let (_ptr, _record) = self.device_ptr(stream);
        f()
    }
    fn write(
        &mut self,
        stream: &CudaStream,
        f: &mut dyn FnMut() -> Result<()>,
    ) -> Option<Result<()>> {
        let (_ptr, _record) = self.device_ptr_mut(stream);
        Some(f())
    }
}

impl<T: Send + Sync> CudaTrack for CudaView<'_, T> {
    fn read(&mut self, stream: &CudaStream, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let (_ptr, _record) = self.device_ptr(stream);
        f()
    }
    fn write(&mut self, _: &CudaStream, _: &mut dyn FnMut() -> Result<()>) -> Option<Result<()>> {
        None
    }
}

impl<T: Send + Sync> CudaTrack for CudaViewMut<'_, T> {
    fn read(&mut self, stream: &CudaStream, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let (_ptr, _record) = self.device_ptr(stream);
        f()
    }
    fn write(
        &mut self,
        stream: &CudaStream,
        f: &mut dyn FnMut() -> Result<()>,
    ) -> Option<Result<()>> {
        let (_ptr, _record) = self.device_ptr_mut(stream);
        Some(f())
    }
}

/// A lockable [`CudaTrack`]: the shared form views hold.
pub(crate) trait SharedTrack: Send + Sync {
    fn read(&self, stream: &CudaStream, f: &mut dyn FnMut() -> Result<()>) -> Result<()>;
    fn write(&self, stream: &CudaStream, f: &mut dyn FnMut() -> Result<()>) -> Option<Result<()>>;
}

impl<X: CudaTrack> SharedTrack for Mutex<X> {
    fn read(&self, stream: &CudaStream, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.lock()
            .unwrap_or_else(|p| p.into_inner())
            .read(stream, f)
    }
    fn write(&self, stream: &CudaStream, f: &mut dyn FnMut() -> Result<()>) -> Option<Result<()>> {
        self.lock()
            .unwrap_or_else(|p| p.into_inner())
            .write(stream, f)
    }
}

/// What keeps a view's memory alive: a borrow, a tracked cudarc borrow or a shared owner.
#[derive(Clone)]
pub(crate) enum KeepAlive<'a> {
    /// A plain borrow of lifetime `'a`; nothing to track.
    Borrow(PhantomData<&'a ()>),
    /// A borrow of cudarc memory whose events devspan's launches record.
    Cuda(Arc<dyn SharedTrack + 'a>),
    /// A shared owner handle.
    Owner(Arc<dyn DeviceOwner>),
}

impl fmt::Debug for KeepAlive<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepAlive::Borrow(_) => f.write_str("borrow"),
            KeepAlive::Cuda(_) => f.write_str("cudarc borrow"),
            KeepAlive::Owner(o) => write!(f, "owner: {}", o.describe()),
        }
    }
}

impl<'a> KeepAlive<'a> {
    pub(crate) fn borrow() -> Self {
        KeepAlive::Borrow(PhantomData)
    }

    pub(crate) fn cuda(track: impl CudaTrack + 'a) -> Self {
        KeepAlive::Cuda(Arc::new(Mutex::new(track)))
    }

    fn same_tracker(&self, other: &KeepAlive<'_>) -> bool {
        match (self, other) {
            (KeepAlive::Cuda(a), KeepAlive::Cuda(b)) => {
                std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
            }
            _ => false,
        }
    }

    /// Runs `f`, which enqueues work on `stream` that reads this memory, inside cudarc's
    /// synchronisation for it.
    pub(crate) fn reading<R>(
        &self,
        stream: &CudaStream,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        match self {
            KeepAlive::Cuda(track) => {
                let mut out = None;
                let mut f = Some(f);
                let mut run = || {
                    out = Some((f.take().expect("run once"))()?);
                    Ok(())
                };
                track.read(stream, &mut run)?;
                Ok(out.expect("run once"))
            }
            _ => f(),
        }
    }

    /// Runs `f`, which enqueues work on `stream` that writes this memory.
    pub(crate) fn writing<R>(
        &self,
        stream: &CudaStream,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        match self {
            KeepAlive::Cuda(track) => {
                let mut out = None;
                let mut f = Some(f);
                let mut run = || {
                    out = Some((f.take().expect("run once"))()?);
                    Ok(())
                };
                match track.write(stream, &mut run) {
                    Some(r) => r?,
                    None => {
                        return Err(Error::invalid(
                            "a read-only cudarc borrow was asked for write access",
                        ));
                    }
                }
                Ok(out.expect("run once"))
            }
            _ => f(),
        }
    }

    /// Runs `f` with `self` written and `src` read, both tracked; one lock when they share a
    /// tracker.
    pub(crate) fn writing_reading<R>(
        &self,
        src: &KeepAlive<'_>,
        stream: &CudaStream,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        if self.same_tracker(src) {
            self.writing(stream, f)
        } else {
            self.writing(stream, || src.reading(stream, f))
        }
    }
}
