//! Device operations on views: fill, copy (`assign`), fused copy + cast (`assign_cast`), and the
//! conveniences returning new arrays (`to_contiguous`, `cast`).

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::Dimension;

use crate::array::DeviceArray;
use crate::device::check_stream;
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::plan::{self, PlanOptions, PlanRef};
use crate::span::{DeviceSpan, DeviceSpanMut};
use crate::view::{DeviceBase, SpanData, SpanDataMut, no_stream};
use devspan_kernels::abi::GridOptions;

/// Byte range `[lo, hi)` reached by a view, or `None` when empty.
fn byte_reach<S: SpanData, D: Dimension>(v: &DeviceBase<S, D>) -> Option<(u64, u64)> {
    let size = std::mem::size_of::<S::Elem>() as u64;
    let (lo, hi) = v.layout.reach()?;
    let base = v.raw().ptr();
    Some((base + lo as u64 * size, base + (hi as u64 + 1) * size))
}

/// `Ok(true)` when the copy is a no-op (identical element sets of the same type, or of
/// integer types of one size, whose cast keeps every bit), `Ok(false)`
/// when the operands do not overlap, `Err(Aliasing)` otherwise.
fn check_overlap<S: SpanData, R: SpanData, D: Dimension>(
    dst: &DeviceBase<S, D>,
    src: &DeviceBase<R, D>,
) -> Result<bool> {
    if dst.device() != src.device() {
        return Ok(false);
    }
    let (Some((a0, a1)), Some((b0, b1))) = (byte_reach(dst), byte_reach(src)) else {
        return Ok(false);
    };
    if a1 <= b0 || b1 <= a0 {
        return Ok(false);
    }
    if R::Elem::DTYPE.same_bits(S::Elem::DTYPE)
        && dst.device_ptr() == src.device_ptr()
        && dst.strides() == src.strides()
    {
        return Ok(true);
    }
    Err(Error::aliasing(format!(
        "source (shape {:?}, strides {:?}, bytes 0x{b0:x}..0x{b1:x}) and destination (strides {:?}, bytes 0x{a0:x}..0x{a1:x}) overlap",
        src.shape(),
        src.strides(),
        dst.strides()
    )))
}

/// The implementations, on writable arrays and views (called on them directly: a re-borrowed
/// view would cost a keep-alive handle per call).
impl<S: SpanDataMut, D: Dimension> DeviceBase<S, D> {
    pub(crate) fn fill_with(
        &mut self,
        stream: &Arc<CudaStream>,
        value: S::Elem,
        opt: PlanOptions,
    ) -> Result<()> {
        check_stream(stream, self.device(), "the destination view")?;
        if self.is_empty() {
            return Ok(());
        }
        // Planned once the access is prepared: that is where the address of cudarc memory is
        // learnt, with no driver call of its own.
        self.raw().keep.writing(stream, || {
            let p = plan::plan_fill(
                self.device_ptr(),
                self.shape(),
                self.strides(),
                std::mem::size_of::<S::Elem>(),
                value.to_bits_u64(),
                opt,
            )?;
            // SAFETY: the plan comes from this view's validated layout (invariants 1-3 keep
            // every element in the span, which the keep-alive holds), and `&mut self` excludes
            // other writers through devspan.
            unsafe { crate::kernels::execute(&p, stream, GridOptions::default()) }
        })
    }

