//! The plans the tuner times for a matrix class: tunings written as `MACKO_TUNING` items, so
//! that every candidate is a plan the agreement suite can force and the cache file can name.
//! A leaf module of data.
//!
//! Each list starts with the rules' own plan (no items). The rest each change one choice the
//! rules make per matrix; the tuner skips a candidate whose plan comes out equal to one it
//! already timed (a forced choice the rules had made anyway), and then tries the best single
//! change combined with each other one that beat the rules.

use macko_format::MatrixKind;

use crate::backend::BackendKind;

/// The CUDA MACKO kernel's choices (src/backend/cuda/tuning.rs says what each forces).
const CUDA_MACKO: &[&str] = &[
    "",
    "cuda.flat=on",
    "cuda.flat=off",
    "cuda.lean=on cuda.xpad=off",
    "cuda.lean=off",
    "cuda.lanes=16",
    "cuda.lanes=32",
    "cuda.split=off cuda.flat=off",
    "cuda.split=2 cuda.flat=off",
    "cuda.split=4 cuda.flat=off",
    "cuda.xhalf=on cuda.xpad=off",
    "cuda.xhalf=off",
    "cuda.xpad=on",
    "cuda.block=1024 cuda.xhalf=off cuda.lean=off",
    "cuda.spread=on",
    "cuda.spread=off",
    "cuda.pipe=on cuda.lanes=32 cuda.chunks=short",
    "cuda.chunks=long",
    "cuda.x=global",
];

/// The wgpu MACKO kernel's choices (src/backend/wgpu/tuning.rs).
const WGPU_MACKO: &[&str] = &[
    "",
    "wgpu.macko_workgroup=256",
    "wgpu.macko_workgroup=512",
    "wgpu.macko_workgroup=1024",
    "wgpu.half_rows=on",
    "wgpu.half_rows=off",
    "wgpu.x_in_workgroup=off",
    "wgpu.x_tile_cols=4096",
    "wgpu.aligned_rows=off",
    "wgpu.x_pad=on",
    "wgpu.x_pad=off",
    "wgpu.mask_table=on",
    "wgpu.mask_table=off",
    "wgpu.macko_invocations=0",
    "wgpu.macko_rows_per_workgroup=2",
    "wgpu.macko_rows_per_workgroup=8",
];

/// The candidate tunings for a `kind` matrix on `backend`, the rules' own first; empty where
/// nothing is tuned (the CPU, and formats whose plans the rules alone choose).
pub fn candidates(backend: BackendKind, kind: MatrixKind) -> &'static [&'static str] {
    match (backend, kind) {
        (BackendKind::Cuda, MatrixKind::Macko) => CUDA_MACKO,
        (BackendKind::Wgpu, MatrixKind::Macko) => WGPU_MACKO,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_candidate_is_a_tuning_of_its_backend() {
        for (backend, list) in [("cuda", CUDA_MACKO), ("wgpu", WGPU_MACKO)] {
            assert_eq!(list[0], "", "the rules' own plan comes first");
            for c in &list[1..] {
                assert!(!c.is_empty());
                super::super::cache::check_tuning(backend, c)
                    .unwrap_or_else(|e| panic!("{c}: {e}"));
            }
            let mut sorted = list.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                list.len(),
                "{backend}: a candidate is listed twice"
            );
        }
    }
}
