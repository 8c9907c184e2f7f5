//! `devspan.Tensor`: a strided view over CUDA memory that any DLPack producer (or devspan) owns.

use std::sync::{Arc, Mutex, MutexGuard};

use devspan::cudarc::driver::{CudaContext, CudaStream};
use devspan::ndarray::IxDyn;
use pyo3::exceptions::{PyAttributeError, PyBufferError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::cuda::{self, ContextGuard, Links, Region};
use crate::framework::{Framework, TorchLayout};
use crate::{cai, capsule, to_py, with_dtype};
use devspan::DeviceOwner;
use devspan::dlpack::{DLDeviceType, DlpackTensor};
use devspan::foreign::SharedOwner;
use devspan::{DType, DeviceElement};
use devspan::{DeviceArray, Error, ErrorKind, Layout};
use devspan::{DeviceView, DeviceViewMut};

/// Keeps an imported view (and with it the producer) alive behind a devspan owner handle.
struct Held<V: Send + Sync + 'static>(#[allow(dead_code)] V);

impl<V: Send + Sync + 'static> DeviceOwner for Held<V> {
    fn describe(&self) -> String {
        "DLPack or CUDA Array Interface producer".into()
    }
}

/// Keeps a PyTorch tensor's memory alive behind a devspan owner handle: the storage of the
/// tensor whose layout devspan read (`untyped_storage()`; `detach()`, a second tensor over the
/// same storage, where PyTorch has no such method), so that pointing the user's tensor at other
/// memory (`set_`, `.data = ...`) does not free this memory. The reference is released attached
/// to Python where the interpreter can be attached to; otherwise PyO3 releases it at the next
/// attach.
struct HeldObject(Option<Py<PyAny>>);

impl HeldObject {
    /// The address of the object held.
    fn address(&self) -> usize {
        self.0.as_ref().map_or(0, |o| o.as_ptr() as usize)
    }

    fn storage_of(obj: &Bound<'_, PyAny>) -> PyResult<HeldObject> {
        let py = obj.py();
        let held = match obj.call_method0(pyo3::intern!(py, "untyped_storage")) {
            Ok(s) => s,
            Err(_) => obj.call_method0(pyo3::intern!(py, "detach"))?,
        };
        Ok(HeldObject(Some(held.unbind())))
    }
}

impl DeviceOwner for HeldObject {
    fn describe(&self) -> String {
        "PyTorch tensor".into()
    }
}

impl Drop for HeldObject {
    fn drop(&mut self) {
        if let Some(obj) = self.0.take() {
            let _ = Python::try_attach(move |_| drop(obj));
        }
    }
}

/// Device memory that devspan allocated for a tensor (the results of `cast` and
/// `to_contiguous`).
///
/// It is dropped after the last view and export of the memory, on whichever thread drops that,
/// once the owner's log has made the array's stream (the legacy default stream, where the
/// memory was allocated) wait for devspan's work on it: it makes the array's context current,
/// frees the memory there (stream-ordered), and restores the thread's current context.
struct Allocation<T: DeviceElement> {
    array: Option<DeviceArray<T, IxDyn>>,
}

impl<T: DeviceElement> DeviceOwner for Allocation<T> {
    fn describe(&self) -> String {
        let n = self.array.as_ref().map_or(0, |a| a.len());
        format!("devspan allocation ({n} {} elements)", T::DTYPE)
    }

    /// The array's stream: the drop frees the memory on it, stream-ordered.
    fn release_stream(&self) -> Option<Arc<devspan::cudarc::driver::CudaStream>> {
        self.array
            .as_ref()
            .map(|a| a.as_cuda_slice().stream().clone())
    }
}

impl<T: DeviceElement> Drop for Allocation<T> {
    fn drop(&mut self) {
        let Some(array) = self.array.take() else {
            return;
        };
        let _current = ContextGuard::save();
        let ctx = array.as_cuda_slice().stream().context().clone();
        // cudarc frees without making the slice's context current, and the legacy default
        // stream's handle means the default stream of whatever context is current: bind first.
        // A failed bind is tried once more (cudarc first reports, and clears, an error stored
        // in the context).
        if ctx.bind_to_thread().is_err() && ctx.bind_to_thread().is_err() {
            // Freeing under another context could release the memory on another device's
            // stream, unordered with the work on it: leak it instead.
            std::mem::forget(array);
            return;
        }
        // Frees on the array's stream (`cuMemFreeAsync`; without memory pools, after
        // synchronising it).
        drop(array);
    }
}

