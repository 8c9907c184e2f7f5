//! Runs the one-axis strided copy kernels (`copy_strided1_bN`) through the PTX interpreter
//! (`tools/ptxsim_tiled.py` over `tools/ptxsim_wide.py`) on copies of one axis that devspan's
//! planner gives them: every second, third and fifth element of a vector into a contiguous
//! one, read backwards, and a contiguous vector written into every third element, for every
//! element size, with operands on a 16-byte boundary and off it, some on grids of more than
//! one block. Only the source elements the view covers are mapped (a load of any other byte
//! fails); the destination's whole region is poisoned and must equal a reference byte for
//! byte afterwards (the view's elements copied, the others untouched).
//!
//! The sample runs two cases; the full check runs all of them. Needs Python 3, like
//! [`crate::ptx_sim`].

use std::path::Path;

use crate::tiled_sim::{
    bits_of_size, case_line, covered_regions, random_bytes, run_cases, with_sim_dir,
    write_launch_case,
};
use crate::{Check, Out};

const SAMPLE: [&str; 2] = ["n1000/s2/d1/b1/m0", "n333/s-5/d1/b8/m1"];

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "strided_sim::sample_in_a_ptx_interpreter",
            full: false,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, true),
        },
        Check {
            name: "strided_sim::one_axis_copies_move_every_element_in_a_ptx_interpreter",
            full: true,
            available: crate::ptx_sim::available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, false),
        },
    ]
}

/// One copy of `n` elements of `size` bytes: source element `i` at `i * src_step` from the
/// source's first element (backwards for a negative step), destination element `i` at
/// `i * dst_step`; both regions start `mis` elements past a 16-byte boundary.
struct Case {
    name: String,
    n: usize,
    src_step: isize,
    dst_step: isize,
    size: usize,
    mis: u64,
}

fn cases() -> Vec<Case> {
    let mut all = Vec::new();
    for (n, src_step, dst_step) in [
        (1000, 2, 1),
        (701, 3, 1),
        (4000, -2, 1),
        (333, -5, 1),
        (500, 1, 3),
    ] {
        for size in [1usize, 2, 4, 8] {
            for mis in [0u64, 1] {
                all.push(Case {
                    name: format!("n{n}/s{src_step}/d{dst_step}/b{size}/m{mis}"),
                    n,
                    src_step,
                    dst_step,
                    size,
                    mis,
                });
            }
        }
    }
    all
}

/// A written case: its file and the launcher's grid.
type Written = (String, (u32, u32));

/// Writes the case file of `c` into `dir`: `Some((file, grid))`, or `None` if the planner
/// gives the copy to another kernel.
fn write_case(dir: &Path, c: &Case, seed: u64) -> Result<Option<Written>, String> {
    const DST: u64 = 0x10_0000;
    const SRC: u64 = 0x80_0000;
    let size = c.size;
    let span = |step: isize| (c.n - 1) * step.unsigned_abs() + 1;
    let (sspan, dspan) = (span(c.src_step), span(c.dst_step));
    let sbase = SRC + c.mis * size as u64;
    let dbase = DST + c.mis * size as u64;
    // A negative step starts at the region's last element.
    let s0 = if c.src_step < 0 { sspan - 1 } else { 0 };
    let launch = devspan::internals::strided1_copy_launch(
        dbase,
        &[c.dst_step],
        sbase + (s0 * size) as u64,
        &[c.src_step],
        bits_of_size(size),
        &[c.n],
    )
    .map_err(|e| format!("{}: {e}", c.name))?;
    let Some(launch) = launch else {
        return Ok(None);
    };
    let source = random_bytes(seed, sspan * size);
    let mut covered = vec![false; sspan * size];
    let mut expect = vec![0xA5u8; dspan * size];
    for i in 0..c.n {
        let s = (s0 as isize + i as isize * c.src_step) as usize * size;
        let d = i * c.dst_step as usize * size;
        expect[d..d + size].copy_from_slice(&source[s..s + size]);
        covered[s..s + size].fill(true);
    }
    let regions = covered_regions(sbase, &source, &covered);
    let file = write_launch_case(dir, &c.name, &launch, &regions, dbase, &expect)?;
    Ok(Some((file, launch.grid)))
}

fn run(out: &Out, sample: bool) -> Result<(), String> {
    with_sim_dir("strided", |dir| run_in(out, dir, sample))
}

fn run_in(out: &Out, dir: &Path, sample: bool) -> Result<(), String> {
    let mut files = Vec::new();
    let mut grids = Vec::new();
    let mut other = Vec::new();
    for (i, c) in cases().iter().enumerate() {
        if sample && !SAMPLE.contains(&c.name.as_str()) {
            continue;
        }
        match write_case(dir, c, 0x5717 + i as u64)? {
            Some((f, g)) => {
                files.push(f);
                grids.push(g);
            }
            None => other.push(c.name.clone()),
        }
    }
    if !other.is_empty() {
        return Err(format!(
            "not planned to the one-axis strided copy kernels: {other:?}"
        ));
    }
    if sample && files.len() != SAMPLE.len() {
        return Err(format!("sample cases found: {}", files.len()));
    }
    if !sample && !grids.iter().any(|g| g.0 > 1) {
        return Err(format!("grids {grids:?}: none of more than one block"));
    }
    let lines = run_cases(dir, &files)?;
    let mut sizes = [0usize; 4];
    for line in &lines {
        out.detail(line);
        let (_, kernel, _) = case_line(line);
        if let Some(size) = kernel.strip_prefix("copy_strided1_b") {
            let size: usize = size.parse().map_err(|_| format!("kernel {kernel}"))?;
            sizes[size.trailing_zeros() as usize] += 1;
        }
    }
    if !sample && sizes.contains(&0) {
        return Err(format!("cases by element size 1, 2, 4 and 8: {sizes:?}"));
    }
    out.summary(&format!(
        "ptx_sim: {} one-axis strided copy interpreter cases passed{}",
        lines.len(),
        if sample { " (sample)" } else { "" }
    ));
    Ok(())
}
