//! all-MiniLM-L6-v2 (a 6-layer BERT encoder of 384 features, 12 heads, 1536 intermediate)
//! run over one sentence twice: once with every linear layer pruned per row, encoded as
//! MACKO-16-4 and multiplied on a device as ONE few-token product over all tokens
//! ([`macko::Device::spmm`], f16 activations in, f32 out), and once on the host in f32 with the
//! unpruned weights. Everything between the products (embeddings, attention, LayerNorm, GELU,
//! biases, residuals) runs on the host in f32 in both passes, so the two differ only by the
//! products. The pruned weights may also be quantized to int8 or int4 (docs/FORMAT.md,
//! "Quantized values"); each product then also reports how far quantization moved its output
//! from the pruned binary16 layer's. Shared by the `few_tokens` example and
//! `tests/few_tokens_model.rs`.

use std::collections::HashMap;

use macko::checkpoint::{Checkpoint, CheckpointError};
use macko::half::{bf16, f16};
use macko::{prune, AnyMatrix, Device, DeviceMatrix, MackoMatrix, Precision};
use macko::{reference, MatrixRef};
use macko::{QuantMackoMatrix, Quantization};

/// Features per token.
pub const HIDDEN: usize = 384;
/// Attention heads (of `HIDDEN / HEADS` = 32 features each).
pub const HEADS: usize = 12;
/// Encoder layers.
pub const LAYERS: usize = 6;
/// The LayerNorm epsilon of BERT's configuration.
const LN_EPS: f32 = 1e-12;

/// "[CLS] the quick brown fox jumps over the lazy dog [SEP]" as token ids of the
/// bert-base-uncased WordPiece vocabulary that all-MiniLM-L6-v2 uses (its tokenizer.json; every
/// word is one piece): 101 = [CLS], 102 = [SEP].
pub const SENTENCE: [u32; 11] = [
    101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 102,
];

