//! `#[repr(C)]` mirrors of the structs, enums and flags of `dlpack.h` v1.1.
//!
//! Field order, types and sizes follow the header exactly. C enums whose values come from a
//! foreign producer ([`DLDeviceType`], [`DLDataTypeCode`]) are transparent integer newtypes
//! with associated constants, so that a value this crate does not know is representable and
//! answered with `Err`, never undefined behaviour.

use std::ffi::c_void;

/// The DLPack major version this module mirrors (`DLPACK_MAJOR_VERSION`). A versioned tensor
/// with another major version has an unknown layout past its `deleter` field.
///
/// ```
/// assert_eq!(devspan::dlpack::DLPACK_MAJOR_VERSION, 1);
/// ```
pub const DLPACK_MAJOR_VERSION: u32 = 1;

/// The DLPack minor version this module mirrors (`DLPACK_MINOR_VERSION`), written into exported
/// tensors.
///
/// ```
/// assert_eq!(devspan::dlpack::DLPACK_MINOR_VERSION, 1);
/// ```
pub const DLPACK_MINOR_VERSION: u32 = 1;

/// Flag bit of [`DLManagedTensorVersioned::flags`]: the consumer must not write the data
/// (`DLPACK_FLAG_BITMASK_READ_ONLY`).
///
/// ```
/// use devspan::dlpack::DLPACK_FLAG_BITMASK_READ_ONLY;
/// assert_eq!(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
/// ```
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;

/// Flag bit of [`DLManagedTensorVersioned::flags`]: the tensor is a copy made by the producer,
/// owned by the consumer alone until it calls the deleter (`DLPACK_FLAG_BITMASK_IS_COPIED`).
///
/// ```
/// assert_eq!(devspan::dlpack::DLPACK_FLAG_BITMASK_IS_COPIED, 2);
/// ```
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// Flag bit of [`DLManagedTensorVersioned::flags`]: a sub-byte element type is padded rather
/// than packed (`DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`). No devspan element type is
/// narrower than a byte, so devspan ignores it.
///
/// ```
/// assert_eq!(devspan::dlpack::DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 4);
/// ```
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// `DLPackVersion`: the ABI version of a [`DLManagedTensorVersioned`].
///
/// ```
/// use devspan::dlpack::DLPackVersion;
/// assert_eq!(DLPackVersion::CURRENT, DLPackVersion { major: 1, minor: 1 });
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLPackVersion {
    /// Major version; a change means the layout past `deleter` changed.
    pub major: u32,
    /// Minor version; changes add enum values and flags only.
    pub minor: u32,
}

impl DLPackVersion {
    /// The version this module mirrors, `{ major: 1, minor: 1 }`.
    ///
    /// ```
    /// assert_eq!(devspan::dlpack::DLPackVersion::CURRENT.major, 1);
    /// ```
    pub const CURRENT: DLPackVersion = DLPackVersion {
        major: DLPACK_MAJOR_VERSION,
        minor: DLPACK_MINOR_VERSION,
    };
}

/// `DLDeviceType`: the kind of memory a tensor's `data` points into (a C enum, `int`-sized).
///
/// ```
/// use devspan::dlpack::DLDeviceType;
/// assert_eq!(DLDeviceType::CUDA.0, 2);
/// assert_eq!(DLDeviceType::CUDA.name(), "kDLCUDA");
/// assert_eq!(DLDeviceType(99).name(), "unknown");
/// ```
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDeviceType(pub i32);

