//! Embeds the PTX modules that `devspan_kernels::emit` generates: stores them
//! deflate-compressed in groups and writes an index of them to `$OUT_DIR/ptx_modules.rs`.

use std::collections::BTreeMap;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let ptx_dir = out.join("ptx");
    fs::create_dir_all(&ptx_dir).expect("create OUT_DIR/ptx");
    write_index(&out, &ptx_dir, &devspan_kernels::emit::modules());
}

/// The group a module is stored in: its name less the last `_` part (the element size or the
/// destination type), so that a group holds the variants of one kernel for one source type.
fn group_of(name: &str) -> &str {
    name.rsplit_once('_').map_or(name, |(g, _)| g)
}

/// Writes each group of modules, deflate-compressed, to `$OUT_DIR/ptx/GROUP.ptx.deflate`
/// (the PTX texts, concatenated in name order) and an index of groups and modules to
/// `$OUT_DIR/ptx_modules.rs`. The library inflates a group on the first use of one of its
/// modules.
fn write_index(out: &Path, ptx_dir: &Path, mods: &[(String, String)]) {
    let mut groups: BTreeMap<&str, Vec<&(String, String)>> = BTreeMap::new();
    for m in mods {
        groups.entry(group_of(&m.0)).or_default().push(m);
    }
    let mut index = String::new();
    index.push_str("/// Every group: `(name, deflate-compressed PTX texts, inflated length)`.\n");
    index.push_str("pub static GROUPS: &[(&str, &[u8], usize)] = &[\n");
    let mut entries = Vec::new();
    for (g, (name, members)) in groups.iter().enumerate() {
        let mut text = String::new();
        for (m, ptx) in members.iter().map(|m| (&m.0, &m.1)) {
            entries.push((m.clone(), g, text.len(), ptx.len()));
            text.push_str(ptx);
        }
        let file = ptx_dir.join(format!("{name}.ptx.deflate"));
        let packed = miniz_oxide::deflate::compress_to_vec(text.as_bytes(), 9);
        write_bytes_if_changed(&file, &packed);
        writeln!(
            index,
            "    ({name:?}, include_bytes!({:?}), {}),",
            file.display().to_string(),
            text.len()
        )
        .unwrap();
    }
    index.push_str("];\n");
    entries.sort();
    index.push_str(
        "/// Every module, sorted by name: `(name, group, offset, length)` of its PTX text in\n\
         /// the inflated group.\n",
    );
    index.push_str("pub static MODULES: &[(&str, usize, usize, usize)] = &[\n");
    for (name, g, off, len) in &entries {
        writeln!(index, "    ({name:?}, {g}, {off}, {len}),").unwrap();
    }
    index.push_str("];\n");
    write_if_changed(&out.join("ptx_modules.rs"), &index);
}

fn write_bytes_if_changed(path: &Path, bytes: &[u8]) {
    if fs::read(path).is_ok_and(|old| old == bytes) {
        return;
    }
    fs::write(path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

fn write_if_changed(path: &Path, text: &str) {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return;
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}
