//! The generated op check (`Builder::op_check` in `build.rs`): `leaky_relu`'s values on every
//! compiled backend (Flex, and Cube with `--features wgpu`), its gradient against finite
//! differences and its declared output shape and dtype.

include!(concat!(env!("OUT_DIR"), "/routed_check.rs"));
