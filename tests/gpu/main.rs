//! Every GPU test, in one test binary (one link of the crate and its embedded PTX instead of one
//! per topic). Each topic is a module, so a test's name starts with its topic:
//! `cargo test --test gpu -- --include-ignored kernels::`.
//!
//! The binary is the package `devspan-gpu-tests` (tests/gpu/Cargo.toml), which the test profile
//! builds unoptimised; on a GPU machine run it with `--release`.
//!
//! The tests are `#[ignore = "needs a CUDA GPU"]`: a plain `cargo test` reports them as
//! ignored. `--include-ignored` runs them; one that finds no usable GPU fails and says why
//! (`devspan::testing::gpu_stream`). The GPU runner passes `--include-ignored --test-threads=1`
//! with `DEVSPAN_REQUIRE_GPU=1`.

#[path = "../common/gpu.rs"]
mod common;

mod any_layout;
mod capture;
mod dlpack;
mod elementwise;
mod ergonomics;
mod faults;
mod foundation;
mod kernels;
mod lifetimes;
mod nccl;
mod peer;
mod permute;
mod pinned;
mod transfer;
