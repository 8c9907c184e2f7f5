//! Runs the gathered row kernels (`copy_rows_gather_bN`, `cast_rows_gather_S_D`) through the
//! PTX interpreter (`tools/ptxsim_tiled.py` over `tools/ptxsim_wide.py`) on copies and casts
//! that devspan's planner gives them: reversed vectors, images flipped left-right (channels
//! first: every row reversed; channels last: pixels right to left), flipped both ways, channels
//! reversed and pairs swapped, with source rows apart and destination rows apart, and (as
//! `Steer::PreferGather` plans them) channels moved innermost from planes, CHW -> HWC and
//! NCHW -> NHWC, and planes from interleaved channels (whose rows, the planes, run over grid x:
//! `rows_first`). The casts: between integers of every two
//! sizes, so that every unit width (16, 8, 4 and 2 elements) runs; and, on a few layouts,
//! integers to floats, floats to integers and floats to floats of every size, bf16 included
//! (sources without NaNs: the interpreter's NaN results are canonical, the reference's
//! payloads unspecified). Copies: runs of 5 and 7 channels, which the reversed row kernels do
//! not take. Beside them, the row kernel's casts (`cast_rows_S_D`: rows forwards on both sides,
//! apart in the source or the destination, an image upside down), integers and floats. The destination starts at several offsets from a unit's alignment, on the
//! launcher's grid (some of more than one block along rows, some over rows). Each case's
//! destination must equal the host reference (`convert_bytes`) byte for byte (poisoned first);
//! every access must be aligned and inside the operands' regions, which hold only the source
//! elements the view covers.
//!
//! The sample runs two cases; the full check runs all of them. Needs Python 3, like
//! [`crate::ptx_sim`].

use std::path::Path;

use devspan::DType;

use crate::tiled_sim::{
    case_line, covered_regions, random_bytes, run_cases, standard, view_offsets, with_sim_dir,
    without_nans, write_launch_case,
};
use crate::{Check, Out};

const SAMPLE: [&str; 2] = ["hwc3_w/3x40x3/u8_u32/a", "vec/300/i64_u16/d"];

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "gather_sim::sample_in_a_ptx_interpreter",
            full: false,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, true),
        },
        Check {
            name: "gather_sim::gathered_rows_cast_every_element_in_a_ptx_interpreter",
            full: true,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, false),
        },
    ]
}

/// Integer casts between every two element sizes, signed and unsigned sources.
const PAIRS: [(DType, DType); 12] = [
    (DType::U8, DType::U16),
    (DType::I8, DType::I32),
    (DType::U8, DType::U32),
    (DType::I16, DType::I8),
    (DType::U16, DType::I64),
    (DType::I16, DType::U32),
    (DType::U32, DType::U8),
    (DType::I32, DType::I16),
    (DType::I32, DType::I64),
    (DType::U64, DType::U8),
    (DType::I64, DType::U16),
    (DType::U64, DType::U32),
];

/// One cast: a destination of `shape` (standard layout, or with `dpad` = `(axis, extra)` an
/// array that much longer along `axis`: rows apart), a source of `shape` read backwards along
/// `flip` from a standard-layout array (with `spad` likewise longer), or with `perm` the
/// standard-layout array whose axis `perm[j]` is the view's axis `j` (planned with
/// `Steer::PreferGather`), the destination's element zero `dst_mis` destination elements past
/// a 16-byte boundary.
struct Layout {
    name: String,
    shape: Vec<usize>,
    flip: Vec<usize>,
    perm: Option<Vec<usize>>,
    /// Planned to the row kernel (rows forwards on both sides), not the gathered rows.
    forward: bool,
    spad: Option<(usize, usize)>,
    dpad: Option<(usize, usize)>,
    from: DType,
    to: DType,
    dst_mis: u64,
}

type Pad = Option<(usize, usize)>;

