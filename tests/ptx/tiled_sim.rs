//! Runs the tiled copy kernels (`copy_tiled_bN`, `copy_tiled_e_bN`, the pipelined
//! `copy_tiled_a_bN`, whose `cp.async` copies land as late and as early as the hardware may
//! land them, and the narrow kernels
//! `copy_split_cC_bN` / `copy_join_cC_bN` and their shifted kinds that run some of their
//! plans) through the PTX
//! interpreter (`tools/ptxsim_tiled.py` over `tools/ptxsim_wide.py`) on copies that devspan's
//! planner tiles: narrow axes moved to and from the innermost position, many axes of extent 2
//! and 3 reversed and permuted, sources sliced backwards, broadcast or misaligned, every
//! element size, tiles capped small so that each block loops over several tiles and axes are
//! cut into pieces, planes off their 16-byte alignment. Each case's destination must equal a
//! reference byte for byte (poisoned first, so that unwritten and stray bytes show); for a
//! plan that leaves rests to other launches, the reference holds the elements that the
//! tiled launch covers and poison elsewhere.
//!
//! The sample runs four cases; the full check runs all of them. Needs Python 3, like
//! [`crate::ptx_sim`].

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use devspan::DType;

use crate::{Check, Out};

const TOOL: &str = include_str!("../../tools/ptxsim_tiled.py");
const INTERPRETER: &str = include_str!("../../tools/ptxsim_wide.py");

const SAMPLE: [&str; 4] = ["chw_hwc/3/b1", "hwc_chw/3/b4", "rev2/9/b2", "rev3/6/b4"];

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "tiled_sim::sample_in_a_ptx_interpreter",
            full: false,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, true),
        },
        Check {
            name: "tiled_sim::tiled_kernels_copy_every_element_in_a_ptx_interpreter",
            full: true,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, false),
        },
    ]
}

/// One copy: `shape`, strides in elements, element size, tile cap; or with `cast` a cast
/// between those types (`size` the source's).
struct Layout {
    name: String,
    shape: Vec<usize>,
    dst: Vec<isize>,
    src: Vec<isize>,
    size: usize,
    cap: u32,
    cast: Option<(DType, DType)>,
    /// Bytes between the regions' 16-byte aligned bases and their first element.
    misalign: u64,
}

/// The unsigned integer type of `size` bytes (1, 2, 4, else 8): what a copy of elements of
/// that size moves.
pub fn bits_of_size(size: usize) -> DType {
    match size {
        1 => DType::U8,
        2 => DType::U16,
        4 => DType::U32,
        _ => DType::U64,
    }
}

/// Standard-layout (C-order) strides of `shape`, in elements.
pub fn standard(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for k in (0..shape.len()).rev() {
        s[k] = acc;
        acc *= shape[k] as isize;
    }
    s
}

/// `n` bytes of a xorshift sequence from `seed`: the source data of the interpreter cases.
pub fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The element offsets `(d, s)` of every element of a view of `shape` (the last axis
/// fastest), from `(d0, s0)` by the element strides `dst` and `src`.
pub fn view_offsets(
    shape: &[usize],
    dst: &[isize],
    src: &[isize],
    d0: isize,
    s0: isize,
) -> Vec<(isize, isize)> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|i| {
            let (mut r, mut d, mut s) = (i, d0, s0);
            for k in (0..shape.len()).rev() {
                let c = (r % shape[k]) as isize;
                r /= shape[k];
                d += c * dst[k];
                s += c * src[k];
            }
            (d, s)
        })
        .collect()
}

/// Replaces the NaNs among `source`'s elements of float type `t` by finite values (their
/// highest exponent bit cleared): the interpreter's NaN results are canonical, the host
/// reference's payloads unspecified.
pub fn without_nans(source: &mut [u8], t: DType) {
    let size = t.size();
    for e in source.chunks_exact_mut(size) {
        let mut bits = [0u8; 8];
        bits[..size].copy_from_slice(e);
        let x = u64::from_le_bytes(bits);
        let (exp_bits, man_bits) = match t {
            DType::F16 => (5, 10),
            DType::BF16 => (8, 7),
            DType::F32 => (8, 23),
            DType::F64 => (11, 52),
            _ => return,
        };
        let exp = (x >> man_bits) & ((1 << exp_bits) - 1);
        let man = x & ((1 << man_bits) - 1);
        if exp == (1 << exp_bits) - 1 && man != 0 {
            let y = x & !(1 << (man_bits + exp_bits - 1));
            e.copy_from_slice(&y.to_le_bytes()[..size]);
        }
    }
}