    pub(crate) fn assign_cast_with<S2: SpanData, E: Dimension>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &DeviceBase<S2, E>,
        opt: PlanOptions,
        grid: GridOptions,
    ) -> Result<()> {
        check_stream(stream, self.device(), "the destination view")?;
        let src = src.broadcast(self.dim()).map_err(|e| {
            Error::shape(format!(
                "source of shape {:?} cannot be assigned to destination of shape {:?}: {e}",
                src.shape(),
                self.shape()
            ))
        })?;
        if src.device() != self.device() || crate::peer::forced().is_some() {
            if check_overlap(self, &src)? {
                return Ok(());
            }
            return crate::peer::assign_cast_across(
                &mut self.view_mut(),
                stream,
                &src.view(),
                opt,
                grid,
            );
        }
        self.assign_cast_local(stream, &src, opt, grid)
    }

    /// The plan of `assign_cast(src)` into this view (`src` already broadcast to its shape),
    /// or the one kept from an earlier call with the same operands ([`plan::plan_copy_memo`]).
    pub(crate) fn copy_plan<R: SpanData>(
        &self,
        src: &DeviceBase<R, D>,
        opt: PlanOptions,
    ) -> Result<PlanRef> {
        plan::plan_copy_memo(
            self.device_ptr(),
            self.strides(),
            S::Elem::DTYPE,
            src.device_ptr(),
            src.strides(),
            R::Elem::DTYPE,
            self.shape(),
            opt,
        )
    }

    /// [`assign_cast_with`](Self::assign_cast_with) for a source on `stream`'s device, already
    /// broadcast to this shape.
    pub(crate) fn assign_cast_local<R: SpanData>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &DeviceBase<R, D>,
        opt: PlanOptions,
        grid: GridOptions,
    ) -> Result<()> {
        check_stream(stream, src.device(), "the source view")?;
        if self.is_empty() {
            return Ok(());
        }
        // Checked and planned once the accesses are prepared: that is where the addresses of
        // cudarc memory are learnt, with no driver call of their own. An operation refused
        // there (overlapping operands) has enqueued only the waits and records of its access.
        self.raw()
            .keep
            .writing_reading(&src.raw().keep, stream, || {
                if check_overlap(self, src)? {
                    return Ok(());
                }
                let p = self.copy_plan(src, opt)?;
                // SAFETY: both layouts are validated against their spans (kept alive by their
                // keep-alives for the borrow's duration), the operands do not overlap (checked
                // above) and `&mut self` excludes other writers through devspan.
                unsafe { crate::kernels::execute(&p, stream, grid) }
            })
    }
}

/// Writing operations, on mutable arrays and views. The plain form runs on the stream of the
/// memory it writes ([`stream`](DeviceBase::stream)); the `_on` form on the stream given.
impl<S: SpanDataMut, D: Dimension> DeviceBase<S, D> {
    /// Sets every element to `value`. Works for any layout (strided, negative strides);
    /// contiguous memory uses the driver's memset or a vectorised kernel.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// a.slice_mut(s![.., ..;2]).fill(1.5)?;
    /// let h = a.to_host()?;
    /// assert_eq!(h[[3, 2]], 1.5);
    /// assert_eq!(h[[3, 3]], 0.0);
    /// # Ok(()) }
    /// ```
    pub fn fill(&mut self, value: S::Elem) -> Result<()> {
        let stream = self.own_stream("fill")?;
        self.fill_on(&stream, value)
    }

    /// [`fill`](Self::fill) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let other = devspan::new_stream(0)?;
    /// let mut a = devspan::DeviceArray::<i64, _>::zeros(&stream, 5)?;
    /// a.fill_on(&other, -7)?;
    /// assert_eq!(a.to_host_on(&other)?, ndarray::arr1(&[-7i64; 5]));
    /// # Ok(()) }
    /// ```
    pub fn fill_on(&mut self, stream: &Arc<CudaStream>, value: S::Elem) -> Result<()> {
        self.fill_with(stream, value, PlanOptions::default())
    }

