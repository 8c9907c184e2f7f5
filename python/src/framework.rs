//! The Python frameworks whose current stream devspan follows when a call names no stream, and
//! the direct reading of a plain PyTorch tensor's layout.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use devspan::DType;

/// A framework that has a current CUDA stream per thread and device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framework {
    /// PyTorch: `torch.cuda.current_stream(device).cuda_stream`.
    Torch,
    /// CuPy: `cupy.cuda.get_current_stream(device).ptr`.
    CuPy,
}

/// The framework of each type seen so far (the type held, so that its address names it).
static TYPES: Mutex<Vec<(Py<PyType>, Option<Framework>)>> = Mutex::new(Vec::new());

/// How many types [`TYPES`] remembers; further types are looked up on every call.
const TYPES_KEPT: usize = 64;

impl Framework {
    /// The framework whose package defines `obj`'s type or one of its base classes (the first
    /// in the method resolution order whose `__module__` is in package `torch` or `cupy`), if
    /// any. Nothing is imported: the module of a live object's class is already loaded. The
    /// answer is remembered per type.
    pub(crate) fn of(obj: &Bound<'_, PyAny>) -> Option<Framework> {
        let ty = obj.get_type();
        {
            let types = TYPES.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, f)) = types.iter().find(|(t, _)| t.as_ptr() == ty.as_ptr()) {
                return *f;
            }
        }
        let found = Self::of_type(&ty);
        let mut types = TYPES.lock().unwrap_or_else(|p| p.into_inner());
        if types.len() < TYPES_KEPT && !types.iter().any(|(t, _)| t.as_ptr() == ty.as_ptr()) {
            types.push((ty.unbind(), found));
        }
        found
    }

    fn of_type(ty: &Bound<'_, PyType>) -> Option<Framework> {
        let mro = ty.getattr("__mro__").ok()?;
        let mro = mro.cast::<PyTuple>().ok()?;
        mro.iter().find_map(|class| {
            let module: String = class.getattr("__module__").ok()?.extract().ok()?;
            match module.split('.').next() {
                Some("torch") => Some(Framework::Torch),
                Some("cupy") => Some(Framework::CuPy),
                _ => None,
            }
        })
    }

    /// The framework's current stream on the calling thread for CUDA device `device` (its
    /// current device when `None`), as a stream value: 0 for the legacy default stream, as
    /// both frameworks report it, 2 for the per-thread default stream, or a `CUstream` handle.
    pub(crate) fn current_stream(self, py: Python<'_>, device: Option<usize>) -> PyResult<i64> {
        match self {
            Framework::Torch => {
                if let Some(d) = device {
                    let raw = with_torch(py, |t| {
                        t.and_then(|t| t.raw_stream.as_ref().map(|f| f.clone_ref(py)))
                    });
                    if let Some(raw) = raw {
                        return raw.call1(py, (d,))?.extract(py);
                    }
                }
                let cuda = py.import("torch")?.getattr("cuda")?;
                let stream = match device {
                    Some(d) => cuda.call_method1("current_stream", (d,))?,
                    None => cuda.call_method0("current_stream")?,
                };
                stream.getattr("cuda_stream")?.extract()
            }
            Framework::CuPy => {
                let cuda = py.import("cupy")?.getattr("cuda")?;
                let stream = match device {
                    // Older CuPy releases take no device argument.
                    Some(d) => match cuda.call_method1("get_current_stream", (d,)) {
                        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
                            cuda.call_method0("get_current_stream")?
                        }
                        r => r?,
                    },
                    None => cuda.call_method0("get_current_stream")?,
                };
                stream.getattr("ptr")?.extract()
            }
        }
    }
}

/// The module `name` if it is loaded (`sys.modules[name]`), without importing anything.
fn loaded<'py>(
    py: Python<'py>,
    name: &Bound<'py, pyo3::types::PyString>,
) -> Option<Bound<'py, PyAny>> {
    static MODULES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    let modules = MODULES
        .get_or_try_init(py, || -> PyResult<Py<PyDict>> {
            Ok(py
                .import("sys")?
                .getattr("modules")?
                .cast_into::<PyDict>()?
                .unbind())
        })
        .ok()?;
    modules.bind(py).get_item(name).ok().flatten()
}

/// What devspan reads from one `torch` module, remembered with the module (the `torch` in
/// `sys.modules`; another module there is read anew).
struct TorchModule {
    module: Py<PyAny>,
    /// `torch._C._cuda_getCurrentRawStream`, which gives
    /// `torch.cuda.current_stream(d).cuda_stream` without making a stream object, if this
    /// PyTorch has it.
    raw_stream: Option<Py<PyAny>>,
    /// The objects the direct reading of a tensor compares with, if this PyTorch has them all.
    types: Option<TorchTypes>,
}

/// The objects of PyTorch that the direct reading of a tensor compares with.
struct TorchTypes {
    tensor: Py<PyType>,
    strided: Py<PyAny>,
    dtypes: Vec<(Py<PyAny>, DType)>,
}

impl TorchModule {
    fn read(torch: &Bound<'_, PyAny>) -> TorchModule {
        let raw_stream = torch
            .getattr("_C")
            .and_then(|c| c.getattr("_cuda_getCurrentRawStream"))
            .ok()
            .filter(|f| f.is_callable())
            .map(Bound::unbind);
        TorchModule {
            module: torch.clone().unbind(),
            raw_stream,
            types: TorchTypes::read(torch),
        }
    }
}

