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
//! | [`DeviceView<T, D>`] / [`DeviceViewMut<T, D>`] | shape, signed strides (elements), offset | ndarray `ArrayView<T, D>` |
//! | [`DeviceArray<T, D>`] | the one owning type: allocation + standard layout | ndarray `Array<T, D>`, cudarc `CudaSlice<T>` |
//! | [`Layout<D>`] | the metadata alone, every layout operation | ndarray's shape/strides |
//! | [`DeviceOwner`] | whatever keeps foreign memory alive | `Arc<dyn Any>` in `Bytes::from_owner` |
//! | [`dlpack::DlpackTensor`] | a tensor lent by another framework, turned into `'static` views | `torch.from_dlpack` |
//! | [`interop::KernelView`] | a view as one by-value kernel parameter | a CUDA struct of pointer, shape, strides |
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
//! may be used inside [`with_kernel_view`](DeviceView::with_kernel_view), from any thread.
//!
//! | ndarray / std | devspan |
//! |---|---|
//! | `a.slice(s![..])`, `slice_axis`, `index_axis` | the same names, on views ([`DeviceView::slice`]) |
//! | `t()`, `reversed_axes`, `permuted_axes`, `swap_axes`, `invert_axis` | the same |
//! | `insert_axis`, `remove_axis`, `broadcast`, `to_shape` | the same; [`DeviceView::reshape`] is `Err` when a copy is needed |
//! | `split_at`, `chunks` | [`ViewBase::split_at`], [`DeviceSpan::chunks`] |
//! | `is_standard_layout` | the same, plus [`ViewBase::is_dense`] |
//! | `Array::from(..)`, `to_owned` | [`DeviceArray::from_host`], [`DeviceArray::to_host`] |
//! | page-locked host memory (`cudaMallocHost`) | [`PinnedBuffer`]; async copies return a [`Transfer`] |
//! | staging of pageable host memory | [`TransferOptions`], taken by the `_with` forms ([`DeviceArray::from_host_with`]) |
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
//! let dev = DeviceArray::from_host(&stream, &host.view())?;
//!
//! // Views are metadata: slicing and transposing move no data.
//! let v = dev.view().slice(s![1..3, ..;-2]).t();
//! assert_eq!(v.shape(), &[3, 2]);
//! assert_eq!(v.strides(), &[-2, 6]);
//!
//! // Hand (pointer, shape, strides) to your own kernel ...
//! let (ptr, shape, strides) = (v.device_ptr(), v.shape(), v.strides());
//! # let _ = (ptr, shape, strides);
//! // ... or bring the data back.
//! assert_eq!(dev.to_host(&stream)?, host);
//! # Ok(()) }
//! ```
//!
//! Without a GPU, [`device_count`] and every device entry point return `Err` with
//! [`ErrorKind::NoDevice`]; layout code ([`Layout`]) works everywhere.
//!
//! ## Features
//!
//! - `cuda-11080` ... `cuda-13000` (default `cuda-12080`): the CUDA driver API version that
//!   cudarc binds against; libcuda is loaded at run time.
//! - `python`: the PyO3 bindings (`devspan::python`), built into an extension module by the
//!   `python/` crate.
//! - `internals`: the module `devspan::internals` (kernel steering, permute grid overrides,
//!   planned path names, the embedded PTX). Unstable, for devspan's own tests and benches, not
//!   covered by semver.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod array;
mod bytes;
mod convert;
mod device;
pub mod dlpack;
mod element;
mod error;
#[cfg(feature = "internals")]
pub mod internals;
pub mod interop;
mod kernels;
mod layout;
mod ops;
mod owner;
mod plan;
#[cfg(feature = "python")]
pub mod python;
mod span;
pub mod testing;
mod transfer;
mod view;

pub use array::DeviceArray;
pub use bytes::{DeviceBytes, DeviceBytesMut};
pub use device::{context, default_stream, device_count, gpu_available, new_stream};
pub use element::{DType, DeviceElement};
pub use error::{Error, ErrorKind, Result};
pub use layout::Layout;
pub use owner::DeviceOwner;
pub use span::{DeviceSpan, DeviceSpanMut};
pub use transfer::{HostPath, PinnedBuffer, Transfer, TransferOptions};
pub use view::{DeviceView, DeviceViewMut, SpanData, ViewBase};

pub use cudarc;
pub use half;
pub use ndarray;

/// README.md's code blocks, compiled (and run where not `no_run`) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
