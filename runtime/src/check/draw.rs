//! Drawing inputs: a deterministic xorshift generator seeded from the op's name.

use super::*;

/// xorshift64: small, deterministic, good enough for test inputs.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `[0, 1)`.
    pub(super) fn unit(&mut self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit
    }
}

/// Core's hash (FNV-1a) of the op's name: its inputs are the same on every run.
pub(super) fn seed_of(name: &str) -> u64 {
    burn_route_core::hash(name)
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub(super) fn draw(input: &Input, shape: &[usize], rng: &mut Rng) -> Host {
    let n: usize = shape.iter().product();
    let data = match (input.kind, input.value_range()) {
        (TensorKind::Float, Some((lo, hi))) => Data::Float(
            (0..n)
                .map(|_| (lo + (hi - lo) * rng.unit()) as f32)
                .collect(),
        ),
        (TensorKind::Int, Some((lo, hi))) => {
            let (lo, hi) = (lo.ceil() as i64, hi.ceil() as i64);
            let count = (hi - lo) as u64;
            Data::Int(
                (0..n)
                    .map(|_| lo + (rng.next_u64() % count) as i64)
                    .collect(),
            )
        }
        _ => Data::Bool((0..n).map(|_| rng.next_u64() >> 63 == 1).collect()),
    };
    Host {
        shape: shape.to_vec(),
        data,
    }
}
