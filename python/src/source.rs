//! Tensor arguments: what an argument is ([`Source`]), the stream a call runs on, and the
//! import of an argument for the call ([`Arg`]) through DLPack, the CUDA Array Interface or a
//! plain PyTorch tensor's own layout.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::framework::{Framework, TorchLayout};
use crate::{Tensor, cai, capsule, cuda, to_py};
use devspan::dlpack::DLDeviceType;

/// A tensor argument as found: recognised (and a CUDA Array Interface checked), not imported.
pub(crate) enum Source<'py> {
    /// A devspan tensor.
    Tensor(Bound<'py, Tensor>),
    /// An object with `__dlpack__`, on CUDA device type `device_type` (kDLCUDA when the object
    /// has no `__dlpack_device__`), device `device` when known.
    Dlpack {
        obj: Bound<'py, PyAny>,
        device_type: i32,
        device: Option<usize>,
    },
    /// An object with `__cuda_array_interface__` (and no `__dlpack__`), its interface checked.
    Cai {
        obj: Bound<'py, PyAny>,
        interface: cai::Interface,
    },
    /// A plain PyTorch tensor whose layout was read from it directly ([`TorchLayout`]), with
    /// PyTorch's current stream on its device, asked once: the stream a call with no stream
    /// runs on, and the one the import orders its stream after.
    Torch {
        obj: Bound<'py, PyAny>,
        layout: TorchLayout,
        current: i64,
    },
    /// Anything else: a DLPack capsule, or an object devspan refuses when it imports it.
    Capsule(Bound<'py, PyAny>),
}

impl<'py> Source<'py> {
    /// What `obj` is: a devspan tensor, a DLPack producer (refused unless its memory is CUDA
    /// memory), a CUDA Array Interface producer (refused if its interface is malformed), or
    /// possibly a capsule.
    pub(crate) fn of(obj: &Bound<'py, PyAny>) -> PyResult<Source<'py>> {
        Self::of_knowing(obj, None)
    }

    /// [`of`](Self::of) for a call's next argument: PyTorch's current stream, where `earlier`
    /// (an argument of the same call) asked for it on the same device, is not asked again.
    pub(crate) fn of_next(obj: &Bound<'py, PyAny>, earlier: &Source<'_>) -> PyResult<Source<'py>> {
        let known = match earlier {
            Source::Torch {
                layout, current, ..
            } => Some((layout.device, *current)),
            _ => None,
        };
        Self::of_knowing(obj, known)
    }

    /// [`of`](Self::of), with `known` PyTorch's current stream on a device, if already asked.
    fn of_knowing(obj: &Bound<'py, PyAny>, known: Option<(usize, i64)>) -> PyResult<Source<'py>> {
        if let Ok(t) = obj.cast::<Tensor>() {
            return Ok(Source::Tensor(t.clone()));
        }
        if Framework::of(obj) == Some(Framework::Torch)
            && let Some(layout) = TorchLayout::of(obj)
        {
            let current = match known {
                Some((device, current)) if device == layout.device => current,
                _ => Framework::Torch.current_stream(obj.py(), Some(layout.device))?,
            };
            return Ok(Source::Torch {
                obj: obj.clone(),
                layout,
                current,
            });
        }
        if obj.hasattr("__dlpack__")? {
            let (device_type, device) = dlpack_device(obj)?;
            return Ok(Source::Dlpack {
                obj: obj.clone(),
                device_type,
                device,
            });
        }
        if obj.hasattr("__cuda_array_interface__")? {
            return Source::cai(obj);
        }
        Ok(Source::Capsule(obj.clone()))
    }

    /// `obj` read through its `__cuda_array_interface__` (`TypeError` if it has none).
    pub(crate) fn cai(obj: &Bound<'py, PyAny>) -> PyResult<Source<'py>> {
        if let Ok(t) = obj.cast::<Tensor>() {
            return Ok(Source::Tensor(t.clone()));
        }
        if !obj.hasattr("__cuda_array_interface__")? {
            return Err(PyTypeError::new_err(format!(
                "expected an object with __cuda_array_interface__, got {}",
                obj.get_type().name()?
            )));
        }
        Ok(Source::Cai {
            obj: obj.clone(),
            interface: cai::Interface::of(obj)?,
        })
    }

    /// The device the argument's memory is on, where it is known before the import: not for a
    /// capsule, a DLPack producer without `__dlpack_device__` or of memory other than kDLCUDA,
    /// nor an empty CUDA Array Interface array.
    pub(crate) fn device(&self) -> PyResult<Option<usize>> {
        Ok(match self {
            Source::Tensor(t) => Some(t.get().device()),
            // Only CUDA device memory: kDLCUDAHost and kDLCUDAManaged ids are not the device
            // that a copy between devices would read from.
            Source::Dlpack {
                device,
                device_type,
                ..
            } if *device_type == DLDeviceType::CUDA.0 => *device,
            Source::Dlpack { .. } => None,
            Source::Cai { interface, .. } if interface.data != 0 => {
                Some(cuda::pointer_device(interface.data)?)
            }
            Source::Cai { .. } | Source::Capsule(_) => None,
            Source::Torch { layout, .. } => Some(layout.device),
        })
    }

    /// The framework that made the argument, if devspan knows it.
    pub(crate) fn framework(&self) -> Option<Framework> {
        match self {
            Source::Tensor(t) => t.get().framework(),
            Source::Dlpack { obj, .. } | Source::Cai { obj, .. } => Framework::of(obj),
            Source::Torch { .. } => Some(Framework::Torch),
            Source::Capsule(_) => None,
        }
    }

    /// The stream this argument asks a call with no stream to run on, if any: the current
    /// stream of the framework that made it, or the stream of its CUDA Array Interface.
    pub(crate) fn preferred_stream(&self) -> PyResult<Option<i64>> {
        let current = |py, f: Option<Framework>, device: Option<usize>| {
            f.map(|f| f.current_stream(py, device)).transpose()
        };
        match self {
            Source::Tensor(t) => {
                let (py, t) = (t.py(), t.get());
                current(py, t.framework(), Some(t.device()))
            }
            Source::Dlpack { obj, device, .. } => current(obj.py(), Framework::of(obj), *device),
            Source::Torch { current, .. } => Ok(Some(*current)),
            Source::Cai { obj, interface } => match (interface.stream, Framework::of(obj)) {
                (Some(s), _) => Ok(Some(s)),
                (None, None) => Ok(None),
                (None, f) => current(obj.py(), f, Some(cuda::pointer_device(interface.data)?)),
            },
            Source::Capsule(_) => Ok(None),
        }
    }

    /// The argument as a devspan tensor: itself, or imported for the call only (see
    /// [`cuda::Releases`]; [`imported`] keeps it instead) to be used on `stream`, a resolved
    /// stream value.
    ///
    /// `record_ready`: an imported tensor's log records that its data is ready on `stream`, so
    /// that work on other streams waits for that. A tensor that only the call's own work on
    /// `stream` uses needs no such record: that work follows on `stream`, and records itself.
    ///
    /// The caller holds a [`cuda::ContextGuard`]: the import may leave another context current.
    pub(crate) fn import(self, stream: i64, record_ready: bool) -> PyResult<Arg<'py>> {
        self.import_as(stream, record_ready, true)
    }

    /// The argument as a devspan tensor kept beyond the call ([`Tensor::kept`]), its data
    /// ready on `stream` (recorded), which otherwise [`import`](Self::import) describes.
    pub(crate) fn import_kept(self, stream: i64) -> PyResult<Arg<'py>> {
        Ok(match self.import_as(stream, true, false)? {
            Arg::Temporary(t) => Arg::Temporary(t.kept()?),
            shared => shared,
        })
    }

    /// [`import`](Self::import); `for_call`: the tensor is for one call (a PyTorch tensor's
    /// owner is then shared with the other calls' imports of its memory, see
    /// [`cuda::STORAGES`]), otherwise it is to be kept.
    fn import_as(self, stream: i64, record_ready: bool, for_call: bool) -> PyResult<Arg<'py>> {
        let t = match self {
            Source::Tensor(t) => return Ok(Arg::Shared(t)),
            Source::Dlpack {
                obj, device_type, ..
            } => {
                let framework = Framework::of(&obj);
                import_dlpack(&obj, device_type, stream, record_ready)?.following(framework)
            }
            Source::Cai { obj, interface } => {
                let framework = Framework::of(&obj);
                import_cai(&obj, interface, stream, record_ready)?.following(framework)
            }
            Source::Torch {
                obj,
                layout,
                current,
            } => Tensor::import_torch(&obj, layout, stream, current, record_ready, for_call)?,
            Source::Capsule(obj) => {
                Tensor::import(capsule::take(&obj)?, stream, None, record_ready)?
            }
        };
        Ok(Arg::Temporary(t.for_one_call()))
    }
}

