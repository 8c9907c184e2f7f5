//! Fuzzing of every host-reachable entry point with random and extreme arguments: each case is
//! `Ok` with a result that an independent model (i128 arithmetic from first principles, brute
//! force over small layouts) agrees with, or `Err` where the model says the input is bad. A
//! panic fails the test with the input, the case number and the panic's message and location.
//!
//! Targets (one test each, named `fuzz::<target>`):
//!
//! | target | what it feeds |
//! |---|---|
//! | `raw_parts` | `DeviceBytes`/`DeviceBytesMut` from raw parts, `slice`, `split_at`, `typed`; `DeviceSpan`/`DeviceSpanMut` `slice`, `split_at`, `chunks`, `reinterpret`; `DeviceView::from_raw_parts`, `DeviceViewMut::from_raw_parts_mut`, `from_span`, `from_span_mut` |
//! | `layout_ops` | `Layout::new_strided`, `try_contiguous` and chains of every layout operation (slice, slice_axis, index_axis, permute, swap, invert, reversed, insert/remove axis, broadcast, reshape, split, into_dimensionality) and query |
//! | `view_ops` | the same operations on read-only and writable views over fake device memory (`try_` forms, `into_shape_with_order` in both orders, `to_shape`), with element sizes 1 to 8 |
//! | `dlpack_import` | `DlpackTensor::from_versioned` / `from_legacy` with every field malformed, then `into_view` / `into_view_mut` |
//! | `dlpack_export` | `into_dlpack` / `into_dlpack_legacy` of random views, imported back |
//! | `kernel_args` | the planner behind `fill`, `assign` and `assign_cast` (`internals::fill_path`, `copy_path`) on small layouts and on layouts of up to 40 axes and 2^54 elements (axes 2^31 elements apart), `kernel_view`, and the plain device methods of views without a stream |
//! | `transfer_args` | the transfer planner behind every host <-> device copy (`internals::transfer_path`) with host arrays of every layout, `TransferOptions::check`, and the plain transfer methods of views without a stream |
//!
//! Case counts: each target runs 5,000 cases (together under a second of test time), or
//! `DEVSPAN_FUZZ_CASES` cases each (CI sets it; see `.ci/run`); under Miri a handful. Inputs come from `DEVSPAN_FUZZ_SEED` (decimal or `0x` hex;
//! `random` picks one and prints it), default a fixed seed, so that a plain `cargo test` is
//! deterministic. Every target prints one summary line to standard error,
//! `fuzz: <target>: <n> cases, <ok> Ok, <err> Err (<kinds>), 0 panics, seed <seed>`, which shows
//! with `-- --nocapture` (as `.ci/run` runs them).

/// `Err` with a message unless `cond` (for the model checks, which return `Result<_, String>`).
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

mod dlpack;
mod entry_points;
mod model;
mod raw_parts;
mod view_ops;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::panic::{AssertUnwindSafe, catch_unwind};

use devspan::ErrorKind;

/// A device address that is never dereferenced, aligned for every element type.
pub(crate) const FAKE_PTR: u64 = 0x7f00_0000_0000;

/// Small deterministic generator (SplitMix64).
#[derive(Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`0` when `n == 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// A length: mostly small, sometimes 0 or one of the values where arithmetic overflows.
    pub(crate) fn len(&mut self) -> usize {
        match self.below(20) {
            0 => 0,
            1 => self.extreme_usize(),
            2 => 1,
            _ => 1 + self.below(5),
        }
    }

    /// A stride: mostly small (either sign, zero too), sometimes extreme.
    pub(crate) fn stride(&mut self) -> isize {
        match self.below(12) {
            0 => self.extreme_isize(),
            _ => self.range(-6, 6) as isize,
        }
    }

    pub(crate) fn extreme_usize(&mut self) -> usize {
        let max = isize::MAX as usize;
        match self.below(14) {
            0 => usize::MAX,
            1 => usize::MAX - self.below(8),
            2 => max,
            3 => max + 1,
            4 => max - self.below(8),
            5 => max / 2 + self.below(3),
            6 => 1 << 31,
            7 => 1 << 32,
            8 => (1 << 62) + self.below(2),
            9 => 1 << 63,
            10 => 1 << (16 + self.below(47)),
            11 => (1 << 31) - 1,
            12 => 3 << 20,
            _ => self.next() as usize,
        }
    }

    pub(crate) fn extreme_isize(&mut self) -> isize {
        let v = self.extreme_usize() as isize;
        match self.below(4) {
            0 => isize::MIN,
            1 => v.wrapping_neg(),
            _ => v,
        }
    }

    /// A device address: the fake one (aligned), near it, null, near the top of the address
    /// space, or anything.
    pub(crate) fn ptr(&mut self) -> u64 {
        match self.below(12) {
            0 => 0,
            1 => FAKE_PTR + self.below(16) as u64,
            2 => u64::MAX - self.below(64) as u64,
            3 => self.next(),
            4 => 1 << (self.below(64)),
            5 => (1u64 << 63) - 8 * self.below(4) as u64,
            _ => FAKE_PTR,
        }
    }
}

