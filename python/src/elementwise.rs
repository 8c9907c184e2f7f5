//! `devspan.ElementwiseKernel`: [`devspan::elementwise::ElementwiseKernel`] over DLPack and CUDA
//! Array Interface tensors.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple};

use super::{Arg, Source, call_stream, check_stream, cuda, scalar, to_py, with_dtype};
use devspan::DType;
use devspan::elementwise::{Arg as EwArg, ElementwiseKernel};

/// A CUDA C body over typed inputs and outputs, compiled by NVRTC and run over tensors of any
/// layout (DLPack or CUDA Array Interface producers: PyTorch, CuPy, JAX, Numba, devspan), in
/// the manner of CuPy's ``ElementwiseKernel``::
///
///     saxpy = devspan.ElementwiseKernel("f32 a, f32 x, f32 y", "f32 z", "z = a * x + y")
///     saxpy(2.0, x, y.T, z)            # inputs, then outputs
///
/// Declarations are ``type name`` lists (``f32``/``float32``/``float`` ...); ``f16`` and
/// ``bf16`` are ``float`` in the body. Python ``int``/``float``/``bool`` arguments are scalars of
/// the declared type; anything else is a tensor. Inputs broadcast to the outputs' shape;
/// outputs must not overlap each other, nor an input other than element for element. The
/// call runs on ``stream`` (None: the current stream of the framework that made the first
/// output, else of the first input that has one, else the legacy default stream), after
/// devspan's earlier work on every operand.
///
/// With ``cache_dir`` (a path), the PTX of each compiled variant is kept in that directory and
/// read back by later kernels and processes with the same source instead of compiling (best
/// effort: an unusable directory costs a compile, never an error).
///
/// The body runs unchecked on the GPU: it must only read its inputs and assign its outputs by
/// name. Errors: ``CompileError`` (with NVRTC's log), ``UnsupportedDtypeError``,
/// ``ShapeMismatchError``, ``AliasingError``, ``DeviceMismatchError``,
/// ``InvalidArgumentError``; ``TypeError`` for the wrong number of arguments.
#[pyclass(frozen, name = "ElementwiseKernel", module = "devspan")]
pub struct PyElementwiseKernel {
    kernel: ElementwiseKernel,
}

#[pymethods]
impl PyElementwiseKernel {
    #[new]
    #[pyo3(signature = (in_params, out_params, operation, *, cache_dir = None))]
    fn new(
        in_params: &str,
        out_params: &str,
        operation: &str,
        cache_dir: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        // SAFETY: the class documents the body's contract (it reads its inputs and assigns its
        // outputs by name), which Python callers take on as CuPy's do.
        let mut kernel =
            unsafe { ElementwiseKernel::new(in_params, out_params, operation) }.map_err(to_py)?;
        if let Some(dir) = cache_dir {
            kernel = kernel.with_cache_dir(dir);
        }
        Ok(Self { kernel })
    }

    /// The directory compiled variants are kept in (``cache_dir=``), or None.
    #[getter]
    fn cache_dir(&self) -> Option<std::path::PathBuf> {
        self.kernel.cache_dir().map(std::path::Path::to_path_buf)
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.kernel)
    }

    #[pyo3(signature = (*args, stream = None))]
    fn __call__(&self, args: &Bound<'_, PyTuple>, stream: Option<i64>) -> PyResult<()> {
        let _current = cuda::ContextGuard::save();
        check_stream(stream)?;
        let ins: Vec<DType> = self.kernel.inputs().map(|(_, t)| t).collect();
        let outs = self.kernel.outputs().count();
        if args.len() != ins.len() + outs {
            return Err(PyTypeError::new_err(format!(
                "{} arguments given; the kernel takes {} inputs then {} outputs",
                args.len(),
                ins.len(),
                outs
            )));
        }
        let items: Vec<Bound<'_, PyAny>> = args.iter().collect();
        let is_scalar = |o: &Bound<'_, PyAny>| {
            o.is_instance_of::<PyFloat>()
                || o.is_instance_of::<PyInt>()
                || o.is_instance_of::<PyBool>()
        };
        // The tensors, outputs first (their framework's stream comes first), with their slot;
        // PyTorch's current stream is asked once per device.
        let tensors = items
            .iter()
            .enumerate()
            .skip(ins.len())
            .chain(items.iter().enumerate().take(ins.len()))
            // Outputs are always tensors (a scalar is refused by its import).
            .filter(|&(k, item)| k >= ins.len() || !is_scalar(item));
        let mut sources: Vec<(usize, Source<'_>)> = Vec::with_capacity(items.len());
        for (k, item) in tensors {
            let source = match sources.first() {
                Some((_, first)) => Source::of_next(item, first)?,
                None => Source::of(item)?,
            };
            sources.push((k, source));
        }
        let refs: Vec<&Source<'_>> = sources.iter().map(|(_, s)| s).collect();
        let stream = call_stream(&refs, stream)?;
        let mut imported: Vec<(usize, Arg<'_>)> = Vec::with_capacity(sources.len());
        for (k, source) in sources {
            // Every operand is used on `stream` alone.
            imported.push((k, source.import(stream, false)?));
        }
        let tensor = |k: usize| imported.iter().find(|(i, _)| *i == k).map(|(_, a)| a.get());
        let first = imported[0].1.get();
        for (_, a) in &imported {
            if a.get().device() != first.device() {
                return Err(to_py(crate::exceptions::device_mismatch(format!(
                    "operands on CUDA devices {} and {}",
                    first.device(),
                    a.get().device()
                ))));
            }
        }
        let s = cuda::stream(first.ctx(), stream)?;
        let mut in_args = Vec::with_capacity(ins.len());
        for (k, t) in ins.iter().enumerate() {
            match tensor(k) {
                Some(tensor) => in_args.push(tensor.elementwise_input().map_err(to_py)?),
                None => in_args.push(with_dtype!(*t, T => EwArg::scalar(scalar::<T>(&items[k])?))),
            }
        }
        let mut out_args = Vec::with_capacity(outs);
        for k in ins.len()..args.len() {
            let tensor = tensor(k).expect("every output is a tensor");
            out_args.push(tensor.elementwise_output().map_err(to_py)?);
        }
        for (k, a) in &imported {
            a.get().before(&s, *k >= ins.len())?;
        }
        let done = self
            .kernel
            .launch_on(&s, &in_args, &mut out_args)
            .map_err(to_py);
        let record = || {
            let mut r = Ok(());
            for (_, a) in &imported {
                let x = a.get().after(&s);
                if r.is_ok() {
                    r = x;
                }
            }
            r
        };
        cuda::settle(done, record, || cuda::synchronize(&s))
    }
}