/// The runs of bytes of `source` (mapped at `base`) that `covered` marks, as the regions of a
/// case: the only source bytes its kernel may read.
pub fn covered_regions<'a>(base: u64, source: &'a [u8], covered: &[bool]) -> Vec<(u64, &'a [u8])> {
    let mut regions = Vec::new();
    let mut at = 0;
    while at < source.len() {
        if !covered[at] {
            at += 1;
            continue;
        }
        let end = (at..source.len())
            .find(|&b| !covered[b])
            .unwrap_or(source.len());
        regions.push((base + at as u64, &source[at..end]));
        at = end;
    }
    regions
}

/// `src.permuted_axes(perm)` of a standard-layout source of `shape` into a standard-layout
/// destination.
fn permuted(name: &str, shape: &[usize], perm: &[usize], size: usize, cap: u32) -> Layout {
    let src0 = standard(shape);
    let out: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
    Layout {
        name: name.to_string(),
        dst: standard(&out),
        src: perm.iter().map(|&a| src0[a]).collect(),
        shape: out,
        size,
        cap,
        cast: None,
        misalign: 0,
    }
}

fn layouts() -> Vec<Layout> {
    let mut all = Vec::new();
    let sizes = [1usize, 2, 4, 8];
    for c in [2usize, 3, 5] {
        for (i, &size) in sizes.iter().enumerate() {
            let (h, w) = [(8, 16), (5, 24), (4, 12), (3, 8)][i];
            let cap = [96, 64, 48, 32][i];
            all.push(permuted(
                &format!("chw_hwc/{c}/b{size}"),
                &[c, h, w],
                &[1, 2, 0],
                size,
                cap,
            ));
            all.push(permuted(
                &format!("hwc_chw/{c}/b{size}"),
                &[h, w, c],
                &[2, 0, 1],
                size,
                cap,
            ));
        }
    }
    // The narrow kernels with tiles of several chunks (the last one part of 32 vectors), a
    // batch axis, 16 channels, and source planes in reverse order.
    all.push(permuted(
        "nchw_nhwc/3/b1",
        &[2, 3, 32, 48],
        &[0, 2, 3, 1],
        1,
        0,
    ));
    all.push(permuted(
        "nhwc_nchw/3/b1",
        &[2, 32, 48, 3],
        &[0, 3, 1, 2],
        1,
        0,
    ));
    all.push(permuted("hwc_chw/16/b4", &[6, 40, 16], &[2, 0, 1], 4, 0));
    all.push(permuted("chw_hwc/16/b1", &[16, 6, 40], &[1, 2, 0], 1, 0));
    let mut l = permuted("chw_hwc_flipped/3/b4", &[3, 16, 64], &[1, 2, 0], 4, 0);
    l.src[2] = -l.src[2];
    all.push(l);
    // Planes off their 16-byte alignment (odd pixel counts) beside an aligned interleaved
    // side: the shifted joins and splits, whose rests other kernels copy; the sources end
    // where their regions do, so that a join's second block past a region's end would fault.
    // Tiles smaller than an image, so that no vector tile spans a whole contiguous image, and
    // for elements of 2 bytes or more, large enough for runs of pixels on which the shifted
    // kernels pay (`shifted_pays`: 512 bytes; 1 KiB on 5 channels or more for 4 and 8 bytes).
    for (c, size, [h, w], cap) in [
        (3usize, 1usize, [7usize, 13usize], 256u32),
        (16, 1, [7, 13], 256),
        (5, 4, [23, 37], 2048),
        (5, 8, [23, 37], 1024),
        (3, 2, [23, 37], 1024),
        (6, 2, [23, 37], 2048),
    ] {
        all.push(permuted(
            &format!("chw_hwc_odd/{c}/b{size}"),
            &[c, h, w],
            &[1, 2, 0],
            size,
            cap,
        ));
        all.push(permuted(
            &format!("hwc_chw_odd/{c}/b{size}"),
            &[h, w, c],
            &[2, 0, 1],
            size,
            cap,
        ));
    }
    // Images of 4 planes of 84 pixels: the planes off their alignment, the images on it.
    all.push(permuted(
        "nchw_nhwc_odd/4/b1",
        &[2, 4, 7, 12],
        &[0, 2, 3, 1],
        1,
        256,
    ));
    all.push(permuted(
        "nhwc_nchw_odd/4/b1",
        &[2, 7, 12, 4],
        &[0, 3, 1, 2],
        1,
        256,
    ));
    // Pixels of 3 channels moved whole: images transposed, the channels the fastest axis of
    // both sides (tiles of at most 1024 elements: the tiled kernels without cp.async).
    for size in [1usize, 2, 4] {
        all.push(permuted(
            &format!("hwc_whc/3/b{size}"),
            &[16, 32, 3],
            &[1, 0, 2],
            size,
            1024,
        ));
    }
    all.push(permuted(
        "nhwc_nwhc/3/b1",
        &[2, 16, 48, 3],
        &[0, 2, 1, 3],
        1,
        1024,
    ));
    // The same with the channels reversed (RGB <-> BGR and transposed).
    for size in [1usize, 4] {
        let mut l = permuted(
            &format!("hwc_whc_rev/3/b{size}"),
            &[16, 32, 3],
            &[1, 0, 2],
            size,
            1024,
        );
        l.src[2] = -l.src[2];
        all.push(l);
    }
    // Axes of 3 reversed, 1-, 2- and 4-byte elements: element-wise tiles of more than 4096
    // elements, in blocks of more than 512 threads (`copy_tiled_ew_bN`).
    for size in [1usize, 2, 4] {
        let shape = [2, 3, 3, 3, 3, 3, 3, 3, 3];
        let perm: Vec<usize> = (0..shape.len()).rev().collect();
        all.push(permuted(
            &format!("threes_rev/9/b{size}"),
            &shape,
            &perm,
            size,
            0,
        ));
    }
    // Element-wise tiles that take an axis whole where a piece would leave a rest (f32 41 of
    // 41, f16 65 of 65), and u8 and f32 tiles planned again for a write run shorter than a
    // sector (runs read/written: u8 225/20 -> 75/80 bytes, f32 180/24 -> 120/48).
    for (name, shape, perm, size, cap) in [
        (
            "whole_axis/4/b4",
            &[5, 5, 41, 2][..],
            &[2, 0, 3, 1][..],
            4,
            0,
        ),
        (
            "whole_axis/5/b2",
            &[4, 2, 65, 5, 3],
            &[1, 3, 0, 2, 4],
            2,
            1024,
        ),
        (
            "sector/6/b1",
            &[2, 4, 5, 2, 3, 75],
            &[5, 4, 3, 1, 2, 0],
            1,
            0,
        ),
        ("sector/5/b4", &[3, 2, 4, 90, 1], &[3, 2, 4, 1, 0], 4, 512),
    ] {
        all.push(permuted(name, shape, perm, size, cap));
    }
    // The pipelined kernels (`copy_tiled_a_bN`: 1- and 2-byte elements in tiles of 256
    // threads or more, their source copied into shared memory by cp.async): many axes of 2
    // reversed and randomly permuted, and mixed extents, in tiles of 4096 elements or more,
    // several to a block.
    all.push(permuted(
        "async_rev2/14/b1",
        &[2; 14],
        &(0..14).rev().collect::<Vec<_>>(),
        1,
        4096,
    ));
    all.push(permuted(
        "async_perm2/13/b2",
        &[2; 13],
        &[5, 12, 0, 9, 3, 7, 11, 1, 6, 10, 2, 8, 4],
        2,
        4096,
    ));
    all.push(permuted(
        "async_mixed/11/b1",
        &[4, 3, 2, 4, 3, 2, 4, 3, 2, 4, 2],
        &[10, 8, 6, 4, 2, 0, 1, 3, 5, 7, 9],
        1,
        4608,
    ));
    // A u8 copy whose innermost axis (2 elements, contiguous on both sides) stays innermost:
    // the planner moves its pairs as 2-byte units, on `copy_tiled_a_b2`, whose launch sizes
    // its shared memory for those units; 8 tiles over 3 blocks, so that blocks reach their
    // third buffer.
    let mut pairs: Vec<usize> = (0..15).rev().collect();
    pairs.push(15);
    all.push(permuted("async_pairs/16/b1", &[2; 16], &pairs, 1, 4096));
    // Byte tiles of 16 lines in shared memory: the line rotation L ^ L>>1 ^ L>>4 of their
    // gathers.
    let perm = [7, 2, 10, 0, 5, 11, 3, 8, 1, 6, 9, 4];
    all.push(permuted("perm2/12/b1", &[2; 12], &perm, 1, 2048));
    for &size in &sizes {
        let rev: Vec<usize> = (0..9).rev().collect();
        all.push(permuted(
            &format!("rev2/9/b{size}"),
            &[2; 9],
            &rev,
            size,
            64,
        ));
        let perm = [3, 7, 0, 5, 1, 8, 2, 6, 4];
        all.push(permuted(
            &format!("perm2/9/b{size}"),
            &[2; 9],
            &perm,
            size,
            128,
        ));
        let rev: Vec<usize> = (0..6).rev().collect();
        all.push(permuted(
            &format!("rev3/6/b{size}"),
            &[3; 6],
            &rev,
            size,
            81,
        ));
        // Mixed extents, a cyclic shift, with the source read backwards along two axes and
        // one axis broadcast.
        let shape = [2usize, 3, 4, 2, 3, 2, 4];
        let mut l = permuted(
            &format!("mixed/7/b{size}"),
            &shape,
            &[1, 2, 3, 4, 5, 6, 0],
            size,
            96,
        );
        for k in [1, 4] {
            l.src[k] = -l.src[k];
        }
        l.src[2] = 0;
        all.push(l);
        // A misaligned destination and source: element-wise kernels.
        let mut l = permuted(
            &format!("odd/5/b{size}"),
            &[3, 5, 2, 4, 3],
            &[4, 2, 0, 3, 1],
            size,
            60,
        );
        l.misalign = size as u64;
        all.push(l);
    }
    // Casts (the narrow-cast pairs and wider ones) of narrow axes moved both ways and of a
    // high-rank permutation: the tiled kernels' cast forms, vector and element-wise.
    let casts = [
        (DType::U8, DType::F32),
        (DType::F32, DType::F16),
        (DType::F16, DType::F32),
        (DType::I8, DType::F64),
        (DType::F64, DType::BF16),
        (DType::BF16, DType::U16),
        (DType::I16, DType::F32),
    ];
    for (from, to) in casts {
        let size = from.size();
        for (name, shape, perm, cap) in [
            ("chw_hwc", &[3usize, 8, 16][..], &[1usize, 2, 0][..], 96u32),
            ("hwc_chw", &[8, 16, 3], &[2, 0, 1], 96),
            ("rev2", &[2; 9], &[8, 7, 6, 5, 4, 3, 2, 1, 0], 64),
        ] {
            let mut l = permuted(&format!("{name}/{from}_{to}"), shape, perm, size, cap);
            l.cast = Some((from, to));
            all.push(l);
        }
        // Both operands off their 16-byte alignment (on their elements'): element-wise.
        let mut l = permuted(
            &format!("odd/5/{from}_{to}"),
            &[3, 5, 2, 4, 3],
            &[4, 2, 0, 3, 1],
            size,
            60,
        );
        l.cast = Some((from, to));
        l.misalign = size.max(to.size()) as u64;
        all.push(l);
    }
    // Casts from 1- and 2-byte elements into planes off their alignment (odd images, with a
    // batch axis too): element-wise tiles, the last two layouts with rests.
    for (from, to) in [
        (DType::U8, DType::F32),
        (DType::F16, DType::F32),
        (DType::I8, DType::F64),
        (DType::BF16, DType::U64),
        (DType::U8, DType::I16),
    ] {
        for (name, shape, perm, cap) in [
            (
                "hwc_chw_odd",
                &[9usize, 7, 3][..],
                &[2usize, 0, 1][..],
                96u32,
            ),
            ("hwc_chw_odd", &[13, 11, 5], &[2, 0, 1], 200),
            // Pixels of 16 channels: every pixel of the source starts aligned.
            ("nhwc_nchw_odd", &[2, 3, 5, 16], &[0, 3, 1, 2], 96),
        ] {
            let name = format!("{name}/{}/{from}_{to}", shape[shape.len() - 1]);
            let mut l = permuted(&name, shape, perm, from.size(), cap);
            l.cast = Some((from, to));
            all.push(l);
        }
    }
    all
}