/// Where a tensor's elements are: everything needed to rebuild a typed view of any kind.
struct Placement {
    dtype: DType,
    /// Address of the first element of the span the layout is checked against.
    base: u64,
    /// Length of that span in elements.
    span_len: usize,
    /// Position of index zero in the span, in elements.
    offset: usize,
    shape: Vec<usize>,
    /// In elements.
    strides: Vec<isize>,
    device: usize,
}

/// Whether `strides` (in elements) are the row-major strides of `shape` on every axis longer
/// than 1, or the layout is empty: the layouts that the CUDA Array Interface writes as
/// `strides: None`.
fn c_contiguous(shape: &[usize], strides: &[isize]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expect: isize = 1;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n > 1 && s != expect {
            return false;
        }
        expect = expect.saturating_mul(n as isize);
    }
    true
}

impl Placement {
    /// The bytes of the span that the layout is checked against.
    fn region(&self) -> Region {
        let bytes = (self.span_len as u64).saturating_mul(self.dtype.size() as u64);
        Region {
            device: self.device,
            start: self.base,
            end: self.base.saturating_add(bytes),
        }
    }

    fn of<T: DeviceElement>(v: &DeviceView<'_, T, IxDyn>) -> devspan::Result<Self> {
        let span = v.span()?;
        Ok(Placement {
            dtype: T::DTYPE,
            base: span.device_ptr(),
            span_len: span.len(),
            offset: v.layout().offset(),
            shape: v.shape().to_vec(),
            strides: v.strides().to_vec(),
            device: v.device(),
        })
    }
}

/// A strided view over CUDA memory owned by a DLPack or CUDA Array Interface producer
/// (PyTorch, CuPy, JAX, Numba, ...) or by devspan itself (the results of `cast` and
/// `to_contiguous`).
///
/// Made by `devspan.from_dlpack`, `devspan.from_cuda_array_interface`, `devspan.cast` and
/// `devspan.to_contiguous`; handed to any DLPack consumer through `__dlpack__` /
/// `__dlpack_device__` (`torch.from_dlpack(t)`, `cupy.from_dlpack(t)`) and to any CUDA Array
/// Interface consumer through `__cuda_array_interface__` (`cupy.asarray(t)`,
/// `numba.cuda.as_cuda_array(t)`). The memory stays alive while the tensor or anything exported
/// from it lives, whatever happens to the producer's own Python objects.
///
/// devspan orders its own work across streams with CUDA events: an operation waits for
/// devspan's earlier work on this tensor and on every other live devspan tensor whose memory
/// overlaps it (the same producer tensor imported twice, an export imported again), and so
/// does a consumer's stream given to `__dlpack__`. When the last reference to an imported
/// tensor goes away, devspan waits (on the host) for its work on it before releasing the memory
/// to the producer; devspan's own allocations are freed stream-ordered after that work. Work
/// that frameworks queue on the memory themselves is not known to devspan: its ordering with
/// devspan's calls is the user's, as in every DLPack exchange; the streams of the CUDA Array
/// Interface are the exception (see `__cuda_array_interface__` and
/// `from_cuda_array_interface`).
#[pyclass(frozen, name = "Tensor", module = "devspan")]
pub struct Tensor {
    place: Placement,
    writable: bool,
    /// Whether `writable` is provisional: the layout, which fits its span, has not been checked
    /// for reaching an element twice. The first writable view checks it (and reports such a
    /// layout as read-only); a tensor that is kept is checked when it is kept.
    unchecked: bool,
    /// What keeps the memory alive (the producer, or an [`Allocation`]), shared by every view
    /// and export of the tensor: its log records devspan's work on the memory. Listed (weakly)
    /// in [`cuda::TENSORS`].
    cell: Arc<SharedOwner>,
    ctx: Arc<CudaContext>,
    /// Streams of other libraries kept in step with devspan's work on the memory; listed
    /// (weakly) in [`cuda::LINKED`] once it holds any.
    links: Arc<Mutex<Links>>,
    /// Whether the owner is an [`Allocation`], whose release is ordered on its own stream.
    self_releasing: bool,
    /// The framework whose current stream the tensor's operations use when a call names no
    /// stream: the producer's, or for devspan's own results their source's.
    framework: Option<Framework>,
    /// Whether the tensor was imported for one call only: its release goes to
    /// [`cuda::RELEASES`] rather than waiting for its work.
    for_call: bool,
}