    /// Copies `src` (an array or a view of any layout, on this device or another: see the
    /// crate docs, "Devices") into `self` element by element. `src` is broadcast to this shape
    /// (ndarray's rules). Overlapping source and destination give `Err(Aliasing)` unless they
    /// are the very same elements.
    ///
    /// A copy from another device changes process-wide driver state where the destination's
    /// device can read the source's: it enables peer access from the destination's primary
    /// context to the source's (for the life of both, for every user of them), and, for a
    /// source from a stream-ordered memory pool, grants the destination's device read-write
    /// access to that pool (every allocation of the pool, whoever made it). This holds for
    /// every copy that reaches [`assign`](Self::assign): `assign_on`, `assign_cast(_on)`, and
    /// `to_contiguous_on` / `cast_on` with a stream of another device.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::array;
    /// let stream = devspan::default_stream(0)?;
    /// let src = devspan::DeviceArray::from_host(&stream, &array![[1u8, 2, 3], [4, 5, 6]])?;
    /// let mut dst = devspan::DeviceArray::<u8, _>::zeros(&stream, (3, 2))?;
    /// dst.assign(&src.t())?;
    /// assert_eq!(dst.to_host()?, array![[1, 4], [2, 5], [3, 6]]);
    /// # Ok(()) }
    /// ```
    pub fn assign<S2: SpanData<Elem = S::Elem>, E: Dimension>(
        &mut self,
        src: &DeviceBase<S2, E>,
    ) -> Result<()> {
        let stream = self.own_stream("assign")?;
        self.assign_cast_on(&stream, src)
    }

    /// [`assign`](Self::assign) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let src = devspan::DeviceArray::<u8, _>::zeros(&stream, 3)?;
    /// let mut dst = devspan::DeviceArray::<u8, _>::zeros(&stream, (2, 3))?;
    /// dst.assign_on(&stream, &src)?; // broadcast along the first axis
    /// # Ok(()) }
    /// ```
    pub fn assign_on<S2: SpanData<Elem = S::Elem>, E: Dimension>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &DeviceBase<S2, E>,
    ) -> Result<()> {
        self.assign_cast_on(stream, src)
    }

    /// Copies `src` into `self` converting each element as Rust's `as` does (float -> int
    /// truncates toward zero and saturates, NaN -> 0; int -> float and narrowing float
    /// conversions round to nearest even; `f16`/`bf16` as the `half` crate converts).
    /// Broadcasting and aliasing rules as [`assign`](Self::assign).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::array;
    /// let stream = devspan::default_stream(0)?;
    /// let src = devspan::DeviceArray::from_host(&stream, &array![-1.5f32, 2.7, 300.0])?;
    /// let mut dst = devspan::DeviceArray::<u8, _>::zeros(&stream, 3)?;
    /// dst.assign_cast(&src)?;
    /// assert_eq!(dst.to_host()?, array![0u8, 2, 255]);
    /// # Ok(()) }
    /// ```
    pub fn assign_cast<S2: SpanData, E: Dimension>(
        &mut self,
        src: &DeviceBase<S2, E>,
    ) -> Result<()> {
        let stream = self.own_stream("assign_cast")?;
        self.assign_cast_on(&stream, src)
    }

    /// [`assign_cast`](Self::assign_cast) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let src = devspan::DeviceArray::<i32, _>::zeros(&stream, 4)?;
    /// let mut dst = devspan::DeviceArray::<f64, _>::zeros(&stream, 4)?;
    /// dst.assign_cast_on(&stream, &src)?;
    /// # Ok(()) }
    /// ```
    pub fn assign_cast_on<S2: SpanData, E: Dimension>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &DeviceBase<S2, E>,
    ) -> Result<()> {
        self.assign_cast_with(stream, src, PlanOptions::default(), GridOptions::default())
    }
}

/// Operations making new arrays, on arrays and views of every kind. The plain form runs on the
/// stream of the memory it reads ([`stream`](DeviceBase::stream)), and the new array is
/// allocated there; the `_on` form on the stream given.
impl<S: SpanData, D: Dimension> DeviceBase<S, D> {
    /// A new standard-layout array with these elements (ndarray's `as_standard_layout` /
    /// `to_owned`).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{s, Array2};
    /// let stream = devspan::default_stream(0)?;
    /// let host = Array2::from_shape_fn((64, 48), |(i, j)| (i * 48 + j) as f32);
    /// let a = devspan::DeviceArray::from_host(&stream, &host)?;
    /// let t = a.slice(s![..;-1, 5..]).t().to_contiguous()?;
    /// assert!(t.is_standard_layout());
    /// assert_eq!(t.to_host()?, host.slice(s![..;-1, 5..]).t());
    /// # Ok(()) }
    /// ```
    pub fn to_contiguous(&self) -> Result<DeviceArray<S::Elem, D>> {
        self.cast::<S::Elem>()
    }