/// A layout of [`layouts`]: name, shape, axes read backwards, source and destination pads.
type Shape = (&'static str, &'static [usize], &'static [usize], Pad, Pad);

/// Layouts planned with `Steer::PreferGather`: name, shape, the source array's axis of each
/// of the view's, and the destination's pad.
const PERMUTED: [(&str, &[usize], &[usize], Pad); 7] = [
    // CHW -> HWC and NCHW -> NHWC: channels innermost, gathered from their planes (3, 4, 16
    // and 48 channels).
    ("chw_hwc", &[6, 20, 3], &[1, 2, 0], None),
    ("chw_hwc16", &[5, 9, 16], &[1, 2, 0], None),
    ("chw_hwc48", &[3, 7, 48], &[1, 2, 0], None),
    ("nchw_nhwc", &[2, 5, 7, 4], &[0, 2, 3, 1], None),
    // HWC -> CHW: planes from interleaved channels, read 3 apart; with the destination's rows
    // apart, a row per image row whose planes interleave: their rows over grid x
    // (rows_first), of more than one block on each axis.
    ("hwc_chw", &[3, 6, 40], &[2, 0, 1], None),
    ("hwc_chw_dpad", &[3, 4, 2100], &[2, 0, 1], Some((2, 4))),
    // CHW -> HWC, channels reversed too (BGR planes to RGB pixels).
    ("chw_hwc_bgr", &[4, 33, 3], &[1, 2, 0], None),
];

/// A written case: its file, the launcher's grid, whether its rows are over grid x
/// (`rows_first`), and for those the files of the same case on two forced grids.
type Written = (String, (u32, u32), bool, Vec<String>);

fn layouts() -> Vec<Layout> {
    let shapes: [Shape; 10] = [
        ("vec", &[300], &[0], None, None),
        // Grids of more than one block along a row.
        ("vec", &[9000], &[0], None, None),
        ("chw_w", &[3, 4, 40], &[2], None, None),
        ("hwc3_w", &[3, 40, 3], &[1], None, None),
        // Grids of more than one block over rows.
        ("hwc3_w", &[600, 6, 3], &[1], None, None),
        ("hwc3_c", &[3, 100, 3], &[2], None, None),
        ("hwc3_hw", &[3, 20, 3], &[0, 1], None, None),
        ("swap", &[400, 2], &[1], None, None),
        ("hwc3_w_spad", &[3, 40, 3], &[1], Some((1, 2)), None),
        ("chw_w_dpad", &[3, 4, 40], &[2], None, Some((2, 3))),
    ];
    // Copies of 1- and 2-byte elements in runs that the reversed row kernels do not take.
    let copied: [Shape; 3] = [
        ("hwc5_w", &[3, 40, 5], &[1], None, None),
        ("hwc5_c", &[3, 40, 5], &[2], None, None),
        ("hwc7_w_spad", &[2, 30, 7], &[1], Some((1, 1)), None),
    ];
    let copies = [(DType::U8, DType::U8), (DType::I16, DType::I16)];
    let runs = shapes
        .iter()
        .flat_map(|s| PAIRS.iter().map(move |p| (s, p)))
        .chain(
            copied
                .iter()
                .flat_map(|s| copies.iter().map(move |p| (s, p))),
        )
        .chain(
            FLOAT_LAYOUTS
                .iter()
                .flat_map(|s| FLOAT_PAIRS.iter().map(move |p| (s, p))),
        );
    let mut all = Vec::new();
    for (&(name, shape, flip, spad, dpad), &(from, to)) in runs {
        {
            // The destination at a unit's alignment and off it by one and by three elements.
            for (kind, mis) in [("a", 0u64), ("d", 1), ("t", 3)] {
                let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
                all.push(Layout {
                    name: format!("{name}/{}/{from}_{to}/{kind}", dims.join("x")),
                    shape: shape.to_vec(),
                    flip: flip.to_vec(),
                    perm: None,
                    forward: false,
                    spad,
                    dpad,
                    from,
                    to,
                    dst_mis: mis,
                });
            }
        }
    }
    // Copies of every element size too.
    let sizes = [DType::U8, DType::U16, DType::U32, DType::U64];
    let pairs = PAIRS.into_iter().chain(sizes.into_iter().map(|t| (t, t)));
    for (name, shape, perm, dpad) in PERMUTED {
        for (k, (from, to)) in pairs.clone().enumerate() {
            let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            all.push(Layout {
                name: format!("{name}/{}/{from}_{to}", dims.join("x")),
                shape: shape.to_vec(),
                flip: if name.ends_with("_bgr") {
                    vec![shape.len() - 1]
                } else {
                    Vec::new()
                },
                perm: Some(perm.to_vec()),
                forward: false,
                spad: None,
                dpad,
                from,
                to,
                dst_mis: k as u64 % 4,
            });
        }
    }
    // The row kernel's casts (rows forwards on both sides, their vectors lined up on both
    // sides or not at all): source rows apart, an image upside down, destination rows apart.
    let forward: [Shape; 3] = [
        ("rows_spad", &[6, 40], &[], Some((1, 10)), None),
        ("hwc_h", &[6, 20, 3], &[0], None, None),
        ("rows_dpad", &[5, 48], &[], None, Some((1, 3))),
    ];
    let pairs = [
        (DType::U8, DType::U16),
        (DType::I16, DType::I8),
        (DType::I8, DType::I64),
        (DType::U8, DType::F32),
        (DType::F16, DType::F32),
        (DType::F32, DType::F16),
        (DType::F64, DType::BF16),
    ];
    for (name, shape, flip, spad, dpad) in forward {
        for (from, to) in pairs {
            for (kind, mis) in [("a", 0u64), ("d", 1)] {
                let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
                all.push(Layout {
                    name: format!("{name}/{}/{from}_{to}/{kind}", dims.join("x")),
                    shape: shape.to_vec(),
                    flip: flip.to_vec(),
                    perm: None,
                    forward: true,
                    spad,
                    dpad,
                    from,
                    to,
                    dst_mis: mis,
                });
            }
        }
    }
    all
}

/// Casts with floats on either side, run on fewer layouts ([`FLOAT_LAYOUTS`]): integers to
/// floats, floats to integers, and between floats of every size (bf16 through its integer
/// emulation, f64 -> bf16 through its round-to-odd step).
const FLOAT_PAIRS: [(DType, DType); 10] = [
    (DType::U8, DType::F32),
    (DType::I8, DType::F64),
    (DType::U16, DType::F16),
    (DType::F16, DType::F32),
    (DType::F32, DType::F16),
    (DType::F32, DType::BF16),
    (DType::BF16, DType::F64),
    (DType::F64, DType::BF16),
    (DType::F64, DType::U8),
    (DType::F32, DType::I64),
];

/// The layouts of [`FLOAT_PAIRS`]: a row read backwards, pixels of 3 channels right to left
/// and with their channels reversed.
const FLOAT_LAYOUTS: [Shape; 3] = [
    ("vec", &[300], &[0], None, None),
    ("hwc3_w", &[3, 40, 3], &[1], None, None),
    ("hwc3_c", &[3, 40, 3], &[2], None, None),
];

/// Writes the case file of `l` (and its module's PTX) into `dir`: `Some((file, grid))`, or
/// `None` if the planner gives it to another kernel.
fn write_case(dir: &Path, l: &Layout, seed: u64) -> Result<Option<Written>, String> {
    const DST: u64 = 0x10_0000;
    const SRC: u64 = 0x80_0000;
    let (ss, ds) = (l.from.size(), l.to.size());
    let padded = |pad: Pad| {
        let mut array = l.shape.clone();
        if let Some((axis, extra)) = pad {
            array[axis] += extra;
        }
        array
    };
    let darray = padded(l.dpad);
    let dst = standard(&darray);
    // The source array, and the strides of the view's axes in it.
    let (sarray, mut src) = match &l.perm {
        Some(perm) => {
            let mut array = vec![0; perm.len()];
            for (j, &a) in perm.iter().enumerate() {
                array[a] = l.shape[j];
            }
            let st = standard(&array);
            let src: Vec<isize> = perm.iter().map(|&a| st[a]).collect();
            (array, src)
        }
        None => {
            let array = padded(l.spad);
            let st = standard(&array);
            (array, st)
        }
    };
    let mut s_off = 0isize;
    for &a in &l.flip {
        s_off += (l.shape[a] as isize - 1) * src[a];
        src[a] = -src[a];
    }
    let dbytes = darray.iter().product::<usize>() * ds;
    let sbytes = sarray.iter().product::<usize>() * ss;
    let dbase = DST + l.dst_mis * ds as u64;
    let s0 = SRC + (s_off * ss as isize) as u64;
    let launch = devspan::internals::row_launch(
        dbase,
        &dst,
        l.to,
        s0,
        &src,
        l.from,
        &l.shape,
        l.perm.is_some(),
    )
    .map_err(|e| format!("{}: {e}", l.name))?;
    let Some(launch) = launch else {
        return Ok(None);
    };
    if launch.kernel.contains("_rows_gather_") == l.forward {
        return Ok(None);
    }
    let mut source = random_bytes(seed, sbytes);
    without_nans(&mut source, l.from);
    let mut expect = vec![0xA5u8; dbytes];
    let mut covered = vec![false; sbytes];
    for (d, s) in view_offsets(&l.shape, &dst, &src, 0, s_off) {
        let (d, s) = (d as usize * ds, s as usize * ss);
        expect[d..d + ds].copy_from_slice(&devspan::internals::convert_bytes(
            l.from,
            l.to,
            &source[s..s + ss],
        ));
        covered[s..s + ss].fill(true);
    }
    // The source's regions: the runs of bytes the view covers.
    let regions = covered_regions(SRC, &source, &covered);
    let file = write_launch_case(dir, &l.name, &launch, &regions, dbase, &expect)?;
    let at = std::mem::offset_of!(devspan_kernels::abi::RowGatherArgs, rows_first);
    let rows_first = launch.kernel.contains("_rows_gather_")
        && launch.params[at..at + 8].iter().any(|&b| b != 0);
    // Rows over grid x: also on grids of two blocks along one axis and one along the other,
    // so that each block strides over rows (x) or over a row's pieces (y) by the other axis's
    // count, which a swap of the wrong counts would get wrong.
    let mut forced = Vec::new();
    if rows_first {
        for grid in [(2, 1), (1, 2)] {
            let mut small = launch.clone();
            small.grid = grid;
            let name = format!("{}/grid{}x{}", l.name, grid.0, grid.1);
            forced.push(write_launch_case(
                dir, &name, &small, &regions, dbase, &expect,
            )?);
        }
    }
    Ok(Some((file, launch.grid, rows_first, forced)))
}

fn run(out: &Out, sample: bool) -> Result<(), String> {
    with_sim_dir("gather", |dir| run_in(out, dir, sample))
}

fn run_in(out: &Out, dir: &Path, sample: bool) -> Result<(), String> {
    let mut files = Vec::new();
    let mut grids = Vec::new();
    let mut swapped = Vec::new();
    let mut forced = 0;
    let mut other = Vec::new();
    let all = layouts();
    for (i, l) in all.iter().enumerate() {
        if sample && !SAMPLE.contains(&l.name.as_str()) {
            continue;
        }
        match write_case(dir, l, 0x9a7 + i as u64)? {
            Some((f, g, rows_first, small)) => {
                files.push(f);
                grids.push(g);
                if rows_first {
                    swapped.push(g);
                }
                forced += small.len();
                files.extend(small);
            }
            None => other.push(l.name.clone()),
        }
    }
    if !other.is_empty() {
        return Err(format!(
            "not planned to the gathered row kernels (or, rows forwards, the row kernel): \
             {other:?}"
        ));
    }
    if sample && files.len() != SAMPLE.len() {
        return Err(format!("sample cases: {files:?}"));
    }
    let wide = grids.iter().any(|g| g.0 > 1);
    let tall = grids.iter().any(|g| g.1 > 1);
    let both = wide && tall;
    if !sample && !both {
        return Err(format!(
            "grids {grids:?}: none of more than one block on each axis"
        ));
    }
    // Rows over grid x: some of more than one block on each axis.
    if !sample && !swapped.iter().any(|g| g.0 > 1 && g.1 > 1) {
        return Err(format!(
            "rows_first grids {swapped:?}: none of more than one block on each axis"
        ));
    }
    let lines = run_cases(dir, &files)?;
    // Cases whose stores are fewer than their elements stored whole units: among the
    // gathered rows, some of every unit width (16, 8, 4 and 2 elements: the wider side of 1,
    // 2, 4 and 8 bytes) must, and some of the row kernel's.
    let mut units = [0usize; 4];
    let (mut forward, mut forward_units) = (0, 0);
    for line in &lines {
        out.detail(line);
        let (name, _, stores) = case_line(line);
        let Some(l) = all.iter().find(|l| l.name == name) else {
            continue;
        };
        forward += usize::from(l.forward);
        if let Some(stores) = stores
            && stores < l.shape.iter().product::<usize>()
        {
            if l.forward {
                forward_units += 1;
            } else {
                let wider = l.from.size().max(l.to.size());
                units[wider.trailing_zeros() as usize] += 1;
            }
        }
    }
    if !sample && (units.contains(&0) || forward_units == 0) {
        return Err(format!(
            "cases that stored whole units, by the wider side's size 1, 2, 4, 8: {units:?}; \
             on the row kernel: {forward_units}"
        ));
    }
    out.summary(&format!(
        "ptx_sim: {} gathered-row interpreter cases passed ({forward} on the row kernel, {} with \
         the rows over grid x, each also on grids of 2 x 1 and 1 x 2 blocks){}",
        lines.len() - forward - forced,
        swapped.len(),
        if sample { " (sample)" } else { "" }
    ));
    Ok(())
}