impl Drop for Tensor {
    fn drop(&mut self) {
        {
            // The work queued on the streams made for consumers counts as work on the memory:
            // the release follows it.
            let links = cuda::lock(&self.links);
            let mut created = links.created().peekable();
            if created.peek().is_some() {
                let _current = ContextGuard::save();
                for s in created {
                    if self.cell.record(s, true).is_err() {
                        let _ = cuda::synchronize(s);
                    }
                }
            }
        }
        if self.for_call {
            // (`defer` saves the thread's context where it releases at once.)
            cuda::RELEASES.defer(self.cell.clone());
            return;
        }
        let _current = ContextGuard::save();
        if self.self_releasing || self.cell.is_settled() {
            return;
        }
        // Wait without holding the GIL: other Python threads go on, and work queued on the
        // streams (a host callback, say) may itself need the GIL.
        let cell = self.cell.clone();
        Python::attach(|py| py.detach(move || cell.wait_host()));
    }
}

impl Tensor {
    /// A tensor over `place`, its owner listed in [`cuda::TENSORS`].
    fn new(
        place: Placement,
        owner: Arc<dyn DeviceOwner>,
        ctx: Arc<CudaContext>,
        self_releasing: bool,
    ) -> Tensor {
        let cell = SharedOwner::new(owner);
        cuda::TENSORS.register(place.region(), &cell);
        Tensor::with_cell(place, cell, ctx, self_releasing)
    }

    /// A tensor over `place` whose memory `cell` keeps alive; the caller lists `cell` in
    /// [`cuda::TENSORS`] (over `place`'s region at least).
    fn with_cell(
        place: Placement,
        cell: Arc<SharedOwner>,
        ctx: Arc<CudaContext>,
        self_releasing: bool,
    ) -> Tensor {
        Tensor {
            place,
            writable: false,
            unchecked: false,
            cell,
            ctx,
            links: Arc::default(),
            self_releasing,
            framework: None,
            for_call: false,
        }
    }