    /// [`to_contiguous`](Self::to_contiguous) on `stream`, where the new array is allocated: a
    /// stream of another device makes the copy on that device.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// assert!(a.t().to_contiguous_on(&stream)?.is_standard_layout());
    /// # Ok(()) }
    /// ```
    pub fn to_contiguous_on(&self, stream: &Arc<CudaStream>) -> Result<DeviceArray<S::Elem, D>> {
        self.cast_on::<S::Elem>(stream)
    }

    /// A copy that the caller owns, in standard layout, made on the memory's stream
    /// (ndarray's `to_owned`; the same as [`to_contiguous`](Self::to_contiguous)). On a
    /// [`DeviceView`](crate::DeviceView), which is `Clone`, this inherent method is what
    /// `view.to_owned()` calls, rather than `ToOwned`, which would return another view.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let copy: devspan::DeviceArray<f32, _> = a.t().to_owned()?;
    /// assert_eq!(copy.strides(), &[2, 1]);
    /// # Ok(()) }
    /// ```
    pub fn to_owned(&self) -> Result<DeviceArray<S::Elem, D>> {
        self.to_contiguous()
    }

    /// A device copy in standard layout, or the error that [`Clone`] on an array panics with.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let b = a.try_clone()?;
    /// assert_eq!(b.to_host()?, a.to_host()?);
    /// # Ok(()) }
    /// ```
    pub fn try_clone(&self) -> Result<DeviceArray<S::Elem, D>> {
        self.to_contiguous()
    }

    /// A new standard-layout array of these elements converted to `U` (the conversions of
    /// [`assign_cast`](Self::assign_cast)).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::array;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::from_host(&stream, &array![1.0f32, 2.5, -3.0])?;
    /// let h = a.cast::<half::f16>()?;
    /// assert_eq!(h.to_host()?[1], half::f16::from_f32(2.5));
    /// # Ok(()) }
    /// ```
    pub fn cast<U: DeviceElement>(&self) -> Result<DeviceArray<U, D>> {
        let stream = self.own_stream("cast")?;
        self.cast_on::<U>(&stream)
    }

    /// [`cast`](Self::cast) on `stream` (the new array is allocated there). A stream of another
    /// device than this memory's makes the copy on that device (see the crate docs, "Devices").
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<u8, _>::zeros(&stream, 3)?;
    /// assert_eq!(a.cast_on::<f64>(&stream)?.shape(), &[3]);
    /// # Ok(()) }
    /// ```
    pub fn cast_on<U: DeviceElement>(&self, stream: &Arc<CudaStream>) -> Result<DeviceArray<U, D>> {
        // SAFETY: `assign_cast` below writes every element of the new array before it is
        // returned; on error the array is dropped unread.
        let mut out = unsafe { DeviceArray::<U, D>::uninit(stream, self.dim())? };
        out.assign_cast_on(stream, self)?;
        Ok(out)
    }
}

impl<'a, T: DeviceElement> DeviceSpanMut<'a, T> {
    /// Sets every element to `value`, on the memory's stream (see
    /// [`DeviceBase::stream`]).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u16>(10)?;
    /// devspan::DeviceSpanMut::from_cuda_mut(&mut slice).fill(3)?;
    /// assert_eq!(stream.clone_dtoh(&slice)?, vec![3u16; 10]);
    /// # Ok(()) }
    /// ```
    pub fn fill(&mut self, value: T) -> Result<()> {
        self.reborrow().into_view_mut().fill(value)
    }

