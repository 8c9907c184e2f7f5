//! User elementwise kernels over strided views, compiled at run time by NVRTC.
//!
//! An [`ElementwiseKernel`] is a CUDA C body over typed inputs and outputs, in the manner of
//! CuPy's `ElementwiseKernel`:
//!
//! ```no_run
//! # fn main() -> devspan::Result<()> {
//! use devspan::elementwise::{Arg, ElementwiseKernel, Out};
//! use ndarray::s;
//! let stream = devspan::default_stream(0)?;
//! // SAFETY: the body reads its inputs and writes its output by name, nothing else.
//! let saxpy = unsafe { ElementwiseKernel::new("f32 a, f32 x, f32 y", "f32 z", "z = a * x + y")? };
//! let x = devspan::DeviceArray::from_host(&stream, &ndarray::Array2::<f32>::ones((64, 32)))?;
//! let y = devspan::DeviceArray::<f32, _>::from_elem(&stream, 64, 0.5)?; // broadcast as a row
//! let mut z = devspan::DeviceArray::<f32, _>::zeros(&stream, (32, 64))?;
//! // Any layout: a transposed input, a broadcast one, a strided output.
//! let xt = x.t();
//! saxpy.launch(&[Arg::scalar(2.0f32), (&xt).into(), (&y.view()).into()], &mut [(&mut z).into()])?;
//! assert_eq!(z.to_host()?[[3, 5]], 2.5);
//! # Ok(()) }
//! ```
//!
//! - **Types.** Every element type devspan has (`u8` ... `f64`), spelt as in Rust (`f32`),
//!   numpy (`float32`) or C (`float`). In the body, `f16` and `bf16` values are `float`: they
//!   are converted on load and rounded to nearest-even on store.
//! - **Operands.** Inputs are arrays (any [`DeviceView`] or array, passed
//!   as [`Arg`]) or scalars ([`Arg::scalar`]); outputs are writable views or arrays ([`Out`]).
//!   At most [`MAX_ARRAYS`] arrays and [`MAX_SCALARS`] scalars. The outputs share one shape;
//!   inputs broadcast to it by ndarray's rules.
//! - **Layouts.** Any strides (negative, zero, permuted), any rank: the axes of all operands
//!   are normalised together (unit axes dropped, ordered by the first output's strides,
//!   neighbours merged where every operand allows), and at most [`MAX_RANK`] axes may remain.
//!   All-contiguous operands take a path without index arithmetic; 32-bit index arithmetic is
//!   used where every offset fits.
//! - **Aliasing.** Outputs must not overlap each other. An input may be an output's own
//!   memory element for element (same address, strides and type: an in-place update);
//!   any other overlap between an input and an output is refused with
//!   `ErrorKind::Aliasing`.
//! - **Streams and lifetimes.** [`launch`](ElementwiseKernel::launch) runs on the first output's
//!   stream, [`launch_on`](ElementwiseKernel::launch_on) on the stream given, after the work
//!   already queued on every operand, and keeps every operand's memory alive until the kernel
//!   has run, as every devspan operation does. Launches can be captured into CUDA graphs.
//! - **Compilation.** NVRTC (loaded at run time, `libnvrtc.so`) compiles each variant once per
//!   kernel object and context: a variant is the pattern of scalar and array inputs, the
//!   number of axes after normalisation, the index width and the contiguous path. A compile
//!   error returns `ErrorKind::Compile` with NVRTC's log, where
//!   the body's lines are numbered from 1 in a file named `body`. With
//!   [`with_cache_dir`](ElementwiseKernel::with_cache_dir) the PTX of each variant is also kept
//!   on disk and read back by later processes instead of compiling.
//!
//! The body is CUDA C statements (a trailing `;` may be left out) that read the inputs and
//! assign the outputs by name. It may declare locals and call CUDA's device functions (`sinf`,
//! `fmaf`, `__fdividef`, ...); it cannot include headers. Names starting with `ds_` or `__`
//! are reserved.

mod cache;
mod normalize;
mod pairs;
mod source;

use std::borrow::Cow;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use ndarray::Dimension;

use source::{Flags, Param, Variant};
pub use source::{MAX_ARRAYS, MAX_RANK, MAX_SCALARS};

use crate::bytes::RawBytes;
use crate::device::check_stream;
use crate::element::{DType, DeviceElement};
use crate::error::{Error, ErrorKind, Result};
use crate::owner::KeepAlive;
use crate::view::{DeviceBase, DeviceView, DeviceViewMut, SpanData, SpanDataMut};

