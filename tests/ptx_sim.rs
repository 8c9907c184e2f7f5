//! Runs the wide permute kernels (`copy_permute_w16`, `_w32`, `_w64`) and the vector kernel
//! (`copy_permute_vec_b1`) through a PTX interpreter on the CPU (`tools/ptxsim_wide.py`): every
//! thread of a block, with shared memory and barriers, on copies with partial tiles, negative
//! and zero strides, batch axes and both tile-origin forms (for the vector kernel also sides
//! whose pieces do not fill the tile, and runs of whole tiles); the tool checks every
//! destination run (vector kernel: byte), every access's alignment and bounds, and that every
//! destination vector is stored exactly once. The plan interpreter replays the planner's tiles
//! but not the kernels' thread mapping; this covers that mapping without a GPU.
//!
//! Needs Python 3 (`DEVSPAN_PYTHON`, else `python3` on `PATH`); without it the test is skipped,
//! unless `DEVSPAN_REQUIRE_PTXSIM` is set.

use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn wide_kernels_move_every_run_once_in_a_ptx_interpreter() {
    let python = env::var_os("DEVSPAN_PYTHON").unwrap_or_else(|| "python3".into());
    let available = Command::new(&python)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        let why = format!("{} cannot be run", python.to_string_lossy());
        if env::var_os("DEVSPAN_REQUIRE_PTXSIM").is_some() {
            panic!("DEVSPAN_REQUIRE_PTXSIM is set but {why}");
        }
        eprintln!("skipping the PTX interpreter check: {why}");
        return;
    }
    let dir = env::temp_dir().join(format!("devspan-ptxsim-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let modules: &[(&str, &str)] = devspan::internals::ptx_modules();
    let names = [16, 32, 64]
        .map(|n| format!("copy_permute_w{n}"))
        .into_iter()
        .chain(["copy_permute_vec_b1".to_string()]);
    for name in names {
        let text = modules
            .iter()
            .find(|(m, _)| *m == name)
            .unwrap_or_else(|| panic!("no module {name}"))
            .1;
        fs::write(dir.join(format!("{name}.ptx")), text).unwrap();
    }
    let tool = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools/ptxsim_wide.py");
    let out = Command::new(&python).arg(&tool).arg(&dir).output().unwrap();
    let _ = fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{} failed:\n{stdout}\n{}",
        tool.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Three wide kernels, three copies each, and the vector kernel, four copies; both origin
    // forms.
    assert_eq!(stdout.matches(", ok").count(), 26, "{stdout}");
}