    fn links(&self) -> MutexGuard<'_, Links> {
        cuda::lock(&self.links)
    }

    /// Records a write of the memory queued on `stream` by others than devspan's operations.
    fn record_write(&self, stream: &Arc<CudaStream>) -> PyResult<()> {
        self.cell.record(stream, true).map_err(to_py)
    }

    /// The keep-alive of the tensor's views: its owner, with its log.
    pub(crate) fn dtype(&self) -> DType {
        self.place.dtype
    }

    pub(crate) fn device(&self) -> usize {
        self.place.device
    }

    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    pub(crate) fn framework(&self) -> Option<Framework> {
        self.framework
    }

    /// The tensor, imported for one call only; see `for_call`.
    pub(crate) fn for_one_call(mut self) -> Tensor {
        self.for_call = true;
        self
    }

    /// The tensor, kept beyond the call that imported it, its layout checked (see
    /// `unchecked`).
    pub(crate) fn kept(mut self) -> PyResult<Tensor> {
        if self.unchecked {
            self.writable = with_dtype!(self.place.dtype, T => match self.view_mut::<T>() {
                Ok(_) => true,
                Err(_) => {
                    self.view::<T>().map_err(to_py)?;
                    false
                }
            });
            self.unchecked = false;
        }
        self.for_call = false;
        Ok(self)
    }

    /// The tensor with `framework` as the framework whose current stream it follows.
    pub(crate) fn following(mut self, framework: Option<Framework>) -> Tensor {
        self.framework = framework;
        self
    }

    /// The tensor as an input of an [`ElementwiseKernel`](devspan::elementwise::ElementwiseKernel).
    pub(crate) fn elementwise_input(&self) -> devspan::Result<devspan::elementwise::Arg<'static>> {
        Ok(with_dtype!(self.place.dtype, T => self.view::<T>()?.into()))
    }

    /// The tensor as an output of an [`ElementwiseKernel`](devspan::elementwise::ElementwiseKernel).
    pub(crate) fn elementwise_output(&self) -> devspan::Result<devspan::elementwise::Out<'static>> {
        let p = &self.place;
        if !self.writable {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the output tensor (shape {:?}, strides {:?}) is read-only: its producer marked it so or two indices reach one element",
                    p.shape, p.strides
                ),
            ));
        }
        Ok(with_dtype!(p.dtype, T => self.view_mut::<T>()?.into()))
    }

    pub(crate) fn view<T: DeviceElement>(&self) -> devspan::Result<DeviceView<'static, T, IxDyn>> {
        let p = &self.place;
        if p.dtype != T::DTYPE {
            return Err(Error::new(
                ErrorKind::UnsupportedDtype,
                format!("a {} tensor viewed as {}", p.dtype, T::DTYPE),
            ));
        }
        // SAFETY: the same parts were validated when the tensor was made, over memory that
        // `owner` (held by `keep`) keeps alive; devspan's operations on the view order their
        // work through the owner's log, and with other tensors through `before`.
        unsafe {
            DeviceView::from_raw_parts_shared(
                p.base,
                p.span_len,
                IxDyn(&p.shape),
                &p.strides,
                p.offset,
                p.device,
                &self.cell,
            )
        }
    }

    /// A writable view of the elements as `T`; `Err` for read-only tensors.
    pub(crate) fn view_mut<T: DeviceElement>(
        &self,
    ) -> devspan::Result<DeviceViewMut<'static, T, IxDyn>> {
        let p = &self.place;
        let read_only = || {
            crate::exceptions::invalid(format!(
                "the tensor (shape {:?}, strides {:?}) is read-only: its producer marked it so or two indices reach one element",
                p.shape, p.strides
            ))
        };
        if !self.writable {
            return Err(read_only());
        }
        if p.dtype != T::DTYPE {
            return Err(Error::new(
                ErrorKind::UnsupportedDtype,
                format!("a {} tensor viewed as {}", p.dtype, T::DTYPE),
            ));
        }
        // SAFETY: as in `view`; the producer allows writes (`writable`), and the layout is
        // checked here not to reach an element twice.
        let v = unsafe {
            DeviceViewMut::from_raw_parts_mut_shared(
                p.base,
                p.span_len,
                IxDyn(&p.shape),
                &p.strides,
                p.offset,
                p.device,
                &self.cell,
            )
        };
        match v {
            Err(e) if self.unchecked && *e.kind() == ErrorKind::Aliasing => Err(read_only()),
            v => v,
        }
    }

    /// Makes `stream` wait for devspan's earlier work that a read (or write) of this tensor
    /// must follow on every other live devspan tensor over overlapping memory, and for the work
    /// queued so far on the streams linked to this tensor or to those. (devspan's operations
    /// order themselves after the earlier work on the tensor's own memory.)
    pub(crate) fn before(&self, stream: &CudaStream, writing: bool) -> PyResult<()> {
        let region = self.place.region();
        for other in cuda::TENSORS.overlapping(region) {
            if !Arc::ptr_eq(&other, &self.cell) {
                other.order_before(stream, writing).map_err(to_py)?;
            }
        }
        self.links().order_before(stream)?;
        for other in cuda::LINKED.overlapping(region) {
            if !Arc::ptr_eq(&other, &self.links) {
                cuda::lock(&other).order_before(stream)?;
            }
        }
        Ok(())
    }

    /// [`before`](Self::before), and the earlier work on this tensor too: for a stream that
    /// works on the memory outside devspan's operations (a consumer's).
    fn before_all(&self, stream: &CudaStream, writing: bool) -> PyResult<()> {
        self.cell.order_before(stream, writing).map_err(to_py)?;
        self.before(stream, writing)
    }

    /// Makes the streams linked to this tensor, or to any live devspan tensor over overlapping
    /// memory, wait for the work `stream` has queued (devspan's operations record that work in
    /// the owner's log themselves).
    pub(crate) fn after(&self, stream: &CudaStream) -> PyResult<()> {
        let linked: Vec<_> = cuda::LINKED
            .overlapping(self.place.region())
            .into_iter()
            .filter(|o| !cuda::lock(o).is_empty())
            .collect();
        if !linked.is_empty() {
            let done = stream.record_event(None).map_err(|e| to_py(e.into()))?;
            for o in linked {
                cuda::lock(&o).hold(stream, &done)?;
            }
        }
        Ok(())
    }

    /// A tensor over a producer's managed tensor; `stream` (a stream value) is where the
    /// producer's data is ready, recorded in the tensor's log with `record_ready` (see
    /// [`Source::import`](crate::source::Source::import)). `link`, a CUDA Array Interface's
    /// `stream`, is a stream on which the producer may still have work queued on the data:
    /// `stream` waits for it, and it is linked to the tensor ([`cuda::Link`]).
    pub(crate) fn import(
        t: DlpackTensor,
        stream: i64,
        link: Option<i64>,
        record_ready: bool,
    ) -> PyResult<Tensor> {
        let _current = ContextGuard::save();
        let read_only = t.is_read_only();
        let dtype = t.dtype().map_err(to_py)?;
        let (place, owner) = with_dtype!(dtype, T => {
            let v = t.into_view::<T, IxDyn>().map_err(to_py)?;
            let place = Placement::of(&v).map_err(to_py)?;
            let owner: Arc<dyn DeviceOwner> = Arc::new(Held(v));
            (place, owner)
        });
        let ctx = cuda::context(place.device)?;
        let mut tensor = Tensor::new(place, owner, ctx, false);
        // Writable unless the producer said otherwise or the layout reaches an element twice
        // (a broadcast), which `view_mut` refuses.
        tensor.writable = !read_only;
        if tensor.writable {
            tensor.writable = with_dtype!(dtype, T => tensor.view_mut::<T>().is_ok());
        }
        let s = cuda::stream(&tensor.ctx, stream)?;
        if let Some(h) = link {
            let producer = cuda::stream_of(&tensor.ctx, h).map_err(|m| {
                to_py(crate::exceptions::invalid(format!(
                    "the stream of __cuda_array_interface__: {m}"
                )))
            })?;
            {
                let mut links = tensor.links();
                links.link(producer);
                // `s` waits for the work queued on the producer's stream.
                links.order_before(&s)?;
            }
            cuda::LINKED.register(tensor.place.region(), &tensor.links);
        }
        if record_ready {
            tensor.record_write(&s)?;
        }
        Ok(tensor)
    }

    /// A tensor over a plain PyTorch tensor's memory, `obj`, whose layout `l` was read from it
    /// ([`TorchLayout`]), to be used on `stream` (a stream value). It keeps the tensor's
    /// storage alive ([`HeldObject`]). As PyTorch's `__dlpack__(stream=...)` does, `stream`
    /// first waits for PyTorch's current stream on the tensor's device (`current`, asked by the
    /// caller), unless it is that stream; `record_ready` as in
    /// [`Source::import`](crate::source::Source::import).
    ///
    /// `shared`: the tensor is for one call, and shares its owner with the other imports of the
    /// same storage over the same memory for calls while that owner lives ([`cuda::STORAGES`]).
    pub(crate) fn import_torch(
        obj: &Bound<'_, PyAny>,
        l: TorchLayout,
        stream: i64,
        current: i64,
        record_ready: bool,
        shared: bool,
    ) -> PyResult<Tensor> {
        // (The caller holds a `ContextGuard`, as `Source::import` asks.)
        // The span from the element at index zero to the farthest one: PyTorch strides are never
        // negative, and an empty tensor is never read this way.
        let span_len = match devspan::foreign::reach(&l.shape, &l.strides).map_err(to_py)? {
            Some((0, hi)) => hi as usize + 1,
            _ => {
                return Err(to_py(crate::exceptions::invalid(format!(
                    "a PyTorch tensor of shape {:?} and strides {:?} has no span devspan can view",
                    l.shape, l.strides
                ))));
            }
        };
        let held = HeldObject::storage_of(obj)?;
        // The span from `data_ptr()`, checked against the layout by the first view below.
        let place = Placement {
            dtype: l.dtype,
            base: l.data,
            span_len,
            offset: 0,
            shape: l.shape,
            strides: l.strides,
            device: l.device,
        };
        let ctx = cuda::context(place.device)?;
        let (storage, region) = (held.address(), place.region());
        let mut tensor = match shared
            .then(|| cuda::STORAGES.find(storage, region))
            .flatten()
        {
            // The owner holds this storage object already (and is listed over `region`).
            Some(cell) => Tensor::with_cell(place, cell, ctx, false),
            None => {
                let tensor = Tensor::new(place, Arc::new(held), ctx, false);
                if shared {
                    cuda::STORAGES.insert(storage, region, &tensor.cell);
                }
                tensor
            }
        };
        // Writable unless the layout reaches an element twice, which the first writable view
        // (or `kept`) checks; the layout fits its span (`reach` above). (`data_ptr()`, `shape`
        // and `stride()` of a live CUDA tensor describe memory of its device that the tensor's
        // storage owns, which the owner keeps alive.)
        tensor.writable = true;
        tensor.unchecked = true;
        let follows = !(matches!((stream, current), (0 | 1, 0 | 1)) || stream == current);
        if follows || record_ready {
            let s = cuda::stream(&tensor.ctx, stream)?;
            if follows {
                let c = cuda::stream(&tensor.ctx, current)?;
                s.join(&c).map_err(|e| to_py(e.into()))?;
            }
            if record_ready {
                tensor.record_write(&s)?;
            }
        }
        Ok(tensor.following(Some(Framework::Torch)))
    }

    /// A writable tensor owning a new devspan array, with the allocation (queued on the
    /// array's stream) recorded as its first write. Its memory is freed by an [`Allocation`].
    pub(crate) fn owned<T: DeviceElement>(array: DeviceArray<T, IxDyn>) -> PyResult<Tensor> {
        let _current = ContextGuard::save();
        let dim = array.dim();
        let ptr = devspan::interop::cuda_slice_address(array.as_cuda_slice());
        let (len, device) = (array.as_cuda_slice().len(), array.device());
        let home = array.as_cuda_slice().stream().clone();
        let ctx = home.context().clone();
        let owner: Arc<dyn DeviceOwner> = Arc::new(Allocation { array: Some(array) });
        let strides = Layout::contiguous(dim.clone()).strides().to_vec();
        // SAFETY: the array owns `len` elements of `T` at `ptr` on `device` and lives in
        // `owner`, which the tensor's views keep alive.
        let v = unsafe {
            DeviceView::<T, IxDyn>::from_raw_parts(
                ptr,
                len,
                dim,
                &strides,
                0,
                device,
                owner.clone(),
            )
        }
        .map_err(to_py)?;
        let mut tensor = Tensor::new(Placement::of(&v).map_err(to_py)?, owner, ctx, true);
        tensor.writable = true;
        tensor.record_write(&home)?;
        Ok(tensor)
    }
}