/// A CUDA C body over typed inputs and outputs, compiled by NVRTC for the layouts it meets and
/// launched over any strided views. See the [module docs](self).
pub struct ElementwiseKernel {
    inputs: Vec<Param>,
    outputs: Vec<Param>,
    body: String,
    compiled: Mutex<HashMap<(usize, Variant), CudaFunction>>,
    /// Where compiled variants are kept between processes, if anywhere.
    cache_dir: Option<PathBuf>,
}

impl std::fmt::Debug for ElementwiseKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |p: &[Param]| {
            p.iter()
                .map(|p| format!("{} {}", p.dtype, p.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        f.debug_struct("ElementwiseKernel")
            .field("inputs", &list(&self.inputs))
            .field("outputs", &list(&self.outputs))
            .field("body", &self.body)
            .field("cache_dir", &self.cache_dir)
            .finish()
    }
}

/// An operand's memory handle: borrowed from a view, or held (an operand made from raw parts).
enum RawRef<'a> {
    Borrowed(&'a RawBytes<'a>),
    Owned(RawBytes<'a>),
}

impl<'a> std::ops::Deref for RawRef<'a> {
    type Target = RawBytes<'a>;
    fn deref(&self) -> &RawBytes<'a> {
        match self {
            RawRef::Borrowed(r) => r,
            RawRef::Owned(r) => r,
        }
    }
}

/// An array operand: its memory's handle, element type and layout (strides and offset in
/// elements).
struct ArrayRef<'a> {
    raw: RawRef<'a>,
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
}

impl<'a> ArrayRef<'a> {
    fn new<S: SpanData, D: Dimension>(v: &'a DeviceBase<S, D>) -> Self {
        ArrayRef {
            raw: RawRef::Borrowed(v.raw()),
            dtype: S::Elem::DTYPE,
            shape: v.layout.shape().to_vec(),
            strides: v.layout.strides().to_vec(),
            offset: v.layout.offset(),
        }
    }

    /// Address of the element at multi-index 0; only valid once the access is prepared.
    fn ptr(&self) -> u64 {
        self.raw.ptr() + (self.offset * self.dtype.size()) as u64
    }

    /// Bytes `[lo, hi)` reached, or `None` for no element (valid once the access is prepared).
    fn reach(&self, shape: &[usize], strides: &[isize]) -> Option<(u64, u64)> {
        if shape.contains(&0) {
            return None;
        }
        let (mut lo, mut hi) = (0i128, 0i128);
        for (&len, &s) in shape.iter().zip(strides) {
            let span = (len as i128 - 1) * s as i128;
            if span < 0 { lo += span } else { hi += span }
        }
        let size = self.dtype.size() as i128;
        let base = self.ptr() as i128;
        Some(((base + lo * size) as u64, (base + (hi + 1) * size) as u64))
    }
}

/// An input of [`ElementwiseKernel::launch`]: a view or array (`(&view).into()`), or a scalar
/// ([`Arg::scalar`]).
pub struct Arg<'a>(ArgKind<'a>);

enum ArgKind<'a> {
    Array(ArrayRef<'a>),
    Scalar(DType, u64),
}

impl Arg<'static> {
    /// A scalar input of `value`'s element type.
    pub fn scalar<T: DeviceElement>(value: T) -> Self {
        Arg(ArgKind::Scalar(T::DTYPE, value.to_bits_u64()))
    }
}

impl<'a> ArrayRef<'a> {
    /// An operand that holds a view's memory handle `raw` itself, with the view's `layout`.
    fn held<D: Dimension>(raw: RawBytes<'a>, dtype: DType, layout: &crate::Layout<D>) -> Self {
        ArrayRef {
            raw: RawRef::Owned(raw),
            dtype,
            shape: layout.shape().to_vec(),
            strides: layout.strides().to_vec(),
            offset: layout.offset(),
        }
    }
}

impl<'a, T: DeviceElement, D: Dimension> From<DeviceView<'a, T, D>> for Arg<'a> {
    /// An input that holds the view: for views made for one launch, such as a binding's views
    /// of a dynamically typed tensor.
    fn from(v: DeviceView<'a, T, D>) -> Self {
        Arg(ArgKind::Array(ArrayRef::held(
            v.span.raw,
            T::DTYPE,
            &v.layout,
        )))
    }
}

impl<'a, T: DeviceElement, D: Dimension> From<DeviceViewMut<'a, T, D>> for Out<'a> {
    /// An output that holds the view (see the `From<DeviceView>` input).
    fn from(v: DeviceViewMut<'a, T, D>) -> Self {
        Out(ArrayRef::held(v.span.raw, T::DTYPE, &v.layout), PhantomData)
    }
}