/// The stream value a call runs on: `stream` when given; else the stream that the first of
/// `sources` with a preference asks for (its framework's current stream, or the stream of its
/// CUDA Array Interface); else 1, the legacy default stream (what a DLPack producer assumes
/// when `__dlpack__` is called without a stream).
pub(crate) fn call_stream(sources: &[&Source<'_>], stream: Option<i64>) -> PyResult<i64> {
    if let Some(s) = stream {
        return Ok(s);
    }
    for source in sources {
        if let Some(s) = source.preferred_stream()? {
            return Ok(s);
        }
    }
    Ok(1)
}

/// Refuses a stream value that cannot name a stream (`ValueError`), before anything else is
/// done; first releases the tensors of earlier calls whose work has completed.
pub(crate) fn check_stream(stream: Option<i64>) -> PyResult<()> {
    cuda::RELEASES.reap();
    match stream {
        Some(s) => cuda::check_stream_value(s).map_err(PyValueError::new_err),
        None => Ok(()),
    }
}

/// A tensor argument: a devspan tensor, or one imported for this call only.
pub(crate) enum Arg<'py> {
    Shared(Bound<'py, Tensor>),
    Temporary(Tensor),
}

impl Arg<'_> {
    pub(crate) fn get(&self) -> &Tensor {
        match self {
            Arg::Shared(b) => b.get(),
            Arg::Temporary(t) => t,
        }
    }
}