impl DLDeviceType {
    /// `kDLCPU`: host memory.
    pub const CPU: DLDeviceType = DLDeviceType(1);
    /// `kDLCUDA`: CUDA device memory.
    pub const CUDA: DLDeviceType = DLDeviceType(2);
    /// `kDLCUDAHost`: pinned CUDA host memory (`cudaMallocHost`).
    pub const CUDA_HOST: DLDeviceType = DLDeviceType(3);
    /// `kDLOpenCL`.
    pub const OPENCL: DLDeviceType = DLDeviceType(4);
    /// `kDLVulkan`.
    pub const VULKAN: DLDeviceType = DLDeviceType(7);
    /// `kDLMetal`.
    pub const METAL: DLDeviceType = DLDeviceType(8);
    /// `kDLVPI`.
    pub const VPI: DLDeviceType = DLDeviceType(9);
    /// `kDLROCM`.
    pub const ROCM: DLDeviceType = DLDeviceType(10);
    /// `kDLROCMHost`.
    pub const ROCM_HOST: DLDeviceType = DLDeviceType(11);
    /// `kDLExtDev`.
    pub const EXT_DEV: DLDeviceType = DLDeviceType(12);
    /// `kDLCUDAManaged`: CUDA managed (unified) memory (`cudaMallocManaged`).
    pub const CUDA_MANAGED: DLDeviceType = DLDeviceType(13);
    /// `kDLOneAPI`.
    pub const ONE_API: DLDeviceType = DLDeviceType(14);
    /// `kDLWebGPU`.
    pub const WEB_GPU: DLDeviceType = DLDeviceType(15);
    /// `kDLHexagon`.
    pub const HEXAGON: DLDeviceType = DLDeviceType(16);
    /// `kDLMAIA`.
    pub const MAIA: DLDeviceType = DLDeviceType(17);

    /// The C name of the value (`"kDLCUDA"`), or `"unknown"`.
    ///
    /// ```
    /// assert_eq!(devspan::dlpack::DLDeviceType::CUDA_MANAGED.name(), "kDLCUDAManaged");
    /// ```
    pub const fn name(self) -> &'static str {
        match self.0 {
            1 => "kDLCPU",
            2 => "kDLCUDA",
            3 => "kDLCUDAHost",
            4 => "kDLOpenCL",
            7 => "kDLVulkan",
            8 => "kDLMetal",
            9 => "kDLVPI",
            10 => "kDLROCM",
            11 => "kDLROCMHost",
            12 => "kDLExtDev",
            13 => "kDLCUDAManaged",
            14 => "kDLOneAPI",
            15 => "kDLWebGPU",
            16 => "kDLHexagon",
            17 => "kDLMAIA",
            _ => "unknown",
        }
    }
}

/// `DLDevice`: device type and ordinal of a tensor's memory.
///
/// ```
/// use devspan::dlpack::{DLDevice, DLDeviceType};
/// let d = DLDevice::cuda(1);
/// assert_eq!((d.device_type, d.device_id), (DLDeviceType::CUDA, 1));
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDevice {
    /// The kind of memory.
    pub device_type: DLDeviceType,
    /// The device ordinal (0 for host memory).
    pub device_id: i32,
}

impl DLDevice {
    /// CUDA device memory of device `id`.
    ///
    /// ```
    /// assert_eq!(devspan::dlpack::DLDevice::cuda(0).device_id, 0);
    /// ```
    pub const fn cuda(id: i32) -> Self {
        DLDevice {
            device_type: DLDeviceType::CUDA,
            device_id: id,
        }
    }
}

/// `DLDataTypeCode`: the family of an element type (stored as `uint8_t` in [`DLDataType`]).
///
/// ```
/// use devspan::dlpack::DLDataTypeCode;
/// assert_eq!(DLDataTypeCode::FLOAT.0, 2);
/// assert_eq!(DLDataTypeCode::BFLOAT.name(), "kDLBfloat");
/// ```
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDataTypeCode(pub u8);

