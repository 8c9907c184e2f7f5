//! Typed 1-D device memory: alignment and length checked once, at the conversion.

use std::marker::PhantomData;
use std::ops::RangeBounds;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use ndarray::Ix1;

use crate::bytes::{DeviceBytes, DeviceBytesMut, RawBytes, resolve_range};
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::view::{DeviceView, DeviceViewMut};

/// [`check_typed`] for the debug checks of spans made from checked parts, without learning
/// the address of cudarc memory (cudarc memory of `T` is aligned for `T`).
fn typed_ok<T: DeviceElement>(raw: &RawBytes<'_>) -> bool {
    if raw.keep.is_cuda() {
        raw.len % std::mem::size_of::<T>() == 0
    } else {
        check_typed::<T>(raw).is_ok()
    }
}

pub(crate) fn check_typed<T: DeviceElement>(raw: &RawBytes<'_>) -> Result<()> {
    let size = std::mem::size_of::<T>();
    let align = std::mem::align_of::<T>() as u64;
    if raw.ptr() % align != 0 {
        return Err(Error::misaligned(format!(
            "device address 0x{:x} is not aligned to {align} bytes as {} needs",
            raw.ptr(),
            T::DTYPE
        )));
    }
    if raw.len % size != 0 {
        return Err(Error::misaligned(format!(
            "{} bytes is not a whole number of {} elements ({size} bytes each)",
            raw.len,
            T::DTYPE
        )));
    }
    Ok(())
}

/// A read-only, typed, contiguous range of device elements.
///
/// A newtype over [`DeviceBytes`] whose alignment and length were checked for `T` once.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let slice = stream.clone_htod(&[1.0f32, 2.0, 3.0, 4.0])?;
/// let span = devspan::DeviceSpan::from_cuda(&slice);
/// let (a, b) = span.split_at(1)?;
/// assert_eq!((a.len(), b.len()), (1, 3));
/// let view = b.into_view(); // a 1-D DeviceView
/// assert_eq!(view.shape(), &[3]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DeviceSpan<'a, T> {
    pub(crate) raw: RawBytes<'a>,
    _t: PhantomData<T>,
}

impl<T> Clone for DeviceSpan<'_, T> {
    fn clone(&self) -> Self {
        DeviceSpan {
            raw: self.raw.clone(),
            _t: PhantomData,
        }
    }
}

/// A writable, typed, contiguous range of device elements; not `Clone`.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let mut slice = stream.alloc_zeros::<u32>(10)?;
/// let span = devspan::DeviceSpanMut::from_cuda_mut(&mut slice);
/// let mut chunks = span.chunks_mut(4)?;
/// assert_eq!(chunks.next().unwrap().len(), 4);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DeviceSpanMut<'a, T> {
    pub(crate) raw: RawBytes<'a>,
    _t: PhantomData<T>,
}

impl<'a, T: DeviceElement> DeviceSpan<'a, T> {
    pub(crate) fn from_raw(raw: RawBytes<'a>) -> Self {
        debug_assert!(typed_ok::<T>(&raw));
        DeviceSpan {
            raw,
            _t: PhantomData,
        }
    }

    /// A span over a whole cudarc slice (tracked by cudarc's events).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<i16>(5)?;
    /// assert_eq!(devspan::DeviceSpan::from_cuda(&slice).len(), 5);
    /// # Ok(()) }
    /// ```
    pub fn from_cuda(slice: &'a CudaSlice<T>) -> Self {
        Self::from_raw(DeviceBytes::from_cuda(slice).raw)
    }

    /// A span over a cudarc view.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<i16>(5)?;
    /// assert_eq!(devspan::DeviceSpan::from_cuda_view(slice.slice(1..)).len(), 4);
    /// # Ok(()) }
    /// ```
    pub fn from_cuda_view(view: CudaView<'a, T>) -> Self {
        Self::from_raw(DeviceBytes::from_cuda_view(view).raw)
    }

