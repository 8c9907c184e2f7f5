//! # devspan
//!
//! Typed spans and ndarray-style strided views over GPU memory, whoever owns it, with the
//! copy, fill and cast kernels and host <-> device transfers that every user of such views
//! otherwise writes by hand.
//!
//! ## Layers
//!
//! | devspan | what it is | nearest relative |
//! |---|---|---|
//! | [`DeviceBytes`] / [`DeviceBytesMut`] | device pointer + byte length + device + keep-alive | `&[u8]`, `bytes::Bytes` |
//! | [`DeviceSpan<T>`] / [`DeviceSpanMut<T>`] | typed 1-D, alignment and length checked once | `&[T]`, cudarc `CudaView<T>` |
//! | [`DeviceBase<S, D>`] | storage + shape, signed strides (elements), offset | ndarray `ArrayBase<S, D>` |
//! | [`DeviceView<T, D>`] / [`DeviceViewMut<T, D>`] | `DeviceBase` over a borrowed span | ndarray `ArrayView<T, D>` / `ArrayViewMut` |
//! | [`DeviceArray<T, D>`] | `DeviceBase` over an owned allocation | ndarray `Array<T, D>`, cudarc `CudaSlice<T>` |
//! | [`DeviceCowArray<T, D>`] | a view or an owned copy ([`to_shape`](DeviceBase::to_shape)) | ndarray `CowArray<T, D>` |
//! | [`Layout<D>`] | the metadata alone, every layout operation | ndarray's shape/strides |
//! | [`DeviceOwner`] | whatever keeps foreign memory alive | `Arc<dyn Any>` in `Bytes::from_owner` |
//! | [`dlpack::DlpackTensor`] | a tensor lent by another framework, turned into `'static` views | `torch.from_dlpack` |
//! | [`interop::KernelView`] | a view as one by-value kernel parameter | a CUDA struct of pointer, shape, strides |
//!
//! **Arrays are views too.** As in ndarray, arrays and views are one generic type,
//! [`DeviceBase`]: every method taking `&self` (slicing, transposing, `to_host`, `cast`, printing)
//! works on arrays, views and copies alike, and every writing method (`fill`, `assign`,
//! `copy_from_host`, `slice_mut`) on arrays and mutable views. A view that borrows carries no drop
//! glue of its own, so its borrow ends at its last use, as ndarray's do.
//!
//! Views never own. They borrow (a lifetime `'a` over a `CudaSlice`, `CudaView`,
//! [`DeviceArray`] or another view) or hold an `Arc<dyn DeviceOwner>` (`'static` views over
//! memory owned by an FFI producer, DLPack, another library). Every constructor that takes raw
//! parts validates bounds, alignment and overflow and answers `Err`, never a panic.
//!
//! ## Memory outlives the work queued on it
//!
//! Operations return once their work is enqueued. Memory is released only after every operation
//! devspan enqueued on it has completed, or is ordered before the release:
//!
//! - **cudarc memory** ([`DeviceArray`], borrowed `CudaSlice`s and views): each operation makes
//!   its stream wait for earlier conflicting work and records itself in the allocation's cudarc
//!   read or write event, which covers every stream that used it; cudarc frees stream-ordered on
//!   the allocation's stream after waiting for both events. (cudarc tracks events once a context
//!   has more than one stream; with one stream, stream order alone keeps the rule; a program that
//!   turns cudarc's tracking off orders its streams itself.) A [`DeviceArray`] is freed with its
//!   context current, on whichever thread drops it.
//! - **owner-backed memory** (`'static` views, DLPack imports): each operation records an event
//!   on its stream in the owner's log and waits for devspan's earlier conflicting work on other
//!   streams; when the last view goes, the owner is dropped only after that work, either by its
//!   [`release_stream`](DeviceOwner::release_stream) waiting for it or by the host waiting.
//! - **raw borrows** (`from_raw_parts_borrowed`) are untracked: their `unsafe` contract makes
//!   the caller free the memory after the work.
//!
//! No lock is held while an operation or a user closure runs, so any view of the same memory
//! may be used inside [`with_kernel_view`](DeviceBase::with_kernel_view), from any thread.
//!
//! Operations captured into a CUDA graph are the exception: the graph's launches are not
//! devspan's, and keeping the memory alive for them is yours (see [Graph capture](#graph-capture)).
//!
//! ## Streams: the memory's own by default
//!
//! Device memory knows the stream it was made on ([`DeviceBase::stream`]): an array's stream
//! (where [`zeros`](DeviceArray::zeros) or [`from_host`](DeviceArray::from_host) made it), or
//! the stream of the cudarc `CudaSlice`/`CudaView` a view borrows. **The plain method runs
//! there** (`a.fill(1.0)`, `a.to_host()`, `a.cast::<f16>()`, `dst.assign(&src)`), and **every
//! operation has an `_on` form taking the stream explicitly** (`a.fill_on(&stream, 1.0)`,
//! `a.to_host_on(&stream)`); the `_with` forms of transfers take a stream and
//! [`TransferOptions`]. Writing operations use the stream of the memory they write, reading ones
//! (and the new arrays they make) that of the memory they read. Views over foreign or raw memory
//! ([`DeviceView::from_raw_parts`], DLPack imports) have no stream of their own: their plain
//! methods return `Err(InvalidArgument)` naming the `_on` form to use. Only constructors of new
//! memory take the stream first ([`DeviceArray::zeros`], [`DeviceArray::from_host`]), as cudarc's
//! `stream.alloc_zeros` does.
//!
//! | ndarray / std | devspan |
//! |---|---|
//! | `a.slice(s![..])`, `slice_mut`, `slice_axis`, `index_axis`, `index_axis_mut` | the same names, on arrays and views ([`DeviceBase::slice`]); read-only sub-views of a `DeviceView<'a>` keep `'a` |
//! | `slice_move`, `index_axis_move`, `slice_axis_move` | the same, consuming |
//! | `t()`, `reversed_axes`, `permuted_axes`, `swap_axes`, `invert_axis` | the same |
//! | `insert_axis`, `remove_axis`, `broadcast`, `into_dyn`, `into_dimensionality` | the same |
//! | `to_shape` (view or copy), `into_shape_with_order` (no copy) | the same, with [`ndarray::Order`]; `into_shape_with_order` also regroups strided axes when no copy is needed, and is `Err(IncompatibleLayout)` otherwise |
//! | `split_at`, `chunks` | [`DeviceBase::split_at`] (views), [`DeviceSpan::chunks`] |
//! | `is_standard_layout` | the same, plus [`DeviceBase::is_dense`] |
//! | `Array::from(..)`, `to_owned`, `clone`, `{}` | [`DeviceArray::from_host`] (any host array), [`DeviceBase::to_host`], [`DeviceBase::try_clone`] / `Clone`, `Display` (copies to the host) |
//! | `fill`, `assign`, `mapv(|x| x as U)` | [`DeviceBase::fill`], [`DeviceBase::assign`] (broadcasting), [`DeviceBase::cast`] / [`DeviceBase::assign_cast`] |
//! | page-locked host memory (`cudaMallocHost`) | [`PinnedBuffer`]; async copies return a [`Transfer`] |
//! | staging of pageable host memory | [`TransferOptions`], taken by the `_with` forms ([`DeviceArray::from_host_with`]) |
//!
//! ## Devices
//!
//! Every view knows its device ([`DeviceBase::device`]) and every operation checks it: a stream
//! of another device than the memory it writes is `Err(DeviceMismatch)`. Copies are the
//! exception: [`assign`](DeviceBase::assign) and [`assign_cast`](DeviceBase::assign_cast) take a
//! source on another GPU, any layout on either side, and `to_contiguous_on` / `cast_on` with a
//! stream of another device copy to that device. Where the destination's device can reach the
//! source's memory (peer access, which devspan enables for the pair, and for memory from a
//! stream-ordered pool the pool's access), its copy kernels read the source directly, with the
//! layout change and the cast in the same pass; otherwise the source is packed on its device,
//! copied by the driver (`cuMemcpyPeerAsync`) and unpacked on the destination's. The work runs
//! on the destination's stream, after the source's stream (its memory's stream, or its device's
//! default stream), which then waits for the copy, so that the source outlives the read and
//! later writes to it follow. Copies between devices cannot be captured into a graph.
//!
//! ## Quick start
//!
//! ```no_run
//! # fn main() -> devspan::Result<()> {
//! use ndarray::{Array2, s};
//! use devspan::DeviceArray;
//!
//! let stream = devspan::default_stream(0)?; // Err(NoDevice) without a GPU, never a panic
//! let host = Array2::from_shape_fn((4, 6), |(i, j)| (10 * i + j) as f32);
//! let dev = DeviceArray::from_host(&stream, &host)?;
//!
//! // Views are metadata: slicing and transposing move no data.
//! let v = dev.slice(s![1..3, ..;-2]).t();
//! assert_eq!(v.shape(), &[3, 2]);
//! assert_eq!(v.strides(), &[-2, 6]);
//!
//! // Hand (pointer, shape, strides) to your own kernel ...
//! let (ptr, shape, strides) = (v.device_ptr(), v.shape(), v.strides());
//! # let _ = (ptr, shape, strides);
//! // ... or bring the data back.
//! assert_eq!(dev.to_host()?, host);
//!
//! // Operations run on the array's own stream unless given one.
//! let mut out = DeviceArray::<half::f16, _>::zeros(&stream, (3, 2))?;
//! out.assign_cast(&v)?;
//! println!("{out:.1}");
//! # Ok(()) }
//! ```
//!
//! Without a GPU, [`device_count`] and every device entry point return `Err` with
//! [`ErrorKind::NoDevice`]; layout code ([`Layout`]) works everywhere.
//!
//! ## Graph capture
//!
//! Operations can be recorded into a CUDA graph by stream capture (cudarc's
//! `stream.begin_capture(mode)`, `stream.end_capture(flags)`, `graph.launch()`): an operation on a
//! capturing stream is recorded, not run, and every launch of the graph runs it on the memory's
//! contents at that time. What cannot be captured returns `Err` of kind
//! [`ErrorKind::StreamCapture`] before touching the stream: nothing is enqueued, and the capture
//! and the stream remain usable.
//!
//! | captured | refused with `Err(StreamCapture)` |
//! |---|---|
//! | [`fill`](DeviceBase::fill), [`assign`](DeviceBase::assign), [`assign_cast`](DeviceBase::assign_cast) and their `_on` forms, any layouts, broadcasting (operands on one device) | copies between devices; host transfers: `copy_from_host*`, `copy_to_host*`, `to_host*`, `from_host*`, `Display`, [`PinnedBuffer`] copies (they wait on the host) |
//! | [`DeviceSpanMut::fill`], [`DeviceSpanMut::copy_from`] and their `_on` forms | allocations: [`DeviceArray::zeros`], [`uninit`](DeviceArray::uninit), [`cast`](DeviceBase::cast), [`to_contiguous`](DeviceBase::to_contiguous), [`try_clone`](DeviceBase::try_clone) (`Clone` panics), [`to_shape`](DeviceBase::to_shape) when it copies (a graph's allocation exists only while the graph runs: allocate before the capture and use `assign` / `assign_cast`) |
//! | [`with_kernel_view`](DeviceBase::with_kernel_view) / `_mut` (your own launches inside them) | [`into_dlpack`](DeviceArray::into_dlpack) (it waits for the array's stream) |
//!
//! Layout operations (slicing, transposing, `to_shape` as a view) and making views of cudarc
//! memory do no device work and work anywhere.
//!
//! **Earlier work.** Outside a capture an operation makes its stream wait for the earlier
//! accesses of its memory that it conflicts with. A capture cannot wait for work outside it, so
//! inside one devspan requires those accesses to have **completed**: for cudarc memory, every
//! access recorded in the allocation's cudarc events (on any stream, the capturing one
//! included); for owner-backed memory, devspan's accesses on other streams. When one is still
//! running the operation is refused. Wait for that work (synchronise the streams that used the
//! memory) before beginning the capture. Accesses that cudarc recorded inside the same capture
//! are ordered inside the graph. Memory devspan does not track (raw borrows, contexts with
//! cudarc's event tracking off) is ordered by the capture's streams alone.
//!
//! **Later work.** Nothing is recorded for a captured operation: the graph's launches are
//! ordered like any work on the stream they are launched on, and against other streams by you.
//!
//! **Memory must outlive the graph.** A graph refers to memory by address and holds none of
//! devspan's keep-alives: keep every array, borrowed slice and owner that a captured operation
//! used alive for as long as the graph may be launched, and until its last launch has
//! completed. Launching a graph after such memory was freed makes the device access freed
//! memory, as a graph of cudarc's own operations does; neither crate can check it (a graph is
//! `'static`, while most views borrow), so this part is yours.
//!
//! **Dropping memory during a capture.** A [`DeviceArray`] dropped while its stream captures is
//! freed once that capture has ended, at a later drop or allocation of a device array: freeing
//! it through the capturing stream would invalidate the capture. Other memory (a cudarc
//! `CudaSlice`, a [`DeviceOwner`]) is freed by its owner, which cudarc does through the
//! capturing stream: keep it alive until the capture ends.
//!
//! **Capture modes.** devspan's checks query events and streams, and the first use of a kernel
//! loads its module; the global and thread-local capture modes forbid such calls during a
//! capture, so devspan makes them with the calling thread switched to the relaxed mode
//! (`cuThreadExchangeStreamCaptureMode`). Host transfers on *other* threads wait on the host,
//! which a capture begun in the global mode forbids to every thread (CUDA then invalidates the
//! capture): capture in the thread-local or relaxed mode while other threads use the GPU.
//!
//! **cudarc's own operations** on slices it tracks (its copies, launches with slice arguments)
//! make the capturing stream wait on the slices' events, which CUDA refuses for events recorded
//! before the capture (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`, kept in the context by cudarc).
//! Graphs that mix them with devspan's operations need cudarc's event tracking off, as cudarc's
//! own graph tests turn it off.
//!
//! ```no_run
//! # fn main() -> devspan::Result<()> {
//! use devspan::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
//! use devspan::{DeviceArray, ErrorKind};
//!
//! let stream = devspan::new_stream(0)?;
//! let host = ndarray::Array2::from_shape_fn((48, 64), |(i, j)| (i * 64 + j) as f32);
//! let src = DeviceArray::from_host(&stream, &host)?;
//! let mut dst = DeviceArray::<half::f16, _>::zeros(&stream, (64, 48))?;
//! stream.synchronize()?; // the capture cannot wait for the upload and the zeroing
//!
//! stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
//! dst.assign_cast(&src.t())?; // recorded, not run
//! let refused = src.to_host().unwrap_err(); // a host transfer: refused, the capture intact
//! assert_eq!(refused.kind(), &ErrorKind::StreamCapture);
//! let graph = stream.end_capture(CUgraphInstantiate_flags(0))?.expect("a graph");
//!
//! graph.launch()?;
//! assert_eq!(dst.to_host()?, host.t().mapv(half::f16::from_f32));
//! # Ok(()) }
//! ```
//!
//! ## Failures
//!
//! An operation that fails returns `Err` and leaks no device memory (its page-locked staging
//! chunks go back to devspan's staging pool, or are freed). Out-of-memory (device memory for a result or a transfer's device temporary,
//! page-locked memory for staging chunks) is
//! [`ErrorKind::Driver`]`(CUDA_ERROR_OUT_OF_MEMORY)`, reported before anything is written: the
//! destination is untouched. A driver error in the middle of a host transfer stops every
//! staging thread at its next chunk and returns `Err` once the copies in flight have
//! completed; what the destination holds then is unspecified element by element (each element
//! holds its old value or the transferred one), except for uploads through a device temporary
//! (a device view whose layout differs from the host's), which write the destination only after
//! the whole transfer succeeded. A panic in a [`DeviceOwner`]'s drop propagates from the drop of
//! the last view (see [`DeviceOwner`]); it leaves devspan's caches and pools usable.
//!
//! ## Features
//!
//! - `cuda-11080` ... `cuda-13000` (default `cuda-12080`): the CUDA driver API version that
//!   cudarc binds against; libcuda is loaded at run time.
//! - `nccl`: the module `devspan::nccl`: NCCL's point-to-point and collective operations on
//!   arrays and views of any layout (libnccl loaded at run time).
//! - `internals`: the module `devspan::internals` (kernel steering, permute grid overrides,
//!   planned path names, the embedded PTX). Unstable, for devspan's own tests and benches, not
//!   covered by semver.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod array;
mod bytes;
mod capture;
mod convert;
mod device;
mod device_ops;
pub mod dlpack;
mod driver;
mod element;
pub mod elementwise;
mod error;
pub mod foreign;
#[cfg(feature = "internals")]
pub mod internals;
pub mod interop;
mod kernels;
mod layout;
#[cfg(feature = "nccl")]
pub mod nccl;
mod owner;
mod peer;
mod plan;
mod span;
pub mod testing;
mod transfer;
mod view;

pub use array::{CowSpan, DeviceArray, DeviceCowArray, OwnedSpan};
pub use bytes::{DeviceBytes, DeviceBytesMut};
pub use device::{context, default_stream, device_count, gpu_available, new_stream};
pub use element::{DType, DeviceElement};
pub use error::{Error, ErrorKind, Result};
pub use layout::Layout;
pub use owner::{DeviceOwner, SharedOwner};
pub use span::{DeviceSpan, DeviceSpanMut};
pub use transfer::{HostPath, PinnedBuffer, Transfer, TransferOptions};
pub use view::{
    AxisChunksIter, AxisIter, AxisIterMut, DeviceBase, DeviceView, DeviceViewMut, SpanData,
    SpanDataMut, ViewData,
};

pub use cudarc;
pub use half;
pub use ndarray;

#[cfg(doctest)]
mod compile_fail;

/// README.md's code blocks, compiled (and run where not `no_run`) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
