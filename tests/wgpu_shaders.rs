//! Every WGSL shader in shaders/ parses and validates with naga, with exactly the capabilities
//! the wgpu backend relies on: the subgroup kernels (`*_sg.wgsl`) with SUBGROUP, everything else
//! without it (so the workgroup path and the streaming read run on adapters without subgroups),
//! and both values of the `Y_F16` pipeline constant resolved. Runs without a GPU, so a broken
//! shader fails CI on any machine.
//!
//! A kernel is compiled as `common.wgsl`, then its family's preludes if there are any
//! (`macko.wgsl` and the x layout `macko_x_words.wgsl` for `macko_sg.wgsl`), then its own file —
//! the order src/backend/wgpu/pipelines.rs uses. The MACKO subgroup kernel's other x layout,
//! `macko_x_f16.wgsl`, is checked on its own (it needs `enable f16;` and `SHADER_F16`).
#![cfg(feature = "wgpu")]

use std::path::{Path, PathBuf};

use wgpu::naga;
use wgpu::naga::valid::{Capabilities, ValidationFlags, Validator};

/// The file every kernel is prepended with (see src/backend/wgpu/pipelines.rs).
const COMMON: &str = "common.wgsl";

fn shader_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders")
}

/// The kernel files (`<family>_sg.wgsl`, `<family>_wg.wgsl`, `stream.wgsl`), sorted.
fn kernels() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(shader_dir())
        .expect("shaders/ is readable")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.ends_with("_sg.wgsl") || n.ends_with("_wg.wgsl") || n == "stream.wgsl"
            })
        })
        .collect();
    files.sort();
    files
}

