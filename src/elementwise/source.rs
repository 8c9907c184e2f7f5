//! Host-side pieces of [`ElementwiseKernel`](super::ElementwiseKernel) that need no GPU: the
//! signature parser and the CUDA C source of one compiled variant (the layout normaliser is
//! in `normalize.rs`).

use std::fmt::Write;

use crate::element::DType;
use crate::error::{Error, Result};

#[cfg(test)]
use super::normalize::normalize;

/// Most array operands (inputs and outputs together) of one kernel.
pub const MAX_ARRAYS: usize = 8;
/// Most scalar operands of one kernel.
pub const MAX_SCALARS: usize = 8;
/// Most axes left after the operands' axes are merged (numpy's limit); the argument block holds a
/// shape and one stride per array operand for each, and must also fit a kernel's parameter block
/// of 4096 bytes: with 7 or 8 arrays that holds at most 62 or 55 axes,
/// where the outputs alone would have at least 2^55 elements (every axis left has an extent of
/// at least 2, and outputs do not overlap themselves).
pub const MAX_RANK: usize = 64;
/// Bytes of a kernel's parameter block that every CUDA driver takes.
pub(crate) const MAX_ARG_BYTES: usize = 4096;

/// One declared parameter: `f32 x`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Param {
    pub(crate) dtype: DType,
    pub(crate) name: String,
}

/// The element type named `s`: devspan's Rust names (`f32`, `bf16`, ...), numpy's (`float32`,
/// `uint8`, ...) or the C names of the same widths (`float`, `double`, `int`, ...).
pub(crate) fn parse_dtype(s: &str) -> Option<DType> {
    Some(match s {
        "u8" | "uint8" | "unsigned char" => DType::U8,
        "i8" | "int8" | "signed char" => DType::I8,
        "u16" | "uint16" | "unsigned short" => DType::U16,
        "i16" | "int16" | "short" => DType::I16,
        "u32" | "uint32" | "unsigned int" => DType::U32,
        "i32" | "int32" | "int" => DType::I32,
        "u64" | "uint64" | "unsigned long long" => DType::U64,
        "i64" | "int64" | "long long" => DType::I64,
        "f16" | "float16" | "half" => DType::F16,
        "bf16" | "bfloat16" => DType::BF16,
        "f32" | "float32" | "float" => DType::F32,
        "f64" | "float64" | "double" => DType::F64,
        _ => return None,
    })
}

fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f == '_' || f.is_ascii_alphabetic())
        && c.all(|ch| ch == '_' || ch.is_ascii_alphanumeric())
}

/// Parses a comma-separated list of `type name` declarations (`"f32 a, f32 x"`); `what` names
/// the list in errors. An empty or blank string is an empty list.
pub(crate) fn parse_params(list: &str, what: &str) -> Result<Vec<Param>> {
    let mut out: Vec<Param> = Vec::new();
    if list.trim().is_empty() {
        return Ok(out);
    }
    for decl in list.split(',') {
        let decl = decl.trim();
        let Some(split) = decl.rfind(|c: char| c.is_whitespace()) else {
            return Err(Error::invalid(format!(
                "{what}: `{decl}` is not a declaration of the form `type name` (`f32 x`)"
            )));
        };
        let (ty, name) = (decl[..split].trim(), decl[split..].trim());
        let ty = ty.split_whitespace().collect::<Vec<_>>().join(" ");
        let Some(dtype) = parse_dtype(&ty) else {
            return Err(Error::new(
                crate::ErrorKind::UnsupportedDtype,
                format!(
                    "{what}: unknown element type `{ty}` in `{decl}` (u8, i8, u16, i16, u32, i32, u64, i64, f16, bf16, f32, f64)"
                ),
            ));
        };
        if !is_identifier(name) || name.starts_with("ds_") || name.starts_with("__") {
            return Err(Error::invalid(format!(
                "{what}: `{name}` is not a valid parameter name (a C identifier, not starting with `ds_` or `__`)"
            )));
        }
        out.push(Param {
            dtype,
            name: name.to_string(),
        });
    }
    Ok(out)
}

/// A set of operand indices below 32 (the limits keep every index lower): the inputs that
/// are scalars, the staged inputs, the paired operands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Flags(u32);

impl Flags {
    /// Whether index `k` is in the set.
    pub(crate) fn get(self, k: usize) -> bool {
        k < 32 && (self.0 >> k) & 1 == 1
    }

    /// Number of indices in the set.
    pub(crate) fn count(self) -> usize {
        self.0.count_ones() as usize
    }
}

impl FromIterator<bool> for Flags {
    /// The indices of the `true` items (items from index 32 on are not represented).
    fn from_iter<I: IntoIterator<Item = bool>>(items: I) -> Self {
        let bits = items
            .into_iter()
            .enumerate()
            .filter(|&(_, b)| b)
            .fold(0u32, |f, (k, _)| {
                f | 1u32.checked_shl(k as u32).unwrap_or(0)
            });
        Flags(bits)
    }
}

