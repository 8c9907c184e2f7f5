//! Generator of the permute kernels (`kernels/permute.ptx`): any permutation of up to 8 axes,
//! tiles of T x T slots through shared memory, fused with a conversion.
//!
//! Parameter offsets are those of [`PermuteArgs`].

use std::mem::offset_of;

use crate::abi::{PERMUTE_AXES, PermuteArgs};
use crate::emit::code::{Class, Code, Gen};
use crate::emit::templates::Templates;

mod elementwise;
mod origin;
mod packed;
mod slots;
mod vec;
mod wide;

pub(super) use elementwise::permute_kernel;
pub(super) use packed::permute_packed_kernel;
pub(super) use vec::permute_vec_kernel;
pub(super) use wide::permute_wide_kernel;

use origin::origin;

const RANK: u64 = offset_of!(PermuteArgs, rank) as u64;
const LEN: u64 = offset_of!(PermuteArgs, len) as u64;
const CHUNK: u64 = offset_of!(PermuteArgs, chunk) as u64;
const NCHUNKS: u64 = offset_of!(PermuteArgs, nchunks) as u64;
/// Read as 32-bit strides: the low words of the 64-bit ones.
const DST_STRIDES: u64 = offset_of!(PermuteArgs, dst_strides) as u64;
const SRC_STRIDES: u64 = offset_of!(PermuteArgs, src_strides) as u64;
const DST_STEPS: u64 = offset_of!(PermuteArgs, dst_steps) as u64;
const SRC_STEPS: u64 = offset_of!(PermuteArgs, src_steps) as u64;
const MAGIC32: u64 = offset_of!(PermuteArgs, magic32) as u64;
const SHIFT32: u64 = offset_of!(PermuteArgs, shift32) as u64;
const WORDS: u64 = offset_of!(PermuteArgs, words) as u64;
const ORIGIN32: u64 = offset_of!(PermuteArgs, origin32) as u64;
const AXES: usize = PERMUTE_AXES;

/// The generated parts of one permute kernel, for [`render`].
struct Parts {
    /// Slots per side, block rows, shared pitch (the template's `T`, `BY`, `PITCH`) and the
    /// bytes of shared memory.
    geometry: (u64, u64, u64, u64),
    decls: String,
    setup: String,
    /// The tile origin (see [`origins`]): after a partial tile (and for a block's first
    /// tile), and during a whole tile's loads.
    origins: [String; 2],
    /// The phases for partial tiles, then for whole ones: the read phase's loads, the rest of
    /// the read phase (conversions, the barrier and the shared stores), the write phase.
    phases: [(String, String, String); 2],
}

/// The tile origin, twice (with distinct labels): for the template's `ORIGIN`, computed after
/// a partial tile, and `ORIGIN_NEXT`, computed for the next tile while a whole tile's loads
/// are in flight. `ORIGIN_NEXT` leaves out the remaining extents: a partial tile after a
/// whole one starts again at `ORIGIN`.
///
/// Without `ahead`, `ORIGIN_NEXT` only marks the next tile as not known to be whole, so that
/// every tile's origin is computed at `ORIGIN`: for kernels whose registers would otherwise
/// cost a resident block per multiprocessor.
fn origins(g: &mut Gen, shifts: (u32, u32), ahead: bool) -> [String; 2] {
    let next = if ahead {
        origin(g, shifts, "_NEXT", false)
    } else {
        "\tmov.pred %pfull, 0;\n".to_string()
    };
    [origin(g, shifts, "", true), next]
}

/// Renders `permute.ptx` for kernel `name`; with `doc`, the template's comment (which
/// describes the element-wise kernels) is replaced by it.
fn render(t: &mut Templates, name: &str, parts: Parts, doc: Option<String>) -> String {
    let (tt, by, pitch, bytes) = parts.geometry;
    let [
        (read, read_rest, write),
        (read_whole, read_rest_whole, write_whole),
    ] = parts.phases;
    let [origin, origin_next] = parts.origins;
    let text = t.render(
        "permute.ptx",
        &[
            ("NAME", name.to_string()),
            ("T", tt.to_string()),
            ("BY", by.to_string()),
            ("PITCH", pitch.to_string()),
            ("TILE_BYTES", bytes.to_string()),
            ("DECLS", parts.decls),
            ("SETUP", parts.setup),
            ("ORIGIN", origin),
            ("ORIGIN_NEXT", origin_next),
            ("READ", read),
            ("READ_REST", read_rest),
            ("WRITE", write),
            ("READ_WHOLE", read_whole),
            ("READ_REST_WHOLE", read_rest_whole),
            ("WRITE_WHOLE", write_whole),
        ],
    );
    match doc {
        None => text,
        Some(doc) => {
            let body = text.find(".shared").map_or(text.as_str(), |at| &text[at..]);
            format!("{doc}{body}")
        }
    }
}

/// `x and y` as one predicate (`None` when neither is given: a whole tile).
fn both(g: &mut Gen, c: &mut Code, x: Option<&str>, y: Option<&str>) -> Option<String> {
    match (x, y) {
        (Some(x), Some(y)) => {
            let pr = g.reg(Class::Pred);
            c.line(format!("and.pred {pr}, {x}, {y};"));
            Some(pr)
        }
        (x, y) => x.or(y).map(str::to_string),
    }
}
