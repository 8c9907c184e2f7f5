//! Conversions between devspan's types and cudarc's.

use cudarc::driver::CudaSlice;
use ndarray::Ix1;

use crate::element::DeviceElement;
use crate::span::{DeviceSpan, DeviceSpanMut};
use crate::view::{DeviceView, DeviceViewMut};

/// The device address of a cudarc slice, for building views from raw parts.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let slice = stream.alloc_zeros::<u8>(4)?;
/// assert_ne!(devspan::interop::cuda_slice_address(&slice), 0);
/// # Ok(()) }
/// ```
pub fn cuda_slice_address<T>(slice: &CudaSlice<T>) -> u64 {
    crate::bytes::address_of(slice)
}

impl<'a, T: DeviceElement> From<&'a CudaSlice<T>> for DeviceView<'a, T, Ix1> {
    /// A 1-D view over a whole cudarc slice.
    fn from(slice: &'a CudaSlice<T>) -> Self {
        DeviceSpan::from_cuda(slice).into_view()
    }
}

impl<'a, T: DeviceElement> From<&'a mut CudaSlice<T>> for DeviceViewMut<'a, T, Ix1> {
    /// A writable 1-D view over a whole cudarc slice.
    fn from(slice: &'a mut CudaSlice<T>) -> Self {
        DeviceSpanMut::from_cuda_mut(slice).into_view_mut()
    }
}

impl<'a, T: DeviceElement> From<&'a CudaSlice<T>> for DeviceSpan<'a, T> {
    fn from(slice: &'a CudaSlice<T>) -> Self {
        DeviceSpan::from_cuda(slice)
    }
}

impl<'a, T: DeviceElement> From<&'a mut CudaSlice<T>> for DeviceSpanMut<'a, T> {
    fn from(slice: &'a mut CudaSlice<T>) -> Self {
        DeviceSpanMut::from_cuda_mut(slice)
    }
}

/// An n-d view of a cudarc slice with the given shape in standard layout; `Err` if the shape's
/// element count differs from the slice's length.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let slice = stream.alloc_zeros::<f32>(12)?;
/// let v = devspan::interop::view_of(&slice, (3, 4))?;
/// assert_eq!(v.shape(), &[3, 4]);
/// # Ok(()) }
/// ```
pub fn view_of<T: DeviceElement, Sh: ndarray::IntoDimension>(
    slice: &CudaSlice<T>,
    shape: Sh,
) -> crate::Result<DeviceView<'_, T, Sh::Dim>> {
    DeviceSpan::from_cuda(slice)
        .into_view()
        .into_shape_with_order(shape)
}

/// A writable n-d view of a cudarc slice in standard layout.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let mut slice = stream.alloc_zeros::<f32>(12)?;
/// let v = devspan::interop::view_mut_of(&mut slice, (2, 6))?;
/// assert_eq!(v.strides(), &[6, 1]);
/// # Ok(()) }
/// ```
pub fn view_mut_of<T: DeviceElement, Sh: ndarray::IntoDimension>(
    slice: &mut CudaSlice<T>,
    shape: Sh,
) -> crate::Result<DeviceViewMut<'_, T, Sh::Dim>> {
    DeviceSpanMut::from_cuda_mut(slice)
        .into_view_mut()
        .into_shape_with_order(shape)
}

/// An n-d view as one by-value kernel parameter: the address of element zero, then `N` axis
/// lengths, then `N` strides in elements (signed). `#[repr(C)]`, so a CUDA kernel receives it as
///
/// ```c
/// struct View2 { float *ptr; unsigned long long shape[2]; long long strides[2]; };
/// __global__ void scale(View2 v, float factor);
/// ```
///
/// and a PTX kernel as `.param .align 8 .b8 v[8 + 16 * N]`. Views of fewer than `N` axes are
/// padded with leading axes of length 1 and stride 0.
///
/// ```
/// let kv = devspan::interop::KernelView::<2> { ptr: 0x1000, shape: [3, 4], strides: [4, 1] };
/// assert_eq!(std::mem::size_of_val(&kv), 40);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelView<const N: usize> {
    /// Device address of the element at index zero.
    pub ptr: u64,
    /// Axis lengths.
    pub shape: [u64; N],
    /// Strides in elements.
    pub strides: [i64; N],
}

// SAFETY: `KernelView` is `#[repr(C)]` plain data (integers only), valid to copy byte for byte
// into a kernel's parameter block.
unsafe impl<const N: usize> cudarc::driver::DeviceRepr for KernelView<N> {}

