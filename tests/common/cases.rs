//! Random cases for the host property tests (the planner's in src/plan/tests.rs, the layout and
//! DLPack ones in tests/cpu): [`for_each_case`] draws every case from one seeded generator and
//! runs a check on it; a check that returns `Err` (see [`case_assert!`], [`case_assert_eq!`]) or
//! panics fails the test with the case's number, the seed and the whole input.
//!
//! The seed is `DEVSPAN_PROP_SEED` (decimal or `0x` hex) or a fixed default, so a plain `cargo
//! test` is deterministic and a failure repeats under the seed it printed. Failing inputs are
//! printed as drawn: nothing shrinks them to a smaller failing input.
//!
//! In proptest's terms: [`weighted`] is `prop_oneof!` with weights, [`pick`] is
//! `sample::select`, [`vec_of`] is `collection::vec`, `Rng::random_bool(p)` is
//! `bool::weighted(p)`, `Rng::random` is `any`, and a filter is a loop that draws again until
//! the value passes.

use std::fmt::Debug;
use std::ops::RangeInclusive;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The variable that sets the seed of every property test.
pub const SEED_VAR: &str = "DEVSPAN_PROP_SEED";
const DEFAULT_SEED: u64 = 0xdeb5_9a11_5eed_0001;

/// `DEVSPAN_PROP_SEED`, or the fixed default.
pub fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| match std::env::var(SEED_VAR) {
        Ok(s) => {
            let t = s.trim();
            let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
                None => t.replace('_', "").parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{SEED_VAR}={s:?} is not a number"))
        }
        Err(_) => DEFAULT_SEED,
    })
}

/// Runs `check` on `cases` inputs drawn in turn by `draw` from a generator seeded with
/// [`seed`]; panics at the first input that fails (an `Err` or a panic), naming the case, the
/// seed and the input.
pub fn for_each_case<T: Debug>(
    cases: usize,
    mut draw: impl FnMut(&mut StdRng) -> T,
    mut check: impl FnMut(&T) -> Result<(), String>,
) {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    for k in 0..cases {
        let input = draw(&mut rng);
        let failure = match catch_unwind(AssertUnwindSafe(|| check(&input))) {
            Ok(Ok(())) => continue,
            Ok(Err(message)) => message,
            Err(payload) => format!("panicked: {}", panic_message(&*payload)),
        };
        panic!(
            "case {k} of {cases} failed ({SEED_VAR}={seed:#x} repeats it): {failure}\ninput: {input:?}"
        );
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "<non-string panic payload>"
    }
}

/// An index into `weights`, `i` with probability `weights[i] / sum(weights)`.
pub fn weighted(rng: &mut StdRng, weights: &[u32]) -> usize {
    let mut x = rng.random_range(0..weights.iter().sum::<u32>());
    for (i, &w) in weights.iter().enumerate() {
        if x < w {
            return i;
        }
        x -= w;
    }
    unreachable!("x < sum(weights)")
}

/// One of `items`, each as likely.
pub fn pick<T: Clone>(rng: &mut StdRng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())].clone()
}

/// A vector whose length is uniform in `len`, each element from `draw`.
pub fn vec_of<T>(
    rng: &mut StdRng,
    len: RangeInclusive<usize>,
    mut draw: impl FnMut(&mut StdRng) -> T,
) -> Vec<T> {
    let n = rng.random_range(len);
    (0..n).map(|_| draw(rng)).collect()
}

/// `return Err(message)` from a case's check unless `cond` holds; the message ends with the
/// assertion's location.
macro_rules! case_assert {
    ($cond:expr $(,)?) => {
        case_assert!($cond, "assertion failed: {}", stringify!($cond))
    };
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!("{} (at {}:{})", format_args!($($fmt)+), file!(), line!()));
        }
    };
}

/// `return Err(message)` from a case's check unless `left == right`; the message shows both
/// and the assertion's location.
macro_rules! case_assert_eq {
    ($left:expr, $right:expr $(,)?) => {{
        let left = $left;
        let right = $right;
        if !(left == right) {
            return Err(format!(
                "assertion failed: `{} == {}` (at {}:{})\n  left: {:?}\n right: {:?}",
                stringify!($left),
                stringify!($right),
                file!(),
                line!(),
                left,
                right
            ));
        }
    }};
    ($left:expr, $right:expr, $($fmt:tt)+) => {{
        let left = $left;
        let right = $right;
        if !(left == right) {
            return Err(format!(
                "{}\nassertion failed: `{} == {}` (at {}:{})\n  left: {:?}\n right: {:?}",
                format_args!($($fmt)+),
                stringify!($left),
                stringify!($right),
                file!(),
                line!(),
                left,
                right
            ));
        }
    }};
}