/// What one compiled variant is specialised for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Variant {
    /// The inputs that are scalars (the others are arrays).
    pub(crate) scalar_inputs: Flags,
    /// Axes after normalisation.
    pub(crate) rank: usize,
    /// 32-bit index arithmetic.
    pub(crate) idx32: bool,
    /// Every array operand contiguous (one axis, stride 1).
    pub(crate) contiguous: bool,
    /// The last two axes walked in tiles ([`Normalized::tiled`](super::normalize::Normalized::tiled)).
    pub(crate) tiled: bool,
    /// The array inputs (numbered among the array inputs) that the tiled variant stages
    /// through shared memory.
    pub(crate) staged: Flags,
    /// Contiguous operands moved as 16-byte vectors (every address aligned).
    pub(crate) vector: bool,
    /// The tiled variant moves pairs of neighbours ([`pairs_for`]).
    pub(crate) pairs: bool,
    /// With `pairs`, the array operands (outputs first) that move each pair as one access
    /// ([`Normalized::pairable`](super::normalize::Normalized::pairable)); empty otherwise.
    pub(crate) paired: Flags,
}

/// Whether the tiled variant gives each slot a pair of neighbours (tiles of `TILE` x
/// `2 * TILE` elements) for array operands of these types: where the narrowest is at most 2
/// bytes (one element per access would move at most 64 bytes per warp) and none is wider
/// than 4 (a pair of them is one access of at most 8 bytes).
pub(crate) fn pairs_for(types: &[DType]) -> bool {
    let sizes = types.iter().map(|t| t.size());
    sizes.clone().min().is_some_and(|m| m <= 2) && sizes.max().is_some_and(|m| m <= 4)
}

/// Name of the generated kernel function.
pub(crate) const ENTRY: &str = "devspan_elementwise";

/// Bytes of a parameter's body type (its shared-memory element when staged).
pub(crate) fn body_size(t: DType) -> usize {
    match t {
        DType::F16 | DType::BF16 => 4,
        other => other.size(),
    }
}

/// The C type a parameter has in the body: its own, except `float` for `f16` and `bf16`
/// (loaded and stored with a conversion, so that the body computes in `f32`).
fn body_type(t: DType) -> &'static str {
    match t {
        DType::U8 => "unsigned char",
        DType::I8 => "signed char",
        DType::U16 => "unsigned short",
        DType::I16 => "short",
        DType::U32 => "unsigned int",
        DType::I32 => "int",
        DType::U64 => "unsigned long long",
        DType::I64 => "long long",
        DType::F16 | DType::BF16 | DType::F32 => "float",
        DType::F64 => "double",
    }
}

/// The C type of the element in memory.
pub(super) fn storage_type(t: DType) -> &'static str {
    match t {
        DType::F16 | DType::BF16 => "unsigned short",
        DType::F32 => "float",
        other => body_type(other),
    }
}

/// The expression loading element `off` of array `k` as its body type.
fn load(t: DType, k: usize, off: &str) -> String {
    convert_in(
        t,
        &format!("((const {}*)ds_a.ptr[{k}])[{off}]", storage_type(t)),
    )
}

/// A stored element `e` of type `t` as its body type.
pub(super) fn convert_in(t: DType, e: &str) -> String {
    match t {
        DType::F16 => format!("ds_f16_to_f32({e})"),
        DType::BF16 => format!("ds_bf16_to_f32({e})"),
        _ => e.to_string(),
    }
}

/// A body-type value `v` as the stored type of `t`.
pub(super) fn convert_out(t: DType, v: &str) -> String {
    match t {
        DType::F16 => format!("ds_f32_to_f16({v})"),
        DType::BF16 => format!("ds_f32_to_bf16({v})"),
        _ => v.to_string(),
    }
}

/// The statement storing `value` (a body-type value) as element `off` of array `k`.
fn store(t: DType, k: usize, off: &str, value: &str) -> String {
    format!(
        "(({}*)ds_a.ptr[{k}])[{off}] = {};",
        storage_type(t),
        convert_out(t, value)
    )
}

/// The expression reading scalar slot `s` (8 bytes, the value in its low bytes; `f16` and
/// `bf16` scalars arrive as `f32`).
fn scalar(t: DType, s: usize) -> String {
    let w = format!("ds_a.scalar[{s}]");
    match t {
        DType::F16 | DType::BF16 | DType::F32 => format!("__uint_as_float((unsigned int){w})"),
        DType::F64 => format!("__longlong_as_double((long long){w})"),
        other => format!("({}){w}", body_type(other)),
    }
}