/// Lowest and highest element offsets of `strides` over `shape`, from element zero.
fn span(shape: &[usize], strides: &[isize]) -> (isize, isize) {
    let (mut lo, mut hi) = (0, 0);
    for (&n, &s) in shape.iter().zip(strides) {
        let e = (n as isize - 1) * s;
        if e < 0 {
            lo += e;
        } else {
            hi += e;
        }
    }
    (lo, hi)
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 * b.len());
    for x in b {
        write!(s, "{x:02x}").unwrap();
    }
    s
}

/// One case for `tools/ptxsim_tiled.py`: the launch, the source's bytes at `src`, the
/// destination's `expect`ed bytes at `dst` (mapped poisoned).
pub struct SimCase<'a> {
    pub name: &'a str,
    pub kernel: &'a str,
    pub params: &'a [u8],
    pub threads: u32,
    /// The grid as the tool reads it: `G` or `[GX, GY]`.
    pub grid: String,
    /// Bytes of dynamic shared memory the launch gives.
    pub dyn_smem: u64,
    /// The source's regions, `(address, bytes)`: the only source bytes the kernel may read.
    pub src: &'a [(u64, &'a [u8])],
    pub dst: u64,
    pub expect: &'a [u8],
}

/// [`write_sim_case`] of `launch` (a row or one-axis strided kernel): its kernel, parameters,
/// threads and two-dimensional grid (at least one block on each axis), no dynamic shared
/// memory.
pub fn write_launch_case(
    dir: &Path,
    name: &str,
    launch: &devspan::internals::RowLaunch,
    src: &[(u64, &[u8])],
    dst: u64,
    expect: &[u8],
) -> Result<String, String> {
    let (gx, gy) = (launch.grid.0.max(1), launch.grid.1.max(1));
    write_sim_case(
        dir,
        &SimCase {
            name,
            kernel: &launch.kernel,
            params: &launch.params,
            threads: launch.threads,
            grid: format!("[{gx}, {gy}]"),
            dyn_smem: 0,
            src,
            dst,
            expect,
        },
    )
}

