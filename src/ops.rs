//! Device operations on views: fill, copy (`assign`), fused copy + cast (`assign_cast`), and the
//! conveniences returning new arrays (`to_contiguous`, `cast`).

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::Dimension;

use crate::array::DeviceArray;
use crate::device::check_stream;
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::kernels::permute::GridOptions;
use crate::plan::{self, Plan, PlanOptions};
use crate::span::{DeviceSpan, DeviceSpanMut};
use crate::view::{DeviceView, DeviceViewMut, SpanData, ViewBase};

/// Byte range `[lo, hi)` reached by a view, or `None` when empty.
fn byte_reach<S: SpanData, D: Dimension>(v: &ViewBase<S, D>) -> Option<(u64, u64)> {
    let size = std::mem::size_of::<S::Elem>() as u64;
    let (lo, hi) = v.layout.reach()?;
    let base = v.raw().ptr;
    Some((base + lo as u64 * size, base + (hi as u64 + 1) * size))
}

/// `Ok(true)` when the copy is a no-op (identical element sets of the same type), `Ok(false)`
/// when the operands do not overlap, `Err(Aliasing)` otherwise.
fn check_overlap<T: DeviceElement, U: DeviceElement, D: Dimension>(
    dst: &DeviceViewMut<'_, T, D>,
    src: &DeviceView<'_, U, D>,
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
    if T::DTYPE == U::DTYPE
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

impl<'a, T: DeviceElement, D: Dimension> DeviceViewMut<'a, T, D> {
    fn plan_opts() -> PlanOptions {
        PlanOptions::default()
    }

    /// Sets every element to `value`, on `stream`. Works for any layout (strided, negative
    /// strides); contiguous views use the driver's memset or a vectorised kernel.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// a.view_mut().slice_mut(s![.., ..;2]).fill(&stream, 1.5)?;
    /// let h = a.to_host(&stream)?;
    /// assert_eq!(h[[3, 2]], 1.5);
    /// assert_eq!(h[[3, 3]], 0.0);
    /// # Ok(()) }
    /// ```
    pub fn fill(&mut self, stream: &Arc<CudaStream>, value: T) -> Result<()> {
        self.fill_with(stream, value, Self::plan_opts())
    }

    pub(crate) fn fill_with(
        &mut self,
        stream: &Arc<CudaStream>,
        value: T,
        opt: PlanOptions,
    ) -> Result<()> {
        check_stream(stream, self.device(), "the destination view")?;
        let p = plan::plan_fill(
            self.device_ptr(),
            self.shape(),
            self.strides(),
            std::mem::size_of::<T>(),
            value.to_bits_u64(),
            opt,
        )?;
        if matches!(p, Plan::Nothing) {
            return Ok(());
        }
        self.raw().keep.writing(stream, || {
            // SAFETY: the plan comes from this view's validated layout (invariants 1-3 keep
            // every element in the span, which the keep-alive holds), and `&mut self` excludes
            // other writers through devspan.
            unsafe { crate::kernels::execute(&p, stream, GridOptions::default()) }
        })
    }

    /// Copies `src` into this view element by element, on `stream`. `src` may have any layout
    /// and is broadcast to this view's shape (ndarray's rules). Overlapping source and
    /// destination give `Err(Aliasing)` unless they are the very same elements.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::array;
    /// let stream = devspan::default_stream(0)?;
    /// let src = devspan::DeviceArray::from_host(&stream, &array![[1u8, 2, 3], [4, 5, 6]].view())?;
    /// let mut dst = devspan::DeviceArray::<u8, _>::zeros(&stream, (3, 2))?;
    /// dst.view_mut().assign(&stream, &src.view().t())?;
    /// assert_eq!(dst.to_host(&stream)?, array![[1, 4], [2, 5], [3, 6]]);
    /// # Ok(()) }
    /// ```
    pub fn assign<E: Dimension>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &DeviceView<'_, T, E>,
    ) -> Result<()> {
        self.assign_cast(stream, src)
    }

    /// Copies `src` into this view converting each element to `T` as Rust's `as` does
    /// (float -> int truncates toward zero and saturates, NaN -> 0; int -> float and narrowing
    /// float conversions round to nearest even; `f16`/`bf16` as the `half` crate converts).
    /// Broadcasting and aliasing rules as [`assign`](Self::assign).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::array;
    /// let stream = devspan::default_stream(0)?;
    /// let src = devspan::DeviceArray::from_host(&stream, &array![-1.5f32, 2.7, 300.0].view())?;
    /// let mut dst = devspan::DeviceArray::<u8, _>::zeros(&stream, 3)?;
    /// dst.view_mut().assign_cast(&stream, &src.view())?;
    /// assert_eq!(dst.to_host(&stream)?, array![0u8, 2, 255]);
    /// # Ok(()) }
    /// ```
    pub fn assign_cast<U: DeviceElement, E: Dimension>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &DeviceView<'_, U, E>,
    ) -> Result<()> {
        self.assign_cast_with(stream, src, Self::plan_opts(), GridOptions::default())
    }

    pub(crate) fn assign_cast_with<U: DeviceElement, E: Dimension>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &DeviceView<'_, U, E>,
        opt: PlanOptions,
        grid: GridOptions,
    ) -> Result<()> {
        check_stream(stream, self.device(), "the destination view")?;
        check_stream(stream, src.device(), "the source view")?;
        let src = src.broadcast(self.dim()).map_err(|e| {
            Error::shape(format!(
                "source of shape {:?} cannot be assigned to destination of shape {:?}: {e}",
                src.shape(),
                self.shape()
            ))
        })?;
        if check_overlap(self, &src)? {
            return Ok(());
        }
        let p = plan::plan_copy(
            self.device_ptr(),
            self.strides(),
            T::DTYPE,
            src.device_ptr(),
            src.strides(),
            U::DTYPE,
            self.shape(),
            opt,
        )?;
        if matches!(p, Plan::Nothing) {
            return Ok(());
        }
        self.raw()
            .keep
            .writing_reading(&src.raw().keep, stream, || {
                // SAFETY: both layouts are validated against their spans (kept alive by their
                // keep-alives for the borrow's duration), the operands do not overlap (checked
                // above) and `&mut self` excludes other writers through devspan.
                unsafe { crate::kernels::execute(&p, stream, grid) }
            })
    }
}

