//! The element types of the kernels.

/// A runtime tag naming an element type: the types the kernels exist for.
///
/// ```
/// use devspan_kernels::abi::DType;
/// assert_eq!(DType::BF16.size(), 2);
/// assert_eq!(DType::I64.name(), "i64");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `u8`
    U8,
    /// `i8`
    I8,
    /// `u16`
    U16,
    /// `i16`
    I16,
    /// `u32`
    U32,
    /// `i32`
    I32,
    /// `u64`
    U64,
    /// `i64`
    I64,
    /// `half::f16`
    F16,
    /// `half::bf16`
    BF16,
    /// `f32`
    F32,
    /// `f64`
    F64,
}

impl DType {
    /// Every element type, in declaration order.
    pub const ALL: [DType; 12] = [
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::U32,
        DType::I32,
        DType::U64,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// Size of one element in bytes.
    ///
    /// ```
    /// assert_eq!(devspan_kernels::abi::DType::F64.size(), 8);
    /// ```
    pub const fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// The Rust name of the type (`"f32"`, `"bf16"`, ...), also used in kernel names.
    ///
    /// ```
    /// assert_eq!(devspan_kernels::abi::DType::BF16.name(), "bf16");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::U64 => "u64",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// Whether the type is a floating-point type.
    ///
    /// ```
    /// assert!(devspan_kernels::abi::DType::F16.is_float() && !devspan_kernels::abi::DType::I8.is_float());
    /// ```
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Whether a cast from this type to `to` keeps every bit (as Rust's `as` does): the same
    /// type, or integer types of one size. Such casts run as copies of this type.
    ///
    /// ```
    /// use devspan_kernels::abi::DType;
    /// assert!(DType::U8.same_bits(DType::I8) && DType::I64.same_bits(DType::U64));
    /// assert!(!DType::F16.same_bits(DType::BF16) && !DType::F32.same_bits(DType::I32));
    /// ```
    pub const fn same_bits(self, to: DType) -> bool {
        self as u8 == to as u8 || (!self.is_float() && !to.is_float() && self.size() == to.size())
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
