//! The planner's rules pinned on the benchmark's 31 shapes at fills standing for d = 1, 0.5
//! and 0.1 (MACKO fill: stored entries over rows × columns, about d, and 0.12–0.15 at d = 0.1),
//! for the capabilities of an H100 and an H200 (Vulkan: subgroups of 32, 48 KiB of workgroup
//! memory), lavapipe (subgroups of 8, 32 KiB), an AMD-like GPU (subgroups of 64, 64 KiB) and
//! an Intel-like GPU (subgroups of 16 to 32, 64 KiB). The expected plans were computed from the
//! rules as they were before the planner existed (products.rs and mod.rs at 29b86e8), by a
//! separate implementation of them.

use super::*;
use crate::backend::MatrixKind;

/// (subgroup min, max, SHADER_F16, workgroup memory, invocations per workgroup).
type Caps = (u32, u32, bool, u32, u32);
const H100: Caps = (32, 32, true, 49152, 1024);
const H200: Caps = (32, 32, true, 49152, 1024);
const LAVAPIPE: Caps = (8, 8, true, 32768, 1024);
const AMD: Caps = (64, 64, true, 65536, 1024);
const INTEL: Caps = (16, 32, true, 65536, 1024);

fn caps(
    (subgroup_min, subgroup_max, has_f16, workgroup_storage, max_invocations): Caps,
) -> WgpuCaps {
    WgpuCaps {
        subgroups: true,
        subgroup_min,
        subgroup_max,
        has_f16,
        workgroup_storage,
        max_invocations,
        max_workgroups_per_dim: 65535,
    }
}

fn macko(rows: usize, cols: usize, fill: f64) -> MatrixStats {
    MatrixStats {
        format: MatrixKind::Macko,
        rows,
        cols,
        fill,
    }
}

#[allow(non_snake_case)]
const fn Tiles(tiles: u32, cols: u32) -> XStaging {
    XStaging::Tiles(TilePlan { tiles, cols })
}
use XForm::{F16Padded, F16};
use XStaging::Whole;

/// (capabilities, rows, cols, fill) → workgroup, x, form, x words, rows per workgroup, the most
/// workgroups, mask table, two rows per subgroup.
type Expected = (
    Caps,
    usize,
    usize,
    f64,
    u32,
    XStaging,
    XForm,
    u32,
    u32,
    u32,
    bool,
    bool,
);

