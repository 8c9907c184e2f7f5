//! Argument blocks as kernel parameters.

use cudarc::driver::DeviceRepr;
use devspan_kernels::abi::ParamBlock;

/// An argument block of the kernel ABI, passed to a kernel by value as its `.param` block.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Param<T: ParamBlock>(pub T);

// SAFETY: `Param<T>` has the layout of `T` (`repr(transparent)`), and a `ParamBlock` is
// `#[repr(C)]` plain integers with no implicit padding whose bytes are exactly the parameter
// block its kernels read (the trait's contract).
unsafe impl<T: ParamBlock> DeviceRepr for Param<T> {}