/// What can go wrong reading the model or running it.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Reading the checkpoint, pruning or a device call failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A device call failed.
    #[error(transparent)]
    Device(#[from] macko::Error),
    /// A format or reference error (encoding, the f64 reference).
    #[error(transparent)]
    Format(#[from] macko::FormatError),
    /// A tensor that BERT needs is not in the file.
    #[error("the checkpoint has no tensor `{name}` (is it all-MiniLM-L6-v2's model.safetensors?)")]
    Missing {
        /// The tensor's name.
        name: String,
    },
    /// A tensor of another shape than BERT's configuration gives.
    #[error("tensor `{name}` has shape {found:?}, but this model needs {expected:?}")]
    Shape {
        /// The tensor's name.
        name: String,
        /// The shape needed.
        expected: Vec<usize>,
        /// The shape in the file.
        found: Vec<usize>,
    },
    /// A tensor stored in a dtype other than F32, F16 or BF16.
    #[error("tensor `{name}` is {dtype}; only F32, F16 and BF16 are read")]
    Dtype {
        /// The tensor's name.
        name: String,
        /// Its dtype.
        dtype: String,
    },
    /// A token id past the end of the vocabulary, or more tokens than positions.
    #[error("{what} {value} is out of range (the model has {limit})")]
    Token {
        /// "token id" or "sentence length".
        what: &'static str,
        /// The value.
        value: usize,
        /// The model's limit.
        limit: usize,
    },
}

/// A tensor read as f32 (exact for F32, F16 and BF16 sources).
fn tensor_f32(ckpt: &Checkpoint, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError> {
    let entry = ckpt
        .tensor(name)
        .ok_or_else(|| ModelError::Missing { name: name.into() })?;
    if entry.shape != shape {
        return Err(ModelError::Shape {
            name: name.into(),
            expected: shape.to_vec(),
            found: entry.shape.clone(),
        });
    }
    let bytes = ckpt.raw_bytes(entry)?;
    let values = match entry.dtype.as_str() {
        "F32" => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        "F16" => bytes
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        "BF16" => bytes
            .chunks_exact(2)
            .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        other => {
            return Err(ModelError::Dtype {
                name: name.into(),
                dtype: other.into(),
            })
        }
    };
    Ok(values)
}

/// A linear layer y = W·x + b: the weight in f32 as stored (row-major `[rows][cols]`) for the
/// host pass, and its name for the device pass, which reads it as binary16 and prunes it.
pub struct Linear {
    /// The weight tensor's name.
    pub name: String,
    /// Output features.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// W, f32, `[rows][cols]`.
    pub weight: Vec<f32>,
    /// b, f32.
    pub bias: Vec<f32>,
}

impl Linear {
    fn load(ckpt: &Checkpoint, prefix: &str, rows: usize, cols: usize) -> Result<Self, ModelError> {
        let name = format!("{prefix}.weight");
        Ok(Self {
            weight: tensor_f32(ckpt, &name, &[rows, cols])?,
            bias: tensor_f32(ckpt, &format!("{prefix}.bias"), &[rows])?,
            name,
            rows,
            cols,
        })
    }
}

/// LayerNorm's scale and shift.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

impl Norm {
    fn load(ckpt: &Checkpoint, prefix: &str) -> Result<Self, ModelError> {
        Ok(Self {
            gamma: tensor_f32(ckpt, &format!("{prefix}.weight"), &[HIDDEN])?,
            beta: tensor_f32(ckpt, &format!("{prefix}.bias"), &[HIDDEN])?,
        })
    }

    /// Normalises each token's features in place.
    fn apply(&self, h: &mut [f32]) {
        for t in h.chunks_exact_mut(HIDDEN) {
            let mean = t.iter().sum::<f32>() / HIDDEN as f32;
            let var = t.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / HIDDEN as f32;
            let inv = 1.0 / (var + LN_EPS).sqrt();
            for ((v, g), b) in t.iter_mut().zip(&self.gamma).zip(&self.beta) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

/// One encoder layer.
struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

/// The encoder's weights, read from all-MiniLM-L6-v2's `model.safetensors`.
pub struct Model {
    word: Vec<f32>,
    vocabulary: usize,
    position: Vec<f32>,
    positions: usize,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

impl Model {
    /// Reads every tensor of the encoder (the pooler is not used: sentence embeddings are the
    /// mean of the last hidden states).
    pub fn load(ckpt: &Checkpoint) -> Result<Self, ModelError> {
        let shape = |name: &str| {
            ckpt.tensor(name)
                .map(|t| t.shape.clone())
                .ok_or_else(|| ModelError::Missing { name: name.into() })
        };
        let vocabulary = shape("embeddings.word_embeddings.weight")?[0];
        let positions = shape("embeddings.position_embeddings.weight")?[0];
        let mut layers = Vec::with_capacity(LAYERS);
        for i in 0..LAYERS {
            let p = format!("encoder.layer.{i}");
            let inter = 4 * HIDDEN;
            layers.push(Layer {
                query: Linear::load(ckpt, &format!("{p}.attention.self.query"), HIDDEN, HIDDEN)?,
                key: Linear::load(ckpt, &format!("{p}.attention.self.key"), HIDDEN, HIDDEN)?,
                value: Linear::load(ckpt, &format!("{p}.attention.self.value"), HIDDEN, HIDDEN)?,
                attention_out: Linear::load(
                    ckpt,
                    &format!("{p}.attention.output.dense"),
                    HIDDEN,
                    HIDDEN,
                )?,
                attention_norm: Norm::load(ckpt, &format!("{p}.attention.output.LayerNorm"))?,
                intermediate: Linear::load(
                    ckpt,
                    &format!("{p}.intermediate.dense"),
                    inter,
                    HIDDEN,
                )?,
                output: Linear::load(ckpt, &format!("{p}.output.dense"), HIDDEN, inter)?,
                output_norm: Norm::load(ckpt, &format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(Self {
            word: tensor_f32(
                ckpt,
                "embeddings.word_embeddings.weight",
                &[vocabulary, HIDDEN],
            )?,
            vocabulary,
            position: tensor_f32(
                ckpt,
                "embeddings.position_embeddings.weight",
                &[positions, HIDDEN],
            )?,
            positions,
            token_type: tensor_f32(
                ckpt,
                "embeddings.token_type_embeddings.weight",
                &[2, HIDDEN],
            )?,
            embedding_norm: Norm::load(ckpt, "embeddings.LayerNorm")?,
            layers,
        })
    }

    /// Every linear layer, in the order of the forward pass.
    pub fn linears(&self) -> impl Iterator<Item = &Linear> {
        self.layers.iter().flat_map(|l| {
            [
                &l.query,
                &l.key,
                &l.value,
                &l.attention_out,
                &l.intermediate,
                &l.output,
            ]
        })
    }

    /// The embeddings of `tokens` (word + position + token type 0, then LayerNorm),
    /// `[tokens][HIDDEN]`.
    fn embed(&self, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        if tokens.len() > self.positions {
            return Err(ModelError::Token {
                what: "sentence length",
                value: tokens.len(),
                limit: self.positions,
            });
        }
        let mut h = Vec::with_capacity(tokens.len() * HIDDEN);
        for (pos, &id) in tokens.iter().enumerate() {
            let id = id as usize;
            if id >= self.vocabulary {
                return Err(ModelError::Token {
                    what: "token id",
                    value: id,
                    limit: self.vocabulary,
                });
            }
            fn row(table: &[f32], i: usize) -> &[f32] {
                &table[i * HIDDEN..(i + 1) * HIDDEN]
            }
            let (w, p, t) = (
                row(&self.word, id),
                row(&self.position, pos),
                row(&self.token_type, 0),
            );
            h.extend((0..HIDDEN).map(|j| w[j] + p[j] + t[j]));
        }
        self.embedding_norm.apply(&mut h);
        Ok(h)
    }

    /// The last hidden states of `tokens`, `[tokens][HIDDEN]`, every linear layer's W·X taken
    /// from `products` (the biases are added here).
    pub fn forward(
        &self,
        tokens: &[u32],
        products: &mut dyn Products,
    ) -> Result<Vec<f32>, ModelError> {
        let n = tokens.len();
        let mut h = self.embed(tokens)?;
        let mut linear = |l: &Linear, x: &[f32]| -> Result<Vec<f32>, ModelError> {
            let mut y = products.product(l, x, n)?;
            for t in y.chunks_exact_mut(l.rows) {
                t.iter_mut().zip(&l.bias).for_each(|(v, b)| *v += b);
            }
            Ok(y)
        };
        for layer in &self.layers {
            let q = linear(&layer.query, &h)?;
            let k = linear(&layer.key, &h)?;
            let v = linear(&layer.value, &h)?;
            let context = attention(&q, &k, &v, n);
            let mut a = linear(&layer.attention_out, &context)?;
            a.iter_mut().zip(&h).for_each(|(a, h)| *a += h);
            layer.attention_norm.apply(&mut a);
            let mut inter = linear(&layer.intermediate, &a)?;
            inter.iter_mut().for_each(|v| *v = gelu(*v));
            let mut out = linear(&layer.output, &inter)?;
            out.iter_mut().zip(&a).for_each(|(o, a)| *o += a);
            layer.output_norm.apply(&mut out);
            h = out;
        }
        Ok(h)
    }
}

/// Multi-head self-attention over all `n` tokens (no mask: every token is real):
/// softmax(q·kᵀ/√32)·v per head, `[n][HIDDEN]`.
fn attention(q: &[f32], k: &[f32], v: &[f32], n: usize) -> Vec<f32> {
    let d = HIDDEN / HEADS;
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = vec![0.0f32; n * HIDDEN];
    let mut p = vec![0.0f32; n];
    /// Token `t`'s features of head `head`.
    fn at(m: &[f32], t: usize, head: usize) -> &[f32] {
        let d = HIDDEN / HEADS;
        &m[t * HIDDEN + head * d..t * HIDDEN + (head + 1) * d]
    }
    for head in 0..HEADS {
        for i in 0..n {
            for (j, pj) in p.iter_mut().enumerate() {
                *pj = at(q, i, head)
                    .iter()
                    .zip(at(k, j, head))
                    .map(|(a, b)| a * b)
                    .sum::<f32>()
                    * scale;
            }
            let max = p.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            p.iter_mut().for_each(|x| *x = (*x - max).exp());
            let sum: f32 = p.iter().sum();
            let o = &mut out[i * HIDDEN + head * d..i * HIDDEN + (head + 1) * d];
            for (j, pj) in p.iter().enumerate() {
                for (o, vj) in o.iter_mut().zip(at(v, j, head)) {
                    *o += pj / sum * vj;
                }
            }
        }
    }
    out
}

/// BERT's GELU, x·Φ(x) with the error function (not the tanh approximation).
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// The error function to 1.5e-7 (Abramowitz & Stegun 7.1.26): far below f16 activations'
/// rounding, and the same in both passes.
fn erf(x: f32) -> f32 {
    let (sign, x) = if x < 0.0 {
        (-1.0, -x as f64)
    } else {
        (1.0, x as f64)
    };
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    (sign * (1.0 - poly * (-x * x).exp())) as f32
}

/// Where the forward pass gets W·X of a linear layer for `n` tokens: X is `[n][cols]`, the
/// result `[n][rows]`, f32, without the bias.
pub trait Products {
    /// W·X of `layer` for `n` tokens.
    fn product(&mut self, layer: &Linear, x: &[f32], n: usize) -> Result<Vec<f32>, ModelError>;
}

/// The unpruned weights in f32 on the host: the model as trained.
pub struct HostDense;

impl Products for HostDense {
    fn product(&mut self, l: &Linear, x: &[f32], n: usize) -> Result<Vec<f32>, ModelError> {
        let mut y = vec![0.0f32; n * l.rows];
        for (xt, yt) in x.chunks_exact(l.cols).zip(y.chunks_exact_mut(l.rows)) {
            for (yr, w) in yt.iter_mut().zip(l.weight.chunks_exact(l.cols)) {
                *yr = w.iter().zip(xt).map(|(a, b)| a * b).sum();
            }
        }
        Ok(y)
    }
}

/// One product of the device pass, checked against the f64 reference of the same pruned
/// matrix and the same f16 X.
pub struct ProductCheck {
    /// The weight's name.
    pub name: String,
    /// Tokens multiplied at once (B of the few-token product).
    pub tokens: usize,
    /// ‖Y − Y_ref‖ / ‖Y_ref‖ over all tokens, Y_ref the f64 reference of the stored matrix
    /// (the device's own error).
    pub relative_error: f64,
    /// ‖Y_ref − Y_f16‖ / ‖Y_f16‖: how far quantization moved the layer's exact output from that
    /// of the pruned binary16 layer (0 without quantization).
    pub quantization_error: f64,
}

/// A linear layer pruned per row (and quantized, if asked) and uploaded once.
struct Uploaded {
    /// The pruned binary16 layer.
    pruned: MackoMatrix,
    /// What was uploaded: `pruned` itself, or its quantized values.
    stored: AnyMatrix,
    device: DeviceMatrix,
}

/// Every linear weight rounded to binary16, pruned per row to a density, encoded as MACKO-16-4
/// and uploaded; each product one [`Device::spmm`] over all tokens (f16 X, f32 Y), checked
/// against [`reference::spmm`].
pub struct DevicePruned<'d> {
    device: &'d Device,
    matrices: HashMap<String, Uploaded>,
    /// The checks of the products so far, in order.
    pub checks: Vec<ProductCheck>,
    /// Bytes of the stored matrices (MACKO-16-4, or MACKO with quantized values).
    pub macko_bytes: u64,
    /// Bytes of the same matrices as dense f16.
    pub dense_f16_bytes: u64,
}

impl<'d> DevicePruned<'d> {
    /// Prunes every linear layer of `model` to `density` ([`prune::magnitude_per_row`]: the
    /// largest |w| of each row kept), quantizes its values if `quant` asks, and uploads it to
    /// `device`.
    pub fn new(
        device: &'d Device,
        ckpt: &Checkpoint,
        model: &Model,
        density: f64,
        quant: Option<Quantization>,
    ) -> Result<Self, ModelError> {
        prune::check_density(density).map_err(CheckpointError::from)?;
        let mut matrices = HashMap::new();
        let (mut macko_bytes, mut dense_f16_bytes) = (0, 0);
        for l in model.linears() {
            let dense = ckpt.dense(&l.name)?;
            let pruned =
                prune::magnitude_per_row(&dense, density).map_err(CheckpointError::from)?;
            let pruned = MackoMatrix::from_dense(&pruned)?;
            let stored = match quant {
                Some(q) => AnyMatrix::MackoQuant(QuantMackoMatrix::quantize(&pruned, q)?),
                None => AnyMatrix::Macko(pruned.clone()),
            };
            macko_bytes += stored.as_ref().bytes();
            dense_f16_bytes += dense.bytes();
            let uploaded = device.upload(&stored)?;
            matrices.insert(
                l.name.clone(),
                Uploaded {
                    pruned,
                    stored,
                    device: uploaded,
                },
            );
        }
        Ok(Self {
            device,
            matrices,
            checks: Vec::new(),
            macko_bytes,
            dense_f16_bytes,
        })
    }
}

impl Products for DevicePruned<'_> {
    fn product(&mut self, l: &Linear, x: &[f32], n: usize) -> Result<Vec<f32>, ModelError> {
        let m = self
            .matrices
            .get(&l.name)
            .ok_or_else(|| ModelError::Missing {
                name: l.name.clone(),
            })?;
        let x16: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let xd = self.device.upload_batch(&x16, n)?;
        let mut y = self.device.zeros_batch(l.rows, n, Precision::F32)?;
        self.device.spmm(&m.device, &xd, &mut y)?;
        let got = self.device.download(&y)?.to_f32();
        let want = reference::spmm(m.stored.as_ref(), &x16, n)?;
        let got64: Vec<f64> = got.iter().map(|&g| f64::from(g)).collect();
        let quantization_error = match m.stored {
            AnyMatrix::Macko(_) => 0.0,
            _ => relative(
                &want.y,
                &reference::spmm(MatrixRef::Macko(&m.pruned), &x16, n)?.y,
            ),
        };
        self.checks.push(ProductCheck {
            name: l.name.clone(),
            tokens: n,
            relative_error: relative(&got64, &want.y),
            quantization_error,
        });
        Ok(got)
    }
}

/// ‖a − b‖ / ‖b‖ in f64 (0 over 0 stays 0).
fn relative(a: &[f64], b: &[f64]) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        diff += (x - y).powi(2);
        norm += y * y;
    }
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
}

/// The mean of the tokens' hidden states: the sentence embedding of all-MiniLM-L6-v2
/// (sentence-transformers then normalises it, which cosine similarity ignores).
pub fn mean_pool(h: &[f32]) -> Vec<f32> {
    let n = (h.len() / HIDDEN).max(1) as f32;
    let mut out = vec![0.0f32; HIDDEN];
    for t in h.chunks_exact(HIDDEN) {
        out.iter_mut().zip(t).for_each(|(o, v)| *o += v / n);
    }
    out
}

/// cos(a, b), in f64.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}