impl<S: crate::SpanData, D: ndarray::Dimension> crate::DeviceBase<S, D> {
    /// The view as a [`KernelView`] of `N` axes; `Err(InvalidAxis)` if the view has more.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// let kv = a.slice(s![.., ..;-2]).kernel_view::<2>()?;
    /// assert_eq!((kv.shape, kv.strides), ([4, 3], [6, -2]));
    /// let kv3 = a.view().kernel_view::<3>()?;
    /// assert_eq!((kv3.shape, kv3.strides), ([1, 4, 6], [0, 6, 1]));
    /// # Ok(()) }
    /// ```
    pub fn kernel_view<const N: usize>(&self) -> crate::Result<KernelView<N>> {
        let nd = self.ndim();
        if nd > N {
            return Err(crate::Error::axis(format!(
                "a {nd}-d view with shape {:?} does not fit a KernelView of {N} axes",
                self.shape()
            )));
        }
        let mut kv = KernelView {
            ptr: self.device_ptr(),
            shape: [1; N],
            strides: [0; N],
        };
        for (k, (&n, &s)) in self.shape().iter().zip(self.strides()).enumerate() {
            kv.shape[N - nd + k] = n as u64;
            kv.strides[N - nd + k] = s as i64;
        }
        Ok(kv)
    }

    /// Runs `f`, which enqueues the user's own work on `stream` that **reads** this view (e.g. a
    /// kernel launch taking the [`KernelView`]), inside the view's stream synchronisation: for
    /// views over cudarc memory, `stream` first waits for earlier writes and the read is recorded
    /// after `f` returns, as cudarc does for its own slices; views over owner-backed memory
    /// record it so that the owner is released only after it. No lock is held while `f` runs:
    /// `f` may use other views of the same memory (clones, slices, split halves).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// a.t().with_kernel_view::<2, _>(&stream, |kv| {
    ///     // launch a kernel that reads `kv` on `stream` here
    ///     Ok(kv.shape)
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn with_kernel_view<const N: usize, R>(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        f: impl FnOnce(KernelView<N>) -> crate::Result<R>,
    ) -> crate::Result<R> {
        crate::device::check_stream(stream, self.device(), "the view")?;
        let kv = self.kernel_view::<N>()?;
        self.raw().keep.reading(stream, || f(kv))
    }
}

impl<S: crate::SpanDataMut, D: ndarray::Dimension> crate::DeviceBase<S, D> {
    /// Runs `f`, which enqueues the user's own work on `stream` that **writes** this array or view, inside
    /// its stream synchronisation (for cudarc memory: wait for earlier reads and writes, record a
    /// write afterwards; owner-backed memory: recorded so that the owner is released only after
    /// it). Writable views never reach an element twice, so a kernel that writes each index once
    /// writes each element once. No lock is held while `f` runs.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, (4, 6))?;
    /// a.with_kernel_view_mut::<2, _>(&stream, |kv| {
    ///     // launch a kernel that writes through `kv` on `stream` here
    ///     Ok(kv.ptr)
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn with_kernel_view_mut<const N: usize, R>(
        &mut self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        f: impl FnOnce(KernelView<N>) -> crate::Result<R>,
    ) -> crate::Result<R> {
        crate::device::check_stream(stream, self.device(), "the view")?;
        let kv = self.kernel_view::<N>()?;
        self.raw().keep.writing(stream, || f(kv))
    }
}

/// A CUDA header (`devspan.cuh`) for kernels that take devspan views: `devspan_view<T, N>`,
/// the device-side twin of [`KernelView<N>`] (same layout), with `size()`, `offset(index)`,
/// `offset_of_linear(i)`, `operator[](i)` (the `i`-th element in row-major order, at any
/// strides) and `at(index)`. Prepend it to an NVRTC source, or write it to a file and
/// `#include "devspan.cuh"`.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use cudarc::driver::{LaunchConfig, PushKernelArg};
/// let stream = devspan::default_stream(0)?;
/// let src = format!(
///     "{}\nextern \"C\" __global__ void twice(devspan_view<float, 2> v) {{\n\
///      for (unsigned long long i = blockIdx.x * 256ull + threadIdx.x; i < v.size(); i += gridDim.x * 256ull) v[i] *= 2.0f;\n}}",
///     devspan::interop::DEVICE_HEADER
/// );
/// let ptx = cudarc::nvrtc::compile_ptx(src).expect("NVRTC");
/// let f = stream.context().load_module(ptx)?.load_function("twice")?;
/// let mut a = devspan::DeviceArray::<f32, _>::ones(&stream, (4, 6))?;
/// let mut v = a.slice_mut(ndarray::s![.., ..;-2]);
/// v.with_kernel_view_mut::<2, _>(&stream, |kv| {
///     let mut b = stream.launch_builder(&f);
///     b.arg(&kv);
///     // SAFETY: `twice` takes one devspan_view<float, 2> and touches only its elements.
///     unsafe { b.launch(LaunchConfig::for_num_elems(12))? };
///     Ok(())
/// })?;
/// assert_eq!(a.to_host()?[[0, 5]], 2.0);
/// # Ok(()) }
/// ```
pub const DEVICE_HEADER: &str = include_str!("devspan.cuh");