impl<'a, T: DeviceElement, D: Dimension> DeviceView<'a, T, D> {
    /// A new standard-layout array with this view's elements, on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{s, Array2};
    /// let stream = devspan::default_stream(0)?;
    /// let host = Array2::from_shape_fn((64, 48), |(i, j)| (i * 48 + j) as f32);
    /// let a = devspan::DeviceArray::from_host(&stream, &host.view())?;
    /// let t = a.view().slice(s![..;-1, 5..]).t().to_contiguous(&stream)?;
    /// assert_eq!(t.to_host(&stream)?, host.slice(s![..;-1, 5..]).t());
    /// # Ok(()) }
    /// ```
    pub fn to_contiguous(&self, stream: &Arc<CudaStream>) -> Result<DeviceArray<T, D>> {
        self.cast::<T>(stream)
    }

    /// A new standard-layout array of this view's elements converted to `U` (the conversions
    /// of [`DeviceViewMut::assign_cast`]).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::array;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::from_host(&stream, &array![1.0f32, 2.5, -3.0].view())?;
    /// let h = a.view().cast::<half::f16>(&stream)?;
    /// assert_eq!(h.to_host(&stream)?[1], half::f16::from_f32(2.5));
    /// # Ok(()) }
    /// ```
    pub fn cast<U: DeviceElement>(&self, stream: &Arc<CudaStream>) -> Result<DeviceArray<U, D>> {
        check_stream(stream, self.device(), "the source view")?;
        // SAFETY: `assign_cast` below writes every element of the new array before it is
        // returned; on error the array is dropped unread.
        let mut out = unsafe { DeviceArray::<U, D>::uninit(stream, self.dim())? };
        out.view_mut().assign_cast(stream, self)?;
        Ok(out)
    }
}

impl<T: DeviceElement, D: Dimension> DeviceArray<T, D> {
    /// Sets every element to `value`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<i64, _>::zeros(&stream, 5)?;
    /// a.fill(&stream, -7)?;
    /// assert_eq!(a.to_host(&stream)?, ndarray::arr1(&[-7i64; 5]));
    /// # Ok(()) }
    /// ```
    pub fn fill(&mut self, stream: &Arc<CudaStream>, value: T) -> Result<()> {
        self.view_mut().fill(stream, value)
    }
}

impl<'a, T: DeviceElement> DeviceSpanMut<'a, T> {
    /// Sets every element to `value`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut slice = stream.alloc_zeros::<u16>(10)?;
    /// devspan::DeviceSpanMut::from_cuda_mut(&mut slice).fill(&stream, 3)?;
    /// assert_eq!(stream.clone_dtoh(&slice)?, vec![3u16; 10]);
    /// # Ok(()) }
    /// ```
    pub fn fill(&mut self, stream: &Arc<CudaStream>, value: T) -> Result<()> {
        self.reborrow().into_view_mut().fill(stream, value)
    }

    /// Copies `src` (same length) into this span, converting elements to `T` (the conversions of
    /// [`DeviceViewMut::assign_cast`]).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = stream.clone_htod(&[1i32, -2, 3])?;
    /// let mut b = stream.alloc_zeros::<f64>(3)?;
    /// devspan::DeviceSpanMut::from_cuda_mut(&mut b).copy_from(&stream, &devspan::DeviceSpan::from_cuda(&a))?;
    /// assert_eq!(stream.clone_dtoh(&b)?, vec![1.0, -2.0, 3.0]);
    /// # Ok(()) }
    /// ```
    pub fn copy_from<U: DeviceElement>(
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
            .assign_cast(stream, &src.clone().into_view())
    }
}