/// Writes `case` into `dir` as `NAME.json` (slashes in the name as `_`), with its kernel's
/// PTX module beside it, and returns the file's path.
pub fn write_sim_case(dir: &Path, case: &SimCase<'_>) -> Result<String, String> {
    let bytes = case.expect.len();
    let dbase = case.dst;
    let mut json = String::new();
    write!(
        json,
        "{{\"name\": \"{}\", \"kernel\": \"{}\", \"params\": \"{}\", \"threads\": {}, \"grid\": {}, \"dyn_smem\": {}, ",
        case.name,
        case.kernel,
        hex(case.params),
        case.threads,
        case.grid,
        case.dyn_smem
    )
    .unwrap();
    json.push_str("\"regions\": [");
    for (base, data) in case.src {
        write!(json, "[{base}, \"{}\"], ", hex(data)).unwrap();
    }
    write!(
        json,
        "[{dbase}, \"{}\"]], \"dst\": [{dbase}, {bytes}], \"expect\": \"{}\"}}",
        hex(&vec![0xA5u8; bytes]),
        hex(case.expect)
    )
    .unwrap();
    let file = dir.join(format!("{}.json", case.name.replace('/', "_")));
    fs::write(&file, json).map_err(|e| e.to_string())?;
    let modules = devspan::internals::ptx_modules();
    let text = modules
        .iter()
        .find(|(m, _)| *m == case.kernel)
        .ok_or_else(|| format!("no module {}", case.kernel))?
        .1;
    fs::write(dir.join(format!("{}.ptx", case.kernel)), text).map_err(|e| e.to_string())?;
    Ok(file.to_string_lossy().into_owned())
}