fn read(name: &str) -> String {
    std::fs::read_to_string(shader_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The width files of the quantized kernels, one of which follows quant.wgsl.
const QUANT_WIDTHS: [&str; 2] = ["quant_int8.wgsl", "quant_int4.wgsl"];
/// The word files that take their place for quant_dense_sg.wgsl (16-byte words of codes).
const QUANT_WORDS: [&str; 2] = ["quant_word_int8.wgsl", "quant_word_int4.wgsl"];

/// The full sources of a kernel as the backend composes them: one for most kernels, one per
/// width for the quantized ones (`quant_*`: common.wgsl, quant.wgsl, the width file (the word
/// file for quant_dense_sg.wgsl), the layout's prelude, for few-token kernels batch.wgsl and quant_batch.wgsl, the kernel).
fn kernel_sources(path: &Path) -> Vec<String> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some(rest) = name.strip_prefix("quant_") else {
        return vec![kernel_source(path)];
    };
    let layout = rest.split('_').next().unwrap_or("");
    let widths = if name == "quant_dense_sg.wgsl" {
        QUANT_WORDS
    } else {
        QUANT_WIDTHS
    };
    widths
        .iter()
        .map(|width| {
            let mut parts = vec![
                read(COMMON),
                read("quant.wgsl"),
                read(width),
                read(&format!("quant_{layout}.wgsl")),
            ];
            if name.contains("_batch_") {
                parts.push(read("batch.wgsl"));
                parts.push(read("quant_batch.wgsl"));
            }
            // The MACKO subgroup kernel's x layout, as macko_sg.wgsl's (f16 pairs here; the f16
            // scalars are checked by the_f16_x_layout_validates_with_shader_f16_and_only_with_it).
            if name == "quant_macko_sg.wgsl" {
                parts.push(read("macko_x_words.wgsl"));
            }
            parts.push(read(name));
            parts.join("\n")
        })
        .collect()
}

/// The full source of a kernel: common.wgsl, the family preludes if any (for MACKO, macko.wgsl
/// and the 32-bit-word x layout; for transposed products, transposed.wgsl), the kernel (for a
/// quantized kernel, its int8 source).
fn kernel_source(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.starts_with("quant_") {
        return kernel_sources(path).swap_remove(0);
    }
    let mut source = read(COMMON);
    if let Some((family, _)) = name.split_once('_') {
        for prelude in [format!("{family}.wgsl"), format!("{family}_x_words.wgsl")] {
            if shader_dir().join(&prelude).exists() {
                source = format!("{source}\n{}", read(&prelude));
            }
        }
        // Transposed products: their partial sums (transposed.wgsl).
        if name.contains("_transposed_") {
            source = format!("{source}\n{}", read("transposed.wgsl"));
        }
        // Few-token kernels: the batch prelude, then the family's batch prelude if any.
        if name.contains("_batch_") {
            source = format!("{source}\n{}", read("batch.wgsl"));
            let prelude = format!("{family}_batch.wgsl");
            if shader_dir().join(&prelude).exists() {
                source = format!("{source}\n{}", read(&prelude));
            }
        }
    }
    format!("{source}\n{}", read(name))
}

/// The MACKO subgroup kernel with x staged as f16 scalars, as the backend composes it.
fn macko_sg_x_f16_source() -> String {
    format!(
        "enable f16;\n{}\n{}\n{}\n{}",
        read(COMMON),
        read("macko.wgsl"),
        read("macko_x_f16.wgsl"),
        read("macko_sg.wgsl")
    )
}

/// What every kernel may use: `unpack2x16float` and `pack2x16float` (wgpu grants this where the
/// adapter has `DownlevelFlags::SHADER_F16_IN_F32`, which the backend requires), plus subgroup
/// operations for the `_sg` kernels only.
fn capabilities_for(name: &str) -> Capabilities {
    if name.ends_with("_sg.wgsl") {
        BASE | Capabilities::SUBGROUP
    } else {
        BASE
    }
}

const BASE: Capabilities = Capabilities::SHADER_FLOAT16_IN_FLOAT32;

/// Parses and validates `source`, then resolves its pipeline constants in every combination
/// the backend builds (f16 or f32 y; for MACKO, x from memory or from workgroup memory).
fn check(name: &str, source: &str, caps: Capabilities) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| format!("{name}: parse error:\n{}", e.emit_to_string(source)))?;
    let info = Validator::new(ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| format!("{name}: invalid:\n{}", e.emit_to_string(source)))?;
    let has = |name: &str| {
        module
            .overrides
            .iter()
            .any(|(_, o)| o.name.as_deref() == Some(name))
    };
    // The pipeline constants the backend sets (src/backend/wgpu/pipelines.rs,
    // `PipelineKey::constants`): Y_F16 both ways, and for MACKO, x gathered from memory or
    // staged in workgroup memory (f16 scalars, padded or not, or f16 pairs; whole or in column
    // tiles), and for the MACKO subgroup kernel its workgroup size, the value masks' source,
    // row-aligned uploads, two rows per subgroup, bounded gathers and the gather probe (the
    // quantized one: x gathered or staged whole, and its workgroup size).
    let x_modes: &[&[(&str, f64)]] = if has("PER_GROUP") && has("X_HALVES") {
        // The quantized MACKO subgroup kernel: x gathered or staged whole, in either layout,
        // and its workgroup size.
        &[
            &[("X_SHARED", 0.0)],
            &[("X_SHARED", 1.0), ("X_HALVES", 4096.0)],
            &[
                ("X_SHARED", 1.0),
                ("X_HALVES", 4096.0),
                ("X_PAD", 1.0),
                ("WORKGROUP", 512.0),
            ],
        ]
    } else if has("PER_GROUP") && has("X_SHARED") {
        &[
            &[("X_SHARED", 0.0)],
            &[("X_SHARED", 1.0), ("X_WORDS", 2048.0), ("WORKGROUP", 256.0)],
        ]
    } else if has("X_HALVES") {
        &[
            &[("X_SHARED", 0.0)],
            &[("X_SHARED", 1.0), ("X_HALVES", 4096.0)],
            &[
                ("X_SHARED", 1.0),
                ("X_HALVES", 4096.0),
                ("X_PAD", 1.0),
                ("WORKGROUP", 512.0),
                ("BOUNDED_GATHERS", 1.0),
                ("GATHER_PROBE", 1.0),
                ("MASK_TABLE", 0.0),
                ("ALIGNED_ROWS", 1.0),
            ],
            &[
                ("X_SHARED", 1.0),
                ("X_HALVES", 4096.0),
                ("WORKGROUP", 256.0),
                ("BOUNDED_GATHERS", 1.0),
                ("MASK_TABLE", 1.0),
                ("ALIGNED_ROWS", 1.0),
                ("HALF_ROWS", 1.0),
            ],
            &[
                ("X_SHARED", 1.0),
                ("X_HALVES", 4096.0),
                ("X_TILED", 1.0),
                ("WORKGROUP", 512.0),
                ("BOUNDED_GATHERS", 1.0),
                ("MASK_TABLE", 1.0),
            ],
        ]
    } else if has("WORKGROUP") {
        &[
            &[("X_SHARED", 0.0)],
            &[
                ("X_SHARED", 0.0),
                ("MASK_TABLE", 1.0),
                ("ALIGNED_ROWS", 1.0),
            ],
            &[("X_SHARED", 1.0), ("X_WORDS", 2048.0)],
            &[
                ("X_SHARED", 1.0),
                ("X_WORDS", 2048.0),
                ("WORKGROUP", 512.0),
                ("MASK_TABLE", 1.0),
                ("ALIGNED_ROWS", 1.0),
                ("HALF_ROWS", 1.0),
            ],
            &[
                ("X_SHARED", 1.0),
                ("X_WORDS", 2048.0),
                ("X_TILED", 1.0),
                ("MASK_TABLE", 0.0),
            ],
        ]
    } else if has("X_SHARED") {
        &[
            &[("X_SHARED", 0.0)],
            &[("X_SHARED", 1.0), ("X_WORDS", 2048.0)],
        ]
    } else {
        &[&[]]
    };
    // Quantized kernels: scales per row, and per group with a shift or a division.
    let scale_modes: &[&[(&str, f64)]] = if has("PER_GROUP") {
        &[
            &[("PER_GROUP", 0.0)],
            &[("PER_GROUP", 1.0), ("SCALE_POW2", 1.0)],
            &[("PER_GROUP", 1.0), ("SCALE_POW2", 0.0)],
        ]
    } else {
        &[&[]]
    };
    // The CSR kernels: HOMOGENEOUS both ways (csr.wgsl), and for the transposed one DENSE_X
    // both ways; the CSR and MACKO kernels (every kernel composed after csr.wgsl or macko.wgsl):
    // SPARSE_X both ways; nothing for the others.
    let flags: Vec<&str> = ["HOMOGENEOUS", "DENSE_X", "SPARSE_X"]
        .into_iter()
        .filter(|f| has(f))
        .collect();
    let with_homogeneous = |constants: &naga::back::PipelineConstants| {
        (0..1u32 << flags.len())
            .map(|bits| {
                let mut c = constants.clone();
                for (k, flag) in flags.iter().enumerate() {
                    c.insert(flag.to_string(), f64::from((bits >> k) & 1));
                }
                c
            })
            .collect::<Vec<_>>()
    };
    // Few-token kernels: every chunk width, and X_TILED both ways for MACKO.
    if has("W") {
        for (w, scale_mode) in [2.0, 4.0, 8.0, 16.0]
            .into_iter()
            .flat_map(|w| scale_modes.iter().map(move |m| (w, m)))
        {
            for (y_f16, tiled) in [(0.0, 0.0), (1.0, 1.0)] {
                let mut constants = naga::back::PipelineConstants::default();
                for (k, v) in scale_mode.iter() {
                    constants.insert(k.to_string(), *v);
                }
                constants.insert("W".to_string(), w);
                if has("Y_F16") {
                    constants.insert("Y_F16".to_string(), y_f16);
                }
                if has("X_TILED") {
                    constants.insert("X_TILED".to_string(), tiled);
                }
                for constants in with_homogeneous(&constants) {
                    naga::back::pipeline_constants::process_overrides(
                        &module,
                        &info,
                        Some((naga::ShaderStage::Compute, "main")),
                        &constants,
                    )
                    .map_err(|e| format!("{name}: {constants:?}: {e}"))?;
                }
            }
        }
        return Ok(());
    }
    if has("Y_F16") {
        for y_f16 in [0.0, 1.0] {
            for x_mode in x_modes.iter().chain(scale_modes.iter()) {
                let mut constants = naga::back::PipelineConstants::default();
                constants.insert("Y_F16".to_string(), y_f16);
                for (k, v) in x_mode.iter() {
                    constants.insert(k.to_string(), *v);
                }
                for constants in with_homogeneous(&constants) {
                    naga::back::pipeline_constants::process_overrides(
                        &module,
                        &info,
                        Some((naga::ShaderStage::Compute, "main")),
                        &constants,
                    )
                    .map_err(|e| format!("{name}: {constants:?}: {e}"))?;
                }
            }
        }
    }
    Ok(())
}