    /// Number of elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f64>(7)?;
    /// assert_eq!(devspan::DeviceSpan::from_cuda(&slice).len(), 7);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.raw.len / std::mem::size_of::<T>()
    }

    /// Whether the span has no elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f64>(7)?;
    /// assert!(devspan::DeviceSpan::from_cuda(&slice).slice(7..)?.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    /// Device address of the first element.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f64>(7)?;
    /// let s = devspan::DeviceSpan::from_cuda(&slice);
    /// assert_eq!(s.slice(1..)?.device_ptr(), s.device_ptr() + 8);
    /// # Ok(()) }
    /// ```
    pub fn device_ptr(&self) -> u64 {
        self.raw.ptr()
    }

    /// Device ordinal.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f64>(7)?;
    /// assert_eq!(devspan::DeviceSpan::from_cuda(&slice).device(), 0);
    /// # Ok(()) }
    /// ```
    pub fn device(&self) -> usize {
        self.raw.device
    }

    /// The untyped bytes.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f64>(7)?;
    /// assert_eq!(devspan::DeviceSpan::from_cuda(&slice).as_bytes().len(), 56);
    /// # Ok(()) }
    /// ```
    pub fn as_bytes(&self) -> DeviceBytes<'a> {
        DeviceBytes {
            raw: self.raw.clone(),
        }
    }

    /// Elements `range`, or `Err(OutOfBounds)`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f64>(7)?;
    /// let s = devspan::DeviceSpan::from_cuda(&slice);
    /// assert_eq!(s.slice(2..=4)?.len(), 3);
    /// assert!(s.slice(..8).is_err());
    /// # Ok(()) }
    /// ```
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSpan<'a, T>> {
        let size = std::mem::size_of::<T>();
        let (s, e) = resolve_range(range, self.len())?;
        Ok(DeviceSpan::from_raw(self.raw.sub(s * size, e * size)))
    }

    /// Two spans, `[0, mid)` and `[mid, len)`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f64>(7)?;
    /// let (a, b) = devspan::DeviceSpan::from_cuda(&slice).split_at(7)?;
    /// assert_eq!((a.len(), b.len()), (7, 0));
    /// # Ok(()) }
    /// ```
    pub fn split_at(&self, mid: usize) -> Result<(DeviceSpan<'a, T>, DeviceSpan<'a, T>)> {
        if mid > self.len() {
            return Err(Error::out_of_bounds(format!(
                "split point {mid} is past the end of {} elements",
                self.len()
            )));
        }
        Ok((self.slice(..mid)?, self.slice(mid..)?))
    }

    /// Consecutive spans of `chunk` elements (the last may be shorter); `Err` for `chunk == 0`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f64>(7)?;
    /// let lens: Vec<usize> = devspan::DeviceSpan::from_cuda(&slice).chunks(3)?.map(|c| c.len()).collect();
    /// assert_eq!(lens, [3, 3, 1]);
    /// # Ok(()) }
    /// ```
    pub fn chunks(&self, chunk: usize) -> Result<impl Iterator<Item = DeviceSpan<'a, T>> + 'a> {
        if chunk == 0 {
            return Err(Error::invalid("chunk size must be nonzero"));
        }
        let me = self.clone();
        let len = self.len();
        Ok((0..len.div_ceil(chunk)).map(move |i| {
            let size = std::mem::size_of::<T>();
            let (s, e) = (i * chunk, ((i + 1) * chunk).min(len));
            DeviceSpan::from_raw(me.raw.sub(s * size, e * size))
        }))
    }

    /// The same bytes as elements of `U`, under bytemuck's rules: the address must be aligned for
    /// `U` and the byte length a multiple of `size_of::<U>()`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f32>(6)?;
    /// let s = devspan::DeviceSpan::from_cuda(&slice);
    /// assert_eq!(s.reinterpret::<u16>()?.len(), 12);
    /// assert_eq!(s.reinterpret::<f64>()?.len(), 3);
    /// assert!(s.slice(1..)?.reinterpret::<f64>().is_err());
    /// # Ok(()) }
    /// ```
    pub fn reinterpret<U: DeviceElement>(&self) -> Result<DeviceSpan<'a, U>> {
        check_typed::<U>(&self.raw)?;
        Ok(DeviceSpan::from_raw(self.raw.clone()))
    }

    /// A 1-D view over the whole span.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let slice = stream.alloc_zeros::<f32>(6)?;
    /// let v = devspan::DeviceSpan::from_cuda(&slice).into_view().into_shape_with_order((2, 3))?;
    /// assert_eq!(v.shape(), &[2, 3]);
    /// # Ok(()) }
    /// ```
    pub fn into_view(self) -> DeviceView<'a, T, Ix1> {
        let layout = Layout::of_span(self.len());
        DeviceView::from_parts(self, layout)
    }
}