/// Writes the case file of `l` into `dir` and returns it with the launch's kernel, or `None`
/// if the planner does not tile it.
fn write_case(dir: &Path, l: &Layout, seed: u64) -> Result<Option<(String, String)>, String> {
    const DST: u64 = 0x10_0000;
    const SRC: u64 = 0x80_0000;
    let bits = bits_of_size(l.size);
    let (from, to) = l.cast.unwrap_or((bits, bits));
    let size = l.size as isize;
    let dsize = to.size() as isize;
    let (dlo, dhi) = span(&l.shape, &l.dst);
    let (slo, shi) = span(&l.shape, &l.src);
    // Each region starts `misalign` bytes past an aligned base, at its lowest element.
    let dbase = DST + l.misalign;
    let sbase = SRC + l.misalign;
    let d0 = dbase + (-dlo * dsize) as u64;
    let s0 = sbase + (-slo * size) as u64;
    let launch =
        devspan::internals::tiled_launch(d0, &l.dst, to, s0, &l.src, from, &l.shape, l.cap)
            .map_err(|e| format!("{}: {e}", l.name))?;
    let Some(launch) = launch else {
        return Ok(None);
    };
    let dbytes = ((dhi - dlo + 1) * dsize) as usize;
    let sbytes = ((shi - slo + 1) * size) as usize;
    let mut src = random_bytes(seed, sbytes);
    without_nans(&mut src, from);
    let mut expect = vec![0xA5u8; dbytes];
    let n: usize = if launch.has_rest() {
        0
    } else {
        l.shape.iter().product()
    };
    // A plan with rests: the elements that the tiled launch covers, by its arguments' index
    // math (the rests' plans run other kernels).
    if launch.has_rest() {
        let a = &launch.args;
        for t in 0..a.tiles {
            let (od, os) = a.tile_origin(t);
            for w in 0..a.volume {
                let (d, r) = a.write_offset(w);
                let s = a.read_offset(r);
                let at = |base: u64, region: u64, e: i64, size: isize| {
                    (base as i64 + e * size as i64 - region as i64) as usize
                };
                let d = at(a.dst, dbase, od + i64::from(d), dsize);
                let s = at(a.src, sbase, os + i64::from(s), size);
                let v = devspan::internals::convert_bytes(from, to, &src[s..s + l.size]);
                expect[d..d + v.len()].copy_from_slice(&v);
            }
        }
    }
    if n > 0 {
        for (d, s) in view_offsets(&l.shape, &l.dst, &l.src, -dlo, -slo) {
            let (d, s) = ((d * dsize) as usize, (s * size) as usize);
            let v = devspan::internals::convert_bytes(from, to, &src[s..s + l.size]);
            expect[d..d + v.len()].copy_from_slice(&v);
        }
    }
    let file = write_sim_case(
        dir,
        &SimCase {
            name: &l.name,
            kernel: &launch.kernel,
            params: &launch.params,
            threads: launch.threads,
            grid: launch.tiles.clamp(1, 3).to_string(),
            dyn_smem: u64::from(launch.dyn_smem),
            src: &[(sbase, &src)],
            dst: dbase,
            expect: &expect,
        },
    )?;
    Ok(Some((file, launch.kernel)))
}