/// The stream value to pass to a producer's `__dlpack__`: the array API asks for 1 rather
/// than 0 for the legacy default stream.
fn producer_stream(stream: i64) -> i64 {
    if stream == 0 { 1 } else { stream }
}

/// `(device type, device id)` of a DLPack producer: `__dlpack_device__()`, or kDLCUDA of an
/// unknown device when the producer has no such method. `Err(DeviceMismatch)` for memory that
/// a CUDA device cannot access.
fn dlpack_device(obj: &Bound<'_, PyAny>) -> PyResult<(i32, Option<usize>)> {
    if !obj.hasattr("__dlpack_device__")? {
        return Ok((DLDeviceType::CUDA.0, None));
    }
    let (kind, id): (i32, i64) = obj.call_method0("__dlpack_device__")?.extract()?;
    let cuda = [
        DLDeviceType::CUDA,
        DLDeviceType::CUDA_MANAGED,
        DLDeviceType::CUDA_HOST,
    ];
    if !cuda.iter().any(|d| d.0 == kind) {
        return Err(to_py(crate::exceptions::device_mismatch(format!(
            "a tensor on {} (device type {kind}, id {id}) is not memory a CUDA device can access; \
             kDLCUDA, kDLCUDAManaged and kDLCUDAHost are",
            DLDeviceType(kind).name()
        ))));
    }
    Ok((kind, usize::try_from(id).ok()))
}

/// Takes `obj.__dlpack__(stream=...)`'s capsule, asking the producer to order its pending work
/// before `stream`, and views it (`record_ready` as in [`Source::import`]).
fn import_dlpack(
    obj: &Bound<'_, PyAny>,
    device_type: i32,
    stream: i64,
    record_ready: bool,
) -> PyResult<Tensor> {
    let py = obj.py();
    let kwargs = PyDict::new(py);
    if device_type == DLDeviceType::CUDA.0 {
        kwargs.set_item("stream", producer_stream(stream))?;
    }
    kwargs.set_item("max_version", (1, 1))?;
    let cap = match obj.call_method("__dlpack__", (), Some(&kwargs)) {
        Ok(c) => c,
        // A producer older than DLPack 1.0 does not know `max_version`.
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            kwargs.del_item("max_version")?;
            obj.call_method("__dlpack__", (), Some(&kwargs))?
        }
        Err(e) => return Err(e),
    };
    let t = capsule::take(&cap)?;
    Tensor::import(t, stream, None, record_ready)
}

/// Views the memory that `interface` (read from `obj`) describes, keeping `obj` alive; the
/// interface's stream, if any, is linked to the tensor: `stream` waits for it now, and it is
/// kept in step with devspan's later work on the tensor (`record_ready` as in
/// [`Source::import`]).
fn import_cai(
    obj: &Bound<'_, PyAny>,
    interface: cai::Interface,
    stream: i64,
    record_ready: bool,
) -> PyResult<Tensor> {
    let device = cuda::pointer_device(interface.data)?;
    let link = interface.stream;
    let managed = interface
        .into_managed(device, obj.clone().unbind())
        .map_err(to_py)?;
    // SAFETY: `managed` is a live managed tensor made just now and handed over once; its shape
    // and strides hold `ndim` values each (contract 1); it describes the memory of a CUDA Array
    // Interface producer, which the interface promises is device-accessible and which `obj`,
    // held until the deleter runs, keeps alive (contract 2; its readiness is ordered through the
    // interface's stream below); writes follow the producer's read-only flag (contract 3); the
    // deleter frees a box and releases a Python reference, from any thread (contract 4).
    let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(managed) }.map_err(to_py)?;
    Tensor::import(t, stream, link, record_ready)
}