impl DLDataTypeCode {
    /// `kDLInt`: signed integer.
    pub const INT: DLDataTypeCode = DLDataTypeCode(0);
    /// `kDLUInt`: unsigned integer.
    pub const UINT: DLDataTypeCode = DLDataTypeCode(1);
    /// `kDLFloat`: IEEE floating point.
    pub const FLOAT: DLDataTypeCode = DLDataTypeCode(2);
    /// `kDLOpaqueHandle`.
    pub const OPAQUE_HANDLE: DLDataTypeCode = DLDataTypeCode(3);
    /// `kDLBfloat`: brain floating point.
    pub const BFLOAT: DLDataTypeCode = DLDataTypeCode(4);
    /// `kDLComplex`.
    pub const COMPLEX: DLDataTypeCode = DLDataTypeCode(5);
    /// `kDLBool`.
    pub const BOOL: DLDataTypeCode = DLDataTypeCode(6);
    /// `kDLFloat8_e3m4`.
    pub const FLOAT8_E3M4: DLDataTypeCode = DLDataTypeCode(7);
    /// `kDLFloat8_e4m3`.
    pub const FLOAT8_E4M3: DLDataTypeCode = DLDataTypeCode(8);
    /// `kDLFloat8_e4m3b11fnuz`.
    pub const FLOAT8_E4M3B11FNUZ: DLDataTypeCode = DLDataTypeCode(9);
    /// `kDLFloat8_e4m3fn`.
    pub const FLOAT8_E4M3FN: DLDataTypeCode = DLDataTypeCode(10);
    /// `kDLFloat8_e4m3fnuz`.
    pub const FLOAT8_E4M3FNUZ: DLDataTypeCode = DLDataTypeCode(11);
    /// `kDLFloat8_e5m2`.
    pub const FLOAT8_E5M2: DLDataTypeCode = DLDataTypeCode(12);
    /// `kDLFloat8_e5m2fnuz`.
    pub const FLOAT8_E5M2FNUZ: DLDataTypeCode = DLDataTypeCode(13);
    /// `kDLFloat8_e8m0fnu`.
    pub const FLOAT8_E8M0FNU: DLDataTypeCode = DLDataTypeCode(14);
    /// `kDLFloat6_e2m3fn`.
    pub const FLOAT6_E2M3FN: DLDataTypeCode = DLDataTypeCode(15);
    /// `kDLFloat6_e3m2fn`.
    pub const FLOAT6_E3M2FN: DLDataTypeCode = DLDataTypeCode(16);
    /// `kDLFloat4_e2m1fn`.
    pub const FLOAT4_E2M1FN: DLDataTypeCode = DLDataTypeCode(17);

    /// The C name of the value (`"kDLFloat"`), or `"unknown"`.
    ///
    /// ```
    /// assert_eq!(devspan::dlpack::DLDataTypeCode::BOOL.name(), "kDLBool");
    /// ```
    pub const fn name(self) -> &'static str {
        match self.0 {
            0 => "kDLInt",
            1 => "kDLUInt",
            2 => "kDLFloat",
            3 => "kDLOpaqueHandle",
            4 => "kDLBfloat",
            5 => "kDLComplex",
            6 => "kDLBool",
            7 => "kDLFloat8_e3m4",
            8 => "kDLFloat8_e4m3",
            9 => "kDLFloat8_e4m3b11fnuz",
            10 => "kDLFloat8_e4m3fn",
            11 => "kDLFloat8_e4m3fnuz",
            12 => "kDLFloat8_e5m2",
            13 => "kDLFloat8_e5m2fnuz",
            14 => "kDLFloat8_e8m0fnu",
            15 => "kDLFloat6_e2m3fn",
            16 => "kDLFloat6_e3m2fn",
            17 => "kDLFloat4_e2m1fn",
            _ => "unknown",
        }
    }
}

/// `DLDataType`: element type as (code, bits per lane, lanes).
///
/// ```
/// use devspan::dlpack::{DLDataType, DLDataTypeCode};
/// let f32_type = DLDataType { code: DLDataTypeCode::FLOAT, bits: 32, lanes: 1 };
/// assert_eq!(f32_type, devspan::DType::F32.into());
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// The type family.
    pub code: DLDataTypeCode,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes per element (1 for scalars; devspan accepts nothing else).
    pub lanes: u16,
}

/// `DLTensor`: a borrowed, unmanaged description of a strided tensor.
///
/// `shape` and `strides` point to `ndim` values each; a null `strides` means row-major
/// contiguous. Strides are counted in **elements**, and the element at index zero lives at
/// `data + byte_offset` (bytes).
///
/// ```
/// use devspan::dlpack::DLTensor;
/// assert_eq!(std::mem::size_of::<DLTensor>(), 48);
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
    /// Base address of the data (opaque for some device types).
    pub data: *mut c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// Number of axes.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` axis lengths.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for row-major contiguous.
    pub strides: *mut i64,
    /// Offset in bytes from `data` to the element at index zero.
    pub byte_offset: u64,
}