    /// [`fill`](Self::fill) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u16>(10)?;
    /// devspan::DeviceSpanMut::from_cuda_mut(&mut slice).fill_on(&stream, 3)?;
    /// assert_eq!(stream.clone_dtoh(&slice)?, vec![3u16; 10]);
    /// # Ok(()) }
    /// ```
    pub fn fill_on(&mut self, stream: &Arc<CudaStream>, value: T) -> Result<()> {
        self.reborrow().into_view_mut().fill_on(stream, value)
    }

    /// Copies `src` (same length) into this span, on the memory's stream, converting elements
    /// to `T` (the conversions of [`DeviceBase::assign_cast`]).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = stream.clone_htod(&[1u8, 2])?;
    /// let mut b = stream.alloc_zeros::<f32>(2)?;
    /// devspan::DeviceSpanMut::from_cuda_mut(&mut b).copy_from(&devspan::DeviceSpan::from_cuda(&a))?;
    /// assert_eq!(stream.clone_dtoh(&b)?, vec![1.0, 2.0]);
    /// # Ok(()) }
    /// ```
    pub fn copy_from<U: DeviceElement>(&mut self, src: &DeviceSpan<'_, U>) -> Result<()> {
        let stream = self
            .raw
            .keep
            .stream()
            .ok_or_else(|| no_stream("span", "copy_from"))?;
        self.copy_from_on(&stream, src)
    }

    /// [`copy_from`](Self::copy_from) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = stream.clone_htod(&[1i32, -2, 3])?;
    /// let mut b = stream.alloc_zeros::<f64>(3)?;
    /// devspan::DeviceSpanMut::from_cuda_mut(&mut b).copy_from_on(&stream, &devspan::DeviceSpan::from_cuda(&a))?;
    /// assert_eq!(stream.clone_dtoh(&b)?, vec![1.0, -2.0, 3.0]);
    /// # Ok(()) }
    /// ```
    pub fn copy_from_on<U: DeviceElement>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &DeviceSpan<'_, U>,
    ) -> Result<()> {
        if src.len() != self.len() {
            return Err(Error::shape(format!(
                "cannot copy a span of {} elements into a span of {}",
                src.len(),
                self.len()
            )));
        }
        self.reborrow()
            .into_view_mut()
            .assign_cast_on(stream, &src.clone().into_view())
    }
}

#[cfg(test)]
mod tests {
    use super::check_overlap;
    use crate::{DeviceBytes, DeviceBytesMut};
    use half::{bf16, f16};

    /// A copy onto the same elements is a no-op where the cast keeps every bit (the same type,
    /// integer types of one size) and refused as an overlap otherwise.
    #[test]
    fn copies_onto_the_same_elements() {
        // Addresses only: nothing here reads or writes device memory.
        const PTR: u64 = 0x7000_0000;
        // SAFETY: the handles are never used for a device operation.
        let (dst, src) = unsafe {
            (
                DeviceBytesMut::from_raw_parts_borrowed(PTR, 64, 0).unwrap(),
                DeviceBytes::from_raw_parts_borrowed(PTR, 64, 0).unwrap(),
            )
        };
        let d = dst.typed_mut::<u8>().unwrap().into_view_mut();
        assert!(check_overlap(&d, &src.clone().typed::<u8>().unwrap().into_view()).unwrap());
        assert!(check_overlap(&d, &src.clone().typed::<i8>().unwrap().into_view()).unwrap());
        // The same bytes under another element size, or a cast that changes bits: refused.
        let e = check_overlap(&d, &src.clone().typed::<u16>().unwrap().into_view());
        assert!(e.is_err());
        // SAFETY: as above.
        let dst = unsafe { DeviceBytesMut::from_raw_parts_borrowed(PTR, 64, 0).unwrap() };
        let d = dst.typed_mut::<f16>().unwrap().into_view_mut();
        let e = check_overlap(&d, &src.clone().typed::<bf16>().unwrap().into_view());
        assert_eq!(e.unwrap_err().kind(), &crate::ErrorKind::Aliasing);
        assert!(check_overlap(&d, &src.typed::<f16>().unwrap().into_view()).unwrap());
    }
}
