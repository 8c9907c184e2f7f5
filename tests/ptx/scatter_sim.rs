//! Runs the scattered row kernels (`copy_rows_scatter_bN`) through the PTX interpreter
//! (`tools/ptxsim_tiled.py` over `tools/ptxsim_wide.py`) on copies that devspan's planner gives
//! them when steered to them (`Steer::PreferScatter`): a contiguous source written into a
//! column slice `x[.., a..a + c]` of a wider array (rows apart in the destination, short and
//! long, from element 0 or later), also with the destination's rows upside down; for every
//! element size,
//! with the source off a 16-byte boundary by 0, 1 or 3 elements (a head of scalar elements
//! before the aligned vector loads), on the launcher's grid (some of more than one block along
//! rows, some over rows). Each case's destination region, poisoned first, must equal the
//! reference byte for byte: the elements the view covers written, the others (between the
//! slice's rows) left as they were; every access must be aligned and inside the operands'
//! regions, the source's being exactly its elements.
//!
//! The sample runs two cases; the full check runs all of them. Needs Python 3, like
//! [`crate::ptx_sim`].

use std::path::Path;

use crate::tiled_sim::{
    bits_of_size, case_line, random_bytes, run_cases, standard, view_offsets, with_sim_dir,
    write_launch_case,
};
use crate::{Check, Out};

const SAMPLE: [&str; 2] = ["cols/40x17+1/b1/s1", "cols_h/30x20+3@1/b4/s3"];

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "scatter_sim::sample_in_a_ptx_interpreter",
            full: false,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, true),
        },
        Check {
            name: "scatter_sim::scattered_rows_copy_every_element_in_a_ptx_interpreter",
            full: true,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, false),
        },
    ]
}

/// One copy of a contiguous source of `shape` into a destination view of `shape`: the
/// standard-layout array `array` sliced from `start` along its last axis (a column slice where
/// `array` is wider), read backwards along `flip`; elements of `size` bytes, the source's
/// element zero `src_mis` elements past a 16-byte boundary.
struct Layout {
    name: String,
    shape: Vec<usize>,
    array: Vec<usize>,
    start: usize,
    flip: Vec<usize>,
    size: usize,
    src_mis: u64,
}

fn layouts() -> Vec<Layout> {
    // (name, view shape, extra columns of the destination array, slice start, flipped axes)
    type Shape = (
        &'static str,
        &'static [usize],
        usize,
        usize,
        &'static [usize],
    );
    let shapes: [Shape; 9] = [
        ("cols", &[40, 17], 1, 0, &[]),
        ("cols", &[40, 17], 1, 1, &[]),
        ("cols", &[12, 100], 3, 2, &[]),
        ("cols", &[3, 5, 40], 1, 0, &[]),
        // Grids of more than one block along a row, and over rows.
        ("cols", &[2, 9000], 1, 1, &[]),
        ("cols", &[600, 3, 4], 1, 0, &[]),
        // Rows upside down in the destination (its outer axis read backwards).
        ("cols_h", &[30, 20], 3, 1, &[0]),
        ("cols_h", &[1500, 20], 1, 0, &[0]),
        ("cols_h", &[4, 6, 33], 2, 0, &[0, 1]),
    ];
    let mut all = Vec::new();
    for (name, shape, extra, start, flip) in shapes {
        for size in [1usize, 2, 4, 8] {
            for src_mis in [0u64, 1, 3] {
                let mut array = shape.to_vec();
                *array.last_mut().unwrap() += extra;
                let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
                let mut tag = dims.join("x");
                if extra > 0 {
                    tag += &format!("+{extra}");
                }
                if start > 0 {
                    tag += &format!("@{start}");
                }
                all.push(Layout {
                    name: format!("{name}/{tag}/b{size}/s{src_mis}"),
                    shape: shape.to_vec(),
                    array,
                    start,
                    flip: flip.to_vec(),
                    size,
                    src_mis,
                });
            }
        }
    }
    all
}

/// A written case: its file and the launcher's grid.
type Written = (String, (u32, u32));

/// Writes the case file of `l` (and its module's PTX) into `dir`: `Some((file, grid))`, or
/// `None` if the planner gives it to another kernel.
fn write_case(dir: &Path, l: &Layout, seed: u64) -> Result<Option<Written>, String> {
    const DST: u64 = 0x10_0000;
    const SRC: u64 = 0x80_0000;
    let dtype = bits_of_size(l.size);
    let size = l.size as isize;
    let n: usize = l.shape.iter().product();
    let src = standard(&l.shape);
    let mut dst = standard(&l.array);
    let mut d_off = l.start as isize;
    for &a in &l.flip {
        d_off += (l.shape[a] as isize - 1) * dst[a];
        dst[a] = -dst[a];
    }
    let dbytes = l.array.iter().product::<usize>() * l.size;
    let sbase = SRC + l.src_mis * l.size as u64;
    let d0 = DST + (d_off * size) as u64;
    let launch = devspan::internals::row_scatter_launch(d0, &dst, sbase, &src, dtype, &l.shape)
        .map_err(|e| format!("{}: {e}", l.name))?;
    let Some(launch) = launch else {
        return Ok(None);
    };
    let source = random_bytes(seed, n * l.size);
    let mut expect = vec![0xA5u8; dbytes];
    for (d, s) in view_offsets(&l.shape, &dst, &src, d_off, 0) {
        let (d, s) = ((d * size) as usize, (s * size) as usize);
        expect[d..d + l.size].copy_from_slice(&source[s..s + l.size]);
    }
    let regions = [(sbase, &source[..])];
    let file = write_launch_case(dir, &l.name, &launch, &regions, DST, &expect)?;
    Ok(Some((file, launch.grid)))
}

fn run(out: &Out, sample: bool) -> Result<(), String> {
    with_sim_dir("scatter", |dir| run_in(out, dir, sample))
}

fn run_in(out: &Out, dir: &Path, sample: bool) -> Result<(), String> {
    let mut files = Vec::new();
    let mut grids = Vec::new();
    let mut other = Vec::new();
    let all = layouts();
    for (i, l) in all.iter().enumerate() {
        if sample && !SAMPLE.contains(&l.name.as_str()) {
            continue;
        }
        match write_case(dir, l, 0x5ca7 + i as u64)? {
            Some((f, g)) => {
                files.push(f);
                grids.push(g);
            }
            None => other.push(l.name.clone()),
        }
    }
    if !other.is_empty() {
        return Err(format!(
            "not planned to the scattered row kernels: {other:?}"
        ));
    }
    let wide = grids.iter().any(|g| g.0 > 1);
    let tall = grids.iter().any(|g| g.1 > 1);
    if !(sample || wide && tall) {
        return Err(format!(
            "grids {grids:?}: none of more than one block on each axis"
        ));
    }
    let lines = run_cases(dir, &files)?;
    // Every element size must run.
    let mut sizes = [0usize; 4];
    for line in &lines {
        out.detail(line);
        let (_, kernel, _) = case_line(line);
        if let Some(size) = kernel
            .rsplit("_b")
            .next()
            .and_then(|x| x.parse::<usize>().ok())
        {
            sizes[size.trailing_zeros() as usize] += 1;
        }
    }
    if !sample && sizes.contains(&0) {
        return Err(format!("cases by element size 1, 2, 4, 8: {sizes:?}"));
    }
    out.summary(&format!(
        "ptx_sim: {} scattered-row interpreter cases passed{}",
        lines.len(),
        if sample { " (sample)" } else { "" }
    ));
    Ok(())
}
