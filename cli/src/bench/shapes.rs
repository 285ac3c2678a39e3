//! The shapes the benchmark and `macko tune` measure by default, and the `ROWSxCOLS` argument
//! parser they share. A leaf module.

/// The 31 LLM weight shapes (rows × cols) of the MACKO paper.
pub const PAPER_SHAPES: [(usize, usize); 31] = [
    (4096, 4096),
    (8192, 8192),
    (8192, 29568),
    (32000, 5120),
    (32000, 8192),
    (28672, 8192),
    (5120, 5120),
    (5120, 13824),
    (3584, 20480),
    (4096, 11008),
    (13824, 5120),
    (18944, 3584),
    (14336, 4096),
    (4096, 14336),
    (8192, 28672),
    (11008, 4096),
    (32000, 4096),
    (20480, 3584),
    (3584, 18944),
    (21504, 7168),
    (7168, 7168),
    (28672, 7168),
    (7168, 28672),
    (27648, 9216),
    (9216, 9216),
    (36864, 9216),
    (9216, 36864),
    (36864, 12288),
    (12288, 12288),
    (49152, 12288),
    (12288, 49152),
];

/// A `ROWSxCOLS` argument (`x`, `X` or `×` between the sizes).
pub fn parse_shape(s: &str) -> Result<(usize, usize), String> {
    let (r, c) = s
        .split_once(['x', 'X', '×'])
        .ok_or_else(|| format!("shape {s:?} is not ROWSxCOLS"))?;
    let parse = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|e| format!("shape {s:?}: {v:?} is not a size ({e})"))
    };
    Ok((parse(r)?, parse(c)?))
}