/// Copies whose tiles span more than 2^30 bytes of the source: more than 2^31 bytes but fewer
/// than 2^31 elements (the tiled kernels count offsets within a tile in elements) with axes of 2
/// and 4 whose source strides grow by 8 or 32 per axis (one of them negative), into a standard
/// destination; the same with a contiguous run of 16 elements innermost on both sides, for the
/// vector kernels; planes 2^31 bytes or more apart interleaved, for the narrow kernels; and
/// bytes whose destination's fastest axis is too far apart in the source for a tile to take it
/// whole (it takes pieces).
fn far_layouts() -> Vec<Layout> {
    let strides = |n: usize, step: u32, first: u32| -> Vec<isize> {
        (0..n)
            .map(|k| 1isize << (first + step * k as u32))
            .collect()
    };
    let mut out = Vec::new();
    let mut push = |name: &str, shape: Vec<usize>, src: Vec<isize>, size: usize| {
        out.push(Layout {
            name: name.to_string(),
            dst: standard(&shape),
            shape,
            src,
            size,
            cap: 0,
            cast: None,
            misalign: 0,
        });
    };
    push("far/2^10/b8", vec![2; 10], strides(10, 3, 1), 8);
    let mut flipped = strides(10, 3, 1);
    flipped[4] = -flipped[4];
    push("far/2^10-backwards/b8", vec![2; 10], flipped, 8);
    push("far/2^11/b2", vec![2; 11], strides(11, 3, 0), 2);
    push("far/4^6/b4", vec![4; 6], strides(6, 5, 3), 4);
    let mut shape = vec![2; 9];
    shape.push(16);
    let mut src = strides(9, 3, 5);
    src.push(1);
    push("far/2^9x16/b4", shape, src, 4);
    // Two planes 2^31 bytes apart interleaved (a narrow kernel's join), and three of f16.
    push("far/join-2/b4", vec![1024, 2], vec![1, 1 << 29], 4);
    push("far/join-3/b2", vec![512, 3], vec![1, 3 << 28], 2);
    // The destination's fastest axis 2^28 bytes apart in the source: whole, it would take the
    // tile out of reach; the tiles take pieces of it.
    push("far/16x16 pieces/b1", vec![16, 16], vec![1, 1 << 28], 1);
    push(
        "far/3x40x40 pieces/b1",
        vec![3, 40, 40],
        vec![1600, 1, 1 << 27],
        1,
    );
    out
}