impl<'a, S: SpanData, D: Dimension> From<&'a DeviceBase<S, D>> for Arg<'a> {
    fn from(v: &'a DeviceBase<S, D>) -> Self {
        Arg(ArgKind::Array(ArrayRef::new(v)))
    }
}

/// An output of [`ElementwiseKernel::launch`]: a writable view or array
/// (`(&mut array).into()`), borrowed exclusively.
pub struct Out<'a>(ArrayRef<'a>, PhantomData<&'a mut ()>);

impl<'a, S: SpanDataMut, D: Dimension> From<&'a mut DeviceBase<S, D>> for Out<'a> {
    fn from(v: &'a mut DeviceBase<S, D>) -> Self {
        let v: &'a DeviceBase<S, D> = v;
        Out(ArrayRef::new(v), PhantomData)
    }
}

/// The argument block of a compiled variant: its words, then unused ones (the kernel reads
/// only the words its parameter declares).
#[repr(C)]
#[derive(Clone, Copy)]
struct Words([u64; source::MAX_ARG_BYTES / 8]);

// SAFETY: plain `#[repr(C)]` integers, valid to copy byte for byte into a parameter block; the
// kernel's parameter is a prefix of it (`source::arg_words`).
unsafe impl cudarc::driver::DeviceRepr for Words {}

/// Broadcast strides of an input of `shape`/`strides` to `to` (ndarray's rules), or `None`.
fn broadcast(shape: &[usize], strides: &[isize], to: &[usize]) -> Option<Vec<isize>> {
    if shape.len() > to.len() {
        return None;
    }
    let pad = to.len() - shape.len();
    let mut out = vec![0isize; to.len()];
    for (k, &len) in to.iter().enumerate().skip(pad) {
        let (l, s) = (shape[k - pad], strides[k - pad]);
        out[k] = if l == len {
            s
        } else if l == 1 {
            0
        } else {
            return None;
        };
    }
    Some(out)
}

/// Scalar bits as the kernel reads them: `f16` and `bf16` as `f32` bits, others as they are.
fn scalar_word(t: DType, bits: u64) -> u64 {
    match t {
        DType::F16 => u64::from(half::f16::from_bits(bits as u16).to_f32().to_bits()),
        DType::BF16 => u64::from(half::bf16::from_bits(bits as u16).to_f32().to_bits()),
        _ => bits,
    }
}