#[test]
fn every_kernel_validates_with_the_capabilities_the_backend_enables() {
    let files = kernels();
    assert!(
        files.len() >= 7,
        "expected the 7 kernels, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        for source in kernel_sources(path) {
            if let Err(e) = check(&name, &source, capabilities_for(&name)) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn subgroup_kernels_are_refused_without_the_subgroup_capability() {
    // Guards the test above: were the capability not checked, the workgroup kernels could use
    // subgroup operations unnoticed.
    for path in kernels()
        .iter()
        .filter(|p| p.to_string_lossy().ends_with("_sg.wgsl"))
    {
        let source = kernel_source(path);
        assert!(
            check("sg", &source, BASE).is_err(),
            "{} validated without SUBGROUP",
            path.display()
        );
    }
}

#[test]
fn the_few_token_transposition_validates_without_subgroups() {
    let source = format!("{}\n{}", read(COMMON), read("batch_xt.wgsl"));
    check("batch_xt.wgsl", &source, BASE).unwrap();
}

#[test]
fn the_preludes_validate_on_their_own() {
    let common = read(COMMON);
    check(COMMON, &common, BASE).unwrap();
    check(
        "macko.wgsl",
        &format!(
            "{common}\n{}\n{}",
            read("macko.wgsl"),
            read("macko_x_words.wgsl")
        ),
        BASE,
    )
    .unwrap();
}

#[test]
fn the_f16_x_layout_validates_with_shader_f16_and_only_with_it() {
    let source = macko_sg_x_f16_source();
    let caps = BASE | Capabilities::SUBGROUP;
    check(
        "macko_sg + macko_x_f16",
        &source,
        caps | Capabilities::SHADER_FLOAT16,
    )
    .unwrap();
    // The backend composes it only for adapters with SHADER_F16: without the capability naga
    // must refuse it (else an adapter without f16 could be handed this kernel unnoticed).
    assert!(check("macko_sg + macko_x_f16", &source, caps).is_err());
    // The quantized MACKO subgroup kernel with the same layout, both widths.
    for width in QUANT_WIDTHS {
        let source = format!(
            "enable f16;\n{}",
            [
                COMMON,
                "quant.wgsl",
                width,
                "quant_macko.wgsl",
                "macko_x_f16.wgsl",
                "quant_macko_sg.wgsl",
            ]
            .map(read)
            .join("\n")
        );
        let name = format!("quant_macko_sg + {width} + macko_x_f16");
        check(&name, &source, caps | Capabilities::SHADER_FLOAT16).unwrap();
    }
}