/// What a case ended with, for the summary.
pub(crate) enum Outcome {
    Ok,
    Err(ErrorKind),
}

impl From<&devspan::Error> for Outcome {
    fn from(e: &devspan::Error) -> Self {
        Outcome::Err(e.kind().clone())
    }
}

impl<T> From<&devspan::Result<T>> for Outcome {
    fn from(r: &devspan::Result<T>) -> Self {
        match r {
            Ok(_) => Outcome::Ok,
            Err(e) => e.into(),
        }
    }
}

/// A case's verdict: its outcome, or a disagreement with the model.
pub(crate) type Verdict = Result<Outcome, String>;

/// `Err` unless `got` is `Err` with one of the kinds `allowed` (non-empty), or `Ok` when
/// `allowed` is empty; on agreement, the outcome.
pub(crate) fn expect_kinds<T>(
    what: &str,
    got: &devspan::Result<T>,
    allowed: &[ErrorKind],
) -> Verdict {
    match (got, allowed.is_empty()) {
        (Ok(_), true) => Ok(Outcome::Ok),
        (Ok(_), false) => Err(format!("{what}: Ok, the model expects Err({allowed:?})")),
        (Err(e), true) => Err(format!("{what}: {e:?}, the model expects Ok")),
        (Err(e), false) if allowed.contains(e.kind()) => {
            if e.message().is_empty() {
                return Err(format!("{what}: {e:?} has no message"));
            }
            Ok(e.into())
        }
        (Err(e), false) => Err(format!(
            "{what}: {e:?}, the model expects one of {allowed:?}"
        )),
    }
}

thread_local! {
    /// Set while a case runs: the panic hook records the panic here instead of printing it.
    static CATCHING: RefCell<Option<Option<String>>> = const { RefCell::new(None) };
}

fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let caught = CATCHING.with(|c| {
                let mut c = c.borrow_mut();
                match c.as_mut() {
                    Some(slot) => {
                        *slot = Some(info.to_string());
                        true
                    }
                    None => false,
                }
            });
            if !caught {
                prev(info)
            }
        }));
    });
}

/// Runs `f`; `Err` with the panic's message and location if it panicked.
pub(crate) fn catching<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    install_hook();
    let outer = CATCHING.with(|c| c.replace(Some(None)));
    let r = catch_unwind(AssertUnwindSafe(f));
    let msg = CATCHING.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    r.map_err(|_| {
        msg.flatten()
            .unwrap_or_else(|| "panic without a message".into())
    })
}

/// The run's seed: `DEVSPAN_FUZZ_SEED`, or a fixed one.
fn seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| match std::env::var("DEVSPAN_FUZZ_SEED") {
        Ok(s) if s == "random" => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        Ok(s) => {
            let t = s.trim();
            let parsed = match t.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => t.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("DEVSPAN_FUZZ_SEED={s:?} is not a number"))
        }
        Err(_) => 0xdec0_de5e_ed00_0001,
    })
}

/// Cases for a target whose default is `default`.
fn cases(default: usize) -> usize {
    if cfg!(miri) {
        return default.min(24);
    }
    match std::env::var("DEVSPAN_FUZZ_CASES") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("DEVSPAN_FUZZ_CASES={s:?} is not a number")),
        Err(_) => default,
    }
}

fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Runs `check` on `cases(default)` inputs made by `gen`, each from its own seed; fails on the
/// first panic or disagreement with the model, printing the input. Prints the summary line.
pub(crate) fn run<I: Debug>(
    target: &str,
    default: usize,
    generate: impl Fn(&mut Rng) -> I,
    check: impl Fn(&I) -> Verdict,
) {
    let n = cases(default);
    let seed = seed();
    let (mut ok, mut err) = (0usize, 0usize);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for case in 0..n {
        let case_seed = Rng::new(seed ^ name_hash(target)).next() ^ (case as u64);
        let input = generate(&mut Rng::new(case_seed));
        let fail = |why: String| -> ! {
            panic!(
                "fuzz {target}: case {case} (seed {seed:#x}, case seed {case_seed:#x}) failed: \
                 {why}\n  input: {input:#?}"
            )
        };
        match catching(|| check(&input)) {
            Err(panic) => fail(format!("panic: {panic}")),
            Ok(Err(mismatch)) => fail(mismatch),
            Ok(Ok(Outcome::Ok)) => ok += 1,
            Ok(Ok(Outcome::Err(kind))) => {
                err += 1;
                *kinds.entry(format!("{kind:?}")).or_default() += 1;
            }
        }
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, c)| format!("{k} {c}")).collect();
    eprintln!(
        "fuzz: {target}: {n} cases, {ok} Ok, {err} Err ({}), 0 panics, seed {seed:#x}",
        kinds.join(", ")
    );
    // Both outcomes must occur, or the generator misses half of the input space.
    if n >= 200 {
        assert!(
            ok * 50 >= n && err * 50 >= n,
            "fuzz {target}: {ok} Ok and {err} Err of {n} cases: the inputs are lopsided"
        );
    }
}