/// `DLManagedTensor`: the legacy (pre-1.0, unversioned) managed tensor. It has no flags, so
/// no way to say that the data is read-only.
///
/// ```
/// use devspan::dlpack::DLManagedTensor;
/// assert_eq!(std::mem::size_of::<DLManagedTensor>(), 64);
/// ```
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context, opaque to the consumer.
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when it no longer needs the tensor (may be null).
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLManagedTensorVersioned`: the managed tensor of DLPack >= 1.0, with an ABI version and
/// flags.
///
/// ```
/// use devspan::dlpack::DLManagedTensorVersioned;
/// assert_eq!(std::mem::size_of::<DLManagedTensorVersioned>(), 80);
/// ```
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// ABI version; only the layout of `version`, `manager_ctx` and `deleter` is stable
    /// across major versions.
    pub version: DLPackVersion,
    /// The producer's context, opaque to the consumer.
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when it no longer needs the tensor (may be null).
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    use std::mem::{align_of, offset_of, size_of};

    use super::*;

    #[test]
    fn layouts_match_dlpack_h_on_64_bit_targets() {
        assert_eq!(
            (size_of::<DLPackVersion>(), align_of::<DLPackVersion>()),
            (8, 4)
        );
        assert_eq!(offset_of!(DLPackVersion, minor), 4);
        assert_eq!((size_of::<DLDevice>(), align_of::<DLDevice>()), (8, 4));
        assert_eq!(offset_of!(DLDevice, device_id), 4);
        assert_eq!((size_of::<DLDataType>(), align_of::<DLDataType>()), (4, 2));
        assert_eq!(offset_of!(DLDataType, bits), 1);
        assert_eq!(offset_of!(DLDataType, lanes), 2);

        assert_eq!((size_of::<DLTensor>(), align_of::<DLTensor>()), (48, 8));
        assert_eq!(offset_of!(DLTensor, data), 0);
        assert_eq!(offset_of!(DLTensor, device), 8);
        assert_eq!(offset_of!(DLTensor, ndim), 16);
        assert_eq!(offset_of!(DLTensor, dtype), 20);
        assert_eq!(offset_of!(DLTensor, shape), 24);
        assert_eq!(offset_of!(DLTensor, strides), 32);
        assert_eq!(offset_of!(DLTensor, byte_offset), 40);

        assert_eq!(size_of::<DLManagedTensor>(), 64);
        assert_eq!(offset_of!(DLManagedTensor, dl_tensor), 0);
        assert_eq!(offset_of!(DLManagedTensor, manager_ctx), 48);
        assert_eq!(offset_of!(DLManagedTensor, deleter), 56);

        assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
        assert_eq!(offset_of!(DLManagedTensorVersioned, version), 0);
        assert_eq!(offset_of!(DLManagedTensorVersioned, manager_ctx), 8);
        assert_eq!(offset_of!(DLManagedTensorVersioned, deleter), 16);
        assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
    }

    #[test]
    fn nullable_deleters_are_pointer_sized() {
        assert_eq!(
            size_of::<Option<unsafe extern "C" fn(*mut DLManagedTensor)>>(),
            size_of::<*const ()>()
        );
    }

    #[test]
    fn enum_values_match_dlpack_h() {
        let devices = [
            (DLDeviceType::CPU, 1),
            (DLDeviceType::CUDA, 2),
            (DLDeviceType::CUDA_HOST, 3),
            (DLDeviceType::OPENCL, 4),
            (DLDeviceType::VULKAN, 7),
            (DLDeviceType::METAL, 8),
            (DLDeviceType::VPI, 9),
            (DLDeviceType::ROCM, 10),
            (DLDeviceType::ROCM_HOST, 11),
            (DLDeviceType::EXT_DEV, 12),
            (DLDeviceType::CUDA_MANAGED, 13),
            (DLDeviceType::ONE_API, 14),
            (DLDeviceType::WEB_GPU, 15),
            (DLDeviceType::HEXAGON, 16),
            (DLDeviceType::MAIA, 17),
        ];
        for (d, v) in devices {
            assert_eq!(d.0, v);
            assert_ne!(d.name(), "unknown");
        }
        for c in 0..=17u8 {
            assert_ne!(DLDataTypeCode(c).name(), "unknown", "{c}");
        }
        assert_eq!(DLDataTypeCode(18).name(), "unknown");
        assert_eq!(DLDataTypeCode::FLOAT4_E2M1FN.0, 17);
        assert_eq!(DLDataTypeCode::BOOL.0, 6);
    }
}