#[pymethods]
impl Tensor {
    /// Axis lengths.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.place.shape)
    }

    /// Strides in elements (may be negative or zero).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.place.strides)
    }

    /// Element type name: "u8", "i8", ..., "f16", "bf16", "f32", "f64".
    #[getter(dtype)]
    fn py_dtype(&self) -> &'static str {
        self.place.dtype.name()
    }

    /// CUDA device ordinal.
    #[getter(device)]
    fn py_device(&self) -> usize {
        self.place.device
    }

    /// Whether devspan refuses to write the tensor.
    #[getter]
    fn readonly(&self) -> bool {
        !self.writable
    }

    /// Device address of the element at index zero.
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.place.base + (self.place.offset * self.place.dtype.size()) as u64
    }

    /// The tensor as a CUDA Array Interface (version 3) dict: `shape`, `typestr`, `descr`,
    /// `data` (address of index zero, 0 when empty; read-only flag), `strides` (in bytes; None
    /// when C-contiguous), `version` 3, and `stream`.
    ///
    /// `stream` is a stream devspan keeps for this tensor's consumers, made to wait for
    /// devspan's work on the tensor when the dict is made: a consumer synchronises on it or
    /// queues its work there, as the interface asks. devspan's later operations on the tensor
    /// wait for the work queued on that stream, and the stream waits for them. Absent (an
    /// AttributeError, so `hasattr` is False) for bf16 tensors, which the interface has no type
    /// string for.
    #[getter(__cuda_array_interface__)]
    fn cuda_array_interface<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = &self.place;
        let typestr = cai::typestr(p.dtype).ok_or_else(|| {
            PyAttributeError::new_err(format!(
                "a {} tensor has no __cuda_array_interface__ (the interface has no type string for it); use __dlpack__",
                p.dtype
            ))
        })?;
        let _current = ContextGuard::save();
        let export = {
            let mut links = self.links();
            let first = links.is_empty();
            let export = links.consumer_stream(&self.ctx)?;
            if first {
                cuda::LINKED.register(p.region(), &self.links);
            }
            export
        };
        // The consumer may write: its stream waits for devspan's reads as well.
        self.before_all(&export, true)?;
        let size = p.dtype.size() as isize;
        let empty = p.shape.contains(&0);
        let d = PyDict::new(py);
        d.set_item("shape", PyTuple::new(py, &p.shape)?)?;
        d.set_item("typestr", typestr)?;
        d.set_item("descr", vec![("", typestr)])?;
        d.set_item(
            "data",
            (if empty { 0 } else { self.data_ptr() }, !self.writable),
        )?;
        if c_contiguous(&p.shape, &p.strides) {
            d.set_item("strides", py.None())?;
        } else {
            let bytes: Vec<isize> = p.strides.iter().map(|&s| s * size).collect();
            d.set_item("strides", PyTuple::new(py, bytes)?)?;
        }
        d.set_item("version", cai::VERSION)?;
        d.set_item("stream", export.cu_stream() as usize)?;
        Ok(d)
    }

    /// `(kDLCUDA, device)`.
    fn __dlpack_device__(&self) -> (i32, usize) {
        (DLDeviceType::CUDA.0, self.place.device)
    }

    /// Exports the tensor as a DLPack capsule (versioned when `max_version >= (1, 0)`).
    ///
    /// `stream` is the consumer's stream: None (the legacy default stream), 1, 2, a CUstream
    /// handle, or -1 for no synchronisation. It is made to wait for devspan's work on the
    /// tensor. `copy=True` and devices other than this tensor's are refused with BufferError.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i64)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "devspan exports its memory as is; use devspan.to_contiguous for a copy",
            ));
        }
        if let Some((kind, id)) = dl_device
            && (kind != DLDeviceType::CUDA.0 || id != self.place.device as i64)
        {
            return Err(PyBufferError::new_err(format!(
                "the tensor lives on CUDA device {}; it cannot be exported to device ({kind}, {id})",
                self.place.device
            )));
        }
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        if !versioned && !self.writable {
            return Err(PyBufferError::new_err(
                "a read-only tensor can only be exported as a versioned DLPack tensor (max_version >= (1, 0))",
            ));
        }
        let _current = ContextGuard::save();
        if stream != Some(-1) {
            let s = cuda::stream(&self.ctx, stream.unwrap_or(1))?;
            // The consumer may write: it waits for devspan's reads as well.
            self.before_all(&s, true)?;
        }
        with_dtype!(self.place.dtype, T => {
            if self.writable {
                let v = self.view_mut::<T>().map_err(to_py)?;
                if versioned {
                    // SAFETY: a fresh managed tensor from devspan's export, handed over once.
                    unsafe { capsule::versioned(py, v.into_dlpack()) }
                } else {
                    // SAFETY: as above.
                    unsafe { capsule::legacy(py, v.into_dlpack_legacy()) }
                }
            } else {
                let v = self.view::<T>().map_err(to_py)?;
                // SAFETY: as above.
                unsafe { capsule::versioned(py, v.into_dlpack()) }
            }
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "devspan.Tensor(shape={:?}, strides={:?}, dtype={}, device=cuda:{}{})",
            self.place.shape,
            self.place.strides,
            self.place.dtype,
            self.place.device,
            if self.writable { "" } else { ", readonly" }
        )
    }
}