impl ElementwiseKernel {
    /// A kernel with `inputs` and `outputs` declared as comma-separated `type name` lists
    /// (`"f32 a, f32 x"`, `"f32 z"`) and `body`, CUDA C statements that compute the outputs
    /// from the inputs. Nothing is compiled until the first launch.
    ///
    /// `Err(InvalidArgument)` for a malformed declaration, a reserved or repeated name, no
    /// output, or more than [`MAX_ARRAYS`] declarations; `Err(UnsupportedDtype)` for an
    /// unknown type.
    ///
    /// # Safety
    /// The body runs on the GPU with no bounds checks. It must only read its inputs and assign
    /// its outputs by name, reach no memory through pointers, and not use the generated
    /// kernel's own names (those starting with `ds_`). devspan then guarantees that every
    /// access is in bounds of the operands' memory and ordered after earlier work on it.
    pub unsafe fn new(inputs: &str, outputs: &str, body: &str) -> Result<Self> {
        let inputs = source::parse_params(inputs, "inputs")?;
        let outputs = source::parse_params(outputs, "outputs")?;
        if outputs.is_empty() {
            return Err(Error::invalid(
                "an elementwise kernel needs at least one output",
            ));
        }
        if inputs.len() + outputs.len() > MAX_ARRAYS + MAX_SCALARS || outputs.len() > MAX_ARRAYS {
            return Err(Error::invalid(format!(
                "{} inputs and {} outputs: at most {MAX_ARRAYS} arrays and {MAX_SCALARS} scalars",
                inputs.len(),
                outputs.len()
            )));
        }
        let mut names: Vec<&str> = inputs.iter().chain(&outputs).map(|p| &*p.name).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid(format!(
                "parameter `{}` is declared twice",
                w[0]
            )));
        }
        if body.contains('\0') {
            return Err(Error::invalid("the body contains a NUL character"));
        }
        Ok(ElementwiseKernel {
            inputs,
            outputs,
            body: body.to_string(),
            compiled: Mutex::new(HashMap::new()),
            cache_dir: None,
        })
    }

    /// The kernel, keeping the PTX of each variant it compiles in directory `dir` (made when
    /// first written) and reading it from there instead of compiling where it was kept before,
    /// by this or another process, for the same generated source and compile options. A cache
    /// file is used only where the source and options stored in it match exactly. The cache
    /// is best effort: a directory that cannot be read or written costs a compile, never an
    /// error. The driver still turns the PTX into machine code at the module load (its own
    /// JIT cache keeps that).
    ///
    /// The files are loaded and run as GPU code: give a directory that only trusted users can
    /// write (not a shared temporary directory).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use devspan::elementwise::ElementwiseKernel;
    /// // SAFETY: the body reads `x` and assigns `z`, nothing else.
    /// let k = unsafe { ElementwiseKernel::new("f32 x", "f32 z", "z = 2.0f * x") }?
    ///     .with_cache_dir("kernel-cache");
    /// assert!(k.cache_dir().is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// The directory compiled variants are kept in ([`with_cache_dir`](Self::with_cache_dir)).
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// The declared inputs, as (name, element type).
    pub fn inputs(&self) -> impl Iterator<Item = (&str, DType)> {
        self.inputs.iter().map(|p| (p.name.as_str(), p.dtype))
    }

    /// The declared outputs, as (name, element type).
    pub fn outputs(&self) -> impl Iterator<Item = (&str, DType)> {
        self.outputs.iter().map(|p| (p.name.as_str(), p.dtype))
    }

    /// Runs a kernel with one output of type `U` into a new array, on `stream`: the
    /// device form of ndarray's `mapv` and `Zip::map_collect`. The array's shape is the array
    /// inputs' shapes broadcast together (ndarray's co-broadcasting: axes aligned at the end,
    /// extents equal or 1); a 0-d array when every input is a scalar.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use devspan::elementwise::{Arg, ElementwiseKernel};
    /// let stream = devspan::default_stream(0)?;
    /// // SAFETY: the body reads its inputs and assigns its output by name.
    /// let hypot = unsafe { ElementwiseKernel::new("f32 x, f32 y", "f32 r", "r = sqrtf(x * x + y * y)")? };
    /// let col = devspan::DeviceArray::<f32, _>::from_elem(&stream, (3, 1), 3.0)?;
    /// let row = devspan::DeviceArray::<f32, _>::from_elem(&stream, 4, 4.0)?;
    /// let r = hypot.apply::<f32>(&stream, &[(&col.view()).into(), (&row.view()).into()])?;
    /// assert_eq!(r.shape(), &[3, 4]);
    /// assert_eq!(r.to_host()?[[2, 3]], 5.0);
    /// # Ok(()) }
    /// ```
    ///
    /// The array is allocated on `stream`, so `apply` is refused (`StreamCapture`) while the
    /// stream captures a graph; [`launch_on`](Self::launch_on) into an existing array is not.
    ///
    /// Errors: as [`launch_on`](Self::launch_on); `InvalidArgument` for a kernel with more than
    /// one output, `UnsupportedDtype` when `U` is not its output's type, `ShapeMismatch` for
    /// inputs that do not broadcast together.
    pub fn apply<U: DeviceElement>(
        &self,
        stream: &Arc<CudaStream>,
        inputs: &[Arg<'_>],
    ) -> Result<crate::DeviceArray<U, ndarray::IxDyn>> {
        if self.outputs.len() != 1 {
            return Err(Error::invalid(format!(
                "apply needs a kernel with one output; this one has {}",
                self.outputs.len()
            )));
        }
        check_type(U::DTYPE, &self.outputs[0])?;
        let mut shape: Vec<usize> = Vec::new();
        for (a, p) in inputs.iter().zip(&self.inputs) {
            let ArgKind::Array(r) = &a.0 else { continue };
            if r.shape.len() > shape.len() {
                let pad = r.shape.len() - shape.len();
                shape.splice(0..0, std::iter::repeat_n(1, pad));
            }
            let off = shape.len() - r.shape.len();
            for (k, &len) in r.shape.iter().enumerate() {
                let have = &mut shape[off + k];
                if *have == 1 {
                    *have = len;
                } else if len != 1 && len != *have {
                    return Err(Error::shape(format!(
                        "input `{}` of shape {:?} does not broadcast with the other inputs (shape so far {:?})",
                        p.name, r.shape, shape
                    )));
                }
            }
        }
        // SAFETY: the launch below writes every element before the array is returned; on
        // error the array is dropped unread.
        let mut out =
            unsafe { crate::DeviceArray::<U, _>::uninit(stream, ndarray::IxDyn(&shape))? };
        self.launch_on(stream, inputs, &mut [(&mut out).into()])?;
        Ok(out)
    }

    /// Runs the kernel on the first output's stream: see [`launch_on`](Self::launch_on).
    pub fn launch(&self, inputs: &[Arg<'_>], outputs: &mut [Out<'_>]) -> Result<()> {
        let Some(first) = outputs.first() else {
            return Err(Error::invalid(format!(
                "{} outputs given, {} declared",
                outputs.len(),
                self.outputs.len()
            )));
        };
        let stream = first
            .0
            .raw
            .keep
            .stream()
            .ok_or_else(|| crate::view::no_stream("output view", "launch"))?;
        self.launch_on(&stream, inputs, outputs)
    }

    /// Runs the kernel on `stream` over `inputs` and `outputs`, in declaration order.
    ///
    /// Errors, before anything is enqueued: `InvalidArgument` for the wrong number of
    /// operands, an array where a scalar is declared (scalars may be given for array inputs,
    /// and compile a variant of their own), or more than [`MAX_RANK`] axes left after
    /// normalisation; `UnsupportedDtype` for an operand of another type than declared;
    /// `ShapeMismatch` for outputs of different shapes or an input that does not broadcast to
    /// them; `DeviceMismatch` for an operand on another device than `stream`'s; `Aliasing`
    /// for overlapping outputs, or an input overlapping an output other than element for
    /// element; `Compile` when NVRTC is missing or refuses the body.
    pub fn launch_on(
        &self,
        stream: &Arc<CudaStream>,
        inputs: &[Arg<'_>],
        outputs: &mut [Out<'_>],
    ) -> Result<()> {
        if inputs.len() != self.inputs.len() || outputs.len() != self.outputs.len() {
            return Err(Error::invalid(format!(
                "{} inputs and {} outputs given, {} and {} declared",
                inputs.len(),
                outputs.len(),
                self.inputs.len(),
                self.outputs.len()
            )));
        }
        let shape: &[usize] = &outputs[0].0.shape;
        let operands = outputs.len() + inputs.len();
        let mut arrays: Vec<&ArrayRef<'_>> = Vec::with_capacity(operands);
        let mut names: Vec<&str> = Vec::with_capacity(operands);
        // Each operand's strides over `shape`: its own where its shape is `shape`.
        let mut strides: Vec<Cow<'_, [isize]>> = Vec::with_capacity(operands);
        for (o, p) in outputs.iter().zip(&self.outputs) {
            check_type(o.0.dtype, p)?;
            if o.0.shape != shape {
                return Err(Error::shape(format!(
                    "output `{}` has shape {:?}, the first output {:?}",
                    p.name, o.0.shape, shape
                )));
            }
            arrays.push(&o.0);
            names.push(&p.name);
            strides.push(Cow::Borrowed(&o.0.strides));
        }
        let mut scalars = [0u64; MAX_SCALARS];
        let mut n_scalars = 0;
        for (a, p) in inputs.iter().zip(&self.inputs) {
            match &a.0 {
                ArgKind::Scalar(t, bits) => {
                    check_type(*t, p)?;
                    // Counted past the limit, which is checked below.
                    if let Some(w) = scalars.get_mut(n_scalars) {
                        *w = scalar_word(*t, *bits);
                    }
                    n_scalars += 1;
                }
                ArgKind::Array(r) => {
                    check_type(r.dtype, p)?;
                    let s = if r.shape == shape {
                        Cow::Borrowed(&r.strides[..])
                    } else {
                        Cow::Owned(broadcast(&r.shape, &r.strides, shape).ok_or_else(|| {
                            Error::shape(format!(
                                "input `{}` of shape {:?} does not broadcast to the outputs' shape {:?}",
                                p.name, r.shape, shape
                            ))
                        })?)
                    };
                    arrays.push(r);
                    names.push(&p.name);
                    strides.push(s);
                }
            }
        }
        if arrays.len() > MAX_ARRAYS || n_scalars > MAX_SCALARS {
            return Err(Error::invalid(format!(
                "{} array and {n_scalars} scalar operands: at most {MAX_ARRAYS} and {MAX_SCALARS}",
                arrays.len(),
            )));
        }
        let scalars = &scalars[..n_scalars];
        let scalar_inputs: Flags = inputs
            .iter()
            .map(|a| matches!(a.0, ArgKind::Scalar(..)))
            .collect();
        for (a, name) in arrays.iter().zip(&names) {
            check_stream(stream, a.raw.device, format_args!("operand `{name}`"))?;
        }
        if shape.contains(&0) {
            return Ok(());
        }
        let norm = normalize::normalize(shape, &strides);
        source::check_rank(norm.shape.len(), arrays.len(), n_scalars)?;
        let tiled = norm.tiled();
        let types: Vec<DType> = arrays.iter().map(|a| a.dtype).collect();
        let pairs = tiled && source::pairs_for(&types);
        let iterations = norm.iterations(tiled, pairs);
        let input_types = &types[self.outputs.len()..];
        let staged = if tiled {
            norm.staged(self.outputs.len(), input_types, pairs)
                .into_iter()
                .collect()
        } else {
            Flags::default()
        };
        let mut variant = Variant {
            scalar_inputs,
            rank: norm.shape.len(),
            // The iteration index must fit as well as the elements' offsets.
            idx32: norm.fits_32() && iterations < 1 << 31,
            contiguous: norm.contiguous(),
            tiled,
            staged,
            vector: false,
            pairs,
            paired: Flags::default(),
        };
        let outs = self.outputs.len();
        let keeps: Vec<(&KeepAlive<'_>, bool)> = arrays
            .iter()
            .enumerate()
            .map(|(k, a)| (&a.raw.keep, k < outs))
            .collect();
        KeepAlive::accessing_all(&keeps, stream, || {
            check_aliasing(&arrays, &strides, shape, outs, &self.outputs)?;
            // Addresses are known once the accesses are prepared.
            variant.vector = variant.contiguous && arrays.iter().all(|a| a.ptr() % 16 == 0);
            if pairs {
                variant.paired = arrays
                    .iter()
                    .enumerate()
                    .map(|(k, a)| {
                        let staged = k >= outs && variant.staged.get(k - outs);
                        norm.pairable(k, staged, a.ptr(), a.dtype.size())
                    })
                    .collect();
            }
            let f = self.function(stream, &variant)?;
            let r = norm.shape.len();
            let mut words = Words([0; source::MAX_ARG_BYTES / 8]);
            let mut w = 0;
            let mut put = |v: u64| {
                words.0[w] = v;
                w += 1;
            };
            put(iterations as u64);
            norm.shape.iter().for_each(|&l| put(l as u64));
            for s in &norm.strides {
                s.iter().for_each(|&st| put(st as i64 as u64));
            }
            arrays.iter().for_each(|a| put(a.ptr()));
            scalars.iter().for_each(|&s| put(s));
            debug_assert!(w <= source::arg_words(r, arrays.len(), scalars.len()));
            // One pass of blocks covers everything (a block's threads take two groups of
            // vectors each on the vector path, `PER_THREAD` elements or one tile otherwise);
            // the kernels' grid-stride loops also take smaller grids.
            let threads = source::threads(&variant);
            let per_block = if variant.vector {
                (threads * 2 * source::vector_width(&types)) as u64
            } else {
                (threads * source::PER_THREAD) as u64
            };
            let blocks = (iterations as u64)
                .div_ceil(per_block)
                .min(i32::MAX as u64)
                .max(1) as u32;
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (threads as u32, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&f);
            b.arg(&words);
            // SAFETY: every operand's layout is validated against its span, which its
            // keep-alive holds until the kernel has run; the offsets the kernel computes are
            // those of the normalised layouts (the same element sets, broadcast inputs read
            // only), in bounds; outputs do not overlap each other nor any input other than
            // element for element (checked above), and the body touches only its operands
            // (the contract of `ElementwiseKernel::new`).
            unsafe { b.launch(cfg)? };
            Ok(())
        })
    }

    /// The compiled function of `variant` in `stream`'s context, compiling it on first use.
    fn function(&self, stream: &Arc<CudaStream>, variant: &Variant) -> Result<CudaFunction> {
        let ctx = stream.context();
        let key = (ctx.cu_ctx() as usize, *variant);
        let mut c = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = c.get(&key) {
            return Ok(f.clone());
        }
        let src = source::source(&self.inputs, &self.outputs, &self.body, variant);
        let (major, minor) = ctx.compute_capability()?;
        let options = compile_options(major, minor);
        let load = |ptx: String| -> Result<CudaFunction> {
            // The first launch of a variant may happen while the stream captures a graph.
            let _relaxed = crate::capture::RelaxedMode::enter()?;
            let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx))?;
            Ok(module.load_function(source::ENTRY)?)
        };
        let dir = self.cache_dir.as_deref();
        let cached = dir
            .and_then(|d| cache::load(d, &src, &options.join(" ")))
            .and_then(|ptx| load(ptx).ok());
        let f = match cached {
            Some(f) => f,
            None => {
                let ptx = compile(&src, &options)?.to_src();
                if let Some(d) = dir {
                    // Best effort: a cache that cannot be written only costs later compiles.
                    let _ = cache::store(d, &src, &options.join(" "), &ptx);
                }
                load(ptx)?
            }
        };
        c.insert(key, f.clone());
        Ok(f)
    }
}

fn check_type(t: DType, p: &Param) -> Result<()> {
    if t == p.dtype {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::UnsupportedDtype,
        format!("`{}` is declared {} but given {t}", p.name, p.dtype),
    ))
}

