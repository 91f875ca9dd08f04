//! The guide, as rustdoc chapters: versioned with the crate on docs.rs, readable offline with
//! `cargo doc`, and its examples run as doctests.
#![doc = include_str!("guide/index.md")]

pub mod using_the_ops {
    #![doc = include_str!("guide/using_the_ops.md")]
}

pub mod ops {
    #![doc = include_str!("guide/ops.md")]
}

pub mod walkthrough {
    #![doc = include_str!("guide/walkthrough.md")]
}

pub mod your_own_ops {
    #![doc = include_str!("guide/your_own_ops.md")]
}

pub mod migration {
    #![doc = include_str!("guide/migration.md")]
}

pub mod gpu {
    #![doc = include_str!("guide/gpu.md")]
}

pub mod remote {
    #![doc = include_str!("guide/remote.md")]
}

pub mod routing {
    #![doc = include_str!("guide/routing.md")]
}

pub mod manifest {
    #![doc = include_str!("guide/manifest.md")]
}

pub mod backward {
    #![doc = include_str!("guide/backward.md")]
}

pub mod builder {
    #![doc = include_str!("guide/builder.md")]
}

pub mod command_line {
    #![doc = include_str!("guide/command_line.md")]
}

pub mod errors {
    #![doc = include_str!("guide/errors.md")]
}

pub mod troubleshooting {
    #![doc = include_str!("guide/troubleshooting.md")]
}

pub mod benchmarks {
    #![doc = include_str!("guide/benchmarks.md")]
    #![doc = ""]
    #![doc = "**Repository defaults** (Flex without `rayon` or `simd`):"]
    #![doc = ""]
    #![doc = include_str!("guide/charts/repository-defaults-flex-without-rayon-or-simd.svg")]
    #![doc = ""]
    #![doc = "**Flex's default features** (`rayon` and `simd`, as a default `burn` dependency builds it):"]
    #![doc = ""]
    #![doc = include_str!("guide/charts/flexs-default-features-rayon-and-simd.svg")]
}