impl<'a, T: DeviceElement> DeviceSpanMut<'a, T> {
    pub(crate) fn from_raw(raw: RawBytes<'a>) -> Self {
        debug_assert!(typed_ok::<T>(&raw));
        DeviceSpanMut {
            raw,
            _t: PhantomData,
        }
    }

    /// A writable span over a whole cudarc slice.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(5)?;
    /// assert_eq!(devspan::DeviceSpanMut::from_cuda_mut(&mut slice).len(), 5);
    /// # Ok(()) }
    /// ```
    pub fn from_cuda_mut(slice: &'a mut CudaSlice<T>) -> Self {
        Self::from_raw(DeviceBytesMut::from_cuda_mut(slice).raw)
    }

    /// A writable span over a cudarc mutable view.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(5)?;
    /// assert_eq!(devspan::DeviceSpanMut::from_cuda_view_mut(slice.slice_mut(..2)).len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn from_cuda_view_mut(view: CudaViewMut<'a, T>) -> Self {
        Self::from_raw(DeviceBytesMut::from_cuda_view_mut(view).raw)
    }

    /// Number of elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(5)?;
    /// assert_eq!(devspan::DeviceSpanMut::from_cuda_mut(&mut slice).len(), 5);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.raw.len / std::mem::size_of::<T>()
    }

    /// Whether the span has no elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(0)?;
    /// assert!(devspan::DeviceSpanMut::from_cuda_mut(&mut slice).is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    /// Device address of the first element.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(5)?;
    /// assert_ne!(devspan::DeviceSpanMut::from_cuda_mut(&mut slice).device_ptr(), 0);
    /// # Ok(()) }
    /// ```
    pub fn device_ptr(&self) -> u64 {
        self.raw.ptr()
    }

    /// Device ordinal.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(5)?;
    /// assert_eq!(devspan::DeviceSpanMut::from_cuda_mut(&mut slice).device(), 0);
    /// # Ok(()) }
    /// ```
    pub fn device(&self) -> usize {
        self.raw.device
    }

    /// A read-only span of the same elements, borrowing this one.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(5)?;
    /// let s = devspan::DeviceSpanMut::from_cuda_mut(&mut slice);
    /// assert_eq!(s.as_span().len(), 5);
    /// # Ok(()) }
    /// ```
    pub fn as_span(&self) -> DeviceSpan<'_, T> {
        DeviceSpan::from_raw(self.raw.clone())
    }

    /// Turns this span into a read-only one of the same lifetime.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(5)?;
    /// let s = devspan::DeviceSpanMut::from_cuda_mut(&mut slice).into_span();
    /// assert_eq!(s.len(), 5);
    /// # Ok(()) }
    /// ```
    pub fn into_span(self) -> DeviceSpan<'a, T> {
        DeviceSpan::from_raw(self.raw)
    }

    /// A shorter-lived writable span of the same elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u8>(5)?;
    /// let mut s = devspan::DeviceSpanMut::from_cuda_mut(&mut slice);
    /// assert_eq!(s.reborrow().len(), 5);
    /// # Ok(()) }
    /// ```
    pub fn reborrow(&mut self) -> DeviceSpanMut<'_, T> {
        DeviceSpanMut::from_raw(self.raw.clone())
    }

    /// The untyped writable bytes.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u16>(5)?;
    /// assert_eq!(devspan::DeviceSpanMut::from_cuda_mut(&mut slice).into_bytes_mut().len(), 10);
    /// # Ok(()) }
    /// ```
    pub fn into_bytes_mut(self) -> DeviceBytesMut<'a> {
        DeviceBytesMut { raw: self.raw }
    }

    /// Elements `range` as a writable span, consuming this one.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u16>(5)?;
    /// let s = devspan::DeviceSpanMut::from_cuda_mut(&mut slice).slice_mut(1..4)?;
    /// assert_eq!(s.len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn slice_mut(self, range: impl RangeBounds<usize>) -> Result<DeviceSpanMut<'a, T>> {
        let size = std::mem::size_of::<T>();
        let (s, e) = resolve_range(range, self.len())?;
        Ok(DeviceSpanMut::from_raw(self.raw.sub(s * size, e * size)))
    }

    /// Two disjoint writable spans, `[0, mid)` and `[mid, len)`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u16>(5)?;
    /// let (a, b) = devspan::DeviceSpanMut::from_cuda_mut(&mut slice).split_at_mut(2)?;
    /// assert_eq!((a.len(), b.len()), (2, 3));
    /// # Ok(()) }
    /// ```
    pub fn split_at_mut(self, mid: usize) -> Result<(DeviceSpanMut<'a, T>, DeviceSpanMut<'a, T>)> {
        let len = self.len();
        if mid > len {
            return Err(Error::out_of_bounds(format!(
                "split point {mid} is past the end of {len} elements"
            )));
        }
        let size = std::mem::size_of::<T>();
        let a = DeviceSpanMut::from_raw(self.raw.sub(0, mid * size));
        let b = DeviceSpanMut::from_raw(self.raw.sub(mid * size, len * size));
        Ok((a, b))
    }

    /// Disjoint writable spans of `chunk` elements (the last may be shorter).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u16>(5)?;
    /// let n = devspan::DeviceSpanMut::from_cuda_mut(&mut slice).chunks_mut(2)?.count();
    /// assert_eq!(n, 3);
    /// # Ok(()) }
    /// ```
    pub fn chunks_mut(self, chunk: usize) -> Result<impl Iterator<Item = DeviceSpanMut<'a, T>>> {
        if chunk == 0 {
            return Err(Error::invalid("chunk size must be nonzero"));
        }
        let len = self.len();
        let raw = self.raw;
        Ok((0..len.div_ceil(chunk)).map(move |i| {
            let size = std::mem::size_of::<T>();
            let (s, e) = (i * chunk, ((i + 1) * chunk).min(len));
            DeviceSpanMut::from_raw(raw.sub(s * size, e * size))
        }))
    }

    /// The same bytes as writable elements of `U` (alignment and length checked).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// let s = devspan::DeviceSpanMut::from_cuda_mut(&mut slice).reinterpret_mut::<u8>()?;
    /// assert_eq!(s.len(), 16);
    /// # Ok(()) }
    /// ```
    pub fn reinterpret_mut<U: DeviceElement>(self) -> Result<DeviceSpanMut<'a, U>> {
        check_typed::<U>(&self.raw)?;
        Ok(DeviceSpanMut::from_raw(self.raw))
    }

    /// A writable 1-D view over the whole span.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u32>(4)?;
    /// let v = devspan::DeviceSpanMut::from_cuda_mut(&mut slice).into_view_mut();
    /// assert_eq!(v.len(), 4);
    /// # Ok(()) }
    /// ```
    pub fn into_view_mut(self) -> DeviceViewMut<'a, T, Ix1> {
        let layout = Layout::of_span(self.len());
        DeviceViewMut::from_parts(self, layout)
    }
}
