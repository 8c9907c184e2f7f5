//! The contract between devspan and its GPU kernels, defined once, and the generator of the
//! kernels.
//!
//! - [`abi`]: what the host passes to each kernel and how it launches it: the `#[repr(C)]`
//!   argument blocks ([`abi::StridedArgs64`], [`abi::PermuteArgs`], ...), block shapes, tile
//!   sizes and limits, the fast-division parameters the kernels use, the grid rules, and the
//!   identity of every kernel ([`abi::Kernel`]), whose [`abi::Kernel::module_name`] names
//!   its PTX module on both sides.
//! - `emit` (feature `emit`): expands the PTX templates in `templates/` into one PTX module
//!   per kernel, with every parameter offset taken from the argument blocks of [`abi`]. A
//!   build script calls `emit::modules()` and embeds the result; the CUDA driver
//!   JIT-compiles the text at run time, so no CUDA toolkit is needed to build.
//!
//! ```
//! use devspan_kernels::abi::{DType, Kernel, Kind};
//!
//! let k = Kernel::copy(Kind::Contig, DType::F32, DType::F16);
//! assert_eq!(k.module_name(), "cast_contig_f32_f16");
//! assert_eq!(Kernel::from_module_name("cast_contig_f32_f16"), Some(k));
//! assert_eq!(Kernel::copy(Kind::Rows, DType::U16, DType::F16).module_name(), "cast_rows_u16_f16");
//! assert_eq!(Kernel::copy(Kind::Rows, DType::F16, DType::F16).module_name(), "copy_rows_b2");
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod abi;
#[cfg(feature = "emit")]
pub mod emit;