/// [`write_case`] of a layout from [`far_layouts`]: the source mapped element by element (its
/// span is gigabytes); an error unless the planner tiles it whole with a tile that spans more
/// than 2^30 bytes of one operand.
fn write_far_case(dir: &Path, l: &Layout, seed: u64) -> Result<(String, String), String> {
    const DST: u64 = 0x10_0000;
    const SRC: u64 = 0x1_0000_0000;
    let bits = bits_of_size(l.size);
    let size = l.size as isize;
    let (dlo, dhi) = span(&l.shape, &l.dst);
    let (slo, _) = span(&l.shape, &l.src);
    let d0 = DST + (-dlo * size) as u64;
    let s0 = SRC + (-slo * size) as u64;
    let launch =
        devspan::internals::tiled_launch(d0, &l.dst, bits, s0, &l.src, bits, &l.shape, l.cap)
            .map_err(|e| format!("{}: {e}", l.name))?
            .ok_or_else(|| format!("{}: not tiled", l.name))?;
    let a = &launch.args;
    if launch.has_rest() {
        return Err(format!("{}: a rest", l.name));
    }
    let r = a.tile_rank as usize;
    let reach = |axes: &mut dyn Iterator<Item = (u32, i32)>| -> u64 {
        axes.map(|(n, st)| u64::from(n - 1) * u64::from(st.unsigned_abs()))
            .sum()
    };
    let rs = reach(&mut a.read[..r].iter().map(|x| (x.len, x.src)));
    let rd = reach(&mut a.write[..r].iter().map(|x| (x.len, x.dst)));
    if rs.max(rd) * l.size as u64 <= 1 << 30 {
        return Err(format!("{}: tiles span {rs} and {rd} elements", l.name));
    }
    let n: usize = l.shape.iter().product();
    let data = random_bytes(seed, n * l.size);
    let dbytes = ((dhi - dlo + 1) * size) as usize;
    let mut expect = vec![0xA5u8; dbytes];
    let mut regions: Vec<(u64, &[u8])> = Vec::new();
    for (i, (d, s)) in view_offsets(&l.shape, &l.dst, &l.src, -dlo, -slo)
        .into_iter()
        .enumerate()
    {
        let e = &data[i * l.size..(i + 1) * l.size];
        let d = (d * size) as usize;
        expect[d..d + l.size].copy_from_slice(e);
        regions.push((SRC + (s * size) as u64, e));
    }
    // Elements adjacent in the source (the innermost runs) as one region.
    regions.sort_by_key(|r| r.0);
    let mut merged: Vec<(u64, Vec<u8>)> = Vec::new();
    for (at, e) in regions {
        match merged.last_mut() {
            Some((b, v)) if *b + v.len() as u64 == at => v.extend_from_slice(e),
            _ => merged.push((at, e.to_vec())),
        }
    }
    let src: Vec<(u64, &[u8])> = merged.iter().map(|(b, v)| (*b, v.as_slice())).collect();
    let file = write_sim_case(
        dir,
        &SimCase {
            name: &l.name,
            kernel: &launch.kernel,
            params: &launch.params,
            threads: launch.threads,
            grid: launch.tiles.clamp(1, 3).to_string(),
            dyn_smem: 0,
            src: &src,
            dst: DST,
            expect: &expect,
        },
    )?;
    Ok((file, launch.kernel))
}

/// Runs `f` in a fresh temporary folder `devspan-ptxsim-{what}-PID` that holds the interpreter
/// (`ptxsim_tiled.py` over `ptxsim_wide.py`), removed afterwards.
pub fn with_sim_dir(what: &str, f: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("devspan-ptxsim-{what}-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = fs::write(dir.join("ptxsim_tiled.py"), TOOL)
        .and_then(|()| fs::write(dir.join("ptxsim_wide.py"), INTERPRETER))
        .map_err(|e| e.to_string())
        .and_then(|()| f(&dir));
    let _ = fs::remove_dir_all(&dir);
    result
}

fn run(out: &Out, sample: bool) -> Result<(), String> {
    with_sim_dir("tiled", |dir| run_in(out, dir, sample))
}

/// Runs `ptxsim_tiled.py` (in `dir`, from [`with_sim_dir`]) on every case file of `files`, in
/// batches of a few cases per process, as many processes at once as the machine has cores:
/// its lines, one per case, sorted, or the first failure with the tool's output.
pub fn run_cases(dir: &Path, files: &[String]) -> Result<Vec<String>, String> {
    const BATCH: usize = 8;
    let batches: Vec<&[String]> = files.chunks(BATCH).collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Result<String, String>>> = Mutex::new(Vec::new());
    let workers = thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(batches.len().max(1));
    thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                while let Some(f) = batches.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let r = Command::new(crate::ptx_sim::python())
                        .arg(dir.join("ptxsim_tiled.py"))
                        .args(*f)
                        .output()
                        .map_err(|e| e.to_string())
                        .and_then(|o| {
                            let text = String::from_utf8_lossy(&o.stdout).into_owned();
                            if o.status.success() {
                                Ok(text)
                            } else {
                                Err(format!(
                                    "{f:?}:\n{text}\n{}",
                                    String::from_utf8_lossy(&o.stderr)
                                ))
                            }
                        });
                    results.lock().unwrap().push(r);
                }
            });
        }
    });
    let mut lines = Vec::new();
    for r in results.into_inner().unwrap() {
        lines.extend(r?.lines().map(str::to_string));
    }
    lines.sort();
    Ok(lines)
}