#[rustfmt::skip]
const EXPECTED_PLANS: &[Expected] = &[
    (H100, 4096, 4096, 1.0, 256, Whole, F16Padded, 2304, 16, 528, false, false),
    (H100, 4096, 4096, 0.5, 256, Whole, F16, 2304, 16, 528, true, false),
    (H100, 4096, 4096, 0.13, 256, Whole, F16, 2304, 16, 528, true, true),
    (H100, 8192, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (H100, 8192, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (H100, 8192, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (H100, 8192, 29568, 1.0, 512, Tiles(2, 14784), F16Padded, 7936, 16, 132, false, false),
    (H100, 8192, 29568, 0.5, 512, Tiles(2, 14784), F16, 7680, 16, 132, true, false),
    (H100, 8192, 29568, 0.13, 512, Tiles(2, 14784), F16, 7680, 16, 132, true, false),
    (H100, 32000, 5120, 1.0, 512, Whole, F16Padded, 2816, 16, 264, false, false),
    (H100, 32000, 5120, 0.5, 512, Whole, F16, 2816, 16, 264, true, false),
    (H100, 32000, 5120, 0.13, 512, Whole, F16, 2816, 16, 264, true, true),
    (H100, 32000, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (H100, 32000, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (H100, 32000, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (H100, 28672, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (H100, 28672, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (H100, 28672, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (H100, 5120, 5120, 1.0, 256, Whole, F16Padded, 2816, 16, 528, false, false),
    (H100, 5120, 5120, 0.5, 256, Whole, F16, 2816, 16, 528, true, false),
    (H100, 5120, 5120, 0.13, 256, Whole, F16, 2816, 16, 528, true, true),
    (H100, 5120, 13824, 1.0, 512, Whole, F16Padded, 7424, 16, 132, false, false),
    (H100, 5120, 13824, 0.5, 512, Whole, F16, 7168, 16, 132, true, false),
    (H100, 5120, 13824, 0.13, 512, Whole, F16, 7168, 16, 132, true, true),
    (H100, 3584, 20480, 1.0, 512, Whole, F16Padded, 10752, 16, 132, false, false),
    (H100, 3584, 20480, 0.5, 512, Whole, F16, 10496, 16, 132, true, false),
    (H100, 3584, 20480, 0.13, 512, Whole, F16, 10496, 16, 132, true, true),
    (H100, 4096, 11008, 1.0, 512, Whole, F16Padded, 5888, 16, 264, false, false),
    (H100, 4096, 11008, 0.5, 512, Whole, F16, 5632, 16, 264, true, false),
    (H100, 4096, 11008, 0.13, 512, Whole, F16, 5632, 16, 264, true, true),
    (H100, 13824, 5120, 1.0, 512, Whole, F16Padded, 2816, 16, 264, false, false),
    (H100, 13824, 5120, 0.5, 512, Whole, F16, 2816, 16, 264, true, false),
    (H100, 13824, 5120, 0.13, 512, Whole, F16, 2816, 16, 264, true, true),
    (H100, 18944, 3584, 1.0, 512, Whole, F16Padded, 2048, 16, 264, false, false),
    (H100, 18944, 3584, 0.5, 512, Whole, F16, 2048, 16, 264, true, false),
    (H100, 18944, 3584, 0.13, 512, Whole, F16, 2048, 16, 264, true, true),
    (H100, 14336, 4096, 1.0, 512, Whole, F16Padded, 2304, 16, 264, false, false),
    (H100, 14336, 4096, 0.5, 512, Whole, F16, 2304, 16, 264, true, false),
    (H100, 14336, 4096, 0.13, 512, Whole, F16, 2304, 16, 264, true, true),
    (H100, 4096, 14336, 1.0, 512, Whole, F16Padded, 7680, 16, 132, false, false),
    (H100, 4096, 14336, 0.5, 512, Whole, F16, 7424, 16, 132, true, false),
    (H100, 4096, 14336, 0.13, 512, Whole, F16, 7424, 16, 132, true, true),
    (H100, 8192, 28672, 1.0, 512, Tiles(2, 14336), F16Padded, 7680, 16, 132, false, false),
    (H100, 8192, 28672, 0.5, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (H100, 8192, 28672, 0.13, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (H100, 11008, 4096, 1.0, 256, Whole, F16Padded, 2304, 16, 528, false, false),
    (H100, 11008, 4096, 0.5, 256, Whole, F16, 2304, 16, 528, true, false),
    (H100, 11008, 4096, 0.13, 256, Whole, F16, 2304, 16, 528, true, true),
    (H100, 32000, 4096, 1.0, 512, Whole, F16Padded, 2304, 16, 264, false, false),
    (H100, 32000, 4096, 0.5, 512, Whole, F16, 2304, 16, 264, true, false),
    (H100, 32000, 4096, 0.13, 512, Whole, F16, 2304, 16, 264, true, true),
    (H100, 20480, 3584, 1.0, 512, Whole, F16Padded, 2048, 16, 264, false, false),
    (H100, 20480, 3584, 0.5, 512, Whole, F16, 2048, 16, 264, true, false),
    (H100, 20480, 3584, 0.13, 512, Whole, F16, 2048, 16, 264, true, true),
    (H100, 3584, 18944, 1.0, 512, Whole, F16Padded, 9984, 16, 132, false, false),
    (H100, 3584, 18944, 0.5, 512, Whole, F16, 9728, 16, 132, true, false),
    (H100, 3584, 18944, 0.13, 512, Whole, F16, 9728, 16, 132, true, true),
    (H100, 21504, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (H100, 21504, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (H100, 21504, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (H100, 7168, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (H100, 7168, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (H100, 7168, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (H100, 28672, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (H100, 28672, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (H100, 28672, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (H100, 7168, 28672, 1.0, 512, Tiles(2, 14336), F16Padded, 7680, 16, 132, false, false),
    (H100, 7168, 28672, 0.5, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (H100, 7168, 28672, 0.13, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (H100, 27648, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (H100, 27648, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (H100, 27648, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (H100, 9216, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (H100, 9216, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (H100, 9216, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (H100, 36864, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (H100, 36864, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (H100, 36864, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (H100, 9216, 36864, 1.0, 512, Tiles(2, 18432), F16Padded, 9728, 16, 132, false, false),
    (H100, 9216, 36864, 0.5, 512, Tiles(2, 18432), F16, 9472, 16, 132, true, false),
    (H100, 9216, 36864, 0.13, 512, Tiles(2, 18432), F16, 9472, 16, 132, true, false),
    (H100, 36864, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (H100, 36864, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (H100, 36864, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (H100, 12288, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (H100, 12288, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (H100, 12288, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (H100, 49152, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (H100, 49152, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (H100, 49152, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (H100, 12288, 49152, 1.0, 512, Tiles(3, 16384), F16Padded, 8704, 16, 132, false, false),
    (H100, 12288, 49152, 0.5, 512, Tiles(3, 16384), F16, 8448, 16, 132, true, false),
    (H100, 12288, 49152, 0.13, 512, Tiles(3, 16384), F16, 8448, 16, 132, true, false),
    (H200, 4096, 4096, 1.0, 256, Whole, F16Padded, 2304, 16, 528, false, false),
    (H200, 4096, 4096, 0.5, 256, Whole, F16, 2304, 16, 528, true, false),
    (H200, 4096, 4096, 0.13, 256, Whole, F16, 2304, 16, 528, true, true),
    (H200, 8192, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (H200, 8192, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (H200, 8192, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (H200, 8192, 29568, 1.0, 512, Tiles(2, 14784), F16Padded, 7936, 16, 132, false, false),
    (H200, 8192, 29568, 0.5, 512, Tiles(2, 14784), F16, 7680, 16, 132, true, false),
    (H200, 8192, 29568, 0.13, 512, Tiles(2, 14784), F16, 7680, 16, 132, true, false),
    (H200, 32000, 5120, 1.0, 512, Whole, F16Padded, 2816, 16, 264, false, false),
    (H200, 32000, 5120, 0.5, 512, Whole, F16, 2816, 16, 264, true, false),
    (H200, 32000, 5120, 0.13, 512, Whole, F16, 2816, 16, 264, true, true),
    (H200, 32000, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (H200, 32000, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (H200, 32000, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (H200, 28672, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (H200, 28672, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (H200, 28672, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (H200, 5120, 5120, 1.0, 256, Whole, F16Padded, 2816, 16, 528, false, false),
    (H200, 5120, 5120, 0.5, 256, Whole, F16, 2816, 16, 528, true, false),
    (H200, 5120, 5120, 0.13, 256, Whole, F16, 2816, 16, 528, true, true),
    (H200, 5120, 13824, 1.0, 512, Whole, F16Padded, 7424, 16, 132, false, false),
    (H200, 5120, 13824, 0.5, 512, Whole, F16, 7168, 16, 132, true, false),
    (H200, 5120, 13824, 0.13, 512, Whole, F16, 7168, 16, 132, true, true),
    (H200, 3584, 20480, 1.0, 512, Whole, F16Padded, 10752, 16, 132, false, false),
    (H200, 3584, 20480, 0.5, 512, Whole, F16, 10496, 16, 132, true, false),
    (H200, 3584, 20480, 0.13, 512, Whole, F16, 10496, 16, 132, true, true),
    (H200, 4096, 11008, 1.0, 512, Whole, F16Padded, 5888, 16, 264, false, false),
    (H200, 4096, 11008, 0.5, 512, Whole, F16, 5632, 16, 264, true, false),
    (H200, 4096, 11008, 0.13, 512, Whole, F16, 5632, 16, 264, true, true),
    (H200, 13824, 5120, 1.0, 512, Whole, F16Padded, 2816, 16, 264, false, false),
    (H200, 13824, 5120, 0.5, 512, Whole, F16, 2816, 16, 264, true, false),
    (H200, 13824, 5120, 0.13, 512, Whole, F16, 2816, 16, 264, true, true),
    (H200, 18944, 3584, 1.0, 512, Whole, F16Padded, 2048, 16, 264, false, false),
    (H200, 18944, 3584, 0.5, 512, Whole, F16, 2048, 16, 264, true, false),
    (H200, 18944, 3584, 0.13, 512, Whole, F16, 2048, 16, 264, true, true),
    (H200, 14336, 4096, 1.0, 512, Whole, F16Padded, 2304, 16, 264, false, false),
    (H200, 14336, 4096, 0.5, 512, Whole, F16, 2304, 16, 264, true, false),
    (H200, 14336, 4096, 0.13, 512, Whole, F16, 2304, 16, 264, true, true),
    (H200, 4096, 14336, 1.0, 512, Whole, F16Padded, 7680, 16, 132, false, false),
    (H200, 4096, 14336, 0.5, 512, Whole, F16, 7424, 16, 132, true, false),
    (H200, 4096, 14336, 0.13, 512, Whole, F16, 7424, 16, 132, true, true),
    (H200, 8192, 28672, 1.0, 512, Tiles(2, 14336), F16Padded, 7680, 16, 132, false, false),
    (H200, 8192, 28672, 0.5, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (H200, 8192, 28672, 0.13, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (H200, 11008, 4096, 1.0, 256, Whole, F16Padded, 2304, 16, 528, false, false),
    (H200, 11008, 4096, 0.5, 256, Whole, F16, 2304, 16, 528, true, false),
    (H200, 11008, 4096, 0.13, 256, Whole, F16, 2304, 16, 528, true, true),
    (H200, 32000, 4096, 1.0, 512, Whole, F16Padded, 2304, 16, 264, false, false),
    (H200, 32000, 4096, 0.5, 512, Whole, F16, 2304, 16, 264, true, false),
    (H200, 32000, 4096, 0.13, 512, Whole, F16, 2304, 16, 264, true, true),
    (H200, 20480, 3584, 1.0, 512, Whole, F16Padded, 2048, 16, 264, false, false),
    (H200, 20480, 3584, 0.5, 512, Whole, F16, 2048, 16, 264, true, false),
    (H200, 20480, 3584, 0.13, 512, Whole, F16, 2048, 16, 264, true, true),
    (H200, 3584, 18944, 1.0, 512, Whole, F16Padded, 9984, 16, 132, false, false),
    (H200, 3584, 18944, 0.5, 512, Whole, F16, 9728, 16, 132, true, false),
    (H200, 3584, 18944, 0.13, 512, Whole, F16, 9728, 16, 132, true, true),
    (H200, 21504, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (H200, 21504, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (H200, 21504, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (H200, 7168, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (H200, 7168, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (H200, 7168, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (H200, 28672, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (H200, 28672, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (H200, 28672, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (H200, 7168, 28672, 1.0, 512, Tiles(2, 14336), F16Padded, 7680, 16, 132, false, false),
    (H200, 7168, 28672, 0.5, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (H200, 7168, 28672, 0.13, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (H200, 27648, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (H200, 27648, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (H200, 27648, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (H200, 9216, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (H200, 9216, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (H200, 9216, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (H200, 36864, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (H200, 36864, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (H200, 36864, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (H200, 9216, 36864, 1.0, 512, Tiles(2, 18432), F16Padded, 9728, 16, 132, false, false),
    (H200, 9216, 36864, 0.5, 512, Tiles(2, 18432), F16, 9472, 16, 132, true, false),
    (H200, 9216, 36864, 0.13, 512, Tiles(2, 18432), F16, 9472, 16, 132, true, false),
    (H200, 36864, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (H200, 36864, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (H200, 36864, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (H200, 12288, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (H200, 12288, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (H200, 12288, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (H200, 49152, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (H200, 49152, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (H200, 49152, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (H200, 12288, 49152, 1.0, 512, Tiles(3, 16384), F16Padded, 8704, 16, 132, false, false),
    (H200, 12288, 49152, 0.5, 512, Tiles(3, 16384), F16, 8448, 16, 132, true, false),
    (H200, 12288, 49152, 0.13, 512, Tiles(3, 16384), F16, 8448, 16, 132, true, false),
    (LAVAPIPE, 4096, 4096, 1.0, 256, Whole, F16Padded, 2304, 16, 528, false, false),
    (LAVAPIPE, 4096, 4096, 0.5, 256, Whole, F16, 2304, 16, 528, true, false),
    (LAVAPIPE, 4096, 4096, 0.13, 256, Whole, F16, 2304, 16, 528, true, true),
    (LAVAPIPE, 8192, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (LAVAPIPE, 8192, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (LAVAPIPE, 8192, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (LAVAPIPE, 8192, 29568, 1.0, 512, Tiles(2, 14784), F16Padded, 7936, 16, 132, false, false),
    (LAVAPIPE, 8192, 29568, 0.5, 512, Tiles(2, 14784), F16, 7680, 16, 132, true, false),
    (LAVAPIPE, 8192, 29568, 0.13, 512, Tiles(2, 14784), F16, 7680, 16, 132, true, false),
    (LAVAPIPE, 32000, 5120, 1.0, 512, Whole, F16Padded, 2816, 16, 264, false, false),
    (LAVAPIPE, 32000, 5120, 0.5, 512, Whole, F16, 2816, 16, 264, true, false),
    (LAVAPIPE, 32000, 5120, 0.13, 512, Whole, F16, 2816, 16, 264, true, true),
    (LAVAPIPE, 32000, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (LAVAPIPE, 32000, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (LAVAPIPE, 32000, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (LAVAPIPE, 28672, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (LAVAPIPE, 28672, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (LAVAPIPE, 28672, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (LAVAPIPE, 5120, 5120, 1.0, 256, Whole, F16Padded, 2816, 16, 528, false, false),
    (LAVAPIPE, 5120, 5120, 0.5, 256, Whole, F16, 2816, 16, 528, true, false),
    (LAVAPIPE, 5120, 5120, 0.13, 256, Whole, F16, 2816, 16, 528, true, true),
    (LAVAPIPE, 5120, 13824, 1.0, 512, Whole, F16Padded, 7424, 16, 132, false, false),
    (LAVAPIPE, 5120, 13824, 0.5, 512, Whole, F16, 7168, 16, 132, true, false),
    (LAVAPIPE, 5120, 13824, 0.13, 512, Whole, F16, 7168, 16, 132, true, true),
    (LAVAPIPE, 3584, 20480, 1.0, 512, Tiles(2, 10240), F16Padded, 5376, 16, 264, false, false),
    (LAVAPIPE, 3584, 20480, 0.5, 512, Tiles(2, 10240), F16, 5376, 16, 264, true, false),
    (LAVAPIPE, 3584, 20480, 0.13, 512, Tiles(2, 10240), F16, 5376, 16, 264, true, false),
    (LAVAPIPE, 4096, 11008, 1.0, 512, Whole, F16Padded, 5888, 16, 264, false, false),
    (LAVAPIPE, 4096, 11008, 0.5, 512, Whole, F16, 5632, 16, 264, true, false),
    (LAVAPIPE, 4096, 11008, 0.13, 512, Whole, F16, 5632, 16, 264, true, true),
    (LAVAPIPE, 13824, 5120, 1.0, 512, Whole, F16Padded, 2816, 16, 264, false, false),
    (LAVAPIPE, 13824, 5120, 0.5, 512, Whole, F16, 2816, 16, 264, true, false),
    (LAVAPIPE, 13824, 5120, 0.13, 512, Whole, F16, 2816, 16, 264, true, true),
    (LAVAPIPE, 18944, 3584, 1.0, 512, Whole, F16Padded, 2048, 16, 264, false, false),
    (LAVAPIPE, 18944, 3584, 0.5, 512, Whole, F16, 2048, 16, 264, true, false),
    (LAVAPIPE, 18944, 3584, 0.13, 512, Whole, F16, 2048, 16, 264, true, true),
    (LAVAPIPE, 14336, 4096, 1.0, 512, Whole, F16Padded, 2304, 16, 264, false, false),
    (LAVAPIPE, 14336, 4096, 0.5, 512, Whole, F16, 2304, 16, 264, true, false),
    (LAVAPIPE, 14336, 4096, 0.13, 512, Whole, F16, 2304, 16, 264, true, true),
    (LAVAPIPE, 4096, 14336, 1.0, 512, Whole, F16Padded, 7680, 16, 132, false, false),
    (LAVAPIPE, 4096, 14336, 0.5, 512, Whole, F16, 7424, 16, 132, true, false),
    (LAVAPIPE, 4096, 14336, 0.13, 512, Whole, F16, 7424, 16, 132, true, true),
    (LAVAPIPE, 8192, 28672, 1.0, 512, Tiles(2, 14336), F16Padded, 7680, 16, 132, false, false),
    (LAVAPIPE, 8192, 28672, 0.5, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (LAVAPIPE, 8192, 28672, 0.13, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (LAVAPIPE, 11008, 4096, 1.0, 256, Whole, F16Padded, 2304, 16, 528, false, false),
    (LAVAPIPE, 11008, 4096, 0.5, 256, Whole, F16, 2304, 16, 528, true, false),
    (LAVAPIPE, 11008, 4096, 0.13, 256, Whole, F16, 2304, 16, 528, true, true),
    (LAVAPIPE, 32000, 4096, 1.0, 512, Whole, F16Padded, 2304, 16, 264, false, false),
    (LAVAPIPE, 32000, 4096, 0.5, 512, Whole, F16, 2304, 16, 264, true, false),
    (LAVAPIPE, 32000, 4096, 0.13, 512, Whole, F16, 2304, 16, 264, true, true),
    (LAVAPIPE, 20480, 3584, 1.0, 512, Whole, F16Padded, 2048, 16, 264, false, false),
    (LAVAPIPE, 20480, 3584, 0.5, 512, Whole, F16, 2048, 16, 264, true, false),
    (LAVAPIPE, 20480, 3584, 0.13, 512, Whole, F16, 2048, 16, 264, true, true),
    (LAVAPIPE, 3584, 18944, 1.0, 512, Tiles(2, 9472), F16Padded, 5120, 16, 264, false, false),
    (LAVAPIPE, 3584, 18944, 0.5, 512, Tiles(2, 9472), F16, 4864, 16, 264, true, false),
    (LAVAPIPE, 3584, 18944, 0.13, 512, Tiles(2, 9472), F16, 4864, 16, 264, true, false),
    (LAVAPIPE, 21504, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (LAVAPIPE, 21504, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (LAVAPIPE, 21504, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (LAVAPIPE, 7168, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (LAVAPIPE, 7168, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (LAVAPIPE, 7168, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (LAVAPIPE, 28672, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (LAVAPIPE, 28672, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (LAVAPIPE, 28672, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (LAVAPIPE, 7168, 28672, 1.0, 512, Tiles(2, 14336), F16Padded, 7680, 16, 132, false, false),
    (LAVAPIPE, 7168, 28672, 0.5, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (LAVAPIPE, 7168, 28672, 0.13, 512, Tiles(2, 14336), F16, 7424, 16, 132, true, false),
    (LAVAPIPE, 27648, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (LAVAPIPE, 27648, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (LAVAPIPE, 27648, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (LAVAPIPE, 9216, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (LAVAPIPE, 9216, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (LAVAPIPE, 9216, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (LAVAPIPE, 36864, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (LAVAPIPE, 36864, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (LAVAPIPE, 36864, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (LAVAPIPE, 9216, 36864, 1.0, 512, Tiles(3, 12288), F16Padded, 6656, 16, 132, false, false),
    (LAVAPIPE, 9216, 36864, 0.5, 512, Tiles(3, 12288), F16, 6400, 16, 132, true, false),
    (LAVAPIPE, 9216, 36864, 0.13, 512, Tiles(3, 12288), F16, 6400, 16, 132, true, false),
    (LAVAPIPE, 36864, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (LAVAPIPE, 36864, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (LAVAPIPE, 36864, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (LAVAPIPE, 12288, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (LAVAPIPE, 12288, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (LAVAPIPE, 12288, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (LAVAPIPE, 49152, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (LAVAPIPE, 49152, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (LAVAPIPE, 49152, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (LAVAPIPE, 12288, 49152, 1.0, 512, Tiles(4, 12288), F16Padded, 6656, 16, 132, false, false),
    (LAVAPIPE, 12288, 49152, 0.5, 512, Tiles(4, 12288), F16, 6400, 16, 132, true, false),
    (LAVAPIPE, 12288, 49152, 0.13, 512, Tiles(4, 12288), F16, 6400, 16, 132, true, false),
    (AMD, 4096, 4096, 1.0, 256, Whole, F16Padded, 2304, 16, 528, false, false),
    (AMD, 4096, 4096, 0.5, 256, Whole, F16, 2304, 16, 528, true, false),
    (AMD, 4096, 4096, 0.13, 256, Whole, F16, 2304, 16, 528, true, true),
    (AMD, 8192, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (AMD, 8192, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (AMD, 8192, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (AMD, 8192, 29568, 1.0, 512, Whole, F16Padded, 15360, 16, 132, false, false),
    (AMD, 8192, 29568, 0.5, 512, Whole, F16, 15104, 16, 132, true, false),
    (AMD, 8192, 29568, 0.13, 512, Whole, F16, 15104, 16, 132, true, true),
    (AMD, 32000, 5120, 1.0, 512, Whole, F16Padded, 2816, 16, 264, false, false),
    (AMD, 32000, 5120, 0.5, 512, Whole, F16, 2816, 16, 264, true, false),
    (AMD, 32000, 5120, 0.13, 512, Whole, F16, 2816, 16, 264, true, true),
    (AMD, 32000, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (AMD, 32000, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (AMD, 32000, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (AMD, 28672, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (AMD, 28672, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (AMD, 28672, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (AMD, 5120, 5120, 1.0, 256, Whole, F16Padded, 2816, 16, 528, false, false),
    (AMD, 5120, 5120, 0.5, 256, Whole, F16, 2816, 16, 528, true, false),
    (AMD, 5120, 5120, 0.13, 256, Whole, F16, 2816, 16, 528, true, true),
    (AMD, 5120, 13824, 1.0, 512, Whole, F16Padded, 7424, 16, 132, false, false),
    (AMD, 5120, 13824, 0.5, 512, Whole, F16, 7168, 16, 132, true, false),
    (AMD, 5120, 13824, 0.13, 512, Whole, F16, 7168, 16, 132, true, true),
    (AMD, 3584, 20480, 1.0, 512, Whole, F16Padded, 10752, 16, 132, false, false),
    (AMD, 3584, 20480, 0.5, 512, Whole, F16, 10496, 16, 132, true, false),
    (AMD, 3584, 20480, 0.13, 512, Whole, F16, 10496, 16, 132, true, true),
    (AMD, 4096, 11008, 1.0, 512, Whole, F16Padded, 5888, 16, 264, false, false),
    (AMD, 4096, 11008, 0.5, 512, Whole, F16, 5632, 16, 264, true, false),
    (AMD, 4096, 11008, 0.13, 512, Whole, F16, 5632, 16, 264, true, true),
    (AMD, 13824, 5120, 1.0, 512, Whole, F16Padded, 2816, 16, 264, false, false),
    (AMD, 13824, 5120, 0.5, 512, Whole, F16, 2816, 16, 264, true, false),
    (AMD, 13824, 5120, 0.13, 512, Whole, F16, 2816, 16, 264, true, true),
    (AMD, 18944, 3584, 1.0, 512, Whole, F16Padded, 2048, 16, 264, false, false),
    (AMD, 18944, 3584, 0.5, 512, Whole, F16, 2048, 16, 264, true, false),
    (AMD, 18944, 3584, 0.13, 512, Whole, F16, 2048, 16, 264, true, true),
    (AMD, 14336, 4096, 1.0, 512, Whole, F16Padded, 2304, 16, 264, false, false),
    (AMD, 14336, 4096, 0.5, 512, Whole, F16, 2304, 16, 264, true, false),
    (AMD, 14336, 4096, 0.13, 512, Whole, F16, 2304, 16, 264, true, true),
    (AMD, 4096, 14336, 1.0, 512, Whole, F16Padded, 7680, 16, 132, false, false),
    (AMD, 4096, 14336, 0.5, 512, Whole, F16, 7424, 16, 132, true, false),
    (AMD, 4096, 14336, 0.13, 512, Whole, F16, 7424, 16, 132, true, true),
    (AMD, 8192, 28672, 1.0, 512, Whole, F16Padded, 15104, 16, 132, false, false),
    (AMD, 8192, 28672, 0.5, 512, Whole, F16, 14592, 16, 132, true, false),
    (AMD, 8192, 28672, 0.13, 512, Whole, F16, 14592, 16, 132, true, true),
    (AMD, 11008, 4096, 1.0, 256, Whole, F16Padded, 2304, 16, 528, false, false),
    (AMD, 11008, 4096, 0.5, 256, Whole, F16, 2304, 16, 528, true, false),
    (AMD, 11008, 4096, 0.13, 256, Whole, F16, 2304, 16, 528, true, true),
    (AMD, 32000, 4096, 1.0, 512, Whole, F16Padded, 2304, 16, 264, false, false),
    (AMD, 32000, 4096, 0.5, 512, Whole, F16, 2304, 16, 264, true, false),
    (AMD, 32000, 4096, 0.13, 512, Whole, F16, 2304, 16, 264, true, true),
    (AMD, 20480, 3584, 1.0, 512, Whole, F16Padded, 2048, 16, 264, false, false),
    (AMD, 20480, 3584, 0.5, 512, Whole, F16, 2048, 16, 264, true, false),
    (AMD, 20480, 3584, 0.13, 512, Whole, F16, 2048, 16, 264, true, true),
    (AMD, 3584, 18944, 1.0, 512, Whole, F16Padded, 9984, 16, 132, false, false),
    (AMD, 3584, 18944, 0.5, 512, Whole, F16, 9728, 16, 132, true, false),
    (AMD, 3584, 18944, 0.13, 512, Whole, F16, 9728, 16, 132, true, true),
    (AMD, 21504, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (AMD, 21504, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (AMD, 21504, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (AMD, 7168, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (AMD, 7168, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (AMD, 7168, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (AMD, 28672, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (AMD, 28672, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (AMD, 28672, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (AMD, 7168, 28672, 1.0, 512, Whole, F16Padded, 15104, 16, 132, false, false),
    (AMD, 7168, 28672, 0.5, 512, Whole, F16, 14592, 16, 132, true, false),
    (AMD, 7168, 28672, 0.13, 512, Whole, F16, 14592, 16, 132, true, true),
    (AMD, 27648, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (AMD, 27648, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (AMD, 27648, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (AMD, 9216, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (AMD, 9216, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (AMD, 9216, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (AMD, 36864, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (AMD, 36864, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (AMD, 36864, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (AMD, 9216, 36864, 1.0, 512, Tiles(2, 18432), F16Padded, 9728, 16, 132, false, false),
    (AMD, 9216, 36864, 0.5, 512, Tiles(2, 18432), F16, 9472, 16, 132, true, false),
    (AMD, 9216, 36864, 0.13, 512, Tiles(2, 18432), F16, 9472, 16, 132, true, false),
    (AMD, 36864, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (AMD, 36864, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (AMD, 36864, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (AMD, 12288, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (AMD, 12288, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (AMD, 12288, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (AMD, 49152, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (AMD, 49152, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (AMD, 49152, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (AMD, 12288, 49152, 1.0, 512, Tiles(2, 24576), F16Padded, 12800, 16, 132, false, false),
    (AMD, 12288, 49152, 0.5, 512, Tiles(2, 24576), F16, 12544, 16, 132, true, false),
    (AMD, 12288, 49152, 0.13, 512, Tiles(2, 24576), F16, 12544, 16, 132, true, false),
    (INTEL, 4096, 4096, 1.0, 256, Whole, F16Padded, 2304, 16, 528, false, false),
    (INTEL, 4096, 4096, 0.5, 256, Whole, F16, 2304, 16, 528, true, false),
    (INTEL, 4096, 4096, 0.13, 256, Whole, F16, 2304, 16, 528, true, true),
    (INTEL, 8192, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (INTEL, 8192, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (INTEL, 8192, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (INTEL, 8192, 29568, 1.0, 512, Whole, F16Padded, 15360, 16, 132, false, false),
    (INTEL, 8192, 29568, 0.5, 512, Whole, F16, 15104, 16, 132, true, false),
    (INTEL, 8192, 29568, 0.13, 512, Whole, F16, 15104, 16, 132, true, true),
    (INTEL, 32000, 5120, 1.0, 512, Whole, F16Padded, 2816, 16, 264, false, false),
    (INTEL, 32000, 5120, 0.5, 512, Whole, F16, 2816, 16, 264, true, false),
    (INTEL, 32000, 5120, 0.13, 512, Whole, F16, 2816, 16, 264, true, true),
    (INTEL, 32000, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (INTEL, 32000, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (INTEL, 32000, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (INTEL, 28672, 8192, 1.0, 512, Whole, F16Padded, 4352, 16, 264, false, false),
    (INTEL, 28672, 8192, 0.5, 512, Whole, F16, 4352, 16, 264, true, false),
    (INTEL, 28672, 8192, 0.13, 512, Whole, F16, 4352, 16, 264, true, true),
    (INTEL, 5120, 5120, 1.0, 256, Whole, F16Padded, 2816, 16, 528, false, false),
    (INTEL, 5120, 5120, 0.5, 256, Whole, F16, 2816, 16, 528, true, false),
    (INTEL, 5120, 5120, 0.13, 256, Whole, F16, 2816, 16, 528, true, true),
    (INTEL, 5120, 13824, 1.0, 512, Whole, F16Padded, 7424, 16, 132, false, false),
    (INTEL, 5120, 13824, 0.5, 512, Whole, F16, 7168, 16, 132, true, false),
    (INTEL, 5120, 13824, 0.13, 512, Whole, F16, 7168, 16, 132, true, true),
    (INTEL, 3584, 20480, 1.0, 512, Whole, F16Padded, 10752, 16, 132, false, false),
    (INTEL, 3584, 20480, 0.5, 512, Whole, F16, 10496, 16, 132, true, false),
    (INTEL, 3584, 20480, 0.13, 512, Whole, F16, 10496, 16, 132, true, true),
    (INTEL, 4096, 11008, 1.0, 512, Whole, F16Padded, 5888, 16, 264, false, false),
    (INTEL, 4096, 11008, 0.5, 512, Whole, F16, 5632, 16, 264, true, false),
    (INTEL, 4096, 11008, 0.13, 512, Whole, F16, 5632, 16, 264, true, true),
    (INTEL, 13824, 5120, 1.0, 512, Whole, F16Padded, 2816, 16, 264, false, false),
    (INTEL, 13824, 5120, 0.5, 512, Whole, F16, 2816, 16, 264, true, false),
    (INTEL, 13824, 5120, 0.13, 512, Whole, F16, 2816, 16, 264, true, true),
    (INTEL, 18944, 3584, 1.0, 512, Whole, F16Padded, 2048, 16, 264, false, false),
    (INTEL, 18944, 3584, 0.5, 512, Whole, F16, 2048, 16, 264, true, false),
    (INTEL, 18944, 3584, 0.13, 512, Whole, F16, 2048, 16, 264, true, true),
    (INTEL, 14336, 4096, 1.0, 512, Whole, F16Padded, 2304, 16, 264, false, false),
    (INTEL, 14336, 4096, 0.5, 512, Whole, F16, 2304, 16, 264, true, false),
    (INTEL, 14336, 4096, 0.13, 512, Whole, F16, 2304, 16, 264, true, true),
    (INTEL, 4096, 14336, 1.0, 512, Whole, F16Padded, 7680, 16, 132, false, false),
    (INTEL, 4096, 14336, 0.5, 512, Whole, F16, 7424, 16, 132, true, false),
    (INTEL, 4096, 14336, 0.13, 512, Whole, F16, 7424, 16, 132, true, true),
    (INTEL, 8192, 28672, 1.0, 512, Whole, F16Padded, 15104, 16, 132, false, false),
    (INTEL, 8192, 28672, 0.5, 512, Whole, F16, 14592, 16, 132, true, false),
    (INTEL, 8192, 28672, 0.13, 512, Whole, F16, 14592, 16, 132, true, true),
    (INTEL, 11008, 4096, 1.0, 256, Whole, F16Padded, 2304, 16, 528, false, false),
    (INTEL, 11008, 4096, 0.5, 256, Whole, F16, 2304, 16, 528, true, false),
    (INTEL, 11008, 4096, 0.13, 256, Whole, F16, 2304, 16, 528, true, true),
    (INTEL, 32000, 4096, 1.0, 512, Whole, F16Padded, 2304, 16, 264, false, false),
    (INTEL, 32000, 4096, 0.5, 512, Whole, F16, 2304, 16, 264, true, false),
    (INTEL, 32000, 4096, 0.13, 512, Whole, F16, 2304, 16, 264, true, true),
    (INTEL, 20480, 3584, 1.0, 512, Whole, F16Padded, 2048, 16, 264, false, false),
    (INTEL, 20480, 3584, 0.5, 512, Whole, F16, 2048, 16, 264, true, false),
    (INTEL, 20480, 3584, 0.13, 512, Whole, F16, 2048, 16, 264, true, true),
    (INTEL, 3584, 18944, 1.0, 512, Whole, F16Padded, 9984, 16, 132, false, false),
    (INTEL, 3584, 18944, 0.5, 512, Whole, F16, 9728, 16, 132, true, false),
    (INTEL, 3584, 18944, 0.13, 512, Whole, F16, 9728, 16, 132, true, true),
    (INTEL, 21504, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (INTEL, 21504, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (INTEL, 21504, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (INTEL, 7168, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (INTEL, 7168, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (INTEL, 7168, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (INTEL, 28672, 7168, 1.0, 512, Whole, F16Padded, 3840, 16, 264, false, false),
    (INTEL, 28672, 7168, 0.5, 512, Whole, F16, 3840, 16, 264, true, false),
    (INTEL, 28672, 7168, 0.13, 512, Whole, F16, 3840, 16, 264, true, true),
    (INTEL, 7168, 28672, 1.0, 512, Whole, F16Padded, 15104, 16, 132, false, false),
    (INTEL, 7168, 28672, 0.5, 512, Whole, F16, 14592, 16, 132, true, false),
    (INTEL, 7168, 28672, 0.13, 512, Whole, F16, 14592, 16, 132, true, true),
    (INTEL, 27648, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (INTEL, 27648, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (INTEL, 27648, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (INTEL, 9216, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (INTEL, 9216, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (INTEL, 9216, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (INTEL, 36864, 9216, 1.0, 512, Whole, F16Padded, 4864, 16, 264, false, false),
    (INTEL, 36864, 9216, 0.5, 512, Whole, F16, 4864, 16, 264, true, false),
    (INTEL, 36864, 9216, 0.13, 512, Whole, F16, 4864, 16, 264, true, true),
    (INTEL, 9216, 36864, 1.0, 512, Tiles(2, 18432), F16Padded, 9728, 16, 132, false, false),
    (INTEL, 9216, 36864, 0.5, 512, Tiles(2, 18432), F16, 9472, 16, 132, true, false),
    (INTEL, 9216, 36864, 0.13, 512, Tiles(2, 18432), F16, 9472, 16, 132, true, false),
    (INTEL, 36864, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (INTEL, 36864, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (INTEL, 36864, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (INTEL, 12288, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (INTEL, 12288, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (INTEL, 12288, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (INTEL, 49152, 12288, 1.0, 512, Whole, F16Padded, 6656, 16, 132, false, false),
    (INTEL, 49152, 12288, 0.5, 512, Whole, F16, 6400, 16, 132, true, false),
    (INTEL, 49152, 12288, 0.13, 512, Whole, F16, 6400, 16, 132, true, true),
    (INTEL, 12288, 49152, 1.0, 512, Tiles(2, 24576), F16Padded, 12800, 16, 132, false, false),
    (INTEL, 12288, 49152, 0.5, 512, Tiles(2, 24576), F16, 12544, 16, 132, true, false),
    (INTEL, 12288, 49152, 0.13, 512, Tiles(2, 24576), F16, 12544, 16, 132, true, false),
];

#[test]
fn default_plans_on_the_benchmark_shapes() {
    for &(c, rows, cols, fill, workgroup, x, x_form, x_words, per, max, mask_table, half_rows) in
        EXPECTED_PLANS
    {
        let got = plan(&macko(rows, cols, fill), &caps(c), &WgpuTuning::default());
        let want = WgpuPlan {
            kernel: Kernel::MackoSubgroup,
            workgroup,
            grid: Grid::Capped {
                rows_per_workgroup: per,
                max,
            },
            x,
            x_form,
            x_words,
            mask_table,
            aligned_rows: true,
            half_rows,
            gather_probe: false,
            // Checked on their own (batch_plan_tests.rs).
            batch: got.batch.clone(),
            quant: None,
            homogeneous: false,
        };
        assert_eq!(got, want, "{c:?}, {rows}×{cols}, fill {fill}");
    }
}

#[test]
fn staged_workgroups_are_capped_by_workgroups_and_by_invocations() {
    let mut t = WgpuTuning::default();
    let kib = |n: u32| n * 1024;
    // An H200's resident workgroups at 32 warps per SM: 2 of 512, 4 of 256 per SM.
    assert_eq!(staged_workgroup_cap(&t, 512, kib(9)), 264);
    assert_eq!(staged_workgroup_cap(&t, 256, kib(9)), 528);
    // Two workgroups fit an SM up to 24 KB each; above, one workgroup of 512 per SM.
    assert_eq!(staged_workgroup_cap(&t, 512, kib(23)), 264);
    assert_eq!(staged_workgroup_cap(&t, 512, kib(24)), 264);
    assert_eq!(staged_workgroup_cap(&t, 512, kib(24) + 1), 132);
    assert_eq!(staged_workgroup_cap(&t, 512, kib(47)), 132);
    // Small workgroups hit the workgroup cap first; huge ones still get one workgroup.
    assert_eq!(staged_workgroup_cap(&t, 32, kib(9)), 1024);
    t.macko_invocations = Some(100);
    assert_eq!(staged_workgroup_cap(&t, 512, kib(9)), 1);
    // 0: no invocation cap.
    t.macko_invocations = Some(0);
    assert_eq!(staged_workgroup_cap(&t, 512, kib(9)), 1024);
    assert_eq!(staged_workgroup_cap(&t, 0, kib(9)), 1024);
}

#[test]
fn workgroups_fit_the_adapter_and_follow_the_forced_size() {
    let mut small = caps(LAVAPIPE);
    small.max_invocations = 128;
    let p = plan(&macko(20000, 4096, 0.5), &small, &WgpuTuning::default());
    assert_eq!(p.workgroup, 128);
    let forced = WgpuTuning {
        macko_workgroup: Some(64),
        ..WgpuTuning::default()
    };
    let p = plan(&macko(20000, 4096, 0.5), &caps(H100), &forced);
    assert_eq!(p.workgroup, 64);
}

#[test]
fn the_other_kernels_and_paths_have_plain_plans() {
    let sg = caps(H100);
    let wg = WgpuCaps {
        subgroups: false,
        ..caps(H100)
    };
    let stats = |format| MatrixStats {
        format,
        rows: 1000,
        cols: 500,
        fill: 0.0,
    };
    let t = WgpuTuning::default();
    let cases = [
        (
            &sg,
            MatrixKind::Csr,
            Kernel::CsrSubgroup,
            128,
            Grid::Capped {
                rows_per_workgroup: 4,
                max: 65535,
            },
        ),
        (
            &sg,
            MatrixKind::Sparse24,
            Kernel::Sparse24Subgroup,
            128,
            Grid::Capped {
                rows_per_workgroup: 4,
                max: 65535,
            },
        ),
        (
            &wg,
            MatrixKind::Sparse24,
            Kernel::Sparse24Workgroup,
            64,
            Grid::Spread {
                rows_per_workgroup: 1,
                max_x: 65535,
            },
        ),
        (
            &sg,
            MatrixKind::Dense,
            Kernel::DenseSubgroup,
            256,
            Grid::Spread {
                rows_per_workgroup: 4,
                max_x: 65535,
            },
        ),
        (
            &wg,
            MatrixKind::Macko,
            Kernel::MackoWorkgroup,
            64,
            Grid::Spread {
                rows_per_workgroup: 1,
                max_x: 65535,
            },
        ),
        (
            &wg,
            MatrixKind::Csr,
            Kernel::CsrWorkgroup,
            64,
            Grid::Spread {
                rows_per_workgroup: 1,
                max_x: 65535,
            },
        ),
        (
            &wg,
            MatrixKind::Dense,
            Kernel::DenseWorkgroup,
            256,
            Grid::Spread {
                rows_per_workgroup: 4,
                max_x: 65535,
            },
        ),
    ];
    for (c, format, kernel, workgroup, grid) in cases {
        let p = plan(&stats(format), c, &t);
        assert_eq!(
            (p.kernel, p.workgroup, p.grid),
            (kernel, workgroup, grid),
            "{format:?}"
        );
        assert_eq!(p.x, XStaging::Memory);
        assert!(!p.aligned_rows && !p.half_rows && !p.mask_table && !p.bounded_gathers());
    }
    assert_eq!(
        Grid::Spread {
            rows_per_workgroup: 1,
            max_x: 4
        }
        .dispatch(10),
        (4, 3)
    );
    assert_eq!(
        Grid::Capped {
            rows_per_workgroup: 16,
            max: 3
        }
        .dispatch(1000),
        (3, 1)
    );
    assert_eq!(
        Grid::Capped {
            rows_per_workgroup: 16,
            max: 3
        }
        .dispatch(0),
        (1, 1)
    );
}

#[test]
fn x_from_memory_and_f16_pairs_where_staging_is_off_or_f16_missing() {
    let t = WgpuTuning {
        x_in_workgroup: Some(false),
        ..WgpuTuning::default()
    };
    let p = plan(&macko(4096, 4096, 0.13), &caps(H100), &t);
    assert_eq!(
        (p.x, p.x_words, p.x_form),
        (XStaging::Memory, 0, XForm::Pairs)
    );
    // Enough subgroups of the smallest size for every row: 256 / 32 rows per workgroup.
    assert_eq!(
        p.grid,
        Grid::Capped {
            rows_per_workgroup: 8,
            max: 65535
        }
    );
    assert!(!p.half_rows && !p.bounded_gathers());
    let no_f16 = WgpuCaps {
        has_f16: false,
        ..caps(H100)
    };
    let p = plan(&macko(4096, 4096, 1.0), &no_f16, &WgpuTuning::default());
    assert_eq!(
        (p.x, p.x_form, p.x_words),
        (XStaging::Whole, XForm::Pairs, 2048)
    );
    assert!(!p.bounded_gathers());
    // Too wide for pairs in 48 KiB: tiles.
    let p = plan(&macko(4096, 28672, 0.5), &no_f16, &WgpuTuning::default());
    assert_eq!(p.x, Tiles(2, 14336));
    // Tiles turned off: from memory.
    let t = WgpuTuning {
        x_tiles: Some(false),
        ..WgpuTuning::default()
    };
    assert_eq!(
        plan(&macko(4096, 28672, 0.5), &no_f16, &t).x,
        XStaging::Memory
    );
}

/// Every forced plan is taken where its documentation says it applies: on lavapipe's
/// capabilities, for a 300×2000 matrix (tiled at 128 columns, x whole otherwise) at the fill of
/// d = 0.5, and at d = 1 and 0.1 for the padding and two-rows switches.
#[test]
fn every_forced_plan_is_taken() {
    for forced in WgpuTuning::forced_plans() {
        let taken = [1.0, 0.5, 0.13].iter().any(|&fill| {
            (forced.taken)(&plan(
                &macko(300, 2000, fill),
                &caps(LAVAPIPE),
                &forced.tuning,
            ))
        });
        assert!(taken, "{}", forced.name);
        // And not by the default tuning at d = 0.5.
        let default = plan(
            &macko(300, 2000, 0.5),
            &caps(LAVAPIPE),
            &WgpuTuning::default(),
        );
        assert!(
            !(forced.taken)(&default),
            "{} taken by default",
            forced.name
        );
    }
}

/// The pipeline constants of default plans, as the kernels were built at 29b86e8 less the
/// overrides of the settled and refuted variants (which are constants of the kernels now):
/// the specialized modules of these settings were compared before and after (SPIR-V after
/// spirv-opt), so a change here is a change of the code the GPU runs.
#[test]
fn default_plans_set_the_constants_the_kernels_were_compared_with() {
    let t = WgpuTuning::default();
    let constants = |stats: &MatrixStats, y_f16: bool| {
        let mut c = plan(stats, &caps(H100), &t).pipeline_key(y_f16).constants();
        c.sort_by(|a, b| a.0.cmp(b.0));
        c
    };
    let on = |b: bool| if b { 1.0 } else { 0.0 };
    for (fill, pad, mask, half) in [
        (0.5, false, true, false),
        (0.13, false, true, true),
        (1.0, true, false, false),
    ] {
        // Padded or not, 4096 columns and their slack round up to 2304 words.
        let words = 2304.0;
        let want = vec![
            ("ALIGNED_ROWS", 1.0),
            ("BOUNDED_GATHERS", 1.0),
            ("GATHER_PROBE", 0.0),
            ("HALF_ROWS", on(half)),
            ("MASK_TABLE", on(mask)),
            ("WORKGROUP", 256.0),
            ("X_HALVES", 2.0 * words),
            ("X_PAD", on(pad)),
            ("X_SHARED", 1.0),
            ("X_TILED", 0.0),
            ("Y_F16", 1.0),
        ];
        assert_eq!(
            constants(&macko(4096, 4096, fill), true),
            want,
            "fill {fill}"
        );
    }
    // x in column tiles (8192×29568 at d = 0.5): workgroups of 512, f32 y.
    let c = constants(&macko(8192, 29568, 0.5), false);
    assert!(
        c.contains(&("X_TILED", 1.0)) && c.contains(&("WORKGROUP", 512.0)),
        "{c:?}"
    );
    assert!(
        c.contains(&("HALF_ROWS", 0.0)) && c.contains(&("Y_F16", 0.0)),
        "{c:?}"
    );
}
