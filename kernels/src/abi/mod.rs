//! The kernel ABI: argument blocks, launch geometry, limits, element types and kernel
//! identity, shared by the generator of the kernels and by the code that launches them.
//!
//! [`args`] describes the contiguous, strided, transpose and row kernels, [`permute`] the
//! permute kernels, [`tiled`] the tiled kernels and the rank-generic strided kernels,
//! [`narrow`] the narrow-axis kernels that run some tiled plans; every item of the four is
//! re-exported here.

pub mod args;
mod dtype;
mod kernel;
pub mod narrow;
pub mod permute;
pub mod tiled;

pub use args::*;
pub use dtype::DType;
pub use kernel::{FILL_ROWS_MAX_SIZE, Kernel, Kind};
pub use narrow::*;
pub use permute::*;
pub use tiled::*;

/// One field of a [`ParamBlock`]: its name, byte offset and byte size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The field's name in the Rust struct.
    pub name: &'static str,
    /// Byte offset in the block (`core::mem::offset_of!`).
    pub offset: usize,
    /// Byte size.
    pub size: usize,
}

/// An argument block that a kernel takes by value as one `.param` block of
/// `size_of::<Self>()` bytes, aligned to 8.
///
/// # Safety
///
/// The type is `#[repr(C)]` and made only of integers and arrays or blocks of integers,
/// and every byte of it belongs to a field listed in [`ParamBlock::FIELDS`] (padding is an
/// explicit field), so that its bytes are exactly the block the kernels read and every bit
/// pattern is valid.
pub unsafe trait ParamBlock: Copy + Default + 'static {
    /// Every field, in declaration order.
    const FIELDS: &'static [Field];

    /// The byte offset of field `name`.
    ///
    /// # Panics
    ///
    /// If the block has no such field.
    fn offset(name: &str) -> usize {
        Self::FIELDS
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no field {name} in {}", core::any::type_name::<Self>()))
            .offset
    }
}

/// The size of the field that `f` selects.
#[doc(hidden)]
pub const fn field_size<T, F>(_f: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// Implements [`ParamBlock`] for a `#[repr(C)]` struct from the list of all its fields.
macro_rules! param_block {
    ($t:ident { $($f:ident),* $(,)? }) => {
        unsafe impl $crate::abi::ParamBlock for $t {
            const FIELDS: &'static [$crate::abi::Field] = &[$(
                $crate::abi::Field {
                    name: stringify!($f),
                    offset: core::mem::offset_of!($t, $f),
                    size: $crate::abi::field_size(|a: &$t| &a.$f),
                },
            )*];
        }
    };
}
pub(crate) use param_block;

#[cfg(test)]
mod tests {
    use super::*;

    /// The listed fields of a block cover its bytes exactly once, in order: the block has no
    /// implicit padding and no field is missing from [`ParamBlock::FIELDS`].
    fn covers<T: ParamBlock>() {
        let mut end = 0;
        for f in T::FIELDS {
            assert_eq!(
                f.offset,
                end,
                "{}: field {}",
                core::any::type_name::<T>(),
                f.name
            );
            end += f.size;
        }
        assert_eq!(
            end,
            core::mem::size_of::<T>(),
            "{}",
            core::any::type_name::<T>()
        );
        assert_eq!(
            core::mem::align_of::<T>(),
            8,
            "{}",
            core::any::type_name::<T>()
        );
    }

    #[test]
    fn blocks_have_no_implicit_padding() {
        covers::<FastDiv64>();
        covers::<StridedArgs64>();
        covers::<StridedArgs32>();
        covers::<TransposeArgs>();
        covers::<RowArgs>();
        covers::<RowGatherArgs>();
        covers::<PermuteArgs>();
        covers::<TiledArgs>();
        covers::<StridedAxis>();
        covers::<StridedArgsN>();
        assert_eq!(PermuteArgs::offset("wide"), 684);
    }
}
