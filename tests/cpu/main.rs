//! Every host-only test of the public API, in one test binary: axis iterators, DLPack metadata
//! and deleters, owners and keep-alives, layout properties against ndarray, shape overflow, the
//! steerings' plans, and the fuzzing of every host-reachable entry point. Each topic is a
//! module, so a test's name starts with its topic: `cargo test --test cpu layout_props::`.

#[path = "../common/cases.rs"]
#[macro_use]
mod cases;

mod axis_iters;
mod dlpack;
mod fuzz;
mod layout_props;
mod owners;
mod size_overflow;
mod steering;
