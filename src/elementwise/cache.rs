//! The optional disk cache of compiled variants
//! ([`ElementwiseKernel::with_cache_dir`](super::ElementwiseKernel::with_cache_dir)).
//!
//! One file per variant, named by a hash of the generated source and the compile options. The
//! file holds the source and the options in full beside the PTX, and its PTX is used only where
//! both match exactly, so a hash collision or a file from another kernel costs a compile, never
//! a wrong kernel. Files are written whole under a temporary name and renamed into place, so a
//! reader sees either no file or a complete one.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The first line of every cache file.
const MAGIC: &str = "devspan elementwise ptx 1";

/// FNV-1a, 64 bits: a stable hash (unlike `std`'s), enough to name files.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.iter().chain(&[0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The file that holds the PTX of `src` compiled with `options`, in `dir`.
pub(crate) fn path(dir: &Path, src: &str, options: &str) -> PathBuf {
    dir.join(format!(
        "{:016x}.ptx",
        fnv1a(&[options.as_bytes(), src.as_bytes()])
    ))
}

/// A cache file's contents: the magic line, the options, the source's length and the source,
/// the PTX's length and the PTX.
pub(crate) fn encode(src: &str, options: &str, ptx: &str) -> String {
    format!(
        "{MAGIC}\n{options}\n{}\n{src}{}\n{ptx}",
        src.len(),
        ptx.len()
    )
}

/// The PTX in `file` if it was compiled from exactly `src` with exactly `options`.
pub(crate) fn decode<'f>(file: &'f str, src: &str, options: &str) -> Option<&'f str> {
    let rest = file.strip_prefix(MAGIC)?.strip_prefix('\n')?;
    let (opts, rest) = rest.split_once('\n')?;
    let (len, rest) = rest.split_once('\n')?;
    let len: usize = len.parse().ok()?;
    let stored = rest.get(..len)?;
    let (ptx_len, ptx) = rest.get(len..)?.split_once('\n')?;
    let ptx_len: usize = ptx_len.parse().ok()?;
    // PTX is text without NUL bytes (a file zero-filled by a crash has some).
    (opts == options && stored == src && ptx.len() == ptx_len && !ptx.contains('\0')).then_some(ptx)
}

/// The cached PTX of `src` compiled with `options`, if `dir` holds it.
pub(crate) fn load(dir: &Path, src: &str, options: &str) -> Option<String> {
    let file = std::fs::read_to_string(path(dir, src, options)).ok()?;
    decode(&file, src, options).map(str::to_owned)
}

/// Writes the PTX of `src` compiled with `options` into `dir` (created if missing).
pub(crate) fn store(dir: &Path, src: &str, options: &str, ptx: &str) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static WRITES: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir)?;
    let target = path(dir, src, options);
    let tmp = target.with_extension(format!(
        "tmp.{}.{}",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(encode(src, options, ptx).as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, &target));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "extern \"C\" __global__ void k() {}\n";
    const OPTS: &str = "--gpu-architecture=compute_90 --diag-suppress=177,550";
    const PTX: &str = ".version 7.0\n.target sm_90\n// a line\n";

    #[test]
    fn a_file_gives_its_ptx_back_only_for_its_own_source_and_options() {
        let file = encode(SRC, OPTS, PTX);
        assert_eq!(decode(&file, SRC, OPTS), Some(PTX));
        assert_eq!(decode(&file, "other source", OPTS), None);
        assert_eq!(decode(&file, SRC, "--gpu-architecture=compute_80"), None);
        // A source that is a prefix of the stored one, or extends it.
        assert_eq!(decode(&file, &SRC[..SRC.len() - 1], OPTS), None);
        assert_eq!(decode(&file, &format!("{SRC} "), OPTS), None);
    }

    #[test]
    fn damaged_files_give_nothing() {
        let file = encode(SRC, OPTS, PTX);
        for cut in 0..file.len() {
            assert_eq!(decode(&file[..cut], SRC, OPTS), None, "cut at {cut}");
        }
        assert_eq!(decode(&format!("{file}x"), SRC, OPTS), None);
        assert_eq!(decode(&file.replacen("ptx 1", "ptx 2", 1), SRC, OPTS), None);
        assert_eq!(decode("", SRC, OPTS), None);
        let zeroed = encode(SRC, OPTS, &"\0".repeat(PTX.len()));
        assert_eq!(decode(&zeroed, SRC, OPTS), None, "zero-filled PTX");
    }

    #[test]
    fn names_follow_source_and_options() {
        let d = Path::new("/cache");
        assert_eq!(path(d, SRC, OPTS), path(d, SRC, OPTS));
        assert_ne!(path(d, SRC, OPTS), path(d, "other", OPTS));
        assert_ne!(
            path(d, SRC, OPTS),
            path(d, SRC, "--gpu-architecture=compute_80")
        );
        // The separator keeps (options, source) pairs apart.
        assert_ne!(path(d, "ab", "c"), path(d, "b", "ca"));
    }

    #[test]
    fn stored_files_load_and_a_missing_directory_is_made() {
        let dir = std::env::temp_dir().join(format!("devspan-cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let nested = dir.join("a").join("b");
        assert_eq!(load(&nested, SRC, OPTS), None);
        store(&nested, SRC, OPTS, PTX).expect("store");
        assert_eq!(load(&nested, SRC, OPTS).as_deref(), Some(PTX));
        assert_eq!(load(&nested, SRC, "--other"), None);
        // Written again (another process compiled the same variant): still one whole file.
        store(&nested, SRC, OPTS, PTX).expect("store again");
        let files: Vec<_> = std::fs::read_dir(&nested).unwrap().collect();
        assert_eq!(files.len(), 1, "no temporary file is left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