/// The case name, the kernel and the count of global stores of a line of `ptxsim_tiled.py`'s
/// output (`NAME: KERNEL: ... blocks, STORES global stores, ok`).
pub fn case_line(line: &str) -> (&str, &str, Option<usize>) {
    let mut parts = line.split(": ");
    let (name, kernel) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let stores = line
        .split(" global stores")
        .next()
        .and_then(|x| x.rsplit(' ').next())
        .and_then(|x| x.parse().ok());
    (name, kernel, stores)
}

fn run_in(out: &Out, dir: &Path, sample: bool) -> Result<(), String> {
    let all = layouts();
    let mut files = Vec::new();
    let mut kernels = Vec::new();
    let mut untiled = Vec::new();
    // Byte layouts that the planner moved as wider units on the pipelined kernels.
    let mut paired = 0;
    for (i, l) in all.iter().enumerate() {
        if sample && !SAMPLE.contains(&l.name.as_str()) {
            continue;
        }
        match write_case(dir, l, 0x5eed + i as u64)? {
            Some((f, kernel)) => {
                if l.size == 1 && kernel == "copy_tiled_a_b2" {
                    paired += 1;
                }
                files.push(f);
                kernels.push(kernel);
            }
            None => untiled.push(l.name.clone()),
        }
    }
    if !untiled.is_empty() {
        return Err(format!("not tiled by the planner: {untiled:?}"));
    }
    let mut far = 0;
    if !sample {
        for (i, l) in far_layouts().iter().enumerate() {
            let (f, kernel) = write_far_case(dir, l, 0xfa5 + i as u64)?;
            files.push(f);
            kernels.push(kernel);
            far += 1;
        }
    }
    // The shifted narrow kernels, both directions, are among the full check's cases: every
    // layout of planes off their alignment listed for them (`*_odd`, 7 each way) takes them.
    let shifted = |k: &str| kernels.iter().filter(|x| x.starts_with(k)).count();
    let (joins, splits) = (shifted("copy_join_shifted"), shifted("copy_split_shifted"));
    if !sample && (joins < 7 || splits < 7) {
        return Err(format!(
            "{joins} shifted joins and {splits} shifted splits among {kernels:?}"
        ));
    }
    // The cast forms, vector and element-wise, are too.
    let element_casts = shifted("cast_tiled_e_");
    let vector_casts = shifted("cast_tiled_") - element_casts;
    if !sample && (vector_casts == 0 || element_casts < 10) {
        return Err(format!(
            "{vector_casts} vector and {element_casts} element-wise casts on the tiled kernels \
             among {kernels:?}"
        ));
    }
    // So are the wide element-wise copies.
    let wide = shifted("copy_tiled_ew_");
    if !sample && (wide < 3 || shifted("copy_tiled_ew_b1") < 1) {
        return Err(format!(
            "{wide} wide element-wise copies on the tiled kernels among {kernels:?}"
        ));
    }
    // And the pipelined ones, of both sizes.
    let (async1, async2) = (shifted("copy_tiled_a_b1"), shifted("copy_tiled_a_b2"));
    if !sample && (async1 < 2 || async2 < 2 || paired < 1) {
        return Err(format!(
            "{async1} copies on copy_tiled_a_b1, {async2} on copy_tiled_a_b2 ({paired} of u8 \
             pairs) among {kernels:?}"
        ));
    }
    let lines = run_cases(dir, &files)?;
    for l in &lines {
        out.detail(l);
    }
    out.summary(&format!(
        "ptx_sim: {} tiled-kernel interpreter cases passed ({} on the shifted narrow kernels, \
         {vector_casts} vector and {element_casts} element-wise casts, {wide} wide element-wise \
         copies, {} pipelined copies, {far} tiles across more than 2^30 bytes){}",
        lines.len(),
        joins + splits,
        async1 + async2,
        if sample { " (sample)" } else { "" }
    ));
    Ok(())
}