impl TorchTypes {
    fn read(torch: &Bound<'_, PyAny>) -> Option<TorchTypes> {
        let tensor = torch.getattr("Tensor").ok()?.cast_into::<PyType>().ok()?;
        let strided = torch.getattr("strided").ok()?;
        let names = [
            ("uint8", DType::U8),
            ("int8", DType::I8),
            ("uint16", DType::U16),
            ("int16", DType::I16),
            ("uint32", DType::U32),
            ("int32", DType::I32),
            ("uint64", DType::U64),
            ("int64", DType::I64),
            ("float16", DType::F16),
            ("bfloat16", DType::BF16),
            ("float32", DType::F32),
            ("float64", DType::F64),
        ];
        let dtypes = names
            .iter()
            .filter_map(|(n, d)| Some((torch.getattr(*n).ok()?.unbind(), *d)))
            .collect();
        Some(TorchTypes {
            tensor: tensor.unbind(),
            strided: strided.unbind(),
            dtypes,
        })
    }
}

/// Runs `f` with what devspan read from the loaded `torch` module (`None` when none is loaded).
/// No lock is held while `f` runs (it may run Python code).
fn with_torch<R>(py: Python<'_>, f: impl FnOnce(Option<&TorchModule>) -> R) -> R {
    static TORCH: Mutex<Option<Arc<TorchModule>>> = Mutex::new(None);
    let Some(torch) = loaded(py, intern!(py, "torch")) else {
        return f(None);
    };
    let known = {
        let cached = TORCH.lock().unwrap_or_else(|p| p.into_inner());
        cached
            .as_ref()
            .filter(|m| m.module.as_ptr() == torch.as_ptr())
            .cloned()
    };
    let module = match known {
        Some(m) => m,
        None => {
            // Read without the lock; two threads may both read, and either result is kept.
            let m = Arc::new(TorchModule::read(&torch));
            *TORCH.lock().unwrap_or_else(|p| p.into_inner()) = Some(m.clone());
            m
        }
    };
    f(Some(&module))
}

/// The layout of a plain PyTorch CUDA tensor, read from the tensor itself.
pub(crate) struct TorchLayout {
    pub(crate) dtype: DType,
    /// `data_ptr()`: the address of the element at index zero.
    pub(crate) data: u64,
    pub(crate) shape: Vec<usize>,
    /// `stride()`, in elements.
    pub(crate) strides: Vec<isize>,
    pub(crate) device: usize,
}

impl TorchLayout {
    /// The layout of `obj` when it is a `torch.Tensor` (the class itself, not a subclass) in
    /// CUDA memory, strided, with an element type devspan has, that does not require
    /// gradients and has no negative bit: the tensors whose DLPack export would describe
    /// exactly this memory, and not empty. `None` for anything else, which then goes through
    /// `__dlpack__` (and gets its refusals).
    pub(crate) fn of(obj: &Bound<'_, PyAny>) -> Option<TorchLayout> {
        // A failed probe (an attribute this PyTorch lacks) leaves the tensor to `__dlpack__`.
        Self::read(obj).ok().flatten()
    }

    fn read(obj: &Bound<'_, PyAny>) -> PyResult<Option<TorchLayout>> {
        let py = obj.py();
        let ty = obj.get_type();
        // The element type, if `obj` is exactly this `torch.Tensor`, strided, with no gradient
        // and no negative bit.
        let dtype = with_torch(py, |t| -> PyResult<Option<DType>> {
            let Some(t) = t.and_then(|t| t.types.as_ref()) else {
                return Ok(None);
            };
            if ty.as_ptr() != t.tensor.as_ptr()
                || !obj.getattr(intern!(py, "is_cuda"))?.extract::<bool>()?
                || obj
                    .getattr(intern!(py, "requires_grad"))?
                    .extract::<bool>()?
                || obj.getattr(intern!(py, "layout"))?.as_ptr() != t.strided.as_ptr()
                || obj.call_method0(intern!(py, "is_neg"))?.extract::<bool>()?
            {
                return Ok(None);
            }
            let dtype = obj.getattr(intern!(py, "dtype"))?;
            Ok(t.dtypes
                .iter()
                .find(|(d, _)| d.as_ptr() == dtype.as_ptr())
                .map(|&(_, d)| d))
        })?;
        let Some(dtype) = dtype else {
            return Ok(None);
        };
        let device: i64 = obj.call_method0(intern!(py, "get_device"))?.extract()?;
        let Ok(device) = usize::try_from(device) else {
            return Ok(None);
        };
        let shape: Vec<usize> = ints(&obj.getattr(intern!(py, "shape"))?)?;
        if shape.contains(&0) {
            // An empty tensor's address may be null: `__dlpack__` describes it.
            return Ok(None);
        }
        Ok(Some(TorchLayout {
            dtype,
            data: obj.call_method0(intern!(py, "data_ptr"))?.extract()?,
            shape,
            strides: ints(&obj.call_method0(intern!(py, "stride"))?)?,
            device,
        }))
    }
}

/// The integers of a sequence: read by index from a tuple (`torch.Size`, `stride()`), through
/// the sequence protocol otherwise.
fn ints<T: for<'a, 'py> FromPyObject<'a, 'py>>(seq: &Bound<'_, PyAny>) -> PyResult<Vec<T>> {
    match seq.cast::<PyTuple>() {
        Ok(t) => t
            .iter_borrowed()
            .map(|x| x.extract().map_err(Into::into))
            .collect(),
        Err(_) => seq.extract(),
    }
}