/// Refuses overlapping outputs, and inputs overlapping an output other than element for
/// element. `arrays` holds the outputs first (`outs` of them); `strides` are broadcast to
/// `shape`.
fn check_aliasing(
    arrays: &[&ArrayRef<'_>],
    strides: &[Cow<'_, [isize]>],
    shape: &[usize],
    outs: usize,
    names: &[Param],
) -> Result<()> {
    let reach: Vec<Option<(u64, u64)>> = arrays
        .iter()
        .zip(strides)
        .map(|(a, s)| a.reach(shape, s))
        .collect();
    let overlap = |i: usize, j: usize| match (reach[i], reach[j]) {
        (Some((a0, a1)), Some((b0, b1))) => {
            arrays[i].raw.device == arrays[j].raw.device && a0 < b1 && b0 < a1
        }
        _ => false,
    };
    for o in 0..outs {
        for j in 0..arrays.len() {
            if j == o || !overlap(o, j) {
                continue;
            }
            let same = j >= outs
                && arrays[j].dtype == arrays[o].dtype
                && arrays[j].ptr() == arrays[o].ptr()
                && strides[j] == strides[o];
            if !same {
                return Err(Error::aliasing(format!(
                    "output `{}` overlaps {} operand {j} (outputs must not overlap each other, nor an input other than element for element)",
                    names[o].name,
                    if j < outs { "output" } else { "input" }
                )));
            }
        }
    }
    Ok(())
}

/// NVRTC's options for compute capability `major.minor`.
fn compile_options(major: i32, minor: i32) -> Vec<String> {
    // 177: a helper the variant does not use (the prelude defines them all); 550: the direct
    // offsets of an input the variant reads through shared memory instead.
    vec![
        format!("--gpu-architecture=compute_{major}{minor}"),
        "--diag-suppress=177,550".into(),
    ]
}

/// PTX of `src` compiled with `options`, or `Err(Compile)` with NVRTC's log.
fn compile(src: &str, options: &[String]) -> Result<cudarc::nvrtc::Ptx> {
    // A missing library is an error instead of cudarc's panic.
    if !crate::driver::nvrtc_present() {
        return Err(Error::new(
            ErrorKind::Compile,
            "NVRTC (libnvrtc.so) could not be loaded; install the CUDA toolkit's NVRTC or put its library on LD_LIBRARY_PATH",
        ));
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options: options.to_vec(),
        name: Some("devspan_elementwise.cu".into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(src, opts).map_err(|e| {
        let message = match &e {
            cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                format!("NVRTC refused the kernel:\n{}", log.to_string_lossy())
            }
            other => format!("NVRTC failed: {other:?}"),
        };
        Error::new(ErrorKind::Compile, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(i: &str, o: &str) -> ErrorKind {
        // SAFETY: nothing is compiled or launched.
        unsafe { ElementwiseKernel::new(i, o, "z = x") }
            .unwrap_err()
            .kind()
            .clone()
    }

    #[test]
    fn declarations_are_checked_when_the_kernel_is_made() {
        assert_eq!(new("f32 x", ""), ErrorKind::InvalidArgument);
        assert_eq!(new("f32 x, f32 x", "f32 z"), ErrorKind::InvalidArgument);
        assert_eq!(new("f32 x", "f32 x"), ErrorKind::InvalidArgument);
        assert_eq!(new("f32 x", "c64 z"), ErrorKind::UnsupportedDtype);
        let many = (0..17)
            .map(|i| format!("f32 x{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        assert_eq!(new(&many, "f32 z"), ErrorKind::InvalidArgument);
        // SAFETY: nothing is compiled or launched.
        let k = unsafe { ElementwiseKernel::new("bf16 x, i64 n", "f64 z", "z = x * n") }.unwrap();
        let d = format!("{k:?}");
        assert!(d.contains("bf16 x, i64 n") && d.contains("f64 z"), "{d}");
    }

    #[test]
    fn broadcasting_follows_ndarray() {
        assert_eq!(broadcast(&[3], &[1], &[2, 3]), Some(vec![0, 1]));
        assert_eq!(broadcast(&[2, 1], &[5, 7], &[2, 3]), Some(vec![5, 0]));
        assert_eq!(broadcast(&[2, 3], &[3, 1], &[2, 3]), Some(vec![3, 1]));
        assert_eq!(broadcast(&[2], &[1], &[2, 3]), None);
        assert_eq!(broadcast(&[1, 2, 3], &[6, 3, 1], &[2, 3]), None);
        assert_eq!(broadcast(&[], &[], &[2, 3]), Some(vec![0, 0]));
    }

    #[test]
    fn half_scalars_reach_the_kernel_as_f32() {
        let h = half::f16::from_f32(1.5).to_bits() as u64;
        assert_eq!(scalar_word(DType::F16, h), u64::from(1.5f32.to_bits()));
        let b = half::bf16::from_f32(-2.0).to_bits() as u64;
        assert_eq!(scalar_word(DType::BF16, b), u64::from((-2.0f32).to_bits()));
        assert_eq!(scalar_word(DType::I32, 7), 7);
    }

    /// Every kind of variant of kernels over several element types compiles with NVRTC where
    /// the library loads (the machine needs no GPU); `DEVSPAN_REQUIRE_NVRTC=1` makes a missing
    /// library a failure.
    #[test]
    fn every_kind_of_variant_compiles_with_nvrtc() {
        if cfg!(miri) {
            // Miri loads no libraries.
            return;
        }
        if !crate::driver::nvrtc_present() {
            assert!(
                std::env::var("DEVSPAN_REQUIRE_NVRTC").as_deref() != Ok("1"),
                "DEVSPAN_REQUIRE_NVRTC=1 but NVRTC could not be loaded"
            );
            eprintln!("skipped: NVRTC could not be loaded");
            return;
        }
        let signatures = [
            ("f32 a, f32 x, f32 y", "f32 z", "z = a * x + y"),
            ("f32 a, f16 x, f16 y", "f16 z", "z = a * x + y"),
            ("u8 x, bf16 y, i16 c", "f32 z, u8 w", "z = x + y * c; w = x"),
        ];
        let mut compiled = 0;
        for (i, o, body) in signatures {
            let inputs = source::parse_params(i, "inputs").unwrap();
            let outputs = source::parse_params(o, "outputs").unwrap();
            let scalar_inputs: Vec<bool> = inputs.iter().map(|p| p.name == "a").collect();
            let n_in = scalar_inputs.iter().filter(|s| !**s).count();
            let arrays = outputs.len() + n_in;
            let base = Variant {
                scalar_inputs: scalar_inputs.iter().copied().collect(),
                rank: 3,
                idx32: true,
                contiguous: false,
                tiled: false,
                staged: Flags::default(),
                vector: false,
                pairs: false,
                paired: Flags::default(),
            };
            let staged = |k: usize| (0..n_in).map(|j| j % 2 == k % 2).collect::<Flags>();
            let variants = [
                base,
                Variant {
                    idx32: false,
                    ..base
                },
                Variant {
                    rank: 1,
                    contiguous: true,
                    vector: true,
                    ..base
                },
                Variant {
                    tiled: true,
                    staged: staged(0),
                    ..base
                },
                Variant {
                    tiled: true,
                    pairs: true,
                    staged: staged(0),
                    paired: (0..arrays).map(|k| k % 2 == 0).collect(),
                    ..base
                },
                Variant {
                    tiled: true,
                    pairs: true,
                    idx32: false,
                    staged: staged(1),
                    paired: (0..arrays).map(|k| k % 2 == 1).collect(),
                    ..base
                },
            ];
            // The strided and tiled ones also at ranks 2 (no outer axis), 6 and `MAX_RANK`.
            let ranks = variants.iter().flat_map(|v| {
                let r = if v.contiguous {
                    vec![1]
                } else {
                    vec![2, 3, 6, MAX_RANK]
                };
                r.into_iter().map(move |rank| Variant { rank, ..*v })
            });
            for v in ranks {
                let src = source::source(&inputs, &outputs, body, &v);
                if let Err(e) = compile(&src, &compile_options(9, 0)) {
                    panic!("{v:?} of `{i}` -> `{o}`: {e}\n{src}");
                }
                compiled += 1;
            }
        }
        eprintln!("{compiled} variants compiled with NVRTC");
    }
}