const PRELUDE: &str = r#"// Generated by devspan's ElementwiseKernel.
static __device__ __forceinline__ float ds_f16_to_f32(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
static __device__ __forceinline__ unsigned short ds_f32_to_f16(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
template <typename T> struct alignas(2 * sizeof(T)) ds_pair { T v[2]; };
static __device__ __forceinline__ float ds_bf16_to_f32(unsigned short h) {
  return __uint_as_float(((unsigned int)h) << 16);
}
static __device__ __forceinline__ unsigned short ds_f32_to_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
"#;

/// Words (8 bytes each) of the argument block of `variant` with `arrays` array operands and
/// `scalars` scalar ones: `n`, `shape[rank]`, `strides[arrays][rank]`, `ptr[arrays]`,
/// `scalar[max(scalars, 1)]`.
pub(crate) const fn arg_words(rank: usize, arrays: usize, scalars: usize) -> usize {
    1 + rank + arrays * rank + arrays + if scalars > 1 { scalars } else { 1 }
}

/// `Ok` where a variant of `rank` axes over `arrays` arrays and `scalars` scalars can be
/// launched: at most [`MAX_RANK`] axes, and an argument block of at most [`MAX_ARG_BYTES`].
pub(crate) fn check_rank(rank: usize, arrays: usize, scalars: usize) -> Result<()> {
    if rank > MAX_RANK {
        return Err(Error::invalid(format!(
            "after merging, {rank} axes remain; elementwise kernels take at most {MAX_RANK}"
        )));
    }
    let bytes = arg_words(rank, arrays, scalars) * 8;
    if bytes > MAX_ARG_BYTES {
        return Err(Error::invalid(format!(
            "after merging, {rank} axes remain; the shape and strides of {arrays} arrays over them, with {scalars} scalars, take {bytes} bytes, more than a kernel's {MAX_ARG_BYTES}-byte parameter block"
        )));
    }
    Ok(())
}

/// Elements each thread handles per iteration: their offsets, then all their loads, then the
/// body and the stores, so that a thread has that many loads in flight.
pub(crate) const PER_THREAD: usize = 4;
/// Threads per block of the generated kernel.
pub(crate) const THREADS: usize = 256;
/// Side of the square tiles of the tiled variant. One block's iteration (`THREADS` x
/// `PER_THREAD` slots) is one tile.
pub(crate) const TILE: usize = 32;
/// Most bytes of shared memory the staged inputs of a tiled variant may take.
pub(crate) const STAGE_BYTES: usize = 40 * 1024;
/// Side of the square tiles of the tiled variant with pairs ([`pairs_for`]): a warp's 32
/// threads take the 32 pairs of one row. One block's iteration (`PAIR_THREADS` x `PER_THREAD`
/// pairs) is one tile.
pub(crate) const PAIR_TILE: usize = 64;
/// Threads per block of the tiled variant with pairs.
pub(crate) const PAIR_THREADS: usize = 512;

/// Blocks of the tiled variant with pairs that each multiprocessor should hold at once (the
/// compiler keeps the registers of a thread within what that many blocks leave).
pub(crate) const PAIR_MIN_BLOCKS: usize = 4;

/// The arguments of `variant`'s `__launch_bounds__`: its threads per block, and for the tiled
/// variant with pairs the blocks per multiprocessor.
fn launch_bounds(v: &Variant) -> String {
    if v.tiled && v.pairs {
        format!("{PAIR_THREADS}, {PAIR_MIN_BLOCKS}")
    } else {
        THREADS.to_string()
    }
}

/// Threads per block of `variant`.
pub(crate) fn threads(v: &Variant) -> usize {
    if v.tiled && v.pairs {
        PAIR_THREADS
    } else {
        THREADS
    }
}

/// Elements per thread of the vector variant: one 16-byte vector of the narrowest operand.
pub(crate) fn vector_width(types: &[DType]) -> usize {
    16 / types.iter().map(|t| t.size()).min().unwrap_or(16).min(16)
}

/// Array operands in kernel order (outputs first, then array inputs) with their types.
fn array_types(inputs: &[Param], outputs: &[Param], v: &Variant) -> Vec<DType> {
    outputs
        .iter()
        .map(|p| p.dtype)
        .chain(
            inputs
                .iter()
                .enumerate()
                .filter(|&(k, _)| !v.scalar_inputs.get(k))
                .map(|(_, p)| p.dtype),
        )
        .collect()
}

/// The body for one element: the inputs bound from `value(k)` (array operand `k`'s loaded
/// value) or their scalar slots, the outputs declared, the body, then `store(k, name)` for
/// each output.
pub(super) fn element(
    inputs: &[Param],
    outputs: &[Param],
    body: &str,
    v: &Variant,
    indent: &str,
    value: &dyn Fn(usize) -> String,
    store: &dyn Fn(usize, &Param) -> String,
) -> String {
    let mut s = String::new();
    let mut array = outputs.len();
    let mut slot = 0;
    for (k, p) in inputs.iter().enumerate() {
        let x = if v.scalar_inputs.get(k) {
            slot += 1;
            scalar(p.dtype, slot - 1)
        } else {
            array += 1;
            value(array - 1)
        };
        let _ = writeln!(s, "{indent}const {} {} = {x};", body_type(p.dtype), p.name);
    }
    for p in outputs {
        let _ = writeln!(s, "{indent}{} {};", body_type(p.dtype), p.name);
    }
    let _ = writeln!(s, "{indent}{{\n#line 1 \"body\"\n{body}\n{indent};}}");
    for (k, p) in outputs.iter().enumerate() {
        let _ = writeln!(s, "{indent}{}", store(k, p));
    }
    s
}

/// Adds to `target(k)`, for every array operand `k`, the offset of the index `ds_r` decomposed
/// over `axes` (innermost first, the last one outermost and taking the quotient whole).
fn decompose(
    s: &mut String,
    axes: impl Iterator<Item = usize>,
    arrays: usize,
    idx: &str,
    sidx: &str,
    indent: &str,
    target: impl Fn(usize) -> String,
) {
    for axis in axes {
        if axis == 0 {
            for k in 0..arrays {
                let _ = writeln!(
                    s,
                    "{indent}{} += ({sidx})ds_r * ({sidx})ds_a.strides[{k}][0];",
                    target(k)
                );
            }
        } else {
            let _ = writeln!(
                s,
                "{indent}{{ const {idx} ds_q = ds_r / ({idx})ds_a.shape[{axis}]; const {idx} ds_c = ds_r - ds_q * ({idx})ds_a.shape[{axis}]; ds_r = ds_q;"
            );
            for k in 0..arrays {
                let _ = writeln!(
                    s,
                    "{indent}  {} += ({sidx})ds_c * ({sidx})ds_a.strides[{k}][{axis}];",
                    target(k)
                );
            }
            let _ = writeln!(s, "{indent}}}");
        }
    }
}

/// Declares the staged inputs' shared tiles of the tiled variant without pairs (`TILE` rows of
/// `TILE + 1` elements of their body types).
fn declare_tiles(s: &mut String, types: &[DType], staged: &[usize]) {
    for &k in staged {
        let _ = writeln!(
            s,
            "  __shared__ {} ds_sm{k}[{TILE}][{}];",
            body_type(types[k]),
            TILE + 1
        );
    }
}

/// Opens the grid-stride loop over block iterations (`threads * PER_THREAD` iteration indices
/// each) and declares, for each of `slots` slots, its in-range flags (`ds_ok[slot]` followed by
/// `flags`, `""` or `"[2]"`), each of the `arrays` operands' offset, and for the `staged`
/// inputs the flags and offsets of their own slots (`ds_okp`, `ds_p{k}`).
pub(super) fn open_loop(
    s: &mut String,
    arrays: usize,
    staged: &[usize],
    (threads, slots): (usize, usize),
    flags: &str,
    (idx, sidx): (&str, &str),
) {
    let _ = writeln!(
        s,
        "  for ({idx} ds_base = ({idx})blockIdx.x * ({threads} * {PER_THREAD}) + threadIdx.x; ds_base < ds_n; ds_base += ({idx})gridDim.x * ({threads} * {PER_THREAD})) {{"
    );
    let _ = writeln!(s, "    bool ds_ok[{slots}]{flags};");
    for k in 0..arrays {
        let _ = writeln!(s, "    {sidx} ds_o{k}[{slots}];");
    }
    if !staged.is_empty() {
        let _ = writeln!(s, "    bool ds_okp[{slots}]{flags};");
        for &k in staged {
            let _ = writeln!(s, "    {sidx} ds_p{k}[{slots}];");
        }
    }
}

/// The tile of this block iteration (of `threads * PER_THREAD` iteration indices), tiles of
/// `rows` x `cols` over the last two of `rank` axes (the last fastest): the extents `ds_la`,
/// `ds_lb`, the tile's coordinates `ds_at`, `ds_bt`, and each of the `arrays` operands' offset
/// of the other axes, `ds_t{k}`.
pub(super) fn tile_origin(
    s: &mut String,
    (rank, arrays): (usize, usize),
    (rows, cols): (usize, usize),
    threads: usize,
    (idx, sidx): (&str, &str),
) {
    let (a, b) = (rank - 2, rank - 1);
    let _ = writeln!(
        s,
        "    {idx} ds_r = ds_base / ({threads} * {PER_THREAD});\n    const {idx} ds_la = ({idx})ds_a.shape[{a}], ds_lb = ({idx})ds_a.shape[{b}];\n    const {idx} ds_ta = (ds_la + {rows} - 1) / {rows}, ds_tb = (ds_lb + {cols} - 1) / {cols};\n    const {idx} ds_bt = ds_r % ds_tb; ds_r /= ds_tb; const {idx} ds_at = ds_r % ds_ta; ds_r /= ds_ta;"
    );
    for k in 0..arrays {
        let _ = writeln!(s, "    {sidx} ds_t{k} = 0;");
    }
    decompose(s, (0..a).rev(), arrays, idx, sidx, "    ", |k| {
        format!("ds_t{k}")
    });
}

/// The CUDA C source of `variant` of the kernel with these inputs, outputs and body. Array
/// operands are numbered outputs first, then the array inputs, in declaration order.
///
/// - The vector variant (contiguous operands, every address 16-byte aligned) gives each
///   thread [`vector_width`] consecutive elements, moved as 16-byte vectors, and the last
///   elements (fewer than that width) one by one.
/// - The others give each thread [`PER_THREAD`] elements per iteration of a grid-stride loop,
///   `THREADS` apart: their offsets, then all their loads, then the body and the stores.
/// - The tiled variant walks the last two axes in [`TILE`]-square tiles (the last axis fastest
///   inside a tile, one tile per block iteration). Its staged inputs (those whose fastest axis
///   is the second-to-last) are read along that axis into shared memory, and each thread takes
///   its elements from there; elements past the extents are skipped.
pub(crate) fn source(inputs: &[Param], outputs: &[Param], body: &str, v: &Variant) -> String {
    let types = array_types(inputs, outputs, v);
    let arrays = types.len();
    let scalars = v.scalar_inputs.count();
    let (idx, sidx) = if v.idx32 {
        ("unsigned int", "int")
    } else {
        ("unsigned long long", "long long")
    };
    let r = v.rank;
    let u = PER_THREAD;
    let mut s = String::from(PRELUDE);
    let _ = writeln!(
        s,
        "struct ds_args {{ unsigned long long n; unsigned long long shape[{r}]; long long strides[{arrays}][{r}]; unsigned long long ptr[{arrays}]; unsigned long long scalar[{}]; }};",
        scalars.max(1)
    );
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void __launch_bounds__({}) {ENTRY}(const ds_args ds_a) {{",
        launch_bounds(v)
    );
    let _ = writeln!(s, "  const {idx} ds_n = ({idx})ds_a.n;");
    if v.vector {
        let w = vector_width(&types);
        let _ = writeln!(
            s,
            "  const {idx} ds_groups = ds_n / {w};\n  const {idx} ds_stride = ({idx})gridDim.x * blockDim.x;\n  const {idx} ds_tid = ({idx})blockIdx.x * blockDim.x + threadIdx.x;"
        );
        // Two groups per iteration, `ds_stride` apart: all their loads before any store.
        let _ = writeln!(
            s,
            "  for ({idx} ds_g0 = ds_tid; ds_g0 < ds_groups; ds_g0 += 2 * ds_stride) {{\n    const bool ds_okh[2] = {{true, ds_g0 + ds_stride < ds_groups}};"
        );
        for (k, &t) in types.iter().enumerate() {
            let st = storage_type(t);
            let chunks = w * t.size() / 16;
            let _ = writeln!(s, "    __align__(16) {st} ds_e{k}[2][{w}];");
            if k >= outputs.len() {
                let _ = writeln!(
                    s,
                    "#pragma unroll\n    for (int ds_h = 0; ds_h < 2; ++ds_h) if (ds_okh[ds_h]) {{\n#pragma unroll\n      for (int ds_c = 0; ds_c < {chunks}; ++ds_c) reinterpret_cast<uint4*>(ds_e{k}[ds_h])[ds_c] = reinterpret_cast<const uint4*>(ds_a.ptr[{k}])[(ds_g0 + ds_h * ds_stride) * {chunks} + ds_c];\n    }}"
                );
            }
        }
        let _ = writeln!(
            s,
            "#pragma unroll\n    for (int ds_h = 0; ds_h < 2; ++ds_h) {{\n      if (!ds_okh[ds_h]) continue;\n#pragma unroll\n      for (int ds_j = 0; ds_j < {w}; ++ds_j) {{"
        );
        s += &element(
            inputs,
            outputs,
            body,
            v,
            "        ",
            &|k| convert_in(types[k], &format!("ds_e{k}[ds_h][ds_j]")),
            &|k, p| format!("ds_e{k}[ds_h][ds_j] = {};", convert_out(p.dtype, &p.name)),
        );
        let _ = writeln!(s, "      }}");
        for (k, &t) in types.iter().enumerate().take(outputs.len()) {
            let chunks = w * t.size() / 16;
            let _ = writeln!(
                s,
                "#pragma unroll\n      for (int ds_c = 0; ds_c < {chunks}; ++ds_c) reinterpret_cast<uint4*>(ds_a.ptr[{k}])[(ds_g0 + ds_h * ds_stride) * {chunks} + ds_c] = reinterpret_cast<const uint4*>(ds_e{k}[ds_h])[ds_c];"
            );
        }
        let _ = writeln!(s, "    }}\n  }}");
        let _ = writeln!(
            s,
            "  for ({idx} ds_i = ds_groups * {w} + ds_tid; ds_i < ds_n; ds_i += ds_stride) {{"
        );
        s += &element(
            inputs,
            outputs,
            body,
            v,
            "    ",
            &|k| load(types[k], k, "ds_i"),
            &|k, p| store(p.dtype, k, "ds_i", &p.name),
        );
        s.push_str("  }\n}\n");
        return s;
    }
    // Shared-memory tiles of the staged inputs (padded rows: conflict-free both ways).
    let staged: Vec<usize> = (outputs.len()..arrays)
        .filter(|&k| v.staged.get(k - outputs.len()))
        .collect();
    if v.tiled && v.pairs {
        super::pairs::tiled_pairs(
            &mut s,
            inputs,
            outputs,
            body,
            v,
            &types,
            &staged,
            (idx, sidx),
        );
        return s;
    }
    // `n` is the number of iteration indices: elements, or whole tiles' slots when tiled.
    declare_tiles(&mut s, &types, &staged);
    open_loop(&mut s, arrays, &staged, (THREADS, u), "", (idx, sidx));
    if !staged.is_empty() {
        let _ = writeln!(s, "    unsigned int ds_ai[{u}], ds_bi[{u}];");
    }
    if v.tiled {
        // One block iteration is one tile: its coordinates and the offsets of the other axes
        // once, then each slot's row (`THREADS / TILE` rows apart) and column.
        let (a, b) = (r - 2, r - 1);
        tile_origin(&mut s, (r, arrays), (TILE, TILE), THREADS, (idx, sidx));
        let _ = writeln!(
            s,
            "    const unsigned int ds_b0 = threadIdx.x % {TILE}, ds_a0 = threadIdx.x / {TILE};\n#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{\n      const {idx} ds_ai_ = ds_a0 + ds_u * ({THREADS} / {TILE}), ds_bi_ = ds_b0;\n      const {idx} ds_ca = ds_at * {TILE} + ds_ai_, ds_cb = ds_bt * {TILE} + ds_bi_;\n      ds_ok[ds_u] = ds_ca < ds_la && ds_cb < ds_lb;"
        );
        for k in 0..arrays {
            let _ = writeln!(
                s,
                "      ds_o{k}[ds_u] = ds_t{k} + ({sidx})ds_ca * ({sidx})ds_a.strides[{k}][{a}] + ({sidx})ds_cb * ({sidx})ds_a.strides[{k}][{b}];"
            );
        }
        if !staged.is_empty() {
            // The same tile read the other way round: this slot's thread reads along the
            // second-to-last axis.
            let _ = writeln!(
                s,
                "      ds_ai[ds_u] = (unsigned int)ds_ai_; ds_bi[ds_u] = (unsigned int)ds_bi_;\n      const {idx} ds_ca2 = ds_at * {TILE} + ds_bi_, ds_cb2 = ds_bt * {TILE} + ds_ai_;\n      ds_okp[ds_u] = ds_ca2 < ds_la && ds_cb2 < ds_lb;"
            );
            for &k in &staged {
                let _ = writeln!(
                    s,
                    "      ds_p{k}[ds_u] = ds_t{k} + ({sidx})ds_ca2 * ({sidx})ds_a.strides[{k}][{a}] + ({sidx})ds_cb2 * ({sidx})ds_a.strides[{k}][{b}];"
                );
            }
        }
    } else {
        let _ = writeln!(
            s,
            "#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{"
        );
        let _ = writeln!(s, "      {idx} ds_r = ds_base + ({idx})ds_u * {THREADS};");
        let _ = writeln!(s, "      ds_ok[ds_u] = ds_r < ds_n;");
        for k in 0..arrays {
            if v.contiguous {
                let _ = writeln!(s, "      ds_o{k}[ds_u] = ({sidx})ds_r;");
            } else {
                let _ = writeln!(s, "      ds_o{k}[ds_u] = 0;");
            }
        }
        if !v.contiguous {
            decompose(&mut s, (0..r).rev(), arrays, idx, sidx, "      ", |k| {
                format!("ds_o{k}[ds_u]")
            });
        }
    }
    let _ = writeln!(s, "    }}");
    // Every array input's loads for all slots, before any store; staged inputs through shared
    // memory.
    for (k, &t) in types.iter().enumerate().skip(outputs.len()) {
        let bt = body_type(t);
        if staged.contains(&k) {
            let _ = writeln!(
                s,
                "#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) if (ds_okp[ds_u]) ds_sm{k}[ds_bi[ds_u]][ds_ai[ds_u]] = {};",
                load(t, k, &format!("ds_p{k}[ds_u]"))
            );
        } else {
            let _ = writeln!(
                s,
                "    {bt} ds_v{k}[{u}];\n#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) ds_v{k}[ds_u] = ds_ok[ds_u] ? {} : ({bt})0;",
                load(t, k, &format!("ds_o{k}[ds_u]"))
            );
        }
    }
    if !staged.is_empty() {
        s.push_str("    __syncthreads();\n");
    }
    let _ = writeln!(
        s,
        "#pragma unroll\n    for (int ds_u = 0; ds_u < {u}; ++ds_u) {{"
    );
    let _ = writeln!(s, "      if (!ds_ok[ds_u]) continue;");
    s += &element(
        inputs,
        outputs,
        body,
        v,
        "      ",
        &|k| {
            if staged.contains(&k) {
                format!("ds_sm{k}[ds_ai[ds_u]][ds_bi[ds_u]]")
            } else {
                format!("ds_v{k}[ds_u]")
            }
        },
        &|k, p| store(p.dtype, k, &format!("ds_o{k}[ds_u]"), &p.name),
    );
    s.push_str("    }\n");
    if !staged.is_empty() {
        s.push_str("    __syncthreads();\n");
    }
    s.push_str("  }\n}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_hold_the_indices_of_true_items() {
        let f: Flags = [true, false, true, true].into_iter().collect();
        assert_eq!(
            (0..6).map(|k| f.get(k)).collect::<Vec<_>>(),
            [true, false, true, true, false, false]
        );
        assert_eq!(f.count(), 3);
        assert_eq!(Flags::default().count(), 0);
        // Every index below 32 is held; later items are not represented, and asking for any
        // index past 31 answers false without panicking.
        let all: Flags = std::iter::repeat_n(true, 40).collect();
        assert_eq!(all.count(), 32);
        assert!(all.get(31) && !all.get(32) && !all.get(usize::MAX));
        // Equal sets are equal keys, whatever the length of the items they came from.
        let short: Flags = [false, true].into_iter().collect();
        let long: Flags = [false, true, false, false].into_iter().collect();
        assert_eq!(short, long);
    }

    #[test]
    fn declarations_parse_with_every_spelling_and_bad_ones_are_refused() {
        let p = parse_params(" f32 a, float32 x ,unsigned char  c,long long n", "inputs").unwrap();
        let got: Vec<(DType, &str)> = p.iter().map(|p| (p.dtype, p.name.as_str())).collect();
        assert_eq!(
            got,
            [
                (DType::F32, "a"),
                (DType::F32, "x"),
                (DType::U8, "c"),
                (DType::I64, "n")
            ]
        );
        assert!(parse_params("  ", "inputs").unwrap().is_empty());
        let kind = |s: &str| parse_params(s, "inputs").unwrap_err().kind().clone();
        assert_eq!(kind("f32"), crate::ErrorKind::InvalidArgument);
        assert_eq!(kind("complex64 z"), crate::ErrorKind::UnsupportedDtype);
        assert_eq!(kind("f32 1x"), crate::ErrorKind::InvalidArgument);
        assert_eq!(kind("f32 ds_x"), crate::ErrorKind::InvalidArgument);
        assert_eq!(kind("f32 a,"), crate::ErrorKind::InvalidArgument);
    }

    #[test]
    fn normalize_drops_unit_axes_orders_by_the_first_operand_and_merges() {
        // A contiguous 2x3x4 output, a transposed input and a broadcast row.
        let n = normalize(&[2, 3, 4], &[vec![12, 4, 1], vec![12, 4, 1], vec![0, 0, 1]]);
        assert_eq!(n.shape, [6, 4]);
        assert_eq!(n.strides, [vec![4, 1], vec![4, 1], vec![0, 1]]);
        let n = normalize(&[2, 3, 4], &[vec![12, 4, 1], vec![12, 4, 1]]);
        assert_eq!((n.shape.clone(), n.contiguous()), (vec![24], true));
        // The output's order decides: a transposed output puts its fastest axis last.
        let n = normalize(&[4, 3], &[vec![1, 4], vec![3, 1]]);
        assert_eq!(n.shape, [3, 4]);
        assert_eq!(n.strides, [vec![4, 1], vec![1, 3]]);
        // Unit axes vanish, a single element keeps one axis; negative strides do not merge
        // with positive ones.
        let n = normalize(&[1, 1], &[vec![5, 1], vec![7, -1]]);
        assert_eq!((n.shape.clone(), n.len()), (vec![1], 1));
        let n = normalize(&[2, 3], &[vec![3, 1], vec![-3, 1]]);
        assert_eq!(n.shape, [2, 3]);
        // Both axes reversed is one reversed run.
        let n = normalize(&[2, 3], &[vec![3, 1], vec![-3, -1]]);
        assert_eq!(
            (n.shape.clone(), n.strides.clone()),
            (vec![6], vec![vec![1], vec![-1]])
        );
        let n = normalize(&[2, 3], &[vec![-3, -1], vec![-3, -1]]);
        assert_eq!(
            (n.shape.clone(), n.strides.clone()),
            (vec![6], vec![vec![-1], vec![-1]])
        );
    }

    #[test]
    fn tiles_are_taken_where_an_operand_runs_along_the_second_to_last_axis() {
        // A transposed input beside a contiguous output: tiled, 3 x 2 tiles of 32 x 32.
        let t = normalize(&[70, 40], &[vec![40, 1], vec![1, 70]]);
        assert!(t.tiled());
        assert_eq!(t.iterations(true, false), 3 * 2 * 1024);
        // With pairs, tiles of 64 x 64 of 2048 pairs: 2 x 1.
        assert_eq!(t.iterations(true, true), 2 * 2048);
        // A broadcast row is not a reason to tile; a broadcast column is.
        assert!(!normalize(&[70, 40], &[vec![40, 1], vec![0, 1]]).tiled());
        assert!(normalize(&[70, 40], &[vec![40, 1], vec![1, 0]]).tiled());
        // Short axes are not tiled.
        assert!(!normalize(&[70, 8], &[vec![8, 1], vec![1, 70]]).tiled());
        assert_eq!(t.iterations(false, false), 2800);
    }

    #[test]
    fn staged_tiles_fit_in_the_stage_bytes() {
        // Six transposed f16 inputs beside a contiguous output.
        let mut strides = vec![vec![64, 1]];
        strides.extend((0..6).map(|_| vec![1, 64]));
        let n = normalize(&[64, 64], &strides);
        let types = [DType::F16; 6];
        // Without pairs a tile is 32 x 33 floats (4224 bytes): all six fit in 40 KiB.
        assert_eq!(n.staged(1, &types, false), [true; 6]);
        // With pairs it is 64 x 64 halves (8 KiB): five fit.
        assert_eq!(
            n.staged(1, &types, true),
            [true, true, true, true, true, false]
        );
        // Three f32 tiles of pairs (16 KiB each) do not fit; an f16 one after them still does.
        let n = normalize(&[64, 64], &strides[..5]);
        assert_eq!(
            n.staged(1, &[DType::F32, DType::F32, DType::F32, DType::F16], true),
            [true, true, false, true]
        );
        // An input running along the last axis is never staged.
        let n = normalize(&[64, 64], &[vec![64, 1], vec![64, 1], vec![1, 64]]);
        assert_eq!(n.staged(1, &[DType::U8, DType::U8], true), [false, true]);
    }

    #[test]
    fn tiles_of_pairs_inside_the_extents_take_a_copy_without_bounds_checks() {
        let inputs = parse_params("f32 a, f16 x, f16 y", "inputs").unwrap();
        let outputs = parse_params("f16 z", "outputs").unwrap();
        for idx32 in [true, false] {
            let v = Variant {
                scalar_inputs: [true, false, false].into_iter().collect(),
                rank: 3,
                idx32,
                contiguous: false,
                tiled: true,
                staged: [true, false].into_iter().collect(),
                vector: false,
                pairs: true,
                paired: [true, true, false].into_iter().collect(),
            };
            let src = source(&inputs, &outputs, "z = a * x + y", &v);
            let (_, rest) = src
                .split_once("if (ds_la - ds_at * 64 >= 64 && ds_lb - ds_bt * 64 >= 64) {")
                .expect("the test for a whole tile");
            let (full, edge) = rest.split_once("} else {").unwrap();
            // The whole tile's copy states its checks as constants; the other compares.
            for checks in ["ds_ok[ds_u][1] = true", "ds_okp[ds_u][1] = true"] {
                assert!(full.contains(checks) && !edge.contains(checks), "{checks}");
            }
            assert!(!full.contains("< ds_la") && !full.contains("< ds_lb"));
            assert!(edge.contains("ds_cb + 1 < ds_lb") && edge.contains("ds_ca2 + 1 < ds_la"));
            // Both copies have the barriers, and the same loads and stores.
            assert_eq!(full.matches("__syncthreads()").count(), 2);
            assert_eq!(edge.matches("__syncthreads()").count(), 2);
            assert_eq!(
                full.matches("ds_a.ptr[").count(),
                edge.matches("ds_a.ptr[").count()
            );
        }
    }

    #[test]
    fn pairs_are_taken_for_narrow_types_and_paired_where_each_pair_is_one_aligned_access() {
        use DType::*;
        assert!(pairs_for(&[F16, F16, F16]));
        assert!(pairs_for(&[F32, F16, U8]));
        assert!(!pairs_for(&[F32, F32]));
        assert!(!pairs_for(&[F16, F64]));
        // f16 z (contiguous 64 x 40) = x (transposed) + y (a row of stride 2, odd offset).
        let n = normalize(&[64, 40], &[vec![40, 1], vec![1, 64], vec![80, 2]]);
        assert_eq!(n.strides, [vec![40, 1], vec![1, 64], vec![80, 2]]);
        // The output pairs along the last axis, the transposed input (staged) along the other.
        assert!(n.pairable(0, false, 4096, 2));
        assert!(n.pairable(1, true, 4096, 2));
        assert!(!n.pairable(1, false, 4096, 2));
        // Misaligned element zero, or a step of 2 along the pair's axis: two accesses.
        assert!(!n.pairable(0, false, 4098, 2));
        assert!(!n.pairable(2, false, 4096, 2));
        // An odd stride elsewhere puts some pairs at odd elements.
        let odd = normalize(&[64, 40], &[vec![41, 1]]);
        assert!(!odd.pairable(0, false, 4096, 2));
        // Broadcast axes are even strides; a reversed axis is not paired.
        let b = normalize(&[64, 40], &[vec![40, 1], vec![0, 1], vec![40, -1]]);
        assert!(b.pairable(1, false, 4096, 1));
        assert!(!b.pairable(2, false, 4096, 1));
        assert!(!normalize(&[40], &[vec![1]]).pairable(0, false, 0, 2));
    }

    #[test]
    fn index_width_follows_elements_and_reach() {
        let small = normalize(&[1 << 20], &[vec![1], vec![2]]);
        assert!(small.fits_32());
        let far = normalize(&[1 << 20], &[vec![1], vec![1 << 12]]);
        assert!(!far.fits_32());
        let many = normalize(&[1 << 31], &[vec![1]]);
        assert!(!many.fits_32());
    }

    #[test]
    fn generated_source_declares_every_parameter_once_and_stores_every_output() {
        let inputs = parse_params("f32 a, f16 x, f32 y", "inputs").unwrap();
        let outputs = parse_params("f16 z", "outputs").unwrap();
        let v = Variant {
            scalar_inputs: [true, false, false].into_iter().collect(),
            rank: 2,
            idx32: true,
            contiguous: false,
            tiled: false,
            staged: Flags::default(),
            vector: false,
            pairs: false,
            paired: Flags::default(),
        };
        let src = source(&inputs, &outputs, "z = a * x + y", &v);
        assert!(src.contains("const float a = __uint_as_float((unsigned int)ds_a.scalar[0]);"));
        assert!(src.contains("ds_v1[ds_u] = ds_ok[ds_u] ? ds_f16_to_f32(((const unsigned short*)ds_a.ptr[1])[ds_o1[ds_u]]) : (float)0;"));
        assert!(src.contains("const float x = ds_v1[ds_u];"));
        assert!(src.contains("const float y = ds_v2[ds_u];"));
        assert!(src.contains("((unsigned short*)ds_a.ptr[0])[ds_o0[ds_u]] = ds_f32_to_f16(z);"));
        assert!(src.contains("long long strides[3][2]"));
        assert_eq!(arg_words(2, 3, 1), 1 + 2 + 6 + 3 + 1);
        let c = Variant {
            contiguous: true,
            rank: 1,
            ..v
        };
        assert!(source(&inputs, &outputs, "z = x", &c).contains("ds_o2[ds_u] = (int)ds_r;"));
        let t = Variant { tiled: true, ..v };
        assert!(source(&inputs, &outputs, "z = x", &t).contains("ds_cb < ds_lb"));
    }

    #[test]
    fn ranks_up_to_64_are_taken_where_the_argument_block_fits() {
        // Every operand count up to 6 arrays and 8 scalars takes 64 axes, in at most 4096 bytes.
        for arrays in 1..=6 {
            for scalars in 0..=MAX_SCALARS {
                assert!(check_rank(MAX_RANK, arrays, scalars).is_ok());
                assert!(arg_words(MAX_RANK, arrays, scalars) * 8 <= MAX_ARG_BYTES);
            }
        }
        assert_eq!(arg_words(64, 6, 8) * 8, 3704);
        // 8 arrays: 55 axes fit and 56 do not (9 words per axis); 7 arrays: 62 and 63.
        assert!(check_rank(55, 8, 8).is_ok());
        let e = check_rank(56, 8, 8).unwrap_err();
        assert_eq!(*e.kind(), crate::ErrorKind::InvalidArgument);
        assert!(
            e.to_string()
                .contains("4168 bytes, more than a kernel's 4096-byte parameter block"),
            "{e}"
        );
        assert!(check_rank(62, 7, 8).is_ok() && check_rank(63, 7, 8).is_err());
        // Beyond 64 axes, whatever the operands.
        let e = check_rank(65, 1, 0).unwrap_err();
        assert_eq!(*e.kind(), crate::ErrorKind::InvalidArgument);
        assert!(
            e.to_string()
                .contains("65 axes remain; elementwise kernels take at most 64")
        );
    }
}
